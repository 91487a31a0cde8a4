//! Packets of the ofi-nostd reliable-datagram protocol, version 1.
//!
//! Layout: a 24-byte [`BaseHeader`], then a fixed per-type header (one `zerocopy` struct
//! per type, all fields network byte order, no padding; DGRAM, the unreliable
//! FI_EP_DGRAM type, has none), then optional fields selected by flags (64-bit tag,
//! 64-bit remote CQ data, and on sequenced types a piggybacked 24-byte ACK body, or its
//! 16-byte short form without selective acks), then
//! the payload up to the base header's `len`. `docs/wire-protocol.md` is the normative
//! description; this module is checked against it by the crate's tests.
//!
//! Two levels, as in `smoltcp::wire`:
//! * [`Packet`] is a view over a buffer with raw getters/setters (no validation beyond
//!   [`Packet::check_len`]; getters on a too-short buffer return 0, never panic);
//! * [`Repr`] is a fully validated, high-level representation: [`Repr::parse`] accepts
//!   only packets the specification allows and [`Repr::emit`] refuses to write any
//!   other, so `parse(emit(r)) == r` for every representation that emits.

use zerocopy::network_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::crc32c::Crc32c;
use crate::{Error, Result};

/// First two bytes of every packet, `"ON"` (ofi-nostd): lets a receiver reject stray
/// datagrams that happen to hit our port before looking at anything else.
pub const MAGIC: u16 = 0x4F4E;
/// The protocol version this crate implements.
pub const VERSION: u8 = 1;
/// Length of the base header every packet starts with.
pub const BASE_LEN: usize = 24;
/// Smallest `max_pkt` a peer may announce: every fixed header plus optional fields fits.
pub const MIN_MAX_PKT: u16 = 256;
/// Length of the handshake proof of the auth key (HMAC-SHA-256 output).
pub const MAC_LEN: usize = 32;
/// Auth algorithm id for "no proof" in hello / hello-ack.
pub const AUTH_NONE: u8 = 0;
/// Auth algorithm id for HMAC-SHA-256 over the handshake transcript (see the spec).
pub const AUTH_HMAC_SHA256: u8 = 1;

/// Base-header flag bits. Unknown bits are rejected ([`Error::BadFlags`]) so that a
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
    /// Sequenced types only: a piggybacked 24-byte ACK body ([`AckHeader`](super::AckHeader))
    /// follows the other optional fields, before the payload.
    pub const ACK: u16 = 0x0020;
    /// ACK packets, and sequenced types with `ACK`: the ACK body is in its 16-byte
    /// short form ([`ShortAckHeader`](super::ShortAckHeader): no `sack`, which is
    /// zero). Sent only to peers that announced [`caps::SHORT_ACK`](super::caps::SHORT_ACK).
    pub const SHORT_ACK: u16 = 0x0040;
    /// Every bit v1 defines.
    pub const ALL: u16 = CRC | CQ_DATA | TAGGED | FETCH | ACK_REQ | ACK | SHORT_ACK;
}

/// Capability bits exchanged in hello / hello-ack. A session uses the intersection;
/// unknown bits are ignored (capabilities are negotiation, not format).
pub mod caps {
    /// Untagged messages.
    pub const MSG: u64 = 1 << 0;
    /// Tagged messages.
    pub const TAGGED: u64 = 1 << 1;
    /// RMA read and write.
    pub const RMA: u64 = 1 << 2;
    /// Atomics.
    pub const ATOMIC: u64 = 1 << 3;
    /// Remote CQ data.
    pub const CQ_DATA: u64 = 1 << 4;
    /// Rendezvous for large messages.
    pub const RNDV: u64 = 1 << 5;
    /// The sender can verify CRC32C and wants it on every packet it receives.
    pub const CRC_RX: u64 = 1 << 6;
    /// In-order delivery of messages (FI_ORDER_SAS and friends) is supported.
    pub const ORDERED: u64 = 1 << 7;
    /// The receiver takes BUNDLE packets (several whole small messages in one packet).
    pub const BUNDLE: u64 = 1 << 8;
    /// The receiver takes ACK bodies in their short form (flag `SHORT_ACK`).
    pub const SHORT_ACK: u64 = 1 << 9;
}

/// Reject reason codes (REJECT `reason`). Unknown values are accepted and reported.
pub mod reject {
    /// No version in common; the reject carries the rejecter's range.
    pub const VERSION: u16 = 1;
    /// The auth proof was missing or wrong.
    pub const AUTH_FAILED: u16 = 2;
    /// No peer slot or buffers left (retry later).
    pub const NO_RESOURCES: u16 = 3;
    /// The destination endpoint id does not exist.
    pub const NO_ENDPOINT: u16 = 4;
    /// Window, `max_pkt` or capabilities unacceptable.
    pub const BAD_PARAMETERS: u16 = 5;
}

/// CLOSE / RESET reason codes. Unknown values are accepted and reported.
pub mod close {
    /// Orderly close by the application.
    pub const NORMAL: u16 = 0;
    /// The peer was idle for too long.
    pub const IDLE_TIMEOUT: u16 = 1;
    /// The peer violated the protocol.
    pub const PROTOCOL_ERROR: u16 = 2;
    /// A packet arrived for a session the receiver does not know.
    pub const UNKNOWN_SESSION: u16 = 3;
    /// Retransmissions exhausted.
    pub const RETRY_EXHAUSTED: u16 = 4;
    /// The endpoint is being destroyed.
    pub const SHUTDOWN: u16 = 5;
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
}

/// Type ranges reserved for later versions; a v1 receiver counts and drops them.
pub mod reserved_types {
    use core::ops::RangeInclusive;
    /// FI_EP_MSG connection management (connreq, connresp, shutdown with CM data).
    pub const CONNECTION_MANAGEMENT: RangeInclusive<u8> = 0x30..=0x3F;
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
            _ => return None,
        })
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
                | PacketType::Dgram
        )
    }

    /// Flag bits allowed on this type beyond `CRC` and `ACK_REQ` (`SHORT_ACK` only with
    /// `ACK`, except on ACK packets).
    const fn extra_flags(self) -> u16 {
        let ack = if self.is_sequenced() {
            flags::ACK | flags::SHORT_ACK
        } else if matches!(self, PacketType::Ack) {
            flags::SHORT_ACK
        } else {
            0
        };
        ack | match self {
            PacketType::Msg | PacketType::Tagged | PacketType::RmaWrite | PacketType::Dgram => {
                flags::CQ_DATA
            }
            PacketType::Rts => flags::CQ_DATA | flags::TAGGED,
            PacketType::AtomicReq => flags::CQ_DATA | flags::FETCH,
            _ => 0,
        }
    }
}

/// Atomic operations (values are libfabric's `enum fi_op`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[allow(missing_docs)] // the names are libfabric's FI_* operations
pub enum AtomicOp {
    Min = 0,
    Max = 1,
    Sum = 2,
    Prod = 3,
    Lor = 4,
    Land = 5,
    Bor = 6,
    Band = 7,
    Lxor = 8,
    Bxor = 9,
    Read = 10,
    Write = 11,
    Cswap = 12,
    CswapNe = 13,
    CswapLe = 14,
    CswapLt = 15,
    CswapGe = 16,
    CswapGt = 17,
    Mswap = 18,
}

impl AtomicOp {
    /// Decode; `None` for values v1 does not define.
    pub const fn from_u8(v: u8) -> Option<Self> {
        use AtomicOp::*;
        const ALL: [AtomicOp; 19] = [
            Min, Max, Sum, Prod, Lor, Land, Bor, Band, Lxor, Bxor, Read, Write, Cswap, CswapNe,
            CswapLe, CswapLt, CswapGe, CswapGt, Mswap,
        ];
        if (v as usize) < ALL.len() {
            Some(ALL[v as usize])
        } else {
            None
        }
    }

    /// How many operand arrays of `count` elements the request carries: 0 for read,
    /// 2 (compare/mask, then swap) for the compare ops, 1 otherwise.
    pub const fn operand_arrays(self) -> usize {
        match self as u8 {
            10 => 0,
            12..=18 => 2,
            _ => 1,
        }
    }

    /// Whether the op always returns the original values (so `FETCH` is mandatory).
    pub const fn always_fetches(self) -> bool {
        matches!(self as u8, 10 | 12..=18)
    }
}

/// Atomic datatypes (values are libfabric's `enum fi_datatype`; long double is not
/// carried by v1 because its size is not portable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[allow(missing_docs)] // the names are libfabric's FI_* datatypes
pub enum AtomicDatatype {
    I8 = 0,
    U8 = 1,
    I16 = 2,
    U16 = 3,
    I32 = 4,
    U32 = 5,
    I64 = 6,
    U64 = 7,
    F32 = 8,
    F64 = 9,
    ComplexF32 = 10,
    ComplexF64 = 11,
}

impl AtomicDatatype {
    /// Decode; `None` for values v1 does not define.
    pub const fn from_u8(v: u8) -> Option<Self> {
        use AtomicDatatype::*;
        const ALL: [AtomicDatatype; 12] = [
            I8, U8, I16, U16, I32, U32, I64, U64, F32, F64, ComplexF32, ComplexF64,
        ];
        if (v as usize) < ALL.len() {
            Some(ALL[v as usize])
        } else {
            None
        }
    }

    /// Size of one element on the wire (big-endian, complex = real then imaginary).
    pub const fn size(self) -> usize {
        match self {
            AtomicDatatype::I8 | AtomicDatatype::U8 => 1,
            AtomicDatatype::I16 | AtomicDatatype::U16 => 2,
            AtomicDatatype::I32 | AtomicDatatype::U32 | AtomicDatatype::F32 => 4,
            AtomicDatatype::I64
            | AtomicDatatype::U64
            | AtomicDatatype::F64
            | AtomicDatatype::ComplexF32 => 8,
            AtomicDatatype::ComplexF64 => 16,
        }
    }
}

