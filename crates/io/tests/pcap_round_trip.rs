//! A capture written by `PcapSink` is read back by `PcapSource` frame for frame, in
//! order, as many passes as asked; tshark reads it without a malformed frame or a bad
//! checksum; bad files are refused with the file named.

use sfclab_core::packet::FLAG_WINDOW;
use sfclab_core::{Batch, PacketMeta, PacketPool, RxPort, TxPort};
use sfclab_io::{PcapSink, PcapSource};
use sfclab_wire::{EthernetRepr, FrameRepr, IpRepr, MacAddr, TransportRepr};
use std::process::Command;

fn frames(n: u16) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            let r = FrameRepr {
                ethernet: EthernetRepr {
                    src: MacAddr([2, 0, 0, 0, 0, 1]),
                    dst: MacAddr([2, 0, 0, 0, 0, 2]),
                    vlan_tci: None,
                },
                ip: IpRepr::v4([198, 18, 0, 1], [198, 19, 0, 1]),
                transport: TransportRepr::Udp {
                    src_port: 1024 + i,
                    dst_port: 5001,
                },
            };
            let mut f = vec![0u8; 1600];
            let n = r.emit(&mut f, &vec![i as u8; usize::from(i) * 40]).unwrap();
            f.truncate(n);
            f
        })
        .collect()
}

fn write(path: &std::path::Path, frames: &[Vec<u8>]) {
    let mut pool = PacketPool::new(64);
    let mut sink = PcapSink::create(path, 2.0e9).unwrap();
    let mut batch = Batch::new(32);
    for chunk in frames.chunks(7) {
        pool.alloc_into(&mut batch, chunk.len());
        for (p, f) in batch.iter_mut().zip(chunk) {
            p.meta = PacketMeta::fresh(0, 0, FLAG_WINDOW);
            p.reset(f.len()).copy_from_slice(f);
        }
        sink.tx(sfclab_core::tsc::now(), &mut batch, &mut pool);
    }
    assert_eq!(sink.stats().packets, frames.len() as u64);
    assert_eq!(sink.window_packets(), frames.len() as u64);
    sink.finish().unwrap();
    assert_eq!(pool.available(), 64, "every buffer back");
}

#[test]
fn written_captures_replay_frame_for_frame_and_loop() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.pcap");
    let sent = frames(30);
    write(&path, &sent);

    let mut source = PcapSource::open(&path, Some(3)).unwrap();
    assert_eq!(source.frames(), 30);
    let mut pool = PacketPool::new(256);
    let mut batch = Batch::new(32);
    let mut got = Vec::new();
    source.start_window(None);
    while !source.exhausted() {
        let n = source.rx(0, &mut pool, &mut batch);
        assert!(n > 0, "a source that is not exhausted delivers");
        for p in batch.iter() {
            assert!(p.in_window());
            got.push((p.meta.seq, p.data().to_vec()));
        }
        pool.free_batch(&mut batch);
    }
    assert_eq!(got.len(), 90, "three passes");
    for (k, (seq, f)) in got.iter().enumerate() {
        assert_eq!(*seq as usize, k);
        assert_eq!(f, &sent[k % 30], "frame {k}");
    }
    assert_eq!(source.rx(0, &mut pool, &mut batch), 0, "nothing after the last pass");
    assert_eq!(source.stats().packets, 90);
    // A window of a count stops the source there, endless loops or not.
    let mut endless = PcapSource::open(&path, None).unwrap();
    endless.start_window(Some(45));
    let mut total = 0;
    while !endless.exhausted() {
        total += endless.rx(0, &mut pool, &mut batch);
        pool.free_batch(&mut batch);
    }
    assert_eq!(total, 45);
}

#[test]
#[ignore = "needs tshark (Debian package tshark; CI installs it and runs it)"]
fn tshark_reads_what_the_sink_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("out.pcap");
    write(&path, &frames(12));
    let Ok(out) = Command::new("tshark")
        .args(["-n", "-r"])
        .arg(&path)
        .args([
            "-o",
            "udp.check_checksum:TRUE",
            "-o",
            "ip.check_checksum:TRUE",
            "-T",
            "fields",
            "-e",
            "frame.number",
            "-e",
            "_ws.expert.message",
            "-e",
            "_ws.malformed",
        ])
        .output()
    else {
        panic!("tshark is not installed (Debian package `tshark`)");
    };
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 12, "{text}");
    let bad: Vec<&str> = text
        .lines()
        .filter(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("malformed") || l.contains("bad checksum") || l.contains("incorrect")
        })
        .collect();
    assert!(bad.is_empty(), "{bad:?}");
}

#[test]
fn bad_files_are_refused_with_the_file_named() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.pcap");
    assert!(PcapSource::open(&missing, None).err().unwrap().contains("missing.pcap"));
    let text = dir.path().join("text.pcap");
    std::fs::write(&text, "not a capture at all").unwrap();
    let e = PcapSource::open(&text, None).err().unwrap();
    assert!(e.contains("text.pcap") && e.contains("not a pcap"), "{e}");
    let empty = dir.path().join("empty.pcap");
    write(&empty, &[]);
    let e = PcapSource::open(&empty, None).err().unwrap();
    assert!(e.contains("no frame"), "{e}");
    let good = dir.path().join("good.pcap");
    write(&good, &frames(2));
    assert!(PcapSource::open(&good, Some(0)).err().unwrap().contains("at least 1"));
}

