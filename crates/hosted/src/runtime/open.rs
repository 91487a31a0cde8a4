//! Opening a data plane from its description: what the safe API's
//! [`DomainBuilder`](crate::api::DomainBuilder), the C provider's `fi_domain` and
//! `ofi-pingpong` all do before a domain opens on it. The caller chooses the plane
//! (builder methods, the provider's `dataplane` parameter, the tool's command line) and
//! where the stack sits; this opens the link, wraps it as [`PlaneOptions`] say (a
//! capture, a fault injector) and says where the stack is on it.

use std::fmt;
use std::fs::File;
use std::io::{self, BufWriter};
use std::net::Ipv4Addr;
use std::path::PathBuf;

use dp_kernel::{AfPacketLink, PacketConfig, TapLink, UdpConfig, UdpLink};
use ofi_nostd::net::NetConfig;
use wire::link::{Capabilities, Link, Medium};

use super::plane::{Clocked, DataPlane, Driver, PassMemory, PollMode, Queues};
use crate::fault::{FaultConfig, FaultLink, FaultSpec};
use crate::pcap::{Flush, PcapConfig, PcapLink};

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
    /// descriptor waiters watch is always readable ([`PollMode`]).
    #[cfg(feature = "dpdk")]
    Dpdk(&'static crate::dpdk::Eal, String, Ethernet),
    /// One queue pair of the DPDK port [`DpdkPort`] describes: the choices
    /// [`PlaneKind::Dpdk`] makes for the provider, left to the caller.
    #[cfg(feature = "dpdk")]
    DpdkPort(DpdkPort, Ethernet),
}

/// A DPDK port to open one queue pair of, on an initialised EAL.
#[cfg(feature = "dpdk")]
#[derive(Debug)]
pub struct DpdkPort {
    /// The EAL the port belongs to.
    pub eal: &'static crate::dpdk::Eal,
    /// A virtual device hot-plugged from these device arguments; else
    /// [`name`](Self::name) (see [`open_port`](crate::dpdk::open_port)).
    pub vdev: Option<String>,
    /// A device EAL probed (a `--vdev` of its arguments, a PCI address); neither: port 0.
    pub name: Option<String>,
    /// The MTU to open the port with ([`PortConfig::with_mtu`](crate::dpdk::PortConfig::with_mtu));
    /// `None`: the device's.
    pub mtu: Option<u16>,
    /// Wait at most this long for the port's link to come up before taking the queue
    /// (a memif client: until it connected to the server's socket).
    pub link_up: Option<std::time::Duration>,
    /// Give waiters a descriptor that is always readable ([`PollMode`]: the provider's
    /// wait objects then poll), rather than none (a safe-API domain then polls on a
    /// short timer when idle).
    pub ready_fd: bool,
}

/// What goes around the link: the safe API and the provider ask for loss alone
/// ([`PlaneOptions::loss`]), `ofi-pingpong` for its `--loss`/`--seed` and `--pcap`.
#[derive(Debug, Default)]
pub struct PlaneOptions {
    /// A fault injector on top, its clock following the passes.
    pub fault: Option<FaultConfig>,
    /// A capture of the frames as they cross the link (under the fault injector: what
    /// the wire carried).
    pub capture: Option<Capture>,
    /// Receive queues, one per context of a scalable endpoint the domain will open
    /// ([`Queues`]; 0 or 1: one). Kernel UDP (`UdpLink::queues`) and AF_PACKET
    /// (`AfPacketLink::queues`) steer by context; a DPDK port opens that many queue
    /// pairs (memif carries queue k of one side to queue k of the other; a NIC would
    /// need flow rules, not installed); TAP opens one queue, as does a plane with a
    /// fault injector or a capture (each sees every frame). The plane says how many
    /// it opened ([`Plane::queues`]).
    pub queues: usize,
}

impl PlaneOptions {
    /// The queues to open: [`PlaneOptions::queues`], but one under a fault injector or
    /// a capture.
    fn queue_count(&self) -> usize {
        if self.fault.is_some() || self.capture.is_some() {
            1
        } else {
            self.queues.max(1)
        }
    }

    /// With `loss` > 0, that fraction of the received frames dropped by an injector
    /// with a random seed; otherwise nothing.
    pub fn loss(loss: f64) -> Self {
        PlaneOptions {
            fault: (loss > 0.0).then(|| lossy(loss)),
            capture: None,
            queues: 1,
        }
    }
}

