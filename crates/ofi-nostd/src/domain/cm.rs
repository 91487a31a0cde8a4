//! Connection management on the domain (fi_cm(3)): passive endpoints, fi_connect,
//! fi_accept, fi_reject, fi_shutdown, fi_getpeer, the CM packets of wire-protocol
//! section 9 in and out, and the EQ events connections owe ([`Domain::cm_event`]).
//!
//! A connected (FI_EP_MSG) endpoint is an RDM endpoint of this domain whose
//! [`Conn`] names its one peer: posts go to that peer whatever their `dest_addr`, and
//! session packets from anyone else are dropped and counted. Passive endpoints have
//! their own ids: CONNREQ is the only packet addressed to one, so a passive endpoint
//! and an active endpoint of the same id never meet (a plain `sockaddr_in`, id 0,
//! names the first passive endpoint).

use wire::link::{Link, UdpAddr};
use wire::packet::{Body, CmRepr, Header, Repr, cm_reason};

use super::{Domain, obj};
use crate::addr::EpAddr;
use crate::cm::{CmConfig, CmEventKind, CmSend, Conn, ConnReqId, Listener};
use crate::ep::{EpHandle, EpState};
use crate::errno::{Errno, Result};
use crate::fid::Objects;
use crate::info::EpType;
use crate::net::SendOutcome;
use crate::pool::{Handle, Pool, Slot};
use crate::rdm::PeerState;
use crate::served::MsgEp;
use crate::storage::Storage;
use crate::time::Instant;

/// Passive endpoints a domain holds.
pub const MAX_PEPS: usize = 8;

/// A passive endpoint of a domain.
pub type PepHandle<S> = Handle<Listener<S>>;

/// What connection management counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CmStats {
    /// CM packets received.
    pub rx: u64,
    /// CM packets sent.
    pub tx: u64,
    /// CM packets of no connection or listener here (stale, spoofed or misdirected).
    pub rx_stray: u64,
    /// Session packets to a connected endpoint from another source than its peer.
    pub rx_not_peer: u64,
    /// CONNREQs to an id where no passive endpoint listens (answered CM_REJECT).
    pub rx_no_listener: u64,
    /// CONNREQs dropped unanswered because the backlog was full (back-pressure).
    pub backlog_full: u64,
}

/// Which object a CM event is about.
#[derive(Debug)]
pub enum CmFid<S: Storage> {
    /// An active endpoint.
    Ep(EpHandle<S>),
    /// A passive endpoint.
    Pep(PepHandle<S>),
}

impl<S: Storage> Clone for CmFid<S> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S: Storage> Copy for CmFid<S> {}
impl<S: Storage> PartialEq for CmFid<S> {
    fn eq(&self, o: &Self) -> bool {
        match (self, o) {
            (CmFid::Ep(a), CmFid::Ep(b)) => a == b,
            (CmFid::Pep(a), CmFid::Pep(b)) => a == b,
            _ => false,
        }
    }
}

/// An event for the EQ bound to `fid`.
#[derive(Debug, Clone, PartialEq)]
pub struct CmEvent<S: Storage> {
    /// The endpoint (FI_CONNECTED, FI_SHUTDOWN, errors) or passive endpoint
    /// (FI_CONNREQ).
    pub fid: CmFid<S>,
    /// Its application context.
    pub context: u64,
    /// The EQ it is bound to (the adapter's token of fi_ep_bind / fi_pep_bind).
    pub eq: Option<u64>,
    /// The event.
    pub kind: CmEventKind,
}

/// The domain's connection-management state.
pub(crate) struct CmTable<S: Storage> {
    cfg: CmConfig,
    peps: Objects<S, Listener<S>>,
    /// The connection of each endpoint slot that is FI_EP_MSG.
    conns: S::Slice<Option<Conn>>,
    /// CM_REJECT(NO_LISTENER) owed: (to, from id, connection id).
    refuse: [Option<(EpAddr, u16, u32)>; 4],
    /// Connections, listeners and refusals alive (nothing to do while 0).
    live: usize,
    stats: CmStats,
}

