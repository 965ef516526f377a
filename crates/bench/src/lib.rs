//! `sfclab bench hop`: what one more NF costs in a compound chain.
//!
//! Forwarder chains of n = 0, 1, 2, 4, 8, 16 hops run on one core, with per-NF cycle
//! accounting off and on, repeated; the median cycles/packet per n are fitted by least
//! squares, whose slope is the per-hop cost. In the same run, DPDK's testpmd in mac
//! forwarding mode on two `net_ring` ports is measured as the peer, and the n = 1
//! throughput is reported against it as a ratio.

/// `Benchmark` for a document whose header is its `header` field, its table drawn by
/// `$table` (and its CSV by `$csv`): each benchmark's file says it in one line.
macro_rules! benchmark {
    ($doc:ty, $table:path) => {
        impl $crate::Benchmark for $doc {
            fn header(&self) -> &$crate::BenchHeader {
                &self.header
            }

            fn table(&self) -> String {
                $table(self)
            }
        }
    };
    ($doc:ty, $table:path, $csv:path) => {
        impl $crate::Benchmark for $doc {
            fn header(&self) -> &$crate::BenchHeader {
                &self.header
            }

            fn table(&self) -> String {
                $table(self)
            }

            const HAS_CSV: bool = true;

            fn csv(&self) -> Option<String> {
                Some($csv(self))
            }
        }
    };
}

pub mod acl;
pub mod calibrate;
pub mod catalogue;
pub mod chaining;
pub mod cores;
mod cpu_time;
pub mod forward;
pub mod hop;
pub mod io;
pub mod lpm;
pub mod lpm6;
pub mod memif;
pub mod memif_terms;
pub mod model;
pub mod model_scenarios;
pub mod nfs;
pub mod overload;
pub mod pipeline;
pub mod placement;
pub mod registry;
pub mod ring;
pub mod vnf_workloads;

use serde::Serialize;
pub use sfclab_experiment::Machine;
pub use sfclab_measure::median;
use sfclab_nf::NfSpec;
pub use sfclab_runtime::{Progress, Step, Stop};
use std::fmt::Write as _;
use std::time::Duration;

/// A least-squares line `cycles = intercept + slope * hops`.
#[derive(Debug, Clone, Copy, Serialize, schemars::JsonSchema)]
pub struct Fit {
    pub slope: f64,
    pub intercept: f64,
    pub r2: f64,
}

