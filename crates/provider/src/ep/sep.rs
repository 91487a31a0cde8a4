//! Scalable endpoints (`fi_scalable_ep`) and their transmit and receive contexts
//! (`fi_tx_context`, `fi_rx_context`) over the core's [`ofi_nostd::sep`].
//!
//! The scalable endpoint and each context are [`EpFid`]s with a `Role`: a context
//! names the core engine that carries it, so every data operation of fi_msg(3),
//! fi_tagged(3), fi_rma(3) and fi_atomic(3) runs through the same code as on an
//! endpoint; what differs (bind, enable, close, opening contexts) dispatches here.
//! Every fid keeps class FI_CLASS_EP (libfabric's FI_CLASS_SEP / FI_CLASS_TX_CTX /
//! FI_CLASS_RX_CTX are not reported).

use std::ffi::{c_int, c_void};

use hosted::storage::Heap;
use ofi_nostd::Errno;
use ofi_nostd::domain::{BindTarget, Domain, EpHandle};
use ofi_nostd::flags::Flags;
use ofi_nostd::sep::CtxSide;

use super::{EpFid, ep};
use crate::fid::open_into;
use crate::sys;

/// What an [`EpFid`] stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// An endpoint of `fi_endpoint` (or an alias of one).
    Ep,
    /// A scalable endpoint; its handle is its engine 0.
    Sep,
    /// Context `index` of `side` of the scalable endpoint `sep`.
    Ctx {
        /// The scalable endpoint.
        sep: EpHandle<Heap>,
        /// Transmit or receive.
        side: CtxSide,
        /// Its index.
        index: usize,
    },
}

/// `fi_scalable_ep`: a scalable endpoint with `info->ep_attr->tx_ctx_cnt` transmit and
/// `rx_ctx_cnt` receive contexts (FI_EP_RDM or FI_EP_DGRAM).
///
/// # Safety
///
/// Called through the application's `fi_scalable_ep` with valid or NULL pointers.
pub unsafe extern "C" fn open(
    domain: *mut sys::fid_domain,
    info: *mut sys::fi_info,
    sep_out: *mut *mut sys::fid_ep,
    context: *mut c_void,
) -> c_int {
    // SAFETY: forwarded contract.
    let rc = unsafe { super::open_as(domain, info, sep_out, context, Role::Sep, Domain::sep_open) };
    if rc == 0 && crate::domain::log_info() {
        // SAFETY: opened, so `info` was a valid fi_info with its ep_attr.
        let a = unsafe { (*info).ep_attr.as_ref() };
        let count = |c: usize| match c {
            ofi_nostd::info::FI_SHARED_CONTEXT => "a shared".to_owned(),
            c => c.max(1).to_string(),
        };
        let (tx, rx) = a.map_or((1, 1), |a| (a.tx_ctx_cnt, a.rx_ctx_cnt));
        crate::domain::log_line(format!(
            "libfabric:nostd:sep: opened, {} transmit and {} receive contexts\n",
            count(tx),
            count(rx)
        ));
    }
    rc
}

/// `fi_tx_context` / `fi_rx_context` of a scalable endpoint: context `index` with
/// `op_flags` as its default operation flags (`attr` may be NULL).
///
/// # Safety
///
/// `p` a fid_ep or NULL; `out` NULL or writable.
pub(super) unsafe fn open_ctx(
    p: *mut sys::fid_ep,
    side: CtxSide,
    index: c_int,
    op_flags: u64,
    out: *mut *mut sys::fid_ep,
    context: *mut c_void,
) -> c_int {
    let make = || {
        // SAFETY: forwarded contract.
        let s = unsafe { ep(p) }?;
        if s.role != Role::Sep {
            return Err(Errno::ENOSYS);
        }
        let index = usize::try_from(index).map_err(|_| Errno::EINVAL)?;
        let sep = s.at.handle;
        let flags = Flags::from_bits_retain(op_flags);
        let h =
            s.at.domain()
                .with(|d| d.sep_ctx_open(sep, side, index, flags))?;
        let none = (Flags::empty(), Flags::empty());
        let mut e = EpFid::new(s.at.domain(), h, std::ptr::null(), none, context);
        e.role = Role::Ctx { sep, side, index };
        Ok(e)
    };
    // SAFETY: NULL or writable (application's contract).
    unsafe { open_into(out, make) }
}

