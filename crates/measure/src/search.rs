//! Throughput searches: the highest offered rate whose trials meet a loss goal.
//!
//! - `Method::Binary` is RFC 2544's: for each goal on its own, a trial at the maximum
//!   rate, then halving the interval with full-length trials until it is narrower than
//!   the resolution.
//! - `Method::Mlr` follows the ideas of MLRsearch (draft-ietf-bmwg-mlrsearch, FD.io
//!   CSIT): every trial serves every goal (a load is a lower bound for the goals whose
//!   loss it meets and an upper bound for the others); the first trial at the maximum
//!   rate gives the maximum receive rate, the first guess; the search runs in phases of
//!   doubling trial duration and halving width, so most of the narrowing is done with
//!   short trials and only the last phase uses the full duration; in the last phase a
//!   load is classified from the sum of its trials' durations, allowing a share
//!   (`exceed_ratio`) of that time to exceed the loss goal, which tolerates a noisy
//!   trial without letting one decide alone.
//!
//! A goal's result is its conditional throughput: the highest load classified as a
//! lower bound below the lowest load classified as an upper bound, and the two bounds.
//! Invalid trials (the generator did not offer the rate) never count as passing.

use serde::Serialize;
use std::time::Duration;

use crate::trial::{Trial, TrialResult};

/// A loss goal.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Goal {
    /// `NDR`, `PDR`, or any label.
    pub name: String,
    /// Highest tolerated loss ratio (0.00001 is 0.001%).
    pub loss_ratio: f64,
    /// MLR: the share of a load's trial time that may exceed the loss goal.
    pub exceed_ratio: f64,
    /// MLR: trial time a load needs in the last phase before it is classified.
    pub duration_sum_s: f64,
}

impl Goal {
    /// No drop rate: zero loss.
    pub fn ndr() -> Goal {
        Goal {
            name: "NDR".into(),
            loss_ratio: 0.0,
            exceed_ratio: 0.0,
            duration_sum_s: 0.0,
        }
    }

    /// Partial drop rate at `loss_ratio` (default goal in seed 001: 0.001%).
    pub fn pdr(loss_ratio: f64) -> Goal {
        Goal {
            name: "PDR".into(),
            loss_ratio,
            exceed_ratio: 0.0,
            duration_sum_s: 0.0,
        }
    }

    fn passes(&self, t: &TrialResult) -> bool {
        t.valid && t.loss_ratio <= self.loss_ratio
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    Binary,
    Mlr,
}

impl std::str::FromStr for Method {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "binary" | "rfc2544" => Ok(Method::Binary),
            "mlr" | "mlrsearch" => Ok(Method::Mlr),
            _ => Err(format!("`{s}` is not a search method: write mlr or binary")),
        }
    }
}

#[derive(Debug, Clone)]
pub struct SearchConfig {
    pub method: Method,
    pub goals: Vec<Goal>,
    pub min_pps: f64,
    pub max_pps: f64,
    /// Relative width at which a goal's search ends (0.005 is 0.5%).
    pub resolution: f64,
    pub final_duration: Duration,
    /// MLR: duration of the first phase's trials.
    pub initial_duration: Duration,
    /// Give up after this many trials (the result then says how far it got).
    pub max_trials: usize,
}

impl SearchConfig {
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.goals.is_empty() {
            return Err(("goals", "give at least one loss goal".into()));
        }
        if let Some(g) = self.goals.iter().find(|g| !(0.0..1.0).contains(&g.loss_ratio)) {
            return Err((
                "goals",
                format!("loss ratio {} of {} is outside 0..1", g.loss_ratio, g.name),
            ));
        }
        if let Some(g) = self.goals.iter().find(|g| !(0.0..1.0).contains(&g.exceed_ratio)) {
            return Err((
                "exceed_ratio",
                format!("{} of {} is outside 0..1", g.exceed_ratio, g.name),
            ));
        }
        if !(self.min_pps > 0.0 && self.max_pps > self.min_pps && self.max_pps.is_finite()) {
            return Err((
                "max_rate",
                format!("need 0 < min ({}) < max ({}) packets/s", self.min_pps, self.max_pps),
            ));
        }
        if !(self.resolution > 0.0 && self.resolution < 0.5) {
            return Err(("resolution", format!("{} is outside (0, 0.5)", self.resolution)));
        }
        if self.final_duration.is_zero()
            || self.initial_duration.is_zero()
            || self.initial_duration > self.final_duration
        {
            return Err((
                "duration",
                "need 0 < initial trial duration <= final trial duration".into(),
            ));
        }
        if self.max_trials == 0 {
            return Err(("max_trials", "must be at least 1".into()));
        }
        Ok(())
    }
}

