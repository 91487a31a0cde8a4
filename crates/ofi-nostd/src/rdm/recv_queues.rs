//! The receive side's matching state: the posted and unexpected queues of untagged
//! and tagged receives, the messages FI_CLAIM reserved, and the multi-recv buffers.

use super::*;

/// Posted receives, matched by source and tag.
pub(in crate::rdm) type Posted<S> = PostedQueue<
    PostedRecv,
    <S as Storage>::Slice<Slot<Node<PostedRecv>>>,
    <S as Storage>::Slice<Bucket>,
>;
/// Unexpected messages, searched by new receives.
pub(in crate::rdm) type Unexpected<S> =
    UnexpectedQueue<UxMsg, <S as Storage>::Slice<Slot<Node<UxMsg>>>, <S as Storage>::Slice<Bucket>>;

/// What matches messages to receives, as quinn-proto's `StreamsState` keeps a
/// connection's streams: a message arriving looks in the posted queue of its kind, a
/// receive posted looks in the unexpected queue of its kind. The queues are fields so
/// the receive path borrows one of them next to the multi-recv table; what spans
/// several of them is a method.
pub(in crate::rdm) struct RecvQueues<S: Storage> {
    /// Untagged receives posted (multi-recv buffers included: they are untagged).
    pub(in crate::rdm) posted_msg: Posted<S>,
    /// Tagged receives posted.
    pub(in crate::rdm) posted_tag: Posted<S>,
    /// Untagged messages that arrived before their receive.
    pub(in crate::rdm) ux_msg: Unexpected<S>,
    /// Tagged messages that arrived before their receive.
    pub(in crate::rdm) ux_tag: Unexpected<S>,
    /// Tagged messages FI_PEEK | FI_CLAIM took out of `ux_tag` for a later FI_CLAIM.
    pub(in crate::rdm) claimed: PoolOf<S, UxMsg>,
    /// Multi-recv buffers: posted in `posted_msg`, and kept until every message carved
    /// from them has arrived.
    pub(in crate::rdm) multis: PoolOf<S, MultiBuf>,
    /// The AV's insert count (`Av::inserted`) when messages queued with no source were
    /// last looked up again: until it moves, the AV cannot name them.
    av_seen: u32,
}

impl<S: Storage> RecvQueues<S> {
    /// Queues for `rx_size` posted receives (and as many multi-recv buffers),
    /// `unexp_msgs` unexpected messages of each kind and `claimed_msgs` claimed ones.
    pub(in crate::rdm) fn new(
        store: &mut S,
        rx_size: usize,
        unexp_msgs: usize,
        claimed_msgs: usize,
    ) -> Result<Self> {
        fn nodes<S: Storage, T>(store: &mut S, n: usize) -> Result<S::Slice<Slot<T>>> {
            store.slice(n, || Slot::VACANT).ok_or(Errno::ENOMEM)
        }
        let buckets = |store: &mut S, n: usize| {
            store
                .slice(n.next_power_of_two() * 2, || Bucket::EMPTY)
                .ok_or(Errno::ENOMEM)
        };
        Ok(RecvQueues {
            posted_msg: PostedQueue::new(nodes(store, rx_size)?, buckets(store, rx_size)?),
            posted_tag: PostedQueue::new(nodes(store, rx_size)?, buckets(store, rx_size)?),
            ux_msg: UnexpectedQueue::new(nodes(store, unexp_msgs)?, buckets(store, unexp_msgs)?),
            ux_tag: UnexpectedQueue::new(nodes(store, unexp_msgs)?, buckets(store, unexp_msgs)?),
            claimed: Pool::new(nodes(store, claimed_msgs)?),
            multis: Pool::new(nodes(store, rx_size)?),
            av_seen: 0,
        })
    }

    /// Receives posted, both queues.
    pub(in crate::rdm) fn posted_len(&self) -> usize {
        self.posted_msg.len() + self.posted_tag.len()
    }

    /// Capacity of one posted queue.
    pub(in crate::rdm) fn posted_capacity(&self) -> usize {
        self.posted_msg.capacity()
    }

    /// Unexpected messages held, both queues and the claimed ones.
    pub(in crate::rdm) fn unexpected_len(&self) -> usize {
        self.ux_msg.len() + self.ux_tag.len() + self.claimed.len()
    }

