//! sfclab on memif endpoints through the CLI: one sfclab forwarding between two memif
//! interfaces it serves (`--ports memif:A,memif:B`) and another testing across them
//! (`--ports tester:memif:A,memif:B`). No root needed: memif is shared memory and Unix
//! sockets.

use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::{assert_follows_schema, namespaces_of, sfclab, sfclab_bin, stderr, stdout};

/// The runs here pin busy-polling processes to cores 0 and 1: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn sfclab_forwards_and_tests_over_memif_and_counts_every_frame() {
    forward_and_test_over_memif("", "");
}

#[test]
fn a_zero_copy_device_forwards_frames_by_reference_and_every_buffer_comes_home() {
    let (d, _) = forward_and_test_over_memif(",role=client,zero-copy=yes", ",role=server");
    assert!(
        d["source"]["summary"].as_str().unwrap().contains("zero-copy"),
        "{}",
        d["source"]
    );
    assert_eq!(d["conservation"]["buffers_leaked"], 0, "{}", d["conservation"]);
}

/// The tester as a zero-copy client of a serving device: it generates frames in its
/// shared pool, sends them as descriptors and checks what comes back where the device
/// wrote it; every frame is counted and every buffer comes home.
#[test]
fn a_zero_copy_tester_generates_into_its_shared_pool_and_every_buffer_comes_home() {
    let (_, t) = forward_and_test_over_memif("", ",role=client,zero-copy=yes");
    let summary = t["source"]["summary"].as_str().unwrap();
    assert_eq!(summary.matches("zero-copy").count(), 2, "both ports: {summary}");
    assert_eq!(t["conservation"]["buffers_leaked"], 0, "{}", t["conservation"]);
}

/// The tester with its sending half on a thread of its own (`--sender-core`): every
/// frame counted as from one thread; its report names the thread and counts its work
/// apart. A zero-copy port cannot send from there, and is refused by name.
#[test]
fn a_tester_sending_from_a_thread_of_its_own_counts_every_frame() {
    let (_, t) = forward_and_test_over_memif_with("", "", &["--sender-core", "0"]);
    let summary = t["source"]["summary"].as_str().unwrap();
    assert!(summary.contains("sending on a thread of its own (core 0)"), "{summary}");
    let busy = &t["places"][0]["counters"]["sending_thread_busy_ticks"];
    assert!(busy.as_u64().is_some_and(|b| b > 0), "{}", t["places"][0]);

    let refused = sfclab(&[
        "run",
        "--ports",
        "tester:memif:/tmp/sfclab-none-a.sock,role=client,zero-copy=yes,memif:/tmp/sfclab-none-b.sock",
        "--sender-core",
        "0",
    ]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("--sender-core"), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("zero-copy"), "{}", stderr(&refused));
}

/// A forwarder between two memif interfaces (`dut_keys` added to each endpoint) and a
/// tester across it (`tester_keys`): every frame counted on both sides. The device's
/// report and the tester's.
fn forward_and_test_over_memif(dut_keys: &str, tester_keys: &str) -> (Value, Value) {
    forward_and_test_over_memif_with(dut_keys, tester_keys, &[])
}

/// [`forward_and_test_over_memif`], the tester given `tester_args` too.
fn forward_and_test_over_memif_with(dut_keys: &str, tester_keys: &str, tester_args: &[&str]) -> (Value, Value) {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("in.sock"), dir.path().join("out.sock"));
    let dut_ports = format!("memif:{}{dut_keys},memif:{}{dut_keys}", a.display(), b.display());
    let tester_ports = format!(
        "tester:memif:{}{tester_keys},memif:{}{tester_keys}",
        a.display(),
        b.display()
    );
    let dut = Command::new(sfclab_bin())
        .args(["run", "--chain", "forwarder", "--ports", &dut_ports, "--core", "1"])
        .args(["--duration", "60s", "--warmup", "0s", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if !tester_keys.contains("role=server") {
        // The device serves the sockets: the tester connects once they are there.
        common::wait_for_sockets(&a, &b);
    }
    let tester = Command::new(sfclab_bin())
        .args(["run", "--ports", &tester_ports, "--core", "0"])
        .args([
            "--count", "5000", "--rate", "20kpps", "--warmup", "100ms", "--verify", "--json",
        ])
        .args(tester_args)
        .output()
        .unwrap();
    // SAFETY: kill(2) on our own child's pid, which has not been waited for yet.
    unsafe { libc::kill(dut.id() as libc::pid_t, libc::SIGINT) };
    let dut = dut.wait_with_output().unwrap();
    assert!(tester.status.success(), "{}", stderr(&tester));
    let t: Value = serde_json::from_str(&stdout(&tester)).unwrap();
    assert_follows_schema("run-4.json", &t);
    assert_eq!(t["window_loss"]["sent"], 5000);
    // A debug build starved of its core may fall behind 20 kpps: the tester's ring then
    // refuses frames, counted as never offered; nothing else may be lost.
    assert_eq!(t["window_loss"]["lost"], t["not_offered"], "{}", t["places"][0]);
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
        forwarder["packets_out"], t["conservation"]["received"],
        "the DUT forwarded every frame the tester handed it, and each came back (warm-up included)"
    );
    assert_eq!(forwarder["packets_in"], forwarder["packets_out"], "{forwarder}");
    assert!(!a.exists() && !b.exists(), "the server removed its socket files");
    (d, t)
}

