//! `esp-decrypt`: the inbound half of an IPsec ESP tunnel (RFC 4303, AES-GCM by RFC 4106).
//!
//! An IPv4 packet of protocol 50 is matched to its SA by SPI (and the outer destination
//! and source, where the SA names its `tunnel`). Its sequence number (with ESN, the full
//! 64 bits reconstructed as RFC 4303 Appendix A2 does) is checked against the replay
//! window before decryption and moves the window only once the ICV verified (§3.4.3);
//! then the padding is checked (bytes 1, 2, 3, ...), dummy packets (next header 59,
//! §2.6) are discarded, and the inner IPv4 or IPv6 datagram replaces the outer one
//! behind the frame's link header (its type set to match). ECN is decapsulated by RFC
//! 6040: a CE mark outside is kept inside, and a CE mark over a not-ECT packet drops it.
//! The decrypted packet must be one its SA's `match` takes (RFC 4301 §5.2).
//! Packets that are not ESP pass only when `bypass` takes them (`not-esp`).
//! Outer fragments are dropped (`outer-fragment`: reassembly is not done here).
//!
//! Keys: `sas` (each: `spi`, `key`, `tunnel`, `esn`, `match`, `lifetime`, `replay_window`),
//! `bypass`. Counters: `decrypted`, `bypassed`, per SA `sa<spi>_packets` and
//! `sa<spi>_bytes` (inner datagrams). Drops: `malformed` (also bad padding or an inner
//! length past the payload), `unsupported` (next header neither IPv4 nor IPv6), and its
//! own `not-esp`, `unknown-spi`, `replay`, `auth-failed`, `sa-expired`,
//! `policy-mismatch`, `dummy`, `ecn-ce-not-ect`, `outer-fragment`.

use hashbrown::HashMap;
use serde::{Deserialize, Serialize};
use sfclab_core::{BatchView, Context, DropReason, NetworkFunction, NfCounter, Packet, Verdicts};

use super::replay::ReplayWindow;
use super::sa::{self, AadBytes, Cipher, ESP_HEADER, ICV, IV, SaConfig, TRAILER, Tunnel, Usage};
use crate::ConfigError;
use crate::classes::{self, Classifier, MatchConfig};
use crate::frame;

const DROP_REASONS: &[&str] = &[
    "not-esp",
    "unknown-spi",
    "replay",
    "auth-failed",
    "sa-expired",
    "policy-mismatch",
    "dummy",
    "ecn-ce-not-ect",
    "outer-fragment",
];
const NOT_ESP: DropReason = DropReason::named(DROP_REASONS, "not-esp");
const UNKNOWN_SPI: DropReason = DropReason::named(DROP_REASONS, "unknown-spi");
const REPLAY: DropReason = DropReason::named(DROP_REASONS, "replay");
const AUTH_FAILED: DropReason = DropReason::named(DROP_REASONS, "auth-failed");
const SA_EXPIRED: DropReason = DropReason::named(DROP_REASONS, "sa-expired");
const POLICY_MISMATCH: DropReason = DropReason::named(DROP_REASONS, "policy-mismatch");
const DUMMY: DropReason = DropReason::named(DROP_REASONS, "dummy");
const ECN_CE_NOT_ECT: DropReason = DropReason::named(DROP_REASONS, "ecn-ce-not-ect");
const OUTER_FRAGMENT: DropReason = DropReason::named(DROP_REASONS, "outer-fragment");

/// The smallest ESP payload: header, IV, the trailer and the ICV.
const MIN_ESP: usize = ESP_HEADER + IV + TRAILER + ICV;
const ECN_CE: u8 = 3;

struct InboundSa {
    spi: u32,
    cipher: Cipher,
    tunnel: Option<Tunnel>,
    esn: bool,
    /// With ESN it also gives a packet's high half, from the highest number accepted.
    window: ReplayWindow,
    /// False for `replay_window: 0`: the check is off, the window still tracks the top.
    check_replay: bool,
    selectors: Option<Classifier>,
    usage: Usage,
}

pub struct EspDecrypt {
    bypass: Classifier,
    sas: Vec<InboundSa>,
    /// (SPI, outer destination or 0 for an SA with no tunnel) to the SA's index.
    by_spi: HashMap<(u32, u32), usize>,
    decrypted: u64,
    bypassed: u64,
}

