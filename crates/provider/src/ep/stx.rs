//! `fi_stx_context`: shared transmit contexts over the core's [`ofi_nostd::ep::stx`].
//! Operations are posted to the endpoints bound to one; the context itself only
//! binds and closes (its `fi_ops_ep` is the endpoint's, which refuses a fid that is
//! not an endpoint with -FI_EINVAL).

use std::ffi::{c_int, c_void};

use hosted::storage::Heap;
use ofi_nostd::domain::StxHandle;

use super::args::ctx;
use crate::domain::{DomainFid, InDomain};
use crate::fid::{FidObject, fi_ops_control, no_control, open_into};
use crate::sys;

/// An open shared transmit context.
#[repr(C)]
pub struct StxFid {
    c: sys::fid_stx,
    /// The domain, and the context's core handle there.
    pub(crate) at: InDomain<StxHandle<Heap>>,
}

static STX_FI_OPS: sys::fi_ops = fi_ops_control(close, no_control);

// SAFETY: #[repr(C)] with the fid_stx (fid first) as first field; only `open` makes
// fids with this class and ops.
unsafe impl FidObject for StxFid {
    const CLASS: u32 = sys::FI_CLASS_STX_CTX;
    fn fi_ops() -> *const sys::fi_ops {
        &raw const STX_FI_OPS
    }
}

/// `fi_stx_context`: a shared transmit context with `attr` (NULL: the defaults).
///
/// # Safety
///
/// Called through the application's `fi_stx_context` with valid or NULL pointers.
pub unsafe extern "C" fn open(
    domain: *mut sys::fid_domain,
    attr: *mut sys::fi_tx_attr,
    out: *mut *mut sys::fid_stx,
    context: *mut c_void,
) -> c_int {
    let make = || {
        // SAFETY: forwarded contract.
        let d = unsafe { DomainFid::from_c(domain) }?;
        // SAFETY: NULL or the application's valid fi_tx_attr.
        let a = unsafe { attr.as_ref() }.map(crate::info::tx_from_c);
        let a = a.unwrap_or_default();
        let h = d.with(|core| core.stx_open(&a, ctx(context)))?;
        Ok(StxFid {
            c: sys::fid_stx {
                fid: StxFid::header(context),
                ops: (&raw const super::EP_OPS).cast_mut(),
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
        crate::fid::close::<StxFid>(fid, |s| s.at.domain().with(|d| d.stx_close(s.at.handle)))
    }
}
