//! The tester's wire over an in-memory loopback that loses, delays and reorders frames
//! on purpose: the signature survives with valid checksums, metadata comes back, every
//! packet is received or dropped with its cause, exactly, whether the link sends from
//! the receiving thread or from a thread of its own.

use sfclab_core::port::{PortInfo, PortStats};
use sfclab_core::{Batch, PacketPool, PacketRef, Recycle, RxPort, TxPort};
use sfclab_io::tester_link::{Signature, read_signature, sign};
use sfclab_io::{Line, LinePort, SenderThread, TesterLink};
use sfclab_runtime::{RunSettings, run_compound_on};
use sfclab_traffic::{FrameSizes, Generator, GeneratorConfig, IpVersion, L4, Sink};
use sfclab_wire::build::FrameRepr;
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A frame on the loop: its bytes, copied as a wire copies them (the metadata does not
/// cross; the buffer goes back to the sender's pool).
type Wire = Arc<Mutex<VecDeque<Vec<u8>>>>;

/// The sending half: keeps copies of frames in a queue, losing every `lose_every`-th after taking
/// it (the wire's loss) and refusing every `refuse_every`-th (the tester's own: counted
/// in its stats as dropped, as a full transmit ring is).
struct LoopOut {
    queue: Wire,
    /// Frames taken but kept until `flush` (a copy-mode AF_XDP ring not yet kicked),
    /// when `hold` is set.
    ring: Vec<Vec<u8>>,
    hold: bool,
    lose_every: u64,
    refuse_every: u64,
    seen: u64,
    lost: Arc<Mutex<u64>>,
    stats: PortStats,
}

/// The receiving half: hands frames back while more than `delay` wait, and the last
/// ones one per call (a slow tail), so frames are in flight whenever a phase ends.
struct LoopBack {
    queue: Wire,
    delay: usize,
    stats: PortStats,
}

impl TxPort for LoopOut {
    fn tx<R: Recycle>(&mut self, _now: u64, batch: &mut Batch, recycle: &mut R) {
        while let Some(p) = batch.pop() {
            self.seen += 1;
            if self.refuse_every > 0 && self.seen.is_multiple_of(self.refuse_every) {
                self.stats.dropped += 1;
                recycle.recycle(p);
                continue;
            }
            self.stats.packets += 1;
            if self.lose_every > 0 && self.seen.is_multiple_of(self.lose_every) {
                *self.lost.lock().unwrap() += 1;
            } else if self.hold {
                self.ring.push(p.data().to_vec());
            } else {
                self.queue.lock().unwrap().push_back(p.data().to_vec());
            }
            recycle.recycle(p);
        }
    }
    fn flush(&mut self) {
        self.queue.lock().unwrap().extend(self.ring.drain(..));
    }
    fn stats(&self) -> PortStats {
        self.stats
    }
    fn window_packets(&self) -> u64 {
        0
    }
    // Its refusals named, as a memif ring's are.
    fn drops(&self) -> Vec<(&'static str, u64)> {
        vec![("ring-full", self.stats.dropped)]
    }
    fn info(&self) -> PortInfo {
        PortInfo {
            kind: "loop-out".into(),
            summary: "loop".into(),
            settings: BTreeMap::new(),
        }
    }
}

/// `frame` copied into a buffer of `pool`, as a port receives it.
fn received(frame: &[u8], pool: &mut PacketPool) -> PacketRef {
    let mut p = pool.alloc().expect("the run's pool has room");
    p.reset(frame.len()).copy_from_slice(frame);
    p
}

impl RxPort for LoopBack {
    fn rx(&mut self, _now: u64, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        let mut q = self.queue.lock().unwrap();
        let mut n = 0;
        // Frames come back only while more than `delay` wait, except that the last ones
        // trickle out one per call (a slow tail), so draining is exercised.
        while batch.room() > 0 && (q.len() > self.delay || (!q.is_empty() && n == 0)) {
            let frame = q.pop_front().unwrap();
            batch.push(received(&frame, pool)).ok().unwrap();
            n += 1;
        }
        self.stats.packets += n as u64;
        n
    }
    fn stats(&self) -> PortStats {
        self.stats
    }
    fn start_window(&mut self, _count: Option<u64>) {}
    fn info(&self) -> PortInfo {
        PortInfo {
            kind: "loop-back".into(),
            summary: "loop".into(),
            settings: BTreeMap::new(),
        }
    }
}

fn generator(ip: IpVersion, l4: L4, size: u16, probe_pps: f64) -> Generator {
    let cfg = GeneratorConfig {
        sizes: FrameSizes::Fixed { size },
        ip,
        l4,
        flows: 16,
        probe_pps,
        ..GeneratorConfig::default()
    };
    Generator::new(cfg, 32).unwrap()
}

/// Where a link under test sends from.
#[derive(Clone, Copy, Debug)]
enum Sending {
    /// The receiving thread, a batch before each read.
    Inline,
    /// A thread of its own.
    Thread,
}

const BOTH: [Sending; 2] = [Sending::Inline, Sending::Thread];

/// A link of `source` out through `out` and back through `back`, sending as `sending`.
fn link<O: TxPort + Send + 'static, B: RxPort>(
    source: Generator,
    out: O,
    back: B,
    quiet: Duration,
    sending: Sending,
) -> TesterLink<Generator, O, B> {
    match sending {
        Sending::Inline => TesterLink::new(source, out, back, 32, quiet),
        Sending::Thread => TesterLink::with_sender_thread(
            source,
            out,
            back,
            32,
            quiet,
            SenderThread {
                core: None,
                pool_size: 1024,
            },
        )
        .unwrap(),
    }
}

