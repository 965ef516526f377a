//! An experiment as the device under test of an NDR/PDR search: the chain on its own
//! core(s), the generator on another as the tester, and each trial one paced run.

use sfclab_measure::{Goal, RepeatedSearch, SearchConfig, Trial, TrialResult, latency_plan, repeated_search};
use sfclab_runtime::{PipelineSettings, Placement, Progress, RunError, RunReport, Stop};
use sfclab_traffic::Rate;
use std::time::Duration;

use crate::{Chaining, Experiment, Ports};

/// Where the tester and the device under test run.
#[derive(Debug, Clone, serde::Serialize, schemars::JsonSchema)]
pub struct DutPlacement {
    /// The generator has a core of its own, as a tester is a separate machine.
    pub isolated: bool,
    pub generator_core: usize,
    pub chain_cores: Vec<usize>,
    /// `throughput`, or `mrr` when the generator shares the chain's core.
    pub measures: &'static str,
}

/// Places the generator on a core no stage uses. A compound chain becomes a one-stage
/// pipeline (its rx-queue stands for the NIC ring), so that a rate above the chain's
/// capacity overloads the chain and not the generator. Refused when no core is free,
/// unless `shared_core`.
pub fn isolate_dut(experiment: &mut Experiment, shared_core: bool) -> Result<DutPlacement, String> {
    use sfclab_runtime::placement::{allowed_cores, default_chain_core};
    let allowed = allowed_cores();
    // A chain in this process that runs compound becomes a one-stage pipeline; a chain
    // elsewhere (interfaces, namespaces) is placed on its core as one, for the record.
    let mut elsewhere = None;
    if experiment.pipeline().is_none() {
        let chain_core = experiment
            .settings
            .core
            .or_else(default_chain_core)
            .ok_or("this process may use no core")?;
        let mut run = experiment.settings.clone();
        run.core = None;
        run.pool_size = 0;
        let settings = PipelineSettings {
            run,
            placement: Placement::SCore,
            cores: vec![chain_core],
            ..Default::default()
        };
        if matches!(
            (&experiment.chaining, &experiment.ports),
            (Chaining::Compound, Ports::Memory)
        ) {
            experiment.chaining = Chaining::Pipeline { settings };
        } else {
            elsewhere = Some(settings);
        }
    }
    let p = match &mut experiment.chaining {
        Chaining::Pipeline { settings, .. } => settings,
        _ => elsewhere
            .as_mut()
            .ok_or("a chain outside a pipeline has no placement")?,
    };
    let chain_cores: Vec<usize> = p
        .placement
        .stages(experiment.nfs.len().max(1), &p.cores)
        .map_err(|e| format!("placement: {e}"))?
        .iter()
        .map(|s| s.core)
        .collect();
    let free = allowed.iter().copied().find(|c| !chain_cores.contains(c));
    let generator_core = match (p.generator_core, free) {
        (Some(g), _) => g,
        (None, Some(g)) => g,
        (None, None) if shared_core => chain_cores[0],
        (None, None) => {
            return Err(format!(
                "the chain uses every core this process may use ({}): a search needs the generator on \
                 a core of its own, as a tester is a separate machine (RFC 2544). Allow another core \
                 (taskset, cpuset), place the chain on fewer cores, or pass --shared-core to measure \
                 the generator and the chain together (reported as MRR, not throughput)",
                list(&allowed)
            ));
        }
    };
    p.generator_core = Some(generator_core);
    let isolated = !chain_cores.contains(&generator_core);
    Ok(DutPlacement {
        isolated,
        generator_core,
        chain_cores,
        measures: if isolated { "throughput" } else { "mrr" },
    })
}

fn list(cores: &[usize]) -> String {
    cores.iter().map(|c| c.to_string()).collect::<Vec<_>>().join(", ")
}

