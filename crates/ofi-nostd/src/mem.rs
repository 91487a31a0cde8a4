//! The application's memory, as the core sees it.
//!
//! The core never dereferences a user address itself: buffers are named by address and
//! length ([`IoVec`]) as in libfabric, and every copy goes through a [`Memory`] the
//! adapter provides. The hosted adapter and the C provider copy through raw pointers
//! (libfabric's contract keeps buffers valid until their completion); firmware maps DMA
//! regions; tests use [`SliceMemory`]. This keeps the core free of `unsafe` and makes every
//! access bounds-checked by whoever owns the memory.

use crate::errno::{Errno, Result};

/// One contiguous buffer of the application: `struct iovec`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IoVec {
    /// Start address.
    pub addr: u64,
    /// Length in bytes.
    pub len: usize,
}

impl IoVec {
    /// A buffer from its parts.
    pub const fn new(addr: u64, len: usize) -> Self {
        IoVec { addr, len }
    }
}

/// Reads and writes application memory by address.
pub trait Memory {
    /// Copies `out.len()` bytes starting at `addr` into `out`; -FI_EFAULT if any of that
    /// range is not accessible.
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<()>;

    /// Copies `data` to `addr`; -FI_EFAULT if any of that range is not accessible.
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<()>;

    /// [`Memory::read`] from a buffer of the operation posted with context `ctx`: what
    /// the core calls for every copy out of a posted buffer (it always knows whose
    /// buffer it is), so memory that keeps buffers per operation checks the access
    /// against that operation alone, in constant time. By default the plain `read`.
    fn read_op(&self, ctx: u64, addr: u64, out: &mut [u8]) -> Result<()> {
        let _ = ctx;
        self.read(addr, out)
    }

    /// [`Memory::write`] into a buffer of the operation posted with context `ctx`; see
    /// [`Memory::read_op`].
    fn write_op(&mut self, ctx: u64, addr: u64, data: &[u8]) -> Result<()> {
        let _ = ctx;
        self.write(addr, data)
    }
}

/// A [`Memory`] over one byte slice mapped at `base`: what tests and simulations use.
pub struct SliceMemory<'a> {
    base: u64,
    bytes: &'a mut [u8],
}

impl<'a> SliceMemory<'a> {
    /// `bytes` appears at addresses `base..base + bytes.len()`.
    pub fn new(base: u64, bytes: &'a mut [u8]) -> Self {
        SliceMemory { base, bytes }
    }

    fn range(&self, addr: u64, len: usize) -> Result<core::ops::Range<usize>> {
        let start = usize::try_from(addr.checked_sub(self.base).ok_or(Errno::EFAULT)?)
            .map_err(|_| Errno::EFAULT)?;
        let end = start.checked_add(len).ok_or(Errno::EFAULT)?;
        if end > self.bytes.len() {
            return Err(Errno::EFAULT);
        }
        Ok(start..end)
    }

    /// The underlying bytes.
    pub fn bytes(&self) -> &[u8] {
        self.bytes
    }
}

impl Memory for SliceMemory<'_> {
    fn read(&self, addr: u64, out: &mut [u8]) -> Result<()> {
        let r = self.range(addr, out.len())?;
        out.copy_from_slice(&self.bytes[r]);
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<()> {
        let r = self.range(addr, data.len())?;
        self.bytes[r].copy_from_slice(data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_checked() {
        let mut backing = [0u8; 8];
        let mut m = SliceMemory::new(0x1000, &mut backing);
        m.write(0x1002, &[1, 2]).unwrap();
        let mut out = [0u8; 3];
        m.read(0x1001, &mut out).unwrap();
        assert_eq!(out, [0, 1, 2]);
        assert_eq!(m.write(0x1007, &[1, 2]), Err(Errno::EFAULT));
        assert_eq!(m.read(0xfff, &mut out), Err(Errno::EFAULT));
        assert_eq!(m.read(u64::MAX, &mut out), Err(Errno::EFAULT));
    }
}
