//! `nsh-proxy`: an SFC proxy (RFC 7665 §4.6) for a service function that knows nothing
//! of NSH: it takes the header off each packet, runs the NF it wraps (`nf`) on what
//! was inside, and puts the header back on what the NF passes, with the SI lowered by
//! one (RFC 8300 §2.3: proxies decrement on behalf of the function). The context, TTL
//! and flags go back exactly as they came. With `nf: noop` it is an NSH-aware service
//! function that does nothing but lower the SI.
//!
//! The wrapped NF sees only the packets meant for it: a packet without a valid NSH,
//! or with SI 0 (nothing left to lower), is dropped before it. What the NF drops is
//! counted here under the NF's own reasons; its outputs are this NF's outputs. An
//! inner Ethernet frame (next protocol 3) is what the NF sees; an inner IPv4 or IPv6
//! datagram is shown behind the outer link header, whose addresses the NF may rewrite
//! (a router does). Packets the NF creates (a router's ICMP errors) belong to no path
//! and leave without a header. NFs that hold packets (a shaper) cannot be wrapped:
//! their packets would leave later, past the proxy.
//!
//! Keys: `nf` (the NF: a type, or `{type: {settings}}`; default `noop`), `oam`
//! (`drop`, the default, or `forward`: unmodified, past the NF). Counters: `proxied`,
//! `oam`, then the NF's. Drops: `malformed`, `unsupported` (a next protocol the NF
//! cannot be shown), the NF's, and its own `not-nsh`, `nsh-version`, `md-type`, `oam`,
//! `si-exhausted`, `too-big` (no headroom to put the header back).

use serde::{Deserialize, Serialize};
use sfclab_core::{Batch, BatchView, Context, DropReason, MAX_BATCH, NetworkFunction, NfCounter, Verdict, Verdicts};
use sfclab_wire::nsh::{self, NextProtocol};

use super::{CHECKS, Found, Oam, encapsulate, next_for};
use crate::{ConfigError, NfSpec};

/// The proxy's own reasons; the wrapped NF's follow them in `drop_reasons()`.
const OWN: [&str; 6] = [CHECKS[0], CHECKS[1], CHECKS[2], CHECKS[3], "si-exhausted", "too-big"];
const SI_EXHAUSTED: DropReason = DropReason::named(&OWN, "si-exhausted");
const TOO_BIG: DropReason = DropReason::named(&OWN, "too-big");

/// The most bytes taken off one packet: a link header with two VLAN tags, and the
/// largest NSH.
const MAX_FRONT: usize = 22 + nsh::MAX_LEN;

/// What was taken off one packet, to put back.
#[derive(Clone, Copy)]
struct Taken {
    /// Where in `NshProxy::fronts` its bytes are.
    slot: u16,
    /// The link header's length: the NSH started here.
    at: u8,
    /// The NSH's length.
    len: u8,
    /// The inner frame was Ethernet (the link header was taken too) or not (it stayed).
    ethernet: bool,
}

pub struct NshProxy {
    inner: Box<dyn NetworkFunction>,
    oam: Oam,
    reasons: &'static [&'static str],
    /// The wrapped NF's own reason `k` as this NF's.
    inner_reasons: Vec<DropReason>,
    /// The packets the NF does not see, while it runs.
    aside: Batch,
    inner_verdicts: Verdicts,
    /// Per packet of the batch: what was taken off, if it goes to the NF.
    taken: Vec<Option<Taken>>,
    /// The bytes taken off, by slot (one per packet shown to the NF).
    fronts: Vec<[u8; MAX_FRONT]>,
    proxied: u64,
    oam_packets: u64,
}

