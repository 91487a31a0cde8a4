//! Poll and wait sets over CQs and counters (fi_poll(3) for the safe API).
//!
//! A [`PollSet`] names CQs and counters (anything [`Pollable`]) with an FD wait object
//! and answers, as `fi_poll` does, which of them have something to read, after a
//! progress pass for each with manual progress; [`PollSet::wait`] sleeps until one does
//! (`fi_wait`). Its epoll descriptor ([`PollSet::fd`]) holds the members' own epoll
//! descriptors (epoll sets nest), so one fd serves an application's event loop; the
//! members are armed (fi_trywait) before every sleep, so no event that comes between
//! the check and the sleep is missed.

use std::os::fd::BorrowedFd;
use std::time::{Duration, Instant};

use ofi_nostd::Errno;

use super::Result;
use super::cntr::Counter;
use super::cq::Cq;
use crate::runtime::EpollSet;

/// A CQ or counter a [`PollSet`] can hold.
pub trait Pollable {
    /// Progress when manual, then fi_trywait: true when there is something to read,
    /// false when armed.
    fn ready(&self) -> Result<bool>;
    /// The FD wait object (`None` for FI_WAIT_NONE objects, which cannot join a set).
    fn fd(&self) -> Option<BorrowedFd<'_>>;
}

impl<C: Send + 'static> Pollable for Cq<C> {
    fn ready(&self) -> Result<bool> {
        Cq::ready(self)
    }
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        Cq::fd(self)
    }
}

impl<C: Send + 'static> Pollable for Counter<C> {
    fn ready(&self) -> Result<bool> {
        Counter::ready(self)
    }
    fn fd(&self) -> Option<BorrowedFd<'_>> {
        Counter::fd(self)
    }
}

/// A set of CQs and counters polled and waited on together; members are named by the
/// index [`PollSet::add`] returned. The members outlive the set (it borrows them).
pub struct PollSet<'a> {
    set: EpollSet,
    members: Vec<&'a dyn Pollable>,
}

/// The longest single sleep of [`PollSet::wait`] (members' wake-ups end it sooner).
const MAX_NAP: Duration = Duration::from_millis(100);

impl<'a> PollSet<'a> {
    /// An empty set.
    pub fn new() -> Result<PollSet<'a>> {
        Ok(PollSet {
            set: EpollSet::new()?,
            members: Vec::new(),
        })
    }

    /// Adds `m` (fi_poll_add, or opening it with FI_WAIT_SET); returns its index.
    /// -FI_EINVAL for an object without an FD wait object.
    pub fn add(&mut self, m: &'a dyn Pollable) -> Result<usize> {
        let fd = m.fd().ok_or(Errno::EINVAL)?;
        self.set.add(fd)?;
        self.members.push(m);
        Ok(self.members.len() - 1)
    }

    /// The members there are.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the set has no members.
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// `fi_poll`: the indices of the members with something to read go to `ready`
    /// (cleared first); returns how many. Members without are armed.
    pub fn poll(&self, ready: &mut Vec<usize>) -> Result<usize> {
        ready.clear();
        for (i, m) in self.members.iter().enumerate() {
            if m.ready()? {
                ready.push(i);
            }
        }
        Ok(ready.len())
    }

    /// `fi_wait` and `fi_poll` in one: until at least one member has something to read
    /// (their indices in `ready`), or -FI_ETIMEDOUT after `timeout`.
    pub fn wait(&self, ready: &mut Vec<usize>, timeout: Duration) -> Result<usize> {
        let start = Instant::now();
        loop {
            if self.poll(ready)? > 0 {
                return Ok(ready.len());
            }
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(Errno::ETIMEDOUT.into());
            }
            self.set.wait(left.min(MAX_NAP));
        }
    }

    /// The descriptor an event loop polls: readable when a member may have something
    /// to read. Call [`PollSet::poll`] (which arms the members) before sleeping on it.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.set.fd()
    }
}
