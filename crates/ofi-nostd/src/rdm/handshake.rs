//! Sessions (spec 4): HELLO / HELLO_ACK with optional HMAC proofs, simultaneous open,
//! replacement of a session by a new one the peer offers, REJECT and RESET, and the
//! self session of an endpoint that sends to its own address.

use wire::packet::{
    Body, CloseRepr, Header, HelloRepr, MAC_LEN, RejectRepr, Repr, RetryRepr, VERSION,
    caps as wcaps, close, reject,
};

use super::cookie::Refused;

use super::peer::{Cand, Params};
use super::tx::Keep;
use super::*;

/// Capabilities this engine announces.
fn our_caps(crc: bool) -> u64 {
    // SHORT_ACK: we always parse the short ACK form (sending it is `cfg.short_ack`).
    let mut c = wcaps::MSG
        | wcaps::TAGGED
        | wcaps::CQ_DATA
        | wcaps::RNDV
        | wcaps::ORDERED
        | wcaps::BUNDLE
        | wcaps::SHORT_ACK
        | wcaps::COOKIE;
    if cfg!(feature = "sack") {
        c |= wcaps::SACK_RANGES;
    }
    if crc {
        c |= wcaps::CRC_RX;
    }
    c
}

/// `a` sorts before `b` as (ip, port, endpoint id): its HELLO wins a simultaneous open.
fn lower(a: &EpAddr, b: &EpAddr) -> bool {
    (a.ip, a.port, a.ep_id) < (b.ip, b.port, b.ep_id)
}

/// The handshake packet `raw` without its MAC, and the MAC.
fn split_mac(raw: &[u8]) -> Option<(&[u8], &[u8])> {
    let len = wire::Packet::new_unchecked(raw).packet_len() as usize;
    let raw = raw.get(..len)?;
    let cut = len.checked_sub(MAC_LEN)?;
    Some((&raw[..cut], &raw[cut..]))
}

impl<S: Storage> Rdm<S> {
    fn auth_ok(&self, raw: &[u8], has_mac: bool, hello_nonce: Option<u64>) -> bool {
        match (self.auth.is_empty(), has_mac) {
            (true, false) => true,
            (false, true) => split_mac(raw)
                .is_some_and(|(signed, mac)| auth::verify(&self.auth, hello_nonce, signed, mac)),
            _ => false,
        }
    }

    /// Queues an unsessioned reply; dropped when the queue is full (the other side
    /// retries, so this only delays it).
    pub(super) fn queue_ctl(&mut self, to: EpAddr, session: u32, kind: CtlKind) {
        self.queue_answer(to, session, kind, None);
    }

    /// Queues REJECT or RETRY answering a HELLO with nonce `answers` (sealed under the
    /// answer key when `Some`, spec 4.10).
    pub(super) fn queue_answer(
        &mut self,
        to: EpAddr,
        session: u32,
        kind: CtlKind,
        answers: Option<u64>,
    ) {
        if self.ctl.push(CtlReply {
            to,
            session,
            kind,
            answers,
        }) {
            self.tx_ready = true;
        }
    }

    /// A RESET(UNKNOWN_SESSION) for a sequenced packet of a session we do not have,
    /// at most one per 50 µs.
    #[cold]
    pub(super) fn reset_unknown(&mut self, from: EpAddr, session: u32, now: Instant) {
        self.reset_peer(from, session, close::UNKNOWN_SESSION, now);
    }

    /// Queues RESET(`reason`) naming `session` to `from`, rate-limited (one per 50 µs).
    #[cold]
    pub(super) fn reset_peer(&mut self, from: EpAddr, session: u32, reason: u16, now: Instant) {
        if self
            .last_reset
            .is_some_and(|t| now.saturating_duration_since(t) < Duration::from_micros(50))
        {
            return;
        }
        self.last_reset = Some(now);
        self.queue_ctl(from, session, CtlKind::Reset(reason));
    }

