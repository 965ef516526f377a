//! `sfclab bench memif`: what memif links give, in interleaved rounds.
//!
//! - **Devices**: the same tester (sfclab's generator and sink on core 0, a memif client
//!   on each of two socket files, 64-byte frames in 256 flows, as fast as it sends)
//!   across one forwarding device on core 1, a memif server on each socket:
//!   - `sfclab forwarder`: `sfclab run --ports memif:A,memif:B --chain forwarder`, an
//!     sfclab process of its own, polling;
//!   - `testpmd io`: `dpdk-testpmd` with two `net_memif` servers, io forwarding on
//!     core 1 (the same copies as sfclab: into an mbuf on receive, out on send);
//!   - each again as zero-copy clients, the tester serving the sockets: sfclab with
//!     `role=client,zero-copy=yes` (its packet pool shared with the tester), testpmd
//!     with `net_memif`'s `zero-copy=yes` (its mbufs' memory shared,
//!     `--single-file-segments`). A frame is then used where the tester wrote it and
//!     sent as a descriptor of its buffer; the tester, a server, copies.
//!
//!   Per row the frames back per second, the tester's busy cycles per frame and each
//!   device's busy cycles per frame (sfclab's less its waits for room on the ring back
//!   to the tester, shown apart: testpmd io drops there instead), compared round by
//!   round.
//! - **Hops per core**: `chaining: memif` chains of 1, 2, 4 and 8 forwarders, every hop
//!   an sfclab process in its own namespace, all pinned to core 1, polling or in
//!   interrupt mode: the throughput as fast as the tester sends, and the latency at a
//!   light load (100 kpps with probes), the table that says which mode to use when NFs
//!   share cores.
//! - **Seed 001's multi-feature VNF**: nat44 -> firewall -> qos -> dpi as one hop (one
//!   process: `[nat44, firewall, qos, dpi]`) against the same four NFs as four hop
//!   processes joined by memif, all on core 1 in interrupt mode: what putting the
//!   features in one VNF saves (three memif crossings and three processes' scheduling).

use crate::{Progress, Stop};
use serde::Serialize;
use sfclab_experiment::chain_file::{ChainSource, Experiment};
use sfclab_experiment::settings::{ChainingSetting, PortsSetting, Settings};
use sfclab_io::memif::Wait;
use sfclab_runtime::RunReport;
use sfclab_traffic::Rate;
use std::path::Path;
use std::time::Duration;

use crate::{RowRatio, median_if_any, row_ratios};
use std::fmt::Write as _;

pub const MEMIF_SCHEMA: &str = "sfclab.bench.memif/5";

/// The device rows: sfclab's forwarder and testpmd io, each as memif servers (copying
/// into and out of the tester's memory) and as zero-copy clients (the tester serving,
/// the device's own pool shared: frames passed by reference).
const SFCLAB: &str = "sfclab forwarder";
const TESTPMD: &str = "testpmd io";
const SFCLAB_ZERO_COPY: &str = "sfclab forwarder, zero-copy client";
const TESTPMD_ZERO_COPY: &str = "testpmd io, zero-copy client";

