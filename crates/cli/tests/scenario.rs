//! `sfclab scenario` end to end: many chains side by side, each conserving its packets
//! exactly (both directions at once, each counted on its own), the aggregate the sum of
//! the chains, standby instances idle, repetitions'
//! statistics as computed by hand, and everything torn down. The runs need root
//! (namespaces; CI runs them); bad scenarios are refused before anything runs.

use serde_json::Value;

mod common;
use common::{assert_follows_schema, namespaces_of, repo, sfclab, sfclab_bin, stderr, stdout};

/// The scenarios pin their processes to the machine's cores: one at a time.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn scenario(args: &[&str]) -> Value {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let mut all = vec!["scenario"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["--json", "--warmup", "200ms"]);
    let child = std::process::Command::new(sfclab_bin())
        .args(&all)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "sfclab {all:?}: {}", stderr(&out));
    let doc: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_follows_schema("scenario-4.json", &doc);
    // Nothing the scenario built is left.
    assert_eq!(namespaces_of(pid), Vec::<String>::new(), "left behind");
    doc
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// Every chain: the window's traffic exact, each direction's too and the chain's their
/// sum; every hop's frames in = out + dropped, in each direction too; the hops' drops
/// exactly what the tester did not get back; and what one hop sent on is what the next
/// took in, each way.
fn assert_chains_conserve(run: &Value) {
    for c in run["chains"].as_array().unwrap() {
        assert_eq!(c["conserved"], true, "{c}");
        assert_eq!(c["unaccounted"], 0, "{c}");
        let w = &c["window"];
        assert_eq!(u(&w["sent"]), u(&w["received"]) + u(&w["lost"]), "{c}");
        let dirs = c["directions"].as_array().unwrap();
        for key in ["sent", "received", "lost"] {
            let sum: u64 = dirs.iter().map(|d| u(&d["window"][key])).sum();
            assert_eq!(u(&w[key]), sum, "{key}: {c}");
        }
        for d in dirs {
            let w = &d["window"];
            assert_eq!(u(&w["sent"]), u(&w["received"]) + u(&w["lost"]), "{d}");
        }
        let hops = c["hops"].as_array().unwrap();
        for h in hops {
            assert_eq!(u(&h["rx"]), u(&h["tx"]) + u(&h["dropped"]), "{h}");
            let hd = h["directions"].as_array().unwrap();
            assert_eq!(hd.len(), dirs.len(), "{h}");
            for key in ["rx", "tx"] {
                let sum: u64 = hd.iter().map(|d| u(&d[key])).sum();
                assert_eq!(u(&h[key]), sum, "{key}: {h}");
            }
            for d in hd {
                assert_eq!(u(&d["rx"]), u(&d["tx"]) + u(&d["dropped"]), "{d}");
            }
        }
        // Forward: hop i's out is hop i+1's in; reverse: hop i+1's out is hop i's in.
        for pair in hops.windows(2) {
            let (a, b) = (&pair[0]["directions"], &pair[1]["directions"]);
            assert_eq!(a[0]["tx"], b[0]["rx"], "forward: {c}");
            if dirs.len() == 2 {
                assert_eq!(b[1]["tx"], a[1]["rx"], "reverse: {c}");
            }
        }
    }
}

#[test]
#[ignore = "needs root for namespaces (CI runs it)"]
fn pvp_chains_each_conserve_and_the_aggregate_is_their_sum() {
    let out = tempfile::tempdir().unwrap();
    let d = scenario(&[
        "--out",
        out.path().to_str().unwrap(),
        "--chains",
        "3",
        "--shape",
        "pvp",
        "--vnf",
        "router",
        "--rate",
        "60kpps",
        "--duration",
        "1s",
    ]);
    assert_eq!((d["chains"].as_u64(), d["vnfs_per_chain"].as_u64()), (Some(3), Some(1)));
    let cores = d["vnf_cores"].as_array().unwrap().len() as f64;
    assert_eq!(d["oversubscription"].as_f64().unwrap(), 3.0 / cores);
    let run = &d["runs"][0];
    assert_chains_conserve(run);
    let chains = run["chains"].as_array().unwrap();
    assert_eq!(chains.len(), 3);
    let a = &run["aggregate"];
    for key in ["sent", "received", "lost"] {
        let sum: u64 = chains.iter().map(|c| u(&c["window"][key])).sum();
        assert_eq!(u(&a["window"][key]), sum, "{key}");
    }
    assert_eq!(d["bidirectional"], true);
    for c in chains {
        // The aggregate rate split evenly: 10 kpps each way on each chain, for about a
        // second.
        assert!((c["requested_mpps"].as_f64().unwrap() - 0.02).abs() < 1e-9, "{c}");
        let sent = u(&c["window"]["sent"]);
        assert!((15_000..=25_000).contains(&sent), "{c}");
        assert_eq!(c["hops"].as_array().unwrap().len(), 1);
        assert_eq!(c["hops"][0]["nfs"][0], "router");
        let dirs = c["directions"].as_array().unwrap();
        assert_eq!(dirs.len(), 2);
        for (d, name) in dirs.iter().zip(["forward", "reverse"]) {
            assert_eq!(d["direction"], name);
            assert!((d["requested_mpps"].as_f64().unwrap() - 0.01).abs() < 1e-9, "{d}");
            assert!(u(&d["window"]["received"]) > 7_500, "{d}");
            assert!(d["latency"]["samples"].as_u64().unwrap() > 0, "{d}");
        }
        // The one router took both ways in: what each direction's tester sent over the
        // whole run reached it, and it routed both.
        let hop = &c["hops"][0]["directions"];
        assert!(u(&hop[0]["rx"]) > 0 && u(&hop[1]["rx"]) > 0, "{c}");
        // ... and said what a frame cost it, measured in its turns that moved frames.
        let busy = c["hops"][0]["busy_cycles_per_frame"].as_f64().unwrap();
        assert!(busy.is_finite() && busy > 0.0, "{c}");
    }
    let sum: f64 = chains.iter().map(|c| c["throughput_mpps"].as_f64().unwrap()).sum();
    assert!((a["throughput_mpps"].as_f64().unwrap() - sum).abs() < 1e-9);
    assert_eq!(a["conserved"], true);
    // The OS's account of each VNF: it ran, for some share of the run.
    let procs = run["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 3);
    for p in procs {
        assert_eq!(p["standby"], false);
        assert!(
            p["cpu_s"].as_f64().unwrap() > 0.0 && p["timeslices"].as_u64().unwrap() > 0,
            "{p}"
        );
    }
    assert_eq!(d["summary"]["aggregate_mpps"]["n"], 1);
    // --out kept the document and its report.
    let kept: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("scenario.json")).unwrap()).unwrap();
    assert_eq!(kept["runs"][0]["aggregate"]["window"], a["window"]);
    let html = std::fs::read_to_string(out.path().join("report.html")).unwrap();
    assert_eq!(
        html.matches("<td>forward</td>").count(),
        3,
        "a row per chain and direction"
    );
}