impl NetworkFunction for EspDecrypt {
    fn kind(&self) -> &'static str {
        TYPE.kind
    }

    fn drop_reasons(&self) -> &'static [&'static str] {
        DROP_REASONS
    }

    fn process(&mut self, _ctx: &mut Context<'_>, mut batch: BatchView<'_>, verdicts: &mut Verdicts) {
        for (i, p) in batch.iter_mut().enumerate() {
            if let Err(reason) = self.inbound(p) {
                verdicts.drop(i, reason);
            }
        }
    }

    fn counters(&self) -> Vec<NfCounter> {
        let mut out = vec![
            NfCounter::total("decrypted", self.decrypted),
            NfCounter::total("bypassed", self.bypassed),
        ];
        out.extend(self.sas.iter().flat_map(|sa| sa.usage.counters()));
        out
    }
}

impl EspDecrypt {
    #[inline]
    fn inbound(&mut self, p: &mut Packet) -> Result<(), DropReason> {
        let at = match frame::ipv4(p) {
            Ok(at) if at.protocol == sa::PROTO_ESP => at,
            Ok(_) | Err(DropReason::UNSUPPORTED) => return self.clear(p),
            Err(reason) => return Err(reason),
        };
        if at.fragment {
            return Err(OUTER_FRAGMENT);
        }
        let esp = at.l4.ok_or(DropReason::MALFORMED)?;
        if at.end < esp + MIN_ESP {
            return Err(DropReason::MALFORMED);
        }
        let d = p.data();
        let word = |o: usize| u32::from_be_bytes([d[o], d[o + 1], d[o + 2], d[o + 3]]);
        let (src, dst, spi, low) = (word(at.l3 + 12), word(at.l3 + 16), word(esp), word(esp + 4));
        let tos = d[at.l3 + 1];
        let k = *self
            .by_spi
            .get(&(spi, dst))
            .or_else(|| self.by_spi.get(&(spi, 0)))
            .ok_or(UNKNOWN_SPI)?;
        let sa = &mut self.sas[k];
        if sa.tunnel.is_some_and(|t| u32::from(t.src) != src) {
            return Err(UNKNOWN_SPI);
        }
        let seq = sa.window.full(low);
        if sa.check_replay {
            sa.window.check(seq).map_err(|_| REPLAY)?;
        }
        if !sa.usage.packet_allowed() {
            return Err(SA_EXPIRED);
        }
        let iv: [u8; IV] = d[esp + ESP_HEADER..esp + ESP_HEADER + IV].try_into().expect("8 bytes");
        let body = esp + ESP_HEADER + IV;
        let aad = AadBytes::new(spi, seq, sa.esn);
        if !sa.cipher.open(iv, &aad, &mut p.data_mut()[body..at.end]) {
            return Err(AUTH_FAILED);
        }
        // Authentic from here: the window moves even if what is inside is refused.
        sa.window.accept(seq);

        let d = p.data_mut();
        let plain = &d[body..at.end - ICV];
        let (pad, next) = (usize::from(plain[plain.len() - 2]), plain[plain.len() - 1]);
        let Some(inner) = plain.len().checked_sub(pad + TRAILER) else {
            return Err(DropReason::MALFORMED);
        };
        if plain[inner..inner + pad]
            .iter()
            .enumerate()
            .any(|(j, &b)| usize::from(b) != j + 1)
        {
            return Err(DropReason::MALFORMED);
        }
        let (v6, inner_len) = match next {
            sa::NEXT_IPV4 if inner >= 20 && plain[0] >> 4 == 4 => {
                (false, usize::from(u16::from_be_bytes([plain[2], plain[3]])))
            }
            sa::NEXT_IPV6 if inner >= 40 && plain[0] >> 4 == 6 => {
                (true, 40 + usize::from(u16::from_be_bytes([plain[4], plain[5]])))
            }
            sa::NEXT_IPV4 | sa::NEXT_IPV6 => return Err(DropReason::MALFORMED),
            sa::NEXT_DUMMY => return Err(DUMMY),
            _ => return Err(DropReason::UNSUPPORTED),
        };
        // What follows the datagram inside, up to the padding, is TFC padding (§2.4).
        if inner_len > inner {
            return Err(DropReason::MALFORMED);
        }
        if !sa.usage.allows(inner_len) {
            return Err(SA_EXPIRED);
        }
        if tos & 3 == ECN_CE {
            decapsulate_ce(&mut d[body..body + inner_len], v6)?;
        }

        // The link header moves up to sit in front of the inner datagram.
        let l3 = at.l3;
        d.copy_within(0..l3, body - l3);
        d[body - 2..body].copy_from_slice(&if v6 { 0x86ddu16 } else { 0x0800 }.to_be_bytes());
        p.adjust_front(body - l3).expect("inside the frame");
        p.truncate(l3 + inner_len);

        if let Some(selectors) = &sa.selectors {
            match classes::ip_facts(p) {
                Ok(Some(ip)) if selectors.classify(&ip).is_some() => {}
                Ok(_) => return Err(POLICY_MISMATCH),
                Err(reason) => return Err(reason),
            }
        }
        sa.usage.add(inner_len);
        self.decrypted += 1;
        Ok(())
    }

