//! The host runtime: one domain of the core on its data plane, as the safe API
//! ([`crate::api`]) and the C provider both run it.
//!
//! | part | here |
//! |---|---|
//! | the data plane and its object-safe face | [`plane`]: [`DataPlane`], [`Driver`] |
//! | opening a plane from its description | [`open`]: [`open_plane`], [`open_plane_with`], [`PlaneKind`], [`PlaneOptions`] |
//! | the pass, the read-without-pass policy, the nap before sleeping | [`Runtime`], [`ReadBudget`], [`nap_until_timer`] |
//! | the time passes run at | [`clock`]: [`now`], [`PassClock`] |
//! | the wake-up registry | [`wake`]: [`Wakeups`] |
//! | the progress thread, its policy a parameter | [`thread`]: [`ProgressThread`], [`Policy`] |
//! | blocking primitives | [`wait`]: [`WaitSet`] |
//! | the interface that reaches a peer best (`lo` for a local one) | [`route`]: [`route::best_interface`] |
//! | the host's RDM defaults and the CRC rule | [`host_rdm_config`] |
//!
//! The owner keeps the [`Runtime`] under its own domain lock (the safe API a mutex,
//! the provider its FI_THREAD_DOMAIN-aware spin lock) next to its own tables, and
//! supplies the memory passes copy through and the wait objects they signal.

use ofi_nostd::rdm::RdmConfig;
use wire::link::{Capabilities, Medium};

use crate::storage::Heap;

pub mod clock;
pub mod open;
mod pass;
pub mod plane;
pub mod route;
pub mod thread;
pub mod wait;
pub mod wake;

pub use clock::{IDLE_PASSES_PER_CLOCK, MIN_NAP, PassClock, nap_until_timer, now, progress_until};
#[cfg(feature = "dpdk")]
pub use open::DpdkPort;
pub use open::{
    Capture, Ethernet, OpenError, Plane, PlaneKind, PlaneOptions, dynamic_port, open_plane,
    open_plane_with, random_u64,
};
pub use pass::{Core, QUEUE_STARVE, ReadBudget, Runtime, Turn};
pub use plane::{Clocked, DataPlane, Driver, PassMemory, PollMode, QueueCounts, Queues, WithFd};
pub use thread::{AutoProgress, Policy, ProgressThread};
pub use wait::{EpollSet, Sleeper, WaitObject, WaitSet};
pub use wake::{Signal, Wake, Wakeups};

/// The core domain of a host runtime.
pub type CoreDomain = ofi_nostd::domain::Domain<Heap>;
/// The core fabric of a host runtime.
pub type CoreFabric = ofi_nostd::fabric::Fabric<Heap>;

/// Completions a manual-progress read may hand out from a non-empty CQ before it runs a
/// progress pass anyway (see [`ReadBudget`]).
pub const READS_PER_PASS: u32 = 32;

/// ARP cache entries of a domain on an Ethernet link.
pub const HOST_ARP_ENTRIES: usize = 64;

/// Peers an RDM endpoint keeps sessions with on a host: as many addresses as a default
/// AV holds (an MPI job of that many ranks never waits). Beyond that, sessions idle
/// for a while make room (`RdmStats::sessions_evicted`). About 3 KiB each, allocated
/// when the endpoint opens.
pub const HOST_MAX_PEERS: usize = 1024;

/// Segments of unexpected eager messages an RDM endpoint buffers on a host (a packet's
/// payload each, at most `RdmConfig::unexp_seg`: 8 KiB; at most 64 MiB in all).
/// Applications that send far ahead of their receives (an MPI rank posting thousands
/// of `MPI_Isend` before its first receive) need them, or every sender waits; the
/// buffer is zeroed memory from the system, so what traffic never fills costs no
/// resident memory.
pub const HOST_UNEXP_SLOTS: usize = 8192;

/// Unexpected messages (eager, or rendezvous announcements) an RDM endpoint queues on
/// a host; as many as its transmit queue holds
/// ([`ProviderConfig::DEFAULT`](ofi_nostd::info::ProviderConfig::DEFAULT)`.tx_size`).
pub const HOST_UNEXP_MSGS: usize = 8192;

/// Whether RDM packets on a link with `caps` carry the protocol's CRC32C. Kernel UDP
/// sockets verify the UDP checksum end to end, and an intact medium (memif) cannot
/// corrupt, so the CRC (spec 3.3: SHOULD only where nothing else protects the packet)
/// would only cost CPU on every byte. A peer that wants it (CRC_RX) still gets it.
pub fn crc_wanted(caps: &Capabilities) -> bool {
    caps.medium != Medium::Udp && !caps.intact
}

/// The RDM tuning of a host domain on a link with `caps`: the core's `base` with the
/// host's table sizes ([`HOST_MAX_PEERS`], [`HOST_UNEXP_SLOTS`], [`HOST_UNEXP_MSGS`])
/// and the CRC rule ([`crc_wanted`]).
pub fn host_rdm_config(base: &RdmConfig, caps: &Capabilities) -> RdmConfig {
    RdmConfig {
        crc: crc_wanted(caps),
        max_peers: HOST_MAX_PEERS,
        unexp_slots: HOST_UNEXP_SLOTS,
        unexp_msgs: HOST_UNEXP_MSGS,
        ..*base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_only_where_nothing_else_protects_a_packet() {
        let udp = Capabilities::new(Medium::Udp, 1472);
        let eth = Capabilities::new(Medium::Ethernet, 1514);
        let memif = Capabilities {
            intact: true,
            ..eth
        };
        assert!(!crc_wanted(&udp));
        assert!(crc_wanted(&eth));
        assert!(!crc_wanted(&memif));
        let base = RdmConfig::default();
        let c = host_rdm_config(&base, &eth);
        assert!(c.crc && c.max_peers == HOST_MAX_PEERS && c.window == base.window);
    }
}
