//! The pipeline runtime: blocks of NFs (stages) on threads pinned to cores, joined by
//! SPSC rings (seed 002, Section V). A stage runs its NFs in compound fashion; the ring
//! after it is a link with its own counters. Stages that share a core run in turn.
//!
//! ```text
//! generator ─▶ rx-queue ─▶ [stage 0: NF..NF] ─▶ link ─▶ [stage 1: NF..NF] ─▶ sink
//!    ▲  pool                                                                  │
//!    └──────────────────── return links (freed buffers) ◀──────────────────────┘
//! ```
//!
//! - The generator stands for the traffic source and the NIC: it owns the pool and
//!   pushes into the rx-queue (the NIC's RX ring). A full rx-queue is an *ingress drop*:
//!   the chain spent nothing on the packet.
//! - A full link between stages is a *software drop* (`link-full`) at that link: the
//!   cycles already spent upstream are wasted. With `LinkMode::Backpressure` a stage
//!   keeps what did not fit and stops taking input until it is gone: no drops inside the
//!   chain, only at ingress.
//! - Buffers freed on other cores (drops, the sink) go back to the generator's core
//!   through return links, so the pool stays single-threaded.
//! - Shutdown: the generator stops, then each stage finishes once its upstream has
//!   finished and its input is empty; every buffer is back in the pool before the
//!   figures are read, so conservation is checked exactly over the whole run.
//! - Window figures come from per-thread snapshots taken when each thread sees the
//!   coordinator's epoch change (within one loop iteration of each other).

use crate::Stop;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;
use sfclab_core::{
    Batch, Buffers, DropReason, LatencyRecord, NetworkFunction, NfCounter, NfStats, PacketPool, PacketRef, PortStats,
    Recycle, ReturnLink, RingConsumer, RingProducer, RxPort, Shortfall, TxPort, packet::shard_of, ring, tsc,
};
use sfclab_traffic::{Generator, GeneratorConfig, Sink};

use crate::chain::{Chain, ChainGraph, is_linear};
use crate::placement::{Placement, StagePlan, allowed_cores};
use crate::report::{Conservation, CoreReport, PlaceReport, RunReport, TxCounts, WindowLoss};
use crate::settings::{RunError, RunSettings};

/// What a full link does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum LinkMode {
    /// Drop and count, as the papers' chains do (the default).
    #[default]
    Drop,
    /// The producer keeps the packets and stops taking input until they fit.
    Backpressure,
}

impl LinkMode {
    pub fn name(self) -> &'static str {
        match self {
            LinkMode::Drop => "drop",
            LinkMode::Backpressure => "backpressure",
        }
    }
}

impl std::fmt::Display for LinkMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for LinkMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "drop" => Ok(LinkMode::Drop),
            "backpressure" => Ok(LinkMode::Backpressure),
            _ => Err(format!("`{s}` is not a link mode: write drop or backpressure")),
        }
    }
}

/// How to run a pipeline.
#[derive(Debug, Clone)]
pub struct PipelineSettings {
    /// Batch, window, warm-up, accounting, verify, pool size and stop flag (its `core` is
    /// not used: the placement says where things run).
    pub run: RunSettings,
    pub placement: Placement,
    /// Cores the placement may use, in order (default: every core of this process).
    pub cores: Vec<usize>,
    /// Core of the generator (default: the first stage's).
    pub generator_core: Option<usize>,
    pub links: LinkMode,
    /// Packets a link between stages holds.
    pub ring_size: usize,
    /// Packets the rx-queue (the chain's ingress) holds.
    pub rx_queue: usize,
    /// The generator waits while the rx-queue cannot take a batch, as a sender paused by
    /// Ethernet flow control: nothing is dropped at ingress, and no cycle of the
    /// generator's core is spent on packets that would be. For capacity measurements.
    pub flow_control: bool,
    /// Batches a stage may process per turn on its core (default 1: stages sharing a
    /// core get equal turns). Above 1, an upstream stage can outrun a slower one on the
    /// same core and overflow the link between them, as NAPI's budget does in Linux.
    pub stage_budget: usize,
}

impl Default for PipelineSettings {
    fn default() -> Self {
        PipelineSettings {
            run: RunSettings {
                pool_size: 0,
                ..Default::default()
            },
            placement: Placement::SCore,
            cores: allowed_cores(),
            generator_core: None,
            links: LinkMode::Drop,
            ring_size: 1024,
            rx_queue: 1024,
            stage_budget: 1,
            flow_control: false,
        }
    }
}

/// The coordinator's phases, seen by every thread.
const EPOCH_WARMUP: u32 = 0;
const EPOCH_WINDOW: u32 = 1;
const EPOCH_DONE: u32 = 2;

/// Counters of the source task.
#[derive(Debug, Clone, Default)]
struct GenCounters {
    port: PortStats,
    shortfall: Shortfall,
    counters: Vec<NfCounter>,
    rx_queue_full: u64,
    cycles: u64,
}

/// A stage's buffers: what it frees goes back to the pool's thread through its return
/// link; what its NFs create comes from a supply ring that thread keeps filled (a stage
/// whose NFs create no packets has none, and costs nothing for it).
struct StageBuffers {
    back: ReturnLink,
    supply: Option<RingConsumer>,
    cache: Batch,
}

impl StageBuffers {
    fn flush(&mut self) {
        self.back.flush();
    }

    /// The stage is done: the supply it did not use goes back to the pool.
    fn give_back_supply(&mut self) {
        if let Some(s) = &mut self.supply {
            while s.pop_into(&mut self.cache) > 0 {
                self.back.recycle_batch(&mut self.cache);
            }
        }
        self.back.recycle_batch(&mut self.cache);
        self.back.flush();
    }
}

impl Recycle for StageBuffers {
    #[inline]
    fn recycle(&mut self, p: PacketRef) {
        self.back.recycle(p);
    }

    #[inline]
    fn recycle_batch(&mut self, batch: &mut Batch) {
        self.back.recycle_batch(batch);
    }
}

impl Buffers for StageBuffers {
    fn alloc(&mut self) -> Option<PacketRef> {
        if self.cache.is_empty()
            && let Some(s) = &mut self.supply
        {
            s.pop_into(&mut self.cache);
        }
        self.cache.pop()
    }
}

