//! Wire formats, one module per protocol, all with the same shape:
//! a `#[repr(C)]` header of network-endian fields viewed in place (zerocopy),
//! `parse`/`parse_mut` that check the length first and return `WireError` instead
//! of panicking, and protocol numbers as enums with an `Unknown(n)` arm.
//!
//! Nothing here allocates; every function is safe on arbitrary bytes.

#![forbid(unsafe_code)]

pub mod arp;
pub mod build;
pub mod checksum;
pub mod dscp;
pub mod ethernet;
pub mod flow;
pub mod icmp;
pub mod ipv4;
pub mod ipv6;
pub mod layers;
pub mod nsh;
pub mod tcp;
pub mod udp;
pub mod vlan;

pub use build::{EthernetRepr, FrameRepr, IpRepr, TransportRepr};
pub use ethernet::{EtherType, EthernetHeader, MacAddr};
pub use ipv4::{IpProtocol, Ipv4Header};
pub use ipv6::Ipv6Header;
pub use layers::{Layers, Network};
pub use tcp::TcpHeader;
pub use udp::UdpHeader;

/// Why bytes could not be read as a header. Malformed input is a value, never a panic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// Fewer bytes than the fixed header needs.
    Truncated,
    /// A length or version field that contradicts the bytes.
    BadHeader,
    /// A checksum that does not verify.
    BadChecksum,
    /// Well-formed, but not something this representation holds (IPv4 options, IPv6
    /// extension headers, TCP options, a second VLAN tag, another protocol).
    Unrepresentable,
}

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WireError::Truncated => "truncated header",
            WireError::BadHeader => "inconsistent header field",
            WireError::BadChecksum => "checksum does not verify",
            WireError::Unrepresentable => "headers this representation does not hold",
        })
    }
}

impl std::error::Error for WireError {}

/// Splits `bytes` into a header view and the rest, or `Truncated`.
macro_rules! header_view {
    ($ty:ty) => {
        impl $ty {
            /// Size of the fixed header in bytes.
            pub const LEN: usize = core::mem::size_of::<$ty>();

            /// Views the front of `bytes` as this header; returns it and the bytes after it.
            #[inline]
            pub fn parse(bytes: &[u8]) -> Result<(&$ty, &[u8]), $crate::WireError> {
                <$ty as zerocopy::FromBytes>::ref_from_prefix(bytes).map_err(|_| $crate::WireError::Truncated)
            }

            /// Mutable view of the front of `bytes`, for in-place rewrites.
            #[inline]
            pub fn parse_mut(bytes: &mut [u8]) -> Result<(&mut $ty, &mut [u8]), $crate::WireError> {
                <$ty as zerocopy::FromBytes>::mut_from_prefix(bytes).map_err(|_| $crate::WireError::Truncated)
            }
        }
    };
}
pub(crate) use header_view;

/// Bytes from hex text with any whitespace between (test fixtures copied from captures).
#[cfg(test)]
pub(crate) fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}
