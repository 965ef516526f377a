//! `nat44`: network address and port translation (NAPT, RFC 3022) with
//! endpoint-independent mapping and filtering (RFC 4787 REQ-1, "full cone").
//!
//! A packet from an `inside` address (outbound) gets a public address and port from the
//! pool: the same internal address and port keep the same public pair whatever the
//! destination (EIM). A packet to a public pair in use (inbound) is translated back; one
//! to a pair with no mapping is dropped (`no-mapping`). TCP and UDP ports and ICMP query
//! identifiers (echo) are translated; IPv4 header and L4 checksums are updated
//! incrementally (RFC 1624; a UDP checksum of 0 stays 0). Anything else passes untouched
//! (`passed`). Mappings expire after their timeout (UDP 2 min, RFC 4787 REQ-5; TCP
//! established 2 h 4 min and transitory 4 min, RFC 5382 REQ-5; ICMP 60 s, RFC 5508),
//! lazily on use and by a sweep in the slow path, and the table is bounded: a flood of
//! new flows cannot grow memory. Public pairs come from a free list per protocol (the
//! pool's pairs spread over its addresses; a released pair goes to the back), so taking
//! one costs the same with the pool empty or full. When the table or the pool is full, a
//! new flow takes the place of an unassured mapping (a TCP one not established, a UDP or
//! ICMP one that never had a packet back) or an expired one, the oldest first, as
//! netfilter's `early_drop` does; assured mappings are never taken, so the
//! flows that work keep working under a flood, and a new flow that finds no such
//! mapping is dropped (`nat-table-full`, `ports-exhausted`) at once: the line of
//! mappings that could give way is empty. A batch is worked in steps so that the trips
//! to memory of a large table overlap: every flow's bucket of the inside map
//! (`tables::flow_map`) is asked for, then looked up and its mapping asked for (or, for
//! a new flow, the public pair and the mapping it will take), then translated.
//!
//! Keys: `inside` (prefixes, default 198.18.0.0/16: the generator's sources; its
//! destinations, 198.19.0.0/16, are outside), `public`
//! (the pool, prefixes or addresses, default 203.0.113.0/28), `ports` (default
//! `1024-65535`), `max_sessions` (default 1,048,576), `udp_timeout` (120s),
//! `tcp_established_timeout` (7440s), `tcp_transitory_timeout` (240s), `icmp_timeout` (60s).
//!
//! Counters: `sessions` (gauge), `created`, `expired`, `evicted` (unassured mappings that
//! gave way to new flows), `out`, `in`, `passed`, `capacity` and `table_bytes` (gauges: the
//! session table's bound and its memory with the free lists, preallocated). Drops:
//! `malformed`, `unsupported` (not IPv4), and its own `nat-table-full`,
//! `ports-exhausted`, `no-mapping`, `fragment` (non-first fragments carry no ports;
//! reassembly is not done here).

use serde::Deserialize;
use sfclab_core::{BatchView, Context, DropReason, NetworkFunction, NfCounter, Packet, Verdicts};
use sfclab_wire::checksum::{update16, update32};

use crate::ConfigError;
use crate::frame;
use crate::tables::eviction::EvictionLine;
use crate::tables::flow_map::FlowMap;

/// This NF's own drop reasons, in code order (`drop_reasons()`).
const DROP_REASONS: &[&str] = &["nat-table-full", "ports-exhausted", "no-mapping", "fragment"];
const TABLE_FULL: DropReason = DropReason::named(DROP_REASONS, "nat-table-full");
const PORTS_EXHAUSTED: DropReason = DropReason::named(DROP_REASONS, "ports-exhausted");
const NO_MAPPING: DropReason = DropReason::named(DROP_REASONS, "no-mapping");
const FRAGMENT: DropReason = DropReason::named(DROP_REASONS, "fragment");

const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMP: u8 = 1;

/// One end of a mapping: protocol, address, port (or ICMP identifier).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Endpoint {
    proto: u8,
    addr: u32,
    port: u16,
}

impl Endpoint {
    /// As one nonzero number (the protocol is never 0 here): its key in the inside map.
    #[inline(always)]
    fn key(&self) -> u64 {
        u64::from(self.proto) << 48 | u64::from(self.port) << 32 | u64::from(self.addr)
    }

