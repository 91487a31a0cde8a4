//! [`Runtime`]: the core domain on its data plane, and the progress pass over them.

use std::ops::{Deref, DerefMut};
use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use ofi_nostd::domain::{PassKind, ProgressReport};
use ofi_nostd::time::Instant;

use super::clock::{PassClock, now};
use super::plane::{Driver, PassMemory};
use super::wake::{Signal, Wakeups};
use super::{CoreDomain, READS_PER_PASS};

/// How long a receive queue may go without a pass before a pass of another queue
/// serves it too ([`Runtime::pass_on`]): well under the core's shortest timer that
/// matters (the 25 µs held acknowledgement is a latency choice; retransmission timers
/// are milliseconds), long enough that threads polling their own queues never do
/// each other's work.
pub const QUEUE_STARVE: ofi_nostd::time::Duration = ofi_nostd::time::Duration::from_micros(1000);

/// The core domain, present from open until it is taken out to be closed against its
/// fabric ([`Runtime::take_core`]).
pub struct Core(Option<CoreDomain>);

impl Deref for Core {
    type Target = CoreDomain;

    #[inline]
    fn deref(&self) -> &CoreDomain {
        self.0
            .as_ref()
            .expect("the core domain lives as long as its runtime")
    }
}

impl DerefMut for Core {
    #[inline]
    fn deref_mut(&mut self) -> &mut CoreDomain {
        self.0
            .as_mut()
            .expect("the core domain lives as long as its runtime")
    }
}

/// How many completions reads have handed out since the last pass: the
/// read-without-pass policy of manual progress.
///
/// A completion already queued is handed out without a pass (a pass per completion
/// cost more than the rest of the read: one receive burst fills the CQ with up to a
/// burst of them), unless [`READS_PER_PASS`] were; a stream of completions so delays
/// the acknowledgements and sends the pass would have made by at most that many reads.
#[derive(Debug, Default, Clone, Copy)]
pub struct ReadBudget(u32);

impl ReadBudget {
    /// Whether a read of a CQ that has something `queued` runs a pass first; a read
    /// that does not is counted.
    #[inline]
    pub fn needs_pass(&mut self, queued: bool) -> bool {
        if queued && self.0 < READS_PER_PASS {
            self.0 += 1;
            false
        } else {
            true
        }
    }

    /// Counts one more read without a pass (the later reads of a batch).
    #[inline]
    pub fn count(&mut self) {
        self.0 = self.0.saturating_add(1);
    }

    /// A pass ran: the count starts again.
    #[inline]
    fn reset(&mut self) {
        self.0 = 0;
    }
}

/// What one pass of a progress thread saw (see [`super::thread`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Turn {
    /// The pass moved frames.
    pub moved: bool,
    /// The link still holds queued transmissions.
    pub pending_tx: bool,
    /// When the core next needs a pass even if no frame arrives.
    pub next: Option<Instant>,
}

/// One host domain at run time: the core domain, the data plane it runs on, the clock
/// its passes run at, the read-without-pass budget and the wake-up registry. The safe
/// API ([`crate::api`]) and the C provider each keep one under their domain lock, with
/// the memory `M` their passes copy through and the wait objects `S` they signal.
pub struct Runtime<M: ?Sized + 'static, S> {
    /// The core domain.
    pub core: Core,
    link: Box<dyn Driver<M>>,
    /// The wait objects passes signal.
    pub wakes: Wakeups<S>,
    /// Completions read since the last pass.
    pub reads: ReadBudget,
    clock: PassClock,
    /// When each receive queue's endpoints last had a pass (see [`Runtime::pass_on`]).
    served: Vec<Instant>,
    /// When the application last ran a pass ([`now`] microseconds): what the
    /// provider's watchdog and idle-driven progress thread look at.
    activity: Arc<AtomicU64>,
}

