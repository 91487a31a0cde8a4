//! Shared transmit and receive contexts (fi_endpoint(3) "SHARED CONTEXTS") in the
//! simulator, under loss, reordering and duplication: endpoints sending through one
//! shared transmit context, endpoints taking their messages from one shared receive
//! context's receives, each message delivered once, in order per sender, on the CQ of
//! the endpoint it was sent to.

use hosted::netsim::{Faults, NetSim};
use hosted::ofi_nostd::cq::CqAttr;
use hosted::ofi_nostd::domain::{BindTarget, CqHandle, EpHandle, MsgArgs, SrxHandle};
use hosted::ofi_nostd::errno::Errno;
use hosted::ofi_nostd::flags::{FI_ADDR_UNSPEC, FiAddr, Flags};
use hosted::ofi_nostd::info::{EpType, FI_SHARED_CONTEXT, RxAttr, TxAttr, default_info};
use hosted::ofi_nostd::mem::IoVec;
use hosted::ofi_nostd::time::Duration;
use hosted::simlink::{Cluster, Completion, HeapStorage, Node, NodeConfig};

type S = HeapStorage;

const N: usize = 4;
const PER: usize = 30;
const MSG: usize = 48;
const SLOT: usize = 64;
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

/// `N` RDM endpoints of one node on a shared transmit and a shared receive context,
/// each with its own CQs, all on the node's AV.
struct Group {
    eps: Vec<EpHandle<S>>,
    tx_cq: Vec<CqHandle<S>>,
    rx_cq: Vec<CqHandle<S>>,
    srx: SrxHandle<S>,
    stx: hosted::ofi_nostd::domain::StxHandle<S>,
}

fn open_group(node: &mut Node) -> Group {
    let av = node.av;
    let d = &mut node.dom;
    let mut info = default_info(EpType::Rdm, None, &cfg().provider);
    info.ep_attr.tx_ctx_cnt = FI_SHARED_CONTEXT;
    info.ep_attr.rx_ctx_cnt = FI_SHARED_CONTEXT;
    let stx = d.stx_open(&TxAttr::default(), 0x57).unwrap();
    let srx = d.srx_open(&RxAttr::default(), 0x58).unwrap();
    let attr = CqAttr {
        size: 4096,
        ..CqAttr::default()
    };
    let mut g = Group {
        eps: vec![],
        tx_cq: vec![],
        rx_cq: vec![],
        srx,
        stx,
    };
    for k in 0..N {
        let ep = d.ep_open(&info, 0xE0 + k as u64).unwrap();
        let t = d.cq_open(&attr, 0x100 + k as u64).unwrap();
        let r = d.cq_open(&attr, 0x200 + k as u64).unwrap();
        d.ep_bind(ep, BindTarget::Cq(t), Flags::TRANSMIT).unwrap();
        d.ep_bind(ep, BindTarget::Cq(r), Flags::RECV).unwrap();
        d.ep_bind(ep, BindTarget::Av(av), Flags::empty()).unwrap();
        assert_eq!(
            d.ep_enable(ep),
            Err(Errno::EOPBADSTATE),
            "no shared contexts yet"
        );
        d.ep_bind_stx(ep, stx).unwrap();
        d.ep_bind_srx(ep, srx).unwrap();
        d.ep_enable(ep).unwrap();
        g.eps.push(ep);
        g.tx_cq.push(t);
        g.rx_cq.push(r);
    }
    g
}

/// Runs until every CQ in `cqs` of node `i` holds `want` completions in all, or fails
/// after `WAIT` of virtual time.
fn collect(c: &mut Cluster, i: usize, cqs: &[CqHandle<S>], want: usize) -> Vec<Vec<Completion>> {
    let mut got = vec![Vec::new(); cqs.len()];
    let deadline = c.sim.now() + WAIT;
    let r = c.run_until(deadline, 50_000_000, |c| {
        for (k, cq) in cqs.iter().enumerate() {
            c.nodes[i].drain_cq(*cq, &mut got[k]);
        }
        got.iter().map(|g| g.len()).sum::<usize>() >= want
    });
    let lens: Vec<usize> = got.iter().map(|g| g.len()).collect();
    assert!(r.is_ok(), "stalled ({r:?}) with {lens:?} of {want}");
    got
}