impl<S: Storage> CmTable<S> {
    /// Room for `eps` connections and [`MAX_PEPS`] passive endpoints; none in a build
    /// without FI_EP_MSG.
    pub(crate) fn new(store: &mut S, eps: usize) -> Result<CmTable<S>> {
        let served = MsgEp::SERVED.is_some();
        let (eps, peps) = if served { (eps, MAX_PEPS) } else { (0, 0) };
        Ok(CmTable {
            cfg: CmConfig::DEFAULT,
            peps: Pool::new(store.slice(peps, || Slot::VACANT).ok_or(Errno::ENOMEM)?),
            conns: store.slice(eps, || None).ok_or(Errno::ENOMEM)?,
            refuse: [None; 4],
            live: 0,
            stats: CmStats::default(),
        })
    }

    /// No passive endpoint is open.
    pub(crate) fn is_empty(&self) -> bool {
        self.peps.is_empty()
    }

    /// The connection of endpoint slot `i`, if it is FI_EP_MSG.
    #[inline]
    pub(crate) fn conn(&self, i: usize) -> Option<&Conn> {
        self.conns.as_ref().get(i)?.as_ref()
    }

    fn conn_mut(&mut self, i: usize) -> Option<&mut Conn> {
        self.conns.as_mut().get_mut(i)?.as_mut()
    }

    /// An FI_EP_MSG endpoint opened in slot `i`.
    pub(crate) fn ep_opened(&mut self, i: usize) -> Result<()> {
        let slot = self.conns.as_mut().get_mut(i).ok_or(Errno::ENOSYS)?;
        *slot = Some(Conn::new().ok_or(Errno::ENOSYS)?);
        self.live += 1;
        Ok(())
    }

    /// Endpoint slot `i` closed.
    pub(crate) fn ep_closed(&mut self, i: usize) {
        if let Some(s) = self.conns.as_mut().get_mut(i)
            && s.take().is_some()
        {
            self.live -= 1;
        }
    }

    /// Whether session packets from `from` may reach endpoint slot `i`: always for
    /// RDM endpoints; for a connected endpoint only from its peer (a packet of the peer
    /// while accepting also says the connector saw the ACCEPT).
    #[cold]
    pub(super) fn admits(&mut self, i: usize, from: &EpAddr) -> bool {
        if MsgEp::SERVED.is_none() {
            return true;
        }
        match self.conn_mut(i) {
            Some(c) if c.takes_from(from) => {
                c.peer_is_up();
                true
            }
            Some(_) => {
                self.stats.rx_not_peer += 1;
                false
            }
            None => true,
        }
    }

    /// Where posts of a connected endpoint go: -FI_ENOTCONN until FI_CONNECTED.
    pub(crate) fn send_peer(&self, i: usize) -> Result<EpAddr> {
        self.conn(i).ok_or(Errno::EINVAL)?.send_peer()
    }
}

impl<S: Storage> Domain<S> {
    /// Connection-management tunables (retries, backlog).
    pub fn cm_config(&self) -> &CmConfig {
        &self.cm.cfg
    }

    /// Sets the connection-management tunables for what starts from now on.
    /// -FI_EINVAL for a zero retry budget or backlog.
    pub fn set_cm_config(&mut self, cfg: CmConfig) -> Result<()> {
        if cfg.max_sends == 0
            || cfg.retry_initial.total_micros() == 0
            || cfg.backlog == 0
            || cfg.backlog > cfg.backlog_slots
        {
            return Err(Errno::EINVAL);
        }
        self.cm.cfg = cfg;
        Ok(())
    }

    /// What connection management counted.
    pub fn cm_stats(&self) -> CmStats {
        let mut s = self.cm.stats;
        s.backlog_full = self
            .cm
            .peps
            .iter()
            .map(|(_, l)| l.stats().backlog_full)
            .sum();
        s
    }

