//! The loopback queue: datagrams an endpoint sends to its own address on a raw link,
//! which the link would never bring back, wait here for the next receive (see the
//! [module docs](super)).

use wire::link::Medium;

use super::framing::be16;
use super::{ArpEntry, Net, SendOutcome};
use crate::errno::{Errno, Result};

/// Bytes in front of each [`Looped`] slot: the datagram's length.
pub(super) const LOOP_SLOT_HEADER: usize = 2;

/// A FIFO of datagrams to our own address, in caller storage `B` (bytes): fixed slots
/// of a length prefix plus [`NetConfig::max_payload`](super::NetConfig::max_payload) bytes. Full is an error for the
/// sender (`EAGAIN`), never a drop.
#[derive(Debug)]
pub struct Looped<B> {
    buf: B,
    /// Bytes per slot.
    slot: usize,
    head: usize,
    len: usize,
    /// Datagrams popped since the queue was lent out (added to the stats on return).
    popped: u64,
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> Looped<B> {
    /// An empty queue over `buf`, in slots for datagrams of up to `max_payload` bytes.
    pub(super) fn new(buf: B, max_payload: usize) -> Self {
        Looped {
            buf,
            slot: LOOP_SLOT_HEADER + max_payload,
            head: 0,
            len: 0,
            popped: 0,
        }
    }

    /// How many datagrams the queue holds at most.
    pub fn capacity(&self) -> usize {
        self.buf.as_ref().len().checked_div(self.slot).unwrap_or(0)
    }

    /// Datagrams waiting.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Slot `i`: its length prefix and bytes.
    fn slot_mut(&mut self, i: usize) -> Option<&mut [u8]> {
        let at = i.checked_mul(self.slot)?;
        self.buf.as_mut().get_mut(at..at.checked_add(self.slot)?)
    }

    /// Lets `write` fill the next free slot with up to `len_hint` bytes (the rules of
    /// [`Net::send`](super::Net::send)); `EAGAIN` when full.
    pub(super) fn push(
        &mut self,
        len_hint: usize,
        write: impl FnOnce(&mut [u8]) -> usize,
    ) -> Result<usize> {
        let cap = self.capacity();
        if self.len >= cap {
            return Err(Errno::EAGAIN);
        }
        let tail = (self.head + self.len) % cap;
        let slot = self.slot_mut(tail).ok_or(Errno::EAGAIN)?;
        let (head, body) = slot.split_at_mut(LOOP_SLOT_HEADER);
        let n = write(body.get_mut(..len_hint).ok_or(Errno::EMSGSIZE)?);
        if n == 0 || n > len_hint {
            return Err(Errno::EINVAL);
        }
        head.copy_from_slice(&u16::try_from(n).map_err(|_| Errno::EMSGSIZE)?.to_be_bytes());
        self.len += 1;
        Ok(n)
    }

    /// Hands the oldest datagram to `f` and frees its slot; `None` when empty.
    pub fn pop<R>(&mut self, f: impl FnOnce(&[u8]) -> R) -> Option<R> {
        if self.len == 0 {
            return None;
        }
        let (head, slot) = (self.head, self.slot);
        self.head = (head + 1) % self.capacity().max(1);
        self.len -= 1;
        self.popped += 1;
        let at = head.checked_mul(slot)?;
        let s = self.buf.as_ref().get(at..at.checked_add(slot)?)?;
        let n = usize::from(be16(s, 0)?);
        Some(f(s.get(LOOP_SLOT_HEADER..LOOP_SLOT_HEADER.checked_add(n)?)?))
    }
}

impl<A: AsRef<[ArpEntry]> + AsMut<[ArpEntry]>, B: AsRef<[u8]> + AsMut<[u8]>> Net<A, B> {
    /// How many datagrams to ourselves the loopback queue holds at most (0 on UDP links,
    /// where the kernel loops them back).
    pub fn loopback_capacity(&self) -> usize {
        match self.cfg.medium {
            Medium::Ethernet => self.lo.as_ref().map_or(0, Looped::capacity),
            Medium::Udp => 0,
        }
    }

