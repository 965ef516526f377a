//! Scenarios priced (seed 001's many chains on one machine): every chain's streams pass
//! the tester's core, the NIC's line per direction, each VNF process's share of the cores
//! the VNFs share, its licence, and the NIC's capacity every VNF send draws on. Unlike a
//! chain alone, the resources are shared between chains and what one cannot carry is
//! dropped at a place that still spent work on it (the tester generated a frame a full
//! ring refuses; a first VNF worked on a frame the second's ring drops), so the model is
//! a flow model solved to its fixed point, each resource passing what it can of what
//! reaches it, in the order the frames meet them:
//!
//! - the line (`line_bps`, layer 1, per direction): the tester offers at most what it
//!   carries, the direction's streams cut in proportion (not a loss: not offered);
//! - the tester's core: one thread generating every stream in turn, so a tester that
//!   cannot keep up generates the streams alike (each at most its offer), paying per
//!   frame generated, per frame a ring took and per frame received back;
//! - each VNF process: its frames cost the memif hop, its NFs and the sharing of its core
//!   at k busy processes per core; the cores are shared as the OS scheduler shares CPU
//!   time, evenly between the processes that want more than an even share (a waiting
//!   interrupt-mode process wants only what its frames cost; a polling one always all);
//!   what a process cannot work through is dropped at its input ring;
//! - its licence (IP bytes per second, both directions together): a policer after its NFs;
//! - the NIC's capacity (layer 1): every frame any VNF sends draws on it, shared evenly
//!   between the VNFs that send (its arbiter serves their queues in turn), what one
//!   leaves the others'.

use serde::Serialize;

use crate::calibration::{Calibration, MemifWaitCalibration};
use crate::chain::mean_over;

/// Ethernet header and FCS: a frame's bytes that are not its IP packet.
pub(crate) const NOT_IP_BYTES: f64 = 18.0;
/// Preamble, delimiter and gap: what a frame costs a line beyond its bytes.
const L1_OVERHEAD_BYTES: f64 = 20.0;

/// One direction of one chain's traffic.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamModel {
    /// The chain's label (`c1`).
    pub chain: String,
    /// The reverse direction (the tester's second port to its first).
    pub reverse: bool,
    /// Packets per second asked; `None`: as fast as the tester goes.
    pub offered_pps: Option<f64>,
    /// Frame sizes with FCS and their weights.
    pub frames: Vec<(f64, f64)>,
    /// The VNF processes it crosses, in order (indices into [`ScenarioModel::processes`]).
    pub path: Vec<usize>,
    /// Per link, from the tester to the first process, between processes, to the tester
    /// (`path.len() + 1` of them): the way it crosses the hosts' cable (0: host 1 to
    /// host 2, 1: back), or `None` where both ends are on one host (memif). Empty:
    /// none crosses.
    pub crossings: Vec<Option<usize>>,
}

impl StreamModel {
    /// The way link `link` crosses the hosts' cable, if it does.
    pub fn crosses(&self, link: usize) -> Option<usize> {
        self.crossings.get(link).copied().flatten()
    }

    /// Its mean frame, bytes with FCS (an empty mix: none).
    pub fn mean_frame(&self) -> f64 {
        mean_over(&self.frames, Ok).unwrap_or(0.0)
    }
}

/// One VNF process.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessModel {
    /// `c1 hop 1`, `s2 hop 1` (standby).
    pub name: String,
    /// Its NFs' calibration keys ([`crate::nf_key`]), in order.
    pub nfs: Vec<String>,
    /// Its licence, IP bits per second both directions together.
    pub licence_bps: Option<f64>,
}

/// A scenario as the model prices it.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioModel {
    pub streams: Vec<StreamModel>,
    /// Every VNF process, standby instances' too (a polling one takes its share).
    pub processes: Vec<ProcessModel>,
    /// Cores the VNF processes share.
    pub vnf_cores: usize,
    /// `polling` or `interrupt`: how every VNF's memif ends wait.
    pub wait: String,
    /// The NIC's line per direction, bits per second at layer 1.
    pub line_bps: Option<f64>,
    /// Descriptors per memif ring: what a link between two processes taking turns on a
    /// core can hold between their turns.
    pub ring_frames: f64,
    /// The NIC's capacity every VNF send draws on, bits per second at layer 1.
    pub nic_capacity_bps: Option<f64>,
    /// The cable between two hosts, when the chains span them.
    pub cable: Option<Cable>,
}

/// The cable between two hosts: a line each way, shaped at layer 1.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cable {
    pub bps: f64,
    /// Bits per frame it carries beyond the frame's own (the tunnel's headers, where
    /// they are charged).
    pub extra_bits: f64,
}

/// A place that limits what passes, as a prediction names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Bottleneck {
    /// The NIC's line in one direction.
    Line { reverse: bool },
    /// The tester's core.
    Tester,
    /// The cores the VNF processes share (this process could not work through its frames).
    VnfCore { process: String },
    /// The cores the VNF processes share, as the whole's limit (several processes could
    /// not work through their frames).
    VnfCores,
    /// A VNF's licence.
    Licence { process: String },
    /// The NIC's capacity.
    NicCapacity,
    /// The cable between two hosts, one way (0: host 1 to host 2, 1: back).
    Cable { way: usize },
}

impl std::fmt::Display for Bottleneck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Bottleneck::Line { reverse: false } => f.write_str("line (forward)"),
            Bottleneck::Line { reverse: true } => f.write_str("line (reverse)"),
            Bottleneck::Tester => f.write_str("tester core"),
            Bottleneck::VnfCore { process } => write!(f, "VNF core ({process})"),
            Bottleneck::VnfCores => f.write_str("the VNFs' cores"),
            Bottleneck::Licence { process } => write!(f, "licence ({process})"),
            Bottleneck::NicCapacity => f.write_str("NIC capacity"),
            Bottleneck::Cable { way: 0 } => f.write_str("cable (host 1 to 2)"),
            Bottleneck::Cable { .. } => f.write_str("cable (host 2 to 1)"),
        }
    }
}

/// One stream's fate at the offered load, packets per second.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct StreamFlow {
    pub chain: String,
    pub reverse: bool,
    /// Asked (`None`: as fast as the tester goes).
    pub offered_pps: Option<f64>,
    /// What the tester generated.
    pub generated_pps: f64,
    pub received_pps: f64,
    /// Where the rest was lost, packets per second (`tester ring-full` when the first
    /// VNF's ring was full, `c1 hop 2 ring-full`, `c1 hop 1 licence`, `c1 hop 1
    /// nic-capacity`).
    pub dropped: Vec<(String, f64)>,
    /// What limits it: the resource that drops or holds back its frames, or none.
    pub bottleneck: Option<Bottleneck>,
}

/// A VNF process at the offered load.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ProcessLoad {
    pub name: String,
    /// Cycles per frame: hop, NFs, sharing.
    pub cycles_per_frame: f64,
    /// The terms of `cycles_per_frame`.
    pub terms: Vec<(String, f64)>,
    /// Frames per second reaching its input ring, and worked through.
    pub arriving_pps: f64,
    pub worked_pps: f64,
    /// Its share of one core's cycles.
    pub core_share: f64,
}

/// The scenario at one offered load.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ScenarioFlow {
    pub streams: Vec<StreamFlow>,
    pub processes: Vec<ProcessLoad>,
    pub generated_pps: f64,
    pub received_pps: f64,
    /// The tester's cycles per second at this load over its clock (1: it cannot go faster).
    pub tester_utilisation: f64,
}

/// Streams' per-frame figures from their mixes, computed once.
#[derive(Clone)]
struct StreamFigures {
    l1_bits: f64,
    /// What a frame of it costs the hosts' cable.
    cable_bits: f64,
    ip_bits: f64,
    tester_generate: f64,
    tester_send: f64,
    tester_receive: f64,
}

/// A scenario priced with a calibration: per-frame costs fixed, the flow solved per load.
#[derive(Clone)]
pub struct PricedScenario<'a> {
    model: &'a ScenarioModel,
    hz: f64,
    figures: Vec<StreamFigures>,
    /// Per process: total cycles per frame and its terms.
    costs: Vec<ProcessCost>,
    polling: bool,
    /// Per stream: the most its chain passes when its processes take turns on shared
    /// cores (polling: a ring of frames per link per round of turns; interrupt: its
    /// share of what VNFs taking turns on one core carry); infinite otherwise.
    turn_caps: Vec<f64>,
    /// The limit taken away to find what limits the whole next: a configured one (line,
    /// licence, NIC capacity, cable) the solver leaves out, its kind everywhere; the
    /// tester's and the VNFs' cores are lifted by pricing their frames [`LIFT`] times
    /// cheaper instead.
    lifted: Option<Bottleneck>,
}

/// How many times faster a core is made to find the limit behind it (10 polling hops
/// on one core carry 0.03 Mpps, the tester 7 to 8).
const LIFT: f64 = 10_000.0;

