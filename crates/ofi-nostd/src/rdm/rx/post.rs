//! Posting receives (fi_recv, fi_trecv, multi-recv, FI_PEEK / FI_CLAIM / FI_DISCARD),
//! the copies of buffered unexpected data into matched buffers, and cancellation.

use super::*;
#[cfg(feature = "shared-ctx")]
use crate::matching::Held;

impl<S: Storage> Rdm<S> {
    /// Posts a receive: matches buffered unexpected messages first (data is copied by
    /// the next progress call), else queues it. FI_PEEK / FI_CLAIM / FI_DISCARD for
    /// tagged receives. -FI_EAGAIN when a queue is full. Inlined into its one caller
    /// (`Domain::post_any_recv`; callgrind: 2% of an engine round trip).
    #[inline(always)]
    pub(crate) fn post_recv(&mut self, req: &RecvReq, ctx: &mut Ctx<'_, S>) -> Result<()> {
        let tagged = req.tag.is_some();
        let (tag, ignore) = req.tag.unwrap_or((0, 0));
        let f = req.flags;
        if tagged && f.intersects(Flags::PEEK | Flags::CLAIM) {
            return self.peek_claim(req, ctx);
        }
        if f.contains(Flags::DISCARD) {
            return Err(Errno::EINVAL);
        }
        if self.active.is_full() {
            return Err(Errno::EAGAIN);
        }
        if f.contains(Flags::MULTI_RECV) {
            return self.post_multi(req, ctx);
        }
        if let Some(r) = self.ux_find(tagged, req.src, tag, ignore, ctx) {
            let t = Target {
                iov: req.iov,
                context: req.context,
                reserved: req.reserved,
                completion: req.completion,
                multi: None,
            };
            self.deliver_ux(r, &t, ctx);
            return Ok(());
        }
        let recv = PostedRecv {
            iov: req.iov,
            context: req.context,
            reserved: req.reserved,
            completion: req.completion,
            multi: None,
        };
        self.recv
            .post(tagged, req.src, tag, ignore, recv)
            .map_err(|_| Errno::EAGAIN)?;
        if self.blocked > 0 {
            self.tx_ready = true;
        }
        Ok(())
    }

    /// A multi-recv buffer: takes queued unexpected messages first, then waits in the
    /// posted queue until released.
    pub(in crate::rdm) fn post_multi(&mut self, req: &RecvReq, ctx: &mut Ctx<'_, S>) -> Result<()> {
        let Some(buf) = req.iov.as_slice().first().copied() else {
            return Err(Errno::EINVAL);
        };
        if self.recv.posted_msg.is_full() {
            return Err(Errno::EAGAIN);
        }
        let mb = MultiBuf {
            context: req.context,
            buf,
            used: 0,
            min_free: req.min_free,
            outstanding: 0,
            released: false,
            reserved: req.reserved,
            posted: None,
        };
        let mh = self.recv.multis.insert(mb).map_err(|_| Errno::EAGAIN)?;
        let recv = PostedRecv {
            iov: req.iov,
            context: req.context,
            reserved: false,
            completion: req.completion,
            multi: Some(mh),
        };
        let ph = match self.recv.posted_msg.post(req.src, 0, 0, recv) {
            Ok(h) => h,
            Err(_) => {
                self.recv.multis.remove(mh);
                return Err(Errno::EAGAIN);
            }
        };
        if let Some(m) = self.recv.multis.get_mut(mh) {
            m.posted = Some(ph);
        }
        // Unexpected messages waiting for it, oldest first.
        while self.recv.multis.get(mh).is_some_and(|m| !m.released) && !self.active.is_full() {
            let Some(UxRef::Untagged(h)) = self.ux_find(false, req.src, 0, 0, ctx) else {
                break;
            };
            let Some(m) = self.recv.ux_msg.get(h).map(|n| *n.value()) else {
                break;
            };
            let Take::Got(t) = self.take_posted(false, ph, m.total, ctx) else {
                break;
            };
            self.deliver_ux(UxRef::Untagged(h), &t, ctx);
        }
        Ok(())
    }

