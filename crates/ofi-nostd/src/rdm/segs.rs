//! The unexpected segment pool: fixed-size slots that buffer the eager bytes of
//! unexpected messages, chained per message through a next-slot array (one free list,
//! no allocation).

use super::*;

/// Slots of `seg` bytes each, chained by `next`; [`NIL`] ends a chain.
pub(in crate::rdm) struct SegPool<S: Storage> {
    buf: S::Slice<u8>,
    next: S::Slice<u32>,
    /// Bytes per slot.
    seg: usize,
    /// The first free slot.
    free: u32,
    nfree: usize,
}

impl<S: Storage> SegPool<S> {
    /// `n` slots of `seg` bytes from `store`.
    pub(in crate::rdm) fn new(store: &mut S, n: usize, seg: usize) -> Result<Self> {
        let buf = store
            .zeroed(n.checked_mul(seg).ok_or(Errno::ENOMEM)?)
            .ok_or(Errno::ENOMEM)?;
        let mut j = 0u32;
        let next = store
            .slice(n, || {
                j += 1;
                if (j as usize) < n { j } else { NIL }
            })
            .ok_or(Errno::ENOMEM)?;
        Ok(SegPool {
            buf,
            next,
            seg,
            free: if n > 0 { 0 } else { NIL },
            nfree: n,
        })
    }

    /// Bytes per slot.
    #[inline]
    pub(in crate::rdm) fn seg_size(&self) -> usize {
        self.seg
    }

    /// Slots free.
    #[inline]
    pub(in crate::rdm) fn free_slots(&self) -> usize {
        self.nfree
    }

    /// Takes `n` slots off the free list, chained in order; NIL for `n == 0`.
    pub(in crate::rdm) fn alloc(&mut self, n: usize) -> u32 {
        let mut first = NIL;
        let mut last = NIL;
        for _ in 0..n {
            let s = self.free;
            if s == NIL {
                break;
            }
            self.free = self.next.as_ref()[s as usize];
            self.nfree -= 1;
            self.next.as_mut()[s as usize] = NIL;
            if last == NIL {
                first = s;
            } else {
                self.next.as_mut()[last as usize] = s;
            }
            last = s;
        }
        first
    }

    /// Gives the chain starting at `s` back.
    pub(in crate::rdm) fn free_chain(&mut self, mut s: u32) {
        while s != NIL {
            let next = self.next.as_ref()[s as usize];
            self.next.as_mut()[s as usize] = self.free;
            self.free = s;
            self.nfree += 1;
            s = next;
        }
    }

    /// Writes `data` at message offset `off` of the chain starting at `first`.
    pub(in crate::rdm) fn write(&mut self, first: u32, off: u64, data: &[u8]) {
        let useg = self.seg as u64;
        let mut s = first;
        let mut base = 0u64;
        let mut done = 0usize;
        while s != NIL && done < data.len() {
            let end = base + useg;
            let pos = off + done as u64;
            if pos < end {
                let within = (pos - base) as usize;
                let n = (self.seg - within).min(data.len() - done);
                let start = s as usize * self.seg + within;
                self.buf.as_mut()[start..start + n].copy_from_slice(&data[done..done + n]);
                done += n;
            }
            base = end;
            s = self.next.as_ref()[s as usize];
        }
    }

    /// Copies the first `len` bytes of chain `first` into the buffers `iov` of the
    /// receive posted with context `ctx`.
    pub(in crate::rdm) fn copy_out<M: Memory>(
        &self,
        first: u32,
        len: u64,
        ctx: u64,
        iov: &[IoVec],
        mem: &mut M,
    ) -> Option<Errno> {
        let mut s = first;
        let mut off = 0u64;
        let mut err = None;
        while s != NIL && off < len {
            let n = (self.seg as u64).min(len - off) as usize;
            let start = s as usize * self.seg;
            if let Err(e) = iov_write(mem, ctx, iov, off, &self.buf.as_ref()[start..start + n]) {
                err.get_or_insert(e);
            }
            off += n as u64;
            s = self.next.as_ref()[s as usize];
        }
        err
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mem::SliceMemory;
    use crate::storage::test_storage::VecStorage;

    #[test]
    fn chains_write_and_copy_out() {
        let mut s = SegPool::new(&mut VecStorage, 4, 8).unwrap();
        assert_eq!((s.seg_size(), s.free_slots()), (8, 4));
        let c = s.alloc(3);
        assert_ne!(c, NIL);
        assert_eq!(s.free_slots(), 1);
        // 20 bytes across three segments, written in two pieces.
        let data: [u8; 20] = core::array::from_fn(|i| i as u8 + 1);
        s.write(c, 0, &data[..5]);
        s.write(c, 5, &data[5..]);
        let mut out = [0u8; 32];
        let mut mem = SliceMemory::new(0x100, &mut out);
        let iov = [IoVec::new(0x100, 32)];
        assert_eq!(s.copy_out(c, 20, 7, &iov, &mut mem), None);
        assert_eq!(&out[..20], &data[..]);
        assert!(out[20..].iter().all(|&b| b == 0));
        s.free_chain(c);
        assert_eq!(s.free_slots(), 4);
    }

    #[test]
    fn alloc_stops_at_empty() {
        let mut s = SegPool::new(&mut VecStorage, 2, 8).unwrap();
        assert_eq!(s.alloc(0), NIL);
        let c = s.alloc(5);
        assert_ne!(c, NIL);
        assert_eq!(s.free_slots(), 0);
        assert_eq!(s.alloc(1), NIL);
        s.free_chain(c);
        assert_eq!(s.free_slots(), 2);
        let empty = SegPool::new(&mut VecStorage, 0, 8).unwrap();
        assert_eq!(empty.free_slots(), 0);
    }
}
