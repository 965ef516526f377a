//! The NF library. One NF per file, its hot `process` first; each file's docs list the
//! config keys, counters and drop reasons, and its `TYPE` registers it ([`registry`]):
//! an [`NfSpec`] is one chain element as written in a chain file, checked, and builds
//! the NF (all validation happens there).

#![forbid(unsafe_code)]

pub mod config;
pub mod firewall;
pub mod forwarder;
pub mod frame;
pub mod nat44;
pub mod noop;
pub mod registry;
pub mod router;
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
