//! `sfclab sweep`: one parameter over a list of values, each point run several times
//! (median reported), into one result set: JSON (schema `sfclab.sweep/1`), CSV, SVG plots
//! and a self-contained HTML report (see `report`).

use serde_json::{Value, json};

use crate::bench::{Machine, median};

/// One point of a sweep: the value, the median run's report and the spread.
pub fn point(value: &str, nfs: &[(String, sfclab_nf::NfConfig)], reports: &[sfclab_runtime::RunReport]) -> Value {
    let mpps: Vec<f64> = reports.iter().map(|r| r.mpps).collect();
    let m = median(&mpps);
    // The run closest to the median stands for the point, with its full report.
    let mid = reports
        .iter()
        .min_by(|a, b| (a.mpps - m).abs().total_cmp(&(b.mpps - m).abs()))
        .expect("at least one run");
    let lat = |f: fn(&sfclab_traffic::LatencySummary) -> f64| mid.latency.as_ref().map(f);
    json!({
        "value": value,
        "mpps": m,
        "mpps_runs": mpps,
        "mpps_min": mpps.iter().copied().fold(f64::INFINITY, f64::min),
        "mpps_max": mpps.iter().copied().fold(0.0, f64::max),
        "gbps_l1": mid.gbps_l1,
        "gbps_l2": mid.gbps_l2,
        "busy_cycles_per_packet": mid.busy_cycles_per_packet,
        "latency_p50_ns": lat(|l| l.p50_ns),
        "latency_p99_ns": lat(|l| l.p99_ns),
        "latency_p999_ns": lat(|l| l.p999_ns),
        "dropped": mid.dropped,
        "conservation_holds": reports.iter().all(|r| r.conservation.holds),
        "chain_config": nfs.iter().map(|(n, c)| json!({ "name": n, "config": c })).collect::<Vec<_>>(),
        "report": mid,
    })
}

/// The whole result set.
pub fn result_set(name: &str, param: &str, repeat: usize, points: Vec<Value>) -> Value {
    json!({
        "schema": "sfclab.sweep/1",
        "version": env!("CARGO_PKG_VERSION"),
        "name": name,
        "param": param,
        "repeat": repeat,
        "machine": Machine::read(),
        "points": points,
    })
}

/// One CSV row per point.
pub fn csv(set: &Value) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let cols = [
        "value",
        "mpps",
        "mpps_min",
        "mpps_max",
        "gbps_l1",
        "gbps_l2",
        "cycles_per_packet",
        "latency_p50_ns",
        "latency_p99_ns",
        "latency_p999_ns",
        "dropped",
        "conservation_holds",
    ];
    let mut header = vec!["param"];
    header.extend(cols);
    w.write_record(&header).expect("in-memory CSV");
    for p in set["points"].as_array().into_iter().flatten() {
        let mut row = vec![set["param"].as_str().unwrap_or("").to_string()];
        for c in cols {
            row.push(match &p[c] {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                v => v.to_string(),
            });
        }
        w.write_record(&row).expect("in-memory CSV");
    }
    String::from_utf8(w.into_inner().expect("in-memory CSV")).expect("UTF-8")
}
