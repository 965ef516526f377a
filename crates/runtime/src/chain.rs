//! A chain of NFs run on one thread: the unit every runtime schedules.
//!
//! NFs are wired as a graph: each output of an NF leads to a later NF or out of the
//! chain on an egress port ([`Next`]). The common linear chain wires every NF's first
//! output to the next NF and the last one's to egress 0; its packets then travel as one
//! batch and cost no more than a plain loop. Packets that take another way (another
//! output, or emitted: created or released by an NF) wait in the target NF's queue and
//! are processed after the main batch reaches that NF, so a pass stays in chain order
//! and every edge points forward: no packet can loop.

use sfclab_core::nf::Verdict;
use sfclab_core::{
    Batch, BatchView, Buffers, ChainContext, DropReason, Emitted, MAX_BATCH, NetworkFunction, NfStats, PacketRef,
    Recycle, Verdicts, tsc,
};

/// Where an output of an NF leads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// To the NF at this index of the chain (always a later one).
    Nf(usize),
    /// Out of the chain on this egress port (0: where the chain's end goes).
    Egress(usize),
}

/// A chain's NFs and how they are wired: what the runtimes take. `wiring: None` is the
/// linear chain (`Chain::new`).
pub struct ChainGraph {
    pub nfs: Vec<(String, Box<dyn NetworkFunction>)>,
    pub wiring: Option<Vec<Vec<Next>>>,
}

impl From<Vec<(String, Box<dyn NetworkFunction>)>> for ChainGraph {
    fn from(nfs: Vec<(String, Box<dyn NetworkFunction>)>) -> ChainGraph {
        ChainGraph { nfs, wiring: None }
    }
}

impl ChainGraph {
    /// The chain, built for batches of `batch` and `egress` egress ports.
    pub fn build(self, batch: usize, egress: usize) -> Result<Chain, WiringError> {
        match self.wiring {
            None => Ok(Chain::new(self.nfs, batch, egress)),
            Some(w) => Chain::wired(self.nfs, w, batch, egress),
        }
    }
}

/// One NF in a chain, with where its outputs lead and the counters the runtime keeps.
pub struct NfSlot {
    pub(crate) name: String,
    pub(crate) nf: Box<dyn NetworkFunction>,
    pub(crate) stats: NfStats,
    /// Per output of the NF (`outputs()`), where it leads: checked by `Chain::wired`
    /// (every target exists and lies later), so private to the runtime.
    pub(crate) next: Vec<Next>,
}

impl NfSlot {
    /// The name of a drop reason this NF counted.
    pub fn reason_name(&self, reason: DropReason) -> &'static str {
        reason.name(self.nf.drop_reasons())
    }
}

/// A wiring that cannot run: which NF and output, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WiringError(pub String);

impl std::fmt::Display for WiringError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// NFs in order with their wiring, the verdict scratch space, the queues of packets
/// that left the main path, and the batches that left the chain on egress ports
/// (flushed by the runtime after each pass).
pub struct Chain {
    /// The NFs in order with their wiring: private, as the walk relies on the wiring
    /// `wired` checked (a target rewired later would strand buffers or panic).
    pub(crate) slots: Vec<NfSlot>,
    verdicts: Verdicts,
    /// `pending[j]`: packets waiting for NF j that did not come with the main batch.
    pending: Vec<Batch>,
    /// Packets in `pending` now: the main loop looks at the queues only when some wait.
    queued: usize,
    /// Per NF, where its main batch goes next: the index of an NF, `n` for the chain's
    /// end (egress 0), `n + e` for egress `e`.
    main_next: Vec<usize>,
    /// Every NF's main batch goes to the next NF (the last one's to the chain's end).
    linear: bool,
    /// A pending batch being processed.
    side: Batch,
    emitted: Emitted,
    /// `outs[e]`: packets that left the chain on egress e during this pass, other than
    /// the main batch reaching the chain's end.
    outs: Vec<Batch>,
    /// Where the run began, for `Context::now_ns`.
    start: u64,
    ns_per_tick: f64,
    /// Where the chain runs, for `Context`.
    pub(crate) core: Option<usize>,
    pub(crate) replica: usize,
    /// With a responder at the far end: what answers and the reply direction's counters.
    reply: Option<ReplyPath>,
}

/// The responder at a chain's far end and the way back: every packet that reaches the
/// end is answered in its own buffer ([`sfclab_traffic::responder`]) and the reply runs
/// through the same NFs in reverse order (their `in_port` is 1) to the near end, where
/// the runtime's sink counts it. On the way back every NF output and every packet an NF
/// creates or releases leaves at the near end.
pub struct ReplyPath {
    /// The responder as a place: requests in, replies out, the rest dropped by reason.
    pub responder: NfStats,
    /// Per NF (chain order), its counters on the way back.
    pub back: Vec<NfStats>,
    /// Per NF, every output to the near end (egress 0).
    wiring: Vec<Vec<Next>>,
    /// What left forward on egress 0 another way than the main batch, while answered.
    far: Option<Batch>,
}

