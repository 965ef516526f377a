//! `dpi`: multi-pattern payload inspection with signatures in a documented subset of
//! Snort/Suricata rule syntax ([`rules`](crate::dpi::parse_rules)), as an IPS does it:
//! each rule's longest content (its fast pattern, as Snort and Suricata pick it) goes
//! into one multi-pattern search, whose every match is a candidate rule. The search
//! (`engine`) is vectorscan's where the build has it (Hyperscan's open fork, the engine
//! of Suricata and Snort 3: each pattern compiled with its own case, the payload
//! scanned as it is), else an Aho-Corasick automaton (the `aho-corasick` crate) in lower
//! case over a lowered copy of the payload: a case-sensitive
//! automaton keeps the crate's SIMD prefilters (a case-insensitive one loses them: 0.7
//! against 1.6 GB/s here), and case-sensitive contents are checked byte for byte on a
//! hit; one leftmost search finds whether anything matches at all (the common case:
//! nothing), and from the first match on, an overlapping search finds every fast
//! pattern. A rule whose fast pattern matched is then checked
//! whole: its other contents searched where their `offset`/`depth` allow, its header
//! (protocol, addresses, ports).
//!
//! TCP payloads are matched as a stream per flow (direction-aware 5-tuple): the last
//! bytes of a flow's previous segment are kept, so a pattern split across two segments
//! matches, and `offset`/`depth` count from the flow's first payload byte. Inspection
//! stops at `stream_depth` bytes into a flow (Suricata's reassembly depth) and the flow
//! table is bounded (`max_flows`, preallocated; the flow that came first gives way to a new one); a segment
//! that does not follow on (a gap, a retransmission) restarts the window. UDP and other
//! protocols are matched per packet. A rule with several contents fires when all of
//! them are in one scan window (the kept bytes and the packet).
//!
//! Actions: `alert` (counts the rule and leaves its sid in the packet's
//! `Note::SIGNATURE`, the first alerting rule's in rule order), `log` (counts only), `drop` (counts, drops the
//! packet and every later packet of its TCP flow, as an IPS does). One packet can fire
//! several rules; a drop wins.
//!
//! Keys: `rules` (signature lines) and/or `rules_file` (a file of them, `#` comments),
//! `stream_depth` (1MiB), `max_flows` (65536), `engine` (`vectorscan` where built in,
//! else `aho-corasick`).
//!
//! Counters: `inspected` (packets scanned), `inspected_bytes`, `alerts`, `drops`,
//! `flows` (gauge), `table_bytes` (gauge: the flow table, preallocated), `flows_evicted`, `stream_gaps`, `past_depth` (packets of flows past
//! `stream_depth`, not scanned), `matcher_bytes` (gauge: the automata's or the compiled
//! database's memory), `scan_errors` (vectorscan scans that failed: none expected), and
//! `sid_<n>` per rule that fired. Drops: `malformed`, and its own `dpi-drop`.

use std::sync::Arc;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use hashbrown::HashMap;
use serde::Deserialize;
use sfclab_core::packet::Note;
use sfclab_core::{BatchView, Context, DropReason, NetworkFunction, NfCounter, Packet, Verdicts};

use crate::tables::acl::{Key, Match};
use crate::{ByteSize, ConfigError, frame};

/// This NF's own drop reasons, in code order (`drop_reasons()`).
const DROP_REASONS: &[&str] = &["dpi-drop"];
const DPI_DROP: DropReason = DropReason::named(DROP_REASONS, "dpi-drop");

const TCP: u8 = 6;
const UDP: u8 = 17;
const SYN: u8 = 0x02;

/// The longest content: the bytes a TCP flow keeps between segments are one less.
pub const MAX_CONTENT: usize = 255;
/// Contents per rule.
const MAX_CONTENTS_PER_RULE: usize = 32;

/// What a rule does when it fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Alert,
    Log,
    Drop,
}

/// One content of a rule: its bytes and where in the payload (stream) it may lie.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Content {
    pub bytes: Vec<u8>,
    /// `bytes` in lower case.
    pub lowered: Vec<u8>,
    pub nocase: bool,
    /// The first byte it may start at.
    pub offset: u32,
    /// How many bytes from `offset` it must lie within (None: to the end).
    pub depth: Option<u32>,
}

/// One signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub action: Action,
    /// The header as 5-tuple matches (several for lists); `both_ways` for `<>`.
    pub headers: Vec<Match>,
    pub both_ways: bool,
    pub contents: Vec<Content>,
    pub sid: u32,
    pub msg: String,
}

/// Per TCP flow (one direction): where its stream is and its last bytes.
#[derive(Clone, Copy)]
struct Flow {
    key: Key,
    /// Stream bytes seen (the next segment's first byte's offset).
    offset: u32,
    /// The sequence number the next segment should start at.
    next_seq: u32,
    tail_len: u8,
    tail: [u8; MAX_CONTENT - 1],
    dropped: bool,
}

/// The search for every rule's fast pattern, pattern k being rule k's.
enum Engine {
    /// Over the window lowered: one leftmost search (does anything match, and where
    /// first) and one overlapping (every match from there).
    AhoCorasick { probe: AhoCorasick, matcher: AhoCorasick },
    /// Over the window as it is, each pattern with its own case.
    Vectorscan(sfclab_vectorscan::Scanner),
}

impl Engine {
    fn name(&self) -> &'static str {
        match self {
            Engine::AhoCorasick { .. } => AHO_CORASICK,
            Engine::Vectorscan(_) => VECTORSCAN,
        }
    }
}

const AHO_CORASICK: &str = "aho-corasick";
const VECTORSCAN: &str = "vectorscan";

/// The search engines this build (and CPU) has, the default first.
pub fn engines() -> &'static [&'static str] {
    if sfclab_vectorscan::available() {
        &[VECTORSCAN, AHO_CORASICK]
    } else {
        &[AHO_CORASICK]
    }
}

pub struct Dpi {
    rules: Vec<Rule>,
    /// None without rules.
    engine: Option<Engine>,
    /// Per rule, which of its contents is the fast pattern.
    fast: Vec<u8>,
    tail_keep: usize,
    stream_depth: u32,
    max_flows: usize,
    /// Each flow's place in `slab`.
    flows: HashMap<Key, u32>,
    /// The flows' states, up to `max_flows`, in the order their places were first
    /// taken; when full, place `next` (the flow that came first) is given to a new one.
    slab: Vec<Flow>,
    next: usize,
    /// Per rule: times fired; the counter names of rules that fired.
    fired: Vec<u64>,
    names: Vec<&'static str>,
    /// Scratch: the scan window (kept bytes and payload) as it is and in lower case
    /// (`lowered`: made for this window; vectorscan needs it only for a candidate rule's
    /// other contents), and the rules checked for this packet (a fast pattern can match
    /// more than once), with their marks.
    window: Vec<u8>,
    lower: Vec<u8>,
    lowered: bool,
    checked: Vec<bool>,
    touched: Vec<u32>,
    counts: Counts,
}

