//! AF_XDP ports on a veth pair between two namespaces the test builds: every frame sent
//! on one end arrives, unchanged and in order, on the other, and the kernel counts no
//! drop (needs root: CI is root; elsewhere each test says it is skipped, and why).

mod common;

use common::{ONE_AT_A_TIME, open, send_and_receive};
use sfclab_core::{RxPort, TxPort};
use sfclab_io::{AfXdpPort, AfXdpSettings, Bind, XdpMode};
use sfclab_topology::Topology;

const NEEDS: &str = "namespaces, BPF and AF_XDP";

fn open_xdp(end: &sfclab_topology::Interface, settings: AfXdpSettings) -> AfXdpPort {
    open(end, move |name| AfXdpPort::open(name, &settings))
}

#[test]
#[ignore = "needs root for namespaces, BPF and AF_XDP (CI runs it)"]
fn frames_cross_a_veth_pair_between_af_xdp_sockets_exactly() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root(NEEDS);
    let mut topo = Topology::new().unwrap();
    let tester = topo.namespace("tester").unwrap();
    let dut = topo.namespace("dut").unwrap();
    let (t0, d0) = topo.veth((&tester, "t0"), (&dut, "d0")).unwrap();

    let mut rx = open_xdp(&d0, AfXdpSettings::default());
    // The tester's end sends now and receives later, in generic mode.
    let mut tx = open_xdp(
        &t0,
        AfXdpSettings {
            xdp_mode: Some(XdpMode::Generic),
            ..AfXdpSettings::default()
        },
    );
    // veth: a native XDP driver, and no zero-copy; both said, not assumed.
    assert_eq!(rx.xdp_mode(), Some(XdpMode::Native));
    assert_eq!(rx.bind(), Bind::Copy);
    assert_eq!(tx.xdp_mode(), Some(XdpMode::Generic));
    assert!(
        RxPort::info(&rx).summary.contains("XDP native, copy bind"),
        "{}",
        RxPort::info(&rx).summary
    );

    let before = d0.counters().unwrap();
    let count = 5000;
    let got = send_and_receive(&mut tx, &mut rx, count, 64);
    assert_eq!(got.len() as u32, count, "every frame arrives");
    assert!(got.iter().copied().eq(0..count), "in order");
    assert_eq!(TxPort::stats(&tx).packets, u64::from(count));
    assert_eq!((TxPort::stats(&tx).dropped, RxPort::stats(&rx).dropped), (0, 0));
    assert_eq!(RxPort::stats(&rx).packets, u64::from(count));
    let after = d0.counters().unwrap().since(&before);
    assert_eq!(after.rx_dropped, 0);
    for c in RxPort::counters(&rx) {
        if c.name.starts_with("kernel_rx") {
            assert_eq!(c.value, 0, "{}", c.name);
        }
    }

    // Full-size frames both ways: the dut answers on the same socket pair reversed.
    let got = send_and_receive(&mut rx, &mut tx, 1000, 1514);
    assert!(got.iter().copied().eq(0..1000), "{} of 1000 came back", got.len());

    // One socket per queue: a second is refused, saying why.
    let name = t0.name().to_string();
    let e = tester
        .run(move || AfXdpPort::open(&name, &AfXdpSettings::default()).err())
        .unwrap()
        .unwrap();
    assert!(e.contains("already has an AF_XDP socket"), "{e}");

    // Dropping the ports detaches their programs: the interfaces have no XDP left.
    drop((rx, tx));
    for end in [&t0, &d0] {
        let link = end.ip(&["-j", "link", "show", "dev", end.name()]).unwrap();
        assert!(!link.contains("\"xdp\""), "{}: {link}", end.name());
    }
}

#[test]
#[ignore = "needs root for namespaces, BPF and AF_XDP (CI runs it)"]
fn a_mode_the_interface_lacks_is_an_error_that_says_so() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root(NEEDS);
    let mut topo = Topology::new().unwrap();
    let a = topo.namespace("a").unwrap();
    let b = topo.namespace("b").unwrap();
    let (a0, _b0) = topo.veth((&a, "a0"), (&b, "b0")).unwrap();
    let name = a0.name().to_string();
    let e = a
        .run(move || {
            AfXdpPort::open(
                &name,
                &AfXdpSettings {
                    bind: Some(Bind::ZeroCopy),
                    ..AfXdpSettings::default()
                },
            )
            .err()
        })
        .unwrap()
        .expect("veth has no zero-copy");
    assert!(e.contains("a0") && e.contains("zero-copy"), "{e}");
    let e = a
        .run(|| AfXdpPort::open("nosuch0", &AfXdpSettings::default()).err())
        .unwrap()
        .unwrap();
    assert!(e.contains("no interface nosuch0"), "{e}");
    let e = AfXdpPort::open(
        "a0",
        &AfXdpSettings {
            ring: 100,
            ..AfXdpSettings::default()
        },
    )
    .err()
    .unwrap();
    assert!(e.contains("power of two"), "{e}");
}

