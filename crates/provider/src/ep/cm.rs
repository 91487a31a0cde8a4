//! Connection management of active endpoints (fi_cm(3)): `fi_getname`, `fi_setname`,
//! `fi_getpeer`, `fi_connect`, `fi_accept`, `fi_shutdown`, and the connection events
//! the domains owe their EQs (`pump`). Passive endpoints (`fi_listen`, `fi_reject`)
//! are [`super::pep`].
//!
//! A connected endpoint is the core's FI_EP_MSG endpoint (an RDM engine restricted to
//! one peer), so its data operations are the ordinary endpoint code. Events: an EQ
//! read (read, readerr, sread, trywait) runs a pass on each domain of the FI_EP_MSG
//! endpoints and passive endpoints bound to it and turns what the core owes
//! ([`ofi_nostd::domain::CmEvent`]) into entries of the EQ each object is bound to:
//! FI_CONNREQ (`info` a new `fi_info` whose `handle` is the request), FI_CONNECTED
//! (the accepter's CM data at the connector), FI_SHUTDOWN, and error entries
//! (FI_ECONNREFUSED with the reject data in `err_data`, FI_ETIMEDOUT). An EQ with a
//! wait object is signalled by those domains' passes while an event is pending
//! (`hosted::runtime::Wake::Cm`), so a waiter on its fd wakes for them.

use std::ffi::{c_char, c_int, c_void};

use ofi_nostd::Errno;
use ofi_nostd::addr::EpAddr;
use ofi_nostd::cm::{CM_DATA_MAX, CmEventKind};
use ofi_nostd::domain::{CmEvent, CmFid};
use ofi_nostd::eq::{EqCmEntry, EqErrData, EqErrEntry, EqEvent, EqPayload};
use ofi_nostd::info::{AddrFormat, RawAddr};

use super::{EpFid, ep};
use crate::domain::DomainFid;
use crate::eq::EqFid;
use crate::fid::object;
use crate::sys;
use crate::util::{arg, bytes, neg, ret};
use hosted::storage::Heap;

