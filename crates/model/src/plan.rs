//! Planning: given chains with a target rate each and the cores available, the layout of
//! every chain (compound on one core, a pipeline of stages on cores, replicas of either
//! with flows shared by hash) and the cores they go on, using the fewest cores that meet
//! every target as the calibration prices them, or why no plan does.
//!
//! Every core runs busy-polling loops. A core given to one pipeline belongs to it alone
//! (its stages' rings are priced for a core of their own). Compound instances (a whole
//! chain, or one replica of it) may share a core: oversubscription, as seed 001's 2:1
//! and 4:1. The kernel then gives each of the m loops on a core 1/m of it, whatever its
//! load, so a shared core holds m instances only if each needs at most 1/m of the
//! core's cycles (times `max_utilisation`); what switching between them costs is not in
//! the model.
//!
//! The search is exact for chains of up to [`EXACT_UP_TO`] NFs (every way to cut the
//! chain into stages and map the stages to cores, every replica count up to the cores
//! available); longer chains are cut into `bi:k` and `pbp:k` patterns only. The
//! combinations of the chains' candidates are searched whole while they are few, and
//! chain by chain (each its cheapest) beyond.

use crate::calibration::Calibration;
use crate::chain::{ChainModel, Layout, predict_chain};
use serde::Serialize;
use std::ops::Range;

/// Chains of up to this many NFs have every stage cut and core map searched.
pub const EXACT_UP_TO: usize = 8;

/// Combinations of the chains' candidates searched whole at most; beyond, chain by chain.
const MAX_COMBINATIONS: usize = 200_000;

/// One chain to place and the rate it must carry.
#[derive(Debug, Clone, PartialEq)]
pub struct Demand {
    pub name: String,
    /// NF keys, frames; its layout is ignored: the plan chooses it.
    pub chain: ChainModel,
    pub target_pps: f64,
}

/// What the plan may use.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanLimits {
    pub cores: usize,
    pub compound: bool,
    pub pipeline: bool,
    /// The largest share of a core a plan may count on (1.0: all of it).
    pub max_utilisation: f64,
}

/// How one chain runs in a plan.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ChainPlan {
    pub chain: String,
    pub target_pps: f64,
    /// `compound`, or the pipeline as `sfclab run --placement` takes it with cores
    /// numbered from 0 (`bi:2`, `pbp:2`, `0,0,1`).
    pub layout: String,
    pub replicas: usize,
    /// The plan's cores (indices into `PlanResult::cores`) each replica's stages run on,
    /// in stage order.
    pub cores_of_replicas: Vec<Vec<usize>>,
    /// What the chain can carry as planned (all replicas, the cores' sharing counted).
    pub capacity_pps: f64,
    /// The resource that caps one replica, as the model names it.
    pub bottleneck: String,
}

/// One core of the plan and what runs on it.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct PlannedCore {
    /// `chain i (name) replica k stage s` of each loop on it.
    pub runs: Vec<String>,
    /// The share of the core its loops need at their targets.
    pub utilisation: f64,
    /// Loops on it (more than one: oversubscribed).
    pub loops: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct PlanResult {
    /// Whether every target is met within the cores available.
    pub feasible: bool,
    pub cores_available: usize,
    pub cores_used: usize,
    pub chains: Vec<ChainPlan>,
    pub cores: Vec<PlannedCore>,
    /// Why not, chain by chain, when infeasible.
    pub reasons: Vec<String>,
    /// `exact` or `chain by chain`.
    pub search: String,
}

/// One way to run one chain: its loops, each with the core share it needs at the target.
#[derive(Debug, Clone)]
struct Candidate {
    layout: String,
    replicas: usize,
    /// Per replica: (stage loads in stage order, each its share of a core at target / r).
    loads: Vec<f64>,
    shareable: bool,
    /// One replica's capacity as if alone on its cores, and its bottleneck.
    replica_pps: f64,
    bottleneck: String,
}

impl Candidate {
    fn cores_alone(&self) -> usize {
        self.replicas * self.loads.len()
    }
    fn max_load(&self) -> f64 {
        self.loads.iter().copied().fold(0.0, f64::max)
    }
    fn total_load(&self) -> f64 {
        self.replicas as f64 * self.loads.iter().sum::<f64>()
    }
}

