//! Longest-prefix match as routers do it: multibit tries with a 24-bit first level
//! (DIR-24-8, Gupta et al., INFOCOM 1998, as DPDK's `rte_lpm`) and 8-bit levels below.
//!
//! [`Lpm4`]: one lookup is one read in a 2^24-entry table, plus one read in a 256-entry
//! group for the few addresses covered by a prefix longer than /24. [`Lpm6`]: the same
//! first level over the top 24 bits, then one 8-bit level per further byte of the
//! longest prefix below it (a /48 is three more reads, as `rte_lpm6`).
//!
//! Tables are built whole from a route list (prefixes written shortest first, so a
//! longer prefix overwrites what a shorter one wrote under it) and are read-only after:
//! a router rebuilds and swaps on change. [`Reference`] is the obvious linear search the
//! tests check both against.
//!
//! An entry is a `u32`: 0 is no route, `GROUP | g` points to group `g` one level down,
//! anything else is a next-hop index + 1.

const GROUP: u32 = 1 << 31;
/// Most next hops a table holds (entries keep 31 bits for them).
pub const MAX_NEXT_HOPS: usize = (GROUP - 2) as usize;

/// A route: `prefix/len` to next hop `hop` (an index into the caller's next-hop table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route<A> {
    pub prefix: A,
    pub len: u8,
    pub hop: u32,
}

/// The first level: one entry per /24. A fixed-size array, so that indexing it with the
/// top 24 bits of an address needs no bounds check.
type Level24 = Box<[u32; 1 << 24]>;

fn level24() -> Level24 {
    vec![0u32; 1 << 24].into_boxed_slice().try_into().expect("2^24 entries")
}

/// IPv4 longest-prefix match (DIR-24-8).
pub struct Lpm4 {
    tbl24: Level24,
    /// Groups of 256 entries for prefixes longer than /24.
    tbl8: Vec<u32>,
    routes: usize,
}

impl Lpm4 {
    /// A table of `routes` (duplicates: the last one wins). Lengths above 32 and next
    /// hops above `MAX_NEXT_HOPS` are refused.
    pub fn new(routes: &[Route<u32>]) -> Result<Lpm4, String> {
        let mut sorted: Vec<Route<u32>> = routes.to_vec();
        for r in &sorted {
            if r.len > 32 || r.hop as usize >= MAX_NEXT_HOPS {
                return Err(format!(
                    "{}/{} -> {}: out of range",
                    std::net::Ipv4Addr::from(r.prefix),
                    r.len,
                    r.hop
                ));
            }
        }
        sorted.sort_by_key(|r| r.len);
        let mut t = Lpm4 {
            tbl24: level24(),
            tbl8: Vec::new(),
            routes: routes.len(),
        };
        for r in sorted {
            let prefix = if r.len == 0 {
                0
            } else {
                r.prefix & (u32::MAX << (32 - r.len))
            };
            let entry = r.hop + 1;
            if r.len <= 24 {
                let first = (prefix >> 8) as usize;
                let count = 1usize << (24 - r.len);
                t.tbl24[first..first + count].fill(entry);
            } else {
                let slot = (prefix >> 8) as usize;
                let group = match t.tbl24[slot] {
                    e if e & GROUP != 0 => (e & !GROUP) as usize,
                    e => {
                        let g = t.tbl8.len() / 256;
                        t.tbl8.extend(std::iter::repeat_n(e, 256));
                        t.tbl24[slot] = GROUP | g as u32;
                        g
                    }
                };
                let first = group * 256 + (prefix & 0xff) as usize;
                let count = 1usize << (32 - r.len);
                t.tbl8[first..first + count].fill(entry);
            }
        }
        Ok(t)
    }

    /// The next hop of the longest prefix that matches `addr`.
    #[inline(always)]
    pub fn lookup(&self, addr: u32) -> Option<u32> {
        let mut e = self.tbl24[(addr >> 8) as usize];
        if e & GROUP != 0 {
            e = self.tbl8[((e & !GROUP) as usize) * 256 + (addr & 0xff) as usize];
        }
        e.checked_sub(1)
    }

    /// The first-level entry for `addr`: a batch reads all of them first, so that their
    /// cache misses overlap, then finishes each lookup with [`Lpm4::resolve`].
    #[inline(always)]
    pub fn first_level(&self, addr: u32) -> u32 {
        self.tbl24[(addr >> 8) as usize]
    }

    /// The lookup of `addr` from its first-level entry.
    #[inline(always)]
    pub fn resolve(&self, first: u32, addr: u32) -> Option<u32> {
        let mut e = first;
        if e & GROUP != 0 {
            e = self.tbl8[((e & !GROUP) as usize) * 256 + (addr & 0xff) as usize];
        }
        e.checked_sub(1)
    }

