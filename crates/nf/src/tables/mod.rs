//! The lookup structures the NFs are built on, each measured against DPDK's own in a
//! benchmark of its own:
//!
//! - [`lpm`]: longest-prefix match, IPv4 DIR-24-8 and IPv6 (the router's; `bench lpm`,
//!   `bench lpm6` against rte_lpm and rte_lpm6).
//! - [`acl`]: 5-tuple classification, first match wins (the firewall's bit vectors,
//!   tuple space search, ClassBench-style rule sets; `bench acl` against rte_acl).
//! - [`eviction`]: the line a full table's new entry walks to find one that may give way
//!   (nat44's and the firewall's, as netfilter's early drop).
//! - [`flow_map`]: flow keys to slots, one cache line per bucket, so a batch asks for
//!   its entries before it reads them (nat44's inside map; `bench nfs`'s nat44 rows).

pub mod acl;
pub mod eviction;
pub mod flow_map;
pub mod lpm;
