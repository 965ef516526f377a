//! `sfclab scenario`: many chains side by side, each measured on its own and together.

use clap::Args;
use comfy_table::Table;
use comfy_table::presets::UTF8_FULL_CONDENSED;
use sfclab_experiment::remote_hops::HopControl;
use sfclab_experiment::scenario::{Attachment, Scenario, ScenarioDocument, ScenarioFlags};
use sfclab_experiment::settings;
use sfclab_measure::Summary;
use std::fmt::Write as _;
use std::process::ExitCode;

use crate::outcome;
use crate::render::{num, right};

#[derive(Args, Clone)]
pub struct ScenarioArgs {
    /// Scenario file (YAML), or a chain file (one chain of it, placed on hosts by its
    /// `hosts:`); without one, the flags describe it (default: one PVP chain of the
    /// router preset).
    file: Option<std::path::PathBuf>,
    #[command(flatten)]
    scenario: ScenarioFlags,
    /// Settings of every chain; each overrides the file's. `--rate` is the aggregate,
    /// split evenly across the chains.
    #[command(flatten)]
    settings: settings::Settings,
    /// Print the result as JSON (schema `sfclab.scenario/4`).
    #[arg(long, help_heading = "Output")]
    json: bool,
    /// Also write scenario.json and an HTML report (per-chain tables, figures) here;
    /// `sfclab report` draws one over several scenarios (throughput against chains).
    #[arg(long, value_name = "DIR", help_heading = "Output")]
    out: Option<std::path::PathBuf>,
    /// The VNFs run elsewhere (a cluster's pods, as `sfclab deploy k8s` writes them),
    /// each serving run after run: attach to their memif sockets in DIR (and their
    /// control files there) instead of starting them.
    #[arg(long, value_name = "DIR", help_heading = "Scenario")]
    attach: Option<std::path::PathBuf>,
    /// With --attach: reach the VNFs over TCP instead of control files,
    /// `tcp:{hop}.vnfs:7000` (`{hop}` each VNF's name, `c1-hop-2`).
    #[arg(long, value_name = "tcp:ADDRESS", requires = "attach", help_heading = "Scenario")]
    attach_control: Option<String>,
}

pub fn cmd_scenario(a: ScenarioArgs) -> ExitCode {
    let mut scenario = match Scenario::load(a.file.as_deref(), &a.scenario, &a.settings) {
        Ok(s) => s,
        Err(e) => return outcome::fail(outcome::USAGE, &e.to_string()),
    };
    if let Some(dir) = a.attach.clone() {
        let control = match a.attach_control.as_deref().map(|c| c.strip_prefix("tcp:")) {
            None => HopControl::Files(dir.clone()),
            Some(Some(address)) if address.contains(':') => HopControl::Tcp(address.to_string()),
            Some(_) => {
                return outcome::fail(
                    outcome::USAGE,
                    "--attach-control: write tcp:HOST:PORT, `{hop}` in HOST standing for each VNF's name",
                );
            }
        };
        if let Err(e) = scenario.attach(Attachment { memif: dir, control }) {
            return outcome::fail(outcome::USAGE, &e.to_string());
        }
    }
    if let Some(dir) = &a.out
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        return outcome::fail(outcome::USAGE, &format!("--out {}: {e}", dir.display()));
    }
    scenario.stop_on(&crate::ctrl_c());
    let result = crate::progress::shown("repetitions", |progress| {
        sfclab_experiment::scenario::run(&scenario, progress)
    });
    let doc = match result {
        Ok(d) => d,
        Err(e) => return outcome::fail(outcome::of_run_error(&e), &e.to_string()),
    };
    let text = if a.json {
        serde_json::to_string_pretty(&doc).expect("a document serializes") + "\n"
    } else {
        table(&doc)
    };
    if let Some(dir) = &a.out
        && let Err(e) = write_out(&doc, dir)
    {
        return outcome::fail(outcome::FAILURE, &e);
    }
    let conserved = doc.runs.iter().all(|r| r.aggregate.conserved);
    match (conserved, outcome::emit(&text)) {
        (_, Err(e)) => outcome::fail(outcome::FAILURE, &e),
        (false, Ok(())) => outcome::fail(
            outcome::CONSERVATION,
            "packet conservation violated in a chain (its row says where)",
        ),
        (true, Ok(())) => ExitCode::from(outcome::done(doc.interrupted)),
    }
}

