//! The network-function contract, version 2.
//!
//! An NF is built from its config (all validation happens there) and then sees batches.
//! Each call gets a [`Context`] (the time, where it runs, an allocator, a way to emit
//! packets) and records a verdict for every packet that must not simply continue:
//! continue on its first output (the default, so an NF that passes everything writes
//! nothing), go to another of its named outputs, be held by the NF, or be dropped for a
//! reason. The runtime moves packets along the chain's wiring, frees drops and keeps the
//! counters; an NF never touches rings or I/O.
//!
//! Drop reasons are codes: the common ones are named here ([`DropReason::MALFORMED`],
//! ...), and an NF declares its own (`nat-table-full`, `ct-invalid`) in
//! [`NetworkFunction::drop_reasons`] and uses them as [`DropReason::own`]: no central
//! list to edit for a new NF.

use crate::batch::{Batch, BatchView, MAX_BATCH};
use crate::handle::PacketRef;
use crate::packet::{FLAG_CREATED, FLAG_WINDOW, PacketMeta};
use crate::pool::PacketPool;
use crate::recycle::Recycle;

/// Why a packet was dropped: a code from 1 to 127. Every drop in sfclab has one, counted
/// where it happened. Codes below [`DropReason::FIRST_OWN`] are the common reasons named
/// here; the others are the dropping NF's own, named by its `drop_reasons()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DropReason(u8);

impl DropReason {
    /// Too short or inconsistent headers.
    pub const MALFORMED: DropReason = DropReason(1);
    /// Not the protocol this NF handles (e.g. a non-IP frame at a router).
    pub const UNSUPPORTED: DropReason = DropReason(2);
    /// IPv4 TTL or IPv6 hop limit reached zero.
    pub const TTL_EXPIRED: DropReason = DropReason(3);
    /// No route matched.
    pub const NO_ROUTE: DropReason = DropReason(4);
    /// Denied by a filter rule.
    pub const FILTERED: DropReason = DropReason(5);
    /// Over the configured rate.
    pub const RATE_EXCEEDED: DropReason = DropReason(6);
    /// A drop the experiment asked for (synthetic NF `drop_one_in`).
    pub const INJECTED: DropReason = DropReason(7);
    /// An NF sent the packet to an output it does not have.
    pub const NO_SUCH_OUTPUT: DropReason = DropReason(8);
    /// A link (ring) between NFs was full.
    pub const LINK_FULL: DropReason = DropReason(9);
    /// An egress port could not take the packet.
    pub const TX_FULL: DropReason = DropReason(10);
    /// The chain's ingress queue (the NIC's RX queue) was full: dropped before the chain
    /// spent any cycle on it.
    pub const RX_QUEUE_FULL: DropReason = DropReason(11);
    /// The NF asked to hold a packet but keeps none.
    pub const CANNOT_HOLD: DropReason = DropReason(12);
    /// Held by the NF when the run ended (queues are flushed and counted, never lost).
    pub const HELD_AT_END: DropReason = DropReason(13);
    /// More packets went to one NF in one pass than its queue holds (a graph where many
    /// outputs meet), or an NF emitted more than a batch in one call.
    pub const QUEUE_FULL: DropReason = DropReason(14);

    const COMMON_NAMES: [&'static str; 14] = [
        "malformed",
        "unsupported",
        "ttl-expired",
        "no-route",
        "filtered",
        "rate-exceeded",
        "injected",
        "no-such-output",
        "link-full",
        "tx-full",
        "rx-queue-full",
        "cannot-hold",
        "held-at-end",
        "queue-full",
    ];

    /// The first code of an NF's own reasons.
    pub const FIRST_OWN: u8 = 32;
    /// How many reasons of its own an NF may declare.
    pub const MAX_OWN: usize = 128 - Self::FIRST_OWN as usize;

    /// The NF's own reason `name`, found in `reasons` (the list its `drop_reasons()`
    /// returns): the code is the name's place there, so the two cannot drift apart.
    /// Used in consts, a name missing from the list fails the build.
    pub const fn named(reasons: &[&str], name: &str) -> DropReason {
        assert!(
            reasons.len() <= Self::MAX_OWN,
            "an NF declares at most MAX_OWN drop reasons"
        );
        let mut k = 0;
        while k < reasons.len() {
            if same_str(reasons[k], name) {
                return DropReason::own(k);
            }
            k += 1;
        }
        panic!("a drop reason not in the NF's list")
    }

