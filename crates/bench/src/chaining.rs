//! `sfclab bench chaining`: chains of n forwarders, one per hop, over every chaining
//! technology sfclab can build on this machine, measured by the same tester in
//! interleaved rounds (seed 002 Section IV, seed 000 Fig. 3, seed 004 Fig. 3/4). The
//! tester is sfclab's generator and sink on one core, AF_XDP on `t-out`/`t-in`, offering
//! as much as it can send (for every chain here that is more than the chain forwards:
//! the figures are throughput under overload). The chain runs on the other core:
//!
//! - **compound**: the whole chain one sfclab compound run (function calls) in one
//!   namespace between the tester's veth pairs: the I/O paid once, whatever n;
//! - **veth**: each forwarder an sfclab compound run in a namespace of its own, hops
//!   joined by veth pairs, AF_XDP on every hop end, all hops taking turns on the DUT
//!   core's thread;
//! - **nic-switch**: the same hops, each with two "virtual functions" (macvlans in
//!   bridge mode of one parent: an emulated NIC's VEB), so a frame crosses the switch
//!   after every hop;
//! - **linux**: every hop a namespace whose kernel forwards IPv4 (RPS on the DUT core),
//!   no user-space process: seed 002's baseline;
//! - **ovs**: every hop an Open vSwitch bridge on the userspace datapath with afxdp
//!   ports, OVS's PMD thread on the DUT core: seed 002's other baseline;
//! - **memif**: every forwarder an sfclab process of its own in a namespace of its own
//!   (`chaining: memif`), all pinned to the DUT core and waiting in interrupt mode (so
//!   they share it), joined to each other by memif. The tester is the same program on
//!   the same core, but its link is memif too: shared memory reaches it, veth does not.
//!
//! Per cell: frames the tester got back per second, the offered rate, the loss, the DUT
//! core's cycles per delivered frame (`/proc/stat`: all its non-idle time), and the
//! drops the kernel, OVS and the hops counted, by place.

use crate::{Progress, Stop};
use serde::Serialize;
use sfclab_io::IoKind;
use sfclab_runtime::{DeviceUnderTest, HopLinks, RunSettings, WiredSettings, run_across_veth};
use sfclab_topology::MacvlanMode;
use sfclab_topology::ovs::OvsPort;
use sfclab_traffic::{GeneratorConfig, Rate};
use std::collections::BTreeMap;
use std::time::Duration;

use crate::median_if_any;
use std::fmt::Write as _;

pub const CHAINING_SCHEMA: &str = "sfclab.bench.chaining/2";

/// The technologies, in the order rows are shown and measured.
pub const TECHNOLOGIES: [&str; 6] = ["compound", "veth", "nic-switch", "linux", "ovs", "memif"];

/// One technology at one chain length.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ChainingCell {
    /// `TECHNOLOGY n=HOPS`, as progress names the cell.
    #[serde(skip)]
    #[schemars(skip)]
    label: String,
    /// `compound`, `veth`, `nic-switch`, `linux`, `ovs` or `memif`.
    pub technology: String,
    /// How the tester reaches the chain: `veth (AF_XDP)`, or `memif` for memif chains.
    pub tester_link: String,
    /// Forwarders (hops) in the chain.
    pub hops: usize,
    /// What was built, as the testbed report says it.
    pub device: String,
    /// Frames the tester received per second, millions, per round.
    pub runs_mpps: Vec<f64>,
    pub mpps: Option<f64>,
    /// Frames the tester put on the wire per second, millions, per round (what it
    /// generated less what its own transmit refused).
    pub runs_offered_mpps: Vec<f64>,
    /// Frames lost across the chain in the window, percent of those offered, per round.
    pub runs_loss_pct: Vec<f64>,
    /// TSC cycles of the DUT core (all its non-idle time, `/proc/stat`) per frame the
    /// tester got back, whole run, per round.
    pub runs_dut_core_cycles: Vec<f64>,
    pub dut_core_cycles: Option<f64>,
    /// Where the frames lost went in the last round, by place (kernel interface
    /// counters, softnet backlog, OVS datapath and ports, the hops' own drops), and
    /// `unaccounted` for what none of them saw.
    pub drops: BTreeMap<String, u64>,
    pub skipped: Option<String>,
}

