//! Hosts on one machine (seed 003's dual host, and more): each host a network namespace
//! whose "NIC" is one end of a veth pair, its egress shaped to the line rate by a token
//! bucket (`tc tbf`). Two hosts: the pair is the cable between them (seed 003's direct
//! cable). Three or more: each host's cable goes to a port of its own on a top-of-rack
//! switch, a Linux bridge in a namespace of its own (`tor`), every host's address static
//! in its forwarding table (no flooding, no learning during a run). Every crossing of a
//! chain between hosts is a VXLAN tunnel of its own over the underlay (its own VNI, so
//! chains sharing a cable never see each other's frames, whatever their addresses),
//! made in the host's namespace, where the tunnel's socket stays, and moved into the
//! namespace of the VNF (or tester) that uses it, as a container gets its interface.
//!
//! The token bucket counts each frame at layer 1 (preamble, gap and FCS added). By
//! default it does not charge the tunnel's own 50 bytes, so the cable carries the
//! line rate of the chains' frames as the paper's direct cable does; charged, it
//! carries what a real overlay would. The switch forwards without limit of its own
//! (non-blocking): what reaches a host is bounded by its senders' cables.

use crate::command::{self, TopologyError};
use crate::namespace::{Interface, Namespace};

/// Outer Ethernet, IPv4, UDP and VXLAN headers: what the tunnel adds to each frame.
pub const VXLAN_OVERHEAD: i64 = 14 + 20 + 8 + 8;

/// Preamble and start delimiter (8), inter-frame gap (12), FCS (4): what a frame takes
/// on the wire beyond the bytes the kernel counts.
const LAYER1_OVERHEAD: i64 = 24;

/// The UDP port of every tunnel (IANA's VXLAN port).
const VXLAN_PORT: &str = "4789";

/// The cable's MTU: the largest frame (1518 with FCS, 1514 counted) plus the tunnel.
const UNDERLAY_MTU: &str = "1600";

/// The top-of-rack bridge's name in its namespace.
const SWITCH: &str = "tor";

/// Hosts on one underlay (addresses 10.255.0.1 to .250).
pub const MAX_HOSTS: usize = 250;

/// How the cable is shaped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkShape {
    /// Bits per second at layer 1, each direction.
    pub rate_bps: f64,
    /// Whether the tunnel's 50 bytes per frame count against the rate.
    pub charge_tunnel: bool,
}

impl LinkShape {
    /// The bytes the token bucket adds to the length the kernel counts (the outer frame).
    fn overhead(&self) -> i64 {
        LAYER1_OVERHEAD - if self.charge_tunnel { 0 } else { VXLAN_OVERHEAD }
    }

    /// The bucket's depth, bytes: 1 ms at the line rate, at least 16 KiB (a NIC does
    /// not burst above its line; the bucket is refilled by timers). Each time it runs
    /// dry the kernel arms a timer, costly under a hypervisor: a sender that bursts
    /// after waiting for its core still runs it dry (a fifth of the VNF core went to
    /// re-arming with 100 us and with 1 ms here).
    fn burst(&self) -> u64 {
        ((self.rate_bps / 8.0 * 1e-3) as u64).max(16 * 1024)
    }
}

/// The hosts' underlay: each host's NIC, and the switch's port to each (three or more).
#[derive(Debug)]
pub struct HostLink {
    /// Each host's NIC, in the host's namespace.
    nics: Vec<Interface>,
    /// Each host's underlay address.
    addresses: Vec<String>,
    /// The top-of-rack switch's port to each host (none with two hosts: one cable).
    switch_ports: Vec<Interface>,
    shape: LinkShape,
    /// Tunnels made so far (each a VNI of its own, from 1).
    tunnels: u32,
}

/// What one end's egress did: the token bucket's account and the veth's own drops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkEndCounters {
    /// Frames the shaper passed onto the cable.
    pub sent: u64,
    /// Frames the shaper's queue had no room for.
    pub shaper_dropped: u64,
    /// Frames the cable's far end could not take (its input queue full).
    pub cable_dropped: u64,
}

impl LinkEndCounters {
    /// The change since `earlier`.
    pub fn since(&self, earlier: &LinkEndCounters) -> LinkEndCounters {
        LinkEndCounters {
            sent: self.sent.wrapping_sub(earlier.sent),
            shaper_dropped: self.shaper_dropped.wrapping_sub(earlier.shaper_dropped),
            cable_dropped: self.cable_dropped.wrapping_sub(earlier.cable_dropped),
        }
    }
}

