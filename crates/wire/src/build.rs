//! Building frames: one description of a frame's headers ([`FrameRepr`]) written with every
//! length and checksum filled in. The generator's templates, the NFs' created packets and
//! the tests all build packets here, so there is one way to get a header right.

use crate::checksum;
use crate::ethernet::{EtherType, MacAddr};
use crate::icmp;
use crate::ipv6::Ipv6Header;
use crate::tcp::TcpHeader;
use crate::vlan::VlanHeader;
use crate::{Ipv4Header, WireError};

/// The Ethernet header, with an optional 802.1Q tag (its TCI).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetRepr {
    pub src: MacAddr,
    pub dst: MacAddr,
    pub vlan_tci: Option<u16>,
}

/// The IP header's fields that are not derived (lengths, checksum and protocol are).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpRepr {
    V4 {
        src: [u8; 4],
        dst: [u8; 4],
        ttl: u8,
        dscp_ecn: u8,
        ident: u16,
        /// Sets the don't-fragment bit.
        dont_fragment: bool,
    },
    V6 {
        src: [u8; 16],
        dst: [u8; 16],
        hop_limit: u8,
        traffic_class: u8,
        flow_label: u32,
    },
}

impl IpRepr {
    /// IPv4 with TTL 64 and everything else zero.
    pub fn v4(src: [u8; 4], dst: [u8; 4]) -> IpRepr {
        IpRepr::V4 {
            src,
            dst,
            ttl: 64,
            dscp_ecn: 0,
            ident: 0,
            dont_fragment: false,
        }
    }

    /// IPv6 with hop limit 64 and everything else zero.
    pub fn v6(src: [u8; 16], dst: [u8; 16]) -> IpRepr {
        IpRepr::V6 {
            src,
            dst,
            hop_limit: 64,
            traffic_class: 0,
            flow_label: 0,
        }
    }

    /// With DSCP `dscp` (ECN not-ECT).
    pub fn with_dscp(mut self, dscp: u8) -> IpRepr {
        match &mut self {
            IpRepr::V4 { dscp_ecn, .. } => *dscp_ecn = dscp << 2,
            IpRepr::V6 { traffic_class, .. } => *traffic_class = dscp << 2,
        }
        self
    }

    pub fn header_len(&self) -> usize {
        match self {
            IpRepr::V4 { .. } => Ipv4Header::LEN,
            IpRepr::V6 { .. } => Ipv6Header::LEN,
        }
    }

    /// The pseudo-header sum for an upper layer of `protocol` and `l4_len` bytes.
    fn pseudo_header(&self, protocol: u8, l4_len: usize) -> u32 {
        match *self {
            IpRepr::V4 { src, dst, .. } => checksum::pseudo_header_v4(src, dst, protocol, l4_len as u16),
            IpRepr::V6 { src, dst, .. } => checksum::pseudo_header_v6(src, dst, protocol, l4_len as u32),
        }
    }
}

/// The upper layer: its header fields; lengths and checksums are derived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransportRepr {
    Udp {
        src_port: u16,
        dst_port: u16,
    },
    /// A TCP header without options.
    Tcp {
        src_port: u16,
        dst_port: u16,
        seq: u32,
        ack: u32,
        /// `TcpHeader::SYN | TcpHeader::ACK`, ...
        flags: u16,
        window: u16,
    },
    /// ICMP over IPv4 or ICMPv6 over IPv6 (chosen by the IP version): type, code and the
    /// four bytes after the checksum (an echo's identifier and sequence number).
    Icmp {
        ty: u8,
        code: u8,
        rest: [u8; 4],
    },
}

impl TransportRepr {
    pub fn header_len(&self) -> usize {
        match self {
            TransportRepr::Udp { .. } | TransportRepr::Icmp { .. } => 8,
            TransportRepr::Tcp { .. } => TcpHeader::LEN,
        }
    }

    fn protocol(&self, ip: &IpRepr) -> u8 {
        match (self, ip) {
            (TransportRepr::Udp { .. }, _) => 17,
            (TransportRepr::Tcp { .. }, _) => 6,
            (TransportRepr::Icmp { .. }, IpRepr::V4 { .. }) => 1,
            (TransportRepr::Icmp { .. }, IpRepr::V6 { .. }) => icmp::v6::NEXT_HEADER,
        }
    }
}

