//! Benchmarks against the real peers (DPDK testpmd, dpdk-test), when they are installed. A test binary
//! of their own: cargo runs test binaries one after another, so their busy-polling
//! processes never starve the timing-sensitive tests in `cli.rs`; within this binary
//! they take turns too, so the peers do not measure each other.

use serde_json::Value;
use std::process::Command;
use std::sync::Mutex;

mod common;
use common::{sfclab, stderr, stdout};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[test]
#[ignore = "needs dpdk-testpmd (Debian package `dpdk`; CI installs it)"]
fn bench_hop_measures_testpmd_when_installed() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    assert!(
        Command::new("dpdk-testpmd").arg("--version").output().is_ok(),
        "this test needs dpdk-testpmd (Debian package `dpdk`; CI installs it)"
    );
    let o = sfclab(&[
        "bench",
        "hop",
        "--hops",
        "1",
        "--repeat",
        "1",
        "--duration",
        "300ms",
        "--warmup",
        "10ms",
        "--no-accounting-compare",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    // testpmd is installed, so it must have run: a skip here is a failure of the peer
    // runner, not something to pass over.
    assert!(
        v["peer_skipped"].is_null(),
        "the installed peer did not run: {}",
        v["peer_skipped"]
    );
    let mpps = v["peer"]["mpps"].as_f64().unwrap();
    assert!(mpps > 1.0, "testpmd forwarded only {mpps} Mpps");
    assert!(v["ratio_n1_vs_peer"].as_f64().unwrap() > 0.0);
}

/// Seed 002's point about stages sharing a core, against the real peer: three
/// busy-polling testpmd processes on two cores collapse, sfclab's stages take turns.
#[test]
#[ignore = "needs dpdk-testpmd (Debian package `dpdk`; CI installs it) and two cores"]
fn shared_core_stages_do_not_collapse_where_testpmd_does() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    assert!(
        Command::new("dpdk-testpmd").arg("--version").output().is_ok(),
        "this test needs dpdk-testpmd (Debian package `dpdk`; CI installs it)"
    );
    let o = sfclab(&["bench", "pipeline", "--repeat", "1", "--duration", "3s", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["schema"], "sfclab.bench.pipeline/2");
    common::assert_follows_schema("bench-pipeline-2.json", &v);
    assert!(
        v["peer_skipped"].is_null(),
        "the installed peer did not run: {}",
        v["peer_skipped"]
    );
    let mpps = |system: &str, setup_starts: &str| {
        v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["system"] == system && r["setup"].as_str().unwrap().starts_with(setup_starts))
            .and_then(|r| r["mpps"].as_f64())
            .unwrap_or_else(|| panic!("no row {system} {setup_starts}: {v}"))
    };
    let testpmd_two = mpps("dpdk-testpmd", "2 processes joined by memif, mac");
    let testpmd_three = mpps("dpdk-testpmd", "3 processes");
    let sfclab_three = mpps("sfclab", "forwarder*3, pbp:2 (stages 1, 3 share core 0), backpressure");
    assert!(
        testpmd_two > 1.0,
        "two testpmd joined by memif forwarded {testpmd_two} Mpps"
    );
    assert!(
        testpmd_three < testpmd_two / 2.0,
        "three testpmd on two cores: {testpmd_three} Mpps"
    );
    assert!(
        sfclab_three > 10.0 * testpmd_three && sfclab_three > 1.0,
        "sfclab three stages {sfclab_three} Mpps vs testpmd {testpmd_three}"
    );
}

#[test]
#[cfg_attr(one_core, ignore = "needs two cores; this machine has one")]
fn bench_ring_measures_the_full_hop_against_a_bare_loop() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let o = sfclab(&["bench", "ring", "--repeat", "1", "--duration", "100ms", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["schema"], "sfclab.bench.ring/2");
    common::assert_follows_schema("bench-ring-2.json", &v);
    for key in [
        "ring_cycles_per_element",
        "full_hop_cycles_per_packet",
        "bare_hop_cycles_per_packet",
        "bi2_cycles_per_packet",
    ] {
        let x = v[key].as_f64().unwrap_or(f64::NAN);
        assert!(x.is_finite() && x > 0.0, "{key} = {x}");
    }
    // Either DPDK's figure or the reason it is missing.
    assert!(
        v["dpdk_ring_cycles_per_element"].is_number() || v["dpdk_skipped"].is_string(),
        "{v}"
    );
}

