//! The send side of RMA (docs/wire-protocol.md, section 7) in the planner: an
//! initiator's RMA_WRITE segments and READ_REQ, a target's answers (a status, or
//! READ_RESP data read from the region as it leaves), and what each commits once it
//! left. The planner's helpers here are inlined into `send_plan`, their one caller.

use super::*;

/// What the region of a READ_RESP data packet allows, checked once as it is built.
pub(in crate::rdm) enum ReadRegion {
    /// The answer is gone (answered already, or its session failed): nothing to send.
    Gone,
    /// Readable: through this check, for the initiator's operation id.
    Readable(crate::mr::RemoteAccess, u32),
    /// No longer readable (deregistered while the read was answered): the packet
    /// becomes an ACCESS_DENIED answer to the operation with this id.
    Denied(u32),
}

impl<S: Storage> Rdm<S> {
    /// Checks the region of READ_RESP data `off .. off + len` of answer `slot`. A
    /// region that can no longer be read makes the answer a failure instead, never
    /// zeros; a retransmission too (the initiator takes whichever arrives: a duplicate
    /// of a sequence number is dropped whatever it carries).
    #[inline(always)]
    pub(in crate::rdm) fn read_region(
        &mut self,
        p: usize,
        slot: u32,
        off: u64,
        len: u32,
        retrans: bool,
        mrs: Option<&crate::fid::MrTableOf<S>>,
    ) -> ReadRegion {
        let Some(r) = self.resps.get_mut_by_index(slot as usize) else {
            return ReadRegion::Gone;
        };
        let ep = u64::from(self.local.ep_id);
        let at = r.addr.wrapping_add(off);
        let checked = mrs.and_then(|m| {
            m.check_remote(r.key, at, u64::from(len), Flags::REMOTE_READ, ep)
                .ok()
        });
        if let Some(ra) = checked {
            return ReadRegion::Readable(ra, r.op_id);
        }
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
        ReadRegion::Denied(op_id)
    }

    /// RMA_WRITE segment `off .. off + len` of write `o`.
    #[inline(always)]
    pub(in crate::rdm) fn rma_write_body<'a>(
        &'a self,
        o: u32,
        op: &'a TxOp,
        off: u64,
        len: u32,
    ) -> (Body<'static>, Payload<'a>) {
        let r = op.rma.unwrap_or(RmaOp {
            key: 0,
            addr: 0,
            read: false,
            got: 0,
            answered: false,
            atomic: None,
        });
        let pl = self.seg_payload(o, op, off, len);
        (
            Body::RmaWrite(RmaWriteRepr {
                key: r.key,
                addr: r.addr,
                op_id: op_id(o as usize, self.op_gen(o)),
                total_len: op.len,
                offset: off,
                cq_data: op.data,
                payload: &[],
                ack: None,
            }),
            pl,
        )
    }

    /// The READ_REQ of read `o`.
    #[inline(always)]
    pub(in crate::rdm) fn read_req_body(
        &self,
        o: u32,
        op: &TxOp,
    ) -> (Body<'static>, Payload<'static>) {
        let (key, addr) = op.rma.map_or((0, 0), |r| (r.key, r.addr));
        (
            Body::ReadReq(ReadReqRepr {
                key,
                addr,
                len: op.len,
                op_id: op_id(o as usize, self.op_gen(o)),
                ack: None,
            }),
            Payload::None,
        )
    }

    /// A status answer: a read's failure (READ_RESP) or a write's (ATOMIC_RESP).
    #[inline(always)]
    pub(in crate::rdm) fn resp_body(
        op_id: u32,
        status: u16,
        read: bool,
    ) -> (Body<'static>, Payload<'static>) {
        (
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
        )
    }

    /// READ_RESP data at `off` for the operation with `op_id`, `len` bytes that `fill`
    /// reads from the region.
    #[inline(always)]
    pub(in crate::rdm) fn read_data_body<'a>(
        op_id: u32,
        off: u64,
        len: u32,
        fill: &'a dyn Fn(&mut [u8]) -> Result<()>,
    ) -> (Body<'static>, Payload<'a>) {
        (
            Body::ReadResp(ReadRespRepr {
                op_id,
                status: status::OK,
                offset: off,
                payload: &[],
                ack: None,
            }),
            Payload::Fill(fill, len as usize),
        )
    }

    /// A status answer left: everything a retransmission needs is in the window
    /// entry, so the answer is done.
    #[inline(always)]
    pub(in crate::rdm) fn resp_sent(&mut self, p: usize, slot: u32) {
        if let Some((h, _)) = self.resps.get_by_index(slot as usize) {
            self.resps.remove(h);
        }
        let pm = &mut self.peers[p];
        pm.tx.resp_pending = pm.tx.resp_pending.saturating_sub(1);
    }

    /// READ_RESP data left: the answer waits for its acknowledgements, and owes no more
    /// once all of it left.
    #[inline(always)]
    pub(in crate::rdm) fn read_data_sent(&mut self, p: usize, slot: u32, len: u32) {
        let mut finished = false;
        if let Some(r) = self.resps.get_mut_by_index(slot as usize) {
            r.sent += len as u64;
            r.unacked += 1;
            finished = r.sent >= r.len;
        }
        if finished {
            let pm = &mut self.peers[p];
            pm.tx.resp_pending = pm.tx.resp_pending.saturating_sub(1);
        }
    }
}
