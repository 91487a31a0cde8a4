//! A fixed-capacity FIFO over caller-provided storage: the queue behind CQs and EQs.

/// A FIFO of `T` over storage `S` (anything that derefs to `[T]`). Pushing to a full ring
/// gives the value back.
pub struct Ring<T, S: AsMut<[T]> + AsRef<[T]>> {
    storage: S,
    head: usize,
    len: usize,
    _type: core::marker::PhantomData<T>,
}

impl<T: Copy, S: AsMut<[T]> + AsRef<[T]>> Ring<T, S> {
    /// An empty ring over `storage`; its capacity is `storage.len()`.
    pub fn new(storage: S) -> Self {
        Ring {
            storage,
            head: 0,
            len: 0,
            _type: core::marker::PhantomData,
        }
    }

    /// How many entries fit.
    pub fn capacity(&self) -> usize {
        self.storage.as_ref().len()
    }

    /// How many entries are queued.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether no more entries fit.
    pub fn is_full(&self) -> bool {
        self.len == self.capacity()
    }

    /// Appends `value`, or gives it back when full.
    pub fn push(&mut self, value: T) -> Result<(), T> {
        let cap = self.capacity();
        if self.len == cap {
            return Err(value);
        }
        let tail = wrap(self.head + self.len, cap);
        self.storage.as_mut()[tail] = value;
        self.len += 1;
        Ok(())
    }

    /// The oldest entry, without removing it.
    pub fn peek(&self) -> Option<&T> {
        (self.len > 0).then(|| &self.storage.as_ref()[self.head])
    }

    /// Removes the oldest entry.
    pub fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let v = self.storage.as_ref()[self.head];
        self.len -= 1;
        // Emptied: the next entry goes into the first slot again, still in the cache,
        // rather than walking the whole storage one completion at a time.
        self.head = if self.len == 0 {
            0
        } else {
            wrap(self.head + 1, self.capacity())
        };
        Some(v)
    }

    /// The queued entries, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        let cap = self.capacity();
        let s = self.storage.as_ref();
        (0..self.len).map(move |i| &s[wrap(self.head + i, cap)])
    }
}

/// `i` modulo `n` for an index at most one turn past the end (head plus length), with
/// a compare instead of a division: a CQ pushes and pops on every completion.
#[inline]
fn wrap(i: usize, n: usize) -> usize {
    if i >= n { i - n } else { i }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_wraps_and_refuses_when_full() {
        let mut r = Ring::new([0u8; 3]);
        assert_eq!(r.pop(), None);
        for i in 0..3 {
            r.push(i).unwrap();
        }
        assert_eq!(r.push(9), Err(9));
        assert_eq!(r.pop(), Some(0));
        r.push(3).unwrap();
        assert_eq!(
            r.iter().copied().collect::<heapless::Vec<u8, 4>>(),
            [1, 2, 3]
        );
        assert_eq!(r.peek(), Some(&1));
        assert_eq!(
            (r.pop(), r.pop(), r.pop(), r.pop()),
            (Some(1), Some(2), Some(3), None)
        );
    }

    /// An emptied ring starts over at its first slot (a CQ read as fast as it is
    /// written keeps using one slot); a ring with entries left keeps its order.
    #[test]
    fn an_emptied_ring_starts_over_at_its_first_slot() {
        let mut r = Ring::new([0u8; 4]);
        for i in 0..3 {
            r.push(i).unwrap();
            assert_eq!(r.pop(), Some(i));
            assert_eq!(r.head, 0);
        }
        r.push(1).unwrap();
        r.push(2).unwrap();
        assert_eq!(r.pop(), Some(1));
        assert_eq!(r.head, 1);
        for i in 3..6 {
            r.push(i).unwrap();
        }
        assert_eq!(
            r.iter().copied().collect::<heapless::Vec<u8, 4>>(),
            [2, 3, 4, 5]
        );
        assert_eq!(r.push(6), Err(6));
    }

    #[test]
    fn zero_capacity() {
        let mut r: Ring<u8, [u8; 0]> = Ring::new([]);
        assert_eq!(r.push(1), Err(1));
        assert!(r.is_full() && r.is_empty());
    }
}