    /// A packet that is not ESP: passed if `bypass` takes it.
    fn clear(&mut self, p: &mut Packet) -> Result<(), DropReason> {
        match classes::ip_facts(p)? {
            Some(ip) if self.bypass.classify(&ip).is_some() => {
                self.bypassed += 1;
                Ok(())
            }
            _ => Err(NOT_ESP),
        }
    }
}

/// RFC 6040 §4.2 for an outer CE mark: an ECN-capable inner datagram is marked CE (the
/// IPv4 checksum updated), a not-ECT one is dropped.
fn decapsulate_ce(datagram: &mut [u8], v6: bool) -> Result<(), DropReason> {
    let tc = classes::traffic_class(datagram, 0, v6);
    if tc & 3 == 0 {
        return Err(ECN_CE_NOT_ECT);
    }
    classes::set_traffic_class(datagram, 0, v6, tc | ECN_CE);
    Ok(())
}

/// Registers `esp-decrypt`.
pub const TYPE: crate::NfType = crate::NfType {
    kind: "esp-decrypt",
    about: "IPsec ESP tunnel mode, AES-GCM (RFC 4303/4106), inbound: SA by SPI, anti-replay window with ESN, inner policy check",
    stateless: false,
    cost_neutral: &[],
    files: &[],
    wraps: None,
    schema: || schemars::schema_for!(EspDecryptConfig),
    drops_all_by_default: Some("not-esp"),
    fixes: &[
        (
            "not-esp",
            "the traffic is not ESP: put esp-encrypt before this NF, or list clear traffic under `bypass` (examples/chains/ipsec.yaml)",
        ),
        (
            "unknown-spi",
            "no SA has the packets' SPI (and tunnel): give `sas` the SPI esp-encrypt or the peer uses",
        ),
        (
            "auth-failed",
            "the ICV does not verify: the SA's `key` (with its salt) or `esn` differs from the sender's",
        ),
    ],
    build: |v| Ok(Box::new(EspDecrypt::new(&crate::typed(v)?)?)),
};

#[derive(Debug, Clone, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EspDecryptConfig {
    /// The inbound SAs.
    #[serde(default)]
    pub sas: Vec<SaConfig>,
    /// Traffic that may arrive in clear (not ESP).
    #[serde(default)]
    pub bypass: Vec<MatchConfig>,
    /// The AES-GCM implementation: `ipsec-mb` (Intel's, the default where the build has
    /// it) or `ring`.
    pub aead: Option<String>,
}

impl EspDecrypt {
    pub fn new(cfg: &EspDecryptConfig) -> Result<EspDecrypt, ConfigError> {
        sa::check_unique(&cfg.sas, "sas")?;
        let backend = sa::backend(cfg.aead.as_deref())?;
        let mut sas = Vec::with_capacity(cfg.sas.len());
        let mut by_spi = HashMap::with_capacity(cfg.sas.len());
        for (k, c) in cfg.sas.iter().enumerate() {
            let at = |field: &str| format!("sas[{k}].{field}");
            let selectors = c
                .selectors
                .as_ref()
                .map(|m| Classifier::new([m], |_| at("match")))
                .transpose()?;
            let size = c.replay_window.unwrap_or(64);
            if size > MAX_WINDOW {
                return Err(ConfigError::new(
                    at("replay_window"),
                    format!("{size} packets is past the largest window, {MAX_WINDOW}"),
                ));
            }
            by_spi.insert((c.spi.0, c.tunnel.map_or(0, |t| u32::from(t.dst))), k);
            sas.push(InboundSa {
                spi: c.spi.0,
                cipher: Cipher::new(&c.key, &at("key"), backend)?,
                tunnel: c.tunnel,
                esn: c.esn,
                window: ReplayWindow::new(size, c.esn),
                check_replay: size > 0,
                selectors,
                usage: Usage::new(c.spi.0, c.lifetime),
            });
        }
        Ok(EspDecrypt {
            bypass: Classifier::new(&cfg.bypass, |k| format!("bypass[{k}]"))?,
            sas,
            by_spi,
            decrypted: 0,
            bypassed: 0,
        })
    }

