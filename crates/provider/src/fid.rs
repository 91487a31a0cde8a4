//! Recognising our objects behind the `struct fid *` libfabric hands back, and the
//! `struct fi_ops` entries every class shares.

use std::ffi::{c_char, c_int, c_void};

use ofi_nostd::Errno;

use crate::sys;
use crate::util::{arg, neg, put, ret};

/// A Rust object laid out with a C fid (`struct fid` first, at offset 0) of class
/// [`FidObject::CLASS`] whose `ops` is [`FidObject::fi_ops`].
///
/// # Safety
///
/// Implementors are `#[repr(C)]` with the C fid structure as their first field, and
/// every fid with this class and ops pointer is embedded in a live `Self`.
pub unsafe trait FidObject: Sized {
    /// `FI_CLASS_*`.
    const CLASS: u32;
    /// The class's `struct fi_ops`: its address tells our objects from others.
    fn fi_ops() -> *const sys::fi_ops;

    /// The `fi_ops` pointer to store in a new fid.
    fn fi_ops_mut() -> *mut sys::fi_ops {
        Self::fi_ops().cast_mut()
    }

    /// A C fid header for a new object of this class.
    fn header(context: *mut c_void) -> sys::fid {
        sys::fid {
            fclass: Self::CLASS as usize,
            context,
            ops: Self::fi_ops_mut(),
        }
    }
}

