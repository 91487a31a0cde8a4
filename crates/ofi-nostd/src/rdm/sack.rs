//! Windows beyond 64 packets (spec 5.6): which window a peer gets, the SACK ranges a
//! receiver reports beyond the 64-bit bitmap, and how often held packets are
//! acknowledged.

use wire::packet::{AckRepr, Body, RANGES_FROM, SackRanges, SackRepr, caps as wcaps};

use super::peer::Params;
use super::*;

/// What a peer without [`wcaps::SACK_RANGES`] gets: the packets the bitmap reports
/// beyond the cumulative ack.
pub(in crate::rdm) const LEGACY_WINDOW: u16 = 64;

/// While packets are held out of order and no new hole appeared, an acknowledgement
/// goes after this many more held packets (a new hole is acknowledged at once): fast
/// retransmit needs three selectively acknowledged packets above a hole, so the second
/// acknowledgement of a hole lets it go, and a 1,024-packet window does not cost an ACK
/// per packet during recovery.
pub(in crate::rdm) const HELD_ACK_EVERY: u32 = 4;

/// The peer's parameters as this session uses them: a window above
/// [`LEGACY_WINDOW`] only with a peer that reports selective acks beyond the bitmap.
pub(in crate::rdm) fn negotiated(mut params: Params) -> Params {
    if !cfg!(feature = "sack") || params.caps & wcaps::SACK_RANGES == 0 {
        params.window = params.window.min(LEGACY_WINDOW);
    }
    params
}

/// Finds held packets beyond the bitmap as SACK ranges, 64 offsets at a time.
pub(in crate::rdm) struct RangeScan {
    /// First offset from `cum_ack` not looked at.
    off: u32,
    /// Offsets beyond the last a packet may be held at (the receive window).
    end: u32,
    /// Held packets not found yet (the scan stops when none is left).
    left: u32,
}

impl RangeScan {
    /// A scan for `held` packets of which `in_bitmap` are in the bitmap, within a
    /// receive window of `window` packets.
    pub(in crate::rdm) fn new(held: u32, in_bitmap: u32, window: u32) -> RangeScan {
        RangeScan {
            off: RANGES_FROM,
            end: window,
            left: held.saturating_sub(in_bitmap),
        }
    }

    /// Runs the scan over `held64(offset)` (bit `i` set: offset `offset + i` is held;
    /// bits beyond the window are ignored): the ranges, lowest first, as many as fit.
    /// A word without a held packet costs one call; a run of held packets one range
    /// step, however long.
    pub(in crate::rdm) fn run(mut self, mut held64: impl FnMut(u32) -> u64) -> SackRanges {
        let mut r = SackRanges::EMPTY;
        while self.left > 0 && self.off < self.end {
            let n = (self.end - self.off).min(64);
            let mut w = held64(self.off);
            if n < 64 {
                w &= (1u64 << n) - 1;
            }
            if w == 0 {
                self.off += n;
                continue;
            }
            let first = w.trailing_zeros();
            let ones = (w >> first).trailing_ones();
            let start = self.off + first;
            if !r.push_run(start, ones) {
                break;
            }
            self.left = self.left.saturating_sub(ones);
            self.off = start + ones;
        }
        r
    }
}

impl<S: Storage> Rdm<S> {
    /// A SACK from peer `p`: an ACK with ranges. Out of line, so the receive path's
    /// ACK case stays the only inlined acknowledgement.
    #[cold]
    #[inline(never)]
    pub(in crate::rdm) fn on_sack(
        &mut self,
        p: usize,
        s: &SackRepr,
        now: Instant,
        ctx: &mut Ctx<'_, S>,
    ) {
        self.stats.rx_sacks += 1;
        self.peers[p].rx.ts_recent = s.ack.ts;
        self.on_ack(p, &s.ack, &s.ranges, now, ctx);
    }

    /// Whether an acknowledgement to peer `p` may need ranges: it takes them and we
    /// hold packets out of order.
    #[inline]
    pub(in crate::rdm) fn sack_due(&self, p: usize) -> bool {
        let peer = &self.peers[p];
        cfg!(feature = "sack")
            && peer.rx.held != 0
            && peer.session.params.caps & wcaps::SACK_RANGES != 0
    }

