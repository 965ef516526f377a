//! pcap files as ports. [`PcapSource`] reads a whole capture (pcap or pcapng) into memory
//! at open (so the data path copies from memory, never reads the disk) and replays it as
//! fast as the chain takes it, at a rate, or at the gaps of the file's own timestamps,
//! looped a given number of times; [`PcapSink`] writes every frame it receives with a
//! nanosecond timestamp, in the format `tshark` and `tcpreplay` read.

#![forbid(unsafe_code)]

use crate::window::Window;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::{DataLink, TsResolution};
use sfclab_core::nf::{Context, NetworkFunction, Verdict, Verdicts};
use sfclab_core::packet::DATA_ROOM;
use sfclab_core::port::{PortInfo, PortStats, Shortfall};
use sfclab_core::{Batch, BatchView, NfCounter, PacketMeta, PacketPool, PacketRef, Recycle, RxPort, TxPort};
use sfclab_traffic::rate::{Pacer, Rate};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How a replayed capture is paced.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ReplayPace {
    /// `max`: as fast as the chain takes it; or packets (L1 bits) per second.
    Rate(Rate),
    /// The gaps between the file's timestamps, kept (as `tcpreplay` does by default); each
    /// pass starts one mean gap after the previous one's last frame.
    FileTimestamps,
}

impl std::fmt::Display for ReplayPace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplayPace::Rate(Rate::Max) => f.write_str("as fast as the chain takes it"),
            ReplayPace::Rate(r) => write!(f, "at {r}"),
            ReplayPace::FileTimestamps => f.write_str("at the file's timestamps"),
        }
    }
}

/// A capture replayed into a chain.
pub struct PcapSource {
    path: PathBuf,
    /// Every frame back to back, and where each ends.
    bytes: Vec<u8>,
    ends: Vec<usize>,
    /// Each frame's timestamp, nanoseconds after the first frame's (never decreasing).
    stamps_ns: Vec<u64>,
    /// Passes over the file; `None`: until the run stops it.
    loops: Option<u64>,
    next: usize,
    passes_done: u64,
    /// Frames in the file the buffers cannot hold (longer than `DATA_ROOM`), skipped at open.
    oversize: u64,
    /// Frames truncated in the capture (captured length below the original), kept as captured.
    truncated: u64,
    /// Frames stamped earlier than the frame before them (replayed right after it).
    backwards_stamps: u64,
    /// File-timestamp pacing: frames replayed more than `LATE_NS` after their time (the
    /// chain or the machine stalled; the replay caught up at once).
    late: u64,
    /// File-timestamp pacing: nanoseconds since the first frame at the last `rx`.
    elapsed_ns: u64,
    pace: ReplayPace,
    pacer: Pacer,
    /// File-timestamp pacing: TSC ticks per nanosecond and the TSC at the first frame.
    ticks_per_ns: f64,
    first_tsc: Option<u64>,
    window: Window,
    pool_empty: u64,
    stats: PortStats,
}

/// Frames and timestamps read from a capture file.
#[derive(Default)]
struct Capture {
    bytes: Vec<u8>,
    ends: Vec<usize>,
    stamps_ns: Vec<u64>,
    oversize: u64,
    truncated: u64,
    backwards_stamps: u64,
}

impl Capture {
    fn push(&mut self, data: &[u8], orig_len: u32, at_ns: Option<u128>, first_ns: &mut Option<u128>) {
        if data.len() > DATA_ROOM {
            self.oversize += 1;
            return;
        }
        self.truncated += u64::from((data.len() as u64) < u64::from(orig_len));
        let last = self.stamps_ns.last().copied().unwrap_or(0);
        let stamp = match at_ns {
            Some(at) => {
                let first = *first_ns.get_or_insert(at);
                let since = at.saturating_sub(first).min(u128::from(u64::MAX)) as u64;
                if since < last {
                    self.backwards_stamps += 1;
                }
                since.max(last)
            }
            // A simple packet block has no timestamp: it follows the frame before it.
            None => last,
        };
        self.bytes.extend_from_slice(data);
        self.ends.push(self.bytes.len());
        self.stamps_ns.push(stamp);
    }

