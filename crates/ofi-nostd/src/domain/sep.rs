//! A scalable endpoint's life on its domain ([`crate::sep`]): open, bind, contexts,
//! enable and close, and the routing of a received packet's endpoint id to the engine
//! of the context it names.

use super::{Domain, obj};
use crate::bind::BindTarget;
use crate::ep::{EpHandle, EpState};
use crate::errno::{Errno, Result};
use crate::flags::Flags;
use crate::info::{EpType, Info};
use crate::sep::{CTX_BASE_LIMIT, Contexts, CtxSide, ctx_ep_id, split_ep_id};
use crate::storage::Storage;

impl<S: Storage> Domain<S> {
    /// The pool slot a packet's destination endpoint id names: the id itself when it
    /// names no context (every endpoint, and context 0 of a scalable endpoint), else
    /// the engine of that context; `usize::MAX` (no endpoint) for a context that does
    /// not exist.
    #[inline]
    pub(super) fn route(&self, dst_ep: u16) -> usize {
        let (base, index) = split_ep_id(dst_ep);
        if index == 0 {
            return base as usize;
        }
        self.route_ctx(base, index)
    }

    #[inline(never)]
    fn route_ctx(&self, base: u16, index: usize) -> usize {
        self.eps
            .get_by_index(base as usize)
            .and_then(|(_, ep)| ep.sep.as_ref())
            .and_then(|c| c.slot(index))
            .map_or(usize::MAX, usize::from)
    }

    /// `fi_scalable_ep`: a scalable endpoint with `info.ep_attr.tx_ctx_cnt` transmit and
    /// `rx_ctx_cnt` receive contexts (0: one; at most [`crate::sep::MAX_CTX`]; one of
    /// them may be FI_SHARED_CONTEXT, see [`crate::sep`]), FI_EP_RDM or FI_EP_DGRAM.
    /// It opens one engine per context index, each an endpoint of the pool with the
    /// other attributes of `info`; the handle returned is engine 0's (the endpoint's
    /// address). -FI_ENOMEM when the pool has no room for all of them.
    pub fn sep_open(&mut self, info: &Info, context: u64) -> Result<EpHandle<S>> {
        if !matches!(info.ep_attr.ep_type, EpType::Rdm | EpType::Dgram) {
            return Err(Errno::EINVAL);
        }
        let (tx, rx) = (info.ep_attr.tx_ctx_cnt, info.ep_attr.rx_ctx_cnt);
        let shared = |c: usize| c == crate::info::FI_SHARED_CONTEXT;
        let mut ctxs = match (shared(tx), shared(rx)) {
            (false, false) => Contexts::new(tx, rx)?,
            // One side shared, and only where shared contexts are built.
            (true, false) if cfg!(feature = "shared-ctx") => {
                Contexts::with_shared(rx, CtxSide::Tx)?
            }
            (false, true) if cfg!(feature = "shared-ctx") => {
                Contexts::with_shared(tx, CtxSide::Rx)?
            }
            _ => return Err(Errno::EINVAL),
        };
        let n = ctxs.engines();
        if self.eps.capacity() - self.eps.len() < n {
            return Err(Errno::ENOMEM);
        }
        let mut one = info.clone();
        let shared = ctxs.shared_side();
        let cnt = |side| match shared {
            Some(s) if s == side => crate::info::FI_SHARED_CONTEXT,
            _ => 1,
        };
        one.ep_attr.tx_ctx_cnt = cnt(CtxSide::Tx);
        one.ep_attr.rx_ctx_cnt = cnt(CtxSide::Rx);
        let mut handles: [Option<EpHandle<S>>; crate::sep::MAX_CTX] = Default::default();
        for (k, slot) in handles.iter_mut().enumerate().take(n) {
            match self.ep_open(&one, context) {
                Ok(h) => *slot = Some(h),
                Err(e) => {
                    self.sep_discard(&handles[..k]);
                    return Err(e);
                }
            }
        }
        let base = handles[0].map_or(usize::MAX, |h| h.index());
        if base >= CTX_BASE_LIMIT {
            self.sep_discard(&handles[..n]);
            return Err(Errno::ENOMEM);
        }
        for (k, h) in handles.iter().enumerate().take(n) {
            let Some(h) = *h else { continue };
            ctxs.slots[k] = h.index() as u16;
            let id = ctx_ep_id(base as u16, k);
            let ep = obj(self.eps.get_mut(h))?;
            ep.id = id;
            ep.in_sep = true;
            ep.queue = (k % self.queues as usize) as u8;
            if let crate::ep::Engine::Rdm(r) = &mut ep.engine {
                r.set_local(crate::addr::EpAddr {
                    ep_id: id,
                    ..self.local
                });
            }
        }
        obj(self.eps.get_mut(handles[0].ok_or(Errno::EINVAL)?))?.sep = Some(ctxs);
        handles[0].ok_or(Errno::EINVAL)
    }

