//! libfabric error codes (fi_errno(3)).
//!
//! Every fallible call in the core returns [`Result`]; the error is an [`Errno`] whose
//! numeric value is exactly libfabric's (Linux errno values below 256, libfabric's own
//! codes from 256), so the C provider returns `-(err as i32)` unchanged.

use core::fmt;

macro_rules! errnos {
    ($($(#[$m:meta])* $name:ident = $val:expr, $msg:expr;)*) => {
        /// A libfabric error code. The discriminant is the positive `FI_E*` value.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[repr(i32)]
        #[non_exhaustive]
        pub enum Errno {
            $($(#[$m])* #[doc = $msg] $name = $val,)*
        }

        impl Errno {
            /// The positive libfabric error number (`FI_E*`).
            pub const fn code(self) -> i32 {
                self as i32
            }

            /// The error for a positive or negative libfabric error number, if known.
            pub const fn from_code(code: i32) -> Option<Errno> {
                match code.unsigned_abs() as i32 {
                    $($val => Some(Errno::$name),)*
                    _ => None,
                }
            }

            /// The `FI_E*` name, as libfabric spells it.
            pub const fn name(self) -> &'static str {
                match self {
                    $(Errno::$name => concat!("FI_", stringify!($name)),)*
                }
            }

            /// The message `fi_strerror` gives for this error.
            pub const fn message(self) -> &'static str {
                match self {
                    $(Errno::$name => $msg,)*
                }
            }
        }
    };
}

errnos! {
    EPERM = 1, "Operation not permitted";
    ENOENT = 2, "No such file or directory";
    EINTR = 4, "Interrupted system call";
    EIO = 5, "Input/output error";
    E2BIG = 7, "Argument list too long";
    EBADF = 9, "Bad file descriptor";
    EAGAIN = 11, "Resource temporarily unavailable";
    ENOMEM = 12, "Cannot allocate memory";
    EACCES = 13, "Permission denied";
    EFAULT = 14, "Bad address";
    EBUSY = 16, "Device or resource busy";
    ENODEV = 19, "No such device";
    EINVAL = 22, "Invalid argument";
    EMFILE = 24, "Too many open files";
    ENOSPC = 28, "No space left on device";
    ENOSYS = 38, "Function not implemented";
    ENOMSG = 42, "No message of desired type";
    ENODATA = 61, "No data available";
    EOVERFLOW = 75, "Value too large for defined data type";
    EMSGSIZE = 90, "Message too long";
    ENOPROTOOPT = 92, "Protocol not available";
    EOPNOTSUPP = 95, "Operation not supported";
    EADDRINUSE = 98, "Address already in use";
    EADDRNOTAVAIL = 99, "Cannot assign requested address";
    ENETDOWN = 100, "Network is down";
    ENETUNREACH = 101, "Network is unreachable";
    ECONNABORTED = 103, "Software caused connection abort";
    ECONNRESET = 104, "Connection reset by peer";
    ENOBUFS = 105, "No buffer space available";
    EISCONN = 106, "Transport endpoint is already connected";
    ENOTCONN = 107, "Transport endpoint is not connected";
    ESHUTDOWN = 108, "Cannot send after transport endpoint shutdown";
    ETIMEDOUT = 110, "Connection timed out";
    ECONNREFUSED = 111, "Connection refused";
    EHOSTDOWN = 112, "Host is down";
    EHOSTUNREACH = 113, "No route to host";
    EALREADY = 114, "Operation already in progress";
    EINPROGRESS = 115, "Operation now in progress";
    EREMOTEIO = 121, "Remote I/O error";
    ECANCELED = 125, "Operation canceled";
    EKEYREJECTED = 129, "Key was rejected by service";
    EOTHER = 256, "Unspecified error";
    ETOOSMALL = 257, "Provided buffer is too small";
    EOPBADSTATE = 258, "Operation not permitted in current state";
    EAVAIL = 259, "Error available";
    EBADFLAGS = 260, "Flags not supported";
    ENOEQ = 261, "Missing or unavailable event queue";
    EDOMAIN = 262, "Invalid resource domain";
    ENOCQ = 263, "Missing or unavailable completion queue";
    ECRC = 264, "CRC error";
    ETRUNC = 265, "Truncation error";
    ENOKEY = 266, "Required key not available";
    ENOAV = 267, "Missing or unavailable address vector";
    EOVERRUN = 268, "Queue has been overrun";
    ENORX = 269, "Receiver not ready, no receive buffers available";
}

impl Errno {
    /// The value a libfabric call returns for this error: the negated code.
    pub const fn to_ret(self) -> isize {
        -(self as i32 as isize)
    }
}

impl fmt::Display for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.message())
    }
}

impl core::error::Error for Errno {}

/// The result of every fallible core call.
pub type Result<T> = core::result::Result<T, Errno>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_libfabric() {
        assert_eq!(Errno::EAGAIN.code(), 11);
        assert_eq!(Errno::ENODATA.code(), 61);
        assert_eq!(Errno::EAVAIL.code(), 259);
        assert_eq!(Errno::ENORX.code(), 269);
        assert_eq!(Errno::ETRUNC.to_ret(), -265);
    }

    #[test]
    fn round_trip_and_names() {
        for code in 0..300 {
            if let Some(e) = Errno::from_code(code) {
                assert_eq!(e.code(), code);
                assert_eq!(Errno::from_code(-code), Some(e));
                assert!(e.name().starts_with("FI_E"));
                assert!(!e.message().is_empty());
            }
        }
        assert_eq!(Errno::from_code(3), None);
        assert_eq!(Errno::ECANCELED.name(), "FI_ECANCELED");
    }
}
