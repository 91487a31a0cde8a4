//! The send window: per peer, one entry per sequenced packet in flight that says how
//! to rebuild it (packets are never copied for retransmission), when it left, how
//! often it was retransmitted and whether it was selectively acknowledged.

use super::*;

/// What a sequenced packet in the send window is, so it can be rebuilt for a
/// retransmission without keeping its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::rdm) enum Regen {
    /// An eager segment of op `op` (slot index) at `off`, `len` bytes.
    Seg { op: u32, off: u64, len: u32 },
    /// The RTS of op `op`.
    Rts { op: u32 },
    /// Rendezvous DATA of op `op`.
    Data { op: u32, off: u64, len: u32 },
    /// A CTS (no operation of ours behind it).
    Cts {
        rts_op: u32,
        rx_op: u32,
        off: u64,
        len: u32,
        status: u16,
    },
    /// Our CLOSE (the endpoint is closing; nothing follows it).
    Close,
    /// An RMA target's answer without data: a write's status (ATOMIC_RESP) or a read's
    /// (READ_RESP, empty). Everything a retransmission needs is here: its `RmaResp`
    /// (in slot `slot`) is gone once the first transmission left.
    Resp {
        slot: u32,
        op_id: u32,
        status: u16,
        read: bool,
    },
    /// READ_RESP data of the `RmaResp` in slot `slot`, `len` bytes at `off` of the read
    /// (read from the registered region each time it is built).
    ReadData { slot: u32, off: u64, len: u32 },
    /// An atomic's ATOMIC_RESP with the original values the `RmaResp` in `slot` keeps.
    AtomicData { slot: u32 },
    /// A BUNDLE of the `n` single-packet messages from op `op` on, consecutive in the
    /// peer's operation list (none of them leaves it before this packet is acked).
    Bundle { op: u32, n: u16 },
}

impl Regen {
    /// The one operation the packet belongs to, if it belongs to exactly one.
    pub(in crate::rdm) fn op(&self) -> Option<u32> {
        match *self {
            Regen::Seg { op, .. } | Regen::Rts { op } | Regen::Data { op, .. } => Some(op),
            Regen::Cts { .. }
            | Regen::Close
            | Regen::Resp { .. }
            | Regen::ReadData { .. }
            | Regen::AtomicData { .. } => None,
            // Several operations: every use of a bundle's entry walks them.
            Regen::Bundle { .. } => None,
        }
    }
}

/// One sequenced packet in flight.
#[derive(Debug, Clone, Copy)]
pub(in crate::rdm) struct WinEntry {
    /// Sent and not yet cumulatively acknowledged.
    pub(in crate::rdm) live: bool,
    /// Its sequence number (entries are reused modulo the stride).
    pub(in crate::rdm) seq: u32,
    /// How to build it again.
    pub(in crate::rdm) regen: Regen,
    /// When it was last sent.
    pub(in crate::rdm) sent_at: Instant,
    /// Retransmissions so far (0: an RTT sample may come from it, Karn's rule).
    pub(in crate::rdm) retx: u16,
    /// Selectively acknowledged: never retransmitted again.
    pub(in crate::rdm) sacked: bool,
    /// Queued for retransmission.
    pub(in crate::rdm) rtx: bool,
}

impl WinEntry {
    /// A free entry.
    pub(in crate::rdm) const EMPTY: WinEntry = WinEntry {
        live: false,
        seq: 0,
        regen: Regen::Rts { op: 0 },
        sent_at: Instant::ZERO,
        retx: 0,
        sacked: false,
        rtx: false,
    };
}

impl WinEntry {
    /// The record of packet `seq`, first sent at `now`.
    #[inline]
    pub(in crate::rdm) fn new(seq: u32, regen: Regen, now: Instant) -> WinEntry {
        WinEntry {
            live: true,
            seq,
            regen,
            sent_at: now,
            retx: 0,
            sacked: false,
            rtx: false,
        }
    }

    /// It left again at `now`.
    #[inline]
    pub(in crate::rdm) fn resent(&mut self, now: Instant) {
        self.rtx = false;
        self.retx = self.retx.saturating_add(1);
        self.sent_at = now;
    }
}

/// The windows of every peer of an endpoint in one table: per peer a power-of-two
/// stride (the window rounded up), so a sequence number finds its entry with a mask,
/// not a division.
pub(in crate::rdm) struct SendWindow<S: Storage> {
    entries: S::Slice<WinEntry>,
    /// The stride minus one.
    mask: usize,
}

impl<S: Storage> SendWindow<S> {
    /// Windows of `window` packets (rounded up to a power of two) for `peers` peers.
    pub(in crate::rdm) fn new(store: &mut S, peers: usize, window: usize) -> Result<Self> {
        let w = window.next_power_of_two();
        let entries = store
            .slice(peers.checked_mul(w).ok_or(Errno::ENOMEM)?, || {
                WinEntry::EMPTY
            })
            .ok_or(Errno::ENOMEM)?;
        Ok(SendWindow {
            entries,
            mask: w - 1,
        })
    }

    /// Entries per peer (a power of two).
    #[inline]
    pub(in crate::rdm) fn stride(&self) -> usize {
        self.mask + 1
    }

    /// Where `seq` of peer `p` sits.
    #[inline]
    fn slot(&self, p: usize, seq: u32) -> usize {
        (p * (self.mask + 1)) | (seq as usize & self.mask)
    }

