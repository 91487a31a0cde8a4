//! The peer table: a fixed array of peer slots, an open-addressing hash index from a
//! remote endpoint's address to its slot, and the rule for which slot a new peer takes
//! when the table is full.

use core::ops::{Index, IndexMut};

use super::*;

/// Where a new peer goes ([`PeerTable::place`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::rdm) enum Place {
    /// The address is in the table already, at this slot.
    Found(usize),
    /// A slot nobody uses.
    Free(usize),
    /// The table is full: this peer, idle the longest among those that may go, must
    /// be evicted first.
    Victim(usize),
}

/// The peers of one endpoint, by slot. Indexing (`table[p]`) gives a slot's [`Peer`]
/// (bounds-checked once, as slice indexing is).
pub(in crate::rdm) struct PeerTable<S: Storage> {
    slots: S::Slice<Peer>,
    index: HashIndex<S::Slice<u32>>,
    /// The slot `find` found last: most packets and posts name the peer the one
    /// before did, and a compare is cheaper than the hash lookup.
    last: core::cell::Cell<u32>,
    /// One past the highest slot ever used: the per-pass scans (timers, transmission,
    /// deadlines) stop there instead of walking the whole table.
    high: usize,
    /// Slots in use.
    len: usize,
}

impl<S: Storage> PeerTable<S> {
    /// A table of `n` empty slots from `store`.
    pub(in crate::rdm) fn new(store: &mut S, n: usize) -> Result<Self> {
        let slots = store.slice(n, || Peer::EMPTY).ok_or(Errno::ENOMEM)?;
        let index = HashIndex::new(store.slice(n * 2 + 1, || 0u32).ok_or(Errno::ENOMEM)?);
        Ok(PeerTable {
            slots,
            index,
            last: core::cell::Cell::new(0),
            high: 0,
            len: 0,
        })
    }

    /// Slots in use.
    pub(in crate::rdm) fn len(&self) -> usize {
        self.len
    }

    /// Slots in all.
    pub(in crate::rdm) fn capacity(&self) -> usize {
        self.slots.as_ref().len()
    }

    /// One past the highest slot ever used.
    #[inline]
    pub(in crate::rdm) fn high(&self) -> usize {
        self.high
    }

    /// Slot `i`, if the table has it.
    #[inline]
    pub(in crate::rdm) fn get(&self, i: usize) -> Option<&Peer> {
        self.slots.as_ref().get(i)
    }

    /// Slot `i` for changing, if the table has it.
    #[inline]
    pub(in crate::rdm) fn get_mut(&mut self, i: usize) -> Option<&mut Peer> {
        self.slots.as_mut().get_mut(i)
    }

    /// The slots up to [`PeerTable::high`] (used or not).
    #[inline]
    pub(in crate::rdm) fn active(&self) -> &[Peer] {
        let s = self.slots.as_ref();
        &s[..self.high.min(s.len())]
    }

    /// The slots up to [`PeerTable::high`], for changing.
    #[inline]
    pub(in crate::rdm) fn active_mut(&mut self) -> &mut [Peer] {
        let s = self.slots.as_mut();
        let n = self.high.min(s.len());
        &mut s[..n]
    }

    /// Every used slot.
    pub(in crate::rdm) fn used(&self) -> impl Iterator<Item = &Peer> + '_ {
        self.slots.as_ref().iter().filter(|p| p.used)
    }

    /// The slot of `addr`, in O(1).
    pub(in crate::rdm) fn find(&self, addr: &EpAddr) -> Option<usize> {
        let peers = self.slots.as_ref();
        let last = self.last.get();
        if peers
            .get(last as usize)
            .is_some_and(|p| p.used && p.addr == *addr)
        {
            return Some(last as usize);
        }
        let i = self.index.find(addr_key(addr), |i| {
            peers
                .get(i as usize)
                .is_some_and(|p| p.used && p.addr == *addr)
        })?;
        self.last.set(i);
        Some(i as usize)
    }

    /// Where `addr` goes: its own slot, else the first free one, else the peer idle
    /// the longest (smallest `last_active`) among those `can_go` lets go. -FI_EAGAIN
    /// when none may.
    pub(in crate::rdm) fn place(
        &self,
        addr: &EpAddr,
        mut can_go: impl FnMut(usize) -> bool,
    ) -> Result<Place> {
        if let Some(i) = self.find(addr) {
            return Ok(Place::Found(i));
        }
        let peers = self.slots.as_ref();
        if let Some(i) = peers.iter().position(|p| !p.used) {
            return Ok(Place::Free(i));
        }
        (0..peers.len())
            .filter(|&i| can_go(i))
            .min_by_key(|&i| peers[i].last_active)
            .map(Place::Victim)
            .ok_or(Errno::EAGAIN)
    }

    /// Puts `peer` (for `peer.addr`) in unused slot `i`.
    pub(in crate::rdm) fn insert(&mut self, i: usize, peer: Peer) -> Result<()> {
        self.index
            .insert(addr_key(&peer.addr), i as u32)
            .map_err(|_| Errno::EAGAIN)?;
        if peer.used && !self.slots.as_ref()[i].used {
            self.len += 1;
        }
        self.slots.as_mut()[i] = peer;
        self.high = self.high.max(i + 1);
        Ok(())
    }

    /// Empties slot `i`, and forgets its address.
    pub(in crate::rdm) fn remove(&mut self, i: usize) {
        let key = addr_key(&self.slots.as_ref()[i].addr);
        let slots = &self.slots;
        self.index.remove(key, i as u32, |j| {
            slots
                .as_ref()
                .get(j as usize)
                .map_or(0, |p| addr_key(&p.addr))
        });
        if self.slots.as_ref()[i].used {
            self.len = self.len.saturating_sub(1);
        }
        self.slots.as_mut()[i] = Peer::EMPTY;
    }
}

impl<S: Storage> Index<usize> for PeerTable<S> {
    type Output = Peer;

    #[inline]
    fn index(&self, i: usize) -> &Peer {
        &self.slots.as_ref()[i]
    }
}

impl<S: Storage> IndexMut<usize> for PeerTable<S> {
    #[inline]
    fn index_mut(&mut self, i: usize) -> &mut Peer {
        &mut self.slots.as_mut()[i]
    }
}

/// The hash key of an address (all its 64 bits).
pub(in crate::rdm) fn addr_key(a: &EpAddr) -> u64 {
    u64::from_be_bytes([
        a.ip[0],
        a.ip[1],
        a.ip[2],
        a.ip[3],
        (a.port >> 8) as u8,
        a.port as u8,
        (a.ep_id >> 8) as u8,
        a.ep_id as u8,
    ])
}
