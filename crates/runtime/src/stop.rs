//! The one way to stop sfclab's work early: a [`Stop`] shared by whoever asks (the
//! command line's Ctrl-C handler, a test, a program of your own) and every run, search,
//! sweep, scenario and benchmark that heeds it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A request to stop, shared by clones: a run under way ends its window at once and is
/// marked interrupted; a loop of runs starts no further one and keeps what finished.
#[derive(Debug, Clone, Default)]
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    /// A stop nobody asked for yet.
    pub fn new() -> Stop {
        Stop::default()
    }

    /// Asks every holder of a clone to stop.
    pub fn request(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether a stop was asked for.
    pub fn requested(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// The flag itself, for waits below the runtime that take one (memif's).
    pub fn flag(&self) -> &AtomicBool {
        &self.0
    }
}
