//! `sfclab bench model`: the model checked against the machine. A matrix of chains x
//! placements x frame sizes, none of them a run the calibration measured (other lengths,
//! mixes of NFs, placements, and a frame size between the calibrated ones), each
//! predicted from the calibration and measured in the same run; the error per cell, and
//! the median and worst absolute error per layout.
//!
//! Measured = the capacity the chain sustains without loss-inducing overload: the
//! compound runtime's generator never makes more than the chain takes, and pipelines run
//! with flow control and backpressure links (nothing dropped, no cycle wasted); the
//! median of the repetitions. Not the NDR, which vCPU stalls dominate on these VMs.

use serde::Serialize;
use sfclab_model::{Calibration, ChainModel, Layout, nf_key, predict_chain};
use sfclab_runtime::{LinkMode, PipelineSettings, Placement, RunSettings, run_compound, run_pipeline};
use sfclab_traffic::{Destinations, FrameSizes, GeneratorConfig};
use std::time::Duration;

use crate::calibrate::NfWorkload;
use crate::{Interruptible, Machine, median, repetitions};

pub const MODEL_SCHEMA: &str = "sfclab.bench.model/1";

#[derive(Clone)]
pub struct ModelBenchArgs {
    pub duration: Duration,
    pub warmup: Duration,
    pub repeat: usize,
    pub batch: usize,
    pub sizes: Vec<u16>,
    /// The core of the compound runs and the first of the pipelines'.
    pub core: Option<usize>,
}

/// One chain, placed, at one size: predicted and measured.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ModelPoint {
    /// The NFs by kind, `->` between them.
    pub chain: String,
    /// `compound`, or the pipeline's placement (`bi:2`, `pbp:2`, `0,0,1`).
    pub layout: String,
    pub size: u16,
    pub predicted_mpps: f64,
    /// The resource the model names as the bottleneck.
    pub bottleneck: String,
    /// The bottleneck's predicted cycles per packet.
    pub predicted_cycles: f64,
    pub measured_mpps: f64,
    pub measured_runs: Vec<f64>,
    /// The busiest core's measured busy cycles per packet (median).
    pub measured_cycles: f64,
    /// (predicted − measured) / measured, percent.
    pub error_pct: f64,
    /// Each NF's predicted cycles against what it spent in this chain (a run with
    /// per-NF accounting, first repetition), so a miss is traced to its term.
    pub terms: Vec<TermCheck>,
    /// The term furthest from its prediction, in words, when the cell misses by more
    /// than 10 %.
    pub largest_miss: Option<String>,
}

/// One NF's cost: calibrated alone, and spent inside the measured chain.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct TermCheck {
    pub nf: String,
    pub predicted_cycles: f64,
    pub measured_cycles: f64,
}

/// The error of one layout kind (compound or pipeline) over its cells.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ModelError {
    pub layout: String,
    pub cells: usize,
    pub median_abs_error_pct: f64,
    pub worst_abs_error_pct: f64,
    /// Where the worst miss is, and in which direction.
    pub worst: String,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ModelBench {
    pub schema: &'static str,
    pub version: &'static str,
    pub machine: Machine,
    /// The calibration's date and machine, as it says.
    pub calibration: String,
    pub duration_s: f64,
    pub repeat: usize,
    pub interrupted: bool,
    pub points: Vec<ModelPoint>,
    pub errors: Vec<ModelError>,
    /// Goal: median absolute error ≤ 10 %, worst ≤ 25 %, per layout.
    pub goal_met: bool,
}

impl Interruptible for ModelBench {
    fn interrupted(&self) -> bool {
        self.interrupted
    }
}

/// One chain of the matrix: its NFs (workloads of the calibration, by kind).
struct Case {
    kinds: Vec<&'static str>,
    layout: Option<Placement>,
}

