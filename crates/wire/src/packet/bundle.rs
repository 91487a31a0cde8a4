//! BUNDLE: several whole small MSG / TAGGED messages in one sequenced packet, and the
//! writers the bundling send path uses instead of a [`Repr`](super::Repr).

use zerocopy::IntoBytes;
use zerocopy::network_endian::{U16, U32};

use super::codec::{Reader, Writer};
use super::{AckRepr, BASE_LEN, BaseHeader, Header, MsgRepr, PacketType, flags, hdr_len};
use crate::{Error, Result};

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
    pub(super) fn check(&self) -> Result<()> {
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

    /// A BUNDLE body, with the piggybacked ACK if `ack` (the flag); the rest of the
    /// body is the records (checked by [`check`](Self::check)).
    #[inline]
    pub(super) fn parse(mut r: Reader<'a>, ack: bool) -> Result<BundleRepr<'a>> {
        let h = r.take::<BundleHeader>()?;
        let ack = r.opt_ack(ack)?;
        if h.reserved.get() != 0 {
            return Err(Error::Malformed);
        }
        Ok(BundleRepr {
            count: h.count.get(),
            records: r.buf,
            ack,
        })
    }

    /// Appends the body after the base header (as [`Repr::emit`](super::Repr::emit) does).
    #[inline]
    pub(super) fn emit(&self, w: &mut Writer<'_>) -> Result<()> {
        w.put_hdr(&BundleHeader {
            count: self.count.into(),
            reserved: 0.into(),
        })?;
        w.opt_ack(&self.ack)?;
        w.put(self.records)
    }
}

/// Iterator over the messages of a [`BundleRepr`].
#[derive(Debug, Clone)]
pub struct BundleMsgs<'a> {
    rest: &'a [u8],
    left: u16,
}

impl<'a> BundleMsgs<'a> {
    /// The next record, or why it is malformed.
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
/// calls [`Packet::fill_checksum`](super::Packet::fill_checksum) once the records are in place. Returns the header
/// length. Like [`emit_msg_header`](super::emit_msg_header), this builds no [`Repr`](super::Repr); a bundle it writes parses
/// as [`Repr::emit`](super::Repr::emit) would have written it (tested).
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Records for messages `ids` (each with payload `[id as u8]`, the second tagged).
    fn records(ids: &[u32], buf: &mut [u8]) -> usize {
        let mut at = 0;
        for (i, &id) in ids.iter().enumerate() {
            let tag = (i == 1).then_some(0x77);
            at += emit_bundle_record(&mut buf[at..], id, tag, None, 1).unwrap();
            buf[at] = id as u8;
            at += 1;
        }
        at
    }

    #[test]
    fn records_read_back_in_order() {
        let mut buf = [0u8; 64];
        let n = records(&[5, 6, 7], &mut buf);
        assert_eq!(n, 3 * (hdr_len::BUNDLE_REC + 1) + 8);
        let b = BundleRepr {
            count: 3,
            records: &buf[..n],
            ack: None,
        };
        assert_eq!(b.check(), Ok(()));
        let got: [(u32, Option<u64>, u8); 3] = {
            let mut it = b.msgs().map(|m| (m.msg_id, m.tag, m.payload[0]));
            [it.next().unwrap(), it.next().unwrap(), it.next().unwrap()]
        };
        assert_eq!(got, [(5, None, 5), (6, Some(0x77), 6), (7, None, 7)]);
        assert_eq!(b.msgs().count(), 3);
        let m = b.msgs().nth(1).unwrap();
        assert_eq!(m.record_len(), bundle_record_len(true, false, 1));
        assert_eq!((m.as_msg().total_len, m.as_msg().tag), (1, Some(0x77)));
    }

    #[test]
    fn malformed_records_are_refused_and_stop_the_iterator() {
        let mut buf = [0u8; 64];
        let n = records(&[5, 7], &mut buf);
        let gap = BundleRepr {
            count: 2,
            records: &buf[..n],
            ack: None,
        };
        assert_eq!(gap.check(), Err(Error::Malformed), "ids not consecutive");
        let extra = BundleRepr { count: 1, ..gap };
        assert_eq!(extra.check(), Err(Error::BadLength), "bytes after the last");
        let empty = BundleRepr { count: 0, ..gap };
        assert_eq!(empty.check(), Err(Error::Malformed));
        let cut = BundleRepr {
            count: 2,
            records: &buf[..n - 1],
            ack: None,
        };
        assert_eq!(cut.check(), Err(Error::BadLength));
        assert_eq!(
            cut.msgs().count(),
            1,
            "the iterator stops at the bad record"
        );
    }
}
