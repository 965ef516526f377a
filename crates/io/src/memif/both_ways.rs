//! A device under test between two memif interfaces that forwards both ways at once, as
//! a VNF does between its two networks (NFVbench's bidirectional chains): one source
//! that reads both interfaces, marking each packet with the side it came in on
//! (`in_port` 0: the input, where the forward direction enters; 1: the output, where the
//! reverse direction enters), and one sink that sends each packet out of the other side.
//! The chain between them runs once per batch whatever the side: one instance of each
//! NF sees both directions, as a VNF's features do (NAT's mappings, a firewall's
//! connections, one routing table).
//!
//! In interrupt mode the source sleeps on both rings' eventfds at once: a side that
//! slept alone would leave the other's frames waiting out its sleep.

use std::os::fd::AsFd;
use std::time::Instant;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use sfclab_core::port::{PortInfo, PortStats, Shortfall};
use sfclab_core::{Batch, MAX_BATCH, NfCounter, PacketPool, Recycle, RxPort, TxPort};

use super::port::{MemifPort, SLEEP_LIMIT_MS};
use super::settings::Wait;
use crate::queues::{summed, summed_drops, summed_stats};

/// The receiving sides: `[input, output]`.
pub struct BothWaysIn {
    sides: [MemifPort; 2],
    /// The side read first next time: each goes first in turn, so neither starves.
    first: usize,
    /// Packets taken per side: the forward direction's in (side 0), the reverse's (1).
    taken: [u64; 2],
    idle_since: Option<Instant>,
    sleeps: u64,
    wakeups: u64,
}

/// The sending sides: `[input, output]`; a packet that came in on one leaves on the other.
/// Each side is a port of its own (a memif port, or one behind a capacity it draws on
/// as a sender of its own, as a VNF's two virtual functions are two queues of its NIC).
pub struct BothWaysOut<P = MemifPort> {
    sides: [P; 2],
    /// Per side, the packets of a batch that leave there: filled and emptied in each
    /// `tx`, allocated once.
    split: [Batch; 2],
    /// Packets sent per side: the reverse direction's out (side 0), the forward's (1).
    sent: [u64; 2],
    overflow: u64,
}

impl BothWaysIn {
    /// `input` and `output` receive only (their sleeping is this source's).
    pub fn new(mut input: MemifPort, mut output: MemifPort) -> BothWaysIn {
        input.set_sleep_elsewhere();
        output.set_sleep_elsewhere();
        BothWaysIn {
            sides: [input, output],
            first: 0,
            taken: [0; 2],
            idle_since: None,
            sleeps: 0,
            wakeups: 0,
        }
    }

    /// Neither side had frames: after the spin of interrupt mode, sleep until either
    /// side's sender signals (at most `SLEEP_LIMIT_MS`).
    #[cold]
    fn idle(&mut self) {
        let Wait::Interrupt { spin } = self.sides[0].wait_mode() else {
            return;
        };
        let now = Instant::now();
        let since = *self.idle_since.get_or_insert(now);
        if now.duration_since(since) < spin {
            return;
        }
        // Both armed before either is looked at again: a frame published after a look
        // signals an armed side and wakes the sleep.
        let pending = self.sides.iter_mut().fold(false, |any, s| s.arm_interrupt() | any);
        if pending {
            self.idle_since = None;
        } else {
            let fds: Vec<_> = self.sides.iter().filter_map(MemifPort::interrupt_fd).collect();
            if fds.is_empty() {
                // No peer on either side yet.
                std::thread::sleep(std::time::Duration::from_millis(1));
            } else {
                self.sleeps += 1;
                let mut polled: Vec<PollFd> = fds.iter().map(|f| PollFd::new(f.as_fd(), PollFlags::POLLIN)).collect();
                if matches!(poll(&mut polled, PollTimeout::from(SLEEP_LIMIT_MS)), Ok(n) if n > 0) {
                    self.wakeups += 1;
                    self.idle_since = None;
                }
            }
        }
        self.sides.iter_mut().for_each(MemifPort::disarm_interrupt);
    }
}

impl RxPort for BothWaysIn {
    fn rx(&mut self, now: u64, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        let mut got = 0;
        for k in 0..2 {
            let side = (self.first + k) % 2;
            if batch.room() == 0 {
                break;
            }
            let from = batch.len();
            let n = self.sides[side].rx(now, pool, batch);
            for p in batch.iter_mut_from(from) {
                p.meta.in_port = side as u16;
            }
            self.taken[side] += n as u64;
            got += n;
        }
        self.first ^= 1;
        if got == 0 {
            self.idle();
        } else {
            self.idle_since = None;
        }
        got
    }

    fn exhausted(&self) -> bool {
        self.sides.iter().all(RxPort::exhausted)
    }

    fn needs_fresh_clock(&self) -> bool {
        false
    }

    fn stats(&self) -> PortStats {
        summed_stats(self.sides.iter().map(RxPort::stats))
    }

    fn start_window(&mut self, count: Option<u64>) {
        // A count is the two sides' together: each may take it all.
        self.sides.iter_mut().for_each(|s| RxPort::start_window(s, count));
    }