/// The matrix: chains of 2 to 6 NFs the calibration never ran (it ran each NF alone),
/// on one core and as pipelines on two.
fn cases(two_cores: bool) -> Vec<Case> {
    let c = |kinds: &[&'static str], layout: Option<Placement>| Case {
        kinds: kinds.to_vec(),
        layout,
    };
    let mut all = vec![
        c(&["forwarder", "forwarder", "forwarder"], None),
        c(&["firewall", "nat44", "router"], None),
        c(&["synthetic", "router", "forwarder", "nat44"], None),
        c(&["forwarder"; 6], None),
    ];
    if two_cores {
        all.extend([
            c(&["firewall", "nat44", "router"], Some(Placement::SCore)),
            c(&["forwarder"; 4], Some(Placement::Bi(2))),
            c(&["firewall", "nat44", "router", "forwarder"], Some(Placement::Bi(2))),
            c(&["synthetic", "synthetic", "router"], Some(Placement::Pbp(2))),
            c(&["forwarder", "nat44", "router"], Some(Placement::Cores(vec![0, 0, 1]))),
        ]);
    }
    all
}

fn workload<'a>(nfs: &'a [NfWorkload], kind: &str) -> Result<&'a NfWorkload, String> {
    nfs.iter()
        .find(|w| w.nf.kind() == kind)
        .ok_or_else(|| format!("no default workload of `{kind}`"))
}

/// The cores a placement's `Cores` list names, mapped onto the cores this run uses
/// (`0` is the first of `cores`, `1` the second).
fn on_cores(placement: &Placement, cores: &[usize]) -> Placement {
    match placement {
        Placement::Cores(list) => Placement::Cores(list.iter().map(|&i| cores[i]).collect()),
        other => other.clone(),
    }
}

