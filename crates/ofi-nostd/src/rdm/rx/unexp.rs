//! Unexpected messages: the bounded segment pool that buffers their eager bytes, and
//! the queues that hold them until a receive matches.

use super::*;

impl<S: Storage> Rdm<S> {
    /// Takes `n` slots off the free list, chained in order; NIL for `n == 0`.
    pub(in crate::rdm) fn ux_alloc(&mut self, n: usize) -> u32 {
        let mut first = NIL;
        let mut last = NIL;
        for _ in 0..n {
            let s = self.ux_free;
            if s == NIL {
                break;
            }
            self.ux_free = self.ux_next.as_ref()[s as usize];
            self.ux_nfree -= 1;
            self.ux_next.as_mut()[s as usize] = NIL;
            if last == NIL {
                first = s;
            } else {
                self.ux_next.as_mut()[last as usize] = s;
            }
            last = s;
        }
        first
    }

    pub(in crate::rdm) fn ux_free_chain(&mut self, mut s: u32) {
        while s != NIL {
            let next = self.ux_next.as_ref()[s as usize];
            self.ux_next.as_mut()[s as usize] = self.ux_free;
            self.ux_free = s;
            self.ux_nfree += 1;
            s = next;
        }
    }

    /// Writes `data` at message offset `off` of the chain starting at `first`.
    pub(in crate::rdm) fn ux_write(&mut self, first: u32, off: u64, data: &[u8]) {
        let useg = self.useg as u64;
        let mut s = first;
        let mut base = 0u64;
        let mut done = 0usize;
        while s != NIL && done < data.len() {
            let end = base + useg;
            let pos = off + done as u64;
            if pos < end {
                let within = (pos - base) as usize;
                let n = (self.useg - within).min(data.len() - done);
                let start = s as usize * self.useg + within;
                self.ux_buf.as_mut()[start..start + n].copy_from_slice(&data[done..done + n]);
                done += n;
            }
            base = end;
            s = self.ux_next.as_ref()[s as usize];
        }
    }

    /// Copies the first `len` bytes of chain `first` into the buffers `iov` of the
    /// receive posted with context `ctx`.
    pub(in crate::rdm) fn ux_copy_out<M: Memory>(
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
            let n = (self.useg as u64).min(len - off) as usize;
            let start = s as usize * self.useg;
            if let Err(e) = iov_write(mem, ctx, iov, off, &self.ux_buf.as_ref()[start..start + n]) {
                err.get_or_insert(e);
            }
            off += n as u64;
            s = self.ux_next.as_ref()[s as usize];
        }
        err
    }

    pub(in crate::rdm) fn ux_get(&self, r: UxRef) -> Option<UxMsg> {
        match r {
            UxRef::Untagged(h) => self.ux_msg.get(h).map(|n| *n.value()),
            UxRef::Tagged(h) => self.ux_tag.get(h).map(|n| *n.value()),
            UxRef::Claimed(h) => self.claimed.get(h).copied(),
        }
    }

    pub(in crate::rdm) fn ux_get_mut(&mut self, r: UxRef) -> Option<&mut UxMsg> {
        match r {
            UxRef::Untagged(h) => self.ux_msg.get_mut(h).map(|n| n.value_mut()),
            UxRef::Tagged(h) => self.ux_tag.get_mut(h).map(|n| n.value_mut()),
            UxRef::Claimed(h) => self.claimed.get_mut(h),
        }
    }

    pub(in crate::rdm) fn ux_remove(&mut self, r: UxRef) -> Option<UxMsg> {
        match r {
            UxRef::Untagged(h) => self.ux_msg.remove(h).map(|n| *n.value()),
            UxRef::Tagged(h) => self.ux_tag.remove(h).map(|n| *n.value()),
            UxRef::Claimed(h) => self.claimed.remove(h),
        }
    }

    /// Points a peer's in-progress message that was `from` at `to`.
    pub(in crate::rdm) fn retarget_asm(&mut self, m: &UxMsg, from: UxRef, to: AsmTarget) {
        if let Some(pm) = self.peers.get_mut(m.peer as usize)
            && pm.session.epoch == m.epoch
            && let Some(asm) = pm.rx.asm.as_mut()
            && asm.target == AsmTarget::Unexpected(from)
        {
            asm.target = to;
        }
    }

    /// Drops an unexpected message (discard, or its session failed). A rendezvous being
    /// discarded on a live session gets a CANCELED CTS so its sender completes.
    pub(in crate::rdm) fn drop_ux(&mut self, r: UxRef) {
        let Some(m) = self.ux_remove(r) else {
            return;
        };
        self.retarget_asm(&m, r, AsmTarget::Drop);
        if let UxKind::Eager { first, .. } = m.kind {
            self.ux_free_chain(first);
        }
    }
}
