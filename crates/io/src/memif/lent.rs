//! A zero-copy client's buffers on its rings: the packet pool is the connection's
//! second region, so a receive ring's slots hold pool buffers the server fills in
//! place, and a send ring's slots hold the buffers of frames sent by reference until
//! the server releases them (DPDK's `zero-copy=yes` client does the same with its
//! mbufs).
//!
//! Ownership follows the descriptors, as the protocol says: a buffer given to the
//! server (on the receive ring past what this side read, or on the send ring before
//! the server's `tail`) is held here as a handle, and nothing in this process makes a
//! reference to it until the server hands it back by moving the ring's index. A
//! server that breaks the protocol can write a buffer this side holds, which garbles
//! that frame (its bytes, or its place in the buffer, which every access checks:
//! `sfclab_core::PacketMeta`), never other memory: the handles, the free list and the
//! counters are private.

use sfclab_core::packet::DATA_ROOM;
use sfclab_core::{Batch, PacketPool, PacketRef, Recycle};

use super::connection::{PoolRegion, Queue};
use super::layout::Desc;

/// One port's buffers lent to its peer.
pub(super) struct Lent {
    pool: PoolRegion,
    /// Receive ring: per slot, the pool buffer the server fills (those given are the
    /// slots from the next to read up to the ring's `head`).
    rx: Vec<Option<PacketRef>>,
    /// Send ring: per slot, the buffer of a frame sent by reference, until the server
    /// moves `tail` past it.
    tx: Vec<Option<PacketRef>>,
    /// Send ring: the slots released up to here.
    tx_released: u16,
    /// Buffers of a connection that ended (or of frames discarded unread), back to the
    /// pool at the next chance.
    stranded: Vec<PacketRef>,
    /// Per frame of the batch being sent, in order: the slot it went to by reference,
    /// or `None` (copied into the ring's own buffer). Reserved once.
    placed: Vec<Option<u16>>,
    /// Buffers on their way from the pool to the receive ring.
    fresh: Batch,
}

impl Lent {
    /// For a new connection with `pool` as its second region and rings of `rx_slots`
    /// and `tx_slots` (0 for a direction the port does not use).
    pub(super) fn new(pool: PoolRegion, rx_slots: u16, tx_slots: u16) -> Lent {
        Lent {
            pool,
            rx: std::iter::repeat_with(|| None).take(usize::from(rx_slots)).collect(),
            tx: std::iter::repeat_with(|| None).take(usize::from(tx_slots)).collect(),
            tx_released: 0,
            stranded: Vec::new(),
            placed: Vec::with_capacity(sfclab_core::MAX_BATCH),
            fresh: Batch::new(sfclab_core::MAX_BATCH),
        }
    }

    /// The connection ended: every buffer it held waits to go back to the pool (the
    /// frames on its rings were counted where the port counts them).
    pub(super) fn strand_all(&mut self) {
        let held = self.rx.iter_mut().chain(self.tx.iter_mut()).filter_map(Option::take);
        self.stranded.extend(held);
    }

    /// Takes over what `other` (the last connection's) still holds.
    pub(super) fn inherit(&mut self, mut other: Lent) {
        other.strand_all();
        self.stranded.append(&mut other.stranded);
    }

    /// The buffer given for receive slot `slot`, now the server's frame.
    #[inline(always)]
    pub(super) fn take_rx(&mut self, slot: u16) -> Option<PacketRef> {
        let i = usize::from(slot) & (self.rx.len() - 1);
        self.rx[i].take()
    }

    /// A frame's buffer the port will not pass on (a fault, discarded unread).
    #[inline(always)]
    pub(super) fn strand(&mut self, p: PacketRef) {
        self.stranded.push(p);
    }

    /// Asks for the first lines of the next `n` frames' buffers from `slot` on, reading
    /// none: the server's core wrote their bytes and this one writes their metadata.
    #[inline(always)]
    pub(super) fn will_read(&self, slot: u16, n: usize) {
        let mask = self.rx.len() - 1;
        for i in 0..n as u16 {
            if let Some(p) = &self.rx[usize::from(slot.wrapping_add(i)) & mask] {
                p.prefetch();
            }
        }
    }