/// One technology over another at one chain length, medians.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ChainingRatio {
    pub hops: usize,
    pub technology: String,
    pub over: String,
    pub ratio: f64,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct ChainingBench {
    #[serde(flatten)]
    pub header: crate::BenchHeader,
    pub frame_size: u16,
    pub duration_s: f64,
    pub tester_core: usize,
    pub dut_core: usize,
    /// What the tester is, the same for every cell.
    pub tester: String,
    pub lengths: Vec<usize>,
    pub cells: Vec<ChainingCell>,
    /// memif over linux and over veth, veth over linux and over ovs, nic-switch over
    /// veth, compound over veth, at each length.
    pub ratios: Vec<ChainingRatio>,
}

pub struct ChainingBenchArgs {
    pub duration: Duration,
    pub warmup: Duration,
    pub repeat: usize,
    pub size: u16,
    /// Chain lengths.
    pub lengths: Vec<usize>,
    /// Technologies to measure (of [`TECHNOLOGIES`]).
    pub technologies: Vec<String>,
}

fn forwarders(n: usize, core: usize) -> Vec<(sfclab_runtime::ChainGraph, Option<usize>)> {
    (0..n)
        .map(|i| {
            let nf = sfclab_nf::NfSpec::default_of("forwarder")
                .expect("a registered NF")
                .build();
            (vec![(format!("forwarder{}", i + 1), nf)].into(), Some(core))
        })
        .collect()
}

fn device(technology: &str, n: usize, dut_core: usize) -> DeviceUnderTest {
    match technology {
        "compound" => {
            let nfs: sfclab_core::NamedNfs = forwarders(n, dut_core).into_iter().flat_map(|(g, _)| g.nfs).collect();
            DeviceUnderTest::Chain(vec![nfs.into()])
        }
        "veth" => DeviceUnderTest::Hops {
            hops: forwarders(n, dut_core),
            links: HopLinks::Veth,
        },
        "nic-switch" => DeviceUnderTest::Hops {
            hops: forwarders(n, dut_core),
            links: HopLinks::NicSwitch(MacvlanMode::Bridge),
        },
        "linux" => DeviceUnderTest::Linux { hops: n },
        _ => DeviceUnderTest::Ovs {
            hops: n,
            ports: OvsPort::AfXdp,
        },
    }
}

pub(crate) struct Round {
    pub(crate) mpps: f64,
    pub(crate) offered_mpps: f64,
    loss_pct: f64,
    pub(crate) core_cycles: Option<f64>,
    device: String,
    drops: BTreeMap<String, u64>,
}

/// One run of `n` hops chained by `technology` at frames of `size` bytes offered at
/// `rate`, measured for `window` (duration, warmup), sfclab's tester on `cores.0`, the
/// chain on `cores.1`. Ctrl-C (`stop`) ends the window at once.
pub(crate) fn round(
    technology: &str,
    n: usize,
    size: u16,
    rate: Rate,
    (duration, warmup): (Duration, Duration),
    cores: (usize, usize),
    stop: &Stop,
) -> Result<Round, String> {
    let traffic = GeneratorConfig {
        sizes: sfclab_traffic::FrameSizes::Fixed { size },
        flows: 256,
        rate,
        probe_pps: 0.0,
        ..GeneratorConfig::default()
    };
    let run = RunSettings {
        duration: Some(duration),
        warmup,
        core: Some(cores.0),
        accounting: false,
        stop: Some(stop.clone()),
        ..RunSettings::default()
    };
    let wired = WiredSettings {
        io: IoKind::AfXdp,
        dut_core: Some(cores.1),
        ..WiredSettings::default()
    };
    let load = crate::forward::CoreLoad::start(cores.1);
    let w = if technology == "memif" {
        memif_chain(n, size, rate, (duration, warmup), (cores.1, stop))?
    } else {
        run_across_veth(traffic, device(technology, n, cores.1), &run, &wired).map_err(|e| e.to_string())?
    };
    let load = load.stop();
    let t = &w.tester;
    // Frames back at the tester over the whole run: its receiving interface's count, or
    // (memif, no kernel interface) its own.
    let delivered = w
        .testbed
        .interfaces
        .last()
        .map_or(t.conservation.received, |i| i.rx_packets);
    let core_cycles = load.cycles_per(delivered);
    let (offered_mpps, loss_pct) = placed_and_lost(t);
    let mut drops = w.lost.explained.clone();
    if w.lost.unaccounted > 0 {
        drops.insert("unaccounted".into(), w.lost.unaccounted);
    }
    Ok(Round {
        mpps: t.mpps,
        offered_mpps,
        loss_pct,
        core_cycles,
        device: w.testbed.device_under_test.clone(),
        drops,
    })
}

