//! Offered rate and pacing.
//!
//! A rate is `max`, packets per second (`10Mpps`, `500kpps`, `1e6pps`) or an L1 bit rate
//! (`10Gbit/s`, `2.5Gbps`), which counts each frame's 20 bytes of preamble and gap, as
//! line-rate figures do. The pacer keeps a credit against the TSC: each batch it learns
//! how many packets or bits are due, and never bursts more than `max_backlog` behind.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(tag = "kind", content = "value", rename_all = "snake_case")]
pub enum Rate {
    Max,
    /// Packets per second.
    Pps(f64),
    /// Bits per second on the wire (L1: frame + FCS + 20 B preamble and gap).
    L1Bps(f64),
}

impl Rate {
    /// Packets per second this rate asks for at frames of `mean_frame` bytes (FCS
    /// included); `None` for `max`.
    pub fn pps(&self, mean_frame: f64) -> Option<f64> {
        match *self {
            Rate::Max => None,
            Rate::Pps(p) => Some(p),
            Rate::L1Bps(b) => Some(b / ((mean_frame + 20.0) * 8.0)),
        }
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rate::Max => f.write_str("max"),
            Rate::Pps(p) => write!(f, "{}Mpps", p / 1e6),
            Rate::L1Bps(b) => write!(f, "{}Gbit/s", b / 1e9),
        }
    }
}

impl std::str::FromStr for Rate {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim().to_ascii_lowercase().replace(' ', "");
        if t == "max" {
            return Ok(Rate::Max);
        }
        if t.starts_with("line") {
            return Err(format!(
                "`{s}`: give the link's speed instead: an L1 bit rate is its line rate \
                 (10Gbit/s is 10GbE line rate, preamble and gap counted); `max` is as fast as the generator goes"
            ));
        }
        let units: [(&str, f64, bool); 10] = [
            ("mpps", 1e6, true),
            ("kpps", 1e3, true),
            ("gpps", 1e9, true),
            ("pps", 1.0, true),
            ("gbit/s", 1e9, false),
            ("gbps", 1e9, false),
            ("mbit/s", 1e6, false),
            ("mbps", 1e6, false),
            ("kbit/s", 1e3, false),
            ("bit/s", 1.0, false),
        ];
        let why = || format!("`{s}` is not a rate: write max, 10Mpps, 500kpps, 10Gbit/s or 2.5Gbps");
        let (num, scale, pps) = units
            .iter()
            .find_map(|&(u, scale, pps)| t.strip_suffix(u).map(|n| (n, scale, pps)))
            .ok_or_else(why)?;
        let v: f64 = num.parse().map_err(|_| why())?;
        let v = v * scale;
        if !(v.is_finite() && v > 0.0) {
            return Err(format!("`{s}`: a rate must be positive"));
        }
        Ok(if pps { Rate::Pps(v) } else { Rate::L1Bps(v) })
    }
}

/// Paces emission against the TSC. `Max` never limits.
#[derive(Debug, Clone)]
pub struct Pacer {
    /// Units (packets or bits) per TSC tick; 0 for max rate.
    per_tick: f64,
    start: Option<u64>,
    /// Units spent since `start`, including those skipped for falling behind.
    spent: f64,
    max_backlog: f64,
    /// Units skipped because the caller fell more than `max_backlog` behind.
    pub skipped_units: f64,
}

impl Pacer {
    /// `units_per_sec` is packets/s or bits/s; `max_backlog` in the same units.
    pub fn new(units_per_sec: Option<f64>, tsc_hz: f64, max_backlog: f64) -> Pacer {
        Pacer {
            per_tick: units_per_sec.map_or(0.0, |r| r / tsc_hz),
            start: None,
            spent: 0.0,
            max_backlog,
            skipped_units: 0.0,
        }
    }

    /// A pacer that catches up after a hiccup by at most 100 us of traffic, or by
    /// `batches` units (four batches of the largest frame, say) if more: at 100 Mpps four
    /// batches are ~1 us, which every timer interrupt exceeds, and the pacer then lost ~1%
    /// of the rate at 50 Mpps and up. Longer stalls are skipped and counted
    /// (`skipped_units`): a real shortfall.
    pub fn catching_up(units_per_sec: Option<f64>, tsc_hz: f64, batches: f64) -> Pacer {
        const CATCH_UP_S: f64 = 100e-6;
        let backlog = batches.max(units_per_sec.unwrap_or(0.0) * CATCH_UP_S);
        Pacer::new(units_per_sec, tsc_hz, backlog)
    }

    /// Starts earning afresh at the next `due`: a stall before a measurement window (a
    /// preemption across the warm-up's end, say) is not counted as skipped inside it.
    /// What was skipped before stays in `skipped_units`.
    pub fn restart(&mut self) {
        self.start = None;
        self.spent = 0.0;
    }

    pub fn is_limited(&self) -> bool {
        self.per_tick > 0.0
    }

    /// Units that may be spent now (infinite when unlimited).
    #[inline]
    pub fn due(&mut self, now: u64) -> f64 {
        if self.per_tick == 0.0 {
            return f64::INFINITY;
        }
        let start = *self.start.get_or_insert(now);
        let earned = now.saturating_sub(start) as f64 * self.per_tick;
        let mut due = earned - self.spent;
        if due > self.max_backlog {
            // Behind by more than the backlog: the missed units are gone, not burst later.
            self.skipped_units += due - self.max_backlog;
            self.spent += due - self.max_backlog;
            due = self.max_backlog;
        }
        due
    }

    #[inline]
    pub fn spend(&mut self, units: f64) {
        self.spent += units;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!("max".parse::<Rate>().unwrap(), Rate::Max);
        assert_eq!("10Mpps".parse::<Rate>().unwrap(), Rate::Pps(10e6));
        assert_eq!("500 kpps".parse::<Rate>().unwrap(), Rate::Pps(500e3));
        assert_eq!("2.5Gbps".parse::<Rate>().unwrap(), Rate::L1Bps(2.5e9));
        assert_eq!("10Gbit/s".parse::<Rate>().unwrap(), Rate::L1Bps(10e9));
        assert!("fast".parse::<Rate>().is_err());
        assert!("-1Mpps".parse::<Rate>().is_err());
        assert!("0pps".parse::<Rate>().is_err());
    }

    #[test]
    fn pacer_releases_units_linearly_and_caps_backlog() {
        // 1 unit per tick.
        let mut p = Pacer::new(Some(1000.0), 1000.0, 50.0);
        assert_eq!(p.due(100), 0.0);
        assert_eq!(p.due(120), 20.0);
        p.spend(20.0);
        assert_eq!(p.due(130), 10.0);
        p.spend(10.0);
        // 1000 ticks of silence: only 50 units may burst, 950 are skipped.
        assert_eq!(p.due(1130), 50.0);
        assert_eq!(p.skipped_units, 950.0);
    }

    #[test]
    fn restart_forgets_the_stall_before_it() {
        let mut p = Pacer::new(Some(1000.0), 1000.0, 50.0);
        assert_eq!(p.due(0), 0.0);
        p.restart();
        // 1000 ticks passed before the restart: none of them is due or skipped now.
        assert_eq!(p.due(1000), 0.0);
        assert_eq!(p.due(1010), 10.0);
        assert_eq!(p.skipped_units, 0.0);
    }
}
