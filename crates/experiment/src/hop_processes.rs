//! `chaining: veth` with `isolation: process`: every hop an sfclab process of its own,
//! started inside its namespace as `sfclab run --ports dut:d-in,d-out` with a chain file
//! of its NF (or the NFs a chain file grouped into the hop, seed 001's multi-feature
//! VNF), as an NF in a container would run. Each is stopped with SIGINT (it
//! keeps its result, marked interrupted) once the tester has finished, and its JSON
//! document becomes part of the wired run's report; its drops explain the tester's loss.

use sfclab_runtime::{DeviceUnderTest, ExternalOutcome, RunningDut};
use sfclab_topology::{Namespace, Testbed};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::chain_file::Experiment;
use sfclab_nf::NfSpec;

/// The hops of `experiment` as processes: a device under test for the wired runner.
pub fn device(experiment: &Experiment) -> Result<DeviceUnderTest, String> {
    let hops = experiment.hops.len();
    let plan = HopPlan::of(experiment)?;
    Ok(DeviceUnderTest::External {
        label: format!(
            "sfclab chain of {hops} hops, each an sfclab process in its own namespace joined by veth ({})",
            experiment.ports.interface_io().copied().unwrap_or_default().kind()
        ),
        hops,
        start: Box::new(move |bed: &Testbed| {
            let ends: Vec<(Namespace, String)> = bed
                .hops
                .iter()
                .map(|h| {
                    (
                        h.namespace.clone(),
                        format!("dut:{},{}", h.input.name(), h.output.name()),
                    )
                })
                .collect();
            plan.start(&ends).map(|p| Box::new(p) as Box<dyn RunningDut>)
        }),
    })
}

/// What every hop process of a chain is started with: the flags they share, each hop's
/// chain file and core. The local runs spawn it ([`HopPlan::spawn`]); `sfclab deploy k8s`
/// writes the same chain files and arguments ([`HopPlan::arguments`]) into its Pods, so
/// what runs on a cluster is what is tested here.
pub struct HopPlan {
    args: Vec<String>,
    chains: Vec<(String, serde_json::Value)>,
    cores: Vec<Option<usize>>,
    /// Cores every hop may run on, the OS choosing (a scenario's shared cores).
    shared_cores: Option<String>,
}

impl HopPlan {
    pub fn of(experiment: &Experiment) -> Result<HopPlan, String> {
        let chains: Vec<(String, serde_json::Value)> = experiment
            .hop_nfs()
            .into_iter()
            .map(|nfs| {
                let name = nfs.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join("+");
                let chain = nfs.iter().map(hop_entry).collect::<Result<Vec<_>, String>>()?;
                Ok((name.clone(), serde_json::json!({ "name": name, "chain": chain })))
            })
            .collect::<Result<_, String>>()?;
        Ok(HopPlan {
            args: shared_args(experiment),
            chains,
            cores: experiment.chaining.hop_cores().to_vec(),
            shared_cores: None,
        })
    }

    /// Every NF of `experiment` in one hop, joined by `wiring` (the chain file's own lines): a
    /// graph with branches, which hops in a line cannot split, runs whole in one process,
    /// as `sfclab run FILE --ports dut:IN,OUT` runs it.
    pub fn whole(experiment: &Experiment, wiring: serde_json::Value) -> Result<HopPlan, String> {
        let chain = experiment
            .nfs
            .iter()
            .map(hop_entry)
            .collect::<Result<Vec<_>, String>>()?;
        let mut file = serde_json::json!({ "name": experiment.name, "chain": chain });
        if !wiring.is_null() {
            file["wiring"] = wiring;
        }
        Ok(HopPlan {
            args: shared_args(experiment),
            chains: vec![(experiment.name.clone(), file)],
            cores: experiment.chaining.hop_cores().first().copied().into_iter().collect(),
            shared_cores: None,
        })
    }

    /// Every hop forwards both ways at once between its two ports (`--both-ways`).
    pub fn both_ways(mut self) -> HopPlan {
        self.args.push("--both-ways".into());
        self
    }

    /// Every hop's kernel interfaces opened as `kind` (a tunnel's end, for one).
    pub fn with_io(mut self, kind: sfclab_io::IoKind) -> HopPlan {
        if let Some(k) = self.args.iter().position(|a| a == "--io") {
            self.args[k + 1] = kind.to_string();
        }
        self
    }

    /// Every hop's AF_XDP sockets wait as `wait` says (sleeping when idle, to share a
    /// core with other hops).
    pub fn with_xdp_wait(mut self, wait: sfclab_io::Wait) -> HopPlan {
        if let Some(k) = self.args.iter().position(|a| a == "--xdp-wait") {
            self.args.drain(k..k + 2);
        }
        self.args
            .extend(["--xdp-wait".into(), crate::settings::ReceiveWait(wait).to_string()]);
        self
    }

