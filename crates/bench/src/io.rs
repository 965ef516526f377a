//! `sfclab bench io`: packet I/O over one veth pair between two namespaces the bench
//! builds (and removes) per round, one frame size as fast as each side goes, in
//! interleaved rounds. Rows, each compared on frames *received* per second:
//!
//! - **sfclab af_xdp / af_packet**: the generator sends on `io-tx` (namespace `a`), frames
//!   cross the pair, and the same kind of port on `io-rx` (namespace `b`) hands them to
//!   the sink. One thread on one core does both ends (a [`TesterLink`]); the kernel's work for a
//!   frame (veth transmit, the XDP program or packet socket on `io-rx`, the copy into the
//!   receiving ring) runs inside that thread's send, so its busy cycles per packet are
//!   the whole path's.
//! - **testpmd af_xdp / af_packet**: `dpdk-testpmd --forward-mode=txonly` with a
//!   `net_af_xdp` (or `net_af_packet`, qdisc bypassed as sfclab's) vdev on `io-tx` on one
//!   core and `--forward-mode=rxonly` on `io-rx` on the other: two processes, two
//!   forwarding cores. Its figure is rxonly's Rx-pps, the median of its 1-second samples
//!   after two settling ones.
//! - **trafgen** (netsniff-ng, AF_PACKET TX ring, qdisc bypassed) sends on `io-tx` from one
//!   core; nothing receives in user space: its figure is `io-rx`'s kernel `rx_packets`
//!   over the window (frames the pair delivered), so it has less work per frame than the
//!   rows that also receive.

use crate::{Progress, Stop};
use serde::Serialize;
use sfclab_core::NamedNfs;
use sfclab_io::{AfXdpSettings, InterfacePort, IoKind, TesterLink};
use sfclab_runtime::{RunSettings, open_in_namespace, run_compound_on};
use sfclab_topology::{Interface, Topology};
use sfclab_traffic::{GeneratorConfig, Sink};
use std::time::{Duration, Instant};

use crate::{RowRatio, median, median_if_any, row_ratios};
use std::fmt::Write as _;

pub const IO_SCHEMA: &str = "sfclab.bench.io/2";

/// One contender: a tool and an I/O kind, measured in every round.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct IoRow {
    /// `sfclab af_xdp`, `testpmd af_packet`, `trafgen`, ...
    pub name: String,
    /// `sfclab`, `dpdk-testpmd` or `trafgen`.
    pub tool: String,
    /// `af_xdp` or `af_packet`.
    pub io: String,
    /// What this row does per frame and where: read it before comparing rows.
    pub does: String,
    /// Cores busy moving frames (forwarding lcores for testpmd).
    pub cores: usize,
    /// How the sockets were bound: XDP mode and copy/zero-copy for AF_XDP, the rings for
    /// AF_PACKET (`None` where the tool does not say).
    pub mode: Option<String>,
    /// Frames received per second, millions, per round.
    pub runs_mpps: Vec<f64>,
    /// Median of `runs_mpps`.
    pub mpps: Option<f64>,
    /// sfclab rows: busy TSC cycles per received frame of the one core, per round.
    pub runs_cycles_per_packet: Vec<f64>,
    pub cycles_per_packet: Option<f64>,
    /// sfclab rows: frames sent in the window and never received, all rounds.
    pub lost: Option<u64>,
    /// sfclab rows: `lost` per round, until the rounds are trimmed to whole ones.
    #[serde(skip)]
    runs_lost: Vec<u64>,
    /// The peer's command lines (last round).
    pub commands: Vec<String>,
    /// Why the row was not (fully) measured.
    pub skipped: Option<String>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct IoBench {
    #[serde(flatten)]
    pub header: crate::BenchHeader,
    pub frame_size: u16,
    pub duration_s: f64,
    /// The core sfclab's thread (and trafgen, and testpmd's txonly) ran on; testpmd's
    /// rxonly ran on the next.
    pub cores: Vec<usize>,
    /// Busy polling on sfclab's receiving AF_XDP socket, microseconds (`None`: off).
    pub busy_poll_us: Option<u32>,
    pub rows: Vec<IoRow>,
    /// sfclab af_xdp over testpmd af_xdp, sfclab af_packet over testpmd af_packet, and
    /// sfclab af_xdp over trafgen, where both were measured.
    pub ratios: Vec<RowRatio>,
}

