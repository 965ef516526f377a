//! DPDK's unit-test binary (`dpdk-test`, Debian `dpdk-dev`) as a peer: its
//! `ring_perf_autotest` measures rte_ring's cost per element, `lpm_perf_autotest`
//! rte_lpm's cycles per IPv4 lookup on a BGP-shaped table of about a million routes.

use crate::run_dpdk_app;

/// Runs DPDK's ring_perf_autotest; returns SP/SC bulk enq+deq cycles per element on two cores.
pub fn ring_perf(burst: usize, cores: (usize, usize), stop: &dyn Fn() -> bool) -> Result<f64, String> {
    let lcores = format!("{},{}", cores.0, cores.1);
    let out = run_dpdk_app(
        "dpdk-test",
        "dpdk-dev",
        &lcores,
        512,
        &[("DPDK_TEST", "ring_perf_autotest")],
        &[],
        stop,
    )?;
    let text = String::from_utf8_lossy(&out.stdout);
    parse_ring_perf(&text, burst).ok_or_else(|| "ring_perf_autotest printed no SP/SC two-core figures".to_string())
}

/// What `lpm_perf_autotest` measured: its table's shape and cycles per lookup.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct LpmPerf {
    /// Routes per prefix length, as it added them.
    pub shape: Vec<(u8, usize)>,
    /// Cycles per `rte_lpm_lookup` (one address at a time).
    pub single_cycles: f64,
    /// Cycles per address with `rte_lpm_lookup_bulk` (32 at a time).
    pub bulk_cycles: f64,
    /// Share of random addresses without a route, percent.
    pub fails_percent: f64,
}

/// Runs DPDK's lpm_perf_autotest (IPv4, rte_lpm) on `core`.
pub fn lpm_perf(core: usize, stop: &dyn Fn() -> bool) -> Result<LpmPerf, String> {
    lpm_perf_test("lpm_perf_autotest", core, stop)
}

/// Runs DPDK's lpm6_perf_autotest (IPv6, rte_lpm6) on `core`: 1,000 routes, 100,000
/// addresses each inside a route.
pub fn lpm6_perf(core: usize, stop: &dyn Fn() -> bool) -> Result<LpmPerf, String> {
    lpm_perf_test("lpm6_perf_autotest", core, stop)
}

fn lpm_perf_test(test: &str, core: usize, stop: &dyn Fn() -> bool) -> Result<LpmPerf, String> {
    let out = run_dpdk_app(
        "dpdk-test",
        "dpdk-dev",
        &core.to_string(),
        1024,
        &[("DPDK_TEST", test)],
        &[],
        stop,
    )?;
    parse_lpm_perf(&String::from_utf8_lossy(&out.stdout)).ok_or_else(|| format!("{test} printed no lookup figures"))
}

/// Reads the route distribution table and the "Average"/"BULK LPM Lookup" lines.
pub fn parse_lpm_perf(text: &str) -> Option<LpmPerf> {
    let figure = |key: &str| {
        let line = text.lines().find(|l| l.trim_start().starts_with(key))?;
        line.split(':').nth(1)?.split_whitespace().next()?.parse::<f64>().ok()
    };
    let fails = text
        .lines()
        .find(|l| l.contains("Average LPM Lookup"))?
        .split("fails = ")
        .nth(1)?
        .trim_end_matches(|c: char| c == ')' || c == '%' || c.is_whitespace())
        .parse()
        .ok()?;
    let table = text.split("DEPTH").nth(1)?;
    let shape: Vec<(u8, usize)> = table
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let depth = w.next()?.parse::<u8>().ok()?;
            let n = w.next()?.parse::<usize>().ok()?;
            (n > 0).then_some((depth, n))
        })
        .collect();
    (!shape.is_empty()).then_some(())?;
    Some(LpmPerf {
        shape,
        single_cycles: figure("Average LPM Lookup")?,
        bulk_cycles: figure("BULK LPM Lookup")?,
        fails_percent: fails,
    })
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
    fn parses_lpm_perf() {
        let text = "No. routes = 1076806\nRoute distribution per prefix width: \nDEPTH    QUANTITY (PERCENT)\n--------------------------- \n01              0 (0.00)\n08            201 (0.02)\n24         583900 (54.23)\n\nUnique added entries = 1037025\nAverage LPM Add: 127578 cycles\nAverage LPM Lookup: 27.0 cycles (fails = 12.5%)\nBULK LPM Lookup: 19.5 cycles (fails = 12.5%)\n";
        let p = super::parse_lpm_perf(text).unwrap();
        assert_eq!(p.shape, vec![(8, 201), (24, 583900)]);
        assert_eq!((p.single_cycles, p.bulk_cycles, p.fails_percent), (27.0, 19.5, 12.5));
        assert!(super::parse_lpm_perf("Test OK").is_none());
    }

    #[test]
    fn parses_the_two_core_section_of_ring_perf() {
        let text = "### Testing bulk enq/deq ###\nlegacy APIs: SP/SC: bulk (size: 32): 73.35\n### Testing using two physical cores ###\nlegacy APIs: SP/SC: bulk (size: 8): 9.10\nlegacy APIs: MP/MC: bulk (size: 8): 32.45\nlegacy APIs: SP/SC: bulk (size: 32): 4.02\n### Testing using all worker nodes ###\n### Testing using two physical cores ###\nelem APIs: element size 16B: SP/SC: bulk (size: 32): 6.85\n";
        assert_eq!(super::parse_ring_perf(text, 32), Some(4.02));
        assert_eq!(super::parse_ring_perf(text, 8), Some(9.10));
        assert_eq!(super::parse_ring_perf("nothing", 32), None);
    }
}
