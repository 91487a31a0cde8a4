//! The reorder pool: out-of-order packets of every peer held in one shared pool of
//! `max_pkt`-byte slots, and per peer an index from sequence number to slot.

use super::*;

/// Held out-of-order packets (their bytes), and where each peer's are.
pub(in crate::rdm) struct ReorderBuf<S: Storage> {
    /// Per peer, a stride of entries (as the send window's): the slot holding packet
    /// `seq`, or [`NO_SLOT`].
    idx: S::Slice<u16>,
    /// The stride minus one (a power of two minus one).
    mask: usize,
    /// The slots' bytes. Taken out while a held packet is being processed from it.
    buf: Option<S::Slice<u8>>,
    /// Bytes per slot.
    slot_size: usize,
    /// Each slot's packet length.
    len: S::Slice<u16>,
    /// A stack of the free slots: the first `nfree` entries.
    free: S::Slice<u16>,
    nfree: usize,
}

impl<S: Storage> ReorderBuf<S> {
    /// A pool of `slots` packets of `slot_size` bytes, indexed for `peers` peers with
    /// windows of `window` packets (rounded up to a power of two).
    pub(in crate::rdm) fn new(
        store: &mut S,
        slots: usize,
        slot_size: usize,
        peers: usize,
        window: usize,
    ) -> Result<Self> {
        let w = window.next_power_of_two();
        let buf = store
            .zeroed(slots.checked_mul(slot_size).ok_or(Errno::ENOMEM)?)
            .ok_or(Errno::ENOMEM)?;
        let idx = store
            .slice(peers.checked_mul(w).ok_or(Errno::ENOMEM)?, || NO_SLOT)
            .ok_or(Errno::ENOMEM)?;
        let len = store.slice(slots, || 0u16).ok_or(Errno::ENOMEM)?;
        let mut i = 0u16;
        let free = store
            .slice(slots, || {
                i += 1;
                i - 1
            })
            .ok_or(Errno::ENOMEM)?;
        Ok(ReorderBuf {
            idx,
            mask: w - 1,
            buf: Some(buf),
            slot_size,
            len,
            free,
            nfree: slots,
        })
    }

    /// Slots free.
    #[inline]
    pub(in crate::rdm) fn free_slots(&self) -> usize {
        self.nfree
    }

    /// Where `seq` of peer `p` sits in the index.
    #[inline]
    fn at(&self, p: usize, seq: u32) -> usize {
        (p * (self.mask + 1)) | (seq as usize & self.mask)
    }

    /// The slot holding packet `seq` of peer `p`, or [`NO_SLOT`].
    #[inline]
    pub(in crate::rdm) fn slot(&self, p: usize, seq: u32) -> u16 {
        self.idx.as_ref()[self.at(p, seq)]
    }

    /// Keeps a copy of `pkt` as packet `seq` of peer `p`. `false` when no slot is free,
    /// the packet is larger than a slot, or the pool is taken out.
    pub(in crate::rdm) fn hold(&mut self, p: usize, seq: u32, pkt: &[u8]) -> bool {
        if self.nfree == 0 || pkt.len() > self.slot_size {
            return false;
        }
        let Some(pool) = self.buf.as_mut() else {
            return false;
        };
        self.nfree -= 1;
        let slot = self.free.as_ref()[self.nfree];
        let start = slot as usize * self.slot_size;
        pool.as_mut()[start..start + pkt.len()].copy_from_slice(pkt);
        self.len.as_mut()[slot as usize] = pkt.len() as u16;
        let i = self.at(p, seq);
        self.idx.as_mut()[i] = slot;
        true
    }

    /// Takes the pool's bytes out (to process a held packet while the engine changes).
    /// Put them back with [`ReorderBuf::put_back`].
    #[inline]
    pub(in crate::rdm) fn take_out(&mut self) -> Option<S::Slice<u8>> {
        self.buf.take()
    }

    /// Returns the bytes [`ReorderBuf::take_out`] took.
    #[inline]
    pub(in crate::rdm) fn put_back(&mut self, pool: S::Slice<u8>) {
        self.buf = Some(pool);
    }

    /// The packet in `slot` of the bytes `pool` taken out.
    #[inline]
    pub(in crate::rdm) fn packet<'a>(&self, pool: &'a S::Slice<u8>, slot: u16) -> Option<&'a [u8]> {
        let start = slot as usize * self.slot_size;
        let len = *self.len.as_ref().get(slot as usize)? as usize;
        pool.as_ref().get(start..start + len)
    }

    /// Packet `seq` of peer `p` (in `slot`) was processed: its slot is free again.
    pub(in crate::rdm) fn release(&mut self, p: usize, seq: u32, slot: u16) {
        let i = self.at(p, seq);
        self.idx.as_mut()[i] = NO_SLOT;
        self.free_slot(slot);
    }

    fn free_slot(&mut self, slot: u16) {
        if self.nfree < self.free.as_ref().len() {
            self.free.as_mut()[self.nfree] = slot;
            self.nfree += 1;
        }
    }

    /// Drops every packet held for peer `p` (its session ended).
    pub(in crate::rdm) fn clear(&mut self, p: usize) {
        let w = self.mask + 1;
        for i in 0..w {
            let slot = core::mem::replace(&mut self.idx.as_mut()[p * w + i], NO_SLOT);
            if slot != NO_SLOT {
                self.free_slot(slot);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::test_storage::VecStorage;

    fn pool() -> ReorderBuf<VecStorage> {
        // 2 slots of 16 bytes, 2 peers, a window of 4.
        ReorderBuf::new(&mut VecStorage, 2, 16, 2, 4).unwrap()
    }

    #[test]
    fn holds_and_gives_back() {
        let mut r = pool();
        assert_eq!(r.slot(0, 3), NO_SLOT);
        assert!(r.hold(0, 3, &[1, 2, 3]));
        let slot = r.slot(0, 3);
        assert_ne!(slot, NO_SLOT);
        assert_eq!(r.free_slots(), 1);
        assert_eq!(r.slot(1, 3), NO_SLOT, "another peer's index");
        let bytes = r.take_out().unwrap();
        assert_eq!(r.packet(&bytes, slot), Some(&[1u8, 2, 3][..]));
        // While taken out, nothing more is held.
        assert!(!r.hold(1, 0, &[9]));
        r.put_back(bytes);
        r.release(0, 3, slot);
        assert_eq!(r.slot(0, 3), NO_SLOT);
        assert_eq!(r.free_slots(), 2);
    }

    #[test]
    fn refuses_when_full_or_too_large() {
        let mut r = pool();
        assert!(!r.hold(0, 0, &[0; 17]), "larger than a slot");
        assert!(r.hold(0, 0, &[0; 16]));
        assert!(r.hold(1, 0, &[1; 4]));
        assert!(!r.hold(1, 1, &[2]), "full");
        assert_eq!(r.free_slots(), 0);
        // A peer's session ends: its packets go, the other's stay.
        r.clear(0);
        assert_eq!(r.free_slots(), 1);
        assert_eq!(r.slot(0, 0), NO_SLOT);
        assert_ne!(r.slot(1, 0), NO_SLOT);
        assert!(r.hold(1, 1, &[2]));
    }
}
