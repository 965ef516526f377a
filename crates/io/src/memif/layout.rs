//! The shared-memory layout both ends of a memif connection agree on (DPDK's
//! `drivers/net/memif/memif.h`, libmemif's `memif.h`, version 2.0): a ring is a header
//! of two cache lines (cookie, flags and `head` in the first, `tail` in the second)
//! followed by its 16-byte descriptors; a descriptor names a buffer by region, offset
//! and length.

/// Written at the start of every ring by the side that owns the memory; a ring without
/// it is not a memif ring.
pub const COOKIE: u32 = 0x03E3_1F20;
/// Protocol version 2.0, as `(major << 8) | minor`.
pub const VERSION: u16 = 2 << 8;
/// Bytes of the ring header before the descriptors: two cache lines, so that `head`
/// (written by the producer) and `tail` (by the consumer) never share one.
pub const RING_HEADER: usize = 128;
/// Offsets in the ring header.
pub const RING_COOKIE_AT: usize = 0;
pub const RING_FLAGS_AT: usize = 4;
pub const RING_HEAD_AT: usize = 6;
pub const RING_TAIL_AT: usize = 64;
/// Ring flag: the receiver does not want to be woken through the ring's eventfd.
pub const RING_FLAG_MASK_INT: u16 = 1;
/// Bytes of one descriptor.
pub const DESC: usize = 16;
/// Descriptor flag: the frame continues in the next descriptor (chained buffers).
pub const DESC_FLAG_NEXT: u16 = 1;
/// Largest ring a peer may ask for (log2), as DPDK's `ETH_MEMIF_MAX_LOG2_RING_SIZE`.
pub const MAX_LOG2_RING_SIZE: u8 = 14;

/// Bytes a ring of `2^log2_size` descriptors takes in its region.
pub const fn ring_bytes(log2_size: u8) -> usize {
    RING_HEADER + DESC * (1usize << log2_size)
}

/// One descriptor as it lies in shared memory (little-endian, as every memif peer on
/// x86 and arm64 writes it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Desc {
    pub flags: u16,
    pub region: u16,
    pub length: u32,
    pub offset: u32,
    pub metadata: u32,
}

impl Desc {
    #[inline(always)]
    pub fn to_bytes(self) -> [u8; DESC] {
        let mut b = [0u8; DESC];
        b[0..2].copy_from_slice(&self.flags.to_le_bytes());
        b[2..4].copy_from_slice(&self.region.to_le_bytes());
        b[4..8].copy_from_slice(&self.length.to_le_bytes());
        b[8..12].copy_from_slice(&self.offset.to_le_bytes());
        b[12..16].copy_from_slice(&self.metadata.to_le_bytes());
        b
    }

    /// The descriptor as the two little-endian words it is in memory.
    #[inline(always)]
    pub fn to_words(self) -> (u64, u64) {
        (
            u64::from(self.flags) | u64::from(self.region) << 16 | u64::from(self.length) << 32,
            u64::from(self.offset) | u64::from(self.metadata) << 32,
        )
    }

    /// The descriptor from the two little-endian words of memory it is.
    #[inline(always)]
    pub fn from_words(lo: u64, hi: u64) -> Desc {
        Desc {
            flags: lo as u16,
            region: (lo >> 16) as u16,
            length: (lo >> 32) as u32,
            offset: hi as u32,
            metadata: (hi >> 32) as u32,
        }
    }

    #[inline(always)]
    pub fn from_bytes(b: &[u8; DESC]) -> Desc {
        let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Desc {
            flags: u16_at(0),
            region: u16_at(2),
            length: u32_at(4),
            offset: u32_at(8),
            metadata: u32_at(12),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_layout_is_the_protocols() {
        // memif.h: sizeof(memif_desc_t) == 16; the descriptors start at the third cache
        // line's mark, 128 bytes in; a 1024-slot ring is 16 KiB of descriptors.
        assert_eq!(ring_bytes(10), 128 + 16 * 1024);
        assert_eq!(VERSION, 0x0200);
        let d = Desc {
            flags: DESC_FLAG_NEXT,
            region: 1,
            length: 60,
            offset: 0x1234_5678,
            metadata: 7,
        };
        let b = d.to_bytes();
        assert_eq!(&b[..8], &[1, 0, 1, 0, 60, 0, 0, 0]);
        assert_eq!(&b[8..12], &[0x78, 0x56, 0x34, 0x12]);
        assert_eq!(Desc::from_bytes(&b), d);
        // As words of memory (little-endian, as x86 and arm64 read them).
        let (lo, hi) = d.to_words();
        assert_eq!(
            (lo.to_le_bytes(), hi.to_le_bytes()),
            (b[..8].try_into().unwrap(), b[8..].try_into().unwrap())
        );
        assert_eq!(Desc::from_words(lo, hi), d);
    }
}
