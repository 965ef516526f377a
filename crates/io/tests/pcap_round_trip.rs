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
        eprintln!("SKIPPED tshark_reads_what_the_sink_writes: tshark is not installed (apt-get install tshark)");
        return;
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
    assert!(e.contains("text.pcap") && e.contains("not a pcap file"), "{e}");
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
