//! The short path (`express_send`) and BUNDLEs (spec 6.4): single-packet messages
//! that go without the planner, alone or several in one packet.

use super::*;

/// Most messages one BUNDLE carries.
pub(in crate::rdm) const MAX_BUNDLE: usize = 32;

/// What a BUNDLE carries: the `n` operations from `first`, their message ids (`base +
/// i`, or their own for a retransmission), a piggybacked ACK, its length.
#[derive(Clone, Copy)]
pub(in crate::rdm) struct BundleShape {
    first: u32,
    n: u16,
    base: Option<u32>,
    ack: Option<AckRepr>,
    total: usize,
}

impl<S: Storage> Rdm<S> {
    /// The send path of the next queued message to peer `p` when it fits in one packet
    /// and the session has nothing else due (no handshake, control, retransmission,
    /// rendezvous or RMA packet, no close) and room in the window and credits. It
    /// sends exactly what the planner would (the same packet, ACK_REQ as
    /// `last_for_now` sets it, an owed acknowledgement carried) and records the same
    /// state, without planning. `None` when the case does not apply (then the planner
    /// runs); otherwise the send's outcome.
    pub(in crate::rdm) fn express_send<P: TxPort, M: Memory>(
        &mut self,
        p: usize,
        now: Instant,
        port: &mut P,
        mem: &M,
    ) -> Option<Sent> {
        let pr = self.peers.get(p)?;
        if pr.state != PeerState::Established
            || pr.session.cand.is_some()
            || pr.session.send_hello_ack
            || pr.rx.ka_reply
            || pr.tx.ka_probe
            || pr.tx.rtx_pending > 0
            || pr.tx.cts_pending > 0
            || pr.tx.resp_pending > 0
            || pr.tx.rndv_ready > 0
            || pr.session.close_pending
            || pr.session.closed_by_peer
            || pr.session.close_seq.is_some()
            || pr.tx.cursor == NIL
        {
            return None;
        }
        let wnd = (self.cfg.window as u32).min(pr.session.params.window.max(1) as u32);
        if !pr.tx.window_open(wnd) || !seq_lt(pr.tx.next_seq, pr.tx.snd_limit) {
            return None; // no room in the window, or no credit: `pump` probes
        }
        let o = pr.tx.cursor;
        let (_, op) = self.ops.get_by_index(o as usize)?;
        if op.rma.is_some() || op.rndv || op.started {
            return None;
        }
        if op.next != NIL && self.cfg.bundle && pr.session.params.caps & wcaps::BUNDLE != 0 {
            // More messages queued behind it: as many as fit go in one BUNDLE.
            if let Some(sent) = self.express_bundle(p, now, port, mem) {
                return Some(sent);
            }
        }
        let pr = self.peers.get(p)?;
        let (_, op) = self.ops.get_by_index(o as usize)?;
        // ACK_REQ as `last_for_now` sets it: on the last packet we have for now, or
        // the last the window or the credits let out.
        let ack_req = op.next == NIL || self.next_fills_limit(pr);
        let limit = self.pkt_limit(p);
        let (seq, msg_id, dst) = (pr.tx.next_seq, pr.tx.next_msg_id, pr.addr);
        let ack = (pr.rx.owes_ack() || self.credit_update_due(p)).then(|| self.ack_body(p, now));
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
        let seal = self.seal_for(p);
        let sent = port.send(&dst, total + seal.room(), |buf| {
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
            seal.apply(buf, total)
        });
        if sent != Sent::Yes {
            return Some(sent);
        }
        // What `send_plan` records for a new packet.
        self.stats.tx_express += 1;
        self.packet_left(p, ack);
        self.win.record(
            p,
            seq,
            Regen::Seg {
                op: o,
                off: 0,
                len: len as u32,
            },
            now,
        );
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
        let pm = &mut self.peers[p];
        pm.tx.next_seq = seq.wrapping_add(1);
        pm.tx.next_msg_id = msg_id.wrapping_add(1);
        pm.tx.cursor = next;
        pm.tx.probe_at = None;
        pm.tx.arm_rto(now);
        Some(Sent::Yes)
    }

    /// How many queued messages from op `first` on one BUNDLE of at most `limit` bytes
    /// takes (whole single-packet messages not started yet, at most [`MAX_BUNDLE`]),
    /// and its length.
    pub(in crate::rdm) fn bundle_plan(
        &self,
        first: u32,
        ack: Option<&AckRepr>,
        limit: usize,
    ) -> (u16, usize) {
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
    pub(in crate::rdm) fn bundle_len(&self, first: u32, n: u16) -> usize {
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
    pub(in crate::rdm) fn write_bundle_records<M: Memory>(
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
    #[allow(clippy::too_many_arguments)] // the seal joins the packet's other parts
    pub(in crate::rdm) fn send_bundle<P: TxPort, M: Memory>(
        &self,
        dst: &EpAddr,
        header: &Header,
        shape: &BundleShape,
        port: &mut P,
        mem: &M,
        faults: &mut [Option<Errno>; MAX_BUNDLE],
        seal: Seal<'_>,
    ) -> Sent {
        let BundleShape {
            first,
            n,
            base,
            ack,
            total,
        } = *shape;
        port.send(dst, total + seal.room(), |buf| {
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
            seal.apply(buf, total)
        })
    }

    /// The short path for a burst: the messages queued for peer `p` from its cursor on
    /// that fit whole in one packet go as one BUNDLE (spec 6.4), with the state
    /// `express_send` records for each, in one window entry. `None` when fewer than
    /// two fit (the caller sends the first alone). `express_send` checked the peer.
    pub(in crate::rdm) fn express_bundle<P: TxPort, M: Memory>(
        &mut self,
        p: usize,
        now: Instant,
        port: &mut P,
        mem: &M,
    ) -> Option<Sent> {
        let pr = self.peers.get(p)?;
        let limit = self.pkt_limit(p);
        let owes = pr.rx.owes_ack() || self.credit_update_due(p);
        let (first, base, seq, dst) = (pr.tx.cursor, pr.tx.next_msg_id, pr.tx.next_seq, pr.addr);
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
        let seal = self.seal_for(p);
        let sent = self.send_bundle(&dst, &header, &shape, port, mem, &mut faults, seal);
        if sent != Sent::Yes {
            return Some(sent);
        }
        self.stats.tx_express += 1;
        self.stats.tx_bundles += 1;
        self.stats.tx_bundled_msgs += u64::from(n);
        self.packet_left(p, ack);
        self.win.record(p, seq, Regen::Bundle { op: first, n }, now);
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
        let pm = &mut self.peers[p];
        pm.tx.next_seq = seq.wrapping_add(1);
        pm.tx.next_msg_id = base.wrapping_add(u32::from(n));
        pm.tx.cursor = o;
        pm.tx.probe_at = None;
        pm.tx.arm_rto(now);
        Some(Sent::Yes)
    }

    /// Sends BUNDLE `seq` of peer `p` again (the `n` operations from `first`, with the
    /// message ids they took), carrying an owed acknowledgement if it fits.
    #[allow(clippy::too_many_arguments)]
    pub(in crate::rdm) fn resend_bundle<P: TxPort, M: Memory>(
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
        let pr = &self.peers[p];
        let dst = pr.addr;
        let ack = pr
            .rx
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
        let seal = self.seal_for(p);
        let res = self.send_bundle(&dst, &header, &shape, port, mem, &mut faults, seal);
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
}
