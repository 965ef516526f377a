//! Capacities of the resources a chain uses, and the maximum throughput.

use serde::Serialize;

/// How the chain's NFs are joined (seed 000 Fig. 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Chaining {
    /// Software links: a packet is received once, passes every NF and the n - 1 links
    /// between them in software, and is sent once.
    SoftwareLinked,
    /// Through the NIC's switch: every NF receives and sends the packet itself, and the
    /// NIC switches it n + 1 times (in, between NFs, out).
    NicSwitched,
}

/// What one packet costs the CPU, TSC cycles, as a calibration measured them.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct CpuCosts {
    /// Receiving a packet from the port (`C_CPU,RX`).
    pub rx_cycles: f64,
    /// Sending it (`C_CPU,TX`).
    pub tx_cycles: f64,
    /// Each NF of the chain, in order (`C_SF,i`).
    pub nf_cycles: Vec<f64>,
    /// One software link between two NFs (`C_SW`): a function call in a compound
    /// chain, a ring, a veth hop.
    pub link_cycles: f64,
}

/// The machine's hardware, as a profile describes it (a NIC preset or this host).
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HardwareProfile {
    /// `f_CPU`: cycles per second of one core (in a profile for `model predict`, 0 means
    /// the calibration's clock).
    pub cpu_hz: f64,
    /// `lr_NIC`: the line rate, bit/s (`None`: no NIC between the chain and its traffic).
    pub line_rate_bps: Option<f64>,
    /// Per-frame overhead on the line, bits (preamble, start delimiter and gap: 20 B).
    pub line_overhead_bits: f64,
    /// `f_NIC`: the NIC's packet-processing capacity, operations per second, where the
    /// NIC's costs below are in operations (`None`: not limiting).
    pub nic_ops_per_s: Option<f64>,
    /// `C_NIC,RX`, `C_NIC,TX`, `C_NIC,switch`, operations per packet.
    pub nic_rx_ops: f64,
    pub nic_tx_ops: f64,
    pub nic_switch_ops: f64,
    /// `bw_PCIe`: the bus's bandwidth in one direction, bit/s (`None`: no bus).
    pub pcie_bps: Option<f64>,
    /// `δ_PCIe`: per-packet bus overhead (descriptors, headers of transactions), bits.
    pub pcie_overhead_bits: f64,
}

/// One resource of the chain and the packets per second it can handle.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Resource {
    /// `cpu`, `nic line`, `nic engine`, `pcie`.
    pub name: String,
    /// What one packet costs it, in its unit (`unit`).
    pub cost_per_packet: f64,
    pub unit: String,
    /// Its capacity, packets per second.
    pub max_pps: f64,
}

/// The model's answer for one chain.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Prediction {
    pub resources: Vec<Resource>,
    /// The minimum over the resources, packets per second.
    pub max_pps: f64,
    /// The resource that sets it.
    pub bottleneck: String,
}

impl Prediction {
    /// Each resource's utilisation at `offered_pps` (1.0: saturated; above: overloaded).
    pub fn utilisation(&self, offered_pps: f64) -> Vec<(String, f64)> {
        self.resources
            .iter()
            .map(|r| (r.name.clone(), offered_pps / r.max_pps))
            .collect()
    }
}

/// The CPU's cycles per packet for the chain as joined (seed 000 Section V):
/// software-linked `C_RX + Σ C_SF + (n - 1) C_SW + C_TX`; NIC-switched
/// `Σ (C_RX + C_SF,i + C_TX)`, every NF doing its own I/O.
pub fn cpu_cycles_per_packet(costs: &CpuCosts, chaining: Chaining) -> f64 {
    let n = costs.nf_cycles.len() as f64;
    let nfs: f64 = costs.nf_cycles.iter().sum();
    match chaining {
        Chaining::SoftwareLinked => costs.rx_cycles + nfs + (n - 1.0).max(0.0) * costs.link_cycles + costs.tx_cycles,
        Chaining::NicSwitched => n * (costs.rx_cycles + costs.tx_cycles) + nfs,
    }
}

/// The maximum throughput of a chain of `costs` on one core of `hw`, joined by
/// `chaining`, at a mean frame size of `frame_bytes` (with FCS): the minimum of the
/// CPU (`f_CPU / C_CPU`), the line (`lr / (s + overhead)`), the NIC's engine
/// (`f_NIC / C_NIC`, with `C_NIC = C_RX + C_TX` software-linked and
/// `C_RX + (n + 1) C_switch + C_TX` NIC-switched) and the bus
/// (`bw / (s + δ)` software-linked, `bw / (n (s + δ))` NIC-switched).
pub fn predict(costs: &CpuCosts, hw: &HardwareProfile, chaining: Chaining, frame_bytes: f64) -> Prediction {
    let n = costs.nf_cycles.len().max(1) as f64;
    let bits = frame_bytes * 8.0;
    let mut resources = Vec::new();
    let cpu = cpu_cycles_per_packet(costs, chaining);
    resources.push(Resource {
        name: "cpu".into(),
        cost_per_packet: cpu,
        unit: "cycles".into(),
        max_pps: hw.cpu_hz / cpu,
    });
    let (crossings, switchings) = match chaining {
        Chaining::SoftwareLinked => (1.0, 0.0),
        Chaining::NicSwitched => (n, n + 1.0),
    };
    resources.extend(nic_resources(hw, bits, crossings, switchings));
    let bottleneck = resources
        .iter()
        .min_by(|a, b| a.max_pps.total_cmp(&b.max_pps))
        .expect("the CPU is always a resource");
    Prediction {
        max_pps: bottleneck.max_pps,
        bottleneck: bottleneck.name.clone(),
        resources,
    }
}

