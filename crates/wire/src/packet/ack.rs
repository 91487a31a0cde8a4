//! ACK: the cumulative and selective acknowledgement with credits and timestamps, as an
//! ACK packet's body or piggybacked on a sequenced packet (flag `ACK`), in its full
//! 24-byte form or the 16-byte short form without `sack` (flag `SHORT_ACK`).

use zerocopy::network_endian::{U32, U64};

use super::codec::{Reader, Writer};
use super::{flags, hdr_len};
use crate::{Error, Result};

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
    /// with `sack == 0`, to a peer that announced [`caps::SHORT_ACK`](super::caps::SHORT_ACK).
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
    pub(super) const fn piggyback_flags(ack: Option<&AckRepr>) -> u16 {
        match ack {
            Some(a) if a.short => flags::ACK | flags::SHORT_ACK,
            Some(_) => flags::ACK,
            None => 0,
        }
    }

    /// [`Error::BadFlags`] for a short form with selective acks (it has no `sack`).
    pub(super) fn check(ack: Option<&AckRepr>) -> Result<()> {
        match ack {
            Some(a) if a.short && a.sack != 0 => Err(Error::BadFlags),
            _ => Ok(()),
        }
    }
}

impl AckRepr {
    /// The body of an ACK packet: the ACK body and nothing after it.
    #[inline]
    pub(super) fn parse(mut r: Reader<'_>) -> Result<AckRepr> {
        let a = r.ack()?;
        r.end()?;
        Ok(a)
    }

    /// The full form's fields.
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

    /// The full form on the wire.
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

impl Reader<'_> {
    /// A piggybacked ACK body, there when flag `ACK` is.
    pub(super) fn opt_ack(&mut self, present: bool) -> Result<Option<AckRepr>> {
        if present {
            Ok(Some(self.ack()?))
        } else {
            Ok(None)
        }
    }
    /// An ACK body, in the form flag `SHORT_ACK` says.
    pub(super) fn ack(&mut self) -> Result<AckRepr> {
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
}

impl Writer<'_> {
    /// Appends a piggybacked ACK body if there is one.
    pub(super) fn opt_ack(&mut self, v: &Option<AckRepr>) -> Result<()> {
        match v {
            Some(a) => self.ack(a),
            None => Ok(()),
        }
    }
    /// Appends an ACK body in its form (`a.short`).
    pub(super) fn ack(&mut self, a: &AckRepr) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    const ACK: AckRepr = AckRepr {
        cum_ack: 0x0102_0304,
        credits: 64,
        sack: 0,
        ts: 1000,
        echo_ts: 900,
        short: true,
    };

    /// `a` written and read back, and its length on the wire.
    fn round_trip(a: &AckRepr) -> (Result<AckRepr>, usize) {
        let mut buf = [0u8; 24];
        let mut w = Writer {
            buf: &mut buf,
            pos: 0,
        };
        w.ack(a).unwrap();
        let n = w.pos;
        let r = Reader {
            buf: &buf[..n],
            short_ack: a.short,
        };
        (AckRepr::parse(r), n)
    }

    #[test]
    fn both_forms_round_trip_at_their_length() {
        assert_eq!(round_trip(&ACK), (Ok(ACK), hdr_len::SHORT_ACK));
        assert_eq!(ACK.wire_len(), hdr_len::SHORT_ACK);
        let full = AckRepr {
            sack: 0b101,
            short: false,
            ..ACK
        };
        assert_eq!(round_trip(&full), (Ok(full), hdr_len::ACK));
        assert_eq!(full.wire_len(), hdr_len::ACK);
    }

    #[test]
    fn the_short_form_has_no_selective_acks() {
        let bad = AckRepr { sack: 1, ..ACK };
        assert_eq!(AckRepr::check(Some(&bad)), Err(Error::BadFlags));
        assert_eq!(AckRepr::check(Some(&ACK)), Ok(()));
        assert_eq!(AckRepr::check(None), Ok(()));
    }

    #[test]
    fn piggyback_flags_follow_the_form() {
        let full = AckRepr {
            short: false,
            ..ACK
        };
        assert_eq!(AckRepr::piggyback_flags(None), 0);
        assert_eq!(AckRepr::piggyback_flags(Some(&full)), flags::ACK);
        assert_eq!(
            AckRepr::piggyback_flags(Some(&ACK)),
            flags::ACK | flags::SHORT_ACK
        );
    }

    #[test]
    fn a_body_too_long_or_short_is_refused() {
        let bytes = [0u8; 20];
        let short = |n| Reader {
            buf: &bytes[..n],
            short_ack: true,
        };
        assert_eq!(AckRepr::parse(short(15)), Err(Error::Truncated));
        assert_eq!(AckRepr::parse(short(17)), Err(Error::BadLength));
        assert_eq!(short(16).opt_ack(false), Ok(None), "no flag, no body read");
    }
}
