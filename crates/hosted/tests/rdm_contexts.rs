//! Scalable endpoints (fi_endpoint(3) "SCALABLE ENDPOINTS") in the simulator: every
//! context has its own engine, CQs and sessions, and a message reaches exactly the
//! receive context its fi_addr names (`fi_rx_addr`), under loss and reordering; and
//! scalable endpoints whose other side is one shared context.

use hosted::ofi_nostd::time::Duration;

use hosted::netsim::{Faults, NetSim};
use hosted::ofi_nostd::av::{AvAddrs, AvAttr, fi_rx_addr};
use hosted::ofi_nostd::cq::CqAttr;
use hosted::ofi_nostd::domain::{AvHandle, BindTarget, CqHandle, EpHandle, MsgArgs};
use hosted::ofi_nostd::errno::Errno;
use hosted::ofi_nostd::flags::{FI_ADDR_UNSPEC, FiAddr, Flags};
use hosted::ofi_nostd::info::{EpType, FI_SHARED_CONTEXT, RxAttr, TxAttr, default_info};
use hosted::ofi_nostd::mem::IoVec;
use hosted::ofi_nostd::sep::CtxSide;
use hosted::simlink::{Cluster, Completion, HeapStorage, Node, NodeConfig};

type S = HeapStorage;

const N: usize = 4;
const BITS: i32 = 3;
const MSG: usize = 48;
const WAIT: Duration = Duration::from_secs(20);

fn cfg() -> NodeConfig {
    let mut c = NodeConfig::default();
    c.provider.ep_cnt = 2 + N;
    c.provider.cq_cnt = 4 + 2 * N;
    c.mem_size = 4 << 20;
    c
}

fn faults() -> Faults {
    Faults {
        loss: 0.10,
        reorder: 0.10,
        duplicate: 0.02,
        delay: Duration::from_micros(5),
        jitter: Duration::from_micros(3),
        rate_bps: 10_000_000_000,
        ..Faults::default()
    }
}

/// A scalable endpoint on a node: its handle, its own AV (with `rx_ctx_bits`), and
/// per context a transmit and a receive CQ.
struct Sep {
    h: EpHandle<S>,
    tx: Vec<EpHandle<S>>,
    rx: Vec<EpHandle<S>>,
    tx_cq: Vec<CqHandle<S>>,
    rx_cq: Vec<CqHandle<S>>,
    av: hosted::ofi_nostd::domain::AvHandle<S>,
}

/// An AV of 16 entries whose addresses carry [`BITS`] bits of receive context.
fn ctx_av(d: &mut hosted::ofi_nostd::domain::Domain<S>, context: u64) -> AvHandle<S> {
    let mut attr = AvAttr {
        count: 16,
        rx_ctx_bits: BITS,
        ..AvAttr::default()
    };
    d.av_open(&mut attr, context).unwrap()
}

fn open_sep(node: &mut Node, n: usize) -> Sep {
    open_sep_of(node, n, EpType::Rdm)
}

fn open_sep_of(node: &mut Node, n: usize, ep_type: EpType) -> Sep {
    let d = &mut node.dom;
    let mut info = default_info(ep_type, None, &cfg().provider);
    info.ep_attr.tx_ctx_cnt = n;
    info.ep_attr.rx_ctx_cnt = n;
    let h = d.sep_open(&info, 0x5E).unwrap();
    let av = ctx_av(d, 0xA5);
    d.sep_bind(h, BindTarget::Av(av), Flags::empty()).unwrap();
    let attr = CqAttr {
        size: 4096,
        ..CqAttr::default()
    };
    let mut s = Sep {
        h,
        tx: vec![],
        rx: vec![],
        tx_cq: vec![],
        rx_cq: vec![],
        av,
    };
    for k in 0..n {
        let t = d.sep_ctx_open(h, CtxSide::Tx, k, Flags::empty()).unwrap();
        let tcq = d.cq_open(&attr, 0x100 + k as u64).unwrap();
        d.sep_ctx_bind(h, CtxSide::Tx, k, BindTarget::Cq(tcq), Flags::TRANSMIT)
            .unwrap();
        d.sep_ctx_enable(h, CtxSide::Tx, k).unwrap();
        let r = d.sep_ctx_open(h, CtxSide::Rx, k, Flags::empty()).unwrap();
        let rcq = d.cq_open(&attr, 0x200 + k as u64).unwrap();
        // A context takes only its own side's bindings.
        assert_eq!(
            d.sep_ctx_bind(h, CtxSide::Rx, k, BindTarget::Cq(rcq), Flags::TRANSMIT),
            Err(Errno::EINVAL)
        );
        d.sep_ctx_bind(h, CtxSide::Rx, k, BindTarget::Cq(rcq), Flags::RECV)
            .unwrap();
        d.sep_ctx_enable(h, CtxSide::Rx, k).unwrap();
        s.tx.push(t);
        s.rx.push(r);
        s.tx_cq.push(tcq);
        s.rx_cq.push(rcq);
    }
    d.sep_enable(h).unwrap();
    s
}