    /// Every hop's sending port behind the capacity in `file`, shared by every hop.
    pub fn with_shared_capacity(mut self, file: &std::path::Path) -> HopPlan {
        self.args
            .extend(["--shared-capacity".into(), file.display().to_string()]);
        self
    }

    /// Every hop on `cores`, scheduled by the OS among them (not pinned one per core).
    pub fn on_cores(self, cores: &[usize]) -> HopPlan {
        let list = cores.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
        HopPlan {
            cores: Vec::new(),
            shared_cores: Some(list),
            ..self
        }
    }

    /// How many hops.
    pub fn hops(&self) -> usize {
        self.chains.len()
    }

    /// Hop `i`'s name (its NFs' names joined by `+`) and chain file (JSON).
    pub fn chain_file(&self, i: usize) -> (&str, &serde_json::Value) {
        let (name, chain) = &self.chains[i];
        (name, chain)
    }

    /// The arguments a hop runs with after the program: its chain file, its ports
    /// (`--ports`), until stopped (SIGINT or SIGTERM: it prints its JSON report then),
    /// saying it forwards by creating `ready`, and the flags every hop shares. The core
    /// is not among them: where it runs is the caller's (`--core`, a cgroup's cpuset).
    pub fn arguments(&self, chain_file: &str, ports: &str, ready: &str) -> Vec<String> {
        let mut args: Vec<String> = ["run", chain_file, "--ports", ports]
            .into_iter()
            .map(String::from)
            .collect();
        args.extend(["--duration", "1d", "--warmup", "0s", "--json", "--ready-file", ready].map(String::from));
        args.extend(self.args.iter().cloned());
        args
    }

    /// Starts hop i in namespace `ends[i].0` on the ports `ends[i].1` (`--ports`), each
    /// in turn, and waits until every one has opened its ports.
    pub(crate) fn start(&self, ends: &[(Namespace, String)]) -> Result<HopProcesses, String> {
        let mut started = HopProcesses(Vec::new());
        for (i, (namespace, ports)) in ends.iter().enumerate() {
            started.0.push(self.spawn(i, namespace, ports)?);
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for hop in &mut started.0 {
            hop.wait_ready(deadline)?;
        }
        Ok(started)
    }

    /// Starts hop `i` (its chain file, core and the shared flags) in `namespace` on
    /// `ports`; it says it forwards by creating its ready file.
    pub(crate) fn spawn(&self, i: usize, namespace: &Namespace, ports: &str) -> Result<HopProcess, String> {
        let (name, chain) = &self.chains[i];
        let dir = namespace.state_dir().map_err(|e| e.to_string())?;
        let file = dir.join("hop.json");
        std::fs::write(&file, chain.to_string()).map_err(|e| format!("{}: {e}", file.display()))?;
        let ready = dir.join("ready");
        let stderr = dir.join("stderr");
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", namespace.name()]);
        if let Some(list) = &self.shared_cores {
            // taskset execs the hop: its process id stays the hop's.
            cmd.args(["taskset", "--cpu-list", list]);
        }
        cmd.arg(hop_program()?)
            .args(self.arguments(&file.display().to_string(), ports, &ready.display().to_string()));
        if let Some(core) = self.cores.get(i).copied().flatten() {
            cmd.args(["--core", &core.to_string()]);
        }
        let err = std::fs::File::create(&stderr).map_err(|e| format!("{}: {e}", stderr.display()))?;
        // A group of its own: a terminal's Ctrl-C reaches this process only, which
        // stops the hops after the tester drained, in order.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(err)
            .spawn()
            .map_err(|e| format!("starting hop {} ({name}): {e}", i + 1))?;
        Ok(HopProcess {
            index: i,
            child,
            stderr,
            ready,
            interrupted: false,
        })
    }
}

/// The flags every hop process of `experiment` shares: its ports' kind and waits, its batch.
fn shared_args(experiment: &Experiment) -> Vec<String> {
    let mut args = experiment.ports.interface_io().copied().unwrap_or_default().flags();
    args.extend(["--batch".into(), experiment.settings.batch.to_string()]);
    if !experiment.settings.accounting {
        args.push("--no-accounting".into());
    }
    args
}

/// An NF as a hop's chain file names it: its settings with its name.
pub(crate) fn hop_entry((name, nf): &(String, NfSpec)) -> Result<serde_json::Value, String> {
    let mut entry = serde_json::to_value(nf).map_err(|e| e.to_string())?;
    if let Some(settings) = entry.as_object_mut().and_then(|m| m.values_mut().next()) {
        if settings.is_null() {
            *settings = serde_json::json!({});
        }
        if let Some(s) = settings.as_object_mut() {
            s.insert("name".into(), serde_json::Value::String(name.clone()));
        }
    }
    Ok(entry)
}

/// The sfclab program each hop runs: this one when it is sfclab, otherwise `sfclab` as
/// the shell finds it (a program of your own that calls the library starts sfclab's).
fn hop_program() -> Result<PathBuf, String> {
    let this = std::env::current_exe().map_err(|e| format!("finding this program to start the hops: {e}"))?;
    let is_sfclab = this.file_name().is_some_and(|n| n == "sfclab");
    Ok(if is_sfclab { this } else { PathBuf::from("sfclab") })
}

/// One started hop: its place in the chain, its process and where it writes.
pub(crate) struct HopProcess {
    index: usize,
    child: Child,
    stderr: PathBuf,
    ready: PathBuf,
    /// SIGINT was sent (a second would make it quit without its report).
    interrupted: bool,
}

impl HopProcess {
    /// Asks the hop to stop (SIGINT: it keeps its result and prints its report), once.
    fn interrupt(&mut self) {
        if std::mem::replace(&mut self.interrupted, true) {
            return;
        }
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGINT);
        }
    }
}

