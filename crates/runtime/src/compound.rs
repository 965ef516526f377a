//! The compound runtime: generator -> NF 1..n -> sink in one thread pinned to one core,
//! batches passed by function call. This is the cheapest way to chain NFs (seed 004:
//! Snabb adds ~35 cycles per extra NF this way; sfclab aims at ~1).
//!
//! A run has a warm-up phase, whose packets are conserved but not reported, then the
//! measured window. No packet is ever in flight between loop iterations, so the counters
//! read between phases are exact.

use crate::Stop;
use std::time::Duration;

use sfclab_core::{Batch, NfCounter, NfStats, PacketPool, PortStats, RxPort, Shortfall, TxPort, tsc};
use sfclab_traffic::{Generator, GeneratorConfig, Sink};

use crate::chain::{Chain, ChainGraph};
use crate::report::{Conservation, PlaceReport, RunReport, TxCounts, WindowLoss};
use crate::settings::{RunError, RunSettings};

/// The longest the runtime waits for packets still crossing a wire when a phase ends;
/// the port itself gives up sooner once nothing arrives for a while.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// Time accounting of one phase.
#[derive(Debug, Clone, Copy, Default)]
struct Phase {
    ticks: u64,
    /// TSC when the phase returned.
    ended: u64,
    /// Ticks spent with nothing to send (the pacer held the source back).
    idle_ticks: u64,
    source_cycles: u64,
    sink_cycles: u64,
    /// Ticks the rig spent moving packets (the phase's ticks less its idle ones, or,
    /// when rigs share a thread, the ticks of its own steps that moved a batch).
    busy_ticks: u64,
}

/// What one step of a rig did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// A batch went through.
    Worked,
    /// The source had nothing now.
    Idle,
    /// The source will produce nothing more.
    Exhausted,
}

/// Runs generator -> chain -> sinks until `until` (TSC), the source runs dry, or `stop`.
#[inline(never)]
fn run_phase<const ACCOUNT: bool, R: RxPort, T: TxPort>(rig: &mut Rig<R, T>, until: u64, stop: Option<&Stop>) -> Phase {
    let mut phase = Phase::default();
    let start = tsc::now();
    let mut iterations = 0u32;
    // Read the clock every batch only when the source needs it (measured: ~0.7
    // cycles/packet at batch 32); else every 8 batches, still ~1 us resolution at the end.
    let clock_mask = if ACCOUNT || rig.source.needs_fresh_clock() {
        0
    } else {
        7
    };
    let mut now = start;
    // Set while the source had nothing to send; the wait ends at the next clock read.
    let mut idle_since: Option<u64> = None;
    loop {
        if iterations & clock_mask == 0 {
            now = tsc::now();
            if let Some(t) = idle_since.take() {
                phase.idle_ticks += now - t;
            }
            if now >= until {
                break;
            }
        }
        iterations = iterations.wrapping_add(1);
        if iterations.is_multiple_of(1024) {
            if stop.is_some_and(Stop::requested) {
                break;
            }
            rig.chain.tick(now);
        }
        match rig.step::<ACCOUNT>(now, &mut phase) {
            Step::Worked => {}
            Step::Idle => {
                idle_since.get_or_insert(now);
                // A source that waits for frames may have slept in `rx` (a memif port in
                // interrupt mode, up to milliseconds): the end of the window and a stop
                // request are looked at now, not a thousand sleeps later. Off the busy
                // path, so it costs nothing there.
                if stop.is_some_and(Stop::requested) || tsc::now() >= until {
                    break;
                }
            }
            Step::Exhausted => break,
        }
    }
    phase.ended = tsc::now();
    phase.ticks = phase.ended - start;
    phase.busy_ticks = phase.ticks.saturating_sub(phase.idle_ticks);
    phase
}