    /// Gives the server a pool buffer for every receive slot up to a ring ahead of
    /// `next` (the next slot this side reads) and publishes them; false when the pool
    /// ran out first (the ring then holds fewer, and the next call tries again). The
    /// buffers' own lines are not touched: a frame's metadata is written when it
    /// arrives, a ring later, and where its bytes go is known from its address.
    #[inline(always)]
    pub(super) fn refill(&mut self, q: &Queue, next: u16, pool: &mut PacketPool) -> bool {
        let ring = &q.ring;
        let mut head = ring.head().load(std::sync::atomic::Ordering::Relaxed);
        let end = next.wrapping_add(ring.size());
        // The descriptors' lines, last written by the server, asked for at once.
        let mut s = head;
        while s != end {
            ring.will_write_desc(s);
            s = s.wrapping_add(4.min(end.wrapping_sub(s)));
        }
        let mask = self.rx.len() - 1;
        let mut whole = true;
        while head != end {
            let want = usize::from(end.wrapping_sub(head)).min(self.fresh.room());
            if pool.alloc_into(&mut self.fresh, want) < want {
                whole = false;
            }
            if self.fresh.is_empty() {
                break;
            }
            for p in self.fresh.drain() {
                // A buffer of another pool is never given: the server could not see it.
                let Some(offset) = self.pool.span.fresh_frame_offset(&p) else {
                    pool.free(p);
                    whole = false;
                    continue;
                };
                ring.set_desc(
                    head,
                    Desc {
                        flags: 0,
                        region: self.pool.index,
                        length: DATA_ROOM as u32,
                        offset: offset as u32,
                        metadata: 0,
                    },
                );
                let slot = &mut self.rx[usize::from(head) & mask];
                debug_assert!(slot.is_none(), "a receive slot given twice");
                *slot = Some(p);
                head = head.wrapping_add(1);
            }
            if !whole {
                break;
            }
        }
        ring.head().store(head, std::sync::atomic::Ordering::Release);
        whole
    }

    /// The descriptor that sends `data` by reference, if it lies in the pool.
    #[inline(always)]
    pub(super) fn by_reference(&self, data: &[u8]) -> Option<Desc> {
        let offset = self.pool.span.offset_of(data)?;
        Some(Desc {
            flags: 0,
            region: self.pool.index,
            length: data.len() as u32,
            offset: offset as u32,
            metadata: 0,
        })
    }

    /// The batch's next frame went to send slot `slot` by reference (`Some`) or as a
    /// copy (`None`).
    #[inline(always)]
    pub(super) fn placed(&mut self, slot: Option<u16>) {
        self.placed.push(slot);
    }

    /// Frames the server released (its `tail` moved up to `tail`; `head` is this
    /// side's) give their buffers back, and anything stranded goes too.
    #[inline(always)]
    pub(super) fn reclaim<R: Recycle>(&mut self, tail: u16, head: u16, recycle: &mut R) {
        // A tail past what this side placed is a broken peer's: never past `head`.
        let released = tail
            .wrapping_sub(self.tx_released)
            .min(head.wrapping_sub(self.tx_released));
        let mask = self.tx.len() - 1;
        for _ in 0..released {
            if let Some(p) = self.tx[usize::from(self.tx_released) & mask].take() {
                recycle.recycle(p);
            }
            self.tx_released = self.tx_released.wrapping_add(1);
        }
        self.return_stranded(recycle);
    }

    /// After a send: the frames sent by reference (the batch's first ones, as
    /// `placed` says) stay lent in their slots; the rest of `batch` goes to `recycle`.
    #[inline(always)]
    pub(super) fn keep_sent<R: Recycle>(&mut self, batch: &mut Batch, recycle: &mut R) {
        if self.placed.iter().any(Option::is_some) {
            // Only a port that sends placed a frame: its send ring has slots.
            let mask = self.tx.len() - 1;
            for (i, p) in batch.drain().enumerate() {
                match self.placed.get(i).copied().flatten() {
                    Some(slot) => {
                        let held = &mut self.tx[usize::from(slot) & mask];
                        debug_assert!(held.is_none(), "a send slot reused before its release");
                        *held = Some(p);
                    }
                    None => recycle.recycle(p),
                }
            }
        }
        self.placed.clear();
        recycle.recycle_batch(batch);
    }

    /// Everything stranded back to the pool.
    #[inline(always)]
    pub(super) fn return_stranded<R: Recycle>(&mut self, recycle: &mut R) {
        if !self.stranded.is_empty() {
            for p in self.stranded.drain(..) {
                recycle.recycle(p);
            }
        }
    }

    /// Every buffer held, given or lent, back to the pool: the port's traffic is over.
    pub(super) fn return_all(&mut self, pool: &mut PacketPool) {
        self.strand_all();
        self.return_stranded(pool);
    }
}
