//! `router`: IPv4 and IPv6 forwarding as RFC 1812 and RFC 8200 describe it.
//!
//! For each packet: check the IP header (version, length, IPv4 header checksum), decrement
//! TTL / hop limit (IPv4 checksum updated incrementally, RFC 1624), look the destination
//! up by longest-prefix match ([`crate::tables::lpm`]: DIR-24-8 for IPv4, 24-8-8-... for IPv6),
//! rewrite the MACs (the next hop's as destination, the output port's as source) and send
//! the packet out of the route's port (outputs `port0`, `port1`, ...; `port0` is the
//! chain's next NF). A packet whose TTL runs out, or whose destination has no route,
//! gets an ICMP error back to its source (time exceeded, destination unreachable),
//! rate-limited by a token bucket (`icmp_rate` per second; 0: none) and routed like any
//! packet, and is dropped as `ttl-expired` / `no-route`.
//!
//! Keys:
//! - `routes`: lines `prefix next-hop port` (`10.0.0.0/8 192.0.2.1 1`; next hop `-`: the
//!   destination is on the link) or `ip route` / `ip -6 route` lines
//!   (`10.0.0.0/8 via 192.0.2.1 dev eth1`; devices become ports in order of appearance).
//! - `routes_file`: a file of such lines (`#` comments; in a chain file, a relative path
//!   is read beside it).
//! - `generate`: `{ ipv4: N, ipv6: M, seed: S }` random routes shaped like BGP tables.
//! - `ports` (default: enough for the routes), `port_macs`, `neighbors` (next-hop IP to
//!   MAC; default `02:00` + the IPv4 address, or + the IPv6 address's last 4 bytes),
//!   `address`/`address6` (the router's own, the source of its ICMP errors),
//!   `icmp_rate` (default 1000), `check_checksum` (default true).
//!
//! Counters: `forwarded`, `icmp_sent`, `icmp_rate_limited`, `icmp_no_buffer`,
//! `icmp_no_route`, gauges `routes_v4`, `routes_v6`, `table_bytes`. Drops: `malformed`,
//! `unsupported` (not IP: a real router punts it to its control plane), `ttl-expired`,
//! `no-route`, and its own `bad-checksum`.

use serde::Deserialize;
use sfclab_core::packet::Note;
use sfclab_core::{BatchView, Context, DropReason, NetworkFunction, NfCounter, Packet, Verdicts};
use sfclab_wire::Network;
use sfclab_wire::icmp;
use sfclab_wire::{Ipv4Header, MacAddr, checksum};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::ConfigError;
use crate::tables::lpm::{BGP4_SHAPE, Lpm4, Lpm6, Route, counts_of, random_table4, random_table6};

/// This NF's own drop reasons, in code order (`drop_reasons()`).
const DROP_REASONS: &[&str] = &["bad-checksum"];
const BAD_CHECKSUM: DropReason = DropReason::named(DROP_REASONS, "bad-checksum");

/// Where a route leads.
#[derive(Debug, Clone, Copy)]
struct Hop {
    port: u8,
    /// The next hop's MAC; for a directly connected route, derived from the destination.
    mac: [u8; 6],
    connected: bool,
}

pub struct Router {
    v4: Lpm4,
    v6: Option<Lpm6>,
    hops: Vec<Hop>,
    port_macs: Vec<[u8; 6]>,
    address: [u8; 4],
    address6: [u8; 16],
    check_checksum: bool,
    icmp: TokenBucket,
    counts: Counts,
}

#[derive(Default)]
struct Counts {
    forwarded: u64,
    icmp_sent: u64,
    icmp_rate_limited: u64,
    icmp_no_buffer: u64,
    icmp_no_route: u64,
}

/// Why a packet is not forwarded.
enum Fate {
    /// Forwarded to next hop `hop` (an index into the router's hops) on output `port`.
    Out {
        hop: u32,
        port: u8,
    },
    Drop(DropReason),
    /// Dropped, and an ICMP error is due: (type, code) for v4 or v6.
    Icmp(DropReason, bool, u8, u8),
}

