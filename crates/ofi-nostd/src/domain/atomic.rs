//! Atomics (fi_atomic(3)): the checks of an atomic post and its limits
//! (`fi_atomicvalid`, `fi_query_atomic`); the operations themselves are
//! [`crate::atomic`]. A build without the `atomic` feature keeps the calls, which
//! return -FI_ENOSYS, and none of their code.

use wire::packet::{AtomicDatatype, AtomicOp};

use super::{Domain, RmaIov, obj};
use crate::atomic::AtomicKind;
use crate::ep::EpHandle;
use crate::errno::{Errno, Result};
use crate::flags::{FiAddr, Flags};
#[cfg(feature = "atomic")]
use crate::iov::IovList;
use crate::mem::{IoVec, Memory};
#[cfg(feature = "atomic")]
use crate::rdm::SendReq;
use crate::storage::Storage;

/// Arguments of `fi_atomicmsg` & co. (`struct fi_msg_atomic` with one remote iov).
#[derive(Debug, Clone, Copy)]
pub struct AtomicArgs<'a> {
    /// The operands (the swap values of compare operations; none for ATOMIC_READ).
    pub iov: &'a [IoVec],
    /// The target.
    pub addr: FiAddr,
    /// Where at the target (its `len` is ignored: `count` elements).
    pub rma: RmaIov,
    /// Element type.
    pub datatype: AtomicDatatype,
    /// Operation.
    pub op: AtomicOp,
    /// Elements.
    pub count: usize,
    /// The application's context.
    pub context: u64,
    /// Remote CQ data (with FI_REMOTE_CQ_DATA).
    pub data: u64,
}

impl<S: Storage> Domain<S> {
    /// `fi_atomicmsg`: applies `msg.op` to `msg.count` elements of `msg.datatype` at the
    /// peer's `msg.rma` (address and key; its length is implied) with the operands in
    /// `msg.iov`. Operands are copied by the call (the buffer may be reused at once).
    /// -FI_EOPNOTSUPP for an operation or datatype [`Domain::atomic_valid`] refuses or
    /// without FI_ATOMIC, -FI_EINVAL for a count of 0, beyond that limit, or operand
    /// buffers of another length. Completes on the target's answer (-FI_EACCES: refused
    /// by its registration). -FI_ENOSYS in a build without the `atomic` feature, as
    /// every call here.
    pub fn atomicmsg(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        msg: &AtomicArgs<'_>,
        flags: Flags,
    ) -> Result<()> {
        self.post_atomic(
            h,
            mem,
            msg,
            flags,
            AtomicKind::Write,
            IoVec::new(0, 0),
            IoVec::new(0, 0),
        )
    }

    /// `fi_fetch_atomicmsg`: as [`Domain::atomicmsg`] (FI_ATOMIC_READ too), and the
    /// original values land in `result` (one buffer of the elements' length).
    pub fn fetch_atomicmsg(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        msg: &AtomicArgs<'_>,
        result: IoVec,
        flags: Flags,
    ) -> Result<()> {
        self.post_atomic(
            h,
            mem,
            msg,
            flags,
            AtomicKind::Fetch,
            IoVec::new(0, 0),
            result,
        )
    }

    /// `fi_compare_atomicmsg`: the compare-and-swap family; `compare` holds the compare
    /// values (MSWAP: the mask), `msg.iov` the swap values, and the original values land
    /// in `result`.
    pub fn compare_atomicmsg(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        msg: &AtomicArgs<'_>,
        compare: IoVec,
        result: IoVec,
        flags: Flags,
    ) -> Result<()> {
        self.post_atomic(h, mem, msg, flags, AtomicKind::Compare, compare, result)
    }

    /// `fi_atomicvalid` / `fi_fetch_atomicvalid` / `fi_compare_atomicvalid`: the most
    /// elements one call of `kind` may carry for `op` on `datatype` at endpoint `h`, or
    /// -FI_EOPNOTSUPP.
    pub fn atomic_valid(
        &self,
        h: EpHandle<S>,
        op: AtomicOp,
        datatype: AtomicDatatype,
        kind: AtomicKind,
    ) -> Result<usize> {
        let ep = obj(self.eps.get(h))?;
        if !cfg!(feature = "atomic") {
            return Err(Errno::ENOSYS);
        }
        if !ep.caps.contains(Flags::ATOMIC) || !ep.is_rdm() {
            return Err(Errno::EOPNOTSUPP);
        }
        let n = crate::atomic::valid(op, datatype, kind)?;
        // The operands wait in the operation's inject slot.
        let per = datatype.size() * op.operand_arrays().max(1);
        let n = n.min(ep.inject_size / per);
        if n == 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        Ok(n)
    }

