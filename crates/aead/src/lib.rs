//! AES-GCM (NIST SP 800-38D) as ESP uses it (RFC 4106): 128- or 256-bit keys, 12-byte
//! nonces, 16-byte tags, sealed and opened in place. Two implementations behind one
//! type:
//!
//! - **ipsec-mb**: Intel's Multi-Buffer Crypto for IPsec (Debian `libipsec-mb-dev`),
//!   the code DPDK's `crypto_aesni_gcm` PMD runs (AVX-512 and VAES where the CPU has
//!   them), through a small C shim (`shim/gcm.c`: the library's GCM calls are macros
//!   over its manager's function pointers). Built in when the library is installed.
//! - **ring**: BoringSSL's AES-GCM assembly (AES-NI and CLMUL, AVX where the CPU has
//!   them), always there: it builds in seconds, where aws-lc-rs's C build held back a
//!   fresh build of sfclab by 84 s, and is the faster of the two at ESP's small sizes.
//!
//! [`AesGcm::new`] takes ipsec-mb where it is built in, ring otherwise;
//! [`AesGcm::with`] picks one. Both produce the same bytes (tested against each other
//! and against NIST's vectors).

use ring::aead::{AES_128_GCM, AES_256_GCM, Aad, LessSafeKey, Nonce, UnboundKey};

/// Bytes of a GCM tag (ESP's ICV here).
pub const TAG: usize = 16;
/// Bytes of a GCM nonce (RFC 4106: the SA's salt and the packet's IV).
pub const NONCE: usize = 12;

/// Which implementation does the work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    IpsecMb,
    Ring,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::IpsecMb => "ipsec-mb",
            Backend::Ring => "ring",
        }
    }

    /// The implementations this build has and this CPU runs, the preferred first.
    pub fn usable() -> Vec<Backend> {
        Backend::available()
            .iter()
            .copied()
            .filter(|&b| AesGcm::with(b, &[0; 16]).is_ok())
            .collect()
    }

    /// The implementations this build has, the preferred first.
    pub fn available() -> &'static [Backend] {
        if cfg!(ipsec_mb) {
            &[Backend::IpsecMb, Backend::Ring]
        } else {
            &[Backend::Ring]
        }
    }
}

/// Which AES-GCM this build uses, in words for `--version` and `sfclab nfs`.
pub fn in_use() -> &'static str {
    if cfg!(ipsec_mb) {
        "ipsec-mb (Intel's, the code DPDK's crypto_aesni_gcm runs)"
    } else {
        "ring (Intel's ipsec-mb was not found when this was built: apt-get install libipsec-mb-dev and build again for ESP at DPDK's speed)"
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One AES-GCM key, ready to seal and open. `Send` but not `Sync`: an NF owns it.
pub struct AesGcm {
    imp: Imp,
}

/// Shows the implementation, never the key.
impl std::fmt::Debug for AesGcm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AesGcm")
            .field("backend", &self.backend())
            .finish_non_exhaustive()
    }
}

enum Imp {
    #[cfg(ipsec_mb)]
    IpsecMb(ipsec_mb::Key),
    /// Boxed: ring's expanded key is 544 bytes, ipsec-mb's a pointer.
    Ring(Box<LessSafeKey>),
}

impl AesGcm {
    /// A key of 16 or 32 bytes, with the first implementation that takes it (ipsec-mb
    /// where built in and this CPU runs it, ring otherwise).
    pub fn new(key: &[u8]) -> Result<AesGcm, String> {
        let mut why = String::new();
        for &backend in Backend::available() {
            match AesGcm::with(backend, key) {
                Ok(k) => return Ok(k),
                Err(e) => why = e,
            }
        }
        Err(why)
    }

    /// A key of 16 or 32 bytes, with `backend` (an error when this build lacks it).
    pub fn with(backend: Backend, key: &[u8]) -> Result<AesGcm, String> {
        if key.len() != 16 && key.len() != 32 {
            return Err(format!(
                "{} bytes: AES-GCM takes a 16-byte (AES-128) or 32-byte (AES-256) key",
                key.len()
            ));
        }
        let imp = match backend {
            #[cfg(ipsec_mb)]
            Backend::IpsecMb => Imp::IpsecMb(ipsec_mb::Key::new(key)?),
            #[cfg(not(ipsec_mb))]
            Backend::IpsecMb => {
                return Err("this build has no ipsec-mb (apt-get install libipsec-mb-dev, then rebuild)".into());
            }
            Backend::Ring => {
                let algorithm = if key.len() == 16 { &AES_128_GCM } else { &AES_256_GCM };
                let key = UnboundKey::new(algorithm, key).map_err(|_| "ring refused the key".to_string())?;
                Imp::Ring(Box::new(LessSafeKey::new(key)))
            }
        };
        Ok(AesGcm { imp })
    }

    pub fn backend(&self) -> Backend {
        match self.imp {
            #[cfg(ipsec_mb)]
            Imp::IpsecMb(_) => Backend::IpsecMb,
            Imp::Ring(_) => Backend::Ring,
        }
    }