impl<'a> PricedScenario<'a> {
    /// Prices every stream's and process's frames; an error names the term missing.
    pub fn new(cal: &Calibration, model: &'a ScenarioModel) -> Result<PricedScenario<'a>, String> {
        let memif = cal.memif.as_ref().ok_or(
            "the calibration has no memif terms (scenarios' VNF processes and tester): calibrate with `sfclab model calibrate --memif` (needs root)",
        )?;
        let wait = memif.wait(&model.wait)?;
        if model.streams.is_empty() {
            return Err("the scenario has no chain given traffic".into());
        }
        if model.vnf_cores == 0 {
            return Err("the VNF processes have no core".into());
        }
        let crossing = model.streams.iter().any(|s| s.crossings.iter().any(Option::is_some));
        if crossing && wait.tunnel.is_none() {
            return Err(
                "the calibration has no links between hosts (a calibration before sfclab.calibration/7): calibrate with `sudo sfclab model calibrate --memif`".into(),
            );
        }
        let mut figures = Vec::new();
        for s in &model.streams {
            if let Some(&p) = s.path.iter().find(|&&p| p >= model.processes.len()) {
                return Err(format!("stream of {} crosses process {p}, which is not there", s.chain));
            }
            let l1_bits = mean_over(&s.frames, |b| Ok((b + L1_OVERHEAD_BYTES) * 8.0))?;
            figures.push(StreamFigures {
                l1_bits,
                cable_bits: l1_bits + model.cable.map_or(0.0, |c| c.extra_bits),
                ip_bits: mean_over(&s.frames, |b| Ok((b - NOT_IP_BYTES) * 8.0))?,
                // Differences of runs: one below zero is a term too small to see.
                tester_generate: mean_over(&s.frames, |b| memif.tester_generate.at(b))?.max(0.0),
                // Into a tunnel: measured at the smallest size, priced at every size
                // (the kernel's work per frame, not per byte, is most of it).
                tester_send: match (s.crosses(0), &wait.tunnel) {
                    (Some(_), Some(t)) => t.tester_send.cycles.max(0.0),
                    _ => mean_over(&s.frames, |b| memif.tester_send.at(b))?.max(0.0),
                },
                tester_receive: mean_over(&s.frames, |b| memif.tester_receive.at(b))?.max(0.0),
            });
        }
        let polling = model.wait == "polling";
        // Polling processes that share a core never sleep: each holds it for its turn,
        // and a link between two of them passes at most a ring between their turns.
        let per_core = model.processes.len() as f64 / model.vnf_cores as f64;
        // Waiting processes on a shared core take turns too: woken, each waits its turn
        // while its ring refuses frames; what they carry in all is shared by the
        // streams entering them. They count by the share of their frames the tester
        // sends (a PVP VNF 1, each of a PVVP pair both ways 1/2, a VNF behind another
        // on its core 0: that one wakes it, in turn).
        let costs: Vec<ProcessCost> = model
            .processes
            .iter()
            .enumerate()
            .map(|(i, p)| process_cost(cal, wait, model, i, p, polling))
            .collect::<Result<_, _>>()?;
        let woken_by_tester: f64 = (0..model.processes.len()).map(|p| from_tester(model, p)).sum();
        let carried = if polling || model.vnf_cores > 1 {
            // Measured on one core; how processes spread over several take turns is not.
            f64::INFINITY
        } else {
            // VNFs of a kind the calibration ran taking turns carry what that kind did
            // (averaged as the tester wakes them); else by their work, as the tester wakes
            // them: VNFs that work longer on each frame sleep and are woken less often.
            let woken: Vec<(f64, &ProcessModel)> = (0..model.processes.len())
                .map(|i| (from_tester(model, i), &model.processes[i]))
                .filter(|(w, _)| *w > 0.0)
                .collect();
            let own: Option<f64> = woken
                .iter()
                .map(|(w, p)| wait.vnf_turns_at(&p.nfs, woken_by_tester).map(|pps| w * pps))
                .sum::<Option<f64>>()
                .filter(|_| !woken.is_empty());
            match own {
                Some(sum) => sum / woken_by_tester,
                None => {
                    let work: f64 = (0..model.processes.len())
                        .map(|i| from_tester(model, i) * costs[i].work)
                        .sum::<f64>()
                        / woken_by_tester.max(f64::MIN_POSITIVE);
                    wait.taking_turns_at(woken_by_tester, work)
                }
            }
        };
        let turn_caps = model
            .streams
            .iter()
            .map(
                |s| match (wait.turn_at(per_core), polling && per_core > 1.0 && s.path.len() > 1) {
                    (Some(turn), true) => model.ring_frames / (per_core * turn),
                    _ => carried / model.streams.len() as f64,
                },
            )
            .collect();
        Ok(PricedScenario {
            model,
            hz: cal.machine.tsc_hz,
            figures,
            costs,
            polling,
            turn_caps,
            lifted: None,
        })
    }

    /// The same with `limit` taken away: its kind everywhere (every licence, both
    /// directions of the line, every VNF core), a core by being [`LIFT`] times faster.
    fn lifting(&self, limit: &Bottleneck) -> PricedScenario<'a> {
        let mut lifted = self.clone();
        match limit {
            Bottleneck::Tester => {
                for f in &mut lifted.figures {
                    f.tester_generate /= LIFT;
                    f.tester_send /= LIFT;
                    f.tester_receive /= LIFT;
                }
            }
            Bottleneck::VnfCore { .. } | Bottleneck::VnfCores => {
                for c in &mut lifted.costs {
                    c.cycles /= LIFT;
                    c.send /= LIFT;
                    c.work /= LIFT;
                    c.kernel_arriving /= LIFT;
                    c.kernel_sent /= LIFT;
                }
                for cap in &mut lifted.turn_caps {
                    *cap *= LIFT;
                }
            }
            Bottleneck::Line { .. }
            | Bottleneck::Licence { .. }
            | Bottleneck::NicCapacity
            | Bottleneck::Cable { .. } => {
                lifted.lifted = Some(limit.clone());
            }
        }
        lifted
    }

    /// The same with the tester's costs left out: traffic that comes from outside the
    /// machine (a plan's demand), where the tester here is not part of the deployment.
    pub fn tester_outside(mut self) -> Self {
        for f in &mut self.figures {
            f.tester_generate = 0.0;
            f.tester_send = 0.0;
            f.tester_receive = 0.0;
        }
        self
    }

    /// Every stream at its offered rate times `scale` (1: as asked).
    pub fn flow(&self, scale: f64) -> ScenarioFlow {
        Solver::new(self, scale).solve()
    }

    /// The largest `scale` of every stream's offer at which nothing is lost and the
    /// tester generates all of it (streams offered `max` are offered what the tester
    /// generates), with the flow just past it naming what limits each stream, and the
    /// limit the whole would meet next were that one taken away.
    pub fn capacity(&self) -> Capacity {
        let mut first = self.first_limit();
        if let Some(limit) = &first.bottleneck {
            let behind = self.lifting(limit).first_limit();
            first.next_limit = behind
                .bottleneck
                .filter(|b| !same_kind(b, limit) && behind.aggregate_pps.is_finite())
                .map(|bottleneck| NextLimit {
                    bottleneck,
                    aggregate_pps: behind.aggregate_pps,
                    margin_pct: 100.0 * (behind.aggregate_pps / first.aggregate_pps.max(f64::MIN_POSITIVE) - 1.0),
                });
        }
        first
    }

    /// [`Self::capacity`] without the next limit (a plan prices many deployments and
    /// needs only the first).
    pub fn first_limit(&self) -> Capacity {
        let lossless = |scale: f64| {
            let f = self.flow(scale);
            let offered: f64 = self.offered_at(scale);
            let lost = f.generated_pps - f.received_pps;
            lost <= 1e-6 * f.generated_pps.max(1.0) && f.generated_pps >= offered * (1.0 - 1e-6)
        };
        let all_max = self.model.streams.iter().all(|s| s.offered_pps.is_none());
        let scale = if all_max {
            1.0
        } else {
            // Double until something gives, then halve the interval.
            let (mut lo, mut hi) = (0.0, 1.0);
            let mut tries = 0;
            while lossless(hi) && tries < 60 {
                lo = hi;
                hi *= 2.0;
                tries += 1;
            }
            for _ in 0..50 {
                let mid = (lo + hi) / 2.0;
                if lossless(mid) { lo = mid } else { hi = mid }
            }
            lo
        };
        let at = self.flow(scale);
        // What limits each stream: where it loses frames just past the capacity.
        // Offered all the tester sends, the capacity's own flow is that one.
        let past = (!all_max).then(|| self.flow(scale * 1.02));
        let past = past.as_ref().unwrap_or(&at);
        let streams: Vec<Option<Bottleneck>> = past.streams.iter().map(|s| s.bottleneck.clone()).collect();
        let mut whole: Vec<(Bottleneck, usize)> = Vec::new();
        for b in streams.iter().flatten() {
            // The processes share their cores: for the whole, one resource.
            let b = match b {
                Bottleneck::VnfCore { .. } => &Bottleneck::VnfCores,
                other => other,
            };
            match whole.iter_mut().find(|(w, _)| w == b) {
                Some((_, n)) => *n += 1,
                None => whole.push((b.clone(), 1)),
            }
        }
        whole.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        Capacity {
            scale,
            aggregate_pps: at.received_pps,
            per_stream_pps: at.streams.iter().map(|s| s.received_pps).collect(),
            stream_bottlenecks: streams,
            bottleneck: whole.into_iter().next().map(|(b, _)| b),
            next_limit: None,
        }
    }

    fn offered_at(&self, scale: f64) -> f64 {
        self.model
            .streams
            .iter()
            .filter_map(|s| s.offered_pps)
            .map(|o| o * scale)
            .sum()
    }
}

/// Where a scenario stops carrying everything it is offered.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Capacity {
    /// The factor of the offered rates at which it does (1 where every stream is offered
    /// `max`: the capacity is then what the tester's full speed delivers).
    pub scale: f64,
    /// What it delivers there in all, packets per second.
    pub aggregate_pps: f64,
    pub per_stream_pps: Vec<f64>,
    /// What limits each stream just past it.
    pub stream_bottlenecks: Vec<Option<Bottleneck>>,
    /// What limits most streams.
    pub bottleneck: Option<Bottleneck>,
    /// What would limit the whole next, were `bottleneck` taken away (`None`: nothing
    /// within [`LIFT`] times its speed for a core). Two limits within [`EDGE_MARGIN_PCT`]
    /// of each other are an edge: a run may meet either first.
    pub next_limit: Option<NextLimit>,
}

