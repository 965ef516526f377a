//! Plots (SVG, plotters) and the self-contained HTML report of a sweep result set.
//! Everything is rendered from the JSON, so `sfclab report <sweep.json>` redraws a
//! report later exactly as the sweep first did.

use plotters::prelude::*;
use serde_json::Value;

/// Colours of groups in turn, distinct on white and in print.
const PALETTE: [RGBColor; 8] = [
    BLUE,
    RED,
    RGBColor(0, 150, 0),
    MAGENTA,
    RGBColor(0, 170, 170),
    RGBColor(230, 120, 0),
    RGBColor(120, 60, 20),
    BLACK,
];

/// A line chart of one or more series (`(key, label)` of the points) against the
/// sweep's values, on a categorical x axis; a legend when there is more than one.
pub fn line_svg(set: &Value, series: &[(&str, &str)], title: &str, y_label: &str) -> Result<String, String> {
    let points = set["points"].as_array().ok_or("no points in the result set")?;
    let labels: Vec<String> = points
        .iter()
        .map(|p| p["value"].as_str().unwrap_or("?").to_string())
        .collect();
    let columns: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|(key, _)| {
            points
                .iter()
                .enumerate()
                .filter_map(|(i, p)| p[*key].as_f64().map(|y| (i as f64, y)))
                .collect()
        })
        .collect();
    let top = columns.iter().flatten().map(|&(_, y)| y).fold(0.0, f64::max);
    let top = if top > 0.0 { top * 1.1 } else { 1.0 };
    let palette = [BLUE, RED, GREEN, MAGENTA, CYAN];
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (720, 400)).into_drawing_area();
        let e = |e: DrawingAreaErrorKind<_>| e.to_string();
        root.fill(&WHITE).map_err(e)?;
        let n = labels.len().max(1);
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..top)
            .map_err(e)?;
        let fmt = |x: &f64| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                labels.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .x_labels(n)
            .x_label_formatter(&fmt)
            .x_desc(set["param"].as_str().unwrap_or(""))
            .y_desc(y_label)
            .draw()
            .map_err(e)?;
        for (k, (column, (_, label))) in columns.iter().zip(series).enumerate() {
            let colour = palette[k % palette.len()];
            chart
                .draw_series(LineSeries::new(column.clone(), colour))
                .map_err(e)?
                .label(*label)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
            chart
                .draw_series(column.iter().map(|&(x, y)| Circle::new((x, y), 4, colour.filled())))
                .map_err(e)?;
        }
        if series.len() > 1 {
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(e)?;
        }
        root.present().map_err(e)?;
    }
    Ok(svg)
}

/// Lines of `(x, y)` points on linear axes, one per group (a colour, a legend entry and
/// a marker per point): a figure's series against a count.
pub fn xy_svg(
    groups: &[(String, Vec<(f64, f64)>)],
    title: &str,
    x_label: &str,
    y_label: &str,
) -> Result<String, String> {
    let xs = || {
        groups
            .iter()
            .flat_map(|(_, pts)| pts.iter().map(|p| p.0))
            .filter(|v| v.is_finite())
    };
    let ys = || {
        groups
            .iter()
            .flat_map(|(_, pts)| pts.iter().map(|p| p.1))
            .filter(|v| v.is_finite())
    };
    let right = xs().fold(0.0, f64::max).max(1.0) * 1.05;
    let left = xs().fold(f64::INFINITY, f64::min).min(0.0);
    let top = ys().fold(0.0, f64::max);
    let top = if top > 0.0 { top * 1.15 } else { 1.0 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (640, 440)).into_drawing_area();
        let e = |e: DrawingAreaErrorKind<_>| e.to_string();
        root.fill(&WHITE).map_err(e)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d(left..right, 0f64..top)
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .max_light_lines(1)
            .draw()
            .map_err(e)?;
        for (k, (label, pts)) in groups.iter().enumerate() {
            let colour = PALETTE[k % PALETTE.len()];
            let mut pts = pts.clone();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart
                .draw_series(LineSeries::new(pts.clone(), colour))
                .map_err(e)?
                .label(label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour));
            chart
                .draw_series(pts.iter().map(|&(x, y)| Circle::new((x, y), 3, colour.filled())))
                .map_err(e)?;
        }
        if !groups.is_empty() {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(e)?;
        }
        root.present().map_err(e)?;
    }
    Ok(svg)
}

