//! `firewall`: ordered ACL rules over the IPv4 5-tuple (first match wins, a default
//! action), classified by bit vectors ([`crate::tables::acl::BitVector`]), and stateful connection
//! tracking as netfilter's conntrack does it: a connection the rules allowed is tracked
//! both ways, so its return traffic passes whatever the rules say of that direction;
//! TCP follows its state machine (SYN, SYN-ACK, ACK, FIN, RST) with netfilter's
//! timeouts, UDP and ICMP have pseudo-states; a TCP packet that opens nothing (no SYN)
//! or breaks the handshake is `ct-invalid`. The table is bounded and preallocated. When it
//! is full, a new connection takes the place of an unassured one (TCP not established,
//! UDP or ICMP never answered) or an expired one, the oldest first, as netfilter's
//! `early_drop` does (`early_drops`); assured connections are never taken, so the
//! connections that work keep working under a flood of new ones, and a new connection
//! that finds no place is dropped as `ct-table-full` at once: the line of connections
//! that could give way is empty.
//!
//! Keys: `rules` (list of `{ action: allow|deny, proto: tcp|udp|icmp|any, src, dst,
//! sport, dport }`, prefixes and port ranges `lo-hi`, all optional), `default` (`deny`),
//! `stateful` (true), `max_connections` (1,048,576), `tcp_established_timeout` (432000s,
//! netfilter's 5 days), `udp_timeout` (30s unreplied, 120s once replied), `icmp_timeout`
//! (30s).
//!
//! Counters: `connections` (gauge), `new`, `expired`, `early_drops`, `allowed`, `denied`, `acl_bytes`
//! (gauge: the classifier's memory), `capacity` and `table_bytes` (gauges: the connection
//! table's bound and its memory, preallocated). Drops: `malformed`, `unsupported` (not IPv4), and its own
//! `acl-deny`, `ct-invalid`, `ct-table-full`.

use serde::Deserialize;
use sfclab_core::packet::Note;
use sfclab_core::{BatchView, Context, DropReason, NetworkFunction, NfCounter, Packet, Verdicts};

use crate::ConfigError;
use crate::frame;
use crate::tables::acl::{BitVector, Key, Match};
use crate::tables::eviction::EvictionLine;
use crate::tables::flow_map::FlowMap;

/// This NF's own drop reasons, in code order (`drop_reasons()`).
const DROP_REASONS: &[&str] = &["acl-deny", "ct-invalid", "ct-table-full"];
const ACL_DENY: DropReason = DropReason::named(DROP_REASONS, "acl-deny");
const CT_INVALID: DropReason = DropReason::named(DROP_REASONS, "ct-invalid");
const CT_TABLE_FULL: DropReason = DropReason::named(DROP_REASONS, "ct-table-full");

const TCP: u8 = 6;
const UDP: u8 = 17;
const ICMP: u8 = 1;

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const RST: u8 = 0x04;
const ACK: u8 = 0x10;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// TCP: the originator's SYN seen.
    SynSent,
    /// TCP: the reply's SYN-ACK seen.
    SynRecv,
    /// TCP: the handshake's last ACK seen. UDP/ICMP: a reply seen.
    Established,
    /// TCP: a FIN seen from one side (which: `fin_from_orig`).
    FinWait,
    /// TCP: FINs from both sides.
    TimeWait,
    /// TCP: a RST.
    Close,
    /// UDP/ICMP: no reply yet.
    Unreplied,
}

/// What the firewall leaves in a packet's `Note::CONNTRACK`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Tracked {
    /// The packet opened a connection.
    New = 1,
    /// The packet belongs to a tracked connection (either direction).
    Known = 2,
}

#[derive(Debug, Clone, Copy)]
struct Conn {
    orig: Key,
    state: State,
    fin_from_orig: bool,
    last_ns: u64,
}

impl Conn {
    /// netfilter's ASSURED: TCP established (or closing after it), UDP and ICMP answered.
    /// Only an unassured connection gives way to a new one.
    fn assured(&self) -> bool {
        matches!(self.state, State::Established | State::FinWait | State::TimeWait)
    }
}

#[derive(Debug, Clone, Copy)]
struct Timeouts {
    tcp_established: u64,
    udp: u64,
    icmp: u64,
}

