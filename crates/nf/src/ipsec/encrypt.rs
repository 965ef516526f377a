//! `esp-encrypt`: IPsec ESP in tunnel mode (RFC 4303) with AES-GCM (RFC 4106), the
//! outbound half of a security gateway.
//!
//! Each IP packet (IPv4 or IPv6 inside; VLAN tags kept) is looked up in the SPD: first
//! `bypass` (sent in clear), then the SAs in order, each with its `match` (its selectors;
//! none: every packet); one that matches nothing is discarded (`no-policy`, RFC 4301
//! §5.1). The packet becomes `outer IPv4 | ESP (SPI, sequence) | IV | inner datagram |
//! padding to 4 bytes | pad length | next header | ICV`, all but the headers encrypted,
//! SPI and sequence number (with ESN, its high half too) authenticated. The outer header
//! carries the inner DSCP and ECN (RFC 4301 §5.1.2.1, RFC 6040's normal mode) and DF,
//! TTL 64, an ID counted per NF. Sequence numbers start at 1; without ESN an SA sends
//! at most 2^32 - 1 packets (§3.3.3: `seq-overflow`). The IV is the 64-bit sequence
//! number: unique per key, as RFC 4106 §3.1 requires.
//!
//! Keys: `sas` (each: `spi`, `key`, `tunnel` {src, dst}, `esn`, `match`, `lifetime`),
//! `bypass` (selectors, as `match`), `mtu` (largest outer IPv4 datagram; larger ones are
//! dropped `too-big`; default: any that fits the packet buffer).
//! Counters: `protected`, `bypassed`, per SA `sa<spi>_packets` and `sa<spi>_bytes` (inner
//! datagrams). Drops: `malformed`, `unsupported` (not IP), and its own `no-policy`,
//! `sa-expired` (hard lifetime reached), `seq-overflow`, `too-big`.

use serde::{Deserialize, Serialize};
use sfclab_core::{BatchView, Context, DropReason, NetworkFunction, NfCounter, Packet, Verdicts};
use sfclab_wire::Ipv4Header;

use super::sa::{self, AadBytes, Cipher, ESP_HEADER, ICV, IV, SaConfig, TRAILER, Tunnel, Usage};
use crate::ConfigError;
use crate::classes::{self, Classifier, IpFacts, MatchConfig};

const DROP_REASONS: &[&str] = &["no-policy", "sa-expired", "seq-overflow", "too-big"];
const NO_POLICY: DropReason = DropReason::named(DROP_REASONS, "no-policy");
const SA_EXPIRED: DropReason = DropReason::named(DROP_REASONS, "sa-expired");
const SEQ_OVERFLOW: DropReason = DropReason::named(DROP_REASONS, "seq-overflow");
const TOO_BIG: DropReason = DropReason::named(DROP_REASONS, "too-big");

/// Bytes added in front of the inner datagram: outer IPv4, ESP header, IV.
const FRONT: usize = 20 + ESP_HEADER + IV;
const TTL: u8 = 64;

struct OutboundSa {
    spi: u32,
    cipher: Cipher,
    tunnel: Tunnel,
    esn: bool,
    /// The last sequence number sent (0: none yet).
    seq: u64,
    /// The outer IPv4 header's words that never change (version and header length,
    /// TTL and protocol, addresses), summed for its checksum.
    header_sum: u32,
    usage: Usage,
}

pub struct EspEncrypt {
    bypass: Classifier,
    /// The SAs' selectors, in order: the SPD's protect entries.
    spd: Classifier,
    sas: Vec<OutboundSa>,
    mtu: usize,
    ip_id: u16,
    protected: u64,
    bypassed: u64,
}

impl NetworkFunction for EspEncrypt {
    fn kind(&self) -> &'static str {
        TYPE.kind
    }

    fn drop_reasons(&self) -> &'static [&'static str] {
        DROP_REASONS
    }

    fn process(&mut self, _ctx: &mut Context<'_>, mut batch: BatchView<'_>, verdicts: &mut Verdicts) {
        for (i, p) in batch.iter_mut().enumerate() {
            let ip = match classes::ip_facts(p) {
                Ok(Some(ip)) => ip,
                Ok(None) => {
                    verdicts.drop(i, DropReason::UNSUPPORTED);
                    continue;
                }
                Err(reason) => {
                    verdicts.drop(i, reason);
                    continue;
                }
            };
            if self.bypass.classify(&ip).is_some() {
                self.bypassed += 1;
                continue;
            }
            let Some(k) = self.spd.classify(&ip) else {
                verdicts.drop(i, NO_POLICY);
                continue;
            };
            if let Err(reason) = self.protect(p, &ip, k) {
                verdicts.drop(i, reason);
            }
        }
    }

    fn counters(&self) -> Vec<NfCounter> {
        let mut out = vec![
            NfCounter::total("protected", self.protected),
            NfCounter::total("bypassed", self.bypassed),
        ];
        out.extend(self.sas.iter().flat_map(|sa| sa.usage.counters()));
        out
    }
}

