//! Engine tests over in-memory links: a session between two domains, then random and
//! mutated packets thrown at one endpoint (never a panic, every datagram counted, the
//! endpoint still works afterwards). Feature tests on the network simulator live in
//! `crates/hosted/tests/rdm_*.rs`.

extern crate std;

use std::boxed::Box;
use std::vec;
use std::vec::Vec;

use proptest::prelude::*;
use wire::link::{Capabilities, Loopback, Medium, UdpAddr};

use crate::av::{AvAddrs, AvAttr};
use crate::cq::{CqAttr, CqEntry, CqFormat};
use crate::domain::{
    AvHandle, BindTarget, CqHandle, Domain, DomainConfig, EpHandle, ProgressReport,
};
use crate::errno::Errno;
use crate::fabric::Fabric;
use crate::flags::{FI_ADDR_UNSPEC, FiAddr, Flags};
use crate::info::{EpType, FabricAttr, ProviderConfig, default_info};
use crate::mem::{IoVec, SliceMemory};
use crate::net::NetConfig;
use crate::storage::test_storage::VecStorage;
use crate::time::{Duration, Instant};

const MTU: usize = 1472;
type Link = Loopback<64, MTU>;
const BASE: u64 = 0x1000;

struct Host {
    _fabric: Fabric<VecStorage>,
    dom: Domain<VecStorage>,
    link: Box<Link>,
    mem: Vec<u8>,
    ep: EpHandle<VecStorage>,
    tx_cq: CqHandle<VecStorage>,
    rx_cq: CqHandle<VecStorage>,
    av: AvHandle<VecStorage>,
    ip: [u8; 4],
    /// With FI_RMA_EVENT: the counter bound for FI_REMOTE_READ | FI_REMOTE_WRITE.
    #[cfg_attr(not(feature = "atomic"), allow(dead_code))]
    remote_cntr: Option<crate::domain::CntrHandle>,
}

fn cfg() -> ProviderConfig {
    ProviderConfig {
        tx_size: 16,
        rx_size: 16,
        ep_cnt: 2,
        cq_cnt: 2,
        cntr_cnt: 4,
        mr_cnt: 2,
        inject_size: 64,
        ..ProviderConfig::DEFAULT
    }
}

fn host(ip: [u8; 4], seed: u64) -> Host {
    host_caps(ip, seed, Flags::empty())
}

/// A host whose endpoint asks for `caps` on top of the defaults (FI_SOURCE etc.).
fn host_caps(ip: [u8; 4], seed: u64, caps: Flags) -> Host {
    host_edit(ip, seed, caps, Flags::empty())
}

/// A host whose endpoint asks for `add` on top of the defaults and not for `remove`.
fn host_edit(ip: [u8; 4], seed: u64, add: Flags, remove: Flags) -> Host {
    host_window(ip, seed, add, remove, crate::rdm::RdmConfig::DEFAULT.window)
}

std::thread_local! {
    /// Whether hosts this test opens send BUNDLEs (`RdmConfig::bundle`; each test has
    /// a thread of its own).
    static BUNDLE: core::cell::Cell<bool> = const { core::cell::Cell::new(true) };
    /// Whether hosts this test opens send short ACKs (`RdmConfig::short_ack`).
    static SHORT_ACK: core::cell::Cell<bool> = const { core::cell::Cell::new(true) };
    /// `RdmConfig::reorder_slots` of the hosts this test opens.
    static REORDER_SLOTS: core::cell::Cell<usize> = const { core::cell::Cell::new(32) };
    /// `RdmConfig::rx_window` of the hosts this test opens.
    static RX_WINDOW: core::cell::Cell<u16> = const { core::cell::Cell::new(0) };
    /// `RdmConfig::unexp_seg` of the hosts this test opens.
    static UNEXP_SEG: core::cell::Cell<usize> =
        const { core::cell::Cell::new(crate::rdm::RdmConfig::DEFAULT.unexp_seg) };
}

/// Hosts this test opens from now on send every message in a packet of its own.
fn no_bundles() {
    BUNDLE.with(|b| b.set(false));
}

/// [`host_edit`] with a `window` of its own.
fn host_window(ip: [u8; 4], seed: u64, add: Flags, remove: Flags, window: u16) -> Host {
    let mut info = default_info(EpType::Rdm, None, &cfg());
    info.caps = (info.caps | add).difference(remove);
    info.tx_attr.caps = info.tx_attr.caps.difference(remove);
    info.rx_attr.caps = info.rx_attr.caps.difference(remove);
    let mut fabric = Fabric::open(&FabricAttr::default(), 0, VecStorage, 1).unwrap();
    let net = NetConfig::new(&Capabilities::new(Medium::Udp, MTU), ip, 7000);
    let mut dom = Domain::open(
        &mut fabric,
        &info,
        DomainConfig::new(net, cfg(), seed),
        VecStorage,
        0,
    )
    .unwrap();
    dom.set_rdm_config(crate::rdm::RdmConfig {
        max_peers: 4,
        reorder_slots: REORDER_SLOTS.with(|r| r.get()),
        unexp_slots: 32,
        unexp_msgs: 16,
        window,
        rx_window: RX_WINDOW.with(|r| r.get()),
        bundle: BUNDLE.with(|b| b.get()),
        short_ack: SHORT_ACK.with(|b| b.get()),
        unexp_seg: UNEXP_SEG.with(|u| u.get()),
        ..crate::rdm::RdmConfig::DEFAULT
    })
    .unwrap();
    let attr = CqAttr {
        format: CqFormat::Tagged,
        size: 64,
        ..CqAttr::default()
    };
    let tx_cq = dom.cq_open(&attr, 1).unwrap();
    let rx_cq = dom.cq_open(&attr, 2).unwrap();
    let av = dom
        .av_open(
            &mut AvAttr {
                count: 4,
                ..AvAttr::default()
            },
            3,
        )
        .unwrap();
    let ep = dom.ep_open(&info, 4).unwrap();
    dom.ep_bind(ep, BindTarget::Cq(tx_cq), Flags::TRANSMIT)
        .unwrap();
    dom.ep_bind(ep, BindTarget::Cq(rx_cq), Flags::RECV).unwrap();
    dom.ep_bind(ep, BindTarget::Av(av), Flags::empty()).unwrap();
    let remote_cntr = info.caps.contains(Flags::RMA_EVENT).then(|| {
        let c = dom.cntr_open(&crate::cntr::CntrAttr::default(), 9).unwrap();
        let both = Flags::REMOTE_READ | Flags::REMOTE_WRITE;
        dom.ep_bind(ep, BindTarget::Cntr(c), both).unwrap();
        c
    });
    dom.ep_enable(ep).unwrap();
    let link = Box::new(Link::new(Medium::Udp, Some(UdpAddr::new(ip.into(), 7000))));
    Host {
        _fabric: fabric,
        dom,
        link,
        mem: vec![0; 1 << 16],
        ep,
        tx_cq,
        rx_cq,
        av,
        ip,
        remote_cntr,
    }
}

impl Host {
    fn insert(&mut self, peer: &Host) -> FiAddr {
        let a = peer.dom.ep_addr(peer.ep).unwrap();
        let mut out = [0; 1];
        self.dom
            .av_mut(self.av)
            .unwrap()
            .insert(AvAddrs::Ep(&[a]), Some(&mut out), Flags::empty(), None)
            .unwrap();
        out[0]
    }

    fn progress(&mut self, now: Instant) -> ProgressReport {
        let mut mem = SliceMemory::new(BASE, &mut self.mem);
        self.dom.progress(now, &mut *self.link, &mut mem).unwrap()
    }

    fn read(&mut self, cq: CqHandle<VecStorage>) -> Vec<Result<CqEntry, Errno>> {
        let mut out = Vec::new();
        let q = self.dom.cq_mut(cq).unwrap();
        loop {
            let mut e = [CqEntry::default(); 8];
            match q.read(&mut e) {
                Ok(n) => out.extend(e[..n].iter().map(|e| Ok(*e))),
                Err(Errno::EAVAIL) => {
                    let x = q
                        .readerr(Flags::empty(), crate::cq::API_VERSION_1_5, &mut [])
                        .unwrap();
                    out.push(Err(Errno::from_code(x.err).unwrap_or(Errno::EOTHER)));
                }
                Err(_) => return out,
            }
        }
    }
}

/// Moves packets both ways and progresses both hosts for `steps` rounds of 10 µs;
/// `tap` sees every packet from `a` to `b`.
fn pump(a: &mut Host, b: &mut Host, now: &mut Instant, steps: usize, tap: &mut Vec<Vec<u8>>) {
    for _ in 0..steps {
        a.progress(*now);
        while let Some(p) = a.link.pop_tx(|_, d| d.to_vec()) {
            tap.push(p.clone());
            b.link.inject(&p, Some(UdpAddr::new(a.ip.into(), 7000)));
        }
        b.progress(*now);
        while let Some(p) = b.link.pop_tx(|_, d| d.to_vec()) {
            a.link.inject(&p, Some(UdpAddr::new(b.ip.into(), 7000)));
        }
        *now += Duration::from_micros(10);
    }
}

/// Two hosts with a session and a corpus of real packets from A to B (handshake,
/// eager segments, rendezvous, acks).
fn session() -> (Host, Host, FiAddr, Instant, Vec<Vec<u8>>) {
    let mut a = host([10, 0, 0, 1], 1);
    let mut b = host([10, 0, 0, 2], 2);
    let b_at_a = a.insert(&b);
    b.insert(&a);
    let mut now = Instant::from_millis(1);
    let mut corpus = Vec::new();
    for (k, len) in [(0u64, 10usize), (1, 3000), (2, 20_000)] {
        b.dom
            .trecv(
                b.ep,
                IoVec::new(BASE + 0x8000, 0x8000),
                FI_ADDR_UNSPEC,
                k,
                0,
                k,
            )
            .unwrap();
        let mem = SliceMemory::new(BASE, &mut a.mem);
        a.dom
            .tsend(a.ep, &mem, IoVec::new(BASE, len), b_at_a, k, 100 + k)
            .unwrap();
        pump(&mut a, &mut b, &mut now, 20, &mut corpus);
    }
    let (atx, brx) = (a.tx_cq, b.rx_cq);
    assert_eq!(a.read(atx).len(), 3);
    assert!(b.read(brx).iter().all(|e| e.is_ok()));
    // RMA and atomic packets too, in a build that serves them.
    if cfg!(feature = "atomic") {
        rma_traffic(&mut a, &mut b, b_at_a, &mut now, &mut corpus);
    }
    (a, b, b_at_a, now, corpus)
}

/// A write, a read and a fetching atomic from A to B's region (4 KiB at 0x8000, key 7),
/// every packet added to `corpus`.
fn rma_traffic(
    a: &mut Host,
    b: &mut Host,
    b_at_a: FiAddr,
    now: &mut Instant,
    corpus: &mut Vec<Vec<u8>>,
) {
    let atx = a.tx_cq;
    let iov = [IoVec::new(BASE + 0x8000, 0x1000)];
    let attr = crate::mr::MrAttr {
        mr_iov: &iov,
        access: Flags::REMOTE_READ | Flags::REMOTE_WRITE,
        requested_key: 7,
        ..crate::mr::MrAttr::default()
    };
    b.dom.mr_reg(&attr, Flags::empty()).unwrap();
    let rma = crate::domain::RmaIov {
        addr: 8,
        len: 2000,
        key: 7,
    };
    let local = [IoVec::new(BASE, 2000)];
    let mem = SliceMemory::new(BASE, &mut a.mem);
    let w = crate::domain::RmaArgs::new(&local, b_at_a, rma, 5);
    a.dom.writemsg(a.ep, &mem, &w, Flags::empty()).unwrap();
    a.dom.readmsg(a.ep, &mem, &w, Flags::empty()).unwrap();
    let one = [IoVec::new(BASE, 8)];
    let add = crate::domain::AtomicArgs {
        iov: &one,
        addr: b_at_a,
        rma: crate::domain::RmaIov { len: 8, ..rma },
        datatype: wire::packet::AtomicDatatype::U64,
        op: wire::packet::AtomicOp::Sum,
        count: 1,
        context: 6,
        data: 0,
    };
    let res = IoVec::new(BASE + 0x4000, 8);
    a.dom
        .fetch_atomicmsg(a.ep, &mem, &add, res, Flags::empty())
        .unwrap();
    pump(a, b, now, 30, corpus);
    let done = a.read(atx);
    assert_eq!(done.len(), 3, "write, read and atomic completed");
    assert!(done.iter().all(|e| e.is_ok()));
}

#[test]
fn session_carries_eager_and_rendezvous_messages() {
    let (a, b, _, _, corpus) = session();
    assert!(corpus.len() > 10);
    let sa = *a.dom.ep(a.ep).unwrap().rdm().unwrap().stats();
    let sb = *b.dom.ep(b.ep).unwrap().rdm().unwrap().stats();
    assert_eq!((sa.sessions, sb.sessions), (1, 1));
    assert_eq!(sb.rx_msgs, 3);
    assert_eq!(sb.rx_protocol_errors + sb.rx_unknown_session, 0);
}