/// Busy polling (`busy_poll`): the socket options are accepted on veth, an empty ring
/// enters the kernel to poll (counted), the summary says so, and the stream still arrives
/// exactly.
#[test]
#[ignore = "needs root for namespaces, BPF and AF_XDP (CI runs it)"]
fn busy_polling_ports_receive_every_frame() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root(NEEDS);
    let mut topo = Topology::new().unwrap();
    let a = topo.namespace("a").unwrap();
    let b = topo.namespace("b").unwrap();
    let (a0, b0) = topo.veth((&a, "a0"), (&b, "b0")).unwrap();
    let busy = AfXdpSettings {
        busy_poll: Some(50),
        ..AfXdpSettings::default()
    };
    let mut rx = open_xdp(&b0, busy.clone());
    let mut tx = open_xdp(&a0, AfXdpSettings { receive: false, ..busy });
    assert!(
        RxPort::info(&rx).summary.contains("busy poll 50 us"),
        "{}",
        RxPort::info(&rx).summary
    );
    let got = send_and_receive(&mut tx, &mut rx, 3000, 64);
    assert!(got.iter().copied().eq(0..3000), "{} of 3000 arrived", got.len());
    // Everything arrived: the ring is empty now, and a receive busy-polls.
    let mut pool = sfclab_core::PacketPool::new(64);
    let mut batch = sfclab_core::Batch::new(32);
    assert_eq!(rx.rx(0, &mut pool, &mut batch), 0);
    let polls = RxPort::counters(&rx)
        .iter()
        .find(|c| c.name == "busy_polls")
        .unwrap()
        .value;
    assert!(polls > 0, "an empty ring busy-polls");
}

/// Sleeping when idle (`xdp_wait: interrupt`): a receiving port with nothing to read
/// sleeps in poll(2) after its spin (counted), and a stream sent meanwhile still arrives
/// whole and in order.
#[test]
#[ignore = "needs root for namespaces, BPF and AF_XDP (CI runs it)"]
fn ports_that_sleep_when_idle_still_receive_every_frame() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root(NEEDS);
    let mut topo = Topology::new().unwrap();
    let a = topo.namespace("a").unwrap();
    let b = topo.namespace("b").unwrap();
    let (a0, b0) = topo.veth((&a, "a0"), (&b, "b0")).unwrap();
    let sleepy = AfXdpSettings {
        wait: sfclab_io::Wait::Interrupt {
            spin: std::time::Duration::ZERO,
        },
        ..AfXdpSettings::default()
    };
    let mut rx = open_xdp(&b0, sleepy.clone());
    let mut tx = open_xdp(
        &a0,
        AfXdpSettings {
            receive: false,
            ..sleepy
        },
    );
    let summary = RxPort::info(&rx).summary;
    assert!(summary.contains("waits by interrupt after 0 us"), "{summary}");
    let sleeps = |rx: &AfXdpPort| RxPort::counters(rx).iter().find(|c| c.name == "sleeps").unwrap().value;
    // Nothing sent yet: a receive sleeps (at most a millisecond) and gets nothing.
    let mut pool = sfclab_core::PacketPool::new(64);
    let mut batch = sfclab_core::Batch::new(32);
    let began = std::time::Instant::now();
    assert_eq!(rx.rx(0, &mut pool, &mut batch), 0);
    assert_eq!(sleeps(&rx), 1);
    assert!(began.elapsed() < std::time::Duration::from_millis(500));
    let got = send_and_receive(&mut tx, &mut rx, 3000, 64);
    assert!(got.iter().copied().eq(0..3000), "{} of 3000 arrived", got.len());
}

/// One socket per queue: a veth pair with two queues, two receiving sockets on one end
/// sharing one redirect program (`open_queues`), and two sending sockets on the other, one
/// per queue. What is sent on queue k arrives on queue k's socket, exactly, and nowhere else;
/// the program goes with the last socket.
#[test]
#[ignore = "needs root for namespaces, BPF and AF_XDP (CI runs it)"]
fn each_queue_has_its_own_socket_and_receives_its_own_frames() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root(NEEDS);
    let mut topo = Topology::new().unwrap();
    let a = topo.namespace("a").unwrap();
    let b = topo.namespace("b").unwrap();
    let (a0, b0) = topo.veth_with_queues((&a, "a0"), (&b, "b0"), 2).unwrap();
    let mut receivers = open(&b0, |name| AfXdpPort::open_queues(name, &AfXdpSettings::default(), 2));
    assert_eq!(receivers.len(), 2);
    assert!(receivers.iter().all(|r| r.xdp_mode() == Some(XdpMode::Native)));
    let mut senders: Vec<AfXdpPort> = (0..2)
        .map(|queue| {
            open_xdp(
                &a0,
                AfXdpSettings {
                    queue,
                    receive: false,
                    ..AfXdpSettings::default()
                },
            )
        })
        .collect();
    for queue in 0..2 {
        let got = send_and_receive(&mut senders[queue], &mut receivers[queue], 2000, 64);
        assert!(got.iter().copied().eq(0..2000), "queue {queue}: {} of 2000", got.len());
    }
    for (queue, r) in receivers.iter().enumerate() {
        assert_eq!(RxPort::stats(r).packets, 2000, "queue {queue} saw only its own frames");
    }
    // A third socket on a queue that has one is refused, saying why.
    let name = b0.name().to_string();
    let e = b
        .run(move || {
            AfXdpPort::open(
                &name,
                &AfXdpSettings {
                    queue: 1,
                    ..AfXdpSettings::default()
                },
            )
            .err()
        })
        .unwrap()
        .unwrap();
    assert!(e.contains("already") || e.contains("busy") || e.contains("Busy"), "{e}");
    let first = receivers.remove(0);
    drop(first);
    let link = b0.ip(&["-j", "link", "show", "dev", "b0"]).unwrap();
    assert!(
        link.contains("\"xdp\""),
        "the program stays while a queue's socket is open: {link}"
    );
    drop(receivers);
    let link = b0.ip(&["-j", "link", "show", "dev", "b0"]).unwrap();
    assert!(
        !link.contains("\"xdp\""),
        "the program goes with the last socket: {link}"
    );
}
