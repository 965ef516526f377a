//! Planning scenarios, seed 001's operator question: chains of given features, each group
//! with the rate it must carry, on a machine of some cores and NIC limits. Which
//! deployment meets every demand on the fewest cores, and then with the fewest VNF
//! processes (VMs, licences)? The choices are the features in one VNF (multi-feature) or
//! one VNF each (single-feature, chained), how many chains share a group's demand, how
//! many cores the VNFs share (VNFs per core: the oversubscription) and how the VNFs' memif
//! ends wait. The plan also gives the trade-off of every deployment it tried: cost in
//! cores and processes against what it carries.
//!
//! Each deployment is priced by the scenario model ([`crate::scenario`]) with the traffic
//! coming from outside: the tester here is the measurement's, not the deployment's, so
//! its core is left out of the price (its load is reported beside the plan).

use serde::Serialize;

use crate::calibration::Calibration;
use crate::chain::mean_over;
use crate::scenario::{Bottleneck, NOT_IP_BYTES, PricedScenario, ProcessModel, ScenarioModel, StreamModel};

/// A VNF's licence: a policer of IP bytes after its features.
#[derive(Debug, Clone, PartialEq)]
pub struct Licence {
    /// Bits per second of IP bytes, both directions together.
    pub bps: f64,
    /// Its policer's calibration key.
    pub key: String,
}

/// Like chains that must carry a rate together.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupDemand {
    pub name: String,
    /// The features frames cross, in order: (label, calibration key).
    pub features: Vec<(String, String)>,
    /// Chains asked for (tenants); with scale-out, the fewest the plan runs.
    pub chains: usize,
    /// Idle instances of the chain that must run too (seed 001's standby VMs).
    pub standby: usize,
    pub bidirectional: bool,
    /// Packets per second the group's chains and directions carry together.
    pub target_pps: f64,
    /// Frame sizes and their shares.
    pub frames: Vec<(f64, f64)>,
    pub licence: Option<Licence>,
}

/// What must be carried, and the NIC's limits it crosses.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioDemand {
    pub groups: Vec<GroupDemand>,
    /// The NIC's line per direction, bits per second at layer 1.
    pub line_bps: Option<f64>,
    /// The NIC's capacity every VNF send draws on, bits per second at layer 1.
    pub nic_capacity_bps: Option<f64>,
    /// Descriptors per memif ring.
    pub ring_frames: f64,
    /// The share of each stream's frames it may lose (1e-5 for seed 001's 0.001 %).
    pub loss: f64,
}

/// What a plan may use.
#[derive(Debug, Clone, PartialEq)]
pub struct DeploymentLimits {
    /// Cores the VNF processes may share.
    pub max_cores: usize,
    /// The wait modes of the VNFs' memif ends tried (each must be calibrated).
    pub waits: Vec<String>,
    /// Whether a group's demand may be spread over more chains than it asks for.
    pub scale_out: bool,
    /// Chains per group at most, with scale-out.
    pub max_chains: usize,
}

/// How one group runs.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct GroupDeployment {
    pub group: String,
    /// Each VNF's features, in chain order: all in one (multi-feature), or one each.
    pub vnfs: Vec<Vec<String>>,
    /// One VNF per feature (single-feature VNFs, chained).
    pub split: bool,
    pub chains: usize,
    pub standby: usize,
}

/// One deployment tried, priced at the demand.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct DeploymentRow {
    pub groups: Vec<GroupDeployment>,
    /// How the VNFs' memif ends wait.
    pub wait: String,
    /// Cores the VNF processes share.
    pub cores: usize,
    /// VNF processes, standby ones included.
    pub processes: usize,
    /// Processes per core (above 1: oversubscribed).
    pub vnfs_per_core: f64,
    /// Every stream carries its share of the demand, losing at most the loss allowed.
    pub meets: bool,
    /// The smallest share of its demand a stream carries (1: all of it).
    pub worst_delivered: f64,
    /// The factor of the demand the deployment carries without loss (1.5: 50 % to spare).
    pub headroom: f64,
    /// What it carries there in all, packets per second.
    pub capacity_pps: f64,
    /// What limits it there.
    pub bottleneck: Option<Bottleneck>,
    /// The share of the VNF cores busy at the demand.
    pub core_utilisation: f64,
}