/// Applies one mutation to `p`; `recrc` recomputes the CRC afterwards so the packet
/// gets past the checksum and exercises the engine's own checks.
fn mutate(p: &mut Vec<u8>, kind: u8, at: usize, val: u8, recrc: bool) {
    if p.is_empty() {
        return;
    }
    let i = at % p.len();
    match kind % 5 {
        0 => p[i] ^= val | 1,
        1 => p[i] = val,
        2 => p.truncate(i),
        3 => p.extend(core::iter::repeat_n(val, (at % 64) + 1)),
        _ => {
            // A field of the base header: type, flags, session, seq.
            let f = [3usize, 5, 12, 15, 16, 19][at % 6];
            if f < p.len() {
                p[f] = val;
            }
        }
    }
    if recrc && p.len() >= 24 {
        let mut pkt = wire::Packet::new_unchecked(&mut p[..]);
        pkt.fill_checksum();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn random_and_mutated_packets_never_break_the_endpoint(
        ops in proptest::collection::vec(
            (any::<bool>(), any::<u8>(), any::<usize>(), any::<u8>(), any::<bool>(),
             proptest::collection::vec(any::<u8>(), 0..200)),
            1..40,
        )
    ) {
        let (mut a, mut b, b_at_a, mut now, corpus) = session();
        let before = *b.dom.stats();
        let src = Some(UdpAddr::new(a.ip.into(), 7000));
        let mut injected = 0u64;
        for (from_corpus, kind, at, val, recrc, random) in ops {
            let mut p = if from_corpus {
                corpus[at % corpus.len()].clone()
            } else {
                random
            };
            mutate(&mut p, kind, at / 7, val, recrc);
            if p.is_empty() {
                continue;
            }
            if b.link.inject(&p, src) {
                injected += 1;
            }
            b.progress(now);
            while b.link.pop_tx(|_, _| ()).is_some() {}
            now += Duration::from_micros(5);
        }
        // Every datagram was parsed or counted as malformed.
        let after = *b.dom.stats();
        prop_assert_eq!(
            (after.rx_packets - before.rx_packets) + (after.rx_malformed - before.rx_malformed),
            injected
        );
        prop_assert_eq!(
            after.rx_malformed - before.rx_malformed,
            (after.rx_truncated + after.rx_bad_magic + after.rx_bad_version
                + after.rx_unknown_type + after.rx_bad_length + after.rx_bad_checksum
                + after.rx_bad_flags + after.rx_bad_field)
                - (before.rx_truncated + before.rx_bad_magic + before.rx_bad_version
                    + before.rx_unknown_type + before.rx_bad_length + before.rx_bad_checksum
                    + before.rx_bad_flags + before.rx_bad_field)
        );
        // The endpoint still works: a new message arrives (a forged RESET carrying the
        // right session may legitimately end the session: the send then fails and the
        // next one re-establishes it).
        for attempt in 0..3u64 {
            let (atx, brx) = (a.tx_cq, b.rx_cq);
            a.read(atx);
            b.read(brx);
            b.dom
                .trecv(b.ep, IoVec::new(BASE + 0x100, 64), FI_ADDR_UNSPEC, 77, 0, 500 + attempt)
                .unwrap();
            let mem = SliceMemory::new(BASE, &mut a.mem);
            a.dom.tsend(a.ep, &mem, IoVec::new(BASE, 8), b_at_a, 77, 600 + attempt).unwrap();
            let mut sink = Vec::new();
            pump(&mut a, &mut b, &mut now, 400, &mut sink);
            let got = b.read(brx);
            if got.iter().any(|e| matches!(e, Ok(e) if e.op_context == 500 + attempt)) {
                return Ok(());
            }
            b.dom.ep_cancel(b.ep, 500 + attempt).unwrap();
        }
        prop_assert!(false, "the endpoint no longer receives");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Forged packets of the live session (right session id, CRC recomputed), placed at
    /// the receiver's next expected sequence number so they are processed in order with
    /// garbage in their type headers: ids, offsets, lengths, tags. Such a sender knows
    /// the session id and can do damage, but never make the endpoint panic, and every
    /// contradiction with the session state is counted.
    #[test]
    fn forged_in_order_packets_are_checked_not_trusted(
        ops in proptest::collection::vec((any::<usize>(), any::<usize>(), any::<u8>(), 0u32..3), 1..30)
    ) {
        let (a, mut b, _, mut now, corpus) = session();
        let src = Some(UdpAddr::new(a.ip.into(), 7000));
        let peer = a.dom.ep_addr(a.ep).unwrap();
        for (pick, at, val, ahead) in ops {
            let mut p = corpus[pick % corpus.len()].clone();
            if p.len() <= 24 {
                continue;
            }
            let rcv = b
                .dom
                .ep(b.ep)
                .unwrap()
                .rdm()
                .unwrap()
                .peers()
                .find(|i| i.addr == peer)
                .map_or(0, |i| i.rcv_nxt);
            let seq = rcv.wrapping_add(ahead);
            p[16..20].copy_from_slice(&seq.to_be_bytes());
            let i = 24 + at % (p.len() - 24);
            p[i] = val;
            wire::Packet::new_unchecked(&mut p[..]).fill_checksum();
            b.link.inject(&p, src);
            b.progress(now);
            while b.link.pop_tx(|_, _| ()).is_some() {}
            now += Duration::from_micros(5);
        }
        // Still consistent enough to report on itself.
        let rdm = b.dom.ep(b.ep).unwrap().rdm().unwrap();
        prop_assert!(rdm.held_packets() <= 32);
        prop_assert!(rdm.unexpected_len() <= 2 * 16 + 64);
    }
}

// ---- piggybacked acknowledgements ------------------------------------------------------

/// Two hosts with a session (one warm-up message each way, every timer run out):
/// (a, b, b at a, a at b, now).
fn pair() -> (Host, Host, FiAddr, FiAddr, Instant) {
    let mut a = host([10, 0, 0, 1], 1);
    let mut b = host([10, 0, 0, 2], 2);
    let b_at_a = a.insert(&b);
    let a_at_b = b.insert(&a);
    let mut now = Instant::from_millis(1);
    recv(&mut b, 1, 1);
    send(&mut a, b_at_a, 1, 8, 1);
    recv(&mut a, 2, 2);
    send(&mut b, a_at_b, 2, 8, 2);
    pump(&mut a, &mut b, &mut now, 100, &mut Vec::new());
    let (atx, arx, btx, brx) = (a.tx_cq, a.rx_cq, b.tx_cq, b.rx_cq);
    assert_eq!(a.read(atx).len() + a.read(arx).len(), 2);
    assert_eq!(b.read(btx).len() + b.read(brx).len(), 2);
    (a, b, b_at_a, a_at_b, now)
}

fn send(h: &mut Host, to: FiAddr, tag: u64, len: usize, context: u64) {
    let mem = SliceMemory::new(BASE, &mut h.mem);
    h.dom
        .tsend(h.ep, &mem, IoVec::new(BASE, len), to, tag, context)
        .unwrap();
}

fn recv(h: &mut Host, tag: u64, context: u64) {
    h.dom
        .trecv(
            h.ep,
            IoVec::new(BASE + 0x8000, 0x1000),
            FI_ADDR_UNSPEC,
            tag,
            0,
            context,
        )
        .unwrap();
}

/// Moves what `from` transmitted to `to`'s receive queue; returns the packets.
fn carry(from: &mut Host, to: &mut Host) -> Vec<Vec<u8>> {
    let src = Some(UdpAddr::new(from.ip.into(), 7000));
    let mut out = Vec::new();
    while let Some(p) = from.link.pop_tx(|_, d| d.to_vec()) {
        to.link.inject(&p, src);
        out.push(p);
    }
    out
}

fn stats(h: &Host) -> crate::rdm::RdmStats {
    *h.dom.ep(h.ep).unwrap().rdm().unwrap().stats()
}

fn kind(
    p: &[u8],
) -> (
    wire::packet::PacketType,
    Option<wire::packet::AckRepr>,
    bool,
) {
    let r = wire::Repr::parse_bytes(p).expect("the engine emits valid packets");
    (r.packet_type(), r.ack(), r.header.ack_req)
}

/// A ping from `a` answered at once by `b`; returns the packets (ping, pong) and
/// leaves every completion read. `strict`: assert one packet each way and no ACK
/// packet from either side.
#[allow(clippy::too_many_arguments)]
fn ping_pong(
    a: &mut Host,
    b: &mut Host,
    b_at_a: FiAddr,
    a_at_b: FiAddr,
    now: &mut Instant,
    i: u64,
    strict: bool,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let (atx, arx, btx, brx) = (a.tx_cq, a.rx_cq, b.tx_cq, b.rx_cq);
    let tag = 100 + i;
    recv(b, tag, 1000 + i);
    recv(a, tag, 2000 + i);
    send(a, b_at_a, tag, 64, 3000 + i);
    a.progress(*now);
    let ping = carry(a, b);
    *now += Duration::from_micros(3);
    // B receives and answers within the hold.
    b.progress(*now);
    if strict {
        assert!(
            b.link.pop_tx(|_, _| ()).is_none(),
            "{i}: no ACK before the reply"
        );
    }
    let got = b.read(brx);
    assert!(
        got.iter()
            .any(|e| matches!(e, Ok(e) if e.op_context == 1000 + i))
    );
    if strict {
        // The ping's ACK is held until the pong leaves: B's previous pong is not
        // complete yet.
        assert!(
            b.read(btx).is_empty(),
            "{i}: the ping's ack waits for the pong"
        );
    }
    send(b, a_at_b, tag, 64, 4000 + i);
    *now += Duration::from_micros(2);
    b.progress(*now);
    let pong = carry(b, a);
    if strict {
        // Once the pong left, the ping's ACK completed B's previous pong.
        assert!(matches!(b.read(btx)[..], [Ok(e)] if e.op_context == 4000 + i - 1));
    }
    *now += Duration::from_micros(3);
    a.progress(*now);
    let got = a.read(arx);
    assert!(
        got.iter()
            .any(|e| matches!(e, Ok(e) if e.op_context == 2000 + i))
    );
    if strict {
        assert!(a.read(atx).is_empty(), "{i}: the pong's ack is held");
    }
    // The next pass's transmit half takes the held ack (sending nothing: A's own
    // ack waits for its next ping).
    a.progress(*now);
    if strict {
        assert!(
            a.link.pop_tx(|_, _| ()).is_none(),
            "{i}: no ACK before the next ping"
        );
        // The pong's piggybacked ACK completed the ping.
        assert!(
            matches!(a.read(atx)[..], [Ok(e)] if e.op_context == 3000 + i),
            "{i}: the piggybacked ack completes the send"
        );
    }
    *now += Duration::from_micros(2);
    (ping, pong)
}

/// fi_cq(3) lets a provider reject a completion level it cannot give or upgrade it:
/// FI_MATCH_COMPLETE (our delivery covers an unexpected message too) and
/// FI_COMMIT_COMPLETE (no persistent memory) have no stronger level here, and FI_FENCE
/// needs a capability not offered. Refused as defaults and per call, where the call
/// queues nothing; FI_DELIVERY_COMPLETE works.
#[test]
fn completion_levels_the_engine_cannot_give_are_refused() {
    let (mut a, mut b, b_at_a, _, mut now) = pair();
    let never = [Flags::MATCH_COMPLETE, Flags::COMMIT_COMPLETE, Flags::FENCE];
    for bad in never {
        let mut info = default_info(EpType::Rdm, None, &cfg());
        info.tx_attr.op_flags = Flags::COMPLETION | bad;
        assert_eq!(
            a.dom.ep_open(&info, 5).err(),
            Some(Errno::EINVAL),
            "{bad:?}"
        );
        let ep = a.dom.ep_mut(a.ep).unwrap();
        assert_eq!(ep.setopsflag(Flags::TRANSMIT | bad), Err(Errno::EINVAL));
        assert_eq!(ep.alias(Flags::TRANSMIT | bad), Err(Errno::EINVAL));
        let mem = SliceMemory::new(BASE, &mut a.mem);
        let iov = [IoVec::new(BASE, 8)];
        let m = crate::domain::TaggedArgs::new(&iov, b_at_a, 1, 9);
        assert_eq!(a.dom.tsendmsg(a.ep, &mem, &m, bad), Err(Errno::EBADFLAGS));
        let m = crate::domain::MsgArgs::new(&iov, b_at_a, 9);
        let both = Flags::DELIVERY_COMPLETE | bad;
        assert_eq!(a.dom.sendmsg(a.ep, &mem, &m, both), Err(Errno::EBADFLAGS));
    }
    let ep = a.dom.ep_mut(a.ep).unwrap();
    assert_eq!(ep.getopsflag(Flags::TRANSMIT), Ok(Flags::empty()));
    assert_eq!(a.dom.ep(a.ep).unwrap().rdm().unwrap().tx_in_use(), 0);
    // The level it can give, as a default and per call.
    let mut info = default_info(EpType::Rdm, None, &cfg());
    info.tx_attr.op_flags = Flags::DELIVERY_COMPLETE;
    let spare = a.dom.ep_open(&info, 5).unwrap();
    a.dom.ep_close(spare).unwrap();
    let ep = a.dom.ep_mut(a.ep).unwrap();
    ep.setopsflag(Flags::TRANSMIT | Flags::DELIVERY_COMPLETE)
        .unwrap();
    recv(&mut b, 1, 3);
    send(&mut a, b_at_a, 1, 8, 4);
    pump(&mut a, &mut b, &mut now, 100, &mut Vec::new());
    let (atx, brx) = (a.tx_cq, b.rx_cq);
    let sent: Vec<u64> = a.read(atx).iter().map(|e| e.unwrap().op_context).collect();
    assert_eq!(sent, [4], "only the accepted send completes");
    assert_eq!(b.read(brx).len(), 1);
}

/// A burst of queued sends: the single-packet ones before a segmented message go by the
/// short path, the segmented one and everything after it by the planner, in posting
/// order, and only the burst's last packet asks for an acknowledgement.
#[test]
fn a_burst_takes_the_short_path_up_to_a_segmented_message() {
    use wire::packet::PacketType;
    no_bundles();
    let (mut a, mut b, b_at_a, _, mut now) = pair();
    let sizes = [1usize, 64, 700, 3000, 8, 64];
    for (i, &n) in sizes.iter().enumerate() {
        recv(&mut b, 500 + i as u64, 600 + i as u64);
        send(&mut a, b_at_a, 500 + i as u64, n, 700 + i as u64);
    }
    let before = stats(&a);
    now += Duration::from_micros(5);
    a.progress(now);
    let pkts = carry(&mut a, &mut b);
    assert_eq!(
        stats(&a).tx_express - before.tx_express,
        3,
        "the three before the big one"
    );
    // 3 single packets, the 3000-byte message in segments, then 2 more.
    assert!(pkts.len() >= 3 + 3 + 2, "{} packets", pkts.len());
    let seqs: Vec<u32> = pkts
        .iter()
        .map(|p| wire::Repr::parse_bytes(p).unwrap().header.seq)
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0].wrapping_add(1)),
        "{seqs:?}"
    );
    for (i, p) in pkts.iter().enumerate() {
        let (t, _, ack_req) = kind(p);
        assert_eq!(t, PacketType::Tagged);
        assert_eq!(
            ack_req,
            i + 1 == pkts.len(),
            "packet {i}: ACK_REQ on the last only"
        );
    }
    now += Duration::from_micros(5);
    b.progress(now);
    let brx = b.rx_cq;
    let got = b.read(brx);
    let want: Vec<(u64, usize)> = sizes
        .iter()
        .enumerate()
        .map(|(i, &n)| (600 + i as u64, n))
        .collect();
    let have: Vec<(u64, usize)> = got
        .iter()
        .map(|e| {
            let e = e.as_ref().expect("no error");
            (e.op_context, e.len)
        })
        .collect();
    assert_eq!(have, want);
}

/// Posts message `i` of a bundle test from `a` to `b`: `len` bytes of pattern `i` from
/// its own buffer, by tsend, tsenddata, tinject or tinjectdata in turn (tag `100 + i`,
/// context `1000 + i`, CQ data `0xD000 + i`).
fn post_patterned(a: &mut Host, to: FiAddr, i: usize, len: usize) {
    let at = i * 512;
    for (k, x) in a.mem[at..at + len].iter_mut().enumerate() {
        *x = (i * 7 + k) as u8;
    }
    let buf = IoVec::new(BASE + at as u64, len);
    let (tag, ctx, data) = (100 + i as u64, 1000 + i as u64, 0xD000 + i as u64);
    let mem = SliceMemory::new(BASE, &mut a.mem);
    let r = match i % 4 {
        0 => a.dom.tsend(a.ep, &mem, buf, to, tag, ctx),
        1 => a.dom.tsenddata(a.ep, &mem, buf, data, to, tag, ctx),
        2 => a.dom.tinject(a.ep, &mem, buf, to, tag),
        _ => a.dom.tinjectdata(a.ep, &mem, buf, data, to, tag),
    };
    r.unwrap();
}

