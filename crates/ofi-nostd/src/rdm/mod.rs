//! The sans-IO reliable-datagram engine of FI_EP_RDM endpoints (docs/wire-protocol.md,
//! sections 4-6).
//!
//! One [`Rdm`] per RDM endpoint. It owns a fixed peer table (one session per remote
//! endpoint, established lazily by the first operation to it), per-peer send windows of
//! regenerable packet descriptors (packets are never copied for retransmission: their
//! bytes are rebuilt from the operation), per-peer receive state (cumulative ack, a
//! reorder index into one shared pool of held packets, selective acks, credits), the
//! posted and unexpected queues of untagged and tagged receives, and rendezvous state.
//!
//! It never reads a clock and never touches a device: the domain passes `now`, hands it
//! parsed packets, and lends it a transmit port during [`Domain::progress`]. Every
//! buffer comes from the domain's [`Storage`]; nothing allocates and no network input
//! can make it panic.
//!
//! Its state lives in owned parts with their own methods and tests, as quinn-proto's
//! `Connection` keeps its packet spaces and paths:
//! - `peer`: the `PeerTable` (slots, address index, eviction order) and a
//!   `Peer` as its `Session`, `SendHalf` (sequence numbers, credits, RTT estimator,
//!   operation FIFO) and `RecvHalf` (in-order delivery, held packets, the ack owed);
//! - `window`: the send windows (`SendWindow`, one regeneration record per packet
//!   in flight); `reorder`: held out-of-order packets; `segs`: the bytes of
//!   unexpected messages; `queues`: the copy, control-reply and posted-peer queues;
//! - `recv_queues`: the matching state (`RecvQueues`: posted and unexpected queues of
//!   untagged and tagged receives, claimed messages, multi-recv buffers);
//!   `active`: the receives being filled (`ActiveRecvs`, with their copy queue);
//! - `op`: the records of operations in progress; `ctx`: what the domain lends.
//!
//! The code that drives them is split by feature: `tx` (the transmitter, with
//! posting, the short path and bundles, the planner and what rendezvous, RMA and
//! atomic packets commit, acknowledgements, timers and failure as children), `rx` (sequencing, with messages, rendezvous, RMA, atomics,
//! unexpected messages and posting receives as children) and `handshake`.
//!
//! [`Domain::progress`]: crate::domain::Domain::progress

mod active;
mod auth;
mod close_ctx;
mod config;
mod cookie;
mod ctx;
mod handshake;
#[cfg(feature = "auth-mac")]
mod mac;
#[cfg(not(feature = "auth-mac"))]
#[path = "mac_off.rs"]
mod mac;
mod op;
mod peer;
mod prng;
mod queues;
mod recv_queues;
mod reorder;
mod rx;
mod sack;
mod segs;
mod tx;
mod window;

#[cfg(test)]
mod tests;

use crate::addr::EpAddr;
use crate::bind::CqBinding;
use crate::cntr::Cntr;
use crate::cq::{CqEntry, CqErrEntry};
use crate::errno::{Errno, Result};
use crate::fid::{AvHandle, AvObj, CntrHandle, CqHandle, CqObj, Objects};
use crate::flags::{FI_ADDR_NOTAVAIL, FiAddr, Flags};
use crate::hash::HashIndex;
use crate::info::AuthKey;
use crate::matching::{Bucket, EntryHandle, Node, PostedQueue, UnexpectedQueue};
use crate::mem::{IoVec, Memory};
use crate::pool::{Pool, Slot};
use crate::storage::Storage;
use crate::time::{Duration, Instant};

use active::ActiveRecvs;
pub use config::{EpFault, MAX_RX_WINDOW, RdmConfig, RdmStats};
#[cfg(feature = "shared-ctx")]
pub(crate) use ctx::SrxOffer;
pub(crate) use ctx::{Ctx, Sent, TxPort};
#[cfg(feature = "atomic")]
pub(crate) use op::AtomicMeta;
use op::*;
pub(crate) use op::{AtomicReq, RecvReq, SendReq, TxKind};
use peer::{Peer, PeerTable};
pub use peer::{PeerInfo, PeerState, SendInfo};
pub use prng::Prng;
use queues::{CopyQueue, CtlQueue, PostedPeers};
pub(crate) use queues::{CtlKind, CtlReply};
use recv_queues::RecvQueues;
use reorder::ReorderBuf;
use segs::SegPool;
use window::{Regen, SendWindow};

