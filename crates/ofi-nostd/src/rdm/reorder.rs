//! The reorder pool: out-of-order packets of every peer held in one shared pool of
//! `max_pkt`-byte slots, and per peer an index from sequence number to slot (and, with
//! SACK ranges, a bitmap of the sequence numbers held, so that finding a thousand
//! held packets for an acknowledgement's ranges reads words, not a thousand entries).

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
    /// With the `sack` feature, per peer `bmask + 1` bits: bit `seq & bmask` set when
    /// packet `seq` is held. Empty without it.
    bits: S::Slice<u64>,
    /// Bits per peer minus one (the stride, at least 64, minus one).
    bmask: usize,
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
        let bw = w.max(64);
        let words = if cfg!(feature = "sack") {
            peers.checked_mul(bw / 64).ok_or(Errno::ENOMEM)?
        } else {
            0
        };
        let bits = store.slice(words, || 0u64).ok_or(Errno::ENOMEM)?;
        Ok(ReorderBuf {
            idx,
            mask: w - 1,
            buf: Some(buf),
            slot_size,
            len,
            free,
            nfree: slots,
            bits,
            bmask: bw - 1,
        })
    }

    /// The bitmap word and bit of `seq` of peer `p`.
    #[inline]
    fn bit(&self, p: usize, seq: u32) -> (usize, u32) {
        let b = (p * (self.bmask + 1)) | (seq as usize & self.bmask);
        (b / 64, (b % 64) as u32)
    }

    /// Marks `seq` of peer `p` held or not.
    #[inline]
    fn set_bit(&mut self, p: usize, seq: u32, on: bool) {
        let (w, b) = self.bit(p, seq);
        if let Some(word) = self.bits.as_mut().get_mut(w) {
            if on {
                *word |= 1 << b;
            } else {
                *word &= !(1 << b);
            }
        }
    }

    /// Whether the bitmap is kept (the `sack` feature).
    #[inline]
    pub(in crate::rdm) fn has_bits(&self) -> bool {
        !self.bits.as_ref().is_empty()
    }

    /// 64 bits of peer `p`'s bitmap from `seq` on: bit `i` set when `seq + i` is held.
    /// 0 without the bitmap.
    pub(in crate::rdm) fn held64(&self, p: usize, seq: u32) -> u64 {
        let per = (self.bmask + 1) / 64;
        let (w, b) = self.bit(p, seq);
        let bits = self.bits.as_ref();
        let Some(&lo) = bits.get(w) else {
            return 0;
        };
        if b == 0 {
            return lo;
        }
        // The next word of the same peer, wrapping around its bitmap.
        let base = p * per;
        let next = base + (w - base + 1) % per;
        (lo >> b) | (bits[next] << (64 - b))
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
        self.set_bit(p, seq, true);
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
        self.set_bit(p, seq, false);
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
        let per = (self.bmask + 1) / 64;
        if let Some(words) = self.bits.as_mut().get_mut(p * per..(p + 1) * per) {
            words.fill(0);
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
    fn the_bitmap_follows_what_is_held() {
        // 300 slots, 2 peers, a span of 200 (a stride of 256: four words per peer).
        let mut r = ReorderBuf::<VecStorage>::new(&mut VecStorage, 300, 16, 2, 200).unwrap();
        assert_eq!(r.has_bits(), cfg!(feature = "sack"));
        if !r.has_bits() {
            return;
        }
        let base = u32::MAX - 10; // across the wrap and a word boundary
        for o in [1u32, 2, 3, 70, 199] {
            assert!(r.hold(1, base.wrapping_add(o), &[o as u8]));
        }
        assert!(r.hold(0, base.wrapping_add(2), &[0]));
        assert_eq!(r.held64(1, base), 0b1110);
        assert_eq!(r.held64(1, base.wrapping_add(1)), 0b111);
        // From the end of the peer's bitmap into its start.
        assert_eq!(r.held64(1, base.wrapping_add(10)), 1 << 60);
        assert_eq!(r.held64(1, base.wrapping_add(150)), 1 << 49);
        assert_eq!(r.held64(0, base), 0b100, "another peer's bits");
        let slot = r.slot(1, base.wrapping_add(2));
        r.release(1, base.wrapping_add(2), slot);
        assert_eq!(r.held64(1, base), 0b1010);
        r.clear(1);
        assert_eq!(r.held64(1, base.wrapping_add(1)), 0);
        assert_eq!(r.held64(1, base.wrapping_add(190)), 0);
        assert_eq!(r.held64(0, base), 0b100);
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