/// Two limits at most this far apart, percent, are an edge: which one a run meets first
/// is past what the model can tell. It is the bound `sfclab bench model` holds the
/// median cell's prediction to: a model trusted to 10 % on a figure cannot order two
/// limits closer than that. (On E'', 2026-12-06, the tester's term priced three PVP
/// router cells 8 to 9 % under their measurement in one round, while the model put
/// their VNFs' cores 1.7 to 5.1 % behind the tester.)
pub const EDGE_MARGIN_PCT: f64 = 10.0;

/// The limit behind a scenario's bottleneck.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct NextLimit {
    pub bottleneck: Bottleneck,
    /// What the whole would deliver in all at it, packets per second.
    pub aggregate_pps: f64,
    /// How much more that is than the capacity, percent of it.
    pub margin_pct: f64,
}

impl NextLimit {
    /// Whether it is close enough to the first to be met first in a run
    /// ([`EDGE_MARGIN_PCT`]).
    pub fn at_an_edge(&self) -> bool {
        self.margin_pct <= EDGE_MARGIN_PCT
    }
}

/// Whether two limits are the same resource for the whole (any VNF core is the VNFs'
/// cores; any licence, the licences).
fn same_kind(a: &Bottleneck, b: &Bottleneck) -> bool {
    use Bottleneck::{Licence, Line, VnfCore, VnfCores};
    matches!(
        (a, b),
        (VnfCore { .. } | VnfCores, VnfCore { .. } | VnfCores)
            | (Licence { .. }, Licence { .. })
            | (Line { .. }, Line { .. })
    ) || a == b
}

/// The share of process `i`'s streams that enter the chain at it, from the tester (0
/// where none pass it).
fn from_tester(model: &ScenarioModel, i: usize) -> f64 {
    let through: Vec<&StreamModel> = model.streams.iter().filter(|s| s.path.contains(&i)).collect();
    if through.is_empty() {
        return 0.0;
    }
    // A tester's frame through a tunnel wakes the VNF through the kernel, not the
    // tester's signal.
    through
        .iter()
        .filter(|s| s.path.first() == Some(&i) && s.crosses(0).is_none())
        .count() as f64
        / through.len() as f64
}

/// Process `i`'s cycles per frame and their terms.
fn process_cost(
    cal: &Calibration,
    wait: &MemifWaitCalibration,
    model: &ScenarioModel,
    i: usize,
    p: &ProcessModel,
    polling: bool,
) -> Result<ProcessCost, String> {
    // Its frames' sizes: those of every stream through it (a standby process has none;
    // it is priced at the first stream's, and only matters when polling).
    let through: Vec<&StreamModel> = model.streams.iter().filter(|s| s.path.contains(&i)).collect();
    let frames: Vec<(f64, f64)> = if through.is_empty() {
        model.streams[0].frames.clone()
    } else {
        through.iter().flat_map(|s| s.frames.iter().copied()).collect()
    };
    // Frames one way only: its other side is polled and found empty.
    let one_way = through.windows(2).all(|w| w[0].reverse == w[1].reverse);
    let hop = mean_over(&frames, |b| wait.hop_of(one_way).at(b))?.max(0.0);
    let hop_label = format!("memif hop ({}{})", model.wait, if one_way { ", one way" } else { "" });
    // Busy processes per core: every process with traffic (and every polling one).
    let busy = model
        .processes
        .iter()
        .enumerate()
        .filter(|(j, _)| polling || model.streams.iter().any(|s| s.path.contains(j)))
        .count();
    let k = busy as f64 / model.vnf_cores as f64;
    // On one core a link to another VNF costs its own term, in place of that end's half
    // hop; an end that crosses between hosts costs the tunnel's.
    let links = wait.same_core_link.is_some() && model.vnf_cores == 1;
    let link = if links && through.iter().any(|s| s.path.len() > 1) {
        mean_over(&frames, |b| Ok(wait.link_at(one_way, k, b)?.unwrap_or(0.0)))?.max(0.0)
    } else {
        0.0
    };
    let tunnel = wait.tunnel.as_ref().map(|t| t.parts());
    // Per frame, averaged over its streams: its ends of each kind, its sending end's
    // cycles, and the kernel's receive work for its frames (for those it receives
    // through a tunnel, and those it sends through one to the tester).
    let (mut halves, mut linked, mut into, mut out_of, mut sending) = (0.0, 0.0, 0.0, 0.0, 0.0);
    let (mut kernel_arriving, mut kernel_sent) = (0.0, 0.0);
    let n = through.len() as f64;
    for st in &through {
        let at = st.path.iter().position(|&q| q == i).expect("the stream passes it");
        for (end, crosses, to_vnf) in [
            (0, st.crosses(at), at > 0),
            (1, st.crosses(at + 1), at + 1 < st.path.len()),
        ] {
            let cycles = match (crosses, tunnel) {
                (Some(_), Some(t)) if end == 0 => {
                    into += 1.0 / n;
                    kernel_arriving += t.kernel / n;
                    t.receiving
                }
                (Some(_), Some(t)) => {
                    out_of += 1.0 / n;
                    if !to_vnf {
                        kernel_sent += t.kernel / n;
                    }
                    t.sending
                }
                _ if to_vnf && links => {
                    linked += 1.0 / n;
                    link / 2.0
                }
                _ => {
                    halves += 1.0 / n;
                    hop / 2.0
                }
            };
            if end == 1 {
                sending += cycles / n;
            }
        }
    }
    if through.is_empty() {
        halves = 2.0;
        sending = hop / 2.0;
    }
    let mut terms = vec![(hop_label, hop * halves / 2.0)];
    if linked > 0.0 {
        terms.push(("memif links to VNFs on its core".to_string(), link * linked / 2.0));
    }
    if let Some(t) = tunnel.filter(|_| into > 0.0) {
        terms.push(("link between hosts, its socket in".to_string(), t.receiving * into));
    }
    if let Some(t) = tunnel.filter(|_| out_of > 0.0) {
        terms.push(("link between hosts, its socket out".to_string(), t.sending * out_of));
    }
    let mut work = 0.0;
    for key in &p.nfs {
        let cycles = mean_over(&frames, |b| cal.vnf_nf_cycles(key, b))?;
        work += cycles;
        terms.push((key.clone(), cycles));
    }
    // Per frame where calibrated so (polling VNFs, preempted); waiting ones take turns
    // instead (the link's term, and the ceiling on what the tester's wake carry).
    let sharing = wait.sharing_at(k).max(0.0);
    if k > 1.0 && !wait.sharing.is_empty() {
        terms.push((format!("sharing ({k:.2} per core)"), sharing));
    }
    // The core's time the process does not get, whatever it does.
    let share = wait.available_share();
    if share < 1.0 {
        let ran: f64 = terms.iter().map(|t| t.1).sum();
        terms.push((
            format!("its core's time not its ({:.1} %)", 100.0 * (1.0 - share)),
            ran * (1.0 / share - 1.0),
        ));
    }
    Ok(ProcessCost {
        cycles: terms.iter().map(|t| t.1).sum::<f64>().max(1.0),
        send: sending / share,
        work,
        terms,
        kernel_arriving,
        kernel_sent,
    })
}

/// What a frame costs a process: cycles in all, its terms, the part that sends it, and
/// its NFs' work.
#[derive(Clone)]
struct ProcessCost {
    cycles: f64,
    terms: Vec<(String, f64)>,
    send: f64,
    work: f64,
    /// The kernel's receive work on its core outside the scheduler's shares (softirq),
    /// per frame arriving at it through a tunnel (refused ones too: the kernel drops
    /// them at its socket after the work), and per frame it sends to the tester
    /// through one.
    kernel_arriving: f64,
    kernel_sent: f64,
}

impl ProcessCost {
    /// A frame's cycles when `passing` of those worked through are sent.
    fn worked(&self, passing: f64) -> f64 {
        (self.cycles - (1.0 - passing.clamp(0.0, 1.0)) * self.send).max(1.0)
    }
}

/// The fixed point of the flow at one load.
struct Solver<'p, 'a> {
    priced: &'p PricedScenario<'a>,
    /// What each stream may offer after its line, packets per second (infinite: `max`).
    allowed: Vec<f64>,
    generated: Vec<f64>,
    /// Per stream, per process of its path: the fraction of its frames arriving there
    /// that the process's input ring for it takes (a process takes from its rings in
    /// turn, a batch from each: evenly, not in proportion to what each holds).
    admitted: Vec<Vec<f64>>,
    /// Per process: the fraction of what it worked through that its licence passes.
    licensed: Vec<f64>,
    /// Per process, per way it sends (forward, reverse: each out of a side of its own,
    /// a queue of the NIC's): the fraction of those sends the NIC's capacity passes.
    nic: Vec<[f64; 2]>,
    /// Each way of the hosts' cable: the fraction of what is sent across it that it
    /// carries.
    cable: [f64; 2],
    /// The factor of every stream's offer asked at this load.
    scale: f64,
}

/// A stream's frames along its path, packets per second: arriving at each process,
/// and received back.
struct Path {
    arriving: Vec<f64>,
    received: f64,
}

