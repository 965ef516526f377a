//! Hops that run where the tester cannot start or signal them (a cluster's pods on one
//! node), measured run after run all the same: both sides of a protocol of files in a
//! directory they share (memif's socket directory).
//!
//! A hop started with `--control-files PREFIX` runs again and again ([`serve_runs`]): it
//! creates its ready file once it forwards, ends a run when `PREFIX.stop` appears,
//! removes its ready file and `PREFIX.stop`, writes the run's JSON document to
//! `PREFIX.json` (renamed into place: never read half-written) and starts afresh on new
//! ports, as a restarted process would. The tester ([`RemoteHops`]) waits for the ready
//! files before it sends, and at a run's end stops the hops in chain order, each once
//! the one before has put everything it forwarded on its ring, reading each document as
//! the local runs read a hop process's output: the hops' drops explain the tester's loss
//! exactly as there.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sfclab_runtime::{ExternalOutcome, RunError, RunReport};

use crate::chain_file::Experiment;

/// How often a waiting side looks at the files (not the data path: a thread of its own).
const POLL: Duration = Duration::from_millis(5);

/// A hop's control files, by its prefix: `<prefix>.stop`, `<prefix>.json`.
fn with_suffix(prefix: &Path, suffix: &str) -> PathBuf {
    let mut name = prefix.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Runs `spec` (a hop: `ports: dut:` with `control_files`) run after run, each ended by
/// its stop file and reported through `document` (its JSON text) to its report file,
/// until the spec's own stop (SIGINT, SIGTERM) ends one: that run's report is returned.
pub fn serve_runs(spec: &Experiment, document: &mut dyn FnMut(&RunReport) -> String) -> Result<RunReport, RunError> {
    let setting = |reason: String| RunError::Setting {
        key: "control_files",
        reason,
    };
    let prefix = spec
        .control_files
        .clone()
        .ok_or_else(|| setting("no control files given".into()))?;
    let (stop_file, report_file) = (with_suffix(&prefix, ".stop"), with_suffix(&prefix, ".json"));
    let ended = spec.settings.stop.clone().unwrap_or_default();
    loop {
        let this_run = Arc::new(AtomicBool::new(false));
        let mut run = spec.clone();
        run.stop_on(&this_run);
        let done = Arc::new(AtomicBool::new(false));
        let watcher = {
            let (this_run, done, ended, stop_file) = (this_run.clone(), done.clone(), ended.clone(), stop_file.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    if ended.load(Ordering::Relaxed) || stop_file.exists() {
                        this_run.store(true, Ordering::Relaxed);
                        return;
                    }
                    std::thread::sleep(POLL);
                }
            })
        };
        let result = run.run();
        done.store(true, Ordering::Relaxed);
        let _ = watcher.join();
        let report = match result {
            Ok(r) => r,
            // A run whose counts do not balance is reported all the same: the tester
            // sees it in the document's conservation.
            Err(RunError::Conservation(r)) => *r,
            Err(e) => return Err(e),
        };
        // Not ready until the next run's ports are open; the stop asked is done.
        if let Some(ready) = &spec.ready_file {
            let _ = std::fs::remove_file(ready);
        }
        let _ = std::fs::remove_file(&stop_file);
        let written = with_suffix(&prefix, ".json.part");
        std::fs::write(&written, document(&report))
            .and_then(|()| std::fs::rename(&written, &report_file))
            .map_err(|e| setting(format!("{}: {e}", report_file.display())))?;
        if ended.load(Ordering::Relaxed) {
            return Ok(report);
        }
    }
}

/// One chain's hops running elsewhere, each serving runs through its control files in a
/// directory shared with the tester.
pub(crate) struct RemoteHops {
    /// Each hop's control prefix and ready file, in chain order.
    hops: Vec<(PathBuf, PathBuf)>,
    /// Each hop's document of the run just ended, once read.
    documents: Vec<Option<serde_json::Value>>,
}

