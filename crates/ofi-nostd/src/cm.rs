//! Connection management of FI_EP_MSG endpoints (fi_cm(3)), sans IO: the state of a
//! connected endpoint's connection ([`Conn`]) and a passive endpoint's backlog of
//! connection requests ([`Listener`]), driven by the packets of wire-protocol
//! section 9 and by time.
//!
//! A connected endpoint is an RDM engine that talks to one peer: these types decide
//! *who* the peer is and *when* the connection is up or down; the domain
//! (`domain/cm.rs`) moves their packets, hands the RDM engine the peer, and turns
//! what they owe into EQ events ([`CmEvent`](crate::domain::CmEvent)). Every CM packet is retransmitted on
//! the schedule of [`Retry`] until answered, so nothing here needs acknowledgements
//! from the reliability layer.

use heapless::Vec;

use crate::addr::EpAddr;
use crate::errno::{Errno, Result};
use crate::served::MsgEp;
use crate::storage::Storage;
use crate::time::{Duration, Instant};

/// Most CM data a connection request, accept or reject carries (FI_OPT_CM_DATA_SIZE).
pub const CM_DATA_MAX: usize = wire::packet::CM_DATA_MAX;

/// CM data of one packet or event.
pub type CmData = Vec<u8, CM_DATA_MAX>;

/// Copies `data` as CM data, cut to [`CM_DATA_MAX`] (fi_cm(3): data that does not fit
/// is silently truncated).
pub fn cm_data(data: &[u8]) -> CmData {
    let mut v = CmData::new();
    let n = data.len().min(CM_DATA_MAX);
    // Cannot fail: `n` is within the capacity.
    let _ = v.extend_from_slice(&data[..n]);
    v
}

/// Tunables of connection management.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CmConfig {
    /// Wait before the first retransmission of a CM packet.
    pub retry_initial: Duration,
    /// Longest wait between retransmissions (the wait doubles up to it).
    pub retry_max: Duration,
    /// Sends of one CM packet before its sender gives up (FI_ETIMEDOUT).
    pub max_sends: u32,
    /// Default backlog of a passive endpoint (FI_BACKLOG).
    pub backlog: usize,
    /// Requests a passive endpoint can hold, pending or answered (an answered one
    /// stays for the connector's retry budget): the largest FI_BACKLOG.
    pub backlog_slots: usize,
}

impl CmConfig {
    /// 1 ms doubling to 250 ms, 67 sends (about 15 s), backlog 64 of 128 slots.
    ///
    /// The budget is the time a busy listener has to answer: with the old 4.5 s, 100
    /// connectors against one listener all timed out once in CI on a loaded 2-vCPU
    /// host (normally they are answered in about 0.1 s). TCP's connect gives up after
    /// about two minutes; 15 s still reports a host that is gone within a test's
    /// patience. Waits stay at most 250 ms apart: a connector held back by a full
    /// backlog tries again that soon.
    pub const DEFAULT: CmConfig = CmConfig {
        retry_initial: Duration::from_millis(1),
        retry_max: Duration::from_millis(250),
        max_sends: 67,
        backlog: 64,
        backlog_slots: 128,
    };

    /// How long a sender keeps retransmitting one CM packet: the sum of its waits.
    pub fn budget(&self) -> Duration {
        let mut wait = self.retry_initial.total_micros().max(1);
        let max = self.retry_max.total_micros().max(wait);
        let mut total = 0u64;
        for _ in 0..self.max_sends {
            total = total.saturating_add(wait);
            wait = wait.saturating_mul(2).min(max);
        }
        Duration::from_micros(total)
    }
}

impl Default for CmConfig {
    fn default() -> Self {
        CmConfig::DEFAULT
    }
}

/// The retransmission schedule of one CM packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retry {
    next: Instant,
    wait: Duration,
    sent: u32,
}