impl Timeouts {
    /// netfilter's defaults for the transitory TCP states.
    fn of(&self, c: &Conn) -> u64 {
        const S: u64 = 1_000_000_000;
        match (c.orig.proto, c.state) {
            (TCP, State::SynSent) => 120 * S,
            (TCP, State::SynRecv) => 60 * S,
            (TCP, State::Established) => self.tcp_established,
            (TCP, State::FinWait) => 120 * S,
            (TCP, State::TimeWait) => 120 * S,
            (TCP, _) => 10 * S,
            (UDP, State::Established) => 4 * self.udp,
            (UDP, _) => self.udp,
            _ => self.icmp,
        }
    }
}

/// A packet of the batch between the steps of `process`: its parsed key and flags, and
/// its connection's slot if it had one when looked up.
type Ahead = (Result<(Key, u8), DropReason>, Option<u32>);

pub struct Firewall {
    rules: BitVector,
    allow: Vec<bool>,
    default_allow: bool,
    stateful: bool,
    max: usize,
    timeouts: Timeouts,
    slots: Vec<Option<Conn>>,
    free: Vec<u32>,
    /// Every tracked connection by its direction-free key (`canonical`).
    table: FlowMap<Key, 3>,
    /// Where a new connection looks for one to take the place of when the table is full.
    line: EvictionLine,
    /// Per packet of the batch: what step 1 parsed and the slot step 2 found.
    ahead: Vec<Ahead>,
    /// The table's version when step 2 ended.
    looked_up_at: u64,
    sweep: usize,
    now_ns: u64,
    counts: Counts,
}

#[derive(Default)]
struct Counts {
    new: u64,
    expired: u64,
    early_drops: u64,
    allowed: u64,
    denied: u64,
}

impl NetworkFunction for Firewall {
    fn kind(&self) -> &'static str {
        TYPE.kind
    }

    fn drop_reasons(&self) -> &'static [&'static str] {
        DROP_REASONS
    }

    fn process(&mut self, ctx: &mut Context<'_>, mut batch: BatchView<'_>, verdicts: &mut Verdicts) {
        let now = ctx.now_ns();
        self.now_ns = now;
        let n = batch.len();
        // With a million connections every entry a packet needs is a trip to memory; a
        // batch's trips overlap when each is asked for (prefetched) a step before it is
        // read, as nat44 does. Step 1: parse, ask for each key's bucket.
        for i in 0..n {
            let parsed = parse(batch.get_mut(i));
            if self.stateful
                && let Ok((key, _)) = &parsed
            {
                self.table.prefetch(&canonical(key));
            }
            self.ahead[i] = (parsed, None);
        }
        if self.stateful {
            self.prefetch_connections(n);
        }
        // Step 4: judge, in order (a packet may find its connection made or gone by one
        // before it: `judge` checks what step 2 found).
        for i in 0..n {
            let (parsed, found) = std::mem::replace(&mut self.ahead[i], (Err(DropReason::MALFORMED), None));
            let verdict = match parsed {
                Err(reason) => Err(reason),
                Ok((key, flags)) => self.judge(key, flags, found, now),
            };
            match verdict {
                Ok(tracked) => {
                    self.counts.allowed += 1;
                    if let Some(state) = tracked {
                        batch.get_mut(i).notes.set(Note::CONNTRACK, state as u32);
                    }
                }
                Err(reason) => {
                    self.counts.denied += 1;
                    verdicts.drop(i, reason);
                }
            }
        }
    }

    fn tick(&mut self, _now: u64) {
        let n = self.slots.len();
        for _ in 0..n.min(4096) {
            self.sweep = if self.sweep + 1 >= n { 0 } else { self.sweep + 1 };
            if let Some(c) = self.slots[self.sweep]
                && self.now_ns.saturating_sub(c.last_ns) > self.timeouts.of(&c)
            {
                self.remove(self.sweep as u32);
            }
        }
    }

    fn counters(&self) -> Vec<NfCounter> {
        vec![
            NfCounter::gauge("connections", self.table.len() as u64),
            NfCounter::total("new", self.counts.new),
            NfCounter::total("expired", self.counts.expired),
            NfCounter::total("early_drops", self.counts.early_drops),
            NfCounter::total("allowed", self.counts.allowed),
            NfCounter::total("denied", self.counts.denied),
            NfCounter::gauge("acl_bytes", self.rules.memory_bytes() as u64),
            NfCounter::gauge("capacity", self.max as u64),
            NfCounter::gauge("table_bytes", self.table_bytes() as u64),
        ]
    }
}

