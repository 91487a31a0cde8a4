//! Per-peer timers: handshake retries, delayed acks, retransmission timeouts and the
//! credit and liveness probes.

use super::*;

/// What `run_timers` reads of a peer, copied out so the peer table stays borrowable.
#[derive(Clone, Copy)]
pub(in crate::rdm) struct TimerView {
    cand: Option<super::peer::Cand>,
    state: PeerState,
    hello_at: Instant,
    hello_tries: u32,
    ack_at: Option<Instant>,
    rto_at: Option<Instant>,
    probe_at: Option<Instant>,
}

impl<S: Storage> Rdm<S> {
    pub(in crate::rdm) fn run_timers(&mut self, p: usize, now: Instant, ctx: &mut Ctx<'_, S>) {
        let cfg = self.cfg;
        // Only the fields read below: this runs for every session on every pass.
        let peer = {
            let pr = &self.peers[p];
            TimerView {
                cand: pr.session.cand,
                state: pr.state,
                hello_at: pr.session.hello_at,
                hello_tries: pr.session.hello_tries,
                ack_at: pr.rx.ack_at,
                rto_at: pr.tx.rto_at,
                probe_at: pr.tx.probe_at,
            }
        };
        if let Some(c) = peer.cand
            && !c.send_ack
            && now >= c.expires
        {
            self.peers[p].session.cand = None;
        }
        match peer.state {
            PeerState::HelloSent
                if now >= peer.hello_at && peer.hello_tries >= cfg.hello_retries =>
            {
                let err = if self.peers[p].session.key_refused {
                    Errno::EKEYREJECTED
                } else {
                    Errno::EHOSTUNREACH
                };
                self.fail_peer(p, err, Keep::Nothing, now, ctx);
            }
            PeerState::Established => {
                if let Some(t) = peer.ack_at
                    && now >= t
                {
                    let pm = &mut self.peers[p];
                    pm.rx.ack_now = true;
                    pm.rx.ack_at = None;
                    if pm.rx.holding {
                        // Nothing came to carry it: stop holding for this peer.
                        pm.rx.hold_ok = false;
                        pm.rx.holding = false;
                    }
                }
                if let Some(t) = peer.rto_at
                    && now >= t
                {
                    self.on_rto(p, now, ctx);
                }
                if let Some(t) = peer.probe_at
                    && now >= t
                    && self.peers[p].state == PeerState::Established
                {
                    let pm = &mut self.peers[p];
                    pm.tx.timeouts += 1;
                    if pm.tx.timeouts > cfg.max_retries {
                        self.stats.fail_probe += 1;
                        self.fail_peer(p, Errno::ETIMEDOUT, Keep::Nothing, now, ctx);
                    }
                }
                self.liveness(p, now, ctx);
            }
            _ => {}
        }
    }

    /// While we wait for a peer's data (a rendezvous we granted, the rest of an eager
    /// message) and have nothing in flight to it, nothing would notice its death: probe
    /// it with KEEPALIVE | ACK_REQ, backing off, and fail the session after
    /// `max_retries` unanswered probes. A watched peer ([`Rdm::watch`]) is probed
    /// so always, every `rto_max`.
    pub(in crate::rdm) fn liveness(&mut self, p: usize, now: Instant, ctx: &mut Ctx<'_, S>) {
        let cfg = self.cfg;
        {
            let pr = &mut self.peers[p];
            if pr.state != PeerState::Established {
                return;
            }
            let waiting = pr.rx.inbound > 0 || pr.rx.asm.is_some() || pr.watched;
            if !waiting || pr.tx.rto_at.is_some() || pr.tx.probe_at.is_some() {
                pr.tx.live_at = None;
                return;
            }
        }
        let peer = self.peers[p];
        let idle = peer.rx.inbound == 0 && peer.rx.asm.is_none();
        let interval = |n: u32| {
            if idle {
                // Watched, nothing awaited: a keepalive, not a chase.
                return cfg.rto_max;
            }
            Duration::from_micros(
                peer.tx
                    .rtt
                    .rto
                    .saturating_mul(1 << n.min(16))
                    .min(cfg.rto_max.total_micros()),
            )
        };
        match peer.tx.live_at {
            None => self.peers[p].tx.live_at = Some(now + interval(peer.tx.timeouts)),
            Some(t) if now >= t => {
                if peer.tx.timeouts >= cfg.max_retries {
                    self.stats.fail_probe += 1;
                    self.fail_peer(p, Errno::ETIMEDOUT, Keep::Nothing, now, ctx);
                    return;
                }
                let pm = &mut self.peers[p];
                pm.tx.timeouts += 1;
                pm.tx.ka_probe = true;
                pm.tx.live_at = Some(now + interval(pm.tx.timeouts));
                self.tx_ready = true;
            }
            Some(_) => {}
        }
    }