/// A scatter plot of `(x, y)` points in groups (a colour and legend entry each), with
/// the y = x line: predicted against measured.
pub fn scatter_svg(
    groups: &[(String, Vec<(f64, f64)>)],
    title: &str,
    x_label: &str,
    y_label: &str,
) -> Result<String, String> {
    // Log-log: the figures span 0.1 to 100+ Mpps (chains in namespaces to compound
    // chains), and a miss reads as the same distance from y = x at every scale.
    let values = || {
        groups
            .iter()
            .flat_map(|(_, pts)| pts.iter().flat_map(|&(x, y)| [x, y]))
            .filter(|v| v.is_finite() && *v > 0.0)
    };
    let (low, top) = match (values().reduce(f64::min), values().reduce(f64::max)) {
        (Some(lo), Some(hi)) => (lo / 1.5, hi * 1.5),
        _ => (0.1, 1.0),
    };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (560, 520)).into_drawing_area();
        let e = |e: DrawingAreaErrorKind<_>| e.to_string();
        root.fill(&WHITE).map_err(e)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(45)
            .y_label_area_size(60)
            .build_cartesian_2d((low..top).log_scale(), (low..top).log_scale())
            .map_err(e)?;
        // A label only at 1, 2 and 5 of each decade: the log axis's own key points
        // crowd each other's labels near the top of a decade.
        let decade_label = |v: &f64| {
            let mantissa = v / 10f64.powf(v.log10().floor());
            if [1.0, 2.0, 5.0].iter().any(|m| (mantissa - m).abs() < 1e-6) {
                format!("{}", (v * 1000.0).round() / 1000.0)
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .x_desc(x_label)
            .y_desc(y_label)
            .x_label_formatter(&decade_label)
            .y_label_formatter(&decade_label)
            .max_light_lines(1)
            .draw()
            .map_err(e)?;
        chart
            .draw_series(LineSeries::new([(low, low), (top, top)], BLACK.mix(0.5)))
            .map_err(e)?
            .label("y = x")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK.mix(0.5)));
        for (k, (label, pts)) in groups.iter().enumerate() {
            let colour = PALETTE[k % PALETTE.len()];
            chart
                .draw_series(
                    pts.iter()
                        .filter(|&&(x, y)| x > 0.0 && y > 0.0)
                        .map(|&(x, y)| Circle::new((x, y), 4, colour.filled())),
                )
                .map_err(e)?
                .label(label.as_str())
                .legend(move |(x, y)| Circle::new((x + 10, y), 4, colour.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(e)?;
        root.present().map_err(e)?;
    }
    Ok(svg)
}

/// One bar of a stacked bar chart: its label and its segments `(series, value)`.
pub struct StackedBar {
    pub label: String,
    pub segments: Vec<(String, f64)>,
}

/// A stacked bar chart: one bar per entry, segments coloured by series name (legend).
pub fn stacked_bars_svg(bars: &[StackedBar], title: &str, y_label: &str) -> Result<String, String> {
    let mut series: Vec<&str> = Vec::new();
    for b in bars {
        for (name, _) in &b.segments {
            if !series.contains(&name.as_str()) {
                series.push(name);
            }
        }
    }
    let top = bars
        .iter()
        .map(|b| b.segments.iter().map(|(_, v)| v.max(0.0)).sum::<f64>())
        .fold(0.0, f64::max);
    let top = if top > 0.0 { top * 1.15 } else { 1.0 };
    let palette = [BLUE, RED, GREEN, MAGENTA, CYAN, BLACK];
    let colour = |name: &str| palette[series.iter().position(|s| *s == name).unwrap_or(0) % palette.len()];
    let mut svg = String::new();
    {
        let width = (120 + 110 * bars.len() as u32).max(480);
        let root = SVGBackend::with_string(&mut svg, (width, 440)).into_drawing_area();
        let e = |e: DrawingAreaErrorKind<_>| e.to_string();
        root.fill(&WHITE).map_err(e)?;
        let n = bars.len().max(1);
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..top)
            .map_err(e)?;
        let fmt = |x: &f64| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                bars.get(i as usize).map(|b| b.label.clone()).unwrap_or_default()
            } else {
                String::new()
            }
        };
        chart
            .configure_mesh()
            .x_labels(n)
            .x_label_formatter(&fmt)
            .x_label_style(("sans-serif", 11))
            .y_desc(y_label)
            .draw()
            .map_err(e)?;
        for name in &series {
            let c = colour(name);
            let mut rects = Vec::new();
            for (i, b) in bars.iter().enumerate() {
                let below: f64 = b
                    .segments
                    .iter()
                    .take_while(|(s, _)| s != name)
                    .map(|(_, v)| v.max(0.0))
                    .sum();
                if let Some((_, v)) = b.segments.iter().find(|(s, _)| s == name) {
                    let x = i as f64;
                    rects.push(Rectangle::new(
                        [(x - 0.35, below), (x + 0.35, below + v.max(0.0))],
                        c.filled(),
                    ));
                }
            }
            chart
                .draw_series(rects)
                .map_err(e)?
                .label(*name)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], c.filled()));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(e)?;
        root.present().map_err(e)?;
    }
    Ok(svg)
}