    /// The sender of `p`.
    fn source(p: &Parsed) -> Endpoint {
        Endpoint {
            proto: p.proto,
            addr: p.src,
            port: p.sport,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TcpState {
    /// SYN seen, not yet both ways: the transitory timeout.
    Opening,
    Established,
    /// FIN or RST seen: the transitory timeout.
    Closing,
}

#[derive(Debug, Clone, Copy)]
struct Mapping {
    inside: Endpoint,
    public: Endpoint,
    last_ns: u64,
    tcp: TcpState,
    /// SYNs seen from inside and from outside.
    syn_out: bool,
    syn_in: bool,
    /// A packet came back through it (inbound).
    answered: bool,
}

impl Mapping {
    /// Carries a flow that works: TCP established, or anything answered. Only an
    /// unassured mapping gives way to a new flow.
    fn assured(&self) -> bool {
        match self.inside.proto {
            TCP => self.tcp == TcpState::Established,
            _ => self.answered,
        }
    }
}

/// Free public pairs of one protocol, oldest freed first, by ordinal
/// (`Pool::ordinal`).
type FreePairs = std::collections::VecDeque<u32>;

/// No mapping holds this public pair.
const NO_SLOT: u32 = u32::MAX;

/// The public pairs NAT hands out, numbered port by port across the addresses (a flood
/// spreads over all of them): ordinal `(port - lo) * addresses + address index`, up to
/// `pairs` (the table's worth and a margin: more is never needed).
#[derive(Debug, Clone)]
struct Pool {
    /// Sorted.
    addresses: Vec<u32>,
    lo: u16,
    pairs: u32,
}

impl Pool {
    /// The index of a pool address, if it is one.
    #[inline]
    fn address(&self, addr: u32) -> Option<usize> {
        self.addresses.binary_search(&addr).ok()
    }

    /// The ordinal of the pair (the address at index `a`, `port`), if the pool hands it out.
    #[inline]
    fn ordinal(&self, a: usize, port: u16) -> Option<u32> {
        let k = u64::from(port.checked_sub(self.lo)?) * self.addresses.len() as u64 + a as u64;
        (k < u64::from(self.pairs)).then_some(k as u32)
    }

    #[inline]
    fn pair(&self, ordinal: u32) -> (u32, u16) {
        let n = self.addresses.len() as u32;
        (self.addresses[(ordinal % n) as usize], self.lo + (ordinal / n) as u16)
    }
}

pub struct Nat44 {
    inside: Vec<(u32, u32)>,
    max_sessions: usize,
    timeouts_ns: Timeouts,
    /// Mappings by slot; `None` slots are free (listed in `free`).
    slots: Vec<Option<Mapping>>,
    free: Vec<u32>,
    by_inside: FlowMap<u64, 4>,
    pool: Pool,
    /// Per protocol (TCP, UDP, ICMP), the slot of the mapping holding each public pair
    /// by ordinal (`NO_SLOT`: free): one indexed read where a hash table would probe.
    by_public: [Vec<u32>; 3],
    /// Free public pairs for TCP, UDP and ICMP.
    free_pairs: [FreePairs; 3],
    /// Where a new flow looks for a mapping to take the place of when the table or the
    /// pool is full.
    line: EvictionLine,
    /// Where the slow-path sweep continues.
    sweep: usize,
    /// Per packet of the batch: what the first step parsed and the slot the second found.
    ahead: Vec<Ahead>,
    /// The inside map's version when step 2 ended.
    looked_up_at: u64,
    now_ns: u64,
    counts: Counts,
}

#[derive(Default)]
struct Counts {
    created: u64,
    expired: u64,
    evicted: u64,
    out: u64,
    inbound: u64,
    passed: u64,
}

#[derive(Debug, Clone, Copy)]
struct Timeouts {
    udp: u64,
    tcp_established: u64,
    tcp_transitory: u64,
    icmp: u64,
}

impl Timeouts {
    fn of(&self, m: &Mapping) -> u64 {
        match m.inside.proto {
            UDP => self.udp,
            ICMP => self.icmp,
            _ if m.tcp == TcpState::Established => self.tcp_established,
            _ => self.tcp_transitory,
        }
    }
}

/// A packet of the batch between the steps of `process`.
#[derive(Clone, Copy)]
struct Ahead {
    parsed: Result<Option<Parsed>, DropReason>,
    /// From an inside address (outbound).
    inside: bool,
    /// Its mapping's slot, if it had one when looked up.
    found: Option<u32>,
}

impl Ahead {
    const NONE: Ahead = Ahead {
        parsed: Ok(None),
        inside: false,
        found: None,
    };
}

/// The parts of a frame NAT rewrites.
#[derive(Clone, Copy)]
struct Parsed {
    /// Offset of the IPv4 header and of the L4 header.
    l3: usize,
    l4: usize,
    proto: u8,
    src: u32,
    dst: u32,
    /// Source and destination port (ICMP: the identifier, both).
    sport: u16,
    dport: u16,
    tcp_flags: u8,
}

impl NetworkFunction for Nat44 {
    fn kind(&self) -> &'static str {
        TYPE.kind
    }

    fn drop_reasons(&self) -> &'static [&'static str] {
        DROP_REASONS
    }

    fn process(&mut self, ctx: &mut Context<'_>, mut batch: BatchView<'_>, verdicts: &mut Verdicts) {
        let now = ctx.now_ns();
        self.now_ns = now;
        // With a million flows every entry a packet needs is a trip to memory; the
        // trips of a batch overlap when each is asked for (prefetched) a step before it
        // is read. Step 1: parse, ask for each inside flow's bucket.
        let n = batch.len();
        for i in 0..n {
            let parsed = parse(batch.get_mut(i));
            let inside = matches!(&parsed, Ok(Some(p)) if self.is_inside(p.src));
            if let (true, Ok(Some(p))) = (inside, &parsed) {
                self.by_inside.prefetch(&Endpoint::source(p).key());
            }
            self.ahead[i] = Ahead {
                parsed,
                inside,
                found: None,
            };
        }
        // Step 2: look the flows up, ask for their mappings; a flow with none will take
        // the next free public pair of its protocol and, with the table or the pool
        // full, the place of the next mapping on the eviction line: ask for those.
        let mut new_flows = [0usize; 3];
        let mut evictions = 0;
        for i in 0..n {
            let (Ok(Some(p)), true) = (self.ahead[i].parsed, self.ahead[i].inside) else {
                continue;
            };
            let found = self.by_inside.get(&Endpoint::source(&p).key());
            self.ahead[i].found = found;
            match found {
                Some(s) => sfclab_core::prefetch(&self.slots[s as usize]),
                None => self.prefetch_new(p.proto, &mut new_flows, &mut evictions),
            }
        }
        self.looked_up_at = self.by_inside.version();
        // Step 3: what freeing each mapping that gives way touches: its public pair's
        // entry and its bucket in the inside map.
        for k in 0..evictions {
            let Some(m) = self.line.upcoming(k).and_then(|s| self.slots[s as usize]) else {
                continue;
            };
            if let Some(ordinal) = self
                .pool
                .address(m.public.addr)
                .and_then(|a| self.pool.ordinal(a, m.public.port))
            {
                sfclab_core::prefetch(&self.by_public[proto_index(m.public.proto)][ordinal as usize]);
            }
            self.by_inside.prefetch(&m.inside.key());
        }
        // Step 4: translate, in order (a packet may find its flow made or gone by one
        // before it: `outbound` checks what step 2 found).
        for i in 0..n {
            let Ahead { parsed, inside, found } = std::mem::replace(&mut self.ahead[i], Ahead::NONE);
            let p = match parsed {
                Ok(Some(p)) => p,
                Ok(None) => {
                    self.counts.passed += 1;
                    continue;
                }
                Err(reason) => {
                    verdicts.drop(i, reason);
                    continue;
                }
            };
            let data = batch.get_mut(i).data_mut();
            let result = if inside {
                self.outbound(data, &p, found, now)
            } else if let Some(a) = self.pool.address(p.dst) {
                self.inbound(data, &p, a, now)
            } else {
                self.counts.passed += 1;
                Ok(())
            };
            if let Err(reason) = result {
                verdicts.drop(i, reason);
            }
        }
    }

    /// Reclaims expired mappings a slice at a time, so the table frees space even for
    /// flows that are never seen again.
    fn tick(&mut self, _now: u64) {
        let n = self.slots.len();
        for _ in 0..n.min(4096) {
            self.sweep = if self.sweep + 1 >= n { 0 } else { self.sweep + 1 };
            if let Some(m) = self.slots.get(self.sweep).copied().flatten()
                && self.now_ns.saturating_sub(m.last_ns) > self.timeouts_ns.of(&m)
            {
                self.remove(self.sweep as u32);
            }
        }
    }

    fn counters(&self) -> Vec<NfCounter> {
        let c = &self.counts;
        vec![
            NfCounter::gauge("sessions", self.by_inside.len() as u64),
            NfCounter::total("created", c.created),
            NfCounter::total("expired", c.expired),
            NfCounter::total("evicted", c.evicted),
            NfCounter::total("out", c.out),
            NfCounter::total("in", c.inbound),
            NfCounter::total("passed", c.passed),
            NfCounter::gauge("capacity", self.max_sessions as u64),
            NfCounter::gauge("table_bytes", self.table_bytes() as u64),
        ]
    }
}

/// The frame's IPv4 and L4 fields; `Ok(None)` for what NAT leaves alone (not TCP, UDP or
/// ICMP echo), `Err` for what it drops.
#[inline]
fn parse(p: &mut Packet) -> Result<Option<Parsed>, DropReason> {
    let at = frame::ipv4(p)?;
    let proto = at.protocol;
    if !matches!(proto, TCP | UDP | ICMP) {
        return Ok(None);
    }
    // A later fragment has no ports to translate by (reassembly is not NAT's job here).
    let Some(l4) = at.l4 else {
        return Err(FRAGMENT);
    };
    let data = p.data();
    let l3 = at.l3;
    let ip = data.get(l3..l3 + 20).ok_or(DropReason::MALFORMED)?;
    let l4_bytes = data.get(l4..at.end).ok_or(DropReason::MALFORMED)?;
    let need = match proto {
        TCP => 20,
        UDP => 8,
        _ => 8,
    };
    if l4_bytes.len() < need {
        return Err(DropReason::MALFORMED);
    }
    let word = |at: usize| u16::from_be_bytes([l4_bytes[at], l4_bytes[at + 1]]);
    let (sport, dport, tcp_flags) = match proto {
        ICMP => {
            // Echo request (8) and reply (0) carry an identifier; errors are left alone.
            if !matches!(l4_bytes[0], 0 | 8) {
                return Ok(None);
            }
            (word(4), word(4), 0)
        }
        TCP => (word(0), word(2), l4_bytes[13]),
        _ => (word(0), word(2), 0),
    };
    Ok(Some(Parsed {
        l3,
        l4,
        proto,
        src: u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]),
        dst: u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]),
        sport,
        dport,
        tcp_flags,
    }))
}

