//! Progress and demultiplexing: the pass (receive, then transmit), the deadline the
//! caller sleeps until, and where each received datagram goes (an RDM endpoint's
//! engine, a DGRAM endpoint's receives, or a REJECT the domain owes).

use wire::link::{Link, UdpAddr};
use wire::packet::{Body, Header, Repr};

use super::Domain;
use super::resource::Resources;
use crate::addr::EpAddr;
use crate::dgram::TxCompletions;
use crate::ep::{Engine, EpObj, EpState};
use crate::errno::{Errno, Result};
use crate::flags::Flags;
use crate::info::EpType;
use crate::mem::Memory;
use crate::net::{ALL_QUEUES, ArpEntry, Net, RxOutcome, SendOutcome};
use crate::rdm::{Sent, TxPort};
use crate::storage::Storage;
use crate::time::Instant;

/// Which parts of a progress pass run ([`Domain::progress_pass`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassKind {
    /// Receive, then transmit (unless deferred): [`Domain::progress`].
    Full,
    /// Transmit everything, timers and deferred work included (what a caller about to
    /// sleep runs when [`Domain::transmit_owed`]).
    Transmit,
    /// Transmit what was posted: [`Domain::progress_tx`].
    Posted,
}

/// What one call of [`Domain::progress`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProgressReport {
    /// Datagrams received from the link (and from the loopback queue on raw links).
    pub rx: usize,
    /// Datagrams handed to the link.
    pub tx: usize,
}

/// The passes of several queues together.
impl core::ops::AddAssign for ProgressReport {
    fn add_assign(&mut self, o: ProgressReport) {
        self.rx += o.rx;
        self.tx += o.tx;
    }
}

impl<S: Storage> Domain<S> {
    /// Moves data: receives what the link has (up to a burst), delivers it to posted
    /// receives (DGRAM) or runs it through the reliability engine (RDM), answers ARP,
    /// runs due timers (retransmissions, delayed acks, handshake retries, probes, peer
    /// failure) and transmits while the link has room. Completions go to the bound CQs
    /// and counters. Never blocks. Call it again by [`Domain::poll_timeout`] at the
    /// latest.
    pub fn progress<L: Link, M: Memory>(
        &mut self,
        now: Instant,
        link: &mut L,
        mem: &mut M,
    ) -> Result<ProgressReport> {
        self.pass(now, link, mem, PassKind::Full, ALL_QUEUES)
    }

    /// The transmit half of [`Domain::progress`] for what was posted: what a data-path
    /// post runs so that its packet leaves at once, without paying for a receive (the
    /// application's next CQ read receives). An RDM endpoint serves the peers sends
    /// were posted to; other peers and timers wait for the next full pass, which
    /// `poll_timeout` names (or run here when they are due already).
    pub fn progress_tx<L: Link, M: Memory>(
        &mut self,
        now: Instant,
        link: &mut L,
        mem: &mut M,
    ) -> Result<ProgressReport> {
        self.pass(now, link, mem, PassKind::Posted, ALL_QUEUES)
    }

    /// A pass of the parts `kind` names: [`Domain::progress`], [`Domain::progress_tx`],
    /// or (`PassKind::Transmit`) the whole transmit half without receiving, what a
    /// caller about to sleep runs when [`Domain::transmit_owed`].
    pub fn progress_pass<L: Link, M: Memory>(
        &mut self,
        now: Instant,
        link: &mut L,
        mem: &mut M,
        kind: PassKind,
    ) -> Result<ProgressReport> {
        self.pass(now, link, mem, kind, ALL_QUEUES)
    }

    /// A pass of the parts `kind` names for the endpoints of data-plane queue `queue`
    /// ([`DomainConfig::queues`](super::DomainConfig::queues)), receiving from `link`,
    /// that queue's link: what the thread that polls a context of a scalable endpoint
    /// runs, so that it neither receives nor transmits for the other contexts. A
    /// datagram for an endpoint of another queue (a plane that steers imperfectly) is
    /// still delivered; that endpoint answers in its own queue's pass. Queue 0 also
    /// runs what belongs to no context: plain endpoints, connection management, the
    /// domain's REJECTs and datagrams to itself. [`ALL_QUEUES`] is
    /// [`Domain::progress_pass`] (every endpoint, over one link).
    ///
    /// A domain with several queues needs a pass of each (the link of each) to make
    /// progress everywhere; [`Domain::poll_timeout`] covers every queue.
    pub fn progress_queue<L: Link, M: Memory>(
        &mut self,
        queue: u8,
        now: Instant,
        link: &mut L,
        mem: &mut M,
        kind: PassKind,
    ) -> Result<ProgressReport> {
        self.pass(now, link, mem, kind, queue)
    }

