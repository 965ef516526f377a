//! Bit-vector classification with aggregates (Lakshman and Stiliadis, SIGCOMM 1998;
//! Baboescu and Varghese, SIGCOMM 2001).
//!
//! Each field's value space is cut into elementary intervals, within which the set of
//! rules the field admits does not change; each set is a bitmap over the rules in their
//! order (a *row*, stored once however many intervals share it). A lookup finds the five
//! rows (source and destination address by a /16 index and a short binary search, ports
//! and protocol by direct tables), ANDs them and takes the lowest set bit: the first
//! matching rule. A row starts with aggregate words, one bit per 64-rule word that is
//! not zero; the aggregates' AND names the only words worth reading, so a packet that
//! few rules admit costs a few words even among 10,000 rules.

use hashbrown::HashMap;

use super::{Key, Match, mask32};

/// A lookup table of row numbers (or, with [`CHILD`], block numbers), 16 bits wide when
/// they all fit: half the cache footprint for the rule sets most firewalls have.
enum Entries {
    Narrow(Box<[u16]>),
    Wide(Box<[u32]>),
}

impl Entries {
    fn new(values: Vec<u32>) -> Entries {
        if values.iter().all(|v| v & !CHILD < 1 << 15) {
            Entries::Narrow(values.iter().map(|v| (v & 0x7fff | (v & CHILD) >> 16) as u16).collect())
        } else {
            Entries::Wide(values.into_boxed_slice())
        }
    }

    #[inline(always)]
    fn get(&self, i: usize) -> u32 {
        match self {
            Entries::Narrow(t) => {
                let v = u32::from(t[i]);
                v & 0x7fff | (v & 0x8000) << 16
            }
            Entries::Wide(t) => t[i],
        }
    }

    fn bytes(&self) -> usize {
        match self {
            Entries::Narrow(t) => 2 * t.len(),
            Entries::Wide(t) => 4 * t.len(),
        }
    }
}

/// Rows of up to this many lines (2,048 rules) have no aggregates.
const SCAN_LINES: usize = 4;

/// One cache line of a row.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[repr(C, align(64))]
struct Line([u64; 8]);

/// Rows of all fields, deduplicated, each starting on a cache line: `agg_lines` lines of
/// aggregate bits (one per data line that is not zero), then `data_lines` lines of rule
/// bits. A row is named by its index.
struct Rows {
    lines: Vec<Line>,
    /// Rule bits per row, in u64 words (a whole number of lines).
    words: usize,
    agg_lines: usize,
    data_lines: usize,
    index: HashMap<Box<[u64]>, u32>,
}

impl Rows {
    fn new(rules: usize) -> Rows {
        let data_lines = rules.div_ceil(512);
        Rows {
            lines: Vec::new(),
            words: data_lines * 8,
            // Small rule sets are scanned line by line: an aggregate line would cost a
            // cache miss per row and skip little.
            agg_lines: if data_lines <= SCAN_LINES {
                0
            } else {
                data_lines.div_ceil(512)
            },
            data_lines,
            index: HashMap::new(),
        }
    }

    /// The row holding `bits` (`words` long), added if new.
    fn intern(&mut self, bits: &[u64]) -> u32 {
        if let Some(&row) = self.index.get(bits) {
            return row;
        }
        let row = u32::try_from(self.index.len()).expect("classifier rows exceed 2^32");
        let mut aggregate = vec![Line([0; 8]); self.agg_lines];
        for (l, line) in bits.chunks(8).enumerate() {
            if self.agg_lines > 0 && line.iter().any(|w| *w != 0) {
                aggregate[l / 512].0[l % 512 / 64] |= 1 << (l % 64);
            }
        }
        self.lines.extend_from_slice(&aggregate);
        self.lines.extend(
            bits.chunks(8)
                .map(|c| Line(c.try_into().expect("rows are whole lines"))),
        );
        self.index.insert(bits.into(), row);
        row
    }
}

