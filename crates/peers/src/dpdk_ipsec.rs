//! DPDK's ESP tunnel mode as the peer of the esp-encrypt NF: librte_ipsec framing each
//! packet and a software crypto PMD encrypting it (`crypto_aesni_gcm`, Intel's ipsec-mb;
//! `crypto_openssl` where that one is missing), as dpdk-ipsec-secgw's outbound path runs
//! them with a lookaside-none session, less its I/O and its SPD lookup. A small C program
//! (`dpdk_ipsec.c`) compiled here against Debian's `libdpdk-dev` times it per packet on
//! one core: Debian's `dpdk-test` has `ipsec_perf_autotest`, but it times librte_ipsec
//! without a crypto device (and crashes without hugepages).
//!
//! Where [`crate::dpdk_crypto`] prices the cipher alone, this prices the same work the
//! NF does: the outer header, the ESP header, IV, padding and trailer, the crypto op, the
//! cipher, the outer checksum.

use crate::dpdk_crypto::with_first_pmd;
use crate::{compile_against_dpdk, run_dpdk_app_with};

const SOURCE: &str = include_str!("dpdk_ipsec.c");

/// DPDK's outbound ESP at one datagram size.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
pub struct EspPerf {
    /// Bytes of the inner IPv4 datagram (the frame is 14 bytes longer).
    pub bytes: usize,
    /// TSC cycles per packet: prepare, the PMD's enqueue and dequeue, process, checksum.
    pub cycles_per_packet: f64,
    pub packets: u64,
    /// The PMD that encrypted.
    pub pmd: String,
}

/// A run: each size's figure, and its first frame before and after ESP.
#[derive(Debug, Clone, PartialEq)]
pub struct EspRun {
    pub sizes: Vec<EspPerf>,
    /// The first size's first frame (Ethernet, IPv4, UDP) and the ESP packet it became:
    /// sequence number 1 of SPI 0x1000, AES-128-GCM key
    /// `4c80cdefbb5d10da906ac73c3613a634`, salt `2e443b68`, tunnel 192.0.2.1 to 192.0.2.2.
    pub first_frame: Vec<u8>,
    pub first_packet: Vec<u8>,
}

/// Builds the timer and runs it on `core` for `packets` packets per size.
pub fn esp_outbound(core: usize, sizes: &[usize], packets: u64, stop: &dyn Fn() -> bool) -> Result<EspRun, String> {
    let dir = std::env::temp_dir().join(format!("sfclab-ipsec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let result = compile_against_dpdk(&dir, "sfclab-ipsec", SOURCE, "the librte_ipsec timer").and_then(|bin| {
        let bin = bin.display().to_string();
        with_first_pmd(|pmd| run(&bin, pmd, core, sizes, packets, stop))
    });
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn run(
    bin: &str,
    pmd: &str,
    core: usize,
    sizes: &[usize],
    packets: u64,
    stop: &dyn Fn() -> bool,
) -> Result<EspRun, String> {
    let sizes_arg = sizes.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(",");
    let vdev = format!("{pmd}0");
    let out = run_dpdk_app_with(
        bin,
        "dpdk-dev",
        &core.to_string(),
        &["--vdev", &vdev],
        1024,
        &[
            ("SFCLAB_IPSEC_PACKETS", &packets.to_string()),
            ("SFCLAB_IPSEC_SIZES", &sizes_arg),
        ],
        &[],
        stop,
    )?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "the librte_ipsec timer failed: {}",
            String::from_utf8_lossy(&out.stderr).trim().lines().last().unwrap_or("")
        ));
    }
    let run = parse(&text)?;
    if run.sizes.len() != sizes.len() {
        return Err(format!(
            "the librte_ipsec timer printed {} of {} sizes",
            run.sizes.len(),
            sizes.len()
        ));
    }
    Ok(run)
}

/// Reads `frame <hex>`, `packet <hex>` and `esp-encrypt <bytes> <cycles> <packets>
/// <failed> <pmd>` lines (the EAL's skipped); a packet ESP failed or left the wrong
/// length is an error, not a figure.
pub fn parse(text: &str) -> Result<EspRun, String> {
    let hex = |h: &str| -> Result<Vec<u8>, String> {
        (0..h.len() / 2)
            .map(|i| u8::from_str_radix(h.get(2 * i..2 * i + 2).unwrap_or("?"), 16))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("the librte_ipsec timer printed bad hex: {e}"))
    };
    let mut run = EspRun {
        sizes: Vec::new(),
        first_frame: Vec::new(),
        first_packet: Vec::new(),
    };
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w[..] {
            ["frame", h] => run.first_frame = hex(h)?,
            ["packet", h] => run.first_packet = hex(h)?,
            ["esp-encrypt", bytes, cycles, packets, failed, pmd] => {
                let bad = |e: &dyn std::fmt::Display| format!("the librte_ipsec timer printed {line:?}: {e}");
                if failed != "0" {
                    return Err(format!(
                        "DPDK's ESP failed {failed} of {packets} packets of {bytes} bytes"
                    ));
                }
                run.sizes.push(EspPerf {
                    bytes: bytes.parse().map_err(|e| bad(&e))?,
                    cycles_per_packet: cycles.parse().map_err(|e| bad(&e))?,
                    packets: packets.parse().map_err(|e| bad(&e))?,
                    pmd: pmd.to_string(),
                });
            }
            _ => {}
        }
    }
    Ok(run)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_its_lines_skips_the_eal_and_refuses_failed_packets() {
        let text = "EAL: Detected CPU lcores: 2\nframe 0a0b\npacket ff00\nesp-encrypt 64 218.5 2000 0 crypto_aesni_gcm\nesp-encrypt 1420 958.0 2000 0 crypto_aesni_gcm\n";
        let r = parse(text).unwrap();
        assert_eq!((r.first_frame, r.first_packet), (vec![10, 11], vec![255, 0]));
        assert_eq!(r.sizes.len(), 2);
        assert_eq!((r.sizes[1].bytes, r.sizes[1].cycles_per_packet), (1420, 958.0));
        let e = parse("esp-encrypt 64 218.5 2000 3 crypto_aesni_gcm\n").unwrap_err();
        assert!(e.contains("failed 3 of 2000"), "{e}");
        assert!(parse("frame 0g\n").is_err());
    }

    #[test]
    #[ignore = "needs a C compiler, pkg-config and libdpdk-dev (CI installs them)"]
    fn librte_ipsec_is_timed_when_installed() {
        let r = esp_outbound(0, &[64, 1420], 50_000, &|| false).unwrap();
        assert_eq!(r.sizes.iter().map(|s| s.bytes).collect::<Vec<_>>(), [64, 1420]);
        for s in &r.sizes {
            assert!(s.cycles_per_packet > 10.0 && s.cycles_per_packet < 1e6, "{s:?}");
            assert!(s.packets >= 50_000, "{s:?}");
        }
        assert_eq!(r.first_frame.len(), 14 + 64);
        // Outer IPv4, ESP header, IV, the datagram padded with its 2-byte trailer, ICV.
        assert_eq!(r.first_packet.len(), 14 + 20 + 8 + 8 + 68 + 16);
        assert_eq!(&r.first_packet[14 + 20..14 + 28], &[0, 0, 0x10, 0, 0, 0, 0, 1]);
    }
}
