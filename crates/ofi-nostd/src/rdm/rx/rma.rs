//! The RMA target and initiator (docs/wire-protocol.md, section 7): writes into our
//! registered memory, reads answered from it, and the answers to our own requests.

use super::*;

impl<S: Storage> Rdm<S> {
    /// A segment of an RMA write to our memory. Every segment is checked against the
    /// registration; the last one answers the write with its status (ATOMIC_RESP) and,
    /// when it succeeded, counts it and writes its remote CQ data. Without room for that
    /// answer (or, with CQ data, a CQ slot) the last segment waits.
    #[inline(never)]
    pub(in crate::rdm) fn rx_rma_write<M: Memory>(
        &mut self,
        p: usize,
        w: &wire::packet::RmaWriteRepr<'_>,
        mem: &mut M,
        ctx: &mut Ctx<'_, S>,
    ) -> Outcome {
        let last = w.offset + w.payload.len() as u64 >= w.total_len;
        if last && (self.resps.is_full() || (w.cq_data.is_some() && !ctx.rx_reserve())) {
            return Outcome::Blocked;
        }
        let mut st = match self.peers[p].rx.wr_op {
            Some((op, st)) if op == w.op_id => st,
            _ if !remote_access(ctx.caps, Flags::RMA).contains(Flags::REMOTE_WRITE) => {
                status::UNSUPPORTED
            }
            _ => status::OK,
        };
        let mut region = None;
        if st == status::OK {
            let r = match ctx.mrs {
                Some(m) => m.write_remote(
                    mem,
                    w.key,
                    w.addr.wrapping_add(w.offset),
                    w.payload,
                    u64::from(self.local.ep_id),
                ),
                None => Err(Errno::EINVAL),
            };
            match r {
                Ok(ra) => region = Some(ra.mr),
                Err(e) => st = rma_status(e),
            }
        }
        if !last {
            self.peers[p].rx.wr_op = Some((w.op_id, st));
            return Outcome::Done;
        }
        self.peers[p].rx.wr_op = None;
        if st == status::OK {
            ctx.remote_event(
                ctx.cntr.remote_write,
                w.cq_data,
                w.total_len,
                crate::cq::comp::RMA_REMOTE_WRITE,
            );
            if let Some(mr) = region {
                ctx.region_event(mr, Flags::REMOTE_WRITE);
            }
        } else if w.cq_data.is_some() {
            ctx.release(false);
        }
        self.queue_resp(p, w.op_id, st, false, 0, 0, 0);
        Outcome::Done
    }

    /// A read of our memory: checked once, answered with its data (READ_RESP segments
    /// read from the region as they leave) or its failure.
    #[inline(never)]
    pub(in crate::rdm) fn rx_read_req(
        &mut self,
        p: usize,
        r: &wire::packet::ReadReqRepr,
        ctx: &mut Ctx<'_, S>,
    ) -> Outcome {
        if self.resps.is_full() {
            return Outcome::Blocked;
        }
        let checked = match ctx.mrs {
            _ if !remote_access(ctx.caps, Flags::RMA).contains(Flags::REMOTE_READ) => {
                Err(Errno::EOPNOTSUPP)
            }
            Some(m) => m
                .check_remote(
                    r.key,
                    r.addr,
                    r.len,
                    Flags::REMOTE_READ,
                    u64::from(self.local.ep_id),
                )
                .map(|ra| ra.mr),
            None => Err(Errno::EINVAL),
        };
        let (st, len) = match checked {
            Ok(mr) => {
                ctx.remote_event(ctx.cntr.remote_read, None, r.len, Flags::empty());
                ctx.region_event(mr, Flags::REMOTE_READ);
                (status::OK, r.len)
            }
            Err(e) => (rma_status(e), 0),
        };
        self.queue_resp(p, r.op_id, st, true, r.key, r.addr, len);
        Outcome::Done
    }