/// A wire over the loopback: the generator's 64-byte UDP frames (`probe_pps` probes),
/// losing every `lose_every`-th, refusing every `refuse_every`-th, handing back while more
/// than `delay` wait; patience 20 ms. With the count of frames lost on the loop.
fn loop_wire(
    (lose_every, refuse_every, delay): (u64, u64, usize),
    probe_pps: f64,
    sending: Sending,
) -> (TesterLink<Generator, LoopOut, LoopBack>, Arc<Mutex<u64>>) {
    let (out, back, lost) = loop_ports(lose_every, refuse_every, delay);
    let source = generator(IpVersion::V4, L4::Udp, 64, probe_pps);
    (link(source, out, back, Duration::from_millis(20), sending), lost)
}

/// The loop's two ends, as [`loop_wire`] joins them.
fn loop_ports(lose_every: u64, refuse_every: u64, delay: usize) -> (LoopOut, LoopBack, Arc<Mutex<u64>>) {
    let queue = Wire::default();
    let lost = Arc::new(Mutex::new(0));
    let out = LoopOut {
        queue: queue.clone(),
        ring: Vec::new(),
        hold: false,
        lose_every,
        refuse_every,
        seen: 0,
        lost: lost.clone(),
        stats: PortStats::default(),
    };
    let back = LoopBack {
        queue,
        delay,
        stats: PortStats::default(),
    };
    (out, back, lost)
}

#[test]
fn a_signature_keeps_every_checksum_valid_and_reads_back() {
    for (ip, l4, sizes) in [
        (IpVersion::V4, L4::Udp, [64u16, 65, 128, 1518]),
        (IpVersion::V6, L4::Udp, [86, 87, 200, 1518]),
        (IpVersion::V4, L4::Tcp, [78, 79, 300, 1518]),
    ] {
        for size in sizes {
            let mut g = generator(ip, l4, size, 0.0);
            let mut pool = PacketPool::new(64);
            g.prime(&mut pool);
            let mut batch = Batch::new(32);
            g.rx(0, &mut pool, &mut batch);
            for (k, p) in batch.iter_mut().enumerate() {
                let sig = Signature {
                    phase: 1,
                    flags: 3,
                    seq: 1000 + k as u32,
                    timestamp: 0x0123_4567_89ab_cdef + k as u64,
                };
                assert!(sign(p, sig), "{ip:?} {l4:?} {size} B");
                // The frame still parses with every checksum verified.
                FrameRepr::parse(p.data()).unwrap_or_else(|e| panic!("{ip:?} {l4:?} {size} B: {e:?}"));
                assert_eq!(read_signature(p), Some(sig));
            }
            pool.free_batch(&mut batch);
        }
    }
}

