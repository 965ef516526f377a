//! A calibration: every cost term the model uses, as measured on one machine on one
//! day (`sfclab model calibrate`), stored as JSON (`sfclab.calibration/9`; /8 read as one
//! whose polling turn holds at every k, /7 as one without VNFs' own turns, /6 as one without the links between hosts, /5 as one whose VNFs take turns alike whatever their work, /4 as one whose memif hop holds the
//! time its core was not the VNF's, /3 as one without memif terms) and reused by
//! `model predict`, `plan` and `bench model`. A term is a curve over frame sizes; a
//! prediction at a size between two calibrated ones interpolates, one outside them or
//! for an NF the calibration did not measure is refused, not guessed.

use serde::{Deserialize, Serialize};

pub const CALIBRATION_SCHEMA: &str = "sfclab.calibration/9";

/// How to calibrate a missing NF of a chain, and of a scenario's VNF.
const CALIBRATE_A_CHAINS_NFS: &str = "calibrate it with `sfclab model calibrate --chain ...` naming it";
const CALIBRATE_A_SCENARIOS_NFS: &str =
    "calibrate the scenario's NFs with `sudo sfclab model calibrate --memif --scenario FILE`";

/// The schema before the memif terms: read as one without them.
const CALIBRATION_SCHEMA_3: &str = "sfclab.calibration/3";
/// The schema before the VNF core's availability and the one-way hop: read as one whose
/// hop holds both (an availability of 1, the same hop either way).
const CALIBRATION_SCHEMA_4: &str = "sfclab.calibration/4";
/// The schema before the turns of VNFs with work: read as one whose VNFs carry what
/// forwarders carry, whatever their work.
const CALIBRATION_SCHEMA_5: &str = "sfclab.calibration/5";
/// The schema before the links between hosts: read as one without them (scenarios over
/// hosts are then refused, as before).
const CALIBRATION_SCHEMA_6: &str = "sfclab.calibration/6";
/// The schema before VNFs' own turns: read as one whose VNFs take turns as forwarders
/// and VNFs of light synthetic work do, by their work.
const CALIBRATION_SCHEMA_7: &str = "sfclab.calibration/7";
/// The schema before the polling turn at several k: read as one whose turn, measured at
/// 4 per core, holds at every k.
const CALIBRATION_SCHEMA_8: &str = "sfclab.calibration/8";

/// A cost at each calibrated frame size (with FCS), TSC cycles per packet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Curve {
    pub points: Vec<CurvePoint>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CurvePoint {
    pub size: u16,
    /// The median of the repetitions.
    pub cycles: f64,
    /// Every repetition's estimate, for the spread.
    pub runs: Vec<f64>,
    /// Where the term lies, low and high: the 95% confidence interval of a term fitted
    /// as a slope (the cost per hop of a chaining in namespaces), or the range of the
    /// repetitions of a memif term taken as a difference of runs; absent for the other
    /// terms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<[f64; 2]>,
}

impl CurvePoint {
    /// Whether its interval holds zero: the measurements cannot tell the term from none.
    pub fn indistinct_from_zero(&self) -> bool {
        self.interval.is_some_and(|[lo, hi]| lo <= 0.0 && hi >= 0.0)
    }
}

impl Curve {
    pub fn new(mut points: Vec<CurvePoint>) -> Curve {
        points.sort_by_key(|p| p.size);
        Curve { points }
    }

    /// A curve of one value at every size of `sizes` (hand-made calibrations in tests).
    pub fn flat(sizes: &[u16], cycles: f64) -> Curve {
        Curve::new(
            sizes
                .iter()
                .map(|&size| CurvePoint {
                    size,
                    cycles,
                    runs: vec![cycles],
                    interval: None,
                })
                .collect(),
        )
    }

    /// The cost at `size`: measured there, or linear between the two calibrated sizes
    /// around it; outside the calibrated sizes, an error saying which they are.
    pub fn at(&self, size: f64) -> Result<f64, String> {
        let (first, last) = match (self.points.first(), self.points.last()) {
            (Some(f), Some(l)) => (f, l),
            _ => return Err("the term has no calibrated size".into()),
        };
        if size < f64::from(first.size) || size > f64::from(last.size) {
            return Err(format!(
                "{size} B is outside the calibrated frame sizes {}..{} B (calibrate with --sizes covering it)",
                first.size, last.size
            ));
        }
        let upper = self
            .points
            .iter()
            .position(|p| f64::from(p.size) >= size)
            .expect("size is within the range");
        let hi = &self.points[upper];
        if f64::from(hi.size) == size || upper == 0 {
            return Ok(hi.cycles);
        }
        let lo = &self.points[upper - 1];
        let t = (size - f64::from(lo.size)) / (f64::from(hi.size) - f64::from(lo.size));
        Ok(lo.cycles + t * (hi.cycles - lo.cycles))
    }
}

/// The machine a calibration was measured on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CalibratedMachine {
    pub cpu: String,
    pub cores: usize,
    /// The TSC's rate: the cycles every term counts, and `f_CPU` of every core.
    pub tsc_hz: f64,
    pub kernel: String,
}

/// How the terms were measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Method {
    pub duration_s: f64,
    pub repeat: usize,
    pub batch: usize,
    pub flows: u32,
    /// In words: the runs each term comes from.
    pub notes: Vec<String>,
}