    /// The NF's own reason number `k` (an index into its `drop_reasons()`).
    const fn own(k: usize) -> DropReason {
        assert!(k < Self::MAX_OWN, "an NF declares at most MAX_OWN drop reasons");
        DropReason(Self::FIRST_OWN + k as u8)
    }

    /// Every common reason, in code order.
    pub fn common() -> impl Iterator<Item = DropReason> {
        (1..=Self::COMMON_NAMES.len() as u8).map(DropReason)
    }

    pub fn code(self) -> u8 {
        self.0
    }

    /// The stable kebab-case name used in tables, JSON and CSV: a common reason's own,
    /// or the dropping NF's name for its reason (`own` is its `drop_reasons()`).
    pub fn name(self, own: &[&'static str]) -> &'static str {
        match self.0 {
            c if c < Self::FIRST_OWN => Self::COMMON_NAMES.get(usize::from(c) - 1).copied().unwrap_or("unnamed"),
            c => own.get(usize::from(c - Self::FIRST_OWN)).copied().unwrap_or("unnamed"),
        }
    }

    fn from_code(code: u8) -> DropReason {
        debug_assert!((1..128).contains(&code));
        DropReason(code)
    }
}

/// `a == b` where a const fn needs it.
const fn same_str(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// What happens to one packet after an NF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// On along the NF's first output (to the next NF, or the chain's egress).
    Continue,
    /// Along the NF's output `n` (an index into its `outputs()`; 0 is `Continue`).
    Out(u8),
    /// Kept by the NF (`NetworkFunction::hold`), emitted later or flushed at the end.
    Hold,
    /// Drop, counted under this reason at this NF.
    Drop(DropReason),
}

/// Code layout: 0 continue, 1..=127 a drop reason, 128 + n output n, 255 hold.
const OUT_BASE: u8 = 128;
const HOLD: u8 = 255;

/// The highest output a verdict can name.
pub const MAX_OUTPUT: u8 = HOLD - OUT_BASE - 1;

/// The verdicts of one batch. All start as `Continue`; an NF writes only exceptions,
/// so a pass-everything NF costs nothing here and the runtime skips the sorting step
/// whenever `exceptions() == 0`.
///
/// The runtime sizes it to the batch (`begin`) before each NF: a verdict for a packet
/// past the batch's end panics, as slice indexing does, so no stale code can outlive
/// `clear`.
pub struct Verdicts {
    codes: [u8; MAX_BATCH],
    /// Packets in the batch being judged; codes at and past it are always 0.
    len: usize,
    exceptions: usize,
}

impl Default for Verdicts {
    fn default() -> Self {
        Verdicts {
            codes: [0; MAX_BATCH],
            len: 0,
            exceptions: 0,
        }
    }
}

impl Verdicts {
    /// All-`Continue` verdicts for a batch of `len` packets.
    pub fn for_batch(len: usize) -> Verdicts {
        let mut v = Verdicts::default();
        v.begin(len);
        v
    }

    /// Prepares for a batch of `len` packets (at most `MAX_BATCH`). Every code is
    /// `Continue` here: `clear` reset them after the previous batch.
    #[inline(always)]
    pub fn begin(&mut self, len: usize) {
        assert!(len <= MAX_BATCH, "batch larger than MAX_BATCH");
        debug_assert_eq!(self.exceptions, 0, "verdicts not cleared");
        self.len = len;
    }

    /// The batch size this set of verdicts is for.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Drops packet `i` of the batch with `reason`.
    #[inline(always)]
    pub fn drop(&mut self, i: usize, reason: DropReason) {
        self.set(i, reason.0);
    }

    /// Sends packet `i` along output `output` of the NF. Outputs go up to `MAX_OUTPUT`;
    /// a higher one is recorded as a `no-such-output` drop.
    #[inline(always)]
    pub fn out(&mut self, i: usize, output: u8) {
        let code = match output {
            0 => 0,
            o if o <= MAX_OUTPUT => OUT_BASE | o,
            _ => DropReason::NO_SUCH_OUTPUT.0,
        };
        self.set(i, code);
    }

    /// Hands packet `i` to the NF to keep (`NetworkFunction::hold`).
    #[inline(always)]
    pub fn hold(&mut self, i: usize) {
        self.set(i, HOLD);
    }

    #[inline(always)]
    fn set(&mut self, i: usize, code: u8) {
        let slot = &mut self.codes[..self.len][i];
        match (*slot == 0, code == 0) {
            (true, false) => self.exceptions += 1,
            (false, true) => self.exceptions -= 1,
            _ => {}
        }
        *slot = code;
    }

    /// How many packets got a verdict other than `Continue`.
    #[inline(always)]
    pub fn exceptions(&self) -> usize {
        self.exceptions
    }

    /// The verdict of packet `i`; panics when `i >= len()`.
    #[inline(always)]
    pub fn get(&self, i: usize) -> Verdict {
        match self.codes[..self.len][i] {
            0 => Verdict::Continue,
            HOLD => Verdict::Hold,
            c if c >= OUT_BASE => Verdict::Out(c - OUT_BASE),
            c => Verdict::Drop(DropReason::from_code(c)),
        }
    }

    /// Back to all-`Continue`.
    #[inline(always)]
    pub fn clear(&mut self) {
        if self.exceptions != 0 {
            self.codes[..self.len].fill(0);
            self.exceptions = 0;
        }
    }
}

/// Where an NF gets buffers for packets it creates, and where they go back: the pool
/// itself on the pool's thread, a per-stage supply elsewhere.
pub trait Buffers: Recycle {
    fn alloc(&mut self) -> Option<PacketRef>;
}

impl Buffers for PacketPool {
    #[inline]
    fn alloc(&mut self) -> Option<PacketRef> {
        PacketPool::alloc(self)
    }
}

/// A thread that frees into a return link owns no pool: it has no buffers to give.
impl Buffers for crate::recycle::ReturnLink {
    fn alloc(&mut self) -> Option<PacketRef> {
        None
    }
}

/// Packets an NF emitted during one call (created, or held ones released), each with
/// the output it goes to. The runtime sends them on after the call.
pub struct Emitted {
    packets: Batch,
    outputs: [u8; MAX_BATCH],
    /// Packets created through `Context::alloc` since the last `take_counts`.
    created: u64,
    /// Emitted packets that did not fit (freed) since the last `take_counts`.
    overflow: u64,
    /// Held packets the NF dropped (`Context::drop`) since the last `take_counts`, by
    /// reason code, and which codes are in use (bit k: code k).
    drops: [u64; 128],
    drop_codes: u128,
    /// Allocations, emits and drops since the last `take_counts`: zero on the hot path.
    events: u64,
}

impl Default for Emitted {
    fn default() -> Self {
        Emitted {
            packets: Batch::new(MAX_BATCH),
            outputs: [0; MAX_BATCH],
            created: 0,
            overflow: 0,
            drops: [0; 128],
            drop_codes: 0,
            events: 0,
        }
    }
}

impl Emitted {
    /// Whether the last call emitted, created or lost anything: one test on the hot path.
    #[inline(always)]
    pub fn is_quiet(&self) -> bool {
        self.events == 0
    }

    /// Packets created and emitted packets lost since the last call, and resets both.
    /// Held packets the NF dropped are taken apart ([`Emitted::take_drops`]), before
    /// this resets the quiet test.
    pub fn take_counts(&mut self) -> (u64, u64) {
        let counts = (self.created, self.overflow);
        self.created = 0;
        self.overflow = 0;
        self.events = 0;
        counts
    }

    /// Held packets the NF dropped since the last call, each reason with its count.
    pub fn take_drops(&mut self, mut count: impl FnMut(DropReason, u64)) {
        while self.drop_codes != 0 {
            let code = self.drop_codes.trailing_zeros() as usize;
            self.drop_codes &= self.drop_codes - 1;
            count(DropReason::from_code(code as u8), std::mem::take(&mut self.drops[code]));
        }
    }

    /// Takes every emitted packet, in order, with its output.
    pub fn drain(&mut self) -> impl Iterator<Item = (PacketRef, u8)> + '_ {
        let outputs = self.outputs;
        self.packets.drain().zip(outputs)
    }
}

/// What an NF sees besides the batch: the time, where it runs, and the means to create
/// and emit packets. Read-only but for `alloc` and `emit`: what the runtime counts
/// (created, lost) and the buffers it frees into stay behind [`ChainContext`], which
/// NFs never get.
pub struct Context<'a> {
    /// TSC when the batch was taken (read once per batch).
    now: u64,
    /// TSC when the run began, and nanoseconds per tick: for `now_ns`.
    start: u64,
    ns_per_tick: f64,
    core: Option<usize>,
    replica: usize,
    in_port: u16,
    buffers: &'a mut dyn Buffers,
    emitted: &'a mut Emitted,
}

