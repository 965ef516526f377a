//! The parser step: one walk over a frame's headers that finds where each layer starts.
//!
//! The first NF that needs the layers parses them and the result is kept in the packet's
//! metadata (`Packet::layers` in sfclab-core), so later NFs of the chain skip the walk:
//! Ethernet, up to two VLAN tags (802.1Q, 802.1ad), then IPv4 (version and lengths
//! checked) or IPv6 (extension headers walked) or ARP. The offsets are hints into the
//! frame, not trusted pointers: every read through them is still a checked view.

use crate::ethernet::EthernetHeader;
use crate::ipv4::Ipv4Header;
use crate::ipv6::Ipv6Header;
use crate::vlan::{ETHERTYPE_QINQ, VlanHeader};
use crate::{EtherType, WireError};

/// The network layer of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum Network {
    /// Not parsed (the default of an empty [`Layers`]).
    #[default]
    Unparsed,
    Ipv4,
    Ipv6,
    Arp,
    /// An EtherType sfclab does not parse further.
    Other,
}

/// Offsets of a frame's layers, 8 bytes so it fits the packet's metadata line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct Layers {
    l3_offset: u16,
    l4_offset: u16,
    network: Network,
    protocol: u8,
    bits: u8,
    vlan_tags: u8,
}

/// The upper-layer header is in this frame (not a later fragment, not "no next header").
const HAS_L4: u8 = 1;
/// The packet is a fragment (any: first, middle or last).
const FRAGMENT: u8 = 2;

/// VLAN tags [`Layers::parse`] steps over (QinQ's two).
pub const MAX_VLAN_TAGS: usize = 2;

impl Layers {
    /// Walks `frame` from its Ethernet header. Malformed or truncated headers are errors;
    /// an EtherType it does not know is `Network::Other`, not an error.
    pub fn parse(frame: &[u8]) -> Result<Layers, WireError> {
        let (eth, _) = EthernetHeader::parse(frame)?;
        let mut ethertype = eth.ethertype.get();
        let mut at = EthernetHeader::LEN;
        let mut vlan_tags = 0u8;
        while ethertype == u16::from(EtherType::Vlan) || ethertype == ETHERTYPE_QINQ {
            if usize::from(vlan_tags) == MAX_VLAN_TAGS {
                return Err(WireError::BadHeader);
            }
            let (tag, _) = VlanHeader::parse(&frame[at..])?;
            ethertype = tag.ethertype.get();
            at += VlanHeader::LEN;
            vlan_tags += 1;
        }
        let mut layers = Layers {
            l3_offset: at as u16,
            l4_offset: 0,
            network: Network::Other,
            protocol: 0,
            bits: 0,
            vlan_tags,
        };
        match EtherType::from(ethertype) {
            EtherType::Ipv4 => {
                let (ip, hlen, _) = Ipv4Header::check(&frame[at..])?;
                let frag = ip.flags_frag.get();
                layers.network = Network::Ipv4;
                layers.protocol = ip.protocol;
                layers.l4_offset = (at + hlen) as u16;
                // More-fragments set or an offset: a fragment; only the first holds L4.
                if frag & 0x3fff != 0 {
                    layers.bits |= FRAGMENT;
                }
                if frag & 0x1fff == 0 {
                    layers.bits |= HAS_L4;
                }
            }
            EtherType::Ipv6 => {
                let (_, walk) = Ipv6Header::walk(&frame[at..])?;
                layers.network = Network::Ipv6;
                layers.protocol = walk.protocol;
                layers.l4_offset = (at + walk.l4_offset) as u16;
                if walk.fragment.is_some() {
                    layers.bits |= FRAGMENT;
                }
                if walk.has_l4_header() {
                    layers.bits |= HAS_L4;
                }
            }
            EtherType::Arp => layers.network = Network::Arp,
            _ => {}
        }
        Ok(layers)
    }

    /// True for layers [`parse`](Self::parse) produced; false for the default.
    pub fn is_parsed(&self) -> bool {
        self.network != Network::Unparsed
    }

    pub fn network(&self) -> Network {
        self.network
    }

    /// Offset of the network header (after Ethernet and any VLAN tags).
    pub fn l3_offset(&self) -> usize {
        usize::from(self.l3_offset)
    }

    /// Offset of the upper-layer header, when this frame holds it.
    pub fn l4_offset(&self) -> Option<usize> {
        (self.bits & HAS_L4 != 0).then_some(usize::from(self.l4_offset))
    }

