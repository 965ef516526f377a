//! `sfclab bench hop`: what one more NF costs in a compound chain.
//!
//! Forwarder chains of n = 0, 1, 2, 4, 8, 16 hops run on one core, with per-NF cycle
//! accounting off and on, repeated; the median cycles/packet per n are fitted by least
//! squares, whose slope is the per-hop cost. In the same run, DPDK's testpmd in mac
//! forwarding mode on two `net_ring` ports is measured as the peer, and the n = 1
//! throughput is reported against it as a ratio.

pub mod acl;
pub mod calibrate;
pub mod chaining;
pub mod cores;
mod cpu_time;
pub mod forward;
pub mod io;
pub mod lpm;
pub mod lpm6;
pub mod model;
pub mod nfs;
pub mod overload;
pub mod pipeline;
pub mod placement;
pub mod ring;

use serde::Serialize;
pub use sfclab_experiment::Machine;
pub use sfclab_measure::median;
use sfclab_nf::NfSpec;
use sfclab_runtime::{RunSettings, run_compound};
use sfclab_traffic::{FrameSizes, GeneratorConfig};
use std::time::Duration;

pub const HOP_SCHEMA: &str = "sfclab.bench.hop/2";

#[derive(Debug, Clone)]
pub struct HopBenchArgs {
    pub hops: Vec<usize>,
    pub duration: Duration,
    pub warmup: Duration,
    pub repeat: usize,
    pub batch: usize,
    pub size: u16,
    pub flows: u32,
    pub core: Option<usize>,
    /// Measure accounting on as well as off.
    pub accounting_too: bool,
    pub peer: bool,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct HopPoint {
    pub hops: usize,
    pub accounting: bool,
    pub mpps: f64,
    pub cycles_per_packet: f64,
    pub mpps_runs: Vec<f64>,
    pub cycles_runs: Vec<f64>,
}

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

static STOP: std::sync::OnceLock<std::sync::Arc<std::sync::atomic::AtomicBool>> = std::sync::OnceLock::new();

/// The flag that asks benchmarks to stop (the command line's Ctrl-C flag); set once.
pub fn stop_on(flag: std::sync::Arc<std::sync::atomic::AtomicBool>) {
    let _ = STOP.set(flag);
}

/// Ctrl-C came: the measurement under way ends its window early and is not counted;
/// no further one starts.
pub fn stop_requested() -> bool {
    STOP.get().is_some_and(|f| f.load(std::sync::atomic::Ordering::SeqCst))
}

/// The flag a run watches (`RunSettings::stop`): at Ctrl-C its window ends at once.
pub fn stop_flag() -> Option<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    STOP.get().cloned()
}

/// A benchmark's interleaved rounds (every configuration once per round) under Ctrl-C:
/// [`Rounds::next`] starts a round, [`Rounds::go_on`] is asked before each measurement.
/// Once Ctrl-C comes both say no; the rounds that completed are counted, what the cut
/// round measured before it is kept, and the result is marked interrupted.
#[derive(Debug)]
pub struct Rounds {
    stop: fn() -> bool,
    repeat: usize,
    started: usize,
    finished: usize,
    interrupted: bool,
}

impl Rounds {
    pub fn new(repeat: usize) -> Rounds {
        Rounds::stopped_by(repeat, stop_requested)
    }

