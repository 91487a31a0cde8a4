//! The state behind every object of one domain: the core domain, the link, the table of
//! posted buffers and the wait objects, under one mutex.

use std::collections::{HashSet, VecDeque};
use std::ops::{Deref, DerefMut};
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};

use ofi_nostd::Errno;
use ofi_nostd::addr::EpAddr;
use ofi_nostd::domain::{AvHandle, CntrHandle, CqHandle, EpHandle, PassKind, ProgressReport};
use ofi_nostd::info::Info;
use ofi_nostd::mem::Memory;

use super::buf::Buf;
use super::completion::{Completion, Raw, RemoteEvent, read_raw};
use super::table::{Op, OpId, OpTable};
use crate::runtime::wait::EventFd;
use crate::runtime::{
    AutoProgress, CoreDomain, CoreFabric, Driver, ProgressThread, Runtime, Turn, Wake,
    nap_until_timer, now, progress_until,
};
use crate::storage::Heap;

/// An open CQ's adapter state.
pub(crate) struct CqState {
    pub h: CqHandle<Heap>,
    pub early: VecDeque<Raw>,
    /// Events of peers' RMA writes and atomics with remote CQ data (no operation of
    /// ours behind them): `Cq::read_remote` hands them out.
    pub remote: VecDeque<RemoteEvent>,
}

/// An open endpoint's adapter state.
pub(crate) struct EpState {
    pub h: EpHandle<Heap>,
    pub cqs: Vec<CqHandle<Heap>>,
}

/// An object whose handle was dropped while something was still bound to it; closed
/// as soon as the core allows.
pub(crate) enum Zombie {
    Cq(CqHandle<Heap>),
    Cntr(CntrHandle),
    Av(AvHandle<Heap>),
}

/// Everything the domain mutex guards: the host runtime (core domain, link, pass,
/// wake-ups) and the API's tables beside it.
pub(crate) struct Inner<C> {
    pub rt: Runtime<dyn Memory, Arc<EventFd>>,
    pub ops: OpTable<C>,
    pub cqs: Vec<CqState>,
    pub eps: Vec<EpState>,
    pub zombies: Vec<Zombie>,
    /// Completions that named no posted buffer (a failed inject): counted, skipped.
    pub orphans: u64,
    /// Connection events not yet taken by the object they are about (`cm.rs`).
    pub cm_events: Vec<ofi_nostd::domain::CmEvent<Heap>>,
}

/// The runtime's core domain and passes, reached as `inner.core`, `inner.wake()`.
impl<C> Deref for Inner<C> {
    type Target = Runtime<dyn Memory, Arc<EventFd>>;

    #[inline]
    fn deref(&self) -> &Self::Target {
        &self.rt
    }
}

impl<C> DerefMut for Inner<C> {
    #[inline]
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.rt
    }
}

