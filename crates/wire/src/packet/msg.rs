//! MSG and TAGGED: one segment of an eager message, and the per-message send path's
//! header writer ([`emit_msg_header`](super::emit_msg_header)).

use zerocopy::IntoBytes;
use zerocopy::network_endian::U32;

use super::codec::{Reader, Writer, fits};
use super::{AckRepr, BASE_LEN, BaseHeader, Header, PacketType, flags, hdr_len};
use crate::{Error, Result};

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

/// Largest eager MSG/TAGGED payload in a packet of at most `max_pkt` bytes.
pub const fn max_msg_payload(max_pkt: usize, tagged: bool, cq_data: bool) -> usize {
    let h = BASE_LEN + hdr_len::MSG + if tagged { 8 } else { 0 } + if cq_data { 8 } else { 0 };
    max_pkt.saturating_sub(h)
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

    /// A MSG (`tagged` false) or TAGGED body, with CQ data if `cq` and the piggybacked
    /// ACK if `ack` (the flags); the rest of the body is the payload.
    #[inline]
    pub(super) fn parse<'a>(
        mut r: Reader<'a>,
        tagged: bool,
        cq: bool,
        ack: bool,
    ) -> Result<MsgRepr<'a>> {
        let h = r.take::<MsgHeader>()?;
        let tag = r.opt_u64(tagged)?;
        let cq_data = r.opt_u64(cq)?;
        let ack = r.opt_ack(ack)?;
        Ok(MsgRepr {
            msg_id: h.msg_id.get(),
            total_len: h.total_len.get(),
            offset: h.offset.get(),
            tag,
            cq_data,
            ack,
            payload: r.buf,
        })
    }

    /// Appends the body after the base header (as [`Repr::emit`](super::Repr::emit) does).
    #[inline]
    pub(super) fn emit(&self, w: &mut Writer<'_>) -> Result<()> {
        w.put_hdr(&MsgHeader {
            msg_id: self.msg_id.into(),
            total_len: self.total_len.into(),
            offset: self.offset.into(),
        })?;
        w.opt_u64(self.tag)?;
        w.opt_u64(self.cq_data)?;
        w.opt_ack(&self.ack)?;
        w.put(self.payload)
    }

    /// The segment lies within the message.
    pub(super) fn check(&self) -> Result<()> {
        if !fits(
            self.offset as u64,
            self.payload.len(),
            self.total_len as u64,
        ) {
            return Err(Error::BadLength);
        }
        Ok(())
    }
}

/// Writes the headers of a MSG or TAGGED packet (base header, MSG header, tag, CQ data
/// and piggybacked ACK, as [`Repr::emit`](super::Repr::emit) would for a [`MsgRepr`]) straight into `buf`,
/// for a payload of `payload_len` bytes that the caller then writes at
/// `buf[header_len..]`; `m.payload` is not used. The per-message send path uses it: it
/// builds no [`Repr`](super::Repr) and copies no payload twice. The checksum is left zero; with
/// `h.crc` the caller calls [`Packet::fill_checksum`](super::Packet::fill_checksum) once the payload is in place.
/// Returns the header length; the same errors as [`Repr::emit`](super::Repr::emit).
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
