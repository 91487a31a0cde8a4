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
//! [`Domain::progress`]: crate::domain::Domain::progress

mod auth;
mod handshake;
mod peer;
mod rx;
mod tx;

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

use peer::{Peer, WinEntry};
pub use peer::{PeerInfo, PeerState, SendInfo};

/// Sentinel for "no index" in intrusive links.
const NIL: u32 = u32::MAX;
/// Sentinel for "no reorder slot".
const NO_SLOT: u16 = u16::MAX;

/// Tunables of the reliability engine. Times are microseconds of the caller's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RdmConfig {
    /// Receive window in packets (reorder buffer per peer, announced in the handshake)
    /// and the sender's in-flight limit per peer. At most 65 is useful: the selective
    /// ack bitmap covers 64 packets beyond the cumulative ack.
    pub window: u16,
    /// Peers per endpoint (the peer table's capacity).
    pub max_peers: usize,
    /// Out-of-order packets an endpoint can hold for all its peers (`max_pkt` bytes
    /// each). Full: further out-of-order packets are dropped unacknowledged.
    pub reorder_slots: usize,
    /// Segments of buffered unexpected eager messages (`unexp_seg` bytes each, or a
    /// packet's payload where that is smaller).
    pub unexp_slots: usize,
    /// Bytes per unexpected segment at most. A packet's payload larger than this
    /// spans several segments: on a link with 64 KiB datagrams (loopback) a small
    /// unexpected message would otherwise hold 64 KiB of the buffer.
    pub unexp_seg: usize,
    /// Unexpected messages (eager or rendezvous headers) an endpoint queues.
    pub unexp_msgs: usize,
    /// Messages that can be claimed (FI_PEEK | FI_CLAIM) at once.
    pub claimed_msgs: usize,
    /// Messages up to this many bytes go eagerly, larger ones by rendezvous.
    pub eager_threshold: usize,
    /// Retransmission timeout before the first RTT sample (and of the handshake).
    pub rto_initial: Duration,
    /// Lower bound of the retransmission timeout.
    pub rto_min: Duration,
    /// Upper bound of the retransmission timeout (and of its exponential backoff).
    pub rto_max: Duration,
    /// Consecutive retransmission timeouts without any packet from the peer after which
    /// the session fails (-FI_ETIMEDOUT for every pending operation).
    pub max_retries: u32,
    /// HELLOs sent without an answer before the handshake fails (-FI_EHOSTUNREACH).
    pub hello_retries: u32,
    /// Delayed-ack timer for ordinary in-order packets (spec 5.3: at most 1 ms). A
    /// sequenced packet leaving for the peer meanwhile carries the ack instead.
    pub ack_delay: Duration,
    /// How long an in-order packet with `ACK_REQ` waits for a reply to carry its ack
    /// (spec 5.3: at most 50 µs) before a standalone ACK goes. At most `ack_delay`; 0
    /// acknowledges in the same progress pass. A peer whose last hold expired unused
    /// is acknowledged at once until it gets a reply within the hold again.
    pub ack_hold: Duration,
    /// How long a new session offered by an already-connected peer waits for its first
    /// packet before it is forgotten (spec 4.5: replayed HELLOs).
    pub handshake_timeout: Duration,
    /// Announce CRC_RX: peers protect every packet with CRC32C, and so do we. Needed
    /// on links whose integrity nothing else protects end to end.
    pub crc: bool,
    /// Send several queued small messages to a peer that takes them as one BUNDLE
    /// packet (spec 6.4): one header, sequence number and link transmission for a
    /// burst. Nothing waits for a bundle to fill; a lone message goes alone.
    pub bundle: bool,
    /// Send acknowledgements without selective acks in their 16-byte short form (spec
    /// 5.2) to peers that take it: 8 bytes less on every small message that carries
    /// one.
    pub short_ack: bool,
}

impl RdmConfig {
    /// Defaults for a LAN or a simulator: 64-packet windows, 200 µs..100 ms RTO. A session
    /// fails after 30 consecutive timeouts with nothing from the peer (about 2 s: a busy
    /// peer descheduled on a loaded host is not dead), a handshake after 20 unanswered
    /// HELLOs (about 1.4 s: peers of one job do not all start at once).
    pub const DEFAULT: RdmConfig = RdmConfig {
        window: 64,
        max_peers: 64,
        reorder_slots: 512,
        unexp_slots: 512,
        unexp_seg: 8192,
        unexp_msgs: 1024,
        claimed_msgs: 64,
        eager_threshold: 8192,
        rto_initial: Duration::from_millis(1),
        rto_min: Duration::from_micros(200),
        rto_max: Duration::from_millis(100),
        max_retries: 30,
        hello_retries: 20,
        ack_delay: Duration::from_micros(100),
        ack_hold: Duration::from_micros(25),
        handshake_timeout: Duration::from_secs(1),
        crc: true,
        bundle: true,
        short_ack: true,
    };

