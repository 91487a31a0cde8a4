//! `struct fid_ep`: active endpoints (fi_endpoint(3)), FI_EP_RDM, FI_EP_DGRAM and
//! FI_EP_MSG (passive endpoints in [`pep`]), split as libfabric's own providers split
//! theirs: the endpoint object here (lifecycle, bind, control, options), connection
//! management in [`cm`], and one file per operation family: [`msg`] (fi_msg(3)),
//! [`tagged`] (fi_tagged(3)), [`rma`] (fi_rma(3)) and [`atomic`] (fi_atomic(3)).
//!
//! Every operation goes to the core domain ([`ofi_nostd::domain::Domain`]), which checks
//! state, bindings, sizes and flags; these modules turn C arguments into core arguments
//! (`args`: `void *` contexts and buffers become `u64` addresses, copies go through
//! [`hosted::mem::RawMemory`] under libfabric's buffer contract) and run progress
//! (FI_PROGRESS_MANUAL): after every send post, so data leaves at once, and after a
//! post refused with -FI_EAGAIN, so a retry can succeed. CQ and counter reads run it
//! too. Collectives have a table whose every entry is -FI_ENOSYS.
//!
//! Aliases (`fi_ep_alias`) are fids of their own that name the same core endpoint and
//! carry their own default operation flags; a post through an alias runs with those
//! flags swapped in.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use hosted::storage::Heap;
use ofi_nostd::Errno;
use ofi_nostd::cm::ConnReqId;
use ofi_nostd::domain::{BindTarget, Domain, EpHandle};
use ofi_nostd::ep::{EpOpt, RX_OP_FLAGS, tx_defaults_ok};
use ofi_nostd::flags::Flags;
use ofi_nostd::info::EpType;

use crate::av::AvFid;
use crate::cntr::CntrFid;
use crate::cq::CqFid;
use crate::domain::{DomainFid, InDomain};
use crate::eq::EqFid;
use crate::fid::{FidObject, no_ops_open, no_ops_set, no_tostr, object, open_into, publish};
use crate::sys;
use crate::util::{arg, neg, ret, ret_len};
use args::{After, addr, ctx};

mod args;
pub mod atomic;
pub mod cm;
pub mod msg;
pub mod pep;
pub mod rma;
pub mod sep;
pub mod srx;
pub mod stx;
pub mod tagged;

/// An open endpoint, or an alias of one.
#[repr(C)]
pub struct EpFid {
    c: sys::fid_ep,
    /// The domain it was opened on, and its core handle there.
    pub(crate) at: InDomain<EpHandle<Heap>>,
    /// The endpoint this fid is an alias of; NULL for the endpoint itself.
    parent: *const EpFid,
    /// An alias's default transmit flags.
    alias_tx: AtomicU64,
    /// An alias's default receive flags.
    alias_rx: AtomicU64,
    /// The bound event queue (released on close).
    eq: AtomicPtr<EqFid>,
    /// Endpoint, scalable endpoint or one of its contexts ([`sep`]).
    role: sep::Role,
    /// An FI_EP_MSG endpoint ([`cm`]).
    pub(crate) msg: bool,
    /// The connection request it was opened to accept (its info's `handle`), until
    /// fi_accept takes it.
    connreq: Mutex<Option<(Arc<pep::PepCore>, ConnReqId)>>,
}

impl EpFid {
    /// The fid's address as EQ entries carry it.
    pub(crate) fn fid_addr(&self) -> u64 {
        std::ptr::from_ref(&self.c.fid) as u64
    }

    /// The context the application opened the endpoint with.
    pub(crate) fn context_addr(&self) -> u64 {
        self.c.fid.context as u64
    }
}

static EP_FI_OPS: sys::fi_ops = sys::fi_ops {
    size: size_of::<sys::fi_ops>(),
    close: Some(close),
    bind: Some(bind),
    control: Some(control),
    ops_open: Some(no_ops_open),
    tostr: Some(no_tostr),
    ops_set: Some(no_ops_set),
};

