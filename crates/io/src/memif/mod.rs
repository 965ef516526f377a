//! memif, the shared-memory packet interface of FD.io VPP and DPDK's `net_memif`
//! (protocol version 2.0): a control channel on a `SOCK_SEQPACKET` Unix socket, then
//! regions of shared memory holding descriptor rings and packet buffers.
//!
//! The layers, bottom up: the control channel's messages ([`msg`]) and the socket that
//! carries them with their descriptors ([`control`]); the layout both sides agree on
//! ([`layout`]); shared memory ([`region`]) and the rings in it ([`ring`]); the
//! handshake in both roles ([`connection`]); what an interface is asked to be
//! ([`settings`]); what its control thread and ports share (`shared`); a zero-copy
//! client's buffers lent to its peer (`lent`); an interface
//! that keeps itself connected across a peer's restarts ([`interface`]); and the port
//! that moves frames ([`port`]).
//! Both roles interoperate with DPDK's own `net_memif` (`tests/memif_with_dpdk.rs`).

mod both_ways;
pub mod connection;
pub mod control;
pub mod interface;
pub mod layout;
mod lent;
pub mod msg;
pub mod port;
pub mod region;
pub mod ring;
pub mod settings;
mod shared;

pub use both_ways::{BothWaysIn, BothWaysOut};
pub use connection::{Config, Role};
pub use interface::Interface;
pub use port::MemifPort;
pub use settings::{DEFAULT_SPIN, MemifSettings, SPEC_PREFIX, Wait};
pub use shared::remove_listening_sockets;
