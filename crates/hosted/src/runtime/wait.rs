//! The blocking primitives: eventfds, epoll sets and bounded polls.

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Mutex;
use std::time::Duration;

use rustix::event::epoll;
use rustix::event::{EventfdFlags, PollFd, PollFlags, eventfd, poll};
use rustix::time::Timespec;

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

impl super::wake::Signal for EventFd {
    fn signal(&self) {
        EventFd::signal(self);
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

/// The native wait object of a C provider's CQ, counter or EQ (FI_WAIT_FD): a
/// [`WaitSet`] over an eventfd progress signals and, for CQs and counters, a timerfd
/// armed for the core's next timer (retransmissions, acknowledgements, handshake
/// retries, so a waiter also wakes when only time moves things on) and the link's
/// descriptor, watched only while someone may sleep.
#[derive(Debug)]
pub struct WaitObject {
    set: WaitSet,
    event: EventFd,
    timer: Option<OwnedFd>,
}

impl WaitObject {
    /// A wait object over a new eventfd, plus (for CQs and counters) the link's
    /// descriptor `link` (the set keeps a duplicate) and a timerfd.
    pub fn new(link: Option<BorrowedFd<'_>>) -> std::io::Result<WaitObject> {
        let event = EventFd::new()?;
        let timer = match link {
            Some(_) => Some(timerfd()?),
            None => None,
        };
        let mut always = vec![event.as_fd()];
        always.extend(timer.as_ref().map(|t| t.as_fd()));
        let set = WaitSet::new(&always, link)?;
        Ok(WaitObject { set, event, timer })
    }

    /// The descriptor applications poll (FI_GETWAIT): the link is watched from now
    /// on, since the application may sleep on it (fi_trywait does the same).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.pin();
        self.set.fd()
    }

    /// fi_trywait succeeded: the application may sleep on the fd from now on.
    pub fn pin(&self) {
        // On failure the link stays unwatched: waits still end on the timer.
        let _ = self.set.pin();
    }

    /// The eventfd progress signals (registered with the runtime's wake-ups).
    pub fn event_fd(&self) -> BorrowedFd<'_> {
        self.event.as_fd()
    }

    /// Makes the wait object readable.
    pub fn signal(&self) {
        self.event.signal();
    }

    /// Makes the eventfd unreadable again (before arming a wait).
    pub fn drain(&self) {
        self.event.drain();
    }

    /// Arms the timer to fire after `after` (`None`: disarms it). Re-arming also clears
    /// an expiry that was not read.
    pub fn arm_timer(&self, after: Option<Duration>) {
        if let Some(t) = &self.timer {
            arm_timer(t, after);
        }
    }

    /// Watches the link until the guard drops: a blocking call holds one across all
    /// its sleeps. `None` if it could not be watched (the sleeps still end on the
    /// timer or the timeout).
    pub fn sleeper(&self) -> Option<Sleeper<'_>> {
        self.set.sleeper().ok()
    }

    /// Sleeps until the wait object is readable or `timeout` (rounded up to whole
    /// milliseconds) passes; spurious wake-ups allowed, callers re-check. The link
    /// counts only under a [`WaitObject::sleeper`] (or after a pin).
    pub fn wait(&self, timeout: Duration) {
        let ms = timeout.as_micros().div_ceil(1000).min(u64::MAX as u128) as u64;
        let mut ev = [epoll::Event {
            flags: epoll::EventFlags::empty(),
            data: epoll::EventData::new_u64(0),
        }; 4];
        let t = timespec(Duration::from_millis(ms));
        let _ = epoll::wait(&self.set.epoll, &mut ev[..], Some(&t));
    }

    /// Whether the link is in the set now.
    pub fn watching_link(&self) -> bool {
        self.set.watching_link()
    }
}

/// The epoll set of a C provider's wait set (fi_wait_open): the descriptors of its
/// members (each the epoll set of a [`WaitObject`]; epoll sets nest) come and go as
/// CQs, counters and EQs that name the wait set open and close.
#[derive(Debug)]
pub struct EpollSet {
    epoll: OwnedFd,
}

impl EpollSet {
    /// An empty set.
    pub fn new() -> std::io::Result<EpollSet> {
        Ok(EpollSet {
            epoll: epoll::create(epoll::CreateFlags::CLOEXEC)?,
        })
    }