// ---------------------------------------------------------------------------------------
// Fixed headers (zerocopy). Field order is wire order.
// ---------------------------------------------------------------------------------------

macro_rules! wire_struct {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $f:ident : $t:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned, Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(C)]
        pub struct $name { $($(#[$fm])* pub $f: $t),* }
    };
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

wire_struct!(
    /// HELLO and HELLO_ACK body (36 bytes, then the MAC if any).
    HelloHeader {
        /// Lowest protocol version the sender speaks (HELLO_ACK: the chosen version).
        ver_min: u8,
        /// Highest protocol version the sender speaks (HELLO_ACK: the chosen version).
        ver_max: u8,
        /// [`AUTH_NONE`] or [`AUTH_HMAC_SHA256`]; selects the MAC length.
        auth_alg: u8,
        /// Zero.
        reserved: u8,
        /// Session id the sender wants in the `session` field of packets it receives.
        rx_session: U32,
        /// Sequence number of the sender's first sequenced packet.
        isn: U32,
        /// Receive window in packets (reorder buffer).
        window: U16,
        /// Largest packet (base header to end of payload) the sender accepts.
        max_pkt: U16,
        /// Initial flow-control credits in packets.
        credits: U32,
        /// [`caps`] bits.
        caps: U64,
        /// Fresh random nonce for the auth proof.
        nonce: U64,
    }
);

wire_struct!(
    /// REJECT body.
    RejectHeader {
        /// [`reject`] reason.
        reason: U16,
        /// Rejecter's lowest version.
        ver_min: u8,
        /// Rejecter's highest version.
        ver_max: u8,
    }
);

wire_struct!(
    /// CLOSE and RESET body.
    CloseHeader {
        /// [`close`] reason.
        reason: U16,
        /// Zero.
        reserved: U16,
    }
);

wire_struct!(
    /// KEEPALIVE body.
    KeepAliveHeader {
        /// Sender's clock, microseconds, wrapping.
        ts: U32,
        /// The latest `ts` received from the peer (0 if none).
        echo_ts: U32,
    }
);

wire_struct!(
    /// ACK body.
    AckHeader {
        /// Next sequence number the receiver expects (everything before is received).
        cum_ack: U32,
        /// Flow-control grant: the sender may have sequence numbers up to
        /// `cum_ack + credits - 1` in flight.
        credits: U32,
        /// Selective acks: bit i acknowledges `cum_ack + 1 + i`.
        sack: U64,
        /// Sender's clock, microseconds, wrapping.
        ts: U32,
        /// The latest `ts` received from the peer (0 if none).
        echo_ts: U32,
    }
);

wire_struct!(
    /// The ACK body's short form (flag `SHORT_ACK`): the ACK body without `sack`.
    ShortAckHeader {
        /// Next sequence number the receiver expects (everything before is received).
        cum_ack: U32,
        /// Flow-control grant.
        credits: U32,
        /// Sender's clock, microseconds, wrapping.
        ts: U32,
        /// The latest `ts` received from the peer (0 if none).
        echo_ts: U32,
    }
);

wire_struct!(
    /// MSG and TAGGED body (then tag if TAGGED, CQ data if flagged, payload).
    MsgHeader {
        /// Sender's message id (groups segments; unique among the sender's messages in flight).
        msg_id: U32,
        /// Length of the whole message.
        total_len: U32,
        /// Offset of this segment's payload in the message.
        offset: U32,
    }
);

wire_struct!(
    /// RTS body (then tag if `TAGGED`, CQ data if `CQ_DATA`; no payload).
    RtsHeader {
        /// Sender's rendezvous operation id, echoed by CTS.
        op_id: U32,
        /// Sender's message id (for ordering with eager messages).
        msg_id: U32,
        /// Length of the whole message.
        total_len: U64,
    }
);

wire_struct!(
    /// CTS body (no payload).
    CtsHeader {
        /// The RTS's `op_id`.
        rts_op_id: U32,
        /// Receiver's operation id, carried by DATA.
        rx_op_id: U32,
        /// First byte granted.
        offset: U64,
        /// Bytes granted from `offset`.
        len: U32,
        /// [`status`]; nonzero cancels the rendezvous and requires `len` = 0.
        status: U16,
        /// Zero.
        reserved: U16,
    }
);

wire_struct!(
    /// Rendezvous DATA body (then payload).
    DataHeader {
        /// The CTS's `rx_op_id`.
        rx_op_id: U32,
        /// Offset of this payload in the message.
        offset: U64,
    }
);

wire_struct!(
    /// RMA_WRITE body (then CQ data if flagged, payload).
    RmaWriteHeader {
        /// Remote memory key.
        key: U64,
        /// Target address of the first byte of the whole operation.
        addr: U64,
        /// Initiator's operation id (groups segments).
        op_id: U32,
        /// Length of the whole operation.
        total_len: U64,
        /// Offset of this segment in the operation.
        offset: U64,
    }
);

wire_struct!(
    /// READ_REQ body (no payload).
    ReadReqHeader {
        /// Remote memory key.
        key: U64,
        /// Address of the first byte to read.
        addr: U64,
        /// Bytes to read.
        len: U64,
        /// Initiator's operation id, echoed by READ_RESP.
        op_id: U32,
    }
);

wire_struct!(
    /// READ_RESP body (then payload).
    ReadRespHeader {
        /// The READ_REQ's `op_id`.
        op_id: U32,
        /// [`status`]; nonzero means no payload.
        status: U16,
        /// Zero.
        reserved: U16,
        /// Offset of this payload in the read.
        offset: U64,
    }
);

wire_struct!(
    /// ATOMIC_REQ body (then CQ data if flagged, operands).
    AtomicReqHeader {
        /// Remote memory key.
        key: U64,
        /// Address of the first element.
        addr: U64,
        /// Initiator's operation id, echoed by ATOMIC_RESP.
        op_id: U32,
        /// [`AtomicOp`] code.
        op: u8,
        /// [`AtomicDatatype`] code.
        datatype: u8,
        /// Number of elements (at least 1).
        count: U16,
    }
);

wire_struct!(
    /// BUNDLE body (then the piggybacked ACK if flagged, then `count` records).
    BundleHeader {
        /// Number of records (at least 1).
        count: U16,
        /// Zero.
        reserved: U16,
    }
);

wire_struct!(
    /// The header of one BUNDLE record (then tag, CQ data and payload).
    BundleRecHeader {
        /// Message id (5.5): the first record's plus the record's index.
        msg_id: U32,
        /// Payload bytes (the whole message).
        len: U16,
        /// [`bundle_rec`] bits.
        flags: u8,
        /// Zero.
        reserved: u8,
    }
);

/// Flag bits of a BUNDLE record.
pub mod bundle_rec {
    /// An 8-byte tag follows the record header (a tagged message).
    pub const TAGGED: u8 = 0x01;
    /// An 8-byte `cq_data` follows (after the tag, if any).
    pub const CQ_DATA: u8 = 0x02;
    /// Every defined bit.
    pub const ALL: u8 = TAGGED | CQ_DATA;
}

wire_struct!(
    /// ATOMIC_RESP body (then fetched values, if any).
    AtomicRespHeader {
        /// The ATOMIC_REQ's `op_id`.
        op_id: U32,
        /// [`status`]; nonzero means no payload.
        status: U16,
        /// Zero.
        reserved: U16,
    }
);

/// Length of a type's fixed header (after the base header).
pub mod hdr_len {
    use super::*;
    use core::mem::size_of;
    /// HELLO / HELLO_ACK (without MAC).
    pub const HELLO: usize = size_of::<HelloHeader>();
    /// REJECT.
    pub const REJECT: usize = size_of::<RejectHeader>();
    /// CLOSE / RESET.
    pub const CLOSE: usize = size_of::<CloseHeader>();
    /// KEEPALIVE.
    pub const KEEPALIVE: usize = size_of::<KeepAliveHeader>();
    /// ACK.
    pub const ACK: usize = size_of::<AckHeader>();
    /// ACK body in its short form (flag `SHORT_ACK`).
    pub const SHORT_ACK: usize = size_of::<ShortAckHeader>();
    /// MSG / TAGGED (without tag and CQ data).
    pub const MSG: usize = size_of::<MsgHeader>();
    /// RTS (without tag and CQ data).
    pub const RTS: usize = size_of::<RtsHeader>();
    /// CTS.
    pub const CTS: usize = size_of::<CtsHeader>();
    /// DATA.
    pub const DATA: usize = size_of::<DataHeader>();
    /// RMA_WRITE (without CQ data).
    pub const RMA_WRITE: usize = size_of::<RmaWriteHeader>();
    /// READ_REQ.
    pub const READ_REQ: usize = size_of::<ReadReqHeader>();
    /// READ_RESP.
    pub const READ_RESP: usize = size_of::<ReadRespHeader>();
    /// ATOMIC_REQ (without CQ data).
    pub const ATOMIC_REQ: usize = size_of::<AtomicReqHeader>();
    /// ATOMIC_RESP.
    pub const ATOMIC_RESP: usize = size_of::<AtomicRespHeader>();
    /// DGRAM: no type header (CQ data, if any, follows the base header).
    pub const DGRAM: usize = 0;
    /// BUNDLE (without ACK and records).
    pub const BUNDLE: usize = size_of::<BundleHeader>();
    /// One BUNDLE record's header (without tag and CQ data).
    pub const BUNDLE_REC: usize = size_of::<BundleRecHeader>();
}

const _: () = {
    assert!(core::mem::size_of::<BaseHeader>() == BASE_LEN);
    assert!(hdr_len::HELLO == 36);
    assert!(hdr_len::ACK == 24);
    assert!(hdr_len::SHORT_ACK == 16);
    assert!(hdr_len::MSG == 12);
    assert!(hdr_len::RTS == 16);
    assert!(hdr_len::CTS == 24);
    assert!(hdr_len::DATA == 12);
    assert!(hdr_len::RMA_WRITE == 36);
    assert!(hdr_len::READ_REQ == 28);
    assert!(hdr_len::READ_RESP == 16);
    assert!(hdr_len::ATOMIC_REQ == 24);
    assert!(hdr_len::ATOMIC_RESP == 8);
    assert!(hdr_len::DGRAM == 0);
    assert!(hdr_len::BUNDLE == 4);
    assert!(hdr_len::BUNDLE_REC == 8);
};

/// Largest eager MSG/TAGGED payload in a packet of at most `max_pkt` bytes.
pub const fn max_msg_payload(max_pkt: usize, tagged: bool, cq_data: bool) -> usize {
    let h = BASE_LEN + hdr_len::MSG + if tagged { 8 } else { 0 } + if cq_data { 8 } else { 0 };
    max_pkt.saturating_sub(h)
}

/// Largest rendezvous DATA payload in a packet of at most `max_pkt` bytes.
pub const fn max_data_payload(max_pkt: usize) -> usize {
    max_pkt.saturating_sub(BASE_LEN + hdr_len::DATA)
}

/// Largest RMA_WRITE payload in a packet of at most `max_pkt` bytes.
pub const fn max_rma_write_payload(max_pkt: usize, cq_data: bool) -> usize {
    max_pkt.saturating_sub(BASE_LEN + hdr_len::RMA_WRITE + if cq_data { 8 } else { 0 })
}

/// Largest READ_RESP payload in a packet of at most `max_pkt` bytes.
pub const fn max_read_resp_payload(max_pkt: usize) -> usize {
    max_pkt.saturating_sub(BASE_LEN + hdr_len::READ_RESP)
}

/// Largest DGRAM payload in a packet of at most `max_pkt` bytes. DGRAM is never
/// segmented, so this is also the largest message an FI_EP_DGRAM endpoint can send on a
/// path whose packets are limited to `max_pkt` bytes.
pub const fn max_dgram_payload(max_pkt: usize, cq_data: bool) -> usize {
    max_pkt.saturating_sub(BASE_LEN + hdr_len::DGRAM + if cq_data { 8 } else { 0 })
}

// ---------------------------------------------------------------------------------------
// Packet view
// ---------------------------------------------------------------------------------------

/// A read/write view of a packet buffer, in the style of `smoltcp::wire`.
///
/// Getters read the base header; on a buffer shorter than [`BASE_LEN`] they return 0
/// (and setters do nothing) instead of panicking, so even an unchecked view is safe on
/// network data. Use [`Packet::new_checked`] or [`Repr::parse`] before trusting values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking anything.
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Wrap a buffer and [`check_len`](Self::check_len) it.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Packet { buffer };
        p.check_len()?;
        Ok(p)
    }

    /// Check that the buffer holds a base header and the whole packet its `len` field
    /// announces. After this, [`body`](Self::body) covers exactly the packet's body.
    pub fn check_len(&self) -> Result<()> {
        let buf = self.buffer.as_ref();
        if buf.len() < BASE_LEN {
            return Err(Error::Truncated);
        }
        let len = self.packet_len() as usize;
        if len < BASE_LEN {
            return Err(Error::BadLength);
        }
        if len > buf.len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Unwrap the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The base header, if the buffer is long enough.
    pub fn header(&self) -> Option<&BaseHeader> {
        BaseHeader::ref_from_prefix(self.buffer.as_ref())
            .ok()
            .map(|(h, _)| h)
    }

    /// `magic` field.
    pub fn magic(&self) -> u16 {
        self.header().map_or(0, |h| h.magic.get())
    }
    /// `version` field.
    pub fn version(&self) -> u8 {
        self.header().map_or(0, |h| h.version)
    }
    /// Raw `type` field.
    pub fn packet_type_raw(&self) -> u8 {
        self.header().map_or(0, |h| h.ptype)
    }
    /// `type` field decoded; `None` if reserved or unknown.
    pub fn packet_type(&self) -> Option<PacketType> {
        PacketType::from_u8(self.packet_type_raw())
    }
    /// `flags` field.
    pub fn flags(&self) -> u16 {
        self.header().map_or(0, |h| h.flags.get())
    }
    /// `len` field (whole packet length).
    pub fn packet_len(&self) -> u16 {
        self.header().map_or(0, |h| h.len.get())
    }
    /// `src_ep` field.
    pub fn src_ep(&self) -> u16 {
        self.header().map_or(0, |h| h.src_ep.get())
    }
    /// `dst_ep` field.
    pub fn dst_ep(&self) -> u16 {
        self.header().map_or(0, |h| h.dst_ep.get())
    }
    /// `session` field.
    pub fn session(&self) -> u32 {
        self.header().map_or(0, |h| h.session.get())
    }
    /// `seq` field.
    pub fn seq(&self) -> u32 {
        self.header().map_or(0, |h| h.seq.get())
    }
    /// `checksum` field.
    pub fn checksum(&self) -> u32 {
        self.header().map_or(0, |h| h.checksum.get())
    }

    /// The bytes after the base header up to `len` (empty if the lengths are invalid).
    pub fn body(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        let end = (self.packet_len() as usize).min(buf.len());
        buf.get(BASE_LEN..end).unwrap_or(&[])
    }

    /// The CRC32C the `checksum` field should hold: over the first `len` bytes with the
    /// checksum field taken as zero. Call after [`check_len`](Self::check_len).
    pub fn compute_checksum(&self) -> u32 {
        let buf = self.buffer.as_ref();
        let end = (self.packet_len() as usize).min(buf.len());
        let mut c = Crc32c::new();
        c.update(buf.get(..20).unwrap_or(&[]));
        c.update(&[0; 4]);
        c.update(buf.get(BASE_LEN..end).unwrap_or(&[]));
        c.finish()
    }

    /// Whether the CRC flag is clear, or set and the checksum matches.
    pub fn verify_checksum(&self) -> bool {
        self.flags() & flags::CRC == 0 || self.compute_checksum() == self.checksum()
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Like [`body`](Packet::body) but borrowing for the buffer's lifetime, so a parsed
    /// [`Repr`] can point into the receive buffer.
    pub fn body_ref(&self) -> &'a [u8] {
        let buf: &'a [u8] = self.buffer.as_ref();
        let end = (self.packet_len() as usize).min(buf.len());
        buf.get(BASE_LEN..end).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn header_mut(&mut self) -> Option<&mut BaseHeader> {
        BaseHeader::mut_from_prefix(self.buffer.as_mut())
            .ok()
            .map(|(h, _)| h)
    }
    /// Set `magic`.
    pub fn set_magic(&mut self, v: u16) {
        if let Some(h) = self.header_mut() {
            h.magic.set(v)
        }
    }
    /// Set `version`.
    pub fn set_version(&mut self, v: u8) {
        if let Some(h) = self.header_mut() {
            h.version = v
        }
    }
    /// Set `type`.
    pub fn set_packet_type(&mut self, v: PacketType) {
        if let Some(h) = self.header_mut() {
            h.ptype = v as u8
        }
    }
    /// Set `flags`.
    pub fn set_flags(&mut self, v: u16) {
        if let Some(h) = self.header_mut() {
            h.flags.set(v)
        }
    }
    /// Set `len`.
    pub fn set_packet_len(&mut self, v: u16) {
        if let Some(h) = self.header_mut() {
            h.len.set(v)
        }
    }
    /// Set `src_ep`.
    pub fn set_src_ep(&mut self, v: u16) {
        if let Some(h) = self.header_mut() {
            h.src_ep.set(v)
        }
    }
    /// Set `dst_ep`.
    pub fn set_dst_ep(&mut self, v: u16) {
        if let Some(h) = self.header_mut() {
            h.dst_ep.set(v)
        }
    }
    /// Set `session`.
    pub fn set_session(&mut self, v: u32) {
        if let Some(h) = self.header_mut() {
            h.session.set(v)
        }
    }
    /// Set `seq`.
    pub fn set_seq(&mut self, v: u32) {
        if let Some(h) = self.header_mut() {
            h.seq.set(v)
        }
    }
    /// Set `checksum`.
    pub fn set_checksum(&mut self, v: u32) {
        if let Some(h) = self.header_mut() {
            h.checksum.set(v)
        }
    }
    /// Mutable body (after the base header, up to `len`).
    pub fn body_mut(&mut self) -> &mut [u8] {
        let end = self.packet_len() as usize;
        let buf = self.buffer.as_mut();
        let end = end.min(buf.len());
        buf.get_mut(BASE_LEN..end).unwrap_or(&mut [])
    }
    /// Write the CRC32C into `checksum` if the CRC flag is set, else zero it. Call after
    /// everything else (including the payload) has been written.
    pub fn fill_checksum(&mut self) {
        let c = if self.flags() & flags::CRC != 0 {
            self.compute_checksum()
        } else {
            0
        };
        self.set_checksum(c);
    }
}

// ---------------------------------------------------------------------------------------
// Repr
// ---------------------------------------------------------------------------------------

/// The base-header fields a [`Repr`] carries (type, version, length and the optional
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

/// HELLO / HELLO_ACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HelloRepr {
    /// Lowest version spoken (HELLO_ACK: chosen version, equal to `ver_max`).
    pub ver_min: u8,
    /// Highest version spoken (HELLO_ACK: chosen version).
    pub ver_max: u8,
    /// Session id the sender wants to receive (nonzero).
    pub rx_session: u32,
    /// Initial sequence number.
    pub isn: u32,
    /// Receive window in packets (nonzero).
    pub window: u16,
    /// Largest packet accepted (at least [`MIN_MAX_PKT`]).
    pub max_pkt: u16,
    /// Initial credits in packets.
    pub credits: u32,
    /// [`caps`] bits.
    pub caps: u64,
    /// Nonce for the auth proof.
    pub nonce: u64,
    /// HMAC-SHA-256 proof of the domain's auth key ([`AUTH_HMAC_SHA256`]) or none.
    pub mac: Option<[u8; MAC_LEN]>,
}

/// REJECT.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RejectRepr {
    /// [`reject`] reason.
    pub reason: u16,
    /// Rejecter's lowest version.
    pub ver_min: u8,
    /// Rejecter's highest version.
    pub ver_max: u8,
}