/// A buffer that carried a signature out (or a frame with one back in) is stamped again
/// with its old signature still in it: the generator puts the pattern back where any
/// of its sizes carries one, so every later frame checksums right. Without that, the
/// second round's frames fail (the check can fail).
#[test]
fn buffers_that_carried_signatures_sign_right_when_reused() {
    let imix = GeneratorConfig {
        sizes: FrameSizes::imix(),
        flows: 16,
        ..GeneratorConfig::default()
    };
    for restore in [true, false] {
        for cfg in [
            imix.clone(),
            GeneratorConfig {
                sizes: FrameSizes::Fixed { size: 200 },
                ..imix.clone()
            },
        ] {
            let mut g = Generator::new(cfg, 32).unwrap();
            if restore {
                g.restore_tails(sfclab_io::tester_link::SIGNATURE_LEN);
            }
            let mut pool = PacketPool::new(64);
            g.prime(&mut pool);
            let mut bad = 0;
            for round in 0..20u32 {
                let mut batch = Batch::new(32);
                g.rx(u64::from(round) * 1_000_000, &mut pool, &mut batch);
                for (k, p) in batch.iter_mut().enumerate() {
                    let sig = Signature {
                        phase: 1,
                        flags: 0,
                        seq: round * 32 + k as u32,
                        timestamp: 7,
                    };
                    assert!(sign(p, sig));
                    bad += usize::from(FrameRepr::parse(p.data()).is_err());
                }
                pool.free_batch(&mut batch);
            }
            assert_eq!(bad == 0, restore, "restore {restore}: {bad} frames with bad checksums");
        }
    }
}

#[test]
fn frames_too_short_or_not_udp_tcp_carry_no_signature() {
    // 64-byte TCP/IPv4 has 6 bytes of payload; 66-byte IPv6/UDP has none.
    for (ip, l4, size) in [(IpVersion::V4, L4::Tcp, 64), (IpVersion::V6, L4::Udp, 66)] {
        let mut g = generator(ip, l4, size, 0.0);
        let mut pool = PacketPool::new(64);
        g.prime(&mut pool);
        let mut batch = Batch::new(4);
        g.rx(0, &mut pool, &mut batch);
        let p = batch.get_mut(0);
        let before = p.data().to_vec();
        assert!(!sign(
            p,
            Signature {
                phase: 0,
                flags: 0,
                seq: 1,
                timestamp: 2
            }
        ));
        assert_eq!(p.data(), &before[..], "left untouched");
        pool.free_batch(&mut batch);
    }
    let mut pool = PacketPool::new(1);
    let mut p = pool.alloc().unwrap();
    p.reset(60).fill(0); // not even Ethernet we know
    assert!(read_signature(&mut p).is_none());
    pool.free(p);
}