pub fn least_squares(xs: &[f64], ys: &[f64]) -> Fit {
    let n = xs.len() as f64;
    let mx = xs.iter().sum::<f64>() / n;
    let my = ys.iter().sum::<f64>() / n;
    let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
    let sxy: f64 = xs.iter().zip(ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let syy: f64 = ys.iter().map(|y| (y - my).powi(2)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    let r2 = if sxx > 0.0 && syy > 0.0 {
        sxy * sxy / (sxx * syy)
    } else {
        1.0
    };
    Fit {
        slope,
        intercept: my - slope * mx,
        r2,
    }
}

/// A spread wider than this (max / min of the repetitions) is flagged: cross-core
/// figures on shared machines swing 3x, and a median hides that.
pub const WIDE_SPREAD: f64 = 1.3;

/// `median [min–max]` of the repetitions, `prec` decimals.
pub fn with_range(runs: &[f64], prec: usize) -> String {
    let (lo, hi) = min_max(runs);
    if runs.len() < 2 {
        return format!("{:.prec$}", median(runs));
    }
    format!("{:.prec$} [{lo:.prec$}–{hi:.prec$}]", median(runs))
}

pub fn min_max(runs: &[f64]) -> (f64, f64) {
    let lo = runs.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = runs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (lo, hi)
}

/// Whether the repetitions spread wider than `WIDE_SPREAD`.
pub fn is_wide(runs: &[f64]) -> bool {
    let (lo, hi) = min_max(runs);
    runs.len() > 1 && lo > 0.0 && hi / lo > WIDE_SPREAD
}

/// The warning line for a table with `wide` figures spread wider than `WIDE_SPREAD`, and
/// the line of a benchmark stopped by Ctrl-C.
pub fn footer(wide: usize, interrupted: bool, repeat_done: usize) -> String {
    let mut s = String::new();
    if wide > 0 {
        s.push_str(&format!(
            "warning           {wide} figure(s) spread more than {WIDE_SPREAD}x between repetitions \
             (min–max in brackets): the machine is noisy; compare ratios measured in the same run\n"
        ));
    }
    if interrupted {
        s.push_str(&format!(
            "INTERRUPTED       stopped by Ctrl-C after {repeat_done} complete repetition(s); the figures are theirs\n"
        ));
    }
    s
}

/// A benchmark's interleaved rounds (every configuration once per round) under Ctrl-C:
/// [`Rounds::start_next`] starts a round, [`Rounds::go_on`] is asked before each
/// measurement. Once Ctrl-C comes both say no; the rounds that completed are counted,
/// [`Rounds::keep_completed`] drops what the round that did not end measured, and the
/// result is marked interrupted.
#[derive(Debug)]
pub struct Rounds {
    stop: Stop,
    repeat: usize,
    started: usize,
    finished: usize,
    interrupted: bool,
}

impl Rounds {
    /// `repeat` rounds that `stop` (Ctrl-C) ends early.
    pub fn new(repeat: usize, stop: &Stop) -> Rounds {
        Rounds {
            stop: stop.clone(),
            repeat,
            started: 0,
            finished: 0,
            interrupted: false,
        }
    }

    /// Starts the next round: false once every round ran or Ctrl-C came.
    pub fn start_next(&mut self) -> bool {
        if self.interrupted {
            return false;
        }
        self.finished = self.started;
        if !self.go_on() || self.started == self.repeat {
            return false;
        }
        self.started += 1;
        true
    }

    /// Before a measurement: false once Ctrl-C came.
    pub fn go_on(&mut self) -> bool {
        self.interrupted |= self.stop.requested();
        !self.interrupted
    }

    /// A measurement of the round under way was cut short (its window ended at Ctrl-C):
    /// the round is not complete, and none follows.
    pub fn cut(&mut self) {
        self.interrupted = true;
    }

    /// Keeps in `runs` (one entry per round) the rounds that ran to their end: every
    /// configuration then has as many runs as the result says were done.
    pub fn keep_completed<T>(&self, runs: &mut Vec<T>) {
        runs.truncate(self.finished);
    }

    /// Rounds that ran to their end.
    pub fn completed(&self) -> usize {
        self.finished
    }

    pub fn interrupted(&self) -> bool {
        self.interrupted
    }
}

/// A row of a benchmark whose rounds measure every row once, in order ([`row_rounds`]).
pub(crate) trait RoundRow {
    fn name(&self) -> &str;
    /// Not measured (its peer is missing, or failed): passed over.
    fn skipped(&self) -> bool;
    /// Drops what a round that did not end measured (see [`Rounds::keep_completed`]).
    fn keep_completed(&mut self, rounds: &Rounds);
}

/// Interleaved rounds over `rows`: each round measures every row not skipped, in order,
/// with `measure` (an error fails the benchmark); `progress.at(done, total, label)` tells each
/// step. Whole rounds only: a measurement Ctrl-C cut short ends the rounds, and what the
/// round that did not end measured is dropped from every row. The rounds, or
/// [`INTERRUPTED_BEFORE_A_ROUND`] when none ended.
pub(crate) fn row_rounds<R: RoundRow>(
    repeat: usize,
    rows: &mut [R],
    (stop, progress): (&Stop, &mut Progress),
    mut measure: impl FnMut(&mut R) -> Result<(), String>,
) -> Result<Rounds, String> {
    progress.plan(repeat * rows.iter().filter(|r| !r.skipped()).count());
    let mut rounds = Rounds::new(repeat, stop);
    while rounds.start_next() {
        let round = rounds.completed() + 1;
        for r in rows.iter_mut() {
            if !rounds.go_on() {
                break;
            }
            if r.skipped() {
                continue;
            }
            measure(r)?;
            if stop.requested() {
                rounds.cut();
                break;
            }
            progress.finished(&format!("round {round}: {}", r.name()));
        }
    }
    for r in rows.iter_mut() {
        r.keep_completed(&rounds);
    }
    if rounds.completed() == 0 {
        return Err(INTERRUPTED_BEFORE_A_ROUND.into());
    }
    Ok(rounds)
}

/// The repetitions to run, as [`Rounds`] has them: all of them, or up to Ctrl-C.
/// `interrupted` says whether Ctrl-C came before the last one ended.
pub fn repetitions<'a>(repeat: usize, stop: &Stop, interrupted: &'a mut bool) -> impl Iterator<Item = usize> + 'a {
    let mut rounds = Rounds::new(repeat, stop);
    std::iter::from_fn(move || {
        let next = rounds.start_next().then(|| rounds.started - 1);
        *interrupted |= rounds.interrupted();
        next
    })
}

/// The error of a benchmark stopped by Ctrl-C before any round ended: nothing to write.
pub const INTERRUPTED_BEFORE_A_ROUND: &str =
    "stopped by Ctrl-C before the first round ended: nothing measured to write";

