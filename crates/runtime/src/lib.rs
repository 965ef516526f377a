//! Chaining runtimes and what they report.
//!
//! - [`chain`]: NFs in order with their counters; runs one batch through them and turns
//!   verdicts into moves and counted drops. Every runtime uses it for its stages.
//! - [`compound`]: generator -> NF 1..n -> sink in one pinned thread, batches passed by
//!   function call (the compound chains of seed 004).
//! - [`report`]: the figures of a run and the exact conservation check.

pub mod chain;
pub mod compound;
pub mod report;

pub use chain::{Chain, NfSlot};
pub use compound::{RunError, RunSettings, run_compound};
pub use report::{Conservation, DropRecord, PlaceReport, RunReport};
