//! Run reports for people (a terminal table) and tools (JSON, CSV).

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{Cell, CellAlignment, Table};
use sfclab_runtime::RunReport;
use sfclab_runtime::wired::WiredReport;
use std::fmt::Write as _;

pub use sfclab_bench::num;

pub fn ns(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2} ms", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.2} us", v / 1e3)
    } else {
        format!("{v:.0} ns")
    }
}

pub fn right(s: impl ToString) -> Cell {
    Cell::new(s).set_alignment(CellAlignment::Right)
}

/// The terminal view of a run.
pub fn table(name: &str, r: &RunReport) -> String {
    let mut s = String::new();
    write_heading(&mut s, name, r);
    let _ = writeln!(s);
    write_figures(&mut s, r);
    let _ = writeln!(s, "\n{}", place_table(r));
    if !r.cores.is_empty() {
        let _ = writeln!(s, "{}", core_table(r));
    }
    write_drops(&mut s, r);
    if let Some(why) = sfclab_experiment::diagnosis::nearly_all_dropped(r) {
        let _ = writeln!(s, "why         {why}");
    }
    let _ = writeln!(
        s,
        "conservation {} (whole run: warm-up, window and drain; the tables count the window)",
        r.conservation
    );
    if r.interrupted {
        let _ = writeln!(
            s,
            "INTERRUPTED: stopped by Ctrl-C after {:.2} s of the window",
            r.duration_s
        );
    }
    s
}

/// What ran, where, through what, for how long.
fn write_heading(s: &mut String, name: &str, r: &RunReport) {
    let core = match (&r.placement, r.core) {
        (Some(p), _) => format!("placement {p}, links {}", r.link_mode.unwrap_or("drop")),
        (None, Some(c)) => format!("core {c}"),
        (None, None) => "unpinned".to_string(),
    };
    let _ = if r.chain.is_empty() {
        // A tester's run: the chain is the device it measures across, not in this run.
        writeln!(
            s,
            "sfclab {} | the tester's run across `{name}`: {} runtime, {core}, batch {}",
            r.version, r.runtime, r.batch
        )
    } else {
        writeln!(
            s,
            "sfclab {} | chain `{name}`: {} NF(s), {} runtime, {core}, batch {}",
            r.version,
            r.chain.len(),
            r.runtime,
            r.batch
        )
    };
    let _ = writeln!(
        s,
        "{}: {} -> {}: {} | window {:.2} s after {:.2} s warm-up | TSC {:.3} GHz",
        r.source.kind,
        r.source.summary,
        r.sink.kind,
        r.sink.summary,
        r.duration_s,
        r.warmup_s,
        r.tsc_hz / 1e9
    );
}

