//! Memory regions.

use ofi_nostd::mr::MrHandle;

use super::buf::Buf;
use super::shared::DomainRef;

/// A registered memory region (fi_mr(3)) that owns its buffer, so the memory cannot be
/// freed or reused while registered.
///
/// The core does not touch registered memory yet (no RMA engine); when RMA arrives,
/// remote accesses will go through the same checked table as posted buffers.
pub struct Mr<C: Send + 'static = u64> {
    shared: DomainRef<C>,
    h: MrHandle,
    buf: Option<Buf>,
}

impl<C: Send + 'static> Mr<C> {
    pub(crate) fn new(shared: DomainRef<C>, h: MrHandle, buf: Buf) -> Self {
        Mr {
            shared,
            h,
            buf: Some(buf),
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

    /// The registered buffer (read only while registered).
    pub fn buf(&self) -> &Buf {
        self.buf.as_ref().expect("present until close")
    }

    /// `fi_close`: deregisters and gives the buffer back.
    pub fn close(mut self) -> Buf {
        self.dereg();
        self.buf.take().expect("present until close")
    }

    fn dereg(&mut self) {
        let _ = self.shared.lock().core.mrs_mut().close(self.h);
    }
}

impl<C: Send + 'static> Drop for Mr<C> {
    fn drop(&mut self) {
        if self.buf.is_some() {
            self.dereg();
        }
    }
}
