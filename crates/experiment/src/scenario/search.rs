//! A scenario's throughput search: the highest aggregate rate, split evenly across the
//! chains and directions as NFVbench does, whose trials meet each loss goal (RFC 2544's
//! NDR; seed 001's 0.001% over 60 s trials), with every chain kept up across the
//! trials; then every chain is measured at the first goal's rate, as NFVbench reports
//! its chains at the NDR.

use std::time::Duration;

use sfclab_measure::{SearchConfig, Trial, TrialResult};
use sfclab_runtime::{Progress, RunError, RunSettings};
use sfclab_traffic::Rate;

use super::document::ScenarioSearch;
use super::run::ChainsUp;
use super::{Scenario, ScenarioRun};

/// One repetition: every chain up, the search over the aggregate rate, the chains
/// measured at the first goal's rate, everything down.
pub(super) fn search_once(
    scenario: &Scenario,
    cfg: &SearchConfig,
    repetition: usize,
    progress: &mut Progress,
) -> Result<ScenarioRun, RunError> {
    let mut bed = ChainsUp::up(scenario)?;
    let found = search_on(&mut bed, scenario, cfg, None, progress)?;
    let share = Rate::Pps(found.measured_at_pps / bed.streams() as f64);
    bed.set_rate(scenario, Some(share))?;
    let measured = bed.measure(&bed.run_settings(scenario));
    let mut r = bed.down(scenario, measured, repetition)?;
    r.search = Some(found);
    Ok(r)
}

/// One repetition searching chain by chain: every chain up; for each chain in turn a
/// search over its own rate (split across its directions) while the others carry their
/// share of the scenario's rate; then every chain measured at once, each at its own
/// first goal's rate; everything down.
pub(super) fn search_each_chain(
    scenario: &Scenario,
    cfg: &SearchConfig,
    repetition: usize,
    progress: &mut Progress,
) -> Result<ScenarioRun, RunError> {
    let mut bed = ChainsUp::up(scenario)?;
    let found = (0..scenario.chains().len())
        .map(|c| search_on(&mut bed, scenario, cfg, Some(c), progress))
        .collect::<Result<Vec<_>, _>>()?;
    bed.set_rates(scenario, |c| {
        Some(Rate::Pps(found[c].measured_at_pps / scenario.directions(c) as f64))
    })?;
    let measured = bed.measure(&bed.run_settings(scenario));
    let mut r = bed.down(scenario, measured, repetition)?;
    r.chain_searches = found;
    Ok(r)
}

/// A search on a testbed that is up: over the aggregate rate of every chain, or over
/// `chain`'s own rate while the others carry their share of the scenario's. Without a
/// top rate, what the tester reaches (through every chain, or through `chain` beside the
/// others' load) is measured first and is the top.
fn search_on(
    bed: &mut ChainsUp,
    scenario: &Scenario,
    cfg: &SearchConfig,
    chain: Option<usize>,
    progress: &mut Progress,
) -> Result<ScenarioSearch, RunError> {
    let run = bed.run_settings(scenario);
    // The links whose streams the searched rate is split over: one chain's, or all.
    let searched = match chain {
        Some(c) => bed.links_of(c),
        None => 0..bed.streams(),
    };
    let name = chain.map_or(String::new(), |c| format!("chain {} ", c + 1));
    let mut cfg = cfg.clone();
    if !cfg.max_pps.is_finite() {
        bed.set_rates(scenario, |c| match chain {
            Some(k) if k != c => None,
            _ => Some(Rate::Max),
        })?;
        let trial = RunSettings {
            duration: Some(cfg.final_duration),
            ..run.clone()
        };
        let reports = bed.measure(&trial).into_reports()?;
        let reports = &reports[searched.clone()];
        let reached: f64 = reports.iter().map(|r| r.generated_mpps * 1e6).sum();
        cfg.max_pps = reached.max(cfg.min_pps * 2.0);
        progress.working(&format!(
            "{name}the tester reaches {:.3} Mpps: the search's top",
            cfg.max_pps / 1e6
        ));
    }
    let result = {
        let mut trial = ScenarioTrial {
            bed,
            scenario,
            run,
            searched,
            chain,
        };
        sfclab_measure::search(&mut trial, &cfg, &mut |t: &TrialResult| {
            progress.working(&format!(
                "{name}trial at {:.3} Mpps: loss {:.5}%{}",
                t.offered_pps / 1e6,
                t.loss_ratio * 100.0,
                if t.valid { "" } else { " (not offered: not counted)" }
            ))
        })
        .map_err(|reason| RunError::failed("search", reason))?
    };
    let at = result.goals.first().and_then(|g| g.lower_pps).unwrap_or(cfg.min_pps);
    Ok(ScenarioSearch {
        result,
        measured_at_pps: at,
    })
}

/// A trial: every stream at its share of the aggregate rate, for the trial's window; or,
/// searching one chain, that chain's streams at their share of the trial's rate and the
/// others at the scenario's.
struct ScenarioTrial<'a> {
    bed: &'a mut ChainsUp,
    scenario: &'a Scenario,
    run: RunSettings,
    /// The links whose streams the trial's rate is split over.
    searched: std::ops::Range<usize>,
    /// The chain searched, when one is.
    chain: Option<usize>,
}

impl Trial for ScenarioTrial<'_> {
    fn interrupted(&self) -> bool {
        self.run.stop.as_ref().is_some_and(sfclab_runtime::Stop::requested)
    }

    fn run(&mut self, offered_pps: f64, duration: Duration) -> Result<TrialResult, String> {
        if self.interrupted() {
            return Err("interrupted by Ctrl-C".into());
        }
        let share = Rate::Pps(offered_pps / self.searched.len() as f64);
        let searched = self.chain;
        self.bed
            .set_rates(self.scenario, |c| match searched {
                Some(k) if k != c => None,
                _ => Some(share),
            })
            .map_err(|e| e.to_string())?;
        let run = RunSettings {
            duration: Some(duration),
            ..self.run.clone()
        };
        let all = self.bed.measure(&run).into_reports().map_err(|e| e.to_string())?;
        let reports = &all[self.searched.clone()];
        // Every chain's window together; what the tester (or the emulated line) could
        // not offer never reached a VNF: not their loss, and the trial did not offer
        // its rate (invalid, as a single chain's search counts it).
        let sent: u64 = reports.iter().map(|r| r.window_loss.sent - r.not_offered).sum();
        let received: u64 = reports.iter().map(|r| r.window_loss.received).sum();
        let window_s = reports.first().map_or(duration.as_secs_f64(), |r| r.duration_s);
        Ok(TrialResult::new(offered_pps, window_s, sent, received))
    }
}