/// A frame's headers: Ethernet (and VLAN), IP, and the upper layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRepr {
    pub ethernet: EthernetRepr,
    pub ip: IpRepr,
    pub transport: TransportRepr,
}

impl FrameRepr {
    /// Bytes of all headers.
    pub fn header_len(&self) -> usize {
        self.l4_offset() + self.transport.header_len()
    }

    /// Offset of the IP header.
    pub fn l3_offset(&self) -> usize {
        14 + if self.ethernet.vlan_tci.is_some() {
            VlanHeader::LEN
        } else {
            0
        }
    }

    /// Offset of the upper-layer header.
    pub fn l4_offset(&self) -> usize {
        self.l3_offset() + self.ip.header_len()
    }

    /// Reads a frame written the way [`emit`](Self::emit) writes them: its headers and
    /// its payload (Ethernet padding excluded). Every length and checksum is verified
    /// (a UDP checksum of zero, "none", is accepted over IPv4 only); headers this
    /// representation cannot hold are `Unrepresentable`, not misread.
    pub fn parse(frame: &[u8]) -> Result<(FrameRepr, &[u8]), WireError> {
        let layers = crate::Layers::parse(frame)?;
        if layers.vlan_tags() > 1 {
            return Err(WireError::Unrepresentable);
        }
        let (eth, _) = crate::EthernetHeader::parse(frame)?;
        let vlan_tci = (layers.vlan_tags() == 1).then(|| u16::from_be_bytes([frame[14], frame[15]]));
        let l3 = layers.l3_offset();
        let l4 = layers.l4_offset().ok_or(WireError::Unrepresentable)?;
        let (ip, end, pseudo_len) = match layers.network() {
            crate::Network::Ipv4 => {
                let (h, hlen, l4_bytes) = Ipv4Header::check(&frame[l3..])?;
                if hlen != Ipv4Header::LEN || layers.is_fragment() {
                    return Err(WireError::Unrepresentable);
                }
                if !Ipv4Header::checksum_ok(&frame[l3..l3 + hlen]) {
                    return Err(WireError::BadChecksum);
                }
                let ip = IpRepr::V4 {
                    src: h.src,
                    dst: h.dst,
                    ttl: h.ttl,
                    dscp_ecn: h.dscp_ecn,
                    ident: h.ident.get(),
                    dont_fragment: h.flags_frag.get() & 0x4000 != 0,
                };
                (ip, l4 + l4_bytes.len(), l4_bytes.len())
            }
            crate::Network::Ipv6 => {
                let (h, payload) = Ipv6Header::check(&frame[l3..])?;
                if l4 != l3 + Ipv6Header::LEN {
                    return Err(WireError::Unrepresentable);
                }
                let first = h.version_class_flow.get();
                let ip = IpRepr::V6 {
                    src: h.src,
                    dst: h.dst,
                    hop_limit: h.hop_limit,
                    traffic_class: (first >> 20) as u8,
                    flow_label: first & 0xf_ffff,
                };
                (ip, l4 + payload.len(), payload.len())
            }
            _ => return Err(WireError::Unrepresentable),
        };
        let seg = &frame[l4..end];
        let word = |at: usize| u16::from_be_bytes([seg[at], seg[at + 1]]);
        let (transport, header_len) = match (layers.protocol(), ip) {
            (17, _) => {
                let (u, _) = crate::UdpHeader::parse(seg)?;
                if usize::from(u.len.get()) != seg.len() {
                    return Err(WireError::BadHeader);
                }
                (
                    TransportRepr::Udp {
                        src_port: u.src_port.get(),
                        dst_port: u.dst_port.get(),
                    },
                    8,
                )
            }
            (6, _) => {
                let (t, _) = TcpHeader::check(seg)?;
                if t.header_len() != TcpHeader::LEN {
                    return Err(WireError::Unrepresentable);
                }
                (
                    TransportRepr::Tcp {
                        src_port: t.src_port.get(),
                        dst_port: t.dst_port.get(),
                        seq: t.seq.get(),
                        ack: t.ack.get(),
                        flags: t.flags(),
                        window: t.window.get(),
                    },
                    TcpHeader::LEN,
                )
            }
            (1, IpRepr::V4 { .. }) | (icmp::v6::NEXT_HEADER, IpRepr::V6 { .. }) if seg.len() >= 8 => (
                TransportRepr::Icmp {
                    ty: seg[0],
                    code: seg[1],
                    rest: [seg[4], seg[5], seg[6], seg[7]],
                },
                8,
            ),
            (1, IpRepr::V4 { .. }) | (icmp::v6::NEXT_HEADER, IpRepr::V6 { .. }) => return Err(WireError::Truncated),
            _ => return Err(WireError::Unrepresentable),
        };
        let protocol = layers.protocol();
        let pseudo = match transport {
            TransportRepr::Icmp { .. } if protocol == 1 => 0,
            _ => ip.pseudo_header(protocol, pseudo_len),
        };
        let zero_udp = matches!(transport, TransportRepr::Udp { .. }) && word(6) == 0;
        let zero_allowed = matches!(ip, IpRepr::V4 { .. });
        if zero_udp && !zero_allowed || !zero_udp && checksum::fold(checksum::sum(pseudo, seg)) != 0xffff {
            return Err(WireError::BadChecksum);
        }
        let repr = FrameRepr {
            ethernet: EthernetRepr {
                src: eth.src,
                dst: eth.dst,
                vlan_tci,
            },
            ip,
            transport,
        };
        Ok((repr, &seg[header_len..]))
    }

