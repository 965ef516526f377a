//! The `sfclab` command line: thin on purpose. Parsing and rendering live in `config`
//! and `render`; all the work is in the library crates.

mod bench_plots;
mod deploy;
mod model;
mod outcome;
mod progress;
mod render;
mod report;
mod scenario;
mod scenario_report;
mod search;
mod sweep;

use clap::{Args, Parser, Subcommand, ValueEnum};
use sfclab_experiment::{ChainFileError, ChainSource, Experiment, settings};
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
#[command(name = "sfclab", version = VERSION.as_str(), about, long_about, after_help = AFTER_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

/// The version, the commit it was built from and what it was built with.
static VERSION: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "{} (commit {})\nESP's AES-GCM: {}",
        env!("CARGO_PKG_VERSION"),
        env!("SFCLAB_COMMIT"),
        sfclab_aead::in_use()
    )
});

const AFTER_HELP: &str = "Examples:\n  sfclab run                                   # the embedded default chain\n  sfclab run examples/chains/forwarders.yaml\n  sfclab run --chain 'forwarder*4' --size 64 --duration 5s\n  sfclab run --chain 'forwarder*16' --placement bi:2\n  sfclab run --chain 'forwarder -> synthetic(cycles=100,working_set=64KiB,accesses=4)' --json\n  sfclab search --chain 'forwarder*4' --goals ndr,pdr,0.1%\n  sfclab bench hop\n  sfclab nfs";

#[derive(Subcommand)]
enum Cmd {
    /// Run a chain on generated traffic and report (table, --json or --csv).
    ///
    /// With no FILE and no --chain, runs the embedded default chain
    /// (examples/chains/default.yaml). Command-line settings override the file's.
    /// Exit status: 0 ok, 1 failed, 2 bad config, 3 packets not conserved, 4 frames
    /// failed --verify, 130 stopped by Ctrl-C (results kept, marked interrupted).
    Run(Box<RunArgs>),
    /// Search the highest rate that meets each loss goal (NDR, PDR), RFC 2544 style.
    ///
    /// Runs trials of the chain at paced rates: an MLRsearch-style search by default
    /// (several goals at once, short trials first), or plain RFC 2544 binary search.
    /// A trial whose generator did not reach the offered rate never counts as a pass.
    Search(Box<search::SearchArgs>),
    /// Run a chain over a list of values of one parameter: a table, and a result set
    /// (JSON, CSV, SVG plots, one self-contained HTML report) in `--out`.
    ///
    /// `--param` is any setting, named as its flag without `--` (size, rate, flows, ip,
    /// batch, placement, replicas, links, ring_size, ...: each value is parsed as the flag
    /// is), or any name when `--chain` holds `{}` where each value goes
    /// (`--chain 'forwarder*{}' --param hops --values 1,2,4,8`).
    Sweep(Box<sweep::SweepArgs>),
    /// Many chains side by side (PVP or PVVP, a preset VNF or a chain file), every VNF
    /// an sfclab process in its own namespace joined by memif, sharing cores the OS
    /// schedules; each chain measured on its own and all together, repeated with
    /// statistics. Needs root (namespaces).
    ///
    /// Exit status as `run`: 3 when a chain does not conserve its packets.
    Scenario(Box<scenario::ScenarioArgs>),
    /// Re-render the plots and HTML report of a sweep result set (sweep.json).
    Report(sweep::ReportArgs),
    /// Benchmarks.
    #[command(subcommand)]
    Bench(BenchCmd),
    /// The resource-constraints model: calibrate it on this machine, predict a chain.
    #[command(subcommand)]
    Model(model::ModelCmd),
    /// Place chains with target rates on the fewest cores the model says meet them:
    /// compound or pipeline (stage cuts and core maps), replicas, cores shared by
    /// compound instances (oversubscription); or say which target cannot be met and why.
    Plan(model::PlanCli),
    /// Deploy a chain elsewhere: Kubernetes manifests (`deploy k8s`).
    #[command(subcommand)]
    Deploy(deploy::DeployCmd),
    /// Exit 0 when FILE exists: a hop container's readiness probe on its ready file
    /// (`--ready-file`), as `sfclab deploy k8s` writes it (the image has no shell).
    Ready { file: std::path::PathBuf },
    /// List the NF types and their settings.
    Nfs,
    /// List the built-in traffic profiles (`--profile`, or `profile:` in a chain file).
    Profiles,
    /// Remove what killed runs left: their network namespaces (`sfclab-<pid>-...`), with
    /// the veth links and XDP programs inside. Namespaces of runs still going are kept.
    Cleanup {
        /// Remove the namespaces of running sfclab processes too.
        #[arg(long)]
        all: bool,
    },
    /// Print a shell completion script: `sfclab completions bash > /etc/bash_completion.d/sfclab`.
    Completions { shell: clap_complete::Shell },
    /// Print the manual page (roff): `sfclab man > sfclab.1; man ./sfclab.1`.
    Man,
    /// Print the JSON Schema of a result document: `run` (what `sfclab run --json`
    /// prints), `search`; each is published in docs/schema/.
    Schema {
        #[arg(value_parser = SCHEMA_NAMES, default_value = "run")]
        document: String,
    },
}

