//! Scenarios: many chains side by side on one machine (seed 001: 1 to 40 PVP or PVVP
//! chains, each VNF in its own VM, oversubscribed 1:1 to 4:1), each chain with its own
//! traffic, measured per chain and as a whole, repeated with statistics.
//!
//! A scenario file names the chains (a count of one template: a named shape of VNFs, or
//! a chain file), the traffic (IMIX unless told or a chain file says; its `rate` is the aggregate of every
//! chain and direction, split evenly across them, as NFVbench does; both directions at
//! once on every chain unless `bidirectional: false`, each VNF forwarding both ways
//! through one instance of its NFs), the cores the VNF processes share (the OS schedules them:
//! oversubscription is processes per core), idle standby instances and repetitions.
//! Every VNF is an sfclab process in a network namespace of its own, joined to the
//! next by memif; one tester thread drives every chain.
//!
//! ```yaml
//! name: pvp-router
//! chains: 4
//! shape: pvp            # pvp: tester -> VNF -> tester; pvvp: tester -> VNF -> VNF -> tester
//! vnf: router           # a preset (forwarder, router, multi-feature) or chain-file entries
//! bidirectional: true   # both directions at once on every chain (the default)
//! line_rate: 10Gbit/s   # the NIC's ports: each direction of all chains shares one line
//! vnf_rate_cap: 2.5Gbit # each VNF's licence: both its directions policed to this
//! traffic: { rate: 2Mpps, size: imix, flows: 256 }
//! run: { duration: 5s, memif_wait: interrupt }
//! vnf_cores: "1"        # the VNF processes share these cores
//! standby: 0            # VNF processes started but given no traffic
//! repeat: 3
//! ```
//!
//! Two hosts on one machine (seed 003's dual host): each host a namespace, joined by a
//! cable shaped to a line rate; each VNF sits on a host, the tester sends from host 1
//! and receives on `sink`'s; every link between places on different hosts is a VXLAN
//! tunnel of its own over the cable (memif, shared memory, joins places on one host).
//!
//! ```yaml
//! hosts: { count: 2, vnfs: [1, 2], sink: 2, link: 1Gbit/s }
//! ```

mod presets;
mod run;
mod sched;
mod search;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::Value;
use sfclab_traffic::Rate;

use crate::chain_file::{ChainFileError, Experiment};
use crate::settings::{Chaining, Settings};

pub use presets::{VNF_PRESETS, WEB_RULES, web_rules};
pub use run::{
    Aggregate, ChainResult, DirectionResult, HopDirection, HopFlow, ProcessSched, ScenarioDocument, ScenarioRun,
    ScenarioSummary, run,
};
pub use search::ScenarioSearch;

/// The shape of each chain when a scenario names its VNF: seed 001's PVP and PVVP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize, schemars::JsonSchema, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Shape {
    /// tester -> VNF -> tester.
    Pvp,
    /// tester -> VNF -> VNF -> tester.
    Pvvp,
}

impl Shape {
    fn vnfs(self) -> usize {
        match self {
            Shape::Pvp => 1,
            Shape::Pvvp => 2,
        }
    }
}

