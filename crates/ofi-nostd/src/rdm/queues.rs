//! Two small queues of the engine: receives waiting for their buffered unexpected
//! data to be copied (in matching order), and unsessioned control replies waiting for
//! the link.

use super::*;

/// Slots in `active` of receives matched to buffered unexpected data, in the order
/// they were matched, so their completions come in that order: a ring of `active`'s
/// capacity. When it overflowed (`lost`), the copy pass also scans `active`.
pub(in crate::rdm) struct CopyQueue<S: Storage> {
    q: S::Slice<u32>,
    head: usize,
    len: usize,
    lost: bool,
}

impl<S: Storage> CopyQueue<S> {
    /// A ring of `n` entries from `store`.
    pub(in crate::rdm) fn new(store: &mut S, n: usize) -> Result<Self> {
        Ok(CopyQueue {
            q: store.slice(n, || 0u32).ok_or(Errno::ENOMEM)?,
            head: 0,
            len: 0,
            lost: false,
        })
    }

    /// Appends `idx`; a full ring marks itself lost instead.
    pub(in crate::rdm) fn push(&mut self, idx: u32) {
        let cap = self.q.as_ref().len();
        if self.len == cap {
            self.lost = true;
            return;
        }
        let mut at = self.head + self.len;
        if at >= cap {
            at -= cap;
        }
        self.q.as_mut()[at] = idx;
        self.len += 1;
    }

    /// The oldest entry.
    pub(in crate::rdm) fn pop(&mut self) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        let idx = self.q.as_ref()[self.head];
        self.head += 1;
        if self.head == self.q.as_ref().len() {
            self.head = 0;
        }
        self.len -= 1;
        Some(idx)
    }

    /// Forgets every entry (whatever is queued was finished otherwise).
    pub(in crate::rdm) fn clear(&mut self) {
        self.len = 0;
    }

    /// Whether entries were dropped since the last call (the ring was full).
    pub(in crate::rdm) fn take_lost(&mut self) -> bool {
        core::mem::take(&mut self.lost)
    }
}

/// An unsessioned reply (REJECT, RESET, RETRY) waiting for the link.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CtlReply {
    /// Where it goes.
    pub(crate) to: EpAddr,
    /// The session it names.
    pub(crate) session: u32,
    /// Which reply.
    pub(crate) kind: CtlKind,
    /// The nonce of the HELLO a REJECT or RETRY answers, when it is sealed under the
    /// answer key (spec 4.10: we hold a key and the initiator announced AUTH_MAC).
    pub(crate) answers: Option<u64>,
}

/// Which unsessioned reply.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CtlKind {
    /// REJECT with this reason.
    Reject(u16),
    /// RESET with this reason.
    Reset(u16),
    /// RETRY with this cookie (stateless answer to a HELLO, spec 4.2).
    Retry([u8; wire::packet::COOKIE_LEN]),
}

/// Unsessioned replies waiting for the link; full means dropped (they are
/// rate-limited and the other side retries).
pub(in crate::rdm) struct CtlQueue {
    slots: [Option<CtlReply>; CtlQueue::CAPACITY],
    /// How many slots are taken (every transmit asks).
    n: u8,
}

impl CtlQueue {
    /// Replies an endpoint can have waiting.
    pub(in crate::rdm) const CAPACITY: usize = 16;

    /// An empty queue.
    pub(in crate::rdm) const fn new() -> Self {
        CtlQueue {
            slots: [None; CtlQueue::CAPACITY],
            n: 0,
        }
    }

    /// Whether any reply waits.
    #[inline]
    pub(in crate::rdm) fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Queues `r` in the first free slot; `false` (dropped) when full.
    pub(in crate::rdm) fn push(&mut self, r: CtlReply) -> bool {
        match self.slots.iter_mut().find(|c| c.is_none()) {
            Some(slot) => {
                *slot = Some(r);
                self.n += 1;
                true
            }
            None => false,
        }
    }

    /// The reply in slot `i`, if any.
    #[inline]
    pub(in crate::rdm) fn get(&self, i: usize) -> Option<CtlReply> {
        self.slots.get(i).copied().flatten()
    }

    /// Slot `i`'s reply left.
    pub(in crate::rdm) fn remove(&mut self, i: usize) {
        if let Some(s) = self.slots.get_mut(i)
            && s.take().is_some()
        {
            self.n -= 1;
        }
    }
}

