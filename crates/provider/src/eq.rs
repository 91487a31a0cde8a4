//! `struct fid_eq`: event queues (fi_eq(3)). They belong to the fabric and use its lock.

use std::ffi::{c_char, c_int, c_void};

use ofi_nostd::Errno;
use ofi_nostd::eq::{
    EQ_WRITE_MAX, EqAttr, EqEvent, FI_EQ_ERR_ENTRY_1_0_SIZE, FI_EQ_ERR_ENTRY_SIZE, WaitObj,
};
use ofi_nostd::fabric::{EqHandle, EqObj};
use ofi_nostd::flags::Flags;

use crate::fabric::FabricFid;
use crate::fid::{FidObject, fi_ops_control, object, open_into, poll_until};
use crate::sys;
use crate::util::{ErrDataBuf, arg, bytes, ret_len};
use crate::wait::{Waitable, Waiter, control};
use hosted::storage::Heap;

/// Room for any event's C form (fixed part plus connection or fi_eq_write data).
const EVENT_MAX: usize = EQ_WRITE_MAX + 64;

/// An open event queue.
#[repr(C)]
pub struct EqFid {
    c: sys::fid_eq,
    fabric: *const FabricFid,
    handle: EqHandle<Heap>,
    /// The wait object (natively, FI_WAIT_FD and FI_WAIT_UNSPEC: an eventfd signalled
    /// when an armed EQ receives an event).
    wait: Waiter,
    /// The endpoints bound to it, whose critical errors (and, for FI_EP_MSG, whose
    /// connection events) it reports.
    pub(crate) eps: crate::critical::BoundEps,
    /// The passive endpoints bound to it, whose connection requests it reports.
    pub(crate) peps: crate::critical::BoundPeps,
}

static EQ_FI_OPS: sys::fi_ops = fi_ops_control(close, control::<EqFid>);

static EQ_OPS: sys::fi_ops_eq = sys::fi_ops_eq {
    size: size_of::<sys::fi_ops_eq>(),
    read: Some(read),
    readerr: Some(readerr),
    write: Some(write),
    sread: Some(sread),
    strerror: Some(strerror),
};

// SAFETY: #[repr(C)] with the fid_eq (fid first) as first field; only `open` makes fids
// with this class and ops.
unsafe impl FidObject for EqFid {
    const CLASS: u32 = sys::FI_CLASS_EQ;
    fn fi_ops() -> *const sys::fi_ops {
        &raw const EQ_FI_OPS
    }
}

impl Waitable for EqFid {
    fn waiter(&self) -> &Waiter {
        &self.wait
    }
}

impl EqFid {
    /// The fabric this EQ belongs to.
    pub(crate) fn fabric_ptr(&self) -> *const FabricFid {
        self.fabric
    }

    /// Records (`true`) or drops a binding, so fi_close refuses while bound.
    pub(crate) fn bind_ref(&self, bind: bool) {
        let _ = self.with(|q| {
            if bind {
                q.bind_ref();
            } else {
                q.unbind_ref();
            }
            Ok(())
        });
    }

    /// Queues provider events with `f` (an asynchronous operation's completion), then
    /// wakes a waiter armed on the EQ.
    pub(crate) fn post(
        &self,
        f: impl FnOnce(&mut EqObj<Heap>) -> Result<(), Errno>,
    ) -> Result<(), Errno> {
        self.with(|q| {
            let r = f(q);
            if q.take_wakeup()
                && let Some(w) = self.wait.fd()
            {
                w.signal();
            }
            r
        })
    }

    /// The eventfd of its native wait object, which domains signal for connection
    /// events (`None` without one).
    pub(crate) fn waiter_fd(&self) -> Option<std::os::fd::RawFd> {
        self.wait.fd().map(crate::wait::event_fd)
    }

    /// Before a read, readerr, sread attempt or trywait: the bound endpoints' critical
    /// errors, then the connection events their domains owe.
    fn collect(&self) {
        self.eps.collect(self);
        crate::ep::cm::pump(self);
    }

    fn fabric(&self) -> &FabricFid {
        // SAFETY: a fabric outlives its EQs (its fi_close is refused while one is open).
        unsafe { &*self.fabric }
    }

    /// Runs `f` on the core EQ under the fabric lock.
    fn with<R>(&self, f: impl FnOnce(&mut EqObj<Heap>) -> Result<R, Errno>) -> Result<R, Errno> {
        let mut g = self.fabric().inner.lock();
        f(g.eq_mut(self.handle)?)
    }
}

