//! `shaper`: holds packets in bounded per-class queues and sends them no faster than a
//! rate, as Linux's `tbf` under `prio` or `drr`, or DPDK's `rte_sched` in miniature.
//! Packets go to the first class that matches (by DSCP or an IPv4 5-tuple rule,
//! [`crate::classes`]); what none takes, non-IP frames included, goes to the class
//! `default`, always last. The port's token bucket (`rate`, `burst`) paces everything;
//! a class may have its own ceiling (`rate`, `burst`). Between classes the scheduler is
//! deficit round robin (Shreedhar and Varghese, SIGCOMM 1995: each class sends up to
//! its `quantum` of bytes per round, so bandwidth divides by quantum) or strict
//! priority (the lowest `priority` number with a packet that may go, goes first).
//!
//! It uses the NF contract's held path: every packet is held when it arrives and
//! emitted when the scheduler sends it, on a later call (the next batch, or the call
//! the runtime makes with an empty batch while the shaper holds packets). A full queue
//! drops the arriving packet (`drop: tail`) or its oldest one (`drop: head`), counted
//! as `queue-overflow`; what is queued when the run ends is counted as `held-at-end`.
//! Queued packets keep their buffers: the queues' total is taken from the run's pool.
//!
//! Shapes frame bytes (Ethernet header included, no preamble or gap), as `tc` does.
//!
//! Keys: `rate` (10Gbit), `burst` (1 ms of `rate`, at least two 1514-byte frames),
//! `scheduler` (`drr` or `priority`), `queue` (1024 packets per class), `drop` (`tail`
//! or `head`), `classes` (list of `{ name, match: { dscp, proto, src, dst, sport,
//! dport }, priority (its place), quantum (1514 bytes), rate, burst, queue }`).
//!
//! Counters: per class (the `default` one too) `<name>_sent`, `<name>_sent_bytes`,
//! `<name>_overflow`, `<name>_queued` (gauge); `backlog_bytes` (gauge). Drops:
//! `malformed`, and its own `queue-overflow`.

use std::collections::VecDeque;

use serde::Deserialize;
use sfclab_core::packet::MAX_FRAME;
use sfclab_core::{BatchView, Context, DropReason, MAX_BATCH, NetworkFunction, NfCounter, PacketRef, Verdicts};

use crate::classes::{self, Bucket, Classifier, MatchConfig, Rate};
use crate::{ByteSize, ConfigError};

/// This NF's own drop reasons, in code order (`drop_reasons()`).
const DROP_REASONS: &[&str] = &["queue-overflow"];
const QUEUE_OVERFLOW: DropReason = DropReason::named(DROP_REASONS, "queue-overflow");

/// The class that takes what no configured class matches.
const DEFAULT_CLASS: &str = "default";

struct Class {
    /// Held packets with their lengths, oldest first; never more than `capacity`.
    queue: VecDeque<(PacketRef, u32)>,
    capacity: usize,
    /// Packets of the current call that will be held (their `hold` comes after it).
    arriving: usize,
    bytes: u64,
    priority: u8,
    quantum: u64,
    deficit: u64,
    ceiling: Option<Bucket>,
    sent: u64,
    sent_bytes: u64,
    overflow: u64,
    names: [&'static str; 4],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scheduler {
    Drr,
    Priority,
}

pub struct Shaper {
    classifier: Classifier,
    /// The configured classes, then `default`.
    classes: Vec<Class>,
    /// Class indices by priority, lowest number first (ties: in order).
    by_priority: Vec<usize>,
    scheduler: Scheduler,
    port: Bucket,
    last_ns: u64,
    head_drop: bool,
    /// DRR: the class whose turn it is, and whether it has had its quantum this turn.
    cursor: usize,
    granted: bool,
    /// DRR: visits that may pass without a send before every class has had enough
    /// quantum for the largest frame.
    max_visits: usize,
    /// The class of each packet held in the current call, in batch order: `hold` is
    /// called for them in that order (the NF contract).
    arrivals: VecDeque<u16>,
    held: usize,
}

impl NetworkFunction for Shaper {
    fn kind(&self) -> &'static str {
        TYPE.kind
    }

