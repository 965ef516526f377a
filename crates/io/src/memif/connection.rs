//! The handshake, both roles, and what it leaves: a [`Connection`] of mapped regions
//! and rings, each ring with the eventfd its receiver may sleep on.
//!
//! The client owns the memory: one region holding its rings (client-to-server first,
//! then server-to-client, as DPDK lays them out) and then one buffer per descriptor,
//! each descriptor pointing at its own buffer for good. The server maps what the client
//! sends and checks every ring's cookie before it says CONNECTED.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use nix::sys::eventfd::{EfdFlags, EventFd};
use sfclab_core::SharedSpan;

use super::control::Channel;
use super::layout::{COOKIE, Desc, MAX_LOG2_RING_SIZE, VERSION, ring_bytes};
use super::msg::{Mode, Msg};
use super::region::Region;
use super::ring::Ring;

/// Which end of the connection this side is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Listens on the socket file and maps the client's memory ("master").
    Server,
    /// Connects and owns the shared memory ("slave").
    Client,
}

impl std::fmt::Display for Role {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Role::Server => "server",
            Role::Client => "client",
        })
    }
}

/// What this side asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// The interface's id on its socket (both sides must name the same).
    pub id: u32,
    /// Both sides must give the same, or none.
    pub secret: String,
    /// This side's name, as the peer logs it.
    pub name: String,
    /// Queue pairs (a ring each way per pair); the client asks, the server allows.
    pub queue_pairs: u16,
    /// Descriptors per ring, log2 (the client's choice, capped by the server's).
    pub log2_ring_size: u8,
    /// Bytes per buffer of the client's memory.
    pub buffer_size: u32,
}

impl Config {
    /// Descriptors per ring this side asks for.
    pub fn ring_frames(&self) -> u32 {
        1 << self.log2_ring_size
    }
}

impl Default for Config {
    fn default() -> Config {
        Config {
            id: 0,
            secret: String::new(),
            name: "sfclab".into(),
            queue_pairs: 1,
            log2_ring_size: 10,
            buffer_size: 2048,
        }
    }
}

/// One ring of a connection, with the eventfd that wakes its receiver.
pub struct Queue {
    pub ring: Ring,
    pub interrupt: OwnedFd,
    /// Where the buffer of the ring's first descriptor lies, and each buffer's size:
    /// known on the client, which laid them out; the server reads descriptors instead.
    pub buffers: Option<(usize, u32)>,
}

impl Queue {
    /// Where slot `slot`'s own buffer lies and its size, on the client (which laid the
    /// buffers out, one per descriptor, and trusts no offset the peer writes); `None`
    /// on the server, which reads each descriptor instead.
    #[inline(always)]
    pub fn own_buffer(&self, slot: u16) -> Option<(usize, u32)> {
        self.buffers
            .map(|(first, size)| (first + usize::from(slot & self.ring.mask()) * size as usize, size))
    }
}

/// An established connection.
pub struct Connection {
    pub role: Role,
    /// The peer's name (from HELLO or INIT).
    pub peer: String,
    /// Rings this side receives on, by queue.
    pub rx: Vec<Queue>,
    /// Rings this side sends on, by queue.
    pub tx: Vec<Queue>,
    /// Every region, by index (a zero-copy client's pool is not among them: its
    /// frames are read and written as the pool's packets, never through a region).
    pub regions: Vec<Arc<Region>>,
    /// A zero-copy client's packet pool: the region index its peer knows it by.
    pub pool: Option<PoolRegion>,
}

/// A zero-copy client's packet pool as its connection knows it.
#[derive(Debug, Clone, Copy)]
pub struct PoolRegion {
    /// The region index descriptors name it by.
    pub index: u16,
    pub span: SharedSpan,
}

/// Why a handshake did not end in a connection.
#[derive(Debug)]
pub enum HandshakeError {
    /// The peer said no, with its reason (a client tries again: a server answers "ID not
    /// found" until its port has started).
    Refused(String),
    /// The peer broke the protocol, or the socket failed; the reason in words.
    Failed(String),
}

impl std::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandshakeError::Refused(r) => write!(f, "the peer refused the connection: {r}"),
            HandshakeError::Failed(r) => f.write_str(r),
        }
    }
}

/// How long one step of a handshake may take.
const STEP_LIMIT: Duration = Duration::from_secs(5);

fn failed(what: &str) -> impl Fn(std::io::Error) -> HandshakeError + '_ {
    move |e| HandshakeError::Failed(format!("{what}: {e}"))
}

