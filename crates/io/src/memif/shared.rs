//! What an interface's control thread and its ports share: the connection of the
//! moment behind an epoch that moves on every connect and disconnect, and the thread
//! itself, stopped when the last of them goes.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sfclab_core::SharedSpan;

use super::connection::{Connection, Role};
use super::settings::MemifSettings;

/// What the control thread and the ports share.
pub(super) struct Shared {
    /// Moves on every connect and every disconnect.
    epoch: AtomicU64,
    current: Mutex<Option<Arc<Connection>>>,
    /// Why the last attempt to connect failed, for a user waiting in vain.
    last_error: Mutex<Option<String>>,
    connects: AtomicU64,
    /// A zero-copy client's packet pool, once a port attached it: its memfd (the
    /// connection's second region) and where this process sees it. The client connects
    /// only once it is here.
    pool: Mutex<Option<PoolMemory>>,
}

/// A packet pool in shared memory, as a zero-copy client hands it to its server.
pub(super) struct PoolMemory {
    pub(super) fd: OwnedFd,
    pub(super) span: SharedSpan,
}

impl Shared {
    pub(super) fn new() -> Shared {
        Shared {
            epoch: AtomicU64::new(0),
            current: Mutex::new(None),
            last_error: Mutex::new(None),
            connects: AtomicU64::new(0),
            pool: Mutex::new(None),
        }
    }

    /// Keeps the pool a zero-copy port attached, the first one: the interface's ports
    /// share it (a runtime has one pool). A receive port handed another pool later
    /// gives its ring none of that pool's buffers, whose place the server could not
    /// see (counted as `rx_pool_empty`).
    pub(super) fn attach_pool(&self, pool: PoolMemory) {
        let mut guard = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            *guard = Some(pool);
        }
    }

    /// The attached pool's memory, for a handshake: a copy of its descriptor, and its span.
    pub(super) fn pool(&self) -> Option<(OwnedFd, SharedSpan)> {
        let guard = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        let p = guard.as_ref()?;
        Some((p.fd.try_clone().ok()?, p.span))
    }

    #[inline(always)]
    pub(super) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// The connection now (None between peers) and the epoch it belongs to.
    pub(super) fn current(&self) -> (u64, Option<Arc<Connection>>) {
        let guard = self.current.lock().unwrap_or_else(|p| p.into_inner());
        (self.epoch.load(Ordering::Acquire), guard.clone())
    }

    pub(super) fn publish(&self, c: Option<Connection>) {
        let mut guard = self.current.lock().unwrap_or_else(|p| p.into_inner());
        if c.is_some() {
            self.connects.fetch_add(1, Ordering::Relaxed);
        }
        *guard = c.map(Arc::new);
        self.epoch.fetch_add(1, Ordering::Release);
    }

    pub(super) fn connects(&self) -> u64 {
        self.connects.load(Ordering::Relaxed)
    }

    pub(super) fn failed(&self, why: String) {
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
    }

    /// Why the last attempt to connect failed, if one did.
    pub(super) fn last_error(&self) -> Option<String> {
        self.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The socket files this process listens on: a process that quits without running
/// destructors (a second Ctrl-C, a panic in a release build) removes them first.
static LISTENING: Mutex<Vec<std::path::PathBuf>> = Mutex::new(Vec::new());

pub(super) fn listening(socket: &std::path::Path) {
    LISTENING
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(socket.to_path_buf());
}

/// Removes the socket files of every memif server of this process.
pub fn remove_listening_sockets() {
    for socket in std::mem::take(&mut *LISTENING.lock().unwrap_or_else(|p| p.into_inner())) {
        let _ = std::fs::remove_file(socket);
    }
}

/// The control thread; stopped, and a server's socket file removed, when the interface
/// and its last port are gone.
pub(super) struct Control {
    pub(super) shared: Arc<Shared>,
    pub(super) settings: MemifSettings,
    stop: OwnedFd,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Control {
    pub(super) fn new(
        shared: Arc<Shared>,
        settings: MemifSettings,
        stop: OwnedFd,
        thread: std::thread::JoinHandle<()>,
    ) -> Control {
        Control {
            shared,
            settings,
            stop,
            thread: Some(thread),
        }
    }
}

impl Control {
    /// Waits until a peer is connected, at most `limit`; the error says what the last
    /// attempt met.
    pub(super) fn wait_connected(&self, limit: Duration) -> Result<(), String> {
        self.wait_connected_unless(limit, &AtomicBool::new(false)).map(|_| ())
    }

    /// As [`Control::wait_connected`], ending early once `stop` is set: whether a peer
    /// connected (`false`: stopped first).
    pub(super) fn wait_connected_unless(&self, limit: Duration, stop: &AtomicBool) -> Result<bool, String> {
        let started = Instant::now();
        while self.shared.current().1.is_none() {
            if stop.load(Ordering::Relaxed) {
                return Ok(false);
            }
            if started.elapsed() >= limit {
                let s = &self.settings;
                return Err(format!(
                    "memif {} ({}): no peer connected within {limit:?}{}",
                    s.socket.display(),
                    s.role,
                    self.shared
                        .last_error()
                        .map_or(String::new(), |w| format!("; last attempt: {w}"))
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(true)
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        let _ = nix::unistd::write(&self.stop, &1u64.to_ne_bytes());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if self.settings.role == Role::Server {
            let _ = std::fs::remove_file(&self.settings.socket);
            LISTENING
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .retain(|s| *s != self.settings.socket);
        }
    }
}
