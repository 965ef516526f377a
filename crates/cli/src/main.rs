//! The `sfclab` command line: thin on purpose. Parsing and rendering live in `config`
//! and `render`; all the work is in the library crates.

mod bench;
mod config;
mod execute;
mod render;
mod report;
mod sweep;

use clap::{Args, Parser, Subcommand, ValueEnum};
use config::{ChainSpec, Overrides};
use sfclab_runtime::RunError;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Build, run and measure service function chains on commodity Linux.
///
/// sfclab chains network functions (forwarder, synthetic, ...) on generated in-memory
/// traffic and reports throughput, cycles per packet per NF, latency and drops by place
/// and reason, checking that every packet sent is received or counted as dropped.
#[derive(Parser)]
#[command(name = "sfclab", version, about, long_about, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

const AFTER_HELP: &str = "Examples:\n  sfclab run                                   # the embedded default chain\n  sfclab run examples/chains/forwarders.yaml\n  sfclab run --chain 'forwarder*4' --size 64 --duration 5s\n  sfclab run --chain 'forwarder*16' --placement bi:2\n  sfclab run --chain 'forwarder -> synthetic(cycles=100,working_set=64KiB,accesses=4)' --json\n  sfclab search --chain 'forwarder*4' --goals ndr,pdr,0.1%\n  sfclab bench hop\n  sfclab nfs";

#[derive(Subcommand)]
enum Cmd {
    /// Run a chain on generated traffic and report (table, --json or --csv).
    ///
    /// With no FILE and no --chain, runs the embedded default chain
    /// (examples/chains/default.yaml). Command-line settings override the file's.
    /// Exit status: 0 ok, 2 bad config, 3 packets not conserved.
    Run(Box<RunArgs>),
    /// Search the highest rate that meets each loss goal (NDR, PDR), RFC 2544 style.
    ///
    /// Runs trials of the chain at paced rates: an MLRsearch-style search by default
    /// (several goals at once, short trials first), or plain RFC 2544 binary search.
    /// A trial whose generator did not reach the offered rate never counts as a pass.
    Search(Box<SearchArgs>),
    /// Run a chain over a list of values of one parameter: a table, and a result set
    /// (JSON, CSV, SVG plots, one self-contained HTML report) in `--out`.
    ///
    /// `--param` is a setting (size, rate, flows, batch, placement, replicas, links, ip),
    /// or any name when `--chain` holds `{}` where each value goes
    /// (`--chain 'forwarder*{}' --param hops --values 1,2,4,8`).
    Sweep(Box<SweepArgs>),
    /// Re-render the plots and HTML report of a sweep result set (sweep.json).
    Report(ReportArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCmd),
    /// List the NF types and their settings.
    Nfs,
    /// Print the JSON Schema of a result document (`run`: what `sfclab run --json` prints).
    Schema {
        #[arg(value_parser = ["run"], default_value = "run")]
        document: String,
    },
}

