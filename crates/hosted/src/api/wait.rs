//! The clock and the blocking primitives: eventfds, epoll sets and bounded polls.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::OnceLock;
use std::time::Duration;

use ofi_nostd::time::Instant;
use rustix::event::epoll;
use rustix::event::{EventfdFlags, PollFd, PollFlags, eventfd, poll};
use rustix::time::Timespec;

/// The core's time on this host: `CLOCK_MONOTONIC` (std's `Instant`) in microseconds
/// since the first call in this process.
pub fn now() -> Instant {
    static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(std::time::Instant::now);
    Instant::from_micros(epoch.elapsed().as_micros() as u64)
}

/// Runs `pass` at least once, and again while it returns `true` (more to do) and [`now`]
/// is before `until`: the progress passes of an endpoint lingering in `fi_close`
/// ([`Domain::ep_begin_close`], [`Domain::ep_lingering`]).
///
/// [`Domain::ep_begin_close`]: ofi_nostd::domain::Domain::ep_begin_close
/// [`Domain::ep_lingering`]: ofi_nostd::domain::Domain::ep_lingering
pub fn progress_until(until: Instant, mut pass: impl FnMut() -> bool) {
    while pass() && now() < until {}
}

/// A non-blocking eventfd: the wait object progress signals.
#[derive(Debug)]
pub(crate) struct EventFd(OwnedFd);

impl EventFd {
    pub(crate) fn new() -> rustix::io::Result<EventFd> {
        Ok(EventFd(eventfd(
            0,
            EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK,
        )?))
    }

    /// Makes the fd readable. A full counter (never in practice) is already readable.
    pub(crate) fn signal(&self) {
        let _ = rustix::io::write(&self.0, &1u64.to_ne_bytes());
    }

    /// Makes the fd unreadable again.
    pub(crate) fn drain(&self) {
        let mut b = [0u8; 8];
        let _ = rustix::io::read(&self.0, &mut b);
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// An epoll instance over some fds, itself pollable: readable when any of them is.
pub(crate) fn epoll_set(fds: &[BorrowedFd<'_>]) -> rustix::io::Result<OwnedFd> {
    let ep = epoll::create(epoll::CreateFlags::CLOEXEC)?;
    for (i, fd) in fds.iter().enumerate() {
        epoll::add(
            &ep,
            fd,
            epoll::EventData::new_u64(i as u64),
            epoll::EventFlags::IN,
        )?;
    }
    Ok(ep)
}

pub(crate) fn timespec(d: Duration) -> Timespec {
    Timespec::try_from(d).unwrap_or(Timespec {
        tv_sec: i64::MAX,
        tv_nsec: 0,
    })
}

/// Blocks until `fd` is readable or `timeout` passes; true when readable. Interrupted
/// waits count as spurious wake-ups (the caller re-checks and re-waits).
pub(crate) fn wait_readable(fd: BorrowedFd<'_>, timeout: Duration) -> bool {
    let mut fds = [PollFd::from_borrowed_fd(fd, PollFlags::IN)];
    matches!(poll(&mut fds, Some(&timespec(timeout))), Ok(n) if n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_until_stops_when_the_pass_is_done_or_at_the_deadline() {
        // Done after three passes, long before the deadline.
        let mut n = 0;
        progress_until(now() + ofi_nostd::time::Duration::from_secs(60), || {
            n += 1;
            n < 3
        });
        assert_eq!(n, 3);
        // At least one pass even when the deadline has passed.
        let mut n = 0;
        progress_until(Instant::ZERO, || {
            n += 1;
            true
        });
        assert_eq!(n, 1);
        // A pass that always has more stops at the deadline.
        let until = now() + ofi_nostd::time::Duration::from_millis(5);
        progress_until(until, || true);
        assert!(now() >= until);
    }
}