/// A capture through a real chain to a capture: NAT44 translates every replayed frame,
/// the output file holds exactly what the sink counted, every packet is conserved, and
/// every written frame parses with valid checksums.
#[test]
fn a_capture_runs_through_nat44_into_a_capture() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.pcap");
    let output = dir.path().join("out.pcap");
    write(&input, &frames(20));
    let source = PcapSource::open(&input, None).unwrap();
    let sink = PcapSink::create(&output, sfclab_core::tsc::hz()).unwrap();
    let nfs = vec![(
        "nat".to_string(),
        sfclab_nf::NfSpec::default_of("nat44").unwrap().build(),
    )];
    let settings = sfclab_runtime::RunSettings {
        count: Some(5_000),
        duration: None,
        warmup: std::time::Duration::from_millis(10),
        core: None,
        ..Default::default()
    };
    let report = sfclab_runtime::run_compound_on(source, sink, nfs, &settings).unwrap();
    assert!(report.conservation.holds, "{}", report.conservation);
    assert_eq!(report.window_loss.sent, 5_000);
    assert_eq!(report.source.kind, "pcap");
    let written = PcapSource::open(&output, Some(1)).unwrap();
    assert_eq!(
        written.frames() as u64,
        report.conservation.received,
        "the file holds what the sink counted"
    );
    for i in 0..written.frames() {
        let (frame, _) = FrameRepr::parse(written.frame(i)).expect("checksums valid after NAT");
        let IpRepr::V4 { src, .. } = frame.ip else {
            panic!("IPv4")
        };
        assert_ne!(src, [198, 18, 0, 1], "frame {i}: the inside source was translated");
    }
}

/// Writes `frames` as a pcap with the given timestamps (nanoseconds).
fn write_stamped(path: &std::path::Path, frames: &[Vec<u8>], stamps_ns: &[u64]) {
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    let header = PcapHeader {
        ts_resolution: pcap_file::TsResolution::NanoSecond,
        datalink: pcap_file::DataLink::ETHERNET,
        ..Default::default()
    };
    let mut w = PcapWriter::with_header(std::fs::File::create(path).unwrap(), header).unwrap();
    for (f, &ns) in frames.iter().zip(stamps_ns) {
        let at = std::time::Duration::from_nanos(1_700_000_000_000_000_000 + ns);
        w.write_packet(&PcapPacket::new(at, f.len() as u32, f)).unwrap();
    }
}

/// Pulls every frame `source` has due at `now`.
fn due_at(source: &mut PcapSource, now: u64, pool: &mut PacketPool) -> usize {
    let mut batch = Batch::new(256);
    let n = source.rx(now, pool, &mut batch);
    pool.free_batch(&mut batch);
    n
}

/// pcapng files are read: interfaces with their own timestamp resolutions (the default
/// microseconds, nanoseconds, and a binary 2^-10 s), and simple packet blocks (no
/// timestamp: they follow the frame before). Frames and relative timestamps come out as
/// written.
#[test]
fn pcapng_files_are_read_with_each_interfaces_timestamp_resolution() {
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketBlock;
    use pcap_file::pcapng::blocks::interface_description::{InterfaceDescriptionBlock, InterfaceDescriptionOption};
    use pcap_file::pcapng::blocks::simple_packet::SimplePacketBlock;
    use pcap_file::pcapng::{Block, PcapNgWriter};
    use std::borrow::Cow;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mixed.pcapng");
    let sent = frames(4);
    let mut w = PcapNgWriter::new(std::fs::File::create(&path).unwrap()).unwrap();
    let idb = |resol: Option<u8>| {
        Block::InterfaceDescription(InterfaceDescriptionBlock {
            linktype: pcap_file::DataLink::ETHERNET,
            snaplen: 0,
            options: resol.map(InterfaceDescriptionOption::IfTsResol).into_iter().collect(),
        })
    };
    w.write_block(&idb(None)).unwrap(); // interface 0: microseconds
    w.write_block(&idb(Some(9))).unwrap(); // interface 1: nanoseconds
    w.write_block(&idb(Some(0x80 | 10))).unwrap(); // interface 2: 1/1024 s
    let epb = |interface_id: u32, raw: u64, data: &[u8]| {
        Block::EnhancedPacket(EnhancedPacketBlock {
            interface_id,
            // pcap-file carries the raw count in a Duration's nanoseconds.
            timestamp: std::time::Duration::from_nanos(raw),
            original_len: data.len() as u32,
            data: Cow::Owned(data.to_vec()),
            options: vec![],
        })
    };
    let base_us = 1_700_000_000_000_000u64;
    w.write_block(&epb(0, base_us, &sent[0])).unwrap();
    w.write_block(&epb(1, base_us * 1000 + 1_500_000, &sent[1])).unwrap(); // +1.5 ms
    w.write_block(&epb(2, (base_us / 1_000_000) * 1024 + 3, &sent[2]))
        .unwrap(); // +2.9296875 ms
    w.write_block(&Block::SimplePacket(SimplePacketBlock {
        original_len: sent[3].len() as u32,
        data: Cow::Owned(sent[3].clone()),
    }))
    .unwrap();
    drop(w);

    let source = PcapSource::open(&path, Some(1)).unwrap();
    assert_eq!(source.frames(), 4);
    for (i, f) in sent.iter().enumerate() {
        assert_eq!(source.frame(i), &f[..], "frame {i}");
    }
    assert_eq!(source.stamp_ns(0), 0);
    assert_eq!(source.stamp_ns(1), 1_500_000);
    assert_eq!(source.stamp_ns(2), 2_929_687);
    assert_eq!(
        source.stamp_ns(3),
        2_929_687,
        "a simple packet follows the frame before it"
    );
}

