//! Requests of the operation families a build does not serve (the `rma` or `atomic`
//! feature off): answered UNSUPPORTED, as a target whose endpoint lacks the capability
//! answers them, so the initiator's operation fails with -FI_EOPNOTSUPP and nothing
//! waits; each such packet is counted (`RdmStats::rx_unserved`). Answers to requests
//! of ours cannot come, since such a build makes none: one is a protocol error.

use super::*;

impl<S: Storage> Rdm<S> {
    /// A segment of an RMA write: the last one is answered.
    #[cfg(not(feature = "rma"))]
    pub(in crate::rdm) fn rx_rma_write<M: Memory>(
        &mut self,
        p: usize,
        w: &wire::packet::RmaWriteRepr<'_>,
        _: &mut M,
        _: &mut Ctx<'_, S>,
    ) -> Outcome {
        let last = w.offset + w.payload.len() as u64 >= w.total_len;
        self.refuse(p, w.op_id, false, last)
    }

    /// A read of our memory.
    #[cfg(not(feature = "rma"))]
    pub(in crate::rdm) fn rx_read_req(
        &mut self,
        p: usize,
        r: &wire::packet::ReadReqRepr,
        _: &mut Ctx<'_, S>,
    ) -> Outcome {
        self.refuse(p, r.op_id, true, true)
    }

    /// An answer to a read: we made none.
    #[cfg(not(feature = "rma"))]
    pub(in crate::rdm) fn rx_read_resp<M: Memory>(
        &mut self,
        _: usize,
        _: &wire::packet::ReadRespRepr<'_>,
        _: &mut M,
        _: &mut Ctx<'_, S>,
    ) {
        self.stats.rx_protocol_errors += 1;
    }

    /// An answer to a write or an atomic: we made none.
    #[cfg(not(feature = "rma"))]
    pub(in crate::rdm) fn rx_write_resp<M: Memory>(
        &mut self,
        _: usize,
        _: &wire::packet::AtomicRespRepr<'_>,
        _: &mut M,
        _: &mut Ctx<'_, S>,
    ) {
        self.stats.rx_protocol_errors += 1;
    }

    /// An atomic operation on our memory.
    #[cfg(not(feature = "atomic"))]
    pub(in crate::rdm) fn rx_atomic<M: Memory>(
        &mut self,
        p: usize,
        a: &wire::packet::AtomicReqRepr<'_>,
        _: &mut M,
        _: &mut Ctx<'_, S>,
    ) -> Outcome {
        self.refuse(p, a.op_id, false, true)
    }

    /// Refuses one packet of peer `p`'s request `op_id` (a read when `read`); the
    /// `last` packet of it queues the UNSUPPORTED answer, or waits for room for it.
    #[cold]
    #[inline(never)]
    fn refuse(&mut self, p: usize, op_id: u32, read: bool, last: bool) -> Outcome {
        if last && self.resps.is_full() {
            return Outcome::Blocked;
        }
        self.stats.rx_unserved += 1;
        if last {
            self.queue_resp(p, op_id, status::UNSUPPORTED, read, 0, 0, 0);
        }
        Outcome::Done
    }
}
