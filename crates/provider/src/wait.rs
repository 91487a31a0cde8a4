//! Native wait objects (FI_WAIT_FD, and FI_WAIT_UNSPEC, which this provider serves the
//! same way): what `fi_control(FI_GETWAIT)` hands out and what the blocking reads sleep
//! on.
//!
//! Each CQ or counter with a wait object owns a [`WaitFd`] (the host runtime's
//! [`WaitObject`]): an epoll descriptor over
//!
//! - an eventfd the provider signals when the core says a waiter must wake (the
//!   condition armed by fi_trywait / sread / fi_cntr_wait holds, or fi_cq_signal);
//! - the data plane's descriptor (readable when frames arrived: with manual progress
//!   the waiter must wake to run progress), watched only while someone may sleep: during
//!   a blocking read or wait, and for good once the application calls fi_trywait or
//!   asks for the fd (FI_GETWAIT) — a watched socket costs every datagram's sender an
//!   epoll wake-up callback, which a busy-polling reader never needs (see
//!   `hosted::api::WaitSet`);
//! - a timerfd armed for the core's next timer (retransmissions, acknowledgements,
//!   handshake retries), so a waiter also wakes when only time moves things on.
//!
//! Event queues have no data plane and no timers: their `WaitFd` holds the eventfd
//! alone.

use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::time::Duration;

use hosted::runtime::WaitObject;
use ofi_nostd::Errno;
use ofi_nostd::eq::WaitObj;

use crate::fid::{FidObject, object, poll_until};
use crate::sys;
use crate::util::{neg, put, ret};
use crate::waitset::WaitSetFid;

/// The epoll set of one waitable object.
pub type WaitFd = WaitObject;

/// A wait object over a new eventfd, plus (for CQs and counters) the data plane's
/// descriptor `link` (open for the call; the set keeps a duplicate) and a timerfd.
pub fn open(link: Option<RawFd>) -> Result<WaitFd, Errno> {
    // SAFETY: the caller's descriptor is open for this call (the domain's data plane,
    // which outlives its CQs and counters); the set duplicates it.
    let link = link.map(|l| unsafe { BorrowedFd::borrow_raw(l) });
    WaitObject::new(link).map_err(|_| Errno::ENOMEM)
}

/// The eventfd of `w` that progress signals.
pub fn event_fd(w: &WaitFd) -> RawFd {
    w.event_fd().as_raw_fd()
}

/// Writes 1 to eventfd `fd` (readable until drained).
pub fn signal_fd(fd: RawFd) {
    let one = 1u64;
    // SAFETY: writes 8 bytes from `one` to an eventfd the caller keeps open.
    let _ = unsafe { libc::write(fd, (&raw const one).cast(), 8) };
}

/// Whether `fd` is readable now (no wait).
pub fn readable(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd; a zero timeout.
    unsafe { libc::poll(&mut p, 1, 0) == 1 }
}

/// Writes `fd` (as an `int`) to FI_GETWAIT's argument.
///
/// # Safety
///
/// `arg` is NULL or points to a writable `int`.
pub unsafe fn put_fd(arg: *mut libc::c_void, fd: RawFd) -> Result<(), Errno> {
    // SAFETY: forwarded contract.
    unsafe { crate::util::put(arg.cast::<libc::c_int>(), fd) }
}

/// The shortest timer a waiter arms: work that is due but did not move is retried soon,
/// never spun on.
const MIN_TIMER: Duration = Duration::from_micros(50);

/// The wait object of a CQ, counter or EQ: the kind the application asked for and, for
/// FI_WAIT_FD, FI_WAIT_UNSPEC and FI_WAIT_SET, the native fd set that serves it; with
/// FI_WAIT_SET, the wait set it joins once published ([`join`]) and leaves when it
/// closes (drops).
pub struct Waiter {
    obj: WaitObj,
    fd: Option<WaitFd>,
    set: Option<*const WaitSetFid>,
    /// The fid that joined `set` (NULL until [`join`]).
    joined: AtomicPtr<sys::fid>,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        let f = *self.joined.get_mut();
        if let Some(set) = self.set
            && !f.is_null()
        {
            // SAFETY: a wait set outlives its members (its fi_close is refused while
            // one is in it).
            unsafe { (*set).leave(f) };
        }
    }
}

