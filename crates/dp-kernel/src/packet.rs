//! AF_PACKET raw sockets on a named interface as a [`Medium::Ethernet`] link.
//!
//! The socket sees every frame the interface receives (a copy: the kernel's own stack
//! still processes them, so the stack must use an IPv4 address the kernel does not
//! have on that interface, or the kernel answers too) and transmits whole frames on it.
//!
//! * **Filter**: a classic BPF program attached before the socket is bound keeps only
//!   IPv4 and ARP frames (by EtherType), so IPv6 neighbour discovery and everything
//!   else never costs a copy or a wake-up, and no frame of another interface is ever
//!   queued (the socket is created with protocol 0, receiving nothing until bound).
//! * **Own frames**: `PACKET_IGNORE_OUTGOING` (Linux 4.20+) stops the kernel from
//!   looping our transmissions back; on older kernels they are recognised by their
//!   packet type and dropped ([`Stats::rx_filtered`]).
//! * **Batches**: receive and transmit rings with `recvmmsg` / `sendmmsg`, with the same
//!   [flush rule](crate::udp#rings-and-the-flush-rule) as [`UdpLink`](crate::UdpLink).
//! * **Checksums**: frames the kernel itself sends out of a device with checksum
//!   offload (veth, most NICs) may be seen here before their UDP checksum is filled;
//!   the stack would drop those. Our stack's own frames are always complete. Turn tx
//!   checksum offload off (`ethtool -K <if> tx off`) on a peer interface whose kernel
//!   traffic the stack must accept.
//! * **MAC filtering**: a real NIC only passes frames for its own MAC (and broadcast).
//!   If the stack uses a MAC of its own, set [`PacketConfig::promiscuous`].

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use wire::frame::ETH_HEADER_LEN;
use wire::link::{Capabilities, Link, Medium, RxToken, TxMeta, TxToken};

use crate::mmsg::{MAX_RING, NoName, RxRing, TxRing};
use crate::udp::{DEFAULT_RECV_BUFFER, DEFAULT_RING, DROP_DRAIN_MS};
use crate::{KernelLink, Stats, sys};

/// Bytes a VLAN tag may add to a received frame beyond the MTU.
const VLAN_TAG_LEN: usize = 4;

/// How to build an [`AfPacketLink`]. Start from [`PacketConfig::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PacketConfig {
    /// The interface to bind (it must exist; it need not be up yet).
    pub ifname: String,
    /// Slots in each of the receive and transmit rings (`1..=1024`).
    pub ring: usize,
    /// Put the interface in promiscuous mode for as long as the socket lives
    /// (`PACKET_MR_PROMISC`, undone by the kernel when the socket closes), so frames
    /// for a MAC other than the interface's reach the stack on real NICs.
    pub promiscuous: bool,
    /// `SO_RCVBUF` to request (`SO_RCVBUFFORCE` when privileged); `None` keeps the
    /// kernel's default.
    pub recv_buffer: Option<usize>,
    /// `SO_SNDBUF` to request; `None` keeps the kernel's default.
    pub send_buffer: Option<usize>,
}

impl PacketConfig {
    /// Defaults for interface `ifname`: [`DEFAULT_RING`] slots, not promiscuous, a
    /// [`DEFAULT_RECV_BUFFER`] receive buffer.
    pub fn new(ifname: &str) -> Self {
        PacketConfig {
            ifname: ifname.to_owned(),
            ring: DEFAULT_RING,
            promiscuous: false,
            recv_buffer: Some(DEFAULT_RECV_BUFFER),
            send_buffer: None,
        }
    }
}

/// The classic BPF program: accept IPv4 (0x0800) and ARP (0x0806) frames whole, drop
/// everything else.
fn ipv4_arp_filter() -> [libc::sock_filter; 5] {
    const LD_H_ABS: u16 = (libc::BPF_LD | libc::BPF_H | libc::BPF_ABS) as u16;
    const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    [
        op(LD_H_ABS, 0, 0, 12),                  // A = EtherType
        op(JEQ_K, 2, 0, libc::ETH_P_IP as u32),  // IPv4 -> accept
        op(JEQ_K, 1, 0, libc::ETH_P_ARP as u32), // ARP -> accept
        op(RET_K, 0, 0, 0),                      // drop
        op(RET_K, 0, 0, u32::MAX),               // accept the whole frame
    ]
}

