//! A throughput campaign around the search, as CSIT and NFVbench run one: whole searches
//! repeated with the median search reported per goal, and latency measured at fractions
//! of the rate found. Methodology only: the runs themselves come from a [`Trial`].

use serde::Serialize;

use crate::search::{SearchConfig, SearchResult, check_goal_order, search};
use crate::trial::{Trial, TrialResult};

/// Searches repeated: per goal, the result of the search whose throughput is the median;
/// every search's trials are kept.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RepeatedSearch {
    /// The median per goal (with all trials of all searches).
    pub result: SearchResult,
    /// Each search's relevant lower bound per goal, packets/s.
    pub per_search: Vec<Vec<Option<f64>>>,
}

/// Runs `repeat` whole searches (fewer when interrupted: those finished are kept).
/// `on_trial(search, trial)` sees every trial.
pub fn repeated_search(
    trial: &mut dyn Trial,
    cfg: &SearchConfig,
    repeat: usize,
    on_trial: &mut dyn FnMut(usize, &TrialResult),
) -> Result<RepeatedSearch, String> {
    if repeat == 0 {
        return Err("repeat: at least one search".into());
    }
    let mut runs = Vec::new();
    for k in 0..repeat {
        let r = search(trial, cfg, &mut |t| on_trial(k, t))?;
        let stop = r.interrupted;
        // An interrupted search's bounds are not its answer: keep it only if it is the
        // only one there is, marked as interrupted.
        if !stop || runs.is_empty() {
            runs.push(r);
        }
        if stop {
            runs.last_mut().expect("one search").interrupted = true;
            break;
        }
    }
    let per_search = runs
        .iter()
        .map(|r| r.goals.iter().map(|g| g.lower_pps).collect())
        .collect();
    let result = median_of(runs)?;
    Ok(RepeatedSearch { result, per_search })
}

/// One result from several searches: for each goal, the result of the search whose
/// throughput is the median (the lower median for an even count). Goal order survives:
/// if every search has PDR >= NDR, so do the medians.
pub fn median_of(mut runs: Vec<SearchResult>) -> Result<SearchResult, String> {
    if runs.len() == 1 {
        return Ok(runs.pop().expect("one search"));
    }
    let first = runs.first().ok_or("no search to combine")?;
    let goals = (0..first.goals.len())
        .map(|g| {
            let mut order: Vec<usize> = (0..runs.len()).collect();
            order.sort_by(|&a, &b| {
                let at = |i: usize| runs[i].goals[g].lower_pps.unwrap_or(0.0);
                at(a).total_cmp(&at(b))
            });
            runs[order[(order.len() - 1) / 2]].goals[g].clone()
        })
        .collect::<Vec<_>>();
    check_goal_order(&goals)?;
    let trials: Vec<TrialResult> = runs.iter().flat_map(|r| r.trials.iter().cloned()).collect();
    Ok(SearchResult {
        method: first.method,
        goals,
        trial_count: trials.len(),
        total_trial_s: runs.iter().map(|r| r.total_trial_s).sum(),
        invalid_trials: runs.iter().map(|r| r.invalid_trials).sum(),
        source_ceiling_pps: runs
            .iter()
            .filter_map(|r| r.source_ceiling_pps)
            .fold(None, |m: Option<f64>, c| Some(m.map_or(c, |m| m.min(c)))),
        interrupted: runs.iter().any(|r| r.interrupted),
        trials,
    })
}

/// One latency measurement to make after a search.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct LatencyLevel {
    pub label: String,
    /// Percent of the goal's throughput (0: the minimum rate).
    pub percent: f64,
    pub rate_pps: f64,
    /// The same traffic through no NF: the generator's and sink's own latency, to
    /// calibrate against (measured at the lowest level).
    pub empty_chain: bool,
}