#[test]
fn a_run_across_a_lossy_wire_conserves_every_packet_by_cause() {
    for sending in BOTH {
        let (wire, lost) = loop_wire((97, 0, 40), 1000.0, sending);
        let settings = RunSettings {
            duration: None,
            count: Some(100_000),
            warmup: Duration::from_millis(20),
            verify: true,
            ..RunSettings::default()
        };
        let report = run_compound_on(wire, Sink::new(true), sfclab_core::NamedNfs::new(), &settings).unwrap();
        assert!(report.conservation.holds, "{sending:?}: {}", report.conservation);
        let source = &report.places[0];
        assert_eq!(source.kind, "tester");
        // The window: 100000 generated; every 97th lost on the wire and found as unaccounted.
        assert_eq!(report.window_loss.sent, 100_000, "{sending:?}");
        let unaccounted = source.drops.get("unaccounted").copied().unwrap_or(0);
        assert_eq!(report.window_loss.lost, unaccounted, "{sending:?}: {:?}", source.drops);
        assert!((1025..=1040).contains(&unaccounted), "{sending:?}: {unaccounted}");
        assert_eq!(report.window_loss.received + report.window_loss.lost, 100_000);
        assert_eq!(report.verify_failed, Some(0), "{sending:?}");
        // Probes crossed the wire with their timestamps: latency is measured.
        assert!(report.latency.is_some(), "{sending:?}");
        assert!(*lost.lock().unwrap() >= unaccounted);
        // A sending thread's work is counted apart, in the window.
        let busy = source.counters.get(sfclab_io::tester_link::SENDING_THREAD_BUSY);
        assert_eq!(
            busy.is_some_and(|&t| t > 0),
            matches!(sending, Sending::Thread),
            "{sending:?}"
        );
    }
}

/// Ctrl-C stops the window, not the count: frames still crossing the wire when the stop
/// comes are drained and counted (received, or written off as `unaccounted`), so an
/// interrupted run is conserved exactly and keeps its result.
#[test]
fn a_stopped_run_still_counts_the_frames_on_the_wire() {
    for sending in BOTH {
        let (wire, _) = loop_wire((13, 0, 200), 0.0, sending);
        let stop = sfclab_runtime::Stop::new();
        let stopper = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(150));
                stop.request();
            })
        };
        let settings = RunSettings {
            duration: Some(Duration::from_secs(30)),
            warmup: Duration::from_millis(50),
            stop: Some(stop),
            ..RunSettings::default()
        };
        let report = run_compound_on(wire, Sink::new(false), sfclab_core::NamedNfs::new(), &settings).unwrap();
        stopper.join().unwrap();
        assert!(report.interrupted);
        assert!(report.conservation.holds, "{sending:?}: {}", report.conservation);
        assert!(report.window_loss.sent > 0);
        let unaccounted = report.places[0].drops.get("unaccounted").copied().unwrap_or(0);
        assert_eq!(
            report.window_loss.lost, unaccounted,
            "{sending:?}: {:?}",
            report.places[0].drops
        );
        assert!(unaccounted > 0, "every 13th frame is lost on the wire");
    }
}

/// 20,000 frames through `wire` after a 10 ms warm-up: its report, conservation checked.
fn twenty_thousand_through<O: TxPort + Send + 'static>(
    wire: TesterLink<Generator, O, LoopBack>,
) -> sfclab_runtime::RunReport {
    let settings = RunSettings {
        duration: None,
        count: Some(20_000),
        warmup: Duration::from_millis(10),
        ..RunSettings::default()
    };
    let report = run_compound_on(wire, Sink::new(false), sfclab_core::NamedNfs::new(), &settings).unwrap();
    assert!(report.conservation.holds, "{}", report.conservation);
    report
}

/// Frames the tester's own transmit refused are its shortfall (`not_offered`), not the
/// device's loss: counted as the source's drops by the cause its port names (here a
/// ring full) and in the window's loss, and reported apart so a trial can tell the two.
#[test]
fn frames_the_tester_could_not_send_are_not_offered() {
    for sending in BOTH {
        let (wire, _) = loop_wire((0, 10, 0), 0.0, sending);
        let report = twenty_thousand_through(wire);
        let drops = &report.places[0].drops;
        let refused = drops.get("ring-full").copied().unwrap_or(0);
        assert_eq!(report.not_offered, refused, "{sending:?}");
        assert!(
            (1999..=2001).contains(&refused),
            "{sending:?}: every tenth of 20000: {refused}"
        );
        assert_eq!(report.window_loss.lost, refused, "{sending:?}: nothing else was lost");
        assert_eq!(drops.get("tx-refused"), None, "every refusal has its cause: {drops:?}");
    }
}

