//! FI_EP_MSG over two domains on in-memory UDP links: connect, accept, reject with
//! data, back-pressure of a full backlog, shutdown after the data, peer death,
//! reconnection, and CM packets that belong to no connection.

extern crate std;

use std::boxed::Box;
use std::vec;
use std::vec::Vec;

use wire::link::{Loopback, Medium, UdpAddr};

use super::*;
use crate::cm::{CmEventKind, ConnReqId, ConnState, cm_data};
use crate::cq::{CqAttr, CqEntry, CqFormat};
use crate::ep::{EpOpt, FI_OPT_ENDPOINT};
use crate::fabric::Fabric;
use crate::info::{EpType, FabricAttr, ProviderConfig, default_info};
use crate::mem::{IoVec, SliceMemory};
use crate::storage::test_storage::VecStorage;
use crate::time::Duration;

const MTU: usize = 1472;
type Link = Loopback<256, { MTU + 42 }>;
const BASE: u64 = 0x10_000;
const EQ: u64 = 0xE0;
const A_IP: [u8; 4] = [10, 0, 0, 1];
const B_IP: [u8; 4] = [10, 0, 0, 2];

fn cfg(eps: usize) -> ProviderConfig {
    ProviderConfig {
        tx_size: 16,
        rx_size: 16,
        ep_cnt: eps,
        cq_cnt: 4,
        cntr_cnt: 1,
        mr_cnt: 1,
        inject_size: 64,
        ..ProviderConfig::DEFAULT
    }
}

struct Node {
    _fabric: Fabric<VecStorage>,
    dom: Domain<VecStorage>,
    link: Box<Link>,
    mem: Vec<u8>,
    tx_cq: CqHandle<VecStorage>,
    rx_cq: CqHandle<VecStorage>,
    events: Vec<CmEvent<VecStorage>>,
    /// A killed node neither receives nor sends.
    dead: bool,
}

impl Node {
    fn new(ip: [u8; 4], eps: usize) -> Node {
        let info = default_info(EpType::Msg, None, &cfg(eps));
        let mut fabric = Fabric::open(&FabricAttr::default(), 1, VecStorage, 2).unwrap();
        let net = NetConfig::new(&wire::link::Capabilities::new(Medium::Udp, MTU), ip, 7000);
        let dom = Domain::open(
            &mut fabric,
            &info,
            DomainConfig::new(net, cfg(eps), u64::from(ip[3])),
            VecStorage,
            2,
        )
        .unwrap();
        let mut dom = dom;
        let rc = crate::rdm::RdmConfig {
            max_peers: 4,
            reorder_slots: 16,
            unexp_slots: 16,
            unexp_msgs: 16,
            claimed_msgs: 4,
            ..*dom.rdm_config()
        };
        dom.set_rdm_config(rc).unwrap();
        let attr = CqAttr {
            format: CqFormat::Tagged,
            size: 256,
            ..CqAttr::default()
        };
        let tx_cq = dom.cq_open(&attr, 10).unwrap();
        let rx_cq = dom.cq_open(&attr, 11).unwrap();
        Node {
            _fabric: fabric,
            dom,
            link: Box::new(Link::new(Medium::Udp, Some(UdpAddr::new(ip.into(), 7000)))),
            mem: vec![0; 0x10000],
            tx_cq,
            rx_cq,
            events: Vec::new(),
            dead: false,
        }
    }

    /// An FI_EP_MSG endpoint bound to the node's CQs and EQ (not enabled: fi_connect
    /// and fi_accept enable it).
    fn ep(&mut self, context: u64) -> EpHandle<VecStorage> {
        let info = default_info(EpType::Msg, None, &cfg(1));
        let d = &mut self.dom;
        let h = d.ep_open(&info, context).unwrap();
        d.ep_bind(h, BindTarget::Cq(self.tx_cq), Flags::TRANSMIT)
            .unwrap();
        d.ep_bind(h, BindTarget::Cq(self.rx_cq), Flags::RECV)
            .unwrap();
        d.ep_bind(h, BindTarget::Eq(EQ), Flags::empty()).unwrap();
        h
    }

    fn pep(&mut self) -> PepHandle<VecStorage> {
        let p = self.dom.pep_open(0xBEEF).unwrap();
        assert_eq!(self.dom.pep_listen(p), Err(Errno::ENOEQ));
        self.dom.pep_bind_eq(p, EQ).unwrap();
        self.dom.pep_listen(p).unwrap();
        p
    }

