//! Sequence-number arithmetic (RFC 1982), selective-ack bitmaps and segmentation.
//!
//! Sequence numbers are 32-bit and wrap; comparing them with `<` is a bug waiting for
//! the first wrap-around, so the engine compares them only through these functions.

/// `a - b` as a signed distance under serial-number arithmetic (RFC 1982, `SERIAL_BITS`
/// = 32). Meaningful while the two are less than 2^31 apart, which the window guarantees.
pub const fn seq_diff(a: u32, b: u32) -> i32 {
    a.wrapping_sub(b) as i32
}

/// `a` is before `b` in serial-number order.
pub const fn seq_lt(a: u32, b: u32) -> bool {
    seq_diff(a, b) < 0
}

/// `a` is before or equal to `b` in serial-number order.
pub const fn seq_le(a: u32, b: u32) -> bool {
    seq_diff(a, b) <= 0
}

/// Number of sequence numbers a selective-ack bitmap covers after the cumulative ack.
pub const SACK_BITS: u32 = 64;

/// Whether an ack with cumulative value `cum_ack` (the next sequence number the receiver
/// expects) and selective-ack `bitmap` acknowledges `seq`.
///
/// Bit `i` (least significant = 0) of the bitmap acknowledges `cum_ack + 1 + i`;
/// `cum_ack` itself is by definition missing.
pub const fn sack_contains(cum_ack: u32, bitmap: u64, seq: u32) -> bool {
    if seq_lt(seq, cum_ack) {
        return true;
    }
    let d = seq.wrapping_sub(cum_ack);
    if d == 0 || d > SACK_BITS {
        return false;
    }
    bitmap & (1u64 << (d - 1)) != 0
}

/// Set the bit for `seq` in a selective-ack bitmap relative to `cum_ack`. Returns `false`
/// (and leaves the bitmap alone) if `seq` is outside the bitmap's range.
pub fn sack_insert(cum_ack: u32, bitmap: &mut u64, seq: u32) -> bool {
    let d = seq.wrapping_sub(cum_ack);
    if d == 0 || d > SACK_BITS {
        return false;
    }
    *bitmap |= 1u64 << (d - 1);
    true
}

/// Splits a message of `total` bytes into segments of at most `max_payload` bytes,
/// yielding `(offset, len)` pairs in order. A zero-length message is one empty segment
/// (it still has to be delivered and completed); a zero `max_payload` yields nothing.
#[derive(Debug, Clone)]
pub struct Segments {
    total: u64,
    max: u64,
    next: u64,
    done: bool,
}

impl Segments {
    /// Segments of `total` bytes, at most `max_payload` bytes each.
    pub const fn new(total: u64, max_payload: usize) -> Self {
        Segments {
            total,
            max: max_payload as u64,
            next: 0,
            done: max_payload == 0,
        }
    }
}

impl Iterator for Segments {
    type Item = (u64, usize);

    fn next(&mut self) -> Option<(u64, usize)> {
        if self.done {
            return None;
        }
        let off = self.next;
        let len = self.max.min(self.total.saturating_sub(off));
        self.next = off.saturating_add(len);
        if self.next >= self.total {
            self.done = true;
        }
        Some((off, len as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_order_wraps() {
        assert!(seq_lt(u32::MAX, 0));
        assert!(seq_lt(0xFFFF_FFF0, 5));
        assert!(!seq_lt(5, 0xFFFF_FFF0));
        assert!(seq_le(7, 7));
        assert_eq!(seq_diff(2, u32::MAX), 3);
    }

    #[test]
    fn sack_bits() {
        let mut bm = 0;
        assert!(!sack_insert(u32::MAX, &mut bm, u32::MAX));
        assert!(sack_insert(u32::MAX, &mut bm, 0)); // cum+1 -> bit 0
        assert!(sack_insert(u32::MAX, &mut bm, 63)); // cum+64 -> bit 63
        assert!(!sack_insert(u32::MAX, &mut bm, 64));
        assert_eq!(bm, 1 | 1 << 63);
        assert!(sack_contains(u32::MAX, bm, 0));
        assert!(sack_contains(u32::MAX, bm, u32::MAX - 1));
        assert!(!sack_contains(u32::MAX, bm, u32::MAX));
        assert!(!sack_contains(u32::MAX, bm, 1));
    }

    #[test]
    fn segments() {
        let v: std::vec::Vec<_> = Segments::new(10, 4).collect();
        assert_eq!(v, [(0, 4), (4, 4), (8, 2)]);
        let v: std::vec::Vec<_> = Segments::new(0, 4).collect();
        assert_eq!(v, [(0, 0)]);
        let v: std::vec::Vec<_> = Segments::new(8, 4).collect();
        assert_eq!(v, [(0, 4), (4, 4)]);
        assert_eq!(Segments::new(8, 0).count(), 0);
    }
}
