//! ICMP error messages a router sends (RFC 792 / RFC 1812 for IPv4, RFC 4443 for IPv6):
//! written whole into a buffer, checksums included, quoting the packet that caused them.

use crate::checksum;
use crate::ipv4::Ipv4Header;

/// IPv4 ICMP types and codes routers send.
pub mod v4 {
    pub const DEST_UNREACHABLE: u8 = 3;
    pub const TIME_EXCEEDED: u8 = 11;
    /// Destination unreachable: net unreachable (no route).
    pub const NET_UNREACHABLE: u8 = 0;
    /// Time exceeded: TTL exceeded in transit.
    pub const TTL_EXCEEDED: u8 = 0;
}

/// ICMPv6 types and codes routers send.
pub mod v6 {
    pub const DEST_UNREACHABLE: u8 = 1;
    pub const TIME_EXCEEDED: u8 = 3;
    pub const NO_ROUTE: u8 = 0;
    pub const HOP_LIMIT_EXCEEDED: u8 = 0;
    /// Next header value of ICMPv6.
    pub const NEXT_HEADER: u8 = 58;
}

/// Bytes of an IPv4 ICMP error quoting the IP header and first 8 payload bytes of the
/// offending datagram (RFC 792), IP header included: at most 20 + 8 + 60 + 8.
pub const MAX_V4_ERROR: usize = 20 + 8 + 60 + 8;

/// Writes an IPv4 ICMP error from `src` to `dst` into `out` (IP header, ICMP header, then
/// the offending datagram's IP header and first 8 bytes of its payload, as RFC 792 asks).
/// Returns the bytes written, or `None` when `offending` is not an IPv4 header or `out`
/// is too small.
pub fn error_v4(out: &mut [u8], src: [u8; 4], dst: [u8; 4], ty: u8, code: u8, offending: &[u8]) -> Option<usize> {
    let (hdr, _) = Ipv4Header::parse(offending).ok()?;
    let quote = (hdr.header_len() + 8).min(offending.len());
    let total = 20 + 8 + quote;
    let out = out.get_mut(..total)?;
    out[..20].copy_from_slice(&[
        0x45,
        0,
        (total >> 8) as u8,
        total as u8,
        0,
        0,
        0,
        0,
        64,
        1,
        0,
        0,
        src[0],
        src[1],
        src[2],
        src[3],
        dst[0],
        dst[1],
        dst[2],
        dst[3],
    ]);
    Ipv4Header::fill_checksum(&mut out[..20]);
    out[20..28].copy_from_slice(&[ty, code, 0, 0, 0, 0, 0, 0]);
    out[28..].copy_from_slice(&offending[..quote]);
    let c = checksum::checksum(&out[20..]);
    out[22..24].copy_from_slice(&c.to_be_bytes());
    Some(total)
}

/// ICMPv6 errors quote as much of the offending packet as fits in the minimum MTU.
const V6_MIN_MTU: usize = 1280;

/// Writes an ICMPv6 error from `src` to `dst` into `out` (IPv6 header, ICMPv6 header,
/// then as much of the offending packet as keeps the whole within 1280 bytes, RFC 4443
/// §2.4). Returns the bytes written, or `None` when `out` is too small.
pub fn error_v6(out: &mut [u8], src: [u8; 16], dst: [u8; 16], ty: u8, code: u8, offending: &[u8]) -> Option<usize> {
    let quote = offending.len().min(V6_MIN_MTU - 48).min(out.len().checked_sub(48)?);
    let total = 48 + quote;
    let out = &mut out[..total];
    let payload = (8 + quote) as u16;
    out[..8].copy_from_slice(&[0x60, 0, 0, 0, (payload >> 8) as u8, payload as u8, v6::NEXT_HEADER, 64]);
    out[8..24].copy_from_slice(&src);
    out[24..40].copy_from_slice(&dst);
    out[40..48].copy_from_slice(&[ty, code, 0, 0, 0, 0, 0, 0]);
    out[48..].copy_from_slice(&offending[..quote]);
    let pseudo = checksum::pseudo_header_v6(src, dst, v6::NEXT_HEADER, u32::from(payload));
    let c = checksum::l4_checksum(pseudo, &out[40..]);
    out[42..44].copy_from_slice(&c.to_be_bytes());
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{Icmpv4Type, Icmpv6Type, NetSlice, SlicedPacket, TransportSlice};

    fn offending_v4() -> Vec<u8> {
        let mut out = Vec::new();
        etherparse::PacketBuilder::ipv4([198, 18, 0, 1], [203, 0, 113, 9], 1)
            .udp(1024, 5001)
            .write(&mut out, &[0xab; 30])
            .unwrap();
        out
    }

    /// etherparse, an independent parser, reads what we write, checksums included.
    #[test]
    fn v4_time_exceeded_quotes_header_and_eight_bytes() {
        let offending = offending_v4();
        let mut buf = [0u8; MAX_V4_ERROR];
        let n = error_v4(
            &mut buf,
            [192, 0, 2, 254],
            [198, 18, 0, 1],
            v4::TIME_EXCEEDED,
            v4::TTL_EXCEEDED,
            &offending,
        )
        .unwrap();
        assert_eq!(n, 20 + 8 + 20 + 8);
        let p = SlicedPacket::from_ip(&buf[..n]).unwrap();
        let Some(NetSlice::Ipv4(ip)) = &p.net else { panic!() };
        assert_eq!(ip.header().source(), [192, 0, 2, 254]);
        assert!(Ipv4Header::checksum_ok(&buf[..20]));
        let Some(TransportSlice::Icmpv4(icmp)) = &p.transport else {
            panic!()
        };
        assert!(matches!(icmp.icmp_type(), Icmpv4Type::TimeExceeded(_)));
        assert_eq!(checksum::fold(checksum::sum(0, &buf[20..n])), 0xffff, "ICMP checksum");
        assert_eq!(&buf[28..n], &offending[..28]);
        assert!(error_v4(&mut [0u8; 30], [0; 4], [0; 4], 3, 0, &offending).is_none());
        assert!(error_v4(&mut [0u8; MAX_V4_ERROR], [0; 4], [0; 4], 3, 0, &[0x45, 0]).is_none());
    }

    #[test]
    fn v6_error_checksums_and_fits_the_minimum_mtu() {
        let src: [u8; 16] = "2001:db8::fe".parse::<std::net::Ipv6Addr>().unwrap().octets();
        let dst: [u8; 16] = "2001:2::1".parse::<std::net::Ipv6Addr>().unwrap().octets();
        let mut offending = Vec::new();
        etherparse::PacketBuilder::ipv6(dst, src, 1)
            .udp(1, 2)
            .write(&mut offending, &[7u8; 1400])
            .unwrap();
        let mut buf = vec![0u8; 1600];
        let n = error_v6(
            &mut buf,
            src,
            dst,
            v6::TIME_EXCEEDED,
            v6::HOP_LIMIT_EXCEEDED,
            &offending,
        )
        .unwrap();
        assert_eq!(n, 1280);
        let p = SlicedPacket::from_ip(&buf[..n]).unwrap();
        let Some(TransportSlice::Icmpv6(icmp)) = &p.transport else {
            panic!()
        };
        assert!(matches!(icmp.icmp_type(), Icmpv6Type::TimeExceeded(_)));
        let pseudo = checksum::pseudo_header_v6(src, dst, 58, (n - 40) as u32);
        assert_eq!(checksum::fold(checksum::sum(pseudo, &buf[40..n])), 0xffff);
    }
}
