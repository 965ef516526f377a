//! `nsh-sff`: a service function forwarder (RFC 8300 §2.2–2.3, RFC 7665 §4.4). Each
//! NSH packet's TTL is decremented before the lookup (an incoming 0 becomes 63; one
//! that reaches 0 is not forwarded: `ttl-expired`), then its SPI and SI pick the next
//! hop from the `forward` table: one of this NF's outputs, which the chain file's
//! `wiring` leads to a service function (an NSH-aware NF, or an `nsh-proxy` in front of
//! an unaware one), or the default output `out` (the next NF in the chain). An entry
//! with `decap: true` ends the path: the header comes off (the inner frame, or the
//! inner datagram behind the outer link header) before the packet leaves. A packet
//! whose SPI and SI have no entry is dropped (`unknown-path`): the SI a service function
//! left names where it is on its path, and no entry means no next hop.
//!
//! Keys: `forward` (each: `spi`, `si`, `to` (an output name; default `out`), `decap`),
//! `oam` (`drop`, the default, or `forward`). Outputs: `out`, then each `to` in the
//! order first named. Counters: `forwarded`, `decapsulated`, `oam`. Drops: `malformed`,
//! `ttl-expired`, `unsupported` (a next protocol other than Ethernet, IPv4, IPv6 at the
//! path's end), and its own `not-nsh`, `nsh-version`, `md-type`, `oam`, `unknown-path`.

use hashbrown::HashMap;
use serde::{Deserialize, Serialize};
use sfclab_core::{BatchView, Context, DropReason, NetworkFunction, NfCounter, Verdicts};

use super::{Found, Oam, decapsulate};
use crate::ConfigError;

const DROP_REASONS: &[&str] = &["not-nsh", "nsh-version", "md-type", "oam", "unknown-path"];
const UNKNOWN_PATH: DropReason = DropReason::named(DROP_REASONS, "unknown-path");

#[derive(Debug, Clone, Copy)]
struct Hop {
    output: u8,
    decap: bool,
}

pub struct NshSff {
    /// `spi << 8 | si` to an index into `hops`.
    table: HashMap<u32, u16>,
    hops: Vec<Hop>,
    outputs: Vec<String>,
    oam: Oam,
    forwarded: u64,
    decapsulated: u64,
    oam_packets: u64,
}

impl NetworkFunction for NshSff {
    fn kind(&self) -> &'static str {
        TYPE.kind
    }

    fn drop_reasons(&self) -> &'static [&'static str] {
        DROP_REASONS
    }

    fn outputs(&self) -> Vec<String> {
        self.outputs.clone()
    }

    fn process(&mut self, _ctx: &mut Context<'_>, mut batch: BatchView<'_>, verdicts: &mut Verdicts) {
        for (i, p) in batch.iter_mut().enumerate() {
            let found = match Found::locate(p.data(), self.oam) {
                Ok(found) => found,
                Err(reason) => {
                    verdicts.drop(i, reason);
                    continue;
                }
            };
            let h = found.header_mut(p.data_mut());
            // §2.2: decremented before the lookup; 0 wraps to 63.
            let ttl = h.ttl().checked_sub(1).unwrap_or(63);
            if ttl == 0 {
                verdicts.drop(i, DropReason::TTL_EXPIRED);
                continue;
            }
            h.set_ttl(ttl);
            let Some(&k) = self.table.get(&h.path_key()) else {
                verdicts.drop(i, UNKNOWN_PATH);
                continue;
            };
            let hop = self.hops[usize::from(k)];
            self.oam_packets += u64::from(found.oam);
            if hop.decap {
                if let Err(reason) = decapsulate(p, found) {
                    verdicts.drop(i, reason);
                    continue;
                }
                self.decapsulated += 1;
            } else {
                self.forwarded += 1;
            }
            if hop.output != 0 {
                verdicts.out(i, hop.output);
            }
        }
    }

    fn counters(&self) -> Vec<NfCounter> {
        vec![
            NfCounter::total("forwarded", self.forwarded),
            NfCounter::total("decapsulated", self.decapsulated),
            NfCounter::total("oam", self.oam_packets),
        ]
    }
}

