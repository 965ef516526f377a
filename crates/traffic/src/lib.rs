//! Traffic for in-memory chains: a generator and a sink, both [`sfclab_core::port`]s.
//!
//! - [`sizes`]: frame sizes: fixed, the RFC 2544 list, IMIX or a custom `size:weight` mix.
//! - [`rate`]: offered rate (max, pps, L1 bit/s) and the pacer.
//! - [`flows`]: per-flow header templates (Ethernet/IPv4 or IPv6/UDP) in RFC 2544/5180
//!   benchmarking address space.
//! - [`generator`]: stamps templates into pool buffers, paced, with latency probes.
//! - [`sink`]: counts, optionally verifies checksums, records probe latency (HDR histogram).
//! - [`responder`]: the far end's reply to a request, made in place (echo, TCP as a server).

#![forbid(unsafe_code)]

pub mod flows;
pub mod generator;
pub mod profiles;
pub mod rate;
pub mod responder;
pub mod sink;
pub mod sizes;

pub use flows::{Destinations, DscpMix, IpVersion, L4};
pub use generator::{Generator, GeneratorConfig, GeneratorStats};
pub use rate::Rate;
pub use sink::{Sink, SinkStats};
pub use sizes::FrameSizes;

/// Bytes a frame occupies on Ethernet beyond its FCS-inclusive size: preamble, SFD and
/// the minimum inter-frame gap. Line-rate (L1) figures count them, as RFC 2544 does.
pub const L1_OVERHEAD: u64 = 20;
/// The frame check sequence: counted in frame sizes (RFC 2544), not stored in buffers.
pub const FCS_LEN: usize = 4;