#[derive(Default)]
struct Counts {
    inspected: u64,
    inspected_bytes: u64,
    alerts: u64,
    drops: u64,
    evicted: u64,
    gaps: u64,
    past_depth: u64,
    scan_errors: u64,
}

impl NetworkFunction for Dpi {
    fn kind(&self) -> &'static str {
        TYPE.kind
    }

    fn drop_reasons(&self) -> &'static [&'static str] {
        DROP_REASONS
    }

    fn process(&mut self, _: &mut Context<'_>, mut batch: BatchView<'_>, verdicts: &mut Verdicts) {
        if self.engine.is_none() {
            return;
        }
        for (i, p) in batch.iter_mut().enumerate() {
            match self.inspect(p) {
                Ok(false) => {}
                Ok(true) => verdicts.drop(i, DPI_DROP),
                Err(reason) => verdicts.drop(i, reason),
            }
        }
    }

    fn counters(&self) -> Vec<NfCounter> {
        let c = &self.counts;
        let mut out = vec![
            NfCounter::total("inspected", c.inspected),
            NfCounter::total("inspected_bytes", c.inspected_bytes),
            NfCounter::total("alerts", c.alerts),
            NfCounter::total("drops", c.drops),
            NfCounter::gauge("flows", self.flows.len() as u64),
            NfCounter::gauge(
                "table_bytes",
                (self.flows.allocation_size() + self.slab.capacity() * std::mem::size_of::<Flow>()) as u64,
            ),
            NfCounter::total("flows_evicted", c.evicted),
            NfCounter::total("stream_gaps", c.gaps),
            NfCounter::total("past_depth", c.past_depth),
            NfCounter::gauge(
                "matcher_bytes",
                match &self.engine {
                    None => 0,
                    Some(Engine::AhoCorasick { probe, matcher }) => {
                        (probe.memory_usage() + matcher.memory_usage()) as u64
                    }
                    Some(Engine::Vectorscan(scanner)) => scanner.database().bytes() as u64,
                },
            ),
            NfCounter::total("scan_errors", c.scan_errors),
        ];
        out.extend(
            self.fired
                .iter()
                .zip(&self.names)
                .filter(|(n, _)| **n > 0)
                .map(|(n, name)| NfCounter::total(name, *n)),
        );
        out
    }
}

/// The packet's 5-tuple, payload range, and TCP sequence number.
struct Parsed {
    key: Key,
    payload: (usize, usize),
    seq: Option<u32>,
}

fn parse(p: &mut Packet) -> Result<Option<Parsed>, DropReason> {
    let at = match frame::ipv4(p) {
        Ok(at) => at,
        // Not IPv4: nothing this NF reads (no rule names IPv6).
        Err(DropReason::UNSUPPORTED) => return Ok(None),
        Err(e) => return Err(e),
    };
    let Some(l4) = at.l4 else { return Ok(None) };
    let d = p.data();
    let ip = &d[at.l3..at.l3 + 20];
    let word = |o: usize| d.get(o..o + 2).map(|w| u16::from_be_bytes([w[0], w[1]]));
    let (sport, dport, start, seq) = match at.protocol {
        TCP => {
            let off = usize::from(*d.get(l4 + 12).ok_or(DropReason::MALFORMED)? >> 4) * 4;
            let seq = d.get(l4 + 4..l4 + 8).ok_or(DropReason::MALFORMED)?;
            let flags = *d.get(l4 + 13).ok_or(DropReason::MALFORMED)?;
            // The sequence number of the first payload byte: a SYN takes one before it.
            let seq = u32::from_be_bytes([seq[0], seq[1], seq[2], seq[3]]).wrapping_add(u32::from(flags & SYN != 0));
            (
                word(l4).ok_or(DropReason::MALFORMED)?,
                word(l4 + 2).ok_or(DropReason::MALFORMED)?,
                l4 + off,
                Some(seq),
            )
        }
        UDP => (
            word(l4).ok_or(DropReason::MALFORMED)?,
            word(l4 + 2).ok_or(DropReason::MALFORMED)?,
            l4 + 8,
            None,
        ),
        _ => (0, 0, l4, None),
    };
    if start > at.end {
        return Err(DropReason::MALFORMED);
    }
    Ok(Some(Parsed {
        key: Key {
            src: u32::from_be_bytes([ip[12], ip[13], ip[14], ip[15]]),
            dst: u32::from_be_bytes([ip[16], ip[17], ip[18], ip[19]]),
            proto: at.protocol,
            sport,
            dport,
        },
        payload: (start, at.end),
        seq,
    }))
}

impl Dpi {
    /// Scans one packet; true when it is to be dropped.
    #[inline]
    fn inspect(&mut self, p: &mut Packet) -> Result<bool, DropReason> {
        let Some(parsed) = parse(p)? else { return Ok(false) };
        let (start, end) = parsed.payload;
        let payload_len = end - start;
        let Dpi {
            flows,
            slab,
            next,
            max_flows,
            counts,
            window,
            stream_depth,
            ..
        } = self;
        window.clear();
        // The flow's stream state (TCP): where this segment lies, what came before.
        let mut base = 0u32;
        let mut room = payload_len;
        let mut place = 0;
        if let Some(seq) = parsed.seq {
            place = flow_entry(flows, slab, next, *max_flows, counts, parsed.key, seq);
            let flow = &mut slab[place];
            if flow.dropped {
                counts.drops += 1;
                return Ok(true);
            }
            if payload_len == 0 {
                return Ok(false);
            }
            if flow.next_seq != seq {
                // Not the byte after the last one seen: no bytes carry over.
                counts.gaps += 1;
                flow.tail_len = 0;
            }
            if flow.offset >= *stream_depth {
                counts.past_depth += 1;
                flow.next_seq = seq.wrapping_add(payload_len as u32);
                return Ok(false);
            }
            let tail = usize::from(flow.tail_len);
            window.extend_from_slice(&flow.tail[..tail]);
            base = flow.offset - tail as u32;
            room = room.min((*stream_depth - flow.offset) as usize);
        } else if payload_len == 0 {
            return Ok(false);
        }
        let kept = window.len();
        counts.inspected += 1;
        counts.inspected_bytes += room as u64;
        self.lowered = false;
        // With nothing kept from before (UDP, a flow's first segment or one after a gap)
        // the payload is scanned where it is; else the kept bytes and it, copied into
        // the window (taken out for the scan: no allocation, nothing borrowed twice).
        let mut joined = std::mem::take(&mut self.window);
        let payload = &p.data()[start..start + room];
        let data = if kept == 0 {
            payload
        } else {
            joined.extend_from_slice(payload);
            &joined[..]
        };
        let (verdict, note) = self.scan(data, &parsed.key, base, kept);
        if let Some(seq) = parsed.seq {
            let keep = self.tail_keep.min(data.len());
            let flow = &mut self.slab[place];
            flow.tail[..keep].copy_from_slice(&data[data.len() - keep..]);
            flow.tail_len = keep as u8;
            flow.offset = flow.offset.saturating_add(payload_len as u32);
            flow.next_seq = seq.wrapping_add(payload_len as u32);
            flow.dropped |= verdict;
        }
        self.window = joined;
        if let Some(sid) = note {
            p.notes.set(Note::SIGNATURE, sid);
        }
        Ok(verdict)
    }

