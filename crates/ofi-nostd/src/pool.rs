//! Fixed-capacity object pools addressed by generational handles.
//!
//! The storage is the caller's: a `[Slot<T>; N]` in a `static` on firmware, a boxed slice
//! in the hosted adapter, or a borrowed `&mut [Slot<T>]`. A [`Handle`] names one slot at
//! one generation in one pool, so a stale handle (the object was closed, the slot reused)
//! or a foreign one (from another pool) is refused with an error instead of reaching the
//! wrong object. A full pool gives the value back; nothing here panics or allocates.

use core::fmt;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicU32, Ordering};

/// Pool identities, so a handle from one pool is refused by every other.
static NEXT_POOL_ID: AtomicU32 = AtomicU32::new(1);

/// One slot of pool storage. Create storage with [`Slot::VACANT`], e.g.
/// `[const { Slot::VACANT }; 64]`.
pub struct Slot<T> {
    generation: u32,
    state: SlotState<T>,
}

enum SlotState<T> {
    Vacant { next_free: u32 },
    Occupied(T),
}

impl<T> Slot<T> {
    /// An empty slot, for building storage in `const` or `static` contexts.
    pub const VACANT: Slot<T> = Slot {
        generation: 0,
        state: SlotState::Vacant { next_free: NIL },
    };
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot::VACANT
    }
}

const NIL: u32 = u32::MAX;

/// A typed name of one object in one [`Pool`].
pub struct Handle<T> {
    pool: u32,
    index: u32,
    generation: u32,
    _type: PhantomData<fn() -> T>,
}

impl<T> Handle<T> {
    /// The slot index; stable while the object lives, reused after it is removed.
    pub const fn index(&self) -> usize {
        self.index as usize
    }

    /// Packs the handle into 64 bits (index and generation; the pool identity is dropped),
    /// for use as an opaque token such as an `fi_addr_t`-sized value.
    pub const fn to_bits(&self) -> u64 {
        ((self.generation as u64) << 32) | self.index as u64
    }
}

// Manual impls: derives would needlessly require `T: Clone` etc.
impl<T> Clone for Handle<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Handle<T> {}
impl<T> PartialEq for Handle<T> {
    fn eq(&self, other: &Self) -> bool {
        self.pool == other.pool && self.index == other.index && self.generation == other.generation
    }
}
impl<T> Eq for Handle<T> {}
impl<T> core::hash::Hash for Handle<T> {
    fn hash<H: core::hash::Hasher>(&self, state: &mut H) {
        (self.pool, self.index, self.generation).hash(state);
    }
}
impl<T> fmt::Debug for Handle<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Handle({}:{}#{})",
            self.pool, self.index, self.generation
        )
    }
}

/// A fixed-capacity pool over storage `S` (anything that derefs to `[Slot<T>]`).
pub struct Pool<T, S: AsMut<[Slot<T>]> + AsRef<[Slot<T>]>> {
    id: u32,
    storage: S,
    free_head: u32,
    len: usize,
    /// One past the highest slot ever occupied: iteration stops there, so scanning a
    /// large, mostly empty pool (every progress pass walks the endpoints) costs what is
    /// in it, not its capacity. The free list reuses the latest freed slot first, which
    /// keeps live objects low.
    high: usize,
    _type: PhantomData<T>,
}

impl<T, S: AsMut<[Slot<T>]> + AsRef<[Slot<T>]>> Pool<T, S> {
    /// A pool over `storage`; every slot is emptied. Capacity is `storage.len()`, capped
    /// at `u32::MAX - 1`.
    pub fn new(mut storage: S) -> Self {
        let slots = storage.as_mut();
        let cap = slots.len().min(NIL as usize - 1);
        for (i, slot) in slots.iter_mut().enumerate().take(cap) {
            let next = if i + 1 < cap { (i + 1) as u32 } else { NIL };
            slot.state = SlotState::Vacant { next_free: next };
        }
        Pool {
            id: NEXT_POOL_ID.fetch_add(1, Ordering::Relaxed),
            storage,
            free_head: if cap > 0 { 0 } else { NIL },
            len: 0,
            high: 0,
            _type: PhantomData,
        }
    }

    /// How many objects the pool can hold.
    pub fn capacity(&self) -> usize {
        self.storage.as_ref().len().min(NIL as usize - 1)
    }

    /// How many objects the pool holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the pool holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the pool is full.
    pub fn is_full(&self) -> bool {
        self.free_head == NIL
    }

