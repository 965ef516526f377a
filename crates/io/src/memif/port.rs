//! A memif port: one queue's rings of an [`super::interface::Interface`], as the
//! runtime's [`RxPort`] and [`TxPort`]. One copy per frame each way (from a buffer of
//! the shared region into a pool buffer, and back), or none for a zero-copy client
//! (its pool is a region: `lent`), a descriptor per buffer, head and
//! tail published once per batch; no lock, allocation or system call per frame. A
//! system call happens per batch only to wake a peer that sleeps (interrupt mode), or to
//! yield the core while the next ring is full (backpressure: a receiver that shares the
//! core runs and frees slots, instead of this side dropping what it cannot place).
//!
//! Drops are counted where they happen and why: frames a receiver cannot use (a
//! descriptor outside the shared memory, a frame larger than a packet buffer), frames a
//! sender cannot place (the ring full, no peer connected, a frame larger than the ring),
//! and frames that were on the ring when the peer left (`tx_in_flight_at_disconnect`:
//! placed but never released by the receiver).

use std::collections::BTreeMap;
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};
use std::time::Instant;

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use sfclab_core::packet::DATA_ROOM;
use sfclab_core::port::{PortInfo, PortStats};
use sfclab_core::{Batch, NfCounter, PacketMeta, PacketPool, Recycle, RxPort, TxPort};

use super::connection::{Connection, Queue, Role};
use super::layout::{DESC_FLAG_NEXT, Desc, RING_FLAG_MASK_INT};
use super::lent::Lent;
use super::region::Region;
use super::settings::Wait;
use super::shared::{Control, PoolMemory};
use crate::window::Window;

/// How long a sender waits for a full ring to free slots before it drops the rest, by
/// default.
const FULL_WAIT: std::time::Duration = std::time::Duration::from_millis(1);

/// Why a received frame is dropped.
#[derive(Clone, Copy)]
enum Fault {
    /// A descriptor outside the shared memory (or longer than its buffer).
    BadDescriptor,
    /// Larger than a packet buffer's room.
    Oversize,
}

/// How long a receiver in interrupt mode sleeps at most before it looks again (a lost
/// wake-up, a stop request, a peer that left).
pub(super) const SLEEP_LIMIT_MS: u16 = 10;

/// One queue of a memif interface.
pub struct MemifPort {
    control: Arc<Control>,
    queue: u16,
    receive: bool,
    send: bool,
    /// The connection the rings belong to, and the epoch it was taken at.
    conn: Option<Arc<Connection>>,
    epoch: u64,
    /// Receive: the next slot to read (the server's `last_head`, the client's
    /// `last_tail`).
    rx_next: u16,
    idle_since: Option<Instant>,
    /// `rx` leaves sleeping to its owner ([`MemifPort::set_sleep_elsewhere`]).
    sleeps_elsewhere: bool,
    window: Window,
    rx_stats: PortStats,
    tx_stats: PortStats,
    tx_window: u64,
    rx_bad_desc: u64,
    rx_oversize: u64,
    rx_pool_empty: u64,
    rx_left_at_disconnect: u64,
    /// Frames on the ring when the run ended, taken and dropped (`discard_unread`).
    rx_unread_at_end: u64,
    tx_ring_full: u64,
    /// Yields while the send ring was full (backpressure), and the TSC ticks spent
    /// waiting so (yielding, and looking for room that was not there): the
    /// receiver's time, not this port's work, which placing frames once room came is.
    tx_full_waits: u64,
    tx_full_wait_ticks: u64,
    /// How long a send waits for a full ring to free slots before it drops the rest.
    full_wait: std::time::Duration,
    tx_no_peer: u64,
    tx_bad_desc: u64,
    tx_in_flight_at_disconnect: u64,
    interrupts_sent: u64,
    sleeps: u64,
    wakeups: u64,
    /// A zero-copy client's buffers on its rings (and those of a connection gone, until
    /// they are back in the pool).
    lent: Option<Lent>,
}

impl MemifPort {
    pub(super) fn new(control: Arc<Control>, queue: u16, receive: bool, send: bool) -> MemifPort {
        MemifPort {
            control,
            queue,
            receive,
            send,
            conn: None,
            epoch: u64::MAX,
            rx_next: 0,
            idle_since: None,
            sleeps_elsewhere: false,
            window: Window::default(),
            rx_stats: PortStats::default(),
            tx_stats: PortStats::default(),
            tx_window: 0,
            rx_bad_desc: 0,
            rx_oversize: 0,
            rx_pool_empty: 0,
            rx_left_at_disconnect: 0,
            rx_unread_at_end: 0,
            tx_ring_full: 0,
            tx_full_waits: 0,
            tx_full_wait_ticks: 0,
            full_wait: FULL_WAIT,
            tx_no_peer: 0,
            tx_bad_desc: 0,
            tx_in_flight_at_disconnect: 0,
            interrupts_sent: 0,
            sleeps: 0,
            wakeups: 0,
            lent: None,
        }
    }

