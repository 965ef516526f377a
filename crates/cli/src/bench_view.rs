//! The terminal and CSV views of the benchmarks' results (`sfclab bench ...`): each
//! median with the range of its repetitions, a warning when they spread wide, and the
//! mark of a benchmark stopped by Ctrl-C.

use sfclab_bench::overload::OverloadBench;
use sfclab_bench::pipeline::PipelineBench;
use sfclab_bench::placement::PlacementBench;
use sfclab_bench::ring::RingBench;
use sfclab_bench::{HopBench, footer, is_wide, with_range};
use std::fmt::Write as _;

/// The terminal view of a hop benchmark.
pub fn hop_table(b: &HopBench) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sfclab bench hop | {} ({} cores, TSC {:.3} GHz, kernel {})",
        b.machine.cpu,
        b.machine.cores,
        b.machine.tsc_hz / 1e9,
        b.machine.kernel
    );
    let _ = writeln!(
        s,
        "forwarder chains, {} B frames, {} flow(s), batch {}, {} x {:.1} s per point (medians), core {}\n",
        b.frame_size,
        b.flows,
        b.batch,
        b.repeat,
        b.duration_s,
        b.core.map_or("unpinned".into(), |c| c.to_string())
    );
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    let acc = b.fit_accounting_on.is_some();
    let mut header = vec!["hops", "Mpps [min–max]", "busy TSC cycles/packet"];
    if acc {
        header.extend(["Mpps (accounting on)", "busy TSC cycles/packet (accounting on)"]);
    }
    t.set_header(header);
    let mut wide = 0;
    for p in b.points.iter().filter(|p| !p.accounting) {
        let mut row = vec![
            p.hops.to_string(),
            with_range(&p.mpps_runs, 1),
            with_range(&p.cycles_runs, 2),
        ];
        wide += usize::from(is_wide(&p.mpps_runs));
        if let Some(q) = b.points.iter().find(|q| q.accounting && q.hops == p.hops) {
            row.extend([with_range(&q.mpps_runs, 1), with_range(&q.cycles_runs, 2)]);
            wide += usize::from(is_wide(&q.mpps_runs));
        }
        t.add_row(row);
    }
    let _ = writeln!(s, "{t}");
    let f = b.fit_accounting_off;
    let _ = writeln!(
        s,
        "per-hop cost      {:.2} cycles/packet (least squares, r2 {:.3}), base {:.2}",
        f.slope, f.r2, f.intercept
    );
    let _ = writeln!(
        s,
        "bare loop         {:.2} cycles/packet per hop (MAC rewrite of 32 resident buffers, no framework): sfclab hop = {:.2}x",
        b.bare_loop_cycles_per_hop, b.ratio_hop_vs_bare_loop
    );
    if let (Some(on), Some(o)) = (b.fit_accounting_on, b.accounting_overhead_per_hop) {
        let _ = writeln!(
            s,
            "with accounting   {:.2} cycles/packet per hop: accounting adds {o:.2} per NF",
            on.slope
        );
    }
    match (&b.peer, &b.peer_skipped) {
        (Some(p), _) => {
            let _ = writeln!(
                s,
                "peer              {}: {} Mpps (median [min–max] of {})",
                p.name,
                with_range(&p.mpps_runs, 1),
                p.mpps_runs.len()
            );
            wide += usize::from(is_wide(&p.mpps_runs));
            if let Some(r) = b.ratio_n1_vs_peer {
                let _ = writeln!(s, "ratio             sfclab n=1 / peer = {r:.2}x");
            }
        }
        (None, Some(why)) => {
            let _ = writeln!(s, "peer              skipped: {why}");
        }
        (None, None) => {}
    }
    s.push_str(&footer(wide, b.interrupted, b.repeat));
    s
}

pub fn placement_table(b: &PlacementBench) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sfclab bench placement | {} ({} cores, TSC {:.3} GHz)",
        b.machine.cpu,
        b.machine.cores,
        b.machine.tsc_hz / 1e9
    );
    let _ = writeln!(
        s,
        "chains of `{}`, {} B frames, batch {}, backpressure + flow control (capacity), {} x {:.1} s per point (medians)\n",
        b.nf, b.frame_size, b.batch, b.repeat, b.duration_s
    );
    let mut placements: Vec<&str> = Vec::new();
    for p in &b.points {
        if !placements.contains(&p.placement.as_str()) {
            placements.push(&p.placement);
        }
    }
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    let mut header = vec!["hops".to_string()];
    header.extend(
        placements
            .iter()
            .map(|p| format!("{p} Mpps [min–max] (bottleneck busy TSC cycles/pkt)")),
    );
    let mut wide = 0;
    t.set_header(header);
    let mut lengths: Vec<usize> = b.points.iter().map(|p| p.hops).collect();
    lengths.dedup();
    for n in lengths {
        let mut row = vec![n.to_string()];
        for p in &placements {
            let pt = b
                .points
                .iter()
                .find(|x| x.hops == n && x.placement == *p)
                .expect("measured");
            wide += usize::from(is_wide(&pt.mpps_runs));
            row.push(format!(
                "{} ({:.1})",
                with_range(&pt.mpps_runs, 1),
                pt.bottleneck_cycles_per_packet
            ));
        }
        t.add_row(row);
    }
    let _ = writeln!(s, "{t}");
    for be in &b.break_even {
        match be.n0 {
            Some(n0) => {
                let _ = writeln!(
                    s,
                    "break-even        {} beats s_core from n0 = {n0} on (of the lengths measured)",
                    be.placement
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "break-even        {} never beats s_core at the lengths measured",
                    be.placement
                );
            }
        }
    }
    s.push_str(&footer(wide, b.interrupted, b.repeat));
    s
}

