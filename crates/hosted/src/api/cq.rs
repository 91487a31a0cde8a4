//! Completion queues and their completions.

use std::fmt;
use std::ops::Range;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::Duration;

use ofi_nostd::Errno;
use ofi_nostd::domain::CqHandle;
use ofi_nostd::flags::{FI_ADDR_NOTAVAIL, FiAddr, Flags};

use super::buf::Buf;
use super::error::Result;
use super::shared::{DomainRef, Inner, Raw};
use super::table::{Op, OpId};
use super::wait::{EventFd, WaitSet, wait_readable};
use crate::storage::Heap;

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
    /// ([`Endpoint::recv_multi`](super::Endpoint::recv_multi)): where it landed, `len`
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

/// Completions read by [`Cq::read_batch`], oldest first, with the copied messages of
/// multi-receive buffers. Kept from call to call, it allocates nothing once grown.
pub struct CqBatch<C> {
    entries: std::collections::VecDeque<(Completion<C>, Option<Range<usize>>)>,
    bytes: Vec<u8>,
}

impl<C> Default for CqBatch<C> {
    fn default() -> Self {
        CqBatch {
            entries: Default::default(),
            bytes: Vec::new(),
        }
    }
}

impl<C> CqBatch<C> {
    /// How many completions wait to be taken.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether every completion was taken.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The oldest completion, and for a message of a multi-receive buffer that stays
    /// posted, a copy of its bytes (valid until the next [`Cq::read_batch`]).
    pub fn pop(&mut self) -> Option<(Completion<C>, Option<&[u8]>)> {
        let (c, msg) = self.entries.pop_front()?;
        Some((c, msg.and_then(|r| self.bytes.get(r))))
    }
}

impl<C> fmt::Debug for CqBatch<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CqBatch")
            .field("len", &self.entries.len())
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

/// A completion queue (fi_cq(3)) whose entries hand back the operations' buffers.
pub struct Cq<C: Send + 'static = u64> {
    shared: DomainRef<C>,
    h: CqHandle<Heap>,
    event: Arc<EventFd>,
    wait: Option<WaitSet>,
}