    /// How long a send waits for a full ring to free slots (1 ms unless set) before the
    /// rest is dropped (`tx_ring_full`). A tester that drives many chains from one
    /// thread waits for none: a wait for one chain would stall every other's traffic.
    pub fn set_full_wait(&mut self, wait: std::time::Duration) {
        self.full_wait = wait;
    }

    /// Whether the port has a peer now (as of its last call).
    pub fn connected(&self) -> bool {
        self.conn.is_some()
    }

    /// Waits until the interface has a peer, at most `limit`.
    pub fn wait_connected(&mut self, limit: std::time::Duration) -> Result<(), String> {
        self.wait_connected_unless(limit, &std::sync::atomic::AtomicBool::new(false))
            .map(|_| ())
    }

    /// As [`MemifPort::wait_connected`], ending early once `stop` is set (a process told
    /// to stop while its peer is gone): whether a peer connected.
    pub fn wait_connected_unless(
        &mut self,
        limit: std::time::Duration,
        stop: &std::sync::atomic::AtomicBool,
    ) -> Result<bool, String> {
        let connected = self.control.wait_connected_unless(limit, stop)?;
        if connected {
            self.follow();
        }
        Ok(connected)
    }

    /// This side's role on the interface.
    pub fn role(&self) -> Role {
        self.control.settings.role
    }

    /// Times a peer connected to the interface so far (reconnections after the first).
    pub fn connects(&self) -> u64 {
        self.control.shared.connects()
    }

    /// Takes the interface's current connection when it changed. What this side had put
    /// on its send ring and the peer had not released is counted as lost in flight.
    #[inline(always)]
    fn follow(&mut self) {
        if self.control.shared.epoch() == self.epoch {
            return;
        }
        self.switch();
    }

    #[cold]
    fn switch(&mut self) {
        if let Some(old) = &self.conn
            && self.receive
            && let Some(q) = old.rx.get(usize::from(self.queue))
        {
            // Frames the peer placed that this port will now never read (a port that
            // also sends switches on its send path without draining first).
            let end = Self::produced(old, q);
            self.rx_left_at_disconnect += u64::from(end.wrapping_sub(self.rx_next).min(q.ring.size()));
        }
        if let Some(old) = self.conn.take()
            && self.send
            && let Some(q) = old.tx.get(usize::from(self.queue))
        {
            let (head, tail) = (
                q.ring.head().load(Ordering::Acquire),
                q.ring.tail().load(Ordering::Acquire),
            );
            // Unreleased frames: the client's `head - tail`; on a server's ring the
            // client releases by moving `head` a ring ahead of what it consumed.
            let unreleased = match old.role {
                Role::Client => head.wrapping_sub(tail),
                Role::Server => tail.wrapping_sub(head.wrapping_sub(q.ring.size())),
            };
            self.tx_in_flight_at_disconnect += u64::from(unreleased.min(q.ring.size()));
        }
        let (epoch, conn) = self.control.shared.current();
        self.epoch = epoch;
        self.rx_next = 0;
        self.idle_since = None;
        if let Some(lent) = &mut self.lent {
            lent.strand_all();
        }
        if let Some(c) = &conn
            && let Some(pool) = c.pool
        {
            let slots = |queues: &[Queue], used: bool| {
                queues
                    .get(usize::from(self.queue))
                    .filter(|_| used)
                    .map_or(0, |q| q.ring.size())
            };
            let mut fresh = Lent::new(pool, slots(&c.rx, self.receive), slots(&c.tx, self.send));
            if let Some(old) = self.lent.take() {
                fresh.inherit(old);
            }
            self.lent = Some(fresh);
        }
        if let Some(c) = &conn
            && self.receive
            && let Some(q) = c.rx.get(usize::from(self.queue))
        {
            // Polling until the ring stays empty: the sender need not signal.
            q.ring.flags().fetch_or(RING_FLAG_MASK_INT, Ordering::Relaxed);
            // A zero-copy client gives pool buffers at its next receive, which has the pool.
            if c.role == Role::Client && c.pool.is_none() {
                self.refill(q);
            }
        }
        self.conn = conn;
    }