    fn sep_discard(&mut self, handles: &[Option<EpHandle<S>>]) {
        for h in handles.iter().flatten() {
            let _ = self.ep_close(*h);
        }
    }

    /// The contexts of the scalable endpoint `sep` (-FI_EINVAL if it is not one).
    pub fn sep_contexts(&self, sep: EpHandle<S>) -> Result<&Contexts> {
        self.ep(sep)?.sep.as_ref().ok_or(Errno::EINVAL)
    }

    /// The engine handles of `sep`'s contexts, index by index.
    pub fn sep_engines(&self, sep: EpHandle<S>) -> Result<impl Iterator<Item = EpHandle<S>>> {
        let c = *self.sep_contexts(sep)?;
        let eps = &self.eps;
        Ok((0..c.engines()).filter_map(move |k| {
            c.slot(k)
                .and_then(|s| eps.get_by_index(s as usize))
                .map(|(h, _)| h)
        }))
    }

    /// Endpoint `h`'s critical errors for its EQ ([`EpObj::take_fault`](crate::ep::EpObj::take_fault)),
    /// taken: a scalable endpoint's are those of every context engine together (the
    /// counts summed, the reason of the last context, by index, that had one), since
    /// the EQ is bound to the endpoint, not to its contexts.
    pub fn ep_take_fault(&mut self, h: EpHandle<S>) -> Result<Option<crate::rdm::EpFault>> {
        let mut all: Option<crate::rdm::EpFault> = None;
        for e in self.engines_of(h)? {
            if let Some(f) = self.eps.get_mut(e).and_then(|ep| ep.take_fault()) {
                let count = all.map_or(0, |a| a.count).saturating_add(f.count);
                all = Some(crate::rdm::EpFault { count, ..f });
            }
        }
        Ok(all)
    }

    /// Whether endpoint `h` (a scalable endpoint: any of its context engines) recorded
    /// a critical error since the last call ([`EpObj::take_fault_wakeup`](crate::ep::EpObj::take_fault_wakeup)).
    pub fn ep_take_fault_wakeup(&mut self, h: EpHandle<S>) -> bool {
        // Asked after every pass while an EQ waits: a plain endpoint is one look.
        match self.eps.get_mut(h) {
            Some(ep) if ep.sep.is_none() => return ep.take_fault_wakeup(),
            None => return false,
            Some(_) => {}
        }
        let Ok(engines) = self.engines_of(h) else {
            return false;
        };
        let mut any = false;
        for e in engines {
            any |= self.eps.get_mut(e).is_some_and(|ep| ep.take_fault_wakeup());
        }
        any
    }

    /// `h` and, for a scalable endpoint, its context engines.
    pub(super) fn engines_of(
        &self,
        h: EpHandle<S>,
    ) -> Result<heapless::Vec<EpHandle<S>, { crate::sep::MAX_CTX + 1 }>> {
        let mut v = heapless::Vec::new();
        let _ = v.push(h);
        if self.ep(h)?.sep.is_some() {
            for e in self.sep_engines(h)?.filter(|e| *e != h) {
                let _ = v.push(e);
            }
        }
        Ok(v)
    }

    fn sep_engine(&self, sep: EpHandle<S>, index: usize) -> Result<EpHandle<S>> {
        let c = self.sep_contexts(sep)?;
        let s = c.slot(index).ok_or(Errno::EINVAL)?;
        self.eps
            .get_by_index(s as usize)
            .map(|(h, _)| h)
            .ok_or(Errno::EINVAL)
    }

