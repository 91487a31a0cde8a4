//! Native wait objects (FI_WAIT_FD, and FI_WAIT_UNSPEC, which this provider serves the
//! same way): what `fi_control(FI_GETWAIT)` hands out and what the blocking reads sleep
//! on.
//!
//! Each CQ or counter with a wait object owns a [`WaitFd`]: an epoll descriptor over
//!
//! - an eventfd the provider signals when the core says a waiter must wake (the
//!   condition armed by fi_trywait / sread / fi_cntr_wait holds, or fi_cq_signal);
//! - the data plane's descriptor (readable when frames arrived: with manual progress
//!   the waiter must wake to run progress), watched only while someone may sleep: during
//!   a blocking read or wait, and for good once the application calls fi_trywait or
//!   asks for the fd (FI_GETWAIT) — a watched socket costs every datagram's sender an
//!   epoll wake-up callback, which a busy-polling reader never needs (see
//!   `hosted::api::WaitSet`);
//! - a timerfd armed for the core's next timer (retransmissions, acknowledgements,
//!   handshake retries), so a waiter also wakes when only time moves things on.
//!
//! Event queues have no data plane and no timers: their `WaitFd` holds the eventfd
//! alone.

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

use hosted::api::{Sleeper, WaitSet};
use ofi_nostd::Errno;

/// The epoll set of one waitable object.
#[derive(Debug)]
pub struct WaitFd {
    set: WaitSet,
    event: OwnedFd,
    timer: Option<OwnedFd>,
}

fn check(r: libc::c_int) -> Result<libc::c_int, Errno> {
    if r < 0 { Err(Errno::ENOMEM) } else { Ok(r) }
}

fn owned(fd: libc::c_int) -> Result<OwnedFd, Errno> {
    let fd = check(fd)?;
    // SAFETY: a descriptor just returned by the kernel, owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl WaitFd {
    /// A wait object over a new eventfd, plus (for CQs and counters) the data plane's
    /// descriptor `link` (open for the call; the set keeps a duplicate) and a timerfd.
    pub fn new(link: Option<RawFd>) -> Result<WaitFd, Errno> {
        // SAFETY: a plain syscall with valid flags; the result is checked.
        let event = owned(unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) })?;
        let timer = match link {
            Some(_) => Some(owned(
                // SAFETY: as above.
                unsafe {
                    libc::timerfd_create(
                        libc::CLOCK_MONOTONIC,
                        libc::TFD_CLOEXEC | libc::TFD_NONBLOCK,
                    )
                },
            )?),
            None => None,
        };
        // SAFETY: the caller's descriptor is open for this call (the domain's data
        // plane, which outlives its CQs and counters); the set duplicates it.
        let link = link.map(|l| unsafe { BorrowedFd::borrow_raw(l) });
        let mut always = vec![event.as_fd()];
        always.extend(timer.as_ref().map(|t| t.as_fd()));
        let set = WaitSet::new(&always, link).map_err(|_| Errno::ENOMEM)?;
        Ok(WaitFd { set, event, timer })
    }

    /// The descriptor applications poll (FI_GETWAIT): the data plane is watched from
    /// now on, since the application may sleep on it (fi_trywait does the same).
    pub fn fd(&self) -> RawFd {
        self.pin();
        self.set.fd().as_raw_fd()
    }

    /// fi_trywait succeeded: the application may sleep on the fd from now on.
    pub fn pin(&self) {
        // On failure the data plane stays unwatched: waits still end on the timer.
        let _ = self.set.pin();
    }

    /// The eventfd the provider signals (registered with the domain for wake-ups).
    pub fn event_fd(&self) -> RawFd {
        self.event.as_raw_fd()
    }

    /// Makes the wait object readable.
    pub fn signal(&self) {
        signal_fd(self.event.as_raw_fd());
    }

    /// Makes the eventfd unreadable again (before arming a wait).
    pub fn drain(&self) {
        let mut b = 0u64;
        // SAFETY: reads 8 bytes into `b` from our non-blocking eventfd.
        let _ = unsafe { libc::read(self.event.as_raw_fd(), (&raw mut b).cast(), 8) };
    }

    /// Arms the timer to fire after `after` (`None`: disarms it). Re-arming also clears
    /// an expiry that was not read.
    pub fn arm_timer(&self, after: Option<Duration>) {
        let Some(t) = &self.timer else { return };
        let after = after.map(|d| d.max(Duration::from_nanos(1)));
        let value = after.map_or(
            libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            |d| libc::timespec {
                tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            },
        );
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: value,
        };
        // SAFETY: our timerfd, a valid itimerspec, no old value wanted.
        let _ = unsafe { libc::timerfd_settime(t.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
    }

    /// Watches the data plane until the guard drops: a blocking call holds one across
    /// all its sleeps. `None` if it could not be watched (the sleeps still end on the
    /// timer or the timeout).
    pub fn sleeper(&self) -> Option<Sleeper<'_>> {
        self.set.sleeper().ok()
    }

    /// Sleeps until the wait object is readable or `timeout` passes (spurious wake-ups
    /// allowed; callers re-check). The data plane counts only under a
    /// [`WaitFd::sleeper`] (or after fi_trywait / FI_GETWAIT).
    pub fn wait(&self, timeout: Duration) {
        let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int;
        let mut ev = [libc::epoll_event { events: 0, u64: 0 }; 4];
        // SAFETY: our epoll descriptor and a buffer of 4 events.
        let _ = unsafe { libc::epoll_wait(self.set.fd().as_raw_fd(), ev.as_mut_ptr(), 4, ms) };
    }
}

