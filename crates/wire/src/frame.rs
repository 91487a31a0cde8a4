//! Ethernet / IPv4 / UDP and ARP framing for raw links (TAP, AF_PACKET, DPDK, DPU NIC
//! queues), built on `smoltcp::wire` rather than hand-written header code.
//!
//! On receive, the IPv4 header checksum and the UDP checksum are always verified unless
//! the [`ChecksumCapabilities`] passed in say the NIC already did (`Checksum::None` or
//! `Checksum::Tx` for rx). A zero UDP checksum ("none", legal in IPv4) is refused on raw
//! links: our senders always fill it, so a zero is either corruption or a foreign sender.
//! IPv4 fragments are never sent by v1 and are dropped as [`Error::NotOurs`].

use core::ops::Range;

pub use smoltcp::phy::{Checksum, ChecksumCapabilities};
use smoltcp::wire::{
    ArpHardware, ArpPacket, ArpRepr, EthernetFrame, EthernetProtocol, EthernetRepr, IpAddress,
    IpProtocol, Ipv4Packet, Ipv4Repr, UdpPacket, UdpRepr,
};
pub use smoltcp::wire::{ArpOperation, EthernetAddress, Ipv4Address};

use crate::{Error, Result};

/// Ethernet II header length.
pub const ETH_HEADER_LEN: usize = 14;
/// IPv4 header length as we emit it (no options).
pub const IPV4_HEADER_LEN: usize = 20;
/// UDP header length.
pub const UDP_HEADER_LEN: usize = 8;
/// Bytes in front of the UDP payload in a frame we emit.
pub const ETH_IPV4_UDP_HEADER_LEN: usize = ETH_HEADER_LEN + IPV4_HEADER_LEN + UDP_HEADER_LEN;
/// Length of an Ethernet ARP frame (without padding to 60 bytes, which NICs add).
pub const ARP_FRAME_LEN: usize = ETH_HEADER_LEN + 28;
/// Default IPv4 TTL for emitted datagrams.
pub const DEFAULT_TTL: u8 = 64;

/// An IPv4 address and UDP port: how endpoints are found on the network (the endpoint
/// id inside our protocol's header selects among endpoints sharing a port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct UdpAddr {
    /// IPv4 address.
    pub ip: Ipv4Address,
    /// UDP port.
    pub port: u16,
}

impl UdpAddr {
    /// Build from parts.
    pub const fn new(ip: Ipv4Address, port: u16) -> Self {
        UdpAddr { ip, port }
    }
}

/// The addressing of one Ethernet/IPv4/UDP datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpFrameRepr {
    /// Source MAC.
    pub src_mac: EthernetAddress,
    /// Destination MAC (from the ARP cache).
    pub dst_mac: EthernetAddress,
    /// Source IPv4 address and UDP port.
    pub src: UdpAddr,
    /// Destination IPv4 address and UDP port.
    pub dst: UdpAddr,
    /// IPv4 TTL.
    pub ttl: u8,
}

/// A received Ethernet/IPv4/UDP datagram that passed every check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpFrame {
    /// Addressing (`ttl` is the received TTL).
    pub repr: UdpFrameRepr,
    /// Where the UDP payload (our packet) lies in the frame.
    pub payload: Range<usize>,
}

/// A received ARP message (Ethernet/IPv4 only).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpMessage {
    /// Request or reply.
    pub operation: ArpOperation,
    /// Sender hardware address.
    pub sender_mac: EthernetAddress,
    /// Sender protocol address.
    pub sender_ip: Ipv4Address,
    /// Target hardware address (zero in requests).
    pub target_mac: EthernetAddress,
    /// Target protocol address.
    pub target_ip: Ipv4Address,
}

/// What [`parse_frame`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParsedFrame {
    /// A UDP/IPv4 datagram.
    Udp(UdpFrame),
    /// An ARP message.
    Arp(ArpMessage),
}