/// The rate of the latency runs, packets per second: light enough that every
/// configuration that does not collapse forwards it all.
const LIGHT_PPS: f64 = 100_000.0;

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MemifRow {
    /// `sfclab forwarder`, `testpmd io`, `polling, 4 hops/core`, ...
    pub name: String,
    /// Forwarders sharing core 1 (hops-per-core rows).
    pub hops_per_core: Option<usize>,
    /// `polling` or `interrupt after 5 us` (hops-per-core rows).
    pub wait: Option<String>,
    /// What forwarded, as the run reports it.
    pub device: String,
    /// Frames the tester got back per second, millions, per round.
    pub runs_mpps: Vec<f64>,
    pub mpps: Option<f64>,
    /// Frames the tester placed on its memif ring per second, millions, per round.
    pub runs_offered_mpps: Vec<f64>,
    /// Frames lost across the device in the window, percent of those placed, per round.
    pub runs_loss_pct: Vec<f64>,
    /// The tester's busy TSC cycles per frame (generator, memif send and receive, sink);
    /// with a sending thread (`sender_core`), its receiving half's (memif receive, sink).
    pub runs_tester_cycles: Vec<f64>,
    /// With a sending thread: its busy TSC cycles per frame generated (generator,
    /// signing, memif send) on its own core.
    pub runs_sender_cycles: Vec<f64>,
    /// The device's busy TSC cycles per frame it forwarded, polls that found nothing
    /// not counted: sfclab's forwarder by its own busy cycles less its waits for room
    /// on the ring back (`runs_device_wait_cycles`), testpmd by its
    /// `--record-core-cycles` (TSC read around each burst that received frames; its io
    /// forwarding drops what a full ring refuses, it does not wait) over the frames the
    /// tester got back across it in the whole run; none for chains (see the hops' own
    /// reports).
    pub runs_device_cycles: Vec<f64>,
    pub device_cycles: Option<f64>,
    /// sfclab's forwarder: TSC cycles per frame it waited for the tester to free room
    /// on the ring back (yielding; its `tx_full_wait_ticks`), left out of its cost.
    pub runs_device_wait_cycles: Vec<f64>,
    /// At 100 kpps with probes: median and 99th-percentile latency, microseconds, and
    /// the loss, percent, per round (hops-per-core rows).
    pub runs_light_p50_us: Vec<f64>,
    pub runs_light_p99_us: Vec<f64>,
    pub runs_light_loss_pct: Vec<f64>,
    pub commands: Vec<String>,
    pub skipped: Option<String>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct MemifBench {
    #[serde(flatten)]
    pub header: crate::BenchHeader,
    pub frame_size: u16,
    pub duration_s: f64,
    pub tester_core: usize,
    /// The core of the tester's sending thread (generator, signing, memif send) where
    /// the tester runs on two cores; `None`: one core does it all.
    pub sender_core: Option<usize>,
    pub device_core: usize,
    pub rows: Vec<MemifRow>,
    /// Throughput: sfclab forwarder over testpmd io (servers; zero-copy clients; the
    /// zero-copy sfclab client over testpmd's servers); interrupt over polling at each
    /// hops-per-core.
    pub ratios: Vec<RowRatio>,
    /// The devices' own cost, which decides the comparison (both are limited by the
    /// tester, whose cost per frame is the same against either), for the same three
    /// pairs: sfclab forwarder's busy cycles per frame over testpmd io's (below 1:
    /// sfclab's costs less), the median of the rounds' own ratios (the two measured one
    /// after the other, so a host that changes speed between rounds moves both), or
    /// the ratio of the medians where a round lacks one of them.
    pub device_cycle_ratios: Vec<RowRatio>,
}

pub struct MemifBenchArgs {
    pub duration: Duration,
    pub warmup: Duration,
    pub repeat: usize,
    pub size: u16,
    /// Hops per core of the oversubscription rows.
    pub hops: Vec<usize>,
    /// Measure testpmd too.
    pub peer: bool,
    /// The tester on two cores (a sending thread on a third core): `None` where the
    /// machine has one to spare.
    pub tester_cores: Option<usize>,
}

fn row(name: String, hops_per_core: Option<usize>, wait: Option<Wait>) -> MemifRow {
    MemifRow {
        name,
        hops_per_core,
        wait: wait.map(|w| w.to_string()),
        device: String::new(),
        runs_mpps: Vec::new(),
        mpps: None,
        runs_offered_mpps: Vec::new(),
        runs_loss_pct: Vec::new(),
        runs_tester_cycles: Vec::new(),
        runs_sender_cycles: Vec::new(),
        runs_device_cycles: Vec::new(),
        device_cycles: None,
        runs_device_wait_cycles: Vec::new(),
        runs_light_p50_us: Vec::new(),
        runs_light_p99_us: Vec::new(),
        runs_light_loss_pct: Vec::new(),
        commands: Vec::new(),
        skipped: None,
    }
}

/// Settings of one run: the window, 64-byte frames in 256 flows at `rate`, `probes`
/// latency probes per second.
fn settings(args: &MemifBenchArgs, rate: Rate, probes: f64) -> Settings {
    Settings::default()
        .duration(args.duration)
        .warmup(args.warmup)
        .accounting(false)
        .size(sfclab_traffic::FrameSizes::Fixed { size: args.size })
        .flows(256u32)
        .rate(rate)
        .latency_probe_pps(probes)
}

/// What one tester run measured, into `r`.
fn record(r: &mut MemifRow, t: &RunReport) {
    let (placed_mpps, loss_pct) = crate::chaining::placed_and_lost(t);
    r.runs_mpps.push(t.mpps);
    r.runs_offered_mpps.push(placed_mpps);
    r.runs_loss_pct.push(loss_pct);
    r.runs_tester_cycles.extend(t.busy_cycles_per_packet);
    let sender_busy = t.places[0].counters.get(sfclab_io::tester_link::SENDING_THREAD_BUSY);
    if let Some(&ticks) = sender_busy.filter(|_| t.generated > 0) {
        r.runs_sender_cycles.push(ticks as f64 / t.generated as f64);
    }
}

/// Where the tester and the device under test run.
#[derive(Clone, Copy)]
struct Cores {
    tester: usize,
    /// The tester's sending thread, where it has one.
    sender: Option<usize>,
    device: usize,
}

/// The tester across the device on `dir`'s `a.sock` and `b.sock`: their clients where
/// the device serves them, their servers where the device is a zero-copy client.
fn test_device(
    args: &MemifBenchArgs,
    dir: &Path,
    cores: Cores,
    zero_copy: bool,
    stop: &Stop,
) -> Result<RunReport, String> {
    let role = if zero_copy { ",role=server" } else { "" };
    let mut s = settings(args, Rate::Max, 0.0)
        .core(cores.tester)
        .ports(PortsSetting::Tester {
            output: format!("memif:{}{role}", dir.join("a.sock").display()),
            input: format!("memif:{}{role}", dir.join("b.sock").display()),
        });
    if let Some(core) = cores.sender {
        s = s.sender_core(core);
    }
    crate::run_chain("forwarder", &s, stop)
}

/// Waits until `path` exists (a server listens), at most 60 s.
fn wait_for(path: &Path, what: &str, stop: &Stop) -> Result<(), String> {
    let started = std::time::Instant::now();
    while !path.exists() {
        if started.elapsed() > Duration::from_secs(60) || stop.requested() {
            return Err(format!("{what} did not listen on {}", path.display()));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// An sfclab forwarder process on memif (its servers, or with `zero_copy` zero-copy
/// clients), and the tester across it.
fn sfclab_device(
    args: &MemifBenchArgs,
    r: &mut MemifRow,
    cores: Cores,
    zero_copy: bool,
    stop: &Stop,
) -> Result<(), String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let keys = if zero_copy { ",role=client,zero-copy=yes" } else { "" };
    let ports = format!(
        "memif:{}{keys},memif:{}{keys}",
        dir.path().join("a.sock").display(),
        dir.path().join("b.sock").display()
    );
    let mut cmd = std::process::Command::new(&exe);
    cmd.args(["run", "--chain", "forwarder", "--ports", &ports])
        .args([
            "--core",
            &cores.device.to_string(),
            "--duration",
            "1d",
            "--warmup",
            "0s",
        ])
        .arg("--json");
    r.commands = vec![format!(
        "sfclab run --chain forwarder --ports {ports} --core {} ...",
        cores.device
    )];
    // A group of its own: a terminal's Ctrl-C reaches the bench, which stops it.
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("starting the sfclab device: {e}"))?;
    // A serving device listens first; a zero-copy one connects to the tester's servers.
    let listening = if zero_copy {
        Ok(())
    } else {
        wait_for(&dir.path().join("b.sock"), "the sfclab device", stop)
    };
    let tested = listening.and_then(|()| test_device(args, dir.path(), cores, zero_copy, stop));
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::Signal::SIGINT);
    }
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    let t = tested?;
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    if let Some((work, waits)) = sfclab_runtime::wired::work_and_waits(&doc) {
        r.runs_device_cycles.push(work);
        r.runs_device_wait_cycles.push(waits);
    }
    r.device = format!(
        "sfclab forwarder process on core {}, {}, polling",
        cores.device,
        if zero_copy {
            "memif zero-copy clients (its pool shared, frames passed by reference)"
        } else {
            "memif servers"
        }
    );
    record(r, &t);
    Ok(())
}

