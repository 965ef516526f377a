//! The tester-and-device-under-test layout every wired run uses: the tester's namespace
//! and the DUT's, joined by two veth pairs, one for each direction of the traffic; or,
//! for a chain of hops (`chaining: veth | linux`), a namespace per hop, each joined to
//! the next by a veth pair.
//!
//! ```text
//!   tester                      dut
//!   t-out  ────── veth ──────►  d-in
//!   t-in   ◄───── veth ───────  d-out
//!
//!   tester          dut1              dut2                       dutN
//!   t-out ──► d-in [hop] d-out ──► d-in [hop] d-out ──► ... ──► d-in [hop] d-out ──► t-in
//! ```

use crate::command::{self, TopologyError};
use crate::sriov::{SriovNic, Sysfs};
use crate::{Interface, MacvlanMode, Namespace, Topology};

/// The tester's `t-in` in a NIC-switched testbed: where the last hop sends.
pub const TESTER_IN_MAC: [u8; 6] = [0x02, 0x5f, 0xc1, 0xff, 0xff, 0x01];

/// The address of hop i's receiving virtual function (i > 0; hop 0's is the tester's
/// destination) in a NIC-switched testbed: where hop i-1 sends.
pub fn vf_in_mac(i: usize) -> [u8; 6] {
    [0x02, 0x5f, 0xc1, 0x01, (i >> 8) as u8, i as u8]
}

/// The address of hop i's sending virtual function in a NIC-switched testbed.
pub fn vf_out_mac(i: usize) -> [u8; 6] {
    [0x02, 0x5f, 0xc1, 0x02, (i >> 8) as u8, i as u8]
}

fn mac_text(mac: [u8; 6]) -> String {
    mac.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":")
}

/// One hop of the device under test: its namespace and the two ends it forwards between.
pub struct Hop {
    pub namespace: Namespace,
    /// `d-in`: where the hop receives (from the tester or the hop before).
    pub input: Interface,
    /// `d-out`: where it sends (to the next hop or back to the tester).
    pub output: Interface,
}

/// What a wired run is built on.
pub struct Testbed {
    pub tester: Namespace,
    pub tester_out: Interface,
    pub tester_in: Interface,
    /// The device under test, hop by hop in the order traffic crosses them (one for a
    /// single DUT).
    pub hops: Vec<Hop>,
    /// Removes everything when dropped (kept last: fields drop in order).
    topology: Topology,
}

impl Testbed {
    pub fn build() -> Result<Testbed, TopologyError> {
        Self::build_chain(1, 1)
    }

    /// `hops` namespaces in a row between the tester's two ends (the one of a single
    /// DUT is named `dut`, those of a chain `dut1`..`dutN`), every interface with
    /// `queues` queues (one per replica of the device under test: a frame the tester
    /// sends on queue k reaches the DUT on queue k).
    pub fn build_chain(hops: usize, queues: u32) -> Result<Testbed, TopologyError> {
        Self::build_hops(hops, queues, false)
    }

    /// `hops` hops that all sit in one namespace, `<run>-switch` (a software switch such
    /// as Open vSwitch joins their ends): hop i's ends are `s<i>-in` and `s<i>-out`, and
    /// hop i's `s<i>-out` is paired with hop i+1's `s<i+1>-in` in that namespace.
    pub fn build_switched(hops: usize) -> Result<Testbed, TopologyError> {
        Self::build_hops(hops, 1, true)
    }

