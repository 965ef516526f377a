//! `nsh-classifier`: puts packets on service paths (RFC 8300 §2, RFC 7665's
//! classifier). Each path has a `match` (the class rules of qos and esp-encrypt: DSCP
//! and the IPv4 5-tuple; none: every IP packet), an SPI, an initial SI (255, as §2.3
//! recommends), a TTL (63, §2.2's default) and its context: MD type 1's four fixed
//! words, or MD type 2's variable-length context headers (`metadata`). A packet takes
//! the first path that matches.
//!
//! `inner: ethernet` (the default, as Open vSwitch's `encap(nsh)`): the whole frame
//! goes inside (next protocol 3) behind a new link header, `outer_dst`/`outer_src` or
//! the frame's own addresses, EtherType 0x894F. `inner: ip`: the IP datagram goes inside
//! (next protocol 1 or 2) and the frame's own link header stays in front.
//!
//! Keys: `paths` (each: `spi`, `si`, `ttl`, `match`, `context` or `metadata`), `inner`,
//! `unclassified` (`forward`, the default: sent on as they are; or `drop`),
//! `outer_dst`, `outer_src`. Counters: `classified`, `unclassified`, per SPI
//! `spi<N>_packets`. Drops: `malformed`, and its own `too-big` (no headroom for the
//! header), `unclassified`.

use serde::{Deserialize, Serialize};
use sfclab_core::{BatchView, Context, DropReason, NetworkFunction, NfCounter, Packet, Verdicts};
use sfclab_wire::MacAddr;
use sfclab_wire::nsh::{self, ContextTlv, NextProtocol, NshHeader};

use super::encapsulate;
use crate::ConfigError;
use crate::classes::{self, Classifier, IpFacts, MatchConfig};

const DROP_REASONS: &[&str] = &["too-big", "unclassified"];
const TOO_BIG: DropReason = DropReason::named(DROP_REASONS, "too-big");
const UNCLASSIFIED: DropReason = DropReason::named(DROP_REASONS, "unclassified");

/// The most context an MD type 2 path carries: with the outer link header, VLAN tags
/// and the 8 fixed bytes it must fit the packet's headroom.
const MAX_MD2_CONTEXT: usize = 96;

struct Path {
    /// The whole NSH as written, its next protocol that of `inner: ethernet`.
    header: Vec<u8>,
    /// Index into `NshClassifier::spis`.
    spi_slot: usize,
}

pub struct NshClassifier {
    classes: Classifier,
    paths: Vec<Path>,
    ip_inside: bool,
    /// The outer addresses in `ethernet` mode, when configured.
    outer: Option<[u8; 12]>,
    drop_unclassified: bool,
    /// Each distinct SPI, its counter's name and packets.
    spis: Vec<(&'static str, u64)>,
    classified: u64,
    unclassified: u64,
}

impl NetworkFunction for NshClassifier {
    fn kind(&self) -> &'static str {
        TYPE.kind
    }

    fn drop_reasons(&self) -> &'static [&'static str] {
        DROP_REASONS
    }

    fn process(&mut self, _ctx: &mut Context<'_>, mut batch: BatchView<'_>, verdicts: &mut Verdicts) {
        for (i, p) in batch.iter_mut().enumerate() {
            let ip = match classes::ip_facts(p) {
                Ok(ip) => ip,
                Err(reason) => {
                    verdicts.drop(i, reason);
                    continue;
                }
            };
            let Some((k, ip)) = ip.and_then(|ip| Some((self.classes.classify(&ip)?, ip))) else {
                self.unclassified += 1;
                if self.drop_unclassified {
                    verdicts.drop(i, UNCLASSIFIED);
                }
                continue;
            };
            if !self.classify(p, &ip, k) {
                verdicts.drop(i, TOO_BIG);
            }
        }
    }

    fn counters(&self) -> Vec<NfCounter> {
        let mut out = vec![
            NfCounter::total("classified", self.classified),
            NfCounter::total("unclassified", self.unclassified),
        ];
        out.extend(self.spis.iter().map(|&(name, n)| NfCounter::total(name, n)));
        out
    }
}