/// One CSV row per point.
pub fn placement_csv(b: &PlacementBench) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "nf",
        "hops",
        "placement",
        "mpps",
        "bottleneck_core",
        "bottleneck_cycles_per_packet",
        "runs",
    ])
    .expect("in-memory CSV");
    for p in &b.points {
        let runs: Vec<String> = p.mpps_runs.iter().map(|m| format!("{m:.3}")).collect();
        w.write_record([
            b.nf.clone(),
            p.hops.to_string(),
            p.placement.clone(),
            format!("{:.3}", p.mpps),
            p.bottleneck_core.to_string(),
            format!("{:.2}", p.bottleneck_cycles_per_packet),
            runs.join(";"),
        ])
        .expect("in-memory CSV");
    }
    String::from_utf8(w.into_inner().expect("in-memory CSV")).expect("UTF-8")
}

pub fn overload_table(b: &OverloadBench) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sfclab bench overload | {} ({} cores)",
        b.machine.cpu, b.machine.cores
    );
    let _ = writeln!(
        s,
        "chains of `{}`, one stage per NF sharing core {}, generator on core {}, stage budget {} batches, links of {} packets, {} x {:.1} s (medians)\n",
        b.nf, b.chain_core, b.generator_core, b.stage_budget, b.ring_size, b.repeat, b.duration_s
    );
    let mut wide = 0;
    for &(n, cap) in &b.capacity {
        let mut t = comfy_table::Table::new();
        t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
        t.set_header([
            "offered",
            "Mpps offered",
            "drop: Mpps [min–max]",
            "software drops",
            "wasted TSC cycles/pkt",
            "backpressure: Mpps [min–max]",
            "ingress drops",
        ]);
        for load in b
            .points
            .iter()
            .filter(|p| p.hops == n && p.links == "drop")
            .map(|p| p.load)
        {
            let d = b
                .points
                .iter()
                .find(|p| p.hops == n && p.load == load && p.links == "drop")
                .expect("drop point");
            let bp = b
                .points
                .iter()
                .find(|p| p.hops == n && p.load == load && p.links == "backpressure")
                .expect("backpressure point");
            wide += usize::from(is_wide(&d.mpps_runs)) + usize::from(is_wide(&bp.mpps_runs));
            t.add_row(vec![
                format!("{:.0}%", load * 100.0),
                format!("{:.1}", d.offered_mpps),
                with_range(&d.mpps_runs, 1),
                d.software_drops.to_string(),
                d.wasted_cycles_per_received.map_or("-".into(), |w| format!("{w:.1}")),
                with_range(&bp.mpps_runs, 1),
                bp.ingress_drops.to_string(),
            ]);
        }
        let _ = writeln!(s, "n = {n}: capacity {cap:.1} Mpps\n{t}");
    }
    s.push_str(&footer(wide, b.interrupted, b.repeat));
    s
}

pub fn overload_csv(b: &OverloadBench) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "nf",
        "hops",
        "links",
        "load",
        "offered_mpps",
        "mpps",
        "ingress_drops",
        "software_drops",
        "wasted_cycles_per_received",
    ])
    .expect("in-memory CSV");
    for p in &b.points {
        w.write_record([
            b.nf.clone(),
            p.hops.to_string(),
            p.links.to_string(),
            format!("{}", p.load),
            format!("{:.3}", p.offered_mpps),
            format!("{:.3}", p.mpps),
            p.ingress_drops.to_string(),
            p.software_drops.to_string(),
            p.wasted_cycles_per_received
                .map_or(String::new(), |w| format!("{w:.2}")),
        ])
        .expect("in-memory CSV");
    }
    String::from_utf8(w.into_inner().expect("in-memory CSV")).expect("UTF-8")
}

