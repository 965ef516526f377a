//! IPv6 (RFC 8200): the fixed header and a bounded walk over the extension headers to
//! the upper-layer header.

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

    /// Checks the header as [`check`](Self::check) does, then walks the extension
    /// headers (hop-by-hop, routing, fragment, destination options, AH, mobility, HIP,
    /// shim6) to the upper-layer header. At most [`MAX_EXTENSIONS`] are walked, so a
    /// crafted chain costs bounded work; more, a hop-by-hop header anywhere but first,
    /// or a header that runs past the payload is an error.
    pub fn walk(packet: &[u8]) -> Result<(&Ipv6Header, Ipv6Walk), WireError> {
        let (hdr, payload) = Self::check(packet)?;
        let mut next = hdr.next_header;
        let mut at = 0usize;
        let mut fragment = None;
        for k in 0..=MAX_EXTENSIONS {
            let len = match next {
                HOP_BY_HOP if k > 0 => return Err(WireError::BadHeader),
                HOP_BY_HOP | ROUTING | DESTINATION_OPTIONS | MOBILITY | HIP | SHIM6 => {
                    8 + 8 * usize::from(*payload.get(at + 1).ok_or(WireError::Truncated)?)
                }
                AUTHENTICATION => 4 * (usize::from(*payload.get(at + 1).ok_or(WireError::Truncated)?) + 2),
                FRAGMENT => {
                    let f = payload.get(at..at + 8).ok_or(WireError::Truncated)?;
                    let off_flags = u16::from_be_bytes([f[2], f[3]]);
                    fragment = Some(Ipv6Fragment {
                        offset: off_flags >> 3,
                        more: off_flags & 1 != 0,
                        ident: u32::from_be_bytes([f[4], f[5], f[6], f[7]]),
                    });
                    8
                }
                upper => {
                    return Ok((
                        hdr,
                        Ipv6Walk {
                            protocol: upper,
                            l4_offset: Self::LEN + at,
                            fragment,
                        },
                    ));
                }
            };
            if k == MAX_EXTENSIONS {
                break;
            }
            if payload.len() < at + len {
                return Err(WireError::Truncated);
            }
            next = payload[at];
            at += len;
        }
        Err(WireError::BadHeader)
    }
}

/// Extension headers [`Ipv6Header::walk`] follows before giving up.
pub const MAX_EXTENSIONS: usize = 8;

/// Next-header values of the extension headers (IANA "IPv6 Extension Header Types").
pub const HOP_BY_HOP: u8 = 0;
pub const ROUTING: u8 = 43;
pub const FRAGMENT: u8 = 44;
pub const AUTHENTICATION: u8 = 51;
pub const DESTINATION_OPTIONS: u8 = 60;
pub const MOBILITY: u8 = 135;
pub const HIP: u8 = 139;
pub const SHIM6: u8 = 140;
/// "No next header": nothing follows (returned as the protocol, with no L4 header).
pub const NO_NEXT_HEADER: u8 = 59;

/// Where the upper layer of an IPv6 packet starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Walk {
    /// The upper-layer protocol (TCP, UDP, ICMPv6, ESP, no-next-header, ...).
    pub protocol: u8,
    /// Offset of the upper-layer header from the start of the IPv6 header.
    pub l4_offset: usize,
    /// The fragment header's fields, when there is one.
    pub fragment: Option<Ipv6Fragment>,
}

impl Ipv6Walk {
    /// True when the upper-layer header is in this packet: not a later fragment, and
    /// not "no next header".
    pub fn has_l4_header(&self) -> bool {
        self.protocol != NO_NEXT_HEADER && self.fragment.is_none_or(|f| f.offset == 0)
    }
}

