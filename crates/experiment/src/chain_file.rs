//! Chain files and the `--chain` shorthand, resolved into what the runtime needs.
//!
//! A chain file (YAML) has three sections, all optional but `chain`:
//!
//! ```yaml
//! traffic: { size: imix, flows: 1024, ip: v4, rate: max, latency_probe_pps: 10000 }
//! run:     { duration: 5s, warmup: 500ms, batch: 32, core: 1, accounting: true }
//! chain:
//!   - forwarder: { dst_mac: "02:00:00:00:00:02" }
//!   - synthetic: { cycles: 100, working_set: 64KiB, accesses: 4 }
//!   - noop
//! ```
//!
//! The keys of `traffic:` and `run:` are the flags of `sfclab run` ([`crate::settings`]).
//! Errors name the file and line (any YAML style), the place (`traffic`, `run`, or
//! `chain[i] (kind)`), the key and why; an error in a value the command line gave names
//! the flag. Unknown keys are errors, never ignored.

use crate::chaining::Chaining;
use crate::located::{Located, Step, steps_of_text};
use crate::ports::{ControlledBy, InterfaceIo, Ports, ServedHop};
use crate::settings::{
    ChainingSetting, Isolation, MergedSettings, PortsSetting, RunSection, Runtime, Settings, flag_of, plain,
};
use serde_json::{Map, Value};
use sfclab_nf::{NfSpec, SpecError};
use sfclab_runtime::{ChainGraph, LinkMode, Next, PipelineSettings, Placement, RunSettings};
use sfclab_traffic::{Destinations, FrameSizes, GeneratorConfig, Rate};
use std::time::Duration;

/// The chain run when no file and no `--chain` is given.
pub const DEFAULT_CHAIN: &str = include_str!("../../../examples/chains/default.yaml");

/// What a bad config is: where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChainFileError {
    pub file: String,
    /// The line of the file the place and key are on, when it can be found.
    pub line: Option<usize>,
    /// `traffic`, `run`, `chain[2] (synthetic)`, or empty for the file as a whole.
    pub place: String,
    pub key: String,
    pub reason: String,
}

impl std::fmt::Display for ChainFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if !self.place.is_empty() {
            write!(f, ": {}", self.place)?;
        }
        if !self.key.is_empty() {
            write!(f, ": key `{}`", self.key)?;
        }
        write!(f, ": {}", self.reason)
    }
}

impl std::error::Error for ChainFileError {}

/// A chain ready to run.
#[derive(Debug, Clone)]
pub struct Experiment {
    pub name: String,
    pub traffic: GeneratorConfig,
    /// The NFs, named, in order ([`Experiment::nfs`]). Private with `hops` and `wiring`,
    /// which hold one entry per NF: only the chain file's resolution builds them.
    pub(crate) nfs: Vec<(String, NfSpec)>,
    /// How many of `nfs`, in order, each hop holds (a chain file's entry that lists NFs
    /// is one hop of several): where the chaining puts hops in namespaces or processes
    /// of their own; one NF a hop unless grouped. Runtimes in one process run them all
    /// as one chain. They add up to `nfs.len()`.
    pub(crate) hops: Vec<usize>,
    /// Where each NF's outputs lead, when the chain file wires them (`wiring:`), one
    /// entry per NF; `None` is the linear chain.
    pub(crate) wiring: Option<Vec<Vec<Next>>>,
    pub settings: RunSettings,
    /// Copies of the chain run side by side ([`Experiment::replicas`]); more than one only
    /// where the resolution allows them (a pipeline in memory, queues of a testbed).
    pub(crate) replicas: usize,
    /// Real I/O instead of the generator and the in-memory sink.
    pub io: FileIo,
    /// Where the traffic flows, with the settings of that kind of ports.
    pub(crate) ports: Ports,
    /// How the NFs are joined, with the settings of that chaining.
    pub(crate) chaining: Chaining,
    /// The file gives `hosts:`: its chain spans emulated hosts, as a scenario of one
    /// chain runs it (`sfclab scenario FILE`), not `sfclab run`.
    pub spans_hosts: bool,
    /// Runs naming this file take turns with each other ([`crate::turns`]).
    pub take_turns: Option<std::path::PathBuf>,
}

/// Where an experiment's chain comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainSource {
    /// A chain file (YAML).
    File(std::path::PathBuf),
    /// The `--chain` shorthand: `forwarder*4`, `forwarder -> synthetic(cycles=100)`.
    Shorthand(String),
    /// The embedded default chain (examples/chains/default.yaml).
    Default,
    /// A chain file's text held in memory; `origin` names it in errors, and relative
    /// paths in it are read beside `origin` when that is a file.
    Text { text: String, origin: String },
}

impl Experiment {
    /// Resolves the chain `source` with `overrides` (a command line's flags: each wins
    /// over the file's key of the same name) into an experiment, checked as a whole.
    pub fn load(source: &ChainSource, overrides: &Settings) -> Result<Experiment, ChainFileError> {
        match source {
            ChainSource::File(path) => load(&path.display().to_string(), overrides),
            ChainSource::Shorthand(chain) => from_shorthand(chain, overrides),
            ChainSource::Default => parse(DEFAULT_CHAIN, "examples/chains/default.yaml (embedded)", overrides),
            ChainSource::Text { text, origin } => parse(text, origin, overrides),
        }
    }
}

/// Files a chain reads its traffic from or writes what leaves it to.
#[derive(Debug, Clone, Default)]
pub struct FileIo {
    /// A capture to replay.
    pub replay: Option<Replay>,
    /// A pcap file the chain's output is written to.
    pub capture: Option<std::path::PathBuf>,
    /// NFs (by name) whose output is also written to a pcap file.
    pub taps: Vec<(String, std::path::PathBuf)>,
}

/// A capture replayed as the chain's traffic.
#[derive(Debug, Clone)]
pub struct Replay {
    pub file: std::path::PathBuf,
    /// Passes over the file (`None`: until the window ends).
    pub loops: Option<u64>,
    /// At the file's timestamps; otherwise at the traffic's `rate`.
    pub at_file_timestamps: bool,
}

impl Experiment {
    /// Each hop's NFs, in order.
    pub fn hop_nfs(&self) -> Vec<&[(String, NfSpec)]> {
        let mut at = 0;
        self.hops
            .iter()
            .map(|&n| {
                at += n;
                &self.nfs[at - n..at]
            })
            .collect()
    }

    /// The chain's NFs, built (each config was validated when the chain was read), the
    /// tapped ones wrapped in their tap (whose file is created here).
    pub fn build_nfs(&self) -> Result<sfclab_core::NamedNfs, sfclab_runtime::RunError> {
        self.nfs
            .iter()
            .map(|(name, spec)| {
                let nf = spec.build();
                match self.io.taps.iter().find(|(tapped, _)| tapped == name) {
                    None => Ok((name.clone(), nf)),
                    Some((_, file)) => sfclab_io::PcapTap::wrap(nf, file, sfclab_core::tsc::hz())
                        .map(|tap| (name.clone(), Box::new(tap) as Box<dyn sfclab_core::NetworkFunction>))
                        .map_err(|reason| sfclab_runtime::RunError::setting("tap", reason)),
                }
            })
            .collect()
    }

    /// The chain's NFs, built, with their wiring.
    pub fn graph(&self) -> Result<ChainGraph, sfclab_runtime::RunError> {
        Ok(ChainGraph {
            nfs: self.build_nfs()?,
            wiring: self.wiring.clone(),
        })
    }

    /// Where the traffic flows, with the settings of that kind of ports. Private with
    /// `chaining`: which ports a chaining runs on is checked when the chain is resolved.
    pub fn ports(&self) -> &Ports {
        &self.ports
    }

    /// How the NFs are joined, with the settings of that chaining.
    pub fn chaining(&self) -> &Chaining {
        &self.chaining
    }

    /// The NFs, named, in order.
    pub fn nfs(&self) -> &[(String, NfSpec)] {
        &self.nfs
    }

    /// How many NFs, in order, each hop holds (they add up to every NF).
    pub fn hops(&self) -> &[usize] {
        &self.hops
    }

    /// Where each NF's outputs lead when the chain file wires them; `None`: in a line.
    pub fn wiring(&self) -> Option<&[Vec<Next>]> {
        self.wiring.as_deref()
    }

    /// The pipeline runtime's settings, when the chain runs as a pipeline across cores.
    pub fn pipeline(&self) -> Option<&PipelineSettings> {
        self.chaining.pipeline()
    }

    /// Copies of the chain run side by side, flows spread by hash: a pipeline's replicas
    /// in memory, or one compound run per queue between a testbed's interfaces.
    pub fn replicas(&self) -> usize {
        self.replicas
    }

    /// Every run setting the experiment runs with: the compound one, and the pipeline's if set.
    pub fn run_settings_mut(&mut self) -> impl Iterator<Item = &mut RunSettings> {
        let pipeline = match &mut self.chaining {
            Chaining::Pipeline { settings, .. } => Some(&mut settings.run),
            _ => None,
        };
        std::iter::once(&mut self.settings).chain(pipeline)
    }

    /// Ends the experiment's runs early when `stop` is set (Ctrl-C).
    pub fn stop_on(&mut self, stop: &sfclab_runtime::Stop) {
        for s in self.run_settings_mut() {
            s.stop = Some(stop.clone());
        }
    }

    /// The experiment as one measurement: `rate` for a window of `duration` (no count), latency
    /// probes at `probe_pps`, per-NF accounting off (it would cost the chain cycles).
    pub fn as_trial(&self, rate: Rate, probe_pps: f64, duration: Duration) -> Experiment {
        let mut experiment = self.clone();
        experiment.traffic.rate = rate;
        experiment.traffic.probe_pps = probe_pps;
        for s in experiment.run_settings_mut() {
            s.duration = Some(duration);
            s.count = None;
            s.accounting = false;
        }
        experiment
    }
}

/// The top-level keys of a chain file.
const FILE_KEYS: [&str; 8] = [
    "name",
    "description",
    "traffic",
    "profiles",
    "run",
    "chain",
    "wiring",
    "hosts",
];

/// A chain file's parts, before the settings are merged with the flags.
struct ChainFile {
    name: Option<String>,
    traffic: Map<String, Value>,
    /// `profiles:`: the file's own named traffic, each a map of traffic keys.
    profiles: Map<String, Value>,
    run: Map<String, Value>,
    /// `chain:`; none in a tester's file (`--ports tester:`: traffic, no chain).
    chain: Option<Vec<Value>>,
    /// `wiring:` entries, `nf.output -> nf` or `-> egress`.
    wiring: Vec<Value>,
    /// `hosts:` is given: the chain spans emulated hosts, which a scenario runs
    /// (`sfclab scenario FILE` reads the key).
    hosts: bool,
}

/// Where errors point: the file (or flag) and, for a file, its lines.
struct Ctx<'a> {
    file: &'a str,
    tree: Option<&'a Located>,
    /// Which settings the command line gave (empty until the merge).
    layers: Option<&'a MergedSettings>,
    /// Where each NF of the resolved chain is written (empty until it is resolved).
    places: Option<&'a [Place]>,
}

