//! `struct fid_av`: address vectors (fi_av(3)).
//!
//! Addresses are in the domain's format: packed 16-byte `struct sockaddr_in`s
//! (FI_SOCKADDR_IN, the native one) or, for an FI_ADDR_STR domain, `char *` strings.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering};

use ofi_nostd::Errno;
use ofi_nostd::addr::{self, ADDR_LEN, EpAddr};
use ofi_nostd::av::{AvAddrs, AvAttr, AvType, FI_EVENT, FI_SYNC_ERR};
use ofi_nostd::domain::{AvHandle, AvObj};
use ofi_nostd::flags::{FiAddr, Flags};
use ofi_nostd::info::AddrFormat;

use crate::domain::{DomainFid, InDomain};
use crate::eq::EqFid;
use crate::fid::{FidObject, no_control, no_ops_open, no_ops_set, no_tostr, object, open_into};
use crate::sys;
use crate::util::{arg, bytes, cstr, neg, ret};
use hosted::storage::Heap;

/// The fewest addresses an AV holds, whatever its `count` hint says.
pub const MIN_AV_COUNT: usize = 1024;

/// Longest address string handled (FI_ADDR_STR lookups and straddr).
const STR_MAX: usize = 128;

/// An open address vector.
#[repr(C)]
pub struct AvFid {
    c: sys::fid_av,
    /// The domain it was opened on, and its core handle there.
    pub(crate) at: InDomain<AvHandle<Heap>>,
    /// Opened with FI_EVENT: inserts complete through the bound EQ.
    event: bool,
    /// The EQ bound with fi_av_bind (NULL: none).
    eq: AtomicPtr<EqFid>,
}

static AV_FI_OPS: sys::fi_ops = sys::fi_ops {
    size: size_of::<sys::fi_ops>(),
    close: Some(close),
    bind: Some(bind),
    control: Some(no_control),
    ops_open: Some(no_ops_open),
    tostr: Some(no_tostr),
    ops_set: Some(no_ops_set),
};

static AV_OPS: sys::fi_ops_av = sys::fi_ops_av {
    size: size_of::<sys::fi_ops_av>(),
    insert: Some(insert),
    insertsvc: Some(insertsvc),
    insertsym: Some(insertsym),
    remove: Some(remove),
    lookup: Some(lookup),
    straddr: Some(straddr),
    av_set: Some(av_set),
};

// SAFETY: #[repr(C)] with the fid_av (fid first) as first field; only `open` makes fids
// with this class and ops.
unsafe impl FidObject for AvFid {
    const CLASS: u32 = sys::FI_CLASS_AV;
    fn fi_ops() -> *const sys::fi_ops {
        &raw const AV_FI_OPS
    }
}

impl AvFid {
    fn is_str(&self) -> bool {
        self.at.domain().addr_format == AddrFormat::STR
    }

    /// Runs `f` on the core AV under the domain lock.
    fn with<R>(&self, f: impl FnOnce(&mut AvObj<Heap>) -> Result<R, Errno>) -> Result<R, Errno> {
        self.at.domain().with(|d| f(d.av_mut(self.at.handle)?))
    }
}

/// The AV behind `p`.
///
/// # Safety
///
/// As [`object`].
unsafe fn av<'a>(p: *const sys::fid_av) -> Result<&'a AvFid, Errno> {
    // SAFETY: forwarded contract; the fid is the first field.
    unsafe { object::<AvFid>(p.cast()) }
}

/// `fi_av_open`. Named (shared) AVs are -FI_ENOSYS; with FI_EVENT, inserts complete
/// through the EQ bound with fi_av_bind.
///
/// # Safety
///
/// Called through the application's `fi_av_open` with valid or NULL pointers.
pub unsafe extern "C" fn open(
    domain: *mut sys::fid_domain,
    attr: *mut sys::fi_av_attr,
    av: *mut *mut sys::fid_av,
    context: *mut c_void,
) -> c_int {
    let make = || {
        // SAFETY: forwarded contract.
        let d = unsafe { DomainFid::from_c(domain) }?;
        // SAFETY: NULL or a valid attribute structure (application's contract).
        let a = unsafe { attr.as_ref() }.ok_or(Errno::EINVAL)?;
        let mut attr = AvAttr {
            av_type: AvType::from_raw(a.type_).ok_or(Errno::EINVAL)?,
            rx_ctx_bits: a.rx_ctx_bits,
            // `count` is only a hint (fi_av(3)) and the core's table does not grow:
            // applications size it from counts that leave themselves out (Open MPI
            // passes the number of its local peers), so never make it smaller than
            // MIN_AV_COUNT.
            count: a.count.max(MIN_AV_COUNT),
            ep_per_node: a.ep_per_node,
            // SAFETY: NULL or NUL-terminated (application's contract).
            name: unsafe { cstr(a.name) }?,
            map_addr: a.map_addr as u64,
            flags: Flags::from_bits_retain(a.flags),
        };
        let event = attr.flags.contains(FI_EVENT);
        let handle = d.with(|core| core.av_open(&mut attr, context as u64))?;
        Ok(AvFid {
            c: sys::fid_av {
                fid: AvFid::header(context),
                ops: (&raw const AV_OPS).cast_mut(),
            },
            at: InDomain::new(d, handle),
            event,
            eq: AtomicPtr::new(std::ptr::null_mut()),
        })
    };
    // SAFETY: NULL or writable (application's contract).
    unsafe { open_into(av, make) }
}

