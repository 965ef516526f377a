//! A hash map from flow keys to table slots (`u32`) laid out so that a batch can ask
//! for its entries before it reads them: each bucket is one cache line of `W` entries
//! (4 for nat44's 8-byte keys, 3 for the firewall's 5-tuples), a key lives in its home
//! bucket or, when that was full, in the next ones, and a bucket counts the entries that passed it full (so a lookup stops at
//! the first bucket nothing passed). `prefetch(key)` asks for the home bucket; with the
//! map at most half full nearly every key is there. Sized once: it never allocates after
//! `with_capacity`, and deletes leave no tombstones (the counts are undone).
//!
//! hashbrown's maps are faster for one lookup at a time, but give no way to ask for a
//! key's memory ahead: with a million flows every lookup is a trip to memory, and a
//! batch's trips overlap only if they can be started before they are waited for.

/// A key of the map.
pub trait FlowKey: Copy + Eq + Default {
    /// Its hash under `seed`: keys that collide under one seed do not under another.
    fn hash_with(&self, seed: u64) -> u64;
}

impl FlowKey for u64 {
    #[inline(always)]
    fn hash_with(&self, seed: u64) -> u64 {
        mix(*self ^ seed)
    }
}

impl FlowKey for crate::tables::acl::Key {
    /// Two rounds, the seed in the first: 13 bytes do not fold into 8 one to one, and a
    /// fold without the seed would let anyone pick 5-tuples that share a bucket.
    #[inline(always)]
    fn hash_with(&self, seed: u64) -> u64 {
        let ports = u64::from(self.proto) << 32 | u64::from(self.sport) << 16 | u64::from(self.dport);
        mix(mix((u64::from(self.src) << 32 | u64::from(self.dst)) ^ seed) ^ ports)
    }
}

/// `W` keys and their values on one 64-byte line; a value of `EMPTY` marks a free entry.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Bucket<K, const W: usize> {
    keys: [K; W],
    values: [u32; W],
    /// Entries stored past this bucket while it was full.
    passed: u32,
}

/// The value of a free entry (no table has 2^32 - 1 slots).
const EMPTY: u32 = u32::MAX;

impl<K: FlowKey, const W: usize> Bucket<K, W> {
    /// One cache line each, or the prefetch misses part of it.
    const ONE_LINE: () = assert!(std::mem::size_of::<Self>() == 64 && W <= 8);

    #[inline(always)]
    fn find(&self, key: &K) -> Option<usize> {
        // Every way compared, then the first hit taken: no branch per way.
        let mut hits = 0u32;
        for w in 0..W {
            hits |= u32::from(self.keys[w] == *key && self.values[w] != EMPTY) << w;
        }
        (hits != 0).then(|| hits.trailing_zeros() as usize)
    }
}

pub struct FlowMap<K: FlowKey, const W: usize> {
    buckets: Vec<Bucket<K, W>>,
    /// Mixed into every key's hash: random per map, so that nobody can pick flows that
    /// all land in one bucket.
    seed: u64,
    mask: usize,
    len: usize,
    /// The most entries it takes: half its room.
    capacity: usize,
    /// Keys added or removed so far.
    version: u64,
}

/// The splitmix64 finalizer: every key bit moves every bucket bit.
#[inline(always)]
fn mix(mut x: u64) -> u64 {
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ x >> 31
}

