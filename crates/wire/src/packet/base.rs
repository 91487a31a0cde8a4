//! The base header every packet starts with: its constants, flag bits and type codes,
//! and the [`Header`] fields a [`Repr`](super::Repr) carries.

use zerocopy::network_endian::{U16, U32};

/// First two bytes of every packet, `"ON"` (ofi-nostd): lets a receiver reject stray
/// datagrams that happen to hit our port before looking at anything else.
pub const MAGIC: u16 = 0x4F4E;
/// The protocol version this crate implements.
pub const VERSION: u8 = 1;
/// Length of the base header every packet starts with.
pub const BASE_LEN: usize = 24;

/// The bit of `src_ep` / `dst_ep` where a scalable endpoint's context index starts
/// (spec 3.9): bits 0..10 name the endpoint, bits 10..16 its transmit or receive
/// context. An id with zero context bits names context 0 (or a plain endpoint).
pub const EP_CTX_SHIFT: u32 = 10;

/// Base-header flag bits. Unknown bits are rejected ([`Error::BadFlags`](crate::Error::BadFlags)) so that a
/// future meaning can never be silently ignored by a v1 receiver.
pub mod flags {
    /// The `checksum` field holds a CRC32C of the packet (the field itself as zero).
    pub const CRC: u16 = 0x0001;
    /// A 64-bit remote CQ data field follows the type header (and the tag, if any); on
    /// DGRAM, which has no type header, it follows the base header directly.
    pub const CQ_DATA: u16 = 0x0002;
    /// RTS only: a 64-bit tag follows the RTS header (a tagged rendezvous).
    pub const TAGGED: u16 = 0x0004;
    /// ATOMIC_REQ only: the initiator wants the original values back.
    pub const FETCH: u16 = 0x0008;
    /// The sender asks for an acknowledgement soon (within a short hold, so that a
    /// reply can carry it) or, on KEEPALIVE, a KEEPALIVE reply.
    pub const ACK_REQ: u16 = 0x0010;
    /// Sequenced types only: a piggybacked 24-byte ACK body ([`AckHeader`](super::super::AckHeader))
    /// follows the other optional fields, before the payload.
    pub const ACK: u16 = 0x0020;
    /// ACK packets, and sequenced types with `ACK`: the ACK body is in its 16-byte
    /// short form ([`ShortAckHeader`](super::super::ShortAckHeader): no `sack`, which is
    /// zero). Sent only to peers that announced [`caps::SHORT_ACK`](super::super::caps::SHORT_ACK).
    pub const SHORT_ACK: u16 = 0x0040;
    /// A 16-byte MAC trailer follows the packet, after `len` (spec 4.10). Session types
    /// but the handshake's (HELLO, HELLO_ACK, REJECT, RETRY); sent only to a peer that
    /// announced [`caps::AUTH_MAC`](super::super::caps::AUTH_MAC).
    pub const MAC: u16 = 0x0080;
    /// Every bit v1 defines.
    pub const ALL: u16 = CRC | CQ_DATA | TAGGED | FETCH | ACK_REQ | ACK | SHORT_ACK | MAC;
}

/// Operation status codes (CTS, READ_RESP, ATOMIC_RESP `status`). Nonzero means the
/// operation failed and no payload follows.
pub mod status {
    /// Success.
    pub const OK: u16 = 0;
    /// The remote key is unknown or revoked.
    pub const BAD_KEY: u16 = 1;
    /// The access is outside the registered region.
    pub const OUT_OF_RANGE: u16 = 2;
    /// The region does not allow this access.
    pub const ACCESS_DENIED: u16 = 3;
    /// Operation or datatype not supported.
    pub const UNSUPPORTED: u16 = 4;
    /// Out of resources.
    pub const NO_RESOURCES: u16 = 5;
    /// The receiver discarded the message (rendezvous cancelled or truncated to zero).
    pub const CANCELED: u16 = 6;
}