/// The 5-tuple (ICMP: the echo identifier as both ports) and TCP flags. Later fragments
/// carry no ports: they match as ports 0.
#[inline]
fn parse(p: &mut Packet) -> Result<(Key, u8), DropReason> {
    let at = frame::ipv4(p)?;
    let data = p.data();
    let ip = data.get(at.l3..at.l3 + 20).ok_or(DropReason::MALFORMED)?;
    let proto = at.protocol;
    let l4 = at.l4.map_or(&[][..], |l4| &data[l4.min(at.end)..at.end]);
    let first_fragment = at.l4.is_some();
    let word = |at: usize| l4.get(at..at + 2).map(|w| u16::from_be_bytes([w[0], w[1]]));
    let (sport, dport, flags) = match proto {
        TCP | UDP if first_fragment => {
            let (s, d) = word(0).zip(word(2)).ok_or(DropReason::MALFORMED)?;
            let flags = if proto == TCP {
                *l4.get(13).ok_or(DropReason::MALFORMED)?
            } else {
                0
            };
            (s, d, flags)
        }
        ICMP if first_fragment => {
            let id = word(4).ok_or(DropReason::MALFORMED)?;
            (id, id, 0)
        }
        _ => (0, 0, 0),
    };
    Ok((
        Key {
            src: u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]),
            dst: u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]),
            proto,
            sport,
            dport,
        },
        flags,
    ))
}

/// A connection's one key in the table, the same for both directions: the 5-tuple with
/// the lower endpoint (address, then port) first. Half the entries of a key per
/// direction, and half the buckets to touch when one is made or taken.
#[inline(always)]
fn canonical(k: &Key) -> Key {
    if (k.src, k.sport) <= (k.dst, k.dport) {
        *k
    } else {
        reverse(k)
    }
}

fn reverse(k: &Key) -> Key {
    Key {
        src: k.dst,
        dst: k.src,
        proto: k.proto,
        sport: k.dport,
        dport: k.sport,
    }
}

impl Firewall {
    /// Memory of the connection table, allocated for `max_connections` up front.
    pub fn table_bytes(&self) -> usize {
        self.slots.capacity() * std::mem::size_of::<Option<Conn>>()
            + self.free.capacity() * std::mem::size_of::<u32>()
            + self.table.allocation_size()
            + self.line.bytes()
    }

    #[inline]
    /// `found`: the key's slot as the batch's step 2 saw it.
    fn judge(&mut self, key: Key, flags: u8, found: Option<u32>, now: u64) -> Result<Option<Tracked>, DropReason> {
        // What step 2 found holds if the slot still has this connection, and its
        // absence if the table has not changed since.
        let slot = match found {
            Some(s) if self.slots[s as usize].is_some_and(|c| c.orig == key || reverse(&c.orig) == key) => Some(s),
            None if self.table.version() == self.looked_up_at => None,
            _ => self.table.get(&canonical(&key)),
        };
        if self.stateful
            && let Some(slot) = slot
        {
            let c = self.slots[slot as usize].expect("indexed slots are live");
            if now.saturating_sub(c.last_ns) <= self.timeouts.of(&c) {
                let result = self.advance(slot, key, flags, now);
                self.note_assurance(slot);
                return result.map(|()| Some(Tracked::Known));
            }
            self.remove(slot);
        }
        let allowed = match self.rules.classify(&key) {
            Some(r) => self.allow[r],
            None => self.default_allow,
        };
        if !allowed {
            return Err(ACL_DENY);
        }
        if !self.stateful {
            return Ok(None);
        }
        // A new connection: TCP must open with a SYN (netfilter's INVALID otherwise).
        let state = match key.proto {
            TCP if flags & (SYN | ACK | RST) == SYN => State::SynSent,
            TCP => return Err(CT_INVALID),
            _ => State::Unreplied,
        };
        while self.free.is_empty() {
            if !self.evict(now) {
                return Err(CT_TABLE_FULL);
            }
        }
        let slot = self.free.pop().expect("checked");
        self.slots[slot as usize] = Some(Conn {
            orig: key,
            state,
            fin_from_orig: false,
            last_ns: now,
        });
        self.table.insert(canonical(&key), slot);
        let slots = &self.slots;
        self.line.made(slot, |s| slots[s as usize].is_some());
        self.counts.new += 1;
        Ok(Some(Tracked::New))
    }

