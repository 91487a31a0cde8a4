//! Shared transmit and receive contexts on their domain ([`crate::ep::stx`],
//! [`crate::ep::srx`]): open, bind to endpoints, post to and cancel on a shared receive
//! context, hand its receives to the bound endpoints that have their messages, and
//! close.

use super::{Domain, obj};
use crate::cq::{CqErrEntry, comp};
use crate::ep::srx::{
    Held, Lent, MAX_SHARED_BINDINGS, MAX_SHARED_CTX, MAX_SRX_MULTI, Srx, SrxRecv,
};
use crate::ep::stx::Stx;
use crate::ep::{Engine, EpHandle, EpState, recv_source};
use crate::errno::{Errno, Result};
use crate::fid::{AvObj, Objects};
use crate::flags::{FI_ADDR_UNSPEC, FiAddr, Flags};
use crate::info::{EpType, RxAttr, TxAttr};
use crate::iov::{IOV_LIMIT, IovList};
use crate::pool::{Handle, Pool, Slot};
use crate::rdm::SrxOffer;
use crate::storage::Storage;

use super::msg::MsgArgs;

/// Handle of a shared receive context.
pub type SrxHandle<S> = Handle<Srx<S>>;
/// Handle of a shared transmit context.
pub type StxHandle<S> = Handle<Stx<S>>;

/// The primary capabilities a shared context's `caps` limits.
const PRIMARY: Flags = Flags::MSG
    .union(Flags::TAGGED)
    .union(Flags::RMA)
    .union(Flags::ATOMIC);

/// A domain's shared contexts.
pub(super) struct Shared<S: Storage> {
    srxs: Objects<S, Srx<S>>,
    stxs: Objects<S, Stx<S>>,
    /// Receives waiting in every shared receive context: a pass looks for their
    /// messages only when some wait.
    pub(super) waiting: usize,
    /// Multi-recv buffers lent to endpoints by every shared receive context: a pass
    /// also looks for endpoints to lend them to next while some are.
    pub(super) lent: usize,
}

impl<S: Storage> Shared<S> {
    /// Pools of [`MAX_SHARED_CTX`] contexts of each kind from `store`.
    pub(super) fn new(store: &mut S) -> Result<Self> {
        Ok(Shared {
            srxs: Pool::new(
                store
                    .slice(MAX_SHARED_CTX, || Slot::VACANT)
                    .ok_or(Errno::ENOMEM)?,
            ),
            stxs: Pool::new(
                store
                    .slice(MAX_SHARED_CTX, || Slot::VACANT)
                    .ok_or(Errno::ENOMEM)?,
            ),
            waiting: 0,
            lent: 0,
        })
    }

    /// Whether no shared context is open (the domain may close).
    pub(super) fn is_empty(&self) -> bool {
        self.srxs.is_empty() && self.stxs.is_empty()
    }

    /// Whether a pass has shared receives to match: some wait, or are lent.
    #[inline(always)]
    pub(super) fn busy(&self) -> bool {
        self.waiting + self.lent > 0
    }

    /// Context `sh`'s waiting receives for a receiving pass of an endpoint of type
    /// `t` bound to it, while any wait (`rdm::Ctx::srx_take`).
    #[inline]
    pub(super) fn offer(&mut self, sh: SrxHandle<S>, t: EpType) -> Option<Lend<'_, S>> {
        if self.waiting == 0 {
            return None;
        }
        let srx = self.srxs.get_mut(sh)?;
        Some(Lend {
            srx,
            waiting: &mut self.waiting,
            ep_type: t,
        })
    }
}

/// A shared receive context's waiting receives, lent to a receiving pass of one
/// endpoint bound to it.
pub(super) struct Lend<'a, S: Storage> {
    srx: &'a mut Srx<S>,
    /// The domain's count of receives waiting in every shared receive context.
    waiting: &'a mut usize,
    /// The endpoint's type (a connected endpoint ignores receive addresses).
    ep_type: EpType,
}

