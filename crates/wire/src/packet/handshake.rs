//! Session set-up and tear-down: HELLO / HELLO_ACK (versions, session ids, window,
//! capabilities, auth proof), REJECT, and CLOSE / RESET with their reason codes.

use core::mem::size_of;

use zerocopy::network_endian::{U16, U32, U64};

use super::codec::{Reader, Writer, ensure};
use super::{AckRepr, Header};
use crate::{Error, Result};

/// Smallest `max_pkt` a peer may announce: every fixed header plus optional fields fits.
pub const MIN_MAX_PKT: u16 = 256;
/// Length of the handshake proof of the auth key (HMAC-SHA-256 output).
pub const MAC_LEN: usize = 32;
/// Auth algorithm id for "no proof" in hello / hello-ack.
pub const AUTH_NONE: u8 = 0;
/// Auth algorithm id for HMAC-SHA-256 over the handshake transcript (see the spec).
pub const AUTH_HMAC_SHA256: u8 = 1;
/// Length of a stateless-handshake cookie (RETRY, and a HELLO echoing it).
pub const COOKIE_LEN: usize = 16;
/// HELLO `hflags` bit: a [`COOKIE_LEN`]-byte cookie follows the HELLO header.
pub const HELLO_COOKIE: u8 = 0x01;

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
    /// The sender of this HELLO understands RETRY: a responder may answer it with a
    /// cookie instead of a session (stateless handshake, spec 4.2).
    pub const COOKIE: u64 = 1 << 10;
    /// The sender has an `auth_key` and puts a MAC on every packet of the session
    /// (spec 4.10); a keyed receiver refuses a handshake without it.
    pub const AUTH_MAC: u64 = 1 << 11;
    /// The sender speaks FI_EP_MSG connection management (spec section 9).
    pub const CM: u64 = 1 << 14;
    /// The receiver takes SACK packets (selective-ack ranges beyond the bitmap, spec
    /// 5.6): windows above 64 packets are used only with a peer that announced it.
    pub const SACK_RANGES: u64 = 1 << 12;
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

