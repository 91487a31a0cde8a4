//! Atomics (fi_atomic(3)): the operations and datatypes `ofi_nostd::atomic` serves.

use std::ffi::{c_int, c_void};

use ofi_nostd::Errno;
use ofi_nostd::atomic::AtomicKind;
use ofi_nostd::domain::{AtomicArgs, RmaIov};
use ofi_nostd::flags::Flags;
use wire::packet::{AtomicDatatype, AtomicOp};

use super::args::{After, ctx, mem, one, post};
use super::ep;
use crate::sys;
use crate::util::{arg, neg, ret_len};

/// `fi_ops_atomic`: the operations and datatypes `ofi_nostd::atomic` serves, one remote
/// iov and one compare and result buffer each.
pub(super) static ATOMIC_OPS: sys::fi_ops_atomic = sys::fi_ops_atomic {
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

impl AtomicCall {
    /// A call of `kind` on `count` operands at `buf`, to the peer's `addr`/`key`
    /// (`at`: dest, addr, key), without compare or result buffers, remote data or
    /// flags of its own (the endpoint's defaults).
    fn new(
        kind: AtomicKind,
        (buf, count): (CV, usize),
        (dest, addr, key): (sys::fi_addr_t, u64, u64),
        (dt, op): (sys::fi_datatype, sys::fi_op),
        context: V,
    ) -> Self {
        AtomicCall {
            kind,
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
        }
    }
}

/// # Safety
///
/// `p` is NULL or a fid.
unsafe fn atomic_post(p: *mut sys::fid_ep, c: AtomicCall) -> isize {
    let (dt, op) = arg!(dt_op(c.dt, c.op));
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
    let at = (dest, addr, key);
    let c = AtomicCall::new(AtomicKind::Write, (buf, count), at, (dt, op), context);
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
    let ([buf], n) = arg!(unsafe { iocs([(iov, count)]) });
    let (at, buf) = ((dest, addr, key), buf.cast_const());
    let c = AtomicCall::new(AtomicKind::Write, (buf, n), at, (dt, op), context);
    // SAFETY: forwarded contract.
    unsafe { atomic_post(p, c) }
}

/// The buffers of a vector call: the single `fi_ioc` of each array (see [`one_ioc`]),
/// each with as many elements as the first, and that number; -FI_EINVAL otherwise.
///
/// # Safety
///
/// Each array is NULL or holds its count of entries.
unsafe fn iocs<const N: usize>(
    arrays: [(*const sys::fi_ioc, usize); N],
) -> Result<([V; N], usize), Errno> {
    let mut bufs = [std::ptr::null_mut(); N];
    let mut n = None;
    for (b, (ioc, count)) in bufs.iter_mut().zip(arrays) {
        // SAFETY: forwarded contract.
        let (buf, k) = unsafe { one_ioc(ioc, count) }?;
        if n.is_some_and(|n| n != k) {
            return Err(Errno::EINVAL);
        }
        (*b, n) = (buf, Some(k));
    }
    Ok((bufs, n.unwrap_or(0)))
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
    let (m, buf, n, r) = arg!(unsafe { atomic_msg(msg) });
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
    let at = (m.addr, r.addr, r.key);
    let mut c = AtomicCall::new(kind, (buf, n), at, (m.datatype, m.op), m.context);
    (c.compare, c.result) = (cmp, res);
    c.data = f.contains(Flags::REMOTE_CQ_DATA).then_some(m.data);
    c.flags = Some(f);
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
    let (at, null) = ((dest, addr, key), std::ptr::null_mut());
    let c = AtomicCall::new(AtomicKind::Write, (buf, count), at, (dt, op), null);
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
    let at = (dest, addr, key);
    let mut c = AtomicCall::new(AtomicKind::Fetch, (buf, count), at, (dt, op), context);
    c.result = result;
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
    let ([buf, res], n) =
        arg!(unsafe { iocs([(iov, count), (resultv.cast_const(), result_count)]) });
    let (at, buf) = ((dest, addr, key), buf.cast_const());
    let mut c = AtomicCall::new(AtomicKind::Fetch, (buf, n), at, (dt, op), context);
    c.result = res;
    // SAFETY: forwarded contract.
    unsafe { atomic_post(p, c) }
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
    let at = (dest, addr, key);
    let mut c = AtomicCall::new(AtomicKind::Compare, (buf, count), at, (dt, op), context);
    (c.compare, c.result) = (compare, result);
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
    let arrays = [
        (iov, count),
        (comparev, compare_count),
        (resultv.cast_const(), result_count),
    ];
    // SAFETY: the application's arrays.
    let ([buf, cmp, res], n) = arg!(unsafe { iocs(arrays) });
    let (at, buf) = ((dest, addr, key), buf.cast_const());
    let mut c = AtomicCall::new(AtomicKind::Compare, (buf, n), at, (dt, op), context);
    (c.compare, c.result) = (cmp.cast_const(), res);
    // SAFETY: forwarded contract.
    unsafe { atomic_post(p, c) }
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