/// Throughput, what was offered, latency, and the warnings about either.
fn write_figures(s: &mut String, r: &RunReport) {
    let _ = writeln!(
        s,
        "throughput  {:.2} Mpps   {:.2} Gbit/s L2   {:.2} Gbit/s L1   {} busy TSC cycles/packet ({})",
        r.mpps,
        r.gbps_l2,
        r.gbps_l1,
        r.busy_cycles_per_packet.map_or("-".into(), |c| format!("{c:.1}")),
        match (r.cores.is_empty(), r.source.kind.as_str()) {
            (false, _) => "busiest core".to_string(),
            (true, kind) if r.shares_thread_with > 0 => format!(
                "this hop's own turns on a thread it shares with {} other(s): {kind} receive, chain, {} send (with the kernel work they run)",
                r.shares_thread_with, r.sink.kind
            ),
            (true, "tester") =>
                "the tester's core: generator, sends (with the kernel work they run), receives, sink".into(),
            (true, "generator") => "the one core: generator, chain and sink".into(),
            (true, kind) => format!(
                "the one core: {kind} receive, chain, {} send (with the kernel work they run)",
                r.sink.kind
            ),
        }
    );
    // A real port offers nothing: it takes what arrives.
    let offered = match (r.source.kind.as_str(), r.requested_mpps) {
        ("af_xdp" | "pcap", _) => format!("{} took in {:.3} Mpps", r.source.kind, r.generated_mpps),
        (_, requested) => format!(
            "{} requested, {:.3} Mpps generated",
            requested.map_or("max rate".into(), |m| format!("{m:.3} Mpps")),
            r.generated_mpps
        ),
    };
    let _ = writeln!(
        s,
        "offered     {offered}; of the window's {} packets {} arrived, {} lost",
        num(r.window_loss.sent),
        num(r.window_loss.received),
        num(r.window_loss.lost),
    );
    match &r.latency {
        Some(l) => {
            let _ = writeln!(
                s,
                "latency     min {}  p50 {}  p99 {}  p99.9 {}  max {}  ({} probes)",
                ns(l.min_ns),
                ns(l.p50_ns),
                ns(l.p99_ns),
                ns(l.p999_ns),
                ns(l.max_ns),
                num(l.samples)
            );
        }
        None => {
            let _ = writeln!(s, "latency     no probes (latency_probe_pps is 0)");
        }
    }
    if r.pool_empty > 0 || r.pacing_behind > 0 {
        let _ = writeln!(
            s,
            "warning     the generator fell short of the offered rate: {} batches found the pool empty, {} packets skipped by the pacer",
            r.pool_empty, r.pacing_behind
        );
    }
    if r.not_offered > 0 {
        let _ = writeln!(
            s,
            "warning     the tester's own transmit refused {} of the window's packets: counted as lost, but they never reached the device under test",
            num(r.not_offered)
        );
    }

    if let Some(n) = r.verify_failed {
        let _ = writeln!(
            s,
            "verify      {}",
            if n == 0 {
                "every frame passed checksum and length verification".to_string()
            } else {
                format!("FAILED: {} frames failed checksum or length verification", num(n))
            }
        );
    }
}

/// Each place's packets and cycles over the window.
fn place_table(r: &RunReport) -> Table {
    let mut places = Table::new();
    places.load_preset(UTF8_FULL_CONDENSED);
    places.set_header([
        "place",
        "kind",
        "packets in",
        "packets out",
        "dropped",
        "TSC cycles/packet",
    ]);
    for p in &r.places {
        places.add_row(vec![
            Cell::new(&p.name),
            Cell::new(&p.kind),
            right(num(p.packets_in)),
            right(num(p.packets_out)),
            right(num(p.dropped)),
            right(p.cycles_per_packet.map_or("-".into(), |c| format!("{c:.2}"))),
        ]);
    }
    places
}

/// Each core's work, where the run spread over several.
fn core_table(r: &RunReport) -> Table {
    let mut cores = Table::new();
    cores.load_preset(UTF8_FULL_CONDENSED);
    cores.set_header(["core", "runs", "busy", "packets", "busy TSC cycles/packet"]);
    for c in &r.cores {
        cores.add_row(vec![
            right(c.core),
            Cell::new(c.tasks.join(", ")),
            right(format!("{:.0}%", c.busy_share * 100.0)),
            right(num(c.packets)),
            right(c.cycles_per_packet.map_or("-".into(), |v| format!("{v:.2}"))),
        ]);
    }
    cores
}

/// Drops by place and reason, or none.
fn write_drops(s: &mut String, r: &RunReport) {
    if r.drops.is_empty() {
        let _ = writeln!(s, "drops       none");
    } else {
        let mut drops = Table::new();
        drops.load_preset(UTF8_FULL_CONDENSED);
        drops.set_header(["place", "reason", "kind", "packets", "wasted TSC cycles"]);
        for d in &r.drops {
            drops.add_row(vec![
                Cell::new(&d.place),
                Cell::new(&d.reason),
                Cell::new(d.kind),
                right(num(d.packets)),
                right(d.wasted_cycles.map_or("-".into(), |w| num(w as u64))),
            ]);
        }
        let _ = writeln!(s, "drops by place and reason\n{drops}");
    }
}

