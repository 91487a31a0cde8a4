//! Datagrams to the domain's own address on an Ethernet link, whose data plane (TAP,
//! AF_PACKET, DPDK, virtio) never hands our own frames back: every frame that leaves
//! the link here is lost, as on those planes, so anything delivered went through the
//! domain's loopback queue.

extern crate std;

use std::boxed::Box;
use std::vec;
use std::vec::Vec;

use wire::link::{Capabilities, Loopback, Medium};

use super::*;
use crate::av::{AvAddrs, AvAttr};
use crate::cq::CqAttr;
use crate::cq::{CqEntry, CqFormat};
use crate::fabric::Fabric;
use crate::flags::FI_ADDR_UNSPEC;
use crate::flags::FiAddr;
use crate::info::EpType;
use crate::info::{FabricAttr, ProviderConfig, default_info};
use crate::mem::IoVec;
use crate::mem::SliceMemory;
use crate::storage::test_storage::VecStorage;
use crate::time::Duration;

const FRAME: usize = 1514;
type EthLink = Loopback<32, FRAME>;
const BASE: u64 = 0x10_0000;
/// Bytes of memory per operation: its source at the start, its destination at half.
const STRIDE: usize = 0x10000;
const IP: [u8; 4] = [10, 9, 0, 1];

fn cfg() -> ProviderConfig {
    ProviderConfig {
        tx_size: 32,
        rx_size: 32,
        ep_cnt: 3,
        cq_cnt: 8,
        cntr_cnt: 1,
        mr_cnt: 1,
        inject_size: 64,
        ..ProviderConfig::DEFAULT
    }
}

struct Ep {
    h: EpHandle<VecStorage>,
    tx_cq: CqHandle<VecStorage>,
    rx_cq: CqHandle<VecStorage>,
}

struct Node {
    _fabric: Fabric<VecStorage>,
    dom: Domain<VecStorage>,
    link: Box<EthLink>,
    mem: Vec<u8>,
    now: Instant,
    /// Frames that went to the link (and were lost there).
    leaked: usize,
}

impl Node {
    fn new(loopback_slots: usize) -> Node {
        Node::with_info(loopback_slots, &default_info(EpType::Rdm, None, &cfg()))
    }

    /// A node whose domain is opened with `info`.
    fn with_info(loopback_slots: usize, info: &crate::info::Info) -> Node {
        let mut fabric = Fabric::open(&FabricAttr::default(), 0, VecStorage, 1).unwrap();
        let caps = Capabilities::new(Medium::Ethernet, FRAME);
        let net = NetConfig::new(&caps, IP, 7000).with_ethernet([2, 0, 0, 0, 9, 1], 24, None);
        let dc = DomainConfig {
            arp_entries: 4,
            loopback_slots,
            ..DomainConfig::new(net, cfg(), 5)
        };
        let dom = Domain::open(&mut fabric, info, dc, VecStorage, 0).unwrap();
        Node {
            _fabric: fabric,
            dom,
            link: Box::new(EthLink::new(Medium::Ethernet, None)),
            mem: vec![0; 16 * STRIDE],
            now: Instant::from_millis(1),
            leaked: 0,
        }
    }

    /// An enabled endpoint of `ep_type` with its own CQs, bound to `av`.
    fn ep(&mut self, ep_type: EpType, av: AvHandle<VecStorage>) -> Ep {
        self.ep_info(&default_info(ep_type, None, &cfg()), av)
    }

    /// An enabled endpoint opened with `info`, its own CQs, bound to `av`.
    fn ep_info(&mut self, info: &crate::info::Info, av: AvHandle<VecStorage>) -> Ep {
        let attr = CqAttr {
            format: CqFormat::Tagged,
            size: 64,
            ..CqAttr::default()
        };
        let d = &mut self.dom;
        let tx_cq = d.cq_open(&attr, 1).unwrap();
        let rx_cq = d.cq_open(&attr, 2).unwrap();
        let h = d.ep_open(info, 3).unwrap();
        d.ep_bind(h, BindTarget::Cq(tx_cq), Flags::TRANSMIT)
            .unwrap();
        d.ep_bind(h, BindTarget::Cq(rx_cq), Flags::RECV).unwrap();
        d.ep_bind(h, BindTarget::Av(av), Flags::empty()).unwrap();
        d.ep_enable(h).unwrap();
        Ep { h, tx_cq, rx_cq }
    }

