//! Real packet I/O behind the runtime's port traits ([`sfclab_core::RxPort`],
//! [`sfclab_core::TxPort`]). This first step holds the pcap ports: a file replayed into
//! a chain and a capture written from one; AF_XDP and AF_PACKET follow here.

#![forbid(unsafe_code)]

pub mod pcap;

pub use pcap::{PcapSink, PcapSource};
