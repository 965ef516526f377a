//! How sfclab measures throughput: trials at an offered rate, and searches for the
//! highest rate that meets a loss goal (RFC 2544 section 26.1; NDR/PDR as NFVbench and
//! FD.io CSIT report them).
//!
//! - [`trial`]: one trial's result and the check that it is valid (the generator really
//!   offered the rate); [`Trial`] is what runs one, on a real chain or a simulated one.
//! - [`search`]: the plain RFC 2544 binary search, one goal at a time, and an
//!   MLRsearch-style search (draft-ietf-bmwg-mlrsearch) that serves several goals
//!   with the same trials, starts from the maximum receive rate, and does most of its
//!   narrowing with short trials.

#![forbid(unsafe_code)]

pub mod campaign;
pub mod search;
pub mod simulated;
pub mod stats;
pub mod trial;

pub use campaign::{LatencyLevel, RepeatedSearch, establishing_trial, latency_plan, repeated_search};
pub use search::{Goal, GoalResult, INVALID_RETRIES, Method, SearchConfig, SearchResult, check_goal_order, search};
pub use stats::{LineFit, Summary, median};
pub use trial::{Trial, TrialResult};
