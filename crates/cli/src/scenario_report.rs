//! The report of one or more scenarios (`sfclab scenario --out DIR`, `sfclab report
//! A.json B.json ...`): a summary row per scenario, the aggregate throughput and the
//! mean latency against the number of chains (one line per series: shape, VNF and VNF
//! processes powered on, as seed 001's figures), and each scenario's chains.
//! Everything is drawn from the JSON documents, so a report is redrawn later as it was.

use comfy_table::Table;
use comfy_table::presets::UTF8_FULL_CONDENSED;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::render::{num, right};
use crate::report;

/// The schema a scenario document carries.
pub const SCENARIO_SCHEMA: &str = "sfclab.scenario/2";

/// Reads scenario documents: each path a document, or a directory whose `*.json` files
/// are (in name order); every one must be a scenario of this schema.
pub fn load(paths: &[PathBuf]) -> Result<Vec<Value>, String> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut inside: Vec<PathBuf> = std::fs::read_dir(p)
                .map_err(|e| format!("{}: {e}", p.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|f| f.extension().is_some_and(|x| x == "json"))
                .collect();
            inside.sort();
            files.extend(inside);
        } else {
            files.push(p.clone());
        }
    }
    if files.is_empty() {
        return Err("no scenario documents (*.json) found".into());
    }
    files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).map_err(|e| format!("{}: {e}", f.display()))?;
            let doc: Value = serde_json::from_str(&text).map_err(|e| format!("{}: not JSON: {e}", f.display()))?;
            if doc["schema"] != SCENARIO_SCHEMA {
                return Err(format!(
                    "{}: not a scenario document of schema {SCENARIO_SCHEMA} (it says {})",
                    f.display(),
                    doc["schema"]
                ));
            }
            Ok(doc)
        })
        .collect()
}

/// A scenario's series: what stays the same along a figure's x axis (the chains).
fn series(d: &Value) -> String {
    let per = d["vnfs_per_chain"].as_u64().unwrap_or(1);
    let procs = (d["chains"].as_u64().unwrap_or(0) + d["standby"].as_u64().unwrap_or(0)) * per;
    format!(
        "{} {}, {procs} VNF processes",
        d["shape"].as_str().unwrap_or("?"),
        d["vnf"].as_str().unwrap_or("?")
    )
}

fn f(v: &Value, digits: usize) -> String {
    v.as_f64().map_or("-".into(), |x| format!("{x:.digits$}"))
}

/// `mean ± half` of a summary, or its mean alone.
fn summary(s: &Value, digits: usize) -> String {
    match (s["mean"].as_f64(), s["ci95_half_width"].as_f64()) {
        (Some(m), Some(h)) => format!("{m:.digits$} ± {h:.digits$}"),
        (Some(m), None) => format!("{m:.digits$}"),
        _ => "-".into(),
    }
}

fn conserved(d: &Value) -> bool {
    d["runs"]
        .as_array()
        .is_some_and(|runs| runs.iter().all(|r| r["aggregate"]["conserved"] == true))
}

/// The documents in figure order: by series, then by chains.
fn ordered(docs: &[Value]) -> Vec<&Value> {
    let mut v: Vec<&Value> = docs.iter().collect();
    v.sort_by_key(|d| (series(d), d["chains"].as_u64().unwrap_or(0)));
    v
}

/// A line per series: `(chains, y)` from each document that has `y`.
fn lines(docs: &[&Value], y: impl Fn(&Value) -> Option<f64>) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut by: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for d in docs {
        if let Some(v) = y(d) {
            by.entry(series(d))
                .or_default()
                .push((d["chains"].as_f64().unwrap_or(0.0), v));
        }
    }
    by.into_iter().collect()
}

/// The figures: aggregate Gbit/s (layer 1, both directions) and mean latency against the
/// number of chains.
pub fn plots(docs: &[Value]) -> Result<Vec<(String, String)>, String> {
    let docs = ordered(docs);
    let gbps = lines(&docs, |d| d["summary"]["aggregate_gbps_l1"]["mean"].as_f64());
    let latency = lines(&docs, |d| d["summary"]["latency_mean_us"]["mean"].as_f64());
    Ok(vec![
        (
            "throughput.svg".into(),
            report::xy_svg(&gbps, "System throughput", "chains", "Gbit/s (L1, all directions)")?,
        ),
        (
            "latency.svg".into(),
            report::xy_svg(&latency, "Average delay", "chains", "mean latency (us)")?,
        ),
    ])
}

