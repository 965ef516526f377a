//! A lock-free single-producer single-consumer ring of packets: the link between two
//! stages on different cores. Batches go in and out with one release store of the
//! cursor each, and each side keeps a cached copy of the other's cursor, so the shared
//! cache lines move only when a side runs out of what it knew (as in DPDK's rte_ring
//! SP/SC mode and Snabb's links).

use crate::batch::Batch;
use crate::packet::Packet;
use std::cell::UnsafeCell;
use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Keeps a cursor on its own cache lines (two: adjacent-line prefetch pairs them).
#[repr(align(128))]
struct Padded(AtomicUsize);

struct Shared {
    /// Next slot the consumer reads (written by the consumer only).
    head: Padded,
    /// Next slot the producer writes (written by the producer only).
    tail: Padded,
    slots: Box<[UnsafeCell<NonNull<Packet>>]>,
    mask: usize,
}

// SAFETY: a slot is written by the producer only while it is outside [head, tail) and
// read by the consumer only while inside; the cursors' release/acquire pairs order the
// slot accesses. The handles in the slots are owned, like PacketRefs, so sending them
// between threads is sound.
unsafe impl Sync for Shared {}
// SAFETY: the slots hold owned buffer handles (Send, like PacketRef); the rest is atomics.
unsafe impl Send for Shared {}

/// The producing end of a ring.
pub struct RingProducer {
    shared: Arc<Shared>,
    tail: usize,
    head_cache: usize,
}

/// The consuming end of a ring.
pub struct RingConsumer {
    shared: Arc<Shared>,
    head: usize,
    tail_cache: usize,
}

/// A ring holding up to `capacity` packets (rounded up to a power of two).
pub fn ring(capacity: usize) -> (RingProducer, RingConsumer) {
    let capacity = capacity.max(2).next_power_of_two();
    let shared = Arc::new(Shared {
        head: Padded(AtomicUsize::new(0)),
        tail: Padded(AtomicUsize::new(0)),
        slots: (0..capacity).map(|_| UnsafeCell::new(NonNull::dangling())).collect(),
        mask: capacity - 1,
    });
    (
        RingProducer {
            shared: shared.clone(),
            tail: 0,
            head_cache: 0,
        },
        RingConsumer {
            shared,
            head: 0,
            tail_cache: 0,
        },
    )
}

impl RingProducer {
    pub fn capacity(&self) -> usize {
        self.shared.mask + 1
    }

    /// Moves packets from the front of `batch` into the ring, in order, as many as fit;
    /// returns how many. Those that did not fit stay in `batch`, in order.
    #[inline]
    pub fn push_from(&mut self, batch: &mut Batch) -> usize {
        let n = batch.len();
        let cap = self.shared.mask + 1;
        let mut free = cap - (self.tail - self.head_cache);
        if free < n {
            self.head_cache = self.shared.head.0.load(Ordering::Acquire);
            free = cap - (self.tail - self.head_cache);
        }
        let k = n.min(free);
        if k == 0 {
            return 0;
        }
        for (i, &p) in batch.raw()[..k].iter().enumerate() {
            // SAFETY: slots tail..tail+k are outside [head, tail): the consumer does not
            // read them until the release store below.
            unsafe { *self.shared.slots[(self.tail + i) & self.shared.mask].get() = p };
        }
        self.tail += k;
        self.shared.tail.0.store(self.tail, Ordering::Release);
        batch.forget_front(k);
        k
    }

    /// Packets in the ring now (a snapshot; the consumer may be taking some).
    pub fn len(&self) -> usize {
        self.tail - self.shared.head.0.load(Ordering::Acquire)
    }