    /// Writes the headers and `payload` into the front of `out`; returns the frame length.
    pub fn emit(&self, out: &mut [u8], payload: &[u8]) -> Result<usize, WireError> {
        let hlen = self.header_len();
        let total = hlen + payload.len();
        let out = out.get_mut(..total).ok_or(WireError::Truncated)?;
        out[hlen..].copy_from_slice(payload);
        // The payload starts at an even offset from the upper-layer header (8 or 20
        // bytes in), so its sum can be taken on its own.
        self.emit_headers(out, payload.len(), checksum::sum(0, payload))
    }

    /// Writes only the headers into the front of `out`, with lengths and checksums for a
    /// payload of `payload_len` bytes whose ones'-complement sum ([`checksum::sum`]) is
    /// `payload_sum`: how templates get right checksums without the payload in hand.
    /// Returns the frame length the headers describe.
    pub fn emit_headers(&self, out: &mut [u8], payload_len: usize, payload_sum: u32) -> Result<usize, WireError> {
        let hlen = self.header_len();
        let out = out.get_mut(..hlen).ok_or(WireError::Truncated)?;
        let l4_len = self.transport.header_len() + payload_len;
        let protocol = self.transport.protocol(&self.ip);

        let EthernetRepr { src, dst, vlan_tci } = self.ethernet;
        out[..6].copy_from_slice(&dst.0);
        out[6..12].copy_from_slice(&src.0);
        let ethertype = match self.ip {
            IpRepr::V4 { .. } => EtherType::Ipv4,
            IpRepr::V6 { .. } => EtherType::Ipv6,
        };
        let mut at = 12;
        if let Some(tci) = vlan_tci {
            out[12..14].copy_from_slice(&u16::from(EtherType::Vlan).to_be_bytes());
            out[14..16].copy_from_slice(&tci.to_be_bytes());
            at = 16;
        }
        out[at..at + 2].copy_from_slice(&u16::from(ethertype).to_be_bytes());

        let l3 = self.l3_offset();
        let l4 = self.l4_offset();
        match self.ip {
            IpRepr::V4 {
                src,
                dst,
                ttl,
                dscp_ecn,
                ident,
                dont_fragment,
            } => {
                let total = u16::try_from(Ipv4Header::LEN + l4_len).map_err(|_| WireError::BadHeader)?;
                let ip = &mut out[l3..l4];
                ip[0] = 0x45;
                ip[1] = dscp_ecn;
                ip[2..4].copy_from_slice(&total.to_be_bytes());
                ip[4..6].copy_from_slice(&ident.to_be_bytes());
                ip[6..8].copy_from_slice(&if dont_fragment { 0x4000u16 } else { 0 }.to_be_bytes());
                ip[8] = ttl;
                ip[9] = protocol;
                ip[12..16].copy_from_slice(&src);
                ip[16..20].copy_from_slice(&dst);
                Ipv4Header::fill_checksum(ip);
            }
            IpRepr::V6 {
                src,
                dst,
                hop_limit,
                traffic_class,
                flow_label,
            } => {
                let payload = u16::try_from(l4_len).map_err(|_| WireError::BadHeader)?;
                let first = 6u32 << 28 | u32::from(traffic_class) << 20 | (flow_label & 0xf_ffff);
                let ip = &mut out[l3..l4];
                ip[..4].copy_from_slice(&first.to_be_bytes());
                ip[4..6].copy_from_slice(&payload.to_be_bytes());
                ip[6] = protocol;
                ip[7] = hop_limit;
                ip[8..24].copy_from_slice(&src);
                ip[24..40].copy_from_slice(&dst);
            }
        }

        let pseudo = match (self.transport, self.ip) {
            (TransportRepr::Icmp { .. }, IpRepr::V4 { .. }) => 0,
            _ => self.ip.pseudo_header(protocol, l4_len),
        };
        let seg = &mut out[l4..];
        let checksum_at = match self.transport {
            TransportRepr::Udp { src_port, dst_port } => {
                seg[..2].copy_from_slice(&src_port.to_be_bytes());
                seg[2..4].copy_from_slice(&dst_port.to_be_bytes());
                seg[4..6].copy_from_slice(&u16::try_from(l4_len).map_err(|_| WireError::BadHeader)?.to_be_bytes());
                6
            }
            TransportRepr::Tcp {
                src_port,
                dst_port,
                seq,
                ack,
                flags,
                window,
            } => {
                seg[..2].copy_from_slice(&src_port.to_be_bytes());
                seg[2..4].copy_from_slice(&dst_port.to_be_bytes());
                seg[4..8].copy_from_slice(&seq.to_be_bytes());
                seg[8..12].copy_from_slice(&ack.to_be_bytes());
                seg[12..14].copy_from_slice(&(5u16 << 12 | flags & 0x01ff).to_be_bytes());
                seg[14..16].copy_from_slice(&window.to_be_bytes());
                seg[18..20].copy_from_slice(&[0, 0]);
                16
            }
            TransportRepr::Icmp { ty, code, rest } => {
                seg[0] = ty;
                seg[1] = code;
                seg[4..8].copy_from_slice(&rest);
                2
            }
        };
        seg[checksum_at..checksum_at + 2].copy_from_slice(&[0, 0]);
        let sum = !checksum::fold(checksum::sum(pseudo, seg) + payload_sum);
        // UDP sends a computed zero as all ones (RFC 768); zero means "no checksum".
        let sum = match (sum, self.transport) {
            (0, TransportRepr::Udp { .. }) => 0xffff,
            (s, _) => s,
        };
        seg[checksum_at..checksum_at + 2].copy_from_slice(&sum.to_be_bytes());
        Ok(hlen + payload_len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{NetSlice, SlicedPacket, TransportSlice};

    const A: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const B: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);

    fn frame(vlan: Option<u16>, ip: IpRepr, transport: TransportRepr, payload: &[u8]) -> Vec<u8> {
        let r = FrameRepr {
            ethernet: EthernetRepr {
                src: A,
                dst: B,
                vlan_tci: vlan,
            },
            ip,
            transport,
        };
        let mut out = vec![0u8; 2048];
        let n = r.emit(&mut out, payload).unwrap();
        out.truncate(n);
        assert_eq!(crate::Layers::parse(&out).unwrap().l4_offset(), Some(r.l4_offset()));
        out
    }

    /// etherparse recomputes every checksum and length: they must agree with ours.
    fn check_with_etherparse(f: &[u8]) -> TransportSlice<'_> {
        let s = SlicedPacket::from_ethernet(f).unwrap();
        let (src, dst) = match s.net.as_ref().unwrap() {
            NetSlice::Ipv4(v4) => {
                let h = v4.header();
                assert_eq!(h.header_checksum(), h.to_header().calc_header_checksum());
                (h.source().to_vec(), h.destination().to_vec())
            }
            NetSlice::Ipv6(v6) => (v6.header().source().to_vec(), v6.header().destination().to_vec()),
            _ => panic!("not IP"),
        };
        let t = s.transport.clone().unwrap();
        match &t {
            TransportSlice::Udp(u) => {
                let want = if src.len() == 4 {
                    u.to_header().calc_checksum_ipv4_raw(
                        src[..].try_into().unwrap(),
                        dst[..].try_into().unwrap(),
                        u.payload(),
                    )
                } else {
                    u.to_header().calc_checksum_ipv6_raw(
                        src[..].try_into().unwrap(),
                        dst[..].try_into().unwrap(),
                        u.payload(),
                    )
                };
                assert_eq!(u.checksum(), want.unwrap());
            }
            TransportSlice::Tcp(t) => {
                let want = if src.len() == 4 {
                    t.to_header().calc_checksum_ipv4_raw(
                        src[..].try_into().unwrap(),
                        dst[..].try_into().unwrap(),
                        t.payload(),
                    )
                } else {
                    t.to_header().calc_checksum_ipv6_raw(
                        src[..].try_into().unwrap(),
                        dst[..].try_into().unwrap(),
                        t.payload(),
                    )
                };
                assert_eq!(t.checksum(), want.unwrap());
            }
            TransportSlice::Icmpv4(i) => {
                assert_eq!(i.checksum(), i.icmp_type().calc_checksum(i.payload()));
            }
            TransportSlice::Icmpv6(i) => {
                let want = i
                    .icmp_type()
                    .calc_checksum(src[..].try_into().unwrap(), dst[..].try_into().unwrap(), i.payload())
                    .unwrap();
                assert_eq!(i.checksum(), want);
            }
            other => panic!("unexpected transport {other:?}"),
        }
        t
    }

