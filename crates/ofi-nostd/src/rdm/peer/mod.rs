//! The peer table: one session per remote endpoint, with its send window, receive
//! state and timers.

mod table;

pub(super) use table::{PeerTable, Place};

use super::*;

/// Where a session with one remote endpoint is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerState {
    /// Known, no session (nothing sent yet).
    Idle,
    /// Our HELLO is out; waiting for HELLO_ACK or REJECT.
    HelloSent,
    /// Session up: sequenced packets flow both ways.
    Established,
    /// The session failed (timeout, reset, reject); the next operation re-handshakes.
    Failed,
}

/// What the peer told us in its handshake.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Params {
    pub(super) max_pkt: u16,
    pub(super) window: u16,
    pub(super) caps: u64,
}

/// A new session offered by an already-connected peer (spec 4.2/4.5): it replaces the
/// current one only when its first packet proves the peer took our HELLO_ACK.
#[derive(Debug, Clone, Copy)]
pub(super) struct Cand {
    pub(super) rx_session: u32,
    pub(super) tx_session: u32,
    pub(super) local_isn: u32,
    pub(super) remote_isn: u32,
    pub(super) params: Params,
    pub(super) credits: u32,
    pub(super) our_nonce: u64,
    pub(super) their_nonce: u64,
    pub(super) expires: Instant,
    pub(super) send_ack: bool,
}

/// RFC 6298 round-trip estimator, in microseconds.
#[derive(Debug, Clone, Copy)]
pub(super) struct Rtt {
    pub(super) srtt: u64,
    pub(super) rttvar: u64,
    pub(super) rto: u64,
    pub(super) sampled: bool,
}

impl Rtt {
    pub(super) fn new(cfg: &RdmConfig) -> Rtt {
        Rtt {
            srtt: 0,
            rttvar: 0,
            rto: cfg.rto_initial.total_micros(),
            sampled: false,
        }
    }

    pub(super) fn sample(&mut self, r: u64, cfg: &RdmConfig) {
        // A packet the receiver held back (it was blocked for want of buffers) is
        // acknowledged late without any retransmission: its sample measures the
        // receiver's queue, not the path. Let one sample at most double the estimate.
        let cap = if self.sampled {
            (2 * self.srtt).max(cfg.rto_min.total_micros())
        } else {
            cfg.rto_initial
                .total_micros()
                .max(cfg.rto_min.total_micros())
        };
        let r = r.clamp(1, cap);
        if self.sampled {
            let d = self.srtt.abs_diff(r);
            self.rttvar = (3 * self.rttvar + d) / 4;
            self.srtt = (7 * self.srtt + r) / 8;
        } else {
            self.srtt = r;
            self.rttvar = r / 2;
            self.sampled = true;
        }
        self.rto = (self.srtt + (4 * self.rttvar).max(1))
            .clamp(cfg.rto_min.total_micros(), cfg.rto_max.total_micros());
    }

    pub(super) fn backoff(&mut self, cfg: &RdmConfig) {
        self.rto = self
            .rto
            .saturating_mul(2)
            .min(cfg.rto_max.total_micros())
            .max(cfg.rto_min.total_micros());
    }
}

