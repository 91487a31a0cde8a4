//! Closing one context of a scalable endpoint ([`crate::sep`]): what that side of
//! the engine still has queued is canceled, so its application sees every operation
//! end, while the engine's other side and its sessions stay up.

use super::*;

impl<S: Storage> Rdm<S> {
    /// Cancels every posted receive (each completes with -FI_ECANCELED on the receive
    /// CQ, as `fi_cancel` would); returns how many.
    pub(crate) fn cancel_all_recvs(&mut self, ctx: &mut Ctx<'_, S>) -> usize {
        let mut n = 0;
        // Bounded: each round removes one receive of at most two full queues.
        for _ in 0..2 * self.rx_capacity() + 1 {
            let next = self
                .recv
                .posted_msg
                .iter_values()
                .chain(self.recv.posted_tag.iter_values())
                .next()
                .map(|r| r.context);
            match next {
                Some(c) if self.cancel_recv(c, ctx) => n += 1,
                _ => break,
            }
        }
        n
    }

    /// Cancels every send operation of which nothing left yet (-FI_ECANCELED on the
    /// transmit CQ); operations already on the wire finish as they would. Returns how
    /// many were canceled.
    pub(crate) fn cancel_all_sends(&mut self, ctx: &mut Ctx<'_, S>) -> usize {
        let mut n = 0;
        for _ in 0..self.tx_capacity() + 1 {
            let next = self
                .ops
                .iter()
                .find(|(_, o)| !o.started && !o.completed)
                .map(|(_, o)| o.context);
            match next {
                Some(c) if self.cancel_send(c, ctx) => n += 1,
                _ => break,
            }
        }
        n
    }
}
