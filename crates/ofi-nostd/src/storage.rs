//! Where the domain's fixed-capacity arrays come from.
//!
//! The core sizes every pool and queue from attributes (a CQ's `size`, an endpoint's
//! `tx_attr.size`, ...) but never allocates: it asks the [`Storage`] the caller gave the
//! domain for a slice of that length. The hosted adapter hands out boxed slices; firmware
//! can hand out `heapless::Vec<T, N>`s (every slice at most `N` long, no `unsafe`) or
//! carve static arenas; tests use `Vec`. A refusal is an error value (`-FI_ENOMEM`),
//! never a panic.

/// A source of fixed-length slices for the domain's objects.
pub trait Storage {
    /// A slice of `T` owned by the object it was given to.
    type Slice<T>: AsRef<[T]> + AsMut<[T]>;

    /// A slice of exactly `len` values made by `init`, or `None` when this storage
    /// cannot provide it (too long, arena exhausted).
    fn slice<T>(&mut self, len: usize, init: impl FnMut() -> T) -> Option<Self::Slice<T>>;

    /// `len` zero bytes: the engine's packet buffers (reorder, unexpected messages,
    /// inject bounces), sized for the worst case and mostly never used. A storage whose
    /// memory comes zeroed from the system (the host's heap) can leave the pages
    /// untouched, so they cost address space until traffic needs them.
    fn zeroed(&mut self, len: usize) -> Option<Self::Slice<u8>> {
        self.slice(len, || 0)
    }
}

/// Storage of fixed-capacity `heapless::Vec`s: every slice holds at most `N` values.
/// Needs nothing but the stack or a `static`; the natural choice on firmware.
#[derive(Debug, Default, Clone, Copy)]
pub struct Fixed<const N: usize>;

/// The slice type of [`Fixed`]: a `heapless::Vec` that derefs to `[T]`.
pub struct FixedVec<T, const N: usize>(heapless::Vec<T, N>);

impl<T, const N: usize> AsRef<[T]> for FixedVec<T, N> {
    fn as_ref(&self) -> &[T] {
        &self.0
    }
}

impl<T, const N: usize> AsMut<[T]> for FixedVec<T, N> {
    fn as_mut(&mut self) -> &mut [T] {
        &mut self.0
    }
}

impl<const N: usize> Storage for Fixed<N> {
    type Slice<T> = FixedVec<T, N>;

    fn slice<T>(&mut self, len: usize, mut init: impl FnMut() -> T) -> Option<FixedVec<T, N>> {
        if len > N {
            return None;
        }
        let mut v = heapless::Vec::new();
        for _ in 0..len {
            v.push(init()).ok()?;
        }
        Some(FixedVec(v))
    }
}

#[cfg(test)]
pub(crate) mod test_storage {
    //! `Vec`-backed storage for the crate's tests.
    extern crate std;
    use std::vec::Vec;

    /// Hands out `Vec`s of any length.
    #[derive(Debug, Default, Clone, Copy)]
    pub struct VecStorage;

    impl super::Storage for VecStorage {
        type Slice<T> = Vec<T>;

        fn slice<T>(&mut self, len: usize, mut init: impl FnMut() -> T) -> Option<Vec<T>> {
            Some((0..len).map(|_| init()).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_refuses_long_slices() {
        let mut s = Fixed::<4>;
        let v = s.slice(3, || 7u8).unwrap();
        assert_eq!(v.as_ref(), &[7, 7, 7]);
        assert!(s.slice(5, || 0u8).is_none());
        let mut n = 0;
        let v = s.slice(4, || {
            n += 1;
            n
        });
        assert_eq!(v.unwrap().as_ref(), &[1, 2, 3, 4]);
    }
}
