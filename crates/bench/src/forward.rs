//! `sfclab bench forward`: one forwarder between two veth pairs, tester - DUT - tester,
//! in namespaces the bench builds per round (and removes). The same tester for every row:
//! sfclab's generator and sink on one core, AF_XDP on `t-out`/`t-in`, frames signed so
//! that loss is counted per frame, offering as much as it can send. The device under
//! test runs on the other core:
//!
//! - **sfclab af_xdp / af_packet**: a compound chain of one `forwarder` from `d-in` to
//!   `d-out` (AF_XDP redirect into a socket; or AF_PACKET rings).
//! - **Linux**: the kernel forwarding IPv4 in the DUT namespace (RPS steers `d-in`'s
//!   receive work to the DUT core): no user-space process.
//! - **testpmd af_xdp**: `dpdk-testpmd --forward-mode=io` with `net_af_xdp` vdevs on
//!   `d-in` and `d-out`, its forwarding lcore on the DUT core.
//!
//! Figures per row: frames the tester got back per second (the forwarding rate), the
//! offered rate, loss, and the DUT core's cycles per forwarded frame from `/proc/stat`
//! (everything that core did, kernel and user, over the run, at the TSC rate: a
//! busy-polling DUT counts its idle polls too), beside sfclab's own busy cycles per packet.

use crate::{Progress, Stop};
use serde::Serialize;
use sfclab_io::IoKind;
use sfclab_runtime::{DeviceUnderTest, RunSettings, WiredSettings, run_across_veth};
use sfclab_topology::Testbed;
use sfclab_traffic::GeneratorConfig;
use std::time::Duration;

use crate::{RowRatio, median_if_any, row_ratios};
use std::fmt::Write as _;

pub const FORWARD_SCHEMA: &str = "sfclab.bench.forward/1";

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ForwardRow {
    /// `sfclab af_xdp`, `sfclab af_packet`, `linux`, `testpmd af_xdp`.
    pub name: String,
    /// The device under test as the testbed report names it.
    pub device: String,
    /// Frames the tester received per second, millions, per round.
    pub runs_mpps: Vec<f64>,
    pub mpps: Option<f64>,
    /// Frames the tester sent per second, millions, per round.
    pub runs_offered_mpps: Vec<f64>,
    /// Frames lost across the DUT in the window, per round, percent of those sent.
    pub runs_loss_pct: Vec<f64>,
    /// TSC cycles of the DUT core (all its non-idle time, `/proc/stat`) per frame the DUT
    /// forwarded (`d-out`'s transmitted frames), whole run, per round.
    pub runs_dut_core_cycles: Vec<f64>,
    pub dut_core_cycles: Option<f64>,
    /// sfclab DUTs: busy TSC cycles per packet of the DUT's run (polls that found nothing
    /// not counted), per round.
    pub runs_dut_busy_cycles: Vec<f64>,
    pub dut_busy_cycles: Option<f64>,
    /// The DUT's sockets (XDP mode and bind for sfclab AF_XDP).
    pub mode: Option<String>,
    pub commands: Vec<String>,
    pub skipped: Option<String>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ForwardBench {
    #[serde(flatten)]
    pub header: crate::BenchHeader,
    pub frame_size: u16,
    pub duration_s: f64,
    /// The tester's core and the DUT's.
    pub tester_core: usize,
    pub dut_core: usize,
    /// What the tester is, the same for every row.
    pub tester: String,
    /// Busy polling on the sfclab DUT's AF_XDP sockets, microseconds (`None`: off).
    pub busy_poll_us: Option<u32>,
    pub rows: Vec<ForwardRow>,
    /// sfclab af_xdp's forwarding rate over Linux's and over testpmd's, where measured.
    pub ratios: Vec<RowRatio>,
}

pub struct ForwardBenchArgs {
    pub duration: Duration,
    pub warmup: Duration,
    pub repeat: usize,
    pub size: u16,
    /// Measure testpmd as well (Linux forwarding is always measured: it needs nothing).
    pub peer: bool,
    /// Busy polling on the sfclab DUT's AF_XDP sockets, microseconds (`None`: off).
    pub busy_poll: Option<u32>,
}

/// Non-idle and total jiffies of `core` so far (time stolen by the hypervisor counts as
/// non-idle: the core was not free for the DUT).
fn core_jiffies(core: usize) -> Option<(u64, u64)> {
    crate::cpu_time::CpuTime::read(Some(core)).map(|t| (t.busy + t.steal, t.total()))
}

/// What a core did over a span of wall time, from `/proc/stat`.
pub(crate) struct CoreLoad {
    core: usize,
    before: Option<(u64, u64)>,
    started: std::time::Instant,
    seconds: f64,
    after: Option<(u64, u64)>,
}

impl CoreLoad {
    pub(crate) fn start(core: usize) -> CoreLoad {
        CoreLoad {
            core,
            before: core_jiffies(core),
            started: std::time::Instant::now(),
            seconds: 0.0,
            after: None,
        }
    }

    pub(crate) fn stop(mut self) -> CoreLoad {
        self.seconds = self.started.elapsed().as_secs_f64();
        self.after = core_jiffies(self.core);
        self
    }

    /// TSC cycles of all the core's non-idle time over the span per frame: its busy
    /// share of the wall time, at the TSC rate, over `frames`.
    pub(crate) fn cycles_per(&self, frames: u64) -> Option<f64> {
        match (self.before, self.after) {
            (Some(b), Some(a)) if frames > 0 && a.1 > b.1 => {
                let busy_share = (a.0 - b.0) as f64 / (a.1 - b.1) as f64;
                Some(busy_share * self.seconds * sfclab_core::tsc::hz() / frames as f64)
            }
            _ => None,
        }
    }
}

/// A testpmd stopped when dropped: the guard of an external DUT.
struct Running(Option<sfclab_peers::testpmd::Testpmd>);

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            p.stop();
        }
    }
}