/// Behind a line, the tester's refusals say which were the line's (its credit spent) and
/// which the port's (its ring full): a line that is the limit is not the device's.
#[test]
fn what_the_line_refused_is_told_from_what_the_ring_refused() {
    for sending in BOTH {
        let (out, back, _) = loop_ports(0, 10, 0);
        let wire = link(
            generator(IpVersion::V4, L4::Udp, 64, 0.0),
            LinePort::new(out, Some(Line::new(20e6))),
            back,
            Duration::from_millis(20),
            sending,
        );
        let report = twenty_thousand_through(wire);
        let drops = &report.places[0].drops;
        let of = |cause: &str| drops.get(cause).copied().unwrap_or(0);
        // Unpaced, the generator outruns a 20 Mbit/s line (about 30 kpps of 64 B frames).
        assert!(of("line-rate") > 0, "{sending:?}: {drops:?}");
        assert!(of("ring-full") > 0, "every tenth frame the line passed: {drops:?}");
        assert_eq!(of("tx-refused"), 0, "{drops:?}");
        assert_eq!(report.not_offered, of("line-rate") + of("ring-full"), "{drops:?}");
    }
}

/// The receiving half of a wire that holds every frame until its gate opens.
struct Gated {
    queue: Wire,
    open: Arc<std::sync::atomic::AtomicBool>,
    stats: PortStats,
}

impl RxPort for Gated {
    fn rx(&mut self, _now: u64, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        if !self.open.load(std::sync::atomic::Ordering::Relaxed) {
            return 0;
        }
        let mut q = self.queue.lock().unwrap();
        let mut n = 0;
        while batch.room() > 0
            && let Some(frame) = q.pop_front()
        {
            batch.push(received(&frame, pool)).ok().unwrap();
            n += 1;
        }
        self.stats.packets += n as u64;
        n
    }
    fn stats(&self) -> PortStats {
        self.stats
    }
    fn start_window(&mut self, _count: Option<u64>) {}
    fn info(&self) -> PortInfo {
        PortInfo {
            kind: "gated".into(),
            summary: "gated".into(),
            settings: BTreeMap::new(),
        }
    }
}

/// A link whose frames loop back through a gate, closed until the flag is set.
fn gated_link(
    sending: Sending,
) -> (
    TesterLink<sfclab_traffic::Generator, LoopOut, Gated>,
    Arc<std::sync::atomic::AtomicBool>,
) {
    let queue = Wire::default();
    let open = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let back = Gated {
        queue: queue.clone(),
        open: open.clone(),
        stats: PortStats::default(),
    };
    (lossless_link(queue, false, back, sending), open)
}

/// A link that loses nothing on its way out into `queue` (holding what it takes until
/// flushed, with `hold`) and back through `back`.
fn lossless_link<B: RxPort>(
    queue: Wire,
    hold: bool,
    back: B,
    sending: Sending,
) -> TesterLink<sfclab_traffic::Generator, LoopOut, B> {
    let out = LoopOut {
        queue,
        ring: Vec::new(),
        hold,
        lose_every: 0,
        refuse_every: 0,
        seen: 0,
        lost: Arc::new(Mutex::new(0)),
        stats: PortStats::default(),
    };
    let source = generator(IpVersion::V4, L4::Udp, 64, 0.0);
    link(source, out, back, Duration::from_millis(5), sending)
}

