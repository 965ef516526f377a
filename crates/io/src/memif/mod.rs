//! memif, the shared-memory packet interface of FD.io VPP and DPDK's `net_memif`
//! (protocol version 2.0): a control channel on a `SOCK_SEQPACKET` Unix socket, then
//! regions of shared memory holding descriptor rings and packet buffers.
//!
//! This module is being built in steps (issue 27); so far it has the control channel's
//! messages ([`msg`]), the channel that carries them with their descriptors
//! ([`control`]), the ring layout both sides agree on ([`layout`]) and the client's
//! shared memory with its rings ([`region`]). Both handshakes, as server and as client,
//! complete against DPDK's own `net_memif` (`tests/memif_with_dpdk.rs`).

pub mod control;
pub mod layout;
pub mod msg;
pub mod region;