impl Waiter {
    /// The wait object of an object opened with `obj`, over the data plane's descriptor
    /// `link` (CQs and counters; see [`open`]), in the wait set `wait_set` (the
    /// attribute's pointer) with FI_WAIT_SET (-FI_EINVAL unless it is one of ours).
    /// Mutex/cond pairs are -FI_ENOSYS; FI_WAIT_YIELD polls and FI_WAIT_NONE cannot
    /// block.
    pub fn new(obj: WaitObj, link: Option<RawFd>, wait_set: u64) -> Result<Waiter, Errno> {
        let mut set = None;
        let fd = match obj {
            WaitObj::None | WaitObj::Yield => None,
            WaitObj::Unspec | WaitObj::Fd => Some(open(link)?),
            WaitObj::Set => {
                // SAFETY: the attribute's wait_set is NULL or a fid (application's
                // contract); `object` checks it is a wait set of ours.
                set = Some(std::ptr::from_ref(unsafe {
                    WaitSetFid::from_attr(wait_set)
                }?));
                Some(open(link)?)
            }
            _ => return Err(Errno::ENOSYS),
        };
        Ok(Waiter {
            obj,
            fd,
            set,
            joined: AtomicPtr::new(std::ptr::null_mut()),
        })
    }

    /// The wait set this object is in, if any.
    fn set(&self) -> Option<&WaitSetFid> {
        // SAFETY: a wait set outlives its members (see `Drop`).
        self.set.map(|s| unsafe { &*s })
    }

    /// The native fd set, if there is one.
    pub fn fd(&self) -> Option<&WaitFd> {
        self.fd.as_ref()
    }

    /// Empties the fd set's eventfd, before a check that re-arms it.
    pub fn drain(&self) {
        if let Some(w) = &self.fd {
            w.drain();
        }
    }

    /// After a successful fi_trywait: the timer for the core's next deadline `timer`,
    /// and the data plane watched for good (the application polls the fd from now on).
    pub fn armed(&self, timer: Option<Duration>) {
        if let Some(w) = &self.fd {
            w.arm_timer(timer.map(|t| t.max(MIN_TIMER)));
            w.pin();
        }
    }

    /// The blocking calls (fi_cq_sread, fi_cntr_wait): `step` runs a pass and answers
    /// `Some` when the call is done, or `None` with the wait armed and the core's next
    /// timer in its argument. Between steps the fd set sleeps until frames, that timer, a
    /// signal or the timeout; FI_WAIT_YIELD polls. `expired` after `timeout_ms`
    /// (negative: never).
    pub fn block<R>(
        &self,
        timeout_ms: c_int,
        expired: Errno,
        mut step: impl FnMut(&mut Option<Duration>) -> Result<Option<R>, Errno>,
    ) -> Result<R, Errno> {
        let Some(w) = &self.fd else {
            return poll_until(timeout_ms, || step(&mut None).transpose()).unwrap_or(Err(expired));
        };
        let start = std::time::Instant::now();
        let limit = u64::try_from(timeout_ms).ok().map(Duration::from_millis);
        // The data plane is watched from the first sleep until the call returns.
        let mut sleeper = None;
        loop {
            let mut timer = None;
            if let Some(r) = step(&mut timer)? {
                return Ok(r);
            }
            let left = match limit {
                Some(l) => match l.checked_sub(start.elapsed()) {
                    Some(left) if !left.is_zero() => left,
                    _ => return Err(expired),
                },
                None => Duration::from_secs(1),
            };
            let nap = timer.map_or(left, |t| t.max(MIN_TIMER).min(left));
            w.arm_timer(timer.map(|t| t.max(MIN_TIMER)));
            if sleeper.is_none() {
                sleeper = w.sleeper();
            }
            w.wait(nap);
        }
    }

