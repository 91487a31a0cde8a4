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
}

fn cfg() -> ProviderConfig {
    ProviderConfig {
        tx_size: 16,
        rx_size: 16,
        ep_cnt: 2,
        cq_cnt: 2,
        cntr_cnt: 2,
        mr_cnt: 2,
        inject_size: 64,
        ..ProviderConfig::DEFAULT
    }
}

fn host(ip: [u8; 4], seed: u64) -> Host {
    let info = default_info(EpType::Rdm, None, &cfg());
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
        reorder_slots: 32,
        unexp_slots: 32,
        unexp_msgs: 16,
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
    (a, b, b_at_a, now, corpus)
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
