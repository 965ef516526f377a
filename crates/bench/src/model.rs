//! `sfclab bench model`: the model checked against the machine. A matrix of chains x
//! placements x frame sizes, none of them a run the calibration measured (other lengths,
//! mixes of NFs, placements, and a frame size between the calibrated ones), each
//! predicted from the calibration and measured in the same run; the error per cell, and
//! the median and worst absolute error per layout.
//!
//! Measured = the capacity the chain sustains without loss-inducing overload: the
//! compound runtime's generator never makes more than the chain takes, and pipelines run
//! with flow control and backpressure links (nothing dropped, no cycle wasted); the
//! median of the repetitions. Not the NDR, which vCPU stalls dominate on these VMs.

use serde::Serialize;
use sfclab_model::{Calibration, ChainModel, ChainPrediction, Layout, nf_key, predict_chain};
use sfclab_runtime::{LinkMode, PipelineSettings, Placement, RunSettings, run_compound, run_pipeline};
use sfclab_traffic::{Destinations, FrameSizes, GeneratorConfig};
use std::time::Duration;

use crate::calibrate::NfWorkload;
use crate::cores::{CoreDistance, Keep};
use crate::{Progress, Rounds, Stop, median};
use std::fmt::Write as _;

pub const MODEL_SCHEMA: &str = "sfclab.bench.model/13";

#[derive(Clone)]
pub struct ModelBenchArgs {
    pub duration: Duration,
    pub warmup: Duration,
    pub repeat: usize,
    pub batch: usize,
    pub sizes: Vec<u16>,
    /// The core of the compound runs and the first of the pipelines'.
    pub core: Option<usize>,
    /// Chainings in namespaces to check too (needs root; the calibration must have them).
    pub technologies: Vec<String>,
    /// Runs on two cores (pipelines, chains in namespaces) taken at one distance between
    /// the cores (`None`: as they come); the same guard as the terms' calibration, so
    /// its counts are the run's. With [`Keep::OneState`] each cell's terms and its
    /// measurement are one episode, taken again when they ended in two states.
    pub core_distance: Option<std::sync::Arc<CoreDistance>>,
}

/// One chain, placed, at one size: predicted and measured.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ModelPoint {
    /// The NFs by kind, `->` between them.
    pub chain: String,
    /// `compound`, or the pipeline's placement (`bi:2`, `pbp:2`, `0,0,1`).
    pub layout: String,
    pub size: u16,
    pub predicted_mpps: f64,
    /// The prediction of each round (the same value in every round with a given
    /// calibration; else each round's, priced by the terms measured right before it).
    pub predicted_runs: Vec<f64>,
    /// The resource the model names as the bottleneck.
    pub bottleneck: String,
    /// The bottleneck's predicted cycles per packet.
    pub predicted_cycles: f64,
    pub measured_mpps: f64,
    pub measured_runs: Vec<f64>,
    /// Chains in namespaces: the rate offered in each round's measurement where the chain
    /// delivered most, Mpps. Where overload is flat that is all the tester sends; where
    /// the throughput falls past the maximum (Linux drops inside the chain, after hops
    /// worked on the frame) it is found by climbing the offered rate. Empty in memory.
    pub measured_offered_mpps: Vec<f64>,
    /// Chains whose throughput falls past the maximum (Linux): each round's prediction
    /// of what the chain delivers offered all the tester sends (seed 002's `C_SWdrops`
    /// priced) and what it delivered then, Mpps. Empty elsewhere.
    pub predicted_saturated_runs: Vec<f64>,
    pub measured_saturated_runs: Vec<f64>,
    /// Their error, (predicted − measured) / measured, percent: the median over rounds.
    pub saturated_error_pct: Option<f64>,
    /// How far the measurement itself moved from round to round: the median absolute
    /// deviation of `measured_runs` from their median, percent of it. The host's share
    /// of memory and caches changes by the second, and no prediction can be expected to
    /// land closer than the measurement repeats.
    pub measured_spread_pct: f64,
    /// The busiest core's measured busy cycles per packet (median).
    pub measured_cycles: f64,
    /// (predicted − measured) / measured, percent: the median over rounds of each round's
    /// prediction against that round's measurement (with one calibration for every round,
    /// and an odd number of rounds, the same as from the two medians).
    pub error_pct: f64,
    /// Each round's (predicted − measured) / measured, percent.
    pub round_errors_pct: Vec<f64>,
    /// Pipelines: the round trip of a cache line between the first two cores, TSC
    /// cycles, sampled right before the cell's terms and right after its measurement in
    /// each round, in that order (empty on one core). A hypervisor moves vCPUs: where
    /// these differ the cores were another distance apart for the terms than for the
    /// measurement, and every ring between them cost something else.
    pub core_round_trip_cycles: Vec<f64>,
    /// Cells on two cores (pipelines, chains in namespaces) with the core-distance
    /// guard: per round that ran on two cores, the median round trip sampled around the
    /// runs of its terms and measurement (what they were taken at), TSC cycles.
    pub core_state_cycles: Vec<f64>,
    /// Rounds whose terms and measurement were taken again because they ended in two
    /// states of the cores' distance (one-state guard) or, on one core, at two speeds
    /// of the host (at most 2 more times a round).
    pub rounds_taken_again: usize,
    /// Rounds kept with their runs in two states after the last try.
    pub rounds_in_two_states: usize,
    /// Compound cells whose terms are measured right before them: the host's speed as
    /// their core saw it right before the terms and right after the measurement, per
    /// round kept, in that order (TSC cycles per frame of the compound noop alone, the
    /// least of three 100 ms runs). This host gives a vCPU more or less of its core for
    /// seconds at a time; where the two differ by more than 10 % the terms priced
    /// another machine than the one measured, and the round is taken again.
    pub host_speed_probe_cycles: Vec<f64>,
    /// Rounds kept with the host at two speeds after the last try.
    pub rounds_at_two_speeds: usize,
    /// Each NF's predicted cycles against what it spent in this chain (a run with
    /// per-NF accounting, first repetition), so a miss is traced to its term.
    pub terms: Vec<TermCheck>,
    /// The term furthest from its prediction, in words, when the cell misses by more
    /// than 10 %.
    pub largest_miss: Option<String>,
    /// Each core of the prediction (the round whose prediction is the median) with its
    /// terms, against the core's measured busy cycles per packet (median over rounds).
    /// Only the bottleneck's is comparable: a core that waits for its neighbour counts
    /// the wait as busy too (backpressure).
    pub cores: Vec<CoreCheck>,
}

/// One core: what the model prices on it, and what it measured.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct CoreCheck {
    pub core: String,
    pub predicted_cycles: f64,
    pub terms: Vec<sfclab_model::Term>,
    /// Busy cycles per packet measured on this core (none for chains in namespaces).
    pub measured_cycles: Option<f64>,
}

/// One NF's cost: calibrated alone, and spent inside the measured chain.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TermCheck {
    pub nf: String,
    pub predicted_cycles: f64,
    pub measured_cycles: f64,
}

