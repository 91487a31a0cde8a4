//! The receive side: session checks and sequencing (in-order processing, the shared
//! reorder pool, acknowledgement scheduling). Matching and assembling messages,
//! rendezvous, RMA and atomics targets, unexpected messages and posting receives live
//! in the child modules, one per feature.

#[cfg(feature = "atomic")]
mod atomic;
mod msg;
mod post;
#[cfg(feature = "rma")]
mod rma;
mod rndv;
mod unexp;
#[cfg(not(all(feature = "rma", feature = "atomic")))]
mod unserved;

use wire::packet::{Body, CtsRepr, DataRepr, MsgRepr, Repr, RtsRepr, SackRanges, close, status};
use wire::seq::seq_diff;

use super::*;
use crate::cq::comp;
use crate::iov::IovList;
use crate::pool::Handle;

use msg::Take;
#[cfg(feature = "atomic")]
use rma::rma_status;

/// What processing an in-order packet came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Consumed (delivered, buffered, or dropped as a protocol error).
    Done,
    /// Not now: no receive resources. The packet stays unacknowledged.
    Blocked,
}

/// A receive buffer a message was matched to.
#[derive(Debug, Clone, Copy)]
pub(super) struct Target {
    iov: IovList,
    context: u64,
    reserved: bool,
    completion: bool,
    multi: Option<Handle<MultiBuf>>,
}

/// In-order packets a receiver lets go unacknowledged (unless a reply carries the ack
/// first) when the sender may have `grant` packets in flight: a sixteenth of the grant
/// (4 with the default window of 64), at least 2 (TCP's delayed-ack floor). The
/// receiver cannot see the sender's pipeline: an application may keep far fewer sends
/// posted than the grant allows, and its next sends wait for these acks. In the
/// simulator (64 B one-way messages, 2 µs links) a sixteenth kept pipelines of 16 and
/// 48 messages as fast as acking every second packet did, while a quarter cost them
/// 12% and 24%; the 1 M message fault-mix test sent 2% fewer datagrams than before
/// piggybacking. Small grants are covered by the "grant used up" rule, short
/// pipelines by `ACK_REQ` (see [`Rdm::advance`]).
fn ack_threshold(grant: u32) -> u32 {
    (grant / 16).max(2)
}

fn iov_len(iov: &IovList) -> u64 {
    iov.as_slice().iter().map(|v| v.len as u64).sum()
}

