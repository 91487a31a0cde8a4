//! Shared receive and transmit contexts (fi_endpoint(3) "SHARED CONTEXTS") over the
//! core's [`ofi_nostd::ep::srx`] and [`ofi_nostd::ep::stx`].
//!
//! Open the contexts ([`Domain::shared_rx_context`], [`Domain::shared_tx_context`]),
//! open endpoints with [`Domain::shared_endpoint`], bind them
//! ([`Endpoint::bind_srx`], [`Endpoint::bind_stx`]) before enabling them. Receives are
//! posted to the [`SharedRxContext`] (or through any bound endpoint, which forwards
//! them); each completes on the CQ of the endpoint that took its message, with the
//! buffer. Sends are posted to the endpoints. Close the endpoints first.

use ofi_nostd::Errno;
use ofi_nostd::domain::{MsgArgs, SrxHandle, StxHandle};
use ofi_nostd::flags::{FiAddr, Flags};
use ofi_nostd::info::{EpType, FI_SHARED_CONTEXT, RxAttr, TxAttr};
use ofi_nostd::mem::IoVec;

use super::Domain;
use super::buf::Buf;
use super::ep::Endpoint;
use super::error::{PostError, Result};
use super::shared::DomainRef;
use super::table::{Op, OpId};
use crate::storage::Heap;

/// A shared receive context (`fi_srx_context`).
pub struct SharedRxContext<C: Send + 'static = u64> {
    shared: DomainRef<C>,
    h: SrxHandle<Heap>,
    closed: bool,
}

/// A shared transmit context (`fi_stx_context`).
pub struct SharedTxContext<C: Send + 'static = u64> {
    shared: DomainRef<C>,
    h: StxHandle<Heap>,
    closed: bool,
}

/// The operation-table owner of receives posted to shared receive context `h`: no
/// endpoint's index (those are below the domain's endpoint count).
fn owner(h: SrxHandle<Heap>) -> usize {
    usize::MAX - h.index()
}

impl<C: Send + 'static> Domain<C> {
    /// `fi_srx_context` with the domain's receive attributes.
    pub fn shared_rx_context(&self) -> Result<SharedRxContext<C>> {
        let h = self.shared.lock().core.srx_open(&RxAttr::default(), 0)?;
        Ok(SharedRxContext {
            shared: self.shared.clone(),
            h,
            closed: false,
        })
    }

    /// `fi_stx_context` with the domain's transmit attributes.
    pub fn shared_tx_context(&self) -> Result<SharedTxContext<C>> {
        let h = self.shared.lock().core.stx_open(&TxAttr::default(), 0)?;
        Ok(SharedTxContext {
            shared: self.shared.clone(),
            h,
            closed: false,
        })
    }

    /// `fi_endpoint` of `ep_type` using a shared transmit context (`tx`) and / or a
    /// shared receive context (`rx`): `tx_ctx_cnt` / `rx_ctx_cnt` FI_SHARED_CONTEXT.
    /// Bind the contexts before [`Endpoint::enable`] (-FI_EOPBADSTATE otherwise).
    pub fn shared_endpoint(&self, ep_type: EpType, tx: bool, rx: bool) -> Result<Endpoint<C>> {
        let mut info = self.shared.info.clone();
        if ep_type == EpType::Dgram {
            let iface = info.caps & (Flags::LOCAL_COMM | Flags::REMOTE_COMM);
            info.caps = Flags::MSG | Flags::SEND | Flags::RECV | Flags::SOURCE | iface;
        }
        info.ep_attr.ep_type = ep_type;
        info.ep_attr.max_msg_size = 0;
        info.tx_attr.inject_size = 0;
        info.tx_attr.size = 0;
        info.rx_attr.size = 0;
        if tx {
            info.ep_attr.tx_ctx_cnt = FI_SHARED_CONTEXT;
        }
        if rx {
            info.ep_attr.rx_ctx_cnt = FI_SHARED_CONTEXT;
        }
        self.endpoint_with(&info)
    }
}

impl<C: Send + 'static> Endpoint<C> {
    /// `fi_ep_bind` of a shared receive context: every receive posted through this
    /// endpoint goes to it from now on.
    pub fn bind_srx(&self, srx: &SharedRxContext<C>) -> Result<()> {
        if !self.shared_ref().same(&srx.shared) {
            return Err(Errno::EDOMAIN.into());
        }
        Ok(self
            .shared_ref()
            .lock()
            .core
            .ep_bind_srx(self.handle(), srx.h)?)
    }

    /// `fi_ep_bind` of a shared transmit context.
    pub fn bind_stx(&self, stx: &SharedTxContext<C>) -> Result<()> {
        if !self.shared_ref().same(&stx.shared) {
            return Err(Errno::EDOMAIN.into());
        }
        Ok(self
            .shared_ref()
            .lock()
            .core
            .ep_bind_stx(self.handle(), stx.h)?)
    }
}

impl<C: Send + 'static> super::sep::ScalableEndpoint<C> {
    /// `fi_scalable_ep_bind` of a shared receive context, for an endpoint opened with
    /// `rx` = FI_SHARED_CONTEXT: every context engine takes its receives.
    pub fn bind_srx(&self, srx: &SharedRxContext<C>) -> Result<()> {
        self.ep().bind_srx(srx)
    }

    /// `fi_scalable_ep_bind` of a shared transmit context, for an endpoint opened
    /// with `tx` = FI_SHARED_CONTEXT.
    pub fn bind_stx(&self, stx: &SharedTxContext<C>) -> Result<()> {
        self.ep().bind_stx(stx)
    }
}

