//! `sfclab model calibrate`: measures every in-memory cost term the model uses on this
//! machine, as a calibration (`sfclab_model::Calibration`, JSON `sfclab.calibration/9`).
//!
//! Every run is a capacity run: the compound runtime's generator never makes more than
//! the chain takes, and the pipeline runs with flow control and backpressure links, so
//! no cycle goes to a packet that is then dropped. A term is the difference of two runs
//! of the same repetition and frame size, the median over repetitions kept (with every
//! repetition's estimate):
//!
//! - `noop` (the cheapest NF: the call that reaches it) = (cycles of noop×5 − noop×1) / 4;
//! - compound base (generator, loop, sink) = noop×1 − noop;
//! - NF X = cycles of the chain [X] alone − base (its work and its call); a stateless
//!   NF (no table: the forwarder) = ([X×5] − [X]) / 4, what one more copy costs in a
//!   chain (the forwarder's first copy costs ~1 cycle against the chain without it,
//!   each further one ~3, and a difference of a few cycles between two runs is noise
//!   on this host);
//! - pipeline, one stage on one core (generator, ingress queue, stage, sink): its own
//!   cost single = s_core [noop] − stage noop, stage noop = (s_core [noop×5] − s_core
//!   [noop]) / 4; each NF in a stage = s_core [NF] − single (behind an ingress queue
//!   the generator keeps full, the frames in flight are a thousand buffers, not a batch,
//!   and stateful NFs pay for sharing the caches with them). Stages S = noop ->
//!   synthetic(cycles=100) and L = noop -> synthetic(cycles=60): the noop touches no
//!   frame, the pure CPU work (TSC time) keeps the rings in the regime of real chains.
//!   Each end of two stages is measured where it is the bottleneck, the other end
//!   somewhat lighter (a core's busy cycles per frame depend on the other's pace): first
//!   stage = core 0 of bi:2 [S | L] − S in a stage, last stage = core 1 of bi:2 [L | S]
//!   − S in a stage. Each NF X first in a stage fed from another core (`across`) = core
//!   1 of bi:2 [L | X, synthetic(cycles=100)] − that of [L | S] + stage noop: what X
//!   costs where the frame's lines are still in the other core's cache. A ring between
//!   stages on one core = (pbp:1 [S S], four stages on one core, − s_core [S S]) / 3.
//!
//! Repetitions are interleaved (every run once per round) so a machine's drift hits all.

use crate::{Progress, Stop};
use serde_json::json;
use sfclab_model::calibration::{
    CalibratedMachine, Calibration, Curve, CurvePoint, Method, NfCalibration, PipelineCalibration, SoftwareDrops,
    StageEnds, WiredCalibration,
};
use sfclab_model::{CALIBRATION_SCHEMA, nf_key};
use sfclab_nf::NfSpec;
use sfclab_runtime::{LinkMode, PipelineSettings, Placement, RunSettings, run_compound, run_pipeline};
use sfclab_traffic::{Destinations, FrameSizes, GeneratorConfig, Rate};
use std::time::Duration;

use crate::cores::CoreDistance;
use crate::{median, repetitions};
use sfclab_measure::LineFit;

/// One NF to calibrate and the traffic it gets (a router needs destinations in its table).
#[derive(Clone, Debug)]
pub struct NfWorkload {
    pub nf: NfSpec,
    pub flows: u32,
    pub destinations: Destinations,
    /// The NFs it follows in its chain, whose output is its traffic (a firewall after a
    /// NAT allows the translated sources only): its cost is then compound [before, NF] −
    /// compound [before], and it has no pipeline terms (a stage would start with it).
    pub before: Vec<NfSpec>,
}

impl NfWorkload {
    /// What the calibration names it by ([`nf_key`]).
    pub fn key(&self) -> String {
        nf_key(self.nf.kind(), &self.nf.cost_settings())
    }

    /// Its key, shortened to a line (a DPI NF's key holds its every rule).
    pub fn label(&self) -> String {
        let mut short = sfclab_model::calibration::short_key(&self.key(), 72);
        if !self.before.is_empty() {
            let before: Vec<&str> = self.before.iter().map(|n| n.kind()).collect();
            short.push_str(&format!(" after {}", before.join(", ")));
        }
        short
    }

    /// Its traffic at frames of `size` bytes.
    fn traffic(&self, size: u16) -> GeneratorConfig {
        traffic(size, self.flows, self.destinations.clone())
    }
}

#[derive(Clone)]
pub struct CalibrateArgs {
    pub sizes: Vec<u16>,
    pub nfs: Vec<NfWorkload>,
    pub duration: Duration,
    pub warmup: Duration,
    pub repeat: usize,
    pub batch: usize,
    /// The core of the compound runs (and the first of the pipeline's).
    pub core: Option<usize>,
    /// Calibrate the pipeline's stage ends and rings (where two cores are allowed).
    pub pipeline: bool,
    /// Chainings in namespaces to calibrate (`veth`, `nic-switch`, `linux`, `ovs`;
    /// needs root): each hop's and the chain ends' DUT-core cycles, the tester's ceiling.
    pub wired: Vec<String>,
    /// Runs on two cores taken at one distance between the cores (`None`: as they come).
    pub core_distance: Option<std::sync::Arc<CoreDistance>>,
    /// Scenarios' terms (VNF processes joined by memif, the tester; needs root): `nfs`
    /// must hold the synthetic NF their VNFs run ([`memif_workload`]).
    pub memif: Option<crate::memif_terms::MemifTermsArgs>,
}

/// `more` added to `workloads`, each NF once by its calibration key (the first kept).
pub fn add_new(workloads: &mut Vec<NfWorkload>, more: impl IntoIterator<Item = NfWorkload>) {
    for w in more {
        let key = w.key();
        if !workloads.iter().any(|n| n.key() == key) {
            workloads.push(w);
        }
    }
}

/// The NF the VNFs of the memif terms' runs do, whose compound cost they subtract.
pub fn memif_workload() -> NfWorkload {
    NfWorkload {
        nf: NfSpec::new("synthetic", json!({ "cycles": crate::memif_terms::VNF_WORK_CYCLES })).expect("a synthetic NF"),
        flows: 1024,
        destinations: Destinations::Spread,
        before: Vec::new(),
    }
}

