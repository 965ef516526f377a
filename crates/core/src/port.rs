//! Ports: where packets enter and leave a chain. The in-memory generator and sink are
//! ports, and so will be AF_XDP, AF_PACKET and pcap ports: one batch per call, time
//! passed in (read once per batch by the runtime), buffers from and back to the pool.

use crate::batch::Batch;
use crate::pool::PacketPool;
use crate::recycle::Recycle;

/// Counters of a port.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, schemars::JsonSchema)]
pub struct PortStats {
    pub packets: u64,
    pub bytes: u64,
    /// Packets the port could not take or produce (a full TX queue, a closed capture).
    pub dropped: u64,
}

impl PortStats {
    pub fn since(&self, earlier: &PortStats) -> PortStats {
        PortStats {
            packets: self.packets - earlier.packets,
            bytes: self.bytes - earlier.bytes,
            dropped: self.dropped - earlier.dropped,
        }
    }
}

/// A source of packets (a generator, a NIC queue, a pcap file).
pub trait RxPort {
    /// Appends up to `batch.room()` packets taken from `pool`; returns how many.
    fn rx(&mut self, now: u64, pool: &mut PacketPool, batch: &mut Batch) -> usize;

    /// True when the port will produce no more packets (a count reached, a file ended).
    fn exhausted(&self) -> bool {
        false
    }

    /// Whether `now` must be fresh on every call (pacing, latency probes). When false,
    /// the runtime may read the clock only every few batches: a clock read costs about
    /// as much as forwarding one packet.
    fn needs_fresh_clock(&self) -> bool {
        true
    }

    fn stats(&self) -> PortStats;
}

/// A destination of packets (a sink, a NIC queue, a pcap writer).
pub trait TxPort {
    /// Takes every packet of `batch` (it is empty on return) and hands the buffers to
    /// `recycle` (the pool, or a link back to the pool's thread). Packets it cannot send
    /// are counted in `stats().dropped`.
    fn tx<R: Recycle>(&mut self, now: u64, batch: &mut Batch, recycle: &mut R);

    fn stats(&self) -> PortStats;
}
