//! The progress thread of a domain, with the policy its owner picks.
//!
//! - [`Policy::Spin`] (the safe API's FI_PROGRESS_AUTO): each turn runs one pass
//!   under the domain lock. While there was traffic within the last
//!   [`AutoProgress::spin`] the thread busy-polls (lowest latency); after that it
//!   sleeps in `epoll_wait` on the link's descriptor (readable: frames arrived;
//!   writable while the link has queued transmissions; watched only from the first
//!   sleep until traffic resumes, since a watched socket costs every datagram's sender
//!   an epoll wake-up callback), a timerfd armed for the core's next timeout (or
//!   [`AutoProgress::tick`] when the core names none), and the kick eventfd that
//!   application threads and the domain's close use to wake it.
//! - [`Policy::WhenIdle`] (the C provider's FI_PROGRESS_AUTO): while the application
//!   runs progress itself at least every `period`, the thread only sleeps, so it never
//!   contends with an application that polls. Once the application has left the
//!   domain alone that long, the thread drives it: a pass whenever frames arrive, the
//!   core's next timer fires, or at the latest every `period`. A pass that moved
//!   nothing while the link's descriptor stays readable means a poll-mode plane
//!   (DPDK): the thread naps instead of spinning.
//! - [`Policy::Watchdog`] (the C provider's FI_THREAD_SAFE manual domains): many
//!   applications stop calling in for a while at the worst moment (fi_pingpong waits
//!   on its TCP control socket right after the last message of a size, while its peer
//!   waits for the acknowledgement of its reply); when the application has not run
//!   progress for `period`, the thread runs one pass, so acknowledgements,
//!   retransmissions and handshakes never stall.
//!
//! Every sleep is bounded by the timer; stopping the thread kicks it awake and joins
//! it.

use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use rustix::event::epoll;

use super::Turn;
use super::clock::now;
use super::wait::{EventFd, arm_timer, timerfd, timespec, wait_readable};

const LINK: u64 = 0;
const KICK: u64 = 1;
const TIMER: u64 = 2;

/// How soon to retry work the core says is due but that did not move last time.
const RETRY: Duration = Duration::from_micros(100);

/// The backstop of every sleep, in case a timer could not be armed.
const MAX_SLEEP: Duration = Duration::from_secs(1);

/// The nap of [`Policy::WhenIdle`] on a plane whose descriptor is always readable.
const POLL_NAP: Duration = Duration::from_micros(50);

/// Tuning of the safe API's automatic-progress thread ([`Policy::Spin`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AutoProgress {
    /// How long the thread keeps busy-polling after the last frame moved before it
    /// sleeps in epoll: latency against CPU.
    pub spin: Duration,
    /// The longest sleep when the core names no timeout of its own, so time-driven
    /// work (ARP retries) runs even when no frame arrives.
    pub tick: Duration,
}

impl Default for AutoProgress {
    /// 50 µs of spinning, a 10 ms tick.
    fn default() -> Self {
        AutoProgress {
            spin: Duration::from_micros(50),
            tick: Duration::from_millis(10),
        }
    }
}

/// When the progress thread runs passes (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Always: busy-poll after traffic, then sleep on the link and the timer.
    Spin(AutoProgress),
    /// Whenever the application has not run progress for `period`.
    WhenIdle {
        /// How long the application may leave the domain alone.
        period: Duration,
    },
    /// One pass each `period` the application has not run progress.
    Watchdog {
        /// How long the application may leave the domain alone.
        period: Duration,
    },
}

/// A running progress thread: its stop flag, kick eventfd and handle.
pub struct ProgressThread {
    stop: Arc<AtomicBool>,
    kick: Arc<EventFd>,
    handle: Mutex<Option<JoinHandle<()>>>,
}

impl ProgressThread {
    /// Starts thread `name` with `policy`. `turn` runs one pass under the domain lock
    /// (`None`: the domain is closing, the thread ends); `link` is a duplicate of the
    /// link's wait descriptor; `activity` says when the application last ran progress
    /// ([`super::Runtime::activity`]). The epoll set is built here, so failures surface
    /// from the caller's open.
    pub fn spawn(
        name: &str,
        policy: Policy,
        link: Option<OwnedFd>,
        activity: Arc<AtomicU64>,
        turn: impl FnMut() -> Option<Turn> + Send + 'static,
    ) -> std::io::Result<ProgressThread> {
        let kick = Arc::new(EventFd::new()?);
        let stop = Arc::new(AtomicBool::new(false));
        let mut s = Sleep::new(link, kick.as_fd().try_clone_to_owned()?)?;
        let st = stop.clone();
        let handle = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || match policy {
                Policy::Spin(cfg) => spin(&st, cfg, &mut s, turn),
                Policy::WhenIdle { period } => when_idle(&st, period, &activity, &mut s, turn),
                Policy::Watchdog { period } => watchdog(&st, period, &activity, &mut s, turn),
            })?;
        Ok(ProgressThread {
            stop,
            kick,
            handle: Mutex::new(Some(handle)),
        })
    }

    /// Wakes the thread from its sleep (work was posted).
    pub fn kick(&self) {
        self.kick.signal();
    }

    /// Stops the thread and waits for it to finish its pass (unless called on the
    /// thread itself).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.kick.signal();
        let t = self
            .handle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(t) = t
            && t.thread().id() != std::thread::current().id()
        {
            let _ = t.join();
        }
    }
}