#[test]
#[ignore = "needs root for namespaces (CI runs it)"]
fn pvvp_chains_cross_two_vnfs_and_standby_instances_stay_idle() {
    let d = scenario(&[
        "--chains",
        "2",
        "--shape",
        "pvvp",
        "--vnf",
        "forwarder",
        "--standby",
        "1",
        "--rate",
        "20kpps",
        "--duration",
        "500ms",
        "--vnf-cores",
        "1",
    ]);
    assert_eq!(d["vnfs_per_chain"], 2);
    assert_eq!(d["standby"], 1);
    // Six VNF processes (two chains and a standby instance, two VNFs each) on one core.
    assert_eq!(d["oversubscription"].as_f64().unwrap(), 6.0);
    let run = &d["runs"][0];
    assert_chains_conserve(run);
    for c in run["chains"].as_array().unwrap() {
        let hops = c["hops"].as_array().unwrap();
        assert_eq!(hops.len(), 2);
        // Both VNFs carried both ways (what one passed on the other took in: checked
        // above), and nothing was lost.
        for h in hops {
            assert!(
                h["directions"].as_array().unwrap().iter().all(|d| u(&d["tx"]) > 0),
                "{h}"
            );
        }
        assert_eq!(u(&c["window"]["lost"]), 0, "{c}");
    }
    let procs = run["processes"].as_array().unwrap();
    assert_eq!(procs.len(), 6);
    let standby: Vec<&Value> = procs.iter().filter(|p| p["standby"] == true).collect();
    assert_eq!(standby.len(), 2);
    assert!(standby.iter().all(|p| p["chain"] == 3), "{standby:?}");
}

#[test]
#[ignore = "needs root for namespaces (CI runs it)"]
fn a_vnf_that_drops_is_named_in_its_chains_drops_and_nothing_goes_missing() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("dropping.yaml");
    // A router with no route for the traffic: it drops every frame (no-route).
    std::fs::write(
        &file,
        "name: dropping\nchains: 2\nvnf: { router: { routes: [\"10.0.0.0/8 192.0.2.1 0\"] } }\ntraffic: { rate: 20kpps }\nrun: { duration: 500ms }\n",
    )
    .unwrap();
    let d = scenario(&[file.to_str().unwrap()]);
    assert_eq!(d["name"], "dropping");
    let run = &d["runs"][0];
    assert_chains_conserve(run);
    for c in run["chains"].as_array().unwrap() {
        let w = &c["window"];
        assert!(u(&w["sent"]) > 0);
        assert_eq!(w["lost"], w["sent"], "{c}");
        let hop = &c["hops"][0];
        assert_eq!(hop["tx"], 0);
        assert_eq!(c["drops"]["hop 1 router no-route"], hop["dropped"], "{c}");
    }
    assert_eq!(run["aggregate"]["loss_ratio"].as_f64(), Some(1.0));
    // With every frame lost, the tester waits its quiet time (300 ms) for them after the
    // warm-up and after the window: the VNFs' CPU time is the window's alone, not those
    // waits' (a polling VNF spins through them). Loaded machines stretch a window, by
    // far less than the two waits.
    for p in run["processes"].as_array().unwrap() {
        let window_s = p["cpu_s"].as_f64().unwrap() / p["cpu_share"].as_f64().unwrap();
        assert!((0.5..1.1).contains(&window_s), "{window_s} s: {p}");
    }
}