#[derive(Args, Clone)]
struct RunArgs {
    /// Chain file (YAML).
    file: Option<String>,
    /// Chain shorthand instead of a file: `forwarder*4`, `forwarder -> synthetic(cycles=100) -> noop`.
    #[arg(long, conflicts_with = "file")]
    chain: Option<String>,
    /// Frame size with FCS: 64..1518, `imix` (64/594/1518 at 7:4:1), `rfc2544`, or `64:7,594:4,1518:1`.
    #[arg(long)]
    size: Option<String>,
    /// Number of flows (distinct 5-tuples).
    #[arg(long)]
    flows: Option<u32>,
    /// IP version of the generated traffic.
    #[arg(long, value_enum)]
    ip: Option<IpArg>,
    /// Offered rate: `max`, `10Mpps`, `500kpps`, `10Gbit/s` (L1, counts preamble and gap).
    #[arg(long)]
    rate: Option<String>,
    /// Latency probes per second (0 turns latency measurement off).
    #[arg(long)]
    latency_probe_pps: Option<f64>,
    /// Measured window, e.g. `5s`, `500ms`.
    #[arg(long)]
    duration: Option<String>,
    /// Warm-up before the window (counted for conservation, not reported).
    #[arg(long)]
    warmup: Option<String>,
    /// Packets to generate in the window (instead of a duration).
    #[arg(long)]
    count: Option<u64>,
    /// Packets per batch (1..=256).
    #[arg(long)]
    batch: Option<usize>,
    /// Core to pin the chain to (default: the last core).
    #[arg(long)]
    core: Option<usize>,
    /// Turn per-NF cycle accounting off (the fastest path; per-NF cycles are not reported).
    #[arg(long)]
    no_accounting: bool,
    /// Verify every frame's IPv4/UDP checksums at the sink.
    #[arg(long)]
    verify: bool,
    /// Packet buffers in the pool.
    #[arg(long)]
    pool_size: Option<usize>,
    /// `compound` (one core, the default) or `pipeline` (stages on cores joined by rings).
    #[arg(long, help_heading = "Pipeline")]
    runtime: Option<String>,
    /// Where NFs run: `s_core`, `bi:K` (K contiguous blocks), `pbp:K` (a new core after
    /// every NF, round robin) or one core per NF (`0,0,1,1`). Implies `--runtime pipeline`.
    #[arg(long, help_heading = "Pipeline")]
    placement: Option<String>,
    /// Cores the placement may use, in order (default: all).
    #[arg(long, value_delimiter = ',', help_heading = "Pipeline")]
    cores: Option<Vec<usize>>,
    /// Core of the generator (default: the first stage's).
    #[arg(long, help_heading = "Pipeline")]
    generator_core: Option<usize>,
    /// What a full link between stages does: `drop` (counted, the default) or `backpressure`.
    #[arg(long, help_heading = "Pipeline")]
    links: Option<String>,
    /// Packets a link between stages holds.
    #[arg(long, help_heading = "Pipeline")]
    ring_size: Option<usize>,
    /// Packets the chain's ingress queue (the NIC's RX ring) holds.
    #[arg(long, help_heading = "Pipeline")]
    rx_queue: Option<usize>,
    /// Batches a stage may process per turn on its core (1: equal turns).
    #[arg(long, help_heading = "Pipeline")]
    stage_budget: Option<usize>,
    /// The generator waits while the rx-queue is full (Ethernet flow control): no ingress drops.
    #[arg(long, help_heading = "Pipeline")]
    flow_control: bool,
    /// Parallel chains: this many copies of the chain, each placed like one chain on the
    /// cores rotated by its index, flows spread over them by hash (as RSS does).
    #[arg(long, help_heading = "Pipeline")]
    replicas: Option<usize>,
    /// Print the report as JSON (schema `sfclab.run/2`).
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print the report as one CSV row with a header.
    #[arg(long)]
    csv: bool,
}

#[derive(Args)]
struct SearchArgs {
    /// The chain and its traffic, as for `run` (`--duration` is the final trial's).
    #[command(flatten)]
    run: RunArgs,
    /// Loss goals: `ndr` (0%), `pdr` (0.001%), or percentages like `0.1%`; comma separated.
    #[arg(long, value_delimiter = ',', default_value = "ndr,pdr", help_heading = "Search")]
    goals: Vec<String>,
    /// `mlr` (MLRsearch-style) or `binary` (RFC 2544).
    #[arg(long, default_value = "mlr", help_heading = "Search")]
    method: String,
    /// Relative resolution at which a search ends, e.g. `0.5%`.
    #[arg(long, default_value = "0.5%", help_heading = "Search")]
    resolution: String,
    /// MLR: duration of the first, shortest trials.
    #[arg(long, default_value = "125ms", help_heading = "Search")]
    initial_duration: String,
    /// MLR: share of a load's trial time allowed to exceed the loss goal.
    #[arg(long, default_value_t = 0.0, help_heading = "Search")]
    exceed_ratio: f64,
    /// Lowest rate searched.
    #[arg(long, default_value = "10kpps", help_heading = "Search")]
    min_rate: String,
    /// Highest rate searched (default: what the generator alone reaches, measured first).
    #[arg(long, help_heading = "Search")]
    max_rate: Option<String>,
    #[arg(long, default_value_t = 200, help_heading = "Search")]
    max_trials: usize,
    /// Whole searches to run; each goal reports the median search's result, and all of
    /// them are listed (seed 001 averages repeated measurements).
    #[arg(long, default_value_t = 1, help_heading = "Search")]
    repeat: usize,
    /// After the search: latency at these percentages of the last goal's throughput
    /// (0 means the minimum rate), with a probe stream, plus an empty chain at the lowest
    /// level to calibrate the generator's own latency. `none` skips it.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "0,10,50,90,100",
        help_heading = "Search"
    )]
    latency_at: Vec<String>,
}

#[derive(Args)]
struct SweepArgs {
    #[command(flatten)]
    run: RunArgs,
    /// What to vary.
    #[arg(long, help_heading = "Sweep")]
    param: String,
    /// The values, comma separated (IMIX and mixes: separate with `;` instead).
    #[arg(long, help_heading = "Sweep")]
    values: String,
    /// Runs per point (the median is reported, with the range).
    #[arg(long, default_value_t = 3, help_heading = "Sweep")]
    repeat: usize,
    /// Directory for sweep.json, sweep.csv, the SVG plots and report.html.
    #[arg(long, default_value = "results/sweep", help_heading = "Sweep")]
    out: String,
}