    /// Queues a receive that found no unexpected message; gives it back when full.
    #[inline]
    pub(in crate::rdm) fn post(
        &mut self,
        tagged: bool,
        src: FiAddr,
        tag: u64,
        ignore: u64,
        recv: PostedRecv,
    ) -> core::result::Result<EntryHandle<PostedRecv>, PostedRecv> {
        let q = if tagged {
            &mut self.posted_tag
        } else {
            &mut self.posted_msg
        };
        q.post(src, tag, ignore, recv)
    }

    /// Takes the posted receive (either queue) with `context` out, saying whether it
    /// was tagged (fi_cancel).
    pub(in crate::rdm) fn cancel(&mut self, context: u64) -> Option<(bool, PostedRecv)> {
        for tagged in [false, true] {
            let q = if tagged {
                &mut self.posted_tag
            } else {
                &mut self.posted_msg
            };
            let Some(h) = q.find_by(|r| r.context == context) else {
                continue;
            };
            let Some(node) = q.remove(h) else {
                continue;
            };
            return Some((tagged, *node.value()));
        }
        None
    }

    /// The earliest-arrived unexpected message of the kind a receive is (`tagged`) that
    /// it matches.
    #[inline]
    pub(in crate::rdm) fn find_unexpected(
        &self,
        tagged: bool,
        src: FiAddr,
        tag: u64,
        ignore: u64,
    ) -> Option<UxRef> {
        if tagged {
            self.ux_tag.find(src, tag, ignore).map(UxRef::Tagged)
        } else {
            self.ux_msg.find(src, tag, ignore).map(UxRef::Untagged)
        }
    }

    /// Whether messages are queued with no source.
    #[inline]
    pub(in crate::rdm) fn has_sourceless(&self) -> bool {
        (self.ux_msg.sourceless() | self.ux_tag.sourceless()) != 0
    }

    /// Names the messages queued with no source that `name` now finds a source for,
    /// keeping their arrival order (`UnexpectedQueue::rekey`), with the AV at insert
    /// count `av_inserted`. Returns how many got one.
    #[cold]
    pub(in crate::rdm) fn rekey(
        &mut self,
        av_inserted: u32,
        mut name: impl FnMut(&mut UxMsg) -> Option<FiAddr>,
    ) -> usize {
        if av_inserted == self.av_seen {
            // The AV has not changed since they were last looked up.
            return 0;
        }
        self.av_seen = av_inserted;
        self.ux_msg.rekey(&mut name) + self.ux_tag.rekey(&mut name)
    }

    /// The unexpected message `r`, wherever it lives.
    pub(in crate::rdm) fn ux(&self, r: UxRef) -> Option<UxMsg> {
        match r {
            UxRef::Untagged(h) => self.ux_msg.get(h).map(|n| *n.value()),
            UxRef::Tagged(h) => self.ux_tag.get(h).map(|n| *n.value()),
            UxRef::Claimed(h) => self.claimed.get(h).copied(),
        }
    }

    /// The unexpected message `r`, mutably.
    pub(in crate::rdm) fn ux_mut(&mut self, r: UxRef) -> Option<&mut UxMsg> {
        match r {
            UxRef::Untagged(h) => self.ux_msg.get_mut(h).map(|n| n.value_mut()),
            UxRef::Tagged(h) => self.ux_tag.get_mut(h).map(|n| n.value_mut()),
            UxRef::Claimed(h) => self.claimed.get_mut(h),
        }
    }

    /// Takes the unexpected message `r` out (a receive took it, or it is dropped).
    pub(in crate::rdm) fn remove_ux(&mut self, r: UxRef) -> Option<UxMsg> {
        match r {
            UxRef::Untagged(h) => self.ux_msg.remove(h).map(|n| *n.value()),
            UxRef::Tagged(h) => self.ux_tag.remove(h).map(|n| *n.value()),
            UxRef::Claimed(h) => self.claimed.remove(h),
        }
    }