    fn read_pcap(name: &str, file: impl Read) -> Result<Capture, String> {
        let mut reader = PcapReader::new(file).map_err(|e| format!("{name}: not a pcap or pcapng file ({e})"))?;
        let link = reader.header().datalink;
        if link != DataLink::ETHERNET {
            return Err(format!("{name}: link type {link:?}, sfclab reads Ethernet captures"));
        }
        let mut capture = Capture::default();
        let mut first = None;
        while let Some(packet) = reader.next_packet() {
            let n = capture.ends.len() as u64 + capture.oversize + 1;
            let packet = packet.map_err(|e| format!("{name}: packet {n}: {e}"))?;
            capture.push(
                &packet.data,
                packet.orig_len,
                Some(packet.timestamp.as_nanos()),
                &mut first,
            );
        }
        Ok(capture)
    }

    fn read_pcapng(name: &str, file: impl Read) -> Result<Capture, String> {
        let mut reader = PcapNgReader::new(file).map_err(|e| format!("{name}: not a pcapng file ({e})"))?;
        let mut capture = Capture::default();
        let mut first = None;
        // Per interface of the current section: link type and timestamp units per second.
        let mut interfaces: Vec<(DataLink, TimestampUnits)> = Vec::new();
        let mut block_no = 1u64;
        while let Some(block) = reader.next_block() {
            block_no += 1;
            let block = block.map_err(|e| format!("{name}: block {block_no}: {e}"))?;
            let packet = match block {
                Block::SectionHeader(_) => {
                    interfaces.clear();
                    continue;
                }
                Block::InterfaceDescription(idb) => {
                    let units = TimestampUnits::of(&idb.options)
                        .map_err(|e| format!("{name}: block {block_no} (interface {}): {e}", interfaces.len()))?;
                    interfaces.push((idb.linktype, units));
                    continue;
                }
                Block::EnhancedPacket(epb) => {
                    // pcap-file hands the raw timestamp over as nanoseconds whatever the
                    // interface's resolution: the units are applied here.
                    let raw = epb.timestamp.as_nanos();
                    (epb.interface_id, raw, epb.original_len, epb.data)
                }
                Block::SimplePacket(spb) => {
                    let len = spb.data.len().min(spb.original_len as usize);
                    let data = match spb.data {
                        std::borrow::Cow::Borrowed(d) => std::borrow::Cow::Borrowed(&d[..len]),
                        std::borrow::Cow::Owned(mut d) => {
                            d.truncate(len);
                            std::borrow::Cow::Owned(d)
                        }
                    };
                    (0, u128::MAX, spb.original_len, data)
                }
                _ => continue,
            };
            let (interface, raw, orig_len, data) = packet;
            let Some(&(link, units)) = interfaces.get(interface as usize) else {
                return Err(format!(
                    "{name}: block {block_no}: a packet of interface {interface}, which no interface description block declared"
                ));
            };
            if link != DataLink::ETHERNET {
                return Err(format!(
                    "{name}: interface {interface}: link type {link:?}, sfclab reads Ethernet captures"
                ));
            }
            let at = (raw != u128::MAX).then(|| units.to_ns(raw));
            capture.push(&data, orig_len, at, &mut first);
        }
        Ok(capture)
    }
}

/// A pcapng interface's timestamp resolution (`if_tsresol`) and offset (`if_tsoffset`).
#[derive(Debug, Clone, Copy)]
struct TimestampUnits {
    /// 10^-n seconds (`false`) or 2^-n seconds (`true`).
    exponent: u8,
    binary: bool,
    offset_s: u64,
}

impl TimestampUnits {
    fn of(options: &[InterfaceDescriptionOption]) -> Result<TimestampUnits, String> {
        // Microseconds unless the interface says otherwise (pcapng specification).
        let mut units = TimestampUnits {
            exponent: 6,
            binary: false,
            offset_s: 0,
        };
        for o in options {
            match *o {
                InterfaceDescriptionOption::IfTsResol(r) => {
                    units.binary = r & 0x80 != 0;
                    units.exponent = r & 0x7f;
                    if (units.binary && units.exponent > 64) || (!units.binary && units.exponent > 19) {
                        return Err(format!("if_tsresol {r:#04x} is finer than sfclab can represent"));
                    }
                }
                InterfaceDescriptionOption::IfTsOffset(s) => units.offset_s = s,
                _ => {}
            }
        }
        Ok(units)
    }

