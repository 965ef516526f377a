//! Flow hashing: one 32-bit hash of a packet's 5-tuple, the same whether the generator
//! computes it from the tuple it is about to send or an NF computes it from the headers
//! it received, and the same in both directions of a connection (symmetric, as RSS is
//! configured for stateful NFs), so a connection and its replies land on one replica.

use crate::layers::{Layers, Network};

/// The hash of a flow: addresses (4 or 16 bytes each), ports and protocol. Symmetric:
/// swapping (src, sport) with (dst, dport) gives the same value.
pub fn hash(src: &[u8], dst: &[u8], sport: u16, dport: u16, protocol: u8) -> u32 {
    // Order the two endpoints so both directions hash alike.
    let ((a, pa), (b, pb)) = if (src, sport) <= (dst, dport) {
        ((src, sport), (dst, dport))
    } else {
        ((dst, dport), (src, sport))
    };
    let mut h = u32::from(protocol) ^ (u32::from(pa) << 16 | u32::from(pb));
    for c in a.chunks(4).chain(b.chunks(4)) {
        let mut w = [0u8; 4];
        w[..c.len()].copy_from_slice(c);
        h = (h ^ u32::from_be_bytes(w)).rotate_left(13).wrapping_mul(0x85eb_ca6b);
    }
    // murmur3's finaliser: every input bit moves every output bit.
    h ^= h >> 16;
    h = h.wrapping_mul(0x85eb_ca6b);
    h ^= h >> 13;
    h = h.wrapping_mul(0xc2b2_ae35);
    h ^ (h >> 16)
}

/// The hash of a parsed frame: its 5-tuple for TCP, UDP and SCTP (ports zero for other
/// protocols, and for every IP fragment, so all fragments of a datagram agree); its
/// Ethernet addresses when it is not IP or was not parsed.
pub fn hash_frame(frame: &[u8], layers: &Layers) -> u32 {
    let l3 = layers.l3_offset();
    let (addr_at, addr_len) = match layers.network() {
        Network::Ipv4 => (l3 + 12, 4),
        Network::Ipv6 => (l3 + 8, 16),
        _ => (0, 6),
    };
    let Some(addrs) = frame.get(addr_at..addr_at + 2 * addr_len) else {
        return hash(&[], &[], 0, 0, 0);
    };
    let (src, dst) = addrs.split_at(addr_len);
    let ports = match (layers.l4_offset(), layers.protocol()) {
        (Some(l4), 6 | 17 | 132) if !layers.is_fragment() => frame.get(l4..l4 + 4),
        _ => None,
    };
    let (sport, dport) = ports.map_or((0, 0), |p| {
        (u16::from_be_bytes([p[0], p[1]]), u16::from_be_bytes([p[2], p[3]]))
    });
    let protocol = if matches!(layers.network(), Network::Ipv4 | Network::Ipv6) {
        layers.protocol()
    } else {
        0
    };
    // Ethernet hashes with the destination first: the frame's addresses are dst, src.
    match layers.network() {
        Network::Ipv4 | Network::Ipv6 => hash(src, dst, sport, dport, protocol),
        _ => hash(dst, src, 0, 0, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MacAddr;
    use crate::build::{EthernetRepr, FrameRepr, IpRepr, TransportRepr};

    fn udp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
        let r = FrameRepr {
            ethernet: EthernetRepr {
                src: MacAddr([2, 0, 0, 0, 0, 1]),
                dst: MacAddr([2, 0, 0, 0, 0, 2]),
                vlan_tci: Some(5),
            },
            ip: IpRepr::v4(src, dst),
            transport: TransportRepr::Udp {
                src_port: sport,
                dst_port: dport,
            },
        };
        let mut out = vec![0u8; 128];
        let n = r.emit(&mut out, b"data").unwrap();
        out.truncate(n);
        out
    }

    #[test]
    fn headers_hash_as_the_tuple_does_in_both_directions() {
        let f = udp([10, 0, 0, 1], [10, 0, 0, 2], 1024, 53);
        let h = hash_frame(&f, &Layers::parse(&f).unwrap());
        assert_eq!(h, hash(&[10, 0, 0, 1], &[10, 0, 0, 2], 1024, 53, 17));
        let back = udp([10, 0, 0, 2], [10, 0, 0, 1], 53, 1024);
        assert_eq!(hash_frame(&back, &Layers::parse(&back).unwrap()), h, "symmetric");
        let other = udp([10, 0, 0, 1], [10, 0, 0, 2], 1025, 53);
        assert_ne!(hash_frame(&other, &Layers::parse(&other).unwrap()), h);
    }

    #[test]
    fn fragments_hash_by_addresses_and_spread_well() {
        let mut f = udp([10, 0, 0, 1], [10, 0, 0, 2], 1024, 53);
        f[24] = 0x20; // more fragments (the IPv4 header starts at 18, behind the tag)
        assert_eq!(
            hash_frame(&f, &Layers::parse(&f).unwrap()),
            hash(&[10, 0, 0, 1], &[10, 0, 0, 2], 0, 0, 17)
        );
        // 64k flows differing in one port over 16 buckets: each within 10% of even.
        let mut buckets = [0u32; 16];
        for p in 0..65_536u32 {
            buckets[(hash(&[198, 18, 0, 1], &[198, 19, 0, 1], p as u16, 5001, 17) >> 28) as usize] += 1;
        }
        assert!(buckets.iter().all(|&b| b.abs_diff(4096) < 410), "{buckets:?}");
    }
}
