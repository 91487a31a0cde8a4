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

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, Ordering};

use hosted::api::DataPlane;
use hosted::dpdk::{DpdkPlane, init_eal, open_port};
use hosted::fault::FaultLink;
use hosted::mem::RawMemory;
use hosted::storage::Heap;
use hosted::sysinfo::HostInterface;
use ofi_nostd::Errno;
use ofi_nostd::domain::{Domain, ProgressReport};
use ofi_nostd::net::NetConfig;
use ofi_nostd::time::Instant;
use wire::link::Link;

use crate::plane::{Driver, Plane};

/// A DPDK queue pair (behind a fault injector with `loss`) and the always-readable
/// descriptor waits watch.
struct Dpdk<P> {
    plane: P,
    ready: OwnedFd,
}

impl<P: DataPlane> Driver for Dpdk<P> {
    fn progress(
        &mut self,
        core: &mut Domain<Heap>,
        now: Instant,
        mem: &mut RawMemory,
        kind: ofi_nostd::domain::PassKind,
    ) -> ofi_nostd::Result<ProgressReport> {
        let r = crate::plane::pass(core, now, &mut self.plane, mem, kind);
        DataPlane::flush(&mut self.plane);
        r
    }

    fn fd(&self) -> RawFd {
        self.ready.as_raw_fd()
    }
}

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
    // SAFETY: a plain syscall with valid flags; the result is checked before use.
    let fd = unsafe { libc::eventfd(1, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(Errno::ENOMEM);
    }
    // SAFETY: a descriptor just returned by the kernel, owned by nobody else.
    let ready = unsafe { OwnedFd::from_raw_fd(fd) };
    let plane = DpdkPlane::new(eal, link);
    let driver: Box<dyn Driver> = if loss > 0.0 {
        Box::new(Dpdk {
            plane: FaultLink::new(plane, crate::plane::lossy(loss)),
            ready,
        })
    } else {
        Box::new(Dpdk { plane, ready })
    };
    Ok(Plane { driver, net })
}
