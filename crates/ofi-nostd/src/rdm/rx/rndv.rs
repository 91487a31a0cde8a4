//! Rendezvous (spec 6.3): an RTS matched to a receive, grants by CTS, DATA placed
//! into the buffer, and the sender's side of a CTS.

use super::*;

impl<S: Storage> Rdm<S> {
    /// Bytes one CTS grants: a window of DATA packets.
    pub(in crate::rdm) fn grant_size(&self) -> u64 {
        self.cfg.window as u64 * wire::packet::max_data_payload(self.max_pkt) as u64
    }

    #[inline(never)]
    pub(in crate::rdm) fn rx_rts(
        &mut self,
        p: usize,
        r: &RtsRepr,
        ctx: &mut Ctx<'_, S>,
    ) -> Outcome {
        let peer = self.peers[p];
        if r.msg_id != peer.rx.rx_msg_id {
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
                break self.shared_target(tagged, src, tag, ctx);
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
                epoch: peer.session.epoch,
                report_src: report,
                tag,
                tagged,
                data: r.cq_data,
                total: r.total_len,
                kind: UxKind::Rndv { rts_op: r.op_id },
                claimed_by: 0,
            };
            let q = if tagged {
                &mut self.recv.ux_tag
            } else {
                &mut self.recv.ux_msg
            };
            if q.insert(src, tag, msg).is_err() {
                return Outcome::Blocked;
            }
            self.stats.unexpected += 1;
            self.peers[p].rx.rx_msg_id = r.msg_id.wrapping_add(1);
            return Outcome::Done;
        };
        self.peers[p].rx.rx_msg_id = r.msg_id.wrapping_add(1);
        let msg = UxMsg {
            peer: p as u16,
            epoch: peer.session.epoch,
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
    pub(in crate::rdm) fn start_rndv(
        &mut self,
        m: &UxMsg,
        t: &Target,
        discard: bool,
        ctx: &mut Ctx<'_, S>,
    ) {
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
                if let Some(pm) = self.peers.get_mut(m.peer as usize) {
                    pm.tx.cts_pending += 1;
                    if !discard && want > 0 {
                        pm.rx.inbound += 1;
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
    pub(in crate::rdm) fn rx_data<M: Memory>(
        &mut self,
        p: usize,
        d: &DataRepr<'_>,
        mem: &mut M,
        ctx: &mut Ctx<'_, S>,
    ) {
        let epoch = self.peers[p].session.epoch;
        let Some(h) = self.active.by_id(d.rx_op_id) else {
            self.stats.rx_protocol_errors += 1;
            return;
        };
        let len = d.payload.len() as u64;
        // Borrowed, not copied: the record (with its iov) is read for every DATA packet.
        let r = {
            let Some(a) = self.active.get(h) else {
                return;
            };
            if a.peer as usize != p
                || a.epoch != epoch
                || !a.rndv
                || a.discard
                || d.offset != a.got
                || d.offset + len > a.granted
            {
                None
            } else {
                Some(iov_write(mem, a.context, a.iov.as_slice(), d.offset, d.payload).err())
            }
        };
        let Some(r) = r else {
            self.stats.rx_protocol_errors += 1;
            return;
        };
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
                self.peers[p].tx.cts_pending += 1;
            }
            self.tx_ready = true;
        }
    }

    /// A CTS for one of our rendezvous sends, in order.
    #[inline(never)]
    pub(in crate::rdm) fn on_cts(&mut self, p: usize, c: &CtsRepr, ctx: &mut Ctx<'_, S>) {
        let epoch = self.peers[p].session.epoch;
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
        let pm = &mut self.peers[p];
        if has && !had {
            pm.tx.rndv_ready += 1;
        } else if had && !has {
            pm.tx.rndv_ready = pm.tx.rndv_ready.saturating_sub(1);
        }
        self.tx_ready = true;
        self.op_progress(idx, ctx);
    }
}