/// The plan: the deployment chosen, or why none is, and every deployment tried.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct ScenarioPlan {
    pub feasible: bool,
    /// The row chosen: the fewest cores, then the fewest processes, then the most headroom.
    pub chosen: Option<usize>,
    /// Every deployment tried, cheapest first; per way to deploy, its cores up to the
    /// first that meets the demand (more only cost more) or that adds nothing.
    pub rows: Vec<DeploymentRow>,
    /// Why no deployment meets the demand, when none does.
    pub reasons: Vec<String>,
    /// The demand in all, packets per second.
    pub demand_pps: f64,
}

impl ScenarioPlan {
    /// The deployment chosen, if any meets the demand.
    pub fn chosen_row(&self) -> Option<&DeploymentRow> {
        self.chosen.map(|i| &self.rows[i])
    }
}

/// Ways to deploy tried at most (groups' options multiplied); beyond, each group alone.
const MAX_WAYS: usize = 512;

/// One way to deploy every group (before cores and wait).
type Way = Vec<GroupDeployment>;

/// The deployment meeting `demand` on the fewest cores, as `cal` prices it.
pub fn plan_scenario(
    cal: &Calibration,
    demand: &ScenarioDemand,
    limits: &DeploymentLimits,
) -> Result<ScenarioPlan, String> {
    if demand.groups.is_empty() {
        return Err("the demand has no chain".into());
    }
    if limits.max_cores == 0 {
        return Err("no core to plan on".into());
    }
    if limits.waits.is_empty() {
        return Err("no wait mode to plan with".into());
    }
    if let Some(g) = demand
        .groups
        .iter()
        .find(|g| g.target_pps.is_nan() || g.target_pps <= 0.0)
    {
        return Err(format!(
            "group `{}` asks for no rate: a plan needs each group's target",
            g.name
        ));
    }
    if let Some(g) = demand.groups.iter().find(|g| g.features.is_empty()) {
        return Err(format!("group `{}` has no feature", g.name));
    }
    let memif = cal.memif.as_ref().ok_or(
        "the calibration has no memif terms (scenarios' VNF processes): calibrate with `sfclab model calibrate --memif` (needs root)",
    )?;
    for w in &limits.waits {
        memif.wait(w)?;
    }
    let options: Vec<Vec<GroupDeployment>> = demand
        .groups
        .iter()
        .map(|g| group_options(cal, demand, g, limits))
        .collect::<Result<_, _>>()?;
    let ways = combine(&options);
    let mut rows = Vec::new();
    for way in &ways {
        for wait in &limits.waits {
            let mut last_capacity = 0.0;
            for cores in 1..=limits.max_cores {
                let row = price(cal, demand, way, wait, cores)?;
                let meets = row.meets;
                let grew = row.capacity_pps > last_capacity * 1.001;
                last_capacity = row.capacity_pps;
                if !grew && cores > 1 {
                    break;
                }
                rows.push(row);
                if meets {
                    break;
                }
            }
        }
    }
    rows.sort_by(|a, b| {
        (a.cores, a.processes)
            .cmp(&(b.cores, b.processes))
            .then(b.meets.cmp(&a.meets))
            .then(b.headroom.total_cmp(&a.headroom))
    });
    let chosen = rows.iter().position(|r| r.meets);
    let reasons = match chosen {
        Some(_) => Vec::new(),
        None => why_not(demand, limits, &rows),
    };
    Ok(ScenarioPlan {
        feasible: chosen.is_some(),
        chosen,
        rows,
        reasons,
        demand_pps: demand.groups.iter().map(|g| g.target_pps).sum(),
    })
}

