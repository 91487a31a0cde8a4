//! Tagged messages (fi_tagged(3)), with FI_PEEK / FI_CLAIM / FI_DISCARD.

use std::ffi::c_void;

use ofi_nostd::Errno;
use ofi_nostd::flags::Flags;

use super::args::{After, Iovs, ctx, mem, one, post};
use crate::sys;
use crate::util::arg;
use ofi_nostd::domain::TaggedArgs;

pub(super) static TAGGED_OPS: sys::fi_ops_tagged = sys::fi_ops_tagged {
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
    let b = arg!(one(buf, len));
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
    let v = arg!(unsafe { Iovs::new(iov, desc, count) });
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Nothing, |d, h| {
            d.trecvv(h, v.iov(), src, tag, ignore, ctx(context))
        })
    }
}

/// The parts of a `struct fi_msg_tagged` as the core's [`TaggedArgs`].
///
/// # Safety
///
/// `msg` is NULL or a valid `struct fi_msg_tagged`.
pub(super) unsafe fn tmsg_args<'a>(
    msg: *const sys::fi_msg_tagged,
    v: &'a mut Option<Iovs>,
) -> Result<TaggedArgs<'a>, Errno> {
    if msg.is_null() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: non-NULL (contract).
    let m = unsafe { msg.read_unaligned() };
    // SAFETY: its arrays hold `iov_count` entries (contract).
    let v = v.insert(unsafe { Iovs::new(m.msg_iov, m.desc, m.iov_count) }?);
    Ok(TaggedArgs {
        iov: v.iov(),
        desc: v.desc(),
        addr: m.addr,
        tag: m.tag,
        ignore: m.ignore,
        context: ctx(m.context),
        data: m.data,
    })
}

/// `fi_trecvmsg`, with FI_PEEK / FI_CLAIM / FI_DISCARD (the claimed message is named by
/// the context pointer, the application's `struct fi_context`).
unsafe extern "C" fn trecvmsg(
    p: *mut sys::fid_ep,
    msg: *const sys::fi_msg_tagged,
    flags: u64,
) -> isize {
    let mut iovs = None;
    // SAFETY: the application's message.
    let args = arg!(unsafe { tmsg_args(msg, &mut iovs) });
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
    let b = arg!(one(buf, len));
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
    let v = arg!(unsafe { Iovs::new(iov, desc, count) });
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
    let mut iovs = None;
    // SAFETY: the application's message.
    let args = arg!(unsafe { tmsg_args(msg, &mut iovs) });
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
    let b = arg!(one(buf, len));
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
    let b = arg!(one(buf, len));
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
    let b = arg!(one(buf, len));
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Transmit, |d, h| {
            d.tinjectdata(h, &mem(), b, data, dest, tag)
        })
    }
}
