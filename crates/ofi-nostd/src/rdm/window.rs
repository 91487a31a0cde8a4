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
