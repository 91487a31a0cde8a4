//! RMA: RMA_WRITE segments, READ_REQ and the READ_RESP segments that answer it.

use zerocopy::network_endian::{U16, U32, U64};

use super::codec::{Reader, Writer, ensure, fits};
use super::{AckRepr, BASE_LEN, hdr_len, status};
use crate::{Error, Result};

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

/// Largest RMA_WRITE payload in a packet of at most `max_pkt` bytes.
pub const fn max_rma_write_payload(max_pkt: usize, cq_data: bool) -> usize {
    max_pkt.saturating_sub(BASE_LEN + hdr_len::RMA_WRITE + if cq_data { 8 } else { 0 })
}

/// Largest READ_RESP payload in a packet of at most `max_pkt` bytes.
pub const fn max_read_resp_payload(max_pkt: usize) -> usize {
    max_pkt.saturating_sub(BASE_LEN + hdr_len::READ_RESP)
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

impl<'a> RmaWriteRepr<'a> {
    /// An RMA_WRITE body, with CQ data if `cq` and the piggybacked ACK if `ack` (the
    /// flags); the rest of the body is the payload.
    #[inline]
    pub(super) fn parse(mut r: Reader<'a>, cq: bool, ack: bool) -> Result<RmaWriteRepr<'a>> {
        let h = r.take::<RmaWriteHeader>()?;
        let cq_data = r.opt_u64(cq)?;
        let ack = r.opt_ack(ack)?;
        Ok(RmaWriteRepr {
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

    /// Appends the body after the base header (as [`Repr::emit`](super::Repr::emit) does).
    #[inline]
    pub(super) fn emit(&self, w: &mut Writer<'_>) -> Result<()> {
        w.put_hdr(&RmaWriteHeader {
            key: self.key.into(),
            addr: self.addr.into(),
            op_id: self.op_id.into(),
            total_len: self.total_len.into(),
            offset: self.offset.into(),
        })?;
        w.opt_u64(self.cq_data)?;
        w.opt_ack(&self.ack)?;
        w.put(self.payload)
    }

    /// The segment lies within the operation, and the operation within the address
    /// space.
    pub(super) fn check(&self) -> Result<()> {
        if !fits(self.offset, self.payload.len(), self.total_len) {
            return Err(Error::BadLength);
        }
        ensure(self.addr.checked_add(self.total_len).is_some())
    }
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

impl ReadReqRepr {
    /// A READ_REQ body, with the piggybacked ACK if `ack` (the flag); no payload.
    #[inline]
    pub(super) fn parse(mut r: Reader<'_>, ack: bool) -> Result<ReadReqRepr> {
        let h = r.take::<ReadReqHeader>()?;
        let ack = r.opt_ack(ack)?;
        r.end()?;
        Ok(ReadReqRepr {
            ack,
            key: h.key.get(),
            addr: h.addr.get(),
            len: h.len.get(),
            op_id: h.op_id.get(),
        })
    }

    /// Appends the body after the base header (as [`Repr::emit`](super::Repr::emit) does).
    #[inline]
    pub(super) fn emit(&self, w: &mut Writer<'_>) -> Result<()> {
        w.put_hdr(&ReadReqHeader {
            key: self.key.into(),
            addr: self.addr.into(),
            len: self.len.into(),
            op_id: self.op_id.into(),
        })?;
        w.opt_ack(&self.ack)
    }

    /// The range lies within the address space.
    pub(super) fn check(&self) -> Result<()> {
        ensure(self.addr.checked_add(self.len).is_some())
    }
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

impl<'a> ReadRespRepr<'a> {
    /// A READ_RESP body, with the piggybacked ACK if `ack` (the flag); the rest of the
    /// body is the payload.
    #[inline]
    pub(super) fn parse(mut r: Reader<'a>, ack: bool) -> Result<ReadRespRepr<'a>> {
        let h = r.take::<ReadRespHeader>()?;
        let ack = r.opt_ack(ack)?;
        if h.reserved.get() != 0 {
            return Err(Error::Malformed);
        }
        Ok(ReadRespRepr {
            ack,
            op_id: h.op_id.get(),
            status: h.status.get(),
            offset: h.offset.get(),
            payload: r.buf,
        })
    }

    /// Appends the body after the base header (as [`Repr::emit`](super::Repr::emit) does).
    #[inline]
    pub(super) fn emit(&self, w: &mut Writer<'_>) -> Result<()> {
        w.put_hdr(&ReadRespHeader {
            op_id: self.op_id.into(),
            status: self.status.into(),
            reserved: 0.into(),
            offset: self.offset.into(),
        })?;
        w.opt_ack(&self.ack)?;
        w.put(self.payload)
    }

    /// The payload's end is a 64-bit offset, and a failure carries none.
    pub(super) fn check(&self) -> Result<()> {
        if self.offset.checked_add(self.payload.len() as u64).is_none() {
            return Err(Error::BadLength);
        }
        ensure(self.status == status::OK || self.payload.is_empty())
    }
}
