//! `sfclab bench pipeline`: sfclab pipelines against DPDK testpmd processes joined by
//! `net_memif` (shared-memory packet interfaces), in the same run.
//!
//! 1. Two stages on two cores: `forwarder*2` placed `bi:2` against two testpmd
//!    processes, one forwarding lcore each, joined by one memif link; a first burst goes
//!    round them (`--tx-first`) and each forwards what the other sends (mac mode rewrites
//!    the MACs as sfclab's forwarder does; io mode is the no-touch ceiling).
//! 2. Three stages on two cores: `forwarder*3` placed `pbp:2` (stages 1 and 3 share
//!    core 0, stage 2 on core 1) against three testpmd processes in a line, whose two
//!    end processes busy-poll on the same core and are time-sliced by the kernel.
//!    sfclab's stages on one core take turns in one thread instead.
//!
//! sfclab's figure is packets through the whole chain per second with its generator
//! and sink on the same cores; testpmd's is the Rx-pps of the chain's last process.

use crate::{Progress, Stop};
use serde::Serialize;
use sfclab_experiment::Settings;
use sfclab_experiment::settings::Runtime;
use sfclab_runtime::{LinkMode, Placement, RunReport};
use std::time::Duration;

use crate::median;
use sfclab_peers::testpmd::{Testpmd, TestpmdSpec, stop_all, wait_until};
use sfclab_peers::which;
use std::fmt::Write as _;

pub const PIPELINE_SCHEMA: &str = "sfclab.bench.pipeline/2";

#[derive(Debug, Clone)]
pub struct PipelineBenchArgs {
    pub duration: Duration,
    pub warmup: Duration,
    pub repeat: usize,
    /// Measure the testpmd peers too.
    pub peer: bool,
}

/// One configuration measured `repeat` times.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct Row {
    /// `two-stages` or `three-stages`.
    pub case: &'static str,
    pub system: &'static str,
    pub setup: String,
    /// Command (testpmd: the first process's; the others differ in lcores and devices).
    pub command: String,
    pub mpps: f64,
    pub mpps_runs: Vec<f64>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PipelineBench {
    #[serde(flatten)]
    pub header: crate::BenchHeader,
    pub duration_s: f64,
    pub rows: Vec<Row>,
    pub peer_skipped: Option<String>,
    /// sfclab `forwarder*2` bi:2 over two testpmd in mac mode: the median of the
    /// repetitions' ratios (each pair measured back to back, so a noisy spell of the
    /// machine hits both sides of a ratio alike).
    pub two_stages_vs_testpmd_mac: Option<f64>,
    /// The same, the ratio of the two medians.
    pub two_stages_vs_testpmd_mac_of_medians: Option<f64>,
    /// sfclab `forwarder*3` pbp:2 (backpressure) over three testpmd in mac mode on two
    /// cores, median of the repetitions' ratios.
    pub three_stages_vs_testpmd_mac: Option<f64>,
    /// sfclab three stages on two cores over two stages on two cores: how much sharing a
    /// core costs (no collapse: near 2/3 or better).
    pub three_over_two_stages: f64,
}

struct Config {
    case: &'static str,
    system: &'static str,
    setup: &'static str,
    kind: Kind,
}

enum Kind {
    Sfclab {
        hops: usize,
        placement: Placement,
        links: LinkMode,
    },
    Testpmd {
        processes: usize,
        mode: &'static str,
    },
}

fn configs() -> Vec<Config> {
    vec![
        Config {
            case: "two-stages",
            system: "sfclab",
            setup: "forwarder*2, bi:2, backpressure links",
            kind: Kind::Sfclab {
                hops: 2,
                placement: Placement::Bi(2),
                links: LinkMode::Backpressure,
            },
        },
        Config {
            case: "two-stages",
            system: "dpdk-testpmd",
            setup: "2 processes joined by memif, mac mode",
            kind: Kind::Testpmd {
                processes: 2,
                mode: "mac",
            },
        },
        Config {
            case: "two-stages",
            system: "dpdk-testpmd",
            setup: "2 processes joined by memif, io mode",
            kind: Kind::Testpmd {
                processes: 2,
                mode: "io",
            },
        },
        Config {
            case: "three-stages",
            system: "sfclab",
            setup: "forwarder*3, pbp:2 (stages 1, 3 share core 0), backpressure links",
            kind: Kind::Sfclab {
                hops: 3,
                placement: Placement::Pbp(2),
                links: LinkMode::Backpressure,
            },
        },
        Config {
            case: "three-stages",
            system: "sfclab",
            setup: "forwarder*3, pbp:2 (stages 1, 3 share core 0), drop links, unpaced",
            kind: Kind::Sfclab {
                hops: 3,
                placement: Placement::Pbp(2),
                links: LinkMode::Drop,
            },
        },
        Config {
            case: "three-stages",
            system: "dpdk-testpmd",
            setup: "3 processes in a line joined by memif, ends share core 0, mac mode",
            kind: Kind::Testpmd {
                processes: 3,
                mode: "mac",
            },
        },
    ]
}