/// A wired run as text: the tester's view across the device, the device's own run
/// (an sfclab chain), and what the kernel counted on each interface.
pub fn table_wired(name: &str, w: &WiredReport) -> String {
    let bed = &w.testbed;
    let namespaces = match bed.namespaces.as_slice() {
        [tester, dut] => format!("{tester} and {dut}"),
        [tester, first, .., last] => format!("{tester} and {first} .. {last}"),
        all => all.join(", "),
    };
    let mut s = path_table(name, w);
    // Namespaces with kernel interfaces are joined by veth; without, by shared memory.
    let links = if bed.interfaces.is_empty() { "memif" } else { "veth" };
    s += &format!(
        "TESTER across {} (namespaces {namespaces}, {links})\n",
        bed.device_under_test
    );
    s += &table(name, &w.tester);
    for (k, d) in w.dut.iter().enumerate() {
        s += &if bed.hops > 1 {
            format!(
                "\nDEVICE UNDER TEST, hop {} (namespace {}-dut{}): {} between d-in and d-out\n",
                k + 1,
                bed.run_name,
                k + 1,
                d.chain.join(" -> ")
            )
        } else if w.dut.len() > 1 {
            format!("\nDEVICE UNDER TEST, replica {k}: the chain between d-in and d-out, queue {k}\n")
        } else {
            "\nDEVICE UNDER TEST: the chain between d-in and d-out\n".to_string()
        };
        s += &table(name, d);
    }
    for (k, d) in w.dut_processes.iter().enumerate() {
        s += &format!(
            "\nDEVICE UNDER TEST, hop {} (a process in {}): {} took in {}, passed on {}, dropped {}; {}{}\n",
            k + 1,
            bed.namespaces.get(k + 1).map_or("?", String::as_str),
            d["chain"].as_array().map_or(String::new(), |c| c
                .iter()
                .filter_map(|n| n.as_str())
                .collect::<Vec<_>>()
                .join(" -> ")),
            num(d["generated"].as_u64().unwrap_or(0)),
            num(d["received"].as_u64().unwrap_or(0)),
            num(d["dropped"].as_u64().unwrap_or(0)),
            hop_cost(d),
            d["error"].as_str().map_or(String::new(), |e| format!(" ({e})")),
        );
    }
    if !bed.interfaces.is_empty() {
        s += &format!(
            "\nkernel interface counters over the whole run (warm-up included)\n{}\n",
            interface_table(bed)
        );
    }
    if !bed.processes.is_empty() || !bed.switch.is_empty() {
        let counters: Vec<String> = bed
            .switch
            .iter()
            .filter(|c| *c.1 > 0)
            .map(|(k, v)| format!("{k} {}", num(*v)))
            .collect();
        s += &format!(
            "switch      {}; over the run: {}\n",
            bed.processes.join(", "),
            if counters.is_empty() {
                "every counter 0".to_string()
            } else {
                counters.join(", ")
            }
        );
    }
    s += &lost_line(&w.lost);
    s
}

/// What the kernel counted on each interface of the testbed.
fn interface_table(bed: &sfclab_runtime::wired::TestbedReport) -> comfy_table::Table {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::NOTHING);
    t.set_header([
        "interface",
        "namespace",
        "rx packets",
        "rx dropped",
        "rx errors",
        "tx packets",
        "tx dropped",
        "tx errors",
    ]);
    for i in &bed.interfaces {
        t.add_row([
            i.interface.clone(),
            i.namespace.clone(),
            i.rx_packets.to_string(),
            i.rx_dropped.to_string(),
            i.rx_errors.to_string(),
            i.tx_packets.to_string(),
            i.tx_dropped.to_string(),
            i.tx_errors.to_string(),
        ]);
    }
    t
}

