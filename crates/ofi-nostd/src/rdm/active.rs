//! The receives being filled: matched receives still receiving data (multi-segment
//! eager messages and rendezvous), and which of them wait for buffered unexpected data
//! to be copied.

use super::*;

/// Matched receives still receiving data, by slot; a packed id ([`op_id`]) names one on
/// the wire (a rendezvous' CTS and DATA). Those matched to buffered unexpected data
/// wait in `copies` for a progress call (which has the application's memory) to copy
/// it, in the order they were matched.
pub(in crate::rdm) struct ActiveRecvs<S: Storage> {
    recs: PoolOf<S, RxActive>,
    /// Receives matched to buffered data not yet copied (a count: `copies` may have
    /// lost entries or keep finished ones).
    pending: u32,
    /// Their slots in `recs`, in the order they were matched.
    copies: CopyQueue<S>,
}

impl<S: Storage> ActiveRecvs<S> {
    /// Room for `n` receives being filled, from `store`.
    pub(in crate::rdm) fn new(store: &mut S, n: usize) -> Result<Self> {
        Ok(ActiveRecvs {
            recs: Pool::new(store.slice(n, || Slot::VACANT).ok_or(Errno::ENOMEM)?),
            pending: 0,
            copies: CopyQueue::new(store, n)?,
        })
    }

    /// Whether no other receive can start filling (then a message is refused first).
    #[inline]
    pub(in crate::rdm) fn is_full(&self) -> bool {
        self.recs.is_full()
    }

    /// Adds a receive being filled; gives it back when full (as the pool does: the
    /// caller still reports it).
    #[inline]
    #[allow(clippy::result_large_err)]
    pub(in crate::rdm) fn insert(
        &mut self,
        a: RxActive,
    ) -> core::result::Result<crate::pool::Handle<RxActive>, RxActive> {
        self.recs.insert(a)
    }

    /// The receive `h`, if still live.
    #[inline]
    pub(in crate::rdm) fn get(&self, h: crate::pool::Handle<RxActive>) -> Option<&RxActive> {
        self.recs.get(h)
    }

    /// The receive `h`, mutably.
    #[inline]
    pub(in crate::rdm) fn get_mut(
        &mut self,
        h: crate::pool::Handle<RxActive>,
    ) -> Option<&mut RxActive> {
        self.recs.get_mut(h)
    }

    /// Takes receive `h` out (it finished or failed).
    #[inline]
    pub(in crate::rdm) fn remove(&mut self, h: crate::pool::Handle<RxActive>) -> Option<RxActive> {
        self.recs.remove(h)
    }

    /// The live receive a packed id names (its slot and the low 16 bits of its
    /// generation).
    #[inline]
    pub(in crate::rdm) fn by_id(&self, id: u32) -> Option<crate::pool::Handle<RxActive>> {
        let idx = (id & 0xFFFF) as usize;
        let (h, _) = self.recs.get_by_index(idx)?;
        (gen16(h) == id >> 16).then_some(h)
    }

    /// The first receive of peer `p`'s session `epoch` (one failing takes them all).
    pub(in crate::rdm) fn of_session(
        &self,
        p: usize,
        epoch: u32,
    ) -> Option<crate::pool::Handle<RxActive>> {
        self.recs
            .iter()
            .find(|(_, a)| a.peer as usize == p && a.epoch == epoch)
            .map(|(h, _)| h)
    }

    /// The first receive of peer `p`'s session `epoch` that owes its sender a CTS (a
    /// grant, or where a truncated transfer ends).
    pub(in crate::rdm) fn cts_owed(
        &self,
        p: usize,
        epoch: u32,
    ) -> Option<(crate::pool::Handle<RxActive>, &RxActive)> {
        self.recs.iter().find(|(_, a)| {
            a.peer as usize == p && a.epoch == epoch && (a.cts_pending || a.end_pending)
        })
    }

    /// Receives whose completion needs a reserved CQ slot (a discarded rendezvous
    /// reports nothing).
    pub(in crate::rdm) fn reserved(&self) -> usize {
        self.recs
            .iter()
            .filter(|(_, a)| a.reserved && !a.discard)
            .count()
    }

    /// Receive `h` was matched to buffered data: the next progress copies it.
    #[inline]
    pub(in crate::rdm) fn queue_copy(&mut self, h: crate::pool::Handle<RxActive>) {
        self.pending += 1;
        self.copies.push(h.index() as u32);
    }

    /// A receive's buffered data was copied or freed: one copy fewer pending.
    #[inline]
    pub(in crate::rdm) fn copy_settled(&mut self) {
        self.pending = self.pending.saturating_sub(1);
    }

    /// Whether buffered data waits to be copied.
    #[inline]
    pub(in crate::rdm) fn copies_pending(&self) -> bool {
        self.pending > 0
    }