/// Why the responder answers nothing: own drop reasons of the `responder` place.
pub const RESPONDER_REASONS: &[&str] = &["no-reply", "rst-absorbed"];
pub const NO_REPLY: DropReason = DropReason::named(RESPONDER_REASONS, "no-reply");
pub const RST_ABSORBED: DropReason = DropReason::named(RESPONDER_REASONS, "rst-absorbed");

impl Chain {
    /// A linear chain: each NF's first output to the next NF, the last one's to egress 0;
    /// every other output leaves the chain on egress 0. `egress`: how many egress ports
    /// the runtime offers (at least 1).
    pub fn new(nfs: Vec<(String, Box<dyn NetworkFunction>)>, batch: usize, egress: usize) -> Chain {
        let n = nfs.len();
        let wiring = nfs
            .iter()
            .enumerate()
            .map(|(i, (_, nf))| {
                let first = if i + 1 < n { Next::Nf(i + 1) } else { Next::Egress(0) };
                let outputs = nf.outputs().len().max(1);
                std::iter::once(first)
                    .chain(std::iter::repeat_n(Next::Egress(0), outputs - 1))
                    .collect()
            })
            .collect();
        Chain::wired(nfs, wiring, batch, egress).expect("a linear wiring is valid")
    }

    /// A chain wired as given: `wiring[i][k]` is where output k of NF i leads. Every
    /// edge must point to a later NF or an existing egress port, and every output of an
    /// NF must be wired.
    pub fn wired(
        nfs: Vec<(String, Box<dyn NetworkFunction>)>,
        wiring: Vec<Vec<Next>>,
        batch: usize,
        egress: usize,
    ) -> Result<Chain, WiringError> {
        let egress = egress.max(1);
        if wiring.len() != nfs.len() {
            return Err(WiringError(format!("{} NFs but {} wirings", nfs.len(), wiring.len())));
        }
        for (i, ((name, nf), next)) in nfs.iter().zip(&wiring).enumerate() {
            let outputs = nf.outputs();
            if next.len() != outputs.len().max(1) {
                return Err(WiringError(format!(
                    "{name} has {} output(s) ({}) but {} are wired",
                    outputs.len(),
                    outputs.join(", "),
                    next.len()
                )));
            }
            for (k, n) in next.iter().enumerate() {
                let ok = match *n {
                    Next::Nf(j) => j > i && j < nfs.len(),
                    Next::Egress(e) => e < egress,
                };
                if !ok {
                    let output = outputs.get(k).map_or("out", String::as_str);
                    return Err(WiringError(format!(
                        "{name}.{output} leads to {n:?}: an output leads to a later NF or an egress port (0..{egress})"
                    )));
                }
            }
        }
        let n = nfs.len();
        let main_next: Vec<usize> = wiring
            .iter()
            .map(|next| match next[0] {
                Next::Nf(k) => k,
                Next::Egress(e) => n + e,
            })
            .collect();
        Ok(Chain {
            queued: 0,
            linear: main_next.iter().enumerate().all(|(i, &m)| m == i + 1),
            main_next,
            pending: (0..nfs.len()).map(|_| Batch::new(MAX_BATCH)).collect(),
            slots: nfs
                .into_iter()
                .zip(wiring)
                .map(|((name, nf), next)| NfSlot {
                    name,
                    nf,
                    stats: NfStats::default(),
                    next,
                })
                .collect(),
            verdicts: Verdicts::default(),
            side: Batch::new(MAX_BATCH),
            emitted: Emitted::default(),
            outs: (0..egress).map(|_| Batch::new(MAX_BATCH.max(batch))).collect(),
            start: tsc::now(),
            ns_per_tick: 1e9 / tsc::hz(),
            core: None,
            replica: 0,
            reply: None,
        })
    }

    /// Puts a responder at the far end: from now on every packet reaching the end is
    /// answered and its reply runs back through the NFs. Linear chains only: the way
    /// back is the way there, reversed.
    pub fn answer_at_end(&mut self) -> Result<(), WiringError> {
        if !self.linear
            || self
                .slots
                .iter()
                .any(|s| s.next[1..].iter().any(|n| *n != Next::Egress(0)))
        {
            return Err(WiringError(
                "a responder needs a linear chain whose other outputs all lead to egress 0: the way back is the way there, reversed".into(),
            ));
        }
        self.reply = Some(ReplyPath {
            responder: NfStats::default(),
            back: vec![NfStats::default(); self.slots.len()],
            wiring: self.slots.iter().map(|s| vec![Next::Egress(0); s.next.len()]).collect(),
            far: Some(Batch::new(MAX_BATCH)),
        });
        Ok(())
    }

    /// The reply direction's counters, with a responder.
    pub fn reply_path(&self) -> Option<&ReplyPath> {
        self.reply.as_ref()
    }

