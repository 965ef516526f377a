//! The time-stamp counter: the clock of every figure sfclab prints. On x86-64 it is
//! `rdtsc` (constant rate on any CPU of the last decade, and ~2x cheaper than
//! `Instant::now`); elsewhere a monotonic nanosecond clock stands in.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Current TSC value.
#[inline(always)]
pub fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions on x86-64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
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
    #[test]
    fn calibration_is_plausible_and_monotonic() {
        let hz = super::hz();
        assert!(hz > 1e8 && hz < 1e11, "TSC at {hz} Hz");
        let a = super::now();
        let b = super::now();
        assert!(b >= a);
        let t = super::ticks(std::time::Duration::from_secs(1));
        assert!((super::seconds(t) - 1.0).abs() < 1e-6);
    }
}