/// Message `seq` of sender `t`: the sender and the sequence number first, so a
/// receiver can tell which message landed where.
fn payload(t: usize, seq: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..MSG).map(|i| (t * 131 + seq * 7 + i) as u8).collect();
    v[0] = t as u8;
    v[1] = seq as u8;
    v
}

fn srx_post(node: &mut Node, srx: SrxHandle<S>, slot: usize, tag: Option<(u64, u64)>) {
    let at = Node::BASE + (slot * SLOT) as u64;
    let buf = [IoVec::new(at, SLOT)];
    let m = MsgArgs::new(&buf, FI_ADDR_UNSPEC, slot as u64);
    node.dom.srx_recvmsg(srx, &m, tag, Flags::empty()).unwrap();
}

/// Sender group on node 0 (one stx), receiver group on node 1 (one srx); sender `t`
/// sends to receiver endpoint `t`. Half the receives are posted before anything is
/// sent (they wait in the context), half after the messages arrived (they wait as
/// unexpected messages at the endpoints).
fn exchange(tagged: bool, seed: u64) {
    let mut c = Cluster::new(NetSim::new(seed, faults()), 2, &cfg()).unwrap();
    let a = open_group(&mut c.nodes[0]);
    let b = open_group(&mut c.nodes[1]);
    let dests: Vec<FiAddr> = b
        .eps
        .iter()
        .map(|ep| {
            let addr = c.nodes[1].dom.ep_addr(*ep).unwrap();
            c.nodes[0].insert(addr).unwrap()
        })
        .collect();
    for ep in &a.eps {
        let addr = c.nodes[0].dom.ep_addr(*ep).unwrap();
        c.nodes[1].insert(addr).unwrap();
    }
    // Tagged: receive `slot` takes sender slot % N's next message (its tag); untagged:
    // any endpoint's.
    let tag_of = |slot: usize| tagged.then_some(((slot % N) as u64, 0));
    let total = N * PER;
    for slot in 0..total / 2 {
        srx_post(&mut c.nodes[1], b.srx, slot, tag_of(slot));
    }
    assert_eq!(c.nodes[1].dom.srx(b.srx).unwrap().waiting(), total / 2);
    for s in 0..PER {
        for (t, (&h, &dest)) in a.eps.iter().zip(&dests).enumerate() {
            let off = (1 << 20) | ((t * PER + s) * SLOT);
            let buf = c.nodes[0].put(off, &payload(t, s));
            let ctx = (t * 1000 + s) as u64;
            c.nodes[0]
                .op(|d, _, m| {
                    if tagged {
                        d.tsend(h, m, IoVec::new(buf, MSG), dest, t as u64, ctx)
                    } else {
                        d.send(h, m, IoVec::new(buf, MSG), dest, ctx)
                    }
                })
                .unwrap();
        }
    }
    // Every sender's completions on its own CQ (in any order: comp_order is
    // FI_ORDER_NONE).
    let sent = collect(&mut c, 0, &a.tx_cq, total);
    for (t, comps) in sent.iter().enumerate() {
        let mut ctxs: Vec<u64> = comps.iter().map(|x| x.context).collect();
        ctxs.sort();
        let want: Vec<u64> = (0..PER).map(|s| (t * 1000 + s) as u64).collect();
        assert_eq!(ctxs, want, "sender {t}");
        assert!(comps.iter().all(|x| x.err.is_none()), "{comps:?}");
    }
    // The rest of the receives, now that the messages wait at the endpoints.
    for slot in total / 2..total {
        srx_post(&mut c.nodes[1], b.srx, slot, tag_of(slot));
    }
    let got = collect(&mut c, 1, &b.rx_cq, total);
    let mut seen = vec![vec![false; PER]; N];
    for (k, comps) in got.iter().enumerate() {
        let mut last = None;
        for x in comps {
            assert_eq!((x.err, x.len), (None, MSG), "{x:?}");
            let slot = x.context as usize;
            let bytes = c.nodes[1].get(slot * SLOT, MSG).to_vec();
            let (t, s) = (bytes[0] as usize, bytes[1] as usize);
            // On the CQ of the endpoint it was sent to, intact, once.
            assert_eq!(t, k, "receiver {k} got sender {t}'s message");
            assert_eq!(bytes, payload(t, s), "slot {slot}");
            assert!(!seen[t][s], "message {t}/{s} twice");
            seen[t][s] = true;
            // In order per sender: later messages into later-posted receives.
            assert!(
                last < Some((s, slot)),
                "out of order: {last:?} then {s}/{slot}"
            );
            last = Some((s, slot));
            if tagged {
                assert_eq!(slot % N, t, "tag match");
            }
        }
    }
    assert!(seen.iter().flatten().all(|x| *x), "missing messages");
    // The receives posted before the messages came took them as they arrived, into
    // their buffers: only the messages that found none waiting were buffered as
    // unexpected (and copied when their receives came). Tagged: the first half of
    // each sender's messages found receives with its tag.
    let ux: Vec<u64> = b
        .eps
        .iter()
        .map(|ep| {
            let e = c.nodes[1].dom.ep(*ep).unwrap();
            e.rdm().unwrap().stats().unexpected
        })
        .collect();
    assert_eq!(ux.iter().sum::<u64>(), (total / 2) as u64, "{ux:?}");
    if tagged {
        assert!(ux.iter().all(|&n| n == (PER / 2) as u64), "{ux:?}");
    }
    // Nothing extra once the network settled; the context holds nothing.
    c.run_for(Duration::from_millis(50));
    let extra = collect(&mut c, 1, &b.rx_cq, 0);
    assert!(extra.iter().all(|e| e.is_empty()), "{extra:?}");
    assert_eq!(c.nodes[1].dom.srx(b.srx).unwrap().waiting(), 0);
    let st = c.sim.stats();
    assert!(st.lost > 0 && st.reordered > 0, "{st:?}");
    close_group(&mut c, 0, a);
    close_group(&mut c, 1, b);
}

