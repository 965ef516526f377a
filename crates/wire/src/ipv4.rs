//! IPv4 (RFC 791).

use crate::WireError;
use crate::checksum;
use zerocopy::network_endian::U16;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// IP protocol numbers sfclab looks at (shared by IPv4 `protocol` and IPv6 `next_header`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpProtocol {
    Icmp,
    Tcp,
    Udp,
    Esp,
    Icmpv6,
    Unknown(u8),
}

impl From<u8> for IpProtocol {
    fn from(v: u8) -> Self {
        match v {
            1 => IpProtocol::Icmp,
            6 => IpProtocol::Tcp,
            17 => IpProtocol::Udp,
            50 => IpProtocol::Esp,
            58 => IpProtocol::Icmpv6,
            n => IpProtocol::Unknown(n),
        }
    }
}

impl From<IpProtocol> for u8 {
    fn from(v: IpProtocol) -> u8 {
        match v {
            IpProtocol::Icmp => 1,
            IpProtocol::Tcp => 6,
            IpProtocol::Udp => 17,
            IpProtocol::Esp => 50,
            IpProtocol::Icmpv6 => 58,
            IpProtocol::Unknown(n) => n,
        }
    }
}

/// The fixed 20-byte IPv4 header (options follow when `ihl > 5`).
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct Ipv4Header {
    pub version_ihl: u8,
    pub dscp_ecn: u8,
    pub total_len: U16,
    pub ident: U16,
    pub flags_frag: U16,
    pub ttl: u8,
    pub protocol: u8,
    pub checksum: U16,
    pub src: [u8; 4],
    pub dst: [u8; 4],
}

crate::header_view!(Ipv4Header);

impl Ipv4Header {
    pub fn version(&self) -> u8 {
        self.version_ihl >> 4
    }

    /// Header length in bytes, options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.version_ihl & 0x0f) * 4
    }

    pub fn protocol(&self) -> IpProtocol {
        IpProtocol::from(self.protocol)
    }

    /// Checks version, IHL and total length against `packet` (the bytes from this header on)
    /// and returns the header length and the L4 bytes, trimmed to `total_len`
    /// (Ethernet padding excluded).
    pub fn check(packet: &[u8]) -> Result<(&Ipv4Header, usize, &[u8]), WireError> {
        let (hdr, _) = Self::parse(packet)?;
        let hlen = hdr.header_len();
        let total = usize::from(hdr.total_len.get());
        if hdr.version() != 4 || hlen < Self::LEN || total < hlen {
            return Err(WireError::BadHeader);
        }
        if packet.len() < total {
            return Err(WireError::Truncated);
        }
        Ok((hdr, hlen, &packet[hlen..total]))
    }

    /// Recomputes the header checksum over `header` (options included).
    pub fn fill_checksum(header: &mut [u8]) {
        header[10] = 0;
        header[11] = 0;
        let c = checksum::checksum(header);
        header[10..12].copy_from_slice(&c.to_be_bytes());
    }

    /// True when the header (options included) sums to 0xffff.
    pub fn checksum_ok(header: &[u8]) -> bool {
        checksum::fold(checksum::sum(0, header)) == 0xffff
    }

    /// Decrements the TTL and updates the checksum incrementally (RFC 1624); returns the new TTL.
    #[inline]
    pub fn decrement_ttl(&mut self) -> u8 {
        let old = u16::from_be_bytes([self.ttl, self.protocol]);
        self.ttl = self.ttl.wrapping_sub(1);
        let new = u16::from_be_bytes([self.ttl, self.protocol]);
        self.checksum.set(checksum::update16(self.checksum.get(), old, new));
        self.ttl
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    fn udp_packet() -> Vec<u8> {
        let mut out = Vec::new();
        PacketBuilder::ipv4([198, 18, 0, 1], [198, 19, 0, 1], 64)
            .udp(1024, 2048)
            .write(&mut out, &[0xab; 18])
            .unwrap();
        out
    }

    #[test]
    fn agrees_with_etherparse() {
        let bytes = udp_packet();
        let (hdr, hlen, l4) = Ipv4Header::check(&bytes).unwrap();
        assert_eq!(hlen, 20);
        assert_eq!(hdr.protocol(), IpProtocol::Udp);
        assert_eq!(hdr.src, [198, 18, 0, 1]);
        assert_eq!(l4.len(), 8 + 18);
        assert!(Ipv4Header::checksum_ok(&bytes[..20]));
        let mut copy = bytes.clone();
        Ipv4Header::fill_checksum(&mut copy[..20]);
        assert_eq!(copy, bytes);
    }

    #[test]
    fn ttl_decrement_keeps_checksum_valid() {
        let mut bytes = udp_packet();
        let (hdr, _) = Ipv4Header::parse_mut(&mut bytes).unwrap();
        assert_eq!(hdr.decrement_ttl(), 63);
        assert!(Ipv4Header::checksum_ok(&bytes[..20]));
        let reparsed = etherparse::Ipv4HeaderSlice::from_slice(&bytes).unwrap();
        assert_eq!(reparsed.ttl(), 63);
        assert_eq!(reparsed.header_checksum(), reparsed.to_header().calc_header_checksum());
    }

    #[test]
    fn rejects_inconsistent_lengths() {
        let bytes = udp_packet();
        let mut bad = bytes.clone();
        bad[0] = 0x44; // IHL 4 < 5
        assert_eq!(Ipv4Header::check(&bad).unwrap_err(), WireError::BadHeader);
        let mut bad = bytes.clone();
        bad[0] = 0x65; // version 6
        assert_eq!(Ipv4Header::check(&bad).unwrap_err(), WireError::BadHeader);
        assert_eq!(Ipv4Header::check(&bytes[..30]).unwrap_err(), WireError::Truncated);
        assert_eq!(Ipv4Header::check(&bytes[..10]).unwrap_err(), WireError::Truncated);
    }
}
