//! A scenario's result document (`sfclab scenario --json`, schema `sfclab.scenario/4`):
//! each repetition's chains, hops and processes, and the summary over the repetitions.

use std::collections::BTreeMap;

use serde::Serialize;
use sfclab_core::LatencySummary;
use sfclab_measure::{SearchResult, Summary};
use sfclab_runtime::WindowLoss;

use crate::document::Machine;

/// The scenario's result document (`sfclab scenario --json`, schema `sfclab.scenario/4`).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ScenarioDocument {
    pub schema: &'static str,
    pub version: &'static str,
    pub machine: Machine,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The chains' groups, in order (one unless the scenario gives `groups`); chains
    /// are numbered group after group.
    pub groups: Vec<super::ChainGroup>,
    /// With one group, its shape, VNF, VNF processes per chain, directions, licence and
    /// frame sizes (every chain's); absent with several (each group gives its own).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<String>,
    /// With one group, what each VNF runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vnf: Option<String>,
    /// With one group, VNF processes per chain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vnfs_per_chain: Option<usize>,
    /// With one group, both directions at once on every chain, or `forward` only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bidirectional: Option<bool>,
    /// With one group, frame sizes of every chain's stream.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frame_sizes: Option<String>,
    /// Chains given traffic.
    pub chains: usize,
    /// Chain instances started but given no traffic.
    pub standby: usize,
    /// The rate asked of all chains and directions together, as given: one rate
    /// (`max`, `2Mpps`, `10Gbit/s` at L1) split evenly across them, or each group's
    /// joined by `+`.
    pub offered: String,
    /// The emulated NIC's line rate per direction, Gbit/s at layer 1: every chain's
    /// traffic of one direction shares it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line_rate_gbps: Option<f64>,
    /// The emulated NIC's capacity every VNF's sends share, Gbit/s at layer 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nic_capacity_gbps: Option<f64>,
    /// With one group, each VNF's licence (a policer of IP bytes, both directions), as
    /// given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vnf_rate_cap: Option<String>,
    /// The emulated hosts, when the chains span several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hosts: Option<HostsReport>,
    /// How places are joined: `memif`, `veth` (AF_XDP on veth pairs, sleeping when
    /// idle), `memif within a host, a VXLAN tunnel between hosts`, or memif to VNFs
    /// started elsewhere (`attached`: a cluster's pods).
    pub chaining: String,
    /// How the VNFs' memif receivers wait: `polling` or `interrupt` (`none` without memif).
    pub memif_wait: String,
    /// Cores the VNF processes share (the OS schedules them); empty when attached to
    /// VNFs started elsewhere (they run on the cores they were given there).
    pub vnf_cores: Vec<usize>,
    pub tester_core: Option<usize>,
    /// VNF processes (standby included) per core of `vnf_cores`; absent when attached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub oversubscription: Option<f64>,
    pub duration_s: f64,
    pub warmup_s: f64,
    /// Stopped early (Ctrl-C): the runs kept are whole, the last one's window may be short.
    pub interrupted: bool,
    pub runs: Vec<ScenarioRun>,
    /// The repetitions together.
    pub summary: ScenarioSummary,
}

/// Where the places of each chain sit on the emulated hosts, and their cables.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct HostsReport {
    /// How many hosts.
    pub count: usize,
    /// How they are joined: one cable (two hosts) or each cabled to a top-of-rack bridge.
    pub underlay: String,
    /// Each VNF's host (from 1), in chain order; the tester sends from host 1.
    pub vnf_hosts: Vec<usize>,
    /// The host the tester receives on.
    pub sink_host: usize,
    /// Each cable's line rate, each direction, Gbit/s at layer 1.
    pub link_gbps: f64,
    /// Whether the tunnels' 50 bytes per frame count against it (a real overlay) or
    /// not (the line rate of the chains' own frames, as a direct cable).
    pub charge_tunnel: bool,
    /// Links of each chain that cross between hosts, each a VXLAN tunnel of its own.
    pub crossings_per_chain: usize,
}

