//! Messages arriving: matching eager segments and BUNDLE records to posted receives
//! (multi-recv included), assembling them, and completing receives.

use super::*;

/// What taking a posted receive gave.
pub(in crate::rdm) enum Take {
    Got(Target),
    /// A multi-recv buffer was too full and got released: look again.
    Retry,
    /// No CQ room for another multi-recv completion: refuse the message for now.
    NoRoom,
}

/// What `rx_segment` reads of a peer.
pub(in crate::rdm) struct SegView {
    asm: Option<Asm>,
    addr: EpAddr,
    epoch: u32,
    rx_msg_id: u32,
}

impl<S: Storage> Rdm<S> {
    /// Takes the posted receive `h` for a message of `total` bytes: the receive itself,
    /// or a piece carved from a multi-recv buffer (which needs a CQ slot of its own).
    pub(in crate::rdm) fn take_posted(
        &mut self,
        tagged: bool,
        h: EntryHandle<PostedRecv>,
        total: u64,
        ctx: &mut Ctx<'_, S>,
    ) -> Take {
        let q = if tagged {
            &mut self.recv.posted_tag
        } else {
            &mut self.recv.posted_msg
        };
        // Only the fields a multi-receive piece needs are read: the receive itself
        // (its iov list) is copied only when it is taken whole.
        let Some((multi, context, completion)) = q.get(h).map(|n| {
            let r = n.value();
            (r.multi, r.context, r.completion)
        }) else {
            return Take::Retry;
        };
        let Some(mh) = multi else {
            let r = q.remove(h).map(|n| *n.value());
            return match r {
                Some(r) => Take::Got(Target {
                    iov: r.iov,
                    context,
                    reserved: r.reserved,
                    completion,
                    multi: None,
                }),
                None => Take::Retry,
            };
        };
        let Some(mb) = self.recv.multis.get(mh).copied() else {
            q.remove(h);
            return Take::Retry;
        };
        let free = (mb.buf.len - mb.used) as u64;
        if total > free {
            self.release_multi(mh, ctx);
            return Take::Retry;
        }
        if !ctx.rx_reserve() {
            return Take::NoRoom;
        }
        let at = mb.buf.addr + mb.used as u64;
        let iov = IovList::one(IoVec::new(at, total as usize));
        let Some(mbm) = self.recv.multis.get_mut(mh) else {
            return Take::Retry;
        };
        mbm.used += total as usize;
        mbm.outstanding += 1;
        let left = mbm.buf.len - mbm.used;
        if left < mbm.min_free {
            self.release_multi(mh, ctx);
        }
        Take::Got(Target {
            iov,
            context,
            reserved: true,
            completion,
            multi: Some(mh),
        })
    }

    /// Takes multi-recv buffer `mh` out of the posted queue; once nothing carved from it
    /// is still arriving, its release is reported (FI_MULTI_RECV).
    pub(in crate::rdm) fn release_multi(&mut self, mh: Handle<MultiBuf>, ctx: &mut Ctx<'_, S>) {
        let Some(mb) = self.recv.multis.get_mut(mh) else {
            return;
        };
        mb.released = true;
        if let Some(ph) = mb.posted.take() {
            self.recv.posted_msg.remove(ph);
        }
        let mb = *mb;
        if mb.outstanding == 0 {
            self.recv.multis.remove(mh);
            let e = CqEntry::new(mb.context, comp::MULTI_RECV_RELEASED)
                .with_buf(mb.buf.addr + mb.used as u64);
            ctx.rx_done(&e, None, 0, true, mb.reserved);
        }
    }

    /// Whether taking a posted receive for this message could leave us without the
    /// resources to finish it (then refuse before taking anything).
    pub(in crate::rdm) fn can_take(&self, multi_segment: bool, ctx: &mut Ctx<'_, S>) -> bool {
        let _ = ctx;
        !(multi_segment && self.active.is_full())
    }

    /// The earliest-posted receive of the kind a message is that it matches. Not
    /// [`RecvQueues`]'s own method: as the receive path's, it keeps this path's
    /// inlining as it was (callgrind: 60 instructions per message otherwise).
    pub(in crate::rdm) fn find_posted(
        &mut self,
        tagged: bool,
        src: FiAddr,
        tag: u64,
    ) -> Option<EntryHandle<PostedRecv>> {
        if tagged {
            self.recv.posted_tag.find(src, tag)
        } else {
            self.recv.posted_msg.find(src, 0)
        }
    }