/// `n` forwarders chained by memif (each a process in its own namespace, interrupt
/// mode, all on `core`), through the library API as a user would run them.
fn memif_chain(
    n: usize,
    size: u16,
    rate: Rate,
    (duration, warmup): (Duration, Duration),
    (core, stop): (usize, &Stop),
) -> Result<sfclab_runtime::WiredReport, String> {
    use sfclab_experiment::chain_file::{ChainSource, Experiment};
    use sfclab_experiment::settings::{ChainingSetting, Settings};
    let s = Settings::default()
        .chaining(ChainingSetting::Memif)
        .memif_wait(sfclab_io::memif::Wait::Interrupt {
            spin: sfclab_io::memif::DEFAULT_SPIN,
        })
        .core(core)
        .duration(duration)
        .warmup(warmup)
        .accounting(false)
        .size(sfclab_traffic::FrameSizes::Fixed { size })
        .flows(256u32)
        .rate(rate)
        .latency_probe_pps(0.0);
    let mut exp = Experiment::load(&ChainSource::Shorthand(format!("forwarder*{n}")), &s).map_err(|e| e.to_string())?;
    exp.stop_on(stop);
    match exp.run().map_err(|e| e.to_string())? {
        sfclab_experiment::Reports::Wired(w) => Ok(w),
        sfclab_experiment::Reports::Chain(_) => Err("a memif chain ran in one process".into()),
    }
}

/// What a tester's window put before the device (frames it generated less those its
/// own transmit refused), per second, millions, and the percent of those it did not get
/// back: its refusals are not the device's loss.
pub(crate) fn placed_and_lost(t: &sfclab_runtime::RunReport) -> (f64, f64) {
    let placed = t.window_loss.sent.saturating_sub(t.not_offered);
    (
        placed as f64 / t.duration_s.max(f64::MIN_POSITIVE) / 1e6,
        t.window_loss.lost.saturating_sub(t.not_offered) as f64 * 100.0 / placed.max(1) as f64,
    )
}

pub(crate) fn ovs_missing() -> Option<String> {
    (!sfclab_topology::ovs::installed())
        .then(|| "Open vSwitch not installed (Debian: apt-get install openvswitch-switch)".to_string())
}

/// Runs the rounds: in each, every length, and at each length every technology in turn.
impl crate::RoundRow for ChainingCell {
    fn name(&self) -> &str {
        &self.label
    }

    fn skipped(&self) -> bool {
        self.skipped.is_some()
    }

    fn keep_completed(&mut self, rounds: &crate::Rounds) {
        rounds.keep_completed(&mut self.runs_mpps);
        rounds.keep_completed(&mut self.runs_offered_mpps);
        rounds.keep_completed(&mut self.runs_loss_pct);
        rounds.keep_completed(&mut self.runs_dut_core_cycles);
    }
}