    /// Searches `data` (whose byte 0 is stream offset `base`; its first `kept` bytes
    /// were scanned with the previous segment) and acts on the rules that fire: whether
    /// one drops, and the sid to note (the first alerting rule's).
    fn scan(&mut self, data: &[u8], key: &Key, base: u32, kept: usize) -> (bool, Option<u32>) {
        let Dpi {
            engine,
            rules,
            fast,
            lower,
            lowered,
            checked,
            touched,
            counts,
            ..
        } = self;
        // A candidate: rule k's fast pattern at `start..end` of the window.
        let mut candidate = |k: usize, start: usize, end: usize| {
            // Whole in the kept bytes: found with the segment before.
            if end <= kept || checked[k] {
                return;
            }
            if rules[k].contents[usize::from(fast[k])].admits(base, start, end) {
                checked[k] = true;
                touched.push(k as u32);
            }
        };
        match engine {
            None => return (false, None),
            Some(Engine::AhoCorasick { probe, matcher }) => {
                lower_into(lower, lowered, data);
                // No match starts before the leftmost one: the overlapping search starts there.
                let Some(first) = probe.find(&lower[..]) else {
                    return (false, None);
                };
                let from = first.start();
                for m in matcher.find_overlapping_iter(&lower[from..]) {
                    let (start, end) = (from + m.start(), from + m.end());
                    let k = m.pattern().as_usize();
                    let content = &rules[k].contents[usize::from(fast[k])];
                    if content.nocase || data[start..end] == content.bytes[..] {
                        candidate(k, start, end);
                    }
                }
            }
            Some(Engine::Vectorscan(scanner)) => {
                let scanned = scanner.scan(data, |k, end| {
                    let k = k as usize;
                    candidate(k, end - rules[k].contents[usize::from(fast[k])].bytes.len(), end);
                    true
                });
                if scanned.is_err() {
                    counts.scan_errors += 1;
                }
            }
        }
        if self.touched.is_empty() {
            return (false, None);
        }
        lower_into(&mut self.lower, &mut self.lowered, data);
        let mut drop = false;
        let mut note = None;
        // In rule order, whatever order the engine found them in: the note is the
        // first alerting rule's.
        self.touched.sort_unstable();
        for k in self.touched.drain(..) {
            let k = k as usize;
            self.checked[k] = false;
            let rule = &self.rules[k];
            let fast = usize::from(self.fast[k]);
            let whole = rule
                .contents
                .iter()
                .enumerate()
                .all(|(c, content)| c == fast || content.find_in(data, &self.lower, base));
            if !whole || !rule.header_matches(key) {
                continue;
            }
            self.fired[k] += 1;
            match rule.action {
                Action::Drop => drop = true,
                Action::Alert => {
                    self.counts.alerts += 1;
                    note = note.or(Some(rule.sid));
                }
                Action::Log => {}
            }
        }
        if drop {
            self.counts.drops += 1;
        }
        (drop, note)
    }
}

/// `window` in lower case into `lower`, once per window (`lowered` says it is done).
fn lower_into(lower: &mut Vec<u8>, lowered: &mut bool, window: &[u8]) {
    if !*lowered {
        lower.clear();
        lower.extend(window.iter().map(u8::to_ascii_lowercase));
        *lowered = true;
    }
}

impl Content {
    /// Whether a match at `start..end` of a window whose byte 0 is stream offset `base`
    /// lies where `offset` and `depth` allow.
    #[inline]
    fn admits(&self, base: u32, start: usize, end: usize) -> bool {
        let (start, end) = (u64::from(base) + start as u64, u64::from(base) + end as u64);
        start >= u64::from(self.offset) && self.depth.is_none_or(|d| end <= u64::from(self.offset) + u64::from(d))
    }

    /// Whether the content is in `window` (byte 0 at stream offset `base`; `lower` the
    /// same in lower case) where its `offset` and `depth` allow.
    fn find_in(&self, window: &[u8], lower: &[u8], base: u32) -> bool {
        let n = self.bytes.len();
        let lo = (self.offset.saturating_sub(base) as usize).min(window.len());
        let hi = match self.depth {
            None => window.len(),
            Some(d) => {
                ((u64::from(self.offset) + u64::from(d)).saturating_sub(u64::from(base)) as usize).min(window.len())
            }
        };
        if hi < lo + n {
            return false;
        }
        if self.nocase {
            memchr::memmem::find(&lower[lo..hi], &self.lowered).is_some()
        } else {
            memchr::memmem::find(&window[lo..hi], &self.bytes).is_some()
        }
    }
}

