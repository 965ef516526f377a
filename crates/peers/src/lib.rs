//! Peers: the running systems sfclab's benchmarks compare with, measured in the same run.
//! Each peer is one module that knows how to start it, read its figures, and always stop
//! it and remove what it left behind (processes, DPDK runtime directories).
//!
//! - [`testpmd`]: DPDK's testpmd processes on virtual devices (`net_ring`, `net_memif`).
//! - [`dpdk_test`]: DPDK's unit-test binary (`ring_perf_autotest`, `lpm_perf_autotest`).
//! - [`dpdk_acl`]: DPDK's ACL test application (`dpdk-test-acl`, rte_acl).

pub mod dpdk_acl;
pub mod dpdk_test;
pub mod testpmd;

/// The path of `bin` on `PATH`, if installed.
pub fn which(bin: &str) -> Option<String> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| format!("{d}/{bin}"))
        .find(|p| std::path::Path::new(p).is_file())
}
