//! `sfclab sweep` and `sfclab report`: one parameter over a list of values, each point
//! run several times (median reported, with the range), into one result set: JSON
//! (schema `sfclab.sweep/3`), CSV, SVG/PNG plots and a self-contained HTML report.

use clap::Args;
use serde::Serialize;
use sfclab_runtime::RunReport;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::Ordering;

use crate::config::ChainSpec;
use crate::outcome::{self, FAILURE, USAGE};
use crate::progress::Progress;
use crate::render::NfOwned;
use crate::{RunArgs, execute, load_spec, render, report, settings, stop_flag};
use sfclab_bench::{Machine, median};

/// Schema tag of a sweep result set.
pub const SWEEP_SCHEMA: &str = "sfclab.sweep/3";

#[derive(Args)]
pub struct SweepArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// What to vary: size, rate, flows, ip, batch, placement, replicas, links, runtime,
    /// or any name with `{}` in --chain where its values go.
    #[arg(long, help_heading = "Sweep")]
    pub param: String,
    /// The values, comma separated (IMIX and mixes: separate with `;` instead). For
    /// `size`, `rfc2544` stands for RFC 2544's seven frame sizes, one point each.
    #[arg(long, help_heading = "Sweep")]
    pub values: String,
    /// Runs per point (the median is reported, with the range).
    #[arg(long, default_value_t = 3, help_heading = "Sweep")]
    pub repeat: usize,
    /// Directory for sweep.json, sweep.csv, the plots and report.html.
    #[arg(long, default_value = "results/sweep", help_heading = "Sweep")]
    pub out: String,
    /// Overwrite a result set already in --out.
    #[arg(long, help_heading = "Sweep")]
    pub force: bool,
}

#[derive(Args)]
pub struct ReportArgs {
    /// A sweep result set: its sweep.json, or the directory holding it.
    pub results: String,
    /// Directory for the plots and report.html (default: next to the results).
    #[arg(long)]
    pub out: Option<String>,
}

/// A sweep's result set (`sweep.json`).
#[derive(Serialize, schemars::JsonSchema)]
pub struct SweepDocument {
    /// Always `sfclab.sweep/3` for this layout.
    pub schema: &'static str,
    pub version: &'static str,
    pub name: String,
    /// The parameter varied.
    pub param: String,
    /// Runs per point.
    pub repeat: usize,
    pub machine: Machine,
    /// Stopped by Ctrl-C: the points finished are here, the rest are missing.
    pub interrupted: bool,
    pub points: Vec<SweepPoint>,
}

/// One point: the value, the median run's figures and the spread of all runs.
#[derive(Serialize, schemars::JsonSchema)]
pub struct SweepPoint {
    pub value: String,
    /// Median received Mpps of the runs, and each run's.
    pub mpps: f64,
    pub mpps_runs: Vec<f64>,
    pub mpps_min: f64,
    pub mpps_max: f64,
    /// The run closest to the median stands for the point: its figures follow.
    pub gbps_l1: f64,
    pub gbps_l2: f64,
    pub busy_cycles_per_packet: Option<f64>,
    pub latency_p50_ns: Option<f64>,
    pub latency_p99_ns: Option<f64>,
    pub latency_p999_ns: Option<f64>,
    /// Packets of the window's own traffic lost.
    pub window_lost: u64,
    /// Every run of the point conserved packets.
    pub conservation_holds: bool,
    pub chain_config: Vec<NfOwned>,
    pub report: RunReport,
}

/// One point from its runs.
pub fn point(value: &str, spec: &ChainSpec, reports: Vec<RunReport>) -> SweepPoint {
    let mpps: Vec<f64> = reports.iter().map(|r| r.mpps).collect();
    let m = median(&mpps);
    let conservation_holds = reports.iter().all(|r| r.conservation.holds);
    let mid = reports
        .into_iter()
        .min_by(|a, b| (a.mpps - m).abs().total_cmp(&(b.mpps - m).abs()))
        .expect("at least one run");
    let lat = |f: fn(&sfclab_core::LatencySummary) -> f64| mid.latency.as_ref().map(f);
    SweepPoint {
        value: value.to_string(),
        mpps: m,
        mpps_min: mpps.iter().copied().fold(f64::INFINITY, f64::min),
        mpps_max: mpps.iter().copied().fold(0.0, f64::max),
        mpps_runs: mpps,
        gbps_l1: mid.gbps_l1,
        gbps_l2: mid.gbps_l2,
        busy_cycles_per_packet: mid.busy_cycles_per_packet,
        latency_p50_ns: lat(|l| l.p50_ns),
        latency_p99_ns: lat(|l| l.p99_ns),
        latency_p999_ns: lat(|l| l.p999_ns),
        window_lost: mid.window_loss.lost,
        conservation_holds,
        chain_config: spec
            .nfs
            .iter()
            .map(|(n, c)| NfOwned {
                name: n.clone(),
                config: c.clone(),
            })
            .collect(),
        report: mid,
    }
}

/// The JSON Schema of the sweep result set.
pub fn schema() -> String {
    render::schema_of::<SweepDocument>(
        "sweep-3.json",
        "A sweep's result set (`sweep.json`), schema sfclab.sweep/3.",
    )
}

/// The values of `--values`: comma separated (`;` when a value has commas); for `size`,
/// `rfc2544` expands to RFC 2544's seven sizes.
fn values(param: &str, text: &str) -> Vec<String> {
    let sep = if text.contains(';') { ';' } else { ',' };
    text.split(sep)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .flat_map(|v| {
            if param == "size" && v.eq_ignore_ascii_case("rfc2544") {
                sfclab_traffic::sizes::RFC2544_SIZES
                    .iter()
                    .map(|s| s.to_string())
                    .collect()
            } else {
                vec![v]
            }
        })
        .collect()
}

