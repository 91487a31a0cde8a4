//! The send side of atomics (fi_atomic(3)) in the planner: an initiator's ATOMIC_REQ
//! with its operands, a target's answer carrying the original values, and what the
//! answer commits once it left. The planner's helpers here are inlined into
//! `send_plan`, their one caller.

use super::*;

impl<S: Storage> Rdm<S> {
    /// The ATOMIC_REQ of atomic `o`, its operands from the op's bounce slot (`None`:
    /// not an atomic after all, nothing to send).
    #[inline(always)]
    pub(in crate::rdm) fn atomic_req_body(
        &self,
        o: u32,
        op: &TxOp,
    ) -> Option<(Body<'_>, Payload<'static>)> {
        let (key, addr, a) = match op.rma {
            Some(RmaOp {
                key,
                addr,
                atomic: Some(a),
                ..
            }) => (key, addr, a),
            _ => return None,
        };
        Some((
            Body::AtomicReq(AtomicReqRepr {
                key,
                addr,
                op_id: op_id(o as usize, self.op_gen(o)),
                op: a.op,
                datatype: a.dt,
                count: a.count,
                fetch: a.fetch,
                cq_data: op.data,
                operands: self
                    .bounce_of(o as usize, a.operand_bytes())
                    .get(..a.operand_bytes())
                    .unwrap_or(&[]),
                ack: None,
            }),
            Payload::None,
        ))
    }

    /// The answer of atomic `slot` with the original values it fetched (`None`: the
    /// answer is gone).
    #[inline(always)]
    pub(in crate::rdm) fn atomic_data_body(
        &self,
        slot: u32,
    ) -> Option<(Body<'_>, Payload<'static>)> {
        let (_, r) = self.resps.get_by_index(slot as usize)?;
        Some((
            Body::AtomicResp(AtomicRespRepr {
                op_id: r.op_id,
                status: status::OK,
                payload: r.fetched.get(..r.fetched_len as usize).unwrap_or(&[]),
                ack: None,
            }),
            Payload::None,
        ))
    }

    /// The answer with the fetched values left: it keeps them until acknowledged.
    #[inline(always)]
    pub(in crate::rdm) fn atomic_data_sent(&mut self, p: usize, slot: u32) {
        if let Some(r) = self.resps.get_mut_by_index(slot as usize) {
            r.sent = 1;
            r.unacked += 1;
        }
        let pm = &mut self.peers[p];
        pm.tx.resp_pending = pm.tx.resp_pending.saturating_sub(1);
    }
}
