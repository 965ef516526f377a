//! One memif interface: its socket, the thread that keeps it connected, and the ports
//! that move frames through its rings ([`super::port::MemifPort`]).
//!
//! The control thread does everything slow: listening or connecting, the handshake, and
//! waiting for the peer to leave; it publishes each connection to the ports and takes
//! it back when the peer goes. A port notices through one atomic load per call (the
//! epoch); the lock around the connection is taken only when the epoch moved, never per
//! batch. A peer that goes away and comes back (a restarted NF) is simply the next
//! connection: a server accepts it, a client connects again.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::eventfd::{EfdFlags, EventFd};

use super::connection::{Config, Connection, HandshakeError, Role, join, serve};
use super::control::{Channel, Listener};
use super::msg::Msg;
use super::port::MemifPort;

/// How long an interrupt-mode receiver polls an empty ring before it sleeps, unless
/// told. Short: on a shared core a hop that spins holds the core its producer needs.
/// Under full load it hardly matters (three hops on one core, with senders that yield on
/// a full ring: 15.3–16.2 Mpps at 0, 2 and 5 us alike; docs/PERFORMANCE.md); at light
/// load it trades a few microseconds of latency for wake-ups.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(5);

/// How a receiving port waits for frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// Polls its ring without rest (a core per port, the lowest latency).
    Poll,
    /// Polls for `spin`, then sleeps on the ring's eventfd until the sender signals: NF
    /// processes can share a core.
    Interrupt { spin: Duration },
}

impl std::fmt::Display for Wait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Wait::Poll => f.write_str("polling"),
            Wait::Interrupt { spin } => write!(f, "interrupt after {} us", spin.as_micros()),
        }
    }
}

/// Settings of one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemifSettings {
    /// The socket file (a server creates it, a client connects to it).
    pub socket: PathBuf,
    pub role: Role,
    pub config: Config,
    pub wait: Wait,
}

impl MemifSettings {
    pub fn new(socket: impl Into<PathBuf>, role: Role) -> MemifSettings {
        MemifSettings {
            socket: socket.into(),
            role,
            config: Config::default(),
            wait: Wait::Poll,
        }
    }
}

/// Where an endpoint named on the command line is a memif interface:
/// `memif:PATH[,role=server|client][,id=N][,secret=S][,ring=N][,buffer=N][,wait=polling|interrupt][,spin=N]`
/// (`ring`: descriptors per ring, a power of two; `buffer`: bytes; `spin`: microseconds
/// an interrupt-mode receiver polls before it sleeps).
pub const SPEC_PREFIX: &str = "memif:";

impl MemifSettings {
    /// Reads an endpoint written as [`SPEC_PREFIX`] says; `role` when it names none.
    /// Errors name the key and why.
    pub fn from_spec(spec: &str, role: Role) -> Result<MemifSettings, String> {
        let rest = spec
            .strip_prefix(SPEC_PREFIX)
            .ok_or_else(|| format!("`{spec}` is not a memif endpoint: write memif:PATH[,key=value...]"))?;
        let mut parts = rest.split(',');
        let path = parts.next().unwrap_or("").trim();
        if path.is_empty() {
            return Err(format!("`{spec}`: memif needs the socket file's path after `memif:`"));
        }
        let mut s = MemifSettings::new(path, role);
        let mut spin = DEFAULT_SPIN;
        let mut interrupt = false;
        for kv in parts {
            let (key, value) = kv
                .split_once('=')
                .ok_or_else(|| format!("`{spec}`: `{kv}` is not key=value"))?;
            let (key, value) = (key.trim(), value.trim());
            let bad = |why: &str| format!("`{spec}`: {key} `{value}` {why}");
            let number = || value.parse::<u64>().map_err(|_| bad("is not a number"));
            match key {
                "role" => {
                    s.role = match value {
                        "server" | "master" => Role::Server,
                        "client" | "slave" => Role::Client,
                        _ => return Err(bad("is not a role: write server or client")),
                    }
                }
                "id" => s.config.id = u32::try_from(number()?).map_err(|_| bad("is beyond 32 bits"))?,
                "secret" => {
                    if value.len() >= super::msg::SECRET_SIZE {
                        return Err(bad("is longer than memif's 23 bytes"));
                    }
                    s.config.secret = value.to_string();
                }
                "ring" => {
                    let n = number()?;
                    if !n.is_power_of_two() || !(8..=1 << super::layout::MAX_LOG2_RING_SIZE).contains(&n) {
                        return Err(bad("is not a power of two from 8 to 16384"));
                    }
                    s.config.log2_ring_size = n.trailing_zeros() as u8;
                }
                "buffer" => {
                    let n = number()?;
                    if !(64..=65535).contains(&n) {
                        return Err(bad("is not from 64 to 65535 bytes"));
                    }
                    s.config.buffer_size = n as u32;
                }
                "wait" => {
                    interrupt = match value {
                        "polling" | "poll" => false,
                        "interrupt" => true,
                        _ => return Err(bad("is not a way to wait: write polling or interrupt")),
                    }
                }
                "spin" => spin = Duration::from_micros(number()?),
                _ => {
                    return Err(format!(
                        "`{spec}`: unknown key `{key}`: memif takes role, id, secret, ring, buffer, wait and spin"
                    ));
                }
            }
        }
        if interrupt {
            s.wait = Wait::Interrupt { spin };
        }
        Ok(s)
    }
}

