//! Completion counters (fi_cntr(3)).
//!
//! A [`Cntr`] holds two values: successful completions and completions in error.
//! Endpoints call [`Cntr::inc`] / [`Cntr::inc_err`] when a counted operation completes;
//! the application reads, adds and sets both values. Arithmetic wraps like the C
//! implementation's 64-bit atomics.
//!
//! fi_cntr_wait blocks, so it lives in the hosted adapter; the core gives it the decision:
//! [`Cntr::wait_begin`] snapshots the error value's change count, and [`Cntr::reached`]
//! answers Ok(true) once the counter is at or above the threshold, -FI_EAVAIL as soon as
//! the error value changed since the wait began (fi_cntr(3): any change of it unblocks the
//! waiter), -FI_ETIMEDOUT past the deadline, and Ok(false) to keep waiting. [`Cntr::arm`]
//! and [`Cntr::take_wakeup`] tell the adapter when to signal its native wait object.

use crate::flags::Flags;
use crate::time::Instant;
use crate::wait::WaitObj;
use crate::{Errno, Result};

/// `enum fi_cntr_events`. libfabric 1.17 defines only FI_CNTR_EVENTS_COMP
/// (FI_CNTR_EVENTS_BYTES came in a later release and is not in the 1.17 headers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(i32)]
pub enum CntrEvents {
    /// FI_CNTR_EVENTS_COMP: count successful completions.
    #[default]
    Comp = 0,
}

impl CntrEvents {
    /// The value for a C `enum fi_cntr_events`; -FI_EINVAL for unknown values.
    pub const fn from_raw(raw: i32) -> Result<CntrEvents> {
        match raw {
            0 => Ok(CntrEvents::Comp),
            _ => Err(Errno::EINVAL),
        }
    }
}

/// `struct fi_cntr_attr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CntrAttr {
    /// What is counted.
    pub events: CntrEvents,
    /// Requested wait object; the core records it, the adapter implements it.
    pub wait_obj: WaitObj,
    /// Opaque wait-set handle (`struct fid_wait *`), 0 for none; needed with FI_WAIT_SET.
    pub wait_set: u64,
    /// Reserved: must be 0.
    pub flags: u64,
}

impl CntrAttr {
    /// Checks the attributes as fi_cntr_open does: `flags` 0 and a wait set with
    /// FI_WAIT_SET; -FI_EINVAL otherwise.
    pub fn validate(&self) -> Result<()> {
        if self.flags != 0 {
            return Err(Errno::EINVAL);
        }
        if self.wait_obj == WaitObj::Set && self.wait_set == 0 {
            return Err(Errno::EINVAL);
        }
        Ok(())
    }
}

/// The state of one fi_cntr_wait call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CntrWait {
    /// The value to reach.
    pub threshold: u64,
    /// When to give up with -FI_ETIMEDOUT; `None` waits forever (a negative timeout).
    pub deadline: Option<Instant>,
    err_changes: u64,
}

/// A counter.
#[derive(Debug, Clone)]
pub struct Cntr {
    attr: CntrAttr,
    value: u64,
    err: u64,
    err_changes: u64,
    generation: u64,
    seen_generation: u64,
    ops_flags: Flags,
    armed: Option<Armed>,
    wake: bool,
    refs: usize,
}

#[derive(Debug, Clone, Copy)]
enum Armed {
    AnyChange,
    Wait { threshold: u64, err_changes: u64 },
}

impl Cntr {
    /// Opens a counter (fi_cntr_open) with both values 0; -FI_EINVAL for invalid
    /// attributes.
    pub fn new(attr: &CntrAttr) -> Result<Cntr> {
        attr.validate()?;
        Ok(Cntr {
            attr: *attr,
            value: 0,
            err: 0,
            err_changes: 0,
            generation: 0,
            seen_generation: 0,
            ops_flags: Flags::empty(),
            armed: None,
            wake: false,
            refs: 0,
        })
    }

    /// The attributes.
    pub fn attr(&self) -> &CntrAttr {
        &self.attr
    }

    /// fi_cntr_read: the success count.
    pub fn read(&mut self) -> u64 {
        self.seen_generation = self.generation;
        self.value
    }

    /// fi_cntr_readerr: the error count.
    pub fn readerr(&mut self) -> u64 {
        self.seen_generation = self.generation;
        self.err
    }