/// `fi_ep_bind` of a scalable endpoint (its AV, or an EQ) or of a context (its CQs
/// and counters); `Ok(None)` for a plain endpoint, which binds as before.
pub(super) fn bind(e: &EpFid, target: BindTarget<Heap>, flags: Flags) -> Option<Result<(), Errno>> {
    let h = e.at.handle;
    match e.role {
        Role::Ep => None,
        Role::Sep => Some(e.at.domain().with(|d| d.sep_bind(h, target, flags))),
        Role::Ctx { sep, side, index } => Some(
            e.at.domain()
                .with(|d| d.sep_ctx_bind(sep, side, index, target, flags)),
        ),
    }
}

/// FI_ENABLE of a scalable endpoint or context; `None` for a plain endpoint.
pub(super) fn enable(e: &EpFid) -> Option<Result<(), Errno>> {
    let h = e.at.handle;
    match e.role {
        Role::Ep => None,
        Role::Sep => Some(e.at.domain().with(|d| d.sep_enable(h))),
        Role::Ctx { sep, side, index } => {
            Some(e.at.domain().with(|d| d.sep_ctx_enable(sep, side, index)))
        }
    }
}

/// `fi_close` of a scalable endpoint (every engine lingers as an endpoint does, then
/// all close; -FI_EBUSY while a context is open) or of a context (its queued
/// operations are canceled); `None` for a plain endpoint.
pub(super) fn close(e: &EpFid) -> Option<Result<(), Errno>> {
    let h = e.at.handle;
    match e.role {
        Role::Ep => None,
        Role::Ctx { sep, side, index } => {
            Some(e.at.domain().with(|d| d.sep_ctx_close(sep, side, index)))
        }
        Role::Sep => Some(e.at.domain().control(|st| {
            let c = *st.core.sep_contexts(h)?;
            if c.open_count() > 0 {
                return Err(Errno::EBUSY);
            }
            let engines: Vec<EpHandle<Heap>> = st.core.sep_engines(h)?.collect();
            super::linger(st, h);
            if crate::domain::log_info() {
                log_contexts(&st.core, &engines);
            }
            st.core.sep_close(h)
        })),
    }
}

/// `fi_tx_context` through the endpoint ops.
pub(super) unsafe extern "C" fn tx_ctx(
    sep: *mut sys::fid_ep,
    index: c_int,
    attr: *mut sys::fi_tx_attr,
    tx: *mut *mut sys::fid_ep,
    context: *mut c_void,
) -> c_int {
    // SAFETY: NULL or the application's fi_tx_attr.
    let op_flags = unsafe { attr.as_ref() }.map_or(0, |a| a.op_flags);
    // SAFETY: forwarded contract.
    unsafe { open_ctx(sep, CtxSide::Tx, index, op_flags, tx, context) }
}

/// `fi_rx_context` through the endpoint ops.
pub(super) unsafe extern "C" fn rx_ctx(
    sep: *mut sys::fid_ep,
    index: c_int,
    attr: *mut sys::fi_rx_attr,
    rx: *mut *mut sys::fid_ep,
    context: *mut c_void,
) -> c_int {
    // SAFETY: NULL or the application's fi_rx_attr.
    let op_flags = unsafe { attr.as_ref() }.map_or(0, |a| a.op_flags);
    // SAFETY: forwarded contract.
    unsafe { open_ctx(sep, CtxSide::Rx, index, op_flags, rx, context) }
}

/// What each context engine of a closing scalable endpoint carried, on stderr (with
/// `FI_LOG_LEVEL=info`): shows which contexts an application really used.
fn log_contexts(core: &Domain<Heap>, engines: &[EpHandle<Heap>]) {
    let mut line = format!("libfabric:nostd:sep: closed, {} contexts", engines.len());
    for (k, &g) in engines.iter().enumerate() {
        if let Some(r) = core.ep(g).ok().and_then(|ep| ep.rdm()) {
            let s = r.stats();
            line.push_str(&format!(
                "; context {k}: {} packets sent, {} received",
                s.tx_packets, s.rx_packets
            ));
        }
    }
    line.push('\n');
    crate::domain::log_line(line);
}
