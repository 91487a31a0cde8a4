//! The DGRAM engine (FI_EP_DGRAM): an endpoint's transmit queue and posted receives,
//! and how its datagrams leave (emit, complete) and arrive (deliver).
//!
//! Unreliable and unordered as fi_endpoint(3) allows: a datagram goes out once, in
//! posting order, and completes when the link took it; one that finds no posted
//! receive (or no room in the receive CQ) is dropped and counted. It is one of the
//! engines an [`Endpoint`](crate::ep::Endpoint) holds, next to the reliable
//! [`Rdm`](crate::rdm::Rdm).

use wire::link::{Link, UdpAddr};
use wire::packet::{Body, DgramRepr, Header, Packet, Repr};

use crate::addr::EpAddr;
use crate::cntr::Cntr;
use crate::cq::{Cq, CqEntry, CqErrEntry, CqSlot, comp};
use crate::errno::{Errno, Result};
use crate::fid::{CntrHandle, CqHandle, CqObj, Objects};
use crate::flags::{FI_ADDR_UNSPEC, FiAddr, Flags};
use crate::iov::IovList;
#[cfg(feature = "shared-ctx")]
use crate::matching::Held;
use crate::matching::{Bucket, Node, PostedQueue};
#[cfg(feature = "shared-ctx")]
use crate::mem::IoVec;
use crate::mem::Memory;
use crate::net::{ArpEntry, Net, SendOutcome};
use crate::pool::Slot;
use crate::storage::Storage;
use crate::time::Instant;

/// One posted receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvOp {
    /// Where the data goes.
    pub iov: IovList,
    /// The application's context.
    pub context: u64,
    /// Flags in force for this receive (op flags or the call's).
    pub flags: Flags,
    /// Bytes of a multi-recv buffer already used.
    pub used: usize,
    /// The source this receive accepts (`FI_ADDR_UNSPEC`: any).
    pub src: FiAddr,
    /// FI_OPT_MIN_MULTI_RECV when it was posted: a multi-recv buffer is released once
    /// less than this is free.
    pub min_free: usize,
}

/// One queued transmit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxOp {
    /// The data (unused when `inject_len` is set: the data is in the bounce buffer).
    pub iov: IovList,
    /// Payload length.
    pub len: usize,
    /// The application's context.
    pub context: u64,
    /// Flags in force (op flags or the call's).
    pub flags: Flags,
    /// Remote CQ data, with FI_REMOTE_CQ_DATA.
    pub data: Option<u64>,
    /// The destination as the application named it.
    pub dest: FiAddr,
    /// The destination's address.
    pub dest_addr: EpAddr,
    /// FI_INJECT: the payload was copied into this slot's bounce buffer at post time.
    pub injected: bool,
    /// Whether this operation writes a CQ entry on success.
    pub completion: bool,
    /// Whether a CQ slot was reserved for it (resource management).
    pub reserved: bool,
    /// fi_cancel reached it before it left.
    pub canceled: bool,
}

impl TxOp {
    const EMPTY: TxOp = TxOp {
        iov: IovList::EMPTY,
        len: 0,
        context: 0,
        flags: Flags::empty(),
        data: None,
        dest: FI_ADDR_UNSPEC,
        dest_addr: EpAddr {
            ip: [0; 4],
            port: 0,
            ep_id: 0,
        },
        injected: false,
        completion: false,
        reserved: false,
        canceled: false,
    };
}

/// The transmit queue: operations in posting order, each slot with an inject bounce
/// buffer of `inject_size` bytes so FI_INJECT data survives until it is sent.
pub struct TxQueue<S: Storage> {
    ops: S::Slice<TxOp>,
    bounce: S::Slice<u8>,
    inject_size: usize,
    head: usize,
    len: usize,
}

