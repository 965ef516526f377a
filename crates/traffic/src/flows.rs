//! Flow templates: the first 64 bytes of every flow's frame, built once, stamped into
//! buffers by the generator. Flow `i` varies the source address (and, past 65536
//! flows, the source port), in the benchmarking ranges 198.18.0.0/15 (RFC 2544) and
//! 2001:2::/48 (RFC 5180), so traffic never names a real host.
//!
//! Payload bytes follow a fixed pattern (`pattern_byte`): the pool is primed with it
//! once and templates carry it, so checksums of every (flow, size) are known up front
//! and a size change costs four 16-bit stores (`Patch`), not a checksum pass.

use serde::Serialize;
use sfclab_wire::checksum;
use sfclab_wire::{EthernetRepr, FrameRepr, IpRepr, MacAddr, TransportRepr};

/// The Ethernet addresses of every generated frame. A device under test answers to the
/// destination (a Linux forwarding namespace is given it as its ingress address).
pub const SRC_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
pub const DST_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 2]);

/// Most flows a generator keeps templates for (64 MiB of templates).
pub const MAX_FLOWS: u32 = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum IpVersion {
    #[default]
    V4,
    V6,
}

impl std::fmt::Display for IpVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            IpVersion::V4 => "ipv4",
            IpVersion::V6 => "ipv6",
        })
    }
}

impl std::str::FromStr for IpVersion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "v4" | "4" | "ipv4" => Ok(IpVersion::V4),
            "v6" | "6" | "ipv6" => Ok(IpVersion::V6),
            _ => Err(format!("`{s}` is not an IP version: write v4 or v6")),
        }
    }
}

/// The transport of generated flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum L4 {
    /// UDP datagrams.
    #[default]
    Udp,
    /// TCP sessions: SYN, data (PSH+ACK), FIN+ACK, then the next session on a new port.
    Tcp,
}

impl std::fmt::Display for L4 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            L4::Udp => "udp",
            L4::Tcp => "tcp",
        })
    }
}

impl std::str::FromStr for L4 {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "udp" => Ok(L4::Udp),
            "tcp" => Ok(L4::Tcp),
            _ => Err(format!("`{s}` is not a transport: write udp or tcp")),
        }
    }
}

impl L4 {
    pub fn is_udp(&self) -> bool {
        *self == L4::Udp
    }

    pub fn protocol(self) -> u8 {
        match self {
            L4::Udp => 17,
            L4::Tcp => 6,
        }
    }

    fn header_len(self) -> usize {
        match self {
            L4::Udp => 8,
            L4::Tcp => 20,
        }
    }
}

/// The TCP flags of the templates (data segments): PSH+ACK.
pub const TEMPLATE_FLAGS: u8 = 0x18;

impl IpVersion {
    /// Ethernet + IP + transport header bytes.
    pub fn header_len(self, l4: L4) -> usize {
        match self {
            IpVersion::V4 => 14 + 20 + l4.header_len(),
            IpVersion::V6 => 14 + 40 + l4.header_len(),
        }
    }

    /// Offset of the transport header.
    pub fn l4_offset(self) -> usize {
        match self {
            IpVersion::V4 => 34,
            IpVersion::V6 => 54,
        }
    }

    /// Smallest frame (FCS included) that holds the headers.
    pub fn min_frame(self, l4: L4) -> u16 {
        (self.header_len(l4) + crate::FCS_LEN).max(64) as u16
    }

    /// Offsets of (L3 length, IPv4 checksum, UDP length, L4 checksum) in the frame; IPv6
    /// has no header checksum and TCP no length, so their slots repeat another field
    /// with its own value.
    pub(crate) fn patch_offsets(self, l4: L4) -> [usize; 4] {
        match (self, l4) {
            (IpVersion::V4, L4::Udp) => [16, 24, 38, 40],
            (IpVersion::V6, L4::Udp) => [18, 58, 58, 60],
            (IpVersion::V4, L4::Tcp) => [16, 24, 24, 50],
            (IpVersion::V6, L4::Tcp) => [18, 18, 18, 70],
        }
    }
}

/// Payload byte at frame offset `k`.
#[inline]
pub fn pattern_byte(k: usize) -> u8 {
    (k as u8) ^ 0x5a
}