    fn av(&mut self) -> AvHandle<VecStorage> {
        let mut attr = AvAttr {
            count: 4,
            ..AvAttr::default()
        };
        self.dom.av_open(&mut attr, 4).unwrap()
    }

    /// Inserts the addresses of `eps` into `av`, returning their fi_addrs in order.
    fn insert(&mut self, av: AvHandle<VecStorage>, eps: &[&Ep]) -> Vec<FiAddr> {
        let addrs: Vec<EpAddr> = eps.iter().map(|e| self.dom.ep_addr(e.h).unwrap()).collect();
        let mut out = vec![0; addrs.len()];
        let n = self
            .dom
            .av_mut(av)
            .unwrap()
            .insert(AvAddrs::Ep(&addrs), Some(&mut out), Flags::empty(), None)
            .unwrap();
        assert_eq!(n, addrs.len());
        out
    }

    fn fill(&mut self, op: usize, len: usize, seed: u8) {
        let at = op * STRIDE;
        for (i, b) in self.mem[at..at + len].iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(31).wrapping_add(seed);
        }
        self.mem[at + STRIDE / 2..at + STRIDE].fill(0xee);
    }

    fn src(op: usize, len: usize) -> IoVec {
        IoVec::new(BASE + (op * STRIDE) as u64, len)
    }

    fn dst(op: usize) -> IoVec {
        IoVec::new(BASE + (op * STRIDE + STRIDE / 2) as u64, STRIDE / 2)
    }

    fn check(&self, op: usize, len: usize) {
        let at = op * STRIDE;
        assert_eq!(
            self.mem[at..at + len],
            self.mem[at + STRIDE / 2..at + STRIDE / 2 + len],
            "data of op {op} ({len} B)"
        );
        assert_eq!(self.mem[at + STRIDE / 2 + len], 0xee, "op {op} overran");
    }

    fn send(&mut self, ep: &Ep, op: usize, len: usize, dest: FiAddr, tag: Option<u64>) {
        let mem = SliceMemory::new(BASE, &mut self.mem);
        let ctx = 100 + op as u64;
        match tag {
            Some(t) => self.dom.tsend(ep.h, &mem, Self::src(op, len), dest, t, ctx),
            None => self.dom.send(ep.h, &mem, Self::src(op, len), dest, ctx),
        }
        .unwrap();
    }

    fn recv(&mut self, ep: &Ep, op: usize, tag: Option<u64>) {
        let ctx = 100 + op as u64;
        match tag {
            Some(t) => self
                .dom
                .trecv(ep.h, Self::dst(op), FI_ADDR_UNSPEC, t, 0, ctx),
            None => self.dom.recv(ep.h, Self::dst(op), FI_ADDR_UNSPEC, ctx),
        }
        .unwrap();
    }

    /// One progress pass (full, or only its transmit half), then time moves on by `dt`.
    fn step(&mut self, receive: bool, dt: Duration) {
        let mut mem = SliceMemory::new(BASE, &mut self.mem);
        let link = &mut *self.link;
        if receive {
            self.dom.progress(self.now, link, &mut mem).unwrap();
        } else {
            self.dom.progress_tx(self.now, link, &mut mem).unwrap();
        }
        while self.link.pop_tx(|_, _| ()).is_some() {
            self.leaked += 1;
        }
        self.now += dt;
    }

    /// Completions of `cq`: (context, result, len, tag).
    fn read(
        &mut self,
        cq: CqHandle<VecStorage>,
    ) -> Vec<(u64, core::result::Result<(), Errno>, usize, u64)> {
        let mut out = Vec::new();
        let q = self.dom.cq_mut(cq).unwrap();
        loop {
            let mut e = [CqEntry::default(); 8];
            match q.read(&mut e) {
                Ok(n) => out.extend(e[..n].iter().map(|e| (e.op_context, Ok(()), e.len, e.tag))),
                Err(Errno::EAVAIL) => {
                    let x = q
                        .readerr(Flags::empty(), crate::cq::API_VERSION_1_5, &mut [])
                        .unwrap();
                    let err = Errno::from_code(x.err).unwrap_or(Errno::EOTHER);
                    out.push((x.op_context, Err(err), x.len, x.tag));
                }
                Err(_) => return out,
            }
        }
    }

    /// Runs full passes until `want` completions arrived on each of `cqs` (at most
    /// `steps` passes of 10 µs), and returns them per CQ.
    #[allow(clippy::type_complexity)]
    fn run(
        &mut self,
        cqs: &[(CqHandle<VecStorage>, usize)],
        steps: usize,
    ) -> Vec<Vec<(u64, core::result::Result<(), Errno>, usize, u64)>> {
        let mut got: Vec<Vec<_>> = cqs.iter().map(|_| Vec::new()).collect();
        for _ in 0..steps {
            self.step(true, Duration::from_micros(10));
            for (i, (cq, _)) in cqs.iter().enumerate() {
                let mut c = self.read(*cq);
                got[i].append(&mut c);
            }
            if cqs.iter().zip(&got).all(|((_, want), g)| g.len() >= *want) {
                break;
            }
        }
        for ((_, want), g) in cqs.iter().zip(&got) {
            assert_eq!(g.len(), *want, "completions: {g:?}");
        }
        got
    }
}