    /// FI_GETWAIT (the fd to poll, an `int`) and FI_GETWAITOBJ (`enum fi_wait_obj`);
    /// -FI_ENODATA without a native wait object, -FI_ENOSYS for other commands.
    ///
    /// # Safety
    ///
    /// `arg` is NULL or points to an `int` (FI_GETWAIT) / `enum fi_wait_obj`
    /// (FI_GETWAITOBJ).
    pub unsafe fn control(&self, cmd: c_int, arg: *mut c_void) -> Result<(), Errno> {
        if let Some(set) = self.set() {
            // A member's wait object is its set's (libfabric's util objects forward
            // there too).
            // SAFETY: forwarded contract (the same commands and arguments).
            return unsafe { crate::waitset::control_set(set, cmd, arg) };
        }
        let obj = arg.cast::<sys::fi_wait_obj>();
        match (u32::try_from(cmd), &self.fd) {
            // SAFETY: forwarded contract.
            (Ok(sys::FI_GETWAIT), Some(w)) => unsafe { put_fd(arg, w.fd().as_raw_fd()) },
            // SAFETY: forwarded contract.
            (Ok(sys::FI_GETWAITOBJ), Some(_)) => unsafe { put(obj, sys::fi_wait_obj_FI_WAIT_FD) },
            (Ok(sys::FI_GETWAITOBJ), None) if self.obj == WaitObj::None => Err(Errno::ENODATA),
            // SAFETY: forwarded contract.
            (Ok(sys::FI_GETWAITOBJ), None) => unsafe { put(obj, self.obj as sys::fi_wait_obj) },
            (Ok(sys::FI_GETWAIT), None) => Err(Errno::ENODATA),
            _ => Err(Errno::ENOSYS),
        }
    }
}

/// The end of a waitable object's open call: a member of a wait set joins it once its
/// fid is published at `*out`; if it cannot, the object is closed again and the call
/// fails.
///
/// # Safety
///
/// `rc` is what `open_into(out, ..)` returned for an object of class `T`.
pub unsafe fn join<T: Waitable, C>(out: *mut *mut C, rc: c_int) -> c_int {
    if rc != 0 {
        return rc;
    }
    // SAFETY: open_into wrote the published object's pointer.
    let f = unsafe { out.read() }.cast::<sys::fid>();
    // SAFETY: just published, of class T.
    let Ok(o) = (unsafe { object::<T>(f) }) else {
        return neg(Errno::EINVAL);
    };
    let w = o.waiter();
    let (Some(set), Some(fd)) = (w.set(), &w.fd) else {
        return 0;
    };
    match set.join(f, fd.fd()) {
        Ok(()) => {
            w.joined.store(f, Ordering::Release);
            0
        }
        Err(e) => {
            // SAFETY: our fid, never handed to the application.
            let _ = unsafe { (*(*f).ops).close.map(|c| c(f)) };
            // SAFETY: `out` is writable (open_into's contract).
            unsafe { out.write(std::ptr::null_mut()) };
            neg(e)
        }
    }
}

/// fi_trywait of one fid: a CQ, EQ, counter or wait set of ours (-FI_EINVAL for any
/// other fid); -FI_EAGAIN when it has something to read first.
///
/// # Safety
///
/// `f` is NULL or a fid.
pub unsafe fn trywait(f: *mut sys::fid) -> Result<(), Errno> {
    // SAFETY: each is NULL or a fid; the class decides which object it is.
    let r = unsafe {
        crate::cq::trywait(f)
            .or_else(|_| crate::eq::trywait(f))
            .or_else(|_| crate::cntr::trywait(f))
            .or_else(|_| object::<WaitSetFid>(f).map(WaitSetFid::trywait))
    };
    r.and_then(|inner| inner)
}

/// A fid with a [`Waiter`]: CQs, counters and EQs.
pub trait Waitable: FidObject {
    /// Its wait object.
    fn waiter(&self) -> &Waiter;
}

/// `fi_control` of a waitable object: [`Waiter::control`].
///
/// # Safety
///
/// `fid` is NULL or a fid; `arg` what fi_control(3) says for `cmd` (or NULL).
pub unsafe extern "C" fn control<T: Waitable>(
    fid: *mut sys::fid,
    cmd: c_int,
    arg: *mut c_void,
) -> c_int {
    // SAFETY: NULL or a fid (contract).
    match unsafe { object::<T>(fid) } {
        // SAFETY: forwarded contract.
        Ok(o) => ret(unsafe { o.waiter().control(cmd, arg) }),
        Err(e) => neg(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_and_drain() {
        let w = open(None).unwrap();
        let fd = w.fd().as_raw_fd();
        assert!(!readable(fd));
        w.signal();
        assert!(readable(fd));
        w.drain();
        assert!(!readable(fd));
        signal_fd(event_fd(&w));
        assert!(readable(fd));
    }
}
