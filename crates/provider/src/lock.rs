//! The domain lock, and how FI_THREAD_DOMAIN skips it on the data path.
//!
//! Everything a domain owns (the core domain, its data plane, the wait registrations of
//! its CQs and counters) sits in one [`DomainLock`]. There are two ways in:
//!
//! - [`DomainLock::control`]: always locks. Used by every control call (open, close,
//!   bind, enable, options, FI_SETOPSFLAG...), which fi_domain(3) makes thread-safe
//!   whatever the threading model.
//! - [`DomainLock::data`]: the data path (posts, CQ and counter reads, blocking reads'
//!   progress, trywait, cancel). It locks under FI_THREAD_SAFE (and the FID / ENDPOINT /
//!   COMPLETION models, which this provider serves as FI_THREAD_SAFE). Under
//!   FI_THREAD_DOMAIN it takes **no lock**: fi_domain(3) makes the application
//!   serialize every access to the domain and the objects opened on it, so no other
//!   thread can be inside the domain at the same time. An application that breaks that
//!   contract races on the domain's state, exactly as it would with any libfabric
//!   provider that relies on FI_THREAD_DOMAIN.
//!
//! The lock itself is a test-and-test-and-set spin lock that yields the CPU after a
//! short spin: critical sections are one core call or one progress pass (microseconds),
//! and nothing ever blocks while holding it (blocking reads sleep outside it).

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

/// A value guarded by a spin lock that the data path may bypass (see the module docs).
pub struct DomainLock<T> {
    locked: AtomicBool,
    /// False under FI_THREAD_DOMAIN: [`DomainLock::data`] does not lock.
    data_locks: bool,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached through a guard; guards of `control` and of `data`
// with `data_locks` hold the lock, so at most one exists at a time. Unlocked data
// guards exist only under FI_THREAD_DOMAIN, whose contract (the application
// serializes every access to the domain) gives the same exclusion. `T: Send` because
// the value moves between the threads that take the lock.
unsafe impl<T: Send> Sync for DomainLock<T> {}
// SAFETY: owning the lock owns the value.
unsafe impl<T: Send> Send for DomainLock<T> {}

impl<T> DomainLock<T> {
    /// A lock around `value`; `data_locks` false for FI_THREAD_DOMAIN.
    pub fn new(value: T, data_locks: bool) -> Self {
        DomainLock {
            locked: AtomicBool::new(false),
            data_locks,
            value: UnsafeCell::new(value),
        }
    }

    /// Whether the data path locks (false: FI_THREAD_DOMAIN).
    pub fn data_locks(&self) -> bool {
        self.data_locks
    }

    fn acquire(&self) {
        let mut spins = 0u32;
        loop {
            if self
                .locked
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                return;
            }
            while self.locked.load(Ordering::Relaxed) {
                if spins < 128 {
                    spins += 1;
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
        }
    }

    /// Locks for a control call.
    pub fn control(&self) -> Guard<'_, T> {
        self.acquire();
        Guard {
            lock: self,
            held: true,
        }
    }

    /// Enters for a data-path call: locks unless FI_THREAD_DOMAIN.
    pub fn data(&self) -> Guard<'_, T> {
        if self.data_locks {
            self.control()
        } else {
            Guard {
                lock: self,
                held: false,
            }
        }
    }

    /// The value, through exclusive ownership of the lock.
    pub fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

/// Access to a [`DomainLock`]'s value; releases the lock (if it took it) when dropped.
pub struct Guard<'a, T> {
    lock: &'a DomainLock<T>,
    held: bool,
}

impl<T> Deref for Guard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        // SAFETY: this guard is the only access to the value (see the Sync impl).
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for Guard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this the only borrow of the guard.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for Guard<'_, T> {
    fn drop(&mut self) {
        if self.held {
            self.lock.locked.store(false, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_under_contention() {
        let l = std::sync::Arc::new(DomainLock::new(0u64, true));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for _ in 0..10_000 {
                        *l.data() += 1;
                        *l.control() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*l.control(), 80_000);
    }

    #[test]
    fn domain_threading_data_path_does_not_lock() {
        let l = DomainLock::new(1u32, false);
        let a = l.data();
        // A second data guard would deadlock if it locked.
        drop(l.data());
        assert_eq!(*a, 1);
        drop(a);
        *l.control() += 1;
        assert_eq!(*l.data(), 2);
    }
}
