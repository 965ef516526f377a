//! DPDK's unit-test binary (`dpdk-test`, Debian `dpdk-dev`) as a peer: its
//! `ring_perf_autotest` measures rte_ring's cost per element.

use std::process::{Command, Stdio};

use crate::testpmd::remove_runtime_dir;
use crate::which;

/// Runs DPDK's ring_perf_autotest; returns SP/SC bulk enq+deq cycles per element on two cores.
pub fn ring_perf(burst: usize, cores: (usize, usize)) -> Result<f64, String> {
    let bin = which("dpdk-test").ok_or("dpdk-test not found (Debian package `dpdk-dev`)")?;
    let prefix = format!("sfclab-ring-{}", std::process::id());
    let lcores = format!("{},{}", cores.0, cores.1);
    let out = Command::new(&bin)
        .args([
            "--no-huge",
            "-m",
            "512",
            "--no-pci",
            "-l",
            &lcores,
            "--file-prefix",
            &prefix,
        ])
        .env("DPDK_TEST", "ring_perf_autotest")
        .stdin(Stdio::null())
        .output();
    remove_runtime_dir(&prefix);
    let out = out.map_err(|e| format!("cannot run dpdk-test: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_ring_perf(&text, burst).ok_or_else(|| "ring_perf_autotest printed no SP/SC two-core figures".to_string())
}

/// Finds "SP/SC: bulk (size: N): X" in the first section for two physical cores (the
/// legacy pointer API, as sfclab's rings carry pointers).
pub fn parse_ring_perf(text: &str, burst: usize) -> Option<f64> {
    let section = text.split("Testing using two physical cores").nth(1)?;
    let section = section.split("Testing using").next()?;
    let key = format!("SP/SC: bulk (size: {burst}):");
    section
        .lines()
        .find_map(|l| l.split_once(&key).and_then(|(_, v)| v.trim().parse::<f64>().ok()))
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_the_two_core_section_of_ring_perf() {
        let text = "### Testing bulk enq/deq ###\nlegacy APIs: SP/SC: bulk (size: 32): 73.35\n### Testing using two physical cores ###\nlegacy APIs: SP/SC: bulk (size: 8): 9.10\nlegacy APIs: MP/MC: bulk (size: 8): 32.45\nlegacy APIs: SP/SC: bulk (size: 32): 4.02\n### Testing using all worker nodes ###\n### Testing using two physical cores ###\nelem APIs: element size 16B: SP/SC: bulk (size: 32): 6.85\n";
        assert_eq!(super::parse_ring_perf(text, 32), Some(4.02));
        assert_eq!(super::parse_ring_perf(text, 8), Some(9.10));
        assert_eq!(super::parse_ring_perf("nothing", 32), None);
    }
}