    /// `hops` namespaces whose ends are "virtual functions" of one emulated NIC: macvlans
    /// of the NIC's port `p0` (in `<run>-nic`, the tester's `t-out` at its other end),
    /// in `mode`. Hop i receives on `d-in` (address `vf_in_mac(i)`; hop 0's is
    /// `ingress_mac`, where the tester's frames go) and sends on `d-out`
    /// (`vf_out_mac(i)`); the last hop's `d-out` is a macvlan of a second port `p1`,
    /// whose other end is the tester's `t-in` (address [`TESTER_IN_MAC`]). A frame
    /// crosses the switch after every hop: 2n I/O operations for n hops, as in seed 000.
    /// With `vepa`, `p0`'s other end is a Linux bridge in `<run>-wire` with hairpin on
    /// that port (and the tester's `t-out` on another), standing for the external
    /// switch VEPA needs.
    pub fn build_nic_switched(hops: usize, mode: MacvlanMode, ingress_mac: [u8; 6]) -> Result<Testbed, TopologyError> {
        let hops = hops.max(1);
        let mut topology = Topology::new()?;
        let tester = topology.namespace("tester")?;
        let nic = topology.namespace("nic")?;
        let tester_out = match mode {
            MacvlanMode::Bridge => topology.veth((&tester, "t-out"), (&nic, "p0"))?.0,
            MacvlanMode::Vepa => {
                let wire = topology.namespace("wire")?;
                let (tester_out, e1) = topology.veth((&tester, "t-out"), (&wire, "e1"))?;
                let (e0, _) = topology.veth((&wire, "e0"), (&nic, "p0"))?;
                e0.ip(&["link", "add", "br0", "type", "bridge", "stp_state", "0"])?;
                e0.ip(&["link", "set", "br0", "up"])?;
                for port in [&e0, &e1] {
                    port.ip(&["link", "set", port.name(), "master", "br0"])?;
                }
                // VEPA's adjacent switch sends frames back out of the port they came in.
                e0.ip(&["link", "set", "dev", e0.name(), "type", "bridge_slave", "hairpin", "on"])?;
                // Every virtual function is behind e0: known, so nothing is flooded.
                for i in 0..hops {
                    let mac = if i == 0 { ingress_mac } else { vf_in_mac(i) };
                    let m = mac_text(mac);
                    command::run(
                        "bridge",
                        &[
                            "-n",
                            wire.name(),
                            "fdb",
                            "replace",
                            &m,
                            "dev",
                            e0.name(),
                            "master",
                            "static",
                        ],
                    )?;
                }
                tester_out
            }
        };
        let (tester_in, _) = topology.veth((&tester, "t-in"), (&nic, "p1"))?;
        tester_in.ip(&[
            "link",
            "set",
            "dev",
            tester_in.name(),
            "address",
            &mac_text(TESTER_IN_MAC),
        ])?;
        let mut built = Vec::with_capacity(hops);
        for i in 0..hops {
            let ns = topology.namespace(&if hops == 1 {
                "dut".to_string()
            } else {
                format!("dut{}", i + 1)
            })?;
            let in_mac = if i == 0 { ingress_mac } else { vf_in_mac(i) };
            let input = topology.macvlan((&nic, "p0"), mode, in_mac, (&ns, "d-in"))?;
            let out_parent = if i + 1 == hops { "p1" } else { "p0" };
            let output = topology.macvlan((&nic, out_parent), mode, vf_out_mac(i), (&ns, "d-out"))?;
            built.push(Hop {
                namespace: ns,
                input,
                output,
            });
        }
        Ok(Testbed {
            tester,
            tester_out,
            tester_in,
            hops: built,
            topology,
        })
    }

