//! The error type of the safe API.

use std::fmt;
use std::io;

use ofi_nostd::Errno;

use super::buf::Buf;

/// What a call of the safe API can fail with: a libfabric error code from the core (the
/// exact `FI_E*` value a C application would see), or an operating-system error from
/// setting up a data plane or a wait object.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A libfabric error (`-FI_EAGAIN`, `-FI_EMSGSIZE`, ...).
    Fabric(Errno),
    /// An operating-system error opening a socket, device, eventfd or thread.
    Io(io::Error),
}

impl Error {
    /// The libfabric code for this error, so callers can match on one type: an
    /// operating-system error maps to the libfabric code with the same number when
    /// there is one, else -FI_EIO.
    pub fn errno(&self) -> Errno {
        match self {
            Error::Fabric(e) => *e,
            Error::Io(e) => e
                .raw_os_error()
                .and_then(Errno::from_code)
                .unwrap_or(Errno::EIO),
        }
    }
}

impl From<Errno> for Error {
    fn from(e: Errno) -> Self {
        Error::Fabric(e)
    }
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Self {
        Error::Io(e)
    }
}

impl From<rustix::io::Errno> for Error {
    fn from(e: rustix::io::Errno) -> Self {
        Error::Io(e.into())
    }
}

impl PartialEq<Errno> for Error {
    fn eq(&self, other: &Errno) -> bool {
        self.errno() == *other
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Fabric(e) => write!(f, "{}: {}", e.name(), e.message()),
            Error::Io(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Fabric(_) => None,
            Error::Io(e) => Some(e),
        }
    }
}

/// The result type of the safe API.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A post that failed: the error, and the buffer and context the caller moved in, handed
/// back so a post refused with -FI_EAGAIN can simply be retried and no buffer is ever
/// lost.
pub struct PostError<C> {
    /// Why the post was refused.
    pub errno: Errno,
    /// The buffer, untouched.
    pub buf: Buf,
    /// The context.
    pub context: C,
}

impl<C> PostError<C> {
    /// The buffer and context, for a retry.
    pub fn into_parts(self) -> (Buf, C) {
        (self.buf, self.context)
    }
}

impl<C> fmt::Debug for PostError<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostError")
            .field("errno", &self.errno)
            .field("buf_len", &self.buf.len())
            .finish_non_exhaustive()
    }
}

impl<C> fmt::Display for PostError<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "post refused: {}", Error::Fabric(self.errno))
    }
}

impl<C> std::error::Error for PostError<C> {}

impl<C> From<PostError<C>> for Error {
    fn from(e: PostError<C>) -> Self {
        Error::Fabric(e.errno)
    }
}

impl<C> PartialEq<Errno> for PostError<C> {
    fn eq(&self, other: &Errno) -> bool {
        self.errno == *other
    }
}
