//! Unexpected messages: the bounded segment pool that buffers their eager bytes, and
//! the queues that hold them until a receive matches.

use super::*;

impl<S: Storage> Rdm<S> {
    /// The unexpected message a receive for `src`, `tag` and `ignore` takes, oldest
    /// first. Messages that arrived before the application inserted their sender's
    /// address (queued with no source, as Open MPI's late inserts cause) are first
    /// given the source the AV names now, if it changed since they were last looked
    /// up: once per AV change, not per receive.
    #[inline]
    pub(in crate::rdm) fn ux_find(
        &mut self,
        tagged: bool,
        src: FiAddr,
        tag: u64,
        ignore: u64,
        ctx: &Ctx<'_, S>,
    ) -> Option<UxRef> {
        if self.recv.has_sourceless() {
            self.ux_rekey(ctx);
        }
        self.recv.find_unexpected(tagged, src, tag, ignore)
    }

    /// Gives messages queued with no source the source the AV names for their sender
    /// now, and the source they report (FI_SOURCE), if the AV changed since last time.
    #[cold]
    fn ux_rekey(&mut self, ctx: &Ctx<'_, S>) {
        let Some(n) = ctx.av_inserted() else {
            return;
        };
        let peers = &self.peers;
        self.recv.rekey(n, |m| {
            let p = peers
                .get(m.peer as usize)
                .filter(|p| p.session.epoch == m.epoch)?;
            let (src, report) = ctx.src_of(&p.addr);
            (src != FI_ADDR_NOTAVAIL).then(|| {
                m.report_src = report;
                src
            })
        });
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

#[cfg(feature = "shared-ctx")]
impl<S: Storage> Rdm<S> {
    /// Whether an unexpected message waits that a receive of this kind, source and
    /// tag would take: where a shared receive context hands its receive
    /// ([`crate::ep::srx`]).
    pub(crate) fn ux_matches(
        &mut self,
        tagged: bool,
        src: FiAddr,
        tag: u64,
        ignore: u64,
        ctx: &Ctx<'_, S>,
    ) -> bool {
        self.recv.unexpected_len() > 0 && self.ux_find(tagged, src, tag, ignore, ctx).is_some()
    }

    /// Whether a message was claimed (FI_PEEK | FI_CLAIM) with `context` here.
    pub(crate) fn holds_claim(&self, context: u64) -> bool {
        self.recv.claimed_by(context).is_some()
    }
}
