//! RMA (fi_rma(3)): writes and reads of a peer's registered memory. Only the RDM
//! engine carries them; the common end of an RMA or atomic post is
//! [`Domain::submit_rdm`]. A build without the `rma` feature keeps the calls, which
//! return -FI_ENOSYS (fi_provider(7): an operation the provider does not support),
//! and none of their code.

use super::{Domain, obj};
use crate::ep::EpHandle;
use crate::errno::{Errno, Result};
use crate::flags::{FiAddr, Flags};
#[cfg(feature = "rma")]
use crate::iov::IovList;
use crate::mem::{IoVec, Memory};
#[cfg(feature = "rma")]
use crate::rdm::SendReq;
use crate::storage::Storage;

/// The remote side of an RMA operation (`struct fi_rma_iov`): an address in the
/// target's registered region (an offset unless FI_MR_VIRT_ADDR), a length and the
/// region's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmaIov {
    /// Remote address.
    pub addr: u64,
    /// Bytes.
    pub len: u64,
    /// The region's remote key.
    pub key: u64,
}

/// Arguments of `fi_writemsg` / `fi_readmsg` (`struct fi_msg_rma` with one remote iov).
#[derive(Debug, Clone, Copy)]
pub struct RmaArgs<'a> {
    /// The local buffers (the source of a write, the destination of a read).
    pub iov: &'a [IoVec],
    /// Local descriptors, checked only under FI_MR_LOCAL.
    pub desc: &'a [u64],
    /// The target.
    pub addr: FiAddr,
    /// Where at the target.
    pub rma: RmaIov,
    /// The application's context.
    pub context: u64,
    /// Remote CQ data (a write with FI_REMOTE_CQ_DATA).
    pub data: u64,
}

impl<'a> RmaArgs<'a> {
    /// `iov` to or from `rma` at `addr`, with `context`.
    pub fn new(iov: &'a [IoVec], addr: FiAddr, rma: RmaIov, context: u64) -> Self {
        RmaArgs {
            iov,
            desc: &[],
            addr,
            rma,
            context,
            data: 0,
        }
    }
}

impl<S: Storage> Domain<S> {
    /// `fi_writemsg`: writes the local buffers into the peer's registered memory
    /// (`msg.rma`: remote address, length, key); with FI_REMOTE_CQ_DATA the target
    /// also gets `msg.data` in a completion. Completes when the target answered (its
    /// checks failed: an error completion, -FI_EACCES). -FI_EOPNOTSUPP without FI_RMA
    /// (and FI_WRITE, when the endpoint named directions) or on a DGRAM endpoint,
    /// -FI_EINVAL when the local and remote lengths differ, -FI_EMSGSIZE beyond
    /// `max_msg_size` (or `inject_size` with FI_INJECT), -FI_EAGAIN when the transmit
    /// queue or CQ is full; -FI_ENOSYS in a build without the `rma` feature.
    pub fn writemsg(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        msg: &RmaArgs<'_>,
        flags: Flags,
    ) -> Result<()> {
        self.post_rma(h, mem, msg, flags, false, false)
    }

    /// `fi_inject_write` (`fi_inject_writedata` with `data`): a write whose buffer may
    /// be reused at once, without a completion (a failure still completes with an
    /// error entry).
    pub fn inject_write(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        buf: IoVec,
        dest: FiAddr,
        rma: RmaIov,
        data: Option<u64>,
    ) -> Result<()> {
        let mut flags = obj(self.eps.get(h))?.tx_flags | Flags::INJECT;
        let iov = [buf];
        let mut m = RmaArgs::new(&iov, dest, rma, 0);
        if let Some(d) = data {
            m.data = d;
            flags |= Flags::REMOTE_CQ_DATA;
        }
        self.post_rma(h, mem, &m, flags, false, true)
    }

    /// `fi_readmsg`: reads the peer's registered memory (`msg.rma`) into the local
    /// buffers. Errors as [`Domain::writemsg`]; FI_INJECT and FI_REMOTE_CQ_DATA are
    /// -FI_EINVAL.
    pub fn readmsg(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        msg: &RmaArgs<'_>,
        flags: Flags,
    ) -> Result<()> {
        self.post_rma(h, mem, msg, flags, true, false)
    }

