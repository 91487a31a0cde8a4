//! DPU firmware for ofi-nostd.
//!
//! A bare-metal image for `aarch64-unknown-none` (the class of Arm cores on
//! BlueField-style DPUs) that runs the core's progress loop against a NIC queue. The
//! image, its virtio-net driver and the QEMU boot arrive with the firmware issue; this
//! library holds what the image shares with host-side tests.

#![no_std]
#![forbid(unsafe_code)]

pub use ofi_nostd;