/// What every benchmark's document starts with (flattened into it): which document,
/// which sfclab, on what machine, and how many rounds it completed.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct BenchHeader {
    /// This document's schema, e.g. `sfclab.bench.ring/2` (`sfclab schema bench-ring`).
    pub schema: &'static str,
    /// The sfclab that measured.
    pub version: &'static str,
    pub machine: Machine,
    /// Complete rounds (repetitions) behind the figures: fewer than asked when
    /// interrupted.
    pub repeat: usize,
    /// Stopped by Ctrl-C: the figures are those of the rounds that finished.
    pub interrupted: bool,
}

impl BenchHeader {
    /// The header of a document of `schema` after `rounds`, on this machine.
    pub fn after(schema: &'static str, rounds: &Rounds) -> BenchHeader {
        BenchHeader::new(schema, rounds.completed(), rounds.interrupted())
    }

    pub fn new(schema: &'static str, repeat: usize, interrupted: bool) -> BenchHeader {
        BenchHeader {
            schema,
            version: env!("CARGO_PKG_VERSION"),
            machine: Machine::read(),
            repeat,
            interrupted,
        }
    }

    /// How a table begins: `sfclab bench NAME | cpu (N cores, TSC x GHz, kernel K)`.
    pub fn title(&self, name: &str) -> String {
        format!(
            "sfclab bench {name} | {} ({} cores, TSC {:.3} GHz, kernel {})",
            self.machine.cpu,
            self.machine.cores,
            self.machine.tsc_hz / 1e9,
            self.machine.kernel
        )
    }
}

/// A benchmark's result: its header, and how a terminal shows it (and CSV, where the
/// benchmark has points). A new benchmark is its own file: its flags, its run, its
/// document, this and its [`registry::Entry`].
pub trait Benchmark: Serialize {
    fn header(&self) -> &BenchHeader;
    /// The table a terminal prints: the title, the figures, the footer.
    fn table(&self) -> String;
    /// Whether [`Benchmark::csv`] gives rows: the benchmark has points.
    const HAS_CSV: bool = false;
    /// One row per point, with a header line, where the benchmark has points.
    fn csv(&self) -> Option<String> {
        None
    }
}

/// Runs `f` on a thread pinned to `core` (if given) and returns its result: a
/// measurement on the core the chain would have.
pub fn on_core<T: Send>(core: Option<usize>, f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        s.spawn(|| {
            if let Some(c) = core {
                core_affinity::set_for_current(core_affinity::CoreId { id: c });
            }
            f()
        })
        .join()
        .expect("the measuring thread")
    })
}

/// Waits, at most `limit`, until the machine's cores are idle (under 3 % busy over
/// 100 ms, the hypervisor's steal not counted), and says how long it waited. After a
/// run in namespaces the kernel goes on tearing them down in a kworker (netns cleanup,
/// RCU) on some core: a measurement started then would share that core.
pub fn wait_for_idle_cores(limit: Duration) -> Duration {
    // Busy and total, the hypervisor's steal left out of both.
    let busy_and_total = || cpu_time::CpuTime::read(None).map(|t| (t.busy, t.busy + t.idle));
    let start = std::time::Instant::now();
    while start.elapsed() < limit {
        let Some((b0, t0)) = busy_and_total() else { break };
        std::thread::sleep(Duration::from_millis(100));
        let Some((b1, t1)) = busy_and_total() else { break };
        if t1 > t0 && (b1 - b0) as f64 / ((t1 - t0) as f64) < 0.03 {
            break;
        }
    }
    start.elapsed()
}

/// A worst cell in words: its figures and error, and where the error is the median of
/// several rounds' (the figures then medians too, which need not give that error), the
/// rounds' errors.
pub(crate) fn worst_cell(what: &str, predicted: f64, measured: f64, error: f64, rounds: &[f64]) -> String {
    if rounds.len() < 2 {
        return format!("{what}: predicted {predicted:.3} Mpps, measured {measured:.3} ({error:+.1} %)");
    }
    let each: Vec<String> = rounds.iter().map(|e| format!("{e:+.1}")).collect();
    format!(
        "{what}: predicted {predicted:.3} Mpps, measured {measured:.3}, medians of {} rounds; error {error:+.1} %, the median of the rounds' {} %",
        rounds.len(),
        each.join(", ")
    )
}

/// The median of a peer's runs, `None` when it did not run.
pub fn median_if_any(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| median(v))
}

