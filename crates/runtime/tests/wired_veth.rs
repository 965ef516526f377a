//! sfclab as the tester across a device under test in its own namespace, over veth and
//! AF_XDP: the Linux kernel forwarding, and an sfclab chain. At a low rate nothing may
//! be lost, and every count must agree exactly between the tester, the DUT and the
//! kernel's interface counters (needs root: CI is root; elsewhere each test says it is
//! skipped, and why).

use sfclab_nf::NfSpec;
use sfclab_runtime::{DeviceUnderTest, RunSettings, WiredSettings, run_across_veth};
use sfclab_traffic::{GeneratorConfig, Rate};
use std::time::Duration;

/// Each test busy-polls both cores (tester and device under test): run them one at a
/// time, or they starve each other and frames wait past the wire's patience.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn low_rate(count: u64) -> (GeneratorConfig, RunSettings) {
    let traffic = GeneratorConfig {
        rate: Rate::Pps(20_000.0),
        probe_pps: 1000.0,
        flows: 64,
        ..GeneratorConfig::default()
    };
    let run = RunSettings {
        duration: None,
        count: Some(count),
        warmup: Duration::from_millis(200),
        verify: true,
        ..RunSettings::default()
    };
    (traffic, run)
}

#[test]
#[ignore = "needs root for namespaces, BPF and AF_XDP (CI runs it)"]
fn the_tester_measures_a_linux_forwarding_namespace_without_loss_at_a_low_rate() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root("namespaces, BPF and AF_XDP");
    let (traffic, run) = low_rate(10_000);
    let r = run_across_veth(
        traffic,
        DeviceUnderTest::Linux { hops: 1 },
        &run,
        &WiredSettings::default(),
    )
    .unwrap();
    let t = &r.tester;
    assert!(t.conservation.holds, "{}", t.conservation);
    assert_eq!(t.window_loss.sent, 10_000);
    assert_eq!(t.window_loss.lost, 0, "{:?}", t.places[0]);
    assert_eq!(
        t.verify_failed,
        Some(0),
        "the kernel's forwarded frames (TTL, MACs rewritten) keep valid checksums"
    );
    let latency = t.latency.as_ref().expect("probes crossed the DUT");
    assert!(latency.samples > 0);
    assert!(r.dut.is_empty());
    assert_eq!(r.testbed.device_under_test, "Linux IPv4 forwarding");
    // The kernel saw every frame: the DUT's ingress received at least the window's.
    let d_in = r.testbed.interfaces.iter().find(|i| i.interface == "d-in").unwrap();
    assert!(d_in.rx_packets >= 10_000);
    assert_eq!(d_in.rx_dropped, 0);
    assert!(r.testbed.run_name.starts_with("sfclab-"));
    // The testbed is gone.
    let left = sfclab_topology::sfclab_namespaces().unwrap();
    assert!(
        left.iter().all(|n| !n.starts_with(&format!("{}-", r.testbed.run_name))),
        "{left:?}"
    );
}

#[test]
#[ignore = "needs root for namespaces, BPF and AF_XDP (CI runs it)"]
fn an_sfclab_chain_forwards_between_veth_namespaces_with_exact_conservation() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root("namespaces, BPF and AF_XDP");
    let (traffic, run) = low_rate(10_000);
    let nfs = vec![
        ("fw".to_string(), NfSpec::default_of("forwarder").unwrap().build()),
        ("noop".to_string(), NfSpec::default_of("noop").unwrap().build()),
    ];
    let r = run_across_veth(
        traffic,
        DeviceUnderTest::Chain(vec![nfs.into()]),
        &run,
        &WiredSettings::default(),
    )
    .unwrap();
    let (t, d) = (&r.tester, r.dut.first().expect("the DUT's own report"));
    assert!(
        t.conservation.holds && d.conservation.holds,
        "{} / {}",
        t.conservation,
        d.conservation
    );
    assert_eq!(t.window_loss.sent, 10_000);
    assert_eq!(t.window_loss.lost, 0, "{:?}", t.places[0]);
    assert_eq!(t.verify_failed, Some(0));
    // Exactly what the tester sent (warm-up and window) entered the DUT, crossed its
    // NFs, and left it; exactly that came back.
    let counter = |name: &str| t.places[0].counters.get(name).copied().unwrap_or(0);
    assert_eq!(d.generated, d.received);
    assert_eq!(d.dropped, 0);
    assert_eq!(
        d.places.iter().find(|p| p.name == "fw").unwrap().packets_in,
        d.generated
    );
    assert_eq!(d.source.kind, "af_xdp");
    assert_eq!(d.source.settings.get("xdp_mode").map(String::as_str), Some("native"));
    assert_eq!(d.source.settings.get("bind").map(String::as_str), Some("copy"));
    assert_eq!(counter("foreign"), 0);
    assert!(counter("returned") >= 10_000);
    assert_eq!(r.testbed.device_under_test, "sfclab chain (af_xdp)");
}

