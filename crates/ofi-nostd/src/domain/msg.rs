//! Messages (fi_msg(3)): sends and receives without tags. The `*_any_*` posts are
//! shared with [`super::tagged`], which differ only in the tag.

use super::{Domain, obj};
use crate::ep::{Engine, EpHandle, RecvOp, TxOp, recv_directed, recv_source};
use crate::errno::{Errno, Result};
use crate::flags::{FI_ADDR_UNSPEC, FiAddr, Flags};
use crate::iov::IovList;
use crate::mem::{IoVec, Memory};
use crate::rdm::{RecvReq, SendReq};
use crate::storage::Storage;

/// A message operation's arguments (`struct fi_msg`).
#[derive(Debug, Clone, Copy)]
pub struct MsgArgs<'a> {
    /// The buffers.
    pub iov: &'a [IoVec],
    /// Local descriptors (`desc`), checked only under FI_MR_LOCAL.
    pub desc: &'a [u64],
    /// Destination (send) or source filter (receive; FI_ADDR_UNSPEC for any).
    pub addr: FiAddr,
    /// The application's context.
    pub context: u64,
    /// Remote CQ data (sent with FI_REMOTE_CQ_DATA).
    pub data: u64,
}

impl<'a> MsgArgs<'a> {
    /// One buffer to or from `addr`, with `context`.
    pub fn new(iov: &'a [IoVec], addr: FiAddr, context: u64) -> Self {
        MsgArgs {
            iov,
            desc: &[],
            addr,
            context,
            data: 0,
        }
    }
}

impl<S: Storage> Domain<S> {
    /// `fi_sendmsg`: queues one message to `msg.addr`. -FI_EOPBADSTATE before enable,
    /// -FI_EINVAL for too many iovs or an address not in the AV, -FI_EMSGSIZE beyond
    /// `max_msg_size` (the link MTU on DGRAM) or, with FI_INJECT, beyond `inject_size`,
    /// -FI_EAGAIN when the transmit queue or the CQ is full.
    pub fn sendmsg(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        msg: &MsgArgs<'_>,
        flags: Flags,
    ) -> Result<()> {
        self.post_send(h, mem, msg, flags, false)
    }

    /// `fi_send`: one buffer, the endpoint's default transmit flags.
    pub fn send(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        buf: IoVec,
        dest: FiAddr,
        context: u64,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.tx_flags;
        self.post_send(h, mem, &MsgArgs::new(&[buf], dest, context), flags, false)
    }

    /// `fi_sendv`.
    pub fn sendv(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        iov: &[IoVec],
        dest: FiAddr,
        context: u64,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.tx_flags;
        self.post_send(h, mem, &MsgArgs::new(iov, dest, context), flags, false)
    }

    /// `fi_senddata`: with remote CQ data.
    pub fn senddata(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        buf: IoVec,
        data: u64,
        dest: FiAddr,
        context: u64,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.tx_flags | Flags::REMOTE_CQ_DATA;
        let iov = [buf];
        let msg = MsgArgs {
            data,
            ..MsgArgs::new(&iov, dest, context)
        };
        self.post_send(h, mem, &msg, flags, false)
    }

    /// `fi_inject`: the buffer is copied before returning and no completion is written
    /// (fi_msg(3)); the send counter still counts it.
    pub fn inject(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        buf: IoVec,
        dest: FiAddr,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.tx_flags | Flags::INJECT;
        self.post_send(h, mem, &MsgArgs::new(&[buf], dest, 0), flags, true)
    }

    /// `fi_injectdata`.
    pub fn injectdata(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        buf: IoVec,
        data: u64,
        dest: FiAddr,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.tx_flags | Flags::INJECT | Flags::REMOTE_CQ_DATA;
        let iov = [buf];
        let msg = MsgArgs {
            data,
            ..MsgArgs::new(&iov, dest, 0)
        };
        self.post_send(h, mem, &msg, flags, true)
    }

    fn post_send(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        msg: &MsgArgs<'_>,
        flags: Flags,
        no_completion: bool,
    ) -> Result<()> {
        self.post_any_send(h, mem, msg, None, flags, no_completion)
    }