    /// -FI_EINVAL unless the values are usable.
    pub fn validate(&self) -> Result<()> {
        if self.window == 0
            || self.window > 1024
            || self.max_peers == 0
            || self.max_peers > u16::MAX as usize - 1
            || self.reorder_slots >= NO_SLOT as usize
            || self.unexp_seg < 64
            || self.rto_min.total_micros() == 0
            || self.rto_min > self.rto_max
            || self.ack_hold > self.ack_delay
        {
            return Err(Errno::EINVAL);
        }
        Ok(())
    }
}

impl Default for RdmConfig {
    fn default() -> Self {
        RdmConfig::DEFAULT
    }
}

/// What an RDM endpoint counted: traffic, recovery, and every packet it refused, by
/// reason. Nothing here is ever a reason to panic.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RdmStats {
    /// Packets handed to the link (retransmissions included).
    pub tx_packets: u64,
    /// Of those, single-packet messages sent by the short path a post takes when such a
    /// message is all its peer has to send (see `docs/architecture.md`).
    pub tx_express: u64,
    /// Of the packets, BUNDLEs (first transmissions; spec 6.4).
    pub tx_bundles: u64,
    /// Messages sent in BUNDLEs (first transmissions).
    pub tx_bundled_msgs: u64,
    /// Retransmissions after a timeout.
    pub tx_timeout_retransmits: u64,
    /// Fast retransmissions on selective-ack gaps.
    pub tx_fast_retransmits: u64,
    /// Retransmission timer expirations.
    pub rto_expirations: u64,
    /// Packets the link refused with an error (counted as sent and lost).
    pub tx_errors: u64,
    /// ACK packets sent (standalone acknowledgements).
    pub acks_sent: u64,
    /// Acknowledgements piggybacked on outgoing sequenced packets (flag `ACK`) instead
    /// of a packet of their own.
    pub acks_piggybacked: u64,
    /// Piggybacked acknowledgements received (processed like ACK packets).
    pub rx_acks_piggybacked: u64,
    /// Of those, the ones that came on a message and were held until the next transmit
    /// half (see `docs/architecture.md`).
    pub rx_acks_held: u64,
    /// Session packets received (after parsing).
    pub rx_packets: u64,
    /// Sequenced packets already received (dropped, re-acked).
    pub rx_duplicates: u64,
    /// Sequenced packets beyond the receive window.
    pub rx_out_of_window: u64,
    /// New sequenced packets that reached an endpoint while it closed (not acked: the
    /// sender learns the endpoint is gone rather than that the data was delivered).
    pub rx_closing: u64,
    /// Out-of-order packets held for reordering.
    pub rx_held: u64,
    /// Out-of-order packets dropped because no reorder slot was free.
    pub rx_reorder_full: u64,
    /// Packets refused for want of receive resources (back-pressure; the sender retries).
    pub rx_refused: u64,
    /// Packets for a session this endpoint does not have.
    pub rx_unknown_session: u64,
    /// Packets from a peer whose handshake is not finished yet.
    pub rx_early: u64,
    /// Packets whose ids, offsets or lengths contradict the session state.
    pub rx_protocol_errors: u64,
    /// ACKs older than one already processed, or acknowledging unsent packets.
    pub rx_bad_acks: u64,
    /// Packets without CRC from a peer that was asked to send it.
    pub rx_missing_crc: u64,
    /// Packets that have no place in a session (a DGRAM datagram sent to an RDM
    /// endpoint).
    pub rx_unsupported: u64,
    /// Handshakes refused or dropped for a missing or wrong authentication proof.
    pub auth_failures: u64,
    /// Handshake packets that were malformed for their state (wrong session, version).
    pub rx_bad_handshake: u64,
    /// HELLOs sent (retries included).
    pub hellos_sent: u64,
    /// Sessions established (as initiator or responder).
    pub sessions: u64,
    /// REJECTs sent.
    pub rejects_sent: u64,
    /// RESETs sent.
    pub resets_sent: u64,
    /// RESETs and REJECTs accepted.
    pub resets_received: u64,
    /// CLOSEs sent (one per session of a closing endpoint; retransmissions not counted).
    pub closes_sent: u64,
    /// CLOSEs processed (the peer's endpoint closed: its session then ends).
    pub closes_received: u64,
    /// Sessions that failed (timeout, reset, reject, handshake timeout).
    pub peer_failures: u64,
    /// ... of which: retransmission timeouts without an answer (-FI_ETIMEDOUT).
    pub fail_retransmit: u64,
    /// ... of which: unanswered credit or liveness probes (-FI_ETIMEDOUT).
    pub fail_probe: u64,
    /// Idle established sessions forgotten to make room in a full peer table.
    pub sessions_evicted: u64,
    /// REJECT(NO_RESOURCES) answers to our HELLO that we answered by asking again later
    /// (the peer's table was full).
    pub hello_busy: u64,
    /// Sends that went again on a new session after the peer answered
    /// RESET(UNKNOWN_SESSION) to a session it had forgotten (nothing of them was
    /// acknowledged, so nothing of them was delivered).
    pub tx_replayed: u64,
    /// Unexpected messages queued.
    pub unexpected: u64,
    /// Messages delivered to the application.
    pub rx_msgs: u64,
    /// BUNDLE packets processed (counted once per attempt that took a message).
    pub rx_bundles: u64,
    /// Messages taken from BUNDLE packets (delivered or queued unexpected).
    pub rx_bundled_msgs: u64,
    /// Messages whose sends completed.
    pub tx_msgs: u64,
}