/// Sweeps inclusive ranges `(lo, hi, rule)` over `0..=max`: the start of every
/// elementary interval and the row of the rules covering it, merged where neighbours
/// share a row.
fn sweep(ranges: &[(u64, u64, usize)], max: u64, rows: &mut Rows) -> Vec<(u64, u32)> {
    // Events: at `lo` a rule's bit is set, at `hi + 1` cleared.
    let mut events: Vec<(u64, bool, usize)> = Vec::with_capacity(2 * ranges.len());
    for &(lo, hi, rule) in ranges {
        events.push((lo, true, rule));
        if hi < max {
            events.push((hi + 1, false, rule));
        }
    }
    events.sort_unstable();
    // A rule can cover a point through two ranges (a port range is one, but a rule set
    // may repeat a prefix): count coverage per rule.
    let mut cover = vec![0u32; rows.words * 64];
    let mut bits = vec![0u64; rows.words];
    let mut out: Vec<(u64, u32)> = Vec::new();
    let mut at = 0;
    let mut i = 0;
    loop {
        while i < events.len() && events[i].0 == at {
            let (_, open, rule) = events[i];
            if open {
                cover[rule] += 1;
            } else {
                cover[rule] -= 1;
            }
            if cover[rule] > 0 {
                bits[rule / 64] |= 1 << (rule % 64);
            } else {
                bits[rule / 64] &= !(1 << (rule % 64));
            }
            i += 1;
        }
        let row = rows.intern(&bits);
        if out.last().is_none_or(|&(_, r)| r != row) {
            out.push((at, row));
        }
        match events.get(i) {
            Some(e) => at = e.0,
            None => return out,
        }
    }
}

/// An address field: its elementary intervals in a 16-8-8 multibit trie, so a lookup is
/// at most three dependent loads. An entry is a row, or (top bit set) the index
/// of a 256-entry block one level down, made only where an interval boundary falls
/// inside the entry's range.
struct Intervals {
    top: Entries,
    blocks: Entries,
}

const CHILD: u32 = 1 << 31;

impl Intervals {
    fn new(prefixes: impl Iterator<Item = ((u32, u8), usize)>, rows: &mut Rows) -> Intervals {
        let ranges: Vec<(u64, u64, usize)> = prefixes
            .map(|((addr, len), rule)| {
                let lo = u64::from(addr & mask32(len));
                (lo, lo + (1u64 << (32 - len)) - 1, rule)
            })
            .collect();
        let cuts = sweep(&ranges, u64::from(u32::MAX), rows);
        // The row of the interval holding `a`, and whether a boundary lies in `a+1..a+span`.
        let row_at = |a: u64| cuts[cuts.partition_point(|&(s, _)| s <= a) - 1].1;
        let split = |a: u64, span: u64| {
            let next = cuts.partition_point(|&(s, _)| s <= a);
            cuts.get(next).is_some_and(|&(s, _)| s < a + span)
        };
        // The row, when all of `a..a+span` lies in one interval.
        let leaf = |a: u64, span: u64| (!split(a, span)).then(|| row_at(a));
        let mut blocks = Vec::new();
        let mut top = vec![0u32; 1 << 16];
        for (c, t) in top.iter_mut().enumerate() {
            let a = (c as u64) << 16;
            *t = match leaf(a, 1 << 16) {
                Some(row) => row,
                None => {
                    let at = blocks.len() / 256;
                    blocks.resize(blocks.len() + 256, 0);
                    for b in 0..256u64 {
                        let a = a | b << 8;
                        let e = match leaf(a, 1 << 8) {
                            Some(row) => row,
                            None => {
                                let leaf = blocks.len() / 256;
                                blocks.extend((0..256u64).map(|h| row_at(a | h)));
                                CHILD | leaf as u32
                            }
                        };
                        blocks[at * 256 + b as usize] = e;
                    }
                    CHILD | at as u32
                }
            };
        }
        Intervals {
            top: Entries::new(top),
            blocks: Entries::new(blocks),
        }
    }

    #[inline]
    fn row(&self, addr: u32) -> u32 {
        let mut e = self.top.get((addr >> 16) as usize);
        if e & CHILD != 0 {
            e = self
                .blocks
                .get(((e & !CHILD) as usize) << 8 | (addr >> 8 & 0xff) as usize);
            if e & CHILD != 0 {
                e = self.blocks.get(((e & !CHILD) as usize) << 8 | (addr & 0xff) as usize);
            }
        }
        e
    }
}

/// A port field: the row of every port.
fn port_table(ranges: impl Iterator<Item = ((u16, u16), usize)>, rows: &mut Rows) -> Entries {
    let ranges: Vec<(u64, u64, usize)> = ranges
        .map(|((lo, hi), rule)| (u64::from(lo), u64::from(hi), rule))
        .collect();
    let cuts = sweep(&ranges, 0xffff, rows);
    let mut table = vec![0u32; 1 << 16];
    for (k, &(start, row)) in cuts.iter().enumerate() {
        let end = cuts.get(k + 1).map_or(1 << 16, |c| c.0) as usize;
        table[start as usize..end].fill(row);
    }
    Entries::new(table)
}

/// First-match classification by bit vectors; see the module docs.
pub struct BitVector {
    src: Intervals,
    dst: Intervals,
    sport: Entries,
    dport: Entries,
    proto: Box<[u32]>,
    /// Every row: `agg_lines` lines of aggregates, then the rule bits; `row_lines` in all.
    rows: Box<[Line]>,
    agg_lines: usize,
    /// Aggregate words in use (the rest of the aggregate lines is zero).
    agg_words: usize,
    row_lines: usize,
    rules: usize,
    distinct_rows: usize,
}

