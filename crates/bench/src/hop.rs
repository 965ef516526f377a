//! `sfclab bench hop`: what one more NF costs in a compound chain (cycles per packet
//! against chain length, a least-squares line), beside a bare loop that does the same
//! stores with no framework and DPDK's testpmd forwarding on the same core.
//!
//! It measures the compound runtime itself, below the library: its line starts at n = 0
//! (generator and sink, no NF), a chain no chain file can hold.

use crate::{Progress, Stop};
use serde::Serialize;
use sfclab_runtime::{RunReport, RunSettings, run_compound};
use sfclab_traffic::{FrameSizes, GeneratorConfig};
use std::time::Duration;

use crate::{Fit, Rounds, least_squares, median, on_core};
use std::fmt::Write as _;

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
    #[serde(flatten)]
    pub header: crate::BenchHeader,
    pub core: Option<usize>,
    pub batch: usize,
    pub frame_size: u16,
    pub flows: u32,
    pub duration_s: f64,
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

/// Runs the benchmark; `progress` is told after each trial.
pub fn hop(args: &HopBenchArgs, progress: &mut Progress, stop: &Stop) -> Result<HopBench, String> {
    let modes: Vec<bool> = if args.accounting_too {
        vec![false, true]
    } else {
        vec![false]
    };
    progress.plan(args.repeat * (modes.len() * args.hops.len() + usize::from(args.peer)));
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
    let mut rounds = Rounds::new(args.repeat, stop);
    'rounds: while rounds.start_next() {
        for (m, &accounting) in modes.iter().enumerate() {
            for (h, &n) in args.hops.iter().enumerate() {
                if !rounds.go_on() {
                    break 'rounds;
                }
                let r = run_forwarders(args, n, accounting, stop)?;
                if r.interrupted {
                    // Its window was cut short: not a measurement of the point.
                    rounds.cut();
                    break 'rounds;
                }
                runs[m * args.hops.len() + h].push((r.mpps, r.busy_cycles_per_packet.unwrap_or(f64::NAN)));
                progress.finished(&format!("n={n} accounting {}", if accounting { "on" } else { "off" }));
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
            match run_testpmd(bin, args.core, args.duration.max(Duration::from_secs(3)), stop) {
                Ok((mpps, cmd)) => {
                    peer_runs.push(mpps);
                    peer_command = cmd;
                }
                // Ctrl-C while testpmd started: the round is cut.
                Err(_) if stop.requested() => rounds.cut(),
                Err(e) => peer_skipped = Some(e),
            }
            progress.finished("dpdk-testpmd");
        }
    }
    for r in &mut runs {
        rounds.keep_completed(r);
    }
    rounds.keep_completed(&mut bare_runs);
    rounds.keep_completed(&mut peer_runs);
    let points = points_of(args, &modes, &runs);
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
        header: crate::BenchHeader::after(HOP_SCHEMA, &rounds),
        core: args.core,
        batch: args.batch,
        frame_size: args.size,
        flows: args.flows,
        duration_s: args.duration.as_secs_f64(),
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

/// `n` forwarders in one compound loop, accounting on or off.
fn run_forwarders(args: &HopBenchArgs, n: usize, accounting: bool, stop: &Stop) -> Result<RunReport, String> {
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
        stop: Some(stop.clone()),
        ..Default::default()
    };
    let chain = crate::copies(
        &sfclab_nf::NfSpec::default_of("forwarder").map_err(|e| e.to_string())?,
        n,
    );
    run_compound(traffic, chain, &settings).map_err(|e| e.to_string())
}

/// A point per mode and length with its rounds' (Mpps, cycles per packet); none where
/// Ctrl-C came before a round ended.
fn points_of(args: &HopBenchArgs, modes: &[bool], runs: &[Vec<(f64, f64)>]) -> Vec<HopPoint> {
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
    points
}

/// Runs testpmd in mac mode between two ring ports for `duration`; returns the median
/// forwarded Mpps (both ports' Rx-pps summed) of its 1-second samples after the first two.
fn run_testpmd(bin: &str, core: Option<usize>, duration: Duration, stop: &Stop) -> Result<(f64, String), String> {
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
        record_core_cycles: false,
        single_file_segments: false,
    };
    let proc = sfclab_peers::testpmd::Testpmd::start(bin, &spec, &format!("sfclab-bench-{}", std::process::id()))?;
    let command = proc.command.clone();
    // EAL start-up without hugepages takes seconds, more on a loaded machine: wait for
    // forwarding to start, then for two settling periods and the window's own.
    let mut procs = [proc];
    let periods = 2 + duration.as_secs_f64().ceil().max(1.0) as usize;
    // Ctrl-C ends the wait (and the peer's run, not counted).
    let waited = sfclab_peers::testpmd::wait_until(
        &mut procs,
        Duration::from_secs(60),
        "forwarding start",
        &|| stop.requested(),
        |p| stop.requested() || p[0].is_some(),
    )
    .and_then(|()| {
        sfclab_peers::testpmd::wait_until(
            &mut procs,
            duration + Duration::from_secs(30),
            "statistics",
            &|| stop.requested(),
            |p| stop.requested() || p[0].is_some_and(|n| n > periods),
        )
    });
    let [proc] = procs;
    let samples = proc.stop();
    waited?;
    if stop.requested() {
        return Err("stopped by Ctrl-C before its run ended".into());
    }
    let settled: Vec<f64> = samples.iter().skip(2).map(|ports| ports.iter().sum()).collect();
    if settled.is_empty() {
        return Err("dpdk-testpmd printed no statistics (does it run here? try the command by hand)".into());
    }
    Ok((median(&settled) / 1e6, command))
}