/// The server's half: HELLO, then the client's INIT, regions and rings, then CONNECTED.
/// A client this server cannot take is told why (DISCONNECT) before the error returns.
pub fn serve(channel: &Channel, config: &Config) -> Result<Connection, HandshakeError> {
    channel
        .set_timeout(Some(STEP_LIMIT))
        .map_err(failed("memif control socket"))?;
    let result = serve_steps(channel, config);
    if let Err(HandshakeError::Failed(reason)) = &result {
        let mut reason = reason.clone();
        reason.truncate(super::msg::REASON_SIZE - 1);
        let _ = channel.send(&Msg::Disconnect { code: 0, reason }, None);
    }
    let _ = channel.set_timeout(None);
    result
}

fn serve_steps(channel: &Channel, config: &Config) -> Result<Connection, HandshakeError> {
    let max_rings = config.queue_pairs.max(1) - 1;
    channel
        .send(
            &Msg::Hello {
                name: config.name.clone(),
                min_version: VERSION,
                max_version: VERSION,
                max_region: 255,
                max_s2c_rings: max_rings,
                max_c2s_rings: max_rings,
                max_log2_ring_size: MAX_LOG2_RING_SIZE,
            },
            None,
        )
        .map_err(failed("sending HELLO"))?;
    let (init, _) = channel.recv().map_err(failed("waiting for INIT"))?;
    let name = accepted_init(init, config)?;
    channel.send(&Msg::Ack, None).map_err(failed("sending ACK"))?;
    let mut regions: Vec<Arc<Region>> = Vec::new();
    let (mut c2s, mut s2c): (Vec<Queue>, Vec<Queue>) = (Vec::new(), Vec::new());
    loop {
        let (msg, fd) = channel.recv().map_err(failed("during the handshake"))?;
        match msg {
            Msg::AddRegion { index, size } => {
                if usize::from(index) != regions.len() || index > 255 {
                    return Err(HandshakeError::Failed(format!(
                        "region {index} added out of order (expected {})",
                        regions.len()
                    )));
                }
                let fd = fd.ok_or_else(|| HandshakeError::Failed("ADD_REGION without its memory".into()))?;
                let region = Region::map_received(fd, size).map_err(failed("mapping the region"))?;
                regions.push(Arc::new(region));
            }
            Msg::AddRing {
                c2s: to_server,
                index,
                region,
                offset,
                log2_ring_size,
                private_hdr_size,
            } => {
                let interrupt = fd.ok_or_else(|| HandshakeError::Failed("ADD_RING without its eventfd".into()))?;
                let list = if to_server { &mut c2s } else { &mut s2c };
                if usize::from(index) != list.len() || index > max_rings {
                    return Err(HandshakeError::Failed(format!(
                        "ring {index} out of order or beyond {} queue pair(s)",
                        config.queue_pairs
                    )));
                }
                if private_hdr_size != 0 {
                    return Err(HandshakeError::Failed("private headers are not supported".into()));
                }
                list.push(Queue {
                    ring: added_ring(&regions, region, offset, log2_ring_size)?,
                    interrupt,
                    buffers: None,
                });
            }
            Msg::Connect { if_name } => {
                if c2s.is_empty() || s2c.is_empty() {
                    return Err(HandshakeError::Failed("CONNECT without a ring each way".into()));
                }
                channel
                    .send(
                        &Msg::Connected {
                            if_name: config.name.clone(),
                        },
                        None,
                    )
                    .map_err(failed("sending CONNECTED"))?;
                let peer = if if_name.is_empty() { name } else { if_name };
                return Ok(Connection {
                    role: Role::Server,
                    peer,
                    rx: c2s,
                    tx: s2c,
                    regions,
                    pool: None,
                });
            }
            other => {
                return Err(HandshakeError::Failed(format!(
                    "unexpected {other:?} during the handshake"
                )));
            }
        }
        channel.send(&Msg::Ack, None).map_err(failed("sending ACK"))?;
    }
}

/// The client's INIT, if this server takes it: its name.
fn accepted_init(init: Msg, config: &Config) -> Result<String, HandshakeError> {
    let Msg::Init {
        version,
        id,
        mode,
        secret,
        name,
    } = init
    else {
        return Err(HandshakeError::Failed(format!("expected INIT, got {init:?}")));
    };
    if version != VERSION {
        return Err(HandshakeError::Failed(format!(
            "unsupported version {}.{}",
            version >> 8,
            version & 0xff
        )));
    }
    if id != config.id {
        return Err(HandshakeError::Failed(format!(
            "ID not found: {id} (this is {})",
            config.id
        )));
    }
    if secret != config.secret {
        return Err(HandshakeError::Failed("incorrect secret".into()));
    }
    if mode != Mode::Ethernet {
        return Err(HandshakeError::Failed(format!(
            "mode {mode:?} not supported: ethernet only"
        )));
    }
    Ok(name)
}