impl NetworkFunction for Router {
    fn kind(&self) -> &'static str {
        TYPE.kind
    }

    fn outputs(&self) -> Vec<String> {
        (0..self.port_macs.len()).map(|k| format!("port{k}")).collect()
    }

    fn drop_reasons(&self) -> &'static [&'static str] {
        DROP_REASONS
    }

    fn creates_packets(&self) -> bool {
        self.icmp.rate > 0.0
    }

    fn process(&mut self, ctx: &mut Context<'_>, mut batch: BatchView<'_>, verdicts: &mut Verdicts) {
        // First the table reads of the whole batch (plain IPv4 frames): independent loads
        // whose cache misses overlap, instead of one miss after another.
        let mut first = [0u32; sfclab_core::MAX_BATCH];
        for (i, p) in batch.iter().enumerate() {
            if let Some(ip) = p.data().get(14..34)
                && p.data()[12..14] == [0x08, 0x00]
            {
                first[i] = self
                    .v4
                    .first_level(u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]));
            }
        }
        for (i, &first) in first.iter().enumerate().take(batch.len()) {
            let p = batch.get_mut(i);
            match self.route(p, first) {
                Fate::Out { hop, port } => {
                    self.counts.forwarded += 1;
                    p.notes.set(Note::NEXT_HOP, hop);
                    if port != 0 {
                        verdicts.out(i, port);
                    }
                }
                Fate::Drop(reason) => verdicts.drop(i, reason),
                Fate::Icmp(reason, v6, ty, code) => {
                    self.send_icmp(ctx, batch.get(i), v6, ty, code);
                    verdicts.drop(i, reason);
                }
            }
        }
    }

    fn counters(&self) -> Vec<NfCounter> {
        let c = &self.counts;
        vec![
            NfCounter::total("forwarded", c.forwarded),
            NfCounter::total("icmp_sent", c.icmp_sent),
            NfCounter::total("icmp_rate_limited", c.icmp_rate_limited),
            NfCounter::total("icmp_no_buffer", c.icmp_no_buffer),
            NfCounter::total("icmp_no_route", c.icmp_no_route),
            NfCounter::gauge("routes_v4", self.v4.routes() as u64),
            NfCounter::gauge("routes_v6", self.v6.as_ref().map_or(0, |t| t.routes() as u64)),
            NfCounter::gauge(
                "table_bytes",
                (self.v4.bytes() + self.v6.as_ref().map_or(0, Lpm6::bytes)) as u64,
            ),
        ]
    }
}

