//! sfclab's memif control channel against DPDK's own `net_memif` (Debian's
//! dpdk-testpmd) as the client: the whole handshake, with the region mapped and every
//! ring's cookie read where DPDK put it.

use sfclab_io::memif::control::{Channel, Listener};
use sfclab_io::memif::layout::{COOKIE, VERSION, ring_bytes};
use sfclab_io::memif::msg::{Mode, Msg};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// testpmd, killed and its runtime directory removed however the test ends.
struct Testpmd {
    child: Child,
    prefix: String,
}

impl Testpmd {
    /// testpmd with one memif port (`memif`: its role and id) on the socket file
    /// `socket`, io forwarding on the second core.
    fn start(memif: &str, socket: &std::path::Path) -> Testpmd {
        let prefix = format!(
            "sfclab-memif-test-{}-{}",
            std::process::id(),
            memif.replace([',', '='], "-")
        );
        let child = Command::new("dpdk-testpmd")
            .args([
                "-l",
                "0,1",
                "--no-huge",
                "-m",
                "1024",
                "--no-pci",
                // One file per memory list: DPDK's zero-copy client hands those files
                // to its server as regions (harmless otherwise).
                "--single-file-segments",
                "--file-prefix",
                &prefix,
            ])
            .arg(format!(
                "--vdev=net_memif0,{memif},socket={},socket-abstract=no",
                socket.display()
            ))
            .args(["--log-level", "error", "--", "--forward-mode=io", "--stats-period=1"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("dpdk-testpmd starts");
        Testpmd { child, prefix }
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{}", self.prefix));
    }
}

fn accept_within(listener: Listener, limit: Duration) -> Channel {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(listener.accept());
    });
    rx.recv_timeout(limit)
        .expect("dpdk-testpmd connected within the limit")
        .expect("accepted")
}

#[test]
#[ignore = "needs dpdk-testpmd (Debian: apt-get install dpdk) and two cores; CI runs it"]
fn dpdk_net_memif_as_client_completes_the_handshake_with_sfclab_as_server_when_installed() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("memif.sock");
    let listener = Listener::bind(&socket).unwrap();
    let _testpmd = Testpmd::start("role=client,id=7", &socket);
    let channel = accept_within(listener, Duration::from_secs(60));

    channel
        .send(
            &Msg::Hello {
                name: "sfclab".into(),
                min_version: VERSION,
                max_version: VERSION,
                max_region: 255,
                max_s2c_rings: 255,
                max_c2s_rings: 255,
                max_log2_ring_size: 14,
            },
            None,
        )
        .unwrap();
    let (init, _) = channel.recv().unwrap();
    let Msg::Init { version, id, mode, .. } = init else {
        panic!("INIT after HELLO, got {init:?}")
    };
    assert_eq!((version, id, mode), (VERSION, 7, Mode::Ethernet));
    channel.send(&Msg::Ack, None).unwrap();

    let mut regions = Vec::new();
    let mut rings = Vec::new();
    loop {
        let (msg, fd) = channel.recv().unwrap();
        match msg {
            Msg::AddRegion { index, size } => {
                assert_eq!(usize::from(index), regions.len(), "regions come in order");
                let file = std::fs::File::from(fd.expect("a region comes with its memory"));
                // SAFETY: a test mapping of a region only DPDK writes, read once.
                let map = unsafe { memmap2::MmapOptions::new().len(size as usize).map(&file) }.unwrap();
                regions.push(map);
            }
            Msg::AddRing {
                c2s,
                region,
                offset,
                log2_ring_size,
                ..
            } => {
                assert!(fd.is_some(), "a ring comes with its eventfd");
                let map = &regions[usize::from(region)];
                let at = offset as usize;
                assert!(
                    at + ring_bytes(log2_ring_size) <= map.len(),
                    "the ring lies inside its region"
                );
                let cookie = u32::from_le_bytes(map[at..at + 4].try_into().unwrap());
                assert_eq!(cookie, COOKIE, "ring cookie at offset {at}");
                rings.push((c2s, log2_ring_size));
            }
            Msg::Connect { .. } => break,
            other => panic!("unexpected {other:?} during the handshake"),
        }
        channel.send(&Msg::Ack, None).unwrap();
    }
    channel
        .send(
            &Msg::Connected {
                if_name: "sfclab".into(),
            },
            None,
        )
        .unwrap();
    assert!(!regions.is_empty());
    assert!(
        rings.iter().any(|r| r.0) && rings.iter().any(|r| !r.0),
        "rings both ways: {rings:?}"
    );
    assert!(
        rings.iter().all(|r| r.1 == 10),
        "DPDK's default 1024-slot rings: {rings:?}"
    );
    channel
        .send(
            &Msg::Disconnect {
                code: 0,
                reason: "test over".into(),
            },
            None,
        )
        .unwrap();
}