/// Microseconds since the application last ran progress.
fn idle_for(activity: &AtomicU64) -> u64 {
    now()
        .total_micros()
        .saturating_sub(activity.load(Ordering::Relaxed))
}

/// The thread's epoll set: the link (watched only while it sleeps on it), a timerfd
/// and the kick eventfd.
struct Sleep {
    epoll: OwnedFd,
    timer: OwnedFd,
    kick: OwnedFd,
    link: Option<OwnedFd>,
    /// The link is in the set.
    watched: bool,
    /// It is watched for writability too (queued transmissions).
    want_out: bool,
}

impl Sleep {
    fn new(link: Option<OwnedFd>, kick: OwnedFd) -> rustix::io::Result<Sleep> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        let timer = timerfd()?;
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
        Ok(Sleep {
            epoll,
            timer,
            kick,
            link,
            watched: false,
            want_out: false,
        })
    }

    /// Busy-polling again: senders need not wake anyone.
    fn unwatch(&mut self) {
        if self.watched
            && let Some(link) = &self.link
        {
            self.watched = epoll::delete(&self.epoll, link).is_err();
        }
    }

    /// Puts the link in the set (for writability too while `out`). Unwatched (an add
    /// failed), the sleep still ends on the timer.
    fn watch(&mut self, out: bool) {
        if let Some(link) = &self.link
            && (!self.watched || out != self.want_out)
        {
            let mut flags = epoll::EventFlags::IN;
            if out {
                flags |= epoll::EventFlags::OUT;
            }
            let data = epoll::EventData::new_u64(LINK);
            let r = if self.watched {
                epoll::modify(&self.epoll, link, data, flags)
            } else {
                epoll::add(&self.epoll, link, data, flags)
            };
            if r.is_ok() {
                self.watched = true;
                self.want_out = out;
            }
        }
    }

    /// Whether the link's descriptor is readable now (without a link: false).
    fn link_readable(&self) -> bool {
        self.link
            .as_ref()
            .is_some_and(|l| wait_readable(l.as_fd(), Duration::ZERO))
    }

    /// Sleeps until something in the set is ready, the timer fires after `timer`
    /// (`None`: disarmed) or `max` passes.
    fn sleep(&self, timer: Option<Duration>, max: Duration) {
        arm_timer(&self.timer, timer);
        let mut events = [epoll::Event {
            flags: epoll::EventFlags::empty(),
            data: epoll::EventData::new_u64(0),
        }; 4];
        let n = epoll::wait(&self.epoll, &mut events[..], Some(&timespec(max))).unwrap_or(0);
        for ev in &events[..n] {
            let mut b = [0u8; 8];
            match ev.data.u64() {
                KICK => {
                    let _ = rustix::io::read(self.kick.as_fd(), &mut b);
                }
                TIMER => {
                    let _ = rustix::io::read(self.timer.as_fd(), &mut b);
                }
                _ => {}
            }
        }
    }
}

/// [`Policy::Spin`].
fn spin(
    stop: &AtomicBool,
    cfg: AutoProgress,
    s: &mut Sleep,
    mut turn: impl FnMut() -> Option<Turn>,
) {
    let mut last_active = std::time::Instant::now();
    loop {
        if stop.load(Ordering::Acquire) {
            return;
        }
        let Some(Turn {
            moved: active,
            pending_tx: pending,
            next,
        }) = turn()
        else {
            return;
        };
        let t = std::time::Instant::now();
        if active {
            last_active = t;
            s.unwatch();
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
        s.watch(pending);
        let tick = if s.link.is_some() {
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
        .min(tick);
        s.sleep(Some(wait), MAX_SLEEP);
    }
}

/// [`Policy::WhenIdle`].
fn when_idle(
    stop: &AtomicBool,
    period: Duration,
    activity: &AtomicU64,
    s: &mut Sleep,
    mut turn: impl FnMut() -> Option<Turn>,
) {
    let period_us = period.as_micros() as u64;
    while !stop.load(Ordering::Acquire) {
        let idle = idle_for(activity);
        if idle < period_us {
            s.unwatch(); // the application drives progress again
            s.sleep(None, Duration::from_micros(period_us - idle));
            continue;
        }
        let Some(t) = turn() else {
            return; // the domain is closing
        };
        if t.moved {
            s.unwatch();
            continue; // more may be waiting
        }
        // A pass that moved nothing yet leaves the descriptor readable: a poll-mode
        // plane (DPDK), whose descriptor always is. Nap instead of spinning.
        if s.link.is_some() && !s.link_readable() {
            // Work due at once that did not move (the link full): not a spin.
            let timer = t.next.map(|at| {
                let left = at.saturating_duration_since(now()).total_micros();
                Duration::from_micros(left).clamp(POLL_NAP, period)
            });
            s.watch(false);
            s.sleep(timer, period);
        } else {
            s.unwatch();
            s.sleep(None, POLL_NAP);
        }
    }
}

/// [`Policy::Watchdog`].
fn watchdog(
    stop: &AtomicBool,
    period: Duration,
    activity: &AtomicU64,
    s: &mut Sleep,
    mut turn: impl FnMut() -> Option<Turn>,
) {
    while !stop.load(Ordering::Acquire) {
        s.sleep(None, period);
        if idle_for(activity) < period.as_micros() as u64 || stop.load(Ordering::Acquire) {
            continue;
        }
        if turn().is_none() {
            return;
        }
    }
}