    /// The code path in use: ipsec-mb's (`avx512`, `avx2`, `avx`, `sse`), or `ring`
    /// (which picks its own at run time and does not say).
    pub fn arch(&self) -> &'static str {
        match &self.imp {
            #[cfg(ipsec_mb)]
            Imp::IpsecMb(k) => k.arch(),
            Imp::Ring(_) => "ring",
        }
    }

    /// Encrypts `buf` in place, authenticating `aad` too; returns the tag.
    #[inline]
    pub fn seal(&self, nonce: &[u8; NONCE], aad: &[u8], buf: &mut [u8]) -> [u8; TAG] {
        match &self.imp {
            #[cfg(ipsec_mb)]
            Imp::IpsecMb(k) => k.seal(nonce, aad, buf),
            Imp::Ring(k) => {
                let tag = k
                    .seal_in_place_separate_tag(Nonce::assume_unique_for_key(*nonce), Aad::from(aad), buf)
                    .expect("AES-GCM seals any length a packet can have");
                tag.as_ref().try_into().expect("a 16-byte GCM tag")
            }
        }
    }

    /// Checks and decrypts `sealed` in place: the ciphertext, then its tag (the last
    /// [`TAG`] bytes). `false` when the tag does not match: the bytes are then not to
    /// be trusted (they may be decrypted or not).
    #[inline]
    pub fn open(&self, nonce: &[u8; NONCE], aad: &[u8], sealed: &mut [u8]) -> bool {
        if sealed.len() < TAG {
            return false;
        }
        match &self.imp {
            #[cfg(ipsec_mb)]
            Imp::IpsecMb(k) => {
                let (text, tag) = sealed.split_at_mut(sealed.len() - TAG);
                k.open(nonce, aad, text, (&*tag).try_into().expect("TAG bytes"))
            }
            Imp::Ring(k) => k
                .open_in_place(Nonce::assume_unique_for_key(*nonce), Aad::from(aad), sealed)
                .is_ok(),
        }
    }
}

#[cfg(ipsec_mb)]
mod ipsec_mb {
    //! The shim's four calls (`shim/gcm.c`).
    use std::ptr::NonNull;

    /// The shim's state: the expanded key and ipsec-mb's manager.
    #[repr(C)]
    struct Gcm {
        _opaque: [u8; 0],
    }

    unsafe extern "C" {
        fn sfclab_gcm_new(key: *const u8, key_len: usize) -> *mut Gcm;
        fn sfclab_gcm_free(g: *mut Gcm);
        fn sfclab_gcm_arch(g: *const Gcm) -> *const std::ffi::c_char;
        fn sfclab_gcm_seal(
            g: *const Gcm,
            iv: *const u8,
            aad: *const u8,
            aad_len: usize,
            buf: *mut u8,
            len: usize,
            tag: *mut u8,
        );
        fn sfclab_gcm_open(
            g: *const Gcm,
            iv: *const u8,
            aad: *const u8,
            aad_len: usize,
            buf: *mut u8,
            len: usize,
            tag: *const u8,
        ) -> std::ffi::c_int;
    }

    /// An expanded key and its manager, owned here alone (freed on drop).
    pub struct Key {
        gcm: NonNull<Gcm>,
    }

    // SAFETY: the shim's state is reached only through this `Key`, which owns it; the
    // calls keep no pointer to it past their return and touch no thread-local state, so
    // it may move to another thread. It is not `Sync`: one thread uses it at a time.
    unsafe impl Send for Key {}

    impl Key {
        /// `key`: 16 or 32 bytes (checked by the caller).
        pub fn new(key: &[u8]) -> Result<Key, String> {
            debug_assert!(key.len() == 16 || key.len() == 32);
            // SAFETY: `key` is valid for `key.len()` bytes during the call, which copies
            // what it needs into the state it returns.
            let gcm = unsafe { sfclab_gcm_new(key.as_ptr(), key.len()) };
            NonNull::new(gcm)
                .map(|gcm| Key { gcm })
                .ok_or_else(|| "ipsec-mb could not set up (no memory, or no CPU support it knows)".into())
        }

        pub fn arch(&self) -> &'static str {
            // SAFETY: `gcm` is live (owned, freed only on drop); the shim returns a
            // pointer to one of its static NUL-terminated names.
            let name = unsafe { std::ffi::CStr::from_ptr(sfclab_gcm_arch(self.gcm.as_ptr())) };
            match name.to_bytes() {
                b"avx512" => "avx512",
                b"avx2" => "avx2",
                b"avx" => "avx",
                b"sse" => "sse",
                _ => "unknown",
            }
        }

