//! Peers: one per remote endpoint, as its session (`session`), its send half (`send`)
//! and its receive half (`recv`), kept in the peer table (`table`); and what the engine
//! does to a peer as a whole (adding and evicting it, starting and installing
//! sessions, snapshots for diagnostics).

mod recv;
mod send;
mod session;
mod table;

pub(super) use recv::RecvHalf;
pub(super) use send::{RtoRecovery, Rtt, SendHalf};
pub(super) use session::{Cand, Params, Session};
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

/// One remote endpoint.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Peer {
    /// The slot holds a peer.
    pub(super) used: bool,
    /// The remote endpoint.
    pub(super) addr: EpAddr,
    /// Where the session is.
    pub(super) state: PeerState,
    /// When a valid packet last came from the peer, a send to it was posted, or its
    /// session failed: how long it has been idle, for eviction.
    pub(super) last_active: Instant,
    /// Ids, ISNs, nonces, the peer's parameters and the handshake.
    pub(super) session: Session,
    /// The send half.
    pub(super) tx: SendHalf,
    /// The receive half.
    pub(super) rx: RecvHalf,
    /// Probed for liveness even with nothing to wait for: the peer of a connected
    /// (FI_EP_MSG) endpoint, whose death must end the connection (FI_SHUTDOWN).
    pub(super) watched: bool,
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
        last_active: Instant::ZERO,
        session: Session::EMPTY,
        tx: SendHalf::EMPTY,
        rx: RecvHalf::EMPTY,
        watched: false,
    };

    /// The peer's own part of the eviction rule ([`Rdm::peer_slot`]): nothing queued,
    /// offered, held, in flight, half received or owed with it, and, unless it never
    /// had a session, idle (silent, or failed) for `idle` by `now`. The engine adds
    /// that no unexpected message of the session still needs it.
    pub(super) fn evictable(&self, now: Instant, idle: Duration) -> bool {
        let quiet =
            self.used && self.tx.op_head == NIL && self.session.cand.is_none() && self.rx.held == 0;
        if !quiet {
            return false;
        }
        let idle = now.saturating_duration_since(self.last_active) >= idle;
        match self.state {
            PeerState::Idle => true,
            PeerState::Failed => idle,
            PeerState::Established => {
                idle && self.tx.next_seq == self.tx.snd_una
                    && self.rx.inbound == 0
                    && self.rx.asm.is_none()
                    && !self.rx.owes_ack()
                    && self.tx.cts_pending == 0
                    && self.tx.resp_pending == 0
                    && self.tx.rndv_ready == 0
                    && !self.session.send_hello_ack
                    && !self.rx.ka_reply
                    && !self.tx.ka_probe
            }
            _ => false,
        }
    }

    /// The earliest instant this peer needs the engine's attention.
    pub(super) fn deadline(&self) -> Option<Instant> {
        // Something to send now is the earliest deadline there is: no timer can beat
        // it. Otherwise the earliest armed timer, in plain integers (this runs after
        // every packet and post; `Option` minima cost several times as much).
        if let Some(c) = &self.session.cand
            && c.send_ack
        {
            return Some(Instant::ZERO);
        }
        let micros = |t: Option<Instant>| t.map_or(u64::MAX, Instant::total_micros);
        let mut t = self
            .session
            .cand
            .as_ref()
            .map_or(u64::MAX, |c| c.expires.total_micros());
        match self.state {
            PeerState::HelloSent => t = t.min(self.session.hello_at.total_micros()),
            PeerState::Established => {
                if self.rx.ack_now
                    || self.session.send_hello_ack
                    || self.rx.ka_reply
                    || self.tx.ka_probe
                    || self.tx.rtx_pending > 0
                {
                    return Some(Instant::ZERO);
                }
                t = t
                    .min(micros(self.tx.rto_at))
                    .min(micros(self.rx.ack_at))
                    .min(micros(self.tx.probe_at))
                    .min(micros(self.tx.live_at));
            }
            _ => {}
        }
        (t != u64::MAX).then_some(Instant::from_micros(t))
    }

    /// When a transmitter scan must look at this peer again: its [`Peer::deadline`],
    /// or `now` while it waits for data with no timer armed (the scan arms a liveness
    /// probe then).
    pub(super) fn scan_due(&self, now: Instant) -> Option<Instant> {
        let waiting = self.rx.inbound > 0 || self.rx.asm.is_some() || self.watched;
        if self.state == PeerState::Established
            && waiting
            && self.tx.live_at.is_none()
            && self.tx.rto_at.is_none()
            && self.tx.probe_at.is_none()
        {
            return Some(now);
        }
        self.deadline()
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
    /// Packets outstanding: in flight, less those selectively acknowledged and those
    /// queued for retransmission (what the window limits).
    pub pipe: u32,
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
            let mut o = p.tx.op_head;
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
                next_seq: p.tx.next_seq,
                snd_una: p.tx.snd_una,
                snd_limit: p.tx.snd_limit,
                rtx_pending: p.tx.rtx_pending,
                pipe: p.tx.pipe(),
                rcv_nxt: p.rx.rcv_nxt,
                held: p.rx.held,
                blocked: p.rx.blocked,
                ops,
                rndv_ready: p.tx.rndv_ready,
                cts_pending: p.tx.cts_pending,
                inbound: p.rx.inbound,
                partial_rx: p.rx.asm.is_some(),
                rto: p.tx.rtt.rto,
                timeouts: p.tx.timeouts,
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
                tx: SendHalf {
                    rtt,
                    ..SendHalf::EMPTY
                },
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
        p.evictable(now, self.idle_evict())
            && (p.state != PeerState::Established || !self.has_unexpected_rndv(i))
    }

    /// Whether a message from peer `i`'s session waits unexpected and still needs the
    /// session (a rendezvous RTS, or an eager message not complete yet). Scans the
    /// queues: only a full table asks.
    fn has_unexpected_rndv(&self, i: usize) -> bool {
        let epoch = self.peers[i].session.epoch;
        self.recv.needing_session(i, epoch).is_some()
    }

    fn evict(&mut self, i: usize) {
        if self.peers[i].tx.ack_held.take().is_some() {
            // Only an idle session is evicted: nothing in flight that it could ack.
            self.acks_held = self.acks_held.saturating_sub(1);
        }
        if self.peers[i].state == PeerState::Established {
            self.established = self.established.saturating_sub(1);
            self.stats.sessions_evicted += 1;
            self.win.clear(i);
        }
        self.peers.remove(i);
    }

    /// Credits to grant peer `p`: what the reorder pool can absorb, shared between the
    /// established peers, at most the window. Zero while its head packet is blocked.
    pub(super) fn credits_for(&self, p: usize) -> u32 {
        let peer = &self.peers[p];
        if peer.rx.blocked {
            return 0;
        }
        // One session (the common case) needs no division: this runs for every packet.
        let (share, free_share) = match self.established {
            0 | 1 => (self.cfg.reorder_slots, self.reo.free_slots().max(1)),
            n => (
                self.cfg.reorder_slots / n as usize,
                (self.reo.free_slots() / n as usize).max(1),
            ),
        };
        (share.min(free_share + peer.rx.held as usize).max(1) as u32).min(self.cfg.span() as u32)
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
        peer.session.epoch = epoch;
        peer.session.rx_session = rx_session;
        peer.session.tx_session = 0;
        peer.session.local_isn = isn;
        peer.session.our_nonce = nonce;
        peer.session.hello_at = now;
        peer.session.hello_tries = 0;
        peer.session.hello_rto = rto;
        peer.session.send_hello_ack = false;
        peer.session.cookie = None;
        peer.session.key_refused = false;
        self.tx_ready = true;
        // Ops already queued belong to the new session.
        let head = peer.tx.op_head;
        self.join_session(head, epoch);
    }

    /// The operations linked from `head` on belong to the session of `epoch`.
    fn join_session(&mut self, head: u32, epoch: u32) {
        let mut o = head;
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
            self.peers[p].session.epoch
        } else {
            self.next_epoch()
        };
        let window = self.cfg.span();
        let params = sack::negotiated(params);
        let init_credits = self.credits_for(p);
        let peer = &mut self.peers[p];
        peer.state = PeerState::Established;
        peer.session.epoch = epoch;
        peer.session.rx_session = rx_session;
        peer.session.tx_session = tx_session;
        peer.session.local_isn = local_isn;
        peer.session.remote_isn = remote_isn;
        peer.session.params = params;
        peer.session.close_seq = None;
        peer.session.closed_by_peer = false;
        let lim = (credits.min(params.window as u32)).min(window as u32);
        peer.tx.start(local_isn, lim);
        peer.rx.start(remote_isn, init_credits);
        if !keep_epoch {
            // Operations queued while no session existed join this one.
            let head = peer.tx.op_head;
            self.join_session(head, epoch);
        }
        self.stats.sessions += 1;
        self.tx_ready = true;
        let _ = now;
    }
}

#[cfg(test)]
mod tests;