/// The error of one layout kind (compound or pipeline) over its cells.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ModelError {
    pub layout: String,
    pub cells: usize,
    pub median_abs_error_pct: f64,
    pub worst_abs_error_pct: f64,
    /// Where the worst miss is, and in which direction.
    pub worst: String,
    /// The median over cells of `measured_spread_pct`: how well the measurement repeats,
    /// beside how well the model predicts it.
    pub median_measured_spread_pct: f64,
    /// Whether the goal is judged on this row: on every layout's maximum throughput,
    /// not on what falling chains deliver offered all the tester sends (checked beside
    /// it: `C_SWdrops` is a few percent of a frame's cost at the calibrated 1 and 3 hops,
    /// within the runs' noise, and grows faster than linearly with n).
    pub counts_for_goal: bool,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ModelBench {
    #[serde(flatten)]
    pub header: crate::BenchHeader,
    /// The calibration's date and machine, as it says.
    pub calibration: String,
    pub duration_s: f64,
    pub points: Vec<ModelPoint>,
    pub errors: Vec<ModelError>,
    /// Goal: median absolute error ≤ 10 %, worst ≤ 25 %, per layout, on the maximum
    /// throughput (the rows of `errors` that count for it).
    pub goal_met: bool,
    /// How runs on two cores were taken: `one state` (each cell's terms and measurement
    /// in one state of the round trip of a cache line between the cores, whichever),
    /// `near` (while that round trip was at most `near_limit_cycles`), or `as they came`.
    pub core_distance: String,
    /// `near`: the largest round trip taken as near, TSC cycles.
    pub near_limit_cycles: Option<f64>,
    /// Runs on two cores taken again because the cores were not at the distance wanted
    /// right before or right after them.
    pub two_core_runs_repeated: usize,
    /// Runs on two cores kept at another distance after 10 tries.
    pub two_core_runs_kept_apart: usize,
    /// With `--scenarios`: scenario cells instead of chains (`points` and `errors` are
    /// then empty).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scenarios: Option<crate::model_scenarios::ScenarioCheck>,
}

/// One chain of the matrix: its NFs (workloads of the calibration, by kind).
struct Case {
    kinds: Vec<&'static str>,
    /// `None`: compound, unless `hops` says it runs in namespaces.
    layout: Option<Placement>,
    /// The chaining in namespaces, one forwarder per hop.
    hops: Option<String>,
}

/// How often a cell's terms are measured in one round before a cell they cannot price
/// ends the benchmark.
const CELL_CALIBRATION_TRIES: usize = 3;

/// How often a cell is taken in one round (its terms and its measurement) before it is
/// kept with its runs in two states of the cores' distance, or at two speeds of the host.
const CELL_STATE_TRIES: usize = 3;

/// How far the host-speed probe may move between a compound cell's terms and its
/// measurement before the round is taken again: around a `forwarder*6` run the probe
/// repeated within 5 % while the host held one speed, and moved 1.5–2x with the chain
/// when its core was shared for part of the time (E'', 2026-12-06; docs/MODEL.md).
const HOST_SPEED_TOLERANCE: f64 = 0.10;

/// Chain lengths of the cells in namespaces: none the calibration ran (1 and 3).
const HOP_LENGTHS: [usize; 2] = [2, 5];

/// The matrix: chains of 2 to 6 NFs the calibration never ran (it ran each NF alone),
/// on one core and as pipelines on two.
fn cases(two_cores: bool) -> Vec<Case> {
    let c = |kinds: &[&'static str], layout: Option<Placement>| Case {
        kinds: kinds.to_vec(),
        layout,
        hops: None,
    };
    let mut all = vec![
        c(&["forwarder", "forwarder", "forwarder"], None),
        c(&["firewall", "nat44", "router"], None),
        c(&["synthetic", "router", "forwarder", "nat44"], None),
        c(&["forwarder"; 6], None),
    ];
    if two_cores {
        all.extend([
            c(&["firewall", "nat44", "router"], Some(Placement::SCore)),
            c(&["forwarder"; 4], Some(Placement::Bi(2))),
            c(&["firewall", "nat44", "router", "forwarder"], Some(Placement::Bi(2))),
            c(&["synthetic", "synthetic", "router"], Some(Placement::Pbp(2))),
            c(&["forwarder", "nat44", "router"], Some(Placement::Cores(vec![0, 0, 1]))),
        ]);
    }
    all
}

fn workload<'a>(nfs: &'a [NfWorkload], kind: &str) -> Result<&'a NfWorkload, String> {
    nfs.iter()
        .find(|w| w.nf.kind() == kind)
        .ok_or_else(|| format!("no default workload of `{kind}`"))
}

/// The cores a placement's `Cores` list names, mapped onto the cores this run uses
/// (`0` is the first of `cores`, `1` the second).
fn on_cores(placement: &Placement, cores: &[usize]) -> Placement {
    match placement {
        Placement::Cores(list) => Placement::Cores(list.iter().map(|&i| cores[i]).collect()),
        other => other.clone(),
    }
}

/// What the predictions are priced with.
pub enum CalibrationSource<'a> {
    /// One calibration (a file) for every round.
    Given(&'a Calibration),
    /// The terms each cell uses (the compound base, its NFs, the pipeline's stage ends
    /// and rings, its chaining in namespaces), measured once right before the cell in
    /// every round, at the calibrated sizes next to the cell's: this host's speed swings
    /// by up to 1.6x for tens of seconds (another guest on the core), so a term measured
    /// a minute before its cell prices another machine. `sizes` are the calibration's;
    /// `nfs` and `wired` what the cells may need.
    EachCell(Box<crate::calibrate::CalibrateArgs>),
}

/// The calibration of one cell: only the terms it uses, at the calibrated sizes next to
/// its frame size (both neighbours when it lies between two, so the interpolation is
/// checked too).
fn cell_calibration_args(
    all: &crate::calibrate::CalibrateArgs,
    nfs: &[NfWorkload],
    case: &Case,
    size: u16,
) -> Result<crate::calibrate::CalibrateArgs, String> {
    let mut nfs_of_cell: Vec<NfWorkload> = Vec::new();
    if case.hops.is_none() {
        for k in &case.kinds {
            if !nfs_of_cell.iter().any(|w| w.nf.kind() == *k) {
                nfs_of_cell.push(workload(nfs, k)?.clone());
            }
        }
    }
    Ok(crate::calibrate::CalibrateArgs {
        sizes: sizes_around(&all.sizes, size),
        nfs: nfs_of_cell,
        repeat: 1,
        pipeline: case.layout.is_some(),
        wired: case.hops.iter().cloned().collect(),
        ..all.clone()
    })
}

/// The calibrated sizes a prediction at `size` interpolates between: `size` itself when
/// it is one of them (or outside them all), else its two neighbours.
fn sizes_around(calibrated: &[u16], size: u16) -> Vec<u16> {
    let below = calibrated.iter().copied().filter(|&s| s <= size).max();
    let above = calibrated.iter().copied().filter(|&s| s >= size).min();
    match (below, above) {
        (Some(b), Some(a)) if b == a => vec![b],
        (Some(b), Some(a)) => vec![b, a],
        _ => vec![size],
    }
}

/// The matrix's model of each cell, in cell order.
fn models(matrix: &[Case], sizes: &[u16], nfs: &[NfWorkload], cores: &[usize]) -> Result<Vec<ChainModel>, String> {
    let mut out = Vec::new();
    for case in matrix {
        let keys: Vec<String> = case
            .kinds
            .iter()
            .map(|k| workload(nfs, k).map(|w| nf_key(w.nf.kind(), &w.nf.cost_settings())))
            .collect::<Result<_, _>>()?;
        for &size in sizes {
            let layout = match (&case.layout, &case.hops) {
                (_, Some(t)) => Layout::Hops { technology: t.clone() },
                (None, None) => Layout::Compound,
                (Some(p), None) => Layout::Pipeline {
                    stages: on_cores(p, cores)
                        .stages(case.kinds.len(), cores)?
                        .into_iter()
                        .map(|s| (s.nfs, s.core))
                        .collect(),
                },
            };
            out.push(ChainModel {
                nfs: keys.clone(),
                frames: vec![(f64::from(size), 1.0)],
                layout,
            });
        }
    }
    Ok(out)
}

