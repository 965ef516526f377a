//! The far end's answer to a request, made in the request's own buffer: what a
//! responder at the end of a chain sends back through it (the return path NAT and
//! stateful firewalls must pass).
//!
//! The responder is an echo server: a reply carries the request's payload back, so it
//! is the request's size. Addresses and ports swap (which leaves every checksum's sum
//! unchanged); IPv4 TTL and IPv6 hop limit start again at 64. TCP answers as a server
//! does: a SYN gets SYN+ACK, data gets its ACK (with the echoed data), a FIN gets FIN+ACK,
//! a RST nothing; the reply's sequence number is the request's acknowledgment number and
//! its acknowledgment covers what the request carried. ICMP echo requests get echo
//! replies. Checksums are updated for what changed (RFC 1624), never recomputed.

use sfclab_wire::checksum::{update16, update32};

/// Why a frame gets no reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoReply {
    /// Not Ethernet/IPv4 or IPv6 with TCP, UDP or ICMP echo, or cut short.
    Unsupported,
    /// A TCP RST: answered by nothing.
    Reset,
}

const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMP: u8 = 1;
const ICMPV6: u8 = 58;
const TTL: u8 = 64;

fn swap<const N: usize>(f: &mut [u8], a: usize, b: usize) {
    let mut x = [0u8; N];
    x.copy_from_slice(&f[a..a + N]);
    f.copy_within(b..b + N, a);
    f[b..b + N].copy_from_slice(&x);
}

fn be16(f: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([f[at], f[at + 1]])
}

fn be32(f: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([f[at], f[at + 1], f[at + 2], f[at + 3]])
}

/// Turns the request in `frame` into its reply, in place.
pub fn reply_in_place(frame: &mut [u8]) -> Result<(), NoReply> {
    if frame.len() < 14 {
        return Err(NoReply::Unsupported);
    }
    let (l4, proto, l4_len) = match be16(frame, 12) {
        0x0800 => {
            let ihl = usize::from(frame.get(14).ok_or(NoReply::Unsupported)? & 0x0f) * 4;
            let total = usize::from(be16(frame, 16));
            if frame[14] >> 4 != 4 || ihl < 20 || total < ihl || 14 + total > frame.len() {
                return Err(NoReply::Unsupported);
            }
            (14 + ihl, frame[23], total - ihl)
        }
        0x86dd if frame.len() >= 54 => (54, frame[20], usize::from(be16(frame, 18))),
        _ => return Err(NoReply::Unsupported),
    };
    if l4 + l4_len > frame.len() {
        return Err(NoReply::Unsupported);
    }
    // Work out the transport's reply first: nothing is written for a frame not answered.
    let v4 = l4 != 54;
    match proto {
        TCP if l4_len >= 20 => tcp_reply(frame, l4, l4_len)?,
        UDP if l4_len >= 8 => swap::<2>(frame, l4, l4 + 2),
        ICMP if v4 && l4_len >= 8 && frame[l4] == 8 => {
            let csum = update16(be16(frame, l4 + 2), 0x0800, 0x0000);
            frame[l4] = 0;
            frame[l4 + 2..l4 + 4].copy_from_slice(&csum.to_be_bytes());
        }
        ICMPV6 if !v4 && l4_len >= 8 && frame[l4] == 128 => {
            // Echo request 128 -> reply 129; the pseudo-header's sum is unchanged by the swap.
            let csum = update16(be16(frame, l4 + 2), 0x8000, 0x8100);
            frame[l4] = 129;
            frame[l4 + 2..l4 + 4].copy_from_slice(&csum.to_be_bytes());
        }
        _ => return Err(NoReply::Unsupported),
    }
    swap::<6>(frame, 0, 6);
    if v4 {
        swap::<4>(frame, 26, 30);
        let old = be16(frame, 22);
        let new = u16::from_be_bytes([TTL, frame[23]]);
        let csum = update16(be16(frame, 24), old, new);
        frame[22] = TTL;
        frame[24..26].copy_from_slice(&csum.to_be_bytes());
    } else {
        swap::<16>(frame, 22, 38);
        frame[21] = TTL;
    }
    Ok(())
}