impl Retry {
    /// A packet due now.
    pub fn now(now: Instant, cfg: &CmConfig) -> Retry {
        Retry {
            next: now,
            wait: cfg.retry_initial,
            sent: 0,
        }
    }

    /// When the packet is due next.
    pub fn deadline(&self) -> Instant {
        self.next
    }

    /// Whether it is due at `now`.
    pub fn due(&self, now: Instant) -> bool {
        now >= self.next
    }

    /// It was sent at `now`: the next send waits twice as long (at most `retry_max`).
    pub fn sent(&mut self, now: Instant, cfg: &CmConfig) {
        self.sent = self.sent.saturating_add(1);
        self.next = now + self.wait;
        let doubled = Duration::from_micros(self.wait.total_micros().saturating_mul(2));
        self.wait = if doubled > cfg.retry_max {
            cfg.retry_max
        } else {
            doubled
        };
    }

    /// Every send of the budget went out and the last one's wait is over.
    pub fn exhausted(&self, now: Instant, cfg: &CmConfig) -> bool {
        self.sent >= cfg.max_sends && now >= self.next
    }
}

/// What a connection owes its EQ (fi_eq(3)); the domain hands it out as a
/// [`CmEvent`](crate::domain::CmEvent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CmEventKind {
    /// FI_CONNREQ on a passive endpoint: `req` names the request for fi_accept /
    /// fi_reject (the info's `handle`), `from` is the connecting endpoint.
    ConnReq {
        /// The request.
        req: ConnReqId,
        /// The connecting endpoint's address.
        from: EpAddr,
        /// Its CM data.
        data: CmData,
    },
    /// FI_CONNECTED, with the accepter's CM data at the connecting side.
    Connected(CmData),
    /// FI_SHUTDOWN: the peer shut down, or its session failed.
    Shutdown,
    /// An error entry: FI_ECONNREFUSED with the listener's reject data, or
    /// FI_ETIMEDOUT (no answer within the retry budget).
    Error {
        /// The reason.
        err: Errno,
        /// The reject data (empty for timeouts).
        data: CmData,
    },
}

/// A connection request of a passive endpoint, as fi_accept and fi_reject name it: its
/// backlog slot and the connector's connection id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ConnReqId(pub u64);

impl ConnReqId {
    fn new(slot: usize, conn_id: u32) -> ConnReqId {
        ConnReqId(((slot as u64) << 32) | u64::from(conn_id))
    }

    fn slot(self) -> usize {
        (self.0 >> 32) as usize
    }

    fn conn_id(self) -> u32 {
        self.0 as u32
    }
}

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnState {
    /// Opened; neither fi_connect nor fi_accept yet.
    Idle,
    /// CONNREQ out to this passive endpoint, waiting for ACCEPT or CM_REJECT.
    Connecting(EpAddr),
    /// ACCEPT out, waiting for ESTABLISHED.
    Accepting,
    /// Up: data moves.
    Connected,
    /// fi_shutdown: waiting (until the deadline) for the peer to acknowledge our data.
    Draining(Instant),
    /// SHUTDOWN out, waiting for SHUTDOWN_ACK.
    ShuttingDown,
    /// Over: shut down by either side, refused, timed out or its session failed.
    Closed,
}

/// A CM packet a connection wants sent, with its connection id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmSend {
    /// CONNREQ to the passive endpoint.
    ConnReq(EpAddr),
    /// ACCEPT to the connector.
    Accept(EpAddr),
    /// ESTABLISHED to the accepter.
    Established(EpAddr),
    /// SHUTDOWN to the peer.
    Shutdown(EpAddr),
    /// SHUTDOWN_ACK to the peer.
    ShutdownAck(EpAddr),
}

/// The connection of one FI_EP_MSG endpoint.
#[derive(Debug, Clone)]
pub struct Conn {
    _served: MsgEp,
    state: ConnState,
    conn_id: u32,
    peer: Option<EpAddr>,
    /// CONNREQ / ACCEPT data (what we send until answered).
    data: CmData,
    retry: Retry,
    /// Events owed, oldest first: FI_CONNECTED and FI_SHUTDOWN can both come out of
    /// one pass (ESTABLISHED and SHUTDOWN in the same burst).
    owed: Vec<CmEventKind, 2>,
    owe_established: bool,
    owe_shutdown_ack: bool,
}

