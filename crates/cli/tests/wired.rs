//! `sfclab run --ports veth|linux` and `sfclab cleanup` end to end: real namespaces,
//! veth pairs and AF_XDP sockets, built and removed by sfclab (needs root: CI is root;
//! elsewhere each test says it is skipped, and why).

use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{assert_follows_schema, namespaces_of, sfclab, sfclab_bin, stderr, stdout};

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
    assert_follows_schema("run-4.json", &v);
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

#[test]
#[ignore = "needs root for namespaces, BPF and AF_XDP (CI runs it)"]
fn the_tester_measures_a_linux_forwarding_namespace() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root("namespaces, BPF and AF_XDP");
    let v = wired_json(&["--ports", "linux"]);
    assert_eq!(v["conservation"]["holds"], true);
    assert_eq!(v["window_loss"]["sent"], 5000);
    assert_eq!(v["window_loss"]["lost"], 0, "{}", v["places"][0]);
    assert_eq!(v["verify_failed"], 0);
    assert!(v["latency"]["samples"].as_u64().unwrap() > 0);
    assert_eq!(v["source"]["kind"], "tester");
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
#[ignore = "needs root for namespaces, BPF and AF_XDP (CI runs it)"]
fn a_chain_runs_between_two_veth_namespaces() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root("namespaces, BPF and AF_XDP");
    let v = wired_json(&["--ports", "veth", "--chain", "forwarder -> noop"]);
    assert_eq!(v["window_loss"]["lost"], 0, "{}", v["places"][0]);
    assert_eq!(v["verify_failed"], 0);
    assert_eq!(v["dut"].as_array().map(Vec::len), Some(1), "one replica");
    let dut = &v["dut"][0];
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
    assert_eq!(v["dut"][0]["source"]["kind"], "af_packet");
    assert_eq!(v["testbed"]["device_under_test"], "sfclab chain (af_packet)");

    // generic mode, asked for, is what runs and what is reported.
    let v = wired_json(&["--ports", "veth", "--chain", "noop", "--xdp-mode", "generic"]);
    assert_eq!(v["dut"][0]["source"]["settings"]["xdp_mode"], "generic");
    assert_eq!(v["window_loss"]["lost"], 0);
}

#[test]
#[ignore = "needs root for namespaces, BPF and AF_XDP (CI runs it)"]
fn the_wired_table_shows_both_sides_and_the_kernel_counters() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root("namespaces, BPF and AF_XDP");
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
    assert!(stderr(&o).contains("none runs"), "{}", stderr(&o));
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
    let o = sfclab(&["run", "--busy-poll", "50"]);
    assert!(
        stderr(&o).contains("--busy-poll") && stderr(&o).contains("ports"),
        "{}",
        stderr(&o)
    );
    let o = sfclab(&["run", "--ports", "veth", "--io", "af_packet", "--busy-poll", "50"]);
    assert!(
        stderr(&o).contains("--busy-poll") && stderr(&o).contains("af_packet"),
        "{}",
        stderr(&o)
    );
    let o = sfclab(&["run", "--chain", "forwarder", "--ports", "dut:a,b", "--rate", "1Mpps"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--rate") && stderr(&o).contains("generates nothing"),
        "{}",
        stderr(&o)
    );
    let o = sfclab(&["run", "--ports", "wifi"]);
    assert!(
        stderr(&o).contains("memory, veth, linux, dut:IN,OUT, tester:OUT,IN or memif:PATH"),
        "{}",
        stderr(&o)
    );
}

#[test]
#[ignore = "needs root for namespaces, BPF and AF_XDP (CI runs it)"]
fn cleanup_removes_what_a_killed_run_left() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root("namespaces, BPF and AF_XDP");
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

fn ovs_installed() -> bool {
    sfclab_topology::ovs::installed()
}

