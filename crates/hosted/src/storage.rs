//! [`Heap`]: the core's [`Storage`] over boxed slices.
//!
//! The core never allocates; it asks the storage it was given for every pool and queue
//! when an object is opened. On a host that storage is the heap: each slice is one
//! `Box<[T]>`, allocated when the object opens and freed when it closes, so the data
//! path itself allocates nothing.

use std::alloc::{self, Layout};

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

    /// From the allocator's zeroed memory (`calloc`): large buffers are fresh pages
    /// the kernel maps on first touch, so an endpoint's worst-case packet pools cost
    /// resident memory only as far as traffic fills them.
    #[allow(unsafe_code)]
    fn zeroed(&mut self, len: usize) -> Option<Box<[u8]>> {
        if len > MAX_SLICE_BYTES {
            return None;
        }
        if len == 0 {
            return Some(Box::default());
        }
        let layout = Layout::array::<u8>(len).ok()?;
        // SAFETY: `layout` has a non-zero size (`len > 0`).
        let p = unsafe { alloc::alloc_zeroed(layout) };
        if p.is_null() {
            return None;
        }
        // SAFETY: `p` is a live allocation of the global allocator with the layout of
        // `[u8; len]`, every byte initialised (zero); the box takes sole ownership and
        // frees it with that same layout.
        Some(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(p, len)) })
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

    #[test]
    fn zeroed_buffers_are_zero_writable_and_bounded() {
        for len in [0, 1, 4096, 3 << 20] {
            let mut b = Heap.zeroed(len).unwrap();
            assert_eq!(b.len(), len);
            assert!(b.iter().all(|&x| x == 0));
            if let Some(last) = b.last_mut() {
                *last = 0xa5;
                b[0] |= 1;
            }
            if len > 1 {
                assert_eq!((b[0], b[len - 1]), (1, 0xa5));
            }
        }
        assert!(Heap.zeroed(MAX_SLICE_BYTES).is_some());
        assert!(Heap.zeroed(MAX_SLICE_BYTES + 1).is_none());
        assert!(Heap.zeroed(usize::MAX).is_none());
    }
}
