//! The wake-up registry: which native wait object progress signals when the core says
//! a CQ's or counter's armed wait now holds, or an EQ has an event to give.

use ofi_nostd::domain::{CntrHandle, CqHandle};

use super::CoreDomain;
use crate::storage::Heap;

/// A CQ or counter whose wait object progress signals when the core asks for a wake-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// A completion queue.
    Cq(CqHandle<Heap>),
    /// A counter.
    Cntr(CntrHandle),
    /// An event queue waiting for the connection-management events of this domain
    /// (FI_EP_MSG): signalled on every pass while one is pending; the number tells
    /// registrations apart (the provider uses the fid of the endpoint or passive
    /// endpoint bound to the EQ).
    Cm(u64),
    /// An event queue bound to this endpoint, for its critical errors (session
    /// failures no operation reports, [`ofi_nostd::rdm::EpFault`]): signalled once for
    /// each one the endpoint records; looked at on every pass while registered.
    Fault(ofi_nostd::ep::EpHandle<Heap>),
}

/// A native wait object progress can make readable (the safe API's eventfd, the
/// provider's raw eventfd descriptor).
pub trait Signal {
    /// Makes the wait object readable.
    fn signal(&self);
}

impl<T: Signal + ?Sized> Signal for std::sync::Arc<T> {
    fn signal(&self) {
        (**self).signal();
    }
}

/// The registered wait objects of a domain, and whether any of them may be due.
///
/// Every progress pass asks ([`Wakeups::wake`]), tens of millions of times a second in
/// a busy-polling loop, so the registry skips the scan while no wait was armed since it
/// last looked: a core CQ or counter raises a wake-up only for a wait armed (fi_trywait,
/// sread, fi_cntr_wait) or a signal (fi_cq_signal), and whoever arms or signals calls
/// [`Wakeups::note`] first, under the same lock. After a scan the flag stays up while
/// any object is still armed, so no wake-up can be missed.
#[derive(Debug)]
pub struct Wakeups<S> {
    regs: Vec<(Wake, S)>,
    /// A wait may be armed or a wake-up pending.
    armed: bool,
}

impl<S> Default for Wakeups<S> {
    fn default() -> Self {
        Wakeups {
            regs: Vec::new(),
            armed: false,
        }
    }
}

impl<S: Signal> Wakeups<S> {
    /// Registers the wait object of a CQ, counter or (for CM events and critical
    /// errors) EQ.
    pub fn add(&mut self, w: Wake, s: S) {
        if matches!(w, Wake::Cm(_) | Wake::Fault(_)) {
            self.armed = true;
        }
        self.regs.push((w, s));
    }

    /// Forgets a registration (the object is closing).
    pub fn remove(&mut self, w: Wake) {
        self.regs.retain(|(x, _)| *x != w);
    }

    /// A wait on a CQ or counter was armed, or a CQ signalled: the next
    /// [`Wakeups::wake`] must look.
    #[inline]
    pub fn note(&mut self) {
        self.armed = true;
    }

    /// Signals the wait object of every registered CQ and counter the core says must
    /// wake (nothing to do while no wait was armed since the last look).
    #[inline]
    pub fn wake(&mut self, core: &mut CoreDomain) {
        if self.armed {
            self.scan(core);
        }
    }

    fn scan(&mut self, core: &mut CoreDomain) {
        let mut armed = false;
        for (w, s) in &self.regs {
            let (fire, still) = match *w {
                Wake::Cq(h) => core
                    .cq_mut(h)
                    .map_or((false, false), |q| (q.take_wakeup(), q.is_armed())),
                Wake::Cntr(h) => core
                    .cntr_mut(h)
                    .map_or((false, false), |c| (c.take_wakeup(), c.is_armed())),
                // Connection events have no armed state: looked at on every pass while
                // registered.
                Wake::Cm(_) => (core.cm_event_pending(), true),
                Wake::Fault(h) => (core.ep_take_fault_wakeup(h), true),
            };
            if fire {
                s.signal();
            }
            armed |= still;
        }
        self.armed = armed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::rc::Rc;

    use ofi_nostd::cq::CqAttr;
    use ofi_nostd::domain::DomainConfig;
    use ofi_nostd::eq::WaitObj;
    use ofi_nostd::info::{EpType, ProviderConfig, default_info};
    use ofi_nostd::net::NetConfig;
    use wire::link::{Capabilities, Medium};

    struct Count(Rc<Cell<u32>>);

    impl Signal for Count {
        fn signal(&self) {
            self.0.set(self.0.get() + 1);
        }
    }

    fn domain() -> (super::super::CoreFabric, CoreDomain) {
        let mut f = super::super::CoreFabric::open(&Default::default(), 0, Heap, 4).unwrap();
        let net = NetConfig::new(&Capabilities::new(Medium::Udp, 1472), [127, 0, 0, 1], 1);
        let info = default_info(EpType::Rdm, None, &ProviderConfig::DEFAULT);
        let dc = DomainConfig::new(net, ProviderConfig::DEFAULT, 1);
        let d = CoreDomain::open(&mut f, &info, dc, Heap, 0).unwrap();
        (f, d)
    }

    #[test]
    fn a_signal_wakes_once_and_an_unarmed_registry_does_not_look() {
        let (_f, mut d) = domain();
        let attr = CqAttr {
            wait_obj: WaitObj::Fd,
            ..CqAttr::default()
        };
        let h = d.cq_open(&attr, 0).unwrap();
        let n = Rc::new(Cell::new(0));
        let mut w = Wakeups::default();
        w.add(Wake::Cq(h), Count(n.clone()));
        d.cq_mut(h).unwrap().signal().unwrap();
        // Not noted: the registry does not look (the adapter always notes first).
        w.wake(&mut d);
        assert_eq!(n.get(), 0);
        w.note();
        w.wake(&mut d);
        assert_eq!(n.get(), 1);
        // Taken: nothing armed any more, so the next passes skip the scan.
        w.wake(&mut d);
        assert_eq!(n.get(), 1);
        assert!(!w.armed);
        // An armed wait keeps the registry looking until it fires.
        assert!(d.cq_mut(h).unwrap().take_signal());
        d.cq_mut(h).unwrap().trywait().unwrap();
        w.note();
        w.wake(&mut d);
        assert!(w.armed, "still armed: nothing completed");
        w.remove(Wake::Cq(h));
        d.cq_mut(h).unwrap().signal().unwrap();
        w.wake(&mut d);
        assert_eq!(n.get(), 1, "a removed registration is not signalled");
    }
}