/// What the control thread and the ports share.
pub(super) struct Shared {
    /// Moves on every connect and every disconnect.
    epoch: AtomicU64,
    current: Mutex<Option<Arc<Connection>>>,
    /// Why the last attempt to connect failed, for a user waiting in vain.
    last_error: Mutex<Option<String>>,
    connects: AtomicU64,
}

impl Shared {
    #[inline(always)]
    pub(super) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// The connection now (None between peers) and the epoch it belongs to.
    pub(super) fn current(&self) -> (u64, Option<Arc<Connection>>) {
        let guard = self.current.lock().unwrap_or_else(|p| p.into_inner());
        (self.epoch.load(Ordering::Acquire), guard.clone())
    }

    fn publish(&self, c: Option<Connection>) {
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

    fn failed(&self, why: String) {
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
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

impl Drop for Control {
    fn drop(&mut self) {
        let _ = nix::unistd::write(&self.stop, &1u64.to_ne_bytes());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if self.settings.role == Role::Server {
            let _ = std::fs::remove_file(&self.settings.socket);
        }
    }
}

/// An open interface: hands out each queue's receiving and sending port once.
pub struct Interface {
    control: Arc<Control>,
    rx_taken: Vec<bool>,
    tx_taken: Vec<bool>,
}

impl Interface {
    /// Opens the interface: a server listens on its socket file now (one that exists is
    /// refused: it may be a live peer's; `sfclab cleanup` removes stale ones), a client
    /// starts connecting and keeps trying until a server takes it.
    pub fn open(settings: &MemifSettings) -> Result<Interface, String> {
        let s = settings.clone();
        let name = || format!("memif {} ({})", s.socket.display(), s.role);
        if s.config.queue_pairs == 0 {
            return Err(format!("{}: queue_pairs must be at least 1", name()));
        }
        let stop = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
            .map(OwnedFd::from)
            .map_err(|e| format!("{}: {e}", name()))?;
        let stop_here = stop.try_clone().map_err(|e| format!("{}: {e}", name()))?;
        let shared = Arc::new(Shared {
            epoch: AtomicU64::new(0),
            current: Mutex::new(None),
            last_error: Mutex::new(None),
            connects: AtomicU64::new(0),
        });
        let listener = match s.role {
            Role::Server => {
                if s.socket.exists() {
                    // A socket file no one listens on is left over (a killed NF being
                    // restarted): it goes. One someone listens on is theirs.
                    match Channel::connect(&s.socket) {
                        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
                            let _ = std::fs::remove_file(&s.socket);
                        }
                        _ => {
                            return Err(format!(
                                "{}: the socket file exists and is not a stale socket (another interface's, or some other file)",
                                name()
                            ));
                        }
                    }
                }
                Some(Listener::bind(&s.socket).map_err(|e| format!("{}: {e}", name()))?)
            }
            Role::Client => None,
        };
        let (thread_shared, config, socket) = (shared.clone(), s.config.clone(), s.socket.clone());
        let thread = std::thread::Builder::new()
            .name("memif-control".into())
            .spawn(move || match listener {
                Some(l) => serve_loop(&l, &config, &thread_shared, &stop),
                None => connect_loop(&socket, &config, &thread_shared, &stop),
            })
            .map_err(|e| format!("{}: {e}", name()))?;
        let pairs = usize::from(s.config.queue_pairs);
        Ok(Interface {
            control: Arc::new(Control {
                shared,
                settings: s,
                stop: stop_here,
                thread: Some(thread),
            }),
            rx_taken: vec![false; pairs],
            tx_taken: vec![false; pairs],
        })
    }

    pub fn settings(&self) -> &MemifSettings {
        &self.control.settings
    }

    /// Whether a peer is connected now.
    pub fn connected(&self) -> bool {
        self.control.shared.current().1.is_some()
    }

    /// Waits until a peer is connected, at most `limit`; the error says what the last
    /// attempt met.
    pub fn wait_connected(&self, limit: Duration) -> Result<(), String> {
        let started = Instant::now();
        while !self.connected() {
            if started.elapsed() >= limit {
                let why = self
                    .control
                    .shared
                    .last_error
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                let s = &self.control.settings;
                return Err(format!(
                    "memif {} ({}): no peer connected within {} s{}",
                    s.socket.display(),
                    s.role,
                    limit.as_secs(),
                    why.map_or(String::new(), |w| format!("; last attempt: {w}"))
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    /// Queue `queue`'s port: it receives on the queue's ring if `receive`, sends on the
    /// other if `send`. Each direction of a queue is handed out once (two consumers of
    /// one ring would break the protocol).
    pub fn port(&mut self, queue: u16, receive: bool, send: bool) -> Result<MemifPort, String> {
        let q = usize::from(queue);
        let s = &self.control.settings;
        if q >= self.rx_taken.len() {
            return Err(format!(
                "memif {}: queue {queue} of {} queue pair(s)",
                s.socket.display(),
                self.rx_taken.len()
            ));
        }
        if (receive && self.rx_taken[q]) || (send && self.tx_taken[q]) {
            return Err(format!(
                "memif {}: queue {queue} is taken by another port",
                s.socket.display()
            ));
        }
        self.rx_taken[q] |= receive;
        self.tx_taken[q] |= send;
        Ok(MemifPort::new(self.control.clone(), queue, receive, send))
    }
}

/// Waits on `fds` and the stop eventfd at most `limit`; which of `fds` are ready, or
/// None when stopped.
fn wait_for(fds: &[std::os::fd::BorrowedFd<'_>], stop: &OwnedFd, limit: Option<Duration>) -> Option<Vec<bool>> {
    let mut polled: Vec<PollFd> = fds.iter().map(|f| PollFd::new(*f, PollFlags::POLLIN)).collect();
    polled.push(PollFd::new(stop.as_fd(), PollFlags::POLLIN));
    let timeout = limit.map_or(PollTimeout::NONE, |d| {
        PollTimeout::from(d.as_millis().min(60_000) as u16)
    });
    match poll(&mut polled, timeout) {
        Ok(_) | Err(nix::errno::Errno::EINTR) => {}
        Err(_) => return Some(vec![false; fds.len()]),
    }
    let ready = |p: &PollFd| p.revents().is_some_and(|r| !r.is_empty());
    if ready(&polled[fds.len()]) {
        return None;
    }
    Some(polled[..fds.len()].iter().map(ready).collect())
}

/// Serves one connected peer until it leaves (true) or the interface stops (false);
/// another client arriving meanwhile is told the interface is taken.
fn keep(channel: &Channel, listener: Option<&Listener>, stop: &OwnedFd) -> bool {
    loop {
        let mut fds = vec![channel.as_fd()];
        fds.extend(listener.map(|l| l.as_fd()));
        let Some(ready) = wait_for(&fds, stop, None) else {
            let _ = channel.send(
                &Msg::Disconnect {
                    code: 0,
                    reason: "sfclab closed the interface".into(),
                },
                None,
            );
            return false;
        };
        if ready.get(1).copied().unwrap_or(false)
            && let Some(l) = listener
            && let Ok(other) = l.accept()
        {
            let _ = other.send(
                &Msg::Disconnect {
                    code: 0,
                    reason: "interface already connected".into(),
                },
                None,
            );
        }
        if ready[0] {
            match channel.recv() {
                Ok((Msg::Disconnect { .. }, _)) | Err(_) => return true,
                Ok(_) => {}
            }
        }
    }
}

fn serve_loop(listener: &Listener, config: &Config, shared: &Shared, stop: &OwnedFd) {
    loop {
        let Some(_) = wait_for(&[listener.as_fd()], stop, None) else {
            return;
        };
        let Ok(channel) = listener.accept() else { continue };
        match serve(&channel, config) {
            Ok(c) => {
                shared.publish(Some(c));
                let stopped = !keep(&channel, Some(listener), stop);
                shared.publish(None);
                if stopped {
                    return;
                }
            }
            Err(e) => shared.failed(e.to_string()),
        }
    }
}

fn connect_loop(socket: &Path, config: &Config, shared: &Shared, stop: &OwnedFd) {
    let retry = Duration::from_millis(20);
    loop {
        match Channel::connect(socket) {
            Ok(channel) => match join(&channel, config) {
                Ok(c) => {
                    shared.publish(Some(c));
                    let stopped = !keep(&channel, None, stop);
                    shared.publish(None);
                    if stopped {
                        return;
                    }
                }
                Err(e @ (HandshakeError::Refused(_) | HandshakeError::Failed(_))) => shared.failed(e.to_string()),
            },
            Err(e) => shared.failed(e.to_string()),
        }
        if wait_for(&[], stop, Some(retry)).is_none() {
            return;
        }
    }
}
