//! `struct fid_wait`: wait sets (fi_poll(3)).
//!
//! A CQ, counter or EQ opened with FI_WAIT_SET and a wait set in its attributes keeps
//! its own native wait object (a [`crate::wait::WaitFd`], as for FI_WAIT_FD) and joins
//! the set once published. The set is one epoll descriptor over its members' epoll
//! descriptors (epoll sets nest), so any member's wake-up (an event, frames on the data
//! plane, the core's timer) makes the set readable. `fi_wait` and `fi_trywait` on the
//! set run each member's fi_trywait: -FI_EAGAIN from one means it has something to read
//! (fi_wait returns 0), success from all means every one is armed and sleeping is safe.
//!
//! Kinds: FI_WAIT_FD and FI_WAIT_UNSPEC hand out the epoll descriptor (FI_GETWAIT);
//! FI_WAIT_POLLFD hands out the members' descriptors as `struct fi_wait_pollfd` with a
//! change index; FI_WAIT_YIELD waits by polling and yielding. FI_WAIT_MUTEX_COND is
//! -FI_ENOSYS.
//!
//! The set's lock guards its member list only; no data-path call takes it. Lock order:
//! the set, then a member's domain or fabric (members join and leave holding neither).

use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hosted::runtime::EpollSet;
use ofi_nostd::Errno;
use ofi_nostd::eq::WaitObj;

use crate::fabric::FabricFid;
use crate::fid::{FidObject, fi_ops_control, object, open_into};
use crate::sys;
use crate::util::{arg, neg, put, ret};

/// The members of a wait set and the FI_WAIT_POLLFD change index.
#[derive(Default)]
struct Members {
    /// Each member's fid and the descriptor of its native wait object.
    list: Vec<(*mut sys::fid, RawFd)>,
    /// Incremented on every join and leave.
    change: u64,
}

/// An open wait set.
#[repr(C)]
pub struct WaitSetFid {
    c: sys::fid_wait,
    obj: WaitObj,
    /// The members' descriptors, for fi_wait and FI_GETWAIT (all kinds but yield).
    epoll: Option<EpollSet>,
    members: Mutex<Members>,
}

// SAFETY: the member fids are only passed to their own calls, which lock what they
// touch; the list is behind the set's mutex.
unsafe impl Send for WaitSetFid {}
// SAFETY: as above.
unsafe impl Sync for WaitSetFid {}

static WAIT_FI_OPS: sys::fi_ops = fi_ops_control(close, control);

static WAIT_OPS: sys::fi_ops_wait = sys::fi_ops_wait {
    size: size_of::<sys::fi_ops_wait>(),
    wait: Some(wait),
};

// SAFETY: #[repr(C)] with the fid_wait (fid first) as first field; only `open` makes
// fids with this class and ops.
unsafe impl FidObject for WaitSetFid {
    const CLASS: u32 = sys::FI_CLASS_WAIT;
    fn fi_ops() -> *const sys::fi_ops {
        &raw const WAIT_FI_OPS
    }
}

impl WaitSetFid {
    /// The wait set an attribute's `wait_set` names; -FI_EINVAL unless it is one of ours.
    ///
    /// # Safety
    ///
    /// `p` is NULL or a fid.
    pub unsafe fn from_attr<'a>(p: u64) -> Result<&'a WaitSetFid, Errno> {
        // SAFETY: forwarded contract.
        unsafe { object::<WaitSetFid>(p as usize as *const sys::fid) }
    }

    fn members(&self) -> MutexGuard<'_, Members> {
        self.members.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds the member `fid` whose native wait object polls as `fd`.
    pub fn join(&self, fid: *mut sys::fid, fd: BorrowedFd<'_>) -> Result<(), Errno> {
        let mut m = self.members();
        if let Some(e) = &self.epoll {
            e.add(fd).map_err(|_| Errno::ENOMEM)?;
        }
        m.list.push((fid, fd.as_raw_fd()));
        m.change += 1;
        Ok(())
    }

