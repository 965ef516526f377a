//! DPDK's `rte_meter` as the peer of the qos NF's meters: a small C program
//! (`dpdk_meter.c`) compiled here against Debian's `libdpdk-dev` (rte_meter's checks
//! are inline functions of its header, and Debian's `dpdk-test` has no
//! `meter_perf_autotest`), run on one core without hugepages, timing each check alone.

use crate::{compile_against_dpdk, run_dpdk_app};

const SOURCE: &str = include_str!("dpdk_meter.c");

/// TSC cycles per 64-byte packet of each rte_meter check, with the colours it gave.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct MeterPerf {
    /// `srtcm-blind`, `srtcm-aware`, `trtcm-blind`, `trtcm-aware`.
    pub check: String,
    pub cycles_per_packet: f64,
    /// Packets coloured green, yellow, red.
    pub colours: [u64; 3],
}

/// Builds and runs the timer on `core` for `packets` packets per check.
pub fn meter_perf(core: usize, packets: u64, stop: &dyn Fn() -> bool) -> Result<Vec<MeterPerf>, String> {
    let dir = std::env::temp_dir().join(format!("sfclab-meter-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let result = compile_against_dpdk(&dir, "sfclab-meter", SOURCE, "the rte_meter timer").and_then(|bin| {
        let out = run_dpdk_app(
            &bin.display().to_string(),
            "dpdk-dev",
            &core.to_string(),
            64,
            &[("SFCLAB_METER_PACKETS", &packets.to_string())],
            &[],
            stop,
        )?;
        if !out.status.success() {
            return Err(format!(
                "the rte_meter timer failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        let perf = parse(&String::from_utf8_lossy(&out.stdout));
        if perf.len() != 4 {
            return Err("the rte_meter timer printed no figures".into());
        }
        Ok(perf)
    });
    let _ = std::fs::remove_dir_all(&dir);
    result
}

/// Its lines: `<check> <cycles> <green> <yellow> <red>`.
pub fn parse(text: &str) -> Vec<MeterPerf> {
    text.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            let [check, cycles, g, y, r] = w[..] else { return None };
            Some(MeterPerf {
                check: check.to_string(),
                cycles_per_packet: cycles.parse().ok()?,
                colours: [g.parse().ok()?, y.parse().ok()?, r.parse().ok()?],
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_its_lines_and_skips_the_eal_chatter() {
        let text = "EAL: Detected CPU lcores: 2\nsrtcm-blind 9.125 10 20 30\ntrtcm-aware 11.5 1 2 3\n";
        let p = parse(text);
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].check, "srtcm-blind");
        assert_eq!(p[0].colours, [10, 20, 30]);
        assert!((p[1].cycles_per_packet - 11.5).abs() < 1e-9);
    }

    #[test]
    #[ignore = "needs a C compiler, pkg-config and libdpdk-dev (CI installs them)"]
    fn rte_meter_is_timed_when_installed() {
        let p = meter_perf(0, 1_000_000, &|| false).unwrap();
        assert_eq!(p.len(), 4);
        for m in &p {
            assert!(m.cycles_per_packet > 0.5 && m.cycles_per_packet < 1000.0, "{m:?}");
            assert_eq!(m.colours.iter().sum::<u64>(), 1_000_000, "{m:?}");
        }
        // 64 bytes every 40 cycles is far over 250 MB/s: the blind srTCM colours red too.
        assert!(p[0].colours[2] > 0, "{:?}", p[0]);
    }
}