/// What the command line says about a scenario; each flag wins over the file's key.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ScenarioFlags {
    /// Chains side by side.
    #[arg(long, help_heading = "Scenario")]
    pub chains: Option<usize>,
    /// Each chain's shape: pvp (one VNF) or pvvp (two).
    #[arg(long, value_enum, help_heading = "Scenario")]
    pub shape: Option<Shape>,
    /// Each VNF: a preset (forwarder, router, multi-feature).
    #[arg(long, help_heading = "Scenario")]
    pub vnf: Option<String>,
    /// Each chain's chain file (its hops are the VNFs) instead of --shape and --vnf.
    #[arg(long, help_heading = "Scenario")]
    pub chain_file: Option<PathBuf>,
    /// Cores the VNF processes share, scheduled by the OS (`1`, `0-1`, `0,1`).
    /// Default: every allowed core but the tester's (all of them on one core).
    #[arg(long, help_heading = "Scenario")]
    pub vnf_cores: Option<String>,
    /// VNF processes started but given no traffic (seed 001's idle VMs).
    #[arg(long, help_heading = "Scenario")]
    pub standby: Option<usize>,
    /// Repetitions of the whole measurement (mean, deviation, 95% interval, median).
    #[arg(long, help_heading = "Scenario")]
    pub repeat: Option<usize>,
    /// Traffic one way only (tester -> first VNF -> ... -> tester), not both at once.
    #[arg(long, help_heading = "Scenario")]
    pub one_way: bool,
    /// The NIC's line rate at layer 1 (`10Gbit/s`): each direction's traffic of every
    /// chain shares one line of it (seed 001's two 10GbE ports); what it cannot carry is
    /// not offered.
    #[arg(long, help_heading = "Scenario")]
    pub line_rate: Option<String>,
    /// Each VNF's licence (`2.5Gbit`): a policer after its NFs drops what exceeds this
    /// rate of IP bytes, both directions together (seed 001's CSR 1000v licence).
    #[arg(long, help_heading = "Scenario")]
    pub vnf_rate_cap: Option<String>,
    /// Hosts on this machine (1 or 2): with 2, each a namespace joined to the other by
    /// a cable shaped to `--host-link`, chains crossing it by tunnels (seed 003).
    #[arg(long, help_heading = "Two hosts")]
    pub hosts: Option<usize>,
    /// The host of each VNF of a chain, in order (`2`, `1,2`). Default: the first half
    /// of the VNFs on host 1, the rest (a single VNF) on host 2.
    #[arg(long, value_delimiter = ',', help_heading = "Two hosts")]
    pub vnf_hosts: Option<Vec<usize>>,
    /// The host the tester receives on (it sends from host 1). Default: the last VNF's.
    #[arg(long, help_heading = "Two hosts")]
    pub sink_host: Option<usize>,
    /// The cable's line rate, each direction, at layer 1 (default `1Gbit/s`).
    #[arg(long, help_heading = "Two hosts")]
    pub host_link: Option<String>,
    /// Charge the tunnel's 50 bytes per frame against the cable's rate (a real overlay),
    /// instead of carrying the line rate of the chains' own frames (a direct cable).
    #[arg(long, help_heading = "Two hosts")]
    pub charge_tunnel: bool,
    /// Search each repetition for the highest aggregate rate (split evenly across the
    /// chains and directions, as NFVbench does) that meets each loss goal, then measure
    /// every chain at the first goal's rate. `--duration` is a trial's length.
    #[arg(long, help_heading = "Scenario search")]
    pub search: bool,
    /// Search each chain on its own instead (its directions together), the others
    /// carrying their share of `--rate` meanwhile; then measure every chain at once,
    /// each at its own first goal's rate.
    #[arg(long, help_heading = "Scenario search")]
    pub search_per_chain: bool,
    /// Loss goals: `ndr` (0%), `pdr` (0.5%), or percentages; seed 001's is `0.001%`.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0.001%",
        help_heading = "Scenario search"
    )]
    pub goals: Vec<String>,
    /// `binary` (RFC 2544: one trial decides a load, as seed 001) or `mlr` (MLRsearch).
    #[arg(long, default_value = "binary", help_heading = "Scenario search")]
    pub method: String,
    /// Relative width at which a goal's search ends.
    #[arg(long, default_value = "1%", help_heading = "Scenario search")]
    pub resolution: String,
    /// Lowest aggregate rate searched.
    #[arg(long, default_value = "10kpps", help_heading = "Scenario search")]
    pub min_rate: String,
    /// Highest aggregate rate searched (default: what the tester reaches through every
    /// chain at full speed, measured first).
    #[arg(long, help_heading = "Scenario search")]
    pub max_rate: Option<String>,
}

/// A scenario file's keys.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioFile {
    name: Option<String>,
    description: Option<String>,
    chains: Option<usize>,
    shape: Option<Shape>,
    vnf: Option<Value>,
    chain: Option<PathBuf>,
    #[serde(default)]
    traffic: BTreeMap<String, Value>,
    #[serde(default)]
    run: BTreeMap<String, Value>,
    vnf_cores: Option<Value>,
    standby: Option<usize>,
    repeat: Option<usize>,
    bidirectional: Option<bool>,
    line_rate: Option<String>,
    vnf_rate_cap: Option<String>,
    hosts: Option<HostsFile>,
}