/// testpmd io forwarding between two memif servers (or with `zero_copy` two
/// `zero-copy=yes` clients), and the tester across it.
fn testpmd_device(
    args: &MemifBenchArgs,
    bin: &str,
    r: &mut MemifRow,
    cores: Cores,
    zero_copy: bool,
    stop: &Stop,
) -> Result<(), String> {
    use sfclab_peers::testpmd::{Testpmd, TestpmdSpec};
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let role = if zero_copy {
        "role=client,zero-copy=yes"
    } else {
        "role=server"
    };
    let vdev = |k: usize, name: &str| {
        format!(
            "net_memif{k},{role},id=0,socket={},socket-abstract=no",
            dir.path().join(name).display()
        )
    };
    let spec = TestpmdSpec {
        forward_core: cores.device,
        main_core: cores.tester,
        vdevs: vec![vdev(0, "a.sock"), vdev(1, "b.sock")],
        mode: "io",
        tx_first: false,
        record_core_cycles: true,
        single_file_segments: zero_copy,
        netns: None,
    };
    let p = Testpmd::start(bin, &spec, &format!("sfclab-memif-{}", std::process::id()))?;
    r.commands = vec![p.command.clone()];
    let listening = if zero_copy {
        Ok(())
    } else {
        wait_for(&dir.path().join("b.sock"), "dpdk-testpmd", stop)
    };
    let tested = listening.and_then(|()| {
        // Its forwarding starts a moment after its ports listen.
        std::thread::sleep(Duration::from_millis(500));
        test_device(args, dir.path(), cores, zero_copy, stop)
    });
    // net_memif sums its counters over a connected peer's rings only, and testpmd
    // prints its cycles only when those counters moved: peers are connected again
    // while it stops, or the tester's leaving would hide them.
    let peers = reconnect_peers(dir.path(), zero_copy);
    let stopped = p.stop_reading();
    drop(peers);
    let t = tested?;
    // Over the frames that crossed it in the whole run, as the tester got them back
    // (testpmd's own count is gone: net_memif clears it when the tester leaves).
    let crossed = t.conservation.received;
    r.runs_device_cycles.extend(
        stopped
            .busy_cycles
            .filter(|_| crossed > 0)
            .map(|c| c as f64 / crossed as f64),
    );
    r.device = format!(
        "dpdk-testpmd io forwarding on core {}, net_memif {}, --record-core-cycles",
        cores.device,
        if zero_copy {
            "zero-copy clients (--single-file-segments: its mbufs shared, passed by reference)"
        } else {
            "servers"
        }
    );
    record(r, &t);
    Ok(())
}