/// The peers sends were posted to since the transmitter last ran, without repeats; past
/// [`PostedPeers::CAPACITY`] only their number counts ("too many: run it all").
pub(in crate::rdm) struct PostedPeers {
    peers: [u16; PostedPeers::CAPACITY],
    n: u8,
}

impl PostedPeers {
    /// Peers [`Rdm::transmit_posted`] serves on their own; more posted-to peers between
    /// two transmitter runs make it a whole run.
    pub(in crate::rdm) const CAPACITY: usize = 4;

    /// No peer.
    pub(in crate::rdm) const fn new() -> Self {
        PostedPeers {
            peers: [0; PostedPeers::CAPACITY],
            n: 0,
        }
    }

    /// Whether no send was posted.
    #[inline]
    pub(in crate::rdm) fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// More peers than it keeps were posted to.
    #[inline]
    pub(in crate::rdm) fn overflowed(&self) -> bool {
        self.n as usize > PostedPeers::CAPACITY
    }

    /// How many peers it keeps (at most [`PostedPeers::CAPACITY`]).
    #[inline]
    pub(in crate::rdm) fn len(&self) -> usize {
        (self.n as usize).min(PostedPeers::CAPACITY)
    }

    /// The `i`th peer posted to.
    #[inline]
    pub(in crate::rdm) fn get(&self, i: usize) -> usize {
        self.peers[i] as usize
    }

    /// Forgets them (the transmitter ran).
    #[inline]
    pub(in crate::rdm) fn clear(&mut self) {
        self.n = 0;
    }

    /// Peer `p` has a new send.
    #[inline]
    pub(in crate::rdm) fn mark(&mut self, p: usize) {
        let n = self.n as usize;
        if self.peers.get(..n).is_some_and(|v| v.contains(&(p as u16))) {
            return;
        }
        if let Some(slot) = self.peers.get_mut(n) {
            *slot = p as u16;
        }
        self.n = self.n.saturating_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::test_storage::VecStorage;

    #[test]
    fn copy_queue_keeps_order_across_the_wrap() {
        let mut q = CopyQueue::new(&mut VecStorage, 3).unwrap();
        assert_eq!(q.pop(), None);
        q.push(1);
        q.push(2);
        assert_eq!(q.pop(), Some(1));
        q.push(3);
        q.push(4);
        assert!(!q.take_lost());
        // Full: the next one is lost, and the loss is reported once.
        q.push(5);
        assert!(q.take_lost());
        assert!(!q.take_lost());
        assert_eq!(
            (q.pop(), q.pop(), q.pop(), q.pop()),
            (Some(2), Some(3), Some(4), None)
        );
        q.push(6);
        q.clear();
        assert_eq!(q.pop(), None);
    }

    #[test]
    fn ctl_queue_drops_when_full() {
        let r = |s| CtlReply {
            to: EpAddr::new([1, 2, 3, 4], 5, 6),
            session: s,
            kind: CtlKind::Reset(1),
            answers: None,
        };
        let mut q = CtlQueue::new();
        assert!(q.is_empty());
        for s in 0..CtlQueue::CAPACITY as u32 {
            assert!(q.push(r(s)));
        }
        assert!(!q.push(r(99)), "full");
        assert_eq!(q.get(3).map(|c| c.session), Some(3));
        q.remove(3);
        q.remove(3);
        assert!(q.get(3).is_none());
        assert!(q.push(r(42)), "the freed slot");
        assert_eq!(q.get(3).map(|c| c.session), Some(42));
        for i in 0..CtlQueue::CAPACITY {
            q.remove(i);
        }
        assert!(q.is_empty());
        assert!(q.get(CtlQueue::CAPACITY).is_none());
    }

    #[test]
    fn posted_peers_counts_past_capacity() {
        let mut s = PostedPeers::new();
        assert!(s.is_empty());
        s.mark(3);
        s.mark(3);
        s.mark(1);
        assert_eq!(s.len(), 2);
        assert_eq!((s.get(0), s.get(1)), (3, 1));
        for p in 10..13 {
            s.mark(p);
        }
        assert!(s.overflowed());
        assert_eq!(s.len(), PostedPeers::CAPACITY);
        s.clear();
        assert!(s.is_empty() && !s.overflowed());
    }
}