    #[test]
    fn udp_tcp_and_icmp_over_both_ips_agree_with_etherparse() {
        let v4 = IpRepr::v4([198, 18, 0, 1], [198, 19, 0, 2]);
        let v6 = IpRepr::v6(
            [0x20, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
            [0x20, 1, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 9],
        );
        let udp = TransportRepr::Udp {
            src_port: 1024,
            dst_port: 5001,
        };
        let tcp = TransportRepr::Tcp {
            src_port: 40000,
            dst_port: 80,
            seq: 7,
            ack: 9,
            flags: TcpHeader::PSH | TcpHeader::ACK,
            window: 65535,
        };
        let echo = TransportRepr::Icmp {
            ty: 8,
            code: 0,
            rest: [0, 1, 0, 2],
        };
        let echo6 = TransportRepr::Icmp {
            ty: 128,
            code: 0,
            rest: [0, 1, 0, 2],
        };
        for vlan in [None, Some(VlanHeader::tci_of(3, false, 42))] {
            for payload in [&b""[..], b"x", b"hello, world!", &[0xffu8; 1000]] {
                for (ip, t) in [(v4, udp), (v4, tcp), (v4, echo), (v6, udp), (v6, tcp), (v6, echo6)] {
                    let f = frame(vlan, ip, t, payload);
                    check_with_etherparse(&f);
                }
            }
        }
    }

    proptest::proptest! {
        /// parse(emit(r, payload)) = (r, payload), for every transport, both IPs, with
        /// and without a tag; any corrupted byte is an error or a different frame, never
        /// a panic.
        #[test]
        fn parse_undoes_emit(
            kind in 0usize..6,
            vlan in proptest::option::of(0u16..0xffff),
            ports in (proptest::prelude::any::<u16>(), proptest::prelude::any::<u16>()),
            word in proptest::prelude::any::<u32>(),
            payload in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..80),
            flip in (0usize..200, 1u8..=255),
        ) {
            let v4 = IpRepr::V4 { src: word.to_be_bytes(), dst: [10, 0, 0, 9], ttl: 9, dscp_ecn: 0xb8, ident: ports.0, dont_fragment: true };
            let v6 = IpRepr::V6 { src: [7; 16], dst: [9; 16], hop_limit: 3, traffic_class: 0x2e, flow_label: word & 0xf_ffff };
            let (src_port, dst_port) = ports;
            let tcp = TransportRepr::Tcp { src_port, dst_port, seq: word, ack: !word, flags: 0x18, window: 512 };
            let (ip, transport) = match kind {
                0 => (v4, TransportRepr::Udp { src_port, dst_port }),
                1 => (v4, tcp),
                2 => (v4, TransportRepr::Icmp { ty: 8, code: 0, rest: word.to_be_bytes() }),
                3 => (v6, TransportRepr::Udp { src_port, dst_port }),
                4 => (v6, tcp),
                _ => (v6, TransportRepr::Icmp { ty: 128, code: 0, rest: word.to_be_bytes() }),
            };
            let r = FrameRepr { ethernet: EthernetRepr { src: A, dst: B, vlan_tci: vlan }, ip, transport };
            let mut out = vec![0u8; 256];
            let n = r.emit(&mut out, &payload).unwrap();
            out.truncate(n);
            let (back, rest) = FrameRepr::parse(&out).unwrap();
            proptest::prop_assert_eq!(back, r);
            proptest::prop_assert_eq!(rest, &payload[..]);
            let (at, x) = flip;
            if at < out.len() && at >= 12 {
                out[at] ^= x;
                if let Ok((other, _)) = FrameRepr::parse(&out) {
                    // Only a field the checksums do not cover, or a changed field, can parse.
                    proptest::prop_assert!(other != r || at < 14, "a corrupted byte {} went unnoticed", at);
                }
            }
        }
    }