    /// Stores `value`, or gives it back when the pool is full.
    pub fn insert(&mut self, value: T) -> Result<Handle<T>, T> {
        if self.free_head == NIL {
            return Err(value);
        }
        let index = self.free_head;
        let slot = &mut self.storage.as_mut()[index as usize];
        let SlotState::Vacant { next_free } = slot.state else {
            // The free list only links vacant slots; refuse rather than corrupt.
            return Err(value);
        };
        self.free_head = next_free;
        // Generation 0 is never handed out, so a zeroed handle is never valid.
        slot.generation = slot.generation.wrapping_add(1).max(1);
        slot.state = SlotState::Occupied(value);
        self.len += 1;
        self.high = self.high.max(index as usize + 1);
        Ok(Handle {
            pool: self.id,
            index,
            generation: slot.generation,
            _type: PhantomData,
        })
    }

    fn slot(&self, h: Handle<T>) -> Option<&Slot<T>> {
        if h.pool != self.id {
            return None;
        }
        let slot = self.storage.as_ref().get(h.index as usize)?;
        (slot.generation == h.generation).then_some(slot)
    }

    /// Whether `h` was handed out by this pool (live or not): tells a foreign handle
    /// (e.g. a CQ of another domain, -FI_EDOMAIN) from a stale one (-FI_EINVAL).
    pub fn issued(&self, h: Handle<T>) -> bool {
        h.pool == self.id
    }

    /// Whether `h` names a live object of this pool.
    pub fn contains(&self, h: Handle<T>) -> bool {
        matches!(
            self.slot(h),
            Some(Slot {
                state: SlotState::Occupied(_),
                ..
            })
        )
    }

    /// The object `h` names, if it is live and from this pool.
    pub fn get(&self, h: Handle<T>) -> Option<&T> {
        match self.slot(h)? {
            Slot {
                state: SlotState::Occupied(v),
                ..
            } => Some(v),
            _ => None,
        }
    }

    /// The object `h` names, mutably.
    pub fn get_mut(&mut self, h: Handle<T>) -> Option<&mut T> {
        if h.pool != self.id {
            return None;
        }
        match self.storage.as_mut().get_mut(h.index as usize)? {
            Slot {
                generation,
                state: SlotState::Occupied(v),
            } if *generation == h.generation => Some(v),
            _ => None,
        }
    }

    /// Removes the object `h` names without handing it back (no copy of it is made);
    /// later uses of `h` fail. Whether it was there.
    pub fn free(&mut self, h: Handle<T>) -> bool {
        if self.get(h).is_none() {
            return false;
        }
        let slot = &mut self.storage.as_mut()[h.index as usize];
        slot.state = SlotState::Vacant {
            next_free: self.free_head,
        };
        self.free_head = h.index;
        self.len -= 1;
        true
    }

    /// Removes and returns the object `h` names; later uses of `h` fail.
    pub fn remove(&mut self, h: Handle<T>) -> Option<T> {
        self.get(h)?;
        let slot = &mut self.storage.as_mut()[h.index as usize];
        let old = core::mem::replace(
            &mut slot.state,
            SlotState::Vacant {
                next_free: self.free_head,
            },
        );
        self.free_head = h.index;
        self.len -= 1;
        match old {
            SlotState::Occupied(v) => Some(v),
            SlotState::Vacant { .. } => None,
        }
    }

    /// The live object in slot `index`, with its handle: lets intrusive structures link
    /// objects by index and still hand out checked handles.
    pub fn get_by_index(&self, index: usize) -> Option<(Handle<T>, &T)> {
        let slot = self.storage.as_ref().get(index)?;
        match &slot.state {
            SlotState::Occupied(v) => Some((
                Handle {
                    pool: self.id,
                    index: index as u32,
                    generation: slot.generation,
                    _type: PhantomData,
                },
                v,
            )),
            SlotState::Vacant { .. } => None,
        }
    }

    /// The live object in slot `index`, mutably.
    pub fn get_mut_by_index(&mut self, index: usize) -> Option<&mut T> {
        match &mut self.storage.as_mut().get_mut(index)?.state {
            SlotState::Occupied(v) => Some(v),
            SlotState::Vacant { .. } => None,
        }
    }

    /// Every live object with its handle, in slot order.
    pub fn iter(&self) -> impl Iterator<Item = (Handle<T>, &T)> {
        let id = self.id;
        self.storage
            .as_ref()
            .iter()
            .take(self.high)
            .enumerate()
            .filter_map(move |(i, s)| match &s.state {
                SlotState::Occupied(v) => Some((
                    Handle {
                        pool: id,
                        index: i as u32,
                        generation: s.generation,
                        _type: PhantomData,
                    },
                    v,
                )),
                SlotState::Vacant { .. } => None,
            })
    }