impl<'a> Context<'a> {
    /// TSC when the batch was taken: one reading for every NF of the pass.
    #[inline(always)]
    pub fn now(&self) -> u64 {
        self.now
    }

    /// `now` in nanoseconds since the run began: for timeouts and token buckets in
    /// wall-clock units (computed when asked: most NFs never need it).
    #[inline]
    pub fn now_ns(&self) -> u64 {
        (self.now.saturating_sub(self.start) as f64 * self.ns_per_tick) as u64
    }

    /// The core the NF runs on, if pinned.
    pub fn core(&self) -> Option<usize> {
        self.core
    }

    /// Which copy of the chain this is (parallel chains), from 0.
    pub fn replica(&self) -> usize {
        self.replica
    }

    /// The port the batch entered the chain on.
    pub fn in_port(&self) -> u16 {
        self.in_port
    }

    /// A fresh buffer for a packet the NF creates (an ICMP error, a reply), or `None`
    /// when none is free: the NF then counts what it could not create. The frame is
    /// empty (`Packet::reset` sizes it) and marked `FLAG_CREATED`.
    pub fn alloc(&mut self) -> Option<PacketRef> {
        let mut p = self.buffers.alloc()?;
        p.meta = PacketMeta::fresh(0, self.in_port, FLAG_CREATED);
        self.emitted.created += 1;
        self.emitted.events += 1;
        Some(p)
    }

