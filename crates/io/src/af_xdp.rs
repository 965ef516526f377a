//! AF_XDP ports: one socket on one queue of an interface, its UMEM split into frames
//! the kernel receives into (kept on the fill ring) and frames we send from.
//!
//! Receiving: an XDP program redirects the queue's frames to the socket; `rx` takes up to
//! a batch of descriptors from the RX ring, copies each frame into a pool buffer and
//! gives its UMEM frame straight back on the fill ring. Sending: `tx` copies each packet
//! into a free UMEM frame, queues the batch on the TX ring, kicks the kernel once per 32
//! frames when it asks for it (`need_wakeup`), and takes finished frames back from the
//! completion ring. No allocation, lock or system call per packet.
//!
//! The copy into the pool is deliberate: the pool's buffers (2112 bytes, metadata first)
//! are not UMEM-shaped, and a 64-byte copy costs a few nanoseconds against the kernel's
//! ~hundreds per frame on veth, where zero-copy does not exist anyway. What the kernel
//! does is reported, never assumed: the XDP mode (native or generic) and the bind
//! (zero-copy or copy) are in every result, and a mode asked for and not available is an
//! error, not a silent fallback.
//!
//! A socket must be opened on a thread inside the interface's namespace
//! (`sfclab_topology::Namespace::run`); it can be used from any thread after.

use crate::bpf::{XdpLink, XdpMode, XdpProgram, XskMap};
use crate::window::Window;
use memmap2::MmapMut;
use sfclab_core::packet::DATA_ROOM;
use sfclab_core::port::{PortInfo, PortStats};
use sfclab_core::{Batch, MAX_BATCH, NfCounter, PacketMeta, PacketPool, Recycle, RxPort, TxPort};
use std::collections::BTreeMap;
use std::ffi::CString;
use std::io;
use std::num::NonZeroU32;
use std::ptr::NonNull;
use xdpilone::xdp::XdpDesc;
use xdpilone::{DeviceQueue, IfInfo, RingRx, RingTx, Socket, SocketConfig, Umem, UmemConfig};

/// Bytes per UMEM frame: the smallest the kernel takes in aligned mode; holds a 1518-byte
/// frame after the kernel's 256 bytes of XDP headroom.
const FRAME_SIZE: u32 = 2048;

/// The kernel sends at most this many frames per wake-up in copy mode (`TX_BATCH_SIZE`),
/// unless the socket raised it (`XDP_MAX_TX_SKB_BUDGET`, Linux 6.17).
const KERNEL_TX_BATCH: u32 = 32;
const SOL_XDP: libc::c_int = 283;
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;

/// Asks the kernel to send up to `budget` frames per wake-up in copy mode; the budget in
/// force (32 on kernels without the option).
/// Turns busy polling on for socket `fd`: `SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL` (`usecs`)
/// and `SO_BUSY_POLL_BUDGET` (packets per poll). Errors name the option the kernel refused.
fn set_busy_poll(fd: libc::c_int, usecs: u32) -> io::Result<()> {
    const SO_PREFER_BUSY_POLL: libc::c_int = 69;
    const SO_BUSY_POLL_BUDGET: libc::c_int = 70;
    for (name, option, value) in [
        ("SO_PREFER_BUSY_POLL", SO_PREFER_BUSY_POLL, 1u32),
        ("SO_BUSY_POLL", libc::SO_BUSY_POLL, usecs),
        ("SO_BUSY_POLL_BUDGET", SO_BUSY_POLL_BUDGET, MAX_BATCH as u32),
    ] {
        // SAFETY: a setsockopt on our own socket with a pointer to a live u32 and its size.
        let r = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                option,
                (&value as *const u32).cast(),
                std::mem::size_of::<u32>() as libc::socklen_t,
            )
        };
        if r != 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("busy polling: {name}: {e}")));
        }
    }
    Ok(())
}