/// A loss goal from the command line: `ndr`, `pdr`, or a percentage.
pub fn parse_goal(s: &str) -> Result<Goal, String> {
    let t = s.trim().to_ascii_lowercase();
    match t.as_str() {
        "ndr" => Ok(Goal::ndr()),
        "pdr" => Ok(Goal::pdr(0.005)),
        _ => {
            let pct = t
                .strip_suffix('%')
                .ok_or_else(|| format!("`{s}` is not a loss goal: write ndr, pdr or a percentage like 0.1%"))?;
            let v: f64 = pct.trim().parse().map_err(|_| format!("`{s}` is not a percentage"))?;
            if !(0.0..100.0).contains(&v) {
                return Err(format!("`{s}`: a loss goal is 0% to below 100%"));
            }
            let name = if v == 0.0 {
                "NDR".to_string()
            } else {
                format!("PDR {v}%")
            };
            Ok(Goal {
                name,
                ..Goal::pdr(v / 100.0)
            })
        }
    }
}

/// A search's resolution from a percentage (`0.5%`), as a ratio.
pub fn parse_resolution(s: &str) -> Result<f64, String> {
    match s.trim().strip_suffix('%').map(str::parse::<f64>) {
        Some(Ok(v)) if v > 0.0 => Ok(v / 100.0),
        _ => Err(format!("`{s}`: write a percentage like 0.5%")),
    }
}

/// A search's lowest and highest rates (`--min-rate`, `--max-rate`), packets per
/// second at the mean `frame` size; no highest is infinite (measured first). An error
/// names the flag (`min-rate`, `max-rate`).
pub fn parse_rate_range(min: &str, max: Option<&str>, frame: f64) -> Result<(f64, f64), (&'static str, String)> {
    let min_pps = parse_rate_pps(min, frame).map_err(|e| ("min-rate", e))?;
    let max_pps = match max {
        Some(m) => parse_rate_pps(m, frame).map_err(|e| ("max-rate", e))?,
        None => f64::INFINITY,
    };
    Ok((min_pps, max_pps))
}

pub fn parse_rate_pps(s: &str, frame: f64) -> Result<f64, String> {
    s.parse::<sfclab_traffic::Rate>()?
        .pps(frame)
        .ok_or_else(|| format!("`{s}`: give a number here, not max"))
}

/// A trial on a real chain: the experiment at a paced rate for a duration, latency probes and
/// per-NF accounting off (they would cost the chain cycles), counts from the report.
pub struct ChainTrial {
    pub experiment: Experiment,
    /// Every report, for the record.
    pub reports: Vec<RunReport>,
    /// Ctrl-C: no further trial starts, the current one ends early and is not counted.
    pub stop: Stop,
}

impl ChainTrial {
    /// One run at `offered_pps` with latency probes at `probe_pps`, for latency at a load.
    /// `empty_chain` runs the same traffic through no NF: the generator's and sink's own
    /// latency, to calibrate against.
    pub fn latency_run(
        &self,
        offered_pps: f64,
        duration: Duration,
        probe_pps: f64,
        empty_chain: bool,
    ) -> Result<RunReport, String> {
        let mut experiment = self.experiment.as_trial(Rate::Pps(offered_pps), probe_pps, duration);
        if empty_chain {
            experiment.nfs.clear();
            experiment.hops.clear();
            experiment.wiring = None;
            if let crate::Chaining::Pipeline { settings, .. } = &mut experiment.chaining {
                settings.placement = sfclab_runtime::Placement::SCore;
            }
        }
        experiment.stop_on(&self.stop);
        experiment
            .run()
            .map(crate::Reports::into_measured)
            .map_err(|e| e.to_string())
    }
}

impl Trial for ChainTrial {
    fn interrupted(&self) -> bool {
        self.stop.requested()
    }

    fn run(&mut self, offered_pps: f64, duration: Duration) -> Result<TrialResult, String> {
        if self.interrupted() {
            return Err(format!("interrupted by Ctrl-C after {} trials", self.reports.len()));
        }
        let mut experiment = self.experiment.as_trial(Rate::Pps(offered_pps), 0.0, duration);
        experiment.stop_on(&self.stop);
        let r = experiment.run().map_err(|e| e.to_string())?.into_measured();
        if self.interrupted() {
            return Err(format!("interrupted by Ctrl-C after {} trials", self.reports.len()));
        }
        // The window's own traffic, counted after the drain: exact in every runtime, and
        // free of warm-up traffic (validity and loss over the same packets and time).
        let w = r.window_loss;
        // What a tester's transmit refused never reached the device: not its loss, and
        // the trial did not offer its rate (the offered count falls short, so invalid).
        let mut t = TrialResult::new(offered_pps, r.duration_s, w.sent - r.not_offered, w.received);
        // A generator on a core of its own says how busy it was: one with time to spare
        // whose pacer skipped the shortfall was stalled, not at its speed (a VM's vCPU
        // away for milliseconds), and the trial counts, as a hardware tester's would.
        if let Some(generator) = r.cores.iter().find(|c| c.tasks == ["generator"]) {
            t.count_despite_stalls(r.pacing_behind, generator.busy_share);
        }
        self.reports.push(r);
        Ok(t)
    }
}