    /// The number of data-plane queues ([`DomainConfig::queues`](super::DomainConfig::queues)).
    pub fn queues(&self) -> usize {
        self.queues as usize
    }

    /// The data-plane queue whose passes progress endpoint `ep` ([`ALL_QUEUES`] for a
    /// handle that is not an endpoint's).
    pub fn ep_queue(&self, ep: crate::ep::EpHandle<S>) -> u8 {
        self.eps.get(ep).map_or(ALL_QUEUES, |e| e.queue)
    }

    /// The one data-plane queue whose passes complete what CQ `cq` reports
    /// ([`CqObj::queue`](crate::cq::Cq::queue); [`ALL_QUEUES`] when its endpoints are
    /// on several queues, or for a handle that is not a CQ's).
    pub fn cq_queue(&self, cq: crate::fid::CqHandle<S>) -> u8 {
        self.res.cqs.get(cq).map_or(ALL_QUEUES, |c| c.queue())
    }

    fn pass<L: Link, M: Memory>(
        &mut self,
        now: Instant,
        link: &mut L,
        mem: &mut M,
        kind: PassKind,
        q: u8,
    ) -> Result<ProgressReport> {
        let receive = kind == PassKind::Full;
        // Queue 0 (or a pass of all) also serves what no context owns.
        let first = q == 0 || q == ALL_QUEUES;
        let owed = if q == ALL_QUEUES {
            u64::MAX
        } else {
            1u64 << (q as u32 % 64)
        };
        self.last_now = now;
        let mut report = ProgressReport::default();
        // Work the application made possible since the last call comes first: it is
        // older than anything the link has now.
        self.rdm_prepare(now, mem, q);
        if receive {
            let mut transport = false;
            // Datagrams we sent ourselves (raw links only) are older than the link's.
            if let Some(mut looped) = self.net.lend_looped().filter(|_| first) {
                let src = self.net.local_addr();
                while looped.pop(|d| self.rx_datagram(now, src, d, mem)).is_some() {
                    report.rx += 1;
                    transport = true;
                }
                self.net.return_looped(looped);
            }
            let burst = link.capabilities().max_burst.max(1) * 4;
            report.rx += link.receive_burst(burst, |meta, buf| {
                if let RxOutcome::Packet { src, payload } = self.net.rx(now, meta, buf) {
                    transport = true;
                    self.rx_datagram(now, src, payload, mem);
                }
            });
            // Shared receive contexts' waiting receives take what arrived; lent
            // multi-recv buffers move on once what was arriving into them landed.
            // Copies into receives handed over now run in this pass, so they complete
            // in the pass that received their messages, as own receives do.
            #[cfg(feature = "shared-ctx")]
            if ((transport && self.shared.waiting > 0) || self.shared.lent > 0)
                && self.srx_progress()
            {
                self.rdm_prepare(now, mem, q);
            }
            // What arrived is in the CQs now: hand it to the application before the
            // transmit half, which the next pass runs (the application's next post or
            // read; `poll_timeout` says "at once" meanwhile). A reply the application
            // posts then leaves without waiting for this pass's timers and scans, and
            // carries the acknowledgement. Never two passes in a row: a stream of
            // arrivals cannot starve transmission. Only routine work waits: ARP alone,
            // an acknowledgement due at once, a control answer or a DGRAM send
            // defer nothing.
            if transport && self.tx_owed & owed != owed && !self.tx_urgent(q) {
                self.tx_owed |= owed;
                return Ok(report);
            }
        }
        // A post's pass leaves what a receiving pass deferred to the next full pass.
        let posted_only = kind == PassKind::Posted;
        if !posted_only {
            self.tx_owed &= !owed;
        }
        self.net.poll_tx(now, link);
        report.tx = self.tx_all(now, link, mem, q);
        report.tx += self.rdm_tx_all(now, link, mem, posted_only, q);
        if first {
            report.tx += self.cm_tx(now, link);
        }
        Ok(report)
    }

    /// The last pass received and left its transmit half to the next pass (see
    /// [`Domain::progress`]). A caller about to sleep runs a [`PassKind::Transmit`]
    /// pass first, so nothing waits for the sleep.
    pub fn transmit_owed(&self) -> bool {
        self.tx_owed != 0
    }

    /// [`Domain::transmit_owed`] of one data-plane queue's pass.
    pub fn transmit_owed_on(&self, queue: u8) -> bool {
        (queue == ALL_QUEUES && self.tx_owed != 0)
            || self.tx_owed & (1u64 << (queue as u32 % 64)) != 0
    }