/// Where what the tester lost went, whole run.
fn lost_line(l: &sfclab_runtime::wired::WireLoss) -> String {
    let list = |m: &std::collections::BTreeMap<String, u64>| {
        let parts: Vec<String> = m
            .iter()
            .filter(|e| *e.1 > 0)
            .map(|(k, v)| format!("{k} {}", num(*v)))
            .collect();
        if parts.is_empty() {
            "none".to_string()
        } else {
            parts.join(", ")
        }
    };
    format!(
        "lost (whole run) tester: {}; seen by: {}; unaccounted {}{}\n",
        list(&l.tester),
        list(&l.explained),
        num(l.unaccounted),
        if l.counted_beyond > 0 {
            format!(
                " (counters show {} more drops than the tester lost)",
                num(l.counted_beyond)
            )
        } else {
            String::new()
        }
    )
}

/// A wired run's summary, first: the path from the tester through each hop and back
/// (whole run), each step's in, out, dropped and why; then the one-line reason when an
/// NF dropped nearly everything.
fn path_table(name: &str, w: &WiredReport) -> String {
    let path = w.path();
    if path.is_empty() {
        return String::new();
    }
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    t.set_header([
        "step",
        "packets in",
        "packets out",
        "dropped",
        "why (counted)",
        "unaccounted",
    ]);
    for step in &path {
        let why: Vec<String> = step.why.iter().map(|(k, v)| format!("{k} {}", num(*v))).collect();
        t.add_row(vec![
            Cell::new(&step.place),
            right(num(step.packets_in)),
            right(num(step.packets_out)),
            right(num(step.dropped)),
            Cell::new(why.join(", ")),
            right(num(step.unaccounted)),
        ]);
    }
    let mut s = format!(
        "PATH of `{name}` through {} (whole run: warm-up, window and drain)\n{t}\n",
        w.testbed.device_under_test
    );
    if let Some(why) = sfclab_experiment::run_document::device_nearly_all_dropped(w) {
        s += &format!("why         {why}\n");
    }
    s + "\n"
}

/// The JSON Schema of the run document.
pub fn run_schema() -> String {
    schema_of::<sfclab_experiment::RunDocument<'static>>(
        "run-4.json",
        "One sfclab run (`sfclab run --json`), schema sfclab.run/4.",
    )
}

/// The JSON Schema of a document type, with its published file name and description.
pub fn schema_of<T: schemars::JsonSchema>(file: &str, description: &str) -> String {
    schema_value(schemars::schema_for!(T), file, description)
}

/// [`schema_of`] for a schema already generated.
pub fn schema_value(schema: schemars::Schema, file: &str, description: &str) -> String {
    let mut schema = serde_json::to_value(schema).expect("schema serialises");
    if let Some(obj) = schema.as_object_mut() {
        obj.insert("$id".into(), format!("https://sfclab.invalid/schema/{file}").into());
        obj.insert("description".into(), description.into());
    }
    serde_json::to_string_pretty(&schema).expect("schema serialises") + "\n"
}

/// Columns of the CSV summary: one row per run.
pub const CSV_HEADER: [&str; 25] = [
    "name",
    "runtime",
    "placement",
    "nfs",
    "frame_size",
    "flows",
    "batch",
    "duration_s",
    "generated",
    "received",
    "dropped",
    "mpps",
    "gbps_l2",
    "gbps_l1",
    "requested_mpps",
    "generated_mpps",
    "window_lost",
    "busy_tsc_cycles_per_packet",
    "nf_tsc_cycles_per_packet",
    "latency_p50_ns",
    "latency_p99_ns",
    "latency_p999_ns",
    "verify_failed",
    "conservation",
    "interrupted",
];

