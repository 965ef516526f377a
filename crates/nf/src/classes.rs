//! Traffic classes as the `qos` and `shaper` NFs pick them: by DSCP, by a 5-tuple rule,
//! or both (first class that matches wins); the IP header facts they need (DSCP, the
//! datagram's length, the 5-tuple) read once per packet; DSCP rewritten in place with
//! the IPv4 checksum fixed (RFC 1624); rates written as operators write them.

use serde::{Deserialize, Serialize};
use sfclab_core::{DropReason, Packet};
use sfclab_wire::Network;

use crate::ConfigError;
use crate::tables::acl::{Key, Match};

/// Which packets a class takes: every field given must match (none given: all IP
/// packets).
#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MatchConfig {
    /// DSCP values, as numbers (0..=63) or names (`ef`, `af11`..`af43`, `cs0`..`cs7`,
    /// `be`, `va`, `le`). IPv4 and IPv6.
    pub dscp: Option<Vec<Dscp>>,
    /// `tcp`, `udp`, `icmp`, a protocol number, or `any`. This and the fields below are
    /// an IPv4 5-tuple rule, as the firewall's.
    pub proto: Option<String>,
    /// Source prefix.
    pub src: Option<String>,
    /// Destination prefix.
    pub dst: Option<String>,
    /// Source ports, `n` or `lo-hi`.
    pub sport: Option<String>,
    /// Destination ports, `n` or `lo-hi`.
    pub dport: Option<String>,
}

/// A DSCP value (RFC 2474), written as a number or a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(try_from = "DscpRepr", into = "u8")]
pub struct Dscp(pub u8);

impl From<Dscp> for u8 {
    fn from(d: Dscp) -> u8 {
        d.0
    }
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum DscpRepr {
    Number(u8),
    Name(String),
}

impl TryFrom<DscpRepr> for Dscp {
    type Error = String;
    fn try_from(r: DscpRepr) -> Result<Dscp, String> {
        match r {
            DscpRepr::Number(n) if n < 64 => Ok(Dscp(n)),
            DscpRepr::Number(n) => Err(format!("DSCP {n} is past 63")),
            DscpRepr::Name(s) => s.parse(),
        }
    }
}

impl std::str::FromStr for Dscp {
    type Err = String;
    /// As [`sfclab_wire::dscp::parse`] reads it.
    fn from_str(s: &str) -> Result<Dscp, String> {
        sfclab_wire::dscp::parse(s).map(Dscp)
    }
}

/// A name counters can carry: non-empty letters, digits, `-` and `_`.
pub fn check_name(key: &str, name: &str) -> Result<(), ConfigError> {
    if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_') {
        return Err(ConfigError::new(
            key,
            format!("`{name}` is not a class name: use letters, digits, `-` and `_`"),
        ));
    }
    Ok(())
}

/// One class's match, compiled: a set of DSCPs (one bit each) and an optional rule.
#[derive(Debug, Clone, Copy)]
struct ClassMatch {
    dscp: u64,
    rule: Option<Match>,
}

/// Classes in order; `classify` gives the first that matches.
#[derive(Debug, Clone, Default)]
pub struct Classifier {
    classes: Vec<ClassMatch>,
}

impl Classifier {
    /// Compiles each class's match; `key(k)` names class k's `match` in errors.
    pub fn new<'a>(
        matches: impl IntoIterator<Item = &'a MatchConfig>,
        key: impl Fn(usize) -> String,
    ) -> Result<Classifier, ConfigError> {
        let mut classes = Vec::new();
        for (k, m) in matches.into_iter().enumerate() {
            let dscp = match &m.dscp {
                None => u64::MAX,
                Some(list) if list.is_empty() => {
                    return Err(ConfigError::new(format!("{}.dscp", key(k)), "lists no DSCP"));
                }
                Some(list) => list.iter().fold(0, |set, d| set | 1 << d.0),
            };
            let any_rule_field = [&m.proto, &m.src, &m.dst, &m.sport, &m.dport]
                .iter()
                .any(|f| f.is_some());
            let rule = if any_rule_field {
                Some(
                    Match::from_fields(
                        m.proto.as_deref(),
                        m.src.as_deref(),
                        m.dst.as_deref(),
                        m.sport.as_deref(),
                        m.dport.as_deref(),
                    )
                    .map_err(|(field, why)| ConfigError::new(format!("{}.{field}", key(k)), why))?,
                )
            } else {
                None
            };
            classes.push(ClassMatch { dscp, rule });
        }
        Ok(Classifier { classes })
    }

    /// The first class that takes the packet, if any.
    #[inline(always)]
    pub fn classify(&self, ip: &IpFacts) -> Option<usize> {
        // None for an empty list without a call (a `bypass` nobody wrote).
        if self.classes.is_empty() {
            return None;
        }
        self.classes
            .iter()
            .position(|c| c.dscp & (1 << ip.dscp) != 0 && c.rule.is_none_or(|r| ip.key.is_some_and(|k| r.matches(&k))))
    }
}

