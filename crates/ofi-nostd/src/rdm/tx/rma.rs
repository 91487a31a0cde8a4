//! The send side of RMA (docs/wire-protocol.md, section 7) in the planner: what a
//! target's answer commits once it left (a status answer is done; READ_RESP data
//! waits for its acknowledgements). An initiator's RMA_WRITE segments commit as eager
//! segments do, its READ_REQ as a request (`rndv`).
//!
//! Packets are built in `send_plan` itself, one arm a packet kind: building them in
//! helpers here, even inlined, cost 1-3 instructions a packet and checking a
//! READ_RESP region here 3 (callgrind, the engine's unit tests of these features),
//! so only the commits moved; these are inlined into `send_plan`, their one caller.

use super::*;

impl<S: Storage> Rdm<S> {
    /// A status answer left: everything a retransmission needs is in the window
    /// entry, so the answer is done.
    #[inline(always)]
    pub(in crate::rdm) fn resp_sent(&mut self, p: usize, slot: u32) {
        if let Some((h, _)) = self.resps.get_by_index(slot as usize) {
            self.resps.remove(h);
        }
        let pm = &mut self.peers[p];
        pm.tx.resp_pending = pm.tx.resp_pending.saturating_sub(1);
    }

    /// READ_RESP data left: the answer waits for its acknowledgements, and owes no more
    /// once all of it left.
    #[inline(always)]
    pub(in crate::rdm) fn read_data_sent(&mut self, p: usize, slot: u32, len: u32) {
        let mut finished = false;
        if let Some(r) = self.resps.get_mut_by_index(slot as usize) {
            r.sent += len as u64;
            r.unacked += 1;
            finished = r.sent >= r.len;
        }
        if finished {
            let pm = &mut self.peers[p];
            pm.tx.resp_pending = pm.tx.resp_pending.saturating_sub(1);
        }
    }
}
