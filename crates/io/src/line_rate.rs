//! An emulated wire of a stated line rate shared by several senders: the port of a NIC
//! that every chain's traffic crosses (seed 001's 10GbE ports, shared by every virtual
//! function behind them). Frames beyond what the line carries are refused at the sender,
//! as a NIC whose transmit queue is full refuses them: a tester counts them as not
//! offered (`line-rate`, `shared-capacity`), never as the device's loss.
//!
//! The line is a token bucket of bits at layer 1 (each frame with its FCS, preamble and
//! inter-frame gap, as `10Gbit/s` counts everywhere in sfclab), refilled from the TSC
//! and shared fairly, as a NIC's arbiter serves its queues in turn: the bits that
//! accrue are dealt out equally to every sender's credit (each holds at most its share
//! of 200 us of the line, and two full-size frames), and what a sender leaves unused
//! beyond that goes to a common spare any sender may draw on, so the line stays fully
//! used when some send less. The bucket sits behind a mutex taken once per batch.
//!
//! A frame goes while its sender has credit left, whatever its size, and what it costs
//! beyond the credit is owed: the next frames wait until the refills have paid it. So
//! the line refuses frames as a full transmit queue does, the next ones in turn, and
//! carries a mix of sizes as it was offered. (A bucket that refused only the frames it
//! could not afford would let the small frames of a mix through and refuse the large
//! ones: over-offered IMIX at 200 Mbit/s, 116 kpps passed where the mix's 65 fit.)

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use sfclab_core::port::{PortInfo, PortStats};
use sfclab_core::{Batch, NfCounter, PacketPool, Recycle, TxPort, tsc};

/// Bytes a frame costs on the wire beyond its buffer: FCS, preamble and gap.
const WIRE_OVERHEAD: u64 = 4 + 20;

/// A frame's bits on the wire, from its buffer's length in bytes.
fn wire_bits(len: usize) -> u64 {
    (len as u64 + WIRE_OVERHEAD) * 8
}

/// A full-size Ethernet frame's bits on the wire (1,518 bytes, preamble and gap).
const MAX_FRAME_BITS: f64 = (1518.0 + 20.0) * 8.0;

/// One line: its rate and the bits each sender may put on it now.
pub struct Line {
    bits_per_second: f64,
    bucket: Mutex<Bucket>,
}

struct Bucket {
    /// Per sender, the bits it may send now.
    credit: Vec<f64>,
    /// What senders left beyond their credit's cap: anyone's.
    spare: f64,
    /// A sender's credit at most.
    cap: f64,
    /// The spare at most: 200 us of the line.
    depth: f64,
    /// TSC of the last refill (0: never).
    last: u64,
}

impl Line {
    /// A line of `bits_per_second` at layer 1.
    pub fn new(bits_per_second: f64) -> Arc<Line> {
        let depth = (bits_per_second * 200e-6).max(2.0 * MAX_FRAME_BITS);
        Arc::new(Line {
            bits_per_second,
            bucket: Mutex::new(Bucket {
                credit: Vec::new(),
                spare: 0.0,
                cap: depth,
                depth,
                last: 0,
            }),
        })
    }

    pub fn bits_per_second(&self) -> f64 {
        self.bits_per_second
    }

    /// A new sender's number; every sender's cap is its share of the depth.
    fn join(&self) -> usize {
        let mut b = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
        b.credit.push(0.0);
        let n = b.credit.len() as f64;
        b.cap = (b.depth / n).max(2.0 * MAX_FRAME_BITS);
        let cap = b.cap;
        b.credit.iter_mut().for_each(|c| *c = cap);
        b.credit.len() - 1
    }

    /// How many of the frames of `lens` (bytes, in order) the line carries for `sender`
    /// at TSC `now`.
    fn take(&self, sender: usize, now: u64, lens: impl Iterator<Item = usize>) -> usize {
        let mut guard = self.bucket.lock().unwrap_or_else(|e| e.into_inner());
        let b = &mut *guard;
        if b.last != 0 && now > b.last {
            let each = (now - b.last) as f64 / tsc::hz() * self.bits_per_second / b.credit.len() as f64;
            let cap = b.cap;
            let mut over = 0.0;
            for c in &mut b.credit {
                *c += each;
                if *c > cap {
                    over += *c - cap;
                    *c = cap;
                }
            }
            b.spare = (b.spare + over).min(b.depth);
        }
        b.last = now;
        let mut n = 0;
        for len in lens {
            if b.credit[sender] <= 0.0 && b.spare <= 0.0 {
                break;
            }
            // Paid from its credit, then the spare; what they lack is owed (the credit
            // goes below zero, and the refills pay it back first).
            let bits = wire_bits(len) as f64;
            let from_spare = b.spare.clamp(0.0, bits - b.credit[sender].clamp(0.0, bits));
            b.spare -= from_spare;
            b.credit[sender] -= bits - from_spare;
            n += 1;
        }
        n
    }
}