pub fn run(
    args: &ModelBenchArgs,
    cal: &Calibration,
    mut progress: impl FnMut(usize, usize, &str),
) -> Result<ModelBench, String> {
    let nfs = crate::calibrate::default_nfs()?;
    let cores = crate::calibrate::cores_from(args.core);
    let matrix = cases(cores.len() >= 2 && cal.pipeline.is_some());
    let total = args.repeat * matrix.len() * args.sizes.len();
    let mut done = 0;
    // Predictions first: a chain the calibration cannot price is refused before any run.
    let mut predictions = Vec::new();
    for case in &matrix {
        let keys: Vec<String> = case
            .kinds
            .iter()
            .map(|k| workload(&nfs, k).map(|w| nf_key(w.nf.kind(), &w.nf.cost_settings())))
            .collect::<Result<_, _>>()?;
        for &size in &args.sizes {
            let layout = match &case.layout {
                None => Layout::Compound,
                Some(p) => Layout::Pipeline {
                    stages: on_cores(p, &cores)
                        .stages(case.kinds.len(), &cores)?
                        .into_iter()
                        .map(|s| (s.nfs, s.core))
                        .collect(),
                },
            };
            let model = ChainModel {
                nfs: keys.clone(),
                frames: vec![(f64::from(size), 1.0)],
                layout,
            };
            predictions.push(predict_chain(cal, &model, None)?);
        }
    }
    let mut measured: Vec<Vec<(f64, f64)>> = vec![Vec::new(); predictions.len()];
    let mut nf_cycles: Vec<Vec<f64>> = vec![Vec::new(); predictions.len()];
    let mut interrupted = false;
    let total = total + matrix.len() * args.sizes.len();
    for round in repetitions(args.repeat, &mut interrupted) {
        let mut cell = 0;
        for case in &matrix {
            for &size in &args.sizes {
                let label = format!("{} {} {size} B", case.kinds.join("->"), layout_name(&case.layout));
                progress(done, total, &label);
                let m = measure(args, &nfs, case, size, &cores, false).map_err(|e| format!("{label}: {e}"))?;
                measured[cell].push((m.mpps, m.busiest_cycles));
                done += 1;
                if round == 0 {
                    progress(done, total, &format!("{label}, per-NF accounting"));
                    nf_cycles[cell] = measure(args, &nfs, case, size, &cores, true)
                        .map_err(|e| format!("{label}: {e}"))?
                        .nf_cycles;
                    done += 1;
                }
                cell += 1;
            }
        }
    }
    let mut points = Vec::new();
    let mut cell = 0;
    for case in &matrix {
        for &size in &args.sizes {
            let p = &predictions[cell];
            let runs: Vec<f64> = measured[cell].iter().map(|m| m.0).collect();
            let cycles: Vec<f64> = measured[cell].iter().map(|m| m.1).collect();
            let measured_mpps = median(&runs);
            let predicted_mpps = p.max_pps / 1e6;
            let error_pct = (predicted_mpps - measured_mpps) / measured_mpps * 100.0;
            let predicted_nf: Vec<f64> = p
                .cores
                .iter()
                .flat_map(|c| c.terms.iter().filter(|t| t.what.starts_with("nf ")).map(|t| t.cycles))
                .collect();
            let terms: Vec<TermCheck> = case
                .kinds
                .iter()
                .zip(predicted_nf)
                .zip(&nf_cycles[cell])
                .map(|((k, predicted), &measured)| TermCheck {
                    nf: k.to_string(),
                    predicted_cycles: predicted,
                    measured_cycles: measured,
                })
                .collect();
            let largest_miss = (error_pct.abs() > 10.0)
                .then(|| {
                    terms
                        .iter()
                        .max_by(|a, b| {
                            (a.measured_cycles - a.predicted_cycles)
                                .abs()
                                .total_cmp(&(b.measured_cycles - b.predicted_cycles).abs())
                        })
                        .map(|t| {
                            format!(
                                "{}: calibrated {:.0} cycles alone, {:.0} in this chain",
                                t.nf, t.predicted_cycles, t.measured_cycles
                            )
                        })
                })
                .flatten();
            points.push(ModelPoint {
                chain: case.kinds.join(" -> "),
                layout: layout_name(&case.layout),
                size,
                predicted_mpps,
                bottleneck: p.bottleneck.clone(),
                predicted_cycles: p
                    .resources
                    .iter()
                    .find(|r| r.name == p.bottleneck)
                    .map_or(f64::NAN, |r| r.cost_per_packet),
                measured_mpps,
                measured_cycles: median(&cycles),
                error_pct,
                measured_runs: runs,
                terms,
                largest_miss,
            });
            cell += 1;
        }
    }
    let errors = errors_of(&points);
    let goal_met = !errors.is_empty()
        && errors
            .iter()
            .all(|e| e.median_abs_error_pct <= 10.0 && e.worst_abs_error_pct <= 25.0);
    Ok(ModelBench {
        schema: MODEL_SCHEMA,
        version: env!("CARGO_PKG_VERSION"),
        machine: Machine::read(),
        calibration: format!("{} on {} ({})", cal.date, cal.machine.cpu, cal.version),
        duration_s: args.duration.as_secs_f64(),
        repeat: measured.first().map_or(0, Vec::len),
        interrupted,
        points,
        errors,
        goal_met,
    })
}

fn layout_name(layout: &Option<Placement>) -> String {
    match layout {
        None => "compound".into(),
        Some(p) => format!("pipeline {p}"),
    }
}

/// The median and worst absolute error per layout kind (`compound`, `pipeline`).
pub fn errors_of(points: &[ModelPoint]) -> Vec<ModelError> {
    let mut kinds: Vec<&str> = points
        .iter()
        .map(|p| p.layout.split(' ').next().unwrap_or(""))
        .collect();
    kinds.dedup();
    kinds.sort_unstable();
    kinds.dedup();
    kinds
        .into_iter()
        .map(|kind| {
            let cells: Vec<&ModelPoint> = points.iter().filter(|p| p.layout.starts_with(kind)).collect();
            let abs: Vec<f64> = cells.iter().map(|p| p.error_pct.abs()).collect();
            let worst = cells
                .iter()
                .max_by(|a, b| a.error_pct.abs().total_cmp(&b.error_pct.abs()))
                .expect("a cell per kind");
            ModelError {
                layout: kind.to_string(),
                cells: cells.len(),
                median_abs_error_pct: median(&abs),
                worst_abs_error_pct: worst.error_pct.abs(),
                worst: format!(
                    "{} ({}, {} B): predicted {:.3} Mpps, measured {:.3} ({:+.1} %)",
                    worst.chain, worst.layout, worst.size, worst.predicted_mpps, worst.measured_mpps, worst.error_pct
                ),
            }
        })
        .collect()
}