    /// The same shape as [`Testbed::build_nic_switched`] on a real SR-IOV NIC: every
    /// hop's `d-in` and `d-out` are virtual functions of `nic.pf` (the last hop's `d-out`
    /// one of `nic.pf_out`) with the same addresses, and the tester's ports are the
    /// machine's `nic.tester_out` and `nic.tester_in`, cabled to the NIC, taken into the
    /// tester's namespace as `t-out` and `t-in`. The VFs are made for the run and
    /// removed after; the tester's ports go back under their names and addresses.
    pub fn build_sriov(hops: usize, nic: &SriovNic, ingress_mac: [u8; 6]) -> Result<Testbed, TopologyError> {
        let hops = hops.max(1);
        let sysfs = Sysfs::default();
        sysfs.check(nic, hops)?;
        let mut topology = Topology::new()?;
        let tester = topology.namespace("tester")?;
        let tester_out = topology.take_interface(&nic.tester_out, (&tester, "t-out"))?;
        let tester_in = topology.take_interface(&nic.tester_in, (&tester, "t-in"))?;
        tester_in.ip(&[
            "link",
            "set",
            "dev",
            tester_in.name(),
            "address",
            &mac_text(TESTER_IN_MAC),
        ])?;
        // VF k of each physical function, in the order the hops take them.
        let mut vfs: Vec<(String, Vec<String>, u32)> = Vec::new();
        for (pf, count) in nic.vfs_needed(hops) {
            let names = topology.make_vfs(&sysfs, &pf, count)?;
            vfs.push((pf, names, 0));
        }
        let mut next_vf = |pf: &str| -> (String, u32, String) {
            let (pf, names, used) = vfs
                .iter_mut()
                .find(|(p, ..)| p == pf)
                .expect("every PF's VFs were made");
            let k = *used;
            *used += 1;
            (pf.clone(), k, names[k as usize].clone())
        };
        let mut built = Vec::with_capacity(hops);
        for i in 0..hops {
            let ns = topology.namespace(&if hops == 1 {
                "dut".to_string()
            } else {
                format!("dut{}", i + 1)
            })?;
            let in_mac = if i == 0 { ingress_mac } else { vf_in_mac(i) };
            let (pf, k, vf) = next_vf(&nic.pf);
            let input = topology.take_vf((&pf, k), &vf, in_mac, (&ns, "d-in"))?;
            let (pf, k, vf) = next_vf(if i + 1 == hops { &nic.pf_out } else { &nic.pf });
            let output = topology.take_vf((&pf, k), &vf, vf_out_mac(i), (&ns, "d-out"))?;
            built.push(Hop {
                namespace: ns,
                input,
                output,
            });
        }
        Ok(Testbed {
            tester,
            tester_out,
            tester_in,
            hops: built,
            topology,
        })
    }

    fn build_hops(hops: usize, queues: u32, switched: bool) -> Result<Testbed, TopologyError> {
        let hops = hops.max(1);
        let mut topology = Topology::new()?;
        let tester = topology.namespace("tester")?;
        let mut namespaces = Vec::with_capacity(hops);
        if switched {
            namespaces.push(topology.namespace("switch")?);
        } else {
            for i in 1..=hops {
                namespaces.push(topology.namespace(&if hops == 1 {
                    "dut".to_string()
                } else {
                    format!("dut{i}")
                })?);
            }
        }
        let ns = |i: usize| &namespaces[if switched { 0 } else { i }];
        let names = |i: usize| -> (String, String) {
            if switched {
                (format!("s{}-in", i + 1), format!("s{}-out", i + 1))
            } else {
                ("d-in".to_string(), "d-out".to_string())
            }
        };
        let (tester_out, mut input) = topology.veth_with_queues((&tester, "t-out"), (ns(0), &names(0).0), queues)?;
        let mut built: Vec<Hop> = Vec::with_capacity(hops);
        for i in 0..hops {
            let out_name = names(i).1;
            let (output, next_input) = if i + 1 < hops {
                topology.veth_with_queues((ns(i), &out_name), (ns(i + 1), &names(i + 1).0), queues)?
            } else {
                topology.veth_with_queues((ns(i), &out_name), (&tester, "t-in"), queues)?
            };
            built.push(Hop {
                namespace: ns(i).clone(),
                input,
                output,
            });
            input = next_input;
        }
        // What the last hop's output is paired with: the tester's t-in.
        let tester_in = input;
        Ok(Testbed {
            tester,
            tester_out,
            tester_in,
            hops: built,
            topology,
        })
    }

