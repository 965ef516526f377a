//! What the NFs read of a frame through the parser step ([`Packet::layers`]): the IPv4
//! header's place and the upper layer's, with the drop reason for frames an IPv4 NF
//! cannot take. The first NF of a chain that asks walks the headers; the rest reuse it.

use sfclab_core::{DropReason, Packet};
use sfclab_wire::Network;

/// Where an IPv4 datagram sits in its frame.
#[derive(Debug, Clone, Copy)]
pub struct Ipv4At {
    /// Offset of the IPv4 header (after Ethernet and any VLAN tags).
    pub l3: usize,
    /// End of the datagram (`l3 + total length`): Ethernet padding lies past it.
    pub end: usize,
    /// Offset of the upper-layer header; `None` for a fragment after the first.
    pub l4: Option<usize>,
    pub protocol: u8,
    /// Any fragment, the first included.
    pub fragment: bool,
}

/// The frame's IPv4 datagram. Headers that contradict the frame are `malformed`; a frame
/// that is not IPv4 is `unsupported`.
#[inline(always)]
pub fn ipv4(p: &mut Packet) -> Result<Ipv4At, DropReason> {
    let layers = p.layers().map_err(|_| DropReason::MALFORMED)?;
    if layers.network() != Network::Ipv4 {
        return Err(DropReason::UNSUPPORTED);
    }
    let l3 = layers.l3_offset();
    // The parser step checked the total length against the frame; read it again through
    // a checked slice, as the cache may predate an in-place rewrite.
    let total = p.data().get(l3 + 2..l3 + 4).ok_or(DropReason::MALFORMED)?;
    let end = l3 + usize::from(u16::from_be_bytes([total[0], total[1]]));
    if end > p.len() {
        return Err(DropReason::MALFORMED);
    }
    Ok(Ipv4At {
        l3,
        end,
        l4: layers.l4_offset(),
        protocol: layers.protocol(),
        fragment: layers.is_fragment(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::udp_frame;
    use sfclab_core::PacketPool;

    #[test]
    fn finds_ipv4_behind_tags_and_names_what_it_refuses() {
        let mut pool = PacketPool::new(1);
        let mut p = pool.alloc().unwrap();
        let f = udp_frame();
        p.reset(f.len()).copy_from_slice(&f);
        let at = ipv4(&mut p).unwrap();
        assert_eq!((at.l3, at.l4, at.protocol, at.fragment), (14, Some(34), 17, false));
        p.data_mut()[12] = 0x86;
        p.data_mut()[13] = 0xdd;
        p.meta.forget_layers();
        assert_eq!(
            ipv4(&mut p).unwrap_err(),
            DropReason::MALFORMED,
            "IPv6 EtherType, IPv4 bytes"
        );
        p.data_mut()[12] = 0x88;
        p.data_mut()[13] = 0xcc;
        p.meta.forget_layers();
        assert_eq!(ipv4(&mut p).unwrap_err(), DropReason::UNSUPPORTED);
        pool.free(p);
    }
}