/// Runs several rigs in turn on one thread (hops of a chain sharing a core) until
/// `until`, every source runs dry, or `stop`; each rig's phase counts the ticks of its
/// own steps that moved a batch as its busy time.
#[inline(never)]
fn run_rigs_phase<const ACCOUNT: bool, R: RxPort, T: TxPort>(
    rigs: &mut [Rig<R, T>],
    until: u64,
    stop: Option<&Stop>,
) -> Vec<Phase> {
    let mut phases = vec![Phase::default(); rigs.len()];
    let start = tsc::now();
    let mut iterations = 0u32;
    loop {
        let mut now = tsc::now();
        if now >= until {
            break;
        }
        iterations = iterations.wrapping_add(1);
        if iterations.is_multiple_of(1024) {
            if stop.is_some_and(Stop::requested) {
                break;
            }
            rigs.iter_mut().for_each(|r| r.chain.tick(now));
        }
        let mut exhausted = 0;
        for (rig, phase) in rigs.iter_mut().zip(phases.iter_mut()) {
            match rig.step::<ACCOUNT>(now, phase) {
                Step::Worked => {
                    let t = tsc::now();
                    phase.busy_ticks += t - now;
                    now = t;
                }
                Step::Idle => {}
                Step::Exhausted => exhausted += 1,
            }
        }
        if exhausted == rigs.len() {
            break;
        }
    }
    let ended = tsc::now();
    for p in &mut phases {
        p.ended = ended;
        p.ticks = ended - start;
        p.idle_ticks = p.ticks.saturating_sub(p.busy_ticks);
    }
    phases
}

/// Everything one thread needs for a compound run.
struct Rig<R, T> {
    source: R,
    /// The source's counters when the rig was built: a source that served earlier runs
    /// (a tester's link across a search's trials) is accounted from here.
    source_base: PortStats,
    chain: Chain,
    sinks: Vec<T>,
    pool: PacketPool,
    batch: Batch,
}

/// Counters at one instant.
struct Snapshot {
    source: PortStats,
    shortfall: Shortfall,
    source_counters: Vec<NfCounter>,
    source_drops: Vec<NfCounter>,
    sinks: Vec<TxCounts>,
    nfs: Vec<NfStats>,
    nf_counters: Vec<Vec<NfCounter>>,
    /// With a responder: its counters and each NF's on the way back.
    reply: Option<(NfStats, Vec<NfStats>)>,
}

impl<R: RxPort, T: TxPort> Rig<R, T> {
    fn snapshot(&self) -> Snapshot {
        Snapshot {
            source: self.source.stats(),
            shortfall: self.source.shortfall(),
            source_counters: self.source.counters(),
            source_drops: self
                .source
                .drops()
                .into_iter()
                .map(|(n, v)| NfCounter::total(n, v))
                .collect(),
            sinks: self.sinks.iter().map(TxCounts::of).collect(),
            nfs: self.chain.slots.iter().map(|s| s.stats).collect(),
            nf_counters: self.chain.slots.iter().map(|s| s.nf.counters()).collect(),
            reply: self.chain.reply_path().map(|r| (r.responder, r.back.clone())),
        }
    }

    /// Stops the source; when packets are still on their way to it, polls until they are
    /// in (or the source gives up on them, at most `DRAIN_LIMIT`). True when it drained.
    /// Ctrl-C does not cut the drain short: it is how a stopped run's packets are counted
    /// (cut short, frames in flight were neither received nor dropped).
    fn drain(&mut self, accounting: bool) -> bool {
        if !self.source.finish() {
            return false;
        }
        self.phase(accounting, tsc::now() + tsc::ticks(DRAIN_LIMIT), None);
        true
    }

    fn phase(&mut self, accounting: bool, until: u64, stop: Option<&Stop>) -> Phase {
        if accounting {
            run_phase::<true, _, _>(self, until, stop)
        } else {
            run_phase::<false, _, _>(self, until, stop)
        }
    }

    /// One batch from the source through the chain into the sinks.
    #[inline(always)]
    fn step<const ACCOUNT: bool>(&mut self, now: u64, phase: &mut Phase) -> Step {
        let Rig {
            source,
            chain,
            sinks,
            pool,
            batch,
            ..
        } = self;
        let got = source.rx(now, pool, batch);
        let t_chain = if ACCOUNT { tsc::now() } else { 0 };
        if got == 0 {
            // Nothing came: NFs that hold packets (a shaper) release what is due, and a
            // source that ran dry waits for them to empty.
            if !chain.poll::<ACCOUNT, _>(batch, pool, now) {
                return if source.exhausted() {
                    Step::Exhausted
                } else {
                    Step::Idle
                };
            }
            if batch.is_empty() && chain.outs().iter().all(Batch::is_empty) {
                return Step::Idle;
            }
        } else {
            chain.process::<ACCOUNT, _>(batch, pool, now);
        }
        let t_sink = if ACCOUNT { tsc::now() } else { 0 };
        send_out(chain, sinks, batch, pool, now);
        if ACCOUNT {
            phase.source_cycles += t_chain - now;
            phase.sink_cycles += tsc::now() - t_sink;
        }
        Step::Worked
    }
}