fn sorted_ctx(c: &[(u64, core::result::Result<(), Errno>, usize, u64)]) -> Vec<u64> {
    assert!(c.iter().all(|e| e.1.is_ok()), "errors: {c:?}");
    let mut v: Vec<u64> = c.iter().map(|e| e.0).collect();
    v.sort_unstable();
    v
}

/// An RDM endpoint sends msg and tagged messages to itself, and two endpoints of the
/// domain exchange both kinds, at sizes from 1 B to rendezvous: every byte arrives,
/// and no frame goes to the link (not even an ARP request).
#[test]
fn rdm_endpoints_talk_to_themselves_and_each_other_over_ethernet() {
    let mut n = Node::new(DEFAULT_LOOPBACK_SLOTS);
    let av = n.av();
    let a = n.ep(EpType::Rdm, av);
    let b = n.ep(EpType::Rdm, av);
    let fi = n.insert(av, &[&a, &b]);
    let (to_a, to_b) = (fi[0], fi[1]);
    // 1 B, one packet, several eager segments, rendezvous (eager threshold 8192).
    for (round, len) in [1usize, 1000, 5000, 20_000].into_iter().enumerate() {
        let op = |k: usize| round * 4 + k;
        // a -> a msg, a -> a tagged (tag 1), a -> b msg, b -> a tagged (tag 2).
        for k in 0..4 {
            n.fill(op(k), len, (op(k) * 7) as u8);
        }
        n.recv(&a, op(0), None);
        n.recv(&a, op(1), Some(1));
        n.recv(&b, op(2), None);
        n.recv(&a, op(3), Some(2));
        n.send(&a, op(0), len, to_a, None);
        n.send(&a, op(1), len, to_a, Some(1));
        n.send(&a, op(2), len, to_b, None);
        n.send(&b, op(3), len, to_a, Some(2));
        let got = n.run(
            &[(a.tx_cq, 3), (b.tx_cq, 1), (a.rx_cq, 3), (b.rx_cq, 1)],
            5000,
        );
        let ctx = |k: usize| 100 + op(k) as u64;
        assert_eq!(sorted_ctx(&got[0]), vec![ctx(0), ctx(1), ctx(2)]);
        assert_eq!(sorted_ctx(&got[1]), vec![ctx(3)]);
        assert_eq!(sorted_ctx(&got[2]), vec![ctx(0), ctx(1), ctx(3)]);
        assert_eq!(sorted_ctx(&got[3]), vec![ctx(2)]);
        for e in got[2].iter().chain(&got[3]) {
            assert_eq!(e.2, len, "received length of {e:?}");
        }
        let tag_of = |c: u64| got[2].iter().find(|e| e.0 == c).unwrap().3;
        assert_eq!((tag_of(ctx(1)), tag_of(ctx(3))), (1, 2));
        for k in 0..4 {
            n.check(op(k), len);
        }
    }
    assert_eq!(n.leaked, 0, "a frame went to the link");
    let s = *n.dom.net_stats();
    assert!(s.tx_looped > 40, "{s:?}");
    assert_eq!(s.rx_looped, s.tx_looped);
    assert_eq!(
        (s.tx_packets, s.arp_requests_sent, s.tx_loop_refused),
        (0, 0, 0)
    );
    // The last pass received and may have left its transmit half to the next one;
    // after that nothing is due.
    n.step(true, Duration::from_micros(1));
    assert!(n.dom.poll_timeout().is_none_or(|t| t > n.now));
}

