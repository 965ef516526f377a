//! A hash map from flow keys (nonzero `u64`) to table slots (`u32`) laid out so that a
//! batch can ask for its entries before it reads them: each bucket is one cache line of
//! four entries, a key's entries live in its home bucket or, when that was full, in the
//! next ones, and a bucket counts the entries that passed it full (so a lookup stops at
//! the first bucket nothing passed). `prefetch(key)` asks for the home bucket; with the
//! map at most half full nearly every key is there. Sized once: it never allocates after
//! `with_capacity`, and deletes leave no tombstones (the counts are undone).
//!
//! hashbrown's maps are faster for one lookup at a time, but give no way to ask for a
//! key's memory ahead: with a million flows every lookup is a trip to memory, and a
//! batch's trips overlap only if they can be started before they are waited for.

/// Entries per bucket: 4 keys and 4 values fill a 64-byte line with the count.
const WAYS: usize = 4;

#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct Bucket {
    keys: [u64; WAYS],
    values: [u32; WAYS],
    /// Entries stored past this bucket while it was full.
    passed: u32,
}

const _: () = assert!(std::mem::size_of::<Bucket>() == 64);

pub struct FlowMap {
    buckets: Vec<Bucket>,
    mask: usize,
    len: usize,
    /// The most entries it takes: half its room.
    capacity: usize,
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

impl FlowMap {
    /// A map for up to `capacity` entries, its memory (twice that room) allocated now.
    pub fn with_capacity(capacity: usize) -> FlowMap {
        let buckets = (2 * capacity.max(1)).div_ceil(WAYS).next_power_of_two();
        FlowMap {
            buckets: vec![Bucket::default(); buckets],
            mask: buckets - 1,
            len: 0,
            capacity,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes allocated.
    pub fn allocation_size(&self) -> usize {
        self.buckets.capacity() * std::mem::size_of::<Bucket>()
    }

    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        mix(key) as usize & self.mask
    }

    /// Asks for `key`'s home bucket, for a `get` a little later.
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        sfclab_core::prefetch(&self.buckets[self.home(key)]);
    }

    /// The value of `key` (nonzero).
    #[inline]
    pub fn get(&self, key: u64) -> Option<u32> {
        debug_assert!(key != 0);
        let mut b = self.home(key);
        loop {
            let bucket = &self.buckets[b];
            if let Some(w) = bucket.keys.iter().position(|&k| k == key) {
                return Some(bucket.values[w]);
            }
            if bucket.passed == 0 {
                return None;
            }
            b = (b + 1) & self.mask;
        }
    }

    pub fn contains_key(&self, key: u64) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key` (nonzero) to `value`; returns the value it had. Panics when a new key
    /// would pass the capacity given at `with_capacity` (callers bound their tables).
    pub fn insert(&mut self, key: u64, value: u32) -> Option<u32> {
        assert!(key != 0, "0 marks an empty entry");
        let home = self.home(key);
        // Present already: replaced in place.
        let mut b = home;
        loop {
            let bucket = &mut self.buckets[b];
            if let Some(w) = bucket.keys.iter().position(|&k| k == key) {
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
            if let Some(w) = bucket.keys.iter().position(|&k| k == 0) {
                bucket.keys[w] = key;
                bucket.values[w] = value;
                self.len += 1;
                return None;
            }
            bucket.passed += 1;
            b = (b + 1) & self.mask;
        }
    }

    /// Removes `key`; returns its value.
    pub fn remove(&mut self, key: u64) -> Option<u32> {
        let home = self.home(key);
        let mut b = home;
        loop {
            let bucket = &mut self.buckets[b];
            if let Some(w) = bucket.keys.iter().position(|&k| k == key) {
                bucket.keys[w] = 0;
                let value = bucket.values[w];
                // The buckets it passed no longer have it past them.
                let mut p = home;
                while p != b {
                    self.buckets[p].passed -= 1;
                    p = (p + 1) & self.mask;
                }
                self.len -= 1;
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
        let mut m = FlowMap::with_capacity(64);
        let mut model: HashMap<u64, u32> = HashMap::new();
        let mut x = 0x1234_5678_u64;
        for round in 0..200_000u32 {
            x = mix(x);
            let key = 1 + x % 200;
            if model.len() < 64 && x & 1 == 0 {
                assert_eq!(m.insert(key, round), model.insert(key, round), "insert {key}");
            } else {
                assert_eq!(m.remove(key), model.remove(&key), "remove {key}");
            }
            assert_eq!(m.len(), model.len());
            if round % 997 == 0 {
                for k in 1..=200 {
                    assert_eq!(m.get(k), model.get(&k).copied(), "get {k}");
                }
            }
        }
        // Emptied, every count is back to zero: deletes left nothing behind.
        for k in 1..=200 {
            m.remove(k);
        }
        assert!(m.is_empty());
        assert!(m.buckets.iter().all(|b| b.passed == 0 && b.keys == [0; WAYS]));
    }

    #[test]
    fn a_full_bucket_sends_keys_on_and_lookups_follow() {
        let mut m = FlowMap::with_capacity(8);
        // Keys whose home is bucket 0, more than a bucket holds.
        let same: Vec<u64> = (1..).filter(|&k| m.home(k) == 0).take(6).collect();
        for (v, &k) in same.iter().enumerate() {
            assert_eq!(m.insert(k, v as u32), None);
        }
        assert_eq!(m.buckets[0].passed, 2, "two went past the full home bucket");
        for (v, &k) in same.iter().enumerate() {
            assert_eq!(m.get(k), Some(v as u32));
        }
        assert_eq!(m.remove(same[5]), Some(5));
        assert_eq!(m.buckets[0].passed, 1);
        assert_eq!(m.get(same[4]), Some(4));
        assert_eq!(m.insert(same[4], 40), Some(4), "replaced in place");
        assert_eq!(m.len(), 5);
        assert_eq!(m.allocation_size(), m.buckets.len() * 64);
    }

    #[test]
    #[should_panic(expected = "FlowMap full")]
    fn refuses_more_than_its_capacity() {
        let mut m = FlowMap::with_capacity(2);
        for k in 1..=3 {
            m.insert(k, 0);
        }
    }
}
