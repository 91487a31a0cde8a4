//! An endpoint's life on its domain (fi_endpoint(3)): open, bind, enable, cancel and
//! close. The endpoint's own state (options, default flags, its engine) is
//! [`crate::ep`]; here is what needs the domain: its pools, limits and storage.

use super::{Domain, obj};
use crate::addr::EpAddr;
use crate::bind::{BindTarget, CntrBindings, CqBinding};
use crate::dgram::Dgram;
use crate::ep::{DEFAULT_MIN_MULTI_RECV, Engine, EpHandle, EpObj, EpState};
use crate::errno::{Errno, Result};
use crate::fid::CntrHandle;
use crate::flags::Flags;
use crate::info::{EpType, Info};
use crate::rdm::{Rdm, RdmSizes};
use crate::storage::Storage;
use crate::time::Instant;

impl<S: Storage> Domain<S> {
    /// `fi_endpoint`: an endpoint with the attributes of `info`, which must be within what
    /// this domain offers. FI_EP_DGRAM and FI_EP_RDM endpoints are supported, and
    /// FI_EP_MSG ones (an RDM engine for one peer, `domain/cm.rs`) in a build with the
    /// `msg-ep` feature; other types are -FI_EINVAL. An RDM endpoint's queues (send operations, posted receives of each
    /// kind) are `tx_attr.size` / `rx_attr.size` deep, at most 65535.
    pub fn ep_open(&mut self, info: &Info, context: u64) -> Result<EpHandle<S>> {
        let ep_type = match info.ep_attr.ep_type {
            EpType::Dgram => EpType::Dgram,
            EpType::Rdm => EpType::Rdm,
            EpType::Msg if crate::served::MsgEp::SERVED.is_some() => EpType::Msg,
            _ => return Err(Errno::EINVAL),
        };
        let rdm = ep_type != EpType::Dgram;
        let pc = self.cfg;
        let (ta, ra) = (&info.tx_attr, &info.rx_attr);
        let tx_size = if ta.size == 0 { pc.tx_size } else { ta.size };
        let rx_size = if ra.size == 0 { pc.rx_size } else { ra.size };
        let inject_size = if ta.inject_size == 0 {
            pc.inject_size
        } else {
            ta.inject_size
        };
        let max_msg = if rdm {
            pc.max_msg_size
        } else {
            self.max_pkt.saturating_sub(wire::packet::BASE_LEN + 8)
        };
        let inject_max = if rdm {
            pc.inject_size.min(self.rdm_cfg.eager_threshold)
        } else {
            pc.inject_size.min(max_msg)
        };
        let ep_caps = if info.caps.is_empty() {
            self.info.caps
        } else {
            info.caps
        };
        let auth_key = if info.ep_attr.auth_key.is_empty() {
            self.info.domain_attr.auth_key.clone()
        } else {
            info.ep_attr.auth_key.clone()
        };
        if tx_size > pc.tx_size
            || rx_size > pc.rx_size
            || (rdm && (tx_size > u16::MAX as usize || rx_size > u16::MAX as usize))
            || inject_size > inject_max
            || ta.iov_limit > crate::iov::IOV_LIMIT
            || ra.iov_limit > crate::iov::IOV_LIMIT
            || (info.ep_attr.max_msg_size != 0 && info.ep_attr.max_msg_size > max_msg)
            || auth_key.len() > pc.max_auth_key_size
            || ta
                .op_flags
                .intersects(crate::ep::unsupported_tx_flags(ep_type))
            // One transmit and one receive context: more, or shared ones, are scalable
            // or shared-context endpoints, not offered (FI_SHARED_CONTEXT is SIZE_MAX).
            || (info.ep_attr.tx_ctx_cnt > 1 && !shared_ok(info.ep_attr.tx_ctx_cnt))
            || (info.ep_attr.rx_ctx_cnt > 1 && !shared_ok(info.ep_attr.rx_ctx_cnt))
            // What the endpoint and its contexts ask for, within what the domain
            // offers (as libfabric's own providers check; a context asking for more
            // than its endpoint is the application's error, not refused).
            || !(info.caps | ta.caps | ra.caps)
                .difference(self.info.caps | Flags::PRIMARY_MODIFIERS)
                .is_empty()
        {
            return Err(Errno::EINVAL);
        }
        if self.eps.is_full() {
            return Err(Errno::ENOMEM);
        }
        let engine = if rdm {
            let seed = self.rng.next_u64();
            Engine::Rdm(Rdm::new(
                &mut self.store,
                self.rdm_cfg,
                RdmSizes {
                    tx_size,
                    rx_size,
                    inject_size,
                    max_pkt: self.max_pkt,
                },
                self.local,
                auth_key,
                seed,
            )?)
        } else {
            Engine::Dgram(Dgram::new(&mut self.store, tx_size, rx_size, inject_size)?)
        };
        let ep = crate::ep::Endpoint {
            ep_type,
            caps: ep_caps,
            context,
            id: 0,
            state: EpState::Disabled,
            tx_flags: ta.op_flags,
            rx_flags: ra.op_flags,
            tx_cq: None,
            rx_cq: None,
            cntrs: CntrBindings::default(),
            av: None,
            eq: None,
            min_multi_recv: DEFAULT_MIN_MULTI_RECV,
            max_msg_size: if info.ep_attr.max_msg_size == 0 {
                max_msg
            } else {
                info.ep_attr.max_msg_size
            },
            inject_size,
            tx_iov_limit: if ta.iov_limit == 0 {
                crate::iov::IOV_LIMIT
            } else {
                ta.iov_limit
            },
            rx_iov_limit: if ra.iov_limit == 0 {
                crate::iov::IOV_LIMIT
            } else {
                ra.iov_limit
            },
            aliases: 0,
            sep: None,
            in_sep: false,
            queue: 0,
            #[cfg(feature = "shared-ctx")]
            shared_tx: info.ep_attr.tx_ctx_cnt == crate::info::FI_SHARED_CONTEXT,
            #[cfg(feature = "shared-ctx")]
            shared_rx: info.ep_attr.rx_ctx_cnt == crate::info::FI_SHARED_CONTEXT,
            #[cfg(feature = "shared-ctx")]
            stx: None,
            #[cfg(feature = "shared-ctx")]
            srx: None,
            engine,
        };
        let h = self.eps.insert(ep).map_err(|_| Errno::ENOMEM)?;
        if ep_type == EpType::Msg
            && let Err(e) = self.cm.ep_opened(h.index())
        {
            self.eps.remove(h);
            return Err(e);
        }
        let local = self.local;
        if let Some(ep) = self.eps.get_mut(h) {
            ep.id = h.index() as u16;
            if let Engine::Rdm(r) = &mut ep.engine {
                r.set_local(EpAddr {
                    ep_id: h.index() as u16,
                    ..local
                });
            }
        }
        Ok(h)
    }