impl<S: Storage> SrxOffer<S> for Lend<'_, S> {
    fn take(
        &mut self,
        tagged: bool,
        src: FiAddr,
        tag: u64,
        av: Option<&AvObj<S>>,
        caps: Flags,
        reserve: &mut dyn FnMut() -> bool,
    ) -> Option<(IovList, u64, Flags)> {
        let t = self.ep_type;
        let i = self.srx.find(|r| {
            let (rtag, ignore) = r.tag.unwrap_or((0, 0));
            r.tag.is_some() == tagged
                && recv_source::<S>(|| av, caps, t, tagged, r.addr, r.flags)
                    .is_ok_and(|rsrc| crate::matching::matches(rsrc, rtag, ignore, src, tag))
        })?;
        if self.srx.get(i).is_none_or(|r| r.is_multi()) || !reserve() {
            return None;
        }
        let r = self.srx.remove(i)?;
        *self.waiting -= 1;
        Some((r.iov, r.context, r.flags))
    }
}

/// The source receive `r` filters on at endpoint `ep` ([`recv_source`], as the
/// endpoint's own post of it would): -FI_EINVAL for an address its AV does not have.
fn directed_src<S: Storage>(
    avs: &Objects<S, AvObj<S>>,
    ep: &crate::ep::EpObj<S>,
    r: &SrxRecv,
) -> Result<FiAddr> {
    let av = || ep.av.and_then(|a| avs.get(a));
    recv_source::<S>(av, ep.caps, ep.ep_type, r.tag.is_some(), r.addr, r.flags)
}

impl<S: Storage> Domain<S> {
    /// `fi_stx_context`: a shared transmit context with `attr`'s size, inject size,
    /// iov limit, capabilities and operation flags (0: the domain's defaults).
    /// -FI_EINVAL beyond what the domain offers, -FI_ENOMEM when
    /// [`MAX_SHARED_CTX`] are open.
    pub fn stx_open(&mut self, attr: &TxAttr, context: u64) -> Result<StxHandle<S>> {
        let pc = self.cfg;
        let or = |v: usize, d: usize| if v == 0 { d } else { v };
        let size = or(attr.size, pc.tx_size);
        let inject_size = or(attr.inject_size, pc.inject_size);
        let iov_limit = or(attr.iov_limit, IOV_LIMIT);
        if size > pc.tx_size
            || inject_size > pc.inject_size
            || iov_limit > IOV_LIMIT
            || !crate::ep::TX_OP_FLAGS.contains(attr.op_flags)
            || !(attr.caps & PRIMARY).difference(self.info.caps).is_empty()
        {
            return Err(Errno::EINVAL);
        }
        let stx = Stx {
            context,
            caps: attr.caps & PRIMARY,
            op_flags: attr.op_flags,
            size,
            inject_size,
            iov_limit,
            eps: heapless::Vec::new(),
        };
        self.shared.stxs.insert(stx).map_err(|_| Errno::ENOMEM)
    }

    /// The shared transmit context `h` names.
    pub fn stx(&self, h: StxHandle<S>) -> Result<&Stx<S>> {
        obj(self.shared.stxs.get(h))
    }

    /// `fi_close` of a shared transmit context: -FI_EBUSY while an endpoint bound to
    /// it is open.
    pub fn stx_close(&mut self, h: StxHandle<S>) -> Result<()> {
        if obj(self.shared.stxs.get(h))?.bound() > 0 {
            return Err(Errno::EBUSY);
        }
        self.shared.stxs.remove(h);
        Ok(())
    }

    /// `fi_srx_context`: a shared receive context holding up to `attr.size` waiting
    /// receives (0: the domain's `rx_size`), with `attr`'s capabilities, operation
    /// flags and iov limit. -FI_EINVAL beyond what the domain offers, -FI_ENOMEM when
    /// [`MAX_SHARED_CTX`] are open or storage has no room.
    pub fn srx_open(&mut self, attr: &RxAttr, context: u64) -> Result<SrxHandle<S>> {
        let pc = self.cfg;
        let size = if attr.size == 0 {
            pc.rx_size
        } else {
            attr.size
        };
        let iov_limit = if attr.iov_limit == 0 {
            IOV_LIMIT
        } else {
            attr.iov_limit
        };
        if size > pc.rx_size
            || iov_limit > IOV_LIMIT
            || !crate::ep::RX_OP_FLAGS.contains(attr.op_flags)
            || !(attr.caps & PRIMARY).difference(self.info.caps).is_empty()
        {
            return Err(Errno::EINVAL);
        }
        if self.shared.srxs.is_full() {
            return Err(Errno::ENOMEM);
        }
        let srx = Srx::new(
            &mut self.store,
            size,
            attr.caps & PRIMARY,
            attr.op_flags,
            iov_limit,
            context,
        )?;
        self.shared.srxs.insert(srx).map_err(|_| Errno::ENOMEM)
    }

