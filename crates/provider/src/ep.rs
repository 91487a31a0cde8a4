//! `struct fid_ep`: active endpoints (fi_endpoint(3)), FI_EP_RDM and FI_EP_DGRAM, with
//! their message (fi_msg(3)) and tagged (fi_tagged(3)) operations.
//!
//! Every operation goes to the core domain ([`ofi_nostd::domain::Domain`]), which checks
//! state, bindings, sizes and flags; this module turns C arguments into core arguments
//! (`void *` contexts and buffers become `u64` addresses, copies go through
//! [`hosted::mem::RawMemory`] under libfabric's buffer contract) and runs progress
//! (FI_PROGRESS_MANUAL): after every send post, so data leaves at once, and after a
//! post refused with -FI_EAGAIN, so a retry can succeed. CQ and counter reads run it
//! too.
//!
//! Aliases (`fi_ep_alias`) are fids of their own that name the same core endpoint and
//! carry their own default operation flags; a post through an alias runs with those
//! flags swapped in. RMA, atomics and collectives have tables whose every entry is
//! -FI_ENOSYS.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicPtr, AtomicU64, Ordering};

use hosted::mem::RawMemory;
use hosted::storage::Heap;
use ofi_nostd::Errno;
use ofi_nostd::atomic::AtomicKind;
use ofi_nostd::domain::{
    AtomicArgs, BindTarget, Domain, EpHandle, MsgArgs, RmaArgs, RmaIov, TaggedArgs,
};
use ofi_nostd::ep::{EpOpt, IOV_LIMIT, RX_OP_FLAGS, tx_defaults_ok};
use ofi_nostd::flags::Flags;
use ofi_nostd::info::AddrFormat;
use ofi_nostd::mem::IoVec;
use wire::packet::{AtomicDatatype, AtomicOp};

use crate::av::AvFid;
use crate::cntr::CntrFid;
use crate::cq::CqFid;
use crate::domain::DomainFid;
use crate::eq::EqFid;
use crate::fid::{FidObject, no_ops_open, no_ops_set, no_tostr, object, publish, release};
use crate::sys;
use crate::util::{neg, put, ret, ret_len};

/// An open endpoint, or an alias of one.
#[repr(C)]
pub struct EpFid {
    c: sys::fid_ep,
    domain: *const DomainFid,
    handle: EpHandle<Heap>,
    /// The endpoint this fid is an alias of; NULL for the endpoint itself.
    parent: *const EpFid,
    /// An alias's default transmit flags.
    alias_tx: AtomicU64,
    /// An alias's default receive flags.
    alias_rx: AtomicU64,
    /// The bound event queue (released on close).
    eq: AtomicPtr<EqFid>,
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

static EP_OPS: sys::fi_ops_ep = sys::fi_ops_ep {
    size: size_of::<sys::fi_ops_ep>(),
    cancel: Some(cancel),
    getopt: Some(getopt),
    setopt: Some(setopt),
    tx_ctx: Some(tx_ctx),
    rx_ctx: Some(rx_ctx),
    rx_size_left: Some(rx_size_left),
    tx_size_left: Some(tx_size_left),
};

static CM_OPS: sys::fi_ops_cm = sys::fi_ops_cm {
    size: size_of::<sys::fi_ops_cm>(),
    setname: Some(setname),
    getname: Some(getname),
    getpeer: Some(getpeer),
    connect: Some(connect),
    listen: Some(listen),
    accept: Some(accept),
    reject: Some(reject),
    shutdown: Some(shutdown),
    join: Some(join),
};

static MSG_OPS: sys::fi_ops_msg = sys::fi_ops_msg {
    size: size_of::<sys::fi_ops_msg>(),
    recv: Some(recv),
    recvv: Some(recvv),
    recvmsg: Some(recvmsg),
    send: Some(send),
    sendv: Some(sendv),
    sendmsg: Some(sendmsg),
    inject: Some(inject),
    senddata: Some(senddata),
    injectdata: Some(injectdata),
};

static TAGGED_OPS: sys::fi_ops_tagged = sys::fi_ops_tagged {
    size: size_of::<sys::fi_ops_tagged>(),
    recv: Some(trecv),
    recvv: Some(trecvv),
    recvmsg: Some(trecvmsg),
    send: Some(tsend),
    sendv: Some(tsendv),
    sendmsg: Some(tsendmsg),
    inject: Some(tinject),
    senddata: Some(tsenddata),
    injectdata: Some(tinjectdata),
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
                cm: (&raw const CM_OPS).cast_mut(),
                msg: (&raw const MSG_OPS).cast_mut(),
                rma: (&raw const RMA_OPS).cast_mut(),
                tagged: (&raw const TAGGED_OPS).cast_mut(),
                atomic: (&raw const ATOMIC_OPS).cast_mut(),
                collective: (&raw const crate::stubs::COLLECTIVE_OPS).cast_mut(),
            },
            domain: std::ptr::from_ref(domain),
            handle,
            parent,
            alias_tx: AtomicU64::new(flags.0.bits()),
            alias_rx: AtomicU64::new(flags.1.bits()),
            eq: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    fn domain(&self) -> &DomainFid {
        // SAFETY: a domain outlives its endpoints (its fi_close is refused while one is
        // open).
        unsafe { &*self.domain }
    }

    fn is_alias(&self) -> bool {
        !self.parent.is_null()
    }