    /// The IPv4 protocol or IPv6 upper-layer next header; 0 for other networks.
    pub fn protocol(&self) -> u8 {
        self.protocol
    }

    /// The packet is an IP fragment.
    pub fn is_fragment(&self) -> bool {
        self.bits & FRAGMENT != 0
    }

    /// VLAN tags between the Ethernet header and the network header.
    pub fn vlan_tags(&self) -> usize {
        usize::from(self.vlan_tags)
    }
}

const _: () = assert!(std::mem::size_of::<Layers>() == 8);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hex;
    use etherparse::PacketBuilder;

    fn udp_v4(vlans: &[u16]) -> Vec<u8> {
        let mut out = Vec::new();
        let b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        match vlans {
            [] => b
                .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
                .udp(1, 2)
                .write(&mut out, &[0; 4]),
            [v] => b
                .single_vlan((*v).try_into().unwrap())
                .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
                .udp(1, 2)
                .write(&mut out, &[0; 4]),
            [o, i] => b
                .double_vlan((*o).try_into().unwrap(), (*i).try_into().unwrap())
                .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
                .udp(1, 2)
                .write(&mut out, &[0; 4]),
            _ => unreachable!(),
        }
        .unwrap();
        out
    }

    #[test]
    fn finds_l3_and_l4_behind_zero_one_and_two_vlan_tags() {
        for (tags, l3) in [(&[][..], 14), (&[7][..], 18), (&[7, 9][..], 22)] {
            let f = udp_v4(tags);
            let l = Layers::parse(&f).unwrap();
            assert!(l.is_parsed());
            assert_eq!(
                (l.network(), l.l3_offset(), l.l4_offset()),
                (Network::Ipv4, l3, Some(l3 + 20))
            );
            assert_eq!((l.protocol(), l.vlan_tags(), l.is_fragment()), (17, tags.len(), false));
            // etherparse finds the UDP header at the same place.
            let s = etherparse::SlicedPacket::from_ethernet(&f).unwrap();
            let Some(etherparse::TransportSlice::Udp(u)) = s.transport else {
                panic!()
            };
            assert_eq!(u.slice().as_ptr(), f[l3 + 20..].as_ptr());
        }
        let mut three = udp_v4(&[7, 9]);
        three.splice(16..16, hex("8100 0005"));
        assert_eq!(Layers::parse(&three), Err(WireError::BadHeader));
    }

    #[test]
    fn ipv4_fragments_and_options() {
        let mut f = udp_v4(&[]);
        f[20] = 0x20; // more fragments, offset 0: the first fragment holds L4
        let l = Layers::parse(&f).unwrap();
        assert!(l.is_fragment() && l.l4_offset() == Some(34));
        f[21] = 0x10; // offset 16 units: a later fragment
        assert_eq!(Layers::parse(&f).unwrap().l4_offset(), None);
        let mut opts = udp_v4(&[]);
        opts[14] = 0x46; // IHL 6: four option bytes
        opts.splice(34..34, [1, 1, 1, 0]);
        let total = u16::from_be_bytes([opts[16], opts[17]]) + 4;
        opts[16..18].copy_from_slice(&total.to_be_bytes());
        assert_eq!(Layers::parse(&opts).unwrap().l4_offset(), Some(38));
    }

    #[test]
    fn ipv6_arp_other_and_malformed() {
        let mut v6 = Vec::new();
        PacketBuilder::ethernet2([2; 6], [4; 6])
            .ipv6([1; 16], [2; 16], 64)
            .tcp(1, 2, 3, 4)
            .write(&mut v6, &[])
            .unwrap();
        let l = Layers::parse(&v6).unwrap();
        assert_eq!((l.network(), l.protocol(), l.l4_offset()), (Network::Ipv6, 6, Some(54)));
        let arp =
            hex("ffffffffffff 020000000002 0806 0001 0800 06 04 0001 020000000002 c0a80102 000000000000 c0a80101");
        let l = Layers::parse(&arp).unwrap();
        assert_eq!((l.network(), l.l3_offset(), l.l4_offset()), (Network::Arp, 14, None));
        let lldp = hex("0180c200000e 020000000002 88cc 0000");
        assert_eq!(Layers::parse(&lldp).unwrap().network(), Network::Other);
        assert_eq!(Layers::parse(&udp_v4(&[])[..30]), Err(WireError::Truncated));
        assert_eq!(Layers::parse(&[0; 10]), Err(WireError::Truncated));
        assert!(!Layers::default().is_parsed());
    }
}