    /// Whether every NF's first output leads to the next NF (or the last one's out of
    /// the chain): the shape the pipeline runtime can cut into stages.
    pub fn is_linear(&self) -> bool {
        let wiring: Vec<Vec<Next>> = self.slots.iter().map(|s| s.next.clone()).collect();
        is_linear(&wiring)
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Runs `batch` through the chain at TSC `now`. On return `batch` holds the packets
    /// that reached the chain's end on egress 0, `outs()` those that left on an egress
    /// any other way; drops are freed and counted. With `ACCOUNT`, each NF's TSC cycles
    /// are measured per call.
    #[inline]
    pub fn process<const ACCOUNT: bool, B: Buffers>(&mut self, batch: &mut Batch, buffers: &mut B, now: u64) {
        self.forward::<ACCOUNT, false, B>(batch, buffers, now);
        if self.reply.is_some() {
            self.answer::<ACCOUNT, B>(batch, buffers, now);
        }
    }

    /// The forward pass; with `POLL` no batch came (`batch` is empty) and every NF that
    /// holds packets is called to release what is due (`poll`).
    #[inline]
    fn forward<const ACCOUNT: bool, const POLL: bool, B: Buffers>(
        &mut self,
        batch: &mut Batch,
        buffers: &mut B,
        now: u64,
    ) {
        let Chain {
            slots,
            verdicts,
            pending,
            side,
            emitted,
            outs,
            queued,
            main_next,
            linear,
            core,
            replica,
            start,
            ns_per_tick,
            reply: _,
        } = self;
        // One context for the whole pass: the NFs of a chain share time and place.
        let mut ctx = ChainContext::new(now, *start, *ns_per_tick, buffers, emitted).at(*core, *replica, 0);
        let mut t0 = if ACCOUNT { tsc::now() } else { 0 };
        let mut parts = Parts {
            verdicts,
            pending,
            outs,
            queued,
        };
        if POLL {
            let n = slots.len();
            graph::<ACCOUNT>(slots, &mut ctx, batch, &mut parts, side, main_next, 0, n, t0, true);
            return;
        }
        if !*linear {
            graph::<ACCOUNT>(slots, &mut ctx, batch, &mut parts, side, main_next, 0, 0, t0, false);
            return;
        }
        // The linear chain while nothing waits off the main path: a plain loop, as cheap
        // as chaining gets. Packets queued for a later NF hand over to the graph walk.
        let n = slots.len();
        for j in 0..n {
            let slot = &mut slots[j];
            let len = batch.len();
            slot.stats.packets_in += len as u64;
            slot.stats.batches += 1;
            parts.verdicts.begin(len);
            slot.nf.process(ctx.nf(), BatchView::new(batch), parts.verdicts);
            let quiet = parts.verdicts.exceptions() == 0 && ctx.is_quiet();
            if quiet {
                slot.stats.packets_out += len as u64;
            } else {
                after_call(slot, &mut ctx, batch, &mut parts, len);
            }
            if ACCOUNT {
                let t1 = tsc::now();
                slot.stats.cycles += t1 - t0;
                t0 = t1;
            }
            if !quiet && *parts.queued != 0 {
                let at = if batch.is_empty() { n } else { j + 1 };
                graph::<ACCOUNT>(
                    slots,
                    &mut ctx,
                    batch,
                    &mut parts,
                    side,
                    main_next,
                    j + 1,
                    at,
                    t0,
                    false,
                );
                return;
            }
            if batch.is_empty() {
                return;
            }
        }
    }

    /// No batch came, but NFs hold packets: each is called with an empty batch to
    /// release what is due (a shaper's queue), and what it emits runs on through the
    /// chain, as `process` runs a batch: `batch` (given empty) then holds what reached
    /// the chain's end (with a responder, the replies back at the near end), `outs()`
    /// what left on each egress another way. False, at the cost of a look at each NF,
    /// when none holds any.
    #[cold]
    pub fn poll<const ACCOUNT: bool, B: Buffers>(&mut self, batch: &mut Batch, buffers: &mut B, now: u64) -> bool {
        debug_assert!(batch.is_empty(), "poll is for when no batch came");
        if !self.slots.iter().any(|s| s.nf.held() > 0) {
            return false;
        }
        self.forward::<ACCOUNT, true, B>(batch, buffers, now);
        if self.reply.is_some() && (!batch.is_empty() || !self.outs[0].is_empty()) {
            self.answer::<ACCOUNT, B>(batch, buffers, now);
        }
        true
    }

    /// The far end answers what reached it (the main batch, then what left on egress 0
    /// another way), and the replies run back through the NFs in reverse order.
    #[cold]
    #[inline(never)]
    fn answer<const ACCOUNT: bool, B: Buffers>(&mut self, batch: &mut Batch, buffers: &mut B, now: u64) {
        // What left forward on egress 0 reached the far end too; the way back fills
        // egress 0 afresh.
        let mut far = self.reply.as_mut().and_then(|r| r.far.take()).expect("answering");
        std::mem::swap(&mut far, &mut self.outs[0]);
        self.reply_pass::<ACCOUNT, B>(batch, buffers, now);
        if !far.is_empty() {
            self.reply_pass::<ACCOUNT, B>(&mut far, buffers, now);
            let reply = self.reply.as_mut().expect("answering");
            let last = reply.back.first_mut().map_or(&mut reply.responder, |s| s);
            for p in far.drain() {
                route(Next::Egress(0), p, &mut self.pending, &mut self.outs, last, buffers);
            }
        }
        self.reply.as_mut().expect("answering").far = Some(far);
    }

    fn reply_pass<const ACCOUNT: bool, B: Buffers>(&mut self, batch: &mut Batch, buffers: &mut B, now: u64) {
        let Chain {
            slots,
            verdicts,
            pending,
            outs,
            queued,
            emitted,
            core,
            replica,
            start,
            ns_per_tick,
            reply,
            ..
        } = self;
        let reply = reply.as_mut().expect("answering");
        let mut ctx = ChainContext::new(now, *start, *ns_per_tick, buffers, emitted).at(*core, *replica, 1);
        let mut t0 = if ACCOUNT { tsc::now() } else { 0 };
        // The responder: each request becomes its reply, or is counted as not answered.
        let len = batch.len();
        reply.responder.packets_in += len as u64;
        reply.responder.batches += 1;
        verdicts.begin(len);
        for (i, p) in batch.iter_mut().enumerate() {
            match sfclab_traffic::responder::reply_in_place(p.data_mut()) {
                Ok(()) => {}
                Err(sfclab_traffic::responder::NoReply::Reset) => verdicts.drop(i, RST_ABSORBED),
                Err(sfclab_traffic::responder::NoReply::Unsupported) => verdicts.drop(i, NO_REPLY),
            }
        }
        let mut gone = 0;
        if verdicts.exceptions() != 0 {
            let responder = &mut reply.responder;
            let recycle = ctx.parts().0;
            batch.partition(
                |i, _| verdicts.get(i) == Verdict::Continue,
                |i, p| {
                    if let Verdict::Drop(r) = verdicts.get(i) {
                        responder.count_drop(r);
                    }
                    gone += 1;
                    recycle.recycle(p);
                },
            );
            verdicts.clear();
        }
        reply.responder.packets_out += (len - gone) as u64;
        if ACCOUNT {
            let t1 = tsc::now();
            reply.responder.cycles += t1 - t0;
            t0 = t1;
        }
        // Back through the NFs, last to first, each with its reply-direction counters
        // and every output leading to the near end.
        let mut parts = Parts {
            verdicts,
            pending,
            outs,
            queued,
        };
        for j in (0..slots.len()).rev() {
            if batch.is_empty() {
                break;
            }
            let slot = &mut slots[j];
            std::mem::swap(&mut slot.stats, &mut reply.back[j]);
            std::mem::swap(&mut slot.next, &mut reply.wiring[j]);
            let len = batch.len();
            slot.stats.packets_in += len as u64;
            slot.stats.batches += 1;
            parts.verdicts.begin(len);
            slot.nf.process(ctx.nf(), BatchView::new(batch), parts.verdicts);
            if parts.verdicts.exceptions() == 0 && ctx.is_quiet() {
                slot.stats.packets_out += len as u64;
            } else {
                after_call(slot, &mut ctx, batch, &mut parts, len);
            }
            if ACCOUNT {
                let t1 = tsc::now();
                slot.stats.cycles += t1 - t0;
                t0 = t1;
            }
            std::mem::swap(&mut slot.stats, &mut reply.back[j]);
            std::mem::swap(&mut slot.next, &mut reply.wiring[j]);
        }
        debug_assert_eq!(*parts.queued, 0, "the way back queues nothing: every output leads out");
    }

    /// Packets that left the chain on each egress port during the last pass.
    pub fn outs(&mut self) -> &mut [Batch] {
        &mut self.outs
    }

    /// Calls every NF's slow path.
    pub fn tick(&mut self, now: u64) {
        for s in &mut self.slots {
            s.nf.tick(now);
        }
    }

    /// Packets held by the chain's NFs now.
    pub fn held(&self) -> u64 {
        self.slots.iter().map(|s| s.nf.held() as u64).sum()
    }

    /// The run ended: every NF gives back what it holds, counted as `held-at-end` drops.
    pub fn release_held<R: Recycle>(&mut self, recycle: &mut R) {
        for s in &mut self.slots {
            let stats = &mut s.stats;
            s.nf.release_held(&mut |p| {
                stats.count_drop(DropReason::HELD_AT_END);
                recycle.recycle(p);
            });
        }
    }

    /// Packets dropped inside the chain, all NFs and reasons (both ways, and at the
    /// responder).
    pub fn dropped(&self) -> u64 {
        let back = self.reply.as_ref().map_or(0, |r| {
            r.responder.dropped() + r.back.iter().map(NfStats::dropped).sum::<u64>()
        });
        self.slots.iter().map(|s| s.stats.dropped()).sum::<u64>() + back
    }

    /// Packets the chain's NFs created (both ways).
    pub fn created(&self) -> u64 {
        let back = self
            .reply
            .as_ref()
            .map_or(0, |r| r.back.iter().map(|s| s.created).sum::<u64>());
        self.slots.iter().map(|s| s.stats.created).sum::<u64>() + back
    }
}

/// The chain's state an NF call settles into.
struct Parts<'a> {
    verdicts: &'a mut Verdicts,
    pending: &'a mut [Batch],
    outs: &'a mut [Batch],
    queued: &'a mut usize,
}