pub struct IoBenchArgs {
    pub duration: Duration,
    pub warmup: Duration,
    pub repeat: usize,
    pub size: u16,
    /// Measure the peers (testpmd, trafgen) as well.
    pub peer: bool,
    /// sfclab's receiving AF_XDP socket's XDP mode (`None`: native where the driver has it).
    pub xdp_mode: Option<sfclab_io::XdpMode>,
    /// Busy polling on sfclab's receiving AF_XDP socket, microseconds (`None`: off).
    pub busy_poll: Option<u32>,
}

/// One veth pair between two fresh namespaces: `a:io-tx` -> `b:io-rx`.
fn pair() -> Result<(Topology, Interface, Interface), String> {
    let mut topo = Topology::new().map_err(|e| e.to_string())?;
    let a = topo.namespace("io-a").map_err(|e| e.to_string())?;
    let b = topo.namespace("io-b").map_err(|e| e.to_string())?;
    let (tx, rx) = topo.veth((&a, "io-tx"), (&b, "io-rx")).map_err(|e| e.to_string())?;
    Ok((topo, tx, rx))
}

/// What a row's receiving port obtained from the kernel.
fn mode_of(port: &InterfacePort) -> String {
    match port {
        InterfacePort::AfXdp(p) => format!(
            "XDP {}, {} bind",
            p.xdp_mode().map_or("none", |m| m.name()),
            p.bind().name()
        ),
        InterfacePort::AfPacket(_) => "TPACKET_V3 receive ring, TPACKET_V2 send ring, qdisc bypassed".into(),
        InterfacePort::Memif(p) => sfclab_core::RxPort::info(p).summary,
    }
}

fn traffic(size: u16) -> GeneratorConfig {
    GeneratorConfig {
        sizes: sfclab_traffic::FrameSizes::Fixed { size },
        flows: 256,
        probe_pps: 0.0,
        ..GeneratorConfig::default()
    }
}

/// The first frame sfclab's generator sends at `size`: what trafgen sends too.
fn first_frame(size: u16) -> Result<Vec<u8>, String> {
    use sfclab_core::{Batch, PacketPool, RxPort};
    let mut pool = PacketPool::new(64);
    sfclab_traffic::Generator::prime_pool(&mut pool);
    let mut generator = sfclab_traffic::Generator::new(traffic(size), 32).map_err(|(k, r)| format!("{k}: {r}"))?;
    let mut batch = Batch::new(32);
    generator.rx(sfclab_core::tsc::now(), &mut pool, &mut batch);
    let frame = batch.iter().next().map(|p| p.data().to_vec());
    pool.free_batch(&mut batch);
    frame.ok_or_else(|| "the generator made no frame".into())
}

struct SfclabRound {
    mpps: f64,
    cycles_per_packet: Option<f64>,
    lost: u64,
    mode: String,
}

/// sfclab's round: generator -> `kind` send on `io-tx` -> `kind` receive on `io-rx` -> sink.
fn sfclab_round(kind: IoKind, args: &IoBenchArgs, core: usize) -> Result<SfclabRound, String> {
    let (_topo, tx, rx) = pair()?;
    let out = open_in_namespace(kind, &tx, &AfXdpSettings::default(), false)?;
    let xdp = AfXdpSettings {
        xdp_mode: args.xdp_mode,
        busy_poll: args.busy_poll,
        ..AfXdpSettings::default()
    };
    let back = open_in_namespace(kind, &rx, &xdp, true)?;
    let mut mode = mode_of(&back);
    if let (Some(us), IoKind::AfXdp) = (args.busy_poll, kind) {
        mode += &format!(", busy poll {us} us");
    }
    let run = RunSettings {
        duration: Some(args.duration),
        warmup: args.warmup,
        core: Some(core),
        accounting: false,
        ..RunSettings::default()
    };
    let generator =
        sfclab_traffic::Generator::new(traffic(args.size), run.batch).map_err(|(k, r)| format!("{k}: {r}"))?;
    let wire = TesterLink::new(generator, out, back, run.batch, Duration::from_millis(300));
    let r = run_compound_on(wire, Sink::new(false), NamedNfs::new(), &run).map_err(|e| e.to_string())?;
    Ok(SfclabRound {
        mpps: r.mpps,
        cycles_per_packet: r.busy_cycles_per_packet,
        lost: r.window_loss.lost,
        mode,
    })
}