    /// Whether the transmit half of queue `q`'s pass has work that must not wait for
    /// the next pass.
    fn tx_urgent(&self, q: u8) -> bool {
        (self.ctl_n > 0 && (q == 0 || q == ALL_QUEUES))
            || self.eps.iter().any(|(_, ep)| {
                on_queue(ep, q)
                    && match &ep.engine {
                        Engine::Rdm(r) => r.tx_urgent(),
                        Engine::Dgram(d) => !d.tx.is_empty(),
                    }
            })
    }

    /// The latest instant at which [`Domain::progress`] must run again even if nothing
    /// arrives (retransmission, delayed-ack, handshake, probe and failure timers), or
    /// `None` when no timer is armed. An instant not after the last `progress` call means
    /// "as soon as possible" (work is ready, e.g. after posting a send).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t: Option<Instant> = None;
        if self.tx_owed != 0 || self.ctl_n > 0 || self.net.has_looped() {
            t = Some(self.last_now);
        }
        if let Some(d) = self.cm_timeout() {
            t = Some(d);
        }
        for (_, ep) in self.eps.iter() {
            match &ep.engine {
                Engine::Rdm(r) => {
                    if let Some(d) = r.poll_timeout(self.last_now) {
                        t = Some(t.map_or(d, |x: Instant| x.min(d)));
                    }
                }
                Engine::Dgram(d) => {
                    if !d.tx.is_empty() && ep.state == EpState::Enabled {
                        t = Some(self.last_now);
                    }
                }
            }
        }
        t
    }

    /// Every pass asks each endpoint whether it has copies or blocked packets to retry
    /// (rarely): the question is inline in the pass, the work out of line (out of line
    /// together, the call and its frame cost 15% of a pass; callgrind, safe API).
    #[inline]
    fn rdm_prepare<M: Memory>(&mut self, now: Instant, mem: &mut M, q: u8) {
        for (_, ep) in self.eps.iter_mut() {
            if ep.state == EpState::Enabled
                && on_queue(ep, q)
                && ep.rdm().is_some_and(|r| r.prepare_due())
            {
                Self::rdm_prepare_ep(&mut self.res, ep, now, mem);
            }
        }
    }

    /// The work of [`Domain::rdm_prepare`] for endpoint `ep`.
    #[inline(never)]
    fn rdm_prepare_ep<M: Memory>(
        res: &mut Resources<S>,
        ep: &mut EpObj<S>,
        now: Instant,
        mem: &mut M,
    ) {
        let (mut ctx, rdm) = res.rdm_ctx(ep);
        if let Some(r) = rdm {
            r.flush_copies(mem, &mut ctx);
            r.retry_blocked(now, mem, &mut ctx);
        }
    }

    fn rdm_tx_all<L: Link, M: Memory>(
        &mut self,
        now: Instant,
        link: &mut L,
        mem: &M,
        posted_only: bool,
        q: u8,
    ) -> usize {
        let mut port = NetPort {
            net: &mut self.net,
            link,
            now,
            full: false,
            unreachable: false,
        };
        let mut sent = 0;
        for i in 0..self.ctl.len() {
            if self.ctl_n == 0 || !(q == 0 || q == ALL_QUEUES) {
                break;
            }
            let Some((to, from_ep, session, reason)) = self.ctl[i] else {
                continue;
            };
            let head = Repr {
                header: Header {
                    src_ep: from_ep,
                    dst_ep: to.ep_id,
                    session,
                    seq: 0,
                    crc: false,
                    ack_req: false,
                },
                body: Body::Reject(wire::packet::RejectRepr {
                    reason,
                    ver_min: wire::packet::VERSION,
                    ver_max: wire::packet::VERSION,
                }),
            };
            let len = head.buffer_len();
            match port.send(&to, len, |b| {
                b.get_mut(..len)
                    .and_then(|b| head.emit_bytes(b).ok())
                    .unwrap_or(0)
            }) {
                Sent::LinkFull => return sent,
                Sent::NotNow => {}
                Sent::Yes => {
                    self.ctl[i] = None;
                    self.ctl_n -= 1;
                    self.stats.tx_packets += 1;
                    sent += 1;
                }
            }
        }
        for (_, ep) in self.eps.iter_mut() {
            // An endpoint with nothing due is skipped before its context is built:
            // the busy-poll loop runs this on every empty pass.
            let due = match &ep.engine {
                Engine::Rdm(r) => posted_only || r.transmit_due(now),
                Engine::Dgram(_) => false,
            };
            if ep.state != EpState::Enabled || !due || !on_queue(ep, q) {
                continue;
            }
            let (mut ctx, rdm) = self.res.rdm_ctx(ep);
            if let Some(r) = rdm {
                let n = if posted_only {
                    r.transmit_posted(now, &mut port, mem, &mut ctx)
                } else {
                    r.transmit(now, &mut port, mem, &mut ctx)
                };
                sent += n;
                self.stats.tx_packets += n as u64;
            }
            if port.full {
                break;
            }
        }
        sent
    }

    #[cold]
    fn count_malformed(&mut self, e: wire::Error) {
        let s = &mut self.stats;
        s.rx_malformed += 1;
        match e {
            wire::Error::Truncated => s.rx_truncated += 1,
            wire::Error::BadMagic => s.rx_bad_magic += 1,
            wire::Error::BadVersion => s.rx_bad_version += 1,
            wire::Error::UnknownType => s.rx_unknown_type += 1,
            wire::Error::BadLength => s.rx_bad_length += 1,
            wire::Error::BadChecksum => s.rx_bad_checksum += 1,
            wire::Error::BadFlags => s.rx_bad_flags += 1,
            _ => s.rx_bad_field += 1,
        }
    }

    /// Queues a REJECT the domain owes (no endpoint, or a version we do not speak).
    #[cold]
    fn queue_reject(&mut self, to: EpAddr, from_ep: u16, session: u32, reason: u16) {
        if let Some(slot) = self.ctl.iter_mut().find(|c| c.is_none()) {
            *slot = Some((to, from_ep, session, reason));
            self.ctl_n += 1;
        }
    }

    pub(super) fn rx_datagram(
        &mut self,
        now: Instant,
        src: UdpAddr,
        buf: &[u8],
        mem: &mut impl Memory,
    ) {
        let repr = match Repr::parse_bytes(buf) {
            Ok(r) => r,
            Err(e) => {
                self.count_malformed(e);
                // A HELLO in another version still deserves REJECT(VERSION) (spec 4.4).
                if e == wire::Error::BadVersion && buf.len() >= 32 && buf[3] == 0x01 {
                    let be16 = |i: usize| u16::from_be_bytes([buf[i], buf[i + 1]]);
                    let session = u32::from_be_bytes([buf[28], buf[29], buf[30], buf[31]]);
                    let to = EpAddr {
                        ip: src.ip.octets(),
                        port: src.port,
                        ep_id: be16(8),
                    };
                    let dst_ep = be16(10);
                    if self
                        .eps
                        .get_by_index(self.route(dst_ep))
                        .is_some_and(|(_, ep)| ep.is_rdm())
                    {
                        self.queue_reject(to, dst_ep, session, wire::packet::reject::VERSION);
                    }
                }
                return;
            }
        };
        let from = EpAddr {
            ip: src.ip.octets(),
            port: src.port,
            ep_id: repr.header.src_ep,
        };
        if repr.packet_type().is_cm() {
            self.stats.rx_packets += 1;
            return self.rx_cm(now, from, &repr);
        }
        let is_dgram = matches!(repr.body, Body::Dgram(_));
        let slot = self.route(repr.header.dst_ep);
        let rdm_ep = self
            .eps
            .get_by_index(slot)
            .is_some_and(|(_, ep)| ep.is_rdm());
        if !is_dgram && !rdm_ep {
            self.stats.rx_packets += 1;
            if self.eps.get_by_index(slot).is_none() {
                self.stats.rx_no_endpoint += 1;
                if let Body::Hello(h) = &repr.body {
                    self.queue_reject(
                        from,
                        repr.header.dst_ep,
                        h.rx_session,
                        wire::packet::reject::NO_ENDPOINT,
                    );
                }
            } else {
                self.stats.rx_wrong_type += 1;
            }
            return;
        }
        if rdm_ep {
            self.stats.rx_packets += 1;
            let Some(ep) = self.eps.get_mut_by_index(slot) else {
                return;
            };
            if ep.ep_type == EpType::Msg && !self.cm.admits(slot, &from) {
                return;
            }
            if ep.state != EpState::Enabled || is_dgram {
                self.stats.rx_wrong_type += 1;
                return;
            }
            #[cfg(feature = "shared-ctx")]
            let shared = ep.srx.map(|sh| (sh, ep.ep_type));
            let (mut ctx, rdm) = self.res.rdm_ctx(ep);
            // A message no own receive takes goes into a receive of the endpoint's
            // shared receive context at once.
            #[cfg(feature = "shared-ctx")]
            let mut lend = shared.and_then(|(sh, t)| self.shared.offer(sh, t));
            #[cfg(feature = "shared-ctx")]
            if let Some(l) = lend.as_mut() {
                ctx.srx = Some(l);
            }
            if let Some(r) = rdm {
                r.on_packet(now, from, &repr, buf, mem, &mut ctx);
            }
            return;
        }
        self.stats.rx_packets += 1;
        let Body::Dgram(d) = repr.body else {
            self.stats.rx_wrong_type += 1;
            return;
        };
        #[cfg(feature = "shared-ctx")]
        if self.shared.busy() {
            self.srx_feed(slot, &from);
        }
        let Some(ep) = self.eps.get_mut_by_index(slot) else {
            self.stats.rx_no_endpoint += 1;
            return;
        };
        if ep.ep_type != EpType::Dgram || ep.state != EpState::Enabled {
            self.stats.rx_wrong_type += 1;
            return;
        }
        let (Some(av), Some(bind)) = (ep.av.and_then(|a| self.res.avs.get(a)), ep.rx_cq.as_ref())
        else {
            self.stats.rx_unbound += 1;
            return;
        };
        let Some(cq) = self.res.cqs.get_mut(bind.cq) else {
            self.stats.rx_unbound += 1;
            return;
        };
        let (src_fi, report_src) = av.message_source(&from, ep.caps.contains(Flags::SOURCE));
        let cntr = ep.cntrs.recv.and_then(|c| self.res.cntrs.get_mut(c));
        let Engine::Dgram(dg) = &mut ep.engine else {
            return;
        };
        dg.deliver(
            cq,
            bind.selective,
            self.res.rm_enabled,
            cntr,
            src_fi,
            report_src,
            d,
            mem,
        );
    }

    /// The transmit half of every enabled DGRAM endpoint, in pool order, until the link
    /// is full.
    fn tx_all<L: Link>(
        &mut self,
        now: Instant,
        link: &mut L,
        mem: &mut impl Memory,
        q: u8,
    ) -> usize {
        let mut sent = 0;
        for (_, ep) in self.eps.iter_mut() {
            if ep.state != EpState::Enabled || !on_queue(ep, q) {
                continue;
            }
            let Engine::Dgram(dg) = &mut ep.engine else {
                continue;
            };
            let mut to = TxCompletions {
                cqs: &mut self.res.cqs,
                cntrs: &mut self.res.cntrs,
                tx_cq: ep.tx_cq.as_ref().map(|b| b.cq),
                send_cntr: ep.cntrs.send,
                ep_context: ep.context,
            };
            let t = dg.transmit(ep.id, now, &mut self.net, link, mem, &mut to);
            sent += t.sent;
            self.stats.tx_packets += t.sent as u64;
            if t.link_full {
                return sent;
            }
        }
        sent
    }
}