fn insert(
    node: &mut Node,
    av: hosted::ofi_nostd::domain::AvHandle<S>,
    addr: hosted::ofi_nostd::addr::EpAddr,
) -> FiAddr {
    let mut out = [0; 1];
    node.dom
        .av_mut(av)
        .unwrap()
        .insert(AvAddrs::Ep(&[addr]), Some(&mut out), Flags::empty(), None)
        .unwrap();
    out[0]
}

/// Runs until every CQ in `cqs` of node `i` holds `want` completions (drained into
/// the returned vectors), or fails after `WAIT` of virtual time.
fn collect(c: &mut Cluster, i: usize, cqs: &[CqHandle<S>], want: usize) -> Vec<Vec<Completion>> {
    let mut got = vec![Vec::new(); cqs.len()];
    let deadline = c.sim.now() + WAIT;
    let r = c.run_until(deadline, 50_000_000, |c| {
        for (k, cq) in cqs.iter().enumerate() {
            c.nodes[i].drain_cq(*cq, &mut got[k]);
        }
        got.iter().all(|g| g.len() >= want)
    });
    let lens: Vec<usize> = got.iter().map(|g| g.len()).collect();
    assert!(r.is_ok(), "stalled ({r:?}) with {lens:?} of {want}");
    got
}

/// Posts `per` receives on each receive context of `b`: context `k`'s receive `s`
/// lands at offset `(k * per + s) * 64` with context `k * 10 + s`.
fn post_recvs(node: &mut Node, b: &Sep, per: usize) {
    for (k, &r) in b.rx.iter().enumerate() {
        for s in 0..per {
            let at = Node::BASE + ((k * per + s) * 64) as u64;
            let ctx = (k * 10 + s) as u64;
            node.op(|d, _, _| d.recv(r, IoVec::new(at, 64), FI_ADDR_UNSPEC, ctx))
                .unwrap();
        }
    }
}

/// A plain RDM endpoint on `node` (one CQ for both sides, an AV with [`BITS`] bits of
/// receive context) and the fi_addr of the scalable endpoint at `to` in its AV.
fn plain_sender(
    node: &mut Node,
    to: hosted::ofi_nostd::addr::EpAddr,
) -> (EpHandle<S>, CqHandle<S>, FiAddr) {
    let mut av = AvAttr {
        count: 4,
        rx_ctx_bits: BITS,
        ..AvAttr::default()
    };
    let d = &mut node.dom;
    let av = d.av_open(&mut av, 0).unwrap();
    let info = default_info(EpType::Rdm, None, &cfg().provider);
    let ep = d.ep_open(&info, 0).unwrap();
    let cq = d.cq_open(&CqAttr::default(), 0).unwrap();
    d.ep_bind(ep, BindTarget::Cq(cq), Flags::TRANSMIT | Flags::RECV)
        .unwrap();
    d.ep_bind(ep, BindTarget::Av(av), Flags::empty()).unwrap();
    d.ep_enable(ep).unwrap();
    (ep, cq, insert(node, av, to))
}

fn payload(tx: usize, seq: usize) -> Vec<u8> {
    (0..MSG).map(|i| (tx * 131 + seq * 7 + i) as u8).collect()
}