/// One row of a benchmark over another: the ratio of their medians, same run.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct RowRatio {
    pub row: String,
    pub over: String,
    pub ratio: f64,
}

/// The ratio of each `(row, over)` pair whose two medians `median_of` knows (the second
/// above zero); pairs with a row not measured are left out.
pub fn row_ratios(pairs: &[(&str, &str)], median_of: impl Fn(&str) -> Option<f64>) -> Vec<RowRatio> {
    pairs
        .iter()
        .filter_map(|&(row, over)| match (median_of(row), median_of(over)) {
            (Some(x), Some(y)) if y > 0.0 => Some(RowRatio {
                row: row.into(),
                over: over.into(),
                ratio: x / y,
            }),
            _ => None,
        })
        .collect()
}

/// A chain of `n` copies of one NF (its kind numbered: `synthetic1`, `synthetic2`, ...).
pub fn copies(nf: &NfSpec, n: usize) -> sfclab_core::NamedNfs {
    (0..n)
        .map(|i| (format!("{}{}", nf.kind(), i + 1), nf.build()))
        .collect()
}

/// Runs `chain` (the shorthand: `forwarder*4`, `synthetic(cycles=100)*2`) with
/// `settings` as the library runs it (`Experiment::load`, `Experiment::run`), Ctrl-C
/// (`stop`) ending its window at once: how a benchmark runs a chain of its own; the
/// report of the run that crossed it.
pub(crate) fn run_chain(
    chain: &str,
    settings: &sfclab_experiment::Settings,
    stop: &Stop,
) -> Result<sfclab_runtime::RunReport, String> {
    use sfclab_experiment::{ChainSource, Experiment, Reports};
    let mut experiment =
        Experiment::load(&ChainSource::Shorthand(chain.into()), settings).map_err(|e| format!("{chain}: {e}"))?;
    experiment.stop_on(stop);
    experiment
        .run()
        .map(Reports::into_measured)
        .map_err(|e| format!("{chain}: {e}"))
}

/// `v` with thousands separated by commas, as the tables print counts.
pub fn num(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A row's runs as `median [min–max]`, or `-` when it has none.
pub(crate) fn or_dash(v: &[f64], digits: usize) -> String {
    if v.is_empty() {
        "-".to_string()
    } else {
        with_range(v, digits)
    }
}

/// A benchmark's ratios (what they compare in `of`), then each row's peer command lines.
pub(crate) fn ratios_and_commands<'a>(
    s: &mut String,
    ratios: &[crate::RowRatio],
    of: &str,
    rows: impl Iterator<Item = (&'a str, &'a [String])>,
) {
    for q in ratios {
        let _ = writeln!(s, "ratio  {} / {} = {:.2}x ({of})", q.row, q.over, q.ratio);
    }
    for (name, commands) in rows.filter(|(_, c)| !c.is_empty()) {
        let _ = writeln!(s, "{name}:");
        for c in commands {
            let _ = writeln!(s, "    {c}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_squares_recovers_a_line() {
        let xs = [0.0, 1.0, 2.0, 4.0, 8.0, 16.0];
        let ys: Vec<f64> = xs.iter().map(|x| 5.0 + 1.5 * x).collect();
        let f = least_squares(&xs, &ys);
        assert!((f.slope - 1.5).abs() < 1e-12 && (f.intercept - 5.0).abs() < 1e-12 && (f.r2 - 1.0).abs() < 1e-12);
    }

    #[test]
    fn median_of_even_and_odd() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn rounds_stop_at_ctrl_c_and_count_only_whole_rounds() {
        let mut all = Rounds::new(3, &Stop::new());
        let mut started = 0;
        while all.start_next() {
            started += 1;
        }
        assert_eq!((started, all.completed(), all.interrupted()), (3, 3, false));

        // Ctrl-C in the middle of round 2: round 1 counts, round 2 does not, none follows.
        let ctrl_c = Stop::new();
        let mut cut = Rounds::new(5, &ctrl_c);
        let mut runs: Vec<Vec<f64>> = vec![Vec::new(); 4];
        let mut measured = 0;
        'rounds: while cut.start_next() {
            for config in &mut runs {
                if measured == 6 {
                    ctrl_c.request();
                }
                if !cut.go_on() {
                    break 'rounds;
                }
                config.push(1.0);
                measured += 1;
            }
        }
        assert!(cut.interrupted());
        assert_eq!(cut.completed(), 1);
        for config in &mut runs {
            cut.keep_completed(config);
        }
        assert!(
            runs.iter().all(|r| r.len() == 1),
            "every configuration has the one whole round"
        );
    }
}