    #[test]
    fn parse_refuses_what_it_cannot_hold() {
        let mut f = frame(
            None,
            IpRepr::v4([10, 0, 0, 1], [10, 0, 0, 2]),
            TransportRepr::Udp {
                src_port: 1,
                dst_port: 2,
            },
            b"abcd",
        );
        f[40] ^= 1; // the UDP checksum
        assert_eq!(FrameRepr::parse(&f).unwrap_err(), WireError::BadChecksum);
        f[40] = 0;
        f[41] = 0; // no checksum: allowed over IPv4
        assert_eq!(FrameRepr::parse(&f).unwrap().1, b"abcd");
        let ipv6_zero = {
            let mut g = frame(
                None,
                IpRepr::v6([1; 16], [2; 16]),
                TransportRepr::Udp {
                    src_port: 1,
                    dst_port: 2,
                },
                b"x",
            );
            g[60] = 0;
            g[61] = 0;
            g
        };
        assert_eq!(FrameRepr::parse(&ipv6_zero).unwrap_err(), WireError::BadChecksum);
        let mut gre = frame(
            None,
            IpRepr::v4([10, 0, 0, 1], [10, 0, 0, 2]),
            TransportRepr::Udp {
                src_port: 1,
                dst_port: 2,
            },
            b"",
        );
        gre[23] = 47;
        Ipv4Header::fill_checksum(&mut gre[14..34]);
        assert_eq!(FrameRepr::parse(&gre).unwrap_err(), WireError::Unrepresentable);
    }