pub fn run(args: &PipelineBenchArgs, progress: &mut Progress, stop: &Stop) -> Result<PipelineBench, String> {
    let cores = sfclab_runtime::placement::allowed_cores();
    if cores.len() < 2 {
        return Err(format!("needs two cores; this process has {}", cores.len()));
    }
    let testpmd = which("dpdk-testpmd");
    let mut peer_skipped = match (&testpmd, args.peer) {
        (_, false) => Some("not requested (--peer none)".to_string()),
        (None, true) => Some("dpdk-testpmd not found (Debian package `dpdk`)".to_string()),
        _ => None,
    };
    let configs = configs();
    progress.plan(args.repeat * configs.len());
    let mut runs: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    let mut commands = vec![String::new(); configs.len()];
    // Interleaved repetitions: a noisy machine's drifts hit every configuration alike.
    let (mut interrupted, mut repeat_done) = (false, 0);
    for _ in crate::repetitions(args.repeat, stop, &mut interrupted) {
        repeat_done += 1;
        for (i, c) in configs.iter().enumerate() {
            match (&c.kind, &testpmd) {
                (
                    &Kind::Sfclab {
                        hops,
                        ref placement,
                        links,
                    },
                    _,
                ) => {
                    let (mpps, command) = sfclab_chain(hops, placement, links, args, &cores, stop)?;
                    runs[i].push(mpps);
                    commands[i] = command;
                }
                (&Kind::Testpmd { processes, mode }, Some(bin)) if peer_skipped.is_none() => {
                    match testpmd_line(bin, processes, mode, args.duration, [cores[0], cores[1]], stop) {
                        Ok((mpps, command)) => {
                            runs[i].push(mpps);
                            commands[i] = command;
                        }
                        // Ctrl-C while testpmd started: not the peer's failure.
                        Err(_) if stop.requested() => {}
                        Err(e) => peer_skipped = Some(e),
                    }
                }
                _ => {}
            }
            progress.finished(&format!("{} {}", c.system, c.setup));
        }
    }
    let rows: Vec<Row> = configs
        .iter()
        .zip(runs)
        .zip(commands)
        .filter(|((_, r), _)| !r.is_empty())
        .map(|((c, r), command)| Row {
            case: c.case,
            system: c.system,
            setup: c.setup.to_string(),
            command,
            mpps: median(&r),
            mpps_runs: r,
        })
        .collect();
    let row = |i: usize| rows.iter().find(|r| r.setup == configs[i].setup);
    let find = |i: usize| row(i).map(|r| r.mpps);
    // Per repetition: sfclab row `a` over peer row `b`, then the median.
    let paired = |a: usize, b: usize| {
        let (a, b) = (row(a)?, row(b)?);
        (a.mpps_runs.len() == b.mpps_runs.len()).then(|| {
            median(
                &a.mpps_runs
                    .iter()
                    .zip(&b.mpps_runs)
                    .map(|(x, y)| x / y)
                    .collect::<Vec<_>>(),
            )
        })
    };
    let (two, three) = (
        find(0).expect("sfclab two stages"),
        find(3).expect("sfclab three stages"),
    );
    Ok(PipelineBench {
        header: crate::BenchHeader::new(PIPELINE_SCHEMA, repeat_done, interrupted),
        duration_s: args.duration.as_secs_f64(),
        two_stages_vs_testpmd_mac: paired(0, 1),
        two_stages_vs_testpmd_mac_of_medians: find(1).map(|peer| two / peer),
        three_stages_vs_testpmd_mac: paired(3, 5),
        three_over_two_stages: three / two,
        rows,
        peer_skipped,
    })
}

