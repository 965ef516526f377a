//! `sfclab bench overload`: throughput against offered load for chains whose stages
//! share one core (seed 002, Section IV). The generator runs on another core, as the
//! papers' external traffic source does. With `drop` links, a stage that runs ahead
//! overflows the link to the next one, and the cycles already spent on the dropped
//! packets are wasted: past the peak, throughput falls. With `backpressure` links only
//! the rx-queue drops (the NIC), which costs the chain nothing: throughput stays flat.

use crate::{Progress, Stop};
use serde::Serialize;
use sfclab_experiment::Settings;
use sfclab_experiment::settings::Runtime;
use sfclab_runtime::{LinkMode, Placement, RunReport, placement::allowed_cores};
use sfclab_traffic::{FrameSizes, Rate};
use std::time::Duration;

use crate::median;
use std::fmt::Write as _;

pub const OVERLOAD_SCHEMA: &str = "sfclab.bench.overload/2";

#[derive(Debug, Clone)]
pub struct OverloadArgs {
    pub hops: Vec<usize>,
    /// The chain element as given (`forwarder`, `synthetic(cycles=100)`), repeated n
    /// times (`forwarder*n`).
    pub nf: String,
    /// Offered load as fractions of the chain's capacity.
    pub loads: Vec<f64>,
    pub duration: Duration,
    pub warmup: Duration,
    pub repeat: usize,
    pub stage_budget: usize,
    pub ring_size: usize,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct OverloadPoint {
    pub hops: usize,
    pub links: &'static str,
    pub load: f64,
    pub offered_mpps: f64,
    pub mpps: f64,
    pub mpps_runs: Vec<f64>,
    pub ingress_drops: u64,
    pub software_drops: u64,
    pub wasted_cycles_per_received: Option<f64>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct OverloadBench {
    #[serde(flatten)]
    pub header: crate::BenchHeader,
    pub nf: String,
    pub generator_core: usize,
    pub chain_core: usize,
    pub stage_budget: usize,
    pub ring_size: usize,
    pub duration_s: f64,
    /// Capacity of each chain (flow control, backpressure), Mpps.
    pub capacity: Vec<(usize, f64)>,
    pub points: Vec<OverloadPoint>,
}

fn trial(
    args: &OverloadArgs,
    n: usize,
    rate: Rate,
    links: LinkMode,
    flow_control: bool,
    cores: (usize, usize),
    stop: &Stop,
) -> Result<RunReport, String> {
    let settings = Settings::default()
        .runtime(Runtime::Pipeline)
        .placement(Placement::Pbp(1))
        .cores(vec![cores.1])
        .generator_core(cores.0)
        .links(links)
        .ring_size(args.ring_size)
        .rx_queue(1024usize)
        .stage_budget(args.stage_budget)
        .flow_control(flow_control)
        .size(FrameSizes::Fixed { size: 64 })
        .flows(1024u32)
        .rate(rate)
        .latency_probe_pps(0.0)
        .duration(args.duration)
        .warmup(args.warmup)
        .accounting(true);
    crate::run_chain(&format!("{}*{n}", args.nf), &settings, stop)
}

pub fn run(args: &OverloadArgs, progress: &mut Progress, stop: &Stop) -> Result<OverloadBench, String> {
    let cores = allowed_cores();
    if cores.len() < 2 {
        return Err(format!(
            "needs two cores (the generator on one, the chain on another); this process has {}",
            cores.len()
        ));
    }
    let pair = (cores[0], cores[1]);
    progress.plan(args.hops.len() * (args.repeat + args.loads.len() * 2 * args.repeat));
    let mut capacity = Vec::new();
    let mut points = Vec::new();
    let mut interrupted = false;
    'lengths: for &n in &args.hops {
        // Ctrl-C: the lengths and loads finished are kept; nothing new starts.
        if stop.requested() {
            interrupted = true;
            break;
        }
        let mut caps = Vec::new();
        for _ in 0..args.repeat {
            let r = trial(args, n, Rate::Max, LinkMode::Backpressure, true, pair, stop)?;
            if stop.requested() {
                // Its window was cut short: this length is not measured.
                interrupted = true;
                break 'lengths;
            }
            caps.push(r.mpps);
            progress.finished(&format!("n={n} capacity"));
        }
        let cap = median(&caps);
        capacity.push((n, cap));
        for &load in &args.loads {
            if stop.requested() {
                interrupted = true;
                break 'lengths;
            }
            for links in [LinkMode::Drop, LinkMode::Backpressure] {
                let mut rs = Vec::new();
                for _ in 0..args.repeat {
                    let r = trial(args, n, Rate::Pps(cap * load * 1e6), links, false, pair, stop)?;
                    if stop.requested() {
                        // Its window was cut short: this load is not measured.
                        interrupted = true;
                        break 'lengths;
                    }
                    rs.push(r);
                    progress.finished(&format!("n={n} load {:.0}% {}", load * 100.0, links.name()));
                }
                let mpps: Vec<f64> = rs.iter().map(|r| r.mpps).collect();
                let mid = rs
                    .iter()
                    .min_by(|a, b| {
                        (a.mpps - median(&mpps))
                            .abs()
                            .total_cmp(&(b.mpps - median(&mpps)).abs())
                    })
                    .expect("a trial");
                let (ingress, software): (Vec<_>, Vec<_>) = mid.drops.iter().partition(|d| d.kind == "ingress");
                let wasted: Option<f64> = software.iter().map(|d| d.wasted_cycles).sum();
                points.push(OverloadPoint {
                    hops: n,
                    links: links.name(),
                    load,
                    offered_mpps: mid.generated_mpps,
                    mpps: median(&mpps),
                    mpps_runs: mpps.clone(),
                    ingress_drops: ingress.iter().map(|d| d.packets).sum(),
                    software_drops: software.iter().map(|d| d.packets).sum(),
                    wasted_cycles_per_received: wasted
                        .filter(|_| mid.received > 0 && !software.is_empty())
                        .map(|w| w / mid.received as f64),
                });
            }
        }
    }
    Ok(OverloadBench {
        header: crate::BenchHeader::new(OVERLOAD_SCHEMA, args.repeat, interrupted),
        nf: args.nf.clone(),
        generator_core: pair.0,
        chain_core: pair.1,
        stage_budget: args.stage_budget,
        ring_size: args.ring_size,
        duration_s: args.duration.as_secs_f64(),
        capacity,
        points,
    })
}

benchmark!(OverloadBench, render_table, render_csv);

fn render_table(b: &OverloadBench) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", b.header.title("overload"));
    let _ = writeln!(
        s,
        "chains of `{}`, one stage per NF sharing core {}, generator on core {}, stage budget {} batches, links of {} packets, {} x {:.1} s (medians)\n",
        b.nf, b.chain_core, b.generator_core, b.stage_budget, b.ring_size, b.header.repeat, b.duration_s
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
            wide += usize::from(crate::is_wide(&d.mpps_runs)) + usize::from(crate::is_wide(&bp.mpps_runs));
            t.add_row(vec![
                format!("{:.0}%", load * 100.0),
                format!("{:.1}", d.offered_mpps),
                crate::with_range(&d.mpps_runs, 1),
                d.software_drops.to_string(),
                d.wasted_cycles_per_received.map_or("-".into(), |w| format!("{w:.1}")),
                crate::with_range(&bp.mpps_runs, 1),
                bp.ingress_drops.to_string(),
            ]);
        }
        let _ = writeln!(s, "n = {n}: capacity {cap:.1} Mpps\n{t}");
    }
    s.push_str(&crate::footer(wide, b.header.interrupted, b.header.repeat));
    s
}