/// CLOSE / RESET (`ack` only on CLOSE: RESET is not sequenced).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CloseRepr {
    /// [`close`] reason.
    pub reason: u16,
    /// Piggybacked acknowledgement (flag `ACK`): the ACK body, after the other optional
    /// fields and before the payload.
    pub ack: Option<AckRepr>,
}

/// KEEPALIVE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeepAliveRepr {
    /// Sender's clock (µs, wrapping).
    pub ts: u32,
    /// Latest peer `ts` seen.
    pub echo_ts: u32,
}

/// ACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AckRepr {
    /// Next expected sequence number.
    pub cum_ack: u32,
    /// Credits (packets beyond `cum_ack - 1` the sender may have in flight).
    pub credits: u32,
    /// Selective-ack bitmap, bit i = `cum_ack + 1 + i`.
    pub sack: u64,
    /// Sender's clock (µs, wrapping).
    pub ts: u32,
    /// Latest peer `ts` seen.
    pub echo_ts: u32,
    /// Sent in the 16-byte short form (flag `SHORT_ACK`), which has no `sack`: only
    /// with `sack == 0`, to a peer that announced [`caps::SHORT_ACK`].
    pub short: bool,
}

impl AckRepr {
    /// Bytes of the ACK body on the wire (as an ACK packet's body or piggybacked).
    pub const fn wire_len(&self) -> usize {
        if self.short {
            hdr_len::SHORT_ACK
        } else {
            hdr_len::ACK
        }
    }

