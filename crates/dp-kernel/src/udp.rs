//! Kernel UDP sockets as a [`Medium::Udp`] link: the default data plane, which needs no
//! privilege and no configuration.
//!
//! # Rings and the flush rule
//!
//! The link owns a receive ring and a transmit ring of [`UdpConfig::ring`] slots each,
//! every slot [`Capabilities::mtu`] bytes, allocated once in [`UdpLink::new`].
//!
//! * **Receive**: [`Link::receive`] lends the next datagram of the receive ring; when
//!   every slot has been lent it refills the whole ring with one `recvmmsg`. A datagram
//!   longer than a slot is cut by the kernel, then dropped and counted
//!   ([`Stats::rx_truncated`]).
//! * **Transmit**: [`Link::transmit`] lends the next free slot of the transmit ring;
//!   what the stack writes is *queued*, not sent. Queued slots go to the kernel, in
//!   order, with one `sendmmsg` per flush, and a flush happens:
//!   1. when the ring becomes full (the token that filled the last slot flushes);
//!   2. at the start of every [`Link::receive`] call — the progress loop receives on
//!      every turn, so nothing queued waits longer than one turn;
//!   3. at the end of every [`Link::transmit_burst`] (a burst is a batch already);
//!   4. on [`UdpLink::flush`], which the adapter calls when it has nothing to receive;
//!   5. when the link is dropped (waiting up to [`DROP_DRAIN_MS`] for a full socket
//!      buffer to drain).
//!
//!   If the kernel pushes back (`EAGAIN`: the socket's send buffer is full) the slots
//!   stay queued in order and [`Link::transmit`] returns `None` once the ring is full:
//!   that is the link's back-pressure. Poll the descriptor for `POLLOUT` while
//!   [`UdpLink::pending_tx`] is non-zero and flush again.
//!
//! A kernel error on send (`ECONNREFUSED` from an earlier ICMP error, `EMSGSIZE`,
//! `ENETUNREACH`, `EINVAL` for port 0, ...) never wedges the ring: it is counted and the
//! datagram retried once, then dropped (see [`Stats::tx_dropped`]); the reliability
//! protocol above retransmits.
//!
//! # MTU
//!
//! The socket sets `IP_MTU_DISCOVER = IP_PMTUDISC_DO`: datagrams carry DF and are never
//! fragmented (a lost fragment loses the whole datagram, and fragments are a cost on
//! every hop). So [`Capabilities::mtu`], the largest payload the stack may hand over,
//! must fit the path: it is the MTU of the interface owning the bound address (for
//! `0.0.0.0`, the smallest MTU of the host's up interfaces) minus the 28 bytes of IPv4
//! and UDP headers, capped at [`UdpConfig::max_payload`] (default
//! [`DEFAULT_MAX_PAYLOAD`]) and at the UDP limit of 65 507 bytes. That gives 1472 on a
//! 1500-byte Ethernet and 8972 on loopback. A path with a smaller MTU than the
//! interface (a tunnel on the way) makes the kernel refuse larger datagrams with
//! `EMSGSIZE`; lower `max_payload` for such networks.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};

use wire::link::{Capabilities, Link, Medium, RxMeta, RxToken, TxMeta, TxToken, UdpAddr};

use crate::mmsg::{Gso, MAX_RING, RxRing, TxRing};
use crate::{KernelLink, Stats, sys};

/// Slots in each ring unless configured otherwise: a batch of 64 datagrams per system
/// call amortises its cost well while keeping the rings small (64 × 8972 bytes each).
pub const DEFAULT_RING: usize = 64;

/// Default cap on [`Capabilities::mtu`]: 8972 bytes, the UDP payload of a 9000-byte
/// jumbo frame. Large enough that loopback and jumbo networks move big segments, small
/// enough to keep the rings at about 1 MiB and to match what a jumbo-frame peer can take,
/// and well inside the `u16` length of our wire header.
pub const DEFAULT_MAX_PAYLOAD: usize = 8972;

