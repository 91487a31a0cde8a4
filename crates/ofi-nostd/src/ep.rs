//! Active endpoints (fi_endpoint(3)): state, bindings, options and queues.
//!
//! An endpoint lives in its domain's pool; every call on it goes through the
//! [`Domain`](crate::domain::Domain), which owns the CQs, counters and AVs it binds.
//! This module holds what belongs to the endpoint alone: the enable state machine, the
//! one-CQ-and-one-counter-per-operation-type binding rules, default operation flags,
//! options, and the transmit and receive queues in the domain's storage.

pub use crate::bind::{CntrBindings, CqBinding};
use crate::errno::{Errno, Result};
use crate::fid::{AvHandle, CntrHandle, CqHandle};
use crate::flags::{FI_ADDR_UNSPEC, FiAddr, Flags};
use crate::info::EpType;
pub use crate::iov::{IOV_LIMIT, IovList};
use crate::matching::{Bucket, Node, PostedQueue};
use crate::pool::{Handle, Slot};
use crate::rdm::Rdm;
use crate::storage::Storage;

/// `FI_OPT_ENDPOINT`, the only option level.
pub const FI_OPT_ENDPOINT: i32 = 0;

/// Endpoint option names (`enum` in `<rdma/fi_endpoint.h>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
#[non_exhaustive]
pub enum EpOpt {
    /// FI_OPT_MIN_MULTI_RECV (size_t).
    MinMultiRecv = 0,
    /// FI_OPT_CM_DATA_SIZE (size_t, read-only).
    CmDataSize = 1,
    /// FI_OPT_BUFFERED_MIN (size_t).
    BufferedMin = 2,
    /// FI_OPT_BUFFERED_LIMIT (size_t).
    BufferedLimit = 3,
    /// FI_OPT_SEND_BUF_SIZE.
    SendBufSize = 4,
    /// FI_OPT_RECV_BUF_SIZE.
    RecvBufSize = 5,
    /// FI_OPT_TX_SIZE.
    TxSize = 6,
    /// FI_OPT_RX_SIZE.
    RxSize = 7,
    /// FI_OPT_FI_HMEM_P2P (int).
    HmemP2p = 8,
    /// FI_OPT_XPU_TRIGGER.
    XpuTrigger = 9,
}

impl EpOpt {
    /// The option for a C `optname`; -FI_ENOPROTOOPT for unknown names.
    pub fn from_raw(raw: i32) -> Result<EpOpt> {
        Ok(match raw {
            0 => EpOpt::MinMultiRecv,
            1 => EpOpt::CmDataSize,
            2 => EpOpt::BufferedMin,
            3 => EpOpt::BufferedLimit,
            4 => EpOpt::SendBufSize,
            5 => EpOpt::RecvBufSize,
            6 => EpOpt::TxSize,
            7 => EpOpt::RxSize,
            8 => EpOpt::HmemP2p,
            9 => EpOpt::XpuTrigger,
            _ => return Err(Errno::ENOPROTOOPT),
        })
    }
}

