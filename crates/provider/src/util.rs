//! Small helpers at the C boundary: return codes, C strings, libc allocations.

use std::ffi::{CStr, c_char, c_int, c_void};

use ofi_nostd::cq::ErrDataOut;
use ofi_nostd::eq::EQ_ERR_DATA_MAX;
use ofi_nostd::{Errno, Result};

/// The value of a check (a fid lookup, an argument conversion), or its error as the
/// C call's return (`int` or `ssize_t`, see [`CRet`]).
macro_rules! arg {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return crate::util::CRet::err(e),
        }
    };
}
pub(crate) use arg;

/// The return types of libfabric's calls, which carry an error as `-code`.
pub trait CRet {
    /// `-code` of `e`.
    fn err(e: Errno) -> Self;
}

impl CRet for c_int {
    fn err(e: Errno) -> c_int {
        neg(e)
    }
}

impl CRet for isize {
    fn err(e: Errno) -> isize {
        ret_len(Err(e))
    }
}

/// `-code` as the `int` libfabric calls return.
pub fn neg(e: Errno) -> c_int {
    -e.code()
}

/// 0 or `-code`.
pub fn ret(r: Result<()>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => neg(e),
    }
}

/// A count or `-code`, as the `ssize_t` calls return.
pub fn ret_len(r: Result<usize>) -> isize {
    match r {
        Ok(n) => isize::try_from(n).unwrap_or(isize::MAX),
        Err(e) => -(e.code() as isize),
    }
}

/// The text of a NUL-terminated C string: `Ok(None)` for NULL, -FI_EINVAL if it is not
/// UTF-8.
///
/// # Safety
///
/// `p` is NULL or points to a NUL-terminated string that outlives `'a`.
pub unsafe fn cstr<'a>(p: *const c_char) -> Result<Option<&'a str>> {
    if p.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL and NUL-terminated per the caller's contract.
    let s = unsafe { CStr::from_ptr(p) };
    s.to_str().map(Some).map_err(|_| Errno::EINVAL)
}