/// A group's ways to run: its features together or split, over each chain count worth
/// trying.
fn group_options(
    cal: &Calibration,
    demand: &ScenarioDemand,
    g: &GroupDemand,
    limits: &DeploymentLimits,
) -> Result<Vec<GroupDeployment>, String> {
    let labels: Vec<String> = g.features.iter().map(|f| f.0.clone()).collect();
    let splits: &[bool] = if g.features.len() > 1 { &[false, true] } else { &[false] };
    let mut out = Vec::new();
    for &split in splits {
        let vnfs = match split {
            false => vec![labels.clone()],
            true => labels.iter().map(|l| vec![l.clone()]).collect(),
        };
        let at = |chains: usize| GroupDeployment {
            group: g.name.clone(),
            vnfs: vnfs.clone(),
            split,
            chains,
            standby: g.standby,
        };
        if !limits.scale_out {
            out.push(at(g.chains));
            continue;
        }
        // The fewest chains that could carry it: under every licence, and no VNF over
        // a core of its own (its cost alone, on the first wait tried).
        let ip_bps = g.target_pps * mean_over(&g.frames, |b| Ok((b - NOT_IP_BYTES) * 8.0))?;
        let by_licence = g.licence.as_ref().map_or(1.0, |l| (ip_bps / l.bps).ceil());
        let alone = GroupDemand {
            chains: 1,
            standby: 0,
            ..g.clone()
        };
        let one = ScenarioDemand {
            groups: vec![alone],
            ..demand.clone()
        };
        let model = deployment_model(&one, &[at(1)], &limits.waits[0], 1);
        let flow = PricedScenario::new(cal, &model)?.tester_outside().flow(0.0);
        let busiest = flow.processes.iter().map(|p| p.cycles_per_frame).fold(0.0, f64::max);
        let by_core = (g.target_pps * busiest / cal.machine.tsc_hz).ceil();
        let first = g.chains.max(by_licence as usize).max(by_core as usize).max(1);
        if first > limits.max_chains {
            // Still tried, at the most chains allowed: the plan then says what is short.
            out.push(at(limits.max_chains));
            continue;
        }
        for chains in first..=(first + 2).min(limits.max_chains) {
            out.push(at(chains));
        }
    }
    Ok(out)
}

/// Every combination of the groups' options; past [`MAX_WAYS`], each group's options
/// beside the others' first.
fn combine(options: &[Vec<GroupDeployment>]) -> Vec<Way> {
    let count = options
        .iter()
        .map(|o| o.len())
        .try_fold(1usize, |n, k| n.checked_mul(k));
    if count.is_some_and(|n| n <= MAX_WAYS) {
        let mut ways: Vec<Way> = vec![Vec::new()];
        for opts in options {
            ways = ways
                .into_iter()
                .flat_map(|w| {
                    opts.iter().map(move |o| {
                        let mut w = w.clone();
                        w.push(o.clone());
                        w
                    })
                })
                .collect();
        }
        return ways;
    }
    let first: Way = options.iter().map(|o| o[0].clone()).collect();
    let mut ways = vec![first.clone()];
    for (g, opts) in options.iter().enumerate() {
        for o in opts.iter().skip(1) {
            let mut w = first.clone();
            w[g] = o.clone();
            ways.push(w);
        }
    }
    ways
}