/// Quiet memif peers connected to testpmd's two ports: clients of its servers, or
/// servers its clients connect to again (none where a connection does not come within
/// 5 s: that run's cycles are then missing, a dash in the table).
fn reconnect_peers(dir: &Path, testpmd_is_client: bool) -> Vec<sfclab_io::memif::Interface> {
    use sfclab_io::memif::{Interface, MemifSettings, Role};
    let role = if testpmd_is_client { Role::Server } else { Role::Client };
    ["a.sock", "b.sock"]
        .iter()
        .filter_map(|name| Interface::open(&MemifSettings::new(dir.join(name), role)).ok())
        .filter(|i| i.wait_connected(Duration::from_secs(5)).is_ok())
        .collect()
}

/// `n` forwarders chained by memif on the device core, waiting as `wait`: throughput
/// as fast as the tester sends, latency at a light load.
/// Row names of the multi-feature comparison: the four NFs in one hop, and in four.
const MULTI_FEATURE_ONE_HOP: &str = "multi-feature VNF, 1 hop";
const MULTI_FEATURE_FOUR_HOPS: &str = "multi-feature NFs, 4 hops";

/// Seed 001's multi-feature VNF on `device_core` over memif in interrupt mode, its NFs
/// in one hop process (`grouped`) or one each.
fn multi_feature_on_one_core(
    args: &MemifBenchArgs,
    grouped: bool,
    r: &mut MemifRow,
    (device_core, stop): (usize, &Stop),
) -> Result<(), String> {
    let nfs: Vec<serde_json::Value> = crate::nfs::multi_feature(256)?
        .iter()
        .map(|(_, spec)| serde_json::json!({ spec.kind(): spec.settings() }))
        .collect();
    let chain = if grouped {
        serde_json::json!([nfs])
    } else {
        serde_json::json!(nfs)
    };
    // JSON is YAML: the chain file as the library reads any other.
    let source = ChainSource::Text {
        text: serde_json::json!({ "name": "multi-feature", "chain": chain }).to_string(),
        origin: "the multi-feature chain".into(),
    };
    let s = settings(args, Rate::Max, 0.0)
        .chaining(ChainingSetting::Memif)
        .memif_wait(Wait::Interrupt {
            spin: sfclab_io::memif::DEFAULT_SPIN,
        })
        .core(device_core);
    let mut exp = Experiment::load(&source, &s).map_err(|e| e.to_string())?;
    exp.stop_on(stop);
    let t = exp.run().map_err(|e| e.to_string())?.into_measured();
    r.device = format!(
        "nat44 -> firewall -> qos -> dpi in {} on core {device_core}, joined by memif, interrupt mode",
        if grouped {
            "one hop process"
        } else {
            "four hop processes"
        }
    );
    record(r, &t);
    Ok(())
}

