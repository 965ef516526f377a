//! `sfclab bench io`: packet I/O over one veth pair between two namespaces the bench
//! builds (and removes), 64-byte frames as fast as each side goes, in interleaved rounds.
//!
//! - **sfclab**: the generator sends over AF_XDP on `io-tx` (namespace `a`), frames cross
//!   the pair, and AF_XDP on `io-rx` (namespace `b`) hands them to the sink. One thread on
//!   one core does both ends (a [`Wire`]); the kernel's work for a frame (veth transmit,
//!   the XDP program on `io-rx`, the copy into the receiving UMEM) runs inside that
//!   thread's `sendto`, so its busy cycles per packet are the whole path's.
//! - **DPDK**: `dpdk-testpmd --forward-mode=txonly` with a `net_af_xdp` vdev on `io-tx`
//!   on one core and `--forward-mode=rxonly` on `io-rx` on the other: two processes, two
//!   forwarding cores (and two main lcores, idle). Its figure is rxonly's Rx-pps, the
//!   median of its 1-second samples after two settling ones.
//!
//! Both are compared on frames *received*, in the same run, on the same pair.

use serde::Serialize;
use sfclab_core::NamedNfs;
use sfclab_io::{AfXdpPort, AfXdpSettings, Wire};
use sfclab_runtime::{RunSettings, run_compound_on};
use sfclab_topology::{Interface, Topology};
use sfclab_traffic::{GeneratorConfig, Sink};
use std::time::Duration;

use crate::{Interruptible, Machine, median, stop_requested};

pub const IO_SCHEMA: &str = "sfclab.bench.io/1";

/// One repetition of sfclab's side.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct SfclabIoRun {
    /// Frames received per second, millions.
    pub mpps: f64,
    /// Busy TSC cycles per packet of the one core (generator, both sockets, the kernel
    /// work of its sends, sink).
    pub cycles_per_packet: Option<f64>,
    /// Frames sent in the window and never received (kernel drops on the pair).
    pub lost: u64,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct IoBench {
    pub schema: &'static str,
    pub version: &'static str,
    pub machine: Machine,
    pub frame_size: u16,
    pub duration_s: f64,
    pub repeat: usize,
    pub interrupted: bool,
    /// XDP mode and bind of sfclab's receiving socket (`native`/`generic`, `copy`/`zero-copy`).
    pub sfclab_xdp_mode: String,
    pub sfclab_bind: String,
    /// The core sfclab's thread ran on.
    pub sfclab_core: Option<usize>,
    pub sfclab_runs: Vec<SfclabIoRun>,
    /// Median received Mpps of sfclab's runs.
    pub sfclab_mpps: f64,
    pub sfclab_cycles_per_packet: Option<f64>,
    /// testpmd txonly -> rxonly, both with `net_af_xdp` vdevs: received Mpps per round.
    pub testpmd_runs: Vec<f64>,
    pub testpmd_mpps: Option<f64>,
    /// The two testpmd command lines of the last round.
    pub testpmd_commands: Vec<String>,
    pub testpmd_skipped: Option<String>,
    /// sfclab / testpmd, received Mpps (medians of the same run).
    pub ratio: Option<f64>,
}

impl Interruptible for IoBench {
    fn interrupted(&self) -> bool {
        self.interrupted
    }
}

pub struct IoBenchArgs {
    pub duration: Duration,
    pub warmup: Duration,
    pub repeat: usize,
    pub size: u16,
    pub peer: bool,
    /// sfclab's receiving socket's XDP mode (`None`: native where the driver has it).
    pub xdp_mode: Option<sfclab_io::XdpMode>,
}

/// One veth pair between two fresh namespaces: `a:io-tx` -> `b:io-rx`.
fn pair() -> Result<(Topology, Interface, Interface), String> {
    let mut topo = Topology::new().map_err(|e| e.to_string())?;
    let a = topo.namespace("io-a").map_err(|e| e.to_string())?;
    let b = topo.namespace("io-b").map_err(|e| e.to_string())?;
    let (tx, rx) = topo.veth((&a, "io-tx"), (&b, "io-rx")).map_err(|e| e.to_string())?;
    Ok((topo, tx, rx))
}

