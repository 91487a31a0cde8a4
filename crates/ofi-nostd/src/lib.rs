//! The `no_std`, allocation-free core of ofi-nostd.
//!
//! The libfabric 1.17 object model — getinfo, fabric, domain, endpoints, CQs, EQs, AVs,
//! counters, MRs — over fixed-capacity pools in storage the caller provides, and the
//! sans-IO reliable-datagram engine that runs the wire protocol of the `wire` crate. It
//! never allocates, never reads a clock (callers pass [`time::Instant`]) and never
//! touches a device (data planes lend buffers through `wire`'s link traits).

#![no_std]
#![forbid(unsafe_code)]

pub mod addr;
pub mod atomic;
pub mod av;
pub mod bind;
pub mod cm;
pub mod cntr;
pub mod cq;
pub mod dgram;
pub mod domain;
pub mod ep;
pub mod eq;
pub mod err_data;
pub mod errno;
pub mod fabric;
pub mod fid;
pub mod flags;
pub mod hash;
pub mod info;
pub mod iov;
pub mod matching;
pub mod mem;
pub mod mr;
pub mod net;
pub mod pool;
pub mod rdm;
pub mod ring;
pub mod sep;
mod served;
pub mod storage;
pub mod time;
pub mod tostr;
pub mod wait;

pub use errno::{Errno, Result};