    /// The shared receive context `h` names.
    pub fn srx(&self, h: SrxHandle<S>) -> Result<&Srx<S>> {
        obj(self.shared.srxs.get(h))
    }

    /// The shared receive context `h` names, to set options on.
    pub fn srx_mut(&mut self, h: SrxHandle<S>) -> Result<&mut Srx<S>> {
        obj(self.shared.srxs.get_mut(h))
    }

    /// `fi_close` of a shared receive context: -FI_EBUSY while an endpoint bound to
    /// it is open. Receives still waiting are dropped without completions (as an
    /// endpoint's are when it closes).
    pub fn srx_close(&mut self, h: SrxHandle<S>) -> Result<()> {
        let s = obj(self.shared.srxs.get_mut(h))?;
        if s.bound() > 0 {
            return Err(Errno::EBUSY);
        }
        self.shared.waiting -= s.waiting();
        self.shared.lent -= s.lent.len();
        s.clear();
        self.shared.srxs.remove(h);
        Ok(())
    }

    /// Whether endpoint `h` may post another transmit: -FI_EAGAIN when it is bound to
    /// a shared transmit context whose `size` its endpoints' unfinished operations
    /// fill. One test of a field for an endpoint without one.
    #[inline(always)]
    pub(super) fn stx_admit(&self, h: EpHandle<S>) -> Result<()> {
        match self.eps.get(h).and_then(|ep| ep.stx) {
            None => Ok(()),
            Some(s) if self.stx_left(s) == 0 => Err(Errno::EAGAIN),
            Some(_) => Ok(()),
        }
    }

    /// What is left of shared transmit context `s`'s capacity.
    #[inline(never)]
    pub(super) fn stx_left(&self, s: StxHandle<S>) -> usize {
        let Some(stx) = self.shared.stxs.get(s) else {
            return usize::MAX;
        };
        let used: usize = stx
            .eps
            .iter()
            .filter_map(|h| self.eps.get(*h))
            .map(|ep| ep.tx_in_use())
            .sum();
        stx.size.saturating_sub(used)
    }

    /// `fi_ep_bind` of a shared transmit context: before enable (-FI_EOPBADSTATE), to
    /// an endpoint opened with `tx_ctx_cnt` = FI_SHARED_CONTEXT and not bound to one
    /// yet, whose transmit attributes are within the context's (-FI_EINVAL otherwise).
    /// A scalable endpoint opened with a shared transmit side binds it to every
    /// context engine.
    pub fn ep_bind_stx(&mut self, h: EpHandle<S>, stx: StxHandle<S>) -> Result<()> {
        if self.ep(h)?.sep.is_some() {
            return self.sep_bind_shared(
                h,
                |d, e| d.bind_stx_one(e, stx),
                |d, e| {
                    if let Some(s) = d.eps.get_mut(e).and_then(|ep| ep.stx.take())
                        && let Some(s) = d.shared.stxs.get_mut(s)
                    {
                        s.unbind(e);
                    }
                },
            );
        }
        self.bind_stx_one(h, stx)
    }

    fn bind_stx_one(&mut self, h: EpHandle<S>, stx: StxHandle<S>) -> Result<()> {
        let ep = obj(self.eps.get_mut(h))?;
        if ep.state != EpState::Disabled {
            return Err(Errno::EOPBADSTATE);
        }
        if !ep.shared_tx || ep.stx.is_some() {
            return Err(Errno::EINVAL);
        }
        let size = ep.tx_size_left();
        let s = obj(self.shared.stxs.get_mut(stx))?;
        s.bind(
            h,
            ep.caps & PRIMARY,
            size,
            ep.inject_size,
            ep.tx_iov_limit.min(IOV_LIMIT),
        )?;
        ep.stx = Some(stx);
        Ok(())
    }