#[test]
fn a_bad_memif_endpoint_is_named_with_its_key() {
    for (ports, says) in [
        ("memif:", "socket file's path"),
        ("memif:/tmp/x.sock,role=boss", "role `boss`"),
        ("memif:/tmp/x.sock,ring=1000", "power of two"),
        ("memif:/tmp/x.sock,colour=red", "unknown key `colour`"),
        ("memif:/tmp/x.sock,zero-copy=yes", "zero-copy is a client's"),
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

#[test]
fn both_ways_needs_two_memif_interfaces_of_a_device_under_test() {
    for ports in [None, Some("memif:/tmp/a.sock"), Some("dut:veth0,veth1")] {
        let mut args = vec!["run", "--chain", "forwarder", "--both-ways", "--duration", "10ms"];
        if let Some(p) = ports {
            args.extend(["--ports", p]);
        }
        let o = sfclab(&args);
        assert_eq!(o.status.code(), Some(2), "{ports:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("both-ways") && stderr(&o).contains("two memif interfaces"),
            "{ports:?}: {}",
            stderr(&o)
        );
    }
}

/// A step of a run's path: what it took in it passed on or dropped, nothing unaccounted.
fn assert_step_adds_up(step: &Value) {
    let count = |key: &str| step[key].as_u64().unwrap_or_else(|| panic!("{key}: {step}"));
    assert_eq!(count("packets_in"), count("packets_out") + count("dropped"), "{step}");
    assert_eq!(step["unaccounted"], 0, "{step}");
}

/// `chaining: memif`: forwarders, each an sfclab process in its own namespace, joined
/// to each other and to the tester by memif. At a low rate nothing is lost and every
/// step of the path passes on what it took in; the namespaces and socket files are gone
/// afterwards. Three hops share one core in interrupt mode; polling hops would take
/// that core from each other for whole time slices (and drop: a collapse the bench
/// shows), so the polling run has one hop.
#[test]
#[ignore = "needs root for namespaces (CI runs it)"]
fn a_memif_chain_of_three_hop_processes_conserves_exactly() {
    sfclab_topology::require_root("network namespaces");
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for (wait, chain, hops) in [
        ("polling", "forwarder", 1),
        ("interrupt", "forwarder -> forwarder -> forwarder", 3),
    ] {
        let o = sfclab(&[
            "run",
            "--chain",
            chain,
            "--chaining",
            "memif",
            "--memif-wait",
            wait,
            "--count",
            "20000",
            "--rate",
            "100kpps",
            "--warmup",
            "100ms",
            "--verify",
            "--json",
        ]);
        assert!(o.status.success(), "{wait}: {}", stderr(&o));
        let d: Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_follows_schema("run-4.json", &d);
        assert_eq!(d["window_loss"]["sent"], 20000, "{wait}");
        // Debug-built hops starved of their core may fall behind 100 kpps: the tester's
        // ring then refuses frames, counted as never offered; nothing else is lost.
        assert_eq!(d["window_loss"]["lost"], d["not_offered"], "{wait}: {}", d["path"]);
        assert_eq!(d["verify_failed"], 0, "{wait}");
        let path = d["path"].as_array().unwrap();
        assert_eq!(path.len(), hops + 2, "tester, the hops, tester: {}", d["path"]);
        let generated = d["conservation"]["generated"].as_u64().unwrap();
        assert_eq!(path[0]["packets_in"], generated, "{wait}: {}", path[0]);
        let offered = &path[0]["packets_out"];
        let hops_said = &d["dut_processes"];
        for step in path {
            assert_step_adds_up(step);
            if step != &path[0] {
                assert_eq!(&step["packets_in"], offered, "{wait}: {step}; the hops: {hops_said}");
                assert_eq!(&step["packets_out"], offered, "{wait}: {step}; the hops: {hops_said}");
            }
        }
        assert_eq!(d["dut_processes"].as_array().unwrap().len(), hops);
        let run = d["testbed"]["run_name"].as_str().unwrap().to_string();
        let left = Command::new("ip").args(["netns", "list"]).output().unwrap();
        assert!(
            !stdout(&left).contains(&run),
            "{wait}: namespaces left: {}",
            stdout(&left)
        );
    }
    let bad = sfclab(&["run", "--chain", "forwarder", "--memif-wait", "interrupt"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("memif_wait") || stderr(&bad).contains("--memif-wait"),
        "{}",
        stderr(&bad)
    );
}

/// Seed 001's multi-feature VNF as one hop: NAT, firewall, QoS and DPI run in one
/// process in one namespace, the router in another; the hop's document reports each of
/// its NFs, and every frame is counted.
#[test]
#[ignore = "needs root for namespaces (CI runs it)"]
fn a_multi_feature_hop_runs_its_nfs_in_one_process() {
    sfclab_topology::require_root("network namespaces");
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let chain = common::repo().join("examples/chains/multi-feature.yaml");
    let o = sfclab(&[
        "run",
        chain.to_str().unwrap(),
        "--chaining",
        "memif",
        "--memif-wait",
        "interrupt",
        "--count",
        "5000",
        "--rate",
        "20kpps",
        "--warmup",
        "100ms",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let d: Value = serde_json::from_str(&stdout(&o)).unwrap();
    // How many frames the tester gets onto its ring depends on how fast a debug build
    // of the hop runs on the machine; where every frame went does not.
    for step in d["path"].as_array().unwrap() {
        assert_step_adds_up(step);
        if step["place"] != "tester sends" {
            assert_eq!(step["dropped"], 0, "this traffic passes every NF: {step}");
        }
    }
    let hops = d["dut_processes"].as_array().unwrap();
    assert_eq!(hops.len(), 2, "two hops");
    let names = |doc: &Value| -> Vec<String> {
        doc["places"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["role"] == "nf")
            .map(|p| p["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(&hops[0]), ["nat44", "firewall", "qos", "dpi"]);
    assert_eq!(names(&hops[1]), ["router"]);
    for p in hops[0]["places"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["role"] == "nf")
    {
        assert!(
            p["cycles_per_packet"].as_f64().unwrap() > 0.0,
            "per-NF cycles inside the hop: {p}"
        );
    }
    let path = d["path"].as_array().unwrap();
    assert_eq!(path[1]["place"], "hop 1: nat44 -> firewall -> qos -> dpi", "{path:?}");
}

/// A hop of a memif chain killed mid-run (`kill -9`, as a crashed NF) and started again
/// with the same command: its neighbours reconnect and traffic flows again; what its
/// upstream could not hand over is counted there, by cause.
#[test]
#[ignore = "needs root for namespaces (CI runs it)"]
fn a_hop_killed_and_restarted_mid_run_is_reconnected_and_the_loss_counted() {
    sfclab_topology::require_root("network namespaces");
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let run = Command::new(sfclab_bin())
        .args([
            "run",
            "--chain",
            "forwarder -> forwarder -> forwarder",
            "--chaining",
            "memif",
        ])
        .args([
            "--memif-wait",
            "interrupt",
            "--rate",
            "200kpps",
            "--duration",
            "4s",
            "--warmup",
            "100ms",
        ])
        .arg("--json")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The run's second hop: its namespace is `sfclab-<run pid>-<n>-hop2`.
    let prefix = format!("sfclab-{}-", run.id());
    let started = Instant::now();
    let (namespace, pid) = loop {
        assert!(started.elapsed() < Duration::from_secs(30), "hop 2 never started");
        let list = stdout(&Command::new("ip").args(["netns", "list"]).output().unwrap());
        let found = list
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .find(|n| n.starts_with(&prefix) && n.ends_with("-hop2"))
            .map(str::to_string);
        if let Some(ns) = found {
            let pids = stdout(&Command::new("ip").args(["netns", "pids", &ns]).output().unwrap());
            // The hop itself, not a setup command that ran in its namespace a moment.
            let hop = pids.split_whitespace().find(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains("memif:"))
            });
            if let Some(pid) = hop {
                break (ns, pid.to_string());
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(1500));
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let args: Vec<String> = cmdline
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    assert!(args.iter().any(|a| a.starts_with("memif:")), "{args:?}");
    Command::new("kill").args(["-9", &pid]).status().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // The same hop again, in its namespace: its input socket file is stale and replaced.
    let mut again = Command::new("ip")
        .args(["netns", "exec", &namespace])
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = run.wait_with_output().unwrap();
    let _ = again.kill();
    let _ = again.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    let d: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let generated = d["conservation"]["generated"].as_u64().unwrap();
    let received = d["conservation"]["received"].as_u64().unwrap();
    // 4.1 s at 200 kpps; about 0.3 s of it while hop 2 was down.
    assert!(
        received > generated / 2,
        "traffic flowed again after the restart: {received} of {generated}"
    );
    assert!(received < generated, "some frames were lost while hop 2 was down");
    let hop1 = &d["dut_processes"][0];
    let counters = &hop1["places"]
        .as_array()
        .and_then(|p| p.last())
        .unwrap_or_else(|| panic!("hop 1 reported: {hop1}"))["counters"];
    let lost_at_hop1 = counters["tx_no_peer"].as_u64().unwrap_or(0)
        + counters["tx_in_flight_at_disconnect"].as_u64().unwrap_or(0)
        + counters["tx_ring_full"].as_u64().unwrap_or(0);
    assert!(lost_at_hop1 > 0, "hop 1 counted what it could not hand over: {hop1}");
    // Counters are the window's: the first connection came before it, the second in it.
    assert!(
        counters["connects"].as_u64().unwrap_or(0) >= 1,
        "hop 1 connected to hop 2 again: {counters}"
    );
    // The killed hop's own counts went with it: what it held is the path's unaccounted,
    // at most its rings and buffers' worth, never hidden.
    let path = d["path"].as_array().unwrap();
    let unaccounted: u64 = path.iter().map(|s| s["unaccounted"].as_u64().unwrap_or(0)).sum();
    assert!(unaccounted <= 3 * 1024 + 4096, "{}", d["path"]);
}

/// `bench memif`: the devices row by row and each mode at each hops-per-core, measured
/// by the same tester; its document follows the published schema.
#[test]
#[ignore = "needs root for the chains' namespaces (CI runs it)"]
fn bench_memif_measures_devices_and_both_modes_at_each_hops_per_core() {
    sfclab_topology::require_root("network namespaces");
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let o = sfclab(&[
        "bench",
        "memif",
        "--repeat",
        "1",
        "--duration",
        "300ms",
        "--warmup",
        "100ms",
        "--hops",
        "1,2",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_follows_schema("bench-memif-5.json", &v);
    let rows = v["rows"].as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "sfclab forwarder",
            "testpmd io",
            "sfclab forwarder, zero-copy client",
            "testpmd io, zero-copy client",
            "polling, 1 hops/core",
            "interrupt, 1 hops/core",
            "polling, 2 hops/core",
            "interrupt, 2 hops/core",
            "multi-feature VNF, 1 hop",
            "multi-feature NFs, 4 hops"
        ]
    );
    for sfclab_row in [&rows[0], &rows[2]] {
        assert!(sfclab_row["mpps"].as_f64().unwrap() > 0.0, "{sfclab_row}");
        assert!(sfclab_row["device_cycles"].as_f64().unwrap() > 0.0, "{sfclab_row}");
        // Its waits for room on the ring back are shown apart, one figure per round.
        let waits = sfclab_row["runs_device_wait_cycles"].as_array().unwrap();
        assert_eq!(waits.len(), 1, "{sfclab_row}");
        assert!(waits[0].as_f64().unwrap() >= 0.0, "{sfclab_row}");
        // The tester got back what it placed, but for what a stall of either process
        // past the memif send's 1 ms wait for room costs (ring-full drops, counted: the
        // run's conservation holds, and the memif tests check the count exactly). On a
        // 2-vCPU host such stalls come in about half the runs, at 0.01-0.03 %.
        let loss = sfclab_row["runs_loss_pct"][0].as_f64().unwrap();
        assert!((0.0..1.0).contains(&loss), "{sfclab_row}");
    }
    for testpmd in [&rows[1], &rows[3]] {
        assert!(
            testpmd["mpps"].as_f64().is_some_and(|m| m > 0.0)
                || testpmd["skipped"].as_str().is_some_and(|s| s.contains("not found")),
            "{testpmd}"
        );
    }
    // Each device's own cost, read the same way on both sides, decides the comparison:
    // each mode against its peer, and the zero-copy client against testpmd's servers.
    // (testpmd's cycles of a round are missing where its peers did not connect again
    // in time to read them: that pair then has no ratio.)
    let ratios = v["device_cycle_ratios"].as_array().unwrap();
    for (a, b) in [(0, 1), (2, 3), (2, 1)] {
        let (row, over) = (&rows[a], &rows[b]);
        let r = ratios
            .iter()
            .find(|r| r["row"] == row["name"] && r["over"] == over["name"]);
        match over["device_cycles"].as_f64() {
            Some(theirs) => {
                let r = r.unwrap_or_else(|| panic!("no ratio of {} over {}", row["name"], over["name"]));
                let expected = row["device_cycles"].as_f64().unwrap() / theirs;
                assert!((r["ratio"].as_f64().unwrap() - expected).abs() < 1e-9, "{r}");
            }
            None => assert!(r.is_none(), "{r:?}"),
        }
    }
    assert!(ratios.len() <= 3);
    for r in &rows[4..8] {
        assert!(r["mpps"].as_f64().unwrap() > 0.0, "{r}");
        assert_eq!(r["runs_light_p50_us"].as_array().unwrap().len(), 1, "{r}");
    }
    // Seed 001's multi-feature VNF, in one hop and in four: measured at full load (where
    // hops that share a core may drop between them: reported, not asserted).
    for r in &rows[8..] {
        assert!(r["mpps"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["runs_loss_pct"][0].as_f64().is_some(), "{r}");
    }
    // Interrupt-mode hops sharing a core keep up with a light load (a scheduling stall
    // of the host may cost a few frames; a collapse costs tens of percent).
    for r in rows
        .iter()
        .filter(|r| r["wait"].as_str().is_some_and(|w| w.starts_with("interrupt")))
    {
        assert!(r["runs_light_loss_pct"][0].as_f64().unwrap() < 1.0, "{r}");
    }
    assert!(
        v["ratios"]
            .as_array()
            .unwrap()
            .iter()
            .any(|q| q["row"] == "interrupt, 2 hops/core")
    );
    assert!(
        v["ratios"]
            .as_array()
            .unwrap()
            .iter()
            .any(|q| q["row"] == "multi-feature VNF, 1 hop" && q["over"] == "multi-feature NFs, 4 hops"),
        "{}",
        v["ratios"]
    );
}

/// A memif chain killed with SIGKILL leaves its namespaces, hop processes and socket
/// files; `sfclab cleanup` removes them all.
#[test]
#[ignore = "needs root for namespaces (CI runs it)"]
fn cleanup_removes_what_a_killed_memif_chain_left() {
    sfclab_topology::require_root("network namespaces");
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut run = Command::new(sfclab_bin())
        .args([
            "run",
            "--chain",
            "forwarder*3",
            "--chaining",
            "memif",
            "--memif-wait",
            "interrupt",
        ])
        .args(["--duration", "60s", "--rate", "10kpps"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = run.id();
    let started = Instant::now();
    let hop_pids = |ns: &str| -> Vec<String> {
        let out = Command::new("ip").args(["netns", "pids", ns]).output().unwrap();
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_string)
            .collect()
    };
    // Until all four namespaces exist and every hop runs.
    loop {
        assert!(started.elapsed() < Duration::from_secs(30), "the chain never started");
        let names = namespaces_of(pid);
        if names.len() == 4
            && names
                .iter()
                .filter(|n| n.contains("-hop"))
                .all(|n| !hop_pids(n).is_empty())
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    let names = namespaces_of(pid);
    let sockets: Vec<std::path::PathBuf> = names
        .iter()
        .map(|n| std::path::Path::new(&format!("/tmp/{n}.d")).join("in.sock"))
        .collect();
    let hops: Vec<String> = names.iter().flat_map(|n| hop_pids(n)).collect();
    assert_eq!(hops.len(), 3, "{names:?}");
    run.kill().unwrap();
    run.wait().unwrap();
    assert_eq!(namespaces_of(pid).len(), 4, "SIGKILL leaves them behind");
    let o = sfclab(&["cleanup"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(namespaces_of(pid).is_empty(), "{}", stdout(&o));
    for hop in &hops {
        assert!(
            !std::path::Path::new(&format!("/proc/{hop}")).exists()
                || std::fs::read_to_string(format!("/proc/{hop}/stat")).is_ok_and(|s| s.contains(") Z")),
            "hop process {hop} still runs"
        );
    }
    for s in &sockets {
        assert!(!s.exists(), "{} left", s.display());
    }
}

/// A memif chain of three sfclab hops and one dpdk-testpmd hop (mac forwarding) in
/// its own namespace: at a low rate nothing is lost, and the testpmd hop's step is
/// counted by its neighbours. testpmd polls and shares its core with the three
/// interrupt-mode hops, so the kernel gives it whole time slices: the rate is low
/// enough for a ring of 1,024 frames to cover one (50 ms at 20 kpps).
#[test]
#[ignore = "needs root for namespaces and dpdk-testpmd (CI runs it)"]
fn a_memif_chain_with_a_dpdk_testpmd_hop_conserves_exactly_when_installed() {
    sfclab_topology::require_root("network namespaces");
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let o = sfclab(&[
        "run",
        "--chain",
        "forwarder*4",
        "--chaining",
        "memif",
        "--memif-wait",
        "interrupt",
        "--dpdk-hops",
        "3",
        "--count",
        "5000",
        "--rate",
        "20kpps",
        "--warmup",
        "100ms",
        "--verify",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let d: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(d["window_loss"]["lost"], 0, "{}", d["path"]);
    assert_eq!(d["verify_failed"], 0);
    let path = d["path"].as_array().unwrap();
    assert_eq!(path.len(), 6, "{}", d["path"]);
    assert!(
        path[3]["place"].as_str().unwrap().contains("dpdk-testpmd"),
        "{}",
        path[3]
    );
    let generated = d["conservation"]["generated"].as_u64().unwrap();
    for step in path {
        assert_eq!(step["packets_out"], generated, "{step}");
        assert_eq!(step["unaccounted"], 0, "{step}");
    }
    assert_eq!(d["dut_processes"][2]["peer"], "dpdk-testpmd");
    let bad = sfclab(&[
        "run",
        "--chain",
        "forwarder -> nat44",
        "--chaining",
        "memif",
        "--dpdk-hops",
        "2",
    ]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("write a forwarder there"), "{}", stderr(&bad));
}

/// A tester waiting for its memif peers stops at the first Ctrl-C (exit 130, its
/// document marked interrupted, nothing received) and at a second one at once; either way
/// the socket files it listened on are gone.
#[test]
fn ctrl_c_ends_a_tester_waiting_for_its_memif_peers_and_removes_its_sockets() {
    for signals in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.sock"), dir.path().join("b.sock"));
        let ports = format!(
            "tester:memif:{},role=server,memif:{},role=server",
            a.display(),
            b.display()
        );
        let tester = Command::new(sfclab_bin())
            .args(["run", "--ports", &ports, "--count", "1000", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        common::wait_for_sockets(&a, &b);
        for _ in 0..signals {
            // SAFETY: kill(2) on our own child's pid, which has not been waited for yet.
            unsafe { libc::kill(tester.id() as libc::pid_t, libc::SIGINT) };
        }
        let o = tester.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
        if !stdout(&o).is_empty() {
            let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
            assert_eq!(v["interrupted"], true);
            assert_eq!(v["conservation"]["holds"], true, "{}", v["conservation"]);
            assert_eq!(v["conservation"]["received"], 0, "{}", v["conservation"]);
        } else {
            assert_eq!(signals, 2, "one Ctrl-C writes what finished: {}", stderr(&o));
        }
        assert!(
            !a.exists() && !b.exists(),
            "{signals} Ctrl-C: the socket files are gone"
        );
    }
}
