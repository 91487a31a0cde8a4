//! The records of operations in progress: sends (with their RMA and atomic parts),
//! posted and multi-recv receives, unexpected messages, receives being filled and
//! the message being assembled, and the requests the domain hands in.

use super::*;

/// Completion levels of a send (fi_endpoint(3) op flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Level {
    /// FI_INJECT_COMPLETE with the data copied: complete at once.
    Inject,
    /// FI_TRANSMIT_COMPLETE (default): every packet acknowledged (cumulatively or
    /// selectively) by the target.
    Transmit,
    /// FI_DELIVERY_COMPLETE: every packet processed by the target (cumulatively acked:
    /// placed in the matched buffer or buffered as unexpected).
    Delivery,
}

/// One send operation.
#[derive(Debug, Clone, Copy)]
pub(super) struct TxOp {
    pub(super) peer: u16,
    pub(super) epoch: u32,
    pub(super) prev: u32,
    pub(super) next: u32,
    pub(super) rndv: bool,
    pub(super) iov: crate::iov::IovList,
    pub(super) len: u64,
    pub(super) injected: bool,
    pub(super) context: u64,
    pub(super) tag: Option<u64>,
    pub(super) data: Option<u64>,
    pub(super) msg_id: u32,
    /// Eager: bytes segmented so far. Rendezvous: DATA bytes sent so far.
    pub(super) sent: u64,
    /// The first packet (segment or RTS) has been sent: the operation can no longer
    /// be cancelled and a reset fails it.
    pub(super) started: bool,
    /// Eager: every segment sent. Rendezvous: RTS sent.
    pub(super) initial_done: bool,
    /// Rendezvous: end of the granted range.
    pub(super) granted: u64,
    /// Rendezvous: where the transfer ends (`len`, or less when the receiver truncates).
    pub(super) end: u64,
    /// Rendezvous: a CTS arrived (the receiver's op id is known).
    pub(super) cts_seen: bool,
    pub(super) rx_op: u32,
    pub(super) unacked: u32,
    pub(super) undelivered: u32,
    pub(super) level: Level,
    pub(super) completion: bool,
    pub(super) reserved: bool,
    /// The completion was written (inject-complete early, or transmit-complete).
    pub(super) completed: bool,
    /// The send failed locally (its buffer could not be read): report this at the end.
    pub(super) error: Option<Errno>,
    /// The peer acknowledged a packet of it or answered its RTS: it may have been
    /// delivered, so it is never sent again on another session.
    pub(super) acked_any: bool,
    /// An RMA write or read: where it goes at the target (`None`: a message).
    pub(super) rma: Option<RmaOp>,
}

/// The remote side and progress of an RMA operation (docs/wire-protocol.md, section 7).
#[derive(Debug, Clone, Copy)]
pub(super) struct RmaOp {
    pub(super) key: u64,
    pub(super) addr: u64,
    pub(super) read: bool,
    /// Read: bytes placed so far.
    #[cfg_attr(not(feature = "rma"), allow(dead_code))]
    pub(super) got: u64,
    /// The target answered: a write's ATOMIC_RESP, a read's last READ_RESP or its
    /// failure. Only then does the operation complete (a failure needs the answer).
    pub(super) answered: bool,
    /// An atomic operation (fi_atomic(3)): its operands wait in the op's bounce slot.
    pub(super) atomic: Option<AtomicMeta>,
    /// Only a build that serves RMA has one: otherwise an operation's `rma` is always
    /// `None` and the code of RMA and atomic operations drops out of the image.
    #[allow(dead_code, reason = "never read: its type is what matters")]
    pub(super) served: crate::served::Rma,
}

/// What an atomic operation does and where its original values go.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AtomicMeta {
    pub(crate) op: wire::packet::AtomicOp,
    pub(crate) dt: wire::packet::AtomicDatatype,
    pub(crate) count: u16,
    /// The original values come back (fetch and compare calls) into the op's `iov`
    /// (once the operands are copied, the op's buffer is the result buffer).
    pub(crate) fetch: bool,
    /// Only a build that serves atomics has one (see [`RmaOp::served`]).
    #[allow(dead_code, reason = "never read: its type is what matters")]
    pub(crate) served: crate::served::Atomic,
}

