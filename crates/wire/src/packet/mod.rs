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
//!
//! One module per packet family, as `smoltcp::wire` keeps one per protocol; each holds
//! its `zerocopy` headers, its `*Repr` and how that parses, emits and is validated:
//! `base` (base header, flags, type codes, [`Header`]), `view` ([`Packet`]),
//! `handshake` (HELLO, HELLO_ACK, REJECT, CLOSE, RESET), `keepalive`, `ack` (the full
//! and the short ACK body), `sack` (SACK: ACK ranges beyond the bitmap), `msg`
//! (MSG/TAGGED and [`emit_msg_header`]), `bundle`, `rndv` (RTS, CTS, DATA), `rma`,
//! `atomic`, `dgram` and `cm` (FI_EP_MSG connection management). This module ties them
//! together: [`Body`], [`Repr`] and its dispatch, and [`hdr_len`]. Every public item
//! is re-exported here, so its path is `wire::packet::X`.

use self::codec::{Reader, Writer};
use crate::{Error, Result};

/// A `zerocopy` header struct: every field network byte order, no padding, field order
/// wire order.
macro_rules! wire_struct {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $f:ident : $t:ty),* $(,)? }) => {
        $(#[$m])*
        #[derive(
            zerocopy::FromBytes,
            zerocopy::IntoBytes,
            zerocopy::KnownLayout,
            zerocopy::Immutable,
            zerocopy::Unaligned,
            Debug,
            Clone,
            Copy,
            PartialEq,
            Eq,
        )]
        #[repr(C)]
        pub struct $name { $($(#[$fm])* pub $f: $t),* }
    };
}

mod ack;
mod atomic;
mod base;
mod bundle;
mod cm;
mod codec;
mod dgram;
mod handshake;
mod keepalive;
pub mod mac;
mod msg;
mod rma;
mod rndv;
mod sack;
mod view;

pub use self::ack::{AckHeader, AckRepr, ShortAckHeader};
pub use self::atomic::{
    AtomicDatatype, AtomicOp, AtomicReqHeader, AtomicReqRepr, AtomicRespHeader, AtomicRespRepr,
};
pub use self::base::{
    BASE_LEN, BaseHeader, EP_CTX_SHIFT, Header, MAGIC, PacketType, VERSION, flags, reserved_types,
    status,
};
pub use self::bundle::{
    BundleHeader, BundleMsg, BundleMsgs, BundleRecHeader, BundleRepr, bundle_header_len,
    bundle_rec, bundle_record_len, emit_bundle_header, emit_bundle_record,
};
pub use self::cm::{CM_DATA_MAX, CmHeader, CmRepr, cm_reason};
pub use self::dgram::{DgramRepr, max_dgram_payload};
pub use self::handshake::{
    AUTH_HMAC_SHA256, AUTH_NONE, COOKIE_LEN, CloseHeader, CloseRepr, HELLO_COOKIE, HelloHeader,
    HelloRepr, MAC_LEN, MIN_MAX_PKT, RejectHeader, RejectRepr, RetryHeader, RetryRepr, caps, close,
    reject,
};
pub use self::keepalive::{KeepAliveHeader, KeepAliveRepr};
pub use self::msg::{MsgHeader, MsgRepr, emit_msg_header, max_msg_payload};
pub use self::rma::{
    ReadReqHeader, ReadReqRepr, ReadRespHeader, ReadRespRepr, RmaWriteHeader, RmaWriteRepr,
    max_read_resp_payload, max_rma_write_payload,
};
pub use self::rndv::{
    CtsHeader, CtsRepr, DataHeader, DataRepr, RtsHeader, RtsRepr, max_data_payload,
};
pub use self::sack::{
    MAX_RANGES, RANGES_END, RANGES_FROM, SackHeader, SackRangeRec, SackRanges, SackRepr,
};
pub use self::view::Packet;

/// Length of a type's fixed header (after the base header).
pub mod hdr_len {
    use super::*;
    use core::mem::size_of;
    /// HELLO / HELLO_ACK (without MAC).
    pub const HELLO: usize = size_of::<HelloHeader>();
    /// REJECT.
    pub const REJECT: usize = size_of::<RejectHeader>();
    /// RETRY.
    pub const RETRY: usize = size_of::<RetryHeader>();
    /// CLOSE / RESET.
    pub const CLOSE: usize = size_of::<CloseHeader>();
    /// KEEPALIVE.
    pub const KEEPALIVE: usize = size_of::<KeepAliveHeader>();
    /// ACK.
    pub const ACK: usize = size_of::<AckHeader>();
    /// ACK body in its short form (flag `SHORT_ACK`).
    pub const SHORT_ACK: usize = size_of::<ShortAckHeader>();
    /// What follows the ACK body of a SACK, before its ranges.
    pub const SACK: usize = size_of::<SackHeader>();
    /// One SACK range.
    pub const SACK_RANGE: usize = size_of::<SackRangeRec>();
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
    /// Every connection-management type (without CM data).
    pub const CM: usize = size_of::<CmHeader>();
}

const _: () = {
    assert!(core::mem::size_of::<BaseHeader>() == BASE_LEN);
    assert!(hdr_len::HELLO == 36);
    assert!(hdr_len::ACK == 24);
    assert!(hdr_len::SHORT_ACK == 16);
    assert!(hdr_len::SACK == 2);
    assert!(hdr_len::SACK_RANGE == 4);
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
    assert!(hdr_len::CM == 4);
};

/// The type-specific part of a [`Repr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)] // each variant is the packet type of the same name
pub enum Body<'a> {
    Hello(HelloRepr),
    HelloAck(HelloRepr),
    Reject(RejectRepr),
    Retry(RetryRepr),
    Close(CloseRepr),
    Reset(CloseRepr),
    KeepAlive(KeepAliveRepr),
    Ack(AckRepr),
    Sack(SackRepr),
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
    ConnReq(CmRepr<'a>),
    Accept(CmRepr<'a>),
    CmReject(CmRepr<'a>),
    Established(CmRepr<'a>),
    Shutdown(CmRepr<'a>),
    ShutdownAck(CmRepr<'a>),
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

impl<'a> Body<'a> {
    /// The packet type this body is sent as.
    pub const fn packet_type(&self) -> PacketType {
        match self {
            Body::Hello(_) => PacketType::Hello,
            Body::HelloAck(_) => PacketType::HelloAck,
            Body::Reject(_) => PacketType::Reject,
            Body::Retry(_) => PacketType::Retry,
            Body::Close(_) => PacketType::Close,
            Body::Reset(_) => PacketType::Reset,
            Body::KeepAlive(_) => PacketType::KeepAlive,
            Body::Ack(_) => PacketType::Ack,
            Body::Sack(_) => PacketType::Sack,
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
            Body::ConnReq(_) => PacketType::ConnReq,
            Body::Accept(_) => PacketType::Accept,
            Body::CmReject(_) => PacketType::CmReject,
            Body::Established(_) => PacketType::Established,
            Body::Shutdown(_) => PacketType::Shutdown,
            Body::ShutdownAck(_) => PacketType::ShutdownAck,
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
            | Body::Retry(_)
            | Body::KeepAlive(_)
            | Body::Ack(_)
            | Body::Sack(_)
            | Body::Dgram(_)
            | Body::ConnReq(_)
            | Body::Accept(_)
            | Body::CmReject(_)
            | Body::Established(_)
            | Body::Shutdown(_)
            | Body::ShutdownAck(_) => None,
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
            Body::Hello(h) | Body::HelloAck(h) => h.wire_len(),
            Body::Reject(_) => hdr_len::REJECT,
            Body::Retry(_) => hdr_len::RETRY,
            Body::Close(_) | Body::Reset(_) => hdr_len::CLOSE,
            Body::KeepAlive(_) => hdr_len::KEEPALIVE,
            Body::Ack(a) => a.wire_len(),
            Body::Sack(s) => s.wire_len(),
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
            Body::ConnReq(_)
            | Body::Accept(_)
            | Body::CmReject(_)
            | Body::Established(_)
            | Body::Shutdown(_)
            | Body::ShutdownAck(_) => hdr_len::CM,
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
            Body::ConnReq(c) | Body::Accept(c) | Body::CmReject(c) => c.data,
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
        match self {
            Body::Hello(h) => h.check(true, header),
            Body::HelloAck(h) => h.check(false, header),
            Body::Reject(r) => r.check(),
            // RETRY answers one HELLO: it names its `rx_session`.
            Body::Retry(_) => codec::ensure(header.session != 0),
            Body::Close(_) | Body::Reset(_) | Body::KeepAlive(_) | Body::Ack(_) => Ok(()),
            Body::Sack(s) => s.check(),
            Body::Msg(m) => m.check(),
            Body::Rts(_) => Ok(()),
            Body::Cts(c) => c.check(),
            Body::Data(d) => d.check(),
            Body::RmaWrite(w) => w.check(),
            Body::ReadReq(r) => r.check(),
            Body::ReadResp(r) => r.check(),
            Body::AtomicReq(a) => a.check(),
            Body::AtomicResp(a) => a.check(),
            Body::Dgram(d) => d.check(header),
            Body::Bundle(b) => b.check(),
            Body::ConnReq(c) | Body::Accept(c) => c.check(header, true, false),
            Body::CmReject(c) => c.check(header, true, true),
            Body::Established(c) | Body::ShutdownAck(c) => c.check(header, false, false),
            Body::Shutdown(c) => c.check(header, false, true),
        }
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
        let r = Reader {
            buf: packet.body_ref(),
            short_ack: fl & flags::SHORT_ACK != 0,
        };
        let body = match ptype {
            PacketType::Hello => Body::Hello(HelloRepr::parse(r)?),
            PacketType::HelloAck => Body::HelloAck(HelloRepr::parse(r)?),
            PacketType::Reject => Body::Reject(RejectRepr::parse(r)?),
            PacketType::Retry => Body::Retry(RetryRepr::parse(r)?),
            PacketType::Close => Body::Close(CloseRepr::parse(r, ack)?),
            PacketType::Reset => Body::Reset(CloseRepr::parse(r, ack)?),
            PacketType::KeepAlive => Body::KeepAlive(KeepAliveRepr::parse(r)?),
            PacketType::Ack => Body::Ack(AckRepr::parse(r)?),
            PacketType::Sack => Body::Sack(SackRepr::parse(r)?),
            PacketType::Msg | PacketType::Tagged => {
                Body::Msg(MsgRepr::parse(r, ptype == PacketType::Tagged, cq, ack)?)
            }
            PacketType::Rts => Body::Rts(RtsRepr::parse(r, fl & flags::TAGGED != 0, cq, ack)?),
            PacketType::Cts => Body::Cts(CtsRepr::parse(r, ack)?),
            PacketType::Data => Body::Data(DataRepr::parse(r, ack)?),
            PacketType::RmaWrite => Body::RmaWrite(RmaWriteRepr::parse(r, cq, ack)?),
            PacketType::ReadReq => Body::ReadReq(ReadReqRepr::parse(r, ack)?),
            PacketType::ReadResp => Body::ReadResp(ReadRespRepr::parse(r, ack)?),
            PacketType::AtomicReq => {
                Body::AtomicReq(AtomicReqRepr::parse(r, fl & flags::FETCH != 0, cq, ack)?)
            }
            PacketType::AtomicResp => Body::AtomicResp(AtomicRespRepr::parse(r, ack)?),
            PacketType::Dgram => Body::Dgram(DgramRepr::parse(r, cq)?),
            PacketType::Bundle => Body::Bundle(BundleRepr::parse(r, ack)?),
            PacketType::ConnReq => Body::ConnReq(CmRepr::parse(r)?),
            PacketType::Accept => Body::Accept(CmRepr::parse(r)?),
            PacketType::CmReject => Body::CmReject(CmRepr::parse(r)?),
            PacketType::Established => Body::Established(CmRepr::parse(r)?),
            PacketType::Shutdown => Body::Shutdown(CmRepr::parse(r)?),
            PacketType::ShutdownAck => Body::ShutdownAck(CmRepr::parse(r)?),
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
            Body::Hello(x) | Body::HelloAck(x) => x.emit(&mut w)?,
            Body::Reject(x) => x.emit(&mut w)?,
            Body::Retry(x) => x.emit(&mut w)?,
            Body::Close(x) | Body::Reset(x) => x.emit(&mut w)?,
            Body::KeepAlive(x) => x.emit(&mut w)?,
            Body::Ack(x) => w.ack(x)?,
            Body::Sack(x) => x.emit(&mut w)?,
            Body::Msg(x) => x.emit(&mut w)?,
            Body::Rts(x) => x.emit(&mut w)?,
            Body::Cts(x) => x.emit(&mut w)?,
            Body::Data(x) => x.emit(&mut w)?,
            Body::RmaWrite(x) => x.emit(&mut w)?,
            Body::ReadReq(x) => x.emit(&mut w)?,
            Body::ReadResp(x) => x.emit(&mut w)?,
            Body::AtomicReq(x) => x.emit(&mut w)?,
            Body::AtomicResp(x) => x.emit(&mut w)?,
            Body::Dgram(x) => x.emit(&mut w)?,
            Body::Bundle(x) => x.emit(&mut w)?,
            Body::ConnReq(x)
            | Body::Accept(x)
            | Body::CmReject(x)
            | Body::Established(x)
            | Body::Shutdown(x)
            | Body::ShutdownAck(x) => x.emit(&mut w)?,
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
