//! What an interface is asked to be: its socket file and role, the handshake's
//! settings, and how its receivers wait; read from a command line's endpoint
//! (`memif:PATH[,key=value...]`).

use std::path::PathBuf;
use std::time::Duration;

use super::connection::{Config, Role};

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

impl Wait {
    /// The keys of a `memif:` endpoint that ask for this wait (`,wait=interrupt,spin=US`;
    /// nothing for polling, the default).
    pub fn endpoint_keys(&self) -> String {
        match self {
            Wait::Interrupt { spin } => format!(",wait=interrupt,spin={}", spin.as_micros()),
            Wait::Poll => String::new(),
        }
    }
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
    /// A client that passes frames by reference (DPDK's `zero-copy=yes`): its packet
    /// pool is a region of the shared memory, so a frame received is used where the
    /// server wrote it and a frame sent is a descriptor of its buffer. The server's
    /// side still copies (the buffers are not its own).
    pub zero_copy: bool,
}

impl MemifSettings {
    pub fn new(socket: impl Into<PathBuf>, role: Role) -> MemifSettings {
        MemifSettings {
            socket: socket.into(),
            role,
            config: Config::default(),
            wait: Wait::Poll,
            zero_copy: false,
        }
    }
}

/// Where an endpoint named on the command line is a memif interface:
/// `memif:PATH[,role=server|client][,id=N][,secret=S][,ring=N][,buffer=N][,wait=polling|interrupt][,spin=N][,zero-copy=yes|no]`
/// (`ring`: descriptors per ring, a power of two; `buffer`: bytes; `spin`: microseconds
/// an interrupt-mode receiver polls before it sleeps; `zero-copy`: a client's frames
/// passed by reference, [`MemifSettings::zero_copy`]).
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
                "zero-copy" => {
                    s.zero_copy = match value {
                        "yes" | "true" => true,
                        "no" | "false" => false,
                        _ => return Err(bad("is not yes or no")),
                    }
                }
                _ => {
                    return Err(format!(
                        "`{spec}`: unknown key `{key}`: memif takes role, id, secret, ring, buffer, wait, spin and zero-copy"
                    ));
                }
            }
        }
        if s.zero_copy && s.role == Role::Server {
            return Err(format!(
                "`{spec}`: zero-copy is a client's: the client owns the shared memory, and a server copies into and out of it (write role=client)"
            ));
        }
        if interrupt {
            s.wait = Wait::Interrupt { spin };
        }
        Ok(s)
    }
}