/// What the QoS NFs read of an IP packet.
#[derive(Debug, Clone, Copy)]
pub struct IpFacts {
    /// Offset of the IP header.
    pub l3: usize,
    pub v6: bool,
    pub dscp: u8,
    /// The datagram's length in bytes, header included: what meters and shapers count
    /// (Ethernet framing and padding are not traffic of the class).
    pub len: u32,
    /// The IPv4 5-tuple (ports 0 past the first fragment or for other protocols).
    pub key: Option<Key>,
}

/// The packet's IP facts; `Ok(None)` for a frame that is not IP (ARP, LLDP: no class of
/// traffic to police), `Err(malformed)` for one whose IP headers contradict the frame.
/// Inlined into every caller: returned through memory, its fields would be read back
/// before the stores that wrote them could forward (a stall of its own per packet).
#[inline(always)]
pub fn ip_facts(p: &mut Packet) -> Result<Option<IpFacts>, DropReason> {
    let layers = p.layers().map_err(|_| DropReason::MALFORMED)?;
    let l3 = layers.l3_offset();
    let l4 = layers.l4_offset();
    let protocol = layers.protocol();
    let data = p.data();
    match layers.network() {
        Network::Ipv4 => {
            let h = data.get(l3..l3 + 20).ok_or(DropReason::MALFORMED)?;
            let len = u32::from(u16::from_be_bytes([h[2], h[3]]));
            let end = l3 + len as usize;
            if end > data.len() {
                return Err(DropReason::MALFORMED);
            }
            let word = |at: usize| {
                data.get(at..at + 2)
                    .filter(|_| at + 2 <= end)
                    .map_or(0, |w| u16::from_be_bytes([w[0], w[1]]))
            };
            let (sport, dport) = match (protocol, l4) {
                (6 | 17 | 132, Some(l4)) => (word(l4), word(l4 + 2)),
                _ => (0, 0),
            };
            Ok(Some(IpFacts {
                l3,
                v6: false,
                dscp: h[1] >> 2,
                len,
                key: Some(Key {
                    src: u32::from_be_bytes([h[12], h[13], h[14], h[15]]),
                    dst: u32::from_be_bytes([h[16], h[17], h[18], h[19]]),
                    proto: protocol,
                    sport,
                    dport,
                }),
            }))
        }
        Network::Ipv6 => {
            let h = data.get(l3..l3 + 40).ok_or(DropReason::MALFORMED)?;
            let len = 40 + u32::from(u16::from_be_bytes([h[4], h[5]]));
            if l3 + len as usize > data.len() {
                return Err(DropReason::MALFORMED);
            }
            Ok(Some(IpFacts {
                l3,
                v6: true,
                dscp: traffic_class(data, l3, true) >> 2,
                len,
                key: None,
            }))
        }
        _ => Ok(None),
    }
}

/// Rewrites the packet's DSCP to `dscp`, keeping ECN; the IPv4 header checksum is
/// updated incrementally (RFC 1624). `ip` must be this packet's facts.
#[inline]
pub fn set_dscp(p: &mut Packet, ip: &IpFacts, dscp: u8) {
    let d = p.data_mut();
    let tc = traffic_class(d, ip.l3, ip.v6) & 0x03 | dscp << 2;
    set_traffic_class(d, ip.l3, ip.v6, tc);
}

/// The IP header's whole DSCP and ECN byte (IPv4's TOS, IPv6's traffic class) of the
/// header at `l3`.
#[inline]
pub fn traffic_class(data: &[u8], l3: usize, v6: bool) -> u8 {
    if v6 {
        // The low nibble of byte 0 and the high nibble of byte 1.
        (data[l3] << 4) | (data[l3 + 1] >> 4)
    } else {
        data[l3 + 1]
    }
}

/// Writes `tc` as the header's DSCP and ECN byte; IPv4's checksum is updated
/// incrementally (RFC 1624).
#[inline]
pub fn set_traffic_class(data: &mut [u8], l3: usize, v6: bool, tc: u8) {
    if v6 {
        data[l3] = (data[l3] & 0xf0) | tc >> 4;
        data[l3 + 1] = (data[l3 + 1] & 0x0f) | tc << 4;
    } else {
        let old = u16::from_be_bytes([data[l3], data[l3 + 1]]);
        data[l3 + 1] = tc;
        let new = u16::from_be_bytes([data[l3], data[l3 + 1]]);
        let check = u16::from_be_bytes([data[l3 + 10], data[l3 + 11]]);
        let check = sfclab_wire::checksum::update16(check, old, new);
        data[l3 + 10..l3 + 12].copy_from_slice(&check.to_be_bytes());
    }
}