impl<'p, 'a> Solver<'p, 'a> {
    fn new(priced: &'p PricedScenario<'a>, scale: f64) -> Self {
        let m = priced.model;
        let mut allowed: Vec<f64> = m
            .streams
            .iter()
            .map(|s| s.offered_pps.map_or(f64::INFINITY, |o| o * scale))
            .collect();
        if let Some(line) = m
            .line_bps
            .filter(|_| !matches!(priced.lifted, Some(Bottleneck::Line { .. })))
        {
            for reverse in [false, true] {
                let ours: Vec<usize> = (0..m.streams.len())
                    .filter(|&i| m.streams[i].reverse == reverse)
                    .collect();
                let level = water_fill(
                    &ours.iter().map(|&i| allowed[i]).collect::<Vec<_>>(),
                    &ours.iter().map(|&i| priced.figures[i].l1_bits).collect::<Vec<_>>(),
                    line,
                    Share::Proportional,
                );
                for (&i, a) in ours.iter().zip(level) {
                    allowed[i] = a;
                }
            }
        }
        let n = m.processes.len();
        // A start the tester can make: everything it is allowed, or its full speed.
        let generated = allowed
            .iter()
            .zip(&priced.figures)
            .map(|(&a, f)| a.min(priced.hz / (f.tester_generate + f.tester_send + f.tester_receive)))
            .collect();
        Solver {
            priced,
            generated,
            allowed,
            admitted: m.streams.iter().map(|s| vec![1.0; s.path.len()]).collect(),
            licensed: vec![1.0; n],
            nic: vec![[1.0; 2]; n],
            cable: [1.0; 2],
            scale,
        }
    }

    fn path(&self, s: usize, generated: f64) -> Path {
        let stream = &self.priced.model.streams[s];
        let across = |link: usize| stream.crosses(link).map_or(1.0, |way| self.cable[way]);
        let mut rate = generated * across(0);
        let mut arriving = Vec::with_capacity(stream.path.len());
        for (h, &p) in stream.path.iter().enumerate() {
            arriving.push(rate);
            rate *= self.admitted[s][h] * self.licensed[p] * self.nic[p][usize::from(stream.reverse)] * across(h + 1);
        }
        Path {
            arriving,
            received: rate,
        }
    }

    /// The share of stream `s`'s generated frames its tester pays a send for: those
    /// the first VNF's ring takes, or every one it sends into a tunnel (the kernel takes
    /// them all; the cable or the VNF's socket drops them later).
    fn tester_sends(&self, s: usize) -> f64 {
        match self.priced.model.streams[s].crosses(0) {
            Some(_) => 1.0,
            None => self.admitted[s].first().copied().unwrap_or(1.0),
        }
    }

    fn solve(mut self) -> ScenarioFlow {
        let m = self.priced.model;
        let hz = self.priced.hz;
        let (n_p, n_s) = (m.processes.len(), m.streams.len());
        let mut share = vec![0.0; n_p];
        for _ in 0..400 {
            // Arrivals at each process from what the tester generates now.
            let paths: Vec<Path> = (0..n_s).map(|s| self.path(s, self.generated[s])).collect();
            let mut arriving = vec![0.0; n_p];
            for (s, path) in paths.iter().enumerate() {
                for (&p, a) in m.streams[s].path.iter().zip(&path.arriving) {
                    arriving[p] += a;
                }
            }
            // What each process works through, each way, and the share of it the NIC's
            // capacity passes.
            let mut worked = vec![[0.0; 2]; n_p];
            for (s, path) in paths.iter().enumerate() {
                let way = usize::from(m.streams[s].reverse);
                for (h, (&p, a)) in m.streams[s].path.iter().zip(&path.arriving).enumerate() {
                    worked[p][way] += a * self.admitted[s][h];
                }
            }
            let passing: Vec<f64> = (0..n_p)
                .map(|p| {
                    let [f, r] = worked[p];
                    if f + r > 0.0 {
                        (f * self.nic[p][0] + r * self.nic[p][1]) / (f + r)
                    } else {
                        1.0
                    }
                })
                .collect();
            // The cores: each process wants its frames' cycles (a polling one: all it gets).
            let per_frame: Vec<f64> = (0..n_p)
                .map(|p| self.priced.costs[p].worked(self.licensed[p] * passing[p]))
                .collect();
            let wants: Vec<f64> = (0..n_p)
                .map(|p| {
                    if self.priced.polling {
                        f64::INFINITY
                    } else {
                        arriving[p] * per_frame[p]
                    }
                })
                .collect();
            // The kernel's receive work for frames crossing between hosts runs on the VNF
            // cores before the scheduler shares what is left.
            let kernel: f64 = (0..n_p)
                .map(|p| {
                    let c = &self.priced.costs[p];
                    let sent = (worked[p][0] + worked[p][1]) * self.licensed[p] * passing[p];
                    arriving[p] * c.kernel_arriving + sent * c.kernel_sent
                })
                .sum();
            let cycles = water_fill_capped(&wants, hz, (hz * m.vnf_cores as f64 - kernel).max(0.0));
            let mut admitted: Vec<Vec<f64>> = m.streams.iter().map(|s| vec![1.0; s.path.len()]).collect();
            let mut licensed = vec![1.0; n_p];
            let mut worked_ip_bits = vec![0.0; n_p];
            for p in 0..n_p {
                share[p] = cycles[p] / hz;
                let can = cycles[p] / per_frame[p];
                if arriving[p] <= can {
                    continue;
                }
                // Its input rings (one per stream through it), taken from in turn.
                let rings: Vec<(usize, usize, f64)> = paths
                    .iter()
                    .enumerate()
                    .flat_map(|(s, path)| {
                        let stream = &m.streams[s];
                        (0..stream.path.len())
                            .filter(move |&h| stream.path[h] == p)
                            .map(move |h| (s, h, path.arriving[h]))
                    })
                    .collect();
                let want: Vec<f64> = rings.iter().map(|r| r.2).collect();
                let taken = water_fill(&want, &vec![1.0; want.len()], can, Share::Even);
                for ((s, h, a), t) in rings.into_iter().zip(taken) {
                    if a > 0.0 {
                        admitted[s][h] = (t / a).min(1.0);
                    }
                }
            }
            // Frames past what a chain's turns pass back up to the tester, which the
            // first ring refuses (its hops wait on a full ring rather than drop).
            for (s, path) in paths.iter().enumerate() {
                let cap = self.priced.turn_caps[s];
                let first = path.arriving.first().copied().unwrap_or(0.0);
                if first * admitted[s][0] > cap {
                    admitted[s][0] = cap / first;
                }
            }
            for (s, path) in paths.iter().enumerate() {
                for (h, (&p, a)) in m.streams[s].path.iter().zip(&path.arriving).enumerate() {
                    worked_ip_bits[p] += a * admitted[s][h] * self.priced.figures[s].ip_bits;
                }
            }
            for p in 0..n_p {
                if let Some(cap) = m.processes[p]
                    .licence_bps
                    .filter(|_| !matches!(self.priced.lifted, Some(Bottleneck::Licence { .. })))
                    && worked_ip_bits[p] > cap
                {
                    licensed[p] = cap / worked_ip_bits[p];
                }
            }
            // Every VNF send draws on the NIC's capacity, shared evenly between its
            // senders, each way of each VNF one (a VNF that floods it leaves the one after
            // it its share); the hosts' cable carries, each way, what the tester and the
            // VNFs send across it (theirs past the NIC's).
            let mut sends_l1 = vec![0.0; 2 * n_p];
            let mut tester_across = [0.0; 2];
            // (sender, way across the cable, bits a second)
            let mut vnfs_across = Vec::new();
            for (s, path) in paths.iter().enumerate() {
                let (stream, f) = (&m.streams[s], &self.priced.figures[s]);
                if let Some(way) = stream.crosses(0) {
                    tester_across[way] += self.generated[s] * f.cable_bits;
                }
                for (h, (&p, a)) in stream.path.iter().zip(&path.arriving).enumerate() {
                    let sender = 2 * p + usize::from(stream.reverse);
                    let sent = a * admitted[s][h] * licensed[p];
                    sends_l1[sender] += sent * f.l1_bits;
                    if let Some(way) = stream.crosses(h + 1) {
                        vnfs_across.push((sender, way, sent * f.cable_bits));
                    }
                }
            }
            let carried = match m
                .nic_capacity_bps
                .filter(|_| self.priced.lifted != Some(Bottleneck::NicCapacity))
            {
                Some(cap) => water_fill(&sends_l1, &vec![1.0; 2 * n_p], cap, Share::Even),
                None => sends_l1.clone(),
            };
            let nic: Vec<f64> = carried
                .iter()
                .zip(&sends_l1)
                .map(|(c, sent)| if *sent > 0.0 { c / sent } else { 1.0 })
                .collect();
            let cable: [f64; 2] = std::array::from_fn(|way| {
                let vnfs: f64 = vnfs_across
                    .iter()
                    .filter(|a| a.1 == way)
                    .map(|&(sender, _, bits)| bits * nic[sender])
                    .sum();
                let bits = tester_across[way] + vnfs;
                match m
                    .cable
                    .filter(|_| !matches!(self.priced.lifted, Some(Bottleneck::Cable { .. })))
                {
                    Some(c) if bits > c.bps => c.bps / bits,
                    _ => 1.0,
                }
            });
            // The tester: a stream's frames cost it by how many its first ring takes and
            // how many come back.
            let unit: Vec<f64> = (0..n_s)
                .map(|s| {
                    let f = &self.priced.figures[s];
                    let probe = self.path(s, 1.0);
                    let first = self.tester_sends(s);
                    f.tester_generate + first * f.tester_send + probe.received * f.tester_receive
                })
                .collect();
            let generated = water_fill(&self.allowed, &unit, hz, Share::Even);
            // Halfway to the new point: the fractions feed each other (a first VNF's
            // admissions set a second's arrivals, which set both one's share of the core).
            let mix = |old: f64, new: f64| 0.5 * old + 0.5 * new;
            let moved = generated
                .iter()
                .zip(&self.generated)
                .map(|(a, b)| (a - b).abs() / b.abs().max(1.0))
                .chain(
                    admitted
                        .iter()
                        .flatten()
                        .zip(self.admitted.iter().flatten())
                        .map(|(a, b)| (a - b).abs()),
                )
                .chain(licensed.iter().zip(&self.licensed).map(|(a, b)| (a - b).abs()))
                .chain(cable.iter().zip(&self.cable).map(|(a, b)| (a - b).abs()))
                .chain(nic.iter().zip(self.nic.iter().flatten()).map(|(a, b)| (a - b).abs()))
                .fold(0.0, f64::max);
            for (old, new) in self.generated.iter_mut().zip(generated) {
                *old = mix(*old, new);
            }
            for (old, new) in self.admitted.iter_mut().flatten().zip(admitted.iter().flatten()) {
                *old = mix(*old, *new);
            }
            for (old, new) in self.licensed.iter_mut().zip(licensed) {
                *old = mix(*old, new);
            }
            for (old, new) in self.nic.iter_mut().flatten().zip(nic) {
                *old = mix(*old, new);
            }
            for (old, new) in self.cable.iter_mut().zip(cable) {
                *old = mix(*old, new);
            }
            if moved < 1e-9 {
                break;
            }
        }
        self.report(share)
    }