/// Sentinel for "no index" in intrusive links.
const NIL: u32 = u32::MAX;
/// Sentinel for "no reorder slot".
const NO_SLOT: u16 = u16::MAX;

/// The remote accesses an endpoint with `caps` serves as the target of `primary`
/// (FI_RMA or FI_ATOMIC): with it, those its FI_REMOTE_READ / FI_REMOTE_WRITE name, or
/// both when it names no direction (fi_getinfo(3)); without it none (such requests
/// are answered UNSUPPORTED).
#[cfg(feature = "rma")]
pub(crate) fn remote_access(caps: Flags, primary: Flags) -> Flags {
    if !caps.contains(primary) {
        return Flags::empty();
    }
    let remote = Flags::REMOTE_READ | Flags::REMOTE_WRITE;
    if caps.intersects(Flags::READ | Flags::WRITE | remote) {
        caps & remote
    } else {
        remote
    }
}

/// Pool type over storage `S`.
pub(crate) type PoolOf<S, T> = Pool<T, <S as Storage>::Slice<Slot<T>>>;

/// The reliability engine of one RDM endpoint.
pub struct Rdm<S: Storage> {
    cfg: RdmConfig,
    local: EpAddr,
    /// Largest packet we accept and send (before the peer's own limit).
    max_pkt: usize,
    inject_size: usize,
    auth: AuthKey,
    /// The secret of our stateless-handshake cookies.
    cookie_key: cookie::CookieKey,
    /// Per-packet MACs under the auth key (spec 4.10).
    mac: mac::MacState<S>,
    rng: Prng,
    epoch: u32,
    peers: PeerTable<S>,
    established: u32,
    /// Every peer's send window.
    win: SendWindow<S>,
    /// Out-of-order packets held, and where.
    reo: ReorderBuf<S>,
    /// The bytes of unexpected eager messages.
    segs: SegPool<S>,
    ops: PoolOf<S, TxOp>,
    bounce: S::Slice<u8>,
    /// Posted and unexpected receives, claimed messages, multi-recv buffers.
    recv: RecvQueues<S>,
    /// Receives being filled, and which wait for buffered data to be copied.
    active: ActiveRecvs<S>,
    /// Answers owed to RMA initiators (full: the request waits, unacknowledged).
    resps: PoolOf<S, RmaResp>,
    /// Peers with a refused head packet waiting for receive resources.
    blocked: u32,
    /// Peers with a held acknowledgement (`SendHalf::ack_held`) waiting.
    acks_held: u32,
    /// Something may be ready to send: the next progress should run the transmitter.
    tx_ready: bool,
    /// Peers that sends were posted to since the transmitter last ran: what
    /// [`Rdm::transmit_posted`] serves.
    posted: PostedPeers,
    /// No peer's timer is due before this instant (a lower bound of every peer's
    /// `deadline`, lowered whenever a timer is armed): until then, and unless
    /// `tx_ready`, the transmitter has nothing to scan the peers for.
    next_scan: Instant,
    last_reset: Option<Instant>,
    /// Where the transmitter starts its round over the peers.
    rr: usize,
    /// The application closed the endpoint; it lingers only to re-acknowledge
    /// retransmissions of what it already took (see [`Rdm::begin_close`]).
    closing: bool,
    /// Unsessioned replies (REJECT, RESET) waiting for the link.
    ctl: CtlQueue,
    stats: RdmStats,
    /// Failures nothing else reported (see [`EpFault`]).
    fault: Option<EpFault>,
    /// A failure was recorded since [`Rdm::take_fault_wakeup`] last asked.
    fault_wakeup: bool,
}

/// `next_scan` when no peer has a timer armed.
pub(super) const NEVER: Instant = Instant::from_micros(u64::MAX);

/// Sizes of an RDM endpoint's queues.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RdmSizes {
    pub(crate) tx_size: usize,
    pub(crate) rx_size: usize,
    pub(crate) inject_size: usize,
    pub(crate) max_pkt: usize,
}