    /// The client hands the server every buffer of its receive ring that it has read
    /// (their descriptors rewritten whole: the server may have changed them).
    #[inline(always)]
    fn refill(&self, q: &Queue) {
        let ring = &q.ring;
        let mut head = ring.head().load(Ordering::Relaxed);
        let end = self.rx_next.wrapping_add(ring.size());
        while head != end {
            let Some((at, size)) = q.own_buffer(head) else { return };
            ring.set_desc(
                head,
                Desc {
                    flags: 0,
                    region: 0,
                    length: size,
                    offset: at as u32,
                    metadata: 0,
                },
            );
            head = head.wrapping_add(1);
        }
        ring.head().store(head, Ordering::Release);
    }

    /// Where the frame part in `d` (slot `slot` of `q`) lies: the client knows its own
    /// buffers (and trusts no offset the peer wrote), the server reads the descriptor.
    #[inline(always)]
    fn buffer_of(conn: &Connection, q: &Queue, slot: u16, d: &Desc) -> Option<(usize, usize, usize)> {
        match q.own_buffer(slot) {
            Some((at, size)) => (d.length <= size).then_some((0, at, d.length as usize)),
            None => {
                let r = usize::from(d.region);
                let region = conn.regions.get(r)?;
                region.contains(d.offset as usize, d.length as usize).then_some((
                    r,
                    d.offset as usize,
                    d.length as usize,
                ))
            }
        }
    }

