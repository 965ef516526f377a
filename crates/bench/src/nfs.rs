//! `sfclab bench nfs`: what each NF costs on one core, alone and chained.
//!
//! Every workload runs in the compound runtime on one core (generator, chain and sink in
//! one loop), at 64 B and IMIX, twice per repetition: with per-NF cycle accounting off
//! (the core's packet rate and busy cycles per packet: what a deployment gets) and on
//! (each NF's own cycles per packet: where they go). The papers' single-feature chain
//! (one forwarder rewriting MACs) runs beside the stateful NFs and their chain
//! `firewall -> nat44 -> router`, so each figure has the plain-forwarding baseline of the
//! same run. NAT44 also runs at 1k, 100k and 1M active sessions, with the session
//! table's memory per session.
//!
//! Part 2's NFs run the same way: qos (three classes by DSCP, srTCM and trTCM), a shaper
//! whose rate never binds (its queueing alone), dpi (30 signatures, scanned payload
//! bytes per second beside the matcher alone on the same payloads: the limit) and seed
//! 001's multi-feature chain `nat44 -> firewall -> qos -> dpi`, and IPsec:
//! `esp-encrypt -> esp-decrypt` over datagrams of 64, 512 and 1420 bytes. The peers are
//! measured in the same run: DPDK's rte_meter checks against the qos NF's meters alone,
//! DPDK's AES-GCM crypto PMD (`dpdk-test-crypto-perf`) against the ESP NFs and their
//! cipher alone (Intel's ipsec-mb where the build has it, as the PMD; and ring) on
//! buffers of the same sizes, and DPDK's whole ESP (librte_ipsec's tunnel framing around
//! that PMD) against esp-encrypt: the same work on both sides.
//!
//! Each workload is a chain file (its NFs, named) run through the library
//! (`Experiment::load`, `Experiment::run`), its traffic and the flags' window as the
//! command line's settings over it. Repetitions are interleaved (every workload once per
//! round).

use crate::{Progress, Stop};
use serde::Serialize;
use serde_json::json;
use sfclab_experiment::{ChainSource, Experiment, Settings};
use sfclab_nf::NfSpec;
use sfclab_nf::tables::acl::{Match, classbench};
use sfclab_runtime::{Role, RunReport};
use sfclab_traffic::{Destinations, DscpMix, FrameSizes, GeneratorConfig, L4};
use std::time::Duration;

use crate::median;
use std::fmt::Write as _;

pub const NFS_SCHEMA: &str = "sfclab.bench.nfs/7";

#[derive(Debug, Clone)]
pub struct NfsArgs {
    pub duration: Duration,
    pub warmup: Duration,
    pub repeat: usize,
    pub core: Option<usize>,
    pub batch: usize,
    /// Flows of the workloads (NAT sessions, firewall connections).
    pub flows: u32,
    /// ACL rules of the firewall workloads.
    pub rules: usize,
    /// NAT44 sessions of the scaling points.
    pub nat_sessions: Vec<u32>,
    /// Only these workloads (by name); empty: all.
    pub only: Vec<String>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct NfsBench {
    #[serde(flatten)]
    pub header: crate::BenchHeader,
    pub core: Option<usize>,
    pub batch: usize,
    pub duration_s: f64,
    pub points: Vec<NfsPoint>,
    /// The qos NF's meters alone beside DPDK's rte_meter, same parameters and clock
    /// steps (empty when `--only` leaves out qos).
    pub meters: Vec<MeterRow>,
    /// The dpi NF's signatures: the matcher alone on the workload's payloads.
    pub matcher: Vec<MatcherRow>,
    /// The ESP NFs beside their cipher alone and DPDK's crypto PMD, by bytes encrypted
    /// (empty when `--only` leaves out ipsec).
    pub crypto: Vec<CryptoRow>,
}

/// ESP at one datagram size: the NFs in the ipsec workload, AES-GCM alone as they call
/// it, and DPDK's AES-GCM PMD on buffers of the same size; TSC cycles per packet or
/// operation.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct CryptoRow {
    /// Bytes of the inner datagram (sfclab's NFs, which encrypt it with 2 to 5 bytes of
    /// trailer) and of the PMD's buffer.
    pub bytes: usize,
    /// The ipsec workload's frame size for it (with FCS, as `--size`).
    pub frames: String,
    /// esp-encrypt and esp-decrypt, each its own cycles per packet (accounting on).
    pub esp_encrypt_cycles: Option<f64>,
    pub esp_decrypt_cycles: Option<f64>,
    /// The NFs' AES-GCM implementation (`ipsec-mb (avx512)`, `ring`): the build's
    /// preferred, which the ESP NFs use unless told otherwise.
    pub aead: String,
    /// That implementation's AES-128-GCM seal alone on a buffer of `bytes`.
    pub aead_cycles: f64,
    pub aead_cycles_runs: Vec<f64>,
    /// ring's seal alone, the same way, when the NFs use another implementation.
    pub ring_cycles: Option<f64>,
    pub ring_cycles_runs: Vec<f64>,
    /// DPDK's PMD encrypting a buffer of `bytes` (8-byte AAD, 16-byte tag).
    pub pmd_cycles: Option<f64>,
    pub pmd_cycles_runs: Vec<f64>,
    pub pmd: Option<String>,
    /// esp-encrypt over the PMD (the goal at 1420 B: at most 1.2), the cipher
    /// alone over the PMD (the crate's share of that), esp-encrypt over its cipher alone
    /// (what ESP's framing adds).
    pub encrypt_vs_pmd: Option<f64>,
    pub aead_vs_pmd: Option<f64>,
    pub encrypt_vs_aead: Option<f64>,
    /// Why the PMD has no figure.
    pub peer_error: Option<String>,
    /// DPDK's whole ESP on a datagram of `bytes`: librte_ipsec's outbound tunnel framing
    /// around the PMD, as dpdk-ipsec-secgw runs it less its I/O and SPD lookup; TSC
    /// cycles per packet (the same work as esp-encrypt's; the PMD's figure above is the
    /// cipher alone).
    pub dpdk_esp_cycles: Option<f64>,
    pub dpdk_esp_cycles_runs: Vec<f64>,
    /// esp-encrypt over DPDK's ESP: above 1 the NF costs more.
    pub encrypt_vs_dpdk_esp: Option<f64>,
    /// Why DPDK's ESP has no figure.
    pub dpdk_esp_error: Option<String>,
}

/// One meter check: sfclab's meter and rte_meter's, each alone, TSC cycles per packet.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MeterRow {
    /// `srtcm-blind`, `srtcm-aware`, `trtcm-blind`, `trtcm-aware`.
    pub check: String,
    /// Packets each side metered per run.
    pub packets: u64,
    pub sfclab_cycles: f64,
    pub sfclab_cycles_runs: Vec<f64>,
    /// Packets sfclab's meter coloured green, yellow, red (last run).
    pub sfclab_colours: [u64; 3],
    pub rte_meter_cycles: Option<f64>,
    pub rte_meter_cycles_runs: Vec<f64>,
    pub rte_meter_colours: Option<[u64; 3]>,
    /// sfclab's cycles over rte_meter's.
    pub ratio: Option<f64>,
    /// Why rte_meter has no figure (not installed, no compiler).
    pub peer_error: Option<String>,
}