/// One CSV row for a run; `nf_cycles_per_packet` lists `name=cycles` for each NF.
pub fn csv_row(name: &str, r: &RunReport) -> Vec<String> {
    let nf_cycles: Vec<String> = r
        .places
        .iter()
        .filter(|p| p.role == sfclab_runtime::Role::Nf)
        .map(|p| {
            format!(
                "{}={}",
                p.name,
                p.cycles_per_packet.map_or("".into(), |c| format!("{c:.2}"))
            )
        })
        .collect();
    let lat = |f: fn(&sfclab_core::LatencySummary) -> f64| {
        r.latency.as_ref().map_or(String::new(), |l| format!("{:.0}", f(l)))
    };
    vec![
        name.to_string(),
        r.runtime.to_string(),
        r.placement.clone().unwrap_or_default(),
        r.chain.len().to_string(),
        r.source.settings.get("size").cloned().unwrap_or_default(),
        r.source.settings.get("flows").cloned().unwrap_or_default(),
        r.batch.to_string(),
        format!("{:.4}", r.duration_s),
        r.generated.to_string(),
        r.received.to_string(),
        r.dropped.to_string(),
        format!("{:.4}", r.mpps),
        format!("{:.4}", r.gbps_l2),
        format!("{:.4}", r.gbps_l1),
        r.requested_mpps.map_or(String::new(), |m| format!("{m:.4}")),
        format!("{:.4}", r.generated_mpps),
        r.window_loss.lost.to_string(),
        r.busy_cycles_per_packet.map_or(String::new(), |c| format!("{c:.3}")),
        nf_cycles.join(";"),
        lat(|l| l.p50_ns),
        lat(|l| l.p99_ns),
        lat(|l| l.p999_ns),
        r.verify_failed.map_or(String::new(), |n| n.to_string()),
        if r.conservation.holds {
            "holds".into()
        } else {
            "violated".into()
        },
        r.interrupted.to_string(),
    ]
}

pub fn csv(name: &str, r: &RunReport) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(CSV_HEADER).expect("in-memory CSV");
    w.write_record(csv_row(name, r)).expect("in-memory CSV");
    String::from_utf8(w.into_inner().expect("in-memory CSV")).expect("CSV is UTF-8")
}

/// The terminal view of a sweep result set.
pub fn sweep_table(set: &serde_json::Value) -> String {
    let mut s = String::new();
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED);
    let param = set["param"].as_str().unwrap_or("value");
    t.set_header([
        param,
        "Mpps",
        "range",
        "Gbit/s L1",
        "busy TSC cycles/packet",
        "p50",
        "p99",
        "window lost",
        "conservation",
    ]);
    let f = |v: &serde_json::Value, d: usize| v.as_f64().map_or("-".to_string(), |x| format!("{x:.d$}"));
    for p in set["points"].as_array().into_iter().flatten() {
        t.add_row(vec![
            Cell::new(p["value"].as_str().unwrap_or("")),
            right(f(&p["mpps"], 2)),
            right(format!("{} – {}", f(&p["mpps_min"], 2), f(&p["mpps_max"], 2))),
            right(f(&p["gbps_l1"], 2)),
            right(f(&p["busy_cycles_per_packet"], 1)),
            right(p["latency_p50_ns"].as_f64().map_or("-".into(), ns)),
            right(p["latency_p99_ns"].as_f64().map_or("-".into(), ns)),
            right(p["window_lost"].as_u64().map_or("-".into(), num)),
            Cell::new(if p["conservation_holds"] == true {
                "holds"
            } else {
                "VIOLATED"
            }),
        ]);
    }
    let _ = writeln!(
        s,
        "sfclab sweep | `{}` over {param}, {} run(s) per point (medians)\n{t}",
        set["name"].as_str().unwrap_or(""),
        set["repeat"]
    );
    if set["interrupted"] == true {
        let _ = writeln!(s, "INTERRUPTED: stopped by Ctrl-C; only the points above were measured");
    }
    s
}

/// `sfclab nfs`: every NF type, what it does, and its keys with what each means (from
/// the NF's config schema), its outputs and its own drop reasons.
/// The built-in traffic profiles: name, what each models, and its settings.
pub fn traffic_profiles() -> String {
    let mut s = String::new();
    for p in &sfclab_traffic::profiles::PROFILES {
        let _ = writeln!(s, "{}: {}", p.name, p.about);
        if let Ok(serde_json::Value::Object(m)) = serde_json::from_str(p.settings) {
            let keys: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k}: {}", v.as_str().map_or(v.to_string(), str::to_string)))
                .collect();
            let _ = writeln!(s, "  traffic: {{ {} }}", keys.join(", "));
        }
    }
    let _ = writeln!(
        s,
        "\nUse one with `--profile NAME` or `traffic: {{ profile: NAME }}`; keys given beside it win.\nA chain file adds its own under `profiles: {{ NAME: {{ traffic keys }} }}`."
    );
    s
}

