//! `sfclab search`: the chain as a device under test on its own core(s), the generator
//! on another as the tester, and an NDR/PDR search over trials of the chain.

use clap::Args;
use sfclab_experiment::search::{
    LatencyMeasured, SearchDocument, SearchError, SearchPlan, parse_goal, parse_rate_range, parse_resolution, search,
};
use sfclab_measure::{Method, SearchConfig};
use std::process::ExitCode;
use std::time::Duration;

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, Table};
use std::fmt::Write as _;

use crate::outcome::{self, USAGE};
use crate::progress::shown;
use crate::render::{ns, num, right};
use crate::{RunArgs, ctrl_c, load_experiment};
use sfclab_experiment::Experiment;

#[derive(Args)]
pub struct SearchArgs {
    /// The chain and its traffic, as for `run` (`--duration` is the final trial's).
    #[command(flatten)]
    pub run: RunArgs,
    /// Loss goals: `ndr` (0%), `pdr` (0.5%, FD.io CSIT's PDR), or percentages like
    /// `0.1%`; comma separated. NFVbench's defaults are `0.001%,0.1%`.
    #[arg(long, value_delimiter = ',', default_value = "ndr,pdr", help_heading = "Search")]
    pub goals: Vec<String>,
    /// `mlr` (MLRsearch, the reference's decision rules) or `binary` (RFC 2544-style:
    /// one trial decides a load).
    #[arg(long, default_value = "mlr", help_heading = "Search")]
    pub method: String,
    /// Relative resolution at which a search ends, e.g. `0.5%`.
    #[arg(long, default_value = "0.5%", help_heading = "Search")]
    pub resolution: String,
    /// MLR: duration of the first, shortest trials.
    #[arg(long, default_value = "125ms", help_heading = "Search")]
    pub initial_duration: String,
    /// MLR: share of a load's trial time allowed to exceed the loss goal (a VM's stalls
    /// lose a few packets at any load; 0 lets one lossy trial decide).
    #[arg(long, help_heading = "Search")]
    pub exceed_ratio: Option<f64>,
    /// MLR: trial time a load needs before it is classified in the final phase, e.g.
    /// `21s` (default: 21 final trials, MLRsearch's default sum for its 1 s trials; a few
    /// trials stalled by the VM then cannot end the search low).
    #[arg(long, help_heading = "Search")]
    pub duration_sum: Option<String>,
    /// Lowest rate searched.
    #[arg(long, default_value = "10kpps", help_heading = "Search")]
    pub min_rate: String,
    /// Highest rate searched (default: what the generator reaches with the chain, measured first).
    #[arg(long, help_heading = "Search")]
    pub max_rate: Option<String>,
    /// Give up after this many trials (the result then says it did not converge).
    #[arg(long, default_value_t = 1000, help_heading = "Search")]
    pub max_trials: usize,
    /// Whole searches to run; each goal reports the median search's result, and all of
    /// them are listed.
    #[arg(long, default_value_t = 1, help_heading = "Search")]
    pub repeat: usize,
    /// After the search: latency at these percentages of the last goal's throughput
    /// (0 means the minimum rate), with a probe stream, plus an empty chain at the lowest
    /// level to calibrate the generator's own latency. `none` skips it.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0,10,50,90,100",
        help_heading = "Search"
    )]
    pub latency_at: Vec<String>,
    /// Let the generator share the chain's core when no other core is allowed. The
    /// results are then the pair's maximum receive rates (MRR), not the chain's
    /// throughput, and are labeled so.
    #[arg(long, help_heading = "Search")]
    pub shared_core: bool,
}