/// The ring a client added at `offset` of its region `region`, if that region was
/// added and the ring carries memif's cookie.
fn added_ring(regions: &[Arc<Region>], region: u16, offset: u32, log2_ring_size: u8) -> Result<Ring, HandshakeError> {
    let memory = regions
        .get(usize::from(region))
        .ok_or_else(|| HandshakeError::Failed(format!("a ring in region {region}, never added")))?;
    let ring = Ring::new(memory.clone(), offset as usize, log2_ring_size).map_err(HandshakeError::Failed)?;
    if ring.cookie() != COOKIE {
        return Err(HandshakeError::Failed(format!(
            "wrong ring cookie {:#x} at offset {offset}",
            ring.cookie()
        )));
    }
    Ok(ring)
}

/// The client's half: the server's HELLO, INIT, the memory and its rings, CONNECT.
/// With `pool` (a zero-copy client's packet pool in shared memory), the pool is the
/// second region.
pub fn join(
    channel: &Channel,
    config: &Config,
    pool: Option<(OwnedFd, SharedSpan)>,
) -> Result<Connection, HandshakeError> {
    channel
        .set_timeout(Some(STEP_LIMIT))
        .map_err(failed("memif control socket"))?;
    let result = join_steps(channel, config, pool);
    let _ = channel.set_timeout(None);
    result
}

/// The client's shared memory: one region of `rings` rings of 2^`log2` slots, then
/// their buffers, every slot's descriptor pointing at its buffer, and an eventfd per ring.
fn client_memory(config: &Config, rings: usize, log2: u8) -> Result<(Arc<Region>, Vec<Queue>), HandshakeError> {
    let per_ring = ring_bytes(log2);
    let buffers_at = rings * per_ring;
    let slots = 1usize << log2;
    let size = buffers_at + rings * slots * config.buffer_size as usize;
    if u32::try_from(size).is_err() || config.buffer_size == 0 {
        return Err(HandshakeError::Failed(format!(
            "{rings} rings of 2^{log2} buffers of {} bytes: descriptors address 4 GiB at most",
            config.buffer_size
        )));
    }
    let region = Arc::new(
        Region::create(&format!("sfclab-memif-{}", config.id), size).map_err(failed("creating shared memory"))?,
    );
    let mut queues = Vec::with_capacity(rings);
    for r in 0..rings {
        let ring = Ring::new(region.clone(), r * per_ring, log2).map_err(HandshakeError::Failed)?;
        ring.init(COOKIE);
        let first = buffers_at + r * slots * config.buffer_size as usize;
        for s in 0..slots {
            ring.set_desc(
                s as u16,
                Desc {
                    flags: 0,
                    region: 0,
                    length: config.buffer_size,
                    offset: (first + s * config.buffer_size as usize) as u32,
                    metadata: 0,
                },
            );
        }
        let interrupt = EventFd::from_value_and_flags(0, EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)
            .map(OwnedFd::from)
            .map_err(|e| HandshakeError::Failed(format!("eventfd: {e}")))?;
        queues.push(Queue {
            ring,
            interrupt,
            buffers: Some((first, config.buffer_size)),
        });
    }
    Ok((region, queues))
}