impl Conn {
    /// A new connection, `None` in a build without FI_EP_MSG.
    pub fn new() -> Option<Conn> {
        Some(Conn {
            _served: MsgEp::SERVED?,
            state: ConnState::Idle,
            conn_id: 0,
            peer: None,
            data: CmData::new(),
            retry: Retry::now(Instant::ZERO, &CmConfig::DEFAULT),
            owed: Vec::new(),
            owe_established: false,
            owe_shutdown_ack: false,
        })
    }

    /// Its state.
    pub fn state(&self) -> ConnState {
        self.state
    }

    /// The peer (fi_getpeer), once known.
    pub fn peer(&self) -> Option<EpAddr> {
        self.peer
    }

    /// The connection id of its CM packets.
    pub fn conn_id(&self) -> u32 {
        self.conn_id
    }

    /// The peer sends may go to: -FI_ENOTCONN unless connected.
    pub fn send_peer(&self) -> Result<EpAddr> {
        match (self.state, self.peer) {
            (ConnState::Connected, Some(p)) => Ok(p),
            _ => Err(Errno::ENOTCONN),
        }
    }

    /// Whether packets of the reliability engine from `from` belong to this connection
    /// (its peer, from ACCEPT / CONNREQ on, until closed).
    pub fn takes_from(&self, from: &EpAddr) -> bool {
        self.peer.as_ref() == Some(from)
    }

    /// fi_connect to the passive endpoint `pep` with connection id `conn_id` (nonzero).
    /// -FI_EISCONN once connected or connecting (fi_connect: once per endpoint).
    pub fn connect(
        &mut self,
        now: Instant,
        cfg: &CmConfig,
        pep: EpAddr,
        conn_id: u32,
        data: &[u8],
    ) -> Result<()> {
        self.start(now, cfg, ConnState::Connecting(pep), None, conn_id, data)
    }

    /// fi_accept of the request of `peer` with connection id `conn_id`.
    pub fn accept(
        &mut self,
        now: Instant,
        cfg: &CmConfig,
        peer: EpAddr,
        conn_id: u32,
        data: &[u8],
    ) -> Result<()> {
        self.start(now, cfg, ConnState::Accepting, Some(peer), conn_id, data)
    }

    /// The first CM packet of a connection (CONNREQ or ACCEPT) is due now.
    fn start(
        &mut self,
        now: Instant,
        cfg: &CmConfig,
        state: ConnState,
        peer: Option<EpAddr>,
        conn_id: u32,
        data: &[u8],
    ) -> Result<()> {
        if self.state != ConnState::Idle {
            return Err(Errno::EISCONN);
        }
        self.state = state;
        self.peer = peer;
        self.conn_id = conn_id;
        self.data = cm_data(data);
        self.retry = Retry::now(now, cfg);
        Ok(())
    }

    /// fi_shutdown: -FI_ENOTCONN unless connected (or already shutting down: 0).
    pub fn shutdown(&mut self, now: Instant, cfg: &CmConfig) -> Result<()> {
        match self.state {
            ConnState::Connected => {
                self.state = ConnState::Draining(now + cfg.budget());
                Ok(())
            }
            ConnState::Draining(_) | ConnState::ShuttingDown => Ok(()),
            _ => Err(Errno::ENOTCONN),
        }
    }

    fn matches(&self, conn_id: u32) -> bool {
        conn_id != 0 && conn_id == self.conn_id
    }