    /// `fi_query_atomic`: [`Domain::atomic_valid`] for the domain's endpoints (their
    /// inject size bounds the operands).
    pub fn query_atomic(
        &self,
        op: AtomicOp,
        datatype: AtomicDatatype,
        kind: AtomicKind,
    ) -> Result<usize> {
        if !cfg!(feature = "atomic") {
            return Err(Errno::ENOSYS);
        }
        let n = crate::atomic::valid(op, datatype, kind)?;
        let per = datatype.size() * op.operand_arrays().max(1);
        match n.min(self.info.tx_attr.inject_size / per) {
            0 => Err(Errno::EOPNOTSUPP),
            n => Ok(n),
        }
    }

    /// A build without atomics serves no atomic call.
    #[cfg(not(feature = "atomic"))]
    #[allow(clippy::too_many_arguments)]
    fn post_atomic(
        &mut self,
        _: EpHandle<S>,
        _: &impl Memory,
        _: &AtomicArgs<'_>,
        _: Flags,
        _: AtomicKind,
        _compare: IoVec,
        _result: IoVec,
    ) -> Result<()> {
        Err(Errno::ENOSYS)
    }

    #[cfg(feature = "atomic")]
    #[allow(clippy::too_many_arguments)]
    fn post_atomic(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        msg: &AtomicArgs<'_>,
        flags: Flags,
        kind: AtomicKind,
        compare: IoVec,
        result: IoVec,
    ) -> Result<()> {
        let max = self.atomic_valid(h, msg.op, msg.datatype, kind)?;
        #[cfg(feature = "shared-ctx")]
        self.stx_admit(h)?;
        let ep = obj(self.eps.get_mut(h))?;
        ep.require_enabled()?;
        let dirs = ep.caps & (Flags::READ | Flags::WRITE);
        let dir = if kind == AtomicKind::Write {
            Flags::WRITE
        } else {
            Flags::READ
        };
        if !(dirs.is_empty() || dirs.contains(dir)) {
            return Err(Errno::EOPNOTSUPP);
        }
        let n = msg.count.saturating_mul(msg.datatype.size());
        let iov = IovList::new(msg.iov, ep.tx_iov_limit)?;
        let operands = if msg.op.operand_arrays() == 0 { 0 } else { n };
        if msg.count == 0
            || msg.count > max
            || (iov.total_len() != operands && !(operands == 0 && iov.total_len() == n))
            || (kind == AtomicKind::Compare && compare.len != n)
            || (kind != AtomicKind::Write && result.len != n)
            || msg.rma.addr.checked_add(n as u64).is_none()
            || flags.contains(Flags::REMOTE_CQ_DATA) && kind != AtomicKind::Write
        {
            return Err(Errno::EINVAL);
        }
        let iov = if operands == 0 {
            IovList::new(&[], 1)?
        } else {
            iov
        };
        let no_completion = flags.contains(Flags::INJECT) && kind == AtomicKind::Write;
        let meta = crate::rdm::AtomicReq {
            meta: crate::rdm::AtomicMeta {
                op: msg.op,
                dt: msg.datatype,
                count: msg.count as u16,
                fetch: kind != AtomicKind::Write,
                served: crate::served::Atomic::SERVED.ok_or(Errno::ENOSYS)?,
            },
            compare,
            result,
        };
        let (addr, context) = (msg.addr, msg.context);
        let data = flags.contains(Flags::REMOTE_CQ_DATA).then_some(msg.data);
        let rma = Some((msg.rma.key, msg.rma.addr, false));
        self.submit_rdm(
            h,
            mem,
            addr,
            flags,
            no_completion,
            |completion, reserved| SendReq {
                iov,
                len: n,
                context,
                tag: None,
                data,
                // The operands are copied now: never a reference to the caller's buffer.
                flags: flags.difference(Flags::INJECT),
                completion,
                reserved,
                rma,
                atomic: Some(meta),
            },
        )
    }
}