pub fn ring_table(b: &RingBench) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sfclab bench ring | {} ({} cores, TSC {:.3} GHz), bursts of {}, {} repetitions (medians)\n",
        b.machine.cpu,
        b.machine.cores,
        b.machine.tsc_hz / 1e9,
        b.burst,
        b.repeat
    );

    let firsts = |v: &[(f64, f64)]| v.iter().map(|x| x.0).collect::<Vec<_>>();
    let seconds = |v: &[(f64, f64)]| v.iter().map(|x| x.1).collect::<Vec<_>>();
    let wide = [
        &b.ring_runs,
        &b.dpdk_ring_runs,
        &b.full_hop_runs,
        &b.bare_hop_runs,
        &firsts(&b.s_core_runs),
        &firsts(&b.bi2_runs),
    ]
    .iter()
    .filter(|v| is_wide(v))
    .count();
    let _ = writeln!(
        s,
        "ring alone        {} TSC cycles/element (one push + one pop, per side, two cores; median [min–max])",
        with_range(&b.ring_runs, 2)
    );
    match (b.dpdk_ring_cycles_per_element, &b.dpdk_skipped) {
        (Some(d), _) => {
            let _ = writeln!(
                s,
                "peer              DPDK ring_perf_autotest SP/SC bulk {} on two cores: {} cycles/element (enqueue + dequeue): sfclab/DPDK = {:.2}x",
                b.burst,
                with_range(&b.dpdk_ring_runs, 2),
                b.ring_cycles_per_element / d
            );
        }
        (None, Some(why)) => {
            let _ = writeln!(s, "peer              skipped: {why}");
        }
        _ => {}
    }
    let _ = writeln!(
        s,
        "full hop          {} cycles/packet per side (ring + forwarder on the far core through the chain runner); bare loop (indices through rtrb, MAC stores) {}: {:.2}x",
        with_range(&b.full_hop_runs, 2),
        with_range(&b.bare_hop_runs, 2),
        b.full_hop_cycles_per_packet / b.bare_hop_cycles_per_packet
    );
    let _ = writeln!(
        s,
        "forwarder*2       s_core {} busy cycles/packet ({} Mpps), bi:2 {} over both cores ({} Mpps)",
        with_range(&firsts(&b.s_core_runs), 2),
        with_range(&seconds(&b.s_core_runs), 1),
        with_range(&firsts(&b.bi2_runs), 2),
        with_range(&seconds(&b.bi2_runs), 1),
    );
    let _ = writeln!(
        s,
        "full hop          {:.2} cycles/packet added by crossing a core (both cores together)",
        b.hop_cycles_per_packet
    );
    s.push_str(&footer(wide, b.interrupted, b.repeat));
    s
}

pub fn pipeline_table(b: &PipelineBench) -> String {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED)
        .set_header(vec!["case", "system", "setup", "Mpps median [min–max]", "runs"]);
    let mut wide = 0;
    for r in &b.rows {
        wide += usize::from(is_wide(&r.mpps_runs));
        t.add_row(vec![
            r.case.to_string(),
            r.system.to_string(),
            r.setup.clone(),
            with_range(&r.mpps_runs, 3),
            r.mpps_runs
                .iter()
                .map(|x| format!("{x:.3}"))
                .collect::<Vec<_>>()
                .join(", "),
        ]);
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sfclab bench pipeline | {} ({} cores, TSC {:.3} GHz), {} repetitions of {:.1} s\n\n{t}",
        b.machine.cpu,
        b.machine.cores,
        b.machine.tsc_hz / 1e9,
        b.repeat,
        b.duration_s
    );
    if let (Some(r), Some(m)) = (b.two_stages_vs_testpmd_mac, b.two_stages_vs_testpmd_mac_of_medians) {
        let _ = writeln!(
            s,
            "two stages on two cores: sfclab / testpmd+memif (mac) = {r:.2}x (median of the repetitions' ratios; ratio of medians {m:.2}x)"
        );
    }
    if let Some(r) = b.three_stages_vs_testpmd_mac {
        let _ = writeln!(
            s,
            "three stages on two cores: sfclab / three testpmd (mac) = {r:.0}x (median of the repetitions' ratios)"
        );
    }
    let _ = writeln!(
        s,
        "sfclab three stages / two stages on two cores = {:.2}",
        b.three_over_two_stages
    );
    if let Some(why) = &b.peer_skipped {
        let _ = writeln!(s, "peer skipped: {why}");
    }
    s.push_str(&footer(wide, b.interrupted, b.repeat));
    s
}

/// One CSV row per configuration.
pub fn pipeline_csv(b: &PipelineBench) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record(["case", "system", "setup", "mpps", "mpps_runs", "command"]);
    for r in &b.rows {
        let runs = r
            .mpps_runs
            .iter()
            .map(|x| format!("{x:.4}"))
            .collect::<Vec<_>>()
            .join(" ");
        let _ = w.write_record([r.case, r.system, &r.setup, &format!("{:.4}", r.mpps), &runs, &r.command]);
    }
    String::from_utf8(w.into_inner().expect("in-memory writer")).expect("utf-8")
}

