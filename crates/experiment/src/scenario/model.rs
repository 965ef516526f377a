//! A resolved scenario as the model prices it ([`sfclab_model::scenario::ScenarioModel`]):
//! every chain's streams with their paths through the VNF processes, each process's NFs
//! and licence, the cores they share and the NIC's limits.

use serde_json::{Value, json};
use sfclab_model::nf_key;
use sfclab_model::scenario::{ProcessModel, ScenarioModel, StreamModel};
use sfclab_model::scenario_plan::{GroupDemand, GroupDeployment, Licence, ScenarioDemand};

use super::Scenario;

/// A policer's cost does not depend on its rates: it is calibrated, and priced, at this
/// rate (one no traffic here reaches, in memory either: a compound forwarder and policer
/// pass 1518 B frames at over 70 Mpps, 850 Gbit/s, which 800 Gbit/s policed), its
/// buckets the largest it takes.
pub const POLICED_AT_BPS: u64 = 20_000_000_000_000;
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
                        "cir" | "pir" | "rate" => *v = serde_json::json!(POLICED_AT_BPS),
                        "cbs" | "ebs" | "pbs" | "burst" => *v = serde_json::json!(POLICER_BUCKET),
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
        if self.veth {
            return Err(
                "chains joined by veth (chaining: veth) are not priced yet: the model prices VNFs joined by memif, and by tunnels between two hosts"
                    .into(),
            );
        }
        // Each link's way across the hosts' cable, from the tester to the first VNF, ...,
        // to the tester (0: host 1 to host 2, 1: back).
        let crossings: Vec<Option<usize>> = match &self.hosts {
            None => Vec::new(),
            Some(h) if h.count != 2 => {
                return Err(format!(
                    "chains over {} hosts (each cabled to a top-of-rack switch) are not priced yet: the model prices two hosts on one cable",
                    h.count
                ));
            }
            Some(h) => h.places().windows(2).map(|w| (w[0] != w[1]).then_some(w[0])).collect(),
        };
        let cable = self.hosts.as_ref().map(|h| sfclab_model::scenario::Cable {
            bps: h.link.rate_bps,
            extra_bits: if h.link.charge_tunnel { 50.0 * 8.0 } else { 0.0 },
        });
        let mut processes = Vec::new();
        let mut streams = Vec::new();
        let n = self.chains.len();
        for (i, exp) in self.instances().enumerate() {
            if !exp.chaining.dpdk_hops().is_empty() {
                return Err("hops run by dpdk-testpmd are not priced: the model prices sfclab's VNFs".into());
            }
            let label = self.instance_label(i);
            let licence_bps = match i < n {
                true => Some(self.group_of(i)),
                false => self.standby_group(i - n),
            }
            .map(super::ChainGroup::licence_bps)
            .transpose()?
            .flatten();
            let first = processes.len();
            let mut nfs = exp.nfs().iter();
            for (h, &count) in exp.hops().iter().enumerate() {
                let mut keys = Vec::new();
                let mut licensed = false;
                for (name, nf) in nfs.by_ref().take(count) {
                    if is_licence(name, nf, licence_bps.is_some()) {
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
                    // Chains across hosts go one way.
                    crossings: crossings.clone(),
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
            ring_frames: ring_frames(),
            nic_capacity_bps: self.nic_capacity,
            cable,
        })
    }

    /// What the scenario asks for, as a plan takes it: each group's features (its
    /// chains' NFs in order, whichever VNFs they are in, the licences apart), chains,
    /// standby instances, rate and frames; the NIC's limits; `loss` the share of each
    /// stream's frames it may lose.
    pub fn demand(&self, loss: f64) -> Result<ScenarioDemand, String> {
        if self.hosts.is_some() || self.veth {
            return Err("chains over kernel links (hosts:, chaining: veth) are not planned yet: the plan deploys VNFs joined by memif".into());
        }
        let mut groups = Vec::new();
        for (g, range) in self.group_chains() {
            let exp = &self.chains[range.start];
            let streams = (range.len() * self.directions(range.start)) as f64;
            let target_pps = exp
                .traffic
                .rate
                .pps(exp.mean_frame())
                .map(|p| p * streams)
                .ok_or_else(|| {
                    format!(
                        "group `{}` is offered `max`: a plan needs the rate each group must carry (traffic.rate)",
                        g.name
                    )
                })?;
            let licence_bps = g.licence_bps()?;
            let features = feature_nfs(exp, licence_bps.is_some())
                .map(|(_, nf)| (nf.kind().to_string(), priced_key(nf)))
                .collect();
            groups.push(GroupDemand {
                // A name of its own, or what it runs (its shape is the plan's to choose).
                name: match g.named() {
                    true => g.name.clone(),
                    false => g.vnf.clone(),
                },
                features,
                chains: g.chains,
                standby: g.standby,
                bidirectional: self.directions(range.start) == 2,
                target_pps,
                frames: exp.frames(),
                licence: licence_bps.map(|bps| Licence {
                    bps,
                    key: licence_key(),
                }),
            });
        }
        Ok(ScenarioDemand {
            groups,
            line_bps: self.line_rate,
            nic_capacity_bps: self.nic_capacity,
            ring_frames: ring_frames(),
            loss,
        })
    }

    /// This scenario deployed as `way` says (a plan's row), its VNFs' memif ends
    /// waiting as `wait`, on the first `cores` of its VNF cores: a scenario file
    /// `sfclab scenario` runs. Without that many cores here, `vnf_cores` is left out
    /// (every core but the tester's).
    pub fn deployed(&self, way: &[GroupDeployment], wait: &str, cores: usize) -> Result<String, String> {
        let mut groups = Vec::new();
        for ((g, range), d) in self.group_chains().zip(way) {
            let exp = &self.chains[range.start];
            let vnf: Vec<Value> = feature_nfs(exp, g.vnf_rate_cap.is_some())
                .map(|(name, nf)| crate::hop_processes::hop_entry(&(name.clone(), nf.clone())))
                .collect::<Result<_, _>>()?;
            let t = &exp.traffic;
            let mut traffic = json!({
                "rate": g.rate.to_string(),
                "size": t.sizes.to_string(),
                "flows": t.flows,
            });
            if !t.dscp.is_empty() {
                traffic["dscp"] = json!(t.dscp.to_string());
            }
            let mut group = json!({
                "chains": d.chains,
                "vnf": vnf,
                "split": d.split,
                "bidirectional": self.directions(range.start) == 2,
                "traffic": traffic,
            });
            if g.named() {
                group["name"] = json!(g.name);
            }
            if d.standby > 0 {
                group["standby"] = json!(d.standby);
            }
            if let Some(cap) = &g.vnf_rate_cap {
                group["vnf_rate_cap"] = json!(cap);
            }
            groups.push(group);
        }
        let first = &self.chains[0];
        let mut run = json!({ "memif_wait": wait });
        if let Some(d) = first.settings.duration {
            run["duration"] = json!(format!("{}ms", d.as_millis()));
        }
        let mut file = json!({
            "name": format!("{} (planned)", self.name),
            "description": format!(
                "Planned by `sfclab plan` for {}: {}",
                self.name,
                sfclab_model::scenario_plan::describe(way)
            ),
            "groups": groups,
            "run": run,
            "repeat": self.repeat,
        });
        if cores <= self.vnf_cores.len() {
            let list: Vec<String> = self.vnf_cores[..cores].iter().map(|c| c.to_string()).collect();
            file["vnf_cores"] = json!(list.join(","));
        }
        if let Some(bps) = self.line_rate {
            file["line_rate"] = json!(format!("{bps}bit/s"));
        }
        if let Some(bps) = self.nic_capacity {
            file["nic_capacity"] = json!(format!("{bps}bit/s"));
        }
        serde_saphyr::to_string(&file).map_err(|e| e.to_string())
    }

    /// Standby instance `k`'s group (from 0, group after group).
    pub(super) fn standby_group(&self, k: usize) -> Option<&super::ChainGroup> {
        self.groups
            .iter()
            .flat_map(|g| std::iter::repeat_n(g, g.standby))
            .nth(k)
    }
}