    fn to_ns(self, raw: u128) -> u128 {
        let ns = if self.binary {
            (raw * 1_000_000_000) >> self.exponent
        } else if self.exponent <= 9 {
            raw * 10u128.pow(u32::from(9 - self.exponent))
        } else {
            raw / 10u128.pow(u32::from(self.exponent - 9))
        };
        ns + u128::from(self.offset_s) * 1_000_000_000
    }
}

/// How late a frame replayed at the file's timestamps may be before it counts as late.
const LATE_NS: u64 = 1_000_000;

/// The first four bytes of a pcapng file (a section header block's type).
const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

impl PcapSource {
    /// Reads `path` (pcap or pcapng, Ethernet link type), to replay as fast as the chain
    /// takes it ([`PcapSource::paced`] sets another pace). `loops`: passes over the file
    /// (`None`: endless). Errors name the file and what is wrong with it.
    pub fn open(path: &Path, loops: Option<u64>) -> Result<PcapSource, String> {
        let name = path.display().to_string();
        let mut file = BufReader::new(File::open(path).map_err(|e| format!("{name}: {e}"))?);
        let mut magic = [0u8; 4];
        let pcapng = {
            use std::io::BufRead;
            let head = file.fill_buf().map_err(|e| format!("{name}: {e}"))?;
            let n = head.len().min(4);
            magic[..n].copy_from_slice(&head[..n]);
            magic == PCAPNG_MAGIC
        };
        let capture = if pcapng {
            Capture::read_pcapng(&name, file)?
        } else {
            Capture::read_pcap(&name, file)?
        };
        if capture.ends.is_empty() {
            return Err(format!(
                "{name}: no frame sfclab can replay (empty, or all longer than {DATA_ROOM} bytes)"
            ));
        }
        if loops == Some(0) {
            return Err(format!("{name}: loops must be at least 1"));
        }
        Ok(PcapSource {
            path: path.to_path_buf(),
            bytes: capture.bytes,
            ends: capture.ends,
            stamps_ns: capture.stamps_ns,
            loops,
            next: 0,
            passes_done: 0,
            oversize: capture.oversize,
            truncated: capture.truncated,
            backwards_stamps: capture.backwards_stamps,
            late: 0,
            elapsed_ns: 0,
            pace: ReplayPace::Rate(Rate::Max),
            pacer: Pacer::new(None, 1.0, 0.0),
            ticks_per_ns: 0.0,
            first_tsc: None,
            window: Window::default(),
            pool_empty: 0,
            stats: PortStats::default(),
        })
    }

    /// Replays at `pace`; `tsc_hz` turns the TSC into time, `batch` bounds how far a rate
    /// falls behind before frames are skipped (counted as `behind`, as the generator's).
    pub fn paced(mut self, pace: ReplayPace, tsc_hz: f64, batch: usize) -> PcapSource {
        let rate = match pace {
            ReplayPace::Rate(Rate::Pps(p)) => Some(p),
            ReplayPace::Rate(Rate::L1Bps(b)) => Some(b),
            _ => None,
        };
        let per_unit = if matches!(pace, ReplayPace::Rate(Rate::L1Bps(_))) {
            (1518.0 + 24.0) * 8.0
        } else {
            1.0
        };
        self.pacer = Pacer::catching_up(rate, tsc_hz, 4.0 * batch as f64 * per_unit);
        self.ticks_per_ns = tsc_hz / 1e9;
        self.pace = pace;
        self
    }

    /// Frames in one pass over the file.
    pub fn frames(&self) -> usize {
        self.ends.len()
    }

    /// Frame `i` of the file (`i < frames()`).
    pub fn frame(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.bytes[start..self.ends[i]]
    }

    /// Frame `i`'s timestamp, nanoseconds after the first frame's.
    pub fn stamp_ns(&self, i: usize) -> u64 {
        self.stamps_ns[i]
    }

    /// Frames replayed at the file's timestamps more than 1 ms after their time.
    pub fn late(&self) -> u64 {
        self.late
    }

    /// Nanoseconds from one pass's first frame to the next pass's: the file's span and one
    /// mean gap.
    fn pass_ns(&self) -> u64 {
        let span = *self.stamps_ns.last().unwrap_or(&0);
        let n = self.stamps_ns.len() as u64;
        if n > 1 { span + span / (n - 1) } else { 0 }
    }