impl<S: Storage> TxQueue<S> {
    pub(crate) fn new(store: &mut S, size: usize, inject_size: usize) -> Result<Self> {
        let ops = store.slice(size, || TxOp::EMPTY).ok_or(Errno::ENOMEM)?;
        let bounce = store
            .zeroed(size.checked_mul(inject_size).ok_or(Errno::ENOMEM)?)
            .ok_or(Errno::ENOMEM)?;
        Ok(TxQueue {
            ops,
            bounce,
            inject_size,
            head: 0,
            len: 0,
        })
    }

    /// Queue depth.
    pub fn capacity(&self) -> usize {
        self.ops.as_ref().len()
    }

    /// Queued operations.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Free slots (`fi_tx_size_left`).
    pub fn space(&self) -> usize {
        self.capacity() - self.len
    }

    /// Appends `op`; `fill` writes its inject data into the slot's bounce buffer.
    pub(crate) fn push(
        &mut self,
        op: TxOp,
        fill: impl FnOnce(&mut [u8]) -> Result<()>,
    ) -> Result<()> {
        let cap = self.capacity();
        if self.len == cap {
            return Err(Errno::EAGAIN);
        }
        let slot = (self.head + self.len) % cap;
        if op.injected {
            let start = slot * self.inject_size;
            fill(&mut self.bounce.as_mut()[start..start + op.len])?;
        }
        self.ops.as_mut()[slot] = op;
        self.len += 1;
        Ok(())
    }

    /// The oldest operation and its bounce buffer.
    pub(crate) fn front(&self) -> Option<(&TxOp, &[u8])> {
        if self.len == 0 {
            return None;
        }
        let op = &self.ops.as_ref()[self.head];
        let start = self.head * self.inject_size;
        let data = if op.injected {
            &self.bounce.as_ref()[start..start + op.len]
        } else {
            &[]
        };
        Some((op, data))
    }

    /// Removes the oldest operation.
    pub(crate) fn pop(&mut self) -> Option<TxOp> {
        if self.len == 0 {
            return None;
        }
        let op = self.ops.as_ref()[self.head];
        self.len -= 1;
        // Emptied: the next send starts over at the first slot and bounce buffer,
        // still in the cache (as the CQ ring does).
        self.head = if self.len == 0 {
            0
        } else {
            (self.head + 1) % self.capacity()
        };
        Some(op)
    }

    /// The queued operations, oldest first, mutably.
    pub(crate) fn iter_mut(&mut self) -> impl Iterator<Item = &mut TxOp> {
        let (cap, head, len) = (self.capacity(), self.head, self.len);
        let (a, b) = self.ops.as_mut().split_at_mut(head);
        let first = len.min(cap - head);
        b[..first].iter_mut().chain(a[..len - first].iter_mut())
    }
}

/// Posted-receive queue type of a domain's storage.
pub type RecvQueue<S> =
    PostedQueue<RecvOp, <S as Storage>::Slice<Slot<Node<RecvOp>>>, <S as Storage>::Slice<Bucket>>;

/// What a DGRAM endpoint counts about the traffic it refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EpStats {
    /// Datagrams that found no posted receive (DGRAM drops them).
    pub rx_no_buffer: u64,
    /// Datagrams dropped because the receive CQ could not take their completion.
    pub rx_cq_full: u64,
    /// Messages delivered.
    pub rx_msgs: u64,
    /// Messages sent.
    pub tx_msgs: u64,
}

impl EpStats {
    /// Nothing counted (a `const` [`Default`]).
    pub const NONE: EpStats = EpStats {
        rx_no_buffer: 0,
        rx_cq_full: 0,
        rx_msgs: 0,
        tx_msgs: 0,
    };
}

/// A DGRAM endpoint's engine: its queues, the sequence number of its next datagram and
/// what it counted.
pub struct Dgram<S: Storage> {
    pub(crate) tx: TxQueue<S>,
    pub(crate) rx: RecvQueue<S>,
    tx_seq: u32,
    pub(crate) stats: EpStats,
}