    /// Removes the member `fid` (its wait object is about to close).
    pub fn leave(&self, fid: *mut sys::fid) {
        let mut m = self.members();
        if let Some(i) = m.list.iter().position(|&(f, _)| f == fid) {
            let (_, fd) = m.list.remove(i);
            if let Some(e) = &self.epoll {
                // SAFETY: the member's wait object (and so `fd`) is still open: it
                // leaves before it closes.
                let _ = e.remove(unsafe { BorrowedFd::borrow_raw(fd) });
            }
            m.change += 1;
        }
    }

    /// fi_trywait over the members: -FI_EAGAIN as soon as one has something to read
    /// (the rest are not asked); Ok when every member is armed.
    pub fn trywait(&self) -> Result<(), Errno> {
        let m = self.members();
        for &(f, _) in &m.list {
            // SAFETY: a member is live while in the list (it leaves before it closes).
            unsafe { crate::wait::trywait(f) }?;
        }
        Ok(())
    }
}

/// The wait set behind `p`.
///
/// # Safety
///
/// As [`object`].
unsafe fn waitset<'a>(p: *const sys::fid_wait) -> Result<&'a WaitSetFid, Errno> {
    // SAFETY: forwarded contract; the fid is the first field.
    unsafe { object::<WaitSetFid>(p.cast()) }
}

/// `fi_wait_open`: an empty wait set of `attr->wait_obj` (FI_WAIT_UNSPEC, FI_WAIT_FD,
/// FI_WAIT_POLLFD, FI_WAIT_YIELD; FI_WAIT_MUTEX_COND is -FI_ENOSYS, FI_WAIT_NONE and
/// FI_WAIT_SET -FI_EINVAL); `attr->flags` must be 0.
///
/// # Safety
///
/// Called through the application's `fi_wait_open` with valid or NULL pointers.
pub unsafe extern "C" fn open(
    fabric: *mut sys::fid_fabric,
    attr: *mut sys::fi_wait_attr,
    waitset: *mut *mut sys::fid_wait,
) -> c_int {
    let make = || {
        // SAFETY: forwarded contract.
        unsafe { FabricFid::from_c(fabric) }?;
        // SAFETY: NULL or a valid attribute structure (application's contract).
        let a = unsafe { attr.as_ref() }.ok_or(Errno::EINVAL)?;
        if a.flags != 0 {
            return Err(Errno::EINVAL);
        }
        let obj = WaitObj::from_raw(a.wait_obj as i32)?;
        let epoll = match obj {
            WaitObj::Unspec | WaitObj::Fd | WaitObj::PollFd => {
                Some(EpollSet::new().map_err(|_| Errno::ENOMEM)?)
            }
            WaitObj::Yield => None,
            WaitObj::MutexCond => return Err(Errno::ENOSYS),
            WaitObj::None | WaitObj::Set => return Err(Errno::EINVAL),
        };
        Ok(WaitSetFid {
            c: sys::fid_wait {
                fid: WaitSetFid::header(std::ptr::null_mut()),
                ops: (&raw const WAIT_OPS).cast_mut(),
            },
            obj,
            epoll,
            members: Mutex::new(Members::default()),
        })
    };
    // SAFETY: NULL or writable (application's contract).
    unsafe { open_into(waitset, make) }
}

/// `fi_close(waitset)`: -FI_EBUSY while a CQ, counter or EQ uses it.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        crate::fid::close::<WaitSetFid>(fid, |w| {
            if w.members().list.is_empty() {
                Ok(())
            } else {
                Err(Errno::EBUSY)
            }
        })
    }
}

/// The shortest nap of a yielding wait set, and the longest of any (members' timers
/// and wake-ups end it sooner).
const YIELD_NAP: Duration = Duration::from_micros(50);
const MAX_NAP: Duration = Duration::from_millis(100);