    /// Steps 2 and 3 of `process` over its first `n` packets: look each key up and ask
    /// for its connection; for a new one, its reverse key's bucket and, with the table
    /// full, the connection on the eviction line it will most likely take the place of,
    /// then what removing that one touches (its two buckets).
    fn prefetch_connections(&mut self, n: usize) {
        let mut evictions = 0;
        for i in 0..n {
            let Ok((key, _)) = self.ahead[i].0 else { continue };
            let found = self.table.get(&canonical(&key));
            self.ahead[i].1 = found;
            match found {
                Some(s) => sfclab_core::prefetch(&self.slots[s as usize]),
                None => {
                    if self.free.len() <= evictions {
                        if let Some(s) = self.line.upcoming(evictions) {
                            sfclab_core::prefetch(&self.slots[s as usize]);
                        }
                        evictions += 1;
                    }
                }
            }
        }
        for k in 0..evictions {
            if let Some(c) = self.line.upcoming(k).and_then(|s| self.slots[s as usize]) {
                self.table.prefetch(&canonical(&c.orig));
            }
        }
        self.looked_up_at = self.table.version();
    }

    /// Keeps the line's assured bit as the slot's connection is.
    #[inline]
    fn note_assurance(&mut self, slot: u32) {
        let slots = &self.slots;
        let assured = slots[slot as usize].is_some_and(|c| c.assured());
        self.line.assure(slot, assured, |s| slots[s as usize].is_some());
    }

    /// Makes room for a new connection: the oldest that is expired or unassured is
    /// taken. True when one was freed.
    #[cold]
    fn evict(&mut self, now: u64) -> bool {
        loop {
            let slots = &self.slots;
            let Some(slot) = self.line.candidate(|s| slots[s as usize].is_some()) else {
                return false;
            };
            let c = self.slots[slot as usize].expect("a live candidate");
            if now.saturating_sub(c.last_ns) > self.timeouts.of(&c) {
                self.remove(slot);
                return true;
            }
            if !c.assured() {
                self.take(slot);
                self.counts.early_drops += 1;
                return true;
            }
        }
    }

    /// A packet of a tracked connection: its state moves on, or it is invalid.
    #[inline]
    fn advance(&mut self, slot: u32, key: Key, flags: u8, now: u64) -> Result<(), DropReason> {
        let c = self.slots[slot as usize].as_mut().expect("a live slot");
        let from_orig = key == c.orig;
        c.last_ns = now;
        if c.orig.proto != TCP {
            if !from_orig {
                c.state = State::Established;
            }
            return Ok(());
        }
        if flags & RST != 0 {
            c.state = State::Close;
            return Ok(());
        }
        c.state = match (c.state, from_orig) {
            (State::SynSent, true) if flags & SYN != 0 && flags & ACK == 0 => State::SynSent,
            (State::SynSent, false) if flags & (SYN | ACK) == SYN | ACK => State::SynRecv,
            (State::SynSent, _) => return Err(CT_INVALID),
            (State::SynRecv, true) if flags & ACK != 0 && flags & SYN == 0 => State::Established,
            (State::SynRecv, false) if flags & SYN != 0 => State::SynRecv,
            (State::SynRecv, _) => return Err(CT_INVALID),
            (State::Established, dir) if flags & FIN != 0 => {
                c.fin_from_orig = dir;
                State::FinWait
            }
            (State::Established, _) => State::Established,
            (State::FinWait, dir) if flags & FIN != 0 && dir != c.fin_from_orig => State::TimeWait,
            (State::FinWait, _) => State::FinWait,
            // A new SYN on a closed connection reopens it, as netfilter lets it.
            (State::TimeWait | State::Close, true) if flags & (SYN | ACK) == SYN => State::SynSent,
            (State::TimeWait | State::Close, _) if flags & SYN != 0 => return Err(CT_INVALID),
            (s, _) => s,
        };
        Ok(())
    }