impl crate::Topology {
    /// Joins `hosts` (namespaces, two or more) by cables shaped to `shape`: two by a
    /// veth pair between them, more each by a veth pair to its port of a top-of-rack
    /// bridge (namespace `tor`); host i's NIC `nic` gets the underlay address
    /// 10.255.0.(i+1), and a token bucket on its egress.
    pub fn host_link(&mut self, hosts: &[&Namespace], shape: LinkShape) -> Result<HostLink, TopologyError> {
        let refuse = |reason: String| TopologyError::Command {
            command: "join the hosts".into(),
            reason,
        };
        if !(shape.rate_bps.is_finite() && shape.rate_bps >= 1e3) {
            return Err(refuse(format!("{} bit/s is not a line rate", shape.rate_bps)));
        }
        if !(2..=MAX_HOSTS).contains(&hosts.len()) {
            return Err(refuse(format!("{} hosts: 2 to {MAX_HOSTS}", hosts.len())));
        }
        let addresses: Vec<String> = (1..=hosts.len()).map(|i| format!("10.255.0.{i}")).collect();
        let (nics, switch_ports) = if let [a, b] = hosts {
            let (ea, eb) = self.veth((a, "nic"), (b, "nic"))?;
            (vec![ea, eb], Vec::new())
        } else {
            let tor = self.namespace("tor")?;
            // No multicast snooping: its own queries would be frames no chain sent.
            command::ip(&[
                "-n",
                tor.name(),
                "link",
                "add",
                SWITCH,
                "type",
                "bridge",
                "mcast_snooping",
                "0",
            ])?;
            let mut nics = Vec::with_capacity(hosts.len());
            let mut ports = Vec::with_capacity(hosts.len());
            for (i, host) in hosts.iter().enumerate() {
                let (nic, port) = self.veth((host, "nic"), (&tor, &format!("p{}", i + 1)))?;
                port.ip(&["link", "set", "dev", port.name(), "mtu", UNDERLAY_MTU])?;
                port.ip(&["link", "set", "dev", port.name(), "master", SWITCH])?;
                nics.push(nic);
                ports.push(port);
            }
            command::ip(&["-n", tor.name(), "link", "set", "dev", SWITCH, "up"])?;
            (nics, ports)
        };
        for (nic, address) in nics.iter().zip(&addresses) {
            nic.ip(&["link", "set", "dev", nic.name(), "mtu", UNDERLAY_MTU])?;
            nic.add_address(&format!("{address}/24"))?;
            let rate = format!("{}bit", shape.rate_bps.round() as u64);
            let burst = shape.burst().to_string();
            nic.namespace().exec(
                "tc",
                &[
                    "qdisc",
                    "add",
                    "dev",
                    nic.name(),
                    "root",
                    "stab",
                    "overhead",
                    &shape.overhead().to_string(),
                    "linklayer",
                    "ethernet",
                    "tbf",
                    "rate",
                    &rate,
                    "burst",
                    &burst,
                    "latency",
                    "1ms",
                ],
            )?;
        }
        // Every other host's address is known, and the switch knows where each host is:
        // no ARP, no flooding during a run.
        let macs: Vec<String> = nics
            .iter()
            .map(|n| n.counters().map(|c| c.address))
            .collect::<Result<_, _>>()?;
        for (i, nic) in nics.iter().enumerate() {
            let others = addresses.iter().zip(&macs).enumerate().filter(|(j, _)| *j != i);
            for (_, (peer, mac)) in others {
                nic.ip(&[
                    "neigh",
                    "replace",
                    peer,
                    "lladdr",
                    mac,
                    "dev",
                    nic.name(),
                    "nud",
                    "permanent",
                ])?;
            }
        }
        for (port, mac) in switch_ports.iter().zip(&macs) {
            port.namespace().exec(
                "bridge",
                &["fdb", "replace", mac, "dev", port.name(), "master", "static"],
            )?;
        }
        Ok(HostLink {
            nics,
            addresses,
            switch_ports,
            shape,
            tunnels: 0,
        })
    }
}

impl HostLink {
    pub fn shape(&self) -> LinkShape {
        self.shape
    }

    /// How many hosts.
    pub fn hosts(&self) -> usize {
        self.nics.len()
    }

    /// Whether the hosts meet at a top-of-rack switch (three or more) rather than on one
    /// cable.
    pub fn switched(&self) -> bool {
        !self.switch_ports.is_empty()
    }