impl NshClassifier {
    /// Puts `p` on path `k`; `false` when the headroom cannot take the header.
    #[inline]
    fn classify(&mut self, p: &mut Packet, ip: &IpFacts, k: usize) -> bool {
        let path = &self.paths[k];
        let placed = if self.ip_inside {
            // Ethernet padding is not part of the datagram.
            p.truncate(ip.l3 + ip.len as usize);
            let next = if ip.v6 { NextProtocol::Ipv6 } else { NextProtocol::Ipv4 };
            encapsulate(p, &path.header, None) && {
                p.data_mut()[ip.l3 + 3] = next.into();
                true
            }
        } else {
            let mut link = [0u8; 14];
            match &self.outer {
                Some(macs) => link[..12].copy_from_slice(macs),
                None => link[..12].copy_from_slice(&p.data()[..12]),
            }
            link[12..].copy_from_slice(&nsh::ETHERTYPE_NSH.to_be_bytes());
            encapsulate(p, &path.header, Some(&link))
        };
        if placed {
            self.classified += 1;
            self.spis[path.spi_slot].1 += 1;
        }
        placed
    }
}

/// Registers `nsh-classifier`.
pub const TYPE: crate::NfType = crate::NfType {
    kind: "nsh-classifier",
    about: "NSH classifier (RFC 8300): puts packets on service paths by class (SPI, SI, TTL, MD type 1 or 2 context)",
    stateless: false,
    cost_neutral: &["outer_dst", "outer_src"],
    files: &[],
    wraps: None,
    schema: || schemars::schema_for!(NshClassifierConfig),
    drops_all_by_default: None,
    fixes: &[(
        "unclassified",
        "no path's `match` takes the traffic: give `paths` a path whose `match` covers it (or none for all), or set `unclassified: forward` (examples/chains/nsh.yaml)",
    )],
    build: |v| Ok(Box::new(NshClassifier::new(&crate::typed(v)?)?)),
};

/// What goes inside the header.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Inner {
    /// The whole Ethernet frame (next protocol 3), behind a new link header.
    #[default]
    Ethernet,
    /// The IP datagram (next protocol 1 or 2), behind the frame's own link header.
    Ip,
}

/// Packets that no path takes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Unclassified {
    /// Sent on as they are (counted `unclassified`).
    #[default]
    Forward,
    /// Dropped (`unclassified`).
    Drop,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NshClassifierConfig {
    /// The service paths, in order: a packet takes the first whose `match` takes it.
    #[serde(default)]
    pub paths: Vec<PathConfig>,
    #[serde(default)]
    pub inner: Inner,
    #[serde(default)]
    pub unclassified: Unclassified,
    /// Destination MAC of the outer header with `inner: ethernet` (default: the frame's).
    pub outer_dst: Option<String>,
    /// Source MAC of the outer header with `inner: ethernet` (default: the frame's).
    pub outer_src: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PathConfig {
    /// Service path identifier, 0..=16777215 (24 bits).
    pub spi: u32,
    /// The initial service index (default 255, RFC 8300 §2.3).
    pub si: Option<u8>,
    /// The initial TTL, 1..=63 (default 63, RFC 8300 §2.2).
    pub ttl: Option<u8>,
    /// Which packets take this path (none: every IP packet).
    #[serde(rename = "match")]
    pub selectors: Option<MatchConfig>,
    /// MD type 1's fixed context: four 32-bit words (default zeros). Not with `metadata`.
    pub context: Option<[u32; 4]>,
    /// MD type 2's context headers: with these the path uses MD type 2.
    pub metadata: Option<Vec<MetadataConfig>>,
}

/// One MD type 2 context header.
#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetadataConfig {
    /// Metadata class (16 bits; 0x0000-0x01ff are IETF's).
    pub class: u16,
    /// Type within the class, 0..=127.
    #[serde(rename = "type")]
    pub kind: u8,
    /// The value as hex (`0x0a0b0c`), at most 127 bytes; may be empty.
    #[serde(default)]
    pub value: String,
}