/// Writes a plot: PNG if the path ends in `.png`, SVG otherwise.
pub fn write_plot(path: &std::path::Path, svg: &str) -> Result<(), String> {
    let bytes = if path.extension().is_some_and(|x| x.eq_ignore_ascii_case("png")) {
        png(svg)?
    } else {
        svg.as_bytes().to_vec()
    };
    std::fs::write(path, bytes).map_err(|e| e.to_string())
}

/// Rasterises an SVG plot to PNG (resvg), text set with the system's fonts (Debian:
/// fonts-dejavu-core); without any font the PNG still has the lines and axes.
pub fn png(svg: &str) -> Result<Vec<u8>, String> {
    use resvg::{tiny_skia, usvg};
    let mut opt = usvg::Options::default();
    let fonts = opt.fontdb_mut();
    fonts.load_system_fonts();
    // The plots ask for the generic `sans-serif`, which fontdb maps to Arial: point it at
    // a sans face this system has.
    let sans = ["DejaVu Sans", "Liberation Sans", "Noto Sans", "FreeSans"]
        .into_iter()
        .find(|f| {
            fonts
                .faces()
                .any(|face| face.families.iter().any(|(name, _)| name == f))
        });
    if let Some(f) = sans {
        fonts.set_sans_serif_family(f);
        opt.font_family = f.to_string();
    }
    let tree = usvg::Tree::from_str(svg, &opt).map_err(|e| format!("plot SVG: {e}"))?;
    let size = tree.size().to_int_size();
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height()).ok_or("empty plot")?;
    resvg::render(&tree, tiny_skia::Transform::default(), &mut pixmap.as_mut());
    pixmap.encode_png().map_err(|e| format!("PNG: {e}"))
}