    /// FI_PEEK | FI_CLAIM: moves tagged unexpected message `h` to the claimed ones,
    /// reserved for `context`. -FI_EAGAIN without room (the message stays).
    pub(in crate::rdm) fn claim(
        &mut self,
        h: EntryHandle<UxMsg>,
        context: u64,
    ) -> Result<crate::pool::Handle<UxMsg>> {
        if self.claimed.is_full() {
            return Err(Errno::EAGAIN);
        }
        let Some(node) = self.ux_tag.remove(h) else {
            return Err(Errno::EINVAL);
        };
        let mut cm = *node.value();
        cm.claimed_by = context;
        self.claimed.insert(cm).map_err(|_| Errno::EAGAIN)
    }

    /// The message claimed for `context` (FI_CLAIM without FI_PEEK).
    pub(in crate::rdm) fn claimed_by(&self, context: u64) -> Option<crate::pool::Handle<UxMsg>> {
        self.claimed
            .iter()
            .find(|(_, m)| m.claimed_by == context)
            .map(|(h, _)| h)
    }

    /// The first unexpected message of peer `p`'s session `epoch` that still needs the
    /// session (a rendezvous RTS, or an eager message not complete yet): untagged, then
    /// tagged, then claimed ones.
    pub(in crate::rdm) fn needing_session(&self, p: usize, epoch: u32) -> Option<UxRef> {
        let needs = |m: &UxMsg| m.peer as usize == p && m.epoch == epoch && !m.complete();
        if let Some(h) = self.ux_msg.find_by(needs) {
            return Some(UxRef::Untagged(h));
        }
        if let Some(h) = self.ux_tag.find_by(needs) {
            return Some(UxRef::Tagged(h));
        }
        self.claimed
            .iter()
            .find(|(_, m)| needs(m))
            .map(|(h, _)| UxRef::Claimed(h))
    }

