//! Throughput searches: the highest offered rate whose trials meet a loss goal.
//!
//! - `Method::Binary` is RFC 2544-style (RFC 2544 section 26.1 defines throughput, not the
//!   search): for each goal on its own, a trial at the maximum rate, then halving the
//!   interval with full-length trials until it is narrower than the resolution. One
//!   trial decides a load.
//! - `Method::Mlr` is MLRsearch (RFC 9xxx draft-ietf-bmwg-mlrsearch), FD.io CSIT's
//!   `MLRsearch` 1.2.1 ported step by step (`mlr`): loads on its logarithmic grid, every
//!   goal a chain of targets coarse and short first, one selector per goal nominating by
//!   its six strategies, the lowest load winning each trial so goals share trials, the
//!   external search's width shared between them. Ported piece by piece (goals one after
//!   another, without the grid, the shared width and halving) it needed 1.3-2.0x the
//!   reference's trial time on the simulated DUTs and 0.8-3x on a real one; whole, it
//!   measures the reference's loads in the reference's order where the DUT answers the
//!   same (CI checks it against the reference on simulated DUTs). A load is classified
//!   from the durations of all its trials: long ones (at least the target's trial
//!   duration) count in full, short ones only by their excess of bad time (the
//!   reference's `TargetStat.estimates`). A load is a lower bound when even bad results
//!   for the rest of the duration sum would keep the bad share within `exceed_ratio`, an
//!   upper bound when even good ones would not, undecided otherwise (measured again).
//!
//! A goal's result is its relevant lower bound: the highest load classified as a lower
//! bound below the lowest load classified as an upper bound (conservative under loss
//! inversion), the conditional throughput there, and the relevant upper bound.
//!
//! Invalid trials (the generator did not offer the rate) are no evidence about the chain:
//! they never move a bound. A shortfall at a load near the highest rate the source has
//! reached is its capacity: the search's ceiling drops below what it reached, and a goal
//! found there says that the source, not the chain, was the limit. A shortfall below
//! that rate (the source has shown it offers more), however large, is a stall: the trial
//! is retried (at most `INVALID_RETRIES` times at a load) and the ceiling stays.
//! At a load the source has already paced in a valid trial, a shortfall of at most
//! 5% that outlasts the retries is its stalls, not its capacity: the fullest of those
//! trials counts (marked `shortfall_accepted`), and the ceiling stays.
//! A trial whose source says it was stalled (its pacer skipped the shortfall while it
//! had time to spare, `TrialResult::count_despite_stalls`) arrives valid and counts at
//! once: the reference counts every trial against what was sent, and retrying those
//! cost sfclab trials and, when the retries ran out, capped a search below the chain.
//!
//! Goals that differ only in their loss ratio are ordered: a looser goal's throughput is
//! never below a stricter one's (PDR >= NDR). MLRsearch guarantees it by classifying every
//! goal over the same trials; the binary search by starting a looser goal from the loads
//! a stricter one passed. [`search`] checks it and refuses to return a result that breaks it.

use serde::Serialize;
use std::time::Duration;

use crate::trial::{STALL_SHORTFALL_SHARE, Trial, TrialResult};

mod load_grid;
mod mlr;

pub use mlr::load_estimates;
use mlr::mlr;

/// A loss goal.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Goal {
    /// `NDR`, `PDR`, or any label.
    pub name: String,
    /// Highest tolerated loss ratio (0.005 is 0.5%).
    pub loss_ratio: f64,
    /// MLR: the share of a load's trial time that may exceed the loss goal.
    pub exceed_ratio: f64,
    /// MLR: trial time a load needs before it is classified in the final target
    /// (at least the final trial duration; 0 means one final trial).
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

    /// Partial drop rate at `loss_ratio` (FD.io CSIT's PDR is 0.5%).
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
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

/// How often a trial the generator fell just short of (a stall, not its capacity) is
/// repeated before its load counts as beyond the source.
pub const INVALID_RETRIES: usize = 3;

/// A source that reaches less than this share of the load is at its capacity: the load is
/// beyond it at once, without retries. A shortfall within it may be stalls, as a trial
/// judges its own (`TrialResult::count_despite_stalls`).
pub const SOURCE_CAPACITY_SHARE: f64 = 1.0 - STALL_SHORTFALL_SHARE;

/// A shortfall at a load below this share of the highest rate the source has sent at is
/// a stall (a descheduled vCPU skips milliseconds of packets, however many), not its
/// capacity: the source has shown it offers more. The trial is repeated and the ceiling
/// stays. (At 0.5, and with only small shortfalls counted as stalls, one long stall at
/// 2 Mpps capped a search of a 7.5 Mpps chain at 1.03 Mpps, and one at 7.5 Mpps at 4.)
pub const STALL_SHARE_OF_BEST: f64 = 0.9;