    /// `fi_scalable_ep_bind`: the AV (flags 0), or an EQ, bound to every context
    /// engine; the rules of [`Domain::ep_bind`] apply (a second AV is -FI_EINVAL).
    /// CQs and counters bind to the contexts (-FI_EINVAL here), but those of a shared
    /// side to the endpoint (flags of that side; a shared receive side's go to every
    /// engine, a shared transmit side's to engine 0), before the endpoint is enabled
    /// (-FI_EOPBADSTATE).
    pub fn sep_bind(
        &mut self,
        sep: EpHandle<S>,
        target: BindTarget<S>,
        flags: Flags,
    ) -> Result<()> {
        if matches!(target, BindTarget::Cq(_) | BindTarget::Cntr(_)) {
            return self.sep_bind_shared_side(sep, target, flags);
        }
        let engines: heapless::Vec<EpHandle<S>, { crate::sep::MAX_CTX }> =
            self.sep_engines(sep)?.collect();
        if self.ep(sep)?.state != EpState::Disabled {
            return Err(Errno::EOPBADSTATE);
        }
        for h in engines {
            let t = match &target {
                BindTarget::Av(a) => BindTarget::Av(*a),
                BindTarget::Eq(q) => BindTarget::Eq(*q),
                _ => return Err(Errno::EINVAL),
            };
            self.ep_bind(h, t, flags)?;
        }
        Ok(())
    }

    /// A CQ or counter bound to the scalable endpoint, for its shared side's
    /// operations (flags as [`Domain::sep_ctx_bind`] allows for that side), before
    /// the endpoint is enabled (-FI_EOPBADSTATE): a shared receive side's to every
    /// engine (each receives for the endpoint), a shared transmit side's to engine 0
    /// (operations are posted to the endpoint). -FI_EINVAL without a shared side.
    fn sep_bind_shared_side(
        &mut self,
        sep: EpHandle<S>,
        target: BindTarget<S>,
        flags: Flags,
    ) -> Result<()> {
        let c = *self.sep_contexts(sep)?;
        let side = c.shared_side().ok_or(Errno::EINVAL)?;
        if c.shared_enabled {
            return Err(Errno::EOPBADSTATE);
        }
        if !Self::ctx_binds(side, &target, flags) {
            return Err(Errno::EINVAL);
        }
        for h in self.shared_side_engines(sep, side)? {
            let t = match &target {
                BindTarget::Cq(q) => BindTarget::Cq(*q),
                BindTarget::Cntr(n) => BindTarget::Cntr(*n),
                _ => return Err(Errno::EINVAL),
            };
            self.bind_while_disabled(h, t, flags)?;
        }
        Ok(())
    }

    /// The engines that serve `sep`'s shared `side`: every one for a shared receive
    /// side (each receives for the endpoint), engine 0 for a shared transmit side
    /// (operations are posted to the endpoint).
    fn shared_side_engines(
        &self,
        sep: EpHandle<S>,
        side: CtxSide,
    ) -> Result<heapless::Vec<EpHandle<S>, { crate::sep::MAX_CTX }>> {
        let all = self.sep_engines(sep)?;
        Ok(match side {
            CtxSide::Rx => all.collect(),
            CtxSide::Tx => all.take(1).collect(),
        })
    }

    /// Binds `target` to engine `h` as [`Domain::ep_bind`] does before enable, even
    /// when another context of the engine already runs.
    fn bind_while_disabled(
        &mut self,
        h: EpHandle<S>,
        target: BindTarget<S>,
        flags: Flags,
    ) -> Result<()> {
        let ep = obj(self.eps.get_mut(h))?;
        let state = ep.state;
        ep.state = EpState::Disabled;
        let r = self.ep_bind(h, target, flags);
        if let Some(ep) = self.eps.get_mut(h) {
            ep.state = state;
        }
        r
    }

    /// Whether a CQ or counter with `flags` belongs to `side`'s operations.
    fn ctx_binds(side: CtxSide, target: &BindTarget<S>, flags: Flags) -> bool {
        let sel = Flags::SELECTIVE_COMPLETION;
        match (side, target) {
            (CtxSide::Tx, BindTarget::Cq(_)) => (Flags::TRANSMIT | sel).contains(flags),
            (CtxSide::Rx, BindTarget::Cq(_)) => (Flags::RECV | sel).contains(flags),
            (CtxSide::Tx, BindTarget::Cntr(_)) => {
                (Flags::SEND | Flags::WRITE | Flags::READ).contains(flags)
            }
            (CtxSide::Rx, BindTarget::Cntr(_)) => {
                (Flags::RECV | Flags::REMOTE_READ | Flags::REMOTE_WRITE).contains(flags)
            }
            _ => false,
        }
    }