impl<C: Send + 'static> Cq<C> {
    pub(crate) fn new(
        shared: DomainRef<C>,
        h: CqHandle<Heap>,
        event: Arc<EventFd>,
        wait: Option<WaitSet>,
    ) -> Self {
        Cq {
            shared,
            h,
            event,
            wait,
        }
    }

    pub(crate) fn handle(&self) -> CqHandle<Heap> {
        self.h
    }

    pub(crate) fn shared(&self) -> &DomainRef<C> {
        &self.shared
    }

    /// The next [`RemoteEvent`] (a peer's RMA write or atomic with remote CQ data),
    /// -FI_EAGAIN when there is none. With manual progress an empty read runs a pass.
    /// Completions of our own operations met on the way stay for [`Cq::read`].
    pub fn read_remote(&self) -> Result<RemoteEvent> {
        let mut g = self.shared.lock();
        match g.next_remote(self.h) {
            Err(Errno::EAGAIN) if self.shared.manual() => {
                let _ = g.progress();
                Ok(g.next_remote(self.h)?)
            }
            r => Ok(r?),
        }
    }

    /// `fi_cq_read` of one completion: -FI_EAGAIN when there is none. With manual
    /// progress it runs a progress pass when the CQ has nothing ready (and after a
    /// bounded run of reads that found something), as fi_cq_read does. Failed
    /// operations are completions too (see [`Completion::error`]): their buffers come
    /// back the same way.
    pub fn read(&self) -> Result<Completion<C>> {
        Ok(self.read_in(&mut self.shared.lock())?)
    }

    /// One completion, under the lock `g` holds: a manual-progress read (a pass when
    /// nothing is queued), or the next queued one.
    fn read_in(&self, g: &mut Inner<C>) -> ofi_nostd::Result<Completion<C>> {
        if self.shared.manual() {
            g.read_manual(self.h)
        } else {
            g.next_completion(self.h)
        }
    }

    /// [`Cq::read`], and when the completion is a message in a multi-receive buffer
    /// that stays posted, a copy of the message into `into` (its length set to the
    /// bytes copied: the message, or `into`'s capacity if less), in the same call: what
    /// a reader that needs each message's bytes at once uses (see
    /// [`Completion::offset`]). `into` is untouched for other completions.
    pub fn read_copy(&self, into: &mut Buf) -> Result<Completion<C>> {
        let mut g = self.shared.lock();
        let c = self.read_in(&mut g)?;
        g.copy_multi(&c, into);
        Ok(c)
    }

    /// Copies the message of completion `c`, read from this domain, out of its
    /// multi-receive buffer into `into` (as [`Cq::read_copy`] does); the bytes copied,
    /// 0 when `c` is not a message of a buffer still posted.
    pub fn copy_multi(&self, c: &Completion<C>, into: &mut Buf) -> usize {
        self.shared.lock().copy_multi(c, into)
    }

    /// Reads up to `max` completions into `out` (no allocation when `out` has room);
    /// returns how many, -FI_EAGAIN when there were none.
    pub fn read_into(&self, out: &mut Vec<Completion<C>>, max: usize) -> Result<usize> {
        let mut g = self.shared.lock();
        let manual = self.shared.manual();
        let mut n = 0;
        while n < max {
            let r = if manual && n == 0 {
                g.read_manual(self.h)
            } else {
                g.next_completion(self.h)
            };
            match r {
                Ok(c) => out.push(c),
                Err(Errno::EAGAIN) if n > 0 => break,
                Err(e) => return Err(e.into()),
            }
            n += 1;
        }
        Ok(n)
    }

    /// `fi_cq_read` of up to `max` completions into `batch`, under one lock, with the
    /// message of each completion of a multi-receive buffer that stays posted copied
    /// out (as [`Cq::read_copy`] does for one): what a busy reader of many small
    /// messages uses, paying the lock, the progress check and the call once per batch
    /// rather than once per message. Completions still in `batch` stay ahead of the new
    /// ones. Returns how many were read, -FI_EAGAIN when none was (with manual progress
    /// an empty CQ runs a pass first, as [`Cq::read`] does).
    pub fn read_batch(&self, batch: &mut CqBatch<C>, max: usize) -> Result<usize> {
        if batch.entries.is_empty() {
            batch.bytes.clear();
        }
        let mut g = self.shared.lock();
        let mut n = 0;
        while n < max {
            let r = if n == 0 {
                self.read_in(&mut g)
            } else {
                g.next_completion_counted(self.h)
            };
            let c = match r {
                Ok(c) => c,
                Err(Errno::EAGAIN) if n > 0 => break,
                Err(e) => return Err(e.into()),
            };
            let at = batch.bytes.len();
            let copied = g.append_multi(&c, &mut batch.bytes);
            let msg = copied.then_some(at..batch.bytes.len());
            batch.entries.push_back((c, msg));
            n += 1;
        }
        Ok(n)
    }

    /// `fi_cq_sread`: waits up to `timeout` for a completion, driving progress meanwhile
    /// when it is manual. -FI_EAGAIN when the time runs out or [`Cq::signal`] woke the
    /// wait with nothing to read; -FI_ENOSYS for a CQ without a wait object.
    pub fn sread(&self, timeout: Duration) -> Result<Completion<C>> {
        let Some(wait) = &self.wait else {
            return Err(Errno::ENOSYS.into());
        };
        let deadline = std::time::Instant::now() + timeout;
        // The link joins the wait set once this call first sleeps, until it returns.
        let mut sleeper = None;
        loop {
            let nap = {
                let mut g = self.shared.lock();
                if self.shared.manual() {
                    let _ = g.progress();
                }
                match g.next_completion(self.h) {
                    Err(Errno::EAGAIN) => {}
                    r => return Ok(r?),
                }
                let cq = g.core.cq_mut(self.h)?;
                if cq.take_signal() {
                    return Err(Errno::EAGAIN.into());
                }
                self.event.drain();
                match cq.trywait() {
                    Ok(()) => g.note_wait(),
                    Err(Errno::EAGAIN) => continue,
                    Err(e) => return Err(e.into()),
                }
                if self.shared.manual() {
                    g.manual_nap(deadline)
                } else {
                    deadline.saturating_duration_since(std::time::Instant::now())
                }
            };
            if std::time::Instant::now() >= deadline {
                return Err(Errno::EAGAIN.into());
            }
            if sleeper.is_none() {
                sleeper = Some(wait.sleeper()?);
            }
            wait_readable(wait.fd(), nap);
        }
    }

    /// `fi_trywait` for this CQ: -FI_EAGAIN when completions are already there (read
    /// them first); otherwise Ok, and [`Cq::fd`] becomes readable when one arrives (or,
    /// with manual progress, when the link has frames for progress to process).
    pub fn trywait(&self) -> Result<()> {
        let mut g = self.shared.lock();
        self.event.drain();
        if g.has_early(self.h) {
            return Err(Errno::EAGAIN.into());
        }
        g.core.cq_mut(self.h)?.trywait()?;
        // The application may sleep on the fd from now on, at times we cannot see.
        if let Some(w) = &self.wait {
            w.pin()?;
        }
        g.note_wait();
        Ok(())
    }

    /// `fi_cq_signal`: wakes a thread blocked in [`Cq::sread`] (it returns -FI_EAGAIN).
    pub fn signal(&self) -> Result<()> {
        let mut g = self.shared.lock();
        g.core.cq_mut(self.h)?.signal()?;
        g.note_wait();
        g.wake();
        Ok(())
    }

    /// The pollable descriptor (FI_WAIT_FD, `fi_control(FI_GETWAIT)`): call
    /// [`Cq::trywait`] first (with manual progress the link's frames make it readable
    /// only from then on), then epoll it for readability. `None` without a wait
    /// object.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.wait.as_ref().map(|w| w.fd())
    }

    /// Entries queued and not yet read (errors included).
    pub fn len(&self) -> usize {
        let mut g = self.shared.lock();
        let early = g.cq_state(self.h).map_or(0, |s| s.early.len());
        early + g.core.cq(self.h).map_or(0, |c| c.len())
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `fi_close`: -FI_EBUSY (with the CQ handed back) while an endpoint is bound.
    pub fn close(self) -> std::result::Result<(), (Self, super::Error)> {
        let busy = self.shared.lock().core.cq(self.h).map(|c| c.check_close());
        match busy {
            Ok(Err(e)) => Err((self, e.into())),
            _ => Ok(()),
        }
    }
}

impl<C: Send + 'static> Drop for Cq<C> {
    fn drop(&mut self) {
        let gone = self.shared.lock().drop_cq(self.h);
        // Contexts may run code when dropped: never under the domain lock.
        drop(gone);
    }
}