impl NshClassifier {
    pub fn new(cfg: &NshClassifierConfig) -> Result<NshClassifier, ConfigError> {
        let mut spis: Vec<(u32, &'static str, u64)> = Vec::new();
        let mut paths = Vec::with_capacity(cfg.paths.len());
        for (k, c) in cfg.paths.iter().enumerate() {
            let at = |field: &str| format!("paths[{k}].{field}");
            let spi = super::check_spi(c.spi, &at("spi"))?;
            let ttl = c.ttl.unwrap_or(nsh::DEFAULT_TTL);
            if ttl == 0 || ttl > nsh::MAX_TTL {
                return Err(ConfigError::new(
                    at("ttl"),
                    format!("TTL {ttl} is not in 1..=63 (6 bits)"),
                ));
            }
            let si = c.si.unwrap_or(255);
            if si == 0 {
                return Err(ConfigError::new(at("si"), "SI 0 leaves no service function to visit"));
            }
            let header = header(c, spi, si, ttl, &at)?;
            let spi_slot = match spis.iter().position(|s| s.0 == spi) {
                Some(slot) => slot,
                None => {
                    spis.push((spi, crate::config::intern(&format!("spi{spi}_packets")), 0));
                    spis.len() - 1
                }
            };
            paths.push(Path { header, spi_slot });
        }
        let every = MatchConfig::default();
        let classes = Classifier::new(cfg.paths.iter().map(|p| p.selectors.as_ref().unwrap_or(&every)), |k| {
            format!("paths[{k}].match")
        })?;
        let mac = |key: &str, v: &Option<String>| -> Result<Option<MacAddr>, ConfigError> {
            v.as_ref()
                .map(|s| s.parse::<MacAddr>().map_err(|e| ConfigError::new(key, e)))
                .transpose()
        };
        let (dst, src) = (mac("outer_dst", &cfg.outer_dst)?, mac("outer_src", &cfg.outer_src)?);
        if cfg.inner == Inner::Ip && (dst.is_some() || src.is_some()) {
            return Err(ConfigError::new(
                if dst.is_some() { "outer_dst" } else { "outer_src" },
                "with `inner: ip` the frame's own link header stays in front: outer addresses are for `inner: ethernet`",
            ));
        }
        let outer = (dst.is_some() || src.is_some()).then(|| {
            let mut macs = [0u8; 12];
            macs[..6].copy_from_slice(&dst.unwrap_or(MacAddr([0; 6])).0);
            macs[6..].copy_from_slice(&src.unwrap_or(MacAddr([0; 6])).0);
            macs
        });
        if outer.is_some() && (dst.is_none() || src.is_none()) {
            return Err(ConfigError::new(
                if dst.is_none() { "outer_dst" } else { "outer_src" },
                "give both outer addresses, or neither (the frame's own are used then)",
            ));
        }
        Ok(NshClassifier {
            classes,
            paths,
            ip_inside: cfg.inner == Inner::Ip,
            outer,
            drop_unclassified: cfg.unclassified == Unclassified::Drop,
            spis: spis.into_iter().map(|(_, name, n)| (name, n)).collect(),
            classified: 0,
            unclassified: 0,
        })
    }
}

/// Path `c`'s whole NSH, as every packet of it carries it (next protocol Ethernet; the
/// `ip` mode rewrites that byte per packet).
fn header(c: &PathConfig, spi: u32, si: u8, ttl: u8, at: &dyn Fn(&str) -> String) -> Result<Vec<u8>, ConfigError> {
    let (md_type, context) = match (&c.context, &c.metadata) {
        (Some(_), Some(_)) => {
            return Err(ConfigError::new(
                at("metadata"),
                "a path has MD type 1's `context` or MD type 2's `metadata`, not both",
            ));
        }
        (_, Some(tlvs)) => {
            let mut bytes = Vec::new();
            for (j, t) in tlvs.iter().enumerate() {
                let key = at(&format!("metadata[{j}]"));
                if t.kind > 127 {
                    return Err(ConfigError::new(format!("{key}.type"), "a type has 7 bits: 0..=127"));
                }
                let value =
                    crate::config::parse_hex(&t.value).map_err(|e| ConfigError::new(format!("{key}.value"), e))?;
                if value.len() > 127 {
                    return Err(ConfigError::new(
                        format!("{key}.value"),
                        format!("{} bytes: a context header carries at most 127", value.len()),
                    ));
                }
                let tlv = ContextTlv {
                    class: t.class,
                    kind: t.kind,
                    value: &value,
                };
                let start = bytes.len();
                bytes.resize(start + tlv.wire_len(), 0);
                tlv.write(&mut bytes[start..]);
            }
            if bytes.len() > MAX_MD2_CONTEXT {
                return Err(ConfigError::new(
                    at("metadata"),
                    format!(
                        "{} bytes of context headers: at most {MAX_MD2_CONTEXT} fit the packet's headroom",
                        bytes.len()
                    ),
                ));
            }
            (nsh::MD_TYPE_2, bytes)
        }
        (words, None) => (
            nsh::MD_TYPE_1,
            words.unwrap_or_default().iter().flat_map(|w| w.to_be_bytes()).collect(),
        ),
    };
    let len = NshHeader::LEN + context.len();
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&NshHeader::first_word(ttl, len).to_be_bytes());
    out.push(md_type);
    out.push(NextProtocol::Ethernet.into());
    out.extend_from_slice(&(spi << 8 | u32::from(si)).to_be_bytes());
    out.extend_from_slice(&context);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{run_one_batch, udp_frame};
    use sfclab_core::Verdict;
    use sfclab_wire::nsh::{check, tlvs};

