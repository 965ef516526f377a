//! The plots of the benchmarks' results (`--plot`), drawn from the figure each benchmark
//! gives (`sfclab_bench::registry::Figure`); the tables and CSV are each benchmark's own.

/// A registered benchmark's figure, drawn as SVG.
pub fn draw(figure: &sfclab_bench::registry::Figure) -> Result<String, String> {
    use sfclab_bench::registry::Figure;
    match figure {
        Figure::Lines {
            title,
            x_label,
            y_label,
            x,
            series,
        } => {
            let points: Vec<serde_json::Value> = x
                .iter()
                .enumerate()
                .map(|(i, value)| {
                    let mut p = serde_json::Map::new();
                    p.insert("value".into(), value.clone().into());
                    for (name, ys) in series {
                        if let Some(y) = ys.get(i).copied().flatten() {
                            p.insert(name.clone(), y.into());
                        }
                    }
                    serde_json::Value::Object(p)
                })
                .collect();
            let set = serde_json::json!({ "param": x_label, "points": points });
            let names: Vec<(&str, &str)> = series.iter().map(|(n, _)| (n.as_str(), n.as_str())).collect();
            crate::report::line_svg(&set, &names, title, y_label)
        }
        Figure::StackedBars { title, y_label, bars } => {
            let bars: Vec<crate::report::StackedBar> = bars
                .iter()
                .map(|(label, segments)| crate::report::StackedBar {
                    label: label.clone(),
                    segments: segments.clone(),
                })
                .collect();
            crate::report::stacked_bars_svg(&bars, title, y_label)
        }
        Figure::Scatter {
            title,
            x_label,
            y_label,
            groups,
        } => crate::report::scatter_svg(groups, title, x_label, y_label),
    }
}