impl Dpi {
    /// The search engine in use: `vectorscan` or `aho-corasick` (`None` without rules).
    pub fn engine(&self) -> Option<&'static str> {
        self.engine.as_ref().map(Engine::name)
    }

    /// For `sfclab bench nfs`: the NF's search engine alone over `payloads`, as the NF
    /// runs it on a packet (aho-corasick: lowered into the window, the leftmost search,
    /// the overlapping one from a match on; vectorscan: a scan of each payload as it is),
    /// without parsing, flows or rules. Bytes scanned per TSC cycle.
    pub fn matcher_alone(&mut self, payloads: &[Vec<u8>], rounds: usize) -> f64 {
        let mut found = 0usize;
        let mut bytes = 0u64;
        let t0 = sfclab_core::tsc::now();
        for _ in 0..rounds {
            for payload in payloads {
                match &mut self.engine {
                    None => return f64::NAN,
                    Some(Engine::AhoCorasick { probe, matcher }) => {
                        self.lower.clear();
                        self.lower.extend(payload.iter().map(u8::to_ascii_lowercase));
                        if let Some(first) = probe.find(&self.lower[..]) {
                            found += matcher.find_overlapping_iter(&self.lower[first.start()..]).count();
                        }
                    }
                    // As `hsbench` measures it: one scan per payload, matches counted.
                    Some(Engine::Vectorscan(scanner)) => {
                        let _ = scanner.scan(payload, |_, _| {
                            found += 1;
                            true
                        });
                    }
                }
                bytes += payload.len() as u64;
            }
        }
        let cycles = sfclab_core::tsc::now() - t0;
        std::hint::black_box(found);
        bytes as f64 / cycles.max(1) as f64
    }
}

/// The flow's place in the slab, made when new; a full table gives the place of the
/// flow that came first to the new one (FIFO: constant time, where finding the least
/// recent would scan the table).
fn flow_entry(
    flows: &mut HashMap<Key, u32>,
    slab: &mut Vec<Flow>,
    next: &mut usize,
    max_flows: usize,
    counts: &mut Counts,
    key: Key,
    seq: u32,
) -> usize {
    if let Some(&at) = flows.get(&key) {
        return at as usize;
    }
    let fresh = Flow {
        key,
        offset: 0,
        next_seq: seq,
        tail_len: 0,
        tail: [0; MAX_CONTENT - 1],
        dropped: false,
    };
    let at = if slab.len() < max_flows {
        // Within the capacity reserved at build: no allocation.
        slab.push(fresh);
        slab.len() - 1
    } else {
        let at = *next;
        *next = (at + 1) % max_flows;
        flows.remove(&slab[at].key);
        counts.evicted += 1;
        slab[at] = fresh;
        at
    };
    flows.insert(key, at as u32);
    at
}

impl Rule {
    fn header_matches(&self, key: &Key) -> bool {
        let reverse = Key {
            src: key.dst,
            dst: key.src,
            sport: key.dport,
            dport: key.sport,
            proto: key.proto,
        };
        self.headers
            .iter()
            .any(|h| h.matches(key) || (self.both_ways && h.matches(&reverse)))
    }
}

/// Registers `dpi`.
pub const TYPE: crate::NfType = crate::NfType {
    kind: "dpi",
    about: "payload inspection: Snort/Suricata-style content signatures in one Aho-Corasick scan, TCP as a stream per flow",
    stateless: false,
    cost_neutral: &[],
    files: &["rules_file"],
    wraps: None,
    schema: || schemars::schema_for!(DpiConfig),
    drops_all_by_default: None,
    fixes: &[(
        "dpi-drop",
        "a `drop` signature matches this traffic: change its action to `alert`, or its content (examples/chains/dpi.yaml)",
    )],
    build: |v| Ok(Box::new(Dpi::new(&crate::typed(v)?)?)),
};

#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DpiConfig {
    /// Signature lines: `action proto src sport -> dst dport (msg:"..."; content:"...";
    /// nocase; offset:N; depth:N; sid:N;)`; action `alert`, `log` or `drop`; proto `tcp`,
    /// `udp`, `icmp` or `ip`; addresses `any`, `a.b.c.d[/len]` or `[a, b]`; ports `any`,
    /// `n`, `lo:hi`, `lo:`, `:hi` or `[a, b]`; `<>` for both directions. `content`
    /// takes `|41 42|` hex bytes; each content's `nocase`, `offset` and `depth` follow it.
    #[serde(default)]
    pub rules: Vec<String>,
    /// A file of signature lines (`#` starts a comment), read when the NF is built; in a
    /// chain file, relative to it.
    pub rules_file: Option<String>,
    /// Bytes of a TCP flow inspected (default 1MiB); past them its packets pass unscanned.
    pub stream_depth: Option<ByteSize>,
    /// TCP flows whose stream state is kept (default 65536).
    pub max_flows: Option<usize>,
    /// The search for the rules' fast patterns: `vectorscan` (the default where this
    /// build has it) or `aho-corasick` (the default otherwise).
    pub engine: Option<String>,
}