impl<S: Storage> Rdm<S> {
    /// A parsed packet from `from` for this endpoint (`raw` is the whole packet).
    /// Inlined into its one caller, `Domain::rx_datagram`; the handshake, reset and
    /// error paths it calls are `#[cold]`, and `process`'s RMA, atomic, rendezvous and
    /// bundle handlers are kept out of line, so the eager path is short straight-line
    /// code (callgrind: 2% fewer instructions per engine round trip, 4% per streamed
    /// message).
    #[inline(always)]
    pub(crate) fn on_packet<M: Memory>(
        &mut self,
        now: Instant,
        from: EpAddr,
        repr: &Repr<'_>,
        raw: &[u8],
        mem: &mut M,
        ctx: &mut Ctx<'_, S>,
    ) {
        self.stats.rx_packets += 1;
        // Under an auth key nothing of a packet counts before its MAC (spec 4.10).
        if self.mac.on() && repr.packet_type().takes_mac() && !self.mac_rx_ok(&from, repr, raw) {
            self.stats.rx_bad_mac += 1;
            self.mac_dropped(&from, repr);
            return;
        }
        // A held acknowledgement of this peer goes first: it is older than this packet.
        if self.acks_held > 0
            && let Some(p) = self.peers.find(&from)
        {
            self.take_held_ack(p, ctx);
        }
        let h = &repr.header;
        let handshake = match &repr.body {
            Body::Hello(x) => {
                self.on_hello(from, x, raw, now, ctx);
                true
            }
            Body::HelloAck(x) => {
                self.on_hello_ack(from, h, x, raw, now, ctx);
                true
            }
            Body::Reject(x) => {
                self.on_reject(from, h, x, now, ctx);
                true
            }
            Body::Retry(x) => {
                self.on_retry(from, h, x, now);
                true
            }
            Body::Reset(x) => {
                self.on_reset(from, h, x, now, ctx);
                true
            }
            Body::Dgram(_) => {
                self.stats.rx_unsupported += 1;
                return;
            }
            _ => false,
        };
        if handshake {
            return self.arm_addr(&from, now);
        }
        let sequenced = repr.packet_type().is_sequenced();
        let Some(p) = self.peers.find(&from) else {
            self.stats.rx_unknown_session += 1;
            if sequenced {
                self.reset_unknown(from, h.session, now);
            }
            return;
        };
        let (state, rx_session) = {
            let pr = &self.peers[p];
            (pr.state, pr.session.rx_session)
        };
        let mut ok = state == PeerState::Established && h.session == rx_session;
        if !ok && self.adopt_candidate(p, h.session, now, ctx) {
            ok = true;
        }
        if !ok {
            let failed = self.peers[p];
            if state == PeerState::HelloSent && h.session == rx_session {
                // The peer answered our HELLO and already sends; its HELLO_ACK is late.
                self.stats.rx_early += 1;
            } else if h.session != 0 && h.session == failed.session.failed_rx_session {
                // A late packet of a session we failed: we may have delivered some of
                // what the peer still retransmits, so it must not send it again on a
                // new session (as UNKNOWN_SESSION would let it).
                self.stats.rx_unknown_session += 1;
                if sequenced {
                    self.reset_peer(
                        from,
                        failed.session.failed_tx_session,
                        close::RETRY_EXHAUSTED,
                        now,
                    );
                }
            } else {
                self.stats.rx_unknown_session += 1;
                if sequenced {
                    self.reset_unknown(from, h.session, now);
                }
            }
            return;
        }
        if self.cfg.crc && !h.crc {
            self.stats.rx_missing_crc += 1;
            return;
        }
        self.peers[p].last_heard_ok(now);
        match &repr.body {
            Body::Ack(a) => {
                self.peers[p].rx.ts_recent = a.ts;
                self.on_ack(p, a, &SackRanges::EMPTY, now, ctx);
            }
            // Without the feature nobody was told we take SACKs: refused, counted.
            Body::Sack(_) if !cfg!(feature = "sack") => self.stats.rx_unsupported += 1,
            Body::Sack(s) => self.on_sack(p, s, now, ctx),
            Body::KeepAlive(k) => {
                let pm = &mut self.peers[p];
                pm.rx.ts_recent = k.ts;
                if h.ack_req {
                    pm.rx.ka_reply = true;
                    pm.rx.ack_now = true;
                    self.tx_ready = true;
                }
            }
            _ => {
                // A piggybacked acknowledgement counts exactly like an ACK packet, and
                // before the packet's own sequencing: even a duplicate or a packet
                // outside the window carries a fresh one (stale ones are harmless).
                if let Some(a) = repr.ack() {
                    self.stats.rx_acks_piggybacked += 1;
                    let pm = &mut self.peers[p];
                    pm.rx.ts_recent = a.ts;
                    if matches!(repr.body, Body::Msg(_) | Body::Bundle(_)) {
                        // On a message: held until the next full transmit half, so
                        // an answer posted meanwhile leaves first. Its arrival time
                        // stays its RTT sample's.
                        pm.tx.ack_held = Some((a, now));
                        self.acks_held += 1;
                        self.stats.rx_acks_held += 1;
                    } else {
                        self.on_ack(p, &a, &SackRanges::EMPTY, now, ctx);
                    }
                }
                self.on_sequenced(p, repr, raw, now, mem, ctx)
            }
        }
        self.arm_peer(p, now);
    }

    /// Lowers `next_scan` to peer `p`'s earliest timer after something changed it
    /// outside a transmitter scan (a packet from it, a post to it).
    pub(super) fn arm_peer(&mut self, p: usize, now: Instant) {
        if let Some(t) = self.peers.get(p).and_then(|pr| pr.scan_due(now)) {
            self.arm(t);
        }
    }

    fn arm_addr(&mut self, from: &EpAddr, now: Instant) {
        if let Some(p) = self.peers.find(from) {
            self.arm_peer(p, now);
        }
    }