fn close_group(c: &mut Cluster, i: usize, g: Group) {
    let d = &mut c.nodes[i].dom;
    assert_eq!(d.srx_close(g.srx), Err(Errno::EBUSY));
    assert_eq!(d.stx_close(g.stx), Err(Errno::EBUSY));
    for ep in g.eps {
        d.ep_begin_close(ep, c.sim.now()).unwrap();
        d.ep_close(ep).unwrap();
    }
    d.srx_close(g.srx).unwrap();
    d.stx_close(g.stx).unwrap();
}

#[test]
fn endpoints_on_one_srx_take_every_message_once_in_order_per_sender() {
    exchange(false, 41);
}

#[test]
fn tagged_receives_on_one_srx_match_their_senders_messages() {
    exchange(true, 42);
}

/// Rendezvous messages (beyond the eager threshold) into receives that wait in the
/// shared receive context: each RTS takes the oldest receive as it arrives, so the
/// data lands in the buffer and nothing waits as unexpected.
#[test]
fn rendezvous_messages_land_in_the_receives_that_wait_in_the_context() {
    const BIG: usize = 200_000;
    let mut c = Cluster::new(NetSim::new(45, faults()), 2, &cfg()).unwrap();
    let a = open_group(&mut c.nodes[0]);
    let b = open_group(&mut c.nodes[1]);
    // Receive j at 2 MiB + j * 256 KiB, each big enough for one message.
    let at = |j: usize| (2 << 20) + j * (256 << 10);
    for j in 0..2 {
        let buf = [IoVec::new(Node::BASE + at(j) as u64, BIG + 8)];
        let m = MsgArgs::new(&buf, FI_ADDR_UNSPEC, 0x500 + j as u64);
        c.nodes[1]
            .dom
            .srx_recvmsg(b.srx, &m, None, Flags::empty())
            .unwrap();
    }
    // Senders 0 and 1 to receiver endpoints 1 and 3.
    let data = |t: usize| -> Vec<u8> { (0..BIG).map(|i| (i * 7 + t * 61) as u8).collect() };
    for (t, k) in [(0usize, 1usize), (1, 3)] {
        let dest = {
            let addr = c.nodes[1].dom.ep_addr(b.eps[k]).unwrap();
            c.nodes[0].insert(addr).unwrap()
        };
        let buf = c.nodes[0].put((1 << 20) + t * (256 << 10), &data(t));
        let h = a.eps[t];
        c.nodes[0]
            .op(|d, _, m| d.send(h, m, IoVec::new(buf, BIG), dest, t as u64))
            .unwrap();
    }
    let got = collect(&mut c, 1, &b.rx_cq, 2);
    let mut filled = [None; 2];
    for (k, t) in [(1usize, 0usize), (3, 1)] {
        assert_eq!(got[k].len(), 1, "{got:?}");
        let x = &got[k][0];
        assert_eq!((x.err, x.len), (None, BIG), "{x:?}");
        let j = (x.context - 0x500) as usize;
        assert!(filled[j].replace(t).is_none(), "receive {j} twice");
        assert_eq!(c.nodes[1].get(at(j), BIG), &data(t)[..], "sender {t}");
        let e = c.nodes[1].dom.ep(b.eps[k]).unwrap();
        assert_eq!(e.rdm().unwrap().stats().unexpected, 0, "endpoint {k}");
    }
    assert_eq!(c.nodes[1].dom.srx(b.srx).unwrap().waiting(), 0);
    let sent = collect(&mut c, 0, &a.tx_cq, 2);
    assert!(sent.iter().flatten().all(|x| x.err.is_none()), "{sent:?}");
    close_group(&mut c, 0, a);
    close_group(&mut c, 1, b);
}