/// `fi_close(av)`: -FI_EBUSY while an endpoint is bound to it.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    let shut = |a: &AvFid| {
        a.at.domain().with(|d| d.av_close(a.at.handle))?;
        let eq = a.eq.load(Ordering::Acquire);
        if !eq.is_null() {
            // SAFETY: a bound EQ cannot close while bound (its fi_close is refused).
            unsafe { &*eq }.bind_ref(false);
        }
        Ok(())
    };
    // SAFETY: forwarded contract.
    unsafe { crate::fid::close::<AvFid>(fid, shut) }
}

/// `fi_av_bind`: an EQ of the same fabric (`flags` 0), once; -FI_EINVAL otherwise.
unsafe extern "C" fn bind(fid: *mut sys::fid, bfid: *mut sys::fid, flags: u64) -> c_int {
    // SAFETY: NULL or a fid (contract).
    let a = arg!(unsafe { object::<AvFid>(fid) });
    // SAFETY: NULL or a fid (contract).
    let q = arg!(unsafe { object::<EqFid>(bfid) });
    if !std::ptr::eq(q.fabric_ptr(), a.at.domain().fabric_ptr()) {
        return neg(Errno::EINVAL);
    }
    let token = std::ptr::from_ref(q) as u64;
    let flags = Flags::from_bits_retain(flags);
    arg!(a.with(|core| core.bind_eq(token, flags)));
    q.bind_ref(true);
    a.eq.store(std::ptr::from_ref(q).cast_mut(), Ordering::Release);
    0
}

/// The end of an FI_EVENT insert: one FI_AV_COMPLETE error entry per failed address
/// (`data` its index), then one FI_AV_COMPLETE entry with `data` = `inserted`, all with
/// the insert's `context`, on the bound EQ.
fn complete_async(
    a: &AvFid,
    context: *mut c_void,
    inserted: usize,
    failed: &[(usize, Errno)],
) -> Result<(), Errno> {
    use ofi_nostd::eq::{EqEntry, EqErrEntry, EqEvent, EqPayload};
    let eq = a.eq.load(Ordering::Acquire);
    if eq.is_null() {
        return Err(Errno::ENOEQ);
    }
    let fid = std::ptr::from_ref(a) as u64;
    let context = context as u64;
    // SAFETY: a bound EQ cannot close while bound.
    unsafe { &*eq }.post(|q| {
        for &(i, err) in failed {
            q.post_err(&EqErrEntry {
                data: i as u64,
                ..EqErrEntry::new(fid, context, err)
            })?;
        }
        let done = EqEntry {
            fid,
            context,
            data: inserted as u64,
        };
        q.post(EqEvent::AV_COMPLETE, EqPayload::Entry(done))
    })
}

/// The shared tail of the insert calls: out-arrays from C, then the insert of `addrs`
/// into the core AV; with FI_EVENT, its completion events and 0.
///
/// # Safety
///
/// `fi_addr` is NULL or holds `count` entries; with FI_SYNC_ERR `context` is NULL or
/// holds `count` ints.
unsafe fn insert_with(
    a: &AvFid,
    count: usize,
    fi_addr: *mut FiAddr,
    flags: u64,
    context: *mut c_void,
    addrs: Result<AvAddrs<'_>, Errno>,
) -> c_int {
    let list = arg!(addrs);
    let flags = Flags::from_bits_retain(flags);
    let mut addrs = Vec::new();
    if !fi_addr.is_null() {
        if addrs.try_reserve_exact(count).is_err() {
            return neg(Errno::ENOMEM);
        }
        // SAFETY: `fi_addr` holds `count` entries (contract); with FI_AV_USER_ID they
        // carry the user ids in.
        addrs.extend((0..count).map(|i| unsafe { fi_addr.add(i).read_unaligned() }));
    }
    let mut errs = Vec::new();
    let sync = flags.contains(FI_SYNC_ERR) && !context.is_null();
    if sync {
        if errs.try_reserve_exact(count).is_err() {
            return neg(Errno::ENOMEM);
        }
        errs.resize(count, 0i32);
    }
    let mut failed = Vec::new();
    let out = (!fi_addr.is_null()).then_some(&mut addrs[..]);
    let r = a.with(|q| {
        if a.event {
            q.insert_with(list, out, flags, |i, e| failed.push((i, e)))
        } else {
            q.insert(list, out, flags, sync.then_some(&mut errs[..]))
        }
    });
    if !fi_addr.is_null() {
        for (i, v) in addrs.iter().enumerate() {
            // SAFETY: as above.
            unsafe { fi_addr.add(i).write_unaligned(*v) };
        }
    }
    if sync {
        let out = context.cast::<c_int>();
        for (i, v) in errs.iter().enumerate() {
            // SAFETY: with FI_SYNC_ERR the context is an int array of `count` (contract).
            unsafe { out.add(i).write_unaligned(*v) };
        }
    }
    match r {
        Ok(n) if a.event => ret(complete_async(a, context, n, &failed)),
        Ok(n) => c_int::try_from(n).unwrap_or(c_int::MAX),
        Err(e) => neg(e),
    }
}

