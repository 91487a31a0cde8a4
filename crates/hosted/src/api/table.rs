//! The side table of posted buffers, and the [`Memory`] the core copies through.
//!
//! # Why the core cannot touch memory it does not own
//!
//! The safe API never gives the core a raw pointer to copy through. Every buffer of a
//! posted operation is *moved* into this table (the application cannot reach it any
//! more) and stays there until the operation's completion is read, the endpoint is
//! closed, or the domain is dropped. The core reads and writes application memory only
//! through [`Memory`], whose every copy names the operation it is for
//! ([`Memory::read_op`] / [`Memory::write_op`], with the context the operation was
//! posted with, which is its [`OpId`]): an access is served only when that id is a live
//! operation of the table and `addr..addr + len` lies entirely inside its posted range,
//! and then by an ordinary safe slice copy into that `Box<[u8]>`; a lookup by slot, in
//! constant time however many buffers are posted. Anything else, including an access
//! that names no operation (plain `read`/`write`), is -FI_EFAULT. There is no `unsafe`
//! here, so a core bug can at worst write the wrong bytes into a buffer that is posted;
//! it can never reach freed memory or memory the application holds.
//!
//! Registered memory regions (RMA targets) are the one exception to "names an
//! operation": a region's buffer is moved into the table for as long as it is
//! registered, and a plain `read`/`write` (a peer's RMA access, which the core checked
//! against the registration first) is served when its whole range lies inside one
//! region. The application reaches a region's bytes only through the domain lock
//! ([`Mr::read`](super::Mr::read), [`Mr::write`](super::Mr::write)).
//!
//! Everything lives in vectors whose capacity is reserved when endpoints open, so
//! posting and completing in steady state allocates nothing.

use ofi_nostd::Errno;
use ofi_nostd::mem::Memory;

use super::buf::Buf;

/// An operation's id: what the core carries as the operation context, and what
/// `Endpoint::cancel` takes. Never 0 (the core substitutes the endpoint's context for a
/// context of 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(u64);

impl OpId {
    /// The value the core sees as `op_context`.
    pub fn raw(self) -> u64 {
        self.0
    }

    fn new(slot: u32, generation: u32) -> OpId {
        OpId((u64::from(generation) << 32) | (u64::from(slot) + 1))
    }

    fn slot(self) -> Option<usize> {
        usize::try_from((self.0 & 0xffff_ffff).checked_sub(1)?).ok()
    }

    fn generation(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// The id the core reported back, if it can be one of ours.
    pub(crate) fn from_raw(raw: u64) -> OpId {
        OpId(raw)
    }
}

/// One posted operation: the application's buffer and context.
pub(crate) struct Op<C> {
    /// The buffer, owned by the table until the completion hands it back.
    pub buf: Buf,
    /// The application's context.
    pub context: C,
    /// The endpoint that posted it (index of the core's endpoint handle).
    pub ep: usize,
    /// Bytes of `buf` the core was given (from its start).
    pub posted: usize,
    /// A multi-receive buffer (FI_MULTI_RECV): how its messages' completions get a
    /// context of their own while the buffer stays posted.
    pub multi: Option<fn(&C) -> C>,
    /// A tagged peek with FI_CLAIM: when it finds a message, its slot stays reserved
    /// for the receive that claims it (the core knows the claim by this id).
    pub claim: bool,
}

struct Slot<C> {
    generation: u32,
    op: Option<Op<C>>,
    /// Kept for a claimed message of this endpoint (index): a successful FI_PEEK |
    /// FI_CLAIM completed here and its claiming receive is not posted yet, or is.
    reserved: Option<usize>,
}

/// The table. See the [module docs](self).
pub(crate) struct OpTable<C> {
    slots: Vec<Slot<C>>,
    free: Vec<u32>,
    /// Registered regions' buffers, by the region's handle bits.
    regions: Vec<(u64, Buf)>,
}

impl<C> OpTable<C> {
    pub(crate) fn new() -> Self {
        OpTable {
            slots: Vec::new(),
            free: Vec::new(),
            regions: Vec::new(),
        }
    }

    /// Takes the buffer of registered region `id` in: peers' RMA accesses reach it.
    pub(crate) fn add_region(&mut self, id: u64, buf: Buf) {
        self.regions.push((id, buf));
    }

    /// Gives the buffer of region `id` back (it is deregistered).
    pub(crate) fn take_region(&mut self, id: u64) -> Option<Buf> {
        let i = self.regions.iter().position(|(r, _)| *r == id)?;
        Some(self.regions.swap_remove(i).1)
    }