    fn pass(&mut self, now: Instant) {
        if self.dead {
            return;
        }
        let mut mem = SliceMemory::new(BASE, &mut self.mem);
        self.dom.progress(now, &mut *self.link, &mut mem).unwrap();
        while let Some(e) = self.dom.cm_event() {
            self.events.push(e);
        }
    }

    /// Events of kind `pick` taken off the node's list.
    fn take(&mut self, pick: impl Fn(&CmEventKind) -> bool) -> Vec<CmEvent<VecStorage>> {
        let (out, keep) = self.events.drain(..).partition(|e| pick(&e.kind));
        self.events = keep;
        out
    }

    fn completions(&mut self, cq: CqHandle<VecStorage>) -> Vec<(u64, Result<usize>)> {
        let mut out = Vec::new();
        let q = self.dom.cq_mut(cq).unwrap();
        for _ in 0..1000 {
            let mut e = [CqEntry::default(); 8];
            match q.read(&mut e) {
                Ok(n) => out.extend(e[..n].iter().map(|e| (e.op_context, Ok(e.len)))),
                Err(Errno::EAVAIL) => {
                    let x = q
                        .readerr(Flags::empty(), crate::cq::API_VERSION_1_5, &mut [])
                        .unwrap();
                    let err = Errno::from_code(x.err).unwrap_or(Errno::EOTHER);
                    out.push((x.op_context, Err(err)));
                }
                Err(_) => break,
            }
        }
        out
    }
}

/// Two nodes and a virtual clock: each step moves every frame both ways and runs a
/// pass on each side.
fn sink() -> Box<Link> {
    Box::new(Link::new(Medium::Udp, None))
}

struct Net2 {
    a: Node,
    b: Node,
    now: Instant,
}

impl Net2 {
    fn new(a_eps: usize, b_eps: usize) -> Net2 {
        Net2 {
            a: Node::new(A_IP, a_eps),
            b: Node::new(B_IP, b_eps),
            now: Instant::from_millis(1),
        }
    }

    fn step(&mut self) {
        self.now += Duration::from_micros(100);
        self.a.pass(self.now);
        if self.b.dead {
            // A dead host's frames are lost.
            self.a.link.transfer_to(&mut *sink());
        } else {
            self.a.link.transfer_to(&mut *self.b.link);
        }
        self.b.pass(self.now);
        self.b.link.transfer_to(&mut *self.a.link);
    }

    /// Steps until `done` (at most `max` of virtual time); returns whether it happened.
    fn run_until(&mut self, max: Duration, mut done: impl FnMut(&mut Net2) -> bool) -> bool {
        let end = self.now + max;
        while self.now < end {
            if done(self) {
                return true;
            }
            self.step();
        }
        done(self)
    }

    fn run(&mut self, d: Duration) {
        self.run_until(d, |_| false);
    }

    /// B's address of passive endpoint `p` as A dials it.
    fn pep_addr(&self, p: PepHandle<VecStorage>) -> EpAddr {
        self.b.dom.pep_addr(p).unwrap()
    }

    /// Connects A's endpoint `c` to B's passive endpoint `p`, B accepting with a new
    /// endpoint; returns it after both saw FI_CONNECTED.
    fn connect(
        &mut self,
        p: PepHandle<VecStorage>,
        c: EpHandle<VecStorage>,
    ) -> EpHandle<VecStorage> {
        self.connect_with(p, c, None)
    }

    /// [`Net2::connect`], B accepting with endpoint `accepting` (context 77) if given.
    fn connect_with(
        &mut self,
        p: PepHandle<VecStorage>,
        c: EpHandle<VecStorage>,
        accepting: Option<EpHandle<VecStorage>>,
    ) -> EpHandle<VecStorage> {
        let dest = self.pep_addr(p);
        self.a.dom.connect(c, dest, b"hello").unwrap();
        assert!(self.run_until(Duration::from_millis(50), |n| !n.b.events.is_empty()));
        let ev = self.b.events.remove(0);
        let CmEventKind::ConnReq { req, from, data } = ev.kind else {
            panic!("FI_CONNREQ expected, got {ev:?}");
        };
        assert_eq!(
            (ev.fid, ev.context, ev.eq),
            (CmFid::Pep(p), 0xBEEF, Some(EQ))
        );
        assert_eq!(from, self.a.dom.ep_addr(c).unwrap());
        assert_eq!(&data[..], b"hello");
        let s = accepting.unwrap_or_else(|| self.b.ep(77));
        let (peer, conn_id) = self.b.dom.pep_take(p, req).unwrap();
        self.b.dom.accept(s, peer, conn_id, b"welcome").unwrap();
        assert!(self.run_until(Duration::from_millis(50), |n| {
            n.a.events.iter().any(|e| e.fid == CmFid::Ep(c))
                && n.b.events.iter().any(|e| e.fid == CmFid::Ep(s))
        }));
        let ea = self.a.take(|k| matches!(k, CmEventKind::Connected(_)));
        assert_eq!(ea.len(), 1);
        assert_eq!(ea[0].kind, CmEventKind::Connected(cm_data(b"welcome")));
        let eb = self.b.take(|k| matches!(k, CmEventKind::Connected(_)));
        assert_eq!(eb.len(), 1);
        assert_eq!(eb[0].kind, CmEventKind::Connected(cm_data(b"")));
        assert_eq!(eb[0].context, 77);
        s
    }
}

