//! Native wait objects (FI_WAIT_FD, and FI_WAIT_UNSPEC, which this provider serves the
//! same way): what `fi_control(FI_GETWAIT)` hands out and what the blocking reads sleep
//! on.
//!
//! Each CQ or counter with a wait object owns a [`WaitFd`] (the host runtime's
//! [`WaitObject`]): an epoll descriptor over
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

use std::os::fd::{AsRawFd, BorrowedFd, RawFd};

use hosted::runtime::WaitObject;
use ofi_nostd::Errno;

/// The epoll set of one waitable object.
pub type WaitFd = WaitObject;

/// A wait object over a new eventfd, plus (for CQs and counters) the data plane's
/// descriptor `link` (open for the call; the set keeps a duplicate) and a timerfd.
pub fn open(link: Option<RawFd>) -> Result<WaitFd, Errno> {
    // SAFETY: the caller's descriptor is open for this call (the domain's data plane,
    // which outlives its CQs and counters); the set duplicates it.
    let link = link.map(|l| unsafe { BorrowedFd::borrow_raw(l) });
    WaitObject::new(link).map_err(|_| Errno::ENOMEM)
}

/// The eventfd of `w` that progress signals.
pub fn event_fd(w: &WaitFd) -> RawFd {
    w.event_fd().as_raw_fd()
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
    fn signal_and_drain() {
        let w = open(None).unwrap();
        let fd = w.fd().as_raw_fd();
        assert!(!readable(fd));
        w.signal();
        assert!(readable(fd));
        w.drain();
        assert!(!readable(fd));
        signal_fd(event_fd(&w));
        assert!(readable(fd));
    }
}