    /// The buffer of region `id`.
    pub(crate) fn region_mut(&mut self, id: u64) -> Option<&mut Buf> {
        self.regions
            .iter_mut()
            .find(|(r, _)| *r == id)
            .map(|(_, b)| b)
    }

    /// The region holding all of `addr..addr + len`: (index, offset).
    fn locate_region(&self, addr: u64, len: usize) -> ofi_nostd::Result<(usize, usize)> {
        let end = addr.checked_add(len as u64).ok_or(Errno::EFAULT)?;
        self.regions
            .iter()
            .position(|(_, b)| addr >= b.addr() && end <= b.addr() + b.capacity() as u64)
            .map(|i| (i, (addr - self.regions[i].1.addr()) as usize))
            .ok_or(Errno::EFAULT)
    }

    /// Makes room for `n` more operations without reallocating on the data path.
    pub(crate) fn reserve(&mut self, n: usize) {
        let want = self.slots.len() + n;
        self.slots.reserve(n);
        self.free.reserve(want.saturating_sub(self.free.len()));
    }

    /// Operations held.
    pub(crate) fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }

    /// Takes `op` in and returns its id.
    pub(crate) fn insert(&mut self, op: Op<C>) -> OpId {
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    op: None,
                    reserved: None,
                });
                (self.slots.len() - 1) as u32
            }
        };
        let s = &mut self.slots[slot as usize];
        s.op = Some(op);
        OpId::new(slot, s.generation)
    }

    /// The operation `id`, if it is still here.
    pub(crate) fn get(&self, id: OpId) -> Option<&Op<C>> {
        let s = self.slots.get(id.slot()?)?;
        if s.generation != id.generation() {
            return None;
        }
        s.op.as_ref()
    }

    /// Takes the operation `id` out: from here on the core can no longer reach its
    /// buffer.
    pub(crate) fn remove(&mut self, id: OpId) -> Option<Op<C>> {
        let slot = id.slot()?;
        let s = self.slots.get_mut(slot)?;
        if s.generation != id.generation() {
            return None;
        }
        let op = s.op.take()?;
        s.generation = s.generation.wrapping_add(1);
        s.reserved = None;
        self.free.push(slot as u32);
        Some(op)
    }

    /// Takes the operation `id` out but keeps its id reserved for its endpoint (a
    /// claimed message waits for its receive under it: see [`OpTable::fill_reserved`]).
    pub(crate) fn take_reserving(&mut self, id: OpId) -> Option<Op<C>> {
        let s = self.slots.get_mut(id.slot()?)?;
        if s.generation != id.generation() {
            return None;
        }
        let op = s.op.take()?;
        s.reserved = Some(op.ep);
        Some(op)
    }

    /// Puts `op` under the reserved id `id` (of `op`'s endpoint); gives it back when
    /// `id` is not reserved for it or holds an operation already.
    pub(crate) fn fill_reserved(&mut self, id: OpId, op: Op<C>) -> Result<(), Op<C>> {
        let Some(s) = id.slot().and_then(|i| self.slots.get_mut(i)) else {
            return Err(op);
        };
        if s.generation != id.generation() || s.op.is_some() || s.reserved != Some(op.ep) {
            return Err(op);
        }
        s.op = Some(op);
        Ok(())
    }

    /// Frees every id reserved for endpoint `ep` that holds no operation (its claimed
    /// messages went with the endpoint).
    pub(crate) fn release_reserved(&mut self, ep: usize) {
        for (i, s) in self.slots.iter_mut().enumerate() {
            if s.op.is_none() && s.reserved == Some(ep) {
                s.reserved = None;
                s.generation = s.generation.wrapping_add(1);
                self.free.push(i as u32);
            }
        }
    }

    /// The ids of every operation of endpoint `ep`.
    pub(crate) fn ids_of(&self, ep: usize) -> Vec<OpId> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.op.as_ref().is_some_and(|o| o.ep == ep))
            .map(|(i, s)| OpId::new(i as u32, s.generation))
            .collect()
    }

    /// Where `addr..addr + len` lies in the buffer of operation `ctx` (an [`OpId`]):
    /// (slot, offset), or -FI_EFAULT unless the operation is here and the range is
    /// inside what was posted of its buffer.
    fn locate(&self, ctx: u64, addr: u64, len: usize) -> ofi_nostd::Result<(usize, usize)> {
        let id = OpId::from_raw(ctx);
        let slot = id.slot().ok_or(Errno::EFAULT)?;
        let s = self.slots.get(slot).ok_or(Errno::EFAULT)?;
        let op = s.op.as_ref().ok_or(Errno::EFAULT)?;
        if s.generation != id.generation() {
            return Err(Errno::EFAULT);
        }
        let start = op.buf.addr();
        let end = addr.checked_add(len as u64).ok_or(Errno::EFAULT)?;
        if addr < start || end > start + op.posted as u64 {
            return Err(Errno::EFAULT);
        }
        Ok((slot, (addr - start) as usize))
    }
}