/// testpmd's round: txonly on `io-tx` (one core), rxonly on `io-rx` (the other), with
/// `kind`'s vdev on each.
fn testpmd_round(
    bin: &str,
    kind: IoKind,
    args: &IoBenchArgs,
    cores: (usize, usize),
    stop: &Stop,
) -> Result<(f64, Vec<String>), String> {
    use sfclab_peers::testpmd::{Testpmd, TestpmdSpec, stop_all, wait_until};
    let (_topo, tx, rx) = pair()?;
    let vdev = |end: &Interface| match kind {
        IoKind::AfXdp => format!("net_af_xdp0,iface={}", end.name()),
        IoKind::AfPacket => format!("net_af_packet0,iface={},qdisc_bypass=1", end.name()),
    };
    let spec = |end: &Interface, mode: &'static str, forward: usize, main: usize| TestpmdSpec {
        forward_core: forward,
        main_core: main,
        vdevs: vec![vdev(end)],
        mode,
        tx_first: false,
        record_core_cycles: false,
        single_file_segments: false,
        netns: Some(end.namespace().name().to_string()),
    };
    let prefix = format!("sfclab-io-{}", std::process::id());
    // The receiver first, so that it counts from the first frame; each forwarding lcore
    // on its own core, each main lcore on the other (it sleeps between statistics).
    let receiver = Testpmd::start(bin, &spec(&rx, "rxonly", cores.1, cores.0), &format!("{prefix}-rx"))?;
    let mut procs = vec![receiver];
    wait_until(
        &mut procs,
        Duration::from_secs(90),
        "rxonly forwarding start",
        &|| stop.requested(),
        |p| p[0].is_some(),
    )?;
    procs.push(Testpmd::start(
        bin,
        &spec(&tx, "txonly", cores.0, cores.1),
        &format!("{prefix}-tx"),
    )?);
    let periods = 2 + args.duration.as_secs_f64().ceil().max(1.0) as usize;
    let waited = wait_until(
        &mut procs,
        Duration::from_secs(90),
        "txonly forwarding start",
        &|| stop.requested(),
        |p| p[1].is_some(),
    )
    .and_then(|()| {
        // Count the receiver's periods from the sender's start.
        let start = procs[0].periods_forwarding().unwrap_or(0);
        wait_until(
            &mut procs,
            args.duration + Duration::from_secs(30),
            "statistics",
            &|| stop.requested(),
            |p| p[0].is_some_and(|n| n > start + periods) && p[1].is_some_and(|n| n > periods),
        )
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

/// trafgen's round: it sends on `io-tx` from `core`; `io-rx`'s kernel counter over the
/// window is what the pair delivered.
fn trafgen_round(bin: &str, args: &IoBenchArgs, core: usize) -> Result<(f64, Vec<String>), String> {
    let (_topo, tx, rx) = pair()?;
    let frame = first_frame(args.size)?;
    let mut sender = sfclab_peers::trafgen::Trafgen::start(bin, Some(tx.namespace().name()), tx.name(), core, &frame)?;
    std::thread::sleep(args.warmup.max(Duration::from_millis(300)));
    if !sender.running() {
        return Err(sender.stop().err().unwrap_or_else(|| "trafgen ended by itself".into()));
    }
    let before = rx.counters().map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    std::thread::sleep(args.duration);
    let after = rx.counters().map_err(|e| e.to_string())?;
    let seconds = t0.elapsed().as_secs_f64();
    let command = sender.command.clone();
    sender.stop()?;
    let received = after.since(&before).rx_packets;
    if received == 0 {
        return Err(format!("io-rx received nothing from trafgen (try `{command}` by hand)"));
    }
    Ok((received as f64 / seconds / 1e6, vec![command]))
}

fn row(name: &str, tool: &str, io: IoKind, does: &str, cores: usize) -> IoRow {
    IoRow {
        name: name.into(),
        tool: tool.into(),
        io: io.to_string(),
        does: does.into(),
        cores,
        mode: None,
        runs_mpps: Vec::new(),
        mpps: None,
        runs_cycles_per_packet: Vec::new(),
        cycles_per_packet: None,
        lost: None,
        runs_lost: Vec::new(),
        commands: Vec::new(),
        skipped: None,
    }
}

/// Runs the rounds, every row once per round in turn; `tick` is told after each.
pub fn run(args: &IoBenchArgs, progress: &mut Progress, stop: &Stop) -> Result<IoBench, String> {
    let cores = sfclab_runtime::placement::allowed_cores();
    let (c0, c1) = match cores.as_slice() {
        [a, b, ..] => (*a, *b),
        _ => return Err("bench io needs two cores this process may use".into()),
    };
    let one_core = "generator, send (and the kernel's work for it), receive, sink: one thread";
    let mut rows = vec![
        row("sfclab af_xdp", "sfclab", IoKind::AfXdp, one_core, 1),
        row("sfclab af_packet", "sfclab", IoKind::AfPacket, one_core, 1),
    ];
    let testpmd = sfclab_peers::which("dpdk-testpmd");
    let trafgen = sfclab_peers::which("trafgen");
    let two_procs = "txonly sends in one process, rxonly receives in another: two forwarding cores";
    for io in [IoKind::AfXdp, IoKind::AfPacket] {
        let mut r = row(&format!("testpmd {io}"), "dpdk-testpmd", io, two_procs, 2);
        r.skipped = match (&testpmd, args.peer) {
            (_, false) => Some("--peer none".into()),
            (None, true) => Some("dpdk-testpmd not found (Debian: apt-get install dpdk)".into()),
            _ => None,
        };
        rows.push(r);
    }
    let mut t = row(
        "trafgen",
        "trafgen",
        IoKind::AfPacket,
        "sends only, one process; received = io-rx's kernel rx_packets, no receiver in user space",
        1,
    );
    t.mode = Some("TPACKET TX ring, qdisc bypassed".into());
    t.skipped = match (&trafgen, args.peer) {
        (_, false) => Some("--peer none".into()),
        (None, true) => Some("trafgen not found (Debian: apt-get install netsniff-ng)".into()),
        _ => None,
    };
    rows.push(t);

    let rounds = crate::row_rounds(args.repeat, &mut rows, (stop, progress), |r| {
        let io: IoKind = r.io.parse().expect("a row's io is a kind");
        match r.tool.as_str() {
            "sfclab" => {
                let s = sfclab_round(io, args, c0)?;
                r.runs_mpps.push(s.mpps);
                r.runs_cycles_per_packet.extend(s.cycles_per_packet);
                r.runs_lost.push(s.lost);
                r.mode = Some(s.mode);
            }
            "dpdk-testpmd" => match testpmd_round(testpmd.as_deref().expect("found"), io, args, (c0, c1), stop) {
                Ok((mpps, commands)) => {
                    r.runs_mpps.push(mpps);
                    r.commands = commands;
                }
                // Ctrl-C: the round is cut, the row stays.
                Err(_) if stop.requested() => {}
                Err(e) => r.skipped = Some(e),
            },
            _ => match trafgen_round(trafgen.as_deref().expect("found"), args, c0) {
                Ok((mpps, commands)) => {
                    r.runs_mpps.push(mpps);
                    r.commands = commands;
                }
                // Ctrl-C: the round is cut, the row stays.
                Err(_) if stop.requested() => {}
                Err(e) => r.skipped = Some(e),
            },
        }
        Ok(())
    })?;
    for r in rows.iter_mut() {
        if !r.runs_lost.is_empty() {
            r.lost = Some(r.runs_lost.iter().sum());
        }
        r.mpps = median_if_any(&r.runs_mpps);
        r.cycles_per_packet = median_if_any(&r.runs_cycles_per_packet);
    }
    let ratios = row_ratios(
        &[
            ("sfclab af_xdp", "testpmd af_xdp"),
            ("sfclab af_packet", "testpmd af_packet"),
            ("sfclab af_xdp", "trafgen"),
        ],
        |name| rows.iter().find(|r| r.name == name).and_then(|r| r.mpps),
    );
    Ok(IoBench {
        header: crate::BenchHeader::new(IO_SCHEMA, rounds.completed(), rounds.interrupted()),
        frame_size: args.size,
        duration_s: args.duration.as_secs_f64(),
        cores: vec![c0, c1],
        busy_poll_us: args.busy_poll,
        rows,
        ratios,
    })
}

impl crate::RoundRow for IoRow {
    fn name(&self) -> &str {
        &self.name
    }

    fn skipped(&self) -> bool {
        self.skipped.is_some()
    }

    fn keep_completed(&mut self, rounds: &crate::Rounds) {
        rounds.keep_completed(&mut self.runs_mpps);
        rounds.keep_completed(&mut self.runs_cycles_per_packet);
        rounds.keep_completed(&mut self.runs_lost);
    }
}

benchmark!(IoBench, render_table);

fn render_table(b: &IoBench) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}, one veth pair between two namespaces, {}-byte frames, {} rounds of {:.1} s, rows interleaved (medians [min–max])\n",
        b.header.title("io"),
        b.frame_size,
        b.header.repeat,
        b.duration_s
    );
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    table.set_header([
        "row",
        "Mpps received",
        "cores",
        "TSC cycles/packet",
        "lost",
        "mode",
        "what it does",
    ]);
    for r in &b.rows {
        let mpps = match (&r.mpps, &r.skipped) {
            (Some(_), _) => crate::with_range(&r.runs_mpps, 3),
            (None, Some(why)) => format!("skipped: {why}"),
            (None, None) => "-".into(),
        };
        let cycles = if r.runs_cycles_per_packet.is_empty() {
            "-".to_string()
        } else {
            crate::with_range(&r.runs_cycles_per_packet, 0)
        };
        table.add_row([
            r.name.clone(),
            mpps,
            r.cores.to_string(),
            cycles,
            r.lost.map_or("-".into(), |l| l.to_string()),
            r.mode.clone().unwrap_or_else(|| "-".into()),
            r.does.clone(),
        ]);
    }
    let _ = writeln!(s, "{table}");
    crate::ratios_and_commands(
        &mut s,
        &b.ratios,
        "received Mpps, same run, same pair",
        b.rows.iter().map(|r| (r.name.as_str(), r.commands.as_slice())),
    );
    let _ = writeln!(
        s,
        "sfclab and trafgen on core {}; testpmd's txonly on core {}, rxonly on core {}",
        b.cores[0], b.cores[0], b.cores[1]
    );
    let wide = b.rows.iter().filter(|r| crate::is_wide(&r.runs_mpps)).count();
    s += &crate::footer(wide, b.header.interrupted, b.header.repeat);
    s
}