    /// The initiator's side: data (or the failure) of one of our reads.
    #[inline(never)]
    pub(in crate::rdm) fn rx_read_resp<M: Memory>(
        &mut self,
        p: usize,
        r: &wire::packet::ReadRespRepr<'_>,
        mem: &mut M,
        ctx: &mut Ctx<'_, S>,
    ) {
        let Some((idx, op, mut rma)) = self.rma_op(p, r.op_id, true) else {
            return;
        };
        let n = r.payload.len() as u64;
        if r.status != status::OK {
            op.error.get_or_insert(rma_errno(r.status));
            rma.answered = true;
        } else if r.offset != rma.got || rma.got + n > op.len {
            // Segments come in order and exactly cover the read.
            self.stats.rx_protocol_errors += 1;
            return;
        } else {
            if n > 0
                && let Err(e) = iov_write(mem, op.context, op.iov.as_slice(), r.offset, r.payload)
            {
                op.error.get_or_insert(e);
            }
            rma.got += n;
            rma.answered = rma.got >= op.len;
        }
        op.rma = Some(rma);
        self.op_progress(idx, ctx);
    }

    /// The initiator's side: the target's answer to one of our writes or atomics (with
    /// the original values of a fetching atomic, placed into its result buffer).
    #[inline(never)]
    pub(in crate::rdm) fn rx_write_resp<M: Memory>(
        &mut self,
        p: usize,
        a: &wire::packet::AtomicRespRepr<'_>,
        mem: &mut M,
        ctx: &mut Ctx<'_, S>,
    ) {
        let Some((idx, op, mut rma)) = self.rma_op(p, a.op_id, false) else {
            return;
        };
        let fetch = rma.atomic.filter(|m| m.fetch);
        if a.status != status::OK {
            op.error.get_or_insert(rma_errno(a.status));
        } else if let Some(m) = fetch {
            let n = m.bytes();
            let mut vals = [0u8; crate::atomic::MAX_ATOMIC_BYTES];
            match (a.payload.len() == n).then(|| vals.get_mut(..n)).flatten() {
                Some(v) => {
                    v.copy_from_slice(a.payload);
                    crate::atomic::swap_order(v, m.dt.size());
                    if let Err(e) = iov_write(mem, op.context, op.iov.as_slice(), 0, v) {
                        op.error.get_or_insert(e);
                    }
                }
                None => {
                    self.stats.rx_protocol_errors += 1;
                    return;
                }
            }
        } else if !a.payload.is_empty() {
            self.stats.rx_protocol_errors += 1;
            return;
        }
        rma.answered = true;
        op.rma = Some(rma);
        self.op_progress(idx, ctx);
    }

    /// Our unanswered RMA operation (a read when `read`) with peer `p` that `op_id`
    /// names: its slot, the operation and its RMA state. An answer naming none is
    /// counted as a protocol error.
    pub(in crate::rdm) fn rma_op(
        &mut self,
        p: usize,
        op_id: u32,
        read: bool,
    ) -> Option<(usize, &mut TxOp, RmaOp)> {
        let found = self.op_by_id(op_id).and_then(|idx| {
            let (_, op) = self.ops.get_by_index(idx)?;
            let rma = op.rma?;
            (op.peer as usize == p && op.started && rma.read == read && !rma.answered)
                .then_some((idx, rma))
        });
        let Some((idx, rma)) = found else {
            self.stats.rx_protocol_errors += 1;
            return None;
        };
        let op = self.ops.get_mut_by_index(idx)?;
        Some((idx, op, rma))
    }
}

/// The status an RMA target answers for a failed check of a remote access.
pub(in crate::rdm) fn rma_status(e: Errno) -> u16 {
    match e {
        Errno::EOPNOTSUPP => status::UNSUPPORTED,
        Errno::EINVAL => status::BAD_KEY,
        Errno::EACCES => status::ACCESS_DENIED,
        _ => status::OUT_OF_RANGE,
    }
}

/// The error an RMA operation completes with when its target answered `st`.
pub(in crate::rdm) fn rma_errno(st: u16) -> Errno {
    match st {
        status::BAD_KEY | status::OUT_OF_RANGE | status::ACCESS_DENIED => Errno::EACCES,
        status::UNSUPPORTED => Errno::EOPNOTSUPP,
        status::CANCELED => Errno::ECANCELED,
        _ => Errno::EIO,
    }
}