    /// `fi_tx_size_left` of endpoint `h`: its own room, and no more than what is left
    /// of its shared transmit context's (one capacity for the endpoints bound to it).
    pub fn ep_tx_size_left(&self, h: EpHandle<S>) -> Result<usize> {
        let ep = obj(self.eps.get(h))?;
        let own = ep.tx_size_left();
        #[cfg(feature = "shared-ctx")]
        if let Some(s) = ep.stx {
            return Ok(own.min(self.stx_left(s)));
        }
        Ok(own)
    }

    /// The endpoint `h` names.
    pub fn ep(&self, h: EpHandle<S>) -> Result<&EpObj<S>> {
        obj(self.eps.get(h))
    }

    /// The endpoint `h` names, mutably (options, op flags).
    pub fn ep_mut(&mut self, h: EpHandle<S>) -> Result<&mut EpObj<S>> {
        obj(self.eps.get_mut(h))
    }

    /// `fi_getname`: the endpoint's address.
    pub fn ep_addr(&self, h: EpHandle<S>) -> Result<EpAddr> {
        let ep = self.ep(h)?;
        Ok(EpAddr {
            ep_id: ep.id,
            ..self.local
        })
    }

    /// The endpoint's default transmit flags (what the short data calls use).
    pub fn ep_tx_flags(&self, h: EpHandle<S>) -> Result<Flags> {
        Ok(obj(self.eps.get(h))?.tx_flags)
    }

