//! Where freed buffers go. On the pool's own thread that is the pool; on any other
//! thread it is a [`ReturnLink`]: a ring back to the pool's thread, which puts the
//! buffers back on its free list (as a NIC's TX completions return mbufs).

use crate::batch::Batch;
use crate::handle::PacketRef;
use crate::pool::PacketPool;
use crate::ring::RingProducer;

pub trait Recycle {
    fn recycle(&mut self, p: PacketRef);
    /// Takes every packet of `batch`; it is empty on return.
    fn recycle_batch(&mut self, batch: &mut Batch);
}

impl Recycle for PacketPool {
    #[inline]
    fn recycle(&mut self, p: PacketRef) {
        self.free(p);
    }

    #[inline]
    fn recycle_batch(&mut self, batch: &mut Batch) {
        self.free_batch(batch);
    }
}

/// Frees buffers from a thread that does not own their pool: stages them in a batch
/// and sends full batches down a ring to the pool's thread. The ring is sized for the
/// whole pool, so it never refuses a buffer.
pub struct ReturnLink {
    staged: Batch,
    ring: RingProducer,
}

impl ReturnLink {
    pub fn new(ring: RingProducer, batch: usize) -> ReturnLink {
        ReturnLink {
            staged: Batch::new(batch),
            ring,
        }
    }

    /// Sends what is staged. Call when the thread goes idle and before it stops.
    pub fn flush(&mut self) {
        while !self.staged.is_empty() {
            if self.ring.push_from(&mut self.staged) == 0 {
                std::hint::spin_loop();
            }
        }
    }
}

impl Recycle for ReturnLink {
    #[inline]
    fn recycle(&mut self, p: PacketRef) {
        if let Err(p) = self.staged.push(p) {
            self.flush();
            let _ = self.staged.push(p);
        }
    }

    #[inline]
    fn recycle_batch(&mut self, batch: &mut Batch) {
        self.flush();
        while !batch.is_empty() {
            if self.ring.push_from(batch) == 0 {
                std::hint::spin_loop();
            }
        }
    }
}