    // Always inline: every send call is a thin wrapper over this, and fat LTO stopped
    // inlining it into `tinject` once it grew (session 22: +170 instructions per engine
    // round trip, given back by this; the firmware image did not grow).
    #[inline(always)]
    pub(super) fn post_any_send(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        msg: &MsgArgs<'_>,
        tag: Option<u64>,
        flags: Flags,
        no_completion: bool,
    ) -> Result<()> {
        #[cfg(feature = "shared-ctx")]
        self.stx_admit(h)?;
        let ep = obj(self.eps.get_mut(h))?;
        ep.require_enabled()?;
        if flags.intersects(crate::ep::unsupported_tx_flags(ep.ep_type)) {
            return Err(Errno::EBADFLAGS);
        }
        let cap = if tag.is_some() {
            Flags::TAGGED
        } else {
            Flags::MSG
        };
        if !ep.caps.contains(cap)
            || (ep.caps.contains(Flags::RECV) && !ep.caps.contains(Flags::SEND))
        {
            return Err(Errno::EOPNOTSUPP);
        }
        let iov = IovList::new(msg.iov, ep.tx_iov_limit)?;
        let len = iov.total_len();
        if len > ep.max_msg_size {
            return Err(Errno::EMSGSIZE);
        }
        let injected = flags.contains(Flags::INJECT);
        if injected && len > ep.inject_size {
            return Err(Errno::EMSGSIZE);
        }
        if self.res.mrs.mr_mode().contains(crate::flags::MrMode::LOCAL) && !injected {
            for (i, v) in iov.as_slice().iter().enumerate() {
                self.res
                    .mrs
                    .check_local(msg.desc.get(i).copied().unwrap_or(0), *v, Flags::SEND)?;
            }
        }
        // A connected endpoint sends to its peer whatever `dest_addr` says (fi_msg(3)).
        let dest_addr = if ep.ep_type == crate::info::EpType::Msg {
            self.cm.send_peer(h.index())?
        } else {
            let av = obj(ep.av.and_then(|a| self.res.avs.get(a)))?;
            av.resolve_ep(msg.addr).map_err(|_| Errno::EINVAL)?
        };
        let tx_cq = obj(ep.tx_cq.as_ref())?;
        let tx_cq_h = tx_cq.cq;
        let completion = !no_completion && (!tx_cq.selective || flags.contains(Flags::COMPLETION));
        let cq = obj(self.res.cqs.get_mut(tx_cq_h))?;
        let reserved = self.res.rm_enabled && !no_completion;
        if reserved {
            cq.try_reserve()?;
        }
        let data = flags.contains(Flags::REMOTE_CQ_DATA).then_some(msg.data);
        if ep.is_rdm() {
            let req = SendReq {
                iov,
                len,
                context: msg.context,
                tag,
                data,
                flags,
                completion,
                reserved,
                rma: None,
                atomic: None,
            };
            let now = self.last_now;
            let (mut ctx, rdm) = self.res.rdm_ctx(ep);
            let r = match rdm {
                Some(r) => r.post_send(now, dest_addr, &req, mem, &mut ctx),
                None => Err(Errno::EINVAL),
            };
            if r.is_err()
                && reserved
                && let Some(cq) = self.res.cqs.get_mut(tx_cq_h)
            {
                cq.release();
            }
            return r;
        }
        let op = TxOp {
            iov,
            len,
            context: msg.context,
            flags,
            data,
            dest: msg.addr,
            dest_addr,
            injected,
            completion,
            reserved,
            canceled: false,
        };
        let pushed = match &mut ep.engine {
            Engine::Dgram(d) => d.post_send(op, mem),
            Engine::Rdm(_) => Err(Errno::EINVAL),
        };
        if let Err(e) = pushed {
            if reserved {
                cq.release();
            }
            return Err(e);
        }
        Ok(())
    }

    /// `fi_recvmsg`: posts a receive. -FI_EOPBADSTATE before enable, -FI_EINVAL for too
    /// many iovs, FI_MULTI_RECV with other than one buffer, or a source not in the AV
    /// (with FI_DIRECTED_RECV), -FI_EAGAIN when the receive queue or the CQ is full.
    /// On RDM endpoints a receive that matches a buffered unexpected message gets its
    /// data copied by the next [`Domain::progress`].
    pub fn recvmsg(&mut self, h: EpHandle<S>, msg: &MsgArgs<'_>, flags: Flags) -> Result<()> {
        self.post_any_recv(h, msg, None, flags)
    }

    /// `fi_recv`: one buffer, the endpoint's default receive flags.
    pub fn recv(&mut self, h: EpHandle<S>, buf: IoVec, src: FiAddr, context: u64) -> Result<()> {
        let flags = obj(self.eps.get(h))?.rx_flags;
        self.recvmsg(h, &MsgArgs::new(&[buf], src, context), flags)
    }

    /// `fi_recvv`.
    pub fn recvv(
        &mut self,
        h: EpHandle<S>,
        iov: &[IoVec],
        src: FiAddr,
        context: u64,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.rx_flags;
        self.recvmsg(h, &MsgArgs::new(iov, src, context), flags)
    }

    /// A receive posted to endpoint `h`: to its shared receive context if it has one,
    /// else to its own queues.
    #[inline(always)]
    pub(super) fn post_any_recv(
        &mut self,
        h: EpHandle<S>,
        msg: &MsgArgs<'_>,
        tag: Option<(u64, u64)>,
        flags: Flags,
    ) -> Result<()> {
        self.post_recv_to(h, msg, tag, flags, true, None)
    }