    /// `fi_ep_bind`. Only before `fi_enable` (-FI_EOPBADSTATE after); one CQ per
    /// direction, one counter per operation type and one AV (-FI_EINVAL for a second);
    /// objects of another domain are -FI_EDOMAIN, closed ones -FI_EINVAL; flags that do
    /// not apply to the object are -FI_EINVAL.
    pub fn ep_bind(&mut self, h: EpHandle<S>, target: BindTarget<S>, flags: Flags) -> Result<()> {
        let ep = obj(self.eps.get_mut(h))?;
        if ep.state != EpState::Disabled {
            return Err(Errno::EOPBADSTATE);
        }
        match target {
            BindTarget::Cq(cq) => {
                if !self.res.cqs.issued(cq) {
                    return Err(Errno::EDOMAIN);
                }
                let c = obj(self.res.cqs.get_mut(cq))?;
                let allowed = Flags::TRANSMIT | Flags::RECV | Flags::SELECTIVE_COMPLETION;
                let (tx, rx) = (flags.contains(Flags::TRANSMIT), flags.contains(Flags::RECV));
                if !allowed.contains(flags)
                    || !(tx || rx)
                    || (tx && ep.tx_cq.is_some())
                    || (rx && ep.rx_cq.is_some())
                {
                    return Err(Errno::EINVAL);
                }
                let selective = flags.contains(Flags::SELECTIVE_COMPLETION);
                c.note_queue(ep.queue);
                if tx {
                    ep.tx_cq = Some(CqBinding { cq, selective });
                    c.bind_ref();
                }
                if rx {
                    ep.rx_cq = Some(CqBinding { cq, selective });
                    c.bind_ref();
                }
            }
            BindTarget::Cntr(ch) => {
                if !self.res.cntrs.issued(ch) {
                    return Err(Errno::EDOMAIN);
                }
                let c = obj(self.res.cntrs.get_mut(ch))?;
                let all = Flags::SEND
                    | Flags::RECV
                    | Flags::READ
                    | Flags::WRITE
                    | Flags::REMOTE_READ
                    | Flags::REMOTE_WRITE;
                if flags.is_empty() || !all.contains(flags) {
                    return Err(Errno::EINVAL);
                }
                if flags.intersects(Flags::REMOTE_READ | Flags::REMOTE_WRITE)
                    && !ep.caps.contains(Flags::RMA_EVENT)
                {
                    return Err(Errno::EINVAL);
                }
                let slots = CntrBindings::<CntrHandle>::FLAGS;
                if slots
                    .iter()
                    .any(|f| flags.contains(*f) && ep.cntrs.slot_mut(*f).is_some())
                {
                    return Err(Errno::EINVAL);
                }
                for f in slots.iter().filter(|f| flags.contains(**f)) {
                    *ep.cntrs.slot_mut(*f) = Some(ch);
                    c.bind_ref();
                }
            }
            BindTarget::Av(ah) => {
                if !self.res.avs.issued(ah) {
                    return Err(Errno::EDOMAIN);
                }
                let a = obj(self.res.avs.get_mut(ah))?;
                if !flags.is_empty() || ep.av.is_some() {
                    return Err(Errno::EINVAL);
                }
                ep.av = Some(ah);
                a.bind_ep();
            }
            BindTarget::Eq(token) => {
                if !flags.is_empty() || ep.eq.is_some() {
                    return Err(Errno::EINVAL);
                }
                ep.eq = Some(token);
            }
        }
        Ok(())
    }

    /// `fi_enable`: an endpoint that can send needs a transmit CQ (even when successes
    /// are suppressed, so errors can be reported): -FI_ENOCQ; a connectionless endpoint
    /// needs its AV: -FI_ENOAV (a connected one has its peer instead). Enabling twice is -FI_EOPBADSTATE. A receive CQ is
    /// needed by the first receive posted, not here (fi_endpoint(3) asks for CQs that
    /// report the operations the endpoint *initiates*; an endpoint that only writes,
    /// as fabtests' `fi_rdm_multi_domain` does, binds none).
    pub fn ep_enable(&mut self, h: EpHandle<S>) -> Result<()> {
        let ep = obj(self.eps.get_mut(h))?;
        if ep.state == EpState::Enabled {
            return Err(Errno::EOPBADSTATE);
        }
        let dirs = Flags::SEND | Flags::RECV;
        let sends = !ep.caps.intersects(dirs) || ep.caps.contains(Flags::SEND);
        if sends && ep.tx_cq.is_none() {
            return Err(Errno::ENOCQ);
        }
        if ep.av.is_none() && ep.ep_type != EpType::Msg {
            return Err(Errno::ENOAV);
        }
        #[cfg(feature = "shared-ctx")]
        self.shared_enable(h)?;
        obj(self.eps.get_mut(h))?.state = EpState::Enabled;
        Ok(())
    }

    /// `fi_cancel`: a receive or a transmit still queued with this `context` completes
    /// with an FI_ECANCELED error entry; one that already completed is not affected.
    /// Returns 0 either way ("request submitted").
    pub fn ep_cancel(&mut self, h: EpHandle<S>, context: u64) -> Result<()> {
        #[cfg(feature = "shared-ctx")]
        if let Some(s) = obj(self.eps.get(h))?.srx
            && self.srx(s)?.position(context).is_some()
        {
            return self.srx_cancel(s, context);
        }
        let ep = obj(self.eps.get_mut(h))?;
        if let Engine::Dgram(dg) = &mut ep.engine {
            let rx_cq = ep.rx_cq.as_ref().and_then(|b| self.res.cqs.get_mut(b.cq));
            dg.cancel(context, rx_cq, self.res.rm_enabled);
            return Ok(());
        }
        let (mut ctx, rdm) = self.res.rdm_ctx(ep);
        if let Some(r) = rdm
            && !r.cancel_recv(context, &mut ctx)
        {
            r.cancel_send(context, &mut ctx);
        }
        Ok(())
    }