/// What a sequenced packet in the send window is, so it can be rebuilt for a
/// retransmission without keeping its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Regen {
    /// An eager segment of op `op` (slot index) at `off`, `len` bytes.
    Seg { op: u32, off: u64, len: u32 },
    /// The RTS of op `op`.
    Rts { op: u32 },
    /// Rendezvous DATA of op `op`.
    Data { op: u32, off: u64, len: u32 },
    /// A CTS (no operation of ours behind it).
    Cts {
        rts_op: u32,
        rx_op: u32,
        off: u64,
        len: u32,
        status: u16,
    },
    /// Our CLOSE (the endpoint is closing; nothing follows it).
    Close,
    /// An RMA target's answer without data: a write's status (ATOMIC_RESP) or a read's
    /// (READ_RESP, empty). Everything a retransmission needs is here: its `RmaResp`
    /// (in slot `slot`) is gone once the first transmission left.
    Resp {
        slot: u32,
        op_id: u32,
        status: u16,
        read: bool,
    },
    /// READ_RESP data of the `RmaResp` in slot `slot`, `len` bytes at `off` of the read
    /// (read from the registered region each time it is built).
    ReadData { slot: u32, off: u64, len: u32 },
    /// An atomic's ATOMIC_RESP with the original values the `RmaResp` in `slot` keeps.
    AtomicData { slot: u32 },
    /// A BUNDLE of the `n` single-packet messages from op `op` on, consecutive in the
    /// peer's operation list (none of them leaves it before this packet is acked).
    Bundle { op: u32, n: u16 },
}

impl Regen {
    pub(super) fn op(&self) -> Option<u32> {
        match *self {
            Regen::Seg { op, .. } | Regen::Rts { op } | Regen::Data { op, .. } => Some(op),
            Regen::Cts { .. }
            | Regen::Close
            | Regen::Resp { .. }
            | Regen::ReadData { .. }
            | Regen::AtomicData { .. } => None,
            // Several operations: every use of a bundle's entry walks them.
            Regen::Bundle { .. } => None,
        }
    }
}

/// One sequenced packet in flight.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WinEntry {
    pub(super) live: bool,
    pub(super) seq: u32,
    pub(super) regen: Regen,
    pub(super) sent_at: Instant,
    pub(super) retx: u16,
    pub(super) sacked: bool,
    /// Queued for retransmission.
    pub(super) rtx: bool,
}

impl WinEntry {
    pub(crate) const EMPTY: WinEntry = WinEntry {
        live: false,
        seq: 0,
        regen: Regen::Rts { op: 0 },
        sent_at: Instant::ZERO,
        retx: 0,
        sacked: false,
        rtx: false,
    };
}

