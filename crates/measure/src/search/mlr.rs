//! MLRsearch as FD.io CSIT's `MLRsearch` 1.2.1 (PyPI) runs it, ported step by step:
//!
//! - Loads lie on a logarithmic grid (`LoadGrid`, its `LoadRounding`); widths and the
//!   middle of an interval are whole grid steps.
//! - Each goal is a chain of targets, coarse and short first (`TargetScaling`).
//! - Initial trials: the maximum load, then its receive rate corrected for the loosest
//!   loss ratio, then a step beyond that.
//! - One selector per goal nominates a load by the first of six strategies that wants
//!   one: halve, refine the lower, refine the upper, extend down, extend up, bisect. The
//!   lowest load wins each trial (then the longer duration, then the wider width), so
//!   goals compete for trials and share them.
//! - The widths of external search steps grow per selector (the expander) and are
//!   shared as one global width, so two goals never interleave their steps up.
//! - A load is classified from the time of all its trials (`LoadTally`, its
//!   `TargetStat.estimates`); a load that cannot make or move a relevant bound is never
//!   measured (`not_worth`).
//!
//! What sfclab adds: a source that cannot offer a load lowers the ceiling; loads above it
//! are never nominated and never bounds, and a selector with no bound below it measures
//! the ceiling itself. The reference stops with an error where no load meets a goal;
//! here the goal's result says so.

use super::load_grid::{LoadGrid, middle};
use super::{Goal, GoalResult, SearchConfig, TrialLog, result};
use crate::trial::TrialResult;

/// One step of a goal's search: loss ratio and exceed ratio of the goal, at this
/// target's width (grid steps), trial duration and duration sum (its `TargetSpec`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Target {
    pub(super) loss_ratio: f64,
    pub(super) exceed_ratio: f64,
    pub(super) width: i64,
    pub(super) trial_duration: f64,
    pub(super) duration_sum: f64,
}

/// A goal's targets, coarsest first, the final one last (its `TargetScaling`): each
/// preceding target doubles the width, and the duration sums shrink geometrically from
/// the goal's to the initial trial duration.
pub(super) fn targets(goal: &Goal, cfg: &SearchConfig, grid: &LoadGrid) -> Vec<Target> {
    let fin = cfg.final_duration.as_secs_f64();
    let init = cfg.initial_duration.as_secs_f64();
    let duration_sum = goal.duration_sum_s.max(fin);
    let last = Target {
        loss_ratio: goal.loss_ratio,
        exceed_ratio: goal.exceed_ratio,
        width: grid.width(cfg.resolution),
        trial_duration: fin,
        duration_sum,
    };
    let mut out = vec![last];
    let p = cfg.preceding_targets;
    let multiplier = if p > 0 {
        (init / duration_sum).powf(1.0 / p as f64)
    } else {
        1.0
    };
    let mut width = last.width;
    for count in 0..p {
        let sum = if count + 1 >= p {
            init
        } else {
            // powf, as the reference's pow: the durations are the same floats.
            duration_sum * multiplier.powf((count + 1) as f64)
        };
        width = width.saturating_mul(2);
        out.push(Target {
            width,
            trial_duration: fin.min(sum),
            duration_sum: sum,
            ..last
        });
    }
    out.reverse();
    out
}

/// How a load's trials classify it for one target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Class {
    Lower,
    Upper,
    Undecided,
}

/// Trial time at one load, for one target (its `TargetStat`).
#[derive(Debug, Default)]
struct LoadTally {
    good_long: f64,
    bad_long: f64,
    good_short: f64,
    bad_short: f64,
    /// (loss ratio, duration) of each long trial, for the pessimistic loss ratio.
    long_losses: Vec<(f64, f64)>,
}

