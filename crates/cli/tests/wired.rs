//! `sfclab run --ports veth|linux` and `sfclab cleanup` end to end: real namespaces,
//! veth pairs and AF_XDP sockets, built and removed by sfclab (needs root: CI is root;
//! elsewhere each test says it is skipped, and why).

use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{assert_follows_schema, sfclab, sfclab_bin, stderr, stdout};

/// Each test busy-polls both cores (tester and device under test): run them one at a
/// time, or they starve each other and frames wait past the wire's patience.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A short, low-rate wired run: nothing may be lost.
const LOW: [&str; 8] = [
    "--count", "5000", "--rate", "20kpps", "--warmup", "100ms", "--verify", "--json",
];

fn wired_json(extra: &[&str]) -> Value {
    let mut args = vec!["run"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&LOW);
    let o = sfclab(&args);
    assert!(o.status.success(), "sfclab {args:?} failed: {}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).expect("valid JSON");
    assert_follows_schema("run-3.json", &v);
    v
}

/// Starts `sfclab ARGS` (a long wired run) and waits until it has built its two
/// namespaces; the child and its pid.
fn start_until_built(args: &[&str], output: fn() -> Stdio) -> (std::process::Child, u32) {
    let child = Command::new(sfclab_bin())
        .args(args)
        .stdout(output())
        .stderr(output())
        .spawn()
        .unwrap();
    let pid = child.id();
    let started = Instant::now();
    while namespaces_of(pid).len() < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the run built no namespaces"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, pid)
}

fn namespaces_of(pid: u32) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .filter(|n| n.starts_with(&format!("sfclab-{pid}-")))
        .collect()
}

#[test]
fn the_tester_measures_a_linux_forwarding_namespace() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if sfclab_topology::skip_unless_root("namespaces, BPF and AF_XDP") {
        return;
    }
    let v = wired_json(&["--ports", "linux"]);
    assert_eq!(v["conservation"]["holds"], true);
    assert_eq!(v["window_loss"]["sent"], 5000);
    assert_eq!(v["window_loss"]["lost"], 0, "{}", v["places"][0]);
    assert_eq!(v["verify_failed"], 0);
    assert!(v["latency"]["samples"].as_u64().unwrap() > 0);
    assert_eq!(v["source"]["kind"], "wire");
    assert_eq!(v["testbed"]["device_under_test"], "Linux IPv4 forwarding");
    assert!(v.get("dut").is_none());
    assert_eq!(v["wire_loss"]["unaccounted"], 0);
    let ifs = v["testbed"]["interfaces"].as_array().unwrap();
    assert_eq!(ifs.len(), 4);
    // The kernel forwarded every frame the tester sent, warm-up included.
    let sent = v["conservation"]["generated"].as_u64().unwrap();
    let d_in = ifs.iter().find(|i| i["interface"] == "d-in").unwrap();
    assert_eq!(d_in["rx_packets"].as_u64().unwrap(), sent);
    let run_name = v["testbed"]["run_name"].as_str().unwrap();
    let pid: u32 = run_name.split('-').nth(1).unwrap().parse().unwrap();
    assert!(namespaces_of(pid).is_empty(), "the testbed is removed after the run");
}

#[test]
fn a_chain_runs_between_two_veth_namespaces() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if sfclab_topology::skip_unless_root("namespaces, BPF and AF_XDP") {
        return;
    }
    let v = wired_json(&["--ports", "veth", "--chain", "forwarder -> noop"]);
    assert_eq!(v["window_loss"]["lost"], 0, "{}", v["places"][0]);
    assert_eq!(v["verify_failed"], 0);
    let dut = &v["dut"];
    assert_eq!(dut["conservation"]["holds"], true);
    assert_eq!(dut["interrupted"], false);
    assert_eq!(dut["source"]["kind"], "af_xdp");
    assert_eq!(dut["sink"]["kind"], "af_xdp");
    // Every row says what was measured: the XDP mode and bind of each port.
    assert_eq!(dut["source"]["settings"]["xdp_mode"], "native");
    assert_eq!(dut["source"]["settings"]["bind"], "copy");
    assert_eq!(dut["sink"]["settings"]["xdp_mode"], "none (send only)");
    // The DUT took in exactly what the tester sent, and its NFs saw each frame.
    let sent = v["conservation"]["generated"].as_u64().unwrap();
    assert_eq!(dut["generated"].as_u64().unwrap(), sent);
    let nfs = dut["places"].as_array().unwrap();
    assert!(
        nfs.iter()
            .any(|p| p["kind"] == "forwarder" && p["packets_in"].as_u64() == Some(sent))
    );
    assert!(
        nfs.iter()
            .all(|p| p["role"] != "nf" || p["cycles_per_packet"].as_f64().is_some())
    );

    // AF_PACKET rings instead of AF_XDP: the same exactness.
    let v = wired_json(&["--ports", "veth", "--chain", "noop", "--io", "af_packet"]);
    assert_eq!(v["window_loss"]["lost"], 0);
    assert_eq!(v["dut"]["source"]["kind"], "af_packet");
    assert_eq!(v["testbed"]["device_under_test"], "sfclab chain (af_packet)");

    // generic mode, asked for, is what runs and what is reported.
    let v = wired_json(&["--ports", "veth", "--chain", "noop", "--xdp-mode", "generic"]);
    assert_eq!(v["dut"]["source"]["settings"]["xdp_mode"], "generic");
    assert_eq!(v["window_loss"]["lost"], 0);
}