impl<K: FlowKey, const W: usize> FlowMap<K, W> {
    /// A map for up to `capacity` entries, its memory (twice that room) allocated now.
    pub fn with_capacity(capacity: usize) -> FlowMap<K, W> {
        let () = Bucket::<K, W>::ONE_LINE;
        let buckets = (2 * capacity.max(1)).div_ceil(W).next_power_of_two();
        FlowMap {
            buckets: vec![
                Bucket {
                    keys: [K::default(); W],
                    values: [EMPTY; W],
                    passed: 0,
                };
                buckets
            ],
            seed: {
                use std::hash::BuildHasher;
                std::collections::hash_map::RandomState::new().hash_one(0x005f_c1ab)
            },
            mask: buckets - 1,
            len: 0,
            capacity,
            version: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Moves on whenever a key is added or removed: a lookup's "absent" still holds
    /// while it has not moved.
    pub fn version(&self) -> u64 {
        self.version
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes allocated.
    pub fn allocation_size(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<Bucket<K, W>>()
    }

    #[inline(always)]
    fn home(&self, key: &K) -> usize {
        key.hash_with(self.seed) as usize & self.mask
    }

    /// Asks for `key`'s home bucket, for a `get` a little later.
    #[inline(always)]
    pub fn prefetch(&self, key: &K) {
        sfclab_core::prefetch(&self.buckets[self.home(key)]);
    }

    /// The value of `key`.
    #[inline]
    pub fn get(&self, key: &K) -> Option<u32> {
        let mut b = self.home(key);
        loop {
            let bucket = &self.buckets[b];
            if let Some(w) = bucket.find(key) {
                return Some(bucket.values[w]);
            }
            if bucket.passed == 0 {
                return None;
            }
            b = (b + 1) & self.mask;
        }
    }

    pub fn contains_key(&self, key: &K) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key` to `value`; returns the value it had. Panics when a new key would pass
    /// the capacity given at `with_capacity` (callers bound their tables).
    pub fn insert(&mut self, key: K, value: u32) -> Option<u32> {
        assert!(value != EMPTY, "u32::MAX marks a free entry");
        let home = self.home(&key);
        // Present already: replaced in place.
        let mut b = home;
        loop {
            let bucket = &mut self.buckets[b];
            if let Some(w) = bucket.find(&key) {
                return Some(std::mem::replace(&mut bucket.values[w], value));
            }
            if bucket.passed == 0 {
                break;
            }
            b = (b + 1) & self.mask;
        }
        assert!(self.len < self.capacity, "FlowMap full: {} entries", self.len);
        // New: the first free entry from home on, counting the full buckets passed.
        let mut b = home;
        loop {
            let bucket = &mut self.buckets[b];
            if let Some(w) = (0..W).find(|&w| bucket.values[w] == EMPTY) {
                bucket.keys[w] = key;
                bucket.values[w] = value;
                self.len += 1;
                self.version += 1;
                return None;
            }
            bucket.passed += 1;
            b = (b + 1) & self.mask;
        }
    }

    /// Removes `key`; returns its value.
    pub fn remove(&mut self, key: &K) -> Option<u32> {
        let home = self.home(key);
        let mut b = home;
        loop {
            let bucket = &mut self.buckets[b];
            if let Some(w) = bucket.find(key) {
                let value = std::mem::replace(&mut bucket.values[w], EMPTY);
                // The buckets it passed no longer have it past them.
                let mut p = home;
                while p != b {
                    self.buckets[p].passed -= 1;
                    p = (p + 1) & self.mask;
                }
                self.len -= 1;
                self.version += 1;
                return Some(value);
            }
            if bucket.passed == 0 {
                return None;
            }
            b = (b + 1) & self.mask;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn behaves_as_a_map_under_churn_and_keeps_no_trace_of_what_left() {
        // A small map, so buckets overflow: keys chosen to share few home buckets.
        let mut m = FlowMap::<u64, 4>::with_capacity(64);
        let mut model: HashMap<u64, u32> = HashMap::new();
        let mut x = 0x1234_5678_u64;
        for round in 0..200_000u32 {
            x = mix(x);
            let key = 1 + x % 200;
            if model.len() < 64 && x & 1 == 0 {
                assert_eq!(m.insert(key, round), model.insert(key, round), "insert {key}");
            } else {
                assert_eq!(m.remove(&key), model.remove(&key), "remove {key}");
            }
            assert_eq!(m.len(), model.len());
            if round % 997 == 0 {
                for k in 1..=200 {
                    assert_eq!(m.get(&k), model.get(&k).copied(), "get {k}");
                }
            }
        }
        // Emptied, every count is back to zero: deletes left nothing behind.
        for k in 1..=200 {
            m.remove(&k);
        }
        assert!(m.is_empty());
        assert!(m.buckets.iter().all(|b| b.passed == 0 && b.values == [EMPTY; 4]));
    }

    #[test]
    fn a_full_bucket_sends_keys_on_and_lookups_follow() {
        let mut m = FlowMap::<u64, 4>::with_capacity(8);
        // Keys whose home is bucket 0, more than a bucket holds.
        let same: Vec<u64> = (0..).filter(|k| m.home(k) == 0).take(6).collect();
        for (v, &k) in same.iter().enumerate() {
            assert_eq!(m.insert(k, v as u32), None);
        }
        assert_eq!(m.buckets[0].passed, 2, "two went past the full home bucket");
        for (v, &k) in same.iter().enumerate() {
            assert_eq!(m.get(&k), Some(v as u32));
        }
        assert_eq!(m.remove(&same[5]), Some(5));
        assert_eq!(m.buckets[0].passed, 1);
        assert_eq!(m.get(&same[4]), Some(4));
        assert_eq!(m.insert(same[4], 40), Some(4), "replaced in place");
        assert_eq!(m.len(), 5);
        assert_eq!(m.allocation_size(), m.buckets.len() * 64);
    }

    #[test]
    #[should_panic(expected = "FlowMap full")]
    fn refuses_more_than_its_capacity() {
        let mut m = FlowMap::<u64, 4>::with_capacity(2);
        for k in 1..=3 {
            m.insert(k, 0);
        }
    }
}