    /// Where slot `slot`'s buffer starts, for a hint: the client's own, or where the
    /// descriptor says (a wrong one is only a wasted hint; copies check their bounds).
    #[inline(always)]
    fn buffer_start<'c>(conn: &'c Connection, q: &Queue, slot: u16) -> Option<(&'c Region, usize)> {
        match q.own_buffer(slot) {
            Some((at, _)) => conn.regions.first().map(|r| (&**r, at)),
            None => {
                let d = q.ring.desc(slot);
                conn.regions
                    .get(usize::from(d.region))
                    .map(|r| (&**r, d.offset as usize))
            }
        }
    }

    /// Before reading `n` frames from `slot` on: asks for their buffers' first lines, so
    /// that the misses on lines the peer's core wrote overlap instead of coming one
    /// frame after another.
    #[inline(always)]
    fn will_read(conn: &Connection, q: &Queue, slot: u16, n: usize) {
        for i in 0..n as u16 {
            if let Some((region, at)) = Self::buffer_start(conn, q, slot.wrapping_add(i)) {
                region.will_read(at);
            }
        }
    }

    /// Before writing `n` frames from `slot` on: asks for ownership of their
    /// descriptors' and buffers' first lines, so that the stores do not wait in turn
    /// for the peer's core to give up each line (measured: without it a quarter of a
    /// forwarder's time stalled on a full store buffer).
    #[inline(always)]
    fn will_write(conn: &Connection, q: &Queue, slot: u16, n: usize) {
        for i in 0..n as u16 {
            let s = slot.wrapping_add(i);
            q.ring.will_write_desc(s);
            // A zero-copy client writes its descriptors only (a frame of another pool,
            // copied, is rare enough to wait for its line).
            if conn.pool.is_none()
                && let Some((region, at)) = Self::buffer_start(conn, q, s)
            {
                region.will_write(at);
            }
        }
    }

    /// How far the peer has filled receive ring `q`: the head it moves as producer
    /// (client to server), or the tail it moves as it fills the client's buffers.
    #[inline(always)]
    fn produced(conn: &Connection, q: &Queue) -> u16 {
        match conn.role {
            Role::Server => q.ring.head().load(Ordering::Acquire),
            Role::Client => q.ring.tail().load(Ordering::Acquire),
        }
    }

    #[inline(always)]
    fn receive_from(&mut self, conn: &Connection, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        let Some(q) = conn.rx.get(usize::from(self.queue)) else {
            return 0;
        };
        if conn.pool.is_some()
            && let Some(mut lent) = self.lent.take()
        {
            let got = self.receive_in_place(q, &mut lent, pool, batch);
            self.lent = Some(lent);
            return got;
        }
        let ring = &q.ring;
        let end = Self::produced(conn, q);
        let available = end.wrapping_sub(self.rx_next);
        let mut want = self.window.room(batch.room(), self.rx_stats.packets);
        want = want.min(usize::from(available));
        if want == 0 {
            return 0;
        }
        let first = batch.len();
        let got = pool.alloc_into(batch, want);
        if got < want {
            self.rx_pool_empty += 1;
        }
        let available = available.min(ring.size());
        Self::will_read(conn, q, self.rx_next, got.min(usize::from(available)));
        let (mut slot, mut taken, mut frames, mut bytes) = (self.rx_next, 0usize, 0usize, 0u64);
        let flags = self.window.flags();
        while frames < got && slot != end {
            // One frame: its first descriptor and those its NEXT flags chain on.
            let start = slot;
            let (mut len, mut fault, mut complete) = (0usize, None, false);
            let room = batch.get_mut(first + taken).reset(DATA_ROOM);
            while slot != end {
                let d = ring.desc(slot);
                match Self::buffer_of(conn, q, slot, &d) {
                    Some((r, at, n)) if fault.is_none() && len + n <= DATA_ROOM => {
                        conn.regions[r].read(at, &mut room[len..len + n]);
                        len += n;
                    }
                    Some(_) => fault = fault.or(Some(Fault::Oversize)),
                    None => fault = fault.or(Some(Fault::BadDescriptor)),
                }
                slot = slot.wrapping_add(1);
                if d.flags & DESC_FLAG_NEXT == 0 {
                    complete = true;
                    break;
                }
            }
            if !complete {
                if available < ring.size() {
                    // The sender publishes whole frames: the rest of this one is on
                    // its way. Read it whole next time.
                    slot = start;
                    break;
                }
                // A chain as long as the ring never ends: a broken sender.
                fault = Some(Fault::BadDescriptor);
            }
            frames += 1;
            match fault {
                Some(Fault::Oversize) => self.rx_oversize += 1,
                Some(Fault::BadDescriptor) => self.rx_bad_desc += 1,
                None => {
                    let p = batch.get_mut(first + taken);
                    p.meta = PacketMeta::fresh(0, 0, flags);
                    p.meta.seq = self.rx_stats.packets.wrapping_add(frames as u64 - 1) as u32;
                    p.reset(len);
                    bytes += len as u64;
                    taken += 1;
                }
            }
        }
        self.rx_next = slot;
        match conn.role {
            Role::Server => ring.tail().store(slot, Ordering::Release),
            Role::Client => self.refill(q),
        }
        for _ in taken..got {
            if let Some(p) = batch.pop() {
                pool.free(p);
            }
        }
        let dropped = (frames - taken) as u64;
        self.rx_stats.packets += frames as u64;
        self.rx_stats.bytes += bytes;
        self.rx_stats.dropped += dropped;
        taken
    }

    /// A zero-copy client's receive: the frames are the pool buffers the server filled
    /// where they lie, passed on whole; their slots get fresh buffers from `pool`.
    #[inline(always)]
    fn receive_in_place(&mut self, q: &Queue, lent: &mut Lent, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        lent.return_stranded(pool);
        let ring = &q.ring;
        let given = ring.head().load(Ordering::Relaxed);
        let filled = ring.tail().load(Ordering::Acquire);
        // The server fills only the slots it was given: a tail past them is a broken peer's.
        let available = filled.wrapping_sub(self.rx_next).min(given.wrapping_sub(self.rx_next));
        let want = self
            .window
            .room(batch.room(), self.rx_stats.packets)
            .min(usize::from(available));
        let end = self.rx_next.wrapping_add(available);
        // The descriptors read now are given again below: their lines asked for with
        // ownership at once, so neither the reads nor the writes wait for them in turn.
        let mut s = self.rx_next;
        while s != end {
            ring.will_write_desc(s);
            s = s.wrapping_add(4.min(end.wrapping_sub(s)));
        }
        lent.will_read(self.rx_next, want);
        let flags = self.window.flags();
        let (mut slot, mut frames, mut taken, mut bytes) = (self.rx_next, 0usize, 0usize, 0u64);
        while frames < want && slot != end {
            // One frame: its first descriptor and those its NEXT flags chain on, read
            // only once whole (the sender publishes whole frames).
            let mut last = slot;
            while ring.desc(last).flags & DESC_FLAG_NEXT != 0 && last.wrapping_add(1) != end {
                last = last.wrapping_add(1);
            }
            let whole = ring.desc(last).flags & DESC_FLAG_NEXT == 0;
            if !whole && available < ring.size() {
                break;
            }
            let first = ring.desc(slot);
            let mut frame = lent.take_rx(slot);
            // Its metadata is what the buffer's last user left: written afresh here.
            let mut fault = match &mut frame {
                Some(p) if first.length as usize <= DATA_ROOM && whole => {
                    // Fresh metadata: whatever the buffer's line holds is not trusted.
                    p.meta = PacketMeta::fresh(0, 0, flags);
                    p.notes.clear();
                    p.meta.seq = self.rx_stats.packets.wrapping_add(frames as u64) as u32;
                    p.reset(first.length as usize);
                    None
                }
                Some(_) if whole => Some(Fault::Oversize),
                // A chain as long as the ring never ends: a broken sender.
                Some(_) => Some(Fault::BadDescriptor),
                None => Some(Fault::BadDescriptor),
            };
            // A frame in several buffers comes together in the first, if it fits.
            while slot != last {
                slot = slot.wrapping_add(1);
                let d = ring.desc(slot);
                let Some(mut part) = lent.take_rx(slot) else {
                    fault = fault.or(Some(Fault::BadDescriptor));
                    continue;
                };
                if fault.is_none()
                    && let Some(p) = frame.as_mut()
                {
                    let n = d.length as usize;
                    match (n <= DATA_ROOM).then(|| p.append(n)).flatten() {
                        Some(room) => room.copy_from_slice(part.reset(n)),
                        None => fault = Some(Fault::Oversize),
                    }
                }
                lent.strand(part);
            }
            slot = slot.wrapping_add(1);
            frames += 1;
            match (fault, frame) {
                (None, Some(p)) => {
                    bytes += p.len() as u64;
                    taken += 1;
                    if let Err(p) = batch.push(p) {
                        // Cannot happen: `want` fits the batch's room.
                        lent.strand(p);
                        taken -= 1;
                    }
                }
                (fault, frame) => {
                    match fault {
                        Some(Fault::Oversize) => self.rx_oversize += 1,
                        _ => self.rx_bad_desc += 1,
                    }
                    frame.into_iter().for_each(|p| lent.strand(p));
                }
            }
        }
        self.rx_next = slot;
        if !lent.refill(q, slot, pool) {
            self.rx_pool_empty += 1;
        }
        lent.return_stranded(pool);
        self.rx_stats.packets += frames as u64;
        self.rx_stats.bytes += bytes;
        self.rx_stats.dropped += (frames - taken) as u64;
        taken
    }

    /// Nothing arrived: in interrupt mode, after `spin` of nothing, unmask the ring's
    /// interrupt, look once more (a frame published before the unmask was seen would
    /// otherwise sleep with us), and sleep on the eventfd.
    #[cold]
    fn idle(&mut self) {
        let Wait::Interrupt { spin } = self.control.settings.wait else {
            return;
        };
        if self.sleeps_elsewhere {
            return;
        }
        let now = Instant::now();
        let since = *self.idle_since.get_or_insert(now);
        if now.duration_since(since) < spin {
            return;
        }
        if self.conn.is_none() {
            std::thread::sleep(std::time::Duration::from_millis(1));
            return;
        }
        if self.arm_interrupt() {
            self.idle_since = None;
        } else if let Some(fd) = self.interrupt_fd() {
            let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
            let woke = matches!(poll(&mut fds, PollTimeout::from(SLEEP_LIMIT_MS)), Ok(n) if n > 0);
            self.sleeps += 1;
            if woke {
                self.wakeups += 1;
                // The next frames are likely close: poll again before sleeping.
                self.idle_since = None;
            }
        }
        self.disarm_interrupt();
    }

    /// How the interface's receivers wait.
    pub fn wait_mode(&self) -> Wait {
        self.control.settings.wait
    }

    /// `rx` never sleeps: the owner sleeps on this port's [`MemifPort::interrupt_fd`]
    /// together with others' (a hop that receives on two interfaces).
    pub fn set_sleep_elsewhere(&mut self) {
        self.sleeps_elsewhere = true;
    }

    /// Before a sleep: asks the sender to signal its next frames (unmasks the ring's
    /// interrupt) and looks once more; true when frames are there already (no sleep: a
    /// frame published before the unmask was seen would sleep with us).
    pub fn arm_interrupt(&mut self) -> bool {
        let Some(conn) = &self.conn else { return false };
        let Some(q) = conn.rx.get(usize::from(self.queue)) else {
            return false;
        };
        q.ring.flags().fetch_and(!RING_FLAG_MASK_INT, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        Self::produced(conn, q) != self.rx_next
    }

    /// The eventfd the sender signals once armed; `None` without a connection.
    pub fn interrupt_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        let q = self.conn.as_ref()?.rx.get(usize::from(self.queue))?;
        Some(q.interrupt.as_fd())
    }

    /// After a sleep (or none): clears what the sender signalled and masks the
    /// interrupt again (a receiver that polls needs no signals).
    pub fn disarm_interrupt(&mut self) {
        let Some(conn) = &self.conn else { return };
        let Some(q) = conn.rx.get(usize::from(self.queue)) else {
            return;
        };
        // Non-blocking: the client made it so.
        let mut b = [0u8; 8];
        let _ = nix::unistd::read(&q.interrupt, &mut b);
        q.ring.flags().fetch_or(RING_FLAG_MASK_INT, Ordering::Relaxed);
    }

    /// Places the frames of `batch` from `from` on while the ring has room; returns how
    /// many, and whether it stopped at a descriptor the peer broke (no use waiting: the
    /// rest is counted as `tx_bad_descriptor`).
    #[inline(always)]
    fn send_to<R: Recycle>(&mut self, conn: &Connection, batch: &Batch, from: usize, recycle: &mut R) -> (usize, bool) {
        let Some(q) = conn.tx.get(usize::from(self.queue)) else {
            return (0, false);
        };
        let ring = &q.ring;
        let (mut slot, limit) = match conn.role {
            Role::Client => {
                let head = ring.head().load(Ordering::Relaxed);
                let tail = ring.tail().load(Ordering::Acquire);
                if let Some(lent) = self.lent.as_mut().filter(|_| conn.pool.is_some()) {
                    lent.reclaim(tail, head, recycle);
                }
                (head, tail.wrapping_add(ring.size()))
            }
            Role::Server => (ring.tail().load(Ordering::Relaxed), ring.head().load(Ordering::Acquire)),
        };
        let room = limit.wrapping_sub(slot);
        if room <= ring.size() {
            Self::will_write(conn, q, slot, (batch.len() - from).min(usize::from(room)));
        }
        let mut lent = self.lent.as_mut().filter(|_| conn.pool.is_some());
        let (mut sent, mut bytes, mut window, mut broken) = (0usize, 0u64, 0u64, false);
        'frames: for p in batch.iter().skip(from) {
            let data = p.data();
            let start = slot;
            let mut done = 0usize;
            if let Some(lent) = lent.as_mut()
                && let Some(d) = lent.by_reference(data)
            {
                // A frame of the pool goes as its descriptor; its buffer stays lent
                // until the server releases the slot.
                if slot == limit || limit.wrapping_sub(slot) > ring.size() {
                    break 'frames;
                }
                ring.set_desc(slot, d);
                lent.placed(Some(slot));
                slot = slot.wrapping_add(1);
                sent += 1;
                bytes += data.len() as u64;
                window += u64::from(p.in_window());
                continue;
            }
            loop {
                if slot == limit || limit.wrapping_sub(slot) > ring.size() {
                    // Full: the caller waits for room or counts the rest.
                    slot = start;
                    break 'frames;
                }
                let buffer = match q.own_buffer(slot) {
                    Some((at, size)) => Some((0, at, size as usize)),
                    None => Self::buffer_of(conn, q, slot, &ring.desc(slot)),
                };
                let Some((r, at, room)) = buffer.filter(|b| b.2 > 0) else {
                    slot = start;
                    self.tx_bad_desc += (batch.len() - from - sent) as u64;
                    broken = true;
                    break 'frames;
                };
                let n = room.min(data.len() - done);
                conn.regions[r].write(at, &data[done..done + n]);
                done += n;
                let more = done < data.len();
                ring.set_desc(
                    slot,
                    Desc {
                        flags: if more { DESC_FLAG_NEXT } else { 0 },
                        region: r as u16,
                        length: n as u32,
                        offset: at as u32,
                        metadata: 0,
                    },
                );
                slot = slot.wrapping_add(1);
                if !more {
                    break;
                }
            }
            if let Some(lent) = lent.as_mut() {
                lent.placed(None);
            }
            sent += 1;
            bytes += data.len() as u64;
            window += u64::from(p.in_window());
        }
        match conn.role {
            Role::Client => ring.head().store(slot, Ordering::Release),
            Role::Server => ring.tail().store(slot, Ordering::Release),
        }
        if sent > 0 {
            // Pairs with the receiver's fence between unmasking and looking again.
            fence(Ordering::SeqCst);
            if ring.flags().load(Ordering::Relaxed) & RING_FLAG_MASK_INT == 0 {
                let _ = nix::unistd::write(&q.interrupt, &1u64.to_ne_bytes());
                self.interrupts_sent += 1;
            }
        }
        self.tx_stats.bytes += bytes;
        self.tx_window += window;
        (sent, broken)
    }

    /// A zero-copy client's pool: announced to the interface, which connects with it
    /// as its second region. A pool not in shared memory is not announced, and the
    /// client waits, saying why.
    fn attach(&mut self, pool: &PacketPool) {
        if !self.control.settings.zero_copy {
            return;
        }
        if let Some((fd, span)) = pool.shared_memory()
            && let Ok(fd) = fd.try_clone_to_owned()
        {
            self.control.shared.attach_pool(PoolMemory { fd, span });
        }
    }

    /// A zero-copy client's most buffers on its rings at once: a ring's worth per
    /// direction it uses (the size it asks for; a server may allow less).
    fn lends(&self) -> Option<usize> {
        let s = &self.control.settings;
        let ring = s.config.ring_frames() as usize;
        s.zero_copy
            .then_some(ring * (usize::from(self.receive) + usize::from(self.send)))
    }

    /// Every buffer the port holds back to `pool`.
    fn give_back(&mut self, pool: &mut PacketPool) {
        if let Some(lent) = &mut self.lent {
            lent.return_all(pool);
        }
    }

    fn summary_role(&self) -> &'static str {
        match (self.receive, self.send) {
            (true, true) => "receive and send",
            (true, false) => "receive",
            (false, true) => "send",
            (false, false) => "unused",
        }
    }
}

