//! What every runtime is told about a run (its window, batch, core, accounting, stop
//! flag) and how a run fails: one place, since the compound, pipeline and wired
//! runtimes all take them.

use std::time::Duration;

use sfclab_core::MAX_BATCH;

use crate::report::RunReport;

/// How to run a chain.
#[derive(Debug, Clone)]
pub struct RunSettings {
    pub batch: usize,
    /// Length of the measured window (after warm-up). With `count` too, whichever ends first.
    pub duration: Option<Duration>,
    /// Packets to generate in the measured window.
    pub count: Option<u64>,
    pub warmup: Duration,
    /// Core to pin the chain's thread to; `None`: not pinned.
    pub core: Option<usize>,
    /// Measure TSC cycles per NF, per batch.
    pub accounting: bool,
    /// Verify every frame's checksums at the sink.
    pub verify: bool,
    pub pool_size: usize,
    /// Set from outside (e.g. on Ctrl-C) to end the run early; checked every 1024 batches.
    pub stop: Option<crate::Stop>,
    /// A responder at the chain's far end answers every packet, and the replies run
    /// back through the chain to the sink (compound runtime, linear chains).
    pub reply: bool,
}

impl Default for RunSettings {
    fn default() -> Self {
        RunSettings {
            batch: 32,
            duration: Some(Duration::from_secs(5)),
            count: None,
            warmup: Duration::from_millis(500),
            core: None,
            accounting: true,
            verify: false,
            pool_size: 4096,
            stop: None,
            reply: false,
        }
    }
}

/// Why a run did not finish. Each kind is one exit status of the CLI: bad input (2),
/// a failure of the machine or a peer (1), a result that broke conservation (3).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Input that cannot work (a flag, a file's key, a value, a combination); names the
    /// key. Nothing ran.
    #[error("{key}: {reason}")]
    Setting { key: &'static str, reason: String },
    /// The input was fine but the run failed at `place`: the machine (a namespace, a
    /// socket, a process that would not start), a peer (one that never connected or
    /// quit), or a result that contradicts itself (more received than sent).
    #[error("{place}: {reason}")]
    Failed { place: &'static str, reason: String },
    /// The run finished but packets were not conserved: a bug, reported with the figures.
    #[error("packet conservation violated: {}", .0.conservation)]
    Conservation(Box<RunReport>),
}

impl RunError {
    /// Bad input at `key`.
    pub fn setting(key: &'static str, reason: impl std::fmt::Display) -> RunError {
        RunError::Setting {
            key,
            reason: reason.to_string(),
        }
    }

    /// A failure of the machine, a peer or the result at `place`.
    pub fn failed(place: &'static str, reason: impl std::fmt::Display) -> RunError {
        RunError::Failed {
            place,
            reason: reason.to_string(),
        }
    }

    /// Whether the input was at fault (nothing ran), rather than the run.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, RunError::Setting { .. })
    }
}

impl RunSettings {
    pub fn validate(&self) -> Result<(), RunError> {
        if !(1..=MAX_BATCH).contains(&self.batch) {
            return Err(RunError::setting(
                "batch",
                format!("{} is outside 1..={MAX_BATCH}", self.batch),
            ));
        }
        if self.duration.is_none() && self.count.is_none() {
            return Err(RunError::setting("duration", "give a duration or a packet count"));
        }
        if self.duration == Some(Duration::ZERO) || self.count == Some(0) {
            return Err(RunError::setting("duration", "the measured window must not be empty"));
        }
        if self.pool_size < 2 * self.batch {
            return Err(RunError::setting(
                "pool_size",
                format!("{} buffers cannot hold two batches of {}", self.pool_size, self.batch),
            ));
        }
        if let Some(core) = self.core {
            let cores = core_affinity::get_core_ids().unwrap_or_default();
            if !cores.iter().any(|c| c.id == core) {
                let ids: Vec<String> = cores.iter().map(|c| c.id.to_string()).collect();
                return Err(RunError::setting(
                    "core",
                    format!("core {core} is not available (this process may use {})", ids.join(", ")),
                ));
            }
        }
        Ok(())
    }
}
