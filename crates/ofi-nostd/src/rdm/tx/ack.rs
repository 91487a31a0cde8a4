//! Acknowledgements: building and sending ACKs, KEEPALIVEs and control replies, and
//! processing the peer's cumulative and selective acks (RTT samples, credits,
//! completions).

use wire::packet::SackRanges;

use super::*;

/// What `on_ack` reads of a peer before it changes it.
#[derive(Clone, Copy)]
pub(in crate::rdm) struct AckView {
    next_seq: u32,
    snd_una: u32,
    last_ack_ts: u32,
}

impl<S: Storage> Rdm<S> {
    /// A sequenced packet to peer `p` left, carrying acknowledgement `ack` if any.
    pub(in crate::rdm) fn packet_left(&mut self, p: usize, ack: Option<AckRepr>) {
        self.stats.tx_packets += 1;
        if let Some(a) = ack {
            self.stats.acks_piggybacked += 1;
            self.acked(p, &a);
        }
    }

    /// Packet `seq` of peer `p` was sent again: its window entry and the RTO.
    pub(in crate::rdm) fn resent(&mut self, p: usize, seq: u32, now: Instant) {
        self.win.get_mut(p, seq).resent(now);
        let floor = self.cfg.rto_min.total_micros() / 4;
        let pm = &mut self.peers[p];
        pm.tx.rtx_done();
        pm.tx.arm_rto(now);
        // Fast retransmit looks at it again once it is a round trip old.
        let again = now + Duration::from_micros(pm.tx.rtt.srtt.max(floor));
        pm.tx.sb.rescan_at = pm.tx.sb.rescan_at.min(again);
    }

    /// A window entry was acknowledged: cumulatively (`delivered`) or selectively
    /// (`sacked`, the first time), for each of its operations.
    pub(in crate::rdm) fn entry_acked(
        &mut self,
        regen: &Regen,
        was_sacked: bool,
        delivered: bool,
        ctx: &mut Ctx<'_, S>,
    ) {
        let (mut o, n) = match *regen {
            Regen::Bundle { op, n } => (op, n),
            r => match r.op() {
                Some(op) => (op, 1),
                None => return,
            },
        };
        for _ in 0..n {
            let Some(op) = self.ops.get_mut_by_index(o as usize) else {
                return;
            };
            let next = op.next; // before `op_progress` may unlink it
            if !was_sacked {
                op.unacked = op.unacked.saturating_sub(1);
            }
            if delivered {
                op.undelivered = op.undelivered.saturating_sub(1);
            }
            op.acked_any = true;
            self.op_progress(o as usize, ctx);
            o = next;
        }
    }

    /// Our grant to peer `p` grew enough since we last announced it (doubled, or from
    /// nothing) that the peer may be waiting for it.
    pub(in crate::rdm) fn credit_update_due(&self, p: usize) -> bool {
        let adv = self.peers[p].rx.adv_credits;
        let credits = self.credits_for(p);
        credits > adv && (adv == 0 || credits >= adv * 2)
    }

    /// The acknowledgement peer `p` is owed right now (spec 5.2), fresh: for an ACK
    /// packet or to piggyback on a sequenced one.
    pub(in crate::rdm) fn ack_body(&self, p: usize, now: Instant) -> AckRepr {
        let credits = self.credits_for(p);
        let peer = &self.peers[p];
        let w = self.cfg.span() as u32;
        let mut sack = 0u64;
        if peer.rx.held > 0 {
            let bits = 64u32.min(w.saturating_sub(1));
            if self.reo.has_bits() {
                // A word of the held bitmap, cut to the window.
                sack = self.reo.held64(p, peer.rx.rcv_nxt.wrapping_add(1));
                if bits < 64 {
                    sack &= (1u64 << bits) - 1;
                }
            } else {
                for i in 0..bits {
                    let s = peer.rx.rcv_nxt.wrapping_add(1 + i);
                    if self.reo.slot(p, s) != NO_SLOT {
                        sack |= 1 << i;
                    }
                }
            }
        }
        AckRepr {
            cum_ack: peer.rx.rcv_nxt,
            credits,
            sack,
            ts: ts32(now),
            echo_ts: peer.rx.ts_recent,
            short: sack == 0
                && self.cfg.short_ack
                && peer.session.params.caps & wcaps::SHORT_ACK != 0,
        }
    }