/// `fi_wait`: 0 once a member has something to read (running each member's progress
/// and fi_trywait), -FI_ETIMEDOUT after `timeout` ms (negative: never).
unsafe extern "C" fn wait(waitset: *mut sys::fid_wait, timeout: c_int) -> c_int {
    // SAFETY: forwarded contract.
    let w = arg!(unsafe { self::waitset(waitset) });
    let start = Instant::now();
    let limit = u64::try_from(timeout).ok().map(Duration::from_millis);
    loop {
        match w.trywait() {
            Err(Errno::EAGAIN) => return 0,
            Err(e) => return neg(e),
            Ok(()) => {}
        }
        let left = match limit {
            Some(l) => match l.checked_sub(start.elapsed()) {
                Some(left) if !left.is_zero() => left,
                _ => return neg(Errno::ETIMEDOUT),
            },
            None => MAX_NAP,
        };
        match &w.epoll {
            Some(e) => {
                e.wait(left.min(MAX_NAP));
            }
            None => {
                std::thread::yield_now();
                std::thread::sleep(YIELD_NAP.min(left));
            }
        }
    }
}

/// FI_GETWAIT (FI_WAIT_FD / UNSPEC: the epoll descriptor, an `int`; FI_WAIT_POLLFD:
/// `struct fi_wait_pollfd`, -FI_ETOOSMALL with the count needed when `nfds` is short;
/// FI_WAIT_YIELD: -FI_ENODATA) and FI_GETWAITOBJ; -FI_ENOSYS for other commands.
///
/// # Safety
///
/// `arg` is NULL or what the command names.
pub unsafe fn control_set(w: &WaitSetFid, cmd: c_int, arg: *mut c_void) -> Result<(), Errno> {
    if arg.is_null() {
        return Err(Errno::EINVAL);
    }
    match (u32::try_from(cmd), w.obj, &w.epoll) {
        (Ok(sys::FI_GETWAITOBJ), obj, _) => {
            // SAFETY: FI_GETWAITOBJ's argument is an enum fi_wait_obj (contract).
            unsafe { put(arg.cast::<sys::fi_wait_obj>(), obj as sys::fi_wait_obj) }
        }
        (Ok(sys::FI_GETWAIT), WaitObj::PollFd, _) => {
            // SAFETY: FI_GETWAIT of a POLLFD set takes a struct fi_wait_pollfd.
            let p = unsafe { &mut *arg.cast::<sys::fi_wait_pollfd>() };
            let m = w.members();
            let room = p.nfds;
            p.nfds = m.list.len();
            p.change_index = m.change;
            if room < m.list.len() {
                return Err(Errno::ETOOSMALL);
            }
            if !m.list.is_empty() && p.fd.is_null() {
                return Err(Errno::EINVAL);
            }
            for (i, &(_, fd)) in m.list.iter().enumerate() {
                let e = libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: `fd` holds `room` >= len entries (application's contract).
                unsafe { p.fd.cast::<libc::pollfd>().add(i).write_unaligned(e) };
            }
            Ok(())
        }
        (Ok(sys::FI_GETWAIT), _, Some(e)) => {
            // SAFETY: FI_GETWAIT's argument is an int (contract).
            unsafe { crate::wait::put_fd(arg, e.fd().as_raw_fd()) }
        }
        (Ok(sys::FI_GETWAIT), _, None) => Err(Errno::ENODATA),
        _ => Err(Errno::ENOSYS),
    }
}

/// `fi_control` of a wait set: [`control_set`].
unsafe extern "C" fn control(fid: *mut sys::fid, cmd: c_int, arg: *mut c_void) -> c_int {
    // SAFETY: NULL or a fid (contract).
    let w = arg!(unsafe { object::<WaitSetFid>(fid) });
    // SAFETY: forwarded contract.
    ret(unsafe { control_set(w, cmd, arg) })
}

#[cfg(test)]
mod tests;
