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
    /// Set when a search counted this trial although the generator fell short (what
    /// would have made it invalid): the source had already paced this load or a higher
    /// one, so the shortfall was its stalls; the fullest of the retries counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shortfall_accepted: Option<String>,
}

/// Share of the offered packets the generator must really send for a valid trial.
pub const MIN_OFFERED_SHARE: f64 = 0.99;

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
}