/// The TCP part of a reply: ports, flags, sequence and acknowledgment numbers.
fn tcp_reply(frame: &mut [u8], l4: usize, l4_len: usize) -> Result<(), NoReply> {
    let off = usize::from(frame[l4 + 12] >> 4) * 4;
    if off < 20 || off > l4_len {
        return Err(NoReply::Unsupported);
    }
    let flags = frame[l4 + 13];
    if flags & 0x04 != 0 {
        return Err(NoReply::Reset);
    }
    let payload = (l4_len - off) as u32;
    let (syn, fin) = (flags & 0x02 != 0, flags & 0x01 != 0);
    let reply_flags = match (syn, fin) {
        (true, _) => 0x12,
        (false, true) => 0x11,
        _ if payload > 0 => 0x18,
        _ => 0x10,
    };
    let (seq, ack) = (be32(frame, l4 + 4), be32(frame, l4 + 8));
    let new_seq = ack;
    let new_ack = seq.wrapping_add(payload + u32::from(syn) + u32::from(fin));
    let mut csum = be16(frame, l4 + 16);
    csum = update32(csum, seq, new_seq);
    csum = update32(csum, ack, new_ack);
    let word = |f: u8| u16::from_be_bytes([frame[l4 + 12], f]);
    csum = update16(csum, word(flags), word(reply_flags));
    frame[l4 + 4..l4 + 8].copy_from_slice(&new_seq.to_be_bytes());
    frame[l4 + 8..l4 + 12].copy_from_slice(&new_ack.to_be_bytes());
    frame[l4 + 13] = reply_flags;
    frame[l4 + 16..l4 + 18].copy_from_slice(&csum.to_be_bytes());
    swap::<2>(frame, l4, l4 + 2);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TransportSlice};

    const A: [u8; 4] = [198, 18, 0, 7];
    const B: [u8; 4] = [198, 19, 0, 1];

    fn tcp(flags: &str, seq: u32, ack: u32, payload: &[u8]) -> Vec<u8> {
        let mut b = PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4(A, B, 61)
            .tcp(1024, 5001, seq, 65535);
        if flags.contains('S') {
            b = b.syn();
        }
        if flags.contains('A') {
            b = b.ack(ack);
        }
        if flags.contains('F') {
            b = b.fin();
        }
        if flags.contains('R') {
            b = b.rst();
        }
        let mut out = Vec::new();
        b.write(&mut out, payload).unwrap();
        out
    }

    /// Source, destination, ports, TTL, and for TCP (flags byte, seq, ack).
    type Seen = ([u8; 4], [u8; 4], u16, u16, u8, Option<(u8, u32, u32)>);

    /// Checks every checksum with etherparse's own computation; returns what it saw.
    fn read(f: &[u8]) -> Seen {
        let p = SlicedPacket::from_ethernet(f).unwrap();
        let Some(NetSlice::Ipv4(ip)) = p.net else {
            panic!("not IPv4")
        };
        let h = ip.header();
        assert_eq!(
            h.header_checksum(),
            h.to_header().calc_header_checksum(),
            "IPv4 checksum"
        );
        let (sport, dport, tcp) = match p.transport.unwrap() {
            TransportSlice::Tcp(t) => {
                let want = t
                    .to_header()
                    .calc_checksum_ipv4_raw(h.source(), h.destination(), t.payload())
                    .unwrap();
                assert_eq!(t.checksum(), want, "TCP checksum");
                (
                    t.source_port(),
                    t.destination_port(),
                    Some((f[34 + 13], t.sequence_number(), t.acknowledgment_number())),
                )
            }
            TransportSlice::Udp(u) => {
                let want = u
                    .to_header()
                    .calc_checksum_ipv4_raw(h.source(), h.destination(), u.payload())
                    .unwrap();
                assert_eq!(u.checksum(), want, "UDP checksum");
                (u.source_port(), u.destination_port(), None)
            }
            TransportSlice::Icmpv4(i) => {
                assert_eq!(
                    i.checksum(),
                    i.header().icmp_type.calc_checksum(i.payload()),
                    "ICMP checksum"
                );
                (0, 0, None)
            }
            _ => panic!("unexpected transport"),
        };
        (h.source(), h.destination(), sport, dport, h.ttl(), tcp)
    }

    #[test]
    fn tcp_handshake_data_and_close_are_answered_as_a_server_does() {
        // (request flags, seq, ack, payload) -> (reply flags, reply seq, reply ack)
        let cases: [(&str, u32, u32, usize, u8, u32, u32); 4] = [
            ("S", 1000, 0, 0, 0x12, 0, 1001),
            ("S", 1000, 0, 10, 0x12, 0, 1011),
            ("A", 1001, 77, 18, 0x18, 77, 1019),
            ("FA", 1019, 77, 0, 0x11, 77, 1020),
        ];
        for (flags, seq, ack, len, want_flags, want_seq, want_ack) in cases {
            let mut f = tcp(flags, seq, ack, &vec![0xab; len]);
            let before = f.clone();
            reply_in_place(&mut f).unwrap();
            let (src, dst, sport, dport, ttl, t) = read(&f);
            assert_eq!((src, dst, sport, dport, ttl), (B, A, 5001, 1024, 64), "{flags}");
            assert_eq!(t, Some((want_flags, want_seq, want_ack)), "{flags}");
            assert_eq!(&f[..6], &before[6..12], "MACs swap");
            assert_eq!(f.len(), before.len());
        }
        let mut rst = tcp("R", 5, 0, &[]);
        let before = rst.clone();
        assert_eq!(reply_in_place(&mut rst), Err(NoReply::Reset));
        assert_eq!(rst, before, "an unanswered frame is left as it was");
    }

    #[test]
    fn udp_is_echoed_and_icmp_echo_answered() {
        let mut out = Vec::new();
        PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4(A, B, 3)
            .udp(1024, 53)
            .write(&mut out, &[1, 2, 3, 4, 5])
            .unwrap();
        reply_in_place(&mut out).unwrap();
        assert_eq!(read(&out), (B, A, 53, 1024, 64, None));
        let mut ping = Vec::new();
        PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4(A, B, 64)
            .icmpv4_echo_request(7, 1)
            .write(&mut ping, &[9; 8])
            .unwrap();
        reply_in_place(&mut ping).unwrap();
        read(&ping);
        assert_eq!(ping[34], 0, "echo reply");
    }

    #[test]
    fn ipv6_udp_is_echoed_with_a_valid_checksum() {
        let (a, b) = (
            [0x20, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7],
            [0x20, 1, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1],
        );
        let mut f = Vec::new();
        PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv6(a, b, 5)
            .udp(1024, 5001)
            .write(&mut f, &[7; 11])
            .unwrap();
        reply_in_place(&mut f).unwrap();
        let p = SlicedPacket::from_ethernet(&f).unwrap();
        let Some(NetSlice::Ipv6(ip)) = p.net else {
            panic!("not IPv6")
        };
        let h = ip.header();
        assert_eq!((h.source(), h.destination(), h.hop_limit()), (b, a, 64));
        let Some(TransportSlice::Udp(u)) = p.transport else {
            panic!("not UDP")
        };
        let want = u
            .to_header()
            .calc_checksum_ipv6_raw(h.source(), h.destination(), u.payload())
            .unwrap();
        assert_eq!(
            (u.source_port(), u.destination_port(), u.checksum()),
            (5001, 1024, want)
        );
    }

    #[test]
    fn what_cannot_be_answered_is_refused_untouched() {
        for mut f in [vec![0u8; 10], vec![0u8; 60], {
            let mut arp = vec![0u8; 60];
            arp[12..14].copy_from_slice(&[0x08, 0x06]);
            arp
        }] {
            let before = f.clone();
            assert_eq!(reply_in_place(&mut f), Err(NoReply::Unsupported));
            assert_eq!(f, before);
        }
        // A length field that claims more than the frame holds.
        let mut f = tcp("S", 1, 0, &[]);
        f[16..18].copy_from_slice(&1000u16.to_be_bytes());
        assert_eq!(reply_in_place(&mut f), Err(NoReply::Unsupported));
    }

    proptest::proptest! {
        /// Any bytes: no panic, and a refused frame is left as it was.
        #[test]
        fn never_panics(mut f in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
            let before = f.clone();
            if reply_in_place(&mut f).is_err() {
                proptest::prop_assert_eq!(f, before);
            }
        }
    }
}