impl<M: PassMemory + ?Sized + 'static, S: Signal> Runtime<M, S> {
    /// `core` running on `link`.
    pub fn new(core: CoreDomain, link: Box<dyn Driver<M>>) -> Self {
        debug_assert_eq!(
            core.queues(),
            link.queues(),
            "one core queue per link queue"
        );
        Runtime {
            served: vec![Instant::ZERO; link.queues()],
            core: Core(Some(core)),
            link,
            wakes: Wakeups::default(),
            reads: ReadBudget::default(),
            clock: PassClock::default(),
            activity: Arc::new(AtomicU64::new(now().total_micros())),
        }
    }

    /// What the data plane dropped on receive before the stack saw it.
    pub fn link_drops(&self) -> crate::drops::LinkDrops {
        self.link.drops()
    }

    /// What each receive queue of the data plane moved ([`Driver::queue_counts`]).
    pub fn queue_counts(&self) -> Vec<super::QueueCounts> {
        self.link.queue_counts()
    }

    /// Takes the core domain out to close it (the runtime is unusable after).
    pub fn take_core(&mut self) -> Option<CoreDomain> {
        self.core.0.take()
    }

    /// Puts back a core domain whose close was refused.
    pub fn restore_core(&mut self, core: CoreDomain) {
        self.core.0 = Some(core);
    }

    /// One pass of the application's of the parts `kind` names: receive, deliver,
    /// transmit, flush the link, then signal every wait object whose armed condition
    /// now holds.
    #[inline]
    pub fn pass(&mut self, mem: &mut M, kind: PassKind) -> ofi_nostd::Result<ProgressReport> {
        self.reads.reset();
        let r = self.run(mem, kind);
        self.activity
            .store(self.clock.last().total_micros(), Ordering::Relaxed);
        r
    }

    /// [`Runtime::pass`] for what one receive queue's endpoints do: on a plane of
    /// several queues ([`Driver::queues`]), a pass of `queue` only
    /// ([`Domain::progress_queue`](ofi_nostd::domain::Domain::progress_queue)), as the
    /// thread that polls one context of a scalable endpoint runs, so it neither
    /// receives nor scans for the others. A queue no pass served for [`QUEUE_STARVE`]
    /// (nobody polls its contexts) is served by this pass too, so its timers and
    /// acknowledgements never wait for a thread that stopped polling.
    /// [`ALL_QUEUES`](ofi_nostd::net::ALL_QUEUES),
    /// or a plane of one queue: [`Runtime::pass`].
    #[inline]
    pub fn pass_on(
        &mut self,
        mem: &mut M,
        kind: PassKind,
        queue: u8,
    ) -> ofi_nostd::Result<ProgressReport> {
        if self.served.len() <= 1 || usize::from(queue) >= self.served.len() {
            return self.pass(mem, kind);
        }
        self.reads.reset();
        let at = self.clock.at(kind);
        let mut r = self
            .link
            .progress_queue(&mut self.core, queue, at, mem, kind);
        self.served[usize::from(queue)] = at;
        if kind == PassKind::Full {
            for k in 0..self.served.len() {
                if at.saturating_duration_since(self.served[k]) >= QUEUE_STARVE {
                    let more = self
                        .link
                        .progress_queue(&mut self.core, k as u8, at, mem, kind);
                    self.served[k] = at;
                    if let (Ok(a), Ok(b)) = (&mut r, more) {
                        *a += b;
                    }
                }
            }
        }
        let moved = r.as_ref().map_or(true, |rep| rep.rx + rep.tx > 0);
        self.clock.after(kind, moved);
        self.wakes.wake(&mut self.core);
        self.activity
            .store(self.clock.last().total_micros(), Ordering::Relaxed);
        r
    }

    /// The receive queues of the plane ([`Driver::queues`]).
    pub fn queues(&self) -> usize {
        self.served.len()
    }

    /// The queue whose pass completes what CQ `cq` reports, for [`Runtime::pass_on`]
    /// (on a plane of one queue, without asking the core).
    #[inline]
    pub fn cq_queue(&self, cq: ofi_nostd::fid::CqHandle<crate::storage::Heap>) -> u8 {
        if self.served.len() > 1 {
            self.core.cq_queue(cq)
        } else {
            ofi_nostd::net::ALL_QUEUES
        }
    }

    /// The queue whose passes progress endpoint `ep`, for [`Runtime::pass_on`].
    #[inline]
    pub fn ep_queue(&self, ep: ofi_nostd::ep::EpHandle<crate::storage::Heap>) -> u8 {
        if self.served.len() > 1 {
            self.core.ep_queue(ep)
        } else {
            ofi_nostd::net::ALL_QUEUES
        }
    }

    /// A pass at the [`PassClock`]'s time, the link flushed, then the wake-ups.
    #[inline]
    fn run(&mut self, mem: &mut M, kind: PassKind) -> ofi_nostd::Result<ProgressReport> {
        let at = self.clock.at(kind);
        let r = self.link.progress(&mut self.core, at, mem, kind);
        if self.served.len() > 1 {
            self.served.fill(at);
        }
        let moved = r.as_ref().map_or(true, |rep| rep.rx + rep.tx > 0);
        self.clock.after(kind, moved);
        self.wakes.wake(&mut self.core);
        r
    }

    /// A pass of a progress thread that drives a domain the application left alone
    /// (not the application's: [`Runtime::activity`] stays), then the transmit half a
    /// receiving pass left owed, since the thread may sleep next.
    pub fn idle_turn(&mut self, mem: &mut M) -> Turn {
        self.reads.reset();
        let moved = self.run(mem, PassKind::Full).is_ok_and(|r| r.rx + r.tx > 0);
        if self.core.transmit_owed() {
            let _ = self.run(mem, PassKind::Transmit);
        }
        Turn {
            moved,
            pending_tx: self.pending_tx() > 0,
            next: self.next_timeout(),
        }
    }

    /// A full pass of the application's, as a progress thread sees it.
    pub fn turn(&mut self, mem: &mut M) -> Turn {
        let r = self.pass(mem, PassKind::Full).unwrap_or_default();
        Turn {
            moved: r.rx + r.tx > 0,
            pending_tx: self.pending_tx() > 0,
            next: self.next_timeout(),
        }
    }

    /// What a waiter runs before it sleeps: the transmit half a receiving pass left
    /// for the next one (so nothing it would send waits for the nap), then how long
    /// until the core's next timer (`Some(ZERO)`: due now; `None`: none armed).
    pub fn before_sleep(&mut self, mem: &mut M) -> Option<std::time::Duration> {
        if self.core.transmit_owed() {
            let _ = self.pass(mem, PassKind::Transmit);
        }
        self.timer_left()
    }

    /// How long until the core's next timer, without a pass.
    pub fn timer_left(&self) -> Option<std::time::Duration> {
        let at = self.next_timeout()?;
        let left = at.saturating_duration_since(now());
        Some(std::time::Duration::from_micros(left.total_micros()))
    }

    /// When the core next needs a progress call even if no frame arrives (an instant
    /// not after the last pass: as soon as possible).
    pub fn next_timeout(&self) -> Option<Instant> {
        self.core.poll_timeout()
    }

    /// Signals the wait objects that are due (after a core call that may complete a
    /// wait outside a pass: a counter update, a cancel, a refused post).
    #[inline]
    pub fn wake(&mut self) {
        self.wakes.wake(&mut self.core);
    }

    /// A wait on a CQ or counter was armed, or a CQ signalled (see [`Wakeups::note`]).
    #[inline]
    pub fn note_wait(&mut self) {
        self.wakes.note();
    }

    /// Transmissions the link holds, not yet accepted by the device.
    pub fn pending_tx(&self) -> usize {
        self.link.pending_tx()
    }

    /// The link's wait descriptor, if it has one.
    pub fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        self.link.wait_fd()
    }

    /// When the application last ran a pass, shared with a progress thread.
    pub fn activity(&self) -> Arc<AtomicU64> {
        self.activity.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_skip_the_pass_only_while_queued_and_within_budget() {
        let mut b = ReadBudget::default();
        // An empty CQ always runs a pass.
        assert!(b.needs_pass(false));
        for _ in 0..READS_PER_PASS {
            assert!(!b.needs_pass(true));
        }
        assert!(b.needs_pass(true), "the budget is spent");
        b.reset();
        assert!(!b.needs_pass(true));
        b.count();
        for _ in 2..READS_PER_PASS {
            assert!(!b.needs_pass(true));
        }
        assert!(b.needs_pass(true), "a batch's later reads count too");
    }
}
