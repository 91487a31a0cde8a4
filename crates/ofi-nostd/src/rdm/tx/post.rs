//! Posting sends (fi_send, fi_tsend, fi_write, fi_read, fi_atomic), cancelling them,
//! and an operation's life in its peer's FIFO until it completes.

use super::*;

/// What unlinking an operation needs of it.
#[derive(Clone, Copy)]
pub(in crate::rdm) struct OpLinks {
    peer: u16,
    prev: u32,
    next: u32,
    rndv_ready: bool,
}

impl<S: Storage> Rdm<S> {
    /// Queues a send to `dest`. The peer's session is set up lazily. -FI_EAGAIN when the
    /// send queue or the peer table is full.
    pub(crate) fn post_send<M: Memory>(
        &mut self,
        now: Instant,
        dest: EpAddr,
        req: &SendReq,
        mem: &M,
        ctx: &mut Ctx<'_, S>,
    ) -> Result<()> {
        // A build without RMA has no RMA operation (`served`): the domain refuses such
        // posts before they get here.
        let rma = match req.rma {
            None => None,
            Some((key, addr, read)) => Some(RmaOp {
                key,
                addr,
                read,
                got: 0,
                answered: false,
                atomic: req.atomic.map(|a| a.meta),
                served: crate::served::Rma::SERVED.ok_or(Errno::ENOSYS)?,
            }),
        };
        if self.ops.is_full() {
            return Err(Errno::EAGAIN);
        }
        let p = self.peer_slot(&dest, now)?;
        self.peers[p].last_active = now;
        let injected = req.flags.contains(Flags::INJECT);
        let level = if req.rma.is_some() {
            // An RMA operation completes on the target's answer (see `op_progress`).
            Level::Delivery
        } else if req.flags.contains(Flags::DELIVERY_COMPLETE) {
            Level::Delivery
        } else if injected
            && (req.flags.contains(Flags::INJECT_COMPLETE)
                && !req.flags.contains(Flags::TRANSMIT_COMPLETE))
        {
            Level::Inject
        } else {
            Level::Transmit
        };
        // Writes go in segments whatever their size (the target places them directly);
        // reads are a request.
        let rndv = req.rma.is_none() && req.len > self.cfg.eager_threshold;
        let op = TxOp {
            peer: p as u16,
            epoch: self.peers[p].session.epoch,
            prev: NIL,
            next: NIL,
            rndv,
            iov: req.iov,
            len: req.len as u64,
            injected,
            context: req.context,
            tag: req.tag,
            data: req.data,
            msg_id: 0,
            sent: 0,
            started: false,
            initial_done: false,
            granted: 0,
            end: req.len as u64,
            cts_seen: false,
            rx_op: 0,
            unacked: 0,
            undelivered: 0,
            level,
            completion: req.completion,
            reserved: req.reserved,
            completed: false,
            error: None,
            acked_any: false,
            rma,
        };
        let h = self.ops.insert(op).map_err(|_| Errno::EAGAIN)?;
        let idx = h.index();
        if let Some(AtomicReq {
            meta: a, compare, ..
        }) = req.atomic
        {
            // The operands travel big-endian, compare values (or mask) first.
            let start = idx * self.inject_size;
            let (n, total) = (a.bytes(), a.operand_bytes());
            let size = a.dt.size();
            let r = match self.bounce.as_mut().get_mut(start..start + total) {
                None => Err(Errno::EMSGSIZE),
                Some(b) => {
                    let (cmp, src) = b.split_at_mut(total - n.min(total));
                    let c = if cmp.is_empty() {
                        Ok(())
                    } else {
                        iov_read(mem, req.context, &[compare], 0, cmp)
                    };
                    let s = if src.is_empty() {
                        Ok(())
                    } else {
                        iov_read(mem, req.context, req.iov.as_slice(), 0, src)
                    };
                    crate::atomic::swap_order(b, size);
                    c.and(s)
                }
            };
            if let Err(e) = r {
                self.ops.remove(h);
                return Err(e);
            }
            // From here on the op's buffer is where the original values go.
            if let (Some(op), Some(at)) = (self.ops.get_mut_by_index(idx), req.atomic)
                && let Ok(result) = crate::iov::IovList::new(&[at.result], 1)
            {
                op.iov = result;
            }
        }
        if injected {
            let start = idx * self.inject_size;
            let fill = self
                .bounce
                .as_mut()
                .get_mut(start..start + req.len)
                .ok_or(Errno::EMSGSIZE);
            let r = fill.and_then(|b| iov_read(mem, req.context, req.iov.as_slice(), 0, b));
            if let Err(e) = r {
                self.ops.remove(h);
                return Err(e);
            }
        }
        // Append to the peer's FIFO.
        let peer = &mut self.peers[p];
        let tail = peer.tx.op_tail;
        peer.tx.op_tail = idx as u32;
        if tail == NIL {
            peer.tx.op_head = idx as u32;
        }
        if peer.tx.cursor == NIL {
            peer.tx.cursor = idx as u32;
        }
        if let Some(o) = self.ops.get_mut_by_index(idx) {
            o.prev = tail;
        }
        if tail != NIL
            && let Some(t) = self.ops.get_mut_by_index(tail as usize)
        {
            t.next = idx as u32;
        }
        if matches!(self.peers[p].state, PeerState::Idle | PeerState::Failed) {
            self.start_hello(p, now);
        }
        if level == Level::Inject {
            ctx.tx_done(
                req.context,
                if req.tag.is_some() {
                    TxKind::Tagged
                } else {
                    TxKind::Msg
                },
                Ok(()),
                req.completion,
                req.reserved,
            );
            if let Some(o) = self.ops.get_mut_by_index(idx) {
                o.completed = true;
            }
        }
        self.posted.mark(p);
        Ok(())
    }