/// A rate in bits per second, written as a number or with a unit: `10Mbit`, `1.5Gbit/s`,
/// `100kbps`, `10 Gbps` (k, M, G, T are powers of 1000; `bps` is bits per second).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(try_from = "RateRepr", into = "u64")]
pub struct Rate(pub u64);

impl Rate {
    /// Bytes per second.
    pub fn bytes_per_s(self) -> u64 {
        self.0 / 8
    }
}

impl From<Rate> for u64 {
    fn from(r: Rate) -> u64 {
        r.0
    }
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum RateRepr {
    Number(u64),
    Text(String),
}

impl TryFrom<RateRepr> for Rate {
    type Error = String;
    fn try_from(r: RateRepr) -> Result<Rate, String> {
        match r {
            RateRepr::Number(n) => Ok(Rate(n)),
            RateRepr::Text(s) => s.parse(),
        }
    }
}

impl std::str::FromStr for Rate {
    type Err = String;
    fn from_str(s: &str) -> Result<Rate, String> {
        let why = || format!("`{s}` is not a rate: write e.g. 10Mbit, 1.5Gbit/s, 100kbps or a number of bits/s");
        let t = s.trim();
        let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
        let (number, unit) = t.split_at(split);
        let number: f64 = number.parse().map_err(|_| why())?;
        let unit = unit.trim();
        let unit = unit.strip_suffix("/s").unwrap_or(unit);
        let unit = unit
            .strip_suffix("bit")
            .or_else(|| unit.strip_suffix("bps"))
            .or_else(|| unit.strip_suffix("b"))
            .unwrap_or(unit);
        let scale = match unit {
            "" => 1.0,
            "k" | "K" => 1e3,
            "M" => 1e6,
            "G" => 1e9,
            "T" => 1e12,
            _ => return Err(why()),
        };
        let bits = number * scale;
        if !bits.is_finite() || bits >= 1e15 {
            return Err(why());
        }
        Ok(Rate(bits.round() as u64))
    }
}

/// A token bucket in nano-bytes (one byte is 10^9): refilled by elapsed nanoseconds
/// times the rate in bytes per second, an exact integer product with no division per
/// packet. Starts full, as RFC 2697/2698 buckets do.
#[derive(Debug, Clone, Copy)]
pub struct Bucket {
    tokens: u64,
    size: u64,
    rate: u64,
    /// Nanoseconds that fill the bucket from empty: longer gaps add no more.
    fill_ns: u64,
}

/// Nano-bytes per byte.
pub const NANO: u64 = 1_000_000_000;

/// The largest bucket: 1 GiB, so that tokens and a refill fit a u64 with room.
pub const MAX_BUCKET: u64 = 1 << 30;

impl Bucket {
    /// A bucket of `size` bytes filled at `rate` bytes per second (both checked by the
    /// caller: `size <= MAX_BUCKET`, `0 < rate <= 10^13`).
    pub fn new(size: u64, rate: u64) -> Bucket {
        debug_assert!(size <= MAX_BUCKET && rate > 0);
        let size = size * NANO;
        Bucket {
            tokens: size,
            size,
            rate,
            fill_ns: size.div_ceil(rate.max(1)),
        }
    }

    /// Adds the tokens of `elapsed_ns`, up to the size; returns what did not fit (the
    /// overflow an srTCM's excess bucket takes).
    #[inline]
    pub fn fill(&mut self, elapsed_ns: u64) -> u64 {
        self.fill_within(elapsed_ns, self.fill_ns)
    }

    /// `fill` with gaps counted up to `cap_ns` (at most the time that fills this bucket
    /// and another of at most `MAX_BUCKET`: an srTCM's excess bucket takes the overflow).
    #[inline]
    pub fn fill_within(&mut self, elapsed_ns: u64, cap_ns: u64) -> u64 {
        let add = elapsed_ns.min(cap_ns) * self.rate;
        let room = self.size - self.tokens;
        if add <= room {
            self.tokens += add;
            0
        } else {
            self.tokens = self.size;
            add - room
        }
    }

    /// Adds `tokens` nano-bytes, up to the size.
    #[inline]
    pub fn add(&mut self, tokens: u64) {
        self.tokens = (self.tokens + tokens.min(self.size)).min(self.size);
    }