/// The hosts' cables over one run, each direction: with two hosts host 1 to 2, then 2
/// to 1; with a top-of-rack switch each host to it, then it to each host (unshaped).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct CableReport {
    pub directions: Vec<CableDirection>,
    /// The shapers' drops are exactly what the chains' tunnels counted as refused (a
    /// check: then each chain's share of them is known exactly).
    pub shaper_drops_seen_at_tunnels: bool,
    /// The machine's input-queue drops over the run (`/proc/net/softnet_stat`, every
    /// CPU: not only this scenario's frames).
    pub input_queue_drops: u64,
    /// Where the loss no chain's counter explained went, when a shared counter equals
    /// it summed over the chains: the cable's far end or the machine's input queues.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attributed_to: Option<String>,
}

/// One direction of the cable: what its token bucket passed and dropped.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct CableDirection {
    /// `host 1 -> host 2`, `host 3 -> top of rack`, `top of rack -> host 3`.
    pub direction: String,
    pub sent: u64,
    /// The shaper's queue was full.
    pub shaper_dropped: u64,
    /// The far end could not take the frame (its receive backlog full).
    pub cable_dropped: u64,
}

/// One link of a chain over kernel interfaces (a VXLAN tunnel between hosts, or a veth
/// pair): what its sending end sent and its receiving end received.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct LinkFlow {
    /// `tunnel` or `veth`.
    pub kind: String,
    /// `tester -> hop 1`, `hop 1 -> hop 2`, `hop 1 -> tester`.
    pub link: String,
    /// Frames the sending end sent (a tunnel: onto the cable), and frames the receiving
    /// end received.
    pub tx: u64,
    pub rx: u64,
    /// Frames the sending end could not send: a tunnel's when the cable's shaper had no
    /// room (the kernel counts its refusal there), a veth's when its peer's input queue
    /// was full.
    pub tx_dropped: u64,
    /// Frames the receiving end dropped.
    pub rx_dropped: u64,
    /// The receiving hop (from 0), none for the tester.
    #[serde(skip)]
    pub(super) receiver: Option<usize>,
}

/// One repetition: every chain, the aggregate, and what the OS did with each VNF.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ScenarioRun {
    /// From 1.
    pub repetition: usize,
    /// From the first namespace made to every chain connected and forwarding.
    pub setup_s: f64,
    /// From stopping the VNFs to the last namespace removed.
    pub teardown_s: f64,
    pub interrupted: bool,
    pub aggregate: Aggregate,
    /// With several groups, each group's chains together.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupAggregate>,
    pub chains: Vec<ChainResult>,
    /// Every VNF process over the measured window (empty when stopped before it).
    pub processes: Vec<ProcessSched>,
    /// With `--search`: what the search found; the chains above were measured at its
    /// first goal's rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search: Option<super::ScenarioSearch>,
    /// With `--search-per-chain`: each chain's own search, the others carrying their
    /// share of the scenario's rate meanwhile; the chains above were then measured
    /// all at once, each at its own first goal's rate.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chain_searches: Vec<super::ScenarioSearch>,
    /// With several hosts: the cables over the whole run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cable: Option<CableReport>,
}

/// All chains together (both directions), over the window.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Aggregate {
    /// Sum of the chains' requested rates, Mpps (`None`: as fast as they can).
    pub offered_mpps: Option<f64>,
    /// Sum of what the chains' generators achieved, Mpps.
    pub generated_mpps: f64,
    /// Sum of the chains' received rates, Mpps.
    pub throughput_mpps: f64,
    /// Sum of the chains' received L1 bit rates.
    pub gbps_l1: f64,
    /// What the tester's generators made but could not hand to a chain (its send ring
    /// full): not offered to the VNFs, counted in `window.lost` all the same.
    pub not_offered: u64,
    /// The window's traffic of every chain: sent, received, lost; exact.
    pub window: WindowLoss,
    /// `lost / sent` of the window.
    pub loss_ratio: f64,
    /// Mean latency over every chain's probes, microseconds.
    pub latency_mean_us: Option<f64>,
    /// The highest of the chains' 99th percentiles, microseconds.
    pub latency_worst_p99_us: Option<f64>,
    pub latency_max_us: Option<f64>,
    /// Every chain's packets conserved exactly.
    pub conserved: bool,
}