/// A capacity shared by the senders of several processes (seed 001's NIC, whose
/// virtual functions every VNF process sends through): a token bucket of layer-1 bits in
/// a small file every process maps, drawn on with atomics once per batch. Shared as
/// a NIC's transmit arbiter serves its backlogged queues in turn (max-min fair): the
/// bits that accrue are dealt out equally to every sender whose credit is below its
/// cap, and what passes a cap is dealt again among those still below theirs. An idle
/// sender's credit is full, so its share goes to the busy ones, evenly however each
/// sends; a VNF that works through more frames does not take the capacity from the VNF
/// after it in its chain (seed 001: PVVP chains carry half of what PVP chains do, not
/// less). The cap is the stated depth: each sender's queue, which the NIC serves while
/// the sender sleeps (senders that share cores send in bursts after each wake-up, some
/// milliseconds apart, which a shallow queue would refuse though their share is met
/// on average).
pub struct SharedLine {
    map: memmap2::MmapRaw,
    /// The file, for the report.
    path: std::path::PathBuf,
    bits_per_second: f64,
    /// Units of [`UNITS_PER_BIT`] that accrue per TSC tick (the creator's TSC rate: one
    /// clock for every process).
    units_per_tick: f64,
    depth: i64,
    /// TSC ticks between refills at least: a refill touches every sender's credit.
    refill_ticks: u64,
    /// This sender's credit slot.
    sender: usize,
    /// This sender has marked its slot as sending (once: not a shared word per batch).
    marked_sent: std::cell::Cell<bool>,
}

impl std::fmt::Debug for SharedLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedLine")
            .field("path", &self.path)
            .field("bits_per_second", &self.bits_per_second)
            .field("depth_bits", &(self.depth / UNITS_PER_BIT))
            .field("sender", &self.sender)
            .finish()
    }
}

/// The shared file: what the creator writes once, then what the senders update.
const SHARED_MAGIC: u64 = u64::from_le_bytes(*b"sfclbus4");
const AT_MAGIC: usize = 0;
const AT_BITS_PER_SECOND: usize = 8;
const AT_UNITS_PER_TICK: usize = 16;
const AT_DEPTH: usize = 24;
const AT_LAST: usize = 32;
/// What a refill could not deal out evenly (under one unit a sender), for the next.
const AT_UNDEALT: usize = 40;
const AT_SENDERS: usize = 48;
const AT_CREDIT: usize = 64;
/// Senders one capacity serves at most (a VNF process each).
pub const MAX_SHARED_SENDERS: usize = 1024;
/// Per sender, whether it has sent anything yet (1) or not (0).
const AT_SENT: usize = AT_CREDIT + 8 * MAX_SHARED_SENDERS;
const SHARED_LEN: usize = AT_SENT + 8 * MAX_SHARED_SENDERS;
/// Credits count 1/256 bit: an accrual split between senders loses no bits to rounding.
const UNITS_PER_BIT: i64 = 256;
/// Rounds of dealing in one refill: the first fills the busy senders and finds the
/// idle ones full, the second deals what those left; more only where a sender's
/// credit reaches its cap on the way.
const DEAL_ROUNDS: usize = 4;
/// A new sender's credit (units): two full-size frames.
const FIRST_CREDIT: i64 = 2 * MAX_FRAME_BITS as i64 * UNITS_PER_BIT;
/// Refills come at most this often, seconds (a sixteenth of the depth where that is
/// shorter): each touches every sender's credit.
const REFILL_EVERY_S: f64 = 50e-6;