#[test]
fn every_message_reaches_once_the_context_it_names() {
    let mut c = Cluster::new(NetSim::new(31, faults()), 2, &cfg()).unwrap();
    let a = open_sep(&mut c.nodes[0], N);
    let b = open_sep(&mut c.nodes[1], N);
    let b_addr = c.nodes[1].dom.ep_addr(b.h).unwrap();
    let a_addr = c.nodes[0].dom.ep_addr(a.h).unwrap();
    // Both ends of a context pair answer to the one endpoint address.
    assert_eq!(b_addr.ep_id, 1);
    let b_fi = insert(&mut c.nodes[0], a.av, b_addr);
    insert(&mut c.nodes[1], b.av, a_addr);
    const PER: usize = 40;
    // Receive context k of b expects PER messages from transmit context (k+1) % N of
    // a: the pairing crosses engines, so nothing works by their indices matching.
    for k in 0..N {
        for s in 0..PER {
            let off = (k * PER + s) * 64;
            let r = b.rx[k];
            c.nodes[1]
                .op(|d, _, _| {
                    d.recv(
                        r,
                        IoVec::new(Node::BASE + off as u64, 64),
                        FI_ADDR_UNSPEC,
                        (k * 1000 + s) as u64,
                    )
                })
                .unwrap();
        }
    }
    for s in 0..PER {
        for t in 0..N {
            let k = (t + N - 1) % N;
            let off = (1 << 20) | ((t * PER + s) * 64);
            let data = payload(t, s);
            let buf = c.nodes[0].put(off, &data);
            let dest = fi_rx_addr(b_fi, k as i32, BITS);
            let h = a.tx[t];
            c.nodes[0]
                .op(|d, _, m| d.send(h, m, IoVec::new(buf, MSG), dest, (t * 1000 + s) as u64))
                .unwrap();
        }
    }
    let sent = collect(&mut c, 0, &a.tx_cq, PER);
    for (t, comps) in sent.iter().enumerate() {
        assert_eq!(comps.len(), PER, "tx context {t}");
        assert!(comps.iter().all(|x| x.err.is_none()), "{comps:?}");
        assert!(comps.iter().all(|x| x.context / 1000 == t as u64));
    }
    let got = collect(&mut c, 1, &b.rx_cq, PER);
    for (k, comps) in got.iter().enumerate() {
        let t = (k + 1) % N;
        assert_eq!(comps.len(), PER, "rx context {k}");
        for (s, x) in comps.iter().enumerate() {
            // In posting order (one session per context pair, in sequence order), each
            // into its own receive, with the bytes its transmit context sent.
            assert_eq!(
                (x.err, x.len, x.context),
                (None, MSG, (k * 1000 + s) as u64)
            );
            let off = (k * PER + s) * 64;
            assert_eq!(
                c.nodes[1].get(off, MSG),
                &payload(t, s)[..],
                "ctx {k} msg {s}"
            );
        }
    }
    // Nothing extra arrived anywhere once the network settled.
    c.run_for(Duration::from_millis(50));
    let extra = collect(&mut c, 1, &b.rx_cq, 0);
    assert!(extra.iter().all(|e| e.is_empty()), "{extra:?}");
    let st = c.sim.stats();
    assert!(st.lost > 0 && st.reordered > 0, "{st:?}");
    // Each context pair ran its own session: b's engine k knows a's context t only.
    for k in 0..N {
        let peers = c.nodes[1].dom.ep(b.rx[k]).unwrap().rdm().unwrap().stats();
        assert!(peers.rx_packets > 0, "engine {k} received nothing");
    }
}

#[test]
fn a_peer_that_names_no_context_reaches_context_0() {
    let mut c = Cluster::new(NetSim::new(32, faults()), 2, &cfg()).unwrap();
    let b = open_sep(&mut c.nodes[1], N);
    let b_addr = c.nodes[1].dom.ep_addr(b.h).unwrap();
    // Node 0's ordinary endpoint and AV (no rx_ctx_bits) know b's address only.
    let b_fi = c.nodes[0].insert(b_addr).unwrap();
    for k in 0..N {
        let r = b.rx[k];
        c.nodes[1]
            .op(|d, _, _| {
                d.recv(
                    r,
                    IoVec::new(Node::BASE + (k * 64) as u64, 64),
                    FI_ADDR_UNSPEC,
                    k as u64,
                )
            })
            .unwrap();
    }
    let buf = c.nodes[0].put(1 << 20, &payload(9, 9));
    c.nodes[0]
        .op(|d, ep, m| d.send(ep, m, IoVec::new(buf, MSG), b_fi, 77))
        .unwrap();
    let done = c.wait_cq(0, false, 1, WAIT).unwrap();
    assert_eq!((done[0].context, done[0].err), (77, None));
    let got = collect(&mut c, 1, &b.rx_cq[..1], 1);
    assert_eq!((got[0][0].context, got[0][0].len), (0, MSG));
    assert_eq!(c.nodes[1].get(0, MSG), &payload(9, 9)[..]);
    c.run_for(Duration::from_millis(50));
    let rest = collect(&mut c, 1, &b.rx_cq[1..], 0);
    assert!(rest.iter().all(|e| e.is_empty()), "{rest:?}");
    // The fi_addr of a context the endpoint id cannot carry is refused.
    let a = open_sep(&mut c.nodes[0], 1);
    let fi = insert(&mut c.nodes[0], a.av, b_addr);
    let h = a.tx[0];
    let bad = fi_rx_addr(fi, 7, BITS);
    let r = c.nodes[0].op(|d, _, m| d.send(h, m, IoVec::new(buf, MSG), bad, 1));
    // Context 7 of b does not exist: the send goes out, and b answers NO_ENDPOINT.
    assert_eq!(r, Ok(()));
    let failed = collect(&mut c, 0, &a.tx_cq, 1);
    assert!(failed[0][0].err.is_some(), "{:?}", failed[0]);
}