fn open(end: &Interface, settings: AfXdpSettings) -> Result<AfXdpPort, String> {
    let name = end.name().to_string();
    end.namespace()
        .run(move || AfXdpPort::open(&name, &settings))
        .map_err(|e| e.to_string())?
}

/// sfclab's round: generator -> AF_XDP send on `io-tx` -> AF_XDP receive on `io-rx` -> sink.
fn sfclab_round(args: &IoBenchArgs, core: Option<usize>) -> Result<(SfclabIoRun, String, String), String> {
    let (_topo, tx, rx) = pair()?;
    let out = open(
        &tx,
        AfXdpSettings {
            receive: false,
            ..AfXdpSettings::default()
        },
    )?;
    let back = open(
        &rx,
        AfXdpSettings {
            xdp_mode: args.xdp_mode,
            ..AfXdpSettings::default()
        },
    )?;
    let (mode, bind) = (
        back.xdp_mode().map_or("none", |m| m.name()).to_string(),
        back.bind().name().to_string(),
    );
    let traffic = GeneratorConfig {
        sizes: sfclab_traffic::FrameSizes::Fixed { size: args.size },
        flows: 256,
        probe_pps: 0.0,
        ..GeneratorConfig::default()
    };
    let run = RunSettings {
        duration: Some(args.duration),
        warmup: args.warmup,
        core,
        accounting: false,
        ..RunSettings::default()
    };
    let generator = sfclab_traffic::Generator::new(traffic, run.batch).map_err(|(k, r)| format!("{k}: {r}"))?;
    let wire = Wire::new(generator, out, back, run.batch, Duration::from_millis(300));
    let r = run_compound_on(wire, Sink::new(false), NamedNfs::new(), &run).map_err(|e| e.to_string())?;
    Ok((
        SfclabIoRun {
            mpps: r.mpps,
            cycles_per_packet: r.busy_cycles_per_packet,
            lost: r.window_loss.lost,
        },
        mode,
        bind,
    ))
}

/// testpmd's round: txonly on `io-tx` (one core), rxonly on `io-rx` (the other).
fn testpmd_round(bin: &str, args: &IoBenchArgs, cores: (usize, usize)) -> Result<(f64, Vec<String>), String> {
    use sfclab_peers::testpmd::{Testpmd, TestpmdSpec, stop_all, wait_until};
    let (_topo, tx, rx) = pair()?;
    let spec = |end: &Interface, mode: &'static str, forward: usize, main: usize| TestpmdSpec {
        forward_core: forward,
        main_core: main,
        vdevs: vec![format!("net_af_xdp0,iface={}", end.name())],
        mode,
        tx_first: false,
        netns: Some(end.namespace().name().to_string()),
    };
    let prefix = format!("sfclab-io-{}", std::process::id());
    // The receiver first, so that it counts from the first frame; each forwarding lcore
    // on its own core, each main lcore on the other (it sleeps between statistics).
    let receiver = Testpmd::start(bin, &spec(&rx, "rxonly", cores.1, cores.0), &format!("{prefix}-rx"))?;
    let mut procs = vec![receiver];
    wait_until(&mut procs, Duration::from_secs(90), "rxonly forwarding start", |p| {
        p[0].is_some()
    })?;
    procs.push(Testpmd::start(
        bin,
        &spec(&tx, "txonly", cores.0, cores.1),
        &format!("{prefix}-tx"),
    )?);
    let periods = 2 + args.duration.as_secs_f64().ceil().max(1.0) as usize;
    let waited = wait_until(&mut procs, Duration::from_secs(90), "txonly forwarding start", |p| {
        p[1].is_some()
    })
    .and_then(|()| {
        // Count the receiver's periods from the sender's start.
        let start = procs[0].periods_forwarding().unwrap_or(0);
        wait_until(&mut procs, args.duration + Duration::from_secs(30), "statistics", |p| {
            p[0].is_some_and(|n| n > start + periods) && p[1].is_some_and(|n| n > periods)
        })
    });
    let commands: Vec<String> = procs.iter().map(|p| p.command.clone()).collect();
    let samples = stop_all(procs);
    waited?;
    // The receiver's last samples, after the sender's two settling periods: the
    // receiver started earlier, so its first samples are zeros.
    let rx_samples: Vec<f64> = samples[0].iter().map(|ports| ports.iter().sum()).collect();
    let window: Vec<f64> = rx_samples.iter().rev().skip(1).take(periods - 2).copied().collect();
    if window.is_empty() || window.iter().all(|&x| x == 0.0) {
        return Err("dpdk-testpmd rxonly counted nothing (try the commands by hand)".into());
    }
    Ok((median(&window) / 1e6, commands))
}