/// Where an NF is written in `chain:`: `chain[2]`, or `chain[1][0]` inside a hop's list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Place {
    entry: usize,
    inner: Option<usize>,
}

impl Place {
    fn steps(self) -> Vec<Step> {
        let mut at = vec![Step::key("chain"), Step::Index(self.entry)];
        at.extend(self.inner.map(Step::Index));
        at
    }
}

impl std::fmt::Display for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "chain[{}]", self.entry)?;
        match self.inner {
            Some(k) => write!(f, "[{k}]"),
            None => Ok(()),
        }
    }
}

impl Ctx<'_> {
    fn at(&self, path: &[Step], place: &str, key: &str, reason: impl Into<String>) -> ChainFileError {
        ChainFileError {
            file: self.file.to_string(),
            line: self.tree.map(|t| t.line_at(path)),
            place: place.to_string(),
            key: key.to_string(),
            reason: reason.into(),
        }
    }

    /// The directory of the chain file, absolute (a hop process reads its chain file
    /// from elsewhere), when the chain came from one (not `--chain` or the embedded
    /// default).
    fn directory(&self) -> Option<std::path::PathBuf> {
        self.tree?;
        let path = std::path::Path::new(self.file);
        let path = std::path::absolute(path).ok().filter(|p| p.exists())?;
        path.parent().map(std::path::Path::to_path_buf)
    }

    /// An error in the whole file (not valid YAML, not a mapping).
    fn whole(&self, reason: impl Into<String>) -> ChainFileError {
        ChainFileError {
            line: None,
            ..self.at(&[], "", "", reason)
        }
    }

    /// An error in a setting (`section` is `traffic` or `run`): the flag's, when the
    /// command line gave it.
    fn setting(&self, section: &str, key: &str, reason: impl Into<String>) -> ChainFileError {
        if self.layers.is_some_and(|l| l.given_by_flag(key)) {
            return flag_error(key, reason);
        }
        self.at(&[Step::key(section), Step::key(key)], section, key, reason)
    }

    /// An error in the chain's NF `index` (in chain order), at `path` inside its settings.
    fn nf(&self, index: usize, kind: &str, path: &[Step], reason: impl Into<String>) -> ChainFileError {
        let place = self.places.and_then(|p| p.get(index).copied()).unwrap_or(Place {
            entry: index,
            inner: None,
        });
        self.nf_at(place, kind, path, reason)
    }

    /// An error in the NF written at `place`, at `path` inside its settings.
    fn nf_at(&self, place: Place, kind: &str, path: &[Step], reason: impl Into<String>) -> ChainFileError {
        let mut at = place.steps();
        at.extend_from_slice(path);
        let key = path
            .iter()
            .skip(1)
            .map(|s| match s {
                Step::Key(k) => k.clone(),
                Step::Index(i) => format!("[{i}]"),
            })
            .collect::<Vec<_>>()
            .join(".")
            .replace(".[", "[");
        let place = if kind.is_empty() {
            place.to_string()
        } else {
            format!("{place} ({kind})")
        };
        self.at(&at, &place, &key, reason)
    }
}

/// Reads and resolves a chain file.
pub fn load(path: &str, flags: &Settings) -> Result<Experiment, ChainFileError> {
    let text = std::fs::read_to_string(path).map_err(|e| ChainFileError {
        file: path.to_string(),
        line: None,
        place: String::new(),
        key: String::new(),
        reason: format!("cannot read: {e}"),
    })?;
    parse(&text, path, flags)
}

/// Parses and resolves chain-file text; `origin` names it in errors.
pub fn parse(text: &str, origin: &str, flags: &Settings) -> Result<Experiment, ChainFileError> {
    let syntax = Ctx {
        file: origin,
        tree: None,
        layers: None,
        places: None,
    };
    let tree: Located = serde_saphyr::from_str(text).map_err(|e| {
        let message = e.without_snippet().to_string();
        // The line goes where every error has it, after the file name.
        let message = message.split(" at line ").next().unwrap_or(&message).to_string();
        ChainFileError {
            line: e.location().map(|l| l.line() as usize),
            ..syntax.whole(format!("not valid YAML: {message}"))
        }
    })?;
    let ctx = Ctx {
        tree: Some(&tree),
        ..syntax
    };
    let file = read_sections(&tree, &ctx)?;
    resolve(file, &ctx, flags)
}

/// The file's sections, each of the kind it must be.
fn read_sections(tree: &Located, ctx: &Ctx) -> Result<ChainFile, ChainFileError> {
    let what = "a chain file is a mapping with `chain:` (and optionally `traffic:` and `run:`)";
    let mut keys = tree.keys().ok_or_else(|| ctx.whole(what))?;
    if let Some(key) = keys.find(|k| !FILE_KEYS.contains(k)) {
        return Err(ctx.at(
            &[Step::key(key)],
            key,
            "",
            format!("unknown section; a chain file has {}", FILE_KEYS.join(", ")),
        ));
    }
    let section = |name: &str| -> Result<Map<String, Value>, ChainFileError> {
        match tree.get(name) {
            None => Ok(Map::new()),
            Some(s) => s
                .map_or_empty()
                .ok_or_else(|| ctx.at(&[Step::key(name)], name, "", "expected a mapping (key: value)")),
        }
    };
    let chain = match tree.get("chain").map(Located::to_value) {
        None => None,
        Some(Value::Array(items)) => Some(items),
        Some(_) => {
            return Err(ctx.at(&[Step::key("chain")], "chain", "", "expected a list of NFs"));
        }
    };
    let wiring = match tree.get("wiring").map(Located::to_value) {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(items)) => items,
        Some(_) => {
            return Err(ctx.at(
                &[Step::key("wiring")],
                "wiring",
                "",
                "expected a list of `nf.output -> target` lines",
            ));
        }
    };
    let name = match tree.get("name").map(Located::to_value) {
        None => None,
        Some(Value::String(s)) => Some(s),
        Some(other) => Some(other.to_string()),
    };
    Ok(ChainFile {
        name,
        traffic: section("traffic")?,
        profiles: section("profiles")?,
        run: section("run")?,
        chain,
        wiring,
        hosts: tree.get("hosts").is_some(),
    })
}

/// Builds an experiment from `--chain` shorthand: `forwarder*4`, or
/// `forwarder -> synthetic(cycles=100, working_set=64KiB) -> noop`.
pub fn from_shorthand(spec: &str, flags: &Settings) -> Result<Experiment, ChainFileError> {
    let ctx = Ctx {
        file: "--chain",
        tree: None,
        layers: None,
        places: None,
    };
    let chain = parse_shorthand(spec).map_err(|e| ctx.whole(e))?;
    let file = ChainFile {
        name: Some(spec.to_string()),
        traffic: Map::new(),
        profiles: Map::new(),
        run: Map::new(),
        chain: Some(chain),
        wiring: Vec::new(),
        hosts: false,
    };
    resolve(file, &ctx, flags)
}

fn resolve(file: ChainFile, ctx: &Ctx, flags: &Settings) -> Result<Experiment, ChainFileError> {
    let layers = merge_layers(&file, ctx, flags)?;
    let ctx = &Ctx {
        layers: Some(&layers),
        ..*ctx
    };
    let r = &layers.run;
    let settings = run_settings(&layers, ctx)?;
    let ResolvedChain { nfs, places, hops } = chain_of(&file, r, ctx)?;
    let ctx = &Ctx {
        places: Some(&places),
        ..*ctx
    };
    let traffic = traffic_of(&layers.traffic, &nfs, ctx)?;
    let wiring = resolve_wiring(&file.wiring, &nfs, ctx)?;
    let replicas = r.replicas.unwrap_or(1);
    if replicas == 0 || replicas > 64 {
        return Err(ctx.setting("run", "replicas", format!("{replicas} is outside 1..=64")));
    }
    let given_chaining = r.chaining.unwrap_or_default();
    let (runtime, hop_cores) = match given_chaining {
        ChainingSetting::Compound | ChainingSetting::Pipeline => (runtime_of(r, given_chaining, ctx)?, Vec::new()),
        ChainingSetting::Veth
        | ChainingSetting::Linux
        | ChainingSetting::Ovs
        | ChainingSetting::NicSwitch { .. }
        | ChainingSetting::Memif => {
            let chain = HopsChain {
                nfs: &nfs,
                hops: &hops,
                wired: wiring.is_some(),
                replicas,
                core: settings.core,
            };
            (None, resolve_hops(&layers, given_chaining, &chain, ctx)?)
        }
    };
    let isolation = isolation_of(r, given_chaining, ctx)?;
    let dpdk_hops = dpdk_hops_of(r, given_chaining, &nfs, &hops, ctx)?;
    check_chaining_keys(r, given_chaining, ctx)?;
    if let Some(turns) = &r.take_turns {
        crate::turns::open(std::path::Path::new(turns)).map_err(|e| ctx.setting("run", "take_turns", e))?;
    }
    // A chain in namespaces is between the testbed's veth pairs.
    let given = match given_chaining.in_namespaces() {
        true => PortsSetting::Veth,
        false => r.ports.clone().unwrap_or_default(),
    };
    let runtime = Runtimes {
        chaining: given_chaining,
        runtime,
        replicas,
    };
    let pipeline = runtime_settings(&layers, &given, &runtime, &settings, &nfs, ctx)?;
    if settings.reply
        && let Some(w) = &wiring
        && !sfclab_runtime::chain::is_linear(w)
    {
        return Err(ctx.setting(
            "traffic",
            "responder",
            "a responder needs a linear chain: the way back is the way there, reversed",
        ));
    }
    if pipeline.is_some()
        && let Some(w) = &wiring
        && !sfclab_runtime::chain::is_linear(w)
    {
        return Err(ctx.at(
            &[Step::key("wiring")],
            "wiring",
            "",
            "the pipeline runtime cuts the chain into blocks of NFs in order and runs linear chains only; \
             this wiring needs `runtime: compound`",
        ));
    }
    let io = file_io_of(&layers, &nfs, replicas, pipeline.is_some(), ctx)?;
    let runs = OnInterfaces {
        pipeline: pipeline.is_some(),
        reply: settings.reply,
        io: &io,
        traffic: &traffic,
        flags,
    };
    let ports = ports_of(given, &layers, &runs, ctx)?;
    let chaining = match given_chaining {
        ChainingSetting::Compound | ChainingSetting::Pipeline => match pipeline {
            Some(settings) => Chaining::Pipeline { settings },
            None => Chaining::Compound,
        },
        ChainingSetting::Veth => Chaining::Veth { hop_cores, isolation },
        ChainingSetting::Linux => Chaining::Linux { hop_cores },
        ChainingSetting::Ovs => Chaining::Ovs { hop_cores },
        ChainingSetting::NicSwitch { vepa } => Chaining::NicSwitch {
            vepa,
            sriov: r.sriov.clone(),
            hop_cores,
        },
        ChainingSetting::Memif => Chaining::Memif {
            hop_cores,
            wait: r.memif_wait.map(|w| w.0),
            dpdk_hops,
        },
    };
    Ok(Experiment {
        spans_hosts: file.hosts,
        name: file.name.unwrap_or_else(|| ctx.file.to_string()),
        traffic,
        nfs,
        hops,
        wiring,
        settings,
        replicas,
        io,
        ports,
        chaining,
        take_turns: r.take_turns.as_ref().map(std::path::PathBuf::from),
    })
}

