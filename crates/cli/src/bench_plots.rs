//! The plots of the benchmarks' results (`--plot`): the tables and CSV are each
//! benchmark's own (`sfclab_bench::Benchmark`).

/// Cycles per packet per workload, stacked by NF kind.
pub fn nfs_plot(b: &sfclab_bench::nfs::NfsBench) -> Result<String, String> {
    let bars: Vec<crate::report::StackedBar> = b
        .points
        .iter()
        .map(|p| crate::report::StackedBar {
            label: format!("{} {}", p.workload, p.frames),
            segments: p.nfs.iter().map(|n| (n.kind.clone(), n.cycles)).collect(),
        })
        .collect();
    crate::report::stacked_bars_svg(&bars, "NF cost on one core (sfclab bench nfs)", "TSC cycles/packet")
}

/// Throughput against chain length, a line per technology (seed 002 Fig. 3, seed 000
/// Fig. 3, seed 004 Fig. 3 as this host measures them).
pub fn chaining_plot(b: &sfclab_bench::chaining::ChainingBench) -> Result<String, String> {
    let technologies: Vec<&str> = sfclab_bench::chaining::TECHNOLOGIES
        .iter()
        .copied()
        .filter(|t| b.cells.iter().any(|c| c.technology == *t && c.mpps.is_some()))
        .collect();
    let points: Vec<serde_json::Value> = b
        .lengths
        .iter()
        .map(|n| {
            let mut p = serde_json::Map::new();
            p.insert("value".into(), n.to_string().into());
            for c in b.cells.iter().filter(|c| c.hops == *n) {
                if let Some(m) = c.mpps {
                    p.insert(c.technology.clone(), m.into());
                }
            }
            serde_json::Value::Object(p)
        })
        .collect();
    let set = serde_json::json!({ "param": "forwarders in the chain (n)", "points": points });
    let series: Vec<(&str, &str)> = technologies.iter().map(|t| (*t, *t)).collect();
    crate::report::line_svg(
        &set,
        &series,
        &format!(
            "Chains under overload, {}-byte frames (sfclab bench chaining)",
            b.frame_size
        ),
        "Mpps through the chain",
    )
}

/// `bench model --plot`: predicted against measured, a colour per layout, y = x.
pub fn model_plot(b: &sfclab_bench::model::ModelBench) -> Result<String, String> {
    let mut groups: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for p in &b.points {
        let kind = p.layout.split(' ').next().unwrap_or("").to_string();
        match groups.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, pts)) => pts.push((p.measured_mpps, p.predicted_mpps)),
            None => groups.push((kind, vec![(p.measured_mpps, p.predicted_mpps)])),
        }
    }
    crate::report::scatter_svg(
        &groups,
        "The model against the machine (sfclab bench model)",
        "measured Mpps",
        "predicted Mpps",
    )
}
