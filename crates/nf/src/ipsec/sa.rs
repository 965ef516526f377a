//! A security association as both ESP NFs configure it (RFC 4301 §4.4.2): its SPI, its
//! AES-GCM key and salt (RFC 4106), tunnel endpoints, extended sequence numbers, the
//! selectors of the traffic it carries and its lifetime; and the per-packet pieces of
//! RFC 4106 both directions share (nonce, additional authenticated data).

use std::net::Ipv4Addr;

use serde::{Deserialize, Serialize};
use sfclab_aead::AesGcm;

use crate::ConfigError;
use crate::classes::MatchConfig;

/// ESP header: SPI and the sequence number's low 32 bits.
pub const ESP_HEADER: usize = 8;
/// The explicit IV of RFC 4106: 8 bytes, here the SA's 64-bit sequence number (unique
/// per key, as §3.1 requires; Linux's `seqiv` does the same).
pub const IV: usize = 8;
/// Integrity check value: the full 16-byte GCM tag (RFC 4106 also allows 8 or 12; the
/// crypto crates verify full tags only).
pub const ICV: usize = 16;
/// ESP's trailer after the padding: pad length and next header.
pub const TRAILER: usize = 2;
/// IP protocol number of ESP.
pub const PROTO_ESP: u8 = 50;
/// Next header values of the inner datagram (tunnel mode) and of a dummy packet
/// (RFC 4303 §2.6: traffic flow confidentiality padding, discarded by the receiver).
pub const NEXT_IPV4: u8 = 4;
pub const NEXT_IPV6: u8 = 41;
pub const NEXT_DUMMY: u8 = 59;

/// One SA, as written in an ESP NF's `sas` list.
#[derive(Debug, Clone, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SaConfig {
    /// Security parameter index: a number or `0x` hex (256 and above; below is reserved).
    pub spi: Spi,
    /// The AES key then the 4-byte salt, in hex (`0x` optional): 20 bytes for
    /// AES-128-GCM, 36 for AES-256-GCM, exactly as `ip xfrm state ... aead
    /// 'rfc4106(gcm(aes))' KEY 128` takes it.
    pub key: String,
    /// Outer IPv4 source and destination. esp-encrypt writes them; esp-decrypt, where
    /// given, takes only packets sent to `dst` from `src` under this SPI.
    pub tunnel: Option<Tunnel>,
    /// 64-bit extended sequence numbers (RFC 4303 §2.2.1): the high half is never sent
    /// and is covered by the ICV (default false).
    #[serde(default)]
    pub esn: bool,
    /// Which inner packets the SA carries (RFC 4301 selectors): esp-encrypt protects
    /// with the first SA whose match takes the packet; esp-decrypt drops a decrypted
    /// packet its SA's match does not take (`policy-mismatch`). None: every IPv4 packet.
    #[serde(rename = "match")]
    pub selectors: Option<MatchConfig>,
    /// The hard lifetime: after this many packets or inner bytes the SA carries no more
    /// (`sa-expired`; there is no key exchange here to make a new one).
    pub lifetime: Option<Lifetime>,
    /// esp-decrypt: the anti-replay window in packets (RFC 4303 §3.4.3; rounded up to a
    /// multiple of 64; default 64; 0 turns the check off).
    pub replay_window: Option<u32>,
}

/// Outer addresses of a tunnel.
#[derive(Debug, Clone, Copy, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Tunnel {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
}

/// An SA's hard lifetime; either bound or both.
#[derive(Debug, Clone, Copy, Default, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Lifetime {
    pub packets: Option<u64>,
    /// Bytes of inner datagrams (as Linux's XFRM counts them).
    pub bytes: Option<u64>,
}

/// A security parameter index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Deserialize, Serialize, schemars::JsonSchema)]
#[serde(try_from = "SpiRepr", into = "u32")]
pub struct Spi(pub u32);

impl From<Spi> for u32 {
    fn from(s: Spi) -> u32 {
        s.0
    }
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(untagged)]
enum SpiRepr {
    Number(u64),
    Text(String),
}

impl TryFrom<SpiRepr> for Spi {
    type Error = String;
    fn try_from(r: SpiRepr) -> Result<Spi, String> {
        let n = match r {
            SpiRepr::Number(n) => n,
            SpiRepr::Text(s) => {
                let t = s.trim();
                let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                    Some(hex) => u64::from_str_radix(hex, 16),
                    None => t.parse(),
                };
                parsed.map_err(|_| format!("`{s}` is not an SPI: write a number or 0x hex"))?
            }
        };
        match u32::try_from(n) {
            Ok(spi) if spi >= 256 => Ok(Spi(spi)),
            Ok(spi) => Err(format!(
                "SPI {spi} is reserved (RFC 4303 §2.1: 1 to 255 are for IANA, 0 is local)"
            )),
            Err(_) => Err(format!("SPI {n} does not fit 32 bits")),
        }
    }
}