    /// The packets emitted during this call so far, each with its output: for wrappers
    /// that observe what leaves an NF (a capture tap).
    pub fn emitted_packets(&self) -> impl Iterator<Item = (&crate::packet::Packet, u8)> + '_ {
        self.emitted.packets.iter().zip(self.emitted.outputs.iter().copied())
    }

    /// Drops a packet the NF held (a queue that overflowed at its head, a packet that
    /// waited too long), counted at this NF under `reason`: the way a held packet ends
    /// other than `emit`.
    pub fn drop(&mut self, packet: PacketRef, reason: DropReason) {
        let code = usize::from(reason.code());
        self.emitted.drops[code] += 1;
        self.emitted.drop_codes |= 1 << code;
        self.emitted.events += 1;
        self.buffers.recycle(packet);
    }

    /// Sends `packet` (created here, or held before) along the NF's `output`. More than
    /// a batch in one call is a `queue-full` drop at this NF.
    pub fn emit(&mut self, mut packet: PacketRef, output: u8) {
        self.emitted.events += 1;
        if packet.meta.flags & FLAG_CREATED != 0 {
            packet.meta.flags &= !FLAG_WINDOW;
        }
        let at = self.emitted.packets.len();
        match self.emitted.packets.push(packet) {
            Ok(()) => self.emitted.outputs[at] = output,
            Err(p) => {
                self.emitted.overflow += 1;
                self.buffers.recycle(p);
            }
        }
    }
}

/// A runtime's side of the context it lends its NFs for one pass of a chain: it sets
/// the time and place, and between NF calls reaches the buffers (to free what NFs
/// dropped) and what they emitted. An NF only ever gets the [`Context`] inside.
pub struct ChainContext<'a> {
    ctx: Context<'a>,
}