impl SharedLine {
    /// Writes a new shared line of `bits_per_second` at layer 1, `depth` deep, to a file
    /// at `path` (made whole beside it, then renamed: an opener never sees it half
    /// written). Senders join it with [`SharedLine::open`].
    pub fn create(path: &std::path::Path, bits_per_second: f64, depth: std::time::Duration) -> std::io::Result<()> {
        if !(bits_per_second.is_finite() && bits_per_second > 0.0) {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("a line rate of {bits_per_second} bits per second"),
            ));
        }
        let depth_bits = (bits_per_second * depth.as_secs_f64()).max(2.0 * MAX_FRAME_BITS);
        let mut bytes = vec![0u8; SHARED_LEN];
        let mut put = |at: usize, v: u64| bytes[at..at + 8].copy_from_slice(&v.to_le_bytes());
        put(AT_MAGIC, SHARED_MAGIC);
        put(AT_BITS_PER_SECOND, bits_per_second.to_bits());
        put(
            AT_UNITS_PER_TICK,
            (bits_per_second * UNITS_PER_BIT as f64 / tsc::hz()).to_bits(),
        );
        put(AT_DEPTH, (depth_bits as i64 * UNITS_PER_BIT) as u64);
        let part = path.with_extension("part");
        std::fs::write(&part, bytes)?;
        std::fs::rename(&part, path)
    }

    /// Joins the shared line in the file at `path` (made by [`SharedLine::create`]) as
    /// a sender of its own.
    pub fn open(path: &std::path::Path) -> std::io::Result<SharedLine> {
        let bad =
            |why: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {why}", path.display()));
        let file = std::fs::OpenOptions::new().read(true).write(true).open(path)?;
        if file.metadata()?.len() < SHARED_LEN as u64 {
            return Err(bad("too short for a shared line"));
        }
        let map = memmap2::MmapOptions::new().len(SHARED_LEN).map_raw(&file)?;
        let mut line = SharedLine {
            map,
            path: path.to_path_buf(),
            bits_per_second: 0.0,
            units_per_tick: 0.0,
            depth: 0,
            refill_ticks: 0,
            sender: 0,
            marked_sent: std::cell::Cell::new(false),
        };
        let word = |at| line.word(at).load(Ordering::Acquire);
        if word(AT_MAGIC) != SHARED_MAGIC {
            return Err(bad("not a shared line"));
        }
        let (bps, per_tick, depth) = (
            f64::from_bits(word(AT_BITS_PER_SECOND)),
            f64::from_bits(word(AT_UNITS_PER_TICK)),
            word(AT_DEPTH) as i64,
        );
        if !(bps > 0.0 && per_tick > 0.0 && depth > 0) {
            return Err(bad("its rate or depth is not positive"));
        }
        (line.bits_per_second, line.units_per_tick, line.depth) = (bps, per_tick, depth);
        let hz = bps * UNITS_PER_BIT as f64 / per_tick;
        line.refill_ticks = (REFILL_EVERY_S * hz).min(depth as f64 / per_tick / 16.0) as u64;
        line.sender = line.join().map_err(|why| bad(&why))?;
        Ok(line)
    }

    /// A new sender's slot, with credit for two full-size frames: the refills deal it
    /// the rest. Credit given at once is sent at once: forty senders each given the
    /// whole depth (10 ms of the capacity) carried 0.52 Gbit/s of a 0.4 Gbit/s capacity
    /// over a one-second window, each a little above its share and spending it slowly.
    /// A sender is dealt credit once it has sent (see `refill`).
    fn join(&self) -> Result<usize, String> {
        let senders = self.word(AT_SENDERS);
        let me = senders.fetch_add(1, Ordering::AcqRel) as usize;
        if me >= MAX_SHARED_SENDERS {
            senders.fetch_sub(1, Ordering::AcqRel);
            return Err(format!("more than {MAX_SHARED_SENDERS} senders share it"));
        }
        self.credit(me).store(FIRST_CREDIT as u64, Ordering::Release);
        Ok(me)
    }

    /// The 8-byte word at `at` of the mapping, as an atomic.
    fn word(&self, at: usize) -> &AtomicU64 {
        assert!(
            at.is_multiple_of(8) && at + 8 <= SHARED_LEN,
            "word {at} of a shared line"
        );
        // SAFETY: the mapping is SHARED_LEN bytes long (the file's length was checked
        // before mapping; sfclab never shortens it) and page-aligned, and `at` is a
        // multiple of 8 with 8 bytes after it inside (asserted above), so this is an
        // aligned, in-bounds u64 for as long as `self` keeps the mapping; other threads
        // and processes touch these words only through atomics.
        unsafe { &*self.map.as_mut_ptr().add(at).cast::<AtomicU64>() }
    }

    /// Sender `i`'s credit, in units (a signed count stored as its bits).
    fn credit(&self, i: usize) -> &AtomicU64 {
        self.word(AT_CREDIT + 8 * i)
    }

    /// Whether sender `i` has sent anything yet (nonzero).
    fn has_sent(&self, i: usize) -> &AtomicU64 {
        self.word(AT_SENT + 8 * i)
    }

    /// Deals out what accrued since the last refill (once: to whoever moves `last` on),
    /// in rounds: equally to every sender below its cap (the depth), what passes a cap
    /// to those still below theirs. What is left when every credit is full is lost, as
    /// a full bucket's. A sender that has not sent yet is dealt nothing: a VNF on
    /// standby would otherwise fill a depth's credit from what the busy ones could carry.
    fn refill(&self, now: u64) {
        let last = self.word(AT_LAST);
        let then = last.load(Ordering::Acquire);
        if now <= then.saturating_add(self.refill_ticks)
            || last
                .compare_exchange(then, now, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return;
        }
        if then == 0 {
            return;
        }
        let undealt = self.word(AT_UNDEALT);
        let accrued = ((now - then) as f64 * self.units_per_tick).min(self.depth as f64) as i64;
        let mut left = accrued + undealt.swap(0, Ordering::AcqRel) as i64;
        let senders = (self.word(AT_SENDERS).load(Ordering::Acquire) as usize).clamp(1, MAX_SHARED_SENDERS);
        let cap = self.depth;
        let live = |i: &usize| self.has_sent(*i).load(Ordering::Relaxed) != 0;
        let mut open = (0..senders).filter(live).count() as i64;
        if open == 0 {
            return;
        }
        for _ in 0..DEAL_ROUNDS {
            let each = left / open;
            if each == 0 {
                break;
            }
            let (mut given, mut below) = (0, 0);
            for i in (0..senders).filter(live) {
                // Counted once it is stored: the closure runs again when the sender
                // drew on its credit meanwhile.
                let (mut added, mut open_after) = (0, false);
                let dealt = self.credit(i).fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                    let c = c as i64;
                    if c >= cap {
                        return None;
                    }
                    let next = (c + each).min(cap);
                    (added, open_after) = (next - c, next < cap);
                    Some(next as u64)
                });
                if dealt.is_ok() {
                    given += added;
                    below += i64::from(open_after);
                }
            }
            left -= given;
            open = below;
            if open == 0 {
                // Every credit full: the rest is lost.
                return;
            }
        }
        // Under a unit for each sender below its cap: the next refill deals it.
        undealt.fetch_add(left.max(0) as u64, Ordering::AcqRel);
    }

    /// How many of `batch`'s frames, in order, the line carries at TSC `now`: they go
    /// while this sender's credit is above zero, whatever their size, and what they
    /// cost beyond it is owed (the credit goes below zero, a two's complement count,
    /// and this sender sends nothing more until the refills have paid it back).
    fn take(&self, now: u64, batch: &Batch) -> usize {
        self.refill(now);
        let credit = self.credit(self.sender);
        // Only this sender draws on its credit; a refill only adds to it.
        let have = credit.load(Ordering::Acquire) as i64;
        let (mut n, mut need) = (0, 0);
        for p in batch.iter() {
            if need >= have {
                break;
            }
            need += wire_bits(p.data().len()) as i64 * UNITS_PER_BIT;
            n += 1;
        }
        if n > 0 {
            credit.fetch_sub(need as u64, Ordering::AcqRel);
            if !self.marked_sent.replace(true) {
                self.has_sent(self.sender).store(1, Ordering::Relaxed);
            }
        }
        n
    }
}

