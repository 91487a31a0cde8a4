//! The clock and the blocking primitives: eventfds, epoll sets and bounded polls.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use ofi_nostd::domain::PassKind;
use ofi_nostd::time::Instant;
use rustix::event::epoll;
use rustix::event::{EventfdFlags, PollFd, PollFlags, eventfd, poll};
use rustix::time::Timespec;

/// The core's time on this host: `CLOCK_MONOTONIC` (std's `Instant`) in microseconds
/// since the first call in this process. Read and converted in plain integers: every
/// pass that moved something reads it, and std's `elapsed` (a normalising subtraction,
/// a `Duration`, 128-bit microseconds) cost about as much as the reading itself.
pub fn now() -> Instant {
    static EPOCH: OnceLock<u64> = OnceLock::new();
    let t = dp_kernel::monotonic_micros();
    let epoch = *EPOCH.get_or_init(|| t);
    Instant::from_micros(t.saturating_sub(epoch))
}

/// Passes that found nothing to do between two readings of the clock (see
/// [`PassClock`]).
pub const IDLE_PASSES_PER_CLOCK: u32 = 8;

/// The time progress passes run at, for a loop that busy-polls: tens of millions of
/// empty passes a second, where reading the clock cost as much as the rest of such a
/// pass. A full pass after fewer than [`IDLE_PASSES_PER_CLOCK`] empty ones in a row
/// reuses the last reading (at most that many empty passes old: well under a
/// microsecond of busy-polling, where the core's timers are hundreds of times
/// coarser); any other pass, and every pass after one that moved something, reads the
/// clock. Never earlier than a time already handed out.
#[derive(Debug, Clone, Copy)]
pub struct PassClock {
    at: Instant,
    idle: u32,
}

impl Default for PassClock {
    fn default() -> Self {
        PassClock { at: now(), idle: 0 }
    }
}

impl PassClock {
    /// The time for a pass of `kind`.
    pub fn at(&mut self, kind: PassKind) -> Instant {
        if kind != PassKind::Full || self.idle.is_multiple_of(IDLE_PASSES_PER_CLOCK) {
            self.at = now().max(self.at);
        }
        self.at
    }

    /// What the pass at [`PassClock::at`] did: whether it moved anything.
    pub fn after(&mut self, kind: PassKind, moved: bool) {
        self.idle = if kind == PassKind::Full && !moved {
            self.idle.wrapping_add(1).max(1)
        } else {
            0
        };
    }
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

/// The wait object of a CQ or counter (FI_WAIT_FD): an epoll set over its eventfd (and
/// whatever else always wakes it) and, with manual progress, the link's descriptor (a
/// waiter must then wake to run progress when frames arrive).
///
/// The link is in the set only while someone may sleep on it: during a blocking read or
/// wait ([`WaitSet::sleeper`]), and for good once the application calls fi_trywait
/// ([`WaitSet::pin`]: it then sleeps on the fd at times we cannot see). A watched socket
/// makes every datagram sent to it run epoll's wake-up callback inside the sender's
/// system call: on loopback that was 0.3 µs a `sendto`, 0.19 µs of a 64 B ping-pong's
/// one-way latency, spent for a busy-polling reader that never sleeps.
#[derive(Debug)]
pub struct WaitSet {
    epoll: OwnedFd,
    link: Option<OwnedFd>,
    watch: Mutex<LinkWatch>,
}

/// Who needs the link in the set.
#[derive(Debug, Default)]
struct LinkWatch {
    /// Blocking reads and waits in progress.
    sleepers: usize,
    /// fi_trywait was called: the application may sleep on the fd from now on.
    pinned: bool,
    /// The link is in the epoll set.
    watched: bool,
}

impl WaitSet {
    /// The registration data of the link in the set (the others' is their index).
    pub const LINK_DATA: u64 = u64::MAX;

    /// A set over `always` (watched from now on) and `link` (a duplicate of it, watched
    /// only while someone may sleep).
    pub fn new(always: &[BorrowedFd<'_>], link: Option<BorrowedFd<'_>>) -> std::io::Result<Self> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        for (i, fd) in always.iter().enumerate() {
            epoll::add(
                &epoll,
                fd,
                epoll::EventData::new_u64(i as u64),
                epoll::EventFlags::IN,
            )?;
        }
        let link = link.map(|l| l.try_clone_to_owned()).transpose()?;
        Ok(WaitSet {
            epoll,
            link,
            watch: Mutex::new(LinkWatch::default()),
        })
    }

    /// The descriptor the application polls.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.epoll.as_fd()
    }

