//! Data planes: what a domain moves its frames over, chosen by the `dataplane`
//! parameter (`FI_NOSTD_DATAPLANE`).
//!
//! - `udp` (default): a kernel UDP socket bound to the domain's interface address; the
//!   port is the one of the application's `src_addr`, or ephemeral.
//! - `af_packet`: an AF_PACKET socket on the domain's interface (needs CAP_NET_RAW); the
//!   stack answers ARP and frames UDP/IPv4 itself, at the interface's address.
//! - `tap`: a TAP device `nostd<N>` (needs CAP_NET_ADMIN); the stack sits at the far
//!   end of it, at the interface's address.
//! - `dpdk`: one queue pair of a DPDK port, at the interface's address with the port's
//!   MAC, in a library built with the `dpdk` feature; -FI_ENOSYS otherwise.
//!   - `eal` (`FI_NOSTD_EAL`): EAL arguments, split at whitespace (default: no
//!     hugepages, no PCI, a unique file prefix, 256 MB: enough for virtual devices). EAL
//!     initialises once per process; the thread of the first `fi_domain` becomes its
//!     main lcore. Arguments that choose no lcores get `--lcores 0@(0-N)`, so EAL does
//!     not pin that thread (the application's own) to CPU 0.
//!   - `dpdk_vdev` (`FI_NOSTD_DPDK_VDEV`): the device arguments of the port to hot-plug
//!     (e.g. `net_memif0,role=client,socket=/run/m.sock`); default `net_af_packet` on
//!     the domain's interface (`net_af_packetnostd<N>,iface=<interface>`, needs
//!     CAP_NET_RAW).
//!
//!   DPDK is poll mode: the descriptor the provider's wait objects watch is an eventfd
//!   that is always readable, so `fi_cq_sread`, `fi_cntr_wait` and epoll on FI_GETWAIT
//!   descriptors poll instead of sleeping.
//!
//! With the `loss` parameter (`FI_NOSTD_LOSS`, a fraction) above 0, received frames
//! pass through a [`FaultLink`](hosted::fault::FaultLink) that drops that fraction of
//! them: fault injection for testing the reliability engine through unmodified
//! applications.
//!
//! The host runtime opens the plane ([`open_plane_with`]); this module turns the parameters
//! into its description.

use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicU32, Ordering};

use dp_kernel::UdpConfig;
use hosted::mem::RawMemory;
use hosted::runtime::{Ethernet, PlaneKind, PlaneOptions, open_plane_with};
use hosted::sysinfo::HostInterface;
use ofi_nostd::Errno;

/// An open data plane and where the stack sits on it.
pub type Plane = hosted::runtime::Plane<RawMemory>;

/// The `loss` parameter: a fraction in `0.0..=1.0`; anything else is -FI_EINVAL.
pub fn loss() -> Result<f64, Errno> {
    match crate::params::get_str(c"loss") {
        None => Ok(0.0),
        Some(s) if s.trim().is_empty() => Ok(0.0),
        Some(s) => match s.trim().parse::<f64>() {
            Ok(v) if (0.0..=1.0).contains(&v) => Ok(v),
            _ => Err(Errno::EINVAL),
        },
    }
}

/// The libfabric code of a failure to open a plane (the runtime reports DPDK's by
/// kind, without an OS code).
fn io(e: std::io::Error) -> Errno {
    match e.raw_os_error() {
        Some(libc::EADDRINUSE) => Errno::EADDRINUSE,
        Some(libc::EACCES) | Some(libc::EPERM) => Errno::EACCES,
        Some(libc::EADDRNOTAVAIL) => Errno::EADDRNOTAVAIL,
        Some(libc::ENOMEM) => Errno::ENOMEM,
        Some(_) => Errno::EIO,
        None => match e.kind() {
            std::io::ErrorKind::ResourceBusy => Errno::EBUSY,
            std::io::ErrorKind::OutOfMemory => Errno::ENOMEM,
            _ => Errno::EIO,
        },
    }
}

/// The UDP port of an Ethernet stack (AF_PACKET, TAP, DPDK), which has no kernel to
/// pick an ephemeral one: `port`, or for 0 one from the dynamic range (49152-65535),
/// different for each process and each `n` (the plane's sequence number in it).
pub(crate) fn stack_port(port: u16, n: u32) -> u16 {
    if port != 0 {
        port
    } else {
        hosted::runtime::dynamic_port(n)
    }
}

/// Kernel Ethernet planes opened in this process (for [`stack_port`]).
static STACK_PLANES: AtomicU32 = AtomicU32::new(0);

/// Domains opened on DPDK in this process (unique default device names and ports).
#[cfg(feature = "dpdk")]
static DPDK_PORTS: AtomicU32 = AtomicU32::new(0);

/// Opens the data plane the parameters name on `iface`, at UDP port `port` (0:
/// ephemeral for `udp`, one from the dynamic range for the Ethernet planes).
pub fn open(iface: &HostInterface, port: u16) -> Result<Plane, Errno> {
    let loss = loss()?;
    // The stack at the interface's address, on port `n`'s.
    let eth = |n: u32| Ethernet {
        ip: iface.ip,
        port: stack_port(port, n),
        prefix_len: iface.prefix_len,
        gateway: None,
        mac: None,
    };
    let kernel_eth = || eth(STACK_PLANES.fetch_add(1, Ordering::Relaxed));
    let kind = crate::params::get_str(c"dataplane").unwrap_or_default();
    let kind = match kind.trim() {
        "" | "udp" => {
            // Datagrams as large as the interface allows, as getinfo advertised
            // (max_msg_size of FI_EP_DGRAM endpoints).
            let mut cfg = UdpConfig::new(SocketAddrV4::new(iface.ip, port));
            cfg.max_payload = iface
                .mtu
                .saturating_sub(28)
                .clamp(576, dp_kernel::udp::MAX_UDP_PAYLOAD);
            PlaneKind::Udp(cfg)
        }
        "af_packet" => PlaneKind::AfPacket(iface.name.clone(), kernel_eth()),
        "tap" => PlaneKind::Tap(None, kernel_eth()),
        #[cfg(feature = "dpdk")]
        "dpdk" => {
            let non_empty = |s: Option<String>| s.filter(|v| !v.trim().is_empty());
            let eal = non_empty(crate::params::get_str(c"eal"));
            let eal = hosted::dpdk::init_eal(eal.as_deref()).map_err(|_| Errno::EIO)?;
            let n = DPDK_PORTS.fetch_add(1, Ordering::Relaxed);
            let vdev = non_empty(crate::params::get_str(c"dpdk_vdev"))
                .unwrap_or_else(|| format!("net_af_packetnostd{n},iface={}", iface.name));
            PlaneKind::Dpdk(eal, vdev, eth(n))
        }
        #[cfg(not(feature = "dpdk"))]
        "dpdk" => return Err(Errno::ENOSYS),
        _ => return Err(Errno::EINVAL),
    };
    let opts = PlaneOptions {
        queues: crate::params::get_size(c"queues").unwrap_or(1),
        ..PlaneOptions::loss(loss)
    };
    open_plane_with(kind, opts).map_err(|e| io(e.into()))
}