#[test]
#[ignore = "needs root for namespaces (CI runs it)"]
fn repetitions_are_summarized_as_computed_by_hand() {
    let d = scenario(&[
        "--chains",
        "2",
        "--vnf",
        "forwarder",
        "--rate",
        "20kpps",
        "--duration",
        "300ms",
        "--repeat",
        "3",
    ]);
    let runs = d["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    runs.iter().for_each(assert_chains_conserve);
    let v: Vec<f64> = runs
        .iter()
        .map(|r| r["aggregate"]["throughput_mpps"].as_f64().unwrap())
        .collect();
    let mean = v.iter().sum::<f64>() / 3.0;
    let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 2.0).sqrt();
    // t(0.975, 2 degrees of freedom) = 4.302653 (tables).
    let half = 4.302653 * sd / 3f64.sqrt();
    let s = &d["summary"]["aggregate_mpps"];
    assert_eq!(s["n"], 3);
    let close = |a: &Value, b: f64| (a.as_f64().unwrap() - b).abs() <= 1e-6 * b.abs().max(1e-9);
    assert!(close(&s["mean"], mean), "{s} vs {mean}");
    assert!(close(&s["std_dev"], sd), "{s} vs {sd}");
    assert!(close(&s["ci95_half_width"], half), "{s} vs {half}");
    let mut sorted = v.clone();
    sorted.sort_by(f64::total_cmp);
    assert!(close(&s["median"], sorted[1]) && close(&s["min"], sorted[0]) && close(&s["max"], sorted[2]));
    assert_eq!(
        d["summary"]["ci95_within_5_percent"].as_bool().unwrap(),
        half / mean <= 0.05
    );
    assert_eq!(d["summary"]["chain_mpps"].as_array().unwrap().len(), 2);
}

#[test]
#[ignore = "needs root for namespaces (CI runs it)"]
fn forty_chains_run_on_this_machine_and_each_conserves() {
    let d = scenario(&[
        "--chains",
        "40",
        "--vnf",
        "forwarder",
        "--rate",
        "200kpps",
        "--duration",
        "1s",
    ]);
    let run = &d["runs"][0];
    assert_eq!(run["chains"].as_array().unwrap().len(), 40);
    assert_eq!(run["processes"].as_array().unwrap().len(), 40);
    assert_chains_conserve(run);
    assert!(
        run["chains"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| u(&c["window"]["sent"]) > 0)
    );
}

#[test]
#[ignore = "needs root for namespaces (CI runs it)"]
fn one_way_traffic_goes_forward_only_and_gets_the_whole_rate() {
    let d = scenario(&[
        "--chains",
        "2",
        "--shape",
        "pvvp",
        "--vnf",
        "router",
        "--rate",
        "40kpps",
        "--duration",
        "500ms",
        "--one-way",
    ]);
    assert_eq!(d["bidirectional"], false);
    let run = &d["runs"][0];
    assert_chains_conserve(run);
    for c in run["chains"].as_array().unwrap() {
        let dirs = c["directions"].as_array().unwrap();
        assert_eq!(dirs.len(), 1);
        assert_eq!(dirs[0]["direction"], "forward");
        assert!((dirs[0]["requested_mpps"].as_f64().unwrap() - 0.02).abs() < 1e-9, "{c}");
        for h in c["hops"].as_array().unwrap() {
            assert_eq!(h["directions"][0]["rx"], h["rx"], "{h}");
        }
    }
}

