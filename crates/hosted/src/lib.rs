//! The `std` adapter of ofi-nostd.
//!
//! Owns the core's pool storage ([`storage::Heap`]), drives progress (manually or on a
//! thread), offers the safe Rust API ([`api`]), the `ofi-info`/`ofi-pingpong` tools,
//! fault-injecting and pcap-writing link wrappers, and the deterministic network
//! simulator ([`netsim`]).
//!
//! The only `unsafe` code is [`mem::RawMemory`], the raw-pointer memory the C provider
//! copies through, and [`storage::Heap`]'s zeroed buffers (memory from `calloc`, so
//! that a refusal stays an error); everything else, the safe API included, is safe
//! code.

#![deny(unsafe_code)]

pub mod api;
pub mod auth_key;
#[cfg(feature = "dpdk")]
pub mod dpdk;
pub mod drops;
pub mod fault;
#[allow(unsafe_code)]
pub mod mem;
pub mod netsim;
pub mod ofi_info;
pub mod pcap;
pub mod pingpong;
pub mod runtime;
pub mod simlink;
pub mod storage;
pub mod sysinfo;

pub use api::{
    Av, Buf, Completion, Counter, Cq, Domain, DomainBuilder, Endpoint, Error, Fabric, Mr, OpId,
    PostError,
};
pub use ofi_nostd;
