//! DPDK poll-mode data plane for ofi-nostd.
//!
//! Implements the link traits of [`wire`] on DPDK 22.11 queues (bindings generated at
//! build time, a C shim for DPDK's `static inline` burst functions). Everything that
//! touches DPDK sits behind the `dpdk` feature so the workspace builds without it; the
//! data plane itself arrives with the DPDK issue.

#![forbid(unsafe_code)]

/// Whether this build was compiled against the system DPDK.
pub const ENABLED: bool = cfg!(feature = "dpdk");
