//! `struct fid_cntr`: counters (fi_cntr(3)).

use std::ffi::{c_int, c_void};

use ofi_nostd::Errno;
use ofi_nostd::cntr::{Cntr, CntrAttr, CntrEvents};
use ofi_nostd::domain::CntrHandle;
use ofi_nostd::eq::WaitObj;
use ofi_nostd::info::fi_version;
use ofi_nostd::time::Instant;

use crate::domain::{DomainFid, InDomain, Wake};
use crate::fid::{FidObject, fi_ops_control, object, open_into};
use crate::sys;
use crate::util::{arg, ret};
use crate::wait::{Waitable, Waiter, control};

/// An open counter.
#[repr(C)]
pub struct CntrFid {
    c: sys::fid_cntr,
    /// The domain it was opened on, and its core handle there.
    pub(crate) at: InDomain<CntrHandle>,
    wait: Waiter,
}

static CNTR_FI_OPS: sys::fi_ops = fi_ops_control(close, control::<CntrFid>);

static CNTR_OPS: sys::fi_ops_cntr = sys::fi_ops_cntr {
    size: size_of::<sys::fi_ops_cntr>(),
    read: Some(read),
    readerr: Some(readerr),
    add: Some(add),
    set: Some(set),
    wait: Some(wait),
    adderr: Some(adderr),
    seterr: Some(seterr),
};

// SAFETY: #[repr(C)] with the fid_cntr (fid first) as first field; only `open` makes
// fids with this class and ops.
unsafe impl FidObject for CntrFid {
    const CLASS: u32 = sys::FI_CLASS_CNTR;
    fn fi_ops() -> *const sys::fi_ops {
        &raw const CNTR_FI_OPS
    }
}

impl Waitable for CntrFid {
    fn waiter(&self) -> &Waiter {
        &self.wait
    }
}

impl CntrFid {
    /// Runs `f` on the core counter for a data-path call (see [`crate::lock`]).
    fn with<R>(&self, f: impl FnOnce(&mut Cntr) -> Result<R, Errno>) -> Result<R, Errno> {
        self.at.domain().data(|st| {
            let r = f(st.core.cntr_mut(self.at.handle)?);
            st.wake();
            r
        })
    }

    /// Runs progress, then `f` on the core counter (reads: with manual progress,
    /// reading a counter is how an application that only uses counters moves data).
    fn progress_with<R>(&self, f: impl FnOnce(&mut Cntr) -> Result<R, Errno>) -> Result<R, Errno> {
        self.at.domain().data(|st| {
            st.progress();
            f(st.core.cntr_mut(self.at.handle)?)
        })
    }
}

/// Runs `f` on the counter behind `p`.
///
/// # Safety
///
/// As [`object`].
unsafe fn with_cntr<R>(
    p: *const sys::fid_cntr,
    f: impl FnOnce(&mut Cntr) -> Result<R, Errno>,
) -> Result<R, Errno> {
    // SAFETY: forwarded contract; the fid is the first field.
    unsafe { object::<CntrFid>(p.cast()) }?.with(f)
}

/// `enum fi_cntr_events` value 1 (libfabric 2.0's FI_CNTR_EVENTS_BYTES).
const FI_CNTR_EVENTS_BYTES: sys::fi_cntr_events = 1;

/// `fi_cntr_open`.
///
/// # Safety
///
/// Called through the application's `fi_cntr_open` with valid or NULL pointers.
pub unsafe extern "C" fn open(
    domain: *mut sys::fid_domain,
    attr: *mut sys::fi_cntr_attr,
    cntr: *mut *mut sys::fid_cntr,
    context: *mut c_void,
) -> c_int {
    let make = || {
        // SAFETY: forwarded contract.
        let d = unsafe { DomainFid::from_c(domain) }?;
        // SAFETY: NULL or a valid attribute structure (application's contract).
        let a = unsafe { attr.as_ref() }.ok_or(Errno::EINVAL)?;
        // FI_CNTR_EVENTS_BYTES (2.0: counting bytes, not completions) is not done; under
        // 1.x the value names nothing (-FI_EINVAL below).
        if a.events == FI_CNTR_EVENTS_BYTES && d.api_version() >= fi_version(2, 0) {
            return Err(Errno::ENOSYS);
        }
        let attr = CntrAttr {
            events: CntrEvents::from_raw(a.events as i32)?,
            wait_obj: WaitObj::from_raw(a.wait_obj as i32)?,
            wait_set: a.wait_set as u64,
            flags: a.flags,
        };
        attr.validate()?;
        let wait = Waiter::new(attr.wait_obj, Some(d.link_fd), attr.wait_set)?;
        let handle = d.control(|st| {
            let h = st.core.cntr_open(&attr, context as u64)?;
            if let Some(w) = wait.fd() {
                st.add_wake(Wake::Cntr(h), crate::wait::event_fd(w));
            }
            Ok(h)
        })?;
        Ok(CntrFid {
            c: sys::fid_cntr {
                fid: CntrFid::header(context),
                ops: (&raw const CNTR_OPS).cast_mut(),
            },
            at: InDomain::new(d, handle),
            wait,
        })
    };
    // SAFETY: NULL or writable (application's contract); a wait set's member joins it.
    unsafe { crate::wait::join::<CntrFid, _>(cntr, open_into(cntr, make)) }
}

