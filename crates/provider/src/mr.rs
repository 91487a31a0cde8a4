//! `struct fid_mr`: memory registration (fi_mr(3)), the `mr` ops of a domain.

use std::ffi::{c_int, c_void};

use ofi_nostd::Errno;
use ofi_nostd::domain::MR_IOV_LIMIT;
use ofi_nostd::flags::Flags;
use ofi_nostd::mem::IoVec;
use ofi_nostd::mr::{HmemIface, MrAttr, MrHandle};

use crate::cntr::CntrFid;
use crate::domain::{DomainFid, InDomain};
use crate::fid::{FidObject, no_ops_open, no_ops_set, no_tostr, object, open_into};
use crate::sys;
use crate::util::{arg, bytes, neg, ret};

/// A registered memory region.
#[repr(C)]
pub struct MrFid {
    c: sys::fid_mr,
    /// The domain it was opened on, and its core handle there.
    pub(crate) at: InDomain<MrHandle>,
}

static MR_FI_OPS: sys::fi_ops = sys::fi_ops {
    size: size_of::<sys::fi_ops>(),
    close: Some(close),
    bind: Some(bind),
    control: Some(control),
    ops_open: Some(no_ops_open),
    tostr: Some(no_tostr),
    ops_set: Some(no_ops_set),
};

static DOMAIN_MR_OPS: sys::fi_ops_mr = sys::fi_ops_mr {
    size: size_of::<sys::fi_ops_mr>(),
    reg: Some(reg),
    regv: Some(regv),
    regattr: Some(regattr),
};

/// The `mr` ops table of every domain.
pub fn domain_mr_ops() -> *mut sys::fi_ops_mr {
    (&raw const DOMAIN_MR_OPS).cast_mut()
}

// SAFETY: #[repr(C)] with the fid_mr (fid first) as first field; only `register` makes
// fids with this class and ops.
unsafe impl FidObject for MrFid {
    const CLASS: u32 = sys::FI_CLASS_MR;
    fn fi_ops() -> *const sys::fi_ops {
        &raw const MR_FI_OPS
    }
}

impl MrFid {}

/// Registers `attr` on the domain whose fid is `fid` and hands out the region.
///
/// # Safety
///
/// `fid` is NULL or a fid; `mr` is NULL or writable.
unsafe fn register(
    fid: *mut sys::fid,
    attr: &MrAttr<'_>,
    flags: u64,
    mr: *mut *mut sys::fid_mr,
) -> c_int {
    let make = || {
        // SAFETY: forwarded contract.
        let d = unsafe { object::<DomainFid>(fid) }?;
        let (handle, key, desc) = d.with(|core| {
            let h = core.mr_reg(attr, Flags::from_bits_retain(flags))?;
            let t = core.mrs();
            Ok((h, t.key(h)?, t.desc(h)?))
        })?;
        Ok(MrFid {
            c: sys::fid_mr {
                fid: MrFid::header(attr.context as *mut c_void),
                mem_desc: desc as *mut c_void,
                key,
            },
            at: InDomain::new(d, handle),
        })
    };
    // SAFETY: forwarded contract.
    unsafe { open_into(mr, make) }
}

/// `fi_mr_reg`: one buffer.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn reg(
    fid: *mut sys::fid,
    buf: *const c_void,
    len: usize,
    access: u64,
    offset: u64,
    requested_key: u64,
    flags: u64,
    mr: *mut *mut sys::fid_mr,
    context: *mut c_void,
) -> c_int {
    let iov = [IoVec::new(buf as u64, len)];
    let attr = MrAttr {
        mr_iov: &iov,
        access: Flags::from_bits_retain(access),
        offset,
        requested_key,
        context: context as u64,
        ..MrAttr::default()
    };
    // SAFETY: forwarded contract.
    unsafe { register(fid, &attr, flags, mr) }
}

/// The iovs of a C `struct iovec` array (-FI_EINVAL for NULL with a count or more than
/// the domain takes).
///
/// # Safety
///
/// `iov` is NULL or holds `count` entries.
unsafe fn iovs(iov: *const sys::iovec, count: usize) -> Result<Vec<IoVec>, Errno> {
    if count > MR_IOV_LIMIT {
        return Err(Errno::EINVAL);
    }
    if count > 0 && iov.is_null() {
        return Err(Errno::EINVAL);
    }
    Ok((0..count)
        .map(|i| {
            // SAFETY: `iov` is non-NULL and holds `count` entries (contract).
            let v = unsafe { iov.add(i).read_unaligned() };
            IoVec::new(v.iov_base as u64, v.iov_len)
        })
        .collect())
}