/// Where a DGRAM endpoint's transmit completions go: the domain's CQs and counters,
/// and the endpoint's bindings into them.
pub(crate) struct TxCompletions<'a, S: Storage> {
    pub(crate) cqs: &'a mut Objects<S, CqObj<S>>,
    pub(crate) cntrs: &'a mut Objects<S, Cntr>,
    /// The transmit CQ.
    pub(crate) tx_cq: Option<CqHandle<S>>,
    /// The FI_SEND counter.
    pub(crate) send_cntr: Option<CntrHandle>,
    /// Reported as the context of an error completion whose operation had none.
    pub(crate) ep_context: u64,
}

/// How far one [`Dgram::transmit`] got.
pub(crate) struct Transmitted {
    /// Datagrams handed to the link.
    pub(crate) sent: usize,
    /// The link is full: no other endpoint should try before the next pass.
    pub(crate) link_full: bool,
}

impl<S: Storage> Dgram<S> {
    /// An engine with `tx_size` transmit slots (each with an `inject_size` bounce
    /// buffer) and `rx_size` posted receives, in the domain's storage.
    pub(crate) fn new(
        store: &mut S,
        tx_size: usize,
        rx_size: usize,
        inject_size: usize,
    ) -> Result<Self> {
        let tx = TxQueue::new(store, tx_size, inject_size)?;
        let nodes = store.slice(rx_size, || Slot::VACANT).ok_or(Errno::ENOMEM)?;
        let buckets = store
            .slice(rx_size.next_power_of_two() * 2, || Bucket::EMPTY)
            .ok_or(Errno::ENOMEM)?;
        Ok(Dgram {
            tx,
            rx: PostedQueue::new(nodes, buckets),
            tx_seq: 0,
            stats: EpStats::default(),
        })
    }

    /// What the engine refused or delivered.
    pub fn stats(&self) -> &EpStats {
        &self.stats
    }

    /// Queues a send; FI_INJECT data is read from `mem` into the slot's bounce buffer
    /// now. -FI_EAGAIN when the queue is full.
    pub(crate) fn post_send(&mut self, op: TxOp, mem: &impl Memory) -> Result<()> {
        self.tx.push(op, |bounce| {
            let mut at = 0;
            for v in op.iov.as_slice() {
                mem.read_op(op.context, v.addr, &mut bounce[at..at + v.len])?;
                at += v.len;
            }
            Ok(())
        })
    }

    /// Posts a receive accepting datagrams from `src`; -FI_EAGAIN when the queue is full.
    pub(crate) fn post_recv(&mut self, src: FiAddr, op: RecvOp) -> Result<()> {
        self.rx
            .post(src, 0, 0, op)
            .map(|_| ())
            .map_err(|_| Errno::EAGAIN)
    }

    /// `fi_cancel`: a posted receive with `context` completes at once with
    /// FI_ECANCELED in `rx_cq`; otherwise a queued transmit with it is marked, and
    /// completes so when the transmitter reaches it.
    pub(crate) fn cancel(&mut self, context: u64, rx_cq: Option<&mut CqObj<S>>, rm: bool) {
        if let Some(n) = self.rx.find_by(|op| op.context == context) {
            if let Some(node) = self.rx.remove(n) {
                let op = *node.value();
                let flags = comp::recv(false, false, false);
                let mut e = CqErrEntry::new(op.context, flags, Errno::ECANCELED);
                e.buf = op.iov.as_slice().first().map_or(0, |v| v.addr);
                e.len = 0;
                e.olen = 0;
                if let Some(cq) = rx_cq {
                    let _ = if rm {
                        cq.write_err_reserved(&e)
                    } else {
                        cq.write_err(&e)
                    };
                }
            }
            return;
        }
        if let Some(op) = self
            .tx
            .iter_mut()
            .find(|op| !op.canceled && op.context == context)
        {
            op.canceled = true;
        }
    }