impl RemoteHops {
    /// The `hops` hops of the chain `label` whose files are in `dir`, named as
    /// `sfclab deploy k8s` names them ([`control_prefix`], [`ready_file`]).
    pub(crate) fn new(dir: &Path, label: &str, hops: usize) -> RemoteHops {
        RemoteHops {
            hops: (0..hops)
                .map(|i| (dir.join(control_prefix(label, i)), dir.join(ready_file(label, i))))
                .collect(),
            documents: vec![None; hops],
        }
    }

    /// Waits until every hop says it forwards (a run of its own started), or fails
    /// naming the first that did not by `deadline`.
    pub(crate) fn wait_ready(&self, deadline: Instant) -> Result<(), String> {
        for (i, (prefix, ready)) in self.hops.iter().enumerate() {
            while !ready.exists() {
                if Instant::now() > deadline {
                    return Err(format!(
                        "hop {} ({}) is not ready: no {} (is its pod running, on this node?)",
                        i + 1,
                        prefix.display(),
                        ready.display()
                    ));
                }
                std::thread::sleep(POLL);
            }
        }
        Ok(())
    }

    /// Ends hop `index`'s run (from 0), without waiting.
    pub(crate) fn interrupt_hop(&mut self, index: usize) {
        let Some((prefix, _)) = self.hops.get(index) else {
            return;
        };
        // The last run's document is not this one's.
        let _ = std::fs::remove_file(with_suffix(prefix, ".json"));
        self.documents[index] = None;
        let _ = std::fs::write(with_suffix(prefix, ".stop"), b"");
    }

    /// Waits (until `deadline` at most) for hop `index`'s document of the run it ended.
    pub(crate) fn wait_exited(&mut self, index: usize, deadline: Instant) {
        let Some((prefix, _)) = self.hops.get(index) else {
            return;
        };
        let report = with_suffix(prefix, ".json");
        loop {
            if let Ok(text) = std::fs::read_to_string(&report) {
                self.documents[index] = Some(serde_json::from_str(&text).unwrap_or_else(
                    |e| serde_json::json!({ "error": format!("hop {}: {}: {e}", index + 1, report.display()) }),
                ));
                return;
            }
            if Instant::now() > deadline {
                return;
            }
            std::thread::sleep(POLL);
        }
    }

    /// Every hop's run ended (each asked in turn if not yet) and its document read: the
    /// chain's outcome, as a local chain's processes give it.
    pub(crate) fn stop_all(&mut self, deadline: Duration) -> ExternalOutcome {
        for i in 0..self.hops.len() {
            if self.documents[i].is_none() {
                self.interrupt_hop(i);
                self.wait_exited(i, Instant::now() + deadline);
            }
        }
        let documents = self
            .documents
            .iter_mut()
            .enumerate()
            .map(|(i, d)| {
                let doc = d.take().unwrap_or_else(|| {
                    serde_json::json!({
                        "error": format!("hop {} wrote no report of its run ({})", i + 1, self.hops[i].0.display())
                    })
                });
                (i, doc)
            })
            .collect();
        crate::hop_processes::outcome_of(documents)
    }
}

/// The memif socket of link `k` of chain `label` (link k from place k to place k+1:
/// the tester's sender, the hops, its receiver), in the directory its ends share.
pub fn link_socket(label: &str, k: usize) -> String {
    match label {
        "" => format!("link{k}.sock"),
        _ => format!("{label}-link{k}.sock"),
    }
}

/// Hop `i`'s (from 0) control prefix in chain `label` ([`serve_runs`]).
pub fn control_prefix(label: &str, i: usize) -> String {
    format!("{label}-hop{}", i + 1)
}

/// Hop `i`'s (from 0) ready file in chain `label`: present while a run of it forwards.
pub fn ready_file(label: &str, i: usize) -> String {
    format!("{label}-hop{}.ready", i + 1)
}