    /// Looks up every address of `addrs` into `hops`: the first-level reads of the
    /// whole burst are issued before any is used, so their cache misses overlap.
    #[inline]
    pub fn lookup_bulk(&self, addrs: &[u32], hops: &mut [Option<u32>]) {
        let mut first = [0u32; 64];
        for chunk in (0..addrs.len()).step_by(64) {
            let end = (chunk + 64).min(addrs.len());
            for (k, a) in addrs[chunk..end].iter().enumerate() {
                first[k] = self.tbl24[(a >> 8) as usize];
            }
            for (k, a) in addrs[chunk..end].iter().enumerate() {
                let mut e = first[k];
                if e & GROUP != 0 {
                    e = self.tbl8[((e & !GROUP) as usize) * 256 + (a & 0xff) as usize];
                }
                hops[chunk + k] = e.checked_sub(1);
            }
        }
    }

    pub fn routes(&self) -> usize {
        self.routes
    }

    /// Bytes the table occupies (the first level is mapped whole; untouched pages of it
    /// cost no memory until written).
    pub fn bytes(&self) -> usize {
        (self.tbl24.len() + self.tbl8.len()) * 4
    }
}

/// IPv6 longest-prefix match: a 24-bit first level, then 8-bit levels.
pub struct Lpm6 {
    tbl24: Level24,
    tbl8: Vec<u32>,
    routes: usize,
}

impl Lpm6 {
    pub fn new(routes: &[Route<u128>]) -> Result<Lpm6, String> {
        let mut sorted: Vec<Route<u128>> = routes.to_vec();
        for r in &sorted {
            if r.len > 128 || r.hop as usize >= MAX_NEXT_HOPS {
                return Err(format!(
                    "{}/{} -> {}: out of range",
                    std::net::Ipv6Addr::from(r.prefix),
                    r.len,
                    r.hop
                ));
            }
        }
        sorted.sort_by_key(|r| r.len);
        let mut t = Lpm6 {
            tbl24: level24(),
            tbl8: Vec::new(),
            routes: routes.len(),
        };
        for r in sorted {
            let len = u32::from(r.len);
            let prefix = if len == 0 {
                0
            } else {
                r.prefix & (u128::MAX << (128 - len))
            };
            let entry = r.hop + 1;
            let top = (prefix >> 104) as usize;
            if len <= 24 {
                let count = 1usize << (24 - len);
                t.tbl24[top..top + count].fill(entry);
                continue;
            }
            // Down one level per byte until the prefix ends inside the current level.
            let mut slot_is_top = true;
            let mut slot = top;
            let mut depth = 24u32;
            loop {
                let current = if slot_is_top { t.tbl24[slot] } else { t.tbl8[slot] };
                let group = if current & GROUP != 0 {
                    (current & !GROUP) as usize
                } else {
                    let g = t.tbl8.len() / 256;
                    t.tbl8.extend(std::iter::repeat_n(current, 256));
                    let link = GROUP | g as u32;
                    if slot_is_top {
                        t.tbl24[slot] = link;
                    } else {
                        t.tbl8[slot] = link;
                    }
                    g
                };
                let byte = ((prefix >> (128 - depth - 8)) & 0xff) as usize;
                if len <= depth + 8 {
                    let count = 1usize << (depth + 8 - len);
                    let first = group * 256 + byte;
                    t.tbl8[first..first + count].fill(entry);
                    break;
                }
                slot_is_top = false;
                slot = group * 256 + byte;
                depth += 8;
            }
        }
        Ok(t)
    }

    #[inline]
    pub fn lookup(&self, addr: u128) -> Option<u32> {
        let mut e = self.tbl24[(addr >> 104) as usize];
        let mut shift = 104;
        while e & GROUP != 0 {
            shift -= 8;
            e = self.tbl8[((e & !GROUP) as usize) * 256 + ((addr >> shift) & 0xff) as usize];
        }
        e.checked_sub(1)
    }

    /// Looks up every address of `addrs` into `hops`: the first-level reads of the
    /// whole burst are issued before any is used, so their cache misses overlap.
    #[inline]
    pub fn lookup_bulk(&self, addrs: &[u128], hops: &mut [Option<u32>]) {
        let mut first = [0u32; 64];
        for chunk in (0..addrs.len()).step_by(64) {
            let end = (chunk + 64).min(addrs.len());
            for (k, a) in addrs[chunk..end].iter().enumerate() {
                first[k] = self.tbl24[(a >> 104) as usize];
            }
            for (k, &a) in addrs[chunk..end].iter().enumerate() {
                let mut e = first[k];
                let mut shift = 104;
                while e & GROUP != 0 {
                    shift -= 8;
                    e = self.tbl8[((e & !GROUP) as usize) * 256 + ((a >> shift) & 0xff) as usize];
                }
                hops[chunk + k] = e.checked_sub(1);
            }
        }
    }

