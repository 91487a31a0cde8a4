//! The domain's resources (fi_cq(3), fi_cntr(3), fi_av(3), fi_mr(3)): opening,
//! looking up and closing CQs, counters and AVs, and registering memory. Each kind
//! lives in a pool of the domain; a handle of another domain is refused where a call
//! can tell.

use super::{Domain, obj};
use crate::av::{Av, AvAttr, AvSlot};
use crate::cntr::{Cntr, CntrAttr};
use crate::cq::{Cq, CqAttr, CqSlot, DEFAULT_CQ_SIZE};
use crate::ep::{Engine, EpObj};
use crate::errno::{Errno, Result};
use crate::fid::{AvHandle, AvObj, CntrHandle, CqHandle, CqObj, MrTableOf, Objects};
use crate::flags::Flags;
use crate::info::AvType;
use crate::mr::{MrAttr, MrHandle};
use crate::rdm::{Ctx, Rdm};
use crate::storage::Storage;

/// A domain's CQs, counters, AVs and MRs, and whether FI_RM_ENABLED reserves CQ room
/// at post time: what an endpoint binds and what its engine reaches during a pass.
pub(super) struct Resources<S: Storage> {
    pub(super) cqs: Objects<S, CqObj<S>>,
    pub(super) cntrs: Objects<S, Cntr>,
    pub(super) avs: Objects<S, AvObj<S>>,
    pub(super) mrs: MrTableOf<S>,
    pub(super) rm_enabled: bool,
}

impl<S: Storage> Resources<S> {
    /// What endpoint `ep`'s reliability engine is lent (its CQs, counters, AV and the
    /// MR table), and the engine itself, borrowed apart from them; `None` for a DGRAM
    /// endpoint.
    pub(super) fn rdm_ctx<'a>(
        &'a mut self,
        ep: &'a mut EpObj<S>,
    ) -> (Ctx<'a, S>, Option<&'a mut Rdm<S>>) {
        let ctx = Ctx {
            cqs: &mut self.cqs,
            cntrs: &mut self.cntrs,
            avs: &self.avs,
            av: ep.av,
            tx_cq: &ep.tx_cq,
            rx_cq: &ep.rx_cq,
            cntr: &ep.cntrs,
            rm: self.rm_enabled,
            ep_context: ep.context,
            source: ep.caps.contains(Flags::SOURCE),
            mrs: Some(&self.mrs),
            caps: ep.caps,
            #[cfg(feature = "shared-ctx")]
            srx: None,
        };
        let rdm = match &mut ep.engine {
            Engine::Rdm(r) => Some(r),
            Engine::Dgram(_) => None,
        };
        (ctx, rdm)
    }
}

impl<S: Storage> Domain<S> {
    /// `fi_cq_open`. `size` 0 means [`DEFAULT_CQ_SIZE`]; the pool full is -FI_ENOMEM.
    pub fn cq_open(&mut self, attr: &CqAttr, context: u64) -> Result<CqHandle<S>> {
        attr.validate()?;
        if self.res.cqs.is_full() {
            return Err(Errno::ENOMEM);
        }
        let size = if attr.size == 0 {
            DEFAULT_CQ_SIZE
        } else {
            attr.size
        };
        let storage = self
            .store
            .slice(size, || CqSlot::EMPTY)
            .ok_or(Errno::ENOMEM)?;
        let cq = Cq::new(&CqAttr { size, ..*attr }, self.res.rm_enabled, storage)?;
        let h = self.res.cqs.insert(cq).map_err(|_| Errno::ENOMEM)?;
        self.cq_ctx.as_mut()[h.index()] = context;
        Ok(h)
    }

    /// The CQ `h` names; -FI_EINVAL if closed or not this domain's.
    pub fn cq(&self, h: CqHandle<S>) -> Result<&CqObj<S>> {
        obj(self.res.cqs.get(h))
    }

    /// The CQ `h` names, mutably (reads, readerr, signal).
    pub fn cq_mut(&mut self, h: CqHandle<S>) -> Result<&mut CqObj<S>> {
        obj(self.res.cqs.get_mut(h))
    }

    /// The application's context of a CQ.
    pub fn cq_context(&self, h: CqHandle<S>) -> Result<u64> {
        self.cq(h)?;
        Ok(self.cq_ctx.as_ref()[h.index()])
    }

    /// `fi_close` of a CQ: -FI_EBUSY while an endpoint is bound to it.
    pub fn cq_close(&mut self, h: CqHandle<S>) -> Result<()> {
        self.cq(h)?.check_close()?;
        self.res.cqs.remove(h);
        Ok(())
    }