impl NetworkFunction for NshProxy {
    fn kind(&self) -> &'static str {
        TYPE.kind
    }

    fn drop_reasons(&self) -> &'static [&'static str] {
        self.reasons
    }

    fn outputs(&self) -> Vec<String> {
        self.inner.outputs()
    }

    fn creates_packets(&self) -> bool {
        self.inner.creates_packets()
    }

    fn process(&mut self, ctx: &mut Context<'_>, mut batch: BatchView<'_>, verdicts: &mut Verdicts) {
        let mut shown = 0;
        for (i, p) in batch.iter_mut().enumerate() {
            self.taken[i] = None;
            let found = match Found::locate(p.data(), self.oam) {
                Ok(found) => found,
                Err(reason) => {
                    verdicts.drop(i, reason);
                    continue;
                }
            };
            if found.oam {
                // Forwarded unmodified, past the NF (§2.2).
                self.oam_packets += 1;
                continue;
            }
            let h = found.header(p.data());
            if h.si() == 0 {
                verdicts.drop(i, SI_EXHAUSTED);
                continue;
            }
            let (at, len) = (found.at, found.len);
            let ethernet = match h.next() {
                NextProtocol::Ethernet if p.len() >= at + len + 14 => true,
                NextProtocol::Ethernet => {
                    verdicts.drop(i, DropReason::MALFORMED);
                    continue;
                }
                NextProtocol::Ipv4 | NextProtocol::Ipv6 => false,
                _ => {
                    verdicts.drop(i, DropReason::UNSUPPORTED);
                    continue;
                }
            };
            let front = &mut self.fronts[shown];
            front[..at + len].copy_from_slice(&p.data()[..at + len]);
            super::decapsulate(p, found).expect("next protocol and length checked");
            self.taken[i] = Some(Taken {
                slot: shown as u16,
                at: at as u8,
                len: len as u8,
                ethernet,
            });
            shown += 1;
        }
        if shown == 0 {
            return;
        }

        let (inner, inner_verdicts, taken) = (&mut self.inner, &mut self.inner_verdicts, &self.taken);
        inner_verdicts.begin(shown);
        batch.with_picked(
            &mut self.aside,
            |i, _| taken[i].is_some(),
            |view| inner.process(ctx, view, inner_verdicts),
        );

        let mut k = 0;
        for (i, p) in batch.iter_mut().enumerate() {
            let Some(t) = self.taken[i] else { continue };
            let verdict = self.inner_verdicts.get(k);
            k += 1;
            let output = match verdict {
                Verdict::Continue => 0,
                Verdict::Out(o) => o,
                Verdict::Drop(reason) => {
                    verdicts.drop(i, self.reason(reason));
                    continue;
                }
                Verdict::Hold => {
                    // Refused when built; never forwarded without its header.
                    verdicts.drop(i, DropReason::CANNOT_HOLD);
                    continue;
                }
            };
            let front = &self.fronts[usize::from(t.slot)];
            let (at, len) = (usize::from(t.at), usize::from(t.len));
            // Where the header goes back: behind the saved link header, or (an inner
            // datagram) behind the one the NF left, whose EtherType names the next
            // protocol (the NF may have rewritten either).
            let (l, next) = if t.ethernet {
                (at, None)
            } else {
                let d = p.data();
                match super::link_len(d)
                    .and_then(|l| next_for(u16::from_be_bytes([d[l - 2], d[l - 1]])).map(|n| (l, n)))
                {
                    Some((l, next)) => (l, Some(next)),
                    None => {
                        verdicts.drop(i, DropReason::UNSUPPORTED);
                        continue;
                    }
                }
            };
            let link = t.ethernet.then(|| &front[..at]);
            if !encapsulate(p, &front[at..at + len], link) {
                verdicts.drop(i, TOO_BIG);
                continue;
            }
            let d = p.data_mut();
            if let Some(next) = next {
                d[l + 3] = next.into();
            }
            d[l + 7] -= 1; // the SI, 1..=255 when taken off
            self.proxied += 1;
            if output != 0 {
                verdicts.out(i, output);
            }
        }
        self.inner_verdicts.clear();
    }

    fn tick(&mut self, now: u64) {
        self.inner.tick(now);
    }

    fn counters(&self) -> Vec<NfCounter> {
        let mut out = vec![
            NfCounter::total("proxied", self.proxied),
            NfCounter::total("oam", self.oam_packets),
        ];
        out.extend(self.inner.counters());
        out
    }
}

impl NshProxy {
    /// The wrapped NF's drop reason as this NF's.
    fn reason(&self, reason: DropReason) -> DropReason {
        match reason.code().checked_sub(DropReason::FIRST_OWN) {
            Some(k) => self.inner_reasons[usize::from(k)],
            None => reason,
        }
    }
}

/// Registers `nsh-proxy`.
pub const TYPE: crate::NfType = crate::NfType {
    kind: "nsh-proxy",
    about: "NSH proxy (RFC 7665/8300) for an NSH-unaware NF: takes the header off, runs the NF, puts it back with SI lowered",
    stateless: false,
    cost_neutral: &[],
    files: &[],
    wraps: Some("nf"),
    schema: || schemars::schema_for!(NshProxyConfig),
    drops_all_by_default: None,
    fixes: &[
        (
            "not-nsh",
            "the packets carry no NSH: put an nsh-classifier (and an nsh-sff) before the proxy (examples/chains/nsh.yaml)",
        ),
        (
            "si-exhausted",
            "the packets arrive with SI 0: start the path with a higher SI in the classifier",
        ),
    ],
    build: |v| Ok(Box::new(NshProxy::new(&crate::typed(v)?)?)),
};