impl BitVector {
    pub fn new(rules: &[Match]) -> BitVector {
        let mut rows = Rows::new(rules.len());
        // Fields with few rows first: their row numbers stay small and their tables narrow.
        let sport = port_table(rules.iter().map(|r| r.sport).zip(0..), &mut rows);
        let dport = port_table(rules.iter().map(|r| r.dport).zip(0..), &mut rows);
        let src = Intervals::new(rules.iter().map(|r| r.src).zip(0..), &mut rows);
        let dst = Intervals::new(rules.iter().map(|r| r.dst).zip(0..), &mut rows);
        let proto = (0..=255u8)
            .map(|p| {
                let mut bits = vec![0u64; rows.words];
                for (i, r) in rules.iter().enumerate() {
                    if r.proto.is_none_or(|q| q == p) {
                        bits[i / 64] |= 1 << (i % 64);
                    }
                }
                rows.intern(&bits)
            })
            .collect();
        BitVector {
            src,
            dst,
            sport,
            dport,
            proto,
            distinct_rows: rows.index.len(),
            agg_lines: rows.agg_lines,
            agg_words: rows.data_lines.div_ceil(64),
            row_lines: rows.agg_lines + rows.data_lines,
            rows: rows.lines.into_boxed_slice(),
            rules: rules.len(),
        }
    }

    /// The five rows a key selects.
    #[inline(always)]
    fn rows_of(&self, k: &Key) -> [u32; 5] {
        [
            self.src.row(k.src),
            self.dst.row(k.dst),
            self.sport.get(usize::from(k.sport)),
            self.dport.get(usize::from(k.dport)),
            self.proto[usize::from(k.proto)],
        ]
    }

    /// The first rule all five rows admit.
    #[inline]
    fn first_common(&self, rows: [u32; 5]) -> Option<usize> {
        let rows = rows.map(|r| &self.rows[r as usize * self.row_lines..][..self.row_lines]);
        if self.agg_lines == 0 {
            return (0..self.row_lines).find_map(|line| Self::first_in_line(&rows, line, line));
        }
        let [a, b, c, d, e] = rows;
        for g in 0..self.agg_words {
            let (l, w) = (g / 8, g % 8);
            let mut candidates = a[l].0[w] & b[l].0[w] & c[l].0[w] & d[l].0[w] & e[l].0[w];
            while candidates != 0 {
                let line = g * 64 + candidates.trailing_zeros() as usize;
                if let Some(rule) = Self::first_in_line(&rows, self.agg_lines + line, line) {
                    return Some(rule);
                }
                candidates &= candidates - 1;
            }
        }
        None
    }

    /// The first rule of data line `line` (at `at` in the rows) all five rows admit.
    #[inline(always)]
    fn first_in_line(rows: &[&[Line]; 5], at: usize, line: usize) -> Option<usize> {
        let [a, b, c, d, e] = rows.map(|r| &r[at].0);
        // A whole line at once: the compiler vectorises the ANDs.
        let mut m = [0u64; 8];
        for (i, m) in m.iter_mut().enumerate() {
            *m = a[i] & b[i] & c[i] & d[i] & e[i];
        }
        if m.iter().fold(0, |acc, w| acc | w) == 0 {
            return None;
        }
        let i = m.iter().position(|w| *w != 0).unwrap_or(0);
        Some((line * 8 + i) * 64 + m[i].trailing_zeros() as usize)
    }

    /// The index of the first rule (in the given order) that matches `k`.
    #[inline]
    pub fn classify(&self, k: &Key) -> Option<usize> {
        self.first_common(self.rows_of(k))
    }

    /// Classifies up to 64 keys at once: all field lookups first (independent loads the
    /// core overlaps), then the row intersections.
    pub fn classify_bulk(&self, keys: &[Key], out: &mut [Option<usize>]) {
        const CHUNK: usize = 64;
        let mut rows = [[0u32; 5]; CHUNK];
        for (keys, out) in keys.chunks(CHUNK).zip(out.chunks_mut(CHUNK)) {
            for (o, k) in rows.iter_mut().zip(keys) {
                *o = self.rows_of(k);
            }
            for (r, o) in out.iter_mut().zip(&rows) {
                *r = self.first_common(*o);
            }
        }
    }

    pub fn rules(&self) -> usize {
        self.rules
    }

    /// Distinct rows across the fields.
    pub fn distinct_rows(&self) -> usize {
        self.distinct_rows
    }