/// The scenario model of one deployment: chains numbered group after group (`c1`...),
/// then the standby instances (`s1`...), each VNF a process with its features and licence.
pub fn deployment_model(demand: &ScenarioDemand, way: &[GroupDeployment], wait: &str, cores: usize) -> ScenarioModel {
    let mut processes = Vec::new();
    let mut streams = Vec::new();
    let mut chain_no = 0;
    let mut standby_no = 0;
    for (g, d) in demand.groups.iter().zip(way) {
        // Each VNF's NF keys: every feature in one, or one each; then its licence.
        let keys = g.features.iter().map(|f| f.1.clone());
        let vnf_keys: Vec<Vec<String>> = match d.split {
            true => keys.map(|k| vec![k]).collect(),
            false => vec![keys.collect()],
        };
        let vnf_keys: Vec<Vec<String>> = vnf_keys
            .into_iter()
            .map(|vnf| vnf.into_iter().chain(g.licence.iter().map(|l| l.key.clone())).collect())
            .collect();
        let directions = if g.bidirectional { 2 } else { 1 };
        let per_stream = g.target_pps / (d.chains * directions) as f64;
        for instance in 0..d.chains + d.standby {
            let standby = instance >= d.chains;
            let label = if standby {
                standby_no += 1;
                format!("s{standby_no}")
            } else {
                chain_no += 1;
                format!("c{chain_no}")
            };
            let first = processes.len();
            for (h, keys) in vnf_keys.iter().enumerate() {
                processes.push(ProcessModel {
                    name: format!("{label} hop {}", h + 1),
                    nfs: keys.clone(),
                    licence_bps: g.licence.as_ref().map(|l| l.bps),
                });
            }
            if standby {
                continue;
            }
            let path: Vec<usize> = (first..processes.len()).collect();
            for reverse in [false, true].into_iter().take(directions) {
                streams.push(StreamModel {
                    chain: label.clone(),
                    reverse,
                    offered_pps: Some(per_stream),
                    frames: g.frames.clone(),
                    path: if reverse {
                        path.iter().rev().copied().collect()
                    } else {
                        path.clone()
                    },
                    crossings: Vec::new(),
                });
            }
        }
    }
    ScenarioModel {
        streams,
        processes,
        vnf_cores: cores,
        wait: wait.into(),
        line_bps: demand.line_bps,
        ring_frames: demand.ring_frames,
        nic_capacity_bps: demand.nic_capacity_bps,
        cable: None,
    }
}

/// One deployment on `cores` priced at the demand.
fn price(
    cal: &Calibration,
    demand: &ScenarioDemand,
    way: &[GroupDeployment],
    wait: &str,
    cores: usize,
) -> Result<DeploymentRow, String> {
    let model = deployment_model(demand, way, wait, cores);
    let priced = PricedScenario::new(cal, &model)?.tester_outside();
    let flow = priced.flow(1.0);
    let worst_delivered = flow
        .streams
        .iter()
        .map(|s| s.received_pps / s.offered_pps.unwrap_or(s.received_pps).max(f64::MIN_POSITIVE))
        .fold(1.0, f64::min);
    let capacity = priced.first_limit();
    let meets = worst_delivered >= 1.0 - demand.loss - 1e-9;
    // A process whose frames want more than a whole core is held by itself, not by the
    // cores in all: more cores do not help it, splitting its work does.
    let busy: f64 = flow.processes.iter().map(|p| p.core_share).sum();
    let over_a_core = flow
        .processes
        .iter()
        .find(|p| p.arriving_pps * p.cycles_per_frame > cal.machine.tsc_hz * 1.001);
    let bottleneck = match (&capacity.bottleneck, over_a_core, meets) {
        (Some(Bottleneck::VnfCores), Some(p), false) => Some(Bottleneck::VnfCore {
            process: p.name.clone(),
        }),
        _ => capacity.bottleneck,
    };
    Ok(DeploymentRow {
        groups: way.to_vec(),
        wait: wait.into(),
        cores,
        processes: model.processes.len(),
        vnfs_per_core: model.processes.len() as f64 / cores as f64,
        meets,
        worst_delivered,
        headroom: capacity.scale,
        capacity_pps: capacity.aggregate_pps,
        bottleneck,
        core_utilisation: busy / cores as f64,
    })
}

