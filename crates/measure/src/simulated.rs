//! Simulated devices under test with known answers, for checking searches (here, in the
//! tests, and against the MLRsearch reference in `reference/`).

use serde::{Deserialize, Serialize};
use std::time::Duration;

use crate::trial::{Trial, TrialResult};

/// A DUT that forwards up to `capacity_pps` and loses the excess, and now and then
/// stalls (a vCPU descheduled on a VM): in a share `stall_share` of trials it stops for
/// `stall_s`, its queue of `queue` packets absorbs what it can, and the rest is lost,
/// at any load. Deterministic for a seed.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StallingDut {
    pub capacity_pps: f64,
    pub stall_share: f64,
    pub stall_s: f64,
    pub queue: f64,
    pub seed: u64,
    /// Highest rate the simulated generator offers (`null`: any).
    #[serde(default)]
    pub source_limit_pps: Option<f64>,
}

impl StallingDut {
    /// Loss ratio of one trial at `load` for `duration_s`, given whether it stalled.
    pub fn loss_ratio(&self, load: f64, duration_s: f64, stalled: bool) -> f64 {
        let offered = load * duration_s;
        let mut lost = (load - self.capacity_pps).max(0.0) * duration_s;
        if stalled {
            lost += (load * self.stall_s - self.queue).max(0.0);
        }
        (lost / offered.max(1.0)).min(1.0)
    }

    fn next_uniform(&mut self) -> f64 {
        // SplitMix64: the Python reference test uses the same sequence.
        self.seed = self.seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.seed;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl Trial for StallingDut {
    fn run(&mut self, offered_pps: f64, duration: Duration) -> Result<TrialResult, String> {
        let d = duration.as_secs_f64();
        let rate = offered_pps.min(self.source_limit_pps.unwrap_or(f64::INFINITY));
        let stalled = self.next_uniform() < self.stall_share;
        let sent = (rate * d).round() as u64;
        let received = (sent as f64 * (1.0 - self.loss_ratio(rate, d, stalled))).round() as u64;
        Ok(TrialResult::new(offered_pps, d, sent, received.min(sent)))
    }
}
