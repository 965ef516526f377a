//! The NF library. One NF per file, its hot `process` first; each file's docs list the
//! config keys, counters and drop reasons, and its `TYPE` registers it ([`registry`]):
//! an [`NfSpec`] is one chain element as written in a chain file, checked, and builds
//! the NF (all validation happens there).

#![forbid(unsafe_code)]

pub mod classes;
pub mod config;
pub mod dpi;
pub mod firewall;
pub mod forwarder;
pub mod frame;
pub mod ipsec;
pub mod nat44;
pub mod noop;
pub mod nsh;
pub mod qos;
pub mod registry;
pub mod router;
pub mod shaper;

pub mod synthetic;
pub mod tables;

pub use config::{ByteSize, ConfigError, typed};
pub use forwarder::Forwarder;
pub use noop::Noop;
pub use registry::{NfSpec, NfType, SpecError};
pub use synthetic::Synthetic;

/// docs/DESIGN.md's Rust blocks as doc tests: its "write your own NF" example compiles
/// and runs against today's API.
#[cfg(doctest)]
#[doc = include_str!("../../../docs/DESIGN.md")]
pub struct DesignDoc;

#[cfg(test)]
pub(crate) mod testutil {
    use sfclab_core::{Batch, BatchView, ChainContext, Emitted, NetworkFunction, PacketPool, Verdicts};

    /// Runs `nf` over one batch of `frames` at time zero; see [`run_at`].
    pub fn run_one_batch(
        nf: &mut dyn NetworkFunction,
        frames: &[Vec<u8>],
    ) -> (Vec<Vec<u8>>, Vec<sfclab_core::Verdict>) {
        run_at(nf, frames, 0)
    }

    /// Runs `nf` over one batch of `frames` at `now_ns` (one tick is one nanosecond);
    /// returns the output frames (after the NF's rewrites) and the verdicts, and gives
    /// every buffer back.
    pub fn run_at(
        nf: &mut dyn NetworkFunction,
        frames: &[Vec<u8>],
        now_ns: u64,
    ) -> (Vec<Vec<u8>>, Vec<sfclab_core::Verdict>) {
        run_inspecting(nf, frames, now_ns, |_| {})
    }

    /// [`run_at`], showing each packet (metadata and notes too) to `inspect` after the NF.
    pub fn run_inspecting(
        nf: &mut dyn NetworkFunction,
        frames: &[Vec<u8>],
        now_ns: u64,
        inspect: impl FnMut(&sfclab_core::Packet),
    ) -> (Vec<Vec<u8>>, Vec<sfclab_core::Verdict>) {
        let mut pool = PacketPool::new(frames.len().max(1));
        let mut batch = Batch::new(frames.len());
        pool.alloc_into(&mut batch, frames.len());
        for (p, f) in batch.iter_mut().zip(frames) {
            p.reset(f.len()).copy_from_slice(f);
        }
        let mut verdicts = Verdicts::for_batch(batch.len());
        let mut emitted = Emitted::default();
        let mut ctx = ChainContext::new(now_ns, 0, 1.0, &mut pool, &mut emitted);
        nf.process(ctx.nf(), BatchView::new(&mut batch), &mut verdicts);
        batch.iter().for_each(inspect);
        let out = batch.iter().map(|p| p.data().to_vec()).collect();
        let v = (0..frames.len()).map(|i| verdicts.get(i)).collect();
        pool.free_batch(&mut batch);
        (out, v)
    }

    /// An NF that holds packets, driven as a runtime drives it: each packet numbered
    /// in the order offered, held ones handed to `hold` after the call, emitted and
    /// dropped ones counted, and every buffer checked back at the end.
    pub struct Held {
        pool: PacketPool,
        emitted: Emitted,
        offered: u32,
        /// Numbers of the packets that left, in the order they left.
        order: Vec<u32>,
    }

    /// What one call did: the numbers of packets that left, and how many were dropped
    /// (by verdict or from what the NF held).
    pub struct Outcome {
        pub sent: Vec<u32>,
        pub dropped: u32,
    }

    impl Held {
        pub fn new(capacity: usize) -> Held {
            Held {
                pool: PacketPool::new(capacity),
                emitted: Emitted::default(),
                offered: 0,
                order: Vec::new(),
            }
        }

        /// Offers `frames` at `now_ns` in one batch.
        pub fn offer(&mut self, nf: &mut dyn NetworkFunction, frames: &[Vec<u8>], now_ns: u64) -> Outcome {
            let mut batch = Batch::new(frames.len());
            assert!(frames.len() <= sfclab_core::MAX_BATCH);
            self.pool.alloc_into(&mut batch, frames.len());
            assert_eq!(batch.len(), frames.len(), "the pool is too small");
            for (p, f) in batch.iter_mut().zip(frames) {
                p.meta = sfclab_core::PacketMeta::fresh(0, 0, 0);
                p.meta.seq = self.offered;
                self.offered += 1;
                p.reset(f.len()).copy_from_slice(f);
            }
            self.call(nf, &mut batch, now_ns)
        }

        /// Calls the NF with no packets at `now_ns`, as a runtime does while it holds some.
        pub fn poll(&mut self, nf: &mut dyn NetworkFunction, now_ns: u64) -> Outcome {
            self.call(nf, &mut Batch::new(1), now_ns)
        }

        fn call(&mut self, nf: &mut dyn NetworkFunction, batch: &mut Batch, now_ns: u64) -> Outcome {
            let mut verdicts = Verdicts::for_batch(batch.len());
            let mut ctx = ChainContext::new(now_ns, 0, 1.0, &mut self.pool, &mut self.emitted);
            nf.process(ctx.nf(), BatchView::new(batch), &mut verdicts);
            let mut out = Outcome {
                sent: Vec::new(),
                dropped: 0,
            };
            self.emitted.take_drops(|_, n| out.dropped += n as u32);
            let (created, overflow) = self.emitted.take_counts();
            assert_eq!((created, overflow), (0, 0));
            // Emitted during the call: these left before the batch's own packets.
            for (p, _) in self.emitted.drain() {
                out.sent.push(p.meta.seq);
                self.pool.free(p);
            }
            for (i, p) in batch.drain().enumerate() {
                match verdicts.get(i) {
                    sfclab_core::Verdict::Hold => nf.hold(p).unwrap_or_else(|_| panic!("refused a hold")),
                    sfclab_core::Verdict::Drop(_) => {
                        out.dropped += 1;
                        self.pool.free(p);
                    }
                    _ => {
                        out.sent.push(p.meta.seq);
                        self.pool.free(p);
                    }
                }
            }
            self.order.extend(&out.sent);
            out
        }

        /// Numbers of every packet that left so far, in order.
        pub fn order(&self) -> Vec<u32> {
            self.order.clone()
        }

        /// Takes back what the NF still holds and checks every buffer is back.
        pub fn finish(mut self, nf: &mut dyn NetworkFunction) {
            nf.release_held(&mut |p| self.pool.free(p));
            assert_eq!(nf.held(), 0);
            assert_eq!(self.pool.in_use(), 0, "every buffer back");
        }
    }

    /// A 60-byte Ethernet/IPv4/UDP frame.
    pub fn udp_frame() -> Vec<u8> {
        let mut out = Vec::new();
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xaa], [2, 0, 0, 0, 0, 0xbb])
            .ipv4([198, 18, 0, 1], [198, 19, 0, 1], 64)
            .udp(1024, 1024)
            .write(&mut out, &[0u8; 18])
            .unwrap();
        out
    }
}