impl<'a> ChainContext<'a> {
    /// A pass at TSC `now` of a run that began at TSC `start`, with the clock at
    /// `ns_per_tick` nanoseconds per tick; not pinned, replica 0, port 0.
    pub fn new(
        now: u64,
        start: u64,
        ns_per_tick: f64,
        buffers: &'a mut dyn Buffers,
        emitted: &'a mut Emitted,
    ) -> ChainContext<'a> {
        ChainContext {
            ctx: Context {
                now,
                start,
                ns_per_tick,
                core: None,
                replica: 0,
                in_port: 0,
                buffers,
                emitted,
            },
        }
    }

    /// Where the pass runs: the core (if pinned), the chain's copy and the port its
    /// batch entered on.
    pub fn at(mut self, core: Option<usize>, replica: usize, in_port: u16) -> ChainContext<'a> {
        (self.ctx.core, self.ctx.replica, self.ctx.in_port) = (core, replica, in_port);
        self
    }

    /// The context to hand an NF's `process`.
    #[inline(always)]
    pub fn nf(&mut self) -> &mut Context<'a> {
        &mut self.ctx
    }

    /// Whether the NF emitted, created or lost anything since the last `parts` (one
    /// test per NF call).
    #[inline(always)]
    pub fn is_quiet(&self) -> bool {
        self.ctx.emitted.is_quiet()
    }

    /// Between NF calls: the buffers behind this context (to free what NFs dropped)
    /// and what they emitted.
    pub fn parts(&mut self) -> (&mut dyn Buffers, &mut Emitted) {
        (&mut *self.ctx.buffers, &mut *self.ctx.emitted)
    }
}

/// Whether an NF counter counts events (reported as its growth over the window, like
/// every other figure) or states a level (a table's size: reported as it is at the end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CounterKind {
    Total,
    Gauge,
}

/// One NF-specific counter, read on the slow path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NfCounter {
    pub name: &'static str,
    pub value: u64,
    pub kind: CounterKind,
}

impl NfCounter {
    /// A count of events since the NF was built.
    pub fn total(name: &'static str, value: u64) -> NfCounter {
        NfCounter {
            name,
            value,
            kind: CounterKind::Total,
        }
    }

    /// A level (a size, an occupancy) now.
    pub fn gauge(name: &'static str, value: u64) -> NfCounter {
        NfCounter {
            name,
            value,
            kind: CounterKind::Gauge,
        }
    }

    /// The counters over a window that began at `start` and ended at `end` (both read
    /// from the same NF): totals as their growth, gauges as they are at the end.
    pub fn window(start: &[NfCounter], end: &[NfCounter]) -> Vec<(&'static str, u64)> {
        end.iter()
            .map(|e| match e.kind {
                CounterKind::Gauge => (e.name, e.value),
                CounterKind::Total => {
                    let before = start.iter().find(|s| s.name == e.name).map_or(0, |s| s.value);
                    (e.name, e.value.saturating_sub(before))
                }
            })
            .collect()
    }
}

/// A chain's NFs in order, each with its name: what the runtimes take.
pub type NamedNfs = Vec<(String, Box<dyn NetworkFunction>)>;

/// A network function. See the module docs for the contract.
pub trait NetworkFunction: Send {
    /// The NF type, as written in chain files (`forwarder`, `router`, ...).
    fn kind(&self) -> &'static str;

    /// Processes one batch: reads and rewrites packets in place and records a verdict for
    /// every packet that must not simply continue (`verdicts` is sized to the batch).
    /// Must not panic on any packet content.
    fn process(&mut self, ctx: &mut Context<'_>, batch: BatchView<'_>, verdicts: &mut Verdicts);

    /// The NF's outputs, by name; a verdict `Out(k)` sends a packet along the k-th, and
    /// `Continue` along the first. A chain file wires them (`router.port1 -> fw`).
    fn outputs(&self) -> Vec<String> {
        vec!["out".into()]
    }

    /// Whether the NF creates packets (`Context::alloc`): runtimes that run it away from
    /// the pool's thread then keep a supply of buffers at hand for it.
    fn creates_packets(&self) -> bool {
        false
    }

    /// Whether the NF may hold packets (`Verdicts::hold`) and send them later: a
    /// wrapper that re-frames what its inner NF passes (`nsh-proxy`) cannot take it.
    fn holds_packets(&self) -> bool {
        false
    }

