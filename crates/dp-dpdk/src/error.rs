//! The one error type of the crate.

use std::ffi::CStr;
use std::fmt;

use crate::sys;

/// What went wrong in a control-path call (the data path never returns errors; it
/// counts them in [`Stats`](crate::Stats)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A DPDK call failed with `errno` (a positive `errno` or `rte_errno` value).
    Dpdk {
        /// The DPDK function that failed.
        op: &'static str,
        /// Its error code.
        errno: i32,
        /// `rte_strerror(errno)`.
        message: String,
    },
    /// [`Eal::init`](crate::Eal::init) was called again with different arguments (EAL
    /// can be initialised once per process); carries the arguments in effect.
    EalAlreadyInitialised {
        /// The arguments EAL was initialised with.
        args: Vec<String>,
    },
    /// An argument this crate checks before calling DPDK.
    InvalidArgument(String),
    /// No DPDK port has this name (after probing, if devargs were given).
    NoSuchPort(String),
    /// The queue is already driven by another [`DpdkLink`](crate::DpdkLink).
    QueueBusy {
        /// Port id.
        port: u16,
        /// Queue id.
        queue: u16,
    },
    /// The port still has links; it closes when the last one is dropped.
    PortInUse(String),
    /// Waited longer than allowed (for a link to come up or go down).
    Timeout(String),
}

impl Error {
    /// An error of DPDK function `op` with code `errno` (sign ignored: DPDK returns
    /// `-errno` from most calls and sets a positive `rte_errno` for others).
    pub(crate) fn dpdk(op: &'static str, errno: i32) -> Self {
        let errno = errno.saturating_abs();
        // SAFETY: rte_strerror accepts any value and returns a NUL-terminated string
        // that stays valid at least until the next call on this thread; it is copied
        // at once.
        let message = unsafe {
            let p = sys::rte_strerror(errno);
            if p.is_null() {
                String::new()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        Error::Dpdk { op, errno, message }
    }

    /// The error of a call that reported failure through `rte_errno`.
    pub(crate) fn rte_errno(op: &'static str) -> Self {
        // SAFETY: reads the calling thread's rte_errno; no preconditions.
        let errno = unsafe { sys::shim_errno() };
        Self::dpdk(op, errno)
    }

    /// `Ok(ret)` for a non-negative return value, the error `-ret` otherwise.
    pub(crate) fn check(op: &'static str, ret: i32) -> Result<i32, Error> {
        if ret < 0 {
            Err(Self::dpdk(op, ret))
        } else {
            Ok(ret)
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Dpdk { op, errno, message } => write!(f, "{op}: {message} (errno {errno})"),
            Error::EalAlreadyInitialised { args } => write!(
                f,
                "EAL is already initialised in this process with other arguments ({})",
                args.join(" ")
            ),
            Error::InvalidArgument(s) => write!(f, "invalid argument: {s}"),
            Error::NoSuchPort(s) => write!(f, "no DPDK port named {s:?}"),
            Error::QueueBusy { port, queue } => {
                write!(f, "queue {queue} of port {port} already has a link")
            }
            Error::PortInUse(s) => write!(f, "port {s} still has links"),
            Error::Timeout(s) => write!(f, "timed out: {s}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<Error> for std::io::Error {
    fn from(e: Error) -> Self {
        let kind = match &e {
            Error::Dpdk { errno, .. } => std::io::Error::from_raw_os_error(*errno).kind(),
            Error::EalAlreadyInitialised { .. } | Error::QueueBusy { .. } => {
                std::io::ErrorKind::AlreadyExists
            }
            Error::PortInUse(_) => std::io::ErrorKind::ResourceBusy,
            Error::InvalidArgument(_) => std::io::ErrorKind::InvalidInput,
            Error::NoSuchPort(_) => std::io::ErrorKind::NotFound,
            Error::Timeout(_) => std::io::ErrorKind::TimedOut,
        };
        std::io::Error::new(kind, e)
    }
}