#[test]
fn peek_claim_and_cancel_on_a_shared_receive_context() {
    let mut c = Cluster::new(NetSim::new(43, faults()), 2, &cfg()).unwrap();
    let b = open_group(&mut c.nodes[1]);
    let dest = {
        let addr = c.nodes[1].dom.ep_addr(b.eps[2]).unwrap();
        c.nodes[0].insert(addr).unwrap()
    };
    let buf = c.nodes[0].put(1 << 20, &payload(2, 0));
    c.nodes[0]
        .op(|d, ep, m| d.tsend(ep, m, IoVec::new(buf, MSG), dest, 0x77, 1))
        .unwrap();
    let done = c.wait_cq(0, false, 1, WAIT).unwrap();
    assert_eq!(done[0].err, None);
    let d = &mut c.nodes[1].dom;
    let none: [IoVec; 0] = [];
    // A peek for another tag: -FI_ENOMSG on the first endpoint's CQ.
    let m = MsgArgs::new(&none, FI_ADDR_UNSPEC, 0x10);
    d.srx_recvmsg(b.srx, &m, Some((0x78, 0)), Flags::PEEK)
        .unwrap();
    let miss = collect(&mut c, 1, &b.rx_cq, 1);
    assert_eq!(miss[0][0].err, Some(Errno::ENOMSG), "{miss:?}");
    // Peek and claim the message, which waits at endpoint 2: reported there.
    let d = &mut c.nodes[1].dom;
    let m = MsgArgs::new(&none, FI_ADDR_UNSPEC, 0x11);
    d.srx_recvmsg(b.srx, &m, Some((0x77, 0)), Flags::PEEK | Flags::CLAIM)
        .unwrap();
    let peeked = collect(&mut c, 1, &b.rx_cq, 1);
    assert_eq!((peeked[2][0].context, peeked[2][0].len), (0x11, MSG));
    // A plain receive for the tag does not take the claimed message; a claim with
    // another context finds nothing.
    srx_post(&mut c.nodes[1], b.srx, 3, Some((0x77, 0)));
    let d = &mut c.nodes[1].dom;
    let slot = [IoVec::new(Node::BASE + 5 * SLOT as u64, SLOT)];
    let m = MsgArgs::new(&slot, FI_ADDR_UNSPEC, 0x12);
    assert_eq!(
        d.srx_recvmsg(b.srx, &m, Some((0x77, 0)), Flags::CLAIM),
        Err(Errno::ENOMSG)
    );
    let m = MsgArgs::new(&slot, FI_ADDR_UNSPEC, 0x11);
    d.srx_recvmsg(b.srx, &m, Some((0x77, 0)), Flags::CLAIM)
        .unwrap();
    let claimed = collect(&mut c, 1, &b.rx_cq, 1);
    assert_eq!((claimed[2][0].context, claimed[2][0].err), (0x11, None));
    assert_eq!(c.nodes[1].get(5 * SLOT, MSG), &payload(2, 0)[..]);
    // The plain receive still waits; cancel it through an endpoint bound to the
    // context: FI_ECANCELED on the first endpoint's CQ.
    let d = &mut c.nodes[1].dom;
    assert_eq!(d.srx(b.srx).unwrap().waiting(), 1);
    d.ep_cancel(b.eps[3], 3).unwrap();
    let canceled = collect(&mut c, 1, &b.rx_cq, 1);
    assert_eq!(
        (canceled[0][0].context, canceled[0][0].err),
        (3, Some(Errno::ECANCELED))
    );
    assert_eq!(c.nodes[1].dom.srx(b.srx).unwrap().waiting(), 0);
    close_group(&mut c, 1, b);
}