#[derive(Debug, Clone)]
pub struct SearchConfig {
    pub method: Method,
    pub goals: Vec<Goal>,
    pub min_pps: f64,
    pub max_pps: f64,
    /// Relative width at which a goal's search ends (0.005 is 0.5%).
    pub resolution: f64,
    pub final_duration: Duration,
    /// MLR: duration of the first, coarsest target's trials.
    pub initial_duration: Duration,
    /// MLR: coarser targets searched before each goal's final one (the reference's
    /// default is 2).
    pub preceding_targets: usize,
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
        if let Some(g) = self
            .goals
            .iter()
            .find(|g| g.duration_sum_s < 0.0 || g.duration_sum_s.is_nan())
        {
            return Err((
                "duration_sum",
                format!("{} s of {} is negative", g.duration_sum_s, g.name),
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

    /// The trials a search is expected to take, for progress and ETA: per goal, about
    /// log2(range / resolution) loads, each needing its duration sum.
    pub fn expected_trials(&self) -> usize {
        let halvings = (self.max_pps / self.min_pps / self.resolution).log2().ceil().max(1.0) as usize;
        let per_load = |g: &Goal| match self.method {
            Method::Binary => 1,
            Method::Mlr => {
                let fin = self.final_duration.as_secs_f64();
                (g.duration_sum_s.max(fin) / fin * (1.0 - g.exceed_ratio))
                    .ceil()
                    .max(1.0) as usize
            }
        };
        let n: usize = self.goals.iter().map(|g| halvings.div_ceil(2) + 2 * per_load(g)).sum();
        (n + 1).min(self.max_trials)
    }
}

/// One goal's answer.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct GoalResult {
    pub goal: Goal,
    /// The relevant lower bound: the highest offered load that met the goal below the
    /// lowest that did not. `None` if even the minimum rate failed.
    pub lower_pps: Option<f64>,
    /// The rate the chain forwarded at `lower_pps`: the load less its (pessimistic) loss,
    /// as MLRsearch's conditional throughput. `None` with `lower_pps`.
    pub conditional_throughput_pps: Option<f64>,
    /// The lowest offered load that failed the goal; `None` if none did.
    pub upper_pps: Option<f64>,
    /// `(upper - lower) / upper` at the end; at most the resolution unless cut short.
    pub relative_width: f64,
    pub converged: bool,
    /// The lower bound is the highest load the generator could offer: the chain was not
    /// the limit, so this is not the chain's throughput.
    pub limited_by_source: bool,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SearchResult {
    pub method: Method,
    pub goals: Vec<GoalResult>,
    pub trials: Vec<TrialResult>,
    pub trial_count: usize,
    /// Sum of all trial durations, seconds.
    pub total_trial_s: f64,
    /// Trials the generator could not offer (retried, never counted as the chain's loss).
    pub invalid_trials: usize,
    /// The highest load the generator could offer, when a trial showed it below
    /// `max_pps`: the search did not go above it.
    pub source_ceiling_pps: Option<f64>,
    /// Stopped by the user (Ctrl-C) before it finished: the bounds are those of the
    /// trials made so far.
    pub interrupted: bool,
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
        ceiling: cfg.max_pps,
        interrupted: false,
        source_best: 0.0,
        paced_best: 0.0,
    };
    let goals = match cfg.method {
        Method::Binary => binary(&mut log, cfg)?,
        Method::Mlr => mlr(&mut log, cfg)?,
    };
    check_goal_order(&goals)?;
    let (ceiling, interrupted) = (log.ceiling, log.interrupted);
    let trials = log.trials;
    Ok(SearchResult {
        method: cfg.method,
        goals,
        trial_count: trials.len(),
        total_trial_s: trials.iter().map(|t| t.duration_s).sum(),
        invalid_trials: trials.iter().filter(|t| !t.valid).count(),
        source_ceiling_pps: (ceiling < cfg.max_pps).then_some(ceiling),
        interrupted,
        trials,
    })
}

/// A looser goal (higher loss ratio, same exceed ratio and duration sum) must not end
/// below a stricter one: PDR >= NDR. A result that breaks it contradicts itself.
pub fn check_goal_order(goals: &[GoalResult]) -> Result<(), String> {
    for a in goals {
        for b in goals {
            let comparable = a.goal.exceed_ratio == b.goal.exceed_ratio
                && a.goal.duration_sum_s == b.goal.duration_sum_s
                && a.goal.loss_ratio < b.goal.loss_ratio;
            let (la, lb) = (a.lower_pps.unwrap_or(0.0), b.lower_pps.unwrap_or(0.0));
            if comparable && la > lb {
                return Err(format!(
                    "inconsistent result: {} ({} loss) at {la} pps is above {} ({} loss) at {lb} pps; \
                     a looser goal cannot have a lower throughput (a bug in the search, please report it)",
                    a.goal.name, a.goal.loss_ratio, b.goal.name, b.goal.loss_ratio
                ));
            }
        }
    }
    Ok(())
}

struct TrialLog<'a> {
    trial: &'a mut dyn Trial,
    trials: Vec<TrialResult>,
    on_trial: &'a mut dyn FnMut(&TrialResult),
    limit: usize,
    /// The highest load the source can offer, as far as the trials showed.
    ceiling: f64,
    /// The user stopped the search: no further trial runs.
    interrupted: bool,
    /// The highest rate the source has sent at in any trial, packets/s.
    source_best: f64,
    /// The highest load of a valid trial: the source paces it, so it is never beyond it.
    paced_best: f64,
}

impl TrialLog<'_> {
    fn exhausted(&self) -> bool {
        self.interrupted || self.trials.len() >= self.limit
    }