/// `len` bytes at `p` as a slice (empty for `len` 0, whatever `p` is); `None` for NULL
/// with `len` > 0.
///
/// # Safety
///
/// `p` is NULL or points to `len` readable bytes that outlive `'a`.
pub unsafe fn bytes<'a>(p: *const c_void, len: usize) -> Option<&'a [u8]> {
    if len == 0 {
        return Some(&[]);
    }
    if p.is_null() {
        return None;
    }
    // SAFETY: `p` points to `len` readable bytes per the caller's contract.
    Some(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
}

/// A `malloc`ed copy of `data` (which `free(3)`, hence `fi_freeinfo`, releases); NULL for
/// empty data. `Err` when malloc fails.
pub fn malloc_copy(data: &[u8]) -> std::result::Result<*mut c_void, Errno> {
    if data.is_empty() {
        return Ok(std::ptr::null_mut());
    }
    // SAFETY: malloc has no preconditions; the result is checked for NULL.
    let p = unsafe { libc::malloc(data.len()) };
    if p.is_null() {
        return Err(Errno::ENOMEM);
    }
    // SAFETY: `p` is a fresh allocation of `data.len()` bytes, disjoint from `data`.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p.cast::<u8>(), data.len()) };
    Ok(p)
}

/// A `malloc`ed NUL-terminated copy of `s` (as `strdup` makes); NULL for an empty string,
/// which is how the core spells a NULL name.
pub fn malloc_str(s: &str) -> std::result::Result<*mut c_char, Errno> {
    if s.is_empty() {
        return Ok(std::ptr::null_mut());
    }
    // SAFETY: malloc has no preconditions; the result is checked for NULL.
    let p = unsafe { libc::malloc(s.len() + 1) }.cast::<u8>();
    if p.is_null() {
        return Err(Errno::ENOMEM);
    }
    // SAFETY: `p` holds `s.len() + 1` bytes: the text, then the NUL.
    unsafe {
        std::ptr::copy_nonoverlapping(s.as_ptr(), p, s.len());
        p.add(s.len()).write(0);
    }
    Ok(p.cast())
}

/// A zeroed `malloc`ed `T` (`calloc`); `Err` when allocation fails.
pub fn calloc<T>() -> std::result::Result<*mut T, Errno> {
    calloc_sized(size_of::<T>())
}

/// A zeroed `T` of `size` bytes (at least `size_of::<T>()`, or a larger C structure whose
/// prefix `T` is), released with `free(3)`; -FI_ENOMEM when calloc fails.
pub fn calloc_sized<T>(size: usize) -> std::result::Result<*mut T, Errno> {
    // SAFETY: calloc has no preconditions; the result is checked for NULL.
    let p = unsafe { libc::calloc(1, size) }.cast::<T>();
    if p.is_null() {
        Err(Errno::ENOMEM)
    } else {
        Ok(p)
    }
}

/// Copies the NUL-terminated text of `text` into the C buffer `buf` of `len` bytes,
/// truncating (always NUL-terminated when `len` > 0). Returns how many text bytes fit.
///
/// # Safety
///
/// `buf` is NULL or points to `len` writable bytes.
pub unsafe fn copy_cstr(text: &CStr, buf: *mut c_char, len: usize) -> usize {
    if buf.is_null() || len == 0 {
        return 0;
    }
    let src = text.to_bytes();
    let n = src.len().min(len - 1);
    // SAFETY: `buf` has `len` > n bytes; the source is a distinct, readable string.
    unsafe {
        std::ptr::copy_nonoverlapping(src.as_ptr(), buf.cast::<u8>(), n);
        buf.add(n).write(0);
    }
    n
}

/// `fi_strerror(prov_errno)` (this provider's `prov_errno`s are libfabric codes, of
/// either sign), also copied into `buf` when the application gave one: what every
/// `fi_*_strerror` op returns.
///
/// # Safety
///
/// `buf` is NULL or points to `len` writable bytes.
pub unsafe fn strerror(prov_errno: c_int, buf: *mut c_char, len: usize) -> *const c_char {
    // SAFETY: fi_strerror takes any int and returns a static NUL-terminated string.
    let text = unsafe { crate::sys::fi_strerror(prov_errno.saturating_abs()) };
    if text.is_null() {
        return c"Unknown error".as_ptr();
    }
    if buf.is_null() || len == 0 {
        return text;
    }
    // SAFETY: `text` is a static C string; `buf` holds `len` bytes per the contract.
    unsafe { copy_cstr(CStr::from_ptr(text), buf, len) };
    buf
}

/// Writes `v` through the out-pointer `p`; -FI_EINVAL for NULL.
///
/// # Safety
///
/// `p` is NULL or valid for a write of `T`.
pub unsafe fn put<T>(p: *mut T, v: T) -> Result<()> {
    if p.is_null() {
        return Err(Errno::EINVAL);
    }
    // SAFETY: non-NULL and writable per the caller's contract; unaligned is allowed.
    unsafe { p.write_unaligned(v) };
    Ok(())
}

/// The application's `err_data` buffer of a readerr call (fi_cq(3), fi_eq(3)), and the
/// scratch the core copies error data through before it goes there.
pub struct ErrDataBuf {
    user: *mut c_void,
    len: usize,
    scratch: [u8; EQ_ERR_DATA_MAX],
}

impl ErrDataBuf {
    /// The entry's `err_data` and `err_data_size` when its layout has them (API >=
    /// 1.5); none otherwise, or for a NULL `err_data`.
    pub fn new(user: Option<(*mut c_void, usize)>) -> ErrDataBuf {
        let (user, size) = user.unwrap_or((std::ptr::null_mut(), 0));
        ErrDataBuf {
            user,
            len: if user.is_null() {
                0
            } else {
                size.min(EQ_ERR_DATA_MAX)
            },
            scratch: [0; EQ_ERR_DATA_MAX],
        }
    }

    /// Where the core copies the error data to.
    pub fn scratch(&mut self) -> &mut [u8] {
        &mut self.scratch[..self.len]
    }

    /// The entry's `err_data` and `err_data_size` for what the core did (`own`: the
    /// queue's own copy, valid until its next read), copying to the application's
    /// buffer when the core filled the scratch.
    ///
    /// # Safety
    ///
    /// `err_data` holds the `err_data_size` bytes the application gave.
    pub unsafe fn place(&self, out: ErrDataOut, own: &[u8]) -> (*mut c_void, usize) {
        match out {
            ErrDataOut::Copied(n) => {
                // SAFETY: the application's err_data holds err_data_size >= n bytes.
                unsafe {
                    std::ptr::copy_nonoverlapping(self.scratch.as_ptr(), self.user.cast(), n)
                };
                (self.user, n)
            }
            ErrDataOut::ProviderOwned(0) => (std::ptr::null_mut(), 0),
            ErrDataOut::ProviderOwned(n) => (own.as_ptr().cast_mut().cast(), n),
        }
    }
}