#[test]
fn closing_with_receives_waiting_and_sends_queued() {
    let mut c = Cluster::new(NetSim::new(44, faults()), 2, &cfg()).unwrap();
    let a = open_group(&mut c.nodes[0]);
    let b = open_group(&mut c.nodes[1]);
    for slot in 0..8 {
        srx_post(&mut c.nodes[1], b.srx, slot, None);
    }
    // Sends queued on every endpoint of the shared transmit context, none progressed.
    let dest = {
        let addr = c.nodes[1].dom.ep_addr(b.eps[0]).unwrap();
        c.nodes[0].insert(addr).unwrap()
    };
    let buf = c.nodes[0].put(1 << 20, &payload(0, 0));
    for (t, h) in a.eps.iter().enumerate() {
        let h = *h;
        c.nodes[0]
            .op(|d, _, m| d.send(h, m, IoVec::new(buf, MSG), dest, t as u64))
            .unwrap();
    }
    // The receiving endpoints close with receives waiting in their context: the
    // context outlives them, keeps its receives, and then closes.
    let d = &mut c.nodes[1].dom;
    for ep in &b.eps {
        d.ep_close(*ep).unwrap();
    }
    assert_eq!(d.srx(b.srx).unwrap().waiting(), 8);
    assert_eq!(d.srx(b.srx).unwrap().bound(), 0);
    d.srx_close(b.srx).unwrap();
    d.stx_close(b.stx).unwrap();
    // The senders close with their sends queued: no completions, the CQs and the
    // transmit context are released.
    let d = &mut c.nodes[0].dom;
    assert_eq!(d.stx_close(a.stx), Err(Errno::EBUSY));
    for ep in &a.eps {
        d.ep_close(*ep).unwrap();
    }
    assert_eq!(d.stx(a.stx).unwrap().bound(), 0);
    d.stx_close(a.stx).unwrap();
    d.srx_close(a.srx).unwrap();
    for cq in a.tx_cq.iter().chain(&a.rx_cq) {
        d.cq_close(*cq).unwrap();
    }
    c.run_for(Duration::from_millis(20));
}

/// Multi-recv buffers of one shared receive context, filled by every endpoint bound
/// to it: each buffer posted, its pieces and its release.
#[derive(Default)]
struct MultiLog {
    /// (context, base, len) of every buffer posted.
    posted: Vec<(u64, u64, usize)>,
    /// Every completion, per receiving endpoint, in CQ order.
    got: Vec<Vec<Completion>>,
}

const BUF: usize = 1024;

impl MultiLog {
    /// Posts multi-recv buffer number `posted.len()` (a region of its own) of `len`.
    fn post(&mut self, node: &mut Node, srx: SrxHandle<S>, len: usize) -> Result<(), Errno> {
        let j = self.posted.len();
        let off = (2 << 20) + j * (64 << 10);
        let at = Node::BASE + off as u64;
        let buf = [IoVec::new(at, len)];
        let ctx = 0x1000 + j as u64;
        let m = MsgArgs::new(&buf, FI_ADDR_UNSPEC, ctx);
        node.dom.srx_recvmsg(srx, &m, None, Flags::MULTI_RECV)?;
        self.posted.push((ctx, at, len));
        Ok(())
    }

    /// Completions so far that release a buffer.
    fn released(&self) -> usize {
        self.got.iter().flatten().filter(|x| is_release(x)).count()
    }

    /// Pieces (messages) so far.
    fn pieces(&self) -> usize {
        self.got.iter().flatten().filter(|x| x.len > 0).count()
    }

