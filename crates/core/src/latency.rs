//! Latency records: an HDR histogram of TSC ticks that any port measuring latency keeps
//! (the in-memory sink now, a sink on a real interface later), mergeable across the
//! sinks of several stages or threads, summarised in nanoseconds.

use crate::tsc;
use hdrhistogram::Histogram;
use serde::Serialize;

/// Latency percentiles in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, schemars::JsonSchema)]
pub struct LatencySummary {
    pub samples: u64,
    pub min_ns: f64,
    pub p50_ns: f64,
    pub p90_ns: f64,
    pub p99_ns: f64,
    pub p999_ns: f64,
    pub max_ns: f64,
    pub mean_ns: f64,
}

/// Latency samples in TSC ticks, 1 tick to 60 s at up to 10 GHz, 3 significant digits:
/// fixed size, never resized while recording.
#[derive(Debug, Clone)]
pub struct LatencyRecord {
    ticks: Histogram<u64>,
}

impl Default for LatencyRecord {
    fn default() -> Self {
        LatencyRecord {
            ticks: Histogram::new_with_bounds(1, 600_000_000_000, 3).expect("valid histogram bounds"),
        }
    }
}

impl LatencyRecord {
    /// Records one sample; values past the bounds are clamped to them.
    #[inline]
    pub fn record(&mut self, ticks: u64) {
        self.ticks.saturating_record(ticks.max(1));
    }

    /// Adds another record's samples to this one's.
    pub fn merge(&mut self, other: &LatencyRecord) {
        // Same bounds on both sides (one constructor), so adding cannot fail.
        let _ = self.ticks.add(&other.ticks);
    }

    /// Forgets the samples so far (end of warm-up).
    pub fn reset(&mut self) {
        self.ticks.reset();
    }

    pub fn summary(&self) -> Option<LatencySummary> {
        let h = &self.ticks;
        if h.is_empty() {
            return None;
        }
        let ns = |ticks: u64| tsc::seconds(ticks) * 1e9;
        Some(LatencySummary {
            samples: h.len(),
            min_ns: ns(h.min()),
            p50_ns: ns(h.value_at_quantile(0.50)),
            p90_ns: ns(h.value_at_quantile(0.90)),
            p99_ns: ns(h.value_at_quantile(0.99)),
            p999_ns: ns(h.value_at_quantile(0.999)),
            max_ns: ns(h.max()),
            mean_ns: h.mean() / tsc::hz() * 1e9,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_adds_samples_and_reset_forgets_them() {
        let (mut a, mut b) = (LatencyRecord::default(), LatencyRecord::default());
        assert!(a.summary().is_none());
        a.record(100);
        b.record(300);
        b.record(0);
        a.merge(&b);
        let s = a.summary().unwrap();
        assert_eq!(s.samples, 3);
        assert!(s.min_ns < s.max_ns);
        a.reset();
        assert!(a.summary().is_none());
    }
}