pub(super) static EP_OPS: sys::fi_ops_ep = sys::fi_ops_ep {
    size: size_of::<sys::fi_ops_ep>(),
    cancel: Some(cancel),
    getopt: Some(getopt),
    setopt: Some(setopt),
    tx_ctx: Some(sep::tx_ctx),
    rx_ctx: Some(sep::rx_ctx),
    rx_size_left: Some(rx_size_left),
    tx_size_left: Some(tx_size_left),
};

// SAFETY: #[repr(C)] with the fid_ep (fid first) as first field; only `open` and the
// FI_ALIAS control make fids with this class and ops.
unsafe impl FidObject for EpFid {
    const CLASS: u32 = sys::FI_CLASS_EP;
    fn fi_ops() -> *const sys::fi_ops {
        &raw const EP_FI_OPS
    }
}

impl EpFid {
    fn new(
        domain: &DomainFid,
        handle: EpHandle<Heap>,
        parent: *const EpFid,
        flags: (Flags, Flags),
        context: *mut c_void,
    ) -> EpFid {
        EpFid {
            c: sys::fid_ep {
                fid: EpFid::header(context),
                ops: (&raw const EP_OPS).cast_mut(),
                cm: (&raw const cm::CM_OPS).cast_mut(),
                msg: (&raw const msg::MSG_OPS).cast_mut(),
                rma: (&raw const rma::RMA_OPS).cast_mut(),
                tagged: (&raw const tagged::TAGGED_OPS).cast_mut(),
                atomic: (&raw const atomic::ATOMIC_OPS).cast_mut(),
                collective: (&raw const crate::stubs::COLLECTIVE_OPS).cast_mut(),
            },
            at: InDomain::new(domain, handle),
            parent,
            alias_tx: AtomicU64::new(flags.0.bits()),
            alias_rx: AtomicU64::new(flags.1.bits()),
            eq: AtomicPtr::new(std::ptr::null_mut()),
            role: sep::Role::Ep,
            msg: false,
            connreq: Mutex::new(None),
        }
    }

    fn is_alias(&self) -> bool {
        !self.parent.is_null()
    }

    /// Runs `f` on the core endpoint's operations for a data-path call, with an
    /// alias's default flags in force; then the pass `kick` asks for (a full pass when
    /// the core refused with -FI_EAGAIN, so the retry can succeed).
    pub(crate) fn op<R>(
        &self,
        kick: After,
        f: impl FnOnce(&mut Domain<Heap>, EpHandle<Heap>) -> Result<R, Errno>,
    ) -> Result<R, Errno> {
        self.at.domain().data(|st| {
            let h = self.at.handle;
            let r = if self.is_alias() {
                let ep = st.core.ep_mut(h)?;
                let saved = (ep.getopsflag(Flags::TRANSMIT)?, ep.getopsflag(Flags::RECV)?);
                let alias = (
                    Flags::from_bits_retain(self.alias_tx.load(Ordering::Relaxed)),
                    Flags::from_bits_retain(self.alias_rx.load(Ordering::Relaxed)),
                );
                ep.setopsflag(Flags::TRANSMIT | alias.0)?;
                ep.setopsflag(Flags::RECV | alias.1)?;
                let r = f(&mut st.core, h);
                if let Ok(ep) = st.core.ep_mut(h) {
                    let _ = ep.setopsflag(Flags::TRANSMIT | saved.0);
                    let _ = ep.setopsflag(Flags::RECV | saved.1);
                }
                r
            } else {
                f(&mut st.core, h)
            };
            // A context of a scalable endpoint passes over its own receive queue.
            let queue = st.ep_queue(h);
            if kick == After::Progress || matches!(r, Err(Errno::EAGAIN)) {
                st.progress_on(queue);
            } else if kick == After::Transmit {
                st.progress_tx_on(queue);
            } else if r.is_err() {
                st.wake();
            }
            r
        })
    }
}

