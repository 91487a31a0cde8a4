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

use heapless::Deque;
use wire::frame::{
    self, ARP_FRAME_LEN, ArpMessage, ArpOperation, DEFAULT_TTL, ETH_HEADER_LEN,
    ETH_IPV4_UDP_HEADER_LEN, EthernetAddress, IPV4_HEADER_LEN, Ipv4Address, ParsedFrame,
    UDP_HEADER_LEN, UdpFrameRepr,
};
use wire::link::{Capabilities, Link, Medium, RxMeta, TxMeta, TxToken, UdpAddr};

use crate::errno::{Errno, Result};
use crate::time::{Duration, Instant};

/// ARP frames (replies and refresh requests) [`Net`] can hold until [`Net::poll_tx`].
/// More are dropped and counted ([`NetStats::arp_tx_dropped`]); the asker retries.
pub const ARP_TX_QUEUE_LEN: usize = 4;

/// Largest UDP payload of one IPv4 datagram (65535 minus IPv4 and UDP headers).
pub const MAX_UDP_PAYLOAD: usize = u16::MAX as usize - IPV4_HEADER_LEN - UDP_HEADER_LEN;

/// Default [`NetConfig::arp_timeout`]: 60 s, like common host stacks.
pub const DEFAULT_ARP_TIMEOUT: Duration = Duration::from_secs(60);

/// Bytes in front of each [`Looped`] slot: the datagram's length.
const LOOP_SLOT_HEADER: usize = 2;

/// Default [`NetConfig::arp_request_interval`]: at most one request per next hop per
/// 100 ms.
pub const DEFAULT_ARP_REQUEST_INTERVAL: Duration = Duration::from_millis(100);

/// Default [`NetConfig::arp_max_requests`]: 3, Linux's `ucast_solicit` +
/// `mcast_solicit` for a new neighbour being 3 + 3 at a much longer interval.
pub const DEFAULT_ARP_MAX_REQUESTS: u8 = 3;

const BROADCAST_MAC: [u8; 6] = [0xff; 6];
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;

/// How this host appears on the network, and the link facts the framing depends on.
///
/// Built with [`NetConfig::new`] from the link's [`Capabilities`], then adjusted field
/// by field (Ethernet links need at least `local_mac` and `prefix_len`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct NetConfig {
    /// What the link's buffers contain.
    pub medium: Medium,
    /// The link's MTU as in [`Capabilities::mtu`] (frame length without FCS on
    /// Ethernet, UDP payload length on UDP).
    pub mtu: usize,
    /// The NIC verifies received IPv4/UDP checksums (Ethernet only).
    pub rx_checksum_offload: bool,
    /// The NIC fills transmitted IPv4/UDP checksums (Ethernet only).
    pub tx_checksum_offload: bool,
    /// The medium cannot alter a frame ([`Capabilities::intact`]): received checksums
    /// are not verified, and adapters leave the RDM CRC32C off.
    pub intact: bool,
    /// Our IPv4 address. On UDP links it is informational (the socket's binding).
    pub local_ip: [u8; 4],
    /// Our UDP port. On UDP links 0 means "whatever the socket is bound to".
    pub local_port: u16,
    /// Our MAC address (Ethernet only; must be unicast and not zero).
    pub local_mac: [u8; 6],
    /// Length of the local subnet's prefix (0..=32). Default 32: only the gateway
    /// reaches anything, so forgetting it fails loudly (`EHOSTUNREACH`).
    pub prefix_len: u8,
    /// Next hop for destinations off the local subnet (must be on it).
    pub gateway: Option<[u8; 4]>,
    /// IPv4 TTL of emitted datagrams (default 64).
    pub ttl: u8,
    /// How long an ARP entry stays valid after it was last confirmed.
    pub arp_timeout: Duration,
    /// Minimum time between two ARP requests for the same next hop.
    pub arp_request_interval: Duration,
    /// Unanswered requests after which a next hop has failed (at least 1).
    pub arp_max_requests: u8,
}

impl NetConfig {
    /// A configuration for a link with capabilities `caps`, at `local_ip:local_port`.
    /// Defaults: MAC zero (set it for Ethernet), prefix 32, no gateway, TTL 64, ARP
    /// timeout [`DEFAULT_ARP_TIMEOUT`], request interval [`DEFAULT_ARP_REQUEST_INTERVAL`],
    /// [`DEFAULT_ARP_MAX_REQUESTS`] requests before a next hop has failed.
    pub fn new(caps: &Capabilities, local_ip: [u8; 4], local_port: u16) -> Self {
        NetConfig {
            medium: caps.medium,
            mtu: caps.mtu,
            rx_checksum_offload: caps.rx_checksum_offload,
            tx_checksum_offload: caps.tx_checksum_offload,
            intact: caps.intact,
            local_ip,
            local_port,
            local_mac: [0; 6],
            prefix_len: 32,
            gateway: None,
            ttl: DEFAULT_TTL,
            arp_timeout: DEFAULT_ARP_TIMEOUT,
            arp_request_interval: DEFAULT_ARP_REQUEST_INTERVAL,
            arp_max_requests: DEFAULT_ARP_MAX_REQUESTS,
        }
    }

    /// Set the Ethernet addressing in one go: MAC, subnet prefix and gateway.
    pub fn with_ethernet(mut self, mac: [u8; 6], prefix_len: u8, gateway: Option<[u8; 4]>) -> Self {
        self.local_mac = mac;
        self.prefix_len = prefix_len;
        self.gateway = gateway;
        self
    }

    /// The subnet mask `prefix_len` stands for (as a big-endian integer).
    pub fn netmask(&self) -> u32 {
        u32::MAX
            .checked_shl(32u32.saturating_sub(u32::from(self.prefix_len)))
            .unwrap_or(0)
    }

    /// Our address as a [`UdpAddr`].
    pub fn local_addr(&self) -> UdpAddr {
        UdpAddr::new(Ipv4Address::from(self.local_ip), self.local_port)
    }

    /// Largest UDP payload (our wire packet) one datagram on this link carries.
    pub fn max_payload(&self) -> usize {
        match self.medium {
            Medium::Ethernet => self.mtu.saturating_sub(ETH_IPV4_UDP_HEADER_LEN),
            Medium::Udp => self.mtu,
        }
        .min(MAX_UDP_PAYLOAD)
    }

    /// Bytes of loopback storage ([`Net::with_loopback`]) that hold `slots` datagrams
    /// to ourselves: 0 on UDP links (the kernel loops them back), `None` on overflow.
    pub fn loopback_bytes(&self, slots: usize) -> Option<usize> {
        match self.medium {
            Medium::Ethernet => slots.checked_mul(LOOP_SLOT_HEADER + self.max_payload()),
            Medium::Udp => Some(0),
        }
    }

    fn checksum_caps(&self) -> frame::ChecksumCapabilities {
        let mut caps = Capabilities::new(self.medium, self.mtu);
        // Nothing to verify on a medium that cannot corrupt.
        caps.rx_checksum_offload = self.rx_checksum_offload || self.intact;
        caps.tx_checksum_offload = self.tx_checksum_offload;
        caps.checksum_caps()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum ArpState {
    #[default]
    Free,
    /// Asked (or about to ask), no answer yet.
    Pending,
    /// MAC known since `confirmed`.
    Resolved,
    /// `arp_max_requests` requests went unanswered; sends fail until the hold ends
    /// (see [`Net::resolve`]).
    Failed,
}

/// One slot of the ARP cache. Callers only provide storage (`[ArpEntry::EMPTY; N]`);
/// the getters are for diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ArpEntry {
    state: ArpState,
    ip: [u8; 4],
    mac: [u8; 6],
    /// When the MAC was last learned or confirmed.
    confirmed: Instant,
    /// Last use by a send, for LRU replacement (learn time for learned entries).
    used: Instant,
    /// Last ARP request sent for `ip`, for rate limiting.
    requested: Option<Instant>,
    /// Requests sent since the entry last became pending.
    asked: u8,
}

impl ArpEntry {
    /// An unused slot.
    pub const EMPTY: ArpEntry = ArpEntry {
        state: ArpState::Free,
        ip: [0; 4],
        mac: [0; 6],
        confirmed: Instant::ZERO,
        used: Instant::ZERO,
        requested: None,
        asked: 0,
    };

    /// The IPv4 address this slot is about, unless it is free.
    pub fn ip(&self) -> Option<[u8; 4]> {
        (self.state != ArpState::Free).then_some(self.ip)
    }

    /// The MAC address, once resolved (possibly expired: see [`Net::arp_lookup`]).
    pub fn mac(&self) -> Option<[u8; 6]> {
        (self.state == ArpState::Resolved).then_some(self.mac)
    }

    /// Waiting for an ARP reply.
    pub fn is_pending(&self) -> bool {
        self.state == ArpState::Pending
    }

    /// Gave up: its requests went unanswered (see [`NetConfig::arp_max_requests`]).
    pub fn has_failed(&self) -> bool {
        self.state == ArpState::Failed
    }

    fn expired(&self, now: Instant, timeout: Duration) -> bool {
        match self.state {
            ArpState::Free => false,
            ArpState::Pending | ArpState::Failed => now - self.used >= timeout,
            ArpState::Resolved => now - self.confirmed >= timeout,
        }
    }
}

/// Why [`Net::rx`] dropped a buffer. Each reason has a counter
/// ([`NetStats::dropped`]); the order follows `docs/wire-protocol.md` section 9.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DropReason {
    /// Shorter than the Ethernet, IPv4, UDP or ARP header.
    Truncated,
    /// An IPv4 or UDP length field inconsistent with the frame or with each other
    /// (e.g. a frame cut short inside the payload).
    BadLength,
    /// IPv4 header or UDP checksum wrong, or UDP checksum zero (raw links).
    BadChecksum,
    /// A field the specification forbids (UDP destination port 0, unknown ARP opcode).
    Malformed,
    /// Not IPv4/UDP nor Ethernet/IPv4 ARP: another EtherType, IP version or protocol.
    OtherProtocol,
    /// An IPv4 fragment (v1 never fragments).
    Fragment,
    /// Destination MAC or IPv4 address not ours.
    NotForUs,
    /// Destination UDP port not ours.
    WrongPort,
    /// Source address unusable for a reply (port 0, unspecified, broadcast, multicast,
    /// or on raw links loopback / our subnet's broadcast / a multicast MAC).
    BadSource,
    /// A UDP-medium buffer without a source address in its [`RxMeta`].
    NoSource,
    /// A valid ARP message about other hosts (request for another IP, our own request
    /// looped back) that refreshed nothing.
    ArpNotForUs,
    /// An ARP reply about an IP we never asked about.
    ArpUnsolicited,
    /// Another MAC claims our IP address.
    ArpConflict,
}

impl DropReason {
    /// Number of reasons.
    pub const COUNT: usize = 13;

    /// Every reason, in counter order.
    pub const ALL: [DropReason; Self::COUNT] = [
        DropReason::Truncated,
        DropReason::BadLength,
        DropReason::BadChecksum,
        DropReason::Malformed,
        DropReason::OtherProtocol,
        DropReason::Fragment,
        DropReason::NotForUs,
        DropReason::WrongPort,
        DropReason::BadSource,
        DropReason::NoSource,
        DropReason::ArpNotForUs,
        DropReason::ArpUnsolicited,
        DropReason::ArpConflict,
    ];

