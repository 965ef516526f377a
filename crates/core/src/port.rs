//! Ports: where packets enter and leave a chain. The in-memory generator and sink are
//! ports, and so will be AF_XDP, AF_PACKET and pcap ports: one batch per call, time
//! passed in (read once per batch by the runtime), buffers from and back to the pool.
//!
//! The runtimes know ports only through these traits: what a run reports about its
//! source and sink (what they are, their counters, latency, the window's own traffic)
//! comes from here, so a new port plugs in without touching a runtime.

use crate::batch::Batch;
use crate::latency::LatencyRecord;
use crate::nf::NfCounter;
use crate::pool::PacketPool;
use crate::recycle::Recycle;
use serde::Serialize;
use std::collections::BTreeMap;

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

    pub fn add(&mut self, o: &PortStats) {
        self.packets += o.packets;
        self.bytes += o.bytes;
        self.dropped += o.dropped;
    }
}

/// Why a source offered less than it was asked to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Shortfall {
    /// Batches cut short because the pool had no free buffer (a chain holding buffers).
    pub pool_empty: u64,
    /// Packets a paced source skipped because its loop fell behind the rate.
    pub behind: u64,
    /// Packets the source produced (counted in `stats().packets`) but never put before
    /// the device under test: a tester's own transmit refused them. Counted as the source's
    /// drops, they are not the device's loss, and a trial with any did not offer its rate.
    pub not_offered: u64,
}

impl Shortfall {
    pub fn since(&self, e: &Shortfall) -> Shortfall {
        Shortfall {
            pool_empty: self.pool_empty - e.pool_empty,
            behind: self.behind - e.behind,
            not_offered: self.not_offered - e.not_offered,
        }
    }
}

/// What a port is, for reports: its kind, one line for tables, and its settings.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct PortInfo {
    /// `generator`, `sink`; later `af_xdp`, `af_packet`, `pcap`.
    pub kind: String,
    /// One line, as a table shows it (`64 B frames, 256 flows, ipv4, rate max`).
    pub summary: String,
    /// Its settings by name, as text (`size: 64`, `rate: 10Mpps`, `interface: veth1`).
    pub settings: BTreeMap<String, String>,
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

    /// Prepares the pool's buffers once, before the first `rx` (a generator writes its
    /// payload pattern, so that frames stamped later carry valid checksums).
    fn prime(&self, _pool: &mut PacketPool) {}

    /// Whether the port passes frames by reference through memory its peer process
    /// maps (a memif zero-copy client), and how many buffers it may hold on its rings
    /// at once: the run then makes its pool that much larger with
    /// [`PacketPool::shared`] and hands it over with [`RxPort::attach_pool`].
    fn shared_pool_need(&self) -> Option<usize> {
        None
    }

    /// The run's pool, once, before any traffic: a port that passes frames by reference
    /// announces the pool's memory to its peer.
    fn attach_pool(&mut self, _pool: &PacketPool) {}

    /// Once traffic is over: every buffer the port still holds (lent to its peer, or
    /// waiting on its rings for frames) back to `pool`, so that a run's buffers all
    /// come home. The port passes no frame after it.
    fn return_buffers(&mut self, _pool: &mut PacketPool) {}

    /// A wired tester writes its signature over the last `width` bytes of every frame's
    /// IP datagram. A source whose frames' checksums count on what its buffers held (the
    /// generator stamps only the head) writes those bytes afresh in every frame it
    /// produces from now on, wherever a frame of any of its sizes carried a signature;
    /// a source that writes whole frames needs nothing.
    fn restore_tails(&mut self, _width: usize) {}

    /// The measured window starts now: what the port produces from here on is the
    /// window's traffic (marked `FLAG_WINDOW`, so sinks can count it), and with `count`
    /// the port stops after that many more packets.
    fn start_window(&mut self, count: Option<u64>);

    /// The rate the port was asked to offer, packets per second (`None`: as fast as it
    /// can, or whatever arrives).
    fn requested_pps(&self) -> Option<f64> {
        None
    }

    /// Why it offered less than asked, so far.
    fn shortfall(&self) -> Shortfall {
        Shortfall::default()
    }

    /// Port-specific counters (latency probes sent, a NIC's ring drops), windowed and
    /// reported like an NF's.
    fn counters(&self) -> Vec<NfCounter> {
        Vec::new()
    }

    /// Packets the port took in (counted in `stats().packets`) but did not pass on, by
    /// cause, totals so far; they sum to `stats().dropped`. A frame too long for a
    /// buffer, or a frame sent across a wire that never came back.
    fn drops(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// Stop producing new packets (the phase is over). True when packets are still on
    /// their way to this port (frames in flight across a wire): the runtime then keeps
    /// calling `rx` until `exhausted()`, so they are counted where they end. Producing
    /// resumes at `start_window`.
    fn finish(&mut self) -> bool {
        false
    }

    /// The run is over: frames already placed at the port that nothing will read now (a
    /// shared ring's unread entries) are taken and counted as dropped (`unread-at-end`),
    /// so that what a sender handed over is accounted for where it stopped. Sources
    /// that hold nothing for a reader (a generator, a file) have none.
    fn discard_unread(&mut self) {}

    fn info(&self) -> PortInfo;
}

