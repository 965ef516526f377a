//! One trial: traffic at an offered rate for a duration, then the counts.

use serde::Serialize;
use std::time::Duration;

/// What one trial measured. Loss is counted against packets actually sent.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct TrialResult {
    /// The rate asked for, packets per second.
    pub offered_pps: f64,
    /// The trial duration asked for, seconds (what tells long trials from short ones).
    pub intended_duration_s: f64,
    /// The measured window, seconds (what rates and duration sums use).
    pub duration_s: f64,
    pub sent: u64,
    pub received: u64,
    /// `(sent - received) / sent` (0 when nothing was sent).
    pub loss_ratio: f64,
    /// False when the trial cannot count: the generator did not offer the rate.
    pub valid: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invalid_reason: Option<String>,
    /// Set when this trial counts although the generator fell short (what would have
    /// made it invalid), saying why the shortfall was the source's stalls, not its
    /// capacity: its pacer skipped what fell due while it had time to spare
    /// ([`TrialResult::count_despite_stalls`]), or a search had already seen the source
    /// pace this load or a higher one (the fullest of the retries counts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shortfall_accepted: Option<String>,
}

/// Share of the offered packets the generator must really send for a valid trial.
pub const MIN_OFFERED_SHARE: f64 = 0.99;

/// A generator working less than this share of its window had time to spare: what it
/// fell short was skipped in gaps, not beyond its speed.
pub const SOURCE_HEADROOM_BUSY_SHARE: f64 = 0.9;

/// The largest shortfall a stall may explain and the trial still count (5%: a 10 ms gap
/// in a 200 ms trial); past it the trial is retried, and a search takes a source that
/// falls further short for one at its capacity.
pub const STALL_SHORTFALL_SHARE: f64 = 0.05;

impl TrialResult {
    /// A result from counts, with validity judged against the offered rate.
    pub fn new(offered_pps: f64, duration_s: f64, sent: u64, received: u64) -> TrialResult {
        let lost = sent.saturating_sub(received);
        let loss_ratio = if sent == 0 { 0.0 } else { lost as f64 / sent as f64 };
        let expected = offered_pps * duration_s;
        let (valid, invalid_reason) = if (sent as f64) < MIN_OFFERED_SHARE * expected {
            (
                false,
                Some(format!(
                    "the generator sent {sent} of {expected:.0} packets ({:.1}% of the offered rate): the source, not the chain, was the limit",
                    100.0 * sent as f64 / expected.max(1.0)
                )),
            )
        } else {
            (true, None)
        };
        TrialResult {
            offered_pps,
            intended_duration_s: duration_s,
            duration_s,
            sent,
            received,
            loss_ratio,
            valid,
            invalid_reason,
            shortfall_accepted: None,
        }
    }

    /// Counts a trial the generator fell short of when the shortfall was its stalls,
    /// not its capacity: its pacer skipped (`skipped` packets) what fell due while its
    /// core was away (a descheduled vCPU), and outside those gaps it waited on the pacer
    /// (`source_busy_share` of the window working, below [`SOURCE_HEADROOM_BUSY_SHARE`]).
    /// The device still met the rate between the gaps, as a hardware tester's device
    /// meets it, and its loss counts against what was sent. A shortfall the skips do not
    /// account for, or beyond [`STALL_SHORTFALL_SHARE`] of the packets, stays invalid:
    /// the search retries it. Returns whether the trial now counts.
    pub fn count_despite_stalls(&mut self, skipped: u64, source_busy_share: f64) -> bool {
        if self.valid {
            return true;
        }
        let expected = self.offered_pps * self.duration_s;
        let short = (expected - self.sent as f64).max(0.0);
        let skips_explain_it = skipped as f64 >= 0.9 * short;
        let small = self.sent as f64 >= (1.0 - STALL_SHORTFALL_SHARE) * expected;
        if !(skips_explain_it && small && source_busy_share < SOURCE_HEADROOM_BUSY_SHARE) {
            return false;
        }
        self.valid = true;
        self.invalid_reason = None;
        self.shortfall_accepted = Some(format!(
            "the generator sent {:.1}% of the offered packets: its pacer skipped {skipped} that fell due while its core was away, and it worked {:.0}% of the window (a stall, not its capacity)",
            100.0 * self.sent as f64 / expected.max(1.0),
            100.0 * source_busy_share
        ));
        true
    }

    /// Receive rate, packets per second.
    pub fn received_pps(&self) -> f64 {
        self.received as f64 / self.duration_s
    }
}

/// Runs one trial. Implemented over the real runtimes, and by simulated chains in tests.
pub trait Trial {
    fn run(&mut self, offered_pps: f64, duration: Duration) -> Result<TrialResult, String>;

    /// True once the user asked to stop (Ctrl-C): a failed `run` then ends the search
    /// with what it has, marked interrupted, instead of failing it.
    fn interrupted(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_is_against_what_was_sent_and_short_sends_are_invalid() {
        let t = TrialResult::new(1e6, 1.0, 1_000_000, 999_990);
        assert!(t.valid);
        assert!((t.loss_ratio - 1e-5).abs() < 1e-12);
        let t = TrialResult::new(1e6, 1.0, 900_000, 900_000);
        assert!(!t.valid);
        assert_eq!(t.loss_ratio, 0.0, "no loss, but the rate was not offered");
        assert!(t.invalid_reason.unwrap().contains("90.0%"));
        assert_eq!(TrialResult::new(0.0, 1.0, 0, 0).loss_ratio, 0.0);
    }

    #[test]
    fn a_shortfall_counts_only_when_skipped_in_gaps_by_a_source_with_time_to_spare() {
        let short = || TrialResult::new(6.6e6, 0.2, 1_299_000, 1_299_000);
        // 1.6% short, all of it skipped by the pacer, the generator 40% busy: a stall.
        let mut t = short();
        assert!(!t.valid);
        assert!(t.count_despite_stalls(21_000, 0.4));
        assert!(t.valid && t.invalid_reason.is_none());
        assert!(t.shortfall_accepted.as_deref().unwrap().contains("98.4%"), "{t:?}");
        // The same shortfall from a generator at its speed is its capacity.
        let mut t = short();
        assert!(!t.count_despite_stalls(21_000, 0.97));
        assert!(!t.valid && t.shortfall_accepted.is_none() && t.invalid_reason.is_some());
        // Packets missing that the pacer never skipped (a pool ran dry, a transmit
        // refused them) are not a stall.
        assert!(!short().count_despite_stalls(2_000, 0.4));
        // A gap of more than 5% of the window is retried, not counted.
        let mut t = TrialResult::new(6.6e6, 0.2, 1_188_000, 1_188_000);
        assert!(!t.count_despite_stalls(132_000, 0.3));
        // A valid trial is left as it is.
        let mut t = TrialResult::new(1e6, 1.0, 1_000_000, 999_000);
        assert!(t.count_despite_stalls(0, 1.0) && t.shortfall_accepted.is_none());
    }
}