impl LoadTally {
    fn of<'t>(trials: impl Iterator<Item = &'t TrialResult>, load: f64, target: &Target) -> LoadTally {
        let mut s = LoadTally::default();
        for t in trials.filter(|t| t.valid && t.offered_pps == load) {
            // Long or short by the duration asked for; the sums by the one measured.
            let long = t.intended_duration_s >= target.trial_duration * 0.999;
            let good = t.loss_ratio <= target.loss_ratio;
            // A measured window within 1% of the asked one counts as the asked one, so
            // timer jitter cannot tip a classification that sits exactly on a boundary.
            let d = if (t.duration_s - t.intended_duration_s).abs() <= 0.01 * t.intended_duration_s {
                t.intended_duration_s
            } else {
                t.duration_s
            };
            match (long, good) {
                (true, true) => s.good_long += d,
                (true, false) => s.bad_long += d,
                (false, true) => s.good_short += d,
                (false, false) => s.bad_short += d,
            }
            if long {
                s.long_losses.push((t.loss_ratio, d));
            }
        }
        s
    }

    /// Its `estimates`: whether the load can still be a lower bound if every missing
    /// result were good (optimistic) and if every one were bad (pessimistic).
    fn class(&self, target: &Target) -> Class {
        let coeff = target.exceed_ratio;
        let decrease = self.good_short * coeff / (1.0 - coeff);
        let short_excess = self.bad_short - decrease;
        let effective_excess = self.bad_long + short_excess.max(0.0);
        let effective_dursum = (self.good_long + effective_excess).max(target.duration_sum);
        let limit = effective_dursum * coeff;
        let optimistic = effective_excess <= limit;
        let pessimistic = effective_dursum - self.good_long <= limit;
        match (optimistic, pessimistic) {
            (true, true) => Class::Lower,
            (false, false) => Class::Upper,
            _ => Class::Undecided,
        }
    }

    /// Its `pessimistic_loss_ratio`: the loss at the exceed-ratio quantile of the long
    /// trials, missing time counted as total loss.
    fn pessimistic_loss_ratio(&self, target: &Target) -> f64 {
        let mut losses = self.long_losses.clone();
        losses.sort_by(|a, b| a.0.total_cmp(&b.0));
        let all_long = target.duration_sum.max(self.good_long + self.bad_long);
        let mut remaining = all_long * (1.0 - target.exceed_ratio) - 1e-9;
        let mut ret = None;
        for (ratio, d) in losses {
            if ret.is_none() || remaining > 0.0 {
                ret = Some(ratio);
                remaining -= d;
            } else {
                break;
            }
        }
        if remaining > 0.0 { 1.0 } else { ret.unwrap_or(1.0) }
    }
}

/// The reference's `TargetStat.estimates` for trials at one load: (optimistic,
/// pessimistic) whether the load can be a lower bound. Public so that the port can be
/// checked case by case against the reference (`reference/`).
pub fn load_estimates(
    trials: &[TrialResult],
    loss_ratio: f64,
    exceed_ratio: f64,
    trial_duration: f64,
    duration_sum: f64,
) -> (bool, bool) {
    let target = Target {
        loss_ratio,
        exceed_ratio,
        width: 0,
        trial_duration,
        duration_sum,
    };
    let load = trials.first().map_or(0.0, |t| t.offered_pps);
    match LoadTally::of(trials.iter(), load, &target).class(&target) {
        Class::Lower => (true, true),
        Class::Upper => (false, false),
        // The reference never yields (false, true): a load that fails optimistically
        // fails pessimistically too.
        Class::Undecided => (true, false),
    }
}

/// The relevant bounds: loads from low to high; the first upper bound ends the walk, the
/// lower bound is the last lower bound before it. Loads above the source's ceiling are
/// not the chain's.
pub(super) fn relevant_bounds(log: &TrialLog, target: &Target) -> (Option<f64>, Option<f64>) {
    let mut loads: Vec<f64> = log
        .valid()
        .map(|t| t.offered_pps)
        .filter(|&l| l <= log.ceiling)
        .collect();
    loads.sort_by(f64::total_cmp);
    loads.dedup();
    let mut lower = None;
    for l in loads {
        match LoadTally::of(log.trials.iter(), l, target).class(target) {
            Class::Upper => return (lower, Some(l)),
            Class::Lower => lower = Some(l),
            Class::Undecided => {}
        }
    }
    (lower, None)
}

/// Relevant bounds as grid indices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bounds {
    clo: Option<i64>,
    chi: Option<i64>,
}

