//! UDP/IPv4 over a link of either medium, so the endpoint engine only ever says "send
//! this wire packet to ip:port" and hears "here is a wire packet from ip:port".
//!
//! On [`Medium::Udp`] links (kernel sockets) the kernel frames, routes and checksums;
//! this layer only validates addresses. On [`Medium::Ethernet`] links it frames
//! Ethernet II / IPv4 / UDP itself (through `wire::frame`, i.e. `smoltcp::wire`),
//! verifies checksums on receive (unless the NIC did), picks the next hop (the
//! destination on the local subnet, else the gateway) and resolves it with ARP into a
//! fixed cache held in caller storage.
//!
//! ARP policy (close to Linux's):
//! * A request for our IP is answered (also RFC 5227 probes with sender 0.0.0.0) and
//!   its on-subnet sender is learned: it is about to talk to us.
//! * Any ARP message, request or reply, whatever its target, refreshes the entry of its
//!   sender IP *if that IP is already in the cache* (this is how gratuitous ARP after a
//!   failover updates a MAC, and how replies to our requests resolve pending entries).
//! * Nothing else creates entries: a reply about an IP we never asked about is dropped
//!   as [`DropReason::ArpUnsolicited`], so unsolicited traffic cannot flood the cache.
//! * A message from another MAC claiming our own IP is an [`DropReason::ArpConflict`].
//!
//! Entries expire [`NetConfig::arp_timeout`] after they were last confirmed. Once an
//! entry in use is half that old, sends keep using it but queue a unicast ARP request
//! (rate-limited), so a live peer is re-confirmed before its entry expires and active
//! flows never stall. When the cache is full, a free slot is taken first, then an
//! expired or failed entry, then the least recently used one.
//!
//! A next hop that leaves [`NetConfig::arp_max_requests`] requests unanswered (one
//! request interval after the last) has *failed*: sends to it get
//! [`SendOutcome::ArpFailed`] at once for as long as the resolution took, so a sender
//! whose queue waits for it (a DGRAM endpoint's) is never stuck behind a host that is
//! not there; the next send after that asks again. A reply meanwhile resolves it.
//!
//! Answering ARP needs the transmit side of the link while the receive buffer is lent
//! by that same link, which the token API (rightly) forbids, so [`Net::rx`] queues ARP
//! replies in a tiny fixed queue ([`ARP_TX_QUEUE_LEN`]) and [`Net::poll_tx`] sends them.
//! The progress loop calls `poll_tx` after each receive batch.
//!
//! Datagrams to our own address (an endpoint sending to itself, or to another endpoint
//! of its domain) never reach us through a raw link: a TAP device, AF_PACKET socket, DPDK
//! port or virtio NIC does not hand our own frames back, as the kernel's UDP loopback
//! does. On Ethernet links [`Net::send`] therefore keeps them in a small fixed queue in
//! caller storage ([`Looped`], sized by [`NetConfig::loopback_bytes`]) and the progress
//! loop receives them from there ([`Net::lend_looped`]) before the link's frames.
//!
//! The parts, each in its own module: `config` ([`NetConfig`]), `route` (subnet and
//! next-hop choice), `arp` (the cache, its policy and the queue of ARP frames),
//! `framing` (receive checks, Ethernet/IPv4/UDP headers on send), `loopback`
//! ([`Looped`]) and `stats` ([`NetStats`], [`DropReason`]). [`Net`] ties them together.

mod arp;
mod config;
mod framing;
mod loopback;
mod route;
mod stats;

#[cfg(test)]
mod tests;

use wire::link::{Link, Medium, RxMeta, UdpAddr};

pub use self::arp::{ARP_TX_QUEUE_LEN, ArpEntry};
use self::arp::{ArpCache, Hop};
pub use self::config::{
    DEFAULT_ARP_MAX_REQUESTS, DEFAULT_ARP_REQUEST_INTERVAL, DEFAULT_ARP_TIMEOUT, MAX_UDP_PAYLOAD,
    NetConfig,
};
use self::framing::{EthernetRx, is_group_mac};
pub use self::loopback::Looped;
pub use self::stats::{DropReason, NetStats};
use crate::errno::{Errno, Result};
use crate::time::{Duration, Instant};

/// The most receive queues a domain's data plane may have (one per context of a
/// scalable endpoint: [`crate::domain::DomainConfig::queues`]).
pub const MAX_QUEUES: usize = 64;

/// A progress pass over every queue's endpoints (and the queue name of a CQ whose
/// endpoints are on several queues).
pub const ALL_QUEUES: u8 = u8::MAX;

/// What [`Net::rx`] made of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RxOutcome<'b> {
    /// A UDP datagram for our address: hand `payload` to the engine.
    Packet {
        /// The sender's address (where replies go).
        src: UdpAddr,
        /// The UDP payload, inside the received buffer.
        payload: &'b [u8],
    },
    /// An ARP message that was answered (reply queued for [`Net::poll_tx`]) or updated
    /// the cache.
    Consumed,
    /// Dropped and counted.
    Dropped(DropReason),
}

