//! IPsec ESP (RFC 4303): the pieces the encrypting and decrypting NFs are built from.
//!
//! - [`replay`]: the receiver's anti-replay window with 64-bit extended sequence numbers.

pub mod replay;
