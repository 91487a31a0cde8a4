//! Session failure: what happens to a peer's pending operations when its session
//! ends.

use super::*;

impl<S: Storage> Rdm<S> {
    /// The session with peer `p` failed: every pending operation with it completes with
    /// `err`, except the sends `keep` names (they wait for a new session); held
    /// packets and partial messages from it are dropped.
    pub(in crate::rdm) fn fail_peer(
        &mut self,
        p: usize,
        err: Errno,
        keep: Keep,
        now: Instant,
        ctx: &mut Ctx<'_, S>,
    ) {
        // Which sends the peer acknowledged decides what a new session resends.
        self.take_held_ack(p, ctx);
        let peer = self.peers[p];
        let epoch = peer.session.epoch;
        // A session the peer closed in order (CLOSE) ended, it did not fail
        // (`closes_received` counts those).
        if !peer.session.closed_by_peer {
            self.stats.peer_failures += 1;
        }
        // Operations this failure completes in error: with none, and unless the peer
        // closed gracefully, only the endpoint's EQ can tell the application.
        let mut failed = 0u32;
        // Sends.
        let mut o = peer.tx.op_head;
        while o != NIL {
            let Some(op) = self.ops.get_by_index(o as usize).map(|(_, op)| *op) else {
                break;
            };
            let next = op.next;
            let kept = match keep {
                Keep::Nothing => false,
                Keep::Unstarted => !op.started,
                Keep::Unacknowledged => !op.acked_any,
            };
            if !kept {
                self.unlink_op(o as usize);
                if !op.completed {
                    failed += 1;
                    ctx.tx_done(op.context, op.kind(), Err(err), true, op.reserved);
                } else if op.level == Level::Inject && !op.completion {
                    failed += 1;
                    ctx.tx_failed_late(op.context, op.kind(), err);
                }
            } else if let Some(op) = self.ops.get_mut_by_index(o as usize) {
                if op.started {
                    // Nothing of it reached the application: all of it again.
                    *op = TxOp {
                        started: false,
                        msg_id: 0,
                        sent: 0,
                        initial_done: false,
                        granted: 0,
                        end: op.len,
                        cts_seen: false,
                        rx_op: 0,
                        unacked: 0,
                        undelivered: 0,
                        rma: op.rma.map(|r| RmaOp {
                            got: 0,
                            answered: false,
                            ..r
                        }),
                        ..*op
                    };
                    self.stats.tx_replayed += 1;
                }
                op.epoch = 0;
            }
            o = next;
        }
        // Window and reorder state.
        self.win.clear(p);
        self.reo.clear(p);
        if peer.rx.blocked {
            self.blocked = self.blocked.saturating_sub(1);
        }
        // Answers we owed it: its operations fail on its side.
        loop {
            let found = self
                .resps
                .iter()
                .find(|(_, r)| r.peer as usize == p)
                .map(|(h, _)| h);
            let Some(h) = found else { break };
            self.resps.remove(h);
        }
        // Receives matched to messages of this session.
        while let Some(h) = self.active.of_session(p, epoch) {
            failed += 1;
            self.finish_active(h, Some(err), ctx);
        }
        if failed == 0 && !peer.session.closed_by_peer {
            let count = self.fault.map_or(0, |f| f.count).saturating_add(1);
            self.fault = Some(EpFault { err, count });
            self.fault_wakeup = true;
        }
        // Unexpected messages of this session that can no longer complete.
        while let Some(r) = self.recv.needing_session(p, epoch) {
            self.drop_ux(r);
        }
        if peer.state == PeerState::Established {
            self.established = self.established.saturating_sub(1);
        }
        let pm = &mut self.peers[p];
        pm.state = PeerState::Failed;
        pm.session
            .end(peer.session.rx_session, peer.session.tx_session);
        pm.tx.stop(super::peer::Rtt::new(&self.cfg));
        pm.rx.stop();
        pm.last_active = now;
    }
}

/// Which sends survive a failed session ([`Rdm::fail_peer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::rdm) enum Keep {
    /// None: every pending send fails.
    Nothing,
    /// Those that have not sent anything.
    Unstarted,
    /// Also those of which nothing was acknowledged: the peer answered a packet with
    /// RESET(UNKNOWN_SESSION), so it holds nothing of the session and delivered none
    /// of them.
    Unacknowledged,
}