    fn on_sequenced<M: Memory>(
        &mut self,
        p: usize,
        repr: &Repr<'_>,
        raw: &[u8],
        now: Instant,
        mem: &mut M,
        ctx: &mut Ctx<'_, S>,
    ) {
        let seq = repr.header.seq;
        let ack_req = repr.header.ack_req;
        let d = seq_diff(seq, self.peers[p].rx.rcv_nxt);
        if d < 0 {
            // Already processed: the sender missed our ACK.
            self.stats.rx_duplicates += 1;
            self.peers[p].rx.ack_now = true;
            self.tx_ready = true;
            return;
        }
        // A closing endpoint takes no new packet, except the peer's CLOSE in order
        // (it delivers nothing, and acknowledging it ends the peer's linger).
        if self.closing && !(d == 0 && matches!(repr.body, Body::Close(_))) {
            self.stats.rx_closing += 1;
            return;
        }
        if d as u32 >= self.cfg.span() as u32 {
            self.stats.rx_out_of_window += 1;
            if ack_req {
                self.peers[p].rx.ack_now = true;
                self.tx_ready = true;
            }
            return;
        }
        if self.reo.slot(p, seq) != NO_SLOT {
            // Held already (out of order, or a refused head).
            self.stats.rx_duplicates += 1;
            self.peers[p].rx.ack_now = true;
            self.tx_ready = true;
            return;
        }
        if d > 0 {
            if !self.hold(p, seq, raw) {
                self.stats.rx_reorder_full += 1;
                if ack_req {
                    self.peers[p].rx.ack_now = true;
                    self.tx_ready = true;
                }
                return;
            }
            self.stats.rx_held += 1;
            self.held_ack(p, seq, now);
            return;
        }
        match self.process(p, repr, now, mem, ctx) {
            Outcome::Done => {
                self.advance(p, now, ack_req);
                if self.peers[p].rx.held > 0 {
                    self.drain(p, now, mem, ctx);
                }
            }
            Outcome::Blocked => {
                self.stats.rx_refused += 1;
                if self.hold(p, seq, raw) {
                    self.peers[p].rx.blocked = true;
                    self.blocked += 1;
                }
                self.peers[p].rx.ack_now = true;
                self.tx_ready = true;
            }
        }
    }

    /// `rcv_nxt` moves past one processed packet. Acknowledge at once when enough
    /// packets went unacknowledged for the sender's grant to run low, or when this
    /// one uses up the grant we last announced; otherwise arm the ack timer (`hold`,
    /// for a packet with `ACK_REQ`: the short `ack_hold`, so that a reply the
    /// application posts meanwhile carries the ack, unless holding did not pay off
    /// with this peer lately, then at once; else `ack_delay`), keeping an earlier
    /// deadline.
    fn advance(&mut self, p: usize, now: Instant, hold: bool) {
        let delay = if hold {
            self.cfg.ack_hold
        } else {
            self.cfg.ack_delay
        };
        let window = self.cfg.window as u32;
        let pm = &mut self.peers[p];
        pm.rx.rcv_nxt = pm.rx.rcv_nxt.wrapping_add(1);
        pm.rx.since_ack += 1;
        // What the sender may have in flight beyond our last acknowledgement: our grant
        // and both windows (spec 5.4).
        let grant = pm
            .rx
            .adv_credits
            .min(window)
            .min(pm.session.params.window.max(1) as u32);
        let exhausted = seq_diff(pm.rx.rcv_nxt, pm.rx.adv_cum.wrapping_add(grant)) >= 0;
        if pm.rx.since_ack >= ack_threshold(grant) || exhausted {
            pm.rx.ack_now = true;
            self.tx_ready = true;
        } else if hold && !pm.rx.hold_ok {
            // The peer sends without waiting for anything of ours: answer now.
            pm.rx.ack_now = true;
            pm.rx.req_acked_at = Some(now);
            self.tx_ready = true;
        } else {
            let at = now + delay;
            if pm.rx.ack_at.is_none_or(|t| at < t) {
                pm.rx.ack_at = Some(at);
                pm.rx.holding = hold;
            }
        }
    }

    /// Processes held packets that are now in order.
    fn drain<M: Memory>(&mut self, p: usize, now: Instant, mem: &mut M, ctx: &mut Ctx<'_, S>) {
        let mut filled = false;
        loop {
            let seq = self.peers[p].rx.rcv_nxt;
            let slot = self.reo.slot(p, seq);
            if slot == NO_SLOT {
                break;
            }
            let Some(pool) = self.reo.take_out() else {
                break;
            };
            let outcome = {
                match self.reo.packet(&pool, slot).map(Repr::parse_bytes) {
                    Some(Ok(repr)) if repr.header.seq == seq => {
                        self.process(p, &repr, now, mem, ctx)
                    }
                    _ => {
                        self.stats.rx_protocol_errors += 1;
                        Outcome::Done
                    }
                }
            };
            self.reo.put_back(pool);
            match outcome {
                Outcome::Blocked => {
                    let pm = &mut self.peers[p];
                    if !pm.rx.blocked {
                        pm.rx.blocked = true;
                        self.blocked += 1;
                        self.stats.rx_refused += 1;
                    }
                    break;
                }
                Outcome::Done => {
                    self.reo.release(p, seq, slot);
                    let pm = &mut self.peers[p];
                    pm.rx.held = pm.rx.held.saturating_sub(1);
                    if pm.rx.blocked {
                        pm.rx.blocked = false;
                        self.blocked = self.blocked.saturating_sub(1);
                    }
                    self.advance(p, now, false);
                    filled = true;
                }
            }
        }
        if filled {
            self.peers[p].rx.ack_now = true;
            self.tx_ready = true;
        }
    }

