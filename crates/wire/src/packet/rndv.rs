//! Rendezvous for large messages: RTS (request to send), CTS (clear to send, a grant of
//! a byte range) and DATA (the granted bytes).

use zerocopy::network_endian::{U16, U32, U64};

use super::codec::{Reader, Writer, ensure};
use super::{AckRepr, BASE_LEN, hdr_len, status};
use crate::{Error, Result};

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

/// Largest rendezvous DATA payload in a packet of at most `max_pkt` bytes.
pub const fn max_data_payload(max_pkt: usize) -> usize {
    max_pkt.saturating_sub(BASE_LEN + hdr_len::DATA)
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

impl RtsRepr {
    /// An RTS body, with a tag if `tagged`, CQ data if `cq` and the piggybacked ACK if
    /// `ack` (the flags); no payload.
    #[inline]
    pub(super) fn parse(mut r: Reader<'_>, tagged: bool, cq: bool, ack: bool) -> Result<RtsRepr> {
        let h = r.take::<RtsHeader>()?;
        let tag = r.opt_u64(tagged)?;
        let cq_data = r.opt_u64(cq)?;
        let ack = r.opt_ack(ack)?;
        r.end()?;
        Ok(RtsRepr {
            op_id: h.op_id.get(),
            msg_id: h.msg_id.get(),
            total_len: h.total_len.get(),
            tag,
            cq_data,
            ack,
        })
    }

    /// Appends the body after the base header (as [`Repr::emit`](super::Repr::emit) does).
    #[inline]
    pub(super) fn emit(&self, w: &mut Writer<'_>) -> Result<()> {
        w.put_hdr(&RtsHeader {
            op_id: self.op_id.into(),
            msg_id: self.msg_id.into(),
            total_len: self.total_len.into(),
        })?;
        w.opt_u64(self.tag)?;
        w.opt_u64(self.cq_data)?;
        w.opt_ack(&self.ack)
    }
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

impl CtsRepr {
    /// A CTS body, with the piggybacked ACK if `ack` (the flag); no payload.
    #[inline]
    pub(super) fn parse(mut r: Reader<'_>, ack: bool) -> Result<CtsRepr> {
        let h = r.take::<CtsHeader>()?;
        let ack = r.opt_ack(ack)?;
        r.end()?;
        if h.reserved.get() != 0 {
            return Err(Error::Malformed);
        }
        Ok(CtsRepr {
            rts_op_id: h.rts_op_id.get(),
            rx_op_id: h.rx_op_id.get(),
            offset: h.offset.get(),
            len: h.len.get(),
            status: h.status.get(),
            ack,
        })
    }

    /// Appends the body after the base header (as [`Repr::emit`](super::Repr::emit) does).
    #[inline]
    pub(super) fn emit(&self, w: &mut Writer<'_>) -> Result<()> {
        w.put_hdr(&CtsHeader {
            rts_op_id: self.rts_op_id.into(),
            rx_op_id: self.rx_op_id.into(),
            offset: self.offset.into(),
            len: self.len.into(),
            status: self.status.into(),
            reserved: 0.into(),
        })?;
        w.opt_ack(&self.ack)
    }

    /// A refusal grants nothing.
    pub(super) fn check(&self) -> Result<()> {
        ensure(self.status == status::OK || self.len == 0)
    }
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

impl<'a> DataRepr<'a> {
    /// A DATA body, with the piggybacked ACK if `ack` (the flag); the rest of the body
    /// is the payload.
    #[inline]
    pub(super) fn parse(mut r: Reader<'a>, ack: bool) -> Result<DataRepr<'a>> {
        let h = r.take::<DataHeader>()?;
        let ack = r.opt_ack(ack)?;
        Ok(DataRepr {
            rx_op_id: h.rx_op_id.get(),
            offset: h.offset.get(),
            ack,
            payload: r.buf,
        })
    }

    /// Appends the body after the base header (as [`Repr::emit`](super::Repr::emit) does).
    #[inline]
    pub(super) fn emit(&self, w: &mut Writer<'_>) -> Result<()> {
        w.put_hdr(&DataHeader {
            rx_op_id: self.rx_op_id.into(),
            offset: self.offset.into(),
        })?;
        w.opt_ack(&self.ack)?;
        w.put(self.payload)
    }

    /// The payload's end is a 64-bit offset.
    pub(super) fn check(&self) -> Result<()> {
        if self.offset.checked_add(self.payload.len() as u64).is_none() {
            return Err(Error::BadLength);
        }
        Ok(())
    }
}
