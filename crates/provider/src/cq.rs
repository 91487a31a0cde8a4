//! `struct fid_cq`: completion queues (fi_cq(3)).

use std::ffi::{c_char, c_int, c_void};

use ofi_nostd::Errno;
use ofi_nostd::cq::{CqAttr, CqEntry, CqFormat, CqWaitCond, DEFAULT_CQ_FORMAT};
use ofi_nostd::domain::{CqHandle, CqObj};
use ofi_nostd::eq::WaitObj;
use ofi_nostd::flags::{FiAddr, Flags};

use crate::domain::{DomainFid, DomainState, InDomain, Wake};
use crate::fid::{FidObject, fi_ops_control, object, open_into};
use crate::sys;
use crate::util::{ErrDataBuf, arg, neg, ret, ret_len};
use crate::wait::{Waitable, Waiter, control};
use hosted::storage::Heap;

/// Completions moved per core read; the C buffer is filled in chunks of this many.
const CHUNK: usize = 64;
/// The chunk for reads of a few entries.
const SMALL_CHUNK: usize = 4;

/// An open completion queue.
#[repr(C)]
pub struct CqFid {
    c: sys::fid_cq,
    /// The domain it was opened on, and its core handle there.
    pub(crate) at: InDomain<CqHandle<Heap>>,
    format: CqFormat,
    wait: Waiter,
}

static CQ_FI_OPS: sys::fi_ops = fi_ops_control(close, control::<CqFid>);

static CQ_OPS: sys::fi_ops_cq = sys::fi_ops_cq {
    size: size_of::<sys::fi_ops_cq>(),
    read: Some(read),
    readfrom: Some(readfrom),
    readerr: Some(readerr),
    sread: Some(sread),
    sreadfrom: Some(sreadfrom),
    signal: Some(signal),
    strerror: Some(strerror),
};

// SAFETY: #[repr(C)] with the fid_cq (fid first) as first field; only `open` makes fids
// with this class and ops.
unsafe impl FidObject for CqFid {
    const CLASS: u32 = sys::FI_CLASS_CQ;
    fn fi_ops() -> *const sys::fi_ops {
        &raw const CQ_FI_OPS
    }
}

impl Waitable for CqFid {
    fn waiter(&self) -> &Waiter {
        &self.wait
    }
}

impl CqFid {
    /// Runs `f` on the core CQ for a data-path call (see [`crate::lock`]).
    fn with<R>(&self, f: impl FnOnce(&mut CqObj<Heap>) -> Result<R, Errno>) -> Result<R, Errno> {
        self.at
            .domain()
            .data(|st| f(st.core.cq_mut(self.at.handle)?))
    }

    /// Runs progress, then `f` on the domain state, for a data-path call.
    fn progress_with<R>(
        &self,
        f: impl FnOnce(&mut DomainState) -> Result<R, Errno>,
    ) -> Result<R, Errno> {
        self.at.domain().data(|st| {
            st.progress();
            f(st)
        })
    }
}

/// The CQ behind `p`.
///
/// # Safety
///
/// As [`object`].
unsafe fn cq<'a>(p: *const sys::fid_cq) -> Result<&'a CqFid, Errno> {
    // SAFETY: forwarded contract; the fid is the first field.
    unsafe { object::<CqFid>(p.cast()) }
}

/// The core attributes of a C `fi_cq_attr`; -FI_EINVAL for unknown enum values.
fn attr_from_c(a: &sys::fi_cq_attr) -> Result<CqAttr, Errno> {
    Ok(CqAttr {
        size: a.size,
        flags: Flags::from_bits_retain(a.flags),
        format: CqFormat::from_raw(a.format as i32)?,
        wait_obj: WaitObj::from_raw(a.wait_obj as i32)?,
        signaling_vector: a.signaling_vector,
        wait_cond: CqWaitCond::from_raw(a.wait_cond as i32)?,
        wait_set: a.wait_set as u64,
    })
}