/// The NFs a calibration measures unless told otherwise: every NF type with settings
/// a chain would use (the router with 100,000 routes; NAT44 and the firewall with
/// tables sized for 1,024 flows: a table of the default million entries spreads 1,024
/// flows over as many 4 KiB pages, and its cost then swings with the TLB from run to
/// run), so `model predict` can price the chains users run first.
pub fn default_nfs() -> Result<Vec<NfWorkload>, String> {
    let spec =
        |kind: &str, settings: serde_json::Value| NfSpec::new(kind, settings).map_err(|e| format!("{kind}: {e}"));
    // Destinations spread over the router's table for every NF, as in the chains
    // `bench model` checks: an NF's cost depends on its traffic too.
    let one = |nf: NfSpec| NfWorkload {
        nf,
        flows: 1024,
        destinations: Destinations::Spread,
        before: Vec::new(),
    };
    Ok(vec![
        one(spec("noop", json!({}))?),
        one(spec("forwarder", json!({}))?),
        NfWorkload {
            nf: spec(
                "router",
                json!({ "generate": { "ipv4": 100_000, "seed": 1 }, "routes": ["0.0.0.0/0 192.0.2.1 0"] }),
            )?,
            flows: 1024,
            destinations: Destinations::Spread,
            before: Vec::new(),
        },
        one(spec(
            "nat44",
            json!({ "public": ["203.0.113.0/26"], "max_sessions": 4096 }),
        )?),
        // As a chain names it without settings: the million-entry table.
        one(spec("nat44", json!({}))?),
        one(spec(
            "firewall",
            json!({
                "rules": [{ "action": "allow", "proto": "udp", "src": "198.18.0.0/15" }],
                "stateful": true,
                "max_connections": 4096
            }),
        )?),
        one(spec("synthetic", json!({ "cycles": 100 }))?),
    ])
}

/// `nfs` in order, as a chain.
fn chain_of(nfs: &[NfSpec]) -> sfclab_core::NamedNfs {
    nfs.iter()
        .enumerate()
        .map(|(i, nf)| (format!("{}{}", nf.kind(), i + 1), nf.build()))
        .collect()
}

/// `n` copies of `nf`.
fn copies_of(nf: &NfSpec, n: usize) -> Vec<NfSpec> {
    vec![nf.clone(); n]
}

fn noop_spec() -> NfSpec {
    NfSpec::new("noop", json!({})).expect("a registered NF")
}

/// The noop as `noop_spec` makes it: its cost is the slope every round measures first.
fn is_noop(nf: &NfSpec) -> bool {
    nf.kind() == "noop" && nf_key(nf.kind(), &nf.cost_settings()) == "noop"
}

/// `cycles` of pure CPU per packet (TSC time: the same on a slow host).
fn work(cycles: u64) -> NfSpec {
    NfSpec::new("synthetic", json!({ "cycles": cycles })).expect("valid settings")
}

/// The copies of a stateless NF whose cost is the slope from one copy to them.
const COPIES: usize = 5;

/// What `run` (cycles per packet of a chain) gives for one copy of `nf`, and what each
/// further copy adds: (one, (COPIES copies − one) / (COPIES − 1)).
fn one_and_per_copy(nf: &NfSpec, run: &mut dyn FnMut(&[NfSpec]) -> Result<f64, String>) -> Result<(f64, f64), String> {
    let one = run(&copies_of(nf, 1))?;
    let many = run(&copies_of(nf, COPIES))?;
    Ok((one, (many - one) / (COPIES - 1) as f64))
}

/// `nf`'s cost where `run` measures chains: a stateless NF's what one more copy adds
/// (the forwarder's first copy costs ~1 cycle against the chain without it, each
/// further one ~3), another's its run alone − `without` (the chain without it).
fn nf_cost(nf: &NfSpec, without: f64, run: &mut dyn FnMut(&[NfSpec]) -> Result<f64, String>) -> Result<f64, String> {
    if nf.stateless() {
        Ok(one_and_per_copy(nf, run)?.1)
    } else {
        Ok(run(&copies_of(nf, 1))? - without)
    }
}

fn traffic(size: u16, flows: u32, destinations: Destinations) -> GeneratorConfig {
    GeneratorConfig {
        sizes: FrameSizes::Fixed { size },
        flows,
        destinations,
        probe_pps: 0.0,
        ..Default::default()
    }
}

/// Short runs of the host-speed probe, of which the least is taken.
const SPEED_PROBE_RUNS: usize = 3;
const SPEED_PROBE_WINDOW: Duration = Duration::from_millis(100);
const SPEED_PROBE_WARMUP: Duration = Duration::from_millis(20);

/// The host's speed as the compound runs' core sees it: TSC cycles per frame of the
/// compound noop×1 at `size` (generator, loop and sink, of which every compound term is
/// a difference), the least of [`SPEED_PROBE_RUNS`] runs of 100 ms. An interrupt slows
/// one run; a host that gives the vCPU less of its core, or a slower clock, slows them
/// all, and every term and measurement taken meanwhile with them.
pub fn speed_probe(args: &CalibrateArgs, size: u16, stop: &Stop) -> Result<f64, String> {
    let short = CalibrateArgs {
        duration: SPEED_PROBE_WINDOW,
        warmup: SPEED_PROBE_WARMUP,
        ..args.clone()
    };
    let mut least = f64::INFINITY;
    for _ in 0..SPEED_PROBE_RUNS {
        let cycles = compound_cycles(&short, &[noop_spec()], traffic(size, 1024, Destinations::Spread), stop)?;
        least = least.min(cycles);
    }
    Ok(least)
}