impl sfclab_runtime::RunningDut for Running {
    /// testpmd's own counts are not read back: its row's figures are the tester's.
    fn stop(self: Box<Self>) -> sfclab_runtime::ExternalOutcome {
        drop(self);
        sfclab_runtime::ExternalOutcome::default()
    }
}

fn testpmd_dut(
    bin: String,
    cores: (usize, usize),
    commands: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    stop: Stop,
) -> DeviceUnderTest {
    use sfclab_peers::testpmd::{Testpmd, TestpmdSpec, wait_until};
    DeviceUnderTest::External {
        hops: 1,
        label: "dpdk-testpmd io forwarding (net_af_xdp)".into(),
        start: Box::new(move |bed: &Testbed| {
            let spec = TestpmdSpec {
                forward_core: cores.1,
                main_core: cores.0,
                vdevs: vec![
                    format!("net_af_xdp0,iface={}", bed.hops[0].input.name()),
                    format!("net_af_xdp1,iface={}", bed.hops[0].output.name()),
                ],
                mode: "io",
                tx_first: false,
                record_core_cycles: false,
                single_file_segments: false,
                netns: Some(bed.hops[0].namespace.name().to_string()),
            };
            let prefix = format!("sfclab-fwd-{}", std::process::id());
            let p = Testpmd::start(&bin, &spec, &prefix)?;
            *commands.lock().expect("commands") = vec![p.command.clone()];
            let mut procs = vec![p];
            wait_until(
                &mut procs,
                Duration::from_secs(90),
                "io forwarding start",
                &|| stop.requested(),
                |p| p[0].is_some(),
            )?;
            Ok(Box::new(Running(procs.pop())) as Box<dyn sfclab_runtime::RunningDut>)
        }),
    }
}

struct Round {
    mpps: f64,
    offered_mpps: f64,
    loss_pct: f64,
    core_cycles: Option<f64>,
    busy_cycles: Option<f64>,
    device: String,
    mode: Option<String>,
}

fn round(dut: DeviceUnderTest, io: IoKind, args: &ForwardBenchArgs, cores: (usize, usize)) -> Result<Round, String> {
    let traffic = GeneratorConfig {
        sizes: sfclab_traffic::FrameSizes::Fixed { size: args.size },
        flows: 256,
        probe_pps: 0.0,
        ..GeneratorConfig::default()
    };
    let run = RunSettings {
        duration: Some(args.duration),
        warmup: args.warmup,
        core: Some(cores.0),
        accounting: false,
        ..RunSettings::default()
    };
    let wired = WiredSettings {
        io,
        tester_io: Some(IoKind::AfXdp),
        dut_core: Some(cores.1),
        dut_ports: sfclab_io::AfXdpSettings {
            busy_poll: args.busy_poll,
            ..sfclab_io::AfXdpSettings::default()
        },
        ..WiredSettings::default()
    };
    let load = CoreLoad::start(cores.1);
    let w = run_across_veth(traffic, dut, &run, &wired).map_err(|e| e.to_string())?;
    let load = load.stop();
    let t = &w.tester;
    let forwarded = w
        .testbed
        .interfaces
        .iter()
        .find(|i| i.interface == "d-out")
        .map_or(0, |i| i.tx_packets);
    let core_cycles = load.cycles_per(forwarded);
    let sent = t.window_loss.sent.max(1);
    Ok(Round {
        mpps: t.mpps,
        offered_mpps: t.generated_mpps,
        loss_pct: t.window_loss.lost as f64 * 100.0 / sent as f64,
        core_cycles,
        busy_cycles: w.dut.first().and_then(|d| d.busy_cycles_per_packet),
        device: w.testbed.device_under_test.clone(),
        mode: w.dut.first().map(|d| d.source.summary.clone()),
    })
}

