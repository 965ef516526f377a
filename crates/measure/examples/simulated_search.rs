//! Runs sfclab's search on a simulated DUT described as JSON on stdin, prints the result
//! as JSON: how `reference/compare_with_mlrsearch.py` puts sfclab beside the reference.
//!
//! Input: `{"dut": StallingDut, "method": "mlr", "goals": [{"name", "loss_ratio",
//! "exceed_ratio", "duration_sum_s"}], "min_pps", "max_pps", "resolution",
//! "initial_duration_s", "final_duration_s", "max_trials"}`.

use serde::Deserialize;
use sfclab_measure::search::load_estimates;
use sfclab_measure::simulated::StallingDut;
use sfclab_measure::{Goal, Method, SearchConfig, TrialResult, search};
use std::time::Duration;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Input {
    dut: StallingDut,
    method: String,
    goals: Vec<GoalInput>,
    min_pps: f64,
    max_pps: f64,
    resolution: f64,
    initial_duration_s: f64,
    final_duration_s: f64,
    max_trials: usize,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GoalInput {
    name: String,
    loss_ratio: f64,
    exceed_ratio: f64,
    duration_sum_s: f64,
}

/// One case of the decision-rule check: trials at one load and a target.
#[derive(Deserialize)]
struct EstimatesCase {
    target: EstimatesTarget,
    trials: Vec<EstimatesTrial>,
    #[allow(dead_code)]
    estimates: serde_json::Value,
}

#[derive(Deserialize)]
struct EstimatesTarget {
    loss_ratio: f64,
    exceed_ratio: f64,
    trial_duration: f64,
    duration_sum: f64,
}

#[derive(Deserialize)]
struct EstimatesTrial {
    intended_duration_s: f64,
    duration_s: f64,
    loss_ratio: f64,
}

/// `--estimates`: a list of cases on stdin, their (optimistic, pessimistic) on stdout.
fn estimates() -> Result<(), String> {
    let cases: Vec<EstimatesCase> = serde_json::from_reader(std::io::stdin()).map_err(|e| format!("stdin: {e}"))?;
    let out: Vec<(bool, bool)> = cases
        .iter()
        .map(|c| {
            let trials: Vec<TrialResult> = c
                .trials
                .iter()
                .map(|t| {
                    // A valid trial at 1000 packets a second; the decision uses the
                    // loss ratio itself, set exactly as the case gives it.
                    let sent = (1000.0 * t.duration_s).round() as u64;
                    let mut r = TrialResult::new(1000.0, t.duration_s, sent, sent);
                    r.intended_duration_s = t.intended_duration_s;
                    r.loss_ratio = t.loss_ratio;
                    r
                })
                .collect();
            let t = &c.target;
            load_estimates(&trials, t.loss_ratio, t.exceed_ratio, t.trial_duration, t.duration_sum)
        })
        .collect();
    println!("{}", serde_json::to_string(&out).map_err(|e| e.to_string())?);
    Ok(())
}

fn main() -> Result<(), String> {
    if std::env::args().nth(1).as_deref() == Some("--estimates") {
        return estimates();
    }
    let input: Input = serde_json::from_reader(std::io::stdin()).map_err(|e| format!("stdin: {e}"))?;
    let cfg = SearchConfig {
        method: input.method.parse::<Method>()?,
        goals: input
            .goals
            .into_iter()
            .map(|g| Goal {
                name: g.name,
                loss_ratio: g.loss_ratio,
                exceed_ratio: g.exceed_ratio,
                duration_sum_s: g.duration_sum_s,
            })
            .collect(),
        min_pps: input.min_pps,
        max_pps: input.max_pps,
        resolution: input.resolution,
        initial_duration: Duration::from_secs_f64(input.initial_duration_s),
        final_duration: Duration::from_secs_f64(input.final_duration_s),
        preceding_targets: 2,
        max_trials: input.max_trials,
    };
    let mut dut = input.dut;
    let r = search(&mut dut, &cfg, &mut |_| {})?;
    println!("{}", serde_json::to_string(&r).map_err(|e| e.to_string())?);
    Ok(())
}