/// What one capacity run measured.
struct Measured {
    mpps: f64,
    /// The busiest core's busy cycles per packet.
    busiest_cycles: f64,
    /// Each NF's own cycles per packet (with accounting; empty without).
    nf_cycles: Vec<f64>,
}

fn measure(
    args: &ModelBenchArgs,
    nfs: &[NfWorkload],
    case: &Case,
    size: u16,
    cores: &[usize],
    accounting: bool,
) -> Result<Measured, String> {
    let chain: sfclab_core::NamedNfs = case
        .kinds
        .iter()
        .enumerate()
        .map(|(i, k)| workload(nfs, k).map(|w| (format!("{k}{}", i + 1), w.nf.build())))
        .collect::<Result<Vec<_>, _>>()?
        .into_iter()
        .collect();
    // The router needs destinations in its table; the others are indifferent.
    let destinations = if case.kinds.contains(&"router") {
        Destinations::Spread
    } else {
        Destinations::One
    };
    let traffic = GeneratorConfig {
        sizes: FrameSizes::Fixed { size },
        flows: 1024,
        destinations,
        probe_pps: 0.0,
        ..Default::default()
    };
    let run = RunSettings {
        batch: args.batch,
        duration: Some(args.duration),
        warmup: args.warmup,
        core: cores.first().copied(),
        accounting,
        ..Default::default()
    };
    let r = match &case.layout {
        None => run_compound(traffic, chain, &run).map_err(|e| e.to_string())?,
        Some(p) => run_pipeline(
            traffic,
            chain,
            &PipelineSettings {
                run: RunSettings { pool_size: 0, ..run },
                placement: on_cores(p, cores),
                cores: cores.to_vec(),
                links: LinkMode::Backpressure,
                flow_control: true,
                ..Default::default()
            },
        )
        .map_err(|e| e.to_string())?,
    };
    if r.dropped > 0 {
        return Err(format!("{} packets dropped: not a capacity run", r.dropped));
    }
    let busiest = r
        .cores
        .iter()
        .filter_map(|c| c.cycles_per_packet)
        .fold(r.busy_cycles_per_packet.unwrap_or(0.0), f64::max);
    let nf_cycles = r
        .places
        .iter()
        .filter(|p| p.role == sfclab_runtime::Role::Nf)
        .filter_map(|p| p.cycles_per_packet)
        .collect();
    Ok(Measured {
        mpps: r.mpps,
        busiest_cycles: busiest,
        nf_cycles,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(layout: &str, error_pct: f64) -> ModelPoint {
        ModelPoint {
            chain: "forwarder".into(),
            layout: layout.into(),
            size: 64,
            predicted_mpps: 1.0 + error_pct / 100.0,
            bottleneck: "core".into(),
            predicted_cycles: 100.0,
            measured_mpps: 1.0,
            measured_runs: vec![1.0],
            measured_cycles: 100.0,
            error_pct,
            terms: Vec::new(),
            largest_miss: None,
        }
    }

    #[test]
    fn errors_are_summed_up_per_layout_kind_by_absolute_value() {
        let pts = [
            point("compound", 2.0),
            point("compound", -8.0),
            point("compound", 4.0),
            point("pipeline bi:2", -30.0),
            point("pipeline pbp:2", 10.0),
        ];
        let e = errors_of(&pts);
        assert_eq!(e.len(), 2);
        assert_eq!((e[0].layout.as_str(), e[0].cells), ("compound", 3));
        assert_eq!(e[0].median_abs_error_pct, 4.0);
        assert_eq!(e[0].worst_abs_error_pct, 8.0);
        assert!(e[0].worst.contains("-8.0 %"), "{}", e[0].worst);
        assert_eq!((e[1].layout.as_str(), e[1].cells), ("pipeline", 2));
        assert_eq!(e[1].median_abs_error_pct, 20.0);
        assert_eq!(e[1].worst_abs_error_pct, 30.0);
    }
}