/// Descriptors per memif ring, as the scenarios' links are made.
fn ring_frames() -> f64 {
    f64::from(sfclab_io::memif::Config::default().ring_frames())
}

/// Whether NF `name` is the licence of a VNF whose group has one (`licensed`): the
/// preset's policer, `licence`, `licence1`, ...
fn is_licence(name: &str, nf: &sfclab_nf::NfSpec, licensed: bool) -> bool {
    licensed && nf.kind() == "qos" && name.starts_with("licence")
}

/// A chain's NFs but its licence policers.
fn feature_nfs(exp: &crate::Experiment, licensed: bool) -> impl Iterator<Item = &(String, sfclab_nf::NfSpec)> {
    exp.nfs()
        .iter()
        .filter(move |(name, nf)| !is_licence(name, nf, licensed))
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
    fn the_demand_is_each_groups_features_rate_and_frames_without_its_licences() {
        let s = scenario(
            "groups:\n\
             - { name: web, chains: 2, shape: pvvp, vnf: multi-feature, vnf_rate_cap: 1Gbit, standby: 1 }\n\
             - { name: fw, chains: 1, vnf: [firewall, router], bidirectional: false, traffic: { rate: 30kpps, size: 512 } }\n\
             traffic: { rate: 40kpps, size: 64 }\nline_rate: 10Gbit/s\n",
        );
        let d = s.demand(1e-5).unwrap();
        assert_eq!(d.groups.len(), 2);
        let web = &d.groups[0];
        // Both VNFs' NFs, in order, the licences apart.
        let kinds: Vec<&str> = web.features.iter().map(|f| f.0.as_str()).collect();
        assert_eq!(
            kinds,
            ["nat44", "firewall", "qos", "dpi", "nat44", "firewall", "qos", "dpi"]
        );
        assert_eq!((web.chains, web.standby, web.bidirectional), (2, 1, true));
        assert_eq!(web.target_pps, 40e3);
        assert_eq!(
            web.licence.as_ref().map(|l| (l.bps, l.key.clone())),
            Some((1e9, licence_key()))
        );
        let fw = &d.groups[1];
        assert_eq!(fw.features.len(), 2);
        assert_eq!((fw.target_pps, fw.bidirectional), (30e3, false));
        assert_eq!(fw.frames, vec![(512.0, 1.0)]);
        assert!(fw.licence.is_none());
        assert_eq!((d.line_bps, d.loss), (Some(10e9), 1e-5));
        let max = scenario("chains: 1\nvnf: router\ntraffic: { rate: max }\n");
        assert!(max.demand(0.0).unwrap_err().contains("offered `max`"));
    }

    /// A plan's deployment written as a scenario file reads back as that deployment.
    #[test]
    fn a_deployment_written_as_a_scenario_runs_as_planned() {
        let s = scenario(
            "chains: 2\nvnf: multi-feature\nvnf_rate_cap: 2.5Gbit\nstandby: 1\n\
             traffic: { rate: 100kpps, size: imix, flows: 512, dscp: \"ef,af11,be,be\" }\n\
             nic_capacity: 20Gbit/s\nrun: { duration: 2s }\n",
        );
        let d = s.demand(0.0).unwrap();
        let way = vec![GroupDeployment {
            group: d.groups[0].name.clone(),
            vnfs: d.groups[0].features.iter().map(|f| vec![f.0.clone()]).collect(),
            split: true,
            chains: 3,
            standby: 1,
        }];
        let text = s.deployed(&way, "polling", 1).unwrap();
        let back = scenario(&text);
        let g = back.single_group().expect("one group");
        assert_eq!((g.chains, g.standby, g.vnfs_per_chain), (3, 1, 4), "{text}");
        assert_eq!(g.vnf_rate_cap.as_deref(), Some("2.5Gbit"));
        assert_eq!(g.rate, s.groups()[0].rate, "the group's rate, now over three chains");
        assert_eq!(back.nic_capacity, Some(20e9));
        assert_eq!(back.vnf_cores, s.vnf_cores[..1].to_vec());
        let exp = &back.chains()[0];
        assert_eq!(exp.traffic.flows, 512);
        assert_eq!(exp.traffic.dscp, s.chains()[0].traffic.dscp);
        assert_eq!(exp.traffic.sizes.to_string(), "imix");
        assert_eq!(exp.chaining.memif_wait(), Some(sfclab_io::Wait::Poll), "{text}");
        assert_eq!(exp.settings.duration, Some(std::time::Duration::from_secs(2)));
        // Its demand is the one planned: the same features and rate.
        let again = back.demand(0.0).unwrap();
        assert_eq!(again.groups[0].features, d.groups[0].features);
        assert!((again.groups[0].target_pps - d.groups[0].target_pps).abs() < 1e-6);
        let m = back.model().unwrap();
        assert_eq!(m.processes.len(), 3 * 4 + 4);
        assert_eq!(m.processes[0].nfs.last(), Some(&licence_key()));
        assert_eq!(m.wait, "polling");
    }

    #[test]
    fn veth_and_more_than_two_hosts_are_refused_saying_so() {
        let s = scenario("chains: 1\nvnf: forwarder\nrun: { chaining: veth }\n");
        let e = s.model().unwrap_err();
        assert!(e.contains("chaining: veth") && e.contains("not priced yet"), "{e}");
        let s = scenario(
            "chains: 1\nshape: pvvp\nvnf: router\nbidirectional: false\nhosts: { count: 3, vnfs: [2, 3], sink: 1 }\n",
        );
        let e = s.model().unwrap_err();
        assert!(e.contains("3 hosts") && e.contains("not priced yet"), "{e}");
    }

    #[test]
    fn chains_across_two_hosts_cross_the_cable_where_their_places_change_host() {
        // Seed 003's dual host: the tester on host 1, a router there and one on host 2,
        // back to host 1, over a 1 Gbit/s cable.
        let s = scenario(
            "chains: 2\nshape: pvvp\nvnf: router\nbidirectional: false\nhosts: { count: 2, vnfs: [1, 2], sink: 1, link: 1Gbit/s }\n",
        );
        let m = s.model().unwrap();
        assert_eq!(m.streams.len(), 2);
        for st in &m.streams {
            // Tester to hop 1 on host 1 (memif), hop 1 to hop 2 across (host 1 to 2),
            // hop 2 to the tester across (back).
            assert_eq!(st.crossings, vec![None, Some(0), Some(1)]);
        }
        let cable = m.cable.unwrap();
        assert_eq!((cable.bps, cable.extra_bits), (1e9, 0.0));
    }
}
