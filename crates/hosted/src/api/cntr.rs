//! Completion counters.

use std::os::fd::BorrowedFd;
use std::sync::Arc;
use std::time::Duration;

use ofi_nostd::Errno;
use ofi_nostd::domain::CntrHandle;
use ofi_nostd::time::Duration as CoreDuration;

use super::error::Result;
use super::shared::{DomainRef, Zombie};
use crate::runtime::Wake;
use crate::runtime::now;
use crate::runtime::wait::{EventFd, WaitSet, wait_readable};

/// A completion counter (fi_cntr(3)): successes and errors of the operations of the
/// endpoints bound to it.
pub struct Counter<C: Send + 'static = u64> {
    shared: DomainRef<C>,
    h: CntrHandle,
    event: Arc<EventFd>,
    wait: Option<WaitSet>,
}

impl<C: Send + 'static> Counter<C> {
    pub(crate) fn new(
        shared: DomainRef<C>,
        h: CntrHandle,
        event: Arc<EventFd>,
        wait: Option<WaitSet>,
    ) -> Self {
        Counter {
            shared,
            h,
            event,
            wait,
        }
    }

    pub(crate) fn handle(&self) -> CntrHandle {
        self.h
    }

    pub(crate) fn shared(&self) -> &DomainRef<C> {
        &self.shared
    }

    fn with<R>(
        &self,
        f: impl FnOnce(&mut ofi_nostd::cntr::Cntr) -> ofi_nostd::Result<R>,
    ) -> Result<R> {
        let mut g = self.shared.lock();
        let r = f(g.core.cntr_mut(self.h)?)?;
        g.wake();
        Ok(r)
    }

    /// `fi_cntr_read`: successful completions (drives progress when it is manual).
    pub fn read(&self) -> u64 {
        let mut g = self.shared.lock();
        if self.shared.manual() {
            let _ = g.progress();
        }
        g.core.cntr_mut(self.h).map_or(0, |c| c.read())
    }

    /// `fi_cntr_readerr`: completions in error.
    pub fn readerr(&self) -> u64 {
        self.with(|c| Ok(c.readerr())).unwrap_or(0)
    }

    /// `fi_cntr_add`.
    pub fn add(&self, value: u64) -> Result<()> {
        self.with(|c| c.add(value))
    }

    /// `fi_cntr_set`.
    pub fn set(&self, value: u64) -> Result<()> {
        self.with(|c| c.set(value))
    }

    /// `fi_cntr_adderr`.
    pub fn adderr(&self, value: u64) -> Result<()> {
        self.with(|c| c.adderr(value))
    }

    /// `fi_cntr_seterr`.
    pub fn seterr(&self, value: u64) -> Result<()> {
        self.with(|c| c.seterr(value))
    }

    /// `fi_cntr_wait`: waits up to `timeout` until the counter reaches `threshold`,
    /// driving progress meanwhile when it is manual. -FI_ETIMEDOUT when the time runs
    /// out, -FI_EAVAIL as soon as the error count changes, -FI_ENOSYS without a wait
    /// object.
    pub fn wait(&self, threshold: u64, timeout: Duration) -> Result<()> {
        let Some(wait) = &self.wait else {
            return Err(Errno::ENOSYS.into());
        };
        let deadline = std::time::Instant::now() + timeout;
        let core_deadline = now()
            + CoreDuration::from_micros(u64::try_from(timeout.as_micros()).unwrap_or(u64::MAX));
        // The link joins the wait set once this call first sleeps, until it returns.
        let mut sleeper = None;
        let w = {
            let mut g = self.shared.lock();
            g.core
                .cntr_mut(self.h)?
                .wait_begin(threshold, Some(core_deadline))?
        };
        loop {
            let nap = {
                let mut g = self.shared.lock();
                if self.shared.manual() {
                    let _ = g.progress();
                }
                let c = g.core.cntr_mut(self.h)?;
                if c.reached(&w, now())? {
                    return Ok(());
                }
                self.event.drain();
                c.arm(&w);
                g.note_wait();
                if self.shared.manual() {
                    g.manual_nap(deadline)
                } else {
                    deadline.saturating_duration_since(std::time::Instant::now())
                }
            };
            if std::time::Instant::now() >= deadline {
                return Err(Errno::ETIMEDOUT.into());
            }
            if sleeper.is_none() {
                sleeper = Some(wait.sleeper()?);
            }
            wait_readable(wait.fd(), nap);
        }
    }

    /// `fi_trywait` for this counter: -FI_EAGAIN when a value changed since the last
    /// read; otherwise Ok, and [`Counter::fd`] becomes readable on the next change.
    pub fn trywait(&self) -> Result<()> {
        let mut g = self.shared.lock();
        self.event.drain();
        g.core.cntr_mut(self.h)?.trywait()?;
        // The application may sleep on the fd from now on, at times we cannot see.
        if let Some(w) = &self.wait {
            w.pin()?;
        }
        g.note_wait();
        Ok(())
    }

    /// What fi_poll asks of a counter: runs a progress pass when progress is manual,
    /// then [`Counter::trywait`]: true when a value changed since the last read, false
    /// when the counter is armed (its fd wakes on the next change).
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

    /// The pollable descriptor (FI_WAIT_FD): call [`Counter::trywait`] first (with
    /// manual progress the link's frames make it readable only from then on), then
    /// epoll it for readability. `None` without a wait object.
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.wait.as_ref().map(|w| w.fd())
    }

    /// `fi_close`: -FI_EBUSY (with the counter handed back) while bound.
    pub fn close(self) -> std::result::Result<(), (Self, super::Error)> {
        let busy = self
            .shared
            .lock()
            .core
            .cntr(self.h)
            .map(|c| c.check_close());
        match busy {
            Ok(Err(e)) => Err((self, e.into())),
            _ => Ok(()),
        }
    }
}

impl<C: Send + 'static> Drop for Counter<C> {
    fn drop(&mut self) {
        let mut g = self.shared.lock();
        g.wakes.remove(Wake::Cntr(self.h));
        if g.core.cntr_close(self.h) == Err(Errno::EBUSY) {
            g.zombies.push(Zombie::Cntr(self.h));
        }
    }
}