/// The DSCPs flows carry: flow k takes the k-th mod their number (`ef,af11,0`: a third
/// of the flows each). Empty: every flow 0 (best effort).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, schemars::JsonSchema)]
#[serde(transparent)]
pub struct DscpMix(pub Vec<u8>);

impl DscpMix {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Flow `k`'s DSCP.
    pub fn of(&self, k: u32) -> u8 {
        if self.0.is_empty() {
            0
        } else {
            self.0[k as usize % self.0.len()]
        }
    }
}

impl std::str::FromStr for DscpMix {
    type Err = String;
    /// Comma-separated DSCPs by number or name (`ef`, `af41`, `cs1`, `be`).
    fn from_str(s: &str) -> Result<DscpMix, String> {
        s.split(',')
            .map(sfclab_wire::dscp::parse)
            .collect::<Result<_, _>>()
            .map(DscpMix)
    }
}

/// As `FromStr` reads it; no mix (every flow best effort) is written `0`, so that the
/// text of every mix reads back as a mix that marks flows alike.
impl std::fmt::Display for DscpMix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.is_empty() {
            return f.write_str("0");
        }
        let list: Vec<String> = self.0.iter().map(u8::to_string).collect();
        f.write_str(&list.join(","))
    }
}

/// Where flows are sent.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Destinations {
    /// Every flow to one address in the benchmarking range (198.19.0.1, 2001:2:0:1::1),
    /// as RFC 2544 tests do.
    #[default]
    One,
    /// Each flow to its own pseudo-random unicast address (1.0.0.0-223.255.255.255, or
    /// under 2000::/3): what a router's longest-prefix match sees on the Internet.
    Spread,
    /// Flows spread over these IPv4 prefixes (flow i to prefix i mod n, a pseudo-random
    /// host inside it): a routing table's prefixes, or any list, as `a.b.c.d/len`.
    Prefixes(Vec<String>),
    /// The IPv4 prefixes of the chain's first router (its routes, routes file and
    /// generated table): a chain resolves this into `Prefixes` before it runs.
    Router,
}

impl Destinations {
    /// The prefixes of `Prefixes`, parsed (address masked to its length).
    pub fn prefixes(&self) -> Result<Vec<(u32, u8)>, String> {
        let list = match self {
            Destinations::Prefixes(list) => list,
            Destinations::Router => {
                return Err("`router` needs a router in the chain, whose IPv4 table it names".into());
            }
            _ => return Ok(Vec::new()),
        };
        if list.is_empty() {
            return Err("give at least one prefix".into());
        }
        list.iter()
            .map(|p| {
                let (a, l) = p.split_once('/').unwrap_or((p, "32"));
                let addr: std::net::Ipv4Addr = a
                    .trim()
                    .parse()
                    .map_err(|_| format!("`{p}`: `{a}` is not an IPv4 address"))?;
                let len: u8 = l
                    .trim()
                    .parse()
                    .ok()
                    .filter(|l| *l <= 32)
                    .ok_or_else(|| format!("`{p}`: the length is not 0..=32"))?;
                let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
                Ok((u32::from(addr) & mask, len))
            })
            .collect()
    }
}

impl std::str::FromStr for Destinations {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        match t.to_ascii_lowercase().as_str() {
            "one" => return Ok(Destinations::One),
            "spread" => return Ok(Destinations::Spread),
            "router" => return Ok(Destinations::Router),
            _ => {}
        }
        if t.contains('/') || t.contains('.') {
            let d = Destinations::Prefixes(t.split(',').map(|p| p.trim().to_string()).collect());
            d.prefixes()?;
            return Ok(d);
        }
        Err(format!(
            "`{s}` is not a destination pattern: write one, spread, router (the chain's routing table), or IPv4 prefixes like 10.0.0.0/8,192.0.2.0/24"
        ))
    }
}

impl std::fmt::Display for Destinations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Destinations::One => f.write_str("one"),
            Destinations::Spread => f.write_str("spread"),
            Destinations::Prefixes(list) => f.write_str(&list.join(",")),
            Destinations::Router => f.write_str("router"),
        }
    }
}