impl Nat44 {
    /// Memory of the session table, allocated for `max_sessions` up front.
    pub fn table_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Option<Mapping>>()
            + self.free.capacity() * std::mem::size_of::<u32>()
            + self.by_inside.allocation_size()
            + self.by_public.iter().map(|b| b.capacity() * 4).sum::<usize>()
            + self.free_pairs.iter().map(|f| f.capacity() * 4).sum::<usize>()
            + self.line.bytes()
    }

    fn is_inside(&self, addr: u32) -> bool {
        self.inside.iter().any(|&(net, mask)| addr & mask == net)
    }

    #[inline]
    /// A packet from inside; `found`: its mapping's slot as the batch's first pass saw
    /// it (a packet before this one may have removed or made a mapping since).
    fn outbound(&mut self, data: &mut [u8], p: &Parsed, found: Option<u32>, now: u64) -> Result<(), DropReason> {
        let key = Endpoint::source(p);
        // What step 2 found holds if the slot still maps this flow, and its absence if
        // the map has not changed since.
        let slot = match found {
            Some(s) if self.slots[s as usize].is_some_and(|m| m.inside == key) => Some(s),
            None if self.by_inside.version() == self.looked_up_at => None,
            _ => self.by_inside.get(&key.key()),
        };
        let slot = match self.live(slot, now) {
            Some(s) => s,
            None => self.create(key, now)?,
        };
        let m = self.slots[slot as usize].as_mut().expect("a live slot");
        m.last_ns = now;
        let tcp = p.proto == TCP;
        if tcp {
            track_tcp(m, p.tcp_flags, true);
        }
        let public = m.public;
        if tcp {
            self.note_assurance(slot);
        }
        rewrite(data, p, true, public.addr, public.port);
        self.counts.out += 1;
        Ok(())
    }

    #[inline]
    /// A packet to the pool address at index `a`.
    fn inbound(&mut self, data: &mut [u8], p: &Parsed, a: usize, now: u64) -> Result<(), DropReason> {
        let held = self
            .pool
            .ordinal(a, p.dport)
            .map(|k| self.by_public[proto_index(p.proto)][k as usize])
            .filter(|&s| s != NO_SLOT);
        let slot = self.live(held, now).ok_or(NO_MAPPING)?;
        let m = self.slots[slot as usize].as_mut().expect("a live slot");
        m.last_ns = now;
        m.answered = true;
        if p.proto == TCP {
            track_tcp(m, p.tcp_flags, false);
        }
        let inside = m.inside;
        self.note_assurance(slot);
        rewrite(data, p, false, inside.addr, inside.port);
        self.counts.inbound += 1;
        Ok(())
    }

    /// Asks for the lines a new flow of `proto` will touch: the public pair it will take
    /// (the `new_flows[proto]`-th free one) and, when the table or the pool is full, the
    /// mapping it will most likely take the place of (the `evictions`-th on the line).
    #[inline]
    fn prefetch_new(&self, proto: u8, new_flows: &mut [usize; 3], evictions: &mut usize) {
        let k = proto_index(proto);
        if let Some(&ordinal) = self.free_pairs[k].get(new_flows[k]) {
            sfclab_core::prefetch(&self.by_public[k][ordinal as usize]);
        }
        new_flows[k] += 1;
        if self.free.len() < *evictions + 1 || self.free_pairs[k].len() < new_flows[k] {
            if let Some(slot) = self.line.upcoming(*evictions) {
                sfclab_core::prefetch(&self.slots[slot as usize]);
            }
            *evictions += 1;
        }
    }

    /// The slot if its mapping has not timed out (an expired one is removed).
    #[inline]
    fn live(&mut self, slot: Option<u32>, now: u64) -> Option<u32> {
        let s = slot?;
        let m = self.slots[s as usize].expect("indexed slots are live");
        if now.saturating_sub(m.last_ns) > self.timeouts_ns.of(&m) {
            self.remove(s);
            return None;
        }
        Some(s)
    }

    fn remove(&mut self, slot: u32) {
        if self.release(slot) {
            self.counts.expired += 1;
        }
    }

    /// Frees the slot's mapping and its public pair; false when the slot was free.
    fn release(&mut self, slot: u32) -> bool {
        let Some(m) = self.slots[slot as usize].take() else {
            return false;
        };
        self.by_inside.remove(&m.inside.key());
        let ordinal = self
            .pool
            .address(m.public.addr)
            .and_then(|a| self.pool.ordinal(a, m.public.port))
            .expect("handed out by the pool");
        let proto = proto_index(m.public.proto);
        self.by_public[proto][ordinal as usize] = NO_SLOT;
        self.free_pairs[proto].push_back(ordinal);
        self.line.freed(slot);
        self.free.push(slot);
        true
    }

    /// Keeps the line's assured bit as the slot's mapping is.
    #[inline]
    fn note_assurance(&mut self, slot: u32) {
        let slots = &self.slots;
        let assured = slots[slot as usize].is_some_and(|m| m.assured());
        self.line.assure(slot, assured, |s| slots[s as usize].is_some());
    }

    /// Makes room for a new flow: the oldest mapping that is expired or unassured is
    /// taken. True when one was freed.
    #[cold]
    fn evict(&mut self, now: u64) -> bool {
        loop {
            let slots = &self.slots;
            let Some(slot) = self.line.candidate(|s| slots[s as usize].is_some()) else {
                return false;
            };
            let m = self.slots[slot as usize].expect("a live candidate");
            if now.saturating_sub(m.last_ns) > self.timeouts_ns.of(&m) {
                self.remove(slot);
                return true;
            }
            if !m.assured() {
                self.release(slot);
                self.counts.evicted += 1;
                return true;
            }
        }
    }

    /// A new mapping for `inside`: a free slot and the oldest free public pair; when
    /// there is none, an unassured or expired mapping gives way (`evict`).
    #[cold]
    fn create(&mut self, inside: Endpoint, now: u64) -> Result<u32, DropReason> {
        let pairs = proto_index(inside.proto);
        while self.free.is_empty() || self.free_pairs[pairs].is_empty() {
            let reason = if self.free.is_empty() {
                TABLE_FULL
            } else {
                PORTS_EXHAUSTED
            };
            if !self.evict(now) {
                return Err(reason);
            }
        }
        let ordinal = self.free_pairs[pairs].pop_front().expect("checked");
        let (addr, port) = self.pool.pair(ordinal);
        let public = Endpoint {
            proto: inside.proto,
            addr,
            port,
        };
        let slot = self.free.pop().expect("checked");
        self.slots[slot as usize] = Some(Mapping {
            inside,
            public,
            last_ns: now,
            tcp: TcpState::Opening,
            syn_out: false,
            syn_in: false,
            answered: false,
        });
        let slots = &self.slots;
        self.line.made(slot, |s| slots[s as usize].is_some());
        self.by_inside.insert(inside.key(), slot);
        self.by_public[pairs][ordinal as usize] = slot;
        self.counts.created += 1;
        Ok(slot)
    }
}

