//! A resolved scenario as the model prices it ([`sfclab_model::scenario::ScenarioModel`]):
//! every chain's streams with their paths through the VNF processes, each process's NFs
//! and licence, the cores they share and the NIC's limits.

use sfclab_model::nf_key;
use sfclab_model::scenario::{ProcessModel, ScenarioModel, StreamModel};

use super::Scenario;

/// A policer's cost does not depend on its rates: it is calibrated, and priced, at this
/// rate (one no traffic here reaches, in memory either: 30 Mpps of 1518 B frames is 360
/// Gbit/s), its buckets the largest it takes.
pub const POLICED_AT_BPS: u64 = 800_000_000_000;
const POLICER_BUCKET: &str = "1GiB";

/// `nf` as the model prices it: a qos NF's rates and buckets as [`POLICED_AT_BPS`] (its
/// cost does not depend on them, and calibrating it at its own rate would drop what a
/// calibration run offers); any other NF as it is.
pub fn priced_spec(nf: &sfclab_nf::NfSpec) -> sfclab_nf::NfSpec {
    if nf.kind() != "qos" {
        return nf.clone();
    }
    fn unpoliced(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m.iter_mut() {
                    match k.as_str() {
                        "cir" | "pir" => *v = serde_json::json!(POLICED_AT_BPS),
                        "cbs" | "ebs" | "pbs" => *v = serde_json::json!(POLICER_BUCKET),
                        _ => unpoliced(v),
                    }
                }
            }
            serde_json::Value::Array(a) => a.iter_mut().for_each(unpoliced),
            _ => {}
        }
    }
    let mut settings = nf.settings().clone();
    unpoliced(&mut settings);
    sfclab_nf::NfSpec::new(nf.kind(), settings).unwrap_or_else(|_| nf.clone())
}

/// The calibration key of `nf` as the model prices it ([`priced_spec`]).
pub fn priced_key(nf: &sfclab_nf::NfSpec) -> String {
    let spec = priced_spec(nf);
    nf_key(spec.kind(), &spec.cost_settings())
}

/// The calibration key of a VNF's licence policer, whatever its rate.
pub fn licence_key() -> String {
    priced_key(&licence_spec(1_000_000_000))
}

/// The licence policer at `bps` as an NF.
pub fn licence_spec(bps: u64) -> sfclab_nf::NfSpec {
    let entry = super::presets::licence("licence", bps);
    let (kind, settings) = entry
        .as_object()
        .and_then(|m| m.iter().next())
        .expect("the licence is one NF entry");
    // `name` names the NF in its chain; the spec is its settings.
    let mut settings = settings.clone();
    if let Some(m) = settings.as_object_mut() {
        m.remove("name");
    }
    sfclab_nf::NfSpec::new(kind, settings).expect("the licence policer is valid")
}

impl Scenario {
    /// The scenario as the model prices it; an error names what it cannot price yet.
    pub fn model(&self) -> Result<ScenarioModel, String> {
        if self.hosts.is_some() || self.veth {
            return Err(
                "chains over kernel links (hosts:, chaining: veth) are not priced yet: the model prices VNFs joined by memif"
                    .into(),
            );
        }
        let mut processes = Vec::new();
        let mut streams = Vec::new();
        let n = self.chains.len();
        for (i, exp) in self.instances().enumerate() {
            if !exp.chaining.dpdk_hops().is_empty() {
                return Err("hops run by dpdk-testpmd are not priced: the model prices sfclab's VNFs".into());
            }
            let label = self.instance_label(i);
            let licence_bps = match i < n {
                true => self.group_of(i).vnf_rate_cap.as_deref(),
                false => self.standby_group(i - n).and_then(|g| g.vnf_rate_cap.as_deref()),
            }
            .map(|cap| cap.parse::<sfclab_nf::classes::Rate>().map(|r| r.0 as f64))
            .transpose()
            .map_err(|e| format!("vnf_rate_cap: {e}"))?;
            let first = processes.len();
            let mut nfs = exp.nfs().iter();
            for (h, &count) in exp.hops().iter().enumerate() {
                let mut keys = Vec::new();
                let mut licensed = false;
                for (name, nf) in nfs.by_ref().take(count) {
                    // The preset's policer (`licence`, `licence1`, ...) is the licence.
                    if licence_bps.is_some() && nf.kind() == "qos" && name.starts_with("licence") {
                        licensed = true;
                    } else if let Some((reason, fix)) = nf.drops_all() {
                        return Err(format!("`{name}` drops every packet ({reason}): {fix}"));
                    }
                    keys.push(priced_key(nf));
                }
                processes.push(ProcessModel {
                    name: format!("{label} hop {}", h + 1),
                    nfs: keys,
                    licence_bps: licence_bps.filter(|_| licensed),
                });
            }
            if i >= n {
                continue;
            }
            let path: Vec<usize> = (first..processes.len()).collect();
            let frames = exp.frames();
            let offered_pps = exp.traffic.rate.pps(exp.mean_frame());
            for reverse in [false, true].into_iter().take(self.directions(i)) {
                streams.push(StreamModel {
                    chain: label.clone(),
                    reverse,
                    offered_pps,
                    frames: frames.clone(),
                    path: if reverse {
                        path.iter().rev().copied().collect()
                    } else {
                        path.clone()
                    },
                });
            }
        }
        let wait = match self.chains.first().and_then(|c| c.chaining.memif_wait()) {
            Some(sfclab_io::Wait::Interrupt { .. }) => "interrupt",
            _ => "polling",
        };
        Ok(ScenarioModel {
            streams,
            processes,
            vnf_cores: self.vnf_cores.len().max(1),
            wait: wait.into(),
            line_bps: self.line_rate,
            nic_capacity_bps: self.nic_capacity,
        })
    }