/// An SA's cipher: AES-GCM keyed once (Intel's ipsec-mb where the build has it,
/// ring otherwise: `sfclab_aead`), with the salt that begins every nonce.
pub struct Cipher {
    key: AesGcm,
    salt: [u8; 4],
}

impl Cipher {
    /// Reads `hex` (`key` of `sas[k]`, named by `at`) as key then salt, for `backend`
    /// (`None`: the build's preferred).
    pub fn new(hex: &str, at: &str, backend: Option<sfclab_aead::Backend>) -> Result<Cipher, ConfigError> {
        let bytes = crate::config::parse_hex(hex).map_err(|why| ConfigError::new(at, why))?;
        if bytes.len() != 20 && bytes.len() != 36 {
            return Err(ConfigError::new(
                at,
                format!(
                    "{} bytes: write 20 (an AES-128 key and a 4-byte salt) or 36 (AES-256 and the salt), as ip xfrm's rfc4106 keys",
                    bytes.len()
                ),
            ));
        }
        let (key, salt) = bytes.split_at(bytes.len() - 4);
        let key = match backend {
            Some(b) => AesGcm::with(b, key),
            None => AesGcm::new(key),
        }
        .map_err(|why| ConfigError::new(at, why))?;
        Ok(Cipher {
            key,
            salt: salt.try_into().expect("4 bytes"),
        })
    }

    /// The RFC 4106 nonce: salt then the explicit IV. Written as the cipher reads it, 8
    /// bytes then 4: a read that spans two writes still in flight waits for both to
    /// reach the cache (a failed store-to-load forward). Written 4 bytes then 8 it cost
    /// ipsec-mb's 64-byte seal 30 cycles of its 150 in the release profile (the bench
    /// profile's LTO wrote it whole either way).
    #[inline(always)]
    fn nonce(&self, iv: [u8; IV]) -> [u8; sfclab_aead::NONCE] {
        let iv = u64::from_le_bytes(iv);
        let head = u64::from(u32::from_le_bytes(self.salt)) | (iv << 32);
        let tail = (iv >> 32) as u32;
        let mut n = [0u8; sfclab_aead::NONCE];
        n[..8].copy_from_slice(&head.to_le_bytes());
        n[8..].copy_from_slice(&tail.to_le_bytes());
        n
    }

    /// Encrypts `plain` in place; returns the ICV.
    #[inline(always)]
    pub fn seal(&self, iv: [u8; IV], aad: &AadBytes, plain: &mut [u8]) -> [u8; ICV] {
        self.key.seal(&self.nonce(iv), aad.bytes(), plain)
    }

    /// Checks and decrypts `cipher_and_icv` in place; the plaintext is all but its last
    /// `ICV` bytes. `false`: the ICV does not match (nothing may be trusted).
    #[inline(always)]
    pub fn open(&self, iv: [u8; IV], aad: &AadBytes, cipher_and_icv: &mut [u8]) -> bool {
        self.key.open(&self.nonce(iv), aad.bytes(), cipher_and_icv)
    }

    /// Which AES-GCM does the work.
    pub fn backend(&self) -> sfclab_aead::Backend {
        self.key.backend()
    }
}

/// `aead` as an ESP NF's config writes it: `ipsec-mb` or `ring` (none: the build's
/// preferred, ipsec-mb where it is built in).
pub fn backend(name: Option<&str>) -> Result<Option<sfclab_aead::Backend>, ConfigError> {
    let Some(name) = name else { return Ok(None) };
    let all = sfclab_aead::Backend::available();
    match [sfclab_aead::Backend::IpsecMb, sfclab_aead::Backend::Ring]
        .into_iter()
        .find(|b| b.name() == name)
    {
        Some(b) if all.contains(&b) => Ok(Some(b)),
        Some(b) => Err(ConfigError::new(
            "aead",
            format!("this build has no {b} (apt-get install libipsec-mb-dev, then rebuild sfclab)"),
        )),
        None => Err(ConfigError::new(
            "aead",
            format!("`{name}` is not an AES-GCM implementation: write ipsec-mb or ring"),
        )),
    }
}

/// The additional authenticated data of RFC 4106 §5: SPI and the 32-bit sequence
/// number, or with ESN, SPI, the high half and the low half.
pub struct AadBytes {
    bytes: [u8; 12],
    len: usize,
}