pub(super) static CM_OPS: sys::fi_ops_cm = sys::fi_ops_cm {
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

/// `a` in address format `fmt`: a 16-byte `sockaddr_in` whose `sin_zero` carries the
/// endpoint id, or the FI_ADDR_STR text with its NUL.
pub(crate) fn raw_addr(fmt: AddrFormat, a: &EpAddr) -> Result<RawAddr, Errno> {
    let mut s = [0u8; 128];
    let data: &[u8] = if fmt == AddrFormat::STR {
        let n = a.straddr(&mut s).min(s.len());
        &s[..n]
    } else {
        &a.to_sockaddr_in()
    };
    RawAddr::from_slice(data).map_err(|_| Errno::EINVAL)
}

/// Parses an address of format `fmt` (a `sockaddr_in`, or FI_ADDR_STR text).
pub(crate) fn parse_addr(fmt: AddrFormat, b: &[u8]) -> Result<EpAddr, Errno> {
    if fmt == AddrFormat::STR {
        let s = std::str::from_utf8(b).map_err(|_| Errno::EINVAL)?;
        ofi_nostd::info::parse_addr_str(s.trim_end_matches('\0'))
    } else {
        EpAddr::from_sockaddr_in(b).ok_or(Errno::EINVAL)
    }
}

/// The address at `p` (fi_connect's `addr`, which has no length): 16 bytes of
/// `sockaddr_in`, or a NUL-terminated FI_ADDR_STR string.
///
/// # Safety
///
/// `p` is NULL or an address of format `fmt`.
unsafe fn read_addr(fmt: AddrFormat, p: *const c_void) -> Result<EpAddr, Errno> {
    if p.is_null() {
        return Err(Errno::EINVAL);
    }
    if fmt == AddrFormat::STR {
        // SAFETY: a NUL-terminated string (contract).
        let s = unsafe { std::ffi::CStr::from_ptr(p.cast::<c_char>()) };
        parse_addr(fmt, s.to_bytes())
    } else {
        // SAFETY: a `struct sockaddr_in` (contract).
        let b = unsafe { std::slice::from_raw_parts(p.cast::<u8>(), 16) };
        parse_addr(fmt, b)
    }
}

/// CM data of a call: at most FI_OPT_CM_DATA_SIZE bytes (-FI_EINVAL beyond).
///
/// # Safety
///
/// `p` holds `len` bytes.
unsafe fn cm_data<'a>(p: *const c_void, len: usize) -> Result<&'a [u8], Errno> {
    if len > CM_DATA_MAX {
        return Err(Errno::EINVAL);
    }
    // SAFETY: forwarded contract.
    unsafe { bytes(p, len) }.ok_or(Errno::EINVAL)
}

/// `fi_getname`: the endpoint's address in the domain's format (a 16-byte
/// `sockaddr_in` whose `sin_zero` carries the endpoint id, or the FI_ADDR_STR text);
/// -FI_ETOOSMALL with the size needed in `*addrlen` when the buffer is short.
unsafe extern "C" fn getname(
    fid: *mut sys::fid,
    addr_p: *mut c_void,
    addrlen: *mut usize,
) -> c_int {
    // SAFETY: NULL or a fid.
    let e = arg!(unsafe { object::<EpFid>(fid) });
    if addrlen.is_null() {
        return neg(Errno::EINVAL);
    }
    // SAFETY: checked non-NULL.
    if addr_p.is_null() && unsafe { addrlen.read_unaligned() } > 0 {
        return neg(Errno::EINVAL);
    }
    let a = arg!(e.at.domain().with(|d| d.ep_addr(e.at.handle)));
    let data = arg!(raw_addr(e.at.domain().addr_format, &a));
    // SAFETY: checked above, or the application's buffer of `*addrlen` bytes.
    ret(unsafe { crate::av::give(&data, addr_p, addrlen) })
}

/// `fi_setname` of an active endpoint: its address is its domain's port and its id,
/// fixed when it opened, so only that address is accepted (0); any other -FI_EINVAL.
unsafe extern "C" fn setname(fid: *mut sys::fid, addr: *mut c_void, len: usize) -> c_int {
    // SAFETY: NULL or a fid.
    let e = arg!(unsafe { object::<EpFid>(fid) });
    // SAFETY: `addr` holds `len` bytes (contract).
    let Some(b) = (unsafe { bytes(addr, len) }) else {
        return neg(Errno::EINVAL);
    };
    let want = arg!(parse_addr(e.at.domain().addr_format, b));
    let have = arg!(e.at.domain().with(|d| d.ep_addr(e.at.handle)));
    if want == have { 0 } else { neg(Errno::EINVAL) }
}

/// `fi_getpeer`: the connected peer's address; -FI_ENOTCONN before it is known,
/// -FI_ENOSYS for connectionless endpoints (they have no peer).
pub(super) unsafe extern "C" fn getpeer(
    p: *mut sys::fid_ep,
    addr: *mut c_void,
    addrlen: *mut usize,
) -> c_int {
    // SAFETY: forwarded contract.
    let e = arg!(unsafe { ep(p) });
    if !e.msg {
        return neg(Errno::ENOSYS);
    }
    if addrlen.is_null() {
        return neg(Errno::EINVAL);
    }
    // SAFETY: checked non-NULL.
    if addr.is_null() && unsafe { addrlen.read_unaligned() } > 0 {
        return neg(Errno::EINVAL);
    }
    let a = arg!(e.at.domain().with(|d| d.getpeer(e.at.handle)));
    let data = arg!(raw_addr(e.at.domain().addr_format, &a));
    // SAFETY: checked above, or the application's buffer of `*addrlen` bytes.
    ret(unsafe { crate::av::give(&data, addr, addrlen) })
}

/// `fi_connect` to the passive endpoint at `addr` with `param` as CM data (enables
/// the endpoint); FI_CONNECTED or an error entry follows on the bound EQ.
/// -FI_ENOEQ without one, -FI_EISCONN after an earlier connect or accept, -FI_EINVAL
/// for an endpoint that is not FI_EP_MSG or more than FI_OPT_CM_DATA_SIZE bytes.
pub(super) unsafe extern "C" fn connect(
    p: *mut sys::fid_ep,
    addr: *const c_void,
    param: *const c_void,
    len: usize,
) -> c_int {
    // SAFETY: forwarded contract.
    let e = arg!(unsafe { ep(p) });
    if !e.msg || e.is_alias() {
        return neg(Errno::EINVAL);
    }
    // SAFETY: `addr` is an address of the domain's format (contract).
    let dest = arg!(unsafe { read_addr(e.at.domain().addr_format, addr) });
    // SAFETY: `param` holds `len` bytes (contract).
    let data = arg!(unsafe { cm_data(param, len) });
    ret(e.at.domain().control(|st| {
        st.core.connect(e.at.handle, dest, data)?;
        st.progress();
        Ok(())
    }))
}

/// `fi_listen` on an active endpoint: -FI_EINVAL (see [`super::pep`]).
unsafe extern "C" fn listen(_pep: *mut sys::fid_pep) -> c_int {
    neg(Errno::EINVAL)
}

/// `fi_accept` of the request the endpoint was opened for (its info's `handle`), with
/// `param` as CM data (enables the endpoint); FI_CONNECTED follows once the connector
/// answers. -FI_EINVAL for an endpoint opened without a request (or one already
/// accepted) or data beyond FI_OPT_CM_DATA_SIZE; -FI_ENOEQ without a bound EQ.
pub(super) unsafe extern "C" fn accept(
    p: *mut sys::fid_ep,
    param: *const c_void,
    len: usize,
) -> c_int {
    // SAFETY: forwarded contract.
    let e = arg!(unsafe { ep(p) });
    if !e.msg || e.is_alias() {
        return neg(Errno::EINVAL);
    }
    // SAFETY: `param` holds `len` bytes (contract).
    let data = arg!(unsafe { cm_data(param, len) });
    let mut g = e.connreq.lock().unwrap_or_else(|x| x.into_inner());
    let Some((pep, req)) = g.as_ref() else {
        return neg(Errno::EINVAL);
    };
    // Checked before the request leaves the backlog, so a refusal keeps it there.
    if e.eq.load(std::sync::atomic::Ordering::Acquire).is_null() {
        return neg(Errno::ENOEQ);
    }
    let state = arg!(e.at.domain().with(|d| Ok(d.conn(e.at.handle)?.state())));
    if state != ofi_nostd::cm::ConnState::Idle {
        return neg(Errno::EISCONN);
    }
    let (peer, conn_id) = arg!(pep.with(|d, h| d.with(|c| c.pep_take(h, *req))));
    *g = None;
    drop(g);
    ret(e.at.domain().control(|st| {
        st.core.accept(e.at.handle, peer, conn_id, data)?;
        st.progress();
        Ok(())
    }))
}

/// `fi_reject` through an active endpoint: -FI_EINVAL (see [`super::pep`]).
unsafe extern "C" fn reject(
    _pep: *mut sys::fid_pep,
    _handle: sys::fid_t,
    _param: *const c_void,
    _len: usize,
) -> c_int {
    neg(Errno::EINVAL)
}

/// `fi_shutdown`: no new operations; the peer gets FI_SHUTDOWN once it acknowledged
/// everything sent. -FI_ENOTCONN when not connected, -FI_ENOSYS for connectionless
/// endpoints.
pub(super) unsafe extern "C" fn shutdown(p: *mut sys::fid_ep, _flags: u64) -> c_int {
    // SAFETY: forwarded contract.
    let e = arg!(unsafe { ep(p) });
    if !e.msg {
        return neg(Errno::ENOSYS);
    }
    ret(e.at.domain().control(|st| {
        st.core.shutdown(e.at.handle)?;
        st.progress();
        Ok(())
    }))
}

/// `fi_join`: -FI_ENOSYS (no multicast).
pub(super) unsafe extern "C" fn join(
    _ep: *mut sys::fid_ep,
    _addr: *const c_void,
    _flags: u64,
    _mc: *mut *mut sys::fid_mc,
    _context: *mut c_void,
) -> c_int {
    neg(Errno::ENOSYS)
}

/// Runs a pass on each domain of the FI_EP_MSG endpoints and passive endpoints bound
/// to `eq` and posts the connection events they owe to the EQs they name.
pub(crate) fn pump(eq: &EqFid) {
    // References, not pointers: a passive endpoint or endpoint may close on another
    // thread while this pass runs; its domain then closes with the last reference.
    let mut doms = eq.eps.msg_domains();
    doms.extend(eq.peps.domains());
    doms.sort_by_key(|d| d.ptr());
    doms.dedup_by_key(|d| d.ptr());
    for dom in doms {
        let d = dom.ptr();
        let events = dom
            .control(|st| {
                st.progress();
                let mut v = Vec::new();
                while let Some(ev) = st.core.cm_event() {
                    v.push(ev);
                }
                Ok(v)
            })
            .unwrap_or_default();
        for ev in events {
            deliver(d, ev);
        }
    }
}

/// Posts one event of domain `d` to the EQ its object is bound to.
fn deliver(d: *const DomainFid, ev: CmEvent<Heap>) {
    let Some(token) = ev.eq else {
        return;
    };
    // SAFETY: the token is the address of the EqFid the object was bound to
    // (fi_ep_bind / fi_pep_bind), which cannot close while bound.
    let q = unsafe { &*(token as *const EqFid) };
    let r = match ev.fid {
        CmFid::Pep(h) => {
            let Some((fid, pep)) = q.peps.find(d, h) else {
                return;
            };
            let CmEventKind::ConnReq { req, from, data } = ev.kind else {
                return;
            };
            // SAFETY: found in the EQ's list, so open.
            let info = match unsafe { &*pep }.connreq_info(req, from) {
                Ok(i) => i,
                Err(_) => return,
            };
            let r = q.post(|x| {
                let cm = EqCmEntry::new(fid, info as u64, &data)?;
                x.post(EqEvent::CONNREQ, EqPayload::Cm(cm))
            });
            if r.is_err() {
                // Not queued (an overrun EQ): nobody will read the info.
                // SAFETY: built by `connreq_info` just now, handed to no one.
                unsafe { crate::sys::fi_freeinfo(info) };
            }
            r
        }
        CmFid::Ep(h) => {
            let Some((fid, context)) = q.eps.find(d, h) else {
                return;
            };
            match ev.kind {
                CmEventKind::Connected(data) => q.post(|x| {
                    let cm = EqCmEntry::new(fid, 0, &data)?;
                    x.post(EqEvent::CONNECTED, EqPayload::Cm(cm))
                }),
                CmEventKind::Shutdown => q.post(|x| {
                    let cm = EqCmEntry::new(fid, 0, &[])?;
                    x.post(EqEvent::SHUTDOWN, EqPayload::Cm(cm))
                }),
                CmEventKind::Error { err, data } => q.post(|x| {
                    let entry = EqErrEntry {
                        err_data: EqErrData::new(&data)?,
                        ..EqErrEntry::new(fid, context, err)
                    };
                    x.post_err(&entry)
                }),
                CmEventKind::ConnReq { .. } => return,
            }
        }
    };
    // An overrun EQ reports itself to its reader (-FI_EOVERRUN).
    let _ = r;
}
