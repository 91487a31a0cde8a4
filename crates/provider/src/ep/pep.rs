//! `struct fid_pep`: passive endpoints (fi_endpoint(3) `fi_passive_ep`, fi_cm(3)
//! `fi_listen`, `fi_reject`) and the connection requests they hand out (the `handle`
//! of an FI_CONNREQ event's `fi_info`).
//!
//! A passive endpoint is opened on a fabric, but the core keeps listeners on a domain
//! (they need its port): each passive endpoint opens a private domain of its own on
//! the interface and address of its `info` (a `src_addr` with a port listens there;
//! none or port 0, an ephemeral port that `fi_getname` reports), FI_THREAD_SAFE so its
//! watchdog answers requests while the application sleeps on the EQ. That domain is
//! registered with the fabric at its address: `fi_domain` with an info naming it (an
//! FI_CONNREQ info's `src_addr`, or an info whose `handle` was this passive endpoint)
//! returns it, shared, so accepted endpoints answer from the listener's port as TCP's
//! do (and an endpoint opened with a passive endpoint's info takes its address); its
//! last `fi_close` closes it. `fi_accept` takes the request off the listener.
//!
//! A request handed out stays allocated while its request waits and for the
//! `HANDED_KEEP` (64) requests handed out after it, so a `handle` used soon after
//! fi_accept (fabtests' error paths call fi_reject with it) is still a valid object
//! whose request is simply gone (-FI_EINVAL); older answered ones are released, so a
//! server that accepts for ever holds a bounded number.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use hosted::storage::Heap;
use ofi_nostd::Errno;
use ofi_nostd::addr::EpAddr;
use ofi_nostd::cm::ConnReqId;
use ofi_nostd::domain::PepHandle;
use ofi_nostd::ep::EpOpt;
use ofi_nostd::info::{AddrFormat, EpType, Info, RawAddr, Threading};

use crate::abi::DomainAbi;
use crate::domain::{DomainFid, DomainRef};
use crate::eq::EqFid;
use crate::fabric::FabricFid;
use crate::fid::{FidObject, no_ops_open, no_ops_set, no_tostr, object, open_into, publish};
use crate::sys;
use crate::util::{arg, neg, ret};

/// Where a passive endpoint listens: its private domain and its listener there.
pub(crate) struct PepAt {
    /// The private domain (published by `crate::domain::open`, closed with the PEP).
    pub(crate) domain: *const DomainFid,
    /// The core listener.
    pub(crate) handle: PepHandle<Heap>,
}

/// What a passive endpoint shares with the requests and endpoints that name it: where
/// it listens (`None` once closed), and the requests it handed out.
#[derive(Default)]
pub(crate) struct PepCore {
    at: Mutex<Option<PepAt>>,
    handed: Mutex<Vec<*mut ConnReqFid>>,
    /// Requests handed out in all (the close's log line).
    handed_total: std::sync::atomic::AtomicU64,
}

// SAFETY: the domain pointer is only dereferenced under `at`'s lock while the domain
// is open (the PEP closes it under the same lock); the request pointers are only
// released by the PEP's close.
unsafe impl Send for PepCore {}
// SAFETY: as above.
unsafe impl Sync for PepCore {}