/// What a search is asked to do beside its experiment.
pub struct SearchPlan {
    /// Goals, rates, durations; `max_pps` infinite: what the generator reaches against
    /// the chain, measured first.
    pub config: SearchConfig,
    /// Whole searches; each goal reports the median search's result.
    pub repeat: usize,
    /// Latency afterwards at these percentages of the last goal's rate (0: the minimum
    /// rate), plus an empty chain at the lowest level; empty skips it.
    pub latency_at_percent: Vec<f64>,
    /// Let the generator share the chain's core when no other is allowed (MRR).
    pub shared_core: bool,
}

/// A trial of search `search` (from 0) of `repeat`, in a line: its rate, window, loss.
fn trial_line(search: usize, repeat: usize, t: &TrialResult) -> String {
    format!(
        "search {}/{repeat}: {:.3} Mpps for {:.2} s: loss {:.5}%{}",
        search + 1,
        t.offered_pps / 1e6,
        t.duration_s,
        t.loss_ratio * 100.0,
        if t.valid {
            ""
        } else {
            " (invalid: the generator fell short)"
        }
    )
}

/// Why a search did not finish.
#[derive(Debug)]
pub enum SearchError {
    /// The experiment or the plan cannot be searched (nothing ran).
    Invalid(String),
    /// A run failed.
    Failed(String),
}

/// A run's bad input is the search's; its other failures are the run's.
impl From<RunError> for SearchError {
    fn from(e: RunError) -> SearchError {
        if e.is_bad_input() {
            SearchError::Invalid(e.to_string())
        } else {
            SearchError::Failed(e.to_string())
        }
    }
}