/// A scenario file's `hosts:`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct HostsFile {
    count: Option<usize>,
    vnfs: Option<Vec<usize>>,
    sink: Option<usize>,
    link: Option<String>,
    charge_tunnel: Option<bool>,
}

/// Two emulated hosts: where each VNF and the tester's receiver sit (hosts from 1),
/// and the cable between them.
#[derive(Debug, Clone, PartialEq)]
pub struct TwoHosts {
    /// Each VNF's host, in chain order.
    pub vnfs: Vec<usize>,
    /// The tester's receiving host (it sends from host 1).
    pub sink: usize,
    pub link: sfclab_topology::LinkShape,
}

impl TwoHosts {
    /// Each place's host from 0: the tester's sender, each VNF, the tester's receiver.
    pub fn places(&self) -> Vec<usize> {
        std::iter::once(0)
            .chain(self.vnfs.iter().map(|h| h - 1))
            .chain(std::iter::once(self.sink - 1))
            .collect()
    }

    /// Links of a chain that cross the cable.
    pub fn crossings(&self) -> usize {
        self.places().windows(2).filter(|w| w[0] != w[1]).count()
    }
}

/// A scenario ready to run: every chain resolved, checked as a whole.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub description: Option<String>,
    /// `PVP`, `PVVP` or the chain file each chain runs.
    pub shape: String,
    /// What each VNF runs (`router`, `nat44+firewall+qos+dpi`).
    pub vnf: String,
    /// The chains that get traffic, each with its share of the rate.
    pub chains: Vec<Experiment>,
    /// The chain standby instances run (started, given no traffic).
    pub standby: usize,
    /// The rate asked of all chains and directions together.
    pub aggregate_rate: Rate,
    /// Both directions at once on every chain (each chain's traffic the forward
    /// direction's; the reverse's is the same with every flow swapped).
    pub bidirectional: bool,
    /// The emulated NIC's line rate per direction, bits per second at layer 1.
    pub line_rate: Option<f64>,
    /// Each VNF's licence, as written (`2.5Gbit`).
    pub vnf_rate_cap: Option<String>,
    /// Search each repetition (`--search`): goals, rates, resolution; `max_pps`
    /// infinite means what the tester reaches, measured first.
    pub search: Option<sfclab_measure::SearchConfig>,
    /// The search is per chain (`--search-per-chain`), not of the aggregate.
    pub search_per_chain: bool,
    /// Two emulated hosts, when the chains span them.
    pub hosts: Option<TwoHosts>,
    /// Every link of every chain a veth pair (`chaining: veth`), not memif.
    pub veth: bool,
    /// Cores the VNF processes share.
    pub vnf_cores: Vec<usize>,
    /// The tester's core.
    pub tester_core: Option<usize>,
    pub repeat: usize,
}

/// An error in a scenario: the file (or flag), the key and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    pub origin: String,
    pub key: String,
    pub reason: String,
}

impl std::fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.origin.is_empty() {
            write!(f, "{}: ", self.origin)?;
        }
        if !self.key.is_empty() {
            write!(f, "`{}`: ", self.key)?;
        }
        f.write_str(&self.reason)
    }
}

impl std::error::Error for ScenarioError {}

impl From<ChainFileError> for ScenarioError {
    fn from(e: ChainFileError) -> ScenarioError {
        // The chain file's error names its file, line and key itself.
        ScenarioError {
            origin: String::new(),
            key: String::new(),
            reason: e.to_string(),
        }
    }
}

impl Scenario {
    /// Resolves the scenario `file` (none: flags only) with the command line's
    /// `flags` and `settings` (each wins over the file's key).
    pub fn load(file: Option<&Path>, flags: &ScenarioFlags, settings: &Settings) -> Result<Scenario, ScenarioError> {
        let (origin, f) = match file {
            None => ("command line".to_string(), ScenarioFile::default()),
            Some(path) => {
                let origin = path.display().to_string();
                let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
                    origin: origin.clone(),
                    key: String::new(),
                    reason: format!("cannot read: {e}"),
                })?;
                (origin.clone(), parse_file(&text, &origin)?)
            }
        };
        let dir = file.and_then(Path::parent).map(Path::to_path_buf).unwrap_or_default();
        resolve(f, &origin, &dir, flags, settings)
    }
}

