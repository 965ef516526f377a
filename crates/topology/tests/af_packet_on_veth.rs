//! AF_PACKET ports (TPACKET_V3 RX ring, TPACKET_V2 TX ring, qdisc bypass) on a veth pair
//! between two namespaces: every frame sent arrives, unchanged and in order, and the
//! kernel counts no drop (needs root: CI is root; elsewhere each test says it is
//! skipped, and why).

mod common;

use common::{ONE_AT_A_TIME, open, send_and_receive};
use sfclab_core::{RxPort, TxPort};
use sfclab_io::{AfPacketPort, AfPacketSettings};
use sfclab_topology::{Topology, skip_unless_root};

const NEEDS: &str = "namespaces and AF_PACKET";

fn open_packet(end: &sfclab_topology::Interface, settings: AfPacketSettings) -> AfPacketPort {
    open(end, move |name| AfPacketPort::open(name, &settings))
}

#[test]
fn frames_cross_a_veth_pair_between_af_packet_rings_exactly() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if skip_unless_root(NEEDS) {
        return;
    }
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
    if skip_unless_root(NEEDS) {
        return;
    }
    let e = AfPacketPort::open("nosuch0", &AfPacketSettings::default())
        .err()
        .unwrap();
    assert!(e.contains("no interface nosuch0"), "{e}");
}
