//! sfclab as a library: a chain file (or the `--chain` shorthand, or the embedded
//! default) plus overrides is resolved into an [`Experiment`], checked as a whole before
//! anything runs, which then runs on the runtime and ports it names and returns its typed
//! report. The `sfclab` command, the benchmarks and programs of your own all call this.
//!
//! ```no_run
//! use sfclab_experiment::{ChainSource, Experiment, Settings};
//!
//! let experiment = Experiment::load(&ChainSource::Shorthand("forwarder*4".into()), &Settings::default())?;
//! let report = experiment.run()?.into_measured();
//! println!("{:.2} Mpps, conservation holds: {}", report.mpps, report.conservation.holds);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

pub mod chain_file;
pub mod chaining;
pub mod diagnosis;
mod document;
mod hop_processes;
mod located;
mod memif_chain;
pub mod ports;
mod prediction;
pub mod remote_hops;
pub mod run;
pub mod run_document;
pub mod scenario;
pub mod search;
pub mod settings;
pub mod sweep;
pub mod turns;

pub use chain_file::{ChainFileError, ChainSource, Experiment, FileIo, Replay};
pub use chaining::Chaining;
pub use document::{Machine, NfOwned};
pub use hop_processes::HopPlan;
pub use ports::{ControlledBy, InterfaceIo, Ports, ServedHop};
pub use run::Reports;
pub use run_document::{RUN_SCHEMA, RunDocument};
pub use settings::Settings;
pub use sfclab_runtime::{Progress, Step, Stop};