/// What a pass of the chain left: the main batch to the first sink, what left on each
/// egress another way to its sink.
#[inline(always)]
fn send_out<T: TxPort>(chain: &mut Chain, sinks: &mut [T], batch: &mut Batch, pool: &mut PacketPool, now: u64) {
    sinks[0].tx(now, batch, pool);
    for (out, sink) in chain.outs().iter_mut().zip(sinks.iter_mut()) {
        if !out.is_empty() {
            sink.tx(now, out, pool);
        }
    }
}

/// Runs `nfs` as a compound chain fed by a generator of `traffic` into an in-memory
/// sink, and reports. Returns `RunError::Conservation` (with the full report) if any
/// packet is unaccounted.
pub fn run_compound(
    traffic: GeneratorConfig,
    nfs: impl Into<ChainGraph>,
    settings: &RunSettings,
) -> Result<RunReport, RunError> {
    let generator = Generator::new(traffic, settings.batch).map_err(|(k, r)| RunError::setting(k, r))?;
    run_compound_on(generator, Sink::new(settings.verify), nfs, settings)
}

/// Runs `nfs` as a compound chain between two ports: packets from `source`, to `sink`
/// (every output of the chain goes there), and reports.
pub fn run_compound_on<R: RxPort + Send, T: TxPort + Send>(
    source: R,
    sink: T,
    nfs: impl Into<ChainGraph>,
    settings: &RunSettings,
) -> Result<RunReport, RunError> {
    run_compound_in(source, sink, nfs, settings, None)
}

/// [`run_compound_on`] in `pool` where given: one the caller made with [`run_pool`]
/// and attached to the ports itself (a zero-copy memif client connects only once it
/// has its pool, and a hop waits for its output's peer before it runs).
pub fn run_compound_in<R: RxPort + Send, T: TxPort + Send>(
    source: R,
    sink: T,
    nfs: impl Into<ChainGraph>,
    settings: &RunSettings,
    pool: Option<PacketPool>,
) -> Result<RunReport, RunError> {
    settings.validate()?;
    let (mut rig, names) = Rig::build(source, sink, nfs.into(), settings, pool)?;
    let (warm, window, start, end) = std::thread::scope(|s| {
        s.spawn(|| {
            pin(settings.core);
            let stop = settings.stop.as_ref();
            // Warm-up: caches, branch predictors, page tables; counted but not reported.
            let mut warm = rig.phase(settings.accounting, tsc::now() + tsc::ticks(settings.warmup), stop);
            // Frames still crossing a wire arrive before the window opens.
            if rig.drain(settings.accounting) {
                warm.ended = tsc::now();
            }
            let start = rig.open_window(settings.count);
            // The window is timed from the end of the warm-up, so whatever the pacer earned
            // between the phases is inside the window's time as well as its counts.
            let until = settings.duration.map_or(u64::MAX, |d| tsc::now() + tsc::ticks(d));
            let mut window = rig.phase(settings.accounting, until, stop);
            window.ticks = window.ended - warm.ended;
            window.busy_ticks = window.ticks.saturating_sub(window.idle_ticks);
            let end = rig.close_window(settings.accounting);
            (warm, window, start, end)
        })
        .join()
        .expect("the chain thread panicked")
    });
    rig.report(&names, settings, &warm, &window, &start, &end)
}

/// Runs several compound chains, each between its own two ports, in turn on one thread
/// (the hops of a chain that share a core: each hop an NF between the interfaces of its
/// namespace); one report per hop, each with its own busy cycles.
pub fn run_hops_on<R: RxPort + Send, T: TxPort + Send>(
    hops: Vec<(R, T, ChainGraph)>,
    settings: &RunSettings,
) -> Result<Vec<RunReport>, RunError> {
    run_hops_observed(hops, settings, &|_| {})
}

/// An edge of the measured window, as [`run_hops_observed`] tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowEdge {
    /// The window is about to open: the warm-up's frames are back, none sent since.
    Opening,
    /// The window's last frame was sent; what is in flight is drained after this.
    Closed,
}