/// Latency at `percents` of `base_pps` (CSIT measures at 0, 10, 50 and 90% of PDR), plus
/// the empty chain at the lowest level. No level runs below `probe_pps` (a trial needs
/// room for its probes) or `min_pps` (0%).
pub fn latency_plan(base_pps: f64, min_pps: f64, probe_pps: f64, percents: &[f64]) -> Vec<LatencyLevel> {
    if percents.is_empty() {
        return Vec::new();
    }
    let rate_at = |pct: f64| {
        let r = if pct <= 0.0 { min_pps } else { base_pps * pct / 100.0 };
        r.max(probe_pps)
    };
    let lowest = percents.iter().copied().fold(f64::INFINITY, f64::min);
    let mut plan: Vec<LatencyLevel> = percents
        .iter()
        .map(|&p| LatencyLevel {
            label: format!("{p}%"),
            percent: p,
            rate_pps: rate_at(p),
            empty_chain: false,
        })
        .collect();
    plan.push(LatencyLevel {
        label: "calibration (no NF)".into(),
        percent: lowest,
        rate_pps: rate_at(lowest),
        empty_chain: true,
    });
    plan
}

/// The trial that established goal `g`'s throughput: the last one at its relevant lower
/// bound (for a chain analysis of that trial, as NFVbench gives per hop).
pub fn establishing_trial(r: &SearchResult, g: usize) -> Option<usize> {
    let l = r.goals.get(g)?.lower_pps?;
    r.trials.iter().rposition(|t| t.valid && t.offered_pps == l)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::{Goal, Method};
    use crate::simulated::StallingDut;
    use std::time::Duration;

    fn cfg() -> SearchConfig {
        SearchConfig {
            method: Method::Mlr,
            goals: vec![Goal::ndr(), Goal::pdr(0.005)],
            min_pps: 1e4,
            max_pps: 20e6,
            resolution: 0.005,
            final_duration: Duration::from_secs(1),
            initial_duration: Duration::from_millis(125),
            preceding_targets: 2,
            max_trials: 400,
        }
    }

    #[test]
    fn repeated_searches_report_the_median_and_keep_every_trial() {
        let mut dut = StallingDut {
            capacity_pps: 5e6,
            stall_share: 0.3,
            stall_s: 0.01,
            queue: 1024.0,
            seed: 3,
            source_limit_pps: None,
        };
        let r = repeated_search(&mut dut, &cfg(), 3, &mut |_, _| {}).unwrap();
        assert_eq!(r.per_search.len(), 3);
        for g in 0..2 {
            let mut each: Vec<f64> = r.per_search.iter().map(|s| s[g].unwrap()).collect();
            each.sort_by(f64::total_cmp);
            assert_eq!(r.result.goals[g].lower_pps, Some(each[1]), "the median search");
        }
        assert_eq!(r.result.trial_count, r.result.trials.len());
        assert!(r.result.goals[0].lower_pps <= r.result.goals[1].lower_pps);
    }

    /// Ctrl-C after the first search: that search is kept, marked, and no other starts.
    #[test]
    fn an_interrupted_campaign_keeps_what_finished() {
        struct StopsAfter {
            inner: StallingDut,
            left: usize,
        }
        impl Trial for StopsAfter {
            fn run(&mut self, load: f64, d: Duration) -> Result<TrialResult, String> {
                if self.left == 0 {
                    return Err("interrupted".into());
                }
                self.left -= 1;
                self.inner.run(load, d)
            }
            fn interrupted(&self) -> bool {
                self.left == 0
            }
        }
        let inner = StallingDut {
            capacity_pps: 5e6,
            stall_share: 0.0,
            stall_s: 0.0,
            queue: 0.0,
            seed: 1,
            source_limit_pps: None,
        };
        let mut dut = StopsAfter { inner, left: 5 };
        let r = repeated_search(&mut dut, &cfg(), 3, &mut |_, _| {}).unwrap();
        assert!(r.result.interrupted);
        assert_eq!(r.per_search.len(), 1);
        assert_eq!(r.result.trial_count, 5, "every finished trial is kept");
    }

    #[test]
    fn latency_levels_follow_the_found_rate_and_calibrate_at_the_lowest() {
        let plan = latency_plan(8e6, 1e4, 1e4, &[0.0, 10.0, 90.0]);
        let rates: Vec<f64> = plan.iter().map(|l| l.rate_pps).collect();
        assert_eq!(rates, vec![1e4, 8e5, 7.2e6, 1e4]);
        assert!(plan[3].empty_chain && !plan[0].empty_chain);
        assert!(latency_plan(8e6, 1e4, 1e4, &[]).is_empty());
    }
}