    /// The multi-recv buffer posted with `context` that starts at `base`, as a shared
    /// receive context asks of one it lent here ([`crate::ep::srx`]); `take`: out of
    /// the posted queue, without a completion, if idle.
    #[cfg(feature = "shared-ctx")]
    pub(crate) fn multi_held(&mut self, context: u64, base: u64, take: bool) -> Held {
        let found = self
            .recv
            .multis
            .iter()
            .find(|(_, m)| m.context == context && m.buf.addr == base && !m.released)
            .map(|(h, m)| (h, *m));
        let Some((mh, mb)) = found else {
            return Held::Gone;
        };
        if mb.outstanding > 0 {
            return Held::Busy;
        }
        if !take {
            return Held::Idle;
        }
        if let Some(ph) = mb.posted {
            self.recv.posted_msg.remove(ph);
        }
        self.recv.multis.remove(mh);
        let rest = IoVec::new(mb.buf.addr + mb.used as u64, mb.buf.len - mb.used);
        Held::Taken(rest, mb.reserved)
    }

    /// Hands unexpected message `r` to a receive: a rendezvous gets its CTS, buffered
    /// segments are copied by the next progress call (and later segments go straight
    /// into the buffer).
    pub(in crate::rdm) fn deliver_ux(&mut self, r: UxRef, t: &Target, ctx: &mut Ctx<'_, S>) {
        let Some(m) = self.recv.remove_ux(r) else {
            return;
        };
        match m.kind {
            UxKind::Rndv { .. } => {
                self.start_rndv(&m, t, false, ctx);
            }
            UxKind::Eager { first, got } => {
                let want = m.total.min(iov_len(&t.iov));
                let a = RxActive {
                    peer: m.peer,
                    epoch: m.epoch,
                    rndv: false,
                    rts_op: 0,
                    iov: t.iov,
                    context: t.context,
                    total: m.total,
                    want,
                    got: got as u64,
                    granted: 0,
                    cts_pending: false,
                    cts_off: 0,
                    end_pending: false,
                    chain: first,
                    chain_len: got,
                    discard: false,
                    tag: m.tag,
                    tagged: m.tagged,
                    data: m.data,
                    report_src: m.report_src,
                    multi: t.multi,
                    reserved: t.reserved,
                    completion: t.completion,
                    error: None,
                };
                match self.active.insert(a) {
                    Ok(h) => {
                        if first == NIL {
                            // Nothing buffered (zero-length message).
                            if let Some(am) = self.active.get_mut(h) {
                                am.chain = NIL;
                            }
                            if m.complete() {
                                self.finish_active(h, None, ctx);
                                return;
                            }
                        } else {
                            self.active.queue_copy(h);
                            self.tx_ready = true;
                        }
                        self.retarget_asm(&m, r, AsmTarget::Active(h));
                    }
                    Err(_) => {
                        self.segs.free_chain(first);
                        self.retarget_asm(&m, r, AsmTarget::Drop);
                        self.complete_recv(
                            t,
                            0,
                            0,
                            m.tagged,
                            m.tag,
                            m.data,
                            m.report_src,
                            Some(Errno::ENOMEM),
                            ctx,
                        );
                    }
                }
            }
        }
    }

    /// Copies buffered unexpected data into the receives matched to it since the last
    /// progress call, and completes those whose message is whole.
    pub(crate) fn flush_copies<M: Memory>(&mut self, mem: &mut M, ctx: &mut Ctx<'_, S>) {
        if !self.active.copies_pending() {
            self.active.copies_done(); // whatever is queued was finished otherwise
            return;
        }
        // In the order the receives were matched.
        while let Some(h) = self.active.next_copy() {
            self.copy_into(h, mem, ctx);
        }
        if self.active.copies_lost() {
            while let Some(h) = self.active.chained() {
                self.copy_into(h, mem, ctx);
            }
        }
        self.active.copies_done();
    }

    /// Copies the buffered data of active receive `h` into its buffer, and completes it
    /// if that was all of it.
    pub(in crate::rdm) fn copy_into<M: Memory>(
        &mut self,
        h: Handle<RxActive>,
        mem: &mut M,
        ctx: &mut Ctx<'_, S>,
    ) {
        let Some(a) = self.active.get(h).copied() else {
            return;
        };
        let len = (a.chain_len as u64).min(a.want);
        let err = self
            .segs
            .copy_out(a.chain, len, a.context, a.iov.as_slice(), mem);
        self.segs.free_chain(a.chain);
        self.active.copy_settled();
        let done = {
            let Some(am) = self.active.get_mut(h) else {
                return;
            };
            am.chain = NIL;
            if am.error.is_none() {
                am.error = err;
            }
            am.got >= am.total
        };
        if done {
            self.finish_active(h, None, ctx);
        }
    }