/// The chain as a graph, from NF `from` on, the main batch at NF `at` (n: it has left
/// the chain): each NF takes the main batch when it is there, then what waits for it.
#[allow(clippy::too_many_arguments)]
#[cold]
#[inline(never)]
fn graph<const ACCOUNT: bool>(
    slots: &mut [NfSlot],
    ctx: &mut ChainContext<'_>,
    batch: &mut Batch,
    parts: &mut Parts<'_>,
    side: &mut Batch,
    main_next: &[usize],
    from: usize,
    mut at: usize,
    mut t0: u64,
    poll: bool,
) {
    let n = slots.len();
    for j in from..n {
        let slot = &mut slots[j];
        if poll && at != j && slot.nf.held() > 0 {
            // No batch for it, but it holds packets: a call with none lets it release
            // what is due.
            debug_assert!(side.is_empty());
            parts.verdicts.begin(0);
            slot.nf.process(ctx.nf(), BatchView::new(side), parts.verdicts);
            let quiet = ctx.is_quiet();
            after_call(slot, ctx, side, parts, 0);
            if ACCOUNT {
                // A call that released nothing was waiting, not working: its cycles
                // are idle time, not the cost of any packet.
                let t1 = tsc::now();
                if !quiet {
                    slot.stats.cycles += t1 - t0;
                }
                t0 = t1;
            }
        }
        if at == j {
            let len = batch.len();
            slot.stats.packets_in += len as u64;
            slot.stats.batches += 1;
            parts.verdicts.begin(len);
            slot.nf.process(ctx.nf(), BatchView::new(batch), parts.verdicts);
            after_call(slot, ctx, batch, parts, len);
            at = main_next[j];
            if at > n {
                // The first output leads out on egress `at - n` (not the chain's end).
                move_all(batch, &mut parts.outs[at - n], &mut slot.stats, ctx.parts().0);
                at = n;
            } else if batch.is_empty() {
                at = n;
            }
            if ACCOUNT {
                let t1 = tsc::now();
                slot.stats.cycles += t1 - t0;
                t0 = t1;
            }
        }
        if *parts.queued != 0 && !parts.pending[j].is_empty() {
            run_side(j, slot, ctx, side, parts);
            if ACCOUNT {
                let t1 = tsc::now();
                slot.stats.cycles += t1 - t0;
                t0 = t1;
            }
        }
        if at == n && *parts.queued == 0 && !poll {
            break;
        }
    }
}