fn send(n: &mut Node, h: EpHandle<VecStorage>, off: u64, data: &[u8], ctx: u64) -> Result<()> {
    n.mem[off as usize..off as usize + data.len()].copy_from_slice(data);
    let mem = SliceMemory::new(BASE, &mut n.mem);
    // dest_addr is ignored on a connected endpoint.
    n.dom
        .send(h, &mem, IoVec::new(BASE + off, data.len()), 12345, ctx)
}

#[test]
fn connect_accept_exchange_and_shutdown_after_the_data() {
    let mut net = Net2::new(2, 3);
    let p = net.b.pep();
    let c = net.a.ep(5);
    assert_eq!(net.a.dom.getpeer(c), Err(Errno::ENOTCONN));
    assert_eq!(send(&mut net.a, c, 0, b"x", 1), Err(Errno::EOPBADSTATE));
    let s = net.connect(p, c);
    assert_eq!(net.a.dom.getpeer(c), Ok(net.b.dom.ep_addr(s).unwrap()));
    assert_eq!(net.b.dom.getpeer(s), Ok(net.a.dom.ep_addr(c).unwrap()));
    assert_eq!(
        net.a.dom.connect(c, net.pep_addr(p), b""),
        Err(Errno::EISCONN),
        "fi_connect once per endpoint"
    );
    assert_eq!(
        net.a
            .dom
            .ep(c)
            .unwrap()
            .getopt(FI_OPT_ENDPOINT, EpOpt::CmDataSize),
        Ok(256)
    );
    // Data both ways (receives first, then sends).
    net.b
        .dom
        .recv(s, IoVec::new(BASE + 0x8000, 64), 0, 100)
        .unwrap();
    net.a
        .dom
        .recv(c, IoVec::new(BASE + 0x8000, 64), 0, 200)
        .unwrap();
    send(&mut net.a, c, 0, b"ping from a", 1).unwrap();
    send(&mut net.b, s, 0, b"pong from b", 2).unwrap();
    net.run(Duration::from_millis(5));
    assert_eq!(&net.b.mem[0x8000..0x8000 + 11], b"ping from a");
    assert_eq!(&net.a.mem[0x8000..0x8000 + 11], b"pong from b");
    // A's last message, then fi_shutdown: B sees the message before FI_SHUTDOWN.
    net.b.completions(net.b.rx_cq);
    net.b
        .dom
        .recv(s, IoVec::new(BASE + 0x9000, 64), 0, 101)
        .unwrap();
    send(&mut net.a, c, 0x100, b"last words", 3).unwrap();
    net.a.dom.shutdown(c).unwrap();
    assert_eq!(send(&mut net.a, c, 0, b"late", 4), Err(Errno::ENOTCONN));
    let mut seen_data_first = false;
    assert!(net.run_until(Duration::from_millis(200), |n| {
        let got = n.b.completions(n.b.rx_cq);
        if got.iter().any(|(ctx, r)| *ctx == 101 && *r == Ok(10)) {
            seen_data_first = n.b.events.is_empty();
        }
        !n.b.events.is_empty()
    }));
    assert!(seen_data_first, "the data arrived before FI_SHUTDOWN");
    assert_eq!(&net.b.mem[0x9000..0x9000 + 10], b"last words");
    let ev = net.b.take(|_| true);
    assert_eq!(ev.len(), 1);
    assert_eq!(
        (ev[0].fid, &ev[0].kind),
        (CmFid::Ep(s), &CmEventKind::Shutdown)
    );
    net.run(Duration::from_millis(10));
    assert_eq!(net.a.dom.conn(c).unwrap().state(), ConnState::Closed);
    let ev = net.a.take(|_| true);
    assert_eq!(
        ev.iter().map(|e| (e.fid, &e.kind)).collect::<Vec<_>>(),
        [(CmFid::Ep(c), &CmEventKind::Shutdown)],
        "the side that shut down sees FI_SHUTDOWN once its peer acknowledged"
    );
    assert_eq!(net.b.dom.conn(s).unwrap().state(), ConnState::Closed);
}