/// [`run_hops_on`], calling `at_edge` on the run's thread as the window opens and as it
/// closes: what is read there (other processes' CPU time) is the window's alone, not
/// the drains' around it, which wait up to the tester's quiet time for frames lost on
/// the way.
pub fn run_hops_observed<R: RxPort + Send, T: TxPort + Send>(
    hops: Vec<(R, T, ChainGraph)>,
    settings: &RunSettings,
    at_edge: &(dyn Fn(WindowEdge) + Sync),
) -> Result<Vec<RunReport>, RunError> {
    settings.validate()?;
    let mut rigs = Vec::with_capacity(hops.len());
    let mut names = Vec::with_capacity(hops.len());
    for (source, sink, graph) in hops {
        let (rig, n) = Rig::build(source, sink, graph, settings, None)?;
        rigs.push(rig);
        names.push(n);
    }
    let phase = |rigs: &mut [Rig<R, T>], until: u64, stop: Option<&Stop>| {
        if settings.accounting {
            run_rigs_phase::<true, _, _>(rigs, until, stop)
        } else {
            run_rigs_phase::<false, _, _>(rigs, until, stop)
        }
    };
    let (warm, window, start, end) = std::thread::scope(|s| {
        s.spawn(|| {
            pin(settings.core);
            let stop = settings.stop.as_ref();
            let warm = phase(&mut rigs, tsc::now() + tsc::ticks(settings.warmup), stop);
            // Frames still crossing a wire arrive before the window opens.
            drain_all(&mut rigs, settings.accounting);
            at_edge(WindowEdge::Opening);
            let start: Vec<Snapshot> = rigs.iter_mut().map(|r| r.open_window(settings.count)).collect();
            let until = settings.duration.map_or(u64::MAX, |d| tsc::now() + tsc::ticks(d));
            let window = phase(&mut rigs, until, stop);
            at_edge(WindowEdge::Closed);
            drain_all(&mut rigs, settings.accounting);
            let end: Vec<Snapshot> = rigs.iter_mut().map(Rig::close_drained_window).collect();
            (warm, window, start, end)
        })
        .join()
        .expect("the hops' thread panicked")
    });
    let others = rigs.len() - 1;
    rigs.iter()
        .enumerate()
        .map(|(i, rig)| {
            rig.report(&names[i], settings, &warm[i], &window[i], &start[i], &end[i])
                .map(|r| RunReport {
                    shares_thread_with: others,
                    ..r
                })
        })
        .collect()
}

/// Stops every source that crosses a wire (a tester's link) and serves all rigs in
/// turn until each of those has its frames back or gave up on them (at most
/// `DRAIN_LIMIT`): draining one rig at a time would leave the others' frames waiting in
/// full rings, where the devices under test would drop them.
fn drain_all<R: RxPort, T: TxPort>(rigs: &mut [Rig<R, T>], accounting: bool) {
    // Per rig: still draining (a wire with frames out), or done.
    let mut draining: Vec<bool> = rigs.iter_mut().map(|r| r.source.finish()).collect();
    let until = tsc::now() + tsc::ticks(DRAIN_LIMIT);
    let mut phase = Phase::default();
    while draining.contains(&true) && tsc::now() < until {
        for (rig, pending) in rigs.iter_mut().zip(draining.iter_mut()) {
            // A rig that drained is left alone, as a single drain stops at that point.
            if !*pending {
                continue;
            }
            let step = if accounting {
                rig.step::<true>(tsc::now(), &mut phase)
            } else {
                rig.step::<false>(tsc::now(), &mut phase)
            };
            *pending = !matches!(step, Step::Exhausted);
        }
    }
}

/// The run's packet pool of `size` buffers: private, or in shared memory when a port
/// passes frames by reference (a memif zero-copy client), larger by what its rings may
/// hold.
pub fn run_pool<R: RxPort, T: TxPort>(source: &R, sink: &T, size: usize) -> Result<PacketPool, RunError> {
    match (source.shared_pool_need(), sink.shared_pool_need()) {
        (None, None) => Ok(PacketPool::new(size)),
        (a, b) => {
            let lent = a.unwrap_or(0) + b.unwrap_or(0);
            PacketPool::shared(size + lent, "sfclab-packet-pool")
                .map_err(|e| RunError::failed("packet pool in shared memory (zero-copy)", e))
        }
    }
}