/// An atomic post: what it does, and its compare (or MSWAP mask) and result buffers.
#[derive(Debug, Clone, Copy)]
pub(crate) struct AtomicReq {
    pub(crate) meta: AtomicMeta,
    pub(crate) compare: IoVec,
    pub(crate) result: IoVec,
}

impl AtomicMeta {
    /// Bytes of one operand array (and of the fetched values).
    pub(crate) fn bytes(&self) -> usize {
        self.count as usize * self.dt.size()
    }

    /// Bytes of every operand array the request carries.
    pub(crate) fn operand_bytes(&self) -> usize {
        self.bytes() * self.op.operand_arrays()
    }
}

/// What kind of operation a transmit completion reports (flags and counter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TxKind {
    Msg,
    Tagged,
    Write,
    Read,
    AtomicWrite,
    AtomicRead,
}

impl TxOp {
    pub(super) fn kind(&self) -> TxKind {
        match self.rma {
            Some(RmaOp {
                atomic: Some(a), ..
            }) => {
                if a.fetch {
                    TxKind::AtomicRead
                } else {
                    TxKind::AtomicWrite
                }
            }
            Some(r) if r.read => TxKind::Read,
            Some(_) => TxKind::Write,
            None if self.tag.is_some() => TxKind::Tagged,
            None => TxKind::Msg,
        }
    }

    /// Whether its initial packet is a request (RTS or READ_REQ) rather than segments.
    pub(super) fn request_only(&self) -> bool {
        self.rndv || self.rma.is_some_and(|r| r.read || r.atomic.is_some())
    }
}

/// The target side of an RMA operation owes its initiator an answer: a write's status
/// (ATOMIC_RESP), a read's failure, or a read's data (READ_RESP segments, read from the
/// registered region as they leave).
#[derive(Debug, Clone, Copy)]
pub(super) struct RmaResp {
    pub(super) peer: u16,
    pub(super) epoch: u32,
    /// The initiator's operation id.
    pub(super) op_id: u32,
    pub(super) status: u16,
    pub(super) read: bool,
    pub(super) key: u64,
    pub(super) addr: u64,
    /// Read data to send (0: a status answer only).
    pub(super) len: u64,
    pub(super) sent: u64,
    pub(super) unacked: u32,
    /// An atomic's original values (big-endian), `fetched_len` bytes: they cannot be
    /// read again, so the answer keeps them until acknowledged.
    pub(super) fetched: [u8; crate::atomic::MAX_ATOMIC_BYTES],
    pub(super) fetched_len: u8,
}

impl TxOp {
    pub(super) fn all_sent(&self) -> bool {
        if self.rndv {
            self.initial_done && self.cts_seen && self.sent >= self.end
        } else {
            self.initial_done
        }
    }

    pub(super) fn has_data_to_send(&self) -> bool {
        self.rndv && self.cts_seen && self.sent < self.granted.min(self.end)
    }
}

/// A posted receive (untagged or tagged; the queue knows which).
#[derive(Debug, Clone, Copy)]
pub(super) struct PostedRecv {
    pub(super) iov: crate::iov::IovList,
    pub(super) context: u64,
    pub(super) reserved: bool,
    pub(super) completion: bool,
    /// FI_MULTI_RECV: the buffer's state in the multi-recv table.
    pub(super) multi: Option<crate::pool::Handle<MultiBuf>>,
}

/// A multi-recv buffer: messages are carved from it until less than `min_free` is left;
/// it is released (FI_MULTI_RECV completion) once released and nothing carved from it is
/// still arriving.
#[derive(Debug, Clone, Copy)]
pub(super) struct MultiBuf {
    pub(super) context: u64,
    pub(super) buf: IoVec,
    pub(super) used: usize,
    pub(super) min_free: usize,
    pub(super) outstanding: u32,
    pub(super) released: bool,
    pub(super) reserved: bool,
    pub(super) posted: Option<EntryHandle<PostedRecv>>,
}

/// What an unexpected message holds.
#[derive(Debug, Clone, Copy)]
pub(super) enum UxKind {
    /// Eager: `got` bytes so far in a chain of unexpected segments starting at `first`.
    Eager { first: u32, got: u32 },
    /// Rendezvous: only the RTS.
    Rndv { rts_op: u32 },
}

