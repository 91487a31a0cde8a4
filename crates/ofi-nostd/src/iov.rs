//! Buffer lists and their limits: the iov of one operation and of one memory
//! registration.
//!
//! A leaf module: endpoints, the domain and the RDM engine all carry [`IovList`]s, and
//! getinfo advertises the limits.

use crate::errno::{Errno, Result};
use crate::mem::IoVec;

/// Largest iov count of one operation (`tx_attr.iov_limit`, `rx_attr.iov_limit`).
pub const IOV_LIMIT: usize = 4;

/// Largest iov count of one memory registration (`domain_attr.mr_iov_limit`).
pub const MR_IOV_LIMIT: usize = 4;

/// A user buffer list of at most [`IOV_LIMIT`] entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IovList {
    iov: [IoVec; IOV_LIMIT],
    count: u8,
}

impl IovList {
    /// The empty list (a `const` [`Default`]).
    pub(crate) const EMPTY: IovList = IovList {
        iov: [IoVec { addr: 0, len: 0 }; IOV_LIMIT],
        count: 0,
    };

    /// The list `iov`; -FI_EINVAL if longer than `limit` (or [`IOV_LIMIT`]).
    pub fn new(iov: &[IoVec], limit: usize) -> Result<IovList> {
        if iov.len() > limit.min(IOV_LIMIT) {
            return Err(Errno::EINVAL);
        }
        let mut l = IovList::default();
        // Element by element: lists are short, and a call to memcpy costs more.
        for (d, s) in l.iov.iter_mut().zip(iov) {
            *d = *s;
        }
        l.count = iov.len() as u8;
        Ok(l)
    }

    /// The list of the one buffer `v`.
    pub fn one(v: IoVec) -> IovList {
        let mut l = IovList::default();
        l.iov[0] = v;
        l.count = 1;
        l
    }

    /// The buffers.
    pub fn as_slice(&self) -> &[IoVec] {
        &self.iov[..self.count as usize]
    }

    /// Total bytes; saturates rather than overflow on absurd lengths.
    pub fn total_len(&self) -> usize {
        self.as_slice()
            .iter()
            .fold(0usize, |a, v| a.saturating_add(v.len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iov_list_limits() {
        let v = [IoVec::new(0, 1); 5];
        assert_eq!(IovList::new(&v, 4), Err(Errno::EINVAL));
        assert_eq!(IovList::new(&v[..3], 2), Err(Errno::EINVAL));
        let l = IovList::new(&v[..3], 4).unwrap();
        assert_eq!(l.total_len(), 3);
        assert_eq!(
            IovList::new(&[IoVec::new(0, usize::MAX), IoVec::new(0, 1)], 4)
                .unwrap()
                .total_len(),
            usize::MAX
        );
    }
}