/// A DPI search engine alone on the payloads the dpi workload carries, against the NF
/// searching with it.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MatcherRow {
    /// `vectorscan` or `aho-corasick`.
    pub engine: String,
    /// The workload whose dpi NF searches with it (`dpi`, `dpi-aho-corasick`).
    pub workload: String,
    /// `64` or `imix`.
    pub frames: String,
    /// Mean payload bytes scanned per packet.
    pub payload_bytes: f64,
    /// The engine alone: GB/s one core scans (vectorscan: one block-mode scan per
    /// payload, as `hsbench` measures it; aho-corasick: lowering, the leftmost and the
    /// overlapping search, as the NF runs it).
    pub matcher_gbps: f64,
    pub matcher_gbps_runs: Vec<f64>,
    /// The dpi NF in its workload: payload bytes it scanned per second of its own
    /// cycles (parsing, flows and rules included).
    pub nf_gbps: Option<f64>,
    /// `nf_gbps` over `matcher_gbps`: how close the NF comes to its matcher.
    pub share: Option<f64>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct NfsPoint {
    /// The workload's name and what it runs.
    pub workload: String,
    pub description: String,
    /// `64` or `imix`.
    pub frames: String,
    pub flows: u32,
    /// Accounting off: packets per second the core delivered, in millions, and the TSC
    /// cycles it was busy per packet (generator, chain and sink together).
    pub core_mpps: f64,
    pub core_mpps_runs: Vec<f64>,
    pub core_cycles: f64,
    pub core_cycles_runs: Vec<f64>,
    /// Accounting on: each NF's own TSC cycles per packet that entered it (median).
    pub nfs: Vec<NfCost>,
    /// Sum of the NFs' cycles per packet, and the packet rate one core would reach
    /// spending only that (TSC Hz / cycles): the chain's cost without generator and sink.
    pub chain_cycles: f64,
    pub chain_mpps: f64,
    /// `chain_cycles` over the forwarder's in the same run, same frames (None without it).
    pub vs_forwarder: Option<f64>,
    /// Packets the chain dropped in the last window (any reason), and the reasons.
    pub dropped: u64,
    pub drop_reasons: Vec<(String, u64)>,
    /// A single stateful NF: entries in use and its table's memory per entry of capacity.
    pub table_entries: Option<u64>,
    pub table_bytes_per_entry: Option<f64>,
    /// A dpi NF in the chain: payload bytes it scanned per second of its own cycles.
    pub dpi_gbps: Option<f64>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct NfCost {
    pub name: String,
    pub kind: String,
    pub cycles: f64,
    pub cycles_runs: Vec<f64>,
}

/// One chain and the traffic it gets: by default UDP flows that last, to one
/// destination, best effort, at 64 B and IMIX.
struct Workload {
    name: String,
    description: String,
    chain: Vec<(String, NfSpec)>,
    flows: u32,
    destinations: Destinations,
    sizes: Vec<(&'static str, FrameSizes)>,
    /// The flows' DSCPs (empty: best effort).
    dscp: DscpMix,
    /// TCP sessions of this many packets, each a new 5-tuple (flow churn); None: UDP
    /// flows that last.
    churn: Option<u32>,
    /// A responder answers every packet through the chain (NAT and conntrack entries
    /// become assured).
    responder: bool,
}

impl Workload {
    /// The workload at frames of `size` as the library runs a chain file: its NFs, each
    /// named, in a chain file; its traffic and the flags' window, batch and core as the
    /// command line's settings over it (no latency probes: every frame is the chain's
    /// load).
    fn experiment(&self, size: &FrameSizes, args: &NfsArgs) -> Result<Experiment, String> {
        let chain: Vec<serde_json::Value> = self
            .chain
            .iter()
            .map(|(name, spec)| {
                let mut settings = spec.settings().as_object().cloned().unwrap_or_default();
                settings.insert("name".into(), name.clone().into());
                json!({ spec.kind(): settings })
            })
            .collect();
        let file = json!({ "name": self.name, "description": self.description, "chain": chain });
        let mut settings = Settings::default()
            .size(size.clone())
            .flows(self.flows)
            .destinations(self.destinations.clone())
            .dscp(self.dscp.clone())
            .responder(self.responder)
            .latency_probe_pps(0.0)
            .batch(args.batch)
            .duration(args.duration)
            .warmup(args.warmup);
        if let Some(packets) = self.churn {
            settings = settings.proto(L4::Tcp).session_packets(packets);
        }
        if let Some(core) = args.core {
            settings = settings.core(core);
        }
        let source = ChainSource::Text {
            text: file.to_string(),
            origin: format!("the {} workload", self.name),
        };
        Experiment::load(&source, &settings).map_err(|e| e.to_string())
    }
}

impl Default for Workload {
    fn default() -> Workload {
        Workload {
            name: String::new(),
            description: String::new(),
            chain: Vec::new(),
            flows: 0,
            destinations: Destinations::One,
            sizes: vec![("64", FrameSizes::Fixed { size: 64 }), ("imix", FrameSizes::imix())],
            dscp: DscpMix::default(),
            churn: None,
            responder: false,
        }
    }
}

/// The ipsec workload's frames: label, size with FCS, and the datagram's bytes.
const ESP_SIZES: [(&str, u16, usize); 3] = [("82", 82, 64), ("530", 530, 512), ("1438", 1438, 1420)];

/// One SA both ESP NFs hold (examples/chains/ipsec.yaml's).
fn esp_sa() -> serde_json::Value {
    json!({ "sas": [{ "spi": 4096, "key": "0x4c80cdefbb5d10da906ac73c3613a6342e443b68",
                      "tunnel": { "src": "192.0.2.1", "dst": "192.0.2.2" } }] })
}

/// Seed 001's multi-feature VNF: nat44 -> firewall -> qos -> dpi, sized for `flows`.
pub(crate) fn multi_feature(flows: u32) -> Result<Vec<(String, NfSpec)>, String> {
    Ok(vec![
        ("nat44".into(), nat44(flows)?),
        (
            "firewall".into(),
            spec(
                "firewall",
                json!({ "rules": [{ "action": "allow", "proto": "udp", "src": "203.0.113.0/26" }],
                        "max_connections": (flows as usize + flows as usize / 4).max(1024) }),
            )?,
        ),
        ("qos".into(), qos()?),
        ("dpi".into(), dpi()?),
    ])
}

/// classifier -> SFF -> `function` -> SFF at the path's end, one path (SPI 100).
fn nsh_path(function: NfSpec) -> Result<Vec<(String, NfSpec)>, String> {
    Ok(vec![
        (
            "nsh-classifier".into(),
            spec(
                "nsh-classifier",
                json!({ "paths": [{ "spi": 100, "context": [1, 2, 3, 4] }] }),
            )?,
        ),
        (
            "sff".into(),
            spec("nsh-sff", json!({ "forward": [{ "spi": 100, "si": 255 }] }))?,
        ),
        ("nsh-proxy".into(), function),
        (
            "sff-end".into(),
            spec(
                "nsh-sff",
                json!({ "forward": [{ "spi": 100, "si": 254, "decap": true }] }),
            )?,
        ),
    ])
}

fn spec(kind: &str, settings: serde_json::Value) -> Result<NfSpec, String> {
    NfSpec::new(kind, settings).map_err(|e| format!("{kind}: {e}"))
}

/// A ClassBench-style rule as the firewall's config writes it.
fn rule_json(r: &Match) -> serde_json::Value {
    let prefix = |(a, l): (u32, u8)| format!("{}/{l}", std::net::Ipv4Addr::from(a));
    let ports = |(lo, hi): (u16, u16)| format!("{lo}-{hi}");
    let proto = match r.proto {
        None => "any".to_string(),
        Some(6) => "tcp".into(),
        Some(17) => "udp".into(),
        Some(1) => "icmp".into(),
        Some(p) => p.to_string(),
    };
    json!({ "action": "allow", "proto": proto, "src": prefix(r.src), "dst": prefix(r.dst),
            "sport": ports(r.sport), "dport": ports(r.dport) })
}

fn firewall(rules: usize, flows: u32, stateful: bool) -> Result<NfSpec, String> {
    // An allow list: ClassBench-style rules, then one for the generator's traffic, so
    // every packet is classified against all of them and passes.
    let mut list: Vec<serde_json::Value> = classbench::generate_rules(rules.saturating_sub(1), 1)
        .iter()
        .map(rule_json)
        .collect();
    list.push(json!({ "action": "allow", "proto": "udp", "src": "198.18.0.0/15" }));
    spec(
        "firewall",
        json!({ "rules": list, "stateful": stateful, "max_connections": (flows as usize + flows as usize / 4).max(1024) }),
    )
}

fn nat44(sessions: u32) -> Result<NfSpec, String> {
    // A /26 pool: 64 addresses x 64,512 ports, room for 1M sessions and more.
    spec(
        "nat44",
        json!({ "public": ["203.0.113.0/26"], "max_sessions": (sessions as usize + sessions as usize / 4).max(1024) }),
    )
}

fn qos() -> Result<NfSpec, String> {
    spec(
        "qos",
        json!({ "classes": [
            { "name": "voice", "match": { "dscp": ["ef"] }, "srtcm": { "cir": "20Gbit", "cbs": "256KiB", "ebs": "256KiB" }, "yellow": "remark af41" },
            { "name": "video", "match": { "dscp": ["af41"] }, "trtcm": { "cir": "30Gbit", "cbs": "256KiB", "pir": "60Gbit", "pbs": "512KiB" }, "yellow": "remark af42" },
            { "name": "rest", "srtcm": { "cir": "60Gbit", "cbs": "512KiB", "ebs": "512KiB" }, "green": "remark af11" }
        ]}),
    )
}

pub use sfclab_experiment::scenario::WEB_RULES;

fn dpi() -> Result<NfSpec, String> {
    dpi_with(None)
}

/// The dpi NF with the web rules, searching with `engine` (none: its default).
fn dpi_with(engine: Option<&str>) -> Result<NfSpec, String> {
    let rules = sfclab_experiment::scenario::web_rules();
    match engine {
        None => spec("dpi", json!({ "rules": rules })),
        Some(e) => spec("dpi", json!({ "rules": rules, "engine": e })),
    }
}

/// The dpi workloads and their engines: `dpi` with the NF's default (vectorscan where
/// built in), and where that is vectorscan, `dpi-aho-corasick` beside it.
fn dpi_workloads() -> Vec<(&'static str, &'static str)> {
    let engines = sfclab_nf::dpi::engines();
    let mut out = vec![("dpi", engines[0])];
    if engines.len() > 1 {
        out.push(("dpi-aho-corasick", "aho-corasick"));
    }
    out
}

fn router() -> Result<NfSpec, String> {
    spec(
        "router",
        json!({ "generate": { "ipv4": 100_000, "seed": 1 }, "routes": ["0.0.0.0/0 192.0.2.1 0"] }),
    )
}

/// The workloads' names, for `--only`.
pub fn workload_names(nat_sessions: &[u32]) -> Vec<String> {
    let one_nf = [
        "forwarder",
        "router",
        "nat44",
        "firewall-acl",
        "firewall",
        "qos",
        "shaper",
    ];
    // `dpi-aho-corasick` only beside vectorscan (a build without it has one engine).
    let dpi = dpi_workloads().into_iter().map(|(name, _)| name);
    let fixed = [
        "fw-nat-router",
        "multi-feature",
        "ipsec",
        "nsh",
        "nsh-firewall",
        "nat44-churn",
        "firewall-churn",
        "nat44-answered",
        "nat44-full",
        "firewall-answered",
        "firewall-full",
    ];
    let mut names: Vec<String> = one_nf.into_iter().chain(dpi).chain(fixed).map(str::to_string).collect();
    names.extend(nat_sessions.iter().map(|n| format!("nat44@{n}")));
    names
}

/// Checks `--only` against the workloads' names.
pub fn check_only(args: &NfsArgs) -> Result<(), String> {
    let names = workload_names(&args.nat_sessions);
    match args.only.iter().find(|o| !names.contains(o)) {
        Some(bad) => Err(format!("no workload `{bad}`: there are {}", names.join(", "))),
        None => Ok(()),
    }
}

fn workloads(args: &NfsArgs) -> Result<Vec<Workload>, String> {
    check_only(args)?;
    let mut w = one_nf_workloads(args)?;
    w.extend(chain_workloads(args)?);
    w.extend(table_workloads()?);
    for &n in &args.nat_sessions {
        w.push(Workload {
            name: format!("nat44@{n}"),
            description: format!("NAPT at {n} active sessions (one flow each, round robin)"),
            chain: vec![("nat44".into(), nat44(n)?)],
            flows: n,
            sizes: vec![("64", FrameSizes::Fixed { size: 64 })],
            ..Workload::default()
        });
    }
    debug_assert_eq!(
        w.iter().map(|x| x.name.clone()).collect::<Vec<_>>(),
        workload_names(&args.nat_sessions)
    );
    if !args.only.is_empty() {
        w.retain(|x| args.only.contains(&x.name));
    }
    Ok(w)
}

/// One NF each (the forwarding, classifying, metering and inspecting NFs), at the
/// flows of `--flows`.
fn one_nf_workloads(args: &NfsArgs) -> Result<Vec<Workload>, String> {
    let f = args.flows;
    let mut all = vec![
        Workload {
            name: "forwarder".into(),
            description: "MAC rewrite: the papers' single-feature forwarding chain".into(),
            chain: vec![(
                "forwarder".into(),
                NfSpec::default_of("forwarder").map_err(|e| e.to_string())?,
            )],
            flows: f,
            ..Workload::default()
        },
        Workload {
            name: "router".into(),
            description: "IPv4 LPM over 100,000 BGP-shaped routes + default, TTL, MACs".into(),
            chain: vec![("router".into(), router()?)],
            flows: f,
            destinations: Destinations::Spread,
            ..Workload::default()
        },
        Workload {
            name: "nat44".into(),
            description: format!("NAPT, {f} sessions"),
            chain: vec![("nat44".into(), nat44(f)?)],
            flows: f,
            ..Workload::default()
        },
        Workload {
            name: "firewall-acl".into(),
            description: format!(
                "{} ACL rules (ClassBench-style allow list), stateless: every packet classified",
                args.rules
            ),
            chain: vec![("firewall".into(), firewall(args.rules, f, false)?)],
            flows: f,
            ..Workload::default()
        },
        Workload {
            name: "firewall".into(),
            description: format!("{} ACL rules + connection tracking, {f} connections", args.rules),
            chain: vec![("firewall".into(), firewall(args.rules, f, true)?)],
            flows: f,
            ..Workload::default()
        },
        Workload {
            name: "qos".into(),
            description: "3 classes by DSCP (EF, AF41, rest): srTCM, trTCM, srTCM at rates the core does not reach; remark per colour".into(),
            chain: vec![("qos".into(), qos()?)],
            flows: f,
            dscp: "ef,af41,be".parse().map_err(|e: String| e)?,
            ..Workload::default()
        },
        Workload {
            name: "shaper".into(),
            description: "every packet held and sent by a DRR shaper whose rate (1 Tbit/s) never binds".into(),
            chain: vec![("shaper".into(), spec("shaper", json!({ "rate": "1Tbit" }))?)],
            flows: f,
            ..Workload::default()
        },
    ];
    for (name, engine) in dpi_workloads() {
        all.push(Workload {
            name: name.into(),
            description: format!(
                "30 Snort-style signatures (examples/signatures/web.rules) over UDP payloads, searched with {engine}"
            ),
            chain: vec![("dpi".into(), dpi_with(Some(engine))?)],
            flows: f,
            ..Workload::default()
        });
    }
    Ok(all)
}

/// Chains of several NFs on one core: the papers' multi-feature VNFs, an ESP tunnel's
/// two ends, NSH paths.
fn chain_workloads(args: &NfsArgs) -> Result<Vec<Workload>, String> {
    let f = args.flows;
    Ok(vec![
        Workload {
            name: "fw-nat-router".into(),
            description: "firewall (conntrack) -> nat44 -> router, one core".into(),
            chain: vec![
                ("firewall".into(), firewall(args.rules, f, true)?),
                ("nat44".into(), nat44(f)?),
                ("router".into(), router()?),
            ],
            flows: f,
            destinations: Destinations::Spread,
            ..Workload::default()
        },
        Workload {
            name: "multi-feature".into(),
            description: "seed 001's multi-feature VNF: nat44 -> firewall -> qos -> dpi, one core".into(),
            chain: multi_feature(f)?,
            flows: f,
            dscp: "ef,af41,be".parse().map_err(|e: String| e)?,
            ..Workload::default()
        },
        Workload {
            name: "ipsec".into(),
            description: "esp-encrypt -> esp-decrypt, one SA: ESP tunnel mode, AES-128-GCM; datagrams of 64, 512, 1420 B and IMIX".into(),
            chain: vec![
                ("esp-encrypt".into(), spec("esp-encrypt", esp_sa())?),
                ("esp-decrypt".into(), spec("esp-decrypt", esp_sa())?),
            ],
            flows: f,
            sizes: ESP_SIZES
                .iter()
                .map(|&(label, size, _)| (label, FrameSizes::Fixed { size }))
                .chain([("imix", FrameSizes::imix())])
                .collect(),
            ..Workload::default()
        },
        Workload {
            name: "nsh".into(),
            description: "an NSH path through one NSH-aware function: nsh-classifier (MD type 1) -> nsh-sff -> nsh-proxy (noop: lowers SI) -> nsh-sff (takes the header off)".into(),
            chain: nsh_path(spec("nsh-proxy", json!({}))?)?,
            flows: f,
            ..Workload::default()
        },
        Workload {
            name: "nsh-firewall".into(),
            description: format!(
                "the firewall workload's firewall ({} rules, conntrack) behind nsh-proxy on an NSH path: the proxy's price is its row less the firewall workload's",
                args.rules
            ),
            chain: nsh_path(spec(
                "nsh-proxy",
                json!({ "nf": { "firewall": firewall(args.rules, f, true)?.settings().clone() } }),
            )?)?,
            flows: f,
            ..Workload::default()
        },
    ])
}

/// A NAT's or firewall's table under pressure: churn through it, or answered flows
/// that fill it with assured entries.
fn table_workloads() -> Result<Vec<Workload>, String> {
    Ok(vec![
        Workload {
            name: "nat44-churn".into(),
            description: "a new TCP mapping every 2 packets, 1M flows through the default table (1M, pool 1,032,192 pairs): each new flow takes an unassured one's place".into(),
            chain: vec![("nat44".into(), spec("nat44", json!({}))?)],
            flows: 1_000_000,
            sizes: vec![("64", FrameSizes::Fixed { size: 64 })],
            churn: Some(2),
            ..Workload::default()
        },
        Workload {
            name: "firewall-churn".into(),
            description: "a new TCP connection every 2 packets, 1M flows through the default table (1M): each takes an unassured one's place".into(),
            chain: vec![("firewall".into(), spec("firewall", json!({ "default": "allow" }))?)],
            flows: 1_000_000,
            sizes: vec![("64", FrameSizes::Fixed { size: 64 })],
            churn: Some(2),
            ..Workload::default()
        },
        Workload {
            name: "nat44-answered".into(),
            description: "65,536 answered flows, a table of 65,536: every mapping assured, every packet forwarded (nat44-full's baseline)".into(),
            chain: vec![("nat44".into(), spec("nat44", json!({ "max_sessions": 65536 }))?)],
            flows: 65_536,
            sizes: vec![("64", FrameSizes::Fixed { size: 64 })],
            responder: true,
            ..Workload::default()
        },
        Workload {
            name: "nat44-full".into(),
            description: "131,072 answered flows, a table of 65,536: half the packets find it full of assured mappings and are dropped".into(),
            chain: vec![("nat44".into(), spec("nat44", json!({ "max_sessions": 65536 }))?)],
            flows: 131_072,
            sizes: vec![("64", FrameSizes::Fixed { size: 64 })],
            responder: true,
            ..Workload::default()
        },
        Workload {
            name: "firewall-answered".into(),
            description: "65,536 answered flows, a table of 65,536: every connection assured, every packet forwarded (firewall-full's baseline)".into(),
            chain: vec![(
                "firewall".into(),
                spec("firewall", json!({ "default": "allow", "max_connections": 65536 }))?,
            )],
            flows: 65_536,
            sizes: vec![("64", FrameSizes::Fixed { size: 64 })],
            responder: true,
            ..Workload::default()
        },
        Workload {
            name: "firewall-full".into(),
            description: "131,072 answered flows, a table of 65,536: half the packets find it full of assured connections and are dropped".into(),
            chain: vec![(
                "firewall".into(),
                spec("firewall", json!({ "default": "allow", "max_connections": 65536 }))?,
            )],
            flows: 131_072,
            sizes: vec![("64", FrameSizes::Fixed { size: 64 })],
            responder: true,
            ..Workload::default()
        },
    ])
}

struct Runs {
    mpps: Vec<f64>,
    cycles: Vec<f64>,
    nf_cycles: Vec<Vec<f64>>,
    last: Option<RunReport>,
}

/// One run of a case's experiment with accounting on or off; Ctrl-C (`stop`) ends its
/// window at once.
fn run_once(experiment: &Experiment, accounting: bool, stop: &Stop) -> Result<RunReport, String> {
    let mut experiment = experiment.clone();
    experiment.settings.accounting = accounting;
    experiment.stop_on(stop);
    let r = experiment
        .run()
        .map_err(|e| format!("{}: {e}", experiment.name))?
        .into_measured();
    if r.received > r.generated + r.conservation.created {
        return Err(format!(
            "{}: {} received of {} generated: the run contradicts itself",
            experiment.name, r.received, r.generated
        ));
    }
    Ok(r)
}

pub fn nfs(args: &NfsArgs, progress: &mut Progress, stop: &Stop) -> Result<NfsBench, String> {
    progress.at(0, 1, "building the NFs' tables");
    let work = workloads(args)?;
    let mut cases: Vec<(usize, usize)> = work
        .iter()
        .enumerate()
        .flat_map(|(i, w)| (0..w.sizes.len()).map(move |s| (i, s)))
        .collect();
    // Each case resolved once (its tables built to check them); Ctrl-C is heard between,
    // and the rounds then end at once (the document says interrupted, with no point).
    let mut experiments = Vec::with_capacity(cases.len());
    for &(i, s) in &cases {
        if stop.requested() {
            break;
        }
        experiments.push(work[i].experiment(&work[i].sizes[s].1, args)?);
    }
    cases.truncate(experiments.len());
    let total = args.repeat * cases.len() * 2;
    let mut runs: Vec<Runs> = cases
        .iter()
        .map(|&(i, _)| Runs {
            mpps: Vec::new(),
            cycles: Vec::new(),
            nf_cycles: vec![Vec::new(); work[i].chain.len()],
            last: None,
        })
        .collect();
    progress.plan(total);
    let rounds = measure_rounds(args, (&work, &cases, &experiments), &mut runs, progress, stop)?;
    let interrupted = rounds.interrupted();
    let tsc_hz = sfclab_core::tsc::hz();
    let mut points: Vec<NfsPoint> = cases
        .iter()
        .zip(&runs)
        // Ctrl-C came before a round ended: no point.
        .filter(|(_, r)| !r.mpps.is_empty())
        .map(|(&(i, s), r)| point_of(&work[i], s, r, tsc_hz))
        .collect();
    let baseline: Vec<(String, f64)> = points
        .iter()
        .filter(|p| p.workload == "forwarder")
        .map(|p| (p.frames.clone(), p.chain_cycles))
        .collect();
    for p in &mut points {
        p.vs_forwarder = baseline
            .iter()
            .find(|(f, _)| *f == p.frames)
            .map(|(_, fwd)| p.chain_cycles / fwd);
    }
    let wanted = |name: &str| args.only.is_empty() || args.only.iter().any(|o| o == name);
    let repeat = runs.first().map_or(0, |r| r.mpps.len());
    let meters = if wanted("qos") && !interrupted {
        progress.at(total, total, "the meters alone: sfclab's and DPDK's rte_meter");
        meter_rows(args, repeat.max(1), stop)
    } else {
        Vec::new()
    };
    let dpi: Vec<(&str, &str)> = dpi_workloads().into_iter().filter(|(w, _)| wanted(w)).collect();
    let matcher = if !dpi.is_empty() && !interrupted {
        matcher_rows(args, &dpi, &points, repeat.max(1))?
    } else {
        Vec::new()
    };
    let crypto = if wanted("ipsec") && !interrupted {
        progress.at(
            total,
            total,
            "AES-GCM alone: the NFs' cipher, ring and DPDK's crypto PMD",
        );
        crypto_rows(args, &points, repeat.max(1), stop)
    } else {
        Vec::new()
    };
    Ok(NfsBench {
        header: crate::BenchHeader::new(NFS_SCHEMA, repeat, interrupted),
        core: args.core,
        batch: args.batch,
        duration_s: args.duration.as_secs_f64(),
        points,
        meters,
        matcher,
        crypto,
    })
}

/// Interleaved rounds over every workload at every size: a run with accounting off (the
/// core's figures), then one with it on (each NF's), into `runs`. Whole rounds are kept.
fn measure_rounds(
    args: &NfsArgs,
    (work, cases, experiments): (&[Workload], &[(usize, usize)], &[Experiment]),
    runs: &mut [Runs],
    progress: &mut Progress,
    stop: &Stop,
) -> Result<crate::Rounds, String> {
    let mut rounds = crate::Rounds::new(args.repeat, stop);
    'rounds: while rounds.start_next() {
        for (c, &(i, s)) in cases.iter().enumerate() {
            if !rounds.go_on() {
                break 'rounds;
            }
            let (w, label) = (&work[i], work[i].sizes[s].0);
            progress.working(&format!("{} {label} B, accounting off", w.name));
            let off = run_once(&experiments[c], false, stop)?;
            if off.interrupted {
                rounds.cut();
                break 'rounds;
            }
            runs[c].mpps.push(off.mpps);
            runs[c].cycles.push(off.busy_cycles_per_packet.unwrap_or(f64::NAN));
            progress.advance();
            progress.working(&format!("{} {label} B, accounting on", w.name));
            let on = run_once(&experiments[c], true, stop)?;
            if on.interrupted {
                rounds.cut();
                break 'rounds;
            }
            let nf_places = on.places.iter().filter(|p| p.role == Role::Nf);
            for (k, p) in nf_places.enumerate().take(w.chain.len()) {
                runs[c].nf_cycles[k].push(p.cycles_per_packet.unwrap_or(f64::NAN));
            }
            runs[c].last = Some(on);
            progress.advance();
        }
    }
    for r in runs.iter_mut() {
        rounds.keep_completed(&mut r.mpps);
        rounds.keep_completed(&mut r.cycles);
        for nf in &mut r.nf_cycles {
            rounds.keep_completed(nf);
        }
    }
    Ok(rounds)
}

/// A workload's point at size `s`: the medians of its runs, each NF's cost, and what
/// the last run with accounting says of its tables, drops and scan rate.
fn point_of(w: &Workload, s: usize, r: &Runs, tsc_hz: f64) -> NfsPoint {
    let nfs: Vec<NfCost> = w
        .chain
        .iter()
        .zip(&r.nf_cycles)
        .map(|((name, spec), runs)| NfCost {
            name: name.clone(),
            kind: spec.kind().to_string(),
            cycles: median(runs),
            cycles_runs: runs.clone(),
        })
        .collect();
    let chain_cycles: f64 = nfs.iter().map(|n| n.cycles).sum();
    let last = r.last.as_ref();
    let nf_places: Vec<_> = last
        .map(|l| l.places.iter().filter(|p| p.role == Role::Nf).collect())
        .unwrap_or_default();
    let counter = |key: &str| nf_places.iter().find_map(|p| p.counters.get(key).copied());
    let entries = counter("sessions").or_else(|| counter("connections"));
    let bytes_per_entry = counter("table_bytes")
        .zip(counter("capacity"))
        .filter(|&(_, c)| c > 0)
        .map(|(b, c)| b as f64 / c as f64);
    // A chain's tables are several: the figures are a single NF's.
    let single = w.chain.len() == 1;
    let bytes_per_entry = bytes_per_entry.filter(|_| single);
    let entries = entries.filter(|_| bytes_per_entry.is_some());
    let mut drop_reasons: Vec<(String, u64)> = nf_places
        .iter()
        .flat_map(|p| p.drops.iter().map(|(k, v)| (format!("{}: {k}", p.name), *v)))
        .collect();
    drop_reasons.sort();
    // The dpi NF's scan rate: its payload bytes per second of its own cycles.
    let dpi_gbps = nf_places
        .iter()
        .zip(&nfs)
        .find(|(_, n)| n.kind == "dpi")
        .and_then(|(p, n)| {
            let bytes = *p.counters.get("inspected_bytes")? as f64;
            (p.packets_in > 0 && n.cycles > 0.0).then(|| bytes / (n.cycles * p.packets_in as f64) * tsc_hz / 1e9)
        });
    NfsPoint {
        workload: w.name.clone(),
        description: w.description.clone(),
        frames: w.sizes[s].0.to_string(),
        flows: w.flows,
        core_mpps: median(&r.mpps),
        core_mpps_runs: r.mpps.clone(),
        core_cycles: median(&r.cycles),
        core_cycles_runs: r.cycles.clone(),
        chain_mpps: tsc_hz / chain_cycles / 1e6,
        chain_cycles,
        nfs,
        vs_forwarder: None,
        dropped: nf_places.iter().map(|p| p.dropped).sum(),
        drop_reasons,
        table_entries: entries,
        table_bytes_per_entry: bytes_per_entry,
        dpi_gbps,
    }
}

/// Operations per size and run for the cipher checks: about a window's worth.
fn crypto_ops(args: &NfsArgs) -> u64 {
    ((args.duration.as_secs_f64() * 2e6) as u64).clamp(100_000, 2_000_000)
}

/// AES-GCM alone (ours and DPDK's), interleaved run by run on the bench's core, beside
/// the ESP NFs' figures of the ipsec workload.
fn crypto_rows(args: &NfsArgs, points: &[NfsPoint], repeat: usize, stop: &Stop) -> Vec<CryptoRow> {
    let core = args.core.unwrap_or(0);
    let main_core = if core == 0 { 1 } else { 0 };
    let ops = crypto_ops(args);
    let bytes: Vec<usize> = ESP_SIZES.iter().map(|&(_, _, b)| b).collect();
    let mut ours: Vec<Vec<f64>> = vec![Vec::new(); bytes.len()];
    let mut ring: Vec<Vec<f64>> = vec![Vec::new(); bytes.len()];
    let mut theirs: Vec<Vec<f64>> = vec![Vec::new(); bytes.len()];
    // The implementation the NFs get (ipsec-mb where built in and this CPU runs it).
    let preferred = sfclab_aead::AesGcm::new(&[0; 16]).expect("ring takes any 16-byte key");
    let backend = preferred.backend();
    let other = (backend != sfclab_aead::Backend::Ring).then_some(sfclab_aead::Backend::Ring);
    let aead_name = match backend {
        sfclab_aead::Backend::IpsecMb => format!("{backend} ({})", preferred.arch()),
        sfclab_aead::Backend::Ring => backend.to_string(),
    };
    let (mut pmd, mut peer_error) = (None, None);
    let mut dpdk_esp: Vec<Vec<f64>> = vec![Vec::new(); bytes.len()];
    let mut dpdk_esp_error = None;
    for _ in 0..repeat {
        for (k, &b) in bytes.iter().enumerate() {
            ours[k].push(crate::on_core(args.core, || {
                sfclab_nf::ipsec::sa::seal_alone(backend, b, ops)
            }));
            if let Some(o) = other {
                ring[k].push(crate::on_core(args.core, || {
                    sfclab_nf::ipsec::sa::seal_alone(o, b, ops)
                }));
            }
        }
        if peer_error.is_none() {
            match sfclab_peers::dpdk_crypto::aes_gcm_encrypt(main_core, core, &bytes, ops, &|| stop.requested()) {
                Ok(rows) => {
                    for row in rows {
                        if let Some(k) = bytes.iter().position(|&b| b == row.bytes) {
                            theirs[k].push(row.cycles_per_op);
                        }
                        pmd = Some(row.pmd);
                    }
                }
                Err(e) => peer_error = Some(e),
            }
        }
        if dpdk_esp_error.is_none() && !stop.requested() {
            match sfclab_peers::dpdk_ipsec::esp_outbound(core, &bytes, ops, &|| stop.requested()) {
                Ok(run) => {
                    for size in run.sizes {
                        if let Some(k) = bytes.iter().position(|&b| b == size.bytes) {
                            dpdk_esp[k].push(size.cycles_per_packet);
                        }
                    }
                }
                Err(e) => dpdk_esp_error = Some(e),
            }
        }
    }
    ESP_SIZES
        .iter()
        .enumerate()
        .map(|(k, &(label, _, b))| {
            let point = points.iter().find(|p| p.workload == "ipsec" && p.frames == label);
            let nf = |kind: &str| {
                point
                    .and_then(|p| p.nfs.iter().find(|n| n.kind == kind))
                    .map(|n| n.cycles)
            };
            let (encrypt, aead) = (nf("esp-encrypt"), median(&ours[k]));
            let pmd_cycles = (!theirs[k].is_empty()).then(|| median(&theirs[k]));
            let dpdk_esp_cycles = (!dpdk_esp[k].is_empty()).then(|| median(&dpdk_esp[k]));
            CryptoRow {
                bytes: b,
                frames: label.into(),
                esp_encrypt_cycles: encrypt,
                esp_decrypt_cycles: nf("esp-decrypt"),
                aead: aead_name.clone(),
                aead_cycles: aead,
                aead_cycles_runs: ours[k].clone(),
                ring_cycles: (!ring[k].is_empty()).then(|| median(&ring[k])),
                ring_cycles_runs: ring[k].clone(),
                pmd_cycles,
                pmd_cycles_runs: theirs[k].clone(),
                pmd: pmd.clone(),
                encrypt_vs_pmd: encrypt.zip(pmd_cycles).map(|(e, p)| e / p),
                aead_vs_pmd: pmd_cycles.map(|p| aead / p),
                encrypt_vs_aead: encrypt.map(|e| e / aead),
                peer_error: peer_error.clone(),
                dpdk_esp_cycles,
                dpdk_esp_cycles_runs: dpdk_esp[k].clone(),
                encrypt_vs_dpdk_esp: encrypt.zip(dpdk_esp_cycles).map(|(e, d)| e / d),
                dpdk_esp_error: dpdk_esp_error.clone(),
            }
        })
        .collect()
}

/// Packets per meter check and run: 20 million (about a quarter of a second) for 1 s
/// windows, in proportion for shorter ones.
fn meter_packets(args: &NfsArgs) -> u64 {
    ((args.duration.as_secs_f64() * 2e7) as u64).clamp(200_000, 20_000_000)
}

/// sfclab's meter and rte_meter's, interleaved run by run on the bench's core.
fn meter_rows(args: &NfsArgs, repeat: usize, stop: &Stop) -> Vec<MeterRow> {
    let checks = ["srtcm-blind", "srtcm-aware", "trtcm-blind", "trtcm-aware"];
    // rte_meter's clock steps 40 TSC cycles per packet; ours the same in nanoseconds.
    let step_ns = 40.0 * 1e9 / sfclab_core::tsc::hz();
    let core = args.core.unwrap_or(0);
    let packets = meter_packets(args);
    let mut ours: Vec<Vec<f64>> = vec![Vec::new(); 4];
    let mut our_colours = [[0u64; 3]; 4];
    let mut theirs: Vec<Vec<f64>> = vec![Vec::new(); 4];
    let mut their_colours: [Option<[u64; 3]>; 4] = [None; 4];
    let mut peer_error = None;
    for _ in 0..repeat {
        for (k, check) in checks.iter().enumerate() {
            let (cycles, colours) = crate::on_core(args.core, || {
                sfclab_nf::qos::meter_alone(check.starts_with("trtcm"), check.ends_with("aware"), packets, step_ns)
            });
            ours[k].push(cycles);
            our_colours[k] = colours;
        }
        if peer_error.is_none() {
            match sfclab_peers::dpdk_meter::meter_perf(core, packets, &|| stop.requested()) {
                Ok(perf) => {
                    for (k, check) in checks.iter().enumerate() {
                        if let Some(p) = perf.iter().find(|p| p.check == *check) {
                            theirs[k].push(p.cycles_per_packet);
                            their_colours[k] = Some(p.colours);
                        }
                    }
                }
                Err(e) => peer_error = Some(e),
            }
        }
    }
    checks
        .iter()
        .enumerate()
        .map(|(k, check)| {
            let sfclab_cycles = median(&ours[k]);
            let rte = (!theirs[k].is_empty()).then(|| median(&theirs[k]));
            MeterRow {
                check: check.to_string(),
                packets,
                sfclab_cycles,
                sfclab_cycles_runs: ours[k].clone(),
                sfclab_colours: our_colours[k],
                rte_meter_cycles: rte,
                rte_meter_cycles_runs: theirs[k].clone(),
                rte_meter_colours: their_colours[k],
                ratio: rte.map(|r| sfclab_cycles / r),
                peer_error: peer_error.clone(),
            }
        })
        .collect()
}

/// The dpi workloads' payloads (the generator's frames at each size), scanned by each
/// workload's engine alone, against what its NF did on them.
fn matcher_rows(
    args: &NfsArgs,
    workloads: &[(&str, &str)],
    points: &[NfsPoint],
    repeat: usize,
) -> Result<Vec<MatcherRow>, String> {
    let mut out = Vec::new();
    for (label, sizes) in [("64", FrameSizes::Fixed { size: 64 }), ("imix", FrameSizes::imix())] {
        let payloads = generated_payloads(&sizes, args.flows)?;
        let mut nfs = Vec::new();
        for (_, engine) in workloads {
            let config = sfclab_nf::typed(dpi_with(Some(engine))?.settings()).map_err(|e| e.to_string())?;
            nfs.push(sfclab_nf::dpi::Dpi::new(&config).map_err(|e| e.to_string())?);
        }
        // About as long as a window: 2000 passes over the payloads for 1 s windows.
        let passes = ((args.duration.as_secs_f64() * 2000.0) as usize).clamp(5, 2000);
        // The engines in turn within each repetition.
        let mut runs = vec![Vec::new(); workloads.len()];
        for _ in 0..repeat {
            for (nf, r) in nfs.iter_mut().zip(&mut runs) {
                r.push(
                    crate::on_core(args.core, || nf.matcher_alone(&payloads, passes)) * sfclab_core::tsc::hz() / 1e9,
                );
            }
        }
        for (&(workload, engine), runs) in workloads.iter().zip(runs) {
            let matcher_gbps = median(&runs);
            let nf_gbps = points
                .iter()
                .find(|p| p.workload == workload && p.frames == label)
                .and_then(|p| p.dpi_gbps);
            out.push(MatcherRow {
                engine: engine.into(),
                workload: workload.into(),
                frames: label.into(),
                payload_bytes: payloads.iter().map(Vec::len).sum::<usize>() as f64 / payloads.len().max(1) as f64,
                matcher_gbps,
                matcher_gbps_runs: runs,
                nf_gbps,
                share: nf_gbps.map(|n| n / matcher_gbps),
            });
        }
    }
    Ok(out)
}

/// The UDP payloads of the generator's first 4096 frames of `sizes` over `flows`.
fn generated_payloads(sizes: &FrameSizes, flows: u32) -> Result<Vec<Vec<u8>>, String> {
    use sfclab_core::RxPort;
    let traffic = GeneratorConfig {
        sizes: sizes.clone(),
        flows,
        ..Default::default()
    };
    let mut generator = sfclab_traffic::Generator::new(traffic, 256).map_err(|(k, r)| format!("{k}: {r}"))?;
    let mut pool = sfclab_core::PacketPool::new(512);
    let mut batch = sfclab_core::Batch::new(256);
    let mut out = Vec::new();
    while out.len() < 4096 {
        generator.rx(sfclab_core::tsc::now(), &mut pool, &mut batch);
        for p in batch.drain() {
            // Ethernet, IPv4, UDP: the payload from byte 42.
            out.push(p.data().get(42..).unwrap_or_default().to_vec());
            pool.free(p);
        }
    }
    Ok(out)
}

benchmark!(NfsBench, render_table, render_csv);

fn render_table(b: &NfsBench) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}, one core, batch {}, {} s windows, {} repetitions (medians [min–max])\n",
        b.header.title("nfs"),
        b.batch,
        b.duration_s,
        b.header.repeat
    );
    let _ = writeln!(
        s,
        "{:<15} {:>5} {:>8}  {:>22}  {:>22}  {:>9}  {:>8}  {:>7}  per NF (cycles/packet)",
        "workload", "B", "flows", "core Mpps", "core cycles/pkt", "NF cyc/pkt", "NF Mpps", "x fwd"
    );
    let mut wide = 0;
    for p in &b.points {
        wide += [&p.core_mpps_runs, &p.core_cycles_runs]
            .iter()
            .filter(|v| crate::is_wide(v))
            .count();
        let per_nf: Vec<String> = p.nfs.iter().map(|n| format!("{} {:.1}", n.name, n.cycles)).collect();
        let _ = writeln!(
            s,
            "{:<15} {:>5} {:>8}  {:>22}  {:>22}  {:>9.1}  {:>8.2}  {:>7}  {}",
            p.workload,
            p.frames,
            p.flows,
            crate::with_range(&p.core_mpps_runs, 2),
            crate::with_range(&p.core_cycles_runs, 1),
            p.chain_cycles,
            p.chain_mpps,
            p.vs_forwarder.map_or("-".into(), |r| format!("{r:.1}x")),
            per_nf.join(", "),
        );
    }
    let _ = writeln!(
        s,
        "\ncore: accounting off, the one core's generator + chain + sink (what a deployment gets).\n\
         NF cyc/pkt: accounting on, the chain's NFs alone; NF Mpps = TSC Hz / that; x fwd: over the forwarder, same frames."
    );
    for p in &b.points {
        if let (Some(n), Some(bytes)) = (p.table_entries, p.table_bytes_per_entry) {
            let _ = writeln!(
                s,
                "{:<15} {:>5}  table: {n} entries in use, {bytes:.0} bytes per entry of capacity",
                p.workload, p.frames
            );
        }
        if p.dropped > 0 {
            let reasons: Vec<String> = p.drop_reasons.iter().map(|(r, n)| format!("{r} {n}")).collect();
            let _ = writeln!(
                s,
                "{:<15} {:>5}  DROPPED {}: {}",
                p.workload,
                p.frames,
                p.dropped,
                reasons.join(", ")
            );
        }
    }
    for p in &b.points {
        if let Some(g) = p.dpi_gbps {
            let _ = writeln!(
                s,
                "{:<15} {:>5}  dpi scanned {g:.2} GB/s of payload per core (its own cycles)",
                p.workload, p.frames
            );
        }
    }
    wide += write_meters(&mut s, &b.meters);
    if !b.matcher.is_empty() {
        let _ = writeln!(s, "\ndpi search engines alone on the workload's payloads (the limit):");
        for m in &b.matcher {
            let _ = writeln!(
                s,
                "  {:>12} {:>5} B frames, {:.0} B payload: alone {} GB/s, dpi NF {} GB/s ({} of the engine alone)",
                m.engine,
                m.frames,
                m.payload_bytes,
                crate::with_range(&m.matcher_gbps_runs, 2),
                m.nf_gbps.map_or("-".into(), |g| format!("{g:.2}")),
                m.share.map_or("-".into(), |r| format!("{:.0}%", r * 100.0)),
            );
        }
    }
    wide += write_crypto(&mut s, &b.crypto);
    s.push_str(&crate::footer(wide, b.header.interrupted, b.header.repeat));
    s
}