/// Forwarders at full offered load; returns Mpps through the chain and the command.
fn sfclab_chain(
    hops: usize,
    placement: &Placement,
    links: LinkMode,
    args: &PipelineBenchArgs,
    cores: &[usize],
    stop: &Stop,
) -> Result<(f64, String), String> {
    let r = forwarder_pipeline(hops, placement, links, args.duration, args.warmup, &cores[..2], stop)?;
    let backpressure = links == LinkMode::Backpressure;
    let command = format!(
        "sfclab run --chain 'forwarder*{hops}' --placement {placement} --links {} {}--latency-probe-pps 0 --no-accounting --duration {}",
        if backpressure { "backpressure" } else { "drop" },
        if backpressure { "--flow-control " } else { "" },
        humantime::format_duration(args.duration)
    );
    Ok((r.mpps, command))
}

/// `forwarder*hops` as a pipeline on `cores`, accounting and probes off, 1024 flows.
/// Backpressure links come with flow control (the chain's capacity: nothing dropped);
/// with drop links the generator floods the chain (the NIC drops what its queue cannot
/// take), as the papers' overload runs do.
pub fn forwarder_pipeline(
    hops: usize,
    placement: &Placement,
    links: LinkMode,
    duration: Duration,
    warmup: Duration,
    cores: &[usize],
    stop: &Stop,
) -> Result<RunReport, String> {
    let mut settings = Settings::default()
        .runtime(Runtime::Pipeline)
        .placement(placement.clone())
        .links(links)
        .flow_control(links == LinkMode::Backpressure)
        .flows(1024u32)
        .latency_probe_pps(0.0)
        .duration(duration)
        .warmup(warmup)
        .accounting(false);
    if !cores.is_empty() {
        settings = settings.cores(cores.to_vec());
    }
    crate::run_chain(&format!("forwarder*{hops}"), &settings, stop).map_err(|e| format!("{placement}: {e}"))
}

/// Runs `processes` testpmd in a line joined by memif links and returns the Rx-pps of
/// the last one, median of its last 1-second samples, with the first process's command.
///
/// Layout: odd positions (B) are memif clients with one port per neighbour and start
/// last with `--tx-first`; even positions (A, C) are servers with one port each, which
/// testpmd pairs with itself, so packets bounce back along the line. Even positions
/// forward on `cores[0]`, odd ones on `cores[1]`: with three, A and C share a core.
fn testpmd_line(
    bin: &str,
    processes: usize,
    mode: &'static str,
    duration: Duration,
    cores: [usize; 2],
    stop: &Stop,
) -> Result<(f64, String), String> {
    let id = std::process::id();
    let socket = |link: usize| format!("/tmp/sfclab-memif-{id}-{link}.sock");
    let spec = |k: usize| {
        let server = k.is_multiple_of(2);
        let (forward_core, main_core) = if server {
            (cores[0], cores[1])
        } else {
            (cores[1], cores[0])
        };
        let vdevs = if server {
            // A server for the link to its client neighbour (link k-1 on the left, k on the right).
            let link = if k == 0 { 0 } else { k - 1 };
            vec![format!("net_memif0,role=server,socket={}", socket(link))]
        } else {
            (k - 1..=k)
                .filter(|&link| link + 1 < processes)
                .enumerate()
                .map(|(port, link)| format!("net_memif{port},role=client,socket={}", socket(link)))
                .collect()
        };
        TestpmdSpec {
            netns: None,
            forward_core,
            main_core,
            vdevs,
            mode,
            tx_first: !server,
            record_core_cycles: false,
            single_file_segments: false,
        }
    };
    let start = |k: usize| Testpmd::start(bin, &spec(k), &format!("sfclab-memif-{id}-{k}"));
    let mut servers = (0..processes).step_by(2).map(start).collect::<Result<Vec<_>, _>>()?;
    // A client's first burst is lost unless its servers already forward.
    wait_until(
        &mut servers,
        Duration::from_secs(60),
        "the memif servers did not start forwarding",
        &|| stop.requested(),
        |p| p.iter().all(Option::is_some),
    )?;
    let clients = (1..processes).step_by(2).map(start).collect::<Result<Vec<_>, _>>()?;
    // In line order: A, B, C.
    let (mut servers, mut clients) = (servers.into_iter(), clients.into_iter());
    let mut procs: Vec<Testpmd> = (0..processes)
        .filter_map(|k| {
            if k.is_multiple_of(2) {
                servers.next()
            } else {
                clients.next()
            }
        })
        .collect();
    let command = procs[0].command.clone();
    // Start-up takes seconds, far more for a process whose core busy pollers share:
    // wait until every process forwards, then for `seconds` periods after two to settle.
    const SETTLE: usize = 2;
    let seconds = duration.as_secs().max(3) as usize;
    wait_until(
        &mut procs,
        Duration::from_secs(90) + duration * 3,
        &format!("not {seconds} s of forwarding reported"),
        &|| stop.requested(),
        |p| p.iter().all(|p| p.is_some_and(|n| n > SETTLE + seconds)),
    )?;
    let samples = stop_all(procs);
    // The last periods: by the wait above, after every process has settled.
    let last = samples.last().expect("a process");
    let settled: Vec<f64> = last
        .iter()
        .rev()
        .take(seconds)
        .map(|ports| ports.first().copied().unwrap_or(0.0))
        .collect();
    Ok((median(&settled) / 1e6, command))
}