    /// The next receive, in matching order, whose buffered data still waits. A slot
    /// freed (and even taken again) since it was queued is copied all the same if its
    /// receive has data waiting.
    pub(in crate::rdm) fn next_copy(&mut self) -> Option<crate::pool::Handle<RxActive>> {
        while let Some(idx) = self.copies.pop() {
            if let Some((h, a)) = self.recs.get_by_index(idx as usize)
                && a.chain != NIL
            {
                return Some(h);
            }
        }
        None
    }

    /// Whether the copy ring overflowed since the last call: then receives with data
    /// waiting are also found by scanning ([`ActiveRecvs::chained`]).
    pub(in crate::rdm) fn copies_lost(&mut self) -> bool {
        self.copies.take_lost()
    }

    /// The first receive with buffered data waiting, in slot order.
    pub(in crate::rdm) fn chained(&self) -> Option<crate::pool::Handle<RxActive>> {
        self.recs
            .iter()
            .find(|(_, a)| a.chain != NIL)
            .map(|(h, _)| h)
    }

    /// Every pending copy was made (or the queue holds only finished ones): forgets
    /// them.
    pub(in crate::rdm) fn copies_done(&mut self) {
        self.copies.clear();
        self.pending = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::test_storage::VecStorage;

    fn rec(peer: u16, epoch: u32) -> RxActive {
        RxActive {
            peer,
            epoch,
            rndv: false,
            rts_op: 0,
            iov: crate::iov::IovList::default(),
            context: 0,
            total: 10,
            want: 10,
            got: 0,
            granted: 0,
            cts_pending: false,
            cts_off: 0,
            end_pending: false,
            chain: NIL,
            chain_len: 0,
            discard: false,
            tag: 0,
            tagged: false,
            data: None,
            report_src: FI_ADDR_NOTAVAIL,
            multi: None,
            reserved: false,
            completion: true,
            error: None,
        }
    }

    #[test]
    fn packed_id_names_the_live_generation_only() {
        let mut a = ActiveRecvs::new(&mut VecStorage, 2).unwrap();
        let h = a.insert(rec(0, 1)).unwrap();
        let id = op_id(h.index(), gen16(h));
        assert_eq!(a.by_id(id), Some(h));
        a.remove(h);
        assert_eq!(a.by_id(id), None, "gone");
        let h2 = a.insert(rec(0, 1)).unwrap();
        assert_eq!(h2.index(), h.index());
        assert_eq!(a.by_id(id), None, "slot reused by another generation");
        assert!(a.insert(rec(0, 1)).is_ok());
        assert!(a.is_full());
        assert!(a.insert(rec(0, 1)).is_err(), "full gives the record back");
    }

    #[test]
    fn session_and_cts_lookups() {
        let mut a = ActiveRecvs::new(&mut VecStorage, 4).unwrap();
        let _other = a.insert(rec(1, 1)).unwrap();
        let h = a.insert(rec(2, 7)).unwrap();
        let mut r = rec(2, 7);
        r.end_pending = true;
        r.reserved = true;
        let c = a.insert(r).unwrap();
        assert_eq!(a.of_session(2, 7), Some(h));
        assert_eq!(a.of_session(2, 6), None, "another session");
        assert_eq!(a.cts_owed(2, 7).map(|(h, _)| h), Some(c));
        assert_eq!(a.cts_owed(1, 1).map(|(h, _)| h), None);
        assert_eq!(a.reserved(), 1);
        a.get_mut(c).unwrap().discard = true;
        assert_eq!(a.reserved(), 0, "a discarded rendezvous reports nothing");
    }

    #[test]
    fn copies_in_matching_order_skipping_finished() {
        let mut a = ActiveRecvs::new(&mut VecStorage, 3).unwrap();
        let mut r = rec(0, 1);
        r.chain = 5;
        let x = a.insert(r).unwrap();
        let y = a.insert(r).unwrap();
        let z = a.insert(r).unwrap();
        assert!(!a.copies_pending());
        a.queue_copy(z);
        a.queue_copy(x);
        a.queue_copy(y);
        assert!(a.copies_pending());
        a.get_mut(x).unwrap().chain = NIL; // copied otherwise
        a.copy_settled();
        assert_eq!(a.next_copy(), Some(z));
        assert_eq!(a.next_copy(), Some(y), "x has nothing waiting");
        assert_eq!(a.next_copy(), None);
        assert!(!a.copies_lost());
        assert_eq!(a.chained(), Some(y), "still chained until copied");
        a.copies_done();
        assert!(!a.copies_pending());
    }

    #[test]
    fn an_overflowed_ring_is_reported_once() {
        let mut a = ActiveRecvs::new(&mut VecStorage, 1).unwrap();
        let h = a.insert(rec(0, 1)).unwrap();
        a.queue_copy(h);
        a.queue_copy(h);
        assert!(a.copies_lost());
        assert!(!a.copies_lost());
        a.copy_settled();
        a.copy_settled();
        a.copy_settled();
        assert!(!a.copies_pending(), "never below zero");
    }
}