impl<C> Memory for OpTable<C> {
    /// Every copy the core makes out of a posted buffer names its operation
    /// ([`Memory::read_op`]); one that does not reaches registered regions only.
    fn read(&self, addr: u64, out: &mut [u8]) -> ofi_nostd::Result<()> {
        if out.is_empty() {
            return Ok(());
        }
        let (i, off) = self.locate_region(addr, out.len())?;
        let src = self.regions[i]
            .1
            .storage()
            .get(off..off + out.len())
            .ok_or(Errno::EFAULT)?;
        out.copy_from_slice(src);
        Ok(())
    }

    /// See [`OpTable::read`](Memory::read).
    fn write(&mut self, addr: u64, data: &[u8]) -> ofi_nostd::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let (i, off) = self.locate_region(addr, data.len())?;
        let dst = self.regions[i]
            .1
            .storage_mut()
            .get_mut(off..off + data.len())
            .ok_or(Errno::EFAULT)?;
        dst.copy_from_slice(data);
        Ok(())
    }

    fn read_op(&self, ctx: u64, addr: u64, out: &mut [u8]) -> ofi_nostd::Result<()> {
        if out.is_empty() {
            return Ok(());
        }
        let (slot, off) = self.locate(ctx, addr, out.len())?;
        let op = self.slots[slot].op.as_ref().ok_or(Errno::EFAULT)?;
        let src = op
            .buf
            .storage()
            .get(off..off + out.len())
            .ok_or(Errno::EFAULT)?;
        out.copy_from_slice(src);
        Ok(())
    }

    fn write_op(&mut self, ctx: u64, addr: u64, data: &[u8]) -> ofi_nostd::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let (slot, off) = self.locate(ctx, addr, data.len())?;
        let op = self.slots[slot].op.as_mut().ok_or(Errno::EFAULT)?;
        let dst = op
            .buf
            .storage_mut()
            .get_mut(off..off + data.len())
            .ok_or(Errno::EFAULT)?;
        dst.copy_from_slice(data);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(buf: Buf, posted: usize) -> Op<u32> {
        Op {
            buf,
            context: 7,
            ep: 0,
            posted,
            multi: None,
            claim: false,
        }
    }

    #[test]
    fn a_reserved_id_takes_one_operation_of_its_endpoint_until_released() {
        let mut t = OpTable::new();
        let id = t.insert(op(Buf::zeroed(4), 0));
        assert_eq!(t.take_reserving(id).map(|o| o.context), Some(7));
        assert!(t.get(id).is_none());
        // Not for another endpoint's operation.
        let mut other = op(Buf::zeroed(4), 4);
        other.ep = 1;
        assert!(t.fill_reserved(id, other).is_err());
        assert!(t.fill_reserved(id, op(Buf::zeroed(8), 8)).is_ok());
        assert!(
            t.fill_reserved(id, op(Buf::zeroed(8), 8)).is_err(),
            "held already"
        );
        assert_eq!(t.get(id).map(|o| o.posted), Some(8));
        // Removed: the id is spent.
        assert!(t.remove(id).is_some());
        assert!(t.fill_reserved(id, op(Buf::zeroed(8), 8)).is_err());
        // Released with its endpoint: spent too, and its slot reused.
        let id2 = t.insert(op(Buf::zeroed(4), 0));
        t.take_reserving(id2).unwrap();
        assert_eq!(t.len(), 1, "a reserved id counts as held");
        t.release_reserved(0);
        assert_eq!(t.len(), 0);
        assert!(t.fill_reserved(id2, op(Buf::zeroed(8), 8)).is_err());
        let id3 = t.insert(op(Buf::zeroed(4), 0));
        assert_eq!(id3.slot(), id2.slot());
        assert_ne!(id3, id2);
    }

    #[test]
    fn accesses_stay_inside_posted_ranges() {
        let mut t = OpTable::new();
        let a = Buf::zeroed(16);
        let a_addr = a.addr();
        let id = t.insert(op(a, 8));
        let ctx = id.raw();
        t.write_op(ctx, a_addr + 2, &[1, 2, 3]).unwrap();
        let mut out = [0u8; 4];
        t.read_op(ctx, a_addr + 1, &mut out).unwrap();
        assert_eq!(out, [0, 1, 2, 3]);
        // Past the posted length, though inside the allocation.
        assert_eq!(t.write_op(ctx, a_addr + 6, &[0; 3]), Err(Errno::EFAULT));
        assert_eq!(t.read_op(ctx, a_addr - 1, &mut out), Err(Errno::EFAULT));
        assert_eq!(t.read_op(ctx, u64::MAX, &mut out), Err(Errno::EFAULT));
        // An access that names no operation is refused, even inside the buffer.
        assert_eq!(t.read(a_addr, &mut out), Err(Errno::EFAULT));
        assert_eq!(t.write(a_addr, &[1]), Err(Errno::EFAULT));
        // ... unless it lies wholly inside a registered region.
        let r = Buf::zeroed(8);
        let r_addr = r.addr();
        t.add_region(5, r);
        t.write(r_addr + 4, &[7, 8]).unwrap();
        t.read(r_addr + 3, &mut out[..3]).unwrap();
        assert_eq!(out[..3], [0, 7, 8]);
        assert_eq!(t.write(r_addr + 7, &[1, 2]), Err(Errno::EFAULT));
        assert_eq!(t.read(r_addr - 1, &mut out[..1]), Err(Errno::EFAULT));
        assert_eq!(&t.take_region(5).unwrap()[..6], &[0, 0, 0, 0, 7, 8][..]);
        assert_eq!(t.write(r_addr + 4, &[1]), Err(Errno::EFAULT));
        let back = t.remove(id).unwrap();
        assert_eq!(&back.buf[..5], &[0, 0, 1, 2, 3]);
        // Gone from the table: the core can no longer reach it.
        assert_eq!(t.read_op(ctx, a_addr, &mut out), Err(Errno::EFAULT));
        assert!(t.remove(id).is_none(), "stale id");
        assert_eq!(t.len(), 0);
    }

    /// An access names its operation: another operation's buffer, or a slot reused by a
    /// later operation (new generation), is out of reach of the old id.
    #[test]
    fn an_access_reaches_only_the_buffer_of_the_operation_it_names() {
        let mut t = OpTable::new();
        let a = Buf::zeroed(8);
        let b = Buf::zeroed(8);
        let (a_addr, b_addr) = (a.addr(), b.addr());
        let ia = t.insert(op(a, 8));
        let ib = t.insert(op(b, 8));
        assert_eq!(t.write_op(ia.raw(), b_addr, &[1]), Err(Errno::EFAULT));
        assert_eq!(t.write_op(ib.raw(), a_addr, &[1]), Err(Errno::EFAULT));
        t.write_op(ib.raw(), b_addr, &[9]).unwrap();
        t.remove(ia).unwrap();
        let c = t.insert(op(Buf::zeroed(8), 8));
        assert_ne!(c, ia);
        assert_eq!(t.write_op(ia.raw(), a_addr, &[1]), Err(Errno::EFAULT));
        assert_eq!(t.write_op(0, b_addr, &[1]), Err(Errno::EFAULT));
        assert_eq!(&t.remove(ib).unwrap().buf[..1], &[9]);
    }

    #[test]
    fn ids_are_generational_and_nonzero() {
        let mut t = OpTable::new();
        let a = t.insert(op(Buf::zeroed(1), 1));
        assert_ne!(a.raw(), 0);
        t.remove(a).unwrap();
        let b = t.insert(op(Buf::zeroed(1), 1));
        assert_ne!(a, b, "slot reused under a new generation");
        assert!(t.get(a).is_none());
        assert_eq!(t.get(b).unwrap().context, 7);
        assert!(t.get(OpId::from_raw(0)).is_none());
    }

    #[test]
    fn many_buffers_and_empty_ones() {
        let mut t = OpTable::new();
        let mut ids = Vec::new();
        let mut addrs = Vec::new();
        for i in 0..32u8 {
            let mut b = Buf::zeroed(4);
            b.copy_from(&[i; 4]);
            addrs.push(b.addr());
            ids.push(t.insert(op(b, 4)));
        }
        let e = t.insert(op(Buf::zeroed(0), 0));
        t.write_op(e.raw(), 0, &[]).unwrap();
        for (i, (a, id)) in addrs.iter().zip(&ids).enumerate() {
            let mut out = [0u8; 4];
            t.read_op(id.raw(), *a, &mut out).unwrap();
            assert_eq!(out, [i as u8; 4]);
        }
        for id in ids.iter().step_by(2) {
            t.remove(*id).unwrap();
        }
        let mut out = [0u8; 1];
        assert_eq!(
            t.read_op(ids[0].raw(), addrs[0], &mut out),
            Err(Errno::EFAULT)
        );
        t.read_op(ids[1].raw(), addrs[1], &mut out).unwrap();
        assert_eq!(out, [1]);
        assert!(t.remove(e).is_some());
        assert_eq!(t.ids_of(0).len(), 16);
    }
}
