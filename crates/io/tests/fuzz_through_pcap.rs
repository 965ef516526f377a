//! Malformed frames read from a port are counted drops, never panics: random and mutated
//! frames (empty, truncated headers, wrong lengths, too long for a buffer) written to a
//! capture, replayed through a chain of every registered NF with its defaults, and every
//! packet received or dropped with its cause, exactly, every buffer back.

use proptest::prelude::*;
use sfclab_core::packet::{DATA_ROOM, FLAG_WINDOW};
use sfclab_core::{Batch, PacketMeta, PacketPool, TxPort};
use sfclab_io::{PcapSink, PcapSource};
use sfclab_nf::NfSpec;
use sfclab_nf::registry::TYPES;
use sfclab_wire::{EthernetRepr, FrameRepr, IpRepr, MacAddr, TransportRepr};

fn seed() -> Vec<u8> {
    let frame = FrameRepr {
        ethernet: EthernetRepr {
            src: MacAddr([2, 0, 0, 0, 0, 1]),
            dst: MacAddr([2, 0, 0, 0, 0, 2]),
            vlan_tci: None,
        },
        ip: IpRepr::v4([198, 18, 0, 1], [198, 19, 0, 1]),
        transport: TransportRepr::Udp {
            src_port: 1024,
            dst_port: 53,
        },
    };
    let mut out = vec![0u8; 128];
    let n = frame.emit(&mut out, &[0u8; 64]).expect("a valid frame");
    out.truncate(n);
    out
}

/// A frame: random bytes, or the seed with bytes flipped and its length cut or grown.
fn frame() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..80),
        (prop::collection::vec((0usize..128, any::<u8>()), 0..6), 0usize..200).prop_map(|(flips, len)| {
            let mut f = seed();
            for (i, b) in flips {
                if let Some(x) = f.get_mut(i) {
                    *x = b;
                }
            }
            f.resize(len, 0xa5);
            f
        }),
        Just(vec![0u8; DATA_ROOM + 1]),
    ]
}

fn write(path: &std::path::Path, frames: &[Vec<u8>]) {
    let mut pool = PacketPool::new(8);
    let mut sink = PcapSink::create(path, 2.0e9).unwrap();
    let mut batch = Batch::new(1);
    for f in frames {
        pool.alloc_into(&mut batch, 1);
        let p = batch.get_mut(0);
        p.meta = PacketMeta::fresh(0, 0, FLAG_WINDOW);
        // A frame longer than a buffer cannot be written from one: it goes in cut to fit.
        let n = f.len().min(DATA_ROOM);
        p.reset(n).copy_from_slice(&f[..n]);
        sink.tx(0, &mut batch, &mut pool);
    }
    sink.finish().unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn malformed_frames_through_every_nf_are_conserved(frames in prop::collection::vec(frame(), 1..48)) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("fuzz.pcap");
        write(&path, &frames);
        let source = PcapSource::open(&path, Some(2)).unwrap();
        let in_file = source.frames() as u64;
        let nfs: Vec<_> = TYPES
            .iter()
            .map(|t| (t.kind.to_string(), NfSpec::default_of(t.kind).unwrap().build()))
            .collect();
        let settings = sfclab_runtime::RunSettings {
            count: Some(in_file),
            duration: None,
            warmup: std::time::Duration::ZERO,
            core: None,
            ..Default::default()
        };
        let report = sfclab_runtime::run_compound_on(source, sfclab_traffic::Sink::new(false), nfs, &settings).unwrap();
        prop_assert!(report.conservation.holds, "{}", report.conservation);
        prop_assert_eq!(report.conservation.buffers_leaked, 0);
        prop_assert_eq!(report.window_loss.sent, in_file);
    }
}