/// One remote endpoint.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer {
    pub(super) used: bool,
    pub(super) addr: EpAddr,
    pub(super) state: PeerState,
    /// Distinguishes sessions in references held by operations and messages.
    pub(super) epoch: u32,
    pub(super) rx_session: u32,
    pub(super) tx_session: u32,
    pub(super) local_isn: u32,
    pub(super) remote_isn: u32,
    pub(super) our_nonce: u64,
    pub(super) their_nonce: u64,
    pub(super) params: Params,
    pub(super) init_credits: u32,
    /// We answered a HELLO: (re)send HELLO_ACK for the current session.
    pub(super) send_hello_ack: bool,
    pub(super) cand: Option<Cand>,
    pub(super) hello_at: Instant,
    pub(super) hello_tries: u32,
    pub(super) hello_rto: u64,
    // ---- send side
    pub(super) next_seq: u32,
    pub(super) snd_una: u32,
    pub(super) snd_limit: u32,
    pub(super) last_ack_ts: u32,
    pub(super) rtt: Rtt,
    pub(super) rto_at: Option<Instant>,
    pub(super) timeouts: u32,
    pub(super) next_msg_id: u32,
    pub(super) op_head: u32,
    pub(super) op_tail: u32,
    pub(super) cursor: u32,
    pub(super) rndv_ready: u32,
    pub(super) cts_pending: u32,
    /// RMA answers (`RmaResp`) with something still to send to this peer.
    pub(super) resp_pending: u32,
    /// The RMA write of this peer whose segments are arriving (one at a time: the
    /// sender finishes a write's segments before the next operation's), and the first
    /// failure among them.
    pub(super) wr_op: Option<(u32, u16)>,
    pub(super) probe_at: Option<Instant>,
    pub(super) rtx_pending: u32,
    // ---- receive side
    pub(super) rcv_nxt: u32,
    pub(super) held: u32,
    pub(super) rx_msg_id: u32,
    pub(super) asm: Option<Asm>,
    pub(super) ack_now: bool,
    pub(super) ack_at: Option<Instant>,
    pub(super) since_ack: u32,
    /// `rcv_nxt` as our last acknowledgement (standalone or piggybacked) announced it:
    /// with `adv_credits`, where the peer's grant ends.
    pub(super) adv_cum: u32,
    /// The armed `ack_at` is an `ACK_REQ` hold (waiting for a reply to carry the ack).
    pub(super) holding: bool,
    /// Holding pays off with this peer: it replied within the hold last time (or we
    /// have not seen otherwise). Cleared when a hold expires unused, set again when we
    /// send to the peer soon after acknowledging an `ACK_REQ` at once (as TCP's
    /// delayed-ack "pingpong" mode).
    pub(super) hold_ok: bool,
    /// When we last acknowledged an `ACK_REQ` at once because holding did not pay off.
    pub(super) req_acked_at: Option<Instant>,
    pub(super) ts_recent: u32,
    /// An acknowledgement of ours that arrived on a message and waits, with its arrival
    /// time, for the next transmit half (`Rdm::take_held_ack`): a ping-pong's reply
    /// leaves before the completions it releases are written.
    pub(super) ack_held: Option<(wire::packet::AckRepr, Instant)>,
    pub(super) blocked: bool,
    pub(super) adv_credits: u32,
    pub(super) ka_reply: bool,
    /// Rendezvous receives of this session still waiting for DATA.
    pub(super) inbound: u32,
    /// Liveness probe timer while we wait for the peer's data and send nothing.
    pub(super) live_at: Option<Instant>,
    /// Send a KEEPALIVE with ACK_REQ (liveness probe).
    pub(super) ka_probe: bool,
    /// When a valid packet last came from the peer, a send to it was posted, or its
    /// session failed: how long it has been idle, for eviction.
    pub(super) last_active: Instant,
    /// The receive session of the peer's last failed session (0: none): a late packet
    /// of it is answered RESET(RETRY_EXHAUSTED), not UNKNOWN_SESSION, so the peer does
    /// not re-send what we may have delivered.
    pub(super) failed_rx_session: u32,
    /// Our transmit session of that failed session (what the RESET names).
    pub(super) failed_tx_session: u32,
    /// The peer refused our HELLO for lack of room (REJECT(NO_RESOURCES)): we ask again
    /// until this instant, by when an idle session of its should have made room.
    pub(super) busy_until: Option<Instant>,
    /// Our endpoint is closing: send CLOSE (spec 4.7) after the sends queued before
    /// `fi_close`, and nothing after it.
    pub(super) close_pending: bool,
    /// The sequence number our CLOSE went out with: once the peer's cumulative ack
    /// passes it, the peer has every acknowledgement we owed and the linger can end.
    pub(super) close_seq: Option<u32>,
    /// The peer's CLOSE was processed: fail the session once its ACK has left.
    pub(super) closed_by_peer: bool,
}

impl Peer {
    pub(crate) const EMPTY: Peer = Peer {
        used: false,
        addr: EpAddr {
            ip: [0; 4],
            port: 0,
            ep_id: 0,
        },
        state: PeerState::Idle,
        epoch: 0,
        rx_session: 0,
        tx_session: 0,
        local_isn: 0,
        remote_isn: 0,
        our_nonce: 0,
        their_nonce: 0,
        params: Params {
            max_pkt: 0,
            window: 0,
            caps: 0,
        },
        init_credits: 0,
        send_hello_ack: false,
        cand: None,
        hello_at: Instant::ZERO,
        hello_tries: 0,
        hello_rto: 0,
        next_seq: 0,
        snd_una: 0,
        snd_limit: 0,
        last_ack_ts: 0,
        rtt: Rtt {
            srtt: 0,
            rttvar: 0,
            rto: 0,
            sampled: false,
        },
        rto_at: None,
        timeouts: 0,
        next_msg_id: 0,
        op_head: NIL,
        op_tail: NIL,
        cursor: NIL,
        rndv_ready: 0,
        cts_pending: 0,
        resp_pending: 0,
        wr_op: None,
        probe_at: None,
        rtx_pending: 0,
        rcv_nxt: 0,
        held: 0,
        rx_msg_id: 0,
        asm: None,
        ack_now: false,
        ack_at: None,
        since_ack: 0,
        adv_cum: 0,
        holding: false,
        hold_ok: true,
        req_acked_at: None,
        ts_recent: 0,
        ack_held: None,
        blocked: false,
        adv_credits: 0,
        ka_reply: false,
        inbound: 0,
        live_at: None,
        ka_probe: false,
        last_active: Instant::ZERO,
        failed_rx_session: 0,
        failed_tx_session: 0,
        busy_until: None,
        close_pending: false,
        close_seq: None,
        closed_by_peer: false,
    };