/// Runs the rounds, sfclab and testpmd alternately; `tick` is told after each.
pub fn run(args: &IoBenchArgs, tick: &mut dyn FnMut(usize, usize, &str)) -> Result<IoBench, String> {
    let cores = sfclab_runtime::placement::allowed_cores();
    let (c0, c1) = match cores.as_slice() {
        [a, b, ..] => (*a, *b),
        _ => return Err("bench io needs two cores this process may use".into()),
    };
    let bin = sfclab_peers::which("dpdk-testpmd");
    let mut testpmd_skipped = match (&bin, args.peer) {
        (_, false) => Some("--peer none".to_string()),
        (None, true) => Some("dpdk-testpmd not found (Debian: apt-get install dpdk)".to_string()),
        (Some(_), true) => None,
    };
    let total = args.repeat * if testpmd_skipped.is_none() { 2 } else { 1 };
    let (mut sfclab_runs, mut testpmd_runs, mut commands) = (Vec::new(), Vec::new(), Vec::new());
    let (mut mode, mut bind) = (String::new(), String::new());
    let mut interrupted = false;
    for round in 0..args.repeat {
        if stop_requested() {
            interrupted = true;
            break;
        }
        let (r, m, b) = sfclab_round(args, Some(c0))?;
        (mode, bind) = (m, b);
        sfclab_runs.push(r);
        tick(
            sfclab_runs.len() + testpmd_runs.len(),
            total,
            &format!("round {}: sfclab af_xdp", round + 1),
        );
        if let (Some(bin), None) = (&bin, &testpmd_skipped) {
            match testpmd_round(bin, args, (c0, c1)) {
                Ok((mpps, cmds)) => {
                    testpmd_runs.push(mpps);
                    commands = cmds;
                }
                Err(e) => testpmd_skipped = Some(e),
            }
            tick(
                sfclab_runs.len() + testpmd_runs.len(),
                total,
                &format!("round {}: testpmd af_xdp", round + 1),
            );
        }
    }
    if sfclab_runs.is_empty() {
        return Err("interrupted before the first round finished".into());
    }
    let sfclab_mpps = median(&sfclab_runs.iter().map(|r| r.mpps).collect::<Vec<_>>());
    let cycles: Vec<f64> = sfclab_runs.iter().filter_map(|r| r.cycles_per_packet).collect();
    let testpmd_mpps = (!testpmd_runs.is_empty()).then(|| median(&testpmd_runs));
    Ok(IoBench {
        schema: IO_SCHEMA,
        version: env!("CARGO_PKG_VERSION"),
        machine: Machine::read(),
        frame_size: args.size,
        duration_s: args.duration.as_secs_f64(),
        repeat: sfclab_runs.len(),
        interrupted,
        sfclab_xdp_mode: mode,
        sfclab_bind: bind,
        sfclab_core: Some(c0),
        sfclab_mpps,
        sfclab_cycles_per_packet: (!cycles.is_empty()).then(|| median(&cycles)),
        sfclab_runs,
        ratio: testpmd_mpps.filter(|&t| t > 0.0).map(|t| sfclab_mpps / t),
        testpmd_runs,
        testpmd_mpps,
        testpmd_commands: commands,
        testpmd_skipped,
    })
}
