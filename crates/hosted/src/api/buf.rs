//! [`Buf`]: the owned buffer that operations borrow from the application.

use std::fmt;
use std::ops::{Deref, DerefMut};

/// A heap buffer whose address never changes, moved into an operation when it is posted
/// and handed back in the operation's completion (the owned-buffer model of io_uring
/// runtimes such as tokio-uring).
///
/// While an operation holds it, the application has no way to reach the bytes, so the
/// stack can copy into or out of them at any time without a data race or a
/// use-after-free, and without `unsafe` in the application.
///
/// A `Buf` has a *capacity* (its allocation, fixed) and a *length* (the bytes that
/// count, `0..=capacity`): a send transmits the first `len()` bytes; a receive may fill
/// the whole capacity and its completion sets the length to the bytes received. The
/// slice view (`Deref`) is the first `len()` bytes.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Buf {
    data: Box<[u8]>,
    len: usize,
}

impl Buf {
    /// A zero-filled buffer of `capacity` bytes with length `capacity`.
    pub fn zeroed(capacity: usize) -> Buf {
        Buf {
            data: vec![0; capacity].into_boxed_slice(),
            len: capacity,
        }
    }

    /// The allocation's size: the most a receive into this buffer can take.
    pub fn capacity(&self) -> usize {
        self.data.len()
    }

    /// Sets the length (bytes a send transmits). Panics if `len` exceeds the capacity,
    /// like slice indexing: that is a bug in the caller.
    pub fn set_len(&mut self, len: usize) {
        assert!(
            len <= self.capacity(),
            "Buf::set_len({len}) beyond capacity {}",
            self.capacity()
        );
        self.len = len;
    }

    /// The whole allocation, whatever the length (to fill before a send).
    pub fn as_full_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }

    /// Fills the buffer from `data` (length becomes `data.len()`). Panics if `data`
    /// is longer than the capacity.
    pub fn copy_from(&mut self, data: &[u8]) {
        self.set_len(data.len());
        self.data[..data.len()].copy_from_slice(data);
    }

    /// The allocation, e.g. to reuse it elsewhere.
    pub fn into_boxed_slice(self) -> Box<[u8]> {
        self.data
    }

    /// Where the allocation lives: the address the core is given.
    pub(crate) fn addr(&self) -> u64 {
        self.data.as_ptr() as u64
    }

    /// The whole allocation, for the stack's copies.
    pub(crate) fn storage(&self) -> &[u8] {
        &self.data
    }

    /// The whole allocation, mutably, for the stack's copies.
    pub(crate) fn storage_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }
}

impl Deref for Buf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.data[..self.len]
    }
}

impl DerefMut for Buf {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.data[..self.len]
    }
}

impl From<Vec<u8>> for Buf {
    fn from(v: Vec<u8>) -> Buf {
        Buf::from(v.into_boxed_slice())
    }
}

impl From<Box<[u8]>> for Buf {
    fn from(data: Box<[u8]>) -> Buf {
        let len = data.len();
        Buf { data, len }
    }
}

impl From<&[u8]> for Buf {
    fn from(data: &[u8]) -> Buf {
        Buf::from(Box::<[u8]>::from(data))
    }
}

impl fmt::Debug for Buf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buf")
            .field("len", &self.len)
            .field("capacity", &self.capacity())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_and_capacity() {
        let mut b = Buf::zeroed(8);
        assert_eq!((b.len(), b.capacity()), (8, 8));
        b.copy_from(b"abc");
        assert_eq!(&*b, b"abc");
        assert_eq!(b.capacity(), 8);
        let addr = b.addr();
        let moved = b;
        assert_eq!(
            moved.addr(),
            addr,
            "the allocation does not move with the value"
        );
        assert_eq!(Buf::from(vec![1, 2]).len(), 2);
    }

    #[test]
    #[should_panic(expected = "beyond capacity")]
    fn set_len_beyond_capacity_panics() {
        Buf::zeroed(2).set_len(3);
    }
}
