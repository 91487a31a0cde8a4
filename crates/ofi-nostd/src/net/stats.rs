//! The counters of a [`Net`](super::Net), and every reason it drops a received buffer.

/// Why [`Net::rx`](super::Net::rx) dropped a buffer. Each reason has a counter
/// ([`NetStats::dropped`]); the order follows `docs/wire-protocol.md` section 10.
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
    /// A UDP-medium buffer without a source address in its [`RxMeta`](wire::link::RxMeta).
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

    /// The counter of this reason.
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

    /// The reason for a framing error of `wire`.
    pub(super) fn from_wire(e: wire::Error) -> Self {
        match e {
            wire::Error::Truncated => DropReason::Truncated,
            wire::Error::BadLength => DropReason::BadLength,
            wire::Error::BadChecksum => DropReason::BadChecksum,
            wire::Error::NotOurs => DropReason::OtherProtocol,
            _ => DropReason::Malformed,
        }
    }
}

/// Counters of a [`Net`](super::Net). Every [`Net::rx`](super::Net::rx) call increments exactly one of
/// `rx_packets`, `rx_arp` or a drop counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NetStats {
    /// UDP datagrams delivered by [`Net::rx`](super::Net::rx).
    pub rx_packets: u64,
    /// ARP messages consumed (answered or learned from).
    pub rx_arp: u64,
    /// Datagrams handed to the link by [`Net::send`](super::Net::send).
    pub tx_packets: u64,
    /// Sends deferred with [`SendOutcome::ArpPending`](super::SendOutcome::ArpPending).
    pub tx_arp_pending: u64,
    /// Sends refused with [`SendOutcome::ArpFailed`](super::SendOutcome::ArpFailed): the next hop did not answer.
    pub tx_arp_failed: u64,
    /// Next hops given up on after [`NetConfig::arp_max_requests`](super::NetConfig::arp_max_requests) unanswered requests.
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
    /// ... of those, received by the progress loop ([`Net::lend_looped`](super::Net::lend_looped)).
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

    /// Count one buffer dropped for `reason`.
    pub(super) fn drop(&mut self, reason: DropReason) {
        if let Some(c) = self.dropped.get_mut(reason.index()) {
            *c = c.wrapping_add(1);
        }
    }
}
