//! `sfclab bench placement`: maximum throughput against chain length for several
//! placements (seed 002, Fig. 7), and the break-even chain length n0 from which a
//! placement on more cores beats one core.
//!
//! Each trial runs the pipeline with backpressure links and flow control, so that what
//! is measured is the chain's capacity: nothing is dropped, and no cycle is spent on
//! packets that would be.

use crate::{Progress, Stop};
use serde::Serialize;
use sfclab_experiment::Settings;
use sfclab_experiment::settings::Runtime;
use sfclab_runtime::{LinkMode, Placement};
use sfclab_traffic::FrameSizes;
use std::time::Duration;

use crate::median;
use std::fmt::Write as _;

pub const PLACEMENT_SCHEMA: &str = "sfclab.bench.placement/2";

#[derive(Debug, Clone)]
pub struct PlacementArgs {
    pub lengths: Vec<usize>,
    pub placements: Vec<Placement>,
    /// The chain element as given (`forwarder`, `synthetic(cycles=100)`), repeated n
    /// times (`forwarder*n`).
    pub nf: String,
    pub duration: Duration,
    pub warmup: Duration,
    pub repeat: usize,
    pub batch: usize,
    pub size: u16,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PlacementPoint {
    pub hops: usize,
    pub placement: String,
    pub mpps: f64,
    pub mpps_runs: Vec<f64>,
    /// Busy cycles per packet of the busiest core (the bottleneck), median.
    pub bottleneck_cycles_per_packet: f64,
    pub bottleneck_core: usize,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct BreakEven {
    pub placement: String,
    /// The shortest measured chain from which this placement beats `s_core` at every
    /// measured length; `None` if it never does.
    pub n0: Option<usize>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PlacementBench {
    #[serde(flatten)]
    pub header: crate::BenchHeader,
    pub nf: String,
    pub frame_size: u16,
    pub batch: usize,
    pub duration_s: f64,
    pub points: Vec<PlacementPoint>,
    pub break_even: Vec<BreakEven>,
}

pub fn run(args: &PlacementArgs, progress: &mut Progress, stop: &Stop) -> Result<PlacementBench, String> {
    progress.plan(args.repeat * args.lengths.len() * args.placements.len());
    let mut runs: Vec<Vec<(f64, f64, usize)>> = vec![Vec::new(); args.lengths.len() * args.placements.len()];
    let mut rounds = crate::Rounds::new(args.repeat, stop);
    'rounds: while rounds.start_next() {
        for (li, &n) in args.lengths.iter().enumerate() {
            for (pi, placement) in args.placements.iter().enumerate() {
                if !rounds.go_on() {
                    break 'rounds;
                }
                let settings = Settings::default()
                    .runtime(Runtime::Pipeline)
                    .placement(placement.clone())
                    .links(LinkMode::Backpressure)
                    .flow_control(true)
                    .size(FrameSizes::Fixed { size: args.size })
                    .flows(1024u32)
                    .latency_probe_pps(0.0)
                    .batch(args.batch)
                    .duration(args.duration)
                    .warmup(args.warmup)
                    .accounting(false);
                let r = crate::run_chain(&format!("{}*{n}", args.nf), &settings, stop)
                    .map_err(|e| format!("{placement} n={n}: {e}"))?;
                if r.interrupted {
                    rounds.cut();
                    break 'rounds;
                }
                let bottleneck = r
                    .cores
                    .iter()
                    .max_by(|a, b| {
                        a.cycles_per_packet
                            .unwrap_or(0.0)
                            .total_cmp(&b.cycles_per_packet.unwrap_or(0.0))
                    })
                    .expect("a core");
                runs[li * args.placements.len() + pi].push((
                    r.mpps,
                    bottleneck.cycles_per_packet.unwrap_or(f64::NAN),
                    bottleneck.core,
                ));
                progress.finished(&format!("{placement} n={n}"));
            }
        }
    }
    let mut points = Vec::new();
    for r in &mut runs {
        rounds.keep_completed(r);
    }
    for (li, &n) in args.lengths.iter().enumerate() {
        for (pi, placement) in args.placements.iter().enumerate() {
            let r = &runs[li * args.placements.len() + pi];
            if r.is_empty() {
                continue; // Ctrl-C came before a round ended
            }
            let mpps_runs: Vec<f64> = r.iter().map(|x| x.0).collect();
            let cycles: Vec<f64> = r.iter().map(|x| x.1).collect();
            points.push(PlacementPoint {
                hops: n,
                placement: placement.to_string(),
                mpps: median(&mpps_runs),
                bottleneck_cycles_per_packet: median(&cycles),
                bottleneck_core: r[0].2,
                mpps_runs,
            });
        }
    }
    let break_even = args
        .placements
        .iter()
        .filter(|p| **p != Placement::SCore)
        .map(|p| BreakEven {
            placement: p.to_string(),
            n0: break_even(&points, &p.to_string()),
        })
        .collect();
    Ok(PlacementBench {
        header: crate::BenchHeader::after(PLACEMENT_SCHEMA, &rounds),
        nf: args.nf.clone(),
        frame_size: args.size,
        batch: args.batch,
        duration_s: args.duration.as_secs_f64(),
        points,
        break_even,
    })
}

/// The shortest length from which `placement` beats `s_core` at every longer measured length.
pub fn break_even(points: &[PlacementPoint], placement: &str) -> Option<usize> {
    let mut lengths: Vec<usize> = points.iter().map(|p| p.hops).collect();
    lengths.sort_unstable();
    lengths.dedup();
    let mpps = |n: usize, p: &str| points.iter().find(|x| x.hops == n && x.placement == p).map(|x| x.mpps);
    let wins: Vec<(usize, bool)> = lengths
        .iter()
        .filter_map(|&n| Some((n, mpps(n, placement)? > mpps(n, "s_core")?)))
        .collect();
    let last_loss = wins.iter().rposition(|&(_, w)| !w);
    match last_loss {
        None => wins.first().map(|&(n, _)| n),
        Some(i) => wins.get(i + 1).map(|&(n, _)| n),
    }
}

benchmark!(PlacementBench, render_table, render_csv);

fn render_table(b: &PlacementBench) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", b.header.title("placement"));
    let _ = writeln!(
        s,
        "chains of `{}`, {} B frames, batch {}, backpressure + flow control (capacity), {} x {:.1} s per point (medians)\n",
        b.nf, b.frame_size, b.batch, b.header.repeat, b.duration_s
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
            wide += usize::from(crate::is_wide(&pt.mpps_runs));
            row.push(format!(
                "{} ({:.1})",
                crate::with_range(&pt.mpps_runs, 1),
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
    s.push_str(&crate::footer(wide, b.header.interrupted, b.header.repeat));
    s
}

/// One CSV row per point.
fn render_csv(b: &PlacementBench) -> String {
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

/// `sfclab bench placement`'s flags.
#[derive(clap::Args)]
pub struct PlacementFlags {
    /// Chain lengths to measure.
    #[arg(long, value_delimiter = ',', default_value = "4,8,16,24,32,48")]
    lengths: Vec<usize>,
    /// Placements to compare (s_core is the reference for the break-even).
    #[arg(long, value_delimiter = ',', default_value = "s_core,bi:2,pbp:2")]
    placements: Vec<String>,
    /// The NF the chain repeats, in chain shorthand.
    #[arg(long, default_value = "forwarder")]
    nf: String,
    #[arg(long, default_value = "1s")]
    duration: String,
    #[arg(long, default_value = "200ms")]
    warmup: String,
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    #[arg(long, default_value_t = 32)]
    batch: usize,
    #[arg(long, default_value_t = 64)]
    size: u16,
}

pub static BENCH: crate::registry::Entry<PlacementFlags, PlacementBench> = crate::registry::Entry {
    name: "placement",
    schema: PLACEMENT_SCHEMA,
    about: "Maximum throughput against chain length for s_core, bi:K and pbp:K placements, and the break-even chain length n0 (seed 002, Fig. 7)",
    run: |f, stop, progress| {
        use crate::registry::BenchError::Usage;
        let placements = f
            .placements
            .iter()
            .map(|p| p.parse())
            .collect::<Result<Vec<Placement>, String>>()
            .map_err(Usage)?;
        let (duration, warmup) = crate::registry::window(&f.duration, &f.warmup)?;
        if f.lengths.is_empty() || f.lengths.contains(&0) || f.repeat == 0 || !placements.contains(&Placement::SCore) {
            return Err(Usage(
                "need lengths of at least 1, at least one repetition, and s_core among the placements (the reference)"
                    .into(),
            ));
        }
        // One NF, repeated: refused here (exit 2) when it is not.
        crate::registry::one_nf(&f.nf)?;
        let args = PlacementArgs {
            lengths: f.lengths,
            placements,
            nf: f.nf,
            duration,
            warmup,
            repeat: f.repeat,
            batch: f.batch,
            size: f.size,
        };
        Ok(run(&args, progress, stop)?)
    },
    figure: None,
};

#[cfg(test)]
mod tests {
    use super::*;

    fn pt(hops: usize, placement: &str, mpps: f64) -> PlacementPoint {
        PlacementPoint {
            hops,
            placement: placement.into(),
            mpps,
            mpps_runs: vec![mpps],
            bottleneck_cycles_per_packet: 1.0,
            bottleneck_core: 0,
        }
    }

    #[test]
    fn break_even_is_where_the_placement_wins_for_good() {
        let points = vec![
            pt(4, "s_core", 100.0),
            pt(4, "bi:2", 80.0),
            pt(8, "s_core", 60.0),
            pt(8, "bi:2", 61.0),
            pt(16, "s_core", 30.0),
            pt(16, "bi:2", 29.0),
            pt(24, "s_core", 20.0),
            pt(24, "bi:2", 30.0),
            pt(32, "s_core", 15.0),
            pt(32, "bi:2", 25.0),
            pt(4, "pbp:2", 10.0),
            pt(8, "pbp:2", 10.0),
            pt(16, "pbp:2", 10.0),
            pt(24, "pbp:2", 10.0),
            pt(32, "pbp:2", 10.0),
        ];
        // bi:2 wins at 8, loses at 16 again, then wins from 24 on.
        assert_eq!(break_even(&points, "bi:2"), Some(24));
        assert_eq!(break_even(&points, "pbp:2"), None);
    }
}