/// Posts the receive for message `i` of a bundle test into its own buffer (context
/// `2000 + i`).
fn recv_patterned(b: &mut Host, i: usize) {
    let at = 0x8000 + i * 512;
    b.dom
        .trecv(
            b.ep,
            IoVec::new(BASE + at as u64, 512),
            FI_ADDR_UNSPEC,
            100 + i as u64,
            0,
            2000 + i as u64,
        )
        .unwrap();
}

/// Checks that `b` received message `i` of `len` bytes, exactly once, with its tag,
/// CQ data and bytes, among `got`.
fn check_patterned(b: &Host, got: &[Result<CqEntry, Errno>], i: usize, len: usize) {
    let e: Vec<&CqEntry> = got
        .iter()
        .filter_map(|e| e.as_ref().ok())
        .filter(|e| e.op_context == 2000 + i as u64)
        .collect();
    assert_eq!(e.len(), 1, "message {i} completes once");
    let e = e[0];
    assert_eq!((e.len, e.tag), (len, 100 + i as u64), "message {i}");
    let data = (i % 2 == 1).then_some(0xD000 + i as u64);
    assert_eq!(
        e.flags.contains(Flags::REMOTE_CQ_DATA).then_some(e.data),
        data,
        "message {i}: CQ data"
    );
    let at = 0x8000 + i * 512;
    for (k, x) in b.mem[at..at + len].iter().enumerate() {
        assert_eq!(*x, (i * 7 + k) as u8, "message {i}, byte {k}");
    }
}

/// A burst of small messages to a peer that takes BUNDLEs leaves as BUNDLEs (as many
/// whole messages as fit, the segmented one by the planner between them), delivered
/// in posting order with their tags, CQ data and bytes; ACK_REQ on the last packet.
#[test]
fn a_burst_of_small_messages_goes_in_bundles() {
    use wire::packet::PacketType;
    let (mut a, mut b, b_at_a, _, mut now) = pair();
    // Injects (every third and fourth) up to the inject size of 64.
    let sizes = [1usize, 64, 0, 30, 3000, 300, 64, 17];
    for (i, &n) in sizes.iter().enumerate() {
        if n > 512 {
            let big = IoVec::new(BASE + 0xC000, 0x1000);
            let (tag, ctx) = (100 + i as u64, 2000 + i as u64);
            b.dom.trecv(b.ep, big, FI_ADDR_UNSPEC, tag, 0, ctx).unwrap();
        } else {
            recv_patterned(&mut b, i);
        }
        if n > 512 {
            // A segmented message: from the start of the buffer, no pattern check.
            send(&mut a, b_at_a, 100 + i as u64, n, 1000 + i as u64);
        } else {
            post_patterned(&mut a, b_at_a, i, n);
        }
    }
    let (before, b_before) = (stats(&a), stats(&b));
    now += Duration::from_micros(5);
    a.progress(now);
    let pkts = carry(&mut a, &mut b);
    let types: Vec<PacketType> = pkts.iter().map(|p| kind(p).0).collect();
    let seg = [PacketType::Tagged; 3];
    assert_eq!(types[0], PacketType::Bundle, "{types:?}");
    assert_eq!(&types[1..4], &seg, "{types:?}");
    assert_eq!(&types[4..], &[PacketType::Bundle], "{types:?}");
    let reqs: Vec<bool> = pkts.iter().map(|p| kind(p).2).collect();
    assert_eq!(reqs, [false, false, false, false, true]);
    let sa = stats(&a);
    assert_eq!(sa.tx_bundles - before.tx_bundles, 2);
    assert_eq!(sa.tx_bundled_msgs - before.tx_bundled_msgs, 7);
    now += Duration::from_micros(5);
    b.progress(now);
    let brx = b.rx_cq;
    let got = b.read(brx);
    let order: Vec<u64> = got.iter().map(|e| e.as_ref().unwrap().op_context).collect();
    assert_eq!(order, (0..8).map(|i| 2000 + i).collect::<Vec<_>>());
    for (i, &n) in sizes.iter().enumerate() {
        if n <= 512 {
            check_patterned(&b, &got, i, n);
        }
    }
    let sb = stats(&b);
    assert_eq!(sb.rx_bundles - b_before.rx_bundles, 2);
    assert_eq!(sb.rx_bundled_msgs - b_before.rx_bundled_msgs, 7);
    // Every send completes once the bundles are acknowledged.
    pump(&mut a, &mut b, &mut now, 100, &mut Vec::new());
    let atx = a.tx_cq;
    let done = a.read(atx);
    assert!(done.iter().all(|e| e.is_ok()), "{done:?}");
    // The sends that are no injects report: 0, 1, the segmented 4, and 5.
    let ctxs: Vec<u64> = done
        .iter()
        .map(|e| e.as_ref().unwrap().op_context)
        .collect();
    assert_eq!(ctxs, [1000, 1001, 1004, 1005]);
}

/// Unexpected messages are buffered in segments of `unexp_seg` bytes even where a
/// packet carries more (a link with 64 KiB datagrams would otherwise spend 64 KiB on
/// every small message): each takes the segments its length needs, and a receive
/// posted later gets every byte, single-packet or segmented, bundled or not.
#[test]
fn unexpected_messages_take_segments_smaller_than_a_packet() {
    UNEXP_SEG.with(|u| u.set(200));
    let (mut a, mut b, b_at_a, _, mut now) = pair();
    for (k, x) in a.mem[..0x800].iter_mut().enumerate() {
        *x = (k * 13 + k / 256) as u8;
    }
    let sizes = [0usize, 1, 199, 200, 201, 1400, 1500];
    let free = b.dom.ep(b.ep).unwrap().rdm().unwrap().unexp_slots_free();
    for (i, &n) in sizes.iter().enumerate() {
        send(&mut a, b_at_a, 300 + i as u64, n, 3000 + i as u64);
    }
    pump(&mut a, &mut b, &mut now, 200, &mut Vec::new());
    let rdm = b.dom.ep(b.ep).unwrap().rdm().unwrap();
    assert_eq!(rdm.unexpected_len(), sizes.len());
    let need: usize = sizes.iter().map(|n| n.div_ceil(200)).sum();
    assert_eq!(free - rdm.unexp_slots_free(), need, "segments held");
    for (i, _) in sizes.iter().enumerate() {
        let buf = IoVec::new(BASE + 0x8000 + i as u64 * 0x800, 0x800);
        b.dom
            .trecv(
                b.ep,
                buf,
                FI_ADDR_UNSPEC,
                300 + i as u64,
                0,
                4000 + i as u64,
            )
            .unwrap();
    }
    pump(&mut a, &mut b, &mut now, 200, &mut Vec::new());
    let brx = b.rx_cq;
    let got = b.read(brx);
    assert_eq!(got.len(), sizes.len(), "{got:?}");
    for (i, &n) in sizes.iter().enumerate() {
        let e = got[i].as_ref().unwrap();
        assert_eq!(
            (e.op_context, e.len, e.tag),
            (4000 + i as u64, n, 300 + i as u64)
        );
        let at = 0x8000 + i * 0x800;
        assert_eq!(&b.mem[at..at + n], &a.mem[..n], "message {i} ({n} bytes)");
    }
    let rdm = b.dom.ep(b.ep).unwrap().rdm().unwrap();
    assert_eq!((rdm.unexpected_len(), rdm.unexp_slots_free()), (0, free));
}

/// A BUNDLE whose record finds neither a receive nor room among the unexpected
/// messages is refused from there on (back-pressure) and retried when receives are
/// posted: every message arrives exactly once, in order.
#[test]
fn a_refused_bundle_delivers_each_message_once() {
    let (mut a, mut b, b_at_a, _, mut now) = pair();
    let (atx, brx) = (a.tx_cq, b.rx_cq);
    let b_before = stats(&b);
    // 16 unexpected messages fit (`unexp_msgs`): 10 go in, then a bundle of 16 of
    // which 6 fit and the seventh is refused.
    let n = 26;
    let mut done = Vec::new();
    for burst in [0..10, 10..n] {
        for i in burst {
            post_patterned(&mut a, b_at_a, i, 20);
        }
        pump(&mut a, &mut b, &mut now, 20, &mut Vec::new());
        done.extend(a.read(atx));
    }
    assert!(b.read(brx).is_empty(), "nothing posted yet");
    let sb = stats(&b);
    assert!(
        sb.rx_refused > b_before.rx_refused,
        "the bundle was refused"
    );
    assert_eq!(sb.unexpected - b_before.unexpected, 16);
    assert!(sb.rx_bundles > b_before.rx_bundles);
    let mut got = Vec::new();
    for i in 0..n {
        recv_patterned(&mut b, i);
        if i % 8 == 7 || i + 1 == n {
            for _ in 0..30 {
                pump(&mut a, &mut b, &mut now, 1, &mut Vec::new());
                got.extend(b.read(brx));
                done.extend(a.read(atx));
            }
        }
    }
    // Each exactly once, into its own receive, in order (receives bound to buffered
    // messages complete in the order they were matched).
    let order: Vec<u64> = got.iter().map(|e| e.as_ref().unwrap().op_context).collect();
    assert_eq!(order, (0..n as u64).map(|i| 2000 + i).collect::<Vec<_>>());
    for i in 0..n {
        check_patterned(&b, &got, i, 20);
    }
    // tsend and tsenddata report (two of every four messages), injects do not.
    assert_eq!(done.len(), (0..n).filter(|i| i % 4 < 2).count(), "{done:?}");
    assert!(done.iter().all(|e| e.is_ok()));
    assert!(stats(&a).tx_bundles >= 2);
}

/// A lost BUNDLE is retransmitted whole with the same message ids, and a duplicate of
/// it delivers nothing twice.
#[test]
fn a_lost_bundle_is_resent_and_a_duplicate_ignored() {
    use wire::packet::PacketType;
    let (mut a, mut b, b_at_a, _, mut now) = pair();
    for i in 0..6 {
        recv_patterned(&mut b, i);
        post_patterned(&mut a, b_at_a, i, 40 + i);
    }
    a.progress(now);
    let first: Vec<Vec<u8>> = core::iter::from_fn(|| a.link.pop_tx(|_, d| d.to_vec())).collect();
    assert_eq!(first.len(), 1);
    assert_eq!(kind(&first[0]).0, PacketType::Bundle);
    // Lost: nothing reaches B until the retransmission timer.
    let mut resent = None;
    for _ in 0..500 {
        now += Duration::from_micros(20);
        a.progress(now);
        if let Some(p) = a.link.pop_tx(|_, d| d.to_vec()) {
            resent = Some(p);
            break;
        }
    }
    let resent = resent.expect("the bundle is retransmitted");
    let (r0, r1) = (
        wire::Repr::parse_bytes(&first[0]).unwrap(),
        wire::Repr::parse_bytes(&resent).unwrap(),
    );
    assert_eq!(r1.header.seq, r0.header.seq);
    let (wire::packet::Body::Bundle(b0), wire::packet::Body::Bundle(b1)) = (r0.body, r1.body)
    else {
        panic!("{:?}", r1.packet_type())
    };
    assert_eq!(b1.records, b0.records, "the same messages, ids and bytes");
    let src = Some(UdpAddr::new(a.ip.into(), 7000));
    b.link.inject(&resent, src);
    b.link.inject(&first[0], src);
    b.progress(now);
    let brx = b.rx_cq;
    let got = b.read(brx);
    assert_eq!(got.len(), 6, "{got:?}");
    for i in 0..6 {
        check_patterned(&b, &got, i, 40 + i);
    }
    assert_eq!(stats(&b).rx_duplicates, 1);
    pump(&mut a, &mut b, &mut now, 100, &mut Vec::new());
    assert!(b.read(brx).is_empty(), "nothing twice");
    let atx = a.tx_cq;
    assert_eq!(a.read(atx).len(), 4, "tsend and tsenddata report");
}

/// The short path stops where the window does: with a window of 4, four of six queued
/// messages leave, the fourth asking for an acknowledgement; the rest follow it.
#[test]
fn the_short_path_stops_at_the_window() {
    no_bundles();
    let mut a = host_window([10, 0, 0, 1], 1, Flags::empty(), Flags::empty(), 4);
    let mut b = host_window([10, 0, 0, 2], 2, Flags::empty(), Flags::empty(), 4);
    let b_at_a = a.insert(&b);
    let mut now = Instant::from_millis(1);
    // Establish the session with one message.
    recv(&mut b, 1, 1);
    send(&mut a, b_at_a, 1, 8, 1);
    pump(&mut a, &mut b, &mut now, 100, &mut Vec::new());
    let (atx, brx) = (a.tx_cq, b.rx_cq);
    assert_eq!(b.read(brx).len(), 1);
    a.read(atx);
    for i in 0..6u64 {
        recv(&mut b, 10 + i, 20 + i);
        send(&mut a, b_at_a, 10 + i, 32, 30 + i);
    }
    let before = stats(&a);
    a.progress(now);
    let pkts = carry(&mut a, &mut b);
    assert_eq!(pkts.len(), 4, "a window of 4");
    assert_eq!(stats(&a).tx_express - before.tx_express, 4);
    let reqs: Vec<bool> = pkts.iter().map(|p| kind(p).2).collect();
    assert_eq!(reqs, [false, false, false, true]);
    let mut log = Vec::new();
    pump(&mut a, &mut b, &mut now, 200, &mut log);
    let got: Vec<u64> = b
        .read(brx)
        .iter()
        .map(|e| e.as_ref().unwrap().op_context)
        .collect();
    assert_eq!(got, [20, 21, 22, 23, 24, 25]);
    assert_eq!(a.read(atx).len(), 6);
}