/// The endpoint behind `p`.
///
/// # Safety
///
/// As [`object`].
pub(crate) unsafe fn ep<'a>(p: *const sys::fid_ep) -> Result<&'a EpFid, Errno> {
    // SAFETY: forwarded contract; the fid is the first field.
    unsafe { object::<EpFid>(p.cast()) }
}

/// `fi_endpoint`: an FI_EP_RDM or FI_EP_DGRAM endpoint with the attributes of `info`
/// (as getinfo returned it, possibly narrowed).
///
/// # Safety
///
/// Called through the application's `fi_endpoint` with valid or NULL pointers.
pub unsafe extern "C" fn open(
    domain: *mut sys::fid_domain,
    info: *mut sys::fi_info,
    ep_out: *mut *mut sys::fid_ep,
    context: *mut c_void,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        open_as(
            domain,
            info,
            ep_out,
            context,
            sep::Role::Ep,
            Domain::ep_open,
        )
    }
}

/// The core call that opens an endpoint or a scalable endpoint.
type CoreOpen = fn(&mut Domain<Heap>, &ofi_nostd::info::Info, u64) -> Result<EpHandle<Heap>, Errno>;

/// Opens an endpoint fid of `role` with the core call `open` (`fi_endpoint`,
/// `fi_scalable_ep`).
///
/// # Safety
///
/// As [`open`].
unsafe fn open_as(
    domain: *mut sys::fid_domain,
    info: *mut sys::fi_info,
    ep_out: *mut *mut sys::fid_ep,
    context: *mut c_void,
    role: sep::Role,
    open: CoreOpen,
) -> c_int {
    let make = || {
        // SAFETY: forwarded contract.
        let d = unsafe { DomainFid::from_c(domain) }?;
        if info.is_null() {
            return Err(Errno::EINVAL);
        }
        // SAFETY: non-NULL, the application's fi_info; `handle` is NULL or a fid (an
        // FI_CONNREQ info's request).
        let handle = unsafe { (*info).handle };
        // SAFETY: a non-NULL info of the application is a valid fi_info.
        let info = unsafe { crate::info::from_c(info) }.ok_or(Errno::EINVAL)?;
        let msg = info.ep_attr.ep_type == EpType::Msg;
        // A passive endpoint as `handle` (fi_getinfo with it) only lent its address.
        // SAFETY: NULL or a fid.
        let lent = unsafe { pep::pep(handle.cast()) }.is_ok();
        let connreq = if msg && !handle.is_null() && !lent {
            // SAFETY: as above.
            let r = unsafe { pep::connreq(handle) }?;
            Some((r.pep.clone(), r.req))
        } else {
            None
        };
        let h = d.with(|core| open(core, &info, ctx(context)))?;
        let flags = (Flags::empty(), Flags::empty());
        let mut e = EpFid::new(d, h, std::ptr::null(), flags, context);
        e.role = role;
        e.msg = msg;
        e.connreq = Mutex::new(connreq);
        Ok(e)
    };
    // SAFETY: NULL or writable (application's contract).
    unsafe { open_into(ep_out, make) }
}

/// `fi_close(ep)`: outstanding operations are discarded; -FI_EBUSY while aliases are
/// open. Closing an alias releases only the alias.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    let shut = |e: &EpFid| {
        if let Some(r) = sep::close(e) {
            return r;
        }
        e.at.domain().control(|st| {
            if e.is_alias() {
                st.core.ep_mut(e.at.handle)?.alias_close()
            } else {
                if e.msg {
                    st.wakes.remove(hosted::runtime::Wake::Cm(e.fid_addr()));
                } else {
                    st.wakes.remove(hosted::runtime::Wake::Fault(e.at.handle));
                }
                linger(st, e.at.handle);
                if crate::domain::log_info()
                    && let Ok(ep) = st.core.ep(e.at.handle)
                    && let Some(r) = ep.rdm()
                {
                    log_rdm(r.stats());
                }
                st.core.ep_close(e.at.handle)
            }
        })?;
        let eq = e.eq.load(Ordering::Acquire);
        if !eq.is_null() {
            // SAFETY: a bound EQ cannot close while bound (its fi_close is refused).
            let q = unsafe { &*eq };
            q.eps.remove(e);
            q.bind_ref(false);
        }
        Ok(())
    };
    // SAFETY: forwarded contract (the FI_ALIAS fids are published as `open`'s are).
    unsafe { crate::fid::close::<EpFid>(fid, shut) }
}