impl UdpFrameRepr {
    /// Length of the frame carrying `payload_len` bytes of UDP payload.
    pub const fn buffer_len(payload_len: usize) -> usize {
        ETH_IPV4_UDP_HEADER_LEN + payload_len
    }

    /// Write Ethernet, IPv4 and UDP headers into `buf`, let `emit_payload` write the UDP
    /// payload (exactly `payload_len` bytes) in place, then fill the checksums the
    /// capabilities ask for (`Checksum::Rx`/`None` for tx means the NIC offloads them).
    /// Returns the frame length.
    pub fn emit(
        &self,
        buf: &mut [u8],
        payload_len: usize,
        caps: &ChecksumCapabilities,
        emit_payload: impl FnOnce(&mut [u8]),
    ) -> Result<usize> {
        let total = Self::buffer_len(payload_len);
        if payload_len > usize::from(u16::MAX) - IPV4_HEADER_LEN - UDP_HEADER_LEN {
            return Err(Error::BadLength);
        }
        let buf = buf.get_mut(..total).ok_or(Error::BufferTooSmall)?;
        let mut eth = EthernetFrame::new_unchecked(&mut *buf);
        EthernetRepr {
            src_addr: self.src_mac,
            dst_addr: self.dst_mac,
            ethertype: EthernetProtocol::Ipv4,
        }
        .emit(&mut eth);
        let ip_repr = Ipv4Repr {
            src_addr: self.src.ip,
            dst_addr: self.dst.ip,
            next_header: IpProtocol::Udp,
            payload_len: UDP_HEADER_LEN + payload_len,
            hop_limit: self.ttl,
        };
        let mut ip = Ipv4Packet::new_unchecked(eth.payload_mut());
        ip_repr.emit(&mut ip, caps);
        let mut udp = UdpPacket::new_unchecked(ip.payload_mut());
        // The UDP checksum is ours (`udp_checksum`): smoltcp's costs about three times
        // as much, on every frame sent.
        let mut no_udp = caps.clone();
        no_udp.udp = Checksum::None;
        UdpRepr {
            src_port: self.src.port,
            dst_port: self.dst.port,
        }
        .emit(
            &mut udp,
            &IpAddress::Ipv4(self.src.ip),
            &IpAddress::Ipv4(self.dst.ip),
            payload_len,
            emit_payload,
            &no_udp,
        );
        if caps.udp.tx() {
            let c = udp_checksum(self.src.ip, self.dst.ip, udp.into_inner());
            let at = ETH_HEADER_LEN + IPV4_HEADER_LEN + 6;
            buf[at..at + 2].copy_from_slice(&c.to_be_bytes());
        }
        Ok(total)
    }
}

/// Emit an Ethernet/IPv4/UDP frame around `payload` (copying it); see
/// [`UdpFrameRepr::emit`] to write the payload in place instead.
pub fn emit_udp_ipv4_ethernet(
    buf: &mut [u8],
    repr: &UdpFrameRepr,
    payload: &[u8],
    caps: &ChecksumCapabilities,
) -> Result<usize> {
    repr.emit(buf, payload.len(), caps, |b| b.copy_from_slice(payload))
}

/// The RFC 1071 sum of `data` added to `acc`, unfolded: 32-bit big-endian words into a
/// 64-bit accumulator (no carry is lost below 2^32 words); a partial last word is
/// padded with zeros, which is the RFC's odd-byte rule.
fn sum_words(data: &[u8], mut acc: u64) -> u64 {
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        acc += u64::from(u32::from_be_bytes([w[0], w[1], w[2], w[3]]));
    }
    let mut last = [0u8; 4];
    let rest = words.remainder();
    last[..rest.len()].copy_from_slice(rest);
    acc + u64::from(u32::from_be_bytes(last))
}

/// Folds a [`sum_words`] accumulator to 16 bits (end-around carry).
fn fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// The sum of the IPv4 pseudo-header of a UDP datagram of `len` bytes.
fn pseudo_sum(src: Ipv4Address, dst: Ipv4Address, len: usize) -> u64 {
    let acc = sum_words(&src.octets(), 0);
    let acc = sum_words(&dst.octets(), acc);
    acc + u64::from(u8::from(IpProtocol::Udp)) + len as u64
}