    /// The multi-recv buffer posted with `context` that starts at `base`, as a shared
    /// receive context asks of one it lent here ([`crate::ep::srx`]); `take`: out of
    /// the queue, without a completion (a datagram never leaves one busy).
    #[cfg(feature = "shared-ctx")]
    pub(crate) fn multi_held(&mut self, context: u64, base: u64, take: bool, rm: bool) -> Held {
        let found = self.rx.find_by(|op| {
            op.flags.contains(Flags::MULTI_RECV)
                && op.context == context
                && op.iov.as_slice().first().is_some_and(|v| v.addr == base)
        });
        let Some(h) = found else {
            return Held::Gone;
        };
        if !take {
            return Held::Idle;
        }
        let Some(op) = self.rx.remove(h).map(|n| *n.value()) else {
            return Held::Gone;
        };
        let buf = op.iov.as_slice()[0];
        Held::Taken(IoVec::new(buf.addr + op.used as u64, buf.len - op.used), rm)
    }

    /// Empties the transmit queue of a closing endpoint without completions; returns
    /// how many of its operations held a CQ reservation.
    pub(crate) fn drain_tx(&mut self) -> usize {
        let mut reserved = 0;
        while let Some(op) = self.tx.pop() {
            reserved += op.reserved as usize;
        }
        reserved
    }

    /// Sends the queued datagrams of endpoint `ep_id` in order while the link takes
    /// them, completing each into `to`. A queue waiting for ARP stops here (only this
    /// endpoint waits); a full link stops the pass ([`Transmitted::link_full`]).
    pub(crate) fn transmit<L: Link>(
        &mut self,
        ep_id: u16,
        now: Instant,
        net: &mut Net<S::Slice<ArpEntry>, S::Slice<u8>>,
        link: &mut L,
        mem: &mut impl Memory,
        to: &mut TxCompletions<'_, S>,
    ) -> Transmitted {
        let mut sent = 0;
        while let Some((op, bounce)) = self.tx.front() {
            let op = *op;
            if op.canceled {
                self.tx.pop();
                complete_tx(to, &op, Err(Errno::ECANCELED));
                continue;
            }
            let header = Header {
                src_ep: ep_id,
                dst_ep: op.dest_addr.ep_id,
                session: 0,
                seq: self.tx_seq,
                crc: false,
                ack_req: false,
            };
            let dst = UdpAddr::new(op.dest_addr.ip.into(), op.dest_addr.port);
            let len_hint = op.len + wire::packet::BASE_LEN + if op.data.is_some() { 8 } else { 0 };
            let mut failed = None;
            let outcome = net.send(now, link, dst, len_hint, |buf| {
                match emit_dgram(buf, &header, &op, bounce, mem) {
                    Ok(n) => n,
                    Err(e) => {
                        failed = Some(e);
                        0
                    }
                }
            });
            let result = match (failed, outcome) {
                (Some(e), _) => Err(e),
                (None, Ok(SendOutcome::Sent { .. })) => Ok(()),
                // The next hop did not answer ARP: the datagram cannot go.
                (None, Ok(SendOutcome::ArpFailed)) => Err(Errno::EHOSTUNREACH),
                // The next hop's MAC is being resolved (for a bounded time: it
                // resolves or fails): this endpoint's queue waits, in order, the
                // others go on.
                (None, Ok(SendOutcome::ArpPending)) => break,
                // The link is full: try again on the next progress call.
                (None, Err(Errno::EAGAIN)) => {
                    return Transmitted {
                        sent,
                        link_full: true,
                    };
                }
                (None, Err(e)) => Err(e),
            };
            self.tx.pop();
            self.tx_seq = self.tx_seq.wrapping_add(1);
            if result.is_ok() {
                sent += 1;
                self.stats.tx_msgs += 1;
            }
            complete_tx(to, &op, result);
        }
        Transmitted {
            sent,
            link_full: false,
        }
    }