/// Packet type codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum PacketType {
    /// Handshake: open a session.
    Hello = 0x01,
    /// Handshake: accept a session.
    HelloAck = 0x02,
    /// Handshake: refuse a session.
    Reject = 0x03,
    /// Orderly close (sequenced: after all data).
    Close = 0x04,
    /// Abort / unknown session (unsequenced).
    Reset = 0x05,
    /// Liveness probe and RTT sample when idle.
    KeepAlive = 0x06,
    /// Cumulative + selective ack, credits.
    Ack = 0x07,
    /// Handshake: repeat the HELLO with this cookie (stateless responder).
    Retry = 0x08,
    /// An ACK with selective-ack ranges beyond its bitmap (capability `SACK_RANGES`).
    Sack = 0x09,
    /// Eager untagged message (segment).
    Msg = 0x10,
    /// Eager tagged message (segment).
    Tagged = 0x11,
    /// Rendezvous request-to-send.
    Rts = 0x12,
    /// Rendezvous clear-to-send.
    Cts = 0x13,
    /// Rendezvous data.
    Data = 0x14,
    /// Unreliable datagram of an FI_EP_DGRAM endpoint (no session, unsequenced, one
    /// packet per message).
    Dgram = 0x15,
    /// Several whole eager messages (MSG or TAGGED) in one sequenced packet.
    Bundle = 0x16,
    /// RMA write (segment).
    RmaWrite = 0x20,
    /// RMA read request.
    ReadReq = 0x21,
    /// RMA read response (segment).
    ReadResp = 0x22,
    /// Atomic request.
    AtomicReq = 0x23,
    /// Atomic response.
    AtomicResp = 0x24,
    /// FI_EP_MSG: connection request with CM data, to a passive endpoint.
    ConnReq = 0x30,
    /// FI_EP_MSG: the listener accepted (from the new endpoint, with CM data).
    Accept = 0x31,
    /// FI_EP_MSG: the listener refused (reason and CM data).
    CmReject = 0x32,
    /// FI_EP_MSG: the connector saw the ACCEPT (the accepter reports FI_CONNECTED).
    Established = 0x33,
    /// FI_EP_MSG: the connection ends (after every sequenced packet was acked).
    Shutdown = 0x34,
    /// FI_EP_MSG: the answer to SHUTDOWN.
    ShutdownAck = 0x35,
}

/// Type ranges reserved for later versions; a v1 receiver counts and drops them.
pub mod reserved_types {
    use core::ops::RangeInclusive;
    /// FI_EP_MSG connection management beyond the types v1 defines (0x30..=0x35).
    pub const CONNECTION_MANAGEMENT: RangeInclusive<u8> = 0x36..=0x3F;
    /// Collectives.
    pub const COLLECTIVES: RangeInclusive<u8> = 0x40..=0x4F;
    /// Congestion control (notifications, rate grants).
    pub const CONGESTION: RangeInclusive<u8> = 0x50..=0x5F;
    /// Experimental / vendor use, never on a production network.
    pub const EXPERIMENTAL: RangeInclusive<u8> = 0xF0..=0xFF;
}

impl PacketType {
    /// Decode a type byte; `None` for reserved and unknown values.
    pub const fn from_u8(v: u8) -> Option<Self> {
        use PacketType::*;
        Some(match v {
            0x01 => Hello,
            0x02 => HelloAck,
            0x03 => Reject,
            0x04 => Close,
            0x05 => Reset,
            0x06 => KeepAlive,
            0x07 => Ack,
            0x08 => Retry,
            0x09 => Sack,
            0x10 => Msg,
            0x11 => Tagged,
            0x12 => Rts,
            0x13 => Cts,
            0x14 => Data,
            0x15 => Dgram,
            0x16 => Bundle,
            0x20 => RmaWrite,
            0x21 => ReadReq,
            0x22 => ReadResp,
            0x23 => AtomicReq,
            0x24 => AtomicResp,
            0x30..=0x35 if !cfg!(feature = "cm") => return None,
            0x30 => ConnReq,
            0x31 => Accept,
            0x32 => CmReject,
            0x33 => Established,
            0x34 => Shutdown,
            0x35 => ShutdownAck,
            _ => return None,
        })
    }

    /// Whether this is a connection-management type (section 9, FI_EP_MSG).
    #[inline]
    pub const fn is_cm(self) -> bool {
        (self as u8) >> 4 == 0x3
    }