impl Router {
    /// Forwards one packet in place, or says why not. `first`: the IPv4 first-level
    /// entry already read for a plain (untagged) IPv4 frame.
    #[inline]
    fn route(&self, p: &mut Packet, first: u32) -> Fate {
        let Some(&[t0, t1]) = p
            .data()
            .get(12..14)
            .map(|t| <&[u8; 2]>::try_from(t).expect("two bytes"))
        else {
            return Fate::Drop(DropReason::MALFORMED);
        };
        // Plain and single-tagged frames inline (the tag is kept as it is); anything
        // else (QinQ) through the parser step, as the NFs before the router saw it.
        let (l3, ethertype) = match (t0, t1) {
            (0x08, 0x00) | (0x86, 0xdd) => (14, [t0, t1]),
            (0x81, 0x00) => match p.data().get(16..18) {
                Some(t) => (18, [t[0], t[1]]),
                None => return Fate::Drop(DropReason::MALFORMED),
            },
            _ => match p.layers() {
                Ok(l) if l.network() == Network::Ipv4 => (l.l3_offset(), [0x08, 0x00]),
                Ok(l) if l.network() == Network::Ipv6 => (l.l3_offset(), [0x86, 0xdd]),
                Ok(_) => return Fate::Drop(DropReason::UNSUPPORTED),
                Err(_) => return Fate::Drop(DropReason::MALFORMED),
            },
        };
        let data = p.data_mut();
        let (hop, data) = match ethertype {
            [0x08, 0x00] => {
                let ip = &mut data[l3..];
                let Some(h) = ip.get(..20) else {
                    return Fate::Drop(DropReason::MALFORMED);
                };
                let hlen = usize::from(h[0] & 0x0f) * 4;
                let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
                if h[0] >> 4 != 4 || hlen < 20 || total < hlen || total > ip.len() {
                    return Fate::Drop(DropReason::MALFORMED);
                }
                if self.check_checksum && !Ipv4Header::checksum_ok(&ip[..hlen]) {
                    return Fate::Drop(BAD_CHECKSUM);
                }
                if ip[8] <= 1 {
                    return Fate::Icmp(
                        DropReason::TTL_EXPIRED,
                        false,
                        icmp::v4::TIME_EXCEEDED,
                        icmp::v4::TTL_EXCEEDED,
                    );
                }
                let dst = u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]);
                let hop = if l3 == 14 {
                    self.v4.resolve(first, dst)
                } else {
                    self.v4.lookup(dst)
                };
                let Some(hop) = hop else {
                    return Fate::Icmp(
                        DropReason::NO_ROUTE,
                        false,
                        icmp::v4::DEST_UNREACHABLE,
                        icmp::v4::NET_UNREACHABLE,
                    );
                };
                // RFC 1624: TTL and protocol are one 16-bit word of the header.
                let old = u16::from_be_bytes([ip[8], ip[9]]);
                ip[8] -= 1;
                let new = u16::from_be_bytes([ip[8], ip[9]]);
                let c = checksum::update16(u16::from_be_bytes([ip[10], ip[11]]), old, new);
                ip[10..12].copy_from_slice(&c.to_be_bytes());
                (hop, data)
            }
            [0x86, 0xdd] => {
                let Some(ip) = data.get_mut(l3..l3 + 40) else {
                    return Fate::Drop(DropReason::MALFORMED);
                };
                let payload = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
                if ip[0] >> 4 != 6 || l3 + 40 + payload > data.len() {
                    return Fate::Drop(DropReason::MALFORMED);
                }
                let ip = &mut data[l3..l3 + 40];
                if ip[7] <= 1 {
                    return Fate::Icmp(
                        DropReason::TTL_EXPIRED,
                        true,
                        icmp::v6::TIME_EXCEEDED,
                        icmp::v6::HOP_LIMIT_EXCEEDED,
                    );
                }
                let dst = u128::from_be_bytes(ip[24..40].try_into().expect("16 bytes"));
                let Some(hop) = self.v6.as_ref().and_then(|t| t.lookup(dst)) else {
                    return Fate::Icmp(
                        DropReason::NO_ROUTE,
                        true,
                        icmp::v6::DEST_UNREACHABLE,
                        icmp::v6::NO_ROUTE,
                    );
                };
                ip[7] -= 1;
                (hop, data)
            }
            _ => return Fate::Drop(DropReason::UNSUPPORTED),
        };
        let index = hop;
        let hop = &self.hops[hop as usize];
        if hop.connected {
            // On the link: the destination's own (derived) MAC.
            let dst_mac = if ethertype == [0x08, 0x00] {
                derived_mac(&data[l3 + 16..l3 + 20])
            } else {
                derived_mac(&data[l3 + 36..l3 + 40])
            };
            data[..6].copy_from_slice(&dst_mac);
        } else {
            data[..6].copy_from_slice(&hop.mac);
        }
        data[6..12].copy_from_slice(&self.port_macs[usize::from(hop.port)]);
        Fate::Out {
            hop: index,
            port: hop.port,
        }
    }

    /// An ICMP error about `offending` back to its source, if the bucket has a token,
    /// a buffer is free and the source has a route.
    #[cold]
    fn send_icmp(&mut self, ctx: &mut Context<'_>, offending: &Packet, v6: bool, ty: u8, code: u8) {
        if !self.icmp.take(ctx.now_ns()) {
            self.counts.icmp_rate_limited += 1;
            return;
        }
        let frame = offending.data();
        let l3 = match offending.meta.cached_layers() {
            Some(l) => l.l3_offset(),
            None if frame[12..14] == [0x81, 0x00] => 18,
            None => 14,
        };
        let ip = &frame[l3..];
        // The error goes where a packet to the offending source would go.
        let hop = if v6 {
            let src = u128::from_be_bytes(ip[8..24].try_into().expect("checked header"));
            self.v6.as_ref().and_then(|t| t.lookup(src))
        } else {
            self.v4.lookup(u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]))
        };
        let Some(hop) = hop.map(|h| self.hops[h as usize]) else {
            self.counts.icmp_no_route += 1;
            return;
        };
        let Some(mut p) = ctx.alloc() else {
            self.counts.icmp_no_buffer += 1;
            return;
        };
        let out = p.reset(14 + 1280);
        out[6..12].copy_from_slice(&self.port_macs[usize::from(hop.port)]);
        let written = if v6 {
            out[12..14].copy_from_slice(&[0x86, 0xdd]);
            let src: [u8; 16] = ip[8..24].try_into().expect("checked header");
            icmp::error_v6(&mut out[14..], self.address6, src, ty, code, ip)
        } else {
            out[12..14].copy_from_slice(&[0x08, 0x00]);
            let src: [u8; 4] = ip[12..16].try_into().expect("checked header");
            icmp::error_v4(&mut out[14..], self.address, src, ty, code, ip)
        }
        .unwrap_or(0);
        let dst_mac = if hop.connected {
            derived_mac(&out[14 + if v6 { 36 } else { 16 }..][..4])
        } else {
            hop.mac
        };
        out[..6].copy_from_slice(&dst_mac);
        p.truncate(14 + written);
        self.counts.icmp_sent += 1;
        ctx.emit(p, hop.port);
    }
}

/// The MAC sfclab gives a neighbor it has no entry for: `02:00` and the address's last
/// four bytes (a locally administered unicast address).
fn derived_mac(addr4: &[u8]) -> [u8; 6] {
    [0x02, 0x00, addr4[0], addr4[1], addr4[2], addr4[3]]
}

/// At most `rate` tokens per second, bursts up to a tenth of a second's worth.
struct TokenBucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last_ns: u64,
}

impl TokenBucket {
    fn new(rate: u32) -> TokenBucket {
        let rate = f64::from(rate);
        let burst = (rate / 10.0).max(1.0);
        TokenBucket {
            rate,
            burst,
            tokens: burst,
            last_ns: 0,
        }
    }