    /// Places one datagram into the endpoint's first matching receive and completes it
    /// (counted in [`EpStats`] when no receive or no CQ slot takes it).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn deliver(
        &mut self,
        cq: &mut CqObj<S>,
        selective: bool,
        rm: bool,
        mut cntr: Option<&mut Cntr>,
        src_fi: FiAddr,
        report_src: FiAddr,
        d: DgramRepr<'_>,
        mem: &mut impl Memory,
    ) {
        let len = d.payload.len();
        loop {
            let Some(h) = self.rx.find(src_fi, 0) else {
                self.stats.rx_no_buffer += 1;
                return;
            };
            let Some(op) = self.rx.get(h).map(|n| *n.value()) else {
                return;
            };
            let wants_entry = !selective || op.flags.contains(Flags::COMPLETION);
            let mut entry = CqEntry::new(op.context, comp::recv(false, d.cq_data.is_some(), false))
                .with_src_addr(report_src);
            if let Some(v) = d.cq_data {
                entry = entry.with_data(v);
            }
            if op.flags.contains(Flags::MULTI_RECV) {
                let buf = op.iov.as_slice()[0];
                let free = buf.len - op.used;
                if len > free {
                    // Does not fit: release the buffer (a final, empty FI_MULTI_RECV entry)
                    // and offer the datagram to the next receive.
                    self.rx.remove(h);
                    let e = CqEntry::new(op.context, comp::MULTI_RECV_RELEASED)
                        .with_buf(buf.addr + op.used as u64);
                    let _ = if rm {
                        cq.write_reserved(&e)
                    } else {
                        cq.write(&e)
                    };
                    continue;
                }
                let last = free - len < op.min_free;
                // An intermediate completion needs a CQ slot of its own.
                let need_slot = !last && wants_entry;
                if need_slot && rm && cq.try_reserve().is_err() {
                    self.stats.rx_cq_full += 1;
                    return;
                }
                let at = buf.addr + op.used as u64;
                let placed = mem.write_op(op.context, at, d.payload);
                entry = entry.with_buf(at).with_len(len);
                if last {
                    self.rx.remove(h);
                    entry.flags |= Flags::MULTI_RECV;
                } else if let Some(n) = self.rx.get_mut(h) {
                    n.value_mut().used += len;
                }
                finish_rx(
                    cq,
                    &mut cntr,
                    rm,
                    &entry,
                    placed,
                    0,
                    last || wants_entry,
                    need_slot || last,
                );
                self.stats.rx_msgs += 1;
                return;
            }
            self.rx.remove(h);
            let mut placed = Ok(());
            let mut at = 0;
            for v in op.iov.as_slice() {
                if at >= len {
                    break;
                }
                let n = v.len.min(len - at);
                if let Err(e) = mem.write_op(op.context, v.addr, &d.payload[at..at + n]) {
                    placed = Err(e);
                    break;
                }
                at += n;
            }
            entry = entry
                .with_len(at)
                .with_buf(op.iov.as_slice().first().map_or(0, |v| v.addr));
            finish_rx(
                cq,
                &mut cntr,
                rm,
                &entry,
                placed,
                len - at,
                wants_entry,
                true,
            );
            self.stats.rx_msgs += 1;
            return;
        }
    }
}

/// Writes one DGRAM packet for `op` into `buf`: header, optional CQ data, then the payload
/// from the bounce buffer (FI_INJECT) or straight from the application's memory.
fn emit_dgram(
    buf: &mut [u8],
    header: &Header,
    op: &TxOp,
    bounce: &[u8],
    mem: &impl Memory,
) -> Result<usize> {
    let head = Repr {
        header: *header,
        body: Body::Dgram(DgramRepr {
            cq_data: op.data,
            payload: &[],
        }),
    };
    let hl = head.buffer_len();
    let total = hl.checked_add(op.len).ok_or(Errno::EMSGSIZE)?;
    if total > buf.len() || total > u16::MAX as usize {
        return Err(Errno::EMSGSIZE);
    }
    let mut pkt = Packet::new_unchecked(&mut buf[..total]);
    head.emit(&mut pkt).map_err(|_| Errno::EMSGSIZE)?;
    if op.injected {
        buf[hl..total].copy_from_slice(bounce);
    } else {
        let mut at = hl;
        for v in op.iov.as_slice() {
            mem.read_op(op.context, v.addr, &mut buf[at..at + v.len])?;
            at += v.len;
        }
    }
    let mut pkt = Packet::new_unchecked(&mut buf[..total]);
    pkt.set_packet_len(total as u16);
    pkt.fill_checksum();
    Ok(total)
}