    fn remove(&mut self, slot: u32) {
        if self.take(slot) {
            self.counts.expired += 1;
        }
    }

    /// Frees the slot's connection; false when the slot was free.
    fn take(&mut self, slot: u32) -> bool {
        let Some(c) = self.slots[slot as usize].take() else {
            return false;
        };
        self.table.remove(&canonical(&c.orig));
        self.line.freed(slot);
        self.free.push(slot);
        true
    }
}

/// Registers `firewall`.
pub const TYPE: crate::NfType = crate::NfType {
    kind: "firewall",
    about: "ordered 5-tuple ACL (bit-vector classifier) with stateful connection tracking, as netfilter's",
    stateless: false,
    cost_neutral: &["icmp_timeout", "tcp_established_timeout", "udp_timeout"],
    files: &[],
    wraps: None,
    schema: || schemars::schema_for!(FirewallConfig),
    drops_all_by_default: Some("acl-deny"),
    fixes: &[(
        "acl-deny",
        "its default is deny: allow the traffic with `rules:` (e.g. `- { action: allow, proto: udp }`), as examples/chains/firewall.yaml does",
    )],
    build: |v| Ok(Box::new(Firewall::new(&crate::typed(v)?)?)),
};

#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FirewallConfig {
    /// Ordered rules; the first that matches decides.
    #[serde(default)]
    pub rules: Vec<RuleConfig>,
    /// `allow` or `deny` (the default) when no rule matches.
    pub default: Option<String>,
    /// Track connections so their return traffic passes (default true).
    pub stateful: Option<bool>,
    /// Most tracked connections (default 1048576).
    pub max_connections: Option<usize>,
    /// Idle time of an established TCP connection (default 432000s, netfilter's 5 days).
    pub tcp_established_timeout: Option<String>,
    /// Idle time of a UDP flow without reply (default 30s; four times that once replied).
    pub udp_timeout: Option<String>,
    /// Idle time of an ICMP query (default 30s).
    pub icmp_timeout: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RuleConfig {
    /// `allow` or `deny`.
    pub action: String,
    /// `tcp`, `udp`, `icmp`, a protocol number, or `any` (the default).
    pub proto: Option<String>,
    /// Source prefix (default: any).
    pub src: Option<String>,
    /// Destination prefix (default: any).
    pub dst: Option<String>,
    /// Source ports, `n` or `lo-hi` (default: any).
    pub sport: Option<String>,
    /// Destination ports, `n` or `lo-hi` (default: any).
    pub dport: Option<String>,
}

const MAX_CONNECTIONS: usize = 16 << 20;

fn action(s: &str) -> Result<bool, String> {
    match s {
        "allow" | "accept" => Ok(true),
        "deny" | "drop" => Ok(false),
        _ => Err(format!("`{s}` is not an action: write allow or deny")),
    }
}