/// The meters alone against rte_meter; the figures that spread wide.
fn write_meters(s: &mut String, meters: &[MeterRow]) -> usize {
    if meters.is_empty() {
        return 0;
    }
    let mut wide = 0;
    let _ = writeln!(
        s,
        "\nmeters alone, TSC cycles per 64-byte packet (clock +40 cycles a packet; colours G/Y/R):"
    );
    for m in meters {
        wide += [&m.sfclab_cycles_runs, &m.rte_meter_cycles_runs]
            .iter()
            .filter(|v| crate::is_wide(v))
            .count();
        let peer = match (m.rte_meter_cycles, &m.peer_error) {
            (Some(_), _) => format!(
                "rte_meter {:>14} {:?}  sfclab/rte_meter {:.2}x",
                crate::with_range(&m.rte_meter_cycles_runs, 2),
                m.rte_meter_colours.unwrap_or_default(),
                m.ratio.unwrap_or(f64::NAN)
            ),
            (None, Some(e)) => format!("rte_meter SKIPPED: {e}"),
            (None, None) => "rte_meter -".into(),
        };
        let _ = writeln!(
            s,
            "  {:<12} sfclab {:>14} {:?}  {peer}",
            m.check,
            crate::with_range(&m.sfclab_cycles_runs, 2),
            m.sfclab_colours,
        );
    }
    wide
}