    /// Keeps a copy of packet `seq` of peer `p` in the reorder pool. Each peer may hold
    /// at most its share of the pool, so one peer cannot starve the others.
    #[inline(never)]
    fn hold(&mut self, p: usize, seq: u32, raw: &[u8]) -> bool {
        let n = self.established.max(1) as usize;
        let share = (self.cfg.reorder_slots / n).max(2);
        let peer = &self.peers[p];
        let len = wire::Packet::new_unchecked(raw).packet_len() as usize;
        // The pool refuses what does not fit in a slot (`max_pkt`) or when it is full.
        if peer.rx.held as usize >= share || len > raw.len() || !self.reo.hold(p, seq, &raw[..len])
        {
            return false;
        }
        self.peers[p].rx.held += 1;
        true
    }

    /// Retries the refused head packets of blocked peers (receive resources may have
    /// been freed since).
    pub(crate) fn retry_blocked<M: Memory>(
        &mut self,
        now: Instant,
        mem: &mut M,
        ctx: &mut Ctx<'_, S>,
    ) {
        if self.blocked == 0 {
            return;
        }
        for p in 0..self.peers.high() {
            if self.peers[p].used && self.peers[p].rx.blocked {
                self.drain(p, now, mem, ctx);
                self.arm_peer(p, now);
            }
        }
    }

    /// An answer owed to peer `p`'s operation `op_id` (RMA or atomic): its status, and
    /// for a read the region and length to send. The caller checked there is room.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::rdm) fn queue_resp(
        &mut self,
        p: usize,
        op_id: u32,
        status: u16,
        read: bool,
        key: u64,
        addr: u64,
        len: u64,
    ) -> Option<usize> {
        let resp = RmaResp {
            peer: p as u16,
            epoch: self.peers[p].session.epoch,
            op_id,
            status,
            read,
            key,
            addr,
            len,
            sent: 0,
            unacked: 0,
            fetched: [0; crate::atomic::MAX_ATOMIC_BYTES],
            fetched_len: 0,
        };
        // Room was checked before anything of the request was done.
        let h = self.resps.insert(resp).ok()?;
        self.peers[p].tx.resp_pending += 1;
        self.tx_ready = true;
        Some(h.index())
    }

    fn process<M: Memory>(
        &mut self,
        p: usize,
        repr: &Repr<'_>,
        now: Instant,
        mem: &mut M,
        ctx: &mut Ctx<'_, S>,
    ) -> Outcome {
        match &repr.body {
            Body::Msg(m) => self.rx_segment(p, m, None, mem, ctx),
            Body::Bundle(b) => self.rx_bundle(p, b, mem, ctx),
            Body::Rts(r) => self.rx_rts(p, r, ctx),
            Body::Cts(c) => {
                self.on_cts(p, c, ctx);
                Outcome::Done
            }
            Body::Data(d) => {
                self.rx_data(p, d, mem, ctx);
                Outcome::Done
            }
            Body::Close(_) => {
                // Everything the peer sent before it was processed, and it takes
                // nothing more: acknowledge at once, then the session ends (`pump`).
                self.stats.closes_received += 1;
                let pm = &mut self.peers[p];
                pm.session.closed_by_peer = true;
                pm.rx.ack_now = true;
                self.tx_ready = true;
                Outcome::Done
            }
            Body::RmaWrite(w) => self.rx_rma_write(p, w, mem, ctx),
            Body::ReadReq(r) => self.rx_read_req(p, r, ctx),
            Body::ReadResp(r) => {
                self.rx_read_resp(p, r, mem, ctx);
                Outcome::Done
            }
            Body::AtomicReq(a) => self.rx_atomic(p, a, mem, ctx),
            Body::AtomicResp(a) => {
                self.rx_write_resp(p, a, mem, ctx);
                Outcome::Done
            }
            _ => {
                // Not a packet of a session's sequenced stream.
                self.stats.rx_unsupported += 1;
                let _ = now;
                Outcome::Done
            }
        }
    }
}