pub fn lpm_table(b: &sfclab_bench::lpm::LpmBench) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sfclab bench lpm | {} ({} cores, TSC {:.3} GHz), {} repetitions (medians [min–max])",
        b.machine.cpu,
        b.machine.cores,
        b.machine.tsc_hz / 1e9,
        b.repeat
    );
    let _ = writeln!(
        s,
        "table             {} IPv4 routes shaped as {}; built in {:.2} s, {} MiB; {:.1}% of random addresses have no route\n",
        b.routes,
        b.shape_source,
        b.build_s,
        b.table_bytes >> 20,
        b.fails_percent
    );
    let _ = writeln!(
        s,
        "sfclab single     {} TSC cycles/lookup (one address at a time)",
        with_range(&b.single_runs, 1)
    );
    let _ = writeln!(
        s,
        "sfclab bulk       {} TSC cycles/lookup (bursts of 32)",
        with_range(&b.bulk_runs, 1)
    );
    match (b.dpdk_single_cycles, b.dpdk_bulk_cycles, &b.dpdk_skipped) {
        (Some(ds), Some(db), _) => {
            let _ = writeln!(
                s,
                "rte_lpm single    {} TSC cycles/lookup (rte_lpm_lookup)",
                with_range(&b.dpdk_single_runs, 1)
            );
            let _ = writeln!(
                s,
                "rte_lpm bulk      {} TSC cycles/lookup (rte_lpm_lookup_bulk, 32)",
                with_range(&b.dpdk_bulk_runs, 1)
            );
            let _ = writeln!(
                s,
                "ratio             sfclab/rte_lpm = {:.2}x single, {:.2}x bulk (below 1: sfclab is cheaper)",
                b.single_cycles / ds,
                b.bulk_cycles / db
            );
        }
        (_, _, Some(why)) => {
            let _ = writeln!(s, "peer              skipped: {why}");
        }
        _ => {
            let _ = writeln!(s, "peer              not measured (--peer none)");
        }
    }
    let wide = [&b.single_runs, &b.bulk_runs, &b.dpdk_single_runs, &b.dpdk_bulk_runs]
        .iter()
        .filter(|v| is_wide(v))
        .count();
    s.push_str(&footer(wide, b.interrupted, b.repeat));
    s
}

pub fn acl_table(b: &sfclab_bench::acl::AclBench) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sfclab bench acl | {} ({} cores, TSC {:.3} GHz), {} repetitions (medians [min–max])",
        b.machine.cpu,
        b.machine.cores,
        b.machine.tsc_hz / 1e9,
        b.repeat
    );
    let _ = writeln!(s, "workload: {}; {} headers\n", b.workload, b.trace_headers);
    let _ = writeln!(
        s,
        "{:>6}  {:>22}  {:>22}  {:>22}  {:>10}  {:>7}  {:>7}  {:>9}  checked",
        "rules", "bit vectors cyc/hdr", "rte_acl cyc/hdr", "rte_acl scalar", "tuple sp.", "ratio", "scalar", "memory",
    );
    let mut wide = 0;
    for p in &b.points {
        wide += [&p.bitvector_runs, &p.dpdk_runs, &p.dpdk_scalar_runs]
            .iter()
            .filter(|v| is_wide(v))
            .count();
        let opt = |v: &[f64]| {
            if v.is_empty() {
                "-".to_string()
            } else {
                with_range(v, 1)
            }
        };
        let ratio = |r: Option<f64>| r.map_or("-".to_string(), |r| format!("{r:.2}x"));
        let checked = match (p.agreed, p.compared) {
            (Some(a), Some(c)) => format!("{a}/{c} agree"),
            _ => "-".into(),
        };
        let _ = writeln!(
            s,
            "{:>6}  {:>22}  {:>22}  {:>22}  {:>10.0}  {:>7}  {:>7}  {:>6} KiB  {checked}",
            p.rules,
            with_range(&p.bitvector_runs, 1),
            opt(&p.dpdk_runs),
            opt(&p.dpdk_scalar_runs),
            p.tuple_space_cycles,
            ratio(p.ratio),
            ratio(p.scalar_ratio),
            p.memory_bytes >> 10,
        );
    }
    if let Some(m) = b.points.iter().find_map(|p| p.dpdk_method.as_ref()) {
        let _ = writeln!(
            s,
            "\nrte_acl's default method here: {m}. ratio = sfclab bit vectors / rte_acl (below 1: sfclab is cheaper); tuple sp. = tuple space search, cycles/header."
        );
    }
    if let Some(why) = b.points.iter().find_map(|p| p.dpdk_skipped.as_ref()) {
        let _ = writeln!(s, "peer skipped: {why}");
    }
    s.push_str(&footer(wide, b.interrupted, b.repeat));
    s
}