/// The size of a CQ the application asks `size` entries for. `fi_cq_attr::size` is a
/// minimum (fi_cq(3)), and under FI_RM_ENABLED every posted operation reserves its
/// completion's entry, so a CQ smaller than the endpoint queues bound to it caps the
/// operations in flight at its size: -FI_EAGAIN from the post beyond it. Open MPI's
/// `mtl ofi` asks for 100 entries and, on -FI_EAGAIN from a send, progresses and
/// retries inside `MPI_Isend`: ranks that all had 100 sends waiting for receives their
/// peers had not posted yet stopped there for good. So a CQ holds at least one
/// endpoint's transmit and receive queues (the `tx_size` and `rx_size` getinfo
/// advertises): the limit is then the endpoint's own queue depth, as the application
/// was told.
pub fn min_cq_size(size: usize) -> usize {
    let cfg = crate::prov::config();
    size.max(cfg.tx_size + cfg.rx_size)
}

/// `fi_cq_open`.
///
/// # Safety
///
/// Called through the application's `fi_cq_open` with valid or NULL pointers.
pub unsafe extern "C" fn open(
    domain: *mut sys::fid_domain,
    attr: *mut sys::fi_cq_attr,
    cq: *mut *mut sys::fid_cq,
    context: *mut c_void,
) -> c_int {
    let make = || {
        // SAFETY: forwarded contract.
        let d = unsafe { DomainFid::from_c(domain) }?;
        // SAFETY: NULL or a valid attribute structure (application's contract).
        let a = attr_from_c(unsafe { attr.as_ref() }.ok_or(Errno::EINVAL)?)?;
        a.validate()?;
        let a = CqAttr {
            size: min_cq_size(a.size),
            ..a
        };
        let wait = Waiter::new(a.wait_obj, Some(d.link_fd), a.wait_set)?;
        let handle = d.control(|st| {
            let h = st.core.cq_open(&a, context as u64)?;
            if let Some(w) = wait.fd() {
                st.add_wake(Wake::Cq(h), crate::wait::event_fd(w));
            }
            Ok(h)
        })?;
        let format = match a.format {
            CqFormat::Unspec => DEFAULT_CQ_FORMAT,
            f => f,
        };
        Ok(CqFid {
            c: sys::fid_cq {
                fid: CqFid::header(context),
                ops: (&raw const CQ_OPS).cast_mut(),
            },
            at: InDomain::new(d, handle),
            format,
            wait,
        })
    };
    // SAFETY: NULL or writable (application's contract); a wait set's member joins it.
    unsafe { crate::wait::join::<CqFid, _>(cq, open_into(cq, make)) }
}

/// `fi_close(cq)`: -FI_EBUSY while an endpoint is bound to it.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    // SAFETY: forwarded contract.
    unsafe {
        crate::fid::close::<CqFid>(fid, |c| {
            c.at.domain().control(|st| {
                st.core.cq_close(c.at.handle)?;
                st.wakes.remove(Wake::Cq(c.at.handle));
                Ok(())
            })
        })
    }
}

/// Writes `e` as entry `i` of a C buffer of `format` entries.
///
/// # Safety
///
/// `buf` holds more than `i` entries of `format`.
unsafe fn write_entry(buf: *mut c_void, i: usize, format: CqFormat, e: &CqEntry) {
    let ctx = e.op_context as *mut c_void;
    let flags = e.flags.bits();
    let buf_ptr = e.buf as *mut c_void;
    // SAFETY: (every arm) entry `i` of the format's array is in bounds (contract);
    // unaligned writes tolerate any buffer.
    unsafe {
        match format {
            CqFormat::Unspec | CqFormat::Context => buf
                .cast::<sys::fi_cq_entry>()
                .add(i)
                .write_unaligned(sys::fi_cq_entry { op_context: ctx }),
            CqFormat::Msg => {
                buf.cast::<sys::fi_cq_msg_entry>()
                    .add(i)
                    .write_unaligned(sys::fi_cq_msg_entry {
                        op_context: ctx,
                        flags,
                        len: e.len,
                    })
            }
            CqFormat::Data => {
                buf.cast::<sys::fi_cq_data_entry>()
                    .add(i)
                    .write_unaligned(sys::fi_cq_data_entry {
                        op_context: ctx,
                        flags,
                        len: e.len,
                        buf: buf_ptr,
                        data: e.data,
                    })
            }
            CqFormat::Tagged => buf
                .cast::<sys::fi_cq_tagged_entry>()
                .add(i)
                .write_unaligned(sys::fi_cq_tagged_entry {
                    op_context: ctx,
                    flags,
                    len: e.len,
                    buf: buf_ptr,
                    data: e.data,
                    tag: e.tag,
                }),
        }
    }
}

