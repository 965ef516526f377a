//! `sfclab bench placement`: maximum throughput against chain length for several
//! placements (seed 002, Fig. 7), and the break-even chain length n0 from which a
//! placement on more cores beats one core.
//!
//! Each trial runs the pipeline with backpressure links and flow control, so that what
//! is measured is the chain's capacity: nothing is dropped, and no cycle is spent on
//! packets that would be.

use serde::Serialize;
use sfclab_runtime::{LinkMode, PipelineSettings, Placement, RunSettings, run_pipeline};
use sfclab_traffic::{FrameSizes, GeneratorConfig};
use std::time::Duration;

use crate::{Machine, median};

pub const PLACEMENT_SCHEMA: &str = "sfclab.bench.placement/2";

#[derive(Debug, Clone)]
pub struct PlacementArgs {
    pub lengths: Vec<usize>,
    pub placements: Vec<Placement>,
    /// The chain element as given (`forwarder`, `synthetic(cycles=100)`), for the record.
    pub nf: String,
    /// That element, repeated n times.
    pub nf_config: sfclab_nf::NfSpec,
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
    pub schema: &'static str,
    pub version: &'static str,
    pub machine: Machine,
    pub nf: String,
    pub frame_size: u16,
    pub batch: usize,
    pub duration_s: f64,
    /// Repetitions run (fewer than asked when interrupted).
    pub repeat: usize,
    /// Stopped by Ctrl-C: the figures are those of the repetitions finished.
    pub interrupted: bool,
    pub points: Vec<PlacementPoint>,
    pub break_even: Vec<BreakEven>,
}

pub fn run(args: &PlacementArgs, mut progress: impl FnMut(usize, usize, &str)) -> Result<PlacementBench, String> {
    let total = args.repeat * args.lengths.len() * args.placements.len();
    let mut done = 0;
    let mut runs: Vec<Vec<(f64, f64, usize)>> = vec![Vec::new(); args.lengths.len() * args.placements.len()];
    let mut rounds = crate::Rounds::new(args.repeat);
    'rounds: while rounds.start_next() {
        for (li, &n) in args.lengths.iter().enumerate() {
            for (pi, placement) in args.placements.iter().enumerate() {
                if !rounds.go_on() {
                    break 'rounds;
                }
                let nfs = crate::copies(&args.nf_config, n);
                let settings = PipelineSettings {
                    run: RunSettings {
                        batch: args.batch,
                        duration: Some(args.duration),
                        warmup: args.warmup,
                        accounting: false,
                        pool_size: 0,
                        stop: crate::stop_flag(),
                        ..Default::default()
                    },
                    placement: placement.clone(),
                    links: LinkMode::Backpressure,
                    flow_control: true,
                    ..Default::default()
                };
                let traffic = GeneratorConfig {
                    sizes: FrameSizes::Fixed { size: args.size },
                    flows: 1024,
                    probe_pps: 0.0,
                    ..Default::default()
                };
                let r = run_pipeline(traffic, nfs, &settings).map_err(|e| format!("{placement} n={n}: {e}"))?;
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
                done += 1;
                progress(done, total, &format!("{placement} n={n}"));
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
        schema: PLACEMENT_SCHEMA,
        version: env!("CARGO_PKG_VERSION"),
        machine: Machine::read(),
        nf: args.nf.clone(),
        frame_size: args.size,
        batch: args.batch,
        duration_s: args.duration.as_secs_f64(),
        repeat: rounds.completed(),
        interrupted: rounds.interrupted(),
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

impl crate::Interruptible for PlacementBench {
    fn interrupted(&self) -> bool {
        self.interrupted
    }
}

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
