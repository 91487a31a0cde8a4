//! What the domain lends the engine for a call: where completions go (`Ctx`), and
//! the transmit side of the link (`TxPort`).

use super::*;

/// Where completions go: the domain lends the endpoint's CQs, counters and AV.
pub(crate) struct Ctx<'a, S: Storage> {
    pub(crate) cqs: &'a mut PoolOf<S, CqObj<S>>,
    pub(crate) cntrs: &'a mut PoolOf<S, Cntr>,
    /// The domain's AVs and the endpoint's (resolved when a message's source is
    /// looked up, not for every post and pass).
    pub(crate) avs: &'a Objects<S, AvObj<S>>,
    pub(crate) av: Option<AvHandle<S>>,
    /// The endpoint's CQ bindings, borrowed (read only when something completes).
    pub(crate) tx_cq: &'a Option<CqBinding<CqHandle<S>>>,
    pub(crate) rx_cq: &'a Option<CqBinding<CqHandle<S>>>,
    /// The endpoint's counter bindings (one reference: most passes count nothing).
    pub(crate) cntr: &'a crate::bind::CntrBindings<CntrHandle>,
    pub(crate) rm: bool,
    pub(crate) ep_context: u64,
    pub(crate) source: bool,
    /// The domain's registrations: what remote RMA accesses are checked against.
    pub(crate) mrs: Option<&'a crate::fid::MrTableOf<S>>,
    /// The endpoint's capabilities (what peers may do to its memory, see
    /// `remote_access`; unread in a build without RMA).
    #[cfg_attr(not(feature = "rma"), allow(dead_code))]
    pub(crate) caps: Flags,
    /// The waiting receives of the shared receive context the endpoint is bound to,
    /// lent to a receiving pass while some wait (see [`Ctx::srx_take`]).
    #[cfg(feature = "shared-ctx")]
    pub(crate) srx: Option<&'a mut dyn SrxOffer<S>>,
}

/// Receives the domain lends an engine for a message none of its own takes: a shared
/// receive context's (the domain implements it; the engine knows no context).
#[cfg(feature = "shared-ctx")]
pub(crate) trait SrxOffer<S: Storage> {
    /// Takes out the oldest receive that a message (`tagged` or not, from `src` with
    /// `tag`) matches at an endpoint with `caps` and the AV `av`, if it is one the
    /// engine may take itself (not a multi-recv buffer) and `reserve` gives it a CQ
    /// slot: its buffers, context and flags.
    fn take(
        &mut self,
        tagged: bool,
        src: FiAddr,
        tag: u64,
        av: Option<&AvObj<S>>,
        caps: Flags,
        reserve: &mut dyn FnMut() -> bool,
    ) -> Option<(crate::iov::IovList, u64, Flags)>;
}

