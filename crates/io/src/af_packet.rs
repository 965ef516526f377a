//! AF_PACKET ports: the fallback that works on every interface and kernel. Receiving
//! through a TPACKET_V3 ring (blocks of frames the kernel fills and hands over whole),
//! sending through a TPACKET_V2 ring flushed with one `send` per batch, bypassing the
//! qdisc. No allocation, lock or system call per packet.
//!
//! Two sockets, because a socket has one ring version: the receiving one (`ETH_P_ALL`,
//! its own transmissions ignored) and the sending one (protocol 0: it receives nothing).
//! The kernel's drops (`tp_drops`: frames that found the RX ring full) are read with
//! `PACKET_STATISTICS` (which resets them, so they are accumulated) and reported as the
//! port's `kernel_rx_dropped`.
//!
//! A port must be opened on a thread inside the interface's namespace, like AF_XDP's.

use crate::window::Window;
use memmap2::{MmapMut, MmapOptions};
use sfclab_core::packet::DATA_ROOM;
use sfclab_core::port::{PortInfo, PortStats};
use sfclab_core::{Batch, NfCounter, PacketMeta, PacketPool, Recycle, RxPort, TxPort};
use std::cell::Cell;
use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

/// Bytes per TX ring slot: the 32-byte `tpacket2_hdr`, then the frame.
const TX_FRAME: usize = 2048;
/// Where a TX slot's frame starts (`TPACKET_ALIGN(sizeof(struct tpacket2_hdr))`).
const TX_DATA: usize = 32;
/// Offsets in a `tpacket_block_desc` (the block header is 8-byte aligned at 8).
const BLOCK_STATUS: usize = 8;
const BLOCK_PKTS: usize = 12;
const BLOCK_FIRST: usize = 16;
/// Offsets in a `tpacket3_hdr`.
const PKT_NEXT: usize = 0;
const PKT_SNAPLEN: usize = 12;
const PKT_MAC: usize = 24;
const PKT_HDR_LEN: usize = 48;

/// Settings of one AF_PACKET port.
#[derive(Debug, Clone, PartialEq)]
pub struct AfPacketSettings {
    /// Bytes per RX block (a power of two, at least a page).
    pub block_size: u32,
    /// RX blocks.
    pub blocks: u32,
    /// Milliseconds after which the kernel hands over a block that is not full.
    pub block_timeout_ms: u32,
    /// TX ring slots of 2048 bytes.
    pub tx_frames: u32,
    /// Send straight to the driver, past the qdisc (`PACKET_QDISC_BYPASS`).
    pub qdisc_bypass: bool,
    /// Open the receiving socket; false for a port that only sends.
    pub receive: bool,
    /// Join the receiving socket to this `PACKET_FANOUT` group (flow-hash mode): the
    /// kernel spreads the interface's frames over the group's sockets by flow, one
    /// socket per replica ([`AfPacketPort::open_fanout`] picks the id).
    pub fanout: Option<u16>,
}

impl Default for AfPacketSettings {
    fn default() -> AfPacketSettings {
        AfPacketSettings {
            block_size: 1 << 18,
            blocks: 64,
            block_timeout_ms: 1,
            tx_frames: 4096,
            qdisc_bypass: true,
            receive: true,
            fanout: None,
        }
    }
}

/// An AF_PACKET port on one interface: an [`RxPort`] and a [`TxPort`].
pub struct AfPacketPort {
    // Mappings before the sockets they belong to (fields drop in order).
    rx_ring: Option<MmapMut>,
    tx_ring: MmapMut,
    rx_fd: Option<OwnedFd>,
    tx_fd: OwnedFd,
    interface: String,
    settings: AfPacketSettings,
    /// The RX block being read, frames left in it and the next frame's offset.
    block: usize,
    left: u32,
    offset: usize,
    tx_slot: usize,
    window: Window,
    rx_stats: PortStats,
    tx_stats: PortStats,
    tx_window: u64,
    rx_oversize: u64,
    rx_bad_block: u64,
    rx_pool_empty: u64,
    tx_ring_full: u64,
    tx_oversize: u64,
    tx_wrong_format: u64,
    send_calls: u64,
    /// `PACKET_STATISTICS` resets on read: what was read so far.
    kernel_rx_packets: Cell<u64>,
    kernel_rx_dropped: Cell<u64>,
}