    /// Sends queued REJECTs and RESETs. `false` when the link is full.
    pub(super) fn send_ctl_replies<P: TxPort>(&mut self, port: &mut P) -> bool {
        for i in 0..CtlQueue::CAPACITY {
            let Some(c) = self.ctl.get(i) else { continue };
            let header = Header {
                src_ep: self.local.ep_id,
                dst_ep: c.to.ep_id,
                session: c.session,
                seq: 0,
                crc: self.cfg.crc,
                ack_req: false,
            };
            let body = match c.kind {
                CtlKind::Reject(reason) => Body::Reject(RejectRepr {
                    reason,
                    ver_min: VERSION,
                    ver_max: VERSION,
                }),
                CtlKind::Reset(reason) => Body::Reset(CloseRepr { reason, ack: None }),
                CtlKind::Retry(cookie) => Body::Retry(RetryRepr { cookie }),
            };
            let seal = match (c.kind, c.answers) {
                (CtlKind::Reset(_), _) => mac::SealFor::Reset,
                (_, Some(nonce)) => mac::SealFor::Answer(nonce),
                (_, None) => mac::SealFor::Nothing,
            };
            match self.send_ctl(&c.to, &Repr { header, body }, seal, port) {
                Sent::LinkFull => return false,
                Sent::NotNow => continue,
                Sent::Yes => {
                    self.ctl.remove(i);
                    match c.kind {
                        CtlKind::Reject(_) => self.stats.rejects_sent += 1,
                        CtlKind::Reset(_) => self.stats.resets_sent += 1,
                        CtlKind::Retry(_) => self.stats.retries_sent += 1,
                    }
                }
            }
        }
        true
    }

    fn hello_body(&self, p: usize, ack: bool, cand: Option<&Cand>) -> (u32, HelloRepr) {
        let peer = &self.peers[p];
        let (rx_session, isn, credits, nonce) = match cand {
            Some(c) => (c.rx_session, c.local_isn, c.credits, c.our_nonce),
            None => (
                peer.session.rx_session,
                peer.session.local_isn,
                if ack {
                    peer.session.init_credits
                } else {
                    self.credits_for(p)
                },
                peer.session.our_nonce,
            ),
        };
        (
            isn,
            HelloRepr {
                ver_min: VERSION,
                ver_max: VERSION,
                rx_session,
                isn,
                window: self.cfg.span(),
                max_pkt: self.max_pkt as u16,
                credits,
                caps: our_caps(self.cfg.crc) | self.mac_caps(),
                nonce,
                cookie: if ack { None } else { peer.session.cookie },
                mac: (!self.auth.is_empty()).then_some([0; MAC_LEN]),
            },
        )
    }

    fn send_handshake<P: TxPort>(
        &mut self,
        to: EpAddr,
        head: Repr<'_>,
        hello_nonce: Option<u64>,
        port: &mut P,
    ) -> Sent {
        let len = head.buffer_len();
        let key = &self.auth;
        let r = port.send(&to, len, |buf| {
            let Some(b) = buf.get_mut(..len) else {
                return 0;
            };
            if head.emit_bytes(b).is_err() {
                return 0;
            }
            if !key.is_empty() {
                auth::sign_packet(key, hello_nonce, b);
            }
            len
        });
        if r == Sent::Yes {
            self.stats.tx_packets += 1;
        }
        r
    }

    /// Sends our HELLO to peer `p`.
    pub(super) fn send_hello<P: TxPort>(&mut self, p: usize, _now: Instant, port: &mut P) -> Sent {
        let (isn, body) = self.hello_body(p, false, None);
        let peer = &self.peers[p];
        let header = Header {
            src_ep: self.local.ep_id,
            dst_ep: peer.addr.ep_id,
            session: 0,
            seq: isn,
            crc: self.cfg.crc,
            ack_req: false,
        };
        let to = peer.addr;
        let r = self.send_handshake(
            to,
            Repr {
                header,
                body: Body::Hello(body),
            },
            None,
            port,
        );
        if r == Sent::Yes {
            self.stats.hellos_sent += 1;
        }
        r
    }

