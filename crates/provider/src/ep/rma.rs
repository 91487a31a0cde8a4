//! RMA (fi_rma(3)): writes and reads of peers' registered memory, one remote iov each.

use std::ffi::c_void;

use ofi_nostd::Errno;
use ofi_nostd::flags::Flags;

use super::args::{After, Iovs, ctx, descs, mem, one, one_desc, post};
use crate::sys;
use crate::util::{arg, ret_len};
use ofi_nostd::domain::{RmaArgs, RmaIov};
use ofi_nostd::mem::IoVec;

/// `fi_ops_rma`: writes and reads of peers' registered memory (one remote iov each).
pub(super) static RMA_OPS: sys::fi_ops_rma = sys::fi_ops_rma {
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

/// The peer side of the short calls: its address and the region's `addr` and `key`.
type Peer = (sys::fi_addr_t, u64, u64);

/// The one-buffer calls (fi_read, fi_write, fi_writedata and the inject forms): `len`
/// bytes at `buf` (described by `desc`, read only under FI_MR_LOCAL) with the
/// endpoint's default flags.
///
/// # Safety
///
/// `p` is NULL or a fid.
unsafe fn rma_one(
    p: *mut sys::fid_ep,
    read: bool,
    (buf, len, desc): (*const c_void, usize, *mut c_void),
    (dest, addr, key): Peer,
    context: *mut c_void,
    (data, inject): (Option<u64>, bool),
) -> isize {
    let b = arg!(one(buf, len));
    let (r, c) = (rma_iov(len, addr, key), ctx(context));
    // SAFETY: the application's endpoint.
    let desc = unsafe { one_desc(p, desc) };
    let desc = desc.as_slice();
    // SAFETY: the application's endpoint.
    unsafe { rma_post(p, read, &[b], desc, dest, r, c, data, None, inject) }
}

/// The vector calls (fi_readv, fi_writev): one remote region for the whole iov.
///
/// # Safety
///
/// `p` is NULL or a fid; `iov` and `desc` NULL or holding `count` entries.
unsafe fn rma_vec(
    p: *mut sys::fid_ep,
    read: bool,
    (iov, desc, count): (*const sys::iovec, *mut *mut c_void, usize),
    (dest, addr, key): Peer,
    context: *mut c_void,
) -> isize {
    // SAFETY: the application's arrays of `count` entries (the descriptors only under
    // FI_MR_LOCAL).
    let v = arg!(unsafe { Iovs::new(iov, descs(p, desc), count) });
    let len = v.iov().iter().map(|x| x.len).sum();
    let (r, c) = (rma_iov(len, addr, key), ctx(context));
    // SAFETY: the application's endpoint.
    unsafe { rma_post(p, read, v.iov(), v.desc(), dest, r, c, None, None, false) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rma_read(
    p: *mut sys::fid_ep,
    buf: *mut c_void,
    len: usize,
    desc: *mut c_void,
    src: sys::fi_addr_t,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    // SAFETY: forwarded contract.
    unsafe {
        rma_one(
            p,
            true,
            (buf, len, desc),
            (src, addr, key),
            context,
            (None, false),
        )
    }
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
    // SAFETY: forwarded contract.
    unsafe { rma_vec(p, true, (iov, desc, count), (src, addr, key), context) }
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
    // SAFETY: its arrays hold `iov_count` entries (contract; the descriptors are read
    // only under FI_MR_LOCAL).
    let v = arg!(unsafe { Iovs::new(m.msg_iov, descs(p, m.desc), m.iov_count) });
    // SAFETY: non-NULL, and it holds `rma_iov_count` (1) entries (contract).
    let r = unsafe { m.rma_iov.read_unaligned() };
    let rma = rma_iov(r.len, r.addr, r.key);
    let f = Flags::from_bits_retain(flags);
    let data = f.contains(Flags::REMOTE_CQ_DATA).then_some(m.data);
    let (c, d) = (ctx(m.context), m.addr);
    // SAFETY: the application's endpoint.
    unsafe { rma_post(p, read, v.iov(), v.desc(), d, rma, c, data, Some(f), false) }
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
    desc: *mut c_void,
    dest: sys::fi_addr_t,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    let peer = (dest, addr, key);
    // SAFETY: forwarded contract.
    unsafe { rma_one(p, false, (buf, len, desc), peer, context, (None, false)) }
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
    // SAFETY: forwarded contract.
    unsafe { rma_vec(p, false, (iov, desc, count), (dest, addr, key), context) }
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
    let (peer, null) = ((dest, addr, key), std::ptr::null_mut());
    // SAFETY: forwarded contract.
    unsafe { rma_one(p, false, (buf, len, null), peer, null, (None, true)) }
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn rma_writedata(
    p: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    data: u64,
    dest: sys::fi_addr_t,
    addr: u64,
    key: u64,
    context: *mut c_void,
) -> isize {
    let peer = (dest, addr, key);
    // SAFETY: forwarded contract.
    unsafe {
        rma_one(
            p,
            false,
            (buf, len, desc),
            peer,
            context,
            (Some(data), false),
        )
    }
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
    let (peer, null) = ((dest, addr, key), std::ptr::null_mut());
    // SAFETY: forwarded contract.
    unsafe { rma_one(p, false, (buf, len, null), peer, null, (Some(data), true)) }
}