/// The largest UDP payload IPv4 can carry (65535 − 20 − 8).
pub const MAX_UDP_PAYLOAD: usize = 65507;

/// IPv4 + UDP header bytes between the interface MTU and the payload.
const IPV4_UDP_OVERHEAD: usize = 28;

/// Receive buffer the link asks the kernel for unless configured otherwise (4 MiB), so
/// a burst from a fast peer is queued rather than dropped between two progress calls.
pub const DEFAULT_RECV_BUFFER: usize = 4 << 20;

/// How long dropping a link waits, at most, for the kernel to accept what is still
/// queued (milliseconds).
pub const DROP_DRAIN_MS: u32 = 1000;

/// How to build a [`UdpLink`]. Start from [`UdpConfig::new`] and change fields.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct UdpConfig {
    /// Address to bind; port 0 picks an ephemeral port (see [`UdpLink::local_addr`]).
    pub bind: SocketAddrV4,
    /// Slots in each of the receive and transmit rings (`1..=1024`): the most datagrams
    /// one `recvmmsg`/`sendmmsg` moves, and [`Capabilities::max_burst`].
    pub ring: usize,
    /// Cap on [`Capabilities::mtu`] (`1..=65507`); see the [module docs](self).
    pub max_payload: usize,
    /// The MTU of the path, if known better than from the interface (then no interface
    /// is looked up).
    pub path_mtu: Option<usize>,
    /// `SO_RCVBUF` to request (`SO_RCVBUFFORCE` when privileged); `None` keeps the
    /// kernel's default.
    pub recv_buffer: Option<usize>,
    /// `SO_SNDBUF` to request (`SO_SNDBUFFORCE` when privileged); `None` keeps the
    /// kernel's default.
    pub send_buffer: Option<usize>,
    /// `SO_BUSY_POLL` in microseconds: lets a blocking wait spin on the NIC queue for
    /// lower latency. Silently skipped when not permitted (`EPERM`) or not built into
    /// the kernel; see [`UdpLink::busy_poll`].
    pub busy_poll_us: Option<u32>,
    /// Send runs of equal-size datagrams to one peer with UDP generic segmentation
    /// offload (`UDP_SEGMENT`): one buffer per run, cut into datagrams by the kernel or
    /// the NIC. Skipped where the kernel lacks it, turned off for the socket when the
    /// first try is refused; see [`UdpLink::gso`].
    pub gso: bool,
    /// Receive coalesced datagrams (`UDP_GRO`) and split them by the segment size the
    /// kernel reports: one receive slot for a whole run. Costs a receive ring of 64 KiB
    /// slots (memory the kernel fills only as far as it is used); skipped where the
    /// kernel lacks it; see [`UdpLink::gro`].
    pub gro: bool,
}

impl UdpConfig {
    /// Defaults: [`DEFAULT_RING`] slots, [`DEFAULT_MAX_PAYLOAD`],
    /// [`DEFAULT_RECV_BUFFER`], the kernel's send buffer, no busy polling, GSO and GRO
    /// where the kernel has them.
    pub fn new(bind: SocketAddrV4) -> Self {
        UdpConfig {
            bind,
            ring: DEFAULT_RING,
            max_payload: DEFAULT_MAX_PAYLOAD,
            path_mtu: None,
            recv_buffer: Some(DEFAULT_RECV_BUFFER),
            send_buffer: None,
            busy_poll_us: None,
            gso: true,
            gro: true,
        }
    }
}