impl<C: Send + 'static> SharedRxContext<C> {
    /// Receives waiting in the context for a message.
    pub fn waiting(&self) -> usize {
        let g = self.shared.lock();
        g.core.srx(self.h).map_or(0, |s| s.waiting())
    }

    /// `fi_recv` on the context: `buf` for the next untagged message from `src`
    /// (FI_ADDR_UNSPEC: anyone) that reaches any bound endpoint.
    pub fn recv(&self, buf: Buf, src: FiAddr, context: C) -> Result<OpId, PostError<C>> {
        self.post(buf, src, None, context, None)
    }

    /// `fi_recv` with FI_MULTI_RECV on the context: `buf` takes untagged messages
    /// reaching any bound endpoint, each placed after the one before, as
    /// [`Endpoint::recv_multi`](super::Endpoint::recv_multi) does; each message
    /// completes on the CQ of the endpoint it reached, and the buffer comes back on
    /// the CQ of the endpoint that filled it. -FI_EAGAIN beyond eight such buffers
    /// waiting or in use at once.
    pub fn recv_multi(&self, buf: Buf, src: FiAddr, context: C) -> Result<OpId, PostError<C>>
    where
        C: Clone,
    {
        self.post(buf, src, None, context, Some(<C as Clone>::clone))
    }

    /// `fi_trecv` on the context: `buf` for the next message whose tag matches `tag`
    /// outside `ignore`.
    pub fn trecv(
        &self,
        buf: Buf,
        src: FiAddr,
        tag: u64,
        ignore: u64,
        context: C,
    ) -> Result<OpId, PostError<C>> {
        self.post(buf, src, Some((tag, ignore)), context, None)
    }

    fn post(
        &self,
        buf: Buf,
        src: FiAddr,
        tag: Option<(u64, u64)>,
        context: C,
        multi: Option<fn(&C) -> C>,
    ) -> Result<OpId, PostError<C>> {
        let posted = buf.capacity();
        let iov = [IoVec::new(buf.addr(), posted)];
        let mut g = self.shared.lock();
        let inner = &mut *g;
        let id = inner.ops.insert(Op {
            buf,
            context,
            ep: owner(self.h),
            posted,
            multi,
            claim: false,
        });
        // FI_MULTI_RECV as this post says (the table keeps the buffer for one).
        let flags = (inner
            .core
            .srx(self.h)
            .map_or(Flags::empty(), |s| s.op_flags())
            - Flags::MULTI_RECV)
            | Flags::COMPLETION
            | if multi.is_some() {
                Flags::MULTI_RECV
            } else {
                Flags::empty()
            };
        let m = MsgArgs::new(&iov, src, id.raw());
        match inner.core.srx_recvmsg(self.h, &m, tag, flags) {
            Ok(()) => Ok(id),
            Err(errno) => {
                let op = inner
                    .ops
                    .remove(id)
                    .expect("a refused post's buffer is still in the table");
                Err(PostError {
                    errno,
                    buf: op.buf,
                    context: op.context,
                })
            }
        }
    }

    /// `fi_cancel` of the receive `id`: FI_ECANCELED on the CQ of the context's first
    /// bound endpoint (or of the endpoint that holds it), with its buffer.
    pub fn cancel(&self, id: OpId) -> Result<()> {
        Ok(self.shared.lock().core.srx_cancel(self.h, id.raw())?)
    }

    /// `fi_close`: -FI_EBUSY while an endpoint bound to it is open (the context stays
    /// usable, close it again later); otherwise the buffers of receives that will
    /// never complete come back with their contexts. Closing again gives nothing.
    pub fn close(&mut self) -> Result<Vec<(Buf, C)>> {
        self.shut()
    }

    fn shut(&mut self) -> Result<Vec<(Buf, C)>> {
        if self.closed {
            return Ok(Vec::new());
        }
        let mut g = self.shared.lock();
        g.core.srx_close(self.h)?;
        self.closed = true;
        let ids = g.ops.ids_of(owner(self.h));
        Ok(ids
            .into_iter()
            .filter_map(|id| g.ops.remove(id))
            .map(|op| (op.buf, op.context))
            .collect())
    }
}

impl<C: Send + 'static> Drop for SharedRxContext<C> {
    fn drop(&mut self) {
        // Bound endpoints keep it (-FI_EBUSY): it then goes with the domain.
        drop(self.shut());
    }
}

impl<C: Send + 'static> SharedTxContext<C> {
    /// `fi_close`: -FI_EBUSY while an endpoint bound to it is open (close it again
    /// later).
    pub fn close(&mut self) -> Result<()> {
        self.shut()
    }

    fn shut(&mut self) -> Result<()> {
        if !self.closed {
            self.shared.lock().core.stx_close(self.h)?;
            self.closed = true;
        }
        Ok(())
    }
}

impl<C: Send + 'static> Drop for SharedTxContext<C> {
    fn drop(&mut self) {
        drop(self.shut());
    }
}