/// `PACKET_FANOUT_FLAG_UNIQUEID` (linux/if_packet.h; not in every libc release).
const PACKET_FANOUT_FLAG_UNIQUEID: libc::c_int = 0x2000;

/// The `PACKET_FANOUT_CBPF` program of [`AfPacketLink::queues`]: for an IPv4 UDP
/// frame with a 20-byte IP header (what the stack sends) that is not a later
/// fragment, the context index of the destination endpoint id (UDP payload bytes
/// 10..12, index in bits 10..16, `wire::packet::EP_CTX_SHIFT`) modulo `n`; 0 for
/// everything else (ARP, other protocols, IP options, frames too short: a load beyond
/// the frame ends the program with 0). The fanout runs before the socket sees the
/// frame, where the packet starts at its IP header: loads are relative to the network
/// header (`SKF_NET_OFF`) and the EtherType is the skb's protocol (`SKF_AD_PROTOCOL`).
fn context_fanout(n: u32) -> [libc::sock_filter; 14] {
    const LD_H_ABS: u16 = (libc::BPF_LD | libc::BPF_H | libc::BPF_ABS) as u16;
    const LD_B_ABS: u16 = (libc::BPF_LD | libc::BPF_B | libc::BPF_ABS) as u16;
    const JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
    const JSET_K: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
    const RSH_K: u16 = (libc::BPF_ALU | libc::BPF_RSH | libc::BPF_K) as u16;
    const AND_K: u16 = (libc::BPF_ALU | libc::BPF_AND | libc::BPF_K) as u16;
    const MOD_K: u16 = (libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K) as u16;
    const RET_A: u16 = (libc::BPF_RET | libc::BPF_A) as u16;
    const RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    // Negative offsets as the kernel reads them (two's complement in `k`).
    let net = |k: i32| (libc::SKF_NET_OFF + k) as u32;
    let proto = (libc::SKF_AD_OFF + libc::SKF_AD_PROTOCOL) as u32;
    let shift = wire::packet::EP_CTX_SHIFT;
    // Jumps count from the next instruction; the last one is `return 0`.
    [
        op(LD_H_ABS, 0, 0, proto),                 // 0: A = EtherType
        op(JEQ_K, 0, 11, libc::ETH_P_IP as u32),   // 1: not IPv4 -> 0
        op(LD_B_ABS, 0, 0, net(0)),                // 2: A = version, header length
        op(JEQ_K, 0, 9, 0x45),                     // 3: IP options -> 0
        op(LD_B_ABS, 0, 0, net(9)),                // 4: A = IP protocol
        op(JEQ_K, 0, 7, libc::IPPROTO_UDP as u32), // 5: not UDP -> 0
        op(LD_H_ABS, 0, 0, net(6)),                // 6: A = flags, fragment offset
        op(JSET_K, 5, 0, 0x1fff),                  // 7: a later fragment -> 0
        op(LD_H_ABS, 0, 0, net(20 + 8 + 10)),      // 8: A = destination endpoint id
        op(RSH_K, 0, 0, shift),                    // 9: A = its context index ...
        op(AND_K, 0, 0, (1 << (16 - shift)) - 1),  // 10
        op(MOD_K, 0, 0, n.max(1)),                 // 11: ... modulo n
        op(RET_A, 0, 0, 0),                        // 12
        op(RET_K, 0, 0, 0),                        // 13: queue 0
    ]
}

/// An AF_PACKET socket bound to one interface; see the [module docs](self).
#[derive(Debug)]
pub struct AfPacketLink {
    fd: OwnedFd,
    ifname: String,
    ifindex: i32,
    mac: [u8; 6],
    ifmtu: usize,
    caps: Capabilities,
    rx: RxRing<libc::sockaddr_ll>,
    tx: TxRing<NoName>,
    stats: Stats,
    ignore_outgoing: bool,
}

impl AfPacketLink {
    /// A link on interface `ifname` with the default [`PacketConfig`].
    pub fn open(ifname: &str) -> io::Result<Self> {
        Self::new(PacketConfig::new(ifname))
    }

