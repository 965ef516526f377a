//! sfclab as the tester: the packets of any source go out through one port, across
//! whatever is under test (an sfclab chain in another namespace, a Linux forwarding
//! namespace, OVS, testpmd, a VM), and come back through another port into the run.
//!
//! The packet's metadata does not cross a wire, so each frame carries it: the last 16
//! bytes of its L4 payload get a *signature* (magic, phase, flags, sequence number, TSC
//! timestamp), the UDP/TCP checksum updated incrementally (RFC 1624). The tail survives
//! whatever the device under test does to headers (NAT, VLAN push/pop, TTL); on the way
//! back the signature restores the metadata, so the sink measures latency and counts
//! the window's traffic exactly as in memory.
//!
//! [`TesterLink`] is an [`RxPort`]: it produces what comes back. Its `stats()` count what its
//! source generated; what did not come back is dropped there, by cause: refused by the
//! sending port (by the cause it names: `line-rate`, `ring-full`, ...), too short to carry a signature, or `unaccounted` (sent and never seen
//! again: dropped by the device under test or the kernel where sfclab cannot see; the
//! counters of the DUT and of the interfaces, reported beside, say where).
//!
//! When a phase ends the runtime calls [`RxPort::finish`]: the wire stops sending and
//! waits until every frame in flight is back or nothing has arrived for `quiet`; frames
//! of an earlier phase that come later still are `late`: counted, not passed on (they
//! were already written off).
//!
//! Where one core's work per frame is what limits a run, the sending half (source,
//! signing, out port) can run on a thread and core of its own, the receiving half in
//! the run's loop: see [`sending`]'s doc for what the two share.

use sfclab_core::packet::Packet;
use sfclab_core::port::{PortInfo, PortStats, Shortfall};
use sfclab_core::{Batch, MAX_BATCH, NfCounter, PacketPool, RxPort, TxPort, tsc};
use sfclab_wire::checksum;
use sfclab_wire::layers::Network;
use std::collections::BTreeMap;
use std::time::Duration;

mod sending;

pub use sending::SenderThread;
use sending::{Sender, SendingThread};

/// The drop cause of frames the sending port's peer left on its ring when it went away.
pub const IN_FLIGHT_AT_DISCONNECT: &str = "in-flight-at-disconnect";

/// The counter of a sending thread's busy TSC ticks (the batches that handed frames to
/// the out port): its core's work, apart from the receiving thread's.
pub const SENDING_THREAD_BUSY: &str = "sending_thread_busy_ticks";

/// Bytes of the signature at the end of the L4 payload.
pub const SIGNATURE_LEN: usize = 16;
const MAGIC: [u8; 2] = [0x5c, 0xf1];
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

/// What a signature carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signature {
    /// The tester's phase it was sent in: even in a warm-up, odd in a window.
    pub phase: u8,
    pub flags: u8,
    pub seq: u32,
    pub timestamp: u64,
}

/// Where a frame's signature goes.
#[derive(Debug, PartialEq, Eq)]
struct Place {
    /// Offset of the signature: the last 16 bytes of the L4 payload (inside the IP
    /// packet, not in Ethernet padding, which a forwarding kernel does not keep).
    at: usize,
    /// The UDP/TCP checksum to update, and whether the signature starts an odd number
    /// of bytes into the L4 segment (its words then straddle the checksum's words).
    checksum: Option<(usize, bool)>,
}

/// `None` for frames that cannot carry a signature (not UDP/TCP over IP, a fragment,
/// fewer than 16 bytes of payload).
#[inline(always)]
fn place(p: &mut Packet) -> Option<Place> {
    // The common frame read straight from its bytes, as `Layers::parse`'s own fast
    // path reads it: untagged IPv4 without options, not a fragment. A tester signs and
    // checks every frame twice, and the general walk was an eighth of its time.
    if let Some(&[0x08, 0x00, 0x45, _, t0, t1, _, _, f0, f1, _, protocol]) = p.data().get(12..24)
        && (f0 & 0x3f) | f1 == 0
    {
        return place_after(p.data(), protocol, 34, 14 + usize::from(u16::from_be_bytes([t0, t1])));
    }
    place_walked(p)
}