/// What [`Net::send`] did with a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOutcome {
    /// Handed to the link: `len` bytes of UDP payload.
    Sent {
        /// Payload bytes the writer produced.
        len: usize,
    },
    /// The next hop's MAC is not known yet; an ARP request went out (or one did
    /// recently). The writer was not called: the caller keeps the packet and retries
    /// (DGRAM callers may treat it as a drop).
    ArpPending,
    /// The next hop did not answer ARP (see the module docs): nothing was sent and the
    /// writer was not called. A DGRAM send fails with -FI_EHOSTUNREACH; the reliability
    /// engine counts a lost packet and its timers decide.
    ArpFailed,
}

/// The UDP/IPv4 layer of one link, with its ARP cache in storage `A` and its queue of
/// datagrams to ourselves in byte storage `B`.
///
/// `A` is any slice-like storage of [`ArpEntry`] (`[ArpEntry; N]`, `&mut [ArpEntry]`,
/// `Box<[ArpEntry]>`); its length is the cache capacity (at least 1 on Ethernet; unused
/// on UDP links, where an empty array will do). `B` holds [`Looped`] datagrams
/// ([`NetConfig::loopback_bytes`]; empty: sends to ourselves fail on Ethernet).
#[derive(Debug)]
pub struct Net<A, B = [u8; 0]> {
    cfg: NetConfig,
    /// The ARP cache in storage `A`, and its queue of frames to send.
    arp: ArpCache<A>,
    /// `None` only while lent out by [`Net::lend_looped`].
    lo: Option<Looped<B>>,
    stats: NetStats,
}

impl<A: AsRef<[ArpEntry]> + AsMut<[ArpEntry]>> Net<A> {
    /// A network layer for `cfg` over ARP cache storage `cache` (all slots are reset),
    /// without loopback storage (see [`Net::with_loopback`]).
    ///
    /// `EINVAL` if the configuration cannot work: prefix longer than 32, TTL 0, an MTU
    /// leaving no room for a payload; on Ethernet also a zero or group MAC, a local IP
    /// that is not a usable unicast address, port 0, a gateway off the subnet or equal
    /// to the local IP, a zero ARP timeout, or an empty cache.
    pub fn new(cfg: NetConfig, cache: A) -> Result<Self> {
        Net::with_loopback(cfg, cache, [])
    }
}

impl<A: AsRef<[ArpEntry]> + AsMut<[ArpEntry]>, B: AsRef<[u8]> + AsMut<[u8]>> Net<A, B> {
    /// [`Net::new`], plus storage `lo` for datagrams to our own address on Ethernet
    /// links ([`NetConfig::loopback_bytes`] of it holds that many; a remainder is
    /// unused). Unused on UDP links.
    pub fn with_loopback(cfg: NetConfig, cache: A, lo: B) -> Result<Self> {
        if cfg.prefix_len > 32 || cfg.ttl == 0 || cfg.max_payload() == 0 {
            return Err(Errno::EINVAL);
        }
        let net = Net {
            cfg,
            arp: ArpCache::new(cache),
            lo: Some(Looped::new(lo, cfg.max_payload())),
            stats: NetStats::default(),
        };
        if cfg.medium == Medium::Ethernet {
            let ok = cfg.local_mac != [0; 6]
                && !is_group_mac(cfg.local_mac)
                && cfg.usable_unicast(cfg.local_ip)
                && cfg.local_port != 0
                && cfg.arp_timeout > Duration::ZERO
                && cfg.arp_max_requests > 0
                && !net.arp.entries().is_empty()
                && cfg
                    .gateway
                    .is_none_or(|g| g != cfg.local_ip && cfg.on_subnet(g) && cfg.usable_unicast(g));
            if !ok {
                return Err(Errno::EINVAL);
            }
        }
        Ok(net)
    }

    /// The configuration.
    pub fn config(&self) -> &NetConfig {
        &self.cfg
    }

    /// The counters.
    pub fn stats(&self) -> &NetStats {
        &self.stats
    }

    /// Our address.
    pub fn local_addr(&self) -> UdpAddr {
        self.cfg.local_addr()
    }

    /// Largest wire packet (UDP payload) [`send`](Net::send) accepts: what to announce
    /// as `max_pkt` in the handshake.
    pub fn max_payload(&self) -> usize {
        self.cfg.max_payload()
    }

    /// The ARP cache slots, for diagnostics.
    pub fn arp_entries(&self) -> &[ArpEntry] {
        self.arp.entries()
    }

    /// The MAC of `ip` if the cache holds an unexpired mapping.
    pub fn arp_lookup(&self, now: Instant, ip: [u8; 4]) -> Option<[u8; 6]> {
        self.arp.lookup(now, ip, self.cfg.arp_timeout)
    }

    /// Forget every ARP entry (e.g. after the link went down).
    pub fn arp_flush(&mut self) {
        self.arp.flush();
    }

    /// ARP frames are queued for [`poll_tx`](Net::poll_tx).
    pub fn has_pending_tx(&self) -> bool {
        self.arp.has_pending_tx()
    }