/// A destination of packets (a sink, a NIC queue, a pcap writer).
pub trait TxPort {
    /// Takes every packet of `batch` (it is empty on return) and hands the buffers to
    /// `recycle` (the pool, or a link back to the pool's thread). Packets it cannot send
    /// are counted in `stats().dropped`.
    fn tx<R: Recycle>(&mut self, now: u64, batch: &mut Batch, recycle: &mut R);

    fn stats(&self) -> PortStats;

    /// The measured window starts now (a sink forgets the warm-up's latency samples).
    fn start_window(&mut self) {}

    /// Hands what the port still holds to the wire now. A copy-mode AF_XDP ring's frames
    /// leave only when the kernel is kicked, a budget at a time: a sender that stopped
    /// sending calls this while it waits for its frames to come back, or they would stay
    /// on the ring, counted as sent.
    fn flush(&mut self) {}

    /// As [`RxPort::shared_pool_need`].
    fn shared_pool_need(&self) -> Option<usize> {
        None
    }

    /// As [`RxPort::attach_pool`].
    fn attach_pool(&mut self, _pool: &PacketPool) {}

    /// As [`RxPort::return_buffers`]: frames it sent by reference and its peer has not
    /// released yet are the peer's to read until it goes; their buffers come back now.
    fn return_buffers(&mut self, _pool: &mut PacketPool) {}

    /// Packets taken so far that the source produced inside the window (`FLAG_WINDOW`):
    /// what trials measure loss on.
    fn window_packets(&self) -> u64;

    /// Packets counted as sent (in `stats().packets`) that were still on the port's
    /// ring, not released by its peer, when the peer went away (memif), totals so far:
    /// a tester that never sees them again knows where they went.
    fn lost_in_flight(&self) -> u64 {
        0
    }

    /// Latency of the probe packets taken since the window started, when measured.
    fn latency(&self) -> Option<&LatencyRecord> {
        None
    }

    /// Frames that failed verification so far; `None` when the port does not verify.
    fn verify_failed(&self) -> Option<u64> {
        None
    }

    /// Port-specific counters, windowed and reported like an NF's.
    fn counters(&self) -> Vec<NfCounter> {
        Vec::new()
    }

    /// Packets it refused (counted in `stats().dropped`), by cause, totals so far, where
    /// the port tells them apart (a memif ring full, no peer connected); what they do not
    /// cover is reported as `tx-full`.
    fn drops(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    fn info(&self) -> PortInfo;
}

/// A borrowed source is a source: a caller keeps the port and reads it after the run
/// (a wire's whole-run totals).
impl<P: RxPort + ?Sized> RxPort for &mut P {
    fn rx(&mut self, now: u64, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        (**self).rx(now, pool, batch)
    }
    fn exhausted(&self) -> bool {
        (**self).exhausted()
    }
    fn needs_fresh_clock(&self) -> bool {
        (**self).needs_fresh_clock()
    }
    fn stats(&self) -> PortStats {
        (**self).stats()
    }
    fn prime(&self, pool: &mut PacketPool) {
        (**self).prime(pool)
    }
    fn shared_pool_need(&self) -> Option<usize> {
        (**self).shared_pool_need()
    }
    fn attach_pool(&mut self, pool: &PacketPool) {
        (**self).attach_pool(pool)
    }
    fn return_buffers(&mut self, pool: &mut PacketPool) {
        (**self).return_buffers(pool)
    }
    fn restore_tails(&mut self, width: usize) {
        (**self).restore_tails(width)
    }
    fn start_window(&mut self, count: Option<u64>) {
        (**self).start_window(count)
    }
    fn requested_pps(&self) -> Option<f64> {
        (**self).requested_pps()
    }
    fn shortfall(&self) -> Shortfall {
        (**self).shortfall()
    }
    fn counters(&self) -> Vec<NfCounter> {
        (**self).counters()
    }
    fn drops(&self) -> Vec<(&'static str, u64)> {
        (**self).drops()
    }
    fn finish(&mut self) -> bool {
        (**self).finish()
    }
    fn discard_unread(&mut self) {
        (**self).discard_unread()
    }
    fn info(&self) -> PortInfo {
        (**self).info()
    }
}