/// A one-slot queue: every self-send beyond it is EAGAIN back-pressure, retried, never
/// lost; a pass that only transmits leaves the datagram waiting and `poll_timeout`
/// asks for the receiving pass at once.
#[test]
fn a_full_loopback_queue_is_back_pressure_not_loss() {
    let mut n = Node::new(1);
    let av = n.av();
    let a = n.ep(EpType::Rdm, av);
    let b = n.ep(EpType::Rdm, av);
    let fi = n.insert(av, &[&a, &b]);
    let lens = [20_000usize, 5000, 7, 12_000, 3000, 1];
    for (op, &len) in lens.iter().enumerate() {
        n.fill(op, len, op as u8 + 1);
        let (from, to, rx) = if op % 2 == 0 {
            (&a, fi[0], &a)
        } else {
            (&b, fi[0], &a)
        };
        n.recv(rx, op, Some(op as u64));
        n.send(from, op, len, to, Some(op as u64));
    }
    // The posts' own transmit passes: the first packet fills the queue, the rest wait.
    n.step(false, Duration::ZERO);
    let s = *n.dom.net_stats();
    assert_eq!((s.tx_looped, s.rx_looped), (1, 0));
    assert!(s.tx_loop_full >= 1, "{s:?}");
    assert!(
        n.dom.poll_timeout().is_some_and(|t| t <= n.now),
        "work is waiting"
    );
    let got = n.run(&[(a.tx_cq, 3), (b.tx_cq, 3), (a.rx_cq, 6)], 20_000);
    assert_eq!(sorted_ctx(&got[2]), (100..106).collect::<Vec<u64>>());
    for (op, &len) in lens.iter().enumerate() {
        n.check(op, len);
    }
    let s = *n.dom.net_stats();
    assert!(s.tx_loop_full > 10, "{s:?}");
    assert_eq!(s.rx_looped, s.tx_looped);
    assert_eq!(n.leaked, 0);
}

/// DGRAM endpoints loop back too, and with no loopback slots a send to ourselves fails
/// with -FI_EHOSTUNREACH at once (RDM: its first HELLO finds no way out) instead of
/// vanishing on the wire or waiting for the handshake to give up.
#[test]
fn dgram_loops_back_and_zero_slots_fail_clearly() {
    for slots in [2, 0] {
        let mut n = Node::new(slots);
        let av = n.av();
        let d = n.ep(EpType::Dgram, av);
        let fi = n.insert(av, &[&d]);
        n.fill(0, 300, 9);
        n.recv(&d, 0, None);
        n.send(&d, 0, 300, fi[0], None);
        if slots > 0 {
            let got = n.run(&[(d.tx_cq, 1), (d.rx_cq, 1)], 10);
            assert_eq!(got[1][0].2, 300);
            n.check(0, 300);
        } else {
            let got = n.run(&[(d.tx_cq, 1)], 10);
            assert_eq!(got[0][0].1, Err(Errno::EHOSTUNREACH));
        }
    }
    let mut n = Node::new(0);
    let av = n.av();
    let r = n.ep(EpType::Rdm, av);
    let fi = n.insert(av, &[&r]);
    n.fill(0, 100, 1);
    n.send(&r, 0, 100, fi[0], None);
    // The first HELLO finds no way out: the send fails in the first steps, not after
    // the handshake's ~1.4 s of retries.
    let mut got = Vec::new();
    let mut steps = 0;
    for _ in 0..5000 {
        steps += 1;
        n.step(true, Duration::from_millis(1));
        got.extend(n.read(r.tx_cq));
        if !got.is_empty() {
            break;
        }
    }
    assert!(steps <= 2, "failed after {steps} ms");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, Err(Errno::EHOSTUNREACH));
    assert!(n.dom.net_stats().tx_loop_refused > 0);
    assert_eq!(n.leaked, 0);
}

/// An RDM send to an address on the subnet that nobody answers ARP for: the HELLO is
/// never sent, yet the handshake's retry budget runs (each ARP failure counts as a
/// lost HELLO) and the send fails with -FI_EHOSTUNREACH instead of waiting for ever.
#[test]
fn rdm_to_a_host_that_never_answers_arp_fails_as_unreachable() {
    let mut n = Node::new(DEFAULT_LOOPBACK_SLOTS);
    let av = n.av();
    let a = n.ep(EpType::Rdm, av);
    let ghost = EpAddr::new([10, 9, 0, 2], 7000, 0);
    let mut out = [0; 1];
    n.dom
        .av_mut(av)
        .unwrap()
        .insert(AvAddrs::Ep(&[ghost]), Some(&mut out), Flags::empty(), None)
        .unwrap();
    n.fill(0, 10, 1);
    n.send(&a, 0, 10, out[0], None);
    let mut got = Vec::new();
    // A minute of virtual time in 1 ms steps, at most.
    for _ in 0..60_000 {
        n.step(true, Duration::from_millis(1));
        got.extend(n.read(a.tx_cq));
        if !got.is_empty() {
            break;
        }
    }
    assert_eq!(got.len(), 1, "the send never completed");
    assert_eq!((got[0].0, got[0].1), (100, Err(Errno::EHOSTUNREACH)));
    let s = *n.dom.net_stats();
    assert!(s.arp_failures >= 1 && s.tx_arp_failed >= 1, "{s:?}");
    assert_eq!(s.tx_packets, 0, "a HELLO went out without a MAC");
    // Only ARP requests went to the link, a bounded number of them.
    assert_eq!(n.leaked as u64, s.arp_requests_sent);
    assert!(s.arp_requests_sent <= 30, "{s:?}");
}