#[test]
fn the_wired_table_shows_both_sides_and_the_kernel_counters() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if sfclab_topology::skip_unless_root("namespaces, BPF and AF_XDP") {
        return;
    }
    let o = sfclab(&[
        "run", "--ports", "veth", "--chain", "noop", "--count", "2000", "--rate", "20kpps", "--warmup", "50ms",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    for needle in [
        "TESTER across sfclab chain",
        "DEVICE UNDER TEST",
        "d-in",
        "t-out",
        "kernel interface counters",
        "lost (whole run)",
        "XDP native, copy bind",
    ] {
        assert!(text.contains(needle), "missing `{needle}` in:\n{text}");
    }
    assert!(!text.contains("INTERRUPTED"), "{text}");
}

#[test]
fn wired_settings_that_cannot_work_are_refused_by_name() {
    let o = sfclab(&["run", "--ports", "veth", "--proto", "tcp", "--size", "64"]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("--size") && stderr(&o).contains("signature"),
        "{}",
        stderr(&o)
    );
    let o = sfclab(&["run", "--xdp-mode", "generic"]);
    assert!(
        stderr(&o).contains("--xdp-mode") && stderr(&o).contains("ports"),
        "{}",
        stderr(&o)
    );
    let o = sfclab(&["run", "--ports", "linux", "--chain", "noop"]);
    assert!(stderr(&o).contains("runs no chain"), "{}", stderr(&o));
    let o = sfclab(&["run", "--ports", "veth", "--placement", "bi:2"]);
    assert!(stderr(&o).contains("pipeline"), "{}", stderr(&o));
    let o = sfclab(&["run", "--io", "af_packet"]);
    assert!(
        stderr(&o).contains("--io") && stderr(&o).contains("ports"),
        "{}",
        stderr(&o)
    );
    let o = sfclab(&["run", "--ports", "veth", "--io", "af_packet", "--xdp-mode", "native"]);
    assert!(
        stderr(&o).contains("--xdp-mode") && stderr(&o).contains("af_packet"),
        "{}",
        stderr(&o)
    );
    let o = sfclab(&["run", "--ports", "wifi"]);
    assert!(stderr(&o).contains("memory, veth or linux"), "{}", stderr(&o));
}

#[test]
fn cleanup_removes_what_a_killed_run_left() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if sfclab_topology::skip_unless_root("namespaces, BPF and AF_XDP") {
        return;
    }
    let (mut child, pid) = start_until_built(
        &[
            "run",
            "--ports",
            "veth",
            "--chain",
            "noop",
            "--duration",
            "60s",
            "--rate",
            "10kpps",
        ],
        Stdio::null,
    );
    // Let it open its sockets and attach its programs, then kill it without warning.
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(namespaces_of(pid).len(), 2, "SIGKILL leaves them behind");
    let o = sfclab(&["cleanup"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stdout(&o).contains(&format!("removed  sfclab-{pid}-")),
        "{}",
        stdout(&o)
    );
    assert!(namespaces_of(pid).is_empty());
    // No link or XDP program of the run is left anywhere: its links lived only in its
    // namespaces, and its programs only on those links.
    let links = Command::new("ip").args(["-j", "link", "show"]).output().unwrap();
    let links = String::from_utf8_lossy(&links.stdout);
    for name in ["t-out", "t-in", "d-in", "d-out"] {
        assert!(
            !links.contains(&format!("\"ifname\":\"{name}\"")),
            "{name} left in the root namespace"
        );
    }
}

#[test]
fn sigterm_ends_a_wired_run_and_removes_its_namespaces() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if sfclab_topology::skip_unless_root("namespaces, BPF and AF_XDP") {
        return;
    }
    let (child, pid) = start_until_built(
        &["run", "--ports", "linux", "--duration", "60s", "--rate", "10kpps"],
        Stdio::piped,
    );
    std::thread::sleep(Duration::from_millis(800));
    Command::new("kill").args(["-TERM", &pid.to_string()]).status().unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(namespaces_of(pid).is_empty(), "namespaces left after SIGTERM");
    // The finished part is kept and marked interrupted.
    assert!(stdout(&o).contains("INTERRUPTED"), "{}\n{}", stdout(&o), stderr(&o));
}

#[test]
fn bench_io_measures_af_xdp_over_a_veth_pair() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if sfclab_topology::skip_unless_root("namespaces, BPF and AF_XDP") {
        return;
    }
    let o = sfclab(&[
        "bench",
        "io",
        "--repeat",
        "1",
        "--duration",
        "500ms",
        "--warmup",
        "100ms",
        "--peer",
        "none",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_follows_schema("bench-io-1.json", &v);
    assert_eq!(v["schema"], "sfclab.bench.io/1");
    assert!(v["sfclab_mpps"].as_f64().unwrap() > 0.0);
    assert_eq!(v["sfclab_xdp_mode"], "native");
    assert_eq!(v["sfclab_bind"], "copy");
    assert_eq!(v["testpmd_skipped"], "--peer none");
    assert!(v["ratio"].is_null());
    // The published schema is current.
    let o = sfclab(&["schema", "bench-io"]);
    let published = std::fs::read_to_string(common::repo().join("docs/schema/bench-io-1.json")).unwrap();
    assert_eq!(
        stdout(&o),
        published,
        "docs/schema/bench-io-1.json is stale: `sfclab schema bench-io`"
    );
}
