//! Completions as the safe API hands them out: the raw entries of the core's CQs, the
//! [`Completion`] they become with their operation's buffer, and the [`RemoteEvent`]s
//! peers' writes leave.

use std::fmt;

use ofi_nostd::Errno;
use ofi_nostd::cq::{CqEntry, CqErrOut};
use ofi_nostd::domain::CqHandle;
use ofi_nostd::flags::{FI_ADDR_NOTAVAIL, FiAddr, Flags};
use ofi_nostd::info::API_VERSION;

use super::buf::Buf;
use super::table::{Op, OpId};
use crate::runtime::CoreDomain;
use crate::storage::Heap;

/// A completion taken out of the core CQ ahead of the application (when an endpoint
/// closes, so the adapter knows which of its buffers still have completions coming).
pub(crate) enum Raw {
    Ok(CqEntry),
    Err(CqErrOut),
}

impl Raw {
    pub(crate) fn context(&self) -> u64 {
        match self {
            Raw::Ok(e) => e.op_context,
            Raw::Err(e) => e.op_context,
        }
    }

    /// Whether this completion ends its operation's hold on the buffer: always, except
    /// for a message into a multi-receive buffer that stays posted (no FI_MULTI_RECV
    /// in the flags; a canceled buffer comes back with -FI_ECANCELED).
    pub(crate) fn releases_multi(&self) -> bool {
        match self {
            Raw::Ok(e) => e.flags.contains(Flags::MULTI_RECV),
            Raw::Err(e) => {
                Flags::from_bits_retain(e.flags).contains(Flags::MULTI_RECV)
                    || Errno::from_code(e.err) == Some(Errno::ECANCELED)
            }
        }
    }
}

/// Why an operation failed (`struct fi_cq_err_entry`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompletionError {
    /// The libfabric error (FI_ETRUNC, FI_ECANCELED, ...).
    pub errno: Errno,
    /// Bytes that did not fit (FI_ETRUNC).
    pub olen: usize,
    /// The provider's own error number.
    pub prov_errno: i32,
}

/// What a peer did to our registered memory and told us about: an RMA write or atomic
/// with remote CQ data (fi_writedata, FI_REMOTE_CQ_DATA on an atomic). No operation of
/// ours is behind it, so it has no context and no buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteEvent {
    /// FI_RMA or FI_ATOMIC, FI_REMOTE_WRITE, FI_REMOTE_CQ_DATA.
    pub flags: Flags,
    /// The peer's CQ data.
    pub data: u64,
    /// Bytes written.
    pub len: usize,
}

impl RemoteEvent {
    /// The event a raw CQ entry reports, if it is one.
    pub(crate) fn of(raw: &Raw) -> Option<RemoteEvent> {
        match raw {
            Raw::Ok(e)
                if e.op_context == 0
                    && e.flags.contains(Flags::REMOTE_CQ_DATA)
                    && e.flags.intersects(Flags::REMOTE_WRITE | Flags::REMOTE_READ) =>
            {
                Some(RemoteEvent {
                    flags: e.flags,
                    data: e.data,
                    len: e.len,
                })
            }
            _ => None,
        }
    }
}

/// A finished operation: what libfabric's completion entry says, plus the application's
/// context and buffer, handed back.
pub struct Completion<C> {
    /// The context the operation was posted with.
    pub context: C,
    /// The operation's id (as returned by the post).
    pub op: OpId,
    /// The buffer, back in the application's hands. After a receive its length is the
    /// number of bytes received. Empty for a message into a multi-receive buffer that
    /// stays posted (see `offset`).
    pub buf: Buf,
    /// Completion flags (FI_SEND | FI_MSG, FI_RECV | FI_MSG, FI_REMOTE_CQ_DATA, ...).
    pub flags: Flags,
    /// Bytes transferred: received (a receive), or posted (a send).
    pub len: usize,
    /// Remote CQ data, when the sender attached some.
    pub data: Option<u64>,
    /// The message's tag (tagged receives).
    pub tag: Option<u64>,
    /// The sender's fi_addr (receives on FI_SOURCE endpoints), else FI_ADDR_NOTAVAIL.
    pub src: FiAddr,
    /// Set when the operation failed; the buffer comes back all the same.
    pub error: Option<CompletionError>,
    /// A message received into a multi-receive buffer
    /// (`Endpoint::recv_multi`): where it landed, `len`
    /// bytes from this offset. The buffer stays posted for the next messages and comes
    /// back (its length: the bytes used) with the completion whose flags hold
    /// FI_MULTI_RECV, which may carry a last message too; until then the application
    /// keeps the offsets. `None` for every other operation.
    pub offset: Option<usize>,
}