/// Every way to cut `n` NFs into stages on `k` cores: maps from NF to core label in
/// canonical form (labels appear in first-use order), with at most `max_labels` labels
/// and at least two stages.
fn core_maps(n: usize, max_labels: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    if n <= EXACT_UP_TO {
        let mut map = vec![0usize; n];
        fn rec(i: usize, used: usize, map: &mut Vec<usize>, max: usize, out: &mut Vec<Vec<usize>>) {
            if i == map.len() {
                if used >= 2 {
                    out.push(map.clone());
                }
                return;
            }
            for l in 0..=used.min(max - 1) {
                map[i] = l;
                rec(i + 1, used.max(l + 1), map, max, out);
            }
        }
        if max_labels >= 2 {
            rec(0, 0, &mut map, max_labels, &mut out);
        }
    } else {
        for k in 2..=max_labels.min(n) {
            out.push((0..n).map(|i| i * k / n).collect()); // bi:k
            out.push((0..n).map(|i| i % k).collect()); // pbp:k
        }
    }
    out
}

/// Stages (runs of NFs with one label) and the label's name as `--placement` writes it.
fn stages_of(map: &[usize]) -> (Vec<(Range<usize>, usize)>, String) {
    let mut stages: Vec<(Range<usize>, usize)> = Vec::new();
    for (i, &l) in map.iter().enumerate() {
        match stages.last_mut() {
            Some((r, c)) if *c == l => r.end = i + 1,
            _ => stages.push((i..i + 1, l)),
        }
    }
    let labels = map.iter().max().map_or(0, |m| m + 1);
    let n = map.len();
    let name = if map == (0..n).map(|i| i * labels / n).collect::<Vec<_>>() && stages.len() == labels {
        format!("bi:{labels}")
    } else if map == (0..n).map(|i| i % labels).collect::<Vec<_>>() {
        format!("pbp:{labels}")
    } else {
        map.iter().map(|l| l.to_string()).collect::<Vec<_>>().join(",")
    };
    (stages, name)
}

fn candidates(cal: &Calibration, d: &Demand, limits: &PlanLimits) -> Result<Vec<Candidate>, String> {
    let hz = cal.machine.tsc_hz;
    let u = limits.max_utilisation;
    let mut out = Vec::new();
    let with = |layout: Layout| ChainModel {
        layout,
        ..d.chain.clone()
    };
    if limits.compound {
        let p = predict_chain(cal, &with(Layout::Compound), None)?;
        let cycles = p.cores[0].cycles_per_packet;
        let first = ((d.target_pps * cycles / hz / u).ceil() as usize).max(1);
        for r in first..=limits.cores {
            out.push(Candidate {
                layout: "compound".into(),
                replicas: r,
                loads: vec![d.target_pps / r as f64 * cycles / hz],
                shareable: true,
                replica_pps: p.max_pps,
                bottleneck: p.bottleneck.clone(),
            });
        }
    }
    if limits.pipeline && limits.cores >= 2 && cal.pipeline.is_some() {
        for map in core_maps(d.chain.nfs.len(), limits.cores) {
            let (stages, name) = stages_of(&map);
            let p = predict_chain(cal, &with(Layout::Pipeline { stages }), None)?;
            // `cores` are listed by first use, which is label order.
            let per_core: Vec<f64> = p.cores.iter().map(|c| c.cycles_per_packet).collect();
            let busiest = per_core.iter().copied().fold(0.0, f64::max);
            let first = ((d.target_pps * busiest / hz / u).ceil() as usize).max(1);
            for r in first..=first + 1 {
                if r * per_core.len() > limits.cores {
                    break;
                }
                out.push(Candidate {
                    layout: name.clone(),
                    replicas: r,
                    loads: per_core.iter().map(|c| d.target_pps / r as f64 * c / hz).collect(),
                    shareable: false,
                    replica_pps: p.max_pps,
                    bottleneck: p.bottleneck.clone(),
                });
            }
        }
    }
    // Keep the candidates no other beats on both cores and cycles.
    out.sort_by(|a, b| {
        a.cores_alone()
            .cmp(&b.cores_alone())
            .then(a.total_load().total_cmp(&b.total_load()))
    });
    let mut kept: Vec<Candidate> = Vec::new();
    for c in out {
        let dominated = kept.iter().any(|k| {
            k.shareable >= c.shareable
                && k.cores_alone() <= c.cores_alone()
                && k.total_load() <= c.total_load()
                && k.max_load() <= c.max_load()
        });
        if !dominated {
            kept.push(c);
        }
    }
    Ok(kept)
}