    /// Rounds that `stop` ends instead of Ctrl-C.
    fn stopped_by(repeat: usize, stop: fn() -> bool) -> Rounds {
        Rounds {
            stop,
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
        self.interrupted |= (self.stop)();
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

/// The repetitions to run, as [`Rounds`] has them: all of them, or up to Ctrl-C.
/// `interrupted` says whether Ctrl-C came before the last one ended.
pub fn repetitions(repeat: usize, interrupted: &mut bool) -> impl Iterator<Item = usize> + '_ {
    let mut rounds = Rounds::new(repeat);
    std::iter::from_fn(move || {
        let next = rounds.start_next().then(|| rounds.started - 1);
        *interrupted |= rounds.interrupted();
        next
    })
}

/// A benchmark result that may have been cut short by Ctrl-C.
pub trait Interruptible {
    fn interrupted(&self) -> bool;
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

/// The median of a peer's runs, `None` when it did not run.
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

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PeerResult {
    pub name: String,
    pub command: String,
    /// Forwarded packets per second over both ports, one figure per repetition (median of
    /// its 1-second samples after the first two).
    pub mpps_runs: Vec<f64>,
    pub mpps: f64,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct HopBench {
    pub schema: &'static str,
    pub version: &'static str,
    pub machine: Machine,
    pub core: Option<usize>,
    pub batch: usize,
    pub frame_size: u16,
    pub flows: u32,
    pub duration_s: f64,
    /// Repetitions run (fewer than asked when interrupted).
    pub repeat: usize,
    /// Stopped by Ctrl-C: the figures are those of the repetitions finished.
    pub interrupted: bool,
    pub points: Vec<HopPoint>,
    /// Per-hop cost with accounting off (the figure of merit) and on.
    pub fit_accounting_off: Fit,
    pub fit_accounting_on: Option<Fit>,
    /// Cycles per packet per NF that the accounting itself adds.
    pub accounting_overhead_per_hop: Option<f64>,
    pub peer: Option<PeerResult>,
    /// Why the peer was not measured, when it was not.
    pub peer_skipped: Option<String>,
    /// sfclab n = 1 Mpps (accounting off) over the peer's Mpps.
    pub ratio_n1_vs_peer: Option<f64>,
    /// The hardware's floor in the same run: TSC cycles per packet per hop of a bare loop
    /// rewriting the MACs of 32 resident buffers (no framework), median of the repetitions.
    pub bare_loop_cycles_per_hop: f64,
    /// sfclab's per-hop slope over the bare loop's cost.
    pub ratio_hop_vs_bare_loop: f64,
}

/// A bare loop rewriting the MACs of 32 resident buffers (pool stride, 64-byte frames)
/// `hops` times per round, no framework: what one hop costs this machine right now.
/// Returns TSC cycles per packet per hop.
pub fn bare_loop_cycles_per_hop(core: Option<usize>, duration: Duration) -> f64 {
    on_core(core, || {
        let mut pool = sfclab_core::PacketPool::new(64);
        let mut batch = sfclab_core::Batch::new(32);
        pool.alloc_into(&mut batch, 32);
        let frames: Vec<*mut u8> = batch.iter_mut().map(|p| p.reset(60).as_mut_ptr()).collect();
        let macs = [2u8, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
        const HOPS: u64 = 16;
        let (mut rounds, t0) = (0u64, sfclab_core::tsc::now());
        let end = t0 + sfclab_core::tsc::ticks(duration);
        while sfclab_core::tsc::now() < end {
            for _ in 0..1024 {
                for _ in 0..HOPS {
                    for &f in std::hint::black_box(&frames) {
                        // SAFETY: each pointer is the start of a 60-byte frame we own.
                        unsafe { std::ptr::copy_nonoverlapping(macs.as_ptr(), f, 12) };
                    }
                }
            }
            rounds += 1024;
        }
        let cycles = sfclab_core::tsc::now() - t0;
        pool.free_batch(&mut batch);
        cycles as f64 / (rounds * HOPS * frames.len() as u64) as f64
    })
}

/// A chain of `n` copies of one NF (its kind numbered: `synthetic1`, `synthetic2`, ...).
pub fn copies(nf: &NfSpec, n: usize) -> sfclab_core::NamedNfs {
    (0..n)
        .map(|i| (format!("{}{}", nf.kind(), i + 1), nf.build()))
        .collect()
}

/// `forwarder*n` with default MACs.
pub(crate) fn forwarders(n: usize) -> sfclab_core::NamedNfs {
    copies(&NfSpec::default_of("forwarder").expect("the default forwarder"), n)
}

/// Runs the benchmark; `progress` is told after each trial (done, total).
pub fn hop(args: &HopBenchArgs, mut progress: impl FnMut(usize, usize, &str)) -> Result<HopBench, String> {
    let modes: Vec<bool> = if args.accounting_too {
        vec![false, true]
    } else {
        vec![false]
    };
    let total = args.repeat * (modes.len() * args.hops.len() + usize::from(args.peer));
    let mut done = 0;
    let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new(); modes.len() * args.hops.len()];
    let testpmd = sfclab_peers::which("dpdk-testpmd");
    let mut peer_runs = Vec::new();
    let mut peer_skipped = None;
    let mut peer_command = String::new();
    let mut bare_runs = Vec::new();
    if args.peer && testpmd.is_none() {
        peer_skipped = Some("dpdk-testpmd not found (Debian package `dpdk`)".to_string());
    }
    if !args.peer {
        peer_skipped = Some("not requested (--peer none)".to_string());
    }
    // Repetitions are interleaved (every configuration once per round), so slow drifts
    // of a noisy machine hit all configurations alike.
    let mut rounds = Rounds::new(args.repeat);
    'rounds: while rounds.start_next() {
        for (m, &accounting) in modes.iter().enumerate() {
            for (h, &n) in args.hops.iter().enumerate() {
                if !rounds.go_on() {
                    break 'rounds;
                }
                let traffic = GeneratorConfig {
                    sizes: FrameSizes::Fixed { size: args.size },
                    flows: args.flows,
                    probe_pps: 0.0,
                    ..Default::default()
                };
                let settings = RunSettings {
                    batch: args.batch,
                    duration: Some(args.duration),
                    warmup: args.warmup,
                    core: args.core,
                    accounting,
                    stop: stop_flag(),
                    ..Default::default()
                };
                let r = run_compound(traffic, forwarders(n), &settings).map_err(|e| e.to_string())?;
                if r.interrupted {
                    // Its window was cut short: not a measurement of the point.
                    rounds.cut();
                    break 'rounds;
                }
                runs[m * args.hops.len() + h].push((r.mpps, r.busy_cycles_per_packet.unwrap_or(f64::NAN)));
                done += 1;
                progress(
                    done,
                    total,
                    &format!("n={n} accounting {}", if accounting { "on" } else { "off" }),
                );
            }
        }
        if !rounds.go_on() {
            break;
        }
        bare_runs.push(bare_loop_cycles_per_hop(
            args.core,
            args.duration.min(Duration::from_millis(500)),
        ));
        if let (true, Some(bin), true) = (args.peer && peer_skipped.is_none(), &testpmd, rounds.go_on()) {
            match run_testpmd(bin, args.core, args.duration.max(Duration::from_secs(3))) {
                Ok((mpps, cmd)) => {
                    peer_runs.push(mpps);
                    peer_command = cmd;
                }
                Err(e) => peer_skipped = Some(e),
            }
            done += 1;
            progress(done, total, "dpdk-testpmd");
        }
    }
    for r in &mut runs {
        rounds.keep_completed(r);
    }
    rounds.keep_completed(&mut bare_runs);
    rounds.keep_completed(&mut peer_runs);
    let mut points = Vec::new();
    for (m, &accounting) in modes.iter().enumerate() {
        for (h, &n) in args.hops.iter().enumerate() {
            let r = &runs[m * args.hops.len() + h];
            if r.is_empty() {
                continue; // Ctrl-C came before a round ended
            }
            let mpps_runs: Vec<f64> = r.iter().map(|x| x.0).collect();
            let cycles_runs: Vec<f64> = r.iter().map(|x| x.1).collect();
            points.push(HopPoint {
                hops: n,
                accounting,
                mpps: median(&mpps_runs),
                cycles_per_packet: median(&cycles_runs),
                mpps_runs,
                cycles_runs,
            });
        }
    }
    let fit = |acc: bool| {
        let (xs, ys): (Vec<f64>, Vec<f64>) = points
            .iter()
            .filter(|p| p.accounting == acc)
            .map(|p| (p.hops as f64, p.cycles_per_packet))
            .unzip();
        least_squares(&xs, &ys)
    };
    let off = fit(false);
    let on = args.accounting_too.then(|| fit(true));
    let peer = (!peer_runs.is_empty()).then(|| PeerResult {
        name: "dpdk-testpmd --forward-mode=mac on 2 net_ring ports".into(),
        command: peer_command,
        mpps: median(&peer_runs),
        mpps_runs: peer_runs,
    });
    let n1 = points.iter().find(|p| p.hops == 1 && !p.accounting).map(|p| p.mpps);
    let bare = median(&bare_runs);
    Ok(HopBench {
        schema: HOP_SCHEMA,
        version: env!("CARGO_PKG_VERSION"),
        machine: Machine::read(),
        core: args.core,
        batch: args.batch,
        frame_size: args.size,
        flows: args.flows,
        duration_s: args.duration.as_secs_f64(),
        repeat: rounds.completed(),
        interrupted: rounds.interrupted(),
        ratio_n1_vs_peer: match (&peer, n1) {
            (Some(p), Some(m)) if p.mpps > 0.0 => Some(m / p.mpps),
            _ => None,
        },
        accounting_overhead_per_hop: on.map(|f| f.slope - off.slope),
        bare_loop_cycles_per_hop: bare,
        ratio_hop_vs_bare_loop: off.slope / bare,
        fit_accounting_off: off,
        fit_accounting_on: on,
        points,
        peer_skipped: if peer.is_some() { None } else { peer_skipped },
        peer,
    })
}

/// Runs testpmd in mac mode between two ring ports for `duration`; returns the median
/// forwarded Mpps (both ports' Rx-pps summed) of its 1-second samples after the first two.
fn run_testpmd(bin: &str, core: Option<usize>, duration: Duration) -> Result<(f64, String), String> {
    // The forwarding lcore goes where sfclab's chain ran; the main lcore on another
    // core this process may use.
    let Some(forward_core) = core.or_else(sfclab_runtime::placement::default_chain_core) else {
        return Err("no core is allowed for this process".into());
    };
    let Some(main_core) = sfclab_runtime::placement::default_generator_core(forward_core) else {
        return Err("testpmd needs two cores this process may use (main and forwarding lcore)".into());
    };
    let spec = sfclab_peers::testpmd::TestpmdSpec {
        netns: None,
        forward_core,
        main_core,
        vdevs: vec!["net_ring0".into(), "net_ring1".into()],
        mode: "mac",
        tx_first: true,
    };
    let proc = sfclab_peers::testpmd::Testpmd::start(bin, &spec, &format!("sfclab-bench-{}", std::process::id()))?;
    let command = proc.command.clone();
    // EAL start-up without hugepages takes seconds, more on a loaded machine: wait for
    // forwarding to start, then for two settling periods and the window's own.
    let mut procs = [proc];
    let periods = 2 + duration.as_secs_f64().ceil().max(1.0) as usize;
    // Ctrl-C ends the wait (and the peer's run, not counted).
    let waited = sfclab_peers::testpmd::wait_until(&mut procs, Duration::from_secs(60), "forwarding start", |p| {
        stop_requested() || p[0].is_some()
    })
    .and_then(|()| {
        sfclab_peers::testpmd::wait_until(&mut procs, duration + Duration::from_secs(30), "statistics", |p| {
            stop_requested() || p[0].is_some_and(|n| n > periods)
        })
    });
    let [proc] = procs;
    let samples = proc.stop();
    waited?;
    if stop_requested() {
        return Err("stopped by Ctrl-C before its run ended".into());
    }
    let settled: Vec<f64> = samples.iter().skip(2).map(|ports| ports.iter().sum()).collect();
    if settled.is_empty() {
        return Err("dpdk-testpmd printed no statistics (does it run here? try the command by hand)".into());
    }
    Ok((median(&settled) / 1e6, command))
}

impl Interruptible for HopBench {
    fn interrupted(&self) -> bool {
        self.interrupted
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

    static STOPPED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    fn stopped() -> bool {
        STOPPED.load(std::sync::atomic::Ordering::SeqCst)
    }

    #[test]
    fn rounds_stop_at_ctrl_c_and_count_only_whole_rounds() {
        let mut all = Rounds::stopped_by(3, || false);
        let mut started = 0;
        while all.start_next() {
            started += 1;
        }
        assert_eq!((started, all.completed(), all.interrupted()), (3, 3, false));

        // Ctrl-C in the middle of round 2: round 1 counts, round 2 does not, none follows.
        let mut cut = Rounds::stopped_by(5, stopped);
        let mut runs: Vec<Vec<f64>> = vec![Vec::new(); 4];
        let mut measured = 0;
        'rounds: while cut.start_next() {
            for config in &mut runs {
                if measured == 6 {
                    STOPPED.store(true, std::sync::atomic::Ordering::SeqCst);
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
        STOPPED.store(false, std::sync::atomic::Ordering::SeqCst);
    }
}
