//! DPDK's AES-GCM as the peer of the ESP NFs' cipher: `dpdk-test-crypto-perf`'s
//! throughput test on a software crypto PMD (`crypto_aesni_gcm`: Intel's ipsec-mb, as
//! DPDK's IPsec gateway uses it; `crypto_openssl` where that one is missing), one
//! worker lcore, AES-128-GCM encryption of buffers of each size with an 8-byte AAD and a
//! 16-byte tag (ESP without ESN), bursts of 32, buffers reused (in cache).

use crate::run_dpdk_app_with;

/// The PMD's cost for one buffer size.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct CryptoPerf {
    /// Bytes encrypted per operation.
    pub bytes: usize,
    /// TSC cycles per operation, as the tool reports them (its TSC rate over its rate).
    pub cycles_per_op: f64,
    /// Millions of operations per second.
    pub mops: f64,
    /// The PMD that ran.
    pub pmd: String,
}

/// PMDs to try, best first (the cipher alone, and under librte_ipsec).
const PMDS: [&str; 2] = ["crypto_aesni_gcm", "crypto_openssl"];

/// Runs the test on `core` (the main lcore on `main_core`) for `ops` operations per size.
pub fn aes_gcm_encrypt(
    main_core: usize,
    core: usize,
    sizes: &[usize],
    ops: u64,
    stop: &dyn Fn() -> bool,
) -> Result<Vec<CryptoPerf>, String> {
    with_first_pmd(|pmd| run(pmd, main_core, core, sizes, ops, stop))
}

/// `run` on each of [`PMDS`] in turn until one works; otherwise every one's error.
pub(crate) fn with_first_pmd<T>(mut run: impl FnMut(&str) -> Result<T, String>) -> Result<T, String> {
    let mut errors = Vec::new();
    for pmd in PMDS {
        match run(pmd) {
            Ok(v) => return Ok(v),
            Err(e) if e == crate::STOPPED => return Err(e),
            Err(e) => errors.push(format!("{pmd}: {e}")),
        }
    }
    Err(errors.join("; "))
}

fn run(
    pmd: &str,
    main_core: usize,
    core: usize,
    sizes: &[usize],
    ops: u64,
    stop: &dyn Fn() -> bool,
) -> Result<Vec<CryptoPerf>, String> {
    let sizes_arg = sizes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(",");
    let args: Vec<String> = [
        "--ptest",
        "throughput",
        "--devtype",
        pmd,
        "--optype",
        "aead",
        "--aead-algo",
        "aes-gcm",
        "--aead-op",
        "encrypt",
        "--aead-key-sz",
        "16",
        "--aead-iv-sz",
        "12",
        "--aead-aad-sz",
        "8",
        "--digest-sz",
        "16",
        "--burst-sz",
        "32",
        "--silent",
        "--csv-friendly",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain(["--buffer-sz".into(), sizes_arg, "--total-ops".into(), ops.to_string()])
    .collect();
    let (lcores, main) = (format!("{main_core},{core}"), main_core.to_string());
    let vdev = format!("{pmd}0");
    let out = run_dpdk_app_with(
        "dpdk-test-crypto-perf",
        "dpdk-dev",
        &lcores,
        &["--main-lcore", &main, "--vdev", &vdev],
        1024,
        &[],
        &args,
        stop,
    )?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "dpdk-test-crypto-perf failed: {}",
            err.lines()
                .chain(text.lines())
                .rev()
                .take(3)
                .collect::<Vec<_>>()
                .join(" / ")
        ));
    }
    let rows = parse(&text, pmd);
    if rows.len() != sizes.len() {
        return Err(format!(
            "dpdk-test-crypto-perf printed {} of {} rows: {text}",
            rows.len(),
            sizes.len()
        ));
    }
    Ok(rows)
}

/// Reads the CSV rows `lcore,buffer size,burst size,enqueued,dequeued,failed enq,failed
/// deq,MOps,Gbps,cycles/buf` (the header line and anything else skipped).
fn parse(text: &str, pmd: &str) -> Vec<CryptoPerf> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(',').map(str::trim).collect();
            if f.len() < 10 {
                return None;
            }
            Some(CryptoPerf {
                bytes: f[1].parse().ok()?,
                mops: f[7].parse().ok()?,
                cycles_per_op: f[9].parse().ok()?,
                pmd: pmd.to_string(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_csv_rows_and_skips_the_rest() {
        let text = "EAL: something\n# lcore, Buffer Size, Burst Size, Enqueued, Dequeued, Failed Enq, Failed Deq, Ops(Millions), Throughput(Gbps), Cycles/Buf\n\n1,64,32,2000000,2000000,0,0,28.6124,14.6496,90.87\n1,1420,32,2000000,2000000,0,0,11.0873,125.9514,234.50\n";
        let rows = parse(text, "crypto_aesni_gcm");
        assert_eq!(rows.len(), 2);
        assert_eq!(
            (rows[1].bytes, rows[1].cycles_per_op, rows[1].mops),
            (1420, 234.5, 11.0873)
        );
    }
}