/// `fi_close(cntr)`: -FI_EBUSY while bound.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        crate::fid::close::<CntrFid>(fid, |c| {
            c.at.domain().control(|st| {
                st.core.cntr_close(c.at.handle)?;
                st.wakes.remove(Wake::Cntr(c.at.handle));
                Ok(())
            })
        })
    }
}

/// `fi_cntr_read` (0 for a pointer that is not a counter: the call has no error
/// return).
unsafe extern "C" fn read(cntr: *mut sys::fid_cntr) -> u64 {
    // SAFETY: forwarded contract.
    match unsafe { object::<CntrFid>(cntr.cast()) } {
        Ok(c) => c.progress_with(|k| Ok(k.read())).unwrap_or(0),
        Err(_) => 0,
    }
}

/// `fi_cntr_readerr` (0 for a pointer that is not a counter).
unsafe extern "C" fn readerr(cntr: *mut sys::fid_cntr) -> u64 {
    // SAFETY: forwarded contract.
    match unsafe { object::<CntrFid>(cntr.cast()) } {
        Ok(c) => c.progress_with(|k| Ok(k.readerr())).unwrap_or(0),
        Err(_) => 0,
    }
}

/// `fi_cntr_add`.
unsafe extern "C" fn add(cntr: *mut sys::fid_cntr, value: u64) -> c_int {
    // SAFETY: forwarded contract.
    ret(unsafe { with_cntr(cntr, |c| c.add(value)) })
}

/// `fi_cntr_set`.
unsafe extern "C" fn set(cntr: *mut sys::fid_cntr, value: u64) -> c_int {
    // SAFETY: forwarded contract.
    ret(unsafe { with_cntr(cntr, |c| c.set(value)) })
}

/// `fi_cntr_adderr`.
unsafe extern "C" fn adderr(cntr: *mut sys::fid_cntr, value: u64) -> c_int {
    // SAFETY: forwarded contract.
    ret(unsafe { with_cntr(cntr, |c| c.adderr(value)) })
}

/// `fi_cntr_seterr`.
unsafe extern "C" fn seterr(cntr: *mut sys::fid_cntr, value: u64) -> c_int {
    // SAFETY: forwarded contract.
    ret(unsafe { with_cntr(cntr, |c| c.seterr(value)) })
}

/// `fi_cntr_wait`: until the counter reaches `threshold` (0), its error value changes
/// (-FI_EAVAIL) or `timeout` ms pass (-FI_ETIMEDOUT), driving progress meanwhile;
/// FI_WAIT_FD / FI_WAIT_UNSPEC sleep on the fd set between passes, FI_WAIT_YIELD and
/// FI_WAIT_NONE poll (fi_cntr(3) calls the wait invalid without a wait object; it
/// polls, as the sockets and psm2 providers do). -FI_ENOSYS for a wait-set member.
unsafe extern "C" fn wait(cntr: *mut sys::fid_cntr, threshold: u64, timeout: c_int) -> c_int {
    // SAFETY: forwarded contract.
    let c = arg!(unsafe { object::<CntrFid>(cntr.cast()) });
    let w = arg!(c.with(|k| k.wait_begin(threshold, None)));
    // One pass: Ok(Some) reached, Ok(None) not yet (armed), Err.
    let step = |timer: &mut Option<std::time::Duration>| {
        c.at.domain().data(|st| {
            st.progress();
            c.wait.drain();
            let k = st.core.cntr_mut(c.at.handle)?;
            if k.reached(&w, Instant::ZERO)? {
                return Ok(Some(()));
            }
            k.arm(&w);
            st.note_wait();
            *timer = st.next_timer();
            Ok(None)
        })
    };
    ret(c.wait.block(timeout, Errno::ETIMEDOUT, step))
}

/// fi_trywait for a counter (`Err` if `f` is not one of our counters): runs progress,
/// then -FI_EAGAIN when the counter changed since it was last read; otherwise arms the
/// wake-up and the timer for the core's next deadline.
///
/// # Safety
///
/// `f` is NULL or a fid.
pub unsafe fn trywait(f: *mut sys::fid) -> Result<Result<(), Errno>, Errno> {
    // SAFETY: forwarded contract.
    let c = unsafe { object::<CntrFid>(f) }?;
    Ok(c.at.domain().data(|st| {
        st.progress();
        c.wait.drain();
        st.core.cntr_mut(c.at.handle)?.trywait()?;
        st.note_wait();
        c.wait.armed(st.next_timer());
        Ok(())
    }))
}