    /// Whether `bytes` fit now.
    #[inline]
    pub fn has(&self, bytes: u32) -> bool {
        self.tokens >= u64::from(bytes) * NANO
    }

    /// Takes `bytes` (which must fit).
    #[inline]
    pub fn take(&mut self, bytes: u32) {
        self.tokens -= u64::from(bytes) * NANO;
    }

    /// Tokens now, in bytes (rounded down).
    pub fn bytes(&self) -> u64 {
        self.tokens / NANO
    }
}

/// Checks a bucket size and a rate for [`Bucket::new`].
pub fn check_bucket(size_key: &str, size: u64, rate_key: &str, rate: Rate) -> Result<(), ConfigError> {
    if rate.bytes_per_s() == 0 {
        return Err(ConfigError::new(rate_key, "must be at least 8 bit/s"));
    }
    if rate.0 > 80_000_000_000_000 {
        return Err(ConfigError::new(rate_key, "must be at most 80 Tbit/s"));
    }
    if size > MAX_BUCKET {
        return Err(ConfigError::new(size_key, "must be at most 1GiB"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sfclab_core::PacketPool;

    #[test]
    fn rates_read_as_operators_write_them() {
        for (text, bits) in [
            ("10Mbit", 10_000_000),
            ("1.5Gbit/s", 1_500_000_000),
            ("100kbps", 100_000),
            ("10 Gbps", 10_000_000_000),
            ("64000", 64_000),
            ("2Mb", 2_000_000),
        ] {
            assert_eq!(text.parse::<Rate>(), Ok(Rate(bits)), "{text}");
        }
        for bad in ["fast", "10 furlongs", "1e3Mbit", "", "Mbit", "2000Tbit"] {
            assert!(bad.parse::<Rate>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_bucket_fills_at_its_rate_up_to_its_size_and_reports_the_overflow() {
        // 1000 bytes at 1000 bytes/s: one byte per millisecond.
        let mut b = Bucket::new(1000, 1000);
        assert!(b.has(1000) && !b.has(1001));
        b.take(1000);
        assert_eq!(b.fill(250_000_000), 0);
        assert_eq!(b.bytes(), 250);
        // 1 s more would add 1000 bytes: 750 fit, 250 overflow (in nano-bytes).
        assert_eq!(b.fill(1_000_000_000), 250 * NANO);
        assert_eq!(b.bytes(), 1000);
        // A gap of years adds no more than a fill and cannot overflow.
        b.take(1000);
        assert_eq!(b.fill(u64::MAX), 0);
        assert_eq!(b.bytes(), 1000);
    }

    #[test]
    fn dscp_rewrites_keep_ecn_and_a_valid_ipv4_checksum() {
        let mut pool = PacketPool::new(1);
        let mut p = pool.alloc().unwrap();
        let mut f = Vec::new();
        etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .udp(1, 2)
            .write(&mut f, &[0; 8])
            .unwrap();
        f[15] = 0x03; // ECN CE, DSCP 0
        f[24..26].fill(0);
        let sum = sfclab_wire::checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&sum.to_be_bytes());
        p.reset(f.len()).copy_from_slice(&f);
        let ip = ip_facts(&mut p).unwrap().unwrap();
        assert_eq!((ip.dscp, ip.len, ip.key.unwrap().dport), (0, 36, 2));
        set_dscp(&mut p, &ip, 46);
        let h = etherparse::Ipv4HeaderSlice::from_slice(&p.data()[14..]).unwrap();
        assert_eq!((h.dcp().value(), h.ecn().value()), (46, 3));
        assert_eq!(h.header_checksum(), h.to_header().calc_header_checksum());

        let mut f6 = Vec::new();
        etherparse::PacketBuilder::ethernet2([2; 6], [4; 6])
            .ipv6([1; 16], [2; 16], 64)
            .udp(1, 2)
            .write(&mut f6, &[0; 8])
            .unwrap();
        f6[15] |= 0x10; // traffic class low nibble: ECN 01
        p.reset(f6.len()).copy_from_slice(&f6);
        p.meta.forget_layers();
        let ip = ip_facts(&mut p).unwrap().unwrap();
        assert_eq!((ip.v6, ip.dscp, ip.len), (true, 0, 56));
        set_dscp(&mut p, &ip, 10);
        let h = etherparse::Ipv6HeaderSlice::from_slice(&p.data()[14..]).unwrap();
        assert_eq!(h.traffic_class(), 10 << 2 | 1);
        assert_eq!(h.flow_label().value(), 0, "the flow label is untouched");
        pool.free(p);
    }
}
