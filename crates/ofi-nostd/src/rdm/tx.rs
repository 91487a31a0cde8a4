//! The send side: posting, the per-peer transmitter (handshake, acks, retransmissions,
//! new packets under window and credit limits), acknowledgement processing, RTO timers,
//! completions, and session failure.

use wire::packet::{
    AckRepr, AtomicReqRepr, AtomicRespRepr, Body, CloseRepr, CtsRepr, DataRepr, Header,
    KeepAliveRepr, MsgRepr, Packet, ReadReqRepr, ReadRespRepr, Repr, RmaWriteRepr, RtsRepr,
    bundle_record_len, caps as wcaps, close, emit_bundle_header, emit_bundle_record, status,
};
use wire::seq::{seq_le, seq_lt};

use super::peer::Regen;
use super::*;

/// Most messages one BUNDLE carries.
const MAX_BUNDLE: usize = 32;

/// What a BUNDLE carries: the `n` operations from `first`, their message ids (`base +
/// i`, or their own for a retransmission), a piggybacked ACK, its length.
#[derive(Clone, Copy)]
struct BundleShape {
    first: u32,
    n: u16,
    base: Option<u32>,
    ack: Option<AckRepr>,
    total: usize,
}

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

/// What the transmitter picked to send next.
#[derive(Clone, Copy)]
enum Plan {
    Regen(u32, Regen),
    New(Regen),
}

/// What unlinking an operation needs of it.
#[derive(Clone, Copy)]
struct OpLinks {
    peer: u16,
    prev: u32,
    next: u32,
    rndv_ready: bool,
}

/// What `on_ack` reads of a peer before it changes it.
#[derive(Clone, Copy)]
struct AckView {
    next_seq: u32,
    snd_una: u32,
    last_ack_ts: u32,
}

/// What `run_timers` reads of a peer, copied out so the peer table stays borrowable.
#[derive(Clone, Copy)]
struct TimerView {
    cand: Option<super::peer::Cand>,
    state: PeerState,
    hello_at: Instant,
    hello_tries: u32,
    ack_at: Option<Instant>,
    rto_at: Option<Instant>,
    probe_at: Option<Instant>,
}

impl<S: Storage> Rdm<S> {
    // ---- posting ---------------------------------------------------------------------

    /// Queues a send to `dest`. The peer's session is set up lazily. -FI_EAGAIN when the
    /// send queue or the peer table is full.
    pub(crate) fn post_send<M: Memory>(
        &mut self,
        now: Instant,
        dest: EpAddr,
        req: &SendReq,
        mem: &M,
        ctx: &mut Ctx<'_, S>,
    ) -> Result<()> {
        if self.ops.is_full() {
            return Err(Errno::EAGAIN);
        }
        let p = self.peer_slot(&dest, now)?;
        self.peers.as_mut()[p].last_active = now;
        let injected = req.flags.contains(Flags::INJECT);
        let level = if req.rma.is_some() {
            // An RMA operation completes on the target's answer (see `op_progress`).
            Level::Delivery
        } else if req.flags.contains(Flags::DELIVERY_COMPLETE) {
            Level::Delivery
        } else if injected
            && (req.flags.contains(Flags::INJECT_COMPLETE)
                && !req.flags.contains(Flags::TRANSMIT_COMPLETE))
        {
            Level::Inject
        } else {
            Level::Transmit
        };
        // Writes go in segments whatever their size (the target places them directly);
        // reads are a request.
        let rndv = req.rma.is_none() && req.len > self.cfg.eager_threshold;
        let rma = req.rma.map(|(key, addr, read)| RmaOp {
            key,
            addr,
            read,
            got: 0,
            answered: false,
            atomic: req.atomic.map(|a| a.meta),
        });
        let op = TxOp {
            peer: p as u16,
            epoch: self.peers.as_ref()[p].epoch,
            prev: NIL,
            next: NIL,
            rndv,
            iov: req.iov,
            len: req.len as u64,
            injected,
            context: req.context,
            tag: req.tag,
            data: req.data,
            msg_id: 0,
            sent: 0,
            started: false,
            initial_done: false,
            granted: 0,
            end: req.len as u64,
            cts_seen: false,
            rx_op: 0,
            unacked: 0,
            undelivered: 0,
            level,
            completion: req.completion,
            reserved: req.reserved,
            completed: false,
            error: None,
            acked_any: false,
            rma,
        };
        let h = self.ops.insert(op).map_err(|_| Errno::EAGAIN)?;
        let idx = h.index();
        if let Some(AtomicReq {
            meta: a, compare, ..
        }) = req.atomic
        {
            // The operands travel big-endian, compare values (or mask) first.
            let start = idx * self.inject_size;
            let (n, total) = (a.bytes(), a.operand_bytes());
            let size = a.dt.size();
            let r = match self.bounce.as_mut().get_mut(start..start + total) {
                None => Err(Errno::EMSGSIZE),
                Some(b) => {
                    let (cmp, src) = b.split_at_mut(total - n.min(total));
                    let c = if cmp.is_empty() {
                        Ok(())
                    } else {
                        iov_read(mem, req.context, &[compare], 0, cmp)
                    };
                    let s = if src.is_empty() {
                        Ok(())
                    } else {
                        iov_read(mem, req.context, req.iov.as_slice(), 0, src)
                    };
                    crate::atomic::swap_order(b, size);
                    c.and(s)
                }
            };
            if let Err(e) = r {
                self.ops.remove(h);
                return Err(e);
            }
            // From here on the op's buffer is where the original values go.
            if let (Some(op), Some(at)) = (self.ops.get_mut_by_index(idx), req.atomic)
                && let Ok(result) = crate::iov::IovList::new(&[at.result], 1)
            {
                op.iov = result;
            }
        }
        if injected {
            let start = idx * self.inject_size;
            let fill = self
                .bounce
                .as_mut()
                .get_mut(start..start + req.len)
                .ok_or(Errno::EMSGSIZE);
            let r = fill.and_then(|b| iov_read(mem, req.context, req.iov.as_slice(), 0, b));
            if let Err(e) = r {
                self.ops.remove(h);
                return Err(e);
            }
        }
        // Append to the peer's FIFO.
        let peer = &mut self.peers.as_mut()[p];
        let tail = peer.op_tail;
        peer.op_tail = idx as u32;
        if tail == NIL {
            peer.op_head = idx as u32;
        }
        if peer.cursor == NIL {
            peer.cursor = idx as u32;
        }
        if let Some(o) = self.ops.get_mut_by_index(idx) {
            o.prev = tail;
        }
        if tail != NIL
            && let Some(t) = self.ops.get_mut_by_index(tail as usize)
        {
            t.next = idx as u32;
        }
        if matches!(
            self.peers.as_ref()[p].state,
            PeerState::Idle | PeerState::Failed
        ) {
            self.start_hello(p, now);
        }
        if level == Level::Inject {
            ctx.tx_done(
                req.context,
                if req.tag.is_some() {
                    TxKind::Tagged
                } else {
                    TxKind::Msg
                },
                Ok(()),
                req.completion,
                req.reserved,
            );
            if let Some(o) = self.ops.get_mut_by_index(idx) {
                o.completed = true;
            }
        }
        self.mark_posted(p);
        Ok(())
    }

    /// fi_cancel of a send that has not sent anything yet: FI_ECANCELED error entry.
    pub(crate) fn cancel_send(&mut self, context: u64, ctx: &mut Ctx<'_, S>) -> bool {
        let found = self
            .ops
            .iter()
            .find(|(_, o)| o.context == context && !o.started && !o.completed)
            .map(|(h, _)| h.index());
        let Some(idx) = found else {
            return false;
        };
        let Some((_, op)) = self.ops.get_by_index(idx) else {
            return false;
        };
        let (c, kind, reserved) = (op.context, op.kind(), op.reserved);
        if self.unlink_op(idx) {
            ctx.tx_done(c, kind, Err(Errno::ECANCELED), true, reserved);
        }
        true
    }

    /// Removes op `idx` from its peer's FIFO and the pool.
    pub(super) fn unlink_op(&mut self, idx: usize) -> bool {
        // The links only, not a copy of the whole operation (every completed send).
        let Some((_, o)) = self.ops.get_by_index(idx) else {
            return false;
        };
        let op = OpLinks {
            peer: o.peer,
            prev: o.prev,
            next: o.next,
            rndv_ready: o.has_data_to_send(),
        };
        let p = op.peer as usize;
        if op.prev != NIL
            && let Some(o) = self.ops.get_mut_by_index(op.prev as usize)
        {
            o.next = op.next;
        }
        if op.next != NIL
            && let Some(o) = self.ops.get_mut_by_index(op.next as usize)
        {
            o.prev = op.prev;
        }
        if let Some(peer) = self.peers.as_mut().get_mut(p) {
            if peer.op_head == idx as u32 {
                peer.op_head = op.next;
            }
            if peer.op_tail == idx as u32 {
                peer.op_tail = op.prev;
            }
            if peer.cursor == idx as u32 {
                peer.cursor = op.next;
            }
            if op.rndv_ready {
                peer.rndv_ready = peer.rndv_ready.saturating_sub(1);
            }
        }
        match self.ops.get_by_index(idx) {
            Some((h, _)) => self.ops.free(h),
            None => false,
        }
    }

