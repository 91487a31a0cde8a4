//! Opening a data plane from its description: what the safe API's
//! [`DomainBuilder`](crate::api::DomainBuilder) and the C provider's `fi_domain` both do
//! before a domain opens on it. The caller chooses the plane (builder methods, the
//! provider's `dataplane` parameter) and where the stack sits; this opens the link,
//! puts it behind a loss injector when asked, and says where the stack is on it.

use std::io;
use std::net::Ipv4Addr;

use dp_kernel::{AfPacketLink, TapLink, UdpConfig, UdpLink};
use ofi_nostd::net::NetConfig;
use wire::link::{Capabilities, Link};

use super::plane::{Clocked, DataPlane, Driver, PassMemory};
use crate::fault::{FaultConfig, FaultLink, FaultSpec};

/// Where a stack on an Ethernet link (TAP, AF_PACKET, DPDK) sits on its network.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ethernet {
    /// Our IPv4 address.
    pub ip: Ipv4Addr,
    /// Our UDP port.
    pub port: u16,
    /// The subnet's prefix length.
    pub prefix_len: u8,
    /// The next hop off the subnet.
    pub gateway: Option<Ipv4Addr>,
    /// Our MAC; `None`: the interface's (AF_PACKET, DPDK) or a random locally
    /// administered one (TAP, where the kernel owns the interface's MAC).
    pub mac: Option<[u8; 6]>,
}