impl EspEncrypt {
    /// Encapsulates the datagram `ip` of `p` under SA `k`.
    #[inline]
    fn protect(&mut self, p: &mut Packet, ip: &IpFacts, k: usize) -> Result<(), DropReason> {
        let sa = &mut self.sas[k];
        let (l3, inner) = (ip.l3, ip.len as usize);
        if !sa.usage.allows(inner) {
            return Err(SA_EXPIRED);
        }
        let seq = sa.seq + 1;
        if !sa.esn && seq > u64::from(u32::MAX) || seq == u64::MAX {
            return Err(SEQ_OVERFLOW);
        }
        // Padding brings the encrypted part to a multiple of 4 bytes (§2.4: GCM is a
        // stream cipher, 4 is ESP's alignment).
        let pad = (4 - (inner + TRAILER) % 4) % 4;
        let sealed = inner + pad + TRAILER;
        let outer = FRONT + sealed + ICV;
        if outer > self.mtu || p.headroom() < FRONT || p.tailroom() + (p.len() - l3 - inner) < pad + TRAILER + ICV {
            return Err(TOO_BIG);
        }
        let d = p.data();
        let tos = classes::traffic_class(d, l3, ip.v6);
        let df = if ip.v6 { 0 } else { d[l3 + 6] & 0x40 };
        let next = if ip.v6 { sa::NEXT_IPV6 } else { sa::NEXT_IPV4 };

        // Ethernet padding is not part of the datagram; the link header moves to the
        // new front, its type becomes IPv4.
        p.truncate(l3 + inner);
        p.prepend(FRONT).expect("headroom checked");
        let tail = p.append(pad + TRAILER + ICV).expect("tailroom checked");
        for (j, b) in tail[..pad].iter_mut().enumerate() {
            *b = j as u8 + 1;
        }
        tail[pad] = pad as u8;
        tail[pad + 1] = next;
        let d = p.data_mut();
        d.copy_within(FRONT..FRONT + l3, 0);
        d[l3 - 2..l3].copy_from_slice(&0x0800u16.to_be_bytes());

        // The header is written once, its checksum summed from the values rather than
        // read back from the bytes just stored (a read of two fresh byte stores stalls
        // store-to-load forwarding); the SA's fixed words were summed when it was made.
        let (len, id) = (outer as u16, self.ip_id);
        let sum = sa.header_sum + u32::from(tos) + u32::from(len) + u32::from(id) + (u32::from(df) << 8);
        let checksum = !sfclab_wire::checksum::fold(sum);
        let h = &mut d[l3..l3 + 20];
        h[..2].copy_from_slice(&[0x45, tos]);
        h[2..4].copy_from_slice(&len.to_be_bytes());
        h[4..6].copy_from_slice(&id.to_be_bytes());
        h[6..10].copy_from_slice(&[df, 0, TTL, sa::PROTO_ESP]);
        h[10..12].copy_from_slice(&checksum.to_be_bytes());
        h[12..16].copy_from_slice(&sa.tunnel.src.octets());
        h[16..20].copy_from_slice(&sa.tunnel.dst.octets());
        debug_assert!(Ipv4Header::checksum_ok(h));
        self.ip_id = self.ip_id.wrapping_add(1);

        let esp = l3 + 20;
        d[esp..esp + 4].copy_from_slice(&sa.spi.to_be_bytes());
        d[esp + 4..esp + 8].copy_from_slice(&(seq as u32).to_be_bytes());
        let iv = seq.to_be_bytes();
        d[esp + 8..esp + 16].copy_from_slice(&iv);
        let body = esp + ESP_HEADER + IV;
        let icv = sa
            .cipher
            .seal(iv, &AadBytes::new(sa.spi, seq, sa.esn), &mut d[body..body + sealed]);
        d[body + sealed..].copy_from_slice(&icv);

        sa.seq = seq;
        sa.usage.add(inner);
        self.protected += 1;
        Ok(())
    }
}