fn raise_tx_budget(fd: libc::c_int, budget: u32) -> u32 {
    // SAFETY: a setsockopt on our own socket with a pointer to a live u32 and its size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            SOL_XDP,
            XDP_MAX_TX_SKB_BUDGET,
            (&budget as *const u32).cast(),
            std::mem::size_of::<u32>() as libc::socklen_t,
        )
    };
    if r == 0 { budget } else { KERNEL_TX_BATCH }
}

/// How the socket is bound to the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Bind {
    /// The driver DMAs into the UMEM: no copy in the kernel.
    ZeroCopy,
    /// The kernel copies between its buffers and the UMEM (veth, generic mode).
    Copy,
}

impl Bind {
    pub fn name(self) -> &'static str {
        match self {
            Bind::ZeroCopy => "zero-copy",
            Bind::Copy => "copy",
        }
    }
}

/// Settings of one AF_XDP port (chain-file `ports:` keys of the same names).
#[derive(Debug, Clone, PartialEq)]
pub struct AfXdpSettings {
    pub queue: u32,
    /// UMEM frames of 2048 bytes: half for receiving, half for sending.
    pub frames: u32,
    /// Entries of each ring (RX, TX, fill, completion); a power of two.
    pub ring: u32,
    /// `None`: native if the driver has it, else generic (reported either way).
    pub xdp_mode: Option<XdpMode>,
    /// `None`: zero-copy if the driver has it, else copy (reported either way).
    pub bind: Option<Bind>,
    /// Attach the redirect program and receive; false for a port that only sends.
    pub receive: bool,
    /// Busy polling (`SO_PREFER_BUSY_POLL`, `SO_BUSY_POLL` of this many microseconds,
    /// `SO_BUSY_POLL_BUDGET` of a batch): an empty receive ring makes the port enter the
    /// kernel so that the interface's NAPI runs in this thread, on this core, instead of
    /// in the softirq of whichever core scheduled it. `None`: off.
    pub busy_poll: Option<u32>,
    /// How a receiving port waits: polling its ring without rest (the default), or,
    /// after `spin` with nothing received, sleeping in poll(2) on the socket until a
    /// frame arrives, so that processes sharing a core leave it to each other.
    pub wait: crate::Wait,
}

impl Default for AfXdpSettings {
    fn default() -> AfXdpSettings {
        AfXdpSettings {
            queue: 0,
            frames: 8192,
            ring: 2048,
            xdp_mode: None,
            bind: None,
            receive: true,
            busy_poll: None,
            wait: crate::Wait::Poll,
        }
    }
}

/// Where a receiving socket's redirect program comes from.
enum Program<'a> {
    /// Its own, attached to the interface, with an XSKMAP of this many queues.
    Own { map_entries: u32 },
    /// Another socket's on the same interface (one program per interface): the socket
    /// takes its queue's slot in that program's map.
    Join(&'a std::sync::Arc<(XdpLink, XskMap)>),
}

/// Owns the UMEM mapping. After set-up nothing takes a Rust reference to the whole area
/// (the kernel writes frames on the fill ring while we read others): frames are reached
/// through raw pointers, one frame at a time, while we own them.
struct UmemArea {
    map: MmapMut,
}

impl UmemArea {
    fn base(&mut self) -> NonNull<u8> {
        NonNull::new(self.map.as_mut_ptr()).expect("a mapping is never at address 0")
    }

    fn len(&self) -> usize {
        self.map.len()
    }
}

