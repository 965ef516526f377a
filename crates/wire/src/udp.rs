//! UDP (RFC 768).

use crate::checksum;
use zerocopy::network_endian::U16;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The 8-byte UDP header.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct UdpHeader {
    pub src_port: U16,
    pub dst_port: U16,
    pub len: U16,
    pub checksum: U16,
}

crate::header_view!(UdpHeader);

impl UdpHeader {
    /// Computes the checksum of `segment` (header + payload, checksum field ignored)
    /// over the pseudo-header sum `pseudo`. A computed 0 is sent as 0xffff (RFC 768).
    /// Returns 0 when `segment` is shorter than a UDP header.
    pub fn compute_checksum(pseudo: u32, segment: &[u8]) -> u16 {
        let Some(&[hi, lo]) = segment.get(6..8) else {
            return 0;
        };
        let stored = u16::from_be_bytes([hi, lo]);
        // Remove the stored checksum from the sum rather than copying the segment.
        let acc = checksum::sum(pseudo, segment) + u32::from(!stored);
        match !checksum::fold(acc) {
            0 => 0xffff,
            c => c,
        }
    }

    /// True when the checksum verifies, or is 0 (absent; allowed over IPv4 only).
    pub fn checksum_ok(pseudo: u32, segment: &[u8], zero_allowed: bool) -> bool {
        let Some(&[hi, lo]) = segment.get(6..8) else {
            return false;
        };
        let stored = u16::from_be_bytes([hi, lo]);
        if stored == 0 {
            return zero_allowed;
        }
        checksum::fold(checksum::sum(pseudo, segment)) == 0xffff
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::{pseudo_header_v4, pseudo_header_v6};
    use etherparse::PacketBuilder;

    #[test]
    fn v4_checksum_agrees_with_etherparse() {
        let mut out = Vec::new();
        PacketBuilder::ipv4([198, 18, 0, 1], [198, 19, 0, 1], 64)
            .udp(1024, 2048)
            .write(&mut out, b"sfclab payload")
            .unwrap();
        let seg = &out[20..];
        let pseudo = pseudo_header_v4([198, 18, 0, 1], [198, 19, 0, 1], 17, seg.len() as u16);
        let (hdr, payload) = UdpHeader::parse(seg).unwrap();
        assert_eq!(payload, b"sfclab payload");
        assert_eq!(UdpHeader::compute_checksum(pseudo, seg), hdr.checksum.get());
        assert!(UdpHeader::checksum_ok(pseudo, seg, true));
        let mut broken = seg.to_vec();
        broken[10] ^= 1;
        assert!(!UdpHeader::checksum_ok(pseudo, &broken, true));
    }

    #[test]
    fn v6_checksum_agrees_with_etherparse() {
        let src = [0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let dst = [0x20, 0x01, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1];
        let mut out = Vec::new();
        PacketBuilder::ipv6(src, dst, 64)
            .udp(7, 9)
            .write(&mut out, &[0x5a; 33])
            .unwrap();
        let seg = &out[40..];
        let pseudo = pseudo_header_v6(src, dst, 17, seg.len() as u32);
        let (hdr, _) = UdpHeader::parse(seg).unwrap();
        assert_eq!(UdpHeader::compute_checksum(pseudo, seg), hdr.checksum.get());
        assert!(UdpHeader::checksum_ok(pseudo, seg, false));
    }
}
