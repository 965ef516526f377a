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

use clap::{Args, Parser, Subcommand};
use sfclab_bench::catalogue;
use sfclab_bench::registry::{Bench, BenchError};
use sfclab_experiment::{ChainFileError, ChainSource, Experiment, Reports, RunDocument, settings};
use sfclab_runtime::{RunError, Stop};
use std::process::ExitCode;

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
        "{} (commit {})\nESP's AES-GCM: {}\nDPI's search: {}",
        env!("CARGO_PKG_VERSION"),
        env!("SFCLAB_COMMIT"),
        sfclab_aead::in_use(),
        sfclab_vectorscan::in_use()
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
    /// With --scenario (or --chains, --vnf...): deploy a scenario's VNF chains so they
    /// carry its rates on the fewest cores (features in one VNF or split, chains, VNFs
    /// per core, wait mode), with the cost/throughput trade-off of every deployment tried.
    Plan(Box<model::PlanCli>),
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
        #[arg(value_parser = clap::builder::PossibleValuesParser::new(schema_names()), default_value = "run")]
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

/// A benchmark of the bench crate's registry, with the flags it was given.
struct BenchCmd {
    bench: &'static dyn Bench,
    flags: clap::ArgMatches,
}

impl clap::FromArgMatches for BenchCmd {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<BenchCmd, clap::Error> {
        let (name, flags) = matches
            .subcommand()
            .ok_or_else(|| clap::Error::new(clap::error::ErrorKind::MissingSubcommand))?;
        let bench = catalogue::find(name).ok_or_else(|| clap::Error::new(clap::error::ErrorKind::InvalidSubcommand))?;
        Ok(BenchCmd {
            bench,
            flags: flags.clone(),
        })
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = BenchCmd::from_arg_matches(matches)?;
        Ok(())
    }
}

impl clap::Subcommand for BenchCmd {
    fn augment_subcommands(command: clap::Command) -> clap::Command {
        catalogue::all()
            .into_iter()
            .fold(command, |c, bench| c.subcommand(bench.command()))
    }

    fn augment_subcommands_for_update(command: clap::Command) -> clap::Command {
        BenchCmd::augment_subcommands(command)
    }

    fn has_subcommand(name: &str) -> bool {
        catalogue::find(name).is_some()
    }
}