/// One NF as configured, and what it costs per packet in a compound chain (its own
/// work and the call that reaches it), and in a pipeline's stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct NfCalibration {
    /// `kind` and its settings, as [`nf_key`] writes them: what a chain's NF must match.
    pub key: String,
    pub kind: String,
    pub cycles: Curve,
    /// In a pipeline's stage: behind an ingress queue the generator keeps full, the
    /// frames in flight are the queue's (a thousand buffers, not a batch), and an NF's
    /// tables share the caches with them; stateful NFs cost 10–20 cycles more there than
    /// in a compound loop. `None` when the calibration has no pipeline terms, or the NF
    /// was calibrated after the NFs it follows in a VNF (a stage would start with it).
    pub in_stage: Option<Curve>,
    /// First in a stage whose frames come from another core (bi:2's second stage): its
    /// in-stage work and the frame's cache lines it is first to need there. An NF that
    /// loads a header and branches on it waits for the line to come from the other
    /// core (the firewall: ~70 cycles more); one that only stores into it (the
    /// forwarder's MAC rewrite) or overlaps its loads pays little. `None` when the
    /// calibration has no pipeline terms.
    pub across: Option<Curve>,
    /// In a VNF process joined by memif, frames both ways, after the NFs before it in
    /// its VNF: its cycles there (a scenario's NF sees other frames than a compound
    /// chain's, the way back's too, and other caches: the DPI NF at 64 B costs about
    /// half what it does in a compound loop). `None` where not calibrated: priced at
    /// `cycles`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_vnf: Option<Curve>,
}

/// The pipeline runtime's terms: stages on cores joined by rings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PipelineCalibration {
    /// One stage doing everything (generator, ingress queue, sink), without its NFs
    /// (whose costs there are each NF's `in_stage`).
    pub single_stage: Curve,
    /// The first of two stages on two cores: generator, ingress queue, enqueue.
    pub first_stage: Curve,
    /// The last of two stages on two cores: dequeue, sink (the frame's cache lines its
    /// first NF needs are that NF's `across`).
    pub last_stage: Curve,
    /// A ring between two stages on one core (its enqueue and dequeue, and the turn).
    pub same_core_link: Curve,
}

impl PipelineCalibration {
    /// The two-stage ends at `size`.
    pub fn ends(&self, size: f64) -> Result<StageEnds, String> {
        Ok(StageEnds {
            single: self.single_stage.at(size)?,
            first: self.first_stage.at(size)?,
            last: self.last_stage.at(size)?,
        })
    }
}

/// A pipeline's stage terms at one frame size, cycles per packet: what the rings across
/// cores are priced from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageEnds {
    /// One stage doing everything (`single_stage`).
    pub single: f64,
    /// The first of two stages (`first_stage`).
    pub first: f64,
    /// The last of two stages (`last_stage`).
    pub last: f64,
}

impl StageEnds {
    /// A ring across cores, both sides: first + last − single (the generator and sink
    /// cancel out).
    pub fn cross_core_link(&self) -> f64 {
        self.first + self.last - self.single
    }

    /// The receiving side of a ring across cores: half the link, but never more than
    /// the last stage (dequeue and sink) measured in all. There the enqueue side pays
    /// most of it (the buffers' lines go back to the generator's core), and an even
    /// split would price the sink below zero.
    pub fn dequeue(&self) -> f64 {
        (self.cross_core_link() / 2.0).min(self.last).max(0.0)
    }

    /// The sending side of a ring across cores: the link less its receiving side.
    pub fn enqueue(&self) -> f64 {
        self.cross_core_link() - self.dequeue()
    }

    /// The first term a prediction prices from these ends that comes to less than
    /// zero, with its cycles: a failed measurement (e.g. a stage measured while the
    /// host stalled, so a ring across cores costs less than nothing).
    pub fn term_below_zero(&self) -> Option<(&'static str, f64)> {
        [
            (
                "a ring across cores (first + last − single stage)",
                self.cross_core_link(),
            ),
            ("the first of two stages less its enqueue", self.first - self.enqueue()),
            ("the last of two stages less its dequeue", self.last - self.dequeue()),
        ]
        .into_iter()
        .find(|(_, cycles)| *cycles < 0.0)
    }
}

/// A chaining technology between namespaces (`veth`, `nic-switch`, `linux`, `ovs`)
/// with its I/O: what its chain of n forwarders costs the DUT's core, and what the
/// tester on the other core can offer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WiredCalibration {
    pub technology: String,
    /// DUT-core cycles per frame the chain's ends cost whatever n (`C_RX + C_TX + C_other`).
    pub fixed: Curve,
    /// DUT-core cycles per frame of each hop (its link, its I/O, a forwarder's work).
    pub per_hop: Curve,
    /// The tester's own ceiling, packets per second it sends and receives at most.
    pub tester_pps: Curve,
    /// Where the chaining drops inside the chain (Linux; see `hops_overload`): seed 002's
    /// `C_SWdrops`. `None` where the excess is dropped at the chain's entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub software_drops: Option<SoftwareDrops>,
}

/// Seed 002's `C_SWdrops,n`: the DUT core's cycles, per frame delivered, spent on
/// frames dropped inside the chain after hops worked on them, offered all the tester
/// sends: TSC over what the chain delivered then, less its cycles per frame at its
/// maximum. Measured at two chain lengths, linear in n between and beyond them (drops
/// further down a longer chain waste more), never below zero.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SoftwareDrops {
    /// The two chain lengths, fewer hops first.
    pub lengths: [usize; 2],
    /// At `lengths[0]` hops.
    pub short: Curve,
    /// At `lengths[1]` hops.
    pub long: Curve,
}

impl SoftwareDrops {
    /// `C_SWdrops,n` at `n` hops and `size`, cycles per frame delivered.
    pub fn at(&self, n: f64, size: f64) -> Result<f64, String> {
        let [short_n, long_n] = self.lengths;
        if long_n <= short_n {
            return Err(format!(
                "software drops measured at lengths {:?}: not two",
                self.lengths
            ));
        }
        let (short, long) = (self.short.at(size)?, self.long.at(size)?);
        let (a, b) = (short_n as f64, long_n as f64);
        Ok((short + (long - short) * (n - a) / (b - a)).max(0.0))
    }
}