    /// `fi_passive_ep` on this domain: -FI_ENOSYS in a build without FI_EP_MSG,
    /// -FI_ENOMEM when [`MAX_PEPS`] are open.
    pub fn pep_open(&mut self, context: u64) -> Result<PepHandle<S>> {
        MsgEp::SERVED.ok_or(Errno::ENOSYS)?;
        if self.cm.peps.is_full() {
            return Err(Errno::ENOMEM);
        }
        let l = Listener::new(&mut self.store, &self.cm.cfg, context)?;
        let h = self.cm.peps.insert(l).map_err(|_| Errno::ENOMEM)?;
        self.cm.live += 1;
        Ok(h)
    }

    fn pep(&mut self, h: PepHandle<S>) -> Result<&mut Listener<S>> {
        obj(self.cm.peps.get_mut(h))
    }

    /// `fi_pep_bind` to an EQ (the adapter's token); -FI_EINVAL if one is bound.
    pub fn pep_bind_eq(&mut self, h: PepHandle<S>, eq: u64) -> Result<()> {
        let p = self.pep(h)?;
        if p.eq.is_some() {
            return Err(Errno::EINVAL);
        }
        p.eq = Some(eq);
        Ok(())
    }

    /// `fi_listen`: -FI_ENOEQ without a bound EQ, -FI_EOPBADSTATE when listening.
    pub fn pep_listen(&mut self, h: PepHandle<S>) -> Result<()> {
        self.pep(h)?.listen()
    }

    /// `fi_control(FI_BACKLOG)`.
    pub fn pep_set_backlog(&mut self, h: PepHandle<S>, n: usize) -> Result<()> {
        self.pep(h)?.set_backlog(n)
    }

    /// `fi_getname` of a passive endpoint: the domain's address with its id.
    pub fn pep_addr(&self, h: PepHandle<S>) -> Result<EpAddr> {
        obj(self.cm.peps.get(h))?;
        Ok(EpAddr::new(
            self.local.ip,
            self.local.port,
            h.index() as u16,
        ))
    }

    /// The passive endpoint's backlog and counters.
    pub fn pep_listener(&self, h: PepHandle<S>) -> Result<&Listener<S>> {
        obj(self.cm.peps.get(h))
    }

    /// `fi_close` of a passive endpoint; requests not answered are dropped (their
    /// connectors time out).
    pub fn pep_close(&mut self, h: PepHandle<S>) -> Result<()> {
        obj(self.cm.peps.remove(h))?;
        self.cm.live -= 1;
        Ok(())
    }

    /// The first half of fi_accept when the passive endpoint is in this domain:
    /// takes request `req` off its backlog and returns the connector and connection
    /// id, for [`Domain::accept`] on the accepting endpoint's domain. -FI_EINVAL for a
    /// request it does not hold.
    pub fn pep_take(&mut self, h: PepHandle<S>, req: ConnReqId) -> Result<(EpAddr, u32)> {
        let (now, cfg) = (self.last_now, self.cm.cfg);
        self.pep(h)?.take(now, &cfg, req)
    }

    /// `fi_reject` of request `req` with `data` (cut to the CM data limit).
    pub fn pep_reject(&mut self, h: PepHandle<S>, req: ConnReqId, data: &[u8]) -> Result<()> {
        let (now, cfg) = (self.last_now, self.cm.cfg);
        self.pep(h)?.reject(now, &cfg, req, data)
    }

    fn msg_ep(&mut self, h: EpHandle<S>) -> Result<usize> {
        let ep = obj(self.eps.get_mut(h))?;
        if ep.ep_type != EpType::Msg {
            return Err(Errno::EINVAL);
        }
        if ep.eq.is_none() {
            return Err(Errno::ENOEQ);
        }
        if ep.state == EpState::Disabled {
            // fi_connect and fi_accept enable the endpoint (fi_cm(3)).
            self.ep_enable(h)?;
        }
        Ok(h.index())
    }

    /// `fi_connect` to the passive endpoint at `dest` with `data` (cut to the CM data
    /// limit). -FI_ENOEQ without a bound EQ, -FI_EISCONN after an earlier connect or
    /// accept, -FI_EINVAL for an endpoint that is not FI_EP_MSG.
    pub fn connect(&mut self, h: EpHandle<S>, dest: EpAddr, data: &[u8]) -> Result<()> {
        let i = self.msg_ep(h)?;
        let conn_id = loop {
            let v = self.rng.next_u64() as u32;
            if v != 0 {
                break v;
            }
        };
        let (now, cfg) = (self.last_now, self.cm.cfg);
        obj(self.cm.conn_mut(i))?.connect(now, &cfg, dest, conn_id, data)
    }