    /// Standby instance `k`'s group (from 0, group after group).
    pub(super) fn standby_group(&self, k: usize) -> Option<&super::ChainGroup> {
        self.groups
            .iter()
            .flat_map(|g| std::iter::repeat_n(g, g.standby))
            .nth(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::ScenarioFlags;
    use crate::settings::Settings;
    use std::path::Path;

    fn scenario(yaml: &str) -> Scenario {
        Scenario::from_text(
            yaml,
            Path::new("test.yaml"),
            &ScenarioFlags::default(),
            &Settings::default(),
        )
        .unwrap()
    }

    #[test]
    fn pvvp_chains_both_ways_cross_their_vnfs_in_order_and_back() {
        let s = scenario(
            "chains: 2\nshape: pvvp\nvnf: router\nstandby: 1\ntraffic: { rate: 4Mpps, size: 64 }\nvnf_rate_cap: 1Gbit\nnic_capacity: 20Gbit/s\nrun: { memif_wait: interrupt }\n",
        );
        let m = s.model().unwrap();
        // Two chains of two VNFs, and the standby chain's two.
        assert_eq!(m.processes.len(), 6);
        assert_eq!(m.processes[5].name, "s1 hop 2");
        assert_eq!(m.streams.len(), 4);
        assert_eq!(m.streams[0].path, vec![0, 1]);
        assert_eq!(m.streams[1].path, vec![1, 0]);
        assert!(m.streams[1].reverse);
        assert_eq!(m.streams[2].path, vec![2, 3]);
        // 4 Mpps over four streams.
        assert_eq!(m.streams[3].offered_pps, Some(1e6));
        assert_eq!(m.streams[0].frames, vec![(64.0, 1.0)]);
        for p in &m.processes {
            assert_eq!(p.licence_bps, Some(1e9), "{}", p.name);
            assert_eq!(p.nfs.len(), 2);
            assert!(p.nfs[0].starts_with("router "), "{:?}", p.nfs);
            assert_eq!(p.nfs[1], licence_key());
        }
        assert_eq!(m.nic_capacity_bps, Some(20e9));
        assert_eq!(m.wait, "interrupt");
    }

    #[test]
    fn a_policer_is_priced_whatever_its_rates() {
        let a = licence_spec(1_000_000_000);
        let b = licence_spec(2_500_000_000);
        assert_ne!(a.cost_settings(), b.cost_settings(), "the rates differ in the spec");
        assert_eq!(priced_key(&a), priced_key(&b));
        assert_eq!(priced_key(&a), licence_key());
        assert!(licence_key().starts_with("qos "));
        assert!(licence_key().contains(&POLICED_AT_BPS.to_string()), "{}", licence_key());
        let fwd = sfclab_nf::NfSpec::new("forwarder", serde_json::json!({})).unwrap();
        assert_eq!(priced_key(&fwd), "forwarder");
    }

    #[test]
    fn kernel_links_are_refused_saying_so() {
        let s = scenario("chains: 1\nvnf: forwarder\nrun: { chaining: veth }\n");
        let e = s.model().unwrap_err();
        assert!(e.contains("kernel links"), "{e}");
    }
}