    fn shortfall(&self) -> Shortfall {
        Shortfall::default()
    }

    fn counters(&self) -> Vec<NfCounter> {
        let mut c = vec![
            NfCounter::total("forward_in", self.taken[0]),
            NfCounter::total("reverse_in", self.taken[1]),
            NfCounter::total("sleeps", self.sleeps),
            NfCounter::total("wakeups", self.wakeups),
        ];
        c.extend(summed(self.sides.iter().map(|s| {
            RxPort::counters(s)
                .into_iter()
                .filter(|c| c.name.starts_with("rx_"))
                .collect()
        })));
        c
    }

    fn drops(&self) -> Vec<(&'static str, u64)> {
        summed_drops(self.sides.iter().map(RxPort::drops))
    }

    fn shared_pool_need(&self) -> Option<usize> {
        crate::queues::summed_need(self.sides.iter().map(RxPort::shared_pool_need))
    }

    fn attach_pool(&mut self, pool: &PacketPool) {
        self.sides.iter_mut().for_each(|s| RxPort::attach_pool(s, pool));
    }

    fn return_buffers(&mut self, pool: &mut PacketPool) {
        self.sides.iter_mut().for_each(|s| RxPort::return_buffers(s, pool));
    }

    fn discard_unread(&mut self) {
        self.sides.iter_mut().for_each(RxPort::discard_unread);
    }

    fn info(&self) -> PortInfo {
        both_info(RxPort::info(&self.sides[0]), RxPort::info(&self.sides[1]))
    }
}

impl<P: TxPort> BothWaysOut<P> {
    /// `input` and `output` send only.
    pub fn new(input: P, output: P) -> BothWaysOut<P> {
        BothWaysOut {
            sides: [input, output],
            split: [Batch::new(MAX_BATCH), Batch::new(MAX_BATCH)],
            sent: [0; 2],
            overflow: 0,
        }
    }

    /// The output side (to wait for the next hop before saying the hop forwards).
    pub fn output(&mut self) -> &mut P {
        &mut self.sides[1]
    }
}

impl<P: TxPort> TxPort for BothWaysOut<P> {
    fn tx<R: Recycle>(&mut self, now: u64, batch: &mut Batch, recycle: &mut R) {
        // A packet leaves by the side it did not come in on; a batch is at most
        // MAX_BATCH, so each side's share fits.
        for p in batch.drain() {
            let to = usize::from(p.meta.in_port & 1 == 0);
            if let Err(p) = self.split[to].push(p) {
                // Cannot happen (no batch holds more than MAX_BATCH); counted if it did.
                self.overflow += 1;
                recycle.recycle(p);
            }
        }
        for (side, out) in self.sides.iter_mut().zip(self.split.iter_mut()) {
            if !out.is_empty() {
                side.tx(now, out, recycle);
            }
        }
        self.sent = [
            TxPort::stats(&self.sides[0]).packets,
            TxPort::stats(&self.sides[1]).packets,
        ];
    }

    fn stats(&self) -> PortStats {
        let mut s = summed_stats(self.sides.iter().map(TxPort::stats));
        s.dropped += self.overflow;
        s
    }

    fn start_window(&mut self) {
        self.sides.iter_mut().for_each(TxPort::start_window);
    }

    fn shared_pool_need(&self) -> Option<usize> {
        crate::queues::summed_need(self.sides.iter().map(TxPort::shared_pool_need))
    }

    fn attach_pool(&mut self, pool: &PacketPool) {
        self.sides.iter_mut().for_each(|s| TxPort::attach_pool(s, pool));
    }

    fn return_buffers(&mut self, pool: &mut PacketPool) {
        self.sides.iter_mut().for_each(|s| TxPort::return_buffers(s, pool));
    }

    fn window_packets(&self) -> u64 {
        self.sides.iter().map(TxPort::window_packets).sum()
    }

    fn lost_in_flight(&self) -> u64 {
        self.sides.iter().map(TxPort::lost_in_flight).sum()
    }

    fn counters(&self) -> Vec<NfCounter> {
        let mut c = vec![
            NfCounter::total("forward_out", self.sent[1]),
            NfCounter::total("reverse_out", self.sent[0]),
        ];
        c.extend(summed(self.sides.iter().map(TxPort::counters)));
        c
    }

    fn drops(&self) -> Vec<(&'static str, u64)> {
        let mut d = summed_drops(self.sides.iter().map(TxPort::drops));
        d.push(("overflow", self.overflow));
        d
    }

    fn info(&self) -> PortInfo {
        both_info(TxPort::info(&self.sides[0]), TxPort::info(&self.sides[1]))
    }
}

/// One port's description from its two sides': the input's settings as `in.*`, the
/// output's as `out.*`.
fn both_info(input: PortInfo, output: PortInfo) -> PortInfo {
    let mut settings = std::collections::BTreeMap::new();
    for (prefix, info) in [("in", &input), ("out", &output)] {
        for (k, v) in &info.settings {
            settings.insert(format!("{prefix}.{k}"), v.clone());
        }
    }
    PortInfo {
        kind: input.kind.clone(),
        summary: format!("both ways between {} and {}", input.summary, output.summary),
        settings,
    }
}
