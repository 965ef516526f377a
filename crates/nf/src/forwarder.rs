//! `forwarder`: rewrites the destination and source MAC of every frame, as the L2
//! forwarders of the papers (and `testpmd --forward-mode=mac`) do.
//!
//! Keys: `dst_mac` (default `02:00:00:00:00:02`), `src_mac` (default `02:00:00:00:00:01`).
//! Drops: `malformed` (frame shorter than an Ethernet header).

use serde::Deserialize;
use sfclab_core::{BatchView, Context, DropReason, NetworkFunction, Verdicts};
use sfclab_wire::{EthernetHeader, MacAddr};

use crate::ConfigError;

pub struct Forwarder {
    /// Destination then source MAC as the first 12 bytes of a little-endian u128.
    macs_wide: u128,
}

impl NetworkFunction for Forwarder {
    fn kind(&self) -> &'static str {
        TYPE.kind
    }

    #[inline]
    fn process(&mut self, _ctx: &mut Context<'_>, mut batch: BatchView<'_>, verdicts: &mut Verdicts) {
        // Frames of 16 bytes or more (all real ones) take one 16-byte load and store:
        // the MACs blended over the first 16 bytes, EtherType and the next 2 bytes kept.
        // Measured 1.0 cycle/packet per hop against 1.7 for two narrower stores.
        let (macs, keep) = (self.macs_wide, KEEP_AFTER_MACS);
        for (i, p) in batch.iter_mut().enumerate() {
            if let Some(head) = p.head_mut::<16>() {
                let v = u128::from_le_bytes(*head);
                *head = ((v & keep) | macs).to_le_bytes();
            } else if let Some(hdr) = p.head_mut::<{ EthernetHeader::LEN }>() {
                hdr[..12].copy_from_slice(&self.macs_wide.to_le_bytes()[..12]);
            } else {
                verdicts.drop(i, DropReason::MALFORMED);
            }
        }
    }
}

/// Little-endian mask of bytes 12..16 of a frame (EtherType and what follows).
const KEEP_AFTER_MACS: u128 = !((1u128 << 96) - 1);

/// Registers `forwarder`.
pub const TYPE: crate::NfType = crate::NfType {
    kind: "forwarder",
    about: "rewrites destination and source MAC, as testpmd's mac mode does",
    stateless: true,
    cost_neutral: &["dst_mac", "src_mac"],
    files: &[],
    wraps: None,
    schema: || schemars::schema_for!(ForwarderConfig),
    drops_all_by_default: None,
    fixes: &[],
    build: |v| Ok(Box::new(Forwarder::new(&crate::typed(v)?)?)),
};

#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForwarderConfig {
    /// Destination MAC written into every frame (default 02:00:00:00:00:02).
    pub dst_mac: Option<String>,
    /// Source MAC written into every frame (default 02:00:00:00:00:01).
    pub src_mac: Option<String>,
}

impl Forwarder {
    pub const DEFAULT_DST: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);
    pub const DEFAULT_SRC: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);

    pub fn new(cfg: &ForwarderConfig) -> Result<Forwarder, ConfigError> {
        let parse = |key, v: &Option<String>, default| match v {
            None => Ok(default),
            Some(s) => s.parse::<MacAddr>().map_err(|e| ConfigError::new(key, e)),
        };
        let dst = parse("dst_mac", &cfg.dst_mac, Self::DEFAULT_DST)?;
        let src = parse("src_mac", &cfg.src_mac, Self::DEFAULT_SRC)?;
        Ok(Forwarder::with_macs(dst, src))
    }

    pub fn with_macs(dst: MacAddr, src: MacAddr) -> Forwarder {
        let mut bytes = [0u8; 16];
        bytes[..6].copy_from_slice(&dst.0);
        bytes[6..12].copy_from_slice(&src.0);
        Forwarder {
            macs_wide: u128::from_le_bytes(bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{run_one_batch, udp_frame};
    use sfclab_core::Verdict;

    #[test]
    fn rewrites_both_macs_and_nothing_else() {
        let cfg = ForwarderConfig {
            dst_mac: Some("02:11:22:33:44:55".into()),
            src_mac: Some("02:66:77:88:99:aa".into()),
        };
        let mut nf = Forwarder::new(&cfg).unwrap();
        let frame = udp_frame();
        let (out, verdicts) = run_one_batch(&mut nf, &[frame.clone(), frame.clone()]);
        assert_eq!(verdicts, vec![Verdict::Continue; 2]);
        for f in out {
            assert_eq!(&f[..6], &[2, 0x11, 0x22, 0x33, 0x44, 0x55]);
            assert_eq!(&f[6..12], &[2, 0x66, 0x77, 0x88, 0x99, 0xaa]);
            assert_eq!(&f[12..], &frame[12..], "payload and EtherType untouched");
        }
    }

    #[test]
    fn short_frames_are_dropped_as_malformed() {
        let mut nf = Forwarder::new(&ForwarderConfig::default()).unwrap();
        let (_, v) = run_one_batch(&mut nf, &[vec![0; 13], udp_frame(), vec![]]);
        assert_eq!(
            v,
            vec![
                Verdict::Drop(DropReason::MALFORMED),
                Verdict::Continue,
                Verdict::Drop(DropReason::MALFORMED)
            ]
        );
    }

    #[test]
    fn bad_mac_names_the_key() {
        let cfg = ForwarderConfig {
            src_mac: Some("02:00".into()),
            ..Default::default()
        };
        let err = Forwarder::new(&cfg).err().unwrap();
        assert_eq!(err.key, "src_mac");
        assert!(err.reason.contains("02:00"));
    }
}
