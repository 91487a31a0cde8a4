//! KEEPALIVE: the liveness probe of an idle session, which also samples the RTT.

use zerocopy::network_endian::U32;

use super::codec::{Reader, Writer};
use crate::Result;

wire_struct!(
    /// KEEPALIVE body.
    KeepAliveHeader {
        /// Sender's clock, microseconds, wrapping.
        ts: U32,
        /// The latest `ts` received from the peer (0 if none).
        echo_ts: U32,
    }
);

/// KEEPALIVE.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeepAliveRepr {
    /// Sender's clock (µs, wrapping).
    pub ts: u32,
    /// Latest peer `ts` seen.
    pub echo_ts: u32,
}

impl KeepAliveRepr {
    /// The body; nothing may follow it.
    #[inline]
    pub(super) fn parse(mut r: Reader<'_>) -> Result<KeepAliveRepr> {
        let h = r.take::<KeepAliveHeader>()?;
        r.end()?;
        Ok(KeepAliveRepr {
            ts: h.ts.get(),
            echo_ts: h.echo_ts.get(),
        })
    }

    /// Appends the body after the base header (as [`Repr::emit`](super::Repr::emit) does).
    #[inline]
    pub(super) fn emit(&self, w: &mut Writer<'_>) -> Result<()> {
        w.put_hdr(&KeepAliveHeader {
            ts: self.ts.into(),
            echo_ts: self.echo_ts.into(),
        })
    }
}
