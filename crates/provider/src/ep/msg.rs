//! Messages (fi_msg(3)): `fi_recv`, `fi_send`, `fi_inject` and their vector, message
//! and remote-data forms.

use std::ffi::c_void;

use ofi_nostd::Errno;
use ofi_nostd::flags::Flags;

use super::args::{After, Iovs, ctx, descs, mem, one, one_desc, one_rx, post, rx_flags};
use crate::sys;
use crate::util::arg;
use ofi_nostd::domain::MsgArgs;

pub(super) static MSG_OPS: sys::fi_ops_msg = sys::fi_ops_msg {
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

unsafe extern "C" fn recv(
    p: *mut sys::fid_ep,
    buf: *mut c_void,
    len: usize,
    desc: *mut c_void,
    src: sys::fi_addr_t,
    context: *mut c_void,
) -> isize {
    let b = one_rx(buf, len);
    // SAFETY: the application's endpoint.
    let desc = unsafe { one_desc(p, desc) };
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Nothing, |d, h| match desc {
            None => d.recv(h, b, src, ctx(context)),
            Some(m) => {
                let (iov, desc) = ([b], [m]);
                let args = MsgArgs {
                    desc: &desc,
                    ..MsgArgs::new(&iov, src, ctx(context))
                };
                d.recvmsg(h, &args, rx_flags(d, h)?)
            }
        })
    }
}

unsafe extern "C" fn recvv(
    p: *mut sys::fid_ep,
    iov: *const sys::iovec,
    desc: *mut *mut c_void,
    count: usize,
    src: sys::fi_addr_t,
    context: *mut c_void,
) -> isize {
    // SAFETY: the application's arrays of `count` entries (the descriptors only under
    // FI_MR_LOCAL).
    let v = arg!(unsafe { Iovs::new(iov, descs(p, desc), count) });
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Nothing, |d, h| {
            if v.desc().is_empty() {
                d.recvv(h, v.iov(), src, ctx(context))
            } else {
                let args = MsgArgs {
                    desc: v.desc(),
                    ..MsgArgs::new(v.iov(), src, ctx(context))
                };
                d.recvmsg(h, &args, rx_flags(d, h)?)
            }
        })
    }
}

/// The parts of a `struct fi_msg` as the core's [`MsgArgs`].
///
/// # Safety
///
/// `p` is NULL or a fid; `msg` is NULL or a valid `struct fi_msg`.
pub(super) unsafe fn msg_args<'a>(
    p: *const sys::fid_ep,
    msg: *const sys::fi_msg,
    v: &'a mut Option<Iovs>,
) -> Result<MsgArgs<'a>, Errno> {
    if msg.is_null() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: non-NULL (contract).
    let m = unsafe { msg.read_unaligned() };
    // SAFETY: its arrays hold `iov_count` entries (contract; the descriptors are read
    // only under FI_MR_LOCAL).
    let v = v.insert(unsafe { Iovs::new(m.msg_iov, descs(p, m.desc), m.iov_count) }?);
    Ok(MsgArgs {
        iov: v.iov(),
        desc: v.desc(),
        addr: m.addr,
        context: ctx(m.context),
        data: m.data,
    })
}

unsafe extern "C" fn recvmsg(p: *mut sys::fid_ep, msg: *const sys::fi_msg, flags: u64) -> isize {
    let mut iovs = None;
    // SAFETY: the application's message.
    let args = arg!(unsafe { msg_args(p, msg, &mut iovs) });
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
    desc: *mut c_void,
    dest: sys::fi_addr_t,
    context: *mut c_void,
) -> isize {
    let b = arg!(one(buf, len));
    // SAFETY: the application's endpoint.
    let desc = unsafe { one_desc(p, desc) };
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Transmit, |d, h| match desc {
            None => d.send(h, &mem(), b, dest, ctx(context)),
            Some(m) => {
                let (iov, desc) = ([b], [m]);
                let args = MsgArgs {
                    desc: &desc,
                    ..MsgArgs::new(&iov, dest, ctx(context))
                };
                d.sendmsg(h, &mem(), &args, d.ep_tx_flags(h)?)
            }
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
    // SAFETY: the application's arrays of `count` entries (the descriptors only under
    // FI_MR_LOCAL).
    let v = arg!(unsafe { Iovs::new(iov, descs(p, desc), count) });
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Transmit, |d, h| {
            if v.desc().is_empty() {
                d.sendv(h, &mem(), v.iov(), dest, ctx(context))
            } else {
                let args = MsgArgs {
                    desc: v.desc(),
                    ..MsgArgs::new(v.iov(), dest, ctx(context))
                };
                d.sendmsg(h, &mem(), &args, d.ep_tx_flags(h)?)
            }
        })
    }
}

unsafe extern "C" fn sendmsg(p: *mut sys::fid_ep, msg: *const sys::fi_msg, flags: u64) -> isize {
    let mut iovs = None;
    // SAFETY: the application's message.
    let args = arg!(unsafe { msg_args(p, msg, &mut iovs) });
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
    let b = arg!(one(buf, len));
    // SAFETY: the application's endpoint.
    unsafe { post(p, After::Transmit, |d, h| d.inject(h, &mem(), b, dest)) }
}

unsafe extern "C" fn senddata(
    p: *mut sys::fid_ep,
    buf: *const c_void,
    len: usize,
    desc: *mut c_void,
    data: u64,
    dest: sys::fi_addr_t,
    context: *mut c_void,
) -> isize {
    let b = arg!(one(buf, len));
    // SAFETY: the application's endpoint.
    let desc = unsafe { one_desc(p, desc) };
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Transmit, |d, h| match desc {
            None => d.senddata(h, &mem(), b, data, dest, ctx(context)),
            Some(m) => {
                let (iov, desc) = ([b], [m]);
                let args = MsgArgs {
                    desc: &desc,
                    data,
                    ..MsgArgs::new(&iov, dest, ctx(context))
                };
                let f = d.ep_tx_flags(h)? | Flags::REMOTE_CQ_DATA;
                d.sendmsg(h, &mem(), &args, f)
            }
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
    let b = arg!(one(buf, len));
    // SAFETY: the application's endpoint.
    unsafe {
        post(p, After::Transmit, |d, h| {
            d.injectdata(h, &mem(), b, data, dest)
        })
    }
}
