//! The no-panic contract: every view accepts arbitrary bytes and answers with a value.

use proptest::prelude::*;
use sfclab_wire::arp::ArpRepr;
use sfclab_wire::{EthernetHeader, FrameRepr, Ipv4Header, Ipv6Header, Layers, TcpHeader, UdpHeader, checksum};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..128)) {
        let _ = EthernetHeader::parse(&bytes);
        if let Ok((_, hlen, l4)) = Ipv4Header::check(&bytes) {
            prop_assert!(hlen >= 20 && hlen <= bytes.len());
            prop_assert!(l4.len() <= bytes.len() - hlen);
        }
        if let Ok((_, payload)) = Ipv6Header::check(&bytes) {
            prop_assert!(payload.len() + 40 <= bytes.len());
        }
        if let Ok((_, payload)) = TcpHeader::check(&bytes) {
            prop_assert!(payload.len() + 20 <= bytes.len());
        }
        if bytes.len() >= 8 {
            let _ = UdpHeader::checksum_ok(0, &bytes, true);
            let _ = UdpHeader::compute_checksum(0, &bytes);
        }
        let _ = checksum::checksum(&bytes);
        let _ = ArpRepr::parse(&bytes);
        let _ = FrameRepr::parse(&bytes);
        if let Ok((_, walk)) = Ipv6Header::walk(&bytes) {
            prop_assert!(walk.l4_offset <= bytes.len());
        }
        for option in TcpHeader::options(&bytes) {
            let _ = option;
        }
    }

    /// Mutated valid frames (VLAN-tagged, IPv6 with extension headers) stress the
    /// parser step deeper than random bytes reach: its offsets always stay in the frame.
    #[test]
    fn the_parser_step_keeps_offsets_inside_the_frame(
        base in 0usize..3,
        flips in proptest::collection::vec((0usize..96, any::<u8>()), 0..6),
        cut in 0usize..100,
    ) {
        let mut f = hex(FIXTURES[base].0);
        for (at, v) in flips {
            if let Some(b) = f.get_mut(at) {
                *b = v;
            }
        }
        f.truncate(cut.max(1));
        if let Ok((_, payload)) = FrameRepr::parse(&f) {
            prop_assert!(payload.len() < f.len());
        }
        if let Ok(l) = Layers::parse(&f) {
            prop_assert!(l.l3_offset() <= f.len());
            if let Some(l4) = l.l4_offset() {
                prop_assert!(l4 <= f.len());
            }
        }
    }
}

/// Valid frames and where their upper layer starts: UDP behind a VLAN tag; UDP behind
/// an IPv6 hop-by-hop header; a later IPv6 fragment (no L4) behind QinQ tags.
const FIXTURES: [(&str, Option<usize>); 3] = [
    (
        "020000000002 020000000001 8100 0007 0800 45000024 00000000 4011 0000 0a000001 0a000002 04000013 0010 0000 0000000000000000",
        Some(38),
    ),
    (
        "020000000002 020000000001 86dd 60000000 0018 00 40 20010db8000000000000000000000001 20010db8000000000000000000000002 11 00 0000 00000000 0400 0013 0008 0000 0000000000000000",
        Some(62),
    ),
    (
        "020000000002 020000000001 88a8 0001 8100 0002 86dd 60000000 0010 2c 40 20010db8000000000000000000000001 20010db8000000000000000000000002 06 00 0011 00000001 0000000000000000",
        None,
    ),
];

#[test]
fn the_fixtures_parse_as_described() {
    for (frame, l4) in FIXTURES {
        let l = Layers::parse(&hex(frame)).unwrap();
        assert_eq!(l.l4_offset(), l4, "{frame}");
    }
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}