/// `fi_ep_bind`: a CQ (FI_TRANSMIT / FI_RECV / FI_SELECTIVE_COMPLETION), a counter
/// (FI_SEND, FI_RECV, ...), the AV or an EQ, all before fi_enable, per the core's
/// rules. Objects of another domain are -FI_EDOMAIN; memory regions (FI_MR_ENDPOINT is
/// not offered) and other fids are -FI_EINVAL; a shared transmit or receive context
/// (flags 0) as [`Domain::ep_bind_stx`] / [`Domain::ep_bind_srx`] say.
unsafe extern "C" fn bind(fid: *mut sys::fid, bfid: *mut sys::fid, flags: u64) -> c_int {
    // SAFETY: NULL or a fid.
    let e = arg!(unsafe { object::<EpFid>(fid) });
    if e.is_alias() || bfid.is_null() {
        return neg(Errno::EINVAL);
    }
    let flags = Flags::from_bits_retain(flags);
    // SAFETY: non-NULL, a fid of some object (application's contract).
    let class = unsafe { bfid.read_unaligned() }.fclass as u32;
    let same = |p: *const DomainFid| {
        if std::ptr::eq(p, e.at.domain_ptr()) {
            Ok(())
        } else {
            Err(Errno::EDOMAIN)
        }
    };
    let r = (|| -> Result<(), Errno> {
        // A scalable endpoint binds its shared context as an endpoint does (the core
        // binds it to every context engine).
        let shared = matches!(class, sys::FI_CLASS_STX_CTX | sys::FI_CLASS_SRX_CTX);
        if e.role != sep::Role::Ep
            && class != sys::FI_CLASS_EQ
            && !(e.role == sep::Role::Sep && shared)
        {
            let target = match class {
                // SAFETY: a fid (contract).
                sys::FI_CLASS_CQ => unsafe { object::<CqFid>(bfid) }
                    .and_then(|c| same(c.at.domain_ptr()).map(|()| BindTarget::Cq(c.at.handle)))?,
                // SAFETY: a fid (contract).
                sys::FI_CLASS_CNTR => unsafe { object::<CntrFid>(bfid) }.and_then(|c| {
                    same(c.at.domain_ptr()).map(|()| BindTarget::Cntr(c.at.handle))
                })?,
                // SAFETY: a fid (contract).
                sys::FI_CLASS_AV => unsafe { object::<AvFid>(bfid) }
                    .and_then(|a| same(a.at.domain_ptr()).map(|()| BindTarget::Av(a.at.handle)))?,
                _ => return Err(Errno::EINVAL),
            };
            return sep::bind(e, target, flags).unwrap_or(Err(Errno::EINVAL));
        }
        match class {
            sys::FI_CLASS_CQ => {
                // SAFETY: a fid (contract).
                let c = unsafe { object::<CqFid>(bfid) }?;
                same(c.at.domain_ptr())?;
                e.at.domain()
                    .with(|d| d.ep_bind(e.at.handle, BindTarget::Cq(c.at.handle), flags))
            }
            sys::FI_CLASS_CNTR => {
                // SAFETY: a fid (contract).
                let c = unsafe { object::<CntrFid>(bfid) }?;
                same(c.at.domain_ptr())?;
                e.at.domain()
                    .with(|d| d.ep_bind(e.at.handle, BindTarget::Cntr(c.at.handle), flags))
            }
            sys::FI_CLASS_AV => {
                // SAFETY: a fid (contract).
                let a = unsafe { object::<AvFid>(bfid) }?;
                same(a.at.domain_ptr())?;
                e.at.domain()
                    .with(|d| d.ep_bind(e.at.handle, BindTarget::Av(a.at.handle), flags))
            }
            sys::FI_CLASS_EQ => {
                // SAFETY: a fid (contract).
                let q = unsafe { object::<EqFid>(bfid) }?;
                if !std::ptr::eq(q.fabric_ptr(), e.at.domain().fabric_ptr()) {
                    return Err(Errno::EDOMAIN);
                }
                let token = addr(std::ptr::from_ref(q));
                e.at.domain().control(|st| {
                    st.core.ep_bind(e.at.handle, BindTarget::Eq(token), flags)?;
                    // Its domain's passes wake the EQ's waiter for connection events,
                    // or for the endpoint's critical errors.
                    if let Some(w) = q.waiter_fd() {
                        let wake = if e.msg {
                            hosted::runtime::Wake::Cm(e.fid_addr())
                        } else {
                            hosted::runtime::Wake::Fault(e.at.handle)
                        };
                        st.add_wake(wake, w);
                    }
                    Ok(())
                })?;
                q.bind_ref(true);
                q.eps.add(e);
                e.eq.store(std::ptr::from_ref(q).cast_mut(), Ordering::Release);
                Ok(())
            }
            sys::FI_CLASS_STX_CTX => {
                // SAFETY: a fid (contract).
                let s = unsafe { object::<stx::StxFid>(bfid) }?;
                same(s.at.domain_ptr())?;
                if !flags.is_empty() {
                    return Err(Errno::EINVAL);
                }
                e.at.domain()
                    .with(|d| d.ep_bind_stx(e.at.handle, s.at.handle))
            }
            sys::FI_CLASS_SRX_CTX => {
                // SAFETY: a fid (contract).
                let s = unsafe { object::<srx::SrxFid>(bfid) }?;
                same(s.at.domain_ptr())?;
                if !flags.is_empty() {
                    return Err(Errno::EINVAL);
                }
                e.at.domain()
                    .with(|d| d.ep_bind_srx(e.at.handle, s.at.handle))
            }
            _ => Err(Errno::EINVAL),
        }
    })();
    ret(r)
}