    /// fi_cancel of a send that has not sent anything yet: FI_ECANCELED error entry.
    pub(crate) fn cancel_send(&mut self, context: u64, ctx: &mut Ctx<'_, S>) -> bool {
        let found = self
            .ops
            .iter()
            .find(|(_, o)| o.context == context && !o.started && !o.completed)
            .map(|(h, _)| h.index());
        let Some(idx) = found else {
            return false;
        };
        let Some((_, op)) = self.ops.get_by_index(idx) else {
            return false;
        };
        let (c, kind, reserved) = (op.context, op.kind(), op.reserved);
        if self.unlink_op(idx) {
            ctx.tx_done(c, kind, Err(Errno::ECANCELED), true, reserved);
        }
        true
    }

    /// Removes op `idx` from its peer's FIFO and the pool.
    pub(in crate::rdm) fn unlink_op(&mut self, idx: usize) -> bool {
        // The links only, not a copy of the whole operation (every completed send).
        let Some((_, o)) = self.ops.get_by_index(idx) else {
            return false;
        };
        let op = OpLinks {
            peer: o.peer,
            prev: o.prev,
            next: o.next,
            rndv_ready: o.has_data_to_send(),
        };
        let p = op.peer as usize;
        if op.prev != NIL
            && let Some(o) = self.ops.get_mut_by_index(op.prev as usize)
        {
            o.next = op.next;
        }
        if op.next != NIL
            && let Some(o) = self.ops.get_mut_by_index(op.next as usize)
        {
            o.prev = op.prev;
        }
        if let Some(peer) = self.peers.get_mut(p) {
            if peer.tx.op_head == idx as u32 {
                peer.tx.op_head = op.next;
            }
            if peer.tx.op_tail == idx as u32 {
                peer.tx.op_tail = op.prev;
            }
            if peer.tx.cursor == idx as u32 {
                peer.tx.cursor = op.next;
            }
            if op.rndv_ready {
                peer.tx.rndv_ready = peer.tx.rndv_ready.saturating_sub(1);
            }
        }
        match self.ops.get_by_index(idx) {
            Some((h, _)) => self.ops.free(h),
            None => false,
        }
    }

    /// Completes op `idx` if its level is reached and frees it once nothing of it is in
    /// flight any more.
    pub(in crate::rdm) fn op_progress(&mut self, idx: usize, ctx: &mut Ctx<'_, S>) {
        let Some(op) = self.ops.get_mut_by_index(idx) else {
            return;
        };
        let sent = op.all_sent();
        if !op.completed {
            let done = match (op.rma, op.level) {
                (Some(r), _) => r.answered,
                (None, Level::Inject) => true,
                (None, Level::Transmit) => sent && op.unacked == 0,
                (None, Level::Delivery) => sent && op.undelivered == 0,
            };
            if done {
                op.completed = true;
                let (c, t, r, comp, res) =
                    (op.context, op.kind(), op.error, op.completion, op.reserved);
                ctx.tx_done(c, t, r.map_or(Ok(()), Err), comp, res);
                self.stats.tx_msgs += 1;
            }
        }
        let done = self
            .ops
            .get_by_index(idx)
            .is_some_and(|(_, o)| o.completed && sent && o.undelivered == 0);
        if done {
            self.unlink_op(idx);
        }
    }
}
