//! The receive side: session checks, in-order processing with a shared reorder pool,
//! matching against posted receives, unexpected messages (eager segments buffered in a
//! bounded segment pool, rendezvous as headers only), rendezvous grants, multi-recv,
//! FI_PEEK / FI_CLAIM / FI_DISCARD and receive cancellation.

use wire::packet::{Body, CtsRepr, DataRepr, MsgRepr, Repr, RtsRepr, close, status};
use wire::seq::seq_diff;

use super::*;
use crate::cq::comp;
use crate::iov::IovList;
use crate::pool::Handle;

/// What processing an in-order packet came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Consumed (delivered, buffered, or dropped as a protocol error).
    Done,
    /// Not now: no receive resources. The packet stays unacknowledged.
    Blocked,
}

/// What taking a posted receive gave.
enum Take {
    Got(Target),
    /// A multi-recv buffer was too full and got released: look again.
    Retry,
    /// No CQ room for another multi-recv completion: refuse the message for now.
    NoRoom,
}

/// What `rx_segment` reads of a peer.
struct SegView {
    asm: Option<Asm>,
    addr: EpAddr,
    epoch: u32,
    rx_msg_id: u32,
}

/// A receive buffer a message was matched to.
#[derive(Debug, Clone, Copy)]
struct Target {
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
    // ---- entry point -------------------------------------------------------------------

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
        // A held acknowledgement of this peer goes first: it is older than this packet.
        if self.acks_held > 0
            && let Some(p) = self.find_peer(&from)
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
                self.on_hello_ack(from, h, x, raw, now);
                true
            }
            Body::Reject(x) => {
                self.on_reject(from, h, x, now, ctx);
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
        let Some(p) = self.find_peer(&from) else {
            self.stats.rx_unknown_session += 1;
            if sequenced {
                self.reset_unknown(from, h.session, now);
            }
            return;
        };
        let (state, rx_session) = {
            let pr = &self.peers.as_ref()[p];
            (pr.state, pr.rx_session)
        };
        let mut ok = state == PeerState::Established && h.session == rx_session;
        if !ok && self.adopt_candidate(p, h.session, now, ctx) {
            ok = true;
        }
        if !ok {
            let failed = self.peers.as_ref()[p];
            if state == PeerState::HelloSent && h.session == rx_session {
                // The peer answered our HELLO and already sends; its HELLO_ACK is late.
                self.stats.rx_early += 1;
            } else if h.session != 0 && h.session == failed.failed_rx_session {
                // A late packet of a session we failed: we may have delivered some of
                // what the peer still retransmits, so it must not send it again on a
                // new session (as UNKNOWN_SESSION would let it).
                self.stats.rx_unknown_session += 1;
                if sequenced {
                    self.reset_peer(from, failed.failed_tx_session, close::RETRY_EXHAUSTED, now);
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
        self.peers.as_mut()[p].last_heard_ok(now);
        match &repr.body {
            Body::Ack(a) => {
                self.peers.as_mut()[p].ts_recent = a.ts;
                self.on_ack(p, a, now, ctx);
            }
            Body::KeepAlive(k) => {
                let pm = &mut self.peers.as_mut()[p];
                pm.ts_recent = k.ts;
                if h.ack_req {
                    pm.ka_reply = true;
                    pm.ack_now = true;
                    self.tx_ready = true;
                }
            }
            _ => {
                // A piggybacked acknowledgement counts exactly like an ACK packet, and
                // before the packet's own sequencing: even a duplicate or a packet
                // outside the window carries a fresh one (stale ones are harmless).
                if let Some(a) = repr.ack() {
                    self.stats.rx_acks_piggybacked += 1;
                    let pm = &mut self.peers.as_mut()[p];
                    pm.ts_recent = a.ts;
                    if matches!(repr.body, Body::Msg(_) | Body::Bundle(_)) {
                        // On a message: held until the next full transmit half, so
                        // an answer posted meanwhile leaves first. Its arrival time
                        // stays its RTT sample's.
                        pm.ack_held = Some((a, now));
                        self.acks_held += 1;
                        self.stats.rx_acks_held += 1;
                    } else {
                        self.on_ack(p, &a, now, ctx);
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
        if let Some(t) = self.peers.as_ref().get(p).and_then(|pr| pr.scan_due(now)) {
            self.arm(t);
        }
    }

    fn arm_addr(&mut self, from: &EpAddr, now: Instant) {
        if let Some(p) = self.find_peer(from) {
            self.arm_peer(p, now);
        }
    }

    // ---- sequencing --------------------------------------------------------------------

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
        let d = seq_diff(seq, self.peers.as_ref()[p].rcv_nxt);
        if d < 0 {
            // Already processed: the sender missed our ACK.
            self.stats.rx_duplicates += 1;
            self.peers.as_mut()[p].ack_now = true;
            self.tx_ready = true;
            return;
        }
        // A closing endpoint takes no new packet, except the peer's CLOSE in order
        // (it delivers nothing, and acknowledging it ends the peer's linger).
        if self.closing && !(d == 0 && matches!(repr.body, Body::Close(_))) {
            self.stats.rx_closing += 1;
            return;
        }
        if d as u32 >= self.cfg.window as u32 {
            self.stats.rx_out_of_window += 1;
            if ack_req {
                self.peers.as_mut()[p].ack_now = true;
                self.tx_ready = true;
            }
            return;
        }
        if self.reo_get(p, seq) != NO_SLOT {
            // Held already (out of order, or a refused head).
            self.stats.rx_duplicates += 1;
            self.peers.as_mut()[p].ack_now = true;
            self.tx_ready = true;
            return;
        }
        if d > 0 {
            if !self.hold(p, seq, raw) {
                self.stats.rx_reorder_full += 1;
                if ack_req {
                    self.peers.as_mut()[p].ack_now = true;
                    self.tx_ready = true;
                }
                return;
            }
            self.stats.rx_held += 1;
            let pm = &mut self.peers.as_mut()[p];
            pm.ack_now = true; // a gap appeared or grew
            self.tx_ready = true;
            return;
        }
        match self.process(p, repr, now, mem, ctx) {
            Outcome::Done => {
                self.advance(p, now, ack_req);
                if self.peers.as_ref()[p].held > 0 {
                    self.drain(p, now, mem, ctx);
                }
            }
            Outcome::Blocked => {
                self.stats.rx_refused += 1;
                if self.hold(p, seq, raw) {
                    self.peers.as_mut()[p].blocked = true;
                    self.blocked += 1;
                }
                self.peers.as_mut()[p].ack_now = true;
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
        let pm = &mut self.peers.as_mut()[p];
        pm.rcv_nxt = pm.rcv_nxt.wrapping_add(1);
        pm.since_ack += 1;
        // What the sender may have in flight beyond our last acknowledgement: our grant
        // and both windows (spec 5.4).
        let grant = pm
            .adv_credits
            .min(window)
            .min(pm.params.window.max(1) as u32);
        let exhausted = seq_diff(pm.rcv_nxt, pm.adv_cum.wrapping_add(grant)) >= 0;
        if pm.since_ack >= ack_threshold(grant) || exhausted {
            pm.ack_now = true;
            self.tx_ready = true;
        } else if hold && !pm.hold_ok {
            // The peer sends without waiting for anything of ours: answer now.
            pm.ack_now = true;
            pm.req_acked_at = Some(now);
            self.tx_ready = true;
        } else {
            let at = now + delay;
            if pm.ack_at.is_none_or(|t| at < t) {
                pm.ack_at = Some(at);
                pm.holding = hold;
            }
        }
    }

    /// Processes held packets that are now in order.
    fn drain<M: Memory>(&mut self, p: usize, now: Instant, mem: &mut M, ctx: &mut Ctx<'_, S>) {
        let mut filled = false;
        loop {
            let seq = self.peers.as_ref()[p].rcv_nxt;
            let slot = self.reo_get(p, seq);
            if slot == NO_SLOT {
                break;
            }
            let Some(pool) = self.reo_buf.take() else {
                break;
            };
            let outcome = {
                let start = slot as usize * self.max_pkt;
                let len = self.reo_len.as_ref()[slot as usize] as usize;
                match pool.as_ref().get(start..start + len).map(Repr::parse_bytes) {
                    Some(Ok(repr)) if repr.header.seq == seq => {
                        self.process(p, &repr, now, mem, ctx)
                    }
                    _ => {
                        self.stats.rx_protocol_errors += 1;
                        Outcome::Done
                    }
                }
            };
            self.reo_buf = Some(pool);
            match outcome {
                Outcome::Blocked => {
                    let pm = &mut self.peers.as_mut()[p];
                    if !pm.blocked {
                        pm.blocked = true;
                        self.blocked += 1;
                        self.stats.rx_refused += 1;
                    }
                    break;
                }
                Outcome::Done => {
                    *self.reo_mut(p, seq) = NO_SLOT;
                    self.free_reo(slot);
                    let pm = &mut self.peers.as_mut()[p];
                    pm.held = pm.held.saturating_sub(1);
                    if pm.blocked {
                        pm.blocked = false;
                        self.blocked = self.blocked.saturating_sub(1);
                    }
                    self.advance(p, now, false);
                    filled = true;
                }
            }
        }
        if filled {
            self.peers.as_mut()[p].ack_now = true;
            self.tx_ready = true;
        }
    }

    /// Keeps a copy of packet `seq` of peer `p` in the reorder pool. Each peer may hold
    /// at most its share of the pool, so one peer cannot starve the others.
    #[inline(never)]
    fn hold(&mut self, p: usize, seq: u32, raw: &[u8]) -> bool {
        let n = self.established.max(1) as usize;
        let share = (self.cfg.reorder_slots / n).max(2);
        let peer = &self.peers.as_ref()[p];
        let len = wire::Packet::new_unchecked(raw).packet_len() as usize;
        if self.reo_nfree == 0
            || peer.held as usize >= share
            || len > self.max_pkt
            || len > raw.len()
        {
            return false;
        }
        let Some(pool) = self.reo_buf.as_mut() else {
            return false;
        };
        self.reo_nfree -= 1;
        let slot = self.reo_free.as_ref()[self.reo_nfree];
        let start = slot as usize * self.max_pkt;
        pool.as_mut()[start..start + len].copy_from_slice(&raw[..len]);
        self.reo_len.as_mut()[slot as usize] = len as u16;
        *self.reo_mut(p, seq) = slot;
        self.peers.as_mut()[p].held += 1;
        true
    }

    pub(super) fn free_reo(&mut self, slot: u16) {
        if self.reo_nfree < self.reo_free.as_ref().len() {
            self.reo_free.as_mut()[self.reo_nfree] = slot;
            self.reo_nfree += 1;
        }
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
        for p in 0..self.peers_high {
            if self.peers.as_ref()[p].used && self.peers.as_ref()[p].blocked {
                self.drain(p, now, mem, ctx);
                self.arm_peer(p, now);
            }
        }
    }

    // ---- in-order processing -----------------------------------------------------------

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
                let pm = &mut self.peers.as_mut()[p];
                pm.closed_by_peer = true;
                pm.ack_now = true;
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

    // ---- RMA ---------------------------------------------------------------------------

    /// A segment of an RMA write to our memory. Every segment is checked against the
    /// registration; the last one answers the write with its status (ATOMIC_RESP) and,
    /// when it succeeded, counts it and writes its remote CQ data. Without room for that
    /// answer (or, with CQ data, a CQ slot) the last segment waits.
    #[inline(never)]
    fn rx_rma_write<M: Memory>(
        &mut self,
        p: usize,
        w: &wire::packet::RmaWriteRepr<'_>,
        mem: &mut M,
        ctx: &mut Ctx<'_, S>,
    ) -> Outcome {
        let last = w.offset + w.payload.len() as u64 >= w.total_len;
        if last && (self.resps.is_full() || (w.cq_data.is_some() && !ctx.rx_reserve())) {
            return Outcome::Blocked;
        }
        let mut st = match self.peers.as_ref()[p].wr_op {
            Some((op, st)) if op == w.op_id => st,
            _ if !remote_access(ctx.caps, Flags::RMA).contains(Flags::REMOTE_WRITE) => {
                status::UNSUPPORTED
            }
            _ => status::OK,
        };
        let mut region = None;
        if st == status::OK {
            let r = match ctx.mrs {
                Some(m) => m.write_remote(
                    mem,
                    w.key,
                    w.addr.wrapping_add(w.offset),
                    w.payload,
                    u64::from(self.local.ep_id),
                ),
                None => Err(Errno::EINVAL),
            };
            match r {
                Ok(ra) => region = Some(ra.mr),
                Err(e) => st = rma_status(e),
            }
        }
        if !last {
            self.peers.as_mut()[p].wr_op = Some((w.op_id, st));
            return Outcome::Done;
        }
        self.peers.as_mut()[p].wr_op = None;
        if st == status::OK {
            ctx.remote_event(
                ctx.cntr.remote_write,
                w.cq_data,
                w.total_len,
                crate::cq::comp::RMA_REMOTE_WRITE,
            );
            if let Some(mr) = region {
                ctx.region_event(mr, Flags::REMOTE_WRITE);
            }
        } else if w.cq_data.is_some() {
            ctx.release(false);
        }
        self.queue_resp(p, w.op_id, st, false, 0, 0, 0);
        Outcome::Done
    }

    /// A read of our memory: checked once, answered with its data (READ_RESP segments
    /// read from the region as they leave) or its failure.
    #[inline(never)]
    fn rx_read_req(
        &mut self,
        p: usize,
        r: &wire::packet::ReadReqRepr,
        ctx: &mut Ctx<'_, S>,
    ) -> Outcome {
        if self.resps.is_full() {
            return Outcome::Blocked;
        }
        let checked = match ctx.mrs {
            _ if !remote_access(ctx.caps, Flags::RMA).contains(Flags::REMOTE_READ) => {
                Err(Errno::EOPNOTSUPP)
            }
            Some(m) => m
                .check_remote(
                    r.key,
                    r.addr,
                    r.len,
                    Flags::REMOTE_READ,
                    u64::from(self.local.ep_id),
                )
                .map(|ra| ra.mr),
            None => Err(Errno::EINVAL),
        };
        let (st, len) = match checked {
            Ok(mr) => {
                ctx.remote_event(ctx.cntr.remote_read, None, r.len, Flags::empty());
                ctx.region_event(mr, Flags::REMOTE_READ);
                (status::OK, r.len)
            }
            Err(e) => (rma_status(e), 0),
        };
        self.queue_resp(p, r.op_id, st, true, r.key, r.addr, len);
        Outcome::Done
    }

    #[allow(clippy::too_many_arguments)]
    fn queue_resp(
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
            epoch: self.peers.as_ref()[p].epoch,
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
        self.peers.as_mut()[p].resp_pending += 1;
        self.tx_ready = true;
        Some(h.index())
    }

    /// The initiator's side: data (or the failure) of one of our reads.
    #[inline(never)]
    fn rx_read_resp<M: Memory>(
        &mut self,
        p: usize,
        r: &wire::packet::ReadRespRepr<'_>,
        mem: &mut M,
        ctx: &mut Ctx<'_, S>,
    ) {
        let Some((idx, op, mut rma)) = self.rma_op(p, r.op_id, true) else {
            return;
        };
        let n = r.payload.len() as u64;
        if r.status != status::OK {
            op.error.get_or_insert(rma_errno(r.status));
            rma.answered = true;
        } else if r.offset != rma.got || rma.got + n > op.len {
            // Segments come in order and exactly cover the read.
            self.stats.rx_protocol_errors += 1;
            return;
        } else {
            if n > 0
                && let Err(e) = iov_write(mem, op.context, op.iov.as_slice(), r.offset, r.payload)
            {
                op.error.get_or_insert(e);
            }
            rma.got += n;
            rma.answered = rma.got >= op.len;
        }
        op.rma = Some(rma);
        self.op_progress(idx, ctx);
    }

    /// The initiator's side: the target's answer to one of our writes or atomics (with
    /// the original values of a fetching atomic, placed into its result buffer).
    #[inline(never)]
    fn rx_write_resp<M: Memory>(
        &mut self,
        p: usize,
        a: &wire::packet::AtomicRespRepr<'_>,
        mem: &mut M,
        ctx: &mut Ctx<'_, S>,
    ) {
        let Some((idx, op, mut rma)) = self.rma_op(p, a.op_id, false) else {
            return;
        };
        let fetch = rma.atomic.filter(|m| m.fetch);
        if a.status != status::OK {
            op.error.get_or_insert(rma_errno(a.status));
        } else if let Some(m) = fetch {
            let n = m.bytes();
            let mut vals = [0u8; crate::atomic::MAX_ATOMIC_BYTES];
            match (a.payload.len() == n).then(|| vals.get_mut(..n)).flatten() {
                Some(v) => {
                    v.copy_from_slice(a.payload);
                    crate::atomic::swap_order(v, m.dt.size());
                    if let Err(e) = iov_write(mem, op.context, op.iov.as_slice(), 0, v) {
                        op.error.get_or_insert(e);
                    }
                }
                None => {
                    self.stats.rx_protocol_errors += 1;
                    return;
                }
            }
        } else if !a.payload.is_empty() {
            self.stats.rx_protocol_errors += 1;
            return;
        }
        rma.answered = true;
        op.rma = Some(rma);
        self.op_progress(idx, ctx);
    }

    /// An atomic operation on our memory: checked, applied element by element, and
    /// answered (with the original values when asked). The whole request is one packet.
    #[inline(never)]
    fn rx_atomic<M: Memory>(
        &mut self,
        p: usize,
        a: &wire::packet::AtomicReqRepr<'_>,
        mem: &mut M,
        ctx: &mut Ctx<'_, S>,
    ) -> Outcome {
        use crate::atomic::{AtomicKind, MAX_ATOMIC_BYTES, apply, swap_order, valid};
        use wire::packet::AtomicOp;
        if self.resps.is_full() || (a.cq_data.is_some() && !ctx.rx_reserve()) {
            return Outcome::Blocked;
        }
        let size = a.datatype.size();
        let n = a.count as usize * size;
        let kind = match a.op.operand_arrays() {
            2 => AtomicKind::Compare,
            _ if a.fetch => AtomicKind::Fetch,
            _ => AtomicKind::Write,
        };
        let modifies = a.op != AtomicOp::Read;
        let mut access = Flags::empty();
        if modifies {
            access |= Flags::REMOTE_WRITE;
        }
        if a.fetch {
            access |= Flags::REMOTE_READ;
        }
        let (cmp, operand) = match a.op.operand_arrays() {
            2 => a.operands.split_at(n.min(a.operands.len())),
            _ => (&[][..], a.operands),
        };
        let mut vals = [0u8; MAX_ATOMIC_BYTES];
        let mut fetched = [0u8; MAX_ATOMIC_BYTES];
        let mut region = None;
        let st = if !remote_access(ctx.caps, Flags::ATOMIC).contains(access)
            || valid(a.op, a.datatype, kind).is_err()
            || n > MAX_ATOMIC_BYTES
        {
            status::UNSUPPORTED
        } else {
            let ep = u64::from(self.local.ep_id);
            let r = match ctx.mrs {
                Some(m) => m
                    .check_remote(a.key, a.addr, n as u64, access, ep)
                    .and_then(|ra| {
                        m.for_each_segment(&ra, |at, r| mem.read(at, &mut vals[r]))?;
                        fetched[..n].copy_from_slice(&vals[..n]);
                        apply(a.op, a.datatype, &mut vals[..n], operand, cmp);
                        if modifies {
                            m.for_each_segment(&ra, |at, r| mem.write(at, &vals[r]))?;
                        }
                        Ok(ra.mr)
                    }),
                None => Err(Errno::EINVAL),
            };
            match r {
                Ok(mr) => {
                    region = Some(mr);
                    status::OK
                }
                Err(e) => rma_status(e),
            }
        };
        if let Some(mr) = region {
            let access = if modifies {
                Flags::REMOTE_WRITE
            } else {
                Flags::REMOTE_READ
            };
            ctx.region_event(mr, access);
        }
        if st == status::OK {
            let cntr = if modifies {
                ctx.cntr.remote_write
            } else {
                ctx.cntr.remote_read
            };
            let flags = crate::cq::comp::ATOMIC_REMOTE_WRITE;
            ctx.remote_event(cntr, a.cq_data, n as u64, flags);
        } else if a.cq_data.is_some() {
            ctx.release(false);
        }
        let slot = self.queue_resp(p, a.op_id, st, false, 0, 0, 0);
        if st == status::OK
            && a.fetch
            && let Some(resp) = slot.and_then(|i| self.resps.get_mut_by_index(i))
        {
            swap_order(&mut fetched[..n], size);
            resp.fetched[..n].copy_from_slice(&fetched[..n]);
            resp.fetched_len = n as u8;
        }
        Outcome::Done
    }

    /// Our unanswered RMA operation (a read when `read`) with peer `p` that `op_id`
    /// names: its slot, the operation and its RMA state. An answer naming none is
    /// counted as a protocol error.
    fn rma_op(&mut self, p: usize, op_id: u32, read: bool) -> Option<(usize, &mut TxOp, RmaOp)> {
        let found = self.op_by_id(op_id).and_then(|idx| {
            let (_, op) = self.ops.get_by_index(idx)?;
            let rma = op.rma?;
            (op.peer as usize == p && op.started && rma.read == read && !rma.answered)
                .then_some((idx, rma))
        });
        let Some((idx, rma)) = found else {
            self.stats.rx_protocol_errors += 1;
            return None;
        };
        let op = self.ops.get_mut_by_index(idx)?;
        Some((idx, op, rma))
    }

    /// Takes the posted receive `h` for a message of `total` bytes: the receive itself,
    /// or a piece carved from a multi-recv buffer (which needs a CQ slot of its own).
    fn take_posted(
        &mut self,
        tagged: bool,
        h: EntryHandle<PostedRecv>,
        total: u64,
        ctx: &mut Ctx<'_, S>,
    ) -> Take {
        let q = if tagged {
            &mut self.posted_tag
        } else {
            &mut self.posted_msg
        };
        // Only the fields a multi-receive piece needs are read: the receive itself
        // (its iov list) is copied only when it is taken whole.
        let Some((multi, context, completion)) = q.get(h).map(|n| {
            let r = n.value();
            (r.multi, r.context, r.completion)
        }) else {
            return Take::Retry;
        };
        let Some(mh) = multi else {
            let r = q.remove(h).map(|n| *n.value());
            return match r {
                Some(r) => Take::Got(Target {
                    iov: r.iov,
                    context,
                    reserved: r.reserved,
                    completion,
                    multi: None,
                }),
                None => Take::Retry,
            };
        };
        let Some(mb) = self.multis.get(mh).copied() else {
            q.remove(h);
            return Take::Retry;
        };
        let free = (mb.buf.len - mb.used) as u64;
        if total > free {
            self.release_multi(mh, ctx);
            return Take::Retry;
        }
        if !ctx.rx_reserve() {
            return Take::NoRoom;
        }
        let at = mb.buf.addr + mb.used as u64;
        let iov = IovList::one(IoVec::new(at, total as usize));
        let Some(mbm) = self.multis.get_mut(mh) else {
            return Take::Retry;
        };
        mbm.used += total as usize;
        mbm.outstanding += 1;
        let left = mbm.buf.len - mbm.used;
        if left < mbm.min_free {
            self.release_multi(mh, ctx);
        }
        Take::Got(Target {
            iov,
            context,
            reserved: true,
            completion,
            multi: Some(mh),
        })
    }

    /// Takes multi-recv buffer `mh` out of the posted queue; once nothing carved from it
    /// is still arriving, its release is reported (FI_MULTI_RECV).
    fn release_multi(&mut self, mh: Handle<MultiBuf>, ctx: &mut Ctx<'_, S>) {
        let Some(mb) = self.multis.get_mut(mh) else {
            return;
        };
        mb.released = true;
        if let Some(ph) = mb.posted.take() {
            self.posted_msg.remove(ph);
        }
        let mb = *mb;
        if mb.outstanding == 0 {
            self.multis.remove(mh);
            let e = CqEntry::new(mb.context, comp::MULTI_RECV_RELEASED)
                .with_buf(mb.buf.addr + mb.used as u64);
            ctx.rx_done(&e, None, 0, true, mb.reserved);
        }
    }

    /// Whether taking a posted receive for this message could leave us without the
    /// resources to finish it (then refuse before taking anything).
    fn can_take(&self, multi_segment: bool, ctx: &mut Ctx<'_, S>) -> bool {
        let _ = ctx;
        !(multi_segment && self.active.is_full())
    }

    fn find_posted(
        &mut self,
        tagged: bool,
        src: FiAddr,
        tag: u64,
    ) -> Option<EntryHandle<PostedRecv>> {
        if tagged {
            self.posted_tag.find(src, tag)
        } else {
            self.posted_msg.find(src, 0)
        }
    }

    /// An eager segment, in order. `src`: the message's source (matched, reported) if
    /// the caller looked it up already.
    fn rx_segment<M: Memory>(
        &mut self,
        p: usize,
        m: &MsgRepr<'_>,
        src: Option<(FiAddr, FiAddr)>,
        mem: &mut M,
        ctx: &mut Ctx<'_, S>,
    ) -> Outcome {
        // The four peer fields used below (every eager packet: no whole-peer copy).
        let peer = {
            let pr = &self.peers.as_ref()[p];
            SegView {
                asm: pr.asm,
                addr: pr.addr,
                epoch: pr.epoch,
                rx_msg_id: pr.rx_msg_id,
            }
        };
        if m.offset != 0 {
            let Some(mut asm) = peer.asm else {
                self.stats.rx_protocol_errors += 1;
                return Outcome::Done;
            };
            if m.msg_id != asm.msg_id
                || m.total_len != asm.total
                || m.offset != asm.got
                || m.tag != asm.tag
                || m.cq_data != asm.data
            {
                self.stats.rx_protocol_errors += 1;
                return Outcome::Done;
            }
            self.place_asm(&asm, m.payload, mem);
            asm.got += m.payload.len() as u32;
            if asm.got == asm.total {
                self.peers.as_mut()[p].asm = None;
                self.asm_complete(&asm, ctx);
            } else {
                self.peers.as_mut()[p].asm = Some(asm);
            }
            return Outcome::Done;
        }
        if let Some(old) = peer.asm {
            // A new message before the previous one ended: the sender broke the rules.
            self.stats.rx_protocol_errors += 1;
            self.abort_asm(&old, ctx);
            self.peers.as_mut()[p].asm = None;
        }
        if m.msg_id != peer.rx_msg_id {
            self.stats.rx_protocol_errors += 1;
        }
        let tagged = m.tag.is_some();
        let tag = m.tag.unwrap_or(0);
        let total = m.total_len as u64;
        let single = m.payload.len() as u64 == total;
        let (src, report) = src.unwrap_or_else(|| ctx.src_of(&peer.addr));
        if !self.can_take(!single, ctx) {
            return Outcome::Blocked;
        }
        let target = loop {
            let Some(h) = self.find_posted(tagged, src, tag) else {
                break None;
            };
            match self.take_posted(tagged, h, total, ctx) {
                Take::Got(t) => break Some(t),
                Take::Retry => {}
                Take::NoRoom => return Outcome::Blocked,
            }
        };
        let Some(t) = target else {
            // Unexpected: buffer the whole message (all its segments reserved now, so it
            // can always finish), or refuse it.
            let need = total.div_ceil(self.useg as u64) as usize;
            let q = if tagged { &self.ux_tag } else { &self.ux_msg };
            if q.is_full() || need > self.ux_nfree {
                return Outcome::Blocked;
            }
            let first = self.ux_alloc(need);
            self.ux_write(first, 0, m.payload);
            let msg = UxMsg {
                peer: p as u16,
                epoch: peer.epoch,
                report_src: report,
                tag,
                tagged,
                data: m.cq_data,
                total,
                kind: UxKind::Eager {
                    first,
                    got: m.payload.len() as u32,
                },
                claimed_by: 0,
            };
            let q = if tagged {
                &mut self.ux_tag
            } else {
                &mut self.ux_msg
            };
            let Ok(h) = q.insert(src, tag, msg) else {
                self.ux_free_chain(first);
                return Outcome::Blocked;
            };
            self.stats.unexpected += 1;
            let pm = &mut self.peers.as_mut()[p];
            pm.rx_msg_id = m.msg_id.wrapping_add(1);
            if !single {
                pm.asm = Some(Asm {
                    msg_id: m.msg_id,
                    total: m.total_len,
                    got: m.payload.len() as u32,
                    tag: m.tag,
                    data: m.cq_data,
                    target: AsmTarget::Unexpected(if tagged {
                        UxRef::Tagged(h)
                    } else {
                        UxRef::Untagged(h)
                    }),
                });
            }
            return Outcome::Done;
        };
        self.peers.as_mut()[p].rx_msg_id = m.msg_id.wrapping_add(1);
        let want = total.min(iov_len(&t.iov));
        let mut err = iov_write(mem, t.context, t.iov.as_slice(), 0, m.payload).err();
        if single {
            let olen = (total - want) as usize;
            self.complete_recv(
                &t,
                want,
                olen,
                tagged,
                tag,
                m.cq_data,
                report,
                err.take(),
                ctx,
            );
            return Outcome::Done;
        }
        let a = RxActive {
            peer: p as u16,
            epoch: peer.epoch,
            rndv: false,
            rts_op: 0,
            iov: t.iov,
            context: t.context,
            total,
            want,
            got: m.payload.len() as u64,
            granted: 0,
            cts_pending: false,
            cts_off: 0,
            end_pending: false,
            chain: NIL,
            chain_len: 0,
            discard: false,
            tag,
            tagged,
            data: m.cq_data,
            report_src: report,
            multi: t.multi,
            reserved: t.reserved,
            completion: t.completion,
            error: err,
        };
        match self.active.insert(a) {
            Ok(h) => {
                self.peers.as_mut()[p].asm = Some(Asm {
                    msg_id: m.msg_id,
                    total: m.total_len,
                    got: m.payload.len() as u32,
                    tag: m.tag,
                    data: m.cq_data,
                    target: AsmTarget::Active(h),
                });
            }
            Err(a) => {
                // can_take checked for room; report rather than lose the receive.
                let t = Target {
                    iov: a.iov,
                    context: a.context,
                    reserved: a.reserved,
                    completion: a.completion,
                    multi: a.multi,
                };
                self.complete_recv(
                    &t,
                    0,
                    0,
                    tagged,
                    tag,
                    a.data,
                    report,
                    Some(Errno::ENOMEM),
                    ctx,
                );
            }
        }
        Outcome::Done
    }

    /// A BUNDLE, in order: each record is a whole message, taken as a single-segment
    /// MSG / TAGGED packet would be. A refused record refuses the packet with the
    /// messages before it taken; the retry skips them by message id (spec 6.4).
    #[inline(never)]
    fn rx_bundle<M: Memory>(
        &mut self,
        p: usize,
        b: &wire::packet::BundleRepr<'_>,
        mem: &mut M,
        ctx: &mut Ctx<'_, S>,
    ) -> Outcome {
        let mut took = false;
        // One source lookup for all of them.
        let src = Some(ctx.src_of(&self.peers.as_ref()[p].addr));
        for m in b.msgs() {
            if seq_diff(m.msg_id, self.peers.as_ref()[p].rx_msg_id) < 0 {
                continue; // taken by an earlier attempt of this packet
            }
            if let Outcome::Blocked = self.rx_segment(p, &m.as_msg(), src, mem, ctx) {
                self.stats.rx_bundles += u64::from(took);
                return Outcome::Blocked;
            }
            took = true;
            self.stats.rx_bundled_msgs += 1;
        }
        self.stats.rx_bundles += u64::from(took);
        Outcome::Done
    }

    /// Places the payload of the next in-order segment of `asm`.
    fn place_asm<M: Memory>(&mut self, asm: &Asm, payload: &[u8], mem: &mut M) {
        let off = asm.got as u64;
        match asm.target {
            AsmTarget::Active(h) => {
                let Some(a) = self.active.get(h).copied() else {
                    return;
                };
                let r = if a.want > off {
                    iov_write(mem, a.context, a.iov.as_slice(), off, payload).err()
                } else {
                    None
                };
                if let Some(am) = self.active.get_mut(h) {
                    am.got += payload.len() as u64;
                    if am.error.is_none() {
                        am.error = r;
                    }
                }
            }
            AsmTarget::Unexpected(r) => {
                let Some(m) = self.ux_get(r) else { return };
                if let UxKind::Eager { first, got } = m.kind {
                    self.ux_write(first, off, payload);
                    if let Some(mm) = self.ux_get_mut(r) {
                        mm.kind = UxKind::Eager {
                            first,
                            got: got + payload.len() as u32,
                        };
                    }
                }
            }
            AsmTarget::Drop => {}
        }
    }

    /// The last segment of `asm` arrived.
    fn asm_complete(&mut self, asm: &Asm, ctx: &mut Ctx<'_, S>) {
        if let AsmTarget::Active(h) = asm.target
            && let Some(a) = self.active.get(h)
            && a.chain == NIL
        {
            self.finish_active(h, None, ctx);
        }
        // Unexpected: now complete, waits for a receive. Drop: nothing.
    }

    /// Abandons a partial message: its receive fails with -FI_EIO, or its buffered
    /// segments are freed.
    fn abort_asm(&mut self, asm: &Asm, ctx: &mut Ctx<'_, S>) {
        match asm.target {
            AsmTarget::Active(h) => self.finish_active(h, Some(Errno::EIO), ctx),
            AsmTarget::Unexpected(r) => self.drop_ux(r),
            AsmTarget::Drop => {}
        }
    }

    /// Writes the completion of a receive matched to a message.
    #[allow(clippy::too_many_arguments)]
    fn complete_recv(
        &mut self,
        t: &Target,
        len: u64,
        olen: usize,
        tagged: bool,
        tag: u64,
        data: Option<u64>,
        report: FiAddr,
        err: Option<Errno>,
        ctx: &mut Ctx<'_, S>,
    ) {
        let mut e = CqEntry::new(t.context, comp::recv(tagged, false, false))
            .with_len(len as usize)
            .with_src_addr(report)
            .with_buf(t.iov.as_slice().first().map_or(0, |v| v.addr));
        if tagged {
            e = e.with_tag(tag);
        }
        if let Some(d) = data {
            e = e.with_data(d);
        }
        let mut completion = t.completion;
        if let Some(mh) = t.multi
            && let Some(mb) = self.multis.get_mut(mh)
        {
            mb.outstanding = mb.outstanding.saturating_sub(1);
            if mb.released && mb.outstanding == 0 {
                // The last message of a released buffer reports the release.
                e.flags |= Flags::MULTI_RECV;
                completion = true;
                let res = mb.reserved;
                self.multis.remove(mh);
                if res {
                    ctx.release(false);
                }
            }
        }
        self.stats.rx_msgs += 1;
        ctx.rx_done(&e, err, olen, completion, t.reserved);
    }

    /// Finishes active receive `h`: completion (or `err`), rendezvous bookkeeping.
    pub(super) fn finish_active(
        &mut self,
        h: Handle<RxActive>,
        err: Option<Errno>,
        ctx: &mut Ctx<'_, S>,
    ) {
        let Some(a) = self.active.remove(h) else {
            return;
        };
        if a.chain != NIL {
            self.ux_free_chain(a.chain);
            self.copies_pending = self.copies_pending.saturating_sub(1);
        }
        if let Some(pm) = self.peers.as_mut().get_mut(a.peer as usize)
            && pm.epoch == a.epoch
        {
            if a.cts_pending || a.end_pending {
                pm.cts_pending = pm.cts_pending.saturating_sub(1);
            }
            if a.rndv && !a.discard && a.want > 0 {
                pm.inbound = pm.inbound.saturating_sub(1);
            }
            if let Some(asm) = pm.asm
                && asm.target == AsmTarget::Active(h)
            {
                pm.asm = Some(Asm {
                    target: AsmTarget::Drop,
                    ..asm
                });
            }
        }
        if a.discard {
            return;
        }
        let t = Target {
            iov: a.iov,
            context: a.context,
            reserved: a.reserved,
            completion: a.completion,
            multi: a.multi,
        };
        let err = err.or(a.error);
        let len = if err.is_some() {
            a.got.min(a.want)
        } else {
            a.want
        };
        let olen = (a.total - a.want) as usize;
        self.complete_recv(
            &t,
            len,
            olen,
            a.tagged,
            a.tag,
            a.data,
            a.report_src,
            err,
            ctx,
        );
    }

    // ---- rendezvous --------------------------------------------------------------------

    /// Bytes one CTS grants: a window of DATA packets.
    fn grant_size(&self) -> u64 {
        self.cfg.window as u64 * wire::packet::max_data_payload(self.max_pkt) as u64
    }

    #[inline(never)]
    fn rx_rts(&mut self, p: usize, r: &RtsRepr, ctx: &mut Ctx<'_, S>) -> Outcome {
        let peer = self.peers.as_ref()[p];
        if r.msg_id != peer.rx_msg_id {
            self.stats.rx_protocol_errors += 1;
        }
        let tagged = r.tag.is_some();
        let tag = r.tag.unwrap_or(0);
        let (src, report) = ctx.src_of(&peer.addr);
        if self.active.is_full() {
            return Outcome::Blocked;
        }
        let target = loop {
            let Some(h) = self.find_posted(tagged, src, tag) else {
                break None;
            };
            match self.take_posted(tagged, h, r.total_len, ctx) {
                Take::Got(t) => break Some(t),
                Take::Retry => {}
                Take::NoRoom => return Outcome::Blocked,
            }
        };
        let Some(t) = target else {
            let msg = UxMsg {
                peer: p as u16,
                epoch: peer.epoch,
                report_src: report,
                tag,
                tagged,
                data: r.cq_data,
                total: r.total_len,
                kind: UxKind::Rndv { rts_op: r.op_id },
                claimed_by: 0,
            };
            let q = if tagged {
                &mut self.ux_tag
            } else {
                &mut self.ux_msg
            };
            if q.insert(src, tag, msg).is_err() {
                return Outcome::Blocked;
            }
            self.stats.unexpected += 1;
            self.peers.as_mut()[p].rx_msg_id = r.msg_id.wrapping_add(1);
            return Outcome::Done;
        };
        self.peers.as_mut()[p].rx_msg_id = r.msg_id.wrapping_add(1);
        let msg = UxMsg {
            peer: p as u16,
            epoch: peer.epoch,
            report_src: report,
            tag,
            tagged,
            data: r.cq_data,
            total: r.total_len,
            kind: UxKind::Rndv { rts_op: r.op_id },
            claimed_by: 0,
        };
        self.start_rndv(&msg, &t, false, ctx);
        Outcome::Done
    }

    /// A matched rendezvous: an active receive and its first CTS (or, discarding, a
    /// CANCELED CTS).
    fn start_rndv(&mut self, m: &UxMsg, t: &Target, discard: bool, ctx: &mut Ctx<'_, S>) {
        let UxKind::Rndv { rts_op } = m.kind else {
            return;
        };
        let want = if discard {
            0
        } else {
            m.total.min(iov_len(&t.iov))
        };
        let granted = want.min(self.grant_size());
        let a = RxActive {
            peer: m.peer,
            epoch: m.epoch,
            rndv: true,
            rts_op,
            iov: t.iov,
            context: t.context,
            total: m.total,
            want,
            got: 0,
            granted,
            cts_pending: granted > 0,
            cts_off: 0,
            end_pending: want < m.total,
            chain: NIL,
            chain_len: 0,
            discard,
            tag: m.tag,
            tagged: m.tagged,
            data: m.data,
            report_src: m.report_src,
            multi: t.multi,
            reserved: t.reserved,
            completion: t.completion,
            error: None,
        };
        match self.active.insert(a) {
            Ok(_) => {
                if let Some(pm) = self.peers.as_mut().get_mut(m.peer as usize) {
                    pm.cts_pending += 1;
                    if !discard && want > 0 {
                        pm.inbound += 1;
                    }
                }
                self.tx_ready = true;
            }
            Err(_) => {
                if !discard {
                    self.complete_recv(
                        t,
                        0,
                        0,
                        m.tagged,
                        m.tag,
                        m.data,
                        m.report_src,
                        Some(Errno::ENOMEM),
                        ctx,
                    );
                }
            }
        }
    }

    /// DATA of a rendezvous we granted, in order.
    #[inline(never)]
    fn rx_data<M: Memory>(
        &mut self,
        p: usize,
        d: &DataRepr<'_>,
        mem: &mut M,
        ctx: &mut Ctx<'_, S>,
    ) {
        let epoch = self.peers.as_ref()[p].epoch;
        let Some(h) = self.active_by_id(d.rx_op_id) else {
            self.stats.rx_protocol_errors += 1;
            return;
        };
        let Some(a) = self.active.get(h).copied() else {
            return;
        };
        let len = d.payload.len() as u64;
        if a.peer as usize != p
            || a.epoch != epoch
            || !a.rndv
            || a.discard
            || d.offset != a.got
            || d.offset + len > a.granted
        {
            self.stats.rx_protocol_errors += 1;
            return;
        }
        let r = iov_write(mem, a.context, a.iov.as_slice(), d.offset, d.payload).err();
        let grant = self.grant_size();
        let Some(am) = self.active.get_mut(h) else {
            return;
        };
        am.got += len;
        if am.error.is_none() {
            am.error = r;
        }
        if am.got >= am.want {
            if !am.cts_pending && !am.end_pending {
                self.finish_active(h, None, ctx);
            }
            return;
        }
        if !am.cts_pending && am.granted < am.want && am.granted - am.got <= grant / 2 {
            let was_pending = am.end_pending;
            am.cts_off = am.granted;
            am.granted = am.want.min(am.got + grant);
            am.cts_pending = true;
            if !was_pending {
                self.peers.as_mut()[p].cts_pending += 1;
            }
            self.tx_ready = true;
        }
    }

    /// A CTS for one of our rendezvous sends, in order.
    #[inline(never)]
    fn on_cts(&mut self, p: usize, c: &CtsRepr, ctx: &mut Ctx<'_, S>) {
        let epoch = self.peers.as_ref()[p].epoch;
        let Some(idx) = self.op_by_id(c.rts_op_id) else {
            self.stats.rx_protocol_errors += 1;
            return;
        };
        let Some(op) = self.ops.get_mut_by_index(idx) else {
            return;
        };
        if op.peer as usize != p || op.epoch != epoch || !op.rndv || !op.initial_done {
            self.stats.rx_protocol_errors += 1;
            return;
        }
        let had = op.has_data_to_send();
        if c.status != status::OK {
            op.end = op.sent;
            op.granted = op.sent;
            if c.status != status::CANCELED {
                op.error.get_or_insert(Errno::EIO);
            }
        } else if c.len == 0 {
            op.end = op.end.min(c.offset.max(op.sent));
        } else {
            op.rx_op = c.rx_op_id;
            op.granted = op
                .granted
                .max(c.offset.saturating_add(c.len as u64))
                .min(op.len);
        }
        op.cts_seen = true;
        op.acked_any = true;
        let has = op.has_data_to_send();
        let pm = &mut self.peers.as_mut()[p];
        if has && !had {
            pm.rndv_ready += 1;
        } else if had && !has {
            pm.rndv_ready = pm.rndv_ready.saturating_sub(1);
        }
        self.tx_ready = true;
        self.op_progress(idx, ctx);
    }

    // ---- the unexpected segment pool ---------------------------------------------------

    /// Takes `n` slots off the free list, chained in order; NIL for `n == 0`.
    fn ux_alloc(&mut self, n: usize) -> u32 {
        let mut first = NIL;
        let mut last = NIL;
        for _ in 0..n {
            let s = self.ux_free;
            if s == NIL {
                break;
            }
            self.ux_free = self.ux_next.as_ref()[s as usize];
            self.ux_nfree -= 1;
            self.ux_next.as_mut()[s as usize] = NIL;
            if last == NIL {
                first = s;
            } else {
                self.ux_next.as_mut()[last as usize] = s;
            }
            last = s;
        }
        first
    }

    fn ux_free_chain(&mut self, mut s: u32) {
        while s != NIL {
            let next = self.ux_next.as_ref()[s as usize];
            self.ux_next.as_mut()[s as usize] = self.ux_free;
            self.ux_free = s;
            self.ux_nfree += 1;
            s = next;
        }
    }

    /// Writes `data` at message offset `off` of the chain starting at `first`.
    fn ux_write(&mut self, first: u32, off: u64, data: &[u8]) {
        let useg = self.useg as u64;
        let mut s = first;
        let mut base = 0u64;
        let mut done = 0usize;
        while s != NIL && done < data.len() {
            let end = base + useg;
            let pos = off + done as u64;
            if pos < end {
                let within = (pos - base) as usize;
                let n = (self.useg - within).min(data.len() - done);
                let start = s as usize * self.useg + within;
                self.ux_buf.as_mut()[start..start + n].copy_from_slice(&data[done..done + n]);
                done += n;
            }
            base = end;
            s = self.ux_next.as_ref()[s as usize];
        }
    }

    /// Copies the first `len` bytes of chain `first` into the buffers `iov` of the
    /// receive posted with context `ctx`.
    fn ux_copy_out<M: Memory>(
        &self,
        first: u32,
        len: u64,
        ctx: u64,
        iov: &[IoVec],
        mem: &mut M,
    ) -> Option<Errno> {
        let mut s = first;
        let mut off = 0u64;
        let mut err = None;
        while s != NIL && off < len {
            let n = (self.useg as u64).min(len - off) as usize;
            let start = s as usize * self.useg;
            if let Err(e) = iov_write(mem, ctx, iov, off, &self.ux_buf.as_ref()[start..start + n]) {
                err.get_or_insert(e);
            }
            off += n as u64;
            s = self.ux_next.as_ref()[s as usize];
        }
        err
    }

    fn ux_get(&self, r: UxRef) -> Option<UxMsg> {
        match r {
            UxRef::Untagged(h) => self.ux_msg.get(h).map(|n| *n.value()),
            UxRef::Tagged(h) => self.ux_tag.get(h).map(|n| *n.value()),
            UxRef::Claimed(h) => self.claimed.get(h).copied(),
        }
    }

    fn ux_get_mut(&mut self, r: UxRef) -> Option<&mut UxMsg> {
        match r {
            UxRef::Untagged(h) => self.ux_msg.get_mut(h).map(|n| n.value_mut()),
            UxRef::Tagged(h) => self.ux_tag.get_mut(h).map(|n| n.value_mut()),
            UxRef::Claimed(h) => self.claimed.get_mut(h),
        }
    }

    fn ux_remove(&mut self, r: UxRef) -> Option<UxMsg> {
        match r {
            UxRef::Untagged(h) => self.ux_msg.remove(h).map(|n| *n.value()),
            UxRef::Tagged(h) => self.ux_tag.remove(h).map(|n| *n.value()),
            UxRef::Claimed(h) => self.claimed.remove(h),
        }
    }

    /// Points a peer's in-progress message that was `from` at `to`.
    fn retarget_asm(&mut self, m: &UxMsg, from: UxRef, to: AsmTarget) {
        if let Some(pm) = self.peers.as_mut().get_mut(m.peer as usize)
            && pm.epoch == m.epoch
            && let Some(asm) = pm.asm.as_mut()
            && asm.target == AsmTarget::Unexpected(from)
        {
            asm.target = to;
        }
    }

    /// Drops an unexpected message (discard, or its session failed). A rendezvous being
    /// discarded on a live session gets a CANCELED CTS so its sender completes.
    pub(super) fn drop_ux(&mut self, r: UxRef) {
        let Some(m) = self.ux_remove(r) else {
            return;
        };
        self.retarget_asm(&m, r, AsmTarget::Drop);
        if let UxKind::Eager { first, .. } = m.kind {
            self.ux_free_chain(first);
        }
    }

    // ---- posting receives --------------------------------------------------------------

    /// Posts a receive: matches buffered unexpected messages first (data is copied by
    /// the next progress call), else queues it. FI_PEEK / FI_CLAIM / FI_DISCARD for
    /// tagged receives. -FI_EAGAIN when a queue is full. Inlined into its one caller
    /// (`Domain::post_any_recv`; callgrind: 2% of an engine round trip).
    #[inline(always)]
    pub(crate) fn post_recv(&mut self, req: &RecvReq, ctx: &mut Ctx<'_, S>) -> Result<()> {
        let tagged = req.tag.is_some();
        let (tag, ignore) = req.tag.unwrap_or((0, 0));
        let f = req.flags;
        if tagged && f.intersects(Flags::PEEK | Flags::CLAIM) {
            return self.peek_claim(req, ctx);
        }
        if f.contains(Flags::DISCARD) {
            return Err(Errno::EINVAL);
        }
        if self.active.is_full() {
            return Err(Errno::EAGAIN);
        }
        if f.contains(Flags::MULTI_RECV) {
            return self.post_multi(req, ctx);
        }
        let q = if tagged { &self.ux_tag } else { &self.ux_msg };
        if let Some(h) = q.find(req.src, tag, ignore) {
            let r = if tagged {
                UxRef::Tagged(h)
            } else {
                UxRef::Untagged(h)
            };
            let t = Target {
                iov: req.iov,
                context: req.context,
                reserved: req.reserved,
                completion: req.completion,
                multi: None,
            };
            self.deliver_ux(r, &t, ctx);
            return Ok(());
        }
        let recv = PostedRecv {
            iov: req.iov,
            context: req.context,
            reserved: req.reserved,
            completion: req.completion,
            multi: None,
        };
        let q = if tagged {
            &mut self.posted_tag
        } else {
            &mut self.posted_msg
        };
        q.post(req.src, tag, ignore, recv)
            .map_err(|_| Errno::EAGAIN)?;
        if self.blocked > 0 {
            self.tx_ready = true;
        }
        Ok(())
    }

    /// A multi-recv buffer: takes queued unexpected messages first, then waits in the
    /// posted queue until released.
    fn post_multi(&mut self, req: &RecvReq, ctx: &mut Ctx<'_, S>) -> Result<()> {
        let Some(buf) = req.iov.as_slice().first().copied() else {
            return Err(Errno::EINVAL);
        };
        if self.posted_msg.is_full() {
            return Err(Errno::EAGAIN);
        }
        let mb = MultiBuf {
            context: req.context,
            buf,
            used: 0,
            min_free: req.min_free,
            outstanding: 0,
            released: false,
            reserved: req.reserved,
            posted: None,
        };
        let mh = self.multis.insert(mb).map_err(|_| Errno::EAGAIN)?;
        let recv = PostedRecv {
            iov: req.iov,
            context: req.context,
            reserved: false,
            completion: req.completion,
            multi: Some(mh),
        };
        let ph = match self.posted_msg.post(req.src, 0, 0, recv) {
            Ok(h) => h,
            Err(_) => {
                self.multis.remove(mh);
                return Err(Errno::EAGAIN);
            }
        };
        if let Some(m) = self.multis.get_mut(mh) {
            m.posted = Some(ph);
        }
        // Unexpected messages waiting for it, oldest first.
        while self.multis.get(mh).is_some_and(|m| !m.released) && !self.active.is_full() {
            let Some(h) = self.ux_msg.find(req.src, 0, 0) else {
                break;
            };
            let Some(m) = self.ux_msg.get(h).map(|n| *n.value()) else {
                break;
            };
            let Take::Got(t) = self.take_posted(false, ph, m.total, ctx) else {
                break;
            };
            self.deliver_ux(UxRef::Untagged(h), &t, ctx);
        }
        Ok(())
    }

    /// Hands unexpected message `r` to a receive: a rendezvous gets its CTS, buffered
    /// segments are copied by the next progress call (and later segments go straight
    /// into the buffer).
    fn deliver_ux(&mut self, r: UxRef, t: &Target, ctx: &mut Ctx<'_, S>) {
        let Some(m) = self.ux_remove(r) else {
            return;
        };
        match m.kind {
            UxKind::Rndv { .. } => {
                self.start_rndv(&m, t, false, ctx);
            }
            UxKind::Eager { first, got } => {
                let want = m.total.min(iov_len(&t.iov));
                let a = RxActive {
                    peer: m.peer,
                    epoch: m.epoch,
                    rndv: false,
                    rts_op: 0,
                    iov: t.iov,
                    context: t.context,
                    total: m.total,
                    want,
                    got: got as u64,
                    granted: 0,
                    cts_pending: false,
                    cts_off: 0,
                    end_pending: false,
                    chain: first,
                    chain_len: got,
                    discard: false,
                    tag: m.tag,
                    tagged: m.tagged,
                    data: m.data,
                    report_src: m.report_src,
                    multi: t.multi,
                    reserved: t.reserved,
                    completion: t.completion,
                    error: None,
                };
                match self.active.insert(a) {
                    Ok(h) => {
                        if first == NIL {
                            // Nothing buffered (zero-length message).
                            if let Some(am) = self.active.get_mut(h) {
                                am.chain = NIL;
                            }
                            if m.complete() {
                                self.finish_active(h, None, ctx);
                                return;
                            }
                        } else {
                            self.copies_pending += 1;
                            self.queue_copy(h.index() as u32);
                            self.tx_ready = true;
                        }
                        self.retarget_asm(&m, r, AsmTarget::Active(h));
                    }
                    Err(_) => {
                        self.ux_free_chain(first);
                        self.retarget_asm(&m, r, AsmTarget::Drop);
                        self.complete_recv(
                            t,
                            0,
                            0,
                            m.tagged,
                            m.tag,
                            m.data,
                            m.report_src,
                            Some(Errno::ENOMEM),
                            ctx,
                        );
                    }
                }
            }
        }
    }

    /// Copies buffered unexpected data into the receives matched to it since the last
    /// progress call, and completes those whose message is whole.
    pub(crate) fn flush_copies<M: Memory>(&mut self, mem: &mut M, ctx: &mut Ctx<'_, S>) {
        if self.copies_pending == 0 {
            self.copy_len = 0; // whatever is queued was finished otherwise
            return;
        }
        // In the order the receives were matched.
        while self.copy_len > 0 {
            let idx = self.copy_q.as_ref()[self.copy_head];
            self.copy_head += 1;
            if self.copy_head == self.copy_q.as_ref().len() {
                self.copy_head = 0;
            }
            self.copy_len -= 1;
            // The slot may have been freed (and even taken again) since: its data, if
            // any is still waiting, is copied now all the same.
            if let Some((h, a)) = self.active.get_by_index(idx as usize)
                && a.chain != NIL
            {
                self.copy_into(h, mem, ctx);
            }
        }
        if core::mem::take(&mut self.copy_lost) {
            loop {
                let found = self
                    .active
                    .iter()
                    .find(|(_, a)| a.chain != NIL)
                    .map(|(h, _)| h);
                let Some(h) = found else { break };
                self.copy_into(h, mem, ctx);
            }
        }
        self.copies_pending = 0;
    }

    /// Remembers that active receive `idx` waits for its buffered data.
    fn queue_copy(&mut self, idx: u32) {
        let cap = self.copy_q.as_ref().len();
        if self.copy_len == cap {
            self.copy_lost = true;
            return;
        }
        let mut at = self.copy_head + self.copy_len;
        if at >= cap {
            at -= cap;
        }
        self.copy_q.as_mut()[at] = idx;
        self.copy_len += 1;
    }

    /// Copies the buffered data of active receive `h` into its buffer, and completes it
    /// if that was all of it.
    fn copy_into<M: Memory>(&mut self, h: Handle<RxActive>, mem: &mut M, ctx: &mut Ctx<'_, S>) {
        let Some(a) = self.active.get(h).copied() else {
            return;
        };
        let len = (a.chain_len as u64).min(a.want);
        let err = self.ux_copy_out(a.chain, len, a.context, a.iov.as_slice(), mem);
        self.ux_free_chain(a.chain);
        self.copies_pending = self.copies_pending.saturating_sub(1);
        let done = {
            let Some(am) = self.active.get_mut(h) else {
                return;
            };
            am.chain = NIL;
            if am.error.is_none() {
                am.error = err;
            }
            am.got >= am.total
        };
        if done {
            self.finish_active(h, None, ctx);
        }
    }

    /// FI_PEEK (optionally with FI_CLAIM or FI_DISCARD) and FI_CLAIM receives.
    fn peek_claim(&mut self, req: &RecvReq, ctx: &mut Ctx<'_, S>) -> Result<()> {
        let (tag, ignore) = req.tag.unwrap_or((0, 0));
        let f = req.flags;
        let peek = f.contains(Flags::PEEK);
        let claim = f.contains(Flags::CLAIM);
        let discard = f.contains(Flags::DISCARD);
        let t = Target {
            iov: req.iov,
            context: req.context,
            reserved: req.reserved,
            completion: req.completion,
            multi: None,
        };
        let entry_of = |m: &UxMsg, len: u64| {
            let mut e = CqEntry::new(req.context, comp::recv(true, false, false))
                .with_len(len as usize)
                .with_tag(m.tag)
                .with_src_addr(m.report_src);
            if let Some(d) = m.data {
                e = e.with_data(d);
            }
            e
        };
        if peek {
            let Some(h) = self.ux_tag.find(req.src, tag, ignore) else {
                let e = CqEntry::new(req.context, comp::recv(true, false, false));
                ctx.rx_done(&e, Some(Errno::ENOMSG), 0, true, req.reserved);
                return Ok(());
            };
            let Some(m) = self.ux_tag.get(h).map(|n| *n.value()) else {
                return Err(Errno::EINVAL);
            };
            if claim {
                if self.claimed.is_full() {
                    return Err(Errno::EAGAIN);
                }
                let Some(node) = self.ux_tag.remove(h) else {
                    return Err(Errno::EINVAL);
                };
                let mut cm = *node.value();
                cm.claimed_by = req.context;
                let ch = match self.claimed.insert(cm) {
                    Ok(ch) => ch,
                    Err(_) => return Err(Errno::EAGAIN),
                };
                self.retarget_asm(
                    &m,
                    UxRef::Tagged(h),
                    AsmTarget::Unexpected(UxRef::Claimed(ch)),
                );
            } else if discard {
                self.discard_ux(UxRef::Tagged(h), &t, ctx);
            }
            self.stats.rx_msgs += u64::from(discard);
            ctx.rx_done(
                &entry_of(&m, m.total),
                None,
                0,
                req.completion,
                req.reserved,
            );
            return Ok(());
        }
        // FI_CLAIM alone: the message claimed with this context.
        let Some(ch) = self
            .claimed
            .iter()
            .find(|(_, m)| m.claimed_by == req.context)
            .map(|(h, _)| h)
        else {
            return Err(Errno::ENOMSG);
        };
        let Some(m) = self.claimed.get(ch).copied() else {
            return Err(Errno::EINVAL);
        };
        if discard {
            self.discard_ux(UxRef::Claimed(ch), &t, ctx);
            self.stats.rx_msgs += 1;
            ctx.rx_done(&entry_of(&m, 0), None, 0, req.completion, req.reserved);
            return Ok(());
        }
        if self.active.is_full() {
            return Err(Errno::EAGAIN);
        }
        self.deliver_ux(UxRef::Claimed(ch), &t, ctx);
        Ok(())
    }

    /// FI_DISCARD: drops the message; a rendezvous sender is told with a CANCELED CTS.
    fn discard_ux(&mut self, r: UxRef, t: &Target, ctx: &mut Ctx<'_, S>) {
        let Some(m) = self.ux_get(r) else { return };
        match m.kind {
            UxKind::Rndv { .. } if !self.active.is_full() => {
                let _ = self.ux_remove(r);
                self.start_rndv(&m, t, true, ctx);
            }
            _ => self.drop_ux(r),
        }
    }

    /// fi_cancel of a posted receive (either queue): FI_ECANCELED error entry.
    pub(crate) fn cancel_recv(&mut self, context: u64, ctx: &mut Ctx<'_, S>) -> bool {
        for tagged in [false, true] {
            let q = if tagged {
                &mut self.posted_tag
            } else {
                &mut self.posted_msg
            };
            let Some(h) = q.find_by(|r| r.context == context) else {
                continue;
            };
            let Some(node) = q.remove(h) else {
                continue;
            };
            let r = *node.value();
            let mut reserved = r.reserved;
            if let Some(mh) = r.multi
                && let Some(mb) = self.multis.get_mut(mh)
            {
                mb.posted = None;
                mb.released = true;
                if mb.outstanding > 0 {
                    // Messages still arriving into it: the last reports the release.
                    return true;
                }
                reserved = mb.reserved;
                self.multis.remove(mh);
            }
            let mut e =
                CqErrEntry::new(context, comp::recv(tagged, false, false), Errno::ECANCELED);
            e.buf = r.iov.as_slice().first().map_or(0, |v| v.addr);
            if let Some(c) = ctx.cntr.recv.and_then(|c| ctx.cntrs.get_mut(c)) {
                c.inc_err();
            }
            if let Some(cq) = ctx.rx_cq.as_ref().and_then(|b| ctx.cqs.get_mut(b.cq)) {
                let _ = if ctx.rm && reserved {
                    cq.write_err_reserved(&e)
                } else {
                    cq.write_err(&e)
                };
            }
            return true;
        }
        false
    }
}

/// The status an RMA target answers for a failed check of a remote access.
fn rma_status(e: Errno) -> u16 {
    match e {
        Errno::EOPNOTSUPP => status::UNSUPPORTED,
        Errno::EINVAL => status::BAD_KEY,
        Errno::EACCES => status::ACCESS_DENIED,
        _ => status::OUT_OF_RANGE,
    }
}

/// The error an RMA operation completes with when its target answered `st`.
fn rma_errno(st: u16) -> Errno {
    match st {
        status::BAD_KEY | status::OUT_OF_RANGE | status::ACCESS_DENIED => Errno::EACCES,
        status::UNSUPPORTED => Errno::EOPNOTSUPP,
        status::CANCELED => Errno::ECANCELED,
        _ => Errno::EIO,
    }
}