/// The UDP checksum of `udp` (header with a zero checksum field, then payload) from
/// `src` to `dst`: 0xffff for a sum of zero, since 0 means "none" in IPv4.
fn udp_checksum(src: Ipv4Address, dst: Ipv4Address, udp: &[u8]) -> u16 {
    match !fold(sum_words(udp, pseudo_sum(src, dst, udp.len()))) {
        0 => 0xffff,
        c => c,
    }
}

/// Whether the checksum in `udp` (a whole datagram) is right.
fn udp_checksum_ok(src: Ipv4Address, dst: Ipv4Address, udp: &[u8]) -> bool {
    fold(sum_words(udp, pseudo_sum(src, dst, udp.len()))) == 0xffff
}

fn smol_len_err(have: usize, min: usize) -> Error {
    if have < min {
        Error::Truncated
    } else {
        Error::BadLength
    }
}

/// Parse an Ethernet frame carrying IPv4/UDP, verifying the IPv4 header checksum and
/// the UDP checksum (as `caps` say for rx). Errors: [`Error::NotOurs`] for another
/// EtherType, protocol or a fragment; [`Error::BadChecksum`]; length errors.
pub fn parse_eth_ipv4_udp(frame: &[u8], caps: &ChecksumCapabilities) -> Result<UdpFrame> {
    let eth = EthernetFrame::new_checked(frame).map_err(|_| Error::Truncated)?;
    if eth.ethertype() != EthernetProtocol::Ipv4 {
        return Err(Error::NotOurs);
    }
    parse_ipv4_udp_at(frame, ETH_HEADER_LEN, eth.src_addr(), eth.dst_addr(), caps)
}

fn parse_ipv4_udp_at(
    frame: &[u8],
    ip_off: usize,
    src_mac: EthernetAddress,
    dst_mac: EthernetAddress,
    caps: &ChecksumCapabilities,
) -> Result<UdpFrame> {
    let ip_buf = frame.get(ip_off..).ok_or(Error::Truncated)?;
    if ip_buf.first().is_some_and(|b| b >> 4 != 4) {
        return Err(Error::NotOurs);
    }
    let ip = Ipv4Packet::new_checked(ip_buf).map_err(|_| smol_len_err(ip_buf.len(), 20))?;
    if caps.ipv4.rx() && !ip.verify_checksum() {
        return Err(Error::BadChecksum);
    }
    if ip.more_frags() || ip.frag_offset() != 0 {
        return Err(Error::NotOurs);
    }
    if ip.next_header() != IpProtocol::Udp {
        return Err(Error::NotOurs);
    }
    let src_ip = ip.src_addr();
    let dst_ip = ip.dst_addr();
    let udp_off = ip_off + usize::from(ip.header_len());
    let udp_buf = ip.payload();
    let udp = UdpPacket::new_checked(udp_buf).map_err(|_| smol_len_err(udp_buf.len(), 8))?;
    if udp.dst_port() == 0 {
        return Err(Error::Malformed);
    }
    if caps.udp.rx()
        && (udp.checksum() == 0
            || !udp_checksum_ok(src_ip, dst_ip, &udp_buf[..usize::from(udp.len())]))
    {
        return Err(Error::BadChecksum);
    }
    let start = udp_off + UDP_HEADER_LEN;
    let end = udp_off + usize::from(udp.len());
    Ok(UdpFrame {
        repr: UdpFrameRepr {
            src_mac,
            dst_mac,
            src: UdpAddr::new(src_ip, udp.src_port()),
            dst: UdpAddr::new(dst_ip, udp.dst_port()),
            ttl: ip.hop_limit(),
        },
        payload: start..end,
    })
}