    /// `fi_cntr_open`.
    pub fn cntr_open(&mut self, attr: &CntrAttr, context: u64) -> Result<CntrHandle> {
        let c = Cntr::new(attr)?;
        let h = self.res.cntrs.insert(c).map_err(|_| Errno::ENOMEM)?;
        self.cntr_ctx.as_mut()[h.index()] = context;
        Ok(h)
    }

    /// The counter `h` names.
    pub fn cntr(&self, h: CntrHandle) -> Result<&Cntr> {
        obj(self.res.cntrs.get(h))
    }

    /// The counter `h` names, mutably.
    pub fn cntr_mut(&mut self, h: CntrHandle) -> Result<&mut Cntr> {
        obj(self.res.cntrs.get_mut(h))
    }

    /// The application's context of a counter.
    pub fn cntr_context(&self, h: CntrHandle) -> Result<u64> {
        self.cntr(h)?;
        Ok(self.cntr_ctx.as_ref()[h.index()])
    }

    /// `fi_close` of a counter: -FI_EBUSY while bound.
    pub fn cntr_close(&mut self, h: CntrHandle) -> Result<()> {
        self.cntr(h)?.check_close()?;
        self.res.mrs.unbind_cntr_everywhere(h.to_bits());
        self.res.cntrs.remove(h);
        Ok(())
    }

    /// `fi_av_open`: `count` (or the endpoint limit when 0) sizes the AV. A type other
    /// than the domain's `av_type` (when that is set) is -FI_EINVAL.
    pub fn av_open(&mut self, attr: &mut AvAttr<'_>, context: u64) -> Result<AvHandle<S>> {
        let dom = self.info.domain_attr.av_type;
        if dom != AvType::Unspec && attr.av_type != AvType::Unspec && attr.av_type != dom {
            return Err(Errno::EINVAL);
        }
        if attr.av_type == AvType::Unspec {
            attr.av_type = dom;
        }
        if self.res.avs.is_full() {
            return Err(Errno::ENOMEM);
        }
        let count = if attr.count == 0 { 1024 } else { attr.count };
        let slots = self
            .store
            .slice(count, || AvSlot::VACANT)
            .ok_or(Errno::ENOMEM)?;
        let buckets = self
            .store
            .slice(count * 2 + 1, || 0u32)
            .ok_or(Errno::ENOMEM)?;
        let av = Av::new(attr, slots, buckets)?;
        let h = self.res.avs.insert(av).map_err(|_| Errno::ENOMEM)?;
        self.av_ctx.as_mut()[h.index()] = context;
        Ok(h)
    }

    /// The AV `h` names.
    pub fn av(&self, h: AvHandle<S>) -> Result<&AvObj<S>> {
        obj(self.res.avs.get(h))
    }

    /// The AV `h` names, mutably (insert, remove).
    pub fn av_mut(&mut self, h: AvHandle<S>) -> Result<&mut AvObj<S>> {
        obj(self.res.avs.get_mut(h))
    }

    /// `fi_close` of an AV: -FI_EBUSY while an endpoint is bound to it.
    pub fn av_close(&mut self, h: AvHandle<S>) -> Result<()> {
        self.av(h)?.check_close()?;
        self.res.avs.remove(h);
        Ok(())
    }

    /// `fi_mr_regattr`.
    pub fn mr_reg(&mut self, attr: &MrAttr<'_>, flags: Flags) -> Result<MrHandle> {
        self.res.mrs.regattr(attr, flags)
    }

    /// `fi_mr_bind(mr, cntr, flags)`: counter `c` counts the remote accesses
    /// (FI_REMOTE_WRITE and/or FI_REMOTE_READ) that reach region `h` through an
    /// endpoint with FI_RMA_EVENT. -FI_EDOMAIN for a counter of another domain; the
    /// other errors are [`MrTable::bind_cntr`](crate::mr::MrTable::bind_cntr)'s. The binding ends when the counter
    /// closes (the region cannot close before: -FI_EBUSY).
    pub fn mr_bind_cntr(&mut self, h: MrHandle, c: CntrHandle, flags: Flags) -> Result<()> {
        if !self.res.cntrs.issued(c) {
            return Err(Errno::EDOMAIN);
        }
        obj(self.res.cntrs.get(c))?;
        self.res.mrs.bind_cntr(h, c.to_bits(), flags)
    }

    /// The registration table (key, desc, bind, enable, access checks).
    pub fn mrs(&self) -> &MrTableOf<S> {
        &self.res.mrs
    }

    /// The registration table, mutably.
    pub fn mrs_mut(&mut self) -> &mut MrTableOf<S> {
        &mut self.res.mrs
    }
}