    /// Runs `f` on the core endpoint's operations for a data-path call, with an
    /// alias's default flags in force; then the pass `kick` asks for (a full pass when
    /// the core refused with -FI_EAGAIN, so the retry can succeed).
    fn op<R>(
        &self,
        kick: After,
        f: impl FnOnce(&mut Domain<Heap>, EpHandle<Heap>) -> Result<R, Errno>,
    ) -> Result<R, Errno> {
        self.domain().data(|st| {
            let h = self.handle;
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
            if kick == After::Progress || matches!(r, Err(Errno::EAGAIN)) {
                st.progress();
            } else if kick == After::Transmit {
                st.progress_tx();
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
unsafe fn ep<'a>(p: *const sys::fid_ep) -> Result<&'a EpFid, Errno> {
    // SAFETY: forwarded contract; the fid is the first field.
    unsafe { object::<EpFid>(p.cast()) }
}

/// A C pointer as the core's address (its provenance exposed for [`RawMemory`]).
fn addr<T>(p: *const T) -> u64 {
    p.expose_provenance() as u64
}

/// A C context as the core's `u64`.
fn ctx(p: *mut c_void) -> u64 {
    p as usize as u64
}

/// The memory posts copy through.
fn mem() -> RawMemory {
    // SAFETY: libfabric's buffer contract: the core reads a send buffer (at once for
    // inject, later for other sends) and writes a receive buffer only while its
    // operation is outstanding, and the application keeps every posted buffer valid
    // and untouched until then (fi_msg(3), fi_tagged(3)).
    unsafe { RawMemory::new() }
}

/// One buffer; -FI_EINVAL for NULL with a length.
fn one(buf: *const c_void, len: usize) -> Result<IoVec, Errno> {
    if buf.is_null() && len > 0 {
        return Err(Errno::EINVAL);
    }
    Ok(IoVec::new(addr(buf), len))
}

/// Up to [`IOV_LIMIT`] buffers and their descriptors from C arrays.
struct Iovs {
    iov: [IoVec; IOV_LIMIT],
    desc: [u64; IOV_LIMIT],
    n: usize,
}

impl Iovs {
    /// # Safety
    ///
    /// `iov` is NULL or holds `count` `struct iovec`s; `desc` is NULL or holds `count`
    /// pointers.
    unsafe fn new(
        iov: *const sys::iovec,
        desc: *const *mut c_void,
        count: usize,
    ) -> Result<Iovs, Errno> {
        if count > IOV_LIMIT || (count > 0 && iov.is_null()) {
            return Err(Errno::EINVAL);
        }
        let mut out = Iovs {
            iov: [IoVec::default(); IOV_LIMIT],
            desc: [0; IOV_LIMIT],
            n: count,
        };
        for i in 0..count {
            // SAFETY: `count` entries (contract).
            let v = unsafe { iov.add(i).read_unaligned() };
            out.iov[i] = one(v.iov_base, v.iov_len)?;
            if !desc.is_null() {
                // SAFETY: as above.
                out.desc[i] = addr(unsafe { desc.add(i).read_unaligned() });
            }
        }
        Ok(out)
    }

    fn iov(&self) -> &[IoVec] {
        &self.iov[..self.n]
    }

    fn desc(&self) -> &[u64] {
        &self.desc[..self.n]
    }
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
    let d = match unsafe { DomainFid::from_c(domain) } {
        Ok(d) => d,
        Err(e) => return neg(e),
    };
    if info.is_null() || ep_out.is_null() {
        return neg(Errno::EINVAL);
    }
    // SAFETY: a non-NULL info of the application is a valid fi_info.
    let Some(info) = (unsafe { crate::info::from_c(info) }) else {
        return neg(Errno::EINVAL);
    };
    let h = match d.with(|core| core.ep_open(&info, ctx(context))) {
        Ok(h) => h,
        Err(e) => return neg(e),
    };
    let obj = publish(EpFid::new(
        d,
        h,
        std::ptr::null(),
        (Flags::empty(), Flags::empty()),
        context,
    ));
    // SAFETY: checked non-NULL above.
    ret(unsafe { put(ep_out, obj.cast::<sys::fid_ep>()) })
}

/// `fi_close(ep)`: outstanding operations are discarded; -FI_EBUSY while aliases are
/// open. Closing an alias releases only the alias.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    // SAFETY: NULL or a fid (fi_close's contract).
    let e = match unsafe { object::<EpFid>(fid) } {
        Ok(e) => e,
        Err(err) => return neg(err),
    };
    let r = e.domain().control(|st| {
        if e.is_alias() {
            st.core.ep_mut(e.handle)?.alias_close()
        } else {
            // Acknowledge what arrived, send every peer a CLOSE, and linger for
            // retransmissions until each acknowledged it (a lost last ACK would fail
            // the peer's send).
            if let Ok(Some(until)) = st.core.ep_begin_close(e.handle, hosted::api::now()) {
                hosted::api::progress_until(until, || {
                    st.progress();
                    st.core.ep_lingering(e.handle)
                });
            }
            st.core.ep_close(e.handle)
        }
    });
    if let Err(err) = r {
        return neg(err);
    }
    let eq = e.eq.load(Ordering::Acquire);
    if !eq.is_null() {
        // SAFETY: a bound EQ cannot close while bound (its fi_close is refused).
        unsafe { &*eq }.bind_ref(false);
    }
    // SAFETY: published by `open` or FI_ALIAS, closed in the core, given up by the
    // application.
    unsafe { release(e) };
    0
}

/// `fi_ep_bind`: a CQ (FI_TRANSMIT / FI_RECV / FI_SELECTIVE_COMPLETION), a counter
/// (FI_SEND, FI_RECV, ...), the AV or an EQ, all before fi_enable, per the core's
/// rules. Objects of another domain are -FI_EDOMAIN; memory regions (FI_MR_ENDPOINT is
/// not offered) and other fids are -FI_EINVAL; shared contexts -FI_ENOSYS.
unsafe extern "C" fn bind(fid: *mut sys::fid, bfid: *mut sys::fid, flags: u64) -> c_int {
    // SAFETY: NULL or a fid.
    let e = match unsafe { object::<EpFid>(fid) } {
        Ok(e) => e,
        Err(err) => return neg(err),
    };
    if e.is_alias() || bfid.is_null() {
        return neg(Errno::EINVAL);
    }
    let flags = Flags::from_bits_retain(flags);
    // SAFETY: non-NULL, a fid of some object (application's contract).
    let class = unsafe { bfid.read_unaligned() }.fclass as u32;
    let same = |p: *const DomainFid| {
        if std::ptr::eq(p, e.domain) {
            Ok(())
        } else {
            Err(Errno::EDOMAIN)
        }
    };
    let r = (|| -> Result<(), Errno> {
        match class {
            sys::FI_CLASS_CQ => {
                // SAFETY: a fid (contract).
                let c = unsafe { object::<CqFid>(bfid) }?;
                same(c.domain_ptr())?;
                e.domain()
                    .with(|d| d.ep_bind(e.handle, BindTarget::Cq(c.handle()), flags))
            }
            sys::FI_CLASS_CNTR => {
                // SAFETY: a fid (contract).
                let c = unsafe { object::<CntrFid>(bfid) }?;
                same(c.domain_ptr())?;
                e.domain()
                    .with(|d| d.ep_bind(e.handle, BindTarget::Cntr(c.handle()), flags))
            }
            sys::FI_CLASS_AV => {
                // SAFETY: a fid (contract).
                let a = unsafe { object::<AvFid>(bfid) }?;
                same(a.domain_ptr())?;
                e.domain()
                    .with(|d| d.ep_bind(e.handle, BindTarget::Av(a.handle()), flags))
            }
            sys::FI_CLASS_EQ => {
                // SAFETY: a fid (contract).
                let q = unsafe { object::<EqFid>(bfid) }?;
                if !std::ptr::eq(q.fabric_ptr(), e.domain().fabric_ptr()) {
                    return Err(Errno::EDOMAIN);
                }
                let token = addr(std::ptr::from_ref(q));
                e.domain()
                    .with(|d| d.ep_bind(e.handle, BindTarget::Eq(token), flags))?;
                q.bind_ref(true);
                e.eq.store(std::ptr::from_ref(q).cast_mut(), Ordering::Release);
                Ok(())
            }
            sys::FI_CLASS_STX_CTX | sys::FI_CLASS_SRX_CTX => Err(Errno::ENOSYS),
            _ => Err(Errno::EINVAL),
        }
    })();
    ret(r)
}

/// `fi_control` of an endpoint: FI_ENABLE, FI_GETOPSFLAG, FI_SETOPSFLAG, FI_ALIAS.
/// FI_GETWAIT and other commands are -FI_ENOSYS (endpoints have no wait object).
unsafe extern "C" fn control(fid: *mut sys::fid, cmd: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: NULL or a fid.
    let e = match unsafe { object::<EpFid>(fid) } {
        Ok(e) => e,
        Err(err) => return neg(err),
    };
    let Ok(cmd) = u32::try_from(cmd) else {
        return neg(Errno::ENOSYS);
    };
    let r = match cmd {
        sys::FI_ENABLE => {
            if e.is_alias() {
                Err(Errno::EINVAL)
            } else {
                e.domain().with(|d| d.ep_enable(e.handle))
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
                e.domain()
                    .with(|d| Ok(d.ep(e.handle)?.getopsflag(f)?.bits()))
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
                let tx_ok = e
                    .domain()
                    .with(|d| Ok(tx_defaults_ok(d.ep(e.handle)?.ep_type(), ops)));
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
                e.domain().with(|d| d.ep_mut(e.handle)?.setopsflag(f))
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
            match e.domain().with(|d| d.ep_mut(e.handle)?.alias(flags)) {
                Ok(defaults) => {
                    let obj = publish(EpFid::new(
                        e.domain(),
                        e.handle,
                        std::ptr::from_ref(e),
                        defaults,
                        e.c.fid.context,
                    ));
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
    let e = match unsafe { object::<EpFid>(fid) } {
        Ok(e) => e,
        Err(err) => return ret_len(Err(err)),
    };
    ret_len(
        e.domain()
            .data(|st| {
                let r = st.core.ep_cancel(e.handle, ctx(context));
                st.wake();
                r
            })
            .map(|()| 0),
    )
}

/// `fi_getopt` at FI_OPT_ENDPOINT (size_t options); -FI_ETOOSMALL for a short buffer.
unsafe extern "C" fn getopt(
    fid: *mut sys::fid,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: *mut usize,
) -> c_int {
    // SAFETY: NULL or a fid.
    let e = match unsafe { object::<EpFid>(fid) } {
        Ok(e) => e,
        Err(err) => return neg(err),
    };
    if optval.is_null() || optlen.is_null() {
        return neg(Errno::EINVAL);
    }
    let r = EpOpt::from_raw(optname)
        .and_then(|opt| e.domain().with(|d| d.ep(e.handle)?.getopt(level, opt)));
    let v = match r {
        Ok(v) => v,
        Err(err) => return neg(err),
    };
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

/// `fi_setopt` at FI_OPT_ENDPOINT (size_t options).
unsafe extern "C" fn setopt(
    fid: *mut sys::fid,
    level: c_int,
    optname: c_int,
    optval: *const c_void,
    optlen: usize,
) -> c_int {
    // SAFETY: NULL or a fid.
    let e = match unsafe { object::<EpFid>(fid) } {
        Ok(e) => e,
        Err(err) => return neg(err),
    };
    if optval.is_null() || optlen < size_of::<usize>() {
        return neg(Errno::EINVAL);
    }
    // SAFETY: checked non-NULL and long enough.
    let v = unsafe { optval.cast::<usize>().read_unaligned() };
    ret(EpOpt::from_raw(optname).and_then(|opt| {
        e.domain()
            .with(|d| d.ep_mut(e.handle)?.setopt(level, opt, v))
    }))
}

/// `fi_tx_context`: scalable endpoints are not offered.
unsafe extern "C" fn tx_ctx(
    _sep: *mut sys::fid_ep,
    _index: c_int,
    _attr: *mut sys::fi_tx_attr,
    _tx: *mut *mut sys::fid_ep,
    _context: *mut c_void,
) -> c_int {
    neg(Errno::ENOSYS)
}

/// `fi_rx_context`: scalable endpoints are not offered.
unsafe extern "C" fn rx_ctx(
    _sep: *mut sys::fid_ep,
    _index: c_int,
    _attr: *mut sys::fi_rx_attr,
    _rx: *mut *mut sys::fid_ep,
    _context: *mut c_void,
) -> c_int {
    neg(Errno::ENOSYS)
}

/// `fi_rx_size_left`.
unsafe extern "C" fn rx_size_left(p: *mut sys::fid_ep) -> isize {
    // SAFETY: forwarded contract.
    let e = match unsafe { ep(p) } {
        Ok(e) => e,
        Err(err) => return ret_len(Err(err)),
    };
    ret_len(
        e.domain()
            .data(|st| Ok(st.core.ep(e.handle)?.rx_size_left())),
    )
}

/// `fi_tx_size_left`.
unsafe extern "C" fn tx_size_left(p: *mut sys::fid_ep) -> isize {
    // SAFETY: forwarded contract.
    let e = match unsafe { ep(p) } {
        Ok(e) => e,
        Err(err) => return ret_len(Err(err)),
    };
    ret_len(
        e.domain()
            .data(|st| Ok(st.core.ep(e.handle)?.tx_size_left())),
    )
}

// ---- connection management (fi_cm(3)) ----------------------------------------------

/// `fi_getname`: the endpoint's address in the domain's format (a 16-byte
/// `sockaddr_in` whose `sin_zero` carries the endpoint id, or the FI_ADDR_STR text);
/// -FI_ETOOSMALL with the size needed in `*addrlen` when the buffer is short.
unsafe extern "C" fn getname(
    fid: *mut sys::fid,
    addr_p: *mut c_void,
    addrlen: *mut usize,
) -> c_int {
    // SAFETY: NULL or a fid.
    let e = match unsafe { object::<EpFid>(fid) } {
        Ok(e) => e,
        Err(err) => return neg(err),
    };
    if addrlen.is_null() {
        return neg(Errno::EINVAL);
    }
    // SAFETY: checked non-NULL.
    if addr_p.is_null() && unsafe { addrlen.read_unaligned() } > 0 {
        return neg(Errno::EINVAL);
    }
    let a = match e.domain().with(|d| d.ep_addr(e.handle)) {
        Ok(a) => a,
        Err(err) => return neg(err),
    };
    let mut s = [0u8; 128];
    let data: &[u8] = if e.domain().addr_format == AddrFormat::STR {
        let n = a.straddr(&mut s).min(s.len());
        &s[..n]
    } else {
        &a.to_sockaddr_in()
    };
    // SAFETY: checked above, or the application's buffer of `*addrlen` bytes.
    ret(unsafe { crate::av::give(data, addr_p, addrlen) })
}

/// `fi_setname`: an endpoint's address is its domain's port and its id: -FI_ENOSYS.
unsafe extern "C" fn setname(fid: *mut sys::fid, _addr: *mut c_void, _len: usize) -> c_int {
    // SAFETY: NULL or a fid.
    match unsafe { object::<EpFid>(fid) } {
        Ok(_) => neg(Errno::ENOSYS),
        Err(e) => neg(e),
    }
}

/// `fi_getpeer`: connectionless endpoints have no peer: -FI_ENOSYS.
unsafe extern "C" fn getpeer(p: *mut sys::fid_ep, _addr: *mut c_void, _len: *mut usize) -> c_int {
    // SAFETY: forwarded contract.
    match unsafe { ep(p) } {
        Ok(_) => neg(Errno::ENOSYS),
        Err(e) => neg(e),
    }
}

/// `fi_connect`: -FI_ENOSYS (no FI_EP_MSG).
unsafe extern "C" fn connect(
    _ep: *mut sys::fid_ep,
    _addr: *const c_void,
    _param: *const c_void,
    _len: usize,
) -> c_int {
    neg(Errno::ENOSYS)
}

/// `fi_listen`: -FI_ENOSYS.
unsafe extern "C" fn listen(_pep: *mut sys::fid_pep) -> c_int {
    neg(Errno::ENOSYS)
}

/// `fi_accept`: -FI_ENOSYS.
unsafe extern "C" fn accept(_ep: *mut sys::fid_ep, _param: *const c_void, _len: usize) -> c_int {
    neg(Errno::ENOSYS)
}

/// `fi_reject`: -FI_ENOSYS.
unsafe extern "C" fn reject(
    _pep: *mut sys::fid_pep,
    _handle: sys::fid_t,
    _param: *const c_void,
    _len: usize,
) -> c_int {
    neg(Errno::ENOSYS)
}

/// `fi_shutdown`: -FI_ENOSYS.
unsafe extern "C" fn shutdown(_ep: *mut sys::fid_ep, _flags: u64) -> c_int {
    neg(Errno::ENOSYS)
}

/// `fi_join`: -FI_ENOSYS (no multicast).
unsafe extern "C" fn join(
    _ep: *mut sys::fid_ep,
    _addr: *const c_void,
    _flags: u64,
    _mc: *mut *mut sys::fid_mc,
    _context: *mut c_void,
) -> c_int {
    neg(Errno::ENOSYS)
}

// ---- messages (fi_msg(3)) -----------------------------------------------------------

/// The pass a data-path call runs once the core has taken it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum After {
    /// None (a receive: nothing to send).
    Nothing,
    /// The transmit half of a pass, so a send's packet leaves at once.
    Transmit,
    /// A full pass.
    Progress,
}

impl After {
    /// After a send posted with `flags`: FI_MORE says more posts follow at once, so
    /// the transmit pass waits for the last of them (or the next progress call) and
    /// the batch leaves together (fi_msg(3)).
    fn sent(flags: u64) -> After {
        if Flags::from_bits_retain(flags).contains(Flags::MORE) {
            After::Nothing
        } else {
            After::Transmit
        }
    }
}

/// Runs a post on endpoint `p` and returns its `ssize_t`.
///
/// # Safety
///
/// `p` is NULL or a fid.
unsafe fn post(
    p: *mut sys::fid_ep,
    kick: After,
    f: impl FnOnce(&mut Domain<Heap>, EpHandle<Heap>) -> Result<(), Errno>,
) -> isize {
    // SAFETY: forwarded contract.
    match unsafe { ep(p) } {
        Ok(e) => ret_len(e.op(kick, f).map(|()| 0)),
        Err(err) => ret_len(Err(err)),
    }
}

unsafe extern "C" fn recv(
    p: *mut sys::fid_ep,
    buf: *mut c_void,
    len: usize,
    _desc: *mut c_void,
    src: sys::fi_addr_t,
    context: *mut c_void,
) -> isize {
    let b = match one(buf, len) {
        Ok(b) => b,
        Err(e) => return ret_len(Err(e)),
    };
    // SAFETY: the application's endpoint.
    unsafe { post(p, After::Nothing, |d, h| d.recv(h, b, src, ctx(context))) }
}

unsafe extern "C" fn recvv(
    p: *mut sys::fid_ep,
    iov: *const sys::iovec,
    desc: *mut *mut c_void,
    count: usize,
    src: sys::fi_addr_t,
    context: *mut c_void,
) -> isize {
    // SAFETY: the application's arrays of `count` entries.
    let v = match unsafe { Iovs::new(iov, desc, count) } {
        Ok(v) => v,
        Err(e) => return ret_len(Err(e)),
    };
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Nothing, |d, h| {
            d.recvv(h, v.iov(), src, ctx(context))
        })
    }
}

/// # Safety
///
/// `msg` is NULL or a valid `struct fi_msg`.
unsafe fn msg_args(msg: *const sys::fi_msg) -> Result<(sys::fi_msg, Iovs), Errno> {
    if msg.is_null() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: non-NULL (contract).
    let m = unsafe { msg.read_unaligned() };
    // SAFETY: its arrays hold `iov_count` entries (contract).
    let v = unsafe { Iovs::new(m.msg_iov, m.desc, m.iov_count) }?;
    Ok((m, v))
}

unsafe extern "C" fn recvmsg(p: *mut sys::fid_ep, msg: *const sys::fi_msg, flags: u64) -> isize {
    // SAFETY: the application's message.
    let (m, v) = match unsafe { msg_args(msg) } {
        Ok(x) => x,
        Err(e) => return ret_len(Err(e)),
    };
    let args = MsgArgs {
        iov: v.iov(),
        desc: v.desc(),
        addr: m.addr,
        context: ctx(m.context),
        data: m.data,
    };
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Nothing, |d, h| {
            d.recvmsg(h, &args, Flags::from_bits_retain(flags))
        })
    }
}

unsafe extern "C" fn send(
    p: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    dest: sys::fi_addr_t,
    context: *mut c_void,
) -> isize {
    let b = match one(buf, len) {
        Ok(b) => b,
        Err(e) => return ret_len(Err(e)),
    };
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Transmit, |d, h| {
            d.send(h, &mem(), b, dest, ctx(context))
        })
    }
}

unsafe extern "C" fn sendv(
    p: *mut sys::fid_ep,
    iov: *const sys::iovec,
    desc: *mut *mut c_void,
    count: usize,
    dest: sys::fi_addr_t,
    context: *mut c_void,
) -> isize {
    // SAFETY: the application's arrays of `count` entries.
    let v = match unsafe { Iovs::new(iov, desc, count) } {
        Ok(v) => v,
        Err(e) => return ret_len(Err(e)),
    };
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Transmit, |d, h| {
            d.sendv(h, &mem(), v.iov(), dest, ctx(context))
        })
    }
}

unsafe extern "C" fn sendmsg(p: *mut sys::fid_ep, msg: *const sys::fi_msg, flags: u64) -> isize {
    // SAFETY: the application's message.
    let (m, v) = match unsafe { msg_args(msg) } {
        Ok(x) => x,
        Err(e) => return ret_len(Err(e)),
    };
    let args = MsgArgs {
        iov: v.iov(),
        desc: v.desc(),
        addr: m.addr,
        context: ctx(m.context),
        data: m.data,
    };
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::sent(flags), |d, h| {
            d.sendmsg(h, &mem(), &args, Flags::from_bits_retain(flags))
        })
    }
}