/// A loop to place: which chain, replica and stage, and its share of a core.
#[derive(Debug, Clone)]
struct Loop {
    chain: usize,
    replica: usize,
    stage: usize,
    load: f64,
    shareable: bool,
}

/// Cores for the loops: each unshareable loop its own, shareable ones packed largest
/// first, a core holding m of them while m times its largest fits `u` (a core's count
/// is set by its largest loop, so it takes the largest left), never two of one chain.
fn pack(loops: &[Loop], u: f64) -> Vec<Vec<usize>> {
    let mut cores: Vec<Vec<usize>> = Vec::new();
    let mut shared: Vec<usize> = Vec::new();
    for (i, l) in loops.iter().enumerate() {
        if l.shareable {
            shared.push(i);
        } else {
            cores.push(vec![i]);
        }
    }
    shared.sort_by(|&a, &b| loops[b].load.total_cmp(&loops[a].load));
    let mut placed = vec![false; loops.len()];
    for (n, &first) in shared.iter().enumerate() {
        if placed[first] {
            continue;
        }
        placed[first] = true;
        let fit = ((u / loops[first].load).floor() as usize).max(1);
        let mut core = vec![first];
        for &i in &shared[n + 1..] {
            if core.len() == fit {
                break;
            }
            // Two replicas of one chain on one core would only take turns: never.
            if !placed[i] && core.iter().all(|&j| loops[j].chain != loops[i].chain) {
                placed[i] = true;
                core.push(i);
            }
        }
        cores.push(core);
    }
    cores
}

fn loops_of(choice: &[&Candidate]) -> Vec<Loop> {
    let mut loops = Vec::new();
    for (chain, c) in choice.iter().enumerate() {
        for replica in 0..c.replicas {
            for (stage, &load) in c.loads.iter().enumerate() {
                loops.push(Loop {
                    chain,
                    replica,
                    stage,
                    load,
                    shareable: c.shareable,
                });
            }
        }
    }
    loops
}

/// The plan with the fewest cores for `demands`, or the reasons none fits.
pub fn plan(cal: &Calibration, demands: &[Demand], limits: &PlanLimits) -> Result<PlanResult, String> {
    check_limits(demands, limits)?;
    let mut per_chain = Vec::with_capacity(demands.len());
    let mut reasons = Vec::new();
    for d in demands {
        if !(d.target_pps.is_finite() && d.target_pps > 0.0) {
            return Err(format!("{}: target {} packets/s is not a rate", d.name, d.target_pps));
        }
        let c = candidates(cal, d, limits)?;
        if c.is_empty() {
            reasons.push(unreachable(cal, d, limits)?);
        }
        per_chain.push(c);
    }
    let u = limits.max_utilisation;
    let combinations = per_chain
        .iter()
        .try_fold(1usize, |acc, c| acc.checked_mul(c.len().max(1)));
    let exact = combinations.is_some_and(|n| n <= MAX_COMBINATIONS);
    let search = if exact { "exact" } else { "chain by chain" }.to_string();
    let best = if reasons.is_empty() {
        best_choice(&per_chain, u, exact)
    } else {
        None
    };
    let Some(index) = best else {
        return Ok(PlanResult {
            feasible: false,
            cores_available: limits.cores,
            cores_used: 0,
            chains: Vec::new(),
            cores: Vec::new(),
            reasons,
            search,
        });
    };
    let choice: Vec<&Candidate> = index.iter().zip(&per_chain).map(|(&i, c)| &c[i]).collect();
    let loops = loops_of(&choice);
    let packed = pack(&loops, u);
    let (chains, cores) = placed(&choice, demands, &loops, &packed);
    let feasible = packed.len() <= limits.cores;
    if !feasible {
        reasons.push(format!(
            "together the chains need {} cores at their targets; {} are available",
            packed.len(),
            limits.cores
        ));
    }
    Ok(PlanResult {
        feasible,
        cores_available: limits.cores,
        cores_used: packed.len(),
        chains,
        cores,
        reasons,
        search,
    })
}