pub fn nfs_table(b: &sfclab_bench::nfs::NfsBench) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sfclab bench nfs | {} ({} cores, TSC {:.3} GHz), one core, batch {}, {} s windows, {} repetitions (medians [min–max])\n",
        b.machine.cpu,
        b.machine.cores,
        b.machine.tsc_hz / 1e9,
        b.batch,
        b.duration_s,
        b.repeat
    );
    let _ = writeln!(
        s,
        "{:<15} {:>5} {:>8}  {:>22}  {:>22}  {:>9}  {:>8}  {:>7}  per NF (cycles/packet)",
        "workload", "B", "flows", "core Mpps", "core cycles/pkt", "NF cyc/pkt", "NF Mpps", "x fwd"
    );
    let mut wide = 0;
    for p in &b.points {
        wide += [&p.core_mpps_runs, &p.core_cycles_runs]
            .iter()
            .filter(|v| is_wide(v))
            .count();
        let per_nf: Vec<String> = p.nfs.iter().map(|n| format!("{} {:.1}", n.name, n.cycles)).collect();
        let _ = writeln!(
            s,
            "{:<15} {:>5} {:>8}  {:>22}  {:>22}  {:>9.1}  {:>8.2}  {:>7}  {}",
            p.workload,
            p.frames,
            p.flows,
            with_range(&p.core_mpps_runs, 2),
            with_range(&p.core_cycles_runs, 1),
            p.chain_cycles,
            p.chain_mpps,
            p.vs_forwarder.map_or("-".into(), |r| format!("{r:.1}x")),
            per_nf.join(", "),
        );
    }
    let _ = writeln!(
        s,
        "\ncore: accounting off, the one core's generator + chain + sink (what a deployment gets).\n\
         NF cyc/pkt: accounting on, the chain's NFs alone; NF Mpps = TSC Hz / that; x fwd: over the forwarder, same frames."
    );
    for p in &b.points {
        if let (Some(n), Some(bytes)) = (p.table_entries, p.table_bytes_per_entry) {
            let _ = writeln!(
                s,
                "{:<15} {:>5}  table: {n} entries in use, {bytes:.0} bytes per entry of capacity",
                p.workload, p.frames
            );
        }
        if p.dropped > 0 {
            let reasons: Vec<String> = p.drop_reasons.iter().map(|(r, n)| format!("{r} {n}")).collect();
            let _ = writeln!(
                s,
                "{:<15} {:>5}  DROPPED {}: {}",
                p.workload,
                p.frames,
                p.dropped,
                reasons.join(", ")
            );
        }
    }
    s.push_str(&footer(wide, b.interrupted, b.repeat));
    s
}

pub fn nfs_csv(b: &sfclab_bench::nfs::NfsBench) -> String {
    let mut s = String::from(
        "workload,frames,flows,core_mpps,core_cycles_per_packet,chain_cycles_per_packet,chain_mpps,vs_forwarder,nf_cycles,dropped,table_entries,table_bytes_per_entry\n",
    );
    for p in &b.points {
        let per_nf: Vec<String> = p.nfs.iter().map(|n| format!("{}={:.2}", n.name, n.cycles)).collect();
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.3}"));
        let _ = writeln!(
            s,
            "{},{},{},{:.3},{:.2},{:.2},{:.3},{},\"{}\",{},{},{}",
            p.workload,
            p.frames,
            p.flows,
            p.core_mpps,
            p.core_cycles,
            p.chain_cycles,
            p.chain_mpps,
            opt(p.vs_forwarder),
            per_nf.join(";"),
            p.dropped,
            p.table_entries.map_or(String::new(), |n| n.to_string()),
            opt(p.table_bytes_per_entry),
        );
    }
    s
}

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

pub fn lpm6_table(b: &sfclab_bench::lpm6::Lpm6Bench) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sfclab bench lpm6 | {} ({} cores, TSC {:.3} GHz), {} repetitions (medians [min–max])",
        b.machine.cpu,
        b.machine.cores,
        b.machine.tsc_hz / 1e9,
        b.repeat
    );
    let _ = writeln!(
        s,
        "table             {} IPv6 routes shaped as {}; {} KiB; {} addresses inside the routes, {:.1}% missed\n",
        b.routes,
        b.shape_source,
        b.table_bytes >> 10,
        b.addresses,
        b.fails_percent
    );
    let _ = writeln!(
        s,
        "sfclab single     {} TSC cycles/lookup",
        with_range(&b.single_runs, 1)
    );
    let _ = writeln!(s, "sfclab bulk       {} TSC cycles/lookup", with_range(&b.bulk_runs, 1));
    match (b.dpdk_single_cycles, b.dpdk_bulk_cycles, &b.dpdk_skipped) {
        (Some(_), Some(_), _) => {
            let _ = writeln!(
                s,
                "rte_lpm6 single   {} TSC cycles/lookup (rte_lpm6_lookup)",
                with_range(&b.dpdk_single_runs, 1)
            );
            let _ = writeln!(
                s,
                "rte_lpm6 bulk     {} TSC cycles/lookup (rte_lpm6_lookup_bulk_func)",
                with_range(&b.dpdk_bulk_runs, 1)
            );
            let _ = writeln!(
                s,
                "ratio             sfclab/rte_lpm6 = {:.2}x single, {:.2}x bulk (below 1: sfclab is cheaper)",
                b.single_ratio.unwrap_or(f64::NAN),
                b.bulk_ratio.unwrap_or(f64::NAN)
            );
        }
        (_, _, Some(why)) => {
            let _ = writeln!(s, "peer              skipped: {why}");
        }
        _ => {
            let _ = writeln!(s, "peer              not measured (--peer none)");
        }
    }
    let wide = [&b.single_runs, &b.bulk_runs, &b.dpdk_single_runs, &b.dpdk_bulk_runs]
        .iter()
        .filter(|v| is_wide(v))
        .count();
    s.push_str(&footer(wide, b.interrupted, b.repeat));
    s
}

