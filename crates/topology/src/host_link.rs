//! Two hosts on one machine (seed 003's dual host): each host a network namespace whose
//! "NIC" is one end of a veth pair, the pair the cable between them, each end's egress
//! shaped to the line rate by a token bucket (`tc tbf`). Every crossing of a chain
//! between the hosts is a VXLAN tunnel of its own over that cable (its own VNI, so
//! chains sharing the cable never see each other's frames, whatever their addresses),
//! made in the host's namespace, where the tunnel's socket stays, and moved into the
//! namespace of the VNF (or tester) that uses it, as a container gets its interface.
//!
//! The token bucket counts each frame at layer 1 (preamble, gap and FCS added). By
//! default it does not charge the tunnel's own 50 bytes, so the cable carries the
//! line rate of the chains' frames as the paper's direct cable does; charged, it
//! carries what a real overlay would.

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

/// The cable between two hosts: its two ends, each in its host's namespace.
#[derive(Debug)]
pub struct HostLink {
    ends: [Interface; 2],
    /// Each end's underlay address.
    addresses: [String; 2],
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
    /// Joins hosts `a` and `b` (namespaces) by a cable shaped to `shape`: a veth pair,
    /// addresses 10.255.0.1 and .2 on it (the tunnels' underlay), a token bucket on
    /// each end's egress.
    pub fn host_link(&mut self, a: &Namespace, b: &Namespace, shape: LinkShape) -> Result<HostLink, TopologyError> {
        if !(shape.rate_bps.is_finite() && shape.rate_bps >= 1e3) {
            return Err(TopologyError::Command {
                command: "shape the hosts' link".into(),
                reason: format!("{} bit/s is not a line rate", shape.rate_bps),
            });
        }
        let (ea, eb) = self.veth((a, "nic"), (b, "nic"))?;
        let addresses = ["10.255.0.1".to_string(), "10.255.0.2".to_string()];
        for (end, address) in [&ea, &eb].into_iter().zip(&addresses) {
            end.ip(&["link", "set", "dev", end.name(), "mtu", UNDERLAY_MTU])?;
            end.add_address(&format!("{address}/30"))?;
            let rate = format!("{}bit", shape.rate_bps.round() as u64);
            let burst = shape.burst().to_string();
            end.namespace().exec(
                "tc",
                &[
                    "qdisc",
                    "add",
                    "dev",
                    end.name(),
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
        // The far end's address is known: no ARP on the cable during a run.
        for (end, (other, peer)) in [(&ea, (&eb, &addresses[1])), (&eb, (&ea, &addresses[0]))] {
            let mac = other.counters()?.address;
            end.ip(&[
                "neigh",
                "replace",
                peer,
                "lladdr",
                &mac,
                "dev",
                end.name(),
                "nud",
                "permanent",
            ])?;
        }
        Ok(HostLink {
            ends: [ea, eb],
            addresses,
            shape,
            tunnels: 0,
        })
    }
}

impl HostLink {
    pub fn shape(&self) -> LinkShape {
        self.shape
    }

    /// A tunnel of its own over the cable from `from` to `to`, each a host (0 or 1:
    /// the cable's ends in the order [`crate::Topology::host_link`] took them), a
    /// namespace on it and the interface's name there; the hosts differ. Frames sent
    /// on one end arrive on the other, whatever their addresses.
    pub fn tunnel(
        &mut self,
        from: (usize, &Namespace, &str),
        to: (usize, &Namespace, &str),
    ) -> Result<(Interface, Interface), TopologyError> {
        for name in [from.2, to.2] {
            crate::check_interface_name(name)?;
        }
        if from.0 > 1 || to.0 > 1 || from.0 == to.0 {
            return Err(TopologyError::Command {
                command: "tunnel between hosts".into(),
                reason: format!("hosts {} and {}: a tunnel joins host 0 and host 1", from.0, to.0),
            });
        }
        self.tunnels += 1;
        let vni = self.tunnels.to_string();
        // Made under a temporary name unique in the host, renamed where it goes.
        let temporary = format!("vx{vni}");
        let mut made = Vec::with_capacity(2);
        for (host, into, name) in [from, to] {
            let nic = &self.ends[host];
            let (local, remote) = (&self.addresses[host], &self.addresses[1 - host]);
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
        for end in &self.ends {
            // `ip netns exec` mounts the namespace's own /sys/class/net.
            let path = format!("/sys/class/net/{}/queues/rx-0/rps_cpus", end.name());
            end.namespace()
                .exec("sh", &["-c", &format!("echo {mask:x} > {path}")])?;
        }
        Ok(())
    }

    /// Each end's egress account so far: host a's (towards b), then host b's.
    pub fn counters(&self) -> Result<[LinkEndCounters; 2], TopologyError> {
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
        let links = [self.ends[0].counters()?, self.ends[1].counters()?];
        let mut out = [LinkEndCounters::default(); 2];
        for (k, o) in out.iter_mut().enumerate() {
            let (sent, shaper_dropped) = shaper(&self.ends[k])?;
            *o = LinkEndCounters {
                sent,
                shaper_dropped,
                // veth counts a frame its peer could not take as its own transmit drop;
                // the peer counts one its CPU's input queue had no room for.
                cable_dropped: links[k].tx_dropped + links[1 - k].rx_dropped,
            };
        }
        Ok(out)
    }
}