/// Something to plan, and room to plan it in.
fn check_limits(demands: &[Demand], limits: &PlanLimits) -> Result<(), String> {
    if demands.is_empty() {
        return Err("nothing to plan: no chain with a target".into());
    }
    if limits.cores == 0 {
        return Err("no core to plan on".into());
    }
    if !(limits.max_utilisation > 0.0 && limits.max_utilisation <= 1.0) {
        return Err(format!(
            "max utilisation {} is not a share of a core in (0, 1]",
            limits.max_utilisation
        ));
    }
    if !limits.compound && !limits.pipeline {
        return Err("no layout allowed: allow compound, pipeline or both".into());
    }
    Ok(())
}

/// The candidate of each chain that packs on the fewest cores, then the least loaded
/// busiest core, then the fewest loops: every combination when there are few enough
/// (`exact`), else each chain's first (its fewest cores, then fewest cycles).
fn best_choice(per_chain: &[Vec<Candidate>], u: f64, exact: bool) -> Option<Vec<usize>> {
    let mut best: Option<(usize, f64, usize, Vec<usize>)> = None;
    // `score` holds `best` until the end of this block.
    {
        let mut index = vec![0usize; per_chain.len()];
        let mut score = |index: &[usize]| {
            let choice: Vec<&Candidate> = index.iter().zip(per_chain).map(|(&i, c)| &c[i]).collect();
            let loops = loops_of(&choice);
            let cores = pack(&loops, u);
            let peak = cores
                .iter()
                .map(|c| c.len() as f64 * c.iter().map(|&i| loops[i].load).fold(0.0, f64::max))
                .fold(0.0, f64::max);
            // Fewest cores, then the least loaded busiest core, then the fewest loops.
            let key = (cores.len(), peak, loops.len());
            let better = match &best {
                None => true,
                Some((n, p, l, _)) => (key.0, key.1, key.2) < (*n, *p, *l),
            };
            if better {
                best = Some((key.0, key.1, key.2, index.to_vec()));
            }
        };
        if exact {
            'all: loop {
                score(&index);
                for k in 0..index.len() {
                    index[k] += 1;
                    if index[k] < per_chain[k].len() {
                        continue 'all;
                    }
                    index[k] = 0;
                }
                break;
            }
        } else {
            // Each chain its fewest cores, then fewest cycles (candidates are sorted so).
            score(&index);
        }
    }
    best.map(|(_, _, _, index)| index)
}

/// The chosen candidates as placed on the packed cores: each chain's plan (its
/// replicas' cores and capacity) and each core's runs.
fn placed(
    choice: &[&Candidate],
    demands: &[Demand],
    loops: &[Loop],
    packed: &[Vec<usize>],
) -> (Vec<ChainPlan>, Vec<PlannedCore>) {
    let mut chains: Vec<ChainPlan> = choice
        .iter()
        .zip(demands)
        .map(|(c, d)| ChainPlan {
            chain: d.name.clone(),
            target_pps: d.target_pps,
            layout: c.layout.clone(),
            replicas: c.replicas,
            cores_of_replicas: vec![vec![usize::MAX; c.loads.len()]; c.replicas],
            capacity_pps: f64::INFINITY,
            bottleneck: c.bottleneck.clone(),
        })
        .collect();
    let mut cores = Vec::with_capacity(packed.len());
    // A replica's capacity: the least over its stages of what its core gives it.
    let mut replica_pps: Vec<Vec<f64>> = choice.iter().map(|c| vec![c.replica_pps; c.replicas]).collect();
    for (k, members) in packed.iter().enumerate() {
        let m = members.len() as f64;
        for &i in members {
            let l = &loops[i];
            chains[l.chain].cores_of_replicas[l.replica][l.stage] = k;
            // Alone, the loop carries target/r at `load`; with 1/m of the core it carries
            // (target/r) / (load * m).
            let share_pps = demands[l.chain].target_pps / choice[l.chain].replicas as f64 / (l.load * m);
            let r = &mut replica_pps[l.chain][l.replica];
            *r = r.min(share_pps);
        }
        cores.push(PlannedCore {
            runs: members
                .iter()
                .map(|&i| {
                    let l = &loops[i];
                    format!(
                        "chain {} ({}) replica {} stage {}",
                        l.chain + 1,
                        demands[l.chain].name,
                        l.replica + 1,
                        l.stage + 1
                    )
                })
                .collect(),
            utilisation: members.iter().map(|&i| loops[i].load).sum(),
            loops: members.len(),
        });
    }
    for (c, r) in chains.iter_mut().zip(&replica_pps) {
        c.capacity_pps = r.iter().sum();
    }
    (chains, cores)
}