    /// `fi_ep_bind` of a shared receive context: before enable (-FI_EOPBADSTATE), to an
    /// endpoint opened with `rx_ctx_cnt` = FI_SHARED_CONTEXT and not bound to one yet,
    /// of the type of the endpoints already bound, whose receive capabilities and iov
    /// limit are within the context's (-FI_EINVAL). Connected (FI_EP_MSG) endpoints
    /// share one too, as ofi_rxm's do: each takes the receives for its connection's
    /// messages.
    /// A scalable endpoint opened with a shared receive side binds it to every
    /// context engine.
    pub fn ep_bind_srx(&mut self, h: EpHandle<S>, srx: SrxHandle<S>) -> Result<()> {
        if self.ep(h)?.sep.is_some() {
            return self.sep_bind_shared(
                h,
                |d, e| d.bind_srx_one(e, srx),
                |d, e| {
                    if let Some(s) = d.eps.get_mut(e).and_then(|ep| ep.srx.take())
                        && let Some(s) = d.shared.srxs.get_mut(s)
                    {
                        s.unbind(e);
                    }
                },
            );
        }
        self.bind_srx_one(h, srx)
    }

    fn bind_srx_one(&mut self, h: EpHandle<S>, srx: SrxHandle<S>) -> Result<()> {
        let ep = obj(self.eps.get_mut(h))?;
        if ep.state != EpState::Disabled {
            return Err(Errno::EOPBADSTATE);
        }
        if !ep.shared_rx || ep.srx.is_some() {
            return Err(Errno::EINVAL);
        }
        let s = obj(self.shared.srxs.get_mut(srx))?;
        let caps = ep.caps & (Flags::MSG | Flags::TAGGED);
        if (!s.caps.is_empty() && !s.caps.contains(caps))
            || ep.rx_iov_limit.min(IOV_LIMIT) > s.iov_limit
        {
            return Err(Errno::EINVAL);
        }
        s.bind(h, ep.ep_type)?;
        ep.srx = Some(srx);
        Ok(())
    }

    /// What `fi_enable` checks of an endpoint's shared contexts: one must be bound
    /// where it was opened with FI_SHARED_CONTEXT (-FI_EOPBADSTATE), and every
    /// endpoint of a shared receive context shares its AV (-FI_EINVAL).
    pub(super) fn shared_enable(&mut self, h: EpHandle<S>) -> Result<()> {
        let ep = obj(self.eps.get(h))?;
        if (ep.shared_tx && ep.stx.is_none()) || (ep.shared_rx && ep.srx.is_none()) {
            return Err(Errno::EOPBADSTATE);
        }
        if let Some(s) = ep.srx {
            let av = ep.av;
            let s = obj(self.shared.srxs.get_mut(s))?;
            match s.av {
                Some(a) if Some(a) != av => return Err(Errno::EINVAL),
                _ => s.av = av,
            }
        }
        Ok(())
    }

    /// An endpoint closes: it leaves its shared contexts (which may close then, while
    /// the endpoint still lingers to acknowledge).
    pub(super) fn shared_detach(&mut self, h: EpHandle<S>) {
        let Some(ep) = self.eps.get_mut(h) else {
            return;
        };
        if let Some(s) = ep.stx.take()
            && let Some(s) = self.shared.stxs.get_mut(s)
        {
            s.unbind(h);
        }
        if let Some(sh) = ep.srx.take() {
            self.srx_reclaim(sh, h);
            if let Some(s) = self.shared.srxs.get_mut(sh) {
                s.unbind(h);
            }
        }
    }

    /// Endpoint `h` leaves shared receive context `sh`: the multi-recv buffers lent
    /// to it that no message is arriving into go back to the context, first.
    fn srx_reclaim(&mut self, sh: SrxHandle<S>, h: EpHandle<S>) {
        let Some(s) = self.shared.srxs.get(sh) else {
            return;
        };
        let lent: heapless::Vec<Lent<S>, MAX_SRX_MULTI> = s.lent.clone();
        for l in lent.iter().rev().filter(|l| l.ep == h) {
            self.srx_unlend(sh, l);
            if self.srx(sh).is_ok_and(|s| s.waiting() < s.capacity())
                && let Held::Taken(rest, _) = self.multi_held(h, &l.recv, true)
            {
                let r = SrxRecv {
                    iov: IovList::one(rest),
                    ..l.recv
                };
                if let Some(s) = self.shared.srxs.get_mut(sh)
                    && s.push_front(r).is_ok()
                {
                    self.shared.waiting += 1;
                }
            }
        }
    }

    /// The shared receive context endpoint `h` is bound to, if any.
    pub fn ep_srx(&self, h: EpHandle<S>) -> Result<Option<SrxHandle<S>>> {
        Ok(obj(self.eps.get(h))?.srx)
    }

