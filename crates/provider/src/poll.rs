//! `struct fid_poll`: poll sets (fi_poll(3)).
//!
//! A poll set is a list of CQs and counters. `fi_poll` runs one progress pass on each
//! domain they belong to (manual progress: the application's call is what moves data),
//! then names every member with something new: a CQ that is not empty, a counter whose
//! value or error value changed since this set last reported it. The set holds a binding
//! reference on each member, so a member cannot be closed while it is in a set (its
//! fi_close is -FI_EBUSY) and the set's pointers stay valid; the set itself refuses
//! fi_close while it has members.
//!
//! The set's own lock guards only its list; the data path never takes it.

use std::ffi::{c_int, c_void};
use std::sync::{Mutex, MutexGuard};

use ofi_nostd::Errno;

use crate::cntr::CntrFid;
use crate::cq::CqFid;
use crate::domain::DomainFid;
use crate::fid::{FidObject, fi_ops, object, open_into};
use crate::sys;
use crate::util::{arg, neg, ret};

/// One member of a poll set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Member {
    /// A completion queue: reported while not empty.
    Cq(*const CqFid),
    /// A counter and the generation (changes on every update of either value) the set
    /// last reported: reported when the counter's generation differs.
    Cntr(*const CntrFid, u64),
}

impl Member {
    /// The member for the fid `f` (one of our CQs or counters); -FI_EINVAL otherwise.
    ///
    /// # Safety
    ///
    /// `f` is NULL or a fid.
    unsafe fn of(f: *const sys::fid) -> Result<Member, Errno> {
        // SAFETY: forwarded contract.
        if let Ok(c) = unsafe { object::<CqFid>(f) } {
            return Ok(Member::Cq(c));
        }
        // SAFETY: forwarded contract.
        let c = unsafe { object::<CntrFid>(f) }?;
        // Changes from now on are news.
        let seen =
            c.at.domain()
                .with(|d| Ok(d.cntr_mut(c.at.handle)?.generation()))?;
        Ok(Member::Cntr(c, seen))
    }

    /// The member's fid (its address is the application's pointer).
    fn fid(self) -> *const sys::fid {
        match self {
            Member::Cq(c) => c.cast(),
            Member::Cntr(c, _) => c.cast(),
        }
    }

    /// Whether this member is the fid `f`.
    fn is(self, f: *const sys::fid) -> bool {
        std::ptr::eq(self.fid(), f)
    }

    /// The domain the member was opened on.
    fn domain<'a>(self) -> &'a DomainFid {
        // SAFETY: a member cannot be closed while in the set (the set holds a binding
        // reference on it), and the set outlives its list.
        unsafe {
            match self {
                Member::Cq(c) => (*c).at.domain(),
                Member::Cntr(c, _) => (*c).at.domain(),
            }
        }
    }

    /// Records (`true`) or drops the set's binding reference on the member.
    fn bind_ref(self, bind: bool) -> Result<(), Errno> {
        // SAFETY: as in `domain`; on add, the application's live object.
        unsafe {
            match self {
                Member::Cq(c) => (*c).at.domain().with(|d| {
                    let q = d.cq_mut((*c).at.handle)?;
                    if bind {
                        q.bind_ref()
                    } else {
                        q.unbind_ref()
                    }
                    Ok(())
                }),
                Member::Cntr(c, _) => (*c).at.domain().with(|d| {
                    let k = d.cntr_mut((*c).at.handle)?;
                    if bind {
                        k.bind_ref()
                    } else {
                        k.unbind_ref()
                    }
                    Ok(())
                }),
            }
        }
    }

    /// Whether the member has something new (after its domain's progress pass); a
    /// counter's report moves its checkpoint.
    fn has_event(&mut self) -> bool {
        let d = self.domain();
        // SAFETY: as in `domain`.
        let r = unsafe {
            match self {
                Member::Cq(c) => d.data(|st| Ok(!st.core.cq_mut((**c).at.handle)?.is_empty())),
                Member::Cntr(c, seen) => d.data(|st| {
                    let g = st.core.cntr_mut((**c).at.handle)?.generation();
                    Ok(std::mem::replace(seen, g) != g)
                }),
            }
        };
        r.unwrap_or(false)
    }

    /// The context the application gave the member.
    fn context(self) -> *mut c_void {
        // SAFETY: as in `domain`: the fid is readable.
        unsafe { (*self.fid()).context }
    }
}

/// An open poll set.
#[repr(C)]
pub struct PollFid {
    c: sys::fid_poll,
    members: Mutex<Vec<Member>>,
}

// SAFETY: the members are raw pointers to objects that are themselves Sync (their
// state is behind their domain's lock); the list is behind the set's mutex.
unsafe impl Send for PollFid {}
// SAFETY: as above.
unsafe impl Sync for PollFid {}

static POLL_FI_OPS: sys::fi_ops = fi_ops(close);

static POLL_OPS: sys::fi_ops_poll = sys::fi_ops_poll {
    size: size_of::<sys::fi_ops_poll>(),
    poll: Some(poll),
    poll_add: Some(poll_add),
    poll_del: Some(poll_del),
};

