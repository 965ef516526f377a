//! The no-panic contract: every view accepts arbitrary bytes and answers with a value.

use proptest::prelude::*;
use sfclab_wire::{EthernetHeader, Ipv4Header, Ipv6Header, TcpHeader, UdpHeader, checksum};

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
    }
}
