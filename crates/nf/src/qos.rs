//! `qos`: per-class policing and marking, as VPP's policer or a router's service policy.
//! Each IP packet goes to the first class that matches it (by DSCP, an IPv4 5-tuple
//! rule, or both; [`crate::classes`]), where a three-colour meter colours it: the
//! single-rate srTCM (RFC 2697: CIR, CBS, EBS), the two-rate trTCM (RFC 2698: CIR,
//! CBS, PIR, PBS) or a throughput `limit` (two colours: green while its bucket holds
//! any tokens, whatever the packet's size, which owes the rest; a licence's cap, that
//! passes a mix of sizes as it comes where an srTCM over-offered passes the small
//! packets first), colour-blind or colour-aware (the colour a meter before left in the
//! packet's note, or the drop precedence of its AF codepoint, RFC 2597). Each colour
//! then has an action: `pass`, `remark <dscp>` (DSCP rewritten, ECN kept, the IPv4
//! checksum fixed) or `drop`. A class with no meter colours everything green: a marker.
//! With `per_flow: N` a class keeps N meters and a flow uses the one its flow hash picks
//! (flows sharing one share their rate). The colour is left in the packet's
//! `Note::COLOUR` (1 green, 2 yellow, 3 red) for a later colour-aware meter.
//!
//! Meters count the IP datagram's bytes (header included, Ethernet framing not). Their
//! buckets start full and are kept in nano-bytes filled by elapsed nanoseconds times the
//! rate: exact integer arithmetic, no division per packet.
//!
//! Keys: `classes` (list of `{ name, match: { dscp, proto, src, dst, sport, dport },
//! srtcm: { cir, cbs, ebs } | trtcm: { cir, cbs, pir, pbs } | limit: { rate, burst },
//! colour_aware (false),
//! per_flow (1), green (pass), yellow (pass), red (drop) }`; rates as `10Mbit`, sizes as
//! `16KiB`), `precolour` (`note`, the default, or `dscp`: where colour-aware meters read
//! the colour a packet came with).
//!
//! Counters: per class `<name>_green`, `<name>_yellow`, `<name>_red` (packets) and
//! `<name>_green_bytes`, ...; `unclassified` (non-IP packets and IP packets no class
//! takes: passed untouched), `remarked`. Drops: `malformed`, and its own
//! `policed-green`, `policed-yellow`, `policed-red` (a colour whose action is drop).

use serde::Deserialize;
use sfclab_core::packet::Note;
use sfclab_core::{BatchView, Context, DropReason, NetworkFunction, NfCounter, Packet, Verdicts};

use crate::classes::{self, Bucket, Classifier, Dscp, IpFacts, MatchConfig, NANO, Rate};
use crate::{ByteSize, ConfigError};

/// This NF's own drop reasons, in code order (`drop_reasons()`).
const DROP_REASONS: &[&str] = &["policed-green", "policed-yellow", "policed-red"];
const POLICED: [DropReason; 3] = [
    DropReason::named(DROP_REASONS, "policed-green"),
    DropReason::named(DROP_REASONS, "policed-yellow"),
    DropReason::named(DROP_REASONS, "policed-red"),
];

/// A meter's result, as left in `Note::COLOUR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Colour {
    Green = 1,
    Yellow = 2,
    Red = 3,
}

impl Colour {
    fn index(self) -> usize {
        self as usize - 1
    }

    fn from_note(v: Option<u32>) -> Colour {
        match v {
            Some(2) => Colour::Yellow,
            Some(3) => Colour::Red,
            _ => Colour::Green,
        }
    }

    /// The drop precedence of an AF codepoint (RFC 2597: AFx1 low, AFx2 medium, AFx3
    /// high); every other codepoint is green.
    fn from_dscp(dscp: u8) -> Colour {
        let (class, precedence) = (dscp >> 3, (dscp >> 1) & 3);
        match (class, precedence, dscp & 1) {
            (1..=4, 2, 0) => Colour::Yellow,
            (1..=4, 3, 0) => Colour::Red,
            _ => Colour::Green,
        }
    }
}

/// A three-colour meter (RFC 2697 or RFC 2698) and when it was last filled.
#[derive(Debug, Clone, Copy)]
enum Meter {
    /// No meter: every packet is green (a class that only marks).
    Unmetered,
    /// srTCM: the committed bucket, then the excess one takes what overflows it.
    SingleRate {
        committed: Bucket,
        excess: Bucket,
        /// Nanoseconds that fill both from empty at CIR.
        fill_ns: u64,
        last_ns: u64,
    },
    /// trTCM: the peak and committed buckets, each at its own rate.
    TwoRate {
        peak: Bucket,
        committed: Bucket,
        last_ns: u64,
    },
    /// A throughput limit: green while the bucket holds any tokens, the packet's bytes
    /// owed beyond them (nano-bytes, below zero until the refills pay them back).
    Limit {
        tokens: i64,
        size: i64,
        /// Bytes per second.
        rate: u64,
        /// Nanoseconds that fill the bucket from the most it can owe.
        fill_ns: u64,
        last_ns: u64,
    },
}