    /// `fi_accept` on endpoint `h` of the request of `peer` with connection id
    /// `conn_id` (from [`Domain::pep_take`]), with `data`.
    pub fn accept(
        &mut self,
        h: EpHandle<S>,
        peer: EpAddr,
        conn_id: u32,
        data: &[u8],
    ) -> Result<()> {
        let i = self.msg_ep(h)?;
        let (now, cfg) = (self.last_now, self.cm.cfg);
        obj(self.cm.conn_mut(i))?.accept(now, &cfg, peer, conn_id, data)
    }

    /// `fi_shutdown`: no new operations; SHUTDOWN leaves once the peer acknowledged
    /// everything sent. -FI_ENOTCONN when not connected. Posted receives are canceled
    /// (-FI_ECANCELED entries, written before this returns, as fi_cm(3) asks); sends
    /// already posted finish (the peer acknowledges them before the SHUTDOWN).
    pub fn shutdown(&mut self, h: EpHandle<S>) -> Result<()> {
        obj(self.eps.get(h))?;
        let (now, cfg) = (self.last_now, self.cm.cfg);
        obj(self.cm.conn_mut(h.index()))?.shutdown(now, &cfg)?;
        let ep = obj(self.eps.get_mut(h))?;
        let (mut ctx, rdm) = self.res.rdm_ctx(ep);
        if let Some(r) = rdm {
            r.cancel_all_recvs(&mut ctx);
        }
        Ok(())
    }

    /// `fi_getpeer`: -FI_ENOTCONN before the peer is known, -FI_EINVAL for an
    /// endpoint that is not FI_EP_MSG.
    pub fn getpeer(&self, h: EpHandle<S>) -> Result<EpAddr> {
        obj(self.eps.get(h))?;
        obj(self.cm.conn(h.index()))?.peer().ok_or(Errno::ENOTCONN)
    }

    /// The connection of endpoint `h` (FI_EP_MSG only).
    pub fn conn(&self, h: EpHandle<S>) -> Result<&Conn> {
        obj(self.eps.get(h))?;
        obj(self.cm.conn(h.index()))
    }

    /// Whether a connection or listener owes its EQ an event.
    pub fn cm_event_pending(&self) -> bool {
        self.cm.live > 0
            && (self
                .cm
                .conns
                .as_ref()
                .iter()
                .flatten()
                .any(|c| c.owes_event())
                || self.cm.peps.iter().any(|(_, l)| l.owes_event()))
    }

    /// The next event a connection or listener owes its EQ (call after passes until
    /// `None`; the adapter posts it to the EQ [`CmEvent::eq`] names).
    pub fn cm_event(&mut self) -> Option<CmEvent<S>> {
        if self.cm.live == 0 {
            return None;
        }
        // Endpoints first: a connector that saw FI_CONNECTED may send its next CONNREQ
        // right behind its ESTABLISHED, and both can land in one pass; the accepting
        // endpoint's FI_CONNECTED happened first.
        for (h, ep) in self.eps.iter() {
            let Some(c) = self
                .cm
                .conns
                .as_mut()
                .get_mut(h.index())
                .and_then(|c| c.as_mut())
            else {
                continue;
            };
            if let Some(kind) = c.take_event() {
                return Some(CmEvent {
                    fid: CmFid::Ep(h),
                    context: ep.context,
                    eq: ep.eq,
                    kind,
                });
            }
        }
        for (h, l) in self.cm.peps.iter_mut() {
            if let Some(kind) = l.take_event() {
                return Some(CmEvent {
                    fid: CmFid::Pep(h),
                    context: l.context,
                    eq: l.eq,
                    kind,
                });
            }
        }
        None
    }

