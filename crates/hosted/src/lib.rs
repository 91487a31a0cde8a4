//! The `std` adapter of ofi-nostd.
//!
//! Owns the core's pool storage, drives progress (manually or on a thread), offers the
//! safe Rust API, the `ofi-info`/`ofi-pingpong` tools, fault-injecting and pcap-writing
//! link wrappers, and the deterministic network simulator ([`netsim`]).

#![forbid(unsafe_code)]

pub mod fault;
pub mod netsim;
pub mod ofi_info;
pub mod pcap;
pub mod simlink;
pub mod sysinfo;

pub use ofi_nostd;