/// The file's settings merged with its profiles and the flags; an error names where the
/// bad key came from: a flag, the file's own profile, or its section.
fn merge_layers(file: &ChainFile, ctx: &Ctx, flags: &Settings) -> Result<MergedSettings, ChainFileError> {
    MergedSettings::merge(&file.traffic, &file.run, &file.profiles, flags).map_err(|e| {
        match flags.gives(&e.key) {
            // The merge failed before it could say which keys were flags: ask the flags.
            true => flag_error(&e.key, e.reason),
            false => match own_profile_with(file, &e.key) {
                // The key came from the file's own profile: point there.
                Some(name) => ctx.at(
                    &[Step::key("profiles"), Step::key(&name), Step::key(&e.key)],
                    &format!("profiles.{name}"),
                    &e.key,
                    e.reason,
                ),
                None => ctx.setting(e.section, &e.key, e.reason),
            },
        }
    })
}

/// The run's settings (`run:`), with their defaults, checked.
fn run_settings(layers: &MergedSettings, ctx: &Ctx) -> Result<RunSettings, ChainFileError> {
    let (t, r) = (&layers.traffic, &layers.run);
    let duration = match (r.duration, r.count) {
        (Some(d), _) => Some(d.duration()),
        (None, Some(_)) => None,
        (None, None) => Some(Duration::from_secs(5)),
    };
    let defaults = RunSettings::default();
    let settings = RunSettings {
        batch: r.batch.unwrap_or(defaults.batch),
        duration,
        count: r.count,
        // A finite replay is measured whole: a default warm-up would consume it unseen.
        warmup: match (r.warmup, t.replay_loops) {
            (Some(w), _) => w.duration(),
            (None, Some(_)) => Duration::ZERO,
            (None, None) => Duration::from_millis(500),
        },
        core: r.core.or_else(default_core),
        accounting: r.accounting.unwrap_or(true),
        verify: r.verify.unwrap_or(false),
        pool_size: r.pool_size.unwrap_or(defaults.pool_size),
        stop: None,
        reply: t.responder.unwrap_or(false),
    };
    settings.validate().map_err(|e| match e {
        sfclab_runtime::RunError::Setting { key, reason } => ctx.setting("run", key, reason),
        other => ctx.at(&[Step::key("run")], "run", "", other.to_string()),
    })?;
    Ok(settings)
}

/// The file's chain; none in a tester's file (traffic sent through a device that is
/// not sfclab's).
fn chain_of(file: &ChainFile, r: &RunSection, ctx: &Ctx) -> Result<ResolvedChain, ChainFileError> {
    match &file.chain {
        None if r.ports.as_ref().is_some_and(|p| !p.runs_chain()) => Ok(ResolvedChain {
            nfs: Vec::new(),
            places: Vec::new(),
            hops: Vec::new(),
        }),
        None => Err(ctx.whole(
            "missing `chain:`: list the NFs to run (e.g. `chain: [noop]`); only a tester's file (`--ports tester:OUT,IN`) has none",
        )),
        Some(chain) if chain.is_empty() => Err(ctx.at(
            &[Step::key("chain")],
            "chain",
            "",
            "the chain has no NF: list at least one (e.g. `- noop`)",
        )),
        Some(chain) => resolve_chain(chain, ctx),
    }
}

/// The generator's traffic (`traffic:`), with its defaults; `destinations: router`
/// takes the chain's router's table.
fn traffic_of(
    t: &crate::settings::TrafficSection,
    nfs: &[(String, NfSpec)],
    ctx: &Ctx,
) -> Result<GeneratorConfig, ChainFileError> {
    let mut traffic = GeneratorConfig {
        sizes: t.size.clone().unwrap_or(FrameSizes::Fixed { size: 64 }),
        flows: t.flows.unwrap_or(256),
        ip: t.ip.unwrap_or_default(),
        rate: t.rate.unwrap_or(Rate::Max),
        limit: None,
        probe_pps: t.latency_probe_pps.unwrap_or(10_000.0),
        port: 0,
        destinations: t.destinations.clone().unwrap_or_default(),
        l4: t.proto.unwrap_or_default(),
        session_packets: t.session_packets,
        dscp: t.dscp.clone().unwrap_or_default(),
        reverse: false,
    };
    if traffic.destinations == Destinations::Router
        && let Some((name, router)) = nfs.iter().find(|(_, spec)| spec.kind() == "router")
    {
        traffic.destinations = router_table(router).map_err(|reason| {
            let index = nfs.iter().position(|(n, _)| n == name).unwrap_or(0);
            ctx.nf(index, "router", &[], reason)
        })?;
    }
    traffic.validate().map_err(|(k, r)| ctx.setting("traffic", k, r))?;
    Ok(traffic)
}

/// The runtime of a chain in one process: `chaining: compound | pipeline` names it, and
/// a `runtime` that says otherwise is refused.
fn runtime_of(r: &RunSection, chaining: ChainingSetting, ctx: &Ctx) -> Result<Option<Runtime>, ChainFileError> {
    let as_runtime = if chaining == ChainingSetting::Compound {
        Runtime::Compound
    } else {
        Runtime::Pipeline
    };
    match r.runtime {
        Some(rt) if r.chaining.is_some() && rt != as_runtime => Err(ctx.setting(
            "run",
            "runtime",
            format!("`{rt}` contradicts `chaining: {chaining}`: give one of them"),
        )),
        _ if r.chaining.is_some() => Ok(Some(as_runtime)),
        rt => Ok(rt),
    }
}

/// What the hops of `chaining: veth` run as (threads or processes); memif joins
/// processes only.
fn isolation_of(r: &RunSection, chaining: ChainingSetting, ctx: &Ctx) -> Result<Isolation, ChainFileError> {
    match (chaining, r.isolation) {
        (ChainingSetting::Memif, None | Some(Isolation::Process)) => Ok(Isolation::Process),
        (ChainingSetting::Memif, Some(other)) => Err(ctx.setting(
            "run",
            "isolation",
            format!("`chaining: memif` joins hop processes; `{other}` does not apply (hops in threads of one process: `chaining: compound` or `pipeline`)"),
        )),
        (ChainingSetting::Veth, i) | (_, i @ None) => Ok(i.unwrap_or_default()),
        (_, Some(_)) => Err(ctx.setting(
            "run",
            "isolation",
            format!("chooses what the hops of `chaining: veth` run as; this chain's chaining is `{chaining}`"),
        )),
    }
}

/// The hops (0-based) of `chaining: memif` that dpdk-testpmd runs (`dpdk_hops: 1,3`):
/// each must be a hop of one forwarder.
fn dpdk_hops_of(
    r: &RunSection,
    chaining: ChainingSetting,
    nfs: &[(String, NfSpec)],
    hops: &[usize],
    ctx: &Ctx,
) -> Result<Vec<usize>, ChainFileError> {
    let list = match &r.dpdk_hops {
        None => return Ok(Vec::new()),
        Some(_) if chaining != ChainingSetting::Memif => {
            return Err(ctx.setting(
                "run",
                "dpdk_hops",
                format!("names hops of `chaining: memif` that DPDK runs; this chain's chaining is `{chaining}`"),
            ));
        }
        Some(list) => list,
    };
    let mut chosen = Vec::new();
    for item in list.split(',').map(str::trim) {
        let k: usize = item
            .parse()
            .ok()
            .filter(|k| (1..=hops.len()).contains(k))
            .ok_or_else(|| {
                ctx.setting(
                    "run",
                    "dpdk_hops",
                    format!(
                        "`{item}` is not a hop of this chain: write numbers from 1 to {}",
                        hops.len()
                    ),
                )
            })?;
        let first: usize = hops[..k - 1].iter().sum();
        let (name, spec) = &nfs[first];
        if hops[k - 1] != 1 || spec.kind() != "forwarder" {
            return Err(ctx.setting(
                "run",
                "dpdk_hops",
                format!(
                    "hop {k} is `{name}` ({}); dpdk-testpmd forwards (mac mode): write a forwarder there",
                    spec.kind()
                ),
            ));
        }
        chosen.push(k - 1);
    }
    chosen.sort_unstable();
    chosen.dedup();
    Ok(chosen)
}

/// Keys of one chaining given with another.
fn check_chaining_keys(r: &RunSection, chaining: ChainingSetting, ctx: &Ctx) -> Result<(), ChainFileError> {
    if r.memif_wait.is_some() && chaining != ChainingSetting::Memif {
        return Err(ctx.setting(
            "run",
            "memif_wait",
            format!("chooses how the hops of `chaining: memif` wait; this chain's chaining is `{chaining}`"),
        ));
    }
    if r.sriov.is_some() && chaining != (ChainingSetting::NicSwitch { vepa: false }) {
        return Err(ctx.setting(
            "run",
            "sriov",
            format!("names the SR-IOV NIC of `chaining: nic-switch` (its VEB); this chain's chaining is `{chaining}`"),
        ));
    }
    Ok(())
}

/// The pipeline's settings when the chain runs as one, and the checks of replicas and
/// the responder against the runtime and the ports.
/// What decides the runtime: the chaining and runtime given, and the replicas checked.
struct Runtimes {
    chaining: ChainingSetting,
    runtime: Option<Runtime>,
    replicas: usize,
}

fn runtime_settings(
    layers: &MergedSettings,
    ports: &PortsSetting,
    &Runtimes {
        chaining,
        runtime,
        replicas,
    }: &Runtimes,
    settings: &RunSettings,
    nfs: &[(String, NfSpec)],
    ctx: &Ctx,
) -> Result<Option<PipelineSettings>, ChainFileError> {
    // Between a testbed's interfaces, replicas are compound runs, one per queue.
    let queued_replicas = *ports == PortsSetting::Veth && !chaining.in_namespaces();
    if replicas > 1 && *ports != PortsSetting::Memory && !queued_replicas {
        return Err(ctx.setting(
            "run",
            "replicas",
            format!(
                "`ports: {ports}` runs one {}: replicas (one per queue) run with `ports: veth`",
                if ports.runs_chain() {
                    "chain"
                } else {
                    "tester, and no sfclab chain"
                }
            ),
        ));
    }
    let pipeline_replicas = if queued_replicas { 1 } else { replicas };
    let pipeline = if chaining.in_namespaces() {
        None
    } else {
        resolve_pipeline(layers, runtime, settings, nfs.len(), pipeline_replicas, ctx)?
    };
    if pipeline.is_some() && settings.reply {
        return Err(ctx.setting(
            "traffic",
            "responder",
            "the responder runs in the compound runtime (the way back shares the NFs' state on one core)",
        ));
    }
    Ok(pipeline)
}

