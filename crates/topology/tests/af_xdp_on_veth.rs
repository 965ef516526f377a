//! AF_XDP ports on a veth pair between two namespaces the test builds: every frame sent
//! on one end arrives, unchanged and in order, on the other, and the kernel counts no
//! drop (needs root: CI is root; elsewhere each test says it is skipped, and why).

use sfclab_core::{Batch, PacketMeta, PacketPool, RxPort, TxPort};
use sfclab_io::{AfXdpPort, AfXdpSettings, Bind, XdpMode};
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
    eprintln!("SKIPPED: needs root for namespaces, BPF and AF_XDP");
    false
}

/// A UDP-in-IPv4 frame from `a` to `b` whose payload carries `seq`.
fn frame(seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[42..46].copy_from_slice(&seq.to_be_bytes());
    f
}

fn open(end: &Interface, settings: AfXdpSettings) -> AfXdpPort {
    let name = end.name().to_string();
    end.namespace()
        .run(move || AfXdpPort::open(&name, &settings))
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Sends `count` frames of `len` bytes from `tx` in batches of 32, paced so no ring
/// overflows, and receives them on `rx`; returns the sequence numbers received in order.
fn send_and_receive(tx: &mut AfXdpPort, rx: &mut AfXdpPort, count: u32, len: usize) -> Vec<u32> {
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
            assert_eq!(&p.data()[..42], &frame(0, len)[..42], "headers arrive unchanged");
            received.push(u32::from_be_bytes(p.data()[42..46].try_into().unwrap()));
        }
        pool.free_batch(&mut inb);
        std::thread::yield_now();
    }
    received
}

#[test]
fn frames_cross_a_veth_pair_between_af_xdp_sockets_exactly() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !root() {
        return;
    }
    let mut topo = Topology::new().unwrap();
    let tester = topo.namespace("tester").unwrap();
    let dut = topo.namespace("dut").unwrap();
    let (t0, d0) = topo.veth((&tester, "t0"), (&dut, "d0")).unwrap();

    let mut rx = open(&d0, AfXdpSettings::default());
    // The tester's end sends now and receives later, in generic mode.
    let mut tx = open(
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
fn a_mode_the_interface_lacks_is_an_error_that_says_so() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !root() {
        return;
    }
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
