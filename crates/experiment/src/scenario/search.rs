//! A scenario's throughput search: the highest aggregate rate, split evenly across the
//! chains and directions as NFVbench does, whose trials meet each loss goal (RFC 2544's
//! NDR; seed 001's 0.001% over 60 s trials), with every chain kept up across the
//! trials; then every chain is measured at the first goal's rate, as NFVbench reports
//! its chains at the NDR.

use std::time::Duration;

use serde::Serialize;
use sfclab_measure::{Method, SearchConfig, SearchResult, Trial, TrialResult};
use sfclab_runtime::{RunError, RunSettings};
use sfclab_traffic::Rate;

use super::run::Testbed;
use super::{Scenario, ScenarioFlags, ScenarioRun};
use crate::chain_file::Experiment;
use crate::search::{parse_goal, parse_rate_range, parse_resolution};

/// What a repetition's search found, and the rate its chains were then measured at.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ScenarioSearch {
    /// The goals' bounds and every trial (aggregate offered rate, sent and received
    /// over all chains and directions).
    pub result: SearchResult,
    /// The aggregate rate the chains were measured at afterwards (the first goal's lower
    /// bound; the minimum rate when it had none), packets per second.
    pub measured_at_pps: f64,
}

/// The search's settings from the flags; an error names the flag.
pub(super) fn config(flags: &ScenarioFlags, template: &Experiment) -> Result<SearchConfig, (&'static str, String)> {
    let method: Method = flags.method.parse().map_err(|e| ("method", e))?;
    let final_duration = template.settings.duration.unwrap_or(Duration::from_secs(1));
    let mut goals = Vec::new();
    for g in &flags.goals {
        goals.push(parse_goal(g).map_err(|e| ("goals", e))?);
    }
    let resolution = parse_resolution(&flags.resolution).map_err(|e| ("resolution", e))?;
    let (min_pps, max_pps) = parse_rate_range(
        &flags.min_rate,
        flags.max_rate.as_deref(),
        template.traffic.sizes.mean(),
    )?;
    let cfg = SearchConfig {
        method,
        goals,
        min_pps,
        max_pps,
        resolution,
        final_duration,
        initial_duration: final_duration.min(Duration::from_millis(125)),
        preceding_targets: 2,
        max_trials: 200,
    };
    // Without --max-rate the top is measured first; check the rest with a stand-in.
    SearchConfig {
        max_pps: if max_pps.is_finite() { max_pps } else { min_pps * 2.0 },
        ..cfg.clone()
    }
    .validate()?;
    Ok(cfg)
}

/// One repetition: every chain up, the search over the aggregate rate, the chains
/// measured at the first goal's rate, everything down.
pub(super) fn search_once(
    scenario: &Scenario,
    cfg: &SearchConfig,
    repetition: usize,
    progress: &mut dyn FnMut(String),
) -> Result<ScenarioRun, RunError> {
    let mut bed = Testbed::up(scenario)?;
    let run = bed.run_settings(scenario);
    let streams = bed.streams() as f64;
    let mut cfg = cfg.clone();
    if !cfg.max_pps.is_finite() {
        // What the tester reaches through every chain at full speed: the search's top.
        bed.set_rate(scenario, Some(Rate::Max))?;
        let trial = RunSettings {
            duration: Some(cfg.final_duration),
            ..run.clone()
        };
        let reports = bed.measure(&trial).into_reports()?;
        let reached: f64 = reports.iter().map(|r| r.generated_mpps * 1e6).sum();
        cfg.max_pps = reached.max(cfg.min_pps * 2.0);
        progress(format!(
            "the tester reaches {:.3} Mpps through every chain: the search's top",
            cfg.max_pps / 1e6
        ));
    }
    let result = {
        let mut trial = ScenarioTrial {
            bed: &mut bed,
            scenario,
            run: run.clone(),
            streams,
        };
        sfclab_measure::search(&mut trial, &cfg, &mut |t: &TrialResult| {
            progress(format!(
                "trial at {:.3} Mpps: loss {:.5}%{}",
                t.offered_pps / 1e6,
                t.loss_ratio * 100.0,
                if t.valid { "" } else { " (not offered: not counted)" }
            ))
        })
        .map_err(|reason| RunError::Setting { key: "search", reason })?
    };
    let at = result.goals.first().and_then(|g| g.lower_pps).unwrap_or(cfg.min_pps);
    bed.set_rate(scenario, Some(Rate::Pps(at / streams)))?;
    let measured = bed.measure(&run);
    let mut r = bed.down(measured, repetition)?;
    r.search = Some(ScenarioSearch {
        result,
        measured_at_pps: at,
    });
    Ok(r)
}

/// A trial: every stream at its share of the aggregate rate, for the trial's window.
struct ScenarioTrial<'a> {
    bed: &'a mut Testbed,
    scenario: &'a Scenario,
    run: RunSettings,
    streams: f64,
}

impl Trial for ScenarioTrial<'_> {
    fn interrupted(&self) -> bool {
        self.run
            .stop
            .as_deref()
            .is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed))
    }

    fn run(&mut self, offered_pps: f64, duration: Duration) -> Result<TrialResult, String> {
        if self.interrupted() {
            return Err("interrupted by Ctrl-C".into());
        }
        self.bed
            .set_rate(self.scenario, Some(Rate::Pps(offered_pps / self.streams)))
            .map_err(|e| e.to_string())?;
        let run = RunSettings {
            duration: Some(duration),
            ..self.run.clone()
        };
        let reports = self.bed.measure(&run).into_reports().map_err(|e| e.to_string())?;
        // Every chain's window together; what the tester (or the emulated line) could
        // not offer never reached a VNF: not their loss, and the trial did not offer
        // its rate (invalid, as a single chain's search counts it).
        let sent: u64 = reports.iter().map(|r| r.window_loss.sent - r.not_offered).sum();
        let received: u64 = reports.iter().map(|r| r.window_loss.received).sum();
        let window_s = reports.first().map_or(duration.as_secs_f64(), |r| r.duration_s);
        Ok(TrialResult::new(offered_pps, window_s, sent, received))
    }
}