fn chain_on_one_core(
    args: &MemifBenchArgs,
    n: usize,
    wait: Wait,
    r: &mut MemifRow,
    (device_core, stop): (usize, &Stop),
) -> Result<(), String> {
    let chain = format!("forwarder*{n}");
    let at = |rate: Rate, probes: f64| {
        settings(args, rate, probes)
            .chaining(ChainingSetting::Memif)
            .memif_wait(wait)
            .core(device_core)
    };
    let full = crate::run_chain(&chain, &at(Rate::Max, 0.0), stop)?;
    r.device = format!("{n} sfclab forwarder process(es) on core {device_core}, joined by memif, {wait}");
    record(r, &full);
    let light = crate::run_chain(&chain, &at(Rate::Pps(LIGHT_PPS), 10_000.0), stop)?;
    if let Some(l) = &light.latency {
        r.runs_light_p50_us.push(l.p50_ns / 1e3);
        r.runs_light_p99_us.push(l.p99_ns / 1e3);
    }
    let sent = light.window_loss.sent.max(1);
    r.runs_light_loss_pct
        .push(light.window_loss.lost as f64 * 100.0 / sent as f64);
    Ok(())
}

pub fn run_bench(args: &MemifBenchArgs, progress: &mut Progress, stop: &Stop) -> Result<MemifBench, String> {
    let cores = sfclab_runtime::placement::allowed_cores();
    let (tester_core, device_core) = match cores.as_slice() {
        [a, b, ..] => (*a, *b),
        _ => return Err("bench memif needs two cores this process may use".into()),
    };
    let sender_core = match (args.tester_cores, cores.get(2)) {
        (Some(1), _) | (None, None) => None,
        (Some(2) | None, Some(&c)) => Some(c),
        (Some(2), None) => return Err("a tester on two cores needs a third core for the device".into()),
        (Some(n), _) => return Err(format!("--tester-cores {n}: the tester runs on 1 or 2 cores")),
    };
    if args.hops.contains(&0) {
        return Err("hops per core: each at least 1".into());
    }
    let testpmd = sfclab_peers::which("dpdk-testpmd");
    let mut rows: Vec<MemifRow> = [SFCLAB, TESTPMD, SFCLAB_ZERO_COPY, TESTPMD_ZERO_COPY]
        .map(|name| row(name.into(), None, None))
        .into();
    let no_peer = match (&testpmd, args.peer) {
        (_, false) => Some("--peer none".to_string()),
        (None, true) => Some("dpdk-testpmd not found (Debian: apt-get install dpdk)".into()),
        _ => None,
    };
    for r in rows.iter_mut().filter(|r| r.name.starts_with("testpmd")) {
        r.skipped = no_peer.clone();
    }
    let interrupt = Wait::Interrupt {
        spin: sfclab_io::memif::DEFAULT_SPIN,
    };
    for &n in &args.hops {
        for wait in [Wait::Poll, interrupt] {
            let mode = if wait == Wait::Poll { "polling" } else { "interrupt" };
            rows.push(row(format!("{mode}, {n} hops/core"), Some(n), Some(wait)));
        }
    }
    for name in [MULTI_FEATURE_ONE_HOP, MULTI_FEATURE_FOUR_HOPS] {
        rows.push(row(name.into(), None, None));
    }
    let rounds = crate::row_rounds(args.repeat, &mut rows, (stop, progress), |r| {
        let cores = Cores {
            tester: tester_core,
            sender: sender_core,
            device: device_core,
        };
        let result = match (r.name.as_str(), r.hops_per_core) {
            (SFCLAB, _) => sfclab_device(args, r, cores, false, stop),
            (SFCLAB_ZERO_COPY, _) => sfclab_device(args, r, cores, true, stop),
            (TESTPMD | TESTPMD_ZERO_COPY, _) => {
                let zero_copy = r.name == TESTPMD_ZERO_COPY;
                testpmd_device(args, testpmd.as_deref().expect("found"), r, cores, zero_copy, stop)
            }
            (MULTI_FEATURE_ONE_HOP, _) => multi_feature_on_one_core(args, true, r, (device_core, stop)),
            (MULTI_FEATURE_FOUR_HOPS, _) => multi_feature_on_one_core(args, false, r, (device_core, stop)),
            (_, Some(n)) => {
                let wait = if r.name.starts_with("polling") {
                    Wait::Poll
                } else {
                    interrupt
                };
                chain_on_one_core(args, n, wait, r, (device_core, stop))
            }
            _ => Ok(()),
        };
        match result {
            Ok(()) => Ok(()),
            Err(_) if stop.requested() => Ok(()),
            Err(e) if r.name.starts_with("testpmd") => {
                r.skipped = Some(e);
                Ok(())
            }
            Err(e) => Err(format!("{}: {e}", r.name)),
        }
    })?;
    for r in rows.iter_mut() {
        r.mpps = median_if_any(&r.runs_mpps);
        r.device_cycles = median_if_any(&r.runs_device_cycles);
    }
    // The device pairs: each mode against its peer, and the zero-copy client against
    // testpmd io as it is usually run (servers).
    let devices = [
        (SFCLAB, TESTPMD),
        (SFCLAB_ZERO_COPY, TESTPMD_ZERO_COPY),
        (SFCLAB_ZERO_COPY, TESTPMD),
    ];
    let mut pairs: Vec<(String, String)> = devices.iter().map(|&(a, b)| (a.into(), b.into())).collect();
    for &n in &args.hops {
        pairs.push((format!("interrupt, {n} hops/core"), format!("polling, {n} hops/core")));
    }
    pairs.push((MULTI_FEATURE_ONE_HOP.into(), MULTI_FEATURE_FOUR_HOPS.into()));
    let pairs: Vec<(&str, &str)> = pairs.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let ratios = row_ratios(&pairs, |name| rows.iter().find(|r| r.name == name).and_then(|r| r.mpps));
    let named = |name: &str| rows.iter().find(|r| r.name == name).expect("a device row");
    let device_cycle_ratios = devices
        .iter()
        .filter_map(|&(a, b)| device_ratio(named(a), named(b)))
        .collect();
    Ok(MemifBench {
        header: crate::BenchHeader::new(MEMIF_SCHEMA, rounds.completed(), rounds.interrupted()),
        frame_size: args.size,
        duration_s: args.duration.as_secs_f64(),
        tester_core,
        sender_core,
        device_core,
        rows,
        ratios,
        device_cycle_ratios,
    })
}