    /// Whether the peer is owed an acknowledgement (due now or on a timer).
    pub(super) fn owes_ack(&self) -> bool {
        self.ack_now || self.ack_at.is_some() || self.since_ack > 0
    }

    /// The earliest instant this peer needs the engine's attention.
    pub(super) fn deadline(&self) -> Option<Instant> {
        // Something to send now is the earliest deadline there is: no timer can beat
        // it. Otherwise the earliest armed timer, in plain integers (this runs after
        // every packet and post; `Option` minima cost several times as much).
        if let Some(c) = &self.cand
            && c.send_ack
        {
            return Some(Instant::ZERO);
        }
        let micros = |t: Option<Instant>| t.map_or(u64::MAX, Instant::total_micros);
        let mut t = self
            .cand
            .as_ref()
            .map_or(u64::MAX, |c| c.expires.total_micros());
        match self.state {
            PeerState::HelloSent => t = t.min(self.hello_at.total_micros()),
            PeerState::Established => {
                if self.ack_now
                    || self.send_hello_ack
                    || self.ka_reply
                    || self.ka_probe
                    || self.rtx_pending > 0
                {
                    return Some(Instant::ZERO);
                }
                t = t
                    .min(micros(self.rto_at))
                    .min(micros(self.ack_at))
                    .min(micros(self.probe_at))
                    .min(micros(self.live_at));
            }
            _ => {}
        }
        (t != u64::MAX).then_some(Instant::from_micros(t))
    }

    /// When a transmitter scan must look at this peer again: its [`Peer::deadline`],
    /// or `now` while it waits for data with no timer armed (the scan arms a liveness
    /// probe then).
    pub(super) fn scan_due(&self, now: Instant) -> Option<Instant> {
        let waiting = self.inbound > 0 || self.asm.is_some();
        if self.state == PeerState::Established
            && waiting
            && self.live_at.is_none()
            && self.rto_at.is_none()
            && self.probe_at.is_none()
        {
            return Some(now);
        }
        self.deadline()
    }

    /// Packets in flight (sent, not cumulatively acked).
    pub(super) fn in_flight(&self) -> u32 {
        self.next_seq.wrapping_sub(self.snd_una)
    }
}

/// A snapshot of one session, for diagnostics and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerInfo {
    /// The remote endpoint.
    pub addr: EpAddr,
    /// Session state.
    pub state: PeerState,
    /// Next sequence number to send.
    pub next_seq: u32,
    /// Oldest unacknowledged sequence number.
    pub snd_una: u32,
    /// First sequence number the peer's credits do not cover.
    pub snd_limit: u32,
    /// Packets queued for retransmission.
    pub rtx_pending: u32,
    /// Next sequence number expected from the peer.
    pub rcv_nxt: u32,
    /// Out-of-order packets held.
    pub held: u32,
    /// The in-order packet is refused for want of receive resources.
    pub blocked: bool,
    /// Send operations queued to the peer (a walk of its FIFO).
    pub ops: u32,
    /// Rendezvous sends with granted data to send.
    pub rndv_ready: u32,
    /// CTS packets waiting to be sent.
    pub cts_pending: u32,
    /// Rendezvous receives waiting for the peer's data.
    pub inbound: u32,
    /// An eager message from the peer is partly received.
    pub partial_rx: bool,
    /// Current retransmission timeout (µs).
    pub rto: u64,
    /// Consecutive timeouts without an answer.
    pub timeouts: u32,
}

