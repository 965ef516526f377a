//! The sending half of a tester's link: the source's frames signed and handed to the
//! out port. It runs on the receiving thread, a batch before each read (one core), or
//! on a thread and core of its own ([`SenderThread`]), where the tester's work per frame
//! is what limits a run and the machine has a core to spare.
//!
//! On its own thread it owns its pool (its frames leave as copies: a zero-copy out port,
//! whose frames live in the run's pool, cannot be used) and shares with the receiving
//! thread only what that needs per batch: how many frames it handed to the out port,
//! published before the hand-over, and how many of those the port refused, published
//! after it, so that a frame that comes back at once is never taken for one nobody sent.
//! Everything else (commands between phases, counters for the report) passes under a
//! lock the sending thread holds while it works and lets go between batches when the
//! receiving thread asks for it: uncontended while a phase runs.

use super::{SIGNATURE_LEN, Signature, sign};
use sfclab_core::port::PortStats;
use sfclab_core::{Batch, MAX_BATCH, PacketPool, RxPort, TxPort, tsc};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

/// Where a link's sending half runs when it has a thread of its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenderThread {
    /// The core it is pinned to (`None`: wherever the scheduler puts it).
    pub core: Option<usize>,
    /// Buffers of its own pool: frames being generated and signed, until the out port
    /// has copied them.
    pub pool_size: usize,
}

/// The source, the out port and what signing and sending them counts.
pub(super) struct Sender<G, O> {
    pub(super) source: G,
    pub(super) out: O,
    outbound: Batch,
    /// Per frame of a batch: whether it could carry a signature.
    signed: Box<[bool; MAX_BATCH]>,
    /// The phase its signatures carry (the receiving half checks against its own).
    pub(super) phase: u8,
    /// `finish` was called: nothing more is sent until a window starts.
    pub(super) finishing: bool,
    /// What the sources of earlier runs generated: the link's counters stay totals.
    pub(super) earlier: PortStats,
    /// Frames handed to the out port, and of those the ones it did not send.
    attempted: u64,
    pub(super) refused: u64,
    pub(super) unsignable: u64,
}

impl<G, O> Sender<G, O> {
    /// Frames the out port took and sent on.
    pub(super) fn sent(&self) -> u64 {
        self.attempted - self.refused
    }
}

impl<G: RxPort, O: TxPort> Sender<G, O> {
    pub(super) fn new(mut source: G, out: O, batch: usize) -> Sender<G, O> {
        // Signing changes the frame's bytes past the source's stamped head: the source
        // must put them back before it stamps that buffer again.
        source.restore_tails(SIGNATURE_LEN);
        Sender {
            source,
            out,
            outbound: Batch::new(batch),
            signed: Box::new([false; MAX_BATCH]),
            phase: 0,
            finishing: false,
            earlier: PortStats::default(),
            attempted: 0,
            refused: 0,
            unsignable: 0,
        }
    }

    /// Nothing more will be sent this phase.
    pub(super) fn done(&self) -> bool {
        self.finishing || self.source.exhausted()
    }

    /// One batch from the source, signed, out; the frames handed to the out port.
    /// `published`: where the receiving thread reads the counts, updated before the
    /// hand-over (attempted) and after it (refused).
    pub(super) fn send(&mut self, now: u64, pool: &mut PacketPool, published: Option<&Published>) -> u64 {
        if self.source.rx(now, pool, &mut self.outbound) == 0 {
            return 0;
        }
        let phase = self.phase;
        for (p, ok) in self.outbound.iter_mut().zip(self.signed.iter_mut()) {
            let sig = Signature {
                phase,
                flags: p.meta.flags as u8,
                seq: p.meta.seq,
                timestamp: p.meta.timestamp,
            };
            *ok = sign(p, sig);
        }
        // Frames that cannot carry a signature go back to the pool, counted.
        let (signed, unsignable) = (&self.signed, &mut self.unsignable);
        self.outbound.partition(
            |i, _| signed[i],
            |_, p| {
                *unsignable += 1;
                pool.free(p);
            },
        );
        let n = self.outbound.len() as u64;
        self.attempted += n;
        if let Some(p) = published {
            p.attempted.store(self.attempted, Ordering::Release);
        }
        let before = self.out.stats().packets;
        self.out.tx(now, &mut self.outbound, pool);
        // Whatever the port did not count as sent it refused (by the causes its drops
        // name): every frame handed over is one or the other.
        self.refused += n - (self.out.stats().packets - before);
        if let Some(p) = published {
            p.refused.store(self.refused, Ordering::Release);
        }
        n
    }

    /// A new run's source from now on, in phase `phase`; returns the old one.
    pub(super) fn begin_run(&mut self, mut source: G, phase: u8) -> G {
        source.restore_tails(SIGNATURE_LEN);
        self.phase = phase;
        self.finishing = false;
        let old = std::mem::replace(&mut self.source, source);
        let s = old.stats();
        self.earlier.packets += s.packets;
        self.earlier.bytes += s.bytes;
        old
    }

    /// The window opens: frames from now on carry `phase`; with `count`, that many.
    pub(super) fn start_window(&mut self, phase: u8, count: Option<u64>) {
        self.finishing = false;
        self.phase = phase;
        self.out.start_window();
        self.source.start_window(count);
    }
}

/// What the sending thread publishes per batch, on a cache line of its own (only it
/// writes there).
#[repr(align(128))]
#[derive(Default)]
pub(super) struct Published {
    attempted: AtomicU64,
    refused: AtomicU64,
    /// The source ran dry (its window's count sent), after the last batch's counts.
    exhausted: AtomicBool,
}