    /// The success count, without counting as an application read (for trywait).
    pub fn value(&self) -> u64 {
        self.value
    }

    /// The error count, without counting as an application read.
    pub fn err_value(&self) -> u64 {
        self.err
    }

    /// fi_cntr_add.
    pub fn add(&mut self, value: u64) -> Result<()> {
        self.set_value(self.value.wrapping_add(value));
        Ok(())
    }

    /// fi_cntr_adderr.
    pub fn adderr(&mut self, value: u64) -> Result<()> {
        self.set_err(self.err.wrapping_add(value));
        Ok(())
    }

    /// fi_cntr_set.
    pub fn set(&mut self, value: u64) -> Result<()> {
        self.set_value(value);
        Ok(())
    }

    /// fi_cntr_seterr.
    pub fn seterr(&mut self, value: u64) -> Result<()> {
        self.set_err(value);
        Ok(())
    }

    /// One counted operation completed successfully (endpoints call this).
    pub fn inc(&mut self) {
        self.set_value(self.value.wrapping_add(1));
    }

    /// One counted operation completed in error (endpoints call this).
    pub fn inc_err(&mut self) {
        self.set_err(self.err.wrapping_add(1));
    }

    fn set_value(&mut self, value: u64) {
        self.value = value;
        self.changed();
    }

    fn set_err(&mut self, err: u64) {
        if err != self.err {
            self.err = err;
            self.err_changes = self.err_changes.wrapping_add(1);
        }
        self.changed();
    }

    fn changed(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        let fire = match self.armed {
            None => false,
            Some(Armed::AnyChange) => true,
            Some(Armed::Wait {
                threshold,
                err_changes,
            }) => self.value >= threshold || self.err_changes != err_changes,
        };
        if fire {
            self.armed = None;
            self.wake = true;
        }
    }

    /// Whether fi_cntr_wait may be used: -FI_ENOSYS for a member of a wait set, which
    /// waits through its set. fi_cntr(3) calls the call invalid with FI_WAIT_NONE too;
    /// that wait polls, driving progress (as FI_WAIT_YIELD does, and as the sockets and
    /// psm2 providers answer; fabtests' `fi_multi_mr` and `fi_rdm_multi_domain` wait so).
    pub fn check_wait(&self) -> Result<()> {
        match self.attr.wait_obj {
            WaitObj::Set => Err(Errno::ENOSYS),
            _ => Ok(()),
        }
    }

    /// Starts an fi_cntr_wait for `threshold` until `deadline` (None: no timeout), after
    /// [`Cntr::check_wait`]. Error changes from here on end the wait.
    pub fn wait_begin(&self, threshold: u64, deadline: Option<Instant>) -> Result<CntrWait> {
        self.check_wait()?;
        Ok(CntrWait {
            threshold,
            deadline,
            err_changes: self.err_changes,
        })
    }

    /// The fi_cntr_wait decision at `now`: Ok(true) when the counter is at or above the
    /// threshold (checked first, as libfabric does); -FI_EAVAIL when the error value
    /// changed since the wait began; -FI_ETIMEDOUT at or past the deadline; Ok(false)
    /// to keep waiting.
    pub fn reached(&self, wait: &CntrWait, now: Instant) -> Result<bool> {
        if self.value >= wait.threshold {
            return Ok(true);
        }
        if self.err_changes != wait.err_changes {
            return Err(Errno::EAVAIL);
        }
        if wait.deadline.is_some_and(|d| now >= d) {
            return Err(Errno::ETIMEDOUT);
        }
        Ok(false)
    }

    /// Arms the wake-up for `wait`: the next change that reaches the threshold or changes
    /// the error value raises [`Cntr::take_wakeup`]. Call after [`Cntr::reached`] said
    /// Ok(false), before blocking.
    pub fn arm(&mut self, wait: &CntrWait) {
        self.armed = Some(Armed::Wait {
            threshold: wait.threshold,
            err_changes: wait.err_changes,
        });
    }

    /// fi_trywait for this counter: -FI_EAGAIN when a value changed since the application
    /// last read the counter; otherwise arms the wake-up for any change and returns Ok.
    /// -FI_EINVAL without a wait object.
    pub fn trywait(&mut self) -> Result<()> {
        if self.attr.wait_obj == WaitObj::None {
            return Err(Errno::EINVAL);
        }
        if self.generation != self.seen_generation {
            return Err(Errno::EAGAIN);
        }
        self.armed = Some(Armed::AnyChange);
        Ok(())
    }