    /// `fi_recvmsg` / `fi_trecvmsg` on a shared receive context (`tag` for tagged
    /// receives): the receive goes at once to a bound endpoint that has a matching
    /// message waiting (in bind order), else it waits in the context, in posting
    /// order, for the next pass that finds one. Its completion is on that endpoint's
    /// receive CQ. FI_PEEK looks at every bound endpoint (the first one reports
    /// -FI_ENOMSG when none has the message), FI_CLAIM goes to the endpoint holding
    /// the claim (-FI_ENOMSG from the call if none). -FI_EINVAL for too many iovs, an
    /// unknown source address or flags the context cannot take, -FI_EOPNOTSUPP for a
    /// kind of receive its capabilities leave out, -FI_ENOCQ for FI_PEEK with no
    /// endpoint bound, -FI_EAGAIN when full. An FI_MULTI_RECV buffer (one iov,
    /// untagged: -FI_EINVAL otherwise; -FI_EAGAIN beyond [`MAX_SRX_MULTI`]) is lent
    /// to one endpoint at a time ([`crate::ep::srx`]).
    pub fn srx_recvmsg(
        &mut self,
        srx: SrxHandle<S>,
        msg: &MsgArgs<'_>,
        tag: Option<(u64, u64)>,
        flags: Flags,
    ) -> Result<()> {
        let multi = flags.contains(Flags::MULTI_RECV);
        if multi {
            if msg.iov.len() != 1 || tag.is_some() {
                return Err(Errno::EINVAL);
            }
            self.srx_prune(srx);
            if obj(self.shared.srxs.get(srx))?.multis() >= MAX_SRX_MULTI {
                return Err(Errno::EAGAIN);
            }
        }
        let s = obj(self.shared.srxs.get(srx))?;
        let cap = if tag.is_some() {
            Flags::TAGGED
        } else {
            Flags::MSG
        };
        if !s.caps.is_empty() && !s.caps.contains(cap) {
            return Err(Errno::EOPNOTSUPP);
        }
        let special = Flags::PEEK | Flags::CLAIM | Flags::DISCARD;
        if flags.intersects(special) && (tag.is_none() || s.ep_type == Some(EpType::Dgram)) {
            return Err(Errno::EINVAL);
        }
        let no_data = flags.intersects(Flags::PEEK | Flags::DISCARD);
        let iov = if no_data {
            IovList::new(msg.iov, s.iov_limit).unwrap_or_default()
        } else {
            IovList::new(msg.iov, s.iov_limit)?
        };
        if self.res.mrs.mr_mode().contains(crate::flags::MrMode::LOCAL) && !no_data {
            for (i, v) in iov.as_slice().iter().enumerate() {
                self.res
                    .mrs
                    .check_local(msg.desc.get(i).copied().unwrap_or(0), *v, Flags::RECV)?;
            }
        }
        if msg.addr != FI_ADDR_UNSPEC
            && let Some(av) = s.av.and_then(|a| self.res.avs.get(a))
        {
            av.resolve(msg.addr).map_err(|_| Errno::EINVAL)?;
        }
        let mut r = SrxRecv {
            iov,
            addr: msg.addr,
            context: msg.context,
            tag,
            flags,
            min_free: s.min_multi_recv(),
            ..SrxRecv::default()
        };
        for (d, s) in r.desc.iter_mut().zip(msg.desc) {
            *d = *s;
        }
        let eps: heapless::Vec<EpHandle<S>, MAX_SHARED_BINDINGS> = s.eps.clone();
        if flags.intersects(special) {
            return self.srx_special(&eps, &r);
        }
        for h in &eps {
            if self.srx_hand(*h, &r)? {
                if multi {
                    // The other endpoints' messages waiting for it, in turn.
                    self.srx_roam(srx);
                }
                return Ok(());
            }
        }
        obj(self.shared.srxs.get_mut(srx))?.push(r)?;
        self.shared.waiting += 1;
        Ok(())
    }