    /// ACCEPT from `from`; whether the packet belonged to this connection.
    pub fn on_accept(&mut self, from: EpAddr, conn_id: u32, data: &[u8]) -> bool {
        if !self.matches(conn_id) {
            return false;
        }
        match self.state {
            ConnState::Connecting(pep) if pep.ip == from.ip => {
                self.state = ConnState::Connected;
                self.peer = Some(from);
                self.owe(CmEventKind::Connected(cm_data(data)));
                self.owe_established = true;
                true
            }
            // Our ESTABLISHED was lost: say it again.
            _ if self.peer == Some(from) && self.state != ConnState::Idle => {
                self.owe_established = true;
                true
            }
            _ => false,
        }
    }

    /// CM_REJECT from `from`.
    pub fn on_reject(&mut self, from: EpAddr, conn_id: u32, data: &[u8]) -> bool {
        match self.state {
            ConnState::Connecting(pep) if self.matches(conn_id) && pep.ip == from.ip => {
                self.state = ConnState::Closed;
                self.owe(CmEventKind::Error {
                    err: Errno::ECONNREFUSED,
                    data: cm_data(data),
                });
                true
            }
            _ => false,
        }
    }

    /// ESTABLISHED (or, while accepting, any session packet of the peer: it sends
    /// only once it saw our ACCEPT).
    pub fn on_established(&mut self, from: EpAddr, conn_id: u32) -> bool {
        if !self.matches(conn_id) || self.peer != Some(from) {
            return false;
        }
        self.peer_is_up();
        true
    }

    /// The peer showed it is connected (ESTABLISHED, or its first session packet).
    pub fn peer_is_up(&mut self) {
        if self.state == ConnState::Accepting {
            self.state = ConnState::Connected;
            self.owe(CmEventKind::Connected(CmData::new()));
        }
    }

    /// SHUTDOWN from the peer: FI_SHUTDOWN once, SHUTDOWN_ACK every time.
    pub fn on_shutdown(&mut self, from: EpAddr, conn_id: u32) -> bool {
        if !self.matches(conn_id) || self.peer != Some(from) {
            return false;
        }
        // The connector shuts down only after it saw our ACCEPT: a SHUTDOWN that
        // overtakes a lost ESTABLISHED still says the connection was up, and the EQ
        // reports FI_CONNECTED before FI_SHUTDOWN (fi_cm(3)), as for a session packet.
        self.peer_is_up();
        match self.state {
            ConnState::Connected | ConnState::Draining(_) | ConnState::ShuttingDown => {
                self.state = ConnState::Closed;
                self.owe(CmEventKind::Shutdown);
            }
            _ => {}
        }
        self.owe_shutdown_ack = true;
        true
    }

    /// SHUTDOWN_ACK from the peer.
    pub fn on_shutdown_ack(&mut self, from: EpAddr, conn_id: u32) -> bool {
        if !self.matches(conn_id) || self.peer != Some(from) {
            return false;
        }
        if self.state == ConnState::ShuttingDown {
            // The side that shut down learns the connection is over too (as
            // rdma_disconnect reports it at both ends): exactly one FI_SHUTDOWN each.
            self.state = ConnState::Closed;
            self.owe(CmEventKind::Shutdown);
        }
        true
    }

    /// Time passes: `drained` says the peer acknowledged everything we sent,
    /// `peer_failed` that the session with it failed.
    pub fn poll(&mut self, now: Instant, cfg: &CmConfig, drained: bool, peer_failed: bool) {
        match self.state {
            ConnState::Connecting(_) | ConnState::Accepting if self.retry.exhausted(now, cfg) => {
                self.state = ConnState::Closed;
                self.owe(CmEventKind::Error {
                    err: Errno::ETIMEDOUT,
                    data: CmData::new(),
                });
            }
            ConnState::Connected if peer_failed => {
                self.state = ConnState::Closed;
                self.owe(CmEventKind::Shutdown);
            }
            ConnState::Draining(deadline) if drained || peer_failed || now >= deadline => {
                self.state = ConnState::ShuttingDown;
                self.retry = Retry::now(now, cfg);
            }
            ConnState::ShuttingDown if self.retry.exhausted(now, cfg) || peer_failed => {
                self.state = ConnState::Closed;
                self.owe(CmEventKind::Shutdown);
            }
            _ => {}
        }
    }

