//! A source's stamp of a run of packets: metadata and the frame's first 64 bytes from
//! templates ([`Packet::stamp`] per packet), through the widest stores the CPU has.
//!
//! The stamp is bound by stores: per packet, the metadata (32 bytes), the notes' mask
//! and the 64-byte head. Through 8- and 16-byte stores that is nine; with AVX2 four
//! (the metadata one 32-byte store, the head two); with AVX-512 three. The CPU is asked
//! once per run of packets (a cached flag), and every path writes the same bytes.

use crate::packet::{Packet, PacketMeta};

/// Stamps `packets` in turn: packet k gets `fresh` with flow `flow + k` (wrapping at
/// `heads.len()`), that flow's hash and sequence number `seq + k`. Returns the next flow
/// and sequence number.
#[inline]
pub(crate) fn stamp<'a>(
    packets: impl Iterator<Item = &'a mut Packet>,
    fresh: &PacketMeta,
    heads: &[[u8; 64]],
    hashes: &[u32],
    flow: usize,
    seq: u32,
) -> (usize, u32) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has AVX-512F, just checked.
            return unsafe { wide::stamp_avx512(packets, fresh, heads, hashes, flow, seq) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2, just checked.
            return unsafe { wide::stamp_avx2(packets, fresh, heads, hashes, flow, seq) };
        }
    }
    stamp_each(packets, fresh, heads, hashes, flow, seq)
}

/// The portable path: [`Packet::stamp`] per packet.
#[inline(always)]
fn stamp_each<'a>(
    packets: impl Iterator<Item = &'a mut Packet>,
    fresh: &PacketMeta,
    heads: &[[u8; 64]],
    hashes: &[u32],
    mut flow: usize,
    mut seq: u32,
) -> (usize, u32) {
    // A copy in registers: through the reference it would be reloaded per packet
    // (the compiler cannot rule out that a packet write aliases it).
    let fresh = *fresh;
    let nflows = heads.len();
    // Both tables cut to one length: one bounds check per packet covers both.
    let hashes = &hashes[..nflows];
    for p in packets {
        p.stamp(&fresh, hashes[flow], seq, &heads[flow]);
        flow = if flow + 1 == nflows { 0 } else { flow + 1 };
        seq = seq.wrapping_add(1);
    }
    (flow, seq)
}

#[cfg(all(target_arch = "x86_64", not(miri)))]
mod wide {
    use super::{Packet, PacketMeta};
    use std::arch::x86_64::{__m256i, _mm256_insert_epi64, _mm256_loadu_si256, _mm256_storeu_si256};

    /// The metadata's second 8 bytes: the flow hash, then the sequence number.
    const HASH_AND_SEQ: usize = 1;
    const _: () = {
        assert!(std::mem::offset_of!(PacketMeta, flow_hash) == 8 * HASH_AND_SEQ);
        assert!(std::mem::offset_of!(PacketMeta, seq) == 8 * HASH_AND_SEQ + 4);
        assert!(std::mem::size_of::<PacketMeta>() == 32);
    };

    /// `fresh` with this packet's flow hash and sequence number, as one 32-byte value.
    #[inline]
    #[target_feature(enable = "avx2")]
    fn meta(fresh: __m256i, flow_hash: u32, seq: u32) -> __m256i {
        let word = (u64::from(seq) << 32) | u64::from(flow_hash);
        _mm256_insert_epi64::<{ HASH_AND_SEQ as i32 }>(fresh, word as i64)
    }

    /// Writes `meta` (a valid [`PacketMeta`]'s bytes) into `p`'s metadata and clears its
    /// notes.
    #[inline]
    #[target_feature(enable = "avx")]
    fn write_meta(p: &mut Packet, meta: __m256i) {
        let to = std::ptr::from_mut(&mut p.meta).cast::<__m256i>();
        // SAFETY: `to` is the packet's 32-byte metadata, writable through `p`; the store
        // is unaligned. The bytes form a valid PacketMeta: all of them come from `fresh`
        // but the flow hash and the sequence number (plain integers, little-endian at
        // their offsets, checked above), and every field of PacketMeta is an integer.
        unsafe { _mm256_storeu_si256(to, meta) };
        p.notes.clear();
    }