/// The remote accesses an endpoint with `caps` serves as the target of `primary`
/// (FI_RMA or FI_ATOMIC): with it, those its FI_REMOTE_READ / FI_REMOTE_WRITE name, or
/// both when it names no direction (fi_getinfo(3)); without it none (such requests
/// are answered UNSUPPORTED).
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
type Posted<S> = PostedQueue<
    PostedRecv,
    <S as Storage>::Slice<Slot<Node<PostedRecv>>>,
    <S as Storage>::Slice<Bucket>,
>;
type Unexpected<S> =
    UnexpectedQueue<UxMsg, <S as Storage>::Slice<Slot<Node<UxMsg>>>, <S as Storage>::Slice<Bucket>>;

/// Completion levels of a send (fi_endpoint(3) op flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
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
struct TxOp {
    peer: u16,
    epoch: u32,
    prev: u32,
    next: u32,
    rndv: bool,
    iov: crate::iov::IovList,
    len: u64,
    injected: bool,
    context: u64,
    tag: Option<u64>,
    data: Option<u64>,
    msg_id: u32,
    /// Eager: bytes segmented so far. Rendezvous: DATA bytes sent so far.
    sent: u64,
    /// The first packet (segment or RTS) has been sent: the operation can no longer
    /// be cancelled and a reset fails it.
    started: bool,
    /// Eager: every segment sent. Rendezvous: RTS sent.
    initial_done: bool,
    /// Rendezvous: end of the granted range.
    granted: u64,
    /// Rendezvous: where the transfer ends (`len`, or less when the receiver truncates).
    end: u64,
    /// Rendezvous: a CTS arrived (the receiver's op id is known).
    cts_seen: bool,
    rx_op: u32,
    unacked: u32,
    undelivered: u32,
    level: Level,
    completion: bool,
    reserved: bool,
    /// The completion was written (inject-complete early, or transmit-complete).
    completed: bool,
    /// The send failed locally (its buffer could not be read): report this at the end.
    error: Option<Errno>,
    /// The peer acknowledged a packet of it or answered its RTS: it may have been
    /// delivered, so it is never sent again on another session.
    acked_any: bool,
    /// An RMA write or read: where it goes at the target (`None`: a message).
    rma: Option<RmaOp>,
}

/// The remote side and progress of an RMA operation (docs/wire-protocol.md, section 7).
#[derive(Debug, Clone, Copy)]
struct RmaOp {
    key: u64,
    addr: u64,
    read: bool,
    /// Read: bytes placed so far.
    got: u64,
    /// The target answered: a write's ATOMIC_RESP, a read's last READ_RESP or its
    /// failure. Only then does the operation complete (a failure needs the answer).
    answered: bool,
    /// An atomic operation (fi_atomic(3)): its operands wait in the op's bounce slot.
    atomic: Option<AtomicMeta>,
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
    fn kind(&self) -> TxKind {
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
    fn request_only(&self) -> bool {
        self.rndv || self.rma.is_some_and(|r| r.read || r.atomic.is_some())
    }
}

/// The target side of an RMA operation owes its initiator an answer: a write's status
/// (ATOMIC_RESP), a read's failure, or a read's data (READ_RESP segments, read from the
/// registered region as they leave).
#[derive(Debug, Clone, Copy)]
struct RmaResp {
    peer: u16,
    epoch: u32,
    /// The initiator's operation id.
    op_id: u32,
    status: u16,
    read: bool,
    key: u64,
    addr: u64,
    /// Read data to send (0: a status answer only).
    len: u64,
    sent: u64,
    unacked: u32,
    /// An atomic's original values (big-endian), `fetched_len` bytes: they cannot be
    /// read again, so the answer keeps them until acknowledged.
    fetched: [u8; crate::atomic::MAX_ATOMIC_BYTES],
    fetched_len: u8,
}

impl TxOp {
    fn all_sent(&self) -> bool {
        if self.rndv {
            self.initial_done && self.cts_seen && self.sent >= self.end
        } else {
            self.initial_done
        }
    }