    /// The body of acknowledgement `a` to peer `p` when [`Rdm::sack_due`]: a SACK with
    /// the ranges of the packets held beyond `a`'s bitmap, or the ACK when there are
    /// none. Out of line: the transmitter's common acknowledgement has no ranges.
    #[cold]
    #[inline(never)]
    pub(in crate::rdm) fn sack_body(&self, p: usize, a: AckRepr) -> Body<'static> {
        let (cum, held) = (a.cum_ack, self.peers[p].rx.held);
        let ranges = RangeScan::new(held, a.sack.count_ones(), self.cfg.span() as u32)
            .run(|off| self.reo.held64(p, cum.wrapping_add(off)));
        if ranges.is_empty() {
            Body::Ack(a)
        } else {
            Body::Sack(SackRepr {
                ack: AckRepr { short: false, ..a },
                ranges,
            })
        }
    }

    /// A packet was held out of order: acknowledge at once when it opened a new hole
    /// (the packet before it is missing), else after [`HELD_ACK_EVERY`] held packets or
    /// the ack hold, whichever comes first.
    pub(in crate::rdm) fn held_ack(&mut self, p: usize, seq: u32, now: Instant) {
        // The packet before it neither received nor held (a refused head is held).
        let new_hole = self.reo.slot(p, seq.wrapping_sub(1)) == NO_SLOT;
        let pm = &mut self.peers[p];
        pm.rx.since_ack += 1;
        if new_hole || pm.rx.since_ack >= HELD_ACK_EVERY {
            if new_hole {
                self.stats.acks_on_hole += 1;
            }
            pm.rx.ack_now = true;
            self.tx_ready = true;
        } else {
            let at = now + self.cfg.ack_hold;
            if pm.rx.ack_at.is_none_or(|t| at < t) {
                pm.rx.ack_at = Some(at);
                pm.rx.holding = false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_legacy_peer_keeps_the_bitmap_window() {
        let p = |window, caps| Params {
            max_pkt: 1500,
            window,
            caps,
        };
        assert_eq!(negotiated(p(1024, 0)).window, LEGACY_WINDOW);
        assert_eq!(negotiated(p(32, 0)).window, 32);
        let wide = if cfg!(feature = "sack") { 1024 } else { 64 };
        assert_eq!(negotiated(p(1024, wcaps::SACK_RANGES)).window, wide);
    }

    /// The 64 offsets from `o` on that `held` says are held, as a word.
    fn word(held: impl Fn(u32) -> bool, o: u32) -> u64 {
        (0..64).filter(|&i| held(o + i)).fold(0, |w, i| w | 1 << i)
    }

    #[test]
    fn the_scan_reports_the_lowest_ranges_and_stops_when_all_are_found() {
        // Held: offsets 0 (a refused head), 3 (bitmap), 70..80 and 200.
        let held = |o: u32| o == 0 || o == 3 || (70..80).contains(&o) || o == 200;
        let mut looked = 0;
        let r = RangeScan::new(13, 1, 1024).run(|o| {
            looked += 1;
            word(held, o)
        });
        assert_eq!(
            (r.len(), r.get(0), r.get(1)),
            (2, Some((70, 10)), Some((200, 1)))
        );
        // The held count includes the head, which no scan finds: it runs to the
        // window, a word at a time (two calls for the run, two for 200's word).
        assert!(looked <= (1024 - RANGES_FROM).div_ceil(64) + 3, "{looked}");
        let mut looked = 0;
        let r = RangeScan::new(12, 1, 1024).run(|o| {
            looked += 1;
            word(held, o)
        });
        assert_eq!(r.packets(), 11);
        assert_eq!(looked, 3, "stops at the last held packet");
        // Nothing beyond the bitmap, or a window the bitmap covers: no scan at all.
        assert!(RangeScan::new(1, 1, 1024).run(|_| panic!()).is_empty());
        assert!(RangeScan::new(5, 0, 64).run(|_| panic!()).is_empty());
        // Bits beyond the window are not the window's.
        let r = RangeScan::new(100, 0, 100).run(|_| u64::MAX);
        assert_eq!(
            (r.len(), r.get(0)),
            (1, Some((RANGES_FROM, 100 - RANGES_FROM)))
        );
    }

    #[test]
    fn runs_across_words_are_one_range() {
        // Held: 100 ..= 300, then 310.
        let held = |o: u32| (100..=300).contains(&o) || o == 310;
        let r = RangeScan::new(202, 0, 4096).run(|o| word(held, o));
        assert_eq!(
            (r.len(), r.get(0), r.get(1)),
            (2, Some((100, 201)), Some((310, 1)))
        );
    }

    #[test]
    fn more_holes_than_ranges_keep_the_lowest() {
        let r = RangeScan::new(1000, 0, 1024).run(|o| word(|x| x % 2 == 1, o));
        assert!(r.is_full());
        assert_eq!(r.get(0), Some((65, 1)));
        assert_eq!(r.get(wire::packet::MAX_RANGES - 1), Some((65 + 28, 1)));
    }
}