    pub fn routes(&self) -> usize {
        self.routes
    }

    pub fn bytes(&self) -> usize {
        (self.tbl24.len() + self.tbl8.len()) * 4
    }
}

/// Linear longest-prefix match over a route list: slow and obviously right.
pub struct Reference<A> {
    routes: Vec<Route<A>>,
}

impl Reference<u32> {
    pub fn new4(routes: &[Route<u32>]) -> Self {
        Reference {
            routes: routes.to_vec(),
        }
    }

    pub fn lookup(&self, addr: u32) -> Option<u32> {
        let mask = |len: u8| if len == 0 { 0 } else { u32::MAX << (32 - len) };
        best(self.routes.iter().filter(|r| (addr ^ r.prefix) & mask(r.len) == 0))
    }
}

impl Reference<u128> {
    pub fn new6(routes: &[Route<u128>]) -> Self {
        Reference {
            routes: routes.to_vec(),
        }
    }

    pub fn lookup(&self, addr: u128) -> Option<u32> {
        let mask = |len: u8| {
            if len == 0 {
                0
            } else {
                u128::MAX << (128 - u32::from(len))
            }
        };
        best(self.routes.iter().filter(|r| (addr ^ r.prefix) & mask(r.len) == 0))
    }
}

/// The longest match; among equal prefixes the last route given (as the tables do).
fn best<'a, A: 'a>(matches: impl Iterator<Item = &'a Route<A>>) -> Option<u32> {
    let mut found: Option<(u8, u32)> = None;
    for r in matches {
        if found.is_none_or(|(len, _)| r.len >= len) {
            found = Some((r.len, r.hop));
        }
    }
    found.map(|(_, hop)| hop)
}

/// A random IPv4 table shaped like a BGP table: `counts[len]` prefixes of each length
/// (e.g. DPDK's `lpm_perf_autotest` shape, about half of them /24), from `seed`.
pub fn random_table4(counts: &[(u8, usize)], hops: u32, seed: u64) -> Vec<Route<u32>> {
    let mut rng = SplitMix(seed);
    let mut out = Vec::new();
    for &(len, n) in counts {
        for _ in 0..n {
            out.push(Route {
                prefix: rng.next() as u32,
                len,
                hop: (rng.next() % u64::from(hops.max(1))) as u32,
            });
        }
    }
    out
}

/// A random IPv6 table with `counts[len]` prefixes of each length under 2000::/3.
pub fn random_table6(counts: &[(u8, usize)], hops: u32, seed: u64) -> Vec<Route<u128>> {
    let mut rng = SplitMix(seed);
    let mut out = Vec::new();
    for &(len, n) in counts {
        for _ in 0..n {
            let addr = (u128::from(rng.next()) << 64 | u128::from(rng.next())) & (u128::MAX >> 3) | (1u128 << 125);
            out.push(Route {
                prefix: addr,
                len,
                hop: (rng.next() % u64::from(hops.max(1))) as u32,
            });
        }
    }
    out
}

/// The prefix-length mix of IPv4 BGP tables (share of routes per length, percent), as
/// DPDK's `lpm_perf_autotest` table has it.
pub const BGP4_SHAPE: [(u8, f64); 25] = [
    (8, 0.002),
    (9, 0.0005),
    (10, 0.001),
    (11, 0.003),
    (12, 0.009),
    (13, 0.02),
    (14, 0.04),
    (15, 0.07),
    (16, 6.44),
    (17, 1.21),
    (18, 2.20),
    (19, 6.41),
    (20, 5.79),
    (21, 4.51),
    (22, 6.72),
    (23, 7.93),
    (24, 54.23),
    (25, 0.25),
    (26, 0.52),
    (27, 0.60),
    (28, 0.66),
    (29, 1.20),
    (30, 0.56),
    (31, 0.001),
    (32, 0.09),
];

/// `total` routes split by `shape` (percent per length).
pub fn counts_of(shape: &[(u8, f64)], total: usize) -> Vec<(u8, usize)> {
    let sum: f64 = shape.iter().map(|(_, p)| p).sum();
    shape
        .iter()
        .map(|&(len, p)| (len, ((p / sum) * total as f64).round() as usize))
        .filter(|&(_, n)| n > 0)
        .collect()
}

/// SplitMix64: small, fast, good enough to draw tables and addresses.
pub struct SplitMix(pub u64);

impl SplitMix {
    #[inline]
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn r4(prefix: [u8; 4], len: u8, hop: u32) -> Route<u32> {
        Route {
            prefix: u32::from_be_bytes(prefix),
            len,
            hop,
        }
    }