    /// When frame `i` of pass `pass` is due at the file's timestamps, nanoseconds after the
    /// first frame of the first pass.
    fn due_ns(&self, pass: u64, i: usize) -> u64 {
        pass.saturating_mul(self.pass_ns()).saturating_add(self.stamps_ns[i])
    }

    /// The mean frame length in the file, bytes (FCS not included).
    fn mean_len(&self) -> f64 {
        self.bytes.len() as f64 / self.ends.len() as f64
    }

    /// Frames due now, at most `want`.
    fn due(&mut self, now: u64, want: usize) -> usize {
        match self.pace {
            ReplayPace::Rate(Rate::Max) => want,
            ReplayPace::Rate(Rate::Pps(_)) => {
                let n = want.min(self.pacer.due(now) as usize);
                self.pacer.spend(n as f64);
                n
            }
            ReplayPace::Rate(Rate::L1Bps(_)) => {
                // Frame sizes differ: walk them until the bits due are spent.
                let due = self.pacer.due(now);
                let (mut bits, mut n, mut i) = (0.0, 0, self.next);
                while n < want {
                    let b = ((self.frame(i).len() + 24) * 8) as f64;
                    if bits + b > due {
                        break;
                    }
                    bits += b;
                    n += 1;
                    i = if i + 1 == self.ends.len() { 0 } else { i + 1 };
                }
                self.pacer.spend(bits);
                n
            }
            ReplayPace::FileTimestamps => {
                let first = *self.first_tsc.get_or_insert(now);
                let elapsed_ns = (now.saturating_sub(first) as f64 / self.ticks_per_ns) as u64;
                self.elapsed_ns = elapsed_ns;
                let (mut n, mut i, mut pass) = (0, self.next, self.passes_done);
                while n < want && self.due_ns(pass, i) <= elapsed_ns {
                    n += 1;
                    i += 1;
                    if i == self.ends.len() {
                        i = 0;
                        pass += 1;
                    }
                }
                n
            }
        }
    }
}

impl RxPort for PcapSource {
    fn rx(&mut self, now: u64, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        let mut want = self.window.room(batch.room(), self.stats.packets);
        if let Some(loops) = self.loops {
            let left = (loops - self.passes_done) as usize * self.ends.len() - self.next;
            want = want.min(left);
        }
        want = self.due(now, want);
        if want == 0 {
            return 0;
        }
        let first = batch.len();
        let got = pool.alloc_into(batch, want);
        if got < want {
            self.pool_empty += 1;
        }
        let mut bytes = 0;
        let timed = self.pace == ReplayPace::FileTimestamps;
        for k in 0..got {
            if timed {
                let due_ns = self.due_ns(self.passes_done, self.next);
                self.late += u64::from(self.elapsed_ns.saturating_sub(due_ns) > LATE_NS);
            }
            let frame = self.frame(self.next);
            let len = frame.len();
            let p = batch.get_mut(first + k);
            p.meta = PacketMeta::fresh(0, 0, self.window.flags());
            p.meta.seq = self.stats.packets.wrapping_add(k as u64) as u32;
            p.reset(len).copy_from_slice(frame);
            bytes += len as u64;
            self.next += 1;
            if self.next == self.ends.len() {
                self.next = 0;
                self.passes_done += 1;
            }
        }
        self.stats.packets += got as u64;
        self.stats.bytes += bytes;
        got
    }

    fn exhausted(&self) -> bool {
        self.loops.is_some_and(|l| self.passes_done >= l) || self.window.reached(self.stats.packets)
    }

