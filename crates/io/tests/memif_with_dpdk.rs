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
    let prefix = format!("sfclab-memif-test-{}", std::process::id());
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
            "--vdev=net_memif0,role=client,id=0,socket={},socket-abstract=no",
            socket.display()
        ))
        .args(["--log-level", "error", "--", "--forward-mode=io", "--stats-period=1"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("dpdk-testpmd starts");
    let _testpmd = Testpmd { child, prefix };
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
    assert_eq!((version, id, mode), (VERSION, 0, Mode::Ethernet));
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
