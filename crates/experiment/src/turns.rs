//! Measurements that take turns: runs naming the same file run one at a time, and a
//! run that just had its turn lets a waiting one go first.
//!
//! Two searches (or a search and a peer's measurer) on one machine would otherwise
//! either measure each other (four busy threads on two cores) or run one after the
//! other, minutes apart, in different states of a machine whose capacity drifts (a VM's
//! vCPUs move, the host throttles): taking turns trial by trial puts both in the same
//! state. The turn is an exclusive `flock(2)` on the file, which any process can take
//! (Python's `fcntl.flock`, `flock(1)`); it is released when the run ends, even if the
//! process dies.

use std::fs::File;
use std::path::Path;
use std::time::Duration;

/// How long a run waits before asking for its turn: a process blocked on the lock is
/// woken when the previous turn ends and takes it well within this, so turns
/// alternate instead of the last holder taking the next one too.
const GIVE_WAY: Duration = Duration::from_millis(20);

/// The turn, held until dropped.
pub struct Turn {
    file: File,
}

impl Turn {
    /// Waits for the turn on `path` (created if missing).
    pub fn take(path: &Path) -> Result<Turn, String> {
        std::thread::sleep(GIVE_WAY);
        let file = open(path)?;
        file.lock()
            .map_err(|e| format!("{}: cannot lock it: {e}", path.display()))?;
        Ok(Turn { file })
    }
}

/// The turn file, created if missing: also how a chain's settings are checked before
/// anything runs.
pub fn open(path: &Path) -> Result<File, String> {
    File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))
}

impl Drop for Turn {
    fn drop(&mut self) {
        // Closing the file releases the lock too; unlocking first ends the turn at once.
        let _ = self.file.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    #[test]
    fn turns_are_exclusive_and_alternate() {
        let path = std::env::temp_dir().join(format!("sfclab-turns-{}", std::process::id()));
        let busy = Arc::new(AtomicBool::new(false));
        let order = Arc::new(Mutex::new(Vec::new()));
        let parties: Vec<_> = ["a", "b"]
            .into_iter()
            .map(|name| {
                let (path, busy, order) = (path.clone(), busy.clone(), order.clone());
                std::thread::spawn(move || {
                    for _ in 0..4 {
                        let turn = Turn::take(&path).unwrap();
                        assert!(!busy.swap(true, Ordering::SeqCst), "two turns at once");
                        order.lock().unwrap().push(name);
                        std::thread::sleep(Duration::from_millis(60));
                        busy.store(false, Ordering::SeqCst);
                        drop(turn);
                    }
                })
            })
            .collect();
        for p in parties {
            p.join().unwrap();
        }
        let order = order.lock().unwrap();
        let repeats = order.windows(2).filter(|w| w[0] == w[1]).count();
        // Each ended turn hands over to the waiting party; one repeat is allowed where
        // a thread started late.
        assert!(repeats <= 1, "turns did not alternate: {order:?}");
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn a_path_that_cannot_be_opened_is_named() {
        let e = Turn::take(Path::new("/nonexistent-dir/turns")).err().unwrap();
        assert!(e.starts_with("/nonexistent-dir/turns: "), "{e}");
    }
}
