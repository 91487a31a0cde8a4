//! Wait-object kinds (`enum fi_wait_obj`), shared by EQs, CQs and counters.
//!
//! A leaf module: the queues and counters that name a wait object depend on it, it
//! depends on none of them.

use crate::errno::{Errno, Result};

/// `enum fi_wait_obj`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(i32)]
pub enum WaitObj {
    /// FI_WAIT_NONE: the application never blocks on the object.
    #[default]
    None = 0,
    /// FI_WAIT_UNSPEC: blocking through fabric calls only; the provider picks.
    Unspec = 1,
    /// FI_WAIT_SET: a wait set (`wait_set`) is signalled.
    Set = 2,
    /// FI_WAIT_FD: a file descriptor usable with poll/epoll.
    Fd = 3,
    /// FI_WAIT_MUTEX_COND: a pthread mutex and condition variable.
    MutexCond = 4,
    /// FI_WAIT_YIELD: waits spin and yield.
    Yield = 5,
    /// FI_WAIT_POLLFD: a set of fds (wait sets and counters only).
    PollFd = 6,
}

impl WaitObj {
    /// The wait object for a C `enum fi_wait_obj` value; -FI_EINVAL for unknown values.
    pub const fn from_raw(raw: i32) -> Result<WaitObj> {
        Ok(match raw {
            0 => WaitObj::None,
            1 => WaitObj::Unspec,
            2 => WaitObj::Set,
            3 => WaitObj::Fd,
            4 => WaitObj::MutexCond,
            5 => WaitObj::Yield,
            6 => WaitObj::PollFd,
            _ => return Err(Errno::EINVAL),
        })
    }

    /// The wait objects fi_cq(3)/fi_eq(3) allow for queues (everything but POLLFD), and
    /// FI_WAIT_SET only with a wait set; -FI_EINVAL otherwise.
    pub(crate) fn validate_for_queue(self, wait_set: u64) -> Result<()> {
        match self {
            WaitObj::PollFd => Err(Errno::EINVAL),
            WaitObj::Set if wait_set == 0 => Err(Errno::EINVAL),
            _ => Ok(()),
        }
    }
}