/// `fi_control` of an endpoint: FI_ENABLE, FI_GETOPSFLAG, FI_SETOPSFLAG, FI_ALIAS.
/// FI_GETWAIT and other commands are -FI_ENOSYS (endpoints have no wait object).
unsafe extern "C" fn control(fid: *mut sys::fid, cmd: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: NULL or a fid.
    let e = arg!(unsafe { object::<EpFid>(fid) });
    let Ok(cmd) = u32::try_from(cmd) else {
        return neg(Errno::ENOSYS);
    };
    let r = match cmd {
        sys::FI_ENABLE => {
            if e.is_alias() {
                Err(Errno::EINVAL)
            } else if let Some(r) = sep::enable(e) {
                r
            } else {
                e.at.domain().with(|d| d.ep_enable(e.at.handle))
            }
        }
        sys::FI_GETOPSFLAG => {
            let p = arg.cast::<u64>();
            if p.is_null() {
                return neg(Errno::EINVAL);
            }
            // SAFETY: FI_GETOPSFLAG's argument is a `uint64_t *` (non-NULL).
            let f = Flags::from_bits_retain(unsafe { p.read_unaligned() });
            let got = if e.is_alias() {
                match (f.contains(Flags::TRANSMIT), f.contains(Flags::RECV)) {
                    (true, false) => Ok(e.alias_tx.load(Ordering::Relaxed)),
                    (false, true) => Ok(e.alias_rx.load(Ordering::Relaxed)),
                    _ => Err(Errno::EINVAL),
                }
            } else {
                e.at.domain()
                    .with(|d| Ok(d.ep(e.at.handle)?.getopsflag(f)?.bits()))
            };
            // SAFETY: as above.
            got.map(|v| unsafe { p.write_unaligned(v) })
        }
        sys::FI_SETOPSFLAG => {
            let p = arg.cast::<u64>();
            if p.is_null() {
                return neg(Errno::EINVAL);
            }
            // SAFETY: FI_SETOPSFLAG's argument is a `uint64_t *` (non-NULL).
            let f = Flags::from_bits_retain(unsafe { p.read_unaligned() });
            if e.is_alias() {
                let ops = f.difference(Flags::TRANSMIT | Flags::RECV);
                let tx_ok =
                    e.at.domain()
                        .with(|d| Ok(tx_defaults_ok(d.ep(e.at.handle)?.ep_type(), ops)));
                match (f.contains(Flags::TRANSMIT), f.contains(Flags::RECV)) {
                    (true, false) if tx_ok == Ok(true) => {
                        e.alias_tx.store(ops.bits(), Ordering::Relaxed);
                        Ok(())
                    }
                    (false, true) if RX_OP_FLAGS.contains(ops) => {
                        e.alias_rx.store(ops.bits(), Ordering::Relaxed);
                        Ok(())
                    }
                    _ => Err(Errno::EINVAL),
                }
            } else {
                e.at.domain().with(|d| d.ep_mut(e.at.handle)?.setopsflag(f))
            }
        }
        sys::FI_ALIAS => {
            let a = arg.cast::<sys::fi_alias>();
            if a.is_null() || e.is_alias() {
                return neg(Errno::EINVAL);
            }
            // SAFETY: FI_ALIAS's argument is a `struct fi_alias *` (non-NULL).
            let a = unsafe { a.read_unaligned() };
            if a.fid.is_null() {
                return neg(Errno::EINVAL);
            }
            let flags = Flags::from_bits_retain(a.flags);
            match e.at.domain().with(|d| d.ep_mut(e.at.handle)?.alias(flags)) {
                Ok(defaults) => {
                    let mut alias = EpFid::new(
                        e.at.domain(),
                        e.at.handle,
                        std::ptr::from_ref(e),
                        defaults,
                        e.c.fid.context,
                    );
                    alias.msg = e.msg;
                    let obj = publish(alias);
                    // SAFETY: checked non-NULL; a `struct fid **` (contract).
                    unsafe { a.fid.write_unaligned(obj.cast::<sys::fid>()) };
                    Ok(())
                }
                Err(err) => Err(err),
            }
        }
        _ => Err(Errno::ENOSYS),
    };
    ret(r)
}