/// Measures one cell's terms (`args`) and prices `model` with them. A term is a
/// difference of runs; on this host a swing between them can leave one at zero and the
/// cell without a cost: its terms are then measured again, at most
/// `CELL_CALIBRATION_TRIES` times. Each term measured is a step.
fn price_cell(
    args: &crate::calibrate::CalibrateArgs,
    model: &ChainModel,
    label: &str,
    progress: &mut Progress,
    stop: &Stop,
) -> Result<(Calibration, ChainPrediction), String> {
    let mut tries = 0;
    loop {
        tries += 1;
        let (base, total) = (progress.done(), progress.total());
        // The calibration's own steps, told as this benchmark's.
        let terms_of = format!("{label}: its terms");
        let calibrated = crate::calibrate::calibrate(args, &mut progress.part(&terms_of), stop);
        let cal = calibrated.map_err(|e| format!("{label}: calibrating its terms: {e}"))?;
        let after = base + crate::calibrate::steps_per_repetition(args);
        progress.at(after, total, &format!("{label}: its terms measured"));
        match predict_chain(&cal, model, None) {
            Ok(p) => return Ok((cal, p)),
            Err(e) if tries < CELL_CALIBRATION_TRIES => {
                progress.working(&format!("{label}: {e}; measuring its terms again"));
            }
            Err(e) => return Err(format!("{label}: {e} ({tries} times)")),
        }
    }
}

/// The cells of a model benchmark: each case of the matrix at each size, its chain as the
/// model prices it and, with no given calibration, the terms to measure before it.
struct Cells<'a> {
    args: &'a ModelBenchArgs,
    nfs: Vec<NfWorkload>,
    cores: Vec<usize>,
    matrix: Vec<Case>,
    models: Vec<ChainModel>,
    /// Each cell's own calibration, in cell order (none with a given calibration).
    calibrations: Vec<crate::calibrate::CalibrateArgs>,
    /// With a given calibration every cell is priced before any run: one it cannot price
    /// is refused at once.
    given: Option<Vec<ChainPrediction>>,
}

/// What the rounds gathered for one cell, a run per round.
#[derive(Default)]
struct CellRuns {
    predicted: Vec<ChainPrediction>,
    measured: Vec<Measured>,
    /// Per NF, from one run with per-NF accounting (first round).
    nf_cycles: Vec<f64>,
    round_trips: Vec<f64>,
    states: Vec<f64>,
    taken_again: usize,
    in_two_states: usize,
    speed_probes: Vec<f64>,
    at_two_speeds: usize,
}

pub fn run(
    args: &ModelBenchArgs,
    source: CalibrationSource,
    progress: &mut Progress,
    stop: &Stop,
) -> Result<ModelBench, String> {
    let cells = cells_of(args, &source)?;
    let calibration_steps: usize = cells
        .calibrations
        .iter()
        .map(crate::calibrate::steps_per_repetition)
        .sum();
    progress.plan(
        args.repeat * (cells.models.len() + calibration_steps)
            + cells.matrix.iter().filter(|c| c.hops.is_none()).count() * args.sizes.len(),
    );
    let mut runs: Vec<CellRuns> = (0..cells.models.len()).map(|_| CellRuns::default()).collect();
    let mut rounds = Rounds::new(args.repeat, stop);
    let last_calibration = measure_rounds(&cells, &mut runs, &mut rounds, progress, stop)?;
    // Every cell keeps the rounds that ran to their end.
    for r in runs.iter_mut() {
        rounds.keep_completed(&mut r.measured);
        rounds.keep_completed(&mut r.predicted);
    }
    let interrupted = rounds.interrupted();
    let rounds = rounds.completed();
    if rounds == 0 {
        return Err(crate::INTERRUPTED_BEFORE_A_ROUND.into());
    }
    let mut points = Vec::new();
    let mut runs = runs.into_iter();
    for case in &cells.matrix {
        for &size in &args.sizes {
            points.push(point_of(case, size, runs.next().expect("a cell's runs")));
        }
    }
    let errors = errors_of(&points);
    let keep = args.core_distance.as_ref().map(|g| g.keep());
    let goal_met = errors.iter().any(|e| e.counts_for_goal)
        && errors
            .iter()
            .filter(|e| e.counts_for_goal)
            .all(|e| e.median_abs_error_pct <= 10.0 && e.worst_abs_error_pct <= 25.0);
    Ok(ModelBench {
        header: crate::BenchHeader::new(MODEL_SCHEMA, rounds, interrupted),
        calibration: match (&source, &last_calibration) {
            (CalibrationSource::Given(cal), _) => format!("{} on {} ({})", cal.date, cal.machine.cpu, cal.version),
            (_, Some(cal)) => format!(
                "each cell's terms measured right before it in each of the {rounds} rounds, last {} on {} ({})",
                cal.date, cal.machine.cpu, cal.version
            ),
            (_, None) => unreachable!("a round finished"),
        },
        duration_s: args.duration.as_secs_f64(),
        points,
        errors,
        goal_met,
        core_distance: match keep {
            Some(Keep::OneState) => "one state",
            Some(Keep::Near(_)) => "near",
            None => "as they came",
        }
        .into(),
        near_limit_cycles: match keep {
            Some(Keep::Near(limit)) => Some(limit),
            _ => None,
        },
        two_core_runs_repeated: args.core_distance.as_ref().map_or(0, |g| g.repeated()),
        two_core_runs_kept_apart: args.core_distance.as_ref().map_or(0, |g| g.kept_apart()),
        scenarios: None,
    })
}

/// `--scenarios`: the scenario cells, each round's terms measured right before them.
fn run_scenarios(
    duration: std::time::Duration,
    warmup: std::time::Duration,
    repeat: usize,
    progress: &mut Progress,
    stop: &Stop,
) -> Result<ModelBench, String> {
    let (check, cal, rounds, interrupted) = crate::model_scenarios::run(duration, warmup, repeat, progress, stop)?;
    Ok(ModelBench {
        header: crate::BenchHeader::new(MODEL_SCHEMA, rounds, interrupted),
        calibration: match cal {
            Some(cal) => format!(
                "the memif terms and the VNFs' NFs measured right before the cells in each of the {rounds} rounds, last {} on {} ({})",
                cal.date, cal.machine.cpu, cal.version
            ),
            None => "none".into(),
        },
        duration_s: duration.as_secs_f64(),
        points: Vec::new(),
        errors: Vec::new(),
        goal_met: check.goal_met,
        core_distance: "as they came".into(),
        near_limit_cycles: None,
        two_core_runs_repeated: 0,
        two_core_runs_kept_apart: 0,
        scenarios: Some(check),
    })
}

/// The benchmark's cells for `args`, checked before any run.
fn cells_of<'a>(args: &'a ModelBenchArgs, source: &CalibrationSource) -> Result<Cells<'a>, String> {
    let nfs = crate::calibrate::default_nfs()?;
    let cores = crate::calibrate::cores_from(args.core);
    let has_pipeline = match source {
        CalibrationSource::Given(cal) => cal.pipeline.is_some(),
        CalibrationSource::EachCell(_) => cores.len() >= 2,
    };
    if let CalibrationSource::EachCell(c) = source
        && let Some(t) = args.technologies.iter().find(|t| !c.wired.contains(t))
    {
        return Err(format!("--technologies {t}: not among the chainings to calibrate"));
    }
    // Refused before any run rather than at the first cell that needs it.
    if args.technologies.iter().any(|t| t == "ovs")
        && let Some(why) = crate::chaining::ovs_missing()
    {
        return Err(format!("--technologies ovs: {why}"));
    }
    let mut matrix = cases(has_pipeline);
    for t in &args.technologies {
        for n in HOP_LENGTHS {
            matrix.push(Case {
                kinds: vec!["forwarder"; n],
                layout: None,
                hops: Some(t.clone()),
            });
        }
    }
    let models = models(&matrix, &args.sizes, &nfs, &cores)?;
    let mut calibrations = Vec::new();
    if let CalibrationSource::EachCell(all) = source {
        for case in &matrix {
            for &size in &args.sizes {
                calibrations.push(cell_calibration_args(all, &nfs, case, size)?);
            }
        }
    }
    let given = match source {
        CalibrationSource::Given(cal) => Some(
            models
                .iter()
                .map(|m| predict_chain(cal, m, None))
                .collect::<Result<_, _>>()?,
        ),
        CalibrationSource::EachCell(_) => None,
    };
    Ok(Cells {
        args,
        nfs,
        cores,
        matrix,
        models,
        calibrations,
        given,
    })
}