/// A snapshot of one send operation, for diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SendInfo {
    /// The application's context.
    pub context: u64,
    /// The destination.
    pub peer: EpAddr,
    /// Message length.
    pub len: u64,
    /// Rendezvous (else eager).
    pub rndv: bool,
    /// Eager: bytes segmented; rendezvous: DATA bytes sent.
    pub sent: u64,
    /// Its first packet left.
    pub started: bool,
    /// Eager: all segments sent; rendezvous: RTS sent.
    pub initial_done: bool,
    /// Rendezvous: a CTS arrived; granted end; transfer end.
    pub cts: (bool, u64, u64),
    /// Packets not acknowledged / not cumulatively acknowledged.
    pub unacked: (u32, u32),
    /// Its completion was written.
    pub completed: bool,
}

impl<S: Storage> Rdm<S> {
    /// Snapshots of every unfinished send operation.
    pub fn sends(&self) -> impl Iterator<Item = SendInfo> + '_ {
        self.ops.iter().map(|(_, o)| SendInfo {
            context: o.context,
            peer: self
                .peers
                .get(o.peer as usize)
                .map_or(EpAddr::new([0; 4], 0, 0), |p| p.addr),
            len: o.len,
            rndv: o.rndv,
            sent: o.sent,
            started: o.started,
            initial_done: o.initial_done,
            cts: (o.cts_seen, o.granted, o.end),
            unacked: (o.unacked, o.undelivered),
            completed: o.completed,
        })
    }

    /// Snapshots of every session in the peer table.
    pub fn peers(&self) -> impl Iterator<Item = PeerInfo> + '_ {
        self.peers.used().map(|p| {
            let mut ops = 0;
            let mut o = p.op_head;
            while o != NIL && ops < u32::MAX {
                ops += 1;
                o = self
                    .ops
                    .get_by_index(o as usize)
                    .map_or(NIL, |(_, op)| op.next);
            }
            PeerInfo {
                addr: p.addr,
                state: p.state,
                next_seq: p.next_seq,
                snd_una: p.snd_una,
                snd_limit: p.snd_limit,
                rtx_pending: p.rtx_pending,
                rcv_nxt: p.rcv_nxt,
                held: p.held,
                blocked: p.blocked,
                ops,
                rndv_ready: p.rndv_ready,
                cts_pending: p.cts_pending,
                inbound: p.inbound,
                partial_rx: p.asm.is_some(),
                rto: p.rtt.rto,
                timeouts: p.timeouts,
            }
        })
    }

    /// The slot of `addr`, adding it (evicting an idle peer if the table is full).
    /// -FI_EAGAIN when every peer is busy.
    pub(super) fn peer_slot(&mut self, addr: &EpAddr, now: Instant) -> Result<usize> {
        let i = match self.peers.place(addr, |i| self.evictable(i, now))? {
            Place::Found(i) => return Ok(i),
            Place::Free(i) => i,
            Place::Victim(i) => {
                self.evict(i);
                i
            }
        };
        let rtt = Rtt::new(&self.cfg);
        self.peers.insert(
            i,
            Peer {
                used: true,
                addr: *addr,
                rtt,
                ..Peer::EMPTY
            },
        )?;
        Ok(i)
    }

    /// How long a peer must have been idle before its slot may be reused: longer than
    /// the peer can go on retransmitting a packet we acknowledged (its whole retry
    /// budget at the longest timeout), so nothing of it is still in flight when we
    /// forget it, and a later packet of the forgotten session is new.
    pub(super) fn idle_evict(&self) -> Duration {
        let span = self.cfg.rto_max.total_micros() * (u64::from(self.cfg.max_retries) + 2);
        Duration::from_micros(span.saturating_mul(2))
    }

    /// Whether peer `i`'s slot can be reused for another peer: nothing queued, in
    /// flight or half received with it, and, unless it never had a session, idle for
    /// [`Rdm::idle_evict`]. An established session goes silently: the peer's next
    /// packet of it is answered RESET(UNKNOWN_SESSION), and its sends of which nothing
    /// was acknowledged go again on a new session (wire protocol 4.7).
    fn evictable(&self, i: usize, now: Instant) -> bool {
        let p = &self.peers[i];
        let quiet = p.used && p.op_head == NIL && p.cand.is_none() && p.held == 0;
        if !quiet {
            return false;
        }
        let idle = now.saturating_duration_since(p.last_active) >= self.idle_evict();
        match p.state {
            PeerState::Idle => true,
            PeerState::Failed => idle,
            PeerState::Established => {
                idle && p.next_seq == p.snd_una
                    && p.inbound == 0
                    && p.asm.is_none()
                    && !p.owes_ack()
                    && p.cts_pending == 0
                    && p.resp_pending == 0
                    && p.rndv_ready == 0
                    && !p.send_hello_ack
                    && !p.ka_reply
                    && !p.ka_probe
                    && !self.has_unexpected_rndv(i)
            }
            _ => false,
        }
    }

    /// Whether a message from peer `i`'s session waits unexpected and still needs the
    /// session (a rendezvous RTS, or an eager message not complete yet). Scans the
    /// queues: only a full table asks.
    fn has_unexpected_rndv(&self, i: usize) -> bool {
        let epoch = self.peers[i].epoch;
        let needs = |m: &UxMsg| m.peer as usize == i && m.epoch == epoch && !m.complete();
        self.ux_msg.find_by(needs).is_some()
            || self.ux_tag.find_by(needs).is_some()
            || self.claimed.iter().any(|(_, m)| needs(m))
    }

    fn evict(&mut self, i: usize) {
        if self.peers[i].ack_held.take().is_some() {
            // Only an idle session is evicted: nothing in flight that it could ack.
            self.acks_held = self.acks_held.saturating_sub(1);
        }
        if self.peers[i].state == PeerState::Established {
            self.established = self.established.saturating_sub(1);
            self.stats.sessions_evicted += 1;
            let w = self.wmask + 1;
            for e in self.win.as_mut()[i * w..(i + 1) * w].iter_mut() {
                *e = WinEntry::EMPTY;
            }
        }
        self.peers.remove(i);
    }

    /// Where `seq` of peer `p` sits in the window and reorder tables (per peer a
    /// power-of-two stride, so a mask and no division).
    fn wslot(&self, p: usize, seq: u32) -> usize {
        (p * (self.wmask + 1)) | (seq as usize & self.wmask)
    }

    /// The window entry for `seq` of peer `p`.
    pub(super) fn win_mut(&mut self, p: usize, seq: u32) -> &mut WinEntry {
        let i = self.wslot(p, seq);
        &mut self.win.as_mut()[i]
    }

    pub(super) fn win_get(&self, p: usize, seq: u32) -> &WinEntry {
        &self.win.as_ref()[self.wslot(p, seq)]
    }

    /// Reorder-index entry for `seq` of peer `p`.
    pub(super) fn reo_mut(&mut self, p: usize, seq: u32) -> &mut u16 {
        let i = self.wslot(p, seq);
        &mut self.reo_idx.as_mut()[i]
    }

    pub(super) fn reo_get(&self, p: usize, seq: u32) -> u16 {
        self.reo_idx.as_ref()[self.wslot(p, seq)]
    }

    /// Credits to grant peer `p`: what the reorder pool can absorb, shared between the
    /// established peers, at most the window. Zero while its head packet is blocked.
    pub(super) fn credits_for(&self, p: usize) -> u32 {
        let peer = &self.peers[p];
        if peer.blocked {
            return 0;
        }
        // One session (the common case) needs no division: this runs for every packet.
        let (share, free_share) = match self.established {
            0 | 1 => (self.cfg.reorder_slots, self.reo_nfree.max(1)),
            n => (
                self.cfg.reorder_slots / n as usize,
                (self.reo_nfree / n as usize).max(1),
            ),
        };
        (share.min(free_share + peer.held as usize).max(1) as u32).min(self.cfg.window as u32)
    }

    /// Starts a fresh session attempt with peer `p` as initiator.
    pub(super) fn start_hello(&mut self, p: usize, now: Instant) {
        let rx_session = self.rng.nonzero_u32();
        let isn = self.rng.next_u64() as u32;
        let nonce = self.rng.next_u64();
        let epoch = self.next_epoch();
        let rto = self.cfg.rto_initial.total_micros();
        let peer = &mut self.peers[p];
        peer.state = PeerState::HelloSent;
        peer.epoch = epoch;
        peer.rx_session = rx_session;
        peer.tx_session = 0;
        peer.local_isn = isn;
        peer.our_nonce = nonce;
        peer.hello_at = now;
        peer.hello_tries = 0;
        peer.hello_rto = rto;
        peer.send_hello_ack = false;
        self.tx_ready = true;
        // Ops already queued belong to the new session.
        let mut o = peer.op_head;
        while o != NIL {
            let Some(op) = self.ops.get_mut_by_index(o as usize) else {
                break;
            };
            op.epoch = epoch;
            o = op.next;
        }
    }

    /// Installs a session: our side `rx_session`/`local_isn`, theirs from the handshake.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn install_session(
        &mut self,
        p: usize,
        rx_session: u32,
        tx_session: u32,
        local_isn: u32,
        remote_isn: u32,
        params: Params,
        credits: u32,
        now: Instant,
    ) {
        let was = self.peers[p].state;
        if was != PeerState::Established {
            self.established += 1;
        }
        let keep_epoch = was == PeerState::HelloSent;
        let epoch = if keep_epoch {
            self.peers[p].epoch
        } else {
            self.next_epoch()
        };
        let window = self.cfg.window;
        let init_credits = self.credits_for(p);
        let peer = &mut self.peers[p];
        peer.state = PeerState::Established;
        peer.epoch = epoch;
        peer.rx_session = rx_session;
        peer.tx_session = tx_session;
        peer.local_isn = local_isn;
        peer.remote_isn = remote_isn;
        peer.params = params;
        peer.next_seq = local_isn;
        peer.snd_una = local_isn;
        let lim = (credits.min(params.window as u32)).min(window as u32);
        peer.snd_limit = local_isn.wrapping_add(lim);
        peer.last_ack_ts = 0;
        peer.rto_at = None;
        peer.timeouts = 0;
        peer.next_msg_id = 0;
        peer.rx_msg_id = 0;
        peer.rcv_nxt = remote_isn;
        peer.asm = None;
        peer.ack_now = false;
        peer.ack_at = None;
        peer.since_ack = 0;
        peer.adv_cum = remote_isn;
        peer.holding = false;
        peer.hold_ok = true;
        peer.req_acked_at = None;
        peer.blocked = false;
        peer.adv_credits = init_credits;
        peer.probe_at = None;
        peer.rtx_pending = 0;
        peer.inbound = 0;
        peer.live_at = None;
        peer.ka_probe = false;
        peer.close_seq = None;
        peer.closed_by_peer = false;
        peer.cursor = peer.op_head;
        if !keep_epoch {
            // Operations queued while no session existed join this one.
            let mut o = peer.op_head;
            while o != NIL {
                let Some(op) = self.ops.get_mut_by_index(o as usize) else {
                    break;
                };
                op.epoch = epoch;
                o = op.next;
            }
        }
        self.stats.sessions += 1;
        self.tx_ready = true;
        let _ = now;
    }
}
