//! Hops that run where the tester cannot start or signal them (a cluster's pods),
//! measured run after run all the same: both sides of a small control protocol, over
//! files in a directory they share (pods of one node: memif's socket directory) or over
//! TCP (pods of several nodes).
//!
//! A hop started with `--control-files PREFIX` or `--control-port PORT` runs again and
//! again ([`serve_runs`]): it says it forwards once its ports are open (its ready file;
//! over TCP it answers `ready` with `yes` then), ends a run when asked (`PREFIX.stop`
//! appears; a `stop` line arrives), removes its ready file, reports the run's JSON
//! document (to `PREFIX.json`, written then renamed so never read half-written; back on
//! the connection that asked) and starts afresh on new ports, as a restarted process
//! would. The tester ([`RemoteHops`]) waits until every hop forwards before it sends,
//! and at a run's end stops the hops in chain order, each once the one before has put
//! everything it forwarded on its ring, reading each document as the local runs read a
//! hop process's output: the hops' drops explain the tester's loss exactly as there.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sfclab_runtime::{ExternalOutcome, RunError, RunReport, Stop};

use crate::chain_file::Experiment;
use crate::ports::ControlledBy;

/// How often a waiting side looks again (not the data path: a thread of its own).
const POLL: Duration = Duration::from_millis(5);
/// How long one exchange over TCP may take before the asking side gives up on it.
const EXCHANGE_LIMIT: Duration = Duration::from_secs(2);

