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
        // Each NF after the NFs before it in its VNF: their output is its traffic.
        let mut hop_of = Vec::new();
        for (h, &n) in exp.hops().iter().enumerate() {
            hop_of.extend(std::iter::repeat_n(h, n));
        }
        for (i, (_, nf)) in exp.nfs().iter().enumerate() {
            let first_of_hop = hop_of.iter().position(|&h| h == hop_of[i]).unwrap_or(i);
            let before: Vec<sfclab_nf::NfSpec> =
                exp.nfs()[first_of_hop..i].iter().map(|(_, n)| priced_spec(n)).collect();
            let nf = priced_spec(nf);
            let key = sfclab_model::nf_key(nf.kind(), &nf.cost_settings());
            if !out
                .iter()
                .any(|w| sfclab_model::nf_key(w.nf.kind(), &w.nf.cost_settings()) == key)
            {
                out.push(NfWorkload {
                    nf,
                    flows: exp.traffic.flows,
                    destinations: exp.traffic.destinations.clone(),
                    before,
                });
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
        for w in scenario_workloads(&s) {
            let key = sfclab_model::nf_key(w.nf.kind(), &w.nf.cost_settings());
            if !out
                .iter()
                .any(|o| sfclab_model::nf_key(o.nf.kind(), &o.nf.cost_settings()) == key)
            {
                out.push(w);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_presets_nfs_and_the_licence_are_what_scenarios_are_priced_with() {
        let w = preset_workloads().unwrap();
        let keys: Vec<String> = w
            .iter()
            .map(|w| sfclab_model::nf_key(w.nf.kind(), &w.nf.cost_settings()))
            .collect();
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