    /// The descriptor the application polls (FI_GETWAIT).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.epoll.as_fd()
    }

    /// Watches `fd` for readability.
    pub fn add(&self, fd: BorrowedFd<'_>) -> std::io::Result<()> {
        let data = epoll::EventData::new_u64(0);
        Ok(epoll::add(&self.epoll, fd, data, epoll::EventFlags::IN)?)
    }

    /// Stops watching `fd`.
    pub fn remove(&self, fd: BorrowedFd<'_>) -> std::io::Result<()> {
        Ok(epoll::delete(&self.epoll, fd)?)
    }

    /// Sleeps until a member is readable or `timeout` (rounded up to whole
    /// milliseconds) passes; true when one is. Interrupted waits count as spurious
    /// wake-ups.
    pub fn wait(&self, timeout: Duration) -> bool {
        let ms = timeout.as_micros().div_ceil(1000).min(u64::MAX as u128) as u64;
        let mut ev = [epoll::Event {
            flags: epoll::EventFlags::empty(),
            data: epoll::EventData::new_u64(0),
        }; 4];
        let t = timespec(Duration::from_millis(ms));
        matches!(epoll::wait(&self.epoll, &mut ev[..], Some(&t)), Ok(n) if n > 0)
    }
}

/// A non-blocking monotonic timerfd.
pub(crate) fn timerfd() -> rustix::io::Result<OwnedFd> {
    use rustix::time::{TimerfdClockId, TimerfdFlags};
    rustix::time::timerfd_create(
        TimerfdClockId::Monotonic,
        TimerfdFlags::CLOEXEC | TimerfdFlags::NONBLOCK,
    )
}

/// Arms timerfd `t` to fire once after `after` (at least a nanosecond; `None`:
/// disarmed).
pub(crate) fn arm_timer(t: &OwnedFd, after: Option<Duration>) {
    use rustix::time::{Itimerspec, TimerfdTimerFlags};
    let value = after.map_or(Duration::ZERO, |d| d.max(Duration::from_nanos(1)));
    let _ = rustix::time::timerfd_settime(
        t,
        TimerfdTimerFlags::empty(),
        &Itimerspec {
            it_interval: timespec(Duration::ZERO),
            it_value: timespec(value),
        },
    );
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
    fn an_epoll_set_is_readable_while_a_nested_wait_object_is() {
        let set = EpollSet::new().unwrap();
        let (a, b) = (
            WaitObject::new(None).unwrap(),
            WaitObject::new(None).unwrap(),
        );
        set.add(a.fd()).unwrap();
        set.add(b.fd()).unwrap();
        assert!(!set.wait(Duration::ZERO) && !readable(set.fd()));
        b.signal();
        assert!(set.wait(Duration::from_secs(5)) && readable(set.fd()));
        b.drain();
        assert!(!readable(set.fd()));
        set.remove(a.fd()).unwrap();
        a.signal();
        assert!(!set.wait(Duration::from_millis(1)), "a left the set");
        assert!(set.add(b.fd()).is_err(), "already a member");
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
    fn a_wait_object_wakes_on_its_timer_and_watches_the_link_while_sleeping() {
        let (a, b) = std::os::unix::net::UnixDatagram::pair().unwrap();
        let w = WaitObject::new(Some(b.as_fd())).unwrap();
        w.arm_timer(Some(Duration::from_millis(1)));
        w.wait(Duration::from_secs(1));
        assert!(readable(w.set.fd()));
        w.arm_timer(None);
        assert!(!readable(w.set.fd()));
        a.send(b"x").unwrap();
        assert!(
            !w.watching_link(),
            "nobody sleeps: the data plane is not watched"
        );
        assert!(!readable(w.set.fd()));
        // A sleeper watches it: a datagram already there ends the sleep at once.
        let s = w.sleeper();
        assert!(w.watching_link());
        let t = std::time::Instant::now();
        w.wait(Duration::from_secs(5));
        assert!(t.elapsed() < Duration::from_secs(4));
        drop(s);
        assert!(!w.watching_link());
        // FI_GETWAIT (as fi_trywait) watches it for good.
        assert!(readable(w.fd()));
        assert!(w.watching_link());
        // The eventfd is always watched.
        let e = WaitObject::new(None).unwrap();
        e.signal();
        assert!(readable(e.fd()));
        e.drain();
        assert!(!readable(e.fd()));
    }
}