unsafe extern "C" fn inject(
    p: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    dest: sys::fi_addr_t,
) -> isize {
    let b = match one(buf, len) {
        Ok(b) => b,
        Err(e) => return ret_len(Err(e)),
    };
    // SAFETY: the application's endpoint.
    unsafe { post(p, After::Transmit, |d, h| d.inject(h, &mem(), b, dest)) }
}

unsafe extern "C" fn senddata(
    p: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    data: u64,
    dest: sys::fi_addr_t,
    context: *mut c_void,
) -> isize {
    let b = match one(buf, len) {
        Ok(b) => b,
        Err(e) => return ret_len(Err(e)),
    };
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Transmit, |d, h| {
            d.senddata(h, &mem(), b, data, dest, ctx(context))
        })
    }
}

unsafe extern "C" fn injectdata(
    p: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: sys::fi_addr_t,
) -> isize {
    let b = match one(buf, len) {
        Ok(b) => b,
        Err(e) => return ret_len(Err(e)),
    };
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Transmit, |d, h| {
            d.injectdata(h, &mem(), b, data, dest)
        })
    }
}

// ---- tagged messages (fi_tagged(3)) ---------------------------------------------------

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn trecv(
    p: *mut sys::fid_ep,
    buf: *mut c_void,
    len: usize,
    _desc: *mut c_void,
    src: sys::fi_addr_t,
    tag: u64,
    ignore: u64,
    context: *mut c_void,
) -> isize {
    let b = match one(buf, len) {
        Ok(b) => b,
        Err(e) => return ret_len(Err(e)),
    };
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Nothing, |d, h| {
            d.trecv(h, b, src, tag, ignore, ctx(context))
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn trecvv(
    p: *mut sys::fid_ep,
    iov: *const sys::iovec,
    desc: *mut *mut c_void,
    count: usize,
    src: sys::fi_addr_t,
    tag: u64,
    ignore: u64,
    context: *mut c_void,
) -> isize {
    // SAFETY: the application's arrays of `count` entries.
    let v = match unsafe { Iovs::new(iov, desc, count) } {
        Ok(v) => v,
        Err(e) => return ret_len(Err(e)),
    };
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Nothing, |d, h| {
            d.trecvv(h, v.iov(), src, tag, ignore, ctx(context))
        })
    }
}

