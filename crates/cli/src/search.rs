//! `sfclab search`: the chain as a device under test on its own core(s), the generator
//! on another as the tester, and an NDR/PDR search over trials of the chain.

use clap::Args;
use sfclab_measure::{Goal, Method, RepeatedSearch, SearchConfig, latency_plan, repeated_search};
use sfclab_runtime::{PipelineSettings, Placement};
use std::process::ExitCode;
use std::time::Duration;

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, Table};
use std::fmt::Write as _;

use crate::config::ChainSpec;
use crate::outcome::{self, USAGE};
use crate::progress::Progress;
use crate::render::{NfOwned, ns, num, right};
use crate::{RunArgs, execute, load_spec, render, stop_flag};

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
pub fn isolate_dut(spec: &mut ChainSpec, shared_core: bool) -> Result<DutPlacement, String> {
    use sfclab_runtime::placement::{allowed_cores, default_chain_core};
    let allowed = allowed_cores();
    if spec.pipeline.is_none() {
        let chain_core = spec
            .settings
            .core
            .or_else(default_chain_core)
            .ok_or("this process may use no core")?;
        let mut run = spec.settings.clone();
        run.core = None;
        run.pool_size = 0;
        spec.pipeline = Some(PipelineSettings {
            run,
            placement: Placement::SCore,
            cores: vec![chain_core],
            ..Default::default()
        });
    }
    let p = spec.pipeline.as_mut().expect("a pipeline now");
    let chain_cores: Vec<usize> = p
        .placement
        .stages(spec.nfs.len().max(1), &p.cores)
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

pub fn parse_rate_pps(s: &str, frame: f64) -> Result<f64, String> {
    s.parse::<sfclab_traffic::Rate>()?
        .pps(frame)
        .ok_or_else(|| format!("`{s}`: give a number here, not max"))
}

/// The search's settings from the flags; errors name the flag.
fn search_config(a: &SearchArgs, spec: &ChainSpec) -> Result<SearchConfig, String> {
    let method: Method = a.method.parse().map_err(|e| format!("--method: {e}"))?;
    if method == Method::Binary && (a.exceed_ratio.is_some() || a.duration_sum.is_some()) {
        return Err(
            "--exceed-ratio and --duration-sum are MLRsearch's: the binary search decides a load on one trial".into(),
        );
    }
    let final_duration = spec.settings.duration.unwrap_or(Duration::from_secs(1));
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
    let resolution = match a.resolution.trim().strip_suffix('%').map(str::parse::<f64>) {
        Some(Ok(v)) => v / 100.0,
        _ => return Err(format!("--resolution `{}`: write a percentage like 0.5%", a.resolution)),
    };
    let initial = humantime::parse_duration(&a.initial_duration)
        .map_err(|e| format!("--initial-duration `{}`: {e}", a.initial_duration))?;
    let frame = spec.traffic.sizes.mean();
    let min_pps = parse_rate_pps(&a.min_rate, frame).map_err(|e| format!("--min-rate: {e}"))?;
    let max_pps = match &a.max_rate {
        Some(m) => parse_rate_pps(m, frame).map_err(|e| format!("--max-rate: {e}"))?,
        // Set from a probe run once the chain is placed.
        None => f64::INFINITY,
    };
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
    if a.repeat == 0 {
        return Err("--repeat: at least 1".into());
    }
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
    let mut spec = match load_spec(&a.run) {
        Ok(s) => s,
        Err(e) => return outcome::fail(USAGE, &e.to_string()),
    };
    if spec.io.replay.as_ref().is_some_and(|r| r.at_file_timestamps) {
        return outcome::fail(
            USAGE,
            "--replay-timestamps: a search offers each trial at its own rate; drop it to replay the capture at those rates",
        );
    }
    let (mut cfg, percents) = match (search_config(&a, &spec), latency_percents(&a)) {
        (Ok(c), Ok(p)) => (c, p),
        (Err(e), _) | (_, Err(e)) => return outcome::fail(USAGE, &e),
    };
    let dut = match isolate_dut(&mut spec, a.shared_core) {
        Ok(d) => d,
        Err(e) => return outcome::fail(USAGE, &e),
    };
    let stop = stop_flag();
    let mut trial = execute::ChainTrial {
        spec: spec.clone(),
        reports: Vec::new(),
        stop: stop.clone(),
    };
    if cfg.max_pps.is_infinite() {
        // Every valid trial is bounded by what the generator reaches against the chain.
        let probe = spec.as_trial(
            sfclab_traffic::Rate::Max,
            0.0,
            cfg.initial_duration.max(Duration::from_millis(200)),
        );
        match execute::run(&probe) {
            // Pacing costs the generator a little: its paced ceiling is below this. What a
            // tester's transmit refused was never offered.
            Ok(r) => {
                let offered = r.window_loss.sent - r.not_offered;
                cfg.max_pps = offered as f64 / r.duration_s.max(1e-9) * 0.95;
            }
            Err(e) => return outcome::fail(outcome::FAILURE, &e.to_string()),
        }
    }
    if let Err((k, r)) = cfg.validate() {
        return outcome::fail(USAGE, &format!("{k}: {r}"));
    }
    let mut progress = Progress::new("trials", cfg.expected_trials() * a.repeat);
    let repeat = a.repeat;
    let searched = repeated_search(&mut trial, &cfg, repeat, &mut |k, t| {
        progress.step(&format!(
            "search {}/{repeat}: {:.3} Mpps for {:.2} s: loss {:.5}%{}",
            k + 1,
            t.offered_pps / 1e6,
            t.duration_s,
            t.loss_ratio * 100.0,
            if t.valid {
                ""
            } else {
                " (invalid: the generator fell short)"
            }
        ));
    });
    progress.finish();
    let RepeatedSearch { result, per_search } = match searched {
        Ok(r) => r,
        Err(e) => return outcome::fail(outcome::FAILURE, &e),
    };

    // Latency at fractions of the last goal's rate, unless stopped.
    let mut latency = Vec::new();
    let base = result.goals.last().and_then(|g| g.lower_pps);
    let probe_pps = if spec.traffic.probe_pps > 0.0 {
        spec.traffic.probe_pps
    } else {
        10_000.0
    };
    if let (Some(base), false) = (base, result.interrupted) {
        for level in latency_plan(base, cfg.min_pps, probe_pps, &percents) {
            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                break;
            }
            match trial.latency_run(level.rate_pps, cfg.final_duration, probe_pps, level.empty_chain) {
                Ok(rep) => latency.push(LatencyMeasured {
                    level,
                    latency: rep.latency,
                }),
                Err(e) => {
                    eprintln!("latency at {}: {e}", level.label);
                    break;
                }
            }
        }
    }
    let interrupted = result.interrupted || stop.load(std::sync::atomic::Ordering::Relaxed);
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
    let doc = SearchDocument {
        schema: SEARCH_SCHEMA,
        version: env!("CARGO_PKG_VERSION"),
        machine: sfclab_bench::Machine::read(),
        name: spec.name.clone(),
        traffic: spec.traffic.clone(),
        chain_config: spec
            .nfs
            .iter()
            .map(|(n, c)| render::NfOwned {
                name: n.clone(),
                config: c.clone(),
            })
            .collect(),
        frame_size_mean: spec.traffic.sizes.mean(),
        dut,
        interrupted,
        search: result,
        repetitions: per_search,
        chain_analysis,
        latency,
    };
    let text = if a.run.json {
        serde_json::to_string_pretty(&doc).expect("serialisable") + "\n"
    } else {
        search_text(&doc)
    };
    outcome::emit_then(&text, outcome::done(interrupted))
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
    pub machine: sfclab_bench::Machine,
    pub name: String,
    pub traffic: sfclab_traffic::GeneratorConfig,
    pub chain_config: Vec<NfOwned>,
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

/// The terminal view of a search.
pub fn search_text(d: &SearchDocument) -> String {
    let mut s = String::new();
    let r = &d.search;
    let traffic = &d.traffic;
    let frame = traffic.sizes.mean();
    let mrr = !d.dut.isolated;
    let _ = writeln!(
        s,
        "sfclab search | chain `{}`, {} B frames, {} flow(s), {:?} search: {} trials, {:.1} s of traffic ({} invalid)",
        d.name, traffic.sizes, traffic.flows, r.method, r.trial_count, r.total_trial_s, r.invalid_trials
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
