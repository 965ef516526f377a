//! The report of one or more scenarios (`sfclab scenario --out DIR`, `sfclab report
//! A.json B.json ...`): a summary row per scenario, the aggregate throughput and the
//! mean latency against the number of chains (one line per series: shape, VNF and VNF
//! processes powered on, as seed 001's figures) or, when the scenarios differ by frame
//! size instead, against the frame size beside the line rate (seed 003's figures), and
//! each scenario's chains.
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
pub const SCENARIO_SCHEMA: &str = "sfclab.scenario/4";

/// Earlier schemas this report still reads: /2 has no `groups` (its one group's keys
/// at the top, as /3 writes them for one group).
const READS: [&str; 3] = ["sfclab.scenario/2", "sfclab.scenario/3", SCENARIO_SCHEMA];

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
            if !READS.iter().any(|s| doc["schema"] == *s) {
                return Err(format!(
                    "{}: not a scenario document of schema {} (it says {})",
                    f.display(),
                    READS.join(" or "),
                    doc["schema"]
                ));
            }
            Ok(doc)
        })
        .collect()
}

/// What a report's figures put on their x axis.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Axis {
    /// The number of chains (seed 001).
    Chains,
    /// The frame size, bytes (seed 003): every scenario one size, not all the same,
    /// and the same number of chains.
    FrameSize,
}

/// A document's groups (none in a /2 document: its keys at the top are its one group's).
fn groups(d: &Value) -> &[Value] {
    d["groups"].as_array().map_or(&[], Vec::as_slice)
}

/// A document's frame sizes: every chain's, or each group's joined by ` / `.
fn frames(d: &Value) -> String {
    if let Some(sizes) = d["frame_sizes"].as_str() {
        return sizes.to_string();
    }
    let mut all: Vec<&str> = groups(d).iter().filter_map(|g| g["frame_sizes"].as_str()).collect();
    all.dedup();
    all.join(" / ")
}

/// What a document's chains run, the same for any number of them: `PVP router`, or the
/// groups' names joined by ` + `.
fn chains_label(d: &Value) -> String {
    match d["shape"].as_str() {
        Some(shape) => format!("{shape} {}", d["vnf"].as_str().unwrap_or("?")),
        None => groups(d)
            .iter()
            .map(|g| g["name"].as_str().unwrap_or("?"))
            .collect::<Vec<_>>()
            .join(" + "),
    }
}

/// VNF processes a document started: every chain's and standby instance's.
fn vnf_processes(d: &Value) -> u64 {
    let n = |v: &Value| v.as_u64().unwrap_or(0);
    match d["vnfs_per_chain"].as_u64() {
        Some(per) => (n(&d["chains"]) + n(&d["standby"])) * per,
        None => groups(d)
            .iter()
            .map(|g| (n(&g["chains"]) + n(&g["standby"])) * n(&g["vnfs_per_chain"]))
            .sum(),
    }
}

/// A document's single frame size, bytes (`None` for a mix such as IMIX).
fn frame_size(d: &Value) -> Option<f64> {
    frames(d).trim().parse::<u32>().ok().map(f64::from)
}

fn axis(docs: &[Value]) -> Axis {
    let sizes: Option<Vec<f64>> = docs.iter().map(frame_size).collect();
    let same_chains = docs.windows(2).all(|w| w[0]["chains"] == w[1]["chains"]);
    match sizes {
        Some(s) if same_chains && s.iter().any(|&x| x != s[0]) => Axis::FrameSize,
        _ => Axis::Chains,
    }
}

/// Where a scenario's places sit: one host, or the two hosts' layout.
fn placement(d: &Value) -> String {
    let h = &d["hosts"];
    if h.is_null() {
        return "one host".into();
    }
    let vnfs: Vec<String> = h["vnf_hosts"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| v.to_string())
        .collect();
    format!("two hosts (VNFs on {}, sink on {})", vnfs.join(","), h["sink_host"])
}

/// A scenario's series: what stays the same along a figure's x axis.
fn series(d: &Value, axis: Axis) -> String {
    match axis {
        Axis::Chains => format!("{}, {} VNF processes", chains_label(d), vnf_processes(d)),
        Axis::FrameSize => format!(
            "{}, {}, {} VNF core(s)",
            chains_label(d),
            placement(d),
            d["vnf_cores"].as_array().map_or(0, Vec::len)
        ),
    }
}

/// The x of a document on `axis`.
fn x_of(d: &Value, axis: Axis) -> f64 {
    match axis {
        Axis::Chains => d["chains"].as_f64().unwrap_or(0.0),
        Axis::FrameSize => frame_size(d).unwrap_or(0.0),
    }
}