impl<S: Storage> Rdm<S> {
    /// An engine for the endpoint at `local`, its buffers from `store`.
    pub(crate) fn new(
        store: &mut S,
        cfg: RdmConfig,
        sizes: RdmSizes,
        local: EpAddr,
        auth: AuthKey,
        seed: u64,
    ) -> Result<Self> {
        cfg.validate()?;
        // With a key every datagram carries a MAC trailer after `len`: announce and
        // send packets that leave room for it, so datagrams still fit the link.
        let trailer = if auth.is_empty() || !cfg!(feature = "auth-mac") {
            0
        } else {
            wire::packet::mac::TRAILER_LEN
        };
        let max_pkt = sizes.max_pkt.min(u16::MAX as usize).saturating_sub(trailer);
        if max_pkt < wire::packet::MIN_MAX_PKT as usize {
            return Err(Errno::EINVAL);
        }
        let np = cfg.max_peers;
        // Both tables cover the span, not just the packets outstanding.
        let window = cfg.span() as usize;
        let reo = ReorderBuf::new(store, cfg.reorder_slots, max_pkt, np, window)?;
        let useg = wire::packet::max_msg_payload(max_pkt, false, false).min(cfg.unexp_seg);
        let segs = SegPool::new(store, cfg.unexp_slots, useg)?;
        let bounce = store
            .zeroed(
                sizes
                    .tx_size
                    .checked_mul(sizes.inject_size)
                    .ok_or(Errno::ENOMEM)?,
            )
            .ok_or(Errno::ENOMEM)?;
        let peers = PeerTable::new(store, np)?;
        let mac = mac::MacState::new(store, &auth, np)?;
        let win = SendWindow::new(store, np, window)?;
        let ops = Pool::new(
            store
                .slice(sizes.tx_size, || Slot::VACANT)
                .ok_or(Errno::ENOMEM)?,
        );
        let recv = RecvQueues::new(store, sizes.rx_size, cfg.unexp_msgs, cfg.claimed_msgs)?;
        let active = ActiveRecvs::new(store, sizes.rx_size + np)?;
        let resps = Pool::new(
            store
                .slice(sizes.rx_size.max(1), || Slot::VACANT)
                .ok_or(Errno::ENOMEM)?,
        );
        Ok(Rdm {
            cfg,
            local,
            max_pkt,
            inject_size: sizes.inject_size,
            auth,
            cookie_key: cookie::CookieKey::from_seed(seed),
            mac,
            rng: Prng::new(seed),
            epoch: 0,
            peers,
            established: 0,
            win,
            reo,
            segs,
            ops,
            bounce,
            recv,
            active,
            resps,
            blocked: 0,
            acks_held: 0,
            tx_ready: false,
            posted: PostedPeers::new(),
            next_scan: Instant::ZERO,
            last_reset: None,
            rr: 0,
            closing: false,
            ctl: CtlQueue::new(),
            stats: RdmStats::default(),
            fault: None,
            fault_wakeup: false,
        })
    }

    /// What the engine counted.
    pub fn stats(&self) -> &RdmStats {
        &self.stats
    }

    /// The session failures since the last call that failed no operation (and were no
    /// peer's graceful close), for the endpoint's EQ.
    pub fn take_fault(&mut self) -> Option<EpFault> {
        self.fault.take()
    }

    /// Whether a failure was recorded (see [`Rdm::take_fault`]) since the last call:
    /// what wakes a waiter on the endpoint's EQ, once per failure.
    pub fn take_fault_wakeup(&mut self) -> bool {
        core::mem::take(&mut self.fault_wakeup)
    }

    /// The engine's configuration.
    pub fn config(&self) -> &RdmConfig {
        &self.cfg
    }

    /// The state of the session with `addr`, if the peer table has it.
    pub fn peer_state(&self, addr: &EpAddr) -> Option<PeerState> {
        self.peers.find(addr).map(|i| self.peers[i].state)
    }

    /// Send operations not yet finished (`tx_size` minus this is `fi_tx_size_left`).
    pub fn tx_in_use(&self) -> usize {
        self.ops.len()
    }

