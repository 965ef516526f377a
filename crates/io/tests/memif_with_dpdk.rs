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

#[test]
#[ignore = "needs dpdk-testpmd (Debian: apt-get install dpdk) and two cores; CI runs it"]
fn dpdk_net_memif_as_server_accepts_sfclab_as_client_when_installed() {
    use sfclab_io::memif::region::Region;
    use std::os::fd::AsFd;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("memif.sock");
    let _testpmd = Testpmd::start("role=server,id=0", &socket);
    // The socket exists before testpmd has started its port: until then its server
    // answers INIT with "ID not found", and the client tries again, as libmemif does.
    let started = std::time::Instant::now();
    let channel = loop {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "dpdk-testpmd's memif server did not take the interface within 60 s"
        );
        let Ok(channel) = Channel::connect(&socket) else {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        };
        let (hello, _) = channel.recv().unwrap();
        let Msg::Hello {
            min_version,
            max_version,
            max_log2_ring_size,
            ..
        } = hello
        else {
            panic!("HELLO first, got {hello:?}")
        };
        assert!((min_version..=max_version).contains(&VERSION));
        assert!(max_log2_ring_size >= 10);
        channel
            .send(
                &Msg::Init {
                    version: VERSION,
                    id: 0,
                    mode: Mode::Ethernet,
                    secret: String::new(),
                    name: "sfclab".into(),
                },
                None,
            )
            .unwrap();
        match channel.recv().unwrap().0 {
            Msg::Ack => break channel,
            Msg::Disconnect { .. } => std::thread::sleep(Duration::from_millis(100)),
            other => panic!("ACK or DISCONNECT after INIT, got {other:?}"),
        }
    };
    let expect_ack = |what: &str| {
        let (m, _) = channel.recv().unwrap();
        assert_eq!(m, Msg::Ack, "ACK for {what}");
    };
    // Two rings of 1024 descriptors (one each way) at the region's start; DPDK's server
    // checks their cookies when it connects.
    let log2 = 10u8;
    let region = Region::with_rings(
        "sfclab-memif-test",
        2 * ring_bytes(log2),
        &[(0, log2), (ring_bytes(log2), log2)],
    )
    .unwrap();
    channel
        .send(
            &Msg::AddRegion {
                index: 0,
                size: region.len() as u64,
            },
            Some(region.as_fd()),
        )
        .unwrap();
    expect_ack("ADD_REGION");
    for (c2s, offset) in [(true, 0), (false, ring_bytes(log2))] {
        let interrupt = nix::sys::eventfd::EventFd::new().unwrap();
        channel
            .send(
                &Msg::AddRing {
                    c2s,
                    index: 0,
                    region: 0,
                    offset: offset as u32,
                    log2_ring_size: log2,
                    private_hdr_size: 0,
                },
                Some(interrupt.as_fd()),
            )
            .unwrap();
        expect_ack("ADD_RING");
    }
    channel
        .send(
            &Msg::Connect {
                if_name: "sfclab".into(),
            },
            None,
        )
        .unwrap();
    let (connected, _) = channel.recv().unwrap();
    assert!(
        matches!(connected, Msg::Connected { .. }),
        "DPDK's server mapped the rings and connected: {connected:?}"
    );
}