    /// Process one received buffer (a whole Ethernet frame, or a UDP payload with its
    /// source in `meta.src` on UDP links). Never panics, whatever the bytes.
    ///
    /// ARP requests for our IP are answered through a queue: call
    /// [`poll_tx`](Net::poll_tx) after a receive batch.
    // Always inline: called once, in the pass's receive loop, where a call (its
    // frame, `meta` and the outcome through memory) costs a third of what it does.
    #[inline(always)]
    pub fn rx<'b>(&mut self, now: Instant, meta: RxMeta, buf: &'b [u8]) -> RxOutcome<'b> {
        let r = match self.cfg.medium {
            Medium::Udp => framing::rx_udp(&self.cfg, meta, buf),
            Medium::Ethernet => self.rx_ethernet(now, buf),
        };
        match r {
            Ok(RxOutcome::Packet { .. }) => self.stats.rx_packets += 1,
            Ok(_) => self.stats.rx_arp += 1,
            Err(reason) => self.stats.drop(reason),
        }
        r.unwrap_or_else(RxOutcome::Dropped)
    }

    /// A whole Ethernet frame: ARP goes to the cache, a UDP datagram for us to the
    /// caller.
    fn rx_ethernet<'b>(
        &mut self,
        now: Instant,
        buf: &'b [u8],
    ) -> core::result::Result<RxOutcome<'b>, DropReason> {
        match framing::rx_ethernet(&self.cfg, buf)? {
            EthernetRx::Udp { src, payload } => Ok(RxOutcome::Packet { src, payload }),
            EthernetRx::Arp(msg) => self
                .arp
                .rx(&self.cfg, &mut self.stats, now, &msg)
                .map(|()| RxOutcome::Consumed),
        }
    }

    /// Send queued ARP frames while the link has transmit slots; returns how many went.
    pub fn poll_tx<L: Link>(&mut self, now: Instant, link: &mut L) -> usize {
        let _ = now; // ARP frames carry no timestamps; kept for a uniform progress API
        self.arp.poll_tx(&self.cfg, &mut self.stats, link)
    }

    /// Send one wire packet of at most `len_hint` bytes to `dst`.
    ///
    /// `write` gets a buffer of exactly `len_hint` bytes inside the link's transmit
    /// buffer (after the Ethernet/IPv4/UDP headers on raw links), writes the packet at
    /// its start and returns its length (`1..=len_hint`); headers and checksums are
    /// filled afterwards (checksums left to the NIC with tx offload). `write` is called
    /// only when the packet is actually sent.
    ///
    /// Errors: `EINVAL` for an unusable `dst` (port 0, unspecified, broadcast, multicast),
    /// `len_hint` 0, a link of another medium than configured, or when `write` returns 0 or more than `len_hint` (nothing is
    /// sent); `EMSGSIZE` if `len_hint` exceeds [`max_payload`](Net::max_payload) or the
    /// link lends a smaller buffer; `EHOSTUNREACH` off the subnet without a gateway (and
    /// for loopback destinations on raw links); `EAGAIN` when the link has no transmit
    /// slot (for the packet or for the ARP request it needs).
    ///
    /// On Ethernet links a datagram to our own address and port goes to the loopback
    /// queue instead of the link (`EAGAIN` when that is full, `EHOSTUNREACH` when the
    /// `Net` has no loopback storage).
    pub fn send<L: Link>(
        &mut self,
        now: Instant,
        link: &mut L,
        dst: UdpAddr,
        len_hint: usize,
        write: impl FnOnce(&mut [u8]) -> usize,
    ) -> Result<SendOutcome> {
        let dst_ip = dst.ip.octets();
        if dst.port == 0 || len_hint == 0 || link.capabilities().medium != self.cfg.medium {
            return Err(Errno::EINVAL);
        }
        let a = dst.ip;
        if a.is_unspecified() || a.is_broadcast() || a.is_multicast() {
            return Err(Errno::EINVAL);
        }
        if len_hint > self.max_payload() {
            return Err(Errno::EMSGSIZE);
        }
        let result = match self.cfg.medium {
            Medium::Udp => framing::send_udp(link, dst, len_hint, write),
            Medium::Ethernet => {
                if a.is_loopback() {
                    return Err(Errno::EHOSTUNREACH);
                }
                if dst == self.cfg.local_addr() {
                    return self.send_looped(len_hint, write);
                }
                if !self.cfg.usable_unicast(dst_ip) {
                    return Err(Errno::EINVAL); // our subnet's broadcast address
                }
                let hop = self.cfg.next_hop(dst_ip)?;
                let dst_mac = match self
                    .arp
                    .resolve(&self.cfg, &mut self.stats, now, link, hop)?
                {
                    Hop::Mac(m) => m,
                    Hop::Pending => return Ok(SendOutcome::ArpPending),
                    Hop::Failed => return Ok(SendOutcome::ArpFailed),
                };
                framing::send_ethernet(&self.cfg, link, dst_mac, dst, len_hint, write)
            }
        };
        let len = result?;
        self.stats.tx_packets += 1;
        Ok(SendOutcome::Sent { len })
    }
}