    #[test]
    fn a_udp_sum_of_zero_goes_out_as_all_ones() {
        // Find a payload word that makes the computed checksum 0: sum must be 0xffff.
        let ip = IpRepr::v4([10, 0, 0, 1], [10, 0, 0, 2]);
        let t = TransportRepr::Udp {
            src_port: 1,
            dst_port: 2,
        };
        let base = frame(None, ip, t, &[0, 0]);
        let c = u16::from_be_bytes([base[40], base[41]]);
        // Adding the checksum's value as a payload word turns the sum into 0xffff.
        let f = frame(None, ip, t, &c.to_be_bytes());
        assert_eq!(&f[40..42], &[0xff, 0xff]);
        check_with_etherparse(&f);
    }

    #[test]
    fn too_small_a_buffer_is_an_error() {
        let r = FrameRepr {
            ethernet: EthernetRepr {
                src: A,
                dst: B,
                vlan_tci: None,
            },
            ip: IpRepr::v4([10, 0, 0, 1], [10, 0, 0, 2]),
            transport: TransportRepr::Udp {
                src_port: 1,
                dst_port: 2,
            },
        };
        assert_eq!(r.emit(&mut [0u8; 41], &[]), Err(WireError::Truncated));
        assert_eq!(r.emit(&mut [0u8; 44], &[1, 2, 3]), Err(WireError::Truncated));
        assert_eq!(
            r.emit(&mut vec![0u8; 70_000], &[0u8; 65_600]),
            Err(WireError::BadHeader)
        );
    }
}