impl<C> Completion<C> {
    pub(crate) fn new(id: OpId, op: Op<C>, raw: Raw) -> Self {
        let Op {
            mut buf,
            context,
            posted,
            multi,
            ..
        } = op;
        let f = Fields::of(raw);
        let mut offset = None;
        let len = if multi.is_some() {
            // The buffer comes back: its length is what its messages used.
            let at = f.at(buf.addr(), buf.capacity());
            buf.set_len((at + f.len).min(buf.capacity()));
            offset = Some(at);
            f.len
        } else if f.flags.contains(Flags::RECV) {
            buf.set_len(f.len.min(buf.capacity()));
            f.len
        } else if f.flags.contains(Flags::RMA | Flags::READ)
            || f.flags.contains(Flags::ATOMIC | Flags::READ)
        {
            // An RMA read, or a fetching atomic's original values, fill what was posted
            // (nothing when it failed).
            buf.set_len(if f.error.is_none() { posted } else { 0 });
            posted
        } else {
            // libfabric leaves `len` of a send completion undefined: report what went.
            posted
        };
        f.into_completion(context, id, buf, len, offset)
    }

    /// A message into the multi-receive buffer of `op`, which stays posted.
    pub(crate) fn part(id: OpId, op: &Op<C>, clone: fn(&C) -> C, raw: Raw) -> Self {
        let f = Fields::of(raw);
        let at = f.at(op.buf.addr(), op.buf.capacity());
        let len = f.len;
        f.into_completion(clone(&op.context), id, Buf::default(), len, Some(at))
    }

    /// The operation's outcome: the bytes transferred, or its error.
    pub fn result(&self) -> std::result::Result<usize, Errno> {
        match self.error {
            None => Ok(self.len),
            Some(e) => Err(e.errno),
        }
    }

    /// Whether this completes a receive.
    pub fn is_recv(&self) -> bool {
        self.flags.contains(Flags::RECV)
    }

    /// Whether this completes a send.
    pub fn is_send(&self) -> bool {
        self.flags.contains(Flags::SEND)
    }
}

impl<C> fmt::Debug for Completion<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completion")
            .field("op", &self.op)
            .field("flags", &self.flags)
            .field("len", &self.len)
            .field("data", &self.data)
            .field("tag", &self.tag)
            .field("src", &self.src)
            .field("error", &self.error)
            .field("offset", &self.offset)
            .field("buf", &self.buf)
            .finish_non_exhaustive()
    }
}

/// What a completion entry says, before the operation's buffer joins it.
struct Fields {
    flags: Flags,
    len: usize,
    buf: u64,
    data: u64,
    tag: u64,
    src: FiAddr,
    error: Option<CompletionError>,
}

impl Fields {
    fn of(raw: Raw) -> Fields {
        match raw {
            Raw::Ok(e) => Fields {
                flags: e.flags,
                len: e.len,
                buf: e.buf,
                data: e.data,
                tag: e.tag,
                src: e.src_addr,
                error: None,
            },
            Raw::Err(e) => Fields {
                flags: Flags::from_bits_retain(e.flags),
                len: e.len,
                buf: e.buf,
                data: e.data,
                tag: e.tag,
                src: FI_ADDR_NOTAVAIL,
                error: Some(CompletionError {
                    errno: Errno::from_code(e.err).unwrap_or(Errno::EIO),
                    olen: e.olen,
                    prov_errno: e.prov_errno,
                }),
            },
        }
    }

    /// The entry's `buf` as an offset into the buffer at `base` (clamped to it).
    fn at(&self, base: u64, capacity: usize) -> usize {
        usize::try_from(self.buf.saturating_sub(base))
            .unwrap_or(usize::MAX)
            .min(capacity)
    }

    fn into_completion<C>(
        self,
        context: C,
        op: OpId,
        buf: Buf,
        len: usize,
        offset: Option<usize>,
    ) -> Completion<C> {
        let flags = self.flags;
        Completion {
            context,
            op,
            buf,
            flags,
            len,
            data: flags.contains(Flags::REMOTE_CQ_DATA).then_some(self.data),
            tag: (flags.contains(Flags::RECV) && flags.contains(Flags::TAGGED)).then_some(self.tag),
            src: self.src,
            error: self.error,
            offset,
        }
    }
}

/// Reads one raw completion (success or error) from the core CQ `h`.
pub(crate) fn read_raw(core: &mut CoreDomain, h: CqHandle<Heap>) -> ofi_nostd::Result<Raw> {
    let cq = core.cq_mut(h)?;
    let mut e = [CqEntry::default()];
    match cq.read(&mut e) {
        Ok(1) => Ok(Raw::Ok(e[0])),
        Ok(_) => Err(Errno::EAGAIN),
        Err(Errno::EAVAIL) => Ok(Raw::Err(cq.readerr(
            Flags::empty(),
            API_VERSION,
            &mut [],
        )?)),
        Err(e) => Err(e),
    }
}