/// An unexpected message (arrived before a matching receive).
#[derive(Debug, Clone, Copy)]
pub(super) struct UxMsg {
    pub(super) peer: u16,
    pub(super) epoch: u32,
    pub(super) report_src: FiAddr,
    pub(super) tag: u64,
    pub(super) tagged: bool,
    pub(super) data: Option<u64>,
    pub(super) total: u64,
    pub(super) kind: UxKind,
    /// FI_PEEK | FI_CLAIM reserved it for this context.
    pub(super) claimed_by: u64,
}

impl UxMsg {
    pub(super) fn complete(&self) -> bool {
        match self.kind {
            UxKind::Eager { got, .. } => got as u64 == self.total,
            UxKind::Rndv { .. } => false,
        }
    }
}

/// Where an unexpected message lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum UxRef {
    Untagged(EntryHandle<UxMsg>),
    Tagged(EntryHandle<UxMsg>),
    Claimed(crate::pool::Handle<UxMsg>),
}

/// A matched receive that is still receiving data (multi-segment eager or rendezvous).
#[derive(Debug, Clone, Copy)]
pub(super) struct RxActive {
    pub(super) peer: u16,
    pub(super) epoch: u32,
    pub(super) rndv: bool,
    pub(super) rts_op: u32,
    pub(super) iov: crate::iov::IovList,
    pub(super) context: u64,
    pub(super) total: u64,
    /// Bytes that will be placed: `min(total, buffer length)`.
    pub(super) want: u64,
    /// Bytes arrived so far (in order).
    pub(super) got: u64,
    /// Rendezvous: end of the range granted so far.
    pub(super) granted: u64,
    pub(super) cts_pending: bool,
    /// Start of the grant the pending CTS carries.
    pub(super) cts_off: u64,
    /// Truncated rendezvous: a final CTS (len 0 at `want`) must tell the sender where
    /// the transfer ends.
    pub(super) end_pending: bool,
    /// Unexpected segments holding the first `chain_len` bytes, still to be copied into
    /// the buffer by the next progress (NIL: none).
    pub(super) chain: u32,
    pub(super) chain_len: u32,
    /// Rendezvous being discarded (FI_DISCARD): CTS with status CANCELED, no data.
    pub(super) discard: bool,
    pub(super) tag: u64,
    pub(super) tagged: bool,
    pub(super) data: Option<u64>,
    pub(super) report_src: FiAddr,
    pub(super) multi: Option<crate::pool::Handle<MultiBuf>>,
    pub(super) reserved: bool,
    pub(super) completion: bool,
    /// A placement failed (-FI_EFAULT etc.): report it at the end.
    pub(super) error: Option<Errno>,
}

/// Where an in-order eager message being assembled goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AsmTarget {
    Active(crate::pool::Handle<RxActive>),
    Unexpected(UxRef),
    /// The receive it was going to failed or was discarded: drop the rest.
    Drop,
}

/// The in-order eager message of a peer that has more segments to come.
#[derive(Debug, Clone, Copy)]
pub(super) struct Asm {
    pub(super) msg_id: u32,
    pub(super) total: u32,
    pub(super) got: u32,
    pub(super) tag: Option<u64>,
    pub(super) data: Option<u64>,
    pub(super) target: AsmTarget,
}

/// The arguments of a send the domain has validated.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendReq {
    pub(crate) iov: crate::iov::IovList,
    pub(crate) len: usize,
    pub(crate) context: u64,
    pub(crate) tag: Option<u64>,
    pub(crate) data: Option<u64>,
    pub(crate) flags: Flags,
    /// Whether a success writes a CQ entry (selective completion decided).
    pub(crate) completion: bool,
    /// A CQ slot was reserved.
    pub(crate) reserved: bool,
    /// An RMA operation: `(key, remote address, read)`.
    pub(crate) rma: Option<(u64, u64, bool)>,
    /// An atomic operation (with `rma` naming its target).
    pub(crate) atomic: Option<AtomicReq>,
}

/// The arguments of a receive the domain has validated.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RecvReq {
    pub(crate) iov: crate::iov::IovList,
    pub(crate) src: FiAddr,
    pub(crate) context: u64,
    /// `Some((tag, ignore))` for tagged receives.
    pub(crate) tag: Option<(u64, u64)>,
    pub(crate) flags: Flags,
    pub(crate) completion: bool,
    pub(crate) reserved: bool,
    pub(crate) min_free: usize,
}