/// [`place`] through the frame's parsed layers: VLAN tags, IP options, IPv6.
#[inline(never)]
fn place_walked(p: &mut Packet) -> Option<Place> {
    let layers = p.layers().ok()?;
    if layers.is_fragment() {
        return None;
    }
    let (l3, l4) = (layers.l3_offset(), layers.l4_offset()?);
    let data = p.data();
    let ip_end = match layers.network() {
        Network::Ipv4 => l3 + usize::from(u16::from_be_bytes([data[l3 + 2], data[l3 + 3]])),
        Network::Ipv6 => l3 + 40 + usize::from(u16::from_be_bytes([data[l3 + 4], data[l3 + 5]])),
        _ => return None,
    };
    place_after(data, layers.protocol(), l4, ip_end)
}

/// Where the signature goes in a segment of `protocol` at `l4` of an IP packet that
/// ends at `ip_end`.
#[inline(always)]
fn place_after(data: &[u8], protocol: u8, l4: usize, ip_end: usize) -> Option<Place> {
    let (header, check) = match protocol {
        PROTO_UDP => (8, l4 + 6),
        PROTO_TCP => (usize::from(data.get(l4 + 12)? >> 4) * 4, l4 + 16),
        _ => return None,
    };
    if ip_end > data.len() || ip_end < l4 + header + SIGNATURE_LEN {
        return None;
    }
    let at = ip_end - SIGNATURE_LEN;
    // An IPv4 UDP checksum of 0 means "none": it stays none.
    let none = protocol == PROTO_UDP && data[check..check + 2] == [0, 0];
    Some(Place {
        at,
        checksum: (!none).then_some((check, (at - l4) % 2 == 1)),
    })
}

/// The one's-complement sum of a signature's 16 bytes as the checksum sees them:
/// swapped when they start at an odd offset of the segment. One's-complement addition
/// holds at any width, so the two big-endian halves added with an end-around carry and
/// folded are the sum of the eight 16-bit words (a loop over them was a tenth of a
/// tester's time).
#[inline(always)]
fn word_sum(bytes: &[u8; SIGNATURE_LEN], odd: bool) -> u16 {
    let (high, low) = bytes.split_at(8);
    let (high, low) = (
        u64::from_be_bytes(high.try_into().expect("8 bytes")),
        u64::from_be_bytes(low.try_into().expect("8 bytes")),
    );
    let (sum, carry) = high.overflowing_add(low);
    // After a carry the sum is at most 2^64 - 2: adding it back cannot carry again.
    let sum = sum + u64::from(carry);
    let sum = (sum >> 32) + (sum & 0xffff_ffff);
    let sum = (sum >> 32) + (sum & 0xffff_ffff);
    let s = checksum::fold(sum as u32);
    if odd { s.swap_bytes() } else { s }
}

/// Writes `sig` into the frame's tail and updates its L4 checksum; false when the frame
/// cannot carry one.
pub fn sign(p: &mut Packet, sig: Signature) -> bool {
    let Some(place) = place(p) else { return false };
    let mut new = [0u8; SIGNATURE_LEN];
    new[..2].copy_from_slice(&MAGIC);
    new[2] = sig.phase;
    new[3] = sig.flags;
    new[4..8].copy_from_slice(&sig.seq.to_be_bytes());
    new[8..16].copy_from_slice(&sig.timestamp.to_be_bytes());
    let data = p.data_mut();
    let tail: &mut [u8; SIGNATURE_LEN] = (&mut data[place.at..place.at + SIGNATURE_LEN])
        .try_into()
        .expect("SIGNATURE_LEN bytes");
    if let Some((check, odd)) = place.checksum {
        let (old_sum, new_sum) = (word_sum(tail, odd), word_sum(&new, odd));
        let old_check = u16::from_be_bytes([data[check], data[check + 1]]);
        let mut c = checksum::update16(old_check, old_sum, new_sum);
        // A computed UDP checksum of 0 is sent as all ones (RFC 768); harmless for TCP.
        if c == 0 {
            c = 0xffff;
        }
        data[check..check + 2].copy_from_slice(&c.to_be_bytes());
        data[place.at..place.at + SIGNATURE_LEN].copy_from_slice(&new);
    } else {
        tail.copy_from_slice(&new);
    }
    true
}