#[test]
#[ignore = "needs root for namespaces, BPF and AF_XDP (CI runs it)"]
fn an_sfclab_chain_forwards_over_af_packet_too() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root("namespaces, BPF and AF_XDP");
    let (traffic, run) = low_rate(5_000);
    let nfs = vec![("fw".to_string(), NfSpec::default_of("forwarder").unwrap().build())];
    let wired = WiredSettings {
        io: sfclab_io::IoKind::AfPacket,
        ..WiredSettings::default()
    };
    let r = run_across_veth(traffic, DeviceUnderTest::Chain(vec![nfs.into()]), &run, &wired).unwrap();
    let (t, d) = (&r.tester, r.dut.first().unwrap());
    assert!(
        t.conservation.holds && d.conservation.holds,
        "{} / {}",
        t.conservation,
        d.conservation
    );
    assert_eq!(t.window_loss.lost, 0, "{:?}", t.places[0]);
    assert_eq!(t.verify_failed, Some(0));
    assert_eq!(
        d.generated, t.conservation.generated,
        "the DUT took in exactly what the tester sent"
    );
    assert_eq!(
        (d.source.kind.as_str(), d.sink.kind.as_str()),
        ("af_packet", "af_packet")
    );
    assert_eq!(r.testbed.device_under_test, "sfclab chain (af_packet)");
}

/// `chaining: veth`: three hops, each an NF in a namespace of its own, joined by veth
/// pairs; every frame crosses every hop, and every count agrees with the kernel's.
#[test]
#[ignore = "needs root for namespaces, BPF and AF_XDP (CI runs it)"]
fn a_chain_of_hops_in_namespaces_passes_every_frame_through_every_hop() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root("namespaces, BPF and AF_XDP");
    for io in [sfclab_io::IoKind::AfXdp, sfclab_io::IoKind::AfPacket] {
        let (traffic, run) = low_rate(5_000);
        let hops = (0..3)
            .map(|i| {
                let nf = (format!("fw{i}"), NfSpec::default_of("forwarder").unwrap().build());
                (vec![nf].into(), None)
            })
            .collect();
        let wired = WiredSettings {
            io,
            ..WiredSettings::default()
        };
        let r = run_across_veth(
            traffic,
            DeviceUnderTest::Hops {
                hops,
                links: sfclab_runtime::HopLinks::Veth,
            },
            &run,
            &wired,
        )
        .unwrap();
        let t = &r.tester;
        assert!(t.conservation.holds, "{io}: {}", t.conservation);
        assert_eq!(t.window_loss.lost, 0, "{io}: {:?}", t.places[0]);
        assert_eq!(t.verify_failed, Some(0));
        assert_eq!(r.testbed.hops, 3);
        assert_eq!(r.testbed.interfaces.len(), 8, "t-out, d-in/d-out of each hop, t-in");
        assert_eq!(r.dut.len(), 3, "{io}: one run per hop");
        for (i, d) in r.dut.iter().enumerate() {
            assert!(d.conservation.holds, "{io} hop {i}: {}", d.conservation);
            assert_eq!(d.chain, vec![format!("fw{i}")], "hop {i}'s report is hop {i}'s");
            assert_eq!(
                d.generated, t.conservation.generated,
                "{io}: hop {i} took in every frame"
            );
            assert_eq!(d.received, d.generated, "{io}: hop {i} passed every frame on");
            assert_eq!(d.shares_thread_with, 2, "the three hops took turns on one thread");
            assert!(d.busy_cycles_per_packet.is_some_and(|c| c > 0.0));
        }
        // Each hop's namespace saw every frame on its way in and out.
        for pair in r.testbed.interfaces.windows(2).step_by(2) {
            assert_eq!(
                pair[0].tx_packets, pair[1].rx_packets,
                "{io}: {} -> {}",
                pair[0].namespace, pair[1].namespace
            );
        }
        assert_eq!(r.lost.unaccounted, 0);
    }
}

/// `chaining: linux`: the kernel forwards through three namespaces in a row.
#[test]
#[ignore = "needs root for namespaces, BPF and AF_XDP (CI runs it)"]
fn the_tester_measures_a_chain_of_linux_forwarding_namespaces() {
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    sfclab_topology::require_root("namespaces, BPF and AF_XDP");
    let (traffic, run) = low_rate(5_000);
    let r = run_across_veth(
        traffic,
        DeviceUnderTest::Linux { hops: 3 },
        &run,
        &WiredSettings::default(),
    )
    .unwrap();
    let t = &r.tester;
    assert!(t.conservation.holds, "{}", t.conservation);
    assert_eq!(t.window_loss.lost, 0, "{:?}", t.places[0]);
    assert_eq!(t.verify_failed, Some(0), "TTL and checksums right after three routers");
    assert_eq!(r.testbed.hops, 3);
    let d_ins: Vec<_> = r.testbed.interfaces.iter().filter(|i| i.interface == "d-in").collect();
    assert_eq!(d_ins.len(), 3);
    for d in d_ins {
        assert_eq!(
            d.rx_packets, t.conservation.generated,
            "{} forwarded every frame",
            d.namespace
        );
    }
    assert!(r.testbed.device_under_test.contains("3 namespaces"));
}