/// A critical error of one context (a peer that restarted reset its session with
/// context 2 while nothing was in flight) is the scalable endpoint's, which its EQ is
/// bound to: taken through the endpoint's handle, once, with its wake-up.
#[test]
fn a_context_engines_critical_error_is_the_scalable_endpoints() {
    let mut c = Cluster::new(NetSim::new(35, Faults::default()), 2, &cfg()).unwrap();
    let b = open_sep(&mut c.nodes[1], N);
    let b_addr = c.nodes[1].dom.ep_addr(b.h).unwrap();
    post_recvs(&mut c.nodes[1], &b, 2);
    let send_to_2 = |c: &mut Cluster, ctx: u64| {
        let (ep, cq, fi) = plain_sender(&mut c.nodes[0], b_addr);
        let buf = c.nodes[0].put(1 << 20, &payload(2, ctx as usize));
        let dest = fi_rx_addr(fi, 2, BITS);
        c.nodes[0]
            .op(|d, _, m| d.send(ep, m, IoVec::new(buf, MSG), dest, ctx))
            .unwrap();
        collect(c, 0, &[cq], 1)
    };
    let sent = send_to_2(&mut c, 1);
    assert_eq!(sent[0][0].err, None, "{sent:?}");
    collect(&mut c, 1, &b.rx_cq[2..3], 1);
    let d = &mut c.nodes[1].dom;
    assert_eq!(d.ep_take_fault(b.h), Ok(None), "a healthy session");
    assert!(!d.ep_take_fault_wakeup(b.h));
    // Node 0 restarts: same address, no memory of the session; its new endpoint
    // talks to context 2 again, which replaces the old session.
    let port = c.nodes[0].port;
    c.sim.detach(port);
    let cfg = NodeConfig {
        seed: 4321,
        ..cfg()
    };
    c.nodes[0] = Node::new(&mut c.sim, [10, 0, 0, 1], &cfg).unwrap();
    let sent = send_to_2(&mut c, 2);
    assert_eq!(sent[0][0].err, None, "{sent:?}");
    let got = collect(&mut c, 1, &b.rx_cq[2..3], 1);
    assert_eq!(got[0][0].err, None);
    let d = &mut c.nodes[1].dom;
    // Context 2's engine recorded it; the endpoint reports it, and only once.
    assert!(d.ep_take_fault_wakeup(b.h));
    assert!(!d.ep_take_fault_wakeup(b.h), "one wake-up per fault");
    let f = d.ep_take_fault(b.h).unwrap().expect("the context's fault");
    assert_eq!((f.err, f.count), (Errno::ECONNRESET, 1));
    assert_eq!(d.ep_take_fault(b.h), Ok(None), "taken");
}

/// Closing a scalable endpoint lingers as an endpoint's close does, for the peers of
/// every context engine: until each acknowledged its CLOSE (fabtests' `fi_scalable_ep`
/// under loss: a server that closed after one pass left the client's last send, whose
/// ACK was lost, to fail).
#[test]
fn a_closing_scalable_endpoint_lingers_for_the_peers_of_every_context() {
    let mut c = Cluster::new(NetSim::new(36, Faults::default()), 2, &cfg()).unwrap();
    let b = open_sep(&mut c.nodes[1], N);
    let b_addr = c.nodes[1].dom.ep_addr(b.h).unwrap();
    post_recvs(&mut c.nodes[1], &b, 2);
    let (ep, cq, fi) = plain_sender(&mut c.nodes[0], b_addr);
    // Only context 3 talks: the endpoint's own engine (context 0) has no session.
    let buf = c.nodes[0].put(1 << 20, &payload(3, 0));
    c.nodes[0]
        .op(|d, _, m| d.send(ep, m, IoVec::new(buf, MSG), fi_rx_addr(fi, 3, BITS), 7))
        .unwrap();
    assert_eq!(collect(&mut c, 0, &[cq], 1)[0][0].err, None);
    collect(&mut c, 1, &b.rx_cq[3..4], 1);
    for k in 0..N {
        c.nodes[1].dom.sep_ctx_close(b.h, CtxSide::Tx, k).unwrap();
        c.nodes[1].dom.sep_ctx_close(b.h, CtxSide::Rx, k).unwrap();
    }
    let now = c.sim.now();
    let d = &mut c.nodes[1].dom;
    let until = d.ep_begin_close(b.h, now).unwrap();
    assert!(
        until.is_some_and(|t| t > now),
        "context 3 has a peer: {until:?}"
    );
    assert!(
        d.ep_lingering(b.h),
        "the peer has not acknowledged the CLOSE yet"
    );
    let r = c.run_until(now + WAIT, 1_000_000, |c| !c.nodes[1].dom.ep_lingering(b.h));
    assert!(r.is_ok(), "the peer acknowledged the CLOSE: {r:?}");
    c.nodes[1].dom.sep_close(b.h).unwrap();
}