/// sfclab sends `n` counted frames to testpmd (io forwarding on its one memif port sends
/// each frame back) and takes them back: every frame returns, whole and in order.
/// With `zero_copy`, sfclab is a zero-copy client: its pool is in shared memory and
/// testpmd reads and writes the frames in it.
fn forward_through_testpmd(role: sfclab_io::memif::Role, zero_copy: bool, testpmd_memif: &str) {
    use sfclab_core::{Batch, PacketPool, RxPort, TxPort};
    use sfclab_io::memif::{Interface, MemifSettings};
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("memif.sock");
    let mut interface = Interface::open(&MemifSettings {
        zero_copy,
        ..MemifSettings::new(&socket, role)
    })
    .unwrap();
    let _testpmd = Testpmd::start(testpmd_memif, &socket);
    let mut port = interface.port(0, true, true).unwrap();
    let mut pool = if zero_copy {
        PacketPool::shared(1024 + 2048, "sfclab-test").unwrap()
    } else {
        PacketPool::new(1024)
    };
    RxPort::attach_pool(&mut port, &pool);
    interface.wait_connected(Duration::from_secs(60)).unwrap();
    let frame = |i: u32| -> Vec<u8> {
        let mut f = vec![0u8; 60 + (i as usize % 8) * 180];
        f[..6].fill(0xff);
        f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes()); // a local experimental EtherType
        f[14..18].copy_from_slice(&i.to_be_bytes());
        f
    };
    let total = 20_000u32;
    let (mut next, mut back) = (0u32, Vec::new());
    let mut batch = Batch::new(32);
    let started = std::time::Instant::now();
    // testpmd starts forwarding a moment after it connects: what it drops before then
    // would not come back, so the stream starts once a first frame made the round trip.
    loop {
        let n = pool.alloc_into(&mut batch, 1);
        batch.get_mut(0).reset(60).copy_from_slice(&frame(u32::MAX)[..60]);
        assert_eq!(n, 1);
        port.tx(0, &mut batch, &mut pool);
        std::thread::sleep(Duration::from_millis(50));
        port.rx(0, &mut pool, &mut batch);
        let echoed = batch.len();
        pool.free_batch(&mut batch);
        if echoed > 0 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "testpmd never forwarded");
    }
    let before_tx = TxPort::stats(&port);
    let before_rx = RxPort::stats(&port);
    while (back.len() as u32) < total && started.elapsed() < Duration::from_secs(120) {
        if next < total && (next as usize) < back.len() + 512 {
            let n = pool.alloc_into(&mut batch, 32.min((total - next) as usize));
            for k in 0..n {
                let f = frame(next + k as u32);
                batch.get_mut(k).reset(f.len()).copy_from_slice(&f);
            }
            let sent = TxPort::stats(&port).packets;
            port.tx(0, &mut batch, &mut pool);
            next += (TxPort::stats(&port).packets - sent) as u32;
        }
        port.rx(0, &mut pool, &mut batch);
        back.extend(batch.iter().map(|p| p.data().to_vec()));
        pool.free_batch(&mut batch);
    }
    let sent = TxPort::stats(&port).since(&before_tx);
    let got = RxPort::stats(&port).since(&before_rx);
    assert_eq!(sent.packets, u64::from(total));
    assert_eq!(
        got.packets,
        u64::from(total),
        "every frame came back: sent {sent:?}, got {got:?}"
    );
    assert_eq!(got.dropped, 0);
    for (i, f) in back.iter().enumerate() {
        assert_eq!(*f, frame(i as u32), "frame {i} whole and in order");
    }
    RxPort::return_buffers(&mut port, &mut pool);
    assert_eq!(pool.in_use(), 0, "every buffer back in the pool");
}

#[test]
#[ignore = "needs dpdk-testpmd (Debian: apt-get install dpdk) and two cores; CI runs it"]
fn a_counted_stream_crosses_dpdk_testpmd_as_server_and_returns_whole_when_installed() {
    forward_through_testpmd(sfclab_io::memif::Role::Client, false, "role=server,id=0");
}

#[test]
#[ignore = "needs dpdk-testpmd (Debian: apt-get install dpdk) and two cores; CI runs it"]
fn a_counted_stream_crosses_dpdk_testpmd_as_client_and_returns_whole_when_installed() {
    forward_through_testpmd(sfclab_io::memif::Role::Server, false, "role=client,id=0");
}

#[test]
#[ignore = "needs dpdk-testpmd (Debian: apt-get install dpdk) and two cores; CI runs it"]
fn a_zero_copy_client_s_stream_crosses_dpdk_testpmd_as_server_and_returns_whole_when_installed() {
    forward_through_testpmd(sfclab_io::memif::Role::Client, true, "role=server,id=0");
}

#[test]
#[ignore = "needs dpdk-testpmd (Debian: apt-get install dpdk) and two cores; CI runs it"]
fn a_counted_stream_crosses_dpdk_testpmd_as_zero_copy_client_and_returns_whole_when_installed() {
    forward_through_testpmd(sfclab_io::memif::Role::Server, false, "role=client,id=0,zero-copy=yes");
}