/// Where an endpoint is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpState {
    /// Opened; bindings may be made, no data transfer yet.
    Disabled,
    /// `fi_enable` succeeded: data transfer allowed, bindings frozen.
    Enabled,
}

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
    pub dest_addr: crate::addr::EpAddr,
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
        dest_addr: crate::addr::EpAddr {
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

/// What an endpoint counts about the traffic it refused.
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

/// An active endpoint.
pub struct Endpoint<S: Storage> {
    pub(crate) ep_type: EpType,
    pub(crate) caps: Flags,
    pub(crate) context: u64,
    pub(crate) id: u16,
    pub(crate) state: EpState,
    pub(crate) tx_flags: Flags,
    pub(crate) rx_flags: Flags,
    pub(crate) tx_cq: Option<CqBinding<CqHandle<S>>>,
    pub(crate) rx_cq: Option<CqBinding<CqHandle<S>>>,
    pub(crate) cntrs: CntrBindings<CntrHandle>,
    pub(crate) av: Option<AvHandle<S>>,
    pub(crate) eq: Option<u64>,
    pub(crate) min_multi_recv: usize,
    pub(crate) max_msg_size: usize,
    pub(crate) inject_size: usize,
    pub(crate) tx_iov_limit: usize,
    pub(crate) rx_iov_limit: usize,
    pub(crate) tx: TxQueue<S>,
    pub(crate) rx: RecvQueue<S>,
    pub(crate) tx_seq: u32,
    pub(crate) stats: EpStats,
    pub(crate) aliases: u32,
    /// The reliability engine (FI_EP_RDM only).
    pub(crate) rdm: Option<Rdm<S>>,
}

/// Default FI_OPT_MIN_MULTI_RECV.
pub const DEFAULT_MIN_MULTI_RECV: usize = 64;

/// An endpoint in domain storage `S` (the name the domain's accessors use).
pub type EpObj<S> = Endpoint<S>;
/// Handle of an endpoint.
pub type EpHandle<S> = Handle<Endpoint<S>>;

impl<S: Storage> Endpoint<S> {
    /// The endpoint type.
    pub fn ep_type(&self) -> EpType {
        self.ep_type
    }

    /// The capabilities granted.
    pub fn caps(&self) -> Flags {
        self.caps
    }

    /// The application's context of the endpoint.
    pub fn context(&self) -> u64 {
        self.context
    }

    /// The endpoint id (the third part of its address).
    pub fn id(&self) -> u16 {
        self.id
    }

    /// Enabled or not.
    pub fn state(&self) -> EpState {
        self.state
    }

    /// What the endpoint refused or delivered.
    pub fn stats(&self) -> &EpStats {
        &self.stats
    }

    /// The bound event queue's token, if any.
    pub fn eq(&self) -> Option<u64> {
        self.eq
    }

    /// The reliability engine of an FI_EP_RDM endpoint (statistics, peer states).
    pub fn rdm(&self) -> Option<&Rdm<S>> {
        self.rdm.as_ref()
    }

    /// `fi_tx_size_left`: operations that can be posted before -FI_EAGAIN.
    pub fn tx_size_left(&self) -> usize {
        match &self.rdm {
            Some(r) => r.tx_capacity() - r.tx_in_use(),
            None => self.tx.space(),
        }
    }

    /// `fi_rx_size_left` (RDM: of the untagged queue; tagged has the same capacity).
    pub fn rx_size_left(&self) -> usize {
        match &self.rdm {
            Some(r) => r.rx_capacity().saturating_sub(r.rx_in_use()),
            None => self.rx.capacity() - self.rx.len(),
        }
    }

    fn tx_capacity(&self) -> usize {
        self.rdm
            .as_ref()
            .map_or(self.tx.capacity(), |r| r.tx_capacity())
    }

    fn rx_capacity(&self) -> usize {
        self.rdm
            .as_ref()
            .map_or(self.rx.capacity(), |r| r.rx_capacity())
    }

    /// FI_GETOPSFLAG: `flags` names FI_TRANSMIT or FI_RECV (exactly one), the default
    /// operation flags of that side are returned. -FI_EINVAL otherwise.
    pub fn getopsflag(&self, flags: Flags) -> Result<Flags> {
        match side(flags)? {
            Side::Tx => Ok(self.tx_flags),
            Side::Rx => Ok(self.rx_flags),
        }
    }

    /// FI_SETOPSFLAG: `flags` names FI_TRANSMIT or FI_RECV (exactly one) plus the new
    /// default operation flags of that side. Flags the side cannot use are -FI_EINVAL.
    pub fn setopsflag(&mut self, flags: Flags) -> Result<()> {
        let s = side(flags)?;
        let ops = flags.difference(Flags::TRANSMIT | Flags::RECV);
        match s {
            Side::Tx => {
                if !tx_defaults_ok(self.ep_type, ops) {
                    return Err(Errno::EINVAL);
                }
                self.tx_flags = ops;
            }
            Side::Rx => {
                if !RX_OP_FLAGS.contains(ops)
                    || (ops.contains(Flags::MULTI_RECV) && !self.caps.contains(Flags::MULTI_RECV))
                {
                    return Err(Errno::EINVAL);
                }
                self.rx_flags = ops;
            }
        }
        Ok(())
    }

    /// `fi_getopt` at level FI_OPT_ENDPOINT. Unknown levels are -FI_ENOPROTOOPT; options
    /// this endpoint type does not have are -FI_ENOPROTOOPT too.
    pub fn getopt(&self, level: i32, opt: EpOpt) -> Result<usize> {
        if level != FI_OPT_ENDPOINT {
            return Err(Errno::ENOPROTOOPT);
        }
        match opt {
            EpOpt::MinMultiRecv => Ok(self.min_multi_recv),
            // Connectionless endpoints carry no connection-management data.
            EpOpt::CmDataSize => Ok(0),
            EpOpt::TxSize => Ok(self.tx_capacity()),
            EpOpt::RxSize => Ok(self.rx_capacity()),
            _ => Err(Errno::ENOPROTOOPT),
        }
    }

    /// `fi_setopt` at level FI_OPT_ENDPOINT. FI_OPT_CM_DATA_SIZE is read-only
    /// (-FI_EOPNOTSUPP); FI_OPT_MIN_MULTI_RECV affects receives posted afterwards.
    pub fn setopt(&mut self, level: i32, opt: EpOpt, value: usize) -> Result<()> {
        if level != FI_OPT_ENDPOINT {
            return Err(Errno::ENOPROTOOPT);
        }
        match opt {
            EpOpt::MinMultiRecv => {
                self.min_multi_recv = value;
                Ok(())
            }
            EpOpt::CmDataSize | EpOpt::TxSize | EpOpt::RxSize => Err(Errno::EOPNOTSUPP),
            _ => Err(Errno::ENOPROTOOPT),
        }
    }

    /// `fi_ep_alias`: `flags` names FI_TRANSMIT or FI_RECV (exactly one) plus the
    /// operation flags that side of the alias uses; an alias differs from its endpoint
    /// only in these defaults. Returns the alias's (transmit, receive) default flags; the
    /// caller posts through the endpoint with them. The endpoint cannot be closed while
    /// aliases exist (-FI_EBUSY); release each with [`Endpoint::alias_close`].
    pub fn alias(&mut self, flags: Flags) -> Result<(Flags, Flags)> {
        let ops = flags.difference(Flags::TRANSMIT | Flags::RECV);
        let out = match side(flags)? {
            Side::Tx if tx_defaults_ok(self.ep_type, ops) => (ops, self.rx_flags),
            Side::Rx if RX_OP_FLAGS.contains(ops) => (self.tx_flags, ops),
            _ => return Err(Errno::EINVAL),
        };
        self.aliases += 1;
        Ok(out)
    }

    /// Closes one alias made by [`Endpoint::alias`].
    pub fn alias_close(&mut self) -> Result<()> {
        self.aliases = self.aliases.checked_sub(1).ok_or(Errno::EINVAL)?;
        Ok(())
    }

    pub(crate) fn require_enabled(&self) -> Result<()> {
        match self.state {
            EpState::Enabled => Ok(()),
            EpState::Disabled => Err(Errno::EOPBADSTATE),
        }
    }
}

/// Operation flags a transmit may carry as an endpoint's defaults (FI_SETOPSFLAG,
/// fi_ep_alias). Per endpoint type, [`unsupported_tx_flags`] takes some away.
pub const TX_OP_FLAGS: Flags = Flags::INJECT
    .union(Flags::COMPLETION)
    .union(Flags::INJECT_COMPLETE)
    .union(Flags::TRANSMIT_COMPLETE)
    .union(Flags::DELIVERY_COMPLETE)
    .union(Flags::MORE)
    .union(Flags::REMOTE_CQ_DATA);

/// Transmit flags an endpoint of type `t` cannot honour: FI_FENCE (the FI_FENCE
/// capability is not offered), and the completion levels it cannot give:
/// FI_MATCH_COMPLETE (a delivered message may wait unmatched at the target),
/// FI_COMMIT_COMPLETE (no memory here is persistent) and, on a DGRAM endpoint,
/// FI_DELIVERY_COMPLETE (it applies to reliable endpoints only). fi_cq(3) lets a
/// provider reject a level it cannot give or upgrade it; these have no stronger level
/// to become, so a default carrying one is -FI_EINVAL and a transmit -FI_EBADFLAGS
/// rather than completing sooner than asked.
pub const fn unsupported_tx_flags(t: EpType) -> Flags {
    let never = Flags::FENCE
        .union(Flags::MATCH_COMPLETE)
        .union(Flags::COMMIT_COMPLETE);
    match t {
        EpType::Dgram => never.union(Flags::DELIVERY_COMPLETE),
        _ => never,
    }
}

/// Whether `ops` may be the default transmit flags of an endpoint of type `t`
/// (FI_SETOPSFLAG, fi_ep_alias).
pub const fn tx_defaults_ok(t: EpType, ops: Flags) -> bool {
    TX_OP_FLAGS.contains(ops) && !ops.intersects(unsupported_tx_flags(t))
}

/// Operation flags a receive may carry.
pub const RX_OP_FLAGS: Flags = Flags::COMPLETION
    .union(Flags::MULTI_RECV)
    .union(Flags::MORE)
    .union(Flags::PEEK)
    .union(Flags::CLAIM)
    .union(Flags::DISCARD);

enum Side {
    Tx,
    Rx,
}

fn side(flags: Flags) -> Result<Side> {
    match (flags.contains(Flags::TRANSMIT), flags.contains(Flags::RECV)) {
        (true, false) => Ok(Side::Tx),
        (false, true) => Ok(Side::Rx),
        _ => Err(Errno::EINVAL),
    }
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

    #[test]
    fn option_and_flag_codes() {
        assert_eq!(EpOpt::from_raw(0), Ok(EpOpt::MinMultiRecv));
        assert_eq!(EpOpt::from_raw(1), Ok(EpOpt::CmDataSize));
        assert_eq!(EpOpt::from_raw(77), Err(Errno::ENOPROTOOPT));
        assert!(matches!(
            side(Flags::TRANSMIT | Flags::RECV),
            Err(Errno::EINVAL)
        ));
        assert!(matches!(side(Flags::empty()), Err(Errno::EINVAL)));
    }
}