#[test]
fn ping_pong_sends_one_packet_per_message_and_no_standalone_ack() {
    use wire::packet::PacketType;
    let (mut a, mut b, b_at_a, a_at_b, mut now) = pair();
    // Two warm-up rounds: the session's first messages were lone ones (their acks
    // were held in vain, so the receivers stopped holding); quick replies turn holding
    // back on.
    const WARM: u64 = 2;
    const N: u64 = 50;
    for i in 0..WARM {
        ping_pong(&mut a, &mut b, b_at_a, a_at_b, &mut now, i, false);
    }
    let (atx, btx) = (a.tx_cq, b.tx_cq);
    a.read(atx);
    b.read(btx);
    let (sa, sb) = (stats(&a), stats(&b));
    for i in WARM..WARM + N {
        let (ping, pong) = ping_pong(&mut a, &mut b, b_at_a, a_at_b, &mut now, i, true);
        assert_eq!(ping.len(), 1, "iteration {i}: one packet for the ping");
        let (t, ack, ack_req) = kind(&ping[0]);
        assert_eq!(t, PacketType::Tagged);
        assert!(ack_req, "nothing more queued: the ping asks for an ack");
        assert!(
            ack.is_some(),
            "{i}: the ping acknowledges the previous pong"
        );
        assert_eq!(pong.len(), 1, "iteration {i}: one packet for the pong");
        let (t, ack, _) = kind(&pong[0]);
        assert_eq!(t, PacketType::Tagged);
        assert!(ack.is_some(), "{i}: the pong acknowledges the ping");
        // No selective acks: both carry the short form, 8 bytes less than the long.
        for p in [&ping[0], &pong[0]] {
            assert!(kind(p).1.is_some_and(|a| a.short && a.sack == 0), "{i}");
            let long = wire::packet::hdr_len::ACK;
            assert_eq!(p.len(), wire::packet::BASE_LEN + 12 + 8 + long - 8 + 64);
        }
    }
    let (ea, eb) = (stats(&a), stats(&b));
    assert_eq!(ea.acks_sent - sa.acks_sent, 0, "A sent no ACK packet");
    assert_eq!(eb.acks_sent - sb.acks_sent, 0, "B sent no ACK packet");
    assert_eq!(ea.tx_packets - sa.tx_packets, N);
    assert_eq!(eb.tx_packets - sb.tx_packets, N);
    // Each is a post's single-packet message: the short send path sent them all.
    assert_eq!(ea.tx_express - sa.tx_express, N);
    assert_eq!(eb.tx_express - sb.tx_express, N);
    assert_eq!(ea.acks_piggybacked - sa.acks_piggybacked, N);
    assert_eq!(eb.acks_piggybacked - sb.acks_piggybacked, N);
    assert_eq!(eb.rx_acks_piggybacked - sb.rx_acks_piggybacked, N);
    assert_eq!(ea.rx_acks_piggybacked - sa.rx_acks_piggybacked, N);
    // Each came on a message: held until after the answer.
    assert_eq!(eb.rx_acks_held - sb.rx_acks_held, N);
    assert_eq!(ea.rx_acks_held - sa.rx_acks_held, N);
    // The last pong is acknowledged on its own once the hold expires.
    let hold = a.dom.rdm_config().ack_hold;
    let due = a.dom.poll_timeout().expect("the ack timer is armed");
    assert!(due <= now + hold, "{due:?}");
    now += hold;
    a.progress(now);
    let acks = carry(&mut a, &mut b);
    assert_eq!(acks.len(), 1);
    assert_eq!(kind(&acks[0]).0, PacketType::Ack);
    assert_eq!(
        acks[0].len(),
        wire::packet::BASE_LEN + wire::packet::hdr_len::SHORT_ACK,
        "a short ACK packet"
    );
    b.progress(now);
    assert!(matches!(b.read(btx)[..], [Ok(e)] if e.op_context == 4000 + WARM + N - 1));
}

/// Every ACK body in `pkts` (ACK packets and piggybacked).
fn acks_in(pkts: &[Vec<u8>]) -> Vec<wire::packet::AckRepr> {
    pkts.iter()
        .filter_map(|p| match wire::Repr::parse_bytes(p) {
            Ok(wire::Repr {
                body: wire::packet::Body::Ack(a),
                ..
            }) => Some(a),
            Ok(r) => r.ack(),
            Err(_) => None,
        })
        .collect()
}

/// Hosts A (`a_short_ack`: whether it sends short ACKs) and B exchange 20 tagged 64 B
/// messages each way; every packet from A to B passes through `on_the_way`. Checks
/// that all 40 completed on each side and returns the packets A and B sent (A's as
/// sent).
fn exchange_both_ways(
    a_short_ack: bool,
    mut on_the_way: impl FnMut(Vec<u8>) -> Vec<u8>,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    SHORT_ACK.with(|b| b.set(a_short_ack));
    let mut a = host([10, 0, 0, 1], 1);
    SHORT_ACK.with(|b| b.set(true));
    let mut b = host([10, 0, 0, 2], 2);
    let b_at_a = a.insert(&b);
    let a_at_b = b.insert(&a);
    let mut now = Instant::from_millis(1);
    let src = Some(UdpAddr::new(a.ip.into(), 7000));
    let (mut from_a, mut from_b) = (Vec::new(), Vec::new());
    for i in 0..20 {
        recv(&mut b, i, i);
        recv(&mut a, 100 + i, i);
        send(&mut a, b_at_a, i, 64, i);
        send(&mut b, a_at_b, 100 + i, 64, i);
        for _ in 0..30 {
            a.progress(now);
            while let Some(p) = a.link.pop_tx(|_, d| d.to_vec()) {
                b.link.inject(&on_the_way(p.clone()), src);
                from_a.push(p);
            }
            b.progress(now);
            from_b.extend(carry(&mut b, &mut a));
            now += Duration::from_micros(10);
        }
    }
    let (atx, arx, btx, brx) = (a.tx_cq, a.rx_cq, b.tx_cq, b.rx_cq);
    assert_eq!(a.read(atx).len() + a.read(arx).len(), 40);
    assert_eq!(b.read(btx).len() + b.read(brx).len(), 40);
    assert_eq!(a.dom.stats().rx_malformed, 0);
    assert_eq!(b.dom.stats().rx_malformed, 0);
    (from_a, from_b)
}

/// An engine configured without short ACKs sends only long ones, and still takes the
/// short ones its peer sends (it announces the capability all the same).
#[test]
fn short_acks_are_a_sender_choice_the_receiver_always_takes() {
    let (from_a, from_b) = exchange_both_ways(false, |p| p);
    let (la, lb) = (acks_in(&from_a), acks_in(&from_b));
    assert!(
        la.len() >= 10 && lb.len() >= 10,
        "{} {}",
        la.len(),
        lb.len()
    );
    assert!(la.iter().all(|a| !a.short), "A was told not to");
    assert!(
        lb.iter().all(|a| a.short == (a.sack == 0)),
        "B: short when it can be"
    );
    assert!(lb.iter().any(|a| a.short));
}

/// A peer that does not announce SHORT_ACK (an engine from before it) never gets one.
#[test]
fn a_peer_without_the_capability_gets_long_acks() {
    use wire::packet::{Body, caps};
    // A's handshake packets lose the capability on the way (re-emitted, so the CRC
    // still holds): to B, A is an older engine.
    let strip = |p: Vec<u8>| -> Vec<u8> {
        let mut r = wire::Repr::parse_bytes(&p).unwrap();
        if let Body::Hello(h) | Body::HelloAck(h) = &mut r.body {
            h.caps &= !caps::SHORT_ACK;
        } else {
            return p;
        }
        let mut out = vec![0; r.buffer_len()];
        r.emit_bytes(&mut out).unwrap();
        out
    };
    let (_, from_b) = exchange_both_ways(true, strip);
    let lb = acks_in(&from_b);
    assert!(lb.len() >= 10);
    assert!(lb.iter().all(|a| !a.short));
}

#[test]
fn a_lone_message_is_acknowledged_after_the_hold() {
    use wire::packet::PacketType;
    let (mut a, mut b, b_at_a, a_at_b, mut now) = pair();
    // A quick exchange first, so B holds acks for A (see the ping-pong test).
    ping_pong(&mut a, &mut b, b_at_a, a_at_b, &mut now, 0, false);
    pump(&mut a, &mut b, &mut now, 50, &mut Vec::new());
    let (atx, brx) = (a.tx_cq, b.rx_cq);
    a.read(atx);
    b.read(brx);
    let hold = b.dom.rdm_config().ack_hold;
    assert!(hold > Duration::from_micros(2) && hold <= b.dom.rdm_config().ack_delay);
    let lone = |a: &mut Host, b: &mut Host, now: Instant, k: u64| {
        recv(b, 7, 70 + k);
        send(a, b_at_a, 7, 64, 80 + k);
        a.progress(now);
        let ping = carry(a, b);
        assert_eq!(ping.len(), 1);
        assert!(kind(&ping[0]).2, "ACK_REQ");
        b.progress(now);
        assert_eq!(b.read(brx).len(), 1);
    };
    lone(&mut a, &mut b, now, 0);
    assert!(b.link.pop_tx(|_, _| ()).is_none(), "held: no ack at once");
    // The receiving pass left its routine transmit half to the next pass, due at once;
    // that pass sends nothing either.
    assert_eq!(b.dom.poll_timeout(), Some(now));
    assert!(b.dom.transmit_owed());
    b.progress(now);
    assert!(!b.dom.transmit_owed());
    assert!(b.link.pop_tx(|_, _| ()).is_none(), "held: no ack at once");
    // The domain's timeout names the end of the hold, so a sleeping wait wakes for it.
    assert_eq!(b.dom.poll_timeout(), Some(now + hold));
    b.progress(now + (hold - Duration::from_micros(1)));
    assert!(b.link.pop_tx(|_, _| ()).is_none(), "still within the hold");
    now += hold;
    b.progress(now);
    let acks = carry(&mut b, &mut a);
    assert_eq!(acks.len(), 1, "one standalone ACK after the hold");
    assert_eq!(kind(&acks[0]).0, PacketType::Ack);
    assert!(a.read(atx).is_empty());
    a.progress(now);
    assert!(matches!(a.read(atx)[..], [Ok(e)] if e.op_context == 80));
    assert_eq!(b.dom.poll_timeout(), None, "nothing left to do");
    // The hold did not pay off: the next lone message is acknowledged at once, so a
    // sender that never waits for replies never waits for its acks either.
    now += Duration::from_micros(100);
    lone(&mut a, &mut b, now, 1);
    let acks = carry(&mut b, &mut a);
    assert_eq!(acks.len(), 1, "ACK at once");
    assert_eq!(kind(&acks[0]).0, PacketType::Ack);
    a.progress(now);
    assert!(matches!(a.read(atx)[..], [Ok(e)] if e.op_context == 81));
    // A reply right after that ACK shows holding would have paid off: B holds again.
    recv(&mut a, 9, 90);
    send(&mut b, a_at_b, 9, 64, 91);
    now += Duration::from_micros(2);
    b.progress(now);
    carry(&mut b, &mut a);
    now += Duration::from_micros(100);
    lone(&mut a, &mut b, now, 2);
    b.progress(now);
    assert!(b.link.pop_tx(|_, _| ()).is_none(), "held again");
    assert_eq!(b.dom.poll_timeout(), Some(now + hold));
}

#[test]
fn gaps_and_duplicates_are_acknowledged_at_once() {
    use wire::packet::PacketType;
    no_bundles();
    let (mut a, mut b, b_at_a, _, mut now) = pair();
    for k in 0..3 {
        recv(&mut b, 20 + k, 200 + k);
        send(&mut a, b_at_a, 20 + k, 16, 300 + k);
    }
    a.progress(now);
    let mut pkts = Vec::new();
    while let Some(p) = a.link.pop_tx(|_, d| d.to_vec()) {
        pkts.push(p);
    }
    assert_eq!(pkts.len(), 3);
    let src = Some(UdpAddr::new(a.ip.into(), 7000));
    let deliver = |b: &mut Host, p: &[u8], now: Instant| {
        b.link.inject(p, src);
        b.progress(now);
        let out: Vec<Vec<u8>> = core::iter::from_fn(|| b.link.pop_tx(|_, d| d.to_vec())).collect();
        out
    };
    let before = stats(&b).acks_sent;
    // The third first: a gap, acknowledged at once with its selective-ack bit.
    let out = deliver(&mut b, &pkts[2], now);
    assert_eq!(out.len(), 1);
    let (t, _, _) = kind(&out[0]);
    assert_eq!(t, PacketType::Ack);
    let Ok(wire::Repr {
        body: wire::packet::Body::Ack(ack),
        ..
    }) = wire::Repr::parse_bytes(&out[0])
    else {
        unreachable!()
    };
    assert_eq!(ack.sack, 0b10);
    assert!(!ack.short, "selective acks need the long form");
    now += Duration::from_micros(1);
    // The first: in order, nothing else to say yet beyond the timer (the gap remains).
    let _ = deliver(&mut b, &pkts[0], now);
    now += Duration::from_micros(1);
    // The second fills the gap: acknowledged at once.
    let out = deliver(&mut b, &pkts[1], now);
    assert_eq!(out.len(), 1);
    assert_eq!(kind(&out[0]).0, PacketType::Ack);
    now += Duration::from_micros(1);
    // A duplicate: acknowledged at once.
    let out = deliver(&mut b, &pkts[1], now);
    assert_eq!(out.len(), 1);
    assert_eq!(kind(&out[0]).0, PacketType::Ack);
    assert!(stats(&b).acks_sent - before >= 3);
    assert_eq!(stats(&b).rx_duplicates, 1);
}

#[test]
fn acks_ride_on_retransmissions_fresh_and_count_on_duplicates() {
    use wire::packet::PacketType;
    let (mut a, mut b, b_at_a, a_at_b, mut now) = pair();
    let (atx, btx) = (a.tx_cq, b.tx_cq);
    // B sends m1; A receives it and owes an ack.
    recv(&mut a, 5, 50);
    send(&mut b, a_at_b, 5, 32, 51);
    b.progress(now);
    carry(&mut b, &mut a);
    a.progress(now);
    assert!(a.link.pop_tx(|_, _| ()).is_none());
    // A's message carries that ack, and is lost.
    recv(&mut b, 6, 60);
    send(&mut a, b_at_a, 6, 32, 61);
    a.progress(now);
    let lost: Vec<Vec<u8>> = core::iter::from_fn(|| a.link.pop_tx(|_, d| d.to_vec())).collect();
    assert_eq!(lost.len(), 1);
    let first_ack = kind(&lost[0]).1.expect("piggybacked");
    // B sends m2 meanwhile (its m1 still unacknowledged); it reaches A just before
    // A's retransmission timer expires, so A owes an ack when it retransmits.
    recv(&mut a, 7, 70);
    send(&mut b, a_at_b, 7, 32, 71);
    now += Duration::from_micros(5);
    b.progress(now);
    let m2: Vec<Vec<u8>> = core::iter::from_fn(|| b.link.pop_tx(|_, d| d.to_vec())).collect();
    assert_eq!(m2.len(), 1);
    let rto = a.dom.poll_timeout().expect("A's retransmission timer");
    assert!(rto > now + Duration::from_micros(20));
    now = Instant::from_micros(rto.total_micros() - 10);
    a.link.inject(&m2[0], Some(UdpAddr::new(b.ip.into(), 7000)));
    a.progress(now);
    assert!(a.link.pop_tx(|_, _| ()).is_none(), "the ack of m2 is held");
    now = rto;
    a.progress(now);
    let retx: Vec<Vec<u8>> = core::iter::from_fn(|| a.link.pop_tx(|_, d| d.to_vec())).collect();
    assert_eq!(retx.len(), 1, "only the retransmission, carrying the ack");
    let p = &retx[0];
    assert_eq!(kind(p).0, PacketType::Tagged);
    let fresh = kind(p).1.expect("the retransmission carries an ack");
    assert_eq!(fresh.cum_ack, first_ack.cum_ack.wrapping_add(1));
    assert_ne!(fresh.ts, first_ack.ts);
    // B takes it (completing m1 and m2 by its ack); a second copy is a duplicate
    // whose ack is still processed.
    let before = stats(&b);
    let src = Some(UdpAddr::new(a.ip.into(), 7000));
    for _ in 0..2 {
        b.link.inject(p, src);
    }
    b.progress(now);
    let after = stats(&b);
    assert_eq!(after.rx_acks_piggybacked - before.rx_acks_piggybacked, 2);
    assert_eq!(after.rx_duplicates - before.rx_duplicates, 1);
    let done = b.read(btx);
    assert_eq!(done.len(), 2, "{done:?}");
    // Everything settles.
    pump(&mut a, &mut b, &mut now, 50, &mut Vec::new());
    assert!(matches!(a.read(atx)[..], [Ok(e)] if e.op_context == 61));
}