    /// The CM packet due at `now`, if any; call [`Conn::sent`] once it left.
    pub fn due(&self, now: Instant) -> Option<CmSend> {
        let peer = self.peer;
        if self.owe_established {
            return peer.map(CmSend::Established);
        }
        if self.owe_shutdown_ack {
            return peer.map(CmSend::ShutdownAck);
        }
        if !self.retry.due(now) {
            return None;
        }
        match self.state {
            ConnState::Connecting(pep) => Some(CmSend::ConnReq(pep)),
            ConnState::Accepting => peer.map(CmSend::Accept),
            ConnState::ShuttingDown => peer.map(CmSend::Shutdown),
            _ => None,
        }
    }

    /// The packet [`Conn::due`] returned left at `now`.
    pub fn sent(&mut self, what: CmSend, now: Instant, cfg: &CmConfig) {
        match what {
            CmSend::Established(_) => self.owe_established = false,
            CmSend::ShutdownAck(_) => self.owe_shutdown_ack = false,
            CmSend::ConnReq(_) | CmSend::Accept(_) | CmSend::Shutdown(_) => {
                self.retry.sent(now, cfg)
            }
        }
    }

    /// The CM data of CONNREQ / ACCEPT.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// When [`Conn::due`] or [`Conn::poll`] next has something to do.
    pub fn deadline(&self) -> Option<Instant> {
        if self.owe_established || self.owe_shutdown_ack || !self.owed.is_empty() {
            return Some(Instant::ZERO);
        }
        match self.state {
            ConnState::Connecting(_) | ConnState::Accepting | ConnState::ShuttingDown => {
                Some(self.retry.deadline())
            }
            ConnState::Draining(d) => Some(d),
            _ => None,
        }
    }

    /// Whether it owes its EQ an event.
    pub fn owes_event(&self) -> bool {
        !self.owed.is_empty()
    }

    /// The event it owes, taken.
    pub fn take_event(&mut self) -> Option<CmEventKind> {
        if self.owed.is_empty() {
            None
        } else {
            Some(self.owed.remove(0))
        }
    }

    /// Owes `ev` after what is already owed (a full list keeps the newest).
    fn owe(&mut self, ev: CmEventKind) {
        if self.owed.is_full() {
            self.owed.pop();
        }
        // Cannot fail: there is room now.
        let _ = self.owed.push(ev);
    }
}

/// One request in a passive endpoint's backlog.
#[derive(Debug, Clone)]
pub struct Pending {
    state: PendState,
    from: EpAddr,
    conn_id: u32,
    /// The request's CM data, then (rejected) the reject data.
    data: CmData,
    /// Answered requests are forgotten then.
    until: Instant,
    reported: bool,
    /// A CM_REJECT is owed.
    owe_reject: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PendState {
    Free,
    /// Waiting for fi_accept / fi_reject.
    Waiting,
    /// Accepted (handed to the accepting endpoint).
    Accepted,
    /// Rejected: repeats get CM_REJECT again.
    Rejected,
}

impl Pending {
    /// An unused slot.
    pub const FREE: Pending = Pending {
        state: PendState::Free,
        from: EpAddr::new([0; 4], 0, 0),
        conn_id: 0,
        data: CmData::new(),
        until: Instant::ZERO,
        reported: false,
        owe_reject: false,
    };
}

/// What a passive endpoint made of a CONNREQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnReqOutcome {
    /// A new request, queued to be reported.
    New,
    /// A repeat of one it holds: nothing to do (a rejected one owes CM_REJECT again).
    Repeat,
    /// The backlog is full: dropped unanswered, the connector retries.
    Full,
    /// Not listening: dropped.
    NotListening,
}