    /// A receive posted to endpoint `h`'s own queues (what a shared receive context
    /// hands it); `min_free`: the context's FI_OPT_MIN_MULTI_RECV, if it set one.
    #[cfg(feature = "shared-ctx")]
    pub(super) fn post_own_recv(
        &mut self,
        h: EpHandle<S>,
        msg: &MsgArgs<'_>,
        tag: Option<(u64, u64)>,
        flags: Flags,
        min_free: Option<usize>,
    ) -> Result<()> {
        self.post_recv_to(h, msg, tag, flags, false, min_free)
    }

    /// The receive post; `shared`: to the endpoint's shared receive context if bound
    /// (one test of a field of the endpoint already loaded, folded away for the
    /// context's own hand-offs); `min_free` overrides the endpoint's
    /// FI_OPT_MIN_MULTI_RECV.
    #[inline(always)]
    fn post_recv_to(
        &mut self,
        h: EpHandle<S>,
        msg: &MsgArgs<'_>,
        tag: Option<(u64, u64)>,
        flags: Flags,
        shared: bool,
        min_free: Option<usize>,
    ) -> Result<()> {
        let ep = obj(self.eps.get_mut(h))?;
        #[cfg(feature = "shared-ctx")]
        if shared && let Some(s) = ep.srx {
            return self.srx_recvmsg(s, msg, tag, flags);
        }
        #[cfg(not(feature = "shared-ctx"))]
        let _ = shared;
        ep.require_enabled()?;
        if ep.rx_cq.is_none() {
            // Nowhere to report the receive's completion, nor its failure.
            return Err(Errno::ENOCQ);
        }
        let cap = if tag.is_some() {
            Flags::TAGGED
        } else {
            Flags::MSG
        };
        if !ep.caps.contains(cap)
            || (ep.caps.contains(Flags::SEND) && !ep.caps.contains(Flags::RECV))
        {
            return Err(Errno::EOPNOTSUPP);
        }
        let no_data = flags.intersects(Flags::PEEK | Flags::DISCARD)
            || (flags.contains(Flags::CLAIM) && flags.contains(Flags::DISCARD));
        let iov = if no_data {
            IovList::new(msg.iov, ep.rx_iov_limit).unwrap_or_default()
        } else {
            IovList::new(msg.iov, ep.rx_iov_limit)?
        };
        if flags.contains(Flags::MULTI_RECV)
            && (iov.as_slice().len() != 1 || !ep.caps.contains(Flags::MULTI_RECV) || tag.is_some())
        {
            return Err(Errno::EINVAL);
        }
        if flags.intersects(Flags::PEEK | Flags::CLAIM | Flags::DISCARD)
            && (tag.is_none() || !ep.is_rdm())
        {
            return Err(Errno::EINVAL);
        }
        if self.res.mrs.mr_mode().contains(crate::flags::MrMode::LOCAL) && !no_data {
            for (i, v) in iov.as_slice().iter().enumerate() {
                self.res
                    .mrs
                    .check_local(msg.desc.get(i).copied().unwrap_or(0), *v, Flags::RECV)?;
            }
        }
        let tagged = tag.is_some();
        if msg.addr == FI_ADDR_UNSPEC
            && ep.caps.contains(Flags::EXACT_DIRECTED_RECV)
            && recv_directed(ep.caps, ep.ep_type, tagged, flags)
        {
            // FI_EXACT_DIRECTED_RECV refuses "any source" where it directs.
            return Err(Errno::EINVAL);
        }
        let avs = &self.res.avs;
        let av = || ep.av.and_then(|a| avs.get(a));
        let src = recv_source::<S>(av, ep.caps, ep.ep_type, tagged, msg.addr, flags)?;
        let rx_cq = obj(ep.rx_cq.as_ref())?;
        let (rx_cq_h, selective) = (rx_cq.cq, rx_cq.selective);
        let cq = obj(self.res.cqs.get_mut(rx_cq_h))?;
        if self.res.rm_enabled {
            cq.try_reserve()?;
        }
        if ep.is_rdm() {
            let req = RecvReq {
                iov,
                src,
                context: msg.context,
                tag,
                flags,
                completion: !selective || flags.contains(Flags::COMPLETION),
                reserved: self.res.rm_enabled,
                min_free: min_free.unwrap_or(ep.min_multi_recv),
            };
            let (mut ctx, rdm) = self.res.rdm_ctx(ep);
            let r = match rdm {
                Some(r) => r.post_recv(&req, &mut ctx),
                None => Err(Errno::EINVAL),
            };
            if r.is_err()
                && self.res.rm_enabled
                && let Some(cq) = self.res.cqs.get_mut(rx_cq_h)
            {
                cq.release();
            }
            return r;
        }
        let op = RecvOp {
            iov,
            context: msg.context,
            flags,
            used: 0,
            src,
            min_free: min_free.unwrap_or(ep.min_multi_recv),
        };
        let posted = match &mut ep.engine {
            Engine::Dgram(d) => d.post_recv(src, op),
            Engine::Rdm(_) => Err(Errno::EAGAIN),
        };
        if let Err(e) = posted {
            if self.res.rm_enabled {
                cq.release();
            }
            return Err(e);
        }
        Ok(())
    }
}