/// The run arguments of the point where `param` is `v`: a setting, parsed as its flag
/// is (`--param batch --values 32,64` is `--batch 32`, then `--batch 64`), or a `{}` in
/// `--chain`. A value that does not parse is an error naming the flag, never a fallback.
fn point_args(a: &SweepArgs, v: &str) -> Result<RunArgs, String> {
    let mut r = a.run.clone();
    let settings = settings::keys_of::<settings::Settings>();
    if settings.contains(&a.param) {
        r.settings = r.settings.with(&a.param, v).map_err(|e| format!("--values: {e}"))?;
    } else {
        match &r.chain {
            Some(c) if c.contains("{}") => r.chain = Some(c.replace("{}", v)),
            _ => {
                return Err(format!(
                    "--param `{}` is not a setting ({}), and --chain has no `{{}}` for its values",
                    a.param,
                    settings.join(", ")
                ));
            }
        }
    }
    Ok(r)
}

/// Checks `--out` before anything runs: writable, and not holding a result set unless
/// `--force`.
fn check_out(dir: &Path, force: bool) -> Result<(), String> {
    if dir.join("sweep.json").exists() && !force {
        return Err(format!(
            "--out {}: a result set is already there; pass --force to overwrite it, or choose another --out",
            dir.display()
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("--out {}: {e}", dir.display()))?;
    let probe = dir.join(".sfclab-write-check");
    std::fs::write(&probe, b"").map_err(|e| format!("--out {}: cannot write there: {e}", dir.display()))?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

pub fn cmd_sweep(a: SweepArgs) -> ExitCode {
    let values = values(&a.param, &a.values);
    if values.is_empty() || a.repeat == 0 {
        return outcome::fail(
            USAGE,
            "need at least one value (--values) and one run per point (--repeat)",
        );
    }
    let out = PathBuf::from(&a.out);
    if let Err(e) = check_out(&out, a.force) {
        return outcome::fail(USAGE, &e);
    }
    // Each point's chain, resolved (and so checked) before anything runs.
    let stop = stop_flag();
    let mut specs = Vec::new();
    for v in &values {
        let spec = point_args(&a, v).and_then(|r| load_spec(&r).map_err(|e| e.to_string()));
        match spec {
            Ok(mut spec) => {
                spec.stop_on(&stop);
                specs.push((v.clone(), spec));
            }
            Err(e) => return outcome::fail(USAGE, &format!("{} = {v}: {e}", a.param)),
        }
    }
    let name = a
        .run
        .chain
        .clone()
        .or(a.run.file.clone())
        .unwrap_or_else(|| "default".into());
    let mut progress = Progress::new("runs", values.len() * a.repeat);
    let mut points = Vec::new();
    'points: for (v, spec) in &specs {
        let mut reports = Vec::new();
        for _ in 0..a.repeat {
            progress.working_on(&format!("{} = {v}", a.param));
            match execute::run(spec) {
                // A run cut short by Ctrl-C is not a full measurement of its point.
                Ok(r) if r.interrupted => break 'points,
                Ok(r) => {
                    progress.step(&format!("{} = {v}: {:.2} Mpps", a.param, r.mpps));
                    reports.push(r);
                }
                Err(e) => {
                    progress.finish();
                    return outcome::fail(FAILURE, &format!("{} = {v}: {e}", a.param));
                }
            }
            if stop.load(Ordering::SeqCst) {
                break 'points;
            }
        }
        points.push(point(v, spec, reports));
    }
    progress.finish();
    let interrupted = stop.load(Ordering::SeqCst);
    let doc = SweepDocument {
        schema: SWEEP_SCHEMA,
        version: env!("CARGO_PKG_VERSION"),
        name,
        param: a.param.clone(),
        repeat: a.repeat,
        machine: Machine::read(),
        interrupted,
        points,
    };
    let set = serde_json::to_value(&doc).expect("serialisable");
    let files = match report::write_all(&set, &out, true) {
        Ok(f) => f,
        Err(e) => return outcome::fail(FAILURE, &e),
    };
    for f in files {
        eprintln!("wrote {}", f.display());
    }
    let text = if a.run.json {
        serde_json::to_string_pretty(&set).expect("serialisable") + "\n"
    } else if a.run.csv {
        report::csv(&set)
    } else {
        render::sweep_table(&set)
    };
    outcome::emit_then(&text, outcome::done(interrupted))
}

pub fn cmd_report(a: ReportArgs) -> ExitCode {
    let mut path = PathBuf::from(&a.results);
    if path.is_dir() {
        path = path.join("sweep.json");
    }
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => return outcome::fail(USAGE, &format!("{}: {e}", path.display())),
    };
    let set: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return outcome::fail(USAGE, &format!("{}: not JSON: {e}", path.display())),
    };
    if set["schema"] != SWEEP_SCHEMA {
        return outcome::fail(
            USAGE,
            &format!(
                "{}: not a sweep result set of schema {SWEEP_SCHEMA} (it says {}); older result sets: run the sweep again",
                path.display(),
                set["schema"]
            ),
        );
    }
    let dir = a
        .out
        .map(PathBuf::from)
        .unwrap_or_else(|| path.parent().map(Path::to_path_buf).unwrap_or_default());
    match report::write_all(&set, &dir, false) {
        Ok(files) => {
            for f in files {
                eprintln!("wrote {}", f.display());
            }
            outcome::emit_then(&render::sweep_table(&set), 0)
        }
        Err(e) => outcome::fail(FAILURE, &e),
    }
}