    fn watch(&self) -> std::sync::MutexGuard<'_, LinkWatch> {
        self.watch.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Puts the link in the set if it is not (an fd already readable makes the set
    /// readable at once, so no frame that came before is missed).
    fn watch_link(&self, w: &mut LinkWatch) -> rustix::io::Result<()> {
        if let (Some(l), false) = (&self.link, w.watched) {
            epoll::add(
                &self.epoll,
                l,
                epoll::EventData::new_u64(Self::LINK_DATA),
                epoll::EventFlags::IN,
            )?;
            w.watched = true;
        }
        Ok(())
    }

    /// fi_trywait succeeded: the link stays in the set from now on.
    pub fn pin(&self) -> rustix::io::Result<()> {
        let mut w = self.watch();
        self.watch_link(&mut w)?;
        w.pinned = true;
        Ok(())
    }

    /// A blocking read or wait begins: the link is in the set until the last one that
    /// began ends (the guard drops), unless fi_trywait pinned it.
    pub fn sleeper(&self) -> rustix::io::Result<Sleeper<'_>> {
        let mut w = self.watch();
        self.watch_link(&mut w)?;
        w.sleepers += 1;
        Ok(Sleeper(self))
    }

    /// Whether the link is in the set now.
    pub fn watching_link(&self) -> bool {
        self.watch().watched
    }
}

/// A blocking read or wait of a [`WaitSet`] in progress (see [`WaitSet::sleeper`]).
#[must_use = "the link leaves the set again when the sleeper drops"]
#[derive(Debug)]
pub struct Sleeper<'a>(&'a WaitSet);

impl Drop for Sleeper<'_> {
    fn drop(&mut self) {
        let set = self.0;
        let mut w = set.watch();
        w.sleepers = w.sleepers.saturating_sub(1);
        if w.sleepers == 0
            && !w.pinned
            && w.watched
            && let Some(l) = &set.link
        {
            // On failure the link stays watched (a cost, never a missed wake-up).
            if epoll::delete(&set.epoll, l).is_ok() {
                w.watched = false;
            }
        }
    }
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

    fn readable(fd: BorrowedFd<'_>) -> bool {
        let mut fds = [PollFd::from_borrowed_fd(fd, PollFlags::IN)];
        poll(&mut fds, Some(&timespec(Duration::ZERO))).unwrap() == 1
    }

    #[test]
    fn the_link_is_watched_only_while_someone_may_sleep() {
        let event = EventFd::new().unwrap();
        let link = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let peer = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let set = WaitSet::new(&[event.as_fd()], Some(link.as_fd())).unwrap();
        peer.send_to(b"x", link.local_addr().unwrap()).unwrap();
        // A busy-polling reader: the waiting datagram does not make the set readable.
        assert!(!set.watching_link());
        assert!(!readable(set.fd()));
        {
            // A blocking wait: a datagram that came before it began wakes it at once.
            let outer = set.sleeper().unwrap();
            assert!(set.watching_link() && readable(set.fd()));
            let inner = set.sleeper().unwrap();
            drop(outer);
            assert!(set.watching_link(), "a second sleeper still sleeps");
            drop(inner);
        }
        assert!(!set.watching_link());
        assert!(!readable(set.fd()));
        // The eventfd is always watched.
        event.signal();
        assert!(readable(set.fd()));
        event.drain();
        // fi_trywait: watched from then on, sleepers or not.
        set.pin().unwrap();
        assert!(readable(set.fd()));
        drop(set.sleeper().unwrap());
        assert!(set.watching_link() && readable(set.fd()));
        // Once read, the socket no longer makes the set readable.
        let mut b = [0u8; 4];
        link.recv(&mut b).unwrap();
        assert!(!readable(set.fd()));
    }

    #[test]
    fn without_a_link_only_the_eventfd_counts() {
        let event = EventFd::new().unwrap();
        let set = WaitSet::new(&[event.as_fd()], None).unwrap();
        let s = set.sleeper().unwrap();
        assert!(!set.watching_link() && !readable(set.fd()));
        event.signal();
        assert!(readable(set.fd()));
        drop(s);
        set.pin().unwrap();
        assert!(!set.watching_link());
    }

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

    #[test]
    fn a_pass_clock_skips_readings_only_between_empty_full_passes() {
        let nap = || std::thread::sleep(std::time::Duration::from_millis(2));
        let mut c = PassClock::default();
        let t0 = c.at(PassKind::Full);
        c.after(PassKind::Full, false);
        // Empty full passes reuse the reading, however long they take...
        for _ in 1..IDLE_PASSES_PER_CLOCK {
            nap();
            assert_eq!(c.at(PassKind::Full), t0);
            c.after(PassKind::Full, false);
        }
        // ...until the next reading is due.
        let t1 = c.at(PassKind::Full);
        assert!(t1 > t0);
        // A pass that moved something: the next one reads the clock.
        c.after(PassKind::Full, true);
        nap();
        let t2 = c.at(PassKind::Full);
        assert!(t2 > t1);
        c.after(PassKind::Full, false);
        // A post's pass always reads it, and time never goes back.
        nap();
        let t3 = c.at(PassKind::Posted);
        assert!(t3 > t2);
        c.after(PassKind::Posted, false);
        assert!(c.at(PassKind::Full) >= t3);
    }
}