    fn needs_fresh_clock(&self) -> bool {
        self.pace != ReplayPace::Rate(Rate::Max)
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn start_window(&mut self, count: Option<u64>) {
        self.window.start(self.stats.packets, count);
        // The window offers its rate from its own start: a stall before it is the warm-up's.
        self.pacer.restart();
    }

    fn requested_pps(&self) -> Option<f64> {
        match self.pace {
            ReplayPace::Rate(r) => r.pps(self.mean_len() + 4.0),
            ReplayPace::FileTimestamps => {
                let pass_ns = self.pass_ns();
                (pass_ns > 0).then(|| self.ends.len() as f64 * 1e9 / pass_ns as f64)
            }
        }
    }

    fn shortfall(&self) -> Shortfall {
        let skipped = self.pacer.skipped_units;
        let behind = match self.pace {
            ReplayPace::Rate(Rate::L1Bps(_)) => skipped / ((self.mean_len() + 24.0) * 8.0),
            _ => skipped,
        };
        Shortfall {
            pool_empty: self.pool_empty,
            behind: behind as u64,
            not_offered: 0,
        }
    }

    fn counters(&self) -> Vec<NfCounter> {
        vec![
            NfCounter::total("passes_done", self.passes_done),
            NfCounter::gauge("frames_in_file", self.ends.len() as u64),
            NfCounter::gauge("oversize_skipped", self.oversize),
            NfCounter::gauge("truncated_in_capture", self.truncated),
            NfCounter::gauge("backwards_timestamps", self.backwards_stamps),
            NfCounter::total("late_over_1ms", self.late),
            NfCounter::total("pool_empty", self.pool_empty),
        ]
    }

    fn info(&self) -> PortInfo {
        let loops = self.loops.map_or("endless".to_string(), |l| l.to_string());
        PortInfo {
            kind: "pcap".into(),
            summary: format!(
                "{} ({} frames), {loops} pass(es), {}",
                self.path.display(),
                self.ends.len(),
                self.pace
            ),
            settings: BTreeMap::from([
                ("file".to_string(), self.path.display().to_string()),
                ("loops".to_string(), loops),
                ("pace".to_string(), self.pace.to_string()),
            ]),
        }
    }
}

/// The wall clock the TSC says it is: read once at open, so stamping a frame costs no
/// syscall.
#[derive(Debug, Clone, Copy)]
struct WallClock {
    start_ns: u128,
    start_tsc: u64,
    tsc_hz: f64,
}

impl WallClock {
    fn new(tsc_hz: f64) -> WallClock {
        WallClock {
            start_ns: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos()),
            start_tsc: sfclab_core::tsc::now(),
            tsc_hz,
        }
    }

    fn at(&self, tsc: u64) -> Duration {
        let since = tsc.saturating_sub(self.start_tsc) as f64 / self.tsc_hz;
        Duration::from_nanos((self.start_ns + (since * 1e9) as u128) as u64)
    }
}

/// Writes one frame stamped `at`; false when it could not (no writer, or a full disk:
/// counted by the caller, never fatal).
fn write_frame(writer: Option<&mut PcapWriter<BufWriter<File>>>, at: Duration, data: &[u8]) -> bool {
    let packet = PcapPacket::new(at, data.len() as u32, data);
    writer.is_some_and(|w| w.write_packet(&packet).is_ok())
}

/// Creates (or truncates) `path` as a nanosecond pcap of Ethernet frames.
fn create_pcap(path: &Path) -> Result<PcapWriter<BufWriter<File>>, String> {
    let name = path.display();
    let file = File::create(path).map_err(|e| format!("{name}: {e}"))?;
    let header = PcapHeader {
        ts_resolution: TsResolution::NanoSecond,
        datalink: DataLink::ETHERNET,
        ..Default::default()
    };
    // A large buffer: one write per ~1 MiB of frames, not per batch.
    PcapWriter::with_header(BufWriter::with_capacity(1 << 20, file), header).map_err(|e| format!("{name}: {e}"))
}

/// A capture written from a chain: every frame it receives, then the buffers go back.
pub struct PcapSink {
    path: PathBuf,
    /// `None` once `finish` closed the file.
    writer: Option<PcapWriter<BufWriter<File>>>,
    clock: WallClock,
    write_errors: u64,
    window: u64,
    stats: PortStats,
}

impl PcapSink {
    /// Creates (or truncates) `path` as a nanosecond pcap of Ethernet frames; `tsc_hz`
    /// turns the TSC into time.
    pub fn create(path: &Path, tsc_hz: f64) -> Result<PcapSink, String> {
        Ok(PcapSink {
            path: path.to_path_buf(),
            writer: Some(create_pcap(path)?),
            clock: WallClock::new(tsc_hz),
            write_errors: 0,
            window: 0,
            stats: PortStats::default(),
        })
    }

    /// Writes what is buffered and closes the file; frames after it are counted as
    /// write errors. Dropping the sink finishes it too, without the error.
    pub fn finish(&mut self) -> Result<(), String> {
        use std::io::Write;
        match self.writer.take() {
            Some(w) => w
                .into_writer()
                .flush()
                .map_err(|e| format!("{}: {e}", self.path.display())),
            None => Ok(()),
        }
    }
}