fn last_error(what: &str) -> io::Error {
    let e = io::Error::last_os_error();
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => "; needs root or CAP_NET_RAW",
        _ => "",
    };
    io::Error::new(e.kind(), format!("{what}: {e}{hint}"))
}

fn setsockopt<T>(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, value: &T, what: &str) -> io::Result<()> {
    // SAFETY: `value` is a live, initialised T and its exact size is passed.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 { Ok(()) } else { Err(last_error(what)) }
}

fn packet_socket(protocol: u16) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the descriptor returned is owned by nothing else.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(protocol.to_be())) };
    if fd < 0 {
        return Err(last_error("AF_PACKET socket"));
    }
    // SAFETY: a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn bind(fd: &OwnedFd, ifindex: i32, protocol: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain data; all-zero is a valid value.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_protocol = protocol.to_be();
    addr.sll_ifindex = ifindex;
    // SAFETY: `addr` is a live sockaddr_ll and its size is passed.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(last_error("binding the AF_PACKET socket"))
    }
}

/// The receiving socket on `ifindex`: TPACKET_V3 with its ring of blocks mapped, deaf to
/// what it sends itself, in its fanout group when there is one.
fn receive_socket(settings: &AfPacketSettings, ifindex: i32) -> io::Result<(OwnedFd, MmapMut)> {
    let fd = packet_socket(libc::ETH_P_ALL as u16)?;
    setsockopt(
        &fd,
        libc::SOL_PACKET,
        libc::PACKET_VERSION,
        &(libc::tpacket_versions::TPACKET_V3 as libc::c_int),
        "TPACKET_V3",
    )?;
    let req = libc::tpacket_req3 {
        tp_block_size: settings.block_size,
        tp_block_nr: settings.blocks,
        tp_frame_size: TX_FRAME as u32,
        tp_frame_nr: settings.block_size / TX_FRAME as u32 * settings.blocks,
        tp_retire_blk_tov: settings.block_timeout_ms,
        tp_sizeof_priv: 0,
        tp_feature_req_word: 0,
    };
    setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req, "the RX ring")?;
    // What this socket sends itself is not received back.
    setsockopt(
        &fd,
        libc::SOL_PACKET,
        libc::PACKET_IGNORE_OUTGOING,
        &1i32,
        "ignoring outgoing",
    )?;
    let ring = map_ring(&fd, settings.block_size as usize * settings.blocks as usize)?;
    bind(&fd, ifindex, libc::ETH_P_ALL as u16)?;
    if let Some(group) = settings.fanout {
        // The group id in the low 16 bits, the mode (spread by flow hash) above.
        let arg = i32::from(group) | (libc::PACKET_FANOUT_HASH as i32) << 16;
        setsockopt(
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_FANOUT,
            &arg,
            "joining the fanout group",
        )?;
    }
    Ok((fd, ring))
}

/// The sending socket on `ifindex`: TPACKET_V2 with its ring of frames mapped, past the
/// qdisc when asked.
fn send_socket(settings: &AfPacketSettings, ifindex: i32) -> io::Result<(OwnedFd, MmapMut)> {
    let tx_fd = packet_socket(0)?;
    setsockopt(
        &tx_fd,
        libc::SOL_PACKET,
        libc::PACKET_VERSION,
        &(libc::tpacket_versions::TPACKET_V2 as libc::c_int),
        "TPACKET_V2",
    )?;
    let per_block = 4096 / TX_FRAME;
    let req = libc::tpacket_req {
        tp_block_size: 4096,
        tp_block_nr: settings.tx_frames.div_ceil(per_block as u32),
        tp_frame_size: TX_FRAME as u32,
        tp_frame_nr: settings.tx_frames.div_ceil(per_block as u32) * per_block as u32,
    };
    setsockopt(&tx_fd, libc::SOL_PACKET, libc::PACKET_TX_RING, &req, "the TX ring")?;
    if settings.qdisc_bypass {
        setsockopt(
            &tx_fd,
            libc::SOL_PACKET,
            libc::PACKET_QDISC_BYPASS,
            &1i32,
            "bypassing the qdisc",
        )?;
    }
    let tx_ring = map_ring(&tx_fd, req.tp_frame_nr as usize * TX_FRAME)?;
    bind(&tx_fd, ifindex, 0)?;
    Ok((tx_fd, tx_ring))
}