/// `fi_mr_regv`: several buffers as one region.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn regv(
    fid: *mut sys::fid,
    iov: *const sys::iovec,
    count: usize,
    access: u64,
    offset: u64,
    requested_key: u64,
    flags: u64,
    mr: *mut *mut sys::fid_mr,
    context: *mut c_void,
) -> c_int {
    // SAFETY: forwarded contract.
    let v = arg!(unsafe { iovs(iov, count) });
    let attr = MrAttr {
        mr_iov: &v,
        access: Flags::from_bits_retain(access),
        offset,
        requested_key,
        context: context as u64,
        ..MrAttr::default()
    };
    // SAFETY: forwarded contract.
    unsafe { register(fid, &attr, flags, mr) }
}

/// `fi_mr_regattr`.
unsafe extern "C" fn regattr(
    fid: *mut sys::fid,
    attr: *const sys::fi_mr_attr,
    flags: u64,
    mr: *mut *mut sys::fid_mr,
) -> c_int {
    // SAFETY: NULL or a valid attribute structure (application's contract).
    let Some(a) = (unsafe { attr.as_ref() }) else {
        return neg(Errno::EINVAL);
    };
    // SAFETY: `mr_iov` holds `iov_count` entries (contract).
    let v = arg!(unsafe { iovs(a.mr_iov, a.iov_count) });
    // SAFETY: `auth_key` holds `auth_key_size` bytes (contract).
    let Some(auth_key) = (unsafe { bytes(a.auth_key.cast_const().cast(), a.auth_key_size) }) else {
        return neg(Errno::EINVAL);
    };
    let iface = arg!(HmemIface::from_raw(a.iface));
    let attr = MrAttr {
        mr_iov: &v,
        access: Flags::from_bits_retain(a.access),
        offset: a.offset,
        requested_key: a.requested_key,
        context: a.context as u64,
        auth_key,
        iface,
        // SAFETY: every member of the union is plain data; `reserved` spans it.
        device: unsafe { a.device.reserved },
    };
    // SAFETY: forwarded contract.
    unsafe { register(fid, &attr, flags, mr) }
}

/// `fi_close(mr)`: -FI_EBUSY while bound.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        crate::fid::close::<MrFid>(fid, |m| {
            m.at.domain().with(|d| d.mrs_mut().close(m.at.handle))
        })
    }
}

/// `fi_control(mr)`: FI_ENABLE (`fi_mr_enable`) and FI_REFRESH (`fi_mr_refresh`,
/// -FI_ENOSYS); nothing else.
unsafe extern "C" fn control(fid: *mut sys::fid, command: c_int, _arg: *mut c_void) -> c_int {
    // SAFETY: NULL or a fid (fi_control's contract).
    let m = arg!(unsafe { object::<MrFid>(fid) });
    match u32::try_from(command) {
        Ok(sys::FI_ENABLE) => ret(m.at.domain().with(|d| d.mrs_mut().enable(m.at.handle))),
        Ok(sys::FI_REFRESH) => neg(Errno::ENOSYS),
        _ => neg(Errno::ENOSYS),
    }
}

/// `fi_mr_bind`: a counter of the same domain (FI_REMOTE_WRITE / FI_REMOTE_READ) counts
/// the remote accesses to the region through endpoints with FI_RMA_EVENT. Endpoint
/// bindings (FI_MR_ENDPOINT, never required by this provider) are -FI_EINVAL.
unsafe extern "C" fn bind(fid: *mut sys::fid, bfid: *mut sys::fid, flags: u64) -> c_int {
    // SAFETY: NULL or a fid (contract).
    let m = arg!(unsafe { object::<MrFid>(fid) });
    if bfid.is_null() {
        return neg(Errno::EINVAL);
    }
    // SAFETY: non-NULL, a fid of some object (application's contract).
    let class = unsafe { bfid.read_unaligned() }.fclass as u32;
    if class != sys::FI_CLASS_CNTR {
        return neg(Errno::EINVAL);
    }
    // SAFETY: a counter fid (its class said so).
    let c = arg!(unsafe { object::<CntrFid>(bfid) });
    if !std::ptr::eq(c.at.domain_ptr(), m.at.domain_ptr()) {
        return neg(Errno::EDOMAIN);
    }
    let flags = Flags::from_bits_retain(flags);
    ret(m
        .at
        .domain()
        .with(|d| d.mr_bind_cntr(m.at.handle, c.at.handle, flags)))
}
