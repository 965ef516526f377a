//! AF_PACKET ports (TPACKET_V3 RX ring, TPACKET_V2 TX ring, qdisc bypass) on a veth pair
//! between two namespaces: every frame sent arrives, unchanged and in order, and the
//! kernel counts no drop (needs root: CI is root; elsewhere each test says it is
//! skipped, and why).

use sfclab_core::{Batch, PacketMeta, PacketPool, RxPort, TxPort};
use sfclab_io::{AfPacketPort, AfPacketSettings};
use sfclab_topology::{Interface, Topology};
use std::time::{Duration, Instant};

/// Each test busy-polls both cores (tester and device under test): run them one at a
/// time, or they starve each other and frames wait past the wire's patience.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let uid = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(1).map(str::to_string));
    if uid.as_deref() == Some("0") {
        return true;
    }
    eprintln!("SKIPPED: needs root for namespaces and AF_PACKET");
    false
}

fn frame(seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]); // local experimental EtherType: no stack takes it
    f[14..18].copy_from_slice(&seq.to_be_bytes());
    f
}

fn open(end: &Interface, settings: AfPacketSettings) -> AfPacketPort {
    let name = end.name().to_string();
    end.namespace()
        .run(move || AfPacketPort::open(&name, &settings))
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn send_and_receive(tx: &mut AfPacketPort, rx: &mut AfPacketPort, count: u32, len: usize) -> Vec<u32> {
    let mut pool = PacketPool::new(1024);
    let (mut out, mut inb) = (Batch::new(32), Batch::new(256));
    let mut received = Vec::new();
    let mut next = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while (received.len() as u32) < count && Instant::now() < deadline {
        if next < count && next - (received.len() as u32) < 512 {
            let n = 32.min(count - next);
            pool.alloc_into(&mut out, n as usize);
            for (k, p) in out.iter_mut().enumerate() {
                p.meta = PacketMeta::fresh(0, 0, 0);
                p.reset(len).copy_from_slice(&frame(next + k as u32, len));
            }
            next += n;
            tx.tx(0, &mut out, &mut pool);
        }
        rx.rx(0, &mut pool, &mut inb);
        for p in inb.iter() {
            assert_eq!(p.len(), len);
            assert_eq!(&p.data()[..14], &frame(0, len)[..14], "headers arrive unchanged");
            received.push(u32::from_be_bytes(p.data()[14..18].try_into().unwrap()));
        }
        pool.free_batch(&mut inb);
        std::thread::yield_now();
    }
    received
}

#[test]
fn frames_cross_a_veth_pair_between_af_packet_rings_exactly() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !root() {
        return;
    }
    let mut topo = Topology::new().unwrap();
    let a = topo.namespace("pkt-a").unwrap();
    let b = topo.namespace("pkt-b").unwrap();
    let (a0, b0) = topo.veth((&a, "a0"), (&b, "b0")).unwrap();
    let mut rx = open(&b0, AfPacketSettings::default());
    let mut tx = open(&a0, AfPacketSettings::default());
    assert!(
        RxPort::info(&rx).summary.contains("TPACKET_V3"),
        "{}",
        RxPort::info(&rx).summary
    );

    let got = send_and_receive(&mut tx, &mut rx, 5000, 64);
    assert_eq!(got.len(), 5000, "every frame arrives");
    assert!(got.iter().copied().eq(0..5000), "in order");
    assert_eq!((TxPort::stats(&tx).packets, TxPort::stats(&tx).dropped), (5000, 0));
    assert_eq!(RxPort::stats(&rx).packets, 5000);
    let kernel = |port: &AfPacketPort, name: &str| {
        RxPort::counters(port)
            .into_iter()
            .find(|c| c.name == name)
            .unwrap()
            .value
    };
    assert_eq!(kernel(&rx, "kernel_rx_dropped"), 0);
    assert_eq!(kernel(&rx, "kernel_rx_packets"), 5000);

    // Full-size frames the other way; the sender does not receive its own frames.
    let got = send_and_receive(&mut rx, &mut tx, 1000, 1514);
    assert!(got.iter().copied().eq(0..1000), "{} of 1000 came back", got.len());
    assert_eq!(
        RxPort::stats(&rx).packets,
        5000,
        "its own transmissions are not received back"
    );
}

#[test]
fn bad_ring_settings_and_missing_interfaces_are_refused() {
    let e = AfPacketPort::open(
        "lo",
        &AfPacketSettings {
            block_size: 1000,
            ..AfPacketSettings::default()
        },
    )
    .err()
    .unwrap();
    assert!(e.contains("power of two"), "{e}");
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !root() {
        return;
    }
    let e = AfPacketPort::open("nosuch0", &AfPacketSettings::default())
        .err()
        .unwrap();
    assert!(e.contains("no interface nosuch0"), "{e}");
}