impl PepCore {
    /// Where it listens, locked: `None` once the passive endpoint closed.
    pub(crate) fn at(&self) -> MutexGuard<'_, Option<PepAt>> {
        self.at.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` on the listener's domain; -FI_EINVAL once the PEP closed.
    pub(crate) fn with<R>(
        &self,
        f: impl FnOnce(&DomainFid, PepHandle<Heap>) -> Result<R, Errno>,
    ) -> Result<R, Errno> {
        let g = self.at();
        let at = g.as_ref().ok_or(Errno::EINVAL)?;
        // SAFETY: open while `at` holds it (see `PepCore`).
        f(unsafe { &*at.domain }, at.handle)
    }
}

/// A connection request (`fi_info::handle` of FI_CONNREQ), class FI_CLASS_CONNREQ.
#[repr(C)]
pub struct ConnReqFid {
    fid: sys::fid,
    /// The passive endpoint that received it.
    pub(crate) pep: Arc<PepCore>,
    /// The request in its backlog.
    pub(crate) req: ConnReqId,
}

static CONNREQ_FI_OPS: sys::fi_ops = crate::fid::fi_ops(connreq_close);

// SAFETY: #[repr(C)] with the fid first; only `PepFid::hand_out` makes fids with this
// class and ops.
unsafe impl FidObject for ConnReqFid {
    const CLASS: u32 = sys::FI_CLASS_CONNREQ;
    fn fi_ops() -> *const sys::fi_ops {
        &raw const CONNREQ_FI_OPS
    }
}

/// `fi_close` of a request: the passive endpoint owns it (released when it closes).
unsafe extern "C" fn connreq_close(fid: *mut sys::fid) -> c_int {
    // SAFETY: NULL or a fid (contract).
    match unsafe { object::<ConnReqFid>(fid) } {
        Ok(_) => 0,
        Err(e) => neg(e),
    }
}

/// The request behind an info's `handle`, if it is one of ours.
///
/// # Safety
///
/// `h` is NULL or a fid.
pub(crate) unsafe fn connreq<'a>(h: sys::fid_t) -> Result<&'a ConnReqFid, Errno> {
    // SAFETY: forwarded contract.
    unsafe { object::<ConnReqFid>(h) }
}

/// An open passive endpoint.
#[repr(C)]
pub struct PepFid {
    c: sys::fid_pep,
    fabric: *const FabricFid,
    /// The info it was opened with (FI_CONNREQ infos start from it).
    info: Info,
    pub(crate) core: Arc<PepCore>,
    /// The bound EQ.
    eq: AtomicPtr<EqFid>,
}

static PEP_FI_OPS: sys::fi_ops = sys::fi_ops {
    size: size_of::<sys::fi_ops>(),
    close: Some(close),
    bind: Some(bind),
    control: Some(control),
    ops_open: Some(no_ops_open),
    tostr: Some(no_tostr),
    ops_set: Some(no_ops_set),
};

static PEP_OPS: sys::fi_ops_ep = sys::fi_ops_ep {
    size: size_of::<sys::fi_ops_ep>(),
    cancel: Some(super::cancel),
    getopt: Some(getopt),
    setopt: Some(setopt),
    tx_ctx: Some(super::sep::tx_ctx),
    rx_ctx: Some(super::sep::rx_ctx),
    rx_size_left: Some(super::rx_size_left),
    tx_size_left: Some(super::tx_size_left),
};

static PEP_CM_OPS: sys::fi_ops_cm = sys::fi_ops_cm {
    size: size_of::<sys::fi_ops_cm>(),
    setname: Some(setname),
    getname: Some(getname),
    getpeer: Some(super::cm::getpeer),
    connect: Some(super::cm::connect),
    listen: Some(listen),
    accept: Some(super::cm::accept),
    reject: Some(reject),
    shutdown: Some(super::cm::shutdown),
    join: Some(super::cm::join),
};

// SAFETY: #[repr(C)] with the fid_pep (fid first) as first field; only `open` makes
// fids with this class and ops.
unsafe impl FidObject for PepFid {
    const CLASS: u32 = sys::FI_CLASS_PEP;
    fn fi_ops() -> *const sys::fi_ops {
        &raw const PEP_FI_OPS
    }
}

impl PepFid {
    /// The fid's address as EQ entries carry it.
    pub(crate) fn fid_addr(&self) -> u64 {
        std::ptr::from_ref(&self.c.fid) as u64
    }

    /// The context the application opened it with.
    pub(crate) fn context_addr(&self) -> u64 {
        self.c.fid.context as u64
    }

    /// Its address in format `fmt` (or its own format when `fmt` is unspecified), for
    /// an info whose `handle` it is.
    pub(crate) fn src_addr(&self, fmt: AddrFormat) -> Result<RawAddr, Errno> {
        let a = self.core.with(|d, h| d.with(|c| c.pep_addr(h)))?;
        let fmt = if fmt == AddrFormat::UNSPEC {
            self.info.addr_format
        } else {
            fmt
        };
        super::cm::raw_addr(fmt, &a)
    }

    /// A reference to the private domain it listens on (`None` once closed), taken
    /// under the lock its close takes, so the domain stays open while referenced.
    pub(crate) fn retain_domain(&self) -> Option<DomainRef> {
        let g = self.core.at();
        // SAFETY: open while `at` holds it (see `PepCore`).
        g.as_ref().map(|a| unsafe { DomainRef::retain(a.domain) })
    }

    /// Whether `h` is its listener in `d`.
    pub(crate) fn is(&self, d: *const DomainFid, h: PepHandle<Heap>) -> bool {
        self.core
            .at()
            .as_ref()
            .is_some_and(|a| std::ptr::eq(a.domain, d) && a.handle == h)
    }

    /// The FI_CONNREQ info of request `req` from `from`: the passive endpoint's info
    /// with `src_addr` its address (fi_domain there shares the listener's domain, so
    /// the accepting endpoint answers from the listener's port), `dest_addr` the
    /// connector and `handle` the request.
    pub(crate) fn connreq_info(
        &self,
        req: ConnReqId,
        from: EpAddr,
    ) -> Result<*mut sys::fi_info, Errno> {
        let local = self.core.with(|d, h| d.with(|c| c.pep_addr(h)))?;
        let mut info = self.info.clone();
        let fmt = info.addr_format;
        // The listener's address: the accepting domain is the listener's (shared).
        let src = EpAddr::new(local.ip, local.port, 0);
        info.src_addr = Some(super::cm::raw_addr(fmt, &src)?);
        info.dest_addr = Some(super::cm::raw_addr(fmt, &from)?);
        let c = crate::info::to_c(
            std::slice::from_ref(&info),
            DomainAbi::of_core(crate::prov::core_api()),
        )?;
        let handle = publish(ConnReqFid {
            fid: ConnReqFid::header(std::ptr::null_mut()),
            pep: self.core.clone(),
            req,
        });
        let old: Vec<(*mut ConnReqFid, ConnReqId)> = {
            let mut handed = self.core.handed.lock().unwrap_or_else(|e| e.into_inner());
            handed.push(handle);
            self.core.handed_total.fetch_add(1, Ordering::Relaxed);
            let n = handed.len().saturating_sub(HANDED_KEEP);
            handed[..n]
                .iter()
                // SAFETY: in the list, so not released (that takes the list's lock).
                .map(|h| (*h, unsafe { (**h).req }))
                .collect()
        };
        self.release_answered(&old);
        // SAFETY: `c` is the node just built; its fabric attributes are ours to fill
        // (fi_freeinfo frees prov_name).
        unsafe {
            (*c).handle = handle.cast::<sys::fid>();
            if !(*c).fabric_attr.is_null() && (*(*c).fabric_attr).prov_name.is_null() {
                (*(*c).fabric_attr).prov_name =
                    crate::util::malloc_str("nostd").unwrap_or_default();
            }
        }
        Ok(c)
    }
}

/// Requests handed out that stay allocated after they were answered (see the module
/// documentation).
pub(crate) const HANDED_KEEP: usize = 64;

impl PepFid {
    /// Releases those of `old` (requests handed out, oldest first) that the listener
    /// no longer holds: answered, so no endpoint can still be opened for them. Runs
    /// without the list's lock while it asks the domain (the close takes the two the
    /// other way round).
    fn release_answered(&self, old: &[(*mut ConnReqFid, ConnReqId)]) {
        let answered: Vec<*mut ConnReqFid> = old
            .iter()
            .filter(|(_, req)| {
                self.core
                    .with(|d, p| d.with(|c| Ok(!c.pep_listener(p)?.is_waiting(*req))))
                    .unwrap_or(false)
            })
            .map(|(h, _)| *h)
            .collect();
        if answered.is_empty() {
            return;
        }
        let mut handed = self.core.handed.lock().unwrap_or_else(|e| e.into_inner());
        for h in answered {
            if let Some(i) = handed.iter().position(|x| *x == h) {
                handed.remove(i);
                // SAFETY: published by `connreq_info` and still in the list, so not
                // released yet; taken out of it under its lock, so released once.
                unsafe { crate::fid::release(&*h) };
            }
        }
    }
}

/// The passive endpoint behind `p`.
///
/// # Safety
///
/// As [`object`].
pub(crate) unsafe fn pep<'a>(p: *const sys::fid_pep) -> Result<&'a PepFid, Errno> {
    // SAFETY: forwarded contract; the fid is the first field.
    unsafe { object::<PepFid>(p.cast()) }
}

/// Opens the private domain of a passive endpoint at `info`'s source address.
fn open_domain(fabric: *const FabricFid, info: &Info) -> Result<*const DomainFid, Errno> {
    let mut info = info.clone();
    // A watchdog thread answers requests while the application sleeps on the EQ.
    info.domain_attr.threading = Threading::Safe;
    let c = crate::info::to_c(
        std::slice::from_ref(&info),
        DomainAbi::of_core(crate::prov::core_api()),
    )?;
    let mut d: *mut sys::fid_domain = std::ptr::null_mut();
    // SAFETY: a valid fabric of ours, a node just built, a writable out pointer.
    let r =
        unsafe { crate::domain::open(fabric.cast_mut().cast(), c, &mut d, std::ptr::null_mut()) };
    // SAFETY: built by `to_c` above.
    unsafe { sys::fi_freeinfo(c) };
    if r != 0 {
        return Err(Errno::from_code(-r).unwrap_or(Errno::EINVAL));
    }
    Ok(d.cast_const().cast())
}

/// Closes a private domain (its listener closed first).
fn close_domain(d: *const DomainFid) -> Result<(), Errno> {
    // SAFETY: a domain `open_domain` published, not used afterwards.
    match unsafe { crate::domain::close(d.cast_mut().cast()) } {
        0 => Ok(()),
        r => Err(Errno::from_code(-r).unwrap_or(Errno::EINVAL)),
    }
}

/// Opens a listener on a new private domain, registered with the fabric at its
/// address (so a domain opened there shares it).
fn listen_at(fabric: *const FabricFid, info: &Info, context: u64) -> Result<PepAt, Errno> {
    let d = open_domain(fabric, info)?;
    // SAFETY: just opened.
    let dom = unsafe { &*d };
    match dom.with(|c| Ok((c.pep_open(context)?, c.local_addr()))) {
        Ok((handle, local)) => {
            // SAFETY: a fabric outlives its passive endpoints.
            let mut reg = unsafe { &*fabric }.listeners();
            reg.push((local.ip, local.port, d as usize));
            Ok(PepAt { domain: d, handle })
        }
        Err(e) => {
            let _ = close_domain(d);
            Err(e)
        }
    }
}

/// `fi_passive_ep`: a passive endpoint for the FI_EP_MSG `info` (as getinfo returned
/// it), listening once bound to an EQ and `fi_listen`ed.
///
/// # Safety
///
/// Called through the application's `fi_passive_ep` with valid or NULL pointers.
pub unsafe extern "C" fn open(
    fabric: *mut sys::fid_fabric,
    info: *mut sys::fi_info,
    pep_out: *mut *mut sys::fid_pep,
    context: *mut c_void,
) -> c_int {
    let make = || {
        // SAFETY: forwarded contract.
        let f = unsafe { FabricFid::from_c(fabric) }?;
        if info.is_null() {
            return Err(Errno::EINVAL);
        }
        // SAFETY: a non-NULL info of the application is a valid fi_info.
        let info = unsafe { crate::info::from_c(info) }.ok_or(Errno::EINVAL)?;
        if info.ep_attr.ep_type != EpType::Msg {
            return Err(Errno::EINVAL);
        }
        let at = listen_at(f, &info, context as u64)?;
        let core = Arc::new(PepCore::default());
        *core.at() = Some(at);
        Ok(PepFid {
            c: sys::fid_pep {
                fid: PepFid::header(context),
                ops: (&raw const PEP_OPS).cast_mut(),
                cm: (&raw const PEP_CM_OPS).cast_mut(),
            },
            fabric: std::ptr::from_ref(f),
            info,
            core,
            eq: AtomicPtr::new(std::ptr::null_mut()),
        })
    };
    // SAFETY: NULL or writable (application's contract).
    unsafe { open_into(pep_out, make) }
}

/// `fi_close(pep)`: requests not answered are dropped (their connectors time out);
/// the requests handed out are released.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    let shut = |p: &PepFid| {
        let eq = p.eq.load(Ordering::Acquire);
        let mut g = p.core.at();
        if let Some(at) = g.take() {
            // SAFETY: open until closed below.
            let d = unsafe { &*at.domain };
            let _ = d.control(|st| {
                st.wakes.remove(hosted::runtime::Wake::Cm(p.fid_addr()));
                st.core.pep_close(at.handle)
            });
            let _ = close_domain(at.domain);
        }
        drop(g);
        if !eq.is_null() {
            // SAFETY: a bound EQ cannot close while bound.
            let q = unsafe { &*eq };
            q.peps.remove(p);
            q.bind_ref(false);
        }
        let handed = std::mem::take(&mut *p.core.handed.lock().unwrap_or_else(|e| e.into_inner()));
        if crate::domain::log_info() {
            eprintln!(
                "libfabric:nostd:pep: closed, {} requests handed out, {} still allocated",
                p.core.handed_total.load(Ordering::Relaxed),
                handed.len()
            );
        }
        for h in handed {
            // SAFETY: published by `connreq_info`, released only here.
            unsafe { crate::fid::release(&*h) };
        }
        Ok(())
    };
    // SAFETY: forwarded contract.
    unsafe { crate::fid::close::<PepFid>(fid, shut) }
}

/// `fi_pep_bind`: an EQ of the same fabric (once); other fids -FI_EINVAL.
unsafe extern "C" fn bind(fid: *mut sys::fid, bfid: *mut sys::fid, _flags: u64) -> c_int {
    // SAFETY: NULL or a fid.
    let p = arg!(unsafe { object::<PepFid>(fid) });
    // SAFETY: NULL or a fid (contract).
    let q = arg!(unsafe { object::<EqFid>(bfid) });
    if !std::ptr::eq(q.fabric_ptr(), p.fabric) {
        return neg(Errno::EINVAL);
    }
    let token = std::ptr::from_ref(q) as u64;
    let r = p.core.with(|d, h| {
        d.control(|st| {
            st.core.pep_bind_eq(h, token)?;
            if let Some(w) = q.waiter_fd() {
                st.add_wake(hosted::runtime::Wake::Cm(p.fid_addr()), w);
            }
            Ok(())
        })
    });
    if r.is_ok() {
        q.bind_ref(true);
        q.peps.add(p);
        p.eq.store(std::ptr::from_ref(q).cast_mut(), Ordering::Release);
    }
    ret(r)
}

/// `fi_control(pep)`: FI_BACKLOG (`int *`) sets the backlog; other commands -FI_ENOSYS.
unsafe extern "C" fn control(fid: *mut sys::fid, cmd: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: NULL or a fid.
    let p = arg!(unsafe { object::<PepFid>(fid) });
    if cmd != sys::FI_BACKLOG as c_int {
        return neg(Errno::ENOSYS);
    }
    if arg.is_null() {
        return neg(Errno::EINVAL);
    }
    // SAFETY: FI_BACKLOG's argument is an `int *` (non-NULL).
    let n = unsafe { arg.cast::<c_int>().read_unaligned() };
    let Ok(n) = usize::try_from(n) else {
        return neg(Errno::EINVAL);
    };
    ret(p.core.with(|d, h| d.with(|c| c.pep_set_backlog(h, n))))
}

/// `fi_getopt(pep)`: FI_OPT_CM_DATA_SIZE at FI_OPT_ENDPOINT (256).
unsafe extern "C" fn getopt(
    fid: *mut sys::fid,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: *mut usize,
) -> c_int {
    // SAFETY: NULL or a fid.
    arg!(unsafe { object::<PepFid>(fid) });
    let r = EpOpt::from_raw(optname).and_then(|opt| {
        if level == sys::FI_OPT_ENDPOINT as c_int && opt == EpOpt::CmDataSize {
            Ok(ofi_nostd::cm::CM_DATA_MAX)
        } else {
            Err(Errno::ENOPROTOOPT)
        }
    });
    // SAFETY: forwarded contract.
    unsafe { super::put_opt(r, optval, optlen) }
}

/// `fi_setopt(pep)`: nothing to set (FI_OPT_CM_DATA_SIZE is fixed): -FI_ENOPROTOOPT.
unsafe extern "C" fn setopt(
    fid: *mut sys::fid,
    _level: c_int,
    _optname: c_int,
    _optval: *const c_void,
    _optlen: usize,
) -> c_int {
    // SAFETY: NULL or a fid.
    arg!(unsafe { object::<PepFid>(fid) });
    neg(Errno::ENOPROTOOPT)
}

/// `fi_getname(pep)`: the listener's address (its domain's port, id 0 for the first
/// passive endpoint of that domain, which every one is).
unsafe extern "C" fn getname(fid: *mut sys::fid, addr: *mut c_void, addrlen: *mut usize) -> c_int {
    // SAFETY: NULL or a fid.
    let p = arg!(unsafe { object::<PepFid>(fid) });
    if addrlen.is_null() {
        return neg(Errno::EINVAL);
    }
    // SAFETY: checked non-NULL.
    if addr.is_null() && unsafe { addrlen.read_unaligned() } > 0 {
        return neg(Errno::EINVAL);
    }
    let a = arg!(p.core.with(|d, h| d.with(|c| c.pep_addr(h))));
    let data = arg!(super::cm::raw_addr(p.info.addr_format, &a));
    // SAFETY: checked above, or the application's buffer of `*addrlen` bytes.
    ret(unsafe { crate::av::give(&data, addr, addrlen) })
}

/// `fi_setname(pep)`: listens at `addr` instead (before fi_listen): the private domain
/// is reopened there. -FI_EINVAL for an address that does not parse, once listening,
/// or with an EQ bound.
unsafe extern "C" fn setname(fid: *mut sys::fid, addr: *mut c_void, len: usize) -> c_int {
    // SAFETY: NULL or a fid.
    let p = arg!(unsafe { object::<PepFid>(fid) });
    // SAFETY: `addr` holds `len` bytes (contract).
    let Some(bytes) = (unsafe { crate::util::bytes(addr, len) }) else {
        return neg(Errno::EINVAL);
    };
    let fmt = p.info.addr_format;
    let a = arg!(super::cm::parse_addr(fmt, bytes));
    if !p.eq.load(Ordering::Acquire).is_null() {
        return neg(Errno::EINVAL);
    }
    let mut g = p.core.at();
    let Some(old) = g.as_ref() else {
        return neg(Errno::EINVAL);
    };
    // SAFETY: open while `g` holds it.
    let listening = unsafe { &*old.domain }
        .with(|c| Ok(c.pep_listener(old.handle)?.is_listening()))
        .unwrap_or(true);
    if listening {
        return neg(Errno::EINVAL);
    }
    let mut info = p.info.clone();
    info.src_addr = Some(arg!(super::cm::raw_addr(fmt, &a)));
    let new = arg!(listen_at(p.fabric, &info, p.context_addr()));
    if let Some(old) = g.replace(new) {
        // SAFETY: open until closed here.
        let _ = unsafe { &*old.domain }.with(|c| c.pep_close(old.handle));
        let _ = close_domain(old.domain);
    }
    0
}

/// `fi_listen`: -FI_ENOEQ without a bound EQ, -FI_EOPBADSTATE when listening.
unsafe extern "C" fn listen(p: *mut sys::fid_pep) -> c_int {
    // SAFETY: forwarded contract.
    let p = arg!(unsafe { pep(p) });
    ret(p.core.with(|d, h| d.with(|c| c.pep_listen(h))))
}

/// `fi_reject` of request `handle` with `param` (at most FI_OPT_CM_DATA_SIZE bytes,
/// -FI_EINVAL beyond): the connector gets FI_ECONNREFUSED with the data.
unsafe extern "C" fn reject(
    p: *mut sys::fid_pep,
    handle: sys::fid_t,
    param: *const c_void,
    len: usize,
) -> c_int {
    // SAFETY: forwarded contract.
    let p = arg!(unsafe { pep(p) });
    // SAFETY: NULL or a fid (contract).
    let r = arg!(unsafe { connreq(handle) });
    if !Arc::ptr_eq(&r.pep, &p.core) || len > ofi_nostd::cm::CM_DATA_MAX {
        return neg(Errno::EINVAL);
    }
    // SAFETY: `param` holds `len` bytes (contract).
    let Some(data) = (unsafe { crate::util::bytes(param, len) }) else {
        return neg(Errno::EINVAL);
    };
    ret(p.core.with(|d, h| {
        d.control(|st| {
            st.core.pep_reject(h, r.req, data)?;
            st.progress();
            Ok(())
        })
    }))
}
