//! The `sfclab` command end to end: every example chain runs and conserves packets,
//! bad input gets a clear error and exit code, and every output format is well-formed.

use serde_json::Value;
use std::process::Command;

mod common;
use common::{assert_follows_schema, repo, sfclab, sfclab_bin, stderr, stdout};

/// Short windows: these tests check behaviour, not speed.
const SHORT: [&str; 4] = ["--duration", "150ms", "--warmup", "20ms"];

fn run_json(extra: &[&str]) -> Value {
    let mut args = vec!["run"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&SHORT);
    args.push("--json");
    let o = sfclab(&args);
    assert!(o.status.success(), "sfclab {args:?} failed: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).expect("valid JSON")
}

/// Every run: exact over the whole run, and the window's own traffic adds up. In one
/// thread the window's place counters are exact too; across cores packets are in flight
/// at the window's edges, so there they need not be.
fn assert_conserved(v: &Value) {
    let c = &v["conservation"];
    assert_eq!(c["holds"], true, "{c}");
    let (g, r, d) = (
        c["generated"].as_u64().unwrap(),
        c["received"].as_u64().unwrap(),
        c["dropped"].as_u64().unwrap(),
    );
    assert_eq!(g, r + d);
    assert!(g > 0);
    assert_eq!(c["buffers_leaked"], 0);
    let w = &v["window_loss"];
    let (sent, got, lost) = (
        w["sent"].as_u64().unwrap(),
        w["received"].as_u64().unwrap(),
        w["lost"].as_u64().unwrap(),
    );
    assert_eq!(sent, v["generated"].as_u64().unwrap(), "{w}");
    assert_eq!(sent, got + lost, "{w}");
    assert!(sent <= g, "the window is part of the run");
    if v["runtime"] == "compound" {
        // The drop records add up to the window's loss, place by place.
        let by_records: u64 = v["drops"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["packets"].as_u64().unwrap())
            .sum();
        assert_eq!(by_records, lost);
        assert_eq!(got, v["received"].as_u64().unwrap());
    }
}

#[test]
fn every_example_chain_runs_and_conserves_packets() {
    let mut n = 0;
    for entry in std::fs::read_dir(repo().join("examples/chains")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let v = run_json(&[path.to_str().unwrap()]);
        assert_conserved(&v);
        assert_eq!(v["schema"], "sfclab.run/4");
        // Every result carries the machine, the version and the full configuration.
        assert!(v["machine"]["tsc_hz"].as_f64().unwrap() > 0.0 && v["machine"]["cores"].as_u64().unwrap() >= 1);
        assert!(v["machine"]["kernel"].is_string() && v["version"].is_string());
        assert!(v["source"]["kind"] == "generator" && v["sink"]["kind"] == "sink" && v["chain"].is_array());
        assert_eq!(
            v["chain_config"].as_array().unwrap().len(),
            v["chain"].as_array().unwrap().len(),
            "every NF's settings"
        );
        assert!(v["mpps"].as_f64().unwrap() > 0.0, "{}", path.display());
        n += 1;
    }
    assert!(n >= 4, "only {n} example chains found");
}

#[test]
fn default_chain_runs_without_arguments() {
    let o = sfclab(&["run", "--duration", "150ms", "--warmup", "20ms"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for needle in [
        "throughput",
        "Mpps",
        "cycles/packet",
        "latency",
        "p99.9",
        "ingress",
        "conservation holds",
    ] {
        assert!(out.contains(needle), "missing `{needle}` in:\n{out}");
    }
}

#[test]
fn json_carries_per_nf_cycles_and_counts_drops_by_place() {
    let v = run_json(&[
        "--chain",
        "forwarder -> synthetic(drop_one_in=10) -> noop",
        "--size",
        "imix",
    ]);
    assert_conserved(&v);
    let places = v["places"].as_array().unwrap();
    let names: Vec<&str> = places.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["generator", "forwarder", "synthetic", "noop", "sink"]);
    for p in places {
        assert!(p["cycles_per_packet"].as_f64().is_some(), "{p}");
    }
    let syn = &places[2];
    assert_eq!(syn["drops"]["injected"], syn["dropped"]);
    // One in ten of what entered, give or take where the warm-up left the count.
    assert!(
        syn["dropped"]
            .as_u64()
            .unwrap()
            .abs_diff(syn["packets_in"].as_u64().unwrap() / 10)
            <= 1,
        "{syn}"
    );
    assert_eq!(places[3]["packets_in"], syn["packets_out"]);
    let drops = v["drops"].as_array().unwrap();
    assert_eq!(drops.len(), 1);
    assert_eq!(
        (drops[0]["place"].as_str(), drops[0]["reason"].as_str()),
        (Some("synthetic"), Some("injected"))
    );
}

#[test]
fn accounting_off_reports_no_per_nf_cycles() {
    let v = run_json(&["--chain", "forwarder*2", "--no-accounting"]);
    assert_conserved(&v);
    assert!(
        v["places"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["cycles_per_packet"].is_null())
    );
    assert!(v["busy_cycles_per_packet"].as_f64().unwrap() > 0.0);
}

#[test]
fn count_runs_generate_exactly_the_count() {
    let o = sfclab(&[
        "run",
        "--chain",
        "forwarder",
        "--count",
        "123457",
        "--warmup",
        "10ms",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["generated"], 123457);
    assert_eq!(v["received"], 123457);
}

/// The pacer never offers more than asked, and counts what it could not send as
/// skipped (the arithmetic is unit-tested on a synthetic clock).
#[test]
fn paced_rate_is_reported_as_offered() {
    let paced = paced_at_2_mpps();
    assert!(paced <= 2.08, "sent + skipped = {paced} Mpps at 2 Mpps");
}

/// On a quiet machine sent + skipped is the rate asked for.
#[test]
#[ignore = "measures: the rate a paced run reaches on the machine's clock (CI runs it alone)"]
fn paced_rate_reaches_what_was_asked() {
    let paced = paced_at_2_mpps();
    assert!((1.0..=2.08).contains(&paced), "sent + skipped = {paced} Mpps at 2 Mpps");
}

/// A run paced at 2 Mpps (what it says it offered checked): sent + skipped per second, Mpps.
fn paced_at_2_mpps() -> f64 {
    let _cores = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let v = run_json(&["--chain", "forwarder", "--rate", "2Mpps"]);
    assert_eq!(v["requested_mpps"].as_f64(), Some(2.0));
    let offered = v["generated_mpps"].as_f64().unwrap();
    assert!(offered <= 2.02, "offered {offered} Mpps at 2 Mpps");
    // On a loaded machine the loop may fall behind; the pacer counts what it skipped,
    // so sent + skipped is the offered rate whatever the load.
    let (sent, behind, secs) = (
        v["generated"].as_f64().unwrap(),
        v["pacing_behind"].as_f64().unwrap(),
        v["duration_s"].as_f64().unwrap(),
    );
    // A preemption that spans the window's end is not yet counted as skipped: on a
    // busy machine sent + skipped may fall short, never over.
    (sent + behind) / secs / 1e6
}

#[test]
fn csv_has_a_header_and_one_row() {
    let o = sfclab(&[
        "run",
        "--chain",
        "noop",
        "--duration",
        "100ms",
        "--warmup",
        "10ms",
        "--csv",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let mut rdr = csv::Reader::from_reader(out.as_bytes());
    let header = rdr.headers().unwrap().clone();
    assert_eq!(&header[0], "name");
    let rows: Vec<csv::StringRecord> = rdr.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 1);
    let conservation = header.iter().position(|h| h == "conservation").unwrap();
    assert_eq!(&rows[0][conservation], "holds");
}

#[test]
fn bad_chain_file_names_file_nf_key_and_reason() {
    let dir = std::env::temp_dir().join(format!("sfclab-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "chain:\n  - forwarder: {}\n  - synthetic: { cycles: 10, working_set: 4 }\n",
    )
    .unwrap();
    let o = sfclab(&["run", bad.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert!(
        err.contains("bad.yaml") && err.contains("chain[1] (synthetic)") && err.contains("working_set"),
        "{err}"
    );
    assert!(o.stdout.is_empty(), "nothing is run or printed on a bad config");

    std::fs::write(&bad, "chain:\n  - forwarder: { dst_mac: 1 }\n").unwrap();
    let err = stderr(&sfclab(&["run", bad.to_str().unwrap()]));
    assert!(err.contains("chain[0] (forwarder)") && err.contains("dst_mac"), "{err}");

    let o = sfclab(&["run", dir.join("missing.yaml").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("missing.yaml: cannot read"), "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Right input on a machine that fails it exits 1 (the run failed), not 2 (bad input):
/// a hop served over TCP whose control port another process holds.
#[test]
fn a_failure_of_the_machine_exits_1_and_names_the_place() {
    let held = std::net::TcpListener::bind(("::", 0))
        .or_else(|_| std::net::TcpListener::bind(("0.0.0.0", 0)))
        .unwrap();
    let port = held.local_addr().unwrap().port().to_string();
    let dir = std::env::temp_dir().join(format!("sfclab-held-port-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ports = format!(
        "dut:memif:{},memif:{}",
        dir.join("in.sock").display(),
        dir.join("out.sock").display()
    );
    let o = sfclab(&["run", "--ports", &ports, "--control-port", &port]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("control_port: listening on port {port}")),
        "{}",
        stderr(&o)
    );
    assert!(o.stdout.is_empty());
}

#[test]
fn bad_flags_are_refused_with_the_key() {
    for (args, key) in [
        (vec!["run", "--chain", "forwarder", "--size", "20"], "size"),
        (vec!["run", "--chain", "forwarder", "--batch", "0"], "batch"),
        (vec!["run", "--chain", "forwarder", "--core", "999"], "core"),
        (vec!["run", "--chain", "forwarder", "--rate", "lots"], "rate"),
        (vec!["run", "--chain", "nat(x=1)"], "unknown NF type"),
        (
            vec!["run", "--chain", "forwarder", "--ip", "v6", "--size", "64"],
            "size",
        ),
        // A tester signs each frame after its headers: 14 + 20 + 20 + 16 + 4 FCS bytes.
        (
            vec!["run", "--ports", "tester:veth0,veth1", "--proto", "tcp", "--size", "64"],
            "needs at least 74 bytes",
        ),
        (
            vec!["run", "--ports", "tester:veth0,veth1", "--ip", "v6", "--size", "78"],
            "needs at least 82 bytes",
        ),
    ] {
        let o = sfclab(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(key), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn help_lists_every_command_and_nf() {
    let out = stdout(&sfclab(&["--help"]));
    for cmd in ["run", "bench", "nfs"] {
        assert!(out.contains(cmd), "{out}");
    }
    let run_help = stdout(&sfclab(&["run", "--help"]));
    for flag in [
        "--chain",
        "--size",
        "--rate",
        "--duration",
        "--count",
        "--json",
        "--csv",
        "--no-accounting",
        "--verify",
    ] {
        assert!(run_help.contains(flag), "run --help lacks {flag}");
    }
    let nfs = stdout(&sfclab(&["nfs"]));
    for nf in ["forwarder", "noop", "synthetic"] {
        assert!(nfs.contains(nf));
    }
}

/// The LPM benchmark's document follows its schema and says what it measured; the peer
/// is measured in the CI run (`sfclab bench lpm`), too slow for a test.
#[test]
fn bench_lpm_reports_cycles_per_lookup() {
    let o = sfclab(&["bench", "lpm", "--repeat", "1", "--peer", "none", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["schema"], "sfclab.bench.lpm/1");
    assert_follows_schema("bench-lpm-1.json", &v);
    assert!(v["routes"].as_u64().unwrap() > 1_000_000);
    let single = v["single_cycles"].as_f64().unwrap();
    assert!(single > 0.0 && single.is_finite(), "{single}");
    assert!(
        v["dpdk_single_cycles"].is_null() && v["single_ratio"].is_null(),
        "no peer, no ratio"
    );
}

/// TCP sessions from the command line: the source says so, sessions are counted, and a
/// stateless chain passes every packet.
#[test]
fn tcp_sessions_run_end_to_end() {
    let o = sfclab(&[
        "run",
        "--chain",
        "forwarder",
        "--proto",
        "tcp",
        "--session-packets",
        "4",
        "--duration",
        "100ms",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert!(
        v["source"]["summary"]
            .as_str()
            .unwrap()
            .contains("tcp sessions of 4 packets"),
        "{}",
        v["source"]
    );
    assert_eq!(v["source"]["settings"]["proto"], "tcp");
    let sessions = v["places"][0]["counters"]["sessions_started"].as_u64().unwrap();
    let generated = v["places"][0]["packets_out"].as_u64().unwrap();
    assert!(
        sessions.abs_diff(generated / 4) <= 256,
        "{sessions} sessions of {generated} packets"
    );
    assert_eq!(v["dropped"], 0);
    let bad = sfclab(&[
        "run",
        "--chain",
        "forwarder",
        "--proto",
        "tcp",
        "--ip",
        "v6",
        "--duration",
        "10ms",
    ]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("proto"), "{}", stderr(&bad));
}

/// The bidirectional example: TCP sessions out through firewall, NAT and router, replies
/// back through all three; nothing dropped, the way back reported place by place. A
/// responder on the pipeline runtime is refused with the key named.
#[test]
fn responder_runs_tcp_both_ways_through_the_stateful_chain() {
    let o = sfclab(&[
        "run",
        repo().join("examples/chains/fw-nat-router.yaml").to_str().unwrap(),
        "--duration",
        "200ms",
        "--warmup",
        "50ms",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["dropped"], 0, "{}", v["drops"]);
    let names: Vec<&str> = v["places"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "generator",
            "firewall",
            "nat44",
            "router",
            "responder",
            "router (reply)",
            "nat44 (reply)",
            "firewall (reply)",
            "sink"
        ]
    );
    let generated = v["places"][0]["packets_out"].as_u64().unwrap();
    assert_eq!(
        v["places"][7]["packets_out"].as_u64().unwrap(),
        generated,
        "every reply back through the firewall"
    );
    let bad = sfclab(&[
        "run",
        "--chain",
        "forwarder",
        "--responder",
        "--runtime",
        "pipeline",
        "--duration",
        "10ms",
    ]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("responder"), "{}", stderr(&bad));
}

/// Named traffic: a built-in profile by flag, a chain file's own profile by key, keys
/// beside a profile win, and an unknown name is refused with the known ones listed.
#[test]
fn traffic_profiles_by_flag_and_by_chain_file() {
    let v = run_json(&["--chain", "forwarder", "--profile", "web", "--flows", "64"]);
    let summary = v["source"]["summary"].as_str().unwrap();
    assert!(
        summary.contains("64 flow(s)") && summary.contains("tcp sessions of 10"),
        "{summary}"
    );
    assert!(v["places"].as_array().unwrap().iter().any(|p| p["name"] == "responder"));
    assert_conserved(&v);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("own.yaml");
    std::fs::write(
        &file,
        "profiles:\n  small-churn: { flows: 16, session_packets: 3, size: 128 }\ntraffic: { profile: small-churn }\nchain: [nat44]\n",
    )
    .unwrap();
    let v = run_json(&[file.to_str().unwrap()]);
    let summary = v["source"]["summary"].as_str().unwrap();
    assert!(summary.starts_with("128 B frames, 16 flow(s)"), "{summary}");
    assert_conserved(&v);
    let bad = sfclab(&["run", "--chain", "forwarder", "--profile", "wbe", "--duration", "10ms"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("--profile") && stderr(&bad).contains("known: rfc2544, imix"),
        "{}",
        stderr(&bad)
    );
    let listed = sfclab(&["profiles"]);
    assert!(
        stdout(&listed).lines().any(|l| l.starts_with("churn: ")),
        "{}",
        stdout(&listed)
    );
}

/// `destinations: router` aims every flow inside the chain's own routing table: a table
/// without a default route forwards all of it, where spread addresses mostly miss.
#[test]
fn destinations_name_the_chain_s_routing_table() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("table.yaml");
    std::fs::write(
        &file,
        "traffic: { destinations: router, flows: 4096 }\nchain:\n  - router: { generate: { ipv4: 2000, seed: 7 } }\n",
    )
    .unwrap();
    let v = run_json(&[file.to_str().unwrap()]);
    assert_eq!(v["dropped"], 0, "{}", v["drops"]);
    assert_conserved(&v);
    let v = run_json(&[file.to_str().unwrap(), "--destinations", "spread"]);
    assert!(
        v["dropped"].as_u64().unwrap() > v["generated"].as_u64().unwrap() / 2,
        "{}",
        v["drops"]
    );
    let bad = sfclab(&[
        "run",
        "--chain",
        "forwarder",
        "--destinations",
        "router",
        "--duration",
        "10ms",
    ]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("needs a router in the chain"), "{}", stderr(&bad));
}

/// pcap files as the chain's ports: a capture written by one run is replayed through
/// another chain into a second capture, every packet conserved; bad files and runtimes
/// that cannot take files are refused by name.
#[test]
fn captures_are_written_and_replayed_through_a_chain() {
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first.pcap");
    let second = dir.path().join("second.pcap");
    let o = sfclab(&[
        "run",
        "--chain",
        "forwarder",
        "--flows",
        "64",
        "--count",
        "1000",
        "--warmup",
        "0s",
        "--capture",
        first.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["sink"]["kind"], "pcap");
    let written = v["conservation"]["received"].as_u64().unwrap();
    assert!(written >= 1000);
    let o = sfclab(&[
        "run",
        "--chain",
        "nat44",
        "--replay",
        first.to_str().unwrap(),
        "--replay-loops",
        "2",
        "--count",
        "1500",
        "--warmup",
        "0s",
        "--capture",
        second.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_conserved(&v);
    assert_eq!(v["source"]["kind"], "pcap");
    assert_eq!(v["window_loss"]["sent"], 1500, "{}", v["window_loss"]);
    assert!(std::fs::metadata(&second).unwrap().len() > 1500 * 60);
    let bad = sfclab(&[
        "run",
        "--chain",
        "forwarder",
        "--replay",
        "/nonexistent/x.pcap",
        "--duration",
        "10ms",
    ]);
    assert!(!bad.status.success());
    assert!(stderr(&bad).contains("/nonexistent/x.pcap"), "{}", stderr(&bad));
    let bad = sfclab(&[
        "run",
        "--chain",
        "forwarder",
        "--replay",
        first.to_str().unwrap(),
        "--runtime",
        "pipeline",
        "--duration",
        "10ms",
    ]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("--replay"), "{}", stderr(&bad));
}

/// A tap writes what leaves one NF of the chain, in both runtimes: exactly the packets the
/// NF passed on (not what it dropped), readable as a capture; bad taps are refused by key.
#[test]
fn a_tap_writes_what_leaves_an_nf() {
    let dir = tempfile::tempdir().unwrap();
    for runtime in ["compound", "pipeline"] {
        let tap = dir.path().join(format!("{runtime}.pcap"));
        let o = sfclab(&[
            "run",
            "--chain",
            "synthetic(drop_one_in=4) -> nat44",
            "--count",
            "800",
            "--warmup",
            "0s",
            "--runtime",
            runtime,
            "--tap",
            &format!("synthetic={}", tap.display()),
            "--json",
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_conserved(&v);
        let place = |name: &str| {
            v["places"]
                .as_array()
                .unwrap()
                .iter()
                .find(|p| p["name"] == name)
                .unwrap()
                .clone()
        };
        let synthetic = place("synthetic");
        let passed = synthetic["packets_out"].as_u64().unwrap();
        assert_eq!(synthetic["dropped"], 200, "{runtime}: one in four of 800");
        assert_eq!(synthetic["counters"]["tap_frames"], passed, "{runtime}");
        let written = sfclab_io::PcapSource::open(&tap, Some(1)).unwrap();
        assert_eq!(
            written.frames() as u64,
            passed,
            "{runtime}: the file holds what the NF passed on"
        );
        for i in 0..written.frames() {
            let (frame, _) = sfclab_wire::FrameRepr::parse(written.frame(i)).expect("a whole frame");
            let sfclab_wire::IpRepr::V4 { src, .. } = frame.ip else {
                panic!("IPv4")
            };
            assert_eq!(
                &src[..2],
                &[198, 18],
                "{runtime}: frame {i} is tapped before NAT translates it"
            );
        }
    }
    for (tap, why) in [
        ("nowhere=x.pcap", "no NF named `nowhere`"),
        ("synthetic", "write the NF's name"),
        ("synthetic=", "no file"),
    ] {
        let bad = sfclab(&["run", "--chain", "synthetic", "--tap", tap, "--duration", "10ms"]);
        assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
        assert!(
            stderr(&bad).contains("--tap") && stderr(&bad).contains(why),
            "{}",
            stderr(&bad)
        );
    }
}

/// A replay keeps the file's gaps (`--replay-timestamps`) or runs at `--rate`: a pass over
/// 40 frames 5 ms apart takes at least 195 ms; at 1 kpps at least 39 ms. Only lower bounds
/// are checked (a loaded machine is slower, never faster). The two paces are exclusive.
#[test]
fn replays_keep_the_files_timestamps_or_a_rate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gaps.pcap");
    let mut w = pcap_file::pcap::PcapWriter::new(std::fs::File::create(&path).unwrap()).unwrap();
    let frame = {
        let one = dir.path().join("one.pcap");
        let o = sfclab(&[
            "run",
            "--chain",
            "forwarder",
            "--count",
            "1",
            "--warmup",
            "0s",
            "--capture",
            one.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        sfclab_io::PcapSource::open(&one, Some(1)).unwrap().frame(0).to_vec()
    };
    for i in 0..40u64 {
        let at = std::time::Duration::from_millis(1_700_000_000_000 + 5 * i);
        w.write_packet(&pcap_file::pcap::PcapPacket::new(at, frame.len() as u32, &frame))
            .unwrap();
    }
    drop(w);
    let timed = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--chain",
            "forwarder",
            "--replay",
            path.to_str().unwrap(),
            "--replay-loops",
            "1",
        ];
        args.extend_from_slice(&["--warmup", "0s", "--json"]);
        args.extend_from_slice(extra);
        let t = std::time::Instant::now();
        let o = sfclab(&args);
        let took = t.elapsed();
        assert!(o.status.success(), "{}", stderr(&o));
        let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_conserved(&v);
        assert_eq!(v["window_loss"]["sent"], 40, "{}", v["window_loss"]);
        (took, v)
    };
    let (took, v) = timed(&["--replay-timestamps"]);
    assert!(took >= std::time::Duration::from_millis(195), "{took:?}");
    assert!(
        v["source"]["summary"].as_str().unwrap().contains("timestamps"),
        "{}",
        v["source"]
    );
    let (took, _) = timed(&["--rate", "1kpps"]);
    assert!(took >= std::time::Duration::from_millis(39), "{took:?}");
    let bad = sfclab(&[
        "run",
        "--chain",
        "forwarder",
        "--replay",
        path.to_str().unwrap(),
        "--replay-timestamps",
        "--rate",
        "1kpps",
    ]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("--replay-timestamps"), "{}", stderr(&bad));
}

/// The IPv6 LPM benchmark: every address lies inside a route, its document follows the
/// schema; the peer runs in `tests/peers.rs`.
#[test]
fn bench_lpm6_reports_cycles_per_lookup() {
    let o = sfclab(&["bench", "lpm6", "--repeat", "1", "--peer", "none", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["schema"], "sfclab.bench.lpm6/1");
    assert_follows_schema("bench-lpm6-1.json", &v);
    assert_eq!(v["routes"], 1000);
    assert_eq!(v["fails_percent"].as_f64(), Some(0.0));
    assert!(v["single_cycles"].as_f64().unwrap() > 0.0);
    assert!(v["single_ratio"].is_null(), "no peer, no ratio");
}

/// `bench nfs`: JSON that follows its schema, CSV with a row per point, a plot file.
#[test]
fn bench_nfs_reports_each_nf_in_every_form() {
    let dir = tempfile::tempdir().unwrap();
    let plot = dir.path().join("nfs.svg");
    let common = [
        "bench",
        "nfs",
        "--only",
        "forwarder,nat44@1000",
        "--nat-sessions",
        "1000",
        "--flows",
        "512",
        "--rules",
        "20",
        "--repeat",
        "1",
        "--duration",
        "50ms",
        "--warmup",
        "20ms",
    ];
    let o = sfclab(&[&common[..], &["--json", "--plot", plot.to_str().unwrap()]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["schema"], "sfclab.bench.nfs/7");
    assert_follows_schema("bench-nfs-7.json", &v);
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 3, "forwarder at 64 B and IMIX, nat44@1000 at 64 B");
    assert!(std::fs::read_to_string(&plot).unwrap().contains("<svg"));
    let csv = stdout(&sfclab(&[&common[..], &["--csv"]].concat()));
    assert_eq!(csv.lines().count(), 4, "{csv}");
    assert!(csv.starts_with("workload,frames,flows,"));
    let bad = sfclab(&["bench", "nfs", "--only", "nat66"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("no workload `nat66`"), "{}", stderr(&bad));
}

#[test]
fn bench_hop_reports_slope_and_json() {
    let o = sfclab(&[
        "bench",
        "hop",
        "--hops",
        "0,1,2",
        "--repeat",
        "1",
        "--duration",
        "100ms",
        "--warmup",
        "10ms",
        "--peer",
        "none",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["schema"], "sfclab.bench.hop/2");
    assert_follows_schema("bench-hop-2.json", &v);
    assert_eq!(
        v["points"].as_array().unwrap().len(),
        6,
        "3 lengths x accounting off/on"
    );
    assert!(v["fit_accounting_off"]["slope"].as_f64().is_some());
    assert!(v["accounting_overhead_per_hop"].as_f64().is_some());
    assert!(v["peer_skipped"].as_str().unwrap().contains("not requested"));
}

#[test]
fn pipeline_runs_report_cores_links_and_conserve() {
    let v = run_json(&[
        "--chain",
        "forwarder*4 -> synthetic(drop_one_in=50)",
        "--placement",
        "pbp:2",
    ]);
    assert_conserved(&v);
    assert_eq!(v["runtime"], "pipeline");
    assert_eq!(v["placement"], "pbp:2");
    let places = v["places"].as_array().unwrap();
    let links = places.iter().filter(|p| p["kind"] == "link").count();
    assert_eq!(links, 4, "pbp: a link after every NF but the last");
    assert_eq!(places[1]["kind"], "rx-queue");
    assert!(!v["cores"].as_array().unwrap().is_empty());
    let o = sfclab(&[
        "run",
        "--chain",
        "forwarder*2",
        "--placement",
        "bi:2",
        "--links",
        "backpressure",
        "--duration",
        "150ms",
        "--warmup",
        "20ms",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("placement bi:2, links backpressure") && out.contains("busy TSC cycles/packet"),
        "{out}"
    );
}

#[test]
fn pipeline_config_errors_name_the_key() {
    for (args, key) in [
        (vec!["run", "--chain", "forwarder", "--placement", "bi:99"], "placement"),
        (
            vec![
                "run",
                "--chain",
                "forwarder",
                "--placement",
                "s_core",
                "--links",
                "maybe",
            ],
            "links",
        ),
        (vec!["run", "--chain", "forwarder", "--runtime", "threads"], "runtime"),
    ] {
        let o = sfclab(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(key), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn parallel_replicas_spread_flows_and_conserve() {
    let v = run_json(&["--chain", "forwarder*2", "--replicas", "2", "--flows", "64"]);
    assert_conserved(&v);
    assert_eq!(v["placement"], "s_core x2 replicas");
    let places = v["places"].as_array().unwrap();
    for name in ["forwarder1@0", "forwarder2@0", "forwarder1@1", "forwarder2@1"] {
        let p = places
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no place {name}"));
        assert!(p["packets_in"].as_u64().unwrap() > 0, "{name} got no packets");
    }
    let o = sfclab(&[
        "run",
        "--chain",
        "forwarder",
        "--replicas",
        "2",
        "--runtime",
        "compound",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("replicas"), "{}", stderr(&o));
}

#[test]
fn placement_and_overload_sweeps_are_one_command_each() {
    // Measures on both cores: not beside the timed tests.
    let _cores = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let o = sfclab(&[
        "bench",
        "placement",
        "--lengths",
        "1,2",
        "--placements",
        "s_core,pbp:1",
        "--repeat",
        "1",
        "--duration",
        "100ms",
        "--warmup",
        "10ms",
        "--csv",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let mut rdr = csv::Reader::from_reader(out.as_bytes());
    assert_eq!(rdr.records().count(), 4, "{out}");
    let o = sfclab(&[
        "bench",
        "placement",
        "--lengths",
        "1",
        "--placements",
        "s_core",
        "--repeat",
        "1",
        "--duration",
        "50ms",
        "--warmup",
        "5ms",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_follows_schema("bench-placement-2.json", &serde_json::from_str(&stdout(&o)).unwrap());
    let o = sfclab(&[
        "bench",
        "placement",
        "--lengths",
        "2",
        "--placements",
        "bi:1",
        "--repeat",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(2), "s_core is the reference and must be there");

    if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
        eprintln!("skipped: bench overload needs two cores");
        return;
    }
    let o = sfclab(&[
        "bench",
        "overload",
        "--hops",
        "2",
        "--loads",
        "0.5,2",
        "--repeat",
        "1",
        "--duration",
        "100ms",
        "--warmup",
        "10ms",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["schema"], "sfclab.bench.overload/2");
    assert_follows_schema("bench-overload-2.json", &v);
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 4, "2 loads x drop/backpressure");
    assert!(
        points
            .iter()
            .filter(|p| p["links"] == "backpressure")
            .all(|p| p["software_drops"] == 0)
    );
}

#[test]
#[cfg_attr(one_core, ignore = "needs two cores; this machine has one")]
fn bench_pipeline_without_peer_compares_two_and_three_stages() {
    let o = sfclab(&[
        "bench",
        "pipeline",
        "--repeat",
        "1",
        "--duration",
        "100ms",
        "--warmup",
        "10ms",
        "--peer",
        "none",
        "--csv",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let rows: Vec<csv::StringRecord> = csv::Reader::from_reader(out.as_bytes())
        .records()
        .map(Result::unwrap)
        .collect();
    assert_eq!(rows.len(), 3, "sfclab's three configurations only: {out}");
    assert!(
        rows.iter()
            .all(|r| &r[1] == "sfclab" && r[3].parse::<f64>().unwrap() > 0.0)
    );
    let o = sfclab(&["bench", "pipeline", "--repeat", "0"]);
    assert_eq!(o.status.code(), Some(2));
}

/// Default cores come from the affinity mask: under `taskset -c 1` (a cpuset, a pod) the
/// chain runs on core 1, the one core it may use.
#[test]
#[cfg_attr(one_core, ignore = "needs two cores; this machine has one")]
fn default_cores_follow_the_affinity_mask() {
    if Command::new("taskset").arg("--version").output().is_err() {
        eprintln!("skipped: taskset (util-linux) is not installed");
        return;
    }
    for core in ["0", "1"] {
        let o = Command::new("taskset")
            .args([
                "-c",
                core,
                sfclab_bin(),
                "run",
                "--chain",
                "noop",
                "--duration",
                "50ms",
                "--json",
            ])
            .output()
            .unwrap();
        assert!(o.status.success(), "taskset -c {core}: {}", stderr(&o));
        let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert_eq!(v["core"].as_u64().map(|c| c.to_string()).as_deref(), Some(core));
    }
}

/// On one core the generator would share the chain's core: the search refuses, or with
/// `--shared-core` labels its figures as MRR.
#[test]
fn search_on_one_core_refuses_or_labels_the_result_mrr() {
    if Command::new("taskset").arg("--version").output().is_err() {
        eprintln!("skipped: taskset (util-linux) is not installed");
        return;
    }
    let search = |extra: &[&str]| {
        let mut args = vec![
            "-c",
            "0",
            sfclab_bin(),
            "search",
            "--chain",
            "forwarder",
            "--duration",
            "50ms",
        ];
        args.extend_from_slice(&[
            "--warmup",
            "5ms",
            "--resolution",
            "20%",
            "--latency-at",
            "none",
            "--max-trials",
            "8",
        ]);
        args.extend_from_slice(extra);
        Command::new("taskset").args(&args).output().unwrap()
    };
    let o = search(&[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--shared-core"), "{}", stderr(&o));
    let o = search(&["--shared-core"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("MRR"), "{out}");
}

#[test]
fn search_finds_ndr_and_pdr_and_reports_them() {
    let _cores = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let o = sfclab(&[
        "search",
        "--repeat",
        "2",
        "--chain",
        "forwarder -> synthetic(cycles=200)",
        "--duration",
        "100ms",
        "--warmup",
        "10ms",
        "--initial-duration",
        "25ms",
        "--duration-sum",
        "300ms",
        "--resolution",
        "5%",
        "--goals",
        "ndr,0.1%",
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["schema"], "sfclab.search/3");
    assert_follows_schema("search-3.json", &v);
    assert_eq!(
        v["chain_config"].as_array().unwrap().len(),
        2,
        "the full chain settings"
    );
    assert!(v["machine"]["cpu"].is_string());
    let goals = v["search"]["goals"].as_array().unwrap();
    assert_eq!(goals.len(), 2);
    assert_eq!(goals[1]["goal"]["loss_ratio"], 0.001);
    assert!(
        goals[0]["lower_pps"].as_f64() <= goals[1]["lower_pps"].as_f64(),
        "PDR >= NDR"
    );
    assert_eq!(v["interrupted"], false);
    // The chain is the device under test on a core of its own, the generator on another.
    let two_cores = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    assert_eq!(v["dut"]["isolated"], two_cores, "{}", v["dut"]);
    assert_eq!(v["dut"]["measures"], if two_cores { "throughput" } else { "mrr" });
    for g in goals {
        assert!(g["lower_pps"].as_f64().unwrap() > 0.0, "{g}");
    }
    assert!(v["search"]["trial_count"].as_u64().unwrap() >= 2);
    // Per place at each goal's rate: packets in and out of every NF.
    let analysis = v["chain_analysis"].as_array().unwrap();
    assert_eq!(analysis.len(), 2);
    let places = analysis[0]["places"].as_array().unwrap();
    assert!(
        places
            .iter()
            .any(|p| p["name"] == "synthetic" && p["packets_in"].as_u64().unwrap() > 0),
        "{places:?}"
    );
    let reps = v["repetitions"].as_array().unwrap();
    assert_eq!(reps.len(), 2, "two whole searches");
    assert!(
        reps.iter().all(|r| r.as_array().unwrap().len() == 2),
        "a result per goal per search"
    );
    // Latency at 0/10/50/90/100% of the last goal's rate, and the no-NF calibration.
    let lat = v["latency"].as_array().unwrap();
    assert_eq!(lat.len(), 6);
    assert!(
        lat.iter().all(|l| l["latency"]["p99_ns"].as_f64().unwrap() > 0.0),
        "{lat:?}"
    );
    assert_eq!(lat.last().unwrap()["empty_chain"], true);
    for (args, key) in [
        (vec!["search", "--chain", "noop", "--goals", "most"], "--goals"),
        (vec!["search", "--chain", "noop", "--method", "guess"], "--method"),
    ] {
        let o = sfclab(&args);
        assert_eq!(o.status.code(), Some(2));
        assert!(stderr(&o).contains(key), "{}", stderr(&o));
    }
}

/// Tests that measure, one at a time: in a parallel run they would share the cores.
static MEASURING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Runs sfclab with `args`, sends it Ctrl-C (SIGINT) after `ms`, and waits for it: its
/// output and how long it took to exit after the signal.
fn interrupted_after(args: &[&str], ms: u64) -> (std::process::Output, std::time::Duration) {
    let child = Command::new(env!("CARGO_BIN_EXE_sfclab"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(ms));
    // SAFETY: kill(2) on our own child, which has not been waited for yet.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let sent = std::time::Instant::now();
    let output = child.wait_with_output().unwrap();
    (output, sent.elapsed())
}

#[test]
fn ctrl_c_ends_the_window_and_keeps_the_results() {
    let _cores = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    for extra in [vec![], vec!["--placement", "s_core"]] {
        let mut args = vec![
            "run",
            "--chain",
            "forwarder",
            "--duration",
            "120s",
            "--warmup",
            "50ms",
            "--json",
        ];
        args.extend(extra);
        let (o, _) = interrupted_after(&args, 700);
        assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
        let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
        assert!(v["duration_s"].as_f64().unwrap() < 60.0, "the window ended early");
        assert_eq!(v["interrupted"], true);
        assert_conserved(&v);
        assert!(stderr(&o).contains("stopping"));
    }
}

#[test]
fn version_names_the_commit_and_shells_and_man_are_served() {
    let o = sfclab(&["--version"]);
    assert!(
        stdout(&o).starts_with("sfclab 0.")
            && stdout(&o).contains("(commit ")
            && stdout(&o).contains("ESP's AES-GCM: "),
        "{}",
        stdout(&o)
    );
    for shell in ["bash", "zsh", "fish"] {
        let o = sfclab(&["completions", shell]);
        assert!(o.status.success() && stdout(&o).contains("search"), "{shell}");
    }
    let o = sfclab(&["man"]);
    assert!(o.status.success() && stdout(&o).contains(".TH sfclab 1"));
    // Every output error is an error message and a non-zero exit, never a panic.
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full");
    if let Ok(full) = full {
        let o = Command::new(env!("CARGO_BIN_EXE_sfclab"))
            .args(["nfs"])
            .stdout(full)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(stderr(&o).contains("cannot write the output") && !stderr(&o).contains("panicked"));
    } else {
        eprintln!("skipped the /dev/full check: no /dev/full here");
    }
}

/// Ctrl-C stops every measuring command at its next safe point: the run under way ends
/// its window (and is not counted), what finished is written marked interrupted, exit
/// 130. In benchmarks every point has exactly the rounds done. The bound here only
/// catches a command that ignores the signal; how fast it stops is measured below.
#[test]
fn ctrl_c_stops_every_command_and_keeps_what_finished() {
    ctrl_c_stops_every_command_within(std::time::Duration::from_secs(10));
}

/// The promise users see: within a second, on a machine that is not busy.
#[test]
#[ignore = "measures: a wall-clock bound of one second (CI runs it alone)"]
fn ctrl_c_stops_every_command_within_a_second() {
    ctrl_c_stops_every_command_within(std::time::Duration::from_secs(1));
}

fn ctrl_c_stops_every_command_within(bound: std::time::Duration) {
    let _cores = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let out = std::env::temp_dir().join(format!("sfclab-ctrl-c-sweep-{}", std::process::id()));
    let out = out.to_str().unwrap();
    let window = ["--duration", "300ms", "--warmup", "10ms", "--json"];
    let cases: Vec<Vec<&str>> = vec![
        vec!["run", "--chain", "forwarder*2", "--duration", "60s", "--json"],
        vec![
            "sweep",
            "--chain",
            "forwarder*{}",
            "--param",
            "hops",
            "--values",
            "1,2,3,4,5,6,7,8",
        ],
        vec!["bench", "hop", "--hops", "0,1", "--repeat", "100", "--peer", "none"],
        vec!["bench", "placement", "--lengths", "4,8", "--repeat", "100"],
        vec!["bench", "overload", "--hops", "1,3", "--repeat", "100"],
        vec!["bench", "ring", "--repeat", "100"],
        vec!["bench", "lpm", "--repeat", "100"],
        vec!["bench", "lpm6", "--repeat", "100"],
        vec!["bench", "acl", "--repeat", "100"],
        vec!["bench", "model", "--sizes", "64", "--repeat", "2"],
        vec!["bench", "pipeline", "--repeat", "100", "--peer", "none"],
        vec![
            "bench",
            "nfs",
            "--repeat",
            "100",
            "--nat-sessions",
            "1000",
            "--flows",
            "1000",
        ],
    ];
    for mut args in cases {
        if args[0] == "sweep" {
            args.extend(["--out", out, "--force", "--repeat", "100"]);
        }
        match args[..2] {
            ["run", _] => {}
            ["bench", "ring"] => args.extend(["--duration", "300ms", "--json"]),
            ["bench", "lpm" | "lpm6" | "acl"] => args.push("--json"),
            ["bench", "model"] => args.extend(["--duration", "100ms", "--json"]),
            _ => args.extend(window),
        }
        let (o, took) = interrupted_after(&args, 1500);
        let what = args[..2].join(" ");
        assert_eq!(o.status.code(), Some(130), "{what}: {}", stderr(&o));
        assert!(took < bound, "{what} took {took:?} to stop");
        if stdout(&o).is_empty() {
            // Stopped inside its first round (bench model measures each cell's terms
            // first; lpm waits for DPDK's table shape): nothing whole to write, it says so.
            assert!(
                ["model", "lpm", "lpm6"].contains(&args[1]) && stderr(&o).contains("before the first round ended"),
                "{what}: {}",
                stderr(&o)
            );
            continue;
        }
        let v: Value = serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(v["interrupted"], true, "{what}");
        if args[0] == "bench" && args[1] != "overload" {
            let done = v["repeat"].as_u64().unwrap();
            assert!(done < 100, "{what}: {done} rounds");
        }
        if args[1] == "hop" || args[1] == "placement" {
            let done = v["repeat"].as_u64().unwrap();
            for p in v["points"].as_array().unwrap() {
                assert_eq!(p["mpps_runs"].as_array().unwrap().len() as u64, done, "{what}: {p}");
            }
        }
    }
    let _ = std::fs::remove_dir_all(out);
}

/// Ctrl-C in a search keeps the trials made so far, marked interrupted, exit 130. The
/// signal is sent once the search says its first trial ended (however long that takes).
#[test]
fn ctrl_c_in_a_search_keeps_the_trials_so_far() {
    use std::io::BufRead;
    let _cores = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let mut child = Command::new(env!("CARGO_BIN_EXE_sfclab"))
        .args(["search", "--chain", "forwarder -> synthetic(cycles=300)"])
        .args(["--duration", "200ms", "--warmup", "10ms", "--shared-core", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut progress = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    while !said.contains("trials 1/") {
        said.clear();
        assert!(
            progress.read_line(&mut said).unwrap() > 0,
            "the search ended before its first trial"
        );
    }
    // SAFETY: kill(2) on our own child, which has not been waited for yet.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let rest = std::thread::spawn(move || std::io::read_to_string(progress).unwrap());
    let o = child.wait_with_output().unwrap();
    let o = std::process::Output {
        stderr: rest.join().unwrap().into_bytes(),
        ..o
    };
    assert_eq!(o.status.code(), Some(130), "{}", stderr(&o));
    let v: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["interrupted"], true);
    assert_eq!(v["search"]["interrupted"], true);
    let trials = v["search"]["trials"].as_array().unwrap();
    assert!(!trials.is_empty(), "the trials made before Ctrl-C are kept");
    assert_eq!(v["search"]["trial_count"].as_u64().unwrap() as usize, trials.len());
}

#[test]
fn sweep_writes_a_result_set_plots_and_an_offline_report_that_report_redraws() {
    // Measures on both cores: not beside the timed tests.
    let _cores = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("sfclab-sweep-{}", std::process::id()));
    let o = sfclab(&[
        "sweep",
        "--chain",
        "forwarder*{}",
        "--param",
        "hops",
        "--values",
        "1,2,4",
        "--repeat",
        "2",
        "--duration",
        "100ms",
        "--warmup",
        "10ms",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("over hops"), "{}", stdout(&o));
    let set: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("sweep.json")).unwrap()).unwrap();
    assert_eq!(set["schema"], "sfclab.sweep/3");
    assert_eq!(set["interrupted"], false);
    assert_follows_schema("sweep-3.json", &set);
    let points = set["points"].as_array().unwrap();
    assert_eq!(
        points.iter().map(|p| p["value"].as_str().unwrap()).collect::<Vec<_>>(),
        ["1", "2", "4"]
    );
    assert!(
        points
            .iter()
            .all(|p| p["conservation_holds"] == true && p["mpps_runs"].as_array().unwrap().len() == 2)
    );
    assert_eq!(
        points[2]["report"]["chain"].as_array().unwrap().len(),
        4,
        "each point keeps its full report"
    );
    let csv_text = std::fs::read_to_string(dir.join("sweep.csv")).unwrap();
    assert_eq!(csv::Reader::from_reader(csv_text.as_bytes()).records().count(), 3);
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(
        html.contains("<svg") && html.contains("<td>4</td>"),
        "plots inline and the table"
    );
    assert!(
        !html.contains("src=") && !html.contains("<link") && !html.contains("<script"),
        "opens offline"
    );
    let svg = std::fs::read_to_string(dir.join("throughput.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("Throughput"));
    let png = std::fs::read(dir.join("throughput.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "a real PNG");

    // Re-rendered later from the JSON alone (named by its file or its directory): the
    // same report.
    for results in [dir.join("sweep.json"), dir.clone()] {
        std::fs::remove_file(dir.join("report.html")).unwrap();
        let o = sfclab(&["report", results.to_str().unwrap()]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(std::fs::read_to_string(dir.join("report.html")).unwrap(), html);
    }
    let o = sfclab(&["report", dir.join("sweep.csv").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));

    // A result set is never overwritten by accident, and that is known before running.
    let again = [
        "sweep",
        "--chain",
        "forwarder",
        "--param",
        "flows",
        "--values",
        "1",
        "--repeat",
        "1",
        "--duration",
        "50ms",
        "--out",
    ];
    let started = std::time::Instant::now();
    let o = sfclab(&[&again[..], &[dir.to_str().unwrap()]].concat());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--force"), "{}", stderr(&o));
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "refused before measuring"
    );
    // --json and --csv print the result set; --force overwrites.
    let o = sfclab(&[&again[..], &[dir.to_str().unwrap(), "--force", "--json"]].concat());
    assert!(o.status.success(), "{}", stderr(&o));
    let printed: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(printed["points"].as_array().unwrap().len(), 1);
    let o = sfclab(&[&again[..], &[dir.to_str().unwrap(), "--force", "--csv"]].concat());
    assert!(stdout(&o).starts_with("param,value,mpps"), "{}", stdout(&o));
    std::fs::remove_dir_all(&dir).unwrap();

    for (values, param, key) in [
        ("1,2", "colour", "colour"),
        ("1,many", "flows", "many"),
        ("v5", "ip", "v5"),
    ] {
        let o = sfclab(&["sweep", "--chain", "forwarder", "--param", param, "--values", values]);
        assert_eq!(o.status.code(), Some(2));
        assert!(stderr(&o).contains(key), "{}", stderr(&o));
    }
}

/// `--param size --values rfc2544` is RFC 2544's procedure: one point per frame size.
#[test]
fn sweep_over_rfc2544_sizes_measures_each_size_on_its_own() {
    // Measures on both cores: not beside the timed tests.
    let _cores = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("sfclab-rfc2544-{}", std::process::id()));
    let o = sfclab(&[
        "sweep",
        "--chain",
        "forwarder",
        "--param",
        "size",
        "--values",
        "rfc2544",
        "--repeat",
        "1",
        "--duration",
        "30ms",
        "--warmup",
        "5ms",
        "--out",
        dir.to_str().unwrap(),
        "--json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let set: Value = serde_json::from_str(&stdout(&o)).unwrap();
    let values: Vec<&str> = set["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["value"].as_str().unwrap())
        .collect();
    assert_eq!(values, ["64", "128", "256", "512", "1024", "1280", "1518"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The scripts measure and price what they measured: on a loaded machine a calibration
/// can price a term below zero, which `model predict` refuses (002's break-even). The
/// calibration measures such runs again (three attempts), but whether the scripts finish
/// still depends on measured values.
#[test]
#[ignore = "measures: every reproduction script in quick mode (CI runs it alone)"]
fn reproduction_scripts_run_in_quick_mode() {
    // Measures on both cores: not beside the timed tests.
    let _cores = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("sfclab-experiments-{}", std::process::id()));
    let scripts: Vec<_> = std::fs::read_dir(repo().join("experiments"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sh") && p.file_name().unwrap() != "common.sh")
        .collect();
    assert!(scripts.len() >= 4);
    let two_cores = std::thread::available_parallelism().map_or(1, |n| n.get()) >= 2;
    for s in scripts {
        let name = s.file_name().unwrap().to_string_lossy().to_string();
        if name.starts_with("002") && !two_cores {
            eprintln!("skipped: {name} needs two cores");
            continue;
        }
        let o = Command::new("bash")
            .arg(&s)
            .env("QUICK", "1")
            .env("OUT", &dir)
            .env("SFCLAB", env!("CARGO_BIN_EXE_sfclab"))
            .output()
            .unwrap();
        assert!(o.status.success(), "{name}: {}{}", stdout(&o), stderr(&o));
    }
    assert!(dir.join("004-fig3/report.html").is_file());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn run_json_follows_its_published_schema() {
    let published = std::fs::read_to_string(repo().join("docs/schema/run-4.json")).unwrap();
    let o = sfclab(&["schema", "run"]);
    assert!(o.status.success());
    assert_eq!(
        stdout(&o),
        published,
        "docs/schema/run-4.json is stale: regenerate it with `sfclab schema run`"
    );
    let schema: Value = serde_json::from_str(&published).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("a valid JSON Schema");
    for extra in [
        vec!["--chain", "forwarder -> synthetic(drop_one_in=3)"],
        vec!["--chain", "forwarder*2", "--placement", "pbp:1"],
    ] {
        let v = run_json(&extra);
        let errors: Vec<String> = validator
            .iter_errors(&v)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{extra:?}: {errors:#?}");
    }
    // And the schema is strict enough to catch a wrong document.
    let mut broken = run_json(&["--chain", "noop"]);
    broken["conservation"]["holds"] = Value::String("yes".into());
    assert!(!validator.is_valid(&broken));
}

#[test]
fn report_from_a_fixed_result_file_matches_its_snapshot() {
    // A committed result set and what it must render to; after an intended change to the
    // report, regenerate with `sfclab report crates/cli/tests/fixtures/sweep.json --out DIR`
    // and copy report.html and throughput.svg over.
    let fixtures = repo().join("crates/cli/tests/fixtures");
    let dir = std::env::temp_dir().join(format!("sfclab-snapshot-{}", std::process::id()));
    let o = sfclab(&[
        "report",
        fixtures.join("sweep.json").to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    for file in ["report.html", "throughput.svg"] {
        let want = std::fs::read_to_string(fixtures.join(file)).unwrap();
        let got = std::fs::read_to_string(dir.join(file)).unwrap();
        assert!(got == want, "{file} differs from its snapshot");
    }
    assert!(stdout(&o).contains("over hops"));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Every document `sfclab schema` knows is published in docs/schema/ as it prints it, and
/// every published file is one it knows: a new document cannot ship without its schema.
#[test]
fn every_schema_is_published_and_current() {
    let o = sfclab(&["schema", "no-such-document"]);
    assert!(!o.status.success());
    let err = stderr(&o);
    let names: Vec<String> = err
        .split("[possible values: ")
        .nth(1)
        .and_then(|s| s.split(']').next())
        .expect("clap lists the documents it knows")
        .split(", ")
        .map(str::to_string)
        .collect();
    assert!(names.len() >= 18, "{names:?}");
    let mut published = Vec::new();
    for entry in std::fs::read_dir(repo().join("docs/schema")).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let id: Value = serde_json::from_str(&text).unwrap();
        assert!(
            id["$id"].as_str().unwrap_or("").ends_with(&file),
            "docs/schema/{file} does not carry its own name as $id"
        );
        published.push((file, text));
    }
    for name in &names {
        let o = sfclab(&["schema", name]);
        assert!(o.status.success(), "sfclab schema {name}");
        let text = stdout(&o);
        let id: Value = serde_json::from_str(&text).unwrap();
        let file = id["$id"].as_str().unwrap().rsplit('/').next().unwrap().to_string();
        let on_disk = published.iter().find(|(f, _)| *f == file);
        assert!(
            on_disk.is_some(),
            "docs/schema/{file} is missing: `sfclab schema {name} > docs/schema/{file}`"
        );
        assert_eq!(
            on_disk.unwrap().1,
            text,
            "docs/schema/{file} is stale: `sfclab schema {name} > docs/schema/{file}`"
        );
        jsonschema::validator_for(&id).expect("a valid JSON Schema");
    }
    assert_eq!(
        published.len(),
        names.len(),
        "a file in docs/schema/ no document prints"
    );
}

/// Every in-memory `sfclab run` example in the README and the guide forwards traffic: secure defaults
/// (a firewall's deny, a router without routes) are kept, and the examples set what
/// they need (the root ones run in `wired.rs`).
#[test]
fn documented_run_examples_forward_traffic() {
    let _cores = MEASURING.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let examples: Vec<Vec<String>> = common::documented_run_examples()
        .into_iter()
        .filter(|(sudo, _)| !sudo)
        .map(|(_, words)| words)
        .collect();
    assert!(examples.len() >= 12, "{examples:?}");
    for words in &examples {
        common::run_readme_example(dir.path(), words);
    }
}

#[test]
fn a_run_that_takes_turns_waits_for_the_turn_and_names_a_bad_file() {
    let dir = tempfile::tempdir().unwrap();
    let turns = dir.path().join("turns");
    let holder = std::fs::File::create(&turns).unwrap();
    holder.lock().unwrap();
    let turns_arg = turns.display().to_string();
    let mut run = std::process::Command::new(sfclab_bin())
        .args([
            "run",
            "--duration",
            "50ms",
            "--warmup",
            "0s",
            "--json",
            "--take-turns",
            &turns_arg,
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Unlocked, this run ends in well under a second.
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert!(run.try_wait().unwrap().is_none(), "the run did not wait for its turn");
    holder.unlock().unwrap();
    let o = run.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["received"].as_u64().unwrap() > 0);

    let o = sfclab(&["run", "--duration", "50ms", "--take-turns", "/nonexistent-dir/turns"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("--take-turns: /nonexistent-dir/turns: "),
        "{}",
        stderr(&o)
    );
}