    /// Sends HELLO_ACK for the current session of `p` (or its candidate).
    pub(super) fn send_hello_ack<P: TxPort>(
        &mut self,
        p: usize,
        cand: bool,
        _now: Instant,
        port: &mut P,
    ) -> Sent {
        let peer = self.peers[p];
        let c = if cand { peer.session.cand } else { None };
        if cand && c.is_none() {
            return Sent::Yes;
        }
        let (isn, body) = self.hello_body(p, true, c.as_ref());
        let (session, their_nonce) = match &c {
            Some(c) => (c.tx_session, c.their_nonce),
            None => (peer.session.tx_session, peer.session.their_nonce),
        };
        let header = Header {
            src_ep: self.local.ep_id,
            dst_ep: peer.addr.ep_id,
            session,
            seq: isn,
            crc: self.cfg.crc || peer.session.params.caps & wcaps::CRC_RX != 0,
            ack_req: false,
        };
        self.send_handshake(
            peer.addr,
            Repr {
                header,
                body: Body::HelloAck(body),
            },
            Some(their_nonce),
            port,
        )
    }

    /// A HELLO from `from` to this endpoint.
    #[cold]
    pub(super) fn on_hello(
        &mut self,
        from: EpAddr,
        h: &HelloRepr,
        raw: &[u8],
        now: Instant,
        ctx: &mut Ctx<'_, S>,
    ) {
        if !(h.ver_min <= VERSION && VERSION <= h.ver_max) {
            self.stats.rx_bad_handshake += 1;
            let a = self.answer_to(h);
            self.queue_answer(from, h.rx_session, CtlKind::Reject(reject::VERSION), a);
            return;
        }
        // With a key, a peer that would not MAC its packets is refused as one
        // without the key (spec 4.10: no downgrade).
        if !self.auth_ok(raw, h.mac.is_some(), None) || !self.mac_peer_ok(h.caps) {
            self.stats.auth_failures += 1;
            let a = self.answer_to(h);
            self.queue_answer(from, h.rx_session, CtlKind::Reject(reject::AUTH_FAILED), a);
            return;
        }
        let params = Params {
            max_pkt: h.max_pkt,
            window: h.window,
            caps: h.caps,
        };
        if from == self.local {
            return self.on_own_hello(h, params, now);
        }
        let (p, confirmed) = match self.peers.find(&from) {
            Some(p) => (p, false),
            None => {
                // Nothing of this address yet: no state until it proves it receives.
                let Some(confirmed) = self.admit(from, h, now) else {
                    return;
                };
                match self.peer_slot(&from, now) {
                    Ok(p) => (p, confirmed),
                    Err(_) => {
                        let (a, k) = (self.answer_to(h), CtlKind::Reject(reject::NO_RESOURCES));
                        self.queue_answer(from, h.rx_session, k, a);
                        return;
                    }
                }
            }
        };
        let peer = self.peers[p];
        match peer.state {
            PeerState::Established => {
                if peer.session.tx_session == h.rx_session {
                    // Our HELLO_ACK was lost: the same answer again.
                    self.peers[p].session.send_hello_ack = true;
                    self.tx_ready = true;
                } else if let Some(c) = peer.session.cand.filter(|c| c.tx_session == h.rx_session) {
                    let _ = c;
                    if let Some(c) = self.peers[p].session.cand.as_mut() {
                        c.send_ack = true;
                    }
                    self.tx_ready = true;
                } else {
                    // A new session from a peer we are connected to (it restarted or
                    // failed us): offer it, switch when its first packet arrives.
                    let cand = Cand {
                        rx_session: self.rng.nonzero_u32(),
                        tx_session: h.rx_session,
                        local_isn: self.rng.next_u64() as u32,
                        remote_isn: h.isn,
                        params,
                        credits: self.credits_for(p),
                        our_nonce: self.rng.next_u64(),
                        their_nonce: h.nonce,
                        expires: now + self.cfg.handshake_timeout,
                        send_ack: true,
                    };
                    self.peers[p].session.cand = Some(cand);
                    self.tx_ready = true;
                }
            }
            PeerState::HelloSent if !lower(&from, &self.local) => {
                // Simultaneous open and our HELLO wins: the peer will answer it.
                self.stats.rx_bad_handshake += 1;
            }
            PeerState::HelloSent | PeerState::Idle | PeerState::Failed => {
                // (HelloSent here: simultaneous open that the peer's HELLO wins; our
                // queued operations move to its session.)
                let rx_session = if peer.state == PeerState::HelloSent {
                    peer.session.rx_session
                } else {
                    self.rng.nonzero_u32()
                };
                let isn = self.rng.next_u64() as u32;
                let nonce = self.rng.next_u64();
                self.install_session(
                    p,
                    rx_session,
                    h.rx_session,
                    isn,
                    h.isn,
                    params,
                    h.credits,
                    now,
                );
                let credits = self.credits_for(p);
                let pm = &mut self.peers[p];
                pm.session.our_nonce = nonce;
                pm.session.their_nonce = h.nonce;
                pm.session.init_credits = credits;
                pm.session.send_hello_ack = true;
                pm.session.confirmed |= confirmed;
                self.mac_install(p, false);
                let _ = ctx;
            }
        }
    }

