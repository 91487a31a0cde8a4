//! `net_af_xdp` on one end of a veth pair whose other end lives in a network namespace
//! the test creates (root only), against a kernel UDP echo there: the body is
//! [`kernel_udp::interop_with_kernel_udp`], shared with `af_packet.rs`.
//!
//! This file is its own test binary, so `net_af_xdp` gets a process and an EAL of its
//! own. The driver binds an AF_XDP socket to queue 0 of the veth end (a veth has one
//! receive queue) in copy mode (`force_copy=1`: a veth has no zero-copy support), and
//! loads its XDP program there through libxdp.

#![cfg(feature = "dpdk")]

mod common;
#[path = "common/kernel_udp.rs"]
mod kernel_udp;

#[test]
fn af_xdp_interoperates_with_kernel_udp() {
    // net_af_xdp reaps its completion ring before it transmits, so the mbufs of the last
    // transmit burst (the one frame that stops the echo) stay with the driver until the
    // port closes.
    kernel_udp::interop_with_kernel_udp(
        "af_xdp_interoperates_with_kernel_udp",
        "net_af_xdp",
        ",start_queue=0,queue_count=1,force_copy=1",
        2,
        1,
    );
}
