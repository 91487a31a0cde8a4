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

    /// `fi_mr_bind` to a counter: `cntr` counts the peers' accesses to this region
    /// (FI_REMOTE_WRITE: writes and updating atomics; FI_REMOTE_READ: reads and
    /// ATOMIC_READ) through endpoints with FI_RMA_EVENT. The region cannot be closed
    /// while bound in the C API's sense: closing or dropping the `Mr` ends its bindings.
    pub fn bind_counter(
        &self,
        cntr: &super::Counter<C>,
        flags: ofi_nostd::flags::Flags,
    ) -> super::Result<()> {
        if !self.shared.same(cntr.shared()) {
            return Err(ofi_nostd::Errno::EDOMAIN.into());
        }
        let mut g = self.shared.lock();
        Ok(g.core.mr_bind_cntr(self.h, cntr.handle(), flags)?)
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
        // Its counter bindings end with it.
        let _ = g.core.mrs_mut().unbind_cntrs(self.h);
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
