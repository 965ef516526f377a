//! The tester-and-device-under-test layout every wired run uses: two namespaces joined
//! by two veth pairs, one for each direction of the traffic.
//!
//! ```text
//!   tester                      dut
//!   t-out  ────── veth ──────►  d-in
//!   t-in   ◄───── veth ───────  d-out
//! ```

use crate::command::TopologyError;
use crate::{Interface, Namespace, Topology};

/// What a wired run is built on.
pub struct Testbed {
    pub tester: Namespace,
    pub dut: Namespace,
    pub tester_out: Interface,
    pub dut_in: Interface,
    pub dut_out: Interface,
    pub tester_in: Interface,
    /// Removes everything when dropped (kept last: fields drop in order).
    topology: Topology,
}

impl Testbed {
    pub fn build() -> Result<Testbed, TopologyError> {
        Self::build_with_queues(1)
    }

    /// The same with `queues` queues on every interface (one per replica of the device
    /// under test): a frame the tester sends on queue k reaches the DUT on queue k.
    pub fn build_with_queues(queues: u32) -> Result<Testbed, TopologyError> {
        let mut topology = Topology::new()?;
        let tester = topology.namespace("tester")?;
        let dut = topology.namespace("dut")?;
        let (tester_out, dut_in) = topology.veth_with_queues((&tester, "t-out"), (&dut, "d-in"), queues)?;
        let (dut_out, tester_in) = topology.veth_with_queues((&dut, "d-out"), (&tester, "t-in"), queues)?;
        Ok(Testbed {
            tester,
            dut,
            tester_out,
            dut_in,
            dut_out,
            tester_in,
            topology,
        })
    }

    /// `sfclab-<pid>-<n>`: the start of the testbed's namespace names.
    pub fn run_name(&self) -> &str {
        self.topology.run_name()
    }

    /// The four interfaces, in the order traffic crosses them.
    pub fn interfaces(&self) -> [&Interface; 4] {
        [&self.tester_out, &self.dut_in, &self.dut_out, &self.tester_in]
    }

    /// Makes the DUT namespace an IPv4 router for the tester's traffic, as seed 002's
    /// baseline: frames addressed to `ingress_mac` on `d-in` are forwarded by the kernel
    /// (ip_forward) out of `d-out` to the tester, every destination by a default route
    /// through a permanent neighbour (no ARP on the path); reverse-path filtering off.
    ///
    /// On veth the receiving side's work runs in the sender's context: without more,
    /// the kernel would forward on the tester's core. `core` steers it (RPS on `d-in`)
    /// to the DUT's own core, as a DUT is a machine of its own.
    pub fn linux_forwarding(&self, ingress_mac: [u8; 6], core: Option<usize>) -> Result<(), TopologyError> {
        if let Some(core) = core {
            let mask = format!("{:x}", 1u128 << core.min(127));
            let path = format!("/sys/class/net/{}/queues/rx-0/rps_cpus", self.dut_in.name());
            // sysfs shows the namespace that mounted it: write it from `ip netns exec`.
            self.dut.exec("sh", &["-c", &format!("echo {mask} > {path}")])?;
        }
        let mac = |m: [u8; 6]| m.iter().map(|b| format!("{b:02x}")).collect::<Vec<_>>().join(":");
        self.dut_in
            .ip(&["link", "set", "dev", self.dut_in.name(), "address", &mac(ingress_mac)])?;
        self.dut_in.add_address("10.255.0.1/30")?;
        self.dut_out.add_address("10.255.1.1/30")?;
        let tester_in_mac = self.tester_in.counters()?.address;
        self.dut_out.ip(&[
            "neigh",
            "replace",
            "10.255.1.2",
            "lladdr",
            &tester_in_mac,
            "dev",
            self.dut_out.name(),
            "nud",
            "permanent",
        ])?;
        self.dut_out.ip(&[
            "route",
            "replace",
            "default",
            "via",
            "10.255.1.2",
            "dev",
            self.dut_out.name(),
        ])?;
        for key in [
            "net.ipv4.conf.all.rp_filter",
            "net.ipv4.conf.default.rp_filter",
            "net.ipv4.conf.d-in.rp_filter",
        ] {
            self.dut.sysctl(key, "0")?;
        }
        // No ICMP redirects or errors of the DUT's own on the tester's links.
        self.dut.sysctl("net.ipv4.conf.all.send_redirects", "0")?;
        self.dut.sysctl("net.ipv4.ip_forward", "1")
    }
}