/// One group's chains together (its directions), over the window.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GroupAggregate {
    pub group: String,
    #[serde(flatten)]
    pub aggregate: Aggregate,
}

/// One chain: what its tester measured (both directions together, and each on its
/// own), where its losses went, and what each hop did (NFVbench's chain analysis: per
/// hop and direction in, out, dropped).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ChainResult {
    /// From 1.
    pub chain: usize,
    /// Its group's name.
    pub group: String,
    /// Sums over the directions.
    pub requested_mpps: Option<f64>,
    pub generated_mpps: f64,
    pub throughput_mpps: f64,
    pub gbps_l1: f64,
    pub window: WindowLoss,
    pub loss_ratio: f64,
    /// Each direction as its tester measured it: `forward`, then `reverse`.
    pub directions: Vec<DirectionResult>,
    /// Whole run (warm-up, window, drain), by place and cause: the tester's own
    /// (`tester line-rate`, `tester ring-full`, ...) and each hop's (`hop 1 router no-route`).
    pub drops: BTreeMap<String, u64>,
    /// The tester's loss no hop's counter explains (memif itself loses nothing).
    pub unaccounted: u64,
    /// Generated = received + dropped at the tester, and the hops' drops are exactly
    /// what the tester did not get back.
    pub conserved: bool,
    pub hops: Vec<HopFlow>,
    /// Each link of the chain over kernel interfaces: with several hosts the tunnels that
    /// cross the cable, with `chaining: veth` every link.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_links: Vec<LinkFlow>,
}

/// One direction of a chain, as its tester measured it over the window.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct DirectionResult {
    /// `forward` (tester -> first VNF -> ... -> tester) or `reverse` (the way back).
    pub direction: String,
    pub requested_mpps: Option<f64>,
    pub generated_mpps: f64,
    pub throughput_mpps: f64,
    pub gbps_l1: f64,
    pub window: WindowLoss,
    pub loss_ratio: f64,
    pub latency: Option<LatencySummary>,
}

/// One hop of a chain over its whole run: frames in, out to the next hop (or the
/// tester), dropped (each drop by place and reason in the chain's `drops`); both
/// directions together, and each on its own.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct HopFlow {
    /// From 1.
    pub hop: usize,
    pub nfs: Vec<String>,
    pub rx: u64,
    pub tx: u64,
    pub dropped: u64,
    /// TSC cycles the VNF spent per frame it took in, counting only its loop's turns
    /// that moved frames (not polling an empty ring, spinning or asleep): its cost as
    /// the model prices it, measured in place. Time the OS gave another process in
    /// the middle of such a turn is in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_cycles_per_frame: Option<f64>,
    /// Per direction: `forward`, then `reverse` (`dropped`: in minus out).
    pub directions: Vec<HopDirection>,
    /// Its process's report was missing (it failed): what it left on stderr.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One direction through one hop.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct HopDirection {
    pub direction: String,
    pub rx: u64,
    pub tx: u64,
    pub dropped: u64,
}

/// A VNF process as the OS scheduled it (`/proc/PID/task/*/schedstat`, `status`).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ProcessSched {
    /// From 1; standby instances are numbered after the chains.
    pub chain: usize,
    pub hop: usize,
    pub standby: bool,
    pub pid: u32,
    /// CPU time over the measured window, seconds, and as a share of its length (read
    /// as the window opened and closed, not over the drains after the warm-up and the
    /// window, which wait for frames lost on the way). The counts below over it too.
    pub cpu_s: f64,
    pub cpu_share: f64,
    /// Time spent runnable but waiting for a core.
    pub run_queue_delay_s: f64,
    pub timeslices: u64,
    pub voluntary_switches: u64,
    pub involuntary_switches: u64,
}