/// fi_inject to a peer that never answers: no entry at the post, but its failure
/// writes an error entry (fi_msg(3): an inject writes none only if it completes
/// successfully), with the endpoint's context (fi_inject has none). Both with the
/// default completion level and with FI_INJECT_COMPLETE in the endpoint's op_flags,
/// under which the send completed (silently) at once.
#[test]
fn a_failed_inject_reports_an_error_entry() {
    for op_flags in [Flags::empty(), Flags::INJECT_COMPLETE] {
        failed_inject(op_flags);
    }
}

fn failed_inject(op_flags: Flags) {
    let mut n = Node::new(DEFAULT_LOOPBACK_SLOTS);
    let av = n.av();
    let mut info = default_info(EpType::Rdm, None, &cfg());
    info.tx_attr.op_flags |= op_flags;
    let a = n.ep_info(&info, av);
    let ghost = EpAddr::new([10, 9, 0, 2], 7000, 0);
    let mut out = [0; 1];
    n.dom
        .av_mut(av)
        .unwrap()
        .insert(AvAddrs::Ep(&[ghost]), Some(&mut out), Flags::empty(), None)
        .unwrap();
    n.fill(0, 10, 1);
    let mem = SliceMemory::new(BASE, &mut n.mem);
    n.dom.inject(a.h, &mem, Node::src(0, 10), out[0]).unwrap();
    assert!(n.read(a.tx_cq).is_empty(), "an inject wrote a completion");
    let mut got = Vec::new();
    for _ in 0..60_000 {
        n.step(true, Duration::from_millis(1));
        got.extend(n.read(a.tx_cq));
        if !got.is_empty() {
            break;
        }
    }
    assert_eq!(
        got.len(),
        1,
        "the failed inject reported nothing ({op_flags:?})"
    );
    // Context 3: the endpoint's (`Node::ep_info`).
    assert_eq!((got[0].0, got[0].1), (3, Err(Errno::EHOSTUNREACH)));
    for _ in 0..100 {
        n.step(true, Duration::from_millis(1));
    }
    assert!(
        n.read(a.tx_cq).is_empty(),
        "more than one entry for one inject"
    );
}

/// Messages that arrive before the application inserted their sender's address (Open
/// MPI adds a peer to its AV when the peer first makes contact, through an any-source
/// receive) are queued with no source; a directed receive (and a directed FI_PEEK)
/// posted after the insert still takes them, in order. (Before, they matched only any-source receives: an MPI job across two
/// hosts hung in the MPI_Barrier after its any-source receives.)
#[test]
fn a_directed_receive_takes_messages_that_came_before_the_av_insert() {
    let mut n = Node::new(DEFAULT_LOOPBACK_SLOTS);
    let (av_a, av_b) = (n.av(), n.av());
    let a = n.ep(EpType::Rdm, av_a);
    let b = n.ep(EpType::Rdm, av_b);
    let to_a = n.insert(av_b, &[&a])[0];
    for op in 0..3 {
        n.fill(op, 100 + op, op as u8);
        n.send(&b, op, 100 + op, to_a, Some(5 + op as u64));
    }
    n.run(&[(b.tx_cq, 3)], 5000);
    // The first by any-source receive, as MPI_Recv(MPI_ANY_SOURCE) takes it.
    n.recv(&a, 0, Some(5));
    assert_eq!(sorted_ctx(&n.run(&[(a.rx_cq, 1)], 100)[0]), vec![100]);
    let from_b = n.insert(av_a, &[&b])[0];
    // A directed peek sees the next one; a directed receive takes it, then the last.
    let peek = TaggedArgs::new(&[], from_b, 6, 7);
    n.dom.trecvmsg(a.h, &peek, Flags::PEEK).unwrap();
    let got = n.run(&[(a.rx_cq, 1)], 100);
    assert_eq!(got[0][0].0, 7, "directed peek: {got:?}");
    assert_eq!(got[0][0].1, Ok(()), "directed peek: {got:?}");
    for op in 1..3 {
        n.dom
            .trecv(
                a.h,
                Node::dst(op),
                from_b,
                5 + op as u64,
                0,
                100 + op as u64,
            )
            .unwrap();
    }
    let got = n.run(&[(a.rx_cq, 2)], 100);
    assert_eq!(sorted_ctx(&got[0]), vec![101, 102]);
    for op in 0..3 {
        n.check(op, 100 + op);
    }
}