    /// Names of the NF's own drop reasons: a const list, from which each reason is
    /// taken by name with `DropReason::named`.
    fn drop_reasons(&self) -> &'static [&'static str] {
        &[]
    }

    /// Takes packet `packet` the NF asked to hold (`Verdicts::hold`). An NF that keeps
    /// none gives it back, and the runtime counts a `cannot-hold` drop. Called after
    /// `process` returns, once per held packet, in batch order. A held packet leaves
    /// by `Context::emit` or `Context::drop` in a later call: runtimes call `process`
    /// with an empty batch when no packets come while an NF holds some (`held() > 0`),
    /// so a shaper's queue drains on time.
    fn hold(&mut self, packet: PacketRef) -> Result<(), PacketRef> {
        Err(packet)
    }

    /// Packets the NF holds now.
    fn held(&self) -> usize {
        0
    }

    /// Gives back every held packet (the run ended): each is counted as `held-at-end`.
    fn release_held(&mut self, _give_back: &mut dyn FnMut(PacketRef)) {}

    /// Slow-path work (timers, table ageing), called every few thousand batches with the TSC.
    fn tick(&mut self, _now: u64) {}

    /// NF-specific counters (slow path): events as totals since the NF was built,
    /// levels (table sizes) as gauges. The runtime reports them over the window.
    fn counters(&self) -> Vec<NfCounter> {
        Vec::new()
    }
}

/// Counters kept by the runtime for each NF. Plain integers: one owner thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NfStats {
    pub packets_in: u64,
    /// Continued or sent out on a port.
    pub packets_out: u64,
    pub batches: u64,
    /// TSC cycles inside `process`, measured per batch (0 when accounting is off).
    pub cycles: u64,
    /// Packets the NF created (`Context::alloc`).
    pub created: u64,
    /// Drops by reason code (index 0 unused).
    pub drops: [u64; 128],
}

impl Default for NfStats {
    fn default() -> Self {
        NfStats {
            packets_in: 0,
            packets_out: 0,
            batches: 0,
            cycles: 0,
            created: 0,
            drops: [0; 128],
        }
    }
}

impl NfStats {
    #[inline(always)]
    pub fn count_drop(&mut self, reason: DropReason) {
        self.drops[usize::from(reason.0)] += 1;
    }

    pub fn count_drops(&mut self, reason: DropReason, n: u64) {
        self.drops[usize::from(reason.0)] += n;
    }