/// Searches `experiment` (NDR/PDR per the plan's goals) with the chain as the device under
/// test and the generator as its tester on a core of its own, then measures latency at
/// fractions of the last goal's rate. `stop` (Ctrl-C) ends it at the next trial; what
/// finished is returned, marked interrupted. Each trial is a step of `progress` (planned
/// once the maximum rate is known); a latency level that cannot be measured, a warning
/// (the rest are skipped).
pub fn search(
    mut experiment: Experiment,
    plan: SearchPlan,
    stop: Stop,
    progress: &mut Progress,
) -> Result<SearchDocument, SearchError> {
    if experiment.io.replay.as_ref().is_some_and(|r| r.at_file_timestamps) {
        return Err(SearchError::Invalid(
            "--replay-timestamps: a search offers each trial at its own rate; drop it to replay the capture at those rates".into(),
        ));
    }
    let SearchPlan {
        config: mut cfg,
        repeat,
        latency_at_percent: percents,
        shared_core,
    } = plan;
    if repeat == 0 {
        return Err(SearchError::Invalid("--repeat: at least 1".into()));
    }
    let dut = isolate_dut(&mut experiment, shared_core).map_err(SearchError::Invalid)?;
    experiment.stop_on(&stop);
    let experiment = experiment;
    let mut trial = ChainTrial {
        experiment: experiment.clone(),
        reports: Vec::new(),
        stop: stop.clone(),
    };
    if cfg.max_pps.is_infinite() {
        // Every valid trial is bounded by what the generator reaches against the chain:
        // the best of three runs, as a stalled vCPU only ever makes one look slower (one
        // run stalled for half its window capped a whole search at half the rate).
        let probe = experiment.as_trial(Rate::Max, 0.0, cfg.initial_duration.max(Duration::from_millis(200)));
        let mut reach: f64 = 0.0;
        for _ in 0..3 {
            // Pacing costs the generator a little: its paced ceiling is below this. What
            // a tester's transmit refused was never offered.
            let r = probe.run()?.into_measured();
            let offered = r.window_loss.sent - r.not_offered;
            reach = reach.max(offered as f64 / r.duration_s.max(1e-9));
        }
        cfg.max_pps = reach * 0.95;
    }
    cfg.validate()
        .map_err(|(k, r)| SearchError::Invalid(format!("{k}: {r}")))?;
    progress.plan(cfg.expected_trials() * repeat);
    progress.working("searching");
    let RepeatedSearch { result, per_search } = repeated_search(&mut trial, &cfg, repeat, &mut |search, trial| {
        progress.finished(&trial_line(search, repeat, trial))
    })
    .map_err(SearchError::Failed)?;

    // Latency at fractions of the last goal's rate, unless stopped.
    let mut latency = Vec::new();
    let base = result.goals.last().and_then(|g| g.lower_pps);
    let probe_pps = if experiment.traffic.probe_pps > 0.0 {
        experiment.traffic.probe_pps
    } else {
        10_000.0
    };
    if let (Some(base), false) = (base, result.interrupted) {
        for level in latency_plan(base, cfg.min_pps, probe_pps, &percents) {
            if stop.requested() {
                break;
            }
            match trial.latency_run(level.rate_pps, cfg.final_duration, probe_pps, level.empty_chain) {
                Ok(rep) => latency.push(LatencyMeasured {
                    level,
                    latency: rep.latency,
                }),
                Err(error) => {
                    progress.warn(&format!("latency at {}: {error}", level.label));
                    break;
                }
            }
        }
    }
    let interrupted = result.interrupted || stop.requested();
    // The places of the trial that established each goal's rate (NFVbench's chain analysis).
    let chain_analysis = (0..result.goals.len())
        .map(|g| GoalAnalysis {
            goal: result.goals[g].goal.name.clone(),
            rate_pps: result.goals[g].lower_pps,
            places: sfclab_measure::establishing_trial(&result, g)
                .and_then(|i| trial.reports.get(i))
                .map(|rep| rep.places.clone()),
        })
        .collect();
    Ok(SearchDocument {
        schema: SEARCH_SCHEMA,
        version: env!("CARGO_PKG_VERSION"),
        machine: crate::Machine::read(),
        name: experiment.name.clone(),
        traffic: experiment.traffic.clone(),
        chain_config: crate::NfOwned::of(&experiment),
        frame_size_mean: experiment.traffic.sizes.mean(),
        dut,
        interrupted,
        search: result,
        repetitions: per_search,
        chain_analysis,
        latency,
    })
}

/// Schema tag of `search --json`.
pub const SEARCH_SCHEMA: &str = "sfclab.search/3";

/// The places of the trial that established a goal's rate.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct GoalAnalysis {
    pub goal: String,
    pub rate_pps: Option<f64>,
    pub places: Option<Vec<sfclab_runtime::PlaceReport>>,
}

/// Latency measured at one level of the plan.
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct LatencyMeasured {
    #[serde(flatten)]
    pub level: sfclab_measure::LatencyLevel,
    pub latency: Option<sfclab_core::LatencySummary>,
}

/// The JSON document of a search (`sfclab search --json`, schema `sfclab.search/3`).
#[derive(serde::Serialize, schemars::JsonSchema)]
pub struct SearchDocument {
    /// Always `sfclab.search/3` for this layout.
    pub schema: &'static str,
    pub version: &'static str,
    pub machine: crate::Machine,
    pub name: String,
    pub traffic: sfclab_traffic::GeneratorConfig,
    pub chain_config: Vec<crate::NfOwned>,
    pub frame_size_mean: f64,
    /// Where the generator (the tester) and the chain (the DUT) ran.
    pub dut: DutPlacement,
    /// Stopped by Ctrl-C: what finished is here, the rest is missing.
    pub interrupted: bool,
    /// The result: per goal the median search's, with every trial of every search.
    pub search: sfclab_measure::SearchResult,
    /// Each search's rate per goal (packets/s), in goal order.
    pub repetitions: Vec<Vec<Option<f64>>>,
    pub chain_analysis: Vec<GoalAnalysis>,
    pub latency: Vec<LatencyMeasured>,
}