pub fn io_table(b: &sfclab_bench::io::IoBench) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sfclab bench io | {} ({} cores, TSC {:.3} GHz, kernel {}), one veth pair between two namespaces, {}-byte frames, {} rounds of {:.1} s, rows interleaved (medians [min–max])\n",
        b.machine.cpu,
        b.machine.cores,
        b.machine.tsc_hz / 1e9,
        b.machine.kernel,
        b.frame_size,
        b.repeat,
        b.duration_s
    );
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    table.set_header([
        "row",
        "Mpps received",
        "cores",
        "TSC cycles/packet",
        "lost",
        "mode",
        "what it does",
    ]);
    for r in &b.rows {
        let mpps = match (&r.mpps, &r.skipped) {
            (Some(_), _) => with_range(&r.runs_mpps, 3),
            (None, Some(why)) => format!("skipped: {why}"),
            (None, None) => "-".into(),
        };
        let cycles = if r.runs_cycles_per_packet.is_empty() {
            "-".to_string()
        } else {
            with_range(&r.runs_cycles_per_packet, 0)
        };
        table.add_row([
            r.name.clone(),
            mpps,
            r.cores.to_string(),
            cycles,
            r.lost.map_or("-".into(), |l| l.to_string()),
            r.mode.clone().unwrap_or_else(|| "-".into()),
            r.does.clone(),
        ]);
    }
    let _ = writeln!(s, "{table}");
    ratios_and_commands(
        &mut s,
        &b.ratios,
        "received Mpps, same run, same pair",
        b.rows.iter().map(|r| (r.name.as_str(), r.commands.as_slice())),
    );
    let _ = writeln!(
        s,
        "sfclab and trafgen on core {}; testpmd's txonly on core {}, rxonly on core {}",
        b.cores[0], b.cores[0], b.cores[1]
    );
    let wide = b.rows.iter().filter(|r| is_wide(&r.runs_mpps)).count();
    s += &footer(wide, b.interrupted, b.repeat);
    s
}

/// A row's runs as `median [min–max]`, or `-` when it has none.
fn or_dash(v: &[f64], digits: usize) -> String {
    if v.is_empty() {
        "-".to_string()
    } else {
        with_range(v, digits)
    }
}

pub fn forward_table(b: &sfclab_bench::forward::ForwardBench) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sfclab bench forward | {} ({} cores, TSC {:.3} GHz, kernel {}), one forwarder between two veth pairs, {}-byte frames, {} rounds of {:.1} s, rows interleaved (medians [min–max])\ntester: {}; device under test on core {}{}\n",
        b.machine.cpu,
        b.machine.cores,
        b.machine.tsc_hz / 1e9,
        b.machine.kernel,
        b.frame_size,
        b.repeat,
        b.duration_s,
        b.tester,
        b.dut_core,
        b.busy_poll_us
            .map_or(String::new(), |us| format!(", sfclab DUT busy-polling ({us} us)"))
    );
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    table.set_header([
        "row",
        "Mpps forwarded",
        "Mpps offered",
        "loss %",
        "DUT core cycles/frame",
        "DUT busy cycles/packet",
        "device under test",
    ]);
    for r in &b.rows {
        let forwarded = match &r.skipped {
            Some(why) if r.runs_mpps.is_empty() => format!("skipped: {why}"),
            _ => or_dash(&r.runs_mpps, 3),
        };
        let device = match &r.mode {
            Some(m) => format!("{}: {m}", r.device),
            None => r.device.clone(),
        };
        table.add_row([
            r.name.clone(),
            forwarded,
            or_dash(&r.runs_offered_mpps, 3),
            or_dash(&r.runs_loss_pct, 2),
            or_dash(&r.runs_dut_core_cycles, 0),
            or_dash(&r.runs_dut_busy_cycles, 0),
            device,
        ]);
    }
    let _ = writeln!(s, "{table}");
    let _ = writeln!(
        s,
        "DUT core cycles/frame: all the DUT core's non-idle time (/proc/stat) per frame d-out sent, whole run; a busy-polling DUT counts its empty polls too. DUT busy cycles/packet: sfclab's own, empty polls excluded."
    );
    ratios_and_commands(
        &mut s,
        &b.ratios,
        "forwarded Mpps, same run, same tester",
        b.rows.iter().map(|r| (r.name.as_str(), r.commands.as_slice())),
    );
    let wide = b.rows.iter().filter(|r| is_wide(&r.runs_mpps)).count();
    s += &footer(wide, b.interrupted, b.repeat);
    s
}

/// A benchmark's ratios (what they compare in `of`), then each row's peer command lines.
fn ratios_and_commands<'a>(
    s: &mut String,
    ratios: &[sfclab_bench::RowRatio],
    of: &str,
    rows: impl Iterator<Item = (&'a str, &'a [String])>,
) {
    for q in ratios {
        let _ = writeln!(s, "ratio  {} / {} = {:.2}x ({of})", q.row, q.over, q.ratio);
    }
    for (name, commands) in rows.filter(|(_, c)| !c.is_empty()) {
        let _ = writeln!(s, "{name}:");
        for c in commands {
            let _ = writeln!(s, "    {c}");
        }
    }
}

