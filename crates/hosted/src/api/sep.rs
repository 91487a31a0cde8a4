//! Scalable endpoints (fi_endpoint(3) "SCALABLE ENDPOINTS") and their transmit and
//! receive contexts, over the core's [`ofi_nostd::sep`].
//!
//! [`Domain::scalable_endpoint`] opens one; bind its AV, open each context, bind the
//! context's CQ (and counters), enable it. A context's data operations are an
//! [`Endpoint`]'s (through [`TxContext::ep`] / [`RxContext::ep`]): each context has its
//! own engine, so posts on two contexts never touch each other's queues. Close the
//! contexts before the endpoint ([`ScalableEndpoint::close`] is -FI_EBUSY before).

use ofi_nostd::Errno;
use ofi_nostd::addr::EpAddr;
use ofi_nostd::domain::{BindTarget, EpHandle};
use ofi_nostd::flags::Flags;
use ofi_nostd::info::EpType;
use ofi_nostd::sep::CtxSide;

use super::Domain;
use super::av::Av;
use super::buf::Buf;
use super::cntr::Counter;
use super::cq::Cq;
use super::ep::Endpoint;
use super::error::Result;
use super::shared::{DomainRef, EpState};
use crate::storage::Heap;

/// A scalable endpoint: several transmit and receive contexts behind one address.
pub struct ScalableEndpoint<C: Send + 'static = u64> {
    shared: DomainRef<C>,
    h: EpHandle<Heap>,
    addr: EpAddr,
    /// Engine 0's operations, for a shared transmit side's posts.
    view: Endpoint<C>,
    closed: bool,
}

/// One transmit or receive context of a [`ScalableEndpoint`].
struct Context<C: Send + 'static> {
    sep: EpHandle<Heap>,
    side: CtxSide,
    index: usize,
    view: Endpoint<C>,
    closed: bool,
}

/// A transmit context (`fi_tx_context`): sends through [`TxContext::ep`].
pub struct TxContext<C: Send + 'static = u64>(Context<C>);

/// A receive context (`fi_rx_context`): receives through [`RxContext::ep`].
pub struct RxContext<C: Send + 'static = u64>(Context<C>);

impl<C: Send + 'static> Domain<C> {
    /// `fi_scalable_ep` of `ep_type` with `tx` transmit and `rx` receive contexts (at
    /// most [`ofi_nostd::sep::MAX_CTX`] each; one of them may be
    /// [`ofi_nostd::info::FI_SHARED_CONTEXT`]: bind that side's shared context with
    /// [`ScalableEndpoint::bind_srx`] / [`ScalableEndpoint::bind_stx`]).
    pub fn scalable_endpoint(
        &self,
        ep_type: EpType,
        tx: usize,
        rx: usize,
    ) -> Result<ScalableEndpoint<C>> {
        let mut info = self.shared.info.clone();
        info.ep_attr.ep_type = ep_type;
        info.ep_attr.tx_ctx_cnt = tx;
        info.ep_attr.rx_ctx_cnt = rx;
        info.ep_attr.max_msg_size = 0;
        info.tx_attr.inject_size = 0;
        info.tx_attr.size = 0;
        info.rx_attr.size = 0;
        let mut g = self.shared.lock();
        let h = g.core.sep_open(&info, 0)?;
        let engines: Vec<EpHandle<Heap>> = g.core.sep_engines(h)?.collect();
        for e in engines {
            let depth = {
                let ep = g.core.ep(e)?;
                ep.tx_size_left() + ep.rx_size_left()
            };
            g.ops.reserve(depth);
            g.eps.push(EpState {
                h: e,
                cqs: Vec::new(),
            });
        }
        let addr = g.core.ep_addr(h)?;
        drop(g);
        Ok(ScalableEndpoint {
            shared: self.shared.clone(),
            h,
            addr,
            view: Endpoint::context_view(self.shared.clone(), h, addr),
            closed: false,
        })
    }
}

