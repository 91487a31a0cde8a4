//! C arguments as the core takes them: buffers and iov arrays, contexts, the memory
//! posts copy through, and the pass a post runs afterwards.

use std::ffi::c_void;

use hosted::mem::RawMemory;
use hosted::storage::Heap;
use ofi_nostd::Errno;
use ofi_nostd::domain::{Domain, EpHandle};
use ofi_nostd::ep::IOV_LIMIT;
use ofi_nostd::flags::Flags;
use ofi_nostd::mem::IoVec;

use super::ep;
use crate::sys;
use crate::util::ret_len;

/// A C pointer as the core's address (its provenance exposed for [`RawMemory`]).
pub(crate) fn addr<T>(p: *const T) -> u64 {
    p.expose_provenance() as u64
}

/// A C context as the core's `u64`.
pub(crate) fn ctx(p: *mut c_void) -> u64 {
    p as usize as u64
}

/// The memory posts copy through.
pub(crate) fn mem() -> RawMemory {
    // SAFETY: libfabric's buffer contract: the core reads a send buffer (at once for
    // inject, later for other sends) and writes a receive buffer only while its
    // operation is outstanding, and the application keeps every posted buffer valid
    // and untouched until then (fi_msg(3), fi_tagged(3)).
    unsafe { RawMemory::new() }
}

/// One buffer; -FI_EINVAL for NULL with a length.
pub(crate) fn one(buf: *const c_void, len: usize) -> Result<IoVec, Errno> {
    if buf.is_null() && len > 0 {
        return Err(Errno::EINVAL);
    }
    Ok(IoVec::new(addr(buf), len))
}

/// One receive buffer. NULL with a length holds nothing: an empty message completes
/// into it and one with data is truncated (FI_ETRUNC), never written at address 0.
/// Other providers take such posts without a look (fabtests' `fi_shared_ctx -e msg`
/// posts them for its empty messages), so a refusal would fail what works elsewhere.
pub(crate) fn one_rx(buf: *const c_void, len: usize) -> IoVec {
    IoVec::new(addr(buf), if buf.is_null() { 0 } else { len })
}

/// Whether endpoint `p`'s domain requires registered local buffers (FI_MR_LOCAL). Only
/// then are `desc` arguments read: fi_mr(3) has other providers ignore them, so
/// applications pass anything there (fabtests' `fi_multi_recv -M` one descriptor where
/// an array belongs, others stack garbage).
///
/// # Safety
///
/// `p` is NULL or a fid.
unsafe fn mr_local(p: *const sys::fid_ep) -> bool {
    // SAFETY: forwarded contract.
    unsafe { ep(p) }.is_ok_and(|e| e.at.domain().mr_local)
}

/// `desc` (an array of descriptors) if endpoint `p` reads descriptors, else NULL.
///
/// # Safety
///
/// `p` is NULL or a fid.
pub(crate) unsafe fn descs(p: *const sys::fid_ep, desc: *mut *mut c_void) -> *mut *mut c_void {
    // SAFETY: forwarded contract.
    if unsafe { mr_local(p) } {
        desc
    } else {
        std::ptr::null_mut()
    }
}

/// A one-buffer call's descriptor if endpoint `p` reads descriptors (FI_MR_LOCAL).
///
/// # Safety
///
/// `p` is NULL or a fid.
pub(crate) unsafe fn one_desc(p: *const sys::fid_ep, desc: *mut c_void) -> Option<u64> {
    // SAFETY: forwarded contract.
    unsafe { mr_local(p) }.then(|| addr(desc))
}

/// Up to [`IOV_LIMIT`] buffers and their descriptors from C arrays.
pub(crate) struct Iovs {
    iov: [IoVec; IOV_LIMIT],
    desc: [u64; IOV_LIMIT],
    n: usize,
}

impl Iovs {
    /// # Safety
    ///
    /// `iov` is NULL or holds `count` `struct iovec`s; `desc` is NULL or holds `count`
    /// pointers (NULL, through [`descs`], unless the domain has FI_MR_LOCAL).
    pub(crate) unsafe fn new(
        iov: *const sys::iovec,
        desc: *const *mut c_void,
        count: usize,
    ) -> Result<Iovs, Errno> {
        if count > IOV_LIMIT || (count > 0 && iov.is_null()) {
            return Err(Errno::EINVAL);
        }
        let mut out = Iovs {
            iov: [IoVec::default(); IOV_LIMIT],
            desc: [0; IOV_LIMIT],
            n: count,
        };
        for i in 0..count {
            // SAFETY: `count` entries (contract).
            let v = unsafe { iov.add(i).read_unaligned() };
            out.iov[i] = one(v.iov_base, v.iov_len)?;
            if !desc.is_null() {
                // SAFETY: as above.
                out.desc[i] = addr(unsafe { desc.add(i).read_unaligned() });
            }
        }
        Ok(out)
    }

    pub(crate) fn iov(&self) -> &[IoVec] {
        &self.iov[..self.n]
    }

    pub(crate) fn desc(&self) -> &[u64] {
        &self.desc[..self.n]
    }
}

/// The default receive flags of endpoint `h` (what the short receive calls use).
pub(crate) fn rx_flags(d: &Domain<Heap>, h: EpHandle<Heap>) -> Result<Flags, Errno> {
    d.ep(h)?.getopsflag(Flags::RECV)
}

/// The pass a data-path call runs once the core has taken it.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum After {
    /// None (a receive: nothing to send).
    Nothing,
    /// The transmit half of a pass, so a send's packet leaves at once.
    Transmit,
    /// A full pass.
    Progress,
}

impl After {
    /// After a send posted with `flags`: FI_MORE says more posts follow at once, so
    /// the transmit pass waits for the last of them (or the next progress call) and
    /// the batch leaves together (fi_msg(3)).
    pub(crate) fn sent(flags: u64) -> After {
        if Flags::from_bits_retain(flags).contains(Flags::MORE) {
            After::Nothing
        } else {
            After::Transmit
        }
    }
}

/// Runs a post on endpoint `p` and returns its `ssize_t`.
///
/// # Safety
///
/// `p` is NULL or a fid.
pub(crate) unsafe fn post(
    p: *mut sys::fid_ep,
    kick: After,
    f: impl FnOnce(&mut Domain<Heap>, EpHandle<Heap>) -> Result<(), Errno>,
) -> isize {
    // SAFETY: forwarded contract.
    match unsafe { ep(p) } {
        Ok(e) => ret_len(e.op(kick, f).map(|()| 0)),
        Err(err) => ret_len(Err(err)),
    }
}