/// # Safety
///
/// `msg` is NULL or a valid `struct fi_msg_tagged`.
unsafe fn tmsg_args(msg: *const sys::fi_msg_tagged) -> Result<(sys::fi_msg_tagged, Iovs), Errno> {
    if msg.is_null() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: non-NULL (contract).
    let m = unsafe { msg.read_unaligned() };
    // SAFETY: its arrays hold `iov_count` entries (contract).
    let v = unsafe { Iovs::new(m.msg_iov, m.desc, m.iov_count) }?;
    Ok((m, v))
}

/// `fi_trecvmsg`, with FI_PEEK / FI_CLAIM / FI_DISCARD (the claimed message is named by
/// the context pointer, the application's `struct fi_context`).
unsafe extern "C" fn trecvmsg(
    p: *mut sys::fid_ep,
    msg: *const sys::fi_msg_tagged,
    flags: u64,
) -> isize {
    // SAFETY: the application's message.
    let (m, v) = match unsafe { tmsg_args(msg) } {
        Ok(x) => x,
        Err(e) => return ret_len(Err(e)),
    };
    let args = TaggedArgs {
        iov: v.iov(),
        desc: v.desc(),
        addr: m.addr,
        tag: m.tag,
        ignore: m.ignore,
        context: ctx(m.context),
        data: m.data,
    };
    let flags = Flags::from_bits_retain(flags);
    // A peek answers through the CQ: run progress so the answer is there to read.
    let kick = if flags.contains(Flags::PEEK) {
        After::Progress
    } else {
        After::Nothing
    };
    // SAFETY: the application's endpoint.
    unsafe { post(p, kick, |d, h| d.trecvmsg(h, &args, flags)) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tsend(
    p: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    dest: sys::fi_addr_t,
    tag: u64,
    context: *mut c_void,
) -> isize {
    let b = match one(buf, len) {
        Ok(b) => b,
        Err(e) => return ret_len(Err(e)),
    };
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Transmit, |d, h| {
            d.tsend(h, &mem(), b, dest, tag, ctx(context))
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tsendv(
    p: *mut sys::fid_ep,
    iov: *const sys::iovec,
    desc: *mut *mut c_void,
    count: usize,
    dest: sys::fi_addr_t,
    tag: u64,
    context: *mut c_void,
) -> isize {
    // SAFETY: the application's arrays of `count` entries.
    let v = match unsafe { Iovs::new(iov, desc, count) } {
        Ok(v) => v,
        Err(e) => return ret_len(Err(e)),
    };
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Transmit, |d, h| {
            d.tsendv(h, &mem(), v.iov(), dest, tag, ctx(context))
        })
    }
}

unsafe extern "C" fn tsendmsg(
    p: *mut sys::fid_ep,
    msg: *const sys::fi_msg_tagged,
    flags: u64,
) -> isize {
    // SAFETY: the application's message.
    let (m, v) = match unsafe { tmsg_args(msg) } {
        Ok(x) => x,
        Err(e) => return ret_len(Err(e)),
    };
    let args = TaggedArgs {
        iov: v.iov(),
        desc: v.desc(),
        addr: m.addr,
        tag: m.tag,
        ignore: m.ignore,
        context: ctx(m.context),
        data: m.data,
    };
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::sent(flags), |d, h| {
            d.tsendmsg(h, &mem(), &args, Flags::from_bits_retain(flags))
        })
    }
}