/// The summary as a terminal table: a row per scenario.
pub fn table(docs: &[Value]) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header([
        "series",
        "chains",
        "standby",
        "processes/core",
        "offered",
        "Gbit/s L1 (95%)",
        "Mpps",
        "loss %",
        "latency us",
        "conserved",
    ]);
    for d in ordered(docs) {
        let s = &d["summary"];
        t.add_row(vec![
            comfy_table::Cell::new(series(d)),
            right(d["chains"].as_u64().unwrap_or(0)),
            right(d["standby"].as_u64().unwrap_or(0)),
            right(f(&d["oversubscription"], 1)),
            comfy_table::Cell::new(d["offered"].as_str().unwrap_or("?")),
            right(summary(&s["aggregate_gbps_l1"], 3)),
            right(summary(&s["aggregate_mpps"], 3)),
            right(
                s["loss_ratio"]["mean"]
                    .as_f64()
                    .map_or("-".into(), |l| format!("{:.3}", l * 100.0)),
            ),
            right(summary(&s["latency_mean_us"], 1)),
            comfy_table::Cell::new(if conserved(d) { "yes" } else { "NO" }),
        ]);
    }
    let mut out = String::new();
    let _ = writeln!(out, "{t}");
    out
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A scenario's chains, the last repetition: a row per chain and direction.
fn chains_html(d: &Value) -> String {
    let Some(run) = d["runs"].as_array().and_then(|r| r.last()) else {
        return "<p>No repetition finished.</p>".into();
    };
    let mut rows = String::new();
    for c in run["chains"].as_array().into_iter().flatten() {
        for dir in c["directions"].as_array().into_iter().flatten() {
            let l = &dir["latency"];
            let _ = writeln!(
                rows,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                c["chain"],
                esc(dir["direction"].as_str().unwrap_or("")),
                f(&dir["throughput_mpps"], 4),
                f(&dir["gbps_l1"], 3),
                num(dir["window"]["sent"].as_u64().unwrap_or(0)),
                num(dir["window"]["lost"].as_u64().unwrap_or(0)),
                l["mean_ns"].as_f64().map_or("-".into(), |v| format!("{:.1}", v / 1e3)),
                l["p99_ns"].as_f64().map_or("-".into(), |v| format!("{:.1}", v / 1e3)),
                if c["conserved"] == true { "yes" } else { "NO" },
            );
        }
        let drops: Vec<String> = c["drops"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| format!("{} {}", esc(k), num(v.as_u64().unwrap_or(0))))
            .collect();
        if !drops.is_empty() {
            let _ = writeln!(
                rows,
                "<tr><td></td><td colspan=\"8\" class=\"drops\">drops (whole run): {}</td></tr>",
                drops.join("; ")
            );
        }
    }
    format!(
        "<table>\n<tr><th>chain</th><th>direction</th><th>Mpps</th><th>Gbit/s L1</th><th>sent</th><th>lost</th><th>latency avg us</th><th>p99 us</th><th>conserved</th></tr>\n{rows}</table>"
    )
}

/// One HTML file: the summary, the figures inline and each scenario's chains; it opens
/// offline.
pub fn html(docs: &[Value]) -> Result<String, String> {
    let figures: String = plots(docs)?
        .iter()
        .map(|(_, svg)| format!("<figure>{svg}</figure>\n"))
        .collect();
    let mut summary_rows = String::new();
    let mut details = String::new();
    for d in ordered(docs) {
        let s = &d["summary"];
        let _ = writeln!(
            summary_rows,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&series(d)),
            d["chains"],
            d["standby"],
            f(&d["oversubscription"], 1),
            esc(d["offered"].as_str().unwrap_or("")),
            summary(&s["aggregate_gbps_l1"], 3),
            summary(&s["aggregate_mpps"], 3),
            summary(&s["latency_mean_us"], 1),
            if conserved(d) { "yes" } else { "NO" },
        );
        let _ = writeln!(
            details,
            "<details><summary>{} — {} chain(s), {} standby, {} repetition(s){}</summary>\n{}\n</details>",
            esc(&series(d)),
            d["chains"],
            d["standby"],
            d["runs"].as_array().map_or(0, Vec::len),
            if d["interrupted"] == true { ", INTERRUPTED" } else { "" },
            chains_html(d)
        );
    }
    let first = &docs[0];
    let machine = &first["machine"];
    let caps = match (first["line_rate_gbps"].as_f64(), first["vnf_rate_cap"].as_str()) {
        (None, None) => "no capacity caps".to_string(),
        (line, cap) => format!(
            "line {} per direction, VNF licence {}",
            line.map_or("none".into(), |g| format!("{g} Gbit/s")),
            cap.unwrap_or("none")
        ),
    };
    Ok(format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>sfclab scenarios</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
td, th {{ border: 1px solid #ccc; padding: 4px 10px; text-align: right; }}
th {{ background: #f0f0f0; }}
td.drops {{ text-align: left; color: #555; }}
figure {{ display: inline-block; margin: 0.5em; }}
</style></head><body>
<h1>sfclab scenarios</h1>
<p>{n} scenario(s), {frames} frames, {directions}, {caps}; sfclab {version}.<br>
Machine: {cpu}, {cores} cores, TSC {ghz:.3} GHz, kernel {kernel}.</p>
<table>
<tr><th>series</th><th>chains</th><th>standby</th><th>processes/core</th><th>offered</th><th>Gbit/s L1 (mean ± 95%)</th><th>Mpps</th><th>latency us</th><th>conserved</th></tr>
{summary_rows}</table>
{figures}
<h2>Chains</h2>
{details}
<p>Every figure is in the JSON documents, with each VNF process's CPU time and run-queue delay.</p>
</body></html>
"#,
        n = docs.len(),
        frames = esc(first["frame_sizes"].as_str().unwrap_or("?")),
        directions = if first["bidirectional"] == true {
            "both directions"
        } else {
            "one way"
        },
        version = esc(first["version"].as_str().unwrap_or("")),
        cpu = esc(machine["cpu"].as_str().unwrap_or("?")),
        cores = machine["cores"],
        ghz = machine["tsc_hz"].as_f64().unwrap_or(0.0) / 1e9,
        kernel = esc(machine["kernel"].as_str().unwrap_or("?")),
    ))
}

/// Writes report.html and the figures (SVG) into `dir`.
pub fn write_all(docs: &[Value], dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut written = Vec::new();
    for (name, svg) in plots(docs)? {
        let path = dir.join(name);
        report::write_plot(&path, &svg)?;
        written.push(path);
    }
    let path = dir.join("report.html");
    std::fs::write(&path, html(docs)?).map_err(|e| format!("{}: {e}", path.display()))?;
    written.push(path);
    Ok(written)
}