/// The ESP NFs against their cipher alone and DPDK's PMD; the figures that spread wide.
fn write_crypto(s: &mut String, crypto: &[CryptoRow]) -> usize {
    if crypto.is_empty() {
        return 0;
    }
    let mut wide = 0;
    let _ = writeln!(
        s,
        "\nESP against AES-GCM alone, TSC cycles per packet or operation (per byte in brackets):"
    );
    for c in crypto {
        wide += [
            &c.aead_cycles_runs,
            &c.ring_cycles_runs,
            &c.pmd_cycles_runs,
            &c.dpdk_esp_cycles_runs,
        ]
        .iter()
        .filter(|v| crate::is_wide(v))
        .count();
        let per_byte = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.1} [{:.3}]", v / c.bytes as f64));
        let peer = match (&c.pmd_cycles, &c.peer_error) {
            (Some(_), _) => format!(
                "{} {}  esp-encrypt/PMD {:.2}x, aead/PMD {:.2}x",
                c.pmd.as_deref().unwrap_or("PMD"),
                per_byte(c.pmd_cycles),
                c.encrypt_vs_pmd.unwrap_or(f64::NAN),
                c.aead_vs_pmd.unwrap_or(f64::NAN)
            ),
            (None, Some(e)) => format!("PMD SKIPPED: {e}"),
            (None, None) => "PMD -".into(),
        };
        let ring = c
            .ring_cycles
            .map_or(String::new(), |v| format!(", ring alone {}", per_byte(Some(v))));
        let _ = writeln!(
            s,
            "  {:>5} B: esp-encrypt {}, esp-decrypt {}, {} alone {} (framing {}){ring}  {peer}",
            c.bytes,
            per_byte(c.esp_encrypt_cycles),
            per_byte(c.esp_decrypt_cycles),
            c.aead,
            per_byte(Some(c.aead_cycles)),
            c.encrypt_vs_aead.map_or("-".into(), |r| format!("{r:.2}x")),
        );
        let whole = match (c.dpdk_esp_cycles, &c.dpdk_esp_error) {
            (Some(d), _) => format!(
                "DPDK's ESP (librte_ipsec around the PMD) {}  esp-encrypt/DPDK's ESP {:.2}x",
                per_byte(Some(d)),
                c.encrypt_vs_dpdk_esp.unwrap_or(f64::NAN)
            ),
            (None, Some(e)) => format!("DPDK's ESP SKIPPED: {e}"),
            (None, None) => "DPDK's ESP -".into(),
        };
        let _ = writeln!(s, "           {whole}");
    }
    wide
}