impl TxPort for PcapSink {
    fn tx<R: Recycle>(&mut self, now: u64, batch: &mut Batch, recycle: &mut R) {
        let at = self.clock.at(now);
        let mut bytes = 0;
        for p in batch.iter() {
            let data = p.data();
            bytes += data.len() as u64;
            self.window += u64::from(p.in_window());
            // A full disk is counted, not fatal: the frames still count as received.
            if !write_frame(self.writer.as_mut(), at, data) {
                self.write_errors += 1;
            }
        }
        self.stats.packets += batch.len() as u64;
        self.stats.bytes += bytes;
        recycle.recycle_batch(batch);
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn window_packets(&self) -> u64 {
        self.window
    }

    fn counters(&self) -> Vec<NfCounter> {
        vec![NfCounter::total("write_errors", self.write_errors)]
    }

    fn info(&self) -> PortInfo {
        PortInfo {
            kind: "pcap".into(),
            summary: format!("written to {}", self.path.display()),
            settings: BTreeMap::from([("file".to_string(), self.path.display().to_string())]),
        }
    }
}

impl Drop for PcapSink {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

/// A tap: an NF wrapped so that every frame leaving it (on any output, including packets it
/// creates or releases during a call) is also written to a pcap file, stamped with the
/// batch's time. What the NF drops or holds is not written. The writing is part of the
/// call, so the NF's cycles include it: a tap is for looking, not for measuring.
pub struct PcapTap {
    inner: Box<dyn NetworkFunction>,
    path: PathBuf,
    /// `None` only while dropping.
    writer: Option<PcapWriter<BufWriter<File>>>,
    clock: WallClock,
    frames: u64,
    write_errors: u64,
}

impl PcapTap {
    /// Wraps `inner`, writing what leaves it to `path` (created or truncated).
    pub fn wrap(inner: Box<dyn NetworkFunction>, path: &Path, tsc_hz: f64) -> Result<PcapTap, String> {
        Ok(PcapTap {
            inner,
            path: path.to_path_buf(),
            writer: Some(create_pcap(path)?),
            clock: WallClock::new(tsc_hz),
            frames: 0,
            write_errors: 0,
        })
    }

    fn write(&mut self, at: Duration, data: &[u8]) {
        if write_frame(self.writer.as_mut(), at, data) {
            self.frames += 1;
        } else {
            self.write_errors += 1;
        }
    }
}

impl NetworkFunction for PcapTap {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn process(&mut self, ctx: &mut Context<'_>, mut batch: BatchView<'_>, verdicts: &mut Verdicts) {
        self.inner.process(ctx, batch.reborrow(), verdicts);
        let at = self.clock.at(ctx.now());
        for i in 0..batch.len() {
            if matches!(verdicts.get(i), Verdict::Continue | Verdict::Out(_)) {
                self.write(at, batch.get(i).data());
            }
        }
        for (p, _) in ctx.emitted_packets() {
            self.write(at, p.data());
        }
    }

    fn outputs(&self) -> Vec<String> {
        self.inner.outputs()
    }

    fn creates_packets(&self) -> bool {
        self.inner.creates_packets()
    }

    fn drop_reasons(&self) -> &'static [&'static str] {
        self.inner.drop_reasons()
    }

    fn hold(&mut self, packet: PacketRef) -> Result<(), PacketRef> {
        self.inner.hold(packet)
    }

    fn held(&self) -> usize {
        self.inner.held()
    }

    fn release_held(&mut self, give_back: &mut dyn FnMut(PacketRef)) {
        self.inner.release_held(give_back)
    }

    fn tick(&mut self, now: u64) {
        self.inner.tick(now)
    }

    fn counters(&self) -> Vec<NfCounter> {
        let mut c = self.inner.counters();
        c.push(NfCounter::total("tap_frames", self.frames));
        c.push(NfCounter::total("tap_write_errors", self.write_errors));
        c
    }
}

impl Drop for PcapTap {
    fn drop(&mut self) {
        use std::io::Write;
        if let Some(w) = self.writer.take()
            && w.into_writer().flush().is_err()
        {
            eprintln!(
                "warning: tap {}: the last frames could not be written",
                self.path.display()
            );
        }
    }
}