/// The grid, the loads a search may use and the trials so far.
struct Search<'l, 'a> {
    log: &'l mut TrialLog<'a>,
    grid: LoadGrid,
    /// The highest index the search may measure: the maximum load, or the source's
    /// ceiling once a trial showed it (its `LimitHandler.max_load`).
    max: i64,
}

impl Search<'_, '_> {
    fn bounds(&self, target: &Target) -> Bounds {
        let (clo, chi) = relevant_bounds(self.log, target);
        Bounds {
            clo: clo.map(|l| self.grid.index(l)),
            chi: chi.map(|l| self.grid.index(l)),
        }
    }

    /// One trial at grid index `load` (retried where the source stalled); the ceiling,
    /// if the source showed one, taken down onto the grid.
    fn measure(&mut self, load: i64, duration_s: f64) -> Result<Option<TrialResult>, String> {
        let t = self
            .log
            .run_for(self.grid.load(load), duration_s, super::INVALID_RETRIES)?;
        self.settle_ceiling();
        Ok(t)
    }

    fn settle_ceiling(&mut self) {
        if self.log.ceiling < self.grid.load(self.max) {
            self.max = self.grid.index(self.log.ceiling);
            self.log.ceiling = self.grid.load(self.max);
        }
    }

    /// Its `LimitHandler.handle`: `load` moved to keep at least `width` from the bounds
    /// and the ends it may not reach, or `None` where no such load is left.
    fn handle(&self, load: i64, width: i64, clo: Option<i64>, chi: Option<i64>) -> Option<i64> {
        // Indices beyond the grid name its ends, as the reference's loads do.
        let load = load.clamp(0, self.max);
        match (clo, chi) {
            (None, None) => self.within(load, width, 0, self.max, false, false),
            (None, Some(chi)) => {
                if chi <= 0 || load >= chi {
                    return None;
                }
                self.within(load, width, 0, chi, false, true)
            }
            (Some(clo), None) => {
                // The reference raises here; its strategies never ask.
                if clo >= self.max || load <= clo {
                    return None;
                }
                self.within(load, width, clo, self.max, true, false)
            }
            (Some(clo), Some(chi)) => {
                if !(clo < load && load < chi) {
                    return None;
                }
                self.within(load, width, clo, chi, true, true)
            }
        }
    }

    fn within(&self, load: i64, width: i64, min: i64, max: i64, min_excluded: bool, max_excluded: bool) -> Option<i64> {
        if width >= max - min {
            return match (min_excluded, max_excluded) {
                (false, _) => Some(min),
                (true, false) => Some(max),
                (true, true) => None,
            };
        }
        let (mut soft_min, mut soft_max) = (min + width, max - width);
        if soft_min > soft_max {
            soft_min = middle(min, max, width);
            soft_max = soft_min;
        }
        if load < soft_min {
            return Some(if min_excluded { soft_min } else { min });
        }
        if load > soft_max {
            return Some(if max_excluded { soft_max } else { max });
        }
        Some(load)
    }

    /// Its `run_initial_trials`: the maximum load, its corrected receive rate, and a
    /// step beyond; the two loads the selectors start from.
    fn initial_trials(&mut self, chains: &[Vec<Target>]) -> Result<(i64, i64), String> {
        let first = chains.iter().map(|c| c[0]);
        let ratio = first.clone().map(|t| t.loss_ratio).fold(f64::INFINITY, f64::min);
        let duration = first.clone().map(|t| t.trial_duration).fold(0.0, f64::max);
        let width = first.map(|t| t.width).max().expect("a goal");
        let load = self.grid.load(self.max);
        // Where the source fell short, what the chain forwarded is still a receive rate.
        let rate = match self.log.run_for(load, duration, 0)? {
            Some(at_max) => Some(load * (1.0 - at_max.loss_ratio)),
            None => self.log.trials.last().map(TrialResult::received_pps),
        };
        self.step_from_receive_rate(rate, ratio, width, duration)
    }