/// The object behind `p` if `p` is one of ours of class `T` (not NULL, right class,
/// right ops table); -FI_EINVAL otherwise.
///
/// # Safety
///
/// `p` is NULL or points to a readable `struct fid` (any provider's); an object of ours
/// must not be closed while the returned reference is used.
pub unsafe fn object<'a, T: FidObject>(p: *const sys::fid) -> Result<&'a T, Errno> {
    if p.is_null() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: non-NULL and readable (caller's contract).
    let f = unsafe { p.read_unaligned() };
    if f.fclass != T::CLASS as usize || !std::ptr::eq(f.ops.cast_const(), T::fi_ops()) {
        return Err(Errno::EINVAL);
    }
    // SAFETY: a fid with T's class and ops table is the first field of a live T
    // (FidObject's contract), so the pointer is the object's.
    Ok(unsafe { &*p.cast::<T>() })
}

/// Moves `obj` to the heap and returns the pointer the application gets.
pub fn publish<T: FidObject>(obj: T) -> *mut T {
    Box::into_raw(Box::new(obj))
}

/// Releases an object made by [`publish`].
///
/// # Safety
///
/// `obj` came from [`publish`] and is not used afterwards.
pub unsafe fn release<T: FidObject>(obj: &T) {
    let p = std::ptr::from_ref(obj).cast_mut();
    // SAFETY: made by Box::into_raw in `publish`; no other use follows.
    drop(unsafe { Box::from_raw(p) });
}

/// The end of the open calls: the object `make` builds (checking the call's arguments)
/// published, and its pointer written to `out`; -FI_EINVAL for a NULL `out`.
///
/// # Safety
///
/// `out` is NULL or writable.
pub unsafe fn open_into<T: FidObject, C>(
    out: *mut *mut C,
    make: impl FnOnce() -> Result<T, Errno>,
) -> c_int {
    if out.is_null() {
        return neg(Errno::EINVAL);
    }
    match make() {
        // SAFETY: non-NULL and writable (contract).
        Ok(obj) => ret(unsafe { put(out, publish(obj).cast::<C>()) }),
        Err(e) => neg(e),
    }
}

/// `fi_close` of an object of class `T`: `shut` closes what it holds in the core (an
/// error, such as -FI_EBUSY while bound, leaves it open), then the fid is released.
///
/// # Safety
///
/// `fid` is NULL or a fid that the application gives up (fi_close's contract).
pub unsafe fn close<T: FidObject>(
    fid: *mut sys::fid,
    shut: impl FnOnce(&T) -> Result<(), Errno>,
) -> c_int {
    // SAFETY: forwarded contract.
    let obj = arg!(unsafe { object::<T>(fid) });
    if let Err(e) = shut(obj) {
        return neg(e);
    }
    // SAFETY: published by its open call (`open_into`), closed in the core, given up by
    // the application.
    unsafe { release(obj) };
    0
}

/// `fi_ops.bind` of classes that bind to nothing (yet): -FI_ENOSYS.
pub extern "C" fn no_bind(_fid: *mut sys::fid, _bfid: *mut sys::fid, _flags: u64) -> c_int {
    neg(Errno::ENOSYS)
}

/// `fi_ops.control`: no commands (FI_GETWAIT needs a native wait object): -FI_ENOSYS.
pub extern "C" fn no_control(_fid: *mut sys::fid, _cmd: c_int, _arg: *mut c_void) -> c_int {
    neg(Errno::ENOSYS)
}

/// `fi_ops.ops_open`: no extension interfaces: -FI_ENOSYS.
pub extern "C" fn no_ops_open(
    _fid: *mut sys::fid,
    _name: *const c_char,
    _flags: u64,
    _ops: *mut *mut c_void,
    _context: *mut c_void,
) -> c_int {
    neg(Errno::ENOSYS)
}

/// `fi_ops.tostr`: -FI_ENOSYS.
pub extern "C" fn no_tostr(_fid: *const sys::fid, _buf: *mut c_char, _len: usize) -> c_int {
    neg(Errno::ENOSYS)
}

/// `fi_ops.ops_set`: -FI_ENOSYS.
pub extern "C" fn no_ops_set(
    _fid: *mut sys::fid,
    _name: *const c_char,
    _flags: u64,
    _ops: *mut c_void,
    _context: *mut c_void,
) -> c_int {
    neg(Errno::ENOSYS)
}

/// A `struct fi_ops` with `close` and the shared stubs.
pub const fn fi_ops(close: unsafe extern "C" fn(*mut sys::fid) -> c_int) -> sys::fi_ops {
    sys::fi_ops {
        size: size_of::<sys::fi_ops>(),
        close: Some(close),
        bind: Some(no_bind),
        control: Some(no_control),
        ops_open: Some(no_ops_open),
        tostr: Some(no_tostr),
        ops_set: Some(no_ops_set),
    }
}

/// A `struct fi_ops` with `close`, `control` and the shared stubs.
pub const fn fi_ops_control(
    close: unsafe extern "C" fn(*mut sys::fid) -> c_int,
    control: unsafe extern "C" fn(*mut sys::fid, c_int, *mut c_void) -> c_int,
) -> sys::fi_ops {
    sys::fi_ops {
        size: size_of::<sys::fi_ops>(),
        close: Some(close),
        bind: Some(no_bind),
        control: Some(control),
        ops_open: Some(no_ops_open),
        tostr: Some(no_tostr),
        ops_set: Some(no_ops_set),
    }
}

/// Polls `attempt` until it returns `Some`, or until `timeout_ms` (negative: forever)
/// has passed, then returns `None`: the blocking calls for FI_WAIT_UNSPEC and
/// FI_WAIT_YIELD objects, which have no native wait object to sleep on.
pub fn poll_until<R>(timeout_ms: c_int, mut attempt: impl FnMut() -> Option<R>) -> Option<R> {
    let start = std::time::Instant::now();
    let limit = u64::try_from(timeout_ms)
        .ok()
        .map(std::time::Duration::from_millis);
    let mut spins = 0u32;
    loop {
        if let Some(r) = attempt() {
            return Some(r);
        }
        if limit.is_some_and(|l| start.elapsed() >= l) {
            return None;
        }
        if spins < 64 {
            spins += 1;
            std::thread::yield_now();
        } else {
            std::thread::sleep(std::time::Duration::from_micros(50));
        }
    }
}