/// Every term, as measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Calibration {
    pub schema: String,
    /// The sfclab version that measured it.
    pub version: String,
    pub machine: CalibratedMachine,
    /// When, UTC (RFC 3339).
    pub date: String,
    pub method: Method,
    /// Frame sizes calibrated (with FCS), ascending.
    pub sizes: Vec<u16>,
    /// Compound runtime, everything but the NFs: generator, loop and sink per packet
    /// (for in-memory ports, `C_RX + C_TX + C_other`).
    pub compound_base: Curve,
    pub nfs: Vec<NfCalibration>,
    /// `None` where the machine has one core (no second core to measure a ring across).
    pub pipeline: Option<PipelineCalibration>,
    pub wired: Vec<WiredCalibration>,
    /// Scenarios' terms: VNF processes joined by memif and the tester that drives them
    /// (`None`: not calibrated; `model calibrate --memif`, needs root).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memif: Option<MemifCalibration>,
}

/// What a scenario's parts cost (seed 001's VNFs as sfclab processes joined by memif,
/// one tester thread driving every chain), cycles per frame on their cores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemifCalibration {
    /// The tester, per frame it generates, whether a chain's ring takes it or refuses it.
    pub tester_generate: Curve,
    /// The tester, per frame a chain's ring took (the copy into shared memory), beyond
    /// `tester_generate`.
    pub tester_send: Curve,
    /// The tester, per frame it receives back (its checks and counters).
    pub tester_receive: Curve,
    /// A VNF process's own work per frame, per way its memif ends wait.
    pub waits: Vec<MemifWaitCalibration>,
}

/// A VNF process's costs in one wait mode of its memif ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct MemifWaitCalibration {
    /// `polling` or `interrupt`.
    pub wait: String,
    /// Per frame it receives and sends over memif, its NFs aside, alone on its core, with
    /// frames both ways (a stream each way through it), in cycles it ran (the core's
    /// time it did not get is `availability`'s).
    pub hop: Curve,
    /// The same with frames one way only (its other side polled and found empty):
    /// `None` in a calibration before it (`hop` either way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hop_one_way: Option<Curve>,
    /// The share of a VNF core's time a VNF process that never sleeps gets there alone
    /// (the rest goes to interrupts, kernel threads, the hypervisor): its cycles per
    /// frame grow with its work by 1 / availability, so every process's cycles are
    /// priced over it. `None` in a calibration before it (1: folded into `hop`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub availability: Option<Availability>,
    /// A memif link between two VNF processes on one core, per frame, both its ends
    /// (the copy out of one process and into the next, and the switch between them):
    /// what replaces, at that link, the halves of their hops that a link to the tester's
    /// core costs. `None` where not calibrated (polling: VNFs on one core take turns,
    /// and the turn is their limit), priced as those halves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub same_core_link: Option<Curve>,
    /// Interrupt: the same with frames one way only, in a chain of k forwarders on one
    /// core, at a few k, at the smallest size. It falls with k (measured 225 cycles at
    /// 2, 148 at 4, 117 at 10) and levels off from about 4 (95 to 130 cycles up to 12):
    /// with more VNFs on the core each waits longer for its turn and takes more frames
    /// per wake-up. Priced `L + S / k` fitted to every k measured by least squares (a
    /// line through two noisy points, at 2 and 6, once put 10 per core at 61 cycles
    /// where 115 were measured), the smallest k's below it, the size's effect as both
    /// ways'; empty in a calibration before it (priced as both ways).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub same_core_link_one_way: Vec<LinkPoint>,
    /// Per frame, beyond `hop`, when k processes busy at once share each core (wake-ups,
    /// switches, caches refilled): measured at a few k, linear between them, the
    /// largest measured beyond it; 0 at k = 1.
    pub sharing: Vec<SharingPoint>,
    /// Interrupt: what k chains of one forwarder each on one core carry in all, at a
    /// few k. A VNF that empties its ring sleeps, and the tester's next frame wakes it
    /// (a system call on the tester's core, a switch on the VNF's); woken, it waits its
    /// turn while its ring, full, refuses frames: a ceiling on what VNFs taking turns
    /// pass. Linear between the measured k, the largest k's beyond.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taking_turns: Vec<TurnsPoint>,
    /// Interrupt: the same with VNFs that work a while on each frame. They empty their
    /// rings, sleep and are woken less often, so they carry more (measured: 10 to 25 %
    /// more at 60 cycles of work); `None` in a calibration before it (priced as
    /// forwarders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taking_turns_working: Option<WorkingTurns>,
    /// Interrupt: the same with VNFs of given kinds (the presets' NFs), each kind at a
    /// few k: what sets the turns is not their cycles alone (5 PVP VNFs a core carried
    /// 3.4–3.7 Mpps as forwarders, 4.1–4.6 as routers, 4.0–4.2 doing 50 cycles of
    /// synthetic work, 3.9–4.9 doing 75), so a VNF of a measured kind is priced by its
    /// own; empty in a calibration before it (priced by its work).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub vnf_turns: Vec<VnfTurns>,
    /// Polling: how long a process keeps a shared core before the scheduler gives it
    /// to the next (a process that never sleeps only leaves it when preempted), at a
    /// few numbers of processes per core, in increasing order. It grows with them
    /// (measured 2.0 ms at 2, 2.9 at 4, 3.3 at 6, 3.5 at 10 and 12): priced `L + S /
    /// k` fitted to every k measured, the smallest k's below it. Read from `turn`, one
    /// measured at 4 per core, in a calibration before /9.
    #[serde(
        default,
        rename = "turns",
        alias = "turn",
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub turns: Vec<Turn>,
    /// A link that crosses between two hosts (a VXLAN tunnel over the hosts' cable, each
    /// end an AF_XDP socket in generic mode, as `hosts:` scenarios join places on
    /// different hosts), at the smallest size, from one forwarder one way with its input
    /// or its output crossing; `None` where not calibrated (scenarios over hosts are then
    /// refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnel: Option<TunnelTerms>,
}