    /// One valid trial at `load`, or `None` when the source could not offer it even on
    /// retries: the ceiling is then lowered to what the source reached.
    fn run(&mut self, load: f64, duration: Duration) -> Result<Option<TrialResult>, String> {
        self.run_for(load, duration.as_secs_f64(), INVALID_RETRIES)
    }

    /// As `run`, for `duration_s` seconds (kept exactly as asked in the trial's
    /// `intended_duration_s`), retrying a stalled source at most `retries` times.
    fn run_for(&mut self, load: f64, duration_s: f64, retries: usize) -> Result<Option<TrialResult>, String> {
        let duration = Duration::from_secs_f64(duration_s);
        let mut stalled = false;
        let first = self.trials.len();
        for attempt in 0..=retries {
            let t = match self.trial.run(load, duration) {
                Ok(t) => t,
                Err(_) if self.trial.interrupted() => {
                    self.interrupted = true;
                    return Ok(None);
                }
                Err(e) => return Err(e),
            };
            // Keep the load and duration exactly as asked, so trials at one load are
            // found again and long trials are told from short ones.
            let t = TrialResult {
                offered_pps: load,
                intended_duration_s: duration_s,
                ..t
            };
            (self.on_trial)(&t);
            self.trials.push(t.clone());
            let rate = t.sent as f64 / t.duration_s.max(1e-9);
            self.source_best = self.source_best.max(rate);
            if t.valid {
                self.paced_best = self.paced_best.max(load);
                return Ok(Some(t));
            }
            // A shortfall below the rate the source has already sent at is a stall (a
            // descheduled vCPU skips milliseconds of packets), however large, unless it
            // keeps coming back at this load: then the source cannot pace it. Near the
            // best rate a small shortfall gets one more try before it counts as capacity.
            let small = rate >= SOURCE_CAPACITY_SHARE * load;
            let far_below = load <= STALL_SHARE_OF_BEST * self.source_best;
            let short_here = self.trials.iter().filter(|t| !t.valid && t.offered_pps == load).count();
            stalled = (far_below || load <= self.paced_best) && short_here <= INVALID_RETRIES;
            let retry_near_top = small && !far_below && attempt == 0;
            if !(stalled || retry_near_top) || self.exhausted() {
                break;
            }
        }
        // The source has paced this load or a higher one in a valid trial, so small
        // shortfalls here are its stalls, not its capacity (four in a row at 7.3 Mpps,
        // 1-2.5% short each, once capped a search at 6.5 Mpps right after a valid trial
        // at 7.6). The fullest of them is the measurement, its loss counted against what
        // it sent, and says so.
        let fullest = (first..self.trials.len())
            .max_by_key(|&i| self.trials[i].sent)
            .expect("a trial ran");
        let t = &self.trials[fullest];
        let nearly_full = t.sent as f64 >= SOURCE_CAPACITY_SHARE * load * t.duration_s;
        if load <= self.paced_best && nearly_full && !self.interrupted {
            let t = &mut self.trials[fullest];
            t.valid = true;
            t.shortfall_accepted = t.invalid_reason.take();
            return Ok(Some(t.clone()));
        }
        if !stalled {
            // Below what the source reached, with a margin: a ceiling it only just
            // reaches would be invalid again on the next trial.
            let last = self.trials.last().expect("a trial ran");
            let reached = last.sent as f64 / last.duration_s.max(1e-9);
            self.ceiling = self.ceiling.min(reached * 0.9).min(load * 0.9);
        }
        Ok(None)
    }

    fn valid(&self) -> impl Iterator<Item = &TrialResult> {
        self.trials.iter().filter(|t| t.valid)
    }
}

fn width(lower: f64, upper: f64) -> f64 {
    (upper - lower) / upper
}