    /// Completes op `idx` if its level is reached and frees it once nothing of it is in
    /// flight any more.
    pub(super) fn op_progress(&mut self, idx: usize, ctx: &mut Ctx<'_, S>) {
        let Some(op) = self.ops.get_mut_by_index(idx) else {
            return;
        };
        let sent = op.all_sent();
        if !op.completed {
            let done = match (op.rma, op.level) {
                (Some(r), _) => r.answered,
                (None, Level::Inject) => true,
                (None, Level::Transmit) => sent && op.unacked == 0,
                (None, Level::Delivery) => sent && op.undelivered == 0,
            };
            if done {
                op.completed = true;
                let (c, t, r, comp, res) =
                    (op.context, op.kind(), op.error, op.completion, op.reserved);
                ctx.tx_done(c, t, r.map_or(Ok(()), Err), comp, res);
                self.stats.tx_msgs += 1;
            }
        }
        let done = self
            .ops
            .get_by_index(idx)
            .is_some_and(|(_, o)| o.completed && sent && o.undelivered == 0);
        if done {
            self.unlink_op(idx);
        }
    }

    // ---- the transmitter ---------------------------------------------------------------

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
        let ctl = self.ctl_n > 0;
        let due = self.transmit_due(now);
        self.tx_ready = false;
        self.posted_n = 0;
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
        let n = self.peers_high.min(self.peers.as_ref().len());
        // Compares, not divisions: this runs on every pass.
        self.rr = if self.rr + 1 >= n { 0 } else { self.rr + 1 };
        for i in 0..n {
            let p = if self.rr + i >= n {
                self.rr + i - n
            } else {
                self.rr + i
            };
            if !self.peers.as_ref()[p].used || !self.needs_transmit(p, now) {
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
        let n = self.peers_high.min(self.peers.as_ref().len());
        self.peers.as_ref()[..n]
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
        let pm = &mut self.peers.as_mut()[p];
        if let Some(t) = pm.req_acked_at
            && now <= t + hold
        {
            pm.hold_ok = true;
            pm.req_acked_at = None;
        }
    }

    /// Whether [`Rdm::transmit`] has anything to do at `now`: a flag, a post, a control
    /// answer, a held acknowledgement or a timer due (`next_scan`).
    pub(crate) fn transmit_due(&self, now: Instant) -> bool {
        self.tx_ready
            || self.posted_n > 0
            || self.ctl_n > 0
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
        let n = self.posted_n as usize;
        if n > POSTED_PEERS {
            return self.transmit(now, port, mem, ctx);
        }
        let rest_due = self.tx_ready || now >= self.next_scan || self.ctl_n > 0;
        self.posted_n = 0;
        let before = self.stats.tx_packets;
        let mut link_full = false;
        for i in 0..n {
            let p = self.posted[i] as usize;
            if !self.peers.as_ref().get(p).is_some_and(|pr| pr.used) {
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

    /// The send path of the next queued message to peer `p` when it fits in one packet
    /// and the session has nothing else due (no handshake, control, retransmission,
    /// rendezvous or RMA packet, no close) and room in the window and credits. It
    /// sends exactly what the planner would (the same packet, ACK_REQ as
    /// `last_for_now` sets it, an owed acknowledgement carried) and records the same
    /// state, without planning. `None` when the case does not apply (then the planner
    /// runs); otherwise the send's outcome.
    fn express_send<P: TxPort, M: Memory>(
        &mut self,
        p: usize,
        now: Instant,
        port: &mut P,
        mem: &M,
    ) -> Option<Sent> {
        let pr = self.peers.as_ref().get(p)?;
        if pr.state != PeerState::Established
            || pr.cand.is_some()
            || pr.send_hello_ack
            || pr.ka_reply
            || pr.ka_probe
            || pr.rtx_pending > 0
            || pr.cts_pending > 0
            || pr.resp_pending > 0
            || pr.rndv_ready > 0
            || pr.close_pending
            || pr.closed_by_peer
            || pr.close_seq.is_some()
            || pr.cursor == NIL
        {
            return None;
        }
        let wnd = (self.cfg.window as u32).min(pr.params.window.max(1) as u32);
        if pr.in_flight() >= wnd || !seq_lt(pr.next_seq, pr.snd_limit) {
            return None; // no room in the window, or no credit: `pump` probes
        }
        let o = pr.cursor;
        let (_, op) = self.ops.get_by_index(o as usize)?;
        if op.rma.is_some() || op.rndv || op.started {
            return None;
        }
        if op.next != NIL && self.cfg.bundle && pr.params.caps & wcaps::BUNDLE != 0 {
            // More messages queued behind it: as many as fit go in one BUNDLE.
            if let Some(sent) = self.express_bundle(p, now, port, mem) {
                return Some(sent);
            }
        }
        let pr = self.peers.as_ref().get(p)?;
        let (_, op) = self.ops.get_by_index(o as usize)?;
        // ACK_REQ as `last_for_now` sets it: on the last packet we have for now, or
        // the last the window or the credits let out.
        let ack_req = op.next == NIL || self.next_fills_limit(pr);
        let limit = self.pkt_limit(p);
        let (seq, msg_id, dst) = (pr.next_seq, pr.next_msg_id, pr.addr);
        let ack = (pr.owes_ack() || self.credit_update_due(p)).then(|| self.ack_body(p, now));
        let m = MsgRepr {
            ack,
            msg_id,
            total_len: op.len as u32,
            offset: 0,
            tag: op.tag,
            cq_data: op.data,
            payload: &[],
        };
        let (len, next) = (op.len as usize, op.next);
        let total = m.header_len() + len;
        if total > limit || op.len > u64::from(u32::MAX) {
            return None;
        }
        let header = self.header(p, seq, ack_req);
        let mut fault = None;
        let payload = self.seg_payload(o, op, 0, len as u32);
        let sent = port.send(&dst, total, |buf| {
            let Some(out) = buf.get_mut(..total) else {
                return 0;
            };
            let Ok(hl) = wire::packet::emit_msg_header(out, &header, &m, len) else {
                return 0;
            };
            let body = &mut out[hl..];
            match payload {
                Payload::Bytes(b) if b.len() == body.len() => body.copy_from_slice(b),
                Payload::Iov(c, iov, off, _) => {
                    if let Err(e) = iov_read(mem, c, iov, off, body) {
                        body.fill(0);
                        fault = Some(e);
                    }
                }
                _ => return 0,
            }
            if header.crc {
                Packet::new_unchecked(&mut *out).fill_checksum();
            }
            total
        });
        if sent != Sent::Yes {
            return Some(sent);
        }
        // What `send_plan` records for a new packet.
        self.stats.tx_express += 1;
        self.packet_left(p, ack);
        *self.win_mut(p, seq) = WinEntry {
            live: true,
            seq,
            regen: Regen::Seg {
                op: o,
                off: 0,
                len: len as u32,
            },
            sent_at: now,
            retx: 0,
            sacked: false,
            rtx: false,
        };
        if let Some(op) = self.ops.get_mut_by_index(o as usize) {
            op.started = true;
            op.msg_id = msg_id;
            op.sent = len as u64;
            op.unacked += 1;
            op.undelivered += 1;
            op.initial_done = true;
            if let Some(e) = fault {
                op.error.get_or_insert(e);
            }
        }
        self.replied(p, now);
        let pm = &mut self.peers.as_mut()[p];
        pm.next_seq = seq.wrapping_add(1);
        pm.next_msg_id = msg_id.wrapping_add(1);
        pm.cursor = next;
        pm.probe_at = None;
        if pm.rto_at.is_none() {
            pm.rto_at = Some(now + Duration::from_micros(pm.rtt.rto));
        }
        Some(Sent::Yes)
    }

    /// How many queued messages from op `first` on one BUNDLE of at most `limit` bytes
    /// takes (whole single-packet messages not started yet, at most [`MAX_BUNDLE`]),
    /// and its length.
    fn bundle_plan(&self, first: u32, ack: Option<&AckRepr>, limit: usize) -> (u16, usize) {
        let mut n = 0;
        let mut len = wire::packet::bundle_header_len(ack);
        let mut o = first;
        while o != NIL && n < MAX_BUNDLE {
            let Some((_, op)) = self.ops.get_by_index(o as usize) else {
                break;
            };
            if op.rma.is_some() || op.rndv || op.started || op.len > u64::from(u16::MAX) {
                break;
            }
            let r = bundle_record_len(op.tag.is_some(), op.data.is_some(), op.len as usize);
            if len + r > limit {
                break;
            }
            len += r;
            n += 1;
            o = op.next;
        }
        (n as u16, len)
    }

    /// The length of the BUNDLE of the `n` operations from `first` (a retransmission),
    /// without a piggybacked ACK; 0 if one of them is gone.
    fn bundle_len(&self, first: u32, n: u16) -> usize {
        let mut len = wire::packet::bundle_header_len(None);
        let mut o = first;
        for _ in 0..n {
            let Some((_, op)) = self.ops.get_by_index(o as usize) else {
                return 0;
            };
            len += bundle_record_len(op.tag.is_some(), op.data.is_some(), op.len as usize);
            o = op.next;
        }
        len
    }

    /// Writes the records of the BUNDLE of the `n` operations from `first` into `out`
    /// (which starts after the packet's headers): message ids `base + i` for a first
    /// transmission, each operation's own for a retransmission. A buffer that cannot
    /// be read is sent as zeros and its error noted in `faults`. Returns the bytes
    /// written, `None` if an operation is gone or `out` is too short.
    fn write_bundle_records<M: Memory>(
        &self,
        first: u32,
        n: u16,
        base: Option<u32>,
        out: &mut [u8],
        mem: &M,
        faults: &mut [Option<Errno>; MAX_BUNDLE],
    ) -> Option<usize> {
        let mut at = 0;
        let mut o = first;
        for i in 0..n as usize {
            let (_, op) = self.ops.get_by_index(o as usize)?;
            let len = op.len as usize;
            let id = base.map_or(op.msg_id, |b| b.wrapping_add(i as u32));
            let hl = emit_bundle_record(out.get_mut(at..)?, id, op.tag, op.data, len).ok()?;
            let body = out.get_mut(at + hl..at + hl + len)?;
            match self.seg_payload(o, op, 0, len as u32) {
                Payload::Bytes(b) if b.len() == len => body.copy_from_slice(b),
                Payload::Iov(c, iov, off, _) => {
                    if let Err(e) = iov_read(mem, c, iov, off, body) {
                        body.fill(0);
                        *faults.get_mut(i)? = Some(e);
                    }
                }
                _ => return None,
            }
            at += hl + len;
            o = op.next;
        }
        Some(at)
    }

    /// Builds BUNDLE `shape` with `header` straight into the link's buffer (one
    /// function for first transmissions and retransmissions: one copy of the code).
    fn send_bundle<P: TxPort, M: Memory>(
        &self,
        dst: &EpAddr,
        header: &Header,
        shape: &BundleShape,
        port: &mut P,
        mem: &M,
        faults: &mut [Option<Errno>; MAX_BUNDLE],
    ) -> Sent {
        let BundleShape {
            first,
            n,
            base,
            ack,
            total,
        } = *shape;
        port.send(dst, total, |buf| {
            let Some(out) = buf.get_mut(..total) else {
                return 0;
            };
            let Ok(hl) = emit_bundle_header(out, header, n, ack, total) else {
                return 0;
            };
            if self.write_bundle_records(first, n, base, &mut out[hl..], mem, faults)
                != Some(total - hl)
            {
                return 0;
            }
            if header.crc {
                Packet::new_unchecked(&mut *out).fill_checksum();
            }
            total
        })
    }

    /// The short path for a burst: the messages queued for peer `p` from its cursor on
    /// that fit whole in one packet go as one BUNDLE (spec 6.4), with the state
    /// `express_send` records for each, in one window entry. `None` when fewer than
    /// two fit (the caller sends the first alone). `express_send` checked the peer.
    fn express_bundle<P: TxPort, M: Memory>(
        &mut self,
        p: usize,
        now: Instant,
        port: &mut P,
        mem: &M,
    ) -> Option<Sent> {
        let pr = self.peers.as_ref().get(p)?;
        let limit = self.pkt_limit(p);
        let owes = pr.owes_ack() || self.credit_update_due(p);
        let (first, base, seq, dst) = (pr.cursor, pr.next_msg_id, pr.next_seq, pr.addr);
        let ack = owes.then(|| self.ack_body(p, now));
        let (n, total) = self.bundle_plan(first, ack.as_ref(), limit);
        if n < 2 {
            return None;
        }
        let mut after = first;
        for _ in 0..n {
            after = self.ops.get_by_index(after as usize)?.1.next;
        }
        let ack_req = after == NIL || self.next_fills_limit(pr);
        let header = self.header(p, seq, ack_req);
        let mut faults = [None; MAX_BUNDLE];
        let shape = BundleShape {
            first,
            n,
            base: Some(base),
            ack,
            total,
        };
        let sent = self.send_bundle(&dst, &header, &shape, port, mem, &mut faults);
        if sent != Sent::Yes {
            return Some(sent);
        }
        self.stats.tx_express += 1;
        self.stats.tx_bundles += 1;
        self.stats.tx_bundled_msgs += u64::from(n);
        self.packet_left(p, ack);
        *self.win_mut(p, seq) = WinEntry {
            live: true,
            seq,
            regen: Regen::Bundle { op: first, n },
            sent_at: now,
            retx: 0,
            sacked: false,
            rtx: false,
        };
        let mut o = first;
        for (i, fault) in faults.iter().enumerate().take(n as usize) {
            let Some(op) = self.ops.get_mut_by_index(o as usize) else {
                break;
            };
            op.started = true;
            op.msg_id = base.wrapping_add(i as u32);
            op.sent = op.len;
            op.unacked += 1;
            op.undelivered += 1;
            op.initial_done = true;
            if let Some(e) = *fault {
                op.error.get_or_insert(e);
            }
            o = op.next;
        }
        self.replied(p, now);
        let pm = &mut self.peers.as_mut()[p];
        pm.next_seq = seq.wrapping_add(1);
        pm.next_msg_id = base.wrapping_add(u32::from(n));
        pm.cursor = o;
        pm.probe_at = None;
        if pm.rto_at.is_none() {
            pm.rto_at = Some(now + Duration::from_micros(pm.rtt.rto));
        }
        Some(Sent::Yes)
    }

    /// Sends BUNDLE `seq` of peer `p` again (the `n` operations from `first`, with the
    /// message ids they took), carrying an owed acknowledgement if it fits.
    #[allow(clippy::too_many_arguments)]
    fn resend_bundle<P: TxPort, M: Memory>(
        &mut self,
        p: usize,
        seq: u32,
        first: u32,
        n: u16,
        now: Instant,
        port: &mut P,
        mem: &M,
    ) -> Sent {
        let bare = self.bundle_len(first, n);
        if bare == 0 {
            return Sent::Yes; // the operations are gone: nothing to send
        }
        let limit = self.pkt_limit(p);
        let pr = &self.peers.as_ref()[p];
        let dst = pr.addr;
        let ack = pr
            .owes_ack()
            .then(|| self.ack_body(p, now))
            .filter(|a| bare + a.wire_len() <= limit);
        let total = bare + ack.map_or(0, |a| a.wire_len());
        let header = self.header(p, seq, true);
        let mut faults = [None; MAX_BUNDLE];
        let shape = BundleShape {
            first,
            n,
            base: None,
            ack,
            total,
        };
        let res = self.send_bundle(&dst, &header, &shape, port, mem, &mut faults);
        if res != Sent::Yes {
            return res;
        }
        self.packet_left(p, ack);
        let mut o = first;
        for fault in faults.iter().take(n as usize) {
            let Some(op) = self.ops.get_mut_by_index(o as usize) else {
                break;
            };
            if let Some(e) = *fault {
                op.error.get_or_insert(e);
            }
            o = op.next;
        }
        self.resent(p, seq, now);
        Sent::Yes
    }

    /// A sequenced packet to peer `p` left, carrying acknowledgement `ack` if any.
    fn packet_left(&mut self, p: usize, ack: Option<AckRepr>) {
        self.stats.tx_packets += 1;
        if let Some(a) = ack {
            self.stats.acks_piggybacked += 1;
            self.acked(p, &a);
        }
    }

    /// Packet `seq` of peer `p` was sent again: its window entry and the RTO.
    fn resent(&mut self, p: usize, seq: u32, now: Instant) {
        let e = self.win_mut(p, seq);
        e.rtx = false;
        e.retx = e.retx.saturating_add(1);
        e.sent_at = now;
        let pm = &mut self.peers.as_mut()[p];
        pm.rtx_pending = pm.rtx_pending.saturating_sub(1);
        if pm.rto_at.is_none() {
            pm.rto_at = Some(now + Duration::from_micros(pm.rtt.rto));
        }
    }

    /// A window entry was acknowledged: cumulatively (`delivered`) or selectively
    /// (`sacked`, the first time), for each of its operations.
    fn entry_acked(
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

    /// Peer `p` has a new send: remember it for [`Rdm::transmit_posted`].
    fn mark_posted(&mut self, p: usize) {
        let n = self.posted_n as usize;
        if self
            .posted
            .get(..n)
            .is_some_and(|v| v.contains(&(p as u16)))
        {
            return;
        }
        if let Some(slot) = self.posted.get_mut(n) {
            *slot = p as u16;
        }
        self.posted_n = self.posted_n.saturating_add(1);
    }

    /// Whether `run_timers` or `pump` could do anything for peer `p` now: a timer or
    /// flag due or a liveness probe to arm
    /// ([`Peer::scan_due`](super::peer::Peer::scan_due)), data or a CTS to send, a
    /// credit update. Every pass asks it of every
    /// peer, so an endpoint with many idle sessions pays little for them.
    fn needs_transmit(&self, p: usize, now: Instant) -> bool {
        let pr = &self.peers.as_ref()[p];
        if pr.scan_due(now).is_some_and(|d| d <= now) {
            return true;
        }
        if pr.state != PeerState::Established {
            return false;
        }
        if pr.cursor != NIL || pr.rndv_ready > 0 || pr.cts_pending > 0 || pr.resp_pending > 0 {
            return true;
        }
        if (pr.close_pending && pr.close_seq.is_none()) || pr.closed_by_peer {
            return true;
        }
        self.credit_update_due(p)
    }

    /// Our grant to peer `p` grew enough since we last announced it (doubled, or from
    /// nothing) that the peer may be waiting for it.
    fn credit_update_due(&self, p: usize) -> bool {
        let adv = self.peers.as_ref()[p].adv_credits;
        let credits = self.credits_for(p);
        credits > adv && (adv == 0 || credits >= adv * 2)
    }

    fn run_timers(&mut self, p: usize, now: Instant, ctx: &mut Ctx<'_, S>) {
        let cfg = self.cfg;
        // Only the fields read below: this runs for every session on every pass.
        let peer = {
            let pr = &self.peers.as_ref()[p];
            TimerView {
                cand: pr.cand,
                state: pr.state,
                hello_at: pr.hello_at,
                hello_tries: pr.hello_tries,
                ack_at: pr.ack_at,
                rto_at: pr.rto_at,
                probe_at: pr.probe_at,
            }
        };
        if let Some(c) = peer.cand
            && !c.send_ack
            && now >= c.expires
        {
            self.peers.as_mut()[p].cand = None;
        }
        match peer.state {
            PeerState::HelloSent
                if now >= peer.hello_at && peer.hello_tries >= cfg.hello_retries =>
            {
                self.fail_peer(p, Errno::EHOSTUNREACH, Keep::Nothing, now, ctx);
            }
            PeerState::Established => {
                if let Some(t) = peer.ack_at
                    && now >= t
                {
                    let pm = &mut self.peers.as_mut()[p];
                    pm.ack_now = true;
                    pm.ack_at = None;
                    if pm.holding {
                        // Nothing came to carry it: stop holding for this peer.
                        pm.hold_ok = false;
                        pm.holding = false;
                    }
                }
                if let Some(t) = peer.rto_at
                    && now >= t
                {
                    self.on_rto(p, now, ctx);
                }
                if let Some(t) = peer.probe_at
                    && now >= t
                    && self.peers.as_ref()[p].state == PeerState::Established
                {
                    let pm = &mut self.peers.as_mut()[p];
                    pm.timeouts += 1;
                    if pm.timeouts > cfg.max_retries {
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
    /// `max_retries` unanswered probes.
    fn liveness(&mut self, p: usize, now: Instant, ctx: &mut Ctx<'_, S>) {
        let cfg = self.cfg;
        {
            let pr = &mut self.peers.as_mut()[p];
            if pr.state != PeerState::Established {
                return;
            }
            let waiting = pr.inbound > 0 || pr.asm.is_some();
            if !waiting || pr.rto_at.is_some() || pr.probe_at.is_some() {
                pr.live_at = None;
                return;
            }
        }
        let peer = self.peers.as_ref()[p];
        let interval = |n: u32| {
            Duration::from_micros(
                peer.rtt
                    .rto
                    .saturating_mul(1 << n.min(16))
                    .min(cfg.rto_max.total_micros()),
            )
        };
        match peer.live_at {
            None => self.peers.as_mut()[p].live_at = Some(now + interval(peer.timeouts)),
            Some(t) if now >= t => {
                if peer.timeouts >= cfg.max_retries {
                    self.stats.fail_probe += 1;
                    self.fail_peer(p, Errno::ETIMEDOUT, Keep::Nothing, now, ctx);
                    return;
                }
                let pm = &mut self.peers.as_mut()[p];
                pm.timeouts += 1;
                pm.ka_probe = true;
                pm.live_at = Some(now + interval(pm.timeouts));
                self.tx_ready = true;
            }
            Some(_) => {}
        }
    }

    /// The retransmission timer of peer `p` expired: retransmit every unacknowledged
    /// packet older than one RTO (selectively acked ones are not resent), back off.
    fn on_rto(&mut self, p: usize, now: Instant, ctx: &mut Ctx<'_, S>) {
        self.stats.rto_expirations += 1;
        let cfg = self.cfg;
        let peer = self.peers.as_ref()[p];
        if peer.timeouts >= cfg.max_retries {
            self.stats.fail_retransmit += 1;
            self.fail_peer(p, Errno::ETIMEDOUT, Keep::Nothing, now, ctx);
            return;
        }
        let rto = Duration::from_micros(peer.rtt.rto);
        let mut s = peer.snd_una;
        let mut marked = 0u32;
        let mut first = true;
        while seq_lt(s, peer.next_seq) {
            let e = self.win_mut(p, s);
            if e.live && !e.sacked && !e.rtx && (first || e.sent_at + rto <= now) {
                e.rtx = true;
                marked += 1;
            }
            if e.live && !e.sacked {
                first = false;
            }
            s = s.wrapping_add(1);
        }
        let pm = &mut self.peers.as_mut()[p];
        pm.rtx_pending += marked;
        if pm.rtx_pending == 0 && pm.in_flight() > 0 {
            // The peer holds every packet in flight (all selectively acknowledged: a
            // receiver out of resources keeps its refused head and what follows), so
            // nothing is resent and nothing would make it answer. Probe instead: a
            // live peer answers, which keeps the session, and its answer carries the
            // acknowledgement it may have sent when it caught up and that was lost.
            pm.ka_probe = true;
        }
        pm.timeouts += 1;
        pm.rtt.backoff(&cfg);
        pm.rto_at = if pm.in_flight() > 0 {
            Some(now + Duration::from_micros(pm.rtt.rto))
        } else {
            None
        };
        self.stats.tx_timeout_retransmits += marked as u64;
        self.tx_ready = true;
    }

    /// The base header of a session packet to peer `p`.
    pub(super) fn header(&self, p: usize, seq: u32, ack_req: bool) -> Header {
        let peer = &self.peers.as_ref()[p];
        Header {
            src_ep: self.local.ep_id,
            dst_ep: peer.addr.ep_id,
            session: peer.tx_session,
            seq,
            crc: self.cfg.crc || peer.params.caps & wcaps::CRC_RX != 0,
            ack_req,
        }
    }

    /// Largest packet to peer `p`.
    fn pkt_limit(&self, p: usize) -> usize {
        let pm = self.peers.as_ref()[p].params.max_pkt as usize;
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
        if let Some(c) = self.peers.as_ref()[p].cand
            && c.send_ack
        {
            match self.send_hello_ack(p, true, now, port) {
                Sent::LinkFull => return false,
                Sent::Yes => {
                    if let Some(c) = self.peers.as_mut()[p].cand.as_mut() {
                        c.send_ack = false;
                    }
                }
                Sent::NotNow => return true,
            }
        }
        match self.peers.as_ref()[p].state {
            PeerState::HelloSent => {
                if now >= self.peers.as_ref()[p].hello_at {
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
                            let pm = &mut self.peers.as_mut()[p];
                            pm.hello_tries += 1;
                            pm.hello_at = now + Duration::from_micros(pm.hello_rto);
                            pm.hello_rto = pm.hello_rto.saturating_mul(2).min(cap);
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
                let pr = &self.peers.as_ref()[p];
                if sent_any
                    && pr.cursor == NIL
                    && !pr.ack_now
                    && !pr.closed_by_peer
                    && pr.rtx_pending == 0
                {
                    // A held acknowledgement waits for the next transmit half (the
                    // pass that received it left one owed), so the answer reaches the
                    // link before the work it releases.
                    return true;
                }
                // The planner needs the window as the peer acknowledged it.
                self.take_held_ack(p, ctx);
                let more = self.pump_session(p, now, port, mem, ctx);
                let peer = &self.peers.as_ref()[p];
                if peer.closed_by_peer && !peer.owes_ack() {
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
        if self.peers.as_ref()[p].send_hello_ack {
            try_send!(self.send_hello_ack(p, false, now, port));
            self.peers.as_mut()[p].send_hello_ack = false;
        }
        if self.peers.as_ref()[p].ka_reply {
            try_send!(self.send_keepalive(p, false, now, port));
            self.peers.as_mut()[p].ka_reply = false;
        }
        if self.peers.as_ref()[p].ka_probe {
            try_send!(self.send_keepalive(p, true, now, port));
            self.peers.as_mut()[p].ka_probe = false;
        }
        // A credit update the peer may be waiting for.
        if self.credit_update_due(p) {
            self.peers.as_mut()[p].ack_now = true;
        }
        // An acknowledgement due now goes on its own unless the first sequenced packet
        // about to leave can carry it (then it does, below).
        if self.peers.as_ref()[p].ack_now && !self.next_carries_ack(p) {
            try_send!(self.send_ack(p, now, port));
        }
        // Retransmissions first: they hold up the receiver's in-order delivery.
        if self.peers.as_ref()[p].rtx_pending > 0 {
            let peer = self.peers.as_ref()[p];
            let mut s = peer.snd_una;
            while seq_lt(s, self.peers.as_ref()[p].next_seq)
                && self.peers.as_ref()[p].rtx_pending > 0
            {
                let e = *self.win_get(p, s);
                if e.live && e.rtx {
                    try_send!(self.send_plan(p, Plan::Regen(s, e.regen), now, port, mem, ctx));
                }
                s = s.wrapping_add(1);
            }
        }
        // New packets, within the window and the peer's credits.
        loop {
            let peer = &self.peers.as_ref()[p];
            let wnd = (self.cfg.window as u32).min(peer.params.window.max(1) as u32);
            let room = peer.in_flight() < wnd && seq_lt(peer.next_seq, peer.snd_limit);
            let Some(plan) = self.next_new(p) else {
                self.peers.as_mut()[p].probe_at = None;
                break;
            };
            if !room {
                // Blocked by credits with nothing in flight: probe so a lost credit
                // update cannot stall the session.
                let pm = &mut self.peers.as_mut()[p];
                if pm.in_flight() == 0 {
                    match pm.probe_at {
                        None => pm.probe_at = Some(now + Duration::from_micros(pm.rtt.rto)),
                        Some(t) if now >= t => {
                            try_send!(self.send_keepalive(p, true, now, port));
                            let pm = &mut self.peers.as_mut()[p];
                            pm.probe_at = Some(now + Duration::from_micros(pm.rtt.rto));
                        }
                        Some(_) => {}
                    }
                }
                break;
            }
            self.peers.as_mut()[p].probe_at = None;
            if let Regen::Seg { op, off: 0, .. } = plan
                && op == self.peers.as_ref()[p].cursor
                && self.cfg.bundle
                && self.peers.as_ref()[p].params.caps & wcaps::BUNDLE != 0
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
        if self.peers.as_ref()[p].ack_now {
            try_send!(self.send_ack(p, now, port));
        }
        true
    }

    /// Whether the first sequenced packet peer `p` will send next (a retransmission,
    /// else a new packet within window and credits) has room for an ACK.
    fn next_carries_ack(&self, p: usize) -> bool {
        let peer = &self.peers.as_ref()[p];
        let next = if peer.rtx_pending > 0 {
            let mut s = peer.snd_una;
            let mut found = None;
            while seq_lt(s, peer.next_seq) {
                let e = self.win_get(p, s);
                if e.live && e.rtx {
                    found = Some(e.regen);
                    break;
                }
                s = s.wrapping_add(1);
            }
            found
        } else {
            let wnd = (self.cfg.window as u32).min(peer.params.window.max(1) as u32);
            let room = peer.in_flight() < wnd && seq_lt(peer.next_seq, peer.snd_limit);
            if room { self.next_new(p) } else { None }
        };
        next.is_some_and(|r| {
            let len = self.regen_len(&r);
            len > 0 && len + wire::packet::hdr_len::ACK <= self.pkt_limit(p)
        })
    }

    /// The length of the packet `r` builds, without a piggybacked ACK (0 if its
    /// operation is gone).
    fn regen_len(&self, r: &Regen) -> usize {
        use wire::packet::{BASE_LEN, hdr_len};
        if let Regen::Bundle { op, n } = *r {
            return self.bundle_len(op, n);
        }
        let op = r
            .op()
            .and_then(|o| self.ops.get_by_index(o as usize).map(|(_, op)| op));
        let opt = |v: Option<u64>| if v.is_some() { 8 } else { 0 };
        match (*r, op) {
            (Regen::Seg { len, .. }, Some(op)) if op.rma.is_some() => {
                BASE_LEN + hdr_len::RMA_WRITE + opt(op.data) + len as usize
            }
            (Regen::Seg { len, .. }, Some(op)) => {
                BASE_LEN + hdr_len::MSG + opt(op.tag) + opt(op.data) + len as usize
            }
            (Regen::Rts { .. }, Some(op)) if op.rma.is_some_and(|r| r.atomic.is_some()) => {
                let n = op
                    .rma
                    .and_then(|r| r.atomic)
                    .map_or(0, |a| a.operand_bytes());
                BASE_LEN + hdr_len::ATOMIC_REQ + opt(op.data) + n
            }
            (Regen::Rts { .. }, Some(op)) if op.rma.is_some() => BASE_LEN + hdr_len::READ_REQ,
            (Regen::AtomicData { slot }, _) => {
                self.resps.get_by_index(slot as usize).map_or(0, |(_, r)| {
                    BASE_LEN + hdr_len::ATOMIC_RESP + r.fetched_len as usize
                })
            }
            (Regen::Rts { .. }, Some(op)) => BASE_LEN + hdr_len::RTS + opt(op.tag) + opt(op.data),
            (Regen::Resp { read: true, .. }, _) => BASE_LEN + hdr_len::READ_RESP,
            (Regen::Resp { read: false, .. }, _) => BASE_LEN + hdr_len::ATOMIC_RESP,
            (Regen::ReadData { slot, len, .. }, _)
                if self.resps.get_by_index(slot as usize).is_some() =>
            {
                BASE_LEN + hdr_len::READ_RESP + len as usize
            }
            (Regen::Data { len, .. }, Some(_)) => BASE_LEN + hdr_len::DATA + len as usize,
            (Regen::Cts { .. }, _) => BASE_LEN + hdr_len::CTS,
            (Regen::Close, _) => BASE_LEN + hdr_len::CLOSE,
            _ => 0,
        }
    }

    /// The next new sequenced packet of peer `p`: a pending CTS, rendezvous DATA, then
    /// the next eager segment or RTS in posting order; when the endpoint is closing and
    /// none is left, its CLOSE.
    fn next_new(&self, p: usize) -> Option<Regen> {
        let peer = &self.peers.as_ref()[p];
        if peer.close_seq.is_some() {
            return None; // nothing follows our CLOSE
        }
        if peer.cts_pending > 0 {
            let found = self.active.iter().find(|(_, a)| {
                a.peer as usize == p && a.epoch == peer.epoch && (a.cts_pending || a.end_pending)
            });
            if let Some((h, a)) = found {
                let (off, len, status) = if a.discard {
                    (0, 0, status::CANCELED)
                } else if a.cts_pending {
                    (a.cts_off, (a.granted - a.cts_off) as u32, status::OK)
                } else {
                    // Truncated: tell the sender where the transfer ends.
                    (a.want, 0, status::OK)
                };
                return Some(Regen::Cts {
                    rts_op: a.rts_op,
                    rx_op: op_id(h.index(), gen16(h)),
                    off,
                    len,
                    status,
                });
            }
        }
        let max = self.pkt_limit(p);
        if peer.resp_pending > 0 {
            let found = self.resps.iter().find(|(_, r)| {
                r.peer as usize == p
                    && r.epoch == peer.epoch
                    && (r.len == 0 || r.sent < r.len)
                    && !(r.fetched_len > 0 && r.sent > 0)
            });
            if let Some((h, r)) = found {
                let slot = h.index() as u32;
                if r.fetched_len > 0 {
                    return Some(Regen::AtomicData { slot });
                }
                if r.len == 0 {
                    return Some(Regen::Resp {
                        slot,
                        op_id: r.op_id,
                        status: r.status,
                        read: r.read,
                    });
                }
                let n = (r.len - r.sent).min(wire::packet::max_read_resp_payload(max) as u64);
                return Some(Regen::ReadData {
                    slot,
                    off: r.sent,
                    len: n as u32,
                });
            }
        }
        if peer.rndv_ready > 0 {
            let mut o = peer.op_head;
            while o != NIL && o != peer.cursor {
                let op = self.ops.get_by_index(o as usize)?.1;
                if op.has_data_to_send() {
                    let lim = op.granted.min(op.end);
                    let n = (lim - op.sent).min(wire::packet::max_data_payload(max) as u64);
                    return Some(Regen::Data {
                        op: o,
                        off: op.sent,
                        len: n as u32,
                    });
                }
                o = op.next;
            }
        }
        if peer.cursor != NIL {
            let o = peer.cursor;
            let op = self.ops.get_by_index(o as usize)?.1;
            if op.request_only() {
                return Some(Regen::Rts { op: o });
            }
            let seg = if op.rma.is_some() {
                wire::packet::max_rma_write_payload(max, op.data.is_some())
            } else {
                wire::packet::max_msg_payload(max, op.tag.is_some(), op.data.is_some())
            };
            let n = (op.len - op.sent).min(seg as u64);
            return Some(Regen::Seg {
                op: o,
                off: op.sent,
                len: n as u32,
            });
        }
        // Closing: the CLOSE goes last, after every send queued before fi_close.
        peer.close_pending.then_some(Regen::Close)
    }

    /// Whether the next new packet to `peer` is the last its window or its credits let
    /// out (then it asks for an immediate ACK, whatever else is queued).
    fn next_fills_limit(&self, peer: &Peer) -> bool {
        let wnd = (self.cfg.window as u32).min(peer.params.window.max(1) as u32);
        peer.in_flight() + 1 >= wnd || peer.next_seq.wrapping_add(1) == peer.snd_limit
    }

    /// Whether, after `r`, peer `p` would have nothing more to send right away (then
    /// the packet asks for an immediate ACK).
    fn last_for_now(&self, p: usize, r: &Regen) -> bool {
        let peer = &self.peers.as_ref()[p];
        if self.next_fills_limit(peer) {
            return true;
        }
        let more_ops = |o: u32| {
            self.ops
                .get_by_index(o as usize)
                .is_some_and(|(_, op)| op.next != NIL)
        };
        match *r {
            Regen::Seg { op, off, len } => {
                let rest = self
                    .ops
                    .get_by_index(op as usize)
                    .is_some_and(|(_, o)| off + (len as u64) < o.len);
                !rest && !more_ops(op) && peer.rndv_ready == 0 && peer.cts_pending == 0
            }
            Regen::Rts { op } => !more_ops(op) && peer.rndv_ready == 0 && peer.cts_pending == 0,
            Regen::Data { op, off, len } => {
                let rest = self
                    .ops
                    .get_by_index(op as usize)
                    .is_some_and(|(_, o)| off + (len as u64) < o.granted.min(o.end));
                !rest && peer.rndv_ready <= 1 && peer.cursor == NIL && peer.cts_pending == 0
            }
            Regen::Cts { .. } => {
                peer.cts_pending <= 1 && peer.cursor == NIL && peer.rndv_ready == 0
            }
            Regen::Close => true,
            Regen::Bundle { op, n } => {
                let mut o = op;
                for _ in 0..n {
                    o = self
                        .ops
                        .get_by_index(o as usize)
                        .map_or(NIL, |(_, op)| op.next);
                }
                o == NIL && peer.rndv_ready == 0 && peer.cts_pending == 0
            }
            Regen::Resp { .. } | Regen::AtomicData { .. } => {
                peer.resp_pending <= 1 && peer.cursor == NIL && peer.rndv_ready == 0
            }
            Regen::ReadData { slot, off, len } => {
                let rest = self
                    .resps
                    .get_by_index(slot as usize)
                    .is_some_and(|(_, r)| off + (len as u64) < r.len);
                !rest && peer.resp_pending <= 1 && peer.cursor == NIL && peer.rndv_ready == 0
            }
        }
    }

    /// Builds and sends one sequenced packet; on success records it in the window (new)
    /// or marks it retransmitted.
    fn send_plan<P: TxPort, M: Memory>(
        &mut self,
        p: usize,
        plan: Plan,
        now: Instant,
        port: &mut P,
        mem: &M,
        ctx: &mut Ctx<'_, S>,
    ) -> Sent {
        let (seq, mut regen, retrans) = match plan {
            Plan::Regen(s, r) => (s, r, true),
            Plan::New(r) => (self.peers.as_ref()[p].next_seq, r, false),
        };
        if let Regen::Bundle { op, n } = regen {
            // Only `express_bundle` makes bundles; the planner only resends them.
            return if retrans {
                self.resend_bundle(p, seq, op, n, now, port, mem)
            } else {
                Sent::Yes
            };
        }
        // READ_RESP data: its region checked once here, then read through that check
        // as the packet is built. A region that can no longer be read (deregistered
        // while the read was answered) makes it a failure instead, never zeros; a
        // retransmission too (the initiator takes whichever arrives: a duplicate of a
        // sequence number is dropped whatever it carries).
        let mut rd = None;
        if let Regen::ReadData { slot, off, len } = regen {
            let Some(r) = self.resps.get_mut_by_index(slot as usize) else {
                return Sent::Yes; // answered already or the session failed
            };
            let ep = u64::from(self.local.ep_id);
            let at = r.addr.wrapping_add(off);
            let checked = ctx.mrs.and_then(|m| {
                m.check_remote(r.key, at, u64::from(len), Flags::REMOTE_READ, ep)
                    .ok()
            });
            if let Some(ra) = checked {
                rd = Some((ra, r.op_id));
            } else {
                let op_id = r.op_id;
                let pending = r.sent < r.len;
                r.sent = r.len; // nothing more of it leaves
                let idle = r.unacked == 0;
                if retrans && pending {
                    let pm = &mut self.peers.as_mut()[p];
                    pm.resp_pending = pm.resp_pending.saturating_sub(1);
                }
                if !retrans
                    && idle
                    && let Some((h, _)) = self.resps.get_by_index(slot as usize)
                {
                    self.resps.remove(h);
                }
                // A new packet commits as this answer (`resp_pending` drops with it);
                // a retransmission's window entry keeps naming the data slot.
                regen = Regen::Resp {
                    slot: NIL,
                    op_id,
                    status: status::ACCESS_DENIED,
                    read: true,
                };
            }
        }
        // A new message takes its id when its first packet leaves (no gaps on cancel).
        let mut msg_id = 0;
        if let Some(o) = regen.op()
            && let Some((started, id)) = self
                .ops
                .get_by_index(o as usize)
                .map(|(_, op)| (op.started, op.msg_id))
        {
            msg_id = if started {
                id
            } else {
                self.peers.as_ref()[p].next_msg_id
            };
        } else if regen.op().is_some() {
            return Sent::Yes; // the op vanished: nothing to send
        }
        if let Regen::AtomicData { slot } = regen
            && self.resps.get_by_index(slot as usize).is_none()
        {
            return Sent::Yes;
        }
        let mrs = ctx.mrs;
        let fill = |out: &mut [u8]| -> Result<()> {
            let (Some(m), Some((ra, _))) = (mrs, rd) else {
                return Err(Errno::EFAULT);
            };
            m.for_each_segment(&ra, |a, range| mem.read(a, &mut out[range]))
        };
        let ack_req = retrans || self.last_for_now(p, &regen);
        let header = self.header(p, seq, ack_req);
        let dst = self.peers.as_ref()[p].addr;
        let mut fault = None;
        // An acknowledgement the peer is owed rides along if it fits (generated now,
        // also on a retransmission: never a replayed one).
        // A CLOSE always carries one: it is the closing side's final word on what it
        // took, and the peer fails whatever it does not cover.
        let ack = (self.peers.as_ref()[p].owes_ack() || matches!(regen, Regen::Close))
            .then(|| self.ack_body(p, now));
        if !retrans {
            self.replied(p, now);
        }
        let limit = self.pkt_limit(p);
        let mut carried = None;
        let res = {
            let this = &*self;
            let op = regen
                .op()
                .and_then(|o| this.ops.get_by_index(o as usize).map(|(_, op)| (o, op)));
            let (body, payload): (Body<'_>, Payload<'_>) = match (regen, op) {
                // Messages first: the common case.
                (Regen::Seg { off, len, .. }, Some((o, op))) if op.rma.is_none() => {
                    let pl = this.seg_payload(o, op, off, len);
                    (
                        Body::Msg(MsgRepr {
                            ack: None,
                            msg_id,
                            total_len: op.len as u32,
                            offset: off as u32,
                            tag: op.tag,
                            cq_data: op.data,
                            payload: &[],
                        }),
                        pl,
                    )
                }
                (Regen::Seg { off, len, .. }, Some((o, op))) => {
                    let r = op.rma.unwrap_or(RmaOp {
                        key: 0,
                        addr: 0,
                        read: false,
                        got: 0,
                        answered: false,
                        atomic: None,
                    });
                    let pl = this.seg_payload(o, op, off, len);
                    (
                        Body::RmaWrite(RmaWriteRepr {
                            key: r.key,
                            addr: r.addr,
                            op_id: op_id(o as usize, this.op_gen(o)),
                            total_len: op.len,
                            offset: off,
                            cq_data: op.data,
                            payload: &[],
                            ack: None,
                        }),
                        pl,
                    )
                }
                (Regen::Rts { op: o }, Some((_, op)))
                    if op.rma.is_some_and(|r| r.atomic.is_some()) =>
                {
                    let (key, addr, a) = match op.rma {
                        Some(RmaOp {
                            key,
                            addr,
                            atomic: Some(a),
                            ..
                        }) => (key, addr, a),
                        _ => return Sent::Yes,
                    };
                    (
                        Body::AtomicReq(AtomicReqRepr {
                            key,
                            addr,
                            op_id: op_id(o as usize, this.op_gen(o)),
                            op: a.op,
                            datatype: a.dt,
                            count: a.count,
                            fetch: a.fetch,
                            cq_data: op.data,
                            operands: this
                                .bounce_of(o as usize, a.operand_bytes())
                                .get(..a.operand_bytes())
                                .unwrap_or(&[]),
                            ack: None,
                        }),
                        Payload::None,
                    )
                }
                (Regen::AtomicData { slot }, _) => {
                    let Some((_, r)) = this.resps.get_by_index(slot as usize) else {
                        return Sent::Yes;
                    };
                    (
                        Body::AtomicResp(AtomicRespRepr {
                            op_id: r.op_id,
                            status: status::OK,
                            payload: r.fetched.get(..r.fetched_len as usize).unwrap_or(&[]),
                            ack: None,
                        }),
                        Payload::None,
                    )
                }
                (Regen::Rts { op: o }, Some((_, op))) if op.rma.is_some() => {
                    let (key, addr) = op.rma.map_or((0, 0), |r| (r.key, r.addr));
                    (
                        Body::ReadReq(ReadReqRepr {
                            key,
                            addr,
                            len: op.len,
                            op_id: op_id(o as usize, this.op_gen(o)),
                            ack: None,
                        }),
                        Payload::None,
                    )
                }
                (
                    Regen::Resp {
                        op_id,
                        status,
                        read,
                        ..
                    },
                    _,
                ) => (
                    if read {
                        Body::ReadResp(ReadRespRepr {
                            op_id,
                            status,
                            offset: 0,
                            payload: &[],
                            ack: None,
                        })
                    } else {
                        Body::AtomicResp(AtomicRespRepr {
                            op_id,
                            status,
                            payload: &[],
                            ack: None,
                        })
                    },
                    Payload::None,
                ),
                (Regen::ReadData { off, len, .. }, _) => (
                    Body::ReadResp(ReadRespRepr {
                        op_id: rd.map_or(0, |(_, id)| id),
                        status: status::OK,
                        offset: off,
                        payload: &[],
                        ack: None,
                    }),
                    Payload::Fill(&fill, len as usize),
                ),
                (Regen::Rts { op: o }, Some((_, op))) => (
                    Body::Rts(RtsRepr {
                        ack: None,
                        op_id: op_id(o as usize, this.op_gen(o)),
                        msg_id,
                        total_len: op.len,
                        tag: op.tag,
                        cq_data: op.data,
                    }),
                    Payload::None,
                ),
                (Regen::Data { off, len, .. }, Some((_, op))) => (
                    Body::Data(DataRepr {
                        ack: None,
                        rx_op_id: op.rx_op,
                        offset: off,
                        payload: &[],
                    }),
                    Payload::Iov(op.context, op.iov_slice(), off, len as usize),
                ),
                (
                    Regen::Cts {
                        rts_op,
                        rx_op,
                        off,
                        len,
                        status,
                    },
                    _,
                ) => (
                    Body::Cts(CtsRepr {
                        ack: None,
                        rts_op_id: rts_op,
                        rx_op_id: rx_op,
                        offset: off,
                        len,
                        status,
                    }),
                    Payload::None,
                ),
                (Regen::Close, _) => (
                    Body::Close(CloseRepr {
                        reason: close::NORMAL,
                        ack: None,
                    }),
                    Payload::None,
                ),
                _ => return Sent::Yes,
            };
            let mut head = Repr { header, body };
            // The header's length, measured once: a carried ack adds exactly its field.
            let mut hl = head.buffer_len();
            if let Some(a) = ack
                && hl + payload.len() + a.wire_len() <= limit
                && head.body.set_ack(Some(a)).is_ok()
            {
                carried = Some(a);
                hl += a.wire_len();
            }
            debug_assert_eq!(hl, head.buffer_len());
            let total = hl + payload.len();
            port.send(&dst, total, |buf| {
                write_packet(buf, &head, hl, payload, mem, &mut fault)
            })
        };
        if res != Sent::Yes {
            return res;
        }
        self.packet_left(p, carried);
        if let (Some(e), Some(o)) = (fault, regen.op())
            && let Some(op) = self.ops.get_mut_by_index(o as usize)
        {
            op.error.get_or_insert(e);
        }
        if retrans {
            self.resent(p, seq, now);
            return Sent::Yes;
        }
        // Commit a new packet.
        *self.win_mut(p, seq) = WinEntry {
            live: true,
            seq,
            regen,
            sent_at: now,
            retx: 0,
            sacked: false,
            rtx: false,
        };
        {
            let pm = &mut self.peers.as_mut()[p];
            pm.next_seq = seq.wrapping_add(1);
            if pm.rto_at.is_none() {
                pm.rto_at = Some(now + Duration::from_micros(pm.rtt.rto));
            }
        }
        match regen {
            Regen::Bundle { .. } => {} // resent by `resend_bundle`, never planned
            Regen::Close => {
                self.peers.as_mut()[p].close_seq = Some(seq);
                self.stats.closes_sent += 1;
            }
            Regen::Resp { slot, .. } => {
                // Everything a retransmission needs is in the window entry.
                if let Some((h, _)) = self.resps.get_by_index(slot as usize) {
                    self.resps.remove(h);
                }
                let pm = &mut self.peers.as_mut()[p];
                pm.resp_pending = pm.resp_pending.saturating_sub(1);
            }
            Regen::AtomicData { slot } => {
                if let Some(r) = self.resps.get_mut_by_index(slot as usize) {
                    r.sent = 1;
                    r.unacked += 1;
                }
                let pm = &mut self.peers.as_mut()[p];
                pm.resp_pending = pm.resp_pending.saturating_sub(1);
            }
            Regen::ReadData { slot, len, .. } => {
                let mut finished = false;
                if let Some(r) = self.resps.get_mut_by_index(slot as usize) {
                    r.sent += len as u64;
                    r.unacked += 1;
                    finished = r.sent >= r.len;
                }
                if finished {
                    let pm = &mut self.peers.as_mut()[p];
                    pm.resp_pending = pm.resp_pending.saturating_sub(1);
                }
            }
            Regen::Cts { rx_op, len, .. } => {
                let mut finished = None;
                let mut none_left = true;
                if let Some(h) = self.active_by_id(rx_op)
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
                    let pm = &mut self.peers.as_mut()[p];
                    pm.cts_pending = pm.cts_pending.saturating_sub(1);
                }
                if let Some(h) = finished {
                    self.finish_active(h, None, ctx);
                }
            }
            Regen::Seg { op: o, len, .. } | Regen::Data { op: o, len, .. } => {
                let is_data = matches!(regen, Regen::Data { .. });
                let mut first = false;
                let mut done_initial = false;
                let mut data_exhausted = false;
                let mut message = false;
                if let Some(op) = self.ops.get_mut_by_index(o as usize) {
                    message = op.rma.is_none();
                    if !op.started {
                        op.started = true;
                        op.msg_id = msg_id;
                        first = true;
                    }
                    let had = op.has_data_to_send();
                    op.sent += len as u64;
                    op.unacked += 1;
                    op.undelivered += 1;
                    if !is_data && op.sent >= op.len {
                        op.initial_done = true;
                        done_initial = true;
                    }
                    data_exhausted = is_data && had && !op.has_data_to_send();
                }
                let pm = &mut self.peers.as_mut()[p];
                if first && message {
                    pm.next_msg_id = pm.next_msg_id.wrapping_add(1);
                }
                if done_initial {
                    pm.cursor = self
                        .ops
                        .get_by_index(o as usize)
                        .map_or(NIL, |(_, op)| op.next);
                }
                if data_exhausted {
                    pm.rndv_ready = pm.rndv_ready.saturating_sub(1);
                }
            }
            Regen::Rts { op: o } => {
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
                let pm = &mut self.peers.as_mut()[p];
                if message {
                    pm.next_msg_id = pm.next_msg_id.wrapping_add(1);
                }
                pm.cursor = next;
            }
        }
        Sent::Yes
    }

    /// Where segment `off .. off + len` of op `o` comes from: its inject copy, or the
    /// application's buffers.
    #[inline]
    fn seg_payload<'a>(&'a self, o: u32, op: &'a TxOp, off: u64, len: u32) -> Payload<'a> {
        if op.injected {
            Payload::Bytes(
                self.bounce_of(o as usize, op.len as usize)
                    .get(off as usize..off as usize + len as usize)
                    .unwrap_or(&[]),
            )
        } else {
            Payload::Iov(op.context, op.iov_slice(), off, len as usize)
        }
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

    /// The active receive a packed id names, if it is live.
    pub(super) fn active_by_id(&self, id: u32) -> Option<crate::pool::Handle<RxActive>> {
        let idx = (id & 0xFFFF) as usize;
        let (h, _) = self.active.get_by_index(idx)?;
        (gen16(h) == id >> 16).then_some(h)
    }

    // ---- control packets ---------------------------------------------------------------

    /// The acknowledgement peer `p` is owed right now (spec 5.2), fresh: for an ACK
    /// packet or to piggyback on a sequenced one.
    fn ack_body(&self, p: usize, now: Instant) -> AckRepr {
        let credits = self.credits_for(p);
        let peer = &self.peers.as_ref()[p];
        let w = self.cfg.window as u32;
        let mut sack = 0u64;
        if peer.held > 0 {
            for i in 0..64u32.min(w.saturating_sub(1)) {
                let s = peer.rcv_nxt.wrapping_add(1 + i);
                if self.reo_get(p, s) != NO_SLOT {
                    sack |= 1 << i;
                }
            }
        }
        AckRepr {
            cum_ack: peer.rcv_nxt,
            credits,
            sack,
            ts: ts32(now),
            echo_ts: peer.ts_recent,
            short: sack == 0 && self.cfg.short_ack && peer.params.caps & wcaps::SHORT_ACK != 0,
        }
    }

    /// Acknowledgement `a` left for peer `p` (standalone or piggybacked).
    fn acked(&mut self, p: usize, a: &AckRepr) {
        let pm = &mut self.peers.as_mut()[p];
        pm.ack_now = false;
        pm.ack_at = None;
        pm.holding = false;
        pm.since_ack = 0;
        pm.adv_credits = a.credits;
        pm.adv_cum = a.cum_ack;
    }

    fn send_ack<P: TxPort>(&mut self, p: usize, now: Instant, port: &mut P) -> Sent {
        let ack = self.ack_body(p, now);
        let peer = self.peers.as_ref()[p];
        let head = Repr {
            header: self.header(p, peer.next_seq, false),
            body: Body::Ack(ack),
        };
        let r = self.send_ctl(&peer.addr, &head, port);
        if r == Sent::Yes {
            self.stats.acks_sent += 1;
            self.acked(p, &ack);
        }
        r
    }

    pub(super) fn send_keepalive<P: TxPort>(
        &mut self,
        p: usize,
        probe: bool,
        now: Instant,
        port: &mut P,
    ) -> Sent {
        let peer = self.peers.as_ref()[p];
        let head = Repr {
            header: self.header(p, peer.next_seq, probe),
            body: Body::KeepAlive(KeepAliveRepr {
                ts: ts32(now),
                echo_ts: peer.ts_recent,
            }),
        };
        self.send_ctl(&peer.addr, &head, port)
    }

    /// Sends a packet without payload.
    pub(super) fn send_ctl<P: TxPort>(
        &mut self,
        to: &EpAddr,
        head: &Repr<'_>,
        port: &mut P,
    ) -> Sent {
        let len = head.buffer_len();
        let r = port.send(to, len, |buf| {
            buf.get_mut(..len)
                .and_then(|b| head.emit_bytes(b).ok())
                .unwrap_or(0)
        });
        if r == Sent::Yes {
            self.stats.tx_packets += 1;
        }
        r
    }

    // ---- acknowledgements --------------------------------------------------------------

    /// An ACK from peer `p`: cumulative and selective acks, credits, RTT, fast
    /// retransmit, completions.
    /// A READ_RESP data packet was acknowledged (first time): its answer is freed once
    /// all of it left and nothing of it is in flight.
    fn resp_acked(&mut self, regen: &Regen) {
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
    pub(super) fn take_held_ack(&mut self, p: usize, ctx: &mut Ctx<'_, S>) {
        let Some(pm) = self.peers.as_mut().get_mut(p) else {
            return;
        };
        if let Some((a, at)) = pm.ack_held.take() {
            self.acks_held = self.acks_held.saturating_sub(1);
            self.on_ack(p, &a, at, ctx);
        }
    }

    /// Processes every held acknowledgement (before timers and scans use the windows).
    fn take_held_acks(&mut self, ctx: &mut Ctx<'_, S>) {
        if self.acks_held == 0 {
            return;
        }
        for p in 0..self.peers_high.min(self.peers.as_ref().len()) {
            self.take_held_ack(p, ctx);
        }
    }

    pub(super) fn on_ack(&mut self, p: usize, a: &AckRepr, now: Instant, ctx: &mut Ctx<'_, S>) {
        // Three fields, not a copy of the whole peer (every received ack).
        let peer = {
            let pr = &self.peers.as_ref()[p];
            AckView {
                next_seq: pr.next_seq,
                snd_una: pr.snd_una,
                last_ack_ts: pr.last_ack_ts,
            }
        };
        if seq_lt(peer.next_seq, a.cum_ack) {
            self.stats.rx_bad_acks += 1;
            return;
        }
        let stale = seq_lt(a.cum_ack, peer.snd_una)
            || (a.cum_ack == peer.snd_una && seq_lt(a.ts, peer.last_ack_ts));
        let mut sample: Option<u64> = None;
        let mut advanced = false;
        // Cumulative part. Packets after a retransmitted one waited at the receiver
        // for the hole to fill: their delay is not the path's (Karn), so no sample.
        let mut s = peer.snd_una;
        let mut behind_hole = false;
        while seq_lt(s, a.cum_ack) {
            let e = *self.win_get(p, s);
            if e.live {
                behind_hole |= e.retx > 0;
                if e.retx == 0 && !e.sacked && !behind_hole {
                    sample = Some(now.saturating_duration_since(e.sent_at).total_micros());
                }
                self.win_mut(p, s).live = false;
                if e.rtx {
                    let pm = &mut self.peers.as_mut()[p];
                    pm.rtx_pending = pm.rtx_pending.saturating_sub(1);
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
            self.peers.as_mut()[p].snd_una = a.cum_ack;
        }
        // Selective part.
        let snd_una = self.peers.as_ref()[p].snd_una;
        let next_seq = self.peers.as_ref()[p].next_seq;
        let mut bits = a.sack;
        let mut newly_sacked = false;
        while bits != 0 {
            let i = bits.trailing_zeros();
            bits &= bits - 1;
            let s = a.cum_ack.wrapping_add(1 + i);
            if !(seq_le(snd_una, s) && seq_lt(s, next_seq)) {
                continue;
            }
            let e = *self.win_get(p, s);
            if !e.live || e.sacked || e.seq != s {
                continue;
            }
            newly_sacked = true;
            {
                let em = self.win_mut(p, s);
                em.sacked = true;
                em.rtx = false;
            }
            if e.retx == 0 {
                let r = now.saturating_duration_since(e.sent_at).total_micros();
                sample = Some(sample.map_or(r, |x| x.min(r)));
            }
            if e.rtx {
                let pm = &mut self.peers.as_mut()[p];
                pm.rtx_pending = pm.rtx_pending.saturating_sub(1);
            }
            if matches!(e.regen, Regen::ReadData { .. } | Regen::AtomicData { .. }) {
                self.resp_acked(&e.regen);
            }
            self.entry_acked(&e.regen, false, false, ctx);
        }
        let cfg = &self.cfg;
        let pm = &mut self.peers.as_mut()[p];
        if let Some(r) = sample {
            pm.rtt.sample(r, cfg);
        }
        if !stale {
            let lim = a
                .credits
                .min(pm.params.window.max(1) as u32)
                .min(cfg.window as u32);
            pm.snd_limit = a.cum_ack.wrapping_add(lim);
            pm.last_ack_ts = a.ts;
        }
        if advanced || newly_sacked {
            let unacked_left = pm.in_flight() > 0;
            pm.rto_at = unacked_left.then(|| now + Duration::from_micros(pm.rtt.rto));
        }
        // Fast retransmit: an unacked packet with at least 3 selectively acked packets
        // above it, at most once per RTT.
        if a.sack != 0 {
            let srtt = Duration::from_micros(pm.rtt.srtt.max(cfg.rto_min.total_micros() / 4));
            let (una, next) = (pm.snd_una, pm.next_seq);
            let mut above = 0u32;
            let mut s = next;
            let mut marked = 0u32;
            while s != una {
                s = s.wrapping_sub(1);
                let e = *self.win_get(p, s);
                if !e.live {
                    continue;
                }
                if e.sacked {
                    above += 1;
                } else if above >= 3 && !e.rtx && e.sent_at + srtt <= now {
                    self.win_mut(p, s).rtx = true;
                    marked += 1;
                }
            }
            if marked > 0 {
                self.peers.as_mut()[p].rtx_pending += marked;
                self.stats.tx_fast_retransmits += marked as u64;
            }
        }
        // Only what the acknowledgement let go (a wider window or more credits for
        // queued data, a fast retransmission) needs the transmitter now. Completions
        // are written already and timers are in `poll_timeout`: a ping-pong's reply
        // carries the ack it owes, so its receiving pass hands the completion over
        // without a transmit half first.
        let pm = &self.peers.as_ref()[p];
        if pm.cursor != NIL
            || pm.rndv_ready > 0
            || pm.cts_pending > 0
            || pm.resp_pending > 0
            || pm.rtx_pending > 0
        {
            self.tx_ready = true;
        }
    }

    // ---- failure -----------------------------------------------------------------------

    /// The session with peer `p` failed: every pending operation with it completes with
    /// `err`, except the sends `keep` names (they wait for a new session); held
    /// packets and partial messages from it are dropped.
    pub(super) fn fail_peer(
        &mut self,
        p: usize,
        err: Errno,
        keep: Keep,
        now: Instant,
        ctx: &mut Ctx<'_, S>,
    ) {
        // Which sends the peer acknowledged decides what a new session resends.
        self.take_held_ack(p, ctx);
        let peer = self.peers.as_ref()[p];
        let epoch = peer.epoch;
        self.stats.peer_failures += 1;
        // Sends.
        let mut o = peer.op_head;
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
                    ctx.tx_done(op.context, op.kind(), Err(err), true, op.reserved);
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
        let w = self.wmask + 1;
        for i in 0..w {
            self.win.as_mut()[p * w + i] = WinEntry::EMPTY;
            let slot = core::mem::replace(&mut self.reo_idx.as_mut()[p * w + i], NO_SLOT);
            if slot != NO_SLOT {
                self.free_reo(slot);
            }
        }
        if peer.blocked {
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
        let victims = |a: &RxActive| a.peer as usize == p && a.epoch == epoch;
        loop {
            let found = self.active.iter().find(|(_, a)| victims(a)).map(|(h, _)| h);
            let Some(h) = found else { break };
            self.finish_active(h, Some(err), ctx);
        }
        // Unexpected messages of this session that can no longer complete.
        let partial = |m: &UxMsg| m.peer as usize == p && m.epoch == epoch && !m.complete();
        while let Some(h) = self.ux_msg.find_by(partial) {
            self.drop_ux(UxRef::Untagged(h));
        }
        while let Some(h) = self.ux_tag.find_by(partial) {
            self.drop_ux(UxRef::Tagged(h));
        }
        loop {
            let found = self
                .claimed
                .iter()
                .find(|(_, m)| partial(m))
                .map(|(h, _)| h);
            let Some(h) = found else { break };
            self.drop_ux(UxRef::Claimed(h));
        }
        if peer.state == PeerState::Established {
            self.established = self.established.saturating_sub(1);
        }
        let pm = &mut self.peers.as_mut()[p];
        pm.state = PeerState::Failed;
        pm.tx_session = 0;
        pm.rx_session = 0;
        pm.cand = None;
        pm.asm = None;
        pm.held = 0;
        pm.blocked = false;
        pm.rto_at = None;
        pm.ack_at = None;
        pm.ack_now = false;
        pm.probe_at = None;
        pm.rtx_pending = 0;
        pm.rndv_ready = 0;
        pm.cts_pending = 0;
        pm.resp_pending = 0;
        pm.wr_op = None;
        pm.send_hello_ack = false;
        pm.ka_reply = false;
        pm.ka_probe = false;
        pm.inbound = 0;
        pm.live_at = None;
        pm.timeouts = 0;
        pm.cursor = pm.op_head;
        pm.rtt = super::peer::Rtt::new(&self.cfg);
        if peer.rx_session != 0 {
            pm.failed_rx_session = peer.rx_session;
            pm.failed_tx_session = peer.tx_session;
        }
        pm.last_active = now;
        pm.busy_until = None;
    }
}

/// Which sends survive a failed session ([`Rdm::fail_peer`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Keep {
    /// None: every pending send fails.
    Nothing,
    /// Those that have not sent anything.
    Unstarted,
    /// Also those of which nothing was acknowledged: the peer answered a packet with
    /// RESET(UNKNOWN_SESSION), so it holds nothing of the session and delivered none
    /// of them.
    Unacknowledged,
}

impl TxOp {
    fn iov_slice(&self) -> &[IoVec] {
        self.iov.as_slice()
    }
}
