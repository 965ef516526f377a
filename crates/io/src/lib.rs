//! Real packet I/O behind the runtime's port traits ([`sfclab_core::RxPort`],
//! [`sfclab_core::TxPort`]): pcap files (replayed into a chain, captured from one) and
//! AF_XDP sockets on any Linux interface, with the BPF they load. All the FFI and socket
//! `unsafe` of sfclab outside the packet core lives here.

pub mod af_xdp;
pub mod bpf;
pub mod pcap;

pub use af_xdp::{AfXdpPort, AfXdpSettings, Bind};
pub use bpf::XdpMode;
pub use pcap::{PcapSink, PcapSource};