/// scenario.json and the report of this one scenario in `dir`.
fn write_out(doc: &ScenarioDocument, dir: &std::path::Path) -> Result<(), String> {
    let value = serde_json::to_value(doc).expect("a document serializes");
    let path = dir.join("scenario.json");
    let text = serde_json::to_string_pretty(&value).expect("a document serializes") + "\n";
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!("wrote {}", path.display());
    for f in crate::scenario_report::write_all(std::slice::from_ref(&value), dir)? {
        eprintln!("wrote {}", f.display());
    }
    Ok(())
}

pub fn schema() -> String {
    crate::render::schema_of::<ScenarioDocument>(
        "scenario-4.json",
        "One sfclab scenario (`sfclab scenario --json`), schema sfclab.scenario/4.",
    )
}

/// `fwd`, `rev`: a direction in a table cell.
fn short(direction: &str) -> &str {
    match direction {
        "forward" => "fwd",
        "reverse" => "rev",
        other => other,
    }
}

fn us(ns: f64) -> String {
    format!("{:.1}", ns / 1e3)
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or("-".into(), |v| format!("{v:.digits$}"))
}

fn summary(s: &Option<Summary>, digits: usize) -> String {
    match s {
        None => "-".into(),
        Some(s) => match s.ci95_half_width {
            None => format!("{:.digits$}", s.mean),
            Some(h) => format!(
                "{:.digits$} ± {h:.digits$} (95%, n = {}; median {:.digits$}, {:.digits$}–{:.digits$})",
                s.mean, s.n, s.median, s.min, s.max
            ),
        },
    }
}

/// The terminal view: the scenario, per chain (the last repetition), per process, and
/// the repetitions together.
pub fn table(d: &ScenarioDocument) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "sfclab {} | scenario `{}`", d.version, d.name);
    write_setup(&mut s, d);
    let Some(last) = d.runs.last() else {
        let _ = writeln!(s, "no repetition finished");
        return s;
    };
    let chains = chain_table(d, last);
    let _ = writeln!(
        s,
        "\nrepetition {} of {} (set up in {:.2} s, torn down in {:.2} s)\n{chains}",
        last.repetition,
        d.runs.len(),
        last.setup_s,
        last.teardown_s
    );
    write_whole_run(&mut s, last);
    write_searches(&mut s, last);
    let _ = writeln!(s, "VNF processes over the measured window\n{}", process_table(last));
    write_summary(&mut s, d);
    s
}

/// The groups, the offered load, the cores, the NIC and the hosts.
fn write_setup(s: &mut String, d: &ScenarioDocument) {
    let several = d.groups.len() > 1;
    for g in &d.groups {
        let _ = writeln!(
            s,
            "{}{} x {} of {} ({} VNF process(es) each{}){}, {} ({} frames){}",
            if several {
                format!("group `{}`: ", g.name)
            } else {
                String::new()
            },
            g.chains,
            g.shape,
            g.vnf,
            g.vnfs_per_chain,
            g.vnf_rate_cap
                .as_ref()
                .map_or(String::new(), |c| format!(", licence {c}")),
            match g.standby {
                0 => String::new(),
                k => format!(", {k} standby"),
            },
            if g.bidirectional { "both directions" } else { "one way" },
            g.frame_sizes,
            if several {
                format!(", offered {}", g.rate)
            } else {
                String::new()
            },
        );
    }
    let _ = writeln!(
        s,
        "offered {} in all, memif {}; {}, tester on core {} | window {:.2} s after {:.2} s warm-up{}",
        d.offered,
        d.memif_wait,
        match d.oversubscription {
            Some(o) => format!("VNFs on cores {:?} ({o:.2} processes per core)", d.vnf_cores),
            None => "VNFs where they were started".into(),
        },
        d.tester_core.map_or("-".into(), |c| c.to_string()),
        d.duration_s,
        d.warmup_s,
        if d.interrupted { " | INTERRUPTED" } else { "" }
    );
    if let Some(g) = d.nic_capacity_gbps {
        let _ = writeln!(
            s,
            "the NIC carries {g} Gbit/s to and from the VNFs: every VNF's sends share it"
        );
    }
    if let Some(h) = &d.hosts {
        let _ = writeln!(
            s,
            "two hosts: VNFs on hosts {:?}, tester sends from host 1 and receives on host {}; cable {} Gbit/s each way{} | {} tunnel(s) per chain",
            h.vnf_hosts,
            h.sink_host,
            h.link_gbps,
            if h.charge_tunnel {
                " (tunnel bytes charged)"
            } else {
                " (frames' own rate)"
            },
            h.crossings_per_chain
        );
    }
}