impl Dpi {
    pub fn new(cfg: &DpiConfig) -> Result<Dpi, ConfigError> {
        let mut rules = Vec::new();
        for (k, line) in cfg.rules.iter().enumerate() {
            rules.push(parse_rule(line).map_err(|e| ConfigError::new(format!("rules[{k}]"), e))?);
        }
        if let Some(path) = &cfg.rules_file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| ConfigError::new("rules_file", format!("cannot read {path}: {e}")))?;
            rules.extend(parse_rules(&text).map_err(|e| ConfigError::new("rules_file", format!("{path}: {e}")))?);
        }
        for (k, r) in rules.iter().enumerate() {
            if let Some(j) = rules[..k].iter().position(|o| o.sid == r.sid) {
                return Err(ConfigError::new(
                    "rules",
                    format!("sid {} names two rules (the {j}th and the {k}th)", r.sid),
                ));
            }
        }
        let stream_depth = cfg.stream_depth.map_or(1 << 20, |b| b.0);
        if !(1..=u64::from(u32::MAX / 2)).contains(&stream_depth) {
            return Err(ConfigError::new("stream_depth", "must be 1 byte to 2GiB"));
        }
        let max_flows = cfg.max_flows.unwrap_or(1 << 16);
        if !(1..=1 << 24).contains(&max_flows) {
            return Err(ConfigError::new("max_flows", "must be 1..=16777216"));
        }
        // Each rule's fast pattern: its longest content (the first of the longest).
        let fast: Vec<u8> = rules
            .iter()
            .map(|r| {
                let longest = r.contents.iter().map(|c| c.bytes.len()).max().unwrap_or(0);
                r.contents.iter().position(|c| c.bytes.len() == longest).unwrap_or(0) as u8
            })
            .collect();
        let engine = match cfg.engine.as_deref() {
            None => engines()[0],
            Some(VECTORSCAN) if !sfclab_vectorscan::available() => {
                return Err(ConfigError::new("engine", sfclab_vectorscan::NOT_BUILT));
            }
            Some(e @ (VECTORSCAN | AHO_CORASICK)) => e,
            Some(other) => {
                return Err(ConfigError::new(
                    "engine",
                    format!("`{other}` is not a search engine: write vectorscan or aho-corasick"),
                ));
            }
        };
        let fast_contents: Vec<&Content> = rules
            .iter()
            .zip(&fast)
            .map(|(r, &f)| &r.contents[usize::from(f)])
            .collect();
        let engine = match engine {
            _ if rules.is_empty() => None,
            VECTORSCAN => {
                let literals: Vec<sfclab_vectorscan::Literal> = fast_contents
                    .iter()
                    .map(|c| sfclab_vectorscan::Literal {
                        bytes: &c.bytes,
                        caseless: c.nocase,
                    })
                    .collect();
                let db = sfclab_vectorscan::Database::block(&literals)
                    .map_err(|e| ConfigError::new("rules", format!("vectorscan: {e}")))?;
                let scanner =
                    sfclab_vectorscan::Scanner::new(Arc::new(db)).map_err(|e| ConfigError::new("engine", e))?;
                Some(Engine::Vectorscan(scanner))
            }
            _ => {
                let patterns: Vec<&[u8]> = fast_contents.iter().map(|c| &c.lowered[..]).collect();
                let automaton = |kind: MatchKind| {
                    AhoCorasick::builder()
                        .match_kind(kind)
                        .kind(Some(AhoCorasickKind::DFA))
                        .build(&patterns)
                        .map_err(|e| ConfigError::new("rules", format!("the contents make no automaton: {e}")))
                };
                Some(Engine::AhoCorasick {
                    probe: automaton(MatchKind::LeftmostFirst)?,
                    matcher: automaton(MatchKind::Standard)?,
                })
            }
        };
        let longest = rules
            .iter()
            .flat_map(|r| r.contents.iter().map(|c| c.bytes.len()))
            .max()
            .unwrap_or(1);
        let names = rules
            .iter()
            .map(|r| crate::config::intern(&format!("sid_{}", r.sid)))
            .collect();
        let n = rules.len();
        Ok(Dpi {
            engine,
            fast,
            tail_keep: longest - 1,
            stream_depth: stream_depth as u32,
            max_flows,
            // Reserved at build (about 300 bytes a flow, touched as flows come): no
            // growth on the data path. The index at twice the flows, so that flows
            // coming and going rehash it in place.
            flows: HashMap::with_capacity(if n == 0 { 0 } else { 2 * max_flows }),
            slab: Vec::with_capacity(if n == 0 { 0 } else { max_flows }),
            next: 0,
            fired: vec![0; n],
            names,
            window: Vec::with_capacity(MAX_CONTENT + sfclab_core::packet::MAX_FRAME),
            lower: Vec::with_capacity(MAX_CONTENT + sfclab_core::packet::MAX_FRAME),
            lowered: false,
            checked: vec![false; n],
            touched: Vec::with_capacity(n),
            rules,
            counts: Counts::default(),
        })
    }
}

/// Signature lines, one per line; blank lines and `#` comments are skipped. Errors name
/// the line.
pub fn parse_rules(text: &str) -> Result<Vec<Rule>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|(n, l)| parse_rule(l).map_err(|e| format!("line {}: {e}", n + 1)))
        .collect()
}

/// One signature line.
pub fn parse_rule(line: &str) -> Result<Rule, String> {
    let line = line.trim();
    let open = line
        .find('(')
        .ok_or("no options: a rule ends with `(msg:...; content:...; sid:N;)`")?;
    if !line.ends_with(')') {
        return Err("the options must end with `)`".into());
    }
    let header = header_words(&line[..open]);
    let [action, proto, src, sport, dir, dst, dport] = header.iter().map(String::as_str).collect::<Vec<_>>()[..] else {
        return Err(format!(
            "the header `{}` is not `action proto src sport -> dst dport`",
            line[..open].trim()
        ));
    };
    let action = match action {
        "alert" => Action::Alert,
        "log" => Action::Log,
        "drop" | "reject" => Action::Drop,
        other => return Err(format!("`{other}` is not an action: write alert, log or drop")),
    };
    let proto = match proto {
        "tcp" => Some("tcp"),
        "udp" => Some("udp"),
        "icmp" => Some("icmp"),
        "ip" => None,
        other => return Err(format!("`{other}` is not a protocol: write tcp, udp, icmp or ip")),
    };
    let both_ways = match dir {
        "->" => false,
        "<>" => true,
        other => return Err(format!("`{other}` is not a direction: write -> or <>")),
    };
    let headers = header_matches(proto, [src, sport, dst, dport])?;
    let (contents, sid, msg) = rule_options(&line[open + 1..line.len() - 1])?;
    if contents.is_empty() {
        return Err("a rule needs at least one `content`".into());
    }
    Ok(Rule {
        action,
        headers,
        both_ways,
        contents,
        sid: sid.ok_or("a rule needs a `sid`")?,
        msg,
    })
}

/// The header's matches: every combination of its address and port lists (at most 1024).
fn header_matches(proto: Option<&str>, [src, sport, dst, dport]: [&str; 4]) -> Result<Vec<Match>, String> {
    let mut headers = Vec::new();
    for s in list(src, "address")? {
        for sp in list(sport, "port")? {
            for d in list(dst, "address")? {
                for dp in list(dport, "port")? {
                    headers.push(
                        Match::from_fields(proto, Some(&s), Some(&d), Some(&port(&sp)?), Some(&port(&dp)?))
                            .map_err(|(f, e)| format!("{f}: {e}"))?,
                    );
                }
            }
        }
    }
    if headers.len() > 1024 {
        return Err("the header's lists expand to more than 1024 matches".into());
    }
    Ok(headers)
}