    /// Whether a HELLO from `from`, which has no peer slot, may have one (spec 4.2):
    /// `Some(true)` when it echoes a valid cookie of ours (the initiator receives at
    /// its address), `Some(false)` for an older initiator without capability COOKIE
    /// while at least half the table is free (served as before, its session
    /// unconfirmed until its first packet). Otherwise `None`, and the answer is
    /// stateless: a RETRY with a fresh cookie, REJECT(NO_RESOURCES) to an older
    /// initiator, nothing to a forged cookie. Costs one HMAC and keeps nothing.
    fn admit(&mut self, from: EpAddr, h: &HelloRepr, now: Instant) -> Option<bool> {
        if h.caps & wcaps::COOKIE == 0 {
            if self.peers.len() * 2 < self.peers.capacity() {
                return Some(false);
            }
            self.stats.legacy_hellos_refused += 1;
            let a = self.answer_to(h);
            self.queue_answer(from, h.rx_session, CtlKind::Reject(reject::NO_RESOURCES), a);
            return None;
        }
        let local_ep = self.local.ep_id;
        if let Some(c) = &h.cookie {
            match self.cookie_key.check(now, c, &from, local_ep, h) {
                Ok(()) => return Some(true),
                Err(Refused::Expired) => self.stats.rx_stale_cookie += 1,
                Err(Refused::Forged) => {
                    self.stats.rx_bad_cookie += 1;
                    return None;
                }
            }
        }
        let c = self.cookie_key.make(now, &from, local_ep, h);
        let a = self.answer_to(h);
        self.queue_answer(from, h.rx_session, CtlKind::Retry(c), a);
        None
    }

    /// A RETRY: the responder wants our HELLO again with its cookie. Accepted for our
    /// pending HELLO (its `session` is our `rx_session`); the HELLO goes at once,
    /// within the same retry budget (a RETRY does not reset it).
    #[cold]
    pub(super) fn on_retry(&mut self, from: EpAddr, header: &Header, r: &RetryRepr, now: Instant) {
        let Some(p) = self.peers.find(&from).filter(|_| from != self.local) else {
            self.stats.rx_bad_handshake += 1;
            return;
        };
        let pm = &mut self.peers[p];
        if pm.state != PeerState::HelloSent
            || header.session != pm.session.rx_session
            || pm.session.cookie == Some(r.cookie)
        {
            // Stray, or a duplicate of the RETRY we answered already.
            self.stats.rx_bad_handshake += 1;
            return;
        }
        pm.session.cookie = Some(r.cookie);
        pm.session.hello_at = now;
        self.stats.retries_received += 1;
        self.tx_ready = true;
        self.arm(now);
    }