/// fi_shutdown cancels the endpoint's posted receives (fi_cm(3): their FI_ECANCELED
/// entries are written before it returns); the peer's receives are its own, and a
/// send posted before the shutdown still arrives.
#[test]
fn shutdown_cancels_posted_receives_before_it_returns() {
    let mut net = Net2::new(2, 3);
    let p = net.b.pep();
    let c = net.a.ep(5);
    let s = net.connect(p, c);
    for ctx in [300, 301] {
        net.a
            .dom
            .recv(c, IoVec::new(BASE + 0x8000, 64), 0, ctx)
            .unwrap();
    }
    net.b
        .dom
        .recv(s, IoVec::new(BASE + 0x8000, 64), 0, 400)
        .unwrap();
    send(&mut net.a, c, 0, b"bye", 7).unwrap();
    net.a.dom.shutdown(c).unwrap();
    let mut got = net.a.completions(net.a.rx_cq);
    got.sort_by_key(|e| e.0);
    assert_eq!(
        got,
        [(300, Err(Errno::ECANCELED)), (301, Err(Errno::ECANCELED))],
        "at return of fi_shutdown"
    );
    assert!(net.run_until(Duration::from_millis(200), |n| !n.b.events.is_empty()));
    assert_eq!(net.b.completions(net.b.rx_cq), [(400, Ok(3))]);
    assert_eq!(&net.b.mem[0x8000..0x8003], b"bye");
    assert!(net.a.completions(net.a.rx_cq).is_empty());
}

#[test]
fn reject_carries_data_of_every_size_and_connreq_too() {
    let mut net = Net2::new(2, 2);
    let p = net.b.pep();
    let mut data = [0u8; 256];
    for (i, b) in data.iter_mut().enumerate() {
        *b = i as u8 ^ 0x5A;
    }
    for n in 0..=crate::cm::CM_DATA_MAX {
        let c = net.a.ep(n as u64);
        let dest = net.pep_addr(p);
        net.a.dom.connect(c, dest, &data[..n]).unwrap();
        assert!(net.run_until(Duration::from_millis(50), |x| !x.b.events.is_empty()));
        let ev = net.b.events.remove(0);
        let CmEventKind::ConnReq { req, data: got, .. } = ev.kind else {
            panic!("FI_CONNREQ expected");
        };
        assert_eq!(&got[..], &data[..n], "CONNREQ data of {n} bytes");
        let reject = &data[256 - n..];
        net.b.dom.pep_reject(p, req, reject).unwrap();
        assert_eq!(
            net.b.dom.pep_take(p, req),
            Err(Errno::EINVAL),
            "answered once"
        );
        assert!(net.run_until(Duration::from_millis(50), |x| !x.a.events.is_empty()));
        let ev = net.a.events.remove(0);
        assert_eq!(ev.fid, CmFid::Ep(c));
        assert_eq!(
            ev.kind,
            CmEventKind::Error {
                err: Errno::ECONNREFUSED,
                data: cm_data(reject),
            },
            "reject data of {n} bytes"
        );
        assert_eq!(net.a.dom.conn(c).unwrap().state(), ConnState::Closed);
        net.a.dom.ep_close(c).unwrap();
    }
    // Data beyond the limit is cut to it (fi_cm(3): silently truncated).
    let c = net.a.ep(999);
    let big = [7u8; 300];
    net.a.dom.connect(c, net.pep_addr(p), &big).unwrap();
    assert!(net.run_until(Duration::from_millis(50), |x| !x.b.events.is_empty()));
    let CmEventKind::ConnReq { data: got, .. } = net.b.events.remove(0).kind else {
        panic!("FI_CONNREQ expected");
    };
    assert_eq!(got.len(), 256);
}