fn pin(core: Option<usize>) {
    if let Some(core) = core {
        core_affinity::set_for_current(core_affinity::CoreId { id: core });
    }
}

impl<R: RxPort, T: TxPort> Rig<R, T> {
    /// The rig of `graph` between `source` and `sink`, and the chain's NF names.
    fn build(
        source: R,
        sink: T,
        graph: ChainGraph,
        settings: &RunSettings,
        pool: Option<PacketPool>,
    ) -> Result<(Rig<R, T>, Vec<String>), RunError> {
        let names: Vec<String> = graph.nfs.iter().map(|(n, _)| n.clone()).collect();
        let mut chain = graph
            .build(settings.batch, 1)
            .map_err(|e| RunError::setting("wiring", e.to_string()))?;
        chain.core = settings.core;
        if settings.reply {
            chain
                .answer_at_end()
                .map_err(|e| RunError::setting("responder", e.to_string()))?;
        }
        let mut pool = match pool {
            Some(pool) => pool,
            None => run_pool(&source, &sink, settings.pool_size)?,
        };
        source.prime(&mut pool);
        let (mut source, mut sink) = (source, sink);
        source.attach_pool(&pool);
        sink.attach_pool(&pool);
        let rig = Rig {
            source_base: source.stats(),
            source,
            chain,
            sinks: vec![sink],
            pool,
            batch: Batch::new(settings.batch),
        };
        Ok((rig, names))
    }

    /// The measured window opens: sinks and source start counting it; the counters now.
    fn open_window(&mut self, count: Option<u64>) -> Snapshot {
        self.let_held_leave();
        self.sinks.iter_mut().for_each(TxPort::start_window);
        let start = self.snapshot();
        self.source.start_window(count);
        start
    }

    /// What NFs still hold from the phase before (a shaper's queue) leaves at the pace
    /// they release it, for at most `DRAIN_LIMIT`, before the window opens: the window
    /// then counts its own packets only. No new packet is taken meanwhile.
    fn let_held_leave(&mut self) {
        let until = tsc::now() + tsc::ticks(DRAIN_LIMIT);
        let Rig {
            chain,
            sinks,
            pool,
            batch,
            ..
        } = self;
        loop {
            let now = tsc::now();
            if now >= until || !chain.poll::<false, _>(batch, pool, now) {
                break;
            }
            send_out(chain, sinks, batch, pool, now);
        }
    }

    /// The window is over: its frames still crossing a wire are counted where they end
    /// (the window's time stays what it was: they were sent inside it), what NFs still
    /// hold is flushed and counted where it is held; the counters then.
    fn close_window(&mut self, accounting: bool) -> Snapshot {
        self.drain(accounting);
        self.close_drained_window()
    }

    /// The window is over and its frames are in: what NFs still hold is released, and
    /// what waits unread at the source (a ring a sender filled) is counted as dropped.
    fn close_drained_window(&mut self) -> Snapshot {
        let Rig {
            chain, pool, source, ..
        } = self;
        chain.release_held(pool);
        source.discard_unread();
        // Buffers a zero-copy port lent its peer come home: none is counted as leaked.
        source.return_buffers(pool);
        self.sinks.iter_mut().for_each(|s| s.return_buffers(pool));
        self.snapshot()
    }