/// Reads `wire` into `pool` until it has frames in flight (a sending thread sends on
/// its own time), then finishes it: what it sent is final. Returns that, and how many
/// frames the reads passed on.
fn send_some_then_finish<G: RxPort, O: TxPort, B: RxPort>(
    wire: &mut TesterLink<G, O, B>,
    pool: &mut PacketPool,
) -> (u64, usize) {
    let mut batch = Batch::new(32);
    let mut passed = 0;
    let began = std::time::Instant::now();
    for k in 0.. {
        passed += wire.rx(sfclab_core::tsc::now(), pool, &mut batch);
        batch.drain().for_each(|p| pool.free(p));
        if k >= 10 && wire.in_flight() > 0 {
            break;
        }
        assert!(began.elapsed() < Duration::from_secs(10), "nothing was sent");
    }
    assert!(wire.finish());
    (wire.in_flight(), passed)
}

/// Reads `wire` until it is exhausted (everything back or written off), at most 10 s;
/// the frames passed on.
fn read_until_exhausted<G: RxPort, O: TxPort, B: RxPort>(
    wire: &mut TesterLink<G, O, B>,
    pool: &mut PacketPool,
) -> usize {
    let mut batch = Batch::new(32);
    let mut passed = 0;
    let began = std::time::Instant::now();
    while !wire.exhausted() {
        assert!(began.elapsed() < Duration::from_secs(10));
        passed += wire.rx(sfclab_core::tsc::now(), pool, &mut batch);
        batch.drain().for_each(|p| pool.free(p));
    }
    passed
}

/// Frames written off after `quiet` that come back later in the same phase are late:
/// counted once (as lost), never also as returned, whatever keeps polling the wire.
#[test]
fn frames_back_after_they_were_written_off_are_late_not_returned_twice() {
    for sending in BOTH {
        let (mut wire, open) = gated_link(sending);
        let mut pool = PacketPool::new(4096);
        wire.prime(&mut pool);
        let (sent, passed) = send_some_then_finish(&mut wire, &mut pool);
        assert_eq!(passed, 0, "the gate holds every frame");
        assert!(sent > 0);
        read_until_exhausted(&mut wire, &mut pool);
        assert_eq!(wire.in_flight(), 0);
        open.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut batch = Batch::new(32);
        let late = |wire: &TesterLink<_, _, _>| wire.counters().iter().find(|c| c.name == "late").unwrap().value;
        let began = std::time::Instant::now();
        while late(&wire) < sent && began.elapsed() < Duration::from_secs(10) {
            let back_now = wire.rx(sfclab_core::tsc::now(), &mut pool, &mut batch);
            assert_eq!(back_now, 0, "{sending:?}: nothing written off is passed on");
        }
        let counters: BTreeMap<&str, u64> = wire.counters().iter().map(|c| (c.name, c.value)).collect();
        assert_eq!(counters["late"], sent, "{sending:?}: {counters:?}");
        assert_eq!(counters["returned"], 0);
        assert_eq!(wire.drops().iter().find(|d| d.0 == "unaccounted").unwrap().1, sent);
    }
}

/// A search's next trial over the same wire: frames of the last run's window that come
/// back during the next run's window are late (their phase is the last run's), never
/// taken for this run's; the link's counters stay totals over both sources.
#[test]
fn a_new_run_counts_the_last_runs_stragglers_as_late_and_keeps_totals() {
    for sending in BOTH {
        let (mut wire, open) = gated_link(sending);
        let mut pool = PacketPool::new(4096);
        wire.prime(&mut pool);
        // Run 1's window: every frame held at the gate, then written off.
        wire.start_window(None);
        let (first, _) = send_some_then_finish(&mut wire, &mut pool);
        assert!(first > 0);
        read_until_exhausted(&mut wire, &mut pool);
        let generated_before = wire.stats().packets;
        // Run 2, straight into its window: the gate opens, run 1's frames arrive first.
        wire.begin_run(generator(IpVersion::V4, L4::Udp, 64, 0.0));
        wire.start_window(None);
        open.store(true, std::sync::atomic::Ordering::Relaxed);
        let (_, mut taken) = send_some_then_finish(&mut wire, &mut pool);
        taken += read_until_exhausted(&mut wire, &mut pool);
        let counters: BTreeMap<&str, u64> = wire.counters().iter().map(|c| (c.name, c.value)).collect();
        assert_eq!(counters["late"], first, "{sending:?}: {counters:?}");
        assert_eq!(
            taken as u64, counters["returned"],
            "{sending:?}: only run 2's own frames are passed on"
        );
        assert!(counters["returned"] > 0, "{sending:?}: {counters:?}");
        assert_eq!(counters["in_flight"], 0, "{sending:?}: run 2's frames all came back");
        assert!(wire.stats().packets > generated_before, "totals over both sources");
    }
}