/// One goal's answer.
#[derive(Debug, Clone, Serialize)]
pub struct GoalResult {
    pub goal: Goal,
    /// Conditional throughput: the highest rate that met the goal below the lowest that
    /// did not. `None` if even the minimum rate failed.
    pub lower_pps: Option<f64>,
    /// The lowest rate that failed the goal; `None` if the maximum rate met it.
    pub upper_pps: Option<f64>,
    /// `(upper - lower) / upper` at the end; at most the resolution unless cut short.
    pub relative_width: f64,
    pub converged: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct SearchResult {
    pub method: Method,
    pub goals: Vec<GoalResult>,
    pub trials: Vec<TrialResult>,
    pub trial_count: usize,
    /// Sum of all trial durations, seconds.
    pub total_trial_s: f64,
    pub invalid_trials: usize,
}

/// Runs the search. `on_trial` sees every trial as it completes (progress, logs).
pub fn search(
    trial: &mut dyn Trial,
    cfg: &SearchConfig,
    on_trial: &mut dyn FnMut(&TrialResult),
) -> Result<SearchResult, String> {
    cfg.validate().map_err(|(k, r)| format!("{k}: {r}"))?;
    let mut log = TrialLog {
        trial,
        trials: Vec::new(),
        on_trial,
        limit: cfg.max_trials,
    };
    let goals = match cfg.method {
        Method::Binary => binary(&mut log, cfg)?,
        Method::Mlr => mlr(&mut log, cfg)?,
    };
    let trials = log.trials;
    Ok(SearchResult {
        method: cfg.method,
        goals,
        trial_count: trials.len(),
        total_trial_s: trials.iter().map(|t| t.duration_s).sum(),
        invalid_trials: trials.iter().filter(|t| !t.valid).count(),
        trials,
    })
}

struct TrialLog<'a> {
    trial: &'a mut dyn Trial,
    trials: Vec<TrialResult>,
    on_trial: &'a mut dyn FnMut(&TrialResult),
    limit: usize,
}

impl TrialLog<'_> {
    fn exhausted(&self) -> bool {
        self.trials.len() >= self.limit
    }

    fn run(&mut self, load: f64, duration: Duration) -> Result<TrialResult, String> {
        let t = self.trial.run(load, duration)?;
        // Keep the load exactly as asked, so trials at one load are found again.
        let t = TrialResult { offered_pps: load, ..t };
        (self.on_trial)(&t);
        self.trials.push(t.clone());
        Ok(t)
    }
}

fn width(lower: f64, upper: f64) -> f64 {
    (upper - lower) / upper
}

fn result(goal: &Goal, lower: Option<f64>, upper: Option<f64>, cfg: &SearchConfig) -> GoalResult {
    let relative_width = match (lower, upper) {
        (Some(l), Some(u)) => width(l, u),
        (Some(_), None) | (None, Some(_)) => 0.0,
        (None, None) => 1.0,
    };
    let converged = match (lower, upper) {
        (Some(l), None) => l >= cfg.max_pps,
        (None, Some(u)) => u <= cfg.min_pps,
        (Some(_), Some(_)) => relative_width <= cfg.resolution,
        (None, None) => false,
    };
    GoalResult {
        goal: goal.clone(),
        lower_pps: lower,
        upper_pps: upper,
        relative_width,
        converged,
    }
}

/// RFC 2544: each goal on its own, full-length trials, halving the interval.
fn binary(log: &mut TrialLog, cfg: &SearchConfig) -> Result<Vec<GoalResult>, String> {
    let mut out = Vec::new();
    for goal in &cfg.goals {
        let t = log.run(cfg.max_pps, cfg.final_duration)?;
        if goal.passes(&t) {
            out.push(result(goal, Some(cfg.max_pps), None, cfg));
            continue;
        }
        let (mut lo, mut hi) = (cfg.min_pps, cfg.max_pps);
        let mut lower = None;
        while width(lo, hi) > cfg.resolution && !log.exhausted() {
            let mid = (lo + hi) / 2.0;
            if goal.passes(&log.run(mid, cfg.final_duration)?) {
                lo = mid;
                lower = Some(mid);
            } else {
                hi = mid;
            }
        }
        out.push(result(goal, lower, Some(hi), cfg));
    }
    Ok(out)
}