    /// The base-header flags a piggybacked `ack` sets.
    const fn piggyback_flags(ack: Option<&AckRepr>) -> u16 {
        match ack {
            Some(a) if a.short => flags::ACK | flags::SHORT_ACK,
            Some(_) => flags::ACK,
            None => 0,
        }
    }

    /// [`Error::BadFlags`] for a short form with selective acks (it has no `sack`).
    fn check(ack: Option<&AckRepr>) -> Result<()> {
        match ack {
            Some(a) if a.short && a.sack != 0 => Err(Error::BadFlags),
            _ => Ok(()),
        }
    }
}

/// MSG (untagged, `tag == None`) or TAGGED segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MsgRepr<'a> {
    /// Message id.
    pub msg_id: u32,
    /// Whole message length.
    pub total_len: u32,
    /// Offset of `payload` in the message.
    pub offset: u32,
    /// Tag (TAGGED type) or none (MSG type).
    pub tag: Option<u64>,
    /// Remote CQ data (only meaningful on the segment at offset 0, but carried on all).
    pub cq_data: Option<u64>,
    /// Segment bytes; `offset + payload.len() <= total_len`.
    pub payload: &'a [u8],
    /// Piggybacked acknowledgement (flag `ACK`): the ACK body, after the other optional
    /// fields and before the payload.
    pub ack: Option<AckRepr>,
}

impl MsgRepr<'_> {
    /// The length of the packet's headers: base header, MSG header, tag, CQ data and
    /// piggybacked ACK (everything before the payload).
    pub const fn header_len(&self) -> usize {
        let tag = if self.tag.is_some() { 8 } else { 0 };
        let data = if self.cq_data.is_some() { 8 } else { 0 };
        let ack = match &self.ack {
            Some(a) => a.wire_len(),
            None => 0,
        };
        BASE_LEN + hdr_len::MSG + tag + data + ack
    }
}

/// BUNDLE: `count` whole eager messages with consecutive message ids, in order.
/// `records` holds them as on the wire (validated by parse and emit); read them with
/// [`BundleRepr::msgs`], write them with [`emit_bundle_record`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BundleRepr<'a> {
    /// Number of records.
    pub count: u16,
    /// The records' bytes.
    pub records: &'a [u8],
    /// Piggybacked acknowledgement (flag `ACK`), before the records.
    pub ack: Option<AckRepr>,
}

/// One message of a BUNDLE: a whole MSG (`tag == None`) or TAGGED message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BundleMsg<'a> {
    /// Message id.
    pub msg_id: u32,
    /// Tag (a tagged message) or none.
    pub tag: Option<u64>,
    /// Remote CQ data.
    pub cq_data: Option<u64>,
    /// The whole message.
    pub payload: &'a [u8],
}

impl BundleMsg<'_> {
    /// The record's length on the wire.
    pub const fn record_len(&self) -> usize {
        bundle_record_len(
            self.tag.is_some(),
            self.cq_data.is_some(),
            self.payload.len(),
        )
    }

    /// The message as the single segment of a MSG/TAGGED packet would carry it.
    pub const fn as_msg(&self) -> MsgRepr<'_> {
        MsgRepr {
            msg_id: self.msg_id,
            total_len: self.payload.len() as u32,
            offset: 0,
            tag: self.tag,
            cq_data: self.cq_data,
            payload: self.payload,
            ack: None,
        }
    }
}

/// The length of a BUNDLE record: header, tag, CQ data and `payload_len` bytes.
pub const fn bundle_record_len(tagged: bool, cq_data: bool, payload_len: usize) -> usize {
    hdr_len::BUNDLE_REC + if tagged { 8 } else { 0 } + if cq_data { 8 } else { 0 } + payload_len
}

impl<'a> BundleRepr<'a> {
    /// The messages, in order. The records are validated (parse, or emit's check), so
    /// this yields exactly `count` of them; unvalidated bytes stop it at the first
    /// malformed record.
    pub fn msgs(&self) -> BundleMsgs<'a> {
        BundleMsgs {
            rest: self.records,
            left: self.count,
        }
    }

    /// Checks the records: `count` of them (at least one), well formed, consecutive
    /// message ids, filling `records` exactly.
    fn check(&self) -> Result<()> {
        if self.count == 0 {
            return Err(Error::Malformed);
        }
        let mut it = BundleMsgs {
            rest: self.records,
            left: self.count,
        };
        let mut next_id = None;
        for _ in 0..self.count {
            let m = it.next_checked()?;
            if next_id.is_some_and(|id| id != m.msg_id) {
                return Err(Error::Malformed);
            }
            next_id = Some(m.msg_id.wrapping_add(1));
        }
        if it.rest.is_empty() {
            Ok(())
        } else {
            Err(Error::BadLength)
        }
    }
}

/// Iterator over the messages of a [`BundleRepr`].
#[derive(Debug, Clone)]
pub struct BundleMsgs<'a> {
    rest: &'a [u8],
    left: u16,
}

impl<'a> BundleMsgs<'a> {
    fn next_checked(&mut self) -> Result<BundleMsg<'a>> {
        let mut r = Reader {
            buf: self.rest,
            short_ack: false,
        };
        let h = r.take::<BundleRecHeader>().map_err(|_| Error::BadLength)?;
        if h.flags & !bundle_rec::ALL != 0 || h.reserved != 0 {
            return Err(Error::Malformed);
        }
        let tag = r
            .opt_u64(h.flags & bundle_rec::TAGGED != 0)
            .map_err(|_| Error::BadLength)?;
        let cq_data = r
            .opt_u64(h.flags & bundle_rec::CQ_DATA != 0)
            .map_err(|_| Error::BadLength)?;
        let n = h.len.get() as usize;
        if r.buf.len() < n {
            return Err(Error::BadLength);
        }
        let (payload, rest) = r.buf.split_at(n);
        self.rest = rest;
        self.left = self.left.saturating_sub(1);
        Ok(BundleMsg {
            msg_id: h.msg_id.get(),
            tag,
            cq_data,
            payload,
        })
    }
}

impl<'a> Iterator for BundleMsgs<'a> {
    type Item = BundleMsg<'a>;

    fn next(&mut self) -> Option<BundleMsg<'a>> {
        if self.left == 0 {
            return None;
        }
        match self.next_checked() {
            Ok(m) => Some(m),
            Err(_) => {
                self.left = 0;
                None
            }
        }
    }
}

/// RTS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RtsRepr {
    /// Sender's rendezvous op id.
    pub op_id: u32,
    /// Message id.
    pub msg_id: u32,
    /// Whole message length.
    pub total_len: u64,
    /// Tag, for a tagged send.
    pub tag: Option<u64>,
    /// Remote CQ data.
    pub cq_data: Option<u64>,
    /// Piggybacked acknowledgement (flag `ACK`): the ACK body, after the other optional
    /// fields and before the payload.
    pub ack: Option<AckRepr>,
}

/// CTS.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CtsRepr {
    /// The RTS's op id.
    pub rts_op_id: u32,
    /// Receiver's op id for DATA.
    pub rx_op_id: u32,
    /// First granted byte.
    pub offset: u64,
    /// Granted bytes.
    pub len: u32,
    /// [`status`]; nonzero requires `len == 0`.
    pub status: u16,
    /// Piggybacked acknowledgement (flag `ACK`): the ACK body, after the other optional
    /// fields and before the payload.
    pub ack: Option<AckRepr>,
}

/// Rendezvous DATA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DataRepr<'a> {
    /// The CTS's `rx_op_id`.
    pub rx_op_id: u32,
    /// Offset of `payload` in the message.
    pub offset: u64,
    /// Bytes.
    pub payload: &'a [u8],
    /// Piggybacked acknowledgement (flag `ACK`): the ACK body, after the other optional
    /// fields and before the payload.
    pub ack: Option<AckRepr>,
}