/// Progresses `h` for `steps` rounds of 10 µs, feeding every packet it transmits back
/// to itself (its own address is its peer).
fn pump_self(h: &mut Host, now: &mut Instant, steps: usize) {
    pump_self_lossy(h, now, steps, &mut |_| false);
}

/// As [`pump_self`], dropping the packets `drop` picks (it sees each one).
fn pump_self_lossy(
    h: &mut Host,
    now: &mut Instant,
    steps: usize,
    drop: &mut dyn FnMut(&[u8]) -> bool,
) {
    let src = Some(UdpAddr::new(h.ip.into(), 7000));
    for _ in 0..steps {
        h.progress(*now);
        while let Some(p) = h.link.pop_tx(|_, d| d.to_vec()) {
            if !drop(&p) {
                assert!(h.link.inject(&p, src), "loopback full");
            }
        }
        *now += Duration::from_micros(10);
    }
}

#[test]
fn an_endpoint_sends_to_itself() {
    let mut h = host_caps([10, 0, 0, 1], 7, Flags::SOURCE);
    let me = h.dom.ep_addr(h.ep).unwrap();
    let own = {
        let mut out = [0; 1];
        h.dom
            .av_mut(h.av)
            .unwrap()
            .insert(AvAddrs::Ep(&[me]), Some(&mut out), Flags::empty(), None)
            .unwrap();
        out[0]
    };
    let mut now = Instant::from_millis(1);
    // (length, tag or untagged, receive posted before the send)
    let msgs: [(usize, Option<u64>, bool); 6] = [
        (10, None, true),
        (3000, None, false),
        (100, Some(0x51), true),
        (2000, Some(0x52), false),
        (20_000, Some(0x53), true),
        (20_000, None, false),
    ];
    for (i, &(len, tag, pre)) in msgs.iter().enumerate() {
        let i = i as u64;
        let pattern = |k: usize| (k as u8).wrapping_mul(7).wrapping_add(i as u8);
        for k in 0..len {
            h.mem[k] = pattern(k);
        }
        h.mem[0x8000..].fill(0);
        let rbuf = IoVec::new(BASE + 0x8000, 0x8000);
        let post_recv = |h: &mut Host| match tag {
            // A decoy receive for another tag first: only the right tag matches.
            Some(t) => {
                h.dom
                    .trecv(
                        h.ep,
                        IoVec::new(BASE + 0x7000, 0x100),
                        own,
                        t + 0x100,
                        0,
                        999,
                    )
                    .unwrap();
                h.dom.trecv(h.ep, rbuf, own, t, 0, 10 + i).unwrap();
            }
            None => h.dom.recv(h.ep, rbuf, own, 10 + i).unwrap(),
        };
        if pre {
            post_recv(&mut h);
        }
        {
            let mem = SliceMemory::new(BASE, &mut h.mem);
            let buf = IoVec::new(BASE, len);
            match tag {
                Some(t) => h.dom.tsend(h.ep, &mem, buf, own, t, 100 + i).unwrap(),
                None => h.dom.send(h.ep, &mem, buf, own, 100 + i).unwrap(),
            }
        }
        pump_self(&mut h, &mut now, 20);
        if !pre {
            post_recv(&mut h);
            pump_self(&mut h, &mut now, 20);
        }
        let (txq, rxq) = (h.tx_cq, h.rx_cq);
        let tx = h.read(txq);
        assert!(
            matches!(tx[..], [Ok(e)] if e.op_context == 100 + i),
            "{i}: send completion {tx:?}"
        );
        let q = h.dom.cq_mut(rxq).unwrap();
        let mut e = [CqEntry::default(); 2];
        let mut src = [0; 2];
        assert_eq!(q.readfrom(&mut e, &mut src), Ok(1), "{i}: one receive");
        assert_eq!((e[0].op_context, e[0].len), (10 + i, len), "{i}");
        assert_eq!(e[0].tag, tag.unwrap_or(0), "{i}: tag");
        assert_eq!(src[0], own, "{i}: FI_SOURCE names our own fi_addr");
        for k in 0..len {
            assert_eq!(h.mem[0x8000 + k], pattern(k), "{i}: byte {k}");
        }
        if tag.is_some() {
            // Cancel the decoy, which must not have matched.
            h.dom.ep_cancel(h.ep, 999).unwrap();
            let got = h.read(rxq);
            assert!(
                matches!(got[..], [Err(Errno::ECANCELED)]),
                "{i}: the decoy was untouched {got:?}"
            );
        }
    }
    let s = stats(&h);
    assert_eq!(s.sessions, 1, "one self session");
    assert_eq!((s.tx_msgs, s.rx_msgs), (6, 6));
    assert_eq!(
        s.rx_protocol_errors + s.rx_unknown_session + s.rx_bad_acks + s.rx_bad_handshake,
        0,
        "{s:?}"
    );
    assert_eq!(s.peer_failures, 0);
    assert_eq!(
        h.dom.ep(h.ep).unwrap().rdm().unwrap().peer_state(&me),
        Some(crate::rdm::PeerState::Established)
    );
}