    fn take(&mut self, now_ns: u64) -> bool {
        if self.rate <= 0.0 {
            return false;
        }
        let elapsed = now_ns.saturating_sub(self.last_ns) as f64 * 1e-9;
        self.last_ns = now_ns;
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Registers `router`.
pub const TYPE: crate::NfType = crate::NfType {
    kind: "router",
    about: "IPv4/IPv6 longest-prefix-match forwarding: TTL, RFC 1624 checksum, next-hop MACs, ICMP errors",
    stateless: false,
    cost_neutral: &["address", "address6", "neighbors", "port_macs", "icmp_rate"],
    files: &["routes_file"],
    wraps: None,
    schema: || schemars::schema_for!(RouterConfig),
    drops_all_by_default: Some("no-route"),
    fixes: &[(
        "no-route",
        "it has no routes unless given some: add `routes:` (a default route `0.0.0.0/0 192.0.2.1 0`), as examples/chains/router.yaml does",
    )],
    build: |v| Ok(Box::new(Router::new(&crate::typed(v)?)?)),
};

#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RouterConfig {
    /// Routes: `prefix next-hop port` (next hop `-`: on the link), or `ip route` lines.
    #[serde(default)]
    pub routes: Vec<String>,
    /// A file of route lines (`#` starts a comment); in a chain file, relative to it.
    pub routes_file: Option<String>,
    /// Random routes shaped like BGP tables: `{ ipv4: N, ipv6: M, seed: S }`.
    pub generate: Option<GenerateRoutes>,
    /// Output ports (`port0`..); default: enough for every route.
    pub ports: Option<u8>,
    /// MAC of each port, the source MAC of what leaves it (default 02:00:00:00:01:<port>).
    #[serde(default)]
    pub port_macs: Vec<String>,
    /// Next-hop IP to MAC (default: 02:00 and the address's last 4 bytes).
    #[serde(default)]
    pub neighbors: BTreeMap<String, String>,
    /// The router's IPv4 address: the source of its ICMP errors (default 192.0.2.254).
    pub address: Option<String>,
    /// The router's IPv6 address (default 2001:db8::fe).
    pub address6: Option<String>,
    /// ICMP errors per second at most (default 1000; 0: none, the drops are still counted).
    pub icmp_rate: Option<u32>,
    /// Verify the IPv4 header checksum (RFC 1812 §5.2.2; default true).
    pub check_checksum: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GenerateRoutes {
    /// IPv4 routes, lengths as in BGP tables (about half /24).
    #[serde(default)]
    pub ipv4: usize,
    /// IPv6 routes under 2000::/3, mostly /48 and /32.
    #[serde(default)]
    pub ipv6: usize,
    /// Seed of the random table (default 1).
    pub seed: Option<u64>,
}

/// The prefix-length mix of generated IPv6 tables (percent per length).
const BGP6_SHAPE: [(u8, f64); 9] = [
    (28, 1.0),
    (29, 5.0),
    (32, 12.0),
    (36, 3.0),
    (40, 5.0),
    (44, 9.0),
    (46, 2.0),
    (47, 3.0),
    (48, 60.0),
];

/// Most routes one router takes (files and generated tables together).
const MAX_ROUTES: usize = 4_000_000;

/// One route line read: prefix, next hop (None: on the link) and port.
struct RouteLine {
    prefix: IpAddr,
    len: u8,
    via: Option<IpAddr>,
    port: u8,
}

impl Router {
    pub fn new(cfg: &RouterConfig) -> Result<Router, ConfigError> {
        let Tables {
            v4,
            v6,
            hops,
            port_macs,
        } = Tables::build(cfg)?;
        let addr = |key: &str, s: &Option<String>, default: &str| -> Result<IpAddr, ConfigError> {
            s.as_deref()
                .unwrap_or(default)
                .parse()
                .map_err(|_| ConfigError::new(key, "not an IP address"))
        };
        let IpAddr::V4(address) = addr("address", &cfg.address, "192.0.2.254")? else {
            return Err(ConfigError::new(
                "address",
                "the router's IPv4 address: give an IPv4 address",
            ));
        };
        let IpAddr::V6(address6) = addr("address6", &cfg.address6, "2001:db8::fe")? else {
            return Err(ConfigError::new(
                "address6",
                "the router's IPv6 address: give an IPv6 address",
            ));
        };
        Ok(Router {
            v4: Lpm4::new(&v4).map_err(|e| ConfigError::new("routes", e))?,
            v6: if v6.is_empty() {
                None
            } else {
                Some(Lpm6::new(&v6).map_err(|e| ConfigError::new("routes", e))?)
            },
            hops,
            port_macs,
            address: address.octets(),
            address6: address6.octets(),
            check_checksum: cfg.check_checksum.unwrap_or(true),
            icmp: TokenBucket::new(cfg.icmp_rate.unwrap_or(1000)),
            counts: Counts::default(),
        })
    }
}

/// What a router's config describes before any lookup structure is built: its routes
/// (routes, routes file, generated table, in that order), next hops and port MACs.
struct Tables {
    v4: Vec<Route<u32>>,
    v6: Vec<Route<u128>>,
    hops: Vec<Hop>,
    port_macs: Vec<[u8; 6]>,
}

impl Tables {
    fn build(cfg: &RouterConfig) -> Result<Tables, ConfigError> {
        let mut lines: Vec<(String, String)> = cfg
            .routes
            .iter()
            .enumerate()
            .map(|(k, l)| (format!("routes[{k}]"), l.clone()))
            .collect();
        if let Some(path) = &cfg.routes_file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| ConfigError::new("routes_file", format!("cannot read {path}: {e}")))?;
            for (n, l) in text.lines().enumerate() {
                let l = l.split('#').next().unwrap_or("").trim();
                if !l.is_empty() {
                    lines.push((format!("routes_file ({path}:{})", n + 1), l.to_string()));
                }
            }
        }
        let mut devices: Vec<String> = Vec::new();
        let mut parsed = Vec::with_capacity(lines.len());
        for (key, l) in &lines {
            parsed.push(parse_route(l, &mut devices).map_err(|e| ConfigError::new(key.clone(), e))?);
        }
        let generate = cfg.generate.clone().unwrap_or_default();
        if lines.len() + generate.ipv4 + generate.ipv6 > MAX_ROUTES {
            return Err(ConfigError::new("generate", format!("more than {MAX_ROUTES} routes")));
        }
        let max_port = parsed.iter().map(|r| r.port).max().unwrap_or(0);
        let ports = cfg.ports.unwrap_or(max_port + 1).max(1);
        if max_port >= ports {
            return Err(ConfigError::new(
                "ports",
                format!("{ports} port(s), but a route leaves by port {max_port}"),
            ));
        }
        let mac = |key: String, s: &str| s.parse::<MacAddr>().map(|m| m.0).map_err(|e| ConfigError::new(key, e));
        let mut port_macs = Vec::new();
        for k in 0..ports {
            port_macs.push(match cfg.port_macs.get(usize::from(k)) {
                Some(s) => mac(format!("port_macs[{k}]"), s)?,
                None => [0x02, 0, 0, 0, 0x01, k],
            });
        }
        if cfg.port_macs.len() > usize::from(ports) {
            return Err(ConfigError::new(
                "port_macs",
                format!("{} MACs for {ports} port(s)", cfg.port_macs.len()),
            ));
        }
        let mut neighbors: BTreeMap<IpAddr, [u8; 6]> = BTreeMap::new();
        for (ip, m) in &cfg.neighbors {
            let key = format!("neighbors.{ip}");
            let addr: IpAddr = ip
                .parse()
                .map_err(|_| ConfigError::new(key.clone(), format!("`{ip}` is not an IP address")))?;
            neighbors.insert(addr, mac(key, m)?);
        }
        // Next hops: one per distinct (next hop, port), in order of appearance.
        let mut hops: Vec<Hop> = Vec::new();
        let mut hop_index: BTreeMap<(Option<IpAddr>, u8), u32> = BTreeMap::new();
        let mut hop_of = |via: Option<IpAddr>, port: u8, hops: &mut Vec<Hop>| -> u32 {
            *hop_index.entry((via, port)).or_insert_with(|| {
                let mac = match via {
                    None => [0; 6],
                    Some(a) => neighbors.get(&a).copied().unwrap_or_else(|| match a {
                        IpAddr::V4(v) => derived_mac(&v.octets()),
                        IpAddr::V6(v) => derived_mac(&v.octets()[12..]),
                    }),
                };
                hops.push(Hop {
                    port,
                    mac,
                    connected: via.is_none(),
                });
                hops.len() as u32 - 1
            })
        };
        let (mut v4, mut v6) = (Vec::new(), Vec::new());
        for r in &parsed {
            let hop = hop_of(r.via, r.port, &mut hops);
            match r.prefix {
                IpAddr::V4(a) => v4.push(Route {
                    prefix: u32::from(a),
                    len: r.len,
                    hop,
                }),
                IpAddr::V6(a) => v6.push(Route {
                    prefix: u128::from(a),
                    len: r.len,
                    hop,
                }),
            }
        }
        // Generated routes: next hops 10.255.0.<k> (and fe80::<k>), spread over the ports.
        let seed = generate.seed.unwrap_or(1);
        let generated_hops: Vec<u32> = (0..16u8)
            .map(|k| hop_of(Some(IpAddr::V4(Ipv4Addr::new(10, 255, 0, k))), k % ports, &mut hops))
            .collect();
        for mut r in random_table4(&counts_of(&BGP4_SHAPE, generate.ipv4), 16, seed) {
            r.hop = generated_hops[r.hop as usize];
            v4.push(r);
        }
        for mut r in random_table6(&counts_of(&BGP6_SHAPE, generate.ipv6), 16, seed ^ 0x6) {
            r.hop = generated_hops[r.hop as usize];
            v6.push(r);
        }
        Ok(Tables {
            v4,
            v6,
            hops,
            port_macs,
        })
    }
}

