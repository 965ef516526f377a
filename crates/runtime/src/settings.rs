//! What every runtime is told about a run (its window, batch, core, accounting, stop
//! flag) and how a run fails: one place, since the compound, pipeline and wired
//! runtimes all take them.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
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
    pub stop: Option<Arc<AtomicBool>>,
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

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A setting that cannot work; names the key.
    #[error("{key}: {reason}")]
    Setting { key: &'static str, reason: String },
    /// The run finished but packets were not conserved: a bug, reported with the figures.
    #[error("packet conservation violated: {}", .0.conservation)]
    Conservation(Box<RunReport>),
}

pub(crate) fn setting(key: &'static str, reason: impl Into<String>) -> RunError {
    RunError::Setting {
        key,
        reason: reason.into(),
    }
}

impl RunSettings {
    pub fn validate(&self) -> Result<(), RunError> {
        if !(1..=MAX_BATCH).contains(&self.batch) {
            return Err(setting("batch", format!("{} is outside 1..={MAX_BATCH}", self.batch)));
        }
        if self.duration.is_none() && self.count.is_none() {
            return Err(setting("duration", "give a duration or a packet count"));
        }
        if self.duration == Some(Duration::ZERO) || self.count == Some(0) {
            return Err(setting("duration", "the measured window must not be empty"));
        }
        if self.pool_size < 2 * self.batch {
            return Err(setting(
                "pool_size",
                format!("{} buffers cannot hold two batches of {}", self.pool_size, self.batch),
            ));
        }
        if let Some(core) = self.core {
            let cores = core_affinity::get_core_ids().unwrap_or_default();
            if !cores.iter().any(|c| c.id == core) {
                let ids: Vec<String> = cores.iter().map(|c| c.id.to_string()).collect();
                return Err(setting(
                    "core",
                    format!("core {core} is not available (this process may use {})", ids.join(", ")),
                ));
            }
        }
        Ok(())
    }
}