fn result(
    goal: &Goal,
    lower: Option<f64>,
    conditional: Option<f64>,
    upper: Option<f64>,
    cfg: &SearchConfig,
    ceiling: f64,
) -> GoalResult {
    let relative_width = match (lower, upper) {
        (Some(l), Some(u)) => width(l, u),
        (Some(_), None) | (None, Some(_)) => 0.0,
        (None, None) => 1.0,
    };
    let limited_by_source = ceiling < cfg.max_pps && lower.is_some_and(|l| l >= ceiling * 0.999);
    let converged = !limited_by_source
        && match (lower, upper) {
            (Some(l), None) => l >= cfg.max_pps,
            (None, Some(u)) => u <= cfg.min_pps,
            (Some(_), Some(_)) => relative_width <= cfg.resolution,
            (None, None) => false,
        };
    GoalResult {
        goal: goal.clone(),
        lower_pps: lower,
        conditional_throughput_pps: conditional,
        upper_pps: upper,
        relative_width,
        converged,
        limited_by_source,
    }
}

/// RFC 2544-style: each goal on its own, full-length trials, halving the interval.
fn binary(log: &mut TrialLog, cfg: &SearchConfig) -> Result<Vec<GoalResult>, String> {
    let mut out = Vec::new();
    let mut goals: Vec<usize> = (0..cfg.goals.len()).collect();
    // Strictest first, so a looser goal starts from the loads a stricter one passed.
    goals.sort_by(|&a, &b| cfg.goals[a].loss_ratio.total_cmp(&cfg.goals[b].loss_ratio));
    for g in goals {
        let goal = &cfg.goals[g];
        // Any valid trial that met a stricter goal meets this one too.
        let mut lower = log
            .valid()
            .filter(|t| goal.passes(t) && t.offered_pps <= log.ceiling)
            .map(|t| t.offered_pps)
            .fold(None, |m: Option<f64>, l| Some(m.map_or(l, |m| m.max(l))));
        let mut upper: Option<f64> = None;
        while !log.exhausted() {
            let next = match (lower, upper) {
                (Some(l), None) if l >= log.ceiling => break,
                (_, None) => log.ceiling,
                (l, Some(u)) => {
                    let lo = l.unwrap_or(cfg.min_pps);
                    if width(lo, u) <= cfg.resolution {
                        break;
                    }
                    let mid = (lo + u) / 2.0;
                    if mid <= log.ceiling {
                        mid
                    } else if l.is_some_and(|l| l >= log.ceiling) {
                        break;
                    } else {
                        log.ceiling
                    }
                }
            };
            match log.run(next, cfg.final_duration)? {
                Some(t) if goal.passes(&t) => lower = Some(lower.map_or(next, |l| l.max(next))),
                Some(_) => upper = Some(upper.map_or(next, |u| u.min(next))),
                None => {}
            }
        }
        let conditional = lower.map(|l| l * (1.0 - loss_at(log, l, cfg.final_duration)));
        out.push((g, result(goal, lower, conditional, upper, cfg, log.ceiling)));
    }
    out.sort_by_key(|&(g, _)| g);
    Ok(out.into_iter().map(|(_, r)| r).collect())
}

/// The loss of the last valid full-length trial at `load`.
fn loss_at(log: &TrialLog, load: f64, duration: Duration) -> f64 {
    log.valid()
        .filter(|t| t.offered_pps == load && t.intended_duration_s >= duration.as_secs_f64() * 0.999)
        .last()
        .map_or(0.0, |t| t.loss_ratio)
}

#[cfg(test)]
mod tests {
    use super::load_grid::LoadGrid;
    use super::mlr::{relevant_bounds, targets};
    use super::*;

