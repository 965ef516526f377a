//! ESP's anti-replay window (RFC 4303 §3.4.3), with 64-bit extended sequence numbers
//! reconstructed from the 32 bits a packet carries (RFC 4303 Appendix A2). A received
//! number is first checked (`check`: too old, already seen, or new), and the window
//! moves only once the packet's integrity check passed (`accept`), as §3.4.3 requires:
//! a forged packet cannot shift it. The bitmap is circular (bit `seq mod W`), so moving
//! the window clears the words it passes over instead of shifting the whole map.

/// Why a sequence number is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replay {
    /// Left of the window: too old to tell (counted as a replay by RFC 4303).
    Stale,
    /// Inside the window and seen before.
    Duplicate,
    /// Zero, which no sender sends (the first packet of an SA is 1).
    Zero,
}

/// The receiver's window of one SA.
#[derive(Debug, Clone)]
pub struct ReplayWindow {
    /// Bits, `size` of them in all: bit `seq % size` says `seq` was accepted, for the
    /// `size` numbers up to `top`.
    bits: Vec<u64>,
    size: u64,
    /// The highest number accepted (0: none yet).
    top: u64,
    esn: bool,
}

impl ReplayWindow {
    /// A window of `size` packets (rounded up to a multiple of 64; at least 64), over
    /// 32-bit numbers or, with `esn`, 64-bit ones.
    pub fn new(size: u32, esn: bool) -> ReplayWindow {
        let words = size.max(64).div_ceil(64) as usize;
        ReplayWindow {
            bits: vec![0; words],
            size: words as u64 * 64,
            top: 0,
            esn,
        }
    }

    pub fn size(&self) -> u64 {
        self.size
    }

    /// The full number a packet carrying `low` has, by RFC 4303 Appendix A2 (with ESN),
    /// or `low` itself; its high half is what the ICV's additional data covers.
    pub fn full(&self, low: u32) -> u64 {
        if !self.esn {
            return u64::from(low);
        }
        let (th, tl) = ((self.top >> 32) as u32, self.top as u32);
        let w = self.size as u32;
        let bottom = tl.wrapping_sub(w - 1);
        let high = if tl >= w - 1 {
            // The window lies in one subspace: below its bottom is the next subspace.
            if low >= bottom { th } else { th.wrapping_add(1) }
        } else if low >= bottom {
            // The window spans two subspaces: at or above its bottom is the previous one
            // (none before the first: there it is the first, far ahead).
            th.saturating_sub(1)
        } else {
            th
        };
        u64::from(high) << 32 | u64::from(low)
    }

    /// Whether `seq` (a full number, from `full`) may be accepted; changes nothing.
    pub fn check(&self, seq: u64) -> Result<(), Replay> {
        if seq == 0 {
            return Err(Replay::Zero);
        }
        if seq > self.top {
            return Ok(());
        }
        if self.top - seq >= self.size {
            return Err(Replay::Stale);
        }
        if self.bit(seq) {
            return Err(Replay::Duplicate);
        }
        Ok(())
    }

    /// Records `seq` (checked, and its packet authenticated): the window moves when it
    /// is the highest yet.
    pub fn accept(&mut self, seq: u64) {
        if seq > self.top {
            let ahead = seq - self.top;
            if ahead >= self.size {
                self.bits.fill(0);
            } else {
                for s in self.top + 1..=seq {
                    self.clear(s);
                }
            }
            self.top = seq;
        }
        let (word, bit) = self.place(seq);
        self.bits[word] |= bit;
    }

    /// The highest number accepted.
    pub fn top(&self) -> u64 {
        self.top
    }

    fn place(&self, seq: u64) -> (usize, u64) {
        let at = seq % self.size;
        ((at / 64) as usize, 1 << (at % 64))
    }

    fn bit(&self, seq: u64) -> bool {
        let (word, bit) = self.place(seq);
        self.bits[word] & bit != 0
    }

