//! Unexpected messages: the bounded segment pool that buffers their eager bytes, and
//! the queues that hold them until a receive matches.

use super::*;
use crate::flags::FI_ADDR_UNSPEC;

impl<S: Storage> Rdm<S> {
    /// The unexpected message a receive for `src`, `tag` and `ignore` takes, oldest
    /// first. A directed receive also takes one that arrived before the application
    /// inserted its sender's address (queued with no source), and that message then
    /// reports the source the AV names now.
    #[inline]
    pub(in crate::rdm) fn ux_find(
        &mut self,
        tagged: bool,
        src: FiAddr,
        tag: u64,
        ignore: u64,
        ctx: &Ctx<'_, S>,
    ) -> Option<UxRef> {
        let r = self
            .recv
            .find_unexpected(tagged, src, tag, ignore, |m| self.ux_now_from(m, src, ctx))?;
        if src != FI_ADDR_UNSPEC {
            self.ux_resolved(r, ctx);
        }
        Some(r)
    }

    /// Whether unexpected message `m`, queued with no source, comes from `src` by the
    /// AV as it is now.
    #[cold]
    fn ux_now_from(&self, m: &UxMsg, src: FiAddr, ctx: &Ctx<'_, S>) -> bool {
        self.peers
            .get(m.peer as usize)
            .filter(|p| p.session.epoch == m.epoch)
            .is_some_and(|p| ctx.src_of(&p.addr).0 == src)
    }

    /// A directed receive matched `r`: if it was queued with no source, the source it
    /// reports (FI_SOURCE) is the one the AV names now.
    #[cold]
    fn ux_resolved(&mut self, r: UxRef, ctx: &Ctx<'_, S>) {
        let node = match r {
            UxRef::Tagged(h) => self.recv.ux_tag.get_mut(h),
            UxRef::Untagged(h) => self.recv.ux_msg.get_mut(h),
            UxRef::Claimed(_) => None,
        };
        if let Some(n) = node.filter(|n| n.src() == FI_ADDR_NOTAVAIL)
            && let Some(p) = self.peers.get(n.value().peer as usize)
        {
            n.value_mut().report_src = ctx.src_of(&p.addr).1;
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
        let Some(m) = self.recv.remove_ux(r) else {
            return;
        };
        self.retarget_asm(&m, r, AsmTarget::Drop);
        if let UxKind::Eager { first, .. } = m.kind {
            self.segs.free_chain(first);
        }
    }
}