    /// Capacity of the send queue.
    pub fn tx_capacity(&self) -> usize {
        self.ops.capacity()
    }

    /// Posted receives (both queues).
    pub fn rx_in_use(&self) -> usize {
        self.recv.posted_len()
    }

    /// Capacity of one receive queue.
    pub fn rx_capacity(&self) -> usize {
        self.recv.posted_capacity()
    }

    /// Unexpected messages queued (both queues, claimed ones included).
    pub fn unexpected_len(&self) -> usize {
        self.recv.unexpected_len()
    }

    /// Out-of-order packets held right now.
    pub fn held_packets(&self) -> usize {
        self.cfg.reorder_slots - self.reo.free_slots()
    }

    /// Free unexpected segment slots.
    pub fn unexp_slots_free(&self) -> usize {
        self.segs.free_slots()
    }

    /// The application closes the endpoint: every acknowledgement it owes becomes due
    /// now, and from here on it takes no new packet (they go unacknowledged) but still
    /// re-acknowledges retransmissions of what it took, in case its last ACK was lost
    /// (the TIME_WAIT of TCP). Returns until when the caller should keep running
    /// progress passes for that: eight retransmission timeouts of its slowest session,
    /// at least `rto_max` and at most twice it (100-200 ms with the defaults); `None`
    /// without sessions.
    pub(crate) fn begin_close(&mut self, now: Instant) -> Option<Instant> {
        self.closing = true;
        let mut rto = None;
        for p in self.peers.active_mut() {
            // No CLOSE to an address that never proved it receives (spec 4.2).
            if p.used && p.state == peer::PeerState::Established && p.session.confirmed {
                if p.rx.owes_ack() {
                    p.rx.ack_now = true;
                    p.rx.ack_at = None;
                }
                p.session.close_pending = true;
                rto = Some(rto.unwrap_or(0).max(p.tx.rtt.rto));
            }
        }
        self.tx_ready = true;
        // The peer retransmits on *its* timer, which its own losses may have backed off
        // far beyond our RTO (measured on our packets): linger at least `rto_max`, the
        // longest any peer waits between retransmissions, so a lost last ACK meets at
        // least one retransmission.
        let max = self.cfg.rto_max.total_micros();
        rto.map(|r| now + Duration::from_micros(r.saturating_mul(8).clamp(max, 2 * max)))
    }

    /// Whether a closing endpoint still needs progress passes: some session has not yet
    /// acknowledged our CLOSE (past its sequence number, so the peer also has every
    /// acknowledgement before it). Sessions that failed or were reset meanwhile do not
    /// count. The caller stops at the instant [`Rdm::begin_close`] returned anyway.
    pub(crate) fn lingering(&self) -> bool {
        self.peers.active().iter().any(|p| {
            p.used
                && p.state == peer::PeerState::Established
                && p.session.close_pending
                && p.session
                    .close_seq
                    .is_none_or(|s| wire::seq::seq_le(p.tx.snd_una, s))
        })
    }

    /// Something must leave at once (an acknowledgement due now, a reply, a control
    /// answer): a pass that received does not leave that to the next pass.
    pub(crate) fn tx_urgent(&self) -> bool {
        self.tx_ready || !self.posted.is_empty() || !self.ctl.is_empty()
    }

    /// Watches the peer at `addr` (the one peer of a connected endpoint): its session
    /// starts now if none was ever started, and it is probed for liveness while idle
    /// too, so its death fails the session (and the connection sees FI_SHUTDOWN)
    /// within the retry budget. A failed session is left failed. No-op when the peer
    /// table has no room.
    pub(crate) fn watch(&mut self, addr: &EpAddr, now: Instant) {
        if self.peers.find(addr).is_some_and(|i| self.peers[i].watched) {
            return;
        }
        let Ok(p) = self.peer_slot(addr, now) else {
            return;
        };
        self.peers[p].watched = true;
        if self.peers[p].state == PeerState::Idle {
            self.start_hello(p, now);
        }
        self.arm(Instant::ZERO);
        self.tx_ready = true;
    }

