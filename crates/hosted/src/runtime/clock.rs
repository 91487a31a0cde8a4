//! The host's clock as the core sees it, and the time progress passes run at.

use ofi_nostd::domain::PassKind;
use ofi_nostd::time::Instant;
use std::sync::OnceLock;

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

    /// The time the last pass ran at.
    #[inline]
    pub fn last(&self) -> Instant {
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

/// The nap of a manual-progress waiter whose core timer is due in `due` (at most
/// `left`): exactly until the timer, so a held acknowledgement (25 µs) or a
/// retransmission is not late by a fixed floor; [`MIN_NAP`] when the timer is due
/// already but the pass just run did not move it (e.g. a full link), so waiting never
/// spins.
pub fn nap_until_timer(due: std::time::Duration, left: std::time::Duration) -> std::time::Duration {
    let d = if due.is_zero() { MIN_NAP } else { due };
    d.min(left)
}

/// The nap of a waiter whose work is due but did not move (see [`nap_until_timer`]).
pub const MIN_NAP: std::time::Duration = std::time::Duration::from_micros(100);

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

    #[test]
    fn a_waiter_naps_until_its_timer_and_never_spins() {
        use std::time::Duration;
        let long = Duration::from_secs(1);
        // A held acknowledgement due in 25 µs is sent on time, not after a floor.
        assert_eq!(
            nap_until_timer(Duration::from_micros(25), long),
            Duration::from_micros(25)
        );
        assert_eq!(
            nap_until_timer(Duration::from_millis(3), long),
            Duration::from_millis(3)
        );
        // Due already but not moved: a short pause, not a spin.
        assert_eq!(nap_until_timer(Duration::ZERO, long), MIN_NAP);
        // Never past the caller's deadline.
        let left = Duration::from_micros(10);
        assert_eq!(nap_until_timer(Duration::from_micros(25), left), left);
        assert_eq!(nap_until_timer(Duration::ZERO, left), left);
    }
}
