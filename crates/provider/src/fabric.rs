//! `struct fid_fabric`: the fabric and its ops (fi_fabric(3)).

use std::ffi::{c_int, c_void};

use ofi_nostd::Errno;
use ofi_nostd::fabric::Fabric;
use spin::Mutex;

use crate::fid::{FidObject, fi_ops, object, open_into};
use crate::sys;
use crate::util::neg;
use hosted::storage::Heap;

/// Event queues one fabric can hold.
pub const MAX_EQS: usize = 256;

/// An open fabric: the C `fid_fabric` and the core's fabric behind its lock.
#[repr(C)]
pub struct FabricFid {
    c: sys::fid_fabric,
    /// The private domains of passive endpoints, by their address (IPv4, port): a
    /// domain opened at one of them (an FI_CONNREQ info's `src_addr`, or an info whose
    /// `handle` was a passive endpoint) is that domain, shared (see
    /// [`crate::domain::open`]), so accepted endpoints answer from the listener's port.
    pub(crate) listeners: std::sync::Mutex<Vec<([u8; 4], u16, usize)>>,
    /// The core fabric (its event queues live here).
    pub inner: Mutex<Fabric<Heap>>,
}

static FABRIC_FI_OPS: sys::fi_ops = fi_ops(close);

static FABRIC_OPS: sys::fi_ops_fabric = sys::fi_ops_fabric {
    size: size_of::<sys::fi_ops_fabric>(),
    domain: Some(crate::domain::open),
    passive_ep: Some(passive_ep),
    eq_open: Some(crate::eq::open),
    wait_open: Some(crate::waitset::open),
    trywait: Some(trywait),
    domain2: Some(domain2),
};

// SAFETY: #[repr(C)] with the fid_fabric (whose first field is the fid) first; only
// `open` makes fids with these class and ops.
unsafe impl FidObject for FabricFid {
    const CLASS: u32 = sys::FI_CLASS_FABRIC;
    fn fi_ops() -> *const sys::fi_ops {
        &raw const FABRIC_FI_OPS
    }
}

impl FabricFid {
    /// The registry of passive endpoints' domains, locked.
    pub(crate) fn listeners(&self) -> std::sync::MutexGuard<'_, Vec<([u8; 4], u16, usize)>> {
        self.listeners.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The API version the application asked for (libfabric stores it in the fid after
    /// `fabric` returns).
    pub fn api_version(&self) -> u32 {
        let p = &raw const self.c.api_version;
        // SAFETY: a field of a live object; libfabric writes it once, before the
        // application gets the fabric.
        unsafe { p.read_volatile() }
    }

    /// The fabric behind a `struct fid_fabric *`; -FI_EINVAL if it is not ours.
    ///
    /// # Safety
    ///
    /// As [`object`].
    pub unsafe fn from_c<'a>(p: *const sys::fid_fabric) -> Result<&'a FabricFid, Errno> {
        // SAFETY: forwarded contract; the fid is the first field.
        unsafe { object::<FabricFid>(p.cast()) }
    }
}

/// `fabric` of `struct fi_provider`: opens the fabric `attr` names (as getinfo
/// returned it). Only the last name of a layered `prov_name` ("x;nostd") is ours.
///
/// # Safety
///
/// Called by libfabric with valid or NULL pointers.
pub unsafe extern "C" fn open(
    attr: *mut sys::fi_fabric_attr,
    fabric: *mut *mut sys::fid_fabric,
    context: *mut c_void,
) -> c_int {
    let make = || {
        // SAFETY: NULL or attributes from libfabric, names NULL or NUL-terminated.
        let a = unsafe { attr.as_ref() }.ok_or(Errno::EINVAL)?;
        // SAFETY: as above.
        let mut a = unsafe { crate::info::fabric_from_c(a) }.ok_or(Errno::EINVAL)?;
        if let Some((_, last)) = a.prov_name.clone().rsplit_once(';') {
            a.prov_name = ofi_nostd::info::name(last);
        }
        let f = Fabric::open(&a, context as u64, Heap, MAX_EQS)?;
        Ok(FabricFid {
            c: sys::fid_fabric {
                fid: FabricFid::header(context),
                ops: (&raw const FABRIC_OPS).cast_mut(),
                api_version: a.api_version,
            },
            inner: Mutex::new(f),
            listeners: Default::default(),
        })
    };
    // SAFETY: NULL or writable (libfabric's contract).
    unsafe { open_into(fabric, make) }
}

/// `fi_close(fabric)`: -FI_EBUSY while a domain or an event queue is open.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { crate::fid::close::<FabricFid>(fid, |f| f.inner.lock().check_close()) }
}

/// `fi_passive_ep`: see [`crate::ep::pep::open`].
unsafe extern "C" fn passive_ep(
    fabric: *mut sys::fid_fabric,
    info: *mut sys::fi_info,
    pep: *mut *mut sys::fid_pep,
    context: *mut c_void,
) -> c_int {
    // SAFETY: forwarded from the application.
    unsafe { crate::ep::pep::open(fabric, info, pep, context) }
}

/// `fi_domain2`: `flags` 0 is `fi_domain`; FI_PEER and other flags are not supported.
unsafe extern "C" fn domain2(
    fabric: *mut sys::fid_fabric,
    info: *mut sys::fi_info,
    dom: *mut *mut sys::fid_domain,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    if flags != 0 {
        return neg(Errno::ENOSYS);
    }
    // SAFETY: forwarded from the application.
    unsafe { crate::domain::open(fabric, info, dom, context) }
}

/// `fi_trywait`: asks each CQ, EQ, counter and wait set whether blocking is safe (-FI_EAGAIN: read
/// first). Other fids are -FI_EINVAL.
unsafe extern "C" fn trywait(
    fabric: *mut sys::fid_fabric,
    fids: *mut *mut sys::fid,
    count: c_int,
) -> c_int {
    // SAFETY: forwarded contract.
    if let Err(e) = unsafe { FabricFid::from_c(fabric) } {
        return neg(e);
    }
    let Ok(count) = usize::try_from(count) else {
        return neg(Errno::EINVAL);
    };
    if count > 0 && fids.is_null() {
        return neg(Errno::EINVAL);
    }
    for i in 0..count {
        // SAFETY: `fids` holds `count` pointers (application's contract).
        let f = unsafe { fids.add(i).read() };
        // SAFETY: NULL or a fid (application's contract).
        if let Err(e) = unsafe { crate::wait::trywait(f) } {
            return neg(e);
        }
    }
    0
}