/// Writes 1 to eventfd `fd` (readable until drained).
pub fn signal_fd(fd: RawFd) {
    let one = 1u64;
    // SAFETY: writes 8 bytes from `one` to an eventfd the caller keeps open.
    let _ = unsafe { libc::write(fd, (&raw const one).cast(), 8) };
}

/// Whether `fd` is readable now (no wait).
pub fn readable(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd; a zero timeout.
    unsafe { libc::poll(&mut p, 1, 0) == 1 }
}

/// Writes `fd` (as an `int`) to FI_GETWAIT's argument.
///
/// # Safety
///
/// `arg` is NULL or points to a writable `int`.
pub unsafe fn put_fd(arg: *mut libc::c_void, fd: RawFd) -> Result<(), Errno> {
    // SAFETY: forwarded contract.
    unsafe { crate::util::put(arg.cast::<libc::c_int>(), fd) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signal_drain_and_timer() {
        let w = WaitFd::new(None).unwrap();
        assert!(!readable(w.fd()));
        w.signal();
        assert!(readable(w.fd()));
        w.drain();
        assert!(!readable(w.fd()));

        let (a, b) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let w = WaitFd::new(Some(b.as_raw_fd())).unwrap();
        w.arm_timer(Some(Duration::from_millis(1)));
        w.wait(Duration::from_secs(1));
        assert!(readable(w.set.fd().as_raw_fd()));
        w.arm_timer(None);
        assert!(!readable(w.set.fd().as_raw_fd()));
        a.send(b"x").unwrap();
        assert!(
            !w.set.watching_link(),
            "nobody sleeps: the data plane is not watched"
        );
        assert!(!readable(w.set.fd().as_raw_fd()));
        // A sleeper watches it: a datagram already there ends the sleep at once.
        let s = w.sleeper();
        assert!(w.set.watching_link());
        let t = std::time::Instant::now();
        w.wait(Duration::from_secs(5));
        assert!(t.elapsed() < Duration::from_secs(4));
        drop(s);
        assert!(!w.set.watching_link());
        // FI_GETWAIT (as fi_trywait) watches it for good.
        assert!(readable(w.fd()));
        assert!(w.set.watching_link());
    }
}