/// The source's task: the traffic source (or a NIC queue) and the pool it owns.
struct GenTask<R> {
    source: R,
    pool: PacketPool,
    batch: Batch,
    /// The rx-queue of each replica; packets are spread by flow hash (as RSS does).
    ingress: Vec<RingProducer>,
    /// Per replica: this batch's packets for it.
    split: Vec<Batch>,
    returns: Vec<RingConsumer>,
    returned: Batch,
    /// Buffers for stages whose NFs create packets, kept topped up.
    supplies: Vec<RingProducer>,
    supplying: Batch,
    counters: GenCounters,
    done: Arc<AtomicBool>,
    stopped: bool,
    flow_control: bool,
}

impl<R: RxPort> GenTask<R> {
    /// Takes back every buffer freed elsewhere.
    fn reclaim(&mut self) {
        for r in &mut self.returns {
            while r.pop_into(&mut self.returned) > 0 {
                self.pool.free_batch(&mut self.returned);
            }
        }
    }

    #[inline]
    fn poll<const ACCOUNT: bool>(&mut self, now: u64, epoch: u32, shared: &Coordination) -> bool {
        // Reading a return link's cursor is a cache miss on a line the other core keeps
        // writing: reclaim only once half the pool is out (measured: ~6 cycles/packet
        // saved on a 2-core pipeline against reclaiming on every turn).
        if self.pool.available() < self.pool.capacity() / 2 {
            self.reclaim();
        }
        if self.stopped {
            return false;
        }
        if epoch >= EPOCH_DONE || self.source.exhausted() {
            if self.source.exhausted() {
                shared.count_reached.store(true, Ordering::Release);
            }
            self.stopped = true;
            // Everything this task pushed is published before the flag (release).
            self.done.store(true, Ordering::Release);
            return false;
        }
        let want = self.batch.size();
        if !self.supplies.is_empty() {
            self.top_up();
        }
        if self.flow_control && !self.ingress.iter_mut().all(|q| q.room_for(want)) {
            return false;
        }
        if self.source.rx(now, &mut self.pool, &mut self.batch) == 0 {
            return false;
        }
        if self.ingress.len() == 1 {
            self.enqueue(0);
        } else {
            let replicas = self.ingress.len();
            for mut p in self.batch.drain() {
                // The source's hash (RSS), or one computed from the headers once.
                let r = shard_of(p.flow_hash(), replicas);
                // Each split holds a whole batch, so it cannot be full here.
                let _ = self.split[r].push(p);
            }
            for r in 0..self.ingress.len() {
                std::mem::swap(&mut self.batch, &mut self.split[r]);
                self.enqueue(r);
                std::mem::swap(&mut self.batch, &mut self.split[r]);
            }
        }
        if ACCOUNT {
            self.counters.cycles += tsc::now() - now;
        }
        true
    }

    /// Refills the supply rings of stages that create packets, a batch at a time.
    #[cold]
    fn top_up(&mut self) {
        let want = self.supplying.size();
        for s in &mut self.supplies {
            if s.room_for(want) {
                self.pool.alloc_into(&mut self.supplying, want);
                s.push_from(&mut self.supplying);
                self.pool.free_batch(&mut self.supplying);
            }
        }
    }

    /// Pushes `batch` into replica `r`'s rx-queue; what does not fit is an ingress drop.
    #[inline]
    fn enqueue(&mut self, r: usize) {
        self.ingress[r].push_from(&mut self.batch);
        if !self.batch.is_empty() {
            // The NIC's RX ring is full: dropped before the chain saw it.
            self.counters.rx_queue_full += self.batch.len() as u64;
            self.pool.free_batch(&mut self.batch);
        }
    }

    fn snapshot(&self) -> GenCounters {
        GenCounters {
            port: self.source.stats(),
            shortfall: self.source.shortfall(),
            counters: self.source.counters(),
            ..self.counters.clone()
        }
    }
}

/// Counters of a link (the ring after a stage).
#[derive(Debug, Clone, Copy, Default)]
struct LinkCounters {
    packets_in: u64,
    dropped: u64,
}

#[derive(Clone, Default)]
struct StageCounters {
    nfs: Vec<NfStats>,
    nf_counters: Vec<Vec<NfCounter>>,
    link: LinkCounters,
    sink: TxCounts,
    packets: u64,
}

struct StageTask<T> {
    replica: usize,
    index: usize,
    name: String,
    chain: Chain,
    input: RingConsumer,
    /// The next stage's link, or `None` for the last stage (its output goes to the sink).
    output: Option<RingProducer>,
    /// Counts what leaves here: the chain's end on the last stage, early outs anywhere.
    sink: T,
    recycle: StageBuffers,
    batch: Batch,
    /// Backpressure: packets the output link could not take yet.
    held: Batch,
    link: LinkCounters,
    packets: u64,
    mode: LinkMode,
    budget: usize,
    upstream_done: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    finished: bool,
    polls: u32,
}

impl<T: TxPort> StageTask<T> {
    /// One turn on the core: up to `budget` batches (as NAPI polls up to a budget).
    #[inline]
    fn poll<const ACCOUNT: bool>(&mut self, now: u64) -> bool {
        let mut worked = false;
        for _ in 0..self.budget {
            if !self.step::<ACCOUNT>(now) {
                break;
            }
            worked = true;
        }
        worked
    }

    #[inline]
    fn step<const ACCOUNT: bool>(&mut self, now: u64) -> bool {
        if self.finished {
            return false;
        }
        if !self.held.is_empty() {
            // Backpressure: nothing new until what is held has gone.
            let out = self
                .output
                .as_mut()
                .expect("only stages with an output link hold packets");
            return out.push_from(&mut self.held) > 0;
        }
        self.polls = self.polls.wrapping_add(1);
        if self.polls.is_multiple_of(1024) {
            self.chain.tick(now);
        }
        if self.input.pop_into(&mut self.batch) == 0 {
            // NFs that hold packets (a shaper) release what is due; a stage whose input
            // ended finishes once they hold none.
            if self.chain.poll::<ACCOUNT, _>(&mut self.batch, &mut self.recycle, now) {
                if self.batch.is_empty() && self.chain.outs()[0].is_empty() {
                    self.recycle.flush();
                    return false;
                }
            } else if self.upstream_done.load(Ordering::Acquire) && self.input.is_empty() {
                // Upstream's flag first (acquire), then the ring: nothing can follow both.
                // What NFs hold is flushed and counted; unused supply goes back.
                self.chain.release_held(&mut self.recycle);
                self.recycle.give_back_supply();
                self.finished = true;
                self.done.store(true, Ordering::Release);
                return false;
            } else {
                // Idle: give staged buffers back now rather than hold them.
                self.recycle.flush();
                return false;
            }
        } else {
            self.packets += self.batch.len() as u64;
            self.batch.prefetch();
            self.chain
                .process::<ACCOUNT, _>(&mut self.batch, &mut self.recycle, now);
        }
        let early = &mut self.chain.outs()[0];
        if !early.is_empty() {
            self.sink.tx(now, early, &mut self.recycle);
        }
        match &mut self.output {
            None => self.sink.tx(now, &mut self.batch, &mut self.recycle),
            Some(out) => {
                self.link.packets_in += self.batch.len() as u64;
                out.push_from(&mut self.batch);
                if !self.batch.is_empty() {
                    match self.mode {
                        LinkMode::Drop => {
                            self.link.dropped += self.batch.len() as u64;
                            self.recycle.recycle_batch(&mut self.batch);
                        }
                        LinkMode::Backpressure => std::mem::swap(&mut self.batch, &mut self.held),
                    }
                }
            }
        }
        true
    }