/// Interleaved rounds over the cells, each priced then measured into `runs`. A failure
/// that Ctrl-C caused ends the rounds (the one under way is not counted); any other ends
/// the benchmark. The last calibration measured, if the cells measure their own.
fn measure_rounds(
    cells: &Cells,
    runs: &mut [CellRuns],
    rounds: &mut Rounds,
    progress: &mut Progress,
    stop: &Stop,
) -> Result<Option<Calibration>, String> {
    let args = cells.args;
    let mut last_calibration = None;
    // Set after a chain in namespaces: the kernel may still be tearing it down.
    let mut after_hops = false;
    let stopped = |rounds: &mut Rounds, e: String| -> Result<(), String> {
        if stop.requested() {
            rounds.cut();
            Ok(())
        } else {
            Err(e)
        }
    };
    'rounds: while rounds.start_next() {
        let round = rounds.completed();
        let mut cell = 0;
        for case in &cells.matrix {
            for &size in &args.sizes {
                if !rounds.go_on() {
                    break 'rounds;
                }
                let label = format!("{} {} {size} B", case.kinds.join("->"), layout_name(case));
                if after_hops && case.hops.is_none() {
                    crate::wait_for_idle_cores(Duration::from_secs(10));
                }
                after_hops = case.hops.is_some();
                match measure_cell(cells, (cell, case, size, &label), &mut runs[cell], progress, stop) {
                    Ok(Some(cal)) => last_calibration = Some(cal),
                    Ok(None) => {}
                    Err(e) => {
                        stopped(rounds, e)?;
                        break 'rounds;
                    }
                }
                if stop.requested() {
                    rounds.cut();
                    break 'rounds;
                }
                progress.advance();
                if round == 0 && case.hops.is_none() {
                    progress.working(&format!("{label}, per-NF accounting"));
                    match measure(args, &cells.nfs, case, size, &cells.cores, true, stop) {
                        Ok(m) => runs[cell].nf_cycles = m.nf_cycles,
                        Err(e) => {
                            stopped(rounds, format!("{label}: {e}"))?;
                            break 'rounds;
                        }
                    }
                    progress.advance();
                }
                cell += 1;
            }
        }
    }
    Ok(last_calibration)
}

/// One round of one cell: its prediction (its terms measured first, unless the
/// calibration was given) and its measurement, into `runs`. A cell on two cores is one
/// episode of the core-distance guard: with the one-state guard its terms and
/// measurement are taken again when they ended in two states (with a given calibration,
/// only the measurement is its own). A compound cell whose terms it measures is taken
/// again when the host's speed moved between its terms and its measurement. The
/// calibration measured, if any.
fn measure_cell(
    cells: &Cells,
    (cell, case, size, label): (usize, &Case, u16, &str),
    runs: &mut CellRuns,
    progress: &mut Progress,
    stop: &Stop,
) -> Result<Option<Calibration>, String> {
    let args = cells.args;
    // Sampled around pipeline cells only: a compound chain has no ring between cores.
    let sample_round_trip = |into: &mut Vec<f64>| {
        if let (Some(_), [near, far, ..]) = (&case.layout, cells.cores.as_slice())
            && let Some(c) = crate::cores::round_trip_cycles(*near, *far)
        {
            into.push(c);
        }
    };
    sample_round_trip(&mut runs.round_trips);
    let guard = args
        .core_distance
        .as_deref()
        .filter(|_| case.hops.is_some() || case.layout.is_some());
    // The host's speed on the compound runs' core, where this round measures the terms.
    let speed_probe = || {
        crate::calibrate::speed_probe(&cells.calibrations[cell], size, stop)
            .map_err(|e| format!("{label}: the host-speed probe: {e}"))
    };
    let probes_speed = cells.given.is_none() && case.hops.is_none() && case.layout.is_none();
    let mut calibration = None;
    let mut tries = 0;
    let (prediction, m) = loop {
        tries += 1;
        if let Some(g) = guard {
            g.begin_episode();
        }
        let speed_before = probes_speed.then(speed_probe).transpose()?;
        let prediction = match &cells.given {
            Some(g) => g[cell].clone(),
            None => {
                let (cal, prediction) =
                    price_cell(&cells.calibrations[cell], &cells.models[cell], label, progress, stop)?;
                calibration = Some(cal);
                prediction
            }
        };
        progress.working(label);
        let m =
            measure(args, &cells.nfs, case, size, &cells.cores, false, stop).map_err(|e| format!("{label}: {e}"))?;
        if stop.requested() {
            // Its window ended at Ctrl-C: not a measurement of the cell; the round is cut.
            return Ok(calibration);
        }
        // Why this try is taken again, from whichever guard watches the cell; `None`:
        // it is kept.
        let why_again = if let Some(before) = speed_before {
            let after = speed_probe()?;
            if stop.requested() {
                return Ok(calibration);
            }
            let moved = host_speed_moved(before, after);
            if !moved || tries == CELL_STATE_TRIES {
                runs.speed_probes.extend([before, after]);
                runs.at_two_speeds += usize::from(moved);
                None
            } else {
                Some(format!(
                    "the host ran at another speed for its terms than for its measurement ({before:.1} then {after:.1} cycles a frame of the probe)"
                ))
            }
        } else if let Some(g) = guard {
            let taken = g.episode();
            let again = cells.given.is_none() && g.keep() == Keep::OneState && !taken.one_state;
            if !again || tries == CELL_STATE_TRIES {
                runs.states.extend(taken.round_trip_cycles);
                runs.in_two_states += usize::from(!taken.one_state);
                None
            } else {
                Some("its runs ended in two states of the cores' distance".to_string())
            }
        } else {
            None
        };
        let Some(why) = why_again else { break (prediction, m) };
        runs.taken_again += 1;
        progress.plan_more(crate::calibrate::steps_per_repetition(&cells.calibrations[cell]));
        progress.working(&format!("{label}: {why}; taken again"));
    };
    runs.predicted.push(prediction);
    runs.measured.push(m);
    sample_round_trip(&mut runs.round_trips);
    Ok(calibration)
}

/// Whether the host-speed probe moved by more than [`HOST_SPEED_TOLERANCE`] from
/// `before` to `after` (either way; a probe that is not a cost counts as moved).
fn host_speed_moved(before: f64, after: f64) -> bool {
    !(before > 0.0 && after > 0.0 && (after / before - 1.0).abs() <= HOST_SPEED_TOLERANCE)
}