    /// Acknowledgement `a` left for peer `p` (standalone or piggybacked).
    pub(in crate::rdm) fn acked(&mut self, p: usize, a: &AckRepr) {
        self.peers[p].rx.acked(a.cum_ack, a.credits);
    }

    pub(in crate::rdm) fn send_ack<P: TxPort>(
        &mut self,
        p: usize,
        now: Instant,
        port: &mut P,
    ) -> Sent {
        let ack = self.ack_body(p, now);
        let body = if self.sack_due(p) {
            self.sack_body(p, ack)
        } else {
            Body::Ack(ack)
        };
        let peer = self.peers[p];
        let head = Repr {
            header: self.header(p, peer.tx.next_seq, false),
            body,
        };
        let r = self.send_ctl(&peer.addr, &head, SealFor::Peer(p), port);
        if r == Sent::Yes {
            self.stats.acks_sent += 1;
            self.stats.sacks_sent += u64::from(matches!(body, Body::Sack(_)));
            self.acked(p, &ack);
        }
        r
    }

    pub(in crate::rdm) fn send_keepalive<P: TxPort>(
        &mut self,
        p: usize,
        probe: bool,
        now: Instant,
        port: &mut P,
    ) -> Sent {
        let peer = self.peers[p];
        let head = Repr {
            header: self.header(p, peer.tx.next_seq, probe),
            body: Body::KeepAlive(KeepAliveRepr {
                ts: ts32(now),
                echo_ts: peer.rx.ts_recent,
            }),
        };
        self.send_ctl(&peer.addr, &head, SealFor::Peer(p), port)
    }

    /// Sends a packet without payload (sealed by `seal`, spec 4.10).
    pub(in crate::rdm) fn send_ctl<P: TxPort>(
        &mut self,
        to: &EpAddr,
        head: &Repr<'_>,
        seal: SealFor,
        port: &mut P,
    ) -> Sent {
        let len = head.buffer_len();
        let r = self.with_seal(seal, |seal| {
            port.send(to, len + seal.room(), |buf| {
                let n = buf
                    .get_mut(..len)
                    .and_then(|b| head.emit_bytes(b).ok())
                    .unwrap_or(0);
                seal.apply(buf, n)
            })
        });
        if r == Sent::Yes {
            self.stats.tx_packets += 1;
        }
        r
    }

    /// The first acknowledgement to move the cumulative ack (from `una` to `cum`) after
    /// retransmission timeouts of peer `p`, before it is processed: spurious when it
    /// covers a packet sent once before the first timeout (that packet was late, not
    /// lost: F-RTO's test) or comes sooner after the retransmission than the smallest
    /// round trip seen (the original was acknowledged). Then the backoff is undone;
    /// otherwise the packets were lost and every other one older than the RTO goes
    /// again.
    #[cold]
    #[inline(never)]
    pub(in crate::rdm) fn rto_ack(&mut self, p: usize, una: u32, cum: u32, now: Instant) {
        let Some(rec) = self.peers[p].tx.rto_recovery.take() else {
            return;
        };
        if !rec.silent {
            // Timeouts with loss evidence resent everything old already.
            return;
        }
        let mut late = false;
        let mut fast = false;
        let min = self.peers[p].tx.rtt.min;
        let mut s = una;
        while seq_lt(s, cum) {
            let e = self.win.get(p, s);
            let age = now.saturating_duration_since(e.sent_at).total_micros();
            if e.live && !e.sacked {
                if e.retx == 0 && e.sent_at < rec.at {
                    late = true;
                } else if e.retx > 0 && min != u64::MAX && age < min * 3 / 4 {
                    fast = true;
                }
            }
            s = s.wrapping_add(1);
        }
        if late || fast {
            // Not RFC 4015's response (the estimate set to the late packet's delay):
            // a packet the receiver held behind a lost one whose selective acks were
            // lost looks late too, and the inflated RTO cost rendezvous goodput 35% at
            // 20% loss in the goodput test. Undoing the backoff is safe either way.
            self.stats.spurious_timeouts += 1;
            let tx = &mut self.peers[p].tx;
            tx.timeouts = rec.timeouts;
            tx.rtt.rto = rec.rto;
            return;
        }
        let next = self.peers[p].tx.next_seq;
        let rto = Duration::from_micros(rec.rto);
        let mut marked = 0u32;
        let mut s = cum;
        while seq_lt(s, next) {
            let e = self.win.get_mut(p, s);
            if e.live && !e.sacked && !e.rtx && e.sent_at + rto <= now {
                e.rtx = true;
                marked += 1;
            }
            s = s.wrapping_add(1);
        }
        if marked > 0 {
            self.peers[p].tx.sb.rtx_from = cum;
        }
        self.peers[p].tx.rtx_pending += marked;
        self.stats.tx_timeout_retransmits += u64::from(marked);
        if marked > 0 {
            self.tx_ready = true;
        }
    }