/// The firewall's classifier against rte_acl on the same ClassBench-style files: every
/// header's first matching rule agrees (the bench fails otherwise), figures are there.
#[test]
fn bench_acl_agrees_with_rte_acl_when_installed() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let args = [
        "bench",
        "acl",
        "--rules",
        "300,3000",
        "--trace",
        "4096",
        "--headers",
        "65536",
        "--repeat",
        "1",
        "--json",
    ];
    let o = sfclab(&args);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["schema"], "sfclab.bench.acl/1");
    common::assert_follows_schema("bench-acl-1.json", &v);
    let installed = Command::new("dpdk-test-acl").arg("--help").output().is_ok();
    for p in v["points"].as_array().unwrap() {
        assert!(p["bitvector_cycles"].as_f64().unwrap() > 0.0, "{p}");
        if !installed {
            eprintln!("skipped the rte_acl comparison: dpdk-test-acl is not installed (Debian package `dpdk-dev`)");
            assert!(p["dpdk_skipped"].is_string(), "{p}");
            continue;
        }
        assert!(p["dpdk_skipped"].is_null(), "the installed peer did not run: {p}");
        assert_eq!(p["agreed"], 4096, "{p}");
        assert_eq!(p["compared"], 4096, "{p}");
        assert!(p["ratio"].as_f64().unwrap() > 0.0, "{p}");
    }
}

