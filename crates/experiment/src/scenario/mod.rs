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
//! nic_capacity: 20Gbit/s # what the NIC carries to and from the VNFs: every VNF's sends share it
//! vnf_rate_cap: 2.5Gbit # each VNF's licence: both its directions policed to this
//! traffic: { rate: 2Mpps, size: imix, flows: 256 }
//! run: { duration: 5s, memif_wait: interrupt }
//! vnf_cores: "1"        # the VNF processes share these cores
//! standby: 0            # VNF processes started but given no traffic
//! repeat: 3
//! ```
//!
//! Hosts on one machine (seed 003's dual host, and more): each host a namespace whose
//! NIC is cabled to the other host (two) or to its port of a top-of-rack bridge (three
//! or more), each cable shaped to a line rate; each VNF sits on a host, the tester sends
//! from host 1 and receives on `sink`'s; every link between places on different hosts
//! is a VXLAN tunnel of its own over the underlay (memif, shared memory, joins places
//! on one host).
//!
//! ```yaml
//! hosts: { count: 2, vnfs: [1, 2], sink: 2, link: 1Gbit/s }
//! ```
//!
//! Unlike chains side by side: `groups`, each a count of its own template with its own
//! traffic over the scenario's (a group's `rate` is its own; the groups without one
//! share the scenario's rate evenly), direction and standby instances. Chains are
//! numbered group after group.
//!
//! ```yaml
//! groups:
//!   - { name: light, chains: 3, vnf: router }
//!   - { name: heavy, chains: 1, shape: pvvp, vnf: multi-feature, traffic: { rate: 100kpps, size: 512 } }
//!   - { name: web, chain: web-chain.yaml, bidirectional: false }
//! traffic: { rate: 1Mpps }  # light's and web's together
//! ```

mod document;
mod file;
mod model;
mod presets;
mod repetitions;
mod run;
mod sched;
mod search;

use std::path::{Path, PathBuf};

use serde::Deserialize;
use sfclab_traffic::Rate;

use crate::chain_file::{ChainFileError, Experiment};
use crate::hop_processes::HopPlan;
pub use crate::remote_hops::Attachment;
use crate::remote_hops::HopControl;
use crate::settings::Settings;

pub use file::parse_cpu_list;

pub use document::{
    Aggregate, ChainResult, DirectionResult, HopDirection, HopFlow, ProcessSched, ScenarioDocument, ScenarioRun,
    ScenarioSearch, ScenarioSummary,
};
pub use model::{POLICED_AT_BPS, licence_key, licence_spec, priced_key, priced_spec};
pub use presets::{VNF_PRESETS, WEB_RULES, web_rules};
pub use repetitions::run;

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
    /// Each NF of --vnf a VNF of its own, chained in order (seed 001's single-feature
    /// VNFs) instead of all in one (its multi-feature VNF); not with --shape.
    #[arg(long, help_heading = "Scenario")]
    pub split: bool,
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
    /// The emulated NIC's capacity between it and the VNFs (`20Gbit/s` at layer 1):
    /// every frame any VNF sends draws on it (seed 001's shared limit, where PVVP's
    /// second VNF pays twice); what it cannot carry is the sending VNF's drop.
    #[arg(long, help_heading = "Scenario")]
    pub nic_capacity: Option<String>,
    /// Each VNF's licence (`2.5Gbit`): a policer after its NFs drops what exceeds this
    /// rate of IP bytes, both directions together (seed 001's CSR 1000v licence).
    #[arg(long, help_heading = "Scenario")]
    pub vnf_rate_cap: Option<String>,
    /// Hosts on this machine (1 to 250): each a namespace, two joined by one cable, more
    /// each cabled to a top-of-rack bridge, every cable shaped to `--host-link`; chains
    /// cross between hosts by tunnels (seed 003).
    #[arg(long, help_heading = "Hosts")]
    pub hosts: Option<usize>,
    /// The host of each VNF of a chain, in order (`2`, `1,2`, `2,3`). Default with two
    /// hosts: the first half of the VNFs on host 1, the rest (a single VNF) on host 2;
    /// with more, the VNFs spread in order over hosts 2 to the last.
    #[arg(long, value_delimiter = ',', help_heading = "Hosts")]
    pub vnf_hosts: Option<Vec<usize>>,
    /// The host the tester receives on (it sends from host 1). Default: the last VNF's.
    #[arg(long, help_heading = "Hosts")]
    pub sink_host: Option<usize>,
    /// Each cable's line rate, each direction, at layer 1 (default `1Gbit/s`).
    #[arg(long, help_heading = "Hosts")]
    pub host_link: Option<String>,
    /// Charge the tunnel's 50 bytes per frame against the cable's rate (a real overlay),
    /// instead of carrying the line rate of the chains' own frames (a direct cable).
    #[arg(long, help_heading = "Hosts")]
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