/// Counters of a passive endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ListenerStats {
    /// New requests taken into the backlog.
    pub requests: u64,
    /// Repeated CONNREQs of requests it held.
    pub repeats: u64,
    /// CONNREQs dropped because the backlog was full (back-pressure).
    pub backlog_full: u64,
    /// CONNREQs before fi_listen.
    pub not_listening: u64,
}

/// A passive endpoint (fid_pep): its backlog of connection requests.
pub struct Listener<S: Storage> {
    _served: MsgEp,
    listening: bool,
    backlog: usize,
    slots: S::Slice<Pending>,
    owed: usize,
    stats: ListenerStats,
    /// The EQ bound by fi_pep_bind (an opaque token of the adapter).
    pub eq: Option<u64>,
    /// The application's context.
    pub context: u64,
}

impl<S: Storage> Listener<S> {
    /// A passive endpoint with `cfg.backlog_slots` slots from `store`: -FI_ENOSYS in a
    /// build without FI_EP_MSG, -FI_ENOMEM without storage.
    pub fn new(store: &mut S, cfg: &CmConfig, context: u64) -> Result<Listener<S>> {
        let served = MsgEp::SERVED.ok_or(Errno::ENOSYS)?;
        let n = cfg.backlog_slots.max(1);
        let slots = store.slice(n, || Pending::FREE).ok_or(Errno::ENOMEM)?;
        Ok(Listener {
            _served: served,
            listening: false,
            backlog: cfg.backlog.clamp(1, n),
            slots,
            owed: 0,
            stats: ListenerStats::default(),
            eq: None,
            context,
        })
    }

    /// fi_listen: -FI_EOPBADSTATE when already listening, -FI_ENOEQ without an EQ.
    pub fn listen(&mut self) -> Result<()> {
        if self.listening {
            return Err(Errno::EOPBADSTATE);
        }
        if self.eq.is_none() {
            return Err(Errno::ENOEQ);
        }
        self.listening = true;
        Ok(())
    }

    /// Whether fi_listen was called.
    pub fn is_listening(&self) -> bool {
        self.listening
    }

    /// fi_control(FI_BACKLOG): requests waiting for an answer it holds at most
    /// (1..=its slots; -FI_EINVAL otherwise).
    pub fn set_backlog(&mut self, n: usize) -> Result<()> {
        if n == 0 || n > self.slots.as_ref().len() {
            return Err(Errno::EINVAL);
        }
        self.backlog = n;
        Ok(())
    }

    /// The backlog.
    pub fn backlog(&self) -> usize {
        self.backlog
    }

    /// Its counters.
    pub fn stats(&self) -> &ListenerStats {
        &self.stats
    }

    /// Requests reported or to be reported and not answered yet.
    pub fn waiting(&self) -> usize {
        self.slots
            .as_ref()
            .iter()
            .filter(|p| p.state == PendState::Waiting)
            .count()
    }

    /// A CONNREQ from `from` at `now`.
    pub fn on_connreq(
        &mut self,
        now: Instant,
        from: EpAddr,
        conn_id: u32,
        data: &[u8],
    ) -> ConnReqOutcome {
        if !self.listening {
            self.stats.not_listening += 1;
            return ConnReqOutcome::NotListening;
        }
        self.expire(now);
        let slots = self.slots.as_mut();
        if let Some(p) = slots
            .iter_mut()
            .find(|p| p.state != PendState::Free && p.from == from && p.conn_id == conn_id)
        {
            if p.state == PendState::Rejected {
                p.owe_reject = true;
            }
            self.stats.repeats += 1;
            return ConnReqOutcome::Repeat;
        }
        let waiting = slots
            .iter()
            .filter(|p| p.state == PendState::Waiting)
            .count();
        // A free slot, else the answered request that would be forgotten first (its
        // connector has most likely stopped retrying): answered requests never hold
        // up new ones.
        let free = match slots.iter().position(|p| p.state == PendState::Free) {
            Some(i) => Some(i),
            None => slots
                .iter()
                .enumerate()
                .filter(|(_, p)| p.state != PendState::Waiting && !p.owe_reject)
                .min_by_key(|(_, p)| p.until)
                .map(|(i, _)| i),
        };
        match free.and_then(|i| slots.get_mut(i)) {
            Some(p) if waiting < self.backlog => {
                *p = Pending {
                    state: PendState::Waiting,
                    from,
                    conn_id,
                    data: cm_data(data),
                    until: now,
                    reported: false,
                    owe_reject: false,
                };
                self.owed += 1;
                self.stats.requests += 1;
                ConnReqOutcome::New
            }
            _ => {
                self.stats.backlog_full += 1;
                ConnReqOutcome::Full
            }
        }
    }