/// Frames a port holds after the tester stopped sending (a transmit ring the kernel
/// sends only when kicked) leave while the tester waits for them: they come back, none
/// is written off.
#[test]
fn a_port_holding_frames_is_flushed_while_the_tester_waits() {
    for sending in BOTH {
        let queue = Wire::default();
        let back = LoopBack {
            queue: queue.clone(),
            delay: 0,
            stats: PortStats::default(),
        };
        let mut wire = lossless_link(queue, true, back, sending);
        let mut pool = PacketPool::new(4096);
        wire.prime(&mut pool);
        let (sent, passed) = send_some_then_finish(&mut wire, &mut pool);
        assert_eq!(passed, 0, "{sending:?}: the port holds every frame");
        let back = read_until_exhausted(&mut wire, &mut pool);
        assert_eq!(back as u64, sent, "{sending:?}: every held frame left and came back");
        assert_eq!(wire.drops().iter().find(|d| d.0 == "unaccounted").unwrap().1, 0);
    }
}

/// Frames that come back after the tester ended (written off, never read again) are
/// taken and counted late once the device has stopped.
#[test]
fn what_comes_back_after_the_end_is_taken_as_late() {
    for sending in BOTH {
        let (mut wire, open) = gated_link(sending);
        let mut pool = PacketPool::new(4096);
        wire.prime(&mut pool);
        let (sent, _) = send_some_then_finish(&mut wire, &mut pool);
        assert!(sent > 0);
        read_until_exhausted(&mut wire, &mut pool);
        open.store(true, std::sync::atomic::Ordering::Relaxed);
        let free_before = pool.available();
        wire.take_late(&mut pool);
        let counters: BTreeMap<&str, u64> = wire.counters().iter().map(|c| (c.name, c.value)).collect();
        assert_eq!(counters["late"], sent, "{sending:?}: {counters:?}");
        assert_eq!(pool.available(), free_before, "{sending:?}: every late frame freed");
    }
}

/// A sending thread cannot hand its frames to a zero-copy port: they would live in
/// its own pool, not the one the port lends its peer.
#[test]
fn a_sending_thread_refuses_a_zero_copy_out_port() {
    struct ZeroCopy(LoopOut);
    impl TxPort for ZeroCopy {
        fn tx<R: Recycle>(&mut self, now: u64, batch: &mut Batch, recycle: &mut R) {
            self.0.tx(now, batch, recycle)
        }
        fn stats(&self) -> PortStats {
            self.0.stats
        }
        fn window_packets(&self) -> u64 {
            0
        }
        fn shared_pool_need(&self) -> Option<usize> {
            Some(64)
        }
        fn info(&self) -> PortInfo {
            self.0.info()
        }
    }
    let (out, back, _) = loop_ports(0, 0, 0);
    let refused = TesterLink::with_sender_thread(
        generator(IpVersion::V4, L4::Udp, 64, 0.0),
        ZeroCopy(out),
        back,
        32,
        Duration::from_millis(5),
        SenderThread {
            core: None,
            pool_size: 64,
        },
    );
    let error = refused.err().expect("refused");
    assert!(error.contains("zero-copy"), "{error}");
}
