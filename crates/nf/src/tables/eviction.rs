//! The line a new entry walks when its table is full, to find one that may give way,
//! as netfilter's `early_drop` does: entries in the order they were made, each with its
//! slot's generation then (a slot reused since is a stale entry), and one bit per slot
//! saying its entry is assured (it carries a flow that works: never taken). An assured
//! or stale entry the walk meets leaves the line for good, and an entry that stops being
//! assured lines up again, so the walk costs a constant per entry made. The line holds at
//! most twice the table: when it is full, half or more of it is stale and is dropped, so
//! it never grows past what was allocated. Used by nat44 and the firewall.

use std::collections::VecDeque;

/// How far along the line one new entry looks: the bound caps what one packet can meet.
pub const EVICTION_LOOKS: usize = 1024;

pub struct EvictionLine {
    age: VecDeque<(u32, u32)>,
    generation: Vec<u32>,
    assured: Vec<u64>,
}

impl EvictionLine {
    /// The line of a table of `slots` entries, allocated whole.
    pub fn new(slots: usize) -> EvictionLine {
        EvictionLine {
            age: VecDeque::with_capacity(2 * slots),
            generation: vec![0; slots],
            assured: vec![0; slots.div_ceil(64)],
        }
    }

    /// Its memory, allocated at `new`.
    pub fn bytes(&self) -> usize {
        self.age.capacity() * 8 + self.generation.capacity() * 4 + self.assured.capacity() * 8
    }

    /// A new entry in `slot` (`live(s)`: slot `s` holds an entry): it lines up at the back.
    pub fn made(&mut self, slot: u32, live: impl Fn(u32) -> bool) {
        let g = &mut self.generation[slot as usize];
        *g = g.wrapping_add(1);
        self.line_up(slot, live);
    }

    /// The entry in `slot` is assured now, or not; one that stops being assured lines
    /// up again, where it can give way.
    #[inline]
    pub fn assure(&mut self, slot: u32, assured: bool, live: impl Fn(u32) -> bool) {
        let (word, bit) = (slot as usize / 64, 1u64 << (slot % 64));
        let was = self.assured[word] & bit != 0;
        if assured && !was {
            self.assured[word] |= bit;
        } else if was && !assured {
            self.assured[word] &= !bit;
            self.line_up(slot, live);
        }
    }

    /// The entry in `slot` is gone (its line entry, if any, is stale now).
    pub fn freed(&mut self, slot: u32) {
        self.assured[slot as usize / 64] &= !(1 << (slot % 64));
    }

    /// The oldest entry that may give way (live, not assured), taken off the line; the
    /// caller frees it or, if it finds it assured after all, leaves it out of the line.
    pub fn candidate(&mut self, live: impl Fn(u32) -> bool) -> Option<u32> {
        for _ in 0..EVICTION_LOOKS {
            let (slot, generation) = self.age.pop_front()?;
            let s = slot as usize;
            if self.generation[s] == generation && self.assured[s / 64] & 1 << (s % 64) == 0 && live(slot) {
                return Some(slot);
            }
        }
        None
    }

    /// The slot of the `k`-th entry on the line from the front (stale or assured ones
    /// included): where the next walks will most likely look, for a prefetch.
    #[inline]
    pub fn upcoming(&self, k: usize) -> Option<u32> {
        self.age.get(k).map(|&(slot, _)| slot)
    }

    fn line_up(&mut self, slot: u32, live: impl Fn(u32) -> bool) {
        if self.age.len() == self.age.capacity() {
            let (generation, assured) = (&self.generation, &self.assured);
            self.age.retain(|&(s, g)| {
                let u = s as usize;
                generation[u] == g && assured[u / 64] & 1 << (u % 64) == 0 && live(s)
            });
        }
        self.age.push_back((slot, self.generation[slot as usize]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_come_oldest_first_without_the_assured_or_the_stale() {
        let mut line = EvictionLine::new(8);
        let live = |_| true;
        for s in 0..4 {
            line.made(s, live);
        }
        line.assure(0, true, live);
        line.freed(1);
        line.made(1, live); // reused: its first entry is stale
        assert_eq!(line.candidate(live), Some(2), "0 assured, 1's first entry stale");
        assert_eq!(line.candidate(live), Some(3));
        assert_eq!(line.candidate(live), Some(1));
        assert_eq!(line.candidate(live), None);
        // 0 stops being assured: it lines up again.
        line.assure(0, false, live);
        assert_eq!(line.candidate(live), Some(0));
    }

    #[test]
    fn the_line_never_grows_past_twice_the_table() {
        let mut line = EvictionLine::new(4);
        let capacity = line.age.capacity();
        for round in 0..10_000u32 {
            let s = round % 4;
            line.freed(s);
            line.made(s, |_| true);
        }
        assert_eq!(line.age.capacity(), capacity);
    }
}
