//! Connection management of FI_EP_MSG endpoints (spec section 9): CONNREQ, ACCEPT,
//! CM_REJECT, ESTABLISHED, SHUTDOWN and SHUTDOWN_ACK. All are unsequenced; the base
//! header's `session` carries the connection id the connector chose (never 0), and
//! CONNREQ, ACCEPT and CM_REJECT carry the application's CM data as their payload.

use zerocopy::network_endian::U16;

use super::Header;
use super::codec::{Reader, Writer, ensure};
use crate::Result;

/// Largest CM data a CONNREQ, ACCEPT or CM_REJECT carries (fi_cm(3)'s `cm_data_size`
/// the provider reports): a 284-byte packet, which every IPv4 path carries unsegmented.
pub const CM_DATA_MAX: usize = 256;

/// CM_REJECT and SHUTDOWN reason codes. Unknown values are accepted and reported.
pub mod cm_reason {
    /// CM_REJECT: the listener's application refused (`fi_reject`); SHUTDOWN: an
    /// orderly `fi_shutdown` after every sequenced packet of the connection was acked.
    pub const APPLICATION: u16 = 0;
    /// CM_REJECT: no passive endpoint listens at the destination id.
    pub const NO_LISTENER: u16 = 1;
    /// CM_REJECT: the listener cannot open the connection (no endpoint slot).
    pub const NO_RESOURCES: u16 = 2;
    /// SHUTDOWN: the endpoint is closed with data possibly still unacknowledged.
    pub const ABORT: u16 = 3;
}

wire_struct!(
    /// The body header of every connection-management packet.
    CmHeader {
        /// [`cm_reason`] code (CM_REJECT, SHUTDOWN); zero on the other types.
        reason: U16,
        /// Zero.
        reserved: U16,
    }
);

/// A connection-management body: its reason and CM data (the payload).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CmRepr<'a> {
    /// [`cm_reason`] code; zero on CONNREQ, ACCEPT, ESTABLISHED and SHUTDOWN_ACK.
    pub reason: u16,
    /// CM data (at most [`CM_DATA_MAX`] bytes; empty on ESTABLISHED, SHUTDOWN and
    /// SHUTDOWN_ACK).
    pub data: &'a [u8],
}

impl<'a> CmRepr<'a> {
    /// A body with no reason and no data (ESTABLISHED, SHUTDOWN_ACK).
    pub const EMPTY: CmRepr<'static> = CmRepr {
        reason: 0,
        data: &[],
    };

    pub(super) fn parse(mut r: Reader<'a>) -> Result<CmRepr<'a>> {
        let h = r.take::<CmHeader>()?;
        ensure(h.reserved.get() == 0)?;
        Ok(CmRepr {
            reason: h.reason.get(),
            data: r.buf,
        })
    }

    pub(super) fn emit(&self, w: &mut Writer<'_>) -> Result<()> {
        w.put_hdr(&CmHeader {
            reason: U16::new(self.reason),
            reserved: U16::ZERO,
        })?;
        w.put(self.data)
    }

    /// Every CM packet names its connection; only the data-bearing types carry data
    /// (at most [`CM_DATA_MAX`]) and only CM_REJECT and SHUTDOWN a reason.
    pub(super) fn check(&self, header: &Header, data: bool, reason: bool) -> Result<()> {
        ensure(
            header.session != 0
                && self.data.len() <= if data { CM_DATA_MAX } else { 0 }
                && (reason || self.reason == 0),
        )
    }
}