#[test]
fn a_self_session_recovers_losses_with_sacks_and_piggybacked_acks() {
    let mut h = host([10, 0, 0, 1], 9);
    let me = h.dom.ep_addr(h.ep).unwrap();
    let own = {
        let mut out = [0; 1];
        h.dom
            .av_mut(h.av)
            .unwrap()
            .insert(AvAddrs::Ep(&[me]), Some(&mut out), Flags::empty(), None)
            .unwrap();
        out[0]
    };
    let mut now = Instant::from_millis(1);
    let n = 12u64;
    // Mostly one-segment messages (room for a piggybacked ack), some of three.
    let len = |i: u64| if i % 4 == 3 { 3000usize } else { 300 };
    for k in 0..3000 {
        h.mem[k] = k as u8 ^ 0x5a;
    }
    for i in 0..n {
        let buf = IoVec::new(BASE + 0x4000 + i * 0xC00, 0xC00);
        h.dom
            .trecv(h.ep, buf, FI_ADDR_UNSPEC, i, 0, 10 + i)
            .unwrap();
    }
    // Drop the first HELLO and about one packet in six after it (a fixed
    // pseudo-random pattern; a periodic one can keep hitting the same packet).
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut hellos = 0u32;
    let mut lost = 0u32;
    let mut drop = |p: &[u8]| {
        let (t, _, _) = kind(p);
        if t == wire::packet::PacketType::Hello {
            hellos += 1;
            return hellos == 1;
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let d = rng.is_multiple_of(6);
        lost += d as u32;
        d
    };
    // One send per step: data leaves while acks are owed, and carries them.
    for i in 0..n {
        let mem = SliceMemory::new(BASE, &mut h.mem);
        h.dom
            .tsend(h.ep, &mem, IoVec::new(BASE, len(i)), own, i, 100 + i)
            .unwrap();
        pump_self_lossy(&mut h, &mut now, if i == 0 { 300 } else { 1 }, &mut drop);
    }
    pump_self_lossy(&mut h, &mut now, 20_000, &mut drop);
    let (txq, rxq) = (h.tx_cq, h.rx_cq);
    let mut tx: Vec<u64> = h
        .read(txq)
        .into_iter()
        .map(|e| e.unwrap().op_context)
        .collect();
    let mut rx: Vec<(u64, usize, u64)> = h
        .read(rxq)
        .into_iter()
        .map(|e| e.map(|e| (e.op_context, e.len, e.tag)).unwrap())
        .collect();
    tx.sort();
    rx.sort();
    assert_eq!(tx, (0..n).map(|i| 100 + i).collect::<Vec<_>>());
    assert_eq!(
        rx,
        (0..n).map(|i| (10 + i, len(i), i)).collect::<Vec<_>>(),
        "every tag to its receive"
    );
    for i in 0..n as usize {
        let at = 0x4000 + i * 0xC00;
        assert!(
            (0..len(i as u64)).all(|k| h.mem[at + k] == k as u8 ^ 0x5a),
            "message {i} intact"
        );
    }
    let s = stats(&h);
    assert!(hellos >= 2, "the lost HELLO was retried");
    assert!(lost > 0, "packets were lost");
    assert_eq!((s.sessions, s.peer_failures), (1, 0), "{s:?}");
    assert!(s.rx_held > 0, "losses opened gaps (selective acks): {s:?}");
    assert!(
        s.tx_fast_retransmits + s.tx_timeout_retransmits > 0,
        "losses were repaired: {s:?}"
    );
    assert!(
        s.acks_piggybacked > 0 && s.rx_acks_piggybacked > 0,
        "acks ride on our own data: {s:?}"
    );
    assert_eq!(
        s.rx_protocol_errors + s.rx_unknown_session + s.rx_bad_acks,
        0,
        "{s:?}"
    );
    let peer = h
        .dom
        .ep(h.ep)
        .unwrap()
        .rdm()
        .unwrap()
        .peers()
        .next()
        .unwrap();
    assert_eq!(peer.addr, me);
    assert_eq!(
        (peer.next_seq, peer.snd_una),
        (peer.rcv_nxt, peer.rcv_nxt),
        "one sequence space, all acked"
    );
}

/// A HELLO whose version byte was corrupted on the way draws REJECT(VERSION) naming
/// versions we speak: that is no answer to the HELLO we sent, so the handshake goes on
/// and the message arrives.
#[test]
fn a_version_reject_for_a_corrupted_hello_does_not_fail_the_handshake() {
    let mut a = host([10, 0, 0, 1], 1);
    let mut b = host([10, 0, 0, 2], 2);
    let b_at_a = a.insert(&b);
    b.insert(&a);
    let mut now = Instant::from_millis(1);
    recv(&mut b, 5, 50);
    send(&mut a, b_at_a, 5, 100, 51);
    a.progress(now);
    let src = Some(UdpAddr::new(a.ip.into(), 7000));
    let mut hello = a.link.pop_tx(|_, d| d.to_vec()).expect("a HELLO");
    assert_eq!(kind(&hello).0, wire::packet::PacketType::Hello);
    hello[2] ^= 0x40; // the version byte
    b.link.inject(&hello, src);
    b.progress(now);
    let rejects = carry(&mut b, &mut a);
    assert_eq!(rejects.len(), 1, "REJECT(VERSION) for the mangled HELLO");
    a.progress(now);
    assert!(a.read(a.tx_cq).is_empty(), "the send did not fail");
    assert_eq!(stats(&a).peer_failures, 0);
    // The HELLO is repeated; the session comes up and the message arrives.
    pump(&mut a, &mut b, &mut now, 400, &mut Vec::new());
    let (atx, brx) = (a.tx_cq, b.rx_cq);
    assert!(matches!(a.read(atx)[..], [Ok(e)] if e.op_context == 51));
    assert!(matches!(b.read(brx)[..], [Ok(e)] if e.op_context == 50 && e.len == 100));
}

/// A closing endpoint lingers for at least `rto_max`, not a few of its own (small)
/// RTOs: a peer whose retransmissions backed off (its last ACK lost, then some of its
/// retransmissions too) still gets the ACK, and its send completes instead of failing
/// with -FI_ETIMEDOUT after the process that received it exited.
#[test]
fn a_closing_endpoint_acknowledges_a_peer_retransmitting_after_backoff() {
    let (mut a, mut b, b_at_a, _, mut now) = pair();
    recv(&mut b, 5, 50);
    send(&mut a, b_at_a, 5, 64, 51);
    a.progress(now);
    carry(&mut a, &mut b);
    b.progress(now);
    let (atx, brx) = (a.tx_cq, b.rx_cq);
    assert_eq!(b.read(brx).len(), 1);
    let until = b
        .dom
        .ep_begin_close(b.ep, now)
        .unwrap()
        .expect("a session to linger for");
    assert!(until >= now + b.dom.rdm_config().rto_max);
    let t0 = now;
    let mut acked = false;
    while now < until && !acked {
        b.progress(now);
        // B's ACKs are lost until A has backed off for 5 ms, and so are A's
        // retransmissions meanwhile.
        let lossy = now < t0 + Duration::from_millis(5);
        if lossy {
            while b.link.pop_tx(|_, _| ()).is_some() {}
        } else {
            carry(&mut b, &mut a);
        }
        a.progress(now);
        if lossy {
            while a.link.pop_tx(|_, _| ()).is_some() {}
        } else {
            carry(&mut a, &mut b);
        }
        acked = matches!(a.read(atx)[..], [Ok(e)] if e.op_context == 51);
        now += Duration::from_micros(50);
    }
    assert!(acked, "the send completed while B lingered");
    assert!(now > t0 + Duration::from_millis(5));
}

/// Closing sends every peer a CLOSE (wire protocol 4.7) after what is in flight: the
/// peer processes it in order, acknowledges it at once and ends the session, failing
/// what the closed endpoint will never take with -FI_ECONNRESET; the acknowledgement
/// ends the closing endpoint's linger long before its deadline.
#[test]
fn close_is_acknowledged_and_ends_the_peer_session_and_the_linger() {
    use wire::packet::PacketType;
    let (mut a, mut b, b_at_a, a_at_b, mut now) = pair();
    // A send posted right before fi_close still goes, before the CLOSE.
    recv(&mut b, 4, 40);
    send(&mut a, b_at_a, 4, 64, 41);
    let until = a
        .dom
        .ep_begin_close(a.ep, now)
        .unwrap()
        .expect("a session to linger for");
    assert!(a.dom.ep_lingering(a.ep));
    a.progress(now);
    // Held back from B for now.
    let mut close = Vec::new();
    while let Some(p) = a.link.pop_tx(|_, d| d.to_vec()) {
        close.push(p);
    }
    assert_eq!(close.len(), 2);
    assert_eq!(kind(&close[0]).0, PacketType::Tagged);
    let (ty, ack, ack_req) = kind(&close[1]);
    assert_eq!(ty, PacketType::Close);
    assert!(
        ack.is_some(),
        "a CLOSE always carries the closing side's ACK"
    );
    assert!(ack_req, "a CLOSE asks for its ACK at once");
    // B sends meanwhile: the closing endpoint does not take it.
    recv(&mut a, 3, 30);
    send(&mut b, a_at_b, 3, 64, 31);
    b.progress(now);
    carry(&mut b, &mut a);
    a.progress(now);
    assert_eq!(stats(&a).rx_closing, 1);
    assert!(
        a.dom.ep_lingering(a.ep),
        "the CLOSE is not acknowledged yet"
    );
    // B's retransmission timer has not fired: A's message and CLOSE arrive, B
    // delivers the one and answers the other.
    carry(&mut a, &mut b);
    let from_a = Some(UdpAddr::new(a.ip.into(), 7000));
    for p in &close {
        b.link.inject(p, from_a);
    }
    now += Duration::from_micros(10);
    b.progress(now);
    let (btx, brx, atx) = (b.tx_cq, b.rx_cq, a.tx_cq);
    assert!(matches!(b.read(brx)[..], [Ok(e)] if e.op_context == 40));
    assert_eq!(
        b.read(btx),
        [Err(Errno::ECONNRESET)],
        "the send the closed endpoint never took fails"
    );
    assert_eq!(stats(&b).closes_received, 1);
    assert_eq!(
        stats(&b).peer_failures,
        0,
        "an orderly CLOSE is not a failure"
    );
    let ack = carry(&mut b, &mut a);
    assert_eq!(ack.len(), 1, "the CLOSE is acknowledged at once");
    a.progress(now);
    assert!(matches!(a.read(atx)[..], [Ok(e)] if e.op_context == 41));
    assert!(
        !a.dom.ep_lingering(a.ep),
        "every peer acknowledged the CLOSE"
    );
    assert!(now < until);
    assert_eq!(stats(&a).closes_sent, 1);
    a.dom.ep_close(a.ep).unwrap();
    // A retransmitted CLOSE (had B's ACK been lost) meets the failed session: RESET.
    b.link.inject(&close[1], from_a);
    b.progress(now);
    let reset = carry(&mut b, &mut a);
    assert_eq!(reset.len(), 1);
    assert_eq!(kind(&reset[0]).0, PacketType::Reset);
}

// ---- RMA ---------------------------------------------------------------------------------

#[cfg(feature = "rma")]
use crate::domain::{RmaArgs, RmaIov};
#[cfg(feature = "rma")]
use crate::mr::MrAttr;

#[cfg(feature = "rma")]
/// Two RMA-capable hosts with a session (A initiates, B is the target) and B's region
/// of `len` bytes at `BASE + off` (key 7).
fn rma_pair(off: u64, len: usize, access: Flags) -> (Host, Host, FiAddr, Instant, u64) {
    let mut a = host_caps([10, 0, 0, 1], 1, Flags::RMA);
    let mut b = host_caps([10, 0, 0, 2], 2, Flags::RMA);
    let b_at_a = a.insert(&b);
    b.insert(&a);
    let iov = [IoVec::new(BASE + off, len)];
    let mr = b
        .dom
        .mr_reg(
            &MrAttr {
                mr_iov: &iov,
                access,
                requested_key: 7,
                ..MrAttr::default()
            },
            Flags::empty(),
        )
        .unwrap();
    let key = b.dom.mrs().key(mr).unwrap();
    (a, b, b_at_a, Instant::from_millis(1), key)
}

#[cfg(feature = "rma")]
fn write(a: &mut Host, to: FiAddr, local: IoVec, rma: RmaIov, data: Option<u64>, ctx: u64) {
    let iov = [local];
    let mut m = RmaArgs::new(&iov, to, rma, ctx);
    let mut flags = Flags::empty();
    if let Some(d) = data {
        m.data = d;
        flags |= Flags::REMOTE_CQ_DATA;
    }
    let mem = SliceMemory::new(BASE, &mut a.mem);
    a.dom.writemsg(a.ep, &mem, &m, flags).unwrap();
}

#[cfg(feature = "rma")]
fn read(a: &mut Host, from: FiAddr, local: IoVec, rma: RmaIov, ctx: u64) {
    let iov = [local];
    let m = RmaArgs::new(&iov, from, rma, ctx);
    let mem = SliceMemory::new(BASE, &mut a.mem);
    a.dom.readmsg(a.ep, &mem, &m, Flags::empty()).unwrap();
}

/// What RDM's `msg_order` (FI_ORDER_RAW, FI_ORDER_WAW) and `max_order_raw_size` /
/// `max_order_waw_size` promise: two overlapping writes and a read posted right after
/// them, before any progress, with the first write's first packets lost once. The
/// target applies the writes in posting order and the read sees both.
#[cfg(feature = "rma")]
#[test]
fn a_read_posted_after_writes_sees_them_in_posting_order() {
    let (mut a, mut b, b_at_a, mut now, key) =
        rma_pair(0x8000, 0x4000, Flags::REMOTE_READ | Flags::REMOTE_WRITE);
    for (i, x) in a.mem[..5000].iter_mut().enumerate() {
        *x = (i * 7 + 3) as u8;
    }
    for (i, x) in a.mem[0x2000..0x2000 + 3000].iter_mut().enumerate() {
        *x = (i * 11 + 5) as u8 | 1;
    }
    let at = |addr, len| RmaIov { addr, len, key };
    write(&mut a, b_at_a, IoVec::new(BASE, 5000), at(0, 5000), None, 1);
    write(
        &mut a,
        b_at_a,
        IoVec::new(BASE + 0x2000, 3000),
        at(1000, 3000),
        None,
        2,
    );
    read(
        &mut a,
        b_at_a,
        IoVec::new(BASE + 0x4000, 6000),
        at(0, 6000),
        3,
    );
    // The handshake, then the first packets of the first write are lost once.
    let mut dropped = 0;
    for _ in 0..40 {
        a.progress(now);
        while let Some(p) = a.link.pop_tx(|_, d| d.to_vec()) {
            if p[3] == wire::PacketType::RmaWrite as u8 && dropped < 2 {
                dropped += 1;
                continue;
            }
            b.link.inject(&p, Some(UdpAddr::new(a.ip.into(), 7000)));
        }
        b.progress(now);
        carry(&mut b, &mut a);
        now += Duration::from_millis(1);
    }
    assert_eq!(dropped, 2);
    let mut want = a.mem[..5000].to_vec();
    want[1000..4000].copy_from_slice(&a.mem[0x2000..0x2000 + 3000]);
    want.resize(6000, 0);
    assert_eq!(
        b.mem[0x8000..0x8000 + 6000],
        want[..],
        "writes applied in order"
    );
    assert_eq!(
        a.mem[0x4000..0x4000 + 6000],
        want[..],
        "the read saw both writes"
    );
    let atx = a.tx_cq;
    let done: Vec<u64> = a.read(atx).iter().map(|e| e.unwrap().op_context).collect();
    assert_eq!(done.len(), 3, "{done:?}");
}

#[cfg(feature = "rma")]
#[test]
fn rma_writes_and_reads_land_in_the_registered_region() {
    let (mut a, mut b, b_at_a, mut now, key) =
        rma_pair(0x8000, 0x4000, Flags::REMOTE_READ | Flags::REMOTE_WRITE);
    let mut tap = Vec::new();
    // 5,000 bytes (four segments) with remote CQ data, 200 bytes into the region.
    for (i, x) in a.mem[..5000].iter_mut().enumerate() {
        *x = (i * 7 + 3) as u8;
    }
    let rma = RmaIov {
        addr: 200,
        len: 5000,
        key,
    };
    write(
        &mut a,
        b_at_a,
        IoVec::new(BASE, 5000),
        rma,
        Some(0xD47A),
        11,
    );
    pump(&mut a, &mut b, &mut now, 30, &mut tap);
    assert_eq!(b.mem[0x8000 + 200..0x8000 + 5200], a.mem[..5000]);
    assert!(b.mem[0x8000..0x8000 + 200].iter().all(|&x| x == 0));
    let (atx, brx) = (a.tx_cq, b.rx_cq);
    let done = a.read(atx);
    assert_eq!(done.len(), 1);
    let e = done[0].unwrap();
    assert_eq!((e.op_context, e.flags), (11, crate::cq::comp::RMA_WRITE));
    let remote = b.read(brx);
    assert_eq!(remote.len(), 1);
    let r = remote[0].unwrap();
    assert_eq!(
        r.flags,
        crate::cq::comp::RMA_REMOTE_WRITE | Flags::REMOTE_CQ_DATA
    );
    assert_eq!((r.data, r.len), (0xD47A, 5000));
    assert!(tap.iter().any(|p| p[3] == wire::PacketType::RmaWrite as u8));

    // Read it back (and 100 more bytes) into another buffer: READ_RESP segments.
    let rma = RmaIov {
        addr: 200,
        len: 5100,
        key,
    };
    read(&mut a, b_at_a, IoVec::new(BASE + 0x2000, 5100), rma, 12);
    pump(&mut a, &mut b, &mut now, 30, &mut tap);
    let done = a.read(atx);
    assert_eq!(done.len(), 1);
    let e = done[0].unwrap();
    assert_eq!((e.op_context, e.flags), (12, crate::cq::comp::RMA_READ));
    assert_eq!(a.mem[0x2000..0x2000 + 5000], a.mem[..5000].to_vec()[..]);
    assert_eq!(
        a.mem[0x2000 + 5000..0x2000 + 5100],
        b.mem[0x8000 + 5200..0x8000 + 5300]
    );
    // No remote event for a read without FI_RMA_EVENT, and nothing left behind.
    assert!(b.read(brx).is_empty());
    let rb = b.dom.ep(b.ep).unwrap().rdm().unwrap();
    assert_eq!(rb.stats().rx_protocol_errors, 0);
    assert_eq!(a.dom.ep(a.ep).unwrap().rdm().unwrap().tx_in_use(), 0);
    // Messages still match after RMA operations (message ids untouched by them).
    b.dom
        .trecv(b.ep, IoVec::new(BASE, 64), FI_ADDR_UNSPEC, 5, 0, 13)
        .unwrap();
    let mem = SliceMemory::new(BASE, &mut a.mem);
    a.dom
        .tsend(a.ep, &mem, IoVec::new(BASE, 64), b_at_a, 5, 14)
        .unwrap();
    pump(&mut a, &mut b, &mut now, 20, &mut tap);
    assert_eq!(b.read(brx).len(), 1);
}

#[cfg(feature = "rma")]
#[test]
fn rma_to_a_bad_key_or_outside_the_region_fails_at_the_initiator() {
    let (mut a, mut b, b_at_a, mut now, key) = rma_pair(0x8000, 0x1000, Flags::REMOTE_WRITE);
    let mut tap = Vec::new();
    a.mem[..3000].fill(0xEE);
    let cases = [
        (
            RmaIov {
                addr: 0,
                len: 100,
                key: key + 1,
            },
            false,
        ), // bad key
        (
            RmaIov {
                addr: 0xF00,
                len: 3000,
                key,
            },
            false,
        ), // past the end (segmented)
        (
            RmaIov {
                addr: 0,
                len: 100,
                key,
            },
            true,
        ), // read without REMOTE_READ
        (
            RmaIov {
                addr: 0x1000,
                len: 0,
                key: key ^ 9,
            },
            true,
        ), // bad key, empty read
    ];
    for (i, (rma, is_read)) in cases.into_iter().enumerate() {
        let local = IoVec::new(BASE, rma.len as usize);
        if is_read {
            read(&mut a, b_at_a, local, rma, 20 + i as u64);
        } else {
            write(&mut a, b_at_a, local, rma, Some(1), 20 + i as u64);
        }
        pump(&mut a, &mut b, &mut now, 30, &mut tap);
        let atx = a.tx_cq;
        assert_eq!(a.read(atx), vec![Err(Errno::EACCES)], "case {i}");
    }
    // The target's memory is untouched and it reported nothing (no CQ data events).
    assert!(b.mem[0x8000..0x9000].iter().all(|&x| x == 0));
    let brx = b.rx_cq;
    assert!(b.read(brx).is_empty());
}

#[cfg(feature = "rma")]
#[test]
fn rma_calls_check_their_arguments() {
    let (mut a, _b, b_at_a, _now, key) = rma_pair(0, 0x100, Flags::REMOTE_WRITE);
    let rma = Flags::RMA | Flags::READ | Flags::WRITE | Flags::REMOTE_READ | Flags::REMOTE_WRITE;
    let mut plain = host_edit([10, 0, 0, 3], 3, Flags::empty(), rma);
    let iov = [IoVec::new(BASE, 64)];
    let rma = RmaIov {
        addr: 0,
        len: 64,
        key,
    };
    let m = RmaArgs::new(&iov, b_at_a, rma, 1);
    let mem = SliceMemory::new(BASE, &mut a.mem);
    // Local and remote lengths differ.
    let short = RmaArgs::new(&iov, b_at_a, RmaIov { len: 63, ..rma }, 1);
    assert_eq!(
        a.dom.writemsg(a.ep, &mem, &short, Flags::empty()),
        Err(Errno::EINVAL)
    );
    // A read is never injected and carries no CQ data.
    assert_eq!(
        a.dom.readmsg(a.ep, &mem, &m, Flags::INJECT),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        a.dom.readmsg(a.ep, &mem, &m, Flags::REMOTE_CQ_DATA),
        Err(Errno::EINVAL)
    );
    // Beyond inject_size (64 here) with FI_INJECT.
    let big = [IoVec::new(BASE, 65)];
    let m65 = RmaArgs::new(&big, b_at_a, RmaIov { len: 65, ..rma }, 1);
    assert_eq!(
        a.dom.writemsg(a.ep, &mem, &m65, Flags::INJECT),
        Err(Errno::EMSGSIZE)
    );
    // An endpoint without FI_RMA.
    let pm = SliceMemory::new(BASE, &mut plain.mem);
    assert_eq!(
        plain.dom.writemsg(plain.ep, &pm, &m, Flags::empty()),
        Err(Errno::EOPNOTSUPP)
    );
    // Completion levels no RMA here can give, and FI_FENCE without its capability.
    for bad in [Flags::COMMIT_COMPLETE, Flags::MATCH_COMPLETE, Flags::FENCE] {
        assert_eq!(
            a.dom.writemsg(a.ep, &mem, &m, bad),
            Err(Errno::EBADFLAGS),
            "{bad:?}"
        );
        assert_eq!(a.dom.readmsg(a.ep, &mem, &m, bad), Err(Errno::EBADFLAGS));
    }
    // Nothing of the refused calls was queued.
    assert_eq!(a.dom.ep(a.ep).unwrap().rdm().unwrap().tx_in_use(), 0);
}

#[cfg(feature = "rma")]
#[test]
fn rma_to_an_endpoint_without_the_capability_is_refused_by_it() {
    let mut a = host_caps([10, 0, 0, 1], 1, Flags::RMA);
    // The target asked for FI_RMA with FI_REMOTE_READ only: writes to it are refused
    // even to a region that allows them.
    let mut b = host_edit(
        [10, 0, 0, 2],
        2,
        Flags::empty(),
        Flags::READ | Flags::WRITE | Flags::REMOTE_WRITE,
    );
    let b_at_a = a.insert(&b);
    b.insert(&a);
    let iov = [IoVec::new(BASE, 0x100)];
    let attr = MrAttr {
        mr_iov: &iov,
        access: Flags::REMOTE_READ | Flags::REMOTE_WRITE,
        requested_key: 3,
        ..MrAttr::default()
    };
    let mr = b.dom.mr_reg(&attr, Flags::empty()).unwrap();
    let key = b.dom.mrs().key(mr).unwrap();
    let mut now = Instant::from_millis(1);
    let mut tap = Vec::new();
    a.mem[..16].fill(0x55);
    let rma = RmaIov {
        addr: 0,
        len: 16,
        key,
    };
    write(&mut a, b_at_a, IoVec::new(BASE, 16), rma, None, 1);
    pump(&mut a, &mut b, &mut now, 30, &mut tap);
    let atx = a.tx_cq;
    assert_eq!(a.read(atx), vec![Err(Errno::EOPNOTSUPP)]);
    assert!(b.mem[..16].iter().all(|&x| x == 0));
    // Reads it serves.
    b.mem[..16].fill(0x66);
    read(&mut a, b_at_a, IoVec::new(BASE + 0x100, 16), rma, 2);
    pump(&mut a, &mut b, &mut now, 30, &mut tap);
    assert_eq!(a.read(atx).len(), 1);
    assert!(a.mem[0x100..0x110].iter().all(|&x| x == 0x66));
}

// ---- atomics -----------------------------------------------------------------------------

#[cfg(feature = "atomic")]
use crate::atomic::AtomicKind;
#[cfg(feature = "atomic")]
use crate::domain::AtomicArgs;
#[cfg(feature = "atomic")]
use wire::packet::{AtomicDatatype as Dt, AtomicOp as Op};

#[cfg(feature = "atomic")]
fn u64s(m: &[u8], at: usize, n: usize) -> Vec<u64> {
    (0..n)
        .map(|i| u64::from_ne_bytes(m[at + i * 8..at + i * 8 + 8].try_into().unwrap()))
        .collect()
}

#[cfg(feature = "atomic")]
fn put_u64s(m: &mut [u8], at: usize, v: &[u64]) {
    for (i, x) in v.iter().enumerate() {
        m[at + i * 8..at + i * 8 + 8].copy_from_slice(&x.to_ne_bytes());
    }
}

#[cfg(feature = "atomic")]
/// One atomic from A (operands at A's offset 0, compare at 0x100, result at 0x200)
/// to B's region at `off`; pumps and returns A's completion.
#[allow(clippy::too_many_arguments)]
fn atomic(
    a: &mut Host,
    b: &mut Host,
    now: &mut Instant,
    to: FiAddr,
    kind: AtomicKind,
    op: Op,
    dt: Dt,
    count: usize,
    off: u64,
    key: u64,
) -> Result<CqEntry, Errno> {
    let n = count * dt.size();
    let iov = [IoVec::new(BASE, if op == Op::Read { 0 } else { n })];
    let args = AtomicArgs {
        iov: &iov,
        addr: to,
        rma: RmaIov {
            addr: off,
            len: n as u64,
            key,
        },
        datatype: dt,
        op,
        count,
        context: 0xA7,
        data: 0,
    };
    let mem = SliceMemory::new(BASE, &mut a.mem);
    let (cmp, res) = (IoVec::new(BASE + 0x100, n), IoVec::new(BASE + 0x200, n));
    let r = match kind {
        AtomicKind::Write => a.dom.atomicmsg(a.ep, &mem, &args, Flags::empty()),
        AtomicKind::Fetch => a
            .dom
            .fetch_atomicmsg(a.ep, &mem, &args, res, Flags::empty()),
        AtomicKind::Compare => a
            .dom
            .compare_atomicmsg(a.ep, &mem, &args, cmp, res, Flags::empty()),
    };
    r?;
    pump(a, b, now, 20, &mut Vec::new());
    let atx = a.tx_cq;
    let mut got = a.read(atx);
    assert_eq!(got.len(), 1, "one completion");
    got.remove(0)
}

#[cfg(feature = "atomic")]
#[test]
fn atomics_apply_at_the_target_and_fetch_the_original_values() {
    let (mut a, mut b, to, mut now, key) =
        rma_pair(0x8000, 0x100, Flags::REMOTE_READ | Flags::REMOTE_WRITE);
    put_u64s(&mut b.mem, 0x8000 + 8, &[40, 1, 2]);
    use AtomicKind::*;
    // Fetch-and-add.
    put_u64s(&mut a.mem, 0, &[2]);
    let e = atomic(
        &mut a,
        &mut b,
        &mut now,
        to,
        Fetch,
        Op::Sum,
        Dt::U64,
        1,
        8,
        key,
    )
    .unwrap();
    assert_eq!(e.flags, crate::cq::comp::ATOMIC_READ);
    assert_eq!(u64s(&a.mem, 0x200, 1), [40]);
    assert_eq!(u64s(&b.mem, 0x8000 + 8, 1), [42]);
    // Compare-and-swap that hits, then one that misses.
    put_u64s(&mut a.mem, 0x100, &[42]);
    put_u64s(&mut a.mem, 0, &[7]);
    atomic(
        &mut a,
        &mut b,
        &mut now,
        to,
        Compare,
        Op::Cswap,
        Dt::U64,
        1,
        8,
        key,
    )
    .unwrap();
    assert_eq!(
        (u64s(&a.mem, 0x200, 1), u64s(&b.mem, 0x8008, 1)),
        (vec![42], vec![7])
    );
    put_u64s(&mut a.mem, 0, &[99]);
    atomic(
        &mut a,
        &mut b,
        &mut now,
        to,
        Compare,
        Op::Cswap,
        Dt::U64,
        1,
        8,
        key,
    )
    .unwrap();
    assert_eq!(
        (u64s(&a.mem, 0x200, 1), u64s(&b.mem, 0x8008, 1)),
        (vec![7], vec![7])
    );
    // A non-fetching update of three elements, then an ATOMIC_READ of them.
    put_u64s(&mut a.mem, 0, &[0x10, 0x20, 0x40]);
    let e = atomic(
        &mut a,
        &mut b,
        &mut now,
        to,
        Write,
        Op::Bor,
        Dt::U64,
        3,
        8,
        key,
    )
    .unwrap();
    assert_eq!(e.flags, crate::cq::comp::ATOMIC_WRITE);
    assert_eq!(u64s(&b.mem, 0x8008, 3), [0x17, 0x21, 0x42]);
    a.mem[0x200..0x218].fill(0);
    atomic(
        &mut a,
        &mut b,
        &mut now,
        to,
        Fetch,
        Op::Read,
        Dt::U64,
        3,
        8,
        key,
    )
    .unwrap();
    assert_eq!(u64s(&a.mem, 0x200, 3), [0x17, 0x21, 0x42]);
    // Small signed elements and doubles.
    b.mem[0x8040] = (-5i8) as u8;
    a.mem[0] = (-9i8) as u8;
    atomic(
        &mut a,
        &mut b,
        &mut now,
        to,
        Write,
        Op::Min,
        Dt::I8,
        1,
        0x40,
        key,
    )
    .unwrap();
    assert_eq!(b.mem[0x8040] as i8, -9);
    b.mem[0x8048..0x8050].copy_from_slice(&1.5f64.to_ne_bytes());
    a.mem[..8].copy_from_slice(&2.0f64.to_ne_bytes());
    atomic(
        &mut a,
        &mut b,
        &mut now,
        to,
        Fetch,
        Op::Prod,
        Dt::F64,
        1,
        0x48,
        key,
    )
    .unwrap();
    assert_eq!(
        f64::from_ne_bytes(b.mem[0x8048..0x8050].try_into().unwrap()),
        3.0
    );
    assert_eq!(
        f64::from_ne_bytes(a.mem[0x200..0x208].try_into().unwrap()),
        1.5
    );
    // Outside the region and a bad key: error completions, nothing changed.
    let before = b.mem.clone();
    let r = atomic(
        &mut a,
        &mut b,
        &mut now,
        to,
        Write,
        Op::Sum,
        Dt::U64,
        1,
        0xFC,
        key,
    );
    assert_eq!(r, Err(Errno::EACCES));
    let r = atomic(
        &mut a,
        &mut b,
        &mut now,
        to,
        Write,
        Op::Sum,
        Dt::U64,
        1,
        8,
        key + 1,
    );
    assert_eq!(r, Err(Errno::EACCES));
    assert!(b.mem == before);
    let rb = b.dom.ep(b.ep).unwrap().rdm().unwrap();
    assert_eq!(
        (rb.stats().rx_protocol_errors, rb.stats().rx_unsupported),
        (0, 0)
    );
}

/// What RDM's FI_ORDER_ATOMIC_RAR/RAW/WAR/WAW promise: atomics to one target are
/// executed there once each, in posting order, and a fetch returns the value it saw
/// when it was executed. Posted before any progress: fetch-add 1, add 10 (no fetch),
/// atomic read, compare-and-swap 11 -> 5; the first request is lost once and the
/// first two answers are lost once, so both the add and the cswap were applied before
/// the fetch-add's answer (resent) reaches A. The first fetch still shows the value
/// before the later updates (WAR), the read shows both earlier updates (RAW), the
/// cswap saw them too (WAW) and nothing ran twice.
#[cfg(feature = "atomic")]
#[test]
fn atomics_execute_in_posting_order_and_fetch_what_they_saw() {
    let (mut a, mut b, to, mut now, key) =
        rma_pair(0x8000, 0x100, Flags::REMOTE_READ | Flags::REMOTE_WRITE);
    put_u64s(&mut b.mem, 0x8000, &[0]);
    // Operands: 1 at 0, 10 at 8, 5 at 0x10; the cswap's compare 11 at 0x100.
    put_u64s(&mut a.mem, 0, &[1, 10, 5]);
    put_u64s(&mut a.mem, 0x100, &[11]);
    put_u64s(&mut a.mem, 0x200, &[!0, !0, !0]);
    let rma = RmaIov {
        addr: 0,
        len: 8,
        key,
    };
    fn args(iov: &[IoVec], to: FiAddr, rma: RmaIov, op: Op, context: u64) -> AtomicArgs<'_> {
        AtomicArgs {
            iov,
            addr: to,
            rma,
            datatype: Dt::U64,
            op,
            count: 1,
            context,
            data: 0,
        }
    }
    let res = |i: u64| IoVec::new(BASE + 0x200 + 8 * i, 8);
    let (one, ten, five) = (
        [IoVec::new(BASE, 8)],
        [IoVec::new(BASE + 8, 8)],
        [IoVec::new(BASE + 0x10, 8)],
    );
    let none = [IoVec::new(BASE, 0)];
    {
        let mem = SliceMemory::new(BASE, &mut a.mem);
        let fl = Flags::empty();
        a.dom
            .fetch_atomicmsg(a.ep, &mem, &args(&one, to, rma, Op::Sum, 1), res(0), fl)
            .unwrap();
        a.dom
            .atomicmsg(a.ep, &mem, &args(&ten, to, rma, Op::Sum, 2), fl)
            .unwrap();
        a.dom
            .fetch_atomicmsg(a.ep, &mem, &args(&none, to, rma, Op::Read, 3), res(1), fl)
            .unwrap();
        let cmp = IoVec::new(BASE + 0x100, 8);
        a.dom
            .compare_atomicmsg(
                a.ep,
                &mem,
                &args(&five, to, rma, Op::Cswap, 4),
                cmp,
                res(2),
                fl,
            )
            .unwrap();
    }
    let atomic_req = wire::PacketType::AtomicReq as u8;
    let atomic_resp = wire::PacketType::AtomicResp as u8;
    let (mut lost_req, mut lost_resp) = (0, 0);
    for _ in 0..200 {
        a.progress(now);
        while let Some(p) = a.link.pop_tx(|_, d| d.to_vec()) {
            if p[3] == atomic_req && lost_req < 1 {
                lost_req += 1;
                continue;
            }
            b.link.inject(&p, Some(UdpAddr::new(a.ip.into(), 7000)));
        }
        b.progress(now);
        while let Some(p) = b.link.pop_tx(|_, d| d.to_vec()) {
            if p[3] == atomic_resp && lost_resp < 2 {
                lost_resp += 1;
                continue;
            }
            a.link.inject(&p, Some(UdpAddr::new(b.ip.into(), 7000)));
        }
        now += Duration::from_millis(1);
    }
    assert_eq!((lost_req, lost_resp), (1, 2), "the losses happened");
    let atx = a.tx_cq;
    let mut done: Vec<u64> = a.read(atx).iter().map(|e| e.unwrap().op_context).collect();
    done.sort_unstable();
    assert_eq!(done, [1, 2, 3, 4], "every atomic completed once");
    assert_eq!(
        u64s(&a.mem, 0x200, 3),
        [0, 11, 11],
        "fetch-add saw 0 (not the later add), the read and the cswap saw 1 + 10"
    );
    assert_eq!(u64s(&b.mem, 0x8000, 1), [5], "each applied once, in order");
}

