//! A chain of NFs run on one thread: the unit every runtime schedules.

use sfclab_core::nf::Verdict;
use sfclab_core::{Batch, DropReason, NetworkFunction, NfStats, PacketPool, Verdicts, tsc};

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
    pub fn process<const ACCOUNT: bool>(&mut self, batch: &mut Batch, pool: &mut PacketPool) {
        let mut t0 = if ACCOUNT { tsc::now() } else { 0 };
        for slot in &mut self.slots {
            let n = batch.len();
            slot.stats.packets_in += n as u64;
            slot.stats.batches += 1;
            slot.nf.process(batch, &mut self.verdicts);
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
fn settle(
    batch: &mut Batch,
    verdicts: &mut Verdicts,
    stats: &mut NfStats,
    outs: &mut [Batch],
    pool: &mut PacketPool,
) -> usize {
    let n = batch.len();
    let mut dropped = 0;
    batch.partition(
        |i, _| verdicts.get(i) == Verdict::Continue,
        |i, p| match verdicts.get(i) {
            Verdict::Drop(reason) => {
                stats.count_drop(reason);
                dropped += 1;
                pool.free(p);
            }
            Verdict::Out(port) => match outs.get_mut(usize::from(port)) {
                Some(out) => {
                    if let Err(p) = out.push(p) {
                        // Unreachable while outs are flushed every pass; counted, not lost.
                        stats.count_drop(DropReason::TxFull);
                        dropped += 1;
                        pool.free(p);
                    }
                }
                None => {
                    stats.count_drop(DropReason::NoSuchPort);
                    dropped += 1;
                    pool.free(p);
                }
            },
            Verdict::Continue => unreachable!("continue is kept"),
        },
    );
    verdicts.clear(n);
    dropped
}