/// The plots a sweep gets: (file stem, SVG).
pub fn plots(set: &Value) -> Result<Vec<(String, String)>, String> {
    let mut out = vec![
        (
            "throughput".to_string(),
            line_svg(set, &[("mpps", "Mpps")], "Throughput", "Mpps")?,
        ),
        (
            "cycles".to_string(),
            line_svg(
                set,
                &[("busy_cycles_per_packet", "busy TSC cycles")],
                "Busy TSC cycles per packet (the busiest core)",
                "TSC cycles/packet",
            )?,
        ),
    ];
    if set["points"]
        .as_array()
        .is_some_and(|p| p.iter().any(|p| p["latency_p99_ns"].is_number()))
    {
        let percentiles = [
            ("latency_p50_ns", "p50"),
            ("latency_p99_ns", "p99"),
            ("latency_p999_ns", "p99.9"),
        ];
        out.push((
            "latency".to_string(),
            line_svg(set, &percentiles, "Latency percentiles", "ns")?,
        ));
    }
    Ok(out)
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// One HTML file with the tables, the plots inline and the configuration: it opens
/// offline, with nothing fetched.
pub fn html(set: &Value) -> Result<String, String> {
    let plots = plots(set)?;
    let points = set["points"].as_array().ok_or("no points in the result set")?;
    let f = |v: &Value, d: usize| v.as_f64().map_or("-".to_string(), |x| format!("{x:.d$}"));
    let mut rows = String::new();
    for p in points {
        rows.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{} – {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
            esc(p["value"].as_str().unwrap_or("")),
            f(&p["mpps"], 2),
            f(&p["mpps_min"], 2),
            f(&p["mpps_max"], 2),
            f(&p["gbps_l1"], 2),
            f(&p["busy_cycles_per_packet"], 1),
            f(&p["latency_p50_ns"], 0),
            f(&p["latency_p99_ns"], 0),
            p["window_lost"],
            if p["conservation_holds"] == true { "holds" } else { "VIOLATED" },
        ));
    }
    let machine = &set["machine"];
    let config = points
        .first()
        .map(|p| serde_json::to_string_pretty(&p["report"]["source"]).unwrap_or_default())
        .unwrap_or_default();
    let figures: String = plots
        .iter()
        .map(|(_, svg)| format!("<figure>{svg}</figure>\n"))
        .collect();
    Ok(format!(
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>sfclab sweep: {name}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
td, th {{ border: 1px solid #ccc; padding: 4px 10px; text-align: right; }}
th {{ background: #f0f0f0; }}
figure {{ display: inline-block; margin: 0.5em; }}
pre {{ background: #f7f7f7; padding: 1em; }}
</style></head><body>
<h1>sfclab sweep: {name}</h1>
<p>Parameter <b>{param}</b>, {repeat} run(s) per point (median; range in brackets), sfclab {version}.<br>
Machine: {cpu}, {cores} cores, TSC {ghz:.3} GHz, kernel {kernel}.</p>
<table>
{interrupted}<table>
<tr><th>{param}</th><th>Mpps</th><th>range</th><th>Gbit/s L1</th><th>busy TSC cycles/packet</th><th>p50 ns</th><th>p99 ns</th><th>window lost</th><th>conservation</th></tr>
{rows}</table>
{figures}
<h2>Traffic</h2>
<pre>{config}</pre>
<p>Full per-run reports (per NF cycles, drops by place and reason) are in the JSON result set.</p>
</body></html>
"#,
        name = esc(set["name"].as_str().unwrap_or("")),
        param = esc(set["param"].as_str().unwrap_or("")),
        repeat = set["repeat"],
        version = esc(set["version"].as_str().unwrap_or("")),
        cpu = esc(machine["cpu"].as_str().unwrap_or("?")),
        cores = machine["cores"],
        ghz = machine["tsc_hz"].as_f64().unwrap_or(0.0) / 1e9,
        kernel = esc(machine["kernel"].as_str().unwrap_or("?")),
        config = esc(&config),
        interrupted = if set["interrupted"] == true {
            "<p><b>Interrupted</b> by Ctrl-C: only the points below were measured.</p>\n"
        } else {
            ""
        },
    ))
}

/// Writes an SVG and a PNG per plot and report.html into `dir`, and with `data` also
/// sweep.json and sweep.csv.
pub fn write_all(set: &Value, dir: &std::path::Path, data: bool) -> Result<Vec<std::path::PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    if data {
        files.push((
            "sweep.json".into(),
            serde_json::to_string_pretty(set).expect("serialisable").into_bytes(),
        ));
        files.push(("sweep.csv".into(), csv(set).into_bytes()));
    }
    for (stem, svg) in plots(set)? {
        files.push((format!("{stem}.png"), png(&svg)?));
        files.push((format!("{stem}.svg"), svg.into_bytes()));
    }
    files.push(("report.html".into(), html(set)?.into_bytes()));
    let mut written = Vec::new();
    for (name, body) in files {
        let path = dir.join(name);
        std::fs::write(&path, body).map_err(|e| format!("{}: {e}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// The CSV columns of a result set, one row per point.
const CSV_COLUMNS: [&str; 12] = [
    "value",
    "mpps",
    "mpps_min",
    "mpps_max",
    "gbps_l1",
    "gbps_l2",
    "busy_cycles_per_packet",
    "latency_p50_ns",
    "latency_p99_ns",
    "latency_p999_ns",
    "window_lost",
    "conservation_holds",
];

/// One CSV row per point, from the result set's JSON.
pub fn csv(set: &serde_json::Value) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header = vec!["param"];
    header.extend(CSV_COLUMNS);
    header.push("interrupted");
    w.write_record(&header).expect("in-memory CSV");
    for p in set["points"].as_array().into_iter().flatten() {
        let mut row = vec![set["param"].as_str().unwrap_or("").to_string()];
        for c in CSV_COLUMNS {
            row.push(match &p[c] {
                serde_json::Value::String(s) => s.clone(),
                serde_json::Value::Null => String::new(),
                v => v.to_string(),
            });
        }
        row.push(set["interrupted"].as_bool().unwrap_or(false).to_string());
        w.write_record(&row).expect("in-memory CSV");
    }
    String::from_utf8(w.into_inner().expect("in-memory CSV")).expect("UTF-8")
}