/// `fi_cancel`: a queued operation with this context completes with an FI_ECANCELED
/// error entry; 0 either way ("request submitted").
unsafe extern "C" fn cancel(fid: *mut sys::fid, context: *mut c_void) -> isize {
    // SAFETY: NULL or a fid.
    let e = arg!(unsafe { object::<EpFid>(fid) });
    ret_len(
        e.at.domain()
            .data(|st| {
                let r = st.core.ep_cancel(e.at.handle, ctx(context));
                st.wake();
                r
            })
            .map(|()| 0),
    )
}

/// `fi_getopt` at FI_OPT_ENDPOINT (size_t options); -FI_ETOOSMALL for a short buffer.
pub(super) unsafe extern "C" fn getopt(
    fid: *mut sys::fid,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: *mut usize,
) -> c_int {
    // SAFETY: NULL or a fid.
    let e = arg!(unsafe { object::<EpFid>(fid) });
    let r = EpOpt::from_raw(optname).and_then(|opt| {
        e.at.domain()
            .with(|d| d.ep(e.at.handle)?.getopt(level, opt))
    });
    // SAFETY: forwarded contract.
    unsafe { put_opt(r, optval, optlen) }
}

/// Writes the size_t option value `r` (or its error) for fi_getopt: -FI_EINVAL for
/// NULL pointers, -FI_ETOOSMALL (with `*optlen` the size) for a short buffer.
///
/// # Safety
///
/// `optval` and `optlen` are NULL or fi_getopt's buffer and its length.
pub(super) unsafe fn put_opt(
    r: Result<usize, Errno>,
    optval: *mut c_void,
    optlen: *mut usize,
) -> c_int {
    if optval.is_null() || optlen.is_null() {
        return neg(Errno::EINVAL);
    }
    let v = arg!(r);
    // SAFETY: checked non-NULL; the application's buffer of `*optlen` bytes.
    unsafe {
        let room = optlen.read_unaligned();
        optlen.write_unaligned(size_of::<usize>());
        if room < size_of::<usize>() {
            return neg(Errno::ETOOSMALL);
        }
        optval.cast::<usize>().write_unaligned(v);
    }
    0
}

