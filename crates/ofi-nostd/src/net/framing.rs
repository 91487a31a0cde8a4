//! Framing: the checks on a received UDP payload or Ethernet frame, and writing a wire
//! packet into the link's transmit buffer with (on raw links) its Ethernet II / IPv4 /
//! UDP headers, through `wire::frame`. Stateless: the configuration says everything.

use wire::frame::{
    self, ArpMessage, ETH_HEADER_LEN, ETH_IPV4_UDP_HEADER_LEN, EthernetAddress, ParsedFrame,
    UdpFrameRepr,
};
use wire::link::{Link, RxMeta, TxMeta, TxToken, UdpAddr};

use super::{DropReason, NetConfig, RxOutcome};
use crate::errno::{Errno, Result};

const BROADCAST_MAC: [u8; 6] = [0xff; 6];
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;

/// What an Ethernet frame addressed to us carries.
pub(super) enum EthernetRx<'b> {
    /// A UDP datagram for our address and port.
    Udp {
        /// The sender's address.
        src: UdpAddr,
        /// The UDP payload, inside the frame.
        payload: &'b [u8],
    },
    /// An ARP message, for the ARP cache.
    Arp(ArpMessage),
}

/// The big-endian `u16` at `at`, if the buffer holds it.
pub(super) fn be16(buf: &[u8], at: usize) -> Option<u16> {
    let b = buf.get(at..at.checked_add(2)?)?;
    Some(u16::from_be_bytes([*b.first()?, *b.get(1)?]))
}

fn mac_at(buf: &[u8], at: usize) -> Option<[u8; 6]> {
    buf.get(at..at.checked_add(6)?)?.try_into().ok()
}

/// A multicast or broadcast MAC (the group bit).
pub(super) fn is_group_mac(mac: [u8; 6]) -> bool {
    mac[0] & 1 != 0
}

/// A UDP payload from a UDP-medium link: the kernel did the framing; check the
/// addresses it reports in `meta`.
#[inline]
pub(super) fn rx_udp<'b>(
    cfg: &NetConfig,
    meta: RxMeta,
    buf: &'b [u8],
) -> core::result::Result<RxOutcome<'b>, DropReason> {
    let src = meta.src.ok_or(DropReason::NoSource)?;
    if src.port == 0 || !cfg.usable_unicast(src.ip.octets()) {
        return Err(DropReason::BadSource);
    }
    if let Some(d) = meta.dst
        && cfg.local_port != 0
        && d.port != cfg.local_port
    {
        return Err(DropReason::WrongPort);
    }
    Ok(RxOutcome::Packet { src, payload: buf })
}

/// A whole Ethernet frame: an ARP message or a UDP datagram for us, checksums verified
/// (unless offloaded), or why it is dropped.
#[inline]
pub(super) fn rx_ethernet<'b>(
    cfg: &NetConfig,
    buf: &'b [u8],
) -> core::result::Result<EthernetRx<'b>, DropReason> {
    let (Some(dst_mac), Some(ethertype)) = (mac_at(buf, 0), be16(buf, 12)) else {
        return Err(DropReason::Truncated);
    };
    match ethertype {
        ETHERTYPE_ARP => {
            if dst_mac != cfg.local_mac && dst_mac != BROADCAST_MAC {
                return Err(DropReason::NotForUs);
            }
            match frame::parse_frame(buf, &cfg.checksum_caps()) {
                Ok(ParsedFrame::Arp(m)) => Ok(EthernetRx::Arp(m)),
                Ok(ParsedFrame::Udp(_)) => Err(DropReason::OtherProtocol),
                Err(e) => Err(DropReason::from_wire(e)),
            }
        }
        ETHERTYPE_IPV4 => {
            if dst_mac != cfg.local_mac {
                return Err(DropReason::NotForUs);
            }
            let f = match frame::parse_eth_ipv4_udp(buf, &cfg.checksum_caps()) {
                Ok(f) => f,
                Err(wire::Error::NotOurs) => return Err(classify_ipv4(buf)),
                Err(e) => return Err(DropReason::from_wire(e)),
            };
            let r = f.repr;
            if r.dst.ip.octets() != cfg.local_ip {
                return Err(DropReason::NotForUs);
            }
            if r.dst.port != cfg.local_port {
                return Err(DropReason::WrongPort);
            }
            if r.src.port == 0
                || is_group_mac(r.src_mac.0)
                || !cfg.usable_unicast(r.src.ip.octets())
            {
                return Err(DropReason::BadSource);
            }
            let payload = buf.get(f.payload).ok_or(DropReason::Truncated)?;
            Ok(EthernetRx::Udp {
                src: r.src,
                payload,
            })
        }
        _ => Err(DropReason::OtherProtocol),
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

/// Sends one packet to `dst` on a UDP-medium link (the rules of
/// [`Net::send`](super::Net::send)); the payload length.
#[inline]
pub(super) fn send_udp<L: Link>(
    link: &mut L,
    dst: UdpAddr,
    len_hint: usize,
    write: impl FnOnce(&mut [u8]) -> usize,
) -> Result<usize> {
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

/// Sends one packet to `dst` through next hop `dst_mac` on an Ethernet link: `write`
/// puts the payload in place, then only headers and checksums are emitted around it.
/// Returns the payload length.
#[inline]
pub(super) fn send_ethernet<L: Link>(
    cfg: &NetConfig,
    link: &mut L,
    dst_mac: [u8; 6],
    dst: UdpAddr,
    len_hint: usize,
    write: impl FnOnce(&mut [u8]) -> usize,
) -> Result<usize> {
    let repr = UdpFrameRepr {
        src_mac: EthernetAddress(cfg.local_mac),
        dst_mac: EthernetAddress(dst_mac),
        src: cfg.local_addr(),
        dst,
        ttl: cfg.ttl,
    };
    let caps = cfg.checksum_caps();
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