impl<C: Send + 'static> ScalableEndpoint<C> {
    /// `fi_getname`: the one address of every context (peers name receive contexts
    /// with [`ofi_nostd::av::fi_rx_addr`] on an AV opened with `rx_ctx_bits`).
    pub fn addr(&self) -> EpAddr {
        self.addr
    }

    /// `fi_scalable_ep_bind` of the address vector (every context uses it).
    pub fn bind_av(&self, av: &Av<C>) -> Result<()> {
        if !self.shared.same(av.shared()) {
            return Err(Errno::EDOMAIN.into());
        }
        let mut g = self.shared.lock();
        Ok(g.core
            .sep_bind(self.h, BindTarget::Av(av.handle()), Flags::empty())?)
    }

    /// `fi_scalable_ep_bind` of a CQ for the shared side's operations (FI_RECV for a
    /// shared receive side, FI_TRANSMIT for a shared transmit side, optionally
    /// FI_SELECTIVE_COMPLETION), before [`ScalableEndpoint::enable`].
    pub fn bind_cq(&self, cq: &Cq<C>, flags: Flags) -> Result<()> {
        if !self.shared.same(cq.shared()) {
            return Err(Errno::EDOMAIN.into());
        }
        let mut g = self.shared.lock();
        g.core
            .sep_bind(self.h, BindTarget::Cq(cq.handle()), flags)?;
        let engines: Vec<EpHandle<Heap>> = g.core.sep_engines(self.h)?.collect();
        for e in g.eps.iter_mut().filter(|e| engines.contains(&e.h)) {
            e.cqs.push(cq.handle());
        }
        Ok(())
    }

    /// `fi_scalable_ep_bind` of a counter for the shared side's operation types.
    pub fn bind_counter(&self, cntr: &Counter<C>, flags: Flags) -> Result<()> {
        if !self.shared.same(cntr.shared()) {
            return Err(Errno::EDOMAIN.into());
        }
        let mut g = self.shared.lock();
        Ok(g.core
            .sep_bind(self.h, BindTarget::Cntr(cntr.handle()), flags)?)
    }

    /// The endpoint's own data operations: with a shared transmit context, sends are
    /// posted here (they go out from context 0's engine).
    pub fn ep(&self) -> &Endpoint<C> {
        &self.view
    }

    /// `fi_enable` of the endpoint (its AV must be bound); with a shared side, this
    /// enables that side (its context bound first).
    pub fn enable(&self) -> Result<()> {
        Ok(self.shared.lock().core.sep_enable(self.h)?)
    }

    fn context(&self, side: CtxSide, index: usize) -> Result<Context<C>> {
        let h = self
            .shared
            .lock()
            .core
            .sep_ctx_open(self.h, side, index, Flags::empty())?;
        Ok(Context {
            sep: self.h,
            side,
            index,
            view: Endpoint::context_view(self.shared.clone(), h, self.addr),
            closed: false,
        })
    }

    /// `fi_tx_context` `index`.
    pub fn tx_context(&self, index: usize) -> Result<TxContext<C>> {
        self.context(CtxSide::Tx, index).map(TxContext)
    }

    /// `fi_rx_context` `index`.
    pub fn rx_context(&self, index: usize) -> Result<RxContext<C>> {
        self.context(CtxSide::Rx, index).map(RxContext)
    }

    /// `fi_close`: -FI_EBUSY while a context is open (the endpoint stays usable);
    /// otherwise every engine closes and the buffers of operations that will never
    /// complete come back with their contexts.
    pub fn close(mut self) -> Result<Vec<(Buf, C)>> {
        let ops = self.shared.lock().close_sep(self.h)?;
        self.closed = true;
        Ok(ops.into_iter().map(|op| (op.buf, op.context)).collect())
    }
}

impl<C: Send + 'static> Drop for ScalableEndpoint<C> {
    fn drop(&mut self) {
        if !self.closed {
            // Open contexts keep it (-FI_EBUSY): it then goes with the domain.
            let gone = self.shared.lock().close_sep(self.h);
            drop(gone);
        }
    }
}

impl<C: Send + 'static> Context<C> {
    fn bind(&self, target: BindTarget<Heap>, flags: Flags) -> Result<()> {
        let mut g = self.shared().lock();
        Ok(g.core
            .sep_ctx_bind(self.sep, self.side, self.index, target, flags)?)
    }

    fn shared(&self) -> &DomainRef<C> {
        self.view.shared_ref()
    }

    fn bind_cq(&self, cq: &Cq<C>, flags: Flags) -> Result<()> {
        if !self.shared().same(cq.shared()) {
            return Err(Errno::EDOMAIN.into());
        }
        self.bind(BindTarget::Cq(cq.handle()), flags)?;
        let mut g = self.shared().lock();
        let h = self.view.handle();
        if let Some(e) = g.eps.iter_mut().find(|e| e.h == h) {
            e.cqs.push(cq.handle());
        }
        Ok(())
    }

    fn bind_counter(&self, cntr: &Counter<C>, flags: Flags) -> Result<()> {
        if !self.shared().same(cntr.shared()) {
            return Err(Errno::EDOMAIN.into());
        }
        self.bind(BindTarget::Cntr(cntr.handle()), flags)
    }

    fn enable(&self) -> Result<()> {
        let mut g = self.shared().lock();
        Ok(g.core.sep_ctx_enable(self.sep, self.side, self.index)?)
    }

    /// Closes the context: its queued operations complete with -FI_ECANCELED on its CQ
    /// (their buffers come back through it); its CQ and counters are released.
    fn close(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        self.closed = true;
        let mut g = self.shared().lock();
        Ok(g.core.sep_ctx_close(self.sep, self.side, self.index)?)
    }
}

impl<C: Send + 'static> Drop for Context<C> {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

macro_rules! context_api {
    ($t:ident, $dir:literal) => {
        impl<C: Send + 'static> $t<C> {
            #[doc = concat!("`fi_ep_bind` of a CQ (", $dir, ", optionally FI_SELECTIVE_COMPLETION), before `enable`.")]
            pub fn bind_cq(&self, cq: &Cq<C>, flags: Flags) -> Result<()> {
                self.0.bind_cq(cq, flags)
            }

            /// `fi_ep_bind` of a counter for this side's operation types.
            pub fn bind_counter(&self, cntr: &Counter<C>, flags: Flags) -> Result<()> {
                self.0.bind_counter(cntr, flags)
            }

            /// `fi_enable` of the context (the endpoint's AV bound first).
            pub fn enable(&self) -> Result<()> {
                self.0.enable()
            }

            /// The context's data operations (its engine's endpoint operations).
            pub fn ep(&self) -> &Endpoint<C> {
                &self.0.view
            }

            /// `fi_close` of the context (also on drop): what it had queued is
            /// canceled, reported on its CQ.
            pub fn close(mut self) -> Result<()> {
                self.0.close()
            }
        }
    };
}

context_api!(TxContext, "FI_TRANSMIT");
context_api!(RxContext, "FI_RECV");
