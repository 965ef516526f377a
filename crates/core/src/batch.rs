//! A batch: up to `MAX_BATCH` packets that move through NFs and links together.
//! Work per batch (a call, a clock read, a ring publish) is shared by all its packets.

use crate::handle::PacketRef;
use crate::packet::{Packet, PacketMeta};
use std::ptr::NonNull;

/// The largest batch size sfclab supports; the default is 32, as in DPDK and VPP.
pub const MAX_BATCH: usize = 256;

/// Owns up to `size` packets (`size <= MAX_BATCH`, fixed at creation).
pub struct Batch {
    len: usize,
    size: usize,
    /// Non-null so that iterators need no null check (`Option<&mut Packet>` uses the niche).
    pkts: [NonNull<Packet>; MAX_BATCH],
}

// SAFETY: the batch uniquely owns the buffers it points to (each came from a PacketRef).
unsafe impl Send for Batch {}

impl Batch {
    /// An empty batch that holds at most `size` packets (clamped to 1..=MAX_BATCH).
    pub fn new(size: usize) -> Batch {
        Batch {
            len: 0,
            size: size.clamp(1, MAX_BATCH),
            pkts: [NonNull::dangling(); MAX_BATCH],
        }
    }

    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most packets this batch holds.
    #[inline(always)]
    pub fn size(&self) -> usize {
        self.size
    }

    /// Free slots.
    #[inline(always)]
    pub fn room(&self) -> usize {
        self.size - self.len
    }

    /// Adds a packet, or hands it back when the batch is full.
    #[inline]
    pub fn push(&mut self, pkt: PacketRef) -> Result<(), PacketRef> {
        if self.len == self.size {
            return Err(pkt);
        }
        // SAFETY: there is room (checked).
        unsafe { self.push_raw(pkt.into_raw()) };
        Ok(())
    }

    /// # Safety
    /// There must be room, and `p` must be a buffer this batch may own.
    #[inline(always)]
    pub(crate) unsafe fn push_raw(&mut self, p: NonNull<Packet>) {
        debug_assert!(self.len < self.size);
        // SAFETY: len < size <= MAX_BATCH.
        unsafe { *self.pkts.get_unchecked_mut(self.len) = p };
        self.len += 1;
    }

    /// # Safety
    /// `ps.len()` must fit the room, and the batch must be allowed to own the buffers.
    #[inline(always)]
    pub(crate) unsafe fn extend_raw(&mut self, ps: &[NonNull<Packet>]) {
        debug_assert!(ps.len() <= self.room());
        self.pkts[self.len..self.len + ps.len()].copy_from_slice(ps);
        self.len += ps.len();
    }

    /// Removes and returns the last packet.
    #[inline]
    pub fn pop(&mut self) -> Option<PacketRef> {
        if self.len == 0 {
            return None;
        }
        self.len -= 1;
        // SAFETY: the slot held an owned buffer, now moved out.
        Some(unsafe { PacketRef::from_raw(self.pkts[self.len]) })
    }

    #[inline(always)]
    pub fn get(&self, i: usize) -> &Packet {
        assert!(i < self.len);
        // SAFETY: slots below len hold owned, live buffers.
        unsafe { self.pkts[i].as_ref() }
    }

    #[inline(always)]
    pub fn get_mut(&mut self, i: usize) -> &mut Packet {
        assert!(i < self.len);
        // SAFETY: as above; &mut self makes the access unique.
        unsafe { self.pkts[i].as_mut() }
    }