    /// Bytes of the lookup structures.
    pub fn memory_bytes(&self) -> usize {
        [
            &self.src.top,
            &self.src.blocks,
            &self.dst.top,
            &self.dst.blocks,
            &self.sport,
            &self.dport,
        ]
        .iter()
        .map(|e| e.bytes())
        .sum::<usize>()
            + 4 * self.proto.len()
            + std::mem::size_of_val(&*self.rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::acl::classbench;
    use crate::tables::acl::{Linear, TupleSpace};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(32))]

        /// On ClassBench-style rule sets and traces, the bit vectors find the same first
        /// rule as the linear list and as tuple space search, one key at a time and in bulk.
        #[test]
        fn agrees_with_first_match(seed in any::<u64>(), n in 1usize..400) {
            let rules = classbench::generate_rules(n, seed);
            let mut trace = classbench::generate_trace(&rules, 600, seed ^ 5);
            // Keys no rule was drawn from too.
            let mut rng = crate::tables::lpm::SplitMix(seed);
            trace.extend((0..100).map(|_| Key {
                src: rng.next() as u32,
                dst: rng.next() as u32,
                proto: rng.next() as u8,
                sport: rng.next() as u16,
                dport: rng.next() as u16,
            }));
            let (bv, ts, lin) = (BitVector::new(&rules), TupleSpace::new(&rules), Linear::new(&rules));
            let mut bulk = vec![None; trace.len()];
            bv.classify_bulk(&trace, &mut bulk);
            for (k, b) in trace.iter().zip(&bulk) {
                let want = lin.classify(k);
                prop_assert_eq!(bv.classify(k), want, "{:?}", k);
                prop_assert_eq!(*b, want);
                prop_assert_eq!(ts.classify(k), want);
            }
        }
    }

    #[test]
    fn edges_of_prefixes_and_ranges() {
        let rules = [
            Match {
                src: (0x0a00_0000, 8),
                dst: (0, 0),
                proto: Some(6),
                sport: (0, 65535),
                dport: (80, 80),
            },
            Match {
                src: (0xffff_ffff, 32),
                dst: (0, 0),
                proto: None,
                sport: (65535, 65535),
                dport: (0, 65535),
            },
            Match {
                src: (0, 0),
                dst: (0, 0),
                proto: None,
                sport: (0, 65535),
                dport: (0, 65535),
            },
        ];
        let bv = BitVector::new(&rules);
        let key = |src, proto, sport, dport| Key {
            src,
            dst: 7,
            proto,
            sport,
            dport,
        };
        assert_eq!(bv.classify(&key(0x0a00_0000, 6, 1, 80)), Some(0));
        assert_eq!(bv.classify(&key(0x0aff_ffff, 6, 1, 80)), Some(0));
        assert_eq!(bv.classify(&key(0x0b00_0000, 6, 1, 80)), Some(2));
        assert_eq!(bv.classify(&key(0x09ff_ffff, 6, 1, 80)), Some(2));
        assert_eq!(bv.classify(&key(0x0a00_0001, 6, 1, 81)), Some(2));
        assert_eq!(bv.classify(&key(0x0a00_0001, 17, 1, 80)), Some(2));
        assert_eq!(bv.classify(&key(0xffff_ffff, 1, 65535, 0)), Some(1));
        assert_eq!(bv.classify(&key(0xffff_fffe, 1, 65535, 0)), Some(2));
        assert_eq!(BitVector::new(&rules[..2]).classify(&key(1, 6, 1, 80)), None);
        assert_eq!(BitVector::new(&[]).classify(&key(1, 6, 1, 80)), None);
    }

    #[test]
    fn rows_are_shared_and_aggregates_skip_words() {
        // 10,000 host rules: each source address its own interval, but one port row,
        // one protocol row; a key matching the last rule reads one word.
        let rules: Vec<Match> = (0..10_000u32)
            .map(|i| Match {
                src: (0x0a00_0000 + i, 32),
                dst: (0, 0),
                proto: Some(6),
                sport: (0, 65535),
                dport: (443, 443),
            })
            .collect();
        let bv = BitVector::new(&rules);
        // Rows: 10,000 host sets + none (src), all (dst, sport), 443 or not (dport),
        // tcp or not (proto) — duplicates across fields stored once.
        assert!(bv.distinct_rows() <= 10_004, "{}", bv.distinct_rows());
        let k = Key {
            src: 0x0a00_0000 + 9_999,
            dst: 1,
            proto: 6,
            sport: 5,
            dport: 443,
        };
        assert_eq!(bv.classify(&k), Some(9_999));
        assert_eq!(bv.classify(&Key { dport: 444, ..k }), None);
    }
}