/// RMA_WRITE segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RmaWriteRepr<'a> {
    /// Remote key.
    pub key: u64,
    /// Target address of the operation's first byte.
    pub addr: u64,
    /// Initiator's op id.
    pub op_id: u32,
    /// Whole operation length (`addr + total_len` must not overflow).
    pub total_len: u64,
    /// Offset of `payload` in the operation.
    pub offset: u64,
    /// Remote CQ data (fi_writedata).
    pub cq_data: Option<u64>,
    /// Bytes; `offset + payload.len() <= total_len`.
    pub payload: &'a [u8],
    /// Piggybacked acknowledgement (flag `ACK`): the ACK body, after the other optional
    /// fields and before the payload.
    pub ack: Option<AckRepr>,
}

/// READ_REQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReadReqRepr {
    /// Remote key.
    pub key: u64,
    /// First byte to read.
    pub addr: u64,
    /// Bytes to read (`addr + len` must not overflow).
    pub len: u64,
    /// Initiator's op id.
    pub op_id: u32,
    /// Piggybacked acknowledgement (flag `ACK`): the ACK body, after the other optional
    /// fields and before the payload.
    pub ack: Option<AckRepr>,
}

/// READ_RESP segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ReadRespRepr<'a> {
    /// The READ_REQ's op id.
    pub op_id: u32,
    /// [`status`]; nonzero requires an empty payload.
    pub status: u16,
    /// Offset of `payload` in the read.
    pub offset: u64,
    /// Bytes.
    pub payload: &'a [u8],
    /// Piggybacked acknowledgement (flag `ACK`): the ACK body, after the other optional
    /// fields and before the payload.
    pub ack: Option<AckRepr>,
}

/// ATOMIC_REQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicReqRepr<'a> {
    /// Remote key.
    pub key: u64,
    /// Address of the first element.
    pub addr: u64,
    /// Initiator's op id.
    pub op_id: u32,
    /// Operation.
    pub op: AtomicOp,
    /// Element type.
    pub datatype: AtomicDatatype,
    /// Elements (at least 1).
    pub count: u16,
    /// Return the original values (mandatory for read and compare ops).
    pub fetch: bool,
    /// Remote CQ data.
    pub cq_data: Option<u64>,
    /// `op.operand_arrays()` arrays of `count` big-endian elements, back to back.
    pub operands: &'a [u8],
    /// Piggybacked acknowledgement (flag `ACK`): the ACK body, after the other optional
    /// fields and before the payload.
    pub ack: Option<AckRepr>,
}

/// ATOMIC_RESP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicRespRepr<'a> {
    /// The ATOMIC_REQ's op id.
    pub op_id: u32,
    /// [`status`]; nonzero requires an empty payload.
    pub status: u16,
    /// Original values for a fetching atomic, empty otherwise.
    pub payload: &'a [u8],
    /// Piggybacked acknowledgement (flag `ACK`): the ACK body, after the other optional
    /// fields and before the payload.
    pub ack: Option<AckRepr>,
}

/// DGRAM: one unreliable datagram of an FI_EP_DGRAM endpoint (the whole message; the
/// base header's `session` must be 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DgramRepr<'a> {
    /// Remote CQ data.
    pub cq_data: Option<u64>,
    /// The message.
    pub payload: &'a [u8],
}

/// The type-specific part of a [`Repr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // each variant is the packet type of the same name
pub enum Body<'a> {
    Hello(HelloRepr),
    HelloAck(HelloRepr),
    Reject(RejectRepr),
    Close(CloseRepr),
    Reset(CloseRepr),
    KeepAlive(KeepAliveRepr),
    Ack(AckRepr),
    /// MSG when `tag` is `None`, TAGGED otherwise.
    Msg(MsgRepr<'a>),
    Bundle(BundleRepr<'a>),
    Rts(RtsRepr),
    Cts(CtsRepr),
    Data(DataRepr<'a>),
    RmaWrite(RmaWriteRepr<'a>),
    ReadReq(ReadReqRepr),
    ReadResp(ReadRespRepr<'a>),
    AtomicReq(AtomicReqRepr<'a>),
    AtomicResp(AtomicRespRepr<'a>),
    Dgram(DgramRepr<'a>),
}

/// A validated packet: base-header fields plus a typed body. Payloads borrow from the
/// receive buffer (parse) or from the user's memory (emit copies them once, straight
/// into the transmit buffer the link lends).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr<'a> {
    /// Base-header fields.
    pub header: Header,
    /// Type-specific fields and payload.
    pub body: Body<'a>,
}

struct Reader<'a> {
    buf: &'a [u8],
    /// ACK bodies are in their short form (flag `SHORT_ACK`).
    short_ack: bool,
}

impl<'a> Reader<'a> {
    fn take<H: FromBytes + KnownLayout + Immutable + Unaligned>(&mut self) -> Result<&'a H> {
        let (h, rest) = H::ref_from_prefix(self.buf).map_err(|_| Error::Truncated)?;
        self.buf = rest;
        Ok(h)
    }
    fn opt_u64(&mut self, present: bool) -> Result<Option<u64>> {
        if present {
            Ok(Some(self.take::<U64>()?.get()))
        } else {
            Ok(None)
        }
    }
    fn opt_ack(&mut self, present: bool) -> Result<Option<AckRepr>> {
        if present {
            Ok(Some(self.ack()?))
        } else {
            Ok(None)
        }
    }
    fn ack(&mut self) -> Result<AckRepr> {
        if self.short_ack {
            let h = self.take::<ShortAckHeader>()?;
            Ok(AckRepr {
                cum_ack: h.cum_ack.get(),
                credits: h.credits.get(),
                sack: 0,
                ts: h.ts.get(),
                echo_ts: h.echo_ts.get(),
                short: true,
            })
        } else {
            Ok(AckRepr::from_header(self.take::<AckHeader>()?))
        }
    }
    fn bytes<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(*self.take::<[u8; N]>()?)
    }
    fn end(&self) -> Result<()> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(Error::BadLength)
        }
    }
}

struct Writer<'b> {
    buf: &'b mut [u8],
    pos: usize,
}

impl Writer<'_> {
    fn put(&mut self, bytes: &[u8]) -> Result<()> {
        let end = self
            .pos
            .checked_add(bytes.len())
            .ok_or(Error::BufferTooSmall)?;
        let dst = self
            .buf
            .get_mut(self.pos..end)
            .ok_or(Error::BufferTooSmall)?;
        dst.copy_from_slice(bytes);
        self.pos = end;
        Ok(())
    }
    fn put_hdr<H: IntoBytes + Immutable>(&mut self, h: &H) -> Result<()> {
        self.put(h.as_bytes())
    }
    fn opt_u64(&mut self, v: Option<u64>) -> Result<()> {
        match v {
            Some(v) => self.put(&v.to_be_bytes()),
            None => Ok(()),
        }
    }
    fn opt_ack(&mut self, v: &Option<AckRepr>) -> Result<()> {
        match v {
            Some(a) => self.ack(a),
            None => Ok(()),
        }
    }
    fn ack(&mut self, a: &AckRepr) -> Result<()> {
        if a.short {
            self.put_hdr(&ShortAckHeader {
                cum_ack: a.cum_ack.into(),
                credits: a.credits.into(),
                ts: a.ts.into(),
                echo_ts: a.echo_ts.into(),
            })
        } else {
            self.put_hdr(&a.to_header())
        }
    }
}

impl AckRepr {
    fn from_header(h: &AckHeader) -> AckRepr {
        AckRepr {
            cum_ack: h.cum_ack.get(),
            credits: h.credits.get(),
            sack: h.sack.get(),
            ts: h.ts.get(),
            echo_ts: h.echo_ts.get(),
            short: false,
        }
    }

    fn to_header(self) -> AckHeader {
        AckHeader {
            cum_ack: self.cum_ack.into(),
            credits: self.credits.into(),
            sack: self.sack.into(),
            ts: self.ts.into(),
            echo_ts: self.echo_ts.into(),
        }
    }
}

fn fits(offset: u64, len: usize, total: u64) -> bool {
    offset
        .checked_add(len as u64)
        .is_some_and(|end| end <= total)
}

impl<'a> Body<'a> {
    /// The packet type this body is sent as.
    pub const fn packet_type(&self) -> PacketType {
        match self {
            Body::Hello(_) => PacketType::Hello,
            Body::HelloAck(_) => PacketType::HelloAck,
            Body::Reject(_) => PacketType::Reject,
            Body::Close(_) => PacketType::Close,
            Body::Reset(_) => PacketType::Reset,
            Body::KeepAlive(_) => PacketType::KeepAlive,
            Body::Ack(_) => PacketType::Ack,
            Body::Msg(m) => {
                if m.tag.is_some() {
                    PacketType::Tagged
                } else {
                    PacketType::Msg
                }
            }
            Body::Rts(_) => PacketType::Rts,
            Body::Cts(_) => PacketType::Cts,
            Body::Data(_) => PacketType::Data,
            Body::RmaWrite(_) => PacketType::RmaWrite,
            Body::ReadReq(_) => PacketType::ReadReq,
            Body::ReadResp(_) => PacketType::ReadResp,
            Body::AtomicReq(_) => PacketType::AtomicReq,
            Body::AtomicResp(_) => PacketType::AtomicResp,
            Body::Dgram(_) => PacketType::Dgram,
            Body::Bundle(_) => PacketType::Bundle,
        }
    }