benchmark!(HopBench, render_table);

/// The terminal view of a hop benchmark.
fn render_table(b: &HopBench) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", b.header.title("hop"));
    let _ = writeln!(
        s,
        "forwarder chains, {} B frames, {} flow(s), batch {}, {} x {:.1} s per point (medians), core {}\n",
        b.frame_size,
        b.flows,
        b.batch,
        b.header.repeat,
        b.duration_s,
        b.core.map_or("unpinned".into(), |c| c.to_string())
    );
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    let acc = b.fit_accounting_on.is_some();
    let mut header = vec!["hops", "Mpps [min–max]", "busy TSC cycles/packet"];
    if acc {
        header.extend(["Mpps (accounting on)", "busy TSC cycles/packet (accounting on)"]);
    }
    t.set_header(header);
    let mut wide = 0;
    for p in b.points.iter().filter(|p| !p.accounting) {
        let mut row = vec![
            p.hops.to_string(),
            crate::with_range(&p.mpps_runs, 1),
            crate::with_range(&p.cycles_runs, 2),
        ];
        wide += usize::from(crate::is_wide(&p.mpps_runs));
        if let Some(q) = b.points.iter().find(|q| q.accounting && q.hops == p.hops) {
            row.extend([crate::with_range(&q.mpps_runs, 1), crate::with_range(&q.cycles_runs, 2)]);
            wide += usize::from(crate::is_wide(&q.mpps_runs));
        }
        t.add_row(row);
    }
    let _ = writeln!(s, "{t}");
    let f = b.fit_accounting_off;
    let _ = writeln!(
        s,
        "per-hop cost      {:.2} cycles/packet (least squares, r2 {:.3}), base {:.2}",
        f.slope, f.r2, f.intercept
    );
    let _ = writeln!(
        s,
        "bare loop         {:.2} cycles/packet per hop (MAC rewrite of 32 resident buffers, no framework): sfclab hop = {:.2}x",
        b.bare_loop_cycles_per_hop, b.ratio_hop_vs_bare_loop
    );
    if let (Some(on), Some(o)) = (b.fit_accounting_on, b.accounting_overhead_per_hop) {
        let _ = writeln!(
            s,
            "with accounting   {:.2} cycles/packet per hop: accounting adds {o:.2} per NF",
            on.slope
        );
    }
    match (&b.peer, &b.peer_skipped) {
        (Some(p), _) => {
            let _ = writeln!(
                s,
                "peer              {}: {} Mpps (median [min–max] of {})",
                p.name,
                crate::with_range(&p.mpps_runs, 1),
                p.mpps_runs.len()
            );
            wide += usize::from(crate::is_wide(&p.mpps_runs));
            if let Some(r) = b.ratio_n1_vs_peer {
                let _ = writeln!(s, "ratio             sfclab n=1 / peer = {r:.2}x");
            }
        }
        (None, Some(why)) => {
            let _ = writeln!(s, "peer              skipped: {why}");
        }
        (None, None) => {}
    }
    s.push_str(&crate::footer(wide, b.header.interrupted, b.header.repeat));
    s
}

/// `sfclab bench hop`'s flags.
#[derive(clap::Args)]
pub struct HopFlags {
    /// Chain lengths to measure.
    #[arg(long, value_delimiter = ',', default_value = "0,1,2,4,8,16")]
    hops: Vec<usize>,
    /// Measured window per trial.
    #[arg(long, default_value = "1s")]
    duration: String,
    /// Warm-up per trial.
    #[arg(long, default_value = "200ms")]
    warmup: String,
    /// Repetitions (medians are reported).
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Frame size with FCS.
    #[arg(long, default_value_t = 64)]
    size: u16,
    #[arg(long, default_value_t = 1)]
    flows: u32,
    /// Core for the chain (and testpmd's forwarding lcore). Default: the last core.
    #[arg(long)]
    core: Option<usize>,
    /// Skip the accounting-on measurements.
    #[arg(long)]
    no_accounting_compare: bool,
    /// Peer to measure in the same run.
    #[arg(long, value_enum, default_value = "testpmd")]
    peer: crate::registry::TestpmdPeer,
}

pub static BENCH: crate::registry::Entry<HopFlags, HopBench> = crate::registry::Entry {
    name: "hop",
    schema: HOP_SCHEMA,
    about: "Per-hop cost of forwarders in a compound chain, and DPDK testpmd as the peer",
    run: |f, stop, progress| {
        let (duration, warmup) = crate::registry::window(&f.duration, &f.warmup)?;
        if f.hops.is_empty() || f.repeat == 0 || duration == Duration::ZERO {
            return Err(crate::registry::BenchError::Usage(
                "need at least one hop count, one repetition and a non-zero duration".into(),
            ));
        }
        let args = HopBenchArgs {
            hops: f.hops,
            duration,
            warmup,
            repeat: f.repeat,
            batch: f.batch,
            size: f.size,
            flows: f.flows,
            core: f.core.or_else(sfclab_runtime::placement::default_chain_core),
            accounting_too: !f.no_accounting_compare,
            peer: f.peer == crate::registry::TestpmdPeer::Testpmd,
        };
        Ok(hop(&args, progress, stop)?)
    },
    figure: None,
};