    fn clear(&mut self, seq: u64) {
        let (word, bit) = self.place(seq);
        self.bits[word] &= !bit;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// check then accept, as the decrypting NF does for an authentic packet.
    fn take(w: &mut ReplayWindow, low: u32) -> Result<u64, Replay> {
        let seq = w.full(low);
        w.check(seq)?;
        w.accept(seq);
        Ok(seq)
    }

    #[test]
    fn in_order_out_of_order_duplicates_and_stale_numbers() {
        let mut w = ReplayWindow::new(64, false);
        assert_eq!(take(&mut w, 0), Err(Replay::Zero));
        for s in 1..=10 {
            assert_eq!(take(&mut w, s), Ok(u64::from(s)));
        }
        assert_eq!(take(&mut w, 10), Err(Replay::Duplicate));
        assert_eq!(take(&mut w, 100), Ok(100), "a jump ahead moves the window");
        assert_eq!(take(&mut w, 37), Ok(37), "inside the window, unseen: late but fine");
        assert_eq!(take(&mut w, 37), Err(Replay::Duplicate));
        assert_eq!(
            take(&mut w, 36),
            Err(Replay::Stale),
            "100 - 36 = 64: left of the window"
        );
        assert_eq!(take(&mut w, 99), Ok(99));
        // A number the jump passed over was cleared: 50 was never seen.
        assert_eq!(take(&mut w, 50), Ok(50));
    }

    #[test]
    fn only_an_accepted_number_moves_the_window() {
        let mut w = ReplayWindow::new(64, false);
        take(&mut w, 5).unwrap();
        // A forged packet far ahead is checked, fails its ICV, and is never accepted.
        assert_eq!(w.check(w.full(1_000_000)), Ok(()));
        assert_eq!(w.top(), 5);
        assert_eq!(take(&mut w, 4), Ok(4), "the window did not move past 4");
    }

    #[test]
    fn the_window_keeps_its_size_across_wraps_of_the_circular_map() {
        for size in [64, 100, 1024] {
            let mut w = ReplayWindow::new(size, false);
            let n = w.size();
            for s in 1..=5 * n {
                take(&mut w, s as u32).unwrap();
                // Every number of the window is seen; the one just left of it is stale.
                if s > n {
                    assert_eq!(w.check(s - n + 1), Err(Replay::Duplicate), "size {size} at {s}");
                    assert_eq!(w.check(s - n), Err(Replay::Stale), "size {size} at {s}");
                }
            }
        }
        assert_eq!(ReplayWindow::new(100, false).size(), 128, "rounded up to whole words");
    }

    /// RFC 4303 Appendix A2: the high half is inferred from where the low half falls
    /// relative to the window, in both of its cases.
    #[test]
    fn extended_numbers_cross_the_32_bit_boundary() {
        let mut w = ReplayWindow::new(64, true);
        // Case A (window in one subspace): just below 2^32.
        let near = (1u64 << 32) - 10;
        w.accept(near);
        assert_eq!(w.full(u32::MAX), (1 << 32) - 1);
        assert_eq!(w.full(0), 1 << 32, "below the window's bottom: the next subspace");
        assert_eq!(w.full(5), (1 << 32) + 5);
        assert_eq!(take(&mut w, 3), Ok((1 << 32) + 3));
        // Case B (window spans two subspaces): top is 2^32 + 3.
        assert_eq!(w.full(u32::MAX - 20), (1 << 32) - 21, "inside the window's old part");
        assert_eq!(w.check(w.full(u32::MAX - 9)), Err(Replay::Duplicate), "accepted before");
        assert_eq!(
            take(&mut w, u32::MAX - 5),
            Ok((1 << 32) - 6),
            "unseen, inside the window"
        );
        assert_eq!(w.full(4), (1 << 32) + 4);
        assert_eq!(take(&mut w, 200), Ok((1 << 32) + 200));
        // At an SA's start there is no subspace before the first.
        let mut fresh = ReplayWindow::new(64, true);
        fresh.accept(5);
        assert_eq!(fresh.full(u32::MAX), u64::from(u32::MAX), "far ahead, not 2^64 - 1");
        // Without ESN the same numbers are only 32 bits.
        let mut plain = ReplayWindow::new(64, false);
        plain.accept(u64::from(u32::MAX) - 10);
        assert_eq!(plain.full(3), 3);
        assert_eq!(plain.check(3), Err(Replay::Stale));
    }
}