#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NshProxyConfig {
    /// The NSH-unaware NF: its type (`firewall`), or its type and settings
    /// (`{nat44: {pool: ...}}`). Default `noop`. In a chain file, files its settings name
    /// are read beside the chain file, as the NF's own would be.
    pub nf: Option<serde_json::Value>,
    /// OAM packets (the O bit): `drop` (default, RFC 8300 §2.2) or `forward`.
    #[serde(default)]
    pub oam: Oam,
}

impl NshProxy {
    pub fn new(cfg: &NshProxyConfig) -> Result<NshProxy, ConfigError> {
        let spec = match &cfg.nf {
            None => NfSpec::default_of("noop"),
            Some(serde_json::Value::String(kind)) => NfSpec::default_of(kind),
            Some(serde_json::Value::Object(m)) if m.len() == 1 => {
                let (kind, settings) = m.iter().next().expect("one entry");
                NfSpec::new(kind, settings.clone())
            }
            Some(_) => {
                return Err(ConfigError::new(
                    "nf",
                    "write the NF's type (`firewall`) or its type and settings (`{firewall: {...}}`)",
                ));
            }
        }
        .map_err(|e| match e {
            crate::SpecError::UnknownKind(_) => ConfigError::new("nf", e.to_string()),
            crate::SpecError::Config(c) => ConfigError::new(format!("nf.{}", c.key), c.reason),
        })?;
        let inner = spec.build();
        if inner.holds_packets() || inner.kind() == TYPE.kind {
            return Err(ConfigError::new(
                "nf",
                format!(
                    "{} {}: a proxy puts the header back on what its NF passes at once",
                    inner.kind(),
                    if inner.kind() == TYPE.kind {
                        "is a proxy already"
                    } else {
                        "holds packets and sends them later"
                    }
                ),
            ));
        }
        let reasons = reasons_with(inner.kind(), inner.drop_reasons());
        let inner_reasons = inner
            .drop_reasons()
            .iter()
            .map(|name| DropReason::named(reasons, name))
            .collect();
        Ok(NshProxy {
            inner,
            oam: cfg.oam,
            reasons,
            inner_reasons,
            aside: Batch::new(MAX_BATCH),
            inner_verdicts: Verdicts::default(),
            taken: vec![None; MAX_BATCH],
            fronts: vec![[0; MAX_FRONT]; MAX_BATCH],
            proxied: 0,
            oam_packets: 0,
        })
    }
}