/// A data plane to open.
#[derive(Debug)]
pub enum PlaneKind {
    /// A kernel UDP socket built from this configuration; the stack at its address.
    Udp(UdpConfig),
    /// A TAP device (needs CAP_NET_ADMIN): this name, created if missing, or `None`
    /// for a new `nostd<N>`; the stack at the far end of it.
    Tap(Option<String>, Ethernet),
    /// An AF_PACKET socket on this interface (needs CAP_NET_RAW); the stack answers
    /// ARP and frames UDP/IPv4 itself.
    AfPacket(String, Ethernet),
    /// One queue pair of a DPDK port: hot-plugged from these device arguments (see
    /// [`open_port`](crate::dpdk::open_port)) on an initialised EAL. Poll mode: the
    /// descriptor waiters watch is always readable ([`PollMode`](super::PollMode)).
    #[cfg(feature = "dpdk")]
    Dpdk(&'static crate::dpdk::Eal, String, Ethernet),
}

impl PlaneKind {
    /// A name for the plane's interface (getinfo's domain name in the safe API).
    pub fn name(&self) -> String {
        match self {
            PlaneKind::Udp(_) => "udp".to_owned(),
            PlaneKind::Tap(name, _) => name.clone().unwrap_or_else(|| "tap".to_owned()),
            PlaneKind::AfPacket(ifname, _) => ifname.clone(),
            #[cfg(feature = "dpdk")]
            PlaneKind::Dpdk(..) => "dpdk".to_owned(),
        }
    }
}

/// An open data plane and where the stack sits on it, driven through memory `M`.
pub struct Plane<M: ?Sized> {
    /// The link, as the runtime drives it.
    pub driver: Box<dyn Driver<M>>,
    /// What the link offers (the CRC rule derives from it).
    pub caps: Capabilities,
    /// The stack's place on it (address, port, MTU, Ethernet details).
    pub net: NetConfig,
}

/// Opens the plane `kind` describes; with `loss` > 0 that fraction of the frames it
/// receives is dropped (fault injection, the injector's clock following the passes).
///
/// Errors are the system's; a DPDK port that cannot be opened is
/// [`io::ErrorKind::Other`], one without a free queue [`io::ErrorKind::ResourceBusy`],
/// a descriptor for poll mode that cannot be made [`io::ErrorKind::OutOfMemory`].
pub fn open_plane<M: PassMemory + ?Sized>(kind: PlaneKind, loss: f64) -> io::Result<Plane<M>> {
    match kind {
        PlaneKind::Udp(cfg) => {
            let link = UdpLink::new(cfg)?;
            let local = link.local_addr();
            let net = NetConfig::new(&link.capabilities(), local.ip().octets(), local.port());
            Ok(plane(link, loss, net))
        }
        PlaneKind::Tap(name, eth) => {
            let link = TapLink::open(name.as_deref())?;
            link.set_up(true)?;
            let net = ethernet(
                &link.capabilities(),
                &eth,
                eth.mac.unwrap_or_else(random_mac),
            );
            Ok(plane(link, loss, net))
        }
        PlaneKind::AfPacket(ifname, eth) => {
            let link = AfPacketLink::open(&ifname)?;
            let net = ethernet(&link.capabilities(), &eth, eth.mac.unwrap_or(link.mac()));
            Ok(plane(link, loss, net))
        }
        #[cfg(feature = "dpdk")]
        PlaneKind::Dpdk(eal, vdev, eth) => dpdk(eal, &vdev, &eth, loss),
    }
}

/// The DPDK arm of [`open_plane`]: the port's first queue pair in poll mode.
#[cfg(feature = "dpdk")]
fn dpdk<M: PassMemory + ?Sized>(
    eal: &'static crate::dpdk::Eal,
    vdev: &str,
    eth: &Ethernet,
    loss: f64,
) -> io::Result<Plane<M>> {
    use super::PollMode;
    use crate::dpdk::{DpdkPlane, open_port};
    let p = open_port(eal, Some(vdev), None).map_err(io::Error::other)?;
    let link = p
        .link(0)
        .map_err(|_| io::Error::from(io::ErrorKind::ResourceBusy))?;
    let caps = link.capabilities();
    let net = ethernet(&caps, eth, eth.mac.unwrap_or(link.mac()));
    let plane = DpdkPlane::new(eal, link);
    let oom = |_| io::Error::from(io::ErrorKind::OutOfMemory);
    let driver: Box<dyn Driver<M>> = if loss > 0.0 {
        Box::new(PollMode::new(FaultLink::new(plane, lossy(loss))).map_err(oom)?)
    } else {
        Box::new(PollMode::new(plane).map_err(oom)?)
    };
    Ok(Plane { driver, caps, net })
}

/// `link` behind a loss injector whose clock the passes drive when `loss` > 0.
fn plane<L: DataPlane, M: PassMemory + ?Sized>(link: L, loss: f64, net: NetConfig) -> Plane<M> {
    let caps = link.capabilities();
    let driver: Box<dyn Driver<M>> = if loss > 0.0 {
        Box::new(Clocked(FaultLink::new(link, lossy(loss))))
    } else {
        Box::new(link)
    };
    Plane { driver, caps, net }
}

/// A fault injector that loses `loss` of the received frames.
fn lossy(loss: f64) -> FaultConfig {
    let mut cfg = FaultConfig::new(random_u64());
    cfg.rx = FaultSpec {
        loss,
        ..FaultSpec::NONE
    };
    cfg
}

/// The stack's place at `eth` with `mac` on an Ethernet link with `caps`.
fn ethernet(caps: &Capabilities, eth: &Ethernet, mac: [u8; 6]) -> NetConfig {
    NetConfig::new(caps, eth.ip.octets(), eth.port).with_ethernet(
        mac,
        eth.prefix_len,
        eth.gateway.map(|g| g.octets()),
    )
}

/// 64 bits from std's per-process random hash keys and the clock (key seeds, MAC
/// addresses, fault injectors' seeds).
pub fn random_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(super::now().total_micros());
    h.write_u32(std::process::id());
    h.finish()
}

/// A random unicast, locally administered MAC.
fn random_mac() -> [u8; 6] {
    let r = random_u64().to_be_bytes();
    [(r[0] & 0xfc) | 0x02, r[1], r[2], r[3], r[4], r[5]]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::RawMemory;
    use std::net::SocketAddrV4;

    #[test]
    fn a_udp_plane_says_where_its_socket_is() {
        let cfg = UdpConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
        let kind = PlaneKind::Udp(cfg);
        assert_eq!(kind.name(), "udp");
        let p: Plane<RawMemory> = open_plane(kind, 0.5).unwrap();
        assert_eq!(p.net.local_ip, [127, 0, 0, 1]);
        assert_ne!(p.net.local_port, 0);
        assert!(p.driver.wait_fd().is_some());
    }

    #[test]
    fn random_macs_are_unicast_and_local() {
        let m = random_mac();
        assert_eq!(m[0] & 0x03, 0x02);
    }
}
