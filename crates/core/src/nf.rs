//! The network-function contract.
//!
//! An NF is built from a typed config (all validation happens there) and then sees
//! batches. For every packet it returns a verdict: continue to the next NF (the
//! default, so an NF that passes everything writes nothing), leave the chain on an
//! output port, or drop with a named reason. The runtime moves packets, frees drops
//! and keeps the counters; an NF never touches rings, pools or I/O.

use crate::batch::{BatchView, MAX_BATCH};

/// Why a packet was dropped. Every drop in sfclab has one, counted where it happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum DropReason {
    /// Too short or inconsistent headers.
    Malformed = 1,
    /// Not the protocol this NF handles (e.g. a non-IP frame at a router).
    Unsupported,
    /// IPv4 TTL or IPv6 hop limit reached zero.
    TtlExpired,
    /// No route matched.
    NoRoute,
    /// Denied by a filter rule.
    Filtered,
    /// Over the configured rate.
    RateExceeded,
    /// A drop the experiment asked for (synthetic NF `drop_one_in`).
    Injected,
    /// An NF sent the packet to an output port the runtime does not have.
    NoSuchPort,
    /// A link (ring) between NFs was full.
    LinkFull,
    /// An egress port could not take the packet.
    TxFull,
    /// The chain's ingress queue (the NIC's RX queue) was full: dropped before the chain
    /// spent any cycle on it.
    RxQueueFull,
}

impl DropReason {
    /// Number of reasons; codes are 1..=COUNT.
    pub const COUNT: usize = 11;
    pub const ALL: [DropReason; DropReason::COUNT] = [
        DropReason::Malformed,
        DropReason::Unsupported,
        DropReason::TtlExpired,
        DropReason::NoRoute,
        DropReason::Filtered,
        DropReason::RateExceeded,
        DropReason::Injected,
        DropReason::NoSuchPort,
        DropReason::LinkFull,
        DropReason::TxFull,
        DropReason::RxQueueFull,
    ];

    /// Stable kebab-case name used in tables, JSON and CSV.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::Malformed => "malformed",
            DropReason::Unsupported => "unsupported",
            DropReason::TtlExpired => "ttl-expired",
            DropReason::NoRoute => "no-route",
            DropReason::Filtered => "filtered",
            DropReason::RateExceeded => "rate-exceeded",
            DropReason::Injected => "injected",
            DropReason::NoSuchPort => "no-such-port",
            DropReason::LinkFull => "link-full",
            DropReason::TxFull => "tx-full",
            DropReason::RxQueueFull => "rx-queue-full",
        }
    }

    #[inline(always)]
    fn index(self) -> usize {
        self as usize - 1
    }

    fn from_code(code: u8) -> DropReason {
        DropReason::ALL[usize::from(code) - 1]
    }
}

const _: () = assert!(DropReason::RxQueueFull as usize == DropReason::COUNT);

/// What happens to one packet after an NF.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// On to the next NF (or the chain's egress after the last one).
    Continue,
    /// Leave the chain now on output port `n`.
    Out(u8),
    /// Drop, counted under this reason at this NF.
    Drop(DropReason),
}

/// Code layout: 0 continue, 1..=127 a drop reason, 128 + n output port n.
const OUT_BASE: u8 = 128;

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
        self.set(i, reason as u8);
    }

    /// Sends packet `i` out on port `port`. Ports go up to `MAX_PORT`; a higher one is
    /// recorded as a `no-such-port` drop, as a port the runtime lacks is.
    #[inline(always)]
    pub fn out(&mut self, i: usize, port: u8) {
        let code = if port <= MAX_PORT {
            OUT_BASE | port
        } else {
            DropReason::NoSuchPort as u8
        };
        self.set(i, code);
    }

    #[inline(always)]
    fn set(&mut self, i: usize, code: u8) {
        let slot = &mut self.codes[..self.len][i];
        if *slot == 0 {
            self.exceptions += 1;
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

/// The highest output port a verdict can name.
pub const MAX_PORT: u8 = OUT_BASE - 1;

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
    /// The NF type, as written in chain files (`forwarder`, `synthetic`, ...).
    fn kind(&self) -> &'static str;

    /// Processes one batch: reads and rewrites packets in place and records a verdict for
    /// every packet that must not simply continue (`verdicts` is sized to the batch).
    /// Must not panic on any packet content.
    fn process(&mut self, batch: BatchView<'_>, verdicts: &mut Verdicts);

    /// Slow-path work (timers, table ageing), called every few thousand batches with the TSC.
    fn tick(&mut self, _now: u64) {}

    /// NF-specific counters (slow path): events as totals since the NF was built,
    /// levels (table sizes) as gauges. The runtime reports them over the window.
    fn counters(&self) -> Vec<NfCounter> {
        Vec::new()
    }
}

/// Counters kept by the runtime for each NF. Plain integers: one owner thread.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NfStats {
    pub packets_in: u64,
    /// Continued or sent out on a port.
    pub packets_out: u64,
    pub batches: u64,
    /// TSC cycles inside `process`, measured per batch (0 when accounting is off).
    pub cycles: u64,
    pub drops: [u64; DropReason::COUNT],
}

impl NfStats {
    #[inline(always)]
    pub fn count_drop(&mut self, reason: DropReason) {
        self.drops[reason.index()] += 1;
    }

    pub fn dropped(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// Non-zero drop counters by reason.
    pub fn drops_by_reason(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL
            .iter()
            .map(|&r| (r, self.drops[r.index()]))
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
            drops,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdict_codes_round_trip() {
        let mut v = Verdicts::for_batch(32);
        assert_eq!(v.get(0), Verdict::Continue);
        for (i, &r) in DropReason::ALL.iter().enumerate() {
            v.drop(i, r);
            assert_eq!(v.get(i), Verdict::Drop(r));
        }
        v.out(20, 0);
        v.out(21, MAX_PORT);
        assert_eq!(v.get(20), Verdict::Out(0));
        assert_eq!(v.get(21), Verdict::Out(127));
        assert_eq!(v.exceptions(), DropReason::COUNT + 2);
        // Overwriting a verdict does not count it twice.
        v.drop(20, DropReason::Filtered);
        assert_eq!(v.exceptions(), DropReason::COUNT + 2);
        v.clear();
        assert_eq!(v.exceptions(), 0);
        assert!((0..32).all(|i| v.get(i) == Verdict::Continue));
    }

    #[test]
    fn a_port_past_the_highest_is_a_counted_drop_not_another_port() {
        let mut v = Verdicts::for_batch(4);
        v.out(0, 128);
        v.out(1, 255);
        assert_eq!(v.get(0), Verdict::Drop(DropReason::NoSuchPort));
        assert_eq!(v.get(1), Verdict::Drop(DropReason::NoSuchPort));
    }

    #[test]
    #[should_panic]
    fn a_verdict_past_the_batch_panics() {
        let mut v = Verdicts::for_batch(4);
        v.drop(4, DropReason::Malformed);
    }

    #[test]
    fn clear_resets_every_code_of_the_batch() {
        let mut v = Verdicts::for_batch(MAX_BATCH);
        v.drop(MAX_BATCH - 1, DropReason::Injected);
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
    fn reason_names_are_unique() {
        let mut names: Vec<_> = DropReason::ALL.iter().map(|r| r.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), DropReason::COUNT);
    }
}