/// A rule's options (`text` between its parentheses): its contents with their
/// modifiers, its sid and its message.
fn rule_options(text: &str) -> Result<(Vec<Content>, Option<u32>, String), String> {
    let mut contents: Vec<Content> = Vec::new();
    let (mut sid, mut msg) = (None, String::new());
    for opt in options(text)? {
        let (name, value) = match opt.split_once(':') {
            Some((n, v)) => (n.trim(), Some(v.trim())),
            None => (opt.trim(), None),
        };
        let last = |what: &str, contents: &mut Vec<Content>| -> Result<usize, String> {
            contents
                .len()
                .checked_sub(1)
                .ok_or_else(|| format!("`{what}` modifies a content: write it after one"))
        };
        let number = |v: Option<&str>| -> Result<u32, String> {
            v.and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("`{name}` needs a number, not `{}`", v.unwrap_or("")))
        };
        match name {
            "msg" => msg = unquote(value.unwrap_or(""))?,
            "content" => {
                let v = value.ok_or("`content` needs a value")?;
                if v.starts_with('!') {
                    return Err("negated content (`content:!`) is not supported".into());
                }
                let bytes = content_bytes(&unquote(v)?)?;
                if bytes.is_empty() || bytes.len() > MAX_CONTENT {
                    return Err(format!("a content is 1 to {MAX_CONTENT} bytes"));
                }
                if contents.len() == MAX_CONTENTS_PER_RULE {
                    return Err(format!("at most {MAX_CONTENTS_PER_RULE} contents per rule"));
                }
                contents.push(Content {
                    lowered: bytes.to_ascii_lowercase(),
                    bytes,
                    nocase: false,
                    offset: 0,
                    depth: None,
                });
            }
            "nocase" => {
                let k = last(name, &mut contents)?;
                contents[k].nocase = true;
            }
            "offset" => {
                let k = last(name, &mut contents)?;
                contents[k].offset = number(value)?;
            }
            "depth" => {
                let k = last(name, &mut contents)?;
                let d = number(value)?;
                if (d as usize) < contents[k].bytes.len() {
                    return Err(format!("depth {d} is shorter than its content"));
                }
                contents[k].depth = Some(d);
            }
            "sid" => sid = Some(number(value)?),
            "rev" | "classtype" | "priority" | "reference" | "metadata" => {}
            other => {
                return Err(format!(
                    "option `{other}` is not supported (msg, content, nocase, offset, depth, sid, rev)"
                ));
            }
        }
    }
    Ok((contents, sid, msg))
}

/// The header's words; a `[...]` list is one word, spaces and all.
fn header_words(s: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut depth = 0usize;
    for part in s.split_whitespace() {
        match words.last_mut() {
            Some(w) if depth > 0 => {
                w.push(' ');
                w.push_str(part);
            }
            _ => words.push(part.to_string()),
        }
        depth = (depth + part.matches('[').count()).saturating_sub(part.matches(']').count());
    }
    words
}

/// `any`, one value, or `[a, b, ...]`. Variables and negation are refused by name.
fn list(s: &str, what: &str) -> Result<Vec<String>, String> {
    if s.starts_with('$') {
        return Err(format!("variables (`{s}`) are not supported: write the {what}"));
    }
    if s.starts_with('!') {
        return Err(format!("negation (`{s}`) is not supported"));
    }
    match s.strip_prefix('[').and_then(|s| s.strip_suffix(']')) {
        Some(inner) => Ok(inner.split(',').map(|v| v.trim().to_string()).collect()),
        None => Ok(vec![s.to_string()]),
    }
}

/// A Snort port (`n`, `lo:hi`, `lo:`, `:hi`, `any`) as a range `lo-hi`.
fn port(s: &str) -> Result<String, String> {
    match s.split_once(':') {
        None => Ok(s.to_string()),
        Some((lo, hi)) => Ok(format!(
            "{}-{}",
            if lo.is_empty() { "0" } else { lo },
            if hi.is_empty() { "65535" } else { hi }
        )),
    }
}

/// The options between the parentheses, split at `;` outside quotes.
fn options(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let (mut cur, mut quoted, mut escaped) = (String::new(), false, false);
    for c in s.chars() {
        match c {
            _ if escaped => {
                cur.push(c);
                escaped = false;
            }
            '\\' => {
                cur.push(c);
                escaped = true;
            }
            '"' => {
                cur.push(c);
                quoted = !quoted;
            }
            ';' if !quoted => {
                if !cur.trim().is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                cur.clear();
            }
            _ => cur.push(c),
        }
    }
    if quoted {
        return Err("an unclosed quote in the options".into());
    }
    if !cur.trim().is_empty() {
        out.push(cur);
    }
    Ok(out)
}