// SAFETY: #[repr(C)] with the fid_poll (fid first) as first field; only `open` makes
// fids with this class and ops.
unsafe impl FidObject for PollFid {
    const CLASS: u32 = sys::FI_CLASS_POLL;
    fn fi_ops() -> *const sys::fi_ops {
        &raw const POLL_FI_OPS
    }
}

impl PollFid {
    fn members(&self) -> MutexGuard<'_, Vec<Member>> {
        self.members.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The poll set behind `p`.
///
/// # Safety
///
/// As [`object`].
unsafe fn pollset<'a>(p: *const sys::fid_poll) -> Result<&'a PollFid, Errno> {
    // SAFETY: forwarded contract; the fid is the first field.
    unsafe { object::<PollFid>(p.cast()) }
}

/// `fi_poll_open`: an empty poll set on `domain`; `attr->flags` must be 0 (reserved).
///
/// # Safety
///
/// Called through the application's `fi_poll_open` with valid or NULL pointers.
pub unsafe extern "C" fn open(
    domain: *mut sys::fid_domain,
    attr: *mut sys::fi_poll_attr,
    pollset: *mut *mut sys::fid_poll,
) -> c_int {
    let make = || {
        // SAFETY: forwarded contract.
        unsafe { DomainFid::from_c(domain) }?;
        // SAFETY: NULL or a valid attribute structure (application's contract).
        if unsafe { attr.as_ref() }.is_some_and(|a| a.flags != 0) {
            return Err(Errno::EINVAL);
        }
        Ok(PollFid {
            c: sys::fid_poll {
                fid: PollFid::header(std::ptr::null_mut()),
                ops: (&raw const POLL_OPS).cast_mut(),
            },
            members: Mutex::new(Vec::new()),
        })
    };
    // SAFETY: NULL or writable (application's contract).
    unsafe { open_into(pollset, make) }
}

/// `fi_close(pollset)`: -FI_EBUSY while it has members.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        crate::fid::close::<PollFid>(fid, |p| {
            if p.members().is_empty() {
                Ok(())
            } else {
                Err(Errno::EBUSY)
            }
        })
    }
}

/// `fi_poll_add`: adds a CQ or counter (-FI_EINVAL for other fids, -FI_EALREADY if it is
/// a member already); `flags` must be 0.
unsafe extern "C" fn poll_add(
    pollset: *mut sys::fid_poll,
    fid: *mut sys::fid,
    flags: u64,
) -> c_int {
    // SAFETY: forwarded contract.
    let p = arg!(unsafe { pollset_arg(pollset, flags) });
    // SAFETY: NULL or a fid (contract).
    let m = arg!(unsafe { Member::of(fid) });
    let mut list = p.members();
    if list.iter().any(|x| x.is(fid)) {
        return neg(Errno::EALREADY);
    }
    arg!(m.bind_ref(true));
    list.push(m);
    0
}

/// `fi_poll_del`: removes a member (-FI_EINVAL if `fid` is not one).
unsafe extern "C" fn poll_del(
    pollset: *mut sys::fid_poll,
    fid: *mut sys::fid,
    flags: u64,
) -> c_int {
    // SAFETY: forwarded contract.
    let p = arg!(unsafe { pollset_arg(pollset, flags) });
    let mut list = p.members();
    let Some(i) = list.iter().position(|x| x.is(fid)) else {
        return neg(Errno::EINVAL);
    };
    let m = list.remove(i);
    ret(m.bind_ref(false))
}

/// The poll set of an add or delete call; -FI_EINVAL for flags (none are defined).
///
/// # Safety
///
/// As [`object`].
unsafe fn pollset_arg<'a>(p: *const sys::fid_poll, flags: u64) -> Result<&'a PollFid, Errno> {
    // SAFETY: forwarded contract.
    let p = unsafe { pollset(p) }?;
    if flags != 0 {
        return Err(Errno::EINVAL);
    }
    Ok(p)
}

/// `fi_poll`: a progress pass on each member's domain, then up to `count` contexts of
/// the members with events written to `context`; returns how many (0: none).
unsafe extern "C" fn poll(
    pollset: *mut sys::fid_poll,
    context: *mut *mut c_void,
    count: c_int,
) -> c_int {
    // SAFETY: forwarded contract.
    let p = arg!(unsafe { self::pollset(pollset) });
    let Ok(count) = usize::try_from(count) else {
        return neg(Errno::EINVAL);
    };
    if count > 0 && context.is_null() {
        return neg(Errno::EINVAL);
    }
    let mut list = p.members();
    let mut passed: Vec<*const DomainFid> = Vec::new();
    for m in list.iter() {
        let d = m.domain();
        if !passed.contains(&std::ptr::from_ref(d)) {
            passed.push(d);
            let _ = d.data(|st| {
                st.progress();
                Ok(())
            });
        }
    }
    let mut n = 0;
    for m in list.iter_mut() {
        if n == count {
            break;
        }
        if m.has_event() {
            // SAFETY: `context` holds `count` > n pointers (application's contract).
            unsafe { context.add(n).write(m.context()) };
            n += 1;
        }
    }
    c_int::try_from(n).unwrap_or(c_int::MAX)
}