/// The `SO_ATTACH_REUSEPORT_CBPF` program of [`UdpLink::queues`]: the context index
/// of the destination endpoint id (big-endian at payload offset 10, index in bits
/// 10..16, `wire::packet::EP_CTX_SHIFT`), modulo `n`. A datagram shorter than that
/// ends the program, which then returns 0: link 0.
fn context_steering(n: u32) -> [libc::sock_filter; 5] {
    const LD_H_ABS: u16 = (libc::BPF_LD | libc::BPF_H | libc::BPF_ABS) as u16;
    const RSH_K: u16 = (libc::BPF_ALU | libc::BPF_RSH | libc::BPF_K) as u16;
    const AND_K: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
    const MOD_K: u16 = (libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K) as u16;
    const RET_A: u16 = (libc::BPF_RET | libc::BPF_A) as u16;
    let op = |code, k| libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    };
    [
        op(LD_H_ABS, 10),
        op(RSH_K, wire::packet::EP_CTX_SHIFT),
        op(AND_K, (1 << (16 - wire::packet::EP_CTX_SHIFT)) - 1),
        op(MOD_K, n.max(1)),
        op(RET_A, 0),
    ]
}

/// A non-blocking UDP socket with batched receive and transmit rings; see the
/// [module docs](self) for the flush rule and the MTU.
#[derive(Debug)]
pub struct UdpLink {
    sock: UdpSocket,
    local: SocketAddrV4,
    caps: Capabilities,
    rx: RxRing<libc::sockaddr_in>,
    tx: TxRing<libc::sockaddr_in>,
    stats: Stats,
    busy_poll: bool,
    gro: bool,
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

impl UdpLink {
    /// A link bound to `addr` with the default [`UdpConfig`].
    pub fn bind(addr: SocketAddrV4) -> io::Result<Self> {
        Self::new(UdpConfig::new(addr))
    }

    /// Bind and configure a socket and allocate its rings.
    pub fn new(cfg: UdpConfig) -> io::Result<Self> {
        Self::check(&cfg)?;
        let sock = UdpSocket::bind(SocketAddr::V4(cfg.bind))?;
        Self::with_socket(cfg, sock)
    }

    /// One link per receive queue of a scalable endpoint's contexts (issue #31): `n`
    /// sockets (`1..=64`) on one address with `SO_REUSEPORT` (the first binds
    /// `cfg.bind`, port 0 included; the others its address), and a classic BPF
    /// program steering each datagram by the context index in its destination
    /// endpoint id (wire protocol 3.9: bits 10..16 of header bytes 10..12) to link
    /// `index % n`. Link 0 gets what names no context (every plain endpoint, and
    /// datagrams too short to carry an id); every link may send.
    pub fn queues(cfg: UdpConfig, n: usize) -> io::Result<Vec<UdpLink>> {
        if n == 0 || n > 64 {
            return Err(invalid(format!("{n} queues (1..=64)")));
        }
        Self::check(&cfg)?;
        let first = UdpSocket::from(sys::reuseport_udp_socket(cfg.bind, true)?);
        let bound = match first.local_addr()? {
            SocketAddr::V4(a) => a,
            SocketAddr::V6(_) => return Err(io::Error::other("IPv4 socket with IPv6 address")),
        };
        let mut links = vec![Self::with_socket(cfg.clone(), first)?];
        for _ in 1..n {
            let sock = UdpSocket::from(sys::reuseport_udp_socket(bound, false)?);
            links.push(Self::with_socket(cfg.clone(), sock)?);
        }
        // The group exists once a second socket joined the founder (index 0).
        if n > 1 {
            sys::attach_reuseport_filter(links[0].as_raw_fd(), &context_steering(n as u32))?;
        }
        Ok(links)
    }

    fn check(cfg: &UdpConfig) -> io::Result<()> {
        if cfg.ring == 0 || cfg.ring > MAX_RING {
            return Err(invalid(format!(
                "ring of {} slots (1..={MAX_RING})",
                cfg.ring
            )));
        }
        if cfg.max_payload == 0 || cfg.max_payload > MAX_UDP_PAYLOAD {
            return Err(invalid(format!(
                "max_payload {} (1..={MAX_UDP_PAYLOAD})",
                cfg.max_payload
            )));
        }
        Ok(())
    }