/// The search's settings from the flags; errors name the flag.
fn search_config(a: &SearchArgs, experiment: &Experiment) -> Result<SearchConfig, String> {
    let method: Method = a.method.parse().map_err(|e| format!("--method: {e}"))?;
    if method == Method::Binary && (a.exceed_ratio.is_some() || a.duration_sum.is_some()) {
        return Err(
            "--exceed-ratio and --duration-sum are MLRsearch's: the binary search decides a load on one trial".into(),
        );
    }
    let final_duration = experiment.settings.duration.unwrap_or(Duration::from_secs(1));
    let duration_sum = match &a.duration_sum {
        Some(d) => humantime::parse_duration(d)
            .map_err(|e| format!("--duration-sum `{d}`: {e}"))?
            .as_secs_f64(),
        None => 21.0 * final_duration.as_secs_f64(),
    };
    let exceed_ratio = a.exceed_ratio.unwrap_or(0.5);
    let mut goals = Vec::new();
    for g in &a.goals {
        let mut goal = parse_goal(g).map_err(|e| format!("--goals: {e}"))?;
        if method == Method::Mlr {
            goal.exceed_ratio = exceed_ratio;
            goal.duration_sum_s = duration_sum;
        }
        goals.push(goal);
    }
    let resolution = parse_resolution(&a.resolution).map_err(|e| format!("--resolution {e}"))?;
    let initial = humantime::parse_duration(&a.initial_duration)
        .map_err(|e| format!("--initial-duration `{}`: {e}", a.initial_duration))?;
    // Without --max-rate the highest is set from a probe run once the chain is placed.
    let (min_pps, max_pps) = parse_rate_range(&a.min_rate, a.max_rate.as_deref(), experiment.traffic.sizes.mean())
        .map_err(|(flag, e)| format!("--{flag}: {e}"))?;
    let cfg = SearchConfig {
        method,
        goals,
        min_pps,
        max_pps,
        resolution,
        final_duration,
        initial_duration: initial.min(final_duration),
        preceding_targets: 2,
        max_trials: a.max_trials,
    };
    Ok(cfg)
}

fn latency_percents(a: &SearchArgs) -> Result<Vec<f64>, String> {
    if a.latency_at.iter().any(|l| l.eq_ignore_ascii_case("none")) {
        return Ok(Vec::new());
    }
    a.latency_at
        .iter()
        .map(|l| {
            l.trim()
                .trim_end_matches('%')
                .parse::<f64>()
                .map_err(|_| format!("--latency-at: `{l}` is not a percentage"))
        })
        .collect()
}

pub fn cmd_search(a: SearchArgs) -> ExitCode {
    let experiment = match load_experiment(&a.run) {
        Ok(s) => s,
        Err(e) => return outcome::fail(USAGE, &e.to_string()),
    };
    let plan = match (search_config(&a, &experiment), latency_percents(&a)) {
        (Ok(config), Ok(latency_at_percent)) => SearchPlan {
            config,
            repeat: a.repeat,
            latency_at_percent,
            shared_core: a.shared_core,
        },
        (Err(e), _) | (_, Err(e)) => return outcome::fail(USAGE, &e),
    };
    let searched = shown("trials", |progress| search(experiment, plan, ctrl_c(), progress));
    let doc = match searched {
        Ok(d) => d,
        Err(SearchError::Invalid(e)) => return outcome::fail(USAGE, &e),
        Err(SearchError::Failed(e)) => return outcome::fail(outcome::FAILURE, &e),
    };
    let text = if a.run.json {
        serde_json::to_string_pretty(&doc).expect("serialisable") + "\n"
    } else {
        search_text(&doc)
    };
    outcome::emit_then(&text, outcome::done(doc.interrupted))
}

