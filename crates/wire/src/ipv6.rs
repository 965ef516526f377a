//! IPv6 fixed header (RFC 8200). Extension headers are not walked here.

use crate::WireError;
use crate::ipv4::IpProtocol;
use zerocopy::network_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The fixed 40-byte IPv6 header.
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct Ipv6Header {
    pub version_class_flow: U32,
    pub payload_len: U16,
    pub next_header: u8,
    pub hop_limit: u8,
    pub src: [u8; 16],
    pub dst: [u8; 16],
}

crate::header_view!(Ipv6Header);

impl Ipv6Header {
    pub fn version(&self) -> u8 {
        (self.version_class_flow.get() >> 28) as u8
    }

    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.next_header)
    }

    /// Checks the version and payload length against `packet`; returns the payload,
    /// trimmed to `payload_len`.
    pub fn check(packet: &[u8]) -> Result<(&Ipv6Header, &[u8]), WireError> {
        let (hdr, rest) = Self::parse(packet)?;
        if hdr.version() != 6 {
            return Err(WireError::BadHeader);
        }
        let len = usize::from(hdr.payload_len.get());
        if rest.len() < len {
            return Err(WireError::Truncated);
        }
        Ok((hdr, &rest[..len]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::PacketBuilder;

    #[test]
    fn agrees_with_etherparse() {
        let src = [0x20, 0x01, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let dst = [0x20, 0x01, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1];
        let mut out = Vec::new();
        PacketBuilder::ipv6(src, dst, 64)
            .udp(1, 2)
            .write(&mut out, &[1, 2, 3])
            .unwrap();
        let (hdr, payload) = Ipv6Header::check(&out).unwrap();
        assert_eq!(hdr.version(), 6);
        assert_eq!(hdr.next_header(), IpProtocol::Udp);
        assert_eq!(hdr.hop_limit, 64);
        assert_eq!(hdr.src, src);
        assert_eq!(payload.len(), 11);
        assert_eq!(Ipv6Header::check(&out[..45]).unwrap_err(), WireError::Truncated);
        out[0] = 0x40;
        assert_eq!(Ipv6Header::check(&out).unwrap_err(), WireError::BadHeader);
    }
}
