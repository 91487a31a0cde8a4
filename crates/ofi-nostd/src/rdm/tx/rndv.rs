//! The send side of rendezvous (spec 6.3) in the planner: what a request-only first
//! packet (RTS, and the READ_REQ and ATOMIC_REQ that commit alike) and our own CTS
//! grants commit once they left. DATA commits as eager segments do (`plan`).
//!
//! Packets are built in `send_plan` itself, one arm a packet kind: building them in
//! helpers here, even inlined, cost 1-3 instructions a packet and checking a
//! READ_RESP region here 3 (callgrind, the engine's unit tests of these features),
//! so only the commits moved; these are inlined into `send_plan`, their one caller.

use super::*;

impl<S: Storage> Rdm<S> {
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