/// Busy cycles per packet of one compound run of `chain`.
fn compound_cycles(args: &CalibrateArgs, chain: &[NfSpec], t: GeneratorConfig, stop: &Stop) -> Result<f64, String> {
    let settings = RunSettings {
        batch: args.batch,
        duration: Some(args.duration),
        warmup: args.warmup,
        core: args.core,
        accounting: false,
        stop: Some(stop.clone()),
        ..Default::default()
    };
    let r = run_compound(t, chain_of(chain), &settings).map_err(|e| e.to_string())?;
    if r.dropped > 0 {
        return Err(format!(
            "a calibration run dropped {} packets ({}): its cost would include them",
            r.dropped,
            r.places
                .iter()
                .flat_map(|p| p.drops.iter().map(move |(k, v)| format!("{}: {k} {v}", p.name)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    r.busy_cycles_per_packet
        .ok_or_else(|| "the run forwarded nothing".to_string())
}

/// Busy cycles per packet of each core of one pipeline run of `chain` (flow control,
/// backpressure, its NFs built fresh for each run), in the order of `cores`.
fn pipeline_cycles(
    args: &CalibrateArgs,
    placement: Placement,
    chain: &[NfSpec],
    traffic: GeneratorConfig,
    cores: &[usize],
    stop: &Stop,
) -> Result<Vec<f64>, String> {
    let settings = PipelineSettings {
        run: RunSettings {
            batch: args.batch,
            duration: Some(args.duration),
            warmup: args.warmup,
            accounting: false,
            pool_size: 0,
            stop: Some(stop.clone()),
            ..Default::default()
        },
        placement: placement.clone(),
        cores: cores.to_vec(),
        links: LinkMode::Backpressure,
        flow_control: true,
        ..Default::default()
    };
    let mut used: Vec<usize> = cores.to_vec();
    used.dedup();
    // A core the host gave no time in a short window forwarded nothing: that window is
    // not a measurement, and the run is tried again, at most three times in all.
    let mut attempts = 0;
    loop {
        attempts += 1;
        let r = run_pipeline(traffic.clone(), chain_of(chain), &settings)
            .map_err(|e| format!("pipeline {placement}: {e}"))?;
        let cycles: Result<Vec<f64>, String> = used
            .iter()
            .map(|c| {
                r.cores
                    .iter()
                    .find(|k| k.core == *c)
                    .and_then(|k| k.cycles_per_packet)
                    .ok_or_else(|| format!("pipeline {placement}: core {c} reported no packets in {attempts} runs"))
            })
            .collect();
        if cycles.is_ok() || attempts == 3 || stop.requested() {
            return cycles;
        }
    }
}

/// Every term's estimate in one repetition at one size.
struct Round {
    noop: f64,
    base: f64,
    nfs: Vec<f64>,
    /// Each NF of `nfs` in a pipeline's stage (empty without pipeline terms).
    nfs_in_stage: Vec<f64>,
    /// Each NF of `nfs` first in a stage fed from another core (empty without pipeline
    /// terms).
    nfs_across: Vec<f64>,
    pipeline: Option<[f64; 4]>,
    /// Per technology of `wired`, in its order.
    wired: Vec<WiredRound>,
}

/// One repetition of a technology in namespaces at one size.
struct WiredRound {
    /// DUT-core cycles per frame at each of [`WIRED_LENGTHS`] hops.
    cycles: [f64; WIRED_LENGTHS.len()],
    /// What the tester offered at the first length, packets per second.
    tester_pps: f64,
    /// `C_SWdrops` at the first and last lengths (0 where the excess is dropped at the
    /// entry).
    software_drops: [f64; 2],
}

impl WiredRound {
    /// This repetition's points (hops, cycles per frame).
    fn points(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        WIRED_LENGTHS.iter().zip(&self.cycles).map(|(&n, &c)| (n as f64, c))
    }

    /// This repetition's line through its lengths: the cost per hop (slope) and the
    /// fixed cost (the line at no hop).
    fn fit(&self) -> LineFit {
        LineFit::of(&self.points().collect::<Vec<_>>()).expect("distinct lengths, finite cycles")
    }
}

/// The chain lengths a technology in namespaces is calibrated at: the cost per hop is
/// the slope of the line through them (three, so its interval can be told: two lengths
/// a hop apart measured Linux's at -926 cycles, inside their spread), the fixed cost the
/// line at no hop. Software drops are priced at the first and last.
pub const WIRED_LENGTHS: [usize; 3] = [1, 2, 3];

/// What a chain of `n` forwarders chained by `technology` forwards at most, sfclab's
/// tester on one core and the chain on the other.
pub(crate) struct ChainCapacity {
    pub mpps: f64,
    /// The DUT core's cycles per delivered frame there: its clock over the throughput
    /// (at its maximum the core is saturated: offered more, it delivers no more).
    pub cycles_per_frame: f64,
    /// The most the tester offers (its rate with `max`), packets per second.
    pub tester_pps: f64,
    /// The offered rate it delivered most at, packets per second.
    pub offered_pps: f64,
    /// What it delivered offered all the tester sends, Mpps (`mpps` where overload is
    /// flat: the same run).
    pub saturated_mpps: f64,
}

impl ChainCapacity {
    /// Seed 002's `C_SWdrops`: the DUT core's cycles per frame delivered, offered all
    /// the tester sends, beyond those at its maximum (spent on frames dropped inside
    /// the chain); zero where the saturated run delivered as much or more (noise).
    pub fn software_drops_cycles(&self) -> f64 {
        (sfclab_core::tsc::hz() / (self.saturated_mpps * 1e6) - self.cycles_per_frame).max(0.0)
    }
}

/// Where the throughput falls past the maximum, the climb's step, as a share of what
/// the chain delivered saturated.
const CLIMB_STEP: f64 = 0.06;
/// The climb ends after this many rates in a row delivered no more than the best so
/// far: past the maximum (one alone may be the host's noise, ~5 % between runs here).
const CLIMB_MISSES: usize = 2;
/// Runs a climb takes at most (its two half steps included).
const CLIMB_MAX_RUNS: usize = 12;
/// The tester sent a rate when it put at least this share of it on the wire.
const SOURCE_REACHED: f64 = 0.95;

/// Measures `n` forwarders chained by `technology` for `window` (duration, warmup) at
/// their maximum throughput. Offered more than it forwards, a chain whose excess is
/// dropped at its entry delivers its maximum (one run at the tester's rate); one that
/// drops inside, after hops worked on the frame (Linux, seed 002), delivers less the
/// more it is offered, so its maximum is found by climbing the offered rate from what
/// it delivered saturated, in steps of 6 % of that, until two rates in a row deliver no
/// more than the best (or the tester cannot send the rate), then trying half a step
/// either side of the best. The best of several runs leans high by about the runs'
/// noise; the calibration's lengths and the checked ones lean alike.
///
/// Every frame crosses between the tester's core and the chain's twice, so each run is
/// taken at one distance between the two when `core_distance` is given: on the machine of these
/// figures one Linux hop forwards 0.89–0.97 Mpps while a cache line's round trip
/// between them is ~300 cycles and 0.75–0.77 while it is ~1,400, three hops 0.38–0.41
/// and 0.30–0.32; one length priced in one state and the other in the other made 5 hops
/// miss by 20 %.
pub(crate) fn chain_capacity(
    technology: &str,
    n: usize,
    size: u16,
    window: (Duration, Duration),
    cores: &[usize],
    core_distance: Option<&CoreDistance>,
    stop: &Stop,
) -> Result<ChainCapacity, String> {
    let [tester, dut, ..] = cores else {
        return Err("chains in namespaces need two cores: the tester's and the chain's".into());
    };
    let run = |rate: Rate| {
        let once = || {
            crate::chaining::round(technology, n, size, rate, window, (*tester, *dut), stop)
                .map_err(|e| format!("{technology} n={n}: {e}"))
        };
        crate::cores::run_guarded(core_distance, *tester, *dut, once)
    };
    let saturated = run(Rate::Max)?;
    if saturated.mpps <= 0.0 {
        return Err(format!("{technology} n={n}: no frame came back: no cost per frame"));
    }
    let tester_mpps = saturated.offered_mpps;
    let (mpps, offered_mpps) = if sfclab_model::hops_overload(technology).falls() {
        climb_to_maximum(
            (saturated.mpps, tester_mpps),
            &mut |mpps| run(Rate::Pps(mpps * 1e6)).map(|r| (r.mpps, r.offered_mpps)),
            &|| stop.requested(),
        )?
    } else {
        (saturated.mpps, tester_mpps)
    };
    Ok(ChainCapacity {
        mpps,
        cycles_per_frame: sfclab_core::tsc::hz() / (mpps * 1e6),
        tester_pps: tester_mpps * 1e6,
        offered_pps: offered_mpps * 1e6,
        saturated_mpps: saturated.mpps,
    })
}

/// The climb of [`chain_capacity`]: from `saturated` (delivered, offered), Mpps, with
/// `run` offering a rate (Mpps) and returning (delivered, put on the wire), to the best
/// (delivered, offered rate). At most [`CLIMB_MAX_RUNS`] runs; `stop` ends it early
/// (Ctrl-C) with the best so far.
fn climb_to_maximum(
    saturated: (f64, f64),
    run: &mut dyn FnMut(f64) -> Result<(f64, f64), String>,
    stop: &dyn Fn() -> bool,
) -> Result<(f64, f64), String> {
    let step = CLIMB_STEP * saturated.0;
    let mut best = saturated;
    // A rate the tester could not send is past what a climb can show.
    let mut try_rate = |rate: f64| -> Result<Option<f64>, String> {
        let (delivered, sent) = run(rate)?;
        Ok((sent >= SOURCE_REACHED * rate).then_some(delivered))
    };
    let (mut rate, mut misses, mut tried) = (saturated.0 + step, 0, 0);
    while misses < CLIMB_MISSES && tried < CLIMB_MAX_RUNS - 2 && !stop() {
        tried += 1;
        let Some(delivered) = try_rate(rate)? else { break };
        if delivered > best.0 {
            (best, misses) = ((delivered, rate), 0);
        } else {
            misses += 1;
        }
        rate += step;
    }
    let around = best.1;
    for rate in [around - step / 2.0, around + step / 2.0] {
        if rate > saturated.0
            && !stop()
            && let Some(delivered) = try_rate(rate)?
            && delivered > best.0
        {
            best = (delivered, rate);
        }
    }
    Ok(best)
}

fn round(
    args: &CalibrateArgs,
    size: u16,
    cores: &[usize],
    progress: &mut Progress,
    stop: &Stop,
    notes: &mut Vec<String>,
) -> Result<Round, String> {
    let wired = wired_round(args, size, cores, progress, stop)?;
    let plain = || traffic(size, 1024, Destinations::Spread);
    progress.next(&format!("{size} B: noop×1, noop×5"));
    let (one, noop) = one_and_per_copy(&noop_spec(), &mut |c| compound_cycles(args, c, plain(), stop))?;
    let base = one - noop;
    let mut nfs = Vec::with_capacity(args.nfs.len());
    for w in &args.nfs {
        progress.next(&format!("{size} B: {}", w.label()));
        // The noop as an NF is the slope just measured: the same runs again.
        nfs.push(if is_noop(&w.nf) {
            noop
        } else if !w.before.is_empty() {
            let with = [&w.before[..], std::slice::from_ref(&w.nf)].concat();
            compound_cycles(args, &with, w.traffic(size), stop)?
                - compound_cycles(args, &w.before, w.traffic(size), stop)?
        } else {
            nf_cost(&w.nf, base, &mut |c| compound_cycles(args, c, w.traffic(size), stop))?
        });
    }
    let mut nfs_in_stage = Vec::new();
    let mut nfs_across = Vec::new();
    let pipeline = match cores {
        [a, b, ..] if args.pipeline => {
            // One stage on one core (generator, ingress queue, stage, sink): its own cost
            // from noop×1 and noop×5 as in the compound loop, each NF's from the NF alone.
            progress.next(&format!("{size} B: one stage: noop×1, noop×5"));
            let s_core = |chain: &[NfSpec], t: GeneratorConfig| {
                Ok::<f64, String>(pipeline_cycles(args, Placement::SCore, chain, t, &[*a], stop)?[0])
            };
            // Two stages, the first `split` NFs on core a, the rest on core b.
            // Its NFs are built afresh for every run: a run repeated (the cores were far,
            // or the host gave one no time) starts as the first did.
            let bi2 = |split: usize, chain: &[NfSpec], t: GeneratorConfig| {
                let once = || {
                    let on: Vec<usize> = (0..chain.len()).map(|i| if i < split { *a } else { *b }).collect();
                    pipeline_cycles(args, Placement::Cores(on), chain, t.clone(), &[*a, *b], stop)
                };
                crate::cores::run_guarded(args.core_distance.as_deref(), *a, *b, once)
            };
            let (one, stage_noop) = one_and_per_copy(&noop_spec(), &mut |c| s_core(c, plain()))?;
            let single = one - stage_noop;
            for w in &args.nfs {
                progress.next(&format!("{size} B: {} in a stage", w.label()));
                nfs_in_stage.push(if is_noop(&w.nf) {
                    stage_noop
                } else if !w.before.is_empty() {
                    f64::NAN
                } else {
                    nf_cost(&w.nf, single, &mut |c| s_core(c, w.traffic(size)))?
                });
            }
            // Each end of two stages where it is the bottleneck (what a prediction
            // needs), the other end somewhat lighter, as in the chains a pipeline is cut
            // into: a core's busy cycles per frame depend on the other's pace (a producer
            // held by a full ring pushes a few frames per poll and counts each poll busy;
            // a consumer much faster than its producer polls a nearly empty ring). S =
            // noop, work(100); L = noop, work(60): the noop touches no frame, so what the
            // first NF of a stage fed from the other core pays for the frame's lines is
            // measured as that NF's own (`across`). First stage = core 0 of bi:2 [S | L]
            // − S in a stage; last stage = core 1 of bi:2 [L | S] − S in a stage.
            progress.next(&format!("{size} B: pipeline ends: bi:2 [S | L], [L | S]"));
            let ends = || {
                let stage_s = s_core(&[noop_spec(), work(100)], plain())? - single;
                let first = bi2(2, &[noop_spec(), work(100), noop_spec(), work(60)], plain())?[0] - stage_s;
                let to_s = bi2(2, &[noop_spec(), work(60), noop_spec(), work(100)], plain())?[1];
                Ok((stage_s, first, to_s))
            };
            // The stage terms a prediction prices from these runs are differences of
            // them: one run taken while the host stalled prices a ring below zero.
            let priced_below_zero = |&(stage_s, first, to_s): &(f64, f64, f64)| {
                let ends = StageEnds {
                    single,
                    first,
                    last: to_s - stage_s,
                };
                ends.term_below_zero()
                    .map(|(what, cycles)| format!("{what} came to {cycles:.0} cycles/packet"))
            };
            let what = format!("pipeline ends at {size} B");
            let (stage_s, first, to_s) = until_priced(PRICING_ATTEMPTS, &what, stop, notes, ends, priced_below_zero)?;
            // Each NF X first in the second stage: bi:2 [L | X, work], core 1 against [L | S].
            progress.next(&format!("{size} B: bi:2, each NF first in the second stage"));
            for w in &args.nfs {
                if !w.before.is_empty() {
                    nfs_across.push(f64::NAN);
                    continue;
                }
                let with_x = bi2(2, &[noop_spec(), work(60), w.nf.clone(), work(100)], w.traffic(size))?[1];
                nfs_across.push(with_x - to_s + stage_noop);
            }
            let s2 = [noop_spec(), work(100), noop_spec(), work(100)];
            // A ring between stages on one core: (pbp:1 [S S] − s_core [S S]) / 3.
            let one_stage = s_core(&s2, plain())?;
            let four_stages = pipeline_cycles(args, Placement::Pbp(1), &s2, plain(), &[*a], stop)?[0];
            Some([single, first, to_s - stage_s, (four_stages - one_stage) / 3.0])
        }
        _ => None,
    };
    Ok(Round {
        noop,
        base,
        nfs,
        nfs_in_stage,
        nfs_across,
        pipeline,
        wired,
    })
}

/// Each chaining in namespaces at every length, at `size`; then a pause until the
/// kernel has torn them down, so its clean-up does not share a core with the in-memory
/// runs that follow.
fn wired_round(
    args: &CalibrateArgs,
    size: u16,
    cores: &[usize],
    progress: &mut Progress,
    stop: &Stop,
) -> Result<Vec<WiredRound>, String> {
    let mut wired = Vec::with_capacity(args.wired.len());
    for t in &args.wired {
        progress.next(&format!(
            "{size} B: {t} chains of {} forwarders in namespaces",
            lengths_in_words()
        ));
        let window = (args.duration, args.warmup);
        let guard = args.core_distance.as_deref();
        let capacities = WIRED_LENGTHS
            .iter()
            .map(|&n| chain_capacity(t, n, size, window, cores, guard, stop))
            .collect::<Result<Vec<_>, _>>()?;
        let (first, last) = (&capacities[0], &capacities[capacities.len() - 1]);
        wired.push(WiredRound {
            cycles: std::array::from_fn(|k| capacities[k].cycles_per_frame),
            tester_pps: first.tester_pps,
            software_drops: [first.software_drops_cycles(), last.software_drops_cycles()],
        });
    }
    if !args.wired.is_empty() {
        crate::wait_for_idle_cores(Duration::from_secs(10));
    }
    Ok(wired)
}

/// The cores runs use: `first` (default: the chain's default core), then the others
/// this process may use.
pub fn cores_from(first: Option<usize>) -> Vec<usize> {
    let allowed = sfclab_runtime::placement::allowed_cores();
    let first = first
        .or_else(sfclab_runtime::placement::default_chain_core)
        .or(allowed.first().copied());
    let mut c: Vec<usize> = first.into_iter().collect();
    c.extend(allowed.into_iter().filter(|k| Some(*k) != first));
    c
}

/// A term's curve over `sizes`: at each, the median of the repetitions' `f` (not
/// clamped) and `interval(i)` at the `i`th size.
fn measured_curve(
    sizes: &[u16],
    rounds: &[Vec<Round>],
    f: &dyn Fn(&Round) -> f64,
    interval: &dyn Fn(usize) -> Option<[f64; 2]>,
) -> Curve {
    Curve::new(
        sizes
            .iter()
            .zip(rounds)
            .enumerate()
            .map(|(i, (&size, rs))| {
                let runs: Vec<f64> = rs.iter().map(f).collect();
                CurvePoint {
                    size,
                    cycles: median(&runs),
                    runs,
                    interval: interval(i),
                }
            })
            .collect(),
    )
}

/// "1, 2 and 3"
fn lengths_in_words() -> String {
    let (last, rest) = WIRED_LENGTHS.split_last().expect("lengths");
    let rest: Vec<String> = rest.iter().map(usize::to_string).collect();
    format!("{} and {last}", rest.join(", "))
}

/// Progress steps of one repetition (every size).
pub fn steps_per_repetition(args: &CalibrateArgs) -> usize {
    let mut sizes = args.sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    let pipeline = usize::from(args.pipeline && cores_from(args.core).len() >= 2);
    sizes.len() * (1 + args.nfs.len() + pipeline * (3 + args.nfs.len()) + args.wired.len())
        + args.memif.as_ref().map_or(0, |m| m.runs(sizes.len()))
}

/// What a calibration's runs on two cores were taken at, in words.
fn core_distance_note(guard: &CoreDistance) -> String {
    use crate::cores::Keep;
    let taken = match guard.keep() {
        Keep::Near(limit) => format!(
            "while the round trip of a cache line between them was at most {limit:.0} TSC cycles right before and right after each"
        ),
        Keep::OneState => format!(
            "in one state of the round trip of a cache line between them (sampled right before and right after each; one state: within 2.5x of the first run's), {}",
            match guard.episode().round_trip_cycles {
                Some(c) => format!("{c:.0} cycles (median)"),
                None => "none sampled".to_string(),
            }
        ),
    };
    format!(
        "runs on two cores (pipelines, chains in namespaces) taken {taken} (a hypervisor moves vCPUs: rings between far cores cost several times more); {} repeated, {} kept in another state after 10 tries",
        guard.repeated(),
        guard.kept_apart()
    )
}

/// Measures the calibration; `progress` is told as each step starts.
pub fn calibrate(args: &CalibrateArgs, progress: &mut Progress, stop: &Stop) -> Result<Calibration, String> {
    if args.sizes.is_empty() {
        return Err("no frame size to calibrate".into());
    }
    let mut sizes = args.sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    let cores = cores_from(args.core);
    check_technologies(args)?;
    progress.plan(args.repeat * steps_per_repetition(args));
    let mut rounds: Vec<Vec<Round>> = (0..sizes.len()).map(|_| Vec::new()).collect();
    let mut interrupted = false;
    let mut measured_again = Vec::new();
    for _ in repetitions(args.repeat, stop, &mut interrupted) {
        for (i, &size) in sizes.iter().enumerate() {
            rounds[i].push(round(args, size, &cores, progress, stop, &mut measured_again)?);
        }
    }
    if rounds[0].is_empty() {
        return Err("interrupted before the first repetition finished: no calibration".into());
    }
    let curves = Curves {
        sizes: &sizes,
        rounds: &rounds,
    };
    let has_pipeline = rounds[0][0].pipeline.is_some();
    let mut nfs = nf_calibrations(args, &curves, has_pipeline);
    let pipeline = has_pipeline.then(|| PipelineCalibration {
        single_stage: curves.of(&|r| r.pipeline.map_or(f64::NAN, |p| p[0])),
        first_stage: curves.of(&|r| r.pipeline.map_or(f64::NAN, |p| p[1])),
        last_stage: curves.of(&|r| r.pipeline.map_or(f64::NAN, |p| p[2])),
        same_core_link: curves.of(&|r| r.pipeline.map_or(f64::NAN, |p| p[3])),
    });
    let noop = curves.of(&|r| r.noop);
    let mut notes = vec![
        "noop = (compound noop×5 − noop×1) / 4; base = noop×1 − noop; NF = compound [NF] − base, a stateless NF (no table) = (compound [NF×5] − [NF]) / 4".to_string(),
        "pipeline (flow control, backpressure; one stage = s_core on one core: generator, ingress queue, stage, sink): single = s_core [noop] − stage noop, stage noop = (s_core [noop×5] − s_core [noop]) / 4; NF in_stage = s_core [NF] − single, a stateless NF = (s_core [NF×5] − s_core [NF]) / 4; S = noop -> synthetic(cycles=100), L = noop -> synthetic(cycles=60), S in a stage = s_core [S] − single; first = core 0 of bi:2 [S | L] − S in a stage; last = core 1 of bi:2 [L | S] − S in a stage; NF across (first in a stage fed from another core) = core 1 of bi:2 [L | NF, synthetic(cycles=100)] − core 1 of bi:2 [L | S] + stage noop; same_core_link = (pbp:1 [S S] − s_core [S S]) / 3".to_string(),
        format!(
            "noop (the call to an NF) measured {} cycles at {} B",
            noop.points.first().map_or(0.0, |p| p.cycles).round(),
            sizes[0]
        ),
    ];
    notes.extend(measured_again);
    if interrupted {
        notes.push("interrupted (Ctrl-C): the repetitions finished are kept".into());
    }
    // Compound predictions do not need the pipeline's terms: the calibration is kept,
    // saying which term `model predict` will refuse.
    if let Some(p) = &pipeline {
        for &size in &sizes {
            if let Some((what, cycles)) = p.ends(f64::from(size))?.term_below_zero() {
                notes.push(format!(
                    "the pipeline's {what} comes to {cycles:.0} cycles/packet at {size} B (the median of {} repetitions, each measured up to {PRICING_ATTEMPTS} times while below zero): a failed measurement, which pipeline predictions refuse; calibrate again, with a longer --duration or more --repeat",
                    rounds[0].len()
                ));
            }
        }
    }
    if pipeline.is_none() {
        notes.push(if args.pipeline {
            "one core: no pipeline terms (a ring across cores needs two)".into()
        } else {
            "no pipeline terms: not asked for (the chains priced run on one core)".into()
        });
    }
    if let Some(guard) = &args.core_distance
        && (pipeline.is_some() || !args.wired.is_empty())
    {
        notes.push(core_distance_note(guard));
    }
    let wired = wired_calibrations(args, &curves);
    notes.extend(wired_notes(args, &wired));
    let memif = match &args.memif {
        Some(m) => {
            let (memif, in_vnf, memif_notes) = memif_calibration(m, args, &sizes, &nfs, progress, stop)?;
            notes.extend(memif_notes);
            for (key, curve) in in_vnf {
                if let Some(nf) = nfs.iter_mut().find(|n| n.key == key) {
                    nf.in_vnf = Some(curve);
                }
            }
            Some(memif)
        }
        None => None,
    };
    if memif.is_some() {
        notes.push(crate::memif_terms::NOTE.to_string());
    }
    let machine = crate::Machine::read();
    let cal = Calibration {
        schema: CALIBRATION_SCHEMA.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        machine: CalibratedMachine {
            cpu: machine.cpu,
            cores: machine.cores,
            tsc_hz: machine.tsc_hz,
            kernel: machine.kernel,
        },
        date: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        method: Method {
            duration_s: args.duration.as_secs_f64(),
            repeat: rounds[0].len(),
            batch: args.batch,
            flows: 1024,
            notes,
        },
        sizes: sizes.clone(),
        compound_base: curves.of(&|r| r.base),
        nfs,
        pipeline,
        wired,
        memif,
    };
    cal.check()?;
    Ok(cal)
}

/// The memif terms and the notes on repetitions measured again or left out.
type MemifTerms = (
    sfclab_model::calibration::MemifCalibration,
    Vec<(String, Curve)>,
    Vec<String>,
);

/// The memif terms, their repetitions interleaved over sizes; the VNFs' synthetic work
/// priced from its compound calibration in `nfs`.
fn memif_calibration(
    m: &crate::memif_terms::MemifTermsArgs,
    args: &CalibrateArgs,
    sizes: &[u16],
    nfs: &[NfCalibration],
    progress: &mut Progress,
    stop: &Stop,
) -> Result<MemifTerms, String> {
    let work = memif_workload();
    let key = nf_key(work.nf.kind(), &work.nf.cost_settings());
    let work = nfs
        .iter()
        .find(|n| n.key == key)
        .ok_or_else(|| format!("the memif terms need `{key}` calibrated"))?;
    let hz = crate::Machine::read().tsc_hz;
    // Per repetition, per size: the round, or None where it failed twice.
    let mut repetitions_done: Vec<Vec<Option<crate::memif_terms::MemifRound>>> = Vec::new();
    let mut notes = Vec::new();
    let (mut interrupted, mut stopped) = (false, false);
    // The scenarios' tester runs on the first allowed core, the VNFs on the others.
    let cores = cores_from(None);
    let guard = (
        args.core_distance.as_deref(),
        [cores[0], *cores.get(1).unwrap_or(&cores[0])],
    );
    'repetitions: for _ in repetitions(args.repeat, stop, &mut interrupted) {
        let mut repetition = Vec::with_capacity(sizes.len());
        for (i, &size) in sizes.iter().enumerate() {
            let cost = work.cycles.at(f64::from(size))?;
            let what = format!("memif terms at {size} B");
            match once_more(&what, stop, &mut notes, || {
                crate::memif_terms::round(m, size, cost, hz, i == 0, guard, progress, stop)
            }) {
                Ok(round) => repetition.push(round),
                // Ctrl-C: the repetitions finished are kept, this one is not.
                Err(_) => {
                    stopped = true;
                    break 'repetitions;
                }
            }
        }
        repetitions_done.push(repetition);
    }
    if interrupted || stopped {
        notes.push("memif terms interrupted (Ctrl-C): the repetitions finished are kept".into());
    }
    if repetitions_done.is_empty() {
        return Err("interrupted before the memif terms' first repetition finished: no calibration".into());
    }
    let rounds = per_size(repetitions_done, sizes).map_err(|i| {
        format!(
            "the memif terms at {} B failed in every repetition: {}",
            sizes[i],
            notes.join("; ")
        )
    })?;
    Ok((
        crate::memif_terms::terms(m, sizes, &rounds),
        crate::memif_terms::in_vnf_terms(m, sizes, &rounds),
        notes,
    ))
}

/// How many times in all a group of runs is measured while a term priced from it
/// comes to less than zero.
const PRICING_ATTEMPTS: usize = 3;

/// `measure`, taken again while `below_zero` finds a term priced from it below zero,
/// `attempts` times in all: the last one is kept either way (the median over
/// repetitions may still outvote it; the calibration is checked whole at the end).
/// `notes` says what was measured again, and why.
fn until_priced<T>(
    attempts: usize,
    what: &str,
    stop: &Stop,
    notes: &mut Vec<String>,
    mut measure: impl FnMut() -> Result<T, String>,
    below_zero: impl Fn(&T) -> Option<String>,
) -> Result<T, String> {
    let mut why = Vec::new();
    loop {
        let value = measure()?;
        let Some(failed) = below_zero(&value) else {
            if !why.is_empty() {
                notes.push(format!("{what}: measured again ({})", why.join("; ")));
            }
            return Ok(value);
        };
        why.push(format!("attempt {}: {failed}", why.len() + 1));
        if why.len() == attempts || stop.requested() {
            notes.push(format!(
                "{what}: kept below zero after {} attempts ({})",
                why.len(),
                why.join("; ")
            ));
            return Ok(value);
        }
    }
}

/// One measurement, measured once more if it fails: a check of who was the limit can
/// fail on a moment of the host's (a vCPU stalled, a neighbour's burst), and one failed
/// term should not lose minutes of others. `None` where it failed twice; an error only
/// where Ctrl-C stopped it. `notes` says which was measured again or left out.
fn once_more<T>(
    what: &str,
    stop: &Stop,
    notes: &mut Vec<String>,
    mut attempt: impl FnMut() -> Result<T, String>,
) -> Result<Option<T>, String> {
    let why = match attempt() {
        Ok(r) => return Ok(Some(r)),
        Err(why) if stop.requested() => return Err(why),
        Err(why) => why,
    };
    match attempt() {
        Ok(r) => {
            notes.push(format!("{what}: a repetition failed and was measured again ({why})"));
            Ok(Some(r))
        }
        Err(again) if stop.requested() => Err(again),
        Err(again) => {
            notes.push(format!(
                "{what}: a repetition left out, it failed twice ({why}; again: {again})"
            ));
            Ok(None)
        }
    }
}

/// Repetitions of rounds per size (`None` where one was left out) as each size's rounds,
/// over the repetitions every size finished (Ctrl-C leaves the last one short). The
/// index of a size no repetition measured is the error.
fn per_size<T>(mut repetitions: Vec<Vec<Option<T>>>, sizes: &[u16]) -> Result<Vec<Vec<T>>, usize> {
    repetitions.retain(|r| r.len() == sizes.len());
    let rounds: Vec<Vec<T>> = (0..sizes.len())
        .map(|i| repetitions.iter_mut().filter_map(|r| r[i].take()).collect())
        .collect();
    match rounds.iter().position(Vec::is_empty) {
        Some(i) => Err(i),
        None => Ok(rounds),
    }
}

/// The chainings in namespaces to calibrate can run here: as root, known, installed.
fn check_technologies(args: &CalibrateArgs) -> Result<(), String> {
    if args.wired.is_empty() {
        return Ok(());
    }
    if !sfclab_topology::running_as_root() {
        return Err(format!(
            "--technologies {}: chains in namespaces need root (namespaces, veth, XDP)",
            args.wired.join(",")
        ));
    }
    if let Some(bad) = args
        .wired
        .iter()
        .find(|t| *t == "compound" || !crate::chaining::TECHNOLOGIES.contains(&t.as_str()))
    {
        return Err(format!(
            "--technologies {bad}: not a chaining in namespaces (veth, nic-switch, linux, ovs)"
        ));
    }
    if args.wired.iter().any(|t| t == "ovs")
        && let Some(why) = crate::chaining::ovs_missing()
    {
        return Err(format!("--technologies ovs: {why}"));
    }
    Ok(())
}

/// Every repetition's rounds at every size, made into curves over the sizes.
struct Curves<'a> {
    sizes: &'a [u16],
    rounds: &'a [Vec<Round>],
}

impl Curves<'_> {
    /// The curve of `f`, at least zero: `f` is a difference of measurements (an NF's
    /// cost less the base), and a cost below zero is the noise of a term too small to
    /// see (the forwarder's).
    fn of(&self, f: &dyn Fn(&Round) -> f64) -> Curve {
        let mut c = measured_curve(self.sizes, self.rounds, f, &|_| None);
        c.points.iter_mut().for_each(|p| p.cycles = p.cycles.max(0.0));
        c
    }
}

/// Each NF's costs, once per calibration key.
fn nf_calibrations(args: &CalibrateArgs, curves: &Curves, has_pipeline: bool) -> Vec<NfCalibration> {
    let mut nfs: Vec<NfCalibration> = Vec::new();
    for (k, w) in args.nfs.iter().enumerate() {
        let key = w.key();
        if nfs.iter().any(|n| n.key == key) {
            continue;
        }
        nfs.push(NfCalibration {
            key,
            kind: w.nf.kind().to_string(),
            cycles: curves.of(&|r| r.nfs[k]),
            in_stage: (has_pipeline && w.before.is_empty()).then(|| curves.of(&|r| r.nfs_in_stage[k])),
            across: (has_pipeline && w.before.is_empty()).then(|| curves.of(&|r| r.nfs_across[k])),
            in_vnf: None,
        });
    }
    nfs
}

/// Each chaining in namespaces: the line through its lengths (fixed and per hop), the
/// tester's rate, and the software drops where the chaining falls.
fn wired_calibrations(args: &CalibrateArgs, curves: &Curves) -> Vec<WiredCalibration> {
    let (short, long) = (WIRED_LENGTHS[0], WIRED_LENGTHS[WIRED_LENGTHS.len() - 1]);
    let rounds = curves.rounds;
    args.wired
        .iter()
        .enumerate()
        .map(|(k, t)| {
            // The per-hop term's interval: the line through every repetition's points.
            let interval = |i: usize| {
                let points: Vec<(f64, f64)> = rounds[i].iter().flat_map(|r| r.wired[k].points()).collect();
                LineFit::of(&points).and_then(|f| f.slope_ci95).map(|(lo, hi)| [lo, hi])
            };
            WiredCalibration {
                technology: t.clone(),
                fixed: curves.of(&|r| r.wired[k].fit().intercept),
                per_hop: measured_curve(curves.sizes, rounds, &|r| r.wired[k].fit().slope, &interval),
                tester_pps: curves.of(&|r| r.wired[k].tester_pps),
                software_drops: sfclab_model::hops_overload(t).falls().then(|| SoftwareDrops {
                    lengths: [short, long],
                    short: curves.of(&|r| r.wired[k].software_drops[0]),
                    long: curves.of(&|r| r.wired[k].software_drops[1]),
                }),
            }
        })
        .collect()
}

/// The method of the chainings in namespaces, and each per-hop term that cannot be told
/// from zero or is below it.
fn wired_notes(args: &CalibrateArgs, wired: &[WiredCalibration]) -> Vec<String> {
    let (short, long) = (WIRED_LENGTHS[0], WIRED_LENGTHS[WIRED_LENGTHS.len() - 1]);
    let mut notes = Vec::new();
    if !args.wired.is_empty() {
        notes.push(format!(
            "chains in namespaces: n = {} forwarders, sfclab's AF_XDP tester on one core, offered more than the chain forwards; DUT-core cycles per delivered frame = TSC / throughput (the DUT core saturated); per_hop = the slope of the line through the lengths (each repetition's; its interval the 95% one of the line through every repetition's points), fixed = that line at no hop (at least 0), per_hop not clamped; tester_pps = what the tester offered at n = {short}; where the chaining drops inside the chain (linux) its maximum is climbed to, and software_drops (C_SWdrops) at n = {short} and {long} = TSC / what it delivered offered all the tester sends − the cycles per frame at its maximum (at least 0)",
            lengths_in_words()
        ));
    }
    for w in wired {
        for p in &w.per_hop.points {
            let Some([lo, hi]) = p.interval else { continue };
            let what = if p.indistinct_from_zero() {
                "cannot be told from zero"
            } else if p.cycles < 0.0 {
                "is below zero: longer chains cost the DUT core no more (another limit, such as the tester, bound every length)"
            } else {
                continue;
            };
            notes.push(format!(
                "wired `{}` per_hop at {} B {what}: {:.0} cycles, 95% interval {lo:.0} to {hi:.0} (predictions price it at no less than 0; calibrate with more --repeat)",
                w.technology, p.size, p.cycles
            ));
        }
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A measurement that fails its first `failures` attempts, then measures `value`.
    fn flaky(failures: usize, value: u32) -> impl FnMut() -> Result<u32, String> {
        let mut tried = 0;
        move || {
            tried += 1;
            if tried <= failures {
                Err(format!("attempt {tried}: the tester was the limit"))
            } else {
                Ok(value)
            }
        }
    }

    #[test]
    fn a_term_that_fails_once_is_measured_again_and_one_that_fails_twice_is_left_out_saying_why() {
        let stop = Stop::new();
        let mut notes = Vec::new();
        assert_eq!(once_more("t", &stop, &mut notes, flaky(0, 7)), Ok(Some(7)));
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(once_more("at 64 B", &stop, &mut notes, flaky(1, 8)), Ok(Some(8)));
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].contains("at 64 B") && notes[0].contains("measured again") && notes[0].contains("attempt 1"),
            "{notes:?}"
        );
        assert_eq!(once_more("at 1518 B", &stop, &mut notes, flaky(2, 9)), Ok(None));
        assert_eq!(notes.len(), 2);
        assert!(
            notes[1].contains("at 1518 B")
                && notes[1].contains("left out")
                && notes[1].contains("attempt 1")
                && notes[1].contains("attempt 2"),
            "{notes:?}"
        );
        // Ctrl-C: no second attempt, the error returned.
        stop.request();
        let mut tries = 0;
        let r = once_more("t", &stop, &mut notes, || {
            tries += 1;
            Err::<u32, _>("stopped".to_string())
        });
        assert_eq!((r, tries), (Err("stopped".to_string()), 1));
    }

    #[test]
    fn runs_priced_below_zero_are_measured_again_and_the_last_is_kept_saying_why() {
        let stop = Stop::new();
        let below_zero = |v: &i32| (*v < 0).then(|| format!("the ring came to {v}"));
        // Each call measures the next of `values`.
        let measure = |values: Vec<i32>| {
            let mut next = values.into_iter();
            move || next.next().ok_or_else(|| "measured once too often".to_string())
        };
        let mut notes = Vec::new();
        assert_eq!(
            until_priced(3, "t", &stop, &mut notes, measure(vec![5]), below_zero),
            Ok(5)
        );
        assert!(notes.is_empty(), "{notes:?}");
        let r = until_priced(
            3,
            "ends at 64 B",
            &stop,
            &mut notes,
            measure(vec![-262, -40, 7]),
            below_zero,
        );
        assert_eq!(r, Ok(7));
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].contains("ends at 64 B: measured again")
                && notes[0].contains("attempt 1: the ring came to -262")
                && notes[0].contains("attempt 2: the ring came to -40"),
            "{notes:?}"
        );
        let r = until_priced(
            3,
            "ends at 1518 B",
            &stop,
            &mut notes,
            measure(vec![-1, -2, -3, 9]),
            below_zero,
        );
        assert_eq!(r, Ok(-3), "three attempts in all, the last kept");
        assert!(
            notes[1].contains("ends at 1518 B: kept below zero after 3 attempts") && notes[1].contains("attempt 3"),
            "{notes:?}"
        );
        // A run that fails is an error, not an attempt.
        let failing = || Err::<i32, _>("pipeline bi:2: core 1 reported no packets".to_string());
        assert!(until_priced(3, "t", &stop, &mut notes, failing, below_zero).is_err());
        // Ctrl-C: no attempt after the one it stopped.
        stop.request();
        let r = until_priced(3, "t", &stop, &mut notes, measure(vec![-1, 4]), below_zero);
        assert_eq!(r, Ok(-1));
    }

    #[test]
    fn each_size_keeps_the_repetitions_that_measured_it_and_a_size_none_measured_is_named() {
        let sizes = [64, 512, 1518];
        let repetitions = vec![
            vec![Some(1), None, Some(3)],
            vec![Some(4), Some(5), Some(6)],
            // Ctrl-C during the third: it is not kept.
            vec![Some(7)],
        ];
        assert_eq!(per_size(repetitions, &sizes), Ok(vec![vec![1, 4], vec![5], vec![3, 6]]));
        let none_at_512 = vec![vec![Some(1), None, Some(3)], vec![Some(4), None, Some(6)]];
        assert_eq!(per_size(none_at_512, &sizes), Err(1));
    }

    /// A chain that forwards up to `capacity` and, offered more, delivers less by
    /// `fall` per unit of excess (drops inside after work), behind a tester that sends
    /// at most `tester`. Counts the runs.
    fn chain(
        capacity: f64,
        fall: f64,
        tester: f64,
        runs: &mut usize,
    ) -> impl FnMut(f64) -> Result<(f64, f64), String> + '_ {
        move |rate| {
            *runs += 1;
            let sent = rate.min(tester);
            let delivered = if sent <= capacity {
                sent
            } else {
                capacity - fall * (sent - capacity)
            };
            Ok((delivered, sent))
        }
    }

    #[test]
    fn the_climb_finds_the_maximum_of_a_falling_chain() {
        let mut runs = 0;
        // Saturated, the tester's 2.0 Mpps make it deliver 0.7 of its 1.0.
        let (mpps, at) = climb_to_maximum((0.7, 2.0), &mut chain(1.0, 0.3, 2.0, &mut runs), &|| false).unwrap();
        assert!((0.97..=1.0).contains(&mpps), "{mpps}");
        assert!((mpps..1.05).contains(&at), "offered {at} for {mpps}");
        assert!(runs <= CLIMB_MAX_RUNS, "{runs} runs");
    }

    #[test]
    fn the_climb_stops_where_the_tester_cannot_send() {
        let mut runs = 0;
        // The tester's 0.8 is below the chain's 1.0: the best is what it sends.
        let (mpps, _) = climb_to_maximum((0.7, 0.8), &mut chain(1.0, 0.3, 0.8, &mut runs), &|| false).unwrap();
        assert!((0.7..=0.8).contains(&mpps), "{mpps}");
        assert!(runs <= 6, "climbed on past the tester: {runs} runs");
    }

    #[test]
    fn the_climb_is_bounded_and_stops_when_asked() {
        let mut runs = 0;
        // Never falls (a chain far faster than its saturated run showed): bounded.
        let (mpps, _) = climb_to_maximum((0.1, 100.0), &mut chain(50.0, 0.0, 100.0, &mut runs), &|| false).unwrap();
        assert_eq!(runs, CLIMB_MAX_RUNS);
        assert!(mpps > 0.1);
        let mut runs = 0;
        let best = climb_to_maximum((0.7, 2.0), &mut chain(1.0, 0.3, 2.0, &mut runs), &|| true).unwrap();
        assert_eq!(
            (runs, best),
            (0, (0.7, 2.0)),
            "stopped: the saturated run is the best so far"
        );
    }

    #[test]
    fn a_failed_run_fails_the_climb() {
        let mut run = |_: f64| Err::<(f64, f64), String>("the chain could not be built".into());
        let e = climb_to_maximum((0.7, 2.0), &mut run, &|| false).unwrap_err();
        assert!(e.contains("could not be built"), "{e}");
    }
}