    /// Type-specific flag bits this body implies.
    const fn flags(&self) -> u16 {
        const fn cq(v: &Option<u64>) -> u16 {
            if v.is_some() { flags::CQ_DATA } else { 0 }
        }
        let ack = self.ack();
        AckRepr::piggyback_flags(ack.as_ref())
            | match self {
                Body::Ack(a) if a.short => flags::SHORT_ACK,
                Body::Msg(m) => cq(&m.cq_data),
                Body::Rts(r) => cq(&r.cq_data) | if r.tag.is_some() { flags::TAGGED } else { 0 },
                Body::RmaWrite(w) => cq(&w.cq_data),
                Body::AtomicReq(a) => cq(&a.cq_data) | if a.fetch { flags::FETCH } else { 0 },
                Body::Dgram(d) => cq(&d.cq_data),
                _ => 0,
            }
    }

    /// The piggybacked acknowledgement (flag `ACK`), if any.
    pub const fn ack(&self) -> Option<AckRepr> {
        match self {
            Body::Close(x) | Body::Reset(x) => x.ack,
            Body::Msg(x) => x.ack,
            Body::Bundle(x) => x.ack,
            Body::Rts(x) => x.ack,
            Body::Cts(x) => x.ack,
            Body::Data(x) => x.ack,
            Body::RmaWrite(x) => x.ack,
            Body::ReadReq(x) => x.ack,
            Body::ReadResp(x) => x.ack,
            Body::AtomicReq(x) => x.ack,
            Body::AtomicResp(x) => x.ack,
            Body::Hello(_)
            | Body::HelloAck(_)
            | Body::Reject(_)
            | Body::KeepAlive(_)
            | Body::Ack(_)
            | Body::Dgram(_) => None,
        }
    }

    /// Attaches (`Some`) or removes (`None`) a piggybacked acknowledgement. Only
    /// sequenced types can carry one: [`Error::BadFlags`] for the others (unchanged).
    pub fn set_ack(&mut self, ack: Option<AckRepr>) -> Result<()> {
        let slot = match self {
            Body::Close(x) => &mut x.ack,
            Body::Msg(x) => &mut x.ack,
            Body::Bundle(x) => &mut x.ack,
            Body::Rts(x) => &mut x.ack,
            Body::Cts(x) => &mut x.ack,
            Body::Data(x) => &mut x.ack,
            Body::RmaWrite(x) => &mut x.ack,
            Body::ReadReq(x) => &mut x.ack,
            Body::ReadResp(x) => &mut x.ack,
            Body::AtomicReq(x) => &mut x.ack,
            Body::AtomicResp(x) => &mut x.ack,
            Body::Reset(x) if ack.is_none() => &mut x.ack,
            _ if ack.is_none() => return Ok(()),
            _ => return Err(Error::BadFlags),
        };
        *slot = ack;
        Ok(())
    }

    /// Length of the body's headers and optional fields, without payload.
    pub const fn header_len(&self) -> usize {
        const fn o(v: &Option<u64>) -> usize {
            if v.is_some() { 8 } else { 0 }
        }
        let ack = match self.ack() {
            Some(a) => a.wire_len(),
            None => 0,
        };
        ack + match self {
            Body::Hello(h) | Body::HelloAck(h) => {
                hdr_len::HELLO + if h.mac.is_some() { MAC_LEN } else { 0 }
            }
            Body::Reject(_) => hdr_len::REJECT,
            Body::Close(_) | Body::Reset(_) => hdr_len::CLOSE,
            Body::KeepAlive(_) => hdr_len::KEEPALIVE,
            Body::Ack(a) => a.wire_len(),
            Body::Msg(m) => hdr_len::MSG + o(&m.tag) + o(&m.cq_data),
            Body::Rts(r) => hdr_len::RTS + o(&r.tag) + o(&r.cq_data),
            Body::Cts(_) => hdr_len::CTS,
            Body::Data(_) => hdr_len::DATA,
            Body::RmaWrite(w) => hdr_len::RMA_WRITE + o(&w.cq_data),
            Body::ReadReq(_) => hdr_len::READ_REQ,
            Body::ReadResp(_) => hdr_len::READ_RESP,
            Body::AtomicReq(a) => hdr_len::ATOMIC_REQ + o(&a.cq_data),
            Body::AtomicResp(_) => hdr_len::ATOMIC_RESP,
            Body::Dgram(d) => hdr_len::DGRAM + o(&d.cq_data),
            Body::Bundle(_) => hdr_len::BUNDLE,
        }
    }

    /// The payload (operands for ATOMIC_REQ), empty for types without one.
    pub const fn payload(&self) -> &'a [u8] {
        match self {
            Body::Msg(m) => m.payload,
            Body::Data(d) => d.payload,
            Body::RmaWrite(w) => w.payload,
            Body::ReadResp(r) => r.payload,
            Body::AtomicReq(a) => a.operands,
            Body::AtomicResp(a) => a.payload,
            Body::Dgram(d) => d.payload,
            Body::Bundle(b) => b.records,
            _ => &[],
        }
    }

    /// The semantic rules of the specification, shared by parse and emit.
    fn validate(&self, header: &Header) -> Result<()> {
        if self.ack().is_some() && !self.packet_type().is_sequenced() {
            return Err(Error::BadFlags); // RESET (the only other body with the field)
        }
        let ack = match self {
            Body::Ack(a) => Some(*a),
            _ => self.ack(),
        };
        AckRepr::check(ack.as_ref())?;
        let ok = match self {
            Body::Hello(h) | Body::HelloAck(h) => {
                let hello = matches!(self, Body::Hello(_));
                h.ver_min >= 1
                    && h.ver_min <= h.ver_max
                    && (hello || h.ver_min == h.ver_max)
                    && h.rx_session != 0
                    && h.window != 0
                    && h.max_pkt >= MIN_MAX_PKT
                    && (!hello || header.session == 0)
                    && (hello || header.session != 0)
            }
            Body::Reject(r) => r.ver_min <= r.ver_max,
            Body::Close(_) | Body::Reset(_) | Body::KeepAlive(_) | Body::Ack(_) => true,
            Body::Msg(m) => {
                if !fits(m.offset as u64, m.payload.len(), m.total_len as u64) {
                    return Err(Error::BadLength);
                }
                true
            }
            Body::Rts(_) => true,
            Body::Cts(c) => c.status == status::OK || c.len == 0,
            Body::Data(d) => {
                if d.offset.checked_add(d.payload.len() as u64).is_none() {
                    return Err(Error::BadLength);
                }
                true
            }
            Body::RmaWrite(w) => {
                if !fits(w.offset, w.payload.len(), w.total_len) {
                    return Err(Error::BadLength);
                }
                w.addr.checked_add(w.total_len).is_some()
            }
            Body::ReadReq(r) => r.addr.checked_add(r.len).is_some(),
            Body::ReadResp(r) => {
                if r.offset.checked_add(r.payload.len() as u64).is_none() {
                    return Err(Error::BadLength);
                }
                r.status == status::OK || r.payload.is_empty()
            }
            Body::AtomicReq(a) => {
                let want = a.count as usize * a.datatype.size() * a.op.operand_arrays();
                if a.count == 0 || (a.op.always_fetches() && !a.fetch) {
                    return Err(Error::Malformed);
                }
                if a.operands.len() != want {
                    return Err(Error::BadLength);
                }
                let span = a.count as u64 * a.datatype.size() as u64;
                a.addr.checked_add(span).is_some()
            }
            Body::AtomicResp(a) => a.status == status::OK || a.payload.is_empty(),
            Body::Dgram(_) => header.session == 0,
            Body::Bundle(b) => {
                b.check()?;
                true
            }
        };
        if ok { Ok(()) } else { Err(Error::Malformed) }
    }
}

impl<'a> Repr<'a> {
    /// The packet type.
    pub const fn packet_type(&self) -> PacketType {
        self.body.packet_type()
    }

    /// The piggybacked acknowledgement (flag `ACK`), if any.
    pub const fn ack(&self) -> Option<AckRepr> {
        self.body.ack()
    }

    /// Bytes before the payload (base header, type header, optional fields).
    pub const fn header_len(&self) -> usize {
        BASE_LEN + self.body.header_len()
    }

    /// Length of the emitted packet.
    pub const fn buffer_len(&self) -> usize {
        self.header_len() + self.body.payload().len()
    }