fn parse_file(text: &str, origin: &str) -> Result<ScenarioFile, ScenarioError> {
    let err = |key: String, reason: String| ScenarioError {
        origin: origin.to_string(),
        key,
        reason,
    };
    let value: Value = serde_saphyr::from_str(text).map_err(|e| err(String::new(), format!("not valid YAML: {e}")))?;
    serde_path_to_error::deserialize(value).map_err(|e| {
        let key = e.path().to_string();
        err(if key == "." { String::new() } else { key }, e.into_inner().to_string())
    })
}

fn resolve(
    f: ScenarioFile,
    origin: &str,
    dir: &Path,
    flags: &ScenarioFlags,
    settings: &Settings,
) -> Result<Scenario, ScenarioError> {
    let err = |key: &str, reason: String| ScenarioError {
        origin: origin.to_string(),
        key: key.to_string(),
        reason,
    };
    let flag_err = |key: &str, reason: String| ScenarioError {
        origin: format!("--{}", key.replace('_', "-")),
        key: key.to_string(),
        reason,
    };
    let count = flags.chains.or(f.chains).unwrap_or(1);
    if count == 0 {
        return Err(err("chains", "at least one chain".into()));
    }
    let standby = flags.standby.or(f.standby).unwrap_or(0);

    // The scenario's settings sit between each chain file's and the command line's.
    let mut layered = settings.clone();
    for (section, keys) in [("traffic", &f.traffic), ("run", &f.run)] {
        for (key, value) in keys {
            if settings.gives(key) {
                continue;
            }
            let text = match value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            layered = layered
                .with(key, &text)
                .map_err(|reason| err(&format!("{section}.{key}"), reason))?;
        }
    }
    // Scenarios join their VNFs by memif unless told (`veth` is the other chaining that
    // runs many chains), in interrupt mode unless told: VNFs share cores.
    if !layered.gives("chaining") {
        layered = layered.with("chaining", "memif").expect("a chaining");
    }
    let veth = layered.run.chaining == Some(Chaining::Veth);
    if !layered.gives("memif_wait") && layered.run.chaining == Some(Chaining::Memif) {
        layered = layered.with("memif_wait", "interrupt").expect("a wait mode");
    }
    let host_file = f.hosts.unwrap_or_default();
    let host_count = match (flags.hosts, host_file.count) {
        (Some(c), _) if c == 0 || c > 2 => return Err(flag_err("hosts", format!("{c} hosts: 1 or 2"))),
        (None, Some(c)) if c == 0 || c > 2 => return Err(err("hosts.count", format!("{c} hosts: 1 or 2"))),
        (a, b) => a.or(b).unwrap_or(1),
    };
    let two_hosts = host_count == 2;
    if two_hosts && f.bidirectional == Some(true) {
        return Err(err(
            "bidirectional",
            "chains across two hosts carry one direction so far: leave `bidirectional` out".into(),
        ));
    }
    if veth && f.bidirectional == Some(true) {
        return Err(err(
            "bidirectional",
            "chains joined by veth carry one direction so far: leave `bidirectional` out".into(),
        ));
    }
    let bidirectional = !flags.one_way && f.bidirectional.unwrap_or(!two_hosts && !veth);
    let line_rate = match (&flags.line_rate, &f.line_rate) {
        (Some(text), _) => Some(line_rate(text).map_err(|r| flag_err("line_rate", r))?),
        (None, Some(text)) => Some(line_rate(text).map_err(|r| err("line_rate", r))?),
        (None, None) => None,
    };
    let (cap_origin, vnf_rate_cap) = match (&flags.vnf_rate_cap, &f.vnf_rate_cap) {
        (Some(c), _) => ("--vnf-rate-cap".to_string(), Some(c.clone())),
        (None, c) => (origin.to_string(), c.clone()),
    };
    let cap_bps = match &vnf_rate_cap {
        Some(cap) => Some(
            cap.parse::<sfclab_nf::classes::Rate>()
                .map_err(|reason| ScenarioError {
                    origin: cap_origin.clone(),
                    key: "vnf_rate_cap".into(),
                    reason,
                })?
                .0,
        ),
        None => None,
    };

    let chain_file = match (&flags.chain_file, &f.chain) {
        (Some(p), _) => Some(p.clone()),
        (None, Some(p)) if p.is_relative() => Some(dir.join(p)),
        (None, p) => p.clone(),
    };
    let shape = flags.shape.or(f.shape);
    let vnf = match (&flags.vnf, &f.vnf) {
        (Some(name), _) => Some(Value::String(name.clone())),
        (None, v) => v.clone(),
    };
    let (template, shape_label, vnf_label) = match chain_file {
        Some(path) => {
            if vnf_rate_cap.is_some() {
                return Err(ScenarioError {
                    origin: cap_origin,
                    key: "vnf_rate_cap".into(),
                    reason: "caps the VNFs of `shape` and `vnf`; with a chain file, write the cap into it (a qos policer at the end of each hop)".into(),
                });
            }
            if shape.is_some() || vnf.is_some() {
                return Err(err(
                    "chain",
                    "a chain file gives each chain's hops: leave `shape` and `vnf` out".into(),
                ));
            }
            let exp = crate::chain_file::load(&path.display().to_string(), &layered)?;
            let vnf = exp.nfs.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(" -> ");
            (exp, format!("chain file {}", path.display()), vnf)
        }
        None => {
            let shape = shape.unwrap_or(Shape::Pvp);
            let vnf = vnf.unwrap_or_else(|| Value::String("router".into()));
            let (entries, label) = presets::vnf_entries(&vnf).map_err(|reason| err("vnf", reason))?;
            let vnfs = shape.vnfs();
            let chain: Vec<Value> = (1..=vnfs)
                .map(|k| {
                    let mut hop = entries.clone();
                    if let Some(cap) = cap_bps {
                        // Named per VNF as the chain names repeated NFs: `licence`, or
                        // `licence1`, `licence2`.
                        let name = if vnfs == 1 {
                            "licence".to_string()
                        } else {
                            format!("licence{k}")
                        };
                        hop.push(presets::licence(&name, cap));
                    }
                    Value::Array(hop)
                })
                .collect();
            let shape_label = format!("{shape:?}").to_uppercase();
            let text = serde_json::json!({ "name": format!("{shape_label} {label}"), "chain": chain }).to_string();
            // Seed 001's traffic profile, unless told (a chain file keeps its own).
            let mut layered = layered.clone();
            if !layered.gives("size") {
                layered = layered.with("size", "imix").expect("a size");
            }
            // Relative paths in the VNF (dpi's rules) are read beside the scenario file.
            let exp = crate::chain_file::parse(&text, origin, &layered).map_err(|e| ScenarioError {
                origin: origin.to_string(),
                key: "vnf".into(),
                reason: e.reason,
            })?;
            (exp, shape_label, label)
        }
    };
    if !matches!(template.chaining, Chaining::Memif | Chaining::Veth) {
        return Err(err(
            "run.chaining",
            format!(
                "scenarios join their VNFs by memif or veth so far, not `{}`",
                template.chaining
            ),
        ));
    }
    if veth && two_hosts {
        return Err(err(
            "run.chaining",
            "two hosts join places on one host by memif and cross by tunnels: leave `chaining` out".into(),
        ));
    }
    if !template.dpdk_hops.is_empty() {
        return Err(err("run.dpdk_hops", "scenarios run sfclab VNFs only".into()));
    }

    let hosts = if two_hosts {
        Some(two_hosts_of(&host_file, flags, template.hops.len(), origin)?)
    } else {
        let given = [
            (flags.vnf_hosts.is_some() || host_file.vnfs.is_some(), "vnf_hosts"),
            (flags.sink_host.is_some() || host_file.sink.is_some(), "sink_host"),
            (flags.host_link.is_some() || host_file.link.is_some(), "host_link"),
            (
                flags.charge_tunnel || host_file.charge_tunnel.is_some(),
                "charge_tunnel",
            ),
        ];
        if let Some((_, key)) = given.iter().find(|g| g.0) {
            return Err(err(
                key,
                "applies to two hosts: add `hosts: { count: 2 }` (`--hosts 2`)".into(),
            ));
        }
        None
    };
    if hosts.is_some() && !template.dpdk_hops.is_empty() {
        return Err(err("hosts", "chains across two hosts run sfclab VNFs only".into()));
    }

    let tester_core = crate::run::tester_core(template.settings.core);
    let vnf_cores = match flags.vnf_cores.clone().or_else(|| {
        f.vnf_cores.as_ref().map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    }) {
        Some(list) => parse_cpu_list(&list).map_err(|reason| match &flags.vnf_cores {
            Some(_) => flag_err("vnf_cores", reason),
            None => err("vnf_cores", reason),
        })?,
        None => default_vnf_cores(tester_core),
    };
    let allowed = allowed_cores();
    if let Some(c) = vnf_cores.iter().find(|c| !allowed.contains(c)) {
        return Err(err(
            "vnf_cores",
            format!("core {c} is not one this process may use ({allowed:?})"),
        ));
    }

    let search = if flags.search || flags.search_per_chain {
        Some(
            search::config(flags, &template).map_err(|(flag, reason)| ScenarioError {
                origin: format!("--{}", flag.replace('_', "-")),
                key: flag.replace('-', "_"),
                reason,
            })?,
        )
    } else {
        None
    };
    // Checked last: everything else about the scenario was found sound first.
    let repeat = flags.repeat.or(f.repeat).unwrap_or(1);
    if repeat == 0 {
        return Err(err("repeat", "at least one repetition".into()));
    }
    let aggregate_rate = template.traffic.rate;
    let streams = (count * if bidirectional { 2 } else { 1 }) as f64;
    let share = |rate: Rate| match rate {
        Rate::Max => Rate::Max,
        Rate::Pps(p) => Rate::Pps(p / streams),
        Rate::L1Bps(b) => Rate::L1Bps(b / streams),
    };
    let chains = (0..count)
        .map(|_| {
            let mut exp = template.clone();
            exp.traffic.rate = share(aggregate_rate);
            exp
        })
        .collect();
    Ok(Scenario {
        name: f.name.unwrap_or_else(|| format!("{count} x {shape_label} {vnf_label}")),
        description: f.description,
        shape: shape_label,
        vnf: vnf_label,
        chains,
        standby,
        aggregate_rate,
        bidirectional,
        line_rate,
        vnf_rate_cap,
        search,
        search_per_chain: flags.search_per_chain,
        hosts,
        veth,
        vnf_cores,
        tester_core,
        repeat,
    })
}