    fn drop_reasons(&self) -> &'static [&'static str] {
        DROP_REASONS
    }

    fn process(&mut self, ctx: &mut Context<'_>, mut batch: BatchView<'_>, verdicts: &mut Verdicts) {
        let now = ctx.now_ns();
        let elapsed = now.saturating_sub(self.last_ns);
        if elapsed != 0 {
            self.last_ns = now;
            self.port.fill(elapsed);
            for c in &mut self.classes {
                if let Some(b) = &mut c.ceiling {
                    b.fill(elapsed);
                }
            }
        }
        if self.held != 0 {
            self.send(ctx);
        }
        let default = self.classes.len() - 1;
        for (i, p) in batch.iter_mut().enumerate() {
            let k = match classes::ip_facts(p) {
                Err(reason) => {
                    verdicts.drop(i, reason);
                    continue;
                }
                Ok(None) => default,
                Ok(Some(ip)) => self.classifier.classify(&ip).unwrap_or(default),
            };
            let class = &mut self.classes[k];
            if class.queue.len() + class.arriving < class.capacity {
                class.arriving += 1;
            } else if self.head_drop && !class.queue.is_empty() {
                let (oldest, len) = class.queue.pop_front().expect("not empty");
                class.bytes -= u64::from(len);
                class.overflow += 1;
                self.held -= 1;
                ctx.drop(oldest, QUEUE_OVERFLOW);
                class.arriving += 1;
            } else {
                class.overflow += 1;
                verdicts.drop(i, QUEUE_OVERFLOW);
                continue;
            }
            verdicts.hold(i);
            self.arrivals.push_back(k as u16);
        }
    }

    fn holds_packets(&self) -> bool {
        true
    }

    fn hold(&mut self, packet: PacketRef) -> Result<(), PacketRef> {
        let Some(k) = self.arrivals.pop_front() else {
            return Err(packet);
        };
        let class = &mut self.classes[usize::from(k)];
        class.arriving -= 1;
        let len = packet.len() as u32;
        class.bytes += u64::from(len);
        class.queue.push_back((packet, len));
        self.held += 1;
        Ok(())
    }

    fn held(&self) -> usize {
        self.held
    }

    fn release_held(&mut self, give_back: &mut dyn FnMut(PacketRef)) {
        for c in &mut self.classes {
            c.bytes = 0;
            c.deficit = 0;
            for (p, _) in c.queue.drain(..) {
                give_back(p);
            }
        }
        self.held = 0;
    }

    fn counters(&self) -> Vec<NfCounter> {
        let mut out = Vec::with_capacity(1 + 4 * self.classes.len());
        for c in &self.classes {
            out.push(NfCounter::total(c.names[0], c.sent));
            out.push(NfCounter::total(c.names[1], c.sent_bytes));
            out.push(NfCounter::total(c.names[2], c.overflow));
            out.push(NfCounter::gauge(c.names[3], c.queue.len() as u64));
        }
        out.push(NfCounter::gauge(
            "backlog_bytes",
            self.classes.iter().map(|c| c.bytes).sum(),
        ));
        out
    }
}

impl Shaper {
    /// Sends what the buckets allow, in the scheduler's order, at most a batch per call.
    fn send(&mut self, ctx: &mut Context<'_>) {
        for _ in 0..MAX_BATCH {
            let next = match self.scheduler {
                Scheduler::Priority => self.next_by_priority(),
                Scheduler::Drr => self.next_by_drr(),
            };
            let Some(k) = next else { break };
            let class = &mut self.classes[k];
            let (p, len) = class
                .queue
                .pop_front()
                .expect("the scheduler picked a class with a packet");
            class.bytes -= u64::from(len);
            class.sent += 1;
            class.sent_bytes += u64::from(len);
            if let Some(b) = &mut class.ceiling {
                b.take(len);
            }
            self.port.take(len);
            self.held -= 1;
            ctx.emit(p, 0);
        }
    }

