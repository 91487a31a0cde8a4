//! Shared transmit contexts (fi_endpoint(3) "SHARED CONTEXTS", `fi_stx_context`).
//!
//! Operations are posted to the endpoints, never to the context, and complete on the
//! endpoints' CQs and counters; what the context holds is the contract of the
//! endpoints bound to it: they use a subset of its transmit attributes (size, inject
//! size, iov limit, capabilities). Each bound endpoint's engine keeps the transmit
//! queue of its own sessions (a session's packets must carry that endpoint's
//! address), so the context is a binding, not a queue of its own; but its `size` is
//! one capacity the bound endpoints share: their unfinished operations together never
//! exceed it (a post beyond is -FI_EAGAIN, and `fi_tx_size_left` says what is left of
//! it).

use crate::ep::EpHandle;
use crate::ep::srx::MAX_SHARED_BINDINGS;
use crate::errno::{Errno, Result};
use crate::flags::Flags;
use crate::storage::Storage;

/// A shared transmit context.
pub struct Stx<S: Storage> {
    pub(crate) context: u64,
    /// Transmit capabilities (empty: the domain's).
    pub(crate) caps: Flags,
    pub(crate) op_flags: Flags,
    pub(crate) size: usize,
    pub(crate) inject_size: usize,
    pub(crate) iov_limit: usize,
    /// The endpoints bound.
    pub(crate) eps: heapless::Vec<EpHandle<S>, MAX_SHARED_BINDINGS>,
}

impl<S: Storage> Stx<S> {
    /// The application's context.
    pub fn context(&self) -> u64 {
        self.context
    }

    /// Endpoints bound now.
    pub fn bound(&self) -> usize {
        self.eps.len()
    }

    /// The default transmit flags of its attributes.
    pub fn op_flags(&self) -> Flags {
        self.op_flags
    }

    /// The attributes (size, inject size, iov limit).
    pub fn limits(&self) -> (usize, usize, usize) {
        (self.size, self.inject_size, self.iov_limit)
    }

    /// Binds `h`, whose transmit side asks for `caps`, `size`, `inject` and `iov`:
    /// -FI_EINVAL when any exceeds the context's (fi_endpoint(3): a subset of its
    /// attributes) or beyond [`MAX_SHARED_BINDINGS`] engines.
    pub(crate) fn bind(
        &mut self,
        h: EpHandle<S>,
        caps: Flags,
        size: usize,
        inject: usize,
        iov: usize,
    ) -> Result<()> {
        let caps_ok = self.caps.is_empty() || self.caps.contains(caps);
        if !caps_ok || size > self.size || inject > self.inject_size || iov > self.iov_limit {
            return Err(Errno::EINVAL);
        }
        self.eps.push(h).map_err(|_| Errno::EINVAL)
    }

    /// Unbinds endpoint `h` (it closes).
    pub(crate) fn unbind(&mut self, h: EpHandle<S>) {
        self.eps.retain(|e| *e != h);
    }
}
