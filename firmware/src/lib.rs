//! DPU firmware for ofi-nostd.
//!
//! A bare-metal image for `aarch64-unknown-none` (the class of Arm cores on
//! BlueField-style DPUs) that runs the core's progress loop against a NIC queue. The
//! image itself (boot, MMU, generic timer, defmt over the PL011 UART, panic handling) is
//! `src/main.rs` and builds only for bare-metal targets; this library holds what does not
//! depend on the machine and is unit-tested on the host:
//!
//! - [`virtio`]: a virtio-net driver for the virtio-mmio transport implementing the
//!   `wire` link traits (what QEMU's `virt` machine offers; a DPU's NIC queue driver
//!   implements the same traits);
//! - [`app`]: the core brought up in an arena with DGRAM and RDM (msg and tagged) echo
//!   responders;
//! - [`arena`]: a bump-arena [`ofi_nostd::storage::Storage`] for objects `Fixed<N>`
//!   cannot hold (the RDM engine's buffers);
//! - [`peer`]: the ping-pong client the host runs against the image.

#![no_std]

pub mod app;
pub mod arena;
pub mod peer;
pub mod virtio;

#[cfg(test)]
mod tests;

pub use ofi_nostd;
