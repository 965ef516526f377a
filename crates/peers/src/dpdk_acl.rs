//! DPDK's ACL test application (`dpdk-test-acl`, Debian `dpdk-dev`) as a peer: it loads
//! a ClassBench rule file into `rte_acl`, classifies a ClassBench trace in steps of 256
//! headers, and prints TSC cycles per packet. With `--verbose=2` it prints every
//! header's first matching rule, which sfclab's classifier is checked against.

use std::path::Path;

use crate::run_dpdk_app;

/// What one `dpdk-test-acl` run measured.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct AclPerf {
    /// TSC cycles per classified header.
    pub cycles_per_packet: f64,
    /// The classify method rte_acl ran (`avx512x16`, `avx2`, `sse`, `scalar`, ...).
    pub method: String,
    /// Rules rte_acl loaded.
    pub rules: usize,
}

/// `rte_acl_classify_alg` by number (rte_acl.h).
const METHODS: [&str; 9] = [
    "default",
    "scalar",
    "sse",
    "avx2",
    "neon",
    "altivec",
    "avx512x16",
    "avx512x32",
    "rvv",
];

fn run(rules: &Path, trace: &Path, core: usize, extra: &[String], stop: &dyn Fn() -> bool) -> Result<String, String> {
    let mut args = vec![
        format!("--rulesf={}", rules.display()),
        format!("--tracef={}", trace.display()),
    ];
    args.extend_from_slice(extra);
    let out = run_dpdk_app("dpdk-test-acl", "dpdk-dev", &core.to_string(), 1024, &[], &args, stop)?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let last = err
            .lines()
            .chain(text.lines())
            .rfind(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(format!("dpdk-test-acl failed ({}): {last}", out.status));
    }
    Ok(text)
}

/// Classifies the trace `iterations` times with `method` (None: rte_acl's default, the
/// widest SIMD the CPU has); returns the cycles per packet.
pub fn acl_perf(
    rules: &Path,
    trace: &Path,
    core: usize,
    iterations: u32,
    method: Option<&str>,
    stop: &dyn Fn() -> bool,
) -> Result<AclPerf, String> {
    let mut extra = vec![format!("--iter={iterations}"), "--verbose=0".to_string()];
    if let Some(m) = method {
        extra.push(format!("--alg={m}"));
    }
    let text = run(rules, trace, core, &extra, stop)?;
    parse_acl_perf(&text).ok_or_else(|| "dpdk-test-acl printed no cycles/pkt figure".to_string())
}

/// The first matching rule (0-based, None: no match) rte_acl gives each trace header.
pub fn acl_results(
    rules: &Path,
    trace: &Path,
    core: usize,
    stop: &dyn Fn() -> bool,
) -> Result<Vec<Option<usize>>, String> {
    let text = run(rules, trace, core, &["--iter=1".into(), "--verbose=2".into()], stop)?;
    Ok(parse_acl_results(&text))
}

/// Reads "alg=N", "num_rules=N" and "..., X cycles/pkt, ...".
pub fn parse_acl_perf(text: &str) -> Option<AclPerf> {
    let field = |key: &str| {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(key).and_then(|v| v.trim().parse::<usize>().ok()))
    };
    let cycles = text
        .lines()
        .find(|l| l.contains("cycles/pkt"))?
        .split(',')
        .find_map(|part| part.trim().strip_suffix("cycles/pkt")?.trim().parse::<f64>().ok())?;
    let method = field("alg=").map_or("unknown".to_string(), |n| {
        METHODS.get(n).map_or(format!("alg {n}"), |m| m.to_string())
    });
    Some(AclPerf {
        cycles_per_packet: cycles,
        method,
        rules: field("num_rules=")?,
    })
}

/// Reads "ipv4_5tuple: N, category: 0, result: R" lines in order; R = 2^32 - 1 is no match.
pub fn parse_acl_results(text: &str) -> Vec<Option<usize>> {
    text.lines()
        .filter(|l| l.starts_with("ipv4_5tuple:") && l.contains("category: 0,"))
        .filter_map(|l| l.rsplit("result:").next()?.trim().parse::<u64>().ok())
        .map(|r| (r != u64::from(u32::MAX)).then_some(r as usize))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "rte_acl_build(3) finished with 0\nacl context <TESTACL>@0x10fd11a80\n  socket_id=-1\n  alg=6\n  first_load_sz=4\n  max_rules=65536\n  rule_size=96\n  num_rules=3\n  num_categories=3\n  num_tries=1\nipv4_5tuple: 1, category: 0, result: 0\nipv4_5tuple: 2, category: 0, result: 1\nipv4_5tuple: 3, category: 0, result: 4294967295\nsearch_ip5tuples_once(1, 256, default) returns 3\nsearch_ip5tuples  @lcore 0: 1 iterations, 3 pkts, 1 categories, 6474 cycles (0.00 sec), 2158.00 cycles/pkt, 1204819.28 pkt/sec\n";

    #[test]
    fn parses_figures_and_results() {
        let p = parse_acl_perf(OUTPUT).unwrap();
        assert_eq!(p.cycles_per_packet, 2158.0);
        assert_eq!(p.method, "avx512x16");
        assert_eq!(p.rules, 3);
        assert_eq!(parse_acl_results(OUTPUT), vec![Some(0), Some(1), None]);
        assert!(parse_acl_perf("EAL: error").is_none());
    }
}