/// The narrowest line a scenario's traffic crossed, bits per second at layer 1: the
/// tester's line or the hosts' cable.
fn narrowest_line(d: &Value) -> Option<f64> {
    [d["line_rate_gbps"].as_f64(), d["hosts"]["link_gbps"].as_f64()]
        .into_iter()
        .flatten()
        .reduce(f64::min)
        .map(|g| g * 1e9)
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

/// The documents in figure order: by series, then along the axis.
fn ordered(docs: &[Value], axis: Axis) -> Vec<&Value> {
    let mut v: Vec<&Value> = docs.iter().collect();
    v.sort_by(|a, b| {
        (series(a, axis), x_of(a, axis))
            .partial_cmp(&(series(b, axis), x_of(b, axis)))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    v
}

/// A line per series: `(x, y)` from each document that has `y`.
fn lines(docs: &[&Value], axis: Axis, y: impl Fn(&Value) -> Option<f64>) -> Vec<(String, Vec<(f64, f64)>)> {
    let mut by: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for d in docs {
        if let Some(v) = y(d) {
            by.entry(series(d, axis)).or_default().push((x_of(d, axis), v));
        }
    }
    by.into_iter().collect()
}

/// The figures: aggregate Gbit/s (layer 1, both directions) and mean latency against the
/// number of chains; or, along frame sizes, Mpps beside the line rate and latency.
pub fn plots(docs: &[Value]) -> Result<Vec<(String, String)>, String> {
    let axis = axis(docs);
    let docs = ordered(docs, axis);
    let latency = lines(&docs, axis, |d| d["summary"]["latency_mean_us"]["mean"].as_f64());
    let throughput = match axis {
        Axis::Chains => {
            let gbps = lines(&docs, axis, |d| d["summary"]["aggregate_gbps_l1"]["mean"].as_f64());
            report::xy_svg(&gbps, "System throughput", "chains", "Gbit/s (L1, all directions)")?
        }
        Axis::FrameSize => {
            let mut mpps = lines(&docs, axis, |d| d["summary"]["aggregate_mpps"]["mean"].as_f64());
            // The line rate each size allows (20 bytes of preamble and gap per frame).
            let mut line: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
            for d in &docs {
                if let (Some(bps), Some(size)) = (narrowest_line(d), frame_size(d)) {
                    let pts = line.entry(format!("line rate ({} Gbit/s)", bps / 1e9)).or_default();
                    if !pts.iter().any(|p| p.0 == size) {
                        pts.push((size, bps / ((size + 20.0) * 8.0) / 1e6));
                    }
                }
            }
            mpps.extend(line);
            report::xy_svg(&mpps, "Throughput by frame size", "frame size (bytes)", "Mpps")?
        }
    };
    let x_label = match axis {
        Axis::Chains => "chains",
        Axis::FrameSize => "frame size (bytes)",
    };
    Ok(vec![
        ("throughput.svg".into(), throughput),
        (
            "latency.svg".into(),
            report::xy_svg(&latency, "Average delay", x_label, "mean latency (us)")?,
        ),
    ])
}

/// The summary as a terminal table: a row per scenario.
pub fn table(docs: &[Value]) -> String {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    let axis = axis(docs);
    t.set_header([
        "series",
        "frames",
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
    for d in ordered(docs, axis) {
        let s = &d["summary"];
        t.add_row(vec![
            comfy_table::Cell::new(series(d, axis)),
            comfy_table::Cell::new(frames(d)),
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
    let several = groups(d).len() > 1;
    let mut rows = String::new();
    for c in run["chains"].as_array().into_iter().flatten() {
        let chain = match (several, c["group"].as_str()) {
            (true, Some(g)) => format!("{} ({})", c["chain"], esc(g)),
            _ => c["chain"].to_string(),
        };
        for dir in c["directions"].as_array().into_iter().flatten() {
            let l = &dir["latency"];
            let _ = writeln!(
                rows,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                chain,
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
    let axis = axis(docs);
    for d in ordered(docs, axis) {
        let s = &d["summary"];
        let _ = writeln!(
            summary_rows,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&series(d, axis)),
            esc(&frames(d)),
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
            "<details><summary>{} — {} frames, {} chain(s), {} standby, {} repetition(s){}</summary>\n{}\n</details>",
            esc(&series(d, axis)),
            esc(&frames(d)),
            d["chains"],
            d["standby"],
            d["runs"].as_array().map_or(0, Vec::len),
            if d["interrupted"] == true { ", INTERRUPTED" } else { "" },
            chains_html(d)
        );
    }
    let first = &docs[0];
    let machine = &first["machine"];
    let licences: Vec<String> = match first["vnf_rate_cap"].as_str() {
        Some(cap) => vec![cap.to_string()],
        None => groups(first)
            .iter()
            .filter_map(|g| Some(format!("{} ({})", g["vnf_rate_cap"].as_str()?, g["name"].as_str()?)))
            .collect(),
    };
    let mut caps = match (first["line_rate_gbps"].as_f64(), licences.is_empty()) {
        (None, true) => "no capacity caps".to_string(),
        (line, _) => format!(
            "line {} per direction, VNF licence {}",
            line.map_or("none".into(), |g| format!("{g} Gbit/s")),
            if licences.is_empty() {
                "none".to_string()
            } else {
                licences.join(", ")
            }
        ),
    };
    if let Some(g) = first["nic_capacity_gbps"].as_f64() {
        let _ = write!(caps, "; the NIC's capacity {g} Gbit/s shared by every VNF's sends");
    }
    if let Some(g) = docs.iter().find_map(|d| d["hosts"]["link_gbps"].as_f64()) {
        let _ = write!(
            caps,
            "; two hosts joined by a {g} Gbit/s cable (a VXLAN tunnel per crossing)"
        );
    }
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
<p>{n} scenario(s), {directions}, {caps}; sfclab {version}.<br>
Machine: {cpu}, {cores} cores, TSC {ghz:.3} GHz, kernel {kernel}.</p>
<table>
<tr><th>series</th><th>frames</th><th>chains</th><th>standby</th><th>processes/core</th><th>offered</th><th>Gbit/s L1 (mean ± 95%)</th><th>Mpps</th><th>latency us</th><th>conserved</th></tr>
{summary_rows}</table>
{figures}
<h2>Chains</h2>
{details}
<p>Every figure is in the JSON documents, with each VNF process's CPU time and run-queue delay.</p>
</body></html>
"#,
        n = docs.len(),
        directions = match first["bidirectional"].as_bool() {
            Some(true) => "both directions",
            Some(false) => "one way",
            None => "directions by group",
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