    /// Checks every message of `per` from each of `N` senders landed once, intact,
    /// on the CQ of the endpoint it was sent to, in order per sender, in a buffer
    /// posted, and that each buffer's pieces lie back to back from its start, up to
    /// where its release says it ended.
    fn check(&self, node: &Node, per: std::ops::Range<usize>) {
        let mut seen = vec![vec![false; per.end]; N];
        let mut by_buf: Vec<Vec<(u64, usize)>> = vec![Vec::new(); self.posted.len()];
        let mut ends: Vec<Option<u64>> = vec![None; self.posted.len()];
        for (k, comps) in self.got.iter().enumerate() {
            let mut last = None;
            for x in comps {
                assert_eq!(x.err, None, "{x:?}");
                let j = (x.context - 0x1000) as usize;
                let (_, base, len) = self.posted[j];
                if is_release(x) {
                    assert!(ends[j].is_none(), "buffer {j} released twice");
                    ends[j] = Some(x.buf + x.len as u64);
                }
                if x.len == 0 {
                    continue;
                }
                assert_eq!(x.len, MSG, "{x:?}");
                assert!(x.buf >= base && x.buf + MSG as u64 <= base + len as u64);
                let bytes = node.get((x.buf - Node::BASE) as usize, MSG).to_vec();
                let (t, s) = (bytes[0] as usize, bytes[1] as usize);
                assert_eq!(t, k, "receiver {k} got sender {t}'s message");
                assert_eq!(bytes, payload(t, s), "{x:?}");
                assert!(
                    per.contains(&s) && !seen[t][s],
                    "message {t}/{s} twice or stray"
                );
                seen[t][s] = true;
                assert!(last < Some(s), "out of order: {last:?} then {s}");
                last = Some(s);
                by_buf[j].push((x.buf, x.len));
            }
        }
        for (t, seen) in seen.iter().enumerate() {
            assert!(seen[per.clone()].iter().all(|x| *x), "sender {t}: missing");
        }
        for (j, pieces) in by_buf.iter_mut().enumerate() {
            pieces.sort();
            let mut at = self.posted[j].1;
            for (buf, len) in pieces.iter() {
                assert_eq!(*buf, at, "buffer {j}: pieces back to back");
                at += *len as u64;
            }
            if let Some(end) = ends[j] {
                assert_eq!(end, at, "buffer {j}: released where it ended");
            }
        }
    }
}

/// The completion that releases a multi-recv buffer: the last piece, or an empty
/// entry of its own.
fn is_release(x: &Completion) -> bool {
    x.flags.contains(Flags::MULTI_RECV)
}

/// Sends messages `seqs` from sender `t` of group `a` to receiver `t`.
fn send_all(c: &mut Cluster, a: &Group, dests: &[FiAddr], seqs: std::ops::Range<usize>) {
    for s in seqs {
        for (t, (&h, &dest)) in a.eps.iter().zip(dests).enumerate() {
            let off = (1 << 20) | ((t * 64 + s) * SLOT);
            let buf = c.nodes[0].put(off, &payload(t, s));
            let ctx = (t * 1000 + s) as u64;
            c.nodes[0]
                .op(|d, _, m| d.send(h, m, IoVec::new(buf, MSG), dest, ctx))
                .unwrap();
        }
    }
}