    /// A HELLO from our own address: we send to ourselves (spec 4.2, self session).
    /// The one peer slot of our address plays both roles, so the simultaneous-open
    /// rule cannot settle it (neither side is lower) and nobody else would answer:
    /// our own pending HELLO (our `rx_session`, `isn` and `nonce`, already checked
    /// like any HELLO) is its own HELLO_ACK. The session has one sequence space for
    /// both directions (`tx_session == rx_session`, `local_isn == remote_isn`). Any
    /// other HELLO from our address (a stale or duplicate one, or a forgery) is
    /// dropped: answering it would open a session whose two directions disagree.
    fn on_own_hello(&mut self, h: &HelloRepr, params: Params, now: Instant) {
        let Some(p) = self.peers.find(&self.local) else {
            self.stats.rx_bad_handshake += 1;
            return;
        };
        let peer = self.peers[p];
        let ours = h.rx_session == peer.session.rx_session
            && h.isn == peer.session.local_isn
            && h.nonce == peer.session.our_nonce;
        match peer.state {
            PeerState::HelloSent if ours => {
                self.install_session(
                    p,
                    peer.session.rx_session,
                    peer.session.rx_session,
                    peer.session.local_isn,
                    peer.session.local_isn,
                    params,
                    h.credits,
                    now,
                );
                let credits = self.credits_for(p);
                let pm = &mut self.peers[p];
                pm.session.their_nonce = h.nonce;
                pm.session.init_credits = credits;
                pm.last_heard_ok(now);
                self.mac_install(p, true);
            }
            // A retransmission of the HELLO that established the session: nothing
            // to answer (it already acknowledged itself).
            PeerState::Established
                if ours && peer.session.tx_session == peer.session.rx_session => {}
            _ => self.stats.rx_bad_handshake += 1,
        }
    }

    /// A HELLO_ACK: completes our handshake.
    #[cold]
    pub(super) fn on_hello_ack(
        &mut self,
        from: EpAddr,
        header: &Header,
        h: &HelloRepr,
        raw: &[u8],
        now: Instant,
        ctx: &mut Ctx<'_, S>,
    ) {
        // We never answer our own HELLO with a HELLO_ACK (it is its own, see
        // `on_own_hello`): one from our own address is forged or stray.
        let Some(p) = self.peers.find(&from).filter(|_| from != self.local) else {
            self.stats.rx_bad_handshake += 1;
            return;
        };
        let peer = self.peers[p];
        if peer.state != PeerState::HelloSent || header.session != peer.session.rx_session {
            // A duplicate of the one that established the session, or stray.
            self.stats.rx_bad_handshake += 1;
            return;
        }
        if h.ver_min != VERSION {
            self.stats.rx_bad_handshake += 1;
            return;
        }
        if !self.auth_ok(raw, h.mac.is_some(), Some(peer.session.our_nonce)) {
            self.stats.auth_failures += 1;
            return;
        }
        if !self.mac_peer_ok(h.caps) {
            // The responder has the key (its proof is valid) but would not MAC its
            // packets: under a key that is no session (spec 4.10).
            self.stats.auth_failures += 1;
            self.fail_peer(p, Errno::EKEYREJECTED, Keep::Nothing, now, ctx);
            return;
        }
        let params = Params {
            max_pkt: h.max_pkt,
            window: h.window,
            caps: h.caps,
        };
        self.install_session(
            p,
            peer.session.rx_session,
            h.rx_session,
            peer.session.local_isn,
            h.isn,
            params,
            h.credits,
            now,
        );
        let pm = &mut self.peers[p];
        pm.session.their_nonce = h.nonce;
        pm.last_heard_ok(now);
        self.mac_install(p, true);
    }

    /// If `session` is the candidate session of peer `p`, makes it the session (the
    /// old one's operations fail with -FI_ECONNRESET). Returns whether it switched.
    #[cold]
    pub(super) fn adopt_candidate(
        &mut self,
        p: usize,
        session: u32,
        now: Instant,
        ctx: &mut Ctx<'_, S>,
    ) -> bool {
        let Some(c) = self.peers[p]
            .session
            .cand
            .filter(|c| c.rx_session == session)
        else {
            return false;
        };
        if self.peers[p].state == PeerState::Established {
            self.fail_peer(p, Errno::ECONNRESET, Keep::Unstarted, now, ctx);
        }
        self.install_session(
            p,
            c.rx_session,
            c.tx_session,
            c.local_isn,
            c.remote_isn,
            c.params,
            c.credits,
            now,
        );
        let credits = self.credits_for(p);
        let pm = &mut self.peers[p];
        pm.session.our_nonce = c.our_nonce;
        pm.session.their_nonce = c.their_nonce;
        pm.session.init_credits = credits;
        pm.session.cand = None;
        self.mac_install(p, false);
        true
    }