    /// Datagrams to ourselves wait to be received: the progress loop has work now.
    pub fn has_looped(&self) -> bool {
        self.lo.as_ref().is_some_and(|q| !q.is_empty())
    }

    /// Lends out the non-empty loopback queue, so the caller can receive its datagrams
    /// (each from [`local_addr`](Net::local_addr)) while it mutates whatever else owns
    /// this `Net`; give it back with [`return_looped`](Net::return_looped). While it is
    /// lent, sends to ourselves get `EAGAIN`.
    pub fn lend_looped(&mut self) -> Option<Looped<B>> {
        if self.has_looped() {
            self.lo.take()
        } else {
            None
        }
    }

    /// Takes back the queue [`lend_looped`](Net::lend_looped) lent, counting what was
    /// received from it.
    pub fn return_looped(&mut self, mut q: Looped<B>) {
        self.stats.rx_looped += core::mem::take(&mut q.popped);
        self.lo = Some(q);
    }

    /// A datagram to our own address on a raw link: the link would not bring it back,
    /// so it waits in the loopback queue for the next receive.
    pub(super) fn send_looped(
        &mut self,
        len_hint: usize,
        write: impl FnOnce(&mut [u8]) -> usize,
    ) -> Result<SendOutcome> {
        let Some(q) = self.lo.as_mut() else {
            return Err(Errno::EAGAIN); // lent out to the receiver: retry after it
        };
        if q.capacity() == 0 {
            self.stats.tx_loop_refused += 1;
            return Err(Errno::EHOSTUNREACH);
        }
        match q.push(len_hint, write) {
            Ok(len) => {
                self.stats.tx_looped += 1;
                Ok(SendOutcome::Sent { len })
            }
            Err(Errno::EAGAIN) => {
                self.stats.tx_loop_full += 1;
                Err(Errno::EAGAIN)
            }
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use std::vec::Vec;

    use super::*;

    /// Writes `data` as the datagram.
    fn put(q: &mut Looped<[u8; 36]>, data: &[u8]) -> Result<usize> {
        q.push(data.len(), |b| {
            b[..data.len()].copy_from_slice(data);
            data.len()
        })
    }

    fn take(q: &mut Looped<[u8; 36]>) -> Option<Vec<u8>> {
        q.pop(|d| d.to_vec())
    }

    #[test]
    fn fifo_in_fixed_slots_with_wraparound() {
        // Two slots of a length prefix and 16 bytes.
        let mut q = Looped::new([0u8; 36], 16);
        assert_eq!((q.capacity(), q.len(), q.is_empty()), (2, 0, true));
        assert_eq!(put(&mut q, b"one"), Ok(3));
        assert_eq!(put(&mut q, b"sixteen bytes..."), Ok(16));
        assert_eq!(
            put(&mut q, b"x"),
            Err(Errno::EAGAIN),
            "full is an error, not a drop"
        );
        assert_eq!(q.len(), 2);
        assert_eq!(take(&mut q).as_deref(), Some(&b"one"[..]));
        assert_eq!(put(&mut q, b"three"), Ok(5)); // into the first slot again
        assert_eq!(take(&mut q).as_deref(), Some(&b"sixteen bytes..."[..]));
        assert_eq!(take(&mut q).as_deref(), Some(&b"three"[..]));
        assert_eq!(take(&mut q), None);
        assert!(q.is_empty());
        assert_eq!(q.popped, 3);
    }

    #[test]
    fn writer_rules_and_no_storage() {
        let mut q = Looped::new([0u8; 36], 16);
        assert_eq!(q.push(17, |_| 1), Err(Errno::EMSGSIZE), "beyond the slot");
        assert_eq!(q.push(4, |_| 0), Err(Errno::EINVAL), "nothing written");
        assert_eq!(q.push(4, |_| 5), Err(Errno::EINVAL), "more than the hint");
        assert!(q.is_empty(), "a refused write takes no slot");
        let mut none = Looped::new([0u8; 0], 16);
        assert_eq!(none.capacity(), 0);
        assert_eq!(none.push(1, |_| 1), Err(Errno::EAGAIN));
        assert_eq!(none.pop(|d| d.len()), None);
    }
}