    /// A received CM packet.
    #[cold]
    #[inline(never)]
    pub(super) fn rx_cm(&mut self, now: Instant, from: EpAddr, repr: &Repr<'_>) {
        self.cm.stats.rx += 1;
        if MsgEp::SERVED.is_none() {
            // A build without FI_EP_MSG: counted, never answered.
            self.cm.stats.rx_stray += 1;
            return;
        }
        let conn_id = repr.header.session;
        let dst = repr.header.dst_ep as usize;
        let ours = match &repr.body {
            Body::ConnReq(c) => {
                let pep = self.cm.peps.get_mut_by_index(dst);
                match pep {
                    Some(l) => {
                        l.on_connreq(now, from, conn_id, c.data);
                        true
                    }
                    None => {
                        self.cm.stats.rx_no_listener += 1;
                        if let Some(s) = self.cm.refuse.iter_mut().find(|s| s.is_none()) {
                            *s = Some((from, repr.header.dst_ep, conn_id));
                            self.cm.live += 1;
                        }
                        true
                    }
                }
            }
            body => {
                let live = self.eps.get_by_index(dst).is_some();
                match self.cm.conn_mut(dst).filter(|_| live) {
                    None => false,
                    Some(c) => match body {
                        Body::Accept(x) => c.on_accept(from, conn_id, x.data),
                        Body::CmReject(x) => c.on_reject(from, conn_id, x.data),
                        Body::Established(_) => c.on_established(from, conn_id),
                        Body::Shutdown(_) => c.on_shutdown(from, conn_id),
                        Body::ShutdownAck(_) => c.on_shutdown_ack(from, conn_id),
                        _ => false,
                    },
                }
            }
        };
        if !ours {
            self.cm.stats.rx_stray += 1;
        }
    }

    /// When connection management next has work (retransmissions, drains, events).
    #[inline]
    pub(super) fn cm_timeout(&self) -> Option<Instant> {
        if MsgEp::SERVED.is_none() || self.cm.live == 0 {
            return None;
        }
        self.cm_timeout_slow()
    }

    #[cold]
    fn cm_timeout_slow(&self) -> Option<Instant> {
        let mut t: Option<Instant> = None;
        let mut at = |d: Instant| t = Some(t.map_or(d, |x| x.min(d)));
        if self.cm.refuse.iter().any(|r| r.is_some())
            || self.cm.peps.iter().any(|(_, l)| l.reject_due().is_some())
        {
            at(self.last_now);
        }
        for c in self.cm.conns.as_ref().iter().flatten() {
            if let Some(d) = c.deadline() {
                at(d.max(self.last_now));
            }
        }
        t
    }

    /// The transmit half of connection management: timers, then every CM packet
    /// due, until the link is full. Returns the packets sent.
    #[inline]
    pub(super) fn cm_tx<L: Link>(&mut self, now: Instant, link: &mut L) -> usize {
        if MsgEp::SERVED.is_none() || self.cm.live == 0 {
            return 0;
        }
        self.cm_tx_slow(now, link)
    }