/// What a [`LinePort`] sends through: a line of this process's senders, or one shared
/// with other processes.
enum Carrier {
    /// The line and this sender's number on it.
    Local(Arc<Line>, usize),
    Shared(SharedLine),
}

impl Carrier {
    fn take(&self, now: u64, batch: &Batch) -> usize {
        match self {
            Carrier::Local(line, id) => line.take(*id, now, batch.iter().map(|p| p.data().len())),
            Carrier::Shared(line) => line.take(now, batch),
        }
    }

    /// The cause of its refusals: a wire's line rate, or a capacity shared by processes.
    fn cause(&self) -> &'static str {
        match self {
            Carrier::Local(..) => "line-rate",
            Carrier::Shared(_) => "shared-capacity",
        }
    }
}

/// A sending port behind a [`Line`] or a [`SharedLine`] (or none: every frame passes).
pub struct LinePort<P> {
    port: P,
    line: Option<Carrier>,
    /// Frames the line had no room for.
    limited: u64,
}

impl<P: TxPort> LinePort<P> {
    pub fn new(port: P, line: Option<Arc<Line>>) -> LinePort<P> {
        let line = line.map(|l| {
            let id = l.join();
            Carrier::Local(l, id)
        });
        LinePort { port, line, limited: 0 }
    }

    /// A port behind a capacity it shares with other processes' senders.
    pub fn shared(port: P, line: SharedLine) -> LinePort<P> {
        LinePort {
            port,
            line: Some(Carrier::Shared(line)),
            limited: 0,
        }
    }

    pub fn inner_mut(&mut self) -> &mut P {
        &mut self.port
    }
}

impl<P: TxPort> TxPort for LinePort<P> {
    fn tx<R: Recycle>(&mut self, now: u64, batch: &mut Batch, recycle: &mut R) {
        if let Some(line) = &self.line {
            let fits = line.take(now, batch);
            while batch.len() > fits {
                if let Some(p) = batch.pop() {
                    recycle.recycle(p);
                    self.limited += 1;
                }
            }
        }
        if !batch.is_empty() {
            self.port.tx(now, batch, recycle);
        }
    }

    fn stats(&self) -> PortStats {
        let mut s = self.port.stats();
        s.dropped += self.limited;
        s
    }

    fn start_window(&mut self) {
        self.port.start_window();
    }

    fn shared_pool_need(&self) -> Option<usize> {
        self.port.shared_pool_need()
    }