    /// FI_PEEK (optionally with FI_CLAIM or FI_DISCARD) and FI_CLAIM receives.
    pub(in crate::rdm) fn peek_claim(&mut self, req: &RecvReq, ctx: &mut Ctx<'_, S>) -> Result<()> {
        let (tag, ignore) = req.tag.unwrap_or((0, 0));
        let f = req.flags;
        let peek = f.contains(Flags::PEEK);
        let claim = f.contains(Flags::CLAIM);
        let discard = f.contains(Flags::DISCARD);
        let t = Target {
            iov: req.iov,
            context: req.context,
            reserved: req.reserved,
            completion: req.completion,
            multi: None,
        };
        let entry_of = |m: &UxMsg, len: u64| {
            let mut e = CqEntry::new(req.context, comp::recv(true, false, false))
                .with_len(len as usize)
                .with_tag(m.tag)
                .with_src_addr(m.report_src);
            if let Some(d) = m.data {
                e = e.with_data(d);
            }
            e
        };
        if peek {
            let Some(UxRef::Tagged(h)) = self.ux_find(true, req.src, tag, ignore, ctx) else {
                let e = CqEntry::new(req.context, comp::recv(true, false, false));
                ctx.rx_done(&e, Some(Errno::ENOMSG), 0, true, req.reserved);
                return Ok(());
            };
            let Some(m) = self.recv.ux_tag.get(h).map(|n| *n.value()) else {
                return Err(Errno::EINVAL);
            };
            if claim {
                let ch = self.recv.claim(h, req.context)?;
                self.retarget_asm(
                    &m,
                    UxRef::Tagged(h),
                    AsmTarget::Unexpected(UxRef::Claimed(ch)),
                );
            } else if discard {
                self.discard_ux(UxRef::Tagged(h), &t, ctx);
            }
            self.stats.rx_msgs += u64::from(discard);
            ctx.rx_done(
                &entry_of(&m, m.total),
                None,
                0,
                req.completion,
                req.reserved,
            );
            return Ok(());
        }
        // FI_CLAIM alone: the message claimed with this context.
        let Some(ch) = self.recv.claimed_by(req.context) else {
            return Err(Errno::ENOMSG);
        };
        let Some(m) = self.recv.claimed.get(ch).copied() else {
            return Err(Errno::EINVAL);
        };
        if discard {
            self.discard_ux(UxRef::Claimed(ch), &t, ctx);
            self.stats.rx_msgs += 1;
            ctx.rx_done(&entry_of(&m, 0), None, 0, req.completion, req.reserved);
            return Ok(());
        }
        if self.active.is_full() {
            return Err(Errno::EAGAIN);
        }
        self.deliver_ux(UxRef::Claimed(ch), &t, ctx);
        Ok(())
    }

    /// FI_DISCARD: drops the message; a rendezvous sender is told with a CANCELED CTS.
    pub(in crate::rdm) fn discard_ux(&mut self, r: UxRef, t: &Target, ctx: &mut Ctx<'_, S>) {
        let Some(m) = self.recv.ux(r) else { return };
        match m.kind {
            UxKind::Rndv { .. } if !self.active.is_full() => {
                let _ = self.recv.remove_ux(r);
                self.start_rndv(&m, t, true, ctx);
            }
            _ => self.drop_ux(r),
        }
    }

    /// fi_cancel of a posted receive (either queue): FI_ECANCELED error entry.
    pub(crate) fn cancel_recv(&mut self, context: u64, ctx: &mut Ctx<'_, S>) -> bool {
        let Some((tagged, r)) = self.recv.cancel(context) else {
            return false;
        };
        let mut reserved = r.reserved;
        if let Some(mh) = r.multi
            && let Some(mb) = self.recv.multis.get_mut(mh)
        {
            mb.posted = None;
            mb.released = true;
            if mb.outstanding > 0 {
                // Messages still arriving into it: the last reports the release.
                return true;
            }
            reserved = mb.reserved;
            self.recv.multis.remove(mh);
        }
        let mut e = CqErrEntry::new(context, comp::recv(tagged, false, false), Errno::ECANCELED);
        e.buf = r.iov.as_slice().first().map_or(0, |v| v.addr);
        if let Some(c) = ctx.cntr.recv.and_then(|c| ctx.cntrs.get_mut(c)) {
            c.inc_err();
        }
        if let Some(cq) = ctx.rx_cq.as_ref().and_then(|b| ctx.cqs.get_mut(b.cq)) {
            let _ = if ctx.rm && reserved {
                cq.write_err_reserved(&e)
            } else {
                cq.write_err(&e)
            };
        }
        true
    }
}