    fn step_from_receive_rate(
        &mut self,
        rate: Option<f64>,
        ratio: f64,
        width: i64,
        duration: f64,
    ) -> Result<(i64, i64), String> {
        self.settle_ceiling();
        let max = self.max;
        let Some(rate) = rate else { return Ok((max, max)) };
        let corrected = self.grid.index(rate * (1.0 / (1.0 - ratio)));
        if corrected >= max || self.log.exhausted() {
            return Ok((max, max));
        }
        let Some(mrr) = self.handle(corrected, width, None, Some(max)) else {
            return Ok((max, max));
        };
        let Some(at_mrr) = self.measure(mrr, duration)? else {
            return Ok((mrr, mrr));
        };
        let mrr2 = if at_mrr.loss_ratio > ratio {
            let corrected = self
                .grid
                .index(self.grid.load(mrr) * (1.0 - at_mrr.loss_ratio) * (1.0 / (1.0 - ratio)));
            self.handle(corrected, width, None, Some(mrr))
        } else {
            self.handle(mrr + width, width, Some(mrr), Some(self.max))
        };
        match mrr2 {
            Some(mrr2) if !self.log.exhausted() => {
                self.measure(mrr2, duration)?;
                Ok((mrr.min(mrr2), mrr.max(mrr2)))
            }
            _ => Ok((mrr, mrr)),
        }
    }
}

/// The strategies of a selector, in the order they are asked (its `STRATEGY_CLASSES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Strategy {
    /// The middle of the preceding target's bounds, when they are one to two widths apart.
    Halve,
    /// More trials at the preceding target's lower bound.
    RefineLower,
    /// More trials at the preceding target's upper bound.
    RefineUpper,
    /// No lower bound: a step down from the upper.
    ExtendDown,
    /// No upper bound: a step up from the lower.
    ExtendUp,
    /// Both bounds: a step from the one that moved, or the middle.
    Bisect,
}

const STRATEGIES: [Strategy; 6] = [
    Strategy::Halve,
    Strategy::RefineLower,
    Strategy::RefineUpper,
    Strategy::ExtendDown,
    Strategy::ExtendUp,
    Strategy::Bisect,
];

/// The width of a selector's next external step (its `TargetedExpander`): doubled when a
/// step did not find the bound it looked for, and then shared as the global width.
#[derive(Debug)]
struct Expander {
    next_width: i64,
    target_width: i64,
}

impl Expander {
    fn new(target: &Target, initial: Bounds) -> Expander {
        let mut next_width = target.width;
        if let (Some(lo), Some(hi)) = (initial.clo, initial.chi) {
            next_width = next_width.max(hi - lo);
        }
        Expander {
            next_width: next_width.saturating_mul(2),
            target_width: target.width,
        }
    }

    fn expand(&mut self, global: &mut i64) {
        self.next_width = self.next_width.saturating_mul(2);
        *global = self.next_width;
    }

    fn width(&self, global: i64) -> i64 {
        self.next_width.max(global)
    }

    /// Bounds closing in by `last_width`: the next step starts from it again.
    fn limit(&mut self, last_width: i64) {
        self.next_width = last_width.max(self.target_width).saturating_mul(2);
    }
}

/// What a selector wants measured: a load, for a duration, and the global width to set
/// if it wins (its `Candidate`).
#[derive(Debug, Clone, Copy)]
struct Candidate {
    load: i64,
    duration: f64,
    width: Option<i64>,
    selector: usize,
}

impl Candidate {
    /// Whether `self` is measured before `other`: lower load, then longer trial, then a
    /// width over none, then the wider width; on a tie, the earlier goal.
    fn before(&self, other: &Candidate) -> bool {
        if self.load != other.load {
            return self.load < other.load;
        }
        if self.duration != other.duration {
            return self.duration > other.duration;
        }
        match (self.width, other.width) {
            (None, other) => other.is_none(),
            (Some(_), None) => true,
            (Some(a), Some(b)) => a >= b,
        }
    }
}

/// One goal's search through its targets (its `Selector`).
struct Selector {
    chain: Vec<Target>,
    current: usize,
    /// The loads the current target started from: the initial trials' two for the
    /// first, the preceding target's bounds for the others.
    initial: Bounds,
    expander: Expander,
    /// The strategy of the last nomination, told when it wins.
    strategy: Option<Strategy>,
    /// Bisect chose a step up (down): the width expands when the load becomes the
    /// lower (upper) bound, the step having fallen short.
    expand_on_clo: bool,
    expand_on_chi: bool,
}