    fn snapshot(&self) -> StageCounters {
        StageCounters {
            nfs: self.chain.slots.iter().map(|s| s.stats).collect(),
            nf_counters: self.chain.slots.iter().map(|s| s.nf.counters()).collect(),
            link: self.link,
            sink: TxCounts::of(&self.sink),
            packets: self.packets,
        }
    }
}

enum Task<R, T> {
    Gen(Box<GenTask<R>>),
    Stage(Box<StageTask<T>>),
}

#[derive(Clone, Default)]
struct CoreCounters {
    busy: u64,
    idle: u64,
    source: Option<GenCounters>,
    stages: Vec<StageCounters>,
}

/// One pinned thread: its tasks, run in turn until all have finished.
struct CoreThread<R, T> {
    core: usize,
    tasks: Vec<Task<R, T>>,
    busy: u64,
    idle: u64,
    /// Snapshots at the window's start and end.
    marks: [Option<CoreCounters>; 2],
}

impl<R: RxPort, T: TxPort> CoreThread<R, T> {
    fn snapshot(&self) -> CoreCounters {
        let mut c = CoreCounters {
            busy: self.busy,
            idle: self.idle,
            ..Default::default()
        };
        for t in &self.tasks {
            match t {
                Task::Gen(g) => c.source = Some(g.snapshot()),
                Task::Stage(s) => c.stages.push(s.snapshot()),
            }
        }
        c
    }

    fn run<const ACCOUNT: bool>(&mut self, shared: &Coordination) {
        core_affinity::set_for_current(core_affinity::CoreId { id: self.core });
        let mut seen = EPOCH_WARMUP;
        let mut t0 = tsc::now();
        loop {
            let epoch = shared.epoch.load(Ordering::Acquire);
            if epoch != seen {
                if seen == EPOCH_WARMUP {
                    self.marks[0] = Some(self.snapshot());
                    for t in &mut self.tasks {
                        match t {
                            Task::Gen(g) => g.source.start_window(shared.count),
                            Task::Stage(s) => s.sink.start_window(),
                        }
                    }
                }
                if epoch == EPOCH_DONE && self.marks[1].is_none() {
                    self.marks[1] = Some(self.snapshot());
                }
                seen = epoch;
            }
            let mut worked = false;
            let mut finished = true;
            for t in &mut self.tasks {
                match t {
                    Task::Gen(g) => {
                        worked |= g.poll::<ACCOUNT>(t0, epoch, shared);
                        // The pool's owner stays until every stage has given its buffers back.
                        if !g.stopped || shared.stages_done.load(Ordering::Acquire) < shared.stages {
                            finished = false;
                        } else {
                            g.reclaim();
                        }
                    }
                    Task::Stage(s) => {
                        let was = s.finished;
                        worked |= s.poll::<ACCOUNT>(t0);
                        if s.finished && !was {
                            shared.stages_done.fetch_add(1, Ordering::AcqRel);
                        }
                        finished &= s.finished;
                    }
                }
            }
            let t1 = tsc::now();
            if worked {
                self.busy += t1 - t0;
            } else {
                self.idle += t1 - t0;
            }
            t0 = t1;
            if finished {
                break;
            }
        }
        if self.marks[1].is_none() {
            self.marks[1] = Some(self.snapshot());
        }
    }
}

/// What the coordinator and the threads share.
struct Coordination {
    epoch: AtomicU32,
    stages: usize,
    stages_done: AtomicUsize,
    count: Option<u64>,
    count_reached: AtomicBool,
}

/// Runs `nfs` as a pipeline placed by `settings`, fed by a generator of `traffic`.
/// The pipeline cuts a chain into contiguous blocks, so it runs linear chains only: a
/// graph (an output wired past the next NF) needs the compound runtime.
pub fn run_pipeline(
    traffic: GeneratorConfig,
    nfs: impl Into<ChainGraph>,
    settings: &PipelineSettings,
) -> Result<RunReport, RunError> {
    let graph = nfs.into();
    if let Some(w) = &graph.wiring
        && !is_linear(w)
    {
        return Err(RunError::setting(
            "wiring",
            "the pipeline runtime cuts the chain into blocks of NFs in order, so it runs linear chains \
             (each NF's first output to the next); this chain's wiring needs the compound runtime",
        ));
    }
    run_parallel(traffic, vec![graph.nfs], settings)
}

/// Runs several replicas of one chain side by side (parallel chains), the generator
/// spreading flows over them by flow hash as RSS does, so each flow stays in one
/// replica and keeps its order. Replica `r` is placed like a single chain, on `cores`
/// rotated by `r` (with `s_core`: replica r on the r-th core).
pub fn run_parallel(
    traffic: GeneratorConfig,
    replicas: Vec<Vec<(String, Box<dyn NetworkFunction>)>>,
    settings: &PipelineSettings,
) -> Result<RunReport, RunError> {
    let generator = Generator::new(traffic, settings.run.batch).map_err(|(k, r)| RunError::setting(k, r))?;
    let verify = settings.run.verify;
    run_parallel_on(generator, || Sink::new(verify), replicas, settings)
}