#[test]
fn closing_a_context_cancels_its_receives_and_spares_the_others() {
    let mut c = Cluster::new(NetSim::new(33, faults()), 2, &cfg()).unwrap();
    let a = open_sep(&mut c.nodes[0], N);
    let b = open_sep(&mut c.nodes[1], N);
    let b_addr = c.nodes[1].dom.ep_addr(b.h).unwrap();
    let b_fi = insert(&mut c.nodes[0], a.av, b_addr);
    post_recvs(&mut c.nodes[1], &b, 3);
    c.nodes[1].dom.sep_ctx_close(b.h, CtxSide::Rx, 1).unwrap();
    assert_eq!(
        c.nodes[1].dom.sep_ctx_close(b.h, CtxSide::Rx, 1),
        Err(Errno::EINVAL)
    );
    let canceled = collect(&mut c, 1, &b.rx_cq[1..2], 3);
    assert!(
        canceled[0]
            .iter()
            .all(|x| x.err == Some(Errno::ECANCELED) && x.context / 10 == 1),
        "{canceled:?}"
    );
    // The other contexts still take every message meant for them.
    for k in [0, 2, 3] {
        for s in 0..3 {
            let buf = c.nodes[0].put((1 << 20) | ((k * 3 + s) * 64), &payload(k, s));
            let h = a.tx[k];
            let dest = fi_rx_addr(b_fi, k as i32, BITS);
            c.nodes[0]
                .op(|d, _, m| d.send(h, m, IoVec::new(buf, MSG), dest, s as u64))
                .unwrap();
        }
    }
    for k in [0, 2, 3] {
        let got = collect(&mut c, 1, &b.rx_cq[k..k + 1], 3);
        for (s, x) in got[0].iter().enumerate() {
            assert_eq!((x.err, x.context), (None, (k * 10 + s) as u64));
            assert_eq!(c.nodes[1].get((k * 3 + s) * 64, MSG), &payload(k, s)[..]);
        }
    }
    // The endpoint closes only after its contexts.
    assert_eq!(c.nodes[1].dom.sep_close(b.h), Err(Errno::EBUSY));
    for k in 0..N {
        c.nodes[1].dom.sep_ctx_close(b.h, CtxSide::Tx, k).unwrap();
        if k != 1 {
            c.nodes[1].dom.sep_ctx_close(b.h, CtxSide::Rx, k).unwrap();
        }
    }
    // Engines are not endpoints of their own.
    assert_eq!(c.nodes[1].dom.ep_close(b.rx[2]), Err(Errno::EINVAL));
    c.nodes[1].dom.sep_close(b.h).unwrap();
    assert!(c.nodes[1].dom.ep(b.rx[2]).is_err());
}

#[test]
fn dgram_contexts_take_the_datagrams_sent_to_them() {
    // DGRAM is unreliable: a clean network, so every datagram arrives.
    let mut c = Cluster::new(NetSim::new(34, Faults::default()), 2, &cfg()).unwrap();
    let a = open_sep_of(&mut c.nodes[0], N, EpType::Dgram);
    let b = open_sep_of(&mut c.nodes[1], N, EpType::Dgram);
    let b_addr = c.nodes[1].dom.ep_addr(b.h).unwrap();
    let b_fi = insert(&mut c.nodes[0], a.av, b_addr);
    let a_addr = c.nodes[0].dom.ep_addr(a.h).unwrap();
    insert(&mut c.nodes[1], b.av, a_addr);
    post_recvs(&mut c.nodes[1], &b, 2);
    for s in 0..2 {
        for t in 0..N {
            let k = N - 1 - t;
            let buf = c.nodes[0].put((1 << 20) | ((t * 2 + s) * 64), &payload(t, s));
            let h = a.tx[t];
            let dest = fi_rx_addr(b_fi, k as i32, BITS);
            c.nodes[0]
                .op(|d, _, m| d.send(h, m, IoVec::new(buf, MSG), dest, s as u64))
                .unwrap();
        }
    }
    let sent = collect(&mut c, 0, &a.tx_cq, 2);
    assert!(sent.iter().flatten().all(|x| x.err.is_none()), "{sent:?}");
    let got = collect(&mut c, 1, &b.rx_cq, 2);
    for (k, comps) in got.iter().enumerate() {
        let t = N - 1 - k;
        assert_eq!(comps.len(), 2, "context {k}");
        for (s, x) in comps.iter().enumerate() {
            assert_eq!((x.err, x.len, x.context), (None, MSG, (k * 10 + s) as u64));
            assert_eq!(c.nodes[1].get((k * 2 + s) * 64, MSG), &payload(t, s)[..]);
        }
    }
}