    #[cold]
    #[inline(never)]
    fn cm_tx_slow<L: Link>(&mut self, now: Instant, link: &mut L) -> usize {
        let cfg = self.cm.cfg;
        let mut sent = 0;
        for i in 0..self.cm.refuse.len() {
            let Some((to, from_ep, conn_id)) = self.cm.refuse[i] else {
                continue;
            };
            let body = Body::CmReject(CmRepr {
                reason: cm_reason::NO_LISTENER,
                data: &[],
            });
            match self.cm_send(now, link, to, from_ep, conn_id, body) {
                None => return sent,
                Some(_) => {
                    self.cm.refuse[i] = None;
                    self.cm.live -= 1;
                    sent += 1;
                }
            }
        }
        for pi in 0..self.cm.peps.capacity() {
            while let Some((slot, to, conn_id, data)) = self
                .cm
                .peps
                .get_by_index(pi)
                .and_then(|(_, l)| l.reject_due())
            {
                let mut buf = [0u8; crate::cm::CM_DATA_MAX];
                buf[..data.len()].copy_from_slice(data);
                let n = data.len();
                let body = Body::CmReject(CmRepr {
                    reason: cm_reason::APPLICATION,
                    data: &buf[..n],
                });
                if self
                    .cm_send(now, link, to, pi as u16, conn_id, body)
                    .is_none()
                {
                    return sent;
                }
                sent += 1;
                if let Some(l) = self.cm.peps.get_mut_by_index(pi) {
                    l.reject_sent(slot);
                }
            }
        }
        for i in 0..self.cm.conns.as_ref().len() {
            let Some((_, ep)) = self.eps.get_by_index(i) else {
                continue;
            };
            let Some(c) = self.cm.conns.as_ref()[i].as_ref() else {
                continue;
            };
            let connected = c.send_peer().ok();
            let (drained, failed) = match (c.peer(), ep.rdm()) {
                (Some(p), Some(r)) => {
                    let failed = r.peer_state(&p) == Some(PeerState::Failed);
                    let drained = r.tx_in_use() == 0
                        && r.peers()
                            .find(|x| x.addr == p)
                            .is_none_or(|x| x.snd_una == x.next_seq);
                    (drained, failed)
                }
                _ => (true, false),
            };
            // A connected peer is watched: its death, idle or not, ends the connection.
            if let Some(p) = connected
                && let Some(ep) = self.eps.get_mut_by_index(i)
                && let crate::ep::Engine::Rdm(r) = &mut ep.engine
            {
                r.watch(&p, now);
            }
            let Some(c) = self.cm.conn_mut(i) else {
                continue;
            };
            c.poll(now, &cfg, drained, failed);
            while let Some(what) = self.cm.conn(i).and_then(|c| c.due(now)) {
                let mut buf = [0u8; crate::cm::CM_DATA_MAX];
                let n = match self.cm.conn(i) {
                    Some(c) => {
                        buf[..c.data().len()].copy_from_slice(c.data());
                        c.data().len()
                    }
                    None => 0,
                };
                let (to, body) = match what {
                    CmSend::ConnReq(to) => (
                        to,
                        Body::ConnReq(CmRepr {
                            reason: 0,
                            data: &buf[..n],
                        }),
                    ),
                    CmSend::Accept(to) => (
                        to,
                        Body::Accept(CmRepr {
                            reason: 0,
                            data: &buf[..n],
                        }),
                    ),
                    CmSend::Established(to) => (to, Body::Established(CmRepr::EMPTY)),
                    CmSend::Shutdown(to) => (
                        to,
                        Body::Shutdown(CmRepr {
                            reason: cm_reason::APPLICATION,
                            data: &[],
                        }),
                    ),
                    CmSend::ShutdownAck(to) => (to, Body::ShutdownAck(CmRepr::EMPTY)),
                };
                let conn_id = self.cm.conn(i).map_or(0, |c| c.conn_id());
                if self
                    .cm_send(now, link, to, i as u16, conn_id, body)
                    .is_none()
                {
                    return sent;
                }
                sent += 1;
                if let Some(c) = self.cm.conn_mut(i) {
                    c.sent(what, now, &cfg);
                }
            }
        }
        sent
    }

    /// Sends one CM packet; `None` when the link is full (try again next pass).
    fn cm_send<L: Link>(
        &mut self,
        now: Instant,
        link: &mut L,
        to: EpAddr,
        from_ep: u16,
        conn_id: u32,
        body: Body<'_>,
    ) -> Option<()> {
        let repr = Repr {
            header: Header {
                src_ep: from_ep,
                dst_ep: to.ep_id,
                session: conn_id,
                seq: 0,
                crc: false,
                ack_req: false,
            },
            body,
        };
        let len = repr.buffer_len();
        let dst = UdpAddr::new(to.ip.into(), to.port);
        match self.net.send(now, link, dst, len, |b| {
            b.get_mut(..len)
                .and_then(|b| repr.emit_bytes(b).ok())
                .unwrap_or(0)
        }) {
            Ok(SendOutcome::ArpPending) | Err(Errno::EAGAIN) => None,
            // Sent, or lost on the way: the retry schedule decides.
            _ => {
                self.cm.stats.tx += 1;
                self.stats.tx_packets += 1;
                Some(())
            }
        }
    }
}