    fn attach_pool(&mut self, pool: &PacketPool) {
        self.port.attach_pool(pool);
    }

    fn return_buffers(&mut self, pool: &mut PacketPool) {
        self.port.return_buffers(pool);
    }

    fn flush(&mut self) {
        self.port.flush();
    }

    fn window_packets(&self) -> u64 {
        self.port.window_packets()
    }

    fn lost_in_flight(&self) -> u64 {
        self.port.lost_in_flight()
    }

    fn counters(&self) -> Vec<NfCounter> {
        let mut c = self.port.counters();
        match &self.line {
            Some(Carrier::Local(..)) => c.push(NfCounter::total("tx_line_rate_limited", self.limited)),
            Some(Carrier::Shared(_)) => c.push(NfCounter::total("tx_shared_capacity_limited", self.limited)),
            None => {}
        }
        c
    }

    fn drops(&self) -> Vec<(&'static str, u64)> {
        let mut d = self.port.drops();
        if let Some(line) = &self.line {
            d.push((line.cause(), self.limited));
        }
        d
    }

    fn info(&self) -> PortInfo {
        let mut i = self.port.info();
        match &self.line {
            Some(Carrier::Local(line, _)) => {
                i.settings
                    .insert("line_rate".into(), format!("{}Gbit/s", line.bits_per_second / 1e9));
                i.summary = format!("{} behind a {} Gbit/s line", i.summary, line.bits_per_second / 1e9);
            }
            Some(Carrier::Shared(line)) => {
                let gbps = line.bits_per_second / 1e9;
                i.settings.insert("shared_capacity".into(), format!("{gbps}Gbit/s"));
                i.summary = format!(
                    "{} behind a {gbps} Gbit/s capacity shared by processes ({})",
                    i.summary,
                    line.path.display()
                );
            }
            None => {}
        }
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sfclab_core::PacketPool;

    /// Counts what reaches it.
    #[derive(Default)]
    struct Counting(u64);

    impl TxPort for Counting {
        fn tx<R: Recycle>(&mut self, _now: u64, batch: &mut Batch, recycle: &mut R) {
            self.0 += batch.len() as u64;
            while let Some(p) = batch.pop() {
                recycle.recycle(p);
            }
        }
        fn stats(&self) -> PortStats {
            PortStats {
                packets: self.0,
                ..PortStats::default()
            }
        }
        fn window_packets(&self) -> u64 {
            0
        }
        fn info(&self) -> PortInfo {
            PortInfo {
                kind: "counting".into(),
                summary: String::new(),
                settings: Default::default(),
            }
        }
    }

    /// Offers `per_batch` frames of `len` bytes every `step` ticks for `steps` steps, on
    /// each of `ports`; what each let through.
    fn offer(ports: &mut [LinePort<Counting>], len: usize, per_batch: usize, step: u64, steps: u64) -> Vec<u64> {
        let mut pool = PacketPool::new(512);
        let start = 1_000_000;
        for k in 0..steps {
            for port in ports.iter_mut() {
                send(port, &mut pool, start + k * step, per_batch, len);
            }
        }
        ports.iter().map(|p| p.port.0).collect()
    }

    /// Senders of several processes (each its own mapping of the file, here on threads
    /// of one) get the shared rate together, and what exceeds it is refused and counted.
    #[test]
    fn a_shared_line_carries_its_rate_for_every_mapping_together() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nic");
        SharedLine::create(&path, 1e9, std::time::Duration::from_micros(200)).unwrap();
        let step = (tsc::hz() * 100e-6) as u64;
        let through: Vec<(u64, u64)> = std::thread::scope(|s| {
            let senders: Vec<_> = (0..3)
                .map(|_| {
                    let path = path.clone();
                    s.spawn(move || {
                        let mut port = LinePort::shared(Counting::default(), SharedLine::open(&path).unwrap());
                        let through = offer(std::slice::from_mut(&mut port), 1000, 32, step, 10_000)[0];
                        let refused = port.drops().iter().find(|d| d.0 == "shared-capacity").unwrap().1;
                        assert_eq!(port.stats().dropped, refused);
                        (through, refused)
                    })
                })
                .collect();
            senders.into_iter().map(|h| h.join().unwrap()).collect()
        });
        // The three offered 320,000 frames each; one second of 1 Gbit/s carries 122,070
        // of 1,000 bytes (plus the bucket's 200 us at the start).
        let total: u64 = through.iter().map(|t| t.0).sum();
        let expect = 1e9 / 8192.0;
        assert!(
            (total as f64 - expect).abs() < expect * 0.01,
            "{total} through, {expect} expected: {through:?}"
        );
        assert!(through.iter().all(|t| t.0 + t.1 == 320_000), "{through:?}");
    }