    /// Configures a bound socket and allocates its rings.
    fn with_socket(cfg: UdpConfig, sock: UdpSocket) -> io::Result<Self> {
        sock.set_nonblocking(true)?;
        let fd = sock.as_raw_fd();
        sys::setsockopt(
            fd,
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            &libc::IP_PMTUDISC_DO,
        )?;
        if let Some(b) = cfg.recv_buffer {
            sys::set_buffer_size(fd, true, b)?;
        }
        if let Some(b) = cfg.send_buffer {
            sys::set_buffer_size(fd, false, b)?;
        }
        let busy_poll = match cfg.busy_poll_us {
            None => false,
            Some(us) => {
                let us = libc::c_int::try_from(us).unwrap_or(libc::c_int::MAX);
                match sys::setsockopt(fd, libc::SOL_SOCKET, libc::SO_BUSY_POLL, &us) {
                    Ok(()) => true,
                    Err(e)
                        if matches!(
                            e.raw_os_error(),
                            Some(libc::EPERM | libc::EACCES | libc::ENOPROTOOPT)
                        ) =>
                    {
                        false
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        let local = match sock.local_addr()? {
            SocketAddr::V4(a) => a,
            SocketAddr::V6(_) => return Err(io::Error::other("IPv4 socket with IPv6 address")),
        };
        let path_mtu = match cfg.path_mtu {
            Some(m) => m,
            None => interface_mtu(*local.ip()).unwrap_or(1500),
        };
        let mtu = path_mtu
            .saturating_sub(IPV4_UDP_OVERHEAD)
            .min(MAX_UDP_PAYLOAD)
            .min(cfg.max_payload);
        if mtu == 0 {
            return Err(invalid(format!(
                "path MTU {path_mtu} leaves no UDP payload"
            )));
        }
        let mut caps = Capabilities::new(Medium::Udp, mtu);
        caps.max_burst = cfg.ring;
        // Both options exist since Linux 4.18/5.0; where they do not (ENOPROTOOPT) the
        // link just sends and receives one datagram per buffer.
        let gso = cfg.gso && sys::getsockopt_int(fd, libc::SOL_UDP, libc::UDP_SEGMENT).is_ok();
        let gro = cfg.gro && sys::setsockopt(fd, libc::SOL_UDP, libc::UDP_GRO, &1).is_ok();
        let mut tx = TxRing::new(cfg.ring, mtu)?;
        if gso {
            tx.enable_gso();
        }
        Ok(UdpLink {
            rx: if gro {
                RxRing::with_gro(cfg.ring, mtu)?
            } else {
                RxRing::new(cfg.ring, mtu)?
            },
            tx,
            sock,
            local,
            caps,
            stats: Stats::default(),
            busy_poll,
            gro,
        })
    }

    /// The bound address (with the kernel's port when 0 was asked for): what peers send
    /// to.
    pub fn local_addr(&self) -> SocketAddrV4 {
        self.local
    }

    /// [`local_addr`](Self::local_addr) in the stack's address type.
    pub fn local_udp_addr(&self) -> UdpAddr {
        UdpAddr::new(*self.local.ip(), self.local.port())
    }

    /// Hand every queued datagram to the kernel now; returns how many are still queued
    /// because the socket's send buffer is full (see the [flush rule](self)).
    pub fn flush(&mut self) -> usize {
        self.tx.flush(self.sock.as_raw_fd(), &mut self.stats)
    }

    /// Datagrams queued for transmission and not yet handed to the kernel.
    pub fn pending_tx(&self) -> usize {
        self.tx.queued()
    }

    /// Datagrams already received into the ring and not yet lent. While this is
    /// non-zero the socket may not poll readable although [`Link::receive`] has data:
    /// drain `receive` until `None` before waiting on the descriptor.
    pub fn pending_rx(&self) -> usize {
        self.rx.ready()
    }

    /// The receive buffer the kernel actually granted (`SO_RCVBUF`, which reports
    /// twice the requested size, its bookkeeping included), to check what
    /// `recv_buffer` achieved without privilege.
    pub fn recv_buffer_size(&self) -> io::Result<usize> {
        let v = sys::getsockopt_int(self.sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF)?;
        Ok(usize::try_from(v).unwrap_or(0))
    }

    /// The link's counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Whether `SO_BUSY_POLL` took effect.
    pub fn busy_poll(&self) -> bool {
        self.busy_poll
    }

    /// Whether runs of equal-size datagrams go out as GSO sends: asked for, supported
    /// by the kernel, and not refused by it at the first try (then
    /// [`Stats::tx_gso_refused`] says so).
    pub fn gso(&self) -> bool {
        self.tx.gso() != Gso::Off
    }

    /// Whether the socket receives coalesced (GRO) buffers, which the link splits.
    pub fn gro(&self) -> bool {
        self.gro
    }
}

/// How this host reaches a destination: what the kernel's routing table says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Route {
    /// The source address the kernel picks for it.
    pub source: Ipv4Addr,
    /// The MTU of the route (of the device it leaves by, or a smaller cached path
    /// MTU): `lo`'s for an address of this host, whatever interface owns it.
    pub mtu: usize,
}

/// The kernel's route to `dest`: a UDP socket connected to it (nothing is sent) reports
/// its source address and `IP_MTU`. For an address of this host that is the loopback
/// device's MTU, so two local processes need not use a real interface's small one.
pub fn route_to(dest: Ipv4Addr) -> io::Result<Route> {
    let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0))?;
    s.connect(SocketAddrV4::new(dest, 9))?;
    let source = match s.local_addr()? {
        SocketAddr::V4(a) => *a.ip(),
        SocketAddr::V6(_) => return Err(io::Error::other("IPv4 socket with IPv6 address")),
    };
    let mtu = sys::getsockopt_int(s.as_raw_fd(), libc::IPPROTO_IP, libc::IP_MTU)?;
    Ok(Route {
        source,
        mtu: usize::try_from(mtu).unwrap_or(0),
    })
}

/// The MTU of the interface owning `ip` (exact address first, then the subnet, so
/// 127.0.0.2 finds `lo`); for `0.0.0.0` the smallest MTU of the up interfaces, other
/// than loopback when there are others.
fn interface_mtu(ip: Ipv4Addr) -> Option<usize> {
    let ifs = sys::ipv4_interfaces().ok()?;
    let up = |f: &&sys::IfAddrV4| f.flags & libc::IFF_UP as u32 != 0;
    if ip.is_unspecified() {
        let is_lo = |f: &&sys::IfAddrV4| f.flags & libc::IFF_LOOPBACK as u32 != 0;
        let others = ifs.iter().filter(up).any(|f| !is_lo(&f));
        return ifs
            .iter()
            .filter(up)
            .filter(|f| !others || !is_lo(f))
            .filter_map(|f| sys::if_mtu(&f.name).ok())
            .min();
    }
    let in_subnet = |f: &&sys::IfAddrV4| {
        let m = u32::from(f.netmask);
        u32::from(f.addr) & m == u32::from(ip) & m
    };
    let f = ifs
        .iter()
        .find(|f| f.addr == ip)
        .or_else(|| ifs.iter().find(in_subnet))?;
    sys::if_mtu(&f.name).ok()
}

fn to_sockaddr(a: UdpAddr) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(a.ip).to_be(),
        },
        sin_zero: [0; 8],
    }
}