/// The EQ behind `p`.
///
/// # Safety
///
/// As [`object`].
unsafe fn eq<'a>(p: *const sys::fid_eq) -> Result<&'a EqFid, Errno> {
    // SAFETY: forwarded contract; the fid is the first field.
    unsafe { object::<EqFid>(p.cast()) }
}

/// `fi_eq_open`.
///
/// # Safety
///
/// Called through the application's `fi_eq_open` with valid or NULL pointers.
pub unsafe extern "C" fn open(
    fabric: *mut sys::fid_fabric,
    attr: *mut sys::fi_eq_attr,
    eq: *mut *mut sys::fid_eq,
    context: *mut c_void,
) -> c_int {
    let make = || {
        // SAFETY: forwarded contract.
        let f = unsafe { FabricFid::from_c(fabric) }?;
        // SAFETY: NULL or a valid attribute structure (application's contract).
        let a = unsafe { attr.as_ref() }.ok_or(Errno::EINVAL)?;
        let attr = EqAttr {
            size: a.size,
            flags: Flags::from_bits_retain(a.flags),
            wait_obj: WaitObj::from_raw(a.wait_obj as i32)?,
            signaling_vector: a.signaling_vector,
            wait_set: a.wait_set as u64,
        };
        attr.validate()?;
        let wait = Waiter::new(attr.wait_obj, None, attr.wait_set)?;
        Ok(EqFid {
            c: sys::fid_eq {
                fid: EqFid::header(context),
                ops: (&raw const EQ_OPS).cast_mut(),
            },
            fabric: std::ptr::from_ref(f),
            handle: f.inner.lock().eq_open(&attr, context as u64)?,
            wait,
            eps: Default::default(),
            peps: Default::default(),
        })
    };
    // SAFETY: NULL or writable (application's contract); a wait set's member joins it.
    unsafe { crate::wait::join::<EqFid, _>(eq, open_into(eq, make)) }
}

/// `fi_close(eq)`: -FI_EBUSY while bound. The infos of FI_CONNREQ events nobody read
/// are still ours, and freed.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    let shut = |e: &EqFid| -> Result<(), Errno> {
        let infos: Vec<u64> = {
            let mut f = e.fabric().inner.lock();
            let infos = f.eq(e.handle)?.unread_connreq_infos().collect();
            f.eq_close(e.handle)?;
            infos
        };
        for info in infos {
            // SAFETY: built by `connreq_info` and never handed to the application.
            unsafe { sys::fi_freeinfo(info as *mut sys::fi_info) };
        }
        Ok(())
    };
    // SAFETY: forwarded contract.
    unsafe { crate::fid::close::<EqFid>(fid, shut) }
}

/// One read attempt on a locked EQ; the event's C form goes to `buf`.
///
/// # Safety
///
/// `event` is writable; `buf` is NULL or holds `len` bytes.
unsafe fn read_locked(
    q: &mut EqObj<Heap>,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    flags: u64,
) -> Result<usize, Errno> {
    let buf_len = (!buf.is_null()).then_some(len);
    let r = q.read(buf_len, Flags::from_bits_retain(flags))?;
    let mut tmp = [0u8; EVENT_MAX];
    let n = if buf.is_null() {
        0
    } else {
        let n = r.payload.write_c(&mut tmp[..len.min(EVENT_MAX)])?;
        // SAFETY: `buf` holds `len` >= n bytes (contract).
        unsafe { std::ptr::copy_nonoverlapping(tmp.as_ptr(), buf.cast::<u8>(), n) };
        n
    };
    // SAFETY: `event` is writable (contract).
    unsafe { event.write_unaligned(r.event.0) };
    Ok(n)
}

/// `fi_eq_read`: the event at the head (kept with FI_PEEK); returns its size.
unsafe extern "C" fn read(
    eq_p: *mut sys::fid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    flags: u64,
) -> isize {
    // SAFETY: forwarded contract.
    let e = arg!(unsafe { eq(eq_p) });
    if event.is_null() || (buf.is_null() && len > 0) {
        return ret_len(Err(Errno::EINVAL));
    }
    e.collect();
    // SAFETY: pointers checked or the application's (contract).
    ret_len(e.with(|q| unsafe { read_locked(q, event, buf, len, flags) }))
}