fn emit_arp(buf: &mut [u8], eth_dst: EthernetAddress, msg: &ArpMessage) -> Result<usize> {
    let buf = buf.get_mut(..ARP_FRAME_LEN).ok_or(Error::BufferTooSmall)?;
    let mut eth = EthernetFrame::new_unchecked(&mut *buf);
    EthernetRepr {
        src_addr: msg.sender_mac,
        dst_addr: eth_dst,
        ethertype: EthernetProtocol::Arp,
    }
    .emit(&mut eth);
    let mut arp = ArpPacket::new_unchecked(eth.payload_mut());
    ArpRepr::EthernetIpv4 {
        operation: msg.operation,
        source_hardware_addr: msg.sender_mac,
        source_protocol_addr: msg.sender_ip,
        target_hardware_addr: msg.target_mac,
        target_protocol_addr: msg.target_ip,
    }
    .emit(&mut arp);
    Ok(ARP_FRAME_LEN)
}

/// Emit a broadcast ARP request asking who has `target_ip`. Returns the frame length.
pub fn emit_arp_request(
    buf: &mut [u8],
    src_mac: EthernetAddress,
    src_ip: Ipv4Address,
    target_ip: Ipv4Address,
) -> Result<usize> {
    emit_arp(
        buf,
        EthernetAddress::BROADCAST,
        &ArpMessage {
            operation: ArpOperation::Request,
            sender_mac: src_mac,
            sender_ip: src_ip,
            target_mac: EthernetAddress([0; 6]),
            target_ip,
        },
    )
}

/// Emit a unicast ARP reply to `request` (which must be a request for `our_ip`; the
/// caller checks that), saying `our_ip` is at `our_mac`.
pub fn emit_arp_reply(
    buf: &mut [u8],
    our_mac: EthernetAddress,
    our_ip: Ipv4Address,
    request: &ArpMessage,
) -> Result<usize> {
    emit_arp(
        buf,
        request.sender_mac,
        &ArpMessage {
            operation: ArpOperation::Reply,
            sender_mac: our_mac,
            sender_ip: our_ip,
            target_mac: request.sender_mac,
            target_ip: request.sender_ip,
        },
    )
}

/// Parse an Ethernet frame carrying an Ethernet/IPv4 ARP request or reply.
pub fn parse_arp(frame: &[u8]) -> Result<ArpMessage> {
    let eth = EthernetFrame::new_checked(frame).map_err(|_| Error::Truncated)?;
    if eth.ethertype() != EthernetProtocol::Arp {
        return Err(Error::NotOurs);
    }
    let payload = eth.payload();
    let arp = ArpPacket::new_checked(payload).map_err(|_| Error::Truncated)?;
    if arp.hardware_type() != ArpHardware::Ethernet {
        return Err(Error::NotOurs);
    }
    match ArpRepr::parse(&arp) {
        Ok(ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr,
            source_protocol_addr,
            target_hardware_addr,
            target_protocol_addr,
        }) => {
            if !matches!(operation, ArpOperation::Request | ArpOperation::Reply) {
                return Err(Error::Malformed);
            }
            Ok(ArpMessage {
                operation,
                sender_mac: source_hardware_addr,
                sender_ip: source_protocol_addr,
                target_mac: target_hardware_addr,
                target_ip: target_protocol_addr,
            })
        }
        #[allow(unreachable_patterns)] // ArpRepr is non_exhaustive
        Ok(_) => Err(Error::NotOurs),
        Err(_) => Err(Error::NotOurs),
    }
}

/// Classify and parse a received Ethernet frame: UDP/IPv4 (checksums verified) or ARP.
/// Anything else is [`Error::NotOurs`].
pub fn parse_frame(frame: &[u8], caps: &ChecksumCapabilities) -> Result<ParsedFrame> {
    let eth = EthernetFrame::new_checked(frame).map_err(|_| Error::Truncated)?;
    match eth.ethertype() {
        EthernetProtocol::Ipv4 => parse_eth_ipv4_udp(frame, caps).map(ParsedFrame::Udp),
        EthernetProtocol::Arp => parse_arp(frame).map(ParsedFrame::Arp),
        _ => Err(Error::NotOurs),
    }
}