fn row(name: &str) -> ForwardRow {
    ForwardRow {
        name: name.into(),
        device: String::new(),
        runs_mpps: Vec::new(),
        mpps: None,
        runs_offered_mpps: Vec::new(),
        runs_loss_pct: Vec::new(),
        runs_dut_core_cycles: Vec::new(),
        dut_core_cycles: None,
        runs_dut_busy_cycles: Vec::new(),
        dut_busy_cycles: None,
        mode: None,
        commands: Vec::new(),
        skipped: None,
    }
}

/// Runs the rounds, every row once per round in turn; `tick` is told after each.
pub fn run(args: &ForwardBenchArgs, progress: &mut Progress, stop: &Stop) -> Result<ForwardBench, String> {
    let cores = sfclab_runtime::placement::allowed_cores();
    let (tester_core, dut_core) = match cores.as_slice() {
        [a, b, ..] => (*a, *b),
        _ => return Err("bench forward needs two cores this process may use".into()),
    };
    let testpmd = sfclab_peers::which("dpdk-testpmd");
    let mut rows = vec![
        row("sfclab af_xdp"),
        row("sfclab af_packet"),
        row("linux"),
        row("testpmd af_xdp"),
    ];
    rows[3].skipped = match (&testpmd, args.peer) {
        (_, false) => Some("--peer none".into()),
        (None, true) => Some("dpdk-testpmd not found (Debian: apt-get install dpdk)".into()),
        _ => None,
    };
    let commands = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let rounds = crate::row_rounds(args.repeat, &mut rows, (stop, progress), |r| {
        let forwarder = || {
            let nfs: sfclab_core::NamedNfs = vec![(
                "forwarder".to_string(),
                sfclab_nf::NfSpec::default_of("forwarder")
                    .expect("a registered NF")
                    .build(),
            )];
            DeviceUnderTest::Chain(vec![nfs.into()])
        };
        let (dut, io) = match r.name.as_str() {
            "sfclab af_xdp" => (forwarder(), IoKind::AfXdp),
            "sfclab af_packet" => (forwarder(), IoKind::AfPacket),
            "linux" => (DeviceUnderTest::Linux { hops: 1 }, IoKind::AfXdp),
            _ => (
                testpmd_dut(
                    testpmd.clone().expect("found"),
                    (tester_core, dut_core),
                    commands.clone(),
                    stop.clone(),
                ),
                IoKind::AfXdp,
            ),
        };
        match round(dut, io, args, (tester_core, dut_core)) {
            Ok(x) => {
                r.runs_mpps.push(x.mpps);
                r.runs_offered_mpps.push(x.offered_mpps);
                r.runs_loss_pct.push(x.loss_pct);
                r.runs_dut_core_cycles.extend(x.core_cycles);
                r.runs_dut_busy_cycles.extend(x.busy_cycles);
                r.device = x.device;
                r.mode = x.mode;
                if r.name.starts_with("testpmd") {
                    r.commands = commands.lock().expect("commands").clone();
                }
            }
            // Ctrl-C: the round is cut, the row stays.
            Err(_) if stop.requested() => {}
            // The peer's failure is its row's; sfclab's own is the bench's.
            Err(e) if r.name.starts_with("testpmd") => r.skipped = Some(e),
            Err(e) => return Err(format!("{}: {e}", r.name)),
        }
        Ok(())
    })?;
    for r in rows.iter_mut() {
        r.mpps = median_if_any(&r.runs_mpps);
        r.dut_core_cycles = median_if_any(&r.runs_dut_core_cycles);
        r.dut_busy_cycles = median_if_any(&r.runs_dut_busy_cycles);
    }
    let ratios = row_ratios(
        &[("sfclab af_xdp", "linux"), ("sfclab af_xdp", "testpmd af_xdp")],
        |name| rows.iter().find(|r| r.name == name).and_then(|r| r.mpps),
    );
    Ok(ForwardBench {
        header: crate::BenchHeader::new(FORWARD_SCHEMA, rounds.completed(), rounds.interrupted()),
        frame_size: args.size,
        duration_s: args.duration.as_secs_f64(),
        tester_core,
        dut_core,
        tester: format!(
            "sfclab generator and sink on core {tester_core}, AF_XDP on t-out/t-in, {}-byte UDP frames in 256 flows, as fast as it sends",
            args.size
        ),
        busy_poll_us: args.busy_poll,
        rows,
        ratios,
    })
}