    /// A short name for statistics output.
    pub const fn name(self) -> &'static str {
        match self {
            DropReason::Truncated => "truncated",
            DropReason::BadLength => "bad_length",
            DropReason::BadChecksum => "bad_checksum",
            DropReason::Malformed => "malformed",
            DropReason::OtherProtocol => "other_protocol",
            DropReason::Fragment => "fragment",
            DropReason::NotForUs => "not_for_us",
            DropReason::WrongPort => "wrong_port",
            DropReason::BadSource => "bad_source",
            DropReason::NoSource => "no_source",
            DropReason::ArpNotForUs => "arp_not_for_us",
            DropReason::ArpUnsolicited => "arp_unsolicited",
            DropReason::ArpConflict => "arp_conflict",
        }
    }

    const fn index(self) -> usize {
        match self {
            DropReason::Truncated => 0,
            DropReason::BadLength => 1,
            DropReason::BadChecksum => 2,
            DropReason::Malformed => 3,
            DropReason::OtherProtocol => 4,
            DropReason::Fragment => 5,
            DropReason::NotForUs => 6,
            DropReason::WrongPort => 7,
            DropReason::BadSource => 8,
            DropReason::NoSource => 9,
            DropReason::ArpNotForUs => 10,
            DropReason::ArpUnsolicited => 11,
            DropReason::ArpConflict => 12,
        }
    }

    fn from_wire(e: wire::Error) -> Self {
        match e {
            wire::Error::Truncated => DropReason::Truncated,
            wire::Error::BadLength => DropReason::BadLength,
            wire::Error::BadChecksum => DropReason::BadChecksum,
            wire::Error::NotOurs => DropReason::OtherProtocol,
            _ => DropReason::Malformed,
        }
    }
}

/// Counters of a [`Net`]. Every [`Net::rx`] call increments exactly one of
/// `rx_packets`, `rx_arp` or a drop counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NetStats {
    /// UDP datagrams delivered by [`Net::rx`].
    pub rx_packets: u64,
    /// ARP messages consumed (answered or learned from).
    pub rx_arp: u64,
    /// Datagrams handed to the link by [`Net::send`].
    pub tx_packets: u64,
    /// Sends deferred with [`SendOutcome::ArpPending`].
    pub tx_arp_pending: u64,
    /// Sends refused with [`SendOutcome::ArpFailed`]: the next hop did not answer.
    pub tx_arp_failed: u64,
    /// Next hops given up on after [`NetConfig::arp_max_requests`] unanswered requests.
    pub arp_failures: u64,
    /// ARP requests handed to the link (resolution and refresh).
    pub arp_requests_sent: u64,
    /// ARP replies handed to the link.
    pub arp_replies_sent: u64,
    /// ARP frames not sent: the queue was full or the link lent too small a buffer.
    pub arp_tx_dropped: u64,
    /// Live (unexpired) ARP entries replaced because the cache was full.
    pub arp_evictions: u64,
    /// Datagrams to our own address kept for local delivery (Ethernet links), instead
    /// of going to the link.
    pub tx_looped: u64,
    /// ... of those, received by the progress loop ([`Net::lend_looped`]).
    pub rx_looped: u64,
    /// Sends to our own address refused with `EAGAIN`: the loopback queue was full.
    pub tx_loop_full: u64,
    /// Sends to our own address refused with `EHOSTUNREACH`: no loopback storage.
    pub tx_loop_refused: u64,
    dropped: [u64; DropReason::COUNT],
}

impl NetStats {
    /// Buffers dropped for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.dropped.get(reason.index()).copied().unwrap_or(0)
    }

    /// Buffers dropped for any reason.
    pub fn total_dropped(&self) -> u64 {
        self.dropped.iter().sum()
    }

    fn drop(&mut self, reason: DropReason) {
        if let Some(c) = self.dropped.get_mut(reason.index()) {
            *c = c.wrapping_add(1);
        }
    }
}

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

#[derive(Debug, Clone, Copy)]
enum PendingArp {
    /// Answer this request.
    Reply(ArpMessage),
    /// Ask for `target`, unicast to a known MAC (refresh) or broadcast.
    Request {
        target: [u8; 4],
        eth_dst: Option<[u8; 6]>,
    },
}

/// A FIFO of datagrams to our own address, in caller storage `B` (bytes): fixed slots
/// of a length prefix plus [`NetConfig::max_payload`] bytes. Full is an error for the
/// sender (`EAGAIN`), never a drop.
#[derive(Debug)]
pub struct Looped<B> {
    buf: B,
    /// Bytes per slot.
    slot: usize,
    head: usize,
    len: usize,
    /// Datagrams popped since the queue was lent out (added to the stats on return).
    popped: u64,
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> Looped<B> {
    fn new(buf: B, max_payload: usize) -> Self {
        Looped {
            buf,
            slot: LOOP_SLOT_HEADER + max_payload,
            head: 0,
            len: 0,
            popped: 0,
        }
    }

    /// How many datagrams the queue holds at most.
    pub fn capacity(&self) -> usize {
        self.buf.as_ref().len().checked_div(self.slot).unwrap_or(0)
    }

    /// Datagrams waiting.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn slot_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        let at = i.checked_mul(self.slot)?;
        self.buf.as_mut().get_mut(at..at.checked_add(self.slot)?)
    }

    /// Lets `write` fill the next free slot with up to `len_hint` bytes (the rules of
    /// [`Net::send`]); `EAGAIN` when full.
    fn push(&mut self, len_hint: usize, write: impl FnOnce(&mut [u8]) -> usize) -> Result<usize> {
        let cap = self.capacity();
        if self.len >= cap {
            return Err(Errno::EAGAIN);
        }
        let tail = (self.head + self.len) % cap;
        let slot = self.slot_mut(tail).ok_or(Errno::EAGAIN)?;
        let (head, body) = slot.split_at_mut(LOOP_SLOT_HEADER);
        let n = write(body.get_mut(..len_hint).ok_or(Errno::EMSGSIZE)?);
        if n == 0 || n > len_hint {
            return Err(Errno::EINVAL);
        }
        head.copy_from_slice(&u16::try_from(n).map_err(|_| Errno::EMSGSIZE)?.to_be_bytes());
        self.len += 1;
        Ok(n)
    }

    /// Hands the oldest datagram to `f` and frees its slot; `None` when empty.
    pub fn pop<R>(&mut self, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        if self.len == 0 {
            return None;
        }
        let (head, slot) = (self.head, self.slot);
        self.head = (head + 1) % self.capacity().max(1);
        self.len -= 1;
        self.popped += 1;
        let at = head.checked_mul(slot)?;
        let s = self.buf.as_ref().get(at..at.checked_add(slot)?)?;
        let n = usize::from(be16(s, 0)?);
        Some(f(s.get(LOOP_SLOT_HEADER..LOOP_SLOT_HEADER.checked_add(n)?)?))
    }
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
    cache: A,
    arp_tx: Deque<PendingArp, ARP_TX_QUEUE_LEN>,
    /// `None` only while lent out by [`Net::lend_looped`].
    lo: Option<Looped<B>>,
    stats: NetStats,
}

enum Hop {
    Mac([u8; 6]),
    Pending,
    Failed,
}

fn be16(buf: &[u8], at: usize) -> Option<u16> {
    let b = buf.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([*b.first()?, *b.get(1)?]))
}

fn mac_at(buf: &[u8], at: usize) -> Option<[u8; 6]> {
    buf.get(at..at.checked_add(6)?)?.try_into().ok()
}