/// The free-pair list of a protocol NAT translates.
fn proto_index(proto: u8) -> usize {
    match proto {
        TCP => 0,
        UDP => 1,
        _ => 2,
    }
}

/// Every ordinal of the pool as a free list, in order.
fn pool_pairs(pool: &Pool) -> FreePairs {
    (0..pool.pairs).collect()
}

/// TCP state for timeouts (RFC 5382): established once SYNs went both ways and an ACK
/// followed; closing on FIN or RST.
fn track_tcp(m: &mut Mapping, flags: u8, outbound: bool) {
    const FIN: u8 = 0x01;
    const SYN: u8 = 0x02;
    const RST: u8 = 0x04;
    const ACK: u8 = 0x10;
    if flags & (FIN | RST) != 0 {
        m.tcp = TcpState::Closing;
        return;
    }
    if flags & SYN != 0 {
        if outbound {
            m.syn_out = true;
        } else {
            m.syn_in = true;
        }
        if m.tcp == TcpState::Closing {
            m.tcp = TcpState::Opening;
        }
    } else if flags & ACK != 0 && m.syn_out && m.syn_in && m.tcp == TcpState::Opening {
        m.tcp = TcpState::Established;
    }
}

/// Rewrites the source (outbound) or destination (inbound) address and port, updating
/// the IPv4 header checksum and the L4 checksum (RFC 1624).
#[inline]
fn rewrite(data: &mut [u8], p: &Parsed, outbound: bool, addr: u32, port: u16) {
    let (ip_at, port_at, old_addr, old_port) = if outbound {
        (p.l3 + 12, p.l4, p.src, p.sport)
    } else {
        (p.l3 + 16, p.l4 + 2, p.dst, p.dport)
    };
    let port_at = if p.proto == ICMP { p.l4 + 4 } else { port_at };
    data[ip_at..ip_at + 4].copy_from_slice(&addr.to_be_bytes());
    let ip_sum = u16::from_be_bytes([data[p.l3 + 10], data[p.l3 + 11]]);
    data[p.l3 + 10..p.l3 + 12].copy_from_slice(&update32(ip_sum, old_addr, addr).to_be_bytes());
    data[port_at..port_at + 2].copy_from_slice(&port.to_be_bytes());
    let sum_at = match p.proto {
        TCP => p.l4 + 16,
        UDP => p.l4 + 6,
        _ => p.l4 + 2,
    };
    let old_sum = u16::from_be_bytes([data[sum_at], data[sum_at + 1]]);
    if p.proto == UDP && old_sum == 0 {
        return; // No checksum (RFC 768): nothing to update.
    }
    // TCP and UDP sums cover the addresses (pseudo-header); ICMP's only its own bytes.
    let mut sum = if p.proto == ICMP {
        old_sum
    } else {
        update32(old_sum, old_addr, addr)
    };
    sum = update16(sum, old_port, port);
    if p.proto == UDP && sum == 0 {
        sum = 0xffff;
    }
    data[sum_at..sum_at + 2].copy_from_slice(&sum.to_be_bytes());
}