impl HopProcess {
    /// Waits until the hop says it forwards, or fails saying why it did not.
    fn wait_ready(&mut self, deadline: Instant) -> Result<(), String> {
        while !self.ready.exists() {
            if Instant::now() > deadline || matches!(self.child.try_wait(), Ok(Some(_))) {
                let why = std::fs::read_to_string(&self.stderr).unwrap_or_default();
                return Err(format!("hop {} did not start: {}", self.index + 1, why.trim()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }
}

/// Every hop process of a run; stopped (SIGINT, then SIGKILL) when the run is over.
pub(crate) struct HopProcesses(Vec<HopProcess>);

impl HopProcesses {
    pub(crate) fn new() -> HopProcesses {
        HopProcesses(Vec::new())
    }

    /// Keeps `hop` with the others; it need not be ready yet.
    pub(crate) fn add(&mut self, hop: HopProcess) {
        self.0.push(hop);
    }

    /// Waits until every hop says it forwards, or fails naming the first that did not.
    pub(crate) fn wait_ready(&mut self, deadline: Instant) -> Result<(), String> {
        self.0.iter_mut().try_for_each(|hop| hop.wait_ready(deadline))
    }

    /// Asks hop `index` (from 0) to stop, without waiting.
    pub(crate) fn interrupt_hop(&mut self, index: usize) {
        self.0
            .iter_mut()
            .filter(|h| h.index == index)
            .for_each(HopProcess::interrupt);
    }

    /// Waits (until `deadline` at most) for hop `index` to exit; its report is collected
    /// by [`HopProcesses::stop_all`].
    pub(crate) fn wait_exited(&mut self, index: usize, deadline: Instant) {
        for hop in self.0.iter_mut().filter(|h| h.index == index) {
            while Instant::now() < deadline && matches!(hop.child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }

    /// Each hop's place in its chain (from 0) and process id.
    pub(crate) fn pids(&self) -> Vec<(usize, u32)> {
        self.0.iter().map(|h| (h.index, h.child.id())).collect()
    }
}

impl RunningDut for HopProcesses {
    fn stop(mut self: Box<Self>) -> ExternalOutcome {
        self.stop_all()
    }
}

impl HopProcesses {
    /// Stops every hop (SIGINT: each keeps its result) and collects their documents.
    pub(crate) fn stop_all(&mut self) -> ExternalOutcome {
        let mut documents = Vec::with_capacity(self.0.len());
        self.0.sort_by_key(|h| h.index);
        for hop in self.0.iter_mut() {
            let i = hop.index;
            hop.interrupt();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline && matches!(hop.child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = hop.child.kill();
            let mut text = String::new();
            if let Some(mut stdout) = hop.child.stdout.take() {
                let _ = std::io::Read::read_to_string(&mut stdout, &mut text);
            }
            let _ = hop.child.wait();
            let doc: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|_| {
                serde_json::json!({
                    "error": format!("hop {} left no report: {}", i + 1,
                        std::fs::read_to_string(&hop.stderr).unwrap_or_default().trim())
                })
            });
            documents.push((i, doc));
        }
        self.0.clear();
        outcome_of(documents)
    }
}

/// A chain's outcome from its hops' documents, each with its place (from 0), in chain
/// order: their drops (which explain the tester's loss) and their sockets' kernel drops.
pub(crate) fn outcome_of(documents: Vec<(usize, serde_json::Value)>) -> ExternalOutcome {
    let mut out = ExternalOutcome::default();
    for (i, doc) in documents {
        out.dropped += doc["conservation"]["dropped"].as_u64().unwrap_or(0);
        let counters = &doc["places"][0]["counters"];
        let kernel = sfclab_runtime::KERNEL_RECEIVE_DROPS
            .iter()
            .filter_map(|c| counters[*c].as_u64())
            .sum();
        out.socket_drops.push((i, kernel));
        out.documents.push(doc);
    }
    out
}

impl Drop for HopProcesses {
    /// Stopping failed or never came (an error while starting): no hop outlives the run.
    fn drop(&mut self) {
        for hop in &mut self.0 {
            let _ = hop.child.kill();
            let _ = hop.child.wait();
        }
    }
}
