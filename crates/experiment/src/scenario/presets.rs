//! The VNFs a scenario can name: seed 001's single-feature VNF (a router) and its
//! multi-feature VNF (NAT, firewall, QoS and DPI in one), and a plain forwarder.

use serde_json::{Value, json};

/// The presets' names, for `--vnf`.
pub const VNF_PRESETS: [&str; 3] = ["forwarder", "router", "multi-feature"];

/// The signatures of examples/signatures/web.rules, inline: a preset must not depend on
/// where it runs from.
pub const WEB_RULES: &str = include_str!("../../../../examples/signatures/web.rules");

/// A VNF's chain-file entries (one NF, or the NFs of a multi-feature VNF, run as one
/// hop) from a preset's name, one entry or a list of them; and its label.
pub(super) fn vnf_entries(vnf: &Value) -> Result<(Vec<Value>, String), String> {
    let entries = match vnf {
        Value::String(name) => preset(name).ok_or_else(|| {
            format!(
                "`{name}` is not a VNF preset ({}); give chain-file entries instead (`vnf: [nat44, firewall]`)",
                VNF_PRESETS.join(", ")
            )
        })?,
        Value::Object(_) => vec![vnf.clone()],
        Value::Array(list) if !list.is_empty() => list.clone(),
        _ => return Err("expected a preset's name, an NF entry or a list of them".into()),
    };
    let label = match vnf {
        Value::String(name) => name.clone(),
        _ => entries.iter().map(entry_kind).collect::<Vec<_>>().join("+"),
    };
    Ok((entries, label))
}

/// The NF kind a chain-file entry runs (`nat44`, `{firewall: {...}}` is `firewall`).
pub(super) fn entry_kind(entry: &Value) -> String {
    match entry {
        Value::String(s) => s.clone(),
        Value::Object(m) => m.keys().next().cloned().unwrap_or_default(),
        other => other.to_string(),
    }
}

/// The signatures of [`WEB_RULES`], one per line, comments and blank lines left out.
pub fn web_rules() -> Vec<&'static str> {
    WEB_RULES
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .collect()
}

fn preset(name: &str) -> Option<Vec<Value>> {
    let rules = web_rules();
    Some(match name {
        "forwarder" => vec![json!("forwarder")],
        // A router with a table of some size (1,000 prefixes and a default route):
        // seed 001's single-feature VNF routes.
        "router" => vec![json!({ "router": {
            "generate": { "ipv4": 1000, "seed": 1 },
            "routes": ["0.0.0.0/0 192.0.2.1 0"],
        }})],
        // Seed 001's multi-feature VNF: NAT, firewall, QoS and DPI in one process.
        "multi-feature" => vec![
            json!({ "nat44": { "public": ["203.0.113.0/26"], "max_sessions": 65536 } }),
            json!({ "firewall": {
                // Out through NAT's pool; back from the destinations' network (a
                // bidirectional scenario's reverse direction, which NAT passes).
                "rules": [
                    { "action": "allow", "proto": "udp", "src": "203.0.113.0/26" },
                    { "action": "allow", "proto": "udp", "src": "198.19.0.0/16" },
                ],
                "max_connections": 65536,
            }}),
            json!({ "qos": { "classes": [
                { "name": "voice", "match": { "dscp": ["ef"] },
                  "srtcm": { "cir": "20Gbit", "cbs": "256KiB", "ebs": "256KiB" }, "yellow": "remark af41" },
                { "name": "rest", "srtcm": { "cir": "60Gbit", "cbs": "512KiB", "ebs": "512KiB" },
                  "green": "remark af11" },
            ]}}),
            json!({ "dpi": { "rules": rules } }),
        ],
        _ => return None,
    })
}

/// A VNF's licence (seed 001's CSR 1000v: 2.5 Gbit/s): a qos limit `name`d after its
/// NFs, one class that takes every IP packet, its throughput limit at `cap` bits per
/// second (IP bytes, both directions together): what exceeds is red and dropped
/// (`licence policed-red`). A limit, not an srTCM: over-offered IMIX, an srTCM passes
/// the small frames first (a 40 Mbit/s one passed 52.6 kpps, mostly 64 B, where the
/// mix's 14.5 fit), and how many depends on the batches the VNF reads; a licence caps
/// throughput whatever the sizes. Its bucket is 10 ms of the cap, at least 256 KiB: a
/// VNF that shares a core reads its ring in bursts after each wake-up, and a licence
/// limits the rate, not the batching.
pub(super) fn licence(name: &str, cap: u64) -> Value {
    let burst = (cap / 8 / 100).max(256 * 1024);
    json!({ "qos": {
        "name": name,
        "classes": [{
            "name": "licence",
            "limit": { "rate": cap, "burst": format!("{burst}B") },
            "red": "drop",
        }],
    }})
}