fn map_ring(fd: &OwnedFd, len: usize) -> io::Result<MmapMut> {
    // SAFETY: the socket's ring is `len` bytes (the size set with PACKET_*_RING); the
    // mapping is shared with the kernel and reached only through raw pointers.
    unsafe { MmapOptions::new().len(len).map_mut(fd.as_raw_fd()) }
        .map_err(|e| io::Error::new(e.kind(), format!("mapping the ring: {e}")))
}

impl AfPacketPort {
    /// Opens `members` ports on `interface` whose receiving sockets form one
    /// `PACKET_FANOUT` group: each frame the interface receives goes to exactly one of
    /// them, chosen by its flow hash, so that replicas each see whole flows.
    pub fn open_fanout(
        interface: &str,
        settings: &AfPacketSettings,
        members: u32,
    ) -> Result<Vec<AfPacketPort>, String> {
        static NEXT_GROUP: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
        if members == 0 {
            return Err(format!(
                "AF_PACKET on {interface}: a fanout group needs at least one member"
            ));
        }
        // Unique among this process's groups; the pid keeps other processes' apart.
        let group = (std::process::id() as u16).wrapping_mul(31)
            ^ NEXT_GROUP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let s = AfPacketSettings {
            fanout: Some(group),
            receive: true,
            ..settings.clone()
        };
        (0..members).map(|_| Self::open(interface, &s)).collect()
    }

    /// Opens the port's sockets on `interface` (of the calling thread's namespace).
    pub fn open(interface: &str, settings: &AfPacketSettings) -> Result<AfPacketPort, String> {
        let s = settings;
        let fail = |e: io::Error| format!("AF_PACKET on {interface}: {e}");
        if !s.block_size.is_power_of_two() || s.block_size < 4096 || s.blocks == 0 || s.tx_frames == 0 {
            return Err(format!(
                "AF_PACKET ring: block_size {} (a power of two, at least 4096), blocks {}, tx_frames {} (at least 1)",
                s.block_size, s.blocks, s.tx_frames
            ));
        }
        let name = std::ffi::CString::new(interface).map_err(|_| "NUL in the interface name".to_string())?;
        // SAFETY: `name` is NUL-terminated and outlives the call.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        if ifindex == 0 {
            return Err(format!("AF_PACKET: no interface {interface} in this namespace"));
        }
        let ifindex = ifindex as i32;

        let (rx_fd, rx_ring) = if s.receive {
            let (fd, ring) = receive_socket(s, ifindex).map_err(fail)?;
            (Some(fd), Some(ring))
        } else {
            (None, None)
        };
        let (tx_fd, tx_ring) = send_socket(s, ifindex).map_err(fail)?;

        Ok(AfPacketPort {
            rx_ring,
            tx_ring,
            rx_fd,
            tx_fd,
            interface: interface.to_string(),
            settings: s.clone(),
            block: 0,
            left: 0,
            offset: 0,
            tx_slot: 0,
            window: Window::default(),
            rx_stats: PortStats::default(),
            tx_stats: PortStats::default(),
            tx_window: 0,
            rx_oversize: 0,
            rx_bad_block: 0,
            rx_pool_empty: 0,
            tx_ring_full: 0,
            tx_oversize: 0,
            tx_wrong_format: 0,
            send_calls: 0,
            kernel_rx_packets: Cell::new(0),
            kernel_rx_dropped: Cell::new(0),
        })
    }

    /// Reads (and so resets) the kernel's RX counters into the running totals.
    fn read_kernel_stats(&self) {
        let Some(fd) = &self.rx_fd else { return };
        let mut st = libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        };
        let mut len = std::mem::size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: `st` is a live tpacket_stats_v3 and `len` its size.
        let r = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats_v3).cast(),
                &mut len,
            )
        };
        if r == 0 {
            self.kernel_rx_packets
                .set(self.kernel_rx_packets.get() + u64::from(st.tp_packets));
            self.kernel_rx_dropped
                .set(self.kernel_rx_dropped.get() + u64::from(st.tp_drops));
        }
    }
}

/// The 32-bit word at `base + offset` as the atomic the kernel treats it as.
///
/// # Safety
/// `base + offset` is 4-byte aligned, inside a live ring mapping.
unsafe fn status_at<'a>(base: *mut u8, offset: usize) -> &'a AtomicU32 {
    // SAFETY: per the caller, aligned and inside the mapping, which outlives the use;
    // the kernel only ever accesses the word atomically too.
    unsafe { AtomicU32::from_ptr(base.add(offset).cast()) }
}