impl<C: Send + 'static> Inner<C> {
    pub(crate) fn new(core: CoreDomain, link: Box<dyn Driver<dyn Memory>>) -> Self {
        Inner {
            rt: Runtime::new(core, link),
            ops: OpTable::new(),
            cqs: Vec::new(),
            eps: Vec::new(),
            zombies: Vec::new(),
            orphans: 0,
            cm_events: Vec::new(),
        }
    }

    /// One pass of progress: receive, deliver, transmit, flush the link, then signal
    /// every wait object whose armed condition now holds.
    #[inline]
    pub(crate) fn progress(&mut self) -> ofi_nostd::Result<ProgressReport> {
        self.pass(PassKind::Full)
    }

    /// The sends posted ([`Domain::progress_tx`](ofi_nostd::domain::Domain::progress_tx)),
    /// then a flush: what a post runs so its packet leaves at once.
    #[inline]
    pub(crate) fn progress_tx(&mut self) -> ofi_nostd::Result<ProgressReport> {
        self.pass(PassKind::Posted)
    }

    #[inline]
    fn pass(&mut self, kind: PassKind) -> ofi_nostd::Result<ProgressReport> {
        self.rt.pass(&mut self.ops, kind)
    }

    /// [`Inner::progress`] for the endpoints of one receive queue
    /// ([`Runtime::pass_on`]): what reading a CQ of one context runs.
    #[inline]
    pub(crate) fn progress_on(&mut self, queue: u8) -> ofi_nostd::Result<ProgressReport> {
        self.rt.pass_on(&mut self.ops, PassKind::Full, queue)
    }

    /// [`Inner::progress_tx`] for the endpoints of one receive queue: what a post on a
    /// context runs.
    #[inline]
    pub(crate) fn progress_tx_on(&mut self, queue: u8) -> ofi_nostd::Result<ProgressReport> {
        self.rt.pass_on(&mut self.ops, PassKind::Posted, queue)
    }

    /// A full pass as the progress thread sees it.
    pub(crate) fn turn(&mut self) -> Turn {
        self.rt.turn(&mut self.ops)
    }

    /// `fi_cq_read` of one completion of CQ `h` under manual progress: without a pass
    /// while the runtime's [`ReadBudget`](crate::runtime::ReadBudget) allows; an empty
    /// CQ runs a pass and looks again, as fi_cq_read does.
    ///
    /// A busy-polling reader mostly finds nothing: an idle CQ is told by two flags, not
    /// by a read ([`Inner::cq_idle`]).
    pub(crate) fn read_manual(&mut self, h: CqHandle<Heap>) -> ofi_nostd::Result<Completion<C>> {
        let queued = !self.cq_idle(h);
        if !self.rt.reads.needs_pass(queued) {
            match self.next_completion(h) {
                Err(Errno::EAGAIN) => {}
                r => return r,
            }
        }
        let queue = self.rt.cq_queue(h);
        let _ = self.progress_on(queue);
        if self.cq_idle(h) {
            return Err(Errno::EAGAIN);
        }
        self.next_completion(h)
    }

    /// Whether a read of CQ `h` would find nothing at all: nothing kept aside, nothing
    /// in the core's queue (an unknown handle is not idle: the read reports it).
    fn cq_idle(&self, h: CqHandle<Heap>) -> bool {
        self.core.cq(h).is_ok_and(|q| q.is_idle()) && !self.has_early(h)
    }

    /// How long a waiter driving manual progress may block: until `deadline`, or the
    /// core's next timer if sooner (see [`nap_until_timer`]).
    pub(crate) fn manual_nap(&mut self, deadline: std::time::Instant) -> std::time::Duration {
        let timer = self.rt.before_sleep(&mut self.ops);
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        timer.map_or(left, |due| nap_until_timer(due, left))
    }

    /// [`Inner::next_completion`] for a read after the first of a batch: it counts
    /// toward the read budget as a read of its own would.
    pub(crate) fn next_completion_counted(
        &mut self,
        h: CqHandle<Heap>,
    ) -> ofi_nostd::Result<Completion<C>> {
        let r = self.next_completion(h);
        if r.is_ok() {
            self.rt.reads.count();
        }
        r
    }

    pub(crate) fn cq_state(&mut self, h: CqHandle<Heap>) -> ofi_nostd::Result<&mut CqState> {
        self.cqs.iter_mut().find(|c| c.h == h).ok_or(Errno::EINVAL)
    }

    /// The next completion of CQ `h` (with its buffer), -FI_EAGAIN when there is none.
    pub(crate) fn next_completion(
        &mut self,
        h: CqHandle<Heap>,
    ) -> ofi_nostd::Result<Completion<C>> {
        loop {
            let raw = match self.cq_state(h)?.early.pop_front() {
                Some(r) => r,
                None => read_raw(&mut self.rt.core, h)?,
            };
            let id = OpId::from_raw(raw.context());
            if let Some(op) = self.ops.get(id)
                && let Some(clone) = op.multi
                && !raw.releases_multi()
            {
                return Ok(Completion::part(id, op, clone, raw));
            }
            // A peek that claimed a message keeps its id for the claiming receive.
            let claimed = matches!(raw, Raw::Ok(_)) && self.ops.get(id).is_some_and(|op| op.claim);
            let op = if claimed {
                self.ops.take_reserving(id)
            } else {
                self.ops.remove(id)
            };
            match op {
                Some(op) => return Ok(Completion::new(id, op, raw)),
                None => match RemoteEvent::of(&raw) {
                    Some(ev) => self.cq_state(h)?.remote.push_back(ev),
                    None => self.orphans += 1,
                },
            }
        }
    }

    /// The next remote event of CQ `h` (see [`CqState::remote`]); completions of our
    /// own operations met on the way wait for the next [`Inner::next_completion`].
    pub(crate) fn next_remote(&mut self, h: CqHandle<Heap>) -> ofi_nostd::Result<RemoteEvent> {
        loop {
            if let Some(ev) = self.cq_state(h)?.remote.pop_front() {
                return Ok(ev);
            }
            let raw = read_raw(&mut self.rt.core, h)?;
            match RemoteEvent::of(&raw) {
                Some(ev) if raw.context() == 0 => return Ok(ev),
                _ => self.cq_state(h)?.early.push_back(raw),
            }
        }
    }

    /// Copies the message of `c` (a completion of a message into a multi-receive buffer
    /// still posted) into `into`; the bytes copied. Sound under the lock: messages land
    /// in disjoint ranges of the buffer, and a completed one is never written again.
    pub(crate) fn copy_multi(&self, c: &Completion<C>, into: &mut Buf) -> usize {
        let Some(src) = self.multi_bytes(c) else {
            return 0;
        };
        let n = src.len().min(into.capacity());
        into.copy_from(&src[..n]);
        n
    }

    /// The bytes of `c`'s message when it is one into a multi-receive buffer still
    /// posted (see [`Inner::copy_multi`]).
    fn multi_bytes(&self, c: &Completion<C>) -> Option<&[u8]> {
        let (Some(off), 0) = (c.offset, c.buf.capacity()) else {
            return None;
        };
        self.ops.get(c.op)?.buf.storage().get(off..off + c.len)
    }

    /// Appends the message of `c` (a completion of a message into a multi-receive
    /// buffer still posted) to `to`; whether it was one. Sound under the lock, as
    /// [`Inner::copy_multi`].
    pub(crate) fn append_multi(&self, c: &Completion<C>, to: &mut Vec<u8>) -> bool {
        self.multi_bytes(c)
            .map(|src| to.extend_from_slice(src))
            .is_some()
    }

    /// Whether a read of CQ `h` would find something before the core's queue.
    pub(crate) fn has_early(&self, h: CqHandle<Heap>) -> bool {
        self.cqs.iter().any(|c| c.h == h && !c.early.is_empty())
    }

    /// The first half of closing endpoint `h` (a scalable endpoint: all its context
    /// engines): acknowledge what arrived, send every peer a CLOSE, and linger for
    /// retransmissions until each acknowledged it or the core's deadline passed (a
    /// lost last ACK would fail the peer's send).
    fn linger(&mut self, h: EpHandle<Heap>) {
        if let Ok(Some(until)) = self.core.ep_begin_close(h, now()) {
            progress_until(until, || {
                let _ = self.progress();
                self.core.ep_lingering(h)
            });
        }
    }

    /// Closes endpoint `h` in the core and takes back every buffer it will never
    /// complete (fi_close discards outstanding operations without completions). Buffers
    /// whose completions are already queued stay until the application reads them.
    pub(crate) fn close_ep(&mut self, h: EpHandle<Heap>) -> ofi_nostd::Result<Vec<Op<C>>> {
        self.linger(h);
        self.core.ep_close(h)?;
        Ok(self.take_back(h))
    }

    /// Closes the scalable endpoint `sep` (its contexts closed before): every engine
    /// lingers as an endpoint does, then all close in the core, and the buffers none
    /// of them will complete come back.
    pub(crate) fn close_sep(&mut self, sep: EpHandle<Heap>) -> ofi_nostd::Result<Vec<Op<C>>> {
        if self.core.sep_contexts(sep)?.open_count() > 0 {
            return Err(Errno::EBUSY);
        }
        let engines: Vec<EpHandle<Heap>> = self.core.sep_engines(sep)?.collect();
        self.linger(sep);
        self.core.sep_close(sep)?;
        Ok(engines
            .into_iter()
            .flat_map(|g| self.take_back(g))
            .collect())
    }

    /// After endpoint `h` closed in the core: what its CQs still hold is kept for their
    /// readers, and every other buffer of its operations comes back.
    fn take_back(&mut self, h: EpHandle<Heap>) -> Vec<Op<C>> {
        let bound = match self.eps.iter().position(|e| e.h == h) {
            Some(i) => self.eps.swap_remove(i).cqs,
            None => Vec::new(),
        };
        for cq in bound {
            let live = self.cqs.iter().any(|c| c.h == cq);
            loop {
                match read_raw(&mut self.rt.core, cq) {
                    Ok(raw) if live => {
                        if let Ok(s) = self.cq_state(cq) {
                            s.early.push_back(raw);
                        }
                    }
                    // Nobody can read this CQ any more: its buffers are discarded below.
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        }
        let completed: HashSet<u64> = self
            .cqs
            .iter()
            .flat_map(|c| c.early.iter().map(Raw::context))
            .collect();
        let gone = self
            .ops
            .ids_of(h.index())
            .into_iter()
            .filter(|id| !completed.contains(&id.raw()))
            .filter_map(|id| self.ops.remove(id))
            .collect();
        // Messages its peeks claimed went with the endpoint.
        self.ops.release_reserved(h.index());
        self.reap();
        gone
    }

    /// Closes what was dropped while bound, now that it may be free.
    pub(crate) fn reap(&mut self) {
        let core = &mut self.rt.core;
        self.zombies.retain(|z| match *z {
            Zombie::Cq(h) => core.cq_close(h).is_err_and(|e| e == Errno::EBUSY),
            Zombie::Cntr(h) => core.cntr_close(h).is_err_and(|e| e == Errno::EBUSY),
            Zombie::Av(h) => core.av_close(h).is_err_and(|e| e == Errno::EBUSY),
        });
    }

    /// Closes CQ `h` and takes back the buffers of every completion still queued in it,
    /// deferring the core close while an endpoint is bound.
    pub(crate) fn drop_cq(&mut self, h: CqHandle<Heap>) -> Vec<Op<C>> {
        let mut gone = Vec::new();
        self.rt.wakes.remove(Wake::Cq(h));
        if let Some(i) = self.cqs.iter().position(|c| c.h == h) {
            let s = self.cqs.swap_remove(i);
            for raw in s.early {
                gone.extend(self.ops.remove(OpId::from_raw(raw.context())));
            }
        }
        while let Ok(raw) = read_raw(&mut self.rt.core, h) {
            gone.extend(self.ops.remove(OpId::from_raw(raw.context())));
        }
        if self.core.cq_close(h) == Err(Errno::EBUSY) {
            self.zombies.push(Zombie::Cq(h));
        }
        gone
    }
}

/// What all objects of a domain share.
pub(crate) struct Shared<C: Send + 'static> {
    pub inner: Mutex<Inner<C>>,
    pub fabric: Arc<Mutex<CoreFabric>>,
    pub auto: Option<AutoProgress>,
    /// A duplicate of the link's wait descriptor, for wait sets (manual progress) and
    /// the progress thread's epoll.
    pub link_fd: Option<OwnedFd>,
    /// The progress thread (automatic progress), once started.
    pub thread: OnceLock<ProgressThread>,
    /// Application handles alive ([`DomainRef`]s): the last one to go stops the progress
    /// thread, on the application's thread.
    pub users: AtomicUsize,
    pub info: Info,
    pub local: EpAddr,
}

