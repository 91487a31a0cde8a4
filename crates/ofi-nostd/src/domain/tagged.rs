//! Tagged messages (fi_tagged(3)): the message posts of [`super::msg`] with a tag,
//! and the peek / claim / discard receives.

use super::{Domain, MsgArgs, obj};
use crate::ep::EpHandle;
use crate::errno::Result;
use crate::flags::{FiAddr, Flags};
use crate::mem::{IoVec, Memory};
use crate::storage::Storage;

/// A message operation's arguments with a tag (`struct fi_msg_tagged`).
#[derive(Debug, Clone, Copy)]
pub struct TaggedArgs<'a> {
    /// The buffers.
    pub iov: &'a [IoVec],
    /// Local descriptors (`desc`), checked only under FI_MR_LOCAL.
    pub desc: &'a [u64],
    /// Destination (send) or source filter (receive; FI_ADDR_UNSPEC for any).
    pub addr: FiAddr,
    /// The tag (send: the message's; receive: the one to match).
    pub tag: u64,
    /// Receive: tag bits to ignore when matching (ignored on sends).
    pub ignore: u64,
    /// The application's context.
    pub context: u64,
    /// Remote CQ data (sent with FI_REMOTE_CQ_DATA).
    pub data: u64,
}

impl<'a> TaggedArgs<'a> {
    /// Buffers `iov` to or from `addr` with `tag` (no ignore bits) and `context`.
    pub fn new(iov: &'a [IoVec], addr: FiAddr, tag: u64, context: u64) -> Self {
        TaggedArgs {
            iov,
            desc: &[],
            addr,
            tag,
            ignore: 0,
            context,
            data: 0,
        }
    }
}

impl<S: Storage> Domain<S> {
    /// `fi_tsendmsg`: a tagged send (RDM endpoints with FI_TAGGED; -FI_EOPNOTSUPP
    /// otherwise). Errors as [`Domain::sendmsg`].
    pub fn tsendmsg(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        msg: &TaggedArgs<'_>,
        flags: Flags,
    ) -> Result<()> {
        let m = MsgArgs {
            iov: msg.iov,
            desc: msg.desc,
            addr: msg.addr,
            context: msg.context,
            data: msg.data,
        };
        self.post_any_send(h, mem, &m, Some(msg.tag), flags, false)
    }

    /// `fi_tsend`.
    pub fn tsend(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        buf: IoVec,
        dest: FiAddr,
        tag: u64,
        context: u64,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.tx_flags;
        let iov = [buf];
        self.tsendmsg(h, mem, &TaggedArgs::new(&iov, dest, tag, context), flags)
    }

    /// `fi_tsendv`.
    pub fn tsendv(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        iov: &[IoVec],
        dest: FiAddr,
        tag: u64,
        context: u64,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.tx_flags;
        self.tsendmsg(h, mem, &TaggedArgs::new(iov, dest, tag, context), flags)
    }

    /// `fi_tsenddata`: with remote CQ data.
    #[allow(clippy::too_many_arguments)]
    pub fn tsenddata(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        buf: IoVec,
        data: u64,
        dest: FiAddr,
        tag: u64,
        context: u64,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.tx_flags | Flags::REMOTE_CQ_DATA;
        let iov = [buf];
        let msg = TaggedArgs {
            data,
            ..TaggedArgs::new(&iov, dest, tag, context)
        };
        self.tsendmsg(h, mem, &msg, flags)
    }

    /// `fi_tinject`: copied before returning, no completion on success.
    pub fn tinject(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        buf: IoVec,
        dest: FiAddr,
        tag: u64,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.tx_flags | Flags::INJECT;
        let iov = [buf];
        let m = MsgArgs::new(&iov, dest, 0);
        self.post_any_send(h, mem, &m, Some(tag), flags, true)
    }

    /// `fi_tinjectdata`.
    pub fn tinjectdata(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        buf: IoVec,
        data: u64,
        dest: FiAddr,
        tag: u64,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.tx_flags | Flags::INJECT | Flags::REMOTE_CQ_DATA;
        let iov = [buf];
        let m = MsgArgs {
            data,
            ..MsgArgs::new(&iov, dest, 0)
        };
        self.post_any_send(h, mem, &m, Some(tag), flags, true)
    }

    /// `fi_trecvmsg`: a tagged receive matching `tag` outside the `ignore` bits, from
    /// `addr` (with FI_DIRECTED_RECV). FI_PEEK reports (in the CQ) whether a matching
    /// message has arrived, -FI_ENOMSG as an error entry if not; FI_PEEK | FI_CLAIM also
    /// reserves it for this context and FI_CLAIM then receives it (-FI_ENOMSG from the
    /// call if nothing was claimed with this context); FI_DISCARD with either drops it.
    pub fn trecvmsg(&mut self, h: EpHandle<S>, msg: &TaggedArgs<'_>, flags: Flags) -> Result<()> {
        let m = MsgArgs {
            iov: msg.iov,
            desc: msg.desc,
            addr: msg.addr,
            context: msg.context,
            data: 0,
        };
        self.post_any_recv(h, &m, Some((msg.tag, msg.ignore)), flags)
    }

    /// `fi_trecv`.
    pub fn trecv(
        &mut self,
        h: EpHandle<S>,
        buf: IoVec,
        src: FiAddr,
        tag: u64,
        ignore: u64,
        context: u64,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.rx_flags;
        let iov = [buf];
        let msg = TaggedArgs {
            ignore,
            ..TaggedArgs::new(&iov, src, tag, context)
        };
        self.trecvmsg(h, &msg, flags)
    }

    /// `fi_trecvv`.
    pub fn trecvv(
        &mut self,
        h: EpHandle<S>,
        iov: &[IoVec],
        src: FiAddr,
        tag: u64,
        ignore: u64,
        context: u64,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.rx_flags;
        let msg = TaggedArgs {
            ignore,
            ..TaggedArgs::new(iov, src, tag, context)
        };
        self.trecvmsg(h, &msg, flags)
    }
}