/// fi_cq_read / fi_cq_readfrom on a locked CQ: up to `count` completions into the C
/// buffer, in chunks; a later chunk's error ends the read with what was read.
///
/// # Safety
///
/// `buf` holds `count` entries of `format`; `src` is NULL or holds `count` addresses.
unsafe fn read_locked(
    q: &mut CqObj<Heap>,
    format: CqFormat,
    buf: *mut c_void,
    count: usize,
    src: *mut FiAddr,
) -> Result<usize, Errno> {
    if q.is_empty() {
        // The common answer of a polling loop (-FI_EAGAIN, or -FI_EOVERRUN), without
        // clearing the chunk buffers below first.
        return q.read::<CqEntry>(&mut []);
    }
    // Most readers ask for one entry at a time: a small chunk spares them clearing
    // a large one on every completion.
    if count <= SMALL_CHUNK {
        // SAFETY: forwarded contract.
        unsafe { read_chunks::<SMALL_CHUNK>(q, format, buf, count, src) }
    } else {
        // SAFETY: forwarded contract.
        unsafe { read_chunks::<CHUNK>(q, format, buf, count, src) }
    }
}

/// The body of [`read_locked`], through a stack chunk of `N` entries.
///
/// # Safety
///
/// As [`read_locked`].
unsafe fn read_chunks<const N: usize>(
    q: &mut CqObj<Heap>,
    format: CqFormat,
    buf: *mut c_void,
    count: usize,
    src: *mut FiAddr,
) -> Result<usize, Errno> {
    let mut entries = [CqEntry::default(); N];
    let mut addrs = [0 as FiAddr; N];
    let mut total = 0;
    loop {
        let n = (count - total).min(N);
        let got = if src.is_null() {
            q.read(&mut entries[..n])
        } else {
            q.readfrom(&mut entries[..n], &mut addrs[..n])
        };
        let got = match got {
            Ok(k) => k,
            Err(_) if total > 0 => return Ok(total),
            Err(e) => return Err(e),
        };
        for (j, e) in entries[..got].iter().enumerate() {
            // SAFETY: total + j < count entries fit (contract).
            unsafe { write_entry(buf, total + j, format, e) };
            if !src.is_null() {
                // SAFETY: `src` holds `count` addresses (contract).
                unsafe { src.add(total + j).write_unaligned(addrs[j]) };
            }
        }
        total += got;
        if got < n || total == count {
            return Ok(total);
        }
    }
}

/// The shared body of read and readfrom.
///
/// # Safety
///
/// Pointers as the application passed them.
unsafe fn do_read(
    cq_p: *mut sys::fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut FiAddr,
    from: bool,
) -> isize {
    // SAFETY: forwarded contract.
    let c = arg!(unsafe { cq(cq_p) });
    if count > 0 && (buf.is_null() || (from && src.is_null())) {
        return ret_len(Err(Errno::EINVAL));
    }
    ret_len(c.at.domain().data(|st| {
        // A read of nothing (count 0) is how applications drive progress: always a pass.
        let queued = count > 0 && !st.core.cq_mut(c.at.handle)?.is_empty();
        let queue = st.cq_queue(c.at.handle);
        st.progress_unless_queued(queued, queue);
        // SAFETY: buffers hold `count` entries (application's contract).
        unsafe { read_locked(st.core.cq_mut(c.at.handle)?, c.format, buf, count, src) }
    }))
}