    /// Parse and validate a packet. Checks, in order: length ([`Error::Truncated`]),
    /// magic, version, `len`, type, flags, checksum, then the body's lengths and rules.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&'a T>) -> Result<Repr<'a>> {
        let buf: &'a [u8] = packet.buffer.as_ref();
        if buf.len() < BASE_LEN {
            return Err(Error::Truncated);
        }
        if packet.magic() != MAGIC {
            return Err(Error::BadMagic);
        }
        if packet.version() != VERSION {
            return Err(Error::BadVersion);
        }
        packet.check_len()?;
        let ptype = packet.packet_type().ok_or(Error::UnknownType)?;
        let fl = packet.flags();
        if fl & !(flags::CRC | flags::ACK_REQ | ptype.extra_flags()) != 0
            || (fl & flags::SHORT_ACK != 0 && fl & flags::ACK == 0 && ptype != PacketType::Ack)
        {
            return Err(Error::BadFlags);
        }
        if fl & flags::CRC != 0 {
            if !packet.verify_checksum() {
                return Err(Error::BadChecksum);
            }
        } else if packet.checksum() != 0 {
            return Err(Error::Malformed);
        }
        let header = Header {
            src_ep: packet.src_ep(),
            dst_ep: packet.dst_ep(),
            session: packet.session(),
            seq: packet.seq(),
            crc: fl & flags::CRC != 0,
            ack_req: fl & flags::ACK_REQ != 0,
        };
        let cq = fl & flags::CQ_DATA != 0;
        let ack = fl & flags::ACK != 0;
        let mut r = Reader {
            buf: packet.body_ref(),
            short_ack: fl & flags::SHORT_ACK != 0,
        };
        let body = match ptype {
            PacketType::Hello | PacketType::HelloAck => {
                let h = *r.take::<HelloHeader>()?;
                if h.reserved != 0 {
                    return Err(Error::Malformed);
                }
                let mac = match h.auth_alg {
                    AUTH_NONE => None,
                    AUTH_HMAC_SHA256 => Some(r.bytes::<MAC_LEN>()?),
                    _ => return Err(Error::Malformed),
                };
                r.end()?;
                let h = HelloRepr {
                    ver_min: h.ver_min,
                    ver_max: h.ver_max,
                    rx_session: h.rx_session.get(),
                    isn: h.isn.get(),
                    window: h.window.get(),
                    max_pkt: h.max_pkt.get(),
                    credits: h.credits.get(),
                    caps: h.caps.get(),
                    nonce: h.nonce.get(),
                    mac,
                };
                if ptype == PacketType::Hello {
                    Body::Hello(h)
                } else {
                    Body::HelloAck(h)
                }
            }
            PacketType::Reject => {
                let h = r.take::<RejectHeader>()?;
                r.end()?;
                Body::Reject(RejectRepr {
                    reason: h.reason.get(),
                    ver_min: h.ver_min,
                    ver_max: h.ver_max,
                })
            }
            PacketType::Close | PacketType::Reset => {
                let h = r.take::<CloseHeader>()?;
                let ack = r.opt_ack(ack)?;
                r.end()?;
                if h.reserved.get() != 0 {
                    return Err(Error::Malformed);
                }
                let c = CloseRepr {
                    reason: h.reason.get(),
                    ack,
                };
                if ptype == PacketType::Close {
                    Body::Close(c)
                } else {
                    Body::Reset(c)
                }
            }
            PacketType::KeepAlive => {
                let h = r.take::<KeepAliveHeader>()?;
                r.end()?;
                Body::KeepAlive(KeepAliveRepr {
                    ts: h.ts.get(),
                    echo_ts: h.echo_ts.get(),
                })
            }
            PacketType::Ack => {
                let a = r.ack()?;
                r.end()?;
                Body::Ack(a)
            }
            PacketType::Msg | PacketType::Tagged => {
                let h = r.take::<MsgHeader>()?;
                let tag = r.opt_u64(ptype == PacketType::Tagged)?;
                let cq_data = r.opt_u64(cq)?;
                let ack = r.opt_ack(ack)?;
                Body::Msg(MsgRepr {
                    msg_id: h.msg_id.get(),
                    total_len: h.total_len.get(),
                    offset: h.offset.get(),
                    tag,
                    cq_data,
                    ack,
                    payload: r.buf,
                })
            }
            PacketType::Rts => {
                let h = r.take::<RtsHeader>()?;
                let tag = r.opt_u64(fl & flags::TAGGED != 0)?;
                let cq_data = r.opt_u64(cq)?;
                let ack = r.opt_ack(ack)?;
                r.end()?;
                Body::Rts(RtsRepr {
                    op_id: h.op_id.get(),
                    msg_id: h.msg_id.get(),
                    total_len: h.total_len.get(),
                    tag,
                    cq_data,
                    ack,
                })
            }
            PacketType::Cts => {
                let h = r.take::<CtsHeader>()?;
                let ack = r.opt_ack(ack)?;
                r.end()?;
                if h.reserved.get() != 0 {
                    return Err(Error::Malformed);
                }
                Body::Cts(CtsRepr {
                    rts_op_id: h.rts_op_id.get(),
                    rx_op_id: h.rx_op_id.get(),
                    offset: h.offset.get(),
                    len: h.len.get(),
                    status: h.status.get(),
                    ack,
                })
            }
            PacketType::Data => {
                let h = r.take::<DataHeader>()?;
                let ack = r.opt_ack(ack)?;
                Body::Data(DataRepr {
                    rx_op_id: h.rx_op_id.get(),
                    offset: h.offset.get(),
                    ack,
                    payload: r.buf,
                })
            }
            PacketType::RmaWrite => {
                let h = r.take::<RmaWriteHeader>()?;
                let cq_data = r.opt_u64(cq)?;
                let ack = r.opt_ack(ack)?;
                Body::RmaWrite(RmaWriteRepr {
                    ack,
                    key: h.key.get(),
                    addr: h.addr.get(),
                    op_id: h.op_id.get(),
                    total_len: h.total_len.get(),
                    offset: h.offset.get(),
                    cq_data,
                    payload: r.buf,
                })
            }
            PacketType::ReadReq => {
                let h = r.take::<ReadReqHeader>()?;
                let ack = r.opt_ack(ack)?;
                r.end()?;
                Body::ReadReq(ReadReqRepr {
                    ack,
                    key: h.key.get(),
                    addr: h.addr.get(),
                    len: h.len.get(),
                    op_id: h.op_id.get(),
                })
            }
            PacketType::ReadResp => {
                let h = r.take::<ReadRespHeader>()?;
                let ack = r.opt_ack(ack)?;
                if h.reserved.get() != 0 {
                    return Err(Error::Malformed);
                }
                Body::ReadResp(ReadRespRepr {
                    ack,
                    op_id: h.op_id.get(),
                    status: h.status.get(),
                    offset: h.offset.get(),
                    payload: r.buf,
                })
            }
            PacketType::AtomicReq => {
                let h = r.take::<AtomicReqHeader>()?;
                let cq_data = r.opt_u64(cq)?;
                let ack = r.opt_ack(ack)?;
                let op = AtomicOp::from_u8(h.op).ok_or(Error::Malformed)?;
                let datatype = AtomicDatatype::from_u8(h.datatype).ok_or(Error::Malformed)?;
                Body::AtomicReq(AtomicReqRepr {
                    key: h.key.get(),
                    addr: h.addr.get(),
                    op_id: h.op_id.get(),
                    op,
                    datatype,
                    count: h.count.get(),
                    fetch: fl & flags::FETCH != 0,
                    cq_data,
                    ack,
                    operands: r.buf,
                })
            }
            PacketType::AtomicResp => {
                let h = r.take::<AtomicRespHeader>()?;
                let ack = r.opt_ack(ack)?;
                if h.reserved.get() != 0 {
                    return Err(Error::Malformed);
                }
                Body::AtomicResp(AtomicRespRepr {
                    ack,
                    op_id: h.op_id.get(),
                    status: h.status.get(),
                    payload: r.buf,
                })
            }
            PacketType::Dgram => {
                let cq_data = r.opt_u64(cq)?;
                Body::Dgram(DgramRepr {
                    cq_data,
                    payload: r.buf,
                })
            }
            PacketType::Bundle => {
                let h = r.take::<BundleHeader>()?;
                let ack = r.opt_ack(ack)?;
                if h.reserved.get() != 0 {
                    return Err(Error::Malformed);
                }
                Body::Bundle(BundleRepr {
                    count: h.count.get(),
                    records: r.buf,
                    ack,
                })
            }
        };
        body.validate(&header)?;
        Ok(Repr { header, body })
    }

    /// Parse a byte slice (shorthand for `parse(&Packet::new_unchecked(buf))`).
    pub fn parse_bytes(buf: &'a [u8]) -> Result<Repr<'a>> {
        Repr::parse(&Packet::new_unchecked(buf))
    }

    /// Validate and write the packet at the start of the buffer, payload and checksum
    /// included. Returns the packet length. Refuses (with the error `parse` would give)
    /// any representation the specification forbids, and returns
    /// [`Error::BufferTooSmall`] instead of panicking on a short buffer.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]> + ?Sized>(
        &self,
        packet: &mut Packet<&mut T>,
    ) -> Result<usize> {
        self.body.validate(&self.header)?;
        let len = self.buffer_len();
        let len16 = u16::try_from(len).map_err(|_| Error::BadLength)?;
        let buf = packet
            .buffer
            .as_mut()
            .get_mut(..len)
            .ok_or(Error::BufferTooSmall)?;
        let h = &self.header;
        let mut fl = self.body.flags();
        if h.crc {
            fl |= flags::CRC;
        }
        if h.ack_req {
            fl |= flags::ACK_REQ;
        }
        let base = BaseHeader::new(h, self.packet_type(), fl, len16);
        let mut w = Writer { buf, pos: 0 };
        w.put_hdr(&base)?;
        match &self.body {
            Body::Hello(x) | Body::HelloAck(x) => {
                w.put_hdr(&HelloHeader {
                    ver_min: x.ver_min,
                    ver_max: x.ver_max,
                    auth_alg: if x.mac.is_some() {
                        AUTH_HMAC_SHA256
                    } else {
                        AUTH_NONE
                    },
                    reserved: 0,
                    rx_session: x.rx_session.into(),
                    isn: x.isn.into(),
                    window: x.window.into(),
                    max_pkt: x.max_pkt.into(),
                    credits: x.credits.into(),
                    caps: x.caps.into(),
                    nonce: x.nonce.into(),
                })?;
                if let Some(mac) = &x.mac {
                    w.put(mac)?;
                }
            }
            Body::Reject(x) => w.put_hdr(&RejectHeader {
                reason: x.reason.into(),
                ver_min: x.ver_min,
                ver_max: x.ver_max,
            })?,
            Body::Close(x) | Body::Reset(x) => {
                w.put_hdr(&CloseHeader {
                    reason: x.reason.into(),
                    reserved: 0.into(),
                })?;
                w.opt_ack(&x.ack)?;
            }
            Body::KeepAlive(x) => w.put_hdr(&KeepAliveHeader {
                ts: x.ts.into(),
                echo_ts: x.echo_ts.into(),
            })?,
            Body::Ack(x) => w.ack(x)?,
            Body::Msg(x) => {
                w.put_hdr(&MsgHeader {
                    msg_id: x.msg_id.into(),
                    total_len: x.total_len.into(),
                    offset: x.offset.into(),
                })?;
                w.opt_u64(x.tag)?;
                w.opt_u64(x.cq_data)?;
                w.opt_ack(&x.ack)?;
                w.put(x.payload)?;
            }
            Body::Rts(x) => {
                w.put_hdr(&RtsHeader {
                    op_id: x.op_id.into(),
                    msg_id: x.msg_id.into(),
                    total_len: x.total_len.into(),
                })?;
                w.opt_u64(x.tag)?;
                w.opt_u64(x.cq_data)?;
                w.opt_ack(&x.ack)?;
            }
            Body::Cts(x) => {
                w.put_hdr(&CtsHeader {
                    rts_op_id: x.rts_op_id.into(),
                    rx_op_id: x.rx_op_id.into(),
                    offset: x.offset.into(),
                    len: x.len.into(),
                    status: x.status.into(),
                    reserved: 0.into(),
                })?;
                w.opt_ack(&x.ack)?;
            }
            Body::Data(x) => {
                w.put_hdr(&DataHeader {
                    rx_op_id: x.rx_op_id.into(),
                    offset: x.offset.into(),
                })?;
                w.opt_ack(&x.ack)?;
                w.put(x.payload)?;
            }
            Body::RmaWrite(x) => {
                w.put_hdr(&RmaWriteHeader {
                    key: x.key.into(),
                    addr: x.addr.into(),
                    op_id: x.op_id.into(),
                    total_len: x.total_len.into(),
                    offset: x.offset.into(),
                })?;
                w.opt_u64(x.cq_data)?;
                w.opt_ack(&x.ack)?;
                w.put(x.payload)?;
            }
            Body::ReadReq(x) => {
                w.put_hdr(&ReadReqHeader {
                    key: x.key.into(),
                    addr: x.addr.into(),
                    len: x.len.into(),
                    op_id: x.op_id.into(),
                })?;
                w.opt_ack(&x.ack)?;
            }
            Body::ReadResp(x) => {
                w.put_hdr(&ReadRespHeader {
                    op_id: x.op_id.into(),
                    status: x.status.into(),
                    reserved: 0.into(),
                    offset: x.offset.into(),
                })?;
                w.opt_ack(&x.ack)?;
                w.put(x.payload)?;
            }
            Body::AtomicReq(x) => {
                w.put_hdr(&AtomicReqHeader {
                    key: x.key.into(),
                    addr: x.addr.into(),
                    op_id: x.op_id.into(),
                    op: x.op as u8,
                    datatype: x.datatype as u8,
                    count: x.count.into(),
                })?;
                w.opt_u64(x.cq_data)?;
                w.opt_ack(&x.ack)?;
                w.put(x.operands)?;
            }
            Body::AtomicResp(x) => {
                w.put_hdr(&AtomicRespHeader {
                    op_id: x.op_id.into(),
                    status: x.status.into(),
                    reserved: 0.into(),
                })?;
                w.opt_ack(&x.ack)?;
                w.put(x.payload)?;
            }
            Body::Dgram(x) => {
                w.opt_u64(x.cq_data)?;
                w.put(x.payload)?;
            }
            Body::Bundle(x) => {
                w.put_hdr(&BundleHeader {
                    count: x.count.into(),
                    reserved: 0.into(),
                })?;
                w.opt_ack(&x.ack)?;
                w.put(x.records)?;
            }
        }
        if w.pos != len {
            return Err(Error::BadLength);
        }
        let mut p = Packet::new_unchecked(w.buf);
        p.fill_checksum();
        Ok(len)
    }

    /// Emit into a byte slice (shorthand for `emit(&mut Packet::new_unchecked(buf))`).
    pub fn emit_bytes(&self, buf: &mut [u8]) -> Result<usize> {
        self.emit(&mut Packet::new_unchecked(buf))
    }
}