/// `row`'s device cycles over `over`'s: round by round where both have every round,
/// else as `row_ratios` takes medians.
fn device_ratio(row: &MemifRow, over: &MemifRow) -> Option<RowRatio> {
    let (a, b) = (&row.runs_device_cycles, &over.runs_device_cycles);
    if a.is_empty() || a.len() != b.len() || b.iter().any(|&y| y <= 0.0) {
        let median_of = |name: &str| [row, over].into_iter().find(|r| r.name == name)?.device_cycles;
        return row_ratios(&[(&row.name, &over.name)], median_of).pop();
    }
    let per_round: Vec<f64> = a.iter().zip(b).map(|(x, y)| x / y).collect();
    Some(RowRatio {
        row: row.name.clone(),
        over: over.name.clone(),
        ratio: crate::median(&per_round),
    })
}

impl crate::RoundRow for MemifRow {
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
            &mut self.runs_tester_cycles,
            &mut self.runs_sender_cycles,
            &mut self.runs_device_cycles,
            &mut self.runs_device_wait_cycles,
            &mut self.runs_light_p50_us,
            &mut self.runs_light_p99_us,
            &mut self.runs_light_loss_pct,
        ] {
            rounds.keep_completed(runs);
        }
    }
}

benchmark!(MemifBench, render_table);