#[test]
fn nobody_listening_is_refused_and_silence_times_out() {
    let mut net = Net2::new(3, 2);
    // No passive endpoint at that id: CM_REJECT(NO_LISTENER), FI_ECONNREFUSED.
    let c = net.a.ep(1);
    net.a
        .dom
        .connect(c, EpAddr::new(B_IP, 7000, 3), b"")
        .unwrap();
    assert!(net.run_until(Duration::from_millis(50), |x| !x.a.events.is_empty()));
    let ev = net.a.events.remove(0);
    assert_eq!(
        ev.kind,
        CmEventKind::Error {
            err: Errno::ECONNREFUSED,
            data: cm_data(b""),
        }
    );
    assert_eq!(net.b.dom.cm_stats().rx_no_listener, 1);
    // A passive endpoint that does not listen yet drops requests; a host that never
    // answers: FI_ETIMEDOUT after the retry budget.
    net.b.dead = true;
    let c = net.a.ep(2);
    let budget = net.a.dom.cm_config().budget();
    let start = net.now;
    net.a
        .dom
        .connect(c, EpAddr::new(B_IP, 7000, 0), b"")
        .unwrap();
    assert!(net.run_until(budget + Duration::from_millis(10), |x| {
        !x.a.events.is_empty()
    }));
    let waited = net.now - start;
    assert!(waited >= budget, "waited {waited:?} of {budget:?}");
    assert_eq!(
        net.a.events.remove(0).kind,
        CmEventKind::Error {
            err: Errno::ETIMEDOUT,
            data: cm_data(b""),
        }
    );
    assert_eq!(
        net.a.dom.cm_stats().tx,
        1 + u64::from(net.a.dom.cm_config().max_sends)
    );
}

#[test]
fn a_hundred_connectors_wait_for_a_small_backlog_and_none_is_lost() {
    const N: usize = 100;
    let mut net = Net2::new(N, N + 1);
    let p = net.b.pep();
    net.b.dom.pep_set_backlog(p, 8).unwrap();
    let dest = net.pep_addr(p);
    let cs: Vec<_> = (0..N).map(|i| net.a.ep(i as u64)).collect();
    for (i, c) in cs.iter().enumerate() {
        net.a.dom.connect(*c, dest, &[i as u8]).unwrap();
    }
    // The listener's application answers slowly: one request per millisecond.
    let mut accepted = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    let done = net.run_until(Duration::from_secs(4), |x| {
        if x.now.total_micros() % 1000 == 0
            && let Some(i) =
                x.b.events
                    .iter()
                    .position(|e| matches!(e.kind, CmEventKind::ConnReq { .. }))
        {
            let ev = x.b.events.remove(i);
            let CmEventKind::ConnReq { req, data, .. } = ev.kind else {
                unreachable!()
            };
            assert!(seen.insert(data[0]), "request {} reported twice", data[0]);
            assert!(x.b.dom.pep_listener(p).unwrap().waiting() <= 8);
            let s = x.b.ep(1000 + u64::from(data[0]));
            let (peer, id) = x.b.dom.pep_take(p, req).unwrap();
            x.b.dom.accept(s, peer, id, b"").unwrap();
            accepted.push(s);
        }
        x.a.take(|k| matches!(k, CmEventKind::Connected(_))).len();
        cs.iter()
            .all(|c| x.a.dom.conn(*c).unwrap().state() == ConnState::Connected)
    });
    assert!(
        done,
        "every connector connected ({} accepted)",
        accepted.len()
    );
    assert_eq!(seen.len(), N);
    assert!(
        net.a.events.is_empty(),
        "no connector failed: {:?}",
        net.a.events.first()
    );
    assert!(
        net.b.dom.cm_stats().backlog_full > 0,
        "the backlog pushed back"
    );
}

#[test]
fn a_peer_killed_mid_transfer_is_a_shutdown_within_the_retry_budget() {
    let mut net = Net2::new(2, 3);
    let p = net.b.pep();
    let c = net.a.ep(1);
    let s = net.connect(p, c);
    for i in 0..8 {
        net.b
            .dom
            .recv(s, IoVec::new(BASE + 0x8000 + i * 64, 64), 0, i)
            .unwrap();
    }
    for i in 0..4 {
        send(&mut net.a, c, i * 64, b"some data", i).unwrap();
    }
    net.run(Duration::from_millis(2));
    assert_eq!(net.b.completions(net.b.rx_cq).len(), 4);
    net.b.dead = true;
    for i in 4..8 {
        send(&mut net.a, c, i * 64, b"more data", i).unwrap();
    }
    let rc = *net.a.dom.rdm_config();
    let budget = Duration::from_micros(rc.rto_max.total_micros() * u64::from(rc.max_retries) * 2);
    assert!(net.run_until(budget, |x| !x.a.events.is_empty()));
    assert_eq!(net.a.events.remove(0).kind, CmEventKind::Shutdown);
    assert_eq!(send(&mut net.a, c, 0, b"x", 9), Err(Errno::ENOTCONN));
}

