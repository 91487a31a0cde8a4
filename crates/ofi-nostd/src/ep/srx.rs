//! Shared receive contexts (fi_endpoint(3) "SHARED CONTEXTS", `fi_srx_context`): one
//! set of posted receives that every endpoint bound to it takes messages for.
//!
//! Each bound endpoint keeps its own engine (sessions, sequencing, unexpected
//! messages); its own posted queues stay empty. The context holds the application's
//! receives in the order they were posted. A message arriving at a bound RDM endpoint
//! takes the oldest of them that matches it at once (the pass lends them to the
//! engine: `rdm::SrxOffer`), landing in its buffer; one that finds none waits as an
//! unexpected message, and a receive posted later is handed to the bound endpoint
//! that has a matching message (tag, FI_DIRECTED_RECV source), where the engine's own
//! matching completes it. Either way it completes on that endpoint's CQ, as
//! fi_endpoint(3) says completions of a shared context go. A message from one sender
//! to one endpoint is matched in its order, so per-sender order holds; DGRAM endpoints
//! take a waiting buffer when a datagram arrives for them and their own queue is
//! empty.
//!
//! A multi-recv buffer (FI_MULTI_RECV) is one buffer that every bound endpoint fills,
//! but an engine's buffer is its own: the context lends it to one endpoint at a time
//! (`Lent`) and takes what is still free of it back for another endpoint that has
//! messages for it and no buffer, once no message is arriving into it. The pieces
//! complete on the CQ of the endpoint that took each; the release (FI_MULTI_RECV)
//! on the CQ of the endpoint holding the buffer when it fills.

use crate::ep::{DEFAULT_MIN_MULTI_RECV, EpHandle, EpOpt, FI_OPT_ENDPOINT};
use crate::errno::{Errno, Result};
use crate::fid::AvHandle;
use crate::flags::{FiAddr, Flags};
use crate::info::EpType;
use crate::iov::{IOV_LIMIT, IovList};
use crate::mem::IoVec;
use crate::storage::Storage;

pub use crate::info::MAX_SHARED_EPS;

/// Engines one shared context binds: [`MAX_SHARED_EPS`] endpoints, and room besides
/// for the context engines of a scalable endpoint bound to it (each binds as one).
pub const MAX_SHARED_BINDINGS: usize = MAX_SHARED_EPS + crate::sep::MAX_CTX;

/// Shared contexts of each kind a domain opens.
pub const MAX_SHARED_CTX: usize = 8;

/// Multi-recv buffers a shared receive context holds at once, waiting or lent
/// (-FI_EAGAIN beyond).
pub const MAX_SRX_MULTI: usize = 8;

/// A multi-recv buffer a shared receive context lent to a bound endpoint: `recv`
/// as handed over (its one iov is the part that was still free then).
#[derive(Debug)]
pub(crate) struct Lent<S: Storage> {
    pub(crate) ep: EpHandle<S>,
    pub(crate) recv: SrxRecv,
}

impl<S: Storage> Lent<S> {
    /// Whether `o` names the same buffer at the same endpoint.
    pub(crate) fn same(&self, o: &Lent<S>) -> bool {
        self.ep == o.ep && self.recv.context == o.recv.context && self.recv.base() == o.recv.base()
    }
}

impl<S: Storage> Clone for Lent<S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S: Storage> Copy for Lent<S> {}

pub(crate) use crate::matching::Held;

/// A receive waiting in a shared receive context for a message.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct SrxRecv {
    pub(crate) iov: IovList,
    pub(crate) desc: [u64; IOV_LIMIT],
    pub(crate) addr: FiAddr,
    pub(crate) context: u64,
    pub(crate) tag: Option<(u64, u64)>,
    pub(crate) flags: Flags,
    /// The context's FI_OPT_MIN_MULTI_RECV when it was posted (`None`: the taking
    /// endpoint's).
    pub(crate) min_free: Option<usize>,
}

impl SrxRecv {
    /// The buffers as posted.
    pub(crate) fn iov(&self) -> &[IoVec] {
        self.iov.as_slice()
    }

    /// Whether this is a multi-recv buffer.
    pub(crate) fn is_multi(&self) -> bool {
        self.flags.contains(Flags::MULTI_RECV)
    }

    /// Where its (one) buffer starts.
    pub(crate) fn base(&self) -> u64 {
        self.iov().first().map_or(0, |v| v.addr)
    }
}

/// A shared receive context.
pub struct Srx<S: Storage> {
    pub(crate) context: u64,
    /// Receive capabilities (empty: the domain's).
    pub(crate) caps: Flags,
    /// Default receive flags (`rx_attr.op_flags`).
    pub(crate) op_flags: Flags,
    pub(crate) iov_limit: usize,
    /// The endpoints bound, in bind order (their engines are searched in it).
    pub(crate) eps: heapless::Vec<EpHandle<S>, MAX_SHARED_BINDINGS>,
    /// The type of the endpoints bound (the first fixes it).
    pub(crate) ep_type: Option<EpType>,
    /// The AV every bound connectionless endpoint shares (the first enabled fixes it).
    pub(crate) av: Option<AvHandle<S>>,
    /// Multi-recv buffers lent to bound endpoints.
    pub(crate) lent: heapless::Vec<Lent<S>, MAX_SRX_MULTI>,
    /// FI_OPT_MIN_MULTI_RECV set on the context (`None`: each taking endpoint's).
    min_multi_recv: Option<usize>,
    waiting: S::Slice<SrxRecv>,
    len: usize,
}