/// The pcap files the chain replays, captures to and taps into, checked.
fn file_io_of(
    layers: &MergedSettings,
    nfs: &[(String, NfSpec)],
    replicas: usize,
    pipeline: bool,
    ctx: &Ctx,
) -> Result<FileIo, ChainFileError> {
    let (t, r) = (&layers.traffic, &layers.run);
    let io = FileIo {
        replay: t.replay.as_ref().map(|p| Replay {
            file: std::path::PathBuf::from(p),
            loops: t.replay_loops,
            at_file_timestamps: t.replay_timestamps == Some(true),
        }),
        capture: r.capture.as_ref().map(std::path::PathBuf::from),
        taps: taps(r.tap.as_deref().unwrap_or_default(), nfs).map_err(|reason| ctx.setting("run", "tap", reason))?,
    };
    if !io.taps.is_empty() && replicas > 1 {
        return Err(ctx.setting(
            "run",
            "tap",
            "writes one file per NF, and replicas would each write it: give `replicas: 1`",
        ));
    }
    if t.replay_loops.is_some() && t.replay.is_none() {
        return Err(ctx.setting(
            "traffic",
            "replay_loops",
            "counts passes over a `replay` file: give one",
        ));
    }
    if t.replay_timestamps.is_some() && t.replay.is_none() {
        return Err(ctx.setting(
            "traffic",
            "replay_timestamps",
            "paces a `replay` file by its timestamps: give one",
        ));
    }
    if t.replay_timestamps == Some(true) && t.rate.is_some() {
        return Err(ctx.setting(
            "traffic",
            "replay_timestamps",
            "and `rate` both pace the replay: give one",
        ));
    }
    if (io.replay.is_some() || io.capture.is_some()) && (pipeline || t.responder == Some(true)) {
        let key = if t.replay.is_some() {
            ("traffic", "replay")
        } else {
            ("run", "capture")
        };
        return Err(ctx.setting(
            key.0,
            key.1,
            "pcap files run on the compound runtime without a responder (for now)",
        ));
    }
    Ok(io)
}

/// What a run on interfaces is checked against.
struct OnInterfaces<'a> {
    pipeline: bool,
    reply: bool,
    io: &'a FileIo,
    traffic: &'a GeneratorConfig,
    flags: &'a Settings,
}

/// The ports, each kind with the settings that apply to it; a key given where it does
/// not apply is refused with the reason.
fn ports_of(
    given: PortsSetting,
    layers: &MergedSettings,
    runs: &OnInterfaces,
    ctx: &Ctx,
) -> Result<Ports, ChainFileError> {
    let r = &layers.run;
    let hop = served_hop_of(r, &given, ctx)?;
    if let Some(core) = r.sender_core {
        if !matches!(given, PortsSetting::Tester { .. }) {
            return Err(ctx.setting(
                "run",
                "sender_core",
                "places the sending thread of sfclab as a tester: give `ports: tester:OUT,IN`",
            ));
        }
        if !sfclab_runtime::placement::allowed_cores().contains(&core) {
            return Err(ctx.setting("run", "sender_core", format!("core {core} is not available")));
        }
        if let PortsSetting::Tester { output, .. } = &given
            && sfclab_io::is_memif(output)
            && sfclab_io::memif::MemifSettings::from_spec(output, sfclab_io::memif::Role::Client)
                .is_ok_and(|m| m.zero_copy)
        {
            return Err(ctx.setting(
                "run",
                "sender_core",
                "a sending thread copies its frames out: its port cannot be a zero-copy memif client",
            ));
        }
    }
    if given == PortsSetting::Memory {
        let on_interfaces = [
            (
                r.xdp_mode.is_some(),
                "xdp_mode",
                "applies to AF_XDP ports: give `ports: veth` or `ports: linux`",
            ),
            (
                r.io.is_some(),
                "io",
                "applies to the ports of a wired run: give `ports: veth` or `ports: linux`",
            ),
            (
                r.busy_poll.is_some(),
                "busy_poll",
                "applies to AF_XDP ports on interfaces: give `ports: veth`, `linux`, `dut:` or `tester:`",
            ),
            (
                r.xdp_wait.is_some(),
                "xdp_wait",
                "applies to AF_XDP ports on interfaces: give `ports: veth`, `linux`, `dut:` or `tester:`",
            ),
        ];
        if let Some((_, key, reason)) = on_interfaces.iter().find(|c| c.0) {
            return Err(ctx.setting("run", key, *reason));
        }
        return Ok(Ports::Memory);
    }
    let clash = [
        (runs.pipeline, "runtime", "the pipeline runtime"),
        (runs.reply, "responder", "a responder"),
        (runs.io.replay.is_some(), "replay", "a replayed capture"),
        (runs.io.capture.is_some(), "capture", "a capture file"),
    ];
    if let Some((_, key, what)) = clash.iter().find(|c| c.0) {
        return Err(ctx.setting("run", "ports", format!("`{given}` runs the compound runtime between interfaces; {what} (`{key}`) does not combine with it (for now)")));
    }
    if matches!(given, PortsSetting::Dut { .. })
        && let Some(key) = crate::settings::given_keys(&runs.flags.traffic).first()
    {
        return Err(ctx.setting(
            "traffic",
            key,
            format!("`--ports {given}` forwards what arrives on its first interface and generates nothing: traffic settings do not apply"),
        ));
    }
    let io = interface_io_of(r, &given, ctx)?;
    let traffic = runs.traffic;
    if given == PortsSetting::Linux && traffic.ip != sfclab_traffic::IpVersion::V4 {
        return Err(ctx.setting("run", "ports", "`linux` forwards IPv4: give `ip: v4`"));
    }
    // The tester signs each frame with 16 bytes at the end of its L4 payload; a DUT
    // on interfaces forwards what comes, and generates nothing.
    let need = traffic.ip.header_len(traffic.l4) + sfclab_io::tester_link::SIGNATURE_LEN + 4;
    if !matches!(given, PortsSetting::Dut { .. })
        && let Some(small) = traffic.sizes.sizes().into_iter().find(|&s| usize::from(s) < need)
    {
        return Err(ctx.setting(
            "traffic",
            "size",
            format!("{small}-byte frames cannot carry the tester's 16-byte signature after their headers: `ports: {given}` needs at least {need} bytes here"),
        ));
    }
    Ok(match given {
        PortsSetting::Memory => Ports::Memory,
        PortsSetting::Veth => Ports::Veth(io),
        PortsSetting::Linux => Ports::Linux(io),
        PortsSetting::Dut { input, output } => Ports::Dut {
            input,
            output,
            io,
            hop: hop.unwrap_or_default(),
        },
        PortsSetting::Tester { output, input } => Ports::Tester {
            output,
            input,
            io,
            sender_core: r.sender_core,
        },
    })
}

/// How ports on interfaces do their I/O (`io`, `xdp_mode`, `busy_poll`, `xdp_wait`).
fn interface_io_of(r: &RunSection, given: &PortsSetting, ctx: &Ctx) -> Result<InterfaceIo, ChainFileError> {
    let af_packet = r.io == Some(sfclab_io::IoKind::AfPacket);
    if let PortsSetting::Dut { input, output } | PortsSetting::Tester { output, input } = given
        && input == output
        && !sfclab_io::is_memif(input)
        && !af_packet
    {
        return Err(ctx.setting(
            "run",
            "ports",
            format!("`{given}`: AF_XDP takes one socket per queue, so in and out need two interfaces here; give two, or `io: af_packet`"),
        ));
    }
    if af_packet {
        for (given, key) in [
            (r.xdp_mode.is_some(), "xdp_mode"),
            (r.xdp_wait.is_some(), "xdp_wait"),
            (r.busy_poll.is_some(), "busy_poll"),
        ] {
            if given {
                return Err(ctx.setting("run", key, "applies to AF_XDP ports, and `io` is af_packet"));
            }
        }
        return Ok(InterfaceIo::AfPacket);
    }
    if r.busy_poll.is_some() && r.xdp_wait.is_some_and(|w| w.0 != sfclab_io::Wait::Poll) {
        return Err(ctx.setting(
            "run",
            "xdp_wait",
            "an idle port either busy-polls the kernel (`busy_poll`) or sleeps (`xdp_wait: interrupt`), not both",
        ));
    }
    Ok(InterfaceIo::AfXdp {
        mode: r.xdp_mode,
        busy_poll: r.busy_poll,
        wait: r.xdp_wait.map(|w| w.0),
    })
}

/// What a hop process serving runs is told by (`ready_file`, `control_files`,
/// `control_port`, `shared_capacity`, `both_ways`): `ports: dut:` only.
fn served_hop_of(r: &RunSection, given: &PortsSetting, ctx: &Ctx) -> Result<Option<ServedHop>, ChainFileError> {
    let both_ways = r.both_ways.unwrap_or(false);
    if both_ways
        && !matches!(given, PortsSetting::Dut { input, output }
            if sfclab_io::is_memif(input) && sfclab_io::is_memif(output) && input != output)
    {
        return Err(ctx.setting(
            "run",
            "both_ways",
            "forwards between two memif interfaces of a device under test (`--ports memif:A,memif:B`)",
        ));
    }
    let hop_keys = [
        (r.ready_file.is_some(), "ready_file"),
        (r.control_files.is_some(), "control_files"),
        (r.control_port.is_some(), "control_port"),
        (r.shared_capacity.is_some(), "shared_capacity"),
    ];
    if !matches!(given, PortsSetting::Dut { .. }) {
        if let Some((_, key)) = hop_keys.iter().find(|k| k.0) {
            return Err(ctx.setting("run", key, "is for `ports: dut:` runs (a hop process)"));
        }
        return Ok(None);
    }
    let control = match (&r.control_files, r.control_port) {
        (Some(_), Some(_)) => {
            return Err(ctx.setting(
                "run",
                "control_port",
                "a hop is told by control files or over TCP, not both",
            ));
        }
        (Some(prefix), None) => Some(ControlledBy::Files(prefix.into())),
        (None, Some(port)) => Some(ControlledBy::Port(port)),
        (None, None) => None,
    };
    Ok(Some(ServedHop {
        ready_file: r.ready_file.as_ref().map(std::path::PathBuf::from),
        control,
        shared_capacity: r.shared_capacity.as_ref().map(std::path::PathBuf::from),
        both_ways,
    }))
}

/// A chain in namespaces, as [`resolve_hops`] checks it.
struct HopsChain<'a> {
    nfs: &'a [(String, NfSpec)],
    /// How many NFs each hop holds.
    hops: &'a [usize],
    /// The file gives `wiring:`.
    wired: bool,
    replicas: usize,
    /// The chain's core.
    core: Option<usize>,
}