impl crate::RoundRow for ForwardRow {
    fn name(&self) -> &str {
        &self.name
    }

    fn skipped(&self) -> bool {
        self.skipped.is_some()
    }

    fn keep_completed(&mut self, rounds: &crate::Rounds) {
        for runs in [
            &mut self.runs_mpps,
            &mut self.runs_offered_mpps,
            &mut self.runs_loss_pct,
            &mut self.runs_dut_core_cycles,
            &mut self.runs_dut_busy_cycles,
        ] {
            rounds.keep_completed(runs);
        }
    }
}

benchmark!(ForwardBench, render_table);

fn render_table(b: &ForwardBench) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}, one forwarder between two veth pairs, {}-byte frames, {} rounds of {:.1} s, rows interleaved (medians [min–max])\ntester: {}; device under test on core {}{}\n",
        b.header.title("forward"),
        b.frame_size,
        b.header.repeat,
        b.duration_s,
        b.tester,
        b.dut_core,
        b.busy_poll_us
            .map_or(String::new(), |us| format!(", sfclab DUT busy-polling ({us} us)"))
    );
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    table.set_header([
        "row",
        "Mpps forwarded",
        "Mpps offered",
        "loss %",
        "DUT core cycles/frame",
        "DUT busy cycles/packet",
        "device under test",
    ]);
    for r in &b.rows {
        let forwarded = match &r.skipped {
            Some(why) if r.runs_mpps.is_empty() => format!("skipped: {why}"),
            _ => crate::or_dash(&r.runs_mpps, 3),
        };
        let device = match &r.mode {
            Some(m) => format!("{}: {m}", r.device),
            None => r.device.clone(),
        };
        table.add_row([
            r.name.clone(),
            forwarded,
            crate::or_dash(&r.runs_offered_mpps, 3),
            crate::or_dash(&r.runs_loss_pct, 2),
            crate::or_dash(&r.runs_dut_core_cycles, 0),
            crate::or_dash(&r.runs_dut_busy_cycles, 0),
            device,
        ]);
    }
    let _ = writeln!(s, "{table}");
    let _ = writeln!(
        s,
        "DUT core cycles/frame: all the DUT core's non-idle time (/proc/stat) per frame d-out sent, whole run; a busy-polling DUT counts its empty polls too. DUT busy cycles/packet: sfclab's own, empty polls excluded."
    );
    crate::ratios_and_commands(
        &mut s,
        &b.ratios,
        "forwarded Mpps, same run, same tester",
        b.rows.iter().map(|r| (r.name.as_str(), r.commands.as_slice())),
    );
    let wide = b.rows.iter().filter(|r| crate::is_wide(&r.runs_mpps)).count();
    s += &crate::footer(wide, b.header.interrupted, b.header.repeat);
    s
}

/// `sfclab bench forward`'s flags.
#[derive(clap::Args)]
pub struct ForwardFlags {
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Window of each round.
    #[arg(long, default_value = "3s")]
    duration: String,
    #[arg(long, default_value = "500ms")]
    warmup: String,
    /// Frame size with FCS (at least 64: the tester signs each frame).
    #[arg(long, default_value_t = 64)]
    size: u16,
    /// `testpmd` (the default) or `none`; Linux forwarding is always measured.
    #[arg(long, value_enum, default_value = "testpmd")]
    peer: crate::registry::TestpmdPeer,
    /// Busy polling on the sfclab DUT's AF_XDP sockets, microseconds (default: off).
    #[arg(long)]
    busy_poll: Option<u32>,
}

pub static BENCH: crate::registry::Entry<ForwardFlags, ForwardBench> = crate::registry::Entry {
    name: "forward",
    schema: FORWARD_SCHEMA,
    about: "One forwarder between two veth pairs (tester - DUT - tester, namespaces it builds): sfclab AF_XDP and AF_PACKET against Linux IP forwarding and DPDK testpmd with two net_af_xdp vdevs, the same sfclab tester for all, interleaved rounds (needs root)",
    run: |f, stop, progress| {
        let (duration, warmup) = crate::registry::repeated_window(f.repeat, &f.duration, &f.warmup)?;
        let args = ForwardBenchArgs {
            duration,
            warmup,
            repeat: f.repeat,
            size: f.size,
            peer: f.peer == crate::registry::TestpmdPeer::Testpmd,
            busy_poll: f.busy_poll,
        };
        Ok(run(&args, progress, stop)?)
    },
    figure: None,
};