    /// Whether class `k`'s head may go under its ceiling.
    fn under_ceiling(class: &Class, len: u32) -> bool {
        class.ceiling.as_ref().is_none_or(|b| b.has(len))
    }

    fn next_by_priority(&self) -> Option<usize> {
        for &k in &self.by_priority {
            let class = &self.classes[k];
            let Some(&(_, len)) = class.queue.front() else { continue };
            if !Self::under_ceiling(class, len) {
                continue;
            }
            // The class with the right to send waits for the port: none below it
            // overtakes.
            return self.port.has(len).then_some(k);
        }
        None
    }

    fn next_by_drr(&mut self) -> Option<usize> {
        let n = self.classes.len();
        for _ in 0..self.max_visits {
            let k = self.cursor;
            let class = &mut self.classes[k];
            let Some(&(_, len)) = class.queue.front() else {
                // An empty class keeps no credit (DRR: its deficit resets).
                class.deficit = 0;
                self.cursor = (k + 1) % n;
                self.granted = false;
                continue;
            };
            if !self.granted {
                class.deficit += class.quantum;
                self.granted = true;
            }
            if u64::from(len) > class.deficit || !Self::under_ceiling(class, len) {
                self.cursor = (k + 1) % n;
                self.granted = false;
                continue;
            }
            if !self.port.has(len) {
                // Its turn stays, with its quantum, until the port has the tokens.
                return None;
            }
            class.deficit -= u64::from(len);
            return Some(k);
        }
        None
    }
}

/// Registers `shaper`.
pub const TYPE: crate::NfType = crate::NfType {
    kind: "shaper",
    about: "holds packets in per-class queues and sends them at a rate: token bucket, DRR or strict priority, tail or head drop",
    stateless: false,
    cost_neutral: &[],
    files: &[],
    wraps: None,
    schema: || schemars::schema_for!(ShaperConfig),
    drops_all_by_default: None,
    fixes: &[(
        "queue-overflow",
        "more arrives than `rate` sends: raise the shaper's `rate`, or offer less (examples/chains/shaper.yaml)",
    )],
    build: |v| Ok(Box::new(Shaper::new(&crate::typed(v)?)?)),
};

#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShaperConfig {
    /// The rate everything leaves at (default 10Gbit).
    pub rate: Option<Rate>,
    /// The port bucket (default: 1 ms of `rate`, at least two 1514-byte frames).
    pub burst: Option<ByteSize>,
    /// `drr` (default: deficit round robin by quantum) or `priority` (strict).
    pub scheduler: Option<String>,
    /// Packets each class queues (default 1024).
    pub queue: Option<usize>,
    /// What a full queue drops: `tail` (the arriving packet; default) or `head` (its
    /// oldest).
    pub drop: Option<String>,
    /// Classes in order; a packet goes to the first that matches, else to `default`.
    #[serde(default)]
    pub classes: Vec<ShaperClassConfig>,
}

#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShaperClassConfig {
    /// Names the class's counters (letters, digits, `-`, `_`; not `default`).
    pub name: String,
    /// Which packets the class takes (absent: every IP packet).
    #[serde(default, rename = "match")]
    pub matches: MatchConfig,
    /// Strict priority: lower goes first (default: the class's place in the list).
    pub priority: Option<u8>,
    /// DRR: bytes the class may send per round (default 1514, at least 64).
    pub quantum: Option<ByteSize>,
    /// A ceiling for this class alone.
    pub rate: Option<Rate>,
    /// The ceiling's bucket (default: as the port's for this rate).
    pub burst: Option<ByteSize>,
    /// Packets this class queues (default: the shaper's `queue`).
    pub queue: Option<usize>,
}

const MAX_QUEUE: usize = 1 << 20;

/// The default bucket for `rate`: 1 ms of it, at least two full frames.
fn default_burst(rate: Rate) -> u64 {
    (rate.bytes_per_s() / 1000).max(2 * MAX_FRAME as u64)
}