fn is_group_mac(mac: [u8; 6]) -> bool {
    mac[0] & 1 != 0
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
    pub fn with_loopback(cfg: NetConfig, mut cache: A, lo: B) -> Result<Self> {
        if cfg.prefix_len > 32 || cfg.ttl == 0 || cfg.max_payload() == 0 {
            return Err(Errno::EINVAL);
        }
        for e in cache.as_mut().iter_mut() {
            *e = ArpEntry::EMPTY;
        }
        let net = Net {
            cfg,
            cache,
            arp_tx: Deque::new(),
            lo: Some(Looped::new(lo, cfg.max_payload())),
            stats: NetStats::default(),
        };
        if cfg.medium == Medium::Ethernet {
            let ok = cfg.local_mac != [0; 6]
                && !is_group_mac(cfg.local_mac)
                && net.usable_unicast(cfg.local_ip)
                && cfg.local_port != 0
                && cfg.arp_timeout > Duration::ZERO
                && cfg.arp_max_requests > 0
                && !net.cache.as_ref().is_empty()
                && cfg
                    .gateway
                    .is_none_or(|g| g != cfg.local_ip && net.on_subnet(g) && net.usable_unicast(g));
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
        self.cache.as_ref()
    }

    /// The MAC of `ip` if the cache holds an unexpired mapping.
    pub fn arp_lookup(&self, now: Instant, ip: [u8; 4]) -> Option<[u8; 6]> {
        let e = self.find(ip).and_then(|i| self.cache.as_ref().get(i))?;
        (e.state == ArpState::Resolved && !e.expired(now, self.cfg.arp_timeout)).then_some(e.mac)
    }

    /// Forget every ARP entry (e.g. after the link went down).
    pub fn arp_flush(&mut self) {
        for e in self.cache.as_mut().iter_mut() {
            *e = ArpEntry::EMPTY;
        }
    }

    /// ARP frames are queued for [`poll_tx`](Net::poll_tx).
    pub fn has_pending_tx(&self) -> bool {
        !self.arp_tx.is_empty()
    }

    /// How many datagrams to ourselves the loopback queue holds at most (0 on UDP links,
    /// where the kernel loops them back).
    pub fn loopback_capacity(&self) -> usize {
        match self.cfg.medium {
            Medium::Ethernet => self.lo.as_ref().map_or(0, Looped::capacity),
            Medium::Udp => 0,
        }
    }

    /// Datagrams to ourselves wait to be received: the progress loop has work now.
    pub fn has_looped(&self) -> bool {
        self.lo.as_ref().is_some_and(|q| !q.is_empty())
    }

    /// Lends out the non-empty loopback queue, so the caller can receive its datagrams
    /// (each from [`local_addr`](Net::local_addr)) while it mutates whatever else owns
    /// this `Net`; give it back with [`return_looped`](Net::return_looped). While it is
    /// lent, sends to ourselves get `EAGAIN`.
    pub fn lend_looped(&mut self) -> Option<Looped<B>> {
        if self.has_looped() {
            self.lo.take()
        } else {
            None
        }
    }

    /// Takes back the queue [`lend_looped`](Net::lend_looped) lent, counting what was
    /// received from it.
    pub fn return_looped(&mut self, mut q: Looped<B>) {
        self.stats.rx_looped += core::mem::take(&mut q.popped);
        self.lo = Some(q);
    }

    fn on_subnet(&self, ip: [u8; 4]) -> bool {
        let m = self.cfg.netmask();
        u32::from_be_bytes(ip) & m == u32::from_be_bytes(self.cfg.local_ip) & m
    }

    /// Whether `ip` can be a datagram's source or a unicast destination on this link.
    fn usable_unicast(&self, ip: [u8; 4]) -> bool {
        let a = Ipv4Address::from(ip);
        if a.is_unspecified() || a.is_broadcast() || a.is_multicast() {
            return false;
        }
        if self.cfg.medium == Medium::Udp {
            return true; // the kernel routes loopback and knows its broadcasts
        }
        let m = self.cfg.netmask();
        let directed_bcast = self.cfg.prefix_len <= 30
            && self.on_subnet(ip)
            && u32::from_be_bytes(ip) | m == u32::MAX;
        !a.is_loopback() && !directed_bcast
    }

    fn find(&self, ip: [u8; 4]) -> Option<usize> {
        self.cache
            .as_ref()
            .iter()
            .position(|e| e.state != ArpState::Free && e.ip == ip)
    }

    /// The slot to (re)use: free, else expired, else least recently used.
    fn victim(&mut self, now: Instant) -> Option<usize> {
        let timeout = self.cfg.arp_timeout;
        let (idx, class) = self
            .cache
            .as_ref()
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let class = match e.state {
                    ArpState::Free => 0u8,
                    ArpState::Failed => 1,
                    _ if e.expired(now, timeout) => 1,
                    _ => 2,
                };
                (i, (class, e.used))
            })
            .min_by_key(|&(_, k)| k)?;
        if class.0 == 2 {
            self.stats.arp_evictions += 1;
        }
        Some(idx)
    }

    /// Refresh the entry of `ip` if there is one; whether there was.
    fn arp_update(&mut self, now: Instant, ip: [u8; 4], mac: [u8; 6]) -> bool {
        let Some(e) = self.find(ip).and_then(|i| self.cache.as_mut().get_mut(i)) else {
            return false;
        };
        e.state = ArpState::Resolved;
        e.mac = mac;
        e.confirmed = now;
        true
    }

    fn arp_learn(&mut self, now: Instant, ip: [u8; 4], mac: [u8; 6]) {
        if let Some(e) = self
            .victim(now)
            .and_then(|i| self.cache.as_mut().get_mut(i))
        {
            *e = ArpEntry {
                state: ArpState::Resolved,
                ip,
                mac,
                confirmed: now,
                used: now,
                ..ArpEntry::EMPTY
            };
        }
    }

    fn queue_arp(&mut self, p: PendingArp) {
        if self.arp_tx.push_back(p).is_err() {
            self.stats.arp_tx_dropped += 1;
        }
    }

    /// Process one received buffer (a whole Ethernet frame, or a UDP payload with its
    /// source in `meta.src` on UDP links). Never panics, whatever the bytes.
    ///
    /// ARP requests for our IP are answered through a queue: call
    /// [`poll_tx`](Net::poll_tx) after a receive batch.
    pub fn rx<'b>(&mut self, now: Instant, meta: RxMeta, buf: &'b [u8]) -> RxOutcome<'b> {
        let r = match self.cfg.medium {
            Medium::Udp => self.rx_udp(meta, buf),
            Medium::Ethernet => self.rx_ethernet(now, buf),
        };
        match r {
            Ok(RxOutcome::Packet { .. }) => self.stats.rx_packets += 1,
            Ok(_) => self.stats.rx_arp += 1,
            Err(reason) => self.stats.drop(reason),
        }
        r.unwrap_or_else(RxOutcome::Dropped)
    }

    fn rx_udp<'b>(
        &self,
        meta: RxMeta,
        buf: &'b [u8],
    ) -> core::result::Result<RxOutcome<'b>, DropReason> {
        let src = meta.src.ok_or(DropReason::NoSource)?;
        if src.port == 0 || !self.usable_unicast(src.ip.octets()) {
            return Err(DropReason::BadSource);
        }
        if let Some(d) = meta.dst
            && self.cfg.local_port != 0
            && d.port != self.cfg.local_port
        {
            return Err(DropReason::WrongPort);
        }
        Ok(RxOutcome::Packet { src, payload: buf })
    }

    fn rx_ethernet<'b>(
        &mut self,
        now: Instant,
        buf: &'b [u8],
    ) -> core::result::Result<RxOutcome<'b>, DropReason> {
        let (Some(dst_mac), Some(ethertype)) = (mac_at(buf, 0), be16(buf, 12)) else {
            return Err(DropReason::Truncated);
        };
        match ethertype {
            ETHERTYPE_ARP => {
                if dst_mac != self.cfg.local_mac && dst_mac != BROADCAST_MAC {
                    return Err(DropReason::NotForUs);
                }
                let msg = match frame::parse_frame(buf, &self.cfg.checksum_caps()) {
                    Ok(ParsedFrame::Arp(m)) => m,
                    Ok(ParsedFrame::Udp(_)) => return Err(DropReason::OtherProtocol),
                    Err(e) => return Err(DropReason::from_wire(e)),
                };
                self.rx_arp(now, &msg).map(|()| RxOutcome::Consumed)
            }
            ETHERTYPE_IPV4 => {
                if dst_mac != self.cfg.local_mac {
                    return Err(DropReason::NotForUs);
                }
                let f = match frame::parse_eth_ipv4_udp(buf, &self.cfg.checksum_caps()) {
                    Ok(f) => f,
                    Err(wire::Error::NotOurs) => return Err(classify_ipv4(buf)),
                    Err(e) => return Err(DropReason::from_wire(e)),
                };
                let r = f.repr;
                if r.dst.ip.octets() != self.cfg.local_ip {
                    return Err(DropReason::NotForUs);
                }
                if r.dst.port != self.cfg.local_port {
                    return Err(DropReason::WrongPort);
                }
                if r.src.port == 0
                    || is_group_mac(r.src_mac.0)
                    || !self.usable_unicast(r.src.ip.octets())
                {
                    return Err(DropReason::BadSource);
                }
                let payload = buf.get(f.payload).ok_or(DropReason::Truncated)?;
                Ok(RxOutcome::Packet {
                    src: r.src,
                    payload,
                })
            }
            _ => Err(DropReason::OtherProtocol),
        }
    }

    fn rx_arp(&mut self, now: Instant, msg: &ArpMessage) -> core::result::Result<(), DropReason> {
        let sender_mac = msg.sender_mac.0;
        let sender_ip = msg.sender_ip.octets();
        let local_ip = self.cfg.local_ip;
        if sender_mac == [0; 6] || is_group_mac(sender_mac) {
            return Err(DropReason::BadSource);
        }
        if sender_ip == local_ip {
            return Err(if sender_mac == self.cfg.local_mac {
                DropReason::ArpNotForUs // our own request, looped back
            } else {
                DropReason::ArpConflict
            });
        }
        let learnable = self.on_subnet(sender_ip) && self.usable_unicast(sender_ip);
        let known = learnable && self.arp_update(now, sender_ip, sender_mac);
        let for_us = msg.target_ip.octets() == local_ip;
        match msg.operation {
            ArpOperation::Request if for_us => {
                if learnable && !known {
                    self.arp_learn(now, sender_ip, sender_mac);
                }
                self.queue_arp(PendingArp::Reply(*msg));
                Ok(())
            }
            _ if known => Ok(()),
            ArpOperation::Reply if for_us => Err(DropReason::ArpUnsolicited),
            _ => Err(DropReason::ArpNotForUs),
        }
    }

    /// Send queued ARP frames while the link has transmit slots; returns how many went.
    pub fn poll_tx<L: Link>(&mut self, now: Instant, link: &mut L) -> usize {
        let _ = now; // ARP frames carry no timestamps; kept for a uniform progress API
        let mut sent = 0;
        while let Some(&p) = self.arp_tx.front() {
            let Some(tok) = link.transmit() else { break };
            self.arp_tx.pop_front();
            let (mac, ip) = (
                EthernetAddress(self.cfg.local_mac),
                Ipv4Address::from(self.cfg.local_ip),
            );
            let ok = tok.consume_with(ARP_FRAME_LEN, |buf| {
                let r = match p {
                    PendingArp::Reply(req) => frame::emit_arp_reply(buf, mac, ip, &req),
                    PendingArp::Request { target, eth_dst } => {
                        let r = frame::emit_arp_request(buf, mac, ip, Ipv4Address::from(target));
                        // A refresh goes unicast to the MAC we already know.
                        if let (Ok(_), Some(d), Some(h)) = (&r, eth_dst, buf.get_mut(..6)) {
                            h.copy_from_slice(&d);
                        }
                        r
                    }
                };
                match r {
                    Ok(n) => (TxMeta::len(n), true),
                    Err(_) => (TxMeta::none(), false),
                }
            });
            if !ok {
                self.stats.arp_tx_dropped += 1;
                continue;
            }
            sent += 1;
            match p {
                PendingArp::Reply(_) => self.stats.arp_replies_sent += 1,
                PendingArp::Request { .. } => self.stats.arp_requests_sent += 1,
            }
        }
        sent
    }

    /// The next hop for `dst`: itself on the local subnet, else the gateway.
    fn next_hop(&self, dst: [u8; 4]) -> Result<[u8; 4]> {
        if self.on_subnet(dst) {
            Ok(dst)
        } else {
            self.cfg.gateway.ok_or(Errno::EHOSTUNREACH)
        }
    }

    /// Find the MAC of next hop `hop`, sending or queueing ARP requests as needed.
    ///
    /// A pending hop whose `arp_max_requests`-th request is one interval old has failed;
    /// it stays failed (no requests, [`Hop::Failed`] at once) for `arp_max_requests`
    /// intervals, as long as its resolution took, and the next send after that starts
    /// a new resolution.
    fn resolve<L: Link>(&mut self, now: Instant, link: &mut L, hop: [u8; 4]) -> Result<Hop> {
        if hop == self.cfg.local_ip {
            return Ok(Hop::Mac(self.cfg.local_mac));
        }
        let (timeout, interval) = (self.cfg.arp_timeout, self.cfg.arp_request_interval);
        let max_asked = self.cfg.arp_max_requests;
        let hold = Duration::from_micros(interval.total_micros() * u64::from(max_asked));
        let idx = match self.find(hop) {
            Some(i) => i,
            None => {
                let i = self.victim(now).ok_or(Errno::EHOSTUNREACH)?;
                if let Some(e) = self.cache.as_mut().get_mut(i) {
                    *e = ArpEntry {
                        state: ArpState::Pending,
                        ip: hop,
                        used: now,
                        ..ArpEntry::EMPTY
                    };
                }
                i
            }
        };
        let room = self.arp_tx.len() < ARP_TX_QUEUE_LEN;
        let Some(e) = self.cache.as_mut().get_mut(idx) else {
            return Err(Errno::EHOSTUNREACH);
        };
        e.used = now;
        let may_ask = e.requested.is_none_or(|t| now - t >= interval);
        if e.state == ArpState::Pending && e.asked >= max_asked && may_ask {
            // The send that finds the failure fails, whatever the hold (even none).
            e.state = ArpState::Failed;
            self.stats.arp_failures += 1;
            self.stats.tx_arp_failed += 1;
            return Ok(Hop::Failed);
        }
        if e.state == ArpState::Failed {
            // `requested` is the last request: the failure came one interval later.
            let failed_for = e.requested.map_or(hold, |t| (now - t) - interval);
            if failed_for < hold {
                self.stats.tx_arp_failed += 1;
                return Ok(Hop::Failed);
            }
            e.state = ArpState::Pending; // ask again
            e.asked = 0;
        }
        if e.state == ArpState::Resolved {
            let age = now - e.confirmed;
            if age < timeout {
                let mac = e.mac;
                let half = Duration::from_micros(timeout.total_micros() / 2);
                if age >= half && may_ask && room {
                    e.requested = Some(now);
                    // Cannot fail: `room` was checked.
                    let _ = self.arp_tx.push_back(PendingArp::Request {
                        target: hop,
                        eth_dst: Some(mac),
                    });
                }
                return Ok(Hop::Mac(mac));
            }
            e.state = ArpState::Pending; // expired: resolve afresh
            e.asked = 0;
        }
        if may_ask {
            let tok = link.transmit().ok_or(Errno::EAGAIN)?;
            let (mac, ip) = (
                EthernetAddress(self.cfg.local_mac),
                Ipv4Address::from(self.cfg.local_ip),
            );
            let ok = tok.consume_with(ARP_FRAME_LEN, |buf| {
                match frame::emit_arp_request(buf, mac, ip, Ipv4Address::from(hop)) {
                    Ok(n) => (TxMeta::len(n), true),
                    Err(_) => (TxMeta::none(), false),
                }
            });
            if ok {
                e.requested = Some(now);
                e.asked = e.asked.saturating_add(1);
                self.stats.arp_requests_sent += 1;
            } else {
                self.stats.arp_tx_dropped += 1;
            }
        }
        self.stats.tx_arp_pending += 1;
        Ok(Hop::Pending)
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
            Medium::Udp => {
                let tok = link.transmit().ok_or(Errno::EAGAIN)?;
                tok.consume_with(len_hint, |buf| {
                    let Some(buf) = buf.get_mut(..len_hint) else {
                        return (TxMeta::none(), Err(Errno::EMSGSIZE));
                    };
                    let n = write(buf);
                    if n == 0 || n > len_hint {
                        return (TxMeta::none(), Err(Errno::EINVAL));
                    }
                    (TxMeta::to(n, dst), Ok(n))
                })
            }
            Medium::Ethernet => {
                if a.is_loopback() {
                    return Err(Errno::EHOSTUNREACH);
                }
                if dst == self.cfg.local_addr() {
                    return self.send_looped(len_hint, write);
                }
                if !self.usable_unicast(dst_ip) {
                    return Err(Errno::EINVAL); // our subnet's broadcast address
                }
                let hop = self.next_hop(dst_ip)?;
                let dst_mac = match self.resolve(now, link, hop)? {
                    Hop::Mac(m) => m,
                    Hop::Pending => return Ok(SendOutcome::ArpPending),
                    Hop::Failed => return Ok(SendOutcome::ArpFailed),
                };
                let repr = UdpFrameRepr {
                    src_mac: EthernetAddress(self.cfg.local_mac),
                    dst_mac: EthernetAddress(dst_mac),
                    src: self.cfg.local_addr(),
                    dst,
                    ttl: self.cfg.ttl,
                };
                let caps = self.cfg.checksum_caps();
                let total = ETH_IPV4_UDP_HEADER_LEN + len_hint;
                let tok = link.transmit().ok_or(Errno::EAGAIN)?;
                tok.consume_with(total, |buf| {
                    let Some(frame) = buf.get_mut(..total) else {
                        return (TxMeta::none(), Err(Errno::EMSGSIZE));
                    };
                    let n = match frame.get_mut(ETH_IPV4_UDP_HEADER_LEN..) {
                        Some(p) => write(p),
                        None => 0,
                    };
                    if n == 0 || n > len_hint {
                        return (TxMeta::none(), Err(Errno::EINVAL));
                    }
                    // The payload is already in place: emit only headers and checksums.
                    match repr.emit(frame, n, &caps, |_| {}) {
                        Ok(len) => (TxMeta::len(len), Ok(n)),
                        Err(_) => (TxMeta::none(), Err(Errno::EMSGSIZE)),
                    }
                })
            }
        };
        let len = result?;
        self.stats.tx_packets += 1;
        Ok(SendOutcome::Sent { len })
    }

    /// A datagram to our own address on a raw link: the link would not bring it back,
    /// so it waits in the loopback queue for the next receive.
    fn send_looped(
        &mut self,
        len_hint: usize,
        write: impl FnOnce(&mut [u8]) -> usize,
    ) -> Result<SendOutcome> {
        let Some(q) = self.lo.as_mut() else {
            return Err(Errno::EAGAIN); // lent out to the receiver: retry after it
        };
        if q.capacity() == 0 {
            self.stats.tx_loop_refused += 1;
            return Err(Errno::EHOSTUNREACH);
        }
        match q.push(len_hint, write) {
            Ok(len) => {
                self.stats.tx_looped += 1;
                Ok(SendOutcome::Sent { len })
            }
            Err(Errno::EAGAIN) => {
                self.stats.tx_loop_full += 1;
                Err(Errno::EAGAIN)
            }
            Err(e) => Err(e),
        }
    }
}