#[cfg(feature = "atomic")]
#[test]
fn atomic_calls_check_their_arguments_and_the_target_its_rights() {
    let (mut a, mut b, to, mut now, key) = rma_pair(0x8000, 0x100, Flags::REMOTE_WRITE);
    use AtomicKind::*;
    // What the endpoint serves (inject_size 64 bounds the operands here).
    assert_eq!(a.dom.atomic_valid(a.ep, Op::Sum, Dt::U64, Write), Ok(8));
    assert_eq!(a.dom.atomic_valid(a.ep, Op::Cswap, Dt::U64, Compare), Ok(4));
    assert_eq!(
        a.dom.atomic_valid(a.ep, Op::Bxor, Dt::F32, Write),
        Err(Errno::EOPNOTSUPP)
    );
    assert_eq!(
        a.dom.atomic_valid(a.ep, Op::Sum, Dt::ComplexF32, Fetch),
        Err(Errno::EOPNOTSUPP)
    );
    let call = |a: &mut Host, b: &mut Host, now: &mut Instant, kind, op, dt, count| {
        atomic(a, b, now, to, kind, op, dt, count, 0, key)
    };
    assert_eq!(
        call(&mut a, &mut b, &mut now, Write, Op::Sum, Dt::U64, 0),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        call(&mut a, &mut b, &mut now, Write, Op::Sum, Dt::U64, 9),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        call(&mut a, &mut b, &mut now, Write, Op::Cswap, Dt::U64, 1),
        Err(Errno::EOPNOTSUPP)
    );
    // A count no buffer could hold (from C, say) is refused, not overflowed.
    let iov = [IoVec::new(BASE, 8)];
    let huge = AtomicArgs {
        iov: &iov,
        addr: to,
        rma: RmaIov {
            addr: 0,
            len: 8,
            key,
        },
        datatype: Dt::U64,
        op: Op::Sum,
        count: usize::MAX / 2,
        context: 1,
        data: 0,
    };
    let mem = SliceMemory::new(BASE, &mut a.mem);
    assert_eq!(
        a.dom.atomicmsg(a.ep, &mem, &huge, Flags::empty()),
        Err(Errno::EINVAL)
    );
    // The region allows writes only: a fetching atomic needs remote read access.
    assert_eq!(
        call(&mut a, &mut b, &mut now, Fetch, Op::Sum, Dt::U64, 1),
        Err(Errno::EACCES)
    );
    assert!(b.mem[0x8000..0x8008].iter().all(|&x| x == 0));
    call(&mut a, &mut b, &mut now, Write, Op::Sum, Dt::U64, 1).unwrap();
    // A target without FI_ATOMIC answers UNSUPPORTED.
    let mut c = host_edit([10, 0, 0, 3], 3, Flags::empty(), Flags::ATOMIC);
    let c_at_a = a.insert(&c);
    c.insert(&a);
    let iov = [IoVec::new(BASE + 0x8000, 0x100)];
    let attr = MrAttr {
        mr_iov: &iov,
        access: Flags::REMOTE_READ | Flags::REMOTE_WRITE,
        requested_key: 9,
        ..MrAttr::default()
    };
    let mr = c.dom.mr_reg(&attr, Flags::empty()).unwrap();
    let ckey = c.dom.mrs().key(mr).unwrap();
    let r = atomic(
        &mut a,
        &mut c,
        &mut now,
        c_at_a,
        Write,
        Op::Sum,
        Dt::U64,
        1,
        0,
        ckey,
    );
    assert_eq!(r, Err(Errno::EOPNOTSUPP));
}

