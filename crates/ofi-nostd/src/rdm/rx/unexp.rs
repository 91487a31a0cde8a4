//! Unexpected messages: the bounded segment pool that buffers their eager bytes, and
//! the queues that hold them until a receive matches.

use super::*;

impl<S: Storage> Rdm<S> {
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
        let Some(m) = self.recv.remove_ux(r) else {
            return;
        };
        self.retarget_asm(&m, r, AsmTarget::Drop);
        if let UxKind::Eager { first, .. } = m.kind {
            self.segs.free_chain(first);
        }
    }
}
