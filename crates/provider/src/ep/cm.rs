//! Connection management (fi_cm(3)) of connectionless endpoints: `fi_getname`, and
//! -FI_ENOSYS for what needs a connection.

use std::ffi::{c_int, c_void};

use ofi_nostd::Errno;
use ofi_nostd::info::AddrFormat;

use super::{EpFid, ep};
use crate::fid::object;
use crate::sys;
use crate::util::{arg, neg, ret};

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
    let mut s = [0u8; 128];
    let data: &[u8] = if e.at.domain().addr_format == AddrFormat::STR {
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