benchmark!(PipelineBench, render_table, render_csv);

fn render_table(b: &PipelineBench) -> String {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::UTF8_FULL_CONDENSED)
        .set_header(vec!["case", "system", "setup", "Mpps median [min–max]", "runs"]);
    let mut wide = 0;
    for r in &b.rows {
        wide += usize::from(crate::is_wide(&r.mpps_runs));
        t.add_row(vec![
            r.case.to_string(),
            r.system.to_string(),
            r.setup.clone(),
            crate::with_range(&r.mpps_runs, 3),
            r.mpps_runs
                .iter()
                .map(|x| format!("{x:.3}"))
                .collect::<Vec<_>>()
                .join(", "),
        ]);
    }
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}, {} repetitions of {:.1} s\n\n{t}",
        b.header.title("pipeline"),
        b.header.repeat,
        b.duration_s
    );
    if let (Some(r), Some(m)) = (b.two_stages_vs_testpmd_mac, b.two_stages_vs_testpmd_mac_of_medians) {
        let _ = writeln!(
            s,
            "two stages on two cores: sfclab / testpmd+memif (mac) = {r:.2}x (median of the repetitions' ratios; ratio of medians {m:.2}x)"
        );
    }
    if let Some(r) = b.three_stages_vs_testpmd_mac {
        let _ = writeln!(
            s,
            "three stages on two cores: sfclab / three testpmd (mac) = {r:.0}x (median of the repetitions' ratios)"
        );
    }
    let _ = writeln!(
        s,
        "sfclab three stages / two stages on two cores = {:.2}",
        b.three_over_two_stages
    );
    if let Some(why) = &b.peer_skipped {
        let _ = writeln!(s, "peer skipped: {why}");
    }
    s.push_str(&crate::footer(wide, b.header.interrupted, b.header.repeat));
    s
}

/// One CSV row per configuration.
fn render_csv(b: &PipelineBench) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let _ = w.write_record(["case", "system", "setup", "mpps", "mpps_runs", "command"]);
    for r in &b.rows {
        let runs = r
            .mpps_runs
            .iter()
            .map(|x| format!("{x:.4}"))
            .collect::<Vec<_>>()
            .join(" ");
        let _ = w.write_record([r.case, r.system, &r.setup, &format!("{:.4}", r.mpps), &runs, &r.command]);
    }
    String::from_utf8(w.into_inner().expect("in-memory writer")).expect("utf-8")
}

/// `sfclab bench pipeline`'s flags.
#[derive(clap::Args)]
pub struct PipelineFlags {
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Window of each trial (testpmd: at least 3 s of 1-second samples).
    #[arg(long, default_value = "1s")]
    duration: String,
    #[arg(long, default_value = "200ms")]
    warmup: String,
    /// Peer to measure in the same run.
    #[arg(long, value_enum, default_value = "testpmd")]
    peer: crate::registry::TestpmdPeer,
}

pub static BENCH: crate::registry::Entry<PipelineFlags, PipelineBench> = crate::registry::Entry {
    name: "pipeline",
    schema: PIPELINE_SCHEMA,
    about: "Pipelines against DPDK testpmd processes joined by memif: two stages on two cores, and three stages on two cores (stages sharing a core)",
    run: |f, stop, progress| {
        let (duration, warmup) = crate::registry::repeated_window(f.repeat, &f.duration, &f.warmup)?;
        let args = PipelineBenchArgs {
            duration,
            warmup,
            repeat: f.repeat,
            peer: f.peer == crate::registry::TestpmdPeer::Testpmd,
        };
        Ok(run(&args, progress, stop)?)
    },
    figure: None,
};