    /// Packet `s` of peer `p` is selectively acknowledged: news only when it is in
    /// flight (`una .. next`) and was not before. Its RTT sample (the smallest one
    /// wins), the retransmission it no longer needs, and its operations. Out of line:
    /// `on_ack` is inlined into the short path, which has no selective acks.
    #[inline(never)]
    fn sacked(
        &mut self,
        p: usize,
        s: u32,
        (una, next): (u32, u32),
        now: Instant,
        sample: &mut Option<u64>,
        ctx: &mut Ctx<'_, S>,
    ) -> bool {
        if !(seq_le(una, s) && seq_lt(s, next)) {
            return false;
        }
        let Some(e) = self.win.sack(p, s) else {
            return false;
        };
        self.peers[p].tx.sb.sacked(s);
        if e.retx == 0 {
            let r = now.saturating_duration_since(e.sent_at).total_micros();
            *sample = Some(sample.map_or(r, |x| x.min(r)));
        }
        if e.rtx {
            self.peers[p].tx.rtx_done();
        }
        if matches!(e.regen, Regen::ReadData { .. } | Regen::AtomicData { .. }) {
            self.resp_acked(&e.regen);
        }
        self.entry_acked(&e.regen, false, false, ctx);
        true
    }

    /// The packets a SACK's `ranges` (beyond `cum`'s bitmap) acknowledge, as
    /// [`Rdm::sacked`] takes each; whether any was news. Out of line: only SACKs
    /// have ranges, and `on_ack` is inlined into the short path.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn ranges_acked(
        &mut self,
        p: usize,
        cum: u32,
        ranges: &SackRanges,
        flight: (u32, u32),
        now: Instant,
        sample: &mut Option<u64>,
        ctx: &mut Ctx<'_, S>,
    ) -> bool {
        let mut news = false;
        for (start, len) in ranges.iter() {
            for off in start..start + len {
                news |= self.sacked(p, cum.wrapping_add(off), flight, now, sample, ctx);
            }
        }
        news
    }

    /// Fast retransmit after a selective acknowledgement from peer `p`: an unacked
    /// packet with at least 3 selectively acknowledged packets above it (RFC 6675's
    /// IsLost) goes again. A packet sent once goes at once: the packets above it left
    /// after it, and waiting an RTT for the next acknowledgement turns a loss near the
    /// end of a burst (no acknowledgement follows) into a timeout. Only packets not
    /// looked at before are walked (those below the third highest selectively
    /// acknowledged one, from where the last walk stopped), so an acknowledgement costs
    /// what it newly reports, not the window; once per RTT the walk starts over from
    /// `snd_una` for retransmissions that were lost again. Out of line: the short path
    /// has no selective acks.
    #[inline(never)]
    fn fast_retransmit(&mut self, p: usize, now: Instant) {
        let floor = self.cfg.rto_min.total_micros() / 4;
        let tx = &self.peers[p].tx;
        let srtt = Duration::from_micros(tx.rtt.srtt.max(floor));
        let (una, next) = (tx.snd_una, tx.next_seq);
        // Nothing new queued: no packet will follow to be selectively acknowledged, so
        // one above a hole is enough (RFC 5827's early retransmit); else a loss in the
        // last packets before a pause (a rendezvous waiting for its CTS) waits for the
        // timeout.
        let idle =
            tx.cursor == NIL && tx.rndv_ready == 0 && tx.cts_pending == 0 && tx.resp_pending == 0;
        let hi = tx.sb.hi[0];
        let lost = if idle && seq_le(una, hi) && seq_lt(hi, next) {
            hi
        } else {
            tx.sb.lost_below(una, next)
        };
        let from = if seq_le(una, tx.sb.lost_upto) && seq_le(tx.sb.lost_upto, next) {
            tx.sb.lost_upto
        } else {
            una
        };
        // Packets resent once may be lost again: when the first of them is a round
        // trip old, the walk starts over from `snd_una` (to where the last one
        // reached), and finds when the next one will be.
        let rescan = now >= tx.sb.rescan_at;
        let end = if rescan && seq_lt(lost, from) {
            from
        } else {
            lost
        };
        let mut s = if rescan { una } else { from };
        let mut marked = 0u32;
        let mut first = None;
        let mut again = NEVER;
        while seq_lt(s, end) {
            let e = self.win.get_mut(p, s);
            if e.live && !e.sacked && !e.rtx {
                let due = if e.retx == 0 {
                    seq_le(from, s)
                } else if e.sent_at + srtt <= now {
                    true
                } else {
                    again = again.min(e.sent_at + srtt);
                    false
                };
                if due && seq_lt(s, lost) {
                    e.rtx = true;
                    marked += 1;
                    first.get_or_insert(s);
                }
            }
            s = s.wrapping_add(1);
        }
        let tx = &mut self.peers[p].tx;
        tx.sb.lost_upto = if seq_lt(from, lost) { lost } else { from };
        tx.sb.rescan_at = if rescan {
            again
        } else {
            tx.sb.rescan_at.min(again)
        };
        if let Some(f) = first {
            tx.sb.marked(f, una);
            tx.rtx_pending += marked;
            self.stats.tx_fast_retransmits += u64::from(marked);
        }
    }

    /// A READ_RESP data packet was acknowledged (first time): its answer is freed once
    /// all of it left and nothing of it is in flight.
    pub(in crate::rdm) fn resp_acked(&mut self, regen: &Regen) {
        let (Regen::ReadData { slot, .. } | Regen::AtomicData { slot }) = *regen else {
            return;
        };
        let done = match self.resps.get_mut_by_index(slot as usize) {
            Some(r) => {
                r.unacked = r.unacked.saturating_sub(1);
                r.sent >= r.len.max(1) && r.unacked == 0
            }
            None => return,
        };
        if done && let Some((h, _)) = self.resps.get_by_index(slot as usize) {
            self.resps.remove(h);
        }
    }

    /// Processes peer `p`'s held acknowledgement, if any, as of its arrival.
    pub(in crate::rdm) fn take_held_ack(&mut self, p: usize, ctx: &mut Ctx<'_, S>) {
        let Some(pm) = self.peers.get_mut(p) else {
            return;
        };
        if let Some((a, at)) = pm.tx.ack_held.take() {
            self.acks_held = self.acks_held.saturating_sub(1);
            self.on_ack(p, &a, &SackRanges::EMPTY, at, ctx);
        }
    }

    /// Processes every held acknowledgement (before timers and scans use the windows).
    pub(in crate::rdm) fn take_held_acks(&mut self, ctx: &mut Ctx<'_, S>) {
        if self.acks_held == 0 {
            return;
        }
        for p in 0..self.peers.high() {
            self.take_held_ack(p, ctx);
        }
    }

    /// An ACK from peer `p`: cumulative and selective acks (`ranges`: a SACK's, else
    /// empty), credits, RTT, fast retransmit, completions.
    pub(in crate::rdm) fn on_ack(
        &mut self,
        p: usize,
        a: &AckRepr,
        ranges: &SackRanges,
        now: Instant,
        ctx: &mut Ctx<'_, S>,
    ) {
        // Three fields, not a copy of the whole peer (every received ack).
        let peer = {
            let pr = &self.peers[p];
            AckView {
                next_seq: pr.tx.next_seq,
                snd_una: pr.tx.snd_una,
                last_ack_ts: pr.tx.last_ack_ts,
            }
        };
        if seq_lt(peer.next_seq, a.cum_ack) {
            self.stats.rx_bad_acks += 1;
            return;
        }
        let stale = seq_lt(a.cum_ack, peer.snd_una)
            || (a.cum_ack == peer.snd_una && seq_lt(a.ts, peer.last_ack_ts));
        if self.peers[p].tx.rto_recovery.is_some() && seq_lt(peer.snd_una, a.cum_ack) {
            self.rto_ack(p, peer.snd_una, a.cum_ack, now);
        }
        let mut sample: Option<u64> = None;
        let mut advanced = false;
        // Cumulative part. Packets after a retransmitted one waited at the receiver
        // for the hole to fill: their delay is not the path's (Karn), so no sample.
        let mut s = peer.snd_una;
        let mut behind_hole = false;
        while seq_lt(s, a.cum_ack) {
            if let Some(e) = self.win.ack(p, s) {
                behind_hole |= e.retx > 0;
                if e.retx == 0 && !e.sacked && !behind_hole {
                    sample = Some(now.saturating_duration_since(e.sent_at).total_micros());
                }
                if e.rtx {
                    let pm = &mut self.peers[p];
                    pm.tx.rtx_done();
                }
                if e.sacked {
                    self.peers[p].tx.sb.retired(a.cum_ack);
                }
                if !e.sacked && matches!(e.regen, Regen::ReadData { .. } | Regen::AtomicData { .. })
                {
                    self.resp_acked(&e.regen);
                }
                self.entry_acked(&e.regen, e.sacked, true, ctx);
            }
            s = s.wrapping_add(1);
            advanced = true;
        }
        if advanced {
            self.peers[p].tx.snd_una = a.cum_ack;
        }
        // Selective part.
        let snd_una = self.peers[p].tx.snd_una;
        let next_seq = self.peers[p].tx.next_seq;
        let mut bits = a.sack;
        let mut newly_sacked = false;
        while bits != 0 {
            let i = bits.trailing_zeros();
            bits &= bits - 1;
            let s = a.cum_ack.wrapping_add(1 + i);
            newly_sacked |= self.sacked(p, s, (snd_una, next_seq), now, &mut sample, ctx);
        }
        if cfg!(feature = "sack") && !ranges.is_empty() {
            newly_sacked |= self.ranges_acked(
                p,
                a.cum_ack,
                ranges,
                (snd_una, next_seq),
                now,
                &mut sample,
                ctx,
            );
        }
        let cfg = &self.cfg;
        let pm = &mut self.peers[p];
        if let Some(r) = sample {
            pm.tx.rtt.sample(r, cfg);
        }
        if !stale {
            let lim = a
                .credits
                .min(pm.session.params.window.max(1) as u32)
                .min(cfg.span() as u32);
            pm.tx.snd_limit = a.cum_ack.wrapping_add(lim);
            pm.tx.last_ack_ts = a.ts;
        }
        if advanced || newly_sacked {
            let unacked_left = pm.tx.in_flight() > 0;
            pm.tx.rto_at = unacked_left.then(|| now + Duration::from_micros(pm.tx.rtt.rto));
        }
        if a.sack != 0 || !ranges.is_empty() {
            self.fast_retransmit(p, now);
        }
        // Only what the acknowledgement let go (a wider window or more credits for
        // queued data, a fast retransmission) needs the transmitter now. Completions
        // are written already and timers are in `poll_timeout`: a ping-pong's reply
        // carries the ack it owes, so its receiving pass hands the completion over
        // without a transmit half first.
        let pm = &self.peers[p];
        if pm.tx.cursor != NIL
            || pm.tx.rndv_ready > 0
            || pm.tx.cts_pending > 0
            || pm.tx.resp_pending > 0
            || pm.tx.rtx_pending > 0
        {
            self.tx_ready = true;
        }
    }
}
