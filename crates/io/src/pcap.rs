//! pcap files as ports. [`PcapSource`] reads a whole capture into memory at open (so the
//! data path copies from memory, never reads the disk) and replays it as fast as the
//! chain takes it, looped a given number of times; [`PcapSink`] writes every frame it
//! receives with a nanosecond timestamp, in the format `tshark` and `tcpreplay` read.

#![forbid(unsafe_code)]

use crate::window::Window;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::{DataLink, TsResolution};
use sfclab_core::packet::DATA_ROOM;
use sfclab_core::port::{PortInfo, PortStats};
use sfclab_core::{Batch, NfCounter, PacketMeta, PacketPool, Recycle, RxPort, TxPort};
use std::collections::BTreeMap;
use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A capture replayed into a chain.
pub struct PcapSource {
    path: PathBuf,
    /// Every frame back to back, and where each ends.
    bytes: Vec<u8>,
    ends: Vec<usize>,
    /// Passes over the file; `None`: until the run stops it.
    loops: Option<u64>,
    next: usize,
    passes_done: u64,
    /// Frames in the file the buffers cannot hold (longer than `DATA_ROOM`), skipped at open.
    oversize: u64,
    /// Frames truncated in the capture (captured length below the original), kept as captured.
    truncated: u64,
    window: Window,
    pool_empty: u64,
    stats: PortStats,
}

impl PcapSource {
    /// Reads `path` (classic pcap, Ethernet link type). `loops`: passes over the file
    /// (`None`: endless). Errors name the file and what is wrong with it.
    pub fn open(path: &Path, loops: Option<u64>) -> Result<PcapSource, String> {
        let name = path.display();
        let file = File::open(path).map_err(|e| format!("{name}: {e}"))?;
        let mut reader = PcapReader::new(file).map_err(|e| {
            format!("{name}: not a pcap file ({e}); pcapng captures convert with `editcap -F pcap in.pcapng out.pcap`")
        })?;
        let link = reader.header().datalink;
        if link != DataLink::ETHERNET {
            return Err(format!("{name}: link type {link:?}, sfclab reads Ethernet captures"));
        }
        let (mut bytes, mut ends) = (Vec::new(), Vec::new());
        let (mut oversize, mut truncated) = (0, 0);
        while let Some(packet) = reader.next_packet() {
            let packet = packet.map_err(|e| format!("{name}: packet {}: {e}", ends.len() + oversize as usize + 1))?;
            if packet.data.len() > DATA_ROOM {
                oversize += 1;
                continue;
            }
            truncated += u64::from((packet.data.len() as u32) < packet.orig_len);
            bytes.extend_from_slice(&packet.data);
            ends.push(bytes.len());
        }
        if ends.is_empty() {
            return Err(format!(
                "{name}: no frame sfclab can replay (empty, or all longer than {DATA_ROOM} bytes)"
            ));
        }
        if loops == Some(0) {
            return Err(format!("{name}: loops must be at least 1"));
        }
        Ok(PcapSource {
            path: path.to_path_buf(),
            bytes,
            ends,
            loops,
            next: 0,
            passes_done: 0,
            oversize,
            truncated,
            window: Window::default(),
            pool_empty: 0,
            stats: PortStats::default(),
        })
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
}

impl RxPort for PcapSource {
    fn rx(&mut self, _now: u64, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        let mut want = self.window.room(batch.room(), self.stats.packets);
        if let Some(loops) = self.loops {
            let left = (loops - self.passes_done) as usize * self.ends.len() - self.next;
            want = want.min(left);
        }
        if want == 0 {
            return 0;
        }
        let first = batch.len();
        let got = pool.alloc_into(batch, want);
        if got < want {
            self.pool_empty += 1;
        }
        let mut bytes = 0;
        for k in 0..got {
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
        false
    }

    fn stats(&self) -> PortStats {
        self.stats
    }

    fn start_window(&mut self, count: Option<u64>) {
        self.window.start(self.stats.packets, count);
    }

    fn counters(&self) -> Vec<NfCounter> {
        vec![
            NfCounter::total("passes_done", self.passes_done),
            NfCounter::gauge("frames_in_file", self.ends.len() as u64),
            NfCounter::gauge("oversize_skipped", self.oversize),
            NfCounter::gauge("truncated_in_capture", self.truncated),
            NfCounter::total("pool_empty", self.pool_empty),
        ]
    }

    fn info(&self) -> PortInfo {
        let loops = self.loops.map_or("endless".to_string(), |l| l.to_string());
        PortInfo {
            kind: "pcap".into(),
            summary: format!(
                "{} ({} frames), {loops} pass(es), as fast as the chain takes it",
                self.path.display(),
                self.ends.len()
            ),
            settings: BTreeMap::from([
                ("file".to_string(), self.path.display().to_string()),
                ("loops".to_string(), loops),
            ]),
        }
    }
}

/// A capture written from a chain: every frame it receives, then the buffers go back.
pub struct PcapSink {
    path: PathBuf,
    /// `None` once `finish` closed the file.
    writer: Option<PcapWriter<BufWriter<File>>>,
    /// Wall-clock nanoseconds at open and the TSC then: frames are stamped with the wall
    /// clock the TSC says it is (one clock read per batch, no syscall).
    start_ns: u128,
    start_tsc: u64,
    tsc_hz: f64,
    write_errors: u64,
    window: u64,
    stats: PortStats,
}

impl PcapSink {
    /// Creates (or truncates) `path` as a nanosecond pcap of Ethernet frames; `tsc_hz`
    /// turns the TSC into time.
    pub fn create(path: &Path, tsc_hz: f64) -> Result<PcapSink, String> {
        let name = path.display();
        let file = File::create(path).map_err(|e| format!("{name}: {e}"))?;
        let header = PcapHeader {
            ts_resolution: TsResolution::NanoSecond,
            datalink: DataLink::ETHERNET,
            ..Default::default()
        };
        let writer = PcapWriter::with_header(BufWriter::new(file), header).map_err(|e| format!("{name}: {e}"))?;
        Ok(PcapSink {
            path: path.to_path_buf(),
            writer: Some(writer),
            start_ns: SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos()),
            start_tsc: sfclab_core::tsc::now(),
            tsc_hz,
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
        let since = now.saturating_sub(self.start_tsc) as f64 / self.tsc_hz;
        let at = Duration::from_nanos((self.start_ns + (since * 1e9) as u128) as u64);
        let mut bytes = 0;
        for p in batch.iter() {
            let data = p.data();
            bytes += data.len() as u64;
            self.window += u64::from(p.in_window());
            let packet = PcapPacket::new(at, data.len() as u32, data);
            // A full disk is counted, not fatal: the frames still count as received.
            if self.writer.as_mut().is_none_or(|w| w.write_packet(&packet).is_err()) {
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