/// Registers `esp-encrypt`.
pub const TYPE: crate::NfType = crate::NfType {
    kind: "esp-encrypt",
    about: "IPsec ESP tunnel mode, AES-GCM (RFC 4303/4106): SPD by selectors, sequence numbers and ESN, SA lifetimes",
    stateless: false,
    cost_neutral: &[],
    files: &[],
    wraps: None,
    schema: || schemars::schema_for!(EspEncryptConfig),
    drops_all_by_default: Some("no-policy"),
    fixes: &[(
        "no-policy",
        "no SA's `match` takes the traffic: give `sas` an SA (its `match` covering the traffic, or none for all) or list the traffic under `bypass` (examples/chains/ipsec.yaml)",
    )],
    build: |v| Ok(Box::new(EspEncrypt::new(&crate::typed(v)?)?)),
};

#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EspEncryptConfig {
    /// The outbound SAs, in SPD order: a packet goes to the first whose `match` takes it.
    #[serde(default)]
    pub sas: Vec<SaConfig>,
    /// Traffic sent in clear, checked before the SAs.
    #[serde(default)]
    pub bypass: Vec<MatchConfig>,
    /// The largest outer IPv4 datagram in bytes (default: what the packet buffer holds).
    pub mtu: Option<u16>,
    /// The AES-GCM implementation: `ipsec-mb` (Intel's, the default where the build has
    /// it) or `ring`.
    pub aead: Option<String>,
}

impl EspEncrypt {
    pub fn new(cfg: &EspEncryptConfig) -> Result<EspEncrypt, ConfigError> {
        sa::check_unique(&cfg.sas, "sas")?;
        let backend = sa::backend(cfg.aead.as_deref())?;
        let mut sas = Vec::with_capacity(cfg.sas.len());
        for (k, c) in cfg.sas.iter().enumerate() {
            let at = |field: &str| format!("sas[{k}].{field}");
            let tunnel = c
                .tunnel
                .ok_or_else(|| ConfigError::new(at("tunnel"), "an outbound SA needs its tunnel's src and dst"))?;
            if c.replay_window.is_some() {
                return Err(ConfigError::new(
                    at("replay_window"),
                    "the replay window is the receiver's: set it on esp-decrypt",
                ));
            }
            sas.push(OutboundSa {
                spi: c.spi.0,
                cipher: Cipher::new(&c.key, &at("key"), backend)?,
                tunnel,
                esn: c.esn,
                seq: 0,
                header_sum: [0x4500, u16::from(TTL) << 8 | u16::from(sa::PROTO_ESP)]
                    .into_iter()
                    .chain(tunnel.src.octets().chunks(2).map(|w| u16::from_be_bytes([w[0], w[1]])))
                    .chain(tunnel.dst.octets().chunks(2).map(|w| u16::from_be_bytes([w[0], w[1]])))
                    .map(u32::from)
                    .sum(),
                usage: Usage::new(c.spi.0, c.lifetime),
            });
        }
        let every = MatchConfig::default();
        let spd = Classifier::new(cfg.sas.iter().map(|s| s.selectors.as_ref().unwrap_or(&every)), |k| {
            format!("sas[{k}].match")
        })?;
        let bypass = Classifier::new(&cfg.bypass, |k| format!("bypass[{k}]"))?;
        let mtu = match cfg.mtu {
            Some(m) if usize::from(m) < FRONT + ICV + 4 + 20 => {
                return Err(ConfigError::new("mtu", format!("{m} bytes cannot carry an ESP packet")));
            }
            Some(m) => usize::from(m),
            None => usize::MAX,
        };
        Ok(EspEncrypt {
            bypass,
            spd,
            sas,
            mtu,
            ip_id: 0,
            protected: 0,
            bypassed: 0,
        })
    }

    /// The sequence number SA `spi` sent last, for tests and reports.
    pub fn last_seq(&self, spi: u32) -> Option<u64> {
        self.sas.iter().find(|s| s.spi == spi).map(|s| s.seq)
    }

