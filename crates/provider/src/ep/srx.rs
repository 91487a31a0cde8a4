//! `fi_srx_context`: shared receive contexts over the core's [`ofi_nostd::ep::srx`].
//!
//! A shared receive context is a `struct fid_ep` of class FI_CLASS_SRX_CTX that takes
//! receives (fi_msg(3), fi_tagged(3)), `fi_cancel` and `fi_rx_size_left`; its
//! transmit, RMA, atomic and connection calls are the endpoint's, which refuse a fid
//! that is not an endpoint (-FI_EINVAL). Completions go to the CQ of the bound
//! endpoint that took the message.

use std::ffi::{c_int, c_void};

use hosted::storage::Heap;
use ofi_nostd::Errno;
use ofi_nostd::domain::{MsgArgs, SrxHandle};
use ofi_nostd::ep::EpOpt;
use ofi_nostd::flags::Flags;

use super::args::{Iovs, ctx, descs, one_rx};
use super::{atomic, cm, msg, rma, tagged};
use crate::domain::{DomainFid, InDomain};
use crate::fid::{FidObject, fi_ops_control, object, open_into};
use crate::sys;
use crate::util::{arg, neg, ret, ret_len};

/// An open shared receive context.
#[repr(C)]
pub struct SrxFid {
    c: sys::fid_ep,
    /// The domain, and the context's core handle there.
    pub(crate) at: InDomain<SrxHandle<Heap>>,
}

static SRX_FI_OPS: sys::fi_ops = fi_ops_control(close, control);

static SRX_OPS: sys::fi_ops_ep = sys::fi_ops_ep {
    size: size_of::<sys::fi_ops_ep>(),
    cancel: Some(cancel),
    getopt: Some(getopt),
    setopt: Some(setopt),
    tx_ctx: Some(super::sep::tx_ctx),
    rx_ctx: Some(super::sep::rx_ctx),
    rx_size_left: Some(rx_size_left),
    tx_size_left: Some(super::tx_size_left),
};

static SRX_MSG_OPS: sys::fi_ops_msg = sys::fi_ops_msg {
    recv: Some(recv),
    recvv: Some(recvv),
    recvmsg: Some(recvmsg),
    ..msg::MSG_OPS
};

static SRX_TAGGED_OPS: sys::fi_ops_tagged = sys::fi_ops_tagged {
    recv: Some(trecv),
    recvv: Some(trecvv),
    recvmsg: Some(trecvmsg),
    ..tagged::TAGGED_OPS
};

// SAFETY: #[repr(C)] with the fid_ep (fid first) as first field; only `open` makes
// fids with this class and ops.
unsafe impl FidObject for SrxFid {
    const CLASS: u32 = sys::FI_CLASS_SRX_CTX;
    fn fi_ops() -> *const sys::fi_ops {
        &raw const SRX_FI_OPS
    }
}

/// `fi_srx_context`: a shared receive context with `attr` (NULL: the defaults).
///
/// # Safety
///
/// Called through the application's `fi_srx_context` with valid or NULL pointers.
pub unsafe extern "C" fn open(
    domain: *mut sys::fid_domain,
    attr: *mut sys::fi_rx_attr,
    out: *mut *mut sys::fid_ep,
    context: *mut c_void,
) -> c_int {
    let make = || {
        // SAFETY: forwarded contract.
        let d = unsafe { DomainFid::from_c(domain) }?;
        // SAFETY: NULL or the application's valid fi_rx_attr.
        let a = unsafe { attr.as_ref() }.map(crate::info::rx_from_c);
        let a = a.unwrap_or_default();
        let h = d.with(|core| core.srx_open(&a, ctx(context)))?;
        Ok(SrxFid {
            c: sys::fid_ep {
                fid: SrxFid::header(context),
                ops: (&raw const SRX_OPS).cast_mut(),
                cm: (&raw const cm::CM_OPS).cast_mut(),
                msg: (&raw const SRX_MSG_OPS).cast_mut(),
                rma: (&raw const rma::RMA_OPS).cast_mut(),
                tagged: (&raw const SRX_TAGGED_OPS).cast_mut(),
                atomic: (&raw const atomic::ATOMIC_OPS).cast_mut(),
                collective: (&raw const crate::stubs::COLLECTIVE_OPS).cast_mut(),
            },
            at: InDomain::new(d, h),
        })
    };
    // SAFETY: NULL or writable (application's contract).
    unsafe { open_into(out, make) }
}