/// A cell's point: the median of its rounds' predictions and measurements, its errors,
/// and each core's and NF's predicted cycles against the measured.
fn point_of(case: &Case, size: u16, cell: CellRuns) -> ModelPoint {
    // Only rounds that measured the cell count (Ctrl-C may end one half way).
    let priced = &cell.predicted[..cell.measured.len().min(cell.predicted.len())];
    let predicted_runs: Vec<f64> = priced.iter().map(|p| p.max_pps / 1e6).collect();
    let predicted_mpps = median(&predicted_runs);
    // The round whose prediction is the median names the bottleneck and the terms.
    let p = priced
        .iter()
        .min_by(|a, b| {
            (a.max_pps / 1e6 - predicted_mpps)
                .abs()
                .total_cmp(&(b.max_pps / 1e6 - predicted_mpps).abs())
        })
        .expect("a round");
    let runs: Vec<f64> = cell.measured.iter().map(|m| m.mpps).collect();
    let cycles: Vec<f64> = cell.measured.iter().map(|m| m.busiest_cycles).collect();
    let measured_mpps = median(&runs);
    // Each round's prediction against the measurement seconds after it: the host's
    // speed changes between rounds, so a round's pair is what is comparable.
    let round_errors = errors_pct(&predicted_runs, &runs);
    let error_pct = median(&round_errors);
    let (predicted_saturated_runs, measured_saturated_runs): (Vec<f64>, Vec<f64>) = priced
        .iter()
        .zip(&cell.measured)
        .filter_map(|(p, m)| Some((p.overload.saturated_pps? / 1e6, m.saturated_mpps?)))
        .unzip();
    let saturated_errors = errors_pct(&predicted_saturated_runs, &measured_saturated_runs);
    let terms = term_checks(case, p, &cell.nf_cycles);
    ModelPoint {
        chain: case.kinds.join(" -> "),
        layout: layout_name(case),
        size,
        predicted_mpps,
        bottleneck: p.bottleneck.clone(),
        predicted_cycles: p
            .resources
            .iter()
            .find(|r| r.name == p.bottleneck)
            .map_or(f64::NAN, |r| r.cost_per_packet),
        measured_mpps,
        measured_spread_pct: spread_pct(&runs),
        measured_cycles: median(&cycles),
        error_pct,
        round_errors_pct: round_errors,
        core_round_trip_cycles: cell.round_trips,
        core_state_cycles: cell.states,
        rounds_taken_again: cell.taken_again,
        rounds_in_two_states: cell.in_two_states,
        host_speed_probe_cycles: cell.speed_probes,
        rounds_at_two_speeds: cell.at_two_speeds,
        measured_offered_mpps: cell.measured.iter().filter_map(|m| m.offered_mpps).collect(),
        measured_runs: runs,
        predicted_runs,
        saturated_error_pct: (!saturated_errors.is_empty()).then(|| median(&saturated_errors)),
        predicted_saturated_runs,
        measured_saturated_runs,
        largest_miss: (error_pct.abs() > 10.0).then(|| largest_miss(&terms)).flatten(),
        terms,
        cores: core_checks(p, &cell.measured),
    }
}

/// Each core's predicted cycles per packet against the median measured on it.
fn core_checks(p: &ChainPrediction, measured: &[Measured]) -> Vec<CoreCheck> {
    p.cores
        .iter()
        .map(|c| {
            let on_core: Vec<f64> = measured
                .iter()
                .filter_map(|m| m.core_cycles.iter().find(|(name, _)| *name == c.core).map(|x| x.1))
                .collect();
            CoreCheck {
                core: c.core.clone(),
                predicted_cycles: c.cycles_per_packet,
                terms: c.terms.clone(),
                measured_cycles: (!on_core.is_empty()).then(|| median(&on_core)),
            }
        })
        .collect()
}

/// Each NF's predicted cycles against what it spent in the chain (`nf_cycles`).
fn term_checks(case: &Case, p: &ChainPrediction, nf_cycles: &[f64]) -> Vec<TermCheck> {
    let mut predicted_nf = vec![f64::NAN; case.kinds.len()];
    for t in p.cores.iter().flat_map(|c| &c.terms) {
        if let Some(i) = t.nf {
            predicted_nf[i] = t.cycles;
        }
    }
    case.kinds
        .iter()
        .zip(predicted_nf)
        .zip(nf_cycles)
        .map(|((k, predicted), &measured)| TermCheck {
            nf: k.to_string(),
            predicted_cycles: predicted,
            measured_cycles: measured,
        })
        .collect()
}

/// The NF whose calibrated cost is furthest from what it spent in the chain.
fn largest_miss(terms: &[TermCheck]) -> Option<String> {
    terms
        .iter()
        .max_by(|a, b| {
            (a.measured_cycles - a.predicted_cycles)
                .abs()
                .total_cmp(&(b.measured_cycles - b.predicted_cycles).abs())
        })
        .map(|t| {
            format!(
                "{}: calibrated {:.0} cycles alone, {:.0} in this chain",
                t.nf, t.predicted_cycles, t.measured_cycles
            )
        })
}

fn layout_name(case: &Case) -> String {
    match (&case.layout, &case.hops) {
        (_, Some(t)) => t.clone(),
        (None, None) => "compound".into(),
        (Some(p), None) => format!("pipeline {p}"),
    }
}

/// Each round's (predicted − measured) / measured, percent.
fn errors_pct(predicted: &[f64], measured: &[f64]) -> Vec<f64> {
    predicted
        .iter()
        .zip(measured)
        .map(|(p, m)| (p - m) / m * 100.0)
        .collect()
}

/// The median absolute deviation of `runs` from their median, percent of the median.
fn spread_pct(runs: &[f64]) -> f64 {
    let middle = median(runs);
    let deviations: Vec<f64> = runs.iter().map(|r| (r - middle).abs()).collect();
    median(&deviations) / middle * 100.0
}

/// The median and worst absolute error per layout kind (`compound`, `pipeline`, each
/// chaining in namespaces), then, where a chaining's throughput falls past its maximum,
/// of what it delivers offered all the tester sends (`linux offered all`).
pub fn errors_of(points: &[ModelPoint]) -> Vec<ModelError> {
    let mut kinds: Vec<&str> = points
        .iter()
        .map(|p| p.layout.split(' ').next().unwrap_or(""))
        .collect();
    kinds.sort_unstable();
    kinds.dedup();
    let maximum = |p: &ModelPoint| {
        Some(Figure {
            error: p.error_pct,
            predicted: p.predicted_mpps,
            measured: p.measured_mpps,
            spread: p.measured_spread_pct,
        })
    };
    let saturated = |p: &ModelPoint| {
        let (predicted, measured) = (&p.predicted_saturated_runs, &p.measured_saturated_runs);
        Some(Figure {
            error: p.saturated_error_pct?,
            predicted: median(predicted),
            measured: median(measured),
            spread: spread_pct(measured),
        })
    };
    let mut rows = Vec::new();
    for (figure, suffix) in [
        (&maximum as &dyn Fn(&ModelPoint) -> Option<Figure>, ""),
        (&saturated, " offered all"),
    ] {
        for kind in &kinds {
            let cells: Vec<(&ModelPoint, Figure)> = points
                .iter()
                .filter(|p| p.layout.starts_with(kind))
                .filter_map(|p| Some((p, figure(p)?)))
                .collect();
            let Some((worst, w)) = cells.iter().max_by(|a, b| a.1.error.abs().total_cmp(&b.1.error.abs())) else {
                continue;
            };
            rows.push(ModelError {
                layout: format!("{kind}{suffix}"),
                cells: cells.len(),
                median_abs_error_pct: median(&cells.iter().map(|c| c.1.error.abs()).collect::<Vec<_>>()),
                worst_abs_error_pct: w.error.abs(),
                median_measured_spread_pct: median(&cells.iter().map(|c| c.1.spread).collect::<Vec<_>>()),
                worst: crate::worst_cell(
                    &format!("{} ({}, {} B)", worst.chain, worst.layout, worst.size),
                    w.predicted,
                    w.measured,
                    w.error,
                    // The saturated figure's error is of the rounds' medians.
                    if suffix.is_empty() {
                        &worst.round_errors_pct
                    } else {
                        &[]
                    },
                ),
                counts_for_goal: suffix.is_empty(),
            });
        }
    }
    rows
}

/// One cell's figure the model predicts, against its measurement.
struct Figure {
    /// (predicted − measured) / measured, percent.
    error: f64,
    predicted: f64,
    measured: f64,
    /// The measurement's spread over rounds, percent.
    spread: f64,
}

/// What one capacity run measured.
struct Measured {
    mpps: f64,
    /// The busiest core's busy cycles per packet.
    busiest_cycles: f64,
    /// Each core's busy cycles per packet, named as the model names it (`core`, `core 1`).
    core_cycles: Vec<(String, f64)>,
    /// Each NF's own cycles per packet (with accounting; empty without).
    nf_cycles: Vec<f64>,
    /// Chains in namespaces: the offered rate it delivered `mpps` at, Mpps.
    offered_mpps: Option<f64>,
    /// Chains in namespaces: what it delivered offered all the tester sends, Mpps.
    saturated_mpps: Option<f64>,
}