/// The signature a frame carries, if it carries one.
pub fn read_signature(p: &mut Packet) -> Option<Signature> {
    let place = place(p)?;
    let t = &p.data()[place.at..place.at + SIGNATURE_LEN];
    (t[..2] == MAGIC).then(|| Signature {
        phase: t[2],
        flags: t[3],
        seq: u32::from_be_bytes(t[4..8].try_into().expect("4 bytes")),
        timestamp: u64::from_be_bytes(t[8..16].try_into().expect("8 bytes")),
    })
}

/// A source's packets sent out through `out` and received back through `back`: the
/// sending half a batch before each read on the same thread ([`TesterLink::new`]), or
/// on a thread of its own ([`TesterLink::with_sender_thread`]).
pub struct TesterLink<G, O, I> {
    sending: Sending<G, O>,
    back: I,
    /// Frames just received, before their signatures are checked.
    inbound: Batch,
    /// Per frame of a received batch: whether it is ours, of this phase.
    ours: Box<[bool; MAX_BATCH]>,
    /// `2 * run` in a run's warm-up, `2 * run + 1` in its window (wrapping): frames of
    /// another phase, of this run or an earlier one, are told apart.
    phase: u8,
    /// Runs begun since the link was made ([`TesterLink::begin_run`]).
    run: u8,
    /// `finish` was called: nothing more is sent until `start_window`.
    finishing: bool,
    /// A sending thread was told to send this phase (at its first read): as on one
    /// thread, nothing is sent between a command and the next read.
    started: bool,
    /// A sending thread's source was seen to have run dry this phase.
    saw_exhausted: bool,
    /// Frames sent as last read from the sending half: at most what it has sent, read
    /// again only when more of this phase come back than that allows.
    known_sent: u64,
    /// Give up on frames in flight after this long without an arrival.
    quiet: u64,
    last_arrival: u64,
    returned: u64,
    written_off: u64,
    foreign: u64,
    late: u64,
}

/// Where the sending half runs.
// One per link, built once: inline, its size costs nothing, a box would cost a pointer
// chase per batch on the one-core tester's path.
#[allow(clippy::large_enum_variant)]
enum Sending<G, O> {
    /// On the receiving thread, a batch before each read.
    Inline(Sender<G, O>),
    /// On a thread of its own.
    Thread(SendingThread<G, O>),
}

impl<G, O> Sending<G, O> {
    /// Frames sent so far (a sending thread's: at least).
    fn sent(&self) -> u64 {
        match self {
            Sending::Inline(s) => s.sent(),
            Sending::Thread(t) => t.published().sent(),
        }
    }
}

impl<G, O, I> TesterLink<G, O, I>
where
    G: RxPort + Send + 'static,
    O: TxPort + Send + 'static,
    I: RxPort,
{
    /// As [`TesterLink::new`], the sending half on a thread of its own at `place`, with
    /// its own pool: where the tester's work per frame limits a run, generating and
    /// signing go to another core. The out port must copy frames (not a zero-copy
    /// memif client).
    pub fn with_sender_thread(
        source: G,
        out: O,
        back: I,
        batch: usize,
        quiet: Duration,
        place: SenderThread,
    ) -> Result<TesterLink<G, O, I>, String> {
        let thread = SendingThread::spawn(Sender::new(source, out, batch), place)?;
        Ok(TesterLink::with_sending(Sending::Thread(thread), back, batch, quiet))
    }
}