/// After SIGKILL of a run whose chain is Open vSwitch, `sfclab cleanup` leaves no
/// namespace, no OVS process and no OVS file of the run behind.
#[test]
#[ignore = "needs root for namespaces, BPF and AF_XDP, and Open vSwitch (CI runs it)"]
fn cleanup_removes_the_ovs_daemons_of_a_killed_run() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root("namespaces, BPF and AF_XDP");
    assert!(
        ovs_installed(),
        "needs Open vSwitch (apt-get install openvswitch-switch)"
    );
    let (mut child, pid) = start_until_built(
        &[
            "run",
            "--chaining",
            "ovs",
            "--chain",
            "forwarder*2",
            "--duration",
            "60s",
            "--rate",
            "10kpps",
        ],
        Stdio::null,
    );
    let switch_ns = format!("sfclab-{pid}-0-switch");
    let pids_in = |ns: &str| {
        let out = Command::new("ip").args(["netns", "pids", ns]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).split_whitespace().count()
    };
    let started = Instant::now();
    while pids_in(&switch_ns) < 2 {
        assert!(started.elapsed() < Duration::from_secs(30), "OVS did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(pids_in(&switch_ns), 2, "SIGKILL leaves the daemons running");
    let state = std::env::temp_dir().join(format!("{switch_ns}.d"));
    assert!(state.exists(), "the switch keeps its files in {}", state.display());
    let o = sfclab(&["cleanup"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(namespaces_of(pid).is_empty());
    assert!(!state.exists(), "{} left behind", state.display());
    // Cleanup returns once the daemons it killed are gone, not while they exit.
    let ps = Command::new("ps").args(["-eo", "stat,args"]).output().unwrap();
    let running: Vec<_> = String::from_utf8_lossy(&ps.stdout)
        .lines()
        .filter(|l| l.contains(&switch_ns) && !l.starts_with('Z'))
        .map(str::to_string)
        .collect();
    assert!(running.is_empty(), "an OVS daemon of the run still runs: {running:?}");
}

#[test]
#[ignore = "needs root for namespaces, BPF and AF_XDP (CI runs it)"]
fn sigterm_ends_a_wired_run_and_removes_its_namespaces() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root("namespaces, BPF and AF_XDP");
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
#[ignore = "needs root for namespaces, BPF and AF_XDP, and trafgen (netsniff-ng) (CI runs it)"]
fn bench_io_measures_af_xdp_and_af_packet_over_a_veth_pair() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root("namespaces, BPF and AF_XDP");
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
    assert_follows_schema("bench-io-2.json", &v);
    assert_eq!(v["schema"], "sfclab.bench.io/2");
    let rows = v["rows"].as_array().unwrap();
    let row = |name: &str| rows.iter().find(|r| r["name"] == name).unwrap();
    for name in ["sfclab af_xdp", "sfclab af_packet"] {
        let r = row(name);
        assert!(r["mpps"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["cycles_per_packet"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["skipped"].is_null(), "{r}");
    }
    assert_eq!(row("sfclab af_xdp")["mode"], "XDP native, copy bind");
    for name in ["testpmd af_xdp", "testpmd af_packet", "trafgen"] {
        assert_eq!(row(name)["skipped"], "--peer none");
        assert!(row(name)["mpps"].is_null());
    }
    assert!(v["ratios"].as_array().unwrap().is_empty());
    // trafgen as a peer, where installed: it sends, the pair delivers, and the row says how.
    assert!(
        sfclab_peers::which("trafgen").is_some(),
        "needs trafgen (apt-get install netsniff-ng)"
    );
    {
        let dir = tempfile::tempdir().unwrap();
        let bin_dir = dir.path().join("bin");
        std::fs::create_dir(&bin_dir).unwrap();
        // A PATH without dpdk-testpmd: only trafgen is measured, in seconds.
        std::os::unix::fs::symlink(sfclab_peers::which("trafgen").unwrap(), bin_dir.join("trafgen")).unwrap();
        for tool in ["ip", "taskset", "kill"] {
            std::os::unix::fs::symlink(sfclab_peers::which(tool).unwrap(), bin_dir.join(tool)).unwrap();
        }
        let o = Command::new(sfclab_bin())
            .args([
                "bench",
                "io",
                "--repeat",
                "1",
                "--duration",
                "300ms",
                "--warmup",
                "100ms",
                "--json",
            ])
            .env("PATH", &bin_dir)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
        let rows = v["rows"].as_array().unwrap();
        let trafgen = rows.iter().find(|r| r["name"] == "trafgen").unwrap();
        assert!(trafgen["mpps"].as_f64().unwrap() > 0.0, "{trafgen}");
        assert!(
            trafgen["commands"][0].as_str().unwrap().contains("--no-sock-mem"),
            "{trafgen}"
        );
        let testpmd = rows.iter().find(|r| r["name"] == "testpmd af_xdp").unwrap();
        assert!(testpmd["skipped"].as_str().unwrap().contains("not found"), "{testpmd}");
        assert!(v["ratios"].as_array().unwrap().iter().any(|q| q["over"] == "trafgen"));
        let left = Command::new("pgrep").arg("trafgen").output().unwrap();
        assert!(left.stdout.is_empty(), "trafgen left running: {}", stdout(&left));
    }
    // The published schema is current.
    let o = sfclab(&["schema", "bench-io"]);
    let published = std::fs::read_to_string(common::repo().join("docs/schema/bench-io-2.json")).unwrap();
    assert_eq!(
        stdout(&o),
        published,
        "docs/schema/bench-io-2.json is stale: `sfclab schema bench-io`"
    );
}

/// sfclab on interfaces it did not build: a testbed made here (tester and DUT namespaces
/// joined by two veth pairs), one sfclab forwarding between the DUT namespace's interfaces
/// (`--ports dut:d-in,d-out`) and another testing across them from the tester namespace
/// (`--ports tester:t-out,t-in`), over AF_XDP and AF_PACKET. Nothing is lost, the DUT
/// forwarded every frame the tester sent, and on Ctrl-C the DUT keeps its result, marked
/// interrupted, with its per-NF cycles.
#[test]
#[ignore = "needs root for namespaces, BPF and AF_XDP (CI runs it)"]
fn sfclab_forwards_and_tests_on_interfaces_it_did_not_build() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root("namespaces, BPF and AF_XDP");
    let bed = sfclab_topology::Testbed::build().unwrap();
    let dut_ports = format!("dut:{},{}", bed.hops[0].input.name(), bed.hops[0].output.name());
    let tester_ports = format!("tester:{},{}", bed.tester_out.name(), bed.tester_in.name());
    for io in ["af_xdp", "af_packet"] {
        let in_namespace = |ns: &sfclab_topology::Namespace| {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns.name()]).arg(sfclab_bin());
            c
        };
        let dut = in_namespace(&bed.hops[0].namespace)
            .args(["run", "--chain", "forwarder", "--ports", &dut_ports, "--io", io])
            .args(["--duration", "60s", "--warmup", "0s", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // `ip netns exec` execs sfclab: the child's pid is sfclab's. Its sockets are
        // open within a second; the tester's warm-up covers the rest.
        std::thread::sleep(Duration::from_secs(1));
        let tester = in_namespace(&bed.tester)
            .args(["run", "--ports", &tester_ports, "--io", io])
            .args(LOW)
            .output()
            .unwrap();
        // SAFETY: kill(2) on our own child's pid, which has not been waited for yet.
        unsafe { libc::kill(dut.id() as libc::pid_t, libc::SIGINT) };
        let dut = dut.wait_with_output().unwrap();
        assert!(tester.status.success(), "{io}: {}", stderr(&tester));
        let t: Value = serde_json::from_str(&stdout(&tester)).unwrap();
        assert_follows_schema("run-4.json", &t);
        assert_eq!(t["source"]["kind"], "tester", "{io}");
        assert_eq!(t["window_loss"]["sent"], 5000, "{io}");
        assert_eq!(t["window_loss"]["lost"], 0, "{io}: {}", t["places"][0]);
        assert_eq!(t["verify_failed"], 0, "{io}");
        assert!(t["latency"]["samples"].as_u64().unwrap() > 0, "{io}");

        assert_eq!(dut.status.code(), Some(130), "{io}: {}", stderr(&dut));
        let d: Value = serde_json::from_str(&stdout(&dut)).unwrap();
        assert_follows_schema("run-4.json", &d);
        assert_eq!(d["interrupted"], true, "{io}");
        assert_eq!(d["conservation"]["holds"], true, "{io}: {}", d["conservation"]);
        assert_eq!(d["source"]["kind"], io, "{io}");
        let forwarder = d["places"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == "forwarder")
            .unwrap();
        assert_eq!(
            forwarder["packets_out"], t["conservation"]["generated"],
            "{io}: the DUT forwarded every frame the tester sent (warm-up included)"
        );
        assert!(forwarder["cycles_per_packet"].as_f64().unwrap() > 0.0, "{io}");
    }
    let bad = sfclab(&[
        "run",
        "--ports",
        "dut:nosuch0,nosuch1",
        "--chain",
        "forwarder",
        "--duration",
        "10ms",
    ]);
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("nosuch0"), "{}", stderr(&bad));
    let bad = sfclab(&["run", "--ports", "tester:eth9", "--duration", "10ms"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("two interfaces"), "{}", stderr(&bad));
    let bad = sfclab(&[
        "run",
        "--ports",
        "tester:a,b",
        "--chain",
        "forwarder",
        "--duration",
        "10ms",
    ]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("none runs"), "{}", stderr(&bad));
}

/// `bench forward`: the same tester across an sfclab forwarder (AF_XDP and AF_PACKET)
/// and Linux forwarding, each row measured and labelled with what it was; its document
/// follows the published schema.
#[test]
#[ignore = "needs root for namespaces, BPF and AF_XDP (CI runs it)"]
fn bench_forward_measures_each_device_with_the_same_tester() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root("namespaces, BPF and AF_XDP");
    let o = sfclab(&[
        "bench",
        "forward",
        "--repeat",
        "1",
        "--duration",
        "300ms",
        "--warmup",
        "100ms",
        "--peer",
        "none",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_follows_schema("bench-forward-1.json", &v);
    let rows = v["rows"].as_array().unwrap();
    let row = |name: &str| rows.iter().find(|r| r["name"] == name).unwrap();
    for (name, device) in [
        ("sfclab af_xdp", "sfclab chain (af_xdp)"),
        ("sfclab af_packet", "sfclab chain (af_packet)"),
        ("linux", "Linux IPv4 forwarding"),
    ] {
        let r = row(name);
        assert_eq!(r["device"], device);
        let (forwarded, offered) = (r["mpps"].as_f64().unwrap(), r["runs_offered_mpps"][0].as_f64().unwrap());
        assert!(forwarded > 0.0 && forwarded <= offered * 1.0001, "{r}");
        assert!(r["dut_core_cycles"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert!(row("sfclab af_xdp")["dut_busy_cycles"].as_f64().unwrap() > 0.0);
    assert!(
        row("linux")["dut_busy_cycles"].is_null(),
        "the kernel has no busy-cycle count of ours"
    );
    assert_eq!(row("testpmd af_xdp")["skipped"], "--peer none");
    assert!(v["ratios"].as_array().unwrap().iter().any(|q| q["over"] == "linux"));
    let o = sfclab(&["schema", "bench-forward"]);
    let published = std::fs::read_to_string(common::repo().join("docs/schema/bench-forward-1.json")).unwrap();
    assert_eq!(
        stdout(&o),
        published,
        "docs/schema/bench-forward-1.json is stale: `sfclab schema bench-forward`"
    );
}

/// Busy polling on every AF_XDP port of a wired run: nothing lost, and the ports say so.
#[test]
#[ignore = "needs root for namespaces, BPF and AF_XDP (CI runs it)"]
fn a_wired_run_busy_polls_when_asked() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root("namespaces, BPF and AF_XDP");
    let v = wired_json(&["--ports", "veth", "--chain", "forwarder", "--busy-poll", "50"]);
    assert_eq!(v["window_loss"]["lost"], 0, "{}", v["places"][0]);
    assert_eq!(v["conservation"]["holds"], true);
    let dut_source = v["dut"][0]["source"]["summary"].as_str().unwrap();
    assert!(dut_source.contains("busy poll 50 us"), "{dut_source}");
}

/// Replicas between the testbed's interfaces: one compound run per queue, the tester
/// spreading flows over the queues by hash; over AF_XDP (a socket per queue) and
/// AF_PACKET (a fanout group), every frame reaches exactly one replica and comes back.
#[test]
#[ignore = "needs root for namespaces, BPF and AF_XDP (CI runs it)"]
fn replicas_forward_one_queue_each() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root("namespaces, BPF and AF_XDP");
    for io in ["af_xdp", "af_packet"] {
        let v = wired_json(&[
            "--ports",
            "veth",
            "--chain",
            "forwarder",
            "--replicas",
            "2",
            "--flows",
            "64",
            "--io",
            io,
        ]);
        assert_eq!(v["window_loss"]["lost"], 0, "{io}: {}", v["places"][0]);
        assert_eq!(v["conservation"]["holds"], true);
        assert_eq!(v["testbed"]["queues"], 2);
        let replicas = v["dut"].as_array().expect("the DUT's runs");
        assert_eq!(replicas.len(), 2, "{io}: one run per replica");
        let sent = v["conservation"]["generated"].as_u64().unwrap();
        let mut took = 0;
        for (k, r) in replicas.iter().enumerate() {
            assert_eq!(r["conservation"]["holds"], true, "{io} replica {k}");
            assert_eq!(r["source"]["kind"], io);
            let n = r["generated"].as_u64().unwrap();
            assert!(n > 0, "{io}: replica {k} received nothing: flows were not spread");
            took += n;
        }
        assert_eq!(took, sent, "{io}: each frame reached exactly one replica");
        if io == "af_xdp" {
            let tester_out = v["source"]["summary"].as_str().unwrap();
            assert!(tester_out.contains("x2 queues"), "{tester_out}");
        }
    }
    // Replicas need queues of a testbed sfclab built.
    let o = sfclab(&["run", "--ports", "linux", "--replicas", "2", "--count", "10"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("replicas"), "{}", stderr(&o));
}

/// `--chaining veth`: each NF in a namespace of its own; a hop that drops is where the
/// tester's loss is explained, exactly. `--chaining linux`: kernel hops. Both torn down.
#[test]
#[ignore = "needs root for namespaces, BPF and AF_XDP, and Open vSwitch (CI runs it)"]
fn chains_in_namespaces_run_end_to_end_and_explain_their_loss() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root("namespaces, BPF and AF_XDP");
    let v = wired_json(&[
        "--chaining",
        "veth",
        "--chain",
        "forwarder -> synthetic(drop_one_in=4) -> forwarder",
    ]);
    assert_eq!(v["conservation"]["holds"], true);
    assert_eq!(v["testbed"]["hops"], 3);
    let hops = v["dut"].as_array().unwrap();
    assert_eq!(hops.len(), 3);
    let dropped_at_hop2 = hops[1]["dropped"].as_u64().unwrap();
    let lost_whole_run = v["wire_loss"]["tester"]["unaccounted"].as_u64().unwrap();
    assert!(dropped_at_hop2 > 0);
    assert_eq!(hops[0]["dropped"], 0);
    assert_eq!(hops[2]["dropped"], 0);
    assert_eq!(
        v["wire_loss"]["explained"]["dut"].as_u64(),
        Some(lost_whole_run),
        "the tester's loss is the dropping hop's, exactly"
    );
    assert_eq!(v["wire_loss"]["unaccounted"], 0);
    assert_eq!(dropped_at_hop2, lost_whole_run);
    // One in four of the window's frames, give or take the warm-up's share.
    let lost = v["window_loss"]["lost"].as_u64().unwrap();
    assert!((1200..=1300).contains(&lost), "{lost}");

    // The same chain with every hop an sfclab process of its own in its namespace: the
    // dropping hop's process counts exactly what the tester lost.
    let v = wired_json(&[
        "--chaining",
        "veth",
        "--isolation",
        "process",
        "--chain",
        "forwarder -> synthetic(drop_one_in=4) -> forwarder",
    ]);
    assert_eq!(v["conservation"]["holds"], true);
    let procs = v["dut_processes"].as_array().expect("each hop process's document");
    assert_eq!(procs.len(), 3);
    for (p, name) in procs.iter().zip(["forwarder1", "synthetic", "forwarder2"]) {
        assert_eq!(p["schema"], "sfclab.run/4");
        assert_eq!(p["chain"][0], name);
        assert_eq!(p["conservation"]["holds"], true, "{p}");
        assert_eq!(p["interrupted"], true, "stopped once the tester finished");
    }
    let lost = v["wire_loss"]["tester"]["unaccounted"].as_u64().unwrap();
    assert!(lost > 0);
    assert_eq!(procs[1]["dropped"].as_u64(), Some(lost));
    assert_eq!(v["wire_loss"]["explained"]["dut"].as_u64(), Some(lost));
    assert_eq!(v["wire_loss"]["unaccounted"], 0);
    assert_eq!(
        procs[0]["generated"], v["conservation"]["generated"],
        "hop 1 took in every frame"
    );

    if ovs_installed() {
        // Open vSwitch bridges joined by veth, afxdp ports; the same exactness.
        let v = wired_json(&["--chaining", "ovs", "--chain", "forwarder*3"]);
        assert_eq!(v["window_loss"]["lost"], 0, "{}", v["places"][0]);
        assert_eq!(v["testbed"]["hops"], 3);
        let what = v["testbed"]["device_under_test"].as_str().unwrap();
        assert!(what.contains("Open vSwitch") && what.contains("6 afxdp"), "{what}");
        assert_eq!(v["testbed"]["processes"].as_array().map(Vec::len), Some(2));
        // Every frame crossed every bridge: one datapath lookup per frame per bridge.
        let generated = v["conservation"]["generated"].as_u64().unwrap();
        let switch = &v["testbed"]["switch"];
        let lookups = switch["datapath hit"].as_u64().unwrap() + switch["datapath missed"].as_u64().unwrap();
        assert_eq!(lookups, 3 * generated, "{switch}");
        assert_eq!(v["wire_loss"]["unaccounted"], 0);
    } else {
        panic!("needs Open vSwitch for chaining ovs (apt-get install openvswitch-switch)");
    }

    // An emulated NIC's switch between the hops, VEB and VEPA: each hop addresses the
    // next one's virtual function (a forwarder set to, any other NF followed by one).
    for (chaining, mode) in [("nic-switch", "bridge mode"), ("nic-switch:vepa", "vepa mode")] {
        let v = wired_json(&["--chaining", chaining, "--chain", "forwarder -> noop -> forwarder"]);
        assert_eq!(v["window_loss"]["lost"], 0, "{chaining}: {}", v["wire_loss"]);
        assert_eq!(v["conservation"]["holds"], true);
        let what = v["testbed"]["device_under_test"].as_str().unwrap();
        assert!(what.contains(mode), "{what}");
        let hops = v["dut"].as_array().unwrap();
        assert_eq!(hops.len(), 3);
        let names = |h: &Value| {
            h["chain"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n.as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&hops[0]), ["forwarder1"]);
        assert_eq!(names(&hops[1]), ["noop", "to-next"]);
        let sent = v["conservation"]["generated"].as_u64().unwrap();
        assert!(
            hops.iter().all(|h| h["generated"].as_u64() == Some(sent)),
            "{chaining}: every hop saw every frame"
        );
        assert_eq!(
            hops[0]["source"]["settings"]["xdp_mode"], "generic",
            "macvlan has no native XDP: said, not hidden"
        );
    }

    let v = wired_json(&["--chaining", "linux", "--chain", "forwarder*3"]);
    assert_eq!(v["window_loss"]["lost"], 0);
    assert_eq!(v["testbed"]["hops"], 3);
    assert!(v.get("dut").is_none(), "the kernel forwards: no sfclab run in the DUT");
    let run_name = v["testbed"]["run_name"].as_str().unwrap();
    let pid: u32 = run_name.split('-').nth(1).unwrap().parse().unwrap();
    assert!(namespaces_of(pid).is_empty(), "every hop's namespace is removed");
}

/// What `chaining: veth | linux` cannot combine with is refused by name.
#[test]
fn chaining_in_namespaces_refuses_what_does_not_apply() {
    for (args, key) in [
        (
            &["--chaining", "linux", "--chain", "forwarder -> nat44"][..],
            "forwarder",
        ),
        (&["--chaining", "veth", "--ports", "linux"][..], "ports"),
        (&["--chaining", "veth", "--runtime", "pipeline"][..], "runtime"),
        (&["--chaining", "veth", "--replicas", "2"][..], "replicas"),
        (&["--chaining", "veth", "--links", "backpressure"][..], "links"),
        (&["--chaining", "compound", "--runtime", "pipeline"][..], "contradicts"),
        (&["--chaining", "ovs-dpdk"][..], "not a chaining"),
        (
            &["--chaining", "linux", "--chain", "forwarder", "--isolation", "process"][..],
            "isolation",
        ),
        (&["--ready-file", "/tmp/x"][..], "ready-file"),
        (
            &["--chaining", "veth", "--sriov", "pf=a,tester-out=b,tester-in=c"][..],
            "sriov",
        ),
        (
            &[
                "--chaining",
                "nic-switch:vepa",
                "--sriov",
                "pf=a,tester-out=b,tester-in=c",
            ][..],
            "sriov",
        ),
        (
            &["--chaining", "nic-switch", "--sriov", "pf=a"][..],
            "`tester-out=` is missing",
        ),
    ] {
        let mut all = vec!["run", "--count", "10"];
        all.extend_from_slice(args);
        let o = sfclab(&all);
        assert!(!o.status.success(), "{args:?} was accepted");
        assert!(stderr(&o).contains(key), "{args:?}: {}", stderr(&o));
    }
}

/// `chaining: nic-switch` on a real SR-IOV NIC: every hop's ends are VFs sfclab makes,
/// the tester's ports the machine's. Needs such a NIC with the tester's ports cabled to
/// it, named by `SFCLAB_SRIOV` (`pf=IF,tester-out=IF,tester-in=IF[,pf-out=IF]`); what
/// runs everywhere is the refusal of a NIC that is not there, with nothing left behind.
#[test]
#[ignore = "needs root for SR-IOV VFs and namespaces (CI runs it)"]
fn a_real_sriov_nic_chains_the_hops_and_is_put_back() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root("SR-IOV VFs and namespaces");
    let restore_files = || {
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().ends_with(".restore"))
            .count()
    };
    let before = restore_files();
    let o = sfclab(&[
        "run",
        "--chaining",
        "nic-switch",
        "--chain",
        "forwarder*2",
        "--sriov",
        "pf=lo,tester-out=sfclabnone0,tester-in=sfclabnone1",
        "--count",
        "10",
    ]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("tester port `sfclabnone0`: no such interface"),
        "{}",
        stderr(&o)
    );
    assert_eq!(restore_files(), before, "a refused NIC leaves no journal");

    let Ok(nic) = std::env::var("SFCLAB_SRIOV") else {
        let pfs = sfclab_topology::sriov::Sysfs::default().physical_functions();
        eprintln!(
            "SKIPPED: a chain over real SR-IOV VFs needs an SR-IOV NIC with the tester's ports cabled to it,              named by SFCLAB_SRIOV=pf=IF,tester-out=IF,tester-in=IF (physical functions here: {pfs:?})"
        );
        return;
    };
    let pf = nic.split(',').find_map(|p| p.strip_prefix("pf=")).unwrap().to_string();
    let vfs_before = std::fs::read_to_string(format!("/sys/class/net/{pf}/device/sriov_numvfs")).unwrap();
    let v = wired_json(&["--chaining", "nic-switch", "--sriov", &nic, "--chain", "forwarder*2"]);
    assert_eq!(v["window_loss"]["lost"], 0, "{}", v["wire_loss"]);
    let what = v["testbed"]["device_under_test"].as_str().unwrap();
    assert!(what.contains("SR-IOV virtual functions"), "{what}");
    let sent = v["conservation"]["generated"].as_u64().unwrap();
    assert!(
        v["dut"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["generated"].as_u64() == Some(sent))
    );
    let vfs_after = std::fs::read_to_string(format!("/sys/class/net/{pf}/device/sriov_numvfs")).unwrap();
    assert_eq!(vfs_after, vfs_before, "the VFs sfclab made are gone");
    assert_eq!(restore_files(), before);
}

/// `bench chaining`: every technology at two lengths, the same tester, its schema.
#[test]
#[ignore = "needs root for namespaces, BPF and AF_XDP (CI runs it)"]
fn bench_chaining_measures_every_technology_with_the_same_tester() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root("namespaces, BPF and AF_XDP");
    let plot = std::env::temp_dir().join(format!("sfclab-chaining-{}.svg", std::process::id()));
    let plot_arg = plot.display().to_string();
    let o = sfclab(&[
        "bench",
        "chaining",
        "--repeat",
        "1",
        "--duration",
        "300ms",
        "--warmup",
        "100ms",
        "--lengths",
        "1,2",
        "--json",
        "--plot",
        &plot_arg,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_follows_schema("bench-chaining-2.json", &v);
    let cells = v["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 12, "six technologies at two lengths");
    for c in cells {
        if c["technology"] == "ovs" && !ovs_installed() {
            assert!(c["skipped"].as_str().unwrap().contains("not installed"));
            continue;
        }
        let (through, offered) = (c["mpps"].as_f64().unwrap(), c["runs_offered_mpps"][0].as_f64().unwrap());
        assert!(through > 0.0 && through <= offered * 1.01, "{c}");
        assert!(c["dut_core_cycles"].as_f64().unwrap() > 0.0, "{c}");
        // sfclab's hops and OVS lose nothing where no counter sees it; a Linux chain
        // under overload may (a fraction of a percent here), and says so.
        if c["technology"] != "linux" {
            assert!(
                c["drops"].get("unaccounted").is_none(),
                "every lost frame is placed: {c}"
            );
        }
    }
    let ratios = v["ratios"].as_array().unwrap();
    assert!(
        ratios
            .iter()
            .any(|r| r["technology"] == "veth" && r["over"] == "linux" && r["hops"] == 2)
    );
    assert!(
        ratios
            .iter()
            .any(|r| r["technology"] == "memif" && r["over"] == "veth" && r["hops"] == 2)
    );
    let memif = cells.iter().find(|c| c["technology"] == "memif").unwrap();
    assert_eq!(memif["tester_link"], "memif", "{memif}");
    let svg = std::fs::read_to_string(&plot).expect("the plot was written");
    assert!(svg.contains("<svg") && svg.contains("veth") && svg.contains("linux"));
    let _ = std::fs::remove_file(&plot);
    // CSV: a row per cell, a header first.
    let o = sfclab(&[
        "bench",
        "chaining",
        "--repeat",
        "1",
        "--duration",
        "200ms",
        "--warmup",
        "50ms",
        "--lengths",
        "1",
        "--technologies",
        "compound",
        "--csv",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let csv = stdout(&o);
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 2, "{csv}");
    assert!(
        lines[0].starts_with("technology,hops,mpps") && lines[1].starts_with("compound,1,"),
        "{csv}"
    );
    let o = sfclab(&["schema", "bench-chaining"]);
    let published = std::fs::read_to_string(common::repo().join("docs/schema/bench-chaining-2.json")).unwrap();
    assert_eq!(
        stdout(&o),
        published,
        "docs/schema/bench-chaining-2.json is stale: `sfclab schema bench-chaining`"
    );
}

/// Every `sudo sfclab run` example in the README and the guide forwards traffic, but those that need
/// hardware this machine may not have (a real SR-IOV NIC, interfaces named eth1, eth2).
#[test]
#[ignore = "needs root for namespaces, BPF and AF_XDP (CI runs it)"]
fn documented_root_examples_forward_traffic() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root("namespaces, BPF and AF_XDP");
    let dir = tempfile::tempdir().unwrap();
    let mut ran = 0;
    for (_, words) in common::documented_run_examples().into_iter().filter(|(sudo, _)| *sudo) {
        let what = words.join(" ");
        if words.iter().any(|w| w == "--sriov" || w.starts_with("dut:")) {
            eprintln!("not run here (needs hardware): sfclab run {what}");
            continue;
        }
        common::run_readme_example(dir.path(), &words);
        ran += 1;
    }
    assert!(ran >= 9, "{ran} root examples ran");
}