pub fn run(args: &ChainingBenchArgs, progress: &mut Progress, stop: &Stop) -> Result<ChainingBench, String> {
    let cores = sfclab_runtime::placement::allowed_cores();
    let (tester_core, dut_core) = match cores.as_slice() {
        [a, b, ..] => (*a, *b),
        _ => return Err("bench chaining needs two cores this process may use".into()),
    };
    if let Some(bad) = args.technologies.iter().find(|t| !TECHNOLOGIES.contains(&t.as_str())) {
        return Err(format!("`{bad}` is not a technology here: {}", TECHNOLOGIES.join(", ")));
    }
    if args.lengths.is_empty() || args.lengths.contains(&0) {
        return Err("chain lengths: at least one, each at least 1".into());
    }
    let mut cells = Vec::new();
    for &n in &args.lengths {
        for t in TECHNOLOGIES
            .iter()
            .filter(|t| args.technologies.iter().any(|a| a == *t))
        {
            cells.push(ChainingCell {
                label: format!("{t} n={n}"),
                technology: t.to_string(),
                tester_link: if *t == "memif" { "memif" } else { "veth (AF_XDP)" }.to_string(),
                hops: n,
                device: String::new(),
                runs_mpps: Vec::new(),
                mpps: None,
                runs_offered_mpps: Vec::new(),
                runs_loss_pct: Vec::new(),
                runs_dut_core_cycles: Vec::new(),
                dut_core_cycles: None,
                drops: BTreeMap::new(),
                skipped: if *t == "ovs" { ovs_missing() } else { None },
            });
        }
    }
    // Interleaved whole rounds: a round Ctrl-C cut is dropped from every cell.
    let rounds = crate::row_rounds(args.repeat, &mut cells, (stop, progress), |c| {
        match round(
            &c.technology,
            c.hops,
            args.size,
            Rate::Max,
            (args.duration, args.warmup),
            (tester_core, dut_core),
            stop,
        ) {
            Ok(x) => {
                c.runs_mpps.push(x.mpps);
                c.runs_offered_mpps.push(x.offered_mpps);
                c.runs_loss_pct.push(x.loss_pct);
                c.runs_dut_core_cycles.extend(x.core_cycles);
                c.device = x.device;
                c.drops = x.drops;
                Ok(())
            }
            // A peer technology that fails says so in its cell; sfclab's own failing
            // is the bench's failure.
            Err(e) if c.technology == "linux" || c.technology == "ovs" => {
                c.skipped = Some(e);
                Ok(())
            }
            Err(e) => Err(format!("{} n={}: {e}", c.technology, c.hops)),
        }
    })?;
    for c in cells.iter_mut() {
        c.mpps = median_if_any(&c.runs_mpps);
        c.dut_core_cycles = median_if_any(&c.runs_dut_core_cycles);
    }
    let median = |t: &str, n: usize| {
        cells
            .iter()
            .find(|c| c.technology == t && c.hops == n)
            .and_then(|c| c.mpps)
    };
    let mut ratios = Vec::new();
    for &n in &args.lengths {
        for (t, over) in [
            ("memif", "linux"),
            ("memif", "veth"),
            ("veth", "linux"),
            ("veth", "ovs"),
            ("nic-switch", "veth"),
            ("compound", "veth"),
        ] {
            if let (Some(x), Some(y)) = (median(t, n), median(over, n))
                && y > 0.0
            {
                ratios.push(ChainingRatio {
                    hops: n,
                    technology: t.into(),
                    over: over.into(),
                    ratio: x / y,
                });
            }
        }
    }
    Ok(ChainingBench {
        header: crate::BenchHeader::after(CHAINING_SCHEMA, &rounds),
        frame_size: args.size,
        duration_s: args.duration.as_secs_f64(),
        tester_core,
        dut_core,
        tester: format!(
            "sfclab generator and sink on core {tester_core}, AF_XDP on t-out/t-in (memif for memif chains), {}-byte UDP frames in 256 flows, as fast as it sends",
            args.size
        ),
        lengths: args.lengths.clone(),
        cells,
        ratios,
    })
}

benchmark!(ChainingBench, render_table, render_csv);

fn render_table(b: &ChainingBench) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}, chains of n forwarders, {}-byte frames, {} rounds of {:.1} s, cells interleaved (medians [min–max])\ntester: {}; the chain on core {}\n",
        b.header.title("chaining"),
        b.frame_size,
        b.header.repeat,
        b.duration_s,
        b.tester,
        b.dut_core,
    );
    let mut table = comfy_table::Table::new();
    table.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    table.set_header([
        "n",
        "technology",
        "Mpps through",
        "Mpps offered",
        "loss %",
        "DUT core cycles/frame",
        "where the lost frames went (last round)",
    ]);
    for c in &b.cells {
        let through = match &c.skipped {
            Some(why) if c.runs_mpps.is_empty() => format!("skipped: {why}"),
            _ => crate::or_dash(&c.runs_mpps, 3),
        };
        let drops: Vec<String> = c.drops.iter().map(|(k, v)| format!("{k} {}", crate::num(*v))).collect();
        table.add_row([
            c.hops.to_string(),
            c.technology.clone(),
            through,
            crate::or_dash(&c.runs_offered_mpps, 3),
            crate::or_dash(&c.runs_loss_pct, 1),
            crate::or_dash(&c.runs_dut_core_cycles, 0),
            if drops.is_empty() { "-".into() } else { drops.join(", ") },
        ]);
    }
    let _ = writeln!(s, "{table}");
    for c in b
        .cells
        .iter()
        .filter(|c| c.hops == b.lengths[0] && !c.device.is_empty())
    {
        let _ = writeln!(s, "{}: {}", c.technology, c.device);
    }
    let _ = writeln!(
        s,
        "DUT core cycles/frame: all the DUT core's non-idle time (/proc/stat) per frame the tester got back, whole run; busy-polling hops count their empty polls too."
    );
    for r in &b.ratios {
        let _ = writeln!(
            s,
            "ratio  n={}: {} / {} = {:.2}x",
            r.hops, r.technology, r.over, r.ratio
        );
    }
    s
}

