//! Real packet I/O behind the runtime's port traits ([`sfclab_core::RxPort`],
//! [`sfclab_core::TxPort`]): pcap files (replayed into a chain, captured from one),
//! AF_XDP sockets on any Linux interface with the BPF they load, AF_PACKET rings (the
//! fallback that always works), memif (the shared-memory interface of VPP and DPDK,
//! both roles), and the tester's link
//! (a source's packets out through one port, across a device under test, back through
//! another), and an emulated line of a stated rate shared by several senders. All the FFI and socket
//! `unsafe` of sfclab outside the packet core lives here.

pub mod af_packet;
pub mod af_xdp;
pub mod any;
pub mod bpf;
pub mod line_rate;
pub mod memif;
pub mod pcap;
pub mod queues;
pub mod tester_link;
mod window;

pub use af_packet::{AfPacketPort, AfPacketSettings};
pub use af_xdp::{AfXdpPort, AfXdpSettings, Bind};
pub use any::{InterfacePort, IoKind, is_memif};
pub use bpf::XdpMode;
pub use line_rate::{Line, LinePort, SharedLine};
pub use memif::Wait;
pub use pcap::{PcapSink, PcapSource, PcapTap, ReplayPace};
pub use queues::QueueSet;
pub use tester_link::{SenderThread, TesterLink};