    fn classifier(cfg: serde_json::Value) -> NshClassifier {
        NshClassifier::new(&crate::typed(&cfg).unwrap()).unwrap()
    }

    fn with_dport(port: u16) -> Vec<u8> {
        let mut f = udp_frame();
        f[36..38].copy_from_slice(&port.to_be_bytes());
        f
    }

    #[test]
    fn an_md_type_1_path_wraps_the_whole_frame_as_rfc_8300_lays_it_out() {
        let mut nf = classifier(serde_json::json!({
            "paths": [{"spi": 42, "context": [1, 2, 3, 0xdeadbeef_u32]}]
        }));
        let frame = udp_frame();
        let (out, v) = run_one_batch(&mut nf, std::slice::from_ref(&frame));
        assert_eq!(v, vec![Verdict::Continue]);
        let f = &out[0];
        assert_eq!(&f[..12], &frame[..12], "outer addresses: the frame's own");
        assert_eq!(&f[12..14], &[0x89, 0x4f]);
        let (h, len) = check(&f[14..]).unwrap();
        assert_eq!((h.ttl(), h.md(), h.next(), len), (63, 1, NextProtocol::Ethernet, 24));
        assert_eq!((h.spi(), h.si()), (42, 255), "SI starts at 255 (§2.3)");
        assert_eq!(
            &f[22..38],
            &[0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0xde, 0xad, 0xbe, 0xef]
        );
        assert_eq!(&f[38..], &frame[..], "the frame inside, untouched");
        assert_eq!(nf.counters()[2].name, "spi42_packets");
        assert_eq!(nf.counters()[2].value, 1);
    }

    #[test]
    fn md_type_2_metadata_is_padded_and_the_length_counts_it() {
        let mut nf = classifier(serde_json::json!({
            "paths": [{"spi": 7, "si": 10, "ttl": 5,
                       "metadata": [{"class": 0x0101, "type": 3, "value": "0xaabbccdd01"},
                                    {"class": 2, "type": 127}]}]
        }));
        let (out, _) = run_one_batch(&mut nf, &[udp_frame()]);
        let (h, len) = check(&out[0][14..]).unwrap();
        assert_eq!((h.md(), h.ttl(), h.si(), len), (2, 5, 10, 8 + 12 + 4));
        let all: Vec<_> = tlvs(&out[0][22..14 + len]).map(Result::unwrap).collect();
        assert_eq!(all.len(), 2);
        assert_eq!(
            (all[0].class, all[0].kind, all[0].value),
            (0x0101, 3, &[0xaa, 0xbb, 0xcc, 0xdd, 1][..])
        );
        assert_eq!((all[1].kind, all[1].value.len()), (127, 0));
    }

