//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! Sums are kept as `u32` partial sums so that pseudo-headers and payloads can be
//! added piecewise; `fold` turns a partial sum into the 16-bit one's complement sum.

/// Adds `data` to the partial sum `acc`, as big-endian 16-bit words (odd tail padded
/// with zero). The result is at most 0xffff, so a few may be added before `fold`.
///
/// Eight bytes at a time into a 64-bit sum whose carries are added back in (RFC 1071,
/// 2(C), deferred carries): 2^16, 2^32 and 2^64 are all 1 modulo 0xffff, so this is
/// the one's complement sum of the words without a fold per word, the chain of
/// dependent steps that made the word-at-a-time loop slow.
#[inline]
pub fn sum(acc: u32, data: &[u8]) -> u32 {
    let add = |wide: u64, x: u64| {
        let (s, carry) = wide.overflowing_add(x);
        s + u64::from(carry)
    };
    let mut wide = u64::from(acc);
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        wide = add(wide, u64::from_be_bytes(c.try_into().expect("8 bytes")));
    }
    let mut words = chunks.remainder().chunks_exact(2);
    for w in &mut words {
        wide = add(wide, u64::from(u16::from_be_bytes([w[0], w[1]])));
    }
    if let [last] = words.remainder() {
        wide = add(wide, u64::from(*last) << 8);
    }
    // Down to 32 bits by two end-around carries (at most 2^33 - 2, then at most
    // 2^32 - 1; a sum that was not zero stays so), then `fold`.
    let x = (wide >> 32) + (wide & 0xffff_ffff);
    let x = (x >> 32) + (x & 0xffff_ffff);
    u32::from(fold(x as u32))
}

/// Folds a partial sum to 16 bits (one's complement addition of the carries).
///
/// Two end-around carries, always: the first leaves at most 0x1_fffe, and the second
/// then adds a carry of at most 1 to at most 0xfffe. No loop: its exit branch was
/// mispredicted often enough to show in esp-encrypt's profile.
#[inline]
pub fn fold(acc: u32) -> u16 {
    let acc = (acc & 0xffff) + (acc >> 16);
    let acc = (acc & 0xffff) + (acc >> 16);
    acc as u16
}

/// The checksum field value for `data`: the complement of its one's complement sum.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !fold(sum(0, data))
}

/// Partial sum of the IPv4 pseudo-header used by UDP and TCP (RFC 768, RFC 793).
#[inline]
pub fn pseudo_header_v4(src: [u8; 4], dst: [u8; 4], protocol: u8, l4_len: u16) -> u32 {
    let acc = sum(sum(0, &src), &dst);
    acc + u32::from(protocol) + u32::from(l4_len)
}

/// Partial sum of the IPv6 pseudo-header (RFC 8200 section 8.1).
#[inline]
pub fn pseudo_header_v6(src: [u8; 16], dst: [u8; 16], next_header: u8, l4_len: u32) -> u32 {
    let acc = sum(sum(0, &src), &dst);
    acc + (l4_len >> 16) + (l4_len & 0xffff) + u32::from(next_header)
}

/// Checksum of an L4 segment (header with its checksum field zeroed, plus payload)
/// over a pseudo-header partial sum. UDP maps a result of 0 to 0xffff (RFC 768).
#[inline]
pub fn l4_checksum(pseudo: u32, segment: &[u8]) -> u16 {
    !fold(sum(pseudo, segment))
}

/// RFC 1624 eq. 3: the new checksum after one 16-bit word changes from `old` to `new`.
/// `HC' = ~(~HC + ~m + m')`, which never yields the -0 ambiguity of eq. 2.
#[inline]
pub fn update16(check: u16, old: u16, new: u16) -> u16 {
    let acc = u32::from(!check) + u32::from(!old) + u32::from(new);
    !fold(acc)
}

