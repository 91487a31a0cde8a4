//! Data planes: what a domain moves its frames over, chosen by the `dataplane`
//! parameter (`FI_NOSTD_DATAPLANE`).
//!
//! - `udp` (default): a kernel UDP socket bound to the domain's interface address; the
//!   port is the one of the application's `src_addr`, or ephemeral.
//! - `af_packet`: an AF_PACKET socket on the domain's interface (needs CAP_NET_RAW); the
//!   stack answers ARP and frames UDP/IPv4 itself, at the interface's address.
//! - `tap`: a TAP device `nostd<N>` (needs CAP_NET_ADMIN); the stack sits at the far
//!   end of it, at the interface's address.
//! - `dpdk`: a DPDK port (`eal`, `dpdk_vdev` parameters; see the `dpdk` module) in a
//!   library built with the `dpdk` feature; -FI_ENOSYS otherwise.
//!
//! With the `loss` parameter (`FI_NOSTD_LOSS`, a fraction) above 0, received frames
//! pass through a [`FaultLink`] that drops that fraction of them: fault injection for
//! testing the reliability engine through unmodified applications.

use std::net::{Ipv4Addr, SocketAddrV4};

use dp_kernel::{AfPacketLink, TapLink, UdpConfig, UdpLink};
use hosted::fault::{FaultConfig, FaultLink, FaultSpec};
use hosted::mem::RawMemory;
use hosted::runtime::{Clocked, DataPlane, Driver};
use hosted::sysinfo::HostInterface;
use ofi_nostd::Errno;
use ofi_nostd::net::NetConfig;
use wire::link::{Capabilities, Link};

/// An open data plane and where the stack sits on it.
pub struct Plane {
    /// The link, as the runtime drives it.
    pub driver: Box<dyn Driver<RawMemory>>,
    /// What the link offers (the CRC rule derives from it).
    pub caps: Capabilities,
    /// The stack's place on it (address, port, MTU, Ethernet details).
    pub net: NetConfig,
}

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

fn io(e: std::io::Error) -> Errno {
    match e.raw_os_error() {
        Some(libc::EADDRINUSE) => Errno::EADDRINUSE,
        Some(libc::EACCES) | Some(libc::EPERM) => Errno::EACCES,
        Some(libc::EADDRNOTAVAIL) => Errno::EADDRNOTAVAIL,
        Some(libc::ENOMEM) => Errno::ENOMEM,
        _ => Errno::EIO,
    }
}

fn seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish()
}

/// The fault injector of the `loss` parameter: that fraction of received frames lost.
pub(crate) fn lossy(loss: f64) -> FaultConfig {
    let mut cfg = FaultConfig::new(seed());
    cfg.rx = FaultSpec {
        loss,
        ..FaultSpec::NONE
    };
    cfg
}

/// `link` behind the `loss` parameter's fault injector (its clock driven by the passes)
/// when `loss` > 0, and where the stack sits on it.
fn plane<L: DataPlane>(link: L, loss: f64, net: NetConfig) -> Plane {
    let caps = link.capabilities();
    let driver: Box<dyn Driver<RawMemory>> = if loss > 0.0 {
        Box::new(Clocked(FaultLink::new(link, lossy(loss))))
    } else {
        Box::new(link)
    };
    Plane { driver, caps, net }
}

/// A random unicast, locally administered MAC (TAP: the kernel owns the interface's).
fn random_mac() -> [u8; 6] {
    let r = seed().to_be_bytes();
    [(r[0] & 0xfc) | 0x02, r[1], r[2], r[3], r[4], r[5]]
}

/// The UDP port of an Ethernet stack (AF_PACKET, TAP, DPDK), which has no kernel to
/// pick an ephemeral one: `port`, or for 0 one from the dynamic range (49152-65535),
/// different for each process and each `n` (the plane's sequence number in it).
pub(crate) fn stack_port(port: u16, n: u32) -> u16 {
    if port != 0 {
        return port;
    }
    49152 + (std::process::id().wrapping_add(n.wrapping_mul(7919)) % 16384) as u16
}

/// Ethernet planes opened in this process (for [`stack_port`]).
static STACK_PLANES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Opens the data plane the parameters name on `iface`, at UDP port `port` (0:
/// ephemeral for `udp`, one from the dynamic range for the Ethernet planes).
pub fn open(iface: &HostInterface, port: u16) -> Result<Plane, Errno> {
    let loss = loss()?;
    let kind = crate::params::get_str(c"dataplane").unwrap_or_default();
    match kind.trim() {
        "" | "udp" => {
            // Datagrams as large as the interface allows, as getinfo advertised
            // (max_msg_size of FI_EP_DGRAM endpoints).
            let mut cfg = UdpConfig::new(SocketAddrV4::new(iface.ip, port));
            cfg.max_payload = iface
                .mtu
                .saturating_sub(28)
                .clamp(576, dp_kernel::udp::MAX_UDP_PAYLOAD);
            let link = UdpLink::new(cfg).map_err(io)?;
            let local = link.local_addr();
            let net = NetConfig::new(&link.capabilities(), local.ip().octets(), local.port());
            Ok(plane(link, loss, net))
        }
        "af_packet" => {
            let link = AfPacketLink::open(&iface.name).map_err(io)?;
            let n = STACK_PLANES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let port = stack_port(port, n);
            let net = NetConfig::new(&link.capabilities(), iface.ip.octets(), port).with_ethernet(
                link.mac(),
                iface.prefix_len,
                None,
            );
            Ok(plane(link, loss, net))
        }
        "tap" => {
            let link = TapLink::open(None).map_err(io)?;
            link.set_up(true).map_err(io)?;
            let n = STACK_PLANES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let port = stack_port(port, n);
            let ip: Ipv4Addr = iface.ip;
            let net = NetConfig::new(&link.capabilities(), ip.octets(), port).with_ethernet(
                random_mac(),
                iface.prefix_len,
                None,
            );
            Ok(plane(link, loss, net))
        }
        #[cfg(feature = "dpdk")]
        "dpdk" => crate::dpdk::open(iface, port, loss),
        #[cfg(not(feature = "dpdk"))]
        "dpdk" => Err(Errno::ENOSYS),
        _ => Err(Errno::EINVAL),
    }
}