        #[inline]
        pub fn seal(&self, nonce: &[u8; super::NONCE], aad: &[u8], buf: &mut [u8]) -> [u8; super::TAG] {
            let mut tag = [0u8; super::TAG];
            // SAFETY: `gcm` is live; the nonce is 12 bytes and the tag 16, as the shim
            // reads and writes; `aad` and `buf` are valid for their lengths, `buf`
            // uniquely borrowed (encrypted in place, source and destination the same).
            unsafe {
                sfclab_gcm_seal(
                    self.gcm.as_ptr(),
                    nonce.as_ptr(),
                    aad.as_ptr(),
                    aad.len(),
                    buf.as_mut_ptr(),
                    buf.len(),
                    tag.as_mut_ptr(),
                )
            };
            tag
        }

        #[inline]
        pub fn open(&self, nonce: &[u8; super::NONCE], aad: &[u8], buf: &mut [u8], tag: &[u8; super::TAG]) -> bool {
            // SAFETY: as for `seal`; `tag` is 16 readable bytes that do not overlap `buf`.
            unsafe {
                sfclab_gcm_open(
                    self.gcm.as_ptr(),
                    nonce.as_ptr(),
                    aad.as_ptr(),
                    aad.len(),
                    buf.as_mut_ptr(),
                    buf.len(),
                    tag.as_ptr(),
                ) == 1
            }
        }
    }

    impl Drop for Key {
        fn drop(&mut self) {
            // SAFETY: `gcm` came from `sfclab_gcm_new` and is freed once, here.
            unsafe { sfclab_gcm_free(self.gcm.as_ptr()) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// NIST's GCM test vectors (the GCM specification's test cases 4 and 16: 60 bytes
    /// of plaintext with 20 bytes of AAD, AES-128 and AES-256), with every backend.
    #[test]
    fn every_backend_matches_the_gcm_test_vectors() {
        let plain = hex(
            "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
        );
        let aad = hex("feedfacedeadbeeffeedfacedeadbeefabaddad2");
        let nonce: [u8; 12] = hex("cafebabefacedbaddecaf888").try_into().unwrap();
        let cases = [
            (
                "feffe9928665731c6d6a8f9467308308",
                "42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091",
                "5bc94fbc3221a5db94fae95ae7121a47",
            ),
            (
                "feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308",
                "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
                "76fc6ece0f4e1768cddf8853bb2d551b",
            ),
        ];
        for backend in Backend::usable() {
            for (key, cipher, tag) in cases {
                let k = AesGcm::with(backend, &hex(key)).unwrap();
                assert_eq!(k.backend(), backend);
                let mut buf = plain.clone();
                assert_eq!(k.seal(&nonce, &aad, &mut buf).to_vec(), hex(tag), "{backend}");
                assert_eq!(buf, hex(cipher), "{backend}");
                let mut sealed = [buf, hex(tag)].concat();
                assert!(k.open(&nonce, &aad, &mut sealed), "{backend}");
                assert_eq!(&sealed[..plain.len()], &plain[..]);
            }
        }
    }

    #[test]
    fn a_changed_bit_anywhere_is_refused_and_the_backends_agree_on_every_length() {
        let key = [7u8; 32];
        let nonce = [9u8; 12];
        let all: Vec<AesGcm> = Backend::usable()
            .into_iter()
            .map(|b| AesGcm::with(b, &key).unwrap())
            .collect();
        for len in [0, 1, 15, 16, 17, 63, 64, 255, 1420, 1500] {
            let plain: Vec<u8> = (0..len).map(|i| i as u8).collect();
            let sealed: Vec<Vec<u8>> = all
                .iter()
                .map(|k| {
                    let mut b = plain.clone();
                    let tag = k.seal(&nonce, b"esp aad!", &mut b);
                    [b, tag.to_vec()].concat()
                })
                .collect();
            assert!(sealed.windows(2).all(|w| w[0] == w[1]), "backends agree at {len} bytes");
            for k in &all {
                for bit in [0, len * 8 / 2, len * 8 + 3, (len + TAG) * 8 - 1] {
                    let mut bad = sealed[0].clone();
                    bad[bit / 8] ^= 1 << (bit % 8);
                    assert!(!k.open(&nonce, b"esp aad!", &mut bad), "{} at {len}", k.backend());
                }
                assert!(!k.open(&nonce, b"esp aad?", &mut sealed[0].clone()), "the AAD counts");
                assert!(!k.open(&nonce, b"", &mut [0u8; TAG - 1]), "shorter than a tag");
            }
        }
        assert!(AesGcm::new(&[0; 24]).unwrap_err().contains("24 bytes"));
    }

    /// Where the build has ipsec-mb, it is the default and this CPU's code path shows.
    #[test]
    fn the_preferred_backend_is_ipsec_mb_where_it_is_built_in() {
        let k = AesGcm::new(&[1; 16]).unwrap();
        if cfg!(ipsec_mb) && AesGcm::with(Backend::IpsecMb, &[1; 16]).is_ok() {
            assert_eq!(k.backend(), Backend::IpsecMb);
            assert!(["avx512", "avx2", "avx", "sse"].contains(&k.arch()), "{}", k.arch());
        } else {
            assert!(AesGcm::with(Backend::IpsecMb, &[1; 16]).is_err());
        }
    }
}