/// What a crossing between hosts costs, per frame, in place of memif's ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TunnelTerms {
    /// A VNF that receives through a tunnel: its core's cycles in place of the receiving
    /// half of its hop one way (the kernel's receive work is in it: receive steering
    /// puts it on the VNF cores, as a NIC's interrupts land on its host's cores).
    pub into_vnf: Measured,
    /// A VNF that sends through a tunnel: its core's cycles in place of the sending half
    /// of its hop one way (the encapsulation and the far end's receive work with it).
    pub out_of_vnf: Measured,
    /// Two VNFs on one core, one sending through a tunnel to the other: their core's
    /// cycles in place of the sending half of one's hop and the receiving half of the
    /// other's (the kernel's work between them counted once, where `into_vnf` and
    /// `out_of_vnf` each hold it).
    pub between_vnfs: Measured,
    /// The tester sending into a tunnel: its cycles per frame the socket took, in place
    /// of `tester_send`.
    pub tester_send: Measured,
}

impl TunnelTerms {
    /// The three parts the runs tell apart (`into_vnf` = socket in + kernel, `out_of_vnf`
    /// = socket out + kernel, `between_vnfs` = socket out + kernel + socket in), cycles
    /// per frame, none below zero: a receiving socket's, a sending socket's (with the
    /// encapsulation), and the kernel's receive work between them, which receive
    /// steering runs on the VNF cores in softirq, outside the scheduler's shares.
    pub fn parts(&self) -> TunnelParts {
        let (into, out, between) = (
            self.into_vnf.cycles.max(0.0),
            self.out_of_vnf.cycles.max(0.0),
            self.between_vnfs.cycles.max(0.0),
        );
        let kernel = (into + out - between).clamp(0.0, into.min(out));
        TunnelParts {
            receiving: into - kernel,
            sending: out - kernel,
            kernel,
        }
    }
}

/// A crossing's cycles per frame, apart.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TunnelParts {
    pub receiving: f64,
    pub sending: f64,
    pub kernel: f64,
}

/// A term measured once per repetition: the median, and every repetition's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Measured {
    pub cycles: f64,
    pub runs: Vec<f64>,
}

/// How long a polling process keeps a shared core of `per_core` such processes: a chain
/// of polling hops on one core passes at most a ring of frames per link each time every
/// hop has had its turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Turn {
    /// Before /9 the turn was measured with four hops on the core only.
    #[serde(default = "Turn::per_core_before_9")]
    pub per_core: f64,
    /// The median of the repetitions.
    pub seconds: f64,
    pub runs: Vec<f64>,
}

impl Turn {
    fn per_core_before_9() -> f64 {
        4.0
    }
}

/// A field that held one value before it held several: either, as a list.
fn one_or_many<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany<T> {
        One(T),
        Many(Vec<T>),
    }
    Ok(match OneOrMany::deserialize(deserializer)? {
        OneOrMany::One(one) => vec![one],
        OneOrMany::Many(many) => many,
    })
}

/// What VNFs taking turns on a core carry in all at `per_core` per core.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TurnsPoint {
    pub per_core: f64,
    /// Frames a second, the median of the repetitions.
    pub pps: f64,
    pub runs: Vec<f64>,
}

/// What k PVP VNFs of one kind (their NFs, by calibration key, in order) carry in all
/// taking turns on one core.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct VnfTurns {
    pub nfs: Vec<String>,
    pub points: Vec<TurnsPoint>,
}

/// What VNFs doing `work_cycles` of work a frame beyond a forwarder's carry taking turns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorkingTurns {
    /// The work's compound cost, cycles per frame.
    pub work_cycles: f64,
    pub points: Vec<TurnsPoint>,
}

/// The share of its core's time a lone VNF process gets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Availability {
    /// The median of the repetitions, between 0 and 1.
    pub share: f64,
    pub runs: Vec<f64>,
}

/// A link between VNFs on one core of `per_core` VNFs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct LinkPoint {
    pub per_core: f64,
    /// The median of the repetitions, cycles per frame.
    pub cycles: f64,
    pub runs: Vec<f64>,
}

/// The cost of sharing a core at `per_core` processes per core.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SharingPoint {
    pub per_core: f64,
    /// The median of the repetitions, cycles per frame.
    pub cycles: f64,
    pub runs: Vec<f64>,
}

impl MemifWaitCalibration {
    /// What VNFs doing `work` cycles a frame beyond a forwarder's carry in all, taking
    /// turns at `k` per core (interrupt mode): linear between measured k, the largest
    /// k's beyond; linear in the work between forwarders and the working VNFs, theirs
    /// beyond (heavier ones carry as much or more, and their cycles soon bind first); none
    /// (infinite) at one or fewer or where not calibrated.
    pub fn taking_turns_at(&self, k: f64, work: f64) -> f64 {
        if k <= 1.0 {
            return f64::INFINITY;
        }
        let at_k = |points: &[TurnsPoint]| linear_in_k(points.iter().map(|p| (p.per_core, p.pps)).collect(), k);
        let Some(forwarders) = at_k(&self.taking_turns) else {
            return f64::INFINITY;
        };
        match &self.taking_turns_working {
            Some(w) if w.work_cycles > 0.0 => {
                let working = at_k(&w.points).unwrap_or(forwarders);
                forwarders + (working - forwarders) * (work / w.work_cycles).clamp(0.0, 1.0)
            }
            _ => forwarders,
        }
    }