/// Emulated hosts: how many, where each VNF and the tester's receiver sit (hosts from
/// 1), and their cables.
#[derive(Debug, Clone, PartialEq)]
pub struct Hosts {
    pub count: usize,
    /// Each VNF's host, in chain order.
    pub vnfs: Vec<usize>,
    /// The tester's receiving host (it sends from host 1).
    pub sink: usize,
    pub link: sfclab_topology::LinkShape,
}

impl Hosts {
    /// Each place's host from 0: the tester's sender, each VNF, the tester's receiver.
    pub fn places(&self) -> Vec<usize> {
        std::iter::once(0)
            .chain(self.vnfs.iter().map(|h| h - 1))
            .chain(std::iter::once(self.sink - 1))
            .collect()
    }

    /// Links of a chain that cross between hosts.
    pub fn crossings(&self) -> usize {
        self.places().windows(2).filter(|w| w[0] != w[1]).count()
    }
}

/// Like chains of a scenario: a count of one template (a shape of a VNF, or a chain
/// file) with its traffic; a scenario without `groups:` is one group. As reported, the
/// document's `groups`.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct ChainGroup {
    /// `PVP router` unless named.
    pub name: String,
    /// `PVP`, `PVVP` or the chain file each chain runs.
    pub shape: String,
    /// What each VNF runs (`router`, `nat44+firewall+qos+dpi`).
    pub vnf: String,
    /// Chains given traffic, numbered after the earlier groups'.
    pub chains: usize,
    /// VNF processes per chain.
    pub vnfs_per_chain: usize,
    /// Instances of the chain started but given no traffic.
    pub standby: usize,
    /// Both directions at once on each chain (its traffic the forward direction's; the
    /// reverse's is the same with every flow swapped).
    pub bidirectional: bool,
    /// Each VNF's licence (a policer of IP bytes, both directions), as written (`2.5Gbit`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vnf_rate_cap: Option<String>,
    /// The rate asked of the group's chains and directions together: its own, or its
    /// share of the scenario's (`offered`, as `2Mpps`, `10Gbit/s` at L1 or `max`).
    #[serde(rename = "offered", serialize_with = "as_text")]
    #[schemars(rename = "offered", with = "String")]
    pub rate: Rate,
    /// Frame sizes of each chain's stream.
    pub frame_sizes: String,
}

/// The name of a group that gives none: its shape and what its VNFs run.
fn default_group_name(shape: &str, vnf: &str) -> String {
    format!("{shape} {vnf}")
}

impl ChainGroup {
    /// Whether the group was named in its file, not after its shape and VNF.
    fn named(&self) -> bool {
        self.name != default_group_name(&self.shape, &self.vnf)
    }

    /// Each VNF's licence, bits per second of IP bytes, if it has one.
    fn licence_bps(&self) -> Result<Option<f64>, String> {
        self.vnf_rate_cap
            .as_deref()
            .map(|cap| cap.parse::<sfclab_nf::classes::Rate>().map(|r| r.0 as f64))
            .transpose()
            .map_err(|e| format!("vnf_rate_cap: {e}"))
    }
}

/// A rate as its text (`0.5Mpps`).
fn as_text<S: serde::Serializer>(rate: &Rate, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(rate)
}