    /// The retransmission timer of peer `p` expired: back off and retransmit. With
    /// evidence of loss (the peer selectively acknowledged a packet in flight: it is
    /// alive and the path delivers), every unacknowledged packet older than one RTO
    /// goes again. Without (the acknowledgements just stopped: a lost burst, or a delay
    /// spike of a loaded host), only the oldest goes, as TCP does, and the
    /// acknowledgement that resolves the series (`Rdm::rto_ack`) tells whether the
    /// rest was late or lost; a spike no longer resends the whole window on every
    /// timeout.
    pub(in crate::rdm) fn on_rto(&mut self, p: usize, now: Instant, ctx: &mut Ctx<'_, S>) {
        self.stats.rto_expirations += 1;
        let cfg = self.cfg;
        let peer = self.peers[p];
        if peer.tx.timeouts >= cfg.max_retries {
            self.stats.fail_retransmit += 1;
            self.fail_peer(p, Errno::ETIMEDOUT, Keep::Nothing, now, ctx);
            return;
        }
        let rec = peer.tx.rto_recovery.unwrap_or(super::peer::RtoRecovery {
            at: now,
            rto: peer.tx.rtt.rto,
            timeouts: peer.tx.timeouts,
            silent: peer.tx.sb.sacked == 0,
        });
        let allowance = if rec.silent { 1 } else { u32::MAX };
        let rto = Duration::from_micros(peer.tx.rtt.rto);
        let mut s = peer.tx.snd_una;
        let mut marked = 0u32;
        let mut first = true;
        while seq_lt(s, peer.tx.next_seq) && marked < allowance {
            let e = self.win.get_mut(p, s);
            if e.live && !e.sacked && !e.rtx && (first || e.sent_at + rto <= now) {
                e.rtx = true;
                marked += 1;
            }
            if e.live && !e.sacked {
                first = false;
            }
            s = s.wrapping_add(1);
        }
        let pm = &mut self.peers[p];
        pm.tx.rto_recovery = Some(rec);
        if marked > 0 {
            pm.tx.sb.rtx_from = peer.tx.snd_una;
        }
        pm.tx.rtx_pending += marked;
        if pm.tx.rtx_pending == 0 && pm.tx.in_flight() > 0 {
            // The peer holds every packet in flight (all selectively acknowledged: a
            // receiver out of resources keeps its refused head and what follows), so
            // nothing is resent and nothing would make it answer. Probe instead: a
            // live peer answers, which keeps the session, and its answer carries the
            // acknowledgement it may have sent when it caught up and that was lost.
            pm.tx.ka_probe = true;
        }
        pm.tx.timeouts += 1;
        pm.tx.rtt.backoff(&cfg);
        pm.tx.rto_at = if pm.tx.in_flight() > 0 {
            Some(now + Duration::from_micros(pm.tx.rtt.rto))
        } else {
            None
        };
        self.stats.tx_timeout_retransmits += marked as u64;
        self.tx_ready = true;
    }
}