    /// The highest sequence number SA `spi` accepted.
    pub fn top_seq(&self, spi: u32) -> Option<u64> {
        self.sas.iter().find(|s| s.spi == spi).map(|s| s.window.top())
    }
}

/// The largest replay window: 64 Ki packets (Linux allows 4096; VPP 1024).
const MAX_WINDOW: u32 = 1 << 16;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipsec::encrypt::{EspEncrypt, EspEncryptConfig};
    use crate::testutil::{run_one_batch, udp_frame};
    use sfclab_core::Verdict;
    use sfclab_wire::Ipv4Header;

    const KEY: &str = "0x4c80cdefbb5d10da906ac73c3613a634 2e443b68";
    const SPI: u32 = 0x1000;

    fn sa(extra: serde_json::Value) -> serde_json::Value {
        let mut sa = serde_json::json!({"spi": SPI, "key": KEY, "tunnel": {"src": "192.0.2.1", "dst": "192.0.2.2"}});
        sa.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        sa
    }

    fn encryptor(extra: serde_json::Value) -> EspEncrypt {
        let cfg: EspEncryptConfig = crate::typed(&serde_json::json!({"sas": [sa(extra)]})).unwrap();
        EspEncrypt::new(&cfg).unwrap()
    }

    fn decryptor(cfg: serde_json::Value) -> EspDecrypt {
        EspDecrypt::new(&crate::typed(&cfg).unwrap()).unwrap()
    }

    fn decryptor_of(extra: serde_json::Value) -> EspDecrypt {
        decryptor(serde_json::json!({"sas": [sa(extra)]}))
    }

    fn encrypt(nf: &mut EspEncrypt, frames: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let (out, v) = run_one_batch(nf, frames);
        assert!(v.iter().all(|v| *v == Verdict::Continue), "{v:?}");
        out
    }

    /// An ESP frame under SA `SPI` built here from parts, for what esp-encrypt never
    /// sends (bad padding, dummy packets).
    fn handmade(seq: u32, mut plain: Vec<u8>) -> Vec<u8> {
        let cipher = Cipher::new(KEY, "key", None).unwrap();
        let iv = u64::from(seq).to_be_bytes();
        let icv = cipher.seal(iv, &AadBytes::new(SPI, u64::from(seq), false), &mut plain);
        let mut esp = [&SPI.to_be_bytes()[..], &seq.to_be_bytes(), &iv, &plain, &icv].concat();
        let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0, 0, 64, 50, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2];
        ip[2..4].copy_from_slice(&((20 + esp.len()) as u16).to_be_bytes());
        Ipv4Header::fill_checksum(&mut ip);
        let mut f = udp_frame()[..14].to_vec();
        f.append(&mut ip);
        f.append(&mut esp);
        f
    }

    fn ipv6_frame() -> Vec<u8> {
        let mut out = Vec::new();
        etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 0xaa], [2, 0, 0, 0, 0, 0xbb])
            .ipv6(
                [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
                64,
            )
            .udp(1024, 1024)
            .write(&mut out, &[7u8; 33])
            .unwrap();
        out
    }

    fn vlan_frame() -> Vec<u8> {
        let f = udp_frame();
        [&f[..12], &[0x81, 0x00, 0x00, 0x64], &f[12..]].concat()
    }

    #[test]
    fn what_esp_encrypt_sends_comes_out_as_it_went_in() {
        let mut padded = udp_frame();
        padded.extend_from_slice(&[0xee; 4]); // Ethernet padding: not part of the datagram
        let frames = vec![udp_frame(), vlan_frame(), ipv6_frame(), padded];
        let sealed = encrypt(&mut encryptor(serde_json::json!({})), &frames);
        let mut nf = decryptor_of(serde_json::json!({}));
        let (out, v) = run_one_batch(&mut nf, &sealed);
        assert_eq!(v, vec![Verdict::Continue; 4]);
        assert_eq!(out[..3], frames[..3]);
        assert_eq!(out[3], udp_frame());
        assert_eq!((nf.decrypted, nf.top_seq(SPI)), (4, Some(4)));
        let c = nf.counters();
        let bytes = 46 + 46 + (40 + 8 + 33) + 46; // inner datagrams, no link header or padding
        assert!(
            c.iter().any(|c| c.name == "sa1000_bytes" && c.value == bytes as u64),
            "{c:?}"
        );
    }

    /// In a batch that mixes two SAs, drops and bypasses, each packet esp-encrypt keeps
    /// is sealed with its own SA and sequence number, and comes out as it went in.
    #[test]
    fn a_batch_of_two_sas_drops_and_bypasses_is_sealed_packet_by_packet() {
        let sas = serde_json::json!([
            {"spi": SPI, "key": KEY, "tunnel": {"src": "192.0.2.1", "dst": "192.0.2.2"}, "match": {"dport": "53"}},
            {"spi": 0x3000, "key": "0x000102030405060708090a0b0c0d0e0f 10111213", "tunnel": {"src": "192.0.2.1", "dst": "192.0.2.2"}, "match": {"proto": "udp"}}
        ]);
        let cfg: EspEncryptConfig =
            crate::typed(&serde_json::json!({"sas": sas, "bypass": [{"dport": "22"}]})).unwrap();
        let mut enc = EspEncrypt::new(&cfg).unwrap();
        let frame = |port: u16, proto: u8, fill: u8| {
            let mut f = udp_frame();
            f[23] = proto;
            f[36..38].copy_from_slice(&port.to_be_bytes());
            f[42..].fill(fill);
            Ipv4Header::fill_checksum(&mut f[14..34]);
            f
        };
        let frames: Vec<Vec<u8>> = (0..40u8)
            .map(|k| match k % 5 {
                0 => frame(53, 17, k),
                1 => frame(80, 6, k),
                2 => frame(1024, 17, k),
                3 => frame(22, 17, k),
                _ => frame(53, 17, k),
            })
            .collect();
        let (sealed, v) = run_one_batch(&mut enc, &frames);
        let kept: Vec<usize> = (0..frames.len()).filter(|k| k % 5 != 1 && k % 5 != 3).collect();
        assert_eq!(v.iter().filter(|v| **v == Verdict::Continue).count(), 32);
        assert_eq!(sealed[3], frames[3], "bypassed in clear");
        let mut dec = decryptor(serde_json::json!({"sas": sas}));
        let esp: Vec<Vec<u8>> = kept.iter().map(|&k| sealed[k].clone()).collect();
        let (out, v) = run_one_batch(&mut dec, &esp);
        assert_eq!(v, vec![Verdict::Continue; kept.len()]);
        for (o, &k) in out.iter().zip(&kept) {
            assert_eq!(o, &frames[k], "packet {k}");
        }
        assert_eq!((dec.top_seq(SPI), dec.top_seq(0x3000)), (Some(16), Some(8)));
    }

    #[test]
    fn the_replay_window_refuses_repeats_and_the_too_old_but_takes_late_ones_inside_it() {
        let mut enc = encryptor(serde_json::json!({}));
        let sealed = encrypt(&mut enc, &vec![udp_frame(); 200]);
        let mut nf = decryptor_of(serde_json::json!({"replay_window": 64}));
        // 1..=100 in order, then 100 again and 40 (too old); 150 skipped and sent after
        // 200 (late, inside the window: taken), then once more (a repeat).
        let order: Vec<usize> = (0..100)
            .chain([99, 39])
            .chain(100..149)
            .chain(150..200)
            .chain([149, 149])
            .collect();
        let frames: Vec<Vec<u8>> = order.iter().map(|&k| sealed[k].clone()).collect();
        let (_, v) = run_one_batch(&mut nf, &frames);
        let drops: Vec<(usize, Verdict)> = v
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, v)| *v != Verdict::Continue)
            .collect();
        assert_eq!(
            drops,
            vec![
                (100, Verdict::Drop(REPLAY)),
                (101, Verdict::Drop(REPLAY)),
                (202, Verdict::Drop(REPLAY))
            ]
        );
        assert_eq!(nf.decrypted, 200);
        // Off: repeats pass.
        let mut nf = decryptor_of(serde_json::json!({"replay_window": 0}));
        let (_, v) = run_one_batch(&mut nf, &[sealed[0].clone(), sealed[0].clone()]);
        assert_eq!(v, vec![Verdict::Continue; 2]);
    }

    #[test]
    fn a_forged_packet_is_refused_and_does_not_move_the_window() {
        let sealed = encrypt(&mut encryptor(serde_json::json!({})), &[udp_frame(), udp_frame()]);
        let mut nf = decryptor_of(serde_json::json!({}));
        let mut forged = sealed[1].clone();
        forged[60] ^= 1;
        let mut seq_changed = sealed[0].clone();
        seq_changed[41] = 9; // the AAD covers the sequence number
        let (_, v) = run_one_batch(&mut nf, &[forged, seq_changed, sealed[1].clone(), sealed[0].clone()]);
        assert_eq!(
            v,
            vec![
                Verdict::Drop(AUTH_FAILED),
                Verdict::Drop(AUTH_FAILED),
                Verdict::Continue,
                Verdict::Continue
            ]
        );
        let wrong_key = "0x4c80cdefbb5d10da906ac73c3613a634 2e443b69"; // salt differs
        let mut nf = decryptor_of(serde_json::json!({"key": wrong_key}));
        assert_eq!(run_one_batch(&mut nf, &sealed[..1]).1, vec![Verdict::Drop(AUTH_FAILED)]);
    }

    #[test]
    fn extended_sequence_numbers_carry_across_2_to_the_32() {
        let mut enc = encryptor(serde_json::json!({"esn": true}));
        let mut dec = decryptor_of(serde_json::json!({"esn": true}));
        let first = encrypt(&mut enc, &[udp_frame()]);
        assert_eq!(run_one_batch(&mut dec, &first).1, vec![Verdict::Continue]);
        // Both sides far along, as after 2^32 - 3 packets.
        enc.set_seq_for_test(SPI, u64::from(u32::MAX) - 2);
        dec.sas[0].window.accept(u64::from(u32::MAX) - 2);
        let sealed = encrypt(&mut enc, &vec![udp_frame(); 5]);
        let (_, v) = run_one_batch(&mut dec, &sealed);
        assert_eq!(v, vec![Verdict::Continue; 5]);
        assert_eq!(dec.top_seq(SPI), Some((1u64 << 32) + 2));
        // A receiver without ESN authenticates another AAD: nothing verifies.
        let mut plain = decryptor_of(serde_json::json!({}));
        plain.sas[0].window.accept(u64::from(u32::MAX) - 2);
        assert_eq!(
            run_one_batch(&mut plain, &sealed[..1]).1,
            vec![Verdict::Drop(AUTH_FAILED)]
        );
    }

    #[test]
    fn sas_are_found_by_spi_and_tunnel_and_clear_traffic_only_by_bypass() {
        let sealed = encrypt(&mut encryptor(serde_json::json!({})), &[udp_frame()]);
        let mut other_src = sealed[0].clone();
        other_src[14 + 15] = 9;
        Ipv4Header::fill_checksum(&mut other_src[14..34]);
        let mut nf = decryptor(serde_json::json!({"sas": [sa(serde_json::json!({"spi": 0x1001}))]}));
        assert_eq!(run_one_batch(&mut nf, &sealed).1, vec![Verdict::Drop(UNKNOWN_SPI)]);
        let mut nf = decryptor_of(serde_json::json!({}));
        let (_, v) = run_one_batch(&mut nf, &[other_src, udp_frame(), vec![0xff; 60]]);
        assert_eq!(
            v,
            vec![
                Verdict::Drop(UNKNOWN_SPI),
                Verdict::Drop(NOT_ESP),
                Verdict::Drop(NOT_ESP)
            ]
        );
        let mut nf = decryptor(
            serde_json::json!({"sas": [sa(serde_json::json!({"tunnel": null}))], "bypass": [{"proto": "udp"}]}),
        );
        let (_, v) = run_one_batch(&mut nf, &[sealed[0].clone(), udp_frame()]);
        assert_eq!(
            v,
            vec![Verdict::Continue; 2],
            "no tunnel: any outer address; UDP in clear bypasses"
        );
        assert_eq!(nf.bypassed, 1);
    }

    #[test]
    fn the_inner_packet_must_be_one_its_sa_carries() {
        let sealed = encrypt(&mut encryptor(serde_json::json!({})), &[udp_frame()]);
        let mut nf = decryptor_of(serde_json::json!({"match": {"dst": "198.19.0.0/16"}}));
        assert_eq!(run_one_batch(&mut nf, &sealed).1, vec![Verdict::Continue]);
        let sealed = encrypt(&mut encryptor(serde_json::json!({})), &[udp_frame()]);
        let mut nf = decryptor_of(serde_json::json!({"match": {"dst": "10.0.0.0/8"}}));
        assert_eq!(run_one_batch(&mut nf, &sealed).1, vec![Verdict::Drop(POLICY_MISMATCH)]);
    }

    #[test]
    fn padding_next_header_and_lengths_are_checked_after_decryption() {
        let inner = udp_frame()[14..].to_vec(); // 46 bytes: 0 pad to reach 48
        let with = |pad: &[u8], next: u8| [&inner[..], pad, &[pad.len() as u8, next]].concat();
        let mut nf = decryptor_of(serde_json::json!({"tunnel": null}));
        let frames = [
            handmade(1, with(&[], 4)),
            handmade(2, with(&[1, 2, 3, 4], 4)),
            handmade(3, with(&[1, 2, 9, 4], 4)),
            handmade(4, with(&[], 59)),
            handmade(5, with(&[], 17)),
            handmade(6, [&inner[..20], &[0, 4]].concat()), // IPv4 says 46 bytes, 20 inside
            handmade(7, vec![3, 4]),                       // pad length past the payload
            handmade(8, [&inner[..], &[0xee; 6], &[0, 4]].concat()), // TFC padding: fine
        ];
        let (out, v) = run_one_batch(&mut nf, &frames);
        use DropReason as R;
        assert_eq!(
            v,
            vec![
                Verdict::Continue,
                Verdict::Continue,
                Verdict::Drop(R::MALFORMED),
                Verdict::Drop(DUMMY),
                Verdict::Drop(R::UNSUPPORTED),
                Verdict::Drop(R::MALFORMED),
                Verdict::Drop(R::MALFORMED),
                Verdict::Continue
            ]
        );
        assert_eq!(out[7], udp_frame(), "TFC padding cut");
        // Short, truncated and fragmented ESP.
        let mut frag = frames[0].clone();
        frag[14 + 6] = 0x20; // more fragments
        Ipv4Header::fill_checksum(&mut frag[14..34]);
        let mut short = frames[0][..14 + 20 + 20].to_vec();
        short[14 + 3] = 40;
        Ipv4Header::fill_checksum(&mut short[14..34]);
        let (_, v) = run_one_batch(&mut nf, &[frag, short, frames[0][..40].to_vec()]);
        assert_eq!(
            v,
            vec![
                Verdict::Drop(OUTER_FRAGMENT),
                Verdict::Drop(R::MALFORMED),
                Verdict::Drop(R::MALFORMED)
            ]
        );
    }

    #[test]
    fn congestion_marks_outside_reach_the_inner_packet_by_rfc_6040() {
        let mut ect = udp_frame();
        ect[15] = 0x02; // ECT(0)
        Ipv4Header::fill_checksum(&mut ect[14..34]);
        let mut sealed = encrypt(&mut encryptor(serde_json::json!({})), &[ect.clone(), udp_frame()]);
        for f in &mut sealed {
            f[15] |= 3; // CE on the way (the outer header is not authenticated)
            Ipv4Header::fill_checksum(&mut f[14..34]);
        }
        let (out, v) = run_one_batch(&mut decryptor_of(serde_json::json!({})), &sealed);
        assert_eq!(v, vec![Verdict::Continue, Verdict::Drop(ECN_CE_NOT_ECT)]);
        assert_eq!(out[0][15], 0x03);
        assert!(Ipv4Header::checksum_ok(&out[0][14..34]));
    }

    #[test]
    fn hard_lifetimes_stop_an_inbound_sa() {
        let sealed = encrypt(&mut encryptor(serde_json::json!({})), &vec![udp_frame(); 3]);
        let mut nf = decryptor_of(serde_json::json!({"lifetime": {"packets": 2}}));
        assert_eq!(run_one_batch(&mut nf, &sealed).1[2], Verdict::Drop(SA_EXPIRED));
        let mut nf = decryptor_of(serde_json::json!({"lifetime": {"bytes": 92}}));
        assert_eq!(
            run_one_batch(&mut nf, &sealed).1,
            vec![Verdict::Continue, Verdict::Continue, Verdict::Drop(SA_EXPIRED)]
        );
    }
}