/// [`run_parallel`] between two kinds of port: packets from `source`; each stage sends
/// what leaves the chain there to a sink of its own from `sink` (reported as one place).
pub fn run_parallel_on<R: RxPort + Send, T: TxPort + Send>(
    source: R,
    sink: impl Fn() -> T,
    replicas: Vec<Vec<(String, Box<dyn NetworkFunction>)>>,
    settings: &PipelineSettings,
) -> Result<RunReport, RunError> {
    let run = &settings.run;
    if source.shared_pool_need().is_some() {
        // Its frames would leave the pool's thread by reference on the stages' rings.
        return Err(RunError::setting(
            "zero-copy",
            "a memif zero-copy port passes its frames by reference in the compound runtime only (one core): write zero-copy=no, or run the chain on one core",
        ));
    }
    let (plans, gen_core) = plan_replicas(&replicas, settings)?;
    let stage_count: usize = plans.iter().map(Vec::len).sum();
    let sizes = QueueSizes::of(settings, replicas.len(), stage_count);
    let mut pool = PacketPool::new(sizes.pool);
    source.prime(&mut pool);
    let names: Vec<String> = replicas[0].iter().map(|(n, _)| n.clone()).collect();
    let kinds: Vec<&'static str> = replicas[0].iter().map(|(_, nf)| nf.kind()).collect();

    let gen_done = Arc::new(AtomicBool::new(false));
    let wired = wire_replicas(replicas, &plans, (&sizes, settings), &sink, &gen_done);
    let replica_count = wired.ingress.len();
    let gen_task = GenTask {
        source,
        pool,
        batch: Batch::new(run.batch),
        split: (0..replica_count).map(|_| Batch::new(run.batch)).collect(),
        ingress: wired.ingress,
        returns: wired.returns,
        returned: Batch::new(run.batch),
        supplies: wired.supplies,
        supplying: Batch::new(run.batch),
        counters: GenCounters::default(),
        done: gen_done,
        stopped: false,
        flow_control: settings.flow_control,
    };
    let mut threads = threads_of(gen_core, gen_task, wired.stages);
    let shared = Coordination {
        epoch: AtomicU32::new(EPOCH_WARMUP),
        stages: stage_count,
        stages_done: AtomicUsize::new(0),
        count: run.count,
        count_reached: AtomicBool::new(false),
    };
    let (t_start, t_end, t_warm) = drive(&mut threads, &shared, run);
    report(threads, &plans, &names, &kinds, settings, t_start, t_end, t_warm)
}

/// Checks the settings and places each replica's stages (replica r on the cores
/// rotated by r); the generator's core.
fn plan_replicas(
    replicas: &[Vec<(String, Box<dyn NetworkFunction>)>],
    settings: &PipelineSettings,
) -> Result<(Vec<Vec<StagePlan>>, usize), RunError> {
    let run = &settings.run;
    if run.reply {
        return Err(RunError::setting(
            "responder",
            "the responder runs in the compound runtime (one core: the way back shares the NFs' state)",
        ));
    }
    let mut check = run.clone();
    check.core = None;
    check.pool_size = check.pool_size.max(2 * check.batch);
    check.validate()?;
    let n = replicas.first().map_or(0, Vec::len);
    if replicas.is_empty() || replicas.iter().any(|r| r.len() != n) {
        return Err(RunError::setting("replicas", "every replica must be the same chain"));
    }
    let mut plans = Vec::new();
    for r in 0..replicas.len() {
        let mut cores = settings.cores.clone();
        let shift = r % cores.len().max(1);
        cores.rotate_left(shift);
        plans.push(
            settings
                .placement
                .stages(n, &cores)
                .map_err(|e| RunError::setting("placement", e))?,
        );
    }
    if !(1..=1024).contains(&settings.stage_budget) {
        return Err(RunError::setting(
            "stage_budget",
            format!("{} batches per turn is outside 1..=1024", settings.stage_budget),
        ));
    }
    if settings.ring_size < run.batch || settings.rx_queue < run.batch {
        return Err(RunError::setting(
            "ring_size",
            format!("links must hold at least one batch ({} packets)", run.batch),
        ));
    }
    let gen_core = settings.generator_core.unwrap_or(plans[0][0].core);
    if !allowed_cores().contains(&gen_core) {
        return Err(RunError::setting(
            "generator_core",
            format!("core {gen_core} is not available"),
        ));
    }
    Ok((plans, gen_core))
}

/// The sizes of a run's rings and pool.
struct QueueSizes {
    ring: usize,
    rx_queue: usize,
    /// A stage whose NFs create packets keeps up to two batches of buffers at hand.
    supply: usize,
    pool: usize,
}

impl QueueSizes {
    fn of(settings: &PipelineSettings, replicas: usize, stage_count: usize) -> QueueSizes {
        let run = &settings.run;
        let ring = settings.ring_size.next_power_of_two();
        let rx_queue = settings.rx_queue.next_power_of_two();
        let supply = (2 * run.batch).next_power_of_two();
        // Enough buffers to fill every ring and batch in flight, so the generator is
        // never short of buffers when the chain is not the bottleneck.
        let pool = if run.pool_size > 0 {
            run.pool_size
        } else {
            replicas * rx_queue + stage_count * (ring + 4 * run.batch + supply) + 1024
        };
        QueueSizes {
            ring,
            rx_queue,
            supply,
            pool,
        }
    }
}

/// Every replica wired: the generator's ends of their rx-queues, return links and
/// supplies, and each stage with its core.
struct Wired<T: TxPort> {
    ingress: Vec<RingProducer>,
    returns: Vec<RingConsumer>,
    supplies: Vec<RingProducer>,
    stages: Vec<(usize, StageTask<T>)>,
}

/// Wires each replica: its rx-queue, links, return links and done flags.
fn wire_replicas<T: TxPort>(
    replicas: Vec<Vec<(String, Box<dyn NetworkFunction>)>>,
    plans: &[Vec<StagePlan>],
    (sizes, settings): (&QueueSizes, &PipelineSettings),
    sink: &impl Fn() -> T,
    gen_done: &Arc<AtomicBool>,
) -> Wired<T> {
    let run = &settings.run;
    let (ring_size, rx_queue, supply_size, pool_size) = (sizes.ring, sizes.rx_queue, sizes.supply, sizes.pool);
    let replicated = replicas.len() > 1;
    let mut ingress = Vec::new();
    let mut returns = Vec::new();
    let mut supplies = Vec::new();
    let mut stages = Vec::new();
    for (r, (nfs, plans)) in replicas.into_iter().zip(plans).enumerate() {
        let (queue, mut input) = ring(rx_queue);
        ingress.push(queue);
        let mut upstream_done = gen_done.clone();
        let mut nfs = nfs.into_iter();
        for (k, plan) in plans.iter().enumerate() {
            let block: Vec<_> = nfs.by_ref().take(plan.nfs.len()).collect();
            let (output, next_input) = if k + 1 < plans.len() {
                let (p, c) = ring(ring_size);
                (Some(p), Some(c))
            } else {
                (None, None)
            };
            let (ret_tx, ret_rx) = ring(pool_size);
            returns.push(ret_rx);
            let supply = block.iter().any(|(_, nf)| nf.creates_packets()).then(|| {
                let (p, c) = ring(supply_size);
                supplies.push(p);
                c
            });
            let mut chain = Chain::new(block, run.batch, 1);
            chain.core = Some(plan.core);
            chain.replica = r;
            let done = Arc::new(AtomicBool::new(false));
            stages.push((
                plan.core,
                StageTask {
                    replica: r,
                    index: k,
                    name: if replicated {
                        format!("r{r}.stage{k}")
                    } else {
                        format!("stage{k}")
                    },
                    chain,
                    input: std::mem::replace(&mut input, next_input.unwrap_or_else(|| ring(2).1)),
                    output,
                    sink: sink(),
                    recycle: StageBuffers {
                        back: ReturnLink::new(ret_tx, run.batch),
                        supply,
                        cache: Batch::new(run.batch),
                    },
                    batch: Batch::new(run.batch),
                    held: Batch::new(run.batch),
                    link: LinkCounters::default(),
                    packets: 0,
                    mode: settings.links,
                    budget: settings.stage_budget,
                    upstream_done: std::mem::replace(&mut upstream_done, done.clone()),
                    done,
                    finished: false,
                    polls: 0,
                },
            ));
        }
    }
    Wired {
        ingress,
        returns,
        supplies,
        stages,
    }
}

