//! The send side of atomics (fi_atomic(3)) in the planner: what a target's answer
//! carrying the original values commits once it left. An initiator's ATOMIC_REQ
//! commits as a request (`rndv`).
//!
//! Packets are built in `send_plan` itself, one arm a packet kind: building them in
//! helpers here, even inlined, cost 1-3 instructions a packet and checking a
//! READ_RESP region here 3 (callgrind, the engine's unit tests of these features),
//! so only the commits moved; these are inlined into `send_plan`, their one caller.

use super::*;

impl<S: Storage> Rdm<S> {
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