    /// Forgets answered requests whose connector stopped retrying.
    fn expire(&mut self, now: Instant) {
        for p in self.slots.as_mut() {
            if matches!(p.state, PendState::Accepted | PendState::Rejected)
                && now >= p.until
                && !p.owe_reject
            {
                *p = Pending::FREE;
            }
        }
    }

    fn waiting_slot(&mut self, req: ConnReqId) -> Result<&mut Pending> {
        self.slots
            .as_mut()
            .get_mut(req.slot())
            .filter(|p| p.state == PendState::Waiting && p.conn_id == req.conn_id())
            .ok_or(Errno::EINVAL)
    }

    /// Whether request `req` still waits for fi_accept or fi_reject.
    pub fn is_waiting(&self, req: ConnReqId) -> bool {
        self.slots
            .as_ref()
            .get(req.slot())
            .is_some_and(|p| p.state == PendState::Waiting && p.conn_id == req.conn_id())
    }

    /// fi_accept of `req`: the connector's address and connection id, for the
    /// accepting endpoint. -FI_EINVAL for a request it does not hold (any more).
    pub fn take(&mut self, now: Instant, cfg: &CmConfig, req: ConnReqId) -> Result<(EpAddr, u32)> {
        let p = self.waiting_slot(req)?;
        p.state = PendState::Accepted;
        p.until = now + cfg.budget();
        p.data.clear();
        Ok((p.from, p.conn_id))
    }

    /// fi_reject of `req` with `data`: CM_REJECT now and to every repeat.
    pub fn reject(
        &mut self,
        now: Instant,
        cfg: &CmConfig,
        req: ConnReqId,
        data: &[u8],
    ) -> Result<()> {
        let p = self.waiting_slot(req)?;
        p.state = PendState::Rejected;
        p.until = now + cfg.budget();
        p.data = cm_data(data);
        p.owe_reject = true;
        Ok(())
    }

    /// The next FI_CONNREQ to report.
    pub fn take_event(&mut self) -> Option<CmEventKind> {
        if self.owed == 0 {
            return None;
        }
        let (i, p) = self
            .slots
            .as_mut()
            .iter_mut()
            .enumerate()
            .find(|(_, p)| p.state == PendState::Waiting && !p.reported)?;
        p.reported = true;
        self.owed -= 1;
        Some(CmEventKind::ConnReq {
            req: ConnReqId::new(i, p.conn_id),
            from: p.from,
            data: p.data.clone(),
        })
    }

    /// Whether it owes its EQ an event.
    pub fn owes_event(&self) -> bool {
        self.owed > 0
    }

    /// A CM_REJECT it owes: (to, connection id, data).
    pub fn reject_due(&self) -> Option<(usize, EpAddr, u32, &[u8])> {
        self.slots
            .as_ref()
            .iter()
            .enumerate()
            .find(|(_, p)| p.owe_reject)
            .map(|(i, p)| (i, p.from, p.conn_id, &p.data[..]))
    }

    /// The CM_REJECT of slot `i` left.
    pub fn reject_sent(&mut self, i: usize) {
        if let Some(p) = self.slots.as_mut().get_mut(i) {
            p.owe_reject = false;
        }
    }
}

#[cfg(all(test, feature = "msg-ep"))]
mod tests;