    fn grid(c: &SearchConfig) -> LoadGrid {
        LoadGrid::new(c.min_pps, c.max_pps, &[c.resolution])
    }

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
            preceding_targets: 2,
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
    fn a_receive_rate_that_passes_is_stepped_up_from_not_bisected_to_the_maximum() {
        // The maximum load (100 Mpps) fails and the receive rate there (the capacity)
        // passes: the bounds are 10x apart. The reference steps up from the lower bound
        // while a step lands below the middle; bisecting instead runs the first
        // target's trials at 55, 32, 21, 15 ... Mpps, all lost.
        for capacity in [1e6, 10e6, 30e6] {
            let r = search(&mut Sim::new(capacity), &cfg(Method::Mlr), &mut |_| {}).unwrap();
            check(&r, capacity, 0.005);
            let far = r.trials[1..].iter().filter(|t| t.offered_pps > 1.2 * capacity).count();
            assert_eq!(
                far,
                0,
                "{capacity}: {:?}",
                r.trials.iter().map(|t| t.offered_pps).collect::<Vec<_>>()
            );
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
        assert_eq!(
            r.trial_count, 1,
            "the passing trial at the maximum serves the looser goal too"
        );
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
    fn final_trials_only_measure_loads_that_can_move_a_bound() {
        // Stalls lose packets at any load in a quarter of the trials: loads far below
        // capacity turn up bad, and re-measuring a load at or below the lower bound could
        // only make a loss inversion, at or above the upper bound only waste time.
        let mut c = cfg(Method::Mlr);
        c.goals = vec![Goal {
            exceed_ratio: 0.5,
            duration_sum_s: 3.0,
            ..Goal::pdr(0.005)
        }];
        let fin = targets(&c.goals[0], &c, &grid(&c)).pop().unwrap();
        for seed in 1..20 {
            let mut dut = crate::simulated::StallingDut {
                capacity_pps: 8e6,
                stall_share: 0.25,
                stall_s: 0.02,
                queue: 4096.0,
                seed,
                source_limit_pps: None,
            };
            let r = search(&mut dut, &c, &mut |_| {}).unwrap();
            let mut replay = crate::simulated::StallingDut { seed: 0, ..dut };
            for (i, t) in r.trials.iter().enumerate() {
                if t.intended_duration_s < c.final_duration.as_secs_f64() {
                    continue;
                }
                let log = TrialLog {
                    trial: &mut replay,
                    trials: r.trials[..i].to_vec(),
                    on_trial: &mut |_| {},
                    limit: usize::MAX,
                    ceiling: r.source_ceiling_pps.unwrap_or(f64::INFINITY),
                    interrupted: false,
                    source_best: 0.0,
                    paced_best: 0.0,
                };
                let (lower, upper) = relevant_bounds(&log, &fin);
                let load = t.offered_pps;
                assert!(
                    lower.is_none_or(|l| load > l) && upper.is_none_or(|u| load < u),
                    "seed {seed}: trial {i} at {load} outside ({lower:?}, {upper:?})"
                );
            }
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
    fn invalid_trials_never_move_a_bound() {
        // The source cannot offer more than 30 Mpps and the chain never loses: a trial
        // above the source is invalid and ends as a ceiling, not as the chain's upper
        // bound.
        for method in [Method::Binary, Method::Mlr] {
            let mut sim = Sim::new(1e12);
            sim.source_limit = 30e6;
            let r = search(&mut sim, &cfg(method), &mut |_| {}).unwrap();
            // 30% of the load: the source's capacity, known from one trial.
            assert_eq!(r.invalid_trials, 1, "{method:?}");
            let ceiling = r.source_ceiling_pps.expect("the ceiling is reported");
            assert!(ceiling <= 30e6 && ceiling > 25e6, "{method:?}: ceiling {ceiling}");
            for g in &r.goals {
                assert_eq!(
                    g.upper_pps, None,
                    "{method:?} {}: no failing load was measured",
                    g.goal.name
                );
                assert_eq!(g.lower_pps, Some(ceiling), "{method:?} {}", g.goal.name);
                assert!(g.limited_by_source && !g.converged, "{g:?}");
            }
        }
    }

    #[test]
    fn a_chain_below_the_source_limit_is_found_despite_invalid_trials() {
        for method in [Method::Binary, Method::Mlr] {
            let mut sim = Sim::new(20e6);
            sim.source_limit = 30e6;
            let r = search(&mut sim, &cfg(method), &mut |_| {}).unwrap();
            assert!(r.invalid_trials > 0);
            check(&r, 20e6, 0.005);
            assert!(r.goals.iter().all(|g| !g.limited_by_source));
        }
    }

    /// A source that stalls in a share of the trials, falling 2% short of the load: those
    /// trials are retried, and neither the bounds nor the ceiling move.
    struct StallingSource {
        inner: Sim,
        share: f64,
        /// Share of its packets a stalled trial still sends.
        sends: f64,
        rng: u64,
    }

    impl Trial for StallingSource {
        fn run(&mut self, offered: f64, duration: Duration) -> Result<TrialResult, String> {
            let t = self.inner.run(offered, duration)?;
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            if (self.rng % 1000) as f64 / 1000.0 < self.share {
                let sent = (t.sent as f64 * self.sends) as u64;
                return Ok(TrialResult::new(offered, t.duration_s, sent, t.received.min(sent)));
            }
            Ok(t)
        }
    }

    /// A source that cannot quite pace high rates (3% short above 50 Mpps, as a pacer with
    /// little slack is) though it once sent faster unpaced: each such load is tried a
    /// bounded number of times, then lies above the ceiling; the search ends, right.
    struct ShortAtHighRates(Sim);

    impl Trial for ShortAtHighRates {
        fn run(&mut self, offered: f64, duration: Duration) -> Result<TrialResult, String> {
            let t = self.0.run(offered, duration)?;
            if offered > 50e6 {
                let sent = (t.sent as f64 * if offered > 250e6 { 0.8 } else { 0.97 }) as u64;
                return Ok(TrialResult::new(offered, t.duration_s, sent, t.received.min(sent)));
            }
            Ok(t)
        }
    }

    #[test]
    fn a_source_short_at_high_rates_does_not_trap_the_search() {
        for method in [Method::Binary, Method::Mlr] {
            let mut c = cfg(method);
            c.max_pps = 300e6;
            let r = search(&mut ShortAtHighRates(Sim::new(10e6)), &c, &mut |_| {}).unwrap();
            assert!(r.trial_count < 120, "{method:?}: {} trials", r.trial_count);
            // The binary search walks down from the top, through the loads the source
            // cannot pace; MLRsearch jumps to the receive rate and never goes there.
            let ceiling = r.source_ceiling_pps.unwrap();
            assert!(method == Method::Mlr || ceiling <= 50e6, "{method:?}: {ceiling}");
            check(&r, 10e6, 0.005);
        }
    }

    /// A source that falls `short` of every load in `band` (a tester that stalls at
    /// every trial there), and paces every other load exactly.
    struct ShortInBand {
        inner: Sim,
        band: (f64, f64),
        short: f64,
    }

    impl Trial for ShortInBand {
        fn run(&mut self, offered: f64, duration: Duration) -> Result<TrialResult, String> {
            let t = self.inner.run(offered, duration)?;
            if !(self.band.0..=self.band.1).contains(&offered) {
                return Ok(t);
            }
            let sent = (t.sent as f64 * (1.0 - self.short)) as u64;
            Ok(TrialResult::new(offered, t.duration_s, sent, t.received.min(sent)))
        }
    }

    #[test]
    fn a_load_the_source_has_paced_is_never_beyond_it() {
        // Every trial between 1 and 11.9 Mpps comes 1.5% short; 12 Mpps and above are
        // paced exactly, so the shortfalls below are stalls: they must not cap the search.
        for method in [Method::Binary, Method::Mlr] {
            let mut dut = ShortInBand {
                inner: Sim::new(12e6),
                band: (1e6, 11.9e6),
                short: 0.015,
            };
            let mut c = cfg(method);
            c.max_pps = 14e6;
            let r = search(&mut dut, &c, &mut |_| {}).unwrap();
            assert_eq!(r.source_ceiling_pps, None, "{method:?}: {:?}", r.trials);
            let accepted: Vec<_> = r.trials.iter().filter(|t| t.shortfall_accepted.is_some()).collect();
            assert!(accepted.iter().all(|t| t.valid), "{method:?}");
            check(&r, 12e6, 0.005);
            // Where no valid trial has shown the source paces a load, a shortfall is
            // still no evidence about the chain.
            for t in r.trials.iter().filter(|t| !t.valid) {
                assert!(t.shortfall_accepted.is_none());
            }
        }
    }

    #[test]
    fn a_stalling_source_is_retried_not_taken_for_its_capacity() {
        for method in [Method::Binary, Method::Mlr] {
            // Short stalls (2% of a trial's packets) and long ones (half of them: a
            // vCPU descheduled for 100 ms of a 200 ms trial) alike.
            for sends in [0.98, 0.5] {
                let mut dut = StallingSource {
                    inner: Sim::new(12e6),
                    share: 0.25,
                    sends,
                    rng: 99,
                };
                let r = search(&mut dut, &cfg(method), &mut |_| {}).unwrap();
                assert!(r.invalid_trials > 0, "{method:?}: some trials stalled");
                assert_eq!(
                    r.source_ceiling_pps, None,
                    "{method:?}, stalls sending {sends}: stalls do not lower the ceiling"
                );
                check(&r, 12e6, 0.005);
            }
        }
    }

    /// A DUT that loses a few packets in some trials at any rate (vCPU stalls on a VM),
    /// with a capacity above which the excess is lost.
    struct Stalls {
        capacity: f64,
        /// Share of trials that lose `stall_loss` of their packets.
        stall_share: f64,
        stall_loss: f64,
        rng: u64,
    }

    impl Trial for Stalls {
        fn run(&mut self, offered: f64, duration: Duration) -> Result<TrialResult, String> {
            let d = duration.as_secs_f64();
            let sent = (offered * d).round() as u64;
            let mut loss = if offered > self.capacity {
                (offered - self.capacity) / offered
            } else {
                0.0
            };
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            if (self.rng % 10_000) as f64 / 10_000.0 < self.stall_share {
                loss += self.stall_loss;
            }
            let received = ((sent as f64) * (1.0 - loss.min(1.0))).floor() as u64;
            Ok(TrialResult::new(offered, d, sent, received))
        }
    }

    /// A DUT whose RX queue absorbs a burst above its capacity (short trials pass above
    /// it), and that forwards less than its capacity when flooded (the maximum receive
    /// rate is low), as sfclab's chain behind a 32k-packet queue does.
    struct QueuedDut {
        capacity: f64,
        queue: f64,
        flooded_share: f64,
    }

    impl Trial for QueuedDut {
        fn run(&mut self, offered: f64, duration: Duration) -> Result<TrialResult, String> {
            let d = duration.as_secs_f64();
            let sent = (offered * d).round() as u64;
            let carried = if offered > 2.0 * self.capacity {
                self.capacity * self.flooded_share * d
            } else {
                (self.capacity * d + self.queue).min(sent as f64)
            };
            Ok(TrialResult::new(offered, d, sent, carried.floor() as u64))
        }
    }

    #[test]
    fn a_bound_the_longer_trials_overturn_is_looked_for_next_to_it() {
        // Short trials pass up to 8% above the capacity; the flooded DUT forwards 80% of
        // it. At the longer targets the search steps down from the overturned bound; it
        // never goes back to the maximum receive rate, 20% below.
        let capacity = 10e6;
        let mut dut = QueuedDut {
            capacity,
            queue: 0.08 * capacity * 0.125,
            flooded_share: 0.8,
        };
        let c = cfg(Method::Mlr);
        let r = search(&mut dut, &c, &mut |_| {}).unwrap();
        // What a final trial carries: the capacity and the queue over its duration.
        let truth = capacity + dut.queue / c.final_duration.as_secs_f64();
        for g in &r.goals {
            let (l, u) = (g.lower_pps.unwrap(), g.upper_pps.unwrap());
            assert!(l <= truth && u > truth && g.converged, "{g:?}");
        }
        let initial = c.initial_duration.as_secs_f64();
        let far_below: Vec<_> = r
            .trials
            .iter()
            .filter(|t| t.intended_duration_s > initial * 1.001 && t.offered_pps < 0.9 * capacity)
            .map(|t| (t.offered_pps, t.intended_duration_s))
            .collect();
        assert!(far_below.is_empty(), "longer trials far below the bound: {far_below:?}");
    }

    /// The case: PDR 0.5% at exceed ratio 0.5 on a DUT that stalls now and then.
    /// A lossy trial at a low load must not end the search there (sfclab found 0.66 Mpps
    /// where the reference found 8.12).
    #[test]
    fn occasional_stalls_do_not_drag_the_pdr_down() {
        let mut c = cfg(Method::Mlr);
        c.goals = vec![Goal::ndr(), Goal::pdr(0.005)];
        for g in &mut c.goals {
            g.exceed_ratio = 0.5;
            g.duration_sum_s = 6.0;
        }
        c.final_duration = Duration::from_secs(1);
        c.max_trials = 400;
        for seed in 1..=8u64 {
            let mut dut = Stalls {
                capacity: 8e6,
                stall_share: 0.2,
                stall_loss: 1e-4,
                rng: seed * 7919,
            };
            let r = search(&mut dut, &c, &mut |_| {}).unwrap();
            let pdr = r.goals[1].lower_pps.unwrap();
            let truth = 8e6 / (1.0 - 0.005);
            assert!(pdr > truth * 0.98 && pdr <= truth * 1.000001, "seed {seed}: PDR {pdr}");
            let ndr = r.goals[0].lower_pps.unwrap();
            assert!(ndr > 8e6 * 0.97 && ndr <= 8e6 * 1.000001, "seed {seed}: NDR {ndr}");
            assert!(ndr <= pdr);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]
        /// A looser goal never ends below a stricter one, whatever the noise.
        #[test]
        fn pdr_is_never_below_ndr(seed in 1u64..1_000_000, capacity in 1e5f64..90e6, noise in 0.0f64..0.6,
                                  exceed in proptest::sample::select(vec![0.0, 0.5]), mlr in proptest::bool::ANY) {
            let mut c = cfg(if mlr { Method::Mlr } else { Method::Binary });
            c.goals = vec![Goal::pdr(0.001), Goal::ndr(), Goal::pdr(1e-5)];
            for g in &mut c.goals {
                g.exceed_ratio = exceed;
                g.duration_sum_s = 3.0;
            }
            let mut sim = Sim::new(capacity);
            sim.noise = noise;
            sim.rng = seed;
            let r = search(&mut sim, &c, &mut |_| {}).unwrap();
            let at = |i: usize| r.goals[i].lower_pps.unwrap_or(0.0);
            proptest::prop_assert!(at(1) <= at(2) && at(2) <= at(0), "{:?}", r.goals);
        }
    }

    #[test]
    fn the_order_check_catches_a_contradiction() {
        let mk = |goal: Goal, lower: f64| GoalResult {
            goal,
            lower_pps: Some(lower),
            conditional_throughput_pps: Some(lower),
            upper_pps: None,
            relative_width: 0.0,
            converged: true,
            limited_by_source: false,
        };
        let ok = [mk(Goal::ndr(), 12e6), mk(Goal::pdr(0.005), 12.5e6)];
        assert!(check_goal_order(&ok).is_ok());
        // docs/PERFORMANCE.md once published PDR 8.774 Mpps below NDR 12.044 Mpps.
        let bad = [mk(Goal::ndr(), 12.044e6), mk(Goal::pdr(1e-5), 8.774e6)];
        assert!(check_goal_order(&bad).unwrap_err().contains("inconsistent"));
    }

    #[test]
    fn targets_follow_the_reference_scaling() {
        let mut c = cfg(Method::Mlr);
        c.final_duration = Duration::from_secs(1);
        c.initial_duration = Duration::from_millis(100);
        let mut g = Goal::ndr();
        g.duration_sum_s = 10.0;
        let grid = grid(&c);
        let t = targets(&g, &c, &grid);
        assert_eq!(t.len(), 3);
        // Sums 0.1, 10 * (0.1/10)^(1/2) = 1.0, 10; widths 4r, 2r, r.
        assert!((t[0].duration_sum - 0.1).abs() < 1e-9 && (t[0].trial_duration - 0.1).abs() < 1e-9);
        assert!((t[1].duration_sum - 1.0).abs() < 1e-9 && (t[1].trial_duration - 1.0).abs() < 1e-9);
        assert!((t[2].duration_sum - 10.0).abs() < 1e-9 && (t[2].trial_duration - 1.0).abs() < 1e-9);
        let w = grid.width(0.005);
        assert_eq!([t[0].width, t[1].width, t[2].width], [4 * w, 2 * w, w]);
    }

    /// MLRsearch 1.2.1's trials (load, duration, times in a row) on two simulated DUTs,
    /// as its own controller ran them (`reference()` in
    /// `reference/compare_with_mlrsearch.py` returns them for any DUT): the port must measure exactly these.
    /// A quiet 14.2 Mpps DUT: NDR 14154165.437700566, PDR 14225262.607492793
    const QUIET: &[(f64, f64, usize)] = &[
        (20000000.0, 0.125, 1),
        (14154165.437700566, 0.125, 1),
        (14440704.051835123, 0.125, 1),
        (14296716.902371252, 0.7905694150420949, 1),
        (14154165.437700566, 0.7905694150420949, 1),
        (14225262.607492793, 1.0, 3),
        (14154165.437700566, 1.0, 3),
        (14296716.902371252, 1.0, 2),
    ];
    /// 8 Mpps, a 20 ms stall in a quarter of the trials (seed 3): NDR 7994980.560997835, PDR 8035139.798427459
    const STALLING: &[(f64, f64, usize)] = &[
        (20000000.0, 0.125, 1),
        (4819909.483984407, 0.125, 1),
        (4917484.30673703, 0.125, 1),
        (5118599.889848453, 0.125, 1),
        (5017034.445845042, 0.125, 1),
        (4967009.981246473, 0.7905694150420949, 1),
        (5017034.445845042, 0.7905694150420949, 1),
        (4991959.551996561, 1.0, 3),
        (5017034.445845042, 1.0, 3),
        (5067562.724019145, 1.0, 3),
        (5170151.068515443, 1.0, 5),
        (5381600.232774925, 1.0, 4),
        (5830795.82580891, 1.0, 5),
        (6844797.9952999195, 1.0, 4),
        (9432487.507243656, 1.0, 3),
        (8035139.798427459, 1.0, 3),
        (7416124.9169786, 1.0, 4),
        (7719430.061249618, 1.0, 3),
        (7875703.124567616, 1.0, 5),
        (7955022.037481276, 1.0, 3),
        (7994980.560997835, 1.0, 4),
        (8705823.095355392, 1.0, 3),
        (8363761.452334642, 1.0, 3),
        (8197804.1273384625, 1.0, 3),
        (8116064.452879249, 1.0, 3),
        (8075500.757967425, 1.0, 3),
    ];

    #[test]
    fn the_search_measures_the_loads_the_reference_measures_in_its_order() {
        for (fixture, capacity_pps, stall_share, stall_s, queue, seed, bounds) in [
            (
                QUIET,
                14.2e6,
                0.0,
                0.0,
                0.0,
                1,
                [14_154_165.437_700_566, 14_225_262.607_492_793],
            ),
            (
                STALLING,
                8e6,
                0.25,
                0.02,
                4096.0,
                3,
                [7_994_980.560_997_835, 8_035_139.798_427_459],
            ),
        ] {
            let mut c = cfg(Method::Mlr);
            c.goals = vec![Goal::ndr(), Goal::pdr(0.005)];
            for g in &mut c.goals {
                g.exceed_ratio = 0.5;
                g.duration_sum_s = 5.0;
            }
            (c.min_pps, c.max_pps, c.resolution) = (10e3, 20e6, 0.005);
            c.final_duration = Duration::from_secs(1);
            c.max_trials = 2000;
            let mut dut = crate::simulated::StallingDut {
                capacity_pps,
                stall_share,
                stall_s,
                queue,
                seed,
                source_limit_pps: None,
            };
            let r = search(&mut dut, &c, &mut |_| {}).unwrap();
            let expected: Vec<(f64, f64)> = fixture
                .iter()
                .flat_map(|&(l, d, n)| std::iter::repeat_n((l, d), n))
                .collect();
            let measured: Vec<(f64, f64)> = r
                .trials
                .iter()
                .map(|t| (t.offered_pps, t.intended_duration_s))
                .collect();
            assert_eq!(measured, expected, "capacity {capacity_pps}");
            assert_eq!([r.goals[0].lower_pps, r.goals[1].lower_pps], bounds.map(Some));
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
