//! [`RawMemory`]: the core's [`Memory`] over raw addresses, for callers that live under
//! libfabric's buffer-lifetime contract.
//!
//! The core names application buffers by address and length and copies through a
//! [`Memory`]. A C application (the provider library) hands the core real pointers and
//! promises, as fi_msg(3) requires, that each buffer stays valid and untouched until its
//! operation completes; [`RawMemory`] copies through those pointers. Because nothing in
//! the type can check that promise, making one is `unsafe`: the caller takes on the
//! contract.
//!
//! The safe Rust API does **not** use this type: it hands the core only the addresses
//! of buffers it owns and checks every access against them (see [`crate::api`]).
//!
//! This is the only module of the crate that contains `unsafe` code.

use core::ptr;

use ofi_nostd::Errno;
use ofi_nostd::mem::Memory;

/// Copies to and from application memory through raw pointers.
///
/// Zero-length accesses touch nothing and always succeed. A null address, or a range
/// that wraps around the address space or does not fit in `usize`, is -FI_EFAULT
/// (checked, never dereferenced); anything else is trusted.
#[derive(Debug, Clone, Copy)]
pub struct RawMemory {
    _contract: (),
}

impl RawMemory {
    /// A memory that trusts every address it is given.
    ///
    /// # Safety
    ///
    /// For as long as the returned value (or a copy of it) is used, every range
    /// `addr..addr + len` passed to [`Memory::read`] must be valid for reads of `len`
    /// bytes, and every range passed to [`Memory::write`] valid for writes of `len`
    /// bytes, with no other access to those bytes racing the copy, and no overlap with
    /// the slice on the other side of the copy. That is libfabric's contract: the
    /// core only uses the addresses the application posted, and the application keeps
    /// each buffer alive and leaves it alone until the operation's completion (or until
    /// the endpoint is closed).
    pub const unsafe fn new() -> Self {
        RawMemory { _contract: () }
    }
}

/// The address range `addr..addr + len` as a pointer, or -FI_EFAULT if it is null,
/// wraps, or does not fit this machine's address space.
fn range(addr: u64, len: usize) -> ofi_nostd::Result<*mut u8> {
    let start = usize::try_from(addr).map_err(|_| Errno::EFAULT)?;
    if start == 0 || start.checked_add(len).is_none() {
        return Err(Errno::EFAULT);
    }
    // The application's pointers were exposed when they were turned into integers
    // (`ptr as u64` or across the C ABI); take the provenance back from there.
    Ok(ptr::with_exposed_provenance_mut(start))
}

impl Memory for RawMemory {
    fn read(&self, addr: u64, out: &mut [u8]) -> ofi_nostd::Result<()> {
        if out.is_empty() {
            return Ok(());
        }
        let src = range(addr, out.len())?;
        // SAFETY: `RawMemory::new`'s contract makes `addr..addr + out.len()` valid for
        // reads with no racing writer, and `out` is a distinct exclusive borrow, so
        // the ranges do not overlap; `u8` needs no alignment.
        unsafe { ptr::copy_nonoverlapping(src.cast_const(), out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> ofi_nostd::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let dst = range(addr, data.len())?;
        // SAFETY: `RawMemory::new`'s contract makes `addr..addr + data.len()` valid for
        // writes with no other access racing it and no overlap with `data`; `u8`
        // needs no alignment.
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! Run under Miri with `cargo +nightly miri test -p hosted mem::` (add
    //! `MIRIFLAGS=-Zmiri-permissive-provenance` to silence the integer-to-pointer
    //! warning: turning libfabric's integer addresses back into pointers is the point).

    use super::*;

    fn addr_of(buf: &[u8]) -> u64 {
        buf.as_ptr().expose_provenance() as u64
    }

    #[test]
    fn copies_both_ways() {
        let mut app = vec![0u8; 16];
        let base = app.as_mut_ptr().expose_provenance() as u64;
        // SAFETY: `app` outlives `m` and is only touched through `m` meanwhile.
        let mut m = unsafe { RawMemory::new() };
        m.write(base + 4, &[1, 2, 3]).unwrap();
        let mut out = [0u8; 5];
        m.read(base + 3, &mut out).unwrap();
        assert_eq!(out, [0, 1, 2, 3, 0]);
        assert_eq!(&app[4..7], &[1, 2, 3]);
    }

    #[test]
    fn boxed_buffer_round_trip() {
        let src: Box<[u8]> = (0..=255u8).collect();
        let mut dst = vec![0u8; 256].into_boxed_slice();
        let (s, d) = (addr_of(&src), dst.as_mut_ptr().expose_provenance() as u64);
        // SAFETY: both buffers outlive `m`; neither is touched during the copies.
        let mut m = unsafe { RawMemory::new() };
        let mut bounce = [0u8; 256];
        m.read(s, &mut bounce).unwrap();
        m.write(d, &bounce).unwrap();
        assert_eq!(src, dst);
    }

    #[test]
    fn empty_accesses_touch_nothing() {
        // SAFETY: no access below has a non-zero length.
        let mut m = unsafe { RawMemory::new() };
        m.read(0, &mut []).unwrap();
        m.write(u64::MAX, &[]).unwrap();
    }

    #[test]
    fn null_and_wrapping_ranges_are_efault() {
        // SAFETY: every access below is refused before any pointer is formed.
        let mut m = unsafe { RawMemory::new() };
        let mut out = [0u8; 4];
        assert_eq!(m.read(0, &mut out), Err(Errno::EFAULT));
        assert_eq!(m.write(0, &[1]), Err(Errno::EFAULT));
        assert_eq!(m.read(u64::MAX - 1, &mut out), Err(Errno::EFAULT));
        assert_eq!(m.write(usize::MAX as u64, &[1, 2]), Err(Errno::EFAULT));
    }
}