/// The proxy's reasons, then those of the NF type `kind` (`inner`) it does not have
/// already: made once per NF type for the life of the process.
fn reasons_with(kind: &'static str, inner: &'static [&'static str]) -> &'static [&'static str] {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    static LISTS: OnceLock<Mutex<HashMap<&'static str, &'static [&'static str]>>> = OnceLock::new();
    let mut lists = LISTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    lists.entry(kind).or_insert_with(|| {
        let mut all: Vec<&'static str> = OWN.to_vec();
        all.extend(inner.iter().filter(|r| !OWN.contains(r)));
        Box::leak(all.into_boxed_slice())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nsh::test_frames::md1;
    use crate::testutil::{run_one_batch, udp_frame};
    use sfclab_wire::nsh::check;

    fn proxy(cfg: serde_json::Value) -> NshProxy {
        NshProxy::new(&crate::typed(&cfg).unwrap()).unwrap()
    }

    #[test]
    fn runs_the_nf_on_what_is_inside_and_puts_the_header_back_with_si_lowered() {
        let mut nf = proxy(serde_json::json!({"nf": {"forwarder": {"dst_mac": "02:00:00:00:00:99"}}}));
        let inner = udp_frame();
        let mut frame = md1(&inner, 42, 200, 17, 0xabcd);
        frame[16] |= 0x80; // an unassigned bit: kept (§2.2)
        let (out, v) = run_one_batch(&mut nf, std::slice::from_ref(&frame));
        assert_eq!(v, vec![Verdict::Continue]);
        let f = &out[0];
        assert_eq!(&f[..14], &frame[..14], "the outer link header as it came");
        let (h, len) = check(&f[14..]).unwrap();
        assert_eq!((h.spi(), h.si(), h.ttl(), len), (42, 199, 17, 24));
        assert_eq!(
            &f[14..21],
            &frame[14..21],
            "flags, TTL, MD type, next protocol, SPI kept"
        );
        assert_eq!(&f[22..38], &frame[22..38], "the context as it came");
        assert_eq!(
            &f[38..44],
            &[2, 0, 0, 0, 0, 0x99],
            "the forwarder rewrote the inner frame"
        );
        assert_eq!(&f[50..], &inner[12..]);
    }

    #[test]
    fn the_nf_sees_only_nsh_packets_and_its_drops_keep_their_names() {
        let mut nf = proxy(serde_json::json!({"nf": {"firewall": {"default": "deny", "rules": [
            {"action": "allow", "proto": "udp", "dport": "1024"}
        ]}}}));
        let inner = udp_frame();
        let mut denied = inner.clone();
        denied[36..38].copy_from_slice(&80u16.to_be_bytes());
        let frames = [
            md1(&inner, 1, 9, 63, 0),
            inner.clone(),
            md1(&denied, 1, 9, 63, 0),
            md1(&inner, 1, 0, 63, 0),
        ];
        let (out, v) = run_one_batch(&mut nf, &frames);
        assert_eq!(v[0], Verdict::Continue);
        assert_eq!(check(&out[0][14..]).unwrap().0.si(), 8);
        assert_eq!(v[1], Verdict::Drop(super::super::NOT_NSH));
        let Verdict::Drop(r) = v[2] else { panic!("{:?}", v[2]) };
        assert_eq!(r.name(nf.drop_reasons()), "acl-deny");
        assert_eq!(v[3], Verdict::Drop(SI_EXHAUSTED));
        let count = |name: &str| nf.counters().iter().find(|c| c.name == name).unwrap().value;
        assert_eq!(
            (count("allowed"), count("denied"), count("proxied")),
            (1, 1, 1),
            "the firewall saw only the two NSH packets with SI left"
        );
    }

    #[test]
    fn an_inner_datagram_is_shown_behind_the_link_header_and_the_nfs_own_drops_are_renamed() {
        let mut nf = proxy(serde_json::json!({"nf": {"router": {
            "routes": ["198.19.0.0/16 192.0.2.7 0"], "neighbors": {"192.0.2.7": "02:00:00:00:00:77"}
        }}}));
        let inner = udp_frame();
        let mut ip = md1(&inner[14..], 3, 100, 63, 0);
        ip[17] = 1;
        let mut unrouted = inner.clone();
        unrouted[30] = 10; // 10.19.0.1: no route
        sfclab_wire::Ipv4Header::fill_checksum(&mut unrouted[14..34]);
        let mut no_route = md1(&unrouted[14..], 3, 100, 63, 0);
        no_route[17] = 1;
        let (out, v) = run_one_batch(&mut nf, &[ip, no_route]);
        assert_eq!(v[0], Verdict::Continue, "{v:?}");
        let f = &out[0];
        assert_eq!(&f[..6], &[2, 0, 0, 0, 0, 0x77], "the router rewrote the link header");
        assert_eq!(&f[12..14], &[0x89, 0x4f]);
        let (h, len) = check(&f[14..]).unwrap();
        assert_eq!((h.si(), h.next()), (99, NextProtocol::Ipv4));
        assert_eq!(f[14 + len + 8], inner[14 + 8] - 1, "the router lowered the inner TTL");
        let Verdict::Drop(r) = v[1] else { panic!("{:?}", v[1]) };
        assert_eq!(r.name(nf.drop_reasons()), "no-route");
    }

    #[test]
    fn refuses_what_it_cannot_wrap() {
        let err = |cfg: serde_json::Value| NshProxy::new(&crate::typed(&cfg).unwrap()).err().unwrap();
        assert_eq!(err(serde_json::json!({"nf": "shaper"})).key, "nf");
        assert_eq!(err(serde_json::json!({"nf": "nsh-proxy"})).key, "nf");
        assert_eq!(err(serde_json::json!({"nf": "no-such-nf"})).key, "nf");
        assert_eq!(err(serde_json::json!({"nf": 3})).key, "nf");
        let e = err(serde_json::json!({"nf": {"firewall": {"nonsense": 1}}}));
        assert!(e.key.starts_with("nf."), "{e}");
        // The default: an NSH-aware function that only lowers SI.
        let (out, _) = run_one_batch(&mut proxy(serde_json::json!({})), &[md1(&udp_frame(), 1, 2, 63, 0)]);
        assert_eq!(check(&out[0][14..]).unwrap().0.si(), 1);
    }
}