impl<S: Storage> Ctx<'_, S> {
    /// The fi_addr a message from `addr` matches receives with, and the one reported
    /// as its source (FI_SOURCE).
    pub(super) fn src_of(&self, addr: &EpAddr) -> (FiAddr, FiAddr) {
        let Some(av) = self.av.and_then(|a| self.avs.get(a)) else {
            return (FI_ADDR_NOTAVAIL, FI_ADDR_NOTAVAIL);
        };
        av.message_source(addr, self.source)
    }

    /// The endpoint's AV's insert count (`Av::inserted`), if it has one.
    #[inline]
    pub(super) fn av_inserted(&self) -> Option<u32> {
        Some(self.avs.get(self.av?)?.inserted())
    }

    /// A remote access to our memory finished: its counter, and with remote CQ data a
    /// receive-CQ entry (FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA; its slot reserved
    /// by the caller through [`Ctx::rx_reserve`]).
    #[cfg(feature = "rma")]
    pub(super) fn remote_event(
        &mut self,
        cntr: Option<CntrHandle>,
        data: Option<u64>,
        len: u64,
        kind: Flags,
    ) {
        if let Some(c) = cntr.and_then(|c| self.cntrs.get_mut(c)) {
            c.inc();
        }
        let Some(data) = data else {
            return;
        };
        let rm = self.rm;
        if let Some(cq) = self.rx_cq.as_ref().and_then(|b| self.cqs.get_mut(b.cq)) {
            let mut e = CqEntry::new(0, kind.union(Flags::REMOTE_CQ_DATA)).with_len(len as usize);
            e.data = data;
            let _ = if rm {
                cq.write_reserved(&e)
            } else {
                cq.write(&e)
            };
        }
    }

    /// The counters bound to region `mr` for `access` (FI_RMA_EVENT endpoints only):
    /// one more event each.
    #[cfg(feature = "rma")]
    pub(super) fn region_event(&mut self, mr: crate::mr::MrHandle, access: Flags) {
        if !self.caps.contains(Flags::RMA_EVENT) {
            return;
        }
        let Some(mrs) = self.mrs else {
            return;
        };
        for bits in mrs.rma_counters(mr, access) {
            let found = self
                .cntrs
                .get_by_index((bits & 0xffff_ffff) as usize)
                .filter(|(h, _)| h.to_bits() == bits)
                .map(|(h, _)| h);
            if let Some(c) = found.and_then(|h| self.cntrs.get_mut(h)) {
                c.inc();
            }
        }
    }

    /// A message (`tagged` or not, from `src` with `tag`) that no receive of the
    /// endpoint's own takes: the oldest receive waiting in its shared receive context
    /// that takes it, out of the context, its CQ slot reserved, as the endpoint's own
    /// post of it would (`Domain::post_own`). So the message lands in the buffer as it
    /// arrives, neither buffered as unexpected nor copied again. `None` when none
    /// takes it, when the first that does is a multi-recv buffer (the context lends
    /// those itself), when the endpoint could not take it (no receive CQ or
    /// capability) or its CQ has no room: the message then waits as unexpected and
    /// the pass's hand-over (`Domain::srx_progress`) matches them, as before.
    /// Gives its buffers, context and whether it completes with a CQ entry.
    #[cfg(feature = "shared-ctx")]
    pub(super) fn srx_take(
        &mut self,
        tagged: bool,
        src: FiAddr,
        tag: u64,
    ) -> Option<(crate::iov::IovList, u64, bool)> {
        let cap = if tagged { Flags::TAGGED } else { Flags::MSG };
        if self.rx_cq.is_none()
            || !self.caps.contains(cap)
            || (self.caps.contains(Flags::SEND) && !self.caps.contains(Flags::RECV))
        {
            return None;
        }
        let offer = self.srx.take()?;
        let avs = self.avs;
        let av = self.av.and_then(|a| avs.get(a));
        let caps = self.caps;
        let got = offer.take(tagged, src, tag, av, caps, &mut || self.rx_reserve());
        self.srx = Some(offer);
        let (iov, context, flags) = got?;
        let selective = self.rx_cq.as_ref().is_some_and(|b| b.selective);
        Some((
            iov,
            context,
            !selective || flags.contains(Flags::COMPLETION),
        ))
    }

    /// Reserves a receive-CQ slot for a completion no posted operation reserved.
    pub(super) fn rx_reserve(&mut self) -> bool {
        if !self.rm {
            return true;
        }
        match self.rx_cq.as_ref().and_then(|b| self.cqs.get_mut(b.cq)) {
            Some(cq) => cq.try_reserve().is_ok(),
            // No receive CQ (an endpoint that only initiates): nothing will be
            // written, so nothing waits for room.
            None => true,
        }
    }

    pub(super) fn release(&mut self, tx: bool) {
        if !self.rm {
            return;
        }
        let b = if tx { self.tx_cq } else { self.rx_cq };
        if let Some(cq) = b.as_ref().and_then(|b| self.cqs.get_mut(b.cq)) {
            cq.release();
        }
    }

    /// A send finished: counter, then the CQ entry (success only if asked for).
    pub(super) fn tx_done(
        &mut self,
        context: u64,
        kind: TxKind,
        result: Result<()>,
        completion: bool,
        reserved: bool,
    ) {
        let (flags, cntr) = match kind {
            TxKind::Msg => (crate::cq::comp::SEND_MSG, self.cntr.send),
            TxKind::Tagged => (crate::cq::comp::SEND_TAGGED, self.cntr.send),
            TxKind::Write => (crate::cq::comp::RMA_WRITE, self.cntr.write),
            TxKind::Read => (crate::cq::comp::RMA_READ, self.cntr.read),
            TxKind::AtomicWrite => (crate::cq::comp::ATOMIC_WRITE, self.cntr.write),
            TxKind::AtomicRead => (crate::cq::comp::ATOMIC_READ, self.cntr.read),
        };
        if let Some(c) = cntr.and_then(|c| self.cntrs.get_mut(c)) {
            if result.is_ok() { c.inc() } else { c.inc_err() }
        }
        let rm = self.rm;
        let ep_ctx = self.ep_context;
        let Some(cq) = self.tx_cq.as_ref().and_then(|b| self.cqs.get_mut(b.cq)) else {
            return;
        };
        let reserved = rm && reserved;
        let _ = match result {
            Ok(()) if completion => {
                let e = CqEntry::new(context, flags);
                if reserved {
                    cq.write_reserved(&e)
                } else {
                    cq.write(&e)
                }
            }
            Ok(()) => {
                if reserved {
                    cq.release();
                }
                Ok(())
            }
            Err(err) => {
                let ctx = if context == 0 { ep_ctx } else { context };
                let e = CqErrEntry::new(ctx, flags, err);
                if reserved {
                    cq.write_err_reserved(&e)
                } else {
                    cq.write_err(&e)
                }
            }
        };
    }

    /// A send that completed at once without a CQ entry (fi_inject) failed later: its
    /// error entry (fi_msg(3): no entry is written only "if the transfer completes
    /// successfully"). The counter counted it when it was posted, so only the CQ learns.
    pub(super) fn tx_failed_late(&mut self, context: u64, kind: TxKind, err: Errno) {
        let flags = match kind {
            TxKind::Msg => crate::cq::comp::SEND_MSG,
            TxKind::Tagged => crate::cq::comp::SEND_TAGGED,
            // Only message sends complete at once without an entry.
            _ => return,
        };
        let ctx = if context == 0 {
            self.ep_context
        } else {
            context
        };
        if let Some(cq) = self.tx_cq.as_ref().and_then(|b| self.cqs.get_mut(b.cq)) {
            let _ = cq.write_err(&CqErrEntry::new(ctx, flags, err));
        }
    }

    /// A receive finished: success, truncation (`olen` bytes dropped) or `err`.
    pub(super) fn rx_done(
        &mut self,
        entry: &CqEntry,
        err: Option<Errno>,
        olen: usize,
        completion: bool,
        reserved: bool,
    ) {
        let err = match err {
            Some(e) => Some(CqErrEntry::from_entry(entry, e)),
            None if olen > 0 => Some(CqErrEntry::truncated(entry, olen)),
            None => None,
        };
        if let Some(c) = self.cntr.recv.and_then(|c| self.cntrs.get_mut(c)) {
            if err.is_some() { c.inc_err() } else { c.inc() }
        }
        let rm = self.rm;
        let ep_ctx = self.ep_context;
        let Some(cq) = self.rx_cq.as_ref().and_then(|b| self.cqs.get_mut(b.cq)) else {
            return;
        };
        let reserved = rm && reserved;
        let _ = match (err, completion) {
            (Some(mut e), _) => {
                if e.op_context == 0 {
                    e.op_context = ep_ctx;
                }
                if reserved {
                    cq.write_err_reserved(&e)
                } else {
                    cq.write_err(&e)
                }
            }
            (None, true) => {
                if reserved {
                    cq.write_reserved(entry)
                } else {
                    cq.write(entry)
                }
            }
            (None, false) => {
                if reserved {
                    cq.release();
                }
                Ok(())
            }
        };
    }
}

/// How the link took a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sent {
    /// Handed to the link (or refused with an error: counted, treated as lost).
    Yes,
    /// Not now for this destination (next hop being resolved): try this peer later.
    NotNow,
    /// The link is full: stop transmitting until the next progress call.
    LinkFull,
}

/// The transmit side of the link, as the engine needs it.
pub(crate) trait TxPort {
    /// Sends one packet of exactly `len` bytes to `dst`; `write` fills it and returns
    /// its length.
    fn send(&mut self, dst: &EpAddr, len: usize, write: impl FnOnce(&mut [u8]) -> usize) -> Sent;
    /// Whether the last send was refused because the destination cannot be reached
    /// at all (it still returned [`Sent::Yes`]: a lost packet); clears the mark.
    fn take_unreachable(&mut self) -> bool;
}