unsafe extern "C" fn tinject(
    p: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    dest: sys::fi_addr_t,
    tag: u64,
) -> isize {
    let b = match one(buf, len) {
        Ok(b) => b,
        Err(e) => return ret_len(Err(e)),
    };
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Transmit, |d, h| {
            d.tinject(h, &mem(), b, dest, tag)
        })
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn tsenddata(
    p: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    data: u64,
    dest: sys::fi_addr_t,
    tag: u64,
    context: *mut c_void,
) -> isize {
    let b = match one(buf, len) {
        Ok(b) => b,
        Err(e) => return ret_len(Err(e)),
    };
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Transmit, |d, h| {
            d.tsenddata(h, &mem(), b, data, dest, tag, ctx(context))
        })
    }
}

unsafe extern "C" fn tinjectdata(
    p: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: sys::fi_addr_t,
    tag: u64,
) -> isize {
    let b = match one(buf, len) {
        Ok(b) => b,
        Err(e) => return ret_len(Err(e)),
    };
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Transmit, |d, h| {
            d.tinjectdata(h, &mem(), b, data, dest, tag)
        })
    }
}

// ---- RMA (fi_rma(3)) ------------------------------------------------------------------

/// `fi_ops_rma`: writes and reads of peers' registered memory (one remote iov each).
static RMA_OPS: sys::fi_ops_rma = sys::fi_ops_rma {
    size: size_of::<sys::fi_ops_rma>(),
    read: Some(rma_read),
    readv: Some(rma_readv),
    readmsg: Some(rma_readmsg),
    write: Some(rma_write),
    writev: Some(rma_writev),
    writemsg: Some(rma_writemsg),
    inject: Some(rma_inject),
    writedata: Some(rma_writedata),
    injectdata: Some(rma_injectdata),
};

/// Posts an RMA operation: `read` or a write, with `flags` (the endpoint's default
/// transmit flags for the short calls), remote CQ `data` when `Some`.
///
/// # Safety
///
/// `p` is NULL or a fid.
#[allow(clippy::too_many_arguments)]
unsafe fn rma_post(
    p: *mut sys::fid_ep,
    read: bool,
    iov: &[IoVec],
    desc: &[u64],
    dest: sys::fi_addr_t,
    rma: RmaIov,
    context: u64,
    data: Option<u64>,
    flags: Option<Flags>,
    inject: bool,
) -> isize {
    let kick = flags.map_or(After::Transmit, |f| After::sent(f.bits()));
    let mut args = RmaArgs::new(iov, dest, rma, context);
    args.desc = desc;
    args.data = data.unwrap_or(0);
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, kick, |d, h| {
            let mut f = match flags {
                Some(f) => f,
                None => d.ep_tx_flags(h)?,
            };
            if data.is_some() {
                f |= Flags::REMOTE_CQ_DATA;
            }
            match (read, inject) {
                (true, _) => d.readmsg(h, &mem(), &args, f),
                (false, true) => d.inject_write(h, &mem(), iov[0], dest, rma, data),
                (false, false) => d.writemsg(h, &mem(), &args, f),
            }
        })
    }
}

