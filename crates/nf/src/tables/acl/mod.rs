//! Packet classification over the IPv4 5-tuple: ordered rules, first match wins.
//!
//! - [`BitVector`]: the firewall's classifier. Each field is looked up on its own (an
//!   address in its elementary intervals, a port or protocol in a table) to the set of
//!   rules that field admits, as a bitmap in rule order; the bitmaps' AND has the first
//!   match as its lowest bit. Aggregate bits (one per 64 rules) skip the words that
//!   cannot match (Lakshman and Stiliadis, SIGCOMM 1998; Baboescu and Varghese,
//!   SIGCOMM 2001).
//! - [`TupleSpace`]: tuple space search, one hash table per distinct mask (as Open
//!   vSwitch's classifier); `sfclab bench acl` measures it beside the bit vectors.
//! - [`Linear`]: the plain first-match list both are checked against.
//! - [`classbench`]: ClassBench rule and trace files, the format DPDK's `dpdk-test-acl`
//!   reads, and a generator of ClassBench-style rule sets and traces.

mod bitvector;
pub mod classbench;
mod tuple_space;

pub use bitvector::BitVector;
pub use tuple_space::TupleSpace;

/// Protocols a rule can name.
pub const ANY_PROTO: Option<u8> = None;

/// One rule's match: prefixes, protocol (None: any), inclusive port ranges.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Match {
    pub src: (u32, u8),
    pub dst: (u32, u8),
    pub proto: Option<u8>,
    pub sport: (u16, u16),
    pub dport: (u16, u16),
}

/// What a packet is classified by.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Key {
    pub src: u32,
    pub dst: u32,
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
}

/// The 5-tuple hashed as one integer. Hashing it field by field (the derived `Hash`)
/// made hashbrown's probes collide on generator-like flows: the firewall's connection
/// lookups cost 380 TSC cycles instead of 178 (`sfclab bench nfs --only firewall`).
impl std::hash::Hash for Key {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u128(
            u128::from(self.src) << 64
                | u128::from(self.dst) << 32
                | u128::from(self.sport) << 16
                | u128::from(self.dport)
                | u128::from(self.proto) << 96,
        );
    }
}

pub(crate) fn mask32(len: u8) -> u32 {
    if len == 0 { 0 } else { u32::MAX << (32 - len) }
}

pub(crate) fn mask16(len: u8) -> u16 {
    if len == 0 { 0 } else { u16::MAX << (16 - len) }
}

impl Match {
    /// A rule from the fields chain files write (`proto`: tcp, udp, icmp, any or a
    /// number; `src`/`dst`: `a.b.c.d[/len]` or any; `sport`/`dport`: `n`, `lo-hi` or any;
    /// each absent field matches anything). An error names the field and says why.
    pub fn from_fields(
        proto: Option<&str>,
        src: Option<&str>,
        dst: Option<&str>,
        sport: Option<&str>,
        dport: Option<&str>,
    ) -> Result<Match, (&'static str, String)> {
        let proto = match proto.unwrap_or("any") {
            "any" => None,
            "tcp" => Some(6),
            "udp" => Some(17),
            "icmp" => Some(1),
            n => Some(n.parse::<u8>().map_err(|_| {
                (
                    "proto",
                    format!("`{n}` is not tcp, udp, icmp, any or a protocol number"),
                )
            })?),
        };
        Ok(Match {
            src: prefix(src).map_err(|e| ("src", e))?,
            dst: prefix(dst).map_err(|e| ("dst", e))?,
            proto,
            sport: ports(sport).map_err(|e| ("sport", e))?,
            dport: ports(dport).map_err(|e| ("dport", e))?,
        })
    }

    pub fn matches(&self, k: &Key) -> bool {
        (k.src ^ self.src.0) & mask32(self.src.1) == 0
            && (k.dst ^ self.dst.0) & mask32(self.dst.1) == 0
            && self.proto.is_none_or(|p| p == k.proto)
            && (self.sport.0..=self.sport.1).contains(&k.sport)
            && (self.dport.0..=self.dport.1).contains(&k.dport)
    }
}

fn prefix(s: Option<&str>) -> Result<(u32, u8), String> {
    let Some(s) = s.filter(|s| *s != "any") else {
        return Ok((0, 0));
    };
    let (a, l) = s.split_once('/').unwrap_or((s, "32"));
    let addr: std::net::Ipv4Addr = a.parse().map_err(|_| format!("`{a}` is not an IPv4 address"))?;
    let len: u8 = l
        .parse()
        .ok()
        .filter(|l| *l <= 32)
        .ok_or_else(|| format!("`/{l}` is not a prefix length 0..=32"))?;
    Ok((u32::from(addr) & mask32(len), len))
}