    /// FI_PEEK, FI_CLAIM and FI_DISCARD on a shared receive context.
    fn srx_special(&mut self, eps: &[EpHandle<S>], r: &SrxRecv) -> Result<()> {
        let claim = r.flags.contains(Flags::CLAIM) && !r.flags.contains(Flags::PEEK);
        let mut first = None;
        for h in eps {
            let Some(ep) = self.eps.get_mut(*h) else {
                continue;
            };
            if ep.state != EpState::Enabled {
                continue;
            }
            first = first.or(Some(*h));
            let Ok(src) = directed_src(&self.res.avs, ep, r) else {
                continue;
            };
            let (tagged, (tag, ignore)) = (r.tag.is_some(), r.tag.unwrap_or((0, 0)));
            let (ctx, rdm) = self.res.rdm_ctx(ep);
            let here = match rdm {
                Some(e) if claim => e.holds_claim(r.context),
                Some(e) => e.ux_matches(tagged, src, tag, ignore, &ctx),
                None => false,
            };
            if here {
                return self.post_own(*h, r);
            }
        }
        match first {
            // Nothing claimed with this context anywhere.
            Some(_) if claim => Err(Errno::ENOMSG),
            // The first endpoint's engine reports -FI_ENOMSG on its CQ.
            Some(h) => self.post_own(h, r),
            None => Err(Errno::ENOCQ),
        }
    }

    /// Posts `r` to endpoint `h`'s own queues; a multi-recv buffer is lent to it.
    fn post_own(&mut self, h: EpHandle<S>, r: &SrxRecv) -> Result<()> {
        let n = r.iov().len().min(IOV_LIMIT);
        let m = MsgArgs {
            iov: r.iov(),
            desc: &r.desc[..n],
            addr: r.addr,
            context: r.context,
            data: 0,
        };
        self.post_own_recv(h, &m, r.tag, r.flags, r.min_free)?;
        if r.is_multi()
            && let Some(sh) = self.eps.get(h).and_then(|ep| ep.srx)
            && let Some(s) = self.shared.srxs.get_mut(sh)
        {
            let l = Lent { ep: h, recv: *r };
            // Room was made when it was posted (`MAX_SRX_MULTI`); a record of the
            // same buffer there before it was released and posted again is this one.
            if !s.lent.iter().any(|x| x.same(&l)) && s.lent.push(l).is_ok() {
                self.shared.lent += 1;
            }
        }
        Ok(())
    }

    /// What endpoint `h` holds of the multi-recv buffer `r` lent to it; `take`: takes
    /// it back if idle (its CQ reservation released).
    fn multi_held(&mut self, h: EpHandle<S>, r: &SrxRecv, take: bool) -> Held {
        let rm = self.res.rm_enabled;
        let Some(ep) = self.eps.get_mut(h) else {
            return Held::Gone;
        };
        let held = match &mut ep.engine {
            Engine::Rdm(e) => e.multi_held(r.context, r.base(), take),
            Engine::Dgram(d) => d.multi_held(r.context, r.base(), take, rm),
        };
        if let Held::Taken(_, true) = held
            && let Some(cq) = ep.rx_cq.as_ref().and_then(|b| self.res.cqs.get_mut(b.cq))
        {
            cq.release();
        }
        held
    }

    /// Forgets lent buffer `l` of context `sh`.
    fn srx_unlend(&mut self, sh: SrxHandle<S>, l: &Lent<S>) {
        let Some(s) = self.shared.srxs.get_mut(sh) else {
            return;
        };
        if let Some(i) = s.lent.iter().position(|x| x.same(l)) {
            s.lent.remove(i);
            self.shared.lent -= 1;
        }
    }

    /// Forgets the buffers context `sh` lent that their endpoints released.
    fn srx_prune(&mut self, sh: SrxHandle<S>) {
        let Some(s) = self.shared.srxs.get(sh) else {
            return;
        };
        let lent: heapless::Vec<Lent<S>, MAX_SRX_MULTI> = s.lent.clone();
        for l in &lent {
            if self.multi_held(l.ep, &l.recv, false) == Held::Gone {
                self.srx_unlend(sh, l);
            }
        }
    }

    /// Whether endpoint `h` (enabled, RDM) has a message waiting that `r` takes.
    fn srx_takes(&mut self, h: EpHandle<S>, r: &SrxRecv) -> bool {
        let Some(ep) = self.eps.get_mut(h) else {
            return false;
        };
        if ep.state != EpState::Enabled || (r.is_multi() && !ep.caps.contains(Flags::MULTI_RECV)) {
            return false;
        }
        let Ok(src) = directed_src(&self.res.avs, ep, r) else {
            return false;
        };
        let (tagged, (tag, ignore)) = (r.tag.is_some(), r.tag.unwrap_or((0, 0)));
        let (ctx, rdm) = self.res.rdm_ctx(ep);
        rdm.is_some_and(|e| e.ux_matches(tagged, src, tag, ignore, &ctx))
    }