    #[test]
    fn longest_prefix_wins_in_both_levels() {
        let routes = [
            r4([0, 0, 0, 0], 0, 9),
            r4([10, 0, 0, 0], 8, 1),
            r4([10, 1, 0, 0], 16, 2),
            r4([10, 1, 2, 0], 24, 3),
            r4([10, 1, 2, 128], 25, 4),
            r4([10, 1, 2, 129], 32, 5),
        ];
        let t = Lpm4::new(&routes).unwrap();
        let at = |a: [u8; 4]| t.lookup(u32::from_be_bytes(a));
        assert_eq!(at([10, 1, 2, 129]), Some(5));
        assert_eq!(at([10, 1, 2, 130]), Some(4));
        assert_eq!(at([10, 1, 2, 1]), Some(3), "below the /25 in the same group: the /24");
        assert_eq!(at([10, 1, 3, 1]), Some(2));
        assert_eq!(at([10, 2, 0, 0]), Some(1));
        assert_eq!(at([11, 0, 0, 0]), Some(9), "the default route");
        let no_default = Lpm4::new(&routes[1..]).unwrap();
        assert_eq!(no_default.lookup(u32::from_be_bytes([11, 0, 0, 0])), None);
    }

    #[test]
    fn ipv6_walks_byte_levels() {
        let p = |s: &str| s.parse::<std::net::Ipv6Addr>().unwrap().into();
        let routes = [
            Route {
                prefix: p("2001:db8::"),
                len: 32,
                hop: 1,
            },
            Route {
                prefix: p("2001:db8:1::"),
                len: 48,
                hop: 2,
            },
            Route {
                prefix: p("2001:db8:1:2::"),
                len: 63,
                hop: 3,
            },
            Route {
                prefix: p("2001:db8:1:2::1"),
                len: 128,
                hop: 4,
            },
        ];
        let t = Lpm6::new(&routes).unwrap();
        assert_eq!(t.lookup(p("2001:db8:1:2::1")), Some(4));
        assert_eq!(t.lookup(p("2001:db8:1:2::2")), Some(3));
        assert_eq!(t.lookup(p("2001:db8:1:3::")), Some(3), "the /63 covers :2 and :3");
        assert_eq!(t.lookup(p("2001:db8:1:4::")), Some(2));
        assert_eq!(t.lookup(p("2001:db8:2::")), Some(1));
        assert_eq!(t.lookup(p("2001:db9::")), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// DIR-24-8 and the linear reference agree on random tables and addresses,
        /// including addresses chosen inside the table's prefixes.
        #[test]
        fn ipv4_agrees_with_the_reference(seed in any::<u64>(), n in 1usize..300) {
            let counts: Vec<(u8, usize)> = (0..=32).map(|l| (l, n / 33 + usize::from(l % 7 == 0))).collect();
            let routes = random_table4(&counts, 16, seed);
            let (t, r) = (Lpm4::new(&routes).unwrap(), Reference::new4(&routes));
            let mut rng = SplitMix(seed ^ 1);
            let mut addrs: Vec<u32> = (0..500).map(|_| rng.next() as u32).collect();
            addrs.extend(routes.iter().map(|rt| rt.prefix ^ (rng.next() as u32 >> rt.len.min(31))));
            let mut bulk = vec![None; addrs.len()];
            t.lookup_bulk(&addrs, &mut bulk);
            for (k, &a) in addrs.iter().enumerate() {
                prop_assert_eq!(t.lookup(a), r.lookup(a), "{}", std::net::Ipv4Addr::from(a));
                prop_assert_eq!(bulk[k], r.lookup(a));
            }
        }

        #[test]
        fn ipv6_agrees_with_the_reference(seed in any::<u64>(), n in 1usize..200) {
            let counts: Vec<(u8, usize)> = [0u8, 3, 16, 24, 25, 32, 40, 47, 48, 56, 64, 100, 127, 128]
                .iter().map(|&l| (l, n / 14 + 1)).collect();
            let routes = random_table6(&counts, 16, seed);
            let (t, r) = (Lpm6::new(&routes).unwrap(), Reference::new6(&routes));
            let mut rng = SplitMix(seed ^ 2);
            let mut addrs: Vec<u128> = (0..300).map(|_| u128::from(rng.next()) << 64 | u128::from(rng.next())).collect();
            addrs.extend(routes.iter().map(|rt| rt.prefix ^ ((u128::from(rng.next()) << 64 | u128::from(rng.next())) >> rt.len.min(127))));
            let mut bulk = vec![None; addrs.len()];
            t.lookup_bulk(&addrs, &mut bulk);
            for (k, &a) in addrs.iter().enumerate() {
                prop_assert_eq!(t.lookup(a), r.lookup(a), "{}", std::net::Ipv6Addr::from(a));
                prop_assert_eq!(bulk[k], r.lookup(a));
            }
        }
    }
}