/// A scenario ready to run: every chain resolved, checked as a whole.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    pub description: Option<String>,
    /// The chains' groups, in order; chains are numbered group after group.
    groups: Vec<ChainGroup>,
    /// The chains that get traffic, each with its stream's share of the rate (one
    /// stream a direction): `groups[0].chains` of the first group's, then the next's.
    chains: Vec<Experiment>,
    /// Standby instances (started, given no traffic), group after group.
    standby: Vec<Experiment>,
    /// The rate asked of all chains and directions together, as given: the scenario's
    /// (split evenly) or each group's joined by `+`.
    pub offered: String,
    /// The emulated NIC's line rate per direction, bits per second at layer 1.
    pub line_rate: Option<f64>,
    /// The emulated NIC's capacity every VNF's sends share, bits per second at layer 1.
    pub nic_capacity: Option<f64>,
    /// Search each repetition (`--search`): goals, rates, resolution; `max_pps`
    /// infinite means what the tester reaches, measured first.
    pub search: Option<sfclab_measure::SearchConfig>,
    /// The search is per chain (`--search-per-chain`), not of the aggregate.
    pub search_per_chain: bool,
    /// Emulated hosts, when the chains span several.
    pub hosts: Option<Hosts>,
    /// Every link of every chain a veth pair (`chaining: veth`), not memif.
    pub veth: bool,
    /// Cores the VNF processes share.
    pub vnf_cores: Vec<usize>,
    /// The tester's core.
    pub tester_core: Option<usize>,
    pub repeat: usize,
    /// The VNFs run elsewhere ([`Scenario::attach`]).
    attached: Option<Attachment>,
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
        let Some(path) = file else {
            return file::resolve(
                file::ScenarioFile::default(),
                "command line",
                Path::new(""),
                flags,
                settings,
            );
        };
        let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
            origin: path.display().to_string(),
            key: String::new(),
            reason: format!("cannot read: {e}"),
        })?;
        Scenario::from_text(&text, path, flags, settings)
    }

    /// As [`Scenario::load`], of the file at `path` already read (`text`).
    pub fn from_text(
        text: &str,
        path: &Path,
        flags: &ScenarioFlags,
        settings: &Settings,
    ) -> Result<Scenario, ScenarioError> {
        let origin = path.display().to_string();
        let f = file::parse_file(text, &origin, path)?;
        let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
        file::resolve(f, &origin, &dir, flags, settings)
    }

    /// Ctrl-C (`stop` set) ends the current window early and runs no more repetitions.
    pub fn stop_on(&mut self, stop: &sfclab_runtime::Stop) {
        self.chains
            .iter_mut()
            .chain(&mut self.standby)
            .for_each(|c| c.stop_on(stop));
    }

    /// The chains' groups, in order.
    pub fn groups(&self) -> &[ChainGroup] {
        &self.groups
    }

    /// The chains given traffic, group after group.
    pub fn chains(&self) -> &[Experiment] {
        &self.chains
    }

    /// The standby instances, group after group.
    pub fn standby(&self) -> &[Experiment] {
        &self.standby
    }

    /// Chain c's group (chains numbered from 0, group after group).
    pub fn group_of(&self, c: usize) -> &ChainGroup {
        self.group_chains()
            .find(|(_, chains)| chains.contains(&c))
            .map(|(g, _)| g)
            .unwrap_or_else(|| panic!("chain {c} of {}", self.chains.len()))
    }

    /// Each group with its chains' numbers (from 0, group after group).
    pub fn group_chains(&self) -> impl Iterator<Item = (&ChainGroup, std::ops::Range<usize>)> {
        self.groups.iter().scan(0, |first, g| {
            let ours = *first..*first + g.chains;
            *first = ours.end;
            Some((g, ours))
        })
    }

    /// Chain c's directions: 2 when both ways at once, else 1.
    pub fn directions(&self, c: usize) -> usize {
        if self.group_of(c).bidirectional { 2 } else { 1 }
    }

    /// Every chain's shape and VNF alike: the scenario's one group.
    pub fn single_group(&self) -> Option<&ChainGroup> {
        match &self.groups[..] {
            [g] => Some(g),
            _ => None,
        }
    }

    /// Every instance of a chain: the chains given traffic, then the standby instances.
    pub fn instances(&self) -> impl Iterator<Item = &Experiment> {
        self.chains.iter().chain(&self.standby)
    }

    /// Instance `i`'s name among [`Scenario::instances`]: `c<k>` for chain k, `s<k>` for
    /// standby instance k (both from 1); its namespaces and sockets are named by it.
    pub fn instance_label(&self, i: usize) -> String {
        let n = self.chains.len();
        if i < n {
            format!("c{}", i + 1)
        } else {
            format!("s{}", i - n + 1)
        }
    }

    /// Instance `i` forwards both ways at once (a standby instance as its group's chains).
    pub fn instance_both_ways(&self, i: usize) -> bool {
        let n = self.chains.len();
        if i < n {
            self.directions(i) == 2
        } else {
            self.standby_group(i - n).is_none_or(|g| g.bidirectional)
        }
    }

    /// How instance `i`'s VNF processes start: the chain files and flags the local run
    /// spawns them with and `sfclab deploy k8s` gives its Pods. `nic` is the emulated
    /// NIC's capacity file every VNF's sends share, when the scenario has one.
    pub fn hop_plan(&self, i: usize, nic: Option<&Path>) -> Result<HopPlan, String> {
        let exp = self
            .instances()
            .nth(i)
            .ok_or_else(|| format!("no instance {}", i + 1))?;
        let mut plan = HopPlan::of(exp)?.on_cores(&self.vnf_cores);
        if self.instance_both_ways(i) {
            plan = plan.both_ways();
        }
        if let Some(file) = nic {
            plan = plan.with_shared_capacity(file);
        }
        if self.hosts.is_some() || self.veth {
            // A kernel link's end: AF_XDP (generic mode on a tunnel), sleeping when
            // idle as the hops' memif ends do: VNFs share cores.
            let wait = exp.chaining.memif_wait().unwrap_or(sfclab_io::Wait::Interrupt {
                spin: sfclab_io::memif::DEFAULT_SPIN,
            });
            plan = plan.with_io(sfclab_io::IoKind::AfXdp).with_xdp_wait(wait);
        }
        Ok(plan)
    }

    /// The VNFs run elsewhere, started by someone else (a cluster's pods, as `sfclab
    /// deploy k8s` writes them), each serving runs ([`crate::remote_hops`]): the tester
    /// attaches to them instead of building namespaces and starting processes, and runs
    /// on the cores it was given. A link between places on one host is memif, its socket
    /// in `attachment.memif`; with `hosts:`, a link crossing from another host into the
    /// tester or out of it is an interface of the tester's (`c<k>o` for chain k's first
    /// link, `c<k>i` for its last), and the VNFs are reached over TCP.
    pub fn attach(&mut self, attachment: Attachment) -> Result<(), ScenarioError> {
        let refuse = |key: &str, reason: &str| ScenarioError {
            origin: "--attach".into(),
            key: key.into(),
            reason: reason.into(),
        };
        if self.hosts.is_some() && !matches!(attachment.control, HopControl::Tcp(_)) {
            return Err(refuse(
                "hosts",
                "VNFs on several hosts are reached over TCP: give --attach-control tcp:ADDRESS",
            ));
        }
        if self.veth {
            return Err(refuse(
                "chaining",
                "attached VNFs are joined by memif (and, between hosts, by the cluster's links), not veth",
            ));
        }
        if self.nic_capacity.is_some() {
            return Err(refuse(
                "nic_capacity",
                "the emulated NIC is shared by VNF processes of this machine; attached VNFs send through their node's own",
            ));
        }
        if self.instances().any(|c| !c.chaining.dpdk_hops().is_empty()) {
            return Err(refuse(
                "dpdk_hops",
                "attached VNFs are sfclab's (each run reported through its control files)",
            ));
        }
        self.attached = Some(attachment);
        // The tester runs where it was placed (a pod's CPU set), not on a core picked here.
        self.tester_core = None;
        Ok(())
    }

    /// Where the attached VNFs are, when attached.
    pub fn attached(&self) -> Option<&Attachment> {
        self.attached.as_ref()
    }

    /// VNF processes per core: every VNF of every chain and standby instance over the
    /// cores they share (seed 001's oversubscription, vCPUs per physical core).
    pub fn oversubscription(&self) -> f64 {
        let vnfs: usize = self.chains.iter().chain(&self.standby).map(|c| c.hops.len()).sum();
        vnfs as f64 / self.vnf_cores.len().max(1) as f64
    }
}