/// The NIC's line, its engine and the bus as resources for frames of `bits` (mean, with
/// FCS) that cross the bus `crossings` times and the switch `switchings` times (seed 000
/// Section V: software-linked 1 and 0, NIC-switched n and n + 1).
pub fn nic_resources(hw: &HardwareProfile, bits: f64, crossings: f64, switchings: f64) -> Vec<Resource> {
    let mut out = Vec::new();
    if let Some(lr) = hw.line_rate_bps {
        let per = bits + hw.line_overhead_bits;
        out.push(Resource {
            name: "nic line".into(),
            cost_per_packet: per,
            unit: "bits".into(),
            max_pps: lr / per,
        });
    }
    if let Some(f_nic) = hw.nic_ops_per_s {
        let per = hw.nic_rx_ops + switchings * hw.nic_switch_ops + hw.nic_tx_ops;
        out.push(Resource {
            name: "nic engine".into(),
            cost_per_packet: per,
            unit: "operations".into(),
            max_pps: f_nic / per,
        });
    }
    if let Some(bw) = hw.pcie_bps {
        let per = crossings * (bits + hw.pcie_overhead_bits);
        out.push(Resource {
            name: "pcie".into(),
            cost_per_packet: per,
            unit: "bits".into(),
            max_pps: bw / per,
        });
    }
    out
}

/// One cell of an RC sweep: a chain of `n` NFs at a mean frame size, as joined.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct RcPoint {
    pub nfs: usize,
    pub frame_bytes: f64,
    pub chaining: Chaining,
    pub cpu_cycles: f64,
    pub prediction: Prediction,
}

/// Seed 000 Fig. 3 and Section V as a table: every chain length and frame size, both
/// chainings, with the CPU costs `costs(n, size)` gives.
pub fn sweep(
    costs: &dyn Fn(usize, f64) -> Result<CpuCosts, String>,
    hw: &HardwareProfile,
    lengths: &[usize],
    sizes: &[f64],
) -> Result<Vec<RcPoint>, String> {
    if !(hw.cpu_hz.is_finite() && hw.cpu_hz > 0.0) {
        return Err("the hardware profile has no CPU clock (cpu_hz)".into());
    }
    let mut out = Vec::new();
    for &n in lengths {
        if n == 0 {
            return Err("a chain has at least one NF".into());
        }
        for &size in sizes {
            let c = costs(n, size)?;
            for chaining in [Chaining::SoftwareLinked, Chaining::NicSwitched] {
                out.push(RcPoint {
                    nfs: n,
                    frame_bytes: size,
                    chaining,
                    cpu_cycles: cpu_cycles_per_packet(&c, chaining),
                    prediction: predict(&c, hw, chaining, size),
                });
            }
        }
    }
    Ok(out)
}