impl Meter {
    /// The colour of a packet of `len` bytes at `now_ns` that came coloured `pre`
    /// (ignored when `aware` is false).
    #[inline]
    fn colour(&mut self, now_ns: u64, len: u32, pre: Colour, aware: bool) -> Colour {
        let pre = if aware { pre } else { Colour::Green };
        match self {
            Meter::Unmetered => Colour::Green,
            Meter::SingleRate {
                committed,
                excess,
                fill_ns,
                last_ns,
            } => {
                let elapsed = now_ns.saturating_sub(*last_ns);
                if elapsed != 0 {
                    *last_ns = now_ns;
                    let over = committed.fill_within(elapsed, *fill_ns);
                    excess.add(over);
                }
                if pre == Colour::Green && committed.has(len) {
                    committed.take(len);
                    Colour::Green
                } else if pre != Colour::Red && excess.has(len) {
                    excess.take(len);
                    Colour::Yellow
                } else {
                    Colour::Red
                }
            }
            Meter::TwoRate {
                peak,
                committed,
                last_ns,
            } => {
                let elapsed = now_ns.saturating_sub(*last_ns);
                if elapsed != 0 {
                    *last_ns = now_ns;
                    peak.fill(elapsed);
                    committed.fill(elapsed);
                }
                if pre == Colour::Red || !peak.has(len) {
                    Colour::Red
                } else if pre == Colour::Yellow || !committed.has(len) {
                    peak.take(len);
                    Colour::Yellow
                } else {
                    peak.take(len);
                    committed.take(len);
                    Colour::Green
                }
            }
            Meter::Limit {
                tokens,
                size,
                rate,
                fill_ns,
                last_ns,
            } => {
                let elapsed = now_ns.saturating_sub(*last_ns);
                if elapsed != 0 {
                    *last_ns = now_ns;
                    // At most `fill_ns` (under 2^63 nano-bytes in all: checked when built).
                    let add = (elapsed.min(*fill_ns) * *rate) as i64;
                    *tokens = (*tokens + add).min(*size);
                }
                if pre == Colour::Green && *tokens > 0 {
                    *tokens -= i64::from(len) * NANO as i64;
                    Colour::Green
                } else {
                    Colour::Red
                }
            }
        }
    }
}

/// What happens to a packet of one colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Pass,
    Remark(u8),
    Drop,
}

struct Class {
    /// One meter, or one per flow-hash bucket.
    meters: Vec<Meter>,
    aware: bool,
    actions: [Action; 3],
    /// Per colour: packets, bytes.
    packets: [u64; 3],
    bytes: [u64; 3],
    /// Counter names per colour: packets, then bytes.
    names: [&'static str; 6],
}

/// Where colour-aware meters read a packet's colour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Precolour {
    Note,
    Dscp,
}

pub struct Qos {
    classifier: Classifier,
    classes: Vec<Class>,
    precolour: Precolour,
    unclassified: u64,
    remarked: u64,
}

impl NetworkFunction for Qos {
    fn kind(&self) -> &'static str {
        TYPE.kind
    }

    fn drop_reasons(&self) -> &'static [&'static str] {
        DROP_REASONS
    }

    fn process(&mut self, ctx: &mut Context<'_>, mut batch: BatchView<'_>, verdicts: &mut Verdicts) {
        if self.classes.is_empty() {
            return;
        }
        let now = ctx.now_ns();
        for (i, p) in batch.iter_mut().enumerate() {
            match classes::ip_facts(p) {
                Err(reason) => verdicts.drop(i, reason),
                Ok(None) => self.unclassified += 1,
                Ok(Some(ip)) => {
                    if let Some(reason) = self.police(p, &ip, now) {
                        verdicts.drop(i, reason);
                    }
                }
            }
        }
    }

    fn counters(&self) -> Vec<NfCounter> {
        let mut out = Vec::with_capacity(2 + 6 * self.classes.len());
        for c in &self.classes {
            for k in 0..3 {
                out.push(NfCounter::total(c.names[k], c.packets[k]));
                out.push(NfCounter::total(c.names[3 + k], c.bytes[k]));
            }
        }
        out.push(NfCounter::total("unclassified", self.unclassified));
        out.push(NfCounter::total("remarked", self.remarked));
        out
    }
}