    /// A shared context bound to the scalable endpoint `sep`: `bind` binds it to each
    /// engine in turn; if one refuses, `unbind` undoes the ones before and the error
    /// is returned. Before the endpoint is enabled (-FI_EOPBADSTATE).
    #[cfg(feature = "shared-ctx")]
    pub(super) fn sep_bind_shared(
        &mut self,
        sep: EpHandle<S>,
        bind: impl Fn(&mut Self, EpHandle<S>) -> Result<()>,
        unbind: impl Fn(&mut Self, EpHandle<S>),
    ) -> Result<()> {
        if self.sep_contexts(sep)?.shared_enabled {
            return Err(Errno::EOPBADSTATE);
        }
        let engines: heapless::Vec<EpHandle<S>, { crate::sep::MAX_CTX }> =
            self.sep_engines(sep)?.collect();
        for (k, h) in engines.iter().enumerate() {
            if let Err(e) = bind(self, *h) {
                engines.iter().take(k).for_each(|h| unbind(self, *h));
                return Err(e);
            }
        }
        Ok(())
    }

    /// `fi_tx_context` / `fi_rx_context`: opens context `index` of `side` and returns
    /// the handle of the engine that carries it (posts of that side go through it).
    /// `op_flags` are the context's default operation flags (its attr's `op_flags`;
    /// empty keeps the endpoint's). -FI_EINVAL for an index beyond the count, -FI_EBUSY
    /// for a context already open.
    pub fn sep_ctx_open(
        &mut self,
        sep: EpHandle<S>,
        side: CtxSide,
        index: usize,
        op_flags: Flags,
    ) -> Result<EpHandle<S>> {
        let h = self.sep_engine(sep, index)?;
        let c = obj(self.eps.get_mut(sep))?
            .sep
            .as_mut()
            .ok_or(Errno::EINVAL)?;
        c.open(side, index)?;
        if !op_flags.is_empty() {
            let ep = obj(self.eps.get_mut(h))?;
            let dir = match side {
                CtxSide::Tx => Flags::TRANSMIT,
                CtxSide::Rx => Flags::RECV,
            };
            if let Err(e) = ep.setopsflag(dir | op_flags) {
                if let Some(c) = self.eps.get_mut(sep).and_then(|e| e.sep.as_mut()) {
                    let _ = c.close(side, index);
                }
                return Err(e);
            }
        }
        Ok(h)
    }

    /// `fi_ep_bind` on context `index` of `side`: a CQ or counter of its side only (a
    /// transmit context takes FI_TRANSMIT / FI_SEND, FI_WRITE, FI_READ; a receive
    /// context FI_RECV and the remote ones), before that context is enabled
    /// (-FI_EOPBADSTATE after; the engine's other context may already run), then as
    /// [`Domain::ep_bind`].
    pub fn sep_ctx_bind(
        &mut self,
        sep: EpHandle<S>,
        side: CtxSide,
        index: usize,
        target: BindTarget<S>,
        flags: Flags,
    ) -> Result<()> {
        if !Self::ctx_binds(side, &target, flags) {
            return Err(Errno::EINVAL);
        }
        if self.sep_contexts(sep)?.enabled(side, index) {
            return Err(Errno::EOPBADSTATE);
        }
        let h = self.sep_engine(sep, index)?;
        self.bind_while_disabled(h, target, flags)
    }

    /// `fi_enable` of context `index` of `side`: the endpoint's AV must be bound
    /// (-FI_ENOAV) and a transmit context that can send needs its CQ (-FI_ENOCQ).
    /// The engine takes packets and posts from its first enabled context on.
    pub fn sep_ctx_enable(&mut self, sep: EpHandle<S>, side: CtxSide, index: usize) -> Result<()> {
        let h = self.sep_engine(sep, index)?;
        let ep = obj(self.eps.get(h))?;
        if ep.av.is_none() {
            return Err(Errno::ENOAV);
        }
        let dirs = Flags::SEND | Flags::RECV;
        let sends = !ep.caps.intersects(dirs) || ep.caps.contains(Flags::SEND);
        if side == CtxSide::Tx && sends && ep.tx_cq.is_none() {
            return Err(Errno::ENOCQ);
        }
        // An engine never runs without the shared context of its other side.
        #[cfg(feature = "shared-ctx")]
        self.shared_enable(h)?;
        obj(self.eps.get_mut(sep))?
            .sep
            .as_mut()
            .ok_or(Errno::EINVAL)?
            .enable(side, index)?;
        obj(self.eps.get_mut(h))?.state = EpState::Enabled;
        Ok(())
    }