fn render_table(b: &MemifBench) -> String {
    let mut s = String::new();
    let tester = match b.sender_core {
        None => format!("sfclab generator and sink on core {}", b.tester_core),
        Some(c) => format!(
            "sfclab generator and memif send on core {c}, memif receive and sink on core {}",
            b.tester_core
        ),
    };
    let _ = writeln!(
        s,
        "{}, memif links, {}-byte frames, {} rounds of {:.1} s, rows interleaved (medians [min–max])\ntester: {tester}, memif clients (servers of the zero-copy clients); devices on core {}\n",
        b.header.title("memif"),
        b.frame_size,
        b.header.repeat,
        b.duration_s,
        b.device_core,
    );
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED);
    t.set_header([
        "row",
        "Mpps back",
        "Mpps placed",
        "loss %",
        "tester cycles/frame",
        "sender cycles/frame",
        "device cycles/frame",
        "device waits/frame",
        "p50 us @100kpps",
        "p99 us @100kpps",
        "loss % @100kpps",
    ]);
    for r in &b.rows {
        let through = match &r.skipped {
            Some(why) if r.runs_mpps.is_empty() => format!("skipped: {why}"),
            _ => crate::or_dash(&r.runs_mpps, 3),
        };
        t.add_row([
            r.name.clone(),
            through,
            crate::or_dash(&r.runs_offered_mpps, 3),
            crate::or_dash(&r.runs_loss_pct, 2),
            crate::or_dash(&r.runs_tester_cycles, 0),
            crate::or_dash(&r.runs_sender_cycles, 0),
            crate::or_dash(&r.runs_device_cycles, 0),
            crate::or_dash(&r.runs_device_wait_cycles, 0),
            crate::or_dash(&r.runs_light_p50_us, 1),
            crate::or_dash(&r.runs_light_p99_us, 1),
            crate::or_dash(&r.runs_light_loss_pct, 2),
        ]);
    }
    let _ = writeln!(s, "{t}");
    for r in b.rows.iter().filter(|r| !r.device.is_empty()) {
        let _ = writeln!(s, "{}: {}", r.name, r.device);
    }
    let _ = writeln!(
        s,
        "Busy cycles count work on frames, not polls that found nothing; an sfclab device's waits for room on the ring back (backpressure: testpmd io drops there) are shown apart, not in its cost. Loss: frames the tester placed on its ring and did not get back."
    );
    for r in &b.ratios {
        let _ = writeln!(s, "ratio  {} / {} = {:.2}x", r.row, r.over, r.ratio);
    }
    for r in &b.device_cycle_ratios {
        let _ = writeln!(
            s,
            "device cycles/frame  {} / {} = {:.2}x (what each device costs; the throughput above is the tester's)",
            r.row, r.over, r.ratio
        );
    }
    s
}

