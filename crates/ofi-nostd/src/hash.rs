//! The open-addressing hash index shared by the AV (address to fi_addr), the MR table
//! (key to region) and the RDM peer table (address to peer slot).
//!
//! It lives in a leaf module of its own because all three use it and none of them
//! should depend on another for it.

use crate::errno::{Errno, Result};

/// The empty bucket (and the one slot number an index cannot hold).
pub(crate) const NIL: u32 = u32::MAX;

/// A 64-bit mixer (splitmix64's finalizer): spreads keys over hash buckets.
pub(crate) const fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A fixed open-addressing (linear probing, backward-shift deletion) index from 64-bit
/// keys to slot numbers, over caller-provided buckets. It stores only slot numbers; the
/// caller compares keys through a closure, so the index never duplicates its data. One
/// bucket always stays empty, so it holds at most `buckets - 1` entries and every probe
/// terminates.
#[derive(Debug)]
pub struct HashIndex<I> {
    buckets: I,
    len: usize,
}

impl<I: AsRef<[u32]> + AsMut<[u32]>> HashIndex<I> {
    /// An empty index over `buckets` (every bucket is cleared).
    pub fn new(mut buckets: I) -> Self {
        buckets.as_mut().fill(NIL);
        HashIndex { buckets, len: 0 }
    }

    /// How many entries it can hold.
    pub fn capacity(&self) -> usize {
        self.buckets.as_ref().len().saturating_sub(1)
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bucket probing starts at: the hash scaled into `0..n` by a multiply and a
    /// shift (Lemire's reduction), not a division, which costs tens of cycles on every
    /// received packet.
    fn home(&self, key: u64) -> usize {
        let n = self.buckets.as_ref().len() as u128;
        ((u128::from(mix64(key)) * n) >> 64) as usize
    }

    /// The slot stored under `key` for which `is(slot)` holds.
    pub fn find(&self, key: u64, mut is: impl FnMut(u32) -> bool) -> Option<u32> {
        let b = self.buckets.as_ref();
        let n = b.len();
        if n == 0 {
            return None;
        }
        let mut i = self.home(key);
        for _ in 0..n {
            match b[i] {
                NIL => return None,
                v if is(v) => return Some(v),
                _ => i = if i + 1 == n { 0 } else { i + 1 },
            }
        }
        None
    }

    /// Stores `slot` under `key`; -FI_ENOSPC when full.
    pub fn insert(&mut self, key: u64, slot: u32) -> Result<()> {
        if slot == NIL || self.len >= self.capacity() {
            return Err(Errno::ENOSPC);
        }
        let mut i = self.home(key);
        let b = self.buckets.as_mut();
        let n = b.len();
        while b[i] != NIL {
            i = if i + 1 == n { 0 } else { i + 1 };
        }
        b[i] = slot;
        self.len += 1;
        Ok(())
    }

    /// Removes `slot` stored under `key`; `key_of` gives the key of any other stored slot
    /// (to re-place entries behind the hole). Returns whether it was found.
    pub fn remove(&mut self, key: u64, slot: u32, key_of: impl Fn(u32) -> u64) -> bool {
        let n = self.buckets.as_ref().len();
        if n == 0 {
            return false;
        }
        let mut hole = self.home(key);
        let mut found = false;
        for _ in 0..n {
            match self.buckets.as_ref()[hole] {
                NIL => break,
                v if v == slot => {
                    found = true;
                    break;
                }
                _ => hole = if hole + 1 == n { 0 } else { hole + 1 },
            }
        }
        if !found {
            return false;
        }
        let dist = |from: usize, to: usize| (to + n - from) % n;
        let mut j = hole;
        loop {
            j = if j + 1 == n { 0 } else { j + 1 };
            let v = self.buckets.as_ref()[j];
            if v == NIL {
                break;
            }
            let home = self.home(key_of(v));
            // v may fill the hole if the hole lies on its probe path (home ..= j).
            if dist(home, j) >= dist(hole, j) {
                self.buckets.as_mut()[hole] = v;
                hole = j;
            }
        }
        self.buckets.as_mut()[hole] = NIL;
        self.len -= 1;
        true
    }
}