/// A hop's control files, by its prefix: `<prefix>.stop`, `<prefix>.json`.
fn with_suffix(prefix: &Path, suffix: &str) -> PathBuf {
    let mut name = prefix.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// How a hop serving runs is told to end one and gives its report.
enum Served {
    Files { stop: PathBuf, report: PathBuf },
    Tcp(TcpListener),
}

/// What ended a served run: the tester's stop (over TCP, the connection to report on),
/// or the process's own (SIGINT, SIGTERM).
enum Ending {
    Asked(Option<TcpStream>),
    Ended,
}

/// Runs `experiment` (a hop: `ports: dut:` with `control_files` or `control_port`) run after
/// run, each ended when the tester asks and reported through `document` (its JSON
/// text), until the experiment's own stop (SIGINT, SIGTERM) ends one: that run's report is
/// returned.
pub fn serve_runs(
    experiment: &Experiment,
    document: &mut dyn FnMut(&RunReport) -> String,
) -> Result<RunReport, RunError> {
    let hop = experiment.ports.served_hop().cloned().unwrap_or_default();
    let served = match &hop.control {
        Some(ControlledBy::Files(prefix)) => Served::Files {
            stop: with_suffix(prefix, ".stop"),
            report: with_suffix(prefix, ".json"),
        },
        Some(ControlledBy::Port(port)) => {
            let port = *port;
            let listener = TcpListener::bind(("::", port))
                .or_else(|_| TcpListener::bind(("0.0.0.0", port)))
                .map_err(|e| RunError::failed("control_port", format!("listening on port {port}: {e}")))?;
            listener
                .set_nonblocking(true)
                .map_err(|e| RunError::failed("control_port", e))?;
            Served::Tcp(listener)
        }
        None => {
            return Err(RunError::setting(
                "control_files",
                "give control files or a control port, one of them",
            ));
        }
    };
    let ended = experiment.settings.stop.clone().unwrap_or_default();
    let ready_file = hop.ready_file.clone();
    // What a hop of an earlier deployment left in a directory that outlives it (a node's,
    // killed before it could tidy up) says nothing about this one.
    let mut stale: Vec<&Path> = ready_file.as_deref().into_iter().collect();
    if let Served::Files { stop, report } = &served {
        stale.extend([stop.as_path(), report.as_path()]);
    }
    for file in stale {
        let _ = std::fs::remove_file(file);
    }
    let (served_ref, ready_ref, ended_ref) = (&served, ready_file.as_deref(), &ended);
    std::thread::scope(|scope| {
        loop {
            let this_run = Stop::new();
            let mut run = experiment.clone();
            run.stop_on(&this_run);
            let done = Arc::new(AtomicBool::new(false));
            let watcher = {
                let (done, this_run) = (done.clone(), this_run.clone());
                scope.spawn(move || watch(served_ref, ready_ref, ended_ref, &done, &this_run))
            };
            let result = run.run().map(crate::Reports::into_measured);
            done.store(true, Ordering::Relaxed);
            let ending = watcher.join().unwrap_or(Ending::Ended);
            let report = match result {
                Ok(r) => r,
                // A run whose counts do not balance is reported all the same: the tester
                // sees it in the document's conservation.
                Err(RunError::Conservation(r)) => *r,
                Err(e) => return Err(e),
            };
            // Not ready until the next run's ports are open.
            if let Some(ready) = &ready_file {
                let _ = std::fs::remove_file(ready);
            }
            let text = document(&report);
            match &served {
                Served::Files { stop, report } => {
                    let _ = std::fs::remove_file(stop);
                    let written = with_suffix(report, ".part");
                    std::fs::write(&written, &text)
                        .and_then(|()| std::fs::rename(&written, report))
                        .map_err(|e| RunError::failed("control_files", format!("{}: {e}", report.display())))?;
                }
                Served::Tcp(_) => {
                    if let Ending::Asked(Some(mut tester)) = ending {
                        // A tester that went away loses this report, not the hop its next run.
                        let _ = tester.write_all(text.as_bytes());
                    }
                }
            }
            if ended.requested() {
                return Ok(report);
            }
        }
    })
}

/// Watches for the end of one served run, answering readiness questions meanwhile:
/// sets `this_run` when the tester asks or `ended` is set; returns early once `done`
/// (the run ended on its own, an error).
fn watch(served: &Served, ready_file: Option<&Path>, ended: &Stop, done: &AtomicBool, this_run: &Stop) -> Ending {
    while !done.load(Ordering::Relaxed) {
        if ended.requested() {
            this_run.request();
            return Ending::Ended;
        }
        match served {
            Served::Files { stop, .. } => {
                if stop.exists() {
                    this_run.request();
                    return Ending::Asked(None);
                }
            }
            Served::Tcp(listener) => {
                if let Ok((stream, _)) = listener.accept()
                    && let Some(stream) = answer(stream, ready_file)
                {
                    this_run.request();
                    return Ending::Asked(Some(stream));
                }
            }
        }
        std::thread::sleep(POLL);
    }
    Ending::Ended
}

/// Answers one question on `stream`: `ready` (whether this run forwards: its ready file
/// exists), or `stop` (the stream returned, to report on once the run has ended).
fn answer(stream: TcpStream, ready_file: Option<&Path>) -> Option<TcpStream> {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(EXCHANGE_LIMIT));
    let mut line = String::new();
    BufReader::new(&stream).read_line(&mut line).ok()?;
    let mut reply = &stream;
    match line.trim() {
        "stop" => Some(stream),
        "ready" => {
            let ready = ready_file.is_none_or(Path::exists);
            let _ = reply.write_all(if ready { b"yes\n" } else { b"no\n" });
            None
        }
        other => {
            let _ = writeln!(reply, "error: `{other}` is not a question (ready, stop)");
            None
        }
    }
}

/// Where a scenario's VNFs started elsewhere are
/// ([`crate::scenario::Scenario::attach`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attachment {
    /// The memif sockets of the VNFs on the tester's host (a node's directory).
    pub memif: PathBuf,
    /// How the VNFs are told to end a run and give its report.
    pub control: HopControl,
}

/// Where the tester reaches a chain's hops that run elsewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HopControl {
    /// Their control files and ready files in this directory (pods of the tester's node).
    Files(PathBuf),
    /// Their control ports, at this address with `{hop}` standing for each hop's name
    /// ([`hop_name`]): `{hop}.vnfs:7000` (a headless Service's names).
    Tcp(String),
}

/// How the tester reaches one hop.
enum HopEnd {
    Files { prefix: PathBuf, ready: PathBuf },
    Tcp { address: String },
}

/// One chain's hops running elsewhere, each serving runs ([`serve_runs`]).
pub(crate) struct RemoteHops {
    hops: Vec<HopEnd>,
    /// Each hop's stop asked over TCP, its report to come on the connection.
    asked: Vec<Option<TcpStream>>,
    /// Each hop's document of the run just ended, once read.
    documents: Vec<Option<serde_json::Value>>,
}