impl<C: Send + 'static> Shared<C> {
    /// The domain lock. A panic while it was held cannot leave the core inconsistent in
    /// a way that matters for memory safety (the core has no unsafe code and the table
    /// only holds owned buffers), so a poisoned lock is taken over.
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner<C>> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the application drives progress (then reads and waits do).
    pub(crate) fn manual(&self) -> bool {
        self.auto.is_none()
    }

    /// Wakes the progress thread (work was posted).
    pub(crate) fn kick(&self) {
        if let Some(t) = self.thread.get() {
            t.kick();
        }
    }

    /// Stops the progress thread and waits for it to finish its pass.
    fn shutdown(&self) {
        if let Some(t) = self.thread.get() {
            t.stop();
        }
    }
}

impl<C: Send + 'static> Drop for Shared<C> {
    fn drop(&mut self) {
        self.shutdown();
        let inner = self.inner.get_mut().unwrap_or_else(PoisonError::into_inner);
        // Every object handle is gone (each holds this Shared), so only deferred closes
        // remain; then the domain itself.
        let eps: Vec<_> = inner.eps.iter().map(|e| e.h).collect();
        for h in eps {
            let _ = inner.close_ep(h);
        }
        inner.reap();
        if let Some(core) = inner.rt.take_core() {
            let mut fabric = self.fabric.lock().unwrap_or_else(PoisonError::into_inner);
            let _ = core.close(&mut fabric);
        }
    }
}

/// An application object's reference to its domain. The progress thread holds a plain
/// `Arc`; when the last `DomainRef` goes, its drop stops and joins the thread, so the
/// domain itself is always closed on an application thread, by the time the drop of
/// the last object returns.
pub(crate) struct DomainRef<C: Send + 'static>(Arc<Shared<C>>);

impl<C: Send + 'static> DomainRef<C> {
    /// The first application reference to a new domain.
    pub(crate) fn new(shared: Arc<Shared<C>>) -> Self {
        shared.users.fetch_add(1, Ordering::AcqRel);
        DomainRef(shared)
    }

    /// Whether both name the same domain.
    pub(crate) fn same(&self, other: &DomainRef<C>) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl<C: Send + 'static> Clone for DomainRef<C> {
    fn clone(&self) -> Self {
        DomainRef::new(self.0.clone())
    }
}

impl<C: Send + 'static> Deref for DomainRef<C> {
    type Target = Shared<C>;

    fn deref(&self) -> &Shared<C> {
        &self.0
    }
}

impl<C: Send + 'static> Drop for DomainRef<C> {
    fn drop(&mut self) {
        if self.0.users.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.shutdown();
        }
    }
}
