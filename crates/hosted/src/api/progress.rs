//! The automatic-progress thread (FI_PROGRESS_AUTO).
//!
//! Each turn takes the domain lock for one progress pass and releases it. While there
//! was traffic within the last [`AutoProgress::spin`] the thread busy-polls (lowest
//! latency); after that it sleeps in `epoll_wait` on the link's descriptor (readable:
//! frames arrived; writable while the link has queued transmissions; watched only from
//! the first sleep until traffic resumes, since a watched socket costs every datagram's
//! sender an epoll wake-up callback), a timerfd armed
//! for the core's next timeout (or [`AutoProgress::tick`] when the core names none),
//! and an eventfd that application threads and the domain's drop use to wake it. Every
//! sleep is bounded by the timer.
//!
//! The thread holds a reference to the domain; when the application's last handle goes,
//! that drop sets the stop flag, kicks the thread awake and joins it.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rustix::event::epoll;
use rustix::time::{Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags};

use super::AutoProgress;
use super::shared::Shared;
use super::wait::{now, timespec};

const LINK: u64 = 0;
const KICK: u64 = 1;
const TIMER: u64 = 2;

/// How soon to retry work the core says is due but that did not move last time.
const RETRY: Duration = Duration::from_micros(100);

/// The backstop of every sleep, in case a timer could not be armed.
const MAX_SLEEP: Duration = Duration::from_secs(1);

pub(crate) struct Fds {
    epoll: OwnedFd,
    timer: OwnedFd,
    kick: OwnedFd,
    link: Option<OwnedFd>,
}

impl Fds {
    /// The epoll set of the thread, built on the caller's thread so failures surface
    /// from `open`.
    pub(crate) fn new(link: Option<OwnedFd>, kick: OwnedFd) -> rustix::io::Result<Fds> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        let timer = rustix::time::timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::CLOEXEC | TimerfdFlags::NONBLOCK,
        )?;
        let add = |fd: &OwnedFd, data: u64| {
            epoll::add(
                &epoll,
                fd,
                epoll::EventData::new_u64(data),
                epoll::EventFlags::IN,
            )
        };
        add(&kick, KICK)?;
        add(&timer, TIMER)?;
        Ok(Fds {
            epoll,
            timer,
            kick,
            link,
        })
    }
}

pub(crate) fn run<C: Send + 'static>(shared: Arc<Shared<C>>, cfg: AutoProgress, fds: Fds) {
    let mut last_active = std::time::Instant::now();
    let mut want_out = false;
    // The link is in the epoll set (from the first sleep until traffic resumes).
    let mut watched = false;
    let mut events = [epoll::Event {
        flags: epoll::EventFlags::empty(),
        data: epoll::EventData::new_u64(0),
    }; 4];
    loop {
        if shared.stop.load(Ordering::Acquire) {
            return;
        }
        let (active, pending, next) = {
            let mut g = shared.lock();
            let r = g.progress().unwrap_or_default();
            (r.rx + r.tx > 0, g.link.pending_tx() > 0, g.next_timeout())
        };
        let t = std::time::Instant::now();
        if active {
            last_active = t;
            if watched && let Some(link) = &fds.link {
                // Busy-polling again: senders need not wake anyone.
                watched = epoll::delete(&fds.epoll, link).is_err();
            }
        }
        if t.duration_since(last_active) < cfg.spin {
            std::hint::spin_loop();
            continue;
        }
        // Work is due now (a timer expired, or sends are queued): run again at once
        // while that moves frames. When it does not (the link pushes back, a next hop's
        // MAC is unresolved), retry on a short timer instead of spinning.
        let due = next.is_some_and(|at| at <= now());
        if due && active && !pending {
            continue;
        }
        if let Some(link) = &fds.link
            && (!watched || pending != want_out)
        {
            let mut flags = epoll::EventFlags::IN;
            if pending {
                flags |= epoll::EventFlags::OUT;
            }
            let data = epoll::EventData::new_u64(LINK);
            let r = if watched {
                epoll::modify(&fds.epoll, link, data, flags)
            } else {
                epoll::add(&fds.epoll, link, data, flags)
            };
            // Unwatched (an add failed), the sleep still ends on the timer's tick.
            if r.is_ok() {
                watched = true;
                want_out = pending;
            }
        }
        let tick = if fds.link.is_some() {
            cfg.tick
        } else {
            cfg.tick.min(Duration::from_micros(200))
        };
        let wait = if due {
            RETRY
        } else {
            next.map(|at| Duration::from_micros(at.saturating_duration_since(now()).total_micros()))
                .unwrap_or(tick)
        }
        .min(tick)
        .max(Duration::from_nanos(1));
        let _ = rustix::time::timerfd_settime(
            &fds.timer,
            TimerfdTimerFlags::empty(),
            &Itimerspec {
                it_interval: timespec(Duration::ZERO),
                it_value: timespec(wait),
            },
        );
        let n = epoll::wait(&fds.epoll, &mut events[..], Some(&timespec(MAX_SLEEP))).unwrap_or(0);
        for ev in &events[..n] {
            let mut b = [0u8; 8];
            match ev.data.u64() {
                KICK => {
                    let _ = rustix::io::read(fds.kick.as_fd(), &mut b);
                }
                TIMER => {
                    let _ = rustix::io::read(fds.timer.as_fd(), &mut b);
                }
                _ => {}
            }
        }
    }
}