#[test]
fn an_idle_connection_to_a_dead_peer_is_a_shutdown_within_the_retry_budget() {
    let mut net = Net2::new(2, 3);
    let p = net.b.pep();
    let c = net.a.ep(1);
    let s = net.connect(p, c);
    // Idle, both alive: the connection stays, each side probing the other about
    // once per `rto_max` (100 ms): a handful of packets a second, no more.
    let rc = *net.a.dom.rdm_config();
    let tx = |n: &Node, h| n.dom.ep(h).unwrap().rdm().unwrap().stats().tx_packets;
    let before = (tx(&net.a, c), tx(&net.b, s));
    net.run(Duration::from_secs(1));
    assert!(net.a.events.is_empty() && net.b.events.is_empty());
    let sent = (tx(&net.a, c) - before.0, tx(&net.b, s) - before.1);
    assert!(
        (5..=40).contains(&sent.0) && (5..=40).contains(&sent.1),
        "keepalive packets in an idle second: {sent:?}"
    );
    // B dies with nothing in flight either way and nothing posted: A's engine
    // notices, and the connection ends with FI_SHUTDOWN.
    net.b.dead = true;
    let start = net.now;
    let budget = Duration::from_micros(rc.rto_max.total_micros() * u64::from(rc.max_retries) * 2);
    assert!(net.run_until(budget, |x| !x.a.events.is_empty()));
    assert!(
        net.now - start >= Duration::from_micros(rc.rto_max.total_micros() * 2),
        "not before a few probes went unanswered"
    );
    assert_eq!(net.a.events.remove(0).kind, CmEventKind::Shutdown);
    assert_eq!(send(&mut net.a, c, 0, b"x", 9), Err(Errno::ENOTCONN));
}

#[cfg(feature = "shared-ctx")]
#[test]
fn accepted_endpoints_share_a_receive_context() {
    use crate::flags::FI_ADDR_UNSPEC;
    use crate::info::{FI_SHARED_CONTEXT, RxAttr};
    let mut net = Net2::new(3, 4);
    let p = net.b.pep();
    let srx = net.b.dom.srx_open(&RxAttr::default(), 0x5C).unwrap();
    let attr = CqAttr {
        format: CqFormat::Tagged,
        size: 64,
        ..CqAttr::default()
    };
    let mut conns = Vec::new();
    let mut cqs = Vec::new();
    for k in 0..2u64 {
        let c = net.a.ep(1 + k);
        // B's accepting endpoint: its receives are the context's, its own CQ.
        let mut info = default_info(EpType::Msg, None, &cfg(1));
        info.ep_attr.rx_ctx_cnt = FI_SHARED_CONTEXT;
        let d = &mut net.b.dom;
        let s = d.ep_open(&info, 77).unwrap();
        let cq = d.cq_open(&attr, 20 + k).unwrap();
        d.ep_bind(s, BindTarget::Cq(net.b.tx_cq), Flags::TRANSMIT)
            .unwrap();
        d.ep_bind(s, BindTarget::Cq(cq), Flags::RECV).unwrap();
        d.ep_bind(s, BindTarget::Eq(EQ), Flags::empty()).unwrap();
        d.ep_bind_srx(s, srx).unwrap();
        assert_eq!(net.connect_with(p, c, Some(s)), s);
        conns.push(c);
        cqs.push(cq);
    }
    assert_eq!(net.b.dom.srx(srx).unwrap().bound(), 2);
    // Four receives on the context; two messages on each connection.
    for i in 0..4u64 {
        let buf = [IoVec::new(BASE + 0x8000 + i * 64, 64)];
        let m = MsgArgs::new(&buf, FI_ADDR_UNSPEC, 100 + i);
        net.b
            .dom
            .srx_recvmsg(srx, &m, None, Flags::empty())
            .unwrap();
    }
    for i in 0..4u64 {
        let c = conns[(i % 2) as usize];
        let data = [b'a' + i as u8; 24];
        send(&mut net.a, c, i * 64, &data, i).unwrap();
    }
    let mut got: Vec<Vec<(u64, Result<usize>)>> = vec![Vec::new(); 2];
    assert!(net.run_until(Duration::from_millis(50), |n| {
        for (k, cq) in cqs.iter().enumerate() {
            got[k].extend(n.b.completions(*cq));
        }
        got.iter().map(Vec::len).sum::<usize>() == 4
    }));
    // Each message whole, on the CQ of the connection it came over, in one of the
    // context's receives; every receive used once.
    for (k, comps) in got.iter().enumerate() {
        assert_eq!(comps.len(), 2, "{got:?}");
        for (ctx, r) in comps {
            assert_eq!(*r, Ok(24));
            let at = 0x8000 + (ctx - 100) as usize * 64;
            let byte = net.b.mem[at];
            let i = u64::from(byte - b'a');
            assert_eq!(i % 2, k as u64, "message {i} on connection {k}");
            assert_eq!(&net.b.mem[at..at + 24], &[byte; 24]);
        }
    }
    let mut ctxs: Vec<u64> = got.iter().flatten().map(|(c, _)| *c).collect();
    ctxs.sort();
    assert_eq!(ctxs, [100, 101, 102, 103]);
    assert_eq!(net.b.dom.srx(srx).unwrap().waiting(), 0);
    // A receive waiting in the context completes in the pass that received its
    // message, as on an endpoint's own receive (not one pass later).
    let buf = [IoVec::new(BASE + 0x9000, 64)];
    let m = MsgArgs::new(&buf, FI_ADDR_UNSPEC, 104);
    net.b
        .dom
        .srx_recvmsg(srx, &m, None, Flags::empty())
        .unwrap();
    send(&mut net.a, conns[0], 0x100, &[b'z'; 24], 9).unwrap();
    net.step();
    assert_eq!(net.b.completions(cqs[0]), [(104, Ok(24))]);
    assert_eq!(&net.b.mem[0x9000..0x9000 + 24], &[b'z'; 24]);
}