/// One CSV row per (chain length, load, link mode).
fn render_csv(b: &OverloadBench) -> String {
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

/// `sfclab bench overload`'s flags.
#[derive(clap::Args)]
pub struct OverloadFlags {
    /// Chain lengths (one stage per NF, all on one core).
    #[arg(long, value_delimiter = ',', default_value = "1,3,5")]
    hops: Vec<usize>,
    /// The NF the chain repeats, in chain shorthand.
    #[arg(long, default_value = "synthetic(cycles=60)")]
    nf: String,
    /// Offered load, as fractions of the chain's measured capacity.
    #[arg(long, value_delimiter = ',', default_value = "0.5,0.8,1.0,1.2,1.5,2.0,3.0")]
    loads: Vec<f64>,
    #[arg(long, default_value = "500ms")]
    duration: String,
    #[arg(long, default_value = "100ms")]
    warmup: String,
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Batches a stage may process per turn (above 1 lets a stage outrun the next).
    #[arg(long, default_value_t = 4)]
    stage_budget: usize,
    /// Packets a link between stages holds.
    #[arg(long, default_value_t = 64)]
    ring_size: usize,
}

pub static BENCH: crate::registry::Entry<OverloadFlags, OverloadBench> = crate::registry::Entry {
    name: "overload",
    schema: OVERLOAD_SCHEMA,
    about: "Throughput against offered load when a chain's stages share a core, with drop links (software drops waste cycles) and backpressure links (seed 002, Section IV)",
    run: |f, stop, progress| {
        let (duration, warmup) = crate::registry::window(&f.duration, &f.warmup)?;
        if f.hops.is_empty()
            || f.hops.contains(&0)
            || f.repeat == 0
            || f.loads.iter().any(|l| !(*l > 0.0 && l.is_finite()))
        {
            return Err(crate::registry::BenchError::Usage(
                "need chain lengths of at least 1, positive loads and at least one repetition".into(),
            ));
        }
        // One NF, repeated: refused here (exit 2) when it is not.
        crate::registry::one_nf(&f.nf)?;
        let args = OverloadArgs {
            hops: f.hops,
            nf: f.nf,
            loads: f.loads,
            duration,
            warmup,
            repeat: f.repeat,
            stage_budget: f.stage_budget,
            ring_size: f.ring_size,
        };
        Ok(run(&args, progress, stop)?)
    },
    figure: None,
};