    /// The entry for `seq` of peer `p`.
    #[inline]
    pub(in crate::rdm) fn get(&self, p: usize, seq: u32) -> &WinEntry {
        &self.entries.as_ref()[self.slot(p, seq)]
    }

    /// The entry for `seq` of peer `p`, for changing.
    #[inline]
    pub(in crate::rdm) fn get_mut(&mut self, p: usize, seq: u32) -> &mut WinEntry {
        let i = self.slot(p, seq);
        &mut self.entries.as_mut()[i]
    }

    /// Records packet `seq` to peer `p`, first sent at `now`.
    #[inline]
    pub(in crate::rdm) fn record(&mut self, p: usize, seq: u32, regen: Regen, now: Instant) {
        *self.get_mut(p, seq) = WinEntry::new(seq, regen, now);
    }

    /// Packet `seq` of peer `p` is cumulatively acknowledged: its entry is no longer
    /// live. Returns the entry as it was, if it was live.
    #[inline]
    pub(in crate::rdm) fn ack(&mut self, p: usize, seq: u32) -> Option<WinEntry> {
        let e = self.get_mut(p, seq);
        if !e.live {
            return None;
        }
        let was = *e;
        e.live = false;
        Some(was)
    }

    /// Packet `seq` of peer `p` is selectively acknowledged: never retransmitted
    /// again. Returns the entry as it was when this is news (live, for `seq`, not
    /// selectively acknowledged before).
    #[inline]
    pub(in crate::rdm) fn sack(&mut self, p: usize, seq: u32) -> Option<WinEntry> {
        let e = self.get_mut(p, seq);
        if !e.live || e.sacked || e.seq != seq {
            return None;
        }
        let was = *e;
        e.sacked = true;
        e.rtx = false;
        Some(was)
    }

    /// Forgets every entry of peer `p` (its session ended).
    pub(in crate::rdm) fn clear(&mut self, p: usize) {
        let w = self.stride();
        for e in self.entries.as_mut()[p * w..(p + 1) * w].iter_mut() {
            *e = WinEntry::EMPTY;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::test_storage::VecStorage;

    fn window() -> SendWindow<VecStorage> {
        // 3 peers, a window of 48 packets: a stride of 64.
        SendWindow::new(&mut VecStorage, 3, 48).unwrap()
    }

    const T0: Instant = Instant::from_micros(1000);
    const SEG: Regen = Regen::Seg {
        op: 1,
        off: 128,
        len: 64,
    };

    #[test]
    fn stride_is_a_power_of_two_per_peer() {
        let mut w = window();
        assert_eq!(w.stride(), 64);
        w.record(1, 5, Regen::Rts { op: 2 }, T0);
        // A sequence number one stride on shares the entry (which names its own seq).
        assert_eq!(w.get(1, 5 + 64).seq, 5);
        assert!(w.get(1, 5).live);
        // Other peers' entries are separate.
        assert!(!w.get(0, 5).live && !w.get(2, 5).live);
        // Sequence numbers wrap around.
        w.record(2, u32::MAX, SEG, T0);
        assert_eq!(w.get(2, u32::MAX).seq, u32::MAX);
        assert!(!w.get(2, 0).live);
    }

    #[test]
    fn record_keeps_the_regeneration_record() {
        let mut w = window();
        w.record(0, 10, SEG, T0);
        let e = *w.get(0, 10);
        assert!(e.live && !e.sacked && !e.rtx && e.retx == 0);
        assert_eq!((e.seq, e.regen, e.sent_at), (10, SEG, T0));
        assert_eq!(e.regen.op(), Some(1));
        // A retransmission: counted, timestamped, no longer queued.
        let t1 = Instant::from_micros(2000);
        w.get_mut(0, 10).rtx = true;
        w.get_mut(0, 10).resent(t1);
        let e = *w.get(0, 10);
        assert!(!e.rtx);
        assert_eq!((e.retx, e.sent_at, e.regen), (1, t1, SEG));
    }

    #[test]
    fn cumulative_ack_retires_the_entry_once() {
        let mut w = window();
        w.record(0, 10, SEG, T0);
        let e = w.ack(0, 10).expect("live");
        assert!(e.live);
        assert_eq!(e.regen, SEG);
        assert!(!w.get(0, 10).live);
        assert!(w.ack(0, 10).is_none());
        assert!(w.ack(0, 11).is_none(), "never sent");
    }

    #[test]
    fn selective_ack_is_news_once() {
        let mut w = window();
        w.record(0, 10, SEG, T0);
        w.get_mut(0, 10).rtx = true;
        let e = w.sack(0, 10).expect("news");
        assert!(!e.sacked && e.rtx);
        let now = *w.get(0, 10);
        assert!(now.sacked && !now.rtx && now.live);
        assert!(w.sack(0, 10).is_none(), "already selectively acked");
        // The entry one stride on is another packet's.
        assert!(w.sack(0, 10 + 64).is_none());
        // The cumulative ack still retires it, and says it was selectively acked.
        assert!(w.ack(0, 10).expect("live").sacked);
    }

    #[test]
    fn clear_forgets_one_peer() {
        let mut w = window();
        w.record(0, 1, SEG, T0);
        w.record(1, 1, Regen::Close, T0);
        w.clear(0);
        assert!(!w.get(0, 1).live);
        assert!(w.get(1, 1).live);
        assert_eq!(w.get(1, 1).regen.op(), None);
        assert_eq!(Regen::Bundle { op: 3, n: 2 }.op(), None);
    }
}