    /// A message (`tagged` or not, from `src` with `tag`) that no own receive takes:
    /// the shared receive context's receive for it, if one waits ([`Ctx::srx_take`]).
    /// Only while the endpoint holds no unexpected message: one that such a receive
    /// takes is older and must have it first (the pass's hand-over gives it). Out of
    /// line: the path of a message that found no receive.
    #[cold]
    #[inline(never)]
    pub(in crate::rdm) fn shared_target(
        &self,
        tagged: bool,
        src: FiAddr,
        tag: u64,
        ctx: &mut Ctx<'_, S>,
    ) -> Option<Target> {
        #[cfg(feature = "shared-ctx")]
        if ctx.srx.is_some() && self.recv.unexpected_len() == 0 {
            let (iov, context, completion) = ctx.srx_take(tagged, src, tag)?;
            return Some(Target {
                iov,
                context,
                reserved: ctx.rm,
                completion,
                multi: None,
            });
        }
        let _ = (tagged, src, tag, ctx);
        None
    }

    /// An eager segment, in order. `src`: the message's source (matched, reported) if
    /// the caller looked it up already.
    pub(in crate::rdm) fn rx_segment<M: Memory>(
        &mut self,
        p: usize,
        m: &MsgRepr<'_>,
        src: Option<(FiAddr, FiAddr)>,
        mem: &mut M,
        ctx: &mut Ctx<'_, S>,
    ) -> Outcome {
        // The four peer fields used below (every eager packet: no whole-peer copy).
        let peer = {
            let pr = &self.peers[p];
            SegView {
                asm: pr.rx.asm,
                addr: pr.addr,
                epoch: pr.session.epoch,
                rx_msg_id: pr.rx.rx_msg_id,
            }
        };
        if m.offset != 0 {
            let Some(mut asm) = peer.asm else {
                self.stats.rx_protocol_errors += 1;
                return Outcome::Done;
            };
            if m.msg_id != asm.msg_id
                || m.total_len != asm.total
                || m.offset != asm.got
                || m.tag != asm.tag
                || m.cq_data != asm.data
            {
                self.stats.rx_protocol_errors += 1;
                return Outcome::Done;
            }
            self.place_asm(&asm, m.payload, mem);
            asm.got += m.payload.len() as u32;
            if asm.got == asm.total {
                self.peers[p].rx.asm = None;
                self.asm_complete(&asm, ctx);
            } else {
                self.peers[p].rx.asm = Some(asm);
            }
            return Outcome::Done;
        }
        if let Some(old) = peer.asm {
            // A new message before the previous one ended: the sender broke the rules.
            self.stats.rx_protocol_errors += 1;
            self.abort_asm(&old, ctx);
            self.peers[p].rx.asm = None;
        }
        if m.msg_id != peer.rx_msg_id {
            self.stats.rx_protocol_errors += 1;
        }
        let tagged = m.tag.is_some();
        let tag = m.tag.unwrap_or(0);
        let total = m.total_len as u64;
        let single = m.payload.len() as u64 == total;
        let (src, report) = src.unwrap_or_else(|| ctx.src_of(&peer.addr));
        if !self.can_take(!single, ctx) {
            return Outcome::Blocked;
        }
        let target = loop {
            let Some(h) = self.find_posted(tagged, src, tag) else {
                break self.shared_target(tagged, src, tag, ctx);
            };
            match self.take_posted(tagged, h, total, ctx) {
                Take::Got(t) => break Some(t),
                Take::Retry => {}
                Take::NoRoom => return Outcome::Blocked,
            }
        };
        let Some(t) = target else {
            // Unexpected: buffer the whole message (all its segments reserved now, so it
            // can always finish), or refuse it.
            let need = total.div_ceil(self.segs.seg_size() as u64) as usize;
            // The queues by field, as everywhere on this path: the receive path's code
            // stays as the inliner saw it before the queues were a type (callgrind).
            let q = if tagged {
                &self.recv.ux_tag
            } else {
                &self.recv.ux_msg
            };
            if q.is_full() || need > self.segs.free_slots() {
                return Outcome::Blocked;
            }
            let first = self.segs.alloc(need);
            self.segs.write(first, 0, m.payload);
            let msg = UxMsg {
                peer: p as u16,
                epoch: peer.epoch,
                report_src: report,
                tag,
                tagged,
                data: m.cq_data,
                total,
                kind: UxKind::Eager {
                    first,
                    got: m.payload.len() as u32,
                },
                claimed_by: 0,
            };
            let q = if tagged {
                &mut self.recv.ux_tag
            } else {
                &mut self.recv.ux_msg
            };
            let Ok(h) = q.insert(src, tag, msg) else {
                self.segs.free_chain(first);
                return Outcome::Blocked;
            };
            self.stats.unexpected += 1;
            let pm = &mut self.peers[p];
            pm.rx.rx_msg_id = m.msg_id.wrapping_add(1);
            if !single {
                pm.rx.asm = Some(Asm {
                    msg_id: m.msg_id,
                    total: m.total_len,
                    got: m.payload.len() as u32,
                    tag: m.tag,
                    data: m.cq_data,
                    target: AsmTarget::Unexpected(if tagged {
                        UxRef::Tagged(h)
                    } else {
                        UxRef::Untagged(h)
                    }),
                });
            }
            return Outcome::Done;
        };
        self.peers[p].rx.rx_msg_id = m.msg_id.wrapping_add(1);
        let want = total.min(iov_len(&t.iov));
        let mut err = iov_write(mem, t.context, t.iov.as_slice(), 0, m.payload).err();
        if single {
            let olen = (total - want) as usize;
            self.complete_recv(
                &t,
                want,
                olen,
                tagged,
                tag,
                m.cq_data,
                report,
                err.take(),
                ctx,
            );
            return Outcome::Done;
        }
        let a = RxActive {
            peer: p as u16,
            epoch: peer.epoch,
            rndv: false,
            rts_op: 0,
            iov: t.iov,
            context: t.context,
            total,
            want,
            got: m.payload.len() as u64,
            granted: 0,
            cts_pending: false,
            cts_off: 0,
            end_pending: false,
            chain: NIL,
            chain_len: 0,
            discard: false,
            tag,
            tagged,
            data: m.cq_data,
            report_src: report,
            multi: t.multi,
            reserved: t.reserved,
            completion: t.completion,
            error: err,
        };
        match self.active.insert(a) {
            Ok(h) => {
                self.peers[p].rx.asm = Some(Asm {
                    msg_id: m.msg_id,
                    total: m.total_len,
                    got: m.payload.len() as u32,
                    tag: m.tag,
                    data: m.cq_data,
                    target: AsmTarget::Active(h),
                });
            }
            Err(a) => {
                // can_take checked for room; report rather than lose the receive.
                let t = Target {
                    iov: a.iov,
                    context: a.context,
                    reserved: a.reserved,
                    completion: a.completion,
                    multi: a.multi,
                };
                self.complete_recv(
                    &t,
                    0,
                    0,
                    tagged,
                    tag,
                    a.data,
                    report,
                    Some(Errno::ENOMEM),
                    ctx,
                );
            }
        }
        Outcome::Done
    }