    /// `fi_enable` of the scalable endpoint itself: its AV must be bound (-FI_ENOAV).
    /// Contexts enable on their own; without a shared side this only checks. With one,
    /// its context must be bound to the endpoint (-FI_EOPBADSTATE), a shared transmit
    /// side needs its CQ (-FI_ENOCQ), and this enables the shared side: every engine
    /// receives from now on (shared receive side), or engine 0 takes the endpoint's
    /// posts (shared transmit side).
    pub fn sep_enable(&mut self, sep: EpHandle<S>) -> Result<()> {
        let c = *self.sep_contexts(sep)?;
        let ep = self.ep(sep)?;
        if ep.av.is_none() {
            return Err(Errno::ENOAV);
        }
        let Some(side) = c.shared_side() else {
            return Ok(());
        };
        if c.shared_enabled {
            return Err(Errno::EOPBADSTATE);
        }
        let dirs = Flags::SEND | Flags::RECV;
        let sends = !ep.caps.intersects(dirs) || ep.caps.contains(Flags::SEND);
        if side == CtxSide::Tx && sends && ep.tx_cq.is_none() {
            return Err(Errno::ENOCQ);
        }
        let engines = self.shared_side_engines(sep, side)?;
        #[cfg(feature = "shared-ctx")]
        for h in &engines {
            self.shared_enable(*h)?;
        }
        for h in engines {
            obj(self.eps.get_mut(h))?.state = EpState::Enabled;
        }
        obj(self.eps.get_mut(sep))?
            .sep
            .as_mut()
            .ok_or(Errno::EINVAL)?
            .shared_enabled = true;
        Ok(())
    }

    /// `fi_close` of context `index` of `side`: what it had queued is canceled
    /// (receives of a receive context, sends not yet on the wire of a transmit context
    /// complete with -FI_ECANCELED on its CQ), then its CQ and counters are released,
    /// so they can close (sends already on the wire finish without a completion).
    /// Other contexts are untouched.
    pub fn sep_ctx_close(&mut self, sep: EpHandle<S>, side: CtxSide, index: usize) -> Result<()> {
        let h = self.sep_engine(sep, index)?;
        obj(self.eps.get_mut(sep))?
            .sep
            .as_mut()
            .ok_or(Errno::EINVAL)?
            .close(side, index)?;
        let rm = self.res.rm_enabled;
        let ep = obj(self.eps.get_mut(h))?;
        {
            let (mut ctx, rdm) = self.res.rdm_ctx(ep);
            if let Some(r) = rdm {
                match side {
                    CtxSide::Rx => r.cancel_all_recvs(&mut ctx),
                    CtxSide::Tx => r.cancel_all_sends(&mut ctx),
                };
            }
        }
        let (tx_left, rx_left) = match &ep.engine {
            crate::ep::Engine::Rdm(r) => r.reservations(),
            crate::ep::Engine::Dgram(d) => (d.tx.len(), d.rx.len()),
        };
        let (binding, left, cntrs) = match side {
            CtxSide::Tx => (
                ep.tx_cq.take(),
                tx_left,
                [Flags::SEND, Flags::WRITE, Flags::READ],
            ),
            CtxSide::Rx => (
                ep.rx_cq.take(),
                if rm { rx_left } else { 0 },
                [Flags::RECV, Flags::REMOTE_READ, Flags::REMOTE_WRITE],
            ),
        };
        if let Some(b) = binding
            && let Some(cq) = self.res.cqs.get_mut(b.cq)
        {
            (0..left).for_each(|_| cq.release());
            cq.unbind_ref();
        }
        for f in cntrs {
            if let Some(c) = ep.cntrs.slot_mut(f).take()
                && let Some(c) = self.res.cntrs.get_mut(c)
            {
                c.unbind_ref();
            }
        }
        Ok(())
    }

    /// `fi_close` of the scalable endpoint: every engine closes as an endpoint does
    /// (the caller lingers on each first, see [`Domain::ep_begin_close`]).
    /// -FI_EBUSY while one of its contexts is open.
    pub fn sep_close(&mut self, sep: EpHandle<S>) -> Result<()> {
        let c = *self.sep_contexts(sep)?;
        if c.tx_open | c.rx_open != 0 {
            return Err(Errno::EBUSY);
        }
        let engines: heapless::Vec<EpHandle<S>, { crate::sep::MAX_CTX }> =
            self.sep_engines(sep)?.collect();
        for h in engines {
            if let Some(ep) = self.eps.get_mut(h) {
                ep.in_sep = false;
            }
            self.ep_close(h)?;
        }
        Ok(())
    }
}
