//! Hardware profiles for predictions: a NIC's line rate, its packet engine and the PCIe
//! bus it sits on, and the clock of the cores (seed 000 Section V). Presets describe
//! common NICs, each number with where it comes from; `--hardware` in `model predict`
//! takes a preset's name or a JSON file of a [`HardwareProfile`].

use crate::rc::HardwareProfile;
use serde::Serialize;

/// A named profile and the source of each of its numbers.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Preset {
    pub name: &'static str,
    pub about: &'static str,
    pub profile: HardwareProfile,
    /// Where each number comes from, one line per number.
    pub sources: Vec<&'static str>,
}

/// PCIe bandwidth in one direction, bit/s: transfers per second per lane x lanes x the
/// line code's payload share (8b/10b for generations 1 and 2, 128b/130b from 3).
pub fn pcie_bps(generation: u8, lanes: u32) -> Option<f64> {
    let (gt, code) = match generation {
        1 => (2.5e9, 0.8),
        2 => (5.0e9, 0.8),
        3 => (8.0e9, 128.0 / 130.0),
        4 => (16.0e9, 128.0 / 130.0),
        5 => (32.0e9, 128.0 / 130.0),
        _ => return None,
    };
    Some(gt * f64::from(lanes) * code)
}

/// Per-packet bus overhead of a descriptor-ring NIC, bits: the 16 B descriptor read and
/// written back, each batched by four into one transaction, plus the transaction layer
/// packet's header and framing (about 24 B) of the data write, rounded up to whole cache
/// lines as seed 000 Section IV-D observed: 64 B a packet, 512 bits.
const DESCRIPTOR_RING_OVERHEAD_BITS: f64 = 512.0;

/// Every preset, by name.
pub fn presets() -> Vec<Preset> {
    vec![
        Preset {
            name: "x520",
            about: "seed 000's device under test: Intel X520 (82599, 10 GbE) on PCIe 2.0 x8, Xeon E5-2640 v2 at 2.0 GHz",
            profile: HardwareProfile {
                cpu_hz: 2.0e9,
                line_rate_bps: Some(10e9),
                line_overhead_bits: 160.0,
                nic_ops_per_s: Some(59.52e6),
                nic_rx_ops: 1.0,
                nic_tx_ops: 1.0,
                nic_switch_ops: 1.0,
                pcie_bps: pcie_bps(2, 8),
                pcie_overhead_bits: DESCRIPTOR_RING_OVERHEAD_BITS,
            },
            sources: vec![
                "cpu_hz 2.0 GHz: seed 000 Section IV-A (Xeon E5-2640 v2 clocked at 2.0 GHz)",
                "line 10 Gbit/s, 20 B preamble + delimiter + gap per frame: IEEE 802.3",
                "nic_ops_per_s 59.52 M: seed 000 Section IV-D: a chain of 4 at 14.88 Mpps (59.52 M switching decisions/s) is where the X520's throughput fluctuates; each receive, send and switching decision counted as one operation",
                "pcie 32 Gbit/s each way: PCIe 2.0 x8, 5 GT/s x 8 lanes x 8b/10b (PCIe base specification 2.0; the paper's '32 Gbit/s')",
                "pcie overhead 512 bits a packet: 16 B descriptors batched by 4, TLP header, cache-line padding (seed 000 Section IV-D, Fig. 4b)",
            ],
        },
        Preset {
            name: "xl710",
            about: "Intel XL710 (40 GbE) on PCIe 3.0 x8",
            profile: HardwareProfile {
                cpu_hz: 0.0,
                line_rate_bps: Some(40e9),
                line_overhead_bits: 160.0,
                nic_ops_per_s: None,
                nic_rx_ops: 1.0,
                nic_tx_ops: 1.0,
                nic_switch_ops: 1.0,
                pcie_bps: pcie_bps(3, 8),
                pcie_overhead_bits: DESCRIPTOR_RING_OVERHEAD_BITS,
            },
            sources: vec![
                "cpu_hz: this machine's (the calibration's TSC)",
                "line 40 Gbit/s: IEEE 802.3ba",
                "nic engine: no published packet rate for the switch: not a limit here (set nic_ops_per_s in a profile file to add one)",
                "pcie 63 Gbit/s each way: PCIe 3.0 x8, 8 GT/s x 8 lanes x 128b/130b",
                "pcie overhead: as x520 (descriptor ring NIC)",
            ],
        },
        Preset {
            name: "e810",
            about: "Intel E810 (100 GbE) on PCIe 4.0 x16",
            profile: HardwareProfile {
                cpu_hz: 0.0,
                line_rate_bps: Some(100e9),
                line_overhead_bits: 160.0,
                nic_ops_per_s: None,
                nic_rx_ops: 1.0,
                nic_tx_ops: 1.0,
                nic_switch_ops: 1.0,
                pcie_bps: pcie_bps(4, 16),
                pcie_overhead_bits: DESCRIPTOR_RING_OVERHEAD_BITS,
            },
            sources: vec![
                "cpu_hz: this machine's (the calibration's TSC)",
                "line 100 Gbit/s: IEEE 802.3ba",
                "nic engine: no published packet rate for the switch: not a limit here",
                "pcie 252 Gbit/s each way: PCIe 4.0 x16, 16 GT/s x 16 lanes x 128b/130b",
                "pcie overhead: as x520 (descriptor ring NIC)",
            ],
        },
    ]
}

/// A preset by name, or a profile read from a JSON file; the names known when neither.
pub fn load(name_or_file: &str) -> Result<HardwareProfile, String> {
    if let Some(p) = presets().into_iter().find(|p| p.name == name_or_file) {
        return Ok(p.profile);
    }
    let path = std::path::Path::new(name_or_file);
    if !path.is_file() {
        let names: Vec<&str> = presets().iter().map(|p| p.name).collect();
        return Err(format!(
            "`{name_or_file}` is neither a preset ({}) nor a profile file",
            names.join(", ")
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("{name_or_file}: {e}"))?;
    let p: HardwareProfile = serde_json::from_str(&text).map_err(|e| format!("{name_or_file}: {e}"))?;
    if !(p.cpu_hz.is_finite() && p.cpu_hz >= 0.0) {
        return Err(format!(
            "{name_or_file}: cpu_hz {} is not a clock (0: the calibration's)",
            p.cpu_hz
        ));
    }
    Ok(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcie_bandwidth_follows_the_line_code_of_each_generation() {
        let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e3);
        assert!(close(pcie_bps(2, 8), 32e9));
        assert!(close(pcie_bps(3, 8), 63.015_384_6e9));
        assert!(close(pcie_bps(4, 16), 252.061_538_4e9));
        assert_eq!(pcie_bps(9, 8), None);
    }

    #[test]
    fn every_preset_says_where_its_numbers_come_from() {
        for p in presets() {
            assert!(p.sources.len() >= 4, "{}", p.name);
            assert!(load(p.name).is_ok());
        }
        assert!(load("no-such-nic").unwrap_err().contains("x520, xl710, e810"));
    }
}
