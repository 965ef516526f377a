//! A responder at the chain's far end: every packet is answered and the reply runs back
//! through the same NFs. NAT44 translates the replies back to the inside, the stateful
//! firewall lets a TCP handshake complete and passes the connection's traffic both
//! ways, and every packet is conserved: a request comes back as its reply, or is counted
//! dropped at a place with its reason.

use sfclab_nf::NfSpec;
use sfclab_runtime::{PipelineSettings, RunReport, RunSettings, run_compound, run_pipeline};
use sfclab_traffic::{GeneratorConfig, L4};
use std::time::Duration;

fn settings() -> RunSettings {
    RunSettings {
        duration: Some(Duration::from_millis(150)),
        warmup: Duration::from_millis(30),
        reply: true,
        ..Default::default()
    }
}

fn chain(specs: &[(&str, serde_json::Value)]) -> sfclab_core::NamedNfs {
    specs
        .iter()
        .map(|(kind, cfg)| (kind.to_string(), NfSpec::new(kind, cfg.clone()).unwrap().build()))
        .collect()
}

fn place<'a>(r: &'a RunReport, name: &str) -> &'a sfclab_runtime::PlaceReport {
    r.places
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no place {name}"))
}

fn counter(r: &RunReport, at: &str, key: &str) -> u64 {
    place(r, at).counters.get(key).copied().unwrap_or(0)
}

/// Exact conservation over the whole run, and every request answered and back.
fn all_answered(r: &RunReport) {
    assert!(r.conservation.holds, "{:?}", r.conservation);
    assert_eq!(r.dropped, 0, "{:?}", r.drops);
    let responder = place(r, "responder");
    assert_eq!(responder.packets_in, responder.packets_out);
    assert_eq!(r.window_loss.lost, 0);
    assert!(r.received > 0);
}

#[test]
fn replies_come_back_through_every_nf_in_reverse_order() {
    let traffic = GeneratorConfig {
        flows: 64,
        ..Default::default()
    };
    let r = run_compound(
        traffic,
        chain(&[("forwarder", serde_json::json!({})), ("noop", serde_json::json!({}))]),
        &settings(),
    )
    .unwrap();
    all_answered(&r);
    let names: Vec<&str> = r.places.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "generator",
            "forwarder",
            "noop",
            "responder",
            "noop (reply)",
            "forwarder (reply)",
            "sink"
        ]
    );
    // Each request passes each NF twice: once out, once back as its reply.
    assert_eq!(
        place(&r, "forwarder").packets_in,
        place(&r, "forwarder (reply)").packets_in
    );
}

#[test]
fn nat44_translates_replies_back_to_the_inside() {
    let traffic = GeneratorConfig {
        flows: 1024,
        ..Default::default()
    };
    let r = run_compound(traffic, chain(&[("nat44", serde_json::json!({}))]), &settings()).unwrap();
    all_answered(&r);
    // Outbound counted at the NAT's forward place, inbound (translated back) too: the
    // NF's own counters cover both ways.
    assert_eq!(counter(&r, "nat44", "sessions"), 1024);
    assert!(counter(&r, "nat44", "in") > 0 && counter(&r, "nat44", "out") > 0);
    assert_eq!(
        place(&r, "nat44 (reply)").packets_out,
        place(&r, "nat44 (reply)").packets_in
    );
}

#[test]
fn tcp_sessions_pass_a_stateful_firewall_nat_and_router_both_ways() {
    let traffic = GeneratorConfig {
        flows: 4096,
        l4: L4::Tcp,
        session_packets: Some(8),
        destinations: sfclab_traffic::Destinations::Spread,
        ..Default::default()
    };
    let specs = [
        (
            "firewall",
            serde_json::json!({ "rules": [{ "action": "allow", "proto": "tcp", "src": "198.18.0.0/15" }], "max_connections": 1_000_000 }),
        ),
        (
            "nat44",
            serde_json::json!({ "public": ["203.0.113.0/24"], "max_sessions": 1_000_000 }),
        ),
        ("router", serde_json::json!({ "routes": ["0.0.0.0/0 192.0.2.1 0"] })),
    ];
    // A window of packets, not of time: sessions of 8 packets over 4096 flows open new
    // connections once every 32,768 packets, which a slow or stalled run's 150 ms
    // window did not always reach (a debug build on a fresh clone saw none).
    let window = RunSettings {
        duration: None,
        count: Some(100_000),
        ..settings()
    };
    let r = run_compound(traffic, chain(&specs), &window).unwrap();
    all_answered(&r);
    // Handshakes completed: every connection went through SYN, SYN-ACK, ACK.
    assert!(counter(&r, "firewall", "new") > 0);
    assert_eq!(place(&r, "firewall").drops.get("ct-invalid"), None);
}

#[test]
fn without_the_reply_a_firewall_refuses_tcp_data() {
    // The control for the test above: the handshake never completes one way only.
    let traffic = GeneratorConfig {
        flows: 256,
        l4: L4::Tcp,
        ..Default::default()
    };
    let specs = [(
        "firewall",
        serde_json::json!({ "rules": [{ "action": "allow", "proto": "tcp" }] }),
    )];
    let one_way = RunSettings {
        reply: false,
        ..settings()
    };
    let r = run_compound(traffic, chain(&specs), &one_way).unwrap();
    assert!(place(&r, "firewall").drops.get("ct-invalid").copied().unwrap_or(0) > 0);
}

#[test]
fn only_linear_compound_chains_answer() {
    let pipeline = PipelineSettings {
        run: settings(),
        ..Default::default()
    };
    let err = run_pipeline(
        GeneratorConfig::default(),
        chain(&[("forwarder", serde_json::json!({}))]),
        &pipeline,
    )
    .unwrap_err();
    assert!(err.to_string().contains("responder"), "{err}");
}
