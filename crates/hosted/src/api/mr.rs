//! Memory regions.

use ofi_nostd::mr::MrHandle;

use super::buf::Buf;
use super::shared::DomainRef;

/// A registered memory region (fi_mr(3)) that owns its buffer, so the memory cannot be
/// freed or reused while registered.
///
/// While registered the buffer lives in the domain's table of posted buffers: peers'
/// RMA reads and writes (checked by the core against the registration's key, access
/// and range) reach it there, and the application reaches it only under the domain's
/// lock ([`Mr::read`], [`Mr::write`]), so a remote write never races a local access.
pub struct Mr<C: Send + 'static = u64> {
    shared: DomainRef<C>,
    h: MrHandle,
    registered: bool,
}

impl<C: Send + 'static> Mr<C> {
    pub(crate) fn new(shared: DomainRef<C>, h: MrHandle) -> Self {
        Mr {
            shared,
            h,
            registered: true,
        }
    }

    /// `fi_mr_key`: the key a peer names this region by.
    pub fn key(&self) -> u64 {
        self.shared.lock().core.mrs().key(self.h).unwrap_or(0)
    }

    /// `fi_mr_desc`: the local descriptor.
    pub fn desc(&self) -> u64 {
        self.h.to_desc()
    }

    /// Reads the region (its whole capacity) under the domain's lock.
    pub fn read<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        let mut g = self.shared.lock();
        let b = g.ops.region_mut(self.h.to_desc()).expect("registered");
        f(b.storage())
    }

    /// Changes the region (its whole capacity) under the domain's lock.
    pub fn write<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> R {
        let mut g = self.shared.lock();
        let b = g.ops.region_mut(self.h.to_desc()).expect("registered");
        f(b.storage_mut())
    }

    /// `fi_close`: deregisters and gives the buffer back.
    pub fn close(mut self) -> Buf {
        self.dereg().expect("registered until close")
    }

    fn dereg(&mut self) -> Option<Buf> {
        self.registered = false;
        let mut g = self.shared.lock();
        let _ = g.core.mrs_mut().close(self.h);
        g.ops.take_region(self.h.to_desc())
    }
}

impl<C: Send + 'static> Drop for Mr<C> {
    fn drop(&mut self) {
        if self.registered {
            self.dereg();
        }
    }
}