/// The core of each hop of a chain in namespaces (`chaining: veth | linux`), checked:
/// a placement puts hops on cores as it puts a pipeline's NFs (hops on one core take
/// turns on its thread); without one every hop runs on the chain's core. Keys that do
/// not apply are refused.
fn resolve_hops(
    layers: &MergedSettings,
    chaining: ChainingSetting,
    chain: &HopsChain,
    ctx: &Ctx,
) -> Result<Vec<Option<usize>>, ChainFileError> {
    let HopsChain {
        nfs,
        hops,
        wired,
        replicas,
        core,
    } = *chain;
    let r = &layers.run;
    let refuse = |key: &str, why: &str| Err(ctx.setting("run", key, format!("`chaining: {chaining}` {why}")));
    if let Some(p) = &r.ports
        && *p != PortsSetting::Veth
    {
        return refuse(
            "ports",
            "builds its own namespaces and tests the chain from another (`ports: veth`): leave `ports` out",
        );
    }
    if r.runtime.is_some() {
        return refuse(
            "runtime",
            "runs each hop in a namespace of its own: `runtime` does not apply",
        );
    }
    if replicas > 1 {
        return refuse(
            "replicas",
            "runs one chain of namespaces (replicas per queue run with `chaining: compound`)",
        );
    }
    if wired {
        return Err(ctx.at(
            &[Step::key("wiring")],
            "wiring",
            "",
            format!("`chaining: {chaining}` joins each NF to the next by one link: linear chains only"),
        ));
    }
    if !chaining.runs_sfclab_hops()
        && let Some(k) = hops.iter().position(|&n| n > 1)
    {
        return Err(ctx.nf(
            hops[..k].iter().sum(),
            "",
            &[],
            format!("`chaining: {chaining}` forwards in the kernel or a switch at every hop: a hop holds no list of NFs there"),
        ));
    }
    if !chaining.runs_sfclab_hops()
        && let Some((i, (name, _))) = nfs.iter().enumerate().find(|(_, (_, spec))| spec.kind() != "forwarder")
    {
        let who = if chaining == ChainingSetting::Linux {
            "the kernel"
        } else {
            "an OVS bridge"
        };
        return Err(ctx.nf(
            i,
            name,
            &[],
            format!("`chaining: {chaining}` has {who} forward at every hop: each NF of the chain must be a forwarder (`forwarder*3`)"),
        ));
    }
    let p = &layers.pipeline;
    if let Some(key) = crate::settings::given_keys(p)
        .into_iter()
        .find(|k| *k != "placement" && *k != "cores")
    {
        return refuse(
            &key,
            "places hops on cores with `placement` and `cores` only; this key applies to the pipeline runtime",
        );
    }
    if chaining == ChainingSetting::Linux && p.placement.is_some() {
        return refuse(
            "placement",
            "forwards in the kernel, on the core that receives: give `core` for the DUT's core",
        );
    }
    match &p.placement {
        None => Ok(vec![core; hops.len()]),
        Some(placement) => {
            let cores = p.cores.clone().unwrap_or_else(sfclab_runtime::placement::allowed_cores);
            let stages = placement
                .stages(hops.len(), &cores)
                .map_err(|e| ctx.setting("run", "placement", e))?;
            let mut per_hop = vec![core; hops.len()];
            for st in stages {
                for i in st.nfs {
                    per_hop[i] = Some(st.core);
                }
            }
            Ok(per_hop)
        }
    }
}