    /// The run's report from the counters at the window's start and end.
    fn report(
        &self,
        chain_names: &[String],
        settings: &RunSettings,
        warm: &Phase,
        window: &Phase,
        start: &Snapshot,
        end: &Snapshot,
    ) -> Result<RunReport, RunError> {
        let hz = tsc::hz();
        let source_w = end.source.since(&start.source);
        let sink_w: Vec<TxCounts> = end.sinks.iter().zip(&start.sinks).map(|(e, s)| e.since(s)).collect();
        let generated = source_w.packets;
        let received: u64 = sink_w.iter().map(|s| s.port.packets).sum();
        let acc = settings.accounting;

        let (source_info, sink_info) = (self.source.info(), self.sinks[0].info());
        let places = self.places(acc, window, (start, end), &sink_w);
        let drops = RunReport::collect_drops(&places);
        let dropped: u64 = drops.iter().map(|d| d.packets).sum();
        let leaked = self.pool.in_use() as u64;
        let total_dropped = (end.source.dropped - self.source_base.dropped)
            + self.chain.dropped()
            + end.sinks.iter().map(|s| s.port.dropped).sum::<u64>();
        let total_received: u64 = end.sinks.iter().map(|s| s.port.packets).sum();
        let window_received: u64 = end.sinks.iter().map(|s| s.window_packets).sum();
        let window_loss = WindowLoss::new(generated, window_received).map_err(|e| RunError::failed("window", e))?;
        let conservation = Conservation::check(
            end.source.packets - self.source_base.packets,
            self.chain.created(),
            total_received,
            total_dropped,
            leaked,
        );
        // One thread, batches whole: the window's place counters are exact too (when no NF
        // created packets, whose drops count at places but are not the window's traffic).
        // A run that lost packets is not: it ends in `RunError::Conservation` below.
        debug_assert!(!conservation.holds || self.chain.created() > 0 || window_loss.lost == dropped);
        let seconds = tsc::seconds(window.ticks);
        let l2_bytes: u64 = sink_w.iter().map(|s| s.port.bytes + 4 * s.port.packets).sum();
        let shortfall = end.shortfall.since(&start.shortfall);
        let verify_failed = end.sinks.iter().filter_map(|s| s.verify_failed).reduce(|a, b| a + b);
        let report = RunReport {
            version: env!("CARGO_PKG_VERSION"),
            runtime: "compound",
            chain: chain_names.to_vec(),
            source: source_info,
            sink: sink_info,
            batch: settings.batch,
            core: settings.core,
            accounting: acc,
            tsc_hz: hz,
            warmup_s: tsc::seconds(warm.ticks),
            duration_s: seconds,
            interrupted: settings.stop.as_ref().is_some_and(Stop::requested),
            generated,
            received,
            dropped,
            mpps: received as f64 / seconds / 1e6,
            gbps_l2: l2_bytes as f64 * 8.0 / seconds / 1e9,
            gbps_l1: (l2_bytes + 20 * received) as f64 * 8.0 / seconds / 1e9,
            requested_mpps: self.source.requested_pps().map(|p| p / 1e6),
            generated_mpps: generated as f64 / seconds / 1e6,
            busy_cycles_per_packet: (generated > 0).then(|| window.busy_ticks as f64 / generated as f64),
            places,
            drops,
            latency: self.sinks[0].latency().and_then(|l| l.summary()),
            window_loss,
            verify_failed,
            conservation,
            pool: self.pool.stats(),
            pool_empty: shortfall.pool_empty,
            pacing_behind: shortfall.behind,
            not_offered: shortfall.not_offered,
            placement: None,
            link_mode: None,
            cores: Vec::new(),
            shares_thread_with: 0,
        };
        if report.conservation.holds {
            Ok(report)
        } else {
            Err(RunError::Conservation(Box::new(report)))
        }
    }

