//! Tagged messages (fi_tagged(3)), with FI_PEEK / FI_CLAIM / FI_DISCARD.

use std::ffi::c_void;

use ofi_nostd::Errno;
use ofi_nostd::flags::Flags;

use super::args::{After, Iovs, ctx, descs, mem, one, one_desc, one_rx, post, rx_flags};
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
    desc: *mut c_void,
    src: sys::fi_addr_t,
    tag: u64,
    ignore: u64,
    context: *mut c_void,
) -> isize {
    let b = one_rx(buf, len);
    // SAFETY: the application's endpoint.
    let desc = unsafe { one_desc(p, desc) };
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Nothing, |d, h| match desc {
            None => d.trecv(h, b, src, tag, ignore, ctx(context)),
            Some(m) => {
                let (iov, desc) = ([b], [m]);
                let args = TaggedArgs {
                    desc: &desc,
                    ignore,
                    ..TaggedArgs::new(&iov, src, tag, ctx(context))
                };
                d.trecvmsg(h, &args, rx_flags(d, h)?)
            }
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
    // SAFETY: the application's arrays of `count` entries (the descriptors only under
    // FI_MR_LOCAL).
    let v = arg!(unsafe { Iovs::new(iov, descs(p, desc), count) });
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Nothing, |d, h| {
            if v.desc().is_empty() {
                d.trecvv(h, v.iov(), src, tag, ignore, ctx(context))
            } else {
                let args = TaggedArgs {
                    desc: v.desc(),
                    ignore,
                    ..TaggedArgs::new(v.iov(), src, tag, ctx(context))
                };
                d.trecvmsg(h, &args, rx_flags(d, h)?)
            }
        })
    }
}

/// The parts of a `struct fi_msg_tagged` as the core's [`TaggedArgs`].
///
/// # Safety
///
/// `p` is NULL or a fid; `msg` is NULL or a valid `struct fi_msg_tagged`.
pub(super) unsafe fn tmsg_args<'a>(
    p: *const sys::fid_ep,
    msg: *const sys::fi_msg_tagged,
    v: &'a mut Option<Iovs>,
) -> Result<TaggedArgs<'a>, Errno> {
    if msg.is_null() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: non-NULL (contract).
    let m = unsafe { msg.read_unaligned() };
    // SAFETY: its arrays hold `iov_count` entries (contract; the descriptors are read
    // only under FI_MR_LOCAL).
    let v = v.insert(unsafe { Iovs::new(m.msg_iov, descs(p, m.desc), m.iov_count) }?);
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
    let args = arg!(unsafe { tmsg_args(p, msg, &mut iovs) });
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
    desc: *mut c_void,
    dest: sys::fi_addr_t,
    tag: u64,
    context: *mut c_void,
) -> isize {
    let b = arg!(one(buf, len));
    // SAFETY: the application's endpoint.
    let desc = unsafe { one_desc(p, desc) };
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Transmit, |d, h| match desc {
            None => d.tsend(h, &mem(), b, dest, tag, ctx(context)),
            Some(m) => {
                let (iov, desc) = ([b], [m]);
                let args = TaggedArgs {
                    desc: &desc,
                    ..TaggedArgs::new(&iov, dest, tag, ctx(context))
                };
                d.tsendmsg(h, &mem(), &args, d.ep_tx_flags(h)?)
            }
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
    // SAFETY: the application's arrays of `count` entries (the descriptors only under
    // FI_MR_LOCAL).
    let v = arg!(unsafe { Iovs::new(iov, descs(p, desc), count) });
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Transmit, |d, h| {
            if v.desc().is_empty() {
                d.tsendv(h, &mem(), v.iov(), dest, tag, ctx(context))
            } else {
                let args = TaggedArgs {
                    desc: v.desc(),
                    ..TaggedArgs::new(v.iov(), dest, tag, ctx(context))
                };
                d.tsendmsg(h, &mem(), &args, d.ep_tx_flags(h)?)
            }
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
    let args = arg!(unsafe { tmsg_args(p, msg, &mut iovs) });
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
    desc: *mut c_void,
    data: u64,
    dest: sys::fi_addr_t,
    tag: u64,
    context: *mut c_void,
) -> isize {
    let b = arg!(one(buf, len));
    // SAFETY: the application's endpoint.
    let desc = unsafe { one_desc(p, desc) };
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Transmit, |d, h| match desc {
            None => d.tsenddata(h, &mem(), b, data, dest, tag, ctx(context)),
            Some(m) => {
                let (iov, desc) = ([b], [m]);
                let args = TaggedArgs {
                    desc: &desc,
                    data,
                    ..TaggedArgs::new(&iov, dest, tag, ctx(context))
                };
                let f = d.ep_tx_flags(h)? | Flags::REMOTE_CQ_DATA;
                d.tsendmsg(h, &mem(), &args, f)
            }
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