    /// What VNFs whose NFs are `nfs` carry in all taking turns at `k` per core, where
    /// that kind was measured (linear between its measured k, the largest k's beyond);
    /// `None` otherwise.
    pub fn vnf_turns_at(&self, nfs: &[String], k: f64) -> Option<f64> {
        let kind = self.vnf_turns.iter().find(|v| v.nfs == nfs)?;
        linear_in_k(kind.points.iter().map(|p| (p.per_core, p.pps)).collect(), k)
    }

    /// The hop of a process whose frames go `one_way` (or both ways).
    pub fn hop_of(&self, one_way: bool) -> &Curve {
        match (&self.hop_one_way, one_way) {
            (Some(h), true) => h,
            _ => &self.hop,
        }
    }

    /// A link between two VNFs on one core of `k` VNFs, frames of `size`, `one_way` or
    /// both ways; `None` where not calibrated.
    pub fn link_at(&self, one_way: bool, k: f64, size: f64) -> Result<Option<f64>, String> {
        let Some(both) = &self.same_core_link else {
            return Ok(None);
        };
        let at_size = both.at(size)?;
        let points = &self.same_core_link_one_way;
        let (true, Some(first)) = (one_way, points.first()) else {
            return Ok(Some(at_size));
        };
        let smallest = f64::from(both.points.first().map_or(64, |p| p.size));
        let one_way_at_k = in_reciprocal(points.iter().map(|p| (p.per_core, p.cycles)), first.per_core, k);
        Ok(Some(one_way_at_k + at_size - both.at(smallest)?))
    }

    /// A polling process's turn on a core shared by `k`, seconds; `None` where not
    /// calibrated.
    pub fn turn_at(&self, k: f64) -> Option<f64> {
        let first = self.turns.first()?;
        let fitted = in_reciprocal(self.turns.iter().map(|t| (t.per_core, t.seconds)), first.per_core, k);
        // Points far off the curve can put it below zero: the shortest turn measured then.
        Some(if fitted > 0.0 {
            fitted
        } else {
            self.turns.iter().map(|t| t.seconds).fold(f64::INFINITY, f64::min)
        })
    }

    /// The share of a VNF core's time its processes get (1 where not calibrated).
    pub fn available_share(&self) -> f64 {
        self.availability.as_ref().map_or(1.0, |a| a.share)
    }

    /// The sharing cost at `k` processes per core: linear between measured k, the
    /// largest k's cost beyond it, nothing at one or fewer.
    pub fn sharing_at(&self, k: f64) -> f64 {
        if k <= 1.0 {
            return 0.0;
        }
        let mut points = vec![(1.0, 0.0)];
        points.extend(self.sharing.iter().map(|p| (p.per_core, p.cycles)));
        linear_in_k(points, k).unwrap_or(0.0)
    }
}

/// A term measured at a few k (the smallest `smallest`) that moves with k as `L + S /
/// k`, at `k`: the fit through every point, the smallest k's value below it.
fn in_reciprocal(points: impl Iterator<Item = (f64, f64)>, smallest: f64, k: f64) -> f64 {
    let (intercept, slope) = fit_in_reciprocal(points);
    intercept + slope / k.max(smallest)
}

/// `value = L + S / k` fitted to points `(k, value)` by least squares: `(L, S)`; a
/// single k's value (or their mean) with no slope where the points hold one k. (Not
/// `sfclab_measure::LineFit`: the model depends on no sfclab crate.)
fn fit_in_reciprocal(points: impl Iterator<Item = (f64, f64)>) -> (f64, f64) {
    let points: Vec<(f64, f64)> = points.map(|(k, v)| (1.0 / k, v)).collect();
    let n = points.len().max(1) as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    if sxx <= f64::EPSILON {
        return (mean_y, 0.0);
    }
    let slope = sxy / sxx;
    (mean_y - slope * mean_x, slope)
}

/// A term measured at a few `(k, value)`, at `k`: linear between the measured k, the
/// nearest measured value outside them; `None` where none was measured.
fn linear_in_k(mut points: Vec<(f64, f64)>, k: f64) -> Option<f64> {
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    match points.iter().position(|p| p.0 >= k) {
        None => points.last().map(|p| p.1),
        Some(0) => Some(points[0].1),
        Some(i) => {
            let ((k0, c0), (k1, c1)) = (points[i - 1], points[i]);
            Some(c0 + (c1 - c0) * (k - k0) / (k1 - k0))
        }
    }
}

impl MemifCalibration {
    /// The terms of wait mode `wait` (`polling`, `interrupt`), or why there are none.
    pub fn wait(&self, wait: &str) -> Result<&MemifWaitCalibration, String> {
        self.waits.iter().find(|w| w.wait == wait).ok_or_else(|| {
            let known: Vec<&str> = self.waits.iter().map(|w| w.wait.as_str()).collect();
            format!(
                "memif wait `{wait}` is not in the calibration (it has {}): calibrate with --memif-waits {wait}",
                known.join(", ")
            )
        })
    }
}

/// How an NF is named in a calibration: its kind, and its settings as compact JSON
/// (keys sorted) when it has any: `nat44`, `synthetic {"cycles":100}`.
pub fn nf_key(kind: &str, settings: &serde_json::Value) -> String {
    match settings {
        serde_json::Value::Null => kind.to_string(),
        serde_json::Value::Object(m) if m.is_empty() => kind.to_string(),
        other => format!("{kind} {other}"),
    }
}

