//! A sweep: one parameter of an experiment over a list of values, each point run
//! several times (median reported, with the range), into one result set (schema
//! `sfclab.sweep/3`).

use serde::Serialize;
use sfclab_runtime::{Progress, RunReport, Stop};

use crate::settings::{self, Settings};
use crate::{ChainSource, Experiment, Machine, NfOwned};
use sfclab_measure::median;

/// Schema tag of a sweep result set.
pub const SWEEP_SCHEMA: &str = "sfclab.sweep/3";

/// A sweep before it runs: the chain, its overrides, the parameter and its values.
pub struct SweepPlan {
    pub source: ChainSource,
    pub overrides: Settings,
    /// A setting (named as its flag without `--`), or any name when the shorthand chain
    /// holds `{}` where each value goes.
    pub param: String,
    pub values: Vec<String>,
    /// Runs per point.
    pub repeat: usize,
}

impl SweepPlan {
    /// Each point's experiment, resolved (and so checked) before anything runs.
    pub fn resolve(&self) -> Result<Vec<(String, Experiment)>, String> {
        if self.values.is_empty() || self.repeat == 0 {
            return Err("need at least one value (--values) and one run per point (--repeat)".into());
        }
        self.values
            .iter()
            .map(|v| {
                self.point_source(v)
                    .and_then(|(source, overrides)| Experiment::load(&source, &overrides).map_err(|e| e.to_string()))
                    .map(|e| (v.clone(), e))
                    .map_err(|e| format!("{} = {v}: {e}", self.param))
            })
            .collect()
    }

    /// The chain and overrides of the point where `param` is `v`: a setting, parsed as
    /// its flag is (`--param batch --values 32,64` is `--batch 32`, then `--batch 64`),
    /// or a `{}` in the shorthand chain. A value that does not parse is an error naming
    /// the flag, never a fallback.
    fn point_source(&self, v: &str) -> Result<(ChainSource, Settings), String> {
        let keys = settings::keys_of::<Settings>();
        if keys.contains(&self.param) {
            let overrides = self
                .overrides
                .with(&self.param, v)
                .map_err(|e| format!("--values: {e}"))?;
            return Ok((self.source.clone(), overrides));
        }
        match &self.source {
            ChainSource::Shorthand(c) if c.contains("{}") => {
                Ok((ChainSource::Shorthand(c.replace("{}", v)), self.overrides.clone()))
            }
            _ => Err(format!(
                "--param `{}` is not a setting ({}), and --chain has no `{{}}` for its values",
                self.param,
                keys.join(", ")
            )),
        }
    }
}

/// Runs every point `repeat` times. Ctrl-C (`stop`) ends it after the current run; the
/// points finished are kept and the document is marked interrupted. Each run is a step
/// of `progress`.
pub fn sweep(
    plan: &SweepPlan,
    name: String,
    points: Vec<(String, Experiment)>,
    stop: Stop,
    progress: &mut Progress,
) -> Result<SweepDocument, String> {
    progress.plan(points.len() * plan.repeat);
    let mut done = Vec::new();
    'points: for (v, mut experiment) in points {
        experiment.stop_on(&stop);
        let mut reports = Vec::new();
        for _ in 0..plan.repeat {
            progress.working(&format!("{} = {v}", plan.param));
            match experiment.run().map(crate::Reports::into_measured) {
                // A run cut short by Ctrl-C is not a full measurement of its point.
                Ok(r) if r.interrupted => break 'points,
                Ok(r) => {
                    progress.finished(&format!("{} = {v}: {:.2} Mpps", plan.param, r.mpps));
                    reports.push(r);
                }
                Err(e) => return Err(format!("{} = {v}: {e}", plan.param)),
            }
            if stop.requested() {
                break 'points;
            }
        }
        done.push(point(&v, &experiment, reports));
    }
    Ok(SweepDocument {
        schema: SWEEP_SCHEMA,
        version: env!("CARGO_PKG_VERSION"),
        name,
        param: plan.param.clone(),
        repeat: plan.repeat,
        machine: Machine::read(),
        interrupted: stop.requested(),
        points: done,
    })
}

/// A sweep's result set (`sweep.json`).
#[derive(Serialize, schemars::JsonSchema)]
pub struct SweepDocument {
    /// Always `sfclab.sweep/3` for this layout.
    pub schema: &'static str,
    pub version: &'static str,
    pub name: String,
    /// The parameter varied.
    pub param: String,
    /// Runs per point.
    pub repeat: usize,
    pub machine: Machine,
    /// Stopped by Ctrl-C: the points finished are here, the rest are missing.
    pub interrupted: bool,
    pub points: Vec<SweepPoint>,
}

/// One point: the value, the median run's figures and the spread of all runs.
#[derive(Serialize, schemars::JsonSchema)]
pub struct SweepPoint {
    pub value: String,
    /// Median received Mpps of the runs, and each run's.
    pub mpps: f64,
    pub mpps_runs: Vec<f64>,
    pub mpps_min: f64,
    pub mpps_max: f64,
    /// The run closest to the median stands for the point: its figures follow.
    pub gbps_l1: f64,
    pub gbps_l2: f64,
    pub busy_cycles_per_packet: Option<f64>,
    pub latency_p50_ns: Option<f64>,
    pub latency_p99_ns: Option<f64>,
    pub latency_p999_ns: Option<f64>,
    /// Packets of the window's own traffic lost.
    pub window_lost: u64,
    /// Every run of the point conserved packets.
    pub conservation_holds: bool,
    pub chain_config: Vec<NfOwned>,
    pub report: RunReport,
}

/// One point from its runs.
pub fn point(value: &str, experiment: &Experiment, reports: Vec<RunReport>) -> SweepPoint {
    let mpps: Vec<f64> = reports.iter().map(|r| r.mpps).collect();
    let m = median(&mpps);
    let conservation_holds = reports.iter().all(|r| r.conservation.holds);
    let mid = reports
        .into_iter()
        .min_by(|a, b| (a.mpps - m).abs().total_cmp(&(b.mpps - m).abs()))
        .expect("at least one run");
    let lat = |f: fn(&sfclab_core::LatencySummary) -> f64| mid.latency.as_ref().map(f);
    SweepPoint {
        value: value.to_string(),
        mpps: m,
        mpps_min: mpps.iter().copied().fold(f64::INFINITY, f64::min),
        mpps_max: mpps.iter().copied().fold(0.0, f64::max),
        mpps_runs: mpps,
        gbps_l1: mid.gbps_l1,
        gbps_l2: mid.gbps_l2,
        busy_cycles_per_packet: mid.busy_cycles_per_packet,
        latency_p50_ns: lat(|l| l.p50_ns),
        latency_p99_ns: lat(|l| l.p99_ns),
        latency_p999_ns: lat(|l| l.p999_ns),
        window_lost: mid.window_loss.lost,
        conservation_holds,
        chain_config: NfOwned::of(experiment),
        report: mid,
    }
}

/// The values of `--values`: comma separated (`;` when a value has commas); for `size`,
/// `rfc2544` expands to RFC 2544's seven sizes.
pub fn values(param: &str, text: &str) -> Vec<String> {
    let sep = if text.contains(';') { ';' } else { ',' };
    text.split(sep)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .flat_map(|v| {
            if param == "size" && v.eq_ignore_ascii_case("rfc2544") {
                sfclab_traffic::sizes::RFC2544_SIZES
                    .iter()
                    .map(|s| s.to_string())
                    .collect()
            } else {
                vec![v]
            }
        })
        .collect()
}
