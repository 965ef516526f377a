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
    Unparsed = 0,
    Ipv4 = 1,
    Ipv6,
    Arp,
    /// An EtherType sfclab does not parse further.
    Other,
}

/// Offsets of a frame's layers, 8 bytes so it fits the packet's metadata line.
///
/// One packed integer (bits 0-15 the L3 offset, 16-31 the L4 offset, 32-39 the network,
/// 40-47 the protocol, 48-55 flags, 56-63 VLAN tags): as a struct of bytes, LLVM built it
/// on the stack with narrow stores and read it back with wider loads, a store-forwarding
/// stall that cost the firewall ~35 cycles per packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Layers(u64);

/// The upper-layer header is in this frame (not a later fragment, not "no next header").
const HAS_L4: u8 = 1;
/// The packet is a fragment (any: first, middle or last).
const FRAGMENT: u8 = 2;

/// VLAN tags [`Layers::parse`] steps over (QinQ's two).
pub const MAX_VLAN_TAGS: usize = 2;

impl Layers {
    /// Walks `frame` from its Ethernet header. Malformed or truncated headers are errors;
    /// an EtherType it does not know is `Network::Other`, not an error.
    #[inline(always)]
    pub fn parse(frame: &[u8]) -> Result<Layers, WireError> {
        // The common frame first: untagged IPv4 without options, not a fragment.
        if let Some(&[0x08, 0x00, 0x45, _, t0, t1, _, _, f0, f1, _, protocol]) = frame.get(12..24) {
            let total = usize::from(u16::from_be_bytes([t0, t1]));
            if (20..=frame.len() - 14).contains(&total) && (f0 & 0x3f) | f1 == 0 {
                return Ok(Layers(
                    14 | 34 << 16 | (Network::Ipv4 as u64) << 32 | u64::from(protocol) << 40 | u64::from(HAS_L4) << 48,
                ));
            }
        }
        Self::parse_any(frame)
    }

    /// [`parse`](Self::parse) without the fast path (tests check both agree).
    fn parse_any(frame: &[u8]) -> Result<Layers, WireError> {
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
        // Locals, one struct at the end: filled field by field, the struct went through
        // the stack in byte stores that wider loads then waited on (store forwarding).
        let (network, protocol, l4_offset, bits) = match EtherType::from(ethertype) {
            EtherType::Ipv4 => {
                let (ip, hlen, _) = Ipv4Header::check(&frame[at..])?;
                let frag = ip.flags_frag.get();
                // More-fragments set or an offset: a fragment; only the first holds L4.
                let fragment = if frag & 0x3fff != 0 { FRAGMENT } else { 0 };
                let has_l4 = if frag & 0x1fff == 0 { HAS_L4 } else { 0 };
                (Network::Ipv4, ip.protocol, at + hlen, fragment | has_l4)
            }
            EtherType::Ipv6 => {
                let (_, walk) = Ipv6Header::walk(&frame[at..])?;
                let fragment = if walk.fragment.is_some() { FRAGMENT } else { 0 };
                let has_l4 = if walk.has_l4_header() { HAS_L4 } else { 0 };
                (Network::Ipv6, walk.protocol, at + walk.l4_offset, fragment | has_l4)
            }
            EtherType::Arp => (Network::Arp, 0, 0, 0),
            _ => (Network::Other, 0, 0, 0),
        };
        Ok(Layers(
            at as u64
                | (l4_offset as u64 & 0xffff) << 16
                | (network as u64) << 32
                | u64::from(protocol) << 40
                | u64::from(bits) << 48
                | u64::from(vlan_tags) << 56,
        ))
    }

    /// True for layers [`parse`](Self::parse) produced; false for the default.
    #[inline(always)]
    pub fn is_parsed(&self) -> bool {
        self.network() != Network::Unparsed
    }

    #[inline(always)]
    pub fn network(&self) -> Network {
        match (self.0 >> 32) as u8 {
            1 => Network::Ipv4,
            2 => Network::Ipv6,
            3 => Network::Arp,
            4 => Network::Other,
            _ => Network::Unparsed,
        }
    }

    /// Offset of the network header (after Ethernet and any VLAN tags).
    #[inline(always)]
    pub fn l3_offset(&self) -> usize {
        usize::from(self.0 as u16)
    }

    /// Offset of the upper-layer header, when this frame holds it.
    #[inline(always)]
    pub fn l4_offset(&self) -> Option<usize> {
        (self.flags() & HAS_L4 != 0).then_some(usize::from((self.0 >> 16) as u16))
    }

    /// The IPv4 protocol or IPv6 upper-layer next header; 0 for other networks.
    #[inline(always)]
    pub fn protocol(&self) -> u8 {
        (self.0 >> 40) as u8
    }

    /// The packet is an IP fragment.
    #[inline(always)]
    pub fn is_fragment(&self) -> bool {
        self.flags() & FRAGMENT != 0
    }

    /// VLAN tags between the Ethernet header and the network header.
    #[inline(always)]
    pub fn vlan_tags(&self) -> usize {
        usize::from((self.0 >> 56) as u8)
    }

    #[inline(always)]
    fn flags(&self) -> u8 {
        (self.0 >> 48) as u8
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

    proptest::proptest! {
        /// The fast path for plain IPv4 answers exactly as the general walk does.
        #[test]
        fn the_fast_path_agrees_with_the_general_walk(
            flips in proptest::collection::vec((0usize..40, proptest::prelude::any::<u8>()), 0..4),
            cut in 14usize..60,
        ) {
            let mut f = udp_v4(&[]);
            for (at, v) in flips {
                f[at] = v;
            }
            f.truncate(cut);
            proptest::prop_assert_eq!(Layers::parse(&f), Layers::parse_any(&f));
        }
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