    #[test]
    fn ip_mode_keeps_the_link_header_and_carries_the_datagram() {
        let mut nf = classifier(serde_json::json!({"paths": [{"spi": 9}], "inner": "ip"}));
        let mut frame = udp_frame();
        frame.extend_from_slice(&[0; 6]); // Ethernet padding: not part of the datagram
        let (out, _) = run_one_batch(&mut nf, &[frame.clone()]);
        let f = &out[0];
        assert_eq!(&f[..12], &frame[..12]);
        let (h, len) = check(&f[14..]).unwrap();
        assert_eq!(h.next(), NextProtocol::Ipv4);
        assert_eq!(&f[14 + len..], &frame[14..frame.len() - 6]);
    }

    #[test]
    fn the_first_matching_path_wins_and_the_rest_go_on_or_are_dropped() {
        let cfg = |unclassified: &str| {
            serde_json::json!({
                "paths": [{"spi": 1, "match": {"dport": "53"}}, {"spi": 2, "match": {"proto": "udp", "dport": "50-60"}}],
                "unclassified": unclassified,
                "outer_dst": "02:00:00:00:00:0a", "outer_src": "02:00:00:00:00:0b"
            })
        };
        let frames = [with_dport(53), with_dport(55), with_dport(80)];
        let mut nf = classifier(cfg("forward"));
        let (out, v) = run_one_batch(&mut nf, &frames);
        let spi = |f: &[u8]| check(&f[14..]).unwrap().0.spi();
        assert_eq!((spi(&out[0]), spi(&out[1])), (1, 2));
        assert_eq!(&out[0][..12], &[2, 0, 0, 0, 0, 0x0a, 2, 0, 0, 0, 0, 0x0b]);
        assert_eq!((v[2], &out[2]), (Verdict::Continue, &frames[2]), "sent on as it was");
        let (_, v) = run_one_batch(&mut classifier(cfg("drop")), &frames);
        assert_eq!(v[2], Verdict::Drop(UNCLASSIFIED));
        // ARP is not IP: no path takes it.
        let mut arp = udp_frame();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let (_, v) = run_one_batch(&mut classifier(cfg("drop")), &[arp]);
        assert_eq!(v[0], Verdict::Drop(UNCLASSIFIED));
    }

    #[test]
    fn refuses_configs_nsh_cannot_carry() {
        let err = |cfg: serde_json::Value| NshClassifier::new(&crate::typed(&cfg).unwrap()).err().unwrap();
        assert_eq!(
            err(serde_json::json!({"paths": [{"spi": 0x100_0000}]})).key,
            "paths[0].spi"
        );
        assert_eq!(
            err(serde_json::json!({"paths": [{"spi": 1, "ttl": 64}]})).key,
            "paths[0].ttl"
        );
        assert_eq!(
            err(serde_json::json!({"paths": [{"spi": 1, "si": 0}]})).key,
            "paths[0].si"
        );
        assert_eq!(
            err(serde_json::json!({"paths": [{"spi": 1, "context": [0,0,0,0], "metadata": []}]})).key,
            "paths[0].metadata"
        );
        assert_eq!(
            err(serde_json::json!({"paths": [{"spi": 1, "metadata": [{"class": 1, "type": 1, "value": "0xabc"}]}]}))
                .key,
            "paths[0].metadata[0].value"
        );
        let big = "ab".repeat(100);
        assert_eq!(
            err(serde_json::json!({"paths": [{"spi": 1, "metadata": [{"class": 1, "type": 1, "value": big}]}]})).key,
            "paths[0].metadata"
        );
        assert_eq!(
            err(serde_json::json!({"inner": "ip", "outer_dst": "02:00:00:00:00:01"})).key,
            "outer_dst"
        );
        assert_eq!(
            err(serde_json::json!({"outer_dst": "02:00:00:00:00:01"})).key,
            "outer_src"
        );
    }
}