    #[inline(always)]
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &Packet> + '_ {
        // SAFETY: slots below len hold owned, live buffers.
        self.raw().iter().map(|&p| unsafe { &*p.as_ptr() })
    }

    #[inline(always)]
    pub fn iter_mut(&mut self) -> impl ExactSizeIterator<Item = &mut Packet> + '_ {
        let len = self.len;
        // SAFETY: distinct buffers (pool invariant), owned by this batch, borrowed mutably once.
        self.pkts[..len].iter().map(|&p| unsafe { &mut *p.as_ptr() })
    }

    /// The packets from position `start` on (e.g. those a source just appended).
    #[inline(always)]
    pub fn iter_mut_from(&mut self, start: usize) -> impl ExactSizeIterator<Item = &mut Packet> + '_ {
        let len = self.len;
        // SAFETY: as iter_mut.
        self.pkts[start.min(len)..len]
            .iter()
            .map(|&p| unsafe { &mut *p.as_ptr() })
    }

    /// Stamps the packets from position `first` on, as a source that made them does
    /// ([`Packet::stamp`]): packet k gets `fresh` with flow `flow + k` (wrapping at
    /// `heads.len()`), that flow's hash from `hashes` and sequence number `seq + k`.
    /// Returns the next flow and sequence number. `hashes` is at least as long as
    /// `heads`, and `flow < heads.len()`.
    #[inline]
    pub fn stamp_from(
        &mut self,
        first: usize,
        fresh: &PacketMeta,
        heads: &[[u8; 64]],
        hashes: &[u32],
        flow: usize,
        seq: u32,
    ) -> (usize, u32) {
        crate::stamp::stamp(self.iter_mut_from(first), fresh, heads, hashes, flow, seq)
    }

    /// Asks the CPU to fetch every packet's metadata line and first frame line, so that
    /// the misses of a batch that arrived from another core overlap instead of stalling
    /// the first NF one packet at a time (as DPDK and VPP prefetch after RX).
    #[inline]
    pub fn prefetch(&self) {
        for p in self.iter() {
            p.prefetch();
        }
    }

    /// Moves every packet out, in order.
    pub fn drain(&mut self) -> impl Iterator<Item = PacketRef> + '_ {
        let len = std::mem::take(&mut self.len);
        // SAFETY: each slot below the old len is moved out exactly once.
        self.pkts[..len].iter().map(|&p| unsafe { PacketRef::from_raw(p) })
    }

    /// Keeps the packets for which `keep(index, packet)` is true, in order, and moves the
    /// others to `reject(index, packet)`. Indices are the positions before compaction.
    ///
    /// If a closure panics, the batch is left holding every packet that is still its
    /// own exactly once (as `Vec::retain` does): the one being rejected when `reject`
    /// panicked has already moved out, the one `keep` was judging stays.
    #[inline]
    pub fn partition(
        &mut self,
        mut keep: impl FnMut(usize, &Packet) -> bool,
        mut reject: impl FnMut(usize, PacketRef),
    ) {
        /// Slots `write..read` are holes; on drop the unread tail closes them.
        struct Compaction<'a> {
            batch: &'a mut Batch,
            read: usize,
            write: usize,
            len: usize,
        }
        impl Drop for Compaction<'_> {
            fn drop(&mut self) {
                let unread = self.len - self.read;
                self.batch.pkts.copy_within(self.read..self.len, self.write);
                self.batch.len = self.write + unread;
            }
        }
        let len = self.len;
        let mut c = Compaction {
            batch: self,
            read: 0,
            write: 0,
            len,
        };
        while c.read < c.len {
            let r = c.read;
            let p = c.batch.pkts[r];
            // SAFETY: slot r < len holds an owned, live buffer.
            if keep(r, unsafe { p.as_ref() }) {
                c.batch.pkts[c.write] = p;
                c.write += 1;
                c.read += 1;
            } else {
                // The slot becomes a hole before the handle leaves, so that a panic in
                // `reject` cannot leave the handle in the batch as well.
                c.read += 1;
                // SAFETY: the handle leaves the batch exactly once: slot r is now a hole.
                reject(r, unsafe { PacketRef::from_raw(p) });
            }
        }
    }

    /// Appends every packet of `other` that fits; the rest stay in `other`.
    pub fn append_from(&mut self, other: &mut Batch) {
        let n = other.len.min(self.room());
        self.pkts[self.len..self.len + n].copy_from_slice(&other.pkts[..n]);
        self.len += n;
        other.pkts.copy_within(n..other.len, 0);
        other.len -= n;
    }

    #[inline(always)]
    pub(crate) fn raw(&self) -> &[NonNull<Packet>] {
        &self.pkts[..self.len]
    }

    /// Drops the first `k` handles from the batch (their ownership moved elsewhere) and
    /// moves the rest to the front, in order.
    #[inline(always)]
    pub(crate) fn forget_front(&mut self, k: usize) {
        let k = k.min(self.len);
        self.pkts.copy_within(k..self.len, 0);
        self.len -= k;
    }

    /// Empties the batch without touching the buffers (their ownership moved elsewhere).
    #[inline(always)]
    pub(crate) fn forget_all(&mut self) {
        self.len = 0;
    }
}

/// What an NF sees of a batch: its packets, to read and rewrite in place, but not the
/// batch itself. The length cannot change here, so the verdict of packet `i` always
/// means the packet the runtime finds at `i`, and the runtime's counts stay exact.
pub struct BatchView<'a> {
    batch: &'a mut Batch,
}

