//! IPsec ESP in tunnel mode (RFC 4303) with AES-GCM (RFC 4106), as two NFs: the
//! encrypting and the decrypting half of a security gateway.
//!
//! - [`encrypt`]: `esp-encrypt`, the SPD and outbound SAs.
//! - [`decrypt`]: `esp-decrypt`, inbound SAs by SPI, the replay check, the inner policy check.
//! - [`sa`]: what both configure (SPI, key and salt, tunnel, ESN, lifetime) and RFC 4106's
//!   nonce and additional authenticated data.
//! - [`replay`]: the receiver's anti-replay window with 64-bit extended sequence numbers.
//!
//! The cipher is `sfclab_aead`'s AES-GCM (ipsec-mb or ring); the framing and the window are ours (no Rust
//! ESP crate exists).

pub mod decrypt;
pub mod encrypt;
pub mod replay;
pub mod sa;