/// The repetitions together: mean, standard deviation, 95% interval (Student's t),
/// median and range.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ScenarioSummary {
    pub aggregate_mpps: Option<Summary>,
    pub aggregate_gbps_l1: Option<Summary>,
    pub loss_ratio: Option<Summary>,
    pub latency_mean_us: Option<Summary>,
    /// Chain by chain.
    pub chain_mpps: Vec<Option<Summary>>,
    /// With several groups, group by group (its chains together).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub group_mpps: Vec<GroupMpps>,
    /// Whether the aggregate's 95% interval lies within 5% of its mean (seed 003's
    /// criterion); `None` for one repetition.
    pub ci95_within_5_percent: Option<bool>,
    /// With `--search`: each goal's aggregate rate (its lower bound), Mpps, over the
    /// repetitions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub goals: Vec<GoalSummary>,
    /// With `--search-per-chain`: chain by chain, each goal's rate (Mpps, the chain's
    /// directions together) over the repetitions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chain_goals: Vec<Vec<GoalSummary>>,
}

/// One group's throughput over the repetitions.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GroupMpps {
    pub group: String,
    pub mpps: Option<Summary>,
}

/// One loss goal's found rate over the repetitions.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GoalSummary {
    pub goal: String,
    /// `None` when a repetition found no rate meeting it.
    pub aggregate_mpps: Option<Summary>,
}

pub(super) fn summarize(runs: &[ScenarioRun], chains: usize, groups: &[super::ChainGroup]) -> ScenarioSummary {
    let of = |f: &dyn Fn(&ScenarioRun) -> Option<f64>| -> Option<Summary> {
        let v: Option<Vec<f64>> = runs.iter().map(f).collect();
        Summary::of(&v?)
    };
    let aggregate_mpps = of(&|r| Some(r.aggregate.throughput_mpps));
    ScenarioSummary {
        aggregate_gbps_l1: of(&|r| Some(r.aggregate.gbps_l1)),
        loss_ratio: of(&|r| Some(r.aggregate.loss_ratio)),
        latency_mean_us: of(&|r| r.aggregate.latency_mean_us),
        chain_mpps: (0..chains)
            .map(|c| of(&|r| r.chains.get(c).map(|x| x.throughput_mpps)))
            .collect(),
        group_mpps: match groups {
            [_] => Vec::new(),
            _ => groups
                .iter()
                .enumerate()
                .map(|(k, g)| GroupMpps {
                    group: g.name.clone(),
                    mpps: of(&|r| r.groups.get(k).map(|x| x.aggregate.throughput_mpps)),
                })
                .collect(),
        },
        ci95_within_5_percent: aggregate_mpps
            .as_ref()
            .and_then(Summary::relative_ci95)
            .map(|r| r <= 0.05),
        aggregate_mpps,
        goals: goal_summaries(runs, |r| r.search.as_ref()),
        chain_goals: (0..chains)
            .map(|c| goal_summaries(runs, |r| r.chain_searches.get(c)))
            .take_while(|g| !g.is_empty())
            .collect(),
    }
}

/// Each goal's lower bound over the repetitions, of the search `of` each picks.
fn goal_summaries(
    runs: &[ScenarioRun],
    of: impl Fn(&ScenarioRun) -> Option<&super::ScenarioSearch>,
) -> Vec<GoalSummary> {
    let Some(first) = runs.iter().find_map(&of) else {
        return Vec::new();
    };
    first
        .result
        .goals
        .iter()
        .enumerate()
        .map(|(k, g)| {
            let found: Option<Vec<f64>> = runs
                .iter()
                .map(|r| of(r)?.result.goals.get(k)?.lower_pps.map(|p| p / 1e6))
                .collect();
            GoalSummary {
                goal: g.goal.name.clone(),
                aggregate_mpps: found.and_then(|v| Summary::of(&v)),
            }
        })
        .collect()
}

/// What a repetition's search found, and the rate its chains were then measured at.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ScenarioSearch {
    /// The goals' bounds and every trial (aggregate offered rate, sent and received
    /// over all chains and directions).
    pub result: SearchResult,
    /// The aggregate rate the chains were measured at afterwards (the first goal's lower
    /// bound; the minimum rate when it had none), packets per second.
    pub measured_at_pps: f64,
}