/// The two hosts' layout from the file's `hosts:` and the flags (each flag wins).
fn two_hosts_of(file: &HostsFile, flags: &ScenarioFlags, vnfs: usize, origin: &str) -> Result<TwoHosts, ScenarioError> {
    let at = |flag: bool, key: &str, reason: String| ScenarioError {
        origin: if flag {
            format!("--{}", key.replace('_', "-"))
        } else {
            origin.to_string()
        },
        key: if flag { key.to_string() } else { format!("hosts.{key}") },
        reason,
    };
    let on_a_host = |h: usize| h == 1 || h == 2;
    let from_flag = flags.vnf_hosts.is_some();
    let placed = match flags.vnf_hosts.clone().or_else(|| file.vnfs.clone()) {
        Some(list) => {
            let key = if from_flag { "vnf_hosts" } else { "vnfs" };
            if list.len() != vnfs {
                return Err(at(
                    from_flag,
                    key,
                    format!("{} host(s) for {vnfs} VNF(s) per chain: one each", list.len()),
                ));
            }
            if let Some(h) = list.iter().find(|h| !on_a_host(**h)) {
                return Err(at(from_flag, key, format!("host {h}: hosts are 1 and 2")));
            }
            list
        }
        None => (0..vnfs).map(|i| if i < vnfs / 2 { 1 } else { 2 }).collect(),
    };
    let sink = match (flags.sink_host, file.sink) {
        (Some(h), _) if !on_a_host(h) => return Err(at(true, "sink_host", format!("host {h}: hosts are 1 and 2"))),
        (None, Some(h)) if !on_a_host(h) => return Err(at(false, "sink", format!("host {h}: hosts are 1 and 2"))),
        (a, b) => a.or(b).unwrap_or(*placed.last().expect("a VNF")),
    };
    let (link_flag, link_text) = match (&flags.host_link, &file.link) {
        (Some(t), _) => (true, t.clone()),
        (None, Some(t)) => (false, t.clone()),
        (None, None) => (false, "1Gbit/s".to_string()),
    };
    let rate_bps = line_rate(&link_text).map_err(|r| at(link_flag, if link_flag { "host_link" } else { "link" }, r))?;
    let hosts = TwoHosts {
        vnfs: placed,
        sink,
        link: sfclab_topology::LinkShape {
            rate_bps,
            charge_tunnel: flags.charge_tunnel || file.charge_tunnel.unwrap_or(false),
        },
    };
    if hosts.crossings() == 0 {
        return Err(at(
            from_flag,
            if from_flag { "vnf_hosts" } else { "vnfs" },
            "every place is on host 1: nothing crosses the cable (put a VNF or the sink on host 2)".into(),
        ));
    }
    Ok(hosts)
}

