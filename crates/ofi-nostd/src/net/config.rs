//! [`NetConfig`]: how this host appears on the network, and the link facts the framing
//! depends on.

use wire::frame::{
    self, DEFAULT_TTL, ETH_IPV4_UDP_HEADER_LEN, IPV4_HEADER_LEN, Ipv4Address, UDP_HEADER_LEN,
};
use wire::link::{Capabilities, Medium, UdpAddr};

use super::loopback::LOOP_SLOT_HEADER;
use crate::time::Duration;

/// Largest UDP payload of one IPv4 datagram (65535 minus IPv4 and UDP headers).
pub const MAX_UDP_PAYLOAD: usize = u16::MAX as usize - IPV4_HEADER_LEN - UDP_HEADER_LEN;

/// Default [`NetConfig::arp_timeout`]: 60 s, like common host stacks.
pub const DEFAULT_ARP_TIMEOUT: Duration = Duration::from_secs(60);

/// Default [`NetConfig::arp_request_interval`]: at most one request per next hop per
/// 100 ms.
pub const DEFAULT_ARP_REQUEST_INTERVAL: Duration = Duration::from_millis(100);

/// Default [`NetConfig::arp_max_requests`]: 3, Linux's `ucast_solicit` +
/// `mcast_solicit` for a new neighbour being 3 + 3 at a much longer interval.
pub const DEFAULT_ARP_MAX_REQUESTS: u8 = 3;

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

    /// Bytes of loopback storage ([`Net::with_loopback`](super::Net::with_loopback)) that hold `slots` datagrams
    /// to ourselves: 0 on UDP links (the kernel loops them back), `None` on overflow.
    pub fn loopback_bytes(&self, slots: usize) -> Option<usize> {
        match self.medium {
            Medium::Ethernet => slots.checked_mul(LOOP_SLOT_HEADER + self.max_payload()),
            Medium::Udp => Some(0),
        }
    }

    /// The checksum work left to us: none to verify on an intact medium.
    pub(super) fn checksum_caps(&self) -> frame::ChecksumCapabilities {
        let mut caps = Capabilities::new(self.medium, self.mtu);
        // Nothing to verify on a medium that cannot corrupt.
        caps.rx_checksum_offload = self.rx_checksum_offload || self.intact;
        caps.tx_checksum_offload = self.tx_checksum_offload;
        caps.checksum_caps()
    }
}