impl<'a> BatchView<'a> {
    #[inline(always)]
    pub fn new(batch: &'a mut Batch) -> BatchView<'a> {
        BatchView { batch }
    }

    #[inline(always)]
    pub fn len(&self) -> usize {
        self.batch.len
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.batch.len == 0
    }

    /// Packet `i`; panics when `i >= len()`, as slice indexing does.
    #[inline(always)]
    pub fn get(&self, i: usize) -> &Packet {
        self.batch.get(i)
    }

    /// Packet `i`, writable; panics when `i >= len()`.
    #[inline(always)]
    pub fn get_mut(&mut self, i: usize) -> &mut Packet {
        self.batch.get_mut(i)
    }

    #[inline(always)]
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &Packet> + '_ {
        self.batch.iter()
    }

    #[inline(always)]
    pub fn iter_mut(&mut self) -> impl ExactSizeIterator<Item = &mut Packet> + '_ {
        self.batch.iter_mut()
    }

    /// The same view for a shorter borrow: to hand the batch to an NF and look at it after.
    #[inline(always)]
    pub fn reborrow(&mut self) -> BatchView<'_> {
        BatchView { batch: self.batch }
    }

    /// See [`Batch::prefetch`].
    #[inline(always)]
    pub fn prefetch(&self) {
        self.batch.prefetch()
    }

    /// Runs `f` on the packets for which `pick(index, packet)` holds, as a view of
    /// their own (in order: its packet `k` is the `k`-th picked), then puts every packet
    /// back where it was, so indices here mean what they meant before. `aside` keeps the
    /// others meanwhile: it must be empty with room for this batch (panics otherwise).
    /// For a wrapper NF that shows its inner NF only the packets meant for it.
    pub fn with_picked<R>(
        &mut self,
        aside: &mut Batch,
        mut pick: impl FnMut(usize, &Packet) -> bool,
        f: impl FnOnce(BatchView<'_>) -> R,
    ) -> R {
        assert!(
            aside.is_empty() && aside.size() >= self.batch.len,
            "`aside` must be empty with room for the batch"
        );
        /// Puts the packets back in their places, also when `f` panics.
        struct Merge<'b> {
            batch: &'b mut Batch,
            aside: &'b mut Batch,
            picked: [u64; MAX_BATCH / 64],
            total: usize,
        }
        impl Drop for Merge<'_> {
            fn drop(&mut self) {
                // Backwards, in place: slot i is written only after every packet that
                // was below it has been read (the picked ones sit in slots < their
                // final ones).
                let (mut kept, mut set_aside) = (self.batch.len, self.aside.len);
                for i in (0..self.total).rev() {
                    if self.picked[i / 64] & 1 << (i % 64) != 0 {
                        kept -= 1;
                        self.batch.pkts[i] = self.batch.pkts[kept];
                    } else {
                        set_aside -= 1;
                        self.batch.pkts[i] = self.aside.pkts[set_aside];
                    }
                }
                self.batch.len = self.total;
                self.aside.len = 0;
            }
        }
        let total = self.batch.len;
        let mut picked = [0u64; MAX_BATCH / 64];
        self.batch.partition(
            |i, p| {
                let keep = pick(i, p);
                picked[i / 64] |= u64::from(keep) << (i % 64);
                keep
            },
            |_, p| {
                if aside.push(p).is_err() {
                    unreachable!("room checked above");
                }
            },
        );
        let merge = Merge {
            batch: self.batch,
            aside,
            picked,
            total,
        };
        f(BatchView {
            batch: &mut *merge.batch,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::PacketPool;

    #[test]
    fn partition_keeps_order_and_hands_out_the_rest() {
        let mut pool = PacketPool::new(8);
        let mut batch = Batch::new(8);
        pool.alloc_into(&mut batch, 8);
        for (i, p) in batch.iter_mut().enumerate() {
            p.reset(14)[0] = i as u8;
        }
        let mut rejected = Vec::new();
        batch.partition(|i, _| i % 3 != 0, |i, p| rejected.push((i, p)));
        let kept: Vec<u8> = batch.iter().map(|p| p.data()[0]).collect();
        assert_eq!(kept, vec![1, 2, 4, 5, 7]);
        assert_eq!(rejected.iter().map(|(i, _)| *i).collect::<Vec<_>>(), vec![0, 3, 6]);
        for (_, p) in rejected {
            pool.free(p);
        }
        pool.free_batch(&mut batch);
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn with_picked_shows_a_subset_and_puts_every_packet_back_in_place() {
        use std::panic::{AssertUnwindSafe, catch_unwind};
        let mut pool = PacketPool::new(8);
        let mut batch = Batch::new(8);
        let mut aside = Batch::new(MAX_BATCH);
        pool.alloc_into(&mut batch, 7);
        for (i, p) in batch.iter_mut().enumerate() {
            p.reset(14)[0] = i as u8;
        }
        let seen = BatchView::new(&mut batch).with_picked(
            &mut aside,
            |i, _| i % 3 == 1,
            |mut view| {
                view.iter_mut().for_each(|p| p.data_mut()[1] = 0xee);
                view.iter().map(|p| p.data()[0]).collect::<Vec<_>>()
            },
        );
        assert_eq!(seen, vec![1, 4]);
        let after: Vec<(u8, u8)> = batch.iter().map(|p| (p.data()[0], p.data()[1])).collect();
        assert_eq!(
            after,
            vec![(0, 0), (1, 0xee), (2, 0), (3, 0), (4, 0xee), (5, 0), (6, 0)]
        );
        assert!(aside.is_empty());
        // Nothing picked, everything picked, and a panic inside: the batch stays whole.
        for pick in [false, true] {
            let n = BatchView::new(&mut batch).with_picked(&mut aside, |_, _| pick, |v| v.len());
            assert_eq!((n, batch.len()), (if pick { 7 } else { 0 }, 7));
        }
        let r = catch_unwind(AssertUnwindSafe(|| {
            BatchView::new(&mut batch).with_picked(&mut aside, |i, _| i < 2, |_| panic!("inner NF"))
        }));
        assert!(r.is_err());
        let order: Vec<u8> = batch.iter().map(|p| p.data()[0]).collect();
        assert_eq!(order, (0..7).collect::<Vec<u8>>());
        pool.free_batch(&mut batch);
        assert_eq!(pool.in_use(), 0);
    }

    /// A panicking closure must not leave a handle in the batch twice (two `&mut Packet`
    /// to one buffer, then a double free).
    #[test]
    fn partition_that_panics_leaves_every_packet_once() {
        use std::panic::{AssertUnwindSafe, catch_unwind};
        for (panic_in_keep, at) in [(true, 3), (false, 3), (true, 0), (false, 5)] {
            let mut pool = PacketPool::new(8);
            let mut batch = Batch::new(8);
            pool.alloc_into(&mut batch, 8);
            for (i, p) in batch.iter_mut().enumerate() {
                p.meta.seq = i as u32;
            }
            let mut rejected = Vec::new();
            let result = catch_unwind(AssertUnwindSafe(|| {
                batch.partition(
                    |i, _| {
                        assert!(!(panic_in_keep && i == at), "keep panics");
                        i % 2 == 1
                    },
                    |i, p| {
                        if !panic_in_keep && i == at + 1 {
                            // Moved out, then lost to the panic: leaked, never doubled.
                            let _leaked = p;
                            panic!("reject panics");
                        }
                        rejected.push(p)
                    },
                )
            }));
            assert!(result.is_err());
            let mut seqs: Vec<u32> = batch.iter().map(|p| p.meta.seq).collect();
            seqs.extend(rejected.iter().map(|p| p.meta.seq));
            let leaked = usize::from(!panic_in_keep);
            assert_eq!(seqs.len() + leaked, 8, "case {panic_in_keep} {at}: {seqs:?}");
            seqs.sort();
            seqs.dedup();
            assert_eq!(seqs.len() + leaked, 8, "no packet twice");
            for p in rejected {
                pool.free(p);
            }
            pool.free_batch(&mut batch);
            assert_eq!(pool.in_use(), leaked);
        }
    }

    #[test]
    fn push_respects_size_and_append_moves_what_fits() {
        let mut pool = PacketPool::new(8);
        let mut a = Batch::new(3);
        for _ in 0..3 {
            a.push(pool.alloc().unwrap()).ok().unwrap();
        }
        let extra = pool.alloc().unwrap();
        let extra = a.push(extra).unwrap_err();
        pool.free(extra);
        let mut b = Batch::new(2);
        b.append_from(&mut a);
        assert_eq!((a.len(), b.len()), (1, 2));
        pool.free_batch(&mut a);
        for p in b.drain().collect::<Vec<_>>() {
            pool.free(p);
        }
        assert!(b.is_empty());
        assert_eq!(pool.in_use(), 0);
    }
}
