//! sfclab on memif endpoints through the CLI: one sfclab forwarding between two memif
//! interfaces it serves (`--ports memif:A,memif:B`) and another testing across them
//! (`--ports tester:memif:A,memif:B`). No root needed: memif is shared memory and Unix
//! sockets.

use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{assert_follows_schema, sfclab, sfclab_bin, stderr, stdout};

#[test]
fn sfclab_forwards_and_tests_over_memif_and_counts_every_frame() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("in.sock"), dir.path().join("out.sock"));
    let dut_ports = format!("memif:{},memif:{}", a.display(), b.display());
    let tester_ports = format!("tester:memif:{},memif:{}", a.display(), b.display());
    let dut = Command::new(sfclab_bin())
        .args(["run", "--chain", "forwarder", "--ports", &dut_ports, "--core", "1"])
        .args(["--duration", "60s", "--warmup", "0s", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !(a.exists() && b.exists()) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the DUT listens on both sockets"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let tester = Command::new(sfclab_bin())
        .args(["run", "--ports", &tester_ports, "--core", "0"])
        .args([
            "--count", "5000", "--rate", "20kpps", "--warmup", "100ms", "--verify", "--json",
        ])
        .output()
        .unwrap();
    // SAFETY: kill(2) on our own child's pid, which has not been waited for yet.
    unsafe { libc::kill(dut.id() as libc::pid_t, libc::SIGINT) };
    let dut = dut.wait_with_output().unwrap();
    assert!(tester.status.success(), "{}", stderr(&tester));
    let t: Value = serde_json::from_str(&stdout(&tester)).unwrap();
    assert_follows_schema("run-4.json", &t);
    assert_eq!(t["window_loss"]["sent"], 5000);
    assert_eq!(t["window_loss"]["lost"], 0, "{}", t["places"][0]);
    assert_eq!(t["verify_failed"], 0);
    assert_eq!(t["conservation"]["holds"], true);

    assert_eq!(dut.status.code(), Some(130), "{}", stderr(&dut));
    let d: Value = serde_json::from_str(&stdout(&dut)).unwrap();
    assert_follows_schema("run-4.json", &d);
    assert_eq!(d["interrupted"], true);
    assert_eq!(d["conservation"]["holds"], true, "{}", d["conservation"]);
    assert_eq!(d["source"]["kind"], "memif");
    let forwarder = d["places"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "forwarder")
        .unwrap();
    assert_eq!(
        forwarder["packets_out"], t["conservation"]["generated"],
        "the DUT forwarded every frame the tester sent (warm-up included)"
    );
    assert!(!a.exists() && !b.exists(), "the server removed its socket files");
}

#[test]
fn a_bad_memif_endpoint_is_named_with_its_key() {
    for (ports, says) in [
        ("memif:", "socket file's path"),
        ("memif:/tmp/x.sock,role=boss", "role `boss`"),
        ("memif:/tmp/x.sock,ring=1000", "power of two"),
        ("memif:/tmp/x.sock,colour=red", "unknown key `colour`"),
    ] {
        let o = sfclab(&["run", "--chain", "forwarder", "--ports", ports, "--duration", "10ms"]);
        assert!(!o.status.success(), "{ports}");
        assert!(
            stderr(&o).contains(says) && stderr(&o).contains("ports"),
            "{ports}: {}",
            stderr(&o)
        );
    }
}
