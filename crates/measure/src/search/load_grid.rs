//! The loads MLRsearch may measure: a logarithmic grid of integers from the minimum load
//! (0) to the maximum (`max_index`), fine enough that every goal's relative width is a
//! whole number of steps to within 1% (the reference's `LoadRounding`). Loads, widths
//! and the middle of an interval are integer arithmetic on the grid, so a load is never
//! measured twice under two spellings and every search step is exact.

/// A load grid between two loads, for a set of relative widths.
#[derive(Debug, Clone)]
pub(super) struct LoadGrid {
    min: f64,
    max: f64,
    max_index: i64,
}

/// How close a goal's width must be to a whole number of grid steps (the reference's
/// `quality_lower` and `quality_upper`).
const QUALITY: (f64, f64) = (0.99, 0.999_999);

impl LoadGrid {
    /// `widths` are relative (0.005 is 0.5%); `0 < min < max`.
    pub(super) fn new(min: f64, max: f64, widths: &[f64]) -> LoadGrid {
        let span = max.ln() - min.ln();
        let log_widths: Vec<f64> = widths.iter().map(|w| -(-w).ln_1p()).collect();
        let mut candidate: i64 = 1;
        loop {
            let unit = span / candidate as f64;
            let mut next = (candidate + 1) as f64;
            let mut acceptable = true;
            for lw in &log_widths {
                let units = lw / unit;
                let whole = units.floor();
                let quality = whole / units;
                if !(QUALITY.0..=QUALITY.1).contains(&quality) {
                    acceptable = false;
                    next = next.max((whole + 1.0) / QUALITY.1 / units * candidate as f64);
                }
            }
            if acceptable {
                return LoadGrid {
                    min,
                    max,
                    max_index: candidate,
                };
            }
            candidate = next.ceil() as i64;
        }
    }

    pub(super) fn max_index(&self) -> i64 {
        self.max_index
    }

    /// The load at grid index `i` (the ends for indices beyond them).
    ///
    /// Each index is a node of the binary subdivision of `[0, max_index]`; its load is
    /// interpolated logarithmically between the loads of its interval's ends, as the
    /// reference's cache computes it, so both name the same float for the same index.
    pub(super) fn load(&self, i: i64) -> f64 {
        if i <= 0 {
            return self.min;
        }
        if i >= self.max_index {
            return self.max;
        }
        self.descend(|mid, _| mid.cmp(&i)).1
    }

    /// The highest grid index whose load is at most `load`.
    pub(super) fn index(&self, load: f64) -> i64 {
        if load <= self.min {
            return 0;
        }
        if load >= self.max {
            return self.max_index;
        }
        self.descend(|_, mid_load| mid_load.total_cmp(&load)).0
    }

    /// Walks the subdivision down, `towards(mid, mid_load)` saying where the sought value
    /// lies; returns the node found equal, or else the lower end of the last interval.
    fn descend(&self, towards: impl Fn(i64, f64) -> std::cmp::Ordering) -> (i64, f64) {
        let (mut lo, mut hi, mut lo_load, mut hi_load) = (0, self.max_index, self.min, self.max);
        while hi - lo >= 2 {
            let mid = (hi + lo) / 2;
            let mut log_coeff = hi_load.ln() - lo_load.ln();
            log_coeff *= (mid - lo) as f64 / (hi - lo) as f64;
            let mid_load = lo_load * log_coeff.exp();
            match towards(mid, mid_load) {
                std::cmp::Ordering::Less => (lo, lo_load) = (mid, mid_load),
                std::cmp::Ordering::Greater => (hi, hi_load) = (mid, mid_load),
                std::cmp::Ordering::Equal => return (mid, mid_load),
            }
        }
        (lo, lo_load)
    }

    /// A relative width in grid steps, rounded down (the reference's `DiscreteWidth`).
    pub(super) fn width(&self, relative: f64) -> i64 {
        let increased = self.min / (1.0 - relative);
        let i = self.index(increased);
        if self.load(i) > increased { i - 1 } else { i }
    }
}

/// The load the reference bisects `[lo, hi]` at for a goal width `goal`, in grid steps:
/// the upper part a power-of-two multiple of the goal width, so that later halvings land
/// on the goal width exactly (its `DiscreteInterval.middle`).
pub(super) fn middle(lo: i64, hi: i64, goal: i64) -> i64 {
    let width = hi - lo;
    debug_assert!(width > goal && goal > 0, "no middle of {lo}..{hi} at {goal}");
    if width == 2 * goal {
        return lo + goal;
    }
    if width < 2 * goal {
        if goal % 2 == 0 {
            return middle(lo, hi, goal / 2);
        }
        return lo + width / 2;
    }
    let (mut hi_width, mut lo_width) = (goal, width - goal);
    let (mut hi2_width, mut lo2_width);
    loop {
        hi2_width = hi_width * 2;
        lo2_width = width - hi2_width;
        if lo2_width <= hi2_width {
            break;
        }
        (hi_width, lo_width) = (hi2_width, lo2_width);
    }
    if hi_width * lo_width > hi2_width * lo2_width {
        lo2_width = hi_width;
    }
    lo + lo2_width
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_spans_the_range_and_loads_round_down_onto_it() {
        let g = LoadGrid::new(10e3, 20e6, &[0.005]);
        assert_eq!(g.load(0), 10e3);
        assert_eq!(g.load(g.max_index()), 20e6);
        let mut last = 0.0;
        for i in 0..=g.max_index() {
            let l = g.load(i);
            assert!(l > last, "index {i}: {l} after {last}");
            assert_eq!(g.index(l), i, "a grid load is its own index");
            assert_eq!(g.index(l * (1.0 + 1e-12)), i, "just above rounds down");
            last = l;
        }
        // The goal width is a whole number of steps to within 1%, rounded down.
        let w = g.width(0.005);
        let relative = 1.0 - g.load(0) / g.load(w);
        assert!((0.005 * 0.99..=0.005).contains(&relative), "{w} steps: {relative}");
    }

    #[test]
    fn the_grid_names_the_loads_the_reference_names() {
        // From MLRsearch 1.2.1's LoadRounding(10e3, 20e6, [0.005]): the same index is
        // the same float, so both searches measure the same loads.
        let g = LoadGrid::new(10e3, 20e6, &[0.005]);
        assert_eq!(g.max_index(), 1517);
        assert_eq!(g.load(700), 333_593.463_664_914_2);
        assert_eq!(g.load(1234), 4_844_120.160_655_826);
        assert_eq!(g.width(0.005), 1);
    }

    #[test]
    fn the_middle_leaves_the_upper_part_a_power_of_two_of_the_goal() {
        assert_eq!(middle(0, 10, 5), 5);
        assert_eq!(middle(0, 7, 4), 3, "below two goals, an even goal is halved");
        assert_eq!(middle(0, 7, 5), 3, "below two goals, an odd one splits the width");
        // 100 = 36 + 64: the upper part is 4x the goal of 16.
        assert_eq!(middle(0, 100, 16), 36);
        assert_eq!(middle(10, 110, 16), 46);
    }
}