impl RxPort for MemifPort {
    fn shared_pool_need(&self) -> Option<usize> {
        self.lends()
    }

    fn attach_pool(&mut self, pool: &PacketPool) {
        self.attach(pool);
    }

    fn return_buffers(&mut self, pool: &mut PacketPool) {
        self.give_back(pool);
    }

    fn rx(&mut self, _now: u64, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        if !self.receive {
            return 0;
        }
        if self.control.shared.epoch() != self.epoch {
            // The peer left (or another came): what it had placed on the ring before
            // is whole and still mapped; take it before letting the ring go.
            if let Some(old) = self.conn.clone() {
                let got = self.receive_from(&old, pool, batch);
                if got > 0 {
                    return got;
                }
            }
            self.switch();
        }
        // Taken out for the call and put back: no reference count moved per batch.
        let conn = self.conn.take();
        let got = conn.as_ref().map_or(0, |c| self.receive_from(c, pool, batch));
        self.conn = conn;
        if got == 0 {
            self.idle();
        } else {
            self.idle_since = None;
        }
        got
    }

    fn drops(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("bad-descriptor", self.rx_bad_desc),
            ("oversize", self.rx_oversize),
            ("unread-at-end", self.rx_unread_at_end),
        ]
    }

    fn discard_unread(&mut self) {
        if !self.receive {
            return;
        }
        self.follow();
        let Some(conn) = self.conn.take() else {
            return;
        };
        if let Some(q) = conn.rx.get(usize::from(self.queue)) {
            let ring = &q.ring;
            let end = self
                .rx_next
                .wrapping_add(Self::produced(&conn, q).wrapping_sub(self.rx_next).min(ring.size()));
            let (mut slot, mut frames, mut bytes, mut open) = (self.rx_next, 0u64, 0u64, false);
            while slot != end {
                let d = ring.desc(slot);
                bytes += u64::from(d.length);
                // A frame is its first descriptor and those its NEXT flags chain on; one
                // whose last part never came is still one frame.
                open = d.flags & DESC_FLAG_NEXT != 0;
                frames += u64::from(!open);
                slot = slot.wrapping_add(1);
            }
            frames += u64::from(open);
            if let Some(lent) = self.lent.as_mut().filter(|_| conn.pool.is_some()) {
                // Their buffers go back to the pool at the next receive (or with the
                // rest); the slots get fresh ones then.
                let mut slot = self.rx_next;
                while slot != end {
                    if let Some(p) = lent.take_rx(slot) {
                        lent.strand(p);
                    }
                    slot = slot.wrapping_add(1);
                }
            }
            self.rx_next = end;
            match conn.role {
                Role::Server => ring.tail().store(end, Ordering::Release),
                Role::Client if conn.pool.is_some() => {}
                Role::Client => self.refill(q),
            }
            self.rx_unread_at_end += frames;
            self.rx_stats.packets += frames;
            self.rx_stats.bytes += bytes;
            self.rx_stats.dropped += frames;
        }
        self.conn = Some(conn);
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
        vec![
            NfCounter::total("rx_bad_descriptor", self.rx_bad_desc),
            NfCounter::total("rx_oversize", self.rx_oversize),
            NfCounter::total("rx_pool_empty", self.rx_pool_empty),
            NfCounter::total("rx_left_at_disconnect", self.rx_left_at_disconnect),
            NfCounter::total("rx_unread_at_end", self.rx_unread_at_end),
            NfCounter::total("sleeps", self.sleeps),
            NfCounter::total("wakeups", self.wakeups),
            NfCounter::total("connects", self.connects()),
        ]
    }

    fn info(&self) -> PortInfo {
        port_info(self)
    }
}

