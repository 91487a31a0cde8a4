//! The planner: which packet a peer sends next (handshake, control, retransmission,
//! CTS, rendezvous DATA, eager segment, RTS, RMA answer) and building it.

use super::*;

/// What the transmitter picked to send next.
#[derive(Clone, Copy)]
pub(in crate::rdm) enum Plan {
    Regen(u32, Regen),
    New(Regen),
}

impl<S: Storage> Rdm<S> {
    /// Whether the first sequenced packet peer `p` will send next (a retransmission,
    /// else a new packet within window and credits) has room for an ACK.
    pub(in crate::rdm) fn next_carries_ack(&self, p: usize) -> bool {
        let peer = &self.peers[p];
        let next = if peer.tx.rtx_pending > 0 {
            let mut s = peer.tx.sb.rtx_start(peer.tx.snd_una, peer.tx.next_seq);
            let mut found = None;
            while seq_lt(s, peer.tx.next_seq) {
                let e = self.win.get(p, s);
                if e.live && e.rtx {
                    found = Some(e.regen);
                    break;
                }
                s = s.wrapping_add(1);
            }
            found
        } else {
            let wnd = (self.cfg.window as u32).min(peer.session.params.window.max(1) as u32);
            let room = peer.tx.window_open(wnd) && seq_lt(peer.tx.next_seq, peer.tx.snd_limit);
            if room { self.next_new(p) } else { None }
        };
        next.is_some_and(|r| {
            let len = self.regen_len(&r);
            len > 0 && len + wire::packet::hdr_len::ACK <= self.pkt_limit(p)
        })
    }