/// `sfclab bench memif`'s flags.
#[derive(clap::Args)]
pub struct MemifFlags {
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Window of each run.
    #[arg(long, default_value = "2s")]
    duration: String,
    #[arg(long, default_value = "500ms")]
    warmup: String,
    /// Frame size with FCS (at least 64: the tester signs each frame).
    #[arg(long, default_value_t = 64)]
    size: u16,
    /// Hops per core of the polling and interrupt rows.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    hops: Vec<usize>,
    /// `testpmd` (the default) or `none`.
    #[arg(long, value_enum, default_value = "testpmd")]
    peer: crate::registry::TestpmdPeer,
    /// The tester on 1 core or on 2 (its sending thread on a third core, the device on
    /// the second); default 2 where the machine has a third core.
    #[arg(long)]
    tester_cores: Option<usize>,
}

pub static BENCH: crate::registry::Entry<MemifFlags, MemifBench> = crate::registry::Entry {
    name: "memif",
    schema: MEMIF_SCHEMA,
    about: "memif links: one forwarder (sfclab's, and DPDK testpmd's) between two memif ports, and chains of 1-8 hop processes sharing one core, polling against interrupt mode (needs root for the chains' namespaces)",
    run: |f, stop, progress| {
        let (duration, warmup) = crate::registry::repeated_window(f.repeat, &f.duration, &f.warmup)?;
        let args = MemifBenchArgs {
            duration,
            warmup,
            repeat: f.repeat,
            size: f.size,
            hops: f.hops,
            peer: f.peer == crate::registry::TestpmdPeer::Testpmd,
            tester_cores: f.tester_cores,
        };
        Ok(run_bench(&args, progress, stop)?)
    },
    figure: None,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_are_compared_round_by_round() {
        let mut sfclab = row("sfclab forwarder".into(), None, None);
        let mut testpmd = row("testpmd io".into(), None, None);
        // The host ran at half speed in the second round: both sides' cycles doubled.
        sfclab.runs_device_cycles = vec![100.0, 200.0, 104.0];
        testpmd.runs_device_cycles = vec![150.0, 300.0, 150.0];
        sfclab.device_cycles = median_if_any(&sfclab.runs_device_cycles);
        testpmd.device_cycles = median_if_any(&testpmd.runs_device_cycles);
        let r = device_ratio(&sfclab, &testpmd).unwrap();
        assert!((r.ratio - 100.0 / 150.0).abs() < 1e-12, "{}", r.ratio);
        // A round without testpmd's figure: the medians' ratio.
        testpmd.runs_device_cycles.pop();
        testpmd.device_cycles = median_if_any(&testpmd.runs_device_cycles);
        let r = device_ratio(&sfclab, &testpmd).unwrap();
        assert!((r.ratio - 104.0 / 225.0).abs() < 1e-12, "{}", r.ratio);
    }
}