/// An IPv6 fragment header's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Fragment {
    /// Offset of this fragment's data, in 8-byte units.
    pub offset: u16,
    /// More fragments follow.
    pub more: bool,
    pub ident: u32,
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

    /// IPv6 header + `exts` (next-header values with their bodies) + an 8-byte UDP header.
    fn with_extensions(exts: &[(u8, Vec<u8>)]) -> Vec<u8> {
        let body: usize = exts.iter().map(|(_, b)| b.len()).sum::<usize>() + 8;
        let mut out = vec![0x60, 0, 0, 0, (body >> 8) as u8, body as u8];
        out.push(exts.first().map_or(17, |e| e.0));
        out.push(64);
        out.extend_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
        out.extend_from_slice(&[0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
        for (i, (_, b)) in exts.iter().enumerate() {
            let mut b = b.clone();
            b[0] = exts.get(i + 1).map_or(17, |e| e.0);
            out.extend_from_slice(&b);
        }
        out.extend_from_slice(&[0x04, 0x00, 0x13, 0x89, 0, 8, 0, 0]);
        out
    }

    #[test]
    fn walks_hop_by_hop_routing_fragment_and_destination_options() {
        let hbh = vec![0, 0, 5, 2, 0, 0, 1, 0]; // router alert, padN
        let routing = vec![0, 2, 4, 0, 0, 0, 0, 0]
            .into_iter()
            .chain([0u8; 16])
            .collect::<Vec<u8>>();
        let frag = vec![0, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef]; // an atomic fragment (RFC 6946)
        let dst = vec![0, 1, 1, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let p = with_extensions(&[
            (HOP_BY_HOP, hbh),
            (ROUTING, routing),
            (FRAGMENT, frag),
            (DESTINATION_OPTIONS, dst),
        ]);
        let (_, w) = Ipv6Header::walk(&p).unwrap();
        assert_eq!(w.protocol, 17);
        assert_eq!(w.l4_offset, 40 + 8 + 24 + 8 + 16);
        assert_eq!(&p[w.l4_offset..w.l4_offset + 2], &[0x04, 0x00]);
        assert_eq!(
            w.fragment,
            Some(Ipv6Fragment {
                offset: 0,
                more: false,
                ident: 0xdead_beef
            })
        );
        assert!(w.has_l4_header());
        // etherparse agrees on where the UDP header is.
        let sliced = etherparse::SlicedPacket::from_ip(&p).unwrap();
        assert!(matches!(sliced.transport, Some(etherparse::TransportSlice::Udp(_))));
    }

    #[test]
    fn later_fragments_and_no_next_header_have_no_l4() {
        let frag = vec![0, 0, 0, 0x10, 0, 0, 0, 7]; // offset 2 (units of 8), last
        let (_, w) = Ipv6Header::walk(&with_extensions(&[(FRAGMENT, frag)])).unwrap();
        assert_eq!(
            w.fragment,
            Some(Ipv6Fragment {
                offset: 2,
                more: false,
                ident: 7
            })
        );
        assert!(!w.has_l4_header());
        let first = vec![0, 0, 0, 1, 0, 0, 0, 7]; // offset 0, more fragments
        let (_, w) = Ipv6Header::walk(&with_extensions(&[(FRAGMENT, first)])).unwrap();
        assert!(w.fragment.unwrap().more && w.has_l4_header());
        let mut p = with_extensions(&[]);
        p[6] = NO_NEXT_HEADER;
        let (_, w) = Ipv6Header::walk(&p).unwrap();
        assert!(!w.has_l4_header());
    }

    #[test]
    fn refuses_misplaced_hop_by_hop_long_chains_and_overruns() {
        let opts = || vec![0, 0, 1, 4, 0, 0, 0, 0];
        let p = with_extensions(&[(DESTINATION_OPTIONS, opts()), (HOP_BY_HOP, opts())]);
        assert_eq!(Ipv6Header::walk(&p).unwrap_err(), WireError::BadHeader);
        let many: Vec<_> = (0..=MAX_EXTENSIONS).map(|_| (DESTINATION_OPTIONS, opts())).collect();
        assert_eq!(
            Ipv6Header::walk(&with_extensions(&many)).unwrap_err(),
            WireError::BadHeader
        );
        let ok: Vec<_> = (0..MAX_EXTENSIONS).map(|_| (DESTINATION_OPTIONS, opts())).collect();
        assert_eq!(Ipv6Header::walk(&with_extensions(&ok)).unwrap().1.protocol, 17);
        let mut p = with_extensions(&[(DESTINATION_OPTIONS, opts())]);
        p[41] = 200; // header length far past the payload
        assert_eq!(Ipv6Header::walk(&p).unwrap_err(), WireError::Truncated);
    }
}