/// After an NF's call that returned exceptions or emitted packets: verdicts settled,
/// emitted packets routed, packets out counted. On return `batch` holds what continues
/// along the first output.
#[cold]
fn after_call(slot: &mut NfSlot, ctx: &mut ChainContext<'_>, batch: &mut Batch, parts: &mut Parts<'_>, len: usize) {
    let gone = if parts.verdicts.exceptions() != 0 {
        let (gone, queued) = settle_verdicts(batch, parts.verdicts, slot, parts.pending, parts.outs, ctx.parts().0);
        *parts.queued += queued;
        gone
    } else {
        0
    };
    // Continued or sent along an output: both left this NF.
    slot.stats.packets_out += (len - gone) as u64;
    if !ctx.is_quiet() {
        let (buffers, emitted_now) = ctx.parts();
        *parts.queued += emitted(slot, emitted_now, parts.pending, parts.outs, buffers);
    }
}

/// NF `j` over the packets queued for it off the main path.
#[cold]
fn run_side(j: usize, slot: &mut NfSlot, ctx: &mut ChainContext<'_>, side: &mut Batch, parts: &mut Parts<'_>) {
    std::mem::swap(side, &mut parts.pending[j]);
    *parts.queued -= side.len();
    let len = side.len();
    slot.stats.packets_in += len as u64;
    parts.verdicts.begin(len);
    slot.nf.process(ctx.nf(), BatchView::new(side), parts.verdicts);
    after_call(slot, ctx, side, parts, len);
    // What continues goes where the NF's first output leads, as a side batch.
    let next = slot.next[0];
    let buffers = ctx.parts().0;
    for p in side.drain() {
        *parts.queued += route(next, p, parts.pending, parts.outs, &mut slot.stats, buffers);
    }
}

/// Whether `wiring` is a linear chain: each NF's first output to the next NF (the last
/// one's to egress 0), every other output out of the chain.
pub fn is_linear(wiring: &[Vec<Next>]) -> bool {
    let n = wiring.len();
    wiring.iter().enumerate().all(|(i, next)| {
        next.first() == Some(&if i + 1 < n { Next::Nf(i + 1) } else { Next::Egress(0) })
            && next[1..].iter().all(|n| matches!(n, Next::Egress(_)))
    })
}

/// Sends `p` where `next` leads: a later NF's queue or an egress port's batch. A full
/// queue is a `queue-full` drop at the NF it came from. Returns 1 when it queued the
/// packet for an NF, else 0.
#[inline]
fn route<R: Recycle + ?Sized>(
    next: Next,
    p: PacketRef,
    pending: &mut [Batch],
    outs: &mut [Batch],
    stats: &mut NfStats,
    recycle: &mut R,
) -> usize {
    let (queue, to_nf) = match next {
        Next::Nf(k) => (&mut pending[k], 1),
        Next::Egress(e) => (&mut outs[e], 0),
    };
    match queue.push(p) {
        Ok(()) => to_nf,
        Err(p) => {
            stats.count_drop(DropReason::QUEUE_FULL);
            stats.packets_out -= 1;
            recycle.recycle(p);
            0
        }
    }
}