/// `fi_cq_read`.
unsafe extern "C" fn read(cq: *mut sys::fid_cq, buf: *mut c_void, count: usize) -> isize {
    // SAFETY: forwarded.
    unsafe { do_read(cq, buf, count, std::ptr::null_mut(), false) }
}

/// `fi_cq_readfrom`.
unsafe extern "C" fn readfrom(
    cq: *mut sys::fid_cq,
    buf: *mut c_void,
    count: usize,
    src_addr: *mut sys::fi_addr_t,
) -> isize {
    // SAFETY: forwarded.
    unsafe { do_read(cq, buf, count, src_addr, true) }
}

/// `fi_cq_readerr`: the error entry at the head (returns 1). With API >= 1.5 and an
/// `err_data_size`, error data is copied to the application's buffer; otherwise
/// `err_data` points at the CQ's own copy, valid until the next read.
unsafe extern "C" fn readerr(
    cq_p: *mut sys::fid_cq,
    buf: *mut sys::fi_cq_err_entry,
    flags: u64,
) -> isize {
    // SAFETY: forwarded contract.
    let c = arg!(unsafe { cq(cq_p) });
    if buf.is_null() {
        return ret_len(Err(Errno::EINVAL));
    }
    let api = c.at.domain().api_version();
    let new_layout = api >= ofi_nostd::cq::API_VERSION_1_5;
    // SAFETY: `buf` is the application's entry; err_data exists from API 1.5 on.
    let user = new_layout.then(|| unsafe { ((*buf).err_data, (*buf).err_data_size) });
    let mut err_data = ErrDataBuf::new(user);
    let r = c.with(|q| {
        let out = q.readerr(Flags::from_bits_retain(flags), api, err_data.scratch())?;
        // SAFETY: the application's err_data holds its err_data_size bytes.
        let (data_ptr, data_len) = unsafe { err_data.place(out.err_data, q.last_err_data()) };
        // SAFETY: `buf` is writable for its layout; the 1.0 layout has no
        // err_data_size, so it is only written for API >= 1.5.
        unsafe {
            (*buf).op_context = out.op_context as *mut c_void;
            (*buf).flags = out.flags;
            (*buf).len = out.len;
            (*buf).buf = out.buf as *mut c_void;
            (*buf).data = out.data;
            (*buf).tag = out.tag;
            (*buf).olen = out.olen;
            (*buf).err = out.err;
            (*buf).prov_errno = out.prov_errno;
            (*buf).err_data = data_ptr;
            if new_layout {
                (*buf).err_data_size = data_len;
            }
        }
        Ok(1)
    });
    ret_len(r)
}

