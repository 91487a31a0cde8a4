//! The atomic target (fi_atomic(3)): operations on our registered memory, and the
//! original values they send back.

use super::*;

impl<S: Storage> Rdm<S> {
    /// An atomic operation on our memory: checked, applied element by element, and
    /// answered (with the original values when asked). The whole request is one packet.
    #[inline(never)]
    pub(in crate::rdm) fn rx_atomic<M: Memory>(
        &mut self,
        p: usize,
        a: &wire::packet::AtomicReqRepr<'_>,
        mem: &mut M,
        ctx: &mut Ctx<'_, S>,
    ) -> Outcome {
        use crate::atomic::{AtomicKind, MAX_ATOMIC_BYTES, apply, swap_order, valid};
        use wire::packet::AtomicOp;
        if self.resps.is_full() || (a.cq_data.is_some() && !ctx.rx_reserve()) {
            return Outcome::Blocked;
        }
        let size = a.datatype.size();
        let n = a.count as usize * size;
        let kind = match a.op.operand_arrays() {
            2 => AtomicKind::Compare,
            _ if a.fetch => AtomicKind::Fetch,
            _ => AtomicKind::Write,
        };
        let modifies = a.op != AtomicOp::Read;
        let mut access = Flags::empty();
        if modifies {
            access |= Flags::REMOTE_WRITE;
        }
        if a.fetch {
            access |= Flags::REMOTE_READ;
        }
        let (cmp, operand) = match a.op.operand_arrays() {
            2 => a.operands.split_at(n.min(a.operands.len())),
            _ => (&[][..], a.operands),
        };
        let mut vals = [0u8; MAX_ATOMIC_BYTES];
        let mut fetched = [0u8; MAX_ATOMIC_BYTES];
        let mut region = None;
        let st = if !remote_access(ctx.caps, Flags::ATOMIC).contains(access)
            || valid(a.op, a.datatype, kind).is_err()
            || n > MAX_ATOMIC_BYTES
        {
            status::UNSUPPORTED
        } else {
            let ep = u64::from(self.local.ep_id);
            let r = match ctx.mrs {
                Some(m) => m
                    .check_remote(a.key, a.addr, n as u64, access, ep)
                    .and_then(|ra| {
                        m.for_each_segment(&ra, |at, r| mem.read(at, &mut vals[r]))?;
                        fetched[..n].copy_from_slice(&vals[..n]);
                        apply(a.op, a.datatype, &mut vals[..n], operand, cmp);
                        if modifies {
                            m.for_each_segment(&ra, |at, r| mem.write(at, &vals[r]))?;
                        }
                        Ok(ra.mr)
                    }),
                None => Err(Errno::EINVAL),
            };
            match r {
                Ok(mr) => {
                    region = Some(mr);
                    status::OK
                }
                Err(e) => rma_status(e),
            }
        };
        if let Some(mr) = region {
            let access = if modifies {
                Flags::REMOTE_WRITE
            } else {
                Flags::REMOTE_READ
            };
            ctx.region_event(mr, access);
        }
        if st == status::OK {
            let cntr = if modifies {
                ctx.cntr.remote_write
            } else {
                ctx.cntr.remote_read
            };
            let flags = crate::cq::comp::ATOMIC_REMOTE_WRITE;
            ctx.remote_event(cntr, a.cq_data, n as u64, flags);
        } else if a.cq_data.is_some() {
            ctx.release(false);
        }
        let slot = self.queue_resp(p, a.op_id, st, false, 0, 0, 0);
        if st == status::OK
            && a.fetch
            && let Some(resp) = slot.and_then(|i| self.resps.get_mut_by_index(i))
        {
            swap_order(&mut fetched[..n], size);
            resp.fetched[..n].copy_from_slice(&fetched[..n]);
            resp.fetched_len = n as u8;
        }
        Outcome::Done
    }
}