/// Requested by the first Ctrl-C: runs end their window early and report what they
/// measured. A second Ctrl-C exits at once.
pub fn ctrl_c() -> Stop {
    static STOP: std::sync::OnceLock<Stop> = std::sync::OnceLock::new();
    STOP.get_or_init(|| {
        let stop = Stop::new();
        let asked = stop.clone();
        // If a handler cannot be installed, Ctrl-C simply keeps its default meaning.
        let _ = ctrlc::set_handler(move || {
            if asked.requested() {
                // Quitting now: no destructor runs, so remove the namespaces and the
                // memif sockets this process listens on first.
                sfclab_topology::tear_down_everything();
                sfclab_io::memif::remove_listening_sockets();
                std::process::exit(130);
            }
            asked.request();
            eprintln!("\nstopping: finishing the current window (Ctrl-C again to quit now)");
        });
        stop
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
    let _ = ctrl_c();
    match cli.command {
        Cmd::Run(args) => cmd_run(*args),
        Cmd::Search(args) => search::cmd_search(*args),
        Cmd::Sweep(args) => sweep::cmd_sweep(*args),
        Cmd::Report(args) => sweep::cmd_report(args),
        Cmd::Scenario(args) => scenario::cmd_scenario(*args),
        Cmd::Bench(cmd) => cmd_bench(cmd),
        Cmd::Model(cmd) => model::cmd_model(cmd),
        Cmd::Plan(a) => model::cmd_plan(*a),
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
/// Runs a benchmark of the registry with a progress bar, writes its plot when asked, and
/// prints its document as JSON, CSV (where it has points) or its table.
fn cmd_bench(r: BenchCmd) -> ExitCode {
    let flag = |id: &str| r.flags.try_get_one::<bool>(id).ok().flatten().copied().unwrap_or(false);
    let (json, csv) = (flag("json"), flag("csv"));
    let plot = r
        .flags
        .try_get_one::<std::path::PathBuf>("plot")
        .ok()
        .flatten()
        .cloned();
    let done = match progress::shown("runs", |progress| r.bench.run(&r.flags, &ctrl_c(), progress)) {
        Ok(done) => done,
        Err(BenchError::Usage(e)) => return outcome::fail(outcome::USAGE, &e),
        // Ctrl-C before anything finished: nothing to write, and the status says why.
        Err(BenchError::Failed(e)) if ctrl_c().requested() => return outcome::fail(outcome::INTERRUPTED, &e),
        Err(BenchError::Failed(e)) => return outcome::fail(outcome::FAILURE, &e),
    };
    if let (Some(path), Some(figure)) = (&plot, &done.figure)
        && let Err(e) = bench_plots::draw(figure).and_then(|svg| report::write_plot(path, &svg))
    {
        return outcome::fail(outcome::FAILURE, &format!("--plot {}: {e}", path.display()));
    }
    let text = match (json, csv, done.csv) {
        (true, _, _) => done.json,
        (false, true, Some(rows)) => rows,
        (false, true, None) => {
            let schema = r.bench.schema();
            return outcome::fail(outcome::USAGE, &format!("--csv: {schema} has no CSV form; use --json"));
        }
        (false, false, _) => done.table,
    };
    outcome::emit_then(&text, outcome::done(done.interrupted))
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

/// The documents `sfclab schema` publishes (docs/schema/NAME-VERSION.json) besides the
/// benchmarks'.
const DOCUMENTS: [&str; 10] = [
    "run",
    "search",
    "sweep",
    "scenario",
    "calibration",
    "prediction",
    "scenario-prediction",
    "plan",
    "scenario-plan",
    "rc",
];

/// Every document `sfclab schema` publishes: [`DOCUMENTS`], then `bench-NAME` for each
/// benchmark of the catalogue.
pub fn schema_names() -> Vec<&'static str> {
    let benches = catalogue::all()
        .into_iter()
        // Once per process, for clap's list of possible values.
        .map(|b| &*Box::leak(format!("bench-{}", b.name()).into_boxed_str()));
    DOCUMENTS.into_iter().chain(benches).collect()
}

/// The JSON Schema of a published document, by name.
pub fn schema(name: &str) -> Option<String> {
    if let Some(bench) = name.strip_prefix("bench-").and_then(catalogue::find) {
        return Some(bench_schema_of(bench));
    }
    match name {
        "run" => Some(render::run_schema()),
        "search" => Some(search::schema()),
        "sweep" => Some(sweep::schema()),
        "scenario" => Some(scenario::schema()),
        "calibration" => Some(render::schema_of::<sfclab_model::Calibration>(
            "calibration-9.json",
            "`sfclab model calibrate` (the file it writes), schema sfclab.calibration/9.",
        )),
        "scenario-prediction" => Some(
            render::schema_of::<sfclab_model::documents::ScenarioPredictionDocument>(
                "scenario-prediction-3.json",
                "`sfclab model predict --scenario FILE --json`, schema sfclab.scenario-prediction/3.",
            ),
        ),
        "prediction" => Some(render::schema_of::<sfclab_model::documents::PredictionDocument>(
            "prediction-1.json",
            "`sfclab model predict --json`, schema sfclab.prediction/1.",
        )),
        "rc" => Some(render::schema_of::<sfclab_model::documents::RcDocument>(
            "rc-1.json",
            "`sfclab model rc --json`, schema sfclab.rc/1.",
        )),
        "scenario-plan" => Some(render::schema_of::<sfclab_model::documents::ScenarioPlanDocument>(
            "scenario-plan-2.json",
            "`sfclab plan --scenario FILE --json`, schema sfclab.scenario-plan/2.",
        )),
        "plan" => Some(render::schema_of::<sfclab_model::documents::PlanDocument>(
            "plan-1.json",
            "`sfclab plan --json`, schema sfclab.plan/1.",
        )),
        _ => None,
    }
}

/// A registered benchmark's document schema, as `sfclab schema bench-NAME` prints it.
fn bench_schema_of(bench: &dyn Bench) -> String {
    let (name, version) = bench
        .schema()
        .strip_prefix("sfclab.bench.")
        .and_then(|s| s.split_once('/'))
        .expect("a benchmark's schema is sfclab.bench.NAME/VERSION");
    render::schema_value(
        bench.json_schema(),
        &format!("bench-{name}-{version}.json"),
        &format!("`sfclab bench {name} --json`, schema {}.", bench.schema()),
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
pub fn load_experiment(a: &RunArgs) -> Result<Experiment, ChainFileError> {
    Experiment::load(&source_of(a), &a.settings)
}

fn cmd_run(a: RunArgs) -> ExitCode {
    let experiment: Experiment = match load_experiment(&a) {
        Ok(mut s) => {
            s.stop_on(&ctrl_c());
            s
        }
        Err(e) => {
            return outcome::fail(outcome::USAGE, &e.to_string());
        }
    };
    if experiment.spans_hosts {
        let file = a.file.clone().unwrap_or_else(|| "FILE".into());
        // In one process the hops have no hosts to sit on: the NFs are measured as ever.
        if !matches!(
            experiment.chaining(),
            sfclab_experiment::Chaining::Compound | sfclab_experiment::Chaining::Pipeline { .. }
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
    if !experiment.ports().runs_chain() && ((a.file.is_some() && !experiment.nfs().is_empty()) || a.chain.is_some()) {
        return outcome::fail(
            outcome::USAGE,
            &format!(
                "--ports {}: the device under test is not an sfclab chain, so none runs: give no chain (a file of `traffic:` and `run:` only) or --chain",
                experiment.ports()
            ),
        );
    }
    if experiment.ports().served_hop().is_some_and(|hop| hop.control.is_some()) {
        // A hop measured run after run by a tester elsewhere: each run's document to its
        // report file, the last (ended by SIGINT or SIGTERM) to stdout as well.
        let document = |r: &sfclab_runtime::RunReport| RunDocument::of_chain(&experiment, r).to_json() + "\n";
        return match sfclab_experiment::remote_hops::serve_runs(&experiment, &mut { document }) {
            Ok(r) => outcome::emit_then(&document(&r), outcome::done(r.interrupted)),
            Err(e) => outcome::fail(outcome::of_run_error(&e), &e.to_string()),
        };
    }
    let render = |reports: &Reports| match reports {
        _ if a.json => RunDocument::new(&experiment, reports).to_json() + "\n",
        _ if a.csv => render::csv(&experiment.name, reports.measured()),
        Reports::Chain(r) => render::table(&experiment.name, r),
        Reports::Wired(w) => render::table_wired(&experiment.name, w),
    };
    match experiment.run() {
        Ok(reports) => {
            let measured = reports.measured();
            let status = match measured.verify_failed {
                Some(n) if n > 0 => {
                    eprintln!("error: {n} frames failed checksum or length verification");
                    outcome::VERIFY_FAILED
                }
                _ => outcome::done(measured.interrupted),
            };
            outcome::emit_then(&render(&reports), status)
        }
        Err(RunError::Conservation(r)) => {
            let reason = format!("packet conservation violated: {}", r.conservation);
            let _ = outcome::emit(&render(&Reports::Chain(*r)));
            outcome::fail(outcome::CONSERVATION, &reason)
        }
        Err(e) => outcome::fail(outcome::of_run_error(&e), &e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::Cli;

    /// Every benchmark's `--json` help names the schema its document carries, and each
    /// is a subcommand of `sfclab bench` with a published schema.
    #[test]
    fn every_benchmark_s_json_help_names_its_schema() {
        let schemas: Vec<(&str, &str)> = sfclab_bench::catalogue::all()
            .into_iter()
            .map(|b| (b.name(), b.schema()))
            .collect();
        for (name, _) in &schemas {
            let doc = format!("bench-{name}");
            assert!(
                super::schema_names().contains(&doc.as_str()),
                "{doc} is not in schema_names()"
            );
            assert!(super::schema(&doc).is_some(), "no schema for {doc}");
        }
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