/// `fi_av_insert`: returns the number of addresses inserted.
unsafe extern "C" fn insert(
    av_p: *mut sys::fid_av,
    addr: *const c_void,
    count: usize,
    fi_addr: *mut sys::fi_addr_t,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    // SAFETY: forwarded contract.
    let a = arg!(unsafe { av(av_p) });
    if count > 0 && addr.is_null() {
        return neg(Errno::EINVAL);
    }
    if a.is_str() {
        let mut strs = Vec::new();
        if strs.try_reserve_exact(count).is_err() {
            return neg(Errno::ENOMEM);
        }
        let ptrs = addr.cast::<*const c_char>();
        for i in 0..count {
            // SAFETY: an FI_ADDR_STR insert passes `count` string pointers (contract).
            match unsafe { cstr(ptrs.add(i).read_unaligned()) } {
                Ok(Some(s)) => strs.push(s),
                _ => return neg(Errno::EINVAL),
            }
        }
        // SAFETY: out-arrays as the application passed them.
        return unsafe { insert_with(a, count, fi_addr, flags, context, Ok(AvAddrs::Str(&strs))) };
    }
    let Some(len) = count.checked_mul(ADDR_LEN) else {
        return neg(Errno::EINVAL);
    };
    // SAFETY: `count` sockaddr_in records (contract).
    let Some(raw) = (unsafe { bytes(addr, len) }) else {
        return neg(Errno::EINVAL);
    };

    // SAFETY: out-arrays as the application passed them.
    unsafe {
        insert_with(
            a,
            count,
            fi_addr,
            flags,
            context,
            Ok(AvAddrs::SockaddrIn(raw)),
        )
    }
}

/// `fi_av_insertsvc`.
unsafe extern "C" fn insertsvc(
    av_p: *mut sys::fid_av,
    node: *const c_char,
    service: *const c_char,
    fi_addr: *mut sys::fi_addr_t,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { insertsym(av_p, node, 1, service, 1, fi_addr, flags, context) }
}

/// `fi_av_insertsym`: `nodecnt` × `svccnt` consecutive addresses.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn insertsym(
    av_p: *mut sys::fid_av,
    node: *const c_char,
    nodecnt: usize,
    service: *const c_char,
    svccnt: usize,
    fi_addr: *mut sys::fi_addr_t,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    // SAFETY: forwarded contract.
    let a = arg!(unsafe { av(av_p) });
    // SAFETY: NULL or NUL-terminated (application's contract).
    let (node, service) = match unsafe { (cstr(node), cstr(service)) } {
        (Ok(Some(n)), Ok(s)) => (n, s),
        _ => return neg(Errno::EINVAL),
    };
    let Some(count) = nodecnt.checked_mul(svccnt) else {
        return neg(Errno::EINVAL);
    };
    let addrs = AvAddrs::sym(node, nodecnt, service, svccnt);
    // SAFETY: out-arrays as the application passed them.
    unsafe { insert_with(a, count, fi_addr, flags, context, addrs) }
}

/// `fi_av_remove`.
unsafe extern "C" fn remove(
    av_p: *mut sys::fid_av,
    fi_addr: *mut sys::fi_addr_t,
    count: usize,
    flags: u64,
) -> c_int {
    // SAFETY: forwarded contract.
    let a = arg!(unsafe { av(av_p) });
    let Some(len) = count.checked_mul(size_of::<FiAddr>()) else {
        return neg(Errno::EINVAL);
    };
    // SAFETY: `fi_addr` holds `count` values (contract).
    let Some(raw) = (unsafe { bytes(fi_addr.cast_const().cast(), len) }) else {
        return neg(Errno::EINVAL);
    };
    let list: Vec<FiAddr> = raw
        .chunks_exact(size_of::<FiAddr>())
        .map(|c| FiAddr::from_ne_bytes(c.try_into().unwrap_or_default()))
        .collect();
    ret(a.with(|q| q.remove(&list, Flags::from_bits_retain(flags))))
}