    /// Whether the adapter must signal its native wait object now.
    pub fn take_wakeup(&mut self) -> bool {
        core::mem::take(&mut self.wake)
    }

    /// Whether a wait is armed or a wake-up not yet taken (see `Cq::is_armed`).
    pub fn is_armed(&self) -> bool {
        self.armed.is_some() || self.wake
    }

    /// Changes on every update of either value.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// FI_GETOPSFLAG: the counter's default operation flags.
    pub fn ops_flags(&self) -> Flags {
        self.ops_flags
    }

    /// FI_SETOPSFLAG.
    pub fn set_ops_flags(&mut self, flags: Flags) {
        self.ops_flags = flags;
    }

    /// Records a binding (endpoint, context, MR) so [`Cntr::check_close`] refuses.
    pub fn bind_ref(&mut self) {
        self.refs += 1;
    }

    /// Drops a binding recorded by [`Cntr::bind_ref`].
    pub fn unbind_ref(&mut self) {
        self.refs = self.refs.saturating_sub(1);
    }

    /// fi_close check: -FI_EBUSY while endpoints, contexts or MRs are bound.
    pub fn check_close(&self) -> Result<()> {
        if self.refs > 0 {
            Err(Errno::EBUSY)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;

    fn waitable() -> Cntr {
        Cntr::new(&CntrAttr {
            wait_obj: WaitObj::Unspec,
            ..CntrAttr::default()
        })
        .unwrap()
    }

    #[test]
    fn attributes() {
        assert_eq!(CntrEvents::Comp as i32, 0);
        assert_eq!(CntrEvents::from_raw(0), Ok(CntrEvents::Comp));
        assert_eq!(CntrEvents::from_raw(1), Err(Errno::EINVAL));
        let flags = CntrAttr {
            flags: 1,
            ..CntrAttr::default()
        };
        assert!(matches!(Cntr::new(&flags), Err(Errno::EINVAL)));
        let set = CntrAttr {
            wait_obj: WaitObj::Set,
            ..CntrAttr::default()
        };
        assert!(matches!(Cntr::new(&set), Err(Errno::EINVAL)));
        let set = CntrAttr {
            wait_obj: WaitObj::Set,
            wait_set: 0x10,
            ..CntrAttr::default()
        };
        assert_eq!(Cntr::new(&set).unwrap().attr().wait_set, 0x10);
    }

    #[test]
    fn values_and_updates() {
        let mut c = Cntr::new(&CntrAttr::default()).unwrap();
        assert_eq!((c.read(), c.readerr()), (0, 0));
        c.inc();
        c.inc();
        c.add(10).unwrap();
        assert_eq!(c.read(), 12);
        c.inc_err();
        c.adderr(4).unwrap();
        assert_eq!(c.readerr(), 5);
        assert_eq!(c.read(), 12, "errors do not touch the success count");
        c.set(3).unwrap();
        c.seterr(0).unwrap();
        assert_eq!((c.read(), c.readerr()), (3, 0));
        c.set(u64::MAX).unwrap();
        c.inc();
        assert_eq!(c.value(), 0, "wraps like a 64-bit atomic");
        c.set_ops_flags(Flags::TRANSMIT_COMPLETE);
        assert_eq!(c.ops_flags(), Flags::TRANSMIT_COMPLETE);
    }

    #[test]
    fn wait_needs_a_usable_wait_object() {
        let set = Cntr::new(&CntrAttr {
            wait_obj: WaitObj::Set,
            wait_set: 1,
            ..CntrAttr::default()
        })
        .unwrap();
        assert_eq!(set.check_wait(), Err(Errno::ENOSYS));
        for w in [
            WaitObj::None,
            WaitObj::Unspec,
            WaitObj::Fd,
            WaitObj::MutexCond,
            WaitObj::Yield,
            WaitObj::PollFd,
        ] {
            let c = Cntr::new(&CntrAttr {
                wait_obj: w,
                ..CntrAttr::default()
            })
            .unwrap();
            assert_eq!(c.check_wait(), Ok(()));
        }
    }

    #[test]
    fn threshold_is_reached() {
        let mut c = waitable();
        let now = Instant::from_millis(1);
        c.add(2).unwrap();
        let w = c.wait_begin(3, None).unwrap();
        assert_eq!(c.reached(&w, now), Ok(false));
        c.inc();
        assert_eq!(c.reached(&w, now), Ok(true));
        c.inc();
        assert_eq!(c.reached(&w, now), Ok(true), "greater or equal");
        let w0 = c.wait_begin(0, None).unwrap();
        assert_eq!(c.reached(&w0, now), Ok(true));
    }

    #[test]
    fn error_change_during_wait_is_eavail() {
        let mut c = waitable();
        let now = Instant::ZERO;
        // Errors from before the wait do not end it.
        c.adderr(3).unwrap();
        let w = c.wait_begin(5, None).unwrap();
        assert_eq!(c.reached(&w, now), Ok(false));
        c.inc_err();
        assert_eq!(c.reached(&w, now), Err(Errno::EAVAIL));
        assert_eq!(Errno::EAVAIL.code(), 259);
        // The threshold is checked first.
        c.add(5).unwrap();
        assert_eq!(c.reached(&w, now), Ok(true));

        // Any change of the error value counts, even one that lowers it...
        let mut c = waitable();
        c.seterr(4).unwrap();
        let w = c.wait_begin(1, None).unwrap();
        c.seterr(0).unwrap();
        assert_eq!(c.reached(&w, now), Err(Errno::EAVAIL));
        // ...and even one that is later undone.
        let w = c.wait_begin(1, None).unwrap();
        c.adderr(1).unwrap();
        c.seterr(0).unwrap();
        assert_eq!(c.reached(&w, now), Err(Errno::EAVAIL));
        // Setting the same value, or adding 0, is no change.
        let w = c.wait_begin(1, None).unwrap();
        c.seterr(0).unwrap();
        c.adderr(0).unwrap();
        assert_eq!(c.reached(&w, now), Ok(false));
    }

    #[test]
    fn timeout_is_etimedout() {
        let mut c = waitable();
        let start = Instant::from_millis(100);
        let w = c
            .wait_begin(1, Some(start + Duration::from_millis(10)))
            .unwrap();
        assert_eq!(c.reached(&w, start), Ok(false));
        assert_eq!(c.reached(&w, Instant::from_millis(109)), Ok(false));
        assert_eq!(
            c.reached(&w, Instant::from_millis(110)),
            Err(Errno::ETIMEDOUT)
        );
        assert_eq!(c.readerr(), 0, "a timeout leaves the error value unchanged");
        // No deadline: never times out.
        let forever = c.wait_begin(1, None).unwrap();
        assert_eq!(
            c.reached(&forever, Instant::from_micros(u64::MAX)),
            Ok(false)
        );
        c.inc();
        assert_eq!(c.reached(&w, Instant::from_millis(500)), Ok(true));
    }

    #[test]
    fn armed_wait_wakes_on_threshold_or_error() {
        let mut c = waitable();
        let w = c.wait_begin(3, None).unwrap();
        c.arm(&w);
        c.inc();
        c.inc();
        assert!(!c.take_wakeup());
        c.inc();
        assert!(c.take_wakeup());
        assert!(!c.take_wakeup());

        let w = c.wait_begin(100, None).unwrap();
        c.arm(&w);
        c.inc();
        assert!(!c.take_wakeup());
        c.inc_err();
        assert!(c.take_wakeup());
    }

    #[test]
    fn trywait_reports_unread_changes() {
        let mut c = Cntr::new(&CntrAttr::default()).unwrap();
        assert_eq!(c.trywait(), Err(Errno::EINVAL));

        let mut c = waitable();
        assert_eq!(c.trywait(), Ok(()));
        let g = c.generation();
        c.inc();
        assert!(c.take_wakeup());
        assert_ne!(c.generation(), g);
        assert_eq!(c.trywait(), Err(Errno::EAGAIN));
        c.read();
        assert_eq!(c.trywait(), Ok(()));
        c.inc_err();
        assert!(c.take_wakeup());
        assert_eq!(c.trywait(), Err(Errno::EAGAIN));
        c.readerr();
        assert_eq!(c.trywait(), Ok(()));
    }

    #[test]
    fn close_is_refused_while_bound() {
        let mut c = waitable();
        c.bind_ref();
        assert_eq!(c.check_close(), Err(Errno::EBUSY));
        c.unbind_ref();
        assert_eq!(c.check_close(), Ok(()));
    }
}