/// RFC 1624 update for a 32-bit field (an IPv4 address or a port pair).
#[inline]
pub fn update32(check: u16, old: u32, new: u32) -> u16 {
    let acc =
        u32::from(!check) + u32::from(!(old >> 16) as u16) + u32::from(!(old as u16)) + (new >> 16) + (new & 0xffff);
    !fold(acc)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header from RFC 1071's discussion, as commonly quoted: checksum 0xb861.
    const IPV4_HEADER: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
        0x00, 0xc7,
    ];

    #[test]
    fn ipv4_header_vector() {
        assert_eq!(checksum(&IPV4_HEADER), 0xb861);
        let mut with = IPV4_HEADER;
        with[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        // A correct header sums to 0xffff, so its checksum over itself is 0.
        assert_eq!(checksum(&with), 0);
    }

    #[test]
    fn rfc1071_example_sum() {
        // RFC 1071 section 3: 00 01 f2 03 f4 f5 f6 f7 sums to ddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum(0, &data)), 0xddf2);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(fold(sum(0, &[0x12, 0x34, 0x56])), 0x1234 + 0x5600);
    }

    #[test]
    fn incremental_equals_full_recompute() {
        let mut hdr = IPV4_HEADER;
        hdr[10..12].copy_from_slice(&checksum(&IPV4_HEADER).to_be_bytes());
        // Decrement TTL: the word at offset 8 is TTL|protocol.
        let old = u16::from_be_bytes([hdr[8], hdr[9]]);
        hdr[8] -= 1;
        let new = u16::from_be_bytes([hdr[8], hdr[9]]);
        let inc = update16(0xb861, old, new);
        hdr[10..12].fill(0);
        assert_eq!(inc, checksum(&hdr));
    }

    #[test]
    fn incremental_address_rewrite() {
        let mut hdr = IPV4_HEADER;
        let old = u32::from_be_bytes([hdr[12], hdr[13], hdr[14], hdr[15]]);
        let new = u32::from_be_bytes([198, 18, 0, 7]);
        hdr[12..16].copy_from_slice(&new.to_be_bytes());
        assert_eq!(update32(0xb861, old, new), checksum(&hdr));
    }

    /// The word-at-a-time sum `sum` replaced: the definition it must keep.
    fn sum_word_by_word(mut acc: u32, data: &[u8]) -> u32 {
        let mut chunks = data.chunks_exact(2);
        for c in &mut chunks {
            acc = acc.wrapping_add(u32::from(u16::from_be_bytes([c[0], c[1]])));
            acc = (acc & 0xffff) + (acc >> 16);
        }
        if let [last] = chunks.remainder() {
            acc = acc.wrapping_add(u32::from(*last) << 8);
        }
        acc
    }

    #[test]
    fn all_ones_and_zeros_keep_their_sums() {
        // The largest words, many of them: the carries come back in.
        assert_eq!(fold(sum(0, &[0xff; 1500])), 0xffff);
        assert_eq!(
            fold(sum(0x3_fffc, &[0xff; 9])),
            fold(sum_word_by_word(0x3_fffc, &[0xff; 9]))
        );
        // Nothing at all sums to zero, not to the other zero.
        assert_eq!(sum(0, &[0; 64]), 0);
        assert_eq!(sum(0, &[]), 0);
    }

    /// The fold as a loop until no carry is left: the definition the two-step fold keeps.
    fn fold_until_no_carry(mut acc: u32) -> u16 {
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    #[test]
    fn two_carries_fold_every_sum_the_loop_does() {
        // Every value around each point where a carry appears or a second one is needed.
        let edges = [
            0u32,
            0xffff,
            0x1_0000,
            0x1_fffe,
            0x1_ffff,
            0xfffe_ffff,
            0xffff_0000,
            0xffff_fffe,
            u32::MAX,
        ];
        for edge in edges {
            for acc in edge.saturating_sub(300)..=edge.saturating_add(300) {
                assert_eq!(fold(acc), fold_until_no_carry(acc), "{acc:#x}");
            }
        }
        // And a stride through all of them.
        for acc in (0..=u32::MAX).step_by(65_521) {
            assert_eq!(fold(acc), fold_until_no_carry(acc), "{acc:#x}");
        }
    }

    proptest::proptest! {
        #[test]
        fn the_two_step_fold_is_the_loops(acc in proptest::num::u32::ANY) {
            proptest::prop_assert_eq!(fold(acc), fold_until_no_carry(acc));
        }

        #[test]
        fn the_wide_sum_is_the_word_by_word_one(data in proptest::collection::vec(proptest::num::u8::ANY, 0..200), acc in 0u32..0x4_0000) {
            let wide = sum(acc, &data);
            proptest::prop_assert!(wide <= 0xffff);
            proptest::prop_assert_eq!(fold(wide), fold(sum_word_by_word(acc, &data)));
        }

        #[test]
        fn incremental_matches_recompute(data in proptest::collection::vec(proptest::num::u8::ANY, 20..64), at in 0usize..10, new in proptest::num::u16::ANY) {
            let mut bytes = data.clone();
            let off = (at * 2).min(bytes.len() - 2) & !1;
            let before = checksum(&bytes);
            let old = u16::from_be_bytes([bytes[off], bytes[off + 1]]);
            bytes[off..off + 2].copy_from_slice(&new.to_be_bytes());
            let after = checksum(&bytes);
            // One's complement has two zeros; both encodings verify the same.
            let inc = update16(before, old, new);
            proptest::prop_assert!(inc == after || (fold(u32::from(inc)) == 0xffff && after == 0) || (inc == 0 && after == 0xffff));
        }
    }
}
