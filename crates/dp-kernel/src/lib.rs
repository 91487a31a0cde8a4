//! Linux kernel data planes for ofi-nostd.
//!
//! Each type here implements the link traits of [`wire::link`], so the core drives it
//! exactly like a DPDK queue or the in-memory loopback:
//!
//! | link | medium | needs | batching |
//! |---|---|---|---|
//! | [`udp::UdpLink`] | [`Medium::Udp`](wire::link::Medium::Udp) | nothing (the default) | `recvmmsg` / `sendmmsg` |
//! | [`tap::TapLink`] | [`Medium::Ethernet`](wire::link::Medium::Ethernet) | `CAP_NET_ADMIN`, `/dev/net/tun` | one frame per `read`/`write` (the device has no batch call) |
//! | [`packet::AfPacketLink`] | [`Medium::Ethernet`](wire::link::Medium::Ethernet) | `CAP_NET_RAW`, an interface | `recvmmsg` / `sendmmsg` |
//!
//! All of them are non-blocking: `receive()` returns `None` rather than wait, so the
//! hosted adapter epolls the descriptor each link exposes through [`AsRawFd`] and calls
//! back in when it is readable (or writable while [`KernelLink::pending_tx`] is
//! non-zero).
//!
//! # Buffers
//!
//! Every buffer is allocated once, when the link is built; the data path allocates
//! nothing. Receive tokens lend a slot of a fixed receive ring, transmit tokens lend a
//! slot of a fixed transmit ring (see [`udp`] for the flush rule of the batched links).
//!
//! # Errors
//!
//! Construction returns [`std::io::Error`]. On the data path a kernel error never
//! reaches the stack and never wedges a link: it is counted in [`Stats`], the datagram
//! concerned is retried once and then dropped (the protocol above retransmits), and the
//! link carries on.
//!
//! # Safety
//!
//! The FFI lives in one private module of small functions, each `unsafe` block with the
//! reason it is sound; the links themselves are safe code over it.

#![deny(unsafe_op_in_unsafe_fn)]

use std::os::fd::AsRawFd;

use wire::link::Link;

mod mmsg;
pub mod packet;
mod sys;
pub mod tap;
pub mod udp;

pub use packet::{AfPacketLink, PacketConfig};
pub use tap::TapLink;
pub use udp::{UdpConfig, UdpLink};

/// `CLOCK_MONOTONIC` in microseconds: the time the hosted adapters run the core at,
/// read and converted in plain integers (every progress pass that moved something
/// reads it; std's `Instant::elapsed` cost about as much again as the reading). libc's
/// `clock_gettime`, not rustix's, whose vDSO lookup faults under valgrind.
pub fn monotonic_micros() -> u64 {
    sys::monotonic_micros()
}

/// The CPUs online on this host, whatever the calling thread's affinity: what
/// pinning threads "modulo the CPUs there are" needs, where
/// `std::thread::available_parallelism` counts only the CPUs the caller may run on
/// (after DPDK's EAL pinned its main thread, one).
pub fn online_cpus() -> usize {
    sys::online_cpus()
}

/// Counters of one link, so drops and kernel errors are visible instead of silent
/// (the data path never returns them as errors; see the crate docs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Buffers handed to the stack.
    pub rx_packets: u64,
    /// Bytes in those buffers.
    pub rx_bytes: u64,
    /// Receive system calls that returned data (for `recvmmsg` links, batches).
    pub rx_batches: u64,
    /// Receive system calls made, also those that found nothing.
    pub rx_calls: u64,
    /// Datagrams or frames longer than a receive slot, dropped (the kernel cut them).
    pub rx_truncated: u64,
    /// Frames the link dropped as not for the stack (AF_PACKET: our own outgoing
    /// frames on kernels without `PACKET_IGNORE_OUTGOING`).
    pub rx_filtered: u64,
    /// Receive system calls that failed with something else than "would block".
    pub rx_errors: u64,
    /// Coalesced GRO buffers received (each lent as the datagrams it holds, which
    /// `rx_packets` counts one by one).
    pub rx_gro: u64,
    /// Datagrams or frames the kernel accepted for transmission.
    pub tx_packets: u64,
    /// Bytes in those.
    pub tx_bytes: u64,
    /// Transmit system calls that sent at least one buffer (for `sendmmsg`, batches).
    pub tx_batches: u64,
    /// Flushes stopped by kernel back-pressure (`EAGAIN`/`ENOBUFS`); the buffers stayed
    /// queued and go out with a later flush.
    pub tx_busy: u64,
    /// Transmit system calls that failed with an error (`ECONNREFUSED`, `EMSGSIZE`,
    /// `ENETUNREACH`, ...).
    pub tx_errors: u64,
    /// GSO sends: runs of equal-size datagrams handed over as one buffer (their
    /// datagrams count in `tx_packets` one by one).
    pub tx_gso: u64,
    /// GSO runs the kernel or the device refused; each was sent again as plain
    /// datagrams (and GSO turned off for the socket if it had never worked).
    pub tx_gso_refused: u64,
    /// Buffers given up after the kernel refused them twice in a row (or, on TAP, once).
    pub tx_dropped: u64,
    /// Transmit tokens the stack filled with an unusable length (larger than the lent
    /// buffer) or, on UDP, without a destination: nothing was queued.
    pub tx_refused: u64,
    /// `transmit()` calls that returned `None` because the ring stayed full.
    pub tx_full: u64,
    /// The last `errno` seen on the data path (0: none yet), for diagnostics.
    pub last_errno: i32,
}

/// What the hosted adapter needs from any kernel data plane beyond [`Link`]: a
/// descriptor to epoll, control over queued transmissions, and counters. Implemented by
/// all three links so the adapter can be generic over them.
pub trait KernelLink: Link + AsRawFd {
    /// Push every queued transmit buffer to the kernel now. Returns how many are still
    /// queued because the kernel pushed back (wait for the descriptor to be writable,
    /// then flush again); kernel errors are counted in [`Stats`], never returned.
    fn flush(&mut self) -> usize;

    /// Transmit buffers queued and not yet handed to the kernel.
    fn pending_tx(&self) -> usize;

    /// The link's counters.
    fn stats(&self) -> Stats;
}

#[cfg(test)]
mod tests {
    /// The hosted adapter runs progress on a thread of its own, so links must move.
    #[test]
    fn links_are_send() {
        fn send<T: Send>() {}
        send::<crate::UdpLink>();
        send::<crate::TapLink>();
        send::<crate::AfPacketLink>();
    }

    /// The clock runs with std's monotonic one: never backwards, and a sleep of 20 ms
    /// reads as at least 20 ms and (on any host) well under 20 s.
    #[test]
    fn monotonic_micros_follows_the_monotonic_clock() {
        let (t0, s0) = (crate::monotonic_micros(), std::time::Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (t1, s1) = (crate::monotonic_micros(), std::time::Instant::now());
        let std_us = s1.duration_since(s0).as_micros() as u64;
        assert!(t1 >= t0 + 20_000, "{t0} -> {t1}");
        assert!(t1 - t0 < 20_000_000, "{t0} -> {t1}");
        // Both read CLOCK_MONOTONIC: the two spans agree to within the reads' order.
        assert!(
            (t1 - t0).abs_diff(std_us) < 5_000,
            "{} vs {std_us}",
            t1 - t0
        );
    }
}