    #[cfg(feature = "rma")]
    fn post_rma(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        msg: &RmaArgs<'_>,
        flags: Flags,
        read: bool,
        no_completion: bool,
    ) -> Result<()> {
        #[cfg(feature = "shared-ctx")]
        self.stx_admit(h)?;
        let ep = obj(self.eps.get_mut(h))?;
        ep.require_enabled()?;
        let dirs =
            ep.caps & (Flags::READ | Flags::WRITE | Flags::REMOTE_READ | Flags::REMOTE_WRITE);
        let dir = if read { Flags::READ } else { Flags::WRITE };
        if !ep.caps.contains(Flags::RMA) || !(dirs.is_empty() || dirs.contains(dir)) || !ep.is_rdm()
        {
            return Err(Errno::EOPNOTSUPP);
        }
        let iov = IovList::new(msg.iov, ep.tx_iov_limit)?;
        let len = iov.total_len();
        if len as u64 != msg.rma.len || msg.rma.addr.checked_add(msg.rma.len).is_none() {
            return Err(Errno::EINVAL);
        }
        if len > ep.max_msg_size {
            return Err(Errno::EMSGSIZE);
        }
        let injected = flags.contains(Flags::INJECT);
        if read && (injected || flags.contains(Flags::REMOTE_CQ_DATA)) {
            return Err(Errno::EINVAL);
        }
        if injected && len > ep.inject_size {
            return Err(Errno::EMSGSIZE);
        }
        if self.res.mrs.mr_mode().contains(crate::flags::MrMode::LOCAL) && !injected {
            for (i, v) in iov.as_slice().iter().enumerate() {
                self.res
                    .mrs
                    .check_local(msg.desc.get(i).copied().unwrap_or(0), *v, dir)?;
            }
        }
        let (addr, context) = (msg.addr, msg.context);
        let data = flags.contains(Flags::REMOTE_CQ_DATA).then_some(msg.data);
        let rma = Some((msg.rma.key, msg.rma.addr, read));
        self.submit_rdm(
            h,
            mem,
            addr,
            flags,
            no_completion,
            |completion, reserved| SendReq {
                iov,
                len,
                context,
                tag: None,
                data,
                flags,
                completion,
                reserved,
                rma,
                atomic: None,
            },
        )
    }

    /// A build without RMA serves no RMA call.
    #[cfg(not(feature = "rma"))]
    fn post_rma(
        &mut self,
        _: EpHandle<S>,
        _: &impl Memory,
        _: &RmaArgs<'_>,
        _: Flags,
        _read: bool,
        _no_completion: bool,
    ) -> Result<()> {
        Err(Errno::ENOSYS)
    }

    /// The common end of an RMA or atomic post, once the call's own checks passed:
    /// resolves `dest`, reserves a transmit-CQ slot (unless `no_completion`), hands the
    /// request `build` makes (told whether a success completes and whether a slot was
    /// reserved) to the engine, and gives the slot back if the engine refused it.
    #[cfg(feature = "rma")]
    pub(super) fn submit_rdm(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        dest: FiAddr,
        flags: Flags,
        no_completion: bool,
        build: impl FnOnce(bool, bool) -> SendReq,
    ) -> Result<()> {
        let ep = obj(self.eps.get_mut(h))?;
        if flags.intersects(crate::ep::unsupported_tx_flags(ep.ep_type)) {
            return Err(Errno::EBADFLAGS);
        }
        // A connected endpoint sends to its peer whatever `dest_addr` says (fi_msg(3)).
        let dest_addr = if ep.ep_type == crate::info::EpType::Msg {
            self.cm.send_peer(h.index())?
        } else {
            let av = obj(ep.av.and_then(|a| self.res.avs.get(a)))?;
            av.resolve_ep(dest).map_err(|_| Errno::EINVAL)?
        };
        let tx_cq = obj(ep.tx_cq.as_ref())?;
        let tx_cq_h = tx_cq.cq;
        let completion = !no_completion && (!tx_cq.selective || flags.contains(Flags::COMPLETION));
        let cq = obj(self.res.cqs.get_mut(tx_cq_h))?;
        let reserved = self.res.rm_enabled && !no_completion;
        if reserved {
            cq.try_reserve()?;
        }
        let req = build(completion, reserved);
        let now = self.last_now;
        let (mut ctx, rdm) = self.res.rdm_ctx(ep);
        let r = match rdm {
            Some(r) => r.post_send(now, dest_addr, &req, mem, &mut ctx),
            None => Err(Errno::EOPNOTSUPP),
        };
        if r.is_err()
            && reserved
            && let Some(cq) = self.res.cqs.get_mut(tx_cq_h)
        {
            cq.release();
        }
        r
    }
}
