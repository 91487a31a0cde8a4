//! Completion queues and their completions.

use std::fmt;
use std::ops::Range;
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::Duration;

use ofi_nostd::Errno;
use ofi_nostd::domain::CqHandle;

use super::buf::Buf;
use super::completion::{Completion, RemoteEvent};
use super::error::Result;
use super::shared::{DomainRef, Inner};
use crate::runtime::wait::{EventFd, WaitSet, wait_readable};
use crate::storage::Heap;

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

    /// What fi_poll asks of a CQ: runs a progress pass when progress is manual, then
    /// [`Cq::trywait`]: true when entries are there to read, false when the CQ is armed
    /// (its fd wakes on the next one).
    pub fn ready(&self) -> Result<bool> {
        if self.shared.manual() {
            self.shared.lock().progress()?;
        }
        match self.trywait() {
            Ok(()) => Ok(false),
            Err(e) if e.errno() == Errno::EAGAIN => Ok(true),
            Err(e) => Err(e),
        }
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