fn measure(
    args: &ModelBenchArgs,
    nfs: &[NfWorkload],
    case: &Case,
    size: u16,
    cores: &[usize],
    accounting: bool,
    stop: &Stop,
) -> Result<Measured, String> {
    if let Some(t) = &case.hops {
        // Its maximum throughput, as the calibration measures its terms; hops' cycles:
        // the saturated DUT core's clock over the frames it delivered.
        let r = crate::calibrate::chain_capacity(
            t,
            case.kinds.len(),
            size,
            (args.duration, args.warmup),
            cores,
            args.core_distance.as_deref(),
            stop,
        )?;
        return Ok(Measured {
            mpps: r.mpps,
            busiest_cycles: r.cycles_per_frame,
            core_cycles: Vec::new(),
            nf_cycles: Vec::new(),
            offered_mpps: Some(r.offered_pps / 1e6),
            saturated_mpps: Some(r.saturated_mpps),
        });
    }
    // Built per run: a run repeated while the cores were far starts from fresh NFs.
    let chain = || -> Result<sfclab_core::NamedNfs, String> {
        case.kinds
            .iter()
            .enumerate()
            .map(|(i, k)| workload(nfs, k).map(|w| (format!("{k}{}", i + 1), w.nf.build())))
            .collect()
    };
    // As the calibration's NFs got it: destinations spread over the router's table.
    let traffic = GeneratorConfig {
        sizes: FrameSizes::Fixed { size },
        flows: 1024,
        destinations: Destinations::Spread,
        probe_pps: 0.0,
        ..Default::default()
    };
    let run = RunSettings {
        batch: args.batch,
        duration: Some(args.duration),
        warmup: args.warmup,
        core: cores.first().copied(),
        accounting,
        stop: Some(stop.clone()),
        ..Default::default()
    };
    let r = match &case.layout {
        None => run_compound(traffic, chain()?, &run).map_err(|e| e.to_string())?,
        Some(p) => {
            let placement = on_cores(p, cores);
            let settings = PipelineSettings {
                run: RunSettings { pool_size: 0, ..run },
                placement: placement.clone(),
                cores: cores.to_vec(),
                links: LinkMode::Backpressure,
                flow_control: true,
                ..Default::default()
            };
            let once = || run_pipeline(traffic.clone(), chain()?, &settings).map_err(|e| e.to_string());
            let mut used: Vec<usize> = placement
                .stages(case.kinds.len(), cores)?
                .iter()
                .map(|s| s.core)
                .collect();
            used.sort_unstable();
            used.dedup();
            match used.as_slice() {
                [near, far, ..] => crate::cores::run_guarded(args.core_distance.as_deref(), *near, *far, once)?,
                _ => once()?,
            }
        }
    };
    if r.dropped > 0 {
        return Err(format!("{} packets dropped: not a capacity run", r.dropped));
    }
    let busiest = r
        .cores
        .iter()
        .filter_map(|c| c.cycles_per_packet)
        .fold(r.busy_cycles_per_packet.unwrap_or(0.0), f64::max);
    let nf_cycles = r
        .places
        .iter()
        .filter(|p| p.role == sfclab_runtime::Role::Nf)
        .filter_map(|p| p.cycles_per_packet)
        .collect();
    let core_cycles = match &case.layout {
        None => r
            .busy_cycles_per_packet
            .map(|c| ("core".to_string(), c))
            .into_iter()
            .collect(),
        Some(_) => r
            .cores
            .iter()
            .filter_map(|c| c.cycles_per_packet.map(|x| (format!("core {}", c.core), x)))
            .collect(),
    };
    Ok(Measured {
        mpps: r.mpps,
        busiest_cycles: busiest,
        core_cycles,
        nf_cycles,
        offered_mpps: None,
        saturated_mpps: None,
    })
}

benchmark!(ModelBench, render_table, render_csv);

/// The terminal view of `bench model`: predicted against measured per cell, and the
/// error per layout against the goal.
fn render_table(b: &ModelBench) -> String {
    if let Some(check) = &b.scenarios {
        return crate::model_scenarios::render_table(
            &b.header.title("model --scenarios"),
            &b.calibration,
            (b.header.repeat, b.duration_s),
            check,
        );
    }
    let mut s = String::new();
    let _ = writeln!(s, "{}", b.header.title("model"));
    let _ = writeln!(
        s,
        "calibration: {} | measured: capacity runs (flow control, backpressure; in namespaces, the offered rate that delivers most), {} x {:.1} s, medians\n",
        b.calibration, b.header.repeat, b.duration_s
    );
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    t.set_header([
        "chain",
        "layout",
        "size B",
        "predicted Mpps",
        "bottleneck (cycles/pkt)",
        "measured Mpps [min–max]",
        "busiest core cycles/pkt",
        "error",
    ]);
    for p in &b.points {
        t.add_row([
            p.chain.clone(),
            p.layout.clone(),
            p.size.to_string(),
            format!("{:.3}", p.predicted_mpps),
            format!("{} ({:.0})", p.bottleneck, p.predicted_cycles),
            crate::with_range(&p.measured_runs, 3),
            format!("{:.0}", p.measured_cycles),
            format!("{:+.1} %", p.error_pct),
        ]);
    }
    let _ = writeln!(s, "{t}");
    write_cell_notes(&mut s, &b.points);
    for e in &b.errors {
        let _ = writeln!(
            s,
            "{}: {} cells, median |error| {:.1} %, worst {:.1} %: {}; the measurement's own spread between rounds: median {:.1} %{}",
            e.layout,
            e.cells,
            e.median_abs_error_pct,
            e.worst_abs_error_pct,
            e.worst,
            e.median_measured_spread_pct,
            if e.counts_for_goal {
                ""
            } else {
                " (beside the goal: C_SWdrops, linear in n from 1 and 3 hops, where it is within the runs' noise)"
            }
        );
    }
    // Cells with the host-speed probe are one-core cells: their rounds taken again are
    // the probe's, the others' the core-distance guard's.
    let (probed, two_core): (Vec<&ModelPoint>, Vec<&ModelPoint>) =
        b.points.iter().partition(|p| !p.host_speed_probe_cycles.is_empty());
    if !probed.is_empty() {
        let _ = writeln!(
            s,
            "compound cells taken at one speed of the host (its probe within {:.0} % right before the terms and right after the measurement): {} cell rounds taken again, {} kept at two speeds",
            HOST_SPEED_TOLERANCE * 100.0,
            probed.iter().map(|p| p.rounds_taken_again).sum::<usize>(),
            probed.iter().map(|p| p.rounds_at_two_speeds).sum::<usize>()
        );
    }
    let taken = match (b.core_distance.as_str(), b.near_limit_cycles) {
        ("one state", _) => Some(format!(
            "each cell's terms and measurement in one state of the cores' round trip (within 2.5x of its first run's); {} cell rounds taken again, {} kept in two states",
            two_core.iter().map(|p| p.rounds_taken_again).sum::<usize>(),
            two_core.iter().map(|p| p.rounds_in_two_states).sum::<usize>()
        )),
        (_, Some(limit)) => Some(format!(
            "while the cores' round trip was <= {limit:.0} cycles before and after"
        )),
        _ => None,
    };
    if let Some(taken) = taken {
        let _ = writeln!(
            s,
            "runs on two cores taken {taken}: {} runs repeated, {} kept at another distance after 10 tries",
            b.two_core_runs_repeated, b.two_core_runs_kept_apart
        );
    }
    let _ = writeln!(
        s,
        "goal (median |error| <= 10 %, worst <= 25 %, per layout, on the maximum): {}",
        if b.goal_met { "met" } else { "NOT met" }
    );
    s += &crate::footer(
        b.points.iter().filter(|p| crate::is_wide(&p.measured_runs)).count(),
        b.header.interrupted,
        b.header.repeat,
    );
    s
}