/// How the trials at one load classify it for one goal.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Class {
    Lower,
    Upper,
    Undecided,
}

/// Classifies `load` for `goal` from the trials at it that last at least `min_duration`,
/// against a needed trial time of `needed` seconds.
fn classify(trials: &[TrialResult], load: f64, goal: &Goal, min_duration: f64, needed: f64) -> Class {
    let (mut good, mut bad) = (0.0, 0.0);
    for t in trials
        .iter()
        .filter(|t| t.offered_pps == load && t.duration_s >= min_duration * 0.999)
    {
        if goal.passes(t) {
            good += t.duration_s;
        } else {
            bad += t.duration_s;
        }
    }
    // A small tolerance: durations are measured, not exact.
    let eps = 1e-9 + needed * 1e-3;
    // More failing time than the goal allows: with no allowance, any failure.
    let allowed = if goal.exceed_ratio > 0.0 {
        goal.exceed_ratio * needed + eps
    } else {
        0.0
    };
    if bad > allowed {
        Class::Upper
    } else if good + eps >= (1.0 - goal.exceed_ratio) * needed {
        Class::Lower
    } else {
        Class::Undecided
    }
}

/// MLRsearch-style: phases of doubling duration and halving width; trials shared by goals.
fn mlr(log: &mut TrialLog, cfg: &SearchConfig) -> Result<Vec<GoalResult>, String> {
    let final_s = cfg.final_duration.as_secs_f64();
    let mut phases = Vec::new();
    let mut d = cfg.initial_duration.as_secs_f64();
    while d < final_s * 0.999 {
        phases.push(d);
        d *= 2.0;
    }
    phases.push(final_s);
    let last = phases.len() - 1;

    // The maximum receive rate at the maximum load is the first guess for every goal.
    let first = log.run(cfg.max_pps, Duration::from_secs_f64(phases[0]))?;
    let mrr = first.received_pps().clamp(cfg.min_pps, cfg.max_pps);

    let mut hints: Vec<(Option<f64>, Option<f64>)> = vec![(None, None); cfg.goals.len()];
    let mut bounds: Vec<(Option<f64>, Option<f64>)> = vec![(None, None); cfg.goals.len()];
    for (p, &duration) in phases.iter().enumerate() {
        // Earlier phases stop at a coarser width: 2^(phases left) times the resolution.
        let phase_width = (cfg.resolution * 2f64.powi((last - p) as i32)).min(0.5);
        for (g, goal) in cfg.goals.iter().enumerate() {
            let needed = if p == last {
                goal.duration_sum_s.max(duration)
            } else {
                duration
            };
            let mut tried_mrr = false;
            // External search widens its step geometrically (as MLRsearch does), so a
            // bound far from the guess is found in a few trials, not dozens.
            let (mut step_up, mut step_down) = (2.0 * phase_width, 4.0 * phase_width);
            loop {
                let measured: Vec<f64> = {
                    let mut l: Vec<f64> = log
                        .trials
                        .iter()
                        .filter(|t| t.duration_s >= duration * 0.999)
                        .map(|t| t.offered_pps)
                        .collect();
                    l.sort_by(f64::total_cmp);
                    l.dedup();
                    l
                };
                let mut upper: Option<f64> = None;
                let mut undecided: Option<f64> = None;
                let classes: Vec<(f64, Class)> = measured
                    .iter()
                    .map(|&l| (l, classify(&log.trials, l, goal, duration, needed)))
                    .collect();
                for &(l, c) in &classes {
                    match c {
                        Class::Upper => upper = Some(upper.map_or(l, |u: f64| u.min(l))),
                        Class::Undecided => undecided = undecided.or(Some(l)),
                        Class::Lower => {}
                    }
                }
                let lower = classes
                    .iter()
                    .filter(|&&(l, c)| c == Class::Lower && upper.is_none_or(|u| l < u))
                    .map(|&(l, _)| l)
                    .fold(None, |m: Option<f64>, l| Some(m.map_or(l, |m| m.max(l))));
                bounds[g] = (lower, upper);
                if log.exhausted() {
                    break;
                }
                // A load that needs more trial time gets it first.
                if let Some(l) = undecided {
                    log.run(l, Duration::from_secs_f64(duration))?;
                    continue;
                }
                let next = match (lower, upper) {
                    (Some(l), _) if l >= cfg.max_pps => None,
                    (_, Some(u)) if u <= cfg.min_pps && lower.is_none() => None,
                    (Some(l), Some(u)) if width(l, u) <= phase_width => None,
                    (Some(l), Some(u)) => Some((l + u) / 2.0),
                    // No upper bound in this phase: the last phase's, else above the lower.
                    (Some(l), None) => Some(hints[g].1.filter(|&h| h > l).unwrap_or_else(|| {
                        let next = (l * (1.0 + step_up)).min(cfg.max_pps);
                        step_up *= 2.0;
                        next
                    })),
                    (None, Some(u)) => {
                        let guess = hints[g].0.filter(|&h| h < u).or_else(|| {
                            (!tried_mrr && mrr < u).then(|| {
                                tried_mrr = true;
                                mrr * (1.0 - goal.loss_ratio)
                            })
                        });
                        let next = guess.unwrap_or_else(|| {
                            let next = u * (1.0 - step_down.min(0.5));
                            step_down *= 2.0;
                            next
                        });
                        Some(next.max(cfg.min_pps))
                    }
                    (None, None) => Some(hints[g].0.unwrap_or(cfg.max_pps)),
                };
                match next {
                    None => break,
                    Some(load) => {
                        log.run(load, Duration::from_secs_f64(duration))?;
                    }
                }
            }
            hints[g] = bounds[g];
        }
    }
    Ok(cfg
        .goals
        .iter()
        .zip(&bounds)
        .map(|(goal, &(l, u))| result(goal, l, u, cfg))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chain with a known loss curve: no loss up to `capacity`, then the excess is lost,
    /// plus optional extra loss in a band (non-monotonic) and seeded noise.
    struct Sim {
        capacity: f64,
        spike: Option<(f64, f64, f64)>,
        noise: f64,
        rng: u64,
        /// Highest rate the simulated generator can offer.
        source_limit: f64,
    }

    impl Sim {
        fn new(capacity: f64) -> Sim {
            Sim {
                capacity,
                spike: None,
                noise: 0.0,
                rng: 7,
                source_limit: f64::INFINITY,
            }
        }
    }

    impl Trial for Sim {
        fn run(&mut self, offered: f64, duration: Duration) -> Result<TrialResult, String> {
            let d = duration.as_secs_f64();
            let rate = offered.min(self.source_limit);
            let sent = (rate * d).round() as u64;
            let mut loss = if rate > self.capacity {
                (rate - self.capacity) / rate
            } else {
                0.0
            };
            if let Some((_, _, extra)) = self.spike.filter(|&(a, b, _)| rate >= a && rate <= b) {
                loss += extra;
            }
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            if (self.rng % 1000) as f64 / 1000.0 < self.noise {
                loss += 1e-4;
            }
            let received = ((sent as f64) * (1.0 - loss.min(1.0))).floor() as u64;
            Ok(TrialResult::new(offered, d, sent, received))
        }
    }

    fn cfg(method: Method) -> SearchConfig {
        SearchConfig {
            method,
            goals: vec![Goal::ndr(), Goal::pdr(1e-5)],
            min_pps: 1e4,
            max_pps: 100e6,
            resolution: 0.005,
            final_duration: Duration::from_secs(2),
            initial_duration: Duration::from_millis(125),
            max_trials: 200,
        }
    }

    fn check(r: &SearchResult, capacity: f64, resolution: f64) {
        for g in &r.goals {
            let l = g.lower_pps.expect("a rate meets the goal");
            let u = g.upper_pps.expect("the maximum fails");
            assert!(g.converged, "{g:?}");
            // The true rate at which the goal stops being met.
            let truth = capacity / (1.0 - g.goal.loss_ratio);
            assert!(
                l <= truth * 1.000001 && u >= truth * 0.999999,
                "{}: [{l}, {u}] misses {truth}",
                g.goal.name
            );
            assert!((u - l) / u <= resolution + 1e-12);
        }
    }

    #[test]
    fn both_methods_find_ndr_and_pdr_within_resolution() {
        for method in [Method::Binary, Method::Mlr] {
            for capacity in [1e6, 12.345e6, 77e6] {
                let r = search(&mut Sim::new(capacity), &cfg(method), &mut |_| {}).unwrap();
                check(&r, capacity, 0.005);
            }
        }
    }

    #[test]
    fn mlr_needs_fewer_trials_and_less_trial_time_than_binary() {
        for capacity in [3e6, 42e6, 90e6] {
            let b = search(&mut Sim::new(capacity), &cfg(Method::Binary), &mut |_| {}).unwrap();
            let m = search(&mut Sim::new(capacity), &cfg(Method::Mlr), &mut |_| {}).unwrap();
            eprintln!(
                "capacity {capacity}: MLR {} trials {:.2} s, binary {} trials {:.2} s",
                m.trial_count, m.total_trial_s, b.trial_count, b.total_trial_s
            );
            assert!(
                m.total_trial_s < b.total_trial_s,
                "capacity {capacity}: MLR {} s vs binary {} s",
                m.total_trial_s,
                b.total_trial_s
            );
            assert!(m.trial_count < b.trial_count * 2, "MLR trials stay in proportion");
        }
    }

    #[test]
    fn a_chain_that_never_loses_reports_the_maximum() {
        let r = search(&mut Sim::new(1e12), &cfg(Method::Mlr), &mut |_| {}).unwrap();
        for g in &r.goals {
            assert_eq!((g.lower_pps, g.upper_pps), (Some(100e6), None));
            assert!(g.converged);
        }
        let r = search(&mut Sim::new(1e12), &cfg(Method::Binary), &mut |_| {}).unwrap();
        assert_eq!(r.trial_count, 2, "one trial at the maximum per goal");
    }

    #[test]
    fn non_monotonic_loss_ends_below_the_lowest_failing_load() {
        // A loss band well below capacity: the conditional throughput must sit under it
        // if any trial landed in it, and never above a measured failure.
        let mut sim = Sim::new(50e6);
        sim.spike = Some((20e6, 22e6, 0.01));
        let r = search(&mut sim, &cfg(Method::Mlr), &mut |_| {}).unwrap();
        for g in &r.goals {
            let (l, u) = (g.lower_pps.unwrap(), g.upper_pps.unwrap());
            assert!(l < u);
            let failing_below_lower = r
                .trials
                .iter()
                .filter(|t| t.offered_pps < l && t.duration_s >= 1.999 && !g.goal.passes(t))
                .count();
            assert_eq!(
                failing_below_lower, 0,
                "{}: a full-length failure below the reported rate",
                g.goal.name
            );
        }
    }

    #[test]
    fn noisy_trials_still_converge_and_stay_near_the_truth() {
        let mut c = cfg(Method::Mlr);
        for g in &mut c.goals {
            g.exceed_ratio = 0.5;
            g.duration_sum_s = 4.0;
        }
        let mut sim = Sim::new(20e6);
        sim.noise = 0.2;
        let r = search(&mut sim, &c, &mut |_| {}).unwrap();
        for g in &r.goals {
            assert!(g.converged, "{g:?}");
            let l = g.lower_pps.unwrap();
            // Noise adds 1e-4 loss now and then: NDR may come out low, never high.
            assert!(l <= 20e6 / (1.0 - g.goal.loss_ratio) * 1.000001, "{}: {l}", g.goal.name);
        }
    }

    #[test]
    fn invalid_trials_never_pass() {
        // The source cannot offer more than 30 Mpps: trials above are invalid, so even a
        // chain that never loses is measured only up to what was really offered.
        let mut sim = Sim::new(1e12);
        sim.source_limit = 30e6;
        for method in [Method::Binary, Method::Mlr] {
            let r = search(&mut sim, &cfg(method), &mut |_| {}).unwrap();
            assert!(r.invalid_trials > 0);
            for g in &r.goals {
                // Valid means at least 99% of the offered rate was sent.
                let reachable = 30e6 / crate::trial::MIN_OFFERED_SHARE;
                assert!(
                    g.lower_pps.unwrap() <= reachable,
                    "{method:?} {}: {:?}",
                    g.goal.name,
                    g.lower_pps
                );
            }
        }
    }

    #[test]
    fn bad_configs_name_the_key() {
        let mut c = cfg(Method::Mlr);
        c.resolution = 0.0;
        assert_eq!(c.validate().unwrap_err().0, "resolution");
        let mut c = cfg(Method::Mlr);
        c.goals[0].loss_ratio = 1.5;
        assert_eq!(c.validate().unwrap_err().0, "goals");
        let mut c = cfg(Method::Mlr);
        c.max_pps = c.min_pps;
        assert_eq!(c.validate().unwrap_err().0, "max_rate");
        assert!("mlr".parse::<Method>().is_ok() && "nope".parse::<Method>().is_err());
    }
}