#[derive(Args, Clone)]
pub struct RunArgs {
    /// Chain file (YAML).
    file: Option<String>,
    /// Chain shorthand instead of a file: `forwarder*4`, `forwarder -> synthetic(cycles=100) -> noop`.
    #[arg(long, conflicts_with = "file")]
    chain: Option<String>,
    /// Settings; each overrides the chain file's.
    #[command(flatten)]
    settings: settings::Settings,
    /// Print the result as JSON (`run`: schema `sfclab.run/4`; `search`: `sfclab.search/3`;
    /// `sweep`: `sfclab.sweep/3`; `model predict`: `sfclab.prediction/1`).
    #[arg(long, conflicts_with = "csv", help_heading = "Output")]
    json: bool,
    /// Print the report as one CSV row with a header.
    #[arg(long, help_heading = "Output")]
    csv: bool,
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Packet I/O over a veth pair between two namespaces it builds: sfclab's generator
    /// -> sink over AF_XDP and AF_PACKET against DPDK testpmd txonly -> rxonly with
    /// net_af_xdp and net_af_packet vdevs, and trafgen, on the same pair, interleaved
    /// rounds (needs root).
    Io(IoArgs),
    /// One forwarder between two veth pairs (tester - DUT - tester, namespaces it builds):
    /// sfclab AF_XDP and AF_PACKET against Linux IP forwarding and DPDK testpmd with two
    /// net_af_xdp vdevs, the same sfclab tester for all, interleaved rounds (needs root).
    Forward(ForwardArgs),
    /// Chains of n forwarders over every chaining technology sfclab builds (compound,
    /// veth, nic-switch, Linux forwarding, Open vSwitch), the same sfclab tester for all,
    /// interleaved rounds (needs root).
    Chaining(ChainingArgs),
    /// memif links: one forwarder (sfclab's, and DPDK testpmd's) between two memif
    /// ports, and chains of 1-8 hop processes sharing one core, polling against
    /// interrupt mode (needs root for the chains' namespaces).
    Memif(MemifArgs),
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
    /// IPv4 longest-prefix match (the router's DIR-24-8) against DPDK's rte_lpm
    /// (dpdk-test lpm_perf_autotest) on a table of the same size and shape, same run.
    Lpm(LpmArgs),
    /// The firewall's 5-tuple classifier (bit vectors; tuple space search beside it)
    /// against DPDK's rte_acl (dpdk-test-acl) on the same ClassBench-style rules and
    /// trace, same run; every header's match is checked against rte_acl's first.
    Acl(AclArgs),
    /// IPv6 longest-prefix match (the router's 24-8-8... table) against DPDK's rte_lpm6
    /// (dpdk-test lpm6_perf_autotest) on a table of the same shape, same run.
    Lpm6(Lpm6Args),
    /// Each NF's cost on one core at 64 B and IMIX (router, nat44, firewall, their chain)
    /// beside plain forwarding, and NAT44 at 1k/100k/1M sessions with memory per session.
    Nfs(NfsArgs),
    /// The model checked: chains x placements x frame sizes the calibration did not
    /// run, each predicted and measured in the same run; error per layout, scatter plot.
    Model(model::ModelBenchCli),
}

#[derive(Args)]
struct NfsArgs {
    #[arg(long, default_value = "1s")]
    duration: String,
    #[arg(long, default_value = "300ms")]
    warmup: String,
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Core to run on (default: the last core this process may use).
    #[arg(long)]
    core: Option<usize>,
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Flows of the workloads (NAT sessions, firewall connections).
    #[arg(long, default_value_t = 65536)]
    flows: u32,
    /// ACL rules of the firewall workloads.
    #[arg(long, default_value_t = 1000)]
    rules: usize,
    /// NAT44 session counts of the scaling points, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000,100000,1000000")]
    nat_sessions: Vec<u32>,
    /// Only these workloads, comma-separated (forwarder, router, nat44, firewall-acl,
    /// firewall, fw-nat-router, nat44@N).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Print JSON (schema `sfclab.bench.nfs/5`).
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print one CSV row per workload and frame size.
    #[arg(long)]
    csv: bool,
    /// Also write a bar chart of cycles per packet: SVG, or PNG if the name ends in .png.
    #[arg(long, value_name = "FILE")]
    plot: Option<std::path::PathBuf>,
}

