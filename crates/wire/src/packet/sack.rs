//! SACK (type 0x09): an ACK whose selective acks reach beyond the 64-bit bitmap, as
//! ranges (spec 5.6). Sent only to a peer that announced
//! [`caps::SACK_RANGES`](super::caps::SACK_RANGES); windows of up to 1,024 packets
//! (and more) then keep loss recovery to one round trip for every hole at once.
//!
//! Ranges, not a larger bitmap: at 1% loss a 1,024-packet window has about ten holes,
//! which ten 4-byte ranges describe where a bitmap needs 128 bytes on every ACK; and
//! the bounded list keeps [`SackRepr`] `Copy` and no larger than the largest body.

use zerocopy::network_endian::U16;

use super::ack::AckRepr;
use super::codec::{Reader, Writer};
use crate::{Error, Result};

/// Ranges one SACK carries at most (more holes: the lowest go first, the next ACK
/// reports the others once the cumulative ack moved).
pub const MAX_RANGES: usize = 15;

/// The first offset from `cum_ack` the ranges describe: the bitmap covers
/// `cum_ack + 1 ..= cum_ack + 64`.
pub const RANGES_FROM: u32 = 65;

/// Offsets the ranges can reach (exclusive): `cum_ack + 65536` and beyond is never
/// described (no window is that large).
pub const RANGES_END: u32 = 1 << 16;

wire_struct!(
    /// What follows the ACK body in a SACK.
    SackHeader {
        /// Ranges that follow (1 ..= [`MAX_RANGES`]).
        count: u8,
        /// 0.
        reserved: u8,
    }
);

wire_struct!(
    /// One range on the wire, relative to where the previous one ended.
    SackRangeRec {
        /// Missing packets before the range (from `cum_ack + 65` for the first range,
        /// 0 allowed; from the previous range's end for the others, at least 1).
        gap: U16,
        /// Packets received in the range (at least 1).
        len: U16,
    }
);

/// Received packets beyond the bitmap: ascending, disjoint, non-adjacent ranges of
/// offsets from `cum_ack`, each `start .. start + len`, all within
/// [`RANGES_FROM`] .. [`RANGES_END`]. Built by the receiver one offset at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SackRanges {
    n: u8,
    start: [u16; MAX_RANGES],
    len: [u16; MAX_RANGES],
}

impl Default for SackRanges {
    fn default() -> Self {
        SackRanges::EMPTY
    }
}

impl SackRanges {
    /// No range.
    pub const EMPTY: SackRanges = SackRanges {
        n: 0,
        start: [0; MAX_RANGES],
        len: [0; MAX_RANGES],
    };

    /// Ranges held.
    #[inline]
    pub const fn len(&self) -> usize {
        self.n as usize
    }

    /// No range held.
    #[inline]
    pub const fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The offsets after the last range's end can still be added.
    pub const fn is_full(&self) -> bool {
        self.n as usize == MAX_RANGES
    }

    /// Range `i` as (first offset, packets).
    pub fn get(&self, i: usize) -> Option<(u32, u32)> {
        (i < self.len()).then(|| (u32::from(self.start[i]), u32::from(self.len[i])))
    }

    /// Every range as (first offset, packets), ascending.
    pub fn iter(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        (0..self.len()).filter_map(|i| self.get(i))
    }

    /// Packets the ranges acknowledge.
    pub fn packets(&self) -> u32 {
        self.iter().map(|(_, l)| l).sum()
    }

    /// Whether offset `off` lies in a range.
    pub fn contains(&self, off: u32) -> bool {
        self.iter().any(|(s, l)| s <= off && off < s + l)
    }

    /// Adds offset `off` (received): it extends the last range when adjacent to it,
    /// else starts a new one. `false` (nothing changed) when `off` is not above every
    /// offset held, outside [`RANGES_FROM`] .. [`RANGES_END`], or a new range is
    /// needed and [`MAX_RANGES`] are held.
    pub fn push(&mut self, off: u32) -> bool {
        if !(RANGES_FROM..RANGES_END).contains(&off) {
            return false;
        }
        if let Some(i) = self.len().checked_sub(1) {
            let end = u32::from(self.start[i]) + u32::from(self.len[i]);
            if off < end {
                return false;
            }
            if off == end {
                self.len[i] += 1;
                return true;
            }
        }
        if self.is_full() {
            return false;
        }
        let i = self.len();
        self.start[i] = off as u16;
        self.len[i] = 1;
        self.n += 1;
        true
    }