    /// Room for at least this many packets (refreshes the consumer's cursor only when the
    /// cached one says there is less than `want`).
    #[inline]
    pub fn room_for(&mut self, want: usize) -> bool {
        let cap = self.shared.mask + 1;
        if cap - (self.tail - self.head_cache) >= want {
            return true;
        }
        self.head_cache = self.shared.head.0.load(Ordering::Acquire);
        cap - (self.tail - self.head_cache) >= want
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl RingConsumer {
    /// Appends packets to `batch` in ring order, up to its room; returns how many.
    #[inline]
    pub fn pop_into(&mut self, batch: &mut Batch) -> usize {
        let mut avail = self.tail_cache - self.head;
        if avail < batch.room() {
            self.tail_cache = self.shared.tail.0.load(Ordering::Acquire);
            avail = self.tail_cache - self.head;
        }
        let k = avail.min(batch.room());
        if k == 0 {
            return 0;
        }
        for i in 0..k {
            // SAFETY: slots head..head+k are inside [head, tail) as published by the
            // acquire load; the producer does not reuse them until the store below.
            // Each handle is moved out exactly once (the head moves past it).
            unsafe { batch.push_raw(*self.shared.slots[(self.head + i) & self.shared.mask].get()) };
        }
        self.head += k;
        self.shared.head.0.store(self.head, Ordering::Release);
        k
    }

    /// Packets in the ring now (a snapshot; the producer may be adding some).
    pub fn len(&self) -> usize {
        self.shared.tail.0.load(Ordering::Acquire) - self.head
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn capacity(&self) -> usize {
        self.shared.mask + 1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::PacketPool;
    use crate::recycle::{Recycle, ReturnLink};
    use proptest::prelude::*;

    #[test]
    fn full_ring_keeps_the_rest_in_order() {
        let mut pool = PacketPool::new(64);
        let (mut tx, mut rx) = ring(8);
        let mut batch = Batch::new(12);
        pool.alloc_into(&mut batch, 12);
        for (i, p) in batch.iter_mut().enumerate() {
            p.meta.seq = i as u32;
        }
        assert_eq!(tx.push_from(&mut batch), 8);
        assert_eq!(batch.iter().map(|p| p.meta.seq).collect::<Vec<_>>(), vec![8, 9, 10, 11]);
        assert_eq!(tx.push_from(&mut batch), 0);
        let mut out = Batch::new(5);
        assert_eq!(rx.pop_into(&mut out), 5);
        assert_eq!(tx.push_from(&mut batch), 4);
        assert!(batch.is_empty());
        let mut rest = Batch::new(32);
        assert_eq!(rx.pop_into(&mut rest), 7);
        let seqs: Vec<u32> = out.iter().chain(rest.iter()).map(|p| p.meta.seq).collect();
        assert_eq!(seqs, (0..12).collect::<Vec<_>>());
        pool.free_batch(&mut out);
        pool.free_batch(&mut rest);
        assert_eq!(pool.in_use(), 0);
    }

    /// Producer thread allocates and sends numbered packets; the consumer checks order
    /// and returns the buffers through a return ring, so both directions are exercised.
    fn round_trip(total: u32, capacity: usize, push_batch: usize, pop_batch: usize) {
        let (mut tx, mut rx) = ring(capacity);
        let (ret_tx, mut ret_rx) = ring(1024);
        let consumer = std::thread::spawn(move || {
            let mut back = ReturnLink::new(ret_tx, 32);
            let mut batch = Batch::new(pop_batch);
            let mut expect = 0u32;
            while expect < total {
                rx.pop_into(&mut batch);
                for p in batch.iter() {
                    assert_eq!(p.meta.seq, expect, "lost, duplicated or reordered");
                    expect += 1;
                }
                back.recycle_batch(&mut batch);
            }
            back.flush();
            assert!(rx.is_empty());
        });
        let mut pool = PacketPool::new(1024);
        let mut batch = Batch::new(push_batch);
        let mut back = Batch::new(64);
        let mut seq = 0u32;
        while seq < total || pool.in_use() > 0 {
            if seq < total && batch.is_empty() {
                let want = (push_batch as u32).min(total - seq) as usize;
                pool.alloc_into(&mut batch, want);
                for p in batch.iter_mut() {
                    p.meta.seq = seq;
                    seq += 1;
                }
            }
            tx.push_from(&mut batch);
            ret_rx.pop_into(&mut back);
            pool.free_batch(&mut back);
        }
        consumer.join().unwrap();
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn many_packets_cross_threads_in_order() {
        round_trip(if cfg!(miri) { 2_000 } else { 300_000 }, 256, 32, 32);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(if cfg!(miri) { 3 } else { 24 }))]
        #[test]
        fn any_sizes_lose_nothing_and_keep_order(total in 1u32..if cfg!(miri) { 300 } else { 5_000 }, cap in 2usize..300, push in 1usize..64, pop in 1usize..64) {
            round_trip(total, cap, push, pop);
        }
    }
}