/// Why no row meets the demand: the best one and what holds it, with what would lift it.
fn why_not(demand: &ScenarioDemand, limits: &DeploymentLimits, rows: &[DeploymentRow]) -> Vec<String> {
    let Some(best) = rows
        .iter()
        .max_by(|a, b| a.worst_delivered.total_cmp(&b.worst_delivered))
    else {
        return vec!["no deployment could be priced".into()];
    };
    let mut reasons = vec![format!(
        "the best deployment tried ({}, {} core(s), {}) carries {:.1} % of the demand of its worst stream (it may lose {} %)",
        describe(&best.groups),
        best.cores,
        best.wait,
        best.worst_delivered * 100.0,
        demand.loss * 100.0
    )];
    let fix = match &best.bottleneck {
        Some(Bottleneck::Line { reverse }) => format!(
            "it is held by the NIC's line ({} direction): the demand exceeds it whatever the deployment",
            if *reverse { "reverse" } else { "forward" }
        ),
        Some(Bottleneck::NicCapacity) => {
            "it is held by the NIC's capacity, which every VNF send draws on: fewer VNFs per chain (multi-feature) draw less, and no deployment draws less than one send per frame".into()
        }
        Some(Bottleneck::Licence { process }) => match limits.scale_out {
            true => format!(
                "it is held by the licence of {process}: more chains than --max-chains {} would share the demand among more licences",
                limits.max_chains
            ),
            false => format!(
                "it is held by the licence of {process}: more chains share the demand among more licences (--scale-out)"
            ),
        },
        Some(Bottleneck::VnfCores) => format!(
            "it is held by the VNF cores: more than {} core(s) (--cores)",
            limits.max_cores
        ),
        Some(Bottleneck::VnfCore { process }) => format!(
            "it is held by {process}, which needs more than a core of its own: its features split over VNFs, or more chains (--scale-out), share the work, on more than {} core(s) (--cores) where they do not fit",
            limits.max_cores
        ),
        // A plan deploys on one host.
        Some(Bottleneck::Tester | Bottleneck::Cable { .. }) | None => "nothing the model names holds it".into(),
    };
    reasons.push(fix);
    reasons
}