    /// `sfclab-<pid>-<n>`: the start of the testbed's namespace names.
    pub fn run_name(&self) -> &str {
        self.topology.run_name()
    }

    /// Every namespace, the tester's first, then the hops' (each once).
    pub fn namespaces(&self) -> Vec<&Namespace> {
        let mut all = vec![&self.tester];
        for h in &self.hops {
            if !all.contains(&&h.namespace) {
                all.push(&h.namespace);
            }
        }
        all
    }

    /// Every interface, in the order traffic crosses them: `t-out`, each hop's `d-in`
    /// and `d-out`, `t-in`.
    pub fn interfaces(&self) -> Vec<&Interface> {
        let mut all = vec![&self.tester_out];
        for h in &self.hops {
            all.push(&h.input);
            all.push(&h.output);
        }
        all.push(&self.tester_in);
        all
    }

    /// Makes every hop an IPv4 router for the tester's traffic, as seed 002's baseline:
    /// frames addressed to `ingress_mac` on a hop's `d-in` are forwarded by its kernel
    /// (ip_forward) out of `d-out` to the next hop (whose `d-in` has the same address:
    /// the links are apart) or, from the last, to the tester; every destination by a
    /// default route through a permanent neighbour (no ARP on the path); reverse-path
    /// filtering off.
    ///
    /// On veth the receiving side's work runs in the sender's context: without more,
    /// the kernel would forward on the tester's core. `core` steers it (RPS on every
    /// `d-in`) to the DUT's own core, as a DUT is a machine of its own.
    pub fn linux_forwarding(&self, ingress_mac: [u8; 6], core: Option<usize>) -> Result<(), TopologyError> {
        let mac = |m: [u8; 6]| m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
        let tester_in_mac = self.tester_in.counters()?.address;
        for (i, hop) in self.hops.iter().enumerate() {
            let next_mac = if i + 1 < self.hops.len() {
                mac(ingress_mac)
            } else {
                tester_in_mac.clone()
            };
            hop.forward_ipv4(&mac(ingress_mac), &next_mac, core)?;
        }
        Ok(())
    }
}

impl Hop {
    /// This hop's kernel forwards what arrives for `own_mac` on `d-in` to `next_mac`
    /// out of `d-out` (see [`Testbed::linux_forwarding`]).
    fn forward_ipv4(&self, own_mac: &str, next_mac: &str, core: Option<usize>) -> Result<(), TopologyError> {
        let (ns, d_in, d_out) = (&self.namespace, &self.input, &self.output);
        if let Some(core) = core {
            let mask = format!("{:x}", 1u128 << core.min(127));
            let path = format!("/sys/class/net/{}/queues/rx-0/rps_cpus", d_in.name());
            // sysfs shows the namespace that mounted it: write it from `ip netns exec`.
            ns.exec("sh", &["-c", &format!("echo {mask} > {path}")])?;
        }
        d_in.ip(&["link", "set", "dev", d_in.name(), "address", own_mac])?;
        // Each hop is a namespace of its own: the same addresses in every one.
        d_in.add_address("10.255.0.1/30")?;
        d_out.add_address("10.255.1.1/30")?;
        d_out.ip(&[
            "neigh",
            "replace",
            "10.255.1.2",
            "lladdr",
            next_mac,
            "dev",
            d_out.name(),
            "nud",
            "permanent",
        ])?;
        d_out.ip(&["route", "replace", "default", "via", "10.255.1.2", "dev", d_out.name()])?;
        for key in [
            "net.ipv4.conf.all.rp_filter",
            "net.ipv4.conf.default.rp_filter",
            "net.ipv4.conf.d-in.rp_filter",
        ] {
            ns.sysctl(key, "0")?;
        }
        // No ICMP redirects or errors of the DUT's own on the tester's links.
        ns.sysctl("net.ipv4.conf.all.send_redirects", "0")?;
        ns.sysctl("net.ipv4.ip_forward", "1")
    }
}