/// The pipeline settings when the chain runs as a pipeline (asked for, or implied by a
/// placement or replicas), checked against this machine's cores.
fn resolve_pipeline(
    layers: &MergedSettings,
    runtime: Option<Runtime>,
    run: &RunSettings,
    n: usize,
    replicas: usize,
    ctx: &Ctx,
) -> Result<Option<PipelineSettings>, ChainFileError> {
    let p = &layers.pipeline;
    let runtime = match runtime {
        Some(r) => r,
        None if p.placement.is_some() || replicas > 1 => Runtime::Pipeline,
        None => Runtime::Compound,
    };
    if runtime == Runtime::Compound {
        if replicas > 1 {
            return Err(ctx.setting("run", "replicas", "parallel replicas need `runtime: pipeline`"));
        }
        if p.placement.is_some() {
            return Err(ctx.setting(
                "run",
                "placement",
                "a placement needs `runtime: pipeline` (compound runs on one core)",
            ));
        }
        // Pipeline settings on a chain that runs compound would be ignored: refuse them.
        if let Some(key) = crate::settings::given_keys(p).first() {
            return Err(ctx.setting(
                "run",
                key,
                "applies to the pipeline runtime (stages on cores joined by rings), and this chain runs \
                 compound on one core: add `runtime: pipeline` or a placement (--placement), or remove it",
            ));
        }
        return Ok(None);
    }
    let defaults = PipelineSettings::default();
    let placement = p.placement.clone().unwrap_or(Placement::SCore);
    let cores = p.cores.clone().unwrap_or(defaults.cores);
    if let Some(c) = cores
        .iter()
        .enumerate()
        .find_map(|(i, c)| cores[..i].contains(c).then_some(c))
    {
        return Err(ctx.setting(
            "run",
            "cores",
            format!("core {c} is listed twice: each core runs one thread (to share a core, place NFs on it: `placement: 0,0,1`)"),
        ));
    }
    let allowed = sfclab_runtime::placement::allowed_cores();
    if replicas > allowed.len() {
        return Err(ctx.setting(
            "run",
            "replicas",
            format!(
                "{replicas} replicas need a core each; this process may use {} ({})",
                allowed.len(),
                allowed.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    placement
        .stages(n, &cores)
        .map_err(|e| ctx.setting("run", "placement", e))?;
    let mut run = run.clone();
    run.core = None;
    // Unless given, the pipeline sizes its pool for its rings.
    run.pool_size = layers.run.pool_size.unwrap_or(0);
    let p = PipelineSettings {
        run,
        placement,
        cores,
        generator_core: p.generator_core,
        links: p.links.unwrap_or(LinkMode::Drop),
        ring_size: p.ring_size.unwrap_or(defaults.ring_size),
        rx_queue: p.rx_queue.unwrap_or(defaults.rx_queue),
        stage_budget: p.stage_budget.unwrap_or(defaults.stage_budget),
        flow_control: p.flow_control.unwrap_or(false),
    };
    if let Some(c) = p
        .generator_core
        .filter(|c| !sfclab_runtime::placement::allowed_cores().contains(c))
    {
        return Err(ctx.setting("run", "generator_core", format!("core {c} is not available")));
    }
    for (key, v, min) in [
        ("ring_size", p.ring_size, p.run.batch),
        ("rx_queue", p.rx_queue, p.run.batch),
        ("stage_budget", p.stage_budget, 1),
    ] {
        if v < min || v > 1 << 20 {
            return Err(ctx.setting("run", key, format!("{v} is outside {min}..={}", 1 << 20)));
        }
    }
    Ok(Some(p))
}

/// The last core this process may use (its affinity mask): away from core 0, where
/// interrupts land.
pub fn default_core() -> Option<usize> {
    sfclab_runtime::placement::default_chain_core()
}

/// The tester's core: the first allowed one that is not the device's.
pub(crate) fn tester_core(dut_core: Option<usize>) -> Option<usize> {
    core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id)
        .find(|&c| Some(c) != dut_core)
        .or(dut_core)
}

/// The chain's NFs in order, where each is written, and the NFs of each hop: an entry
/// of `chain:` is one NF, or a list of NFs that run together as one hop (one process,
/// one namespace) where the chaining puts hops apart.
fn resolve_chain(chain: &[Value], ctx: &Ctx) -> Result<ResolvedChain, ChainFileError> {
    let mut out: Vec<(String, NfSpec)> = Vec::new();
    let mut places = Vec::new();
    let mut hops = Vec::new();
    // A relative file in a chain file is the chain file's neighbour, wherever the
    // command runs from.
    let dir = ctx.directory();
    for (i, raw) in chain.iter().enumerate() {
        let entries: Vec<(Place, &Value)> = match raw {
            Value::Array(group) => {
                if group.is_empty() {
                    return Err(ctx.nf_at(
                        Place { entry: i, inner: None },
                        "",
                        &[],
                        "a hop's list of NFs is empty: list at least one",
                    ));
                }
                group
                    .iter()
                    .enumerate()
                    .map(|(k, v)| {
                        (
                            Place {
                                entry: i,
                                inner: Some(k),
                            },
                            v,
                        )
                    })
                    .collect()
            }
            one => vec![(Place { entry: i, inner: None }, one)],
        };
        hops.push(entries.len());
        for (place, raw) in entries {
            out.push(resolve_nf(place, raw, dir.as_deref(), ctx)?);
            places.push(place);
        }
    }
    // Unnamed NFs are named by type, numbered when a type appears more than once.
    for i in 0..out.len() {
        if out[i].0.is_empty() {
            let kind = out[i].1.kind();
            let same: Vec<usize> = (0..out.len()).filter(|&j| out[j].1.kind() == kind).collect();
            out[i].0 = if same.len() == 1 {
                kind.to_string()
            } else {
                format!("{kind}{}", same.iter().position(|&j| j == i).unwrap() + 1)
            };
        }
    }
    for i in 0..out.len() {
        if let Some(j) = (0..i).find(|&j| out[j].0 == out[i].0) {
            let kind = out[i].1.kind();
            return Err(ctx.nf_at(
                places[i],
                kind,
                &[Step::key(kind), Step::key("name")],
                format!("`{}` is already the name of {}", out[i].0, places[j]),
            ));
        }
    }
    Ok(ResolvedChain { nfs: out, places, hops })
}

/// A chain as written: its NFs, where each is, and how many each hop holds.
struct ResolvedChain {
    nfs: Vec<(String, NfSpec)>,
    places: Vec<Place>,
    hops: Vec<usize>,
}

/// One NF entry (`- type: { settings }`, `- type`), checked and built once.
/// `dir`: where relative files in its settings are read from.
fn resolve_nf(
    place: Place,
    raw: &Value,
    dir: Option<&std::path::Path>,
    ctx: &Ctx,
) -> Result<(String, NfSpec), ChainFileError> {
    // `- noop` and `- noop:` mean the NF with default settings.
    let (kind, settings) = match raw {
        Value::String(s) => (s.clone(), Value::Null),
        Value::Object(m) if m.len() == 1 => {
            let (k, v) = m.iter().next().expect("one entry");
            (k.clone(), v.clone())
        }
        _ => {
            return Err(ctx.nf_at(
                place,
                "",
                &[],
                "an NF is written as `- type: { key: value, ... }` with exactly one type, or a hop as a list of them",
            ));
        }
    };
    let at = |path: Vec<Step>| [vec![Step::key(&kind)], path].concat();
    let mut settings = match settings {
        Value::Null => Map::new(),
        Value::Object(m) => m,
        _ => return Err(ctx.nf_at(place, &kind, &at(vec![]), "expected a mapping of settings")),
    };
    // `name` is the chain's, not the NF's: every NF has one.
    let name = match settings.remove("name") {
        None => String::new(),
        Some(Value::String(n)) if !n.is_empty() && !n.contains(['.', ' ']) => n,
        Some(other) => {
            return Err(ctx.nf_at(
                place,
                &kind,
                &at(vec![Step::key("name")]),
                format!("`{other}` is not a name: write a word without dots or spaces"),
            ));
        }
    };
    if let Some(dir) = dir {
        // A relative file is the chain file's neighbour, wherever the command runs.
        NfSpec::visit_files(&kind, &mut settings, &mut |path| {
            if std::path::Path::new(path.as_str()).is_relative() {
                *path = dir.join(&*path).display().to_string();
            }
        });
    }
    let spec = NfSpec::new(&kind, Value::Object(settings)).map_err(|e| match e {
        SpecError::UnknownKind(_) => ctx.nf_at(place, &kind, &at(vec![]), e.to_string()),
        SpecError::Config(c) => ctx.nf_at(place, &kind, &at(steps_of_text(&c.key)), plain(&c.reason)),
    })?;
    Ok((name, spec))
}

/// The chain's wiring from `wiring:` lines (`router.port1 -> fw`, `fw.deny -> egress`):
/// the linear chain with each line's edge replaced. `None` when there are no lines.
/// An error in the value the flag for `key` gave.
fn flag_error(key: &str, reason: impl Into<String>) -> ChainFileError {
    ChainFileError {
        file: flag_of(key),
        line: None,
        place: String::new(),
        key: String::new(),
        reason: reason.into(),
    }
}

/// The file's own profile the traffic section names, when it (not the section) sets `key`.
fn own_profile_with(file: &ChainFile, key: &str) -> Option<String> {
    let Some(Value::String(name)) = file.traffic.get("profile") else {
        return None;
    };
    let own = file.profiles.get(name)?.as_object()?;
    (own.contains_key(key) && !file.traffic.contains_key(key)).then(|| name.clone())
}

/// `destinations: router`: the IPv4 prefixes of the chain's router, as `Prefixes`.
fn router_table(router: &NfSpec) -> Result<Destinations, String> {
    let cfg = sfclab_nf::typed(router.settings()).map_err(|e| e.to_string())?;
    let prefixes = sfclab_nf::router::ipv4_prefixes(&cfg).map_err(|e| e.to_string())?;
    Ok(Destinations::Prefixes(
        prefixes
            .iter()
            .map(|&(net, len)| format!("{}/{len}", std::net::Ipv4Addr::from(net)))
            .collect(),
    ))
}

/// `tap` values (`NF=FILE`), each naming an NF of the chain once.
fn taps(values: &[String], nfs: &[(String, NfSpec)]) -> Result<Vec<(String, std::path::PathBuf)>, String> {
    let mut taps: Vec<(String, std::path::PathBuf)> = Vec::new();
    for v in values {
        let Some((nf, file)) = v.split_once('=').map(|(n, f)| (n.trim(), f.trim())) else {
            return Err(format!(
                "`{v}`: write the NF's name, `=` and the file, e.g. `router=after-router.pcap`"
            ));
        };
        let nf = nf.strip_prefix("after ").unwrap_or(nf).trim();
        if file.is_empty() {
            return Err(format!("`{v}`: no file after `=`"));
        }
        if !nfs.iter().any(|(name, _)| name == nf) {
            let names: Vec<&str> = nfs.iter().map(|(n, _)| n.as_str()).collect();
            return Err(format!(
                "`{v}`: the chain has no NF named `{nf}` (it has {})",
                names.join(", ")
            ));
        }
        if taps.iter().any(|(n, _)| n == nf) {
            return Err(format!("`{v}`: `{nf}` is tapped twice"));
        }
        if taps.iter().any(|(_, f)| f.as_os_str() == file) {
            return Err(format!("`{v}`: two taps write `{file}`"));
        }
        taps.push((nf.to_string(), std::path::PathBuf::from(file)));
    }
    Ok(taps)
}

fn resolve_wiring(
    lines: &[Value],
    nfs: &[(String, NfSpec)],
    ctx: &Ctx,
) -> Result<Option<Vec<Vec<Next>>>, ChainFileError> {
    if lines.is_empty() {
        return Ok(None);
    }
    let outputs: Vec<Vec<String>> = nfs.iter().map(|(_, spec)| spec.build().outputs()).collect();
    let n = nfs.len();
    let mut wiring: Vec<Vec<Next>> = outputs
        .iter()
        .enumerate()
        .map(|(i, outs)| {
            let first = if i + 1 < n { Next::Nf(i + 1) } else { Next::Egress(0) };
            std::iter::once(first)
                .chain(std::iter::repeat_n(Next::Egress(0), outs.len().max(1) - 1))
                .collect()
        })
        .collect();
    let index = |name: &str| nfs.iter().position(|(n, _)| n == name);
    let names = || nfs.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ");
    for (k, line) in lines.iter().enumerate() {
        let err = |reason: String| {
            ctx.at(
                &[Step::key("wiring"), Step::Index(k)],
                &format!("wiring[{k}]"),
                "",
                reason,
            )
        };
        let text = line
            .as_str()
            .ok_or_else(|| err("write a line `nf.output -> target`".into()))?;
        let (from, to) = text
            .split_once("->")
            .ok_or_else(|| err(format!("`{text}` is not `nf.output -> target`")))?;
        let (from, to) = (from.trim(), to.trim());
        let (nf, output) = from.split_once('.').unwrap_or((from, ""));
        let i = index(nf).ok_or_else(|| err(format!("no NF is called `{nf}` (the chain has {})", names())))?;
        let o = if output.is_empty() {
            0
        } else {
            outputs[i].iter().position(|o| o == output).ok_or_else(|| {
                err(format!(
                    "{nf} ({}) has no output `{output}`; its outputs are {}",
                    nfs[i].1.kind(),
                    outputs[i].join(", ")
                ))
            })?
        };
        let target = match to.strip_prefix("egress") {
            Some("") => Next::Egress(0),
            Some(e) if e.parse::<usize>().is_ok() => {
                let e: usize = e.parse().expect("checked");
                if e != 0 {
                    return Err(err(format!("egress {e}: this chain has one egress port (egress)")));
                }
                Next::Egress(e)
            }
            _ => match index(to) {
                Some(j) if j > i => Next::Nf(j),
                Some(_) => {
                    return Err(err(format!(
                        "{to} comes before {nf} in the chain: outputs lead to later NFs, so no packet can loop"
                    )));
                }
                None => {
                    return Err(err(format!(
                        "no NF is called `{to}` (the chain has {}), nor is it `egress`",
                        names()
                    )));
                }
            },
        };
        wiring[i][o] = target;
    }
    Ok(Some(wiring))
}

/// Parses `a -> b(k=v, k2=v2)*3 -> c` into chain elements.
pub fn parse_shorthand(spec: &str) -> Result<Vec<Value>, String> {
    let mut out = Vec::new();
    // NFs between `[` and `]` are one hop: `[nat44 -> firewall] -> router`.
    let mut group: Option<Vec<Value>> = None;
    for part in spec.split("->") {
        let mut part = part.trim();
        if let Some(rest) = part.strip_prefix('[') {
            if group.is_some() {
                return Err(format!("`[` inside a hop's `[...]` in `{spec}`: hops do not nest"));
            }
            group = Some(Vec::new());
            part = rest.trim();
        }
        let mut close = None;
        if let Some(at) = part.rfind(']') {
            let repeat = part[at + 1..].trim();
            let n: usize = match repeat.strip_prefix('*') {
                None if repeat.is_empty() => 1,
                Some(n) => n
                    .trim()
                    .parse()
                    .ok()
                    .filter(|n| (1..=4096).contains(n))
                    .ok_or_else(|| format!("`{repeat}` after `]` in `{spec}` is not a repeat count 1..=4096"))?,
                None => return Err(format!("`{repeat}` after `]` in `{spec}`: write `]` or `]*N`")),
            };
            close = Some(n);
            part = part[..at].trim();
        }
        let into = match group.as_mut() {
            Some(g) => g,
            None if close.is_some() => return Err(format!("`]` without `[` in `{spec}`")),
            None => &mut out,
        };
        parse_shorthand_nf(part, spec, into)?;
        if let Some(n) = close {
            let hop = group.take().expect("open");
            out.extend(std::iter::repeat_n(Value::Array(hop), n));
        }
    }
    if group.is_some() {
        return Err(format!("a `[` without its `]` in `{spec}`"));
    }
    Ok(out)
}

/// One `type(key=value, ...)*N` element of the shorthand, pushed onto `out`.
fn parse_shorthand_nf(part: &str, spec: &str, out: &mut Vec<Value>) -> Result<(), String> {
    {
        if part.is_empty() {
            return Err(format!("empty element in `{spec}`"));
        }
        let (body, repeat) = match part.rsplit_once('*') {
            Some((b, n)) if !b.contains(')') || b.trim_end().ends_with(')') => {
                let n: usize = n
                    .trim()
                    .parse()
                    .map_err(|_| format!("`*{n}` in `{part}` is not a repeat count"))?;
                if n == 0 || n > 4096 {
                    return Err(format!("repeat count {n} in `{part}` must be 1..=4096"));
                }
                (b.trim(), n)
            }
            _ => (part, 1),
        };
        let (kind, params) = match body.split_once('(') {
            Some((k, rest)) => {
                let inner = rest
                    .strip_suffix(')')
                    .ok_or_else(|| format!("missing `)` in `{body}`"))?;
                (k.trim(), inner)
            }
            None => (body, ""),
        };
        if kind.is_empty() || !kind.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("`{kind}` is not an NF type name"));
        }
        let mut settings = serde_json::Map::new();
        for kv in params.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = kv
                .split_once('=')
                .ok_or_else(|| format!("`{kv}` in `{body}` is not key=value"))?;
            settings.insert(k.trim().to_string(), scalar(v.trim()));
        }
        for _ in 0..repeat {
            out.push(serde_json::json!({ kind: Value::Object(settings.clone()) }));
        }
    }
    Ok(())
}