/// Whether a pass of queue `q` progresses `ep`.
#[inline]
fn on_queue<S: Storage>(ep: &EpObj<S>, q: u8) -> bool {
    q == ALL_QUEUES || ep.queue == q
}

/// The engine's view of the link: UDP/IPv4 through the net layer.
struct NetPort<'a, A, B, L> {
    net: &'a mut Net<A, B>,
    link: &'a mut L,
    now: Instant,
    full: bool,
    /// The last send found no way to its destination (`EHOSTUNREACH`).
    unreachable: bool,
}

impl<A, B, L> TxPort for NetPort<'_, A, B, L>
where
    A: AsRef<[ArpEntry]> + AsMut<[ArpEntry]>,
    B: AsRef<[u8]> + AsMut<[u8]>,
    L: Link,
{
    fn send(&mut self, dst: &EpAddr, len: usize, write: impl FnOnce(&mut [u8]) -> usize) -> Sent {
        let to = UdpAddr::new(dst.ip.into(), dst.port);
        self.unreachable = false;
        match self.net.send(self.now, self.link, to, len, write) {
            Ok(SendOutcome::Sent { .. }) => Sent::Yes,
            Ok(SendOutcome::ArpPending) => Sent::NotNow,
            // Like a packet lost on the way: the reliability engine's timers decide.
            Ok(SendOutcome::ArpFailed) => Sent::Yes,
            Err(Errno::EAGAIN) => {
                self.full = true;
                Sent::LinkFull
            }
            // Unsendable: counted by the net layer; the reliability layer sees a lost
            // packet and its timers decide, except that a handshake to a destination
            // with no way to it fails at once (`take_unreachable`).
            Err(e) => {
                self.unreachable = e == Errno::EHOSTUNREACH;
                Sent::Yes
            }
        }
    }

    fn take_unreachable(&mut self) -> bool {
        core::mem::take(&mut self.unreachable)
    }
}