    /// Open, filter and bind the socket, read the interface's MAC and MTU, and allocate
    /// the rings. Needs `CAP_NET_RAW`.
    pub fn new(cfg: PacketConfig) -> io::Result<Self> {
        if cfg.ring == 0 || cfg.ring > MAX_RING {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("ring of {} slots (1..={MAX_RING})", cfg.ring),
            ));
        }
        sys::check_ifname(&cfg.ifname)?;
        let ifindex = sys::if_index(&cfg.ifname)?;
        let mac = sys::if_hwaddr(&cfg.ifname)?;
        let ifmtu = sys::if_mtu(&cfg.ifname)?;
        let fd = sys::packet_socket()?;
        let raw = fd.as_raw_fd();
        sys::attach_filter(raw, &ipv4_arp_filter())?;
        let one: libc::c_int = 1;
        let ignore_outgoing =
            match sys::setsockopt(raw, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &one) {
                Ok(()) => true,
                Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => false,
                Err(e) => return Err(e),
            };
        if let Some(b) = cfg.recv_buffer {
            sys::set_buffer_size(raw, true, b)?;
        }
        if let Some(b) = cfg.send_buffer {
            sys::set_buffer_size(raw, false, b)?;
        }
        sys::bind_packet(raw, ifindex)?;
        if cfg.promiscuous {
            sys::packet_membership(raw, ifindex, libc::PACKET_MR_PROMISC)?;
        }
        let frame_mtu = ifmtu + ETH_HEADER_LEN;
        let mut caps = Capabilities::new(Medium::Ethernet, frame_mtu);
        caps.max_burst = cfg.ring;
        Ok(AfPacketLink {
            rx: RxRing::new(cfg.ring, frame_mtu + VLAN_TAG_LEN)?,
            tx: TxRing::new(cfg.ring, frame_mtu)?,
            fd,
            ifname: cfg.ifname,
            ifindex,
            mac,
            ifmtu,
            caps,
            stats: Stats::default(),
            ignore_outgoing,
        })
    }

    /// One link per receive queue of a scalable endpoint's contexts (issue #31): `n`
    /// sockets (`1..=64`) on interface `cfg.ifname`, joined in order into one packet
    /// fanout group (`PACKET_FANOUT`, mode `PACKET_FANOUT_CBPF`) whose classic BPF
    /// program steers each IPv4 UDP frame (20-byte IP header) by the context index in
    /// its destination endpoint id (wire protocol 3.9) to link `index % n`. Link 0
    /// gets the rest (ARP, datagrams naming no context, IP options, later fragments);
    /// every link may send. The kernel picks the group's id
    /// (`PACKET_FANOUT_FLAG_UNIQUEID`). Needs `CAP_NET_RAW`.
    pub fn queues(cfg: PacketConfig, n: usize) -> io::Result<Vec<AfPacketLink>> {
        if n == 0 || n > 64 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{n} queues (1..=64)"),
            ));
        }
        let links = (0..n)
            .map(|_| Self::new(cfg.clone()))
            .collect::<io::Result<Vec<_>>>()?;
        // The first socket asks the kernel for an id no group has (a flag only the
        // group's founder passes); the others join that id.
        let mode = libc::PACKET_FANOUT_CBPF as libc::c_int;
        let fd0 = links[0].fd.as_raw_fd();
        sys::setsockopt(
            fd0,
            libc::SOL_PACKET,
            libc::PACKET_FANOUT,
            &((mode | PACKET_FANOUT_FLAG_UNIQUEID) << 16),
        )?;
        let id = sys::getsockopt_int(fd0, libc::SOL_PACKET, libc::PACKET_FANOUT)? & 0xffff;
        for l in &links[1..] {
            let fd = l.fd.as_raw_fd();
            sys::setsockopt(
                fd,
                libc::SOL_PACKET,
                libc::PACKET_FANOUT,
                &(id | (mode << 16)),
            )?;
        }
        sys::attach_fanout_filter(fd0, &context_fanout(n as u32))?;
        Ok(links)
    }

    /// The interface's name.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The interface's index (as in `ip link`).
    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }

    /// The interface's MAC (`SIOCGIFHWADDR`): the natural source address for the stack
    /// on this interface.
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The interface's IP MTU (`SIOCGIFMTU`) when the link was opened;
    /// [`Capabilities::mtu`] is this plus the Ethernet header.
    pub fn interface_mtu(&self) -> usize {
        self.ifmtu
    }

    /// Whether the kernel drops our own frames for us (`PACKET_IGNORE_OUTGOING`);
    /// otherwise the link drops them itself.
    pub fn ignores_outgoing(&self) -> bool {
        self.ignore_outgoing
    }

    /// Hand every queued frame to the kernel now; returns how many are still queued
    /// because the socket's send buffer is full.
    pub fn flush(&mut self) -> usize {
        self.tx.flush(self.fd.as_raw_fd(), &mut self.stats)
    }

    /// Frames queued for transmission and not yet handed to the kernel.
    pub fn pending_tx(&self) -> usize {
        self.tx.queued()
    }

    /// Frames already received into the ring and not yet lent (drain
    /// [`Link::receive`] before waiting on the descriptor).
    pub fn pending_rx(&self) -> usize {
        self.rx.ready()
    }

    /// The receive buffer the kernel actually granted (`SO_RCVBUF`, which reports
    /// twice the requested size, its bookkeeping included), to check what
    /// `recv_buffer` achieved without privilege.
    pub fn recv_buffer_size(&self) -> io::Result<usize> {
        let v = sys::getsockopt_int(self.fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF)?;
        Ok(usize::try_from(v).unwrap_or(0))
    }

    /// The link's counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }
}

