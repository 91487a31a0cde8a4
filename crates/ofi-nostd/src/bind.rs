//! What fi_ep_bind attaches to an endpoint: the bind target, and the CQ and counter
//! bindings the endpoint keeps (one CQ per direction, one counter per operation type).
//!
//! A leaf module: the endpoint holds these bindings, the domain checks them and the RDM
//! engine completes through them.

use crate::fid::{AvHandle, CntrHandle, CqHandle};
use crate::flags::Flags;
use crate::storage::Storage;

/// An object of fi_ep_bind.
#[derive(Debug)]
pub enum BindTarget<S: Storage> {
    /// A completion queue (flags FI_TRANSMIT / FI_RECV / FI_SELECTIVE_COMPLETION).
    Cq(CqHandle<S>),
    /// A counter (flags FI_SEND, FI_RECV, FI_READ, FI_WRITE, FI_REMOTE_*).
    Cntr(CntrHandle),
    /// The address vector (flags 0).
    Av(AvHandle<S>),
    /// An event queue, named by the adapter's token (flags 0).
    Eq(u64),
}

/// A CQ binding: which CQ, and whether successful completions are selective.
#[derive(Debug)]
pub struct CqBinding<H> {
    /// The CQ.
    pub cq: H,
    /// FI_SELECTIVE_COMPLETION: successes only with FI_COMPLETION.
    pub selective: bool,
}

/// Counter bindings, one per operation type (fi_ep_bind flags).
#[derive(Debug)]
pub struct CntrBindings<H> {
    /// FI_SEND: completed sends.
    pub send: Option<H>,
    /// FI_RECV: received messages.
    pub recv: Option<H>,
    /// FI_READ: completed RMA reads / fetching atomics.
    pub read: Option<H>,
    /// FI_WRITE: completed RMA writes / atomics.
    pub write: Option<H>,
    /// FI_REMOTE_READ: remote reads of this endpoint's memory.
    pub remote_read: Option<H>,
    /// FI_REMOTE_WRITE: remote writes to this endpoint's memory.
    pub remote_write: Option<H>,
}

impl<H> Default for CntrBindings<H> {
    fn default() -> Self {
        CntrBindings {
            send: None,
            recv: None,
            read: None,
            write: None,
            remote_read: None,
            remote_write: None,
        }
    }
}

impl<H: Copy> CntrBindings<H> {
    /// The bind flag of each slot, in a fixed order.
    pub(crate) const FLAGS: [Flags; 6] = [
        Flags::SEND,
        Flags::RECV,
        Flags::READ,
        Flags::WRITE,
        Flags::REMOTE_READ,
        Flags::REMOTE_WRITE,
    ];

    pub(crate) fn slot_mut(&mut self, flag: Flags) -> &mut Option<H> {
        match flag {
            f if f == Flags::SEND => &mut self.send,
            f if f == Flags::RECV => &mut self.recv,
            f if f == Flags::READ => &mut self.read,
            f if f == Flags::WRITE => &mut self.write,
            f if f == Flags::REMOTE_READ => &mut self.remote_read,
            _ => &mut self.remote_write,
        }
    }

    /// Every bound counter, with repeats when one counter serves several types.
    pub(crate) fn all(&self) -> impl Iterator<Item = H> + '_ {
        [
            self.send,
            self.recv,
            self.read,
            self.write,
            self.remote_read,
            self.remote_write,
        ]
        .into_iter()
        .flatten()
    }
}
