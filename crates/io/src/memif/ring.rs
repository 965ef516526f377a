//! One descriptor ring in shared memory, as [`super::layout`] lays it out: `head`,
//! `tail` and `flags` are read and written as atomics (the peer is another process doing
//! the same), descriptors are copied whole in and out.
//!
//! Who moves what (memif 2.0): on a client-to-server ring the client produces (fills
//! descriptors, moves `head`) and the server consumes (moves `tail`); on a
//! server-to-client ring the client hands the server empty buffers by moving `head`, the
//! server fills them and moves `tail`. Slots count up and wrap at 2^16; a slot's index
//! in the ring is `slot & mask`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU16, AtomicU32};

use super::layout::{
    DESC, Desc, MAX_LOG2_RING_SIZE, RING_COOKIE_AT, RING_FLAGS_AT, RING_HEAD_AT, RING_HEADER, RING_TAIL_AT, ring_bytes,
};
use super::region::Region;

/// A ring inside a region. Its fields are private: every address formed from them was
/// checked to lie inside the region when the ring was made.
pub struct Ring {
    region: Arc<Region>,
    offset: usize,
    log2: u8,
}

impl Ring {
    /// The ring of `2^log2` descriptors at `offset` in `region`; refused when it does not
    /// fit the region or its header is not 8-byte aligned (its atomics would be
    /// misaligned).
    pub fn new(region: Arc<Region>, offset: usize, log2: u8) -> Result<Ring, String> {
        if log2 > MAX_LOG2_RING_SIZE {
            return Err(format!(
                "a ring of 2^{log2} descriptors; memif allows 2^{MAX_LOG2_RING_SIZE} at most"
            ));
        }
        if !offset.is_multiple_of(8) || !region.contains(offset, ring_bytes(log2)) {
            return Err(format!(
                "a ring of 2^{log2} descriptors at offset {offset} does not fit the {}-byte region on an 8-byte boundary",
                region.len()
            ));
        }
        Ok(Ring { region, offset, log2 })
    }

    pub fn region(&self) -> &Arc<Region> {
        &self.region
    }

    pub fn offset(&self) -> usize {
        self.offset
    }

    pub fn log2(&self) -> u8 {
        self.log2
    }

    /// Descriptors in the ring.
    #[inline(always)]
    pub fn size(&self) -> u16 {
        // 2^14 at most (checked in `new`): fits.
        1u16 << self.log2
    }

    #[inline(always)]
    pub fn mask(&self) -> u16 {
        self.size() - 1
    }

    #[inline(always)]
    fn atomic_u16(&self, at: usize) -> &AtomicU16 {
        // SAFETY: `at` is RING_FLAGS_AT, RING_HEAD_AT or RING_TAIL_AT, inside the header
        // (checked in `new` to lie in the region, at an 8-byte-aligned offset of a
        // page-aligned mapping, so 2-byte aligned). The mapping lives as long as
        // `self.region`, which the returned borrow of `self` keeps. The memory is only
        // ever accessed atomically, here and by the peer (memif's head, tail and flags).
        unsafe { &*self.region.at(self.offset + at).cast::<AtomicU16>() }
    }

    #[inline(always)]
    pub fn head(&self) -> &AtomicU16 {
        self.atomic_u16(RING_HEAD_AT)
    }

    #[inline(always)]
    pub fn tail(&self) -> &AtomicU16 {
        self.atomic_u16(RING_TAIL_AT)
    }

    #[inline(always)]
    pub fn flags(&self) -> &AtomicU16 {
        self.atomic_u16(RING_FLAGS_AT)
    }

    pub fn cookie(&self) -> u32 {
        // SAFETY: as `atomic_u16`: the cookie's 4 bytes at the header's start, 8-byte
        // aligned, inside the region.
        let cookie = unsafe { &*self.region.at(self.offset + RING_COOKIE_AT).cast::<AtomicU32>() };
        cookie.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Writes the cookie and empties the ring (flags, head and tail 0): the owner of
    /// the memory does it before the peer may map it.
    pub fn init(&self, cookie: u32) {
        use std::sync::atomic::Ordering::Relaxed;
        // SAFETY: as `cookie`.
        let c = unsafe { &*self.region.at(self.offset + RING_COOKIE_AT).cast::<AtomicU32>() };
        c.store(cookie, Relaxed);
        self.flags().store(0, Relaxed);
        self.head().store(0, Relaxed);
        self.tail().store(0, Relaxed);
    }

    /// The descriptor at `slot` (wrapped by the mask).
    #[inline(always)]
    pub fn desc(&self, slot: u16) -> Desc {
        let at = self.offset + RING_HEADER + usize::from(slot & self.mask()) * DESC;
        let p = self.region.at(at).cast::<u64>();
        // SAFETY: the slot is below the ring's size, so the 16 bytes lie inside the ring
        // and so inside the region (checked in `new`), 8-byte aligned (the ring's offset
        // is a multiple of 8, checked in `new`; the header 128 bytes, a descriptor 16). Volatile copies,
        // not a reference: the peer may write it concurrently (then we read garbage,
        // which the caller validates). Two whole words, not sixteen bytes: a byte-wise
        // copy costs a load per byte.
        let (lo, hi) = unsafe { (std::ptr::read_volatile(p), std::ptr::read_volatile(p.add(1))) };
        Desc::from_words(u64::from_le(lo), u64::from_le(hi))
    }

    /// Hints that the descriptor at `slot` will be written soon.
    #[inline(always)]
    pub fn will_write_desc(&self, slot: u16) {
        self.region
            .will_write(self.offset + RING_HEADER + usize::from(slot & self.mask()) * DESC);
    }

    #[inline(always)]
    pub fn set_desc(&self, slot: u16, d: Desc) {
        let at = self.offset + RING_HEADER + usize::from(slot & self.mask()) * DESC;
        let (lo, hi) = d.to_words();
        let p = self.region.at(at).cast::<u64>();
        // SAFETY: as in `desc`; the mapping is writable. Two stores, not one per field:
        // each takes a store-buffer entry while the peer's core gives up the line.
        unsafe {
            std::ptr::write_volatile(p, lo.to_le());
            std::ptr::write_volatile(p.add(1), hi.to_le());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::Relaxed;

    #[test]
    fn a_ring_must_fit_its_region_and_reads_back_what_was_written() {
        let region = Arc::new(Region::create("sfclab-test", 1 << 16).unwrap());
        assert!(Ring::new(region.clone(), 4, 4).is_err(), "misaligned");
        assert!(Ring::new(region.clone(), (1 << 16) - 128, 4).is_err(), "past the end");
        assert!(Ring::new(region.clone(), 0, 15).is_err(), "too large");
        let ring = Ring::new(region.clone(), 256, 4).unwrap();
        ring.init(super::super::layout::COOKIE);
        assert_eq!(ring.cookie(), super::super::layout::COOKIE);
        ring.head().store(0xfffe, Relaxed);
        let d = Desc {
            flags: 1,
            region: 0,
            length: 60,
            offset: 4096,
            metadata: 0,
        };
        ring.set_desc(17, d);
        assert_eq!(ring.desc(1), d, "slot 17 is index 1 of 16");
        // The layout seen as bytes: head at 6, descriptor 1 at 128 + 16.
        let mut b = [0u8; 2];
        region.read(256 + 6, &mut b);
        assert_eq!(b, [0xfe, 0xff]);
        let mut desc = [0u8; 16];
        region.read(256 + 128 + 16, &mut desc);
        assert_eq!(desc, d.to_bytes());
    }
}