/// An AF_XDP socket on one queue of an interface: an [`RxPort`] and a [`TxPort`].
pub struct AfXdpPort {
    // Rings and the program go before the memory they point into (fields drop in order).
    rx: RingRx,
    tx: RingTx,
    device: DeviceQueue,
    /// Shared by the receiving sockets of one interface's queues ([`AfXdpPort::open_queues`]):
    /// one program per interface, one XSKMAP slot per queue.
    program: Option<std::sync::Arc<(XdpLink, XskMap)>>,
    base: UmemBase,
    umem_len: usize,
    _umem: UmemArea,
    interface: String,
    settings: AfXdpSettings,
    bind: Bind,
    /// UMEM offsets of frames free to send from.
    tx_free: Vec<u64>,
    /// Frames read in this `rx` call, to give back on the fill ring.
    refill: Box<[u64; MAX_BATCH]>,
    /// Frames not yet given back (the fill ring was full: never, as it is sized for all).
    refill_pending: Vec<u64>,
    window: Window,
    rx_stats: PortStats,
    tx_stats: PortStats,
    tx_window: u64,
    rx_oversize: u64,
    rx_bad_desc: u64,
    /// Frames on the RX ring when the run ended, taken and dropped (`discard_unread`).
    rx_unread_at_end: u64,
    rx_pool_empty: u64,
    tx_no_frame: u64,
    tx_ring_full: u64,
    tx_oversize: u64,
    wakeups: u64,
    /// Receive calls that entered the kernel to busy-poll (an empty ring, busy polling on).
    busy_polls: u64,
    /// Sleeps in poll(2) on an idle receive ring (`wait`: interrupt).
    sleeps: u64,
    /// Since when the receive ring has been empty (waiting in interrupt mode).
    idle_since: Option<std::time::Instant>,
    /// Frames the kernel sends per wake-up in copy mode.
    tx_budget: u32,
}

/// How long a busy queue is retried: the kernel's release of a socket closed just before.
const QUEUE_RELEASE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The start of a port's UMEM mapping.
#[derive(Clone, Copy)]
struct UmemBase(NonNull<u8>);

// SAFETY: the pointer is into the UMEM mapping its port owns and moves with it; the port
// reaches it only through `&mut self`, so moving the port to another thread moves the
// only user.
unsafe impl Send for UmemBase {}

impl UmemBase {
    fn as_ptr(self) -> *mut u8 {
        self.0.as_ptr()
    }
}

impl AfXdpPort {
    /// Opens a socket on `interface` (of the calling thread's namespace), binds it, fills
    /// the fill ring and, when receiving, attaches the redirect program. Errors say what
    /// failed and, when the kernel refused, which privilege is missing.
    pub fn open(interface: &str, settings: &AfXdpSettings) -> Result<AfXdpPort, String> {
        Self::open_with(
            interface,
            settings,
            Program::Own {
                map_entries: settings.queue + 1,
            },
        )
    }

