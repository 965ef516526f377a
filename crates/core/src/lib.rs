//! The packet core of sfclab.
//!
//! - [`packet`]: a fixed-size buffer with its metadata line, headroom and frame bytes.
//! - [`pool`]: one preallocated mapping of buffers; a LIFO free list of handles.
//! - [`batch`]: up to [`batch::MAX_BATCH`] packets moved together.
//! - [`nf`]: the network-function contract: a batch in, a verdict per packet out.
//! - [`port`]: the batch I/O interface that generators, sinks and real interfaces share.
//! - [`latency`]: latency records (HDR histograms of TSC ticks) ports keep.
//! - [`ring`]: lock-free single-producer single-consumer rings: links between cores.
//! - [`recycle`]: where freed buffers go (the pool, or a ring back to its thread).
//! - [`tsc`]: the time-stamp counter, read once per batch, never per packet.
//!
//! Nothing in the hot path here allocates, locks or makes a system call.

pub mod batch;
pub mod handle;
pub mod latency;
pub mod nf;
pub mod packet;
pub mod pool;
pub mod port;
pub mod recycle;
pub mod ring;
mod stamp;
pub mod tsc;

pub use batch::{Batch, BatchView, MAX_BATCH};
pub use handle::PacketRef;
pub use latency::{LatencyRecord, LatencySummary};
pub use nf::{
    Buffers, ChainContext, Context, CounterKind, DropReason, Emitted, NamedNfs, NetworkFunction, NfCounter, NfStats,
    Verdict, Verdicts,
};
pub use packet::{Packet, PacketMeta};
pub use pool::{PacketPool, SharedSpan};
pub use port::{PortInfo, PortStats, RxPort, Shortfall, TxPort};
pub use recycle::{Recycle, ReturnLink};
pub use ring::{RingConsumer, RingProducer, ring};

/// Asks the CPU to bring the cache line of `x` in without waiting for it: for a table
/// entry a later step of the batch will read. A hint only: it changes no result.
#[inline(always)]
pub fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and its effect is not observable by the program;
    // the address comes from a valid reference anyway.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>((x as *const T).cast())
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}