impl<G: RxPort, O: TxPort, I: RxPort> TesterLink<G, O, I> {
    /// `quiet`: how long the end of a phase waits for frames still in flight after the
    /// last one arrived (many round trips: a loaded machine can deschedule a device
    /// under test for tens of milliseconds; wired runs wait 300 ms).
    pub fn new(source: G, out: O, back: I, batch: usize, quiet: Duration) -> TesterLink<G, O, I> {
        TesterLink::with_sending(Sending::Inline(Sender::new(source, out, batch)), back, batch, quiet)
    }

    fn with_sending(sending: Sending<G, O>, back: I, batch: usize, quiet: Duration) -> TesterLink<G, O, I> {
        TesterLink {
            sending,
            back,
            inbound: Batch::new(batch),
            ours: Box::new([false; MAX_BATCH]),
            phase: 0,
            run: 0,
            finishing: false,
            started: false,
            saw_exhausted: false,
            known_sent: 0,
            quiet: tsc::ticks(quiet),
            last_arrival: 0,
            returned: 0,
            written_off: 0,
            foreign: 0,
            late: 0,
        }
    }

    /// `f` on the sending half, wherever it runs (on its thread: between batches).
    fn sender<R>(&self, f: impl FnOnce(&Sender<G, O>) -> R) -> R {
        match &self.sending {
            Sending::Inline(s) => f(s),
            Sending::Thread(t) => t.with(|o, _| f(&o.sender)),
        }
    }

    /// A new run over the same wire (the next trial of a search): `source` sends from
    /// now on, starting in the warm-up phase; frames of the last run that come back
    /// later are `late`. Returns the old source.
    pub fn begin_run(&mut self, source: G) -> G {
        self.run = self.run.wrapping_add(1);
        self.phase = self.run.wrapping_mul(2);
        self.finishing = false;
        self.saw_exhausted = false;
        self.started = false;
        let phase = self.phase;
        match &mut self.sending {
            Sending::Inline(s) => s.begin_run(source, phase),
            Sending::Thread(t) => t.with(|o, published| {
                o.rearm(published);
                o.sender.begin_run(source, phase)
            }),
        }
    }

    /// Frames sent that have neither come back nor been written off.
    pub fn in_flight(&self) -> u64 {
        // A duplicating device can return more than was sent while a sending thread's
        // refusals are not yet published: the run's conservation check catches that.
        self.sending.sent().saturating_sub(self.returned + self.written_off)
    }

    /// Takes what came back into `batch`: signed frames of this phase with their
    /// metadata restored; anything else is counted and freed.
    fn receive(&mut self, now: u64, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        let room = batch.room().min(self.inbound.size());
        if room == 0 || self.back.rx(now, pool, &mut self.inbound) == 0 {
            return 0;
        }
        let phase = self.phase;
        let (mut foreign, mut late, mut taken) = (0, 0, 0u64);
        // Frames of this phase beyond those in flight were written off already (they
        // came back after `quiet`): late, as an earlier phase's. What was sent is read
        // from a sending thread only when the last reading does not cover a frame.
        let mut expected = self.known_sent.saturating_sub(self.returned + self.written_off);
        let mut read_again = false;
        for (p, ok) in self.inbound.iter_mut().zip(self.ours.iter_mut()) {
            *ok = match read_signature(p) {
                Some(sig) if sig.phase == phase => {
                    if expected == 0 && !read_again {
                        read_again = true;
                        self.known_sent = self.sending.sent();
                        expected = self.known_sent.saturating_sub(self.returned + self.written_off + taken);
                    }
                    if expected > 0 {
                        expected -= 1;
                        taken += 1;
                        p.meta.flags = u16::from(sig.flags);
                        p.meta.seq = sig.seq;
                        p.meta.timestamp = sig.timestamp;
                        true
                    } else {
                        late += 1;
                        false
                    }
                }
                Some(_) => {
                    late += 1;
                    false
                }
                None => {
                    foreign += 1;
                    false
                }
            };
        }
        let ours = &self.ours;
        self.inbound.partition(|i, _| ours[i], |_, p| pool.free(p));
        let n = self.inbound.len();
        batch.append_from(&mut self.inbound);
        self.foreign += foreign;
        self.late += late;
        self.returned += n as u64;
        if n > 0 {
            self.last_arrival = now;
        }
        n
    }