impl AadBytes {
    #[inline(always)]
    pub fn new(spi: u32, seq: u64, esn: bool) -> AadBytes {
        // The SPI, then the sequence number (high half first with ESN), big-endian, as
        // 8 bytes then 4: whole words, as the cipher reads them (see `Cipher::nonce`).
        let spi = u64::from(u32::from_ne_bytes(spi.to_be_bytes()));
        let mut bytes = [0u8; 12];
        if esn {
            let high = u64::from(u32::from_ne_bytes(((seq >> 32) as u32).to_be_bytes()));
            bytes[..8].copy_from_slice(&(spi | high << 32).to_ne_bytes());
            bytes[8..].copy_from_slice(&(seq as u32).to_be_bytes());
            AadBytes { bytes, len: 12 }
        } else {
            let low = u64::from(u32::from_ne_bytes((seq as u32).to_be_bytes()));
            bytes[..8].copy_from_slice(&(spi | low << 32).to_ne_bytes());
            AadBytes { bytes, len: 8 }
        }
    }

    fn bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// What an SA has carried against its hard lifetime, and the names its counters have
/// (`sa<spi>_packets`, `sa<spi>_bytes`).
#[derive(Debug, Clone, Copy)]
pub struct Usage {
    pub packets: u64,
    pub bytes: u64,
    limit: Lifetime,
    names: [&'static str; 2],
}

impl Usage {
    pub fn new(spi: u32, limit: Option<Lifetime>) -> Usage {
        Usage {
            packets: 0,
            bytes: 0,
            limit: limit.unwrap_or_default(),
            names: [
                crate::config::intern(&format!("sa{spi:x}_packets")),
                crate::config::intern(&format!("sa{spi:x}_bytes")),
            ],
        }
    }

    /// Whether one more packet stays within the packet lifetime.
    #[inline(always)]
    pub fn packet_allowed(&self) -> bool {
        self.limit.packets.is_none_or(|max| self.packets < max)
    }

    /// Whether one more datagram of `len` bytes stays within the lifetime.
    #[inline(always)]
    pub fn allows(&self, len: usize) -> bool {
        self.packet_allowed() && self.limit.bytes.is_none_or(|max| self.bytes + len as u64 <= max)
    }

    #[inline(always)]
    pub fn add(&mut self, len: usize) {
        self.packets += 1;
        self.bytes += len as u64;
    }