/// One thread per core used, its tasks in chain order (generator first).
fn threads_of<R: RxPort, T: TxPort>(
    gen_core: usize,
    gen_task: GenTask<R>,
    stages: Vec<(usize, StageTask<T>)>,
) -> Vec<CoreThread<R, T>> {
    let mut threads: Vec<CoreThread<R, T>> = Vec::new();
    let thread_for = |core: usize, threads: &mut Vec<CoreThread<R, T>>| -> usize {
        match threads.iter().position(|t| t.core == core) {
            Some(i) => i,
            None => {
                threads.push(CoreThread {
                    core,
                    tasks: Vec::new(),
                    busy: 0,
                    idle: 0,
                    marks: [None, None],
                });
                threads.len() - 1
            }
        }
    };
    let i = thread_for(gen_core, &mut threads);
    threads[i].tasks.push(Task::Gen(Box::new(gen_task)));
    for (core, stage) in stages {
        let i = thread_for(core, &mut threads);
        threads[i].tasks.push(Task::Stage(Box::new(stage)));
    }

    threads
}

/// Runs the threads through the warm-up and the window (ended by its duration, its
/// count or a stop) and tells them it is done; the window's start and end and the
/// warm-up, TSC.
fn drive<R: RxPort + Send, T: TxPort + Send>(
    threads: &mut [CoreThread<R, T>],
    shared: &Coordination,
    run: &RunSettings,
) -> (u64, u64, u64) {
    let stopped = || run.stop.as_ref().is_some_and(Stop::requested);
    std::thread::scope(|s| {
        for t in threads.iter_mut() {
            let accounting = run.accounting;
            s.spawn(move || {
                if accounting {
                    t.run::<true>(shared)
                } else {
                    t.run::<false>(shared)
                }
            });
        }
        let warm_start = tsc::now();
        sleep_unless(run.warmup, &stopped, &|| false);
        let t_start = tsc::now();
        shared.epoch.store(EPOCH_WINDOW, Ordering::Release);
        let window = run.duration.unwrap_or(Duration::from_secs(u64::MAX / 4));
        sleep_unless(window, &stopped, &|| shared.count_reached.load(Ordering::Acquire));
        let t_end = tsc::now();
        shared.epoch.store(EPOCH_DONE, Ordering::Release);
        (t_start, t_end, t_start - warm_start)
    })
}

/// Sleeps for `d` in short steps, returning early if `stop` or `done` says so.
fn sleep_unless(d: Duration, stop: &dyn Fn() -> bool, done: &dyn Fn() -> bool) {
    let end = Instant::now() + d.min(Duration::from_secs(10 * 365 * 86400));
    while Instant::now() < end && !stop() && !done() {
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(5)));
    }
}