pub fn chaining_table(b: &sfclab_bench::chaining::ChainingBench) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sfclab bench chaining | {} ({} cores, TSC {:.3} GHz, kernel {}), chains of n forwarders, {}-byte frames, {} rounds of {:.1} s, cells interleaved (medians [min–max])\ntester: {}; the chain on core {}\n",
        b.machine.cpu,
        b.machine.cores,
        b.machine.tsc_hz / 1e9,
        b.machine.kernel,
        b.frame_size,
        b.repeat,
        b.duration_s,
        b.tester,
        b.dut_core,
    );
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    table.set_header([
        "n",
        "technology",
        "Mpps through",
        "Mpps offered",
        "loss %",
        "DUT core cycles/frame",
        "where the lost frames went (last round)",
    ]);
    for c in &b.cells {
        let through = match &c.skipped {
            Some(why) if c.runs_mpps.is_empty() => format!("skipped: {why}"),
            _ => or_dash(&c.runs_mpps, 3),
        };
        let drops: Vec<String> = c
            .drops
            .iter()
            .map(|(k, v)| format!("{k} {}", crate::render::num(*v)))
            .collect();
        table.add_row([
            c.hops.to_string(),
            c.technology.clone(),
            through,
            or_dash(&c.runs_offered_mpps, 3),
            or_dash(&c.runs_loss_pct, 1),
            or_dash(&c.runs_dut_core_cycles, 0),
            if drops.is_empty() { "-".into() } else { drops.join(", ") },
        ]);
    }
    let _ = writeln!(s, "{table}");
    for c in b
        .cells
        .iter()
        .filter(|c| c.hops == b.lengths[0] && !c.device.is_empty())
    {
        let _ = writeln!(s, "{}: {}", c.technology, c.device);
    }
    let _ = writeln!(
        s,
        "DUT core cycles/frame: all the DUT core's non-idle time (/proc/stat) per frame the tester got back, whole run; busy-polling hops count their empty polls too."
    );
    for r in &b.ratios {
        let _ = writeln!(
            s,
            "ratio  n={}: {} / {} = {:.2}x",
            r.hops, r.technology, r.over, r.ratio
        );
    }
    s
}

/// One CSV row per technology and chain length.
pub fn chaining_csv(b: &sfclab_bench::chaining::ChainingBench) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "technology",
        "hops",
        "mpps",
        "offered_mpps",
        "loss_pct",
        "dut_core_cycles_per_frame",
        "runs",
        "skipped",
    ])
    .expect("in-memory CSV");
    let median = |v: &[f64]| sfclab_bench::median_if_any(v).map_or(String::new(), |m| format!("{m:.4}"));
    for c in &b.cells {
        let runs: Vec<String> = c.runs_mpps.iter().map(|m| format!("{m:.4}")).collect();
        w.write_record([
            c.technology.clone(),
            c.hops.to_string(),
            c.mpps.map_or(String::new(), |m| format!("{m:.4}")),
            median(&c.runs_offered_mpps),
            median(&c.runs_loss_pct),
            c.dut_core_cycles.map_or(String::new(), |m| format!("{m:.0}")),
            runs.join(" "),
            c.skipped.clone().unwrap_or_default(),
        ])
        .expect("in-memory CSV");
    }
    String::from_utf8(w.into_inner().expect("in-memory CSV")).expect("UTF-8")
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

