//! Unexpected messages: the bounded segment pool that buffers their eager bytes, and
//! the queues that hold them until a receive matches.

use super::*;

impl<S: Storage> Rdm<S> {
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
            self.segs.free_chain(first);
        }
    }
}