impl AsRawFd for AfPacketLink {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for AfPacketLink {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl Drop for AfPacketLink {
    fn drop(&mut self) {
        self.tx
            .drain(self.fd.as_raw_fd(), &mut self.stats, DROP_DRAIN_MS);
    }
}

/// A received frame lent by an [`AfPacketLink`]: a slot of its receive ring.
#[derive(Debug)]
pub struct PacketRxToken<'a> {
    frame: &'a [u8],
}

impl RxToken for PacketRxToken<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(self.frame)
    }
}

/// A free slot of an [`AfPacketLink`]'s transmit ring; a filled slot is queued and sent
/// by the next flush.
#[derive(Debug)]
pub struct PacketTxToken<'a> {
    link: &'a mut AfPacketLink,
}

impl TxToken for PacketTxToken<'_> {
    fn consume_with<R, F: FnOnce(&mut [u8]) -> (TxMeta, R)>(self, max_len: usize, f: F) -> R {
        let link = self.link;
        let i = link.tx.tail();
        let buf = link.tx.slots.buf_mut(i);
        let lent = max_len.min(link.caps.mtu).min(buf.len());
        let (meta, r) = f(buf.get_mut(..lent).unwrap_or(&mut []));
        if meta.len == 0 {
            return r;
        }
        if meta.len <= lent {
            link.tx.commit(meta.len, NoName);
            if link.tx.is_full() {
                link.flush();
            }
        } else {
            link.stats.tx_refused += 1;
        }
        r
    }
}

impl Link for AfPacketLink {
    type RxToken<'a>
        = PacketRxToken<'a>
    where
        Self: 'a;
    type TxToken<'a>
        = PacketTxToken<'a>
    where
        Self: 'a;

    fn capabilities(&self) -> Capabilities {
        self.caps
    }

    fn receive(&mut self) -> Option<PacketRxToken<'_>> {
        if self.tx.queued() > 0 {
            self.flush();
        }
        let fd = self.fd.as_raw_fd();
        let (i, _) = self.rx.next(fd, &mut self.stats, |sll| {
            sll.sll_pkttype != libc::PACKET_OUTGOING
        })?;
        let (frame, _, _) = self.rx.slots.get(i);
        Some(PacketRxToken { frame })
    }

    fn transmit(&mut self) -> Option<PacketTxToken<'_>> {
        if self.tx.is_full() {
            self.flush();
            if self.tx.is_full() {
                self.stats.tx_full += 1;
                return None;
            }
        }
        Some(PacketTxToken { link: self })
    }

    /// The trait's loop over [`transmit`](Link::transmit), then one flush.
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

impl KernelLink for AfPacketLink {
    fn flush(&mut self) -> usize {
        AfPacketLink::flush(self)
    }
    fn pending_tx(&self) -> usize {
        AfPacketLink::pending_tx(self)
    }
    fn stats(&self) -> Stats {
        AfPacketLink::stats(self)
    }
}