impl Selector {
    fn new(chain: Vec<Target>, initial: Bounds) -> Selector {
        let expander = Expander::new(&chain[0], initial);
        Selector {
            chain,
            current: 0,
            initial,
            expander,
            strategy: None,
            expand_on_clo: false,
            expand_on_chi: false,
        }
    }

    fn target(&self) -> Target {
        self.chain[self.current]
    }

    /// The first strategy's load and width, moving on to the next target when none
    /// wants a trial; `None` once the final target is met.
    fn nominate(&mut self, s: &Search, global: i64) -> Option<(i64, f64, Option<i64>)> {
        let mut bounds = s.bounds(&self.target());
        self.strategy = None;
        loop {
            for strategy in STRATEGIES {
                if let Some((load, width)) = self.ask(strategy, bounds, s, global) {
                    self.strategy = Some(strategy);
                    return Some((load, self.target().trial_duration, width));
                }
            }
            // sfclab's last resort: no bound below the source's ceiling at all.
            if bounds.clo.is_none() && bounds.chi.is_none() {
                return Some((s.max, self.target().trial_duration, Some(self.target().width)));
            }
            if self.current + 1 == self.chain.len() {
                return None;
            }
            self.current += 1;
            self.initial = bounds;
            bounds = s.bounds(&self.target());
            self.expander = Expander::new(&self.target(), self.initial);
            self.expand_on_clo = false;
            self.expand_on_chi = false;
        }
    }

    /// The nomination won and was measured: a step that fell short widens the next.
    fn won(&mut self, load: i64, s: &Search, global: &mut i64) {
        let b = s.bounds(&self.target());
        let fell_short = match self.strategy {
            Some(Strategy::ExtendDown) => b.chi == Some(load),
            Some(Strategy::ExtendUp) => b.clo == Some(load),
            Some(Strategy::Bisect) => {
                (self.expand_on_clo && b.clo == Some(load)) || (self.expand_on_chi && b.chi == Some(load))
            }
            _ => false,
        };
        if fell_short {
            self.expander.expand(global);
        }
    }

    /// Whether a trial at `load` could not make or move a relevant bound (its
    /// `not_worth`), or lies above the source's ceiling.
    fn not_worth(&self, b: Bounds, load: i64, s: &Search) -> bool {
        let width = self.target().width;
        load > s.max
            || b.clo.is_some_and(|clo| clo >= load)
            || b.chi.is_some_and(|chi| chi <= load)
            || matches!((b.clo, b.chi), (Some(lo), Some(hi)) if in_widths(lo, hi, width) <= 1.0)
    }

    fn ask(&mut self, strategy: Strategy, b: Bounds, s: &Search, global: i64) -> Option<(i64, Option<i64>)> {
        let width = self.target().width;
        match strategy {
            Strategy::Halve => {
                let (lo, hi) = (self.initial.clo?, self.initial.chi?);
                let widths = in_widths(lo, hi, width);
                if widths > 2.0 || widths <= 1.0 {
                    return None;
                }
                let load = middle(lo, hi, width);
                if self.not_worth(b, load, s) {
                    return None;
                }
                self.expander.limit(width);
                Some((load, Some(width)))
            }
            Strategy::RefineLower | Strategy::RefineUpper => {
                let load = if strategy == Strategy::RefineLower {
                    self.initial.clo?
                } else {
                    self.initial.chi?
                };
                if self.not_worth(b, load, s) {
                    return None;
                }
                self.expander.limit(width);
                Some((load, Some(width)))
            }
            Strategy::ExtendDown => {
                let chi = b.chi?;
                if b.clo.is_some() || chi <= 0 {
                    return None;
                }
                let step = self.expander.width(global);
                let load = s.handle(chi.saturating_sub(step), width, None, Some(chi))?;
                (!self.not_worth(b, load, s)).then_some((load, Some(step)))
            }
            Strategy::ExtendUp => {
                let clo = b.clo?;
                if b.chi.is_some() || clo >= s.max {
                    return None;
                }
                let step = self.expander.width(global);
                let load = s.handle(clo.saturating_add(step), width, Some(clo), None)?;
                (!self.not_worth(b, load, s)).then_some((load, Some(step)))
            }
            Strategy::Bisect => self.bisect(b, s, global),
        }
    }