fn rma_iov(len: usize, addr: u64, key: u64) -> RmaIov {
    RmaIov {
        addr,
        len: len as u64,
        key,
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rma_read(
    p: *mut sys::fid_ep,
    buf: *mut c_void,
    len: usize,
    _desc: *mut c_void,
    src: sys::fi_addr_t,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    let b = match one(buf, len) {
        Ok(b) => b,
        Err(e) => return ret_len(Err(e)),
    };
    let r = rma_iov(len, addr, key);
    // SAFETY: the application's endpoint.
    unsafe { rma_post(p, true, &[b], &[], src, r, ctx(context), None, None, false) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rma_readv(
    p: *mut sys::fid_ep,
    iov: *const sys::iovec,
    desc: *mut *mut c_void,
    count: usize,
    src: sys::fi_addr_t,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    // SAFETY: the application's arrays of `count` entries.
    let v = match unsafe { Iovs::new(iov, desc, count) } {
        Ok(v) => v,
        Err(e) => return ret_len(Err(e)),
    };
    let len = v.iov().iter().map(|x| x.len).sum();
    let r = rma_iov(len, addr, key);
    let c = ctx(context);
    // SAFETY: the application's endpoint.
    unsafe { rma_post(p, true, v.iov(), v.desc(), src, r, c, None, None, false) }
}

/// # Safety
///
/// `msg` is NULL or a valid `struct fi_msg_rma`.
unsafe fn rma_msg(
    p: *mut sys::fid_ep,
    msg: *const sys::fi_msg_rma,
    flags: u64,
    read: bool,
) -> isize {
    if msg.is_null() {
        return ret_len(Err(Errno::EINVAL));
    }
    // SAFETY: non-NULL (contract).
    let m = unsafe { msg.read_unaligned() };
    // One remote iov per operation (the endpoints' `rma_iov_limit`).
    if m.rma_iov_count != 1 || m.rma_iov.is_null() {
        return ret_len(Err(Errno::EINVAL));
    }
    // SAFETY: its arrays hold `iov_count` entries (contract).
    let v = match unsafe { Iovs::new(m.msg_iov, m.desc, m.iov_count) } {
        Ok(v) => v,
        Err(e) => return ret_len(Err(e)),
    };
    // SAFETY: non-NULL, and it holds `rma_iov_count` (1) entries (contract).
    let r = unsafe { m.rma_iov.read_unaligned() };
    let rma = RmaIov {
        addr: r.addr,
        len: r.len as u64,
        key: r.key,
    };
    let f = Flags::from_bits_retain(flags);
    let data = f.contains(Flags::REMOTE_CQ_DATA).then_some(m.data);
    let c = ctx(m.context);
    // SAFETY: the application's endpoint.
    unsafe {
        rma_post(
            p,
            read,
            v.iov(),
            v.desc(),
            m.addr,
            rma,
            c,
            data,
            Some(f),
            false,
        )
    }
}

unsafe extern "C" fn rma_readmsg(
    p: *mut sys::fid_ep,
    msg: *const sys::fi_msg_rma,
    flags: u64,
) -> isize {
    // SAFETY: forwarded contract.
    unsafe { rma_msg(p, msg, flags, true) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rma_write(
    p: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    dest: sys::fi_addr_t,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    let b = match one(buf, len) {
        Ok(b) => b,
        Err(e) => return ret_len(Err(e)),
    };
    let r = rma_iov(len, addr, key);
    // SAFETY: the application's endpoint.
    unsafe {
        rma_post(
            p,
            false,
            &[b],
            &[],
            dest,
            r,
            ctx(context),
            None,
            None,
            false,
        )
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rma_writev(
    p: *mut sys::fid_ep,
    iov: *const sys::iovec,
    desc: *mut *mut c_void,
    count: usize,
    dest: sys::fi_addr_t,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    // SAFETY: the application's arrays of `count` entries.
    let v = match unsafe { Iovs::new(iov, desc, count) } {
        Ok(v) => v,
        Err(e) => return ret_len(Err(e)),
    };
    let len = v.iov().iter().map(|x| x.len).sum();
    let r = rma_iov(len, addr, key);
    let c = ctx(context);
    // SAFETY: the application's endpoint.
    unsafe { rma_post(p, false, v.iov(), v.desc(), dest, r, c, None, None, false) }
}

unsafe extern "C" fn rma_writemsg(
    p: *mut sys::fid_ep,
    msg: *const sys::fi_msg_rma,
    flags: u64,
) -> isize {
    // SAFETY: forwarded contract.
    unsafe { rma_msg(p, msg, flags, false) }
}

unsafe extern "C" fn rma_inject(
    p: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    dest: sys::fi_addr_t,
    addr: u64,
    key: u64,
) -> isize {
    let b = match one(buf, len) {
        Ok(b) => b,
        Err(e) => return ret_len(Err(e)),
    };
    let r = rma_iov(len, addr, key);
    // SAFETY: the application's endpoint.
    unsafe { rma_post(p, false, &[b], &[], dest, r, 0, None, None, true) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rma_writedata(
    p: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    _desc: *mut c_void,
    data: u64,
    dest: sys::fi_addr_t,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    let b = match one(buf, len) {
        Ok(b) => b,
        Err(e) => return ret_len(Err(e)),
    };
    let r = rma_iov(len, addr, key);
    let c = ctx(context);
    // SAFETY: the application's endpoint.
    unsafe { rma_post(p, false, &[b], &[], dest, r, c, Some(data), None, false) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rma_injectdata(
    p: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    data: u64,
    dest: sys::fi_addr_t,
    addr: u64,
    key: u64,
) -> isize {
    let b = match one(buf, len) {
        Ok(b) => b,
        Err(e) => return ret_len(Err(e)),
    };
    let r = rma_iov(len, addr, key);
    // SAFETY: the application's endpoint.
    unsafe { rma_post(p, false, &[b], &[], dest, r, 0, Some(data), None, true) }
}

// ---- atomics (fi_atomic(3)) ------------------------------------------------------------

/// `fi_ops_atomic`: the operations and datatypes `ofi_nostd::atomic` serves, one remote
/// iov and one compare and result buffer each.
static ATOMIC_OPS: sys::fi_ops_atomic = sys::fi_ops_atomic {
    size: size_of::<sys::fi_ops_atomic>(),
    write: Some(at_write),
    writev: Some(at_writev),
    writemsg: Some(at_writemsg),
    inject: Some(at_inject),
    readwrite: Some(at_readwrite),
    readwritev: Some(at_readwritev),
    readwritemsg: Some(at_readwritemsg),
    compwrite: Some(at_compwrite),
    compwritev: Some(at_compwritev),
    compwritemsg: Some(at_compwritemsg),
    writevalid: Some(at_writevalid),
    readwritevalid: Some(at_readwritevalid),
    compwritevalid: Some(at_compwritevalid),
};

type V = *mut c_void;
type CV = *const c_void;

/// libfabric's datatype and operation as the wire's, or -FI_EOPNOTSUPP (FI_INT128,
/// FI_LONG_DOUBLE, ... and unknown values).
fn dt_op(dt: sys::fi_datatype, op: sys::fi_op) -> Result<(AtomicDatatype, AtomicOp), Errno> {
    let d = u8::try_from(dt).ok().and_then(AtomicDatatype::from_u8);
    let o = u8::try_from(op).ok().and_then(AtomicOp::from_u8);
    d.zip(o).ok_or(Errno::EOPNOTSUPP)
}

/// One atomic call: `count` elements at the peer's `addr`/`key`; operands in `buf`
/// (`count` elements), `compare` and `result` for the fetching and compare kinds.
struct AtomicCall {
    kind: AtomicKind,
    buf: CV,
    compare: CV,
    result: V,
    count: usize,
    dest: sys::fi_addr_t,
    addr: u64,
    key: u64,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    context: u64,
    data: Option<u64>,
    flags: Option<Flags>,
}

/// # Safety
///
/// `p` is NULL or a fid.
unsafe fn atomic_post(p: *mut sys::fid_ep, c: AtomicCall) -> isize {
    let (dt, op) = match dt_op(c.dt, c.op) {
        Ok(x) => x,
        Err(e) => return ret_len(Err(e)),
    };
    let n = c.count.saturating_mul(dt.size());
    let operands = if op == AtomicOp::Read { 0 } else { n };
    let parts = (
        one(c.buf, operands),
        one(c.compare, if c.kind == AtomicKind::Compare { n } else { 0 }),
        one(c.result, if c.kind == AtomicKind::Write { 0 } else { n }),
    );
    let (b, cmp, res) = match parts {
        (Ok(b), Ok(cmp), Ok(res)) => (b, cmp, res),
        _ => return ret_len(Err(Errno::EINVAL)),
    };
    let kick = c.flags.map_or(After::Transmit, |f| After::sent(f.bits()));
    let iov = [b];
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, kick, |d, h| {
            let mut f = match c.flags {
                Some(f) => f,
                None => d.ep_tx_flags(h)?,
            };
            if c.data.is_some() {
                f |= Flags::REMOTE_CQ_DATA;
            }
            let args = AtomicArgs {
                iov: &iov[..usize::from(operands > 0)],
                addr: c.dest,
                rma: RmaIov {
                    addr: c.addr,
                    len: n as u64,
                    key: c.key,
                },
                datatype: dt,
                op,
                count: c.count,
                context: c.context,
                data: c.data.unwrap_or(0),
            };
            match c.kind {
                AtomicKind::Write => d.atomicmsg(h, &mem(), &args, f),
                AtomicKind::Fetch => d.fetch_atomicmsg(h, &mem(), &args, res, f),
                AtomicKind::Compare => d.compare_atomicmsg(h, &mem(), &args, cmp, res, f),
            }
        })
    }
}

/// The single `fi_ioc` of a vector call (`count` must be 1): its buffer and elements.
///
/// # Safety
///
/// `ioc` is NULL or holds `count` entries.
unsafe fn one_ioc(ioc: *const sys::fi_ioc, count: usize) -> Result<(V, usize), Errno> {
    if ioc.is_null() || count != 1 {
        return Err(Errno::EINVAL);
    }
    // SAFETY: non-NULL with one entry (contract).
    let v = unsafe { ioc.read_unaligned() };
    Ok((v.addr, v.count))
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_write(
    p: *mut sys::fid_ep,
    buf: CV,
    count: usize,
    _desc: V,
    dest: sys::fi_addr_t,
    addr: u64,
    key: u64,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    context: V,
) -> isize {
    let c = AtomicCall {
        kind: AtomicKind::Write,
        buf,
        compare: std::ptr::null(),
        result: std::ptr::null_mut(),
        count,
        dest,
        addr,
        key,
        dt,
        op,
        context: ctx(context),
        data: None,
        flags: None,
    };
    // SAFETY: forwarded contract.
    unsafe { atomic_post(p, c) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_writev(
    p: *mut sys::fid_ep,
    iov: *const sys::fi_ioc,
    _desc: *mut V,
    count: usize,
    dest: sys::fi_addr_t,
    addr: u64,
    key: u64,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    context: V,
) -> isize {
    // SAFETY: the application's array of `count` entries.
    let (buf, n) = match unsafe { one_ioc(iov, count) } {
        Ok(x) => x,
        Err(e) => return ret_len(Err(e)),
    };
    // SAFETY: the application's endpoint.
    unsafe {
        at_write(
            p,
            buf,
            n,
            std::ptr::null_mut(),
            dest,
            addr,
            key,
            dt,
            op,
            context,
        )
    }
}

/// The parts of a `struct fi_msg_atomic` (one local and one remote ioc).
///
/// # Safety
///
/// `msg` is NULL or a valid `struct fi_msg_atomic`.
unsafe fn atomic_msg(
    msg: *const sys::fi_msg_atomic,
) -> Result<(sys::fi_msg_atomic, V, usize, sys::fi_rma_ioc), Errno> {
    if msg.is_null() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: non-NULL (contract).
    let m = unsafe { msg.read_unaligned() };
    // SAFETY: its arrays hold `iov_count` entries (contract).
    let (buf, n) = unsafe { one_ioc(m.msg_iov, m.iov_count) }?;
    if m.rma_iov.is_null() || m.rma_iov_count != 1 {
        return Err(Errno::EINVAL);
    }
    // SAFETY: non-NULL with one entry (contract).
    let r = unsafe { m.rma_iov.read_unaligned() };
    if r.count != n {
        return Err(Errno::EINVAL);
    }
    Ok((m, buf, n, r))
}

/// # Safety
///
/// `p` is NULL or a fid; `msg` NULL or valid; `compare` / `result` NULL or holding
/// `compare_count` / `result_count` entries.
#[allow(clippy::too_many_arguments)]
unsafe fn atomic_msg_post(
    p: *mut sys::fid_ep,
    kind: AtomicKind,
    msg: *const sys::fi_msg_atomic,
    compare: *const sys::fi_ioc,
    compare_count: usize,
    result: *const sys::fi_ioc,
    result_count: usize,
    flags: u64,
) -> isize {
    // SAFETY: forwarded contract.
    let (m, buf, n, r) = match unsafe { atomic_msg(msg) } {
        Ok(x) => x,
        Err(e) => return ret_len(Err(e)),
    };
    let cmp = match kind {
        // SAFETY: `compare` holds `compare_count` entries (contract).
        AtomicKind::Compare => unsafe { one_ioc(compare, compare_count) },
        _ => Ok((std::ptr::null_mut(), n)),
    };
    let res = match kind {
        AtomicKind::Write => Ok((std::ptr::null_mut(), n)),
        // SAFETY: `result` holds `result_count` entries (contract).
        _ => unsafe { one_ioc(result, result_count) },
    };
    let (cmp, res) = match (cmp, res) {
        (Ok(c), Ok(r)) if c.1 == n && r.1 == n => (c.0, r.0),
        _ => return ret_len(Err(Errno::EINVAL)),
    };
    let f = Flags::from_bits_retain(flags);
    let c = AtomicCall {
        kind,
        buf,
        compare: cmp,
        result: res,
        count: n,
        dest: m.addr,
        addr: r.addr,
        key: r.key,
        dt: m.datatype,
        op: m.op,
        context: ctx(m.context),
        data: f.contains(Flags::REMOTE_CQ_DATA).then_some(m.data),
        flags: Some(f),
    };
    // SAFETY: forwarded contract.
    unsafe { atomic_post(p, c) }
}

unsafe extern "C" fn at_writemsg(
    p: *mut sys::fid_ep,
    msg: *const sys::fi_msg_atomic,
    flags: u64,
) -> isize {
    let null = std::ptr::null();
    // SAFETY: forwarded contract.
    unsafe { atomic_msg_post(p, AtomicKind::Write, msg, null, 0, null, 0, flags) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_inject(
    p: *mut sys::fid_ep,
    buf: CV,
    count: usize,
    dest: sys::fi_addr_t,
    addr: u64,
    key: u64,
    dt: sys::fi_datatype,
    op: sys::fi_op,
) -> isize {
    let c = AtomicCall {
        kind: AtomicKind::Write,
        buf,
        compare: std::ptr::null(),
        result: std::ptr::null_mut(),
        count,
        dest,
        addr,
        key,
        dt,
        op,
        context: 0,
        data: None,
        flags: None,
    };
    // fi_inject_atomic: no completion (the operands are copied by every atomic call).
    // SAFETY: the application's endpoint.
    unsafe { atomic_post_inject(p, c) }
}

/// `fi_inject_atomic`: as [`atomic_post`] with FI_INJECT (no completion).
///
/// # Safety
///
/// `p` is NULL or a fid.
unsafe fn atomic_post_inject(p: *mut sys::fid_ep, mut c: AtomicCall) -> isize {
    // SAFETY: forwarded contract.
    let flags = match unsafe { ep(p) } {
        Ok(e) => e.op(After::Nothing, |d, h| d.ep_tx_flags(h)),
        Err(e) => Err(e),
    };
    match flags {
        Ok(f) => {
            c.flags = Some(f | Flags::INJECT);
            // SAFETY: forwarded contract.
            unsafe { atomic_post(p, c) }
        }
        Err(e) => ret_len(Err(e)),
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_readwrite(
    p: *mut sys::fid_ep,
    buf: CV,
    count: usize,
    _desc: V,
    result: V,
    _result_desc: V,
    dest: sys::fi_addr_t,
    addr: u64,
    key: u64,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    context: V,
) -> isize {
    let c = AtomicCall {
        kind: AtomicKind::Fetch,
        buf,
        compare: std::ptr::null(),
        result,
        count,
        dest,
        addr,
        key,
        dt,
        op,
        context: ctx(context),
        data: None,
        flags: None,
    };
    // SAFETY: forwarded contract.
    unsafe { atomic_post(p, c) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_readwritev(
    p: *mut sys::fid_ep,
    iov: *const sys::fi_ioc,
    _desc: *mut V,
    count: usize,
    resultv: *mut sys::fi_ioc,
    _result_desc: *mut V,
    result_count: usize,
    dest: sys::fi_addr_t,
    addr: u64,
    key: u64,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    context: V,
) -> isize {
    // SAFETY: the application's arrays.
    let parts = unsafe { (one_ioc(iov, count), one_ioc(resultv, result_count)) };
    let ((buf, n), (res, rn)) = match parts {
        (Ok(a), Ok(b)) => (a, b),
        _ => return ret_len(Err(Errno::EINVAL)),
    };
    if n != rn {
        return ret_len(Err(Errno::EINVAL));
    }
    let null = std::ptr::null_mut();
    // SAFETY: the application's endpoint.
    unsafe { at_readwrite(p, buf, n, null, res, null, dest, addr, key, dt, op, context) }
}

unsafe extern "C" fn at_readwritemsg(
    p: *mut sys::fid_ep,
    msg: *const sys::fi_msg_atomic,
    resultv: *mut sys::fi_ioc,
    _result_desc: *mut V,
    result_count: usize,
    flags: u64,
) -> isize {
    let null = std::ptr::null();
    // SAFETY: forwarded contract.
    unsafe {
        atomic_msg_post(
            p,
            AtomicKind::Fetch,
            msg,
            null,
            0,
            resultv,
            result_count,
            flags,
        )
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_compwrite(
    p: *mut sys::fid_ep,
    buf: CV,
    count: usize,
    _desc: V,
    compare: CV,
    _compare_desc: V,
    result: V,
    _result_desc: V,
    dest: sys::fi_addr_t,
    addr: u64,
    key: u64,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    context: V,
) -> isize {
    let c = AtomicCall {
        kind: AtomicKind::Compare,
        buf,
        compare,
        result,
        count,
        dest,
        addr,
        key,
        dt,
        op,
        context: ctx(context),
        data: None,
        flags: None,
    };
    // SAFETY: forwarded contract.
    unsafe { atomic_post(p, c) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_compwritev(
    p: *mut sys::fid_ep,
    iov: *const sys::fi_ioc,
    _desc: *mut V,
    count: usize,
    comparev: *const sys::fi_ioc,
    _compare_desc: *mut V,
    compare_count: usize,
    resultv: *mut sys::fi_ioc,
    _result_desc: *mut V,
    result_count: usize,
    dest: sys::fi_addr_t,
    addr: u64,
    key: u64,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    context: V,
) -> isize {
    // SAFETY: the application's arrays.
    let parts = unsafe {
        (
            one_ioc(iov, count),
            one_ioc(comparev, compare_count),
            one_ioc(resultv, result_count),
        )
    };
    let ((buf, n), (cmp, cn), (res, rn)) = match parts {
        (Ok(a), Ok(b), Ok(c)) => (a, b, c),
        _ => return ret_len(Err(Errno::EINVAL)),
    };
    if n != cn || n != rn {
        return ret_len(Err(Errno::EINVAL));
    }
    let null = std::ptr::null_mut();
    // SAFETY: the application's endpoint.
    unsafe {
        at_compwrite(
            p, buf, n, null, cmp, null, res, null, dest, addr, key, dt, op, context,
        )
    }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn at_compwritemsg(
    p: *mut sys::fid_ep,
    msg: *const sys::fi_msg_atomic,
    comparev: *const sys::fi_ioc,
    _compare_desc: *mut V,
    compare_count: usize,
    resultv: *mut sys::fi_ioc,
    _result_desc: *mut V,
    result_count: usize,
    flags: u64,
) -> isize {
    // SAFETY: forwarded contract.
    unsafe {
        atomic_msg_post(
            p,
            AtomicKind::Compare,
            msg,
            comparev,
            compare_count,
            resultv,
            result_count,
            flags,
        )
    }
}

/// `fi_atomicvalid` & co.: 0 and the element limit in `count`, or -FI_EOPNOTSUPP.
///
/// # Safety
///
/// `p` is NULL or a fid; `count` NULL or writable.
unsafe fn at_valid(
    p: *mut sys::fid_ep,
    kind: AtomicKind,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    count: *mut usize,
) -> c_int {
    if count.is_null() {
        return neg(Errno::EINVAL);
    }
    let r = dt_op(dt, op).and_then(|(dt, op)| {
        // SAFETY: forwarded contract.
        match unsafe { ep(p) } {
            Ok(e) => e.op(After::Nothing, |d, h| d.atomic_valid(h, op, dt, kind)),
            Err(e) => Err(e),
        }
    });
    match r {
        Ok(n) => {
            // SAFETY: non-NULL and writable (contract).
            unsafe { count.write_unaligned(n) };
            0
        }
        Err(e) => neg(e),
    }
}

unsafe extern "C" fn at_writevalid(
    p: *mut sys::fid_ep,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    count: *mut usize,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { at_valid(p, AtomicKind::Write, dt, op, count) }
}

unsafe extern "C" fn at_readwritevalid(
    p: *mut sys::fid_ep,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    count: *mut usize,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { at_valid(p, AtomicKind::Fetch, dt, op, count) }
}

unsafe extern "C" fn at_compwritevalid(
    p: *mut sys::fid_ep,
    dt: sys::fi_datatype,
    op: sys::fi_op,
    count: *mut usize,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { at_valid(p, AtomicKind::Compare, dt, op, count) }
}
