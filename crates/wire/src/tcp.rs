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
    pub const PSH: u16 = 0x008;
    pub const ACK: u16 = 0x010;
    pub const URG: u16 = 0x020;
    pub const ECE: u16 = 0x040;
    pub const CWR: u16 = 0x080;

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

    /// The options of a checked `segment` (one whose data offset `check` accepted; an
    /// unchecked one yields no options past its end).
    pub fn options(segment: &[u8]) -> TcpOptions<'_> {
        let hlen = segment.get(12).map_or(0, |b| usize::from(b >> 4) * 4);
        TcpOptions {
            bytes: segment.get(Self::LEN..hlen).unwrap_or(&[]),
        }
    }
}

/// One TCP option (RFC 9293 §3.2, RFC 7323, RFC 2018).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpOption<'a> {
    Nop,
    MaxSegmentSize(u16),
    WindowScale(u8),
    SackPermitted,
    /// SACK blocks as (left edge, right edge) pairs, raw: 8 bytes each.
    Sack(&'a [u8]),
    Timestamps {
        value: u32,
        echo: u32,
    },
    Unknown {
        kind: u8,
        data: &'a [u8],
    },
}

impl TcpOption<'_> {
    /// Writes the option into the front of `out`; returns its length.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize, WireError> {
        let mut put = |bytes: &[u8]| {
            out.get_mut(..bytes.len())
                .ok_or(WireError::Truncated)?
                .copy_from_slice(bytes);
            Ok(bytes.len())
        };
        match *self {
            TcpOption::Nop => put(&[1]),
            TcpOption::MaxSegmentSize(m) => put(&[2, 4, (m >> 8) as u8, m as u8]),
            TcpOption::WindowScale(s) => put(&[3, 3, s]),
            TcpOption::SackPermitted => put(&[4, 2]),
            TcpOption::Timestamps { value, echo } => {
                let (v, e) = (value.to_be_bytes(), echo.to_be_bytes());
                put(&[8, 10, v[0], v[1], v[2], v[3], e[0], e[1], e[2], e[3]])
            }
            TcpOption::Sack(blocks) | TcpOption::Unknown { data: blocks, .. } => {
                let kind = match *self {
                    TcpOption::Unknown { kind, .. } => kind,
                    _ => 5,
                };
                let len = u8::try_from(blocks.len() + 2).map_err(|_| WireError::BadHeader)?;
                let out = out.get_mut(..usize::from(len)).ok_or(WireError::Truncated)?;
                out[0] = kind;
                out[1] = len;
                out[2..].copy_from_slice(blocks);
                Ok(usize::from(len))
            }
        }
    }
}

/// The options of a TCP header, in order; ends at end-of-list or the header's end.
/// A malformed option (a length below 2, past the header, or wrong for its kind) is
/// yielded as an error and ends the walk.
pub struct TcpOptions<'a> {
    bytes: &'a [u8],
}

impl<'a> Iterator for TcpOptions<'a> {
    type Item = Result<TcpOption<'a>, WireError>;

    fn next(&mut self) -> Option<Self::Item> {
        let (&kind, rest) = self.bytes.split_first()?;
        match kind {
            0 => {
                self.bytes = &[];
                return None;
            }
            1 => {
                self.bytes = rest;
                return Some(Ok(TcpOption::Nop));
            }
            _ => {}
        }
        let len = rest.first().map_or(0, |&l| usize::from(l));
        if len < 2 || len > self.bytes.len() {
            self.bytes = &[];
            return Some(Err(WireError::BadHeader));
        }
        let data = &self.bytes[2..len];
        self.bytes = &self.bytes[len..];
        let option = match (kind, data.len()) {
            (2, 2) => TcpOption::MaxSegmentSize(u16::from_be_bytes([data[0], data[1]])),
            (3, 1) => TcpOption::WindowScale(data[0]),
            (4, 0) => TcpOption::SackPermitted,
            (5, n) if n > 0 && n % 8 == 0 => TcpOption::Sack(data),
            (8, 8) => TcpOption::Timestamps {
                value: u32::from_be_bytes([data[0], data[1], data[2], data[3]]),
                echo: u32::from_be_bytes([data[4], data[5], data[6], data[7]]),
            },
            (2..=5 | 8, _) => {
                self.bytes = &[];
                return Some(Err(WireError::BadHeader));
            }
            _ => TcpOption::Unknown { kind, data },
        };
        Some(Ok(option))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::{l4_checksum, pseudo_header_v4};
    use crate::hex;
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

    /// A Linux SYN's header (data offset 10): MSS 1460, SACK permitted, timestamps,
    /// NOP, window scale 7.
    const LINUX_SYN: &str = "9c40 0050 00003039 00000000 a002 faf0 0000 0000 \
                             020405b4 0402 080a 0001e240 00000000 01 030307";

    #[test]
    fn reads_a_linux_syn_s_options_and_writes_them_back() {
        let seg = hex(LINUX_SYN);
        let (hdr, payload) = TcpHeader::check(&seg).unwrap();
        assert_eq!(hdr.header_len(), 40);
        assert_eq!(hdr.flags(), TcpHeader::SYN);
        assert!(payload.is_empty());
        let opts: Vec<_> = TcpHeader::options(&seg).map(Result::unwrap).collect();
        let want = [
            TcpOption::MaxSegmentSize(1460),
            TcpOption::SackPermitted,
            TcpOption::Timestamps {
                value: 123_456,
                echo: 0,
            },
            TcpOption::Nop,
            TcpOption::WindowScale(7),
        ];
        assert_eq!(opts, want);
        let mut out = [0u8; 20];
        let mut at = 0;
        for o in &want {
            at += o.emit(&mut out[at..]).unwrap();
        }
        assert_eq!(&out[..at], &seg[20..]);
    }

    #[test]
    fn malformed_options_end_the_walk_with_an_error() {
        let mut seg = hex(LINUX_SYN);
        seg[21] = 1; // MSS length 1
        let mut opts = TcpHeader::options(&seg);
        assert_eq!(opts.next(), Some(Err(WireError::BadHeader)));
        assert_eq!(opts.next(), None);
        let mut seg = hex(LINUX_SYN);
        seg[21] = 3; // MSS with a 1-byte value
        assert_eq!(TcpHeader::options(&seg).next(), Some(Err(WireError::BadHeader)));
        let mut seg = hex(LINUX_SYN);
        seg[38] = 9; // window scale's length past the header
        assert!(TcpHeader::options(&seg).any(|o| o.is_err()));
        let mut seg = hex(LINUX_SYN);
        seg[24] = 0; // end of list after MSS
        assert_eq!(TcpHeader::options(&seg).count(), 1);
        assert_eq!(TcpHeader::options(&seg[..10]).count(), 0);
    }
}