/// Registers `nsh-sff`.
pub const TYPE: crate::NfType = crate::NfType {
    kind: "nsh-sff",
    about: "NSH service function forwarder (RFC 8300): next hop by SPI and SI, TTL, decapsulation at the path's end",
    stateless: true,
    cost_neutral: &[],
    files: &[],
    wraps: None,
    schema: || schemars::schema_for!(NshSffConfig),
    drops_all_by_default: Some("unknown-path"),
    fixes: &[
        (
            "unknown-path",
            "no `forward` entry has the packets' SPI and SI: add one per (spi, si) the path reaches here, remembering each service function lowers SI by one (examples/chains/nsh.yaml)",
        ),
        (
            "not-nsh",
            "the packets carry no NSH: put an nsh-classifier before the SFF",
        ),
    ],
    build: |v| Ok(Box::new(NshSff::new(&crate::typed(v)?)?)),
};

#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NshSffConfig {
    /// The forwarding table: one entry per SPI and SI.
    #[serde(default)]
    pub forward: Vec<HopConfig>,
    /// OAM packets (the O bit): `drop` (default, RFC 8300 §2.2) or `forward`.
    #[serde(default)]
    pub oam: Oam,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HopConfig {
    /// Service path identifier (24 bits).
    pub spi: u32,
    /// Service index, as the previous service function left it.
    pub si: u8,
    /// The output the packet leaves by (default `out`: the next NF in the chain);
    /// `wiring` leads named outputs to NFs (`sff.fw -> fw`).
    pub to: Option<String>,
    /// The path ends here: the header comes off before the packet leaves.
    #[serde(default)]
    pub decap: bool,
}