#[test]
fn multi_recv_buffers_on_one_srx_take_every_endpoints_messages() {
    let mut c = Cluster::new(NetSim::new(45, faults()), 2, &cfg()).unwrap();
    let a = open_group(&mut c.nodes[0]);
    let b = open_group(&mut c.nodes[1]);
    let dests: Vec<FiAddr> = b
        .eps
        .iter()
        .map(|ep| {
            let addr = c.nodes[1].dom.ep_addr(*ep).unwrap();
            c.nodes[0].insert(addr).unwrap()
        })
        .collect();
    for ep in &a.eps {
        let addr = c.nodes[0].dom.ep_addr(*ep).unwrap();
        c.nodes[1].insert(addr).unwrap();
    }
    // At most `MAX_SRX_MULTI` buffers wait (or are lent) at once; cancel them.
    let max = hosted::ofi_nostd::ep::srx::MAX_SRX_MULTI;
    let mut log = MultiLog {
        got: vec![Vec::new(); N],
        ..MultiLog::default()
    };
    for _ in 0..max {
        log.post(&mut c.nodes[1], b.srx, BUF).unwrap();
    }
    assert_eq!(log.post(&mut c.nodes[1], b.srx, BUF), Err(Errno::EAGAIN));
    for (ctx, _, _) in log.posted.clone() {
        c.nodes[1].dom.srx_cancel(b.srx, ctx).unwrap();
    }
    let canceled = collect(&mut c, 1, &b.rx_cq, max);
    assert!(
        canceled[0].iter().all(|x| x.err == Some(Errno::ECANCELED)) && canceled[0].len() == max,
        "{canceled:?}"
    );
    log.posted.clear();

    // Buffers first: two at a time, each posted again as one is released, while
    // every sender streams to its receiver.
    log.post(&mut c.nodes[1], b.srx, BUF).unwrap();
    log.post(&mut c.nodes[1], b.srx, BUF).unwrap();
    send_all(&mut c, &a, &dests, 0..PER);
    let deadline = c.sim.now() + WAIT;
    let r = c.run_until(deadline, 50_000_000, |c| {
        let before = log.released();
        for (k, cq) in b.rx_cq.iter().enumerate() {
            c.nodes[1].drain_cq(*cq, &mut log.got[k]);
        }
        for _ in before..log.released() {
            log.post(&mut c.nodes[1], b.srx, BUF).unwrap();
        }
        log.pieces() >= N * PER
    });
    assert!(
        r.is_ok(),
        "stalled ({r:?}) with {} of {}",
        log.pieces(),
        N * PER
    );
    assert!(log.released() > 0, "every buffer was filled at least once");
    let sent = collect(&mut c, 0, &a.tx_cq, N * PER);
    assert!(sent.iter().flatten().all(|x| x.err.is_none()));
    log.check(&c.nodes[1], 0..PER);

    // Messages first: they all wait at their endpoints, then one buffer with room
    // for them all goes from endpoint to endpoint until every one has landed, with
    // nothing more arriving to prompt it.
    let base = log.got.iter().map(|g| g.len()).collect::<Vec<_>>();
    let pieces = log.pieces();
    send_all(&mut c, &a, &dests, PER..2 * PER);
    let sent = collect(&mut c, 0, &a.tx_cq, N * PER);
    assert!(sent.iter().flatten().all(|x| x.err.is_none()));
    c.run_for(Duration::from_millis(50));
    let big = N * PER * MSG + 256;
    let last = log.posted.len();
    log.post(&mut c.nodes[1], b.srx, big).unwrap();
    let deadline = c.sim.now() + WAIT;
    let r = c.run_until(deadline, 50_000_000, |c| {
        for (k, cq) in b.rx_cq.iter().enumerate() {
            c.nodes[1].drain_cq(*cq, &mut log.got[k]);
        }
        log.pieces() >= pieces + N * PER
    });
    assert!(
        r.is_ok(),
        "stalled ({r:?}) with {} of {}",
        log.pieces() - pieces,
        N * PER
    );
    // In the big buffer and in the rest of those still posted from before; every
    // buffer's pieces back to back across both rounds.
    assert!(
        log.got
            .iter()
            .zip(&base)
            .any(|(g, b)| g[*b..].iter().any(|x| x.context == 0x1000 + last as u64)),
        "the big buffer took none"
    );
    log.check(&c.nodes[1], 0..2 * PER);
    // Still room in it: canceled, it comes back with FI_ECANCELED.
    c.nodes[1]
        .dom
        .srx_cancel(b.srx, 0x1000 + last as u64)
        .unwrap();
    let mut late = vec![Vec::new(); N];
    let deadline = c.sim.now() + WAIT;
    let r = c.run_until(deadline, 1_000_000, |c| {
        for (k, cq) in b.rx_cq.iter().enumerate() {
            c.nodes[1].drain_cq(*cq, &mut late[k]);
        }
        !late.iter().all(|l| l.is_empty())
    });
    assert!(r.is_ok());
    let late: Vec<Completion> = late.into_iter().flatten().collect();
    assert_eq!(late.len(), 1, "{late:?}");
    assert_eq!(
        (late[0].context, late[0].err),
        (0x1000 + last as u64, Some(Errno::ECANCELED))
    );
    close_group(&mut c, 0, a);
    close_group(&mut c, 1, b);
}