#[derive(Args)]
struct ReportArgs {
    /// A sweep result set (sweep.json).
    results: String,
    /// Directory for the plots and report.html (default: next to the results).
    #[arg(long)]
    out: Option<String>,
}

#[derive(Clone, Copy, ValueEnum, Debug)]
enum IpArg {
    V4,
    V6,
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Per-hop cost of forwarders in a compound chain, and DPDK testpmd as the peer.
    Hop(HopArgs),
    /// Maximum throughput against chain length for s_core, bi:K and pbp:K placements,
    /// and the break-even chain length n0 (seed 002, Fig. 7).
    Placement(PlacementArgs),
    /// Throughput against offered load when a chain's stages share a core, with drop
    /// links (software drops waste cycles) and backpressure links (seed 002, Section IV).
    Overload(OverloadArgs),
    /// Cost of a link between cores: the SPSC ring alone (DPDK ring_perf_autotest as the
    /// peer), a full hop with a forwarder on the far core (a bare loop as the reference),
    /// and a 2-stage forwarder pipeline against one core.
    Ring(RingArgs),
    /// Pipelines against DPDK testpmd processes joined by memif: two stages on two
    /// cores, and three stages on two cores (stages sharing a core).
    Pipeline(PipelineArgs),
}

#[derive(Args)]
struct PipelineArgs {
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Window of each trial (testpmd: at least 3 s of 1-second samples).
    #[arg(long, default_value = "1s")]
    duration: String,
    #[arg(long, default_value = "200ms")]
    warmup: String,
    /// Peer to measure in the same run.
    #[arg(long, value_enum, default_value = "testpmd")]
    peer: PeerArg,
    /// Print JSON (schema `sfclab.bench.pipeline/1`).
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print one CSV row per configuration.
    #[arg(long)]
    csv: bool,
}

#[derive(Args)]
struct RingArgs {
    #[arg(long, default_value_t = 5)]
    repeat: usize,
    /// Window of each trial.
    #[arg(long, default_value = "500ms")]
    duration: String,
    /// Packets per push and pop.
    #[arg(long, default_value_t = 32)]
    burst: usize,
    /// Print JSON (schema `sfclab.bench.ring/1`).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct OverloadArgs {
    /// Chain lengths (one stage per NF, all on one core).
    #[arg(long, value_delimiter = ',', default_value = "1,3,5")]
    hops: Vec<usize>,
    /// The NF the chain repeats, in chain shorthand.
    #[arg(long, default_value = "synthetic(cycles=60)")]
    nf: String,
    /// Offered load, as fractions of the chain's measured capacity.
    #[arg(long, value_delimiter = ',', default_value = "0.5,0.8,1.0,1.2,1.5,2.0,3.0")]
    loads: Vec<f64>,
    #[arg(long, default_value = "500ms")]
    duration: String,
    #[arg(long, default_value = "100ms")]
    warmup: String,
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Batches a stage may process per turn (above 1 lets a stage outrun the next).
    #[arg(long, default_value_t = 4)]
    stage_budget: usize,
    /// Packets a link between stages holds.
    #[arg(long, default_value_t = 64)]
    ring_size: usize,
    /// Print JSON (schema `sfclab.bench.overload/1`).
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print one CSV row per point.
    #[arg(long)]
    csv: bool,
}

#[derive(Args)]
struct PlacementArgs {
    /// Chain lengths to measure.
    #[arg(long, value_delimiter = ',', default_value = "4,8,16,24,32,48")]
    lengths: Vec<usize>,
    /// Placements to compare (s_core is the reference for the break-even).
    #[arg(long, value_delimiter = ',', default_value = "s_core,bi:2,pbp:2")]
    placements: Vec<String>,
    /// The NF the chain repeats, in chain shorthand.
    #[arg(long, default_value = "forwarder")]
    nf: String,
    #[arg(long, default_value = "1s")]
    duration: String,
    #[arg(long, default_value = "200ms")]
    warmup: String,
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    #[arg(long, default_value_t = 32)]
    batch: usize,
    #[arg(long, default_value_t = 64)]
    size: u16,
    /// Print JSON (schema `sfclab.bench.placement/1`).
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print one CSV row per point.
    #[arg(long)]
    csv: bool,
}

#[derive(Args)]
struct HopArgs {
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
    peer: PeerArg,
    /// Print JSON (schema `sfclab.bench.hop/1`).
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum, PartialEq)]
enum PeerArg {
    Testpmd,
    None,
}