/// A line rate: bits per second at layer 1 (`10Gbit/s`, `2.5Gbps`).
fn line_rate(text: &str) -> Result<f64, String> {
    match text.parse::<Rate>()? {
        Rate::L1Bps(b) if b > 0.0 => Ok(b),
        _ => Err(format!(
            "`{text}` is not a line rate: write bits per second, `10Gbit/s` or `2.5Gbps`"
        )),
    }
}

/// `1`, `0-3`, `0,2-3`: the cores, ascending, each once.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, String> {
    let mut cores = Vec::new();
    for part in text.split(',').map(str::trim) {
        let bad = || format!("`{text}` is not a core list (write `1`, `0-3` or `0,2-3`)");
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim().parse::<usize>(), b.trim().parse::<usize>()),
            None => (part.parse(), part.parse()),
        };
        let (lo, hi) = (lo.map_err(|_| bad())?, hi.map_err(|_| bad())?);
        if lo > hi {
            return Err(bad());
        }
        cores.extend(lo..=hi);
    }
    cores.sort_unstable();
    cores.dedup();
    Ok(cores)
}

fn allowed_cores() -> Vec<usize> {
    core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|c| c.id)
        .collect()
}

/// Every allowed core but the tester's; the tester's own when it is the only one.
fn default_vnf_cores(tester: Option<usize>) -> Vec<usize> {
    let all = allowed_cores();
    let others: Vec<usize> = all.iter().copied().filter(|&c| Some(c) != tester).collect();
    if others.is_empty() { all } else { others }
}

impl Scenario {
    /// Ctrl-C (`stop` set) ends the current window early and runs no more repetitions.
    pub fn stop_on(&mut self, stop: &std::sync::Arc<std::sync::atomic::AtomicBool>) {
        self.chains.iter_mut().for_each(|c| c.stop_on(stop));
    }

    /// VNF processes per core: every VNF of every chain and standby instance over the
    /// cores they share (seed 001's oversubscription, vCPUs per physical core).
    pub fn oversubscription(&self) -> f64 {
        let vnfs: usize = self.chains.iter().map(|c| c.hops.len()).sum::<usize>()
            + self.standby * self.chains.first().map_or(0, |c| c.hops.len());
        vnfs as f64 / self.vnf_cores.len().max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("1").unwrap(), vec![1]);
        assert_eq!(parse_cpu_list("0-3").unwrap(), vec![0, 1, 2, 3]);
        assert_eq!(parse_cpu_list("3, 0-1,1").unwrap(), vec![0, 1, 3]);
        for bad in ["", "a", "2-1", "1-", "-"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad}");
        }
    }
}