    /// A BUNDLE, in order: each record is a whole message, taken as a single-segment
    /// MSG / TAGGED packet would be. A refused record refuses the packet with the
    /// messages before it taken; the retry skips them by message id (spec 6.4).
    #[inline(never)]
    pub(in crate::rdm) fn rx_bundle<M: Memory>(
        &mut self,
        p: usize,
        b: &wire::packet::BundleRepr<'_>,
        mem: &mut M,
        ctx: &mut Ctx<'_, S>,
    ) -> Outcome {
        let mut took = false;
        // One source lookup for all of them.
        let src = Some(ctx.src_of(&self.peers[p].addr));
        for m in b.msgs() {
            if seq_diff(m.msg_id, self.peers[p].rx.rx_msg_id) < 0 {
                continue; // taken by an earlier attempt of this packet
            }
            if let Outcome::Blocked = self.rx_segment(p, &m.as_msg(), src, mem, ctx) {
                self.stats.rx_bundles += u64::from(took);
                return Outcome::Blocked;
            }
            took = true;
            self.stats.rx_bundled_msgs += 1;
        }
        self.stats.rx_bundles += u64::from(took);
        Outcome::Done
    }

    /// Places the payload of the next in-order segment of `asm`.
    pub(in crate::rdm) fn place_asm<M: Memory>(&mut self, asm: &Asm, payload: &[u8], mem: &mut M) {
        let off = asm.got as u64;
        match asm.target {
            AsmTarget::Active(h) => {
                let Some(a) = self.active.get(h).copied() else {
                    return;
                };
                let r = if a.want > off {
                    iov_write(mem, a.context, a.iov.as_slice(), off, payload).err()
                } else {
                    None
                };
                if let Some(am) = self.active.get_mut(h) {
                    am.got += payload.len() as u64;
                    if am.error.is_none() {
                        am.error = r;
                    }
                }
            }
            AsmTarget::Unexpected(r) => {
                let Some(m) = self.recv.ux(r) else { return };
                if let UxKind::Eager { first, got } = m.kind {
                    self.segs.write(first, off, payload);
                    if let Some(mm) = self.recv.ux_mut(r) {
                        mm.kind = UxKind::Eager {
                            first,
                            got: got + payload.len() as u32,
                        };
                    }
                }
            }
            AsmTarget::Drop => {}
        }
    }