/// Set by the first Ctrl-C: runs end their window early and report what they measured.
/// A second Ctrl-C exits at once.
fn stop_flag() -> Arc<AtomicBool> {
    static FLAG: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        let handler_flag = flag.clone();
        // If a handler cannot be installed, Ctrl-C simply keeps its default meaning.
        let _ = ctrlc::set_handler(move || {
            if handler_flag.swap(true, Ordering::SeqCst) {
                std::process::exit(130);
            }
            eprintln!("\nstopping: finishing the current window (Ctrl-C again to quit now)");
        });
        flag
    })
    .clone()
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Cmd::Run(args) => cmd_run(*args),
        Cmd::Search(args) => cmd_search(*args),
        Cmd::Sweep(args) => cmd_sweep(*args),
        Cmd::Report(args) => cmd_report(args),
        Cmd::Bench(BenchCmd::Hop(args)) => cmd_hop(args),
        Cmd::Bench(BenchCmd::Placement(args)) => cmd_placement(args),
        Cmd::Bench(BenchCmd::Overload(args)) => cmd_overload(args),
        Cmd::Bench(BenchCmd::Ring(args)) => cmd_ring(args),
        Cmd::Bench(BenchCmd::Pipeline(args)) => cmd_pipeline(args),
        Cmd::Schema { .. } => {
            print!("{}", render::run_schema());
            ExitCode::SUCCESS
        }
        Cmd::Nfs => {
            for (kind, doc) in sfclab_nf::NfConfig::KINDS {
                println!("{kind:<10} {doc}");
            }
            ExitCode::SUCCESS
        }
    }
}