/// A plain 32-bit read at `base + offset` (a field the kernel wrote before handing
/// the block over).
///
/// # Safety
/// `base + offset .. + 4` is inside a live ring mapping.
unsafe fn read_u32(base: *const u8, offset: usize) -> u32 {
    // SAFETY: per the caller.
    unsafe { base.add(offset).cast::<u32>().read_unaligned() }
}

impl RxPort for AfPacketPort {
    fn rx(&mut self, _now: u64, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        let Some(ring) = self.rx_ring.as_mut() else { return 0 };
        let base = ring.as_mut_ptr();
        let (block_size, blocks) = (self.settings.block_size as usize, self.settings.blocks as usize);
        let room = self.window.room(batch.room(), self.rx_stats.packets);
        let (mut taken, mut bytes) = (0usize, 0u64);
        while taken < room {
            let desc = self.block * block_size;
            // SAFETY: every block starts block_size-aligned inside the mapping.
            let status = unsafe { status_at(base, desc + BLOCK_STATUS) };
            if self.left == 0 {
                if status.load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
                    break;
                }
                // SAFETY: the block header's words lie inside the block.
                let (n, first) = unsafe { (read_u32(base, desc + BLOCK_PKTS), read_u32(base, desc + BLOCK_FIRST)) };
                self.left = n;
                self.offset = first as usize;
            }
            if self.left > 0 {
                let at = self.offset;
                // The kernel lays frames out inside the block; checked anyway, so that
                // a corrupt ring can cost a block, never memory safety.
                let header_fits = at.checked_add(PKT_HDR_LEN).is_some_and(|e| e <= block_size);
                let (mac, snaplen, next) = if header_fits {
                    // SAFETY: the frame header lies inside the block (checked).
                    unsafe {
                        (
                            base.add(desc + at + PKT_MAC).cast::<u16>().read_unaligned() as usize,
                            read_u32(base, desc + at + PKT_SNAPLEN) as usize,
                            read_u32(base, desc + at + PKT_NEXT) as usize,
                        )
                    }
                } else {
                    (0, 0, 0)
                };
                let data_fits = header_fits
                    && at
                        .checked_add(mac)
                        .and_then(|s| s.checked_add(snaplen))
                        .is_some_and(|e| e <= block_size);
                if !data_fits || (next == 0 && self.left > 1) {
                    self.rx_bad_block += 1;
                    self.left = 0;
                } else if snaplen > DATA_ROOM {
                    self.rx_oversize += 1;
                    self.rx_stats.packets += 1;
                    self.rx_stats.dropped += 1;
                    self.left -= 1;
                    self.offset += next;
                    continue;
                } else {
                    let Some(mut p) = pool.alloc() else {
                        self.rx_pool_empty += 1;
                        break;
                    };
                    // SAFETY: [desc + at + mac, + snaplen) lies inside the block
                    // (checked), which the kernel handed to us (TP_STATUS_USER) and takes
                    // back only when we store TP_STATUS_KERNEL below.
                    let data = unsafe { std::slice::from_raw_parts(base.add(desc + at + mac), snaplen) };
                    p.meta = PacketMeta::fresh(0, 0, self.window.flags());
                    p.meta.seq = self.rx_stats.packets as u32;
                    p.reset(snaplen).copy_from_slice(data);
                    if let Err(p) = batch.push(p) {
                        // Not reached: `taken < room <= batch.room()`.
                        pool.free(p);
                        break;
                    }
                    self.rx_stats.packets += 1;
                    bytes += snaplen as u64;
                    taken += 1;
                    self.left -= 1;
                    self.offset += next;
                }
            }
            if self.left == 0 {
                // The whole block is read: give it back.
                status.store(libc::TP_STATUS_KERNEL, Ordering::Release);
                self.block = (self.block + 1) % blocks;
            }
        }
        self.rx_stats.bytes += bytes;
        taken
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

    fn drops(&self) -> Vec<(&'static str, u64)> {
        vec![("oversize", self.rx_oversize)]
    }

