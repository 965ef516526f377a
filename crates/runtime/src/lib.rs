//! Chaining runtimes and what they report.
//!
//! - [`chain`]: NFs in order with their counters; runs one batch through them and turns
//!   verdicts into moves and counted drops. Every runtime uses it for its stages.
//! - [`compound`]: source -> NF 1..n -> sink in one pinned thread, batches passed by
//!   function call (the compound chains of seed 004).
//!
//! Runtimes take any [`sfclab_core::RxPort`] as the source and [`sfclab_core::TxPort`]
//! as the sink (`run_compound_on`, `run_parallel_on`); `run_compound` and `run_pipeline`
//! use the in-memory generator and sink.
//! - [`pipeline`]: NF blocks on several cores joined by rings, placed by [`placement`].
//! - [`settings`]: what every runtime is told about a run, and how a run fails.
//! - [`progress`]: how long work tells how far it got (one typed stream of steps).
//! - [`report`]: the figures of a run and the exact conservation check.
//! - [`wired`]: runs across real interfaces: sfclab as the tester of a device under
//!   test (an sfclab chain, the Linux kernel) in a namespace, over veth and AF_XDP.

#![forbid(unsafe_code)]

pub mod chain;
pub mod compound;
pub mod pipeline;
pub mod placement;
pub mod progress;
pub mod report;
pub mod settings;
pub mod stop;
pub mod wired;

pub use chain::{Chain, ChainGraph, Next, WiringError};
pub use compound::{
    WindowEdge, run_compound, run_compound_in, run_compound_on, run_hops_observed, run_hops_on, run_pool,
};
pub use pipeline::{LinkMode, PipelineSettings, run_parallel, run_parallel_on, run_pipeline};
pub use placement::{Placement, StagePlan};
pub use progress::{Progress, Step};
pub use report::{Conservation, CoreReport, DropRecord, PlaceReport, Role, RunReport, TxCounts, WindowLoss};
pub use settings::{RunError, RunSettings};
pub use stop::Stop;
pub use wired::{
    DeviceUnderTest, ExternalOutcome, HopLinks, KERNEL_RECEIVE_DROPS, RunningDut, TestbedReport, WireLoss, WiredReport,
    WiredSettings, open_in_namespace, open_queues_in_namespace, run_across_veth, softnet_dropped,
};