/// The main batch reached its NF's first output and it leads to egress `e` != 0.
fn move_all<R: Recycle + ?Sized>(batch: &mut Batch, out: &mut Batch, stats: &mut NfStats, recycle: &mut R) {
    for p in batch.drain() {
        if let Err(p) = out.push(p) {
            stats.count_drop(DropReason::QUEUE_FULL);
            stats.packets_out -= 1;
            recycle.recycle(p);
        }
    }
}

/// Packets an NF emitted in its last call, routed along the outputs it named. Returns
/// how many were queued for NFs.
#[cold]
fn emitted<R: Recycle + ?Sized>(
    slot: &mut NfSlot,
    emitted: &mut Emitted,
    pending: &mut [Batch],
    outs: &mut [Batch],
    recycle: &mut R,
) -> usize {
    emitted.take_drops(|reason, n| slot.stats.count_drops(reason, n));
    let (created, overflow) = emitted.take_counts();
    slot.stats.created += created;
    slot.stats.count_drops(DropReason::QUEUE_FULL, overflow);
    let mut queued = 0;
    for (p, output) in emitted.drain() {
        slot.stats.packets_out += 1;
        match slot.next.get(usize::from(output)) {
            Some(&next) => queued += route(next, p, pending, outs, &mut slot.stats, recycle),
            None => {
                slot.stats.packets_out -= 1;
                slot.stats.count_drop(DropReason::NO_SUCH_OUTPUT);
                recycle.recycle(p);
            }
        }
    }
    queued
}