impl RemoteHops {
    /// The `hops` hops of the chain `label`, reached as `control` says.
    pub(crate) fn new(control: &HopControl, label: &str, hops: usize) -> RemoteHops {
        RemoteHops {
            hops: (0..hops)
                .map(|i| match control {
                    HopControl::Files(dir) => HopEnd::Files {
                        prefix: dir.join(control_prefix(label, i)),
                        ready: dir.join(ready_file(label, i)),
                    },
                    HopControl::Tcp(template) => HopEnd::Tcp {
                        address: template.replace("{hop}", &hop_name(label, i)),
                    },
                })
                .collect(),
            asked: (0..hops).map(|_| None).collect(),
            documents: vec![None; hops],
        }
    }

    /// Waits until every hop says it forwards (a run of its own started), or fails
    /// naming the first that did not by `deadline`.
    pub(crate) fn wait_ready(&self, deadline: Instant) -> Result<(), String> {
        for (i, hop) in self.hops.iter().enumerate() {
            loop {
                let (ready, last) = match hop {
                    HopEnd::Files { ready, .. } => (ready.exists(), format!("no {}", ready.display())),
                    HopEnd::Tcp { address } => match ask(address, "ready") {
                        Ok(reply) => (reply.trim() == "yes", format!("{address} says `{}`", reply.trim())),
                        Err(e) => (false, format!("{address}: {e}")),
                    },
                };
                if ready {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(format!(
                        "hop {} is not ready: {last} (is its pod running and reachable?)",
                        i + 1
                    ));
                }
                std::thread::sleep(POLL.max(Duration::from_millis(20)));
            }
        }
        Ok(())
    }

    /// Ends hop `index`'s run (from 0), without waiting.
    pub(crate) fn interrupt_hop(&mut self, index: usize) {
        let Some(hop) = self.hops.get(index) else { return };
        self.documents[index] = None;
        match hop {
            HopEnd::Files { prefix, .. } => {
                // The last run's document is not this one's.
                let _ = std::fs::remove_file(with_suffix(prefix, ".json"));
                let _ = std::fs::write(with_suffix(prefix, ".stop"), b"");
            }
            HopEnd::Tcp { address } => match connect(address).and_then(|mut s| {
                s.write_all(b"stop\n")?;
                Ok(s)
            }) {
                Ok(stream) => self.asked[index] = Some(stream),
                Err(e) => {
                    self.documents[index] = Some(serde_json::json!({
                        "error": format!("hop {}: asking {address} to stop: {e}", index + 1)
                    }));
                }
            },
        }
    }

    /// Waits (until `deadline` at most) for hop `index`'s document of the run it ended.
    pub(crate) fn wait_exited(&mut self, index: usize, deadline: Instant) {
        let Some(hop) = self.hops.get(index) else { return };
        if self.documents[index].is_some() {
            return;
        }
        let (text, from) = match hop {
            HopEnd::Files { prefix, .. } => {
                let report = with_suffix(prefix, ".json");
                let text = loop {
                    if let Ok(text) = std::fs::read_to_string(&report) {
                        break Ok(text);
                    }
                    if Instant::now() > deadline {
                        break Err("no report by the deadline".to_string());
                    }
                    std::thread::sleep(POLL);
                };
                (text, report.display().to_string())
            }
            HopEnd::Tcp { address } => {
                let Some(mut stream) = self.asked[index].take() else {
                    return;
                };
                let wait = deadline.saturating_duration_since(Instant::now()).max(POLL);
                let mut text = String::new();
                let read = stream
                    .set_read_timeout(Some(wait))
                    .and_then(|()| stream.read_to_string(&mut text));
                (read.map(|_| text).map_err(|e| e.to_string()), address.clone())
            }
        };
        self.documents[index] = Some(
            text.and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
                .unwrap_or_else(|e| serde_json::json!({ "error": format!("hop {}: {from}: {e}", index + 1) })),
        );
    }