/// The forward directions' received rate, bits per second at layer 1.
fn forward_l1(run: &Value) -> f64 {
    run["chains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["directions"][0]["gbps_l1"].as_f64().unwrap() * 1e9)
        .sum()
}

#[test]
#[ignore = "needs root for namespaces (CI runs it)"]
fn a_licence_caps_each_vnf_and_the_line_caps_them_all() {
    // 1,000-byte frames: 986 bytes of IP (what the licence counts), 1,024 at layer 1.
    let l1_per_ip = 1024.0 / 986.0;
    let common = [
        "--chains",
        "3",
        "--vnf",
        "forwarder",
        "--size",
        "1000",
        "--rate",
        "600kpps",
        "--duration",
        "1s",
    ];
    // A licence of 40 Mbit/s per VNF under a line of 300 Mbit/s: the licences bind.
    let mut args = common.to_vec();
    args.extend(["--vnf-rate-cap", "40Mbit", "--line-rate", "300Mbit/s"]);
    let d = scenario(&args);
    assert_eq!(d["vnf_rate_cap"], "40Mbit");
    assert_eq!(d["line_rate_gbps"].as_f64(), Some(0.3));
    let run = &d["runs"][0];
    assert_chains_conserve(run);
    for c in run["chains"].as_array().unwrap() {
        assert_eq!(c["hops"][0]["nfs"].as_array().unwrap().last().unwrap(), "licence");
        assert!(u(&c["drops"]["hop 1 licence policed-red"]) > 0, "{c}");
        // Both directions together through the one licence; its 256 KiB burst (2.1
        // Mbit) may add up to 5% to a one-second window.
        let l1 = c["gbps_l1"].as_f64().unwrap() * 1e9;
        assert!(l1 <= (40e6 + 2.1e6) * l1_per_ip * 1.02, "{l1} b/s: {c}");
        assert!(l1 >= 40e6 * l1_per_ip * 0.8, "{l1} b/s: {c}");
    }
    // A line of 300 Mbit/s under licences of 1 Gbit/s: the line binds, every chain's
    // forward direction shares it, and what it could not carry was not offered.
    let mut args = common.to_vec();
    args.extend(["--vnf-rate-cap", "1Gbit", "--line-rate", "300Mbit/s"]);
    let d = scenario(&args);
    let run = &d["runs"][0];
    assert_chains_conserve(run);
    let forward = forward_l1(run);
    assert!((300e6 * 0.8..=300e6 * 1.02).contains(&forward), "{forward} b/s");
    assert!(u(&run["aggregate"]["not_offered"]) > 0);
    for c in run["chains"].as_array().unwrap() {
        assert!(c["drops"].get("hop 1 licence policed-red").is_none(), "{c}");
        let share = c["directions"][0]["gbps_l1"].as_f64().unwrap() * 1e9;
        assert!(
            share >= forward / 3.0 * 0.8,
            "a fair share of the line: {share} of {forward}"
        );
    }
}

#[test]
#[ignore = "measures: the NDR a search finds on this machine (needs root for namespaces; CI runs it alone)"]
fn a_search_finds_the_rate_the_licences_allow_and_measures_every_chain_there() {
    // Two chains, each VNF licensed for 200 Mbit/s of IP (both directions): 1,000-byte
    // frames carry 986 bytes of IP, so the chains together pass 2 x 200e6 / 7,888 =
    // 50,710 frames/s without loss, and lose above.
    let d = scenario(&[
        "--chains",
        "2",
        "--vnf",
        "forwarder",
        "--size",
        "1000",
        "--vnf-rate-cap",
        "200Mbit",
        "--search",
        "--goals",
        "ndr",
        "--resolution",
        "2%",
        "--duration",
        "300ms",
    ]);
    let expect = 2.0 * 200e6 / (986.0 * 8.0);
    let run = &d["runs"][0];
    let search = &run["search"];
    let ndr = search["result"]["goals"][0]["lower_pps"].as_f64().unwrap();
    assert!(
        (expect * 0.9..=expect * 1.1).contains(&ndr),
        "NDR {ndr} pps, expected ~{expect}"
    );
    assert_eq!(search["measured_at_pps"].as_f64(), Some(ndr));
    assert!(search["result"]["trial_count"].as_u64().unwrap() >= 3);
    // The chains were measured at the NDR, split evenly, and lost nothing.
    assert_chains_conserve(run);
    for c in run["chains"].as_array().unwrap() {
        for dir in c["directions"].as_array().unwrap() {
            let asked = dir["requested_mpps"].as_f64().unwrap() * 1e6;
            assert!((asked - ndr / 4.0).abs() < 1.0, "{dir}");
        }
    }
    assert_eq!(d["summary"]["goals"][0]["goal"], "NDR");
    assert!((d["summary"]["goals"][0]["aggregate_mpps"]["mean"].as_f64().unwrap() - ndr / 1e6).abs() < 1e-9);
}

#[test]
fn a_bad_scenario_names_its_file_key_and_reason_and_runs_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        ("chains: 2\nlinks: 3\n", "unknown field `links`"),
        ("chains: 0\n", "at least one chain"),
        ("vnf: bridge\n", "not a VNF preset"),
        ("traffic: { rate: fast }\n", "traffic.rate"),
        (
            "vnf: forwarder\nrun: { chaining: ovs }\n",
            "by memif or veth so far, not `ovs`",
        ),
        (
            "run: { chaining: veth }\nbidirectional: true\n",
            "joined by veth carry one direction",
        ),
        ("run: { chaining: veth }\nhosts: { count: 2 }\n", "leave `chaining` out"),
        ("chain: x.yaml\nshape: pvp\n", "leave `shape`, `vnf` and `split` out"),
        (
            "vnf: multi-feature\nsplit: true\nshape: pvvp\n",
            "`split`: gives each NF of `vnf` a VNF of its own",
        ),
        ("vnf_cores: 0-\n", "not a core list"),
        ("bidirectional: sometimes\n", "bidirectional"),
        ("line_rate: 2Mpps\n", "`line_rate`: `2Mpps` is not a line rate"),
        ("vnf_rate_cap: fast\n", "`vnf_rate_cap`: `fast` is not a rate"),
        ("chain: x.yaml\nvnf_rate_cap: 1Gbit\n", "write the cap into it"),
        ("repeat: 0\n", "at least one repetition"),
        ("hosts: { count: 251 }\n", "`hosts.count`: 251 hosts: 1 to 250"),
        (
            "hosts: { count: 3, vnfs: [2] }\n",
            "`hosts.vnfs`: host 3 holds no place of a chain",
        ),
        (
            "hosts: { count: 2, vnfs: [1, 2] }\n",
            "`hosts.vnfs`: 2 host(s) for 1 VNF(s)",
        ),
        ("hosts: { count: 2, vnfs: [3] }\n", "host 3: hosts are 1 to 2"),
        ("hosts: { count: 2, vnfs: [1], sink: 1 }\n", "nothing crosses the cable"),
        (
            "hosts: { count: 2, link: 10Mpps }\n",
            "`hosts.link`: `10Mpps` is not a line rate",
        ),
        ("hosts: { count: 2 }\nbidirectional: true\n", "one direction so far"),
        ("hosts: { sink: 2 }\n", "applies to several hosts"),
        ("groups: [{ chains: 0 }]\n", "`groups[0].chains`: at least one chain"),
        ("nic_capacity: 2Mpps\n", "`nic_capacity`: `2Mpps` is not a line rate"),
        (
            "nic_capacity: 1Gbit/s\nhosts: { count: 2 }\n",
            "emulated on one host so far",
        ),
        (
            "groups: [{ vnf: router }]\nchains: 2\n",
            "`chains`: with `groups`, each group gives its own",
        ),
    ];
    for (i, (text, says)) in cases.iter().enumerate() {
        let file = dir.path().join(format!("bad{i}.yaml"));
        std::fs::write(&file, text).unwrap();
        let out = sfclab(&["scenario", file.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(2), "{text}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(file.to_str().unwrap()), "{text}: {err}");
        assert!(err.contains(says), "{text}: {err}");
    }
    for (args, says) in [
        (&["--search", "--goals", "200%"][..], "--goals"),
        (&["--search", "--resolution", "fine"][..], "--resolution"),
        (&["--search", "--method", "fast"][..], "--method"),
        (
            &["--search", "--min-rate", "1Mpps", "--max-rate", "10kpps"][..],
            "--max-rate",
        ),
    ] {
        let mut all = vec!["scenario"];
        all.extend_from_slice(args);
        let out = sfclab(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    for (args, says) in [
        (&["--hosts", "2", "--vnf-hosts", "1,2"][..], "--vnf-hosts"),
        (&["--hosts", "2", "--sink-host", "0"][..], "--sink-host"),
        (&["--hosts", "2", "--host-link", "fast"][..], "--host-link"),
        (&["--sink-host", "2"][..], "applies to several hosts"),
    ] {
        let mut all = vec!["scenario"];
        all.extend_from_slice(args);
        let out = sfclab(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    let out = sfclab(&["scenario", "--vnf-cores", "999"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("core 999"), "{}", stderr(&out));
    let out = sfclab(&["scenario", repo().join("no-such.yaml").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot read"), "{}", stderr(&out));
}

#[test]
#[ignore = "needs root for namespaces (CI runs it)"]
fn a_search_per_chain_finds_each_chains_licence_beside_the_others_load() {
    // Each VNF licensed for 200 Mbit/s of IP, both directions: one chain passes
    // 200e6 / 7,888 = 25,355 frames/s of 1,000 bytes, whatever the other carries (10
    // kpps in all here, its share).
    let d = scenario(&[
        "--chains",
        "2",
        "--vnf",
        "forwarder",
        "--size",
        "1000",
        "--vnf-rate-cap",
        "200Mbit",
        "--rate",
        "10kpps",
        "--search-per-chain",
        "--goals",
        "ndr",
        "--resolution",
        "2%",
        "--max-rate",
        "60kpps",
        "--duration",
        "300ms",
    ]);
    let expect = 200e6 / (986.0 * 8.0);
    let run = &d["runs"][0];
    assert!(run["search"].is_null(), "no aggregate search");
    let found = run["chain_searches"].as_array().unwrap();
    assert_eq!(found.len(), 2);
    for (c, s) in found.iter().enumerate() {
        let ndr = s["result"]["goals"][0]["lower_pps"].as_f64().unwrap();
        assert!(
            (expect * 0.9..=expect * 1.1).contains(&ndr),
            "chain {c}: NDR {ndr} pps, expected ~{expect}"
        );
        // Then measured all at once, each at its own rate, split over its directions.
        let chain = &run["chains"][c];
        assert!(
            (chain["requested_mpps"].as_f64().unwrap() * 1e6 - ndr).abs() < 2.0,
            "{chain}"
        );
        let summary = d["summary"]["chain_goals"][c][0]["aggregate_mpps"]["mean"]
            .as_f64()
            .unwrap();
        assert!((summary - ndr / 1e6).abs() < 1e-9);
    }
    assert_chains_conserve(run);
}

#[test]
#[ignore = "needs root for namespaces (CI runs it)"]
fn chains_joined_by_veth_conserve_and_count_every_link() {
    // Every link a veth pair (AF_XDP, sleeping when idle), one direction; PVVP's three
    // links per chain, at a load every chain carries.
    let d = scenario(&[
        "--chains",
        "3",
        "--shape",
        "pvvp",
        "--vnf",
        "router",
        "--chaining",
        "veth",
        "--rate",
        "60kpps",
        "--duration",
        "500ms",
    ]);
    assert_eq!(d["bidirectional"], false);
    assert!(d["chaining"].as_str().unwrap().starts_with("veth"), "{}", d["chaining"]);
    let run = &d["runs"][0];
    assert_chains_conserve(run);
    assert_eq!(run["aggregate"]["window"]["lost"], 0, "{}", run["aggregate"]);
    for c in run["chains"].as_array().unwrap() {
        let links = c["kernel_links"].as_array().unwrap();
        let names: Vec<&str> = links.iter().map(|l| l["link"].as_str().unwrap()).collect();
        assert_eq!(names, ["tester -> hop 1", "hop 1 -> hop 2", "hop 2 -> tester"], "{c}");
        // Each pair delivered what its sender sent: the tester's, then each hop's.
        for l in links {
            assert_eq!(l["kind"], "veth");
            assert_eq!(l["tx"], l["rx"], "{l}");
        }
        assert_eq!(links[1]["tx"], c["hops"][0]["tx"], "{c}");
        assert_eq!(links[2]["tx"], c["hops"][1]["tx"], "{c}");
    }
}

/// What crossed one direction of the cable (`host 1 -> host 2` first).
fn cable_sent(run: &Value, direction: usize) -> u64 {
    u(&run["cable"]["directions"][direction]["sent"])
}

#[test]
#[ignore = "needs root for namespaces (CI runs it)"]
fn chains_across_two_hosts_cross_by_tunnels_and_conserve() {
    // PVVP with a router on each host (seed 003's chain): hop 1 on host 1, hop 2 and the
    // tester's receiver on host 2, well below the cable's rate.
    let d = scenario(&[
        "--hosts",
        "2",
        "--chains",
        "2",
        "--shape",
        "pvvp",
        "--vnf",
        "router",
        "--size",
        "256",
        "--rate",
        "40kpps",
        "--duration",
        "500ms",
    ]);
    assert_eq!(d["bidirectional"], false, "two hosts carry one direction");
    assert_eq!(d["hosts"]["vnf_hosts"], serde_json::json!([1, 2]));
    assert_eq!(d["hosts"]["sink_host"], 2);
    assert_eq!(d["hosts"]["crossings_per_chain"], 1);
    let run = &d["runs"][0];
    assert_chains_conserve(run);
    assert_eq!(run["aggregate"]["window"]["lost"], 0, "{}", run["aggregate"]);
    let mut crossed = 0;
    for c in run["chains"].as_array().unwrap() {
        let t = &c["kernel_links"].as_array().unwrap()[..];
        assert_eq!(t.len(), 1, "{c}");
        assert_eq!(t[0]["link"], "hop 1 -> hop 2");
        // Everything hop 1 sent on went through its chain's own tunnel to hop 2.
        assert_eq!(t[0]["tx"], c["hops"][0]["tx"], "{c}");
        assert_eq!(t[0]["rx"], c["hops"][1]["rx"], "{c}");
        assert_eq!(t[0]["tx_dropped"], 0, "{c}");
        assert_eq!(t[0]["rx_dropped"], 0, "{c}");
        crossed += u(&t[0]["tx"]);
    }
    // The chains' tunnels are all the cable carried, one way only.
    assert_eq!(cable_sent(run, 0), crossed);
    assert_eq!(cable_sent(run, 1), 0);
}

#[test]
#[ignore = "needs root for namespaces (CI runs it)"]
fn a_chain_of_three_hosts_crosses_the_top_of_rack_switch_and_conserves() {
    // The tester on host 1, a router on host 2, one on host 3, back to host 1: every
    // link a tunnel through the switch, each chain's own.
    let d = scenario(&[
        "--hosts",
        "3",
        "--chains",
        "2",
        "--shape",
        "pvvp",
        "--vnf",
        "router",
        "--sink-host",
        "1",
        "--size",
        "256",
        "--rate",
        "30kpps",
        "--duration",
        "500ms",
    ]);
    assert_eq!(d["hosts"]["count"], 3);
    assert_eq!(
        d["hosts"]["vnf_hosts"],
        serde_json::json!([2, 3]),
        "spread over hosts 2 and 3"
    );
    assert_eq!(d["hosts"]["crossings_per_chain"], 3);
    assert!(d["hosts"]["underlay"].as_str().unwrap().contains("top-of-rack"));
    let run = &d["runs"][0];
    assert_chains_conserve(run);
    assert_eq!(run["aggregate"]["window"]["lost"], 0, "{}", run["aggregate"]);
    let (mut up, mut down) = ([0u64; 3], [0u64; 3]);
    for c in run["chains"].as_array().unwrap() {
        let t = c["kernel_links"].as_array().unwrap();
        let names: Vec<&str> = t.iter().map(|l| l["link"].as_str().unwrap()).collect();
        assert_eq!(names, ["tester -> hop 1", "hop 1 -> hop 2", "hop 2 -> tester"], "{c}");
        for (k, l) in t.iter().enumerate() {
            assert_eq!(l["tx"], l["rx"], "every tunnel delivered what it sent: {l}");
            // Link k leaves host k+1 (1, 2, 3) and enters the next (2, 3, 1).
            up[k] += u(&l["tx"]);
            down[(k + 1) % 3] += u(&l["rx"]);
        }
    }
    // Each host's cable to the switch carried its tunnels, the switch's to each host
    // what the tunnels into it received: nothing else crossed.
    let directions = run["cable"]["directions"].as_array().unwrap();
    let sent = |name: &str| {
        u(&directions
            .iter()
            .find(|d| d["direction"] == name)
            .unwrap_or_else(|| panic!("{name}"))["sent"])
    };
    for h in 0..3 {
        assert_eq!(sent(&format!("host {} -> top of rack", h + 1)), up[h], "host {}", h + 1);
        assert_eq!(
            sent(&format!("top of rack -> host {}", h + 1)),
            down[h],
            "host {}",
            h + 1
        );
    }
}

#[test]
#[ignore = "needs root for namespaces (CI runs it)"]
fn the_cable_between_hosts_carries_its_line_rate_and_no_more() {
    // The VNF on host 2, the tester's sender and receiver on host 1: two crossings per
    // chain. A 20 Mbit/s cable carries 29,762 frames of 64 bytes (84 at layer 1) a
    // second; 100 kpps are asked of it.
    let line_pps = 20e6 / (84.0 * 8.0);
    let d = scenario(&[
        "--hosts",
        "2",
        "--chains",
        "2",
        "--vnf",
        "forwarder",
        "--vnf-hosts",
        "2",
        "--sink-host",
        "1",
        "--host-link",
        "20Mbit/s",
        "--size",
        "64",
        "--rate",
        "100kpps",
        "--duration",
        "1s",
    ]);
    assert_eq!(d["hosts"]["crossings_per_chain"], 2);
    let run = &d["runs"][0];
    for c in run["chains"].as_array().unwrap() {
        assert_eq!(c["conserved"], true, "{c}");
        let links: Vec<&Value> = c["kernel_links"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| &t["link"])
            .collect();
        assert_eq!(links, ["tester -> hop 1", "hop 1 -> tester"]);
    }
    let got = run["aggregate"]["throughput_mpps"].as_f64().unwrap() * 1e6;
    assert!(
        got > 0.9 * line_pps && got < 1.03 * line_pps,
        "{got:.0} pps through a cable of {line_pps:.0}: {}",
        run["aggregate"]
    );
    // What the first crossing passed is all the second one could carry back; what the
    // shaper dropped (when its queue, not the sender's socket, filled first) each
    // chain's tunnel counted, and it explains the chain's loss.
    assert!(cable_sent(run, 1) <= cable_sent(run, 0), "{}", run["cable"]);
    assert_eq!(run["cable"]["shaper_drops_seen_at_tunnels"], true, "{}", run["cable"]);
    let refused: u64 = run["chains"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["drops"]["tunnel tester -> hop 1 (cable full)"].as_u64().unwrap_or(0))
        .sum();
    let shaped = u(&run["cable"]["directions"][0]["shaper_dropped"]);
    assert_eq!(refused, shaped, "{}", run["cable"]);
}

/// Unlike chains in one scenario: each group's chains run their own template and
/// traffic (shape, VNF, directions, frame size, rate), numbered group after group, each
/// conserving; each group's aggregate is the sum of its chains, the whole the sum of
/// the groups.
#[test]
#[ignore = "needs root for namespaces (CI runs it)"]
fn groups_of_unlike_chains_each_run_their_own_template_and_traffic() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("groups.yaml");
    std::fs::write(
        &file,
        "groups:\n\
         - { name: light, chains: 2, vnf: forwarder }\n\
         - { name: heavy, chains: 1, shape: pvvp, vnf: router, bidirectional: false, traffic: { rate: 30kpps, size: 512 } }\n\
         traffic: { rate: 40kpps, size: 128 }\n",
    )
    .unwrap();
    let d = scenario(&[file.to_str().unwrap(), "--duration", "500ms"]);
    assert_eq!(d["chains"], 3);
    assert!(d["shape"].is_null() && d["frame_sizes"].is_null(), "{d}");
    let groups = d["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(
        (groups[1]["shape"].as_str(), groups[1]["vnfs_per_chain"].as_u64()),
        (Some("PVVP"), Some(2))
    );
    let run = &d["runs"][0];
    assert_chains_conserve(run);
    let chains = run["chains"].as_array().unwrap();
    let expect = [
        ("light", 1, 2, 128.0, 0.02),
        ("light", 1, 2, 128.0, 0.02),
        ("heavy", 2, 1, 512.0, 0.03),
    ];
    for (c, (group, hops, directions, size, mpps)) in chains.iter().zip(expect) {
        assert_eq!(c["group"], group, "{c}");
        assert_eq!(c["hops"].as_array().unwrap().len(), hops, "{c}");
        assert_eq!(c["directions"].as_array().unwrap().len(), directions, "{c}");
        let asked = c["requested_mpps"].as_f64().unwrap();
        assert!((asked - mpps).abs() < 1e-9, "{asked} for {mpps}: {c}");
        // Its frames' size: layer-1 bits per received frame, less preamble and gap.
        let got = c["gbps_l1"].as_f64().unwrap() * 1e3 / c["throughput_mpps"].as_f64().unwrap() / 8.0 - 20.0;
        assert!((got - size).abs() < 0.5, "{got} bytes for {size}: {c}");
    }
    let sum = |cs: &[Value], key: &str| cs.iter().map(|c| u(&c["window"][key])).sum::<u64>();
    let by_group = run["groups"].as_array().unwrap();
    for (g, cs) in by_group.iter().zip([&chains[..2], &chains[2..]]) {
        for key in ["sent", "received", "lost"] {
            assert_eq!(u(&g["window"][key]), sum(cs, key), "{key}: {g}");
        }
    }
    for key in ["sent", "received", "lost"] {
        let groups: u64 = by_group.iter().map(|g| u(&g["window"][key])).sum();
        assert_eq!(u(&run["aggregate"]["window"][key]), groups, "{key}");
    }
    // A VNF process per hop: 2 light chains of 1, the heavy chain's 2.
    assert_eq!(run["processes"].as_array().unwrap().len(), 4);
    assert_eq!(d["summary"]["group_mpps"].as_array().unwrap().len(), 2);
}

/// The emulated NIC's capacity is shared by every VNF's sends: PVP chains together get
/// its rate and no more, PVVP chains (each frame sent twice, by each VNF) at most half;
/// what it refused is each sending hop's drop, and every chain conserves.
#[test]
#[ignore = "needs root for namespaces (CI runs it)"]
fn the_nic_capacity_is_shared_by_every_vnfs_sends_and_pvvp_pays_it_twice() {
    // 100 Mbit/s of 64-byte frames (84 bytes on the wire): 148,810 frames/s, well under
    // what a debug build's tester offers on a loaded 2-core machine (about 280,000).
    let capacity = 100e6 / (84.0 * 8.0) / 1e6;
    let mut got = Vec::new();
    for shape in ["pvp", "pvvp"] {
        let d = scenario(&[
            "--chains",
            "2",
            "--shape",
            shape,
            "--vnf",
            "forwarder",
            "--nic-capacity",
            "100Mbit/s",
            "--size",
            "64",
            "--rate",
            "500kpps",
            "--duration",
            "500ms",
        ]);
        assert_eq!(d["nic_capacity_gbps"], 0.1);
        let run = &d["runs"][0];
        assert_chains_conserve(run);
        let refused: u64 = run["chains"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|c| c["drops"].as_object().unwrap().iter())
            .filter(|(place, _)| place.ends_with("shared-capacity"))
            .map(|(_, n)| u(n))
            .sum();
        assert!(refused > 0, "{shape}: the NIC refused nothing at 500 kpps");
        got.push(run["aggregate"]["throughput_mpps"].as_f64().unwrap());
    }
    // Its rate, plus the 10 ms buffer it starts with over the half-second window.
    assert!(
        got[0] <= capacity * 1.03 && got[0] >= capacity * 0.85,
        "PVP {got:?} of {capacity}"
    );
    assert!(got[1] <= capacity * 0.53, "PVVP {got:?} of {capacity}");
}

/// Every example scenario resolves (its chains, VNF and settings checked) without root:
/// `--repeat 0` is refused only after the file itself was read whole.
#[test]
fn every_example_scenario_resolves() {
    let dir = repo().join("examples/scenarios");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let out = sfclab(&["scenario", path.to_str().unwrap(), "--repeat", "0"]);
        assert_eq!(out.status.code(), Some(2), "{}", path.display());
        assert!(
            stderr(&out).contains("at least one repetition"),
            "{}: {}",
            path.display(),
            stderr(&out)
        );
        seen += 1;
    }
    assert!(seen >= 3);
}

/// Every example scenario runs, briefly, and every chain in it conserves its packets.
#[test]
#[ignore = "needs root for namespaces (CI runs it)"]
fn every_example_scenario_runs_and_conserves() {
    for entry in std::fs::read_dir(repo().join("examples/scenarios")).unwrap() {
        let path = entry.unwrap().path();
        let d = scenario(&[path.to_str().unwrap(), "--duration", "300ms", "--repeat", "1"]);
        let run = &d["runs"][0];
        assert_chains_conserve(run);
        assert!(u(&run["aggregate"]["window"]["received"]) > 0, "{}", path.display());
    }
}

/// `sfclab report` over scenario documents (committed ones: no root needed): the
/// summary table, the figures against the number of chains, each scenario's chains.
#[test]
fn a_report_over_scenarios_draws_throughput_and_delay_against_chains() {
    let dir = tempfile::tempdir().unwrap();
    let fixtures = repo().join("crates/cli/tests/fixtures/scenarios");
    let out = sfclab(&[
        "report",
        fixtures.to_str().unwrap(),
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = stdout(&out);
    assert!(
        table.contains("PVP router, 4 VNF processes") && table.contains("PVVP router"),
        "{table}"
    );
    for f in ["report.html", "throughput.svg", "latency.svg"] {
        assert!(dir.path().join(f).is_file(), "{f}");
    }
    let svg = std::fs::read_to_string(dir.path().join("throughput.svg")).unwrap();
    // Two series: PVP (two points, a line) and PVVP (one point).
    assert!(svg.contains("PVP router, 4 VNF processes") && svg.contains("PVVP router, 4 VNF processes"));
    assert_eq!(svg.matches("<circle").count(), 3, "a marker per scenario");
    let html = std::fs::read_to_string(dir.path().join("report.html")).unwrap();
    assert_eq!(html.matches("<details>").count(), 3, "each scenario's chains");
    assert!(html.contains("<td>reverse</td>") && html.contains("line 0.2 Gbit/s per direction"));

    // Scenarios that differ by frame size (seed 003) are drawn against it, beside the
    // line rate each size allows, one line per placement.
    let frames = repo().join("crates/cli/tests/fixtures/scenario-frame-sizes");
    let by_size = dir.path().join("frames");
    let out = sfclab(&["report", frames.to_str().unwrap(), "--out", by_size.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let svg = std::fs::read_to_string(by_size.join("throughput.svg")).unwrap();
    assert!(
        svg.contains("frame size (bytes)") && svg.contains("line rate (1 Gbit/s)"),
        "{svg}"
    );
    assert!(svg.contains("two hosts (VNFs on 2, sink on 2)") && svg.contains("two hosts (VNFs on 1,2, sink on 2)"));
    // Two sizes for each of two series and for the line.
    assert_eq!(
        svg.matches("<circle").count(),
        6,
        "a marker per scenario and line point"
    );
    let html = std::fs::read_to_string(by_size.join("report.html")).unwrap();
    assert!(html.contains("two hosts joined by a 1 Gbit/s cable"), "{html}");

    // Anything else is refused, naming the file.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"schema": "sfclab.run/4"}"#).unwrap();
    let first = fixtures.join("pvp-router-4-c1.json");
    let out = sfclab(&["report", first.to_str().unwrap(), bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("bad.json") && stderr(&out).contains("not a scenario document"));
}