/// `3 x multi-feature (nat44+firewall) + 1 standby` per group, joined by `; `.
pub fn describe(groups: &[GroupDeployment]) -> String {
    groups
        .iter()
        .map(|g| {
            let vnfs: Vec<String> = g.vnfs.iter().map(|v| v.join("+")).collect();
            let how = match (g.split, vnfs.len()) {
                (_, 1) => "one VNF".to_string(),
                (true, n) => format!("{n} VNFs"),
                (false, n) => format!("{n} VNFs"),
            };
            let standby = match g.standby {
                0 => String::new(),
                n => format!(" + {n} standby"),
            };
            format!(
                "{}: {} chain(s) of {how} ({}){standby}",
                g.group,
                g.chains,
                vnfs.join(" -> ")
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calibration::{Curve, NfCalibration};

    /// The scenario model's test calibration (a hop 200 cycles a frame in interrupt
    /// mode, 100 more at 4 per core) with NFs `light` 100, `heavy` 1800, the licence 50.
    fn cal() -> Calibration {
        let mut c = crate::scenario::tests::cal();
        let sizes = c.sizes.clone();
        for (key, cycles) in [("light", 100.0), ("heavy", 1800.0), ("licence", 50.0)] {
            let flat = Curve::flat(&sizes, cycles);
            c.nfs.push(NfCalibration {
                key: key.into(),
                kind: key.into(),
                cycles: flat.clone(),
                in_stage: Some(flat.clone()),
                across: Some(flat),
                in_vnf: None,
            });
        }
        c
    }

    fn group(features: &[&str], chains: usize, target_pps: f64) -> GroupDemand {
        GroupDemand {
            name: "g".into(),
            features: features.iter().map(|f| (f.to_string(), f.to_string())).collect(),
            chains,
            standby: 0,
            bidirectional: false,
            target_pps,
            frames: vec![(64.0, 1.0)],
            licence: None,
        }
    }

    fn demand(groups: Vec<GroupDemand>) -> ScenarioDemand {
        ScenarioDemand {
            groups,
            line_bps: None,
            nic_capacity_bps: None,
            ring_frames: 1024.0,
            loss: 0.0,
        }
    }

    fn limits(cores: usize) -> DeploymentLimits {
        DeploymentLimits {
            max_cores: cores,
            waits: vec!["interrupt".into()],
            scale_out: false,
            max_chains: 16,
        }
    }

    #[test]
    fn the_fewest_cores_that_carry_the_demand_are_chosen() {
        // Four chains of light+heavy: 2100 a frame in one VNF, 2300 at 4 per core.
        // 1 Mpps in all: 2.1e9 cycles a second (1.05 cores) alone, more shared: 2 cores.
        let cal = cal();
        let d = demand(vec![group(&["light", "heavy"], 4, 1e6)]);
        let p = plan_scenario(&cal, &d, &limits(4)).unwrap();
        let chosen = p.chosen_row().unwrap();
        assert!(p.feasible);
        assert_eq!(chosen.cores, 2, "{p:#?}");
        assert!(!chosen.groups[0].split, "one VNF per chain is cheaper: {chosen:#?}");
        assert_eq!(chosen.processes, 4);
        assert!(chosen.headroom >= 1.0);
        // On one core it does not: the row is there, saying so, and what limits it.
        let one = p.rows.iter().find(|r| r.cores == 1 && !r.groups[0].split).unwrap();
        assert!(!one.meets);
        assert!(one.worst_delivered < 1.0);
        assert_eq!(one.bottleneck, Some(Bottleneck::VnfCores));
    }

    #[test]
    fn a_demand_beyond_every_deployment_says_what_holds_it() {
        let cal = cal();
        // 3 Mpps over four VNFs of 2133 a frame: each 0.8 of a core, 3.2 cores in all.
        let d = demand(vec![group(&["light", "heavy"], 4, 3e6)]);
        let p = plan_scenario(&cal, &d, &limits(2)).unwrap();
        assert!(!p.feasible);
        assert!(p.chosen.is_none());
        assert!(p.reasons[1].contains("VNF cores"), "{:?}", p.reasons);
        assert!(p.reasons[1].contains("more than 2 core(s)"), "{:?}", p.reasons);
    }

    #[test]
    fn a_heavy_feature_over_a_core_is_split_from_the_others_or_scaled_out() {
        // One chain of light+heavy+heavy2 at 0.95 Mpps: 3900 a frame in one VNF, 3.7
        // cores' worth, which one process cannot have. Split, each heavy VNF needs 0.95
        // of a core: three cores (on two, the sharing tips it over).
        let mut cal = cal();
        let heavy = cal.nfs.iter().find(|n| n.key == "heavy").unwrap().clone();
        cal.nfs.push(NfCalibration {
            key: "heavy2".into(),
            ..heavy
        });
        let d = demand(vec![group(&["light", "heavy", "heavy2"], 1, 0.95e6)]);
        let p = plan_scenario(&cal, &d, &limits(4)).unwrap();
        let chosen = p.chosen_row().unwrap();
        assert!(chosen.groups[0].split, "{chosen:#?}");
        assert_eq!(chosen.groups[0].vnfs.len(), 3);
        assert_eq!(chosen.cores, 3, "{chosen:#?}");
        let together: Vec<&DeploymentRow> = p.rows.iter().filter(|r| !r.groups[0].split).collect();
        assert_eq!(together.len(), 1, "more cores add nothing: {together:#?}");
        assert!(!together[0].meets);
        assert_eq!(
            together[0].bottleneck,
            Some(Bottleneck::VnfCore {
                process: "c1 hop 1".into()
            })
        );
        // Scaled out instead: two chains of one VNF each, 1.85 cores' worth, on two.
        let mut l = limits(4);
        l.scale_out = true;
        let p = plan_scenario(&cal, &d, &l).unwrap();
        let chosen = p.chosen_row().unwrap();
        assert_eq!((chosen.cores, chosen.groups[0].chains), (2, 2), "{chosen:#?}");
        assert!(!chosen.groups[0].split);
    }

    #[test]
    fn a_licence_is_met_by_more_chains_only_when_scaling_out_is_allowed() {
        // 1 Mpps of 64 B is 368 Mbit/s of IP bytes; each VNF licensed for 100 Mbit/s.
        let cal = cal();
        let mut g = group(&["light"], 1, 1e6);
        g.licence = Some(Licence {
            bps: 100e6,
            key: "licence".into(),
        });
        let d = demand(vec![g]);
        let p = plan_scenario(&cal, &d, &limits(2)).unwrap();
        assert!(!p.feasible);
        assert!(p.reasons[1].contains("licence of c1 hop 1"), "{:?}", p.reasons);
        assert!(p.reasons[1].contains("--scale-out"), "{:?}", p.reasons);
        let mut l = limits(2);
        l.scale_out = true;
        let p = plan_scenario(&cal, &d, &l).unwrap();
        let chosen = p.chosen_row().unwrap();
        assert_eq!(chosen.groups[0].chains, 4, "{p:#?}");
        assert_eq!(chosen.cores, 1);
    }

    #[test]
    fn the_line_is_a_limit_no_deployment_lifts() {
        let cal = cal();
        let mut d = demand(vec![group(&["light"], 2, 1e6)]);
        // 1 Mpps of 64 B frames is 672 Mbit/s at layer 1.
        d.line_bps = Some(500e6);
        let p = plan_scenario(&cal, &d, &limits(4)).unwrap();
        assert!(!p.feasible);
        assert!(p.reasons[1].contains("NIC's line"), "{:?}", p.reasons);
        // Not one row per core: more cores add nothing once the line holds it.
        assert!(p.rows.iter().all(|r| r.cores == 1), "{:#?}", p.rows);
    }

    #[test]
    fn standby_instances_run_too_and_count_as_processes() {
        let cal = cal();
        let mut g = group(&["light"], 2, 1e5);
        g.standby = 1;
        let d = demand(vec![g]);
        let p = plan_scenario(&cal, &d, &limits(2)).unwrap();
        let chosen = p.chosen_row().unwrap();
        assert_eq!(chosen.processes, 3);
        let m = deployment_model(&d, &chosen.groups, "interrupt", 1);
        assert_eq!(m.processes[2].name, "s1 hop 1");
        assert_eq!(m.streams.len(), 2);
    }

    #[test]
    fn groups_are_planned_together_on_shared_cores() {
        let cal = cal();
        let mut a = group(&["light"], 2, 2e6);
        a.name = "a".into();
        let mut b = group(&["light", "heavy"], 1, 5e5);
        b.name = "b".into();
        b.bidirectional = true;
        let d = demand(vec![a, b]);
        let p = plan_scenario(&cal, &d, &limits(4)).unwrap();
        let chosen = p.chosen_row().unwrap();
        // a: 2e6 * 300 = 0.6e9; b: 5e5 * 2100 = 1.05e9; at 3 per core 67 more a frame:
        // 1.81e9 of 2e9, and b's one process under a core: one core.
        assert_eq!(chosen.cores, 1, "{chosen:#?}");
        let m = deployment_model(&d, &chosen.groups, "interrupt", 1);
        assert_eq!(m.streams.len(), 4, "two one way, one both ways");
        assert_eq!(m.streams[2].offered_pps, Some(2.5e5));
        assert_eq!(
            describe(&chosen.groups),
            "a: 2 chain(s) of one VNF (light); b: 1 chain(s) of one VNF (light+heavy)"
        );
    }
}