    pub fn dropped(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// Non-zero drop counters by reason.
    pub fn drops_by_reason(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        (1..128u8)
            .map(|c| (DropReason(c), self.drops[usize::from(c)]))
            .filter(|&(_, n)| n > 0)
    }

    /// Counters accumulated since `earlier` (a snapshot of the same NF).
    pub fn since(&self, earlier: &NfStats) -> NfStats {
        let mut drops = self.drops;
        for (d, e) in drops.iter_mut().zip(earlier.drops) {
            *d -= e;
        }
        NfStats {
            packets_in: self.packets_in - earlier.packets_in,
            packets_out: self.packets_out - earlier.packets_out,
            batches: self.batches - earlier.batches,
            cycles: self.cycles - earlier.cycles,
            created: self.created - earlier.created,
            drops,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_codes_round_trip() {
        let mut v = Verdicts::for_batch(64);
        assert_eq!(v.get(0), Verdict::Continue);
        let reasons: Vec<DropReason> = DropReason::common()
            .chain([DropReason::own(0), DropReason::own(95)])
            .collect();
        for (i, &r) in reasons.iter().enumerate() {
            v.drop(i, r);
            assert_eq!(v.get(i), Verdict::Drop(r));
        }
        let n = reasons.len();
        v.out(n, 1);
        v.out(n + 1, MAX_OUTPUT);
        v.hold(n + 2);
        assert_eq!(v.get(n), Verdict::Out(1));
        assert_eq!(v.get(n + 1), Verdict::Out(MAX_OUTPUT));
        assert_eq!(v.get(n + 2), Verdict::Hold);
        assert_eq!(v.exceptions(), n + 3);
        // Overwriting a verdict does not count it twice; output 0 is `Continue` again.
        v.drop(n, DropReason::FILTERED);
        assert_eq!(v.exceptions(), n + 3);
        v.out(n, 0);
        assert_eq!((v.get(n), v.exceptions()), (Verdict::Continue, n + 2));
        v.clear();
        assert_eq!(v.exceptions(), 0);
        assert!((0..64).all(|i| v.get(i) == Verdict::Continue));
    }

    #[test]
    fn an_output_past_the_highest_is_a_counted_drop_not_another_output() {
        let mut v = Verdicts::for_batch(4);
        v.out(0, MAX_OUTPUT + 1);
        v.out(1, 255);
        assert_eq!(v.get(0), Verdict::Drop(DropReason::NO_SUCH_OUTPUT));
        assert_eq!(v.get(1), Verdict::Drop(DropReason::NO_SUCH_OUTPUT));
    }

    #[test]
    #[should_panic]
    fn a_verdict_past_the_batch_panics() {
        let mut v = Verdicts::for_batch(4);
        v.drop(4, DropReason::MALFORMED);
    }

    #[test]
    fn clear_resets_every_code_of_the_batch() {
        let mut v = Verdicts::for_batch(MAX_BATCH);
        v.drop(MAX_BATCH - 1, DropReason::INJECTED);
        v.clear();
        v.begin(MAX_BATCH);
        assert_eq!(v.get(MAX_BATCH - 1), Verdict::Continue);
    }

    #[test]
    fn counters_are_windowed_by_kind() {
        let start = [NfCounter::total("hits", 100), NfCounter::gauge("entries", 7)];
        let end = [
            NfCounter::total("hits", 250),
            NfCounter::gauge("entries", 5),
            NfCounter::total("new", 3),
        ];
        assert_eq!(
            NfCounter::window(&start, &end),
            vec![("hits", 150), ("entries", 5), ("new", 3)]
        );
    }

    #[test]
    fn reasons_are_named_by_the_common_list_or_the_nf() {
        let mut names: Vec<_> = DropReason::common().map(|r| r.name(&[])).collect();
        assert!(!names.contains(&"unnamed"));
        names.sort();
        names.dedup();
        assert_eq!(names.len(), DropReason::common().count(), "common names are unique");
        let own = ["nat-table-full", "ct-invalid"];
        assert_eq!(DropReason::own(1).name(&own), "ct-invalid");
        // Taken by name, a reason's code is its place in the list it is named by.
        for name in own {
            assert_eq!(DropReason::named(&own, name).name(&own), name);
        }
        assert_eq!(DropReason::own(2).name(&own), "unnamed");
        assert!(DropReason::common().all(|r| r.code() < DropReason::FIRST_OWN));
    }

    #[test]
    fn emitted_packets_keep_their_outputs_and_overflow_is_freed() {
        let mut pool = PacketPool::new(MAX_BATCH + 2);
        let mut emitted = Emitted::default();
        let mut ctx = ChainContext::new(0, 0, 1.0, &mut pool, &mut emitted);
        for k in 0..MAX_BATCH + 2 {
            let p = ctx.nf().alloc().unwrap();
            ctx.nf().emit(p, (k % 3) as u8);
        }
        assert!(!emitted.is_quiet());
        assert_eq!(emitted.take_counts(), ((MAX_BATCH + 2) as u64, 2));
        let outputs: Vec<u8> = emitted
            .drain()
            .map(|(p, o)| {
                pool.free(p);
                o
            })
            .collect();
        assert_eq!(outputs.len(), MAX_BATCH);
        assert_eq!(&outputs[..4], &[0, 1, 2, 0]);
        assert_eq!(pool.in_use(), 0, "every created buffer is back");
    }

    #[test]
    fn held_packets_dropped_by_the_nf_are_freed_and_counted_by_reason() {
        let mut pool = PacketPool::new(4);
        let held: Vec<_> = (0..3).map(|_| pool.alloc().unwrap()).collect();
        let mut emitted = Emitted::default();
        let mut ctx = ChainContext::new(0, 0, 1.0, &mut pool, &mut emitted);
        let own = DropReason::named(&["queue-overflow"], "queue-overflow");
        for (k, p) in held.into_iter().enumerate() {
            ctx.nf().drop(p, if k == 0 { DropReason::HELD_AT_END } else { own });
        }
        assert!(!emitted.is_quiet());
        let mut counted = Vec::new();
        emitted.take_drops(|r, n| counted.push((r, n)));
        assert_eq!(counted, vec![(DropReason::HELD_AT_END, 1), (own, 2)]);
        emitted.take_drops(|r, n| panic!("taken twice: {r:?} {n}"));
        assert_eq!(emitted.take_counts(), (0, 0));
        assert!(emitted.is_quiet());
        assert_eq!(pool.in_use(), 0);
    }
}
