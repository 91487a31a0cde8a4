//! `net_af_xdp` on one end of a veth pair whose other end lives in a network namespace
//! the test creates (root only), against a kernel UDP echo there: the body is
//! [`kernel_udp::interop_with_kernel_udp`], shared with `af_packet.rs`.
//!
//! The driver binds an AF_XDP socket to queue 0 of the veth end (a veth has one
//! receive queue) in copy mode (`force_copy=1`: a veth has no zero-copy support), and
//! loads its XDP program there through libxdp. Skipped with a notice when not root, or
//! when the kernel has no AF_XDP sockets.
//!
//! This file is its own test binary, so the `net_af_xdp` port is the first and only
//! port of its process: opened after another port of the same process was closed, it
//! loses transmitted frames (`docs/status.md`, DPDK section).

#![cfg(feature = "dpdk")]

mod common;
#[path = "common/kernel_udp.rs"]
mod kernel_udp;

use common::{af_xdp_or_skip, root_or_skip};

#[test]
fn af_xdp_interoperates_with_kernel_udp() {
    let test = "af_xdp_interoperates_with_kernel_udp";
    if !root_or_skip(test) || !af_xdp_or_skip(test) {
        return;
    }
    // net_af_xdp reaps its completion ring before it transmits, so the mbufs of the last
    // transmit burst (the one frame that stops the echo) stay with the driver until the
    // port closes.
    kernel_udp::interop_with_kernel_udp(
        test,
        "net_af_xdp",
        ",start_queue=0,queue_count=1,force_copy=1",
        2,
        1,
    );
}