    /// Every hop's run ended (each asked in turn if not yet) and its document read: the
    /// chain's outcome, as a local chain's processes give it.
    pub(crate) fn stop_all(&mut self, deadline: Duration) -> ExternalOutcome {
        for i in 0..self.hops.len() {
            if self.documents[i].is_none() {
                if self.asked[i].is_none() {
                    self.interrupt_hop(i);
                }
                self.wait_exited(i, Instant::now() + deadline);
            }
        }
        let documents = self
            .documents
            .iter_mut()
            .enumerate()
            .map(|(i, d)| {
                let doc = d.take().unwrap_or_else(
                    || serde_json::json!({ "error": format!("hop {} gave no report of its run", i + 1) }),
                );
                (i, doc)
            })
            .collect();
        crate::hop_processes::outcome_of(documents)
    }
}

/// A connection to a hop's control port.
fn connect(address: &str) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "the name has no address");
    for a in address.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, EXCHANGE_LIMIT) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// Asks a hop's control port `question`; its one-line answer.
fn ask(address: &str, question: &str) -> std::io::Result<String> {
    let mut stream = connect(address)?;
    stream.set_read_timeout(Some(EXCHANGE_LIMIT))?;
    writeln!(stream, "{question}")?;
    let mut reply = String::new();
    BufReader::new(stream).read_line(&mut reply)?;
    Ok(reply)
}

/// Hop `i`'s (from 0) name in chain `label`: its Pod's (`c1-hop-2`; `hop-2` alone).
pub fn hop_name(label: &str, i: usize) -> String {
    match label {
        "" => format!("hop-{}", i + 1),
        _ => format!("{label}-hop-{}", i + 1),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// One exchange with `answer` on loopback: what the hop says to `question`.
    fn exchange(question: &str, ready: Option<&Path>) -> (String, bool) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let (said, kept) = std::thread::scope(|s| {
            let hop = s.spawn(|| answer(listener.accept().unwrap().0, ready).is_some());
            let said = ask(&address, question).unwrap_or_default();
            (said, hop.join().unwrap())
        });
        (said, kept)
    }

    #[test]
    fn a_hop_says_it_is_ready_only_once_its_ready_file_exists() {
        let dir = tempfile::tempdir().unwrap();
        let ready = dir.path().join("ready");
        assert_eq!(exchange("ready", Some(&ready)), ("no\n".into(), false));
        std::fs::write(&ready, b"").unwrap();
        assert_eq!(exchange("ready", Some(&ready)), ("yes\n".into(), false));
        let (said, kept) = exchange("restart", Some(&ready));
        assert!(said.starts_with("error: `restart` is not a question"), "{said}");
        assert!(!kept);
    }

    #[test]
    fn a_stop_keeps_the_connection_for_the_report() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let mut hops = RemoteHops::new(&HopControl::Tcp(address), "c1", 1);
        std::thread::scope(|s| {
            let hop = s.spawn(|| {
                let mut stream = answer(listener.accept().unwrap().0, None).expect("a stop");
                stream.write_all(br#"{"conservation": {"dropped": 7}}"#).unwrap();
            });
            hops.interrupt_hop(0);
            hop.join().unwrap();
        });
        let outcome = hops.stop_all(Duration::from_secs(2));
        assert_eq!(outcome.dropped, 7, "the hop's report read from the connection");
    }

    #[test]
    fn a_hop_that_cannot_be_reached_is_named_in_its_document() {
        // Nothing listens on a port just released.
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut hops = RemoteHops::new(&HopControl::Tcp(format!("127.0.0.1:{port}")), "c1", 1);
        let outcome = hops.stop_all(Duration::from_millis(100));
        let error = outcome.documents[0]["error"].as_str().unwrap();
        assert!(
            error.starts_with(&format!("hop 1: asking 127.0.0.1:{port} to stop")),
            "{error}"
        );
        let e = hops.wait_ready(Instant::now()).unwrap_err();
        assert!(e.starts_with("hop 1 is not ready: 127.0.0.1"), "{e}");
    }

    #[test]
    fn names_follow_the_deployments_pods() {
        assert_eq!(hop_name("c2", 0), "c2-hop-1");
        assert_eq!(hop_name("", 1), "hop-2");
        assert_eq!(link_socket("", 3), "link3.sock");
        assert_eq!(link_socket("s1", 0), "s1-link0.sock");
        let hops = RemoteHops::new(&HopControl::Tcp("{hop}.vnfs:7000".into()), "c3", 2);
        assert!(matches!(&hops.hops[1], HopEnd::Tcp { address } if address == "c3-hop-2.vnfs:7000"));
    }
}