    fn open_with(interface: &str, settings: &AfXdpSettings, program: Program<'_>) -> Result<AfXdpPort, String> {
        let s = settings;
        let fail = |what: &str, e: io::Error| format!("AF_XDP on {interface} queue {}: {what}: {e}", s.queue);
        if !s.ring.is_power_of_two() || s.ring < 64 {
            return Err(format!("AF_XDP ring {}: a power of two, at least 64", s.ring));
        }
        if s.frames < 2 * s.ring || s.frames > 1 << 20 {
            return Err(format!(
                "AF_XDP frames {}: at least twice the ring ({}), at most 1048576",
                s.frames,
                2 * s.ring
            ));
        }
        let binds: &[Bind] = match s.bind {
            Some(b) => std::slice::from_ref(match b {
                Bind::ZeroCopy => &Bind::ZeroCopy,
                Bind::Copy => &Bind::Copy,
            }),
            None => &[Bind::ZeroCopy, Bind::Copy],
        };
        // A socket closed just before (a hop's previous run, reopening its ports) gives
        // its queue back in the kernel's deferred work (`xp_release_deferred`, under the
        // RTNL lock), which a loaded machine can run late: a busy queue is retried a
        // while before it is called taken.
        let deadline = std::time::Instant::now() + QUEUE_RELEASE_WAIT;
        loop {
            let mut last = None;
            for &bind in binds {
                match Self::open_bound(interface, s, bind) {
                    Ok(port) => return port.with_program(program).map_err(|(what, e)| fail(what, e)),
                    Err(e) => last = Some((bind, e)),
                }
            }
            let (bind, e) = last.expect("at least one bind is tried");
            if e.raw_os_error() != Some(libc::EBUSY) {
                return Err(fail(&format!("binding ({})", bind.name()), e));
            }
            if std::time::Instant::now() >= deadline {
                return Err(fail(
                    "binding",
                    io::Error::other("the queue already has an AF_XDP socket (one per queue)"),
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    fn open_bound(interface: &str, s: &AfXdpSettings, bind: Bind) -> io::Result<AfXdpPort> {
        let errno = |e: xdpilone::Errno| io::Error::from_raw_os_error(e.get_raw().abs());
        let mut area = UmemArea {
            map: MmapMut::map_anon(s.frames as usize * FRAME_SIZE as usize)?,
        };
        let base = area.base();
        let region = NonNull::slice_from_raw_parts(base, area.len());
        let config = UmemConfig {
            fill_size: s.ring,
            complete_size: s.ring,
            frame_size: FRAME_SIZE,
            headroom: 0,
            flags: 0,
        };
        // SAFETY: `region` is a page-aligned anonymous mapping of exactly its length,
        // owned by the port returned (or dropped with it on error after the socket
        // closed); the kernel pins its pages while the UMEM is registered.
        let umem = unsafe { Umem::new(config, region) }.map_err(errno)?;
        let name = CString::new(interface)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in the interface name"))?;
        let mut info = IfInfo::invalid();
        info.from_name(&name).map_err(|e| {
            let e = errno(e);
            io::Error::new(e.kind(), format!("no interface {interface} in this namespace ({e})"))
        })?;
        info.set_queue(s.queue);
        let socket = Socket::with_shared(&info, &umem).map_err(errno)?;
        let device = umem.fq_cq(&socket).map_err(errno)?;
        let flags = SocketConfig::XDP_BIND_NEED_WAKEUP
            | match bind {
                Bind::ZeroCopy => SocketConfig::XDP_BIND_ZEROCOPY,
                Bind::Copy => SocketConfig::XDP_BIND_COPY,
            };
        let ring = NonZeroU32::new(s.ring);
        let user = umem
            .rx_tx(
                &socket,
                &SocketConfig {
                    rx_size: ring,
                    tx_size: ring,
                    bind_flags: flags,
                },
            )
            .map_err(errno)?;
        let rx = user.map_rx().map_err(errno)?;
        let tx = user.map_tx().map_err(errno)?;
        umem.bind(&user).map_err(errno)?;
        let tx_budget = raise_tx_budget(tx.as_raw_fd(), s.ring);
        if let Some(usecs) = s.busy_poll {
            set_busy_poll(tx.as_raw_fd(), usecs)?;
        }

        let rx_frames = if s.receive { s.frames / 2 } else { 0 };
        let mut port = AfXdpPort {
            rx,
            tx,
            device,
            program: None,
            base: UmemBase(base),
            umem_len: area.len(),
            _umem: area,
            interface: interface.to_string(),
            settings: s.clone(),
            bind,
            tx_free: (rx_frames..s.frames)
                .rev()
                .map(|f| u64::from(f) * u64::from(FRAME_SIZE))
                .collect(),
            refill: Box::new([0; MAX_BATCH]),
            refill_pending: (0..rx_frames).map(|f| u64::from(f) * u64::from(FRAME_SIZE)).collect(),
            window: Window::default(),
            rx_stats: PortStats::default(),
            tx_stats: PortStats::default(),
            tx_window: 0,
            rx_oversize: 0,
            rx_bad_desc: 0,
            rx_unread_at_end: 0,
            rx_pool_empty: 0,
            tx_no_frame: 0,
            tx_ring_full: 0,
            tx_oversize: 0,
            wakeups: 0,
            busy_polls: 0,
            sleeps: 0,
            idle_since: None,
            tx_budget,
        };
        port.give_back_pending();
        Ok(port)
    }

    /// Attaches the redirect program (receiving ports) in the mode asked for, or native
    /// falling back to generic when none was asked.
    fn with_program(mut self, program: Program<'_>) -> Result<AfXdpPort, (&'static str, io::Error)> {
        if !self.settings.receive {
            return Ok(self);
        }
        let map_entries = match program {
            Program::Join(shared) => {
                shared
                    .1
                    .insert(self.settings.queue, self.rx.as_raw_fd())
                    .map_err(|e| ("adding the socket to the XSKMAP", e))?;
                self.program = Some(shared.clone());
                return Ok(self);
            }
            Program::Own { map_entries } => map_entries,
        };
        let ifindex = ifindex(&self.interface).map_err(|e| ("looking the interface up", e))?;
        let map = XskMap::create(map_entries.max(self.settings.queue + 1)).map_err(|e| ("creating the XSKMAP", e))?;
        map.insert(self.settings.queue, self.rx.as_raw_fd())
            .map_err(|e| ("adding the socket to the XSKMAP", e))?;
        let program = XdpProgram::redirect_to(&map).map_err(|e| ("loading the redirect program", e))?;
        let link = match self.settings.xdp_mode {
            Some(mode) => program.attach(ifindex, mode),
            None => program
                .attach(ifindex, XdpMode::Native)
                .or_else(|_| program.attach(ifindex, XdpMode::Generic)),
        }
        .map_err(|e| ("attaching the redirect program", e))?;
        self.program = Some(std::sync::Arc::new((link, map)));
        Ok(self)
    }

    /// Opens one receiving (and sending) port per queue `0..queues` of `interface`, for
    /// replicas that each own a queue: every socket has its own UMEM and rings, and one
    /// redirect program with one XSKMAP serves them all (an interface takes one program).
    /// `settings.queue` is ignored; errors name the queue.
    pub fn open_queues(interface: &str, settings: &AfXdpSettings, queues: u32) -> Result<Vec<AfXdpPort>, String> {
        if queues == 0 {
            return Err(format!("AF_XDP on {interface}: at least one queue"));
        }
        let first = AfXdpSettings {
            queue: 0,
            ..settings.clone()
        };
        // The first queue attaches the program with a map sized for every queue; the
        // others join its map.
        let mut ports = vec![Self::open_with(
            interface,
            &first,
            Program::Own { map_entries: queues },
        )?];
        let shared = ports[0].program.clone();
        for queue in 1..queues {
            let s = AfXdpSettings {
                queue,
                ..settings.clone()
            };
            let program = match &shared {
                Some(shared) => Program::Join(shared),
                None => Program::Own { map_entries: queues },
            };
            ports.push(Self::open_with(interface, &s, program)?);
        }
        Ok(ports)
    }

    /// Where the XDP program runs (`None`: the port only sends).
    pub fn xdp_mode(&self) -> Option<XdpMode> {
        self.program.as_ref().map(|p| p.0.mode())
    }

    pub fn bind(&self) -> Bind {
        self.bind
    }

    /// Nothing arrived: after `spin` of nothing, sleep until the socket has a frame
    /// (at most 1 ms, so that the run's end is seen). Only the idle path calls it.
    #[cold]
    fn sleep_when_idle(&mut self, spin: std::time::Duration) {
        let now = std::time::Instant::now();
        let since = *self.idle_since.get_or_insert(now);
        if now.duration_since(since) < spin {
            return;
        }
        let mut fd = libc::pollfd {
            fd: self.tx.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd, valid for the call, naming our own open socket; poll only
        // reads its fd and events and writes its revents.
        unsafe { libc::poll(&mut fd, 1, 1) };
        self.sleeps += 1;
    }

    /// Gives received frames back to the kernel on the fill ring.
    fn give_back_pending(&mut self) {
        if self.refill_pending.is_empty() {
            return;
        }
        let mut fill = self.device.fill(self.refill_pending.len() as u32);
        let n = fill.insert(self.refill_pending.iter().copied()) as usize;
        fill.commit();
        drop(fill);
        self.refill_pending.drain(..n);
    }

    /// Takes frames the kernel finished sending back into `tx_free`.
    fn reap_completions(&mut self) {
        let mut done = self.device.complete(self.settings.ring);
        while let Some(addr) = done.read() {
            self.tx_free.push(addr & !u64::from(FRAME_SIZE - 1));
        }
        done.release();
    }

    /// Kicks the kernel until the TX ring is empty or it stops making progress (it sends
    /// at most 32 frames per kick in copy mode).
    fn kick(&mut self) {
        let mut left = self.tx.pending();
        let mut tries = left / self.tx_budget + 2;
        while left > 0 && tries > 0 && self.tx.needs_wakeup() {
            self.tx.wake();
            self.wakeups += 1;
            tries -= 1;
            let now = self.tx.pending();
            if now >= left {
                break;
            }
            left = now;
        }
    }

    fn xdp_statistics(&self) -> Option<xdpilone::xdp::XdpStatisticsV2> {
        self.device.statistics_v2().ok()
    }
}

/// The interface's index in the calling thread's namespace.
fn ifindex(name: &str) -> io::Result<u32> {
    let c = CString::new(name).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in the interface name"))?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(index)
    }
}

impl RxPort for AfXdpPort {
    fn rx(&mut self, _now: u64, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        self.give_back_pending();
        let mut want = self.window.room(batch.room(), self.rx_stats.packets);
        // A relaxed look first: an empty ring costs no more than this load.
        want = want.min(self.rx.available() as usize);
        if want == 0 {
            if self.settings.busy_poll.is_some() {
                // Busy polling: the receive runs the interface's NAPI in this thread.
                // SAFETY: recvfrom on our own socket with no buffer (length 0) and no
                // address; MSG_DONTWAIT, so it returns at once.
                unsafe {
                    libc::recvfrom(
                        self.tx.as_raw_fd(),
                        std::ptr::null_mut(),
                        0,
                        libc::MSG_DONTWAIT,
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                    )
                };
                self.busy_polls += 1;
            } else if self.device.needs_wakeup() {
                self.device.wake();
                self.wakeups += 1;
            }
            if let crate::Wait::Interrupt { spin } = self.settings.wait {
                self.sleep_when_idle(spin);
            }
            return 0;
        }
        self.idle_since = None;
        let first = batch.len();
        let got = pool.alloc_into(batch, want);
        if got < want {
            self.rx_pool_empty += 1;
        }
        let mut reader = self.rx.receive(got as u32);
        let (mut taken, mut bytes) = (0, 0u64);
        let mut read = 0;
        while let Some(desc) = reader.read() {
            let frame = desc.addr & !u64::from(FRAME_SIZE - 1);
            self.refill[read] = frame;
            read += 1;
            let (addr, len) = (desc.addr as usize, desc.len as usize);
            // The kernel keeps descriptors inside the UMEM; checked anyway, as the ring is
            // memory anyone with the socket can write.
            if addr.checked_add(len).is_none_or(|end| end > self.umem_len)
                || (addr & (FRAME_SIZE as usize - 1)) + len > FRAME_SIZE as usize
            {
                self.rx_bad_desc += 1;
                continue;
            }
            if len > DATA_ROOM {
                self.rx_oversize += 1;
                continue;
            }
            // SAFETY: [addr, addr + len) lies inside one frame of the mapping (checked
            // above); the kernel handed the frame to us on the RX ring and takes it back
            // only after we put it on the fill ring below, so nothing writes it meanwhile.
            let data = unsafe { std::slice::from_raw_parts(self.base.as_ptr().add(addr), len) };
            let p = batch.get_mut(first + taken);
            p.meta = PacketMeta::fresh(0, 0, self.window.flags());
            p.meta.seq = self.rx_stats.packets.wrapping_add(taken as u64) as u32;
            p.reset(len).copy_from_slice(data);
            bytes += len as u64;
            taken += 1;
        }
        reader.release();
        drop(reader);
        // Buffers allocated for frames that turned out unusable (or not there) go back.
        for _ in taken..got {
            if let Some(p) = batch.pop() {
                pool.free(p);
            }
        }
        let mut fill = self.device.fill(read as u32);
        let given = fill.insert(self.refill[..read].iter().copied()) as usize;
        fill.commit();
        drop(fill);
        if given < read {
            self.refill_pending.extend_from_slice(&self.refill[given..read]);
        }
        // Frames read but unusable were taken in and dropped here, by cause.
        let dropped = (read - taken) as u64;
        self.rx_stats.packets += taken as u64 + dropped;
        self.rx_stats.bytes += bytes;
        self.rx_stats.dropped += dropped;
        taken
    }

    fn drops(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("oversize", self.rx_oversize),
            ("bad-descriptor", self.rx_bad_desc),
            ("unread-at-end", self.rx_unread_at_end),
        ]
    }

    fn discard_unread(&mut self) {
        // What the kernel placed on the RX ring and nothing will read now: taken, its
        // frames given back to the fill ring, counted where it stopped.
        loop {
            let n = self.rx.available().min(MAX_BATCH as u32);
            if n == 0 {
                return;
            }
            let mut reader = self.rx.receive(n);
            let mut read = 0;
            while let Some(desc) = reader.read() {
                self.refill[read] = desc.addr & !u64::from(FRAME_SIZE - 1);
                read += 1;
            }
            reader.release();
            drop(reader);
            self.refill_pending.extend_from_slice(&self.refill[..read]);
            self.give_back_pending();
            self.rx_unread_at_end += read as u64;
            self.rx_stats.packets += read as u64;
            self.rx_stats.dropped += read as u64;
            if read == 0 {
                return;
            }
        }
    }

    fn exhausted(&self) -> bool {
        self.window.reached(self.rx_stats.packets)
    }

    fn needs_fresh_clock(&self) -> bool {
        false
    }

    fn stats(&self) -> PortStats {
        self.rx_stats
    }

    fn start_window(&mut self, count: Option<u64>) {
        self.window.start(self.rx_stats.packets, count);
    }

    fn counters(&self) -> Vec<NfCounter> {
        let mut c = vec![
            NfCounter::total("rx_oversize", self.rx_oversize),
            NfCounter::total("rx_bad_descriptor", self.rx_bad_desc),
            NfCounter::total("rx_pool_empty", self.rx_pool_empty),
            NfCounter::total("wakeups", self.wakeups),
            NfCounter::total("busy_polls", self.busy_polls),
            NfCounter::total("sleeps", self.sleeps),
        ];
        c.extend(kernel_counters(self.xdp_statistics()));
        c
    }

    fn info(&self) -> PortInfo {
        port_info(self, "receive")
    }
}

impl TxPort for AfXdpPort {
    fn tx<R: Recycle>(&mut self, _now: u64, batch: &mut Batch, recycle: &mut R) {
        self.reap_completions();
        let n = batch.len();
        let (mut next, mut sent, mut oversize, mut bytes, mut window) = (0usize, 0usize, 0u64, 0u64, 0u64);
        let mut out_of_frames = false;
        // The ring's free count is cached: a reservation can come back short although the
        // kernel has made room since; a second one asks the ring afresh.
        for _ in 0..2 {
            if next == n {
                break;
            }
            let mut writer = self.tx.transmit((n - next) as u32);
            let room = writer.capacity() as usize;
            out_of_frames = self.tx_free.len() < room;
            let take = room.min(self.tx_free.len());
            let (base, free) = (self.base, &mut self.tx_free);
            let descs = batch.iter().skip(next).take(take).filter_map(|p| {
                let data = p.data();
                if data.len() > (FRAME_SIZE - 256) as usize {
                    oversize += 1;
                    return None;
                }
                let addr = free.pop().expect("`take` counts free frames");
                // SAFETY: `addr` is a free frame of the mapping (FRAME_SIZE bytes, the
                // kernel returned it on the completion ring or never had it) and the data
                // fits in it (checked above).
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), base.as_ptr().add(addr as usize), data.len()) };
                bytes += data.len() as u64;
                window += u64::from(p.in_window());
                Some(XdpDesc {
                    addr,
                    len: data.len() as u32,
                    options: 0,
                })
            });
            sent += writer.insert(descs) as usize;
            writer.commit();
            next += take;
        }
        self.tx_oversize += oversize;
        let unsent = (n - next) as u64;
        if out_of_frames {
            self.tx_no_frame += unsent;
        } else {
            self.tx_ring_full += unsent;
        }
        self.kick();
        self.tx_stats.packets += sent as u64;
        self.tx_stats.bytes += bytes;
        self.tx_stats.dropped += (n - sent) as u64;
        self.tx_window += window;
        recycle.recycle_batch(batch);
    }

    fn stats(&self) -> PortStats {
        self.tx_stats
    }

    fn flush(&mut self) {
        self.reap_completions();
        self.kick();
    }

    fn window_packets(&self) -> u64 {
        self.tx_window
    }

    fn counters(&self) -> Vec<NfCounter> {
        let mut c = vec![
            NfCounter::total("tx_no_frame", self.tx_no_frame),
            NfCounter::total("tx_ring_full", self.tx_ring_full),
            NfCounter::total("tx_oversize", self.tx_oversize),
            NfCounter::total("wakeups", self.wakeups),
        ];
        c.extend(kernel_counters(self.xdp_statistics()));
        c
    }

    fn info(&self) -> PortInfo {
        port_info(self, "send")
    }
}

/// The kernel's own counters of the socket (`XDP_STATISTICS`). Its receive drops are
/// reported as they stand (since the socket opened), not as a window's growth: they
/// explain a run's whole loss, and frames a device under test's socket dropped before
/// its window opened (the tester already sending while the device was starting) are
/// part of it.
fn kernel_counters(s: Option<xdpilone::xdp::XdpStatisticsV2>) -> Vec<NfCounter> {
    let Some(s) = s else { return Vec::new() };
    vec![
        NfCounter::gauge("kernel_rx_dropped", s.rx_dropped),
        NfCounter::gauge("kernel_rx_ring_full", s.rx_ring_full),
        NfCounter::total("kernel_rx_fill_ring_empty", s.rx_fill_ring_empty_descs),
        NfCounter::total("kernel_rx_invalid_descriptors", s.rx_invalid_descs),
        NfCounter::total("kernel_tx_invalid_descriptors", s.tx_invalid_descs),
        NfCounter::total("kernel_tx_ring_empty", s.tx_ring_empty_descs),
    ]
}

fn port_info(port: &AfXdpPort, role: &str) -> PortInfo {
    let mode = port.xdp_mode().map_or("none (send only)", XdpMode::name);
    let s = &port.settings;
    PortInfo {
        kind: "af_xdp".into(),
        summary: format!(
            "{} queue {} ({role}), XDP {mode}, {} bind, ring {}, {} frames{}{}",
            port.interface,
            s.queue,
            port.bind.name(),
            s.ring,
            s.frames,
            s.busy_poll.map_or(String::new(), |us| format!(", busy poll {us} us")),
            match s.wait {
                crate::Wait::Poll => String::new(),
                w => format!(", waits by {w}"),
            }
        ),
        settings: BTreeMap::from([
            ("interface".to_string(), port.interface.clone()),
            ("queue".to_string(), s.queue.to_string()),
            ("xdp_mode".to_string(), mode.to_string()),
            ("bind".to_string(), port.bind.name().to_string()),
            ("ring".to_string(), s.ring.to_string()),
            ("frames".to_string(), s.frames.to_string()),
            ("need_wakeup".to_string(), "yes".to_string()),
            ("tx_budget".to_string(), port.tx_budget.to_string()),
            (
                "busy_poll".to_string(),
                s.busy_poll.map_or("off".to_string(), |us| format!("{us} us")),
            ),
        ]),
    }
}
