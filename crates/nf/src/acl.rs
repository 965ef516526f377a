//! Packet classification over the 5-tuple: ordered rules, first match wins, by tuple
//! space search (Srinivasan, Suri, Varghese, SIGCOMM 1999; as Open vSwitch's classifier
//! and VPP's TupleMerge do): rules are grouped by their mask (the prefix lengths of
//! source and destination, whether the protocol is given, the port prefixes their
//! ranges expand into), one hash table per distinct mask. A lookup probes one table per
//! mask, so its cost grows with the number of distinct masks, not of rules; tables are
//! probed best rule first and the search stops once no later table can hold a better
//! rule. [`Linear`] is the plain first-match list the tests check it against.

use hashbrown::HashMap;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    pub src: u32,
    pub dst: u32,
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
}

fn mask32(len: u8) -> u32 {
    if len == 0 { 0 } else { u32::MAX << (32 - len) }
}

fn mask16(len: u8) -> u16 {
    if len == 0 { 0 } else { u16::MAX << (16 - len) }
}

impl Match {
    pub fn matches(&self, k: &Key) -> bool {
        (k.src ^ self.src.0) & mask32(self.src.1) == 0
            && (k.dst ^ self.dst.0) & mask32(self.dst.1) == 0
            && self.proto.is_none_or(|p| p == k.proto)
            && (self.sport.0..=self.sport.1).contains(&k.sport)
            && (self.dport.0..=self.dport.1).contains(&k.dport)
    }
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

/// A mask: prefix lengths of source, destination, ports, and whether the protocol counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Shape {
    src: u8,
    dst: u8,
    proto: bool,
    sport: u8,
    dport: u8,
}

impl Shape {
    #[inline]
    fn apply(&self, k: &Key) -> Key {
        Key {
            src: k.src & mask32(self.src),
            dst: k.dst & mask32(self.dst),
            proto: if self.proto { k.proto } else { 0 },
            sport: k.sport & mask16(self.sport),
            dport: k.dport & mask16(self.dport),
        }
    }
}

struct Table {
    shape: Shape,
    /// Masked key to the best (lowest) rule index with this shape and key.
    rules: HashMap<Key, u32>,
    /// The best rule in the table: once a match is better, the table can be skipped.
    best: u32,
}

/// Tuple space search.
pub struct TupleSpace {
    /// Sorted by `best`, so the search can stop early.
    tables: Vec<Table>,
    rules: usize,
}

impl TupleSpace {
    pub fn new(rules: &[Match]) -> TupleSpace {
        let mut by_shape: HashMap<Shape, Table> = HashMap::new();
        for (i, r) in rules.iter().enumerate() {
            let i = i as u32;
            for (sp, sl) in range_to_prefixes(r.sport.0, r.sport.1) {
                for (dp, dl) in range_to_prefixes(r.dport.0, r.dport.1) {
                    let shape = Shape {
                        src: r.src.1,
                        dst: r.dst.1,
                        proto: r.proto.is_some(),
                        sport: sl,
                        dport: dl,
                    };
                    let key = shape.apply(&Key {
                        src: r.src.0,
                        dst: r.dst.0,
                        proto: r.proto.unwrap_or(0),
                        sport: sp,
                        dport: dp,
                    });
                    let t = by_shape.entry(shape).or_insert_with(|| Table {
                        shape,
                        rules: HashMap::new(),
                        best: u32::MAX,
                    });
                    let e = t.rules.entry(key).or_insert(i);
                    *e = (*e).min(i);
                    t.best = t.best.min(i);
                }
            }
        }
        let mut tables: Vec<Table> = by_shape.into_values().collect();
        tables.sort_by_key(|t| t.best);
        TupleSpace {
            tables,
            rules: rules.len(),
        }
    }

    /// The index of the first rule (in the given order) that matches `k`.
    #[inline]
    pub fn classify(&self, k: &Key) -> Option<usize> {
        let mut found = u32::MAX;
        for t in &self.tables {
            if t.best >= found {
                break;
            }
            if let Some(&i) = t.rules.get(&t.shape.apply(k)) {
                found = found.min(i);
            }
        }
        (found != u32::MAX).then_some(found as usize)
    }

    /// Distinct masks: what a lookup's cost grows with.
    pub fn tables(&self) -> usize {
        self.tables.len()
    }

    pub fn rules(&self) -> usize {
        self.rules
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lpm::SplitMix;
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

    #[test]
    fn cost_grows_with_masks_not_rules() {
        // 10,000 host rules of one shape: one table.
        let rules: Vec<Match> = (0..10_000u32)
            .map(|i| Match {
                src: (0x0a00_0000 + i, 32),
                dst: (0, 0),
                proto: Some(6),
                sport: (0, 65535),
                dport: (443, 443),
            })
            .collect();
        let t = TupleSpace::new(&rules);
        assert_eq!((t.tables(), t.rules()), (1, 10_000));
        let k = Key {
            src: 0x0a00_1234,
            dst: 1,
            proto: 6,
            sport: 5,
            dport: 443,
        };
        assert_eq!(t.classify(&k), Some(0x1234));
    }
}
