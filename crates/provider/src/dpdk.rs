//! The `dpdk` data plane (`FI_NOSTD_DATAPLANE=dpdk`, built with the `dpdk` feature): one
//! queue pair of a DPDK port, the stack at the domain's interface address with the
//! port's MAC.
//!
//! - `eal` (`FI_NOSTD_EAL`): EAL arguments, split at whitespace (default: no hugepages,
//!   no PCI, a unique file prefix, 256 MB: enough for virtual devices). EAL initialises
//!   once per process; the thread of the first `fi_domain` becomes its main lcore.
//!   Arguments that choose no lcores get `--lcores 0@(0-N)`, so EAL does not pin that
//!   thread (the application's own) to CPU 0.
//! - `dpdk_vdev` (`FI_NOSTD_DPDK_VDEV`): the device arguments of the port to hot-plug
//!   (e.g. `net_memif0,role=client,socket=/run/m.sock`); default `net_af_packet` on the
//!   domain's interface (`net_af_packetnostd<N>,iface=<interface>`, needs CAP_NET_RAW).
//!
//! DPDK is poll mode: the descriptor the provider's wait objects watch is an eventfd
//! that is always readable, so `fi_cq_sread`, `fi_cntr_wait` and epoll on FI_GETWAIT
//! descriptors poll instead of sleeping. The `loss` parameter drops received frames as on
//! the kernel planes.

use std::sync::atomic::{AtomicU32, Ordering};

use hosted::dpdk::{DpdkPlane, init_eal, open_port};
use hosted::fault::FaultLink;
use hosted::mem::RawMemory;
use hosted::runtime::{Driver, PollMode};
use hosted::sysinfo::HostInterface;
use ofi_nostd::Errno;
use ofi_nostd::net::NetConfig;
use wire::link::Link;

use crate::plane::Plane;

/// Domains opened on DPDK in this process (unique default device names and ports).
static PORTS: AtomicU32 = AtomicU32::new(0);

fn non_empty(s: Option<String>) -> Option<String> {
    s.filter(|v| !v.trim().is_empty())
}

/// Opens the DPDK port the parameters name for a domain on `iface`, at UDP `port` (0:
/// one from the dynamic range).
pub fn open(iface: &HostInterface, port: u16, loss: f64) -> Result<Plane, Errno> {
    let eal =
        init_eal(non_empty(crate::params::get_str(c"eal")).as_deref()).map_err(|_| Errno::EIO)?;
    let n = PORTS.fetch_add(1, Ordering::Relaxed);
    let vdev = non_empty(crate::params::get_str(c"dpdk_vdev"))
        .unwrap_or_else(|| format!("net_af_packetnostd{n},iface={}", iface.name));
    // An Ethernet stack needs a port of its own: one from the dynamic range when the
    // application gave none.
    let port = crate::plane::stack_port(port, n);
    let p = open_port(eal, Some(&vdev), None).map_err(|_| Errno::EIO)?;
    let link = p.link(0).map_err(|_| Errno::EBUSY)?;
    let net = NetConfig::new(&link.capabilities(), iface.ip.octets(), port).with_ethernet(
        link.mac(),
        iface.prefix_len,
        None,
    );
    let caps = link.capabilities();
    let plane = DpdkPlane::new(eal, link);
    // Poll mode: the descriptor waits watch is always readable.
    let driver: Box<dyn Driver<RawMemory>> = if loss > 0.0 {
        let lossy = FaultLink::new(plane, crate::plane::lossy(loss));
        Box::new(PollMode::new(lossy).map_err(|_| Errno::ENOMEM)?)
    } else {
        Box::new(PollMode::new(plane).map_err(|_| Errno::ENOMEM)?)
    };
    Ok(Plane { driver, caps, net })
}