    /// Posted receives and multi-recv buffers holding a CQ reservation (a multi-recv
    /// buffer's is its own, not its posted entry's).
    pub(in crate::rdm) fn reserved(&self) -> usize {
        let posted = |r: &PostedRecv| r.reserved && r.multi.is_none();
        self.posted_msg.iter_values().filter(|r| posted(r)).count()
            + self.posted_tag.iter_values().filter(|r| posted(r)).count()
            + self.multis.iter().filter(|(_, m)| m.reserved).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::test_storage::VecStorage;

    fn recv(context: u64) -> PostedRecv {
        PostedRecv {
            iov: crate::iov::IovList::default(),
            context,
            reserved: true,
            completion: true,
            multi: None,
        }
    }

    fn msg(peer: u16, epoch: u32, tagged: bool, complete: bool) -> UxMsg {
        UxMsg {
            peer,
            epoch,
            report_src: FI_ADDR_NOTAVAIL,
            tag: 9,
            tagged,
            data: None,
            total: 4,
            kind: UxKind::Eager {
                first: NIL,
                got: if complete { 4 } else { 1 },
            },
            claimed_by: 0,
        }
    }

    /// Queues `m` as the receive path does (by field).
    fn insert(q: &mut RecvQueues<VecStorage>, src: FiAddr, m: UxMsg) -> Option<UxRef> {
        if m.tagged {
            q.ux_tag.insert(src, m.tag, m).ok().map(UxRef::Tagged)
        } else {
            q.ux_msg.insert(src, m.tag, m).ok().map(UxRef::Untagged)
        }
    }

    fn queues() -> RecvQueues<VecStorage> {
        RecvQueues::new(&mut VecStorage, 2, 2, 1).unwrap()
    }

    #[test]
    fn posted_by_kind_and_cancelled_by_context() {
        let mut q = queues();
        let src = 3;
        q.post(false, src, 0, 0, recv(1)).unwrap();
        q.post(true, src, 9, 0, recv(2)).unwrap();
        assert_eq!((q.posted_len(), q.posted_capacity()), (2, 2));
        assert!(q.posted_tag.find(src, 8).is_none(), "other tag");
        let t = q.posted_tag.find(src, 9).unwrap();
        assert_eq!(q.posted_tag.get(t).map(|n| n.value().context), Some(2));
        let u = q.posted_msg.find(src, 0).unwrap();
        assert_eq!(q.posted_msg.get(u).map(|n| n.value().context), Some(1));
        assert_eq!(q.reserved(), 2);
        assert_eq!(q.cancel(2).map(|(t, r)| (t, r.context)), Some((true, 2)));
        assert!(q.cancel(2).is_none(), "once");
        assert_eq!(q.posted_len(), 1);
    }

    #[test]
    fn unexpected_by_kind_and_by_reference() {
        let mut q = queues();
        let src = 4;
        let r = insert(&mut q, src, msg(0, 1, true, true)).unwrap();
        assert!(matches!(r, UxRef::Tagged(_)));
        assert!(q.find_unexpected(false, src, 9, 0).is_none(), "other kind");
        assert_eq!(
            q.find_unexpected(true, src, 0, !0),
            Some(r),
            "ignored tag bits"
        );
        q.ux_mut(r).unwrap().total = 5;
        assert_eq!(q.ux(r).map(|m| m.total), Some(5));
        insert(&mut q, src, msg(0, 1, true, true)).unwrap();
        assert!(q.ux_tag.is_full() && !q.ux_msg.is_full());
        assert!(insert(&mut q, src, msg(0, 1, true, true)).is_none());
        assert_eq!(q.unexpected_len(), 2);
        assert_eq!(q.remove_ux(r).map(|m| m.total), Some(5));
        assert!(q.ux(r).is_none() && q.remove_ux(r).is_none());
    }

    /// Sourceless messages of both kinds are named once the AV moved, and only then.
    #[test]
    fn rekey_names_both_kinds_once_per_av_change() {
        let mut q = queues();
        let t = insert(&mut q, FI_ADDR_NOTAVAIL, msg(1, 1, true, true)).unwrap();
        let u = insert(&mut q, FI_ADDR_NOTAVAIL, msg(1, 1, false, true)).unwrap();
        assert!(q.has_sourceless());
        let name = |m: &mut UxMsg| {
            m.report_src = 6;
            Some(6)
        };
        assert_eq!(q.rekey(0, name), 0, "the AV did not change");
        assert_eq!(q.find_unexpected(true, 6, 9, 0), None);
        assert_eq!(q.rekey(1, |_| None), 0, "the AV does not know them");
        assert_eq!(q.rekey(1, name), 0, "looked up at this AV state already");
        assert_eq!(q.rekey(2, name), 2);
        assert!(!q.has_sourceless());
        assert_eq!(q.find_unexpected(true, 6, 9, 0), Some(t));
        assert_eq!(q.find_unexpected(false, 6, 9, 0), Some(u));
        assert_eq!(q.ux(t).map(|m| m.report_src), Some(6));
    }

    #[test]
    fn claim_moves_a_tagged_message_once() {
        let mut q = queues();
        let UxRef::Tagged(a) = insert(&mut q, 1, msg(0, 1, true, true)).unwrap() else {
            panic!("tagged")
        };
        let UxRef::Tagged(b) = insert(&mut q, 1, msg(0, 1, true, true)).unwrap() else {
            panic!("tagged")
        };
        let c = q.claim(a, 77).unwrap();
        assert_eq!(q.claimed_by(77), Some(c));
        assert_eq!(q.claimed_by(78), None);
        assert_eq!(q.ux(UxRef::Claimed(c)).map(|m| m.claimed_by), Some(77));
        assert_eq!(q.claim(b, 78), Err(Errno::EAGAIN), "no room: it stays");
        assert!(q.ux(UxRef::Tagged(b)).is_some());
        assert_eq!(q.unexpected_len(), 2);
        q.remove_ux(UxRef::Claimed(c));
        assert_eq!(q.claim(a, 79), Err(Errno::EINVAL), "already taken");
    }

    #[test]
    fn messages_needing_a_session_untagged_then_tagged_then_claimed() {
        let mut q = queues();
        insert(&mut q, 1, msg(2, 5, false, true)).unwrap();
        assert_eq!(q.needing_session(2, 5), None, "complete: needs nothing");
        let t = insert(&mut q, 1, msg(2, 5, true, false)).unwrap();
        let u = insert(&mut q, 1, msg(2, 5, false, false)).unwrap();
        assert_eq!(q.needing_session(2, 4), None, "another session");
        assert_eq!(q.needing_session(2, 5), Some(u));
        q.remove_ux(u);
        assert_eq!(q.needing_session(2, 5), Some(t));
        let UxRef::Tagged(th) = t else { panic!() };
        let c = q.claim(th, 1).unwrap();
        assert_eq!(q.needing_session(2, 5), Some(UxRef::Claimed(c)));
    }
}
