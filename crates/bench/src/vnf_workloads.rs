//! The NFs scenarios are priced with, as `model calibrate` measures them: every VNF's NFs
//! with its chain's traffic, each after the NFs before it in its VNF (their output is its
//! traffic), a policer at a rate nothing reaches.

use std::path::Path;

use sfclab_experiment::Settings;
use sfclab_experiment::scenario::{Scenario, ScenarioFlags, priced_spec};

use crate::calibrate::NfWorkload;

/// The NFs of every VNF of `scenario` with their chains' traffic, each as the model
/// prices it (a policer at a rate nothing reaches), after the NFs before it in its VNF;
/// each once.
pub fn scenario_workloads(scenario: &Scenario) -> Vec<NfWorkload> {
    let mut out: Vec<NfWorkload> = Vec::new();
    for exp in scenario.instances() {
        // Each NF after the NFs before it in its VNF (a hop): their output is its traffic.
        let mut nfs = exp.nfs().iter();
        for &count in exp.hops() {
            let hop: Vec<sfclab_nf::NfSpec> = nfs.by_ref().take(count).map(|(_, n)| priced_spec(n)).collect();
            for (j, nf) in hop.iter().enumerate() {
                let workload = NfWorkload {
                    nf: nf.clone(),
                    flows: exp.traffic.flows,
                    destinations: exp.traffic.destinations.clone(),
                    before: hop[..j].to_vec(),
                };
                crate::calibrate::add_new(&mut out, [workload]);
            }
        }
    }
    out
}

/// The NFs of the VNF presets (`forwarder`, `router`, `multi-feature`) and a licence, as
/// scenarios run them: what `model calibrate --memif` prices scenarios with unless told.
pub fn preset_workloads() -> Result<Vec<NfWorkload>, String> {
    let mut out: Vec<NfWorkload> = Vec::new();
    for vnf in sfclab_experiment::scenario::VNF_PRESETS {
        let yaml = format!("chains: 1\nvnf: {vnf}\nvnf_rate_cap: 1Gbit\n");
        let s = Scenario::from_text(&yaml, Path::new(vnf), &ScenarioFlags::default(), &Settings::default())
            .map_err(|e| e.to_string())?;
        crate::calibrate::add_new(&mut out, scenario_workloads(&s));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_presets_nfs_and_the_licence_are_what_scenarios_are_priced_with() {
        let w = preset_workloads().unwrap();
        let keys: Vec<String> = w.iter().map(NfWorkload::key).collect();
        assert!(keys.contains(&sfclab_experiment::scenario::licence_key()), "{keys:?}");
        assert!(keys.contains(&"forwarder".to_string()), "{keys:?}");
        for kind in ["router", "nat44", "firewall", "qos", "dpi"] {
            assert!(keys.iter().any(|k| k.starts_with(kind)), "{kind} in {keys:?}");
        }
        // A preset scenario's model names only keys the workloads calibrate.
        let s = Scenario::from_text(
            "chains: 2\nshape: pvvp\nvnf: multi-feature\nvnf_rate_cap: 2.5Gbit\n",
            Path::new("t"),
            &ScenarioFlags::default(),
            &Settings::default(),
        )
        .unwrap();
        for p in s.model().unwrap().processes {
            for k in p.nfs {
                assert!(keys.contains(&k), "{k} not in {keys:?}");
            }
        }
    }
}