fn from_sockaddr(sa: &libc::sockaddr_in) -> Option<UdpAddr> {
    (libc::c_int::from(sa.sin_family) == libc::AF_INET).then(|| {
        UdpAddr::new(
            Ipv4Addr::from(u32::from_be(sa.sin_addr.s_addr)),
            u16::from_be(sa.sin_port),
        )
    })
}

impl AsRawFd for UdpLink {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

impl AsFd for UdpLink {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.sock.as_fd()
    }
}

impl Drop for UdpLink {
    fn drop(&mut self) {
        self.tx
            .drain(self.sock.as_raw_fd(), &mut self.stats, DROP_DRAIN_MS);
    }
}

/// A received datagram lent by a [`UdpLink`]: a slot of its receive ring.
#[derive(Debug)]
pub struct UdpRxToken<'a> {
    data: &'a [u8],
    meta: RxMeta,
}

impl RxToken for UdpRxToken<'_> {
    fn meta(&self) -> RxMeta {
        self.meta
    }

    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(self.data)
    }
}

/// A free slot of a [`UdpLink`]'s transmit ring. The stack must give a destination
/// ([`TxMeta::to`]); a filled slot is queued and sent by the next flush.
#[derive(Debug)]
pub struct UdpTxToken<'a> {
    link: &'a mut UdpLink,
}

