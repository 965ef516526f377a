//! Several queues of one interface as one port: the tester's side of a multi-queue
//! device under test. Sending spreads frames over the queues by flow hash, as a NIC's
//! RSS would on the other side (on veth, a frame sent on queue k arrives on the peer's
//! queue k), so each of the device's replicas sees whole flows; receiving polls every
//! queue in turn. Counters, drops and statistics are the queues' sums.

use sfclab_core::packet::shard_of;
use sfclab_core::port::{PortInfo, PortStats, Shortfall};
use sfclab_core::{Batch, NfCounter, PacketPool, Recycle, RxPort, TxPort};

/// A port made of one port per queue of an interface.
pub struct QueueSet<P> {
    queues: Vec<P>,
    /// Per queue: this batch's frames for it (sending).
    split: Vec<Batch>,
    /// The queue the next receive starts with, so none is starved.
    next: usize,
}

impl<P> QueueSet<P> {
    /// `queues[k]` is queue k's port; `batch` the run's batch size.
    ///
    /// # Panics
    /// When `queues` is empty (a caller's bug: an interface has at least one queue).
    pub fn new(queues: Vec<P>, batch: usize) -> QueueSet<P> {
        assert!(!queues.is_empty(), "a queue set needs at least one queue");
        QueueSet {
            split: queues.iter().map(|_| Batch::new(batch)).collect(),
            queues,
            next: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.queues.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }

    fn info_of(&self, info: impl Fn(&P) -> PortInfo) -> PortInfo {
        let mut i = info(&self.queues[0]);
        if self.queues.len() > 1 {
            i.settings.remove("queue");
            i.settings.insert("queues".into(), self.queues.len().to_string());
            i.summary = format!("{} x{} queues (flows spread by hash)", i.summary, self.queues.len());
        }
        i
    }
}

/// Sums counters of the same name, in the order of their first appearance.
pub(crate) fn summed(each: impl Iterator<Item = Vec<NfCounter>>) -> Vec<NfCounter> {
    let mut out: Vec<NfCounter> = Vec::new();
    for c in each.flatten() {
        match out.iter_mut().find(|o| o.name == c.name) {
            Some(o) => o.value += c.value,
            None => out.push(c),
        }
    }
    out
}

/// Sums drops of the same cause, in the order of their first appearance.
pub(crate) fn summed_drops(each: impl Iterator<Item = Vec<(&'static str, u64)>>) -> Vec<(&'static str, u64)> {
    let mut out: Vec<(&'static str, u64)> = Vec::new();
    for (cause, n) in each.flatten() {
        match out.iter_mut().find(|o| o.0 == cause) {
            Some(o) => o.1 += n,
            None => out.push((cause, n)),
        }
    }
    out
}

pub(crate) fn summed_stats(each: impl Iterator<Item = PortStats>) -> PortStats {
    each.fold(PortStats::default(), |mut s, q| {
        s.add(&q);
        s
    })
}

/// What ports lending buffers from a shared pool need of it together (`None` when
/// none lends).
pub(crate) fn summed_need(needs: impl Iterator<Item = Option<usize>>) -> Option<usize> {
    needs.fold(None, |sum, n| match (sum, n) {
        (None, n) => n,
        (s, None) => s,
        (Some(a), Some(b)) => Some(a + b),
    })
}

impl<P: RxPort> RxPort for QueueSet<P> {
    fn rx(&mut self, now: u64, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        let n = self.queues.len();
        let mut got = 0;
        for i in 0..n {
            if batch.room() == 0 {
                break;
            }
            got += self.queues[(self.next + i) % n].rx(now, pool, batch);
        }
        self.next = (self.next + 1) % n;
        got
    }
    fn exhausted(&self) -> bool {
        self.queues.iter().all(|q| q.exhausted())
    }
    fn needs_fresh_clock(&self) -> bool {
        self.queues.iter().any(|q| q.needs_fresh_clock())
    }
    fn stats(&self) -> PortStats {
        summed_stats(self.queues.iter().map(RxPort::stats))
    }
    fn start_window(&mut self, count: Option<u64>) {
        for q in &mut self.queues {
            q.start_window(count);
        }
    }
    fn shortfall(&self) -> Shortfall {
        self.queues.iter().fold(Shortfall::default(), |s, q| {
            let q = q.shortfall();
            Shortfall {
                pool_empty: s.pool_empty + q.pool_empty,
                behind: s.behind + q.behind,
                not_offered: s.not_offered + q.not_offered,
            }
        })
    }
    fn counters(&self) -> Vec<NfCounter> {
        summed(self.queues.iter().map(RxPort::counters))
    }
    fn drops(&self) -> Vec<(&'static str, u64)> {
        summed_drops(self.queues.iter().map(RxPort::drops))
    }
    fn finish(&mut self) -> bool {
        // Every queue hears it, even after one says frames are in flight.
        self.queues.iter_mut().fold(false, |any, q| q.finish() | any)
    }
    fn discard_unread(&mut self) {
        self.queues.iter_mut().for_each(RxPort::discard_unread);
    }
    fn shared_pool_need(&self) -> Option<usize> {
        crate::queues::summed_need(self.queues.iter().map(RxPort::shared_pool_need))
    }
    fn attach_pool(&mut self, pool: &PacketPool) {
        self.queues.iter_mut().for_each(|q| RxPort::attach_pool(q, pool));
    }
    fn return_buffers(&mut self, pool: &mut PacketPool) {
        self.queues.iter_mut().for_each(|q| RxPort::return_buffers(q, pool));
    }
    fn info(&self) -> PortInfo {
        self.info_of(RxPort::info)
    }
}

impl<P: TxPort> TxPort for QueueSet<P> {
    fn tx<R: Recycle>(&mut self, now: u64, batch: &mut Batch, recycle: &mut R) {
        let n = self.queues.len();
        if n == 1 {
            return self.queues[0].tx(now, batch, recycle);
        }
        for mut p in batch.drain() {
            let k = shard_of(p.flow_hash(), n);
            // Each split holds a whole batch and is empty between calls: it has room.
            if self.split[k].push(p).is_err() {
                unreachable!("a split batch is as large as the batch");
            }
        }
        for (q, split) in self.queues.iter_mut().zip(&mut self.split) {
            if !split.is_empty() {
                q.tx(now, split, recycle);
            }
        }
    }
    fn stats(&self) -> PortStats {
        summed_stats(self.queues.iter().map(TxPort::stats))
    }
    fn shared_pool_need(&self) -> Option<usize> {
        crate::queues::summed_need(self.queues.iter().map(TxPort::shared_pool_need))
    }
    fn attach_pool(&mut self, pool: &PacketPool) {
        self.queues.iter_mut().for_each(|q| TxPort::attach_pool(q, pool));
    }
    fn return_buffers(&mut self, pool: &mut PacketPool) {
        self.queues.iter_mut().for_each(|q| TxPort::return_buffers(q, pool));
    }
    fn start_window(&mut self) {
        for q in &mut self.queues {
            q.start_window();
        }
    }
    fn flush(&mut self) {
        self.queues.iter_mut().for_each(TxPort::flush);
    }
    fn window_packets(&self) -> u64 {
        self.queues.iter().map(TxPort::window_packets).sum()
    }
    fn lost_in_flight(&self) -> u64 {
        self.queues.iter().map(TxPort::lost_in_flight).sum()
    }
    fn counters(&self) -> Vec<NfCounter> {
        summed(self.queues.iter().map(TxPort::counters))
    }
    fn drops(&self) -> Vec<(&'static str, u64)> {
        summed_drops(self.queues.iter().map(TxPort::drops))
    }
    fn info(&self) -> PortInfo {
        self.info_of(TxPort::info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sfclab_core::port::PortStats;

    /// A queue that records what it was given, or hands out `left` packets.
    struct Recorder {
        seen: Vec<u32>,
        left: usize,
    }

    impl TxPort for Recorder {
        fn tx<R: Recycle>(&mut self, _now: u64, batch: &mut Batch, recycle: &mut R) {
            for mut p in batch.drain() {
                self.seen.push(p.flow_hash());
                recycle.recycle(p);
            }
        }
        fn stats(&self) -> PortStats {
            PortStats {
                packets: self.seen.len() as u64,
                ..PortStats::default()
            }
        }
        fn window_packets(&self) -> u64 {
            self.seen.len() as u64
        }
        fn info(&self) -> PortInfo {
            PortInfo {
                kind: "recorder".into(),
                summary: "recorder".into(),
                settings: [("queue".to_string(), "0".to_string())].into(),
            }
        }
    }

    impl RxPort for Recorder {
        fn rx(&mut self, _now: u64, pool: &mut PacketPool, batch: &mut Batch) -> usize {
            let n = self.left.min(batch.room());
            pool.alloc_into(batch, n);
            self.left -= n;
            n
        }
        fn stats(&self) -> PortStats {
            PortStats::default()
        }
        fn start_window(&mut self, _count: Option<u64>) {}
        fn info(&self) -> PortInfo {
            TxPort::info(self)
        }
    }

    fn recorders(n: usize, left: usize) -> QueueSet<Recorder> {
        QueueSet::new((0..n).map(|_| Recorder { seen: vec![], left }).collect(), 32)
    }

    #[test]
    fn sending_spreads_flows_over_queues_whole_and_loses_nothing() {
        let mut pool = PacketPool::new(64);
        let mut set = recorders(3, 0);
        let mut batch = Batch::new(32);
        for round in 0..10u32 {
            pool.alloc_into(&mut batch, 32);
            for (i, p) in batch.iter_mut().enumerate() {
                // 8 flows, their hashes spread over the whole u32 range.
                p.meta.flow_hash = ((i as u32 + round) % 8).wrapping_mul(0x2000_0001) | 1;
                p.meta.flags |= sfclab_core::packet::FLAG_FLOW_HASH;
            }
            set.tx(0, &mut batch, &mut pool);
            assert!(batch.is_empty(), "every frame was handed to a queue");
        }
        assert_eq!(TxPort::stats(&set).packets, 320);
        assert_eq!(set.window_packets(), 320);
        // Every flow on exactly one queue, and more than one queue used.
        let queue_of = |h: u32| set.queues.iter().position(|q| q.seen.contains(&h)).unwrap();
        for q in 0..3 {
            for h in &set.queues[q].seen {
                assert_eq!(queue_of(*h), q, "flow {h:#x} on two queues");
            }
        }
        assert!(set.queues.iter().filter(|q| !q.seen.is_empty()).count() > 1);
        assert_eq!(pool.available(), 64, "every buffer back in the pool");
        assert_eq!(TxPort::info(&set).settings.get("queues").map(String::as_str), Some("3"));
    }

    #[test]
    fn receiving_drains_every_queue_and_respects_the_batch() {
        let mut pool = PacketPool::new(256);
        let mut set = recorders(3, 20);
        let mut batch = Batch::new(32);
        let mut total = 0;
        for _ in 0..10 {
            let n = set.rx(0, &mut pool, &mut batch);
            assert!(n <= 32 && batch.len() == n);
            total += n;
            pool.free_batch(&mut batch);
        }
        assert_eq!(total, 60, "all three queues' frames");
        assert!(set.queues.iter().all(|q| q.left == 0));
    }
}