impl Qos {
    /// Classifies, meters and acts on one IP packet; the drop reason if it is dropped.
    #[inline]
    fn police(&mut self, p: &mut Packet, ip: &IpFacts, now: u64) -> Option<DropReason> {
        let Some(k) = self.classifier.classify(ip) else {
            self.unclassified += 1;
            return None;
        };
        let class = &mut self.classes[k];
        let pre = match (class.aware, self.precolour) {
            (false, _) => Colour::Green,
            (true, Precolour::Note) => Colour::from_note(p.notes.get(Note::COLOUR)),
            (true, Precolour::Dscp) => Colour::from_dscp(ip.dscp),
        };
        let meter = match class.meters.len() {
            1 => &mut class.meters[0],
            n => {
                let at = sfclab_core::packet::shard_of(p.flow_hash(), n);
                &mut class.meters[at]
            }
        };
        let colour = meter.colour(now, ip.len, pre, class.aware);
        let c = colour.index();
        class.packets[c] += 1;
        class.bytes[c] += u64::from(ip.len);
        p.notes.set(Note::COLOUR, colour as u32);
        match class.actions[c] {
            Action::Pass => None,
            Action::Remark(dscp) => {
                if ip.dscp != dscp {
                    classes::set_dscp(p, ip, dscp);
                    self.remarked += 1;
                }
                None
            }
            Action::Drop => Some(POLICED[c]),
        }
    }
}

/// One meter alone, timed as `sfclab bench nfs` times DPDK's rte_meter beside it: `packets`
/// 64-byte packets, the clock advancing `step_ns` per packet, colour-blind or aware
/// (pre-colours green, yellow, red in turn), an srTCM (CIR 2 Gbit/s, CBS = EBS = 16 KiB)
/// or trTCM (CIR 2, PIR 4 Gbit/s, CBS 16, PBS 32 KiB). TSC cycles per packet and the
/// packets of each colour.
pub fn meter_alone(two_rate: bool, aware: bool, packets: u64, step_ns: f64) -> (f64, [u64; 3]) {
    let mut meter = if two_rate {
        Meter::TwoRate {
            peak: Bucket::new(32768, 500_000_000),
            committed: Bucket::new(16384, 250_000_000),
            last_ns: 0,
        }
    } else {
        Meter::SingleRate {
            committed: Bucket::new(16384, 250_000_000),
            excess: Bucket::new(16384, 250_000_000),
            fill_ns: (32768 * NANO).div_ceil(250_000_000),
            last_ns: 0,
        }
    };
    let pre = [Colour::Green, Colour::Yellow, Colour::Red];
    let mut colours = [0u64; 3];
    let t0 = sfclab_core::tsc::now();
    for i in 0..packets {
        let now = (i as f64 * step_ns) as u64;
        let c = meter.colour(now, 64, pre[(i % 3) as usize], aware);
        colours[c.index()] += 1;
    }
    let cycles = sfclab_core::tsc::now() - t0;
    (std::hint::black_box(cycles) as f64 / packets.max(1) as f64, colours)
}

/// Registers `qos`.
pub const TYPE: crate::NfType = crate::NfType {
    kind: "qos",
    about: "per-class three-colour policer/marker (RFC 2697 srTCM, RFC 2698 trTCM): pass, remark DSCP or drop per colour",
    stateless: false,
    cost_neutral: &[],
    files: &[],
    wraps: None,
    schema: || schemars::schema_for!(QosConfig),
    drops_all_by_default: None,
    fixes: &[(
        "policed-red",
        "the traffic is over its class's rate: raise `cir`/`pir` or the bucket sizes, or set `red: remark af13` to mark instead of drop (examples/chains/qos.yaml)",
    )],
    build: |v| Ok(Box::new(Qos::new(&crate::typed(v)?)?)),
};