impl TxToken for UdpTxToken<'_> {
    fn consume_with<R, F: FnOnce(&mut [u8]) -> (TxMeta, R)>(self, max_len: usize, f: F) -> R {
        let link = self.link;
        let lent = max_len.min(link.caps.mtu);
        let i = link.tx.tail();
        let buf = link.tx.slots.buf_mut(i);
        let lent = lent.min(buf.len());
        let (meta, r) = f(buf.get_mut(..lent).unwrap_or(&mut []));
        if meta.len == 0 {
            return r;
        }
        match meta.dst {
            Some(dst) if meta.len <= lent => {
                link.tx.commit(meta.len, to_sockaddr(dst));
                if link.tx.is_full() {
                    link.flush();
                }
            }
            _ => link.stats.tx_refused += 1,
        }
        r
    }
}

impl Link for UdpLink {
    type RxToken<'a>
        = UdpRxToken<'a>
    where
        Self: 'a;
    type TxToken<'a>
        = UdpTxToken<'a>
    where
        Self: 'a;

    fn capabilities(&self) -> Capabilities {
        self.caps
    }

    fn receive(&mut self) -> Option<UdpRxToken<'_>> {
        if self.tx.queued() > 0 {
            self.flush();
        }
        let fd = self.sock.as_raw_fd();
        let (i, r) = self.rx.next(fd, &mut self.stats, |_| true)?;
        let (_, name, _) = self.rx.slots.get(i);
        let data = self.rx.slots.range(i, r);
        let mut meta = RxMeta::default();
        meta.src = from_sockaddr(&name);
        if !self.local.ip().is_unspecified() {
            meta.dst = Some(UdpAddr::new(*self.local.ip(), self.local.port()));
        }
        Some(UdpRxToken { data, meta })
    }

    fn transmit(&mut self) -> Option<UdpTxToken<'_>> {
        if self.tx.is_full() {
            self.flush();
            if self.tx.is_full() {
                self.stats.tx_full += 1;
                return None;
            }
        }
        Some(UdpTxToken { link: self })
    }

    /// The trait's loop over [`transmit`](Link::transmit), then one flush: the burst
    /// leaves with as few `sendmmsg` calls as the ring size allows.
    fn transmit_burst<F: FnMut(&mut [u8]) -> Option<TxMeta>>(
        &mut self,
        max: usize,
        mut f: F,
    ) -> usize {
        let mtu = self.caps.mtu;
        let mut n = 0;
        while n < max {
            let Some(tok) = self.transmit() else { break };
            let sent = tok.consume_with(mtu, |buf| match f(buf) {
                Some(m) => (m, m.len != 0),
                None => (TxMeta::none(), false),
            });
            if !sent {
                break;
            }
            n += 1;
        }
        self.flush();
        n
    }
}

impl KernelLink for UdpLink {
    fn flush(&mut self) -> usize {
        UdpLink::flush(self)
    }
    fn pending_tx(&self) -> usize {
        UdpLink::pending_tx(self)
    }
    fn stats(&self) -> Stats {
        UdpLink::stats(self)
    }
}