    fn report(&self, share: Vec<f64>) -> ScenarioFlow {
        let m = self.priced.model;
        let mut processes: Vec<ProcessLoad> = m
            .processes
            .iter()
            .zip(&self.priced.costs)
            .zip(share)
            .map(|((p, cost), core_share)| ProcessLoad {
                name: p.name.clone(),
                cycles_per_frame: cost.cycles,
                terms: cost.terms.clone(),
                arriving_pps: 0.0,
                worked_pps: 0.0,
                core_share,
            })
            .collect();
        let mut streams = Vec::new();
        let mut tester_cycles = 0.0;
        for (s, stream) in m.streams.iter().enumerate() {
            let generated = self.generated[s];
            let path = self.path(s, generated);
            let mut dropped = Vec::new();
            // What sets what comes out is the last place that drops: past it nothing
            // more is lost (a VNF whose core refuses frames and whose licence drops more
            // of what it works through is held by its licence).
            let mut last: Option<Bottleneck> = None;
            let mut note = |what: String, pps: f64, b: Bottleneck| {
                if pps > 1e-9 * generated.max(1.0) {
                    dropped.push((what, pps));
                    last = Some(b);
                }
            };
            // What the cable refuses is lost at the tunnel that sends it.
            let cable_lost = |link: usize, sent: f64| {
                stream
                    .crosses(link)
                    .map(|way| (sent * (1.0 - self.cable[way]), Bottleneck::Cable { way }))
            };
            if let Some((lost, b)) = cable_lost(0, generated) {
                note("tester cable".into(), lost, b);
            }
            let way = usize::from(stream.reverse);
            for (hop, (&p, &a)) in stream.path.iter().zip(&path.arriving).enumerate() {
                let name = &m.processes[p].name;
                processes[p].arriving_pps += a;
                processes[p].worked_pps += a * self.admitted[s][hop];
                let refused = a * (1.0 - self.admitted[s][hop]);
                let place = match (hop, stream.crosses(hop)) {
                    // Through a tunnel the kernel takes every frame; the VNF's socket
                    // refuses what it cannot take.
                    (_, Some(_)) => format!("{name} socket-full"),
                    (0, None) => "tester ring-full".to_string(),
                    _ => format!("{name} ring-full"),
                };
                note(place, refused, Bottleneck::VnfCore { process: name.clone() });
                let worked = a * self.admitted[s][hop];
                note(
                    format!("{name} licence"),
                    worked * (1.0 - self.licensed[p]),
                    Bottleneck::Licence { process: name.clone() },
                );
                note(
                    format!("{name} nic-capacity"),
                    worked * self.licensed[p] * (1.0 - self.nic[p][way]),
                    Bottleneck::NicCapacity,
                );
                if let Some((lost, b)) = cable_lost(hop + 1, worked * self.licensed[p] * self.nic[p][way]) {
                    note(format!("{name} cable"), lost, b);
                }
            }
            let f = &self.priced.figures[s];
            let first = self.tester_sends(s);
            tester_cycles += generated * (f.tester_generate + first * f.tester_send) + path.received * f.tester_receive;
            let held_back = |by: f64| stream.offered_pps.is_some() && by < 1.0 - 1e-6;
            let bottleneck = match last {
                Some(b) => Some(b),
                // Nothing lost: held back before the chain, by the line or the tester.
                None if stream.offered_pps.is_none() => Some(Bottleneck::Tester),
                None => {
                    let asked = stream.offered_pps.map_or(f64::INFINITY, |o| o * self.scale);
                    if held_back(self.allowed[s] / asked) {
                        Some(Bottleneck::Line {
                            reverse: stream.reverse,
                        })
                    } else if held_back(generated / self.allowed[s]) {
                        Some(Bottleneck::Tester)
                    } else {
                        None
                    }
                }
            };
            streams.push(StreamFlow {
                chain: stream.chain.clone(),
                reverse: stream.reverse,
                offered_pps: stream.offered_pps,
                generated_pps: generated,
                received_pps: path.received,
                dropped,
                bottleneck,
            });
        }
        ScenarioFlow {
            generated_pps: streams.iter().map(|s| s.generated_pps).sum(),
            received_pps: streams.iter().map(|s| s.received_pps).sum(),
            streams,
            processes,
            tester_utilisation: tester_cycles / self.priced.hz,
        }
    }
}

/// How a limited resource is shared between those who want it.
#[derive(Clone, Copy)]
enum Share {
    /// Each cut by the same factor (a pacer or policer: drops in proportion).
    Proportional,
    /// Each given the same rate, up to what it wants (a round robin).
    Even,
}

/// Rates `x_i <= want_i` with `sum x_i * unit_i <= budget`, shared as `share` says.
fn water_fill(want: &[f64], unit: &[f64], budget: f64, share: Share) -> Vec<f64> {
    let total: f64 = want.iter().zip(unit).map(|(w, u)| w * u).sum();
    if total <= budget {
        return want.to_vec();
    }
    match share {
        Share::Proportional if total.is_finite() => want.iter().map(|w| w * budget / total).collect(),
        // Streams asking for everything share evenly what the finite ones leave.
        Share::Proportional | Share::Even => {
            let mut x = vec![0.0; want.len()];
            let mut open: Vec<usize> = (0..want.len()).collect();
            let mut left = budget;
            while !open.is_empty() {
                let per_unit: f64 = open.iter().map(|&i| unit[i]).sum();
                let level = left / per_unit.max(f64::MIN_POSITIVE);
                let (done, rest): (Vec<usize>, Vec<usize>) = open.iter().partition(|&&i| want[i] <= level);
                if done.is_empty() {
                    for &i in &open {
                        x[i] = level;
                    }
                    break;
                }
                for &i in &done {
                    x[i] = want[i];
                    left -= want[i] * unit[i];
                }
                open = rest;
            }
            x
        }
    }
}