    /// Whether packets of this type consume a sequence number (are acked and
    /// retransmitted). The others carry the sender's next sequence number, unacked
    /// (DGRAM: the sender's datagram counter, informative only).
    pub const fn is_sequenced(self) -> bool {
        !matches!(
            self,
            PacketType::Hello
                | PacketType::HelloAck
                | PacketType::Reject
                | PacketType::Reset
                | PacketType::KeepAlive
                | PacketType::Ack
                | PacketType::Sack
                | PacketType::Retry
                | PacketType::Dgram
                | PacketType::ConnReq
                | PacketType::Accept
                | PacketType::CmReject
                | PacketType::Established
                | PacketType::Shutdown
                | PacketType::ShutdownAck
        )
    }

    /// Whether packets of this type may carry the per-packet MAC trailer (spec 4.10):
    /// every type of an established session, and the answers to a HELLO (REJECT,
    /// RETRY) under the answer key; not HELLO and HELLO_ACK (their proof is in the
    /// body), not DGRAM.
    pub const fn takes_mac(self) -> bool {
        !matches!(
            self,
            PacketType::Hello | PacketType::HelloAck | PacketType::Dgram
        )
    }

    /// Flag bits allowed on this type beyond `CRC` and `ACK_REQ` (`SHORT_ACK` only with
    /// `ACK`, except on ACK packets).
    pub(super) const fn extra_flags(self) -> u16 {
        let ack = if self.is_sequenced() {
            flags::ACK | flags::SHORT_ACK
        } else if matches!(self, PacketType::Ack) {
            flags::SHORT_ACK
        } else {
            0
        };
        let mac = if self.takes_mac() { flags::MAC } else { 0 };
        mac | ack
            | match self {
                PacketType::Msg | PacketType::Tagged | PacketType::RmaWrite | PacketType::Dgram => {
                    flags::CQ_DATA
                }
                PacketType::Rts => flags::CQ_DATA | flags::TAGGED,
                PacketType::AtomicReq => flags::CQ_DATA | flags::FETCH,
                _ => 0,
            }
    }
}

wire_struct!(
    /// The 24-byte header every packet starts with.
    BaseHeader {
        /// [`MAGIC`].
        magic: U16,
        /// [`VERSION`].
        version: u8,
        /// [`PacketType`] code.
        ptype: u8,
        /// [`flags`] bits.
        flags: U16,
        /// Length of the packet from the first byte of this header to the end of the
        /// payload; bytes after it in the datagram are ignored.
        len: U16,
        /// Sender's endpoint id.
        src_ep: U16,
        /// Receiver's endpoint id.
        dst_ep: U16,
        /// The receiver's session id for this peer (0 only in HELLO and DGRAM).
        session: U32,
        /// Sequence number (sequenced types), the sender's next sequence number (other
        /// session types) or the sender's datagram counter (DGRAM, informative).
        seq: U32,
        /// CRC32C when the `CRC` flag is set, else 0.
        checksum: U32,
    }
);

impl BaseHeader {
    /// The base header of a packet of type `ptype` with header fields `h`, flags `fl`
    /// and length `len`; the checksum zero (filled last, if at all).
    pub(super) fn new(h: &Header, ptype: PacketType, fl: u16, len: u16) -> BaseHeader {
        BaseHeader {
            magic: MAGIC.into(),
            version: VERSION,
            ptype: ptype as u8,
            flags: fl.into(),
            len: len.into(),
            src_ep: h.src_ep.into(),
            dst_ep: h.dst_ep.into(),
            session: h.session.into(),
            seq: h.seq.into(),
            checksum: 0.into(),
        }
    }
}

/// The base-header fields a [`Repr`](super::Repr) carries (type, version, length and the optional
/// field flags follow from the body).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Header {
    /// Sender's endpoint id.
    pub src_ep: u16,
    /// Receiver's endpoint id.
    pub dst_ep: u16,
    /// Receiver's session id (0 in HELLO and DGRAM).
    pub session: u32,
    /// Sequence number (DGRAM: the sender's datagram counter, informative only).
    pub seq: u32,
    /// Protect the packet with CRC32C.
    pub crc: bool,
    /// Ask for an immediate ACK.
    pub ack_req: bool,
}