/// A shorthand value as YAML would read it: number, bool or string.
fn scalar(v: &str) -> Value {
    if let Ok(n) = v.parse::<u64>() {
        return Value::from(n);
    }
    if let Ok(f) = v.parse::<f64>() {
        return Value::from(f);
    }
    match v {
        "true" => Value::Bool(true),
        "false" => Value::Bool(false),
        _ => Value::String(v.trim_matches('"').to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Settings as the command line would give them.
    fn flags(given: &[(&str, &str)]) -> Settings {
        given
            .iter()
            .fold(Settings::default(), |s, (k, v)| s.with(k, v).unwrap())
    }

    fn parse_err(text: &str) -> ChainFileError {
        parse(text, "bad.yaml", &Settings::default()).unwrap_err()
    }

    #[test]
    fn default_chain_parses() {
        let experiment = parse(DEFAULT_CHAIN, "default", &Settings::default()).unwrap();
        assert!(!experiment.nfs.is_empty());
    }

    /// `rules_file: sigs.rules` in a chain file is the chain file's neighbour, wherever
    /// the command runs.
    #[test]
    fn relative_files_in_a_chain_file_are_read_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("sigs.rules"),
            "alert udp any any -> any any (content:\"x\"; sid:7;)\n",
        )
        .unwrap();
        let chain = dir.path().join("c.yaml");
        std::fs::write(&chain, "chain:\n  - dpi: { rules_file: sigs.rules }\n").unwrap();
        let experiment = load(chain.to_str().unwrap(), &Settings::default()).unwrap();
        assert_eq!(
            experiment.nfs[0].1.settings()["rules_file"],
            dir.path().join("sigs.rules").display().to_string()
        );
        // Text that is not a file (the embedded default, a test's string) keeps them as written.
        let e = parse(
            "chain:\n  - dpi: { rules_file: sigs.rules }\n",
            "text",
            &Settings::default(),
        )
        .unwrap_err();
        assert!(e.reason.contains("cannot read sigs.rules"), "{e}");
        // So is a file of an NF an nsh-proxy wraps.
        std::fs::write(
            &chain,
            "chain:\n  - nsh-proxy: { nf: { dpi: { rules_file: sigs.rules } } }\n",
        )
        .unwrap();
        let experiment = load(chain.to_str().unwrap(), &Settings::default()).unwrap();
        assert_eq!(
            experiment.nfs[0].1.settings()["nf"]["dpi"]["rules_file"],
            dir.path().join("sigs.rules").display().to_string()
        );
    }

    /// A chain-file entry that lists NFs is one hop; elsewhere the chain runs them all.
    #[test]
    fn a_listed_entry_is_one_hop_of_several_nfs() {
        let text = "chain:\n  - [nat44, firewall: { default: allow }, qos]\n  - router: { routes: ['0.0.0.0/0 192.0.2.1 0'] }\n";
        let experiment = parse(text, "h.yaml", &Settings::default()).unwrap();
        assert_eq!(experiment.hops, vec![3, 1]);
        let hops: Vec<Vec<&str>> = experiment
            .hop_nfs()
            .iter()
            .map(|h| h.iter().map(|(n, _)| n.as_str()).collect())
            .collect();
        assert_eq!(hops, vec![vec!["nat44", "firewall", "qos"], vec!["router"]]);
        let short = from_shorthand("[nat44 -> firewall(default=allow)]*2 -> router", &Settings::default()).unwrap();
        assert_eq!(short.hops, vec![2, 2, 1]);
        assert_eq!(
            from_shorthand("forwarder*3", &Settings::default()).unwrap().hops,
            vec![1, 1, 1]
        );
        for (bad, says) in [
            ("[forwarder -> [noop]]", "do not nest"),
            ("forwarder] -> noop", "without `[`"),
            ("[forwarder -> noop", "without its `]`"),
            ("[forwarder]x", "write `]` or `]*N`"),
        ] {
            let e = from_shorthand(bad, &Settings::default()).unwrap_err();
            assert!(e.reason.contains(says), "{bad}: {e}");
        }
        // Errors inside a hop's list point at the NF in it.
        let e = parse_err("chain:\n  - [noop, firewall: { default: maybe }]\n");
        assert_eq!(
            (e.place.as_str(), e.key.as_str(), e.line),
            ("chain[0][1] (firewall)", "default", Some(2))
        );
        let e = parse_err("chain:\n  - []\n");
        assert!(e.reason.contains("empty"), "{e}");
        // The kernel or a switch forwards at every hop: no lists of NFs there.
        let e = parse_err("run: { chaining: linux }\nchain:\n  - [forwarder, forwarder]\n");
        assert!(e.reason.contains("holds no list"), "{e}");
    }

    /// `dpdk_hops` counts hops, not NFs: a hop of several NFs is no place for testpmd.
    #[test]
    fn dpdk_hops_name_hops_of_one_forwarder() {
        let memif =
            |chain: &str, hops: &str| from_shorthand(chain, &flags(&[("chaining", "memif"), ("dpdk_hops", hops)]));
        assert_eq!(memif("forwarder*4", "3").unwrap().chaining.dpdk_hops(), vec![2]);
        assert_eq!(
            memif("[forwarder -> noop] -> forwarder", "2")
                .unwrap()
                .chaining
                .dpdk_hops(),
            vec![1]
        );
        let e = memif("[forwarder -> noop] -> forwarder", "1").unwrap_err();
        assert!(e.reason.contains("write a forwarder there"), "{e}");
        let e = memif("[forwarder -> noop] -> forwarder", "3").unwrap_err();
        assert!(e.reason.contains("from 1 to 2"), "{e}");
    }

    #[test]
    fn shorthand_expands_repeats_and_parameters() {
        let experiment = from_shorthand(
            "forwarder*3 -> synthetic(cycles=100, working_set=64KiB) -> noop",
            &Settings::default(),
        )
        .unwrap();
        let names: Vec<&str> = experiment.nfs.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["forwarder1", "forwarder2", "forwarder3", "synthetic", "noop"]);
        assert_eq!(experiment.nfs[3].1.kind(), "synthetic");
        assert_eq!(
            experiment.nfs[3].1.settings(),
            &serde_json::json!({"cycles": 100, "working_set": "64KiB"})
        );
    }

    /// A bad key in the file's own profile is reported where it is written.
    #[test]
    fn a_bad_key_in_an_own_profile_points_at_the_profile() {
        let e =
            parse_err("profiles:\n  mine:\n    flows: 8\n    sizes: 64\ntraffic: { profile: mine }\nchain: [noop]\n");
        assert_eq!(
            (e.place.as_str(), e.key.as_str(), e.line),
            ("profiles.mine", "sizes", Some(4))
        );
        let e = parse_err("profiles:\n  mine: { flows: 8 }\ntraffic: { profile: mine, sizes: 64 }\nchain: [noop]\n");
        assert_eq!(
            (e.place.as_str(), e.key.as_str()),
            ("traffic", "sizes"),
            "the section's own key"
        );
    }

    #[test]
    fn overrides_win_and_count_replaces_duration() {
        let o = flags(&[("size", "imix"), ("count", "1000"), ("batch", "64")]);
        let experiment = parse("run: { duration: 9s }\nchain: [noop]\n", "f.yaml", &o).unwrap();
        assert_eq!(experiment.traffic.sizes, FrameSizes::imix());
        assert_eq!(experiment.settings.count, Some(1000));
        assert_eq!(experiment.settings.duration, None);
        assert_eq!(experiment.settings.batch, 64);
    }

    #[test]
    fn a_finite_replay_has_no_warm_up_unless_asked() {
        let finite = flags(&[("replay", "in.pcap"), ("replay_loops", "1")]);
        let experiment = parse("chain: [noop]\n", "f.yaml", &finite).unwrap();
        assert_eq!(experiment.settings.warmup, Duration::ZERO);
        let asked = parse("run: { warmup: 100ms }\nchain: [noop]\n", "f.yaml", &finite).unwrap();
        assert_eq!(asked.settings.warmup, Duration::from_millis(100));
        let looping = parse("chain: [noop]\n", "f.yaml", &flags(&[("replay", "in.pcap")])).unwrap();
        assert_eq!(looping.settings.warmup, Duration::from_millis(500));
    }

    #[test]
    fn errors_name_file_place_key_and_reason() {
        let e = parse_err("chain:\n  - forwarder: { dst_mack: \"02:00:00:00:00:01\" }\n");
        assert_eq!(
            (e.file.as_str(), e.place.as_str()),
            ("bad.yaml", "chain[0] (forwarder)")
        );
        assert!(e.reason.contains("unknown field `dst_mack`"), "{e}");

        let e = parse_err("chain:\n  - noop\n  - synthetic: { accesses: 3 }\n");
        assert_eq!((e.place.as_str(), e.key.as_str()), ("chain[1] (synthetic)", "accesses"));
        assert!(
            e.to_string()
                .starts_with("bad.yaml:3: chain[1] (synthetic): key `accesses`: needs a `working_set`"),
            "{e}"
        );

        let e = parse_err("chain:\n  - synthetic: { working_set: lots }\n");
        assert_eq!(e.key, "working_set");
        assert!(e.reason.contains("`lots` is not a byte size"), "{e}");

        let e = parse_err("chain:\n  - forwarderr: {}\n");
        assert!(
            e.reason.contains("unknown NF type `forwarderr`") && e.reason.contains("synthetic"),
            "{e}"
        );

        let e = parse_err("traffic: { size: 63 }\nchain: [noop]\n");
        assert_eq!((e.place.as_str(), e.key.as_str()), ("traffic", "size"));

        let e = parse_err("traffic: { sizes: 64 }\nchain: [noop]\n");
        assert_eq!((e.place.as_str(), e.key.as_str()), ("traffic", "sizes"));
        assert!(
            e.reason.contains("unknown key") && e.reason.contains("size, flows"),
            "{e}"
        );

        let e = parse_err(
            "chain: [noop]
runn: {}
",
        );
        assert_eq!((e.place.as_str(), e.line), ("runn", Some(2)));

        let e = parse_err("run: { batch: 1000 }\nchain: [noop]\n");
        assert_eq!((e.place.as_str(), e.key.as_str()), ("run", "batch"));

        let e = parse_err("run: { duration: soon }\nchain: [noop]\n");
        assert_eq!(e.key, "duration");

        let e = parse_err("traffic: { rate: fast }\nchain: [noop]\n");
        assert_eq!(e.key, "rate");

        let e = parse_err("chain:\n  - noop: { name: a }\n  - forwarder: { name: a }\n");
        assert_eq!((e.place.as_str(), e.key.as_str()), ("chain[1] (forwarder)", "name"));

        let e = parse_err("chain: [ {noop: {}, forwarder: {}} ]\n");
        assert_eq!(e.place, "chain[0]");

        let e = parse_err("chain: [noop\n");
        assert!(e.reason.starts_with("not valid YAML"), "{e}");

        let e = parse_err("traffic: {}\n");
        assert!(e.reason.contains("missing `chain:`"), "{e}");
    }

    /// A tester's file is traffic and run settings: no chain runs in it.
    #[test]
    fn a_testers_file_has_no_chain() {
        let tester = "traffic: { size: 128, rate: 1Mpps }\nrun: { duration: 2s }\n";
        let flags = Settings::default().with("ports", "tester:a,b").unwrap();
        let experiment = parse(tester, "tester.yaml", &flags).unwrap();
        assert!(experiment.nfs.is_empty());
        assert_eq!(experiment.settings.duration, Some(Duration::from_secs(2)));
        let e = parse(tester, "tester.yaml", &Settings::default()).unwrap_err();
        assert!(e.reason.contains("only a tester's file"), "{e}");
    }

    /// Text held in memory resolves as the same file read from disk would, and its errors
    /// name the origin given.
    #[test]
    fn a_chain_files_text_resolves_as_the_file_would() {
        let text = "name: held\ntraffic: { size: 256 }\nchain: [forwarder, noop]\n";
        let source = ChainSource::Text {
            text: text.into(),
            origin: "in-memory.yaml".into(),
        };
        let e = Experiment::load(&source, &Settings::default()).unwrap();
        assert_eq!(e.name, "held");
        assert_eq!(e.nfs.len(), 2);
        assert_eq!(e.traffic.sizes, FrameSizes::Fixed { size: 256 });
        let bad = ChainSource::Text {
            text: "chain: [forwarder]\nrun: { batch: 0 }\n".into(),
            origin: "in-memory.yaml".into(),
        };
        let e = Experiment::load(&bad, &Settings::default()).unwrap_err();
        assert_eq!((e.file.as_str(), e.key.as_str()), ("in-memory.yaml", "batch"), "{e}");
    }

    /// Each kind of ports and chaining carries the settings that apply to it.
    #[test]
    fn ports_and_chaining_carry_their_own_settings() {
        let dut = from_shorthand(
            "forwarder",
            &flags(&[
                ("ports", "dut:a,b"),
                ("io", "af_xdp"),
                ("xdp_mode", "generic"),
                ("control_port", "7000"),
                ("ready_file", "/tmp/r"),
            ]),
        )
        .unwrap();
        let Ports::Dut { io, hop, .. } = &dut.ports else {
            panic!("{:?}", dut.ports)
        };
        assert_eq!(
            *io,
            InterfaceIo::AfXdp {
                mode: Some(sfclab_io::XdpMode::Generic),
                busy_poll: None,
                wait: None
            }
        );
        assert_eq!(hop.control, Some(ControlledBy::Port(7000)));
        assert_eq!(hop.ready_file.as_deref(), Some(std::path::Path::new("/tmp/r")));
        let packet = from_shorthand("forwarder", &flags(&[("ports", "veth"), ("io", "af_packet")])).unwrap();
        assert_eq!(packet.ports, Ports::Veth(InterfaceIo::AfPacket));
        let e = from_shorthand(
            "forwarder",
            &flags(&[("ports", "veth"), ("io", "af_packet"), ("busy_poll", "50")]),
        )
        .unwrap_err();
        // Given as flags: the error names the flag.
        assert!(e.to_string().starts_with("--busy-poll: applies to AF_XDP ports"), "{e}");
        let memif = from_shorthand(
            "forwarder*2",
            &flags(&[("chaining", "memif"), ("memif_wait", "interrupt")]),
        )
        .unwrap();
        assert!(
            matches!(memif.chaining, Chaining::Memif { wait: Some(_), .. }),
            "{:?}",
            memif.chaining
        );
        assert_eq!(memif.chaining.hop_cores().len(), 2);
        assert!(matches!(memif.ports, Ports::Veth(_)));
        let e = from_shorthand(
            "forwarder*2",
            &flags(&[("chaining", "veth"), ("memif_wait", "interrupt")]),
        )
        .unwrap_err();
        assert!(e.to_string().starts_with("--memif-wait: chooses how the hops"), "{e}");
        let piped = from_shorthand("forwarder*2", &flags(&[("runtime", "pipeline")])).unwrap();
        assert!(
            matches!(piped.chaining, Chaining::Pipeline { .. }) && piped.replicas() == 1,
            "{:?}",
            piped.chaining
        );
    }

    #[test]
    fn pipeline_settings_resolve_and_fail_clearly() {
        let experiment = parse(
            "run: { runtime: pipeline, placement: s_core, links: backpressure }\nchain: [noop, noop]\n",
            "p.yaml",
            &Settings::default(),
        )
        .unwrap();
        let p = experiment.pipeline().unwrap();
        assert_eq!(
            (p.placement.clone(), p.links),
            (Placement::SCore, LinkMode::Backpressure)
        );
        let experiment = parse("chain: [noop]\n", "p.yaml", &flags(&[("placement", "s_core")])).unwrap();
        assert!(
            experiment.pipeline().is_some(),
            "a placement implies the pipeline runtime"
        );
        for (text, key) in [
            ("run: { runtime: threads }\nchain: [noop]\n", "runtime"),
            ("run: { placement: bi:4096 }\nchain: [noop]\n", "placement"),
            (
                "run: { runtime: compound, placement: bi:1 }\nchain: [noop]\n",
                "placement",
            ),
            ("run: { placement: s_core, links: sometimes }\nchain: [noop]\n", "links"),
            ("run: { placement: s_core, ring_size: 4 }\nchain: [noop]\n", "ring_size"),
            (
                "run: { placement: s_core, generator_core: 4096 }\nchain: [noop]\n",
                "generator_core",
            ),
        ] {
            let e = parse_err(text);
            assert_eq!((e.place.as_str(), e.key.as_str()), ("run", key), "{e}");
        }
    }

    /// A setting that would be ignored is an error, and an error in a value the command
    /// line gave names the flag, not the file it did not come from.
    #[test]
    fn ignored_settings_are_refused_and_flags_are_blamed() {
        for (text, key) in [
            ("run: { links: drop }\nchain: [noop]\n", "links"),
            ("run: { generator_core: 0 }\nchain: [noop]\n", "generator_core"),
            ("run: { sender_core: 0 }\nchain: [noop]\n", "sender_core"),
            ("run: { ports: veth, sender_core: 0 }\nchain: [noop]\n", "sender_core"),
            (
                "run: { runtime: compound, ring_size: 64 }\nchain: [noop]\n",
                "ring_size",
            ),
            (
                "run: { placement: bi:2, cores: [0, 0] }\nchain: [noop, noop]\n",
                "cores",
            ),
            (
                "run: { placement: s_core, replicas: 4096 }\nchain: [noop]\n",
                "replicas",
            ),
            ("run: { xdp_wait: interrupt }\nchain: [noop]\n", "xdp_wait"),
            (
                "run: { ports: veth, busy_poll: 50, xdp_wait: interrupt }\nchain: [noop]\n",
                "xdp_wait",
            ),
            (
                "run: { ports: veth, io: af_packet, xdp_wait: interrupt:2us }\nchain: [noop]\n",
                "xdp_wait",
            ),
        ] {
            let e = parse_err(text);
            assert_eq!((e.place.as_str(), e.key.as_str()), ("run", key), "{e}");
        }
        let e = parse_err("chain: []\n");
        assert_eq!(e.place, "chain");
        let e = parse_err("[1, 2]\n");
        assert!(e.reason.contains("a mapping with `chain:`"), "{e}");
        let e = parse_err("run: { batch: -1 }\nchain: [noop]\n");
        assert!(
            e.reason.contains("a whole number") && !e.reason.contains("usize"),
            "{e}"
        );
        let e = parse_err("chain: [noop\n");
        assert_eq!((e.file.as_str(), e.line), ("bad.yaml", Some(1)));
        assert!(!e.reason.contains("<input>"), "{e}");

        let e = Settings::default().with("size", "10").unwrap_err();
        assert!(e.contains("--size"), "a bad flag value is clap's to refuse: {e}");
        let e = parse(DEFAULT_CHAIN, "default.yaml", &flags(&[("flows", "0")])).unwrap_err();
        assert_eq!(e.to_string(), "--flows: 0 flows: must be 1..=1048576");
        let e = from_shorthand("noop", &flags(&[("links", "drop")])).unwrap_err();
        assert!(
            e.to_string().starts_with("--links: applies to the pipeline runtime"),
            "{e}"
        );
    }

    #[test]
    fn errors_say_the_line() {
        let text = "# a chain\ntraffic:\n  size: 64\nrun:\n  duration: 1s\n  batch: 1000\nchain:\n  - noop\n  - synthetic:\n      cycles: 10\n      accesses: 4\n";
        let e = parse_err(text);
        assert_eq!((e.line, e.key.as_str()), (Some(6), "batch"), "{e}");
        assert!(e.to_string().starts_with("bad.yaml:6: run: key `batch`"), "{e}");
        let e = parse_err(&text.replace("batch: 1000", "batch: 32"));
        assert_eq!((e.line, e.place.as_str()), (Some(11), "chain[1] (synthetic)"), "{e}");
        let e = parse_err("traffic: { size: 10 }\nchain: [noop]\n");
        assert_eq!(e.line, Some(1));
        let e = parse_err(
            "run: {
  duration: 1s,
  batch: 1000 }
chain: [noop]
",
        );
        assert_eq!(
            (e.line, e.key.as_str()),
            (Some(3), "batch"),
            "flow style: the key's line"
        );
        let e = parse_err(
            "chain: [noop, {synthetic: {cycles: 10,
  accesses: 4}}]
