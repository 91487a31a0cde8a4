//! The send side of rendezvous (spec 6.3) in the planner: a send's RTS, the DATA a
//! CTS granted, our own CTS grants to a sender, and what each commits once it left.
//! The planner's helpers here are inlined into `send_plan`, their one caller: the
//! split costs no call on the per-packet path.

use super::*;

impl<S: Storage> Rdm<S> {
    /// The RTS of rendezvous send `o`: the message's id, length, tag and data.
    #[inline(always)]
    pub(in crate::rdm) fn rts_body(
        &self,
        o: u32,
        op: &TxOp,
        msg_id: u32,
    ) -> (Body<'static>, Payload<'static>) {
        (
            Body::Rts(RtsRepr {
                ack: None,
                op_id: op_id(o as usize, self.op_gen(o)),
                msg_id,
                total_len: op.len,
                tag: op.tag,
                cq_data: op.data,
            }),
            Payload::None,
        )
    }

    /// DATA bytes `off .. off + len` of a granted rendezvous, from the send's buffers.
    #[inline(always)]
    pub(in crate::rdm) fn data_body<'a>(
        op: &'a TxOp,
        off: u64,
        len: u32,
    ) -> (Body<'static>, Payload<'a>) {
        (
            Body::Data(DataRepr {
                ack: None,
                rx_op_id: op.rx_op,
                offset: off,
                payload: &[],
            }),
            Payload::Iov(op.context, op.iov_slice(), off, len as usize),
        )
    }

    /// Our CTS to a rendezvous sender: a grant, where a truncated transfer ends, or
    /// CANCELED for a discarded one.
    #[inline(always)]
    pub(in crate::rdm) fn cts_body(
        rts_op: u32,
        rx_op: u32,
        off: u64,
        len: u32,
        status: u16,
    ) -> (Body<'static>, Payload<'static>) {
        (
            Body::Cts(CtsRepr {
                ack: None,
                rts_op_id: rts_op,
                rx_op_id: rx_op,
                offset: off,
                len,
                status,
            }),
            Payload::None,
        )
    }

    /// A CTS left: the receive it was for owes one fewer; a receive with everything
    /// in and nothing owed finishes.
    #[inline(always)]
    pub(in crate::rdm) fn cts_sent(
        &mut self,
        p: usize,
        rx_op: u32,
        len: u32,
        ctx: &mut Ctx<'_, S>,
    ) {
        let mut finished = None;
        let mut none_left = true;
        if let Some(h) = self.active.by_id(rx_op)
            && let Some(a) = self.active.get_mut(h)
        {
            if len > 0 {
                a.cts_pending = false;
            } else {
                a.end_pending = false;
            }
            none_left = !a.cts_pending && !a.end_pending;
            if none_left && (a.discard || a.got >= a.want) && a.chain == NIL {
                finished = Some(h);
            }
        }
        if none_left {
            let pm = &mut self.peers[p];
            pm.tx.cts_pending = pm.tx.cts_pending.saturating_sub(1);
        }
        if let Some(h) = finished {
            self.finish_active(h, None, ctx);
        }
    }

    /// A request-only first packet (RTS, READ_REQ, ATOMIC_REQ) of op `o` left: the op
    /// started and took its message id (messages only), and the cursor moves on.
    #[inline(always)]
    pub(in crate::rdm) fn request_sent(&mut self, p: usize, o: u32, msg_id: u32) {
        if let Some(op) = self.ops.get_mut_by_index(o as usize) {
            op.started = true;
            op.msg_id = msg_id;
            op.initial_done = true;
            op.unacked += 1;
            op.undelivered += 1;
        }
        let (next, message) = self
            .ops
            .get_by_index(o as usize)
            .map_or((NIL, false), |(_, op)| (op.next, op.rma.is_none()));
        let pm = &mut self.peers[p];
        if message {
            pm.tx.next_msg_id = pm.tx.next_msg_id.wrapping_add(1);
        }
        pm.tx.cursor = next;
    }
}