/// A region deregistered while a read of it is being answered: the initiator's read
/// fails (-FI_EACCES), on a first transmission and on a retransmission alike; it never
/// completes with zeros in place of the data.
#[cfg(feature = "rma")]
#[test]
fn a_read_of_a_region_closed_meanwhile_fails_instead_of_returning_zeros() {
    for lose_first in [false, true] {
        // Small windows: the read's answer cannot leave in one go.
        let mut a = host_window([10, 0, 0, 1], 1, Flags::RMA, Flags::empty(), 8);
        let mut b = host_window([10, 0, 0, 2], 2, Flags::RMA, Flags::empty(), 8);
        let to = a.insert(&b);
        b.insert(&a);
        let mut now = Instant::from_millis(1);
        let iov = [IoVec::new(BASE + 0x4000, 0x8000)];
        let attr = MrAttr {
            mr_iov: &iov,
            access: Flags::REMOTE_READ,
            requested_key: 5,
            ..MrAttr::default()
        };
        let mr = b.dom.mr_reg(&attr, Flags::empty()).unwrap();
        let key = b.dom.mrs().key(mr).unwrap();
        b.mem[0x4000..0xC000].fill(0x5A);
        // The session first, so the read's answer is what the test loses.
        let w = RmaIov {
            addr: 0,
            len: 8,
            key,
        };
        read(&mut a, to, IoVec::new(BASE, 8), w, 8);
        pump(&mut a, &mut b, &mut now, 20, &mut Vec::new());
        let atx = a.tx_cq;
        assert_eq!(a.read(atx).len(), 1);
        read(
            &mut a,
            to,
            IoVec::new(BASE, 0x8000),
            RmaIov {
                addr: 0,
                len: 0x8000,
                key,
            },
            9,
        );
        // A moves the request; B answers with the first burst of READ_RESP segments,
        // which are lost when `lose_first` (so they go again later).
        a.progress(now);
        while let Some(p) = a.link.pop_tx(|_, d| d.to_vec()) {
            b.link.inject(&p, Some(UdpAddr::new(a.ip.into(), 7000)));
        }
        b.progress(now);
        let mut delivered = 0;
        while let Some(p) = b.link.pop_tx(|_, d| d.to_vec()) {
            if !lose_first {
                a.link.inject(&p, Some(UdpAddr::new(b.ip.into(), 7000)));
                delivered += 1;
            }
        }
        assert!(lose_first || delivered > 0);
        // B's application deregisters the region.
        let h = mr;
        b.dom.mrs_mut().close(h).unwrap();
        assert_eq!(b.dom.mrs().len(), 0);
        pump(&mut a, &mut b, &mut now, 400, &mut Vec::new());
        assert_eq!(
            a.read(atx),
            vec![Err(Errno::EACCES)],
            "lose_first {lose_first}"
        );
        // Nothing of the answer is left behind at the target.
        pump(&mut a, &mut b, &mut now, 50, &mut Vec::new());
        let rb = b.dom.ep(b.ep).unwrap().rdm().unwrap();
        assert_eq!(rb.tx_in_use(), 0);
    }
}

/// FI_RMA_EVENT: the target's endpoint counter (FI_REMOTE_READ | FI_REMOTE_WRITE) and
/// a counter bound to the region count the accesses served; failed ones count nowhere.
#[cfg(feature = "atomic")]
#[test]
fn rma_events_count_served_accesses_on_the_endpoint_and_the_region() {
    let mut a = host_caps([10, 0, 0, 1], 1, Flags::RMA);
    let mut b = host_caps([10, 0, 0, 2], 2, Flags::RMA | Flags::RMA_EVENT);
    let to = a.insert(&b);
    b.insert(&a);
    let mut now = Instant::from_millis(1);
    let iov = [IoVec::new(BASE + 0x8000, 0x1000)];
    let attr = MrAttr {
        mr_iov: &iov,
        access: Flags::REMOTE_READ | Flags::REMOTE_WRITE,
        requested_key: 3,
        ..MrAttr::default()
    };
    let mr = b.dom.mr_reg(&attr, Flags::empty()).unwrap();
    let key = b.dom.mrs().key(mr).unwrap();
    let writes = b
        .dom
        .cntr_open(&crate::cntr::CntrAttr::default(), 1)
        .unwrap();
    let reads = b
        .dom
        .cntr_open(&crate::cntr::CntrAttr::default(), 2)
        .unwrap();
    b.dom.mr_bind_cntr(mr, writes, Flags::REMOTE_WRITE).unwrap();
    b.dom.mr_bind_cntr(mr, reads, Flags::REMOTE_READ).unwrap();
    assert_eq!(
        b.dom.mr_bind_cntr(mr, writes, Flags::SEND),
        Err(Errno::EINVAL)
    );
    let rma = RmaIov {
        addr: 0,
        len: 3000,
        key,
    };
    write(&mut a, to, IoVec::new(BASE, 3000), rma, None, 1);
    read(&mut a, to, IoVec::new(BASE + 0x2000, 3000), rma, 2);
    // Refused (past the end): counted nowhere.
    let past = RmaIov {
        addr: 0xF00,
        len: 512,
        key,
    };
    write(&mut a, to, IoVec::new(BASE, 512), past, None, 3);
    pump(&mut a, &mut b, &mut now, 40, &mut Vec::new());
    let one = [IoVec::new(BASE, 8)];
    let add = AtomicArgs {
        iov: &one,
        addr: to,
        rma: RmaIov {
            addr: 8,
            len: 8,
            key,
        },
        datatype: Dt::U64,
        op: Op::Sum,
        count: 1,
        context: 4,
        data: 0,
    };
    let mem = SliceMemory::new(BASE, &mut a.mem);
    a.dom.atomicmsg(a.ep, &mem, &add, Flags::empty()).unwrap();
    pump(&mut a, &mut b, &mut now, 20, &mut Vec::new());
    let atx = a.tx_cq;
    let done = a.read(atx);
    assert_eq!(done.iter().filter(|e| e.is_ok()).count(), 3);
    assert_eq!(done.iter().filter(|e| e.is_err()).count(), 1);
    let count = |h| b.dom.cntr(h).unwrap().value();
    assert_eq!(count(writes), 2, "the write and the atomic");
    assert_eq!(count(reads), 1);
    assert_eq!(count(b.remote_cntr.unwrap()), 3);
    // Counter bindings end with whichever closes first: the counter here (the region
    // then counts no more), the region in `mr::tests` and the provider's C test.
    b.dom.cntr_close(writes).unwrap();
    assert_eq!(b.dom.mrs().rma_counters(mr, Flags::REMOTE_WRITE).count(), 0);
    assert_eq!(b.dom.mrs().rma_counters(mr, Flags::REMOTE_READ).count(), 1);
    b.dom.mrs_mut().close(mr).unwrap();
    b.dom.cntr_close(reads).unwrap();
}

// ---- a build without RMA and atomics ----------------------------------------------------

/// Without the `rma` and `atomic` features: every RMA and atomic call is -FI_ENOSYS
/// (nothing is queued, no CQ slot taken), registrations for remote access are refused,
/// and a peer's RMA and atomic requests are answered UNSUPPORTED (its operations fail;
/// nothing waits), counted, while messages go on.
#[cfg(not(feature = "rma"))]
#[test]
fn a_build_without_rma_refuses_calls_registrations_and_requests() {
    use wire::packet::{
        AtomicDatatype, AtomicOp, AtomicReqRepr, Body, ReadReqRepr, Repr, RmaWriteRepr, status,
    };
    let (mut a, mut b, b_at_a, a_at_b, mut now) = pair();
    // Calls.
    let rma = crate::domain::RmaIov {
        addr: 0,
        len: 8,
        key: 7,
    };
    let local = [IoVec::new(BASE, 8)];
    let w = crate::domain::RmaArgs::new(&local, b_at_a, rma, 5);
    let one = [IoVec::new(BASE, 8)];
    let add = crate::domain::AtomicArgs {
        iov: &one,
        addr: b_at_a,
        rma,
        datatype: AtomicDatatype::U64,
        op: AtomicOp::Sum,
        count: 1,
        context: 6,
        data: 0,
    };
    let res = IoVec::new(BASE + 0x4000, 8);
    {
        let mem = SliceMemory::new(BASE, &mut a.mem);
        let d = &mut a.dom;
        assert_eq!(
            d.writemsg(a.ep, &mem, &w, Flags::empty()),
            Err(Errno::ENOSYS)
        );
        assert_eq!(
            d.readmsg(a.ep, &mem, &w, Flags::empty()),
            Err(Errno::ENOSYS)
        );
        assert_eq!(
            d.inject_write(a.ep, &mem, local[0], b_at_a, rma, Some(1)),
            Err(Errno::ENOSYS)
        );
        assert_eq!(
            d.atomicmsg(a.ep, &mem, &add, Flags::empty()),
            Err(Errno::ENOSYS)
        );
        assert_eq!(
            d.fetch_atomicmsg(a.ep, &mem, &add, res, Flags::empty()),
            Err(Errno::ENOSYS)
        );
        assert_eq!(
            d.compare_atomicmsg(a.ep, &mem, &add, res, res, Flags::empty()),
            Err(Errno::ENOSYS)
        );
        let k = crate::atomic::AtomicKind::Write;
        assert_eq!(
            d.atomic_valid(a.ep, AtomicOp::Sum, AtomicDatatype::U64, k),
            Err(Errno::ENOSYS)
        );
        assert_eq!(
            d.query_atomic(AtomicOp::Sum, AtomicDatatype::U64, k),
            Err(Errno::ENOSYS)
        );
    }
    assert_eq!(a.dom.ep(a.ep).unwrap().rdm().unwrap().tx_in_use(), 0);
    // Registrations: remote (and RMA-local) access and FI_RMA_EVENT are refused; a
    // region for messages is still fine.
    let iov = [IoVec::new(BASE + 0x8000, 0x1000)];
    for access in [
        Flags::REMOTE_READ,
        Flags::REMOTE_WRITE,
        Flags::READ,
        Flags::WRITE,
    ] {
        let attr = crate::mr::MrAttr {
            mr_iov: &iov,
            access: Flags::SEND | access,
            requested_key: 7,
            ..crate::mr::MrAttr::default()
        };
        assert_eq!(
            b.dom.mr_reg(&attr, Flags::empty()).map(|_| ()),
            Err(Errno::EINVAL)
        );
    }
    let attr = crate::mr::MrAttr {
        mr_iov: &iov,
        access: Flags::SEND | Flags::RECV,
        requested_key: 7,
        ..crate::mr::MrAttr::default()
    };
    assert_eq!(
        b.dom.mr_reg(&attr, Flags::RMA_EVENT).map(|_| ()),
        Err(Errno::EBADFLAGS)
    );
    b.dom.mr_reg(&attr, Flags::empty()).unwrap();
    // A peer's requests (as a build with RMA would send them, in A's session): each is
    // answered UNSUPPORTED, a read with READ_RESP, a write and an atomic with
    // ATOMIC_RESP.
    recv(&mut b, 9, 9);
    send(&mut a, b_at_a, 9, 8, 9);
    let mut template = None;
    a.progress(now);
    while let Some(p) = a.link.pop_tx(|_, d| d.to_vec()) {
        if let Ok(r) = Repr::parse_bytes(&p)
            && matches!(r.body, Body::Msg(_))
        {
            template = Some(r.header);
        }
        b.link.inject(&p, Some(UdpAddr::new(a.ip.into(), 7000)));
    }
    let mut header = template.expect("A sent its message");
    let payload = [0u8; 16];
    let requests = [
        Body::ReadReq(ReadReqRepr {
            key: 7,
            addr: 0,
            len: 8,
            op_id: 0x101,
            ack: None,
        }),
        Body::RmaWrite(RmaWriteRepr {
            key: 7,
            addr: 0,
            op_id: 0x102,
            total_len: 16,
            offset: 0,
            cq_data: None,
            payload: &payload,
            ack: None,
        }),
        Body::AtomicReq(AtomicReqRepr {
            key: 7,
            addr: 0,
            op_id: 0x103,
            op: AtomicOp::Sum,
            datatype: AtomicDatatype::U64,
            count: 1,
            fetch: true,
            cq_data: None,
            operands: &payload[..8],
            ack: None,
        }),
    ];
    let mut answers = Vec::new();
    for body in requests {
        header.seq = header.seq.wrapping_add(1);
        let mut buf = [0u8; 256];
        let n = Repr { header, body }.emit_bytes(&mut buf).unwrap();
        b.link
            .inject(&buf[..n], Some(UdpAddr::new(a.ip.into(), 7000)));
    }
    for _ in 0..20 {
        b.progress(now);
        while let Some(p) = b.link.pop_tx(|_, d| d.to_vec()) {
            if let Ok(r) = Repr::parse_bytes(&p) {
                match r.body {
                    Body::ReadResp(x) => answers.push((x.op_id, x.status, true)),
                    Body::AtomicResp(x) => answers.push((x.op_id, x.status, false)),
                    _ => {}
                }
            }
        }
        now += Duration::from_micros(100);
    }
    answers.sort_unstable();
    answers.dedup();
    assert_eq!(
        answers,
        [
            (0x101, status::UNSUPPORTED, true),
            (0x102, status::UNSUPPORTED, false),
            (0x103, status::UNSUPPORTED, false)
        ]
    );
    let sb = *b.dom.ep(b.ep).unwrap().rdm().unwrap().stats();
    assert_eq!(sb.rx_unserved, 3);
    assert_eq!(sb.rx_protocol_errors, 0);
    // The message came through, and messages go on both ways.
    let brx = b.rx_cq;
    assert_eq!(b.read(brx).len(), 1);
    recv(&mut a, 10, 10);
    send(&mut b, a_at_b, 10, 8, 10);
    pump(&mut a, &mut b, &mut now, 50, &mut Vec::new());
    let arx = a.rx_cq;
    assert!(a.read(arx).iter().any(|e| e.is_ok()));
}

/// Windows beyond 64 packets and SACK ranges (spec 5.6).
#[cfg(feature = "sack")]
mod window;