/// What tshark's own tools write as pcapng (editcap converting sfclab's pcap) reads back
/// frame for frame, with the same relative timestamps.
#[test]
fn pcapng_written_by_editcap_replays_like_the_pcap_it_came_from() {
    let dir = tempfile::tempdir().unwrap();
    let (pcap, pcapng) = (dir.path().join("in.pcap"), dir.path().join("in.pcapng"));
    let stamps: Vec<u64> = (0..10).map(|i| i * 123_457).collect();
    write_stamped(&pcap, &frames(10), &stamps);
    let Ok(out) = Command::new("editcap")
        .args(["-F", "pcapng"])
        .arg(&pcap)
        .arg(&pcapng)
        .output()
    else {
        eprintln!(
            "SKIPPED pcapng_written_by_editcap_replays_like_the_pcap_it_came_from: editcap is not installed (apt-get install tshark)"
        );
        return;
    };
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (a, b) = (
        PcapSource::open(&pcap, Some(1)).unwrap(),
        PcapSource::open(&pcapng, Some(1)).unwrap(),
    );
    assert_eq!(a.frames(), 10);
    assert_eq!(b.frames(), 10);
    for (i, &stamp) in stamps.iter().enumerate() {
        assert_eq!(a.frame(i), b.frame(i), "frame {i}");
        assert_eq!(b.stamp_ns(i), stamp, "timestamp {i}");
    }
}

/// At a packet rate the replay releases frames as the clock earns them; at the file's
/// timestamps it keeps the file's gaps, and each further pass starts one mean gap after
/// the last frame. Driven by a synthetic clock of 1 tick per nanosecond.
#[test]
fn replays_are_paced_at_a_rate_or_at_the_files_timestamps() {
    use sfclab_io::ReplayPace;
    use sfclab_traffic::Rate;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("paced.pcap");
    // Frames at 0, 1 ms and 3 ms: a pass lasts 3 ms plus the mean gap of 1.5 ms.
    write_stamped(&path, &frames(3), &[0, 1_000_000, 3_000_000]);
    let mut pool = PacketPool::new(512);
    let t0 = 1_000_000_000u64;

    let mut at_rate = PcapSource::open(&path, None)
        .unwrap()
        .paced(ReplayPace::Rate(Rate::Pps(1e6)), 1e9, 32);
    assert!(at_rate.needs_fresh_clock());
    assert_eq!(at_rate.requested_pps(), Some(1e6));
    at_rate.start_window(None);
    assert_eq!(due_at(&mut at_rate, t0, &mut pool), 0, "nothing earned at the start");
    assert_eq!(due_at(&mut at_rate, t0 + 10_000, &mut pool), 10, "10 us at 1 Mpps");
    assert_eq!(
        due_at(&mut at_rate, t0 + 10_000, &mut pool),
        0,
        "nothing more at the same instant"
    );
    assert_eq!(due_at(&mut at_rate, t0 + 15_000, &mut pool), 5);

    let mut by_file = PcapSource::open(&path, Some(2))
        .unwrap()
        .paced(ReplayPace::FileTimestamps, 1e9, 32);
    by_file.start_window(None);
    let steps = [
        (0, 1),          // the first frame at once
        (999_999, 0),    // the second is due at 1 ms
        (1_000_000, 1),  //
        (2_999_999, 0),  //
        (3_000_000, 1),  // the pass ends at 3 ms
        (4_499_999, 0),  // the next starts 1.5 ms later
        (4_500_000, 1),  //
        (20_000_000, 2), // late: the rest of the pass at once
        (90_000_000, 0), // two passes asked, two done
    ];
    for (at, want) in steps {
        assert_eq!(due_at(&mut by_file, t0 + at, &mut pool), want, "at {at} ns");
    }
    assert!(by_file.exhausted());
    assert_eq!(
        by_file.late(),
        2,
        "the two frames released at 20 ms were due at 5.5 and 7.5 ms"
    );
    let pps = by_file.requested_pps().unwrap();
    assert!((pps - 3.0 / 4.5e-3).abs() < 1e-6, "{pps}");
    assert_eq!(pool.available(), 512, "every buffer back");
}