/// Builds the report from the threads' marks and final state; checks conservation.
#[allow(clippy::too_many_arguments)]
fn report<R: RxPort, T: TxPort>(
    threads: Vec<CoreThread<R, T>>,
    plans: &[Vec<StagePlan>],
    names: &[String],
    kinds: &[&'static str],
    settings: &PipelineSettings,
    t_start: u64,
    t_end: u64,
    t_warm: u64,
) -> Result<RunReport, RunError> {
    let run = &settings.run;
    let acc = run.accounting;
    let per = |cycles: u64, n: u64| (acc && n > 0).then(|| cycles as f64 / n as f64);

    let Marked {
        source,
        mut stages,
        cores,
    } = marked(threads)?;
    stages.sort_by_key(|(st, _, _)| (st.replica, st.index));
    let replicated = plans.len() > 1;
    let (mut source, g_start, g_end) = source;

    // The window, place by place in the order packets pass them.
    let gw = g_end.port.since(&g_start.port);
    let generated = gw.packets;
    let rx_full = g_end.rx_queue_full - g_start.rx_queue_full;
    let (source_info, sink_info) = (source.source.info(), stages[0].0.sink.info());
    let mut places = vec![
        PlaceReport::source(
            &source_info.kind,
            &gw,
            Vec::new(),
            NfCounter::window(&g_start.counters, &g_end.counters),
            per(g_end.cycles - g_start.cycles, generated),
        ),
        PlaceReport::queue(
            "rx-queue".into(),
            "rx-queue",
            generated,
            rx_full,
            DropReason::RX_QUEUE_FULL,
        ),
    ];
    let sink_w = stage_places(&stages, (plans, names, kinds), acc, &mut places);
    places.push(PlaceReport::sink("sink".into(), &sink_info.kind, &sink_w, None));
    let drops = RunReport::collect_drops(&places);
    let dropped_w: u64 = drops.iter().map(|d| d.packets).sum();

    let (all, latency, conservation) = whole_run(&mut source, &mut stages);
    let window_loss = WindowLoss::new(generated, all.window_packets).map_err(|e| RunError::failed("window", e))?;
    let seconds = tsc::seconds(t_end - t_start);
    let shortfall = g_end.shortfall.since(&g_start.shortfall);
    let received = sink_w.port.packets;
    let l2_bytes = sink_w.port.bytes + 4 * received;
    let report = RunReport {
        version: env!("CARGO_PKG_VERSION"),
        runtime: "pipeline",
        chain: names.to_vec(),
        source: source_info,
        sink: sink_info,
        batch: run.batch,
        core: None,
        accounting: acc,
        tsc_hz: tsc::hz(),
        warmup_s: tsc::seconds(t_warm),
        duration_s: seconds,
        interrupted: run.stop.as_ref().is_some_and(Stop::requested),
        generated,
        received,
        dropped: dropped_w,
        mpps: received as f64 / seconds / 1e6,
        gbps_l2: l2_bytes as f64 * 8.0 / seconds / 1e9,
        gbps_l1: (l2_bytes + 20 * received) as f64 * 8.0 / seconds / 1e9,
        requested_mpps: source.source.requested_pps().map(|p| p / 1e6),
        generated_mpps: generated as f64 / seconds / 1e6,
        // The busiest core's: the bottleneck's.
        busy_cycles_per_packet: cores
            .iter()
            .filter_map(|c| c.cycles_per_packet)
            .fold(None, |m: Option<f64>, c| Some(m.map_or(c, |m| m.max(c)))),
        places,
        drops,
        latency: latency.summary(),
        // Across threads packets are in flight at the window's edges; the exact checks
        // are the window's own traffic and the whole run, after every stage has drained.
        window_loss,
        verify_failed: all.verify_failed,
        conservation,
        pool: source.pool.stats(),
        pool_empty: shortfall.pool_empty,
        pacing_behind: shortfall.behind,
        not_offered: shortfall.not_offered,
        placement: Some(if replicated {
            format!("{} x{} replicas", settings.placement, plans.len())
        } else {
            settings.placement.to_string()
        }),
        link_mode: Some(settings.links.name()),
        shares_thread_with: 0,
        cores,
    };
    if report.conservation.holds {
        Ok(report)
    } else {
        Err(RunError::Conservation(Box::new(report)))
    }
}

/// Every task of a run with its counters at the window's start and end (its thread's
/// marks), and each core's report.
struct Marked<R: RxPort, T: TxPort> {
    source: (Box<GenTask<R>>, GenCounters, GenCounters),
    stages: Vec<(Box<StageTask<T>>, StageCounters, StageCounters)>,
    cores: Vec<CoreReport>,
}

fn marked<R: RxPort, T: TxPort>(threads: Vec<CoreThread<R, T>>) -> Result<Marked<R, T>, RunError> {
    let mut source: Option<(Box<GenTask<R>>, GenCounters, GenCounters)> = None;
    let mut stages: Vec<(Box<StageTask<T>>, StageCounters, StageCounters)> = Vec::new();
    let mut cores = Vec::new();
    for mut t in threads {
        // A thread marks the window's start when it first sees it begin; one kept off its
        // core through the whole window (an overloaded machine) can finish on what the
        // window sent without having seen it start, and its counters cannot be split.
        let (Some(start), Some(end)) = (t.marks[0].take(), t.marks[1].take()) else {
            return Err(RunError::failed(
                "pipeline",
                format!(
                    "the thread on core {} was not scheduled from before the window to its end: the machine is too busy to measure this run",
                    t.core
                ),
            ));
        };
        // Every packet passes each task of a core once: the core handled as many
        // packets as its busiest task.
        let mut packets = 0;
        let mut tasks = Vec::new();
        let mut stage_marks = start.stages.into_iter().zip(end.stages);
        for task in t.tasks {
            match task {
                Task::Gen(g) => {
                    let (s, e) = (
                        start.source.clone().expect("source marked"),
                        end.source.clone().expect("source marked"),
                    );
                    packets = packets.max(e.port.packets - s.port.packets);
                    tasks.push(g.source.info().kind);
                    source = Some((g, s, e));
                }
                Task::Stage(st) => {
                    let (s, e) = stage_marks.next().expect("stage marked");
                    packets = packets.max(e.packets - s.packets);
                    tasks.push(st.name.clone());
                    stages.push((st, s, e));
                }
            }
        }
        let (busy, idle) = (end.busy - start.busy, end.idle - start.idle);
        cores.push(CoreReport {
            core: t.core,
            tasks,
            busy_cycles: busy,
            idle_cycles: idle,
            busy_share: if busy + idle > 0 {
                busy as f64 / (busy + idle) as f64
            } else {
                0.0
            },
            packets,
            cycles_per_packet: (packets > 0).then(|| busy as f64 / packets as f64),
        });
    }
    Ok(Marked {
        source: source.expect("the generator task"),
        stages,
        cores,
    })
}

/// Each stage's NFs and outgoing link as places of the window, into `places`; the
/// stages' sinks' window counts, summed.
fn stage_places<T: TxPort>(
    stages: &[(Box<StageTask<T>>, StageCounters, StageCounters)],
    (plans, names, kinds): (&[Vec<StagePlan>], &[String], &[&'static str]),
    acc: bool,
    places: &mut Vec<PlaceReport>,
) -> TxCounts {
    let replicated = plans.len() > 1;
    let mut sink_w = TxCounts::default();
    for (st, s, e) in stages {
        let (r, k) = (st.replica, st.index);
        // Replicas name their places `name@r`, so that each can be told apart.
        let at = if replicated { format!("@{r}") } else { String::new() };
        for j in 0..st.chain.slots.len() {
            let i = plans[r][k].nfs.start + j;
            let name = format!("{}{at}", names[i]);
            places.push(PlaceReport::from_nf(
                &name,
                kinds[i],
                &e.nfs[j].since(&s.nfs[j]),
                st.chain.slots[j].nf.drop_reasons(),
                acc,
                NfCounter::window(&s.nf_counters[j], &e.nf_counters[j]),
            ));
        }
        if st.output.is_some() {
            let (pin, dropped) = (e.link.packets_in - s.link.packets_in, e.link.dropped - s.link.dropped);
            places.push(PlaceReport::queue(
                format!("link{k}-{}{at}", k + 1),
                "link",
                pin,
                dropped,
                DropReason::LINK_FULL,
            ));
        }
        let w = e.sink.since(&s.sink);
        sink_w.add(&w);
    }
    sink_w
}

/// The whole run, after every stage drained (exact): what the sinks sent, its latency,
/// and whether every packet is accounted for.
fn whole_run<R: RxPort, T: TxPort>(
    source: &mut GenTask<R>,
    stages: &mut [(Box<StageTask<T>>, StageCounters, StageCounters)],
) -> (TxCounts, LatencyRecord, Conservation) {
    let mut all = TxCounts::default();
    let mut latency = LatencyRecord::default();
    let mut total_dropped = source.counters.rx_queue_full + source.source.stats().dropped;
    for (st, _, _) in stages.iter_mut() {
        st.recycle.flush();
        all.add(&TxCounts::of(&st.sink));
        if let Some(l) = st.sink.latency() {
            latency.merge(l);
        }
        total_dropped += st.link.dropped + st.chain.dropped();
    }
    source.reclaim();
    let leaked = source.pool.in_use() as u64;
    total_dropped += all.port.dropped;
    let created: u64 = stages.iter().map(|(st, _, _)| st.chain.created()).sum();
    let conservation = Conservation::check(
        source.source.stats().packets,
        created,
        all.port.packets,
        total_dropped,
        leaked,
    );
    (all, latency, conservation)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sfclab_core::{BatchView, Verdicts, nf::Verdict};
    use sfclab_nf::NfSpec;
    use std::sync::Mutex;

    fn forwarders(n: usize) -> Vec<(String, Box<dyn NetworkFunction>)> {
        (0..n)
            .map(|i| (format!("fwd{i}"), NfSpec::default_of("forwarder").unwrap().build()))
            .collect()
    }

    fn dropper(name: &str, k: u64) -> (String, Box<dyn NetworkFunction>) {
        let cfg = NfSpec::new("synthetic", serde_json::json!({ "drop_one_in": k })).unwrap();
        (name.to_string(), cfg.build())
    }

    fn settings(placement: &str, count: Option<u64>) -> PipelineSettings {
        let mut s = PipelineSettings {
            placement: placement.parse().unwrap(),
            ..Default::default()
        };
        s.run.warmup = Duration::from_millis(20);
        s.run.verify = true;
        match count {
            Some(c) => {
                s.run.count = Some(c);
                s.run.duration = None;
            }
            None => s.run.duration = Some(Duration::from_millis(150)),
        }
        s
    }

    #[test]
    #[cfg_attr(one_core, ignore = "needs two cores; this machine has one")]
    fn block_interleaved_chain_conserves_every_packet_across_threads() {
        let mut nfs = forwarders(2);
        nfs.push(dropper("lossy", 9));
        nfs.extend(forwarders(1).into_iter().map(|(_, nf)| ("fwd-last".to_string(), nf)));
        let r = run_pipeline(GeneratorConfig::default(), nfs, &settings("bi:2", Some(500_000))).unwrap();
        assert!(r.conservation.holds, "{}", r.conservation);
        assert_eq!(r.generated, 500_000);
        assert_eq!(r.cores.len(), 2);
        let lossy = r.places.iter().find(|p| p.name == "lossy").unwrap();
        // One in nine, give or take where the window cut the count.
        assert!(lossy.drops["injected"].abs_diff(lossy.packets_in / 9) <= 1, "{lossy:?}");
        assert_eq!(r.places.last().unwrap().counters["verify_failed"], 0);
        assert_eq!(r.pool.available, r.pool.capacity);
    }

    /// Across cores packets are in flight at the window's edges, so the window's place
    /// counters cannot balance; the window's own traffic, counted by its flag after the
    /// drain, does exactly: a lossless chain loses none of it, a lossy one exactly what
    /// its NFs dropped of it.
    #[test]
    #[cfg_attr(one_core, ignore = "needs two cores; this machine has one")]
    fn window_loss_counts_the_windows_own_traffic_exactly() {
        let mut s = settings("bi:2", None);
        // Nothing lost at ingress or on the link: every loss is an NF's.
        s.flow_control = true;
        s.links = LinkMode::Backpressure;
        s.run.warmup = Duration::from_millis(50);
        let r = run_pipeline(GeneratorConfig::default(), forwarders(4), &s).unwrap();
        assert!(r.conservation.holds, "{}", r.conservation);
        assert_eq!(r.window_loss.sent, r.generated);
        assert_eq!(r.window_loss.lost, 0, "{:?}: {:?}", r.window_loss, r.drops);
        assert_eq!(r.window_loss.received, r.generated);

        let mut nfs = forwarders(2);
        nfs.push(dropper("lossy", 4));
        let r = run_pipeline(GeneratorConfig::default(), nfs, &s).unwrap();
        let w = r.window_loss;
        assert_eq!(w.sent, r.generated);
        assert_eq!(w.sent, w.received + w.lost);
        // One in four of the window's packets, give or take the phase of the counter.
        assert!(w.lost.abs_diff(w.sent / 4) <= 1, "{w:?}");
    }

    /// The generator on one core as the traffic source, both stages sharing the other,
    /// the first allowed 4 batches a turn into a link of 2: the link overflows.
    fn overload(links: LinkMode) -> PipelineSettings {
        let cores = allowed_cores();
        let mut s = settings("pbp:1", None);
        s.cores = vec![cores[1]];
        s.generator_core = Some(cores[0]);
        s.stage_budget = 4;
        s.ring_size = 64;
        s.rx_queue = 64;
        s.links = links;
        s
    }

    #[test]
    #[cfg_attr(one_core, ignore = "needs two cores; this machine has one")]
    fn overloaded_drop_mode_counts_ingress_and_software_drops_apart() {
        let nfs = vec![
            forwarders(1).pop().unwrap(),
            (
                "slow".to_string(),
                NfSpec::new("synthetic", serde_json::json!({ "cycles": 400 }))
                    .unwrap()
                    .build(),
            ),
        ];
        let s = overload(LinkMode::Drop);
        let r = run_pipeline(GeneratorConfig::default(), nfs, &s).unwrap();
        assert!(r.conservation.holds, "{}", r.conservation);
        let kinds: Vec<(&str, &str)> = r.drops.iter().map(|d| (d.reason.as_str(), d.kind)).collect();
        assert!(kinds.contains(&("rx-queue-full", "ingress")), "{kinds:?}");
        assert!(kinds.contains(&("link-full", "software")), "{kinds:?}");
        for d in &r.drops {
            if d.kind == "software" {
                assert!(
                    d.wasted_cycles.unwrap() > 0.0,
                    "a software drop wastes upstream cycles: {d:?}"
                );
            } else {
                assert!(d.wasted_cycles.is_none());
            }
        }
    }

    #[test]
    #[cfg_attr(one_core, ignore = "needs two cores; this machine has one")]
    fn backpressure_drops_only_at_ingress() {
        let nfs = vec![
            forwarders(1).pop().unwrap(),
            (
                "slow".to_string(),
                NfSpec::new("synthetic", serde_json::json!({ "cycles": 300 }))
                    .unwrap()
                    .build(),
            ),
        ];
        let s = overload(LinkMode::Backpressure);
        let r = run_pipeline(GeneratorConfig::default(), nfs, &s).unwrap();
        assert!(r.conservation.holds, "{}", r.conservation);
        assert!(r.drops.iter().all(|d| d.kind == "ingress"), "{:?}", r.drops);
        assert!(
            r.drops.iter().any(|d| d.reason == "rx-queue-full"),
            "overloaded: the NIC queue drops"
        );
    }

    /// (flow hash, sequence number) of every packet a probe saw.
    type Seen = Arc<Mutex<Vec<(u32, u32)>>>;

    /// Records the sequence numbers it sees, per flow.
    struct OrderProbe(Seen);

    impl NetworkFunction for OrderProbe {
        fn kind(&self) -> &'static str {
            "order-probe"
        }
        fn process(&mut self, _: &mut sfclab_core::Context<'_>, batch: BatchView<'_>, _: &mut Verdicts) {
            let mut v = self.0.lock().unwrap();
            v.extend(batch.iter().map(|p| (p.meta.flow_hash, p.meta.seq)));
        }
    }

    #[test]
    fn stages_keep_packet_order_and_shared_cores_work() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut nfs = forwarders(3);
        nfs.push(("probe".into(), Box::new(OrderProbe(seen.clone()))));
        let mut s = settings("pbp:1", Some(100_000));
        // Four stages time-sharing one core, backpressure: nothing dropped inside.
        s.links = LinkMode::Backpressure;
        s.rx_queue = 1 << 16;
        let traffic = GeneratorConfig {
            flows: 7,
            ..Default::default()
        };
        let r = run_pipeline(traffic, nfs, &s).unwrap();
        assert!(r.conservation.holds, "{}", r.conservation);
        let seen = seen.lock().unwrap();
        assert!(seen.windows(2).all(|w| w[0].1 < w[1].1), "sequence numbers only grow");
        let _ = Verdict::Continue;
    }

    #[test]
    #[cfg_attr(one_core, ignore = "needs two cores; this machine has one")]
    fn flow_control_with_backpressure_loses_nothing() {
        let mut s = overload(LinkMode::Backpressure);
        s.flow_control = true;
        let nfs = vec![
            forwarders(1).pop().unwrap(),
            (
                "slow".to_string(),
                NfSpec::new("synthetic", serde_json::json!({ "cycles": 300 }))
                    .unwrap()
                    .build(),
            ),
        ];
        let r = run_pipeline(GeneratorConfig::default(), nfs, &s).unwrap();
        assert!(r.conservation.holds, "{}", r.conservation);
        assert!(r.drops.is_empty(), "{:?}", r.drops);
        assert_eq!(r.conservation.dropped, 0);
    }

    #[test]
    fn parallel_replicas_split_flows_and_keep_each_flows_order() {
        let seen: Vec<Seen> = (0..2).map(|_| Arc::new(Mutex::new(Vec::new()))).collect();
        let replicas = seen
            .iter()
            .map(|v| {
                let mut nfs = forwarders(2);
                nfs.push((
                    "probe".into(),
                    Box::new(OrderProbe(v.clone())) as Box<dyn NetworkFunction>,
                ));
                nfs
            })
            .collect();
        let mut s = settings("s_core", Some(200_000));
        s.links = LinkMode::Backpressure;
        s.flow_control = true;
        let traffic = GeneratorConfig {
            flows: 64,
            ..Default::default()
        };
        let r = run_parallel(traffic, replicas, &s).unwrap();
        assert!(r.conservation.holds, "{}", r.conservation);
        assert!(r.drops.is_empty(), "flow control and backpressure: nothing dropped");
        assert!(r.places.iter().any(|p| p.name == "probe@1"));
        let mut flows_per_replica = Vec::new();
        for v in &seen {
            let v = v.lock().unwrap();
            assert!(!v.is_empty(), "every replica gets flows");
            let mut last = std::collections::HashMap::new();
            for &(flow, seq) in v.iter() {
                let prev = last.insert(flow, seq);
                assert!(prev.is_none_or(|p| p < seq), "flow {flow:x} reordered");
            }
            flows_per_replica.push(last.keys().copied().collect::<std::collections::HashSet<u32>>());
        }
        assert!(
            flows_per_replica[0].is_disjoint(&flows_per_replica[1]),
            "a flow stays in one replica"
        );
    }

    #[test]
    fn stop_flag_ends_a_long_run_cleanly() {
        let mut s = settings("s_core", None);
        s.run.duration = Some(Duration::from_secs(3600));
        let stop = crate::Stop::new();
        s.run.stop = Some(stop.clone());
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            stop.request();
        });
        let r = run_pipeline(GeneratorConfig::default(), forwarders(2), &s).unwrap();
        t.join().unwrap();
        assert!(r.duration_s < 5.0);
        assert!(r.conservation.holds, "{}", r.conservation);
    }

    /// Stopped while a slow last stage has its link and the rx-queue full: what is in
    /// flight is drained or counted, and every buffer is back in the pool.
    #[test]
    #[cfg_attr(one_core, ignore = "needs two cores; this machine has one")]
    fn shutdown_with_full_links_accounts_for_every_packet() {
        for links in [LinkMode::Drop, LinkMode::Backpressure] {
            // Stopped after a wait that doubles until the chain had packets waiting: a
            // loaded machine may not have started the threads within the first.
            let waited_for = [200, 400, 800, 1600, 3200].into_iter().find(|&wait_ms| {
                let mut nfs = forwarders(1);
                let slow = NfSpec::new("synthetic", serde_json::json!({ "cycles": 5_000 })).unwrap();
                nfs.push(("slow".to_string(), slow.build()));
                let mut s = settings("bi:2", None);
                s.links = links;
                s.ring_size = 512;
                let stop = crate::Stop::new();
                s.run.duration = Some(Duration::from_secs(3600));
                s.run.stop = Some(stop.clone());
                let t = std::thread::spawn(move || {
                    std::thread::sleep(Duration::from_millis(wait_ms));
                    stop.request();
                });
                let r = run_pipeline(GeneratorConfig::default(), nfs, &s).unwrap();
                t.join().unwrap();
                assert!(r.conservation.holds, "{links:?}: {}", r.conservation);
                assert_eq!(r.pool.available, r.pool.capacity, "{links:?}: a buffer is missing");
                // The slow stage was the bottleneck: the chain really had packets waiting.
                r.generated > r.received
            });
            assert!(
                waited_for.is_some(),
                "{links:?}: the slow stage never held packets back"
            );
        }
    }

    #[test]
    fn bad_placements_are_setting_errors() {
        let bad = [("bi:64", "placement"), ("0,4096", "placement")];
        for (p, key) in bad {
            match run_pipeline(GeneratorConfig::default(), forwarders(2), &settings(p, Some(10))) {
                Err(RunError::Setting { key: k, .. }) => assert_eq!(k, key),
                other => panic!("{p}: expected a setting error, got {:?}", other.map(|r| r.mpps)),
            }
        }
    }
}