/// The IPv4 prefixes `cfg`'s router routes, in table order, without building its lookup
/// structures (for traffic aimed at its table).
pub fn ipv4_prefixes(cfg: &RouterConfig) -> Result<Vec<(u32, u8)>, ConfigError> {
    Ok(Tables::build(cfg)?.v4.iter().map(|r| (r.prefix, r.len)).collect())
}

/// Reads `prefix next-hop port`, or an `ip route` line (`default`, `via`, `dev`).
fn parse_route(line: &str, devices: &mut Vec<String>) -> Result<RouteLine, String> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let why =
        || format!("`{line}` is not a route: write `10.0.0.0/8 192.0.2.1 1` or `10.0.0.0/8 via 192.0.2.1 dev eth1`");
    let first = *words.first().ok_or_else(why)?;
    let ip_route = words
        .get(1)
        .is_some_and(|w| ["via", "dev", "proto", "metric", "scope"].contains(w));
    let (via, port) = if ip_route {
        let after = |key: &str| {
            words
                .iter()
                .position(|w| *w == key)
                .and_then(|i| words.get(i + 1))
                .copied()
        };
        let via = after("via")
            .map(|v| {
                v.parse::<IpAddr>()
                    .map_err(|_| format!("`{v}` after `via` is not an IP address"))
            })
            .transpose()?;
        let port = match after("dev") {
            Some(d) => match devices.iter().position(|x| x == d) {
                Some(p) => p,
                None => {
                    devices.push(d.to_string());
                    devices.len() - 1
                }
            },
            None => 0,
        };
        (via, port)
    } else {
        if words.len() != 3 {
            return Err(why());
        }
        let via = match words[1] {
            "-" => None,
            v => Some(
                v.parse::<IpAddr>()
                    .map_err(|_| format!("`{v}` is not an IP address or `-`"))?,
            ),
        };
        let port: usize = words[2]
            .parse()
            .map_err(|_| format!("`{}` is not a port number", words[2]))?;
        (via, port)
    };
    let port = u8::try_from(port)
        .ok()
        .filter(|p| *p <= sfclab_core::nf::MAX_OUTPUT)
        .ok_or_else(|| format!("port {port} is over {}", sfclab_core::nf::MAX_OUTPUT))?;
    let (prefix, len) = if first == "default" {
        match via {
            Some(IpAddr::V6(_)) => (IpAddr::V6(Ipv6Addr::UNSPECIFIED), 0),
            _ => (IpAddr::V4(Ipv4Addr::UNSPECIFIED), 0),
        }
    } else {
        let (a, l) = first.split_once('/').unwrap_or((first, ""));
        let addr: IpAddr = a.parse().map_err(|_| format!("`{a}` is not an IP address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = if l.is_empty() {
            max
        } else {
            l.parse::<u8>()
                .ok()
                .filter(|n| *n <= max)
                .ok_or_else(|| format!("`/{l}` is not a prefix length 0..={max}"))?
        };
        (addr, len)
    };
    if let Some(v) = via
        && v.is_ipv4() != prefix.is_ipv4()
    {
        return Err(format!(
            "`{line}`: the next hop and the prefix are of different IP versions"
        ));
    }
    Ok(RouteLine { prefix, len, via, port })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::lpm::SplitMix;
    use crate::testutil::run_one_batch;
    use sfclab_core::{Batch, Emitted, PacketPool, Verdict};

    fn router(routes: &[&str]) -> Router {
        Router::new(&RouterConfig {
            routes: routes.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        })
        .unwrap()
    }

    fn v4(dst: [u8; 4], ttl: u8) -> Vec<u8> {
        let mut out = Vec::new();
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xaa], [2, 0, 0, 0, 0, 0xbb])
            .ipv4([198, 18, 0, 1], dst, ttl)
            .udp(1024, 5001)
            .write(&mut out, &[0u8; 18])
            .unwrap();
        out
    }

    fn v6(dst: &str, hop_limit: u8) -> Vec<u8> {
        let mut out = Vec::new();
        let dst: Ipv6Addr = dst.parse().unwrap();
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xaa], [2, 0, 0, 0, 0, 0xbb])
            .ipv6(
                "2001:2::1".parse::<Ipv6Addr>().unwrap().octets(),
                dst.octets(),
                hop_limit,
            )
            .udp(1024, 5001)
            .write(&mut out, &[0u8; 18])
            .unwrap();
        out
    }

    #[test]
    fn forwards_by_longest_prefix_with_ttl_and_checksum_rfc1624() {
        let mut r = router(&[
            "10.0.0.0/8 192.0.2.1 0",
            "10.1.0.0/16 192.0.2.2 1",
            "203.0.113.0/24 - 1",
        ]);
        let frames = [v4([10, 9, 9, 9], 64), v4([10, 1, 2, 3], 64), v4([203, 0, 113, 7], 2)];
        let (out, verdicts) = run_one_batch(&mut r, &frames);
        assert_eq!(verdicts, vec![Verdict::Continue, Verdict::Out(1), Verdict::Out(1)]);
        assert_eq!(&out[0][..6], &[2, 0, 192, 0, 2, 1], "next hop's derived MAC");
        assert_eq!(&out[0][6..12], &[2, 0, 0, 0, 1, 0], "port 0's MAC");
        assert_eq!(&out[1][..6], &[2, 0, 192, 0, 2, 2]);
        assert_eq!(
            &out[2][..6],
            &[2, 0, 203, 0, 113, 7],
            "on the link: the destination's own MAC"
        );
        for (o, f) in out.iter().zip(&frames) {
            assert_eq!(o[22], f[22] - 1, "TTL decremented");
            assert!(Ipv4Header::checksum_ok(&o[14..34]), "checksum updated incrementally");
            assert_eq!(&o[34..], &f[34..], "payload untouched");
        }
        // QinQ frames are routed through the parser step, the tags kept.
        let mut qinq = v4([10, 1, 2, 3], 64);
        qinq.splice(12..12, [0x88, 0xa8, 0, 1, 0x81, 0x00, 0, 2]);
        let (out, verdicts) = run_one_batch(&mut r, std::slice::from_ref(&qinq));
        assert_eq!(verdicts, vec![Verdict::Out(1)]);
        assert_eq!(&out[0][..6], &[2, 0, 192, 0, 2, 2]);
        assert_eq!(&out[0][12..20], &qinq[12..20], "tags kept");
        assert_eq!(out[0][22 + 8], 63, "TTL decremented behind the tags");
        assert!(Ipv4Header::checksum_ok(&out[0][22..42]));
        // Each packet carries the next hop it was given, numbered in table order.
        let mut hops = Vec::new();
        crate::testutil::run_inspecting(&mut r, &frames, 0, |p| hops.push(p.notes.get(Note::NEXT_HOP)));
        assert_eq!(hops, [Some(0), Some(1), Some(2)]);
    }

    #[test]
    fn ipv6_hop_limit_and_routes() {
        let mut r = router(&["2001:db8::/32 fe80::1 0", "2001:db8:1::/48 - 2"]);
        let (out, verdicts) = run_one_batch(
            &mut r,
            &[v6("2001:db8::9", 64), v6("2001:db8:1::5", 64), v6("2001:db9::1", 64)],
        );
        assert_eq!(verdicts[0], Verdict::Continue);
        assert_eq!(verdicts[1], Verdict::Out(2));
        assert_eq!(verdicts[2], Verdict::Drop(DropReason::NO_ROUTE));
        assert_eq!((out[0][21], out[1][21]), (63, 63));
        assert_eq!(&out[0][..6], &[2, 0, 0, 0, 0, 1], "fe80::1's derived MAC");
    }

    #[test]
    fn bad_packets_are_counted_drops_never_panics() {
        let mut r = router(&["0.0.0.0/0 192.0.2.1 0"]);
        let mut bad_sum = v4([1, 2, 3, 4], 64);
        bad_sum[24] ^= 0xff;
        let mut arp = v4([1, 2, 3, 4], 64);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let mut short_total = v4([1, 2, 3, 4], 64);
        short_total[16..18].copy_from_slice(&[0x00, 0x10]);
        let (_, verdicts) = run_one_batch(
            &mut r,
            &[
                bad_sum,
                arp,
                vec![0; 13],
                v4([1, 2, 3, 4], 64)[..30].to_vec(),
                short_total,
            ],
        );
        assert_eq!(
            verdicts,
            vec![
                Verdict::Drop(BAD_CHECKSUM),
                Verdict::Drop(DropReason::UNSUPPORTED),
                Verdict::Drop(DropReason::MALFORMED),
                Verdict::Drop(DropReason::MALFORMED),
                Verdict::Drop(DropReason::MALFORMED),
            ]
        );
    }

    /// TTL 1: dropped as ttl-expired, and an ICMP time exceeded goes back to the source
    /// by the source's route (RFC 1812 §5.3.1), within the rate limit.
    #[test]
    fn ttl_expiry_sends_time_exceeded_rate_limited() {
        let mut r = Router::new(&RouterConfig {
            routes: vec!["198.18.0.0/15 192.0.2.9 1".into(), "10.0.0.0/8 192.0.2.1 0".into()],
            icmp_rate: Some(20),
            ..Default::default()
        })
        .unwrap();
        let mut pool = PacketPool::new(64);
        let mut batch = Batch::new(8);
        pool.alloc_into(&mut batch, 8);
        let frame = v4([10, 0, 0, 1], 1);
        for p in batch.iter_mut() {
            p.reset(frame.len()).copy_from_slice(&frame);
        }
        let mut verdicts = Verdicts::for_batch(8);
        let mut emitted = Emitted::default();
        let mut ctx = sfclab_core::ChainContext::new(0, 0, 1.0, &mut pool, &mut emitted);
        r.process(ctx.nf(), BatchView::new(&mut batch), &mut verdicts);
        assert!((0..8).all(|i| verdicts.get(i) == Verdict::Drop(DropReason::TTL_EXPIRED)));
        // Burst of a tenth of a second's worth: 2 of 20/s.
        assert_eq!((r.counts.icmp_sent, r.counts.icmp_rate_limited), (2, 6));
        let sent: Vec<(sfclab_core::PacketRef, u8)> = emitted.drain().collect();
        assert_eq!(sent.len(), 2);
        for (p, port) in sent {
            assert_eq!(port, 1, "the source's route");
            let f = p.data().to_vec();
            pool.free(p);
            assert_eq!(&f[..6], &[2, 0, 192, 0, 2, 9]);
            let ip = etherparse::SlicedPacket::from_ethernet(&f).unwrap();
            let Some(etherparse::TransportSlice::Icmpv4(icmp)) = ip.transport else {
                panic!()
            };
            assert!(matches!(icmp.icmp_type(), etherparse::Icmpv4Type::TimeExceeded(_)));
            assert!(Ipv4Header::checksum_ok(&f[14..34]));
            assert_eq!(
                &f[14 + 12..14 + 20],
                &[192, 0, 2, 254, 198, 18, 0, 1],
                "router -> source"
            );
        }
        pool.free_batch(&mut batch);
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn route_lines_and_ip_route_output() {
        let mut devices = Vec::new();
        let r = parse_route("default via 192.168.1.1 dev eth0 proto dhcp metric 100", &mut devices).unwrap();
        assert_eq!((r.len, r.port), (0, 0));
        let r = parse_route("10.0.0.0/8 via 10.1.1.1 dev eth1", &mut devices).unwrap();
        assert_eq!((r.len, r.port, r.via), (8, 1, Some("10.1.1.1".parse().unwrap())));
        let r = parse_route(
            "192.168.1.0/24 dev eth0 proto kernel scope link src 192.168.1.10",
            &mut devices,
        )
        .unwrap();
        assert_eq!((r.port, r.via), (0, None));
        let r = parse_route("2001:db8::/32 via fe80::1 dev eth1 metric 1024", &mut devices).unwrap();
        assert_eq!((r.len, r.port), (32, 1));
        for bad in [
            "10.0.0.0/33 - 0",
            "10.0.0.0/8 fe80::1 0",
            "10.0.0.0/8 x 0",
            "nonsense",
            "10.0.0.0/8 - 200",
        ] {
            assert!(parse_route(bad, &mut devices).is_err(), "{bad}");
        }
        let e = Router::new(&RouterConfig {
            routes: vec!["1.0.0.0/8 - 0".into(), "oops".into()],
            ..Default::default()
        })
        .err()
        .unwrap();
        assert_eq!(e.key, "routes[1]");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Random frames and valid frames with random bytes changed: never a panic, and
        /// every packet gets a verdict the router declares.
        #[test]
        fn any_frame_is_forwarded_or_dropped_with_a_reason(
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..120),
            flips in proptest::collection::vec((0usize..80, proptest::prelude::any::<u8>()), 0..6),
        ) {
            let mut r = Router::new(&RouterConfig {
                routes: vec!["1.2.3.0/24 192.0.2.1 1".into(), "2001:db8::/32 fe80::1 0".into()],
                ..Default::default()
            }).unwrap();
            let mut mutated = if flips.len() % 2 == 0 { v4([1, 2, 3, 4], 9) } else { v6("2001:db8::1", 9) };
            for (at, b) in flips {
                if let Some(x) = mutated.get_mut(at) {
                    *x = b;
                }
            }
            let (_, verdicts) = run_one_batch(&mut r, &[junk, mutated]);
            for v in verdicts {
                proptest::prop_assert!(matches!(v, Verdict::Continue | Verdict::Out(1) | Verdict::Drop(_)), "{v:?}");
            }
        }
    }

    #[test]
    fn generated_tables_route_random_destinations() {
        let r = Router::new(&RouterConfig {
            generate: Some(GenerateRoutes {
                ipv4: 50_000,
                ipv6: 5_000,
                seed: Some(7),
            }),
            ports: Some(4),
            ..Default::default()
        })
        .unwrap();
        assert_eq!(r.outputs().len(), 4);
        let mut rng = SplitMix(3);
        let hits = (0..10_000).filter(|_| r.v4.lookup(rng.next() as u32).is_some()).count();
        // 50k BGP-shaped routes cover a share of the space (the /16s and shorter).
        assert!(hits > 500, "{hits} of 10000 random destinations have a route");
    }
}