    /// A REJECT of our HELLO.
    #[cold]
    pub(super) fn on_reject(
        &mut self,
        from: EpAddr,
        header: &Header,
        r: &RejectRepr,
        now: Instant,
        ctx: &mut Ctx<'_, S>,
    ) {
        let Some(p) = self.peers.find(&from) else {
            self.stats.rx_bad_handshake += 1;
            return;
        };
        let peer = self.peers[p];
        if peer.state != PeerState::HelloSent || header.session != peer.session.rx_session {
            self.stats.rx_bad_handshake += 1;
            return;
        }
        if r.reason == reject::VERSION && (r.ver_min..=r.ver_max).contains(&VERSION) {
            // The rejecter speaks our version: what it refused was not our HELLO as
            // sent (a corrupted copy whose version byte changed). Keep asking.
            self.stats.rx_bad_handshake += 1;
            return;
        }
        self.stats.resets_received += 1;
        if r.reason == reject::NO_RESOURCES {
            // Its peer table is full of sessions too recent to forget: one will be
            // idle long enough within `idle_evict`. Ask again (same session) every
            // `rto_max` until then: back-pressure, not a failed send.
            let wait = self.idle_evict() + self.idle_evict();
            let retry = self.cfg.rto_max;
            let pm = &mut self.peers[p];
            let until = *pm.session.busy_until.get_or_insert(now + wait);
            if now < until {
                pm.session.hello_tries = 0;
                pm.session.hello_at = now + retry;
                self.stats.hello_busy += 1;
                return;
            }
        }
        let err = match r.reason {
            reject::AUTH_FAILED => Errno::EKEYREJECTED,
            _ => Errno::ECONNREFUSED,
        };
        self.fail_peer(p, err, Keep::Nothing, now, ctx);
    }

    /// A RESET: accepted when it names our receive session, or (UNKNOWN_SESSION, which
    /// echoes the session of the packet it answers) our transmit session.
    #[cold]
    pub(super) fn on_reset(
        &mut self,
        from: EpAddr,
        header: &Header,
        r: &CloseRepr,
        now: Instant,
        ctx: &mut Ctx<'_, S>,
    ) {
        let Some(p) = self.peers.find(&from) else {
            self.stats.rx_unknown_session += 1;
            return;
        };
        let peer = self.peers[p];
        let ours = peer.state == PeerState::Established
            && (header.session == peer.session.rx_session
                || (r.reason == close::UNKNOWN_SESSION
                    && header.session == peer.session.tx_session));
        if !ours {
            self.stats.rx_unknown_session += 1;
            return;
        }
        self.stats.resets_received += 1;
        // UNKNOWN_SESSION: the peer holds nothing of the session (it forgot an idle
        // one, or restarted), so sends of which nothing was acknowledged were not
        // delivered and go again on a new session.
        let keep = if r.reason == close::UNKNOWN_SESSION {
            Keep::Unacknowledged
        } else {
            Keep::Unstarted
        };
        self.fail_peer(p, Errno::ECONNRESET, keep, now, ctx);
        if self.peers[p].tx.op_head != NIL {
            // Sends that had not started survive: a new session carries them.
            self.start_hello(p, now);
        }
    }
}

impl super::peer::Peer {
    /// Any valid packet from the peer proves it alive. A watched peer's probe timer
    /// keeps running (one probe per `rto_max` however busy: no rescan per packet).
    pub(super) fn last_heard_ok(&mut self, now: Instant) {
        self.tx.timeouts = 0;
        if !self.watched {
            self.tx.live_at = None;
        }
        self.last_active = now;
        self.session.busy_until = None;
        self.session.confirmed = true;
    }
}
