//! [`Heap`]: the core's [`Storage`] over boxed slices.
//!
//! The core never allocates; it asks the storage it was given for every pool and queue
//! when an object is opened. On a host that storage is the heap: each slice is one
//! `Box<[T]>`, allocated when the object opens and freed when it closes, so the data
//! path itself allocates nothing.

use ofi_nostd::storage::Storage;

/// Largest slice [`Heap`] hands out, in bytes. An attribute asking for more (a CQ of
/// 2^40 entries) is -FI_ENOMEM instead of an allocation the OOM killer ends.
pub const MAX_SLICE_BYTES: usize = 256 << 20;

/// Storage that allocates each slice on the heap. Allocation failure and slices over
/// [`MAX_SLICE_BYTES`] are refusals (`None`, i.e. -FI_ENOMEM), never an abort.
#[derive(Debug, Default, Clone, Copy)]
pub struct Heap;

impl Storage for Heap {
    type Slice<T> = Box<[T]>;

    fn slice<T>(&mut self, len: usize, mut init: impl FnMut() -> T) -> Option<Box<[T]>> {
        if len.checked_mul(size_of::<T>().max(1))? > MAX_SLICE_BYTES {
            return None;
        }
        let mut v = Vec::new();
        v.try_reserve_exact(len).ok()?;
        v.extend((0..len).map(|_| init()));
        Some(v.into_boxed_slice())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_and_refusals() {
        let s = Heap.slice(3, || 7u32).unwrap();
        assert_eq!(&*s, &[7, 7, 7]);
        assert!(Heap.slice(0, || 0u8).unwrap().is_empty());
        assert!(Heap.slice(usize::MAX, || 0u8).is_none());
        assert!(Heap.slice(MAX_SLICE_BYTES / 8 + 1, || 0u64).is_none());
    }
}