fn render_csv(b: &NfsBench) -> String {
    let mut s = String::from(
        "workload,frames,flows,core_mpps,core_cycles_per_packet,chain_cycles_per_packet,chain_mpps,vs_forwarder,nf_cycles,dropped,table_entries,table_bytes_per_entry\n",
    );
    for p in &b.points {
        let per_nf: Vec<String> = p.nfs.iter().map(|n| format!("{}={:.2}", n.name, n.cycles)).collect();
        let opt = |v: Option<f64>| v.map_or(String::new(), |v| format!("{v:.3}"));
        let _ = writeln!(
            s,
            "{},{},{},{:.3},{:.2},{:.2},{:.3},{},\"{}\",{},{},{}",
            p.workload,
            p.frames,
            p.flows,
            p.core_mpps,
            p.core_cycles,
            p.chain_cycles,
            p.chain_mpps,
            opt(p.vs_forwarder),
            per_nf.join(";"),
            p.dropped,
            p.table_entries.map_or(String::new(), |n| n.to_string()),
            opt(p.table_bytes_per_entry),
        );
    }
    s
}

/// `sfclab bench nfs`'s flags.
#[derive(clap::Args)]
pub struct NfsFlags {
    #[arg(long, default_value = "1s")]
    duration: String,
    #[arg(long, default_value = "300ms")]
    warmup: String,
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Core to run on (default: the last core this process may use).
    #[arg(long)]
    core: Option<usize>,
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Flows of the workloads (NAT sessions, firewall connections).
    #[arg(long, default_value_t = 65536)]
    flows: u32,
    /// ACL rules of the firewall workloads.
    #[arg(long, default_value_t = 1000)]
    rules: usize,
    /// NAT44 session counts of the scaling points, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000,100000,1000000")]
    nat_sessions: Vec<u32>,
    /// Only these workloads, comma-separated (forwarder, router, nat44, firewall-acl,
    /// firewall, fw-nat-router, nat44@N).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
}