fn join_steps(
    channel: &Channel,
    config: &Config,
    pool: Option<(OwnedFd, SharedSpan)>,
) -> Result<Connection, HandshakeError> {
    let (hello, _) = channel.recv().map_err(failed("waiting for HELLO"))?;
    let Msg::Hello {
        name: server,
        min_version,
        max_version,
        max_s2c_rings,
        max_c2s_rings,
        max_log2_ring_size,
        ..
    } = hello
    else {
        return Err(HandshakeError::Failed(format!("expected HELLO, got {hello:?}")));
    };
    if !(min_version..=max_version).contains(&VERSION) {
        return Err(HandshakeError::Failed(format!(
            "the server speaks memif {min_version:#06x} to {max_version:#06x}, sfclab {VERSION:#06x}"
        )));
    }
    // The server's maxima are the highest ring index it takes.
    let c2s_rings = config.queue_pairs.max(1).min(max_c2s_rings.saturating_add(1));
    let s2c_rings = config.queue_pairs.max(1).min(max_s2c_rings.saturating_add(1));
    let log2 = config.log2_ring_size.min(max_log2_ring_size).min(MAX_LOG2_RING_SIZE);
    channel
        .send(
            &Msg::Init {
                version: VERSION,
                id: config.id,
                mode: Mode::Ethernet,
                secret: config.secret.clone(),
                name: config.name.clone(),
            },
            None,
        )
        .map_err(failed("sending INIT"))?;
    let expect_ack = |what: &str| -> Result<(), HandshakeError> {
        match channel.recv().map_err(failed(what))?.0 {
            Msg::Ack => Ok(()),
            Msg::Disconnect { reason, .. } => Err(HandshakeError::Refused(reason)),
            other => Err(HandshakeError::Failed(format!(
                "expected ACK after {what}, got {other:?}"
            ))),
        }
    };
    expect_ack("INIT")?;

    let rings = usize::from(c2s_rings) + usize::from(s2c_rings);
    let (region, mut queues) = client_memory(config, rings, log2)?;
    let size = region.len();
    channel
        .send(
            &Msg::AddRegion {
                index: 0,
                size: size as u64,
            },
            Some(region.as_fd()),
        )
        .map_err(failed("sending ADD_REGION"))?;
    expect_ack("ADD_REGION")?;
    let pool = match pool {
        Some((fd, span)) => {
            if u32::try_from(span.len()).is_err() {
                return Err(HandshakeError::Failed(format!(
                    "a packet pool of {} bytes: descriptors address 4 GiB at most",
                    span.len()
                )));
            }
            channel
                .send(
                    &Msg::AddRegion {
                        index: 1,
                        size: span.len() as u64,
                    },
                    Some(fd.as_fd()),
                )
                .map_err(failed("sending the packet pool's ADD_REGION"))?;
            expect_ack("the packet pool's ADD_REGION")?;
            Some(PoolRegion { index: 1, span })
        }
        None => None,
    };
    for (r, q) in queues.iter().enumerate() {
        let c2s = r < usize::from(c2s_rings);
        let index = if c2s { r } else { r - usize::from(c2s_rings) };
        channel
            .send(
                &Msg::AddRing {
                    c2s,
                    index: index as u16,
                    region: 0,
                    offset: q.ring.offset() as u32,
                    log2_ring_size: log2,
                    private_hdr_size: 0,
                },
                Some(q.interrupt.as_fd()),
            )
            .map_err(failed("sending ADD_RING"))?;
        expect_ack("ADD_RING")?;
    }
    channel
        .send(
            &Msg::Connect {
                if_name: config.name.clone(),
            },
            None,
        )
        .map_err(failed("sending CONNECT"))?;
    match channel.recv().map_err(failed("waiting for CONNECTED"))?.0 {
        Msg::Connected { if_name } => {
            let peer = if if_name.is_empty() { server } else { if_name };
            let rx = queues.split_off(usize::from(c2s_rings));
            Ok(Connection {
                role: Role::Client,
                peer,
                rx,
                tx: queues,
                regions: vec![region],
                pool,
            })
        }
        Msg::Disconnect { reason, .. } => Err(HandshakeError::Refused(reason)),
        other => Err(HandshakeError::Failed(format!("expected CONNECTED, got {other:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both(
        server: Config,
        client: Config,
    ) -> (Result<Connection, HandshakeError>, Result<Connection, HandshakeError>) {
        let (a, b) = Channel::pair().unwrap();
        let t = std::thread::spawn(move || serve(&a, &server));
        let c = join(&b, &client, None);
        (t.join().unwrap(), c)
    }

    #[test]
    fn server_and_client_agree_on_rings_and_see_one_memory() {
        let (s, c) = both(
            Config {
                queue_pairs: 2,
                name: "srv".into(),
                ..Config::default()
            },
            Config {
                queue_pairs: 4,
                log2_ring_size: 8,
                ..Config::default()
            },
        );
        let (s, c) = (s.unwrap(), c.unwrap());
        assert_eq!((s.peer.as_str(), c.peer.as_str()), ("sfclab", "srv"));
        assert_eq!(
            (s.rx.len(), s.tx.len(), c.rx.len(), c.tx.len()),
            (2, 2, 2, 2),
            "the server allows 2"
        );
        assert!(s.rx.iter().chain(&s.tx).all(|q| q.ring.size() == 256));
        // The client's first send ring is the server's first receive ring.
        c.tx[0].ring.head().store(7, std::sync::atomic::Ordering::Release);
        assert_eq!(s.rx[0].ring.head().load(std::sync::atomic::Ordering::Acquire), 7);
        assert_eq!(s.rx[0].ring.desc(0), c.tx[0].ring.desc(0));
    }

    #[test]
    fn a_wrong_id_or_secret_is_refused_with_the_reason() {
        let (s, c) = both(
            Config {
                id: 3,
                ..Config::default()
            },
            Config::default(),
        );
        assert!(s.err().unwrap().to_string().contains("ID not found: 0 (this is 3)"));
        assert!(matches!(c.err().unwrap(), HandshakeError::Refused(r) if r.contains("ID not found")));
        let (s, c) = both(
            Config {
                secret: "a".into(),
                ..Config::default()
            },
            Config::default(),
        );
        assert!(s.is_err());
        assert_eq!(
            c.err().unwrap().to_string(),
            "the peer refused the connection: incorrect secret"
        );
    }
}