/// `fi_close`: -FI_EBUSY while an endpoint bound to it is open.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        crate::fid::close::<SrxFid>(fid, |s| s.at.domain().with(|d| d.srx_close(s.at.handle)))
    }
}

/// `fi_control`: FI_ENABLE succeeds (the context takes receives from its open on);
/// other commands are -FI_ENOSYS.
unsafe extern "C" fn control(fid: *mut sys::fid, cmd: c_int, _arg: *mut c_void) -> c_int {
    // SAFETY: NULL or a fid.
    let _ = arg!(unsafe { object::<SrxFid>(fid) });
    if u32::try_from(cmd) == Ok(sys::FI_ENABLE) {
        0
    } else {
        neg(Errno::ENOSYS)
    }
}

/// The context behind `p`.
///
/// # Safety
///
/// As [`object`].
unsafe fn srx<'a>(p: *const sys::fid_ep) -> Result<&'a SrxFid, Errno> {
    // SAFETY: forwarded contract; the fid is the first field.
    unsafe { object::<SrxFid>(p.cast()) }
}

/// Posts a receive on the context behind `p` (`flags` `None`: its default flags);
/// a refusal with -FI_EAGAIN runs a pass, so a retry can succeed.
///
/// # Safety
///
/// `p` is NULL or a fid.
unsafe fn post(
    p: *mut sys::fid_ep,
    m: &MsgArgs<'_>,
    tag: Option<(u64, u64)>,
    flags: Option<u64>,
) -> isize {
    // SAFETY: forwarded contract.
    let s = match unsafe { srx(p) } {
        Ok(s) => s,
        Err(e) => return ret_len(Err(e)),
    };
    let r = s.at.domain().data(|st| {
        let h = s.at.handle;
        let f = match flags {
            Some(f) => Flags::from_bits_retain(f),
            None => st.core.srx(h)?.op_flags(),
        };
        let r = st.core.srx_recvmsg(h, m, tag, f);
        if matches!(r, Err(Errno::EAGAIN)) {
            st.progress();
        } else {
            st.wake();
        }
        r
    });
    ret_len(r.map(|()| 0))
}

/// `fi_getopt` on the context: FI_OPT_MIN_MULTI_RECV and FI_OPT_RX_SIZE at
/// FI_OPT_ENDPOINT (others -FI_ENOPROTOOPT).
unsafe extern "C" fn getopt(
    fid: *mut sys::fid,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: *mut usize,
) -> c_int {
    // SAFETY: NULL or a fid.
    let s = arg!(unsafe { object::<SrxFid>(fid) });
    let r = EpOpt::from_raw(optname).and_then(|opt| {
        s.at.domain()
            .with(|d| d.srx(s.at.handle)?.getopt(level, opt))
    });
    // SAFETY: forwarded contract.
    unsafe { super::put_opt(r, optval, optlen) }
}

/// `fi_setopt` on the context: FI_OPT_MIN_MULTI_RECV, for the multi-recv buffers
/// posted to it afterwards (others -FI_ENOPROTOOPT).
unsafe extern "C" fn setopt(
    fid: *mut sys::fid,
    level: c_int,
    optname: c_int,
    optval: *const c_void,
    optlen: usize,
) -> c_int {
    // SAFETY: NULL or a fid.
    let s = arg!(unsafe { object::<SrxFid>(fid) });
    // SAFETY: forwarded contract.
    let v = arg!(unsafe { super::get_opt(optval, optlen) });
    ret(EpOpt::from_raw(optname).and_then(|opt| {
        s.at.domain()
            .with(|d| d.srx_mut(s.at.handle)?.setopt(level, opt, v))
    }))
}