/// What each cell's row cannot say: its largest miss, a round trip between its cores
/// that moved, and where a falling chaining delivered most.
fn write_cell_notes(s: &mut String, points: &[ModelPoint]) {
    for p in points.iter().filter(|p| p.largest_miss.is_some()) {
        let _ = writeln!(
            s,
            "  {} ({}, {} B) {:+.1} %: {}",
            p.chain,
            p.layout,
            p.size,
            p.error_pct,
            p.largest_miss.as_deref().unwrap_or("")
        );
    }
    for p in points {
        let trips = &p.core_round_trip_cycles;
        let (low, high) = trips
            .iter()
            .fold((f64::INFINITY, 0.0_f64), |(l, h), &c| (l.min(c), h.max(c)));
        // The host moved a vCPU during the cell: its rings cost something else meanwhile.
        if !trips.is_empty() && high > 1.5 * low {
            let _ = writeln!(
                s,
                "  {} ({}, {} B): the two cores' round trip moved between {:.0} and {:.0} cycles during the cell",
                p.chain, p.layout, p.size, low, high
            );
        }
    }
    // Where throughput falls past the maximum, the rate the maximum was found at.
    for p in points.iter().filter(|p| sfclab_model::hops_overload(&p.layout).falls()) {
        let _ = writeln!(
            s,
            "  {} ({}, {} B): delivered most at {} Mpps offered (past it, the kernel drops inside the chain)",
            p.chain,
            p.layout,
            p.size,
            crate::with_range(&p.measured_offered_mpps, 3)
        );
        if let Some(error) = p.saturated_error_pct {
            let _ = writeln!(
                s,
                "    offered all the tester sends: predicted {} Mpps (its software drops priced), measured {} ({error:+.1} %)",
                crate::with_range(&p.predicted_saturated_runs, 3),
                crate::with_range(&p.measured_saturated_runs, 3)
            );
        }
    }
}

/// `bench model --csv`: a row per cell.
fn render_csv(b: &ModelBench) -> String {
    if let Some(check) = &b.scenarios {
        return crate::model_scenarios::render_csv(check);
    }
    let mut s = String::from(
        "chain,layout,size,predicted_mpps,bottleneck,predicted_cycles,measured_mpps,measured_spread_pct,measured_cycles,error_pct,measured_offered_mpps,predicted_saturated_mpps,measured_saturated_mpps,saturated_error_pct\n",
    );
    for p in &b.points {
        let _ = writeln!(
            s,
            "{},{},{},{:.4},{},{:.1},{:.4},{:.1},{:.1},{:.2},{},{},{},{}",
            p.chain,
            p.layout,
            p.size,
            p.predicted_mpps,
            p.bottleneck,
            p.predicted_cycles,
            p.measured_mpps,
            p.measured_spread_pct,
            p.measured_cycles,
            p.error_pct,
            // Empty in memory: no tester offers a rate there.
            crate::median_if_any(&p.measured_offered_mpps)
                .map(|m| format!("{m:.4}"))
                .unwrap_or_default(),
            // Empty where the throughput does not fall past the maximum.
            crate::median_if_any(&p.predicted_saturated_runs)
                .map(|m| format!("{m:.4}"))
                .unwrap_or_default(),
            crate::median_if_any(&p.measured_saturated_runs)
                .map(|m| format!("{m:.4}"))
                .unwrap_or_default(),
            p.saturated_error_pct.map(|e| format!("{e:.2}")).unwrap_or_default()
        );
    }
    s
}

/// `sfclab bench model`'s flags.
#[derive(clap::Args)]
pub struct ModelFlags {
    /// The calibration to check (default: each cell's terms measured right before the
    /// cell in every round, with --duration, so the host's drift hits predictions and
    /// measurements alike).
    #[arg(long)]
    calibration: Option<std::path::PathBuf>,
    /// Frame sizes of the matrix: one between calibrated sizes checks the interpolation.
    #[arg(long, value_delimiter = ',', default_value = "64,256,1518")]
    sizes: Vec<u16>,
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    #[arg(long, default_value = "500ms")]
    duration: String,
    #[arg(long, default_value = "200ms")]
    warmup: String,
    #[arg(long)]
    core: Option<usize>,
    /// Take runs on two cores (the pipelines' and the chains in namespaces' terms and
    /// measurements) at one distance between the cores: a run is repeated (up to 10
    /// times) while the round trip of a cache line between them, right before or right
    /// after it, exceeds this many TSC cycles. `auto`: each cell's terms and measurement
    /// in one state of that round trip, whichever (within 2.5x of the cell's first
    /// run's); the cell is taken again (up to 3 times a round) when its runs ended in
    /// two. 0: take runs as they come.
    #[arg(long, default_value = "auto", value_name = "CYCLES")]
    max_core_round_trip: String,
    /// Also check chains of 2 and 5 forwarders in namespaces over these chainings
    /// (`veth`, `nic-switch`, `linux`, `ovs`; needs root; calibrated first when no
    /// --calibration is given).
    #[arg(long, value_delimiter = ',')]
    technologies: Vec<String>,
    /// Check scenarios instead of chains (needs root): PVP and PVVP chains of the router
    /// and multi-feature VNFs at 1:1 to 6:1 processes per core, with a licence or the
    /// NIC's capacity, offered all the tester sends; the memif terms and the VNFs' NFs
    /// measured right before the cells in each round.
    #[arg(long, conflicts_with_all = ["calibration", "technologies"])]
    scenarios: bool,
}

pub static BENCH: crate::registry::Entry<ModelFlags, ModelBench> = crate::registry::Entry {
    name: "model",
    schema: MODEL_SCHEMA,
    about: "The model checked: chains x placements x frame sizes the calibration did not run, each predicted and measured in the same run; error per layout, scatter plot",
    run: |f, stop, progress| {
        use crate::registry::BenchError::Usage;
        let (duration, warmup) = crate::registry::repeated_window(f.repeat, &f.duration, &f.warmup)?;
        if f.scenarios {
            return Ok(run_scenarios(duration, warmup, f.repeat, progress, stop)?);
        }
        let given = match &f.calibration {
            Some(path) => Some(Calibration::load(path).map_err(|e| Usage(format!("--calibration {e}")))?),
            None => None,
        };
        // One guard for the terms' runs and the cells' measurements: its counts are the run's.
        let near = CoreDistance::from_flag(&f.max_core_round_trip).map_err(Usage)?;
        let source = match &given {
            Some(c) => CalibrationSource::Given(c),
            None => CalibrationSource::EachCell(Box::new(crate::calibrate::CalibrateArgs {
                sizes: vec![64, 512, 1518],
                nfs: crate::calibrate::default_nfs()?,
                duration,
                warmup,
                repeat: 1,
                batch: 32,
                core: f.core,
                pipeline: true,
                wired: f.technologies.clone(),
                core_distance: near.clone(),
                memif: None,
            })),
        };
        let args = ModelBenchArgs {
            duration,
            warmup,
            repeat: f.repeat,
            batch: 32,
            sizes: f.sizes,
            core: f.core,
            technologies: f.technologies,
            core_distance: near,
        };
        Ok(run(&args, source, progress, stop)?)
    },
    figure: Some(figure),
};