fn ports(s: Option<&str>) -> Result<(u16, u16), String> {
    let Some(s) = s.filter(|s| *s != "any") else {
        return Ok((0, 65535));
    };
    let why = || format!("`{s}` is not a port or range like 1024-65535");
    let (lo, hi) = s.split_once('-').unwrap_or((s, s));
    let (lo, hi): (u16, u16) = (
        lo.trim().parse().map_err(|_| why())?,
        hi.trim().parse().map_err(|_| why())?,
    );
    if lo > hi {
        return Err(why());
    }
    Ok((lo, hi))
}

/// The prefixes (value, length) that cover `lo..=hi` exactly.
pub fn range_to_prefixes(lo: u16, hi: u16) -> Vec<(u16, u8)> {
    let mut out = Vec::new();
    let (mut lo, hi) = (u32::from(lo), u32::from(hi));
    while lo <= hi {
        // The largest aligned block starting at `lo` that stays within `hi`.
        let mut size = if lo == 0 {
            1u32 << 16
        } else {
            1u32 << lo.trailing_zeros().min(16)
        };
        while lo + size - 1 > hi {
            size >>= 1;
        }
        out.push((lo as u16, 16 - size.trailing_zeros() as u8));
        lo += size;
    }
    out
}

/// Plain first match: the reference.
pub struct Linear {
    rules: Vec<Match>,
}

impl Linear {
    pub fn new(rules: &[Match]) -> Linear {
        Linear { rules: rules.to_vec() }
    }

    /// The index of the first rule that matches.
    pub fn classify(&self, k: &Key) -> Option<usize> {
        self.rules.iter().position(|r| r.matches(k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::lpm::SplitMix;
    use proptest::prelude::*;

    #[test]
    fn ranges_expand_to_exact_prefixes() {
        assert_eq!(range_to_prefixes(0, 65535), vec![(0, 0)]);
        assert_eq!(range_to_prefixes(80, 80), vec![(80, 16)]);
        assert_eq!(range_to_prefixes(1024, 65535).len(), 6);
        for (lo, hi) in [(1, 1), (1, 65534), (1000, 2000), (0, 0), (65535, 65535), (3, 17)] {
            let prefixes = range_to_prefixes(lo, hi);
            let covered: u64 = prefixes.iter().map(|(_, l)| 1u64 << (16 - l)).sum();
            assert_eq!(covered, u64::from(hi - lo) + 1, "{lo}-{hi}");
            for v in [lo, hi, lo.saturating_sub(1), hi.saturating_add(1)] {
                let inside = prefixes.iter().any(|&(p, l)| v & mask16(l) == p);
                assert_eq!(inside, (lo..=hi).contains(&v), "{v} in {lo}-{hi}");
            }
        }
    }

    fn random_rules(seed: u64, n: usize) -> Vec<Match> {
        let mut rng = SplitMix(seed);
        let lens = [0u8, 8, 16, 24, 32];
        (0..n)
            .map(|_| {
                let r = rng.next();
                let port = |x: u64| match x % 4 {
                    0 => (0, 65535),
                    1 => (80, 80),
                    2 => (1024, 65535),
                    _ => ((x >> 8) as u16 % 2000, (x >> 8) as u16 % 2000 + (x >> 20) as u16 % 300),
                };
                Match {
                    src: ((rng.next() as u32) & 0xc0a8_ffff | 0xc0a8_0000, lens[(r % 5) as usize]),
                    dst: (
                        (rng.next() as u32) & 0x0a00_ffff | 0x0a00_0000,
                        lens[((r >> 3) % 5) as usize],
                    ),
                    proto: [None, Some(6), Some(17)][((r >> 6) % 3) as usize],
                    sport: port(rng.next()),
                    dport: port(rng.next()),
                }
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Tuple space search finds the same first rule as the linear list.
        #[test]
        fn tuple_space_agrees_with_first_match(seed in any::<u64>(), n in 1usize..120) {
            let rules = random_rules(seed, n);
            let (t, l) = (TupleSpace::new(&rules), Linear::new(&rules));
            let mut rng = SplitMix(seed ^ 9);
            for _ in 0..400 {
                // Keys near the rules' values, so that matches are common.
                let r = &rules[(rng.next() as usize) % rules.len()];
                let k = Key {
                    src: r.src.0 ^ (rng.next() as u32 & 0xff),
                    dst: r.dst.0 ^ (rng.next() as u32 & 0x3ff),
                    proto: [6u8, 17, 1][(rng.next() % 3) as usize],
                    sport: r.sport.0.wrapping_add((rng.next() % 40) as u16),
                    dport: r.dport.0.wrapping_add((rng.next() % 40) as u16),
                };
                prop_assert_eq!(t.classify(&k), l.classify(&k), "{:?}", k);
            }
        }
    }
}