impl BaseHeader {
    /// The base header of a packet of type `ptype` with header fields `h`, flags `fl`
    /// and length `len`; the checksum zero (filled last, if at all).
    fn new(h: &Header, ptype: PacketType, fl: u16, len: u16) -> BaseHeader {
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

/// Writes the headers of a MSG or TAGGED packet (base header, MSG header, tag, CQ data
/// and piggybacked ACK, as [`Repr::emit`] would for a [`MsgRepr`]) straight into `buf`,
/// for a payload of `payload_len` bytes that the caller then writes at
/// `buf[header_len..]`; `m.payload` is not used. The per-message send path uses it: it
/// builds no [`Repr`] and copies no payload twice. The checksum is left zero; with
/// `h.crc` the caller calls [`Packet::fill_checksum`] once the payload is in place.
/// Returns the header length; the same errors as [`Repr::emit`].
pub fn emit_msg_header(
    buf: &mut [u8],
    h: &Header,
    m: &MsgRepr<'_>,
    payload_len: usize,
) -> Result<usize> {
    if !fits(m.offset as u64, payload_len, m.total_len as u64) {
        return Err(Error::BadLength);
    }
    let hl = m.header_len();
    let len = hl + payload_len;
    let len16 = u16::try_from(len).map_err(|_| Error::BadLength)?;
    let out = buf.get_mut(..hl).ok_or(Error::BufferTooSmall)?;
    let mut fl = 0;
    if m.cq_data.is_some() {
        fl |= flags::CQ_DATA;
    }
    AckRepr::check(m.ack.as_ref())?;
    fl |= AckRepr::piggyback_flags(m.ack.as_ref());
    if h.crc {
        fl |= flags::CRC;
    }
    if h.ack_req {
        fl |= flags::ACK_REQ;
    }
    let ptype = if m.tag.is_some() {
        PacketType::Tagged
    } else {
        PacketType::Msg
    };
    let (base, rest) = out.split_at_mut(BASE_LEN);
    base.copy_from_slice(BaseHeader::new(h, ptype, fl, len16).as_bytes());
    let (mh, mut rest) = rest.split_at_mut(hdr_len::MSG);
    mh.copy_from_slice(
        MsgHeader {
            msg_id: m.msg_id.into(),
            total_len: m.total_len.into(),
            offset: m.offset.into(),
        }
        .as_bytes(),
    );
    for v in [m.tag, m.cq_data].into_iter().flatten() {
        let (f, r) = rest.split_at_mut(8);
        f.copy_from_slice(&v.to_be_bytes());
        rest = r;
    }
    if let Some(a) = &m.ack {
        Writer { buf: rest, pos: 0 }.ack(a)?;
    }
    Ok(hl)
}

/// The length of a BUNDLE packet's headers (base header, BUNDLE header, the piggybacked
/// ACK if any): where its first record starts.
pub const fn bundle_header_len(ack: Option<&AckRepr>) -> usize {
    BASE_LEN
        + hdr_len::BUNDLE
        + match ack {
            Some(a) => a.wire_len(),
            None => 0,
        }
}

/// Writes the headers of a BUNDLE packet of `count` records and `len` bytes in all
/// (records included) at the start of `buf`, for records the caller writes after them
/// with [`emit_bundle_record`]. The checksum is left zero; with `h.crc` the caller
/// calls [`Packet::fill_checksum`] once the records are in place. Returns the header
/// length. Like [`emit_msg_header`], this builds no [`Repr`]; a bundle it writes parses
/// as [`Repr::emit`] would have written it (tested).
pub fn emit_bundle_header(
    buf: &mut [u8],
    h: &Header,
    count: u16,
    ack: Option<AckRepr>,
    len: usize,
) -> Result<usize> {
    let hl = bundle_header_len(ack.as_ref());
    if count == 0 {
        return Err(Error::Malformed);
    }
    if len < hl {
        return Err(Error::BadLength);
    }
    let len16 = u16::try_from(len).map_err(|_| Error::BadLength)?;
    let out = buf.get_mut(..hl).ok_or(Error::BufferTooSmall)?;
    let mut fl = 0;
    AckRepr::check(ack.as_ref())?;
    fl |= AckRepr::piggyback_flags(ack.as_ref());
    if h.crc {
        fl |= flags::CRC;
    }
    if h.ack_req {
        fl |= flags::ACK_REQ;
    }
    let (base, rest) = out.split_at_mut(BASE_LEN);
    base.copy_from_slice(BaseHeader::new(h, PacketType::Bundle, fl, len16).as_bytes());
    let (bh, rest) = rest.split_at_mut(hdr_len::BUNDLE);
    bh.copy_from_slice(
        BundleHeader {
            count: count.into(),
            reserved: 0.into(),
        }
        .as_bytes(),
    );
    if let Some(a) = &ack {
        Writer { buf: rest, pos: 0 }.ack(a)?;
    }
    Ok(hl)
}

/// Writes the header of one BUNDLE record (message `msg_id`, its tag and CQ data) for a
/// payload of `payload_len` bytes that the caller writes right after it. Returns the
/// record header's length (tag and CQ data included).
pub fn emit_bundle_record(
    buf: &mut [u8],
    msg_id: u32,
    tag: Option<u64>,
    cq_data: Option<u64>,
    payload_len: usize,
) -> Result<usize> {
    let len = u16::try_from(payload_len).map_err(|_| Error::BadLength)?;
    let hl = bundle_record_len(tag.is_some(), cq_data.is_some(), 0);
    let out = buf.get_mut(..hl).ok_or(Error::BufferTooSmall)?;
    let mut fl = 0;
    if tag.is_some() {
        fl |= bundle_rec::TAGGED;
    }
    if cq_data.is_some() {
        fl |= bundle_rec::CQ_DATA;
    }
    let (rh, mut rest) = out.split_at_mut(hdr_len::BUNDLE_REC);
    rh.copy_from_slice(
        BundleRecHeader {
            msg_id: msg_id.into(),
            len: len.into(),
            flags: fl,
            reserved: 0,
        }
        .as_bytes(),
    );
    for v in [tag, cq_data].into_iter().flatten() {
        let (f, r) = rest.split_at_mut(8);
        f.copy_from_slice(&v.to_be_bytes());
        rest = r;
    }
    Ok(hl)
}