/// Predicted against measured, a colour per layout, with the y = x line.
fn figure(b: &ModelBench) -> crate::registry::Figure {
    let mut groups: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    if let Some(check) = &b.scenarios {
        let points = check
            .cells
            .iter()
            .filter_map(|c| Some((c.measured_mpps, c.predicted_mpps?)))
            .collect();
        groups.push(("scenarios".into(), points));
    }
    for p in &b.points {
        let kind = p.layout.split(' ').next().unwrap_or("").to_string();
        match groups.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, points)) => points.push((p.measured_mpps, p.predicted_mpps)),
            None => groups.push((kind, vec![(p.measured_mpps, p.predicted_mpps)])),
        }
    }
    crate::registry::Figure::Scatter {
        title: "The model against the machine (sfclab bench model)".into(),
        x_label: "measured Mpps".into(),
        y_label: "predicted Mpps".into(),
        groups,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_moved_when_its_probe_moved_by_more_than_a_tenth_either_way() {
        assert!(!host_speed_moved(10.0, 10.0));
        assert!(!host_speed_moved(10.0, 10.99));
        assert!(!host_speed_moved(10.0, 9.01));
        assert!(host_speed_moved(10.0, 11.01));
        assert!(host_speed_moved(10.0, 8.99));
        // A spell of this host: 1.6x slower, or faster.
        assert!(host_speed_moved(10.7, 17.1));
        assert!(host_speed_moved(17.1, 10.7));
        // A probe that is not a cost cannot show the host steady.
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(host_speed_moved(10.0, bad) && host_speed_moved(bad, 10.0), "{bad}");
        }
    }

    fn point(layout: &str, error_pct: f64) -> ModelPoint {
        ModelPoint {
            chain: "forwarder".into(),
            layout: layout.into(),
            size: 64,
            predicted_mpps: 1.0 + error_pct / 100.0,
            bottleneck: "core".into(),
            predicted_cycles: 100.0,
            measured_mpps: 1.0,
            measured_runs: vec![1.0],
            measured_offered_mpps: Vec::new(),
            predicted_saturated_runs: Vec::new(),
            measured_saturated_runs: Vec::new(),
            saturated_error_pct: None,
            measured_spread_pct: error_pct.abs() / 2.0,
            predicted_runs: vec![1.0],
            measured_cycles: 100.0,
            error_pct,
            round_errors_pct: vec![error_pct],
            core_round_trip_cycles: Vec::new(),
            core_state_cycles: Vec::new(),
            rounds_taken_again: 0,
            rounds_in_two_states: 0,
            host_speed_probe_cycles: Vec::new(),
            rounds_at_two_speeds: 0,
            terms: Vec::new(),
            largest_miss: None,
            cores: Vec::new(),
        }
    }

    #[test]
    fn a_cell_is_calibrated_at_its_size_or_the_two_around_it() {
        let calibrated = [64, 512, 1518];
        assert_eq!(sizes_around(&calibrated, 64), vec![64]);
        assert_eq!(sizes_around(&calibrated, 256), vec![64, 512]);
        assert_eq!(sizes_around(&calibrated, 1024), vec![512, 1518]);
        assert_eq!(sizes_around(&calibrated, 1518), vec![1518]);
        // Outside every calibrated size: measured at its own.
        assert_eq!(sizes_around(&calibrated, 9000), vec![9000]);
        assert_eq!(sizes_around(&calibrated, 60), vec![60]);
    }

    #[test]
    fn a_cell_is_calibrated_with_its_own_terms_only() {
        let nfs = crate::calibrate::default_nfs().unwrap();
        let all = crate::calibrate::CalibrateArgs {
            sizes: vec![64, 512, 1518],
            nfs: nfs.clone(),
            duration: Duration::from_millis(100),
            warmup: Duration::from_millis(10),
            repeat: 3,
            batch: 32,
            core: None,
            pipeline: true,
            wired: vec!["veth".into(), "linux".into()],
            core_distance: None,
            memif: None,
        };
        let compound = Case {
            kinds: vec!["firewall", "nat44", "firewall"],
            layout: None,
            hops: None,
        };
        let c = cell_calibration_args(&all, &nfs, &compound, 256).unwrap();
        let kinds: Vec<&str> = c.nfs.iter().map(|w| w.nf.kind()).collect();
        assert_eq!(kinds, ["firewall", "nat44"]);
        assert_eq!((c.sizes, c.repeat, c.pipeline), (vec![64, 512], 1, false));
        assert!(c.wired.is_empty());
        let piped = Case {
            layout: Some(Placement::Bi(2)),
            ..compound
        };
        assert!(cell_calibration_args(&all, &nfs, &piped, 64).unwrap().pipeline);
        let hops = Case {
            kinds: vec!["forwarder"; 2],
            layout: None,
            hops: Some("linux".into()),
        };
        let h = cell_calibration_args(&all, &nfs, &hops, 1518).unwrap();
        assert!(h.nfs.is_empty() && !h.pipeline);
        assert_eq!(h.wired, ["linux"]);
    }

    #[test]
    fn errors_are_summed_up_per_layout_kind_by_absolute_value() {
        let pts = [
            point("compound", 2.0),
            point("compound", -8.0),
            point("compound", 4.0),
            point("pipeline bi:2", -30.0),
            point("pipeline pbp:2", 10.0),
        ];
        let e = errors_of(&pts);
        assert_eq!(e.len(), 2);
        assert_eq!((e[0].layout.as_str(), e[0].cells), ("compound", 3));
        assert_eq!(e[0].median_abs_error_pct, 4.0);
        assert_eq!(e[0].worst_abs_error_pct, 8.0);
        assert!(e[0].worst.contains("-8.0 %"), "{}", e[0].worst);
        // An error that is the median of rounds says so, with the rounds'.
        let rounds = ModelPoint {
            round_errors_pct: vec![87.5, 2.7, 31.0],
            ..point("compound", 31.0)
        };
        let e = errors_of(&[rounds]);
        assert!(
            e[0].worst
                .ends_with("medians of 3 rounds; error +31.0 %, the median of the rounds' +87.5, +2.7, +31.0 %"),
            "{}",
            e[0].worst
        );
        let e = errors_of(&pts);
        assert_eq!((e[1].layout.as_str(), e[1].cells), ("pipeline", 2));
        assert_eq!(e[1].median_abs_error_pct, 20.0);
        assert_eq!(e[1].worst_abs_error_pct, 30.0);
        // Each cell's spread is half its error here: the medians follow.
        assert_eq!(e[0].median_measured_spread_pct, 2.0);
        assert_eq!(e[1].median_measured_spread_pct, 10.0);
        // Linux: its maximum, and what it delivers offered all the tester sends, each
        // a row of its own, after every maximum; flat chainings have no second row.
        let linux = |error_pct: f64, saturated: [f64; 2]| ModelPoint {
            predicted_saturated_runs: vec![saturated[0]],
            measured_saturated_runs: vec![saturated[1]],
            saturated_error_pct: Some((saturated[0] - saturated[1]) / saturated[1] * 100.0),
            ..point("linux", error_pct)
        };
        let mut pts = pts.to_vec();
        pts.extend([linux(1.0, [0.22, 0.2]), linux(-3.0, [0.5, 0.5]), point("veth", 0.5)]);
        let e = errors_of(&pts);
        let layouts: Vec<&str> = e.iter().map(|e| e.layout.as_str()).collect();
        assert_eq!(layouts, ["compound", "linux", "pipeline", "veth", "linux offered all"]);
        assert_eq!((e[1].cells, e[1].worst_abs_error_pct), (2, 3.0));
        assert_eq!(e[4].cells, 2);
        assert!(e[..4].iter().all(|e| e.counts_for_goal) && !e[4].counts_for_goal);
        assert!((e[4].worst_abs_error_pct - 10.0).abs() < 1e-9);
        assert!((e[4].median_abs_error_pct - 5.0).abs() < 1e-9);
        assert!(
            e[4].worst.contains("predicted 0.220 Mpps, measured 0.200 (+10.0 %)"),
            "{}",
            e[4].worst
        );
    }

    #[test]
    fn the_spread_is_the_median_absolute_deviation_in_percent() {
        assert_eq!(spread_pct(&[10.0]), 0.0);
        // Median 10; deviations 2, 0, 5: their median 2, 20 % of 10.
        assert_eq!(spread_pct(&[8.0, 10.0, 15.0]), 20.0);
        // One wild round moves it little: deviations 0, 0.5, 0.5, 0, 40 -> 0.5.
        assert!((spread_pct(&[10.0, 9.5, 10.5, 10.0, 50.0]) - 5.0).abs() < 1e-9);
    }
}