/// Completes one transmit: the send counter, then the transmit CQ's entry (or the
/// reserved slot given back when a success writes none).
fn complete_tx<S: Storage>(to: &mut TxCompletions<'_, S>, op: &TxOp, result: Result<()>) {
    let flags = comp::SEND_MSG;
    if let Some(c) = to.send_cntr.and_then(|c| to.cntrs.get_mut(c)) {
        if result.is_ok() { c.inc() } else { c.inc_err() }
    }
    let Some(cq) = to.tx_cq.and_then(|h| to.cqs.get_mut(h)) else {
        return;
    };
    let ctx = if op.context == 0 {
        to.ep_context
    } else {
        op.context
    };
    let _ = match result {
        Ok(()) if op.completion => {
            let e = CqEntry::new(op.context, flags);
            if op.reserved {
                cq.write_reserved(&e)
            } else {
                cq.write(&e)
            }
        }
        Ok(()) => {
            if op.reserved {
                cq.release();
            }
            Ok(())
        }
        Err(err) => {
            let e = CqErrEntry::new(ctx, flags, err);
            if op.reserved {
                cq.write_err_reserved(&e)
            } else {
                cq.write_err(&e)
            }
        }
    };
}

/// Writes a receive completion: success, FI_ETRUNC when `olen` bytes did not fit, or the
/// error of placing the data. `reserved` says whether a CQ slot was set aside for it.
#[allow(clippy::too_many_arguments)]
fn finish_rx<C: AsRef<[CqSlot]> + AsMut<[CqSlot]>>(
    cq: &mut Cq<C>,
    cntr: &mut Option<&mut Cntr>,
    rm: bool,
    entry: &CqEntry,
    placed: Result<()>,
    olen: usize,
    wants_entry: bool,
    reserved: bool,
) {
    let reserved = rm && reserved;
    let err = match placed {
        Err(e) => Some(CqErrEntry::from_entry(entry, e)),
        Ok(()) if olen > 0 => Some(CqErrEntry::truncated(entry, olen)),
        Ok(()) => None,
    };
    if let Some(c) = cntr.as_deref_mut() {
        if err.is_some() { c.inc_err() } else { c.inc() }
    }
    let _ = match (err, wants_entry) {
        (Some(e), _) => {
            if reserved {
                cq.write_err_reserved(&e)
            } else {
                cq.write_err(&e)
            }
        }
        (None, true) => {
            if reserved {
                cq.write_reserved(entry)
            } else {
                cq.write(entry)
            }
        }
        (None, false) => {
            if reserved {
                cq.release();
            }
            Ok(())
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::test_storage::VecStorage;

    #[test]
    fn tx_queue_wraps_and_keeps_inject_data() {
        let mut q: TxQueue<VecStorage> = TxQueue::new(&mut VecStorage, 2, 4).unwrap();
        let op = |len, injected| TxOp {
            len,
            injected,
            ..TxOp::EMPTY
        };
        q.push(op(3, true), |b| {
            b.copy_from_slice(b"abc");
            Ok(())
        })
        .unwrap();
        q.push(op(9, false), |_| unreachable!()).unwrap();
        assert_eq!(q.push(op(0, false), |_| Ok(())), Err(Errno::EAGAIN));
        assert_eq!(q.front().map(|(o, d)| (o.len, d)), Some((3, &b"abc"[..])));
        q.pop().unwrap();
        q.push(op(2, true), |b| {
            b.copy_from_slice(b"xy");
            Ok(())
        })
        .unwrap();
        assert_eq!(
            q.iter_mut().map(|o| o.len).collect::<heapless::Vec<_, 4>>(),
            [9, 2]
        );
        q.pop().unwrap();
        assert_eq!(q.front().map(|(o, d)| (o.len, d)), Some((2, &b"xy"[..])));
        q.pop().unwrap();
        assert!(q.front().is_none() && q.pop().is_none());
    }
}