/// The terminal view of `bench model`: predicted against measured per cell, and the
/// error per layout against the goal.
pub fn model_table(b: &sfclab_bench::model::ModelBench) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "sfclab bench model | {} ({} cores, TSC {:.3} GHz, kernel {})",
        b.machine.cpu,
        b.machine.cores,
        b.machine.tsc_hz / 1e9,
        b.machine.kernel
    );
    let _ = writeln!(
        s,
        "calibration: {} | measured: capacity runs (flow control, backpressure; in namespaces, the offered rate that delivers most), {} x {:.1} s, medians\n",
        b.calibration, b.repeat, b.duration_s
    );
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    t.set_header([
        "chain",
        "layout",
        "size B",
        "predicted Mpps",
        "bottleneck (cycles/pkt)",
        "measured Mpps [min–max]",
        "busiest core cycles/pkt",
        "error",
    ]);
    for p in &b.points {
        t.add_row([
            p.chain.clone(),
            p.layout.clone(),
            p.size.to_string(),
            format!("{:.3}", p.predicted_mpps),
            format!("{} ({:.0})", p.bottleneck, p.predicted_cycles),
            with_range(&p.measured_runs, 3),
            format!("{:.0}", p.measured_cycles),
            format!("{:+.1} %", p.error_pct),
        ]);
    }
    let _ = writeln!(s, "{t}");
    for p in b.points.iter().filter(|p| p.largest_miss.is_some()) {
        let _ = writeln!(
            s,
            "  {} ({}, {} B) {:+.1} %: {}",
            p.chain,
            p.layout,
            p.size,
            p.error_pct,
            p.largest_miss.as_deref().unwrap_or("")
        );
    }
    for p in &b.points {
        let trips = &p.core_round_trip_cycles;
        let (low, high) = trips
            .iter()
            .fold((f64::INFINITY, 0.0_f64), |(l, h), &c| (l.min(c), h.max(c)));
        // The host moved a vCPU during the cell: its rings cost something else meanwhile.
        if !trips.is_empty() && high > 1.5 * low {
            let _ = writeln!(
                s,
                "  {} ({}, {} B): the two cores' round trip moved between {:.0} and {:.0} cycles during the cell",
                p.chain, p.layout, p.size, low, high
            );
        }
    }
    // Where throughput falls past the maximum, the rate the maximum was found at.
    for p in b
        .points
        .iter()
        .filter(|p| sfclab_model::hops_overload(&p.layout).falls())
    {
        let _ = writeln!(
            s,
            "  {} ({}, {} B): delivered most at {} Mpps offered (past it, the kernel drops inside the chain)",
            p.chain,
            p.layout,
            p.size,
            with_range(&p.measured_offered_mpps, 3)
        );
        if let Some(error) = p.saturated_error_pct {
            let _ = writeln!(
                s,
                "    offered all the tester sends: predicted {} Mpps (its software drops priced), measured {} ({error:+.1} %)",
                with_range(&p.predicted_saturated_runs, 3),
                with_range(&p.measured_saturated_runs, 3)
            );
        }
    }
    for e in &b.errors {
        let _ = writeln!(
            s,
            "{}: {} cells, median |error| {:.1} %, worst {:.1} %: {}; the measurement's own spread between rounds: median {:.1} %{}",
            e.layout,
            e.cells,
            e.median_abs_error_pct,
            e.worst_abs_error_pct,
            e.worst,
            e.median_measured_spread_pct,
            if e.counts_for_goal {
                ""
            } else {
                " (beside the goal: C_SWdrops, linear in n from 1 and 3 hops, where it is within the runs' noise)"
            }
        );
    }
    let taken = match (b.core_distance.as_str(), b.near_limit_cycles) {
        ("one state", _) => Some(format!(
            "each cell's terms and measurement in one state of the cores' round trip (within 2.5x of its first run's); {} cell rounds taken again, {} kept in two states",
            b.points.iter().map(|p| p.rounds_taken_again).sum::<usize>(),
            b.points.iter().map(|p| p.rounds_in_two_states).sum::<usize>()
        )),
        (_, Some(limit)) => Some(format!(
            "while the cores' round trip was <= {limit:.0} cycles before and after"
        )),
        _ => None,
    };
    if let Some(taken) = taken {
        let _ = writeln!(
            s,
            "runs on two cores taken {taken}: {} runs repeated, {} kept at another distance after 10 tries",
            b.two_core_runs_repeated, b.two_core_runs_kept_apart
        );
    }
    let _ = writeln!(
        s,
        "goal (median |error| <= 10 %, worst <= 25 %, per layout, on the maximum): {}",
        if b.goal_met { "met" } else { "NOT met" }
    );
    s += &footer(
        b.points.iter().filter(|p| is_wide(&p.measured_runs)).count(),
        b.interrupted,
        b.repeat,
    );
    s
}

/// `bench model --csv`: a row per cell.
pub fn model_csv(b: &sfclab_bench::model::ModelBench) -> String {
    let mut s = String::from(
        "chain,layout,size,predicted_mpps,bottleneck,predicted_cycles,measured_mpps,measured_spread_pct,measured_cycles,error_pct,measured_offered_mpps,predicted_saturated_mpps,measured_saturated_mpps,saturated_error_pct\n",
    );
    for p in &b.points {
        let _ = writeln!(
            s,
            "{},{},{},{:.4},{},{:.1},{:.4},{:.1},{:.1},{:.2},{},{},{},{}",
            p.chain,
            p.layout,
            p.size,
            p.predicted_mpps,
            p.bottleneck,
            p.predicted_cycles,
            p.measured_mpps,
            p.measured_spread_pct,
            p.measured_cycles,
            p.error_pct,
            // Empty in memory: no tester offers a rate there.
            sfclab_bench::median_if_any(&p.measured_offered_mpps)
                .map(|m| format!("{m:.4}"))
                .unwrap_or_default(),
            // Empty where the throughput does not fall past the maximum.
            sfclab_bench::median_if_any(&p.predicted_saturated_runs)
                .map(|m| format!("{m:.4}"))
                .unwrap_or_default(),
            sfclab_bench::median_if_any(&p.measured_saturated_runs)
                .map(|m| format!("{m:.4}"))
                .unwrap_or_default(),
            p.saturated_error_pct.map(|e| format!("{e:.2}")).unwrap_or_default()
        );
    }
    s
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