    fn has_data_to_send(&self) -> bool {
        self.rndv && self.cts_seen && self.sent < self.granted.min(self.end)
    }
}

/// A posted receive (untagged or tagged; the queue knows which).
#[derive(Debug, Clone, Copy)]
struct PostedRecv {
    iov: crate::iov::IovList,
    context: u64,
    reserved: bool,
    completion: bool,
    /// FI_MULTI_RECV: the buffer's state in the multi-recv table.
    multi: Option<crate::pool::Handle<MultiBuf>>,
}

/// A multi-recv buffer: messages are carved from it until less than `min_free` is left;
/// it is released (FI_MULTI_RECV completion) once released and nothing carved from it is
/// still arriving.
#[derive(Debug, Clone, Copy)]
struct MultiBuf {
    context: u64,
    buf: IoVec,
    used: usize,
    min_free: usize,
    outstanding: u32,
    released: bool,
    reserved: bool,
    posted: Option<EntryHandle<PostedRecv>>,
}

/// What an unexpected message holds.
#[derive(Debug, Clone, Copy)]
enum UxKind {
    /// Eager: `got` bytes so far in a chain of unexpected segments starting at `first`.
    Eager { first: u32, got: u32 },
    /// Rendezvous: only the RTS.
    Rndv { rts_op: u32 },
}

/// An unexpected message (arrived before a matching receive).
#[derive(Debug, Clone, Copy)]
struct UxMsg {
    peer: u16,
    epoch: u32,
    report_src: FiAddr,
    tag: u64,
    tagged: bool,
    data: Option<u64>,
    total: u64,
    kind: UxKind,
    /// FI_PEEK | FI_CLAIM reserved it for this context.
    claimed_by: u64,
}

impl UxMsg {
    fn complete(&self) -> bool {
        match self.kind {
            UxKind::Eager { got, .. } => got as u64 == self.total,
            UxKind::Rndv { .. } => false,
        }
    }
}

/// Where an unexpected message lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UxRef {
    Untagged(EntryHandle<UxMsg>),
    Tagged(EntryHandle<UxMsg>),
    Claimed(crate::pool::Handle<UxMsg>),
}

/// A matched receive that is still receiving data (multi-segment eager or rendezvous).
#[derive(Debug, Clone, Copy)]
struct RxActive {
    peer: u16,
    epoch: u32,
    rndv: bool,
    rts_op: u32,
    iov: crate::iov::IovList,
    context: u64,
    total: u64,
    /// Bytes that will be placed: `min(total, buffer length)`.
    want: u64,
    /// Bytes arrived so far (in order).
    got: u64,
    /// Rendezvous: end of the range granted so far.
    granted: u64,
    cts_pending: bool,
    /// Start of the grant the pending CTS carries.
    cts_off: u64,
    /// Truncated rendezvous: a final CTS (len 0 at `want`) must tell the sender where
    /// the transfer ends.
    end_pending: bool,
    /// Unexpected segments holding the first `chain_len` bytes, still to be copied into
    /// the buffer by the next progress (NIL: none).
    chain: u32,
    chain_len: u32,
    /// Rendezvous being discarded (FI_DISCARD): CTS with status CANCELED, no data.
    discard: bool,
    tag: u64,
    tagged: bool,
    data: Option<u64>,
    report_src: FiAddr,
    multi: Option<crate::pool::Handle<MultiBuf>>,
    reserved: bool,
    completion: bool,
    /// A placement failed (-FI_EFAULT etc.): report it at the end.
    error: Option<Errno>,
}

/// Where an in-order eager message being assembled goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AsmTarget {
    Active(crate::pool::Handle<RxActive>),
    Unexpected(UxRef),
    /// The receive it was going to failed or was discarded: drop the rest.
    Drop,
}

/// The in-order eager message of a peer that has more segments to come.
#[derive(Debug, Clone, Copy)]
struct Asm {
    msg_id: u32,
    total: u32,
    got: u32,
    tag: Option<u64>,
    data: Option<u64>,
    target: AsmTarget,
}

/// An unsessioned reply (REJECT, RESET, KEEPALIVE echo) waiting for the link.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CtlReply {
    pub(crate) to: EpAddr,
    pub(crate) session: u32,
    pub(crate) kind: CtlKind,
}

/// Which unsessioned reply.
#[derive(Debug, Clone, Copy)]
pub(crate) enum CtlKind {
    Reject(u16),
    Reset(u16),
}

/// A small, fixed pseudo-random generator (SplitMix64): session ids, ISNs, nonces and
/// the MR key seed come from it, so a seeded domain is deterministic.
#[derive(Debug, Clone)]
pub struct Prng(u64);

impl Prng {
    /// A generator for `seed`.
    pub const fn new(seed: u64) -> Self {
        Prng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A nonzero 32-bit value (session ids).
    pub fn nonzero_u32(&mut self) -> u32 {
        loop {
            let v = self.next_u64() as u32;
            if v != 0 {
                return v;
            }
        }
    }
}

/// Where completions go: the domain lends the endpoint's CQs, counters and AV.
pub(crate) struct Ctx<'a, S: Storage> {
    pub(crate) cqs: &'a mut PoolOf<S, CqObj<S>>,
    pub(crate) cntrs: &'a mut PoolOf<S, Cntr>,
    /// The domain's AVs and the endpoint's (resolved when a message's source is
    /// looked up, not for every post and pass).
    pub(crate) avs: &'a Objects<S, AvObj<S>>,
    pub(crate) av: Option<AvHandle<S>>,
    /// The endpoint's CQ bindings, borrowed (read only when something completes).
    pub(crate) tx_cq: &'a Option<CqBinding<CqHandle<S>>>,
    pub(crate) rx_cq: &'a Option<CqBinding<CqHandle<S>>>,
    /// The endpoint's counter bindings (one reference: most passes count nothing).
    pub(crate) cntr: &'a crate::bind::CntrBindings<CntrHandle>,
    pub(crate) rm: bool,
    pub(crate) ep_context: u64,
    pub(crate) source: bool,
    /// The domain's registrations: what remote RMA accesses are checked against.
    pub(crate) mrs: Option<&'a crate::fid::MrTableOf<S>>,
    /// The endpoint's capabilities (what peers may do to its memory, see
    /// [`remote_access`]).
    pub(crate) caps: Flags,
}

