//! A chain of NFs run on one thread: the unit every runtime schedules.

use sfclab_core::nf::Verdict;
use sfclab_core::{Batch, BatchView, DropReason, NetworkFunction, NfStats, Recycle, Verdicts, tsc};

/// One NF in a chain, with the counters the runtime keeps for it.
pub struct NfSlot {
    pub name: String,
    pub nf: Box<dyn NetworkFunction>,
    pub stats: NfStats,
}

/// NFs in order, plus the verdict scratch space and the batches of packets that left
/// on an output port (flushed by the runtime after each pass).
pub struct Chain {
    pub slots: Vec<NfSlot>,
    verdicts: Verdicts,
    /// `outs[k]`: packets an NF sent to output port k during this pass.
    outs: Vec<Batch>,
}

impl Chain {
    /// `ports`: how many output ports the runtime offers (at least 1: the chain's end).
    pub fn new(nfs: Vec<(String, Box<dyn NetworkFunction>)>, batch: usize, ports: usize) -> Chain {
        Chain {
            slots: nfs
                .into_iter()
                .map(|(name, nf)| NfSlot {
                    name,
                    nf,
                    stats: NfStats::default(),
                })
                .collect(),
            verdicts: Verdicts::default(),
            outs: (0..ports.max(1)).map(|_| Batch::new(batch)).collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Runs `batch` through every NF. On return `batch` holds the packets that reached
    /// the end (for port 0), `outs()` those sent to ports early; drops are freed and
    /// counted. With `ACCOUNT`, each NF's TSC cycles are measured per batch.
    #[inline]
    pub fn process<const ACCOUNT: bool, R: Recycle>(&mut self, batch: &mut Batch, pool: &mut R) {
        let mut t0 = if ACCOUNT { tsc::now() } else { 0 };
        for slot in &mut self.slots {
            let n = batch.len();
            slot.stats.packets_in += n as u64;
            slot.stats.batches += 1;
            self.verdicts.begin(n);
            slot.nf.process(BatchView::new(batch), &mut self.verdicts);
            let dropped = if self.verdicts.exceptions() != 0 {
                settle(batch, &mut self.verdicts, &mut slot.stats, &mut self.outs, pool)
            } else {
                0
            };
            // Continued or sent to a port: both left this NF.
            slot.stats.packets_out += (n - dropped) as u64;
            if ACCOUNT {
                let t1 = tsc::now();
                slot.stats.cycles += t1 - t0;
                t0 = t1;
            }
            if batch.is_empty() {
                break;
            }
        }
    }

    /// Packets sent to output ports during the last pass, by port.
    pub fn outs(&mut self) -> &mut [Batch] {
        &mut self.outs
    }

    /// Calls every NF's slow path.
    pub fn tick(&mut self, now: u64) {
        for s in &mut self.slots {
            s.nf.tick(now);
        }
    }

    /// Packets dropped inside the chain, all NFs and reasons.
    pub fn dropped(&self) -> u64 {
        self.slots.iter().map(|s| s.stats.dropped()).sum()
    }
}

/// The slow path after an NF that returned exceptions: drops go back to the pool and
/// are counted by reason, outs move to their port's batch (or are dropped as
/// `no-such-port`), continues stay in order. Returns how many were dropped.
#[cold]
fn settle<R: Recycle>(
    batch: &mut Batch,
    verdicts: &mut Verdicts,
    stats: &mut NfStats,
    outs: &mut [Batch],
    pool: &mut R,
) -> usize {
    let mut dropped = 0;
    batch.partition(
        |i, _| verdicts.get(i) == Verdict::Continue,
        |i, p| match verdicts.get(i) {
            Verdict::Drop(reason) => {
                stats.count_drop(reason);
                dropped += 1;
                pool.recycle(p);
            }
            Verdict::Out(port) => match outs.get_mut(usize::from(port)) {
                Some(out) => {
                    if let Err(p) = out.push(p) {
                        // Unreachable while outs are flushed every pass; counted, not lost.
                        stats.count_drop(DropReason::TxFull);
                        dropped += 1;
                        pool.recycle(p);
                    }
                }
                None => {
                    stats.count_drop(DropReason::NoSuchPort);
                    dropped += 1;
                    pool.recycle(p);
                }
            },
            Verdict::Continue => unreachable!("continue is kept"),
        },
    );
    verdicts.clear();
    dropped
}

#[cfg(test)]
mod tests {
    use super::*;
    use sfclab_core::{PacketPool, Verdicts};

    /// Sends every 4th packet (+1) out on port 0, (+2) out on port 3, (+3) drops it.
    struct Steer;

    impl NetworkFunction for Steer {
        fn kind(&self) -> &'static str {
            "steer"
        }
        fn process(&mut self, batch: BatchView<'_>, verdicts: &mut Verdicts) {
            for (i, p) in batch.iter().enumerate() {
                match p.meta.seq % 4 {
                    1 => verdicts.out(i, 0),
                    2 => verdicts.out(i, 3),
                    3 => verdicts.drop(i, DropReason::Filtered),
                    _ => {}
                }
            }
        }
    }

    /// Counts what it sees.
    struct Tally(std::sync::Arc<std::sync::atomic::AtomicU64>);

    impl NetworkFunction for Tally {
        fn kind(&self) -> &'static str {
            "tally"
        }
        fn process(&mut self, batch: BatchView<'_>, _: &mut Verdicts) {
            self.0
                .fetch_add(batch.len() as u64, std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[test]
    fn verdicts_move_drop_and_count_every_packet() {
        let seen_after = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let mut chain = Chain::new(
            vec![
                ("steer".into(), Box::new(Steer)),
                ("tally".into(), Box::new(Tally(seen_after.clone()))),
            ],
            32,
            2,
        );
        let mut pool = PacketPool::new(64);
        let mut batch = Batch::new(32);
        pool.alloc_into(&mut batch, 32);
        for (i, p) in batch.iter_mut().enumerate() {
            p.reset(60);
            p.meta.seq = i as u32;
        }
        chain.process::<true, _>(&mut batch, &mut pool);
        // 8 continue to the end in order, 8 left on port 0, 8 to a port that does not
        // exist (dropped as no-such-port), 8 filtered.
        let kept: Vec<u32> = batch.iter().map(|p| p.meta.seq).collect();
        assert_eq!(kept, (0..32).step_by(4).collect::<Vec<_>>());
        assert_eq!(
            seen_after.load(std::sync::atomic::Ordering::Relaxed),
            8,
            "later NFs see only continuing packets"
        );
        let s = chain.slots[0].stats;
        assert_eq!((s.packets_in, s.packets_out), (32, 16));
        assert_eq!(
            s.drops_by_reason().collect::<Vec<_>>(),
            vec![(DropReason::Filtered, 8), (DropReason::NoSuchPort, 8)]
        );
        assert!(s.cycles > 0);
        let outs = chain.outs();
        assert_eq!(
            outs[0].iter().map(|p| p.meta.seq).collect::<Vec<_>>(),
            (1..32).step_by(4).collect::<Vec<_>>()
        );
        assert!(outs[1].is_empty());
        pool.free_batch(&mut outs[0]);
        pool.free_batch(&mut batch);
        assert_eq!(pool.in_use(), 0, "dropped packets went back to the pool");
        assert_eq!(chain.dropped(), 16);
    }
}