/// Sender `t`'s message `s`: its first two bytes name it.
fn named(t: usize, s: usize) -> Vec<u8> {
    let mut v = payload(t, s);
    v[0] = t as u8;
    v[1] = s as u8;
    v
}

/// A scalable endpoint on `node` with `n` contexts on one side and a shared context on
/// the other (`shared` names that side), its AV bound, the shared context not yet.
fn open_half_sep(node: &mut Node, n: usize, shared: CtxSide) -> (EpHandle<S>, AvHandle<S>) {
    let d = &mut node.dom;
    let mut info = default_info(EpType::Rdm, None, &cfg().provider);
    (info.ep_attr.tx_ctx_cnt, info.ep_attr.rx_ctx_cnt) = match shared {
        CtxSide::Tx => (FI_SHARED_CONTEXT, n),
        CtxSide::Rx => (n, FI_SHARED_CONTEXT),
    };
    let h = d.sep_open(&info, 0x5F).unwrap();
    assert_eq!(d.sep_contexts(h).unwrap().engines(), n);
    // The shared side has no contexts to open.
    assert_eq!(
        d.sep_ctx_open(h, shared, 0, Flags::empty()),
        Err(Errno::EINVAL)
    );
    let av = ctx_av(d, 0xA6);
    d.sep_bind(h, BindTarget::Av(av), Flags::empty()).unwrap();
    (h, av)
}

fn cq(node: &mut Node, context: u64) -> CqHandle<S> {
    let attr = CqAttr {
        size: 4096,
        ..CqAttr::default()
    };
    node.dom.cq_open(&attr, context).unwrap()
}