/// Registers `nat44`.
pub const TYPE: crate::NfType = crate::NfType {
    kind: "nat44",
    about: "NAPT (RFC 3022), endpoint-independent mapping and filtering (RFC 4787), bounded table, timeouts",
    stateless: false,
    cost_neutral: &[
        "icmp_timeout",
        "tcp_established_timeout",
        "tcp_transitory_timeout",
        "udp_timeout",
    ],
    files: &[],
    wraps: None,
    schema: || schemars::schema_for!(Nat44Config),
    drops_all_by_default: None,
    fixes: &[(
        "no-mapping",
        "only inside-to-outside flows open mappings: send from the inside (`inside:` prefixes), as examples/chains/nat44.yaml does",
    )],
    build: |v| Ok(Box::new(Nat44::new(&crate::typed(v)?)?)),
};

#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Nat44Config {
    /// Inside prefixes: packets from these are translated out (default 198.18.0.0/16).
    #[serde(default)]
    pub inside: Vec<String>,
    /// The public pool: prefixes or addresses (default 203.0.113.0/28).
    #[serde(default)]
    pub public: Vec<String>,
    /// Public ports to hand out, `lo-hi` (default 1024-65535).
    pub ports: Option<String>,
    /// Most mappings at once (default 1048576); new flows beyond it are dropped.
    pub max_sessions: Option<usize>,
    /// Idle time before a UDP mapping expires (default 120s).
    pub udp_timeout: Option<String>,
    /// Idle time of an established TCP mapping (default 7440s).
    pub tcp_established_timeout: Option<String>,
    /// Idle time of an opening or closing TCP mapping (default 240s).
    pub tcp_transitory_timeout: Option<String>,
    /// Idle time of an ICMP query mapping (default 60s).
    pub icmp_timeout: Option<String>,
}

/// Most mappings a table may be configured for.
const MAX_SESSIONS: usize = 16 << 20;

impl Nat44 {
    pub fn new(cfg: &Nat44Config) -> Result<Nat44, ConfigError> {
        let prefixes = |key: &str, list: &[String], default: &str| -> Result<Vec<(u32, u32)>, ConfigError> {
            let list: Vec<String> = if list.is_empty() {
                vec![default.into()]
            } else {
                list.to_vec()
            };
            list.iter()
                .enumerate()
                .map(|(k, s)| parse_prefix(s).map_err(|e| ConfigError::new(format!("{key}[{k}]"), e)))
                .collect()
        };
        let inside = prefixes("inside", &cfg.inside, "198.18.0.0/16")?;
        let mut public = Vec::new();
        for (net, mask) in prefixes("public", &cfg.public, "203.0.113.0/28")? {
            let size = u64::from(!mask) + 1;
            if public.len() as u64 + size > 65_536 {
                return Err(ConfigError::new("public", "more than 65536 public addresses"));
            }
            public.extend((0..size).map(|k| net + k as u32));
        }
        public.sort_unstable();
        public.dedup();
        if let Some(a) = public.iter().find(|&&a| inside.iter().any(|&(n, m)| a & m == n)) {
            return Err(ConfigError::new(
                "public",
                format!(
                    "{} is inside too: the two must not overlap",
                    std::net::Ipv4Addr::from(*a)
                ),
            ));
        }
        let ports = match &cfg.ports {
            None => (1024, 65535),
            Some(s) => {
                let why = || ConfigError::new("ports", format!("`{s}` is not a port range like 1024-65535"));
                let (lo, hi) = s.split_once('-').ok_or_else(why)?;
                let (lo, hi): (u16, u16) = (
                    lo.trim().parse().map_err(|_| why())?,
                    hi.trim().parse().map_err(|_| why())?,
                );
                if lo == 0 || lo > hi {
                    return Err(why());
                }
                (lo, hi)
            }
        };
        let max_sessions = cfg.max_sessions.unwrap_or(1 << 20);
        if !(1..=MAX_SESSIONS).contains(&max_sessions) {
            return Err(ConfigError::new("max_sessions", format!("must be 1..={MAX_SESSIONS}")));
        }
        let timeout = crate::config::duration_ns;
        let timeouts_ns = Timeouts {
            udp: timeout("udp_timeout", &cfg.udp_timeout, 120)?,
            tcp_established: timeout("tcp_established_timeout", &cfg.tcp_established_timeout, 7440)?,
            tcp_transitory: timeout("tcp_transitory_timeout", &cfg.tcp_transitory_timeout, 240)?,
            icmp: timeout("icmp_timeout", &cfg.icmp_timeout, 60)?,
        };
        // The table's worth of pairs and 65,536 more: a freed pair waits behind those
        // before it is handed out again (stray packets of its old flow die out).
        let space = public.len() as u64 * (u64::from(ports.1 - ports.0) + 1);
        let pool = Pool {
            addresses: public,
            lo: ports.0,
            pairs: space.min(max_sessions as u64 + 65_536) as u32,
        };
        let free_pairs = [0; 3].map(|_| pool_pairs(&pool));
        let by_public = [0; 3].map(|_| vec![NO_SLOT; pool.pairs as usize]);
        Ok(Nat44 {
            inside,
            max_sessions,
            timeouts_ns,
            // Every structure sized up front: a flood of new flows cannot grow memory.
            slots: vec![None; max_sessions],
            free: (0..max_sessions as u32).rev().collect(),
            by_inside: FlowMap::with_capacity(max_sessions),
            pool,
            by_public,
            free_pairs,
            line: EvictionLine::new(max_sessions),
            sweep: 0,
            ahead: vec![Ahead::NONE; sfclab_core::MAX_BATCH],
            looked_up_at: 0,
            now_ns: 0,
            counts: Counts::default(),
        })
    }
}

