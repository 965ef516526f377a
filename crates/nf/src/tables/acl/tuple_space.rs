//! Tuple space search (Srinivasan, Suri, Varghese, SIGCOMM 1999; as Open vSwitch's
//! classifier does it): rules are grouped by their mask (the prefix lengths of source
//! and destination, whether the protocol is given, the port prefixes their ranges
//! expand into), one hash table per distinct mask. A lookup probes one table per mask,
//! so its cost grows with the number of distinct masks, not of rules; tables are probed
//! best rule first and the search stops once no later table can hold a better rule.

use hashbrown::HashMap;

use super::{Key, Match, mask16, mask32, range_to_prefixes};

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