    /// A peer timer was armed for `at`: the transmitter scans the peers by then.
    pub(super) fn arm(&mut self, at: Instant) {
        self.next_scan = self.next_scan.min(at);
    }

    /// Whether `flush_copies` or `retry_blocked` has work (a progress pass skips
    /// building their context otherwise).
    pub(crate) fn prepare_due(&self) -> bool {
        self.active.copies_pending() || self.blocked > 0
    }

    /// The earliest time the engine needs `progress` even without traffic: at once for
    /// a flag or a post, else the transmitter's next scan (`next_scan`, kept at or
    /// below every peer's timer), in O(1) however many peers there are; `None` when no
    /// timer is armed.
    pub fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        // Copies of unexpected data into receives matched since the last pass, too:
        // the next pass finishes them whatever else is due.
        if self.tx_ready || !self.posted.is_empty() || self.active.copies_pending() {
            return Some(now);
        }
        (self.next_scan != NEVER).then_some(self.next_scan)
    }

    pub(crate) fn set_local(&mut self, local: EpAddr) {
        self.local = local;
    }

    /// CQ reservations held by unfinished operations: (transmit, receive). An endpoint
    /// closing gives them back.
    pub(crate) fn reservations(&self) -> (usize, usize) {
        let tx = self
            .ops
            .iter()
            .filter(|(_, o)| o.reserved && !o.completed)
            .count();
        let rx = self.recv.reserved() + self.active.reserved();
        (tx, rx)
    }

    // ---- small shared helpers ----------------------------------------------------------

    fn next_epoch(&mut self) -> u32 {
        self.epoch = self.epoch.wrapping_add(1).max(1);
        self.epoch
    }

    fn bounce_of(&self, idx: usize, len: usize) -> &[u8] {
        let start = idx * self.inject_size;
        self.bounce.as_ref().get(start..start + len).unwrap_or(&[])
    }
}

/// Copies `data` into the buffers `iov` of the operation posted with context `ctx`,
/// starting at message offset `off`; bytes beyond the buffers are dropped. Returns how
/// many were placed.
fn iov_write(
    mem: &mut impl Memory,
    ctx: u64,
    iov: &[IoVec],
    off: u64,
    data: &[u8],
) -> Result<usize> {
    let mut base = 0u64;
    let mut done = 0usize;
    for v in iov {
        let end = base + v.len as u64;
        let pos = off + done as u64;
        if done < data.len() && pos < end && pos >= base {
            let within = (pos - base) as usize;
            let n = (v.len - within).min(data.len() - done);
            mem.write_op(ctx, v.addr + within as u64, &data[done..done + n])?;
            done += n;
        }
        base = end;
        if done == data.len() {
            break;
        }
    }
    Ok(done)
}

/// Copies message bytes `off .. off + out.len()` of the buffers `iov` of the operation
/// posted with context `ctx` into `out`.
fn iov_read(mem: &impl Memory, ctx: u64, iov: &[IoVec], off: u64, out: &mut [u8]) -> Result<()> {
    let mut base = 0u64;
    let mut done = 0usize;
    for v in iov {
        let end = base + v.len as u64;
        let pos = off + done as u64;
        if done < out.len() && pos < end && pos >= base {
            let within = (pos - base) as usize;
            let n = (v.len - within).min(out.len() - done);
            mem.read_op(ctx, v.addr + within as u64, &mut out[done..done + n])?;
            done += n;
        }
        base = end;
        if done == out.len() {
            return Ok(());
        }
    }
    if done == out.len() {
        Ok(())
    } else {
        Err(Errno::EFAULT)
    }
}

/// Microseconds of `t`, truncated to 32 bits (the wire's timestamps).
fn ts32(t: Instant) -> u32 {
    t.total_micros() as u32
}

/// A packed 32-bit operation id: slot index in the low half, generation in the high.
fn op_id(index: usize, generation: u32) -> u32 {
    ((generation & 0xFFFF) << 16) | (index as u32 & 0xFFFF)
}

/// The generation part of a handle as [`op_id`] packs it.
fn gen16<T>(h: crate::pool::Handle<T>) -> u32 {
    ((h.to_bits() >> 32) as u32) & 0xFFFF
}