/// Why `wire` called an IPv4 frame "not ours": a fragment, or another version/protocol.
fn classify_ipv4(buf: &[u8]) -> DropReason {
    let version_ok = buf.get(ETH_HEADER_LEN).is_some_and(|b| b >> 4 == 4);
    match be16(buf, ETH_HEADER_LEN + 6) {
        Some(frag) if version_ok && frag & 0x3fff != 0 => DropReason::Fragment,
        _ => DropReason::OtherProtocol,
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use std::boxed::Box;
    use std::vec;
    use std::vec::Vec;

    use proptest::prelude::*;
    use wire::link::{Loopback, RxToken};

    use super::*;

    type Eth = Loopback<8, 1514>;
    type Cache = [ArpEntry; 4];

    const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
    const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];
    const MAC_C: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0c];
    const IP_A: [u8; 4] = [10, 0, 0, 1];
    const IP_B: [u8; 4] = [10, 0, 0, 2];
    const IP_C: [u8; 4] = [10, 0, 0, 3];
    const PORT: u16 = 7000;

    fn addr(ip: [u8; 4], port: u16) -> UdpAddr {
        UdpAddr::new(Ipv4Address::from(ip), port)
    }

    fn t(ms: u64) -> Instant {
        Instant::from_millis(ms)
    }

    fn eth_cfg(ip: [u8; 4], mac: [u8; 6]) -> NetConfig {
        NetConfig::new(&Capabilities::new(Medium::Ethernet, 1514), ip, PORT)
            .with_ethernet(mac, 24, None)
    }

    fn eth_net(ip: [u8; 4], mac: [u8; 6]) -> Net<Cache> {
        Net::new(eth_cfg(ip, mac), [ArpEntry::EMPTY; 4]).unwrap()
    }

    fn link() -> Box<Eth> {
        Box::new(Eth::new(Medium::Ethernet, None))
    }

    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Got {
        Packet(UdpAddr, Vec<u8>),
        Consumed,
        Dropped(DropReason),
    }

    fn own(o: RxOutcome<'_>) -> Got {
        match o {
            RxOutcome::Packet { src, payload } => Got::Packet(src, payload.to_vec()),
            RxOutcome::Consumed => Got::Consumed,
            RxOutcome::Dropped(r) => Got::Dropped(r),
        }
    }

    fn feed<A: AsRef<[ArpEntry]> + AsMut<[ArpEntry]>>(
        net: &mut Net<A>,
        now: Instant,
        bytes: &[u8],
    ) -> Got {
        own(net.rx(now, RxMeta::default(), bytes))
    }

    /// Receive everything waiting on `link` through `net`.
    fn pump<A: AsRef<[ArpEntry]> + AsMut<[ArpEntry]>, const N: usize, const M: usize>(
        net: &mut Net<A>,
        link: &mut Loopback<N, M>,
        now: Instant,
    ) -> Vec<Got> {
        let mut out = Vec::new();
        while let Some(tok) = link.receive() {
            let meta = tok.meta();
            out.push(tok.consume(|buf| own(net.rx(now, meta, buf))));
        }
        out
    }

    fn send<A: AsRef<[ArpEntry]> + AsMut<[ArpEntry]>, B: AsRef<[u8]> + AsMut<[u8]>, L: Link>(
        net: &mut Net<A, B>,
        now: Instant,
        link: &mut L,
        dst: UdpAddr,
        data: &[u8],
    ) -> Result<SendOutcome> {
        net.send(now, link, dst, data.len(), |b| {
            b[..data.len()].copy_from_slice(data);
            data.len()
        })
    }

    fn pop<const N: usize, const M: usize>(
        link: &mut Loopback<N, M>,
    ) -> Option<(Option<UdpAddr>, Vec<u8>)> {
        link.pop_tx(|a, d| (a, d.to_vec()))
    }

    fn udp_frame(
        src_mac: [u8; 6],
        dst_mac: [u8; 6],
        src: UdpAddr,
        dst: UdpAddr,
        payload: &[u8],
    ) -> Vec<u8> {
        let mut buf = vec![0u8; ETH_IPV4_UDP_HEADER_LEN + payload.len()];
        let repr = UdpFrameRepr {
            src_mac: EthernetAddress(src_mac),
            dst_mac: EthernetAddress(dst_mac),
            src,
            dst,
            ttl: 64,
        };
        let caps = Capabilities::new(Medium::Ethernet, 1514).checksum_caps();
        let n = frame::emit_udp_ipv4_ethernet(&mut buf, &repr, payload, &caps).unwrap();
        assert_eq!(n, buf.len());
        buf
    }

    fn arp_request(sender_mac: [u8; 6], sender_ip: [u8; 4], target_ip: [u8; 4]) -> Vec<u8> {
        let mut buf = vec![0u8; ARP_FRAME_LEN];
        frame::emit_arp_request(
            &mut buf,
            EthernetAddress(sender_mac),
            Ipv4Address::from(sender_ip),
            Ipv4Address::from(target_ip),
        )
        .unwrap();
        buf
    }

    /// An ARP reply from `sender` to `to` (unicast to `to_mac`).
    fn arp_reply(
        sender_mac: [u8; 6],
        sender_ip: [u8; 4],
        to_mac: [u8; 6],
        to_ip: [u8; 4],
    ) -> Vec<u8> {
        let mut buf = vec![0u8; ARP_FRAME_LEN];
        let req = ArpMessage {
            operation: ArpOperation::Request,
            sender_mac: EthernetAddress(to_mac),
            sender_ip: Ipv4Address::from(to_ip),
            target_mac: EthernetAddress([0; 6]),
            target_ip: Ipv4Address::from(sender_ip),
        };
        frame::emit_arp_reply(
            &mut buf,
            EthernetAddress(sender_mac),
            Ipv4Address::from(sender_ip),
            &req,
        )
        .unwrap();
        buf
    }

    /// Bring A and B (on links `la`, `lb`) to a state where A knows B's MAC.
    fn resolve_a_to_b(
        a: &mut Net<Cache>,
        la: &mut Eth,
        b: &mut Net<Cache>,
        lb: &mut Eth,
        now: Instant,
    ) {
        assert_eq!(
            send(a, now, la, addr(IP_B, PORT), b"x"),
            Ok(SendOutcome::ArpPending)
        );
        la.transfer_to(lb);
        assert_eq!(pump(b, lb, now), vec![Got::Consumed]);
        assert_eq!(b.poll_tx(now, lb), 1);
        lb.transfer_to(la);
        assert_eq!(pump(a, la, now), vec![Got::Consumed]);
    }

    #[test]
    fn arp_resolution_then_udp_exchange_over_ethernet() {
        let (mut a, mut b) = (eth_net(IP_A, MAC_A), eth_net(IP_B, MAC_B));
        let (mut la, mut lb) = (link(), link());
        let now = t(1);

        // Unknown next hop: a broadcast ARP request goes out, the packet stays with us.
        let mut called = false;
        let r = a.send(now, &mut *la, addr(IP_B, PORT), 4, |_| {
            called = true;
            4
        });
        assert_eq!(r, Ok(SendOutcome::ArpPending));
        assert!(!called, "the writer runs only when the packet is sent");
        let (_, req) = pop(&mut la).unwrap();
        assert_eq!(req, arp_request(MAC_A, IP_A, IP_B));
        assert_eq!(&req[..6], &[0xff; 6]);
        // Our own request looped back is ignored (not a conflict).
        assert!(la.inject(&req, None));
        assert_eq!(
            pump(&mut a, &mut la, now),
            vec![Got::Dropped(DropReason::ArpNotForUs)]
        );
        assert!(lb.inject(&req, None));

        // B answers through its queue and learns A from the request.
        assert_eq!(pump(&mut b, &mut lb, now), vec![Got::Consumed]);
        assert!(b.has_pending_tx());
        assert_eq!(b.arp_lookup(now, IP_A), Some(MAC_A));
        assert_eq!(lb.tx_len(), 0);
        assert_eq!(b.poll_tx(now, &mut *lb), 1);
        assert!(!b.has_pending_tx());
        assert_eq!(b.stats().arp_replies_sent, 1);
        lb.transfer_to(&mut *la);
        assert_eq!(pump(&mut a, &mut la, now), vec![Got::Consumed]);
        assert_eq!(a.arp_lookup(now, IP_B), Some(MAC_B));

        // Now the datagram goes out and arrives with A's address.
        assert_eq!(
            send(&mut a, now, &mut *la, addr(IP_B, PORT), b"hello"),
            Ok(SendOutcome::Sent { len: 5 })
        );
        let (meta_dst, frame_bytes) = pop(&mut la).unwrap();
        assert_eq!(meta_dst, None);
        assert_eq!(
            frame_bytes,
            udp_frame(MAC_A, MAC_B, addr(IP_A, PORT), addr(IP_B, PORT), b"hello")
        );
        lb.inject(&frame_bytes, None);
        assert_eq!(
            pump(&mut b, &mut lb, now),
            vec![Got::Packet(addr(IP_A, PORT), b"hello".to_vec())]
        );

        // B learned A from the request: it answers without ARP.
        assert_eq!(
            send(&mut b, now, &mut *lb, addr(IP_A, PORT), b"world"),
            Ok(SendOutcome::Sent { len: 5 })
        );
        lb.transfer_to(&mut *la);
        assert_eq!(
            pump(&mut a, &mut la, now),
            vec![Got::Packet(addr(IP_B, PORT), b"world".to_vec())]
        );

        assert_eq!(a.stats().arp_requests_sent, 1);
        assert_eq!(a.stats().tx_arp_pending, 1);
        assert_eq!(a.stats().tx_packets, 1);
        assert_eq!(a.stats().rx_packets, 1);
        assert_eq!(a.stats().rx_arp, 1);
        assert_eq!(a.stats().dropped(DropReason::ArpNotForUs), 1);
        assert_eq!(b.stats().arp_requests_sent, 0);
        assert_eq!(b.stats().rx_packets, 1);
    }

    #[test]
    fn arp_requests_are_rate_limited_per_destination() {
        let mut a = eth_net(IP_A, MAC_A);
        let mut la = link();
        let b = addr(IP_B, PORT);
        assert_eq!(
            send(&mut a, t(0), &mut *la, b, b"x"),
            Ok(SendOutcome::ArpPending)
        );
        assert_eq!(
            send(&mut a, t(50), &mut *la, b, b"x"),
            Ok(SendOutcome::ArpPending)
        );
        assert_eq!(la.tx_len(), 1, "second request within 100 ms is suppressed");
        // Another destination has its own limit.
        assert_eq!(
            send(&mut a, t(60), &mut *la, addr(IP_C, PORT), b"x"),
            Ok(SendOutcome::ArpPending)
        );
        assert_eq!(la.tx_len(), 2);
        assert_eq!(
            send(&mut a, t(99), &mut *la, b, b"x"),
            Ok(SendOutcome::ArpPending)
        );
        assert_eq!(la.tx_len(), 2);
        assert_eq!(
            send(&mut a, t(100), &mut *la, b, b"x"),
            Ok(SendOutcome::ArpPending)
        );
        assert_eq!(la.tx_len(), 3);
        assert_eq!(a.stats().arp_requests_sent, 3);
        assert_eq!(a.stats().tx_arp_pending, 5);

        // A configurable interval.
        let mut cfg = eth_cfg(IP_A, MAC_A);
        cfg.arp_request_interval = Duration::from_millis(10);
        let mut a = Net::new(cfg, [ArpEntry::EMPTY; 2]).unwrap();
        let mut la = link();
        send(&mut a, t(0), &mut *la, b, b"x").unwrap();
        send(&mut a, t(9), &mut *la, b, b"x").unwrap();
        send(&mut a, t(10), &mut *la, b, b"x").unwrap();
        assert_eq!(la.tx_len(), 2);
    }

    #[test]
    fn a_next_hop_that_never_answers_fails_for_a_while_then_is_asked_again() {
        let mut a = eth_net(IP_A, MAC_A);
        let mut la = link();
        let b = addr(IP_B, PORT);
        // Three requests, 100 ms apart, are the resolution's whole budget.
        for ms in [0, 100, 200, 250] {
            assert_eq!(
                send(&mut a, t(ms), &mut *la, b, b"x"),
                Ok(SendOutcome::ArpPending),
                "at {ms} ms"
            );
        }
        assert_eq!(a.stats().arp_requests_sent, 3);
        // One interval after the third request the hop has failed: nothing is sent,
        // and the writer is never called.
        let mut wrote = false;
        assert_eq!(
            a.send(t(300), &mut *la, b, 1, |_| {
                wrote = true;
                1
            }),
            Ok(SendOutcome::ArpFailed)
        );
        assert!(!wrote);
        assert!(
            a.arp_entries()
                .iter()
                .any(|e| e.ip() == Some(IP_B) && e.has_failed())
        );
        // It stays failed, without requests, for as long as the resolution took...
        assert_eq!(
            send(&mut a, t(599), &mut *la, b, b"x"),
            Ok(SendOutcome::ArpFailed)
        );
        assert_eq!(la.tx_len(), 3);
        // ...while another destination resolves as usual.
        assert_eq!(
            send(&mut a, t(400), &mut *la, addr(IP_C, PORT), b"x"),
            Ok(SendOutcome::ArpPending)
        );
        assert_eq!(la.tx_len(), 4);
        // Then the next send asks again, with a fresh budget.
        assert_eq!(
            send(&mut a, t(600), &mut *la, b, b"x"),
            Ok(SendOutcome::ArpPending)
        );
        assert_eq!(la.tx_len(), 5);
        assert_eq!(a.stats().arp_failures, 1);
        assert_eq!(a.stats().tx_arp_failed, 2);
        // A reply resolves it, failed or pending.
        assert_eq!(
            feed(&mut a, t(610), &arp_reply(MAC_B, IP_B, MAC_A, IP_A)),
            Got::Consumed
        );
        assert_eq!(
            send(&mut a, t(620), &mut *la, b, b"x"),
            Ok(SendOutcome::Sent { len: 1 })
        );

        // A reply to a hop that had failed resolves it at once, too.
        let mut a = eth_net(IP_A, MAC_A);
        let mut cfg = eth_cfg(IP_A, MAC_A);
        cfg.arp_max_requests = 1;
        let mut one = Net::new(cfg, [ArpEntry::EMPTY; 4]).unwrap();
        for net in [&mut a, &mut one] {
            let mut l = link();
            let mut ms = 0;
            while send(net, t(ms), &mut *l, b, b"x") == Ok(SendOutcome::ArpPending) {
                ms += 50;
                assert!(ms <= 1_000, "never failed");
            }
            assert_eq!(
                send(net, t(ms), &mut *l, b, b"x"),
                Ok(SendOutcome::ArpFailed)
            );
            assert_eq!(
                feed(net, t(ms), &arp_reply(MAC_B, IP_B, MAC_A, IP_A)),
                Got::Consumed
            );
            assert_eq!(
                send(net, t(ms), &mut *l, b, b"x"),
                Ok(SendOutcome::Sent { len: 1 })
            );
        }
        assert_eq!(a.stats().arp_requests_sent, 3);
        assert_eq!(one.stats().arp_requests_sent, 1);

        // Without an interval (no rate limit, no hold) the send that finds the failure
        // still fails, and the next one asks again.
        let mut cfg = eth_cfg(IP_A, MAC_A);
        cfg.arp_request_interval = Duration::ZERO;
        let mut z = Net::new(cfg, [ArpEntry::EMPTY; 4]).unwrap();
        let mut l = link();
        for _ in 0..3 {
            assert_eq!(
                send(&mut z, t(0), &mut *l, b, b"x"),
                Ok(SendOutcome::ArpPending)
            );
        }
        assert_eq!(
            send(&mut z, t(0), &mut *l, b, b"x"),
            Ok(SendOutcome::ArpFailed)
        );
        assert_eq!(
            send(&mut z, t(0), &mut *l, b, b"x"),
            Ok(SendOutcome::ArpPending)
        );
        assert_eq!(z.stats().arp_requests_sent, 4);
    }

    #[test]
    fn arp_entries_expire_and_active_ones_are_refreshed() {
        let (mut a, mut b) = (eth_net(IP_A, MAC_A), eth_net(IP_B, MAC_B));
        let (mut la, mut lb) = (link(), link());
        resolve_a_to_b(&mut a, &mut la, &mut b, &mut lb, t(0));
        let dst = addr(IP_B, PORT);

        // Before half the timeout: plain sends, no ARP.
        assert_eq!(
            send(&mut a, t(29_999), &mut *la, dst, b"x"),
            Ok(SendOutcome::Sent { len: 1 })
        );
        assert!(!a.has_pending_tx());
        // From half the timeout: still sent, and a unicast refresh request is queued once.
        assert_eq!(
            send(&mut a, t(30_000), &mut *la, dst, b"x"),
            Ok(SendOutcome::Sent { len: 1 })
        );
        assert_eq!(
            send(&mut a, t(30_001), &mut *la, dst, b"x"),
            Ok(SendOutcome::Sent { len: 1 })
        );
        assert!(a.has_pending_tx());
        while pop(&mut la).is_some() {}
        assert_eq!(a.poll_tx(t(30_001), &mut *la), 1);
        let (_, refresh) = pop(&mut la).unwrap();
        let mut expect = arp_request(MAC_A, IP_A, IP_B);
        expect[..6].copy_from_slice(&MAC_B);
        assert_eq!(refresh, expect);
        // B answers (unicast request for its IP), which re-confirms the entry.
        lb.inject(&refresh, None);
        assert_eq!(pump(&mut b, &mut lb, t(30_002)), vec![Got::Consumed]);
        b.poll_tx(t(30_002), &mut *lb);
        lb.transfer_to(&mut *la);
        assert_eq!(pump(&mut a, &mut la, t(30_003)), vec![Got::Consumed]);
        assert_eq!(a.arp_lookup(t(89_999), IP_B), Some(MAC_B));
        assert_eq!(
            a.arp_lookup(t(90_003), IP_B),
            None,
            "expired 60 s after confirmation"
        );

        // An expired entry is resolved afresh: the packet waits for ARP again.
        assert_eq!(
            send(&mut a, t(90_003), &mut *la, dst, b"x"),
            Ok(SendOutcome::ArpPending)
        );
        let (_, req) = pop(&mut la).unwrap();
        assert_eq!(req, arp_request(MAC_A, IP_A, IP_B));

        // A configurable timeout.
        let mut cfg = eth_cfg(IP_A, MAC_A);
        cfg.arp_timeout = Duration::from_secs(1);
        let mut a = Net::new(cfg, [ArpEntry::EMPTY; 2]).unwrap();
        assert_eq!(
            feed(&mut a, t(0), &arp_request(MAC_B, IP_B, IP_A)),
            Got::Consumed
        );
        assert_eq!(a.arp_lookup(t(999), IP_B), Some(MAC_B));
        assert_eq!(a.arp_lookup(t(1000), IP_B), None);
    }

    #[test]
    fn full_cache_replaces_free_then_expired_then_least_recently_used() {
        let mut a = Net::new(eth_cfg(IP_A, MAC_A), [ArpEntry::EMPTY; 2]).unwrap();
        let ip = |n: u8| [10, 0, 0, n];
        let mac = |n: u8| [0x02, 0, 0, 0, 1, n];
        // Learn .10 then .11 from their requests.
        assert_eq!(
            feed(&mut a, t(0), &arp_request(mac(10), ip(10), IP_A)),
            Got::Consumed
        );
        assert_eq!(
            feed(&mut a, t(1), &arp_request(mac(11), ip(11), IP_A)),
            Got::Consumed
        );
        // Use .10, so .11 is the least recently used.
        let mut la = link();
        assert_eq!(
            send(&mut a, t(2), &mut *la, addr(ip(10), 1), b"x"),
            Ok(SendOutcome::Sent { len: 1 })
        );
        assert_eq!(
            feed(&mut a, t(3), &arp_request(mac(12), ip(12), IP_A)),
            Got::Consumed
        );
        assert_eq!(a.arp_lookup(t(3), ip(10)), Some(mac(10)));
        assert_eq!(a.arp_lookup(t(3), ip(11)), None);
        assert_eq!(a.arp_lookup(t(3), ip(12)), Some(mac(12)));
        assert_eq!(a.stats().arp_evictions, 1);

        // An expired entry goes before a live one, even a less recently used one: .10
        // is used last but expires at 60 s; .12 is used least but re-confirmed.
        assert_eq!(
            send(&mut a, t(50_000), &mut *la, addr(ip(10), 1), b"x"),
            Ok(SendOutcome::Sent { len: 1 })
        );
        assert_eq!(
            feed(&mut a, t(59_000), &arp_reply(mac(12), ip(12), MAC_A, IP_A)),
            Got::Consumed
        );
        assert_eq!(
            feed(&mut a, t(60_002), &arp_request(mac(13), ip(13), IP_A)),
            Got::Consumed
        );
        assert_eq!(a.arp_lookup(t(60_002), ip(12)), Some(mac(12)));
        assert_eq!(a.arp_lookup(t(60_002), ip(13)), Some(mac(13)));
        assert!(a.arp_entries().iter().all(|e| e.ip() != Some(ip(10))));
        assert_eq!(a.arp_entries().iter().filter_map(ArpEntry::ip).count(), 2);
        assert_eq!(a.stats().arp_evictions, 1);

        // Flushing frees everything.
        a.arp_flush();
        assert!(a.arp_entries().iter().all(|e| e.ip().is_none()));
    }

    #[test]
    fn arp_policy_unsolicited_gratuitous_and_conflicts() {
        let mut a = eth_net(IP_A, MAC_A);
        let mut la = link();
        // An unsolicited reply about an IP we never asked about creates nothing.
        assert_eq!(
            feed(&mut a, t(0), &arp_reply(MAC_C, IP_C, MAC_A, IP_A)),
            Got::Dropped(DropReason::ArpUnsolicited)
        );
        assert_eq!(a.arp_lookup(t(0), IP_C), None);
        // A request for another host: not answered, sender not learned.
        assert_eq!(
            feed(&mut a, t(0), &arp_request(MAC_C, IP_C, IP_B)),
            Got::Dropped(DropReason::ArpNotForUs)
        );
        assert_eq!(a.arp_lookup(t(0), IP_C), None);
        assert!(!a.has_pending_tx());
        // A gratuitous announcement for an unknown IP is ignored too.
        assert_eq!(
            feed(&mut a, t(0), &arp_request(MAC_C, IP_C, IP_C)),
            Got::Dropped(DropReason::ArpNotForUs)
        );

        // After we asked about C, its reply resolves the entry.
        assert_eq!(
            send(&mut a, t(0), &mut *la, addr(IP_C, PORT), b"x"),
            Ok(SendOutcome::ArpPending)
        );
        assert!(
            a.arp_entries()
                .iter()
                .any(|e| e.ip() == Some(IP_C) && e.is_pending())
        );
        assert_eq!(
            feed(&mut a, t(1), &arp_reply(MAC_C, IP_C, MAC_A, IP_A)),
            Got::Consumed
        );
        assert_eq!(a.arp_lookup(t(1), IP_C), Some(MAC_C));
        // A gratuitous announcement (request or broadcast reply) moves a known IP.
        let new_mac = [0x02, 0, 0, 0, 0, 0xcc];
        assert_eq!(
            feed(&mut a, t(2), &arp_request(new_mac, IP_C, IP_C)),
            Got::Consumed
        );
        assert_eq!(a.arp_lookup(t(2), IP_C), Some(new_mac));
        assert_eq!(
            feed(&mut a, t(3), &arp_reply(MAC_C, IP_C, [0xff; 6], IP_C)),
            Got::Consumed
        );
        assert_eq!(a.arp_lookup(t(3), IP_C), Some(MAC_C));

        // Someone else claiming our IP is a conflict and changes nothing.
        assert_eq!(
            feed(&mut a, t(4), &arp_request(MAC_C, IP_A, IP_B)),
            Got::Dropped(DropReason::ArpConflict)
        );
        // Group sender MACs are refused.
        assert_eq!(
            feed(
                &mut a,
                t(4),
                &arp_request([0x01, 0, 0x5e, 0, 0, 1], IP_B, IP_A)
            ),
            Got::Dropped(DropReason::BadSource)
        );
        // ARP unicast to another MAC is not for us.
        let mut to_other = arp_reply(MAC_C, IP_C, MAC_B, IP_A);
        assert_eq!(
            feed(&mut a, t(4), &to_other),
            Got::Dropped(DropReason::NotForUs)
        );
        // Off-subnet senders are answered but not learned.
        to_other = arp_request([0x02, 9, 9, 9, 9, 9], [192, 168, 1, 1], IP_A);
        assert_eq!(feed(&mut a, t(4), &to_other), Got::Consumed);
        assert_eq!(a.arp_lookup(t(4), [192, 168, 1, 1]), None);
        // RFC 5227 probe for our address (sender 0.0.0.0): defended, nothing learned.
        let probe = arp_request(MAC_C, [0, 0, 0, 0], IP_A);
        assert_eq!(feed(&mut a, t(5), &probe), Got::Consumed);
        assert_eq!(a.poll_tx(t(5), &mut *la), 2);
        pop(&mut la); // the ARP request for C
        pop(&mut la); // the reply to 192.168.1.1
        let (_, defend) = pop(&mut la).unwrap();
        let parsed = frame::parse_arp(&defend).unwrap();
        assert_eq!(parsed.operation, ArpOperation::Reply);
        assert_eq!(parsed.sender_ip, Ipv4Address::from(IP_A));
        assert_eq!(parsed.sender_mac, EthernetAddress(MAC_A));
        assert_eq!(&defend[..6], &MAC_C);
        assert_eq!(a.stats().arp_replies_sent, 2);
    }

    #[test]
    fn arp_reply_queue_is_bounded_and_waits_for_tx_slots() {
        let mut a = eth_net(IP_A, MAC_A);
        for n in 0..(ARP_TX_QUEUE_LEN as u8 + 2) {
            let req = arp_request([0x02, 0, 0, 0, 2, n], [10, 0, 0, 100 + n], IP_A);
            assert_eq!(feed(&mut a, t(0), &req), Got::Consumed);
        }
        assert_eq!(a.stats().arp_tx_dropped, 2);
        let mut small = Box::new(Loopback::<2, 1514>::new(Medium::Ethernet, None));
        assert_eq!(a.poll_tx(t(0), &mut *small), 2);
        assert!(a.has_pending_tx());
        small.pop_tx(|_, _| ());
        assert_eq!(a.poll_tx(t(0), &mut *small), 1);
        small.pop_tx(|_, _| ());
        small.pop_tx(|_, _| ());
        assert_eq!(a.poll_tx(t(0), &mut *small), 1);
        assert!(!a.has_pending_tx());
        assert_eq!(a.stats().arp_replies_sent, ARP_TX_QUEUE_LEN as u64);
    }

    #[test]
    fn receive_checks_are_counted() {
        let mut b = eth_net(IP_B, MAC_B);
        let (src, dst) = (addr(IP_A, 5000), addr(IP_B, PORT));
        let good = udp_frame(MAC_A, MAC_B, src, dst, b"payload");
        assert_eq!(
            feed(&mut b, t(0), &good),
            Got::Packet(src, b"payload".to_vec())
        );

        // A flipped payload bit fails the UDP checksum.
        let mut bad = good.clone();
        *bad.last_mut().unwrap() ^= 0x40;
        assert_eq!(
            feed(&mut b, t(0), &bad),
            Got::Dropped(DropReason::BadChecksum)
        );
        // So does a zero UDP checksum ("none") on a raw link.
        let mut zero = good.clone();
        zero[40..42].copy_from_slice(&[0, 0]);
        assert_eq!(
            feed(&mut b, t(0), &zero),
            Got::Dropped(DropReason::BadChecksum)
        );
        // And a corrupted IPv4 header.
        let mut hdr = good.clone();
        hdr[22] ^= 1; // TTL
        assert_eq!(
            feed(&mut b, t(0), &hdr),
            Got::Dropped(DropReason::BadChecksum)
        );

        // Not our IP, not our port, not our MAC.
        let other_ip = udp_frame(MAC_A, MAC_B, src, addr(IP_C, PORT), b"p");
        assert_eq!(
            feed(&mut b, t(0), &other_ip),
            Got::Dropped(DropReason::NotForUs)
        );
        let other_port = udp_frame(MAC_A, MAC_B, src, addr(IP_B, PORT + 1), b"p");
        assert_eq!(
            feed(&mut b, t(0), &other_port),
            Got::Dropped(DropReason::WrongPort)
        );
        let other_mac = udp_frame(MAC_A, MAC_C, src, dst, b"p");
        assert_eq!(
            feed(&mut b, t(0), &other_mac),
            Got::Dropped(DropReason::NotForUs)
        );
        let bcast_mac = udp_frame(MAC_A, [0xff; 6], src, dst, b"p");
        assert_eq!(
            feed(&mut b, t(0), &bcast_mac),
            Got::Dropped(DropReason::NotForUs)
        );

        // Sources we could not answer.
        let port0 = udp_frame(MAC_A, MAC_B, addr(IP_A, 0), dst, b"p");
        assert_eq!(
            feed(&mut b, t(0), &port0),
            Got::Dropped(DropReason::BadSource)
        );
        let bcast_src = udp_frame(MAC_A, MAC_B, addr([10, 0, 0, 255], 1), dst, b"p");
        assert_eq!(
            feed(&mut b, t(0), &bcast_src),
            Got::Dropped(DropReason::BadSource)
        );
        let group_mac = udp_frame([0x01, 0, 0x5e, 0, 0, 1], MAC_B, src, dst, b"p");
        assert_eq!(
            feed(&mut b, t(0), &group_mac),
            Got::Dropped(DropReason::BadSource)
        );

        // Truncation and other protocols.
        assert_eq!(
            feed(&mut b, t(0), &good[..13]),
            Got::Dropped(DropReason::Truncated)
        );
        assert_eq!(
            feed(&mut b, t(0), &good[..30]),
            Got::Dropped(DropReason::Truncated)
        );
        assert_eq!(
            feed(&mut b, t(0), &good[..good.len() - 1]),
            Got::Dropped(DropReason::BadLength)
        );
        let mut ipv6 = good.clone();
        ipv6[12..14].copy_from_slice(&[0x86, 0xdd]);
        assert_eq!(
            feed(&mut b, t(0), &ipv6),
            Got::Dropped(DropReason::OtherProtocol)
        );
        let mut tcp = good.clone();
        tcp[23] = 6;
        fix_ipv4_checksum(&mut tcp);
        assert_eq!(
            feed(&mut b, t(0), &tcp),
            Got::Dropped(DropReason::OtherProtocol)
        );
        let mut frag = good.clone();
        frag[20] |= 0x20; // more fragments
        fix_ipv4_checksum(&mut frag);
        assert_eq!(
            feed(&mut b, t(0), &frag),
            Got::Dropped(DropReason::Fragment)
        );
        // Ethernet padding after the datagram is ignored.
        let mut padded = udp_frame(MAC_A, MAC_B, src, dst, b"p");
        padded.resize(60, 0);
        assert_eq!(feed(&mut b, t(0), &padded), Got::Packet(src, b"p".to_vec()));

        let s = b.stats();
        assert_eq!(s.rx_packets, 2);
        assert_eq!(s.dropped(DropReason::BadChecksum), 3);
        assert_eq!(s.dropped(DropReason::NotForUs), 3);
        assert_eq!(s.dropped(DropReason::WrongPort), 1);
        assert_eq!(s.dropped(DropReason::BadSource), 3);
        assert_eq!(s.dropped(DropReason::Truncated), 2);
        assert_eq!(s.dropped(DropReason::BadLength), 1);
        assert_eq!(s.dropped(DropReason::OtherProtocol), 2);
        assert_eq!(s.dropped(DropReason::Fragment), 1);
        assert_eq!(s.total_dropped(), 16);
    }

    fn fix_ipv4_checksum(frame: &mut [u8]) {
        frame[24..26].copy_from_slice(&[0, 0]);
        let mut sum: u32 = frame[14..34]
            .chunks(2)
            .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
            .sum();
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        frame[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    }

    #[test]
    fn checksum_offload() {
        // rx offload: the NIC vouched for the checksums, so they are not checked.
        let mut cfg = eth_cfg(IP_B, MAC_B);
        cfg.rx_checksum_offload = true;
        let mut b = Net::new(cfg, [ArpEntry::EMPTY; 1]).unwrap();
        let src = addr(IP_A, 5000);
        let mut f = udp_frame(MAC_A, MAC_B, src, addr(IP_B, PORT), b"abc");
        f[40..42].copy_from_slice(&[0, 0]);
        assert_eq!(feed(&mut b, t(0), &f), Got::Packet(src, b"abc".to_vec()));

        // tx offload: checksums are left zero for the NIC.
        let mut cfg = eth_cfg(IP_A, MAC_A);
        cfg.tx_checksum_offload = true;
        let mut a = Net::new(cfg, [ArpEntry::EMPTY; 1]).unwrap();
        let mut la = link();
        assert_eq!(
            feed(&mut a, t(0), &arp_request(MAC_B, IP_B, IP_A)),
            Got::Consumed
        );
        assert_eq!(
            send(&mut a, t(0), &mut *la, addr(IP_B, PORT), b"abc"),
            Ok(SendOutcome::Sent { len: 3 })
        );
        let (_, sent) = pop(&mut la).unwrap();
        assert_eq!(&sent[24..26], &[0, 0]);
        assert_eq!(&sent[40..42], &[0, 0]);
        assert_eq!(&sent[42..], b"abc");
    }

    /// An intact medium (memif): a wrong UDP checksum is not looked at on receive (it
    /// is dropped on any other), while the frames sent still carry real checksums.
    #[test]
    fn an_intact_medium_skips_receive_verification_only() {
        let src = addr(IP_A, 5000);
        let mut f = udp_frame(MAC_A, MAC_B, src, addr(IP_B, PORT), b"abc");
        f[40] ^= 0x5a;
        let mut plain = eth_net(IP_B, MAC_B);
        assert!(matches!(feed(&mut plain, t(0), &f), Got::Dropped(_)));
        let mut caps = Capabilities::new(Medium::Ethernet, 1514);
        caps.intact = true;
        let cfg = NetConfig::new(&caps, IP_B, PORT).with_ethernet(MAC_B, 24, None);
        assert!(cfg.intact);
        let mut b = Net::new(cfg, [ArpEntry::EMPTY; 1]).unwrap();
        assert_eq!(feed(&mut b, t(0), &f), Got::Packet(src, b"abc".to_vec()));
        // Sending: both checksums filled and valid.
        let mut lb = link();
        assert_eq!(
            feed(&mut b, t(0), &arp_request(MAC_A, IP_A, IP_B)),
            Got::Consumed
        );
        assert_eq!(
            send(&mut b, t(0), &mut *lb, addr(IP_A, PORT), b"xyz"),
            Ok(SendOutcome::Sent { len: 3 })
        );
        let (_, sent) = pop(&mut lb).unwrap();
        assert_ne!(&sent[24..26], &[0, 0]);
        assert_ne!(&sent[40..42], &[0, 0]);
        let mut a = eth_net(IP_A, MAC_A);
        assert_eq!(
            feed(&mut a, t(0), &sent),
            Got::Packet(addr(IP_B, PORT), b"xyz".to_vec())
        );
    }

    #[test]
    fn send_errors() {
        let mut a = eth_net(IP_A, MAC_A);
        let mut la = link();
        let b = addr(IP_B, PORT);
        assert_eq!(
            feed(&mut a, t(0), &arp_request(MAC_B, IP_B, IP_A)),
            Got::Consumed
        );
        assert_eq!(a.max_payload(), 1472);
        // Too large for the link.
        assert_eq!(
            a.send(t(0), &mut *la, b, 1473, |_| unreachable!()),
            Err(Errno::EMSGSIZE)
        );
        // The largest that fits goes out as a full 1514-byte frame.
        assert_eq!(
            a.send(t(0), &mut *la, b, 1472, |p| p.len()),
            Ok(SendOutcome::Sent { len: 1472 })
        );
        assert_eq!(pop(&mut la).unwrap().1.len(), 1514);
        // A writer may produce less than the hint, never zero or more.
        assert_eq!(
            a.send(t(0), &mut *la, b, 100, |p| {
                assert_eq!(p.len(), 100);
                10
            }),
            Ok(SendOutcome::Sent { len: 10 })
        );
        assert_eq!(pop(&mut la).unwrap().1.len(), 52);
        assert_eq!(a.send(t(0), &mut *la, b, 100, |_| 0), Err(Errno::EINVAL));
        assert_eq!(a.send(t(0), &mut *la, b, 100, |_| 101), Err(Errno::EINVAL));
        assert_eq!(la.tx_len(), 0, "nothing sent for a failed writer");
        // Bad destinations and hints.
        for dst in [
            addr(IP_B, 0),
            addr([0, 0, 0, 0], 1),
            addr([255, 255, 255, 255], 1),
            addr([224, 0, 0, 1], 1),
            addr([10, 0, 0, 255], 1),
        ] {
            assert_eq!(
                send(&mut a, t(0), &mut *la, dst, b"x"),
                Err(Errno::EINVAL),
                "{dst:?}"
            );
        }
        assert_eq!(
            a.send(t(0), &mut *la, b, 0, |_| unreachable!()),
            Err(Errno::EINVAL)
        );
        let mut udp_link = Box::new(Loopback::<2, 1514>::new(Medium::Udp, None));
        assert_eq!(
            send(&mut a, t(0), &mut *udp_link, b, b"x"),
            Err(Errno::EINVAL)
        );
        assert_eq!(
            send(&mut a, t(0), &mut *la, addr([127, 0, 0, 1], 1), b"x"),
            Err(Errno::EHOSTUNREACH)
        );
        // Off the subnet without a gateway.
        assert_eq!(
            send(&mut a, t(0), &mut *la, addr([192, 168, 0, 1], 1), b"x"),
            Err(Errno::EHOSTUNREACH)
        );

        // No transmit slot: EAGAIN, the writer is not called, nothing is lost.
        let mut small = Box::new(Loopback::<2, 1514>::new(Medium::Ethernet, None));
        assert!(send(&mut a, t(0), &mut *small, b, b"1").is_ok());
        assert!(send(&mut a, t(0), &mut *small, b, b"2").is_ok());
        assert_eq!(
            a.send(t(0), &mut *small, b, 1, |_| unreachable!()),
            Err(Errno::EAGAIN)
        );
        // Also when the ARP request itself finds no slot; it goes out on the retry.
        assert_eq!(
            send(&mut a, t(0), &mut *small, addr(IP_C, PORT), b"x"),
            Err(Errno::EAGAIN)
        );
        assert_eq!(a.stats().arp_requests_sent, 0);
        small.pop_tx(|_, _| ());
        assert_eq!(
            send(&mut a, t(0), &mut *small, addr(IP_C, PORT), b"x"),
            Ok(SendOutcome::ArpPending)
        );
        assert_eq!(a.stats().arp_requests_sent, 1);
        assert_eq!(a.stats().tx_packets, 4);

        // A link lending less than the configured MTU.
        let mut tiny = Box::new(Loopback::<2, 100>::new(Medium::Ethernet, None));
        assert_eq!(
            a.send(t(0), &mut *tiny, b, 200, |_| unreachable!()),
            Err(Errno::EMSGSIZE)
        );
    }

    #[test]
    fn off_subnet_destinations_go_through_the_gateway() {
        let gw = [10, 0, 0, 254];
        let cfg = eth_cfg(IP_A, MAC_A).with_ethernet(MAC_A, 24, Some(gw));
        let mut a = Net::new(cfg, [ArpEntry::EMPTY; 2]).unwrap();
        let mut la = link();
        let far = addr([192, 168, 7, 7], 9);
        assert_eq!(
            send(&mut a, t(0), &mut *la, far, b"x"),
            Ok(SendOutcome::ArpPending)
        );
        assert_eq!(pop(&mut la).unwrap().1, arp_request(MAC_A, IP_A, gw));
        let gw_mac = [0x02, 0, 0, 0, 0, 0xfe];
        assert_eq!(
            feed(&mut a, t(1), &arp_reply(gw_mac, gw, MAC_A, IP_A)),
            Got::Consumed
        );
        assert_eq!(
            send(&mut a, t(1), &mut *la, far, b"x"),
            Ok(SendOutcome::Sent { len: 1 })
        );
        let (_, f) = pop(&mut la).unwrap();
        assert_eq!(f, udp_frame(MAC_A, gw_mac, addr(IP_A, PORT), far, b"x"));
    }

    /// Everything the loopback queue holds, as `rx` would have delivered it.
    fn drain_looped<A, B>(net: &mut Net<A, B>) -> Vec<Got>
    where
        A: AsRef<[ArpEntry]> + AsMut<[ArpEntry]>,
        B: AsRef<[u8]> + AsMut<[u8]>,
    {
        let mut out = Vec::new();
        let src = net.local_addr();
        if let Some(mut q) = net.lend_looped() {
            while let Some(p) = q.pop(|d| Got::Packet(src, d.to_vec())) {
                out.push(p);
            }
            net.return_looped(q);
        }
        out
    }

    #[test]
    fn datagrams_to_ourselves_wait_in_the_loopback_queue() {
        let cfg = eth_cfg(IP_A, MAC_A);
        let lo = vec![0u8; cfg.loopback_bytes(2).unwrap()];
        let mut a = Net::with_loopback(cfg, [ArpEntry::EMPTY; 2], lo).unwrap();
        assert_eq!(a.loopback_capacity(), 2);
        // Every frame that left is in the link's transmit queue: none must.
        let mut la = link();
        let me = addr(IP_A, PORT);
        assert!(!a.has_looped());
        assert_eq!(
            send(&mut a, t(0), &mut *la, me, b"self"),
            Ok(SendOutcome::Sent { len: 4 })
        );
        assert!(a.has_looped());
        // The largest payload fits a slot; the writer's rules are those of the link.
        let big: Vec<u8> = (0..a.max_payload()).map(|i| i as u8).collect();
        assert_eq!(
            send(&mut a, t(0), &mut *la, me, &big),
            Ok(SendOutcome::Sent { len: big.len() })
        );
        // Full: EAGAIN, the writer is not called, nothing is lost.
        assert_eq!(
            a.send(t(0), &mut *la, me, 1, |_| unreachable!()),
            Err(Errno::EAGAIN)
        );
        assert_eq!(la.tx_len(), 0, "no frame and no ARP request left");
        assert_eq!(
            drain_looped(&mut a),
            vec![
                Got::Packet(me, b"self".to_vec()),
                Got::Packet(me, big.clone())
            ]
        );
        assert!(!a.has_looped());
        // Wrapping around the ring, and failed writers queue nothing.
        assert_eq!(a.send(t(0), &mut *la, me, 4, |_| 0), Err(Errno::EINVAL));
        assert_eq!(a.send(t(0), &mut *la, me, 4, |_| 5), Err(Errno::EINVAL));
        for round in 0u8..5 {
            send(&mut a, t(1), &mut *la, me, &[round]).unwrap();
            send(&mut a, t(1), &mut *la, me, &[round, 1]).unwrap();
            assert_eq!(
                drain_looped(&mut a),
                vec![
                    Got::Packet(me, vec![round]),
                    Got::Packet(me, vec![round, 1])
                ]
            );
        }
        // Our IP at another port is not us: it goes to the link as before.
        assert_eq!(
            send(&mut a, t(2), &mut *la, addr(IP_A, PORT + 1), b"x"),
            Ok(SendOutcome::Sent { len: 1 })
        );
        assert_eq!(la.tx_len(), 1);
        let s = a.stats();
        assert_eq!((s.tx_looped, s.rx_looped, s.tx_loop_full), (12, 12, 1));
        assert_eq!((s.tx_packets, s.tx_loop_refused), (1, 0));
        assert_eq!(s.arp_requests_sent, 0);
    }

    #[test]
    fn without_loopback_storage_sends_to_ourselves_fail_clearly() {
        let mut a = eth_net(IP_A, MAC_A);
        assert_eq!(a.loopback_capacity(), 0);
        let mut la = link();
        assert_eq!(
            a.send(t(0), &mut *la, addr(IP_A, PORT), 1, |_| unreachable!()),
            Err(Errno::EHOSTUNREACH)
        );
        assert_eq!(la.tx_len(), 0);
        assert_eq!(a.stats().tx_loop_refused, 1);
        assert!(a.lend_looped().is_none());
        // UDP links never queue: the kernel loops datagrams back.
        let caps = Capabilities::new(Medium::Udp, 1472);
        let cfg = NetConfig::new(&caps, IP_A, PORT);
        assert_eq!(cfg.loopback_bytes(4), Some(0));
        let mut u = Net::with_loopback(cfg, [ArpEntry::EMPTY; 0], vec![0u8; 4096]).unwrap();
        assert_eq!(u.loopback_capacity(), 0);
        let mut lu = Box::new(Loopback::<2, 1472>::new(Medium::Udp, None));
        assert_eq!(
            send(&mut u, t(0), &mut *lu, addr(IP_A, PORT), b"x"),
            Ok(SendOutcome::Sent { len: 1 })
        );
        assert_eq!(lu.tx_len(), 1);
        assert!(!u.has_looped());
        assert_eq!(eth_cfg(IP_A, MAC_A).loopback_bytes(usize::MAX), None);
    }

    #[test]
    fn udp_medium_passes_addresses_out_of_band() {
        type U = Loopback<4, 1472>;
        let caps = Capabilities::new(Medium::Udp, 1472);
        let (ia, ib) = (addr([127, 0, 0, 1], 4000), addr([127, 0, 0, 1], 4001));
        let mut a = Net::new(NetConfig::new(&caps, IP_A, 4000), [ArpEntry::EMPTY; 0]).unwrap();
        let mut b = Net::new(NetConfig::new(&caps, IP_B, 4001), [ArpEntry::EMPTY; 0]).unwrap();
        let (mut la, mut lb) = (
            Box::new(U::new(Medium::Udp, Some(ia))),
            Box::new(U::new(Medium::Udp, Some(ib))),
        );
        assert_eq!(a.max_payload(), 1472);
        assert_eq!(
            send(&mut a, t(0), &mut *la, ib, b"ping"),
            Ok(SendOutcome::Sent { len: 4 })
        );
        assert_eq!(
            la.pop_tx(|d, p| (d, p.to_vec())),
            Some((Some(ib), b"ping".to_vec()))
        );
        send(&mut a, t(0), &mut *la, ib, b"ping").unwrap();
        la.transfer_to(&mut *lb);
        assert_eq!(
            pump(&mut b, &mut lb, t(0)),
            vec![Got::Packet(ia, b"ping".to_vec())]
        );
        send(&mut b, t(0), &mut *lb, ia, b"pong").unwrap();
        lb.transfer_to(&mut *la);
        assert_eq!(
            pump(&mut a, &mut la, t(0)),
            vec![Got::Packet(ib, b"pong".to_vec())]
        );

        // No source, or one we could not answer.
        assert_eq!(feed(&mut b, t(0), b"x"), Got::Dropped(DropReason::NoSource));
        let bad = RxMeta::from_src(addr([0, 0, 0, 0], 1));
        assert_eq!(
            own(b.rx(t(0), bad, b"x")),
            Got::Dropped(DropReason::BadSource)
        );
        let bad = RxMeta::from_src(addr(IP_A, 0));
        assert_eq!(
            own(b.rx(t(0), bad, b"x")),
            Got::Dropped(DropReason::BadSource)
        );
        let mut wrong = RxMeta::from_src(ia);
        wrong.dst = Some(addr(IP_B, 9));
        assert_eq!(
            own(b.rx(t(0), wrong, b"x")),
            Got::Dropped(DropReason::WrongPort)
        );
        assert_eq!(b.stats().total_dropped(), 4);

        // Sizes and back-pressure.
        assert_eq!(
            a.send(t(0), &mut *la, ib, 1473, |_| unreachable!()),
            Err(Errno::EMSGSIZE)
        );
        while la.tx_len() < 4 {
            send(&mut a, t(0), &mut *la, ib, b"fill").unwrap();
        }
        assert_eq!(
            a.send(t(0), &mut *la, ib, 1, |_| unreachable!()),
            Err(Errno::EAGAIN)
        );
        // ARP never happens here.
        assert_eq!(a.poll_tx(t(0), &mut *la), 0);
    }

    #[test]
    fn config_validation() {
        let caps = Capabilities::new(Medium::Ethernet, 1514);
        let base = eth_cfg(IP_A, MAC_A);
        let bad = |f: &dyn Fn(&mut NetConfig)| {
            let mut c = base;
            f(&mut c);
            Net::new(c, [ArpEntry::EMPTY; 1]).err()
        };
        assert_eq!(bad(&|_| {}), None);
        assert_eq!(bad(&|c| c.local_mac = [0; 6]), Some(Errno::EINVAL));
        assert_eq!(bad(&|c| c.local_mac = [0xff; 6]), Some(Errno::EINVAL));
        assert_eq!(bad(&|c| c.local_ip = [0, 0, 0, 0]), Some(Errno::EINVAL));
        assert_eq!(bad(&|c| c.local_ip = [10, 0, 0, 255]), Some(Errno::EINVAL));
        assert_eq!(bad(&|c| c.local_port = 0), Some(Errno::EINVAL));
        assert_eq!(bad(&|c| c.prefix_len = 33), Some(Errno::EINVAL));
        assert_eq!(bad(&|c| c.ttl = 0), Some(Errno::EINVAL));
        assert_eq!(
            bad(&|c| c.mtu = ETH_IPV4_UDP_HEADER_LEN),
            Some(Errno::EINVAL)
        );
        assert_eq!(
            bad(&|c| c.arp_timeout = Duration::ZERO),
            Some(Errno::EINVAL)
        );
        assert_eq!(bad(&|c| c.arp_max_requests = 0), Some(Errno::EINVAL));
        assert_eq!(
            bad(&|c| c.gateway = Some([192, 168, 0, 1])),
            Some(Errno::EINVAL)
        );
        assert_eq!(bad(&|c| c.gateway = Some(IP_A)), Some(Errno::EINVAL));
        assert_eq!(bad(&|c| c.gateway = Some([10, 0, 0, 254])), None);
        assert_eq!(
            Net::new(base, [ArpEntry::EMPTY; 0]).err(),
            Some(Errno::EINVAL)
        );
        // /31 links have no broadcast address (RFC 3021): both addresses are hosts.
        let p2p = NetConfig::new(&caps, [10, 0, 0, 1], 1).with_ethernet(MAC_A, 31, None);
        assert!(Net::new(p2p, [ArpEntry::EMPTY; 1]).is_ok());
        assert_eq!(base.netmask(), 0xffff_ff00);
        assert_eq!(
            NetConfig {
                prefix_len: 0,
                ..base
            }
            .netmask(),
            0
        );
        assert_eq!(
            NetConfig {
                prefix_len: 32,
                ..base
            }
            .netmask(),
            u32::MAX
        );
        // UDP links need no MAC nor cache; the payload is capped at 65507.
        let udp = NetConfig::new(&Capabilities::new(Medium::Udp, 70_000), [0; 4], 0);
        let n = Net::new(udp, [ArpEntry::EMPTY; 0]).unwrap();
        assert_eq!(n.max_payload(), 65_507);
    }

    fn arb_meta() -> impl Strategy<Value = RxMeta> {
        (
            any::<Option<([u8; 4], u16)>>(),
            any::<Option<([u8; 4], u16)>>(),
        )
            .prop_map(|(s, d)| {
                let mut m = RxMeta::default();
                m.src = s.map(|(ip, p)| addr(ip, p));
                m.dst = d.map(|(ip, p)| addr(ip, p));
                m
            })
    }

    fn valid_frames() -> Vec<Vec<u8>> {
        vec![
            udp_frame(
                MAC_A,
                MAC_B,
                addr(IP_A, 5000),
                addr(IP_B, PORT),
                b"0123456789abcdef",
            ),
            arp_request(MAC_A, IP_A, IP_B),
            arp_reply(MAC_A, IP_A, MAC_B, IP_B),
        ]
    }

    fn total(s: &NetStats) -> u64 {
        s.rx_packets + s.rx_arp + s.total_dropped()
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bufs in proptest::collection::vec((arb_meta(), proptest::collection::vec(any::<u8>(), 0..120)), 1..20)) {
            let mut eth = eth_net(IP_B, MAC_B);
            let caps = Capabilities::new(Medium::Udp, 1472);
            let mut udp = Net::new(NetConfig::new(&caps, IP_B, PORT), [ArpEntry::EMPTY; 0]).unwrap();
            let mut la = link();
            for (i, (meta, buf)) in bufs.iter().enumerate() {
                let now = t(i as u64);
                let _ = eth.rx(now, *meta, buf);
                let _ = udp.rx(now, *meta, buf);
                let _ = eth.poll_tx(now, &mut *la);
            }
            prop_assert_eq!(total(eth.stats()), bufs.len() as u64);
            prop_assert_eq!(total(udp.stats()), bufs.len() as u64);
        }

        #[test]
        fn mutated_frames_never_panic(
            which in 0usize..3,
            flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
            cut in proptest::option::of(any::<usize>()),
            offload in any::<bool>(),
        ) {
            let mut f = valid_frames()[which].clone();
            for (at, x) in &flips {
                let n = f.len();
                f[at % n] ^= x;
            }
            if let Some(c) = cut {
                f.truncate(c % (f.len() + 1));
            }
            let mut cfg = eth_cfg(IP_B, MAC_B);
            cfg.rx_checksum_offload = offload;
            let mut b = Net::new(cfg, [ArpEntry::EMPTY; 2]).unwrap();
            let mut lb = link();
            let out = own(b.rx(t(0), RxMeta::default(), &f));
            b.poll_tx(t(0), &mut *lb);
            prop_assert_eq!(total(b.stats()), 1);
            if let Got::Packet(_, p) = out {
                prop_assert!(p.len() <= f.len());
            }
        }

        #[test]
        fn single_byte_corruption_past_ethernet_is_never_delivered(at in 14usize..58, x in 1u8..=255) {
            let mut f = valid_frames()[0].clone();
            f[at] ^= x;
            let mut b = eth_net(IP_B, MAC_B);
            let out = own(b.rx(t(0), RxMeta::default(), &f));
            prop_assert!(matches!(out, Got::Dropped(_)), "{:?}", out);
        }
    }
}