#[test]
fn a_scalable_endpoint_takes_its_receives_from_a_shared_receive_context() {
    let mut c = Cluster::new(NetSim::new(35, faults()), 2, &cfg()).unwrap();
    let a = open_sep(&mut c.nodes[0], N);
    let b = &mut c.nodes[1];
    let (h, b_av) = open_half_sep(b, N, CtxSide::Rx);
    let srx = b.dom.srx_open(&RxAttr::default(), 0x58).unwrap();
    let rcq = cq(b, 0x300);
    // The shared side's CQ binds to the endpoint, for its direction only; enabling
    // waits for the shared context, and so does every transmit context.
    assert_eq!(
        b.dom.sep_bind(h, BindTarget::Cq(rcq), Flags::TRANSMIT),
        Err(Errno::EINVAL)
    );
    b.dom.sep_bind(h, BindTarget::Cq(rcq), Flags::RECV).unwrap();
    assert_eq!(b.dom.sep_enable(h), Err(Errno::EOPBADSTATE));
    let mut tx_cqs = Vec::new();
    let mut tx = Vec::new();
    for k in 0..N {
        let t = b
            .dom
            .sep_ctx_open(h, CtxSide::Tx, k, Flags::empty())
            .unwrap();
        let tcq = cq(b, 0x310 + k as u64);
        b.dom
            .sep_ctx_bind(h, CtxSide::Tx, k, BindTarget::Cq(tcq), Flags::TRANSMIT)
            .unwrap();
        if k == 0 {
            assert_eq!(
                b.dom.sep_ctx_enable(h, CtxSide::Tx, 0),
                Err(Errno::EOPBADSTATE)
            );
            b.dom.ep_bind_srx(h, srx).unwrap();
            assert_eq!(b.dom.ep_bind_srx(h, srx), Err(Errno::EINVAL), "twice");
        }
        b.dom.sep_ctx_enable(h, CtxSide::Tx, k).unwrap();
        tx.push(t);
        tx_cqs.push(tcq);
    }
    b.dom.sep_enable(h).unwrap();
    assert_eq!(b.dom.sep_enable(h), Err(Errno::EOPBADSTATE));
    assert_eq!(b.dom.srx(srx).unwrap().bound(), N);

    let b_addr = c.nodes[1].dom.ep_addr(h).unwrap();
    let a_addr = c.nodes[0].dom.ep_addr(a.h).unwrap();
    let b_fi = insert(&mut c.nodes[0], a.av, b_addr);
    let a_fi = insert(&mut c.nodes[1], b_av, a_addr);
    const PER: usize = 30;
    // Half the receives wait in the context before anything is sent.
    let post = |node: &mut Node, slot: usize| {
        let buf = [IoVec::new(Node::BASE + (slot * 64) as u64, 64)];
        let m = MsgArgs::new(&buf, FI_ADDR_UNSPEC, slot as u64);
        node.dom.srx_recvmsg(srx, &m, None, Flags::empty()).unwrap();
    };
    for slot in 0..N * PER / 2 {
        post(&mut c.nodes[1], slot);
    }
    // a's transmit context t sends to b's engine t (fi_rx_addr t), and b's transmit
    // context k answers to a's receive context k, both ways at once.
    post_recvs(&mut c.nodes[0], &a, PER);
    for s in 0..PER {
        for (t, &hb) in tx.iter().enumerate() {
            let buf = c.nodes[0].put((1 << 20) | ((t * PER + s) * 64), &named(t, s));
            let dest = fi_rx_addr(b_fi, t as i32, BITS);
            let ht = a.tx[t];
            c.nodes[0]
                .op(|d, _, m| d.send(ht, m, IoVec::new(buf, MSG), dest, s as u64))
                .unwrap();
            let buf = c.nodes[1].put((2 << 20) | ((t * PER + s) * 64), &payload(t, s));
            let dest = fi_rx_addr(a_fi, t as i32, BITS);
            c.nodes[1]
                .op(|d, _, m| d.send(hb, m, IoVec::new(buf, MSG), dest, s as u64))
                .unwrap();
        }
    }
    collect(&mut c, 0, &a.tx_cq, PER);
    collect(&mut c, 1, &tx_cqs, PER);
    for slot in N * PER / 2..N * PER {
        post(&mut c.nodes[1], slot);
    }
    let got = collect(&mut c, 1, &[rcq], N * PER);
    let mut next = [0usize; N];
    let mut slots = std::collections::HashSet::new();
    for x in &got[0] {
        assert_eq!((x.err, x.len), (None, MSG), "{x:?}");
        assert!(slots.insert(x.context), "slot {} twice", x.context);
        let bytes = c.nodes[1].get(x.context as usize * 64, MSG).to_vec();
        let (t, s) = (bytes[0] as usize, bytes[1] as usize);
        // Every message once, intact, in order per sender.
        assert_eq!(bytes, named(t, s));
        assert_eq!(s, next[t], "sender {t}");
        next[t] += 1;
    }
    assert_eq!(next, [PER; N]);
    // b's transmit contexts reached a's receive contexts, each its own.
    let back = collect(&mut c, 0, &a.rx_cq, PER);
    for (k, comps) in back.iter().enumerate() {
        for (s, x) in comps.iter().enumerate() {
            assert_eq!((x.err, x.context), (None, (k * 10 + s) as u64));
        }
    }
    // Every engine took the messages sent to it from the one context.
    for (k, &e) in tx.iter().enumerate() {
        let st = c.nodes[1].dom.ep(e).unwrap().rdm().unwrap().stats();
        assert!(st.rx_packets > 0, "engine {k} received nothing");
    }
    c.run_for(Duration::from_millis(50));
    assert!(collect(&mut c, 1, &[rcq], 0)[0].is_empty());
    let st = c.sim.stats();
    assert!(st.lost > 0 && st.reordered > 0, "{st:?}");
    // Closing: the contexts, then the endpoint, then the shared context.
    let b = &mut c.nodes[1];
    assert_eq!(b.dom.srx_close(srx), Err(Errno::EBUSY));
    for k in 0..N {
        b.dom.sep_ctx_close(h, CtxSide::Tx, k).unwrap();
    }
    b.dom.sep_close(h).unwrap();
    b.dom.srx_close(srx).unwrap();
}