fn cmd_sweep(a: SweepArgs) -> ExitCode {
    let fail = |e: String| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    };
    let sep = if a.values.contains(';') { ';' } else { ',' };
    let values: Vec<String> = a
        .values
        .split(sep)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect();
    if values.is_empty() || a.repeat == 0 {
        return fail("need at least one value and one repetition".into());
    }
    // Each point's chain, resolved (and so checked) before anything runs.
    let mut specs = Vec::new();
    for v in &values {
        let mut r = a.run.clone();
        match a.param.as_str() {
            "size" => r.size = Some(v.clone()),
            "rate" => r.rate = Some(v.clone()),
            "flows" => r.flows = v.parse().ok(),
            "batch" => r.batch = v.parse().ok(),
            "placement" => r.placement = Some(v.clone()),
            "replicas" => r.replicas = v.parse().ok(),
            "links" => r.links = Some(v.clone()),
            "runtime" => r.runtime = Some(v.clone()),
            other => match &r.chain {
                Some(c) if c.contains("{}") => r.chain = Some(c.replace("{}", v)),
                _ => {
                    return fail(format!(
                        "--param `{other}` is not a setting, and --chain has no `{{}}` for its values"
                    ));
                }
            },
        }
        match load_spec(&r) {
            Ok(mut spec) => {
                spec.stop_on(&stop_flag());
                specs.push((v.clone(), spec));
            }
            Err(e) => return fail(format!("{} = {v}: {e}", a.param)),
        }
    }
    let name = a
        .run
        .chain
        .clone()
        .or(a.run.file.clone())
        .unwrap_or_else(|| "default".into());
    let bar = progress_bar();
    bar.set_length((values.len() * a.repeat) as u64);
    let mut points = Vec::new();
    'points: for (v, spec) in &specs {
        let mut reports = Vec::new();
        for _ in 0..a.repeat {
            bar.set_message(format!("{} = {v}", a.param));
            match execute::run(spec) {
                Ok(r) => reports.push(r),
                Err(e) => {
                    bar.finish_and_clear();
                    eprintln!("error: {} = {v}: {e}", a.param);
                    return ExitCode::FAILURE;
                }
            }
            bar.inc(1);
            if stop_flag().load(Ordering::SeqCst) {
                // Ctrl-C: keep the points finished so far.
                if !reports.is_empty() {
                    points.push(sweep::point(v, &spec.nfs, &reports));
                }
                break 'points;
            }
        }
        points.push(sweep::point(v, &spec.nfs, &reports));
    }
    bar.finish_and_clear();
    let set = sweep::result_set(&name, &a.param, a.repeat, points);
    print!("{}", render::sweep_table(&set));
    match report::write_all(&set, std::path::Path::new(&a.out), true) {
        Ok(files) => {
            for f in files {
                println!("wrote {}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn cmd_report(a: ReportArgs) -> ExitCode {
    let text = match std::fs::read_to_string(&a.results) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {}: {e}", a.results);
            return ExitCode::from(2);
        }
    };
    let set: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("error: {}: not JSON: {e}", a.results);
            return ExitCode::from(2);
        }
    };
    if set["schema"] != "sfclab.sweep/1" {
        eprintln!("error: {}: not a sweep result set (schema sfclab.sweep/1)", a.results);
        return ExitCode::from(2);
    }
    let dir = a.out.map(std::path::PathBuf::from).unwrap_or_else(|| {
        std::path::Path::new(&a.results)
            .parent()
            .map(|p| p.to_path_buf())
            .unwrap_or_default()
    });
    let result = report::write_all(&set, &dir, false);
    match result {
        Ok(files) => {
            print!("{}", render::sweep_table(&set));
            for f in files {
                println!("wrote {}", f.display());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// One result from repeated searches: for each goal, the result of the search whose
/// throughput is the median; every search's trials are kept.
fn combine_searches(mut runs: Vec<sfclab_measure::SearchResult>) -> sfclab_measure::SearchResult {
    if runs.len() == 1 {
        return runs.pop().expect("one search");
    }
    let goals = (0..runs[0].goals.len())
        .map(|g| {
            let mut order: Vec<usize> = (0..runs.len()).collect();
            order.sort_by(|&a, &b| {
                runs[a].goals[g]
                    .lower_pps
                    .unwrap_or(0.0)
                    .total_cmp(&runs[b].goals[g].lower_pps.unwrap_or(0.0))
            });
            runs[order[order.len() / 2]].goals[g].clone()
        })
        .collect();
    let trials: Vec<_> = runs.iter().flat_map(|r| r.trials.iter().cloned()).collect();
    sfclab_measure::SearchResult {
        method: runs[0].method,
        goals,
        trial_count: trials.len(),
        total_trial_s: runs.iter().map(|r| r.total_trial_s).sum(),
        invalid_trials: runs.iter().map(|r| r.invalid_trials).sum(),
        source_ceiling_pps: runs
            .iter()
            .filter_map(|r| r.source_ceiling_pps)
            .fold(None, |m: Option<f64>, c| Some(m.map_or(c, |m| m.min(c)))),
        trials,
    }
}

/// A loss goal from the command line: `ndr`, `pdr`, or a percentage.
fn parse_goal(s: &str) -> Result<sfclab_measure::Goal, String> {
    let t = s.trim().to_ascii_lowercase();
    match t.as_str() {
        "ndr" => Ok(sfclab_measure::Goal::ndr()),
        "pdr" => Ok(sfclab_measure::Goal::pdr(1e-5)),
        _ => {
            let pct = t
                .strip_suffix('%')
                .ok_or_else(|| format!("`{s}` is not a loss goal: write ndr, pdr or a percentage like 0.1%"))?;
            let v: f64 = pct.trim().parse().map_err(|_| format!("`{s}` is not a percentage"))?;
            if !(0.0..100.0).contains(&v) {
                return Err(format!("`{s}`: a loss goal is 0% to below 100%"));
            }
            let name = if v == 0.0 {
                "NDR".to_string()
            } else {
                format!("PDR {v}%")
            };
            Ok(sfclab_measure::Goal {
                name,
                ..sfclab_measure::Goal::pdr(v / 100.0)
            })
        }
    }
}

fn parse_rate_pps(s: &str, frame: f64) -> Result<f64, String> {
    match s.parse::<sfclab_traffic::Rate>()? {
        sfclab_traffic::Rate::Pps(p) => Ok(p),
        sfclab_traffic::Rate::L1Bps(b) => Ok(b / ((frame + 20.0) * 8.0)),
        sfclab_traffic::Rate::Max => Err(format!("`{s}`: give a number here, not max")),
    }
}

fn cmd_search(a: SearchArgs) -> ExitCode {
    let fail = |e: String| {
        eprintln!("error: {e}");
        ExitCode::from(2)
    };
    let spec = match load_spec(&a.run) {
        Ok(s) => s,
        Err(e) => return fail(e.to_string()),
    };
    let goals: Result<Vec<_>, String> = a.goals.iter().map(|g| parse_goal(g)).collect();
    let mut goals = match goals {
        Ok(g) => g,
        Err(e) => return fail(format!("--goals: {e}")),
    };
    for g in &mut goals {
        g.exceed_ratio = a.exceed_ratio;
    }
    let method = match a.method.parse::<sfclab_measure::Method>() {
        Ok(m) => m,
        Err(e) => return fail(format!("--method: {e}")),
    };
    let resolution = match a.resolution.trim().strip_suffix('%').map(str::parse::<f64>) {
        Some(Ok(v)) => v / 100.0,
        _ => return fail(format!("--resolution `{}`: write a percentage like 0.5%", a.resolution)),
    };
    let initial = match humantime::parse_duration(&a.initial_duration) {
        Ok(d) => d,
        Err(e) => return fail(format!("--initial-duration: {e}")),
    };
    let final_duration = spec.settings.duration.unwrap_or(Duration::from_secs(1));
    let frame = spec.traffic.sizes.mean();
    let min_pps = match parse_rate_pps(&a.min_rate, frame) {
        Ok(p) => p,
        Err(e) => return fail(format!("--min-rate: {e}")),
    };
    let mut trial = execute::ChainTrial {
        spec: spec.clone(),
        reports: Vec::new(),
        stop: stop_flag(),
    };
    let max_pps = match &a.max_rate {
        Some(m) => match parse_rate_pps(m, frame) {
            Ok(p) => p,
            Err(e) => return fail(format!("--max-rate: {e}")),
        },
        None => {
            // What the generator reaches with the chain at max rate bounds every valid trial.
            let probe = spec.as_trial(sfclab_traffic::Rate::Max, 0.0, initial.max(Duration::from_millis(200)));
            match execute::run(&probe) {
                Ok(r) => r.generated_mpps * 1e6 * 1.05,
                Err(e) => return fail(e.to_string()),
            }
        }
    };
    let cfg = sfclab_measure::SearchConfig {
        method,
        goals,
        min_pps,
        max_pps,
        resolution,
        final_duration,
        initial_duration: initial.min(final_duration),
        preceding_targets: 2,
        max_trials: a.max_trials,
    };
    if let Err((k, r)) = cfg.validate() {
        return fail(format!("{k}: {r}"));
    }
    if a.repeat == 0 {
        return fail("--repeat must be at least 1".into());
    }
    let bar = progress_bar();
    let mut runs = Vec::new();
    for k in 0..a.repeat {
        bar.set_length(a.max_trials as u64);
        bar.set_position(0);
        let result = sfclab_measure::search(&mut trial, &cfg, &mut |t| {
            bar.inc(1);
            bar.set_message(format!(
                "search {}/{}: {:.2} Mpps for {:.2} s: loss {:.5}%{}",
                k + 1,
                a.repeat,
                t.offered_pps / 1e6,
                t.duration_s,
                t.loss_ratio * 100.0,
                if t.valid { "" } else { " (invalid)" }
            ));
        });
        match result {
            Ok(r) => runs.push(r),
            Err(e) => {
                bar.finish_and_clear();
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    bar.finish_and_clear();
    let repetitions: Vec<Vec<Option<f64>>> = runs
        .iter()
        .map(|r| r.goals.iter().map(|g| g.lower_pps).collect())
        .collect();
    let r = combine_searches(runs);
    // Latency at fractions of the last goal's throughput (CSIT measures at 0/10/50/90%
    // of PDR), probes on, and the empty chain's latency to state the generator's own.
    let levels: Result<Vec<f64>, String> = if a.latency_at.iter().any(|l| l.eq_ignore_ascii_case("none")) {
        Ok(Vec::new())
    } else {
        a.latency_at
            .iter()
            .map(|l| {
                l.trim()
                    .trim_end_matches('%')
                    .parse::<f64>()
                    .map_err(|_| format!("--latency-at: `{l}` is not a percentage"))
            })
            .collect()
    };
    let levels = match levels {
        Ok(l) => l,
        Err(e) => return fail(e),
    };
    let base = r.goals.last().and_then(|g| g.lower_pps);
    let probe_pps = if spec.traffic.probe_pps > 0.0 {
        spec.traffic.probe_pps
    } else {
        10_000.0
    };
    let mut latency = Vec::new();
    if let (Some(base), false) = (base, levels.is_empty()) {
        let lowest = levels.iter().copied().fold(f64::INFINITY, f64::min);
        let rate_at = |pct: f64| if pct <= 0.0 { min_pps } else { base * pct / 100.0 };
        let mut runs: Vec<(String, f64, f64, bool)> = levels
            .iter()
            .map(|&p| (format!("{p}%"), p, rate_at(p), false))
            .collect();
        runs.push(("calibration (no NF)".into(), lowest, rate_at(lowest), true));
        for (label, pct, rate, empty) in runs {
            match trial.latency_run(rate.max(probe_pps), final_duration, probe_pps, empty) {
                Ok(rep) => latency.push(render::LatencyLevel {
                    label,
                    percent: pct,
                    rate_pps: rate.max(probe_pps),
                    latency: rep.latency,
                    empty_chain: empty,
                }),
                Err(e) => {
                    eprintln!("latency at {label}: {e}");
                    break;
                }
            }
        }
    }
    // The chain-analysis table at each goal's rate (as NFVbench gives per hop, here per NF
    // and link): the places of the trial that established the goal's throughput.
    let chain_analysis: Vec<serde_json::Value> = r
        .goals
        .iter()
        .map(|g| {
            let at = g
                .lower_pps
                .and_then(|l| r.trials.iter().rposition(|t| t.offered_pps == l));
            serde_json::json!({
                "goal": g.goal.name,
                "rate_pps": g.lower_pps,
                "places": at.and_then(|i| trial.reports.get(i)).map(|rep| &rep.places),
            })
        })
        .collect();
    if a.run.json {
        let v = serde_json::json!({
            "schema": "sfclab.search/1",
            "version": env!("CARGO_PKG_VERSION"),
            "machine": bench::Machine::read(),
            "name": spec.name,
            "traffic": spec.traffic,
            "chain_config": spec.nfs.iter().map(|(n, c)| serde_json::json!({ "name": n, "config": c })).collect::<Vec<_>>(),
            "frame_size_mean": frame,
            "search": r,
            "repetitions": repetitions,
            "chain_analysis": chain_analysis,
            "latency": latency,
        });
        println!("{}", serde_json::to_string_pretty(&v).expect("serialisable"));
    } else {
        print!("{}", render::search_table(&spec.name, &spec.traffic, &r));
        if repetitions.len() > 1 {
            for (g, goal) in r.goals.iter().enumerate() {
                let each: Vec<String> = repetitions
                    .iter()
                    .map(|rep| rep[g].map_or("none".into(), |l| format!("{:.3}", l / 1e6)))
                    .collect();
                println!(
                    "{} over {} searches: {} Mpps (median reported)",
                    goal.goal.name,
                    repetitions.len(),
                    each.join(", ")
                );
            }
        }
        if !latency.is_empty() {
            print!(
                "{}",
                render::latency_table(r.goals.last().map_or("", |g| g.goal.name.as_str()), &latency)
            );
        }
    }
    ExitCode::SUCCESS
}

/// The chain the run arguments describe: a file, the shorthand, or the embedded default.
fn load_spec(a: &RunArgs) -> Result<ChainSpec, config::ConfigError> {
    let o = Overrides {
        size: a.size.clone(),
        flows: a.flows,
        ip: a.ip.map(|i| match i {
            IpArg::V4 => sfclab_traffic::IpVersion::V4,
            IpArg::V6 => sfclab_traffic::IpVersion::V6,
        }),
        rate: a.rate.clone(),
        latency_probe_pps: a.latency_probe_pps,
        duration: a.duration.clone(),
        warmup: a.warmup.clone(),
        count: a.count,
        batch: a.batch,
        core: a.core,
        accounting: a.no_accounting.then_some(false),
        verify: a.verify.then_some(true),
        pool_size: a.pool_size,
        runtime: a.runtime.clone(),
        placement: a.placement.clone(),
        cores: a.cores.clone(),
        generator_core: a.generator_core,
        links: a.links.clone(),
        ring_size: a.ring_size,
        rx_queue: a.rx_queue,
        stage_budget: a.stage_budget,
        flow_control: a.flow_control.then_some(true),
        replicas: a.replicas,
    };
    match (&a.file, &a.chain) {
        (Some(f), _) => config::load(f, &o),
        (None, Some(c)) => config::from_shorthand(c, &o),
        (None, None) => config::parse(config::DEFAULT_CHAIN, "examples/chains/default.yaml (embedded)", &o),
    }
}

fn cmd_run(a: RunArgs) -> ExitCode {
    let spec: ChainSpec = match load_spec(&a) {
        Ok(mut s) => {
            s.stop_on(&stop_flag());
            s
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let print = |r: &sfclab_runtime::RunReport| {
        if a.json {
            println!("{}", render::json(&spec.name, &spec.nfs, r));
        } else if a.csv {
            print!("{}", render::csv(&spec.name, r));
        } else {
            print!("{}", render::table(&spec.name, r));
        }
    };
    let result = execute::run(&spec);
    match result {
        Ok(r) => {
            print(&r);
            ExitCode::SUCCESS
        }
        Err(RunError::Conservation(r)) => {
            print(&r);
            eprintln!("error: packet conservation violated: {}", r.conservation);
            ExitCode::from(3)
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Parses a benchmark's `--duration` and `--warmup`.
fn window(duration: &str, warmup: &str) -> Result<(Duration, Duration), String> {
    let parse = |what: &str, s: &str| humantime::parse_duration(s).map_err(|e| format!("--{what} `{s}`: {e}"));
    Ok((parse("duration", duration)?, parse("warmup", warmup)?))
}

/// Runs `work` with a progress bar on stderr, told (done, total, what) after each trial.
fn with_progress<T>(work: impl FnOnce(&mut dyn FnMut(usize, usize, &str)) -> Result<T, String>) -> Result<T, String> {
    let bar = progress_bar();
    let mut tick = |done: usize, total: usize, what: &str| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        bar.set_message(what.to_string());
    };
    let result = work(&mut tick);
    bar.finish_and_clear();
    result
}

/// Renders a result as text (a table, CSV).
type Render<T> = fn(&T) -> String;

/// Prints a benchmark's result as JSON, CSV (when asked and it has a CSV form) or a table.
fn print_result<T: serde::Serialize>(
    result: Result<T, String>,
    json: bool,
    csv: Option<(bool, Render<T>)>,
    table: Render<T>,
) -> ExitCode {
    match result {
        Ok(b) if json => println!("{}", serde_json::to_string_pretty(&b).expect("serialisable")),
        Ok(b) => match csv {
            Some((true, to_csv)) => print!("{}", to_csv(&b)),
            _ => print!("{}", table(&b)),
        },
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

/// A progress bar on stderr (hidden when stderr is not a terminal).
fn progress_bar() -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} trials, ETA {eta} {msg}",
        )
        .expect("valid template"),
    );
    bar
}

fn cmd_ring(a: RingArgs) -> ExitCode {
    let duration = match humantime::parse_duration(&a.duration) {
        Ok(d) if a.repeat > 0 && (1..=256).contains(&a.burst) => d,
        Ok(_) => {
            eprintln!("error: need at least one repetition and a burst of 1..=256");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("error: --duration `{}`: {e}", a.duration);
            return ExitCode::from(2);
        }
    };
    let result = with_progress(|tick| bench::ring::run(a.repeat, duration, a.burst, tick));
    print_result(result, a.json, None, bench::ring::table)
}

fn cmd_pipeline(a: PipelineArgs) -> ExitCode {
    let (duration, warmup) = match window(&a.duration, &a.warmup) {
        Ok(w) if a.repeat > 0 && w.0 > Duration::ZERO => w,
        Ok(_) => {
            eprintln!("error: need at least one repetition and a non-zero duration");
            return ExitCode::from(2);
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let args = bench::pipeline::PipelineBenchArgs {
        duration,
        warmup,
        repeat: a.repeat,
        peer: a.peer == PeerArg::Testpmd,
    };
    let result = with_progress(|tick| bench::pipeline::run(&args, tick));
    print_result(
        result,
        a.json,
        Some((a.csv, bench::pipeline::csv)),
        bench::pipeline::table,
    )
}

fn cmd_overload(a: OverloadArgs) -> ExitCode {
    let (duration, warmup) = match window(&a.duration, &a.warmup) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if a.hops.is_empty() || a.hops.contains(&0) || a.repeat == 0 || a.loads.iter().any(|l| !(*l > 0.0 && l.is_finite()))
    {
        eprintln!("error: need chain lengths of at least 1, positive loads and at least one repetition");
        return ExitCode::from(2);
    }
    let args = bench::overload::OverloadArgs {
        hops: a.hops,
        nf: a.nf,
        loads: a.loads,
        duration,
        warmup,
        repeat: a.repeat,
        stage_budget: a.stage_budget,
        ring_size: a.ring_size,
    };
    let result = with_progress(|tick| bench::overload::run(&args, tick));
    print_result(
        result,
        a.json,
        Some((a.csv, bench::overload::csv)),
        bench::overload::table,
    )
}

fn cmd_placement(a: PlacementArgs) -> ExitCode {
    let placements: Result<Vec<sfclab_runtime::Placement>, String> = a.placements.iter().map(|p| p.parse()).collect();
    let ((duration, warmup), placements) = match (window(&a.duration, &a.warmup), placements) {
        (Ok(w), Ok(p)) => (w, p),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if a.lengths.is_empty() || a.repeat == 0 || !placements.contains(&sfclab_runtime::Placement::SCore) {
        eprintln!("error: need lengths, at least one repetition, and s_core among the placements (the reference)");
        return ExitCode::from(2);
    }
    let args = bench::placement::PlacementArgs {
        lengths: a.lengths,
        placements,
        nf: a.nf,
        duration,
        warmup,
        repeat: a.repeat,
        batch: a.batch,
        size: a.size,
    };
    let result = with_progress(|tick| bench::placement::run(&args, tick));
    print_result(
        result,
        a.json,
        Some((a.csv, bench::placement::csv)),
        bench::placement::table,
    )
}

fn cmd_hop(a: HopArgs) -> ExitCode {
    let (duration, warmup) = match window(&a.duration, &a.warmup) {
        Ok(w) => w,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if a.hops.is_empty() || a.repeat == 0 || duration == Duration::ZERO {
        eprintln!("error: need at least one hop count, one repetition and a non-zero duration");
        return ExitCode::from(2);
    }
    let args = bench::HopBenchArgs {
        hops: a.hops,
        duration,
        warmup,
        repeat: a.repeat,
        batch: a.batch,
        size: a.size,
        flows: a.flows,
        core: a.core.or_else(config::default_core),
        accounting_too: !a.no_accounting_compare,
        peer: a.peer == PeerArg::Testpmd,
    };
    let result = with_progress(|tick| bench::hop(&args, tick));
    print_result(result, a.json, None, bench::table)
}
