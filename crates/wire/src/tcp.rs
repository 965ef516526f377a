//! TCP (RFC 9293) fixed header.

use crate::WireError;
use zerocopy::network_endian::{U16, U32};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

/// The fixed 20-byte TCP header (options follow when `data_offset > 5`).
#[derive(Debug, Clone, Copy, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
pub struct TcpHeader {
    pub src_port: U16,
    pub dst_port: U16,
    pub seq: U32,
    pub ack: U32,
    pub offset_flags: U16,
    pub window: U16,
    pub checksum: U16,
    pub urgent: U16,
}

crate::header_view!(TcpHeader);

impl TcpHeader {
    pub const FIN: u16 = 0x001;
    pub const SYN: u16 = 0x002;
    pub const RST: u16 = 0x004;
    pub const ACK: u16 = 0x010;

    /// Header length in bytes, options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.offset_flags.get() >> 12) * 4
    }

    pub fn flags(&self) -> u16 {
        self.offset_flags.get() & 0x01ff
    }

    /// Checks the data offset against `segment`; returns the header and the payload.
    pub fn check(segment: &[u8]) -> Result<(&TcpHeader, &[u8]), WireError> {
        let (hdr, _) = Self::parse(segment)?;
        let hlen = hdr.header_len();
        if hlen < Self::LEN {
            return Err(WireError::BadHeader);
        }
        if segment.len() < hlen {
            return Err(WireError::Truncated);
        }
        Ok((hdr, &segment[hlen..]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::{l4_checksum, pseudo_header_v4};
    use etherparse::PacketBuilder;

    #[test]
    fn agrees_with_etherparse() {
        let mut out = Vec::new();
        PacketBuilder::ipv4([198, 18, 0, 1], [198, 19, 0, 2], 64)
            .tcp(40000, 80, 12345, 1000)
            .syn()
            .write(&mut out, b"GET /")
            .unwrap();
        let seg = &out[20..];
        let (hdr, payload) = TcpHeader::check(seg).unwrap();
        assert_eq!(hdr.dst_port.get(), 80);
        assert_eq!(hdr.seq.get(), 12345);
        assert_eq!(hdr.flags() & TcpHeader::SYN, TcpHeader::SYN);
        assert_eq!(payload, b"GET /");
        let pseudo = pseudo_header_v4([198, 18, 0, 1], [198, 19, 0, 2], 6, seg.len() as u16);
        let mut zeroed = seg.to_vec();
        zeroed[16] = 0;
        zeroed[17] = 0;
        assert_eq!(l4_checksum(pseudo, &zeroed), hdr.checksum.get());
        let mut bad = seg.to_vec();
        bad[12] = 0x40; // data offset 4 words
        assert_eq!(TcpHeader::check(&bad).unwrap_err(), WireError::BadHeader);
    }
}