/// A pcap capture of a plane's frames: LINKTYPE_RAW at the socket's address on UDP,
/// Ethernet frames on the other planes.
#[derive(Debug, Clone)]
pub struct Capture {
    /// The file, created (or truncated) once the link is open.
    pub path: PathBuf,
    /// When the file's buffer is flushed (it is also flushed when the domain closes).
    pub flush: Flush,
}

/// Why a plane did not open: the link (the system's error, as
/// [`open_plane`] reports it), or the capture file.
#[derive(Debug)]
pub enum OpenError {
    /// Opening the link failed.
    Link(io::Error),
    /// Creating or writing the capture file failed.
    Capture(io::Error),
}

impl From<OpenError> for io::Error {
    fn from(e: OpenError) -> io::Error {
        match e {
            OpenError::Link(e) | OpenError::Capture(e) => e,
        }
    }
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Link(e) => e.fmt(f),
            OpenError::Capture(e) => write!(f, "capture file: {e}"),
        }
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            OpenError::Link(e) | OpenError::Capture(e) => Some(e),
        }
    }
}

impl PlaneKind {
    /// A name for the plane's interface (getinfo's domain name in the safe API).
    pub fn name(&self) -> String {
        match self {
            PlaneKind::Udp(_) => "udp".to_owned(),
            PlaneKind::Tap(name, _) => name.clone().unwrap_or_else(|| "tap".to_owned()),
            PlaneKind::AfPacket(ifname, _) => ifname.clone(),
            #[cfg(feature = "dpdk")]
            PlaneKind::Dpdk(..) | PlaneKind::DpdkPort(..) => "dpdk".to_owned(),
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

impl<M: ?Sized> Plane<M> {
    /// Its receive queues: what the domain's
    /// [`DomainConfig::queues`](ofi_nostd::domain::DomainConfig::queues) must be.
    pub fn queues(&self) -> usize {
        self.driver.queues()
    }
}

/// Opens the plane `kind` describes; with `loss` > 0 that fraction of the frames it
/// receives is dropped (fault injection, the injector's clock following the passes).
///
/// Errors are the system's; a DPDK port that cannot be opened is
/// [`io::ErrorKind::Other`], one without a free queue [`io::ErrorKind::ResourceBusy`],
/// a descriptor for poll mode that cannot be made [`io::ErrorKind::OutOfMemory`].
pub fn open_plane<M: PassMemory + ?Sized>(kind: PlaneKind, loss: f64) -> io::Result<Plane<M>> {
    Ok(open_plane_with(kind, PlaneOptions::loss(loss))?)
}

/// Opens the plane `kind` describes with `opts` around its link: the capture right on
/// the link, the fault injector over it.
///
/// Errors of the link are [`open_plane`]'s, and a DPDK link that did not come up
/// within `DpdkPort::link_up` is [`io::ErrorKind::TimedOut`] (a DPDK port's errors
/// name it); those of the capture file are [`OpenError::Capture`].
pub fn open_plane_with<M: PassMemory + ?Sized>(
    kind: PlaneKind,
    opts: PlaneOptions,
) -> Result<Plane<M>, OpenError> {
    let queues = opts.queue_count();
    match kind {
        PlaneKind::Udp(cfg) if queues > 1 => {
            let links = UdpLink::queues(cfg, queues).map_err(OpenError::Link)?;
            let local = links[0].local_addr();
            let net = NetConfig::new(&links[0].capabilities(), local.ip().octets(), local.port());
            let caps = links[0].capabilities();
            let driver = Box::new(Queues::new(links).map_err(OpenError::Link)?);
            Ok(Plane { driver, caps, net })
        }
        PlaneKind::AfPacket(ifname, eth) if queues > 1 => {
            let links = AfPacketLink::queues(PacketConfig::new(&ifname), queues)
                .map_err(OpenError::Link)?;
            let caps = links[0].capabilities();
            let net = ethernet(&caps, &eth, eth.mac.unwrap_or(links[0].mac()));
            let driver = Box::new(Queues::new(links).map_err(OpenError::Link)?);
            Ok(Plane { driver, caps, net })
        }
        PlaneKind::Udp(cfg) => {
            let link = UdpLink::new(cfg).map_err(OpenError::Link)?;
            let local = link.local_addr();
            let net = NetConfig::new(&link.capabilities(), local.ip().octets(), local.port());
            plane(link, opts, net, false)
        }
        PlaneKind::Tap(name, eth) => {
            let link = TapLink::open(name.as_deref())
                .and_then(|l| l.set_up(true).map(|()| l))
                .map_err(OpenError::Link)?;
            let net = ethernet(
                &link.capabilities(),
                &eth,
                eth.mac.unwrap_or_else(random_mac),
            );
            plane(link, opts, net, false)
        }
        PlaneKind::AfPacket(ifname, eth) => {
            let link = AfPacketLink::open(&ifname).map_err(OpenError::Link)?;
            let net = ethernet(&link.capabilities(), &eth, eth.mac.unwrap_or(link.mac()));
            plane(link, opts, net, false)
        }
        #[cfg(feature = "dpdk")]
        PlaneKind::Dpdk(eal, vdev, eth) => {
            let port = DpdkPort {
                eal,
                vdev: Some(vdev),
                name: None,
                mtu: None,
                link_up: None,
                ready_fd: true,
            };
            dpdk(port, &eth, opts)
        }
        #[cfg(feature = "dpdk")]
        PlaneKind::DpdkPort(port, eth) => dpdk(port, &eth, opts),
    }
}

/// The DPDK arms of [`open_plane_with`]: the port's first queue pair (its errors name
/// the port).
#[cfg(feature = "dpdk")]
fn dpdk<M: PassMemory + ?Sized>(
    port: DpdkPort,
    eth: &Ethernet,
    opts: PlaneOptions,
) -> Result<Plane<M>, OpenError> {
    use crate::dpdk::{DpdkPlane, open_port};
    let link_err = OpenError::Link;
    let queues = u16::try_from(opts.queue_count().min(ofi_nostd::net::MAX_QUEUES)).unwrap_or(1);
    let p = open_port(
        port.eal,
        port.vdev.as_deref(),
        port.name.as_deref(),
        port.mtu,
        queues,
    )
    .map_err(|e| link_err(io::Error::other(format!("DPDK port: {e}"))))?;
    let named = |kind: io::ErrorKind, e: crate::dpdk::Error| {
        link_err(io::Error::new(kind, format!("DPDK port {}: {e}", p.name())))
    };
    if let Some(t) = port.link_up {
        p.wait_link_up(t)
            .map_err(|e| named(io::ErrorKind::TimedOut, e))?;
    }
    let link = p
        .link(0)
        .map_err(|e| named(io::ErrorKind::ResourceBusy, e))?;
    let net = ethernet(&link.capabilities(), eth, eth.mac.unwrap_or(link.mac()));
    if queues > 1 {
        // A queue pair per context: memif carries queue k of one side to queue k of
        // the other, so context k's traffic with a peer's context k stays on it.
        let caps = link.capabilities();
        let mut planes = vec![DpdkPlane::new(port.eal, link)];
        for k in 1..queues {
            let l = p
                .link(k)
                .map_err(|e| named(io::ErrorKind::ResourceBusy, e))?;
            planes.push(DpdkPlane::queue(port.eal, l));
        }
        let q = if port.ready_fd {
            Queues::polled(planes)
        } else {
            Queues::new(planes)
        };
        let driver = Box::new(q.map_err(OpenError::Link)?);
        return Ok(Plane { driver, caps, net });
    }
    // The port closes when the link (inside the driver) is dropped.
    plane(DpdkPlane::new(port.eal, link), opts, net, port.ready_fd)
}

/// `link` wrapped as `opts` say, the stack at `net` on it; `ready_fd`: behind an
/// always-readable descriptor ([`PollMode`]).
fn plane<L: DataPlane, M: PassMemory + ?Sized>(
    link: L,
    opts: PlaneOptions,
    net: NetConfig,
    ready_fd: bool,
) -> Result<Plane<M>, OpenError> {
    let caps = link.capabilities();
    let driver = match opts.capture {
        None => driver(link, opts.fault, ready_fd),
        Some(c) => driver(capture(link, &c, &net)?, opts.fault, ready_fd),
    }
    .map_err(OpenError::Link)?;
    Ok(Plane { driver, caps, net })
}

/// `link` under a fault injector when `fault` is given, behind an always-readable
/// descriptor when `ready_fd` (an injector there keeps its clock: loss needs none).
fn driver<L: DataPlane, M: PassMemory + ?Sized>(
    link: L,
    fault: Option<FaultConfig>,
    ready_fd: bool,
) -> io::Result<Box<dyn Driver<M>>> {
    let oom = |_| io::Error::from(io::ErrorKind::OutOfMemory);
    Ok(match (fault, ready_fd) {
        (None, false) => Box::new(link),
        (Some(f), false) => Box::new(Clocked(FaultLink::new(link, f))),
        (None, true) => Box::new(PollMode::new(link).map_err(oom)?),
        (Some(f), true) => Box::new(PollMode::new(FaultLink::new(link, f)).map_err(oom)?),
    })
}

/// `link` recording its frames to the file `c` names (the stack at `net` on it).
fn capture<L: Link>(
    link: L,
    c: &Capture,
    net: &NetConfig,
) -> Result<PcapLink<L, BufWriter<File>>, OpenError> {
    let mut cfg = match net.medium {
        Medium::Udp => PcapConfig::local(wire::frame::UdpAddr::new(
            net.local_ip.into(),
            net.local_port,
        )),
        Medium::Ethernet => PcapConfig::default(),
    };
    cfg.flush = c.flush;
    let file = File::create(&c.path).map_err(OpenError::Capture)?;
    PcapLink::new(link, BufWriter::new(file), cfg).map_err(OpenError::Capture)
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

/// A UDP port from the dynamic range (49152-65535) for a stack on an Ethernet plane,
/// which has no kernel to pick an ephemeral one: different for each process and each
/// `n` (the plane's sequence number in it).
pub fn dynamic_port(n: u32) -> u16 {
    49152 + (std::process::id().wrapping_add(n.wrapping_mul(7919)) % 16384) as u16
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
    fn a_udp_plane_of_several_queues_shares_one_address_and_one_wait_descriptor() {
        let cfg = UdpConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
        let opts = PlaneOptions {
            queues: 3,
            ..PlaneOptions::default()
        };
        let p: Plane<RawMemory> = open_plane_with(PlaneKind::Udp(cfg), opts).unwrap();
        assert_eq!(p.queues(), 3);
        assert_ne!(p.net.local_port, 0);
        let fd = p.driver.wait_fd().expect("one descriptor for every queue");
        // Readable once any queue has a datagram: queue 2's.
        let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut frame = [0u8; 32];
        let id = 5u16 | (2 << wire::packet::EP_CTX_SHIFT);
        frame[10..12].copy_from_slice(&id.to_be_bytes());
        let to = SocketAddrV4::new(Ipv4Addr::LOCALHOST, p.net.local_port);
        let readable = || {
            let mut fds = [rustix::event::PollFd::new(
                &fd,
                rustix::event::PollFlags::IN,
            )];
            let t = rustix::time::Timespec {
                tv_sec: 2,
                tv_nsec: 0,
            };
            rustix::event::poll(&mut fds, Some(&t)).unwrap() == 1
        };
        peer.send_to(&frame, to).unwrap();
        assert!(readable(), "a datagram on queue 2 wakes the waiter");
        let opts = PlaneOptions {
            queues: ofi_nostd::net::MAX_QUEUES + 1,
            ..PlaneOptions::default()
        };
        let cfg = UdpConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
        assert!(open_plane_with::<RawMemory>(PlaneKind::Udp(cfg), opts).is_err());
    }

    #[test]
    fn a_capture_starts_with_the_pcap_header_once_the_link_is_open() {
        let dir = std::env::temp_dir().join(format!("runtime-open-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("udp.pcap");
        let udp = || PlaneKind::Udp(UdpConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)));
        let opts = |path: PathBuf| PlaneOptions {
            fault: Some(FaultConfig::new(1)),
            capture: Some(Capture {
                path,
                flush: Flush::Every(64),
            }),
            // A capture sees every frame: one queue.
            queues: 4,
        };
        let p: Plane<RawMemory> = open_plane_with(udp(), opts(path.clone())).unwrap();
        assert!(p.driver.wait_fd().is_some());
        assert_eq!(p.queues(), 1);
        let b = std::fs::read(&path).unwrap();
        assert_eq!(b.len(), 24, "the file header, flushed at once");
        let missing = dir.join("no-such-dir").join("x.pcap");
        match open_plane_with::<RawMemory>(udp(), opts(missing)) {
            Err(e @ OpenError::Capture(_)) => assert!(e.to_string().starts_with("capture file")),
            other => panic!("{:?}", other.err()),
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn loss_alone_is_a_random_receive_injector() {
        assert!(PlaneOptions::loss(0.0).fault.is_none());
        let f = PlaneOptions::loss(0.5).fault.unwrap();
        assert_eq!((f.rx.loss, f.tx.loss), (0.5, 0.0));
    }

    #[test]
    fn dynamic_ports_are_dynamic() {
        assert!((0..64).map(dynamic_port).all(|p| p >= 49152));
        assert_ne!(dynamic_port(0), dynamic_port(1));
    }

    #[test]
    fn random_macs_are_unicast_and_local() {
        let m = random_mac();
        assert_eq!(m[0] & 0x03, 0x02);
    }
}