/// Copies `data` to the C buffer `addr` of `*addrlen` bytes, sets `*addrlen` to the
/// size needed; -FI_ETOOSMALL when it did not fit.
///
/// # Safety
///
/// `addr` is NULL or holds `*addrlen` bytes; `addrlen` is writable.
pub(crate) unsafe fn give(
    data: &[u8],
    addr: *mut c_void,
    addrlen: *mut usize,
) -> Result<(), Errno> {
    // SAFETY: readable and writable (contract).
    let room = unsafe { addrlen.read_unaligned() };
    let n = room.min(data.len());
    if n > 0 {
        // SAFETY: `addr` holds `room` >= n bytes (checked non-NULL by the caller).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), addr.cast::<u8>(), n) };
    }
    // SAFETY: writable (contract).
    unsafe { addrlen.write_unaligned(data.len()) };
    if room < data.len() {
        Err(Errno::ETOOSMALL)
    } else {
        Ok(())
    }
}

/// `fi_av_lookup`: the address stored for `fi_addr`; -FI_ETOOSMALL (with the needed
/// size in `*addrlen`) when the buffer is short.
unsafe extern "C" fn lookup(
    av_p: *mut sys::fid_av,
    fi_addr: sys::fi_addr_t,
    addr: *mut c_void,
    addrlen: *mut usize,
) -> c_int {
    // SAFETY: forwarded contract.
    let a = arg!(unsafe { av(av_p) });
    if addrlen.is_null() {
        return neg(Errno::EINVAL);
    }
    // SAFETY: checked non-NULL.
    if addr.is_null() && unsafe { addrlen.read_unaligned() } > 0 {
        return neg(Errno::EINVAL);
    }
    let ep = arg!(a.with(|q| q.lookup_addr(fi_addr)));
    let mut s = [0u8; STR_MAX];
    let data: &[u8] = if a.is_str() {
        let n = ep.straddr(&mut s).min(STR_MAX);
        &s[..n]
    } else {
        &ep.to_sockaddr_in()
    };
    // SAFETY: buffers checked above or the application's.
    ret(unsafe { give(data, addr, addrlen) })
}

/// `fi_av_straddr`: `addr` (in the domain's format) as text in `buf`, truncated to
/// `*len`; `*len` becomes the size needed. NULL for an address that is not ours.
unsafe extern "C" fn straddr(
    av_p: *mut sys::fid_av,
    addr: *const c_void,
    buf: *mut c_char,
    len: *mut usize,
) -> *const c_char {
    // SAFETY: forwarded contract.
    let Ok(a) = (unsafe { av(av_p) }) else {
        return std::ptr::null();
    };
    if addr.is_null() || buf.is_null() || len.is_null() {
        return std::ptr::null();
    }
    // SAFETY: checked non-NULL; the application's size of `buf`.
    let room = unsafe { len.read_unaligned() }.min(STR_MAX);
    let mut tmp = [0u8; STR_MAX];
    let needed = if a.is_str() {
        // SAFETY: an FI_ADDR_STR address is a NUL-terminated string.
        match unsafe { cstr(addr.cast()) } {
            Ok(Some(s)) => addr::straddr_str(s, &mut tmp[..room]),
            _ => return std::ptr::null(),
        }
    } else {
        // SAFETY: a FI_SOCKADDR_IN address is a 16-byte sockaddr_in.
        let Some(raw) = (unsafe { bytes(addr, ADDR_LEN) }) else {
            return std::ptr::null();
        };
        match EpAddr::from_sockaddr_in(raw) {
            Some(ep) => ep.straddr(&mut tmp[..room]),
            None => return std::ptr::null(),
        }
    };
    if room > 0 {
        let n = tmp[..room]
            .iter()
            .position(|&b| b == 0)
            .map_or(room, |p| p + 1);
        // SAFETY: `buf` holds at least `room` bytes (the application's `*len`).
        unsafe { std::ptr::copy_nonoverlapping(tmp.as_ptr(), buf.cast::<u8>(), n) };
    }
    // SAFETY: checked non-NULL.
    unsafe { len.write_unaligned(needed) };
    buf
}

/// `fi_av_set`: AV sets (collectives) are not offered.
unsafe extern "C" fn av_set(
    _av: *mut sys::fid_av,
    _attr: *mut sys::fi_av_set_attr,
    _av_set: *mut *mut sys::fid_av_set,
    _context: *mut c_void,
) -> c_int {
    neg(Errno::ENOSYS)
}
