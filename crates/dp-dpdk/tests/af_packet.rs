//! `net_af_packet` on one end of a veth pair whose other end lives in a network
//! namespace the test creates (root only), against a kernel UDP echo there: the body
//! is [`kernel_udp::interop_with_kernel_udp`], shared with `af_xdp.rs`.

#![cfg(feature = "dpdk")]

mod common;
#[path = "common/kernel_udp.rs"]
mod kernel_udp;

#[test]
fn af_packet_interoperates_with_kernel_udp() {
    // AF_PACKET copies every frame out at transmit: the driver holds no mbuf after it.
    kernel_udp::interop_with_kernel_udp(
        "af_packet_interoperates_with_kernel_udp",
        "net_af_packet",
        "",
        1,
        0,
    );
}
