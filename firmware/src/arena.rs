//! A bump arena as [`Storage`]: slices carved from one static byte region, for the
//! objects whose sizes [`ofi_nostd::storage::Fixed`] cannot serve.
//!
//! `Fixed<N>` gives every slice an inline capacity of `N`, so a domain's size grows with
//! `N` times the largest object, and nested pools with `N²`. The DGRAM responder fits
//! `Fixed<16>` (a ~600 KiB domain); the RDM engine asks for byte slices of tens of KiB
//! (its reorder and unexpected-message buffers), which no `Fixed<N>` can hold. An arena
//! hands out exactly what is asked: RAM is the sum of the slices.
//!
//! Memory is never given back (the firmware opens its objects once); a closed object's
//! slices stay carved. Values are never dropped. Carving is a lock-free bump of an atomic
//! offset, so a `static` arena is `Sync` and each byte is handed out at most once.
//! (Its unit tests pass under Miri with strict provenance.)

use core::cell::UnsafeCell;
use core::marker::PhantomData;
use core::mem::MaybeUninit;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering};

use ofi_nostd::storage::Storage;

/// `N` bytes to carve slices from.
pub struct Arena<const N: usize> {
    bytes: UnsafeCell<[MaybeUninit<u8>; N]>,
    used: AtomicUsize,
}

// SAFETY: the bytes are only reached through `carve`, which hands each range out to
// exactly one caller (an atomic compare-exchange claims it), so shared references to
// the arena never give two parties the same memory.
unsafe impl<const N: usize> Sync for Arena<N> {}

impl<const N: usize> Default for Arena<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> core::fmt::Debug for Arena<N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Arena")
            .field("capacity", &N)
            .field("used", &self.used())
            .finish()
    }
}

impl<const N: usize> Arena<N> {
    /// An empty arena (uninitialised bytes: a `static` of it costs only `.bss`).
    pub const fn new() -> Self {
        Arena {
            bytes: UnsafeCell::new([MaybeUninit::uninit(); N]),
            used: AtomicUsize::new(0),
        }
    }

    /// Bytes carved so far (alignment padding included).
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// A slice of `len` values made by `init`, or `None` when the rest of the arena is
    /// too small.
    // Like any bump allocator: each call gets memory no other call ever gets.
    #[allow(clippy::mut_from_ref)]
    pub fn carve<T>(&self, len: usize, init: impl FnMut() -> T) -> Option<&mut [T]> {
        let ptr = self.carve_raw(len, init)?;
        // SAFETY: `carve_raw` initialised `len` values at `ptr`, in memory handed out to
        // this call alone for as long as the arena lives (and it is borrowed here).
        Some(unsafe { core::slice::from_raw_parts_mut(ptr.as_ptr(), len) })
    }

    /// [`Arena::carve`] without a lifetime: `len` initialised values at the pointer,
    /// valid as long as the arena, used by nobody else.
    fn carve_raw<T>(&self, len: usize, mut init: impl FnMut() -> T) -> Option<NonNull<T>> {
        if len == 0 || size_of::<T>() == 0 {
            // Zero-sized values (or none) need no memory: a dangling, aligned pointer
            // will do; the values made by `init` are forgotten, like every arena value.
            for _ in 0..len {
                core::mem::forget(init());
            }
            return Some(NonNull::dangling());
        }
        let size = len.checked_mul(size_of::<T>())?;
        let bytes = self.bytes.get().cast::<u8>();
        let base = bytes.addr();
        let mut start = 0;
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                let addr = base.checked_add(used)?;
                let aligned = addr.checked_next_multiple_of(align_of::<T>())?;
                start = aligned - base;
                let end = start.checked_add(size)?;
                (end <= N).then_some(end)
            })
            .ok()?;
        // SAFETY: `start <= N - size` (checked above), so the offset stays inside `bytes`.
        let ptr = unsafe { bytes.add(start) }.cast::<T>();
        for i in 0..len {
            // SAFETY: `start..start + size` lies inside `bytes` (checked above), was
            // claimed by this call alone (compare-exchange on `used`), and is aligned for
            // `T`; `i < len` keeps every write inside it.
            unsafe { ptr.add(i).write(init()) };
        }
        NonNull::new(ptr)
    }
}

/// A slice carved from an [`Arena`] borrowed for `'a`.
pub struct ArenaSlice<'a, T> {
    ptr: NonNull<T>,
    len: usize,
    _arena: PhantomData<&'a ()>,
    _owns: PhantomData<T>,
}

impl<T> AsRef<[T]> for ArenaSlice<'_, T> {
    fn as_ref(&self) -> &[T] {
        // SAFETY: `ptr` holds `len` initialised values carved for this value alone (see
        // `Arena::carve_raw`), valid while the arena is, i.e. for 'a, which outlives
        // `self`.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> AsMut<[T]> for ArenaSlice<'_, T> {
    fn as_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `as_ref`; `&mut self` makes this the only access.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

// SAFETY: an `ArenaSlice` owns its values exclusively, like a `&mut [T]`.
unsafe impl<T: Send> Send for ArenaSlice<'_, T> {}
// SAFETY: as above: shared access is `&[T]`.
unsafe impl<T: Sync> Sync for ArenaSlice<'_, T> {}

impl<'a, const N: usize> Storage for &'a Arena<N> {
    type Slice<T> = ArenaSlice<'a, T>;

    fn slice<T>(&mut self, len: usize, init: impl FnMut() -> T) -> Option<ArenaSlice<'a, T>> {
        let arena: &'a Arena<N> = self;
        arena.carve_raw(len, init).map(|ptr| ArenaSlice {
            ptr,
            len,
            _arena: PhantomData,
            _owns: PhantomData,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carves_aligned_disjoint_slices_until_full() {
        let arena = Arena::<256>::new();
        let a = arena.carve(3, || 0xabu8).unwrap();
        let b = arena.carve(4, || 7u64).unwrap();
        assert_eq!(a, &[0xab; 3]);
        assert_eq!(b, &[7; 4]);
        assert_eq!(b.as_ptr() as usize % align_of::<u64>(), 0);
        let (a_end, b_start) = (a.as_ptr() as usize + 3, b.as_ptr() as usize);
        assert!(b_start >= a_end, "disjoint");
        a[0] = 1;
        b[3] = 9;
        assert_eq!((a[0], b[3]), (1, 9));
        assert!(arena.used() <= 8 + 32 + 8);
        assert!(arena.carve(1000, || 0u8).is_none(), "too large");
        assert!(arena.carve(usize::MAX, || 0u32).is_none(), "overflow");
        let rest = 256 - arena.used();
        assert!(arena.carve(rest, || 1u8).is_some(), "exactly the rest");
        assert!(arena.carve(1, || 1u8).is_none(), "full");
        assert_eq!(arena.carve(0, || 1u8).unwrap().len(), 0);
        assert_eq!(arena.carve(5, || ()).unwrap().len(), 5);
    }

    #[test]
    fn serves_as_storage() {
        let arena = Arena::<1024>::new();
        let mut store = &arena;
        let mut n = 0;
        let s = store
            .slice(4, || {
                n += 1;
                n
            })
            .unwrap();
        assert_eq!(s.as_ref(), &[1, 2, 3, 4]);
        assert!(store.slice(2000, || 0u8).is_none());
    }
}