#[test]
fn reconnect_after_shutdown() {
    let mut net = Net2::new(3, 4);
    let p = net.b.pep();
    for round in 0..2u8 {
        let c = net.a.ep(u64::from(round));
        let s = net.connect(p, c);
        net.b
            .dom
            .recv(s, IoVec::new(BASE + 0x8000, 64), 0, 7)
            .unwrap();
        send(&mut net.a, c, 0, &[round; 5], 1).unwrap();
        net.b.completions(net.b.rx_cq);
        assert!(net.run_until(Duration::from_millis(50), |x| {
            x.b.completions(x.b.rx_cq).iter().any(|(ctx, _)| *ctx == 7)
        }));
        assert_eq!(&net.b.mem[0x8000..0x8005], &[round; 5]);
        net.b.dom.shutdown(s).unwrap();
        assert!(net.run_until(Duration::from_millis(100), |x| !x.a.events.is_empty()));
        assert_eq!(net.a.events.remove(0).kind, CmEventKind::Shutdown);
        net.run(Duration::from_millis(5));
        assert_eq!(net.b.dom.conn(s).unwrap().state(), ConnState::Closed);
        let ev = net.b.take(|k| *k == CmEventKind::Shutdown);
        assert_eq!(ev.len(), 1, "the side that shut down sees it once");
        net.a.dom.ep_close(c).unwrap();
        net.b.dom.ep_close(s).unwrap();
        net.a.completions(net.a.tx_cq);
        net.b.completions(net.b.tx_cq);
    }
}

#[test]
fn stray_cm_packets_and_strangers_are_counted_and_dropped() {
    let mut net = Net2::new(3, 3);
    let p = net.b.pep();
    let c = net.a.ep(1);
    let s = net.connect(p, c);
    let a_ep = net.a.dom.ep_addr(c).unwrap();
    let s_addr = net.b.dom.ep_addr(s).unwrap();
    // Forged CM packets to A's endpoint: wrong connection id, wrong source.
    let conn_id = net.a.dom.conn(c).unwrap().conn_id();
    let forge = |n: &mut Node, src_ep: u16, session: u32, body: wire::packet::Body<'_>| {
        let r = wire::packet::Repr {
            header: wire::packet::Header {
                src_ep,
                dst_ep: a_ep.ep_id,
                session,
                seq: 0,
                crc: false,
                ack_req: false,
            },
            body,
        };
        let mut buf = [0u8; 64];
        let len = r.emit_bytes(&mut buf).unwrap();
        let mut mem = SliceMemory::new(BASE, &mut n.mem);
        let src = UdpAddr::new(B_IP.into(), 7000);
        n.dom
            .rx_datagram(Instant::from_millis(2), src, &buf[..len], &mut mem);
    };
    let empty = wire::packet::CmRepr::EMPTY;
    forge(
        &mut net.a,
        s_addr.ep_id,
        conn_id ^ 1,
        wire::packet::Body::Shutdown(empty),
    );
    forge(
        &mut net.a,
        s_addr.ep_id + 1,
        conn_id,
        wire::packet::Body::Shutdown(empty),
    );
    forge(
        &mut net.a,
        s_addr.ep_id,
        conn_id,
        wire::packet::Body::CmReject(empty),
    );
    assert_eq!(net.a.dom.cm_stats().rx_stray, 3);
    assert_eq!(net.a.dom.conn(c).unwrap().state(), ConnState::Connected);
    // A session packet from another endpoint than the peer.
    forge(
        &mut net.a,
        s_addr.ep_id + 1,
        0,
        wire::packet::Body::KeepAlive(wire::packet::KeepAliveRepr { ts: 0, echo_ts: 0 }),
    );
    assert_eq!(net.a.dom.cm_stats().rx_not_peer, 1);
    let _ = ConnReqId(0);
}