    /// The length of the packet `r` builds, without a piggybacked ACK (0 if its
    /// operation is gone).
    pub(in crate::rdm) fn regen_len(&self, r: &Regen) -> usize {
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
    pub(in crate::rdm) fn next_new(&self, p: usize) -> Option<Regen> {
        let peer = &self.peers[p];
        if peer.session.close_seq.is_some() {
            return None; // nothing follows our CLOSE
        }
        if peer.tx.cts_pending > 0 {
            let found = self.active.cts_owed(p, peer.session.epoch);
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
        if peer.tx.resp_pending > 0 {
            let found = self.resps.iter().find(|(_, r)| {
                r.peer as usize == p
                    && r.epoch == peer.session.epoch
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
        if peer.tx.rndv_ready > 0 {
            let mut o = peer.tx.op_head;
            while o != NIL && o != peer.tx.cursor {
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
        if peer.tx.cursor != NIL {
            let o = peer.tx.cursor;
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
        peer.session.close_pending.then_some(Regen::Close)
    }

    /// Whether the next new packet to `peer` is the last its window or its credits let
    /// out (then it asks for an immediate ACK, whatever else is queued).
    pub(in crate::rdm) fn next_fills_limit(&self, peer: &Peer) -> bool {
        let wnd = (self.cfg.window as u32).min(peer.session.params.window.max(1) as u32);
        peer.tx.window_fills(wnd) || peer.tx.next_seq.wrapping_add(1) == peer.tx.snd_limit
    }

    /// Whether, after `r`, peer `p` would have nothing more to send right away (then
    /// the packet asks for an immediate ACK).
    pub(in crate::rdm) fn last_for_now(&self, p: usize, r: &Regen) -> bool {
        let peer = &self.peers[p];
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
                !rest && !more_ops(op) && peer.tx.rndv_ready == 0 && peer.tx.cts_pending == 0
            }
            Regen::Rts { op } => {
                !more_ops(op) && peer.tx.rndv_ready == 0 && peer.tx.cts_pending == 0
            }
            Regen::Data { op, off, len } => {
                let rest = self
                    .ops
                    .get_by_index(op as usize)
                    .is_some_and(|(_, o)| off + (len as u64) < o.granted.min(o.end));
                !rest
                    && peer.tx.rndv_ready <= 1
                    && peer.tx.cursor == NIL
                    && peer.tx.cts_pending == 0
            }
            Regen::Cts { .. } => {
                peer.tx.cts_pending <= 1 && peer.tx.cursor == NIL && peer.tx.rndv_ready == 0
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
                o == NIL && peer.tx.rndv_ready == 0 && peer.tx.cts_pending == 0
            }
            Regen::Resp { .. } | Regen::AtomicData { .. } => {
                peer.tx.resp_pending <= 1 && peer.tx.cursor == NIL && peer.tx.rndv_ready == 0
            }
            Regen::ReadData { slot, off, len } => {
                let rest = self
                    .resps
                    .get_by_index(slot as usize)
                    .is_some_and(|(_, r)| off + (len as u64) < r.len);
                !rest
                    && peer.tx.resp_pending <= 1
                    && peer.tx.cursor == NIL
                    && peer.tx.rndv_ready == 0
            }
        }
    }

    /// Builds and sends one sequenced packet; on success records it in the window (new)
    /// or marks it retransmitted.
    pub(in crate::rdm) fn send_plan<P: TxPort, M: Memory>(
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
            Plan::New(r) => (self.peers[p].tx.next_seq, r, false),
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
                    let pm = &mut self.peers[p];
                    pm.tx.resp_pending = pm.tx.resp_pending.saturating_sub(1);
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
                self.peers[p].tx.next_msg_id
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
        let dst = self.peers[p].addr;
        let mut fault = None;
        // An acknowledgement the peer is owed rides along if it fits (generated now,
        // also on a retransmission: never a replayed one).
        // A CLOSE always carries one: it is the closing side's final word on what it
        // took, and the peer fails whatever it does not cover.
        let owes = self.peers[p].rx.owes_ack() || matches!(regen, Regen::Close);
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
                    let Some(r) = op.rma else {
                        return Sent::Yes;
                    };
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
            // Built only where even the short form fits: a full-size packet of a bulk
            // transfer, whose sender owes the peer an ACK for a CTS, never carries one.
            if owes && hl + payload.len() + wire::packet::hdr_len::SHORT_ACK <= limit {
                let a = this.ack_body(p, now);
                if hl + payload.len() + a.wire_len() <= limit && head.body.set_ack(Some(a)).is_ok()
                {
                    carried = Some(a);
                    hl += a.wire_len();
                }
            }
            debug_assert_eq!(hl, head.buffer_len());
            let total = hl + payload.len();
            let seal = self.seal_for(p);
            port.send(&dst, total + seal.room(), |buf| {
                let n = write_packet(buf, &head, hl, payload, mem, &mut fault);
                seal.apply(buf, n)
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
        self.win.record(p, seq, regen, now);
        {
            let pm = &mut self.peers[p];
            pm.tx.next_seq = seq.wrapping_add(1);
            pm.tx.arm_rto(now);
        }
        match regen {
            Regen::Bundle { .. } => {} // resent by `resend_bundle`, never planned
            Regen::Close => {
                self.peers[p].session.close_seq = Some(seq);
                self.stats.closes_sent += 1;
            }
            Regen::Resp { slot, .. } => self.resp_sent(p, slot),
            Regen::AtomicData { slot } => self.atomic_data_sent(p, slot),
            Regen::ReadData { slot, len, .. } => self.read_data_sent(p, slot, len),
            Regen::Cts { rx_op, len, .. } => self.cts_sent(p, rx_op, len, ctx),
            Regen::Seg { op: o, len, .. } | Regen::Data { op: o, len, .. } => {
                let is_data = matches!(regen, Regen::Data { .. });
                self.segment_sent(p, o, len, msg_id, is_data);
            }
            Regen::Rts { op: o } => self.request_sent(p, o, msg_id),
        }
        Sent::Yes
    }

    /// An eager or RMA_WRITE segment (or, `is_data`, rendezvous DATA) of op `o` left:
    /// the op starts with its first (a message taking `msg_id`), counts it unacked and
    /// undelivered, and the cursor moves on past its last segment; DATA that used up
    /// the grant leaves the peer's ready count.
    #[inline(always)]
    pub(in crate::rdm) fn segment_sent(
        &mut self,
        p: usize,
        o: u32,
        len: u32,
        msg_id: u32,
        is_data: bool,
    ) {
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
        let pm = &mut self.peers[p];
        if first && message {
            pm.tx.next_msg_id = pm.tx.next_msg_id.wrapping_add(1);
        }
        if done_initial {
            pm.tx.cursor = self
                .ops
                .get_by_index(o as usize)
                .map_or(NIL, |(_, op)| op.next);
        }
        if data_exhausted {
            pm.tx.rndv_ready = pm.tx.rndv_ready.saturating_sub(1);
        }
    }

    /// Where segment `off .. off + len` of op `o` comes from: its inject copy, or the
    /// application's buffers.
    #[inline]
    pub(in crate::rdm) fn seg_payload<'a>(
        &'a self,
        o: u32,
        op: &'a TxOp,
        off: u64,
        len: u32,
    ) -> Payload<'a> {
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
}