#[test]
fn a_scalable_endpoint_sends_through_a_shared_transmit_context() {
    let mut c = Cluster::new(NetSim::new(36, faults()), 2, &cfg()).unwrap();
    let a = open_sep(&mut c.nodes[0], N);
    let b = &mut c.nodes[1];
    let (h, b_av) = open_half_sep(b, N, CtxSide::Tx);
    let stx = b.dom.stx_open(&TxAttr::default(), 0x57).unwrap();
    b.dom.ep_bind_stx(h, stx).unwrap();
    let tcq = cq(b, 0x400);
    assert_eq!(
        b.dom.sep_bind(h, BindTarget::Cq(tcq), Flags::RECV),
        Err(Errno::EINVAL)
    );
    // Operations are posted to the endpoint: it needs the transmit CQ to enable.
    assert_eq!(b.dom.sep_enable(h), Err(Errno::ENOCQ));
    b.dom
        .sep_bind(h, BindTarget::Cq(tcq), Flags::TRANSMIT)
        .unwrap();
    let mut rx_cqs = Vec::new();
    let mut rx = Vec::new();
    for k in 0..N {
        let r = b
            .dom
            .sep_ctx_open(h, CtxSide::Rx, k, Flags::empty())
            .unwrap();
        let rcq = cq(b, 0x410 + k as u64);
        b.dom
            .sep_ctx_bind(h, CtxSide::Rx, k, BindTarget::Cq(rcq), Flags::RECV)
            .unwrap();
        b.dom.sep_ctx_enable(h, CtxSide::Rx, k).unwrap();
        rx.push(r);
        rx_cqs.push(rcq);
    }
    b.dom.sep_enable(h).unwrap();
    assert_eq!(b.dom.stx(stx).unwrap().bound(), N);
    // Once enabled, the shared side takes no more bindings.
    assert_eq!(
        b.dom.sep_bind(h, BindTarget::Cq(tcq), Flags::TRANSMIT),
        Err(Errno::EOPBADSTATE)
    );

    let b_addr = c.nodes[1].dom.ep_addr(h).unwrap();
    let a_addr = c.nodes[0].dom.ep_addr(a.h).unwrap();
    let b_fi = insert(&mut c.nodes[0], a.av, b_addr);
    let a_fi = insert(&mut c.nodes[1], b_av, a_addr);
    const PER: usize = 30;
    post_recvs(&mut c.nodes[0], &a, PER);
    for (k, &r) in rx.iter().enumerate() {
        for s in 0..PER {
            let at = Node::BASE + ((k * PER + s) * 64) as u64;
            c.nodes[1]
                .op(|d, _, _| d.recv(r, IoVec::new(at, 64), FI_ADDR_UNSPEC, (k * 10 + s) as u64))
                .unwrap();
        }
    }
    for s in 0..PER {
        for k in 0..N {
            // b posts on the endpoint itself, to a's receive context k ...
            let buf = c.nodes[1].put((2 << 20) | ((k * PER + s) * 64), &named(k, s));
            let dest = fi_rx_addr(a_fi, k as i32, BITS);
            c.nodes[1]
                .op(|d, _, m| d.send(h, m, IoVec::new(buf, MSG), dest, (k * 1000 + s) as u64))
                .unwrap();
            // ... and a's transmit context k reaches b's receive context k.
            let buf = c.nodes[0].put((1 << 20) | ((k * PER + s) * 64), &payload(k, s));
            let dest = fi_rx_addr(b_fi, k as i32, BITS);
            let ht = a.tx[k];
            c.nodes[0]
                .op(|d, _, m| d.send(ht, m, IoVec::new(buf, MSG), dest, s as u64))
                .unwrap();
        }
    }
    let sent = collect(&mut c, 1, &[tcq], N * PER);
    assert!(sent[0].iter().all(|x| x.err.is_none()), "{sent:?}");
    let mut done: Vec<u64> = sent[0].iter().map(|x| x.context).collect();
    done.sort_unstable();
    let mut want: Vec<u64> = (0..N)
        .flat_map(|k| (0..PER).map(move |s| (k * 1000 + s) as u64))
        .collect();
    want.sort_unstable();
    assert_eq!(done, want);
    for (who, cqs) in [(0, &a.rx_cq), (1, &rx_cqs)] {
        let got = collect(&mut c, who, cqs, PER);
        for (k, comps) in got.iter().enumerate() {
            for (s, x) in comps.iter().enumerate() {
                assert_eq!((x.err, x.len, x.context), (None, MSG, (k * 10 + s) as u64));
                let bytes = c.nodes[who].get((k * PER + s) * 64, MSG);
                let want = if who == 0 { named(k, s) } else { payload(k, s) };
                assert_eq!(bytes, &want[..], "node {who} ctx {k} msg {s}");
            }
        }
    }
    let st = c.sim.stats();
    assert!(st.lost > 0 && st.reordered > 0, "{st:?}");
    let b = &mut c.nodes[1];
    assert_eq!(b.dom.stx_close(stx), Err(Errno::EBUSY));
    for k in 0..N {
        b.dom.sep_ctx_close(h, CtxSide::Rx, k).unwrap();
    }
    b.dom.sep_close(h).unwrap();
    b.dom.stx_close(stx).unwrap();
}