    /// The window's places in the order packets pass them: the source, the NFs, on the
    /// way back the responder and the NFs last to first, the sinks.
    fn places(
        &self,
        acc: bool,
        window: &Phase,
        (start, end): (&Snapshot, &Snapshot),
        sink_w: &[TxCounts],
    ) -> Vec<PlaceReport> {
        let per = |cycles: u64, n: u64| (acc && n > 0).then(|| cycles as f64 / n as f64);
        let (source_info, sink_info) = (self.source.info(), self.sinks[0].info());
        let source_w = end.source.since(&start.source);
        let generated = source_w.packets;
        let mut places = vec![PlaceReport::source(
            &source_info.kind,
            &source_w,
            NfCounter::window(&start.source_drops, &end.source_drops),
            NfCounter::window(&start.source_counters, &end.source_counters),
            per(window.source_cycles, generated),
        )];
        for (i, slot) in self.chain.slots.iter().enumerate() {
            places.push(PlaceReport::from_nf(
                &slot.name,
                slot.nf.kind(),
                &end.nfs[i].since(&start.nfs[i]),
                slot.nf.drop_reasons(),
                acc,
                NfCounter::window(&start.nf_counters[i], &end.nf_counters[i]),
            ));
        }
        // The way back: the responder, then the NFs last to first.
        if let (Some((r_end, back_end)), Some((r_start, back_start))) = (&end.reply, &start.reply) {
            places.push(PlaceReport::from_nf(
                "responder",
                "responder",
                &r_end.since(r_start),
                crate::chain::RESPONDER_REASONS,
                acc,
                Vec::new(),
            ));
            for (i, slot) in self.chain.slots.iter().enumerate().rev() {
                places.push(PlaceReport::from_nf(
                    &format!("{} (reply)", slot.name),
                    slot.nf.kind(),
                    &back_end[i].since(&back_start[i]),
                    slot.nf.drop_reasons(),
                    acc,
                    Vec::new(),
                ));
            }
        }
        for (i, st) in sink_w.iter().enumerate() {
            let name = if i == 0 { "sink".into() } else { format!("sink{i}") };
            places.push(PlaceReport::sink(
                name,
                &sink_info.kind,
                st,
                per(window.sink_cycles, st.port.packets),
            ));
        }
        places
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sfclab_core::NetworkFunction;
    use sfclab_nf::NfSpec;

    fn nfs(spec: &[&str]) -> Vec<(String, Box<dyn NetworkFunction>)> {
        spec.iter()
            .enumerate()
            .map(|(i, s)| {
                let cfg = match *s {
                    "forwarder" | "noop" => NfSpec::default_of(s).unwrap(),
                    other => {
                        let k: u64 = other.strip_prefix("drop").unwrap().parse().unwrap();
                        NfSpec::new("synthetic", serde_json::json!({ "drop_one_in": k })).unwrap()
                    }
                };
                (format!("{s}{i}"), cfg.build())
            })
            .collect()
    }

    fn counted(count: u64) -> RunSettings {
        RunSettings {
            duration: None,
            count: Some(count),
            warmup: Duration::from_millis(20),
            verify: true,
            ..Default::default()
        }
    }

    #[test]
    fn count_run_conserves_every_packet_with_injected_drops() {
        let traffic = GeneratorConfig {
            sizes: sfclab_traffic::FrameSizes::imix(),
            flows: 16,
            ..Default::default()
        };
        let r = run_compound(
            traffic,
            nfs(&["forwarder", "drop7", "noop", "drop5", "forwarder"]),
            &counted(1_000_000),
        )
        .unwrap();
        assert_eq!(r.generated, 1_000_000);
        // Exact arithmetic: the first dropper sees all, the second what the first passed.
        let first = r.places.iter().find(|p| p.name == "drop71").unwrap();
        assert_eq!(first.packets_in, 1_000_000);
        let second = r.places.iter().find(|p| p.name == "drop53").unwrap();
        assert_eq!(second.packets_in, first.packets_out);
        assert_eq!(r.dropped, first.dropped + second.dropped);
        assert!(first.dropped.abs_diff(1_000_000 / 7) <= 1);
        assert_eq!(r.received + r.dropped, r.generated);
        assert!(r.conservation.holds);
        assert_eq!(
            (r.window_loss.sent, r.window_loss.received, r.window_loss.lost),
            (r.generated, r.received, r.dropped)
        );
        assert_eq!(r.drops.len(), 2);
        assert!(r.drops.iter().all(|d| d.reason == "injected"));
        let sink = r.places.last().unwrap();
        assert_eq!(
            sink.counters["verify_failed"], 0,
            "forwarded frames keep valid checksums"
        );
        assert_eq!(r.pool.available, r.pool.capacity);
    }

    /// What is read at the edges (a VNF's CPU time) covers the window and nothing else:
    /// told once each, in order, the warm-up before the first and the window between.
    #[test]
    fn the_window_edges_are_told_once_each_around_the_window() {
        let s = RunSettings {
            duration: Some(Duration::from_millis(100)),
            warmup: Duration::from_millis(50),
            ..Default::default()
        };
        let hops = (0..2)
            .map(|_| {
                let g = Generator::new(GeneratorConfig::default(), s.batch).unwrap();
                (g, Sink::new(false), ChainGraph::from(nfs(&["forwarder"])))
            })
            .collect();
        let seen = std::sync::Mutex::new(Vec::new());
        let began = tsc::now();
        let reports = run_hops_observed(hops, &s, &|edge| seen.lock().unwrap().push((edge, tsc::now()))).unwrap();
        let seen = seen.into_inner().unwrap();
        let edges: Vec<WindowEdge> = seen.iter().map(|e| e.0).collect();
        assert_eq!(edges, [WindowEdge::Opening, WindowEdge::Closed]);
        // Lower bounds only: a loaded machine stretches phases, never shortens them.
        assert!(seen[0].1 - began >= tsc::ticks(s.warmup));
        assert!(seen[1].1 - seen[0].1 >= tsc::ticks(s.duration.unwrap()));
        assert_eq!(reports.len(), 2);
        assert!(reports.iter().all(|r| r.window_loss.sent > 0 && r.conservation.holds));
    }

    #[test]
    fn empty_chain_and_batch_of_one_work() {
        let mut s = counted(10_000);
        s.batch = 1;
        let r = run_compound(GeneratorConfig::default(), Vec::new(), &s).unwrap();
        assert_eq!((r.generated, r.received), (10_000, 10_000));
    }

    #[test]
    fn duration_run_reports_cycles_per_place_and_excludes_warmup() {
        let s = RunSettings {
            duration: Some(Duration::from_millis(200)),
            warmup: Duration::from_millis(100),
            ..Default::default()
        };
        let r = run_compound(GeneratorConfig::default(), nfs(&["forwarder", "forwarder"]), &s).unwrap();
        // Lower bounds only: a loaded machine stretches phases, never shortens them.
        assert!(r.duration_s >= 0.199, "window {} s", r.duration_s);
        assert!(r.warmup_s >= 0.099, "warm-up {} s", r.warmup_s);
        assert!(
            r.conservation.generated > r.generated,
            "warm-up packets are not in the window"
        );
        assert_eq!(
            r.window_loss.sent, r.generated,
            "only window packets carry the window flag"
        );
        assert!(r.places.iter().all(|p| p.cycles_per_packet.is_some()));
        assert!(r.mpps > 0.0 && r.busy_cycles_per_packet.unwrap() > 0.0);
    }

    /// A paced run waits for the pacer most of the time: that wait is not the cost of a
    /// packet (`--rate 1kpps` once printed 2.6 million "cycles/packet").
    #[test]
    fn pacing_idle_is_not_counted_as_cycles_per_packet() {
        let traffic = GeneratorConfig {
            rate: "2kpps".parse().unwrap(),
            ..Default::default()
        };
        let s = RunSettings {
            duration: Some(Duration::from_millis(200)),
            warmup: Duration::ZERO,
            ..Default::default()
        };
        let r = run_compound(traffic, nfs(&["forwarder"]), &s).unwrap();
        let wall = r.duration_s * r.tsc_hz / r.generated as f64;
        let busy = r.busy_cycles_per_packet.unwrap();
        assert!(wall > 500_000.0, "{wall} TSC cycles of window per packet at 2 kpps");
        // Forwarding a packet takes a few hundred cycles; a busy stretch preempted on a
        // loaded machine adds its wait, but counting the idle would make busy ≈ wall.
        assert!(busy < wall / 2.0, "busy {busy} vs window {wall} cycles/packet");
        assert_eq!(r.requested_mpps, Some(0.002));
    }

    #[test]
    fn stop_flag_ends_the_run() {
        let stop = crate::Stop::new();
        stop.request();
        let s = RunSettings {
            duration: Some(Duration::from_secs(3600)),
            warmup: Duration::ZERO,
            stop: Some(stop),
            ..Default::default()
        };
        let r = run_compound(GeneratorConfig::default(), nfs(&["noop"]), &s).unwrap();
        assert!(r.duration_s < 1.0);
        assert!(r.conservation.holds);
    }

    #[test]
    fn bad_settings_name_the_key() {
        let bad = [
            (
                RunSettings {
                    batch: 0,
                    ..Default::default()
                },
                "batch",
            ),
            (
                RunSettings {
                    batch: 257,
                    ..Default::default()
                },
                "batch",
            ),
            (
                RunSettings {
                    duration: None,
                    count: None,
                    ..Default::default()
                },
                "duration",
            ),
            (
                RunSettings {
                    core: Some(4096),
                    ..Default::default()
                },
                "core",
            ),
            (
                RunSettings {
                    pool_size: 10,
                    ..Default::default()
                },
                "pool_size",
            ),
        ];
        for (s, key) in bad {
            match run_compound(GeneratorConfig::default(), Vec::new(), &s) {
                Err(RunError::Setting { key: k, .. }) => assert_eq!(k, key),
                other => panic!("expected a setting error for {key}, got {other:?}"),
            }
        }
    }
}