impl<S: Storage> Ctx<'_, S> {
    /// The fi_addr a message from `addr` matches receives with, and the one reported
    /// as its source (FI_SOURCE).
    fn src_of(&self, addr: &EpAddr) -> (FiAddr, FiAddr) {
        let Some(av) = self.av.and_then(|a| self.avs.get(a)) else {
            return (FI_ADDR_NOTAVAIL, FI_ADDR_NOTAVAIL);
        };
        av.message_source(addr, self.source)
    }

    /// A remote access to our memory finished: its counter, and with remote CQ data a
    /// receive-CQ entry (FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA; its slot reserved
    /// by the caller through [`Ctx::rx_reserve`]).
    fn remote_event(&mut self, cntr: Option<CntrHandle>, data: Option<u64>, len: u64, kind: Flags) {
        if let Some(c) = cntr.and_then(|c| self.cntrs.get_mut(c)) {
            c.inc();
        }
        let Some(data) = data else {
            return;
        };
        let rm = self.rm;
        if let Some(cq) = self.rx_cq.as_ref().and_then(|b| self.cqs.get_mut(b.cq)) {
            let mut e = CqEntry::new(0, kind.union(Flags::REMOTE_CQ_DATA)).with_len(len as usize);
            e.data = data;
            let _ = if rm {
                cq.write_reserved(&e)
            } else {
                cq.write(&e)
            };
        }
    }

    /// The counters bound to region `mr` for `access` (FI_RMA_EVENT endpoints only):
    /// one more event each.
    fn region_event(&mut self, mr: crate::mr::MrHandle, access: Flags) {
        if !self.caps.contains(Flags::RMA_EVENT) {
            return;
        }
        let Some(mrs) = self.mrs else {
            return;
        };
        for bits in mrs.rma_counters(mr, access) {
            let found = self
                .cntrs
                .get_by_index((bits & 0xffff_ffff) as usize)
                .filter(|(h, _)| h.to_bits() == bits)
                .map(|(h, _)| h);
            if let Some(c) = found.and_then(|h| self.cntrs.get_mut(h)) {
                c.inc();
            }
        }
    }

    /// Reserves a receive-CQ slot for a completion no posted operation reserved.
    fn rx_reserve(&mut self) -> bool {
        if !self.rm {
            return true;
        }
        match self.rx_cq.as_ref().and_then(|b| self.cqs.get_mut(b.cq)) {
            Some(cq) => cq.try_reserve().is_ok(),
            // No receive CQ (an endpoint that only initiates): nothing will be
            // written, so nothing waits for room.
            None => true,
        }
    }

    fn release(&mut self, tx: bool) {
        if !self.rm {
            return;
        }
        let b = if tx { self.tx_cq } else { self.rx_cq };
        if let Some(cq) = b.as_ref().and_then(|b| self.cqs.get_mut(b.cq)) {
            cq.release();
        }
    }

    /// A send finished: counter, then the CQ entry (success only if asked for).
    fn tx_done(
        &mut self,
        context: u64,
        kind: TxKind,
        result: Result<()>,
        completion: bool,
        reserved: bool,
    ) {
        let (flags, cntr) = match kind {
            TxKind::Msg => (crate::cq::comp::SEND_MSG, self.cntr.send),
            TxKind::Tagged => (crate::cq::comp::SEND_TAGGED, self.cntr.send),
            TxKind::Write => (crate::cq::comp::RMA_WRITE, self.cntr.write),
            TxKind::Read => (crate::cq::comp::RMA_READ, self.cntr.read),
            TxKind::AtomicWrite => (crate::cq::comp::ATOMIC_WRITE, self.cntr.write),
            TxKind::AtomicRead => (crate::cq::comp::ATOMIC_READ, self.cntr.read),
        };
        if let Some(c) = cntr.and_then(|c| self.cntrs.get_mut(c)) {
            if result.is_ok() { c.inc() } else { c.inc_err() }
        }
        let rm = self.rm;
        let ep_ctx = self.ep_context;
        let Some(cq) = self.tx_cq.as_ref().and_then(|b| self.cqs.get_mut(b.cq)) else {
            return;
        };
        let reserved = rm && reserved;
        let _ = match result {
            Ok(()) if completion => {
                let e = CqEntry::new(context, flags);
                if reserved {
                    cq.write_reserved(&e)
                } else {
                    cq.write(&e)
                }
            }
            Ok(()) => {
                if reserved {
                    cq.release();
                }
                Ok(())
            }
            Err(err) => {
                let ctx = if context == 0 { ep_ctx } else { context };
                let e = CqErrEntry::new(ctx, flags, err);
                if reserved {
                    cq.write_err_reserved(&e)
                } else {
                    cq.write_err(&e)
                }
            }
        };
    }

    /// A receive finished: success, truncation (`olen` bytes dropped) or `err`.
    fn rx_done(
        &mut self,
        entry: &CqEntry,
        err: Option<Errno>,
        olen: usize,
        completion: bool,
        reserved: bool,
    ) {
        let err = match err {
            Some(e) => Some(CqErrEntry::from_entry(entry, e)),
            None if olen > 0 => Some(CqErrEntry::truncated(entry, olen)),
            None => None,
        };
        if let Some(c) = self.cntr.recv.and_then(|c| self.cntrs.get_mut(c)) {
            if err.is_some() { c.inc_err() } else { c.inc() }
        }
        let rm = self.rm;
        let ep_ctx = self.ep_context;
        let Some(cq) = self.rx_cq.as_ref().and_then(|b| self.cqs.get_mut(b.cq)) else {
            return;
        };
        let reserved = rm && reserved;
        let _ = match (err, completion) {
            (Some(mut e), _) => {
                if e.op_context == 0 {
                    e.op_context = ep_ctx;
                }
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

/// How the link took a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sent {
    /// Handed to the link (or refused with an error: counted, treated as lost).
    Yes,
    /// Not now for this destination (next hop being resolved): try this peer later.
    NotNow,
    /// The link is full: stop transmitting until the next progress call.
    LinkFull,
}

/// The transmit side of the link, as the engine needs it.
pub(crate) trait TxPort {
    /// Sends one packet of exactly `len` bytes to `dst`; `write` fills it and returns
    /// its length.
    fn send(&mut self, dst: &EpAddr, len: usize, write: impl FnOnce(&mut [u8]) -> usize) -> Sent;
    /// Whether the last send was refused because the destination cannot be reached
    /// at all (it still returned [`Sent::Yes`]: a lost packet); clears the mark.
    fn take_unreachable(&mut self) -> bool;
}

/// The reliability engine of one RDM endpoint.
pub struct Rdm<S: Storage> {
    cfg: RdmConfig,
    local: EpAddr,
    /// Largest packet we accept and send (before the peer's own limit).
    max_pkt: usize,
    /// Bytes per unexpected segment slot.
    useg: usize,
    inject_size: usize,
    auth: AuthKey,
    rng: Prng,
    epoch: u32,
    peers: S::Slice<Peer>,
    peer_index: HashIndex<S::Slice<u32>>,
    /// The slot `find_peer` found last: most packets and posts name the peer the one
    /// before did, and a compare is cheaper than the hash lookup.
    last_peer: core::cell::Cell<u32>,
    established: u32,
    /// Per peer, `wmask + 1` entries: the window rounded up to a power of two, so a
    /// sequence number finds its entry with a mask, not a division.
    win: S::Slice<WinEntry>,
    reo_idx: S::Slice<u16>,
    wmask: usize,
    /// Taken out while a held packet is being processed from it.
    reo_buf: Option<S::Slice<u8>>,
    reo_len: S::Slice<u16>,
    reo_free: S::Slice<u16>,
    reo_nfree: usize,
    ux_buf: S::Slice<u8>,
    ux_next: S::Slice<u32>,
    ux_free: u32,
    ux_nfree: usize,
    ops: PoolOf<S, TxOp>,
    bounce: S::Slice<u8>,
    posted_msg: Posted<S>,
    posted_tag: Posted<S>,
    ux_msg: Unexpected<S>,
    ux_tag: Unexpected<S>,
    claimed: PoolOf<S, UxMsg>,
    active: PoolOf<S, RxActive>,
    multis: PoolOf<S, MultiBuf>,
    /// Answers owed to RMA initiators (full: the request waits, unacknowledged).
    resps: PoolOf<S, RmaResp>,
    /// Peers with a refused head packet waiting for receive resources.
    blocked: u32,
    /// Peers with an [`Peer::ack_held`](peer::Peer) waiting.
    acks_held: u32,
    /// Something may be ready to send: the next progress should run the transmitter.
    tx_ready: bool,
    /// Peers that sends were posted to since the transmitter last ran: what
    /// [`Rdm::transmit_posted`] serves. `posted_n` past the array's length means "too
    /// many: run it all".
    posted: [u16; POSTED_PEERS],
    posted_n: u8,
    /// No peer's timer is due before this instant (a lower bound of every peer's
    /// `deadline`, lowered whenever a timer is armed): until then, and unless
    /// `tx_ready`, the transmitter has nothing to scan the peers for.
    next_scan: Instant,
    /// Receives matched to buffered unexpected data wait for a progress call (which has
    /// the application's memory) to copy it.
    copies_pending: u32,
    /// Their slots in `active`, in the order they were matched, so their completions
    /// come in that order (a ring of `active`'s capacity: `copy_head`, `copy_len`;
    /// when it overflowed, `copy_lost`, the copy pass also scans `active`).
    copy_q: S::Slice<u32>,
    copy_head: usize,
    copy_len: usize,
    copy_lost: bool,
    last_reset: Option<Instant>,
    /// Where the transmitter starts its round over the peers.
    rr: usize,
    /// One past the highest peer slot ever used: the per-pass scans (timers,
    /// transmission, deadlines) stop there instead of walking the whole table.
    peers_high: usize,
    /// The application closed the endpoint; it lingers only to re-acknowledge
    /// retransmissions of what it already took (see [`Rdm::begin_close`]).
    closing: bool,
    /// Unsessioned replies (REJECT, RESET) waiting for the link; full means dropped
    /// (they are rate-limited and the other side retries).
    ctl: [Option<CtlReply>; CTL_QUEUE],
    /// How many of `ctl` are queued (every transmit asks).
    ctl_n: u8,
    stats: RdmStats,
}

/// Unsessioned replies an endpoint can have waiting.
const CTL_QUEUE: usize = 16;

/// Peers [`Rdm::transmit_posted`] serves on their own; more posted-to peers between two
/// transmitter runs make it a whole run.
const POSTED_PEERS: usize = 4;

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
        let max_pkt = sizes.max_pkt.min(u16::MAX as usize);
        if max_pkt < wire::packet::MIN_MAX_PKT as usize {
            return Err(Errno::EINVAL);
        }
        let w = (cfg.window as usize).next_power_of_two();
        let np = cfg.max_peers;
        let mut sl = |n: usize| store.zeroed(n).ok_or(Errno::ENOMEM);
        let reo_buf = sl(cfg
            .reorder_slots
            .checked_mul(max_pkt)
            .ok_or(Errno::ENOMEM)?)?;
        let useg = wire::packet::max_msg_payload(max_pkt, false, false).min(cfg.unexp_seg);
        let ux_buf = sl(cfg.unexp_slots.checked_mul(useg).ok_or(Errno::ENOMEM)?)?;
        let bounce = sl(sizes
            .tx_size
            .checked_mul(sizes.inject_size)
            .ok_or(Errno::ENOMEM)?)?;
        let peers = store.slice(np, || Peer::EMPTY).ok_or(Errno::ENOMEM)?;
        let peer_index = HashIndex::new(store.slice(np * 2 + 1, || 0u32).ok_or(Errno::ENOMEM)?);
        let win = store
            .slice(np.checked_mul(w).ok_or(Errno::ENOMEM)?, || WinEntry::EMPTY)
            .ok_or(Errno::ENOMEM)?;
        let reo_idx = store.slice(np * w, || NO_SLOT).ok_or(Errno::ENOMEM)?;
        let wmask = w - 1;
        let reo_len = store
            .slice(cfg.reorder_slots, || 0u16)
            .ok_or(Errno::ENOMEM)?;
        let mut i = 0u16;
        let reo_free = store
            .slice(cfg.reorder_slots, || {
                i += 1;
                i - 1
            })
            .ok_or(Errno::ENOMEM)?;
        let mut j = 0u32;
        let n_ux = cfg.unexp_slots;
        let ux_next = store
            .slice(n_ux, || {
                j += 1;
                if (j as usize) < n_ux { j } else { NIL }
            })
            .ok_or(Errno::ENOMEM)?;
        let ops = Pool::new(
            store
                .slice(sizes.tx_size, || Slot::VACANT)
                .ok_or(Errno::ENOMEM)?,
        );
        let queue_buckets = |store: &mut S, n: usize| {
            store
                .slice(n.next_power_of_two() * 2, || Bucket::EMPTY)
                .ok_or(Errno::ENOMEM)
        };
        let posted_msg = PostedQueue::new(
            store
                .slice(sizes.rx_size, || Slot::VACANT)
                .ok_or(Errno::ENOMEM)?,
            queue_buckets(store, sizes.rx_size)?,
        );
        let posted_tag = PostedQueue::new(
            store
                .slice(sizes.rx_size, || Slot::VACANT)
                .ok_or(Errno::ENOMEM)?,
            queue_buckets(store, sizes.rx_size)?,
        );
        let ux_msg = UnexpectedQueue::new(
            store
                .slice(cfg.unexp_msgs, || Slot::VACANT)
                .ok_or(Errno::ENOMEM)?,
            queue_buckets(store, cfg.unexp_msgs)?,
        );
        let ux_tag = UnexpectedQueue::new(
            store
                .slice(cfg.unexp_msgs, || Slot::VACANT)
                .ok_or(Errno::ENOMEM)?,
            queue_buckets(store, cfg.unexp_msgs)?,
        );
        let claimed = Pool::new(
            store
                .slice(cfg.claimed_msgs, || Slot::VACANT)
                .ok_or(Errno::ENOMEM)?,
        );
        let active = Pool::new(
            store
                .slice(sizes.rx_size + np, || Slot::VACANT)
                .ok_or(Errno::ENOMEM)?,
        );
        let copy_q = store
            .slice(sizes.rx_size + np, || 0u32)
            .ok_or(Errno::ENOMEM)?;
        let multis = Pool::new(
            store
                .slice(sizes.rx_size, || Slot::VACANT)
                .ok_or(Errno::ENOMEM)?,
        );
        let resps = Pool::new(
            store
                .slice(sizes.rx_size.max(1), || Slot::VACANT)
                .ok_or(Errno::ENOMEM)?,
        );
        Ok(Rdm {
            cfg,
            local,
            max_pkt,
            useg,
            inject_size: sizes.inject_size,
            auth,
            rng: Prng::new(seed),
            epoch: 0,
            peers,
            peer_index,
            last_peer: core::cell::Cell::new(0),
            established: 0,
            win,
            reo_idx,
            wmask,
            reo_buf: Some(reo_buf),
            reo_len,
            reo_free,
            reo_nfree: cfg.reorder_slots,
            ux_buf,
            ux_next,
            ux_free: if n_ux > 0 { 0 } else { NIL },
            ux_nfree: n_ux,
            ops,
            bounce,
            posted_msg,
            posted_tag,
            ux_msg,
            ux_tag,
            claimed,
            active,
            multis,
            resps,
            blocked: 0,
            acks_held: 0,
            tx_ready: false,
            posted: [0; POSTED_PEERS],
            posted_n: 0,
            next_scan: Instant::ZERO,
            copies_pending: 0,
            copy_q,
            copy_head: 0,
            copy_len: 0,
            copy_lost: false,
            last_reset: None,
            rr: 0,
            peers_high: 0,
            closing: false,
            ctl: [None; CTL_QUEUE],
            ctl_n: 0,
            stats: RdmStats::default(),
        })
    }

    /// What the engine counted.
    pub fn stats(&self) -> &RdmStats {
        &self.stats
    }

    /// The engine's configuration.
    pub fn config(&self) -> &RdmConfig {
        &self.cfg
    }

    /// The state of the session with `addr`, if the peer table has it.
    pub fn peer_state(&self, addr: &EpAddr) -> Option<PeerState> {
        self.find_peer(addr).map(|i| self.peers.as_ref()[i].state)
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
        self.posted_msg.len() + self.posted_tag.len()
    }

    /// Capacity of one receive queue.
    pub fn rx_capacity(&self) -> usize {
        self.posted_msg.capacity()
    }

    /// Unexpected messages queued (both queues, claimed ones included).
    pub fn unexpected_len(&self) -> usize {
        self.ux_msg.len() + self.ux_tag.len() + self.claimed.len()
    }

    /// Out-of-order packets held right now.
    pub fn held_packets(&self) -> usize {
        self.cfg.reorder_slots - self.reo_nfree
    }

    /// Free unexpected segment slots.
    pub fn unexp_slots_free(&self) -> usize {
        self.ux_nfree
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
        let high = self.peers_high;
        for p in self.peers.as_mut().iter_mut().take(high) {
            if p.used && p.state == peer::PeerState::Established {
                if p.owes_ack() {
                    p.ack_now = true;
                    p.ack_at = None;
                }
                p.close_pending = true;
                rto = Some(rto.unwrap_or(0).max(p.rtt.rto));
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
        self.peers.as_ref()[..self.peers_high.min(self.peers.as_ref().len())]
            .iter()
            .any(|p| {
                p.used
                    && p.state == peer::PeerState::Established
                    && p.close_pending
                    && p.close_seq.is_none_or(|s| wire::seq::seq_le(p.snd_una, s))
            })
    }

    /// Something must leave at once (an acknowledgement due now, a reply, a control
    /// answer): a pass that received does not leave that to the next pass.
    pub(crate) fn tx_urgent(&self) -> bool {
        self.tx_ready || self.posted_n > 0 || self.ctl_n > 0
    }

    /// A peer timer was armed for `at`: the transmitter scans the peers by then.
    pub(super) fn arm(&mut self, at: Instant) {
        self.next_scan = self.next_scan.min(at);
    }

    /// Whether `flush_copies` or `retry_blocked` has work (a progress pass skips
    /// building their context otherwise).
    pub(crate) fn prepare_due(&self) -> bool {
        self.copies_pending > 0 || self.blocked > 0
    }

    /// The earliest time the engine needs `progress` even without traffic: at once for
    /// a flag or a post, else the transmitter's next scan (`next_scan`, kept at or
    /// below every peer's timer), in O(1) however many peers there are; `None` when no
    /// timer is armed.
    pub fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        if self.tx_ready || self.posted_n > 0 {
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
        let posted = |r: &PostedRecv| r.reserved && r.multi.is_none();
        let mut rx = self.posted_msg.iter_values().filter(|r| posted(r)).count()
            + self.posted_tag.iter_values().filter(|r| posted(r)).count();
        rx += self.multis.iter().filter(|(_, m)| m.reserved).count();
        rx += self
            .active
            .iter()
            .filter(|(_, a)| a.reserved && !a.discard)
            .count();
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