impl TxPort for MemifPort {
    fn shared_pool_need(&self) -> Option<usize> {
        self.lends()
    }

    fn attach_pool(&mut self, pool: &PacketPool) {
        self.attach(pool);
    }

    fn return_buffers(&mut self, pool: &mut PacketPool) {
        self.give_back(pool);
    }

    fn tx<R: Recycle>(&mut self, _now: u64, batch: &mut Batch, recycle: &mut R) {
        let n = batch.len();
        let sent = if self.send {
            self.follow();
            // Taken out for the call and put back: no reference count moved per batch.
            let conn = self.conn.take();
            let sent = match &conn {
                Some(c) => {
                    let (mut sent, mut broken) = self.send_to(c, batch, 0, recycle);
                    if sent < n && !broken {
                        // The ring is full: the receiver is behind. Give it the core (it
                        // may share this one) and place the rest as it frees slots, for
                        // up to FULL_WAIT: backpressure instead of drops, so that an
                        // overloaded hop does not spend its core on frames the next one
                        // cannot take. A receiver stalled for longer costs drops.
                        use sfclab_core::tsc;
                        // One clock for the deadline and the waits' ticks.
                        let mut yielded = tsc::now();
                        let deadline = yielded + tsc::ticks(self.full_wait);
                        while sent < n && !broken && yielded < deadline {
                            let _ = nix::sched::sched_yield();
                            let looking = tsc::now();
                            self.tx_full_waits += 1;
                            let (more, stopped) = self.send_to(c, batch, sent, recycle);
                            let looked = tsc::now();
                            // Waiting is the yield and a look that found no room;
                            // placing frames once there is room is this port's work.
                            self.tx_full_wait_ticks += if more == 0 { looked } else { looking } - yielded;
                            yielded = looked;
                            sent += more;
                            broken = stopped;
                        }
                        if !broken {
                            self.tx_ring_full += (n - sent) as u64;
                        }
                    }
                    sent
                }
                None => {
                    self.tx_no_peer += n as u64;
                    0
                }
            };
            self.conn = conn;
            sent
        } else {
            self.tx_no_peer += n as u64;
            0
        };
        self.tx_stats.packets += sent as u64;
        self.tx_stats.dropped += (n - sent) as u64;
        match self.lent.as_mut() {
            // What went by reference stays lent; the rest (copied, refused) goes back.
            Some(lent) => lent.keep_sent(batch, recycle),
            None => recycle.recycle_batch(batch),
        }
    }