    fn counters(&self) -> Vec<NfCounter> {
        self.read_kernel_stats();
        vec![
            NfCounter::total("rx_bad_block", self.rx_bad_block),
            NfCounter::total("rx_pool_empty", self.rx_pool_empty),
            NfCounter::total("kernel_rx_packets", self.kernel_rx_packets.get()),
            // As it stands since the socket opened, as AF_XDP's: it explains a run's
            // whole loss, drops before the window opened included.
            NfCounter::gauge("kernel_rx_dropped", self.kernel_rx_dropped.get()),
        ]
    }

    fn info(&self) -> PortInfo {
        port_info(self, "receive")
    }
}

impl TxPort for AfPacketPort {
    fn tx<R: Recycle>(&mut self, _now: u64, batch: &mut Batch, recycle: &mut R) {
        let base = self.tx_ring.as_mut_ptr();
        let slots = self.tx_ring.len() / TX_FRAME;
        let (mut queued, mut bytes, mut window) = (0u64, 0u64, 0u64);
        for p in batch.iter() {
            let data = p.data();
            if data.len() > TX_FRAME - TX_DATA {
                self.tx_oversize += 1;
                continue;
            }
            let slot = self.tx_slot * TX_FRAME;
            // SAFETY: slots are TX_FRAME-aligned inside the mapping.
            let status = unsafe { status_at(base, slot) };
            match status.load(Ordering::Acquire) {
                libc::TP_STATUS_AVAILABLE => {}
                libc::TP_STATUS_WRONG_FORMAT => self.tx_wrong_format += 1,
                _ => {
                    // The kernel has not sent this slot yet: the ring is full.
                    self.tx_ring_full += 1;
                    continue;
                }
            }
            // SAFETY: the slot is ours (status AVAILABLE or WRONG_FORMAT) until we set
            // SEND_REQUEST; the frame fits after its header (checked above).
            unsafe {
                std::ptr::copy_nonoverlapping(data.as_ptr(), base.add(slot + TX_DATA), data.len());
                base.add(slot + 4).cast::<u32>().write(data.len() as u32);
            }
            status.store(libc::TP_STATUS_SEND_REQUEST, Ordering::Release);
            self.tx_slot = (self.tx_slot + 1) % slots;
            queued += 1;
            bytes += data.len() as u64;
            window += u64::from(p.in_window());
        }
        if queued > 0 {
            // One call sends every frame marked SEND_REQUEST.
            // SAFETY: send(2) of nothing on our own socket: the kernel reads the ring.
            unsafe { libc::send(self.tx_fd.as_raw_fd(), std::ptr::null(), 0, libc::MSG_DONTWAIT) };
            self.send_calls += 1;
        }
        let n = batch.len() as u64;
        self.tx_stats.packets += queued;
        self.tx_stats.bytes += bytes;
        self.tx_stats.dropped += n - queued;
        self.tx_window += window;
        recycle.recycle_batch(batch);
    }

    fn stats(&self) -> PortStats {
        self.tx_stats
    }

    fn window_packets(&self) -> u64 {
        self.tx_window
    }

    fn counters(&self) -> Vec<NfCounter> {
        vec![
            NfCounter::total("tx_ring_full", self.tx_ring_full),
            NfCounter::total("tx_oversize", self.tx_oversize),
            NfCounter::total("tx_wrong_format", self.tx_wrong_format),
            NfCounter::total("tx_send_calls", self.send_calls),
        ]
    }

    fn info(&self) -> PortInfo {
        port_info(self, "send")
    }
}

fn port_info(port: &AfPacketPort, role: &str) -> PortInfo {
    let s = &port.settings;
    PortInfo {
        kind: "af_packet".into(),
        summary: format!(
            "{} ({role}), TPACKET_V3 RX {} x {} KiB blocks, TPACKET_V2 TX {} slots, qdisc {}",
            port.interface,
            s.blocks,
            s.block_size / 1024,
            s.tx_frames,
            if s.qdisc_bypass { "bypassed" } else { "used" }
        ),
        settings: BTreeMap::from([
            ("interface".to_string(), port.interface.clone()),
            ("rx_ring".to_string(), "tpacket_v3".to_string()),
            ("tx_ring".to_string(), "tpacket_v2".to_string()),
            ("block_size".to_string(), s.block_size.to_string()),
            ("blocks".to_string(), s.blocks.to_string()),
            ("tx_frames".to_string(), s.tx_frames.to_string()),
            ("qdisc_bypass".to_string(), s.qdisc_bypass.to_string()),
        ]),
    }
}