    /// Its `BisectStrategy`: a step from the bound that moved away from where the
    /// preceding target left it, when that lands nearer than the middle; else the middle.
    fn bisect(&mut self, b: Bounds, s: &Search, global: i64) -> Option<(i64, Option<i64>)> {
        let width = self.target().width;
        let (clo, chi) = (b.clo?, b.chi?);
        if clo >= s.max || chi <= 0 || in_widths(clo, chi, width) <= 1.0 {
            return None;
        }
        let middle_load = middle(clo, chi, width);
        let step = self.expander.width(global);
        if let Some(initial_hi) = self.initial.chi
            && middle_load < initial_hi
            && let Some(load) = s.handle(chi.saturating_sub(step), width, Some(clo), Some(chi))
            && load > middle_load
            && load < initial_hi
        {
            (self.expand_on_clo, self.expand_on_chi) = (false, true);
            return Some((load, Some(step)));
        }
        if let Some(initial_lo) = self.initial.clo
            && middle_load > initial_lo
            && let Some(load) = s.handle(clo.saturating_add(step), width, Some(clo), Some(chi))
            && load < middle_load
            && load > initial_lo
        {
            (self.expand_on_clo, self.expand_on_chi) = (true, false);
            return Some((load, Some(step)));
        }
        if self.not_worth(b, middle_load, s) {
            return None;
        }
        (self.expand_on_clo, self.expand_on_chi) = (false, false);
        let halves = (middle_load - clo).min(chi - middle_load);
        self.expander.limit(halves);
        Some((middle_load, Some(halves)))
    }
}

/// How many goal widths `lo..hi` spans.
fn in_widths(lo: i64, hi: i64, width: i64) -> f64 {
    (hi - lo) as f64 / width as f64
}

/// MLRsearch: every goal's selector nominates, the winner is measured, all learn from it.
pub(super) fn mlr(log: &mut TrialLog, cfg: &SearchConfig) -> Result<Vec<GoalResult>, String> {
    let grid = LoadGrid::new(cfg.min_pps, cfg.max_pps, &[cfg.resolution]);
    let max = grid.max_index();
    let chains: Vec<Vec<Target>> = cfg.goals.iter().map(|g| targets(g, cfg, &grid)).collect();
    let mut s = Search { log, grid, max };
    let (lo, hi) = s.initial_trials(&chains)?;
    let initial = Bounds {
        clo: Some(lo),
        chi: Some(hi),
    };
    let mut global = hi - lo;
    let mut selectors: Vec<Selector> = chains.iter().map(|c| Selector::new(c.clone(), initial)).collect();
    while !s.log.exhausted() && s.log.ceiling >= cfg.min_pps {
        let mut winner: Option<Candidate> = None;
        for (i, selector) in selectors.iter_mut().enumerate() {
            let Some((load, duration, width)) = selector.nominate(&s, global) else {
                continue;
            };
            let candidate = Candidate {
                load,
                duration,
                width,
                selector: i,
            };
            if winner.is_none_or(|w| !w.before(&candidate)) {
                winner = Some(candidate);
            }
        }
        let Some(w) = winner else { break };
        s.measure(w.load, w.duration)?;
        if let Some(width) = w.width {
            global = width;
        }
        selectors[w.selector].won(w.load, &s, &mut global);
    }

    // Each goal's result from every trial, by its final target.
    let log = &*s.log;
    Ok(cfg
        .goals
        .iter()
        .zip(&chains)
        .map(|(goal, chain)| {
            let target = chain.last().expect("a final target");
            let (lower, upper) = relevant_bounds(log, target);
            let conditional =
                lower.map(|l| l * (1.0 - LoadTally::of(log.trials.iter(), l, target).pessimistic_loss_ratio(target)));
            result(goal, lower, conditional, upper, cfg, log.ceiling)
        })
        .collect())
}