/// CPU time shared as the scheduler does: each wants `want_i` cycles a second, none gets
/// more than `cap` (one core), all together no more than `pool`; those wanting more
/// than an even share get the same.
fn water_fill_capped(want: &[f64], cap: f64, pool: f64) -> Vec<f64> {
    let capped: Vec<f64> = want.iter().map(|w| w.min(cap)).collect();
    water_fill(&capped, &vec![1.0; want.len()], pool, Share::Even)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::calibration::{Curve, MemifCalibration, SharingPoint};

    const HZ: f64 = 2.0e9;

    /// Tester: 100 per frame generated, 100 more sent, 100 received (300 a round trip);
    /// a hop 200 in interrupt mode, 100 more per frame at 4 per core; the router 300.
    pub(crate) fn cal() -> Calibration {
        let mut c = crate::chain::tests::cal();
        c.machine.tsc_hz = HZ;
        let sizes = c.sizes.clone();
        let flat = |v: f64| Curve::flat(&sizes, v);
        c.nfs.push(crate::calibration::NfCalibration {
            key: "router".into(),
            kind: "router".into(),
            cycles: flat(300.0),
            in_stage: Some(flat(300.0)),
            across: Some(flat(300.0)),
            in_vnf: None,
        });
        c.memif = Some(MemifCalibration {
            tester_generate: flat(100.0),
            tester_send: flat(100.0),
            tester_receive: flat(100.0),
            waits: vec![MemifWaitCalibration {
                wait: "interrupt".into(),
                hop: flat(200.0),
                hop_one_way: None,
                availability: None,
                same_core_link: None,
                same_core_link_one_way: Vec::new(),
                taking_turns: Vec::new(),
                taking_turns_working: None,
                vnf_turns: Vec::new(),
                sharing: vec![SharingPoint {
                    per_core: 4.0,
                    cycles: 100.0,
                    runs: vec![100.0],
                }],
                turns: Vec::new(),
                tunnel: None,
            }],
        });
        c
    }

    /// `chains` PVP (or PVVP) chains of routers, one way, each offered `pps`.
    fn scenario(chains: usize, vnfs: usize, pps: Option<f64>) -> ScenarioModel {
        let mut processes = Vec::new();
        let mut streams = Vec::new();
        for c in 0..chains {
            let first = processes.len();
            for h in 0..vnfs {
                processes.push(ProcessModel {
                    name: format!("c{} hop {}", c + 1, h + 1),
                    nfs: vec!["router".into()],
                    licence_bps: None,
                });
            }
            streams.push(StreamModel {
                chain: format!("c{}", c + 1),
                reverse: false,
                offered_pps: pps,
                frames: vec![(64.0, 1.0)],
                path: (first..first + vnfs).collect(),
                crossings: Vec::new(),
            });
        }
        ScenarioModel {
            streams,
            processes,
            vnf_cores: 1,
            wait: "interrupt".into(),
            line_bps: None,
            ring_frames: 1024.0,
            nic_capacity_bps: None,
            cable: None,
        }
    }

    /// [`cal`] with links between hosts: into a VNF 1,000 cycles (its socket 400, the
    /// kernel 600), out of one 1,100 (its socket 500), between two 1,500.
    fn cal_with_tunnels() -> Calibration {
        let mut c = cal();
        let m = |cycles: f64| crate::calibration::Measured {
            cycles,
            runs: vec![cycles],
        };
        c.memif.as_mut().unwrap().waits[0].tunnel = Some(crate::calibration::TunnelTerms {
            into_vnf: m(1000.0),
            out_of_vnf: m(1100.0),
            between_vnfs: m(1500.0),
            tester_send: m(900.0),
        });
        c
    }

    #[test]
    fn a_crossing_between_hosts_costs_its_sockets_and_the_kernels_work_outside_the_share() {
        let cal = cal_with_tunnels();
        let t = cal.memif.as_ref().unwrap().waits[0].tunnel.as_ref().unwrap().parts();
        assert_eq!((t.receiving, t.sending, t.kernel), (400.0, 500.0, 600.0));
        // One router on host 2, the tester on host 1: its input and its output cross.
        let mut m = scenario(1, 1, None);
        m.streams[0].crossings = vec![Some(0), Some(1)];
        m.cable = Some(Cable {
            bps: 1e12,
            extra_bits: 0.0,
        });
        let p = PricedScenario::new(&cal, &m).unwrap();
        // Its own: half hops none, its sockets 400 + 500, the router 300.
        let terms: Vec<(&str, f64)> = p.costs[0].terms.iter().map(|(n, c)| (n.as_str(), *c)).collect();
        assert!(
            terms.contains(&("link between hosts, its socket in", 400.0)),
            "{terms:?}"
        );
        assert!(
            terms.contains(&("link between hosts, its socket out", 500.0)),
            "{terms:?}"
        );
        assert_eq!(p.costs[0].cycles, 1200.0);
        // The tester pays its tunnel send for every frame it generates (g), its receive
        // for every one back (x): g (100 + 900) + 100 x = HZ.
        let f = p.flow(1.0);
        let (g, x) = (f.generated_pps, f.received_pps);
        assert!((g * 1000.0 + x * 100.0 - HZ).abs() / HZ < 1e-3, "{f:#?}");
        // The kernel's 600 for every frame arriving (the socket refuses the excess after
        // it) and every frame sent back come off the core before the router's 1,200:
        // 600 g + (600 + 1200) x = HZ.
        assert!((600.0 * g + 1800.0 * x - HZ).abs() / HZ < 1e-3, "{f:#?}");
        let refused = &f.streams[0].dropped;
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert_eq!(refused[0].0, "c1 hop 1 socket-full");
        // Without the links' terms it is refused, saying so.
        let e = PricedScenario::new(&super::tests::cal(), &m).err().unwrap();
        assert!(e.contains("no links between hosts"), "{e}");
    }

    #[test]
    fn the_cable_carries_its_line_each_way_and_drops_the_rest_at_the_sending_tunnel() {
        let cal = cal_with_tunnels();
        // PVVP across two hosts: hop 1 on host 1, hop 2 on host 2, back to host 1; each
        // way of the cable 672 Mbit/s: 1 Mpps of 64 B frames.
        let mut m = scenario(1, 2, Some(3e6));
        m.vnf_cores = 2;
        m.streams[0].crossings = vec![None, Some(0), Some(1)];
        m.cable = Some(Cable {
            bps: 672e6,
            extra_bits: 0.0,
        });
        let f = PricedScenario::new(&cal, &m).unwrap().flow(0.1);
        // 0.3 Mpps offered: nothing lost.
        assert!((f.received_pps - 0.3e6).abs() < 1.0, "{f:#?}");
        let c = PricedScenario::new(&cal, &m).unwrap().capacity();
        assert!((c.aggregate_pps - 1e6).abs() / 1e6 < 1e-3, "{c:#?}");
        assert_eq!(c.bottleneck, Some(Bottleneck::Cable { way: 0 }));
        let over = PricedScenario::new(&cal, &m).unwrap().flow(0.5);
        let lost: Vec<&(String, f64)> = over.streams[0].dropped.iter().collect();
        assert_eq!(lost.len(), 1, "{lost:?}");
        assert_eq!(lost[0].0, "c1 hop 1 cable");
        assert!((lost[0].1 - 0.5e6).abs() / 0.5e6 < 1e-3, "{lost:?}");
    }

    fn total_dropped(f: &ScenarioFlow) -> f64 {
        f.streams.iter().flat_map(|s| s.dropped.iter().map(|d| d.1)).sum()
    }

    #[test]
    fn what_is_generated_is_received_or_dropped_somewhere() {
        let cal = cal();
        for (chains, vnfs, pps) in [(1, 1, 1e6), (3, 2, 2e6), (8, 1, 1e6), (2, 2, 1e5)] {
            let m = scenario(chains, vnfs, Some(pps));
            let f = PricedScenario::new(&cal, &m).unwrap().flow(1.0);
            let lost = f.generated_pps - f.received_pps;
            assert!(
                (lost - total_dropped(&f)).abs() <= 1e-6 * f.generated_pps,
                "{chains}x{vnfs}: {f:#?}"
            );
            assert!(f.received_pps <= f.generated_pps * (1.0 + 1e-9));
        }
    }

    #[test]
    fn one_chain_loses_nothing_below_what_its_vnfs_core_carries_which_limits_it() {
        // The hop and router cost 500 a frame (4 Mpps on a 2 GHz core); the tester 300
        // (6.67 Mpps): offered all it can, the VNF's core limits, and refuses at its ring.
        let cal = cal();
        let m = scenario(1, 1, Some(1e6));
        let p = PricedScenario::new(&cal, &m).unwrap();
        let f = p.flow(1.0);
        assert!((f.received_pps - 1e6).abs() < 1.0, "{f:#?}");
        assert!(f.streams[0].bottleneck.is_none());
        let c = p.capacity();
        assert!((c.aggregate_pps - 4e6).abs() / 4e6 < 1e-3, "{c:#?}");
        assert_eq!(
            c.stream_bottlenecks[0],
            Some(Bottleneck::VnfCore {
                process: "c1 hop 1".into()
            })
        );
        assert_eq!(c.bottleneck, Some(Bottleneck::VnfCores));
    }

    #[test]
    fn vnfs_sharing_a_core_split_it_and_pay_for_sharing() {
        // Four routers on one core, each 500 + 100 sharing: 2e9 / 600 in all.
        let cal = cal();
        let m = scenario(4, 1, Some(10e6));
        let f = PricedScenario::new(&cal, &m).unwrap().flow(1.0);
        let want = HZ / 600.0;
        assert!(
            (f.received_pps - want).abs() / want < 1e-3,
            "{} against {want}",
            f.received_pps
        );
        for s in &f.streams {
            assert!((s.received_pps - want / 4.0).abs() / want < 1e-3);
        }
    }

    #[test]
    fn a_cheap_vnf_beside_a_heavy_one_gets_the_time_it_needs_and_the_heavy_one_the_rest() {
        let mut cal = cal();
        cal.nfs.push(crate::calibration::NfCalibration {
            key: "heavy".into(),
            kind: "synthetic".into(),
            cycles: Curve::flat(&cal.sizes, 1800.0),
            in_stage: Some(Curve::flat(&cal.sizes, 1800.0)),
            across: Some(Curve::flat(&cal.sizes, 1800.0)),
            in_vnf: None,
        });
        let mut m = scenario(2, 1, Some(1e6));
        m.processes[1].nfs = vec!["heavy".into()];
        // Two per core: a third of the 100 cycles that sharing costs at four. The light
        // VNF needs 1e6 * 533.3 cycles a second; the heavy one gets the rest of the core.
        let light = 500.0 + 100.0 / 3.0;
        let heavy = 2000.0 + 100.0 / 3.0;
        let f = PricedScenario::new(&cal, &m).unwrap().flow(1.0);
        assert!((f.streams[0].received_pps - 1e6).abs() < 10.0, "{f:#?}");
        let rest = (HZ - 1e6 * light) / heavy;
        assert!((f.streams[1].received_pps - rest).abs() < 1e3, "{f:#?}");
        assert_eq!(
            f.streams[1].bottleneck,
            Some(Bottleneck::VnfCore {
                process: "c2 hop 1".into()
            })
        );
    }

    #[test]
    fn pvvp_pays_the_nic_capacity_twice_and_pvp_is_held_by_the_line() {
        let cal = cal();
        // 64 B frames: 672 bits at layer 1; a 672 Mbit/s capacity carries 1 Mpps of sends.
        let mut pvvp = scenario(1, 2, Some(0.8e6));
        pvvp.vnf_cores = 2;
        pvvp.nic_capacity_bps = Some(672e6);
        let p = PricedScenario::new(&cal, &pvvp).unwrap();
        let c = p.capacity();
        assert!((c.aggregate_pps - 0.5e6).abs() / 0.5e6 < 1e-3, "{c:#?}");
        assert_eq!(c.bottleneck, Some(Bottleneck::NicCapacity));
        let mut pvp = scenario(2, 1, Some(1e6));
        pvp.vnf_cores = 2;
        pvp.line_bps = Some(672e6);
        pvp.nic_capacity_bps = Some(672e6 * 2.0);
        let f = PricedScenario::new(&cal, &pvp).unwrap().flow(1.0);
        // The line carries 1 Mpps in all: each chain offered 0.5, none lost.
        assert!((f.received_pps - 1e6).abs() < 1.0, "{f:#?}");
        assert_eq!(total_dropped(&f), 0.0);
        assert_eq!(f.streams[0].bottleneck, Some(Bottleneck::Line { reverse: false }));
    }

    #[test]
    fn over_offered_the_nic_capacity_is_shared_evenly_so_pvvp_chains_carry_half_of_it() {
        let cal = cal();
        // Two PVVP chains offered 3 Mpps each behind 1 Mpps of sends (64 B): the four
        // VNFs get 0.25 Mpps of sends each. The first VNFs work through far more and
        // drop the rest at the capacity; the second send all the first passed.
        let mut pvvp = scenario(2, 2, Some(3e6));
        pvvp.vnf_cores = 4;
        pvvp.nic_capacity_bps = Some(672e6);
        let f = PricedScenario::new(&cal, &pvvp).unwrap().flow(1.0);
        assert!((f.received_pps - 0.5e6).abs() / 0.5e6 < 1e-3, "{f:#?}");
        for s in &f.streams {
            let at = |place: &str| s.dropped.iter().find(|d| d.0.ends_with(place)).map_or(0.0, |d| d.1);
            assert!(at("hop 1 nic-capacity") > 1e6, "{s:#?}");
            assert!(
                at("hop 2 nic-capacity") < 1.0,
                "the second VNF sends all it gets: {s:#?}"
            );
            assert_eq!(s.bottleneck, Some(Bottleneck::NicCapacity));
        }
        // Both ways each VNF is first for one direction and second for the other; each
        // way out of it is a sender of its own, so the second position keeps its share.
        let mut both = pvvp.clone();
        for s in pvvp.streams.clone() {
            both.streams.push(StreamModel {
                reverse: true,
                path: s.path.iter().rev().copied().collect(),
                ..s
            });
        }
        let f = PricedScenario::new(&cal, &both).unwrap().flow(1.0);
        assert!((f.received_pps - 0.5e6).abs() / 0.5e6 < 1e-3, "{f:#?}");
    }

    #[test]
    fn a_vnf_takes_from_its_rings_in_turn_so_a_frame_past_the_first_vnf_is_not_dropped_at_the_second() {
        // One PVVP chain both ways on one core: each VNF is first for one direction (fed
        // by the tester's flood) and second for the other (fed by its peer). Taking a
        // batch from each ring in turn, it serves its peer's frames, fewer than an even
        // share, in full: the excess is refused at the tester's rings, where no work
        // was spent on it.
        let cal = cal();
        let mut m = scenario(1, 2, None);
        let reverse = StreamModel {
            reverse: true,
            path: vec![1, 0],
            ..m.streams[0].clone()
        };
        m.streams.push(reverse);
        let f = PricedScenario::new(&cal, &m).unwrap().flow(1.0);
        for s in &f.streams {
            assert_eq!(s.dropped.len(), 1, "{s:#?}");
            assert_eq!(s.dropped[0].0, "tester ring-full");
        }
        // The core works every frame twice (once per VNF), at 500 + 33.3 cycles each.
        let want = HZ / (2.0 * (500.0 + 100.0 / 3.0));
        assert!(
            (f.received_pps - want).abs() / want < 1e-3,
            "{} against {want}",
            f.received_pps
        );
    }

    #[test]
    fn a_licence_limits_its_vnf_and_is_named_not_the_core() {
        let cal = cal();
        let mut m = scenario(1, 1, Some(3e6));
        // 64 B frames carry 46 B of IP: a 184 Mbit/s licence passes 0.5 Mpps.
        m.processes[0].licence_bps = Some(46.0 * 8.0 * 0.5e6);
        let p = PricedScenario::new(&cal, &m).unwrap();
        let f = p.flow(1.0);
        assert!((f.received_pps - 0.5e6).abs() < 1.0, "{f:#?}");
        assert_eq!(
            f.streams[0].bottleneck,
            Some(Bottleneck::Licence {
                process: "c1 hop 1".into()
            })
        );
        assert_eq!(p.capacity().bottleneck, f.streams[0].bottleneck);
        // Offered more than its core works through (500 cycles a frame: 4 Mpps): a frame
        // its licence drops is never sent, so costs it the hop's receiving half only
        // (400 a frame): W (400 + 100 x 0.5e6 / W) = 2e9, W = 4.875 Mpps worked.
        let mut m = m.clone();
        m.streams[0].offered_pps = Some(6e6);
        let f = PricedScenario::new(&cal, &m).unwrap().flow(1.0);
        let worked = f.processes[0].worked_pps;
        assert!((worked - 4.875e6).abs() / 4.875e6 < 1e-3, "{f:#?}");
        assert!((f.received_pps - 0.5e6).abs() / 0.5e6 < 1e-3, "{f:#?}");
    }

    #[test]
    fn offered_everything_the_tester_limits_and_refused_frames_cost_it_less() {
        let cal = cal();
        // One cheap chain: 500 a frame on the VNF core (4 Mpps), the tester 300 a frame
        // round trip (6.67 Mpps): the VNF limits; the tester generates more than that,
        // each refused frame costing it 100.
        let m = scenario(1, 1, None);
        let f = PricedScenario::new(&cal, &m).unwrap().flow(1.0);
        assert!((f.received_pps - 4e6).abs() / 4e6 < 1e-3, "{f:#?}");
        // 4e6 * 300 + refused * 100 = 2e9: 8e6 refused.
        assert!((f.generated_pps - 12e6).abs() / 12e6 < 1e-3, "{f:#?}");
        assert!((f.tester_utilisation - 1.0).abs() < 1e-3);
    }

    #[test]
    fn polling_hops_taking_turns_on_a_core_pass_a_ring_per_round_of_turns() {
        // Four polling routers on one core, turns of 3 ms: each link holds 1024 frames
        // between its ends' turns, so the chain passes 1024 per 12 ms (85 kpps), far
        // below the 1e9 cycles a second the core gives it, and the tester's ring refuses
        // the rest (the hops wait on a full ring).
        let mut cal = cal();
        let mut polling = cal.memif.as_ref().unwrap().waits[0].clone();
        polling.wait = "polling".into();
        polling.turns = vec![crate::calibration::Turn {
            per_core: 4.0,
            seconds: 0.003,
            runs: vec![0.003],
        }];
        cal.memif.as_mut().unwrap().waits.push(polling);
        let mut m = scenario(1, 4, Some(1e6));
        m.wait = "polling".into();
        let f = PricedScenario::new(&cal, &m).unwrap().flow(1.0);
        let cap = 1024.0 / (4.0 * 0.003);
        assert!((f.received_pps - cap).abs() / cap < 1e-6, "{f:#?}");
        assert_eq!(f.streams[0].dropped[0].0, "tester ring-full");
        assert!((f.generated_pps - f.received_pps - total_dropped(&f)).abs() < 1e-3);
        // Turns measured at 2 and 12 per core, 2 and 3.5 ms: `L + S / k` through them
        // (S = −3.6 ms, L = 3.8 ms) gives 2.9 ms at 4.
        let w = &mut cal.memif.as_mut().unwrap().waits[1];
        w.turns = [(2.0, 0.002), (12.0, 0.0035)]
            .map(|(per_core, seconds)| crate::calibration::Turn {
                per_core,
                seconds,
                runs: vec![seconds],
            })
            .to_vec();
        let f = PricedScenario::new(&cal, &m).unwrap().flow(1.0);
        let cap = 1024.0 / (4.0 * 0.0029);
        assert!((f.received_pps - cap).abs() / cap < 1e-6, "{f:#?}");
        // Each on a core of its own, or one hop alone: no turns to wait for.
        m.vnf_cores = 4;
        let f = PricedScenario::new(&cal, &m).unwrap().flow(1.0);
        assert!((f.received_pps - 1e6).abs() < 1.0, "{f:#?}");
        let mut one = scenario(4, 1, Some(1e5));
        one.wait = "polling".into();
        let f = PricedScenario::new(&cal, &one).unwrap().flow(1.0);
        assert!((f.received_pps - 4e5).abs() < 1.0, "{f:#?}");
        // Interrupt-mode hops yield when they have nothing: no turns either.
        m.vnf_cores = 1;
        m.wait = "interrupt".into();
        let f = PricedScenario::new(&cal, &m).unwrap().flow(1.0);
        assert!(f.received_pps > 2.0 * cap, "{f:#?}");
    }

    #[test]
    fn a_vnf_is_priced_by_its_cores_time_its_links_its_wakeups_and_its_nfs_in_a_vnf() {
        let mut cal = cal();
        let sizes = cal.sizes.clone();
        {
            let w = &mut cal.memif.as_mut().unwrap().waits[0];
            w.hop_one_way = Some(Curve::flat(&sizes, 150.0));
            w.availability = Some(crate::calibration::Availability {
                share: 0.8,
                runs: vec![0.8],
            });
            w.same_core_link = Some(Curve::flat(&sizes, 60.0));
        }
        let cycles = |cal: &Calibration, m: &ScenarioModel| -> Vec<f64> {
            let f = PricedScenario::new(cal, m).unwrap().flow(1.0);
            f.processes.iter().map(|p| p.cycles_per_frame).collect()
        };
        let close = |got: &[f64], want: &[f64]| {
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(want) {
                assert!((g - w).abs() < 1e-6, "{got:?} against {want:?}");
            }
        };
        // Two routers chained on one core, one way: each half a one-way hop (75), half
        // the link (30), the router (300), and the sharing at 2 per core (a third of
        // the 100 at 4), over the 80 % of its core's time it gets.
        let mut m = scenario(1, 2, Some(1e5));
        let each = (75.0 + 30.0 + 300.0 + 100.0 / 3.0) / 0.8;
        close(&cycles(&cal, &m), &[each, each]);
        // A link one way, where calibrated so, for frames one way: 100 cycles at 2 per
        // core, 40 at 6, so 70 at 3 (`L + S / k`: S = 180, L = 10), half of it each.
        let w = &mut cal.memif.as_mut().unwrap().waits[0];
        w.same_core_link_one_way = [(2.0, 100.0), (6.0, 40.0)]
            .map(|(per_core, cycles)| crate::calibration::LinkPoint {
                per_core,
                cycles,
                runs: vec![cycles],
            })
            .to_vec();
        let each = (75.0 + 50.0 + 300.0 + 100.0 / 3.0) / 0.8;
        close(&cycles(&cal, &m), &[each, each]);
        let m3 = scenario(1, 3, Some(1e5));
        let ends = (75.0 + 35.0 + 300.0 + 100.0 * 2.0 / 3.0) / 0.8;
        close(
            &cycles(&cal, &m3),
            &[ends, (70.0 + 300.0 + 100.0 * 2.0 / 3.0) / 0.8, ends],
        );
        // On two cores the link may cross them: priced as two half hops, and one VNF a
        // core shares nothing.
        m.vnf_cores = 2;
        close(&cycles(&cal, &m), &[(150.0 + 300.0) / 0.8, (150.0 + 300.0) / 0.8]);
        // Frames both ways through one VNF: the hop both ways.
        let mut m = scenario(1, 1, Some(1e5));
        let mut back = m.streams[0].clone();
        back.reverse = true;
        m.streams.push(back);
        close(&cycles(&cal, &m), &[(200.0 + 300.0) / 0.8]);
        // The router's cycles in a VNF, where calibrated, over its compound ones.
        let router = cal.nfs.iter_mut().find(|n| n.key == "router").unwrap();
        router.in_vnf = Some(Curve::flat(&sizes, 100.0));
        close(&cycles(&cal, &m), &[(200.0 + 100.0) / 0.8]);
    }

    #[test]
    fn waiting_vnfs_the_tester_wakes_take_turns_on_their_core_and_carry_at_most_what_vnfs_of_their_work_did() {
        let mut cal = cal();
        let points = |at: [(f64, f64); 2]| {
            at.map(|(per_core, pps)| crate::calibration::TurnsPoint {
                per_core,
                pps,
                runs: vec![pps],
            })
            .to_vec()
        };
        cal.memif.as_mut().unwrap().waits[0].taking_turns = points([(2.0, 3e6), (4.0, 2e6)]);
        // Four PVP chains on one core: their cycles carry 2e9 / 600 = 3.33 Mpps, but four
        // VNFs the tester wakes carry 2 in all: the rest refused at the tester.
        let m = scenario(4, 1, None);
        let c = PricedScenario::new(&cal, &m).unwrap().capacity();
        assert!((c.aggregate_pps - 2e6).abs() / 2e6 < 1e-3, "{c:#?}");
        assert_eq!(c.bottleneck, Some(Bottleneck::VnfCores));
        let f = PricedScenario::new(&cal, &m).unwrap().flow(1.0);
        assert!(
            f.streams
                .iter()
                .all(|s| s.dropped.iter().all(|d| d.0 == "tester ring-full")),
            "{f:#?}"
        );
        // Two PVVP chains, four VNFs too, but the tester wakes two (each second VNF is
        // woken by the first): 3 Mpps in all, more than their cycles carry (1.67).
        let m = scenario(2, 2, None);
        let c = PricedScenario::new(&cal, &m).unwrap().capacity();
        let cycles = HZ / (2.0 * 600.0);
        assert!((c.aggregate_pps - cycles).abs() / cycles < 1e-3, "{c:#?}");
        // Spread over two cores (not measured): no such ceiling.
        let mut m = scenario(4, 1, None);
        m.vnf_cores = 2;
        let c = PricedScenario::new(&cal, &m).unwrap().capacity();
        assert!(c.aggregate_pps > 2e6 * 1.1, "{c:#?}");
        // VNFs that work longer sleep less: the routers' 300 cycles are half the way
        // from forwarders to VNFs of 600 cycles' work, which carry 3 Mpps at four.
        let wait = &mut cal.memif.as_mut().unwrap().waits[0];
        wait.taking_turns_working = Some(crate::calibration::WorkingTurns {
            work_cycles: 600.0,
            points: points([(2.0, 4e6), (4.0, 3e6)]),
        });
        let m = scenario(4, 1, None);
        let carried = |cal: &Calibration| PricedScenario::new(cal, &m).unwrap().capacity().aggregate_pps;
        assert!((carried(&cal) - 2.5e6).abs() / 2.5e6 < 1e-3);
        // Past the working VNFs' work, theirs.
        cal.memif.as_mut().unwrap().waits[0]
            .taking_turns_working
            .as_mut()
            .unwrap()
            .work_cycles = 150.0;
        assert!((carried(&cal) - 3e6).abs() / 3e6 < 1e-3);
        // VNFs of a kind the calibration ran taking turns carry what that kind did,
        // whatever their work says; another kind beside them is still priced by work.
        let nfs = m.processes[0].nfs.clone();
        cal.memif.as_mut().unwrap().waits[0].vnf_turns = vec![crate::calibration::VnfTurns {
            nfs: nfs.clone(),
            points: points([(2.0, 3.5e6), (8.0, 2.3e6)]),
        }];
        assert!(
            (carried(&cal) - 3.1e6).abs() / 3.1e6 < 1e-3,
            "linear in k: {}",
            carried(&cal)
        );
        let mut mixed = m.clone();
        // (the same NF twice: another kind, still past the working VNFs' work)
        mixed.processes[3].nfs = [nfs.clone(), nfs.clone()].concat();
        let with_kinds = PricedScenario::new(&cal, &mixed).unwrap().capacity();
        cal.memif.as_mut().unwrap().waits[0].vnf_turns.clear();
        let by_work = PricedScenario::new(&cal, &mixed).unwrap().capacity();
        assert_eq!(with_kinds, by_work);
    }

    #[test]
    fn a_capacity_the_tester_holds_is_named_the_tester_not_the_line() {
        // Sixteen chains offered 100 Mpps each: the tester (6.67 Mpps round trip) holds
        // them far below the offer, and there is no line to blame.
        let cal = cal();
        let mut m = scenario(16, 1, Some(100e6));
        m.vnf_cores = 16;
        let c = PricedScenario::new(&cal, &m).unwrap().capacity();
        assert!(c.scale < 0.01, "{c:#?}");
        assert_eq!(c.bottleneck, Some(Bottleneck::Tester), "{c:#?}");
    }

    #[test]
    fn the_limit_behind_the_bottleneck_is_named_with_its_margin() {
        let cal = cal();
        let near = |a: f64, b: f64| (a - b).abs() / b < 1e-3;
        // Two chains, a VNF each on a core of its own (500 cycles a frame: 4 Mpps each):
        // the tester's 300 cycles a round trip (6.67 Mpps) hold them; without it, their
        // cores would carry 8 Mpps, 20 % more.
        let mut m = scenario(2, 1, None);
        m.vnf_cores = 2;
        let c = PricedScenario::new(&cal, &m).unwrap().capacity();
        assert_eq!(c.bottleneck, Some(Bottleneck::Tester), "{c:#?}");
        let next = c.next_limit.as_ref().expect("the VNFs' cores are behind it");
        assert_eq!(next.bottleneck, Bottleneck::VnfCores, "{c:#?}");
        assert!(near(next.aggregate_pps, 8e6), "{c:#?}");
        assert!(near(next.margin_pct, 20.0), "{c:#?}");
        // One such VNF holds the tester's flood to 4 Mpps; the tester, every frame taken,
        // carries 6.67: 66.7 % more.
        let c = PricedScenario::new(&cal, &scenario(1, 1, None)).unwrap().capacity();
        assert_eq!(c.bottleneck, Some(Bottleneck::VnfCores), "{c:#?}");
        let next = c.next_limit.as_ref().expect("the tester is behind it");
        assert_eq!(next.bottleneck, Bottleneck::Tester, "{c:#?}");
        assert!(near(next.margin_pct, 100.0 * (2e9 / 300.0 / 4e6 - 1.0)), "{c:#?}");
        // A licence of 0.5 Mpps in front of that core: its core is next, 8 times as far.
        let mut m = scenario(1, 1, Some(3e6));
        m.processes[0].licence_bps = Some(46.0 * 8.0 * 0.5e6);
        let c = PricedScenario::new(&cal, &m).unwrap().capacity();
        assert_eq!(
            c.bottleneck,
            Some(Bottleneck::Licence {
                process: "c1 hop 1".into()
            })
        );
        let next = c.next_limit.as_ref().expect("its core is behind it");
        assert_eq!(next.bottleneck, Bottleneck::VnfCores, "{c:#?}");
        assert!(near(next.margin_pct, 700.0), "{c:#?}");
        // The first limit alone, as a plan asks for it, names no next one.
        let first = PricedScenario::new(&cal, &m).unwrap().first_limit();
        assert_eq!((first.bottleneck, first.next_limit), (c.bottleneck, None));
    }

    #[test]
    fn a_scenario_without_memif_terms_is_refused_saying_how_to_calibrate() {
        let mut cal = cal();
        cal.memif = None;
        let m = scenario(1, 1, None);
        let e = PricedScenario::new(&cal, &m).err().unwrap();
        assert!(e.contains("model calibrate --memif"), "{e}");
    }
}