/// `fi_eq_readerr`: the error event at the head; returns the size of
/// `struct fi_eq_err_entry` of the application's API version.
unsafe extern "C" fn readerr(
    eq_p: *mut sys::fid_eq,
    buf: *mut sys::fi_eq_err_entry,
    flags: u64,
) -> isize {
    // SAFETY: forwarded contract.
    let e = arg!(unsafe { eq(eq_p) });
    if buf.is_null() {
        return ret_len(Err(Errno::EINVAL));
    }
    let api = e.fabric().api_version();
    let new_layout = api >= ofi_nostd::cq::API_VERSION_1_5;
    // SAFETY: `buf` is the application's entry; err_data exists from API 1.5 on.
    let user = new_layout.then(|| unsafe { ((*buf).err_data, (*buf).err_data_size) });
    let mut err_data = ErrDataBuf::new(user);
    e.collect();
    let r = e.with(|q| {
        let out = q.readerr(Flags::from_bits_retain(flags), api, err_data.scratch())?;
        // SAFETY: the application's err_data holds its err_data_size bytes.
        let (data_ptr, data_len) = unsafe { err_data.place(out.err_data, q.last_err_data()) };
        // SAFETY: `buf` is writable for its layout; err_data_size only exists from 1.5.
        unsafe {
            (*buf).fid = out.fid as sys::fid_t;
            (*buf).context = out.context as *mut c_void;
            (*buf).data = out.data;
            (*buf).err = out.err;
            (*buf).prov_errno = out.prov_errno;
            (*buf).err_data = data_ptr;
            if new_layout {
                (*buf).err_data_size = data_len;
            }
        }
        Ok(if new_layout {
            FI_EQ_ERR_ENTRY_SIZE
        } else {
            FI_EQ_ERR_ENTRY_1_0_SIZE
        })
    });
    ret_len(r)
}

/// `fi_eq_write`: queues an application event (the EQ needs FI_WRITE).
unsafe extern "C" fn write(
    eq_p: *mut sys::fid_eq,
    event: u32,
    buf: *const c_void,
    len: usize,
    flags: u64,
) -> isize {
    // SAFETY: forwarded contract.
    let e = arg!(unsafe { eq(eq_p) });
    // SAFETY: `buf` holds `len` bytes (application's contract).
    let Some(data) = (unsafe { bytes(buf, len) }) else {
        return ret_len(Err(Errno::EINVAL));
    };
    ret_len(e.with(|q| {
        let n = q.write(EqEvent(event), data, Flags::from_bits_retain(flags))?;
        if q.take_wakeup()
            && let Some(w) = e.wait.fd()
        {
            w.signal();
        }
        Ok(n)
    }))
}

/// `fi_eq_sread`: polls until an event, an error event or the timeout (-FI_EAGAIN).
/// -FI_ENOSYS without a wait object.
unsafe extern "C" fn sread(
    eq_p: *mut sys::fid_eq,
    event: *mut u32,
    buf: *mut c_void,
    len: usize,
    timeout: c_int,
    flags: u64,
) -> isize {
    // SAFETY: forwarded contract.
    let e = arg!(unsafe { eq(eq_p) });
    if event.is_null() || (buf.is_null() && len > 0) {
        return ret_len(Err(Errno::EINVAL));
    }
    if let Err(err) = e.with(|q| q.check_sread()) {
        return ret_len(Err(err));
    }
    let r = poll_until(timeout, || {
        e.collect();
        // SAFETY: pointers checked or the application's (contract).
        match e.with(|q| unsafe { read_locked(q, event, buf, len, flags) }) {
            Err(Errno::EAGAIN) => None,
            other => Some(other),
        }
    });
    ret_len(r.unwrap_or(Err(Errno::EAGAIN)))
}

/// `fi_eq_strerror`.
unsafe extern "C" fn strerror(
    _eq: *mut sys::fid_eq,
    prov_errno: c_int,
    _err_data: *const c_void,
    buf: *mut c_char,
    len: usize,
) -> *const c_char {
    // SAFETY: `buf` is NULL or holds `len` bytes (application's contract).
    unsafe { crate::util::strerror(prov_errno, buf, len) }
}

/// fi_trywait for an EQ: `Err` if `f` is not one of our EQs.
///
/// # Safety
///
/// `f` is NULL or a fid.
pub unsafe fn trywait(f: *mut sys::fid) -> Result<Result<(), Errno>, Errno> {
    // SAFETY: forwarded contract.
    let e = unsafe { object::<EqFid>(f) }?;
    e.collect();
    Ok(e.with(|q| {
        e.wait.drain();
        q.trywait()
    }))
}
