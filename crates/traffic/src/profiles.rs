//! Named traffic: bundles of generator settings a chain file or `--profile` names instead
//! of spelling each key. A profile's settings are defaults: any key set beside it (in the
//! file or as a flag) wins. Chain files add their own under `profiles:`.

/// A built-in traffic profile.
#[derive(Debug, Clone, Copy)]
pub struct Profile {
    pub name: &'static str,
    /// What it models, in a line.
    pub about: &'static str,
    /// Its settings as a JSON object of `traffic:` keys (the values a chain file takes).
    pub settings: &'static str,
}

/// The built-in profiles.
pub const PROFILES: [Profile; 5] = [
    Profile {
        name: "rfc2544",
        about: "RFC 2544's baseline: 64-byte UDP frames of one flow to one address",
        settings: r#"{"size": "64", "flows": 1, "proto": "udp", "destinations": "one"}"#,
    },
    Profile {
        name: "imix",
        about: "simple IMIX (64/594/1518 B at 7:4:1) over 1,024 UDP flows",
        settings: r#"{"size": "imix", "flows": 1024, "proto": "udp"}"#,
    },
    Profile {
        name: "internet",
        about: "what a core router sees: IMIX, 65,536 flows, each to its own random unicast address",
        settings: r#"{"size": "imix", "flows": 65536, "proto": "udp", "destinations": "spread"}"#,
    },
    Profile {
        name: "web",
        about: "TCP sessions both ways (SYN, 8 data segments, FIN; a responder answers): NAT and firewall return paths",
        settings: r#"{"size": "imix", "flows": 4096, "proto": "tcp", "session_packets": 10, "responder": true}"#,
    },
    Profile {
        name: "churn",
        about: "flow churn: 64-byte UDP, a new 5-tuple every 2 packets per flow (state-table creation at half the packet rate)",
        settings: r#"{"size": "64", "flows": 65536, "proto": "udp", "session_packets": 2}"#,
    },
];

/// The built-in profile called `name`.
pub fn builtin(name: &str) -> Option<&'static Profile> {
    PROFILES.iter().find(|p| p.name == name)
}