    /// # Safety
    /// The CPU has AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn stamp_avx512<'a>(
        packets: impl Iterator<Item = &'a mut Packet>,
        fresh: &PacketMeta,
        heads: &[[u8; 64]],
        hashes: &[u32],
        flow: usize,
        seq: u32,
    ) -> (usize, u32) {
        // SAFETY: AVX-512F includes AVX2.
        unsafe { stamp_wide(packets, fresh, heads, hashes, flow, seq) }
    }

    /// # Safety
    /// The CPU has AVX2.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn stamp_avx2<'a>(
        packets: impl Iterator<Item = &'a mut Packet>,
        fresh: &PacketMeta,
        heads: &[[u8; 64]],
        hashes: &[u32],
        flow: usize,
        seq: u32,
    ) -> (usize, u32) {
        // SAFETY: the caller's.
        unsafe { stamp_wide(packets, fresh, heads, hashes, flow, seq) }
    }

    /// The loop of both wide paths: the metadata in one 32-byte store, the head copied as
    /// wide as the caller's features allow (one 64-byte store with AVX-512, two 32-byte
    /// ones with AVX2).
    ///
    /// # Safety
    /// The CPU has AVX2.
    #[inline(always)]
    unsafe fn stamp_wide<'a>(
        packets: impl Iterator<Item = &'a mut Packet>,
        fresh: &PacketMeta,
        heads: &[[u8; 64]],
        hashes: &[u32],
        mut flow: usize,
        mut seq: u32,
    ) -> (usize, u32) {
        // SAFETY: `fresh` is 32 readable bytes; the load is unaligned. AVX: the caller's.
        let fresh = unsafe { _mm256_loadu_si256(std::ptr::from_ref(fresh).cast()) };
        let nflows = heads.len();
        let hashes = &hashes[..nflows];
        for p in packets {
            // SAFETY: AVX2, the caller's.
            unsafe { write_meta(p, meta(fresh, hashes[flow], seq)) };
            *p.head_mut_64() = heads[flow];
            flow = if flow + 1 == nflows { 0 } else { flow + 1 };
            seq = seq.wrapping_add(1);
        }
        (flow, seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::packet::Note;
    use crate::{Batch, PacketPool};

    type Path = fn(&mut Batch, usize, &PacketMeta, &[[u8; 64]], &[u32], usize, u32) -> (usize, u32);

    /// Three flows, each head a distinct byte pattern.
    fn heads() -> Vec<[u8; 64]> {
        (0..3u8).map(|f| std::array::from_fn(|k| f * 64 + k as u8)).collect()
    }

    /// Runs `path` over packets 5..32 of a batch whose buffers carry an old frame, notes
    /// and metadata, and checks each packet against [`Packet::stamp`] on another.
    fn stamps_as_the_packet_does(path: Path) {
        let (heads, hashes) = (heads(), [0xdead_beef, 7, 0x0102_0304]);
        let fresh = PacketMeta::fresh(60, 3, 0x40);
        let mut pool = PacketPool::new(64);
        let (mut got, mut want) = (Batch::new(32), Batch::new(32));
        pool.alloc_into(&mut got, 32);
        pool.alloc_into(&mut want, 32);
        for p in got.iter_mut().chain(want.iter_mut()) {
            p.reset(200).fill(0xee);
            p.meta.flags = 0xffff;
            p.meta.timestamp = 99;
            p.notes.set(Note::COLOUR, 3);
        }
        let (first, flow, seq) = (5, 2, u32::MAX - 3);
        let next = path(&mut got, first, &fresh, &heads, &hashes, flow, seq);
        let (mut f, mut s) = (flow, seq);
        for p in want.iter_mut().skip(first) {
            p.stamp(&fresh, hashes[f], s, &heads[f]);
            (f, s) = ((f + 1) % 3, s.wrapping_add(1));
        }
        assert_eq!(next, (f, s), "the next flow and sequence number");
        for (k, (g, w)) in got.iter().zip(want.iter()).enumerate() {
            assert_eq!(
                format!("{:?}", g.meta),
                format!("{:?}", w.meta),
                "packet {k}'s metadata"
            );
            assert_eq!(g.notes, w.notes, "packet {k}'s notes");
            assert_eq!(g.data(), w.data(), "packet {k}'s frame");
        }
        // The stamp's head is 64 bytes of a 60-byte frame: the last 4 land past it.
        let p = got.get_mut(first);
        assert_eq!(p.head_mut_64(), &heads[flow]);
        pool.free_batch(&mut got);
        pool.free_batch(&mut want);
    }

    #[test]
    fn the_portable_path_stamps_as_the_packet_does() {
        stamps_as_the_packet_does(|b, first, fresh, heads, hashes, flow, seq| {
            stamp_each(b.iter_mut_from(first), fresh, heads, hashes, flow, seq)
        });
    }

    #[test]
    fn the_path_this_cpu_takes_stamps_as_the_packet_does() {
        stamps_as_the_packet_does(Batch::stamp_from);
    }

    #[cfg(all(target_arch = "x86_64", not(miri)))]
    #[test]
    fn the_avx2_path_stamps_as_the_packet_does() {
        if !std::arch::is_x86_feature_detected!("avx2") {
            eprintln!("skipped: this CPU has no AVX2");
            return;
        }
        stamps_as_the_packet_does(|b, first, fresh, heads, hashes, flow, seq| {
            // SAFETY: the CPU has AVX2, checked above.
            unsafe { wide::stamp_avx2(b.iter_mut_from(first), fresh, heads, hashes, flow, seq) }
        });
    }

    #[cfg(all(target_arch = "x86_64", not(miri)))]
    #[test]
    fn the_avx512_path_stamps_as_the_packet_does() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("skipped: this CPU has no AVX-512F");
            return;
        }
        stamps_as_the_packet_does(|b, first, fresh, heads, hashes, flow, seq| {
            // SAFETY: the CPU has AVX-512F, checked above.
            unsafe { wide::stamp_avx512(b.iter_mut_from(first), fresh, heads, hashes, flow, seq) }
        });
    }
}