pub fn nf_types() -> String {
    let mut s = String::new();
    for t in sfclab_nf::registry::TYPES {
        let _ = writeln!(s, "{}: {}", t.kind, t.about);
        let schema = serde_json::to_value((t.schema)()).unwrap_or_default();
        let props = schema["properties"].as_object().cloned().unwrap_or_default();
        if props.is_empty() {
            let _ = writeln!(s, "  (no keys but `name`)");
        }
        for (key, p) in &props {
            let kind = p["type"]
                .as_str()
                .map(str::to_string)
                .or_else(|| {
                    p["type"].as_array().map(|a| {
                        a.iter()
                            .filter_map(|t| t.as_str())
                            .filter(|t| *t != "null")
                            .collect::<Vec<_>>()
                            .join("|")
                    })
                })
                .unwrap_or_else(|| "value".into());
            let _ = writeln!(
                s,
                "  {key:<14} {kind:<8} {}",
                p["description"].as_str().unwrap_or("").replace('\n', " ")
            );
        }
        if let Ok(spec) = sfclab_nf::NfSpec::default_of(t.kind) {
            let nf = spec.build();
            let outputs = nf.outputs();
            if outputs.len() > 1 {
                let _ = writeln!(s, "  outputs: {}", outputs.join(", "));
            }
            if !nf.drop_reasons().is_empty() {
                let _ = writeln!(s, "  drop reasons: {}", nf.drop_reasons().join(", "));
            }
        }
        let _ = writeln!(s);
    }
    s += "Every NF also takes `name` (default: its type, numbered when repeated). Common drop reasons: ";
    s += &sfclab_runtime::report::drop_reason_names().join(", ");
    s += "\n";
    let _ = writeln!(
        s,
        "esp-encrypt and esp-decrypt seal with AES-GCM from {}",
        sfclab_aead::in_use()
    );
    let _ = writeln!(
        s,
        "dpi searches with {} unless its `engine` says",
        sfclab_vectorscan::in_use()
    );
    s
}

/// A hop process's cost per frame: its own work, and apart the time its sends waited
/// for room on the next ring (yielding the core: on a core the hops share, the other
/// hops' work), which its busy time includes.
fn hop_cost(doc: &serde_json::Value) -> String {
    match sfclab_runtime::wired::work_and_waits(doc) {
        Some((work, waits)) if waits > 0.0 => format!(
            "{work:.1} TSC cycles/packet of work, {waits:.1} more waiting for room on its output (yielding the core)"
        ),
        Some((work, _)) => format!("{work:.1} busy TSC cycles/packet"),
        None => "no packets".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hop_that_waited_for_room_is_charged_its_work_and_shown_its_waits() {
        // 1,000 frames in 340,000 busy cycles, 240,000 of them yielding on a full ring.
        let waited = serde_json::json!({
            "busy_cycles_per_packet": 340.0,
            "generated": 1000,
            "places": [{ "name": "memif", "counters": { "tx_full_wait_ticks": 240000 } }],
        });
        assert_eq!(
            hop_cost(&waited),
            "100.0 TSC cycles/packet of work, 240.0 more waiting for room on its output (yielding the core)"
        );
        let never = serde_json::json!({ "busy_cycles_per_packet": 90.0, "generated": 1000, "places": [] });
        assert_eq!(hop_cost(&never), "90.0 busy TSC cycles/packet");
        let idle = serde_json::json!({ "busy_cycles_per_packet": 0.0, "generated": 0, "places": [] });
        assert_eq!(hop_cost(&idle), "no packets");
    }
}