",
        );
        assert_eq!((e.line, e.key.as_str()), (Some(2), "accesses"), "{e}");
        let e = parse_err(
            "chain: [noop, {synthetic: {cycles: 10,
  acesses: 4}}]
",
        );
        assert_eq!(
            (e.line, e.key.as_str()),
            (Some(2), "acesses"),
            "an unknown key's line: {e}"
        );
        let e = parse(text, "bad.yaml", &flags(&[("batch", "1000")])).unwrap_err();
        assert_eq!((e.file.as_str(), e.line), ("--batch", None));
    }

    #[test]
    fn wiring_replaces_edges_of_the_linear_chain() {
        let text = "chain: [forwarder, synthetic, noop]\nwiring:\n  - forwarder.out -> noop\n";
        let experiment = parse(text, "w.yaml", &Settings::default()).unwrap();
        assert_eq!(
            experiment.wiring,
            Some(vec![vec![Next::Nf(2)], vec![Next::Nf(2)], vec![Next::Egress(0)]])
        );
        let report = crate::run::run(&Experiment {
            settings: RunSettings {
                count: Some(1000),
                duration: None,
                warmup: Duration::ZERO,
                ..experiment.settings.clone()
            },
            ..experiment
        })
        .unwrap()
        .into_measured();
        let synthetic = report.places.iter().find(|p| p.name == "synthetic").unwrap();
        assert_eq!(synthetic.packets_in, 0, "the forwarder's output skips it");
        assert!(report.conservation.holds);

        for (wiring, says) in [
            ("[forwarder.out -> nope]", "no NF is called `nope`"),
            ("[forwarder.side -> noop]", "has no output `side`; its outputs are out"),
            ("[noop -> forwarder]", "comes before"),
            ("[noop -> egress2]", "one egress port"),
            ("[forwarder noop]", "is not `nf.output -> target`"),
        ] {
            let e = parse_err(&format!("chain: [forwarder, synthetic, noop]\nwiring: {wiring}\n"));
            assert!(
                e.place.starts_with("wiring[0]") && e.reason.contains(says),
                "{wiring}: {e}"
            );
            assert_eq!(e.line, Some(2));
        }
        let e =
            parse_err("run: {placement: s_core}\nchain: [forwarder, synthetic, noop]\nwiring: [forwarder -> noop]\n");
        assert!(e.reason.contains("linear chains only"), "{e}");
    }

    #[test]
    fn nf_settings_errors_name_the_nested_key_and_line() {
        let e = parse_err("chain:\n  - noop\n  - synthetic:\n      name: s\n      seed: 0\n");
        assert_eq!(
            (e.place.as_str(), e.key.as_str(), e.line),
            ("chain[1] (synthetic)", "seed", Some(5)),
            "{e}"
        );
        let e = parse_err("chain:\n  - noop: { name: a.b }\n");
        assert_eq!(e.key, "name");
    }

    #[test]
    fn shorthand_errors() {
        for bad in [
            "",
            "a ->",
            "forwarder*0",
            "forwarder*x",
            "synthetic(cycles=1",
            "syn thetic",
            "synthetic(cycles)",
        ] {
            assert!(parse_shorthand(bad).is_err(), "{bad}");
        }
        let e = from_shorthand("forwarder(dst_mac=zz)", &Settings::default()).unwrap_err();
        assert_eq!(e.key, "dst_mac");
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_chain_text_never_panics(text in "\\PC{0,200}") {
            let _ = parse(&text, "fuzz.yaml", &Settings::default());
            let _ = from_shorthand(&text, &Settings::default());
        }
    }
}
