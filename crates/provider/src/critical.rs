//! Critical endpoint errors on the EQ (fi_endpoint(3), fi_eq(3) "asynchronous error
//! notification"): failures no operation reports, such as a peer's session reset or
//! timed out while nothing was in flight to it (the core's
//! [`EpFault`](ofi_nostd::rdm::EpFault)).
//!
//! An EQ keeps the endpoints bound to it ([`BoundEps`]); before each read, readerr or
//! trywait it takes each one's pending fault and writes it as an error entry: `fid` the
//! endpoint, `context` the endpoint's context, `err` the reason (of the last, when
//! several came), `data` how many. The faults wait in the core until then: the data
//! path never touches the EQ, so a waiter on the EQ's fd is not woken by one.
//!
//! Lock order: the list, then an endpoint's domain, then (released first) the fabric
//! for the EQ.

use std::sync::{Mutex, MutexGuard};

use ofi_nostd::eq::EqErrEntry;

use crate::ep::EpFid;
use crate::eq::EqFid;

/// The endpoints bound to one EQ.
#[derive(Default)]
pub struct BoundEps(Mutex<Vec<*const EpFid>>);

// SAFETY: the pointers are only dereferenced under the list's lock, while the
// endpoints are alive (they leave the list before they are released); what they reach
// is behind their domain's lock.
unsafe impl Send for BoundEps {}
// SAFETY: as above.
unsafe impl Sync for BoundEps {}

impl BoundEps {
    fn list(&self) -> MutexGuard<'_, Vec<*const EpFid>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `ep` was bound to the EQ.
    pub fn add(&self, ep: &EpFid) {
        self.list().push(ep);
    }

    /// `ep` closes: it leaves the list before it is released.
    pub fn remove(&self, ep: &EpFid) {
        let mut l = self.list();
        if let Some(i) = l.iter().position(|&e| std::ptr::eq(e, ep)) {
            l.swap_remove(i);
        }
    }

    /// Writes each endpoint's pending fault to `eq` as an error entry.
    pub fn collect(&self, eq: &EqFid) {
        let l = self.list();
        for &e in l.iter() {
            // SAFETY: in the list, so alive (see `remove`).
            let e = unsafe { &*e };
            let h = e.at.handle;
            let Ok(Some(f)) =
                e.at.domain()
                    .control(|st| Ok(st.core.ep_mut(h)?.take_fault()))
            else {
                continue;
            };
            let entry = EqErrEntry {
                data: u64::from(f.count),
                ..EqErrEntry::new(e.fid_addr(), e.context_addr(), f.err)
            };
            let _ = eq.post(|q| q.post_err(&entry));
        }
    }
}