    #[cfg(test)]
    pub(crate) fn set_seq_for_test(&mut self, spi: u32, seq: u64) {
        self.sas.iter_mut().filter(|s| s.spi == spi).for_each(|s| s.seq = seq);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{run_one_batch, udp_frame};
    use sfclab_core::Verdict;

    const KEY: &str = "0x4c80cdefbb5d10da906ac73c3613a634 2e443b68";

    fn encryptor(extra: serde_json::Value) -> EspEncrypt {
        let mut cfg = serde_json::json!({
            "sas": [{"spi": "0x1000", "key": KEY, "tunnel": {"src": "192.0.2.1", "dst": "192.0.2.2"}}]
        });
        cfg.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        EspEncrypt::new(&crate::typed(&cfg).unwrap()).unwrap()
    }

    #[test]
    fn frames_a_datagram_as_rfc_4303_tunnel_mode_lays_it_out() {
        let mut nf = encryptor(serde_json::json!({}));
        let mut frame = udp_frame();
        frame[15] = 0xb8 | 1; // DSCP EF, ECT(1): copied to the outer header
        let inner = frame[14..].to_vec();
        let (out, v) = run_one_batch(&mut nf, &[frame.clone(), frame]);
        assert_eq!(v, vec![Verdict::Continue; 2]);
        let f = &out[0];
        let pad = (4 - (inner.len() + 2) % 4) % 4;
        assert_eq!(f.len(), 14 + 20 + 8 + 8 + inner.len() + pad + 2 + 16);
        assert_eq!(&f[..12], &udp_frame()[..12], "MACs kept");
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        let h = &f[14..34];
        assert_eq!((h[0], h[1], h[8], h[9]), (0x45, 0xb9, 64, 50));
        assert_eq!(usize::from(u16::from_be_bytes([h[2], h[3]])), f.len() - 14);
        assert!(Ipv4Header::checksum_ok(h));
        assert_eq!(&h[12..20], &[192, 0, 2, 1, 192, 0, 2, 2]);
        assert_eq!(&f[34..38], &0x1000u32.to_be_bytes(), "SPI");
        assert_eq!(&f[38..42], &1u32.to_be_bytes(), "the first packet is number 1");
        assert_eq!(&f[42..50], &1u64.to_be_bytes(), "IV: the sequence number");
        assert_eq!(&out[1][38..42], &2u32.to_be_bytes());
        assert_ne!(&out[1][14 + 4..14 + 6], &f[14 + 4..14 + 6], "IP IDs differ");
        assert!(
            !f.windows(inner.len()).any(|w| w == &inner[..]),
            "the datagram is not in clear"
        );
        assert_eq!(nf.last_seq(0x1000), Some(2));
    }

    /// DPDK's librte_ipsec (around its AES-GCM PMD) and this NF, given one SA and one
    /// frame, make the same ESP packet byte for byte but the outer IPv4 ID (a counter
    /// here, the sequence number's low half there) and so its checksum.
    #[test]
    #[ignore = "needs a C compiler, pkg-config and libdpdk-dev (CI installs them)"]
    fn seals_as_dpdks_librte_ipsec_does_when_installed() {
        let theirs = sfclab_peers::dpdk_ipsec::esp_outbound(0, &[64], 32, &|| false).unwrap();
        let mut nf = encryptor(serde_json::json!({}));
        let (out, v) = run_one_batch(&mut nf, std::slice::from_ref(&theirs.first_frame));
        assert_eq!(v, vec![Verdict::Continue]);
        let (ours, theirs) = (&out[0], &theirs.first_packet);
        assert_eq!(ours.len(), theirs.len());
        assert_eq!(ours[..18], theirs[..18], "MACs, type, outer version, DSCP and length");
        assert_eq!(ours[20..24], theirs[20..24], "fragment field, TTL, protocol");
        assert_eq!(
            ours[26..],
            theirs[26..],
            "addresses, SPI, sequence, IV, ciphertext, ICV"
        );
        assert!(Ipv4Header::checksum_ok(&ours[14..34]));
        assert!(Ipv4Header::checksum_ok(&theirs[14..34]));
    }

    #[test]
    fn the_spd_picks_the_first_sa_that_matches_bypasses_and_discards_the_rest() {
        let cfg = serde_json::json!({
            "sas": [
                {"spi": 0x2000, "key": KEY, "tunnel": {"src": "192.0.2.1", "dst": "192.0.2.2"}, "match": {"dport": "53"}},
                {"spi": 0x3000, "key": KEY, "tunnel": {"src": "192.0.2.1", "dst": "192.0.2.3"}, "match": {"proto": "udp"}}
            ],
            "bypass": [{"dport": "22"}]
        });
        let mut nf = EspEncrypt::new(&crate::typed(&cfg).unwrap()).unwrap();
        let with_dport = |port: u16, proto: u8| {
            let mut f = udp_frame();
            f[23] = proto;
            f[36..38].copy_from_slice(&port.to_be_bytes());
            Ipv4Header::fill_checksum(&mut f[14..34]);
            f
        };
        let frames = [
            with_dport(53, 17),
            with_dport(1024, 17),
            with_dport(22, 17),
            with_dport(80, 6),
        ];
        let (out, v) = run_one_batch(&mut nf, &frames);
        assert_eq!(&out[0][34..38], &0x2000u32.to_be_bytes());
        assert_eq!(&out[1][34..38], &0x3000u32.to_be_bytes());
        assert_eq!(out[2], frames[2], "bypassed in clear");
        assert_eq!(v[..3], [Verdict::Continue; 3]);
        assert_eq!(v[3], Verdict::Drop(NO_POLICY));
        let (packets, protected) = (nf.counters(), nf.protected);
        assert_eq!(protected, 2);
        assert!(packets.iter().any(|c| c.name == "sa2000_packets" && c.value == 1));
    }

    #[test]
    fn lifetimes_and_the_sequence_space_end_an_sa() {
        let mut nf = encryptor(serde_json::json!({}));
        nf.sas[0].usage = Usage::new(
            0x1000,
            Some(sa::Lifetime {
                packets: Some(2),
                bytes: None,
            }),
        );
        let (_, v) = run_one_batch(&mut nf, &[udp_frame(), udp_frame(), udp_frame()]);
        assert_eq!(v[2], Verdict::Drop(SA_EXPIRED));
        let mut nf = encryptor(serde_json::json!({}));
        nf.sas[0].seq = u64::from(u32::MAX) - 1;
        let (_, v) = run_one_batch(&mut nf, &[udp_frame(), udp_frame()]);
        assert_eq!(
            v,
            vec![Verdict::Continue, Verdict::Drop(SEQ_OVERFLOW)],
            "no ESN: 2^32 - 1 packets at most"
        );
        let mut nf = encryptor(serde_json::json!({}));
        nf.sas[0].esn = true;
        nf.sas[0].seq = u64::from(u32::MAX);
        let (out, v) = run_one_batch(&mut nf, &[udp_frame()]);
        assert_eq!(v, vec![Verdict::Continue], "ESN goes on past 2^32");
        assert_eq!(&out[0][38..42], &0u32.to_be_bytes(), "low half sent");
        assert_eq!(&out[0][42..50], &(1u64 << 32).to_be_bytes(), "IV: the full number");
    }

    #[test]
    fn the_mtu_bounds_the_outer_datagram_and_config_errors_name_the_key() {
        let mut nf = encryptor(serde_json::json!({"mtu": 99}));
        let (_, v) = run_one_batch(&mut nf, &[udp_frame()]);
        assert_eq!(v, vec![Verdict::Drop(TOO_BIG)], "46 + 54 > 99");
        let err = |cfg: serde_json::Value| EspEncrypt::new(&crate::typed(&cfg).unwrap()).err().unwrap();
        let e = err(serde_json::json!({"sas": [{"spi": 300, "key": KEY}]}));
        assert_eq!(e.key, "sas[0].tunnel");
        let e = err(
            serde_json::json!({"sas": [{"spi": 300, "key": "0x11", "tunnel": {"src": "1.1.1.1", "dst": "2.2.2.2"}}]}),
        );
        assert_eq!(e.key, "sas[0].key");
        let e = err(serde_json::json!({"sas": [
            {"spi": 300, "key": KEY, "tunnel": {"src": "1.1.1.1", "dst": "2.2.2.2"}},
            {"spi": 300, "key": KEY, "tunnel": {"src": "1.1.1.1", "dst": "2.2.2.2"}}]}));
        assert_eq!(e.key, "sas[1].spi");
        let e = err(
            serde_json::json!({"sas": [{"spi": 300, "key": KEY, "tunnel": {"src": "1.1.1.1", "dst": "2.2.2.2"}, "replay_window": 64}]}),
        );
        assert_eq!(e.key, "sas[0].replay_window");
    }
}
