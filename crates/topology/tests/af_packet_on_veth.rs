//! AF_PACKET ports (TPACKET_V3 RX ring, TPACKET_V2 TX ring, qdisc bypass) on a veth pair
//! between two namespaces: every frame sent arrives, unchanged and in order, and the
//! kernel counts no drop (needs root: CI is root; elsewhere each test says it is
//! skipped, and why).

mod common;

use common::{ONE_AT_A_TIME, open, send_and_receive};
use sfclab_core::{RxPort, TxPort};
use sfclab_io::{AfPacketPort, AfPacketSettings};
use sfclab_topology::Topology;

const NEEDS: &str = "namespaces and AF_PACKET";

fn open_packet(end: &sfclab_topology::Interface, settings: AfPacketSettings) -> AfPacketPort {
    open(end, move |name| AfPacketPort::open(name, &settings))
}

#[test]
#[ignore = "needs root for namespaces and AF_PACKET (CI runs it)"]
fn frames_cross_a_veth_pair_between_af_packet_rings_exactly() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root(NEEDS);
    let mut topo = Topology::new().unwrap();
    let a = topo.namespace("pkt-a").unwrap();
    let b = topo.namespace("pkt-b").unwrap();
    let (a0, b0) = topo.veth((&a, "a0"), (&b, "b0")).unwrap();
    let mut rx = open_packet(&b0, AfPacketSettings::default());
    let mut tx = open_packet(&a0, AfPacketSettings::default());
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
#[ignore = "needs root for namespaces and AF_PACKET (CI runs it)"]
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
    sfclab_topology::require_root(NEEDS);
    let e = AfPacketPort::open("nosuch0", &AfPacketSettings::default())
        .err()
        .unwrap();
    assert!(e.contains("no interface nosuch0"), "{e}");
}

/// `PACKET_FANOUT`: two receiving sockets in one flow-hash group on one interface. Frames
/// of 64 flows sent across the pair are each received exactly once, by one member, every
/// frame of a flow by the same member, and both members get some.
#[test]
#[ignore = "needs root for namespaces and AF_PACKET (CI runs it)"]
fn a_fanout_group_spreads_flows_over_its_members_each_frame_once() {
    use sfclab_core::{Batch, PacketMeta, PacketPool};
    use std::collections::BTreeMap;
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root(NEEDS);
    let mut topo = Topology::new().unwrap();
    let a = topo.namespace("fan-a").unwrap();
    let b = topo.namespace("fan-b").unwrap();
    let (a0, b0) = topo.veth((&a, "a0"), (&b, "b0")).unwrap();
    let mut members = open(&b0, |name| {
        AfPacketPort::open_fanout(name, &AfPacketSettings::default(), 2)
    });
    let mut tx = open_packet(
        &a0,
        AfPacketSettings {
            receive: false,
            ..AfPacketSettings::default()
        },
    );
    let (count, flows) = (4000u32, 64u32);
    let mut pool = PacketPool::new(1024);
    let mut out = Batch::new(32);
    let mut inb = Batch::new(256);
    // seq -> (member, flow)
    let mut seen: BTreeMap<u32, (usize, u32)> = BTreeMap::new();
    let mut next = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while (seen.len() as u32) < count && std::time::Instant::now() < deadline {
        if next < count && next - seen.len() as u32 <= 512 {
            pool.alloc_into(&mut out, 32);
            for (k, p) in out.iter_mut().enumerate() {
                let seq = next + k as u32;
                let mut f = common::frame(seq, 64);
                // A UDP source port per flow: the flow hash the group spreads by.
                f[34..36].copy_from_slice(&(1024 + (seq % flows) as u16).to_be_bytes());
                p.meta = PacketMeta::fresh(0, 0, 0);
                p.reset(64).copy_from_slice(&f);
            }
            next += 32;
            tx.tx(0, &mut out, &mut pool);
        }
        for (m, port) in members.iter_mut().enumerate() {
            port.rx(0, &mut pool, &mut inb);
            for p in inb.iter() {
                let d = p.data();
                let seq = u32::from_be_bytes(d[42..46].try_into().unwrap());
                let flow = u32::from(u16::from_be_bytes(d[34..36].try_into().unwrap())) - 1024;
                assert!(seen.insert(seq, (m, flow)).is_none(), "frame {seq} received twice");
            }
            pool.free_batch(&mut inb);
        }
    }
    assert_eq!(seen.len() as u32, count, "every frame arrives once");
    let mut member_of_flow: BTreeMap<u32, usize> = BTreeMap::new();
    for (seq, (m, flow)) in &seen {
        let owner = *member_of_flow.entry(*flow).or_insert(*m);
        assert_eq!(owner, *m, "frame {seq}: flow {flow} went to two members");
    }
    for m in 0..2 {
        assert!(member_of_flow.values().any(|&o| o == m), "member {m} got no flow");
    }
}