/// `key` cut to at most `chars` characters, `…` ending it where it was cut (a DPI NF's
/// key holds its every rule).
pub fn short_key(key: &str, chars: usize) -> String {
    if key.chars().count() > chars {
        format!("{}…", key.chars().take(chars.saturating_sub(1)).collect::<String>())
    } else {
        key.to_string()
    }
}

impl Calibration {
    /// Reads the calibration file at `path`; an error names it and how to make one.
    pub fn load(path: &std::path::Path) -> Result<Calibration, String> {
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("{origin}: {e} (make one with `sfclab model calibrate --output {origin}`)"))?;
        Calibration::from_json(&text, &origin)
    }

    /// Reads a calibration file, refusing another schema and saying which.
    pub fn from_json(text: &str, origin: &str) -> Result<Calibration, String> {
        let value: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("{origin}: not JSON: {e}"))?;
        match value.get("schema").and_then(|s| s.as_str()) {
            Some(
                CALIBRATION_SCHEMA | CALIBRATION_SCHEMA_8 | CALIBRATION_SCHEMA_7 | CALIBRATION_SCHEMA_6
                | CALIBRATION_SCHEMA_5 | CALIBRATION_SCHEMA_4 | CALIBRATION_SCHEMA_3,
            ) => {}
            Some(other) => {
                return Err(format!(
                    "{origin}: schema `{other}`; this sfclab reads `{CALIBRATION_SCHEMA}` (calibrate again)"
                ));
            }
            None => return Err(format!("{origin}: no `schema` field: not an sfclab calibration")),
        }
        let cal: Calibration = serde_json::from_value(value).map_err(|e| format!("{origin}: {e}"))?;
        cal.check().map_err(|e| format!("{origin}: {e}"))?;
        Ok(cal)
    }

    /// A calibration that contradicts itself is refused: every curve covers the sizes,
    /// every cost is finite and not negative (but for a fitted slope, which carries its
    /// interval), every NF once.
    pub fn check(&self) -> Result<(), String> {
        if !(self.machine.tsc_hz.is_finite() && self.machine.tsc_hz > 0.0) {
            return Err(format!("machine.tsc_hz {} is not a clock rate", self.machine.tsc_hz));
        }
        let mut curves: Vec<(String, &Curve)> = vec![("compound_base".into(), &self.compound_base)];
        for nf in &self.nfs {
            curves.push((format!("nf `{}`", nf.key), &nf.cycles));
            if let Some(c) = &nf.in_vnf {
                curves.push((format!("nf `{}` in_vnf", nf.key), c));
            }
            // Both pipeline terms or neither (an NF calibrated after the NFs before it in
            // its VNF has neither: it is priced in compound loops only).
            if nf.in_stage.is_some() != nf.across.is_some() {
                let (has, lacks) = if nf.in_stage.is_some() {
                    ("in_stage", "across")
                } else {
                    ("across", "in_stage")
                };
                return Err(format!("nf `{}` has an {has} cost but no {lacks} cost", nf.key));
            }
            for (name, term) in [("in_stage", &nf.in_stage), ("across", &nf.across)] {
                match (term, &self.pipeline) {
                    (Some(c), Some(_)) => curves.push((format!("nf `{}` {name}", nf.key), c)),
                    (None, _) => {}
                    (Some(_), None) => {
                        return Err(format!(
                            "nf `{}` has an {name} cost, but no pipeline is calibrated",
                            nf.key
                        ));
                    }
                }
            }
        }
        if let Some(p) = &self.pipeline {
            curves.push(("pipeline.single_stage".into(), &p.single_stage));
            curves.push(("pipeline.first_stage".into(), &p.first_stage));
            curves.push(("pipeline.last_stage".into(), &p.last_stage));
            curves.push(("pipeline.same_core_link".into(), &p.same_core_link));
        }
        for w in &self.wired {
            curves.push((format!("wired `{}` fixed", w.technology), &w.fixed));
            curves.push((format!("wired `{}` per_hop", w.technology), &w.per_hop));
            curves.push((format!("wired `{}` tester_pps", w.technology), &w.tester_pps));
            if let Some(d) = &w.software_drops {
                curves.push((format!("wired `{}` software_drops.short", w.technology), &d.short));
                curves.push((format!("wired `{}` software_drops.long", w.technology), &d.long));
            }
        }
        if let Some(m) = &self.memif {
            curves.push(("memif.tester_generate".into(), &m.tester_generate));
            curves.push(("memif.tester_send".into(), &m.tester_send));
            curves.push(("memif.tester_receive".into(), &m.tester_receive));
            for w in &m.waits {
                curves.push((format!("memif `{}` hop", w.wait), &w.hop));
                if let Some(h) = &w.hop_one_way {
                    curves.push((format!("memif `{}` hop_one_way", w.wait), h));
                }
                if let Some(l) = &w.same_core_link {
                    curves.push((format!("memif `{}` same_core_link", w.wait), l));
                }
                let links = &w.same_core_link_one_way;
                if links.iter().any(|p| !(p.per_core >= 2.0 && p.cycles.is_finite()))
                    || !links.is_sorted_by(|a, b| a.per_core < b.per_core)
                {
                    return Err(format!(
                        "memif `{}` same_core_link_one_way: each point a number of cycles at 2 or more VNFs per core, in increasing order",
                        w.wait
                    ));
                }
                if w.turns
                    .iter()
                    .any(|t| !(t.per_core >= 2.0 && t.seconds.is_finite() && t.seconds > 0.0))
                    || !w.turns.is_sorted_by(|a, b| a.per_core < b.per_core)
                {
                    return Err(format!(
                        "memif `{}` turns: each a time in seconds at 2 or more processes per core, in increasing order",
                        w.wait
                    ));
                }
                let working = w.taking_turns_working.as_ref();
                if let Some(t) = working.filter(|t| !(t.work_cycles.is_finite() && t.work_cycles > 0.0)) {
                    return Err(format!(
                        "memif `{}` taking turns with {} cycles of work: not a work",
                        w.wait, t.work_cycles
                    ));
                }
                if let Some(p) = w
                    .taking_turns
                    .iter()
                    .chain(working.into_iter().flat_map(|t| &t.points))
                    .find(|p| !(p.per_core > 1.0 && p.pps.is_finite() && p.pps > 0.0))
                {
                    return Err(format!(
                        "memif `{}` taking turns at {} per core carries {}: not a rate",
                        w.wait, p.per_core, p.pps
                    ));
                }
                if let Some(a) = w.availability.as_ref().filter(|a| !(a.share > 0.0 && a.share <= 1.0)) {
                    return Err(format!(
                        "memif `{}` availability {} is not a share of a core's time",
                        w.wait, a.share
                    ));
                }
                if let Some(p) = w.sharing.iter().find(|p| !(p.per_core > 1.0 && p.cycles.is_finite())) {
                    return Err(format!(
                        "memif `{}` sharing at {} per core is {}: not a cost",
                        w.wait, p.per_core, p.cycles
                    ));
                }
            }
        }
        for (name, curve) in curves {
            let sizes: Vec<u16> = curve.points.iter().map(|p| p.size).collect();
            if sizes != self.sizes {
                return Err(format!(
                    "{name} covers sizes {sizes:?}, the calibration {:?}",
                    self.sizes
                ));
            }
            // Below zero is no cost, but for a fitted slope (it has an interval): that is
            // what the measurements said of a term too small to see, or of lengths another
            // limit bound alike; kept as measured, said so, priced at no less than zero.
            if let Some(bad) = curve
                .points
                .iter()
                .find(|p| !p.cycles.is_finite() || (p.cycles < 0.0 && p.interval.is_none()))
            {
                return Err(format!("{name} at {} B is {}: not a cost", bad.size, bad.cycles));
            }
        }
        let mut keys: Vec<&str> = self.nfs.iter().map(|n| n.key.as_str()).collect();
        keys.sort_unstable();
        if let Some(w) = keys.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("nf `{}` is calibrated twice", w[0]));
        }
        Ok(())
    }

    /// NF `key`'s calibration, or why there is none.
    fn nf(&self, key: &str) -> Result<&NfCalibration, String> {
        self.nf_or(key, CALIBRATE_A_CHAINS_NFS)
    }

    /// NF `key`'s calibration, or why there is none and the command (`calibrate_with`)
    /// that measures it.
    fn nf_or(&self, key: &str, calibrate_with: &str) -> Result<&NfCalibration, String> {
        self.nfs.iter().find(|n| n.key == key).ok_or_else(|| {
            // Keys as long as a DPI NF's rule set are cut to a line each.
            let known: Vec<String> = self.nfs.iter().map(|n| short_key(&n.key, 48)).collect();
            format!(
                "NF `{key}` is not in the calibration (it has {}): {calibrate_with}",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            )
        })
    }

    /// The cost of NF `key` at `size`, or why there is none.
    pub fn nf_cycles(&self, key: &str, size: f64) -> Result<f64, String> {
        self.nf(key)?.cycles.at(size).map_err(|e| format!("NF `{key}`: {e}"))
    }

    /// As [`Calibration::nf_cycles`], for an NF of a scenario's VNF (its cost in a VNF
    /// where calibrated there, `in_vnf`): where it is missing,
    /// the command that calibrates a scenario's NFs (in their VNFs, after the NFs before
    /// them) is named.
    pub fn vnf_nf_cycles(&self, key: &str, size: f64) -> Result<f64, String> {
        let nf = self.nf_or(key, CALIBRATE_A_SCENARIOS_NFS)?;
        nf.in_vnf
            .as_ref()
            .unwrap_or(&nf.cycles)
            .at(size)
            .map_err(|e| format!("NF `{key}`: {e}"))
    }

    /// The cost of NF `key` in a pipeline's stage at `size` (`across`: first in a stage
    /// fed from another core), or why there is none.
    pub fn nf_stage_cycles(&self, key: &str, size: f64, across: bool) -> Result<f64, String> {
        let nf = self.nf(key)?;
        let (curve, where_) = if across {
            (&nf.across, "first in a stage fed from another core")
        } else {
            (&nf.in_stage, "in a stage")
        };
        curve
            .as_ref()
            .ok_or_else(|| match &self.pipeline {
                None => "the calibration has no pipeline terms (it was measured on one core)".to_string(),
                Some(_) => {
                    format!("NF `{key}` was calibrated after the NFs before it in a VNF, not in a pipeline's stage")
                }
            })?
            .at(size)
            .map_err(|e| format!("NF `{key}` {where_}: {e}"))
    }

    pub fn wired(&self, technology: &str) -> Result<&WiredCalibration, String> {
        self.wired.iter().find(|w| w.technology == technology).ok_or_else(|| {
            let known: Vec<&str> = self.wired.iter().map(|w| w.technology.as_str()).collect();
            format!(
                "chaining `{technology}` is not in the calibration (it has {}): calibrate with --technologies {technology} (needs root)",
                if known.is_empty() { "none".to_string() } else { known.join(", ") }
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn curve(points: &[(u16, f64)]) -> Curve {
        Curve::new(
            points
                .iter()
                .map(|&(size, cycles)| CurvePoint {
                    size,
                    cycles,
                    runs: vec![cycles],
                    interval: None,
                })
                .collect(),
        )
    }

    fn stages(single: f64, first: f64, last: f64) -> StageEnds {
        StageEnds { single, first, last }
    }

    #[test]
    fn a_ring_across_cores_is_split_between_its_ends_and_a_term_below_zero_is_found() {
        // first 160 + last 120 − single 200 = a ring of 80: 40 a side.
        let p = stages(200.0, 160.0, 120.0);
        assert_eq!((p.cross_core_link(), p.dequeue(), p.enqueue()), (80.0, 40.0, 40.0));
        assert_eq!(p.term_below_zero(), None);
        // A last stage lighter than half the ring: the receiving side pays no more than
        // it, the sending side the rest.
        let p = stages(100.0, 200.0, 30.0);
        assert_eq!((p.dequeue(), p.enqueue()), (30.0, 100.0));
        assert_eq!(p.term_below_zero(), None);
        // Two stages measured cheaper than one: a ring costing less than nothing.
        let p = stages(400.0, 100.0, 38.0);
        let (what, cycles) = p.term_below_zero().unwrap();
        assert!(what.starts_with("a ring across cores"), "{what}");
        assert_eq!(cycles, -262.0);
        // The first stage lighter than the sending side it must pay.
        let p = stages(10.0, 100.0, 300.0);
        let (what, cycles) = p.term_below_zero().unwrap();
        assert!(what.starts_with("the first of two stages"), "{what}");
        assert_eq!(cycles, 100.0 - (390.0 - 195.0));
        // A calibration's ends at a size: from its curves; outside its sizes, the
        // curve's error.
        let curves = PipelineCalibration {
            single_stage: Curve::flat(&[64], 10.0),
            first_stage: Curve::flat(&[64], 100.0),
            last_stage: Curve::flat(&[64], 300.0),
            same_core_link: Curve::flat(&[64], 20.0),
        };
        assert_eq!(curves.ends(64.0), Ok(p));
        assert!(curves.ends(1518.0).is_err());
    }

    #[test]
    fn a_curve_interpolates_between_sizes_and_refuses_outside_them() {
        let c = curve(&[(1518, 300.0), (64, 100.0), (512, 150.0)]);
        assert_eq!(c.at(64.0).unwrap(), 100.0);
        assert_eq!(c.at(512.0).unwrap(), 150.0);
        // Half way from 64 to 512: 125; a quarter of the way from 512 to 1518: 187.5.
        assert_eq!(c.at(288.0).unwrap(), 125.0);
        assert_eq!(c.at(512.0 + (1518.0 - 512.0) / 4.0).unwrap(), 187.5);
        let e = c.at(9000.0).unwrap_err();
        assert!(e.contains("outside the calibrated frame sizes 64..1518"), "{e}");
        assert!(c.at(60.0).is_err());
        assert!(curve(&[]).at(64.0).is_err());
    }

    #[test]
    fn a_term_falling_in_one_over_k_is_fitted_to_every_point() {
        let close = |(l, s): (f64, f64), (el, es): (f64, f64)| {
            assert!(
                (l - el).abs() < 1e-9 && (s - es).abs() < 1e-9,
                "({l}, {s}) against ({el}, {es})"
            );
        };
        // Exactly on `90 + 270 / k`.
        close(
            fit_in_reciprocal([(2.0, 225.0), (10.0, 117.0)].into_iter()),
            (90.0, 270.0),
        );
        // A middle point 20 cycles high pulls the line through both ends up and flatter:
        // x = 1/k at 1/2, 1/6, 1/12 (mean 1/4), the residuals' sum zero.
        let (l, s) = fit_in_reciprocal([(2.0, 225.0), (6.0, 135.0 + 20.0), (12.0, 112.5)].into_iter());
        assert!(l > 90.0 && s < 270.0, "({l}, {s})");
        let residuals: f64 = [(2.0, 225.0), (6.0, 155.0), (12.0, 112.5)]
            .iter()
            .map(|(k, v)| v - (l + s / k))
            .sum();
        assert!(residuals.abs() < 1e-9, "{residuals}");
        // One k, or the same k twice: its value (their mean), flat.
        close(fit_in_reciprocal([(4.0, 150.0)].into_iter()), (150.0, 0.0));
        close(
            fit_in_reciprocal([(4.0, 140.0), (4.0, 160.0)].into_iter()),
            (150.0, 0.0),
        );
    }

    #[test]
    fn a_turn_measured_at_four_per_core_before_9_is_read_as_the_one_point() {
        let hop = serde_json::json!({ "points": [{ "size": 64, "cycles": 200.0, "runs": [200.0] }] });
        let before = serde_json::json!({
            "wait": "polling", "hop": hop, "sharing": [],
            "turn": { "seconds": 0.003, "runs": [0.003] },
        });
        let w: MemifWaitCalibration = serde_json::from_value(before).unwrap();
        assert_eq!(w.turns.len(), 1);
        assert_eq!((w.turns[0].per_core, w.turns[0].seconds), (4.0, 0.003));
        // One point holds at every k; written back as the list it now is.
        assert_eq!(w.turn_at(10.0), Some(0.003));
        let written = serde_json::to_value(&w).unwrap();
        assert_eq!(written["turns"][0]["per_core"], 4.0);
        let again: MemifWaitCalibration = serde_json::from_value(written).unwrap();
        assert_eq!(again, w);
    }

    #[test]
    fn nf_keys_name_the_settings_only_when_there_are_some() {
        assert_eq!(nf_key("nat44", &serde_json::json!({})), "nat44");
        assert_eq!(nf_key("noop", &serde_json::Value::Null), "noop");
        assert_eq!(
            nf_key("synthetic", &serde_json::json!({"cycles": 100, "a": 1})),
            r#"synthetic {"a":1,"cycles":100}"#
        );
    }
}