pub static BENCH: crate::registry::Entry<NfsFlags, NfsBench> = crate::registry::Entry {
    name: "nfs",
    schema: NFS_SCHEMA,
    about: "Each NF's cost on one core at 64 B and IMIX (router, nat44, firewall, their chain) beside plain forwarding, and NAT44 at 1k/100k/1M sessions with memory per session",
    run: |f, stop, progress| {
        use crate::registry::BenchError::Usage;
        let (duration, warmup) = crate::registry::window(&f.duration, &f.warmup)?;
        let max = sfclab_traffic::flows::MAX_FLOWS;
        if f.repeat == 0 || f.flows == 0 || f.flows > max {
            return Err(Usage(format!("need at least one repetition and 1..={max} flows")));
        }
        if let Some(&n) = f.nat_sessions.iter().find(|&&n| n == 0 || n > max) {
            return Err(Usage(format!("--nat-sessions {n}: each must be 1..={max}")));
        }
        let args = NfsArgs {
            duration,
            warmup,
            repeat: f.repeat,
            core: f.core,
            batch: f.batch,
            flows: f.flows,
            rules: f.rules,
            nat_sessions: f.nat_sessions,
            only: f.only,
        };
        check_only(&args).map_err(|e| Usage(format!("--only: {e}")))?;
        Ok(nfs(&args, progress, stop)?)
    },
    figure: Some(figure),
};