/// A quoted value without its quotes and with `\"`, `\\`, `\;` unescaped.
fn unquote(v: &str) -> Result<String, String> {
    let inner = v
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .ok_or_else(|| format!("`{v}` is not in quotes"))?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            out.push(chars.next().ok_or("a `\\` at the end")?);
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// Content text with `|0d 0a|` hex runs as bytes.
fn content_bytes(s: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    for (k, part) in s.split('|').enumerate() {
        if k % 2 == 0 {
            out.extend_from_slice(part.as_bytes());
        } else {
            for h in part.split_whitespace() {
                out.push(u8::from_str_radix(h, 16).map_err(|_| format!("`{h}` in |...| is not a hex byte"))?);
            }
        }
    }
    if s.split('|').count().is_multiple_of(2) {
        return Err("an unclosed `|` hex run".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::run_inspecting;
    use sfclab_core::Verdict;

    fn tcp(sport: u16, dport: u16, seq: u32, payload: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .tcp(sport, dport, seq, 65535)
            .ack(1)
            .write(&mut f, payload)
            .unwrap();
        f
    }

    fn udp(dport: u16, payload: &[u8]) -> Vec<u8> {
        let mut f = Vec::new();
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
            .udp(1000, dport)
            .write(&mut f, payload)
            .unwrap();
        f
    }

    fn dpi(engine: &str, rules: &[&str]) -> Dpi {
        Dpi::new(&DpiConfig {
            rules: rules.iter().map(|r| r.to_string()).collect(),
            engine: Some(engine.into()),
            ..Default::default()
        })
        .unwrap()
    }

    /// Verdicts and the sid noted, per frame.
    fn run(nf: &mut Dpi, frames: &[Vec<u8>]) -> Vec<(Verdict, Option<u32>)> {
        let mut notes = Vec::new();
        let (_, v) = run_inspecting(nf, frames, 0, |p| notes.push(p.notes.get(Note::SIGNATURE)));
        v.into_iter().zip(notes).collect()
    }

    #[test]
    fn parses_the_documented_subset() {
        let r = parse_rule(
            r#"alert tcp 10.0.0.0/8 any -> [192.0.2.1, 192.0.2.2] 80:90 (msg:"a \"quoted\"; msg"; content:"GET |2f|x"; nocase; offset:0; depth:16; content:"Host"; sid:1001; rev:2;)"#,
        )
        .unwrap();
        assert_eq!(
            (r.action, r.sid, r.msg.as_str()),
            (Action::Alert, 1001, "a \"quoted\"; msg")
        );
        assert_eq!(r.headers.len(), 2);
        assert_eq!(r.headers[0].dport, (80, 90));
        assert_eq!(r.contents[0].bytes, b"GET /x");
        assert!(r.contents[0].nocase && !r.contents[1].nocase);
        assert_eq!(r.contents[0].depth, Some(16));
        for (bad, why) in [
            ("alert tcp any any -> any any (content:\"x\";)", "sid"),
            ("alert tcp any any -> any any (sid:1;)", "content"),
            (
                "alert tcp $HOME_NET any -> any any (content:\"x\"; sid:1;)",
                "variables",
            ),
            (
                "alert tcp any any -> any any (content:\"x\"; pcre:\"/a/\"; sid:1;)",
                "pcre",
            ),
            (
                "alert tcp any any -> any any (nocase; content:\"x\"; sid:1;)",
                "after one",
            ),
            ("block tcp any any -> any any (content:\"x\"; sid:1;)", "action"),
            ("alert tcp any any -> any any (content:\"|4g|\"; sid:1;)", "hex"),
            (
                "alert tcp any any -> any any (content:\"abc\"; depth:2; sid:1;)",
                "shorter",
            ),
        ] {
            let e = parse_rule(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
        let e = Dpi::new(&DpiConfig {
            rules: vec!["alert udp any any -> any any (content:\"a\"; sid:1;)".into(); 2],
            ..Default::default()
        })
        .err()
        .unwrap();
        assert!(e.reason.contains("sid 1 names two rules"), "{e}");
    }

    #[test]
    fn alerts_note_the_sid_and_drop_rules_drop() {
        for &engine in engines() {
            let mut nf = dpi(
                engine,
                &[
                    r#"alert tcp any any -> any 80 (msg:"web"; content:"GET "; nocase; depth:4; sid:10;)"#,
                    r#"drop udp any any -> any 53 (msg:"bad dns"; content:"|07|example"; sid:20;)"#,
                    r#"log udp any any -> any any (content:"EXAMPLE"; sid:30;)"#,
                ],
            );
            let got = run(
                &mut nf,
                &[
                    tcp(1, 80, 0, b"get /index.html"),
                    tcp(2, 80, 0, b"xx GET /"),
                    tcp(3, 8080, 0, b"GET /"),
                    udp(53, b"\x07example\x03com"),
                    udp(54, b"\x07EXAMPLE"),
                ],
            );
            assert_eq!(got[0], (Verdict::Continue, Some(10)), "nocase, within depth");
            assert_eq!(got[1], (Verdict::Continue, None), "past depth 4");
            assert_eq!(got[2], (Verdict::Continue, None), "another port");
            assert_eq!(got[3], (Verdict::Drop(DPI_DROP), None));
            assert_eq!(got[4], (Verdict::Continue, None), "log: counted, not noted");
            let c = nf.counters();
            let get = |n: &str| c.iter().find(|x| x.name == n).map(|x| x.value);
            assert_eq!(
                (get("sid_10"), get("sid_20"), get("sid_30")),
                (Some(1), Some(1), Some(1))
            );
            assert_eq!(
                (get("alerts"), get("drops"), get("inspected")),
                (Some(1), Some(1), Some(5))
            );
        }
    }

    /// A rule fires when its fast pattern (the longest content) and every other content
    /// are there, each where its offset and depth allow; overlapping patterns of two
    /// rules both count.
    #[test]
    fn every_content_of_a_rule_must_match_and_overlaps_count() {
        for &engine in engines() {
            let mut nf = dpi(
                engine,
                &[
                    r#"alert udp any any -> any any (content:"ab"; offset:2; content:"longer"; sid:40;)"#,
                    r#"alert udp any any -> any any (content:"gerx"; sid:41;)"#,
                ],
            );
            assert_eq!(nf.fast, vec![1, 0], "the longest content is the fast pattern");
            let got = run(
                &mut nf,
                &[udp(9, b"xxab longerx"), udp(9, b"ab longer"), udp(9, b"xxab longe")],
            );
            assert_eq!(got[0].1, Some(40));
            assert_eq!(nf.fired, vec![1, 1], "`longer` and `gerx` overlap: both fire");
            assert_eq!(got[1].1, None, "`ab` at offset 0, before its offset 2");
            assert_eq!(got[2].1, None, "no fast pattern");
        }
    }

    #[test]
    fn a_pattern_split_across_segments_of_a_flow_matches_once() {
        for &engine in engines() {
            let mut nf = dpi(engine, &[r#"alert tcp any any -> any any (content:"attack"; sid:1;)"#]);
            let first = tcp(5, 80, 1000, b"xxxxatt");
            let second = tcp(5, 80, 1007, b"ack and more");
            assert_eq!(run(&mut nf, &[first, second])[1], (Verdict::Continue, Some(1)));
            // The next segment does not find it again in the kept bytes.
            let third = tcp(5, 80, 1019, b"zzz");
            assert_eq!(run(&mut nf, &[third])[0], (Verdict::Continue, None));
            assert_eq!(nf.fired[0], 1);
            // A gap (a lost segment) restarts the window: no false match across it.
            let mut nf = dpi(engine, &[r#"alert tcp any any -> any any (content:"attack"; sid:1;)"#]);
            let got = run(&mut nf, &[tcp(6, 80, 0, b"att"), tcp(6, 80, 100, b"ack")]);
            assert_eq!(got[1], (Verdict::Continue, None));
            assert_eq!(nf.counts.gaps, 1);
        }
    }

    #[test]
    fn offset_and_depth_count_from_the_start_of_the_stream() {
        for &engine in engines() {
            let mut nf = dpi(
                engine,
                &[r#"alert tcp any any -> any any (content:"HTTP"; offset:4; depth:8; sid:2;)"#],
            );
            // Bytes 4..12 of the stream: the second segment's first bytes are 6..
            let got = run(&mut nf, &[tcp(7, 80, 0, b"GET /x"), tcp(7, 80, 6, b"HTTP/1.1")]);
            assert_eq!(got[1].1, Some(2), "at stream offset 6, inside 4..12");
            let got = run(&mut nf, &[tcp(8, 80, 0, b"GET /xxxxxxxx"), tcp(8, 80, 13, b"HTTP")]);
            assert_eq!(got[1].1, None, "at stream offset 13: past the depth");
        }
    }

    #[test]
    fn a_dropped_flow_stays_dropped_and_inspection_stops_at_the_stream_depth() {
        for &engine in engines() {
            let mut nf = dpi(engine, &[r#"drop tcp any any -> any any (content:"evil"; sid:3;)"#]);
            let got = run(
                &mut nf,
                &[tcp(9, 80, 0, b"evil"), tcp(9, 80, 4, b"fine"), tcp(10, 80, 0, b"fine")],
            );
            assert_eq!(
                got.iter().map(|g| g.0).collect::<Vec<_>>(),
                vec![Verdict::Drop(DPI_DROP), Verdict::Drop(DPI_DROP), Verdict::Continue]
            );
            let mut nf = Dpi::new(&DpiConfig {
                rules: vec![r#"alert tcp any any -> any any (content:"late"; sid:4;)"#.into()],
                stream_depth: Some(ByteSize(8)),
                engine: Some(engine.into()),
                ..Default::default()
            })
            .unwrap();
            let got = run(&mut nf, &[tcp(11, 80, 0, b"12345678"), tcp(11, 80, 8, b"late")]);
            assert_eq!(got[1].1, None, "past the stream depth");
            assert_eq!(nf.counts.past_depth, 1);
        }
    }

    /// Rules and traffic drawn at random from a small alphabet (so that patterns match,
    /// overlap, straddle segments and fall either side of their offsets and depths):
    /// every engine gives every frame the same verdict and note, and fires the same rules.
    #[test]
    fn every_engine_finds_the_same_rules_in_the_same_traffic() {
        use proptest::prelude::*;
        let alphabet = || prop::sample::select(vec![b'a', b'b', b'A', b'B', 0u8, b'|']);
        let content = (
            prop::collection::vec(alphabet(), 1..5),
            any::<bool>(),
            prop::option::of(0u32..8),
            prop::option::of(0u32..12),
        );
        let rule = (
            prop::sample::select(vec!["alert", "log", "drop"]),
            prop::sample::select(vec!["tcp", "udp", "ip"]),
            prop::collection::vec(content, 1..4),
        );
        // A frame: TCP on one of three flows (its next segment, or one after a gap), or UDP.
        let frame = (0u8..4, any::<bool>(), prop::collection::vec(alphabet(), 0..24));
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig::with_cases(256));
        let engines = engines();
        if engines.len() < 2 {
            eprintln!("SKIPPED: this build has one engine");
            return;
        }
        runner
            .run(
                &(prop::collection::vec(rule, 1..7), prop::collection::vec(frame, 1..30)),
                |(rules, frames)| {
                    let lines: Vec<String> = rules
                        .iter()
                        .enumerate()
                        .map(|(sid, (action, proto, contents))| {
                            let options: String = contents
                                .iter()
                                .map(|(bytes, nocase, offset, depth)| {
                                    let hex: Vec<String> = bytes.iter().map(|b| format!("{b:02x}")).collect();
                                    let mut o = format!("content:\"|{}|\";", hex.join(" "));
                                    if *nocase {
                                        o += " nocase;";
                                    }
                                    if let Some(off) = offset {
                                        o += &format!(" offset:{off};");
                                    }
                                    if let Some(d) = depth {
                                        o += &format!(" depth:{};", *d as usize + bytes.len());
                                    }
                                    o
                                })
                                .collect::<Vec<_>>()
                                .join(" ");
                            format!("{action} {proto} any any -> any any ({options} sid:{};)", sid + 1)
                        })
                        .collect();
                    let mut seq = [0u32; 3];
                    let frames: Vec<Vec<u8>> = frames
                        .iter()
                        .map(|(which, gap, payload)| match *which {
                            3 => udp(53, payload),
                            f => {
                                let f = usize::from(f);
                                if *gap {
                                    seq[f] = seq[f].wrapping_add(5);
                                }
                                let at = seq[f];
                                seq[f] = seq[f].wrapping_add(payload.len() as u32);
                                tcp(2000 + f as u16, 80, at, payload)
                            }
                        })
                        .collect();
                    let rules: Vec<&str> = lines.iter().map(String::as_str).collect();
                    let results: Vec<_> = engines
                        .iter()
                        .map(|e| {
                            let mut nf = dpi(e, &rules);
                            let got = run(&mut nf, &frames);
                            (got, nf.fired.clone(), nf.counts.alerts, nf.counts.drops)
                        })
                        .collect();
                    prop_assert_eq!(&results[0], &results[1], "{:?}", lines);
                    Ok(())
                },
            )
            .unwrap();
    }

    #[test]
    fn an_engine_this_build_lacks_or_does_not_know_is_refused_saying_so() {
        let with = |engine: &str| {
            Dpi::new(&DpiConfig {
                rules: vec![r#"alert udp any any -> any any (content:"x"; sid:1;)"#.into()],
                engine: Some(engine.into()),
                ..Default::default()
            })
        };
        let e = with("hyperscan").err().unwrap();
        assert_eq!(e.key, "engine");
        assert!(e.reason.contains("vectorscan or aho-corasick"), "{e}");
        match with(VECTORSCAN) {
            Ok(nf) => assert_eq!(nf.engine(), Some(VECTORSCAN)),
            Err(e) => assert!(
                !sfclab_vectorscan::available() && e.reason.contains("libvectorscan-dev"),
                "{e}"
            ),
        }
        assert_eq!(with(AHO_CORASICK).unwrap().engine(), Some(AHO_CORASICK));
    }

    #[test]
    fn the_flow_table_is_bounded() {
        for &engine in engines() {
            let mut nf = Dpi::new(&DpiConfig {
                rules: vec![r#"alert tcp any any -> any any (content:"x"; sid:4;)"#.into()],
                max_flows: Some(4),
                engine: Some(engine.into()),
                ..Default::default()
            })
            .unwrap();
            let frames: Vec<_> = (0..10).map(|k| tcp(100 + k, 80, 0, b"abc")).collect();
            let bytes = nf.counters().iter().find(|c| c.name == "table_bytes").unwrap().value;
            run(&mut nf, &frames);
            assert_eq!((nf.flows.len(), nf.slab.len()), (4, 4));
            assert_eq!(nf.counts.evicted, 6);
            // The last four flows are the ones kept, each in its place.
            for k in 6..10u16 {
                let key = Key {
                    src: u32::from_be_bytes([10, 0, 0, 1]),
                    dst: u32::from_be_bytes([10, 0, 0, 2]),
                    proto: TCP,
                    sport: 100 + k,
                    dport: 80,
                };
                let at = nf.flows[&key] as usize;
                assert_eq!(nf.slab[at].key, key);
            }
            // A long churn allocates nothing.
            for round in 0..200u16 {
                let frames: Vec<_> = (0..10).map(|k| tcp(1000 + round * 10 + k, 80, 0, b"abc")).collect();
                run(&mut nf, &frames);
            }
            assert_eq!(
                nf.counters().iter().find(|c| c.name == "table_bytes").unwrap().value,
                bytes
            );
        }
    }
}
