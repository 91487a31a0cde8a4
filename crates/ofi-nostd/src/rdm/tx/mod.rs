//! The send side: the per-peer transmitter (handshake, acks, retransmissions, new
//! packets under window and credit limits) and how packets are built. Posting, the
//! short path, the planner (with what rendezvous, RMA and atomic packets commit once
//! sent in `rndv`, `rma` and `atomic`), acknowledgements, timers and failure live in
//! the child modules, one per feature.

mod ack;
mod atomic;
mod express;
mod fail;
mod plan;
mod post;
mod rma;
mod rndv;
mod timer;

use wire::packet::{
    AckRepr, AtomicReqRepr, AtomicRespRepr, Body, CloseRepr, CtsRepr, DataRepr, Header,
    KeepAliveRepr, MsgRepr, Packet, ReadReqRepr, ReadRespRepr, Repr, RmaWriteRepr, RtsRepr,
    bundle_record_len, caps as wcaps, close, emit_bundle_header, emit_bundle_record, status,
};
use wire::seq::{seq_le, seq_lt};

use super::mac::{Seal, SealFor};
use super::*;

pub(super) use fail::Keep;
use plan::Plan;

/// Where a packet's payload comes from.
#[derive(Clone, Copy)]
pub(super) enum Payload<'a> {
    None,
    /// Message bytes `off .. off + len` of the buffers of the operation posted with
    /// context `.0`.
    Iov(u64, &'a [IoVec], u64, usize),
    /// Bytes already in hand (an inject bounce buffer).
    Bytes(&'a [u8]),
    /// `.1` bytes that `.0` reads (an RMA target's READ_RESP data, from the region).
    Fill(&'a dyn Fn(&mut [u8]) -> Result<()>, usize),
}

impl Payload<'_> {
    fn len(&self) -> usize {
        match *self {
            Payload::None => 0,
            Payload::Iov(_, _, _, n) => n,
            Payload::Bytes(b) => b.len(),
            Payload::Fill(_, n) => n,
        }
    }
}

/// Writes `head` (whose body carries an empty payload; `hl` its length) followed by `payload` into `buf`,
/// then fixes the length and checksum. Returns the packet length, or 0 if it cannot be
/// built (the link then sends nothing). A failing read of application memory is
/// reported through `fault` and the payload is sent zero-filled.
pub(super) fn write_packet(
    buf: &mut [u8],
    head: &Repr<'_>,
    hl: usize,
    payload: Payload<'_>,
    mem: &impl Memory,
    fault: &mut Option<Errno>,
) -> usize {
    let total = hl + payload.len();
    if total > buf.len() || total > u16::MAX as usize {
        return 0;
    }
    if head.emit_bytes(&mut buf[..total]).is_err() {
        return 0;
    }
    match payload {
        Payload::None => {}
        Payload::Bytes(b) => buf[hl..total].copy_from_slice(b),
        Payload::Iov(ctx, iov, off, _) => {
            if let Err(e) = iov_read(mem, ctx, iov, off, &mut buf[hl..total]) {
                buf[hl..total].fill(0);
                *fault = Some(e);
            }
        }
        Payload::Fill(f, _) => {
            if let Err(e) = f(&mut buf[hl..total]) {
                buf[hl..total].fill(0);
                *fault = Some(e);
            }
        }
    }
    let mut pkt = Packet::new_unchecked(&mut buf[..total]);
    pkt.set_packet_len(total as u16);
    pkt.fill_checksum();
    total
}

impl<S: Storage> Rdm<S> {
    /// Runs due timers and sends what every peer has ready, until the link is full.
    /// Returns the packets sent.
    pub(crate) fn transmit<P: TxPort, M: Memory>(
        &mut self,
        now: Instant,
        port: &mut P,
        mem: &M,
        ctx: &mut Ctx<'_, S>,
    ) -> usize {
        // Held acknowledgements first: timers and the scan need the windows as they are.
        self.take_held_acks(ctx);
        let ctl = !self.ctl.is_empty();
        let due = self.transmit_due(now);
        self.tx_ready = false;
        self.posted.clear();
        if !due {
            // No flag, no post and no timer due: scanning the peers would find nothing.
            return 0;
        }
        let before = self.stats.tx_packets;
        if ctl && !self.send_ctl_replies(port) {
            self.tx_ready = true;
            return 0;
        }
        // Start at a different peer each time, so a link that fills up does not
        // always starve the same peers.
        let n = self.peers.high();
        // Compares, not divisions: this runs on every pass.
        self.rr = if self.rr + 1 >= n { 0 } else { self.rr + 1 };
        for i in 0..n {
            let p = if self.rr + i >= n {
                self.rr + i - n
            } else {
                self.rr + i
            };
            if !self.peers[p].used || !self.needs_transmit(p, now) {
                continue;
            }
            self.run_timers(p, now, ctx);
            if !self.pump(p, now, port, mem, ctx) {
                // Link full: come back at once.
                self.tx_ready = true;
                break;
            }
        }
        self.next_scan = self.earliest_deadline(now);
        (self.stats.tx_packets - before) as usize
    }

    /// The earliest instant any peer's timer is due, after a scan (`now` for a peer
    /// that waits for data with no timer armed yet: the next scan arms its liveness
    /// probe); "never" when none is armed.
    fn earliest_deadline(&self, now: Instant) -> Instant {
        self.peers
            .active()
            .iter()
            .filter(|p| p.used)
            .filter_map(|p| p.scan_due(now))
            .min()
            .unwrap_or(NEVER)
    }

    /// A new packet leaves for peer `p`: if it follows soon after we acknowledged an
    /// ACK_REQ at once, holding would have saved that ACK, so hold again.
    fn replied(&mut self, p: usize, now: Instant) {
        let hold = self.cfg.ack_hold;
        let pm = &mut self.peers[p];
        if let Some(t) = pm.rx.req_acked_at
            && now <= t + hold
        {
            pm.rx.hold_ok = true;
            pm.rx.req_acked_at = None;
        }
    }

    /// Whether [`Rdm::transmit`] has anything to do at `now`: a flag, a post, a control
    /// answer, a held acknowledgement or a timer due (`next_scan`).
    pub(crate) fn transmit_due(&self, now: Instant) -> bool {
        self.tx_ready
            || !self.posted.is_empty()
            || !self.ctl.is_empty()
            || self.acks_held > 0
            || now >= self.next_scan
    }

    /// What a post runs: sends what the peers sends were posted to have ready
    /// (acknowledgements, retransmissions and new packets, in the usual order), then,
    /// only if something else is due already (a flag, a control answer, a timer), the
    /// whole [`Rdm::transmit`]; otherwise other peers and held acknowledgements wait for
    /// the next one, which `next_scan` or a flag makes run in time. The posted packets
    /// go first either way: the rest (a held acknowledgement's completions, timers,
    /// scans) is off the path of a reply. With sends posted to more than a few peers,
    /// the whole run. Returns the packets sent.
    pub(crate) fn transmit_posted<P: TxPort, M: Memory>(
        &mut self,
        now: Instant,
        port: &mut P,
        mem: &M,
        ctx: &mut Ctx<'_, S>,
    ) -> usize {
        if self.posted.overflowed() {
            return self.transmit(now, port, mem, ctx);
        }
        let n = self.posted.len();
        let rest_due = self.tx_ready || now >= self.next_scan || !self.ctl.is_empty();
        self.posted.clear();
        let before = self.stats.tx_packets;
        let mut link_full = false;
        for i in 0..n {
            let p = self.posted.get(i);
            if !self.peers.get(p).is_some_and(|pr| pr.used) {
                continue;
            }
            let more = self.pump(p, now, port, mem, ctx);
            self.arm_peer(p, now);
            if !more {
                // Link full: the next pass goes on, with everything else.
                self.tx_ready = true;
                link_full = true;
                break;
            }
        }
        let mut sent = (self.stats.tx_packets - before) as usize;
        if rest_due && !link_full {
            sent += self.transmit(now, port, mem, ctx);
        }
        sent
    }

    /// Whether `run_timers` or `pump` could do anything for peer `p` now: a timer or
    /// flag due or a liveness probe to arm
    /// ([`Peer::scan_due`](super::peer::Peer::scan_due)), data or a CTS to send, a
    /// credit update. Every pass asks it of every
    /// peer, so an endpoint with many idle sessions pays little for them.
    fn needs_transmit(&self, p: usize, now: Instant) -> bool {
        let pr = &self.peers[p];
        if pr.scan_due(now).is_some_and(|d| d <= now) {
            return true;
        }
        if pr.state != PeerState::Established {
            return false;
        }
        if pr.tx.cursor != NIL
            || pr.tx.rndv_ready > 0
            || pr.tx.cts_pending > 0
            || pr.tx.resp_pending > 0
        {
            return true;
        }
        if (pr.session.close_pending && pr.session.close_seq.is_none()) || pr.session.closed_by_peer
        {
            return true;
        }
        self.credit_update_due(p)
    }

    /// The base header of a session packet to peer `p`.
    pub(super) fn header(&self, p: usize, seq: u32, ack_req: bool) -> Header {
        let peer = &self.peers[p];
        Header {
            src_ep: self.local.ep_id,
            dst_ep: peer.addr.ep_id,
            session: peer.session.tx_session,
            seq,
            crc: self.cfg.crc || peer.session.params.caps & wcaps::CRC_RX != 0,
            ack_req,
        }
    }

    /// Largest packet to peer `p`.
    fn pkt_limit(&self, p: usize) -> usize {
        let pm = self.peers[p].session.params.max_pkt as usize;
        self.max_pkt.min(pm.max(wire::packet::MIN_MAX_PKT as usize))
    }

    /// Sends the handshake, control and data packets peer `p` has ready. `false` when
    /// the link is full.
    fn pump<P: TxPort, M: Memory>(
        &mut self,
        p: usize,
        now: Instant,
        port: &mut P,
        mem: &M,
        ctx: &mut Ctx<'_, S>,
    ) -> bool {
        if let Some(c) = self.peers[p].session.cand
            && c.send_ack
        {
            match self.send_hello_ack(p, true, now, port) {
                Sent::LinkFull => return false,
                Sent::Yes => {
                    if let Some(c) = self.peers[p].session.cand.as_mut() {
                        c.send_ack = false;
                    }
                }
                Sent::NotNow => return true,
            }
        }
        match self.peers[p].state {
            PeerState::HelloSent => {
                if now >= self.peers[p].session.hello_at {
                    port.take_unreachable(); // a mark of an earlier send is not ours
                    match self.send_hello(p, now, port) {
                        Sent::LinkFull => return false,
                        Sent::NotNow => return true,
                        Sent::Yes if port.take_unreachable() => {
                            // No way to the peer at all (off-subnet without a gateway;
                            // our own address on a raw link without loopback slots):
                            // fail now rather than after every HELLO retry.
                            self.fail_peer(p, Errno::EHOSTUNREACH, Keep::Nothing, now, ctx);
                        }
                        Sent::Yes => {
                            let cap = self.cfg.rto_max.total_micros();
                            let pm = &mut self.peers[p];
                            pm.session.hello_tries += 1;
                            pm.session.hello_at = now + Duration::from_micros(pm.session.hello_rto);
                            pm.session.hello_rto = pm.session.hello_rto.saturating_mul(2).min(cap);
                        }
                    }
                }
                true
            }
            PeerState::Established => {
                // Single-packet messages first, by the short path, while it applies;
                // when they were all there was, the planner has nothing to add.
                let mut sent_any = false;
                loop {
                    match self.express_send(p, now, port, mem) {
                        Some(Sent::Yes) => sent_any = true,
                        Some(sent) => return sent != Sent::LinkFull,
                        None => break,
                    }
                }
                let pr = &self.peers[p];
                if sent_any
                    && pr.tx.cursor == NIL
                    && !pr.rx.ack_now
                    && !pr.session.closed_by_peer
                    && pr.tx.rtx_pending == 0
                {
                    // A held acknowledgement waits for the next transmit half (the
                    // pass that received it left one owed), so the answer reaches the
                    // link before the work it releases.
                    return true;
                }
                // The planner needs the window as the peer acknowledged it.
                self.take_held_ack(p, ctx);
                let more = self.pump_session(p, now, port, mem, ctx);
                let peer = &self.peers[p];
                if peer.session.closed_by_peer && !peer.rx.owes_ack() {
                    // The peer closed and has our last acknowledgement: what it did not
                    // take it never will.
                    self.fail_peer(p, Errno::ECONNRESET, Keep::Nothing, now, ctx);
                }
                more
            }
            _ => true,
        }
    }

    fn pump_session<P: TxPort, M: Memory>(
        &mut self,
        p: usize,
        now: Instant,
        port: &mut P,
        mem: &M,
        ctx: &mut Ctx<'_, S>,
    ) -> bool {
        macro_rules! try_send {
            ($e:expr) => {
                match $e {
                    Sent::LinkFull => return false,
                    Sent::NotNow => return true,
                    Sent::Yes => {}
                }
            };
        }
        if self.peers[p].session.send_hello_ack {
            try_send!(self.send_hello_ack(p, false, now, port));
            self.peers[p].session.send_hello_ack = false;
        }
        if self.peers[p].rx.ka_reply {
            try_send!(self.send_keepalive(p, false, now, port));
            self.peers[p].rx.ka_reply = false;
        }
        if self.peers[p].tx.ka_probe {
            try_send!(self.send_keepalive(p, true, now, port));
            self.peers[p].tx.ka_probe = false;
        }
        // A credit update the peer may be waiting for.
        if self.credit_update_due(p) {
            self.peers[p].rx.ack_now = true;
        }
        // An acknowledgement due now goes on its own unless the first sequenced packet
        // about to leave can carry it (then it does, below).
        if self.peers[p].rx.ack_now && !self.next_carries_ack(p) {
            try_send!(self.send_ack(p, now, port));
        }
        // Retransmissions first: they hold up the receiver's in-order delivery.
        // From the lowest that may be queued (`Scoreboard::rtx_from`), not the window's
        // start: recovery from many holes then walks the window once, not per hole.
        if self.peers[p].tx.rtx_pending > 0 {
            let tx = &self.peers[p].tx;
            let mut s = tx.sb.rtx_start(tx.snd_una, tx.next_seq);
            while seq_lt(s, self.peers[p].tx.next_seq) && self.peers[p].tx.rtx_pending > 0 {
                let e = *self.win.get(p, s);
                if e.live && e.rtx {
                    // Where to start again if the link fills now.
                    self.peers[p].tx.sb.rtx_from = s;
                    try_send!(self.send_plan(p, Plan::Regen(s, e.regen), now, port, mem, ctx));
                }
                s = s.wrapping_add(1);
            }
            let tx = &mut self.peers[p].tx;
            // Nothing queued was found (a count that drifted): the next walk starts
            // from the window's start, as it always did.
            tx.sb.rtx_from = if tx.rtx_pending > 0 { tx.snd_una } else { s };
        }
        // New packets, within the window and the peer's credits.
        loop {
            let peer = &self.peers[p];
            let wnd = (self.cfg.window as u32).min(peer.session.params.window.max(1) as u32);
            let room = peer.tx.window_open(wnd) && seq_lt(peer.tx.next_seq, peer.tx.snd_limit);
            let Some(plan) = self.next_new(p) else {
                self.peers[p].tx.probe_at = None;
                break;
            };
            if !room {
                // Blocked by credits with nothing in flight: probe so a lost credit
                // update cannot stall the session.
                let pm = &mut self.peers[p];
                if pm.tx.in_flight() == 0 {
                    match pm.tx.probe_at {
                        None => pm.tx.probe_at = Some(now + Duration::from_micros(pm.tx.rtt.rto)),
                        Some(t) if now >= t => {
                            try_send!(self.send_keepalive(p, true, now, port));
                            let pm = &mut self.peers[p];
                            pm.tx.probe_at = Some(now + Duration::from_micros(pm.tx.rtt.rto));
                        }
                        Some(_) => {}
                    }
                }
                break;
            }
            self.peers[p].tx.probe_at = None;
            if let Regen::Seg { op, off: 0, .. } = plan
                && op == self.peers[p].tx.cursor
                && self.cfg.bundle
                && self.peers[p].session.params.caps & wcaps::BUNDLE != 0
            {
                // The cursor's next message and those queued behind it, whole: as
                // many as fit go in one BUNDLE (after a segmented message, say).
                match self.express_bundle(p, now, port, mem) {
                    Some(Sent::Yes) => continue,
                    Some(sent) => return sent != Sent::LinkFull,
                    None => {}
                }
            }
            try_send!(self.send_plan(p, Plan::New(plan), now, port, mem, ctx));
        }
        // Expected to be piggybacked, but nothing carried it after all.
        if self.peers[p].rx.ack_now {
            try_send!(self.send_ack(p, now, port));
        }
        true
    }

    fn op_gen(&self, o: u32) -> u32 {
        self.ops
            .get_by_index(o as usize)
            .map_or(0, |(h, _)| gen16(h))
    }

    /// The op a packed id names, if it is live.
    pub(super) fn op_by_id(&self, id: u32) -> Option<usize> {
        let idx = (id & 0xFFFF) as usize;
        let (h, _) = self.ops.get_by_index(idx)?;
        (gen16(h) == id >> 16).then_some(idx)
    }
}

impl TxOp {
    fn iov_slice(&self) -> &[IoVec] {
        self.iov.as_slice()
    }
}