    /// Lends the multi-recv buffers of context `sh` on: an RDM endpoint with messages
    /// waiting that one takes, and none lent to it, gets the free part of one lent to
    /// another endpoint that no message is arriving into.
    fn srx_roam(&mut self, sh: SrxHandle<S>) {
        self.srx_prune(sh);
        let Some(s) = self.shared.srxs.get(sh) else {
            return;
        };
        if s.lent.is_empty() || s.ep_type == Some(EpType::Dgram) {
            return;
        }
        let eps = s.eps.clone();
        for e in &eps {
            let Some(s) = self.shared.srxs.get(sh) else {
                return;
            };
            if s.lent.iter().any(|l| l.ep == *e) || s.waiting() == s.capacity() {
                continue;
            }
            let lent: heapless::Vec<Lent<S>, MAX_SRX_MULTI> = s.lent.clone();
            for l in lent.iter().filter(|l| l.ep != *e) {
                if !self.srx_takes(*e, &l.recv) {
                    continue;
                }
                if let Held::Taken(rest, _) = self.multi_held(l.ep, &l.recv, true) {
                    self.srx_relend(sh, l, rest, *e);
                    break;
                }
            }
        }
    }

    /// Lends the free part `rest` of buffer `l`, taken back, to endpoint `to`; back
    /// in the context, first, if `to` has no room for it.
    fn srx_relend(
        &mut self,
        sh: SrxHandle<S>,
        l: &Lent<S>,
        rest: crate::mem::IoVec,
        to: EpHandle<S>,
    ) {
        self.srx_unlend(sh, l);
        let r = SrxRecv {
            iov: IovList::one(rest),
            ..l.recv
        };
        if self.post_own(to, &r).is_err()
            && let Some(s) = self.shared.srxs.get_mut(sh)
            && s.push_front(r).is_ok()
        {
            self.shared.waiting += 1;
        }
    }

    /// Hands `r` to endpoint `h` if its engine has a message `r` takes: `Ok(true)`
    /// once posted there, `Ok(false)` if it has none (or is not enabled, or is a
    /// DGRAM endpoint, which takes receives as datagrams arrive), -FI_EAGAIN when it
    /// has one but no room yet.
    fn srx_hand(&mut self, h: EpHandle<S>, r: &SrxRecv) -> Result<bool> {
        if !self.srx_takes(h, r) {
            return Ok(false);
        }
        self.post_own(h, r).map(|()| true)
    }

    /// A pass's matching of waiting shared receives to the messages that arrived at
    /// the bound RDM endpoints, each receive in posting order to the first endpoint
    /// (in bind order) that has a message it takes. Runs only while receives wait;
    /// returns whether it handed one over.
    #[inline(never)]
    pub(super) fn srx_progress(&mut self) -> bool {
        let mut any_handed = false;
        let handles: heapless::Vec<SrxHandle<S>, MAX_SHARED_CTX> = self
            .shared
            .srxs
            .iter()
            .filter(|(_, s)| {
                (s.waiting() > 0 || !s.lent.is_empty()) && s.ep_type != Some(EpType::Dgram)
            })
            .map(|(h, _)| h)
            .collect();
        for sh in handles {
            let Some(s) = self.shared.srxs.get(sh) else {
                continue;
            };
            let eps = s.eps.clone();
            let any = eps.iter().any(|h| {
                self.eps
                    .get(*h)
                    .and_then(|e| e.rdm())
                    .is_some_and(|r| r.unexpected_len() > 0)
            });
            if !any {
                continue;
            }
            let mut i = 0;
            while let Some(r) = self.shared.srxs.get(sh).and_then(|s| s.get(i)) {
                let mut handed = false;
                for h in &eps {
                    if let Ok(true) = self.srx_hand(*h, &r) {
                        handed = true;
                        break;
                    }
                }
                if handed {
                    if let Some(s) = self.shared.srxs.get_mut(sh) {
                        s.remove(i);
                    }
                    self.shared.waiting -= 1;
                    any_handed = true;
                } else {
                    i += 1;
                }
            }
            self.srx_roam(sh);
        }
        any_handed
    }