impl Firewall {
    pub fn new(cfg: &FirewallConfig) -> Result<Firewall, ConfigError> {
        let mut matches = Vec::new();
        let mut allow = Vec::new();
        for (k, r) in cfg.rules.iter().enumerate() {
            let at = |field: &str| format!("rules[{k}].{field}");
            allow.push(action(&r.action).map_err(|e| ConfigError::new(at("action"), e))?);
            matches.push(
                Match::from_fields(
                    r.proto.as_deref(),
                    r.src.as_deref(),
                    r.dst.as_deref(),
                    r.sport.as_deref(),
                    r.dport.as_deref(),
                )
                .map_err(|(field, why)| ConfigError::new(at(field), why))?,
            );
        }
        let default_allow =
            action(cfg.default.as_deref().unwrap_or("deny")).map_err(|e| ConfigError::new("default", e))?;
        let max = cfg.max_connections.unwrap_or(1 << 20);
        if !(1..=MAX_CONNECTIONS).contains(&max) {
            return Err(ConfigError::new(
                "max_connections",
                format!("must be 1..={MAX_CONNECTIONS}"),
            ));
        }
        let timeout = crate::config::duration_ns;
        let stateful = cfg.stateful.unwrap_or(true);
        // A stateless firewall tracks nothing: no table to allocate.
        let max = if stateful { max } else { 0 };
        Ok(Firewall {
            rules: BitVector::new(&matches),
            allow,
            default_allow,
            stateful,
            max,
            timeouts: Timeouts {
                tcp_established: timeout("tcp_established_timeout", &cfg.tcp_established_timeout, 432_000)?,
                udp: timeout("udp_timeout", &cfg.udp_timeout, 30)?,
                icmp: timeout("icmp_timeout", &cfg.icmp_timeout, 30)?,
            },
            slots: vec![None; max],
            free: (0..max as u32).rev().collect(),
            // One key per connection, both directions' (`canonical`).
            table: FlowMap::with_capacity(max),
            line: EvictionLine::new(max),
            ahead: vec![(Err(DropReason::MALFORMED), None); sfclab_core::MAX_BATCH],
            looked_up_at: 0,
            sweep: 0,
            now_ns: 0,
            counts: Counts::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sfclab_core::Verdict;

    fn tcp(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16, flags: u8) -> Vec<u8> {
        let mut out = Vec::new();
        let b = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xaa], [2, 0, 0, 0, 0, 0xbb])
            .ipv4(src, dst, 64)
            .tcp(sport, dport, 1, 65535);
        let b = if flags & SYN != 0 { b.syn() } else { b };
        let b = if flags & ACK != 0 { b.ack(1) } else { b };
        let b = if flags & FIN != 0 { b.fin() } else { b };
        let b = if flags & RST != 0 { b.rst() } else { b };
        b.write(&mut out, &[]).unwrap();
        out
    }

    fn udp(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16) -> Vec<u8> {
        let mut out = Vec::new();
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xaa], [2, 0, 0, 0, 0, 0xbb])
            .ipv4(src, dst, 64)
            .udp(sport, dport)
            .write(&mut out, &[0; 8])
            .unwrap();
        out
    }

    fn run(fw: &mut Firewall, frames: &[Vec<u8>], now_ns: u64) -> Vec<Verdict> {
        crate::testutil::run_at(fw, frames, now_ns).1
    }

    fn web_only() -> Firewall {
        let rule = |action: &str, proto: &str, dport: &str| RuleConfig {
            action: action.into(),
            proto: Some(proto.into()),
            src: Some("198.18.0.0/15".into()),
            dport: Some(dport.into()),
            ..Default::default()
        };
        Firewall::new(&FirewallConfig {
            rules: vec![
                rule("deny", "tcp", "8080"),
                rule("allow", "tcp", "80-8443"),
                rule("allow", "udp", "53"),
            ],
            ..Default::default()
        })
        .unwrap()
    }

    const C: [u8; 4] = [198, 18, 0, 1];
    const S: [u8; 4] = [203, 0, 113, 5];

    /// The firewall leaves its conntrack verdict in `Note::CONNTRACK` for later NFs, and
    /// reads 5-tuples behind QinQ tags through the parser step.
    #[test]
    fn notes_the_connection_state_and_reads_behind_qinq() {
        let mut fw = web_only();
        let mut qinq = udp(C, 4000, S, 53);
        qinq.splice(12..12, [0x88, 0xa8, 0, 1, 0x81, 0x00, 0, 2]);
        let frames = [tcp(C, 1000, S, 80, SYN), tcp(S, 80, C, 1000, SYN | ACK), qinq.clone()];
        let mut notes = Vec::new();
        let (_, v) = crate::testutil::run_inspecting(&mut fw, &frames, 1, |p| notes.push(p.notes.get(Note::CONNTRACK)));
        assert_eq!(v, [Verdict::Continue; 3]);
        assert_eq!(notes, [Some(1), Some(2), Some(1)]);
        // A QinQ frame to a denied port is denied: its ports were read, not zeros.
        let mut denied = tcp(C, 1001, S, 8080, SYN);
        denied.splice(12..12, [0x88, 0xa8, 0, 1, 0x81, 0x00, 0, 2]);
        assert_eq!(run(&mut fw, &[denied], 2), [Verdict::Drop(ACL_DENY)]);
        let mut stateless = Firewall::new(&FirewallConfig {
            stateful: Some(false),
            default: Some("allow".into()),
            ..Default::default()
        })
        .unwrap();
        let mut notes = Vec::new();
        crate::testutil::run_inspecting(&mut stateless, &[qinq], 1, |p| notes.push(p.notes.get(Note::CONNTRACK)));
        assert_eq!(notes, [None], "no tracking, no note");
    }

    #[test]
    fn first_match_wins_and_the_default_denies() {
        let mut fw = web_only();
        let v = run(
            &mut fw,
            &[
                tcp(C, 1000, S, 8080, SYN),
                tcp(C, 1001, S, 443, SYN),
                tcp(C, 1002, S, 22, SYN),
                udp(S, 53, C, 1000),
            ],
            0,
        );
        assert_eq!(
            v,
            vec![
                Verdict::Drop(ACL_DENY),
                Verdict::Continue,
                Verdict::Drop(ACL_DENY),
                Verdict::Drop(ACL_DENY)
            ]
        );
    }

    /// The handshake, data both ways and the close pass; the server could never open a
    /// connection to the client (no rule allows it), but its replies pass as tracked.
    #[test]
    fn return_traffic_of_a_tracked_connection_passes() {
        let mut fw = web_only();
        let steps = [
            (tcp(C, 1000, S, 443, SYN), Verdict::Continue),
            (tcp(S, 443, C, 1000, SYN | ACK), Verdict::Continue),
            (tcp(C, 1000, S, 443, ACK), Verdict::Continue),
            (tcp(S, 443, C, 1000, ACK), Verdict::Continue),
            (tcp(C, 1000, S, 443, FIN | ACK), Verdict::Continue),
            (tcp(S, 443, C, 1000, FIN | ACK), Verdict::Continue),
            (tcp(C, 1000, S, 443, ACK), Verdict::Continue),
        ];
        for (k, (frame, want)) in steps.iter().enumerate() {
            assert_eq!(
                run(&mut fw, std::slice::from_ref(frame), k as u64),
                vec![*want],
                "step {k}"
            );
        }
        let c = fw.slots.iter().flatten().next().unwrap();
        assert_eq!(c.state, State::TimeWait);
        // The server opening its own connection is not return traffic.
        assert_eq!(
            run(&mut fw, &[tcp(S, 443, C, 2000, SYN)], 10),
            vec![Verdict::Drop(ACL_DENY)]
        );
    }

    #[test]
    fn packets_that_open_nothing_or_break_the_handshake_are_invalid() {
        let mut fw = web_only();
        assert_eq!(
            run(&mut fw, &[tcp(C, 1000, S, 443, ACK)], 0),
            vec![Verdict::Drop(CT_INVALID)],
            "no SYN"
        );
        assert_eq!(run(&mut fw, &[tcp(C, 1001, S, 443, SYN)], 0), vec![Verdict::Continue]);
        assert_eq!(
            run(&mut fw, &[tcp(S, 443, C, 1001, ACK)], 1),
            vec![Verdict::Drop(CT_INVALID)],
            "a reply to a SYN must be SYN-ACK"
        );
        assert_eq!(
            run(&mut fw, &[tcp(S, 443, C, 1001, RST)], 2),
            vec![Verdict::Continue],
            "RST closes"
        );
        assert_eq!(fw.slots.iter().flatten().next().unwrap().state, State::Close);
    }

    #[test]
    fn udp_pseudo_state_and_timeouts() {
        let mut fw = web_only();
        let s = 1_000_000_000;
        assert_eq!(run(&mut fw, &[udp(C, 5000, S, 53)], 0), vec![Verdict::Continue]);
        assert_eq!(
            run(&mut fw, &[udp(S, 53, C, 5000)], 10 * s),
            vec![Verdict::Continue],
            "the reply"
        );
        // Replied: 120 s. After that the reply direction is a new flow the rules deny.
        assert_eq!(run(&mut fw, &[udp(S, 53, C, 5000)], 100 * s), vec![Verdict::Continue]);
        assert_eq!(
            run(&mut fw, &[udp(S, 53, C, 5000)], 100 * s + 121 * s),
            vec![Verdict::Drop(ACL_DENY)]
        );
        assert_eq!(fw.counts.expired, 1);
    }

    #[test]
    fn a_full_table_of_assured_connections_drops_new_ones() {
        let mut fw = Firewall::new(&FirewallConfig {
            default: Some("allow".into()),
            max_connections: Some(2),
            ..Default::default()
        })
        .unwrap();
        // Two connections, each answered: assured.
        let v = run(
            &mut fw,
            &[udp(C, 1, S, 53), udp(C, 2, S, 53), udp(S, 53, C, 1), udp(S, 53, C, 2)],
            0,
        );
        assert_eq!(v, [Verdict::Continue; 4]);
        let v = run(&mut fw, &[udp(C, 3, S, 53), udp(C, 1, S, 53)], 1);
        assert_eq!(v, vec![Verdict::Drop(CT_TABLE_FULL), Verdict::Continue]);
        assert_eq!(fw.counts.early_drops, 0);
    }

    /// A flood of new connections that are never answered: each takes the place of the
    /// oldest unassured one (netfilter's early drop), the assured ones keep working, and
    /// nothing grows.
    #[test]
    fn under_a_flood_unassured_connections_give_way_and_assured_ones_stay() {
        let mut fw = Firewall::new(&FirewallConfig {
            default: Some("allow".into()),
            max_connections: Some(64),
            ..Default::default()
        })
        .unwrap();
        let assured: Vec<_> = (0..16u16).map(|k| udp(C, 1 + k, S, 53)).collect();
        let answers: Vec<_> = (0..16u16).map(|k| udp(S, 53, C, 1 + k)).collect();
        run(&mut fw, &assured, 0);
        run(&mut fw, &answers, 0);
        let bytes = fw.table_bytes();
        let table = fw.table.allocation_size();
        for k in 0..5000u16 {
            let v = run(&mut fw, &[udp(C, 1000 + k, S, 53)], 1);
            assert_eq!(v, vec![Verdict::Continue], "a new connection finds a place");
        }
        assert_eq!(fw.counts.early_drops, 5000 - 48);
        // Every assured connection is still tracked: its return traffic is known.
        let mut known = 0;
        crate::testutil::run_inspecting(&mut fw, &answers, 2, |p| {
            known += usize::from(p.notes.get(sfclab_core::packet::Note::CONNTRACK) == Some(Tracked::Known as u32));
        });
        assert_eq!(known, 16);
        assert_eq!(
            (fw.table.len(), fw.table_bytes(), fw.table.allocation_size()),
            (64, bytes, table)
        );
    }

    #[test]
    fn config_errors_name_the_rule_and_field() {
        let e = Firewall::new(&FirewallConfig {
            rules: vec![
                RuleConfig {
                    action: "allow".into(),
                    ..Default::default()
                },
                RuleConfig {
                    action: "allow".into(),
                    dport: Some("90-80".into()),
                    ..Default::default()
                },
            ],
            ..Default::default()
        })
        .err()
        .unwrap();
        assert_eq!(e.key, "rules[1].dport");
        let e = Firewall::new(&FirewallConfig {
            rules: vec![RuleConfig {
                action: "maybe".into(),
                ..Default::default()
            }],
            ..Default::default()
        })
        .err()
        .unwrap();
        assert_eq!(e.key, "rules[0].action");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        #[test]
        fn any_frame_gets_a_verdict_never_a_panic(
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..100),
            flips in proptest::collection::vec((0usize..60, proptest::prelude::any::<u8>()), 0..6),
        ) {
            let mut fw = Firewall::new(&FirewallConfig {
                default: Some("allow".into()),
                max_connections: Some(8),
                ..Default::default()
            }).unwrap();
            let mut mutated = tcp(C, 1000, S, 443, SYN);
            for (at, b) in flips {
                if let Some(x) = mutated.get_mut(at) {
                    *x = b;
                }
            }
            let v = run(&mut fw, &[junk, mutated], 0);
            proptest::prop_assert!(v.iter().all(|v| matches!(v, Verdict::Continue | Verdict::Drop(_))));
            proptest::prop_assert!(fw.table.len() <= 8);
        }
    }
}
