//! `net_af_xdp` on one end of a veth pair whose other end lives in a network namespace
//! the test creates (root only), against a kernel UDP echo there: the body is
//! [`kernel_udp::interop_with_kernel_udp`], shared with `af_packet.rs`.
//!
//! The driver binds an AF_XDP socket to queue 0 of the veth end (a veth has one
//! receive queue) in copy mode (`force_copy=1`: a veth has no zero-copy support), and
//! loads its XDP program there through libxdp. Skipped with a notice when not root, or
//! when the kernel has no AF_XDP sockets.
//!
//! The second test drives its port from a thread EAL does not know: without a
//! per-lcore mempool cache, allocations cycle through every mbuf of the pool, so a
//! pool whose later mbufs lie outside the AF_XDP UMEM loses frames there (what
//! `Mempool::new_packed` prevents; `docs/status.md`, DPDK section).

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

#[test]
fn af_xdp_from_a_thread_without_an_lcore() {
    let test = "af_xdp_from_a_thread_without_an_lcore";
    if !root_or_skip(test) || !af_xdp_or_skip(test) {
        return;
    }
    // EAL is initialised here (or by the other test), never on the thread below.
    common::eal();
    std::thread::spawn(move || {
        kernel_udp::interop_with_kernel_udp(
            test,
            "net_af_xdp",
            ",start_queue=0,queue_count=1,force_copy=1",
            3,
            2,
        );
    })
    .join()
    .expect("the port's thread");
}