/// The terminal view of a search.
pub fn search_text(d: &SearchDocument) -> String {
    let mut s = String::new();
    let r = &d.search;
    let traffic = &d.traffic;
    let frame = traffic.sizes.mean();
    let mrr = !d.dut.isolated;
    let accepted = r.trials.iter().filter(|t| t.shortfall_accepted.is_some()).count();
    let _ = writeln!(
        s,
        "sfclab search | chain `{}`, {} B frames, {} flow(s), {:?} search: {} trials, {:.1} s of traffic ({} invalid{})",
        d.name,
        traffic.sizes,
        traffic.flows,
        r.method,
        r.trial_count,
        r.total_trial_s,
        r.invalid_trials,
        if accepted > 0 {
            format!("; {accepted} counted though the generator fell up to 5% short: its stalls, not its speed")
        } else {
            String::new()
        }
    );
    let _ = writeln!(
        s,
        "placement: generator on core {}, chain on core(s) {}{}\n",
        d.dut.generator_core,
        d.dut
            .chain_cores
            .iter()
            .map(|c| c.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        if mrr {
            " -- SHARED: these are the pair's maximum receive rates (MRR), not the chain's throughput"
        } else {
            ""
        }
    );
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header([
        "goal",
        "loss goal",
        if mrr { "MRR offered Mpps" } else { "offered Mpps" },
        "forwarded Mpps",
        "Gbit/s L1",
        "Gbit/s L2",
        "first failing Mpps",
        "width",
        "converged",
    ]);
    for g in &r.goals {
        let gbps = |pps: f64, extra: f64| pps * (frame + extra) * 8.0 / 1e9;
        let state = if g.limited_by_source {
            "no: the generator was the limit"
        } else if g.converged {
            "yes"
        } else if r.interrupted {
            "no (interrupted)"
        } else {
            "no (trial limit)"
        };
        t.add_row(vec![
            Cell::new(&g.goal.name),
            right(format!("{}%", g.goal.loss_ratio * 100.0)),
            right(g.lower_pps.map_or("none".into(), |l| format!("{:.3}", l / 1e6))),
            right(
                g.conditional_throughput_pps
                    .map_or("-".into(), |l| format!("{:.3}", l / 1e6)),
            ),
            right(g.lower_pps.map_or("-".into(), |l| format!("{:.2}", gbps(l, 20.0)))),
            right(g.lower_pps.map_or("-".into(), |l| format!("{:.2}", gbps(l, 0.0)))),
            right(
                g.upper_pps
                    .map_or("none (max met)".into(), |u| format!("{:.3}", u / 1e6)),
            ),
            right(format!("{:.2}%", g.relative_width * 100.0)),
            Cell::new(state),
        ]);
    }
    let _ = writeln!(s, "{t}");
    if let Some(c) = r.source_ceiling_pps {
        let _ = writeln!(
            s,
            "note: the generator could offer at most {:.3} Mpps; no load above it was measured",
            c / 1e6
        );
    }
    if d.repetitions.len() > 1 {
        for (g, goal) in r.goals.iter().enumerate() {
            let each: Vec<String> = d
                .repetitions
                .iter()
                .map(|rep| rep[g].map_or("none".into(), |l| format!("{:.3}", l / 1e6)))
                .collect();
            let _ = writeln!(
                s,
                "{} over {} searches: {} Mpps (median reported)",
                goal.goal.name,
                d.repetitions.len(),
                each.join(", ")
            );
        }
    }
    if !d.latency.is_empty() {
        s.push_str(&latency_table(
            r.goals.last().map_or("", |g| g.goal.name.as_str()),
            &d.latency,
        ));
    }
    if d.interrupted {
        let _ = writeln!(
            s,
            "INTERRUPTED: stopped by Ctrl-C; the figures above are from the trials made so far"
        );
    }
    s
}

/// The JSON Schema of the search document.
pub fn schema() -> String {
    crate::render::schema_of::<SearchDocument>(
        "search-3.json",
        "One sfclab search (`sfclab search --json`), schema sfclab.search/3.",
    )
}

fn latency_table(goal: &str, levels: &[LatencyMeasured]) -> String {
    let mut s = String::new();
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header(["load", "Mpps", "min", "p50", "p90", "p99", "p99.9", "max", "probes"]);
    for l in levels {
        let mut row = vec![
            Cell::new(&l.level.label),
            right(format!("{:.3}", l.level.rate_pps / 1e6)),
        ];
        match &l.latency {
            Some(x) => {
                for v in [x.min_ns, x.p50_ns, x.p90_ns, x.p99_ns, x.p999_ns, x.max_ns] {
                    row.push(right(ns(v)));
                }
                row.push(right(num(x.samples)));
            }
            None => row.extend((0..7).map(|_| right("-"))),
        }
        t.add_row(row);
    }
    let _ = writeln!(
        s,
        "latency at fractions of the {goal} rate (probes), and the generator's own (no NF)\n{t}"
    );
    s
}
