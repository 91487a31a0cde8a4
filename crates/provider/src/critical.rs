//! Critical endpoint errors on the EQ (fi_endpoint(3), fi_eq(3) "asynchronous error
//! notification"): failures no operation reports, such as a peer's session reset or
//! timed out while nothing was in flight to it (the core's
//! [`EpFault`](ofi_nostd::rdm::EpFault)).
//!
//! An EQ keeps the endpoints bound to it ([`BoundEps`]); before each read, readerr or
//! trywait it takes each one's pending fault and writes it as an error entry: `fid` the
//! endpoint, `context` the endpoint's context, `err` the reason (of the last, when
//! several came), `data` how many. The faults wait in the core until then; the pass
//! that records one signals the EQ's wait object (`hosted::runtime::Wake::Fault`,
//! registered when the EQ is bound), so a waiter on the EQ's fd wakes to read it.
//!
//! Lock order: the list, then an endpoint's domain, then (released first) the fabric
//! for the EQ.

use std::sync::{Mutex, MutexGuard};

use ofi_nostd::eq::EqErrEntry;

use hosted::storage::Heap;
use ofi_nostd::domain::{EpHandle, PepHandle};

use crate::domain::{DomainFid, DomainRef};
use crate::ep::EpFid;
use crate::ep::pep::PepFid;
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

    /// The domains of the FI_EP_MSG endpoints in the list (their passes make the
    /// connection events, see `crate::ep::cm`).
    pub(crate) fn msg_domains(&self) -> Vec<DomainRef> {
        let l = self.list();
        l.iter()
            // SAFETY: in the list, so alive (see `remove`).
            .map(|&e| unsafe { &*e })
            .filter(|e| e.msg)
            // SAFETY: an endpoint's domain refuses fi_close while the endpoint is open,
            // and it is open while in the list.
            .map(|e| unsafe { DomainRef::retain(e.at.domain_ptr()) })
            .collect()
    }

    /// The fid address and context of the endpoint `h` of domain `d` in the list.
    pub fn find(&self, d: *const DomainFid, h: EpHandle<Heap>) -> Option<(u64, u64)> {
        let l = self.list();
        l.iter()
            // SAFETY: in the list, so alive (see `remove`).
            .map(|&e| unsafe { &*e })
            .find(|e| std::ptr::eq(e.at.domain_ptr(), d) && e.at.handle == h)
            .map(|e| (e.fid_addr(), e.context_addr()))
    }

    /// Writes each endpoint's pending fault to `eq` as an error entry.
    pub fn collect(&self, eq: &EqFid) {
        let l = self.list();
        for &e in l.iter() {
            // SAFETY: in the list, so alive (see `remove`).
            let e = unsafe { &*e };
            let h = e.at.handle;
            let Ok(Some(f)) = e.at.domain().control(|st| st.core.ep_take_fault(h)) else {
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

/// The passive endpoints bound to one EQ (their connection requests go to it).
#[derive(Default)]
pub struct BoundPeps(Mutex<Vec<*const PepFid>>);

// SAFETY: as for `BoundEps`: the pointers are dereferenced under the list's lock while
// the passive endpoints are alive (they leave the list before they are released).
unsafe impl Send for BoundPeps {}
// SAFETY: as above.
unsafe impl Sync for BoundPeps {}

impl BoundPeps {
    fn list(&self) -> MutexGuard<'_, Vec<*const PepFid>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `pep` was bound to the EQ.
    pub fn add(&self, pep: &PepFid) {
        self.list().push(pep);
    }

    /// `pep` closes: it leaves the list before it is released.
    pub fn remove(&self, pep: &PepFid) {
        let mut l = self.list();
        if let Some(i) = l.iter().position(|&p| std::ptr::eq(p, pep)) {
            l.swap_remove(i);
        }
    }

    /// The private domains the passive endpoints listen on.
    pub(crate) fn domains(&self) -> Vec<DomainRef> {
        let l = self.list();
        l.iter()
            // SAFETY: in the list, so alive (see `remove`).
            .filter_map(|&p| unsafe { &*p }.retain_domain())
            .collect()
    }

    /// The fid address of the passive endpoint whose listener is `h` in `d`, and the
    /// passive endpoint.
    pub fn find(&self, d: *const DomainFid, h: PepHandle<Heap>) -> Option<(u64, *const PepFid)> {
        let l = self.list();
        l.iter()
            .copied()
            // SAFETY: in the list, so alive (see `remove`).
            .find(|&p| unsafe { &*p }.is(d, h))
            // SAFETY: as above.
            .map(|p| (unsafe { &*p }.fid_addr(), p))
    }
}