/// Cycles per packet per workload, stacked by NF kind.
fn figure(b: &NfsBench) -> crate::registry::Figure {
    crate::registry::Figure::StackedBars {
        title: "NF cost on one core (sfclab bench nfs)".into(),
        y_label: "TSC cycles/packet".into(),
        bars: b
            .points
            .iter()
            .map(|p| {
                (
                    format!("{} {}", p.workload, p.frames),
                    p.nfs.iter().map(|n| (n.kind.clone(), n.cycles)).collect(),
                )
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(only: &[&str]) -> NfsArgs {
        NfsArgs {
            duration: Duration::from_millis(50),
            warmup: Duration::from_millis(20),
            repeat: 1,
            core: None,
            batch: 32,
            flows: 256,
            rules: 50,
            nat_sessions: vec![1000],
            only: only.iter().map(|s| s.to_string()).collect(),
        }
    }

    /// Each NF passes the traffic it is given (nothing dropped), its cycles are counted,
    /// and the chain's cost is set against the forwarder's.
    #[test]
    fn every_workload_forwards_and_is_costed() {
        let b = nfs(
            &args(&["forwarder", "firewall", "fw-nat-router", "nat44@1000"]),
            &mut Progress::quiet(),
            &Stop::new(),
        )
        .unwrap();
        assert_eq!(b.points.len(), 2 + 2 + 2 + 1);
        for p in &b.points {
            assert_eq!(p.dropped, 0, "{}: {:?}", p.workload, p.drop_reasons);
            assert!(p.core_mpps > 0.0 && p.chain_cycles > 0.0, "{p:?}");
            assert!(p.nfs.iter().all(|n| n.cycles > 0.0), "{p:?}");
            assert!(p.vs_forwarder.is_some(), "{p:?}");
        }
        let chain = b.points.iter().find(|p| p.workload == "fw-nat-router").unwrap();
        assert_eq!(chain.nfs.len(), 3);
        let nat = b.points.iter().find(|p| p.workload == "nat44@1000").unwrap();
        assert_eq!(nat.table_entries, Some(1000));
        assert!(nat.table_bytes_per_entry.unwrap() > 16.0);
    }

    #[test]
    fn unknown_workloads_are_named() {
        let err = nfs(&args(&["nat66"]), &mut Progress::quiet(), &Stop::new()).unwrap_err();
        assert!(
            err.contains("no workload `nat66`") && err.contains("fw-nat-router"),
            "{err}"
        );
    }
}
