//! The time-stamp counter: the clock of every figure sfclab prints. On x86-64 it is
//! `rdtsc` (constant rate on any CPU of the last decade, and ~2x cheaper than
//! `Instant::now`); elsewhere (and under Miri) a monotonic nanosecond clock stands in.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Current TSC value.
#[inline(always)]
pub fn now() -> u64 {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        // SAFETY: rdtsc has no preconditions on x86-64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    // Elsewhere, and under Miri (which has no rdtsc).
    #[cfg(any(not(target_arch = "x86_64"), miri))]
    {
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// TSC ticks per second, measured once per process against the OS monotonic clock.
pub fn hz() -> f64 {
    static HZ: OnceLock<f64> = OnceLock::new();
    *HZ.get_or_init(calibrate)
}

fn calibrate() -> f64 {
    // Median of a few short windows, so that one preemption does not skew it.
    let mut samples: Vec<f64> = (0..5)
        .map(|_| {
            let (t0, c0) = (Instant::now(), now());
            while t0.elapsed() < Duration::from_millis(10) {
                std::hint::spin_loop();
            }
            let (t1, c1) = (Instant::now(), now());
            (c1 - c0) as f64 / (t1 - t0).as_secs_f64()
        })
        .collect();
    samples.sort_by(f64::total_cmp);
    samples[2]
}

/// TSC ticks in `d`.
pub fn ticks(d: Duration) -> u64 {
    (d.as_secs_f64() * hz()) as u64
}

/// Seconds in `ticks` TSC ticks.
pub fn seconds(ticks: u64) -> f64 {
    ticks as f64 / hz()
}

#[cfg(test)]
mod tests {
    /// The TSC agrees with the OS clock over an interval neither was calibrated on
    /// (both read the same interval, so a loaded machine does not skew the ratio).
    #[test]
    fn tsc_agrees_with_the_os_clock_and_is_monotonic() {
        use std::time::{Duration, Instant};
        let hz = super::hz();
        assert!(hz > 1e8 && hz < 1e11, "TSC at {hz} Hz");
        let (t0, c0) = (Instant::now(), super::now());
        let mut last = c0;
        while t0.elapsed() < Duration::from_millis(if cfg!(miri) { 1 } else { 30 }) {
            let c = super::now();
            assert!(c >= last, "TSC went backwards");
            last = c;
        }
        let (c1, t1) = (super::now(), Instant::now());
        let by_tsc = super::seconds(c1 - c0);
        let by_os = (t1 - t0).as_secs_f64();
        if !cfg!(miri) {
            assert!((by_tsc / by_os - 1.0).abs() < 0.05, "TSC {by_tsc} s vs OS {by_os} s");
        }
    }
}