/// The size_t value fi_setopt was given: -FI_EINVAL for NULL or a short one.
///
/// # Safety
///
/// `optval` is NULL or fi_setopt's value of `optlen` bytes.
pub(super) unsafe fn get_opt(optval: *const c_void, optlen: usize) -> Result<usize, Errno> {
    if optval.is_null() || optlen < size_of::<usize>() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: checked non-NULL and long enough.
    Ok(unsafe { optval.cast::<usize>().read_unaligned() })
}

/// `fi_setopt` at FI_OPT_ENDPOINT (size_t options).
pub(super) unsafe extern "C" fn setopt(
    fid: *mut sys::fid,
    level: c_int,
    optname: c_int,
    optval: *const c_void,
    optlen: usize,
) -> c_int {
    // SAFETY: NULL or a fid.
    let e = arg!(unsafe { object::<EpFid>(fid) });
    // SAFETY: forwarded contract.
    let v = arg!(unsafe { get_opt(optval, optlen) });
    ret(EpOpt::from_raw(optname).and_then(|opt| {
        e.at.domain()
            .with(|d| d.ep_mut(e.at.handle)?.setopt(level, opt, v))
    }))
}

/// `fi_rx_size_left`.
unsafe extern "C" fn rx_size_left(p: *mut sys::fid_ep) -> isize {
    // SAFETY: forwarded contract.
    let e = arg!(unsafe { ep(p) });
    ret_len(
        e.at.domain()
            .data(|st| Ok(st.core.ep(e.at.handle)?.rx_size_left())),
    )
}

/// `fi_tx_size_left`.
pub(super) unsafe extern "C" fn tx_size_left(p: *mut sys::fid_ep) -> isize {
    // SAFETY: forwarded contract.
    let e = arg!(unsafe { ep(p) });
    ret_len(
        e.at.domain()
            .data(|st| st.core.ep_tx_size_left(e.at.handle)),
    )
}

/// What a closing RDM endpoint's engine counted, on stderr (the domain logs its own
/// drops when it closes, after its endpoints): the frames it dropped by reason, and
/// its recovery (retransmissions, timeouts, sessions ended: `peer_failures`, which
/// counts a peer's CLOSE too, and of those the ones that timed out).
/// The first half of `fi_close` of endpoint `h` (a scalable endpoint: all its context
/// engines): acknowledge what arrived, send every peer a CLOSE, and linger for
/// retransmissions until each acknowledged it or the core's deadline passed (a lost
/// last ACK would fail the peer's send).
fn linger(st: &mut crate::domain::DomainState, h: EpHandle<Heap>) {
    if let Ok(Some(until)) = st.core.ep_begin_close(h, hosted::api::now()) {
        hosted::api::progress_until(until, || {
            st.progress();
            st.core.ep_lingering(h)
        });
    }
}

fn log_rdm(s: &ofi_nostd::rdm::RdmStats) {
    let mut r = hosted::drops::DropReport::default();
    r.add_rdm(s);
    eprintln!(
        "libfabric:nostd:ep: closed, {r}; {} packets sent, {} received, {} timeout and {} fast retransmissions, {} timeouts ({} spurious), {} sessions ended ({} timed out)",
        s.tx_packets,
        s.rx_packets,
        s.tx_timeout_retransmits,
        s.tx_fast_retransmits,
        s.rto_expirations,
        s.spurious_timeouts,
        s.peer_failures,
        s.fail_retransmit + s.fail_probe
    );
}