    /// The device under test has stopped: frames that came back since the tester's last
    /// read (given up on when it ended) are counted `late` and freed, until its port has
    /// none; what the port keeps for a reader it then discards, counted. A slow device
    /// still draining its queue when the tester ended returns them after it.
    pub fn take_late(&mut self, pool: &mut PacketPool) {
        loop {
            let n = self.back.rx(tsc::now(), pool, &mut self.inbound);
            if n == 0 {
                break;
            }
            self.late += n as u64;
            self.inbound.drain().for_each(|p| pool.free(p));
        }
        self.back.discard_unread();
    }

    /// Nothing more will be sent; frames still out after `quiet` without an arrival are
    /// written off (dropped, `unaccounted`).
    fn give_up_when_quiet(&mut self, now: u64) {
        if self.in_flight() > 0 && now.saturating_sub(self.last_arrival) > self.quiet {
            self.written_off += self.in_flight();
        }
    }

    /// Nothing more will be sent this phase. A sending thread's counts are final once
    /// its source is seen dry (published after its last batch's).
    fn sending_ended(&self) -> bool {
        match &self.sending {
            Sending::Inline(s) => s.done(),
            Sending::Thread(t) => self.finishing || t.published().exhausted(),
        }
    }

    /// [`TesterLink::sending_ended`]; a sending thread's quiet clock runs from when its
    /// source is first seen dry at the latest.
    fn sending_done(&mut self, now: u64) -> bool {
        let done = self.sending_ended();
        if done && !self.finishing && !self.saw_exhausted && matches!(self.sending, Sending::Thread(_)) {
            self.saw_exhausted = true;
            self.last_arrival = now;
        }
        done
    }
}

impl<G: RxPort, O: TxPort, I: RxPort> RxPort for TesterLink<G, O, I> {
    fn rx(&mut self, now: u64, pool: &mut PacketPool, batch: &mut Batch) -> usize {
        match &mut self.sending {
            Sending::Inline(s) if !s.done() => {
                // The first frames in flight: the quiet clock starts now.
                let idle = self.known_sent == self.returned + self.written_off;
                if s.send(now, pool, None) > 0 && idle {
                    self.last_arrival = now;
                }
                self.known_sent = s.sent();
            }
            // What the out port still holds leaves now, not never.
            Sending::Inline(s) if self.known_sent > self.returned + self.written_off => s.out.flush(),
            Sending::Inline(_) => {}
            Sending::Thread(t) => {
                if !self.started {
                    self.started = true;
                    t.with(|o, _| o.running = true);
                }
            }
        }
        let n = self.receive(now, pool, batch);
        if n == 0 && self.sending_done(now) {
            self.give_up_when_quiet(now);
        }
        n
    }

    fn exhausted(&self) -> bool {
        self.sending_ended() && self.in_flight() == 0
    }

    fn needs_fresh_clock(&self) -> bool {
        true
    }

    fn stats(&self) -> PortStats {
        let (s, earlier, refused, unsignable) = self.sender(|s| (s.source.stats(), s.earlier, s.refused, s.unsignable));
        PortStats {
            packets: earlier.packets + s.packets,
            bytes: earlier.bytes + s.bytes,
            dropped: refused + unsignable + self.written_off,
        }
    }