#[derive(Args)]
struct Lpm6Args {
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Core to measure on (default: the last core this process may use).
    #[arg(long)]
    core: Option<usize>,
    /// Peer to measure in the same run.
    #[arg(long, value_enum, default_value = "dpdk")]
    peer: DpdkPeer,
    /// Print JSON (schema `sfclab.bench.lpm6/1`).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct AclArgs {
    /// Rule set sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000")]
    rules: Vec<usize>,
    /// Headers in the trace.
    #[arg(long, default_value_t = 65536)]
    trace: usize,
    /// Headers classified per measurement, at least (the trace repeats).
    #[arg(long, default_value_t = 4 << 20)]
    headers: usize,
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Core to measure on (default: the last core this process may use).
    #[arg(long)]
    core: Option<usize>,
    /// Seed of the rule and trace generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Peer to measure in the same run.
    #[arg(long, value_enum, default_value = "dpdk")]
    peer: DpdkPeer,
    /// Print JSON (schema `sfclab.bench.acl/1`).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct LpmArgs {
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Core to measure on (default: the last core this process may use).
    #[arg(long)]
    core: Option<usize>,
    /// Peer to measure in the same run.
    #[arg(long, value_enum, default_value = "dpdk")]
    peer: DpdkPeer,
    /// Print JSON (schema `sfclab.bench.lpm/1`).
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum, PartialEq, Eq)]
enum DpdkPeer {
    Dpdk,
    None,
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
    /// Print JSON (schema `sfclab.bench.pipeline/2`).
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
    /// Print JSON (schema `sfclab.bench.ring/2`).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct IoArgs {
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
    peer: AllOrNone,
    /// XDP mode of sfclab's receiving socket: `native` or `generic` (default: native
    /// where the driver has it).
    #[arg(long)]
    xdp_mode: Option<sfclab_io::XdpMode>,
    /// Busy polling on sfclab's receiving AF_XDP socket, microseconds (default: off).
    #[arg(long)]
    busy_poll: Option<u32>,
    /// Print JSON (schema `sfclab.bench.io/2`).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ForwardArgs {
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
    peer: PeerArg,
    /// Busy polling on the sfclab DUT's AF_XDP sockets, microseconds (default: off).
    #[arg(long)]
    busy_poll: Option<u32>,
    /// Print JSON (schema `sfclab.bench.forward/1`).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct MemifArgs {
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
    peer: PeerArg,
    /// Print JSON (schema `sfclab.bench.memif/1`).
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct ChainingArgs {
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
    /// Print JSON (schema `sfclab.bench.chaining/2`).
    #[arg(long, conflicts_with = "csv")]
    json: bool,
    /// Print one CSV row per technology and chain length.
    #[arg(long)]
    csv: bool,
    /// Also write a plot of throughput against chain length, a line per technology:
    /// SVG, or PNG if the name ends in .png.
    #[arg(long, value_name = "FILE")]
    plot: Option<std::path::PathBuf>,
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
    /// Print JSON (schema `sfclab.bench.overload/2`).
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
    /// Print JSON (schema `sfclab.bench.placement/2`).
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
    /// Print JSON (schema `sfclab.bench.hop/2`).
    #[arg(long)]
    json: bool,
}

#[derive(Clone, Copy, ValueEnum, PartialEq)]
enum AllOrNone {
    All,
    None,
}

#[derive(Clone, Copy, ValueEnum, PartialEq)]
enum PeerArg {
    Testpmd,
    None,
}

/// Set by the first Ctrl-C: runs end their window early and report what they measured.
/// A second Ctrl-C exits at once.
pub fn stop_flag() -> Arc<AtomicBool> {
    static FLAG: std::sync::OnceLock<Arc<AtomicBool>> = std::sync::OnceLock::new();
    FLAG.get_or_init(|| {
        let flag = Arc::new(AtomicBool::new(false));
        let handler_flag = flag.clone();
        // If a handler cannot be installed, Ctrl-C simply keeps its default meaning.
        let _ = ctrlc::set_handler(move || {
            if handler_flag.swap(true, Ordering::SeqCst) {
                // Quitting now: no destructor runs, so remove the namespaces and the
                // memif sockets this process listens on first.
                sfclab_topology::tear_down_everything();
                sfclab_io::memif::remove_listening_sockets();
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
    // The docs' examples are checked against the flags as they are (crates/cli/tests/docs.rs):
    // parsed, then nothing run.
    if std::env::var_os("SFCLAB_PARSE_ONLY").is_some() {
        return ExitCode::SUCCESS;
    }
    // Release builds abort on panic without unwinding: remove the namespaces this
    // process built before the default hook reports the panic.
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        sfclab_topology::tear_down_everything();
        sfclab_io::memif::remove_listening_sockets();
        report(info);
    }));
    // Ctrl-C is caught from the start in every command: work stops at the next safe
    // point and keeps what finished (a second Ctrl-C quits at once).
    sfclab_bench::stop_on(stop_flag());
    match cli.command {
        Cmd::Run(args) => cmd_run(*args),
        Cmd::Search(args) => search::cmd_search(*args),
        Cmd::Sweep(args) => sweep::cmd_sweep(*args),
        Cmd::Report(args) => sweep::cmd_report(args),
        Cmd::Scenario(args) => scenario::cmd_scenario(*args),
        Cmd::Bench(cmd) => cmd_bench(cmd),
        Cmd::Model(cmd) => model::cmd_model(cmd),
        Cmd::Plan(a) => model::cmd_plan(a),
        Cmd::Schema { document } => match schema(&document) {
            Some(s) => outcome::emit_then(&s, 0),
            None => outcome::fail(outcome::USAGE, &format!("no schema named `{document}`")),
        },
        Cmd::Completions { shell } => {
            let mut out = Vec::new();
            clap_complete::generate(shell, &mut <Cli as clap::CommandFactory>::command(), "sfclab", &mut out);
            outcome::emit_then(&String::from_utf8_lossy(&out), 0)
        }
        Cmd::Man => {
            let mut out = Vec::new();
            match clap_mangen::Man::new(<Cli as clap::CommandFactory>::command()).render(&mut out) {
                Ok(()) => outcome::emit_then(&String::from_utf8_lossy(&out), 0),
                Err(e) => outcome::fail(outcome::FAILURE, &format!("cannot render the manual: {e}")),
            }
        }
        Cmd::Deploy(cmd) => deploy::run(&cmd),
        Cmd::Ready { file } => deploy::ready(&file),
        Cmd::Nfs => outcome::emit_then(&render::nf_types(), 0),
        Cmd::Profiles => outcome::emit_then(&render::traffic_profiles(), 0),
        Cmd::Cleanup { all } => cmd_cleanup(all),
    }
}

/// `sfclab bench NAME`: the benchmark, its progress, its result in the form asked.
fn cmd_bench(cmd: BenchCmd) -> ExitCode {
    match cmd {
        BenchCmd::Hop(args) => cmd_hop(args),
        BenchCmd::Placement(args) => cmd_placement(args),
        BenchCmd::Overload(args) => cmd_overload(args),
        BenchCmd::Ring(args) => cmd_ring(args),
        BenchCmd::Pipeline(args) => cmd_pipeline(args),
        BenchCmd::Lpm(a) => cmd_lpm(a),
        BenchCmd::Acl(a) => cmd_acl(a),
        BenchCmd::Nfs(a) => cmd_nfs(a),
        BenchCmd::Model(a) => model::cmd_bench_model(a),
        BenchCmd::Io(a) => {
            let (duration, warmup) = match repeated_window(a.repeat, &a.duration, &a.warmup) {
                Ok(w) => w,
                Err(e) => return outcome::fail(outcome::USAGE, &e),
            };
            let args = sfclab_bench::io::IoBenchArgs {
                duration,
                warmup,
                repeat: a.repeat,
                size: a.size,
                peer: a.peer == AllOrNone::All,
                xdp_mode: a.xdp_mode,
                busy_poll: a.busy_poll,
            };
            let result = with_progress(|tick| sfclab_bench::io::run(&args, tick));
            print_result(result, a.json, false)
        }
        BenchCmd::Forward(a) => {
            let (duration, warmup) = match repeated_window(a.repeat, &a.duration, &a.warmup) {
                Ok(w) => w,
                Err(e) => return outcome::fail(outcome::USAGE, &e),
            };
            let args = sfclab_bench::forward::ForwardBenchArgs {
                duration,
                warmup,
                repeat: a.repeat,
                size: a.size,
                peer: a.peer == PeerArg::Testpmd,
                busy_poll: a.busy_poll,
            };
            let result = with_progress(|tick| sfclab_bench::forward::run(&args, tick));
            print_result(result, a.json, false)
        }
        BenchCmd::Memif(a) => {
            let (duration, warmup) = match repeated_window(a.repeat, &a.duration, &a.warmup) {
                Ok(w) => w,
                Err(e) => return outcome::fail(outcome::USAGE, &e),
            };
            let args = sfclab_bench::memif::MemifBenchArgs {
                duration,
                warmup,
                repeat: a.repeat,
                size: a.size,
                hops: a.hops.clone(),
                peer: a.peer == PeerArg::Testpmd,
            };
            let result = with_progress(|tick| sfclab_bench::memif::run_bench(&args, tick));
            print_result(result, a.json, false)
        }
        BenchCmd::Chaining(a) => {
            let (duration, warmup) = match repeated_window(a.repeat, &a.duration, &a.warmup) {
                Ok(w) => w,
                Err(e) => return outcome::fail(outcome::USAGE, &e),
            };
            let args = sfclab_bench::chaining::ChainingBenchArgs {
                duration,
                warmup,
                repeat: a.repeat,
                size: a.size,
                lengths: a.lengths.clone(),
                technologies: a.technologies.clone(),
            };
            let result = with_progress(|tick| sfclab_bench::chaining::run(&args, tick));
            if let Err(failed) = write_plot_of(&result, a.plot.as_deref(), bench_plots::chaining_plot) {
                return failed;
            }
            print_result(result, a.json, a.csv)
        }
        BenchCmd::Lpm6(a) => cmd_lpm6(a),
    }
}

fn cmd_lpm(a: LpmArgs) -> ExitCode {
    if a.repeat == 0 {
        return outcome::fail(outcome::USAGE, "need at least one repetition");
    }
    let args = sfclab_bench::lpm::LpmArgs {
        repeat: a.repeat,
        core: a.core,
        peer: a.peer == DpdkPeer::Dpdk,
    };
    let result = with_progress(|tick| sfclab_bench::lpm::lpm(&args, tick));
    print_result(result, a.json, false)
}

fn cmd_acl(a: AclArgs) -> ExitCode {
    if a.repeat == 0 || a.rules.is_empty() || a.trace == 0 {
        return outcome::fail(
            outcome::USAGE,
            "need at least one repetition, one rule set size and one trace header",
        );
    }
    let args = sfclab_bench::acl::AclArgs {
        rules: a.rules,
        trace: a.trace,
        repeat: a.repeat,
        core: a.core,
        peer: a.peer == DpdkPeer::Dpdk,
        seed: a.seed,
        headers: a.headers,
    };
    let result = with_progress(|tick| sfclab_bench::acl::acl(&args, tick));
    print_result(result, a.json, false)
}

fn cmd_lpm6(a: Lpm6Args) -> ExitCode {
    if a.repeat == 0 {
        return outcome::fail(outcome::USAGE, "need at least one repetition");
    }
    let args = sfclab_bench::lpm6::Lpm6Args {
        repeat: a.repeat,
        core: a.core,
        peer: a.peer == DpdkPeer::Dpdk,
    };
    let result = with_progress(|tick| sfclab_bench::lpm6::lpm6(&args, tick));
    print_result(result, a.json, false)
}

/// `sfclab cleanup`: what a killed run left, removed or restored.
fn cmd_cleanup(all: bool) -> ExitCode {
    match sfclab_topology::cleanup(all) {
        Ok(c) => {
            let mut text = String::new();
            for n in &c.removed {
                text += &format!("removed  {n}\n");
            }
            for n in &c.restored {
                text += &format!("restored what {n} changed outside its namespaces (interfaces taken, SR-IOV VFs)\n");
            }
            for n in &c.in_use {
                text += &format!("kept     {n} (its run is still going; --all removes it)\n");
            }
            for (n, why) in &c.failed {
                text += &format!("FAILED   {n}: {why}\n");
            }
            if text.is_empty() {
                text = "nothing to clean up: no sfclab namespace or change on this machine\n".into();
            }
            outcome::emit_then(&text, if c.failed.is_empty() { 0 } else { outcome::FAILURE })
        }
        // No `ip`, not root: the machine cannot clean up, whatever was asked.
        Err(e) => outcome::fail(outcome::FAILURE, &e.to_string()),
    }
}

/// The documents `sfclab schema` publishes (docs/schema/NAME-VERSION.json).
pub const SCHEMA_NAMES: [&str; 22] = [
    "run",
    "search",
    "sweep",
    "scenario",
    "bench-hop",
    "bench-placement",
    "bench-overload",
    "bench-ring",
    "bench-pipeline",
    "bench-lpm",
    "bench-acl",
    "bench-nfs",
    "bench-lpm6",
    "bench-io",
    "bench-forward",
    "bench-chaining",
    "bench-memif",
    "bench-model",
    "calibration",
    "prediction",
    "plan",
    "rc",
];

/// The JSON Schema of a published document, by name.
pub fn schema(name: &str) -> Option<String> {
    match name {
        "run" => Some(render::run_schema()),
        "search" => Some(search::schema()),
        "sweep" => Some(sweep::schema()),
        "scenario" => Some(scenario::schema()),
        "bench-hop" => Some(bench_schema::<sfclab_bench::hop::HopBench>("hop")),
        "bench-placement" => Some(bench_schema::<sfclab_bench::placement::PlacementBench>("placement")),
        "bench-overload" => Some(bench_schema::<sfclab_bench::overload::OverloadBench>("overload")),
        "bench-ring" => Some(bench_schema::<sfclab_bench::ring::RingBench>("ring")),
        "bench-pipeline" => Some(bench_schema::<sfclab_bench::pipeline::PipelineBench>("pipeline")),
        "bench-lpm" => Some(bench_schema_v::<sfclab_bench::lpm::LpmBench>("lpm", 1)),
        "bench-acl" => Some(bench_schema_v::<sfclab_bench::acl::AclBench>("acl", 1)),
        "bench-nfs" => Some(bench_schema_v::<sfclab_bench::nfs::NfsBench>("nfs", 5)),
        "bench-lpm6" => Some(bench_schema_v::<sfclab_bench::lpm6::Lpm6Bench>("lpm6", 1)),
        "bench-io" => Some(bench_schema_v::<sfclab_bench::io::IoBench>("io", 2)),
        "bench-forward" => Some(bench_schema_v::<sfclab_bench::forward::ForwardBench>("forward", 1)),
        "bench-chaining" => Some(bench_schema_v::<sfclab_bench::chaining::ChainingBench>("chaining", 2)),
        "bench-memif" => Some(bench_schema_v::<sfclab_bench::memif::MemifBench>("memif", 1)),
        "bench-model" => Some(bench_schema_v::<sfclab_bench::model::ModelBench>("model", 6)),
        "calibration" => Some(render::schema_of::<sfclab_model::Calibration>(
            "calibration-3.json",
            "`sfclab model calibrate` (the file it writes), schema sfclab.calibration/3.",
        )),
        "prediction" => Some(render::schema_of::<model::PredictionDocument>(
            "prediction-1.json",
            "`sfclab model predict --json`, schema sfclab.prediction/1.",
        )),
        "rc" => Some(render::schema_of::<model::RcDocument>(
            "rc-1.json",
            "`sfclab model rc --json`, schema sfclab.rc/1.",
        )),
        "plan" => Some(render::schema_of::<model::PlanDocument>(
            "plan-1.json",
            "`sfclab plan --json`, schema sfclab.plan/1.",
        )),
        _ => None,
    }
}

fn bench_schema<T: schemars::JsonSchema>(name: &str) -> String {
    bench_schema_v::<T>(name, 2)
}

fn bench_schema_v<T: schemars::JsonSchema>(name: &str, version: u32) -> String {
    render::schema_of::<T>(
        &format!("bench-{name}-{version}.json"),
        &format!("`sfclab bench {name} --json`, schema sfclab.bench.{name}/{version}."),
    )
}

/// Where the run arguments take the chain from: a file, the shorthand, or the embedded default.
pub fn source_of(a: &RunArgs) -> ChainSource {
    match (&a.file, &a.chain) {
        (Some(f), _) => ChainSource::File(f.into()),
        (None, Some(c)) => ChainSource::Shorthand(c.clone()),
        (None, None) => ChainSource::Default,
    }
}

/// The experiment the run arguments describe.
pub fn load_spec(a: &RunArgs) -> Result<Experiment, ChainFileError> {
    Experiment::load(&source_of(a), &a.settings)
}

fn cmd_run(a: RunArgs) -> ExitCode {
    let spec: Experiment = match load_spec(&a) {
        Ok(mut s) => {
            s.stop_on(&stop_flag());
            s
        }
        Err(e) => {
            return outcome::fail(outcome::USAGE, &e.to_string());
        }
    };
    if spec.spans_hosts {
        let file = a.file.clone().unwrap_or_else(|| "FILE".into());
        // In one process the hops have no hosts to sit on: the NFs are measured as ever.
        if !matches!(
            spec.chaining,
            sfclab_experiment::Chaining::Compound | sfclab_experiment::Chaining::Pipeline
        ) {
            return outcome::fail(
                outcome::USAGE,
                &format!(
                    "{file}: `hosts`: a chain across hosts runs as a scenario of one chain: sfclab scenario {file}"
                ),
            );
        }
        eprintln!(
            "note: {file}'s `hosts:` places its hops for `sfclab scenario {file}` and `sfclab deploy k8s`; `sfclab run` measures its NFs in one process"
        );
    }
    // With no file the embedded default's chain is there, not asked for.
    if !spec.ports.runs_chain() && ((a.file.is_some() && !spec.nfs.is_empty()) || a.chain.is_some()) {
        return outcome::fail(
            outcome::USAGE,
            &format!(
                "--ports {}: the device under test is not an sfclab chain, so none runs: give no chain (a file of `traffic:` and `run:` only) or --chain",
                spec.ports
            ),
        );
    }
    if spec.ports.builds_testbed() {
        return cmd_run_wired(&a, &spec);
    }
    if spec.ports.served_hop().is_some_and(|hop| hop.control.is_some()) {
        // A hop measured run after run by a tester elsewhere: each run's document to its
        // report file, the last (ended by SIGINT or SIGTERM) to stdout as well.
        let document = |r: &sfclab_runtime::RunReport| render::json(&spec.name, &spec.nfs, r) + "\n";
        return match sfclab_experiment::remote_hops::serve_runs(&spec, &mut { document }) {
            Ok(r) => outcome::emit_then(&document(&r), outcome::done(r.interrupted)),
            Err(e) => outcome::fail(outcome::of_run_error(&e), &e.to_string()),
        };
    }
    let render = |r: &sfclab_runtime::RunReport| {
        if a.json {
            render::json(&spec.name, &spec.nfs, r) + "\n"
        } else if a.csv {
            render::csv(&spec.name, r)
        } else {
            render::table(&spec.name, r)
        }
    };
    match spec.run() {
        Ok(r) => {
            let status = match r.verify_failed {
                Some(n) if n > 0 => {
                    eprintln!("error: {n} frames failed checksum or length verification");
                    outcome::VERIFY_FAILED
                }
                _ => outcome::done(r.interrupted),
            };
            outcome::emit_then(&render(&r), status)
        }
        Err(RunError::Conservation(r)) => {
            let _ = outcome::emit(&render(&r));
            outcome::fail(
                outcome::CONSERVATION,
                &format!("packet conservation violated: {}", r.conservation),
            )
        }
        Err(e) => outcome::fail(outcome::of_run_error(&e), &e.to_string()),
    }
}

/// `sfclab run --ports veth|linux`: the tester's report across the device under test,
/// the device's own (an sfclab chain), and the testbed's interfaces.
fn cmd_run_wired(a: &RunArgs, spec: &Experiment) -> ExitCode {
    match spec.run_wired() {
        Ok(w) => {
            let text = if a.json {
                render::json_wired(&spec.name, &spec.nfs, &w) + "\n"
            } else if a.csv {
                render::csv(&spec.name, &w.tester)
            } else {
                render::table_wired(&spec.name, &w)
            };
            let status = match w.tester.verify_failed {
                Some(n) if n > 0 => {
                    eprintln!("error: {n} frames failed checksum or length verification");
                    outcome::VERIFY_FAILED
                }
                _ => outcome::done(w.tester.interrupted),
            };
            outcome::emit_then(&text, status)
        }
        Err(RunError::Conservation(r)) => {
            let _ = outcome::emit(&render::table(&spec.name, &r));
            outcome::fail(
                outcome::CONSERVATION,
                &format!("packet conservation violated: {}", r.conservation),
            )
        }
        Err(e) => outcome::fail(outcome::of_run_error(&e), &e.to_string()),
    }
}

/// Parses a benchmark's `--duration` and `--warmup`.
fn window(duration: &str, warmup: &str) -> Result<(Duration, Duration), String> {
    let parse = |what: &str, s: &str| humantime::parse_duration(s).map_err(|e| format!("--{what} `{s}`: {e}"));
    Ok((parse("duration", duration)?, parse("warmup", warmup)?))
}

/// [`window`] for a benchmark of `repeat` rounds: at least one, each of a non-zero window.
pub(crate) fn repeated_window(repeat: usize, duration: &str, warmup: &str) -> Result<(Duration, Duration), String> {
    match window(duration, warmup)? {
        w if repeat > 0 && w.0 > Duration::ZERO => Ok(w),
        _ => Err("need at least one repetition and a non-zero duration".into()),
    }
}

/// Runs `work` with a progress bar on stderr, told (done, total, what) after each trial.
pub(crate) fn with_progress<T>(
    work: impl FnOnce(&mut dyn FnMut(usize, usize, &str)) -> Result<T, String>,
) -> Result<T, String> {
    let mut progress = progress::Progress::new("runs", 0);
    let result = work(&mut |done: usize, total: usize, what: &str| progress.at(done, total, what));
    progress.finish();
    result
}

/// Writes `--plot FILE` of a benchmark's result when asked and the bench succeeded; the
/// failure to write it is the command's.
pub(crate) fn write_plot_of<T>(
    result: &Result<T, String>,
    path: Option<&std::path::Path>,
    plot: fn(&T) -> Result<String, String>,
) -> Result<(), ExitCode> {
    if let (Ok(b), Some(path)) = (result, path)
        && let Err(e) = plot(b).and_then(|svg| report::write_plot(path, &svg))
    {
        return Err(outcome::fail(
            outcome::FAILURE,
            &format!("--plot {}: {e}", path.display()),
        ));
    }
    Ok(())
}

/// Prints a benchmark's result as JSON, CSV (when asked; a benchmark without points has
/// none, and says so) or its table; exit 130 when Ctrl-C cut it short.
pub(crate) fn print_result<T: sfclab_bench::Benchmark>(result: Result<T, String>, json: bool, csv: bool) -> ExitCode {
    let b = match result {
        Ok(b) => b,
        // Ctrl-C before anything finished: nothing to write, and the status says why.
        Err(e) if sfclab_bench::stop_requested() => return outcome::fail(outcome::INTERRUPTED, &e),
        Err(e) => return outcome::fail(outcome::FAILURE, &e),
    };
    let text = match (json, csv) {
        (true, _) => serde_json::to_string_pretty(&b).expect("serialisable") + "\n",
        (false, true) => match b.csv() {
            Some(text) => text,
            None => {
                return outcome::fail(
                    outcome::USAGE,
                    &format!("--csv: {} has no CSV form; use --json", b.header().schema),
                );
            }
        },
        (false, false) => b.table(),
    };
    outcome::emit_then(&text, outcome::done(b.header().interrupted))
}

fn cmd_nfs(a: NfsArgs) -> ExitCode {
    let (duration, warmup) = match window(&a.duration, &a.warmup) {
        Ok(w) => w,
        Err(e) => return outcome::fail(outcome::USAGE, &e),
    };
    if a.repeat == 0 || a.flows == 0 || a.flows > sfclab_traffic::flows::MAX_FLOWS {
        return outcome::fail(
            outcome::USAGE,
            &format!(
                "need at least one repetition and 1..={} flows",
                sfclab_traffic::flows::MAX_FLOWS
            ),
        );
    }
    if let Some(&n) = a
        .nat_sessions
        .iter()
        .find(|&&n| n == 0 || n > sfclab_traffic::flows::MAX_FLOWS)
    {
        return outcome::fail(
            outcome::USAGE,
            &format!(
                "--nat-sessions {n}: each must be 1..={}",
                sfclab_traffic::flows::MAX_FLOWS
            ),
        );
    }
    let args = sfclab_bench::nfs::NfsArgs {
        duration,
        warmup,
        repeat: a.repeat,
        core: a.core,
        batch: a.batch,
        flows: a.flows,
        rules: a.rules,
        nat_sessions: a.nat_sessions,
        only: a.only,
    };
    if let Err(e) = sfclab_bench::nfs::check_only(&args) {
        return outcome::fail(outcome::USAGE, &format!("--only: {e}"));
    }
    let result = with_progress(|tick| sfclab_bench::nfs::nfs(&args, tick));
    if let Err(failed) = write_plot_of(&result, a.plot.as_deref(), bench_plots::nfs_plot) {
        return failed;
    }
    print_result(result, a.json, a.csv)
}

fn cmd_ring(a: RingArgs) -> ExitCode {
    let duration = match humantime::parse_duration(&a.duration) {
        Ok(d) if a.repeat > 0 && (1..=256).contains(&a.burst) => d,
        Ok(_) => {
            return outcome::fail(outcome::USAGE, "need at least one repetition and a burst of 1..=256");
        }
        Err(e) => {
            return outcome::fail(outcome::USAGE, &format!("--duration `{}`: {e}", a.duration));
        }
    };
    let result = with_progress(|tick| sfclab_bench::ring::run(a.repeat, duration, a.burst, tick));
    print_result(result, a.json, false)
}

fn cmd_pipeline(a: PipelineArgs) -> ExitCode {
    let (duration, warmup) = match repeated_window(a.repeat, &a.duration, &a.warmup) {
        Ok(w) => w,
        Err(e) => return outcome::fail(outcome::USAGE, &e),
    };
    let args = sfclab_bench::pipeline::PipelineBenchArgs {
        duration,
        warmup,
        repeat: a.repeat,
        peer: a.peer == PeerArg::Testpmd,
    };
    let result = with_progress(|tick| sfclab_bench::pipeline::run(&args, tick));
    print_result(result, a.json, a.csv)
}

/// The one chain element `--nf` names, in shorthand (`synthetic(cycles=100)`).
fn one_nf(text: &str) -> Result<sfclab_nf::NfSpec, String> {
    let spec = Experiment::load(&ChainSource::Shorthand(text.into()), &settings::Settings::default())
        .map_err(|e| format!("--nf: {e}"))?;
    match <[_; 1]>::try_from(spec.nfs) {
        Ok([(_, cfg)]) => Ok(cfg),
        Err(_) => Err(format!("--nf `{text}`: give one NF (the benchmark repeats it)")),
    }
}

fn cmd_overload(a: OverloadArgs) -> ExitCode {
    let (duration, warmup) = match window(&a.duration, &a.warmup) {
        Ok(w) => w,
        Err(e) => {
            return outcome::fail(outcome::USAGE, &e);
        }
    };
    if a.hops.is_empty() || a.hops.contains(&0) || a.repeat == 0 || a.loads.iter().any(|l| !(*l > 0.0 && l.is_finite()))
    {
        return outcome::fail(
            outcome::USAGE,
            "need chain lengths of at least 1, positive loads and at least one repetition",
        );
    }
    let nf_config = match one_nf(&a.nf) {
        Ok(c) => c,
        Err(e) => return outcome::fail(outcome::USAGE, &e),
    };
    let args = sfclab_bench::overload::OverloadArgs {
        hops: a.hops,
        nf: a.nf,
        nf_config,
        loads: a.loads,
        duration,
        warmup,
        repeat: a.repeat,
        stage_budget: a.stage_budget,
        ring_size: a.ring_size,
    };
    let result = with_progress(|tick| sfclab_bench::overload::run(&args, tick));
    print_result(result, a.json, a.csv)
}

fn cmd_placement(a: PlacementArgs) -> ExitCode {
    let placements: Result<Vec<sfclab_runtime::Placement>, String> = a.placements.iter().map(|p| p.parse()).collect();
    let ((duration, warmup), placements) = match (window(&a.duration, &a.warmup), placements) {
        (Ok(w), Ok(p)) => (w, p),
        (Err(e), _) | (_, Err(e)) => {
            return outcome::fail(outcome::USAGE, &e);
        }
    };
    if a.lengths.is_empty() || a.repeat == 0 || !placements.contains(&sfclab_runtime::Placement::SCore) {
        return outcome::fail(
            outcome::USAGE,
            "need lengths, at least one repetition, and s_core among the placements (the reference)",
        );
    }
    let nf_config = match one_nf(&a.nf) {
        Ok(c) => c,
        Err(e) => return outcome::fail(outcome::USAGE, &e),
    };
    let args = sfclab_bench::placement::PlacementArgs {
        lengths: a.lengths,
        placements,
        nf: a.nf,
        nf_config,
        duration,
        warmup,
        repeat: a.repeat,
        batch: a.batch,
        size: a.size,
    };
    let result = with_progress(|tick| sfclab_bench::placement::run(&args, tick));
    print_result(result, a.json, a.csv)
}

fn cmd_hop(a: HopArgs) -> ExitCode {
    let (duration, warmup) = match window(&a.duration, &a.warmup) {
        Ok(w) => w,
        Err(e) => {
            return outcome::fail(outcome::USAGE, &e);
        }
    };
    if a.hops.is_empty() || a.repeat == 0 || duration == Duration::ZERO {
        return outcome::fail(
            outcome::USAGE,
            "need at least one hop count, one repetition and a non-zero duration",
        );
    }
    let args = sfclab_bench::hop::HopBenchArgs {
        hops: a.hops,
        duration,
        warmup,
        repeat: a.repeat,
        batch: a.batch,
        size: a.size,
        flows: a.flows,
        core: a.core.or_else(sfclab_runtime::placement::default_chain_core),
        accounting_too: !a.no_accounting_compare,
        peer: a.peer == PeerArg::Testpmd,
    };
    let result = with_progress(|tick| sfclab_bench::hop::hop(&args, tick));
    print_result(result, a.json, false)
}

#[cfg(test)]
mod tests {
    use super::Cli;

    /// Every benchmark's `--json` help names the schema its document carries: the two
    /// are written in different crates, and drifted once (nfs said /1 while writing /4).
    #[test]
    fn every_benchmark_s_json_help_names_its_schema() {
        use sfclab_bench::*;
        let schemas = [
            ("io", io::IO_SCHEMA),
            ("forward", forward::FORWARD_SCHEMA),
            ("chaining", chaining::CHAINING_SCHEMA),
            ("memif", memif::MEMIF_SCHEMA),
            ("hop", hop::HOP_SCHEMA),
            ("placement", placement::PLACEMENT_SCHEMA),
            ("overload", overload::OVERLOAD_SCHEMA),
            ("ring", ring::RING_SCHEMA),
            ("pipeline", pipeline::PIPELINE_SCHEMA),
            ("lpm", lpm::LPM_SCHEMA),
            ("acl", acl::ACL_SCHEMA),
            ("lpm6", lpm6::LPM6_SCHEMA),
            ("nfs", nfs::NFS_SCHEMA),
            ("model", model::MODEL_SCHEMA),
        ];
        let cli = <Cli as clap::CommandFactory>::command();
        let bench = cli.find_subcommand("bench").expect("sfclab bench");
        let mut seen = 0;
        for sub in bench.get_subcommands() {
            let (_, schema) = schemas
                .iter()
                .find(|(name, _)| *name == sub.get_name())
                .unwrap_or_else(|| panic!("bench {} is not in this test's list", sub.get_name()));
            let json = sub
                .get_arguments()
                .find(|a| a.get_id() == "json")
                .unwrap_or_else(|| panic!("bench {} has no --json", sub.get_name()));
            let help = json.get_help().map(ToString::to_string).unwrap_or_default();
            assert!(
                help.contains(schema),
                "bench {} --json says `{help}`, writes {schema}",
                sub.get_name()
            );
            seen += 1;
        }
        assert_eq!(seen, schemas.len(), "every listed benchmark is a command");
    }
}
