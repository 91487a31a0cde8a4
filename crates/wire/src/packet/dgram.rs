//! DGRAM: the unreliable datagram of an FI_EP_DGRAM endpoint (no session, no type
//! header, one packet per message).

use super::codec::{Reader, Writer, ensure};
use super::{BASE_LEN, Header, hdr_len};
use crate::Result;

/// Largest DGRAM payload in a packet of at most `max_pkt` bytes. DGRAM is never
/// segmented, so this is also the largest message an FI_EP_DGRAM endpoint can send on a
/// path whose packets are limited to `max_pkt` bytes.
pub const fn max_dgram_payload(max_pkt: usize, cq_data: bool) -> usize {
    max_pkt.saturating_sub(BASE_LEN + hdr_len::DGRAM + if cq_data { 8 } else { 0 })
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

impl<'a> DgramRepr<'a> {
    /// A DGRAM body: CQ data if `cq` (the flag), then the message.
    #[inline]
    pub(super) fn parse(mut r: Reader<'a>, cq: bool) -> Result<DgramRepr<'a>> {
        let cq_data = r.opt_u64(cq)?;
        Ok(DgramRepr {
            cq_data,
            payload: r.buf,
        })
    }

    /// Appends the body after the base header (as [`Repr::emit`](super::Repr::emit) does).
    #[inline]
    pub(super) fn emit(&self, w: &mut Writer<'_>) -> Result<()> {
        w.opt_u64(self.cq_data)?;
        w.put(self.payload)
    }

    /// A datagram belongs to no session.
    pub(super) fn check(&self, header: &Header) -> Result<()> {
        ensure(header.session == 0)
    }
}