    /// Offers `frames` of `len` bytes on `port` at `now`: how many it carried.
    fn send(port: &mut LinePort<Counting>, pool: &mut PacketPool, now: u64, frames: usize, len: usize) -> u64 {
        let before = port.port.0;
        let mut batch = Batch::new(frames.max(1));
        assert_eq!(pool.alloc_into(&mut batch, frames), frames);
        batch.iter_mut().for_each(|p| {
            p.reset(len);
        });
        port.tx(now, &mut batch, pool);
        assert!(batch.is_empty());
        port.port.0 - before
    }

    /// Seed 001's PVVP chain behind the NIC: the first VNF floods the capacity, the
    /// second sends only what the first passed. Served in turn, the second gets its
    /// share, so the chain carries half the capacity (taken as it comes, the first
    /// would take most of it and the second refuse most of what it got).
    #[test]
    fn a_vnf_behind_one_that_floods_the_capacity_still_gets_its_share() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nic");
        SharedLine::create(&path, 1e9, std::time::Duration::from_micros(200)).unwrap();
        let mut first = LinePort::shared(Counting::default(), SharedLine::open(&path).unwrap());
        let mut second = LinePort::shared(Counting::default(), SharedLine::open(&path).unwrap());
        let mut pool = PacketPool::new(512);
        // On one core, in turns of 100 us: the first sends 32 frames of 64 B (704 bits
        // on the wire) every 10 us (2.25 Gbit/s), then the second what it passed, for 1 s.
        let us = tsc::hz() * 1e-6;
        let mut offered_second = 0;
        for turn in 0..10_000u64 {
            let start = 1_000_000 + (turn as f64 * 100.0 * us) as u64;
            let mut passed = 0;
            for i in 0..9 {
                passed += send(&mut first, &mut pool, start + (i as f64 * 10.0 * us) as u64, 32, 64);
            }
            offered_second += passed;
            let mut left = passed as usize;
            while left > 0 {
                let n = left.min(32);
                send(&mut second, &mut pool, start + (95.0 * us) as u64, n, 64);
                left -= n;
            }
        }
        let (a, b) = (first.port.0 as f64, second.port.0 as f64);
        let line = 1e9 / 704.0;
        assert!(((a + b) - line).abs() < line * 0.01, "{a} + {b}, {line} expected");
        assert!(
            (b - line / 2.0).abs() < line * 0.02,
            "the second VNF carried {b} of {line}"
        );
        assert!(
            offered_second - second.port.0 < offered_second / 100,
            "the second refused {} of {offered_second}",
            offered_second - second.port.0
        );
        assert_eq!(second.stats().dropped, offered_second - second.port.0);
    }

    /// A sender that sends less than its share loses nothing; what it leaves, another
    /// may use, so the capacity stays full.
    #[test]
    fn what_a_quiet_sender_leaves_on_a_shared_line_a_busy_one_may_use() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nic");
        SharedLine::create(&path, 1e9, std::time::Duration::from_micros(200)).unwrap();
        let mut quiet = LinePort::shared(Counting::default(), SharedLine::open(&path).unwrap());
        let mut busy = LinePort::shared(Counting::default(), SharedLine::open(&path).unwrap());
        // A third that joined and never sends: its credit full, its share the others'.
        let _gone = SharedLine::open(&path).unwrap();
        let mut pool = PacketPool::new(512);
        let step = (tsc::hz() * 100e-6) as u64;
        for k in 0..10_000u64 {
            let now = 1_000_000 + k * step;
            send(&mut quiet, &mut pool, now, 1, 1000);
            send(&mut busy, &mut pool, now, 32, 1000);
        }
        let (q, b) = (quiet.port.0, busy.port.0);
        assert_eq!(q, 10_000, "the quiet sender loses nothing");
        let expect = 1e9 / 8192.0;
        let total = (q + b) as f64;
        assert!((total - expect).abs() < expect * 0.02, "{q} + {b}, {expect} expected");
    }

    /// Seed 001's 40 VNF processes of which a few carry traffic: the idle senders'
    /// shares go to the busy ones evenly, however each sends (a NIC's arbiter serves
    /// its backlogged queues in turn), not to whichever comes first after a refill.
    #[test]
    fn what_idle_senders_leave_the_busy_ones_share_evenly_however_they_send() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nic");
        SharedLine::create(&path, 1e9, std::time::Duration::from_millis(10)).unwrap();
        let mut busy: Vec<LinePort<Counting>> = (0..3)
            .map(|_| LinePort::shared(Counting::default(), SharedLine::open(&path).unwrap()))
            .collect();
        let _idle: Vec<SharedLine> = (0..7).map(|_| SharedLine::open(&path).unwrap()).collect();
        let mut pool = PacketPool::new(512);
        // One second, each far above a third of the line in 1,000-byte frames: 32
        // frames every 100 us, 2 every 6 us, 8 every 25 us, each at its own times.
        let us = tsc::hz() * 1e-6;
        let patterns = [(32, 100.0), (2, 6.0), (8, 25.0)];
        let mut next = [0.0f64; 3];
        loop {
            let (i, at) = next
                .iter()
                .copied()
                .enumerate()
                .min_by(|a, b| a.1.total_cmp(&b.1))
                .unwrap();
            if at >= 1e6 {
                break;
            }
            let (frames, every) = patterns[i];
            send(&mut busy[i], &mut pool, 1_000_000 + (at * us) as u64, frames, 1000);
            next[i] += every;
        }
        // The idle senders are dealt nothing (they never sent): the busy ones share the
        // whole second.
        let third = 1e9 / 8192.0 / 3.0;
        let got: Vec<u64> = busy.iter().map(|p| p.port.0).collect();
        for g in &got {
            assert!(
                (*g as f64 - third).abs() < third * 0.06,
                "each busy sender carried {got:?}, a third of the line is {third:.0}"
            );
        }
    }

    /// Seed 001's 40 VNF processes all sending at once, each a little above its share:
    /// together they get the capacity, not a bucket's depth each on top of it.
    #[test]
    fn senders_that_start_together_get_the_capacity_however_many() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nic");
        SharedLine::create(&path, 1e9, std::time::Duration::from_millis(10)).unwrap();
        let mut senders: Vec<LinePort<Counting>> = (0..40)
            .map(|_| LinePort::shared(Counting::default(), SharedLine::open(&path).unwrap()))
            .collect();
        let mut pool = PacketPool::new(512);
        // 200 ms, each sender 4 frames of 1,000 B every 100 us: 1.3x its share.
        let step = (tsc::hz() * 100e-6) as u64;
        for k in 0..2000 {
            for port in senders.iter_mut() {
                send(port, &mut pool, 1_000_000 + k * step, 4, 1000);
            }
        }
        let carried: u64 = senders.iter().map(|p| p.port.0).sum();
        let capacity = 1e9 * 0.2 / 8192.0;
        // Each sender's first credit (two full-size frames: three of these) and the
        // frame it owes at the end, at most.
        let most = capacity + 40.0 * 4.0;
        assert!(
            carried as f64 <= most && carried as f64 >= capacity * 0.99,
            "carried {carried} of 320,000 offered: the capacity is {capacity:.0} (each given 10 ms at the start: up to 48,800 more)"
        );
    }

    #[test]
    fn a_shared_line_takes_at_most_its_number_of_senders() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nic");
        SharedLine::create(&path, 1e9, std::time::Duration::from_millis(1)).unwrap();
        let senders: Vec<SharedLine> = (0..MAX_SHARED_SENDERS)
            .map(|_| SharedLine::open(&path).unwrap())
            .collect();
        let err = SharedLine::open(&path).unwrap_err().to_string();
        assert!(err.contains("more than 1024 senders"), "{err}");
        assert_eq!(senders.last().unwrap().sender, MAX_SHARED_SENDERS - 1);
    }

    #[test]
    fn a_shared_line_refuses_a_file_that_is_not_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nic");
        std::fs::write(&path, vec![0u8; SHARED_LEN]).unwrap();
        assert!(
            SharedLine::open(&path)
                .unwrap_err()
                .to_string()
                .contains("not a shared line")
        );
        std::fs::write(&path, [1u8; 8]).unwrap();
        assert!(SharedLine::open(&path).unwrap_err().to_string().contains("too short"));
        assert!(SharedLine::create(&path, 0.0, std::time::Duration::from_millis(1)).is_err());
        assert!(SharedLine::open(&dir.path().join("none")).is_err());
    }

    #[test]
    fn senders_sharing_a_line_get_its_rate_together_and_the_rest_is_refused() {
        // 1 Gbit/s; 1,000-byte frames cost (1000 + 24) * 8 = 8,192 bits: 122,070 fps.
        let line = Line::new(1e9);
        let mut ports: Vec<LinePort<Counting>> = (0..3)
            .map(|_| LinePort::new(Counting::default(), Some(line.clone())))
            .collect();
        // One second of offers, each sender 32 frames every 100 us: 320,000 fps each,
        // far above the line.
        let step = (tsc::hz() * 100e-6) as u64;
        let through = offer(&mut ports, 1000, 32, step, 10_000);
        let total: u64 = through.iter().sum();
        let expect = 1e9 / 8192.0;
        // The second's worth, plus the bucket's depth at the start (200 us of line).
        assert!(
            (total as f64 - expect).abs() < expect * 0.01,
            "{total} through, {expect} expected"
        );
        // Served in rounds, the senders get equal shares (the first of each round is
        // not favoured).
        let third = total as f64 / 3.0;
        assert!(
            through.iter().all(|&t| (t as f64 - third).abs() < third * 0.05),
            "{through:?}"
        );
        for p in &ports {
            let s = p.stats();
            assert_eq!(s.packets + s.dropped, 320_000, "each frame passed or refused");
            assert!(p.drops().contains(&("line-rate", s.dropped)));
        }
    }

    /// Over-offered one frame at a time, small and full-size ones in a random order
    /// (half each), a line (and a shared capacity) carries both as offered: it refuses
    /// the next frame when it is busy, never the large ones for the small.
    #[test]
    fn an_over_offered_line_carries_a_mix_of_sizes_as_offered() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nic");
        SharedLine::create(&path, 200e6, std::time::Duration::from_micros(200)).unwrap();
        let shared = LinePort::shared(Counting::default(), SharedLine::open(&path).unwrap());
        let local = LinePort::new(Counting::default(), Some(Line::new(200e6)));
        for mut port in [shared, local] {
            let mut pool = PacketPool::new(64);
            // 200 kpps of 64 B and 1,518 B frames for 1 s: 1.26 Gbit/s offered.
            let step = (tsc::hz() * 5e-6) as u64;
            let (mut carried, mut rng) = ([0u64; 2], 0x9e37_79b9_7f4a_7c15u64);
            for k in 0..200_000u64 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let big = usize::from(rng >> 63 == 1);
                carried[big] += send(&mut port, &mut pool, 1_000_000 + k * step, 1, [60, 1514][big]);
            }
            let bits = carried[0] as f64 * (60.0 + 24.0) * 8.0 + carried[1] as f64 * (1514.0 + 24.0) * 8.0;
            assert!((bits - 200e6).abs() < 200e6 * 0.01, "{bits} bits carried: {carried:?}");
            let ratio = carried[1] as f64 / carried[0] as f64;
            assert!((ratio - 1.0).abs() < 0.1, "large to small {ratio}: {carried:?}");
        }
    }

    #[test]
    fn forty_senders_of_full_size_frames_each_get_their_share() {
        // 200 Mbit/s shared by 40 senders of 1,518-byte frames (12,304 bits each): a
        // round's share of 200 us of line is far below one frame, yet every sender's
        // frames pass, and the line's rate holds.
        let line = Line::new(200e6);
        let mut ports: Vec<LinePort<Counting>> = (0..40)
            .map(|_| LinePort::new(Counting::default(), Some(line.clone())))
            .collect();
        let step = (tsc::hz() * 100e-6) as u64;
        let through = offer(&mut ports, 1514, 4, step, 10_000);
        let total: u64 = through.iter().sum();
        let expect = 200e6 / ((1514.0 + 24.0) * 8.0);
        assert!(
            (total as f64 - expect).abs() < expect * 0.02,
            "{total} through, {expect} expected"
        );
        let each = total as f64 / 40.0;
        assert!(
            through.iter().all(|&t| (t as f64 - each).abs() < each * 0.1),
            "{through:?}"
        );
    }

    #[test]
    fn what_a_quiet_sender_leaves_a_busy_one_may_use() {
        // 1 Gbit/s, 1,000-byte frames: one sender offers 1 frame per 100 us (81.9
        // Mbit/s), the other floods; together they fill the line.
        let line = Line::new(1e9);
        let mut quiet = [LinePort::new(Counting::default(), Some(line.clone()))];
        let mut busy = [LinePort::new(Counting::default(), Some(line))];
        let step = (tsc::hz() * 100e-6) as u64;
        let mut pool = PacketPool::new(512);
        for k in 0..10_000u64 {
            for (port, n) in [(&mut quiet[0], 1), (&mut busy[0], 32)] {
                let mut batch = Batch::new(n);
                assert_eq!(pool.alloc_into(&mut batch, n), n);
                batch.iter_mut().for_each(|p| {
                    p.reset(1000);
                });
                port.tx(1_000_000 + k * step, &mut batch, &mut pool);
            }
        }
        let (q, b) = (quiet[0].port.0, busy[0].port.0);
        assert_eq!(q, 10_000, "the quiet sender loses nothing");
        let total = (q + b) as f64;
        let expect = 1e9 / 8192.0;
        assert!((total - expect).abs() < expect * 0.02, "{q} + {b}, {expect} expected");
    }

    #[test]
    fn below_the_line_rate_nothing_is_refused_and_no_line_means_no_limit() {
        let line = Line::new(10e9);
        // 32 frames of 64 B every 10 us: 3.2 Mfps x 704 bits = 2.25 Gbit/s.
        let step = (tsc::hz() * 10e-6) as u64;
        let mut limited = [LinePort::new(Counting::default(), Some(line))];
        assert_eq!(offer(&mut limited, 64, 32, step, 1000), vec![32_000]);
        let mut free = [LinePort::new(Counting::default(), None)];
        assert_eq!(offer(&mut free, 1500, 32, 1, 1000), vec![32_000]);
        assert!(free[0].drops().is_empty());
    }
}