/// Seed 002's break-even chain length n0 for two cores against one: the smallest n at
/// which n identical NFs (`nf_cycles` each, `call_cycles` per link on one core) cut in
/// two blocks on two cores (`bi:2`, the blocks joined by a link costing `cross_cycles`
/// on each side) forward more than all of them on one core. `None` when that does not
/// happen up to `max_n` (the cross-core link costs more than half the chain).
pub fn break_even_chain_length(
    io_cycles: f64,
    nf_cycles: f64,
    call_cycles: f64,
    cross_cycles: f64,
    max_n: usize,
) -> Option<usize> {
    (2..=max_n).find(|&n| {
        let one_core = io_cycles + n as f64 * nf_cycles + (n - 1) as f64 * call_cycles;
        // The first core holds the larger half (and the receive), the second the rest;
        // each pays its side of the cross-core link.
        let first = n.div_ceil(2);
        let second = n - first;
        let core =
            |k: usize, io: f64| io + k as f64 * nf_cycles + k.saturating_sub(1) as f64 * call_cycles + cross_cycles;
        let two_cores = core(first, io_cycles / 2.0).max(core(second, io_cycles / 2.0));
        two_cores < one_core
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seed 000's DuT: Xeon E5-2640 v2 at 2.0 GHz, an X520 (10 GbE) on PCIe 2.0 x8
    /// (32 Gbit/s both ways: 16 each way), with round numbers for the costs so every
    /// answer below is computed by hand.
    fn x520() -> HardwareProfile {
        HardwareProfile {
            cpu_hz: 2.0e9,
            line_rate_bps: Some(10e9),
            line_overhead_bits: 160.0,
            nic_ops_per_s: Some(60e6),
            nic_rx_ops: 1.0,
            nic_tx_ops: 1.0,
            nic_switch_ops: 1.0,
            pcie_bps: Some(16e9),
            pcie_overhead_bits: 256.0,
        }
    }

    fn costs(n: usize) -> CpuCosts {
        CpuCosts {
            rx_cycles: 40.0,
            tx_cycles: 40.0,
            nf_cycles: vec![20.0; n],
            link_cycles: 10.0,
        }
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    #[test]
    fn cpu_cycles_follow_each_chaining_formula() {
        // SW-linked n = 3: 40 + 3*20 + 2*10 + 40 = 160.
        assert!(close(cpu_cycles_per_packet(&costs(3), Chaining::SoftwareLinked), 160.0));
        // NIC-switched n = 3: 3*(40 + 40) + 60 = 300.
        assert!(close(cpu_cycles_per_packet(&costs(3), Chaining::NicSwitched), 300.0));
        // One NF: no link.
        assert!(close(cpu_cycles_per_packet(&costs(1), Chaining::SoftwareLinked), 100.0));
    }

    #[test]
    fn a_software_linked_chain_is_bound_by_the_least_of_cpu_line_engine_and_bus() {
        let p = predict(&costs(3), &x520(), Chaining::SoftwareLinked, 64.0);
        // line: 10e9 / (512 + 160) = 14.880952 Mpps; cpu: 2e9 / 160 = 12.5 Mpps;
        // engine: 60e6 / 2 = 30 Mpps; pcie: 16e9 / (512 + 256) = 20.833 Mpps.
        let r = |name: &str| p.resources.iter().find(|r| r.name == name).unwrap().max_pps;
        assert!(close(r("nic line"), 10e9 / 672.0));
        assert!(close(r("cpu"), 12.5e6));
        assert!(close(r("nic engine"), 30e6));
        assert!(close(r("pcie"), 16e9 / 768.0));
        assert_eq!(p.bottleneck, "cpu");
        assert!(close(p.max_pps, 12.5e6));
    }

    #[test]
    fn a_nic_switched_chain_moves_the_bottleneck_to_the_nic_and_the_bus() {
        let p = predict(&costs(4), &x520(), Chaining::NicSwitched, 64.0);
        // engine: 60e6 / (1 + 5 + 1) = 8.571 Mpps; pcie: 16e9 / (4 * 768) = 5.208 Mpps;
        // cpu: 2e9 / (4*80 + 80) = 5.0 Mpps; line 14.88.
        let r = |name: &str| p.resources.iter().find(|r| r.name == name).unwrap().max_pps;
        assert!(close(r("nic engine"), 60e6 / 7.0));
        assert!(close(r("pcie"), 16e9 / 3072.0));
        assert!(close(r("cpu"), 5.0e6));
        assert_eq!(p.bottleneck, "cpu");
        // With NFs twice as fast the bus is next: cpu 2e9 / (4*80 + 40) = 5.556 Mpps.
        let fast = CpuCosts {
            nf_cycles: vec![10.0; 4],
            ..costs(4)
        };
        let p = predict(&fast, &x520(), Chaining::NicSwitched, 64.0);
        assert_eq!(p.bottleneck, "pcie");
        assert!(close(p.max_pps, 16e9 / 3072.0));
        // Large frames: the line (10e9 / (12144 + 160) = 0.8127 Mpps) over the bus
        // (16e9 / (4 * (12144 + 256)) = 0.3226 Mpps): still the bus, n times per packet.
        let p = predict(&fast, &x520(), Chaining::NicSwitched, 1518.0);
        assert_eq!(p.bottleneck, "pcie");
        assert!(close(p.max_pps, 16e9 / (4.0 * 12400.0)));
    }

    #[test]
    fn without_a_nic_only_the_cpu_counts_and_utilisation_is_offered_over_capacity() {
        let hw = HardwareProfile {
            line_rate_bps: None,
            nic_ops_per_s: None,
            pcie_bps: None,
            ..x520()
        };
        let p = predict(&costs(2), &hw, Chaining::SoftwareLinked, 64.0);
        assert_eq!(p.resources.len(), 1);
        // 40 + 40 + 10 + 40 = 130 cycles: 2e9 / 130 = 15.3846 Mpps.
        assert!(close(p.max_pps, 2e9 / 130.0));
        let u = p.utilisation(p.max_pps / 2.0);
        assert!(close(u[0].1, 0.5));
    }

    #[test]
    fn two_cores_break_even_where_the_cross_core_link_is_paid_for() {
        // io 100, NF 50, call 2, cross 120: one core n*50 + (n-1)*2 + 100; two cores
        // max of halves + 50 + 120. n = 4: 306 vs 50+100+2+120 = 272 -> wins; n = 3:
        // 254 vs (2*50+2+50+120 = 272) -> loses. n0 = 4.
        assert_eq!(break_even_chain_length(100.0, 50.0, 2.0, 120.0, 64), Some(4));
        // A link dearer than the whole chain can save never pays off.
        assert_eq!(break_even_chain_length(100.0, 1.0, 1.0, 10_000.0, 64), None);
    }
}