/// One CSV row per technology and chain length.
fn render_csv(b: &ChainingBench) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "technology",
        "hops",
        "mpps",
        "offered_mpps",
        "loss_pct",
        "dut_core_cycles_per_frame",
        "runs",
        "skipped",
    ])
    .expect("in-memory CSV");
    let median = |v: &[f64]| crate::median_if_any(v).map_or(String::new(), |m| format!("{m:.4}"));
    for c in &b.cells {
        let runs: Vec<String> = c.runs_mpps.iter().map(|m| format!("{m:.4}")).collect();
        w.write_record([
            c.technology.clone(),
            c.hops.to_string(),
            c.mpps.map_or(String::new(), |m| format!("{m:.4}")),
            median(&c.runs_offered_mpps),
            median(&c.runs_loss_pct),
            c.dut_core_cycles.map_or(String::new(), |m| format!("{m:.0}")),
            runs.join(" "),
            c.skipped.clone().unwrap_or_default(),
        ])
        .expect("in-memory CSV");
    }
    String::from_utf8(w.into_inner().expect("in-memory CSV")).expect("UTF-8")
}

/// `sfclab bench chaining`'s flags.
#[derive(clap::Args)]
pub struct ChainingFlags {
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Window of each round.
    #[arg(long, default_value = "2s")]
    duration: String,
    #[arg(long, default_value = "500ms")]
    warmup: String,
    /// Frame size with FCS (at least 64: the tester signs each frame).
    #[arg(long, default_value_t = 64)]
    size: u16,
    /// Chain lengths (forwarders, one per hop).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,5,10")]
    lengths: Vec<usize>,
    /// Technologies: compound (the whole chain in one namespace), veth, nic-switch,
    /// linux, ovs, memif (hop processes joined by shared memory) (default: all; ovs says
    /// skipped where Open vSwitch is not installed).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "compound,veth,nic-switch,linux,ovs,memif"
    )]
    technologies: Vec<String>,
}

pub static BENCH: crate::registry::Entry<ChainingFlags, ChainingBench> = crate::registry::Entry {
    name: "chaining",
    schema: CHAINING_SCHEMA,
    about: "Chains of n forwarders over every chaining technology sfclab builds (compound, veth, nic-switch, Linux forwarding, Open vSwitch, memif), the same sfclab tester for all, interleaved rounds (needs root)",
    run: |f, stop, progress| {
        let (duration, warmup) = crate::registry::repeated_window(f.repeat, &f.duration, &f.warmup)?;
        let args = ChainingBenchArgs {
            duration,
            warmup,
            repeat: f.repeat,
            size: f.size,
            lengths: f.lengths,
            technologies: f.technologies,
        };
        Ok(run(&args, progress, stop)?)
    },
    figure: Some(figure),
};

/// Throughput against chain length, a line per technology (seed 002 Fig. 3, seed 000
/// Fig. 3, seed 004 Fig. 3 as this host measures them).
fn figure(b: &ChainingBench) -> crate::registry::Figure {
    let measured = |t: &str| b.cells.iter().any(|c| c.technology == t && c.mpps.is_some());
    crate::registry::Figure::Lines {
        title: format!(
            "Chains under overload, {}-byte frames (sfclab bench chaining)",
            b.frame_size
        ),
        x_label: "forwarders in the chain (n)".into(),
        y_label: "Mpps through the chain".into(),
        x: b.lengths.iter().map(usize::to_string).collect(),
        series: TECHNOLOGIES
            .iter()
            .filter(|t| measured(t))
            .map(|t| {
                let at = |n: usize| {
                    b.cells
                        .iter()
                        .find(|c| c.hops == n && c.technology == *t)
                        .and_then(|c| c.mpps)
                };
                (t.to_string(), b.lengths.iter().map(|&n| at(n)).collect())
            })
            .collect(),
    }
}