/// The slow path after an NF that returned exceptions: drops go back to the pool and
/// are counted by reason, held packets go to the NF, packets for other outputs to where
/// those lead; continues stay in order. Returns how many did not leave along an output
/// (dropped or held), and how many were queued for NFs.
#[cold]
fn settle_verdicts<R: Recycle + ?Sized>(
    batch: &mut Batch,
    verdicts: &mut Verdicts,
    slot: &mut NfSlot,
    pending: &mut [Batch],
    outs: &mut [Batch],
    recycle: &mut R,
) -> (usize, usize) {
    let (mut gone, mut queued) = (0, 0);
    let NfSlot { nf, stats, next, .. } = slot;
    batch.partition(
        |i, _| verdicts.get(i) == Verdict::Continue,
        |i, p| match verdicts.get(i) {
            Verdict::Drop(reason) => {
                stats.count_drop(reason);
                gone += 1;
                recycle.recycle(p);
            }
            Verdict::Hold => {
                gone += 1;
                if let Err(p) = nf.hold(p) {
                    stats.count_drop(DropReason::CANNOT_HOLD);
                    recycle.recycle(p);
                }
            }
            Verdict::Out(k) => match next.get(usize::from(k)) {
                Some(&to) => {
                    // Counted as out by the caller; `route` takes it back if it cannot go.
                    stats.packets_out += 1;
                    queued += route(to, p, pending, outs, stats, recycle);
                    stats.packets_out -= 1;
                }
                None => {
                    stats.count_drop(DropReason::NO_SUCH_OUTPUT);
                    gone += 1;
                    recycle.recycle(p);
                }
            },
            Verdict::Continue => unreachable!("continue is kept"),
        },
    );
    verdicts.clear();
    (gone, queued)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sfclab_core::{Context, PacketPool, Verdicts};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Output 1 for seq % 4 == 1, a missing output 3 for 2, its own drop reason for 3.
    struct Steer;

    impl NetworkFunction for Steer {
        fn kind(&self) -> &'static str {
            "steer"
        }
        fn outputs(&self) -> Vec<String> {
            vec!["main".into(), "side".into()]
        }
        fn drop_reasons(&self) -> &'static [&'static str] {
            &["steered-away"]
        }
        fn process(&mut self, _: &mut Context<'_>, batch: BatchView<'_>, verdicts: &mut Verdicts) {
            for (i, p) in batch.iter().enumerate() {
                match p.meta.seq % 4 {
                    1 => verdicts.out(i, 1),
                    2 => verdicts.out(i, 3),
                    3 => verdicts.drop(i, DropReason::named(self.drop_reasons(), "steered-away")),
                    _ => {}
                }
            }
        }
    }

    /// Counts what it sees.
    struct Tally(Arc<AtomicU64>);

    impl NetworkFunction for Tally {
        fn kind(&self) -> &'static str {
            "tally"
        }
        fn process(&mut self, _: &mut Context<'_>, batch: BatchView<'_>, _: &mut Verdicts) {
            self.0.fetch_add(batch.len() as u64, Ordering::Relaxed);
        }
    }

    /// Creates one packet per call (seq 1000) on its first output, and holds every
    /// packet with an even seq, releasing what it holds on its next call.
    #[derive(Default)]
    struct CreateAndHold {
        held: Vec<PacketRef>,
    }

    impl NetworkFunction for CreateAndHold {
        fn kind(&self) -> &'static str {
            "create-and-hold"
        }
        fn creates_packets(&self) -> bool {
            true
        }
        fn process(&mut self, ctx: &mut Context<'_>, batch: BatchView<'_>, verdicts: &mut Verdicts) {
            for p in self.held.drain(..) {
                ctx.emit(p, 0);
            }
            if let Some(mut p) = ctx.alloc() {
                p.reset(60);
                p.meta.seq = 1000;
                ctx.emit(p, 0);
            }
            for (i, p) in batch.iter().enumerate() {
                if p.meta.seq % 2 == 0 && p.meta.seq < 1000 {
                    verdicts.hold(i);
                }
            }
        }
        fn hold(&mut self, p: PacketRef) -> Result<(), PacketRef> {
            self.held.push(p);
            Ok(())
        }
        fn held(&self) -> usize {
            self.held.len()
        }
        fn release_held(&mut self, give_back: &mut dyn FnMut(PacketRef)) {
            self.held.drain(..).for_each(give_back);
        }
    }

    fn numbered(pool: &mut PacketPool, n: usize) -> Batch {
        let mut batch = Batch::new(n);
        pool.alloc_into(&mut batch, n);
        for (i, p) in batch.iter_mut().enumerate() {
            p.reset(60);
            p.meta.seq = i as u32;
        }
        batch
    }

    fn seqs(b: &Batch) -> Vec<u32> {
        b.iter().map(|p| p.meta.seq).collect()
    }

    #[test]
    fn verdicts_move_drop_and_count_every_packet() {
        let seen_after = Arc::new(AtomicU64::new(0));
        let mut chain = Chain::new(
            vec![
                ("steer".into(), Box::new(Steer)),
                ("tally".into(), Box::new(Tally(seen_after.clone()))),
            ],
            32,
            1,
        );
        let mut pool = PacketPool::new(64);
        let mut batch = numbered(&mut pool, 32);
        chain.process::<true, _>(&mut batch, &mut pool, tsc::now());
        // 8 continue to the end in order, 8 leave on the unwired side output (egress 0),
        // 8 go to an output Steer does not have (no-such-output), 8 to its own reason.
        assert_eq!(seqs(&batch), (0..32).step_by(4).collect::<Vec<_>>());
        assert_eq!(
            seen_after.load(Ordering::Relaxed),
            8,
            "later NFs see only continuing packets"
        );
        let s = &chain.slots[0];
        assert_eq!((s.stats.packets_in, s.stats.packets_out), (32, 16));
        let drops: Vec<(&str, u64)> = s.stats.drops_by_reason().map(|(r, n)| (s.reason_name(r), n)).collect();
        assert_eq!(drops, vec![("no-such-output", 8), ("steered-away", 8)]);
        assert!(s.stats.cycles > 0);
        let outs = chain.outs();
        assert_eq!(seqs(&outs[0]), (1..32).step_by(4).collect::<Vec<_>>());
        pool.free_batch(&mut outs[0]);
        pool.free_batch(&mut batch);
        assert_eq!(pool.in_use(), 0, "dropped packets went back to the pool");
        assert_eq!(chain.dropped(), 16);
    }

    /// steer.side -> tally2 skips tally1; the main path goes steer -> tally1 -> tally2.
    #[test]
    fn a_graph_routes_outputs_past_nfs_and_keeps_the_main_path_in_order() {
        let (t1, t2) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let nfs: Vec<(String, Box<dyn NetworkFunction>)> = vec![
            ("steer".into(), Box::new(Steer)),
            ("tally1".into(), Box::new(Tally(t1.clone()))),
            ("tally2".into(), Box::new(Tally(t2.clone()))),
        ];
        let wiring = vec![vec![Next::Nf(1), Next::Nf(2)], vec![Next::Nf(2)], vec![Next::Egress(0)]];
        let mut chain = Chain::wired(nfs, wiring, 32, 1).unwrap();
        assert!(!chain.is_linear());
        let mut pool = PacketPool::new(64);
        let mut batch = numbered(&mut pool, 32);
        chain.process::<false, _>(&mut batch, &mut pool, tsc::now());
        assert_eq!(t1.load(Ordering::Relaxed), 8, "the main path only");
        assert_eq!(t2.load(Ordering::Relaxed), 16, "main path and side output");
        assert_eq!(seqs(&batch), (0..32).step_by(4).collect::<Vec<_>>());
        // The side output's packets left after NF 2 on its first output (egress 0).
        let outs = chain.outs();
        assert_eq!(seqs(&outs[0]), (1..32).step_by(4).collect::<Vec<_>>());
        let (p2_in, p2_out) = (chain.slots[2].stats.packets_in, chain.slots[2].stats.packets_out);
        assert_eq!((p2_in, p2_out), (16, 16));
        pool.free_batch(&mut chain.outs()[0]);
        pool.free_batch(&mut batch);
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn backward_and_dangling_edges_are_refused() {
        let two = || -> Vec<(String, Box<dyn NetworkFunction>)> {
            vec![
                ("a".into(), Box::new(Tally(Default::default()))),
                ("b".into(), Box::new(Tally(Default::default()))),
            ]
        };
        for wiring in [
            vec![vec![Next::Nf(1)], vec![Next::Nf(0)]],
            vec![vec![Next::Nf(1)], vec![Next::Nf(1)]],
            vec![vec![Next::Nf(1)], vec![Next::Egress(1)]],
            vec![vec![Next::Nf(1), Next::Egress(0)], vec![Next::Egress(0)]],
        ] {
            assert!(Chain::wired(two(), wiring.clone(), 32, 1).is_err(), "{wiring:?}");
        }
    }

    /// generated + created = received + dropped, with packets held across passes and
    /// flushed (counted) when the run ends.
    #[test]
    fn created_and_held_packets_are_conserved() {
        let seen = Arc::new(AtomicU64::new(0));
        let mut chain = Chain::new(
            vec![
                ("maker".into(), Box::new(CreateAndHold::default())),
                ("tally".into(), Box::new(Tally(seen.clone()))),
            ],
            16,
            1,
        );
        let mut pool = PacketPool::new(256);
        let (mut generated, mut received) = (0u64, 0u64);
        for _ in 0..5 {
            let mut batch = numbered(&mut pool, 16);
            generated += 16;
            chain.process::<false, _>(&mut batch, &mut pool, tsc::now());
            received += (batch.len() + chain.outs()[0].len()) as u64;
            pool.free_batch(&mut batch);
            pool.free_batch(&mut chain.outs()[0]);
        }
        assert_eq!(chain.held(), 8, "the last batch's even packets");
        chain.release_held(&mut pool);
        let s = &chain.slots[0];
        assert_eq!(s.stats.created, 5);
        assert_eq!(
            s.stats.drops_by_reason().collect::<Vec<_>>(),
            vec![(DropReason::HELD_AT_END, 8)]
        );
        assert_eq!(generated + chain.created(), received + chain.dropped());
        assert_eq!(
            seen.load(Ordering::Relaxed),
            received,
            "emitted packets go on to the next NF"
        );
        assert_eq!(pool.in_use(), 0);
    }

    /// Holds every packet; each call releases at most 3 and drops the oldest while it
    /// holds more than 10.
    #[derive(Default)]
    struct Trickle {
        held: std::collections::VecDeque<PacketRef>,
    }

    impl NetworkFunction for Trickle {
        fn kind(&self) -> &'static str {
            "trickle"
        }
        fn drop_reasons(&self) -> &'static [&'static str] {
            &["overflow"]
        }
        fn process(&mut self, ctx: &mut Context<'_>, batch: BatchView<'_>, verdicts: &mut Verdicts) {
            while self.held.len() > 10 {
                let p = self.held.pop_front().unwrap();
                ctx.drop(p, DropReason::named(self.drop_reasons(), "overflow"));
            }
            for _ in 0..3 {
                if let Some(p) = self.held.pop_front() {
                    ctx.emit(p, 0);
                }
            }
            (0..batch.len()).for_each(|i| verdicts.hold(i));
        }
        fn hold(&mut self, p: PacketRef) -> Result<(), PacketRef> {
            self.held.push_back(p);
            Ok(())
        }
        fn held(&self) -> usize {
            self.held.len()
        }
        fn release_held(&mut self, give_back: &mut dyn FnMut(PacketRef)) {
            self.held.drain(..).for_each(give_back);
        }
    }

    /// Without batches, a chain whose NF holds packets is polled: the NF releases and
    /// drops what it holds, what it releases runs through the rest of the chain, and
    /// every packet is counted where it went.
    #[test]
    fn polling_drains_what_nfs_hold_through_the_rest_of_the_chain() {
        let (before, after) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let mut chain = Chain::new(
            vec![
                ("before".into(), Box::new(Tally(before.clone()))),
                ("trickle".into(), Box::new(Trickle::default())),
                ("after".into(), Box::new(Tally(after.clone()))),
            ],
            16,
            1,
        );
        let mut pool = PacketPool::new(64);
        let mut batch = numbered(&mut pool, 16);
        chain.process::<false, _>(&mut batch, &mut pool, tsc::now());
        assert!(batch.is_empty() && chain.outs()[0].is_empty(), "all held");
        assert_eq!(chain.held(), 16);
        let mut received = Vec::new();
        let mut polls = 0;
        while chain.poll::<true, _>(&mut batch, &mut pool, tsc::now()) {
            polls += 1;
            received.extend(seqs(&batch));
            received.extend(seqs(&chain.outs()[0]));
            pool.free_batch(&mut batch);
            pool.free_batch(&mut chain.outs()[0]);
        }
        assert_eq!(polls, 4, "3 released per poll, 6 dropped on the first");
        // The first poll dropped the six oldest (down to 10 held); the rest left in order.
        assert_eq!(received, (6..16).collect::<Vec<_>>());
        assert_eq!(before.load(Ordering::Relaxed), 16);
        assert_eq!(after.load(Ordering::Relaxed), 10);
        let s = &chain.slots[1].stats;
        assert_eq!((s.packets_in, s.packets_out), (16, 10));
        assert_eq!(
            s.drops_by_reason().map(|(r, n)| (r.code(), n)).collect::<Vec<_>>(),
            vec![(DropReason::FIRST_OWN, 6)]
        );
        assert_eq!(chain.held(), 0);
        assert!(
            !chain.poll::<false, _>(&mut batch, &mut pool, tsc::now()),
            "nothing held: nothing to do"
        );
        assert_eq!(pool.in_use(), 0);
    }
}
