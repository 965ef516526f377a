//! `sfclab sweep` and `sfclab report`: one parameter over a list of values, each point
//! run several times (median reported, with the range), into one result set: JSON
//! (schema `sfclab.sweep/3`), CSV, SVG/PNG plots and a self-contained HTML report.

use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use crate::outcome::{self, FAILURE, USAGE};
use crate::progress::shown;
use crate::{RunArgs, ctrl_c, render, report, source_of};
use sfclab_experiment::sweep::{SWEEP_SCHEMA, SweepDocument, SweepPlan, sweep, values};

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
    /// A sweep result set (its sweep.json, or the directory holding it), or scenario
    /// documents (`sfclab scenario --json` files, or directories of them): their
    /// summary, throughput and delay against the number of chains, and each one's chains.
    #[arg(required = true, num_args = 1..)]
    pub results: Vec<String>,
    /// Directory for the plots and report.html (default: next to the results).
    #[arg(long)]
    pub out: Option<String>,
}

/// The JSON Schema of the sweep result set.
pub fn schema() -> String {
    render::schema_of::<SweepDocument>(
        "sweep-3.json",
        "A sweep's result set (`sweep.json`), schema sfclab.sweep/3.",
    )
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
    let plan = SweepPlan {
        source: source_of(&a.run),
        overrides: a.run.settings.clone(),
        param: a.param.clone(),
        values: values(&a.param, &a.values),
        repeat: a.repeat,
    };
    // Each point's chain, resolved (and so checked) before anything runs or is written.
    let points = match plan.resolve() {
        Ok(p) => p,
        Err(e) => return outcome::fail(USAGE, &e),
    };
    let out = PathBuf::from(&a.out);
    if let Err(e) = check_out(&out, a.force) {
        return outcome::fail(USAGE, &e);
    }
    let name = a
        .run
        .chain
        .clone()
        .or(a.run.file.clone())
        .unwrap_or_else(|| "default".into());
    let swept = shown("runs", |progress| sweep(&plan, name, points, ctrl_c(), progress));
    let doc = match swept {
        Ok(d) => d,
        Err(e) => return outcome::fail(FAILURE, &e),
    };
    let interrupted = doc.interrupted;
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
    let first = PathBuf::from(&a.results[0]);
    let is_sweep = a.results.len() == 1
        && (first.join("sweep.json").is_file()
            || std::fs::read_to_string(&first)
                .ok()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .is_some_and(|v| v["schema"].as_str().is_some_and(|s| s.starts_with("sfclab.sweep/"))));
    if !is_sweep {
        return scenario_report(&a);
    }
    let mut path = first;
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

/// `sfclab report` of scenario documents.
fn scenario_report(a: &ReportArgs) -> ExitCode {
    let paths: Vec<PathBuf> = a.results.iter().map(PathBuf::from).collect();
    let docs = match crate::scenario_report::load(&paths) {
        Ok(d) => d,
        Err(e) => return outcome::fail(USAGE, &e),
    };
    let dir = a.out.as_ref().map(PathBuf::from).unwrap_or_else(|| {
        let p = &paths[0];
        if p.is_dir() {
            p.clone()
        } else {
            p.parent().map(Path::to_path_buf).unwrap_or_default()
        }
    });
    match crate::scenario_report::write_all(&docs, &dir) {
        Ok(files) => {
            for f in files {
                eprintln!("wrote {}", f.display());
            }
            outcome::emit_then(&crate::scenario_report::table(&docs), 0)
        }
        Err(e) => outcome::fail(FAILURE, &e),
    }
}
