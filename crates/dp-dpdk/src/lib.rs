//! DPDK poll-mode data plane for ofi-nostd.
//!
//! Implements the link traits of [`wire::link`] on DPDK 22.11 poll-mode queues, so the
//! core drives a NIC queue (or a virtual device) exactly like a kernel socket or the
//! in-memory loopback.
//!
//! # Building
//!
//! Everything that touches DPDK sits behind the **`dpdk` feature**. Without it (the
//! default) this crate is an empty shell: it needs no DPDK, compiles no C and contains
//! only [`ENABLED`] (`false`), so the workspace builds and tests anywhere; `cargo xtask
//! test` says so when it skips the DPDK tests, and `cargo xtask test-dpdk` runs them.
//!
//! With `--features dpdk`, `build.rs` needs Debian's DPDK 22.11 (`libdpdk-dev`),
//! `pkg-config` and `libclang-dev`: it takes the whole `pkg-config --cflags libdpdk`
//! list (`-include rte_config.h` included), generates the bindings of `csrc/shim.h`
//! with bindgen (allowlisted to what this crate calls), compiles `csrc/shim.c` — one
//! wrapper per DPDK `static inline` function or macro it uses (`rte_eth_rx_burst`,
//! `rte_eth_tx_burst`, `rte_pktmbuf_alloc`/`free`/`append`/`trim`/`mtod`, `rte_errno`,
//! `rte_lcore_id`, ...) — and links the shared DPDK libraries `pkg-config --libs`
//! names. Poll-mode drivers are plugins EAL loads from Debian's driver directory at
//! [`Eal::init`], so every PMD of the installed DPDK is available (`net_memif`,
//! `net_af_packet`, `net_af_xdp`, `net_tap`, `net_ring`, NIC drivers).
//!
//! # Pieces
//!
//! | type | what it owns |
//! |---|---|
//! | [`Eal`] | the process's one `rte_eal_init` (a second init with other arguments is an error) |
//! | [`Mempool`], [`Mbuf`] | a packet pool; one mbuf, freed exactly once (`Drop`, or [`Mbuf::into_raw`] for a hand-off) |
//! | [`Port`] | a started port with one queue pair per lcore; stop, (memif) wait for link down, close |
//! | [`DpdkLink`] | one queue pair as a [`Link`](wire::link::Link) of [`Medium::Ethernet`](wire::link::Medium::Ethernet): burst receive, zero-copy transmit ([`link`] has the rules) |
//!
//! # Running without hugepages
//!
//! [`virtual_device_args`] gives EAL options for an ordinary Linux host: `--no-huge
//! --no-pci --no-shconf --file-prefix <unique> -m <MB>`. Virtual devices then need no
//! root for `net_memif` (two processes over a UNIX socket); `net_af_packet` and
//! `net_af_xdp` need `CAP_NET_RAW`/`CAP_NET_ADMIN` on an interface (the tests use veth
//! pairs in network namespaces; `net_af_xdp` in copy mode on queue 0 of the veth).
//! A `net_af_xdp` port gets a packed mbuf pool ([`Mempool::new_packed`]): DPDK 22.11
//! registers only the first `mbufs x object size` bytes of the pool as the AF_XDP
//! UMEM, which a default pool on 4 KiB pages outgrows.
//!
//! # Safety
//!
//! The raw bindings live in a private module; every `unsafe` block in the safe wrappers
//! states why it is sound.

#![cfg_attr(not(feature = "dpdk"), forbid(unsafe_code))]
// Without the feature the types these docs link to do not exist.
#![cfg_attr(not(feature = "dpdk"), allow(rustdoc::broken_intra_doc_links))]

/// Whether this build was compiled against the system DPDK (the `dpdk` feature).
pub const ENABLED: bool = cfg!(feature = "dpdk");

#[cfg(feature = "dpdk")]
mod eal;
#[cfg(feature = "dpdk")]
mod error;
#[cfg(feature = "dpdk")]
pub mod link;
#[cfg(feature = "dpdk")]
mod mbuf;
#[cfg(feature = "dpdk")]
mod port;
#[cfg(feature = "dpdk")]
mod sys;

#[cfg(feature = "dpdk")]
pub use eal::{Eal, free_main_lcore, unique_file_prefix, virtual_device_args};
#[cfg(feature = "dpdk")]
pub use error::Error;
#[cfg(feature = "dpdk")]
pub use link::{DpdkLink, MAX_BURST, Stats};
#[cfg(feature = "dpdk")]
pub use mbuf::{DEFAULT_DATA_ROOM, HEADROOM, Mbuf, Mempool, PoolLayout};
#[cfg(feature = "dpdk")]
pub use port::{
    DEFAULT_MBUFS, DEFAULT_RING, DONE_MAGIC, ETHERTYPE_DONE, LinkStatus, MEMIF_DEFAULT_BSIZE,
    MEMIF_DOWN_TIMEOUT, MEMIF_PEER_GRACE, MEMIF_SERVER_GRACE, MEMIF_SETTLE, Port, PortConfig,
    PortStats, data_room_for_mtu, port_name,
};