#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QosConfig {
    /// Classes in order; a packet goes to the first that matches. With none, every
    /// packet passes untouched.
    #[serde(default)]
    pub classes: Vec<ClassConfig>,
    /// Where colour-aware meters read a packet's colour: `note` (a meter before in the
    /// chain; the default) or `dscp` (AF drop precedence, RFC 2597).
    pub precolour: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClassConfig {
    /// Names the class's counters (letters, digits, `-`, `_`).
    pub name: String,
    /// Which packets the class takes (absent: every IP packet).
    #[serde(default, rename = "match")]
    pub matches: MatchConfig,
    /// A single-rate three-colour meter (RFC 2697).
    pub srtcm: Option<SrTcmConfig>,
    /// A two-rate three-colour meter (RFC 2698).
    pub trtcm: Option<TrTcmConfig>,
    /// A throughput limit (two colours): a packet is green while the bucket holds any
    /// tokens, whatever its size, and its bytes are owed beyond them. Over-offered a mix
    /// of sizes it passes them as they come, where an srTCM passes the small packets
    /// first (a large one rarely finds its bytes in a bucket the small ones drain): a
    /// licence's cap on throughput.
    pub limit: Option<LimitConfig>,
    /// Meter in colour-aware mode: a packet never leaves greener than it came (default
    /// false: colour-blind).
    pub colour_aware: Option<bool>,
    /// Meters per class, picked by flow hash (default 1: the class shares one).
    pub per_flow: Option<u32>,
    /// Action for green packets: `pass` (default), `remark <dscp>` or `drop`.
    pub green: Option<String>,
    /// Action for yellow packets: `pass` (default), `remark <dscp>` or `drop`.
    pub yellow: Option<String>,
    /// Action for red packets: `drop` (default), `remark <dscp>` or `pass`.
    pub red: Option<String>,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SrTcmConfig {
    /// Committed information rate (`10Mbit`).
    pub cir: Rate,
    /// Committed burst size (`16KiB`): more than 0, at least the largest packet to be
    /// green.
    pub cbs: ByteSize,
    /// Excess burst size: 0 makes the meter two-colour (green or red).
    pub ebs: ByteSize,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LimitConfig {
    /// The rate (`40Mbit`).
    pub rate: Rate,
    /// The bucket (`256KiB`, more than 0): what may pass at once after a quiet spell.
    pub burst: ByteSize,
}

#[derive(Debug, Clone, Deserialize, serde::Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TrTcmConfig {
    /// Committed information rate.
    pub cir: Rate,
    /// Committed burst size (more than 0).
    pub cbs: ByteSize,
    /// Peak information rate (at least `cir`).
    pub pir: Rate,
    /// Peak burst size (more than 0).
    pub pbs: ByteSize,
}

const MAX_PER_FLOW: u32 = 1 << 20;

fn action(s: &str) -> Result<Action, String> {
    let s = s.trim();
    match s {
        "pass" => Ok(Action::Pass),
        "drop" => Ok(Action::Drop),
        _ => match s.strip_prefix("remark") {
            Some(d) if d.starts_with(char::is_whitespace) => d.parse::<Dscp>().map(|d| Action::Remark(d.0)),
            _ => Err(format!(
                "`{s}` is not an action: write pass, drop or remark <dscp> (remark af12)"
            )),
        },
    }
}

impl Qos {
    pub fn new(cfg: &QosConfig) -> Result<Qos, ConfigError> {
        let precolour = match cfg.precolour.as_deref().unwrap_or("note") {
            "note" => Precolour::Note,
            "dscp" => Precolour::Dscp,
            other => {
                return Err(ConfigError::new("precolour", format!("`{other}` is not note or dscp")));
            }
        };
        let classifier = Classifier::new(cfg.classes.iter().map(|c| &c.matches), |k| {
            format!("classes[{k}].match")
        })?;
        let mut classes = Vec::with_capacity(cfg.classes.len());
        for (k, c) in cfg.classes.iter().enumerate() {
            let at = |field: &str| format!("classes[{k}].{field}");
            classes::check_name(&at("name"), &c.name)?;
            if cfg.classes[..k].iter().any(|o| o.name == c.name) {
                return Err(ConfigError::new(at("name"), format!("`{}` names two classes", c.name)));
            }
            let meter = match (&c.srtcm, &c.trtcm, &c.limit) {
                (None, None, None) => Meter::Unmetered,
                (None, None, Some(m)) => {
                    let key = |f: &str| at(&format!("limit.{f}"));
                    if m.burst.0 == 0 {
                        return Err(ConfigError::new(key("burst"), "must be more than 0"));
                    }
                    classes::check_bucket(&key("burst"), m.burst.0, &key("rate"), m.rate)?;
                    let rate = m.rate.bytes_per_s();
                    // It owes at most a packet (64 KiB): a refill from there to full is
                    // under 2^61 nano-bytes, as are the tokens.
                    let span = (m.burst.0 + 65_536) * NANO;
                    Meter::Limit {
                        tokens: (m.burst.0 * NANO) as i64,
                        size: (m.burst.0 * NANO) as i64,
                        rate,
                        fill_ns: span.div_ceil(rate),
                        last_ns: 0,
                    }
                }
                (Some(m), None, None) => {
                    let key = |f: &str| at(&format!("srtcm.{f}"));
                    if m.cbs.0 == 0 {
                        return Err(ConfigError::new(key("cbs"), "must be more than 0"));
                    }
                    classes::check_bucket(&key("cbs"), m.cbs.0, &key("cir"), m.cir)?;
                    classes::check_bucket(&key("ebs"), m.ebs.0, &key("cir"), m.cir)?;
                    let rate = m.cir.bytes_per_s();
                    Meter::SingleRate {
                        committed: Bucket::new(m.cbs.0, rate),
                        excess: Bucket::new(m.ebs.0, rate),
                        fill_ns: ((m.cbs.0 + m.ebs.0) * NANO).div_ceil(rate),
                        last_ns: 0,
                    }
                }
                (None, Some(m), None) => {
                    let key = |f: &str| at(&format!("trtcm.{f}"));
                    for (f, size) in [("cbs", m.cbs), ("pbs", m.pbs)] {
                        if size.0 == 0 {
                            return Err(ConfigError::new(key(f), "must be more than 0"));
                        }
                    }
                    if m.pir.0 < m.cir.0 {
                        return Err(ConfigError::new(key("pir"), "must be at least cir (RFC 2698)"));
                    }
                    classes::check_bucket(&key("cbs"), m.cbs.0, &key("cir"), m.cir)?;
                    classes::check_bucket(&key("pbs"), m.pbs.0, &key("pir"), m.pir)?;
                    Meter::TwoRate {
                        peak: Bucket::new(m.pbs.0, m.pir.bytes_per_s()),
                        committed: Bucket::new(m.cbs.0, m.cir.bytes_per_s()),
                        last_ns: 0,
                    }
                }
                _ => {
                    let second = if c.limit.is_some() { "limit" } else { "trtcm" };
                    return Err(ConfigError::new(
                        at(second),
                        "a class has one meter: srtcm, trtcm or limit",
                    ));
                }
            };
            let per_flow = c.per_flow.unwrap_or(1);
            if !(1..=MAX_PER_FLOW).contains(&per_flow) {
                return Err(ConfigError::new(at("per_flow"), format!("must be 1..={MAX_PER_FLOW}")));
            }
            let mut actions = [Action::Pass, Action::Pass, Action::Drop];
            for (slot, (field, text)) in
                actions
                    .iter_mut()
                    .zip([("green", &c.green), ("yellow", &c.yellow), ("red", &c.red)])
            {
                if let Some(text) = text {
                    *slot = action(text).map_err(|e| ConfigError::new(at(field), e))?;
                }
            }
            let name = |suffix: &str| crate::config::intern(&format!("{}_{suffix}", c.name));
            classes.push(Class {
                meters: vec![meter; per_flow as usize],
                aware: c.colour_aware.unwrap_or(false),
                actions,
                packets: [0; 3],
                bytes: [0; 3],
                names: [
                    name("green"),
                    name("yellow"),
                    name("red"),
                    name("green_bytes"),
                    name("yellow_bytes"),
                    name("red_bytes"),
                ],
            });
        }
        Ok(Qos {
            classifier,
            classes,
            precolour,
            unclassified: 0,
            remarked: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::run_inspecting;
    use sfclab_core::Verdict;

    /// An IPv4/UDP frame of `ip_len` datagram bytes with `dscp`, from source port `sport`.
    fn frame(ip_len: usize, dscp: u8, sport: u16) -> Vec<u8> {
        let mut f = Vec::new();
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            .ipv4([198, 18, 0, 1], [198, 19, 0, 1], 64)
            .udp(sport, 53)
            .write(&mut f, &vec![0; ip_len - 28])
            .unwrap();
        f[15] = dscp << 2;
        f[24..26].fill(0);
        let sum = sfclab_wire::checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&sum.to_be_bytes());
        f
    }

    fn qos(yaml: serde_json::Value) -> Qos {
        Qos::new(&crate::typed(&yaml).unwrap()).unwrap()
    }

    /// Colours (from the note) and verdicts of `frames` at `now_ns`.
    fn colours(nf: &mut Qos, frames: &[Vec<u8>], now_ns: u64) -> Vec<(Option<u32>, Verdict)> {
        let mut seen = Vec::new();
        let (_, verdicts) = run_inspecting(nf, frames, now_ns, |p| seen.push(p.notes.get(Note::COLOUR)));
        seen.into_iter().zip(verdicts).collect()
    }

    const G: Option<u32> = Some(1);
    const Y: Option<u32> = Some(2);
    const R: Option<u32> = Some(3);

    #[test]
    fn a_limit_passes_whatever_comes_while_it_has_tokens_and_owes_the_rest() {
        // 100 bytes/ms, a 150-byte bucket: the first 100-byte datagram leaves 50, the
        // second goes too and leaves 50 owed, the third finds none.
        let mut nf = qos(serde_json::json!({"classes": [
            {"name": "all", "limit": {"rate": 800_000, "burst": 150}}
        ]}));
        let f = frame(100, 0, 1);
        let at0 = colours(&mut nf, &vec![f.clone(); 3], 0);
        assert_eq!(at0.iter().map(|c| c.0).collect::<Vec<_>>(), vec![G, G, R]);
        assert_eq!(at0[2].1, Verdict::Drop(POLICED[2]));
        // 0.5 ms pays the debt back (50 bytes): still none to spend.
        assert_eq!(colours(&mut nf, std::slice::from_ref(&f), 500_000)[0].0, R);
        // 0.01 ms more: a byte of credit lets a whole datagram through.
        assert_eq!(colours(&mut nf, std::slice::from_ref(&f), 510_000)[0].0, G);
        assert_eq!(colours(&mut nf, std::slice::from_ref(&f), 510_000)[0].0, R);
        assert_eq!(nf.classes[0].packets, [3, 0, 3]);
    }

    #[test]
    fn over_offered_a_limit_passes_a_mix_as_it_comes_where_an_srtcm_passes_the_small_first() {
        // 40 and 1,500-byte datagrams, half each in a random order, one every 10 us
        // (616 Mbit/s) into 100 Mbit/s: the limit passes both sizes alike; an srTCM of
        // the same rate every small one and a seventh of the large.
        let passed = |meter: serde_json::Value| {
            let mut nf = qos(serde_json::json!({"classes": [
                {"name": "all", "limit": meter["limit"], "srtcm": meter["srtcm"]}
            ]}));
            let (small, large) = (frame(40, 0, 1), frame(1500, 0, 1));
            let (mut through, mut rng) = ([0u64; 2], 0x9e37_79b9_7f4a_7c15u64);
            for k in 0..20_000u64 {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                let big = usize::from(rng >> 63 == 1);
                let f = if big == 1 { &large } else { &small };
                through[big] += u64::from(colours(&mut nf, std::slice::from_ref(f), k * 10_000)[0].0 == G);
            }
            through
        };
        let limit = passed(serde_json::json!({"limit": {"rate": "100Mbit", "burst": 3000}}));
        let ratio = limit[1] as f64 / limit[0] as f64;
        assert!((ratio - 1.0).abs() < 0.1, "large to small through a limit: {limit:?}");
        let bits = (limit[0] * 40 + limit[1] * 1500) as f64 * 8.0 / 0.2;
        assert!((bits - 100e6).abs() < 2e6, "{bits} bit/s through a 100 Mbit/s limit");
        let srtcm = passed(serde_json::json!({"srtcm": {"cir": "100Mbit", "cbs": 3000, "ebs": 0}}));
        assert!(srtcm[0] > 3 * srtcm[1], "an srTCM's small to large: {srtcm:?}");
    }

    #[test]
    fn srtcm_colour_blind_follows_rfc_2697() {
        // CIR 100 bytes/ms (800 kbit/s), CBS 200, EBS 100: 100-byte datagrams.
        let mut nf = qos(serde_json::json!({"classes": [
            {"name": "all", "srtcm": {"cir": 800_000, "cbs": 200, "ebs": 100}, "red": "pass"}
        ]}));
        let f = frame(100, 0, 1);
        let at0 = colours(&mut nf, &vec![f.clone(); 4], 0);
        assert_eq!(
            at0.iter().map(|c| c.0).collect::<Vec<_>>(),
            vec![G, G, Y, R],
            "Tc covers two, Te one, then red"
        );
        // 1 ms refills 100 bytes into Tc (not full: Te gets nothing).
        let at1 = colours(&mut nf, &vec![f.clone(); 2], 1_000_000);
        assert_eq!(at1.iter().map(|c| c.0).collect::<Vec<_>>(), vec![G, R]);
        // 5 ms: Tc fills to 200 and the overflow tops Te up to 100.
        let at6 = colours(&mut nf, &vec![f.clone(); 4], 6_000_000);
        assert_eq!(at6.iter().map(|c| c.0).collect::<Vec<_>>(), vec![G, G, Y, R]);
        assert_eq!(nf.classes[0].packets, [5, 2, 3]);
        assert_eq!(nf.classes[0].bytes[0], 500);
    }

    #[test]
    fn srtcm_colour_aware_never_makes_a_packet_greener() {
        let mut nf = qos(serde_json::json!({"precolour": "dscp", "classes": [
            {"name": "af1", "srtcm": {"cir": 800_000, "cbs": 1000, "ebs": 1000}, "colour_aware": true, "red": "pass"}
        ]}));
        // AF11 (green), AF12 (yellow), AF13 (red), EF (not AF: green), with tokens to spare.
        let frames = [
            frame(100, 10, 1),
            frame(100, 12, 1),
            frame(100, 14, 1),
            frame(100, 46, 1),
        ];
        let got = colours(&mut nf, &frames, 0);
        assert_eq!(got.iter().map(|c| c.0).collect::<Vec<_>>(), vec![G, Y, R, G]);
        // Tc spent: a green packet falls to yellow (Te), a yellow one stays yellow.
        let mut nf = qos(serde_json::json!({"classes": [
            {"name": "a", "srtcm": {"cir": 800_000, "cbs": 100, "ebs": 300}, "colour_aware": true, "red": "pass"}
        ]}));
        let got = colours(&mut nf, &vec![frame(100, 0, 1); 5], 0);
        assert_eq!(got.iter().map(|c| c.0).collect::<Vec<_>>(), vec![G, Y, Y, Y, R]);
    }

    #[test]
    fn trtcm_follows_rfc_2698_blind_and_aware() {
        // PIR 200 B/ms, PBS 300; CIR 100 B/ms, CBS 100.
        let cfg = |aware: bool| {
            serde_json::json!({"classes": [{"name": "t", "colour_aware": aware, "red": "pass",
                "trtcm": {"cir": 800_000, "cbs": 100, "pir": 1_600_000, "pbs": 300}}]})
        };
        let mut nf = qos(cfg(false));
        let f = frame(100, 0, 1);
        let got = colours(&mut nf, &vec![f.clone(); 4], 0);
        assert_eq!(
            got.iter().map(|c| c.0).collect::<Vec<_>>(),
            vec![G, Y, Y, R],
            "green takes from both, yellow from Tp only"
        );
        // 1 ms: Tp +200, Tc +100.
        let got = colours(&mut nf, &vec![f.clone(); 3], 1_000_000);
        assert_eq!(got.iter().map(|c| c.0).collect::<Vec<_>>(), vec![G, Y, R]);
        // Colour-aware through the note: a red packet stays red though tokens abound,
        // a yellow one never takes Tc.
        let mut nf = qos(cfg(true));
        let marker = || {
            qos(serde_json::json!({"classes": [
                {"name": "mark", "match": {"sport": "2"}, "red": "pass", "srtcm": {"cir": 8, "cbs": 1, "ebs": 100}},
                {"name": "red", "match": {"sport": "3"}, "red": "pass", "srtcm": {"cir": 8, "cbs": 1, "ebs": 1}}
            ]}))
        };
        let mut frames = vec![frame(100, 0, 1), frame(100, 0, 2), frame(100, 0, 3)];
        let mut notes = Vec::new();
        run_inspecting(&mut marker(), &frames, 0, |p| notes.push(p.notes.get(Note::COLOUR)));
        assert_eq!(notes, vec![None, Y, R], "the first meter leaves yellow and red");
        let mut pre = marker();
        // Carry the notes over by running both NFs on one batch.
        let mut chain_pair = |frames: &mut Vec<Vec<u8>>| {
            let mut pool = sfclab_core::PacketPool::new(8);
            let mut batch = sfclab_core::Batch::new(8);
            pool.alloc_into(&mut batch, frames.len());
            for (p, f) in batch.iter_mut().zip(frames.iter()) {
                p.reset(f.len()).copy_from_slice(f);
            }
            let mut emitted = sfclab_core::Emitted::default();
            let mut ctx = sfclab_core::ChainContext::new(0, 0, 1.0, &mut pool, &mut emitted);
            for nf in [&mut pre as &mut dyn NetworkFunction, &mut nf] {
                let mut v = Verdicts::for_batch(batch.len());
                nf.process(ctx.nf(), sfclab_core::BatchView::new(&mut batch), &mut v);
            }
            let out: Vec<_> = batch.iter().map(|p| p.notes.get(Note::COLOUR)).collect();
            pool.free_batch(&mut batch);
            out
        };
        assert_eq!(chain_pair(&mut frames), vec![G, Y, R]);
    }

    #[test]
    fn actions_remark_with_a_valid_checksum_or_drop_by_colour() {
        let mut nf = qos(serde_json::json!({"classes": [
            {"name": "ef", "match": {"dscp": ["ef"]}, "srtcm": {"cir": 8000, "cbs": 100, "ebs": 100},
             "yellow": "remark af12", "red": "drop"}
        ]}));
        let frames = [
            frame(100, 46, 1),
            frame(100, 46, 1),
            frame(100, 46, 1),
            frame(100, 0, 1),
        ];
        let (out, verdicts) = crate::testutil::run_at(&mut nf, &frames, 0);
        assert_eq!(
            verdicts,
            vec![
                Verdict::Continue,
                Verdict::Continue,
                Verdict::Drop(POLICED[2]),
                Verdict::Continue
            ]
        );
        let dscp = |f: &[u8]| etherparse::Ipv4HeaderSlice::from_slice(&f[14..]).unwrap().dcp().value();
        assert_eq!([dscp(&out[0]), dscp(&out[1]), dscp(&out[3])], [46, 12, 0]);
        let h = etherparse::Ipv4HeaderSlice::from_slice(&out[1][14..]).unwrap();
        assert_eq!(h.header_checksum(), h.to_header().calc_header_checksum());
        let counters = nf.counters();
        let get = |n: &str| counters.iter().find(|c| c.name == n).unwrap().value;
        assert_eq!((get("ef_green"), get("ef_yellow"), get("ef_red")), (1, 1, 1));
        assert_eq!((get("unclassified"), get("remarked"), get("ef_red_bytes")), (1, 1, 100));
    }

    #[test]
    fn per_flow_meters_police_each_flow_on_its_own() {
        let mut nf = qos(serde_json::json!({"classes": [
            {"name": "f", "per_flow": 4096, "srtcm": {"cir": 8000, "cbs": 100, "ebs": 0}}
        ]}));
        // Two flows, two packets each at once: each flow's first is green.
        let frames = [frame(100, 0, 1), frame(100, 0, 2), frame(100, 0, 1), frame(100, 0, 2)];
        let got = colours(&mut nf, &frames, 0);
        assert_eq!(got.iter().map(|c| c.0).collect::<Vec<_>>(), vec![G, G, R, R]);
        // One shared meter would have made the second flow red at once.
        let mut shared = qos(serde_json::json!({"classes": [
            {"name": "f", "srtcm": {"cir": 8000, "cbs": 100, "ebs": 0}}
        ]}));
        let got = colours(&mut shared, &frames, 0);
        assert_eq!(got.iter().map(|c| c.0).collect::<Vec<_>>(), vec![G, R, R, R]);
    }

    #[test]
    fn classes_match_by_rule_and_non_ip_passes_untouched() {
        let mut nf = qos(serde_json::json!({"classes": [
            {"name": "dns", "match": {"proto": "udp", "dport": "53", "dst": "198.19.0.0/16"}, "green": "drop"}
        ]}));
        let mut arp = frame(100, 0, 1);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let (_, v) = crate::testutil::run_at(&mut nf, &[frame(100, 0, 1), arp], 0);
        assert_eq!(v, vec![Verdict::Drop(POLICED[0]), Verdict::Continue]);
        let mut short = frame(100, 0, 1);
        short.truncate(40);
        let (_, v) = crate::testutil::run_at(&mut nf, &[short], 0);
        assert_eq!(v, vec![Verdict::Drop(DropReason::MALFORMED)]);
    }

    #[test]
    fn bad_configs_name_the_key() {
        let err = |v: serde_json::Value| match crate::typed::<QosConfig>(&v) {
            Err(e) => e,
            Ok(c) => Qos::new(&c).err().expect("refused"),
        };
        let trtcm = |cir: u64, pir: u64| serde_json::json!({"classes": [{"name": "a", "trtcm": {"cir": cir, "cbs": 100, "pir": pir, "pbs": 100}}]});
        assert_eq!(err(trtcm(2000, 1000)).key, "classes[0].trtcm.pir");
        let e = err(serde_json::json!({"classes": [{"name": "a", "limit": {"rate": "1Mbit", "burst": 0}}]}));
        assert_eq!(e.key, "classes[0].limit.burst");
        let e = err(
            serde_json::json!({"classes": [{"name": "a", "limit": {"rate": "1Mbit", "burst": 10},
            "srtcm": {"cir": "1Mbit", "cbs": 10, "ebs": 0}}]}),
        );
        assert_eq!(
            (e.key.as_str(), e.reason.contains("one meter")),
            ("classes[0].limit", true),
            "{e}"
        );
        let e = err(serde_json::json!({"classes": [{"name": "a", "yellow": "paint it"}]}));
        assert_eq!(e.key, "classes[0].yellow");
        let e = err(serde_json::json!({"classes": [{"name": "a", "match": {"dscp": ["af99"]}}]}));
        assert!(e.key.starts_with("classes[0].match.dscp"), "{e}");
        let e = err(serde_json::json!({"classes": [{"name": "a"}, {"name": "a"}]}));
        assert_eq!(e.key, "classes[1].name");
        let e = err(serde_json::json!({"classes": [{"name": "a", "srtcm": {"cir": "fast", "cbs": 1, "ebs": 1}}]}));
        assert!(e.key.contains("cir") && e.reason.contains("not a rate"), "{e}");
        let e = err(serde_json::json!({"classes": [{"name": "a", "match": {"src": "10.0.0.0/33"}}]}));
        assert_eq!(e.key, "classes[0].match.src");
        let e = err(serde_json::json!({"classes": [{"name": "a", "srtcm": {"cir": 8000, "cbs": 0, "ebs": 1}}]}));
        assert_eq!(e.key, "classes[0].srtcm.cbs");
    }

    /// Over many packets, a policed class passes what its rate allows: green bytes
    /// over a second are CIR plus the bucket it started with.
    #[test]
    fn green_bytes_over_time_are_the_committed_rate() {
        let mut nf = qos(serde_json::json!({"classes": [
            {"name": "c", "srtcm": {"cir": "1Mbit", "cbs": 1500, "ebs": 0}}
        ]}));
        let f = frame(500, 0, 1);
        // 4 Mbit/s offered: one 500-byte datagram per millisecond... four per ms.
        for ms in 0..1000u64 {
            colours(&mut nf, &vec![f.clone(); 4], ms * 1_000_000);
        }
        let green = nf.classes[0].bytes[0];
        // 999 ms of refill at 125,000 B/s plus the 1500 it started with.
        let expected = 124_875 + 1500;
        assert!(
            green <= expected && green + 500 > expected,
            "green {green} of {expected}"
        );
    }
}