fn bucket(size_key: &str, size: Option<ByteSize>, rate_key: &str, rate: Rate) -> Result<Bucket, ConfigError> {
    let size = size.map_or(default_burst(rate), |b| b.0);
    classes::check_bucket(size_key, size, rate_key, rate)?;
    if size < MAX_FRAME as u64 {
        return Err(ConfigError::new(
            size_key,
            format!("must hold a full frame: at least {MAX_FRAME} bytes"),
        ));
    }
    Ok(Bucket::new(size, rate.bytes_per_s()))
}

impl Shaper {
    pub fn new(cfg: &ShaperConfig) -> Result<Shaper, ConfigError> {
        let rate = cfg.rate.unwrap_or(Rate(10_000_000_000));
        let port = bucket("burst", cfg.burst, "rate", rate)?;
        let scheduler = match cfg.scheduler.as_deref().unwrap_or("drr") {
            "drr" => Scheduler::Drr,
            "priority" => Scheduler::Priority,
            other => {
                return Err(ConfigError::new(
                    "scheduler",
                    format!("`{other}` is not drr or priority"),
                ));
            }
        };
        let head_drop = match cfg.drop.as_deref().unwrap_or("tail") {
            "tail" => false,
            "head" => true,
            other => return Err(ConfigError::new("drop", format!("`{other}` is not tail or head"))),
        };
        let queue = cfg.queue.unwrap_or(1024);
        let check_queue = |key: &str, q: usize| {
            if (1..=MAX_QUEUE).contains(&q) {
                Ok(q)
            } else {
                Err(ConfigError::new(key, format!("must be 1..={MAX_QUEUE} packets")))
            }
        };
        check_queue("queue", queue)?;
        let classifier = Classifier::new(cfg.classes.iter().map(|c| &c.matches), |k| {
            format!("classes[{k}].match")
        })?;
        if cfg.classes.len() >= usize::from(u16::MAX) {
            return Err(ConfigError::new("classes", "too many classes"));
        }
        let mut classes = Vec::with_capacity(cfg.classes.len() + 1);
        let default = ShaperClassConfig {
            name: DEFAULT_CLASS.into(),
            priority: Some(u8::MAX),
            ..Default::default()
        };
        for (k, c) in cfg.classes.iter().chain([&default]).enumerate() {
            let at = |field: &str| format!("classes[{k}].{field}");
            let configured = k < cfg.classes.len();
            if configured {
                classes::check_name(&at("name"), &c.name)?;
                if c.name == DEFAULT_CLASS {
                    return Err(ConfigError::new(
                        at("name"),
                        "`default` is the class of unmatched packets, always last: name yours otherwise",
                    ));
                }
                if cfg.classes[..k].iter().any(|o| o.name == c.name) {
                    return Err(ConfigError::new(at("name"), format!("`{}` names two classes", c.name)));
                }
            }
            let quantum = c.quantum.map_or(MAX_FRAME as u64, |q| q.0);
            if !(64..=1 << 24).contains(&quantum) {
                return Err(ConfigError::new(at("quantum"), "must be 64 bytes to 16MiB"));
            }
            let capacity = check_queue(&at("queue"), c.queue.unwrap_or(queue))?;
            let ceiling = match c.rate {
                Some(r) => Some(bucket(&at("burst"), c.burst, &at("rate"), r)?),
                None if c.burst.is_some() => {
                    return Err(ConfigError::new(at("burst"), "a class's burst needs its `rate`"));
                }
                None => None,
            };
            let name = |suffix: &str| crate::config::intern(&format!("{}_{suffix}", c.name));
            classes.push(Class {
                queue: VecDeque::with_capacity(capacity),
                capacity,
                arriving: 0,
                bytes: 0,
                priority: c.priority.unwrap_or(k.min(usize::from(u8::MAX - 1)) as u8),
                quantum,
                deficit: 0,
                ceiling,
                sent: 0,
                sent_bytes: 0,
                overflow: 0,
                names: [name("sent"), name("sent_bytes"), name("overflow"), name("queued")],
            });
        }
        let mut by_priority: Vec<usize> = (0..classes.len()).collect();
        by_priority.sort_by_key(|&k| classes[k].priority);
        let min_quantum = classes.iter().map(|c| c.quantum).min().unwrap_or(MAX_FRAME as u64);
        let rounds = (MAX_FRAME as u64).div_ceil(min_quantum) as usize + 1;
        Ok(Shaper {
            classifier,
            max_visits: classes.len() * (rounds + 1),
            classes,
            by_priority,
            scheduler,
            port,
            last_ns: 0,
            head_drop,
            cursor: 0,
            granted: false,
            arrivals: VecDeque::with_capacity(MAX_BATCH),
            held: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Held;

    /// An IPv4/UDP frame of `len` bytes with `dscp`.
    fn frame(len: usize, dscp: u8) -> Vec<u8> {
        let mut f = Vec::new();
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([198, 18, 0, 1], [198, 19, 0, 1], 64)
            .udp(1024, 53)
            .write(&mut f, &vec![dscp; len - 42])
            .unwrap();
        f[15] = dscp << 2;
        f[24..26].fill(0);
        let sum = sfclab_wire::checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&sum.to_be_bytes());
        f
    }

    fn shaper(cfg: serde_json::Value) -> Shaper {
        Shaper::new(&crate::typed(&cfg).unwrap()).unwrap()
    }

    #[test]
    fn sends_no_faster_than_the_rate_and_in_order() {
        // 8 Mbit/s = 1000 bytes per ms, a bucket of 3028 bytes; 1000-byte frames.
        let mut nf = shaper(serde_json::json!({"rate": "8Mbit", "burst": 3028}));
        let mut h = Held::new(256);
        let frames: Vec<_> = (0..40).map(|_| frame(1000, 0)).collect();
        let out = h.offer(&mut nf, &frames, 0);
        assert!(out.sent.is_empty(), "held first, sent on a later call");
        assert_eq!(nf.held(), 40);
        // The full bucket lets three go at once; then one per millisecond.
        let mut sent = h.poll(&mut nf, 0).sent.len();
        assert_eq!(sent, 3);
        for ms in 1..=10u64 {
            sent += h.poll(&mut nf, ms * 1_000_000).sent.len();
        }
        assert_eq!(sent, 13, "3 from the bucket, then 1000 bytes per ms");
        for ms in 11..=100u64 {
            sent += h.poll(&mut nf, ms * 1_000_000).sent.len();
        }
        assert_eq!(sent, 40);
        assert_eq!(h.order(), (0..40).collect::<Vec<_>>(), "FIFO within a class");
        assert_eq!(nf.held(), 0);
        h.finish(&mut nf);
    }

    #[test]
    fn a_full_queue_drops_the_arrival_or_the_oldest() {
        for (drop, kept) in [("tail", 0..4u32), ("head", 6..10u32)] {
            let mut nf = shaper(serde_json::json!({"rate": "8Mbit", "queue": 4, "drop": drop}));
            let mut h = Held::new(64);
            let frames: Vec<_> = (0..10).map(|_| frame(1000, 0)).collect();
            let out = h.offer(&mut nf, &frames[..6], 0);
            let later = h.offer(&mut nf, &frames[6..], 0);
            // Same instant, bucket spent? No: nothing is sent before it is queued, and
            // the first call queued four; the second call sends first.
            let dropped = out.dropped + later.dropped;
            let sent_now = later.sent.len() as u32;
            assert_eq!(dropped + nf.held() as u32 + sent_now, 10, "{drop}: conserved");
            let mut sent = sent_now;
            for ms in 1..50 {
                sent += h.poll(&mut nf, ms * 1_000_000).sent.len() as u32;
            }
            assert_eq!(sent + dropped, 10, "{drop}");
            let order = h.order();
            if drop == "tail" {
                assert_eq!(&order[..4], &kept.clone().collect::<Vec<_>>()[..], "{drop}");
            } else {
                assert_eq!(order.last(), Some(&9), "{drop}: the newest survives");
                assert!(!order.contains(&4), "{drop}: the oldest go first");
            }
            h.finish(&mut nf);
        }
    }

    #[test]
    fn strict_priority_sends_the_urgent_class_first() {
        let mut nf = shaper(serde_json::json!({
            "rate": "8Mbit", "burst": 3028, "scheduler": "priority",
            "classes": [{"name": "ef", "match": {"dscp": ["ef"]}, "priority": 0}]
        }));
        let mut h = Held::new(64);
        let mut frames: Vec<_> = (0..6).map(|_| frame(1000, 0)).collect();
        frames.extend((0..3).map(|_| frame(1000, 46)));
        h.offer(&mut nf, &frames, 0);
        for ms in 0..20 {
            h.poll(&mut nf, ms * 1_000_000);
        }
        assert_eq!(h.order(), vec![6, 7, 8, 0, 1, 2, 3, 4, 5], "EF first, then best effort");
        h.finish(&mut nf);
    }

    #[test]
    fn drr_divides_bandwidth_by_quantum() {
        let mut nf = shaper(serde_json::json!({
            "rate": "8Mbit", "burst": 2000, "queue": 4096,
            "classes": [
                {"name": "gold", "match": {"dscp": ["af41"]}, "quantum": 3000},
                {"name": "bronze", "match": {"dscp": ["af11"]}, "quantum": 1000}
            ]
        }));
        let mut h = Held::new(4096);
        // Both classes always backlogged: 1000-byte frames.
        let gold: Vec<_> = (0..1000).map(|_| frame(1000, 34)).collect();
        let bronze: Vec<_> = (0..1000).map(|_| frame(1000, 10)).collect();
        for chunk in 0..8 {
            h.offer(&mut nf, &gold[chunk * 125..(chunk + 1) * 125], 0);
            h.offer(&mut nf, &bronze[chunk * 125..(chunk + 1) * 125], 0);
        }
        for ms in 1..=400u64 {
            h.poll(&mut nf, ms * 1_000_000);
        }
        let counters = nf.counters();
        let get = |n: &str| counters.iter().find(|c| c.name == n).unwrap().value;
        let (g, b) = (get("gold_sent"), get("bronze_sent"));
        assert!((399..=402).contains(&(g + b)), "the port's rate: {g} + {b}");
        assert!(
            (g as i64 - 3 * b as i64).abs() <= 6,
            "3:1 by quantum: gold {g}, bronze {b}"
        );
        h.finish(&mut nf);
    }

    #[test]
    fn a_class_ceiling_holds_it_below_the_port_rate() {
        let mut nf = shaper(serde_json::json!({
            "rate": "80Mbit",
            "classes": [{"name": "bulk", "rate": "8Mbit", "burst": 2000}]
        }));
        let mut h = Held::new(512);
        let frames: Vec<_> = (0..200).map(|_| frame(1000, 0)).collect();
        h.offer(&mut nf, &frames, 0);
        let mut sent = 0;
        for ms in 0..=100u64 {
            sent += h.poll(&mut nf, ms * 1_000_000).sent.len();
        }
        // 2 from the bucket, then 1000 bytes per ms of the class's 8 Mbit/s.
        assert!((101..=103).contains(&sent), "sent {sent}");
        h.finish(&mut nf);
    }

    #[test]
    fn bad_configs_name_the_key() {
        let err = |v: serde_json::Value| match crate::typed::<ShaperConfig>(&v) {
            Err(e) => e,
            Ok(c) => Shaper::new(&c).err().expect("refused"),
        };
        assert_eq!(err(serde_json::json!({"burst": 100})).key, "burst");
        assert_eq!(err(serde_json::json!({"scheduler": "wfq"})).key, "scheduler");
        assert_eq!(err(serde_json::json!({"queue": 0})).key, "queue");
        assert_eq!(
            err(serde_json::json!({"classes": [{"name": "default"}]})).key,
            "classes[0].name"
        );
        assert_eq!(
            err(serde_json::json!({"classes": [{"name": "a", "burst": 4000}]})).key,
            "classes[0].burst"
        );
        assert_eq!(
            err(serde_json::json!({"classes": [{"name": "a", "quantum": 10}]})).key,
            "classes[0].quantum"
        );
        assert!(err(serde_json::json!({"rate": "0"})).reason.contains("at least"));
    }
}