/// `a.b.c.d/len` or `a.b.c.d` into (network, mask).
fn parse_prefix(s: &str) -> Result<(u32, u32), String> {
    let (a, l) = s.split_once('/').unwrap_or((s, "32"));
    let addr: std::net::Ipv4Addr = a.trim().parse().map_err(|_| format!("`{a}` is not an IPv4 address"))?;
    let len: u32 = l
        .trim()
        .parse()
        .ok()
        .filter(|l| *l <= 32)
        .ok_or_else(|| format!("`/{l}` is not a prefix length 0..=32"))?;
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    Ok((u32::from(addr) & mask, mask))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sfclab_core::Verdict;

    fn udp(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> Vec<u8> {
        let mut out = Vec::new();
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xaa], [2, 0, 0, 0, 0, 0xbb])
            .ipv4(src, dst, 64)
            .udp(sport, dport)
            .write(&mut out, &[1, 2, 3, 4, 5, 6, 7, 8])
            .unwrap();
        out
    }

    fn tcp(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16, syn: bool, ack: bool) -> Vec<u8> {
        let mut out = Vec::new();
        let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xaa], [2, 0, 0, 0, 0, 0xbb])
            .ipv4(src, dst, 64)
            .tcp(sport, dport, 1000, 65535);
        let b = if syn { b.syn() } else { b };
        let b = if ack { b.ack(1) } else { b };
        b.write(&mut out, &[9; 10]).unwrap();
        out
    }

    fn echo(src: [u8; 4], dst: [u8; 4], id: u16) -> Vec<u8> {
        let mut out = Vec::new();
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xaa], [2, 0, 0, 0, 0, 0xbb])
            .ipv4(src, dst, 64)
            .icmpv4_echo_request(id, 1)
            .write(&mut out, &[0xab; 16])
            .unwrap();
        out
    }

    /// Runs one batch at time `now_ns`; returns frames and verdicts.
    fn run(nat: &mut Nat44, frames: &[Vec<u8>], now_ns: u64) -> (Vec<Vec<u8>>, Vec<Verdict>) {
        crate::testutil::run_at(nat, frames, now_ns)
    }

    /// Every checksum of a frame verifies (an independent parser reads it).
    fn checksums_ok(frame: &[u8]) -> bool {
        let p = etherparse::SlicedPacket::from_ethernet(frame).unwrap();
        let Some(etherparse::NetSlice::Ipv4(ip)) = &p.net else {
            return false;
        };
        let h = ip.header();
        let header_ok = h.to_header().calc_header_checksum() == h.header_checksum();
        let l4_ok = match &p.transport {
            Some(etherparse::TransportSlice::Udp(u)) => {
                u.checksum() == 0
                    || u.to_header().calc_checksum_ipv4(&h.to_header(), u.payload()).unwrap() == u.checksum()
            }
            Some(etherparse::TransportSlice::Tcp(t)) => {
                t.to_header().calc_checksum_ipv4(&h.to_header(), t.payload()).unwrap() == t.checksum()
            }
            Some(etherparse::TransportSlice::Icmpv4(i)) => {
                i.header().icmp_type.calc_checksum(i.payload()) == i.checksum()
            }
            _ => false,
        };
        header_ok && l4_ok
    }

    fn src_of(f: &[u8]) -> ([u8; 4], u16) {
        (f[26..30].try_into().unwrap(), u16::from_be_bytes([f[34], f[35]]))
    }

    #[test]
    fn outbound_gets_one_public_pair_per_internal_endpoint_eim() {
        let mut nat = Nat44::new(&Nat44Config::default()).unwrap();
        let frames = [
            udp([198, 18, 0, 1], 1000, [8, 8, 8, 8], 53),
            udp([198, 18, 0, 1], 1000, [9, 9, 9, 9], 53),
            udp([198, 18, 0, 2], 1000, [8, 8, 8, 8], 53),
        ];
        let (out, v) = run(&mut nat, &frames, 0);
        assert_eq!(v, vec![Verdict::Continue; 3]);
        let (a, b, c) = (src_of(&out[0]), src_of(&out[1]), src_of(&out[2]));
        assert_eq!(
            a, b,
            "same internal endpoint, same mapping whatever the destination (RFC 4787 REQ-1)"
        );
        assert_ne!(a, c);
        assert_eq!(a.0[..3], [203, 0, 113]);
        assert!(out.iter().all(|f| checksums_ok(f)));
        assert_eq!(nat.by_inside.len(), 2);
    }

    #[test]
    fn inbound_to_a_mapping_is_translated_back_others_dropped() {
        let mut nat = Nat44::new(&Nat44Config::default()).unwrap();
        let (out, _) = run(&mut nat, &[udp([198, 18, 0, 1], 1000, [8, 8, 8, 8], 53)], 0);
        let (public, port) = src_of(&out[0]);
        // Any remote endpoint may reach the mapping (endpoint-independent filtering).
        let reply = udp([1, 1, 1, 1], 4444, public, port);
        let unknown = udp([1, 1, 1, 1], 4444, public, port.wrapping_add(1));
        let other = udp([1, 1, 1, 1], 4444, [5, 5, 5, 5], 80);
        let (back, v) = run(&mut nat, &[reply, unknown, other.clone()], 1);
        assert_eq!(v, vec![Verdict::Continue, Verdict::Drop(NO_MAPPING), Verdict::Continue]);
        assert_eq!(&back[0][30..34], &[198, 18, 0, 1]);
        assert_eq!(u16::from_be_bytes([back[0][36], back[0][37]]), 1000);
        assert!(checksums_ok(&back[0]));
        assert_eq!(back[2], other, "not the NAT's: untouched");
    }

    #[test]
    fn tcp_and_icmp_echo_are_translated_with_checksums() {
        let mut nat = Nat44::new(&Nat44Config::default()).unwrap();
        let (out, v) = run(
            &mut nat,
            &[
                tcp([198, 18, 0, 1], 5000, [8, 8, 8, 8], 80, true, false),
                echo([198, 18, 0, 1], [8, 8, 8, 8], 77),
            ],
            0,
        );
        assert_eq!(v, vec![Verdict::Continue; 2]);
        assert!(checksums_ok(&out[0]) && checksums_ok(&out[1]));
        let id = u16::from_be_bytes([out[1][38], out[1][39]]);
        assert_ne!((&out[1][26..30], id), (&[198u8, 18, 0, 1][..], 77));
    }

    #[test]
    fn mappings_expire_after_their_timeout() {
        let mut nat = Nat44::new(&Nat44Config::default()).unwrap();
        let (out, _) = run(&mut nat, &[udp([198, 18, 0, 1], 1000, [8, 8, 8, 8], 53)], 0);
        let (public, port) = src_of(&out[0]);
        let s = 1_000_000_000;
        let (_, v) = run(&mut nat, &[udp([1, 1, 1, 1], 53, public, port)], 119 * s);
        assert_eq!(v, vec![Verdict::Continue], "within 2 minutes of the last packet");
        let (_, v) = run(&mut nat, &[udp([1, 1, 1, 1], 53, public, port)], 119 * s + 121 * s);
        assert_eq!(v, vec![Verdict::Drop(NO_MAPPING)], "120 s idle: gone (RFC 4787 REQ-5)");
        assert_eq!(nat.counts.expired, 1);
        // TCP: transitory after a SYN, established after SYNs both ways and an ACK.
        let (out, _) = run(
            &mut nat,
            &[tcp([198, 18, 0, 9], 7, [8, 8, 8, 8], 80, true, false)],
            300 * s,
        );
        let (public, port) = src_of(&out[0]);
        let synack = tcp([8, 8, 8, 8], 80, public, port, true, true);
        let ack = tcp([198, 18, 0, 9], 7, [8, 8, 8, 8], 80, false, true);
        run(&mut nat, &[synack], 301 * s);
        run(&mut nat, &[ack], 302 * s);
        let (_, v) = run(
            &mut nat,
            &[tcp([8, 8, 8, 8], 80, public, port, false, true)],
            302 * s + 3600 * s,
        );
        assert_eq!(v, vec![Verdict::Continue], "an established TCP mapping lives 2 h 4 min");
    }

    #[test]
    fn a_full_table_of_assured_mappings_drops_new_flows_and_keeps_old_ones() {
        let mut nat = Nat44::new(&Nat44Config {
            max_sessions: Some(4),
            ..Default::default()
        })
        .unwrap();
        let flows: Vec<Vec<u8>> = (0..6).map(|k| udp([198, 18, 0, k], 1000, [8, 8, 8, 8], 53)).collect();
        let (out, v) = run(&mut nat, &flows[..4], 0);
        assert_eq!(v, [Verdict::Continue; 4]);
        // Each is answered: assured, none gives way.
        let replies: Vec<Vec<u8>> = out
            .iter()
            .map(|f| {
                let (addr, port) = src_of(f);
                udp([8, 8, 8, 8], 53, addr, port)
            })
            .collect();
        assert_eq!(run(&mut nat, &replies, 1).1, [Verdict::Continue; 4]);
        let (_, v) = run(&mut nat, &flows[4..], 2);
        assert_eq!(v, [Verdict::Drop(TABLE_FULL); 2]);
        let (_, v) = run(&mut nat, &flows[..1], 3);
        assert_eq!(v, vec![Verdict::Continue], "existing mappings keep working");
        // After the timeout the sweep frees the table for new flows.
        nat.now_ns = 200_000_000_000;
        nat.tick(0);
        assert_eq!(nat.by_inside.len(), 0);
        let (_, v) = run(&mut nat, &flows[4..5], 200_000_000_001);
        assert_eq!(v, vec![Verdict::Continue]);
    }

    /// A full table of unassured mappings: a new flow takes the oldest one's place
    /// (netfilter's early drop), counted as evicted; its public pair is reused last.
    #[test]
    fn a_new_flow_takes_the_place_of_the_oldest_unassured_mapping() {
        let mut nat = Nat44::new(&Nat44Config {
            max_sessions: Some(4),
            ..Default::default()
        })
        .unwrap();
        let flows: Vec<Vec<u8>> = (0..6).map(|k| udp([198, 18, 0, k], 1000, [8, 8, 8, 8], 53)).collect();
        let (first, _) = run(&mut nat, &flows[..1], 0);
        let (out, v) = run(&mut nat, &flows[1..], 1);
        assert_eq!(v, [Verdict::Continue; 5]);
        assert_eq!(nat.counts.evicted, 2, "the two oldest gave way");
        assert!(
            !nat.by_inside.contains_key(
                &Endpoint {
                    proto: UDP,
                    addr: u32::from_be_bytes([198, 18, 0, 0]),
                    port: 1000
                }
                .key()
            )
        );
        // The pool hands out every other pair before the evicted one's.
        assert!(out.iter().all(|f| src_of(f) != src_of(&first[0])));
    }

    /// The pool exhausted by assured mappings: a new flow is dropped as ports-exhausted;
    /// one unassured mapping frees a pair for it.
    #[test]
    fn an_exhausted_pool_drops_unless_an_unassured_mapping_gives_way() {
        let mut nat = Nat44::new(&Nat44Config {
            public: vec!["203.0.113.1".into()],
            ports: Some("2000-2002".into()),
            ..Default::default()
        })
        .unwrap();
        let flows: Vec<Vec<u8>> = (0..5).map(|k| udp([198, 18, 0, k], 1000, [8, 8, 8, 8], 53)).collect();
        let (out, _) = run(&mut nat, &flows[..3], 0);
        let replies: Vec<Vec<u8>> = out[..2]
            .iter()
            .map(|f| {
                let (addr, port) = src_of(f);
                udp([8, 8, 8, 8], 53, addr, port)
            })
            .collect();
        run(&mut nat, &replies, 1);
        // Two assured, one not: the fourth flow takes the third's pair.
        let (out, v) = run(&mut nat, &flows[3..4], 2);
        assert_eq!(v, [Verdict::Continue]);
        assert_eq!(src_of(&out[0]).1, 2002);
        assert_eq!((nat.counts.evicted, nat.by_inside.len()), (1, 3));
        // Answered, it is assured too: the fifth flow finds no pair and no place.
        let (addr, port) = src_of(&out[0]);
        run(&mut nat, &[udp([8, 8, 8, 8], 53, addr, port)], 3);
        let (_, v) = run(&mut nat, &flows[4..], 4);
        assert_eq!(v, [Verdict::Drop(PORTS_EXHAUSTED)]);
        assert_eq!(nat.counts.evicted, 1);
    }

    /// A flood of new flows: the table never grows past its bound, each new flow takes
    /// an unassured one's place, and no structure allocates beyond what `new` sized.
    #[test]
    fn a_flood_of_new_flows_stays_bounded() {
        let mut nat = Nat44::new(&Nat44Config {
            max_sessions: Some(1000),
            ..Default::default()
        })
        .unwrap();
        let capacity = |n: &Nat44| {
            (
                n.by_inside.allocation_size(),
                n.by_public.iter().map(Vec::capacity).sum::<usize>(),
                n.slots.len(),
                n.line.bytes(),
                n.free_pairs.iter().map(|f| f.capacity()).sum::<usize>(),
            )
        };
        let before = capacity(&nat);
        let mut dropped = 0;
        for round in 0..50u16 {
            let flows: Vec<Vec<u8>> = (0..256u16)
                .map(|k| udp([198, 18, (round >> 8) as u8, round as u8], 1000 + k, [8, 8, 8, 8], 53))
                .collect();
            let (_, v) = run(&mut nat, &flows, u64::from(round));
            dropped += v.iter().filter(|v| **v != Verdict::Continue).count();
        }
        assert_eq!(nat.by_inside.len(), 1000);
        assert_eq!((dropped, nat.counts.evicted), (0, 50 * 256 - 1000));
        assert_eq!(capacity(&nat), before);
        assert!(nat.table_bytes() > 0);
    }

    #[test]
    fn config_errors_name_the_key() {
        let bad = |cfg: Nat44Config| Nat44::new(&cfg).err().unwrap().key;
        assert_eq!(
            bad(Nat44Config {
                ports: Some("9-3".into()),
                ..Default::default()
            }),
            "ports"
        );
        assert_eq!(
            bad(Nat44Config {
                public: vec!["198.18.0.1".into()],
                ..Default::default()
            }),
            "public"
        );
        assert_eq!(
            bad(Nat44Config {
                inside: vec!["10.0.0.0/40".into()],
                ..Default::default()
            }),
            "inside[0]"
        );
        assert_eq!(
            bad(Nat44Config {
                udp_timeout: Some("soon".into()),
                ..Default::default()
            }),
            "udp_timeout"
        );
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        #[test]
        fn any_frame_is_translated_passed_or_dropped_never_a_panic(
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..100),
            flips in proptest::collection::vec((0usize..60, proptest::prelude::any::<u8>()), 0..6),
        ) {
            let mut nat = Nat44::new(&Nat44Config { max_sessions: Some(16), ..Default::default() }).unwrap();
            let mut mutated = udp([198, 18, 0, 1], 1000, [8, 8, 8, 8], 53);
            for (at, b) in flips {
                if let Some(x) = mutated.get_mut(at) {
                    *x = b;
                }
            }
            let (_, v) = run(&mut nat, &[junk, mutated], 0);
            proptest::prop_assert!(v.iter().all(|v| matches!(v, Verdict::Continue | Verdict::Drop(_))));
            proptest::prop_assert!(nat.by_inside.len() <= 16);
        }
    }
}