impl<S: Storage> Srx<S> {
    /// A context holding up to `size` waiting receives, from `store`.
    pub(crate) fn new(
        store: &mut S,
        size: usize,
        caps: Flags,
        op_flags: Flags,
        iov_limit: usize,
        context: u64,
    ) -> Result<Self> {
        Ok(Srx {
            context,
            caps,
            op_flags,
            iov_limit,
            eps: heapless::Vec::new(),
            ep_type: None,
            av: None,
            lent: heapless::Vec::new(),
            min_multi_recv: None,
            waiting: store
                .slice(size.max(1), SrxRecv::default)
                .ok_or(Errno::ENOMEM)?,
            len: 0,
        })
    }

    /// The application's context.
    pub fn context(&self) -> u64 {
        self.context
    }

    /// Receives waiting for a message.
    pub fn waiting(&self) -> usize {
        self.len
    }

    /// How many receives can wait (`rx_attr.size`).
    pub fn capacity(&self) -> usize {
        self.waiting.as_ref().len()
    }

    /// Endpoints bound now.
    pub fn bound(&self) -> usize {
        self.eps.len()
    }

    /// The default receive flags.
    pub fn op_flags(&self) -> Flags {
        self.op_flags
    }

    /// `fi_getopt` at FI_OPT_ENDPOINT: FI_OPT_MIN_MULTI_RECV (the endpoints' default
    /// until set) and FI_OPT_RX_SIZE; other options -FI_ENOPROTOOPT.
    pub fn getopt(&self, level: i32, opt: EpOpt) -> Result<usize> {
        match (level, opt) {
            (FI_OPT_ENDPOINT, EpOpt::MinMultiRecv) => {
                Ok(self.min_multi_recv.unwrap_or(DEFAULT_MIN_MULTI_RECV))
            }
            (FI_OPT_ENDPOINT, EpOpt::RxSize) => Ok(self.capacity()),
            _ => Err(Errno::ENOPROTOOPT),
        }
    }

    /// `fi_setopt` at FI_OPT_ENDPOINT: FI_OPT_MIN_MULTI_RECV for the multi-recv
    /// buffers posted to the context afterwards (whichever endpoint takes them);
    /// other options -FI_ENOPROTOOPT.
    pub fn setopt(&mut self, level: i32, opt: EpOpt, value: usize) -> Result<()> {
        match (level, opt) {
            (FI_OPT_ENDPOINT, EpOpt::MinMultiRecv) => {
                self.min_multi_recv = Some(value);
                Ok(())
            }
            _ => Err(Errno::ENOPROTOOPT),
        }
    }

    /// FI_OPT_MIN_MULTI_RECV if set on the context.
    pub(crate) fn min_multi_recv(&self) -> Option<usize> {
        self.min_multi_recv
    }

    /// Appends a receive; -FI_EAGAIN when full.
    pub(crate) fn push(&mut self, r: SrxRecv) -> Result<()> {
        let slot = self
            .waiting
            .as_mut()
            .get_mut(self.len)
            .ok_or(Errno::EAGAIN)?;
        *slot = r;
        self.len += 1;
        Ok(())
    }

    /// Puts a receive first (a multi-recv buffer taken back, older than the rest);
    /// -FI_EAGAIN when full.
    pub(crate) fn push_front(&mut self, r: SrxRecv) -> Result<()> {
        self.push(r)?;
        self.waiting.as_mut()[..self.len].rotate_right(1);
        Ok(())
    }

    /// Multi-recv buffers waiting or lent.
    pub(crate) fn multis(&self) -> usize {
        let waiting = self.waiting.as_ref()[..self.len]
            .iter()
            .filter(|r| r.is_multi())
            .count();
        waiting + self.lent.len()
    }

    /// Waiting receive `i` (in posting order).
    pub(crate) fn get(&self, i: usize) -> Option<SrxRecv> {
        (i < self.len).then(|| self.waiting.as_ref()[i])
    }

    /// The oldest waiting receive that `takes`.
    pub(crate) fn find(&self, takes: impl FnMut(&SrxRecv) -> bool) -> Option<usize> {
        self.waiting.as_ref()[..self.len].iter().position(takes)
    }

    /// Takes waiting receive `i` out, keeping the others' order.
    pub(crate) fn remove(&mut self, i: usize) -> Option<SrxRecv> {
        let r = self.get(i)?;
        self.waiting.as_mut()[i..self.len].rotate_left(1);
        self.len -= 1;
        Some(r)
    }

    /// The waiting receive posted with `context`.
    pub(crate) fn position(&self, context: u64) -> Option<usize> {
        self.waiting.as_ref()[..self.len]
            .iter()
            .position(|r| r.context == context)
    }

    /// Forgets every waiting receive and lent buffer (the context closes).
    pub(crate) fn clear(&mut self) {
        self.len = 0;
        self.lent.clear();
    }

    /// Binds endpoint `h` of type `t`: -FI_EINVAL for another type than the bound
    /// ones' or beyond [`MAX_SHARED_BINDINGS`].
    pub(crate) fn bind(&mut self, h: EpHandle<S>, t: EpType) -> Result<()> {
        if self.ep_type.is_some_and(|b| b != t) {
            return Err(Errno::EINVAL);
        }
        self.eps.push(h).map_err(|_| Errno::EINVAL)?;
        self.ep_type = Some(t);
        Ok(())
    }

    /// Unbinds endpoint `h` (it closes); the last one leaves the type and AV free.
    pub(crate) fn unbind(&mut self, h: EpHandle<S>) {
        self.eps.retain(|e| *e != h);
        if self.eps.is_empty() {
            self.ep_type = None;
            self.av = None;
        }
    }
}