impl NshSff {
    pub fn new(cfg: &NshSffConfig) -> Result<NshSff, ConfigError> {
        let mut outputs = vec!["out".to_string()];
        let mut table = HashMap::with_capacity(cfg.forward.len());
        let mut hops = Vec::with_capacity(cfg.forward.len());
        for (k, c) in cfg.forward.iter().enumerate() {
            let at = |field: &str| format!("forward[{k}].{field}");
            let spi = super::check_spi(c.spi, &at("spi"))?;
            let to = c.to.as_deref().unwrap_or("out");
            if to.is_empty() || to.contains(['.', ' ', '-', '>']) {
                return Err(ConfigError::new(
                    at("to"),
                    format!("`{to}` cannot name an output: use letters, digits and `_`"),
                ));
            }
            let output = match outputs.iter().position(|o| o == to) {
                Some(o) => o,
                None => {
                    outputs.push(to.to_string());
                    outputs.len() - 1
                }
            };
            if output > usize::from(sfclab_core::nf::MAX_OUTPUT) {
                return Err(ConfigError::new(at("to"), "too many outputs"));
            }
            if table.insert(spi << 8 | u32::from(c.si), hops.len() as u16).is_some() {
                return Err(ConfigError::new(
                    at("si"),
                    format!(
                        "SPI {spi} SI {} has an entry already: one next hop per SPI and SI",
                        c.si
                    ),
                ));
            }
            hops.push(Hop {
                output: output as u8,
                decap: c.decap,
            });
        }
        Ok(NshSff {
            table,
            hops,
            outputs,
            oam: cfg.oam,
            forwarded: 0,
            decapsulated: 0,
            oam_packets: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nsh::test_frames::md1;
    use crate::testutil::{run_one_batch, udp_frame};
    use sfclab_core::Verdict;
    use sfclab_wire::nsh::check;

    fn sff(cfg: serde_json::Value) -> NshSff {
        NshSff::new(&crate::typed(&cfg).unwrap()).unwrap()
    }

    #[test]
    fn picks_the_next_hop_by_spi_and_si_and_lowers_the_ttl() {
        let mut nf = sff(serde_json::json!({"forward": [
            {"spi": 42, "si": 255, "to": "fw"},
            {"spi": 42, "si": 254, "to": "nat"},
            {"spi": 42, "si": 253},
            {"spi": 43, "si": 255, "to": "nat"}
        ]}));
        assert_eq!(nf.outputs(), ["out", "fw", "nat"]);
        let inner = udp_frame();
        let frames = [
            md1(&inner, 42, 255, 63, 0),
            md1(&inner, 42, 254, 10, 0),
            md1(&inner, 42, 253, 1, 0),
            md1(&inner, 43, 255, 0, 0),
            md1(&inner, 42, 252, 63, 0),
            md1(&inner, 44, 255, 63, 0),
        ];
        let (out, v) = run_one_batch(&mut nf, &frames);
        assert_eq!(
            v,
            vec![
                Verdict::Out(1),
                Verdict::Out(2),
                Verdict::Drop(DropReason::TTL_EXPIRED),
                Verdict::Out(2),
                Verdict::Drop(UNKNOWN_PATH),
                Verdict::Drop(UNKNOWN_PATH),
            ]
        );
        let ttl = |f: &[u8]| check(&f[14..]).unwrap().0.ttl();
        assert_eq!(
            (ttl(&out[0]), ttl(&out[1]), ttl(&out[3])),
            (62, 9, 63),
            "0 wraps to 63 (§2.2)"
        );
        assert_eq!(check(&out[0][14..]).unwrap().0.si(), 255, "an SFF leaves SI as it is");
        assert_eq!(&out[0][38..], &inner[..]);
    }

    #[test]
    fn the_paths_end_takes_the_header_off() {
        let mut nf = sff(serde_json::json!({"forward": [{"spi": 5, "si": 200, "decap": true, "to": "exit"}]}));
        let inner = udp_frame();
        let mut ip = md1(&inner[14..], 5, 200, 63, 0);
        ip[17] = 1; // next protocol IPv4: the datagram behind the outer link header
        let mut mpls = md1(&inner, 5, 200, 63, 0);
        mpls[17] = 5;
        let (out, v) = run_one_batch(&mut nf, &[md1(&inner, 5, 200, 63, 0), ip, mpls]);
        assert_eq!(
            v,
            vec![Verdict::Out(1), Verdict::Out(1), Verdict::Drop(DropReason::UNSUPPORTED)]
        );
        assert_eq!(out[0], inner);
        assert_eq!(&out[1][..12], &[2, 0, 0, 0, 0, 0xcc, 2, 0, 0, 0, 0, 0xdd]);
        assert_eq!(&out[1][12..], &inner[12..], "EtherType IPv4, the datagram as sent");
        assert_eq!(nf.counters()[1].value, 2);
    }

    #[test]
    fn oam_packets_are_dropped_unless_forwarding_them_is_configured() {
        let cfg = |oam: &str| serde_json::json!({"forward": [{"spi": 1, "si": 9}], "oam": oam});
        let mut frame = md1(&udp_frame(), 1, 9, 63, 0);
        frame[14] |= 0x20;
        let (_, v) = run_one_batch(&mut sff(cfg("drop")), std::slice::from_ref(&frame));
        assert_eq!(v[0], Verdict::Drop(super::super::OAM));
        let mut nf = sff(cfg("forward"));
        let (out, v) = run_one_batch(&mut nf, &[frame]);
        assert_eq!(v[0], Verdict::Continue);
        assert_ne!(out[0][14] & 0x20, 0, "the O bit is never modified");
        assert_eq!(nf.counters()[2].value, 1);
    }

    #[test]
    fn refuses_two_next_hops_for_one_spi_and_si() {
        let e = NshSff::new(
            &crate::typed(&serde_json::json!({"forward": [{"spi": 1, "si": 2}, {"spi": 1, "si": 2, "to": "x"}]}))
                .unwrap(),
        )
        .err()
        .unwrap();
        assert_eq!(e.key, "forward[1].si");
        let e =
            NshSff::new(&crate::typed(&serde_json::json!({"forward": [{"spi": 1, "si": 2, "to": "a.b"}]})).unwrap())
                .err()
                .unwrap();
        assert_eq!(e.key, "forward[0].to");
    }
}