/// fi_recv on the srx. Descriptors are never read here: an srx has no endpoint whose
/// domain asks for them (`args::descs` with no endpoint), as in every srx call.
unsafe extern "C" fn recv(
    p: *mut sys::fid_ep,
    buf: *mut c_void,
    len: usize,
    _desc: *mut c_void,
    src: sys::fi_addr_t,
    context: *mut c_void,
) -> isize {
    let b = one_rx(buf, len);
    let iov = [b];
    let m = MsgArgs::new(&iov, src, ctx(context));
    // SAFETY: forwarded contract.
    unsafe { post(p, &m, None, None) }
}

unsafe extern "C" fn recvv(
    p: *mut sys::fid_ep,
    iov: *const sys::iovec,
    desc: *mut *mut c_void,
    count: usize,
    src: sys::fi_addr_t,
    context: *mut c_void,
) -> isize {
    // SAFETY: `count` entries of `iov` (and `desc` if not NULL) (contract).
    let v = arg!(unsafe { Iovs::new(iov, descs(std::ptr::null(), desc), count) });
    let m = MsgArgs {
        desc: v.desc(),
        ..MsgArgs::new(v.iov(), src, ctx(context))
    };
    // SAFETY: forwarded contract.
    unsafe { post(p, &m, None, None) }
}

unsafe extern "C" fn recvmsg(p: *mut sys::fid_ep, m: *const sys::fi_msg, flags: u64) -> isize {
    let mut iovs = None;
    // SAFETY: NULL or a valid fi_msg (contract).
    let args = arg!(unsafe { msg::msg_args(std::ptr::null(), m, &mut iovs) });
    // SAFETY: forwarded contract.
    unsafe { post(p, &args, None, Some(flags)) }
}

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
    let b = one_rx(buf, len);
    let iov = [b];
    let m = MsgArgs::new(&iov, src, ctx(context));
    // SAFETY: forwarded contract.
    unsafe { post(p, &m, Some((tag, ignore)), None) }
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
    // SAFETY: `count` entries of `iov` (and `desc` if not NULL) (contract).
    let v = arg!(unsafe { Iovs::new(iov, descs(std::ptr::null(), desc), count) });
    let m = MsgArgs {
        desc: v.desc(),
        ..MsgArgs::new(v.iov(), src, ctx(context))
    };
    // SAFETY: forwarded contract.
    unsafe { post(p, &m, Some((tag, ignore)), None) }
}

unsafe extern "C" fn trecvmsg(
    p: *mut sys::fid_ep,
    m: *const sys::fi_msg_tagged,
    flags: u64,
) -> isize {
    let mut iovs = None;
    // SAFETY: NULL or a valid fi_msg_tagged (contract).
    let t = arg!(unsafe { tagged::tmsg_args(std::ptr::null(), m, &mut iovs) });
    let args = MsgArgs {
        iov: t.iov,
        desc: t.desc,
        addr: t.addr,
        context: t.context,
        data: 0,
    };
    // SAFETY: forwarded contract.
    unsafe { post(p, &args, Some((t.tag, t.ignore)), Some(flags)) }
}

/// `fi_cancel` of a receive posted to the context.
unsafe extern "C" fn cancel(fid: *mut sys::fid, context: *mut c_void) -> isize {
    // SAFETY: NULL or a fid.
    let s = arg!(unsafe { object::<SrxFid>(fid) });
    ret_len(
        s.at.domain()
            .data(|st| {
                let r = st.core.srx_cancel(s.at.handle, ctx(context));
                st.wake();
                r
            })
            .map(|()| 0),
    )
}

/// `fi_rx_size_left`: receives the context can still hold.
unsafe extern "C" fn rx_size_left(p: *mut sys::fid_ep) -> isize {
    // SAFETY: forwarded contract.
    let s = arg!(unsafe { srx(p) });
    ret_len(s.at.domain().data(|st| st.core.srx_size_left(s.at.handle)))
}