/// rte_lpm6 in the same run: the table takes the peer's shape, the ratio is there.
#[test]
#[ignore = "needs dpdk-test (Debian package `dpdk-dev`; CI installs it)"]
fn bench_lpm6_measures_rte_lpm6_when_installed() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    assert!(
        Command::new("dpdk-test").arg("--help").output().is_ok(),
        "this test needs dpdk-test (Debian package `dpdk-dev`; CI installs it)"
    );
    let o = sfclab(&["bench", "lpm6", "--repeat", "1", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(
        v["dpdk_skipped"].is_null(),
        "the installed peer did not run: {}",
        v["dpdk_skipped"]
    );
    assert!(v["shape_source"].as_str().unwrap().contains("lpm6_perf_autotest"));
    assert!(v["single_ratio"].as_f64().unwrap() > 0.0);
}

/// `bench nfs` prices part 2's NFs with their peers in the same run: the qos NF's meters
/// alone beside DPDK's rte_meter (or why rte_meter could not run), the dpi NF beside
/// its matcher alone on the same payloads, and the ESP NFs beside AES-GCM alone and
/// DPDK's crypto PMD; the NSH paths run whole.
#[test]
fn bench_nfs_prices_qos_dpi_and_esp_beside_their_peers() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let o = sfclab(&[
        "bench",
        "nfs",
        "--only",
        "qos,dpi,ipsec,nsh,nsh-firewall",
        "--flows",
        "256",
        "--repeat",
        "1",
        "--duration",
        "50ms",
        "--warmup",
        "20ms",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    common::assert_follows_schema("bench-nfs-7.json", &v);
    let meters = v["meters"].as_array().unwrap();
    assert_eq!(meters.len(), 4, "srTCM and trTCM, blind and aware");
    for m in meters {
        let ours: u64 = m["sfclab_colours"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_u64().unwrap())
            .sum();
        assert_eq!(ours, m["packets"].as_u64().unwrap(), "{m}");
        assert_eq!(ours, 1_000_000, "50 ms windows: a million packets a check");
        match m["rte_meter_cycles"].as_f64() {
            Some(c) => {
                assert!(c > 0.0 && m["ratio"].as_f64().unwrap() > 0.0, "{m}");
                // The same meter, parameters and clock: the colours agree to a fraction.
                let green = |k: &str| m[k][0].as_f64().unwrap();
                let (a, b) = (green("sfclab_colours"), green("rte_meter_colours"));
                assert!((a - b).abs() / b < 0.01, "green {a} against rte_meter's {b}: {m}");
            }
            None => assert!(m["peer_error"].is_string(), "no figure and no reason: {m}"),
        }
    }
    let matcher = v["matcher"].as_array().unwrap();
    assert_eq!(matcher.len(), 2, "64 B and IMIX, the dpi workload's engine");
    for m in matcher {
        assert_eq!(m["workload"], "dpi", "{m}");
        assert!(
            ["vectorscan", "aho-corasick"].contains(&m["engine"].as_str().unwrap()),
            "{m}"
        );
        assert!(m["matcher_gbps"].as_f64().unwrap() > 0.0, "{m}");
        assert!(m["nf_gbps"].as_f64().unwrap() > 0.0, "{m}");
    }
    let crypto = v["crypto"].as_array().unwrap();
    let bytes: Vec<u64> = crypto.iter().map(|c| c["bytes"].as_u64().unwrap()).collect();
    assert_eq!(bytes, [64, 512, 1420]);
    for c in crypto {
        let (encrypt, aead) = (
            c["esp_encrypt_cycles"].as_f64().unwrap(),
            c["aead_cycles"].as_f64().unwrap(),
        );
        assert!(
            aead > 0.0 && encrypt > aead,
            "the NF does the cipher's work and more: {c}"
        );
        assert!(c["esp_decrypt_cycles"].as_f64().unwrap() > 0.0, "{c}");
        match c["pmd_cycles"].as_f64() {
            Some(p) => assert!(p > 0.0 && c["encrypt_vs_pmd"].as_f64().unwrap() > 0.0, "{c}"),
            None => assert!(c["peer_error"].is_string(), "no figure and no reason: {c}"),
        }
        match c["dpdk_esp_cycles"].as_f64() {
            // DPDK's whole ESP does the PMD's cipher and its framing too.
            Some(d) => {
                assert!(d > 0.0 && c["encrypt_vs_dpdk_esp"].as_f64().unwrap() > 0.0, "{c}");
                assert_eq!(c["dpdk_esp_cycles_runs"].as_array().unwrap().len(), 1, "{c}");
            }
            None => assert!(c["dpdk_esp_error"].is_string(), "no figure and no reason: {c}"),
        }
    }
    let ipsec = v["points"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["workload"] == "ipsec");
    for p in ipsec {
        assert_eq!(p["dropped"], 0, "every packet encrypted and decrypted: {p}");
    }
    // NSH paths: classified, forwarded, proxied (through a noop or the firewall) and
    // taken off again, nothing dropped, each NF priced.
    let nsh: Vec<&Value> = v["points"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["workload"].as_str().unwrap().starts_with("nsh"))
        .collect();
    assert_eq!(nsh.len(), 4, "two workloads at 64 B and IMIX");
    for p in nsh {
        assert_eq!(p["dropped"], 0, "{p}");
        assert_eq!(p["nfs"].as_array().unwrap().len(), 4, "{p}");
    }
}

/// sfclab's tester serving two memif sockets, DPDK's `net_memif` the client of both
/// (testpmd io-forwards port 0 to port 1): DPDK's client tries each socket once when
/// its port starts, so the tester listens on both before it waits for either. Every
/// frame comes back, and the sockets are gone after the run.
#[test]
#[ignore = "needs dpdk-testpmd (Debian package `dpdk`; CI installs it) and two cores"]
fn a_tester_serving_two_memif_sockets_is_tested_through_by_a_dpdk_client() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    assert!(
        Command::new("dpdk-testpmd").arg("--version").output().is_ok(),
        "this test needs dpdk-testpmd (Debian package `dpdk`; CI installs it)"
    );
    let dir = tempfile::tempdir().unwrap();
    let (out, back) = (dir.path().join("a.sock"), dir.path().join("b.sock"));
    let ports = format!(
        "tester:memif:{},role=server,memif:{},role=server",
        out.display(),
        back.display()
    );
    let tester = Command::new(common::sfclab_bin())
        .args([
            "run", "--ports", &ports, "--core", "0", "--count", "20000", "--rate", "50kpps",
        ])
        .args(["--warmup", "1s", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    common::wait_for_sockets(&out, &back);
    let spec = sfclab_peers::testpmd::TestpmdSpec {
        forward_core: 1,
        main_core: 0,
        vdevs: vec![
            format!("net_memif0,role=client,socket={},socket-abstract=no", out.display()),
            format!("net_memif1,role=client,socket={},socket-abstract=no", back.display()),
        ],
        mode: "io",
        tx_first: false,
        record_core_cycles: false,
        single_file_segments: false,
        netns: None,
    };
    let prefix = format!("sfclab-two-sockets-{}", std::process::id());
    let testpmd = sfclab_peers::testpmd::Testpmd::start("dpdk-testpmd", &spec, &prefix).unwrap();
    let o = tester.wait_with_output().unwrap();
    testpmd.stop();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["window_loss"]["sent"], 20000, "{v}");
    assert_eq!(v["window_loss"]["lost"], 0, "{}", v["places"]);
    assert_eq!(v["conservation"]["holds"], true, "{}", v["conservation"]);
    assert!(!out.exists() && !back.exists(), "the tester removed its socket files");
}