    /// The last segment of `asm` arrived.
    pub(in crate::rdm) fn asm_complete(&mut self, asm: &Asm, ctx: &mut Ctx<'_, S>) {
        if let AsmTarget::Active(h) = asm.target
            && let Some(a) = self.active.get(h)
            && a.chain == NIL
        {
            self.finish_active(h, None, ctx);
        }
        // Unexpected: now complete, waits for a receive. Drop: nothing.
    }

    /// Abandons a partial message: its receive fails with -FI_EIO, or its buffered
    /// segments are freed.
    pub(in crate::rdm) fn abort_asm(&mut self, asm: &Asm, ctx: &mut Ctx<'_, S>) {
        match asm.target {
            AsmTarget::Active(h) => self.finish_active(h, Some(Errno::EIO), ctx),
            AsmTarget::Unexpected(r) => self.drop_ux(r),
            AsmTarget::Drop => {}
        }
    }

    /// Writes the completion of a receive matched to a message.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::rdm) fn complete_recv(
        &mut self,
        t: &Target,
        len: u64,
        olen: usize,
        tagged: bool,
        tag: u64,
        data: Option<u64>,
        report: FiAddr,
        err: Option<Errno>,
        ctx: &mut Ctx<'_, S>,
    ) {
        let mut e = CqEntry::new(t.context, comp::recv(tagged, false, false))
            .with_len(len as usize)
            .with_src_addr(report)
            .with_buf(t.iov.as_slice().first().map_or(0, |v| v.addr));
        if tagged {
            e = e.with_tag(tag);
        }
        if let Some(d) = data {
            e = e.with_data(d);
        }
        let mut completion = t.completion;
        if let Some(mh) = t.multi
            && let Some(mb) = self.recv.multis.get_mut(mh)
        {
            mb.outstanding = mb.outstanding.saturating_sub(1);
            if mb.released && mb.outstanding == 0 {
                // The last message of a released buffer reports the release.
                e.flags |= Flags::MULTI_RECV;
                completion = true;
                let res = mb.reserved;
                self.recv.multis.remove(mh);
                if res {
                    ctx.release(false);
                }
            }
        }
        self.stats.rx_msgs += 1;
        ctx.rx_done(&e, err, olen, completion, t.reserved);
    }

    /// Finishes active receive `h`: completion (or `err`), rendezvous bookkeeping.
    pub(in crate::rdm) fn finish_active(
        &mut self,
        h: Handle<RxActive>,
        err: Option<Errno>,
        ctx: &mut Ctx<'_, S>,
    ) {
        let Some(a) = self.active.remove(h) else {
            return;
        };
        if a.chain != NIL {
            self.segs.free_chain(a.chain);
            self.active.copy_settled();
        }
        if let Some(pm) = self.peers.get_mut(a.peer as usize)
            && pm.session.epoch == a.epoch
        {
            if a.cts_pending || a.end_pending {
                pm.tx.cts_pending = pm.tx.cts_pending.saturating_sub(1);
            }
            if a.rndv && !a.discard && a.want > 0 {
                pm.rx.inbound = pm.rx.inbound.saturating_sub(1);
            }
            if let Some(asm) = pm.rx.asm
                && asm.target == AsmTarget::Active(h)
            {
                pm.rx.asm = Some(Asm {
                    target: AsmTarget::Drop,
                    ..asm
                });
            }
        }
        if a.discard {
            return;
        }
        let t = Target {
            iov: a.iov,
            context: a.context,
            reserved: a.reserved,
            completion: a.completion,
            multi: a.multi,
        };
        let err = err.or(a.error);
        let len = if err.is_some() {
            a.got.min(a.want)
        } else {
            a.want
        };
        let olen = (a.total - a.want) as usize;
        self.complete_recv(
            &t,
            len,
            olen,
            a.tagged,
            a.tag,
            a.data,
            a.report_src,
            err,
            ctx,
        );
    }
}