    /// A datagram arrives for the DGRAM endpoint at pool slot `slot`: bound to a
    /// shared receive context and with no receive of its own, it takes the context's
    /// oldest waiting receive that names no other source, else the free part of a
    /// multi-recv buffer lent to another endpoint.
    #[inline(never)]
    pub(super) fn srx_feed(&mut self, slot: usize, from: &crate::addr::EpAddr) {
        let Some((h, ep)) = self.eps.get_by_index(slot) else {
            return;
        };
        let (Some(sh), Engine::Dgram(d)) = (ep.srx, &ep.engine) else {
            return;
        };
        if !d.rx.is_empty() || ep.state != EpState::Enabled {
            return;
        }
        let directed = ep.caps.contains(Flags::DIRECTED_RECV);
        let av = ep.av.and_then(|a| self.res.avs.get(a));
        let from = av.map_or(FI_ADDR_UNSPEC, |av| av.message_source(from, true).0);
        let same = |a: FiAddr| av.is_some_and(|av| av.split_rx(a).0 == from);
        let Some(s) = self.shared.srxs.get(sh) else {
            return;
        };
        let takes = |r: &SrxRecv| !directed || r.addr == FI_ADDR_UNSPEC || same(r.addr);
        let pick = (0..s.waiting()).find(|&i| s.get(i).is_some_and(|r| takes(&r)));
        let Some(i) = pick else {
            let lent: heapless::Vec<Lent<S>, MAX_SRX_MULTI> = s
                .lent
                .iter()
                .filter(|l| l.ep != h && takes(&l.recv))
                .copied()
                .collect();
            for l in &lent {
                match self.multi_held(l.ep, &l.recv, true) {
                    Held::Taken(rest, _) => return self.srx_relend(sh, l, rest, h),
                    Held::Gone => self.srx_unlend(sh, l),
                    Held::Busy | Held::Idle => {}
                }
            }
            return;
        };
        let Some(r) = s.get(i) else {
            return;
        };
        if self.post_own(h, &r).is_ok() {
            if let Some(s) = self.shared.srxs.get_mut(sh) {
                s.remove(i);
            }
            self.shared.waiting -= 1;
        }
    }

    /// `fi_cancel` on a shared receive context: a receive still waiting in it
    /// completes with FI_ECANCELED on the receive CQ of its first bound endpoint (the
    /// context has no CQ of its own), one already handed to an endpoint as that
    /// endpoint's receives do. Returns 0 either way.
    pub fn srx_cancel(&mut self, srx: SrxHandle<S>, context: u64) -> Result<()> {
        let s = obj(self.shared.srxs.get_mut(srx))?;
        if let Some(i) = s.position(context) {
            let r = s.remove(i).unwrap_or_default();
            self.shared.waiting -= 1;
            let first = s.eps.first().copied();
            let cq = first
                .and_then(|h| self.eps.get(h))
                .and_then(|ep| ep.rx_cq.as_ref())
                .and_then(|b| self.res.cqs.get_mut(b.cq));
            if let Some(cq) = cq {
                let flags = comp::recv(r.tag.is_some(), false, false);
                let mut e = CqErrEntry::new(r.context, flags, Errno::ECANCELED);
                e.buf = r.iov().first().map_or(0, |v| v.addr);
                let _ = cq.write_err(&e);
            }
            return Ok(());
        }
        let eps = s.eps.clone();
        for h in eps {
            let Some(ep) = self.eps.get_mut(h) else {
                continue;
            };
            match &mut ep.engine {
                Engine::Dgram(d) => {
                    if d.rx.find_by(|op| op.context == context).is_some() {
                        let rx_cq = ep.rx_cq.as_ref().and_then(|b| self.res.cqs.get_mut(b.cq));
                        d.cancel(context, rx_cq, self.res.rm_enabled);
                        break;
                    }
                }
                Engine::Rdm(_) => {
                    let (mut ctx, rdm) = self.res.rdm_ctx(ep);
                    if rdm.is_some_and(|r| r.cancel_recv(context, &mut ctx)) {
                        break;
                    }
                }
            }
        }
        Ok(())
    }

    /// `fi_rx_size_left` of a shared receive context: receives it can still hold.
    pub fn srx_size_left(&self, srx: SrxHandle<S>) -> Result<usize> {
        let s = self.srx(srx)?;
        Ok(s.capacity() - s.waiting())
    }
}
