//! Every registered NF, with its default settings, against random and mutated frames:
//! no panic, one verdict per packet, and every buffer accounted for: what the NF did not
//! keep comes back, created packets included (`generated + created = out + dropped +
//! held`), and what it holds (a shaper's queues) is handed over and released whole,
//! checked against the pool exactly.

use proptest::prelude::*;

mod common;
use sfclab_core::{Batch, BatchView, ChainContext, Emitted, PacketPool, Verdict, Verdicts};
use sfclab_nf::NfSpec;
use sfclab_nf::registry::TYPES;
use sfclab_wire::{EthernetRepr, FrameRepr, IpRepr, MacAddr, TransportRepr};

/// Valid frames of the kinds the NFs parse, for mutation.
fn seeds() -> Vec<Vec<u8>> {
    let eth = EthernetRepr {
        src: MacAddr([2, 0, 0, 0, 0, 1]),
        dst: MacAddr([2, 0, 0, 0, 0, 2]),
        vlan_tci: None,
    };
    let v4 = IpRepr::v4([198, 18, 0, 1], [198, 19, 0, 1]);
    let v6 = IpRepr::v6(
        [0x20, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        [0x20, 1, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1],
    );
    let tcp = TransportRepr::Tcp {
        src_port: 1024,
        dst_port: 80,
        seq: 1,
        ack: 0,
        flags: sfclab_wire::TcpHeader::SYN,
        window: 1000,
    };
    let udp = TransportRepr::Udp {
        src_port: 1024,
        dst_port: 53,
    };
    let echo = TransportRepr::Icmp {
        ty: 8,
        code: 0,
        rest: [0, 7, 0, 1],
    };
    let mut out = Vec::new();
    for (ip, t) in [(v4, udp), (v4, tcp), (v4, echo), (v6, udp), (v6, tcp)] {
        for vlan in [None, Some(5)] {
            let r = FrameRepr {
                ethernet: EthernetRepr { vlan_tci: vlan, ..eth },
                ip,
                transport: t,
            };
            let mut f = vec![0u8; 128];
            let n = r.emit(&mut f, &[0x5a; 18]).unwrap();
            f.truncate(n);
            out.push(f);
        }
    }
    // The same frames in ESP, so esp-decrypt's parsing past the SPI is reached.
    let mut encrypt = NfSpec::new("esp-encrypt", esp_settings()).unwrap().build();
    let sealed = common::run(encrypt.as_mut(), &out).0;
    out.extend(sealed);
    // The plain frames in NSH (MD type 1 around the frame, MD type 2 around the
    // datagram), so the SFF and the proxy reach past the header.
    let plain = out[..10].to_vec();
    for settings in nsh_classifiers() {
        let mut classifier = NfSpec::new("nsh-classifier", settings).unwrap().build();
        out.extend(common::run(classifier.as_mut(), &plain).0);
    }
    out
}

/// Two classifiers: MD type 1 around the frame, MD type 2 around the datagram.
fn nsh_classifiers() -> [serde_json::Value; 2] {
    [
        serde_json::json!({"paths": [{"spi": 42, "si": 3, "context": [1, 2, 3, 4]}]}),
        serde_json::json!({"inner": "ip", "paths": [{"spi": 43, "si": 2, "ttl": 2,
            "metadata": [{"class": 1, "type": 2, "value": "0x0102030405"}]}]}),
    ]
}

/// One SA over every packet, for both ESP NFs.
fn esp_settings() -> serde_json::Value {
    serde_json::json!({"sas": [{"spi": 4096, "key": "0x0102030405060708090a0b0c0d0e0f10 11121314",
        "tunnel": {"src": "192.0.2.1", "dst": "192.0.2.2"}, "esn": true}]})
}

/// Every NF with its defaults, and the NFs whose defaults do little (no classes, no
/// signatures, no SAs) configured to work on what the seeds carry.
fn specs() -> Vec<NfSpec> {
    let mut out: Vec<NfSpec> = TYPES
        .iter()
        .map(|t| NfSpec::default_of(t.kind).unwrap_or_else(|e| panic!("{} builds with its defaults: {e}", t.kind)))
        .collect();
    for (kind, settings) in [
        (
            "qos",
            serde_json::json!({"classes": [
                {"name": "dns", "match": {"proto": "udp", "dport": "53"}, "srtcm": {"cir": 8000, "cbs": 100, "ebs": 100}, "yellow": "remark af12"},
                {"name": "flows", "per_flow": 16, "colour_aware": true, "trtcm": {"cir": 8000, "cbs": 64, "pir": 16000, "pbs": 128}, "red": "remark cs1"}
            ]}),
        ),
        (
            "shaper",
            serde_json::json!({"rate": "1Mbit", "queue": 3, "drop": "head", "scheduler": "priority",
                "classes": [{"name": "web", "match": {"dport": "80"}, "rate": "100kbit"}]}),
        ),
        (
            "dpi",
            serde_json::json!({"max_flows": 2, "rules": [
                "alert tcp any any -> any 80 (content:\"|5a 5a|\"; sid:1;)",
                "drop udp any any <> any any (content:\"Z\"; nocase; offset:2; depth:4; sid:2;)",
                "log ip any any -> any any (content:\"zz\"; content:\"Zz\"; sid:3;)"
            ]}),
        ),
        ("esp-encrypt", esp_settings()),
        ("esp-decrypt", {
            let mut s = esp_settings();
            s["sas"][0]["match"] = serde_json::json!({"proto": "udp"});
            s["bypass"] = serde_json::json!([{"proto": "tcp"}]);
            s
        }),
        ("nsh-classifier", nsh_classifiers()[0].clone()),
        ("nsh-classifier", nsh_classifiers()[1].clone()),
        (
            "nsh-sff",
            serde_json::json!({"oam": "forward", "forward": [
                {"spi": 42, "si": 3, "to": "sf"}, {"spi": 42, "si": 2, "decap": true},
                {"spi": 43, "si": 2, "decap": true, "to": "exit"}, {"spi": 43, "si": 1, "to": "sf"}
            ]}),
        ),
        (
            "nsh-proxy",
            serde_json::json!({"nf": {"router": {"routes": ["0.0.0.0/0 192.0.2.1 0", "::/0 2001:db8::1 0"]}}}),
        ),
        (
            "nsh-proxy",
            serde_json::json!({"oam": "forward", "nf": {"esp-encrypt": esp_settings()}}),
        ),
    ] {
        out.push(NfSpec::new(kind, settings).unwrap_or_else(|e| panic!("{kind}: {e}")));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    #[test]
    fn every_nf_takes_any_frame_and_loses_no_buffer(
        picks in proptest::collection::vec((0usize..1000, proptest::collection::vec((0usize..80, any::<u8>()), 0..5), 0usize..130), 1..24),
        junk in proptest::collection::vec(any::<u8>(), 0..100),
    ) {
        let seeds = seeds();
        let mut frames: Vec<Vec<u8>> = picks
            .into_iter()
            .map(|(k, flips, cut)| {
                let mut f = seeds[k % seeds.len()].clone();
                for (at, v) in flips {
                    if let Some(b) = f.get_mut(at) {
                        *b = v;
                    }
                }
                f.truncate(cut.max(1));
                f
            })
            .collect();
        frames.push(junk);
        for spec in specs() {
            let ty = &spec;
            let mut nf = spec.build();
            let capacity = 256;
            let mut pool = PacketPool::new(capacity);
            let mut batch = Batch::new(frames.len());
            pool.alloc_into(&mut batch, frames.len());
            for (p, f) in batch.iter_mut().zip(&frames) {
                p.meta = sfclab_core::PacketMeta::fresh(0, 0, 0);
                p.reset(f.len()).copy_from_slice(f);
            }
            let mut verdicts = Verdicts::for_batch(batch.len());
            let mut emitted = Emitted::default();
            let mut handed = 0u64;
            // Twice: the second pass meets the state the first left.
            for round in 0..2u64 {
                let mut ctx = ChainContext::new(round * 1_000_000, 0, 1.0, &mut pool, &mut emitted);
                nf.process(ctx.nf(), BatchView::new(&mut batch), &mut verdicts);
                // Held packets go to the NF, in batch order, as a runtime gives them.
                let mut refused = 0;
                batch.partition(
                    |i, _| verdicts.get(i) != Verdict::Hold,
                    |_, p| {
                        handed += 1;
                        if let Err(p) = nf.hold(p) {
                            refused += 1;
                            pool.free(p);
                        }
                    },
                );
                prop_assert_eq!(refused, 0, "{}: an NF that holds takes what it asked for", ty.kind());
                verdicts.clear();
                verdicts.begin(batch.len());
            }
            // What it still holds comes back whole.
            let mut released = Vec::new();
            nf.release_held(&mut |p| released.push(p));
            prop_assert_eq!(nf.held(), 0, "{}: held nothing after release", ty.kind());
            for p in released {
                pool.free(p);
            }
            emitted.take_drops(|_, _| {});
            let (created, overflow) = emitted.take_counts();
            let emitted_back: Vec<_> = emitted.drain().map(|(p, _)| p).collect();
            // What it emitted is what it created, and what it held and let go.
            prop_assert!(emitted_back.len() as u64 + overflow >= created, "{}: created = emitted + overflow", ty.kind());
            prop_assert!(emitted_back.len() as u64 + overflow <= created + handed, "{}: emitted only what it created or held", ty.kind());
            for p in emitted_back {
                pool.free(p);
            }
            pool.free_batch(&mut batch);
            prop_assert_eq!(pool.available(), capacity, "{}: every buffer back in the pool", ty.kind());
        }
    }
}