    pub fn counters(&self) -> [sfclab_core::NfCounter; 2] {
        [
            sfclab_core::NfCounter::total(self.names[0], self.packets),
            sfclab_core::NfCounter::total(self.names[1], self.bytes),
        ]
    }
}

/// AES-128-GCM sealing alone, as the ESP NFs call it (a 12-byte nonce from the salt and
/// a counter, an 8-byte AAD, the tag apart) with `backend`: TSC cycles per operation
/// over `bytes`-byte buffers, `ops` operations on one buffer (in cache). The limit of
/// esp-encrypt's cipher.
pub fn seal_alone(backend: sfclab_aead::Backend, bytes: usize, ops: u64) -> f64 {
    let cipher = Cipher::new(&"5a".repeat(20), "key", Some(backend)).expect("a 20-byte key");
    let mut buffer = vec![0x5au8; bytes];
    let mut tags = 0u8;
    let start = sfclab_core::tsc::now();
    for seq in 1..=ops {
        let icv = cipher.seal(seq.to_be_bytes(), &AadBytes::new(0x1000, seq, false), &mut buffer);
        tags ^= icv[0];
    }
    let cycles = sfclab_core::tsc::now() - start;
    std::hint::black_box(tags);
    cycles as f64 / ops.max(1) as f64
}

/// Refuses two SAs with one SPI (and, for esp-decrypt, one destination).
pub fn check_unique(sas: &[SaConfig], key: &str) -> Result<(), ConfigError> {
    let dst = |s: &SaConfig| s.tunnel.map(|t| t.dst);
    for (k, sa) in sas.iter().enumerate() {
        if sas[..k].iter().any(|o| o.spi == sa.spi && dst(o) == dst(sa)) {
            return Err(ConfigError::new(
                format!("{key}[{k}].spi"),
                format!("SPI {:#x} names two SAs", sa.spi.0),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nonce_is_the_salt_then_the_iv_and_the_aad_the_spi_then_the_sequence_number() {
        let c = Cipher::new("0x0102030405060708090a0b0c0d0e0f10 11121314", "key", None).unwrap();
        assert_eq!(
            c.nonce([1, 2, 3, 4, 5, 6, 7, 8]),
            [0x11, 0x12, 0x13, 0x14, 1, 2, 3, 4, 5, 6, 7, 8]
        );
        let seq = 0x0a0b_0c0d_1112_1314;
        assert_eq!(
            AadBytes::new(0x0102_0304, seq, false).bytes(),
            [1, 2, 3, 4, 0x11, 0x12, 0x13, 0x14]
        );
        assert_eq!(
            AadBytes::new(0x0102_0304, seq, true).bytes(),
            [1, 2, 3, 4, 0x0a, 0x0b, 0x0c, 0x0d, 0x11, 0x12, 0x13, 0x14]
        );
    }

    #[test]
    fn keys_are_read_as_ip_xfrm_writes_them() {
        let c = Cipher::new("0x0102030405060708090a0b0c0d0e0f10 11121314", "key", None).unwrap();
        assert_eq!(c.salt, [0x11, 0x12, 0x13, 0x14]);
        assert!(Cipher::new(&"ab".repeat(36), "key", None).is_ok(), "AES-256 and salt");
        let e = Cipher::new(&"ab".repeat(16), "sas[0].key", None).err().unwrap();
        assert_eq!(e.key, "sas[0].key");
        assert!(e.reason.contains("16 bytes"), "{}", e.reason);
        assert!(Cipher::new("0xzz", "key", None).err().unwrap().reason.contains("`zz`"));
    }

    #[test]
    fn spis_are_numbers_or_hex_and_not_reserved() {
        let spi = |v: serde_json::Value| serde_json::from_value::<Spi>(v).map_err(|e| e.to_string());
        assert_eq!(spi(serde_json::json!("0x100")), Ok(Spi(256)));
        assert_eq!(spi(serde_json::json!(4096)), Ok(Spi(4096)));
        assert!(spi(serde_json::json!(255)).unwrap_err().contains("reserved"));
        assert!(spi(serde_json::json!(1u64 << 32)).unwrap_err().contains("32 bits"));
    }

    #[test]
    fn seal_then_open_round_trips_and_any_changed_bit_fails() {
        for backend in sfclab_aead::Backend::usable() {
            seal_then_open_with(backend);
        }
    }

    #[test]
    fn what_one_aes_gcm_seals_the_other_opens_and_the_choice_is_checked() {
        let all = sfclab_aead::Backend::usable();
        for &a in &all {
            for &b in &all {
                let (sealer, opener) = (
                    Cipher::new(&"17".repeat(36), "key", Some(a)).unwrap(),
                    Cipher::new(&"17".repeat(36), "key", Some(b)).unwrap(),
                );
                let aad = AadBytes::new(0x200, 1 << 32 | 5, true);
                let mut text = vec![0xabu8; 1420];
                let icv = sealer.seal(9u64.to_be_bytes(), &aad, &mut text);
                let mut sealed = [text, icv.to_vec()].concat();
                assert!(opener.open(9u64.to_be_bytes(), &aad, &mut sealed), "{a} -> {b}");
                assert!(sealed[..1420].iter().all(|&x| x == 0xab));
            }
        }
        assert_eq!(backend(None).unwrap(), None);
        assert_eq!(backend(Some("ring")).unwrap(), Some(sfclab_aead::Backend::Ring));
        let e = backend(Some("openssl")).unwrap_err();
        assert_eq!(e.key, "aead");
        assert!(e.reason.contains("ipsec-mb or ring"), "{}", e.reason);
    }

    fn seal_then_open_with(backend: sfclab_aead::Backend) {
        let c = Cipher::new(&"42".repeat(20), "key", Some(backend)).unwrap();
        assert_eq!(c.backend(), backend);
        let aad = AadBytes::new(0x100, 7, false);
        let mut text = b"tunnelled datagram".to_vec();
        let icv = c.seal(7u64.to_be_bytes(), &aad, &mut text);
        assert_ne!(&text[..], b"tunnelled datagram");
        let mut sealed = [text.clone(), icv.to_vec()].concat();
        assert!(c.open(7u64.to_be_bytes(), &aad, &mut sealed));
        assert_eq!(&sealed[..18], b"tunnelled datagram");
        // Another sequence number in the AAD, or another IV: refused.
        let mut again = [text.clone(), icv.to_vec()].concat();
        assert!(!c.open(7u64.to_be_bytes(), &AadBytes::new(0x100, 8, false), &mut again));
        let mut again = [text, icv.to_vec()].concat();
        assert!(!c.open(8u64.to_be_bytes(), &aad, &mut again));
    }

    #[test]
    fn lifetimes_bound_packets_and_bytes() {
        let limit = Lifetime {
            packets: Some(2),
            bytes: Some(250),
        };
        let mut u = Usage::new(0x1000, Some(limit));
        assert!(u.allows(100));
        u.add(100);
        assert!(!u.allows(151), "bytes");
        assert!(u.allows(150));
        u.add(150);
        assert!(!u.allows(0) && !u.packet_allowed(), "packets");
        let names: Vec<&str> = u.counters().iter().map(|c| c.name).collect();
        assert_eq!(names, ["sa1000_packets", "sa1000_bytes"]);
    }
}