impl Published {
    /// Frames sent so far, at least: a batch being handed over counts as sent until
    /// its refusals are published (its frames can come back before that, never after
    /// being refused).
    pub(super) fn sent(&self) -> u64 {
        // Refusals first: the attempts they belong to were published before them.
        let refused = self.refused.load(Ordering::Acquire);
        self.attempted.load(Ordering::Acquire) - refused
    }

    pub(super) fn exhausted(&self) -> bool {
        self.exhausted.load(Ordering::Acquire)
    }
}

/// What the receiving thread writes for the sending one, on a line of its own.
#[repr(align(128))]
#[derive(Default)]
struct Requests {
    /// Callers waiting for the sender (a command, a read): the sending thread lets go
    /// of it between batches while any wait.
    waiting: AtomicUsize,
    stop: AtomicBool,
}

/// The sending thread's state, under its lock.
pub(super) struct Owned<G, O> {
    pub(super) sender: Sender<G, O>,
    pub(super) pool: PacketPool,
    /// Set by a phase's first read, cleared by every command: sending starts when the
    /// run (or its next phase) does.
    pub(super) running: bool,
    /// TSC ticks of the batches that handed frames over: the sending core's work.
    pub(super) busy_ticks: u64,
}

impl<G, O> Owned<G, O> {
    /// A new phase: the source runs again from the next read.
    pub(super) fn rearm(&mut self, published: &Published) {
        self.running = false;
        published.exhausted.store(false, Ordering::Release);
    }
}

struct Shared<G, O> {
    published: Published,
    requests: Requests,
    state: Mutex<Owned<G, O>>,
}

/// A sending half on a thread of its own; stopped and joined when dropped.
pub(super) struct SendingThread<G, O> {
    shared: Arc<Shared<G, O>>,
    thread: Option<JoinHandle<()>>,
    pub(super) place: SenderThread,
}

/// How long an idle sending thread sleeps between looks (nothing to send: before the
/// run, between phases, after its source ran dry).
const IDLE_NAP: Duration = Duration::from_micros(50);

impl<G, O> SendingThread<G, O>
where
    G: RxPort + Send + 'static,
    O: TxPort + Send + 'static,
{
    pub(super) fn spawn(sender: Sender<G, O>, place: SenderThread) -> Result<SendingThread<G, O>, String> {
        if sender.out.shared_pool_need().is_some() {
            return Err(
                "a tester's sending thread copies its frames out: its out port cannot be a zero-copy \
                 client (its frames would live in the receiving thread's pool)"
                    .into(),
            );
        }
        let mut pool = PacketPool::new(place.pool_size);
        sender.source.prime(&mut pool);
        let shared = Arc::new(Shared {
            published: Published::default(),
            requests: Requests::default(),
            state: Mutex::new(Owned {
                sender,
                pool,
                running: false,
                busy_ticks: 0,
            }),
        });
        let serving = shared.clone();
        let thread = std::thread::Builder::new()
            .name("tester-sender".into())
            .spawn(move || serve(&serving, place.core))
            .map_err(|e| format!("the tester's sending thread: {e}"))?;
        Ok(SendingThread {
            shared,
            thread: Some(thread),
            place,
        })
    }
}

impl<G, O> SendingThread<G, O> {
    pub(super) fn published(&self) -> &Published {
        &self.shared.published
    }

    /// `f` on the sender between its batches.
    pub(super) fn with<R>(&self, f: impl FnOnce(&mut Owned<G, O>, &Published) -> R) -> R {
        let requests = &self.shared.requests;
        requests.waiting.fetch_add(1, Ordering::AcqRel);
        let result = {
            let mut owned = lock(&self.shared.state);
            f(&mut owned, &self.shared.published)
        };
        requests.waiting.fetch_sub(1, Ordering::AcqRel);
        result
    }
}

impl<G, O> Drop for SendingThread<G, O> {
    fn drop(&mut self) {
        self.shared.requests.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            // A panic there was reported by the thread itself; the link is going away.
            let _ = t.join();
        }
    }
}

/// The sender's lock; a panic on the sending thread is the run's.
fn lock<G, O>(state: &Mutex<Owned<G, O>>) -> MutexGuard<'_, Owned<G, O>> {
    state.lock().expect("the tester's sending thread panicked")
}

/// The sending thread: a batch at a time while the run sends, letting go of the sender
/// whenever the receiving thread waits for it, napping while there is nothing to send.
fn serve<G: RxPort, O: TxPort>(shared: &Shared<G, O>, core: Option<usize>) {
    if let Some(id) = core {
        core_affinity::set_for_current(core_affinity::CoreId { id });
    }
    let (requests, published) = (&shared.requests, &shared.published);
    let mut owned = lock(&shared.state);
    loop {
        if requests.waiting.load(Ordering::Acquire) > 0 {
            drop(owned);
            while requests.waiting.load(Ordering::Acquire) > 0 {
                std::thread::yield_now();
            }
            owned = lock(&shared.state);
        }
        if requests.stop.load(Ordering::Acquire) {
            break;
        }
        let o = &mut *owned;
        if o.running && !o.sender.done() {
            let t = tsc::now();
            if o.sender.send(t, &mut o.pool, Some(published)) > 0 {
                o.busy_ticks += tsc::now() - t;
            }
            continue;
        }
        // Idle: storing it again costs nothing on the hot path.
        if o.sender.source.exhausted() {
            published.exhausted.store(true, Ordering::Release);
        }
        // What the out port still holds leaves now, not never.
        o.sender.out.flush();
        drop(owned);
        std::thread::sleep(IDLE_NAP);
        owned = lock(&shared.state);
    }
}