    /// Adds the `n` offsets `off .. off + n` (at least one), as `n` calls of
    /// [`SackRanges::push`] would, in one step: a receiver that finds its held packets
    /// a word of a bitmap at a time adds whole runs. `false` (nothing changed) when
    /// `push(off)` would be, or the run ends beyond [`RANGES_END`].
    pub fn push_run(&mut self, off: u32, n: u32) -> bool {
        if n == 0 || off.checked_add(n).is_none_or(|e| e > RANGES_END) || !self.push(off) {
            return false;
        }
        let i = self.len() - 1;
        // `push` made the run's first offset part of range `i`; the rest follows it.
        self.len[i] += (n - 1) as u16;
        true
    }

    /// Bytes on the wire.
    pub const fn wire_len(&self) -> usize {
        size_of::<SackHeader>() + self.len() * size_of::<SackRangeRec>()
    }

    /// The ranges after a SACK's ACK body: at least one, each well formed.
    fn parse(r: &mut Reader<'_>) -> Result<SackRanges> {
        let h = r.take::<SackHeader>()?;
        if h.count == 0 || h.count as usize > MAX_RANGES || h.reserved != 0 {
            return Err(Error::Malformed);
        }
        let mut s = SackRanges::EMPTY;
        let mut end = RANGES_FROM;
        for i in 0..h.count as usize {
            let rec = r.take::<SackRangeRec>()?;
            let (gap, len) = (u32::from(rec.gap.get()), u32::from(rec.len.get()));
            if len == 0 || (i > 0 && gap == 0) {
                return Err(Error::Malformed);
            }
            let start = end + gap;
            end = start + len;
            if end > RANGES_END {
                return Err(Error::Malformed);
            }
            s.start[i] = start as u16;
            s.len[i] = len as u16;
        }
        s.n = h.count;
        Ok(s)
    }

    /// Appends the ranges ([`Error::Malformed`] for none: a SACK has at least one).
    fn emit(&self, w: &mut Writer<'_>) -> Result<()> {
        if self.is_empty() {
            return Err(Error::Malformed);
        }
        w.put_hdr(&SackHeader {
            count: self.n,
            reserved: 0,
        })?;
        let mut end = RANGES_FROM;
        for (start, len) in self.iter() {
            w.put_hdr(&SackRangeRec {
                gap: ((start - end) as u16).into(),
                len: (len as u16).into(),
            })?;
            end = start + len;
        }
        Ok(())
    }
}

/// SACK: the full ACK body (bitmap included, never the short form) and ranges beyond it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SackRepr {
    /// The acknowledgement; `short` is false.
    pub ack: AckRepr,
    /// Packets received beyond `ack.cum_ack + 64`.
    pub ranges: SackRanges,
}

impl SackRepr {
    /// Bytes of the body on the wire.
    pub const fn wire_len(&self) -> usize {
        super::hdr_len::ACK + self.ranges.wire_len()
    }

    /// The body of a SACK packet: an ACK body, ranges, nothing after them.
    pub(super) fn parse(mut r: Reader<'_>) -> Result<SackRepr> {
        if r.short_ack {
            return Err(Error::BadFlags);
        }
        let ack = r.ack()?;
        let ranges = SackRanges::parse(&mut r)?;
        r.end()?;
        Ok(SackRepr { ack, ranges })
    }

    /// [`Error::BadFlags`] for a short ACK body, [`Error::Malformed`] without ranges.
    pub(super) fn check(&self) -> Result<()> {
        if self.ack.short {
            return Err(Error::BadFlags);
        }
        super::codec::ensure(!self.ranges.is_empty())
    }

    /// Appends the body.
    pub(super) fn emit(&self, w: &mut Writer<'_>) -> Result<()> {
        w.ack(&self.ack)?;
        self.ranges.emit(w)
    }
}

#[cfg(test)]
mod tests;
