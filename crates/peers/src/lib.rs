//! Peers: the running systems sfclab's benchmarks compare with, measured in the same run.
//! Each peer is one module that knows how to start it, read its figures, and always stop
//! it and remove what it left behind (processes, DPDK runtime directories).
//!
//! - [`testpmd`]: DPDK's testpmd processes on virtual devices (`net_ring`, `net_memif`).
//! - [`dpdk_test`]: DPDK's unit-test binary (`ring_perf_autotest`, `lpm_perf_autotest`).
//! - [`dpdk_acl`]: DPDK's ACL test application (`dpdk-test-acl`, rte_acl).
//! - [`trafgen`]: netsniff-ng's packet generator on AF_PACKET TX rings.

pub mod dpdk_acl;
pub mod dpdk_test;
pub mod testpmd;
pub mod trafgen;

/// The path of `bin` on `PATH`, if installed.
pub fn which(bin: &str) -> Option<String> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| format!("{d}/{bin}"))
        .find(|p| std::path::Path::new(p).is_file())
}

/// Runs one of DPDK's applications to completion without hugepages or PCI devices, on
/// `lcores` with `memory_mb` of memory, in a runtime directory of its own (removed after):
/// `bin` from `package`, the EAL arguments, then `app_args` (after `--` when given), with
/// `env` set. Returns its output.
pub(crate) fn run_dpdk_app(
    bin: &str,
    package: &str,
    lcores: &str,
    memory_mb: u32,
    env: &[(&str, &str)],
    app_args: &[String],
) -> Result<std::process::Output, String> {
    let path = which(bin).ok_or_else(|| format!("{bin} not found (Debian package `{package}`)"))?;
    let prefix = format!("sfclab-{bin}-{}", std::process::id());
    let mut args: Vec<String> = [
        "--no-huge",
        "-m",
        &memory_mb.to_string(),
        "--no-pci",
        "-l",
        lcores,
        "--file-prefix",
        &prefix,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if !app_args.is_empty() {
        args.extend(["--log-level".to_string(), "lib.eal:error".into(), "--".into()]);
        args.extend_from_slice(app_args);
    }
    let out = std::process::Command::new(&path)
        .args(&args)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::null())
        .output();
    testpmd::remove_runtime_dir(&prefix);
    out.map_err(|e| format!("cannot run {bin}: {e}"))
}