/// The blocking reads: until entries (or the FI_CQ_COND_THRESHOLD count), an error
/// entry, fi_cq_signal or the timeout (-FI_EAGAIN), driving progress meanwhile.
/// FI_WAIT_FD / FI_WAIT_UNSPEC sleep on the CQ's fd set between passes (woken by
/// frames, the core's timers or a signal); FI_WAIT_YIELD polls. -FI_ENOSYS without a
/// wait object.
///
/// # Safety
///
/// Pointers as the application passed them.
unsafe fn do_sread(
    cq_p: *mut sys::fid_cq,
    buf: *mut c_void,
    count: usize,
    src: *mut FiAddr,
    cond: *const c_void,
    timeout: c_int,
    from: bool,
) -> isize {
    // SAFETY: forwarded contract.
    let c = arg!(unsafe { cq(cq_p) });
    if count > 0 && (buf.is_null() || (from && src.is_null())) {
        return ret_len(Err(Errno::EINVAL));
    }
    let threshold = match c.with(|q| {
        q.check_sread()?;
        Ok(q.attr().wait_cond)
    }) {
        Ok(CqWaitCond::Threshold) if !cond.is_null() => {
            // SAFETY: with FI_CQ_COND_THRESHOLD, `cond` points to a size_t.
            unsafe { cond.cast::<usize>().read_unaligned() }
        }
        Ok(_) => 1,
        Err(e) => return ret_len(Err(e)),
    };
    // One pass: Ok(Some(n)) read n, Ok(None) nothing yet (the wait is armed), Err.
    let step = |armed: &mut Option<std::time::Duration>| {
        c.progress_with(|st| {
            c.wait.drain();
            // Armed (Ok): a signal or an insertion that reaches the threshold raises
            // the wake-up, which progress turns into a readable fd.
            match st.core.cq_mut(c.at.handle)?.trywait_cond(threshold) {
                Ok(()) => {
                    st.note_wait();
                    *armed = st.next_timer();
                    Ok(None)
                }
                Err(Errno::EAGAIN) => {
                    let q = st.core.cq_mut(c.at.handle)?;
                    // SAFETY: buffers hold `count` entries (application's contract).
                    match unsafe { read_locked(q, c.format, buf, count, src) } {
                        Err(Errno::EAGAIN) if q.take_signal() => Err(Errno::EAGAIN),
                        Err(Errno::EAGAIN) => Ok(None),
                        other => other.map(Some),
                    }
                }
                Err(e) => Err(e),
            }
        })
    };
    let r = c.wait.block(timeout, Errno::EAGAIN, step);
    ret_len(r)
}

/// `fi_cq_sread`.
unsafe extern "C" fn sread(
    cq: *mut sys::fid_cq,
    buf: *mut c_void,
    count: usize,
    cond: *const c_void,
    timeout: c_int,
) -> isize {
    // SAFETY: forwarded.
    unsafe { do_sread(cq, buf, count, std::ptr::null_mut(), cond, timeout, false) }
}

/// `fi_cq_sreadfrom`.
unsafe extern "C" fn sreadfrom(
    cq: *mut sys::fid_cq,
    buf: *mut c_void,
    count: usize,
    src_addr: *mut sys::fi_addr_t,
    cond: *const c_void,
    timeout: c_int,
) -> isize {
    // SAFETY: forwarded.
    unsafe { do_sread(cq, buf, count, src_addr, cond, timeout, true) }
}

/// `fi_cq_signal`: wakes a blocked sread (-FI_ENOSYS without a wait object).
unsafe extern "C" fn signal(cq_p: *mut sys::fid_cq) -> c_int {
    // SAFETY: forwarded contract.
    match unsafe { cq(cq_p) } {
        Ok(c) => ret(c.at.domain().data(|st| {
            st.core.cq_mut(c.at.handle)?.signal()?;
            st.note_wait();
            st.wake();
            Ok(())
        })),
        Err(e) => neg(e),
    }
}

/// `fi_cq_strerror`.
unsafe extern "C" fn strerror(
    _cq: *mut sys::fid_cq,
    prov_errno: c_int,
    _err_data: *const c_void,
    buf: *mut c_char,
    len: usize,
) -> *const c_char {
    // SAFETY: `buf` is NULL or holds `len` bytes (application's contract).
    unsafe { crate::util::strerror(prov_errno, buf, len) }
}

/// fi_trywait for a CQ (`Err` if `f` is not one of our CQs): runs progress, then
/// -FI_EAGAIN when something is readable; otherwise arms the wake-up and the timer for
/// the core's next deadline, so the fd becomes readable when there is something to do.
///
/// # Safety
///
/// `f` is NULL or a fid.
pub unsafe fn trywait(f: *mut sys::fid) -> Result<Result<(), Errno>, Errno> {
    // SAFETY: forwarded contract.
    let c = unsafe { object::<CqFid>(f) }?;
    Ok(c.progress_with(|st| {
        c.wait.drain();
        st.core.cq_mut(c.at.handle)?.trywait()?;
        st.note_wait();
        c.wait.armed(st.next_timer());
        Ok(())
    }))
}