/// A row per chain of the last repetition, then each group's and the whole's.
fn chain_table(d: &ScenarioDocument, last: &sfclab_experiment::scenario::ScenarioRun) -> Table {
    let several = d.groups.len() > 1;
    let mut chains = Table::new();
    chains.load_preset(UTF8_FULL_CONDENSED);
    chains.set_header([
        "chain",
        "offered Mpps",
        "generated Mpps",
        "received Mpps",
        "Gbit/s L1",
        "sent",
        "lost",
        "loss %",
        "latency avg/p99 us",
        "hops: in / out / dropped, busy cycles a frame",
        "conserved",
    ]);
    for c in &last.chains {
        let name = if several {
            format!("{} ({})", c.chain, c.group)
        } else {
            c.chain.to_string()
        };
        chains.add_row(chain_row(name, c));
    }
    for g in &last.groups {
        chains.add_row(total_row(format!("`{}`", g.group), &g.aggregate));
    }
    chains.add_row(total_row("all".into(), &last.aggregate));
    chains
}

fn chain_row(name: String, c: &sfclab_experiment::scenario::ChainResult) -> Vec<comfy_table::Cell> {
    vec![
        comfy_table::Cell::new(name),
        right(opt(c.requested_mpps, 3)),
        right(format!("{:.3}", c.generated_mpps)),
        right(match c.directions.as_slice() {
            [_, _, ..] => format!(
                "{:.3}\n{}",
                c.throughput_mpps,
                c.directions
                    .iter()
                    .map(|d| format!("{} {:.3}", short(&d.direction), d.throughput_mpps))
                    .collect::<Vec<_>>()
                    .join(" + ")
            ),
            _ => format!("{:.3}", c.throughput_mpps),
        }),
        right(format!("{:.2}", c.gbps_l1)),
        right(num(c.window.sent)),
        right(num(c.window.lost)),
        right(format!("{:.4}", c.loss_ratio * 100.0)),
        right(
            c.directions
                .iter()
                .map(|d| {
                    let l = d
                        .latency
                        .as_ref()
                        .map_or("-".into(), |l| format!("{} / {}", us(l.mean_ns), us(l.p99_ns)));
                    match c.directions.len() {
                        1 => l,
                        _ => format!("{} {l}", short(&d.direction)),
                    }
                })
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        comfy_table::Cell::new(
            c.hops
                .iter()
                .map(|h| {
                    let mut line = format!("{}: {} / {} / {}", h.hop, num(h.rx), num(h.tx), num(h.dropped));
                    if let Some(busy) = h.busy_cycles_per_frame {
                        let _ = write!(line, ", {busy:.0}");
                    }
                    if h.directions.len() > 1 {
                        for d in &h.directions {
                            let _ = write!(
                                line,
                                "\n   {} {} / {} / {}",
                                short(&d.direction),
                                num(d.rx),
                                num(d.tx),
                                num(d.dropped)
                            );
                        }
                    }
                    line
                })
                .collect::<Vec<_>>()
                .join("\n"),
        ),
        comfy_table::Cell::new(if c.conserved {
            "yes".to_string()
        } else {
            format!("NO ({} unaccounted)", num(c.unaccounted))
        }),
    ]
}

fn total_row(name: String, a: &sfclab_experiment::scenario::Aggregate) -> Vec<comfy_table::Cell> {
    vec![
        comfy_table::Cell::new(name),
        right(opt(a.offered_mpps, 3)),
        right(format!("{:.3}", a.generated_mpps)),
        right(format!("{:.3}", a.throughput_mpps)),
        right(format!("{:.2}", a.gbps_l1)),
        right(num(a.window.sent)),
        right(num(a.window.lost)),
        right(format!("{:.4}", a.loss_ratio * 100.0)),
        right(format!(
            "{} / {} (worst)",
            opt(a.latency_mean_us, 1),
            opt(a.latency_worst_p99_us, 1)
        )),
        comfy_table::Cell::new(""),
        comfy_table::Cell::new(if a.conserved { "yes" } else { "NO" }),
    ]
}

/// Where the whole run's frames were dropped, and the cable between hosts.
fn write_whole_run(s: &mut String, last: &sfclab_experiment::scenario::ScenarioRun) {
    let drops: Vec<String> = last
        .chains
        .iter()
        .flat_map(|c| {
            c.drops
                .iter()
                .map(move |(place, n)| format!("chain {} {place}: {}", c.chain, num(*n)))
        })
        .collect();
    if !drops.is_empty() {
        let _ = writeln!(s, "drops (whole run): {}", drops.join("; "));
    }
    if let Some(cable) = &last.cable {
        let ways: Vec<String> = cable
            .directions
            .iter()
            .map(|w| {
                format!(
                    "{}: {} sent, {} dropped by the shaper, {} at the far end",
                    w.direction,
                    num(w.sent),
                    num(w.shaper_dropped),
                    num(w.cable_dropped)
                )
            })
            .collect();
        let _ = writeln!(s, "cable (whole run): {}", ways.join("; "));
    }
}

/// What the searches found, and what the tester could not offer.
fn write_searches(s: &mut String, last: &sfclab_experiment::scenario::ScenarioRun) {
    if let Some(found) = &last.search {
        let r = &found.result;
        let _ = writeln!(
            s,
            "search ({:?}, {} trials, {:.1} s of traffic{}): the chains above were measured at {:.3} Mpps in all",
            r.method,
            r.trial_count,
            r.total_trial_s,
            if r.interrupted { ", INTERRUPTED" } else { "" },
            found.measured_at_pps / 1e6
        );
        for g in &r.goals {
            let _ = writeln!(
                s,
                "  {} (loss <= {}%): {} Mpps, next failing {} Mpps{}{}",
                g.goal.name,
                g.goal.loss_ratio * 100.0,
                g.lower_pps.map_or("none".into(), |p| format!("{:.3}", p / 1e6)),
                g.upper_pps.map_or("none".into(), |p| format!("{:.3}", p / 1e6)),
                if g.converged { "" } else { " (not converged)" },
                if g.limited_by_source {
                    " — the tester (or the emulated line) was the limit, not the VNFs"
                } else {
                    ""
                }
            );
        }
    }
    for (c, found) in last.chain_searches.iter().enumerate() {
        let r = &found.result;
        let goals: Vec<String> = r
            .goals
            .iter()
            .map(|g| {
                format!(
                    "{} {} Mpps{}",
                    g.goal.name,
                    g.lower_pps.map_or("none".into(), |p| format!("{:.4}", p / 1e6)),
                    if g.limited_by_source {
                        " (the tester was the limit)"
                    } else {
                        ""
                    }
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "chain {} searched on its own ({} trials, the others at their share of the scenario's rate): {}",
            c + 1,
            r.trial_count,
            goals.join(", ")
        );
    }
    if !last.chain_searches.is_empty() {
        let _ = writeln!(
            s,
            "the chains above were then measured all at once, each at its own first goal's rate"
        );
    }
    if last.aggregate.not_offered > 0 {
        let _ = writeln!(
            s,
            "the tester could not offer {} of the window's frames (a chain's send ring full): lost, but not by the VNFs",
            num(last.aggregate.not_offered)
        );
    }
}

/// Each VNF process's CPU over the measured window.
fn process_table(last: &sfclab_experiment::scenario::ScenarioRun) -> Table {
    let mut procs = Table::new();
    procs.load_preset(UTF8_FULL_CONDENSED);
    procs.set_header([
        "chain",
        "hop",
        "pid",
        "CPU s",
        "CPU share",
        "run-queue delay s",
        "timeslices",
        "switches vol / invol",
    ]);
    for p in &last.processes {
        procs.add_row(vec![
            comfy_table::Cell::new(if p.standby {
                format!("{} (standby)", p.chain)
            } else {
                p.chain.to_string()
            }),
            right(p.hop),
            right(p.pid),
            right(format!("{:.3}", p.cpu_s)),
            right(format!("{:.1}%", p.cpu_share * 100.0)),
            right(format!("{:.3}", p.run_queue_delay_s)),
            right(num(p.timeslices)),
            right(format!(
                "{} / {}",
                num(p.voluntary_switches),
                num(p.involuntary_switches)
            )),
        ]);
    }

    procs
}

/// The repetitions together.
fn write_summary(s: &mut String, d: &ScenarioDocument) {
    let m = &d.summary;
    let _ = writeln!(s, "over {} repetition(s):", d.runs.len());
    let _ = writeln!(s, "  aggregate Mpps   {}", summary(&m.aggregate_mpps, 3));
    let _ = writeln!(s, "  aggregate Gbit/s {}", summary(&m.aggregate_gbps_l1, 2));
    let _ = writeln!(s, "  loss ratio       {}", summary(&m.loss_ratio, 6));
    let _ = writeln!(s, "  latency mean us  {}", summary(&m.latency_mean_us, 1));
    for g in &m.group_mpps {
        let _ = writeln!(s, "  `{}` Mpps {}", g.group, summary(&g.mpps, 3));
    }
    for g in &m.goals {
        let _ = writeln!(
            s,
            "  {:<16} {}",
            format!("{} Mpps", g.goal),
            summary(&g.aggregate_mpps, 3)
        );
    }
    if let Some(ok) = m.ci95_within_5_percent {
        let _ = writeln!(
            s,
            "  the aggregate's 95% interval is {} 5% of its mean",
            if ok { "within" } else { "NOT within" }
        );
    }
}