/// fabtests' `fi_shared_ctx -e msg`: both sides' endpoints share one transmit and one
/// receive context and one pair of CQs; each connection carries its messages.
#[test]
fn connected_endpoints_on_both_sides_share_transmit_and_receive_contexts() {
    use crate::flags::FI_ADDR_UNSPEC;
    use crate::info::{FI_SHARED_CONTEXT, RxAttr, TxAttr};
    let mut net = Net2::new(3, 4);
    let p = net.b.pep();
    let shared_ep = |n: &mut Node, ctx: u64, stx, srx| {
        let mut info = default_info(EpType::Msg, None, &cfg(1));
        info.ep_attr.tx_ctx_cnt = FI_SHARED_CONTEXT;
        info.ep_attr.rx_ctx_cnt = FI_SHARED_CONTEXT;
        let d = &mut n.dom;
        let h = d.ep_open(&info, ctx).unwrap();
        d.ep_bind(h, BindTarget::Cq(n.tx_cq), Flags::TRANSMIT)
            .unwrap();
        d.ep_bind(h, BindTarget::Cq(n.rx_cq), Flags::RECV).unwrap();
        d.ep_bind(h, BindTarget::Eq(EQ), Flags::empty()).unwrap();
        d.ep_bind_stx(h, stx).unwrap();
        d.ep_bind_srx(h, srx).unwrap();
        h
    };
    let a_stx = net.a.dom.stx_open(&TxAttr::default(), 1).unwrap();
    let a_srx = net.a.dom.srx_open(&RxAttr::default(), 2).unwrap();
    let b_stx = net.b.dom.stx_open(&TxAttr::default(), 3).unwrap();
    let b_srx = net.b.dom.srx_open(&RxAttr::default(), 4).unwrap();
    let mut pairs = Vec::new();
    for k in 0..2u64 {
        let c = shared_ep(&mut net.a, 1 + k, a_stx, a_srx);
        let s = shared_ep(&mut net.b, 77, b_stx, b_srx);
        assert_eq!(net.connect_with(p, c, Some(s)), s);
        pairs.push((c, s));
    }
    for (n, srx) in [(&mut net.a, a_srx), (&mut net.b, b_srx)] {
        for i in 0..2u64 {
            let buf = [IoVec::new(BASE + 0x8000 + i * 64, 64)];
            let m = MsgArgs::new(&buf, FI_ADDR_UNSPEC, 100 + i);
            n.dom.srx_recvmsg(srx, &m, None, Flags::empty()).unwrap();
        }
    }
    for (k, (c, s)) in pairs.iter().enumerate() {
        send(
            &mut net.a,
            *c,
            k as u64 * 64,
            &[b'a' + k as u8; 24],
            k as u64,
        )
        .unwrap();
        send(
            &mut net.b,
            *s,
            k as u64 * 64,
            &[b'A' + k as u8; 24],
            k as u64,
        )
        .unwrap();
    }
    let (mut ga, mut gb) = (Vec::new(), Vec::new());
    assert!(
        net.run_until(Duration::from_millis(50), |n| {
            ga.extend(n.a.completions(n.a.rx_cq));
            gb.extend(n.b.completions(n.b.rx_cq));
            ga.len() == 2 && gb.len() == 2
        }),
        "a {ga:?} b {gb:?}"
    );
    for (n, got, first) in [(&net.a, &ga, b'A'), (&net.b, &gb, b'a')] {
        let mut seen: Vec<u8> = got
            .iter()
            .map(|(ctx, r)| {
                assert_eq!(*r, Ok(24));
                let at = 0x8000 + (ctx - 100) as usize * 64;
                assert_eq!(&n.mem[at..at + 24], &[n.mem[at]; 24]);
                n.mem[at]
            })
            .collect();
        seen.sort();
        assert_eq!(seen, [first, first + 1]);
    }
}