/// SplitMix64's finaliser: flow `i`'s spread destination.
fn spread(i: u32, salt: u64) -> u64 {
    let mut z = (u64::from(i) ^ salt).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Source and destination addresses and ports of flow `i`; `prefixes`: those of
/// `Destinations::Prefixes`, parsed.
pub fn flow_tuple(
    ip: IpVersion,
    i: u32,
    destinations: &Destinations,
    prefixes: &[(u32, u8)],
) -> (Vec<u8>, Vec<u8>, u16, u16) {
    let sport = 1024 + (i >> 16) as u16;
    let dport = 5001;
    match ip {
        IpVersion::V4 => {
            let [_, _, hi, lo] = i.to_be_bytes();
            let dst = match destinations {
                Destinations::One => vec![198, 19, 0, 1],
                Destinations::Prefixes(_) | Destinations::Router => {
                    let (net, len) = prefixes[i as usize % prefixes.len()];
                    let host = if len == 32 {
                        0
                    } else {
                        spread(i, 5) as u32 & (u32::MAX >> len)
                    };
                    (net | host).to_be_bytes().to_vec()
                }
                Destinations::Spread => {
                    let r = spread(i, 4).to_be_bytes();
                    // Unicast, not 0/8 or 127/8: first byte 1..=223 but 127.
                    let first = 1 + (r[0] % 222);
                    vec![if first == 127 { 128 } else { first }, r[1], r[2], r[3]]
                }
            };
            (vec![198, 18, hi, lo], dst, sport, dport)
        }
        IpVersion::V6 => {
            let mut src = [0u8; 16];
            src[..6].copy_from_slice(&[0x20, 0x01, 0x00, 0x02, 0x00, 0x00]);
            src[12..].copy_from_slice(&i.to_be_bytes());
            let mut dst = [0u8; 16];
            match destinations {
                Destinations::One | Destinations::Prefixes(_) | Destinations::Router => {
                    dst[..8].copy_from_slice(&[0x20, 0x01, 0x00, 0x02, 0x00, 0x00, 0x00, 0x01]);
                    dst[15] = 1;
                }
                Destinations::Spread => {
                    dst[..8].copy_from_slice(&spread(i, 6).to_be_bytes());
                    dst[8..].copy_from_slice(&spread(i, 7).to_be_bytes());
                    dst[0] = 0x20 | (dst[0] & 0x1f);
                }
            }
            (src.to_vec(), dst.to_vec(), sport, dport)
        }
    }
}

/// Values for the four patch offsets of one (flow, size), big-endian.
pub type Patch = [[u8; 2]; 4];

/// Templates for `flows` flows at a set of frame lengths.
pub struct FlowSet {
    pub(crate) ip: IpVersion,
    pub(crate) l4: L4,
    /// First 64 bytes of each flow's frame, patched for the first length.
    pub(crate) heads: Box<[[u8; 64]]>,
    /// Each flow's hash; as many as `heads`.
    pub(crate) hashes: Box<[u32]>,
    /// `patches[flow * classes + class]`, one per flow and size class.
    pub(crate) patches: Box<[Patch]>,
}

impl FlowSet {
    /// `frame_lens`: buffer lengths (FCS excluded), each at least `ip.header_len(l4)`.
    /// TCP templates are data segments (PSH+ACK, sequence 0, acknowledgment 1): the
    /// generator rewrites flags, sequence and port per packet, checksum incrementally.
    pub fn new(
        ip: IpVersion,
        l4: L4,
        flows: u32,
        frame_lens: &[u16],
        destinations: &Destinations,
        dscp: &DscpMix,
    ) -> FlowSet {
        Self::directed(ip, l4, flows, frame_lens, destinations, dscp, false)
    }

    /// As [`FlowSet::new`]; with `reverse`, every flow the other way: its addresses,
    /// ports and MACs swapped (a bidirectional test's way back).
    pub fn directed(
        ip: IpVersion,
        l4: L4,
        flows: u32,
        frame_lens: &[u16],
        destinations: &Destinations,
        dscp: &DscpMix,
        reverse: bool,
    ) -> FlowSet {
        assert!((1..=MAX_FLOWS).contains(&flows));
        assert!(ip == IpVersion::V4 || l4 == L4::Udp, "TCP templates are IPv4 only");
        let hlen = ip.header_len(l4);
        assert!(frame_lens.iter().all(|&l| usize::from(l) >= hlen));
        // Sum of the payload pattern for each length (same for every flow).
        let payload_sums: Vec<u32> = frame_lens
            .iter()
            .map(|&l| {
                let bytes: Vec<u8> = (hlen..usize::from(l)).map(pattern_byte).collect();
                // The payload starts at an even offset (42, 54 or 62), so word alignment holds.
                checksum::sum(0, &bytes)
            })
            .collect();
        let offsets = ip.patch_offsets(l4);
        let prefixes = destinations.prefixes().expect("destinations are checked before");
        assert!(
            ip == IpVersion::V4 || prefixes.is_empty(),
            "destination prefixes are IPv4"
        );
        let mut heads = Vec::with_capacity(flows as usize);
        let mut hashes = Vec::with_capacity(flows as usize);
        let mut patches = Vec::with_capacity(flows as usize * frame_lens.len());
        for i in 0..flows {
            let (mut src, mut dst, mut sport, mut dport) = flow_tuple(ip, i, destinations, &prefixes);
            let (mut src_mac, mut dst_mac) = (SRC_MAC, DST_MAC);
            if reverse {
                std::mem::swap(&mut src, &mut dst);
                std::mem::swap(&mut sport, &mut dport);
                std::mem::swap(&mut src_mac, &mut dst_mac);
            }
            let mut head = [0u8; 64];
            for (k, b) in head.iter_mut().enumerate() {
                *b = pattern_byte(k);
            }
            let frame = FrameRepr {
                ethernet: EthernetRepr {
                    src: src_mac,
                    dst: dst_mac,
                    vlan_tci: None,
                },
                ip: match ip {
                    IpVersion::V4 => IpRepr::v4(src[..4].try_into().unwrap(), dst[..4].try_into().unwrap()),
                    IpVersion::V6 => IpRepr::v6(src[..].try_into().unwrap(), dst[..].try_into().unwrap()),
                }
                .with_dscp(dscp.of(i)),
                transport: match l4 {
                    L4::Udp => TransportRepr::Udp {
                        src_port: sport,
                        dst_port: dport,
                    },
                    L4::Tcp => TransportRepr::Tcp {
                        src_port: sport,
                        dst_port: dport,
                        seq: 0,
                        ack: 1,
                        flags: u16::from(TEMPLATE_FLAGS),
                        window: 65535,
                    },
                },
            };
            debug_assert_eq!(frame.header_len(), hlen);
            // Each size's headers, written whole; the patch keeps the fields that differ,
            // and the template is the first size's head.
            let mut first = None;
            for (c, &len) in frame_lens.iter().enumerate() {
                let mut h = head;
                frame
                    .emit_headers(&mut h, usize::from(len) - hlen, payload_sums[c])
                    .expect("headers fit the 64-byte head");
                patches.push(offsets.map(|o| [h[o], h[o + 1]]));
                first.get_or_insert(h);
            }
            heads.push(first.expect("at least one frame length"));
            hashes.push(sfclab_wire::flow::hash(&src, &dst, sport, dport, l4.protocol()));
        }
        FlowSet {
            ip,
            l4,
            heads: heads.into_boxed_slice(),
            hashes: hashes.into_boxed_slice(),
            patches: patches.into_boxed_slice(),
        }
    }

    pub fn flows(&self) -> usize {
        self.heads.len()
    }
}

#[inline(always)]
pub(crate) fn apply_patch(frame: &mut [u8], offsets: [usize; 4], patch: &Patch) {
    for (off, v) in offsets.iter().zip(patch) {
        frame[*off..*off + 2].copy_from_slice(v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dscp_mix_reads_back_from_its_text_marking_flows_alike() {
        for mix in [DscpMix::default(), "ef,af41,be".parse().unwrap(), "46".parse().unwrap()] {
            let back: DscpMix = mix.to_string().parse().unwrap();
            assert!(
                (0..8).all(|k| back.of(k) == mix.of(k)),
                "{mix:?} -> `{mix}` -> {back:?}"
            );
        }
    }

    /// Builds the full frame of (flow, class) the way the generator does and checks it
    /// with etherparse, which computes its own checksums.
    fn frame(set: &FlowSet, lens: &[u16], flow: usize, class: usize) -> Vec<u8> {
        let len = usize::from(lens[class]);
        let mut f: Vec<u8> = (0..len.max(64)).map(pattern_byte).collect();
        f[..64].copy_from_slice(&set.heads[flow]);
        apply_patch(
            &mut f,
            set.ip.patch_offsets(set.l4),
            &set.patches[flow * lens.len() + class],
        );
        f.truncate(len);
        f
    }

    #[test]
    fn every_flow_and_size_has_valid_checksums() {
        for ip in [IpVersion::V4, IpVersion::V6] {
            let lens = [ip.min_frame(L4::Udp) - 4, 590, 1514];
            let set = FlowSet::new(ip, L4::Udp, 70_000, &lens, &Destinations::Spread, &DscpMix::default());
            for flow in [0usize, 1, 255, 65_535, 65_536, 69_999] {
                for class in 0..lens.len() {
                    let f = frame(&set, &lens, flow, class);
                    let sliced = etherparse::SlicedPacket::from_ethernet(&f).unwrap();
                    let Some(etherparse::TransportSlice::Udp(udp)) = sliced.transport else {
                        panic!("not UDP")
                    };
                    match sliced.net.unwrap() {
                        etherparse::NetSlice::Ipv4(v4) => {
                            let h = v4.header();
                            assert_eq!(h.header_checksum(), h.to_header().calc_header_checksum());
                            assert_eq!(usize::from(h.total_len()), f.len() - 14);
                            let expect = udp
                                .to_header()
                                .calc_checksum_ipv4_raw(h.source(), h.destination(), udp.payload())
                                .unwrap();
                            assert_eq!(udp.checksum(), expect, "{ip} flow {flow} class {class}");
                        }
                        etherparse::NetSlice::Ipv6(v6) => {
                            let h = v6.header();
                            let expect = udp
                                .to_header()
                                .calc_checksum_ipv6_raw(h.source(), h.destination(), udp.payload())
                                .unwrap();
                            assert_eq!(udp.checksum(), expect, "{ip} flow {flow} class {class}");
                        }
                        _ => panic!("not IP"),
                    }
                    assert_eq!(usize::from(udp.length()), f.len() - ip.header_len(L4::Udp) + 8);
                }
            }
        }
    }

    /// `Prefixes`: flow i goes to prefix i mod n, to a host inside it; the text form
    /// round-trips and bad prefixes are named.
    #[test]
    fn destinations_spread_over_given_prefixes() {
        let d: Destinations = "10.0.0.0/8, 192.0.2.0/24,203.0.113.7".parse().unwrap();
        assert_eq!(d.to_string(), "10.0.0.0/8,192.0.2.0/24,203.0.113.7");
        assert_eq!(d.to_string().parse::<Destinations>().unwrap(), d);
        let set = FlowSet::new(IpVersion::V4, L4::Udp, 300, &[60], &d, &DscpMix::default());
        let mut hosts = std::collections::HashSet::new();
        for (i, head) in set.heads.iter().enumerate() {
            let dst = [head[30], head[31], head[32], head[33]];
            match i % 3 {
                0 => assert_eq!(dst[0], 10, "flow {i}"),
                1 => assert_eq!(&dst[..3], &[192, 0, 2], "flow {i}"),
                _ => assert_eq!(dst, [203, 0, 113, 7], "flow {i}"),
            }
            hosts.insert(dst);
        }
        assert!(hosts.len() > 150, "hosts differ inside a prefix: {}", hosts.len());
        for bad in ["10.0.0.0/33", "10.0.0/8", "one-ish"] {
            assert!(bad.parse::<Destinations>().is_err(), "{bad}");
        }
    }

    #[test]
    fn flows_differ_in_their_five_tuple_and_hash() {
        let set = FlowSet::new(
            IpVersion::V4,
            L4::Udp,
            1000,
            &[60],
            &Destinations::One,
            &DscpMix::default(),
        );
        let mut hashes = set.hashes.to_vec();
        hashes.sort();
        hashes.dedup();
        assert_eq!(hashes.len(), 1000);
        assert_eq!(&set.heads[3][26..30], &[198, 18, 0, 3]);
        // Hashes spread evenly over replicas the way the runtime shards them (high bits):
        // each of k shards gets its share within +-25%.
        for shards in [2, 3, 4, 8] {
            let share = 1000 / shards;
            for b in 0..shards {
                let n = set
                    .hashes
                    .iter()
                    .filter(|&&h| sfclab_core::packet::shard_of(h, shards) == b)
                    .count();
                assert!(n.abs_diff(share) <= share / 4, "{shards} shards: shard {b} has {n}");
            }
        }
    }
}