/// Who `bench io` measures beside sfclab.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum IoPeers {
    All,
    None,
}

/// `sfclab bench io`'s flags.
#[derive(clap::Args)]
pub struct IoFlags {
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Window of each round.
    #[arg(long, default_value = "3s")]
    duration: String,
    #[arg(long, default_value = "500ms")]
    warmup: String,
    /// Frame size with FCS.
    #[arg(long, default_value_t = 64)]
    size: u16,
    /// `all` (the default: dpdk-testpmd's af_xdp and af_packet vdevs, and trafgen, each
    /// where installed) or `none`.
    #[arg(long, value_enum, default_value = "all")]
    peer: IoPeers,
    /// XDP mode of sfclab's receiving socket: `native` or `generic` (default: native
    /// where the driver has it).
    #[arg(long)]
    xdp_mode: Option<sfclab_io::XdpMode>,
    /// Busy polling on sfclab's receiving AF_XDP socket, microseconds (default: off).
    #[arg(long)]
    busy_poll: Option<u32>,
}

pub static BENCH: crate::registry::Entry<IoFlags, IoBench> = crate::registry::Entry {
    name: "io",
    schema: IO_SCHEMA,
    about: "Packet I/O over a veth pair between two namespaces it builds: sfclab's generator -> sink over AF_XDP and AF_PACKET against DPDK testpmd txonly -> rxonly with net_af_xdp and net_af_packet vdevs, and trafgen, on the same pair, interleaved rounds (needs root)",
    run: |f, stop, progress| {
        let (duration, warmup) = crate::registry::repeated_window(f.repeat, &f.duration, &f.warmup)?;
        let args = IoBenchArgs {
            duration,
            warmup,
            repeat: f.repeat,
            size: f.size,
            peer: f.peer == IoPeers::All,
            xdp_mode: f.xdp_mode,
            busy_poll: f.busy_poll,
        };
        Ok(run(&args, progress, stop)?)
    },
    figure: None,
};