    /// The first half of closing an RDM endpoint (`fi_close`): it acknowledges at once
    /// everything it owes (held acknowledgements included), sends every peer a CLOSE,
    /// takes no new packet, and returns until when [`Domain::progress`] should keep
    /// running before [`Domain::ep_close`], so that retransmissions from peers whose
    /// last ACK was lost are acknowledged again (without it, their last sends fail with
    /// -FI_ETIMEDOUT); [`Domain::ep_lingering`] says when every peer acknowledged its
    /// CLOSE (then stop sooner). `None`: close at once (no sessions, or not an RDM
    /// endpoint). A scalable endpoint's context engines all begin (the latest time).
    pub fn ep_begin_close(&mut self, h: EpHandle<S>, now: Instant) -> Result<Option<Instant>> {
        let mut until: Option<Instant> = None;
        for e in self.engines_of(h)? {
            #[cfg(feature = "shared-ctx")]
            self.shared_detach(e);
            let t = match self.eps.get_mut(e).map(|ep| &mut ep.engine) {
                Some(Engine::Rdm(r)) => r.begin_close(now),
                _ => None,
            };
            until = until.max(t);
        }
        Ok(until)
    }

    /// Whether an endpoint [`Domain::ep_begin_close`] began closing still needs progress
    /// passes before [`Domain::ep_close`]: a peer has not yet acknowledged the CLOSE it
    /// was sent (wire protocol 4.7); for a scalable endpoint, a peer of any context
    /// engine. Once every peer has, each holds every acknowledgement the endpoint owed
    /// it, and lingering longer serves nothing.
    pub fn ep_lingering(&self, h: EpHandle<S>) -> bool {
        let lingers = |e| {
            self.eps
                .get(e)
                .and_then(|ep| ep.rdm())
                .is_some_and(|r| r.lingering())
        };
        match self.eps.get(h) {
            Some(ep) if ep.sep.is_none() => lingers(h),
            Some(_) => self
                .engines_of(h)
                .is_ok_and(|v| v.iter().any(|&e| lingers(e))),
            None => false,
        }
    }

    /// `fi_close` of an endpoint: outstanding operations are discarded without
    /// completions (fi_endpoint(3)), bindings are released. -FI_EBUSY while aliases of it
    /// are open.
    pub fn ep_close(&mut self, h: EpHandle<S>) -> Result<()> {
        let ep = self.ep(h)?;
        if ep.aliases > 0 {
            return Err(Errno::EBUSY);
        }
        if ep.in_sep {
            return Err(Errno::EINVAL);
        }
        #[cfg(feature = "shared-ctx")]
        self.shared_detach(h);
        let mut ep = obj(self.eps.remove(h))?;
        self.cm.ep_closed(h.index());
        // Reservations of what is still queued: (transmit, receive).
        let (reserved, rx_reserved) = match &mut ep.engine {
            Engine::Rdm(r) => r.reservations(),
            Engine::Dgram(d) => (d.drain_tx(), d.rx.len()),
        };
        if let Some(b) = &ep.tx_cq
            && let Some(cq) = self.res.cqs.get_mut(b.cq)
        {
            (0..reserved).for_each(|_| cq.release());
            cq.unbind_ref();
        }
        if let Some(b) = &ep.rx_cq
            && let Some(cq) = self.res.cqs.get_mut(b.cq)
        {
            if self.res.rm_enabled {
                (0..rx_reserved).for_each(|_| cq.release());
            }
            cq.unbind_ref();
        }
        for c in ep.cntrs.all() {
            if let Some(c) = self.res.cntrs.get_mut(c) {
                c.unbind_ref();
            }
        }
        if let Some(av) = ep.av.take().and_then(|a| self.res.avs.get_mut(a)) {
            av.unbind_ep();
        }
        Ok(())
    }
}

/// Whether a context count above one is FI_SHARED_CONTEXT, which
/// a build with `shared-ctx` takes.
fn shared_ok(count: usize) -> bool {
    cfg!(feature = "shared-ctx") && count == crate::info::FI_SHARED_CONTEXT
}
