//! What a benchmark is to the command line: its name, its flags (a clap `Args` struct in
//! its own file), its document's schema and its run ([`Entry`], [`Bench`]); and what
//! benchmarks share (windows, peers, table flags). Each benchmark's file declares its
//! entry; [`crate::catalogue`] lists them all.

use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};

use crate::{Benchmark, Progress, Stop};

/// Why a benchmark did not finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BenchError {
    /// A flag that cannot work, named: nothing ran.
    Usage(String),
    /// It ran and failed (a peer, the machine), or Ctrl-C came before anything finished.
    Failed(String),
}

impl std::fmt::Display for BenchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BenchError::Usage(reason) | BenchError::Failed(reason) => f.write_str(reason),
        }
    }
}

impl From<String> for BenchError {
    fn from(reason: String) -> BenchError {
        BenchError::Failed(reason)
    }
}

/// A finished benchmark's document in every form the command line prints.
pub struct Finished {
    /// Its JSON document (pretty), `schema` as given by the entry.
    pub json: String,
    /// The table a terminal shows.
    pub table: String,
    /// One CSV row per point, where the benchmark has points.
    pub csv: Option<String>,
    /// What `--plot` draws, where the benchmark draws one.
    pub figure: Option<Figure>,
    /// Ctrl-C cut it short: what finished is kept.
    pub interrupted: bool,
}

/// A plot as data; the command line draws it (SVG, or PNG).
#[derive(Debug, Clone, PartialEq)]
pub enum Figure {
    /// A line per series over categories on x (`None`: no point there).
    Lines {
        title: String,
        x_label: String,
        y_label: String,
        x: Vec<String>,
        series: Vec<(String, Vec<Option<f64>>)>,
    },
    /// A bar per label, stacked from its segments.
    StackedBars {
        title: String,
        y_label: String,
        bars: Vec<(String, Vec<(String, f64)>)>,
    },
    /// Points in groups, a colour each, with the y = x line.
    Scatter {
        title: String,
        x_label: String,
        y_label: String,
        groups: Vec<(String, Vec<(f64, f64)>)>,
    },
}

/// One benchmark as the command line sees it.
pub trait Bench: Sync {
    /// `sfclab bench NAME`.
    fn name(&self) -> &'static str;
    /// The schema its JSON document carries (`sfclab.bench.NAME/V`).
    fn schema(&self) -> &'static str;
    /// The JSON Schema of that document.
    fn json_schema(&self) -> schemars::Schema;
    /// Its subcommand: what it measures, its flags and the output flags it has.
    fn command(&self) -> Command;
    /// Runs it with the flags `command` parsed until it ends or `stop` is asked.
    fn run(&self, flags: &ArgMatches, stop: &Stop, progress: &mut Progress) -> Result<Finished, BenchError>;
}

/// A benchmark of flags `F` and document `R`.
pub struct Entry<F, R> {
    pub name: &'static str,
    pub schema: &'static str,
    /// The subcommand's help: what it measures, against which peer.
    pub about: &'static str,
    /// Its flags checked and its measurement run, until it ends or the stop is asked.
    pub run: fn(F, &Stop, &mut Progress) -> Result<R, BenchError>,
    /// What `--plot` draws, where it draws.
    pub figure: Option<fn(&R) -> Figure>,
}

impl<F, R> Bench for Entry<F, R>
where
    F: Args + FromArgMatches,
    R: Benchmark + schemars::JsonSchema,
{
    fn name(&self) -> &'static str {
        self.name
    }

    fn schema(&self) -> &'static str {
        self.schema
    }

    fn json_schema(&self) -> schemars::Schema {
        schemars::schema_for!(R)
    }

    fn command(&self) -> Command {
        let mut json = Arg::new("json")
            .long("json")
            .action(ArgAction::SetTrue)
            .help(format!("Print JSON (schema `{}`)", self.schema));
        if R::HAS_CSV {
            json = json.conflicts_with("csv");
        }
        // The flags' own doc comment would be the about: the entry's says what it measures.
        let mut command = F::augment_args(Command::new(self.name))
            .about(self.about)
            .long_about(None)
            .arg(json);
        if R::HAS_CSV {
            command = command.arg(
                Arg::new("csv")
                    .long("csv")
                    .action(ArgAction::SetTrue)
                    .help("Print one CSV row per point"),
            );
        }
        if self.figure.is_some() {
            command = command.arg(
                Arg::new("plot")
                    .long("plot")
                    .value_name("FILE")
                    .value_parser(clap::value_parser!(std::path::PathBuf))
                    .help("Also write its plot: SVG, or PNG if the name ends in .png"),
            );
        }
        command
    }

    fn run(&self, flags: &ArgMatches, stop: &Stop, progress: &mut Progress) -> Result<Finished, BenchError> {
        let parsed = F::from_arg_matches(flags).map_err(|e| BenchError::Usage(e.to_string()))?;
        let done = (self.run)(parsed, stop, progress)?;
        Ok(Finished {
            json: serde_json::to_string_pretty(&done).expect("a benchmark's document serialises") + "\n",
            table: done.table(),
            csv: done.csv(),
            figure: self.figure.map(|draw| draw(&done)),
            interrupted: done.header().interrupted,
        })
    }
}

/// A measured window and warm-up given as text (`1s`, `200ms`), checked.
pub fn window(duration: &str, warmup: &str) -> Result<(std::time::Duration, std::time::Duration), BenchError> {
    let parse = |flag: &str, text: &str| {
        humantime::parse_duration(text).map_err(|e| BenchError::Usage(format!("--{flag} `{text}`: {e}")))
    };
    Ok((parse("duration", duration)?, parse("warmup", warmup)?))
}

/// [`window`] for a benchmark of repetitions: at least one, and a window that is not empty.
pub fn repeated_window(
    repeat: usize,
    duration: &str,
    warmup: &str,
) -> Result<(std::time::Duration, std::time::Duration), BenchError> {
    match window(duration, warmup)? {
        w if repeat > 0 && w.0 > std::time::Duration::ZERO => Ok(w),
        _ => Err(BenchError::Usage(
            "need at least one repetition and a non-zero duration".into(),
        )),
    }
}

/// The flags of a table's lookups against DPDK's (`bench lpm`, `bench lpm6`).
#[derive(clap::Args)]
pub struct TableFlags {
    #[arg(long, default_value_t = 3)]
    pub repeat: usize,
    /// Core to measure on (default: the last core this process may use).
    #[arg(long)]
    pub core: Option<usize>,
    /// Peer to measure in the same run.
    #[arg(long, value_enum, default_value = "dpdk")]
    pub peer: DpdkPeer,
}

/// Who a benchmark measures beside sfclab: its DPDK peer or no one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum DpdkPeer {
    Dpdk,
    None,
}

/// Who a benchmark measures beside sfclab: dpdk-testpmd or no one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum TestpmdPeer {
    Testpmd,
    None,
}

/// The one chain element `--nf` names, in shorthand (`synthetic(cycles=100)`).
pub fn one_nf(text: &str) -> Result<sfclab_nf::NfSpec, BenchError> {
    let source = sfclab_experiment::ChainSource::Shorthand(text.into());
    let experiment = sfclab_experiment::Experiment::load(&source, &sfclab_experiment::Settings::default())
        .map_err(|e| BenchError::Usage(format!("--nf: {e}")))?;
    match experiment.nfs() {
        [(_, nf)] => Ok(nf.clone()),
        _ => Err(BenchError::Usage(format!(
            "--nf `{text}`: give one NF (the benchmark repeats it)"
        ))),
    }
}