/// API 2.0's directed receives (fi_getinfo(3) of 2.x): FI_TAGGED_DIRECTED_RECV directs
/// tagged receives alone; FI_EXACT_DIRECTED_RECV alone directs every receive and
/// refuses FI_ADDR_UNSPEC there, with FI_TAGGED_DIRECTED_RECV only for tagged ones.
/// B sends first, then C; a receive naming C takes C's message only when directed.
#[test]
fn api_2_directed_receive_capabilities() {
    let exact = Flags::EXACT_DIRECTED_RECV;
    let tagged = Flags::TAGGED_DIRECTED_RECV;
    // (capabilities, message receives directed, tagged receives directed, exact)
    for (extra, msg_dir, tag_dir, exact_applies) in [
        (tagged, false, true, false),
        (exact, true, true, true),
        (tagged | exact, false, true, true),
        (Flags::DIRECTED_RECV | exact, true, true, true),
    ] {
        // The domain offers 1.x's capabilities and `extra`; A takes `extra` alone.
        let mut dom_info = default_info(EpType::Rdm, None, &cfg());
        dom_info.caps |= extra;
        let mut info = dom_info.clone();
        info.caps = info.caps.difference(Flags::DIRECTED_RECV) | extra;
        info.rx_attr.caps = info.rx_attr.caps.difference(Flags::DIRECTED_RECV) | extra;
        let mut n = Node::with_info(DEFAULT_LOOPBACK_SLOTS, &dom_info);
        let (av_a, av_b, av_c) = (n.av(), n.av(), n.av());
        let a = n.ep_info(&info, av_a);
        let b = n.ep(EpType::Rdm, av_b);
        let c = n.ep(EpType::Rdm, av_c);
        let from = n.insert(av_a, &[&b, &c]);
        let to_a_b = n.insert(av_b, &[&a])[0];
        let to_a_c = n.insert(av_c, &[&a])[0];
        for (tag, base) in [(None, 0), (Some(9u64), 2)] {
            n.fill(base, 40, 1);
            n.fill(base + 1, 50, 2);
            n.send(&b, base, 40, to_a_b, tag);
            n.run(&[(b.tx_cq, 1)], 5000);
            n.send(&c, base + 1, 50, to_a_c, tag);
            n.run(&[(c.tx_cq, 1)], 5000);
            let directed = if tag.is_some() { tag_dir } else { msg_dir };
            // A receive naming C: C's 50 bytes when directed, else the first (B's 40).
            let ctx = 200 + base as u64;
            match tag {
                Some(t) => n.dom.trecv(a.h, Node::dst(base + 1), from[1], t, 0, ctx),
                None => n.dom.recv(a.h, Node::dst(base + 1), from[1], ctx),
            }
            .unwrap();
            let got = n.run(&[(a.rx_cq, 1)], 100);
            let want = if directed { 50 } else { 40 };
            assert_eq!((got[0][0].0, got[0][0].2), (ctx, want), "{extra:?} {tag:?}");
            // Then any source: refused where exact, else the other message.
            let unspec = match tag {
                Some(t) => n.dom.trecv(a.h, Node::dst(7), FI_ADDR_UNSPEC, t, 0, 1),
                None => n.dom.recv(a.h, Node::dst(7), FI_ADDR_UNSPEC, 1),
            };
            if directed && exact_applies {
                assert_eq!(unspec, Err(Errno::EINVAL), "{extra:?} {tag:?}");
                match tag {
                    Some(t) => n.dom.trecv(a.h, Node::dst(7), from[0], t, 0, 3),
                    None => n.dom.recv(a.h, Node::dst(7), from[0], 3),
                }
                .unwrap();
            } else {
                unspec.unwrap();
            }
            let got = n.run(&[(a.rx_cq, 1)], 100);
            assert_eq!(got[0][0].2, 90 - want, "{extra:?} {tag:?}");
        }
    }
}