    /// A tunnel of its own over the underlay from `from` to `to`, each a host (from 0,
    /// in the order [`crate::Topology::host_link`] took them), a namespace on it and the
    /// interface's name there; the hosts differ. Frames sent on one end arrive on the
    /// other, whatever their addresses.
    pub fn tunnel(
        &mut self,
        from: (usize, &Namespace, &str),
        to: (usize, &Namespace, &str),
    ) -> Result<(Interface, Interface), TopologyError> {
        for name in [from.2, to.2] {
            crate::check_interface_name(name)?;
        }
        let hosts = self.nics.len();
        if from.0 >= hosts || to.0 >= hosts || from.0 == to.0 {
            return Err(TopologyError::Command {
                command: "tunnel between hosts".into(),
                reason: format!(
                    "hosts {} and {}: a tunnel joins two different hosts of 0 to {}",
                    from.0,
                    to.0,
                    hosts - 1
                ),
            });
        }
        self.tunnels += 1;
        let vni = self.tunnels.to_string();
        // Made under a temporary name unique in the host, renamed where it goes.
        let temporary = format!("vx{vni}");
        let mut made = Vec::with_capacity(2);
        for ((host, into, name), other) in [(from, to.0), (to, from.0)] {
            let nic = &self.nics[host];
            let (local, remote) = (&self.addresses[host], &self.addresses[other]);
            command::ip(&[
                "-n",
                nic.namespace().name(),
                "link",
                "add",
                &temporary,
                "type",
                "vxlan",
                "id",
                &vni,
                "local",
                local,
                "remote",
                remote,
                "dstport",
                VXLAN_PORT,
                "dev",
                nic.name(),
            ])?;
            command::ip(&[
                "-n",
                nic.namespace().name(),
                "link",
                "set",
                &temporary,
                "netns",
                into.name(),
            ])?;
            command::ip(&["-n", into.name(), "link", "set", &temporary, "name", name])?;
            let end = Interface::new(into.clone(), name);
            end.ip(&["link", "set", "dev", name, "mtu", "1500"])?;
            end.set_up()?;
            made.push(end);
        }
        let to_end = made.pop().expect("two ends");
        let from_end = made.pop().expect("two ends");
        Ok((from_end, to_end))
    }

    /// Has the kernel take what arrives at each host on `cores` (receive packet
    /// steering), as a NIC's interrupts land on its host's cores: the tunnels' decap and
    /// delivery are then not paid by whoever sent the frame.
    pub fn receive_on(&self, cores: &[usize]) -> Result<(), TopologyError> {
        if cores.is_empty() || cores.iter().any(|&c| c >= 128) {
            return Err(TopologyError::Command {
                command: "steer the hosts' receive".into(),
                reason: format!("cores {cores:?}: 1 to 128 cores, each below 128"),
            });
        }
        let mask = cores.iter().fold(0u128, |m, &c| m | (1 << c));
        for end in self.nics.iter().chain(&self.switch_ports) {
            // `ip netns exec` mounts the namespace's own /sys/class/net.
            let path = format!("/sys/class/net/{}/queues/rx-0/rps_cpus", end.name());
            end.namespace()
                .exec("sh", &["-c", &format!("echo {mask:x} > {path}")])?;
        }
        Ok(())
    }

    /// Each direction's account so far, named: with two hosts host 1's egress (towards
    /// host 2), then host 2's; with a switch each host's egress towards it, then the
    /// switch's towards each host (unshaped: `sent` and the drops of that cable).
    pub fn counters(&self) -> Result<Vec<(String, LinkEndCounters)>, TopologyError> {
        let shaper = |end: &Interface| -> Result<(u64, u64), TopologyError> {
            let json = end
                .namespace()
                .exec("tc", &["-s", "-j", "qdisc", "show", "dev", end.name(), "root"])?;
            let qdiscs: Vec<serde_json::Value> = serde_json::from_str(&json)
                .map_err(|e| TopologyError::Counters(end.name().to_string(), format!("reading `tc -j`: {e}")))?;
            let tbf = qdiscs
                .iter()
                .find(|q| q["kind"] == "tbf")
                .ok_or_else(|| TopologyError::Counters(end.name().to_string(), "no token bucket on it".into()))?;
            let num = |key: &str| tbf[key].as_u64().unwrap_or(0);
            Ok((num("packets"), num("drops")))
        };
        let nics: Vec<_> = self.nics.iter().map(Interface::counters).collect::<Result<_, _>>()?;
        let ports: Vec<_> = self
            .switch_ports
            .iter()
            .map(Interface::counters)
            .collect::<Result<_, _>>()?;
        // A veth counts a frame its peer could not take as its own transmit drop; the
        // peer counts one its CPU's input queue had no room for.
        let mut out = Vec::with_capacity(2 * self.nics.len());
        for (k, nic) in self.nics.iter().enumerate() {
            let (sent, shaper_dropped) = shaper(nic)?;
            let (label, far_rx_dropped) = match ports.get(k) {
                Some(port) => (format!("host {} -> top of rack", k + 1), port.rx_dropped),
                None => (format!("host {} -> host {}", k + 1, 2 - k), nics[1 - k].rx_dropped),
            };
            out.push((
                label,
                LinkEndCounters {
                    sent,
                    shaper_dropped,
                    cable_dropped: nics[k].tx_dropped + far_rx_dropped,
                },
            ));
        }
        for (k, port) in ports.iter().enumerate() {
            out.push((
                format!("top of rack -> host {}", k + 1),
                LinkEndCounters {
                    sent: port.tx_packets,
                    shaper_dropped: 0,
                    cable_dropped: port.tx_dropped + nics[k].rx_dropped,
                },
            ));
        }
        Ok(out)
    }
}