    /// A sending thread primed its own pool; frames come back into the run's as copies.
    fn prime(&self, pool: &mut PacketPool) {
        if let Sending::Inline(s) = &self.sending {
            s.source.prime(pool);
        }
    }

    /// What its ports may hold of a shared pool (memif zero-copy clients: frames
    /// generated in the pool go out as descriptors, frames back are used in place).
    fn shared_pool_need(&self) -> Option<usize> {
        let out = match &self.sending {
            Sending::Inline(s) => s.out.shared_pool_need(),
            Sending::Thread(_) => None,
        };
        match (out, self.back.shared_pool_need()) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        }
    }

    fn attach_pool(&mut self, pool: &PacketPool) {
        if let Sending::Inline(s) = &mut self.sending {
            s.out.attach_pool(pool);
        }
        self.back.attach_pool(pool);
    }

    fn return_buffers(&mut self, pool: &mut PacketPool) {
        match &mut self.sending {
            Sending::Inline(s) => s.out.return_buffers(pool),
            Sending::Thread(t) => t.with(|o, _| o.sender.out.return_buffers(&mut o.pool)),
        }
        self.back.return_buffers(pool);
    }

    fn start_window(&mut self, count: Option<u64>) {
        self.finishing = false;
        self.saw_exhausted = false;
        self.started = false;
        self.phase = self.run.wrapping_mul(2).wrapping_add(1);
        let phase = self.phase;
        match &mut self.sending {
            Sending::Inline(s) => s.start_window(phase, count),
            Sending::Thread(t) => t.with(|o, published| {
                o.rearm(published);
                o.sender.start_window(phase, count);
            }),
        }
        self.back.start_window(None);
    }

    fn requested_pps(&self) -> Option<f64> {
        self.sender(|s| s.source.requested_pps())
    }

    fn shortfall(&self) -> Shortfall {
        self.sender(|s| Shortfall {
            not_offered: s.refused + s.unsignable,
            ..s.source.shortfall()
        })
    }

    fn counters(&self) -> Vec<NfCounter> {
        let mut c = vec![
            NfCounter::total("sent", self.sending.sent()),
            NfCounter::total("returned", self.returned),
            NfCounter::gauge("in_flight", self.in_flight()),
            NfCounter::total("foreign", self.foreign),
            NfCounter::total("late", self.late),
        ];
        if let Sending::Thread(t) = &self.sending {
            c.push(NfCounter::total(SENDING_THREAD_BUSY, t.with(|o, _| o.busy_ticks)));
        }
        self.sender(|s| {
            c.extend(s.source.counters());
            c.extend(
                TxPort::counters(&s.out)
                    .into_iter()
                    .filter(|c| c.name.starts_with("tx_")),
            );
        });
        c.extend(
            self.back
                .counters()
                .into_iter()
                .filter(|c| c.name.starts_with("rx_") || c.name.starts_with("kernel_rx")),
        );
        c
    }

    fn drops(&self) -> Vec<(&'static str, u64)> {
        let written_off = self.written_off;
        self.sender(|s| {
            // Of what never came back, what the sending port's peer left on its ring when
            // it went away has a known place; the rest is unaccounted.
            let in_flight = s.out.lost_in_flight().min(written_off);
            // What the sending port refused, by the cause it names (its line's credit, its
            // ring full, no peer): a line that is the limit and a device under test that
            // is are told apart. What it does not name is `tx-refused`.
            let mut d: Vec<(&'static str, u64)> = Vec::new();
            let mut named = 0;
            for (cause, n) in s.out.drops() {
                let n = n.min(s.refused - named);
                named += n;
                d.push((cause, n));
            }
            d.extend([
                ("tx-refused", s.refused - named),
                ("unsignable", s.unsignable),
                (IN_FLIGHT_AT_DISCONNECT, in_flight),
                ("unaccounted", written_off - in_flight),
            ]);
            d
        })
    }

    fn finish(&mut self) -> bool {
        self.finishing = true;
        match &mut self.sending {
            Sending::Inline(s) => s.finishing = true,
            Sending::Thread(t) => {
                // Between its batches: what it sent is final once this returns, and
                // what the out port holds leaves now.
                t.with(|o, _| {
                    o.sender.finishing = true;
                    o.sender.out.flush();
                });
                self.last_arrival = tsc::now();
            }
        }
        self.known_sent = self.sending.sent();
        self.in_flight() > 0
    }

    fn info(&self) -> PortInfo {
        let (g, o) = self.sender(|s| (s.source.info(), s.out.info()));
        let b = self.back.info();
        let mut settings = BTreeMap::new();
        for (prefix, info) in [("source", &g), ("out", &o), ("back", &b)] {
            settings.insert(format!("{prefix}.kind"), info.kind.clone());
            for (k, v) in &info.settings {
                settings.insert(format!("{prefix}.{k}"), v.clone());
            }
        }
        let mut summary = format!("{} out {}, back {}", g.summary, o.summary, b.summary);
        if let Sending::Thread(t) = &self.sending {
            let core = t.place.core.map_or("any".to_string(), |c| c.to_string());
            settings.insert("sender.core".into(), core.clone());
            summary.push_str(&format!("; sending on a thread of its own (core {core})"));
        }
        PortInfo {
            kind: "tester".into(),
            summary,
            settings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sfclab_core::PacketPool;

    #[test]
    fn a_signatures_sum_keeps_zero_and_all_ones_apart() {
        assert_eq!(word_sum(&[0; SIGNATURE_LEN], false), 0);
        assert_eq!(word_sum(&[0xff; SIGNATURE_LEN], false), 0xffff);
        // 0x8000 eight times: carries out of both halves and the fold.
        assert_eq!(
            word_sum(
                &[0x80, 0, 0x80, 0, 0x80, 0, 0x80, 0, 0x80, 0, 0x80, 0, 0x80, 0, 0x80, 0],
                false
            ),
            4
        );
    }

    proptest! {
        /// The sum of the two halves is the sum of the words, as the checksum module
        /// adds them, at either parity.
        #[test]
        fn a_signatures_sum_in_halves_is_its_words_sum(bytes in any::<[u8; SIGNATURE_LEN]>(), odd in any::<bool>()) {
            let words = checksum::fold(checksum::sum(0, &bytes));
            let words = if odd { words.swap_bytes() } else { words };
            prop_assert_eq!(word_sum(&bytes, odd), words);
        }

        /// The bytes-first path finds the signature where the walk through the parsed
        /// layers does, on frames shaped like the common one and broken in any header
        /// byte: a total length past the frame or too short, a fragment, another
        /// protocol, TCP with any data offset, options, VLAN tags, too short a frame.
        #[test]
        fn the_common_frames_place_is_the_walks(
            len in 14usize..200,
            common in any::<bool>(),
            header in proptest::collection::vec(any::<u8>(), 60),
            total in 0u16..220,
            protocol in prop_oneof![Just(PROTO_UDP), Just(PROTO_TCP), any::<u8>()],
            fragment in prop_oneof![Just(0u16), any::<u16>()],
        ) {
            let mut pool = PacketPool::new(1);
            let mut p = pool.alloc().unwrap();
            let frame = p.reset(len);
            let n = frame.len().min(header.len());
            frame[..n].copy_from_slice(&header[..n]);
            if common && len >= 24 {
                frame[12..15].copy_from_slice(&[0x08, 0x00, 0x45]);
                frame[16..18].copy_from_slice(&total.to_be_bytes());
                frame[20..22].copy_from_slice(&fragment.to_be_bytes());
                frame[23] = protocol;
            }
            let fast = place(&mut p);
            let walked = place_walked(&mut p);
            prop_assert_eq!(fast, walked);
            pool.free(p);
        }
    }
}