/// Why one chain alone cannot reach its target on the cores available: the most it can.
fn unreachable(cal: &Calibration, d: &Demand, limits: &PlanLimits) -> Result<String, String> {
    let mut best = 0.0f64;
    let mut how = String::new();
    if limits.compound {
        let p = predict_chain(
            cal,
            &ChainModel {
                layout: Layout::Compound,
                ..d.chain.clone()
            },
            None,
        )?;
        let pps = p.max_pps * limits.cores as f64 * limits.max_utilisation;
        if pps > best {
            best = pps;
            how = format!("{} compound replicas", limits.cores);
        }
    }
    if limits.pipeline && limits.cores >= 2 && cal.pipeline.is_some() {
        for map in core_maps(d.chain.nfs.len(), limits.cores) {
            let (stages, name) = stages_of(&map);
            let p = predict_chain(
                cal,
                &ChainModel {
                    layout: Layout::Pipeline { stages },
                    ..d.chain.clone()
                },
                None,
            )?;
            let replicas = limits.cores / p.cores.len();
            let pps = p.max_pps * replicas as f64 * limits.max_utilisation;
            if pps > best {
                best = pps;
                how = format!("pipeline {name} x {replicas}");
            }
        }
    }
    Ok(format!(
        "{}: {:.3} Mpps cannot be met on {} core(s): at most {:.3} Mpps ({how})",
        d.name,
        d.target_pps / 1e6,
        limits.cores,
        best / 1e6
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::tests::cal;

    /// The test calibration (TSC 1 GHz, 64 B): base 100, forwarder 20, nat44 60 (75 in
    /// a pipeline's stage); pipeline first 160, last 120, single 140, same-core ring 30 (cross ring 140).
    fn demand(nfs: &[&str], mpps: f64) -> Demand {
        Demand {
            name: nfs.join(" -> "),
            chain: ChainModel {
                nfs: nfs.iter().map(|s| s.to_string()).collect(),
                frames: vec![(64.0, 1.0)],
                layout: Layout::Compound,
            },
            target_pps: mpps * 1e6,
        }
    }

    fn limits(cores: usize) -> PlanLimits {
        PlanLimits {
            cores,
            compound: true,
            pipeline: true,
            max_utilisation: 1.0,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn a_chain_that_fits_one_core_gets_one_compound_core() {
        // forwarder + nat44: 180 cycles, 5.556 Mpps; 5 Mpps needs 90 % of a core.
        let p = plan(&cal(), &[demand(&["forwarder", "nat44"], 5.0)], &limits(4)).unwrap();
        assert!(p.feasible);
        assert_eq!(p.cores_used, 1);
        assert_eq!(p.chains[0].layout, "compound");
        assert_eq!(p.chains[0].replicas, 1);
        assert!(close(p.cores[0].utilisation, 0.9));
        assert!(close(p.chains[0].capacity_pps, 1e9 / 180.0));
    }

    #[test]
    fn beyond_one_core_replicas_beat_a_pipeline_that_pays_for_its_ring() {
        // 8 Mpps x 180 cycles = 1.44 cores. Two compound replicas: 0.72 each, 2 cores.
        // bi:2 would put 180 cycles on each core (the ring's 140 split): 1.44 each, 4 cores.
        let p = plan(&cal(), &[demand(&["forwarder", "nat44"], 8.0)], &limits(4)).unwrap();
        assert!(p.feasible);
        assert_eq!(p.cores_used, 2);
        assert_eq!((p.chains[0].layout.as_str(), p.chains[0].replicas), ("compound", 2));
        assert!(close(p.chains[0].capacity_pps, 2e9 / 180.0));
        assert_eq!(p.chains[0].cores_of_replicas, vec![vec![0], vec![1]]);
    }

    #[test]
    fn compound_instances_share_a_core_when_each_fits_its_share() {
        // Two forwarder chains (120 cycles, 8.333 Mpps) at 4 Mpps: 0.48 of a core each;
        // two loops on a core get half each (4.167 Mpps >= 4): one core.
        let two = [demand(&["forwarder"], 4.0), demand(&["forwarder"], 4.0)];
        let p = plan(&cal(), &two, &limits(2)).unwrap();
        assert!(p.feasible);
        assert_eq!(p.cores_used, 1);
        assert_eq!(p.cores[0].loops, 2);
        assert!(close(p.chains[0].capacity_pps, 1e9 / 120.0 / 2.0));
        // Keeping a tenth of each core in reserve, 2 x 0.48 no longer fits: two cores.
        let p = plan(
            &cal(),
            &two,
            &PlanLimits {
                max_utilisation: 0.9,
                ..limits(2)
            },
        )
        .unwrap();
        assert_eq!(p.cores_used, 2);
    }

    #[test]
    fn the_pipeline_search_finds_the_best_cut() {
        // forwarder, nat44, forwarder, forwarder at 4 Mpps, pipelines only, 2 cores; nat44
        // costs 75 in a stage, 85 first in one fed from the other core, the forwarder 20
        // and 25. 0,0,1,1 (bi:2): 255 | 120 + 25 + 20 = 165 cycles; 0,1,1,1: 90 + 70 + 20 =
        // 180 | 70 + 50 + 85 + 20 + 20 = 245; 0,0,0,1: 275 | 145; 0,1,1,0: 325 | 245;
        // 0,1,0,0: 345 | 235; pbp: 345 | 370. Only 0,1,1,1 meets 4 Mpps (250 cycles at most).
        let only_pipeline = PlanLimits {
            compound: false,
            ..limits(2)
        };
        let p = plan(
            &cal(),
            &[demand(&["forwarder", "nat44", "forwarder", "forwarder"], 4.0)],
            &only_pipeline,
        )
        .unwrap();
        assert!(p.feasible, "{p:?}");
        assert_eq!(p.chains[0].layout, "0,1,1,1");
        assert_eq!(p.chains[0].cores_of_replicas, vec![vec![0, 1]]);
        assert!(close(p.cores[0].utilisation, 0.72));
        assert!(close(p.cores[1].utilisation, 0.98));
        assert!(close(p.chains[0].capacity_pps, 1e9 / 245.0));
        assert_eq!(stages_of(&[0, 0, 1, 1]).1, "bi:2");
        assert_eq!(stages_of(&[0, 1, 0, 1]).1, "pbp:2");
        // Every cut of 4 NFs on up to 2 cores with two stages or more: 2^3 - 1 = 7 maps.
        assert_eq!(core_maps(4, 2).len(), 7);
    }

    #[test]
    fn a_target_out_of_reach_is_named_with_the_most_the_cores_give() {
        let p = plan(&cal(), &[demand(&["forwarder", "nat44"], 20.0)], &limits(2)).unwrap();
        assert!(!p.feasible);
        assert_eq!(p.reasons.len(), 1);
        assert!(
            p.reasons[0].contains("20.000 Mpps cannot be met on 2 core(s): at most 11.111 Mpps (2 compound replicas)"),
            "{:?}",
            p.reasons
        );
        // Each fits two cores alone (two replicas at 0.72), not together: four loops too
        // large to share a core.
        let both = [
            demand(&["forwarder", "nat44"], 8.0),
            demand(&["forwarder", "nat44"], 8.0),
        ];
        let p = plan(&cal(), &both, &limits(2)).unwrap();
        assert!(!p.feasible);
        assert_eq!(p.cores_used, 4);
        assert!(p.reasons[0].contains("need 4 cores"), "{:?}", p.reasons);
        // On three, three replicas each (0.48) pair up, one of each chain per core.
        let p = plan(&cal(), &both, &limits(3)).unwrap();
        assert!(p.feasible, "{p:?}");
        assert_eq!(p.cores_used, 3);
        assert!(p.cores.iter().all(|c| c.loops == 2 && close(c.utilisation, 0.96)));
        assert!(close(p.chains[0].capacity_pps, 3.0 * 1e9 / 180.0 / 2.0));
        assert!(plan(&cal(), &[demand(&["router"], 1.0)], &limits(2)).is_err());
    }
}