    fn stats(&self) -> PortStats {
        self.tx_stats
    }

    fn window_packets(&self) -> u64 {
        self.tx_window
    }

    fn lost_in_flight(&self) -> u64 {
        self.tx_in_flight_at_disconnect
    }

    fn drops(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("ring-full", self.tx_ring_full),
            ("no-peer", self.tx_no_peer),
            ("bad-descriptor", self.tx_bad_desc),
        ]
    }

    fn counters(&self) -> Vec<NfCounter> {
        vec![
            NfCounter::total("tx_ring_full", self.tx_ring_full),
            NfCounter::total("tx_full_waits", self.tx_full_waits),
            NfCounter::total("tx_full_wait_ticks", self.tx_full_wait_ticks),
            NfCounter::total("tx_no_peer", self.tx_no_peer),
            NfCounter::total("tx_bad_descriptor", self.tx_bad_desc),
            NfCounter::total("tx_in_flight_at_disconnect", self.tx_in_flight_at_disconnect),
            NfCounter::total("interrupts_sent", self.interrupts_sent),
            NfCounter::total("connects", self.connects()),
        ]
    }

    fn info(&self) -> PortInfo {
        port_info(self)
    }
}

fn port_info(port: &MemifPort) -> PortInfo {
    let s = &port.control.settings;
    let peer = port
        .conn
        .as_ref()
        .map_or("not connected yet".to_string(), |c| c.peer.clone());
    PortInfo {
        kind: "memif".into(),
        summary: format!(
            "{} ({}, id {}, queue {}, {}), peer {peer}, ring 2^{}, {}{}",
            s.socket.display(),
            s.role,
            s.config.id,
            port.queue,
            port.summary_role(),
            s.config.log2_ring_size,
            s.wait,
            if s.zero_copy { ", zero-copy" } else { "" }
        ),
        settings: BTreeMap::from([
            ("socket".to_string(), s.socket.display().to_string()),
            ("role".to_string(), s.role.to_string()),
            ("id".to_string(), s.config.id.to_string()),
            ("queue".to_string(), port.queue.to_string()),
            ("log2_ring_size".to_string(), s.config.log2_ring_size.to_string()),
            ("buffer_size".to_string(), s.config.buffer_size.to_string()),
            ("wait".to_string(), s.wait.to_string()),
            (
                "zero_copy".to_string(),
                if s.zero_copy { "yes" } else { "no" }.to_string(),
            ),
            ("peer".to_string(), peer),
        ]),
    }
}