wire_struct!(
    /// HELLO and HELLO_ACK body (36 bytes, then the MAC if any).
    HelloHeader {
        /// Lowest protocol version the sender speaks (HELLO_ACK: the chosen version).
        ver_min: u8,
        /// Highest protocol version the sender speaks (HELLO_ACK: the chosen version).
        ver_max: u8,
        /// [`AUTH_NONE`] or [`AUTH_HMAC_SHA256`]; selects the MAC length.
        auth_alg: u8,
        /// [`HELLO_COOKIE`] or zero (always zero in HELLO_ACK).
        hflags: u8,
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
    /// RETRY body.
    RetryHeader {
        /// The cookie the initiator echoes in its next HELLO.
        cookie: [u8; COOKIE_LEN],
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
    /// The responder's cookie echoed from its RETRY (HELLO only; flag [`HELLO_COOKIE`]),
    /// between the header and the MAC.
    pub cookie: Option<[u8; COOKIE_LEN]>,
    /// HMAC-SHA-256 proof of the domain's auth key ([`AUTH_HMAC_SHA256`]) or none.
    pub mac: Option<[u8; MAC_LEN]>,
}

impl HelloRepr {
    /// A HELLO or HELLO_ACK body: the header, the MAC its `auth_alg` announces, nothing
    /// after.
    #[inline]
    pub(super) fn parse(mut r: Reader<'_>) -> Result<HelloRepr> {
        let h = *r.take::<HelloHeader>()?;
        let cookie = match h.hflags {
            0 => None,
            HELLO_COOKIE => Some(r.bytes::<COOKIE_LEN>()?),
            _ => return Err(Error::Malformed),
        };
        let mac = match h.auth_alg {
            AUTH_NONE => None,
            AUTH_HMAC_SHA256 => Some(r.bytes::<MAC_LEN>()?),
            _ => return Err(Error::Malformed),
        };
        r.end()?;
        Ok(HelloRepr {
            ver_min: h.ver_min,
            ver_max: h.ver_max,
            rx_session: h.rx_session.get(),
            isn: h.isn.get(),
            window: h.window.get(),
            max_pkt: h.max_pkt.get(),
            credits: h.credits.get(),
            caps: h.caps.get(),
            nonce: h.nonce.get(),
            cookie,
            mac,
        })
    }

    /// Appends the body after the base header (as [`Repr::emit`](super::Repr::emit) does).
    #[inline]
    pub(super) fn emit(&self, w: &mut Writer<'_>) -> Result<()> {
        w.put_hdr(&HelloHeader {
            ver_min: self.ver_min,
            ver_max: self.ver_max,
            auth_alg: if self.mac.is_some() {
                AUTH_HMAC_SHA256
            } else {
                AUTH_NONE
            },
            hflags: if self.cookie.is_some() {
                HELLO_COOKIE
            } else {
                0
            },
            rx_session: self.rx_session.into(),
            isn: self.isn.into(),
            window: self.window.into(),
            max_pkt: self.max_pkt.into(),
            credits: self.credits.into(),
            caps: self.caps.into(),
            nonce: self.nonce.into(),
        })?;
        if let Some(c) = &self.cookie {
            w.put(c)?;
        }
        if let Some(mac) = &self.mac {
            w.put(mac)?;
        }
        Ok(())
    }

    /// Length of the body: header, cookie and MAC.
    pub const fn wire_len(&self) -> usize {
        size_of::<HelloHeader>()
            + if self.cookie.is_some() { COOKIE_LEN } else { 0 }
            + if self.mac.is_some() { MAC_LEN } else { 0 }
    }

    /// The rules of a HELLO (`hello`) or HELLO_ACK in a packet with base header
    /// fields `header`: versions in order (one chosen in HELLO_ACK), nonzero session id
    /// and window, `max_pkt` at least [`MIN_MAX_PKT`], `session` 0 only in HELLO, a
    /// cookie only in HELLO.
    pub(super) fn check(&self, hello: bool, header: &Header) -> Result<()> {
        ensure(
            self.ver_min >= 1
                && self.ver_min <= self.ver_max
                && (hello || self.ver_min == self.ver_max)
                && self.rx_session != 0
                && self.window != 0
                && self.max_pkt >= MIN_MAX_PKT
                && (!hello || header.session == 0)
                && (hello || header.session != 0)
                && (hello || self.cookie.is_none()),
        )
    }
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

impl RejectRepr {
    /// The body; nothing may follow it.
    #[inline]
    pub(super) fn parse(mut r: Reader<'_>) -> Result<RejectRepr> {
        let h = r.take::<RejectHeader>()?;
        r.end()?;
        Ok(RejectRepr {
            reason: h.reason.get(),
            ver_min: h.ver_min,
            ver_max: h.ver_max,
        })
    }

    /// Appends the body after the base header (as [`Repr::emit`](super::Repr::emit) does).
    #[inline]
    pub(super) fn emit(&self, w: &mut Writer<'_>) -> Result<()> {
        w.put_hdr(&RejectHeader {
            reason: self.reason.into(),
            ver_min: self.ver_min,
            ver_max: self.ver_max,
        })
    }

    /// The rejecter's version range is in order.
    pub(super) fn check(&self) -> Result<()> {
        ensure(self.ver_min <= self.ver_max)
    }
}

/// RETRY: the responder's stateless answer to a HELLO (spec 4.2): repeat the HELLO
/// with this cookie.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RetryRepr {
    /// Opaque to the initiator; the responder's keyed, time-stamped proof.
    pub cookie: [u8; COOKIE_LEN],
}

impl RetryRepr {
    /// The body; nothing may follow it.
    #[inline]
    pub(super) fn parse(mut r: Reader<'_>) -> Result<RetryRepr> {
        let h = r.take::<RetryHeader>()?;
        r.end()?;
        Ok(RetryRepr { cookie: h.cookie })
    }

    /// Appends the body after the base header (as [`Repr::emit`](super::Repr::emit) does).
    #[inline]
    pub(super) fn emit(&self, w: &mut Writer<'_>) -> Result<()> {
        w.put_hdr(&RetryHeader {
            cookie: self.cookie,
        })
    }
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

impl CloseRepr {
    /// A CLOSE or RESET body, with the piggybacked ACK if `ack` (the flag).
    #[inline]
    pub(super) fn parse(mut r: Reader<'_>, ack: bool) -> Result<CloseRepr> {
        let h = r.take::<CloseHeader>()?;
        let ack = r.opt_ack(ack)?;
        r.end()?;
        if h.reserved.get() != 0 {
            return Err(Error::Malformed);
        }
        Ok(CloseRepr {
            reason: h.reason.get(),
            ack,
        })
    }

    /// Appends the body after the base header (as [`Repr::emit`](super::Repr::emit) does).
    #[inline]
    pub(super) fn emit(&self, w: &mut Writer<'_>) -> Result<()> {
        w.put_hdr(&CloseHeader {
            reason: self.reason.into(),
            reserved: 0.into(),
        })?;
        w.opt_ack(&self.ack)
    }
}