    /// Every live object with its handle, mutably.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (Handle<T>, &mut T)> {
        let id = self.id;
        let high = self.high;
        self.storage
            .as_mut()
            .iter_mut()
            .take(high)
            .enumerate()
            .filter_map(move |(i, s)| match &mut s.state {
                SlotState::Occupied(v) => Some((
                    Handle {
                        pool: id,
                        index: i as u32,
                        generation: s.generation,
                        _type: PhantomData,
                    },
                    v,
                )),
                SlotState::Vacant { .. } => None,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_get_remove() {
        let mut p: Pool<u32, [Slot<u32>; 2]> = Pool::new([const { Slot::VACANT }; 2]);
        let a = p.insert(10).unwrap();
        let b = p.insert(20).unwrap();
        assert_eq!(p.insert(30), Err(30), "full pool gives the value back");
        assert_eq!(p.get(a), Some(&10));
        *p.get_mut(b).unwrap() += 1;
        assert_eq!(p.remove(b), Some(21));
        assert_eq!(p.get(b), None, "stale handle refused");
        assert_eq!(p.remove(b), None);
        let c = p.insert(40).unwrap();
        assert_eq!(c.index(), b.index(), "slot reused");
        assert_ne!(c, b);
        assert_eq!(p.get(b), None, "old generation still refused after reuse");
        assert_eq!(p.iter().map(|(_, v)| *v).sum::<u32>(), 50);
        assert_eq!(p.len(), 2);
    }

    #[test]
    fn free_is_remove_without_the_value() {
        let mut p: Pool<u32, [Slot<u32>; 2]> = Pool::new([const { Slot::VACANT }; 2]);
        let a = p.insert(10).unwrap();
        let b = p.insert(20).unwrap();
        assert!(p.free(a));
        assert_eq!((p.get(a), p.len()), (None, 1), "gone, stale handle refused");
        assert!(!p.free(a), "twice: nothing");
        let c = p.insert(30).unwrap();
        assert_eq!(c.index(), a.index(), "slot reused");
        assert!(!p.free(a), "old generation refused after reuse");
        assert_eq!((p.get(b), p.get(c)), (Some(&20), Some(&30)));
    }

    #[test]
    fn foreign_handle_refused() {
        let mut p: Pool<u8, [Slot<u8>; 1]> = Pool::new([const { Slot::VACANT }; 1]);
        let mut q: Pool<u8, [Slot<u8>; 1]> = Pool::new([const { Slot::VACANT }; 1]);
        let h = p.insert(1).unwrap();
        let _ = q.insert(2).unwrap();
        assert_eq!(q.get(h), None);
        assert!(!q.contains(h));
        assert!(p.contains(h));
    }

    /// Iteration stops at the highest slot ever used and still sees every live
    /// object, whatever order they were inserted and removed in.
    #[test]
    fn iteration_sees_every_live_object() {
        let mut p: Pool<u32, [Slot<u32>; 8]> = Pool::new([const { Slot::VACANT }; 8]);
        // What the pool should hold, by insertion: (handle, value).
        let mut live: heapless::Vec<(Handle<u32>, u32), 8> = heapless::Vec::new();
        for step in 0..200u32 {
            if step % 3 == 2 && !live.is_empty() {
                let (h, _) = live.swap_remove((step as usize * 7) % live.len());
                assert!(p.remove(h).is_some());
            } else if let Ok(h) = p.insert(step) {
                live.push((h, step)).unwrap();
            }
            let mut n = 0;
            for (h, v) in p.iter() {
                assert!(
                    live.iter().any(|&(lh, lv)| lh == h && lv == *v),
                    "step {step}"
                );
                n += 1;
            }
            assert_eq!(n, live.len(), "step {step}");
            assert_eq!(p.iter_mut().count(), live.len());
            assert!(p.high <= 8);
        }
        // One object left after the rest went: the scan is the used prefix.
        while let Some((h, _)) = live.pop() {
            p.remove(h);
        }
        let h = p.insert(1).unwrap();
        assert_eq!(p.iter().count(), 1);
        assert_eq!(p.get(h), Some(&1));
    }

    #[test]
    fn empty_storage() {
        let mut p: Pool<u8, [Slot<u8>; 0]> = Pool::new([]);
        assert!(p.is_full());
        assert_eq!(p.insert(1), Err(1));
    }
}
