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
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::eventfd::{EfdFlags, EventFd};

use super::connection::{Config, HandshakeError, Role, join, serve};
use super::control::{Channel, Listener};
use super::msg::Msg;
use super::port::MemifPort;
use super::settings::MemifSettings;
use super::shared::{Control, Shared};

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
        let shared = Arc::new(Shared::new());
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
                let listener = Listener::bind(&s.socket).map_err(|e| format!("{}: {e}", name()))?;
                super::shared::listening(&s.socket);
                Some(listener)
            }
            Role::Client => None,
        };
        let (thread_shared, config, socket, zero_copy) =
            (shared.clone(), s.config.clone(), s.socket.clone(), s.zero_copy);
        let thread = std::thread::Builder::new()
            .name("memif-control".into())
            .spawn(move || match listener {
                Some(l) => serve_loop(&l, &config, &thread_shared, &stop),
                None => connect_loop(&socket, &config, zero_copy, &thread_shared, &stop),
            })
            .map_err(|e| format!("{}: {e}", name()))?;
        let pairs = usize::from(s.config.queue_pairs);
        Ok(Interface {
            control: Arc::new(Control::new(shared, s, stop_here, thread)),
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
        self.control.wait_connected(limit)
    }

    /// As [`Interface::wait_connected`], ending early once `stop` is set: whether a
    /// peer connected.
    pub fn wait_connected_unless(&self, limit: Duration, stop: &std::sync::atomic::AtomicBool) -> Result<bool, String> {
        self.control.wait_connected_unless(limit, stop)
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

/// Connects, and again whenever the server goes. A zero-copy client first waits for its
/// port to attach the packet pool (the run's, made in shared memory): the pool is the
/// connection's second region.
fn connect_loop(socket: &Path, config: &Config, zero_copy: bool, shared: &Shared, stop: &OwnedFd) {
    let retry = Duration::from_millis(20);
    loop {
        let pool = shared.pool();
        if zero_copy && pool.is_none() {
            shared.failed(
                "zero-copy: no packet pool in shared memory attached yet (a runtime that passes frames by reference makes its pool so and attaches it before traffic: the compound runtime does)".into(),
            );
            if wait_for(&[], stop, Some(retry)).is_none() {
                return;
            }
            continue;
        }
        match Channel::connect(socket) {
            Ok(channel) => match join(&channel, config, pool) {
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
