//! What the core itself costs per message, without a system call: two domains joined by
//! in-memory links play an RDM ping-pong of 64 B tagged injects, posting as the adapters
//! do (post, then the transmit half of a pass; a full pass to receive; re-post the
//! receive). One iteration is one round trip: two sends, two receives, two completions.
//!
//! `cargo xtask bench` reports the time per round trip (criterion ids
//! `engine/rdm_tagged_inject_round_trip/64`, and `..._idle_peers/60` with 60 idle
//! sessions on each side, what every pass of an MPI rank with many peers carries). With `ENGINE_ROUND_TRIPS=<n>`
//! in the environment the binary runs `n` round trips untimed and exits, for instruction
//! counts (`valgrind --tool=callgrind target/release/deps/engine-*`); `ENGINE_IDLE_PEERS=<k>`
//! gives each side `k` idle sessions first.
//!
//! The message-rate side: `engine/rdm_tagged_inject_stream/32` streams bursts of
//! [`BURST`] injects one way (one transmit pass), the receiver takes them in full passes
//! and re-posts its receives, its acknowledgements go back and the sender's next full
//! pass takes them; one iteration is one burst, both sides on one core.
//! `ENGINE_STREAM_BURSTS=<n>` runs `n` bursts untimed, for callgrind.
//!
//! `ENGINE_AUTH_KEY=<key>` gives both domains that auth key, so every packet carries a
//! MAC (wire protocol 4.10): the same counts with the MAC's cost.
//!
//! Per-packet cost of bulk data: `ENGINE_BULK_MIB=<n>` sends `n` messages of 1 MiB
//! (rendezvous, [`MTU`]-byte datagrams) from one side to the other, untimed, and says
//! how many packets that took; callgrind's count for two values of `n`, divided by the
//! packets of the difference, is the cost per datagram of both sides together.

#![allow(missing_docs)] // criterion_main! generates an undocumented `main`.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group};
use hosted::ofi_nostd;
use hosted::storage::Heap;
use ofi_nostd::av::{AvAddrs, AvAttr};
use ofi_nostd::cq::{CqAttr, CqEntry, CqFormat};
use ofi_nostd::domain::{AvHandle, BindTarget, CqHandle, Domain, DomainConfig, EpHandle};
use ofi_nostd::fabric::Fabric;
use ofi_nostd::flags::{FI_ADDR_UNSPEC, FiAddr, Flags};
use ofi_nostd::info::{EpType, FabricAttr, ProviderConfig, default_info};
use ofi_nostd::mem::{IoVec, SliceMemory};
use ofi_nostd::net::NetConfig;
use ofi_nostd::time::{Duration, Instant};
use wire::link::{Capabilities, Loopback, Medium, UdpAddr};

const MTU: usize = 1472;
const SIZE: usize = 64;
const BASE: u64 = 0x1000;
const TAG: u64 = 0x42;
/// Idle sessions each side has in the second benchmark (the core's default table holds
/// 64 peers).
const IDLE_PEERS: usize = 60;
/// Messages per burst in the streaming benchmark: half the default window, so a burst
/// never waits for acknowledgements of the one before.
const BURST: usize = 32;
type Link = Loopback<64, MTU>;

struct Host {
    _fabric: Fabric<Heap>,
    dom: Domain<Heap>,
    link: Box<Link>,
    mem: Vec<u8>,
    ep: EpHandle<Heap>,
    rx_cq: CqHandle<Heap>,
    av: AvHandle<Heap>,
    ip: [u8; 4],
    peer: FiAddr,
}

fn host(ip: [u8; 4]) -> Host {
    let cfg = ProviderConfig::DEFAULT;
    let mut info = default_info(EpType::Rdm, None, &cfg);
    if let Ok(k) = std::env::var("ENGINE_AUTH_KEY") {
        info.domain_attr.auth_key = ofi_nostd::info::AuthKey::from_slice(k.as_bytes()).unwrap();
    }
    let mut fabric = Fabric::open(&FabricAttr::default(), 0, Heap, 1).unwrap();
    let net = NetConfig::new(&Capabilities::new(Medium::Udp, MTU), ip, 7000);
    let mut dom =
        Domain::open(&mut fabric, &info, DomainConfig::new(net, cfg, 1), Heap, 0).unwrap();
    // As the adapters configure kernel UDP: the UDP checksum protects the packet.
    let rdm = ofi_nostd::rdm::RdmConfig {
        crc: false,
        ..*dom.rdm_config()
    };
    dom.set_rdm_config(rdm).unwrap();
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
                count: 256,
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
        rx_cq,
        av,
        ip,
        peer: 0,
    }
}

impl Host {
    fn post_recv(&mut self) {
        self.dom
            .trecv(
                self.ep,
                IoVec::new(BASE + 0x8000, SIZE),
                self.peer,
                TAG,
                0,
                7,
            )
            .unwrap();
    }

    /// fi_tinject, then the transmit half of a pass (what the adapters run after a post).
    fn inject(&mut self, now: Instant) {
        let mut mem = SliceMemory::new(BASE, &mut self.mem);
        self.dom
            .tinject(self.ep, &mem, IoVec::new(BASE, SIZE), self.peer, TAG)
            .unwrap();
        self.dom
            .progress_tx(now, &mut *self.link, &mut mem)
            .unwrap();
    }

    /// Full passes until the receive completes (fi_cq_read in a loop), then re-posts it.
    fn complete_recv(&mut self, now: Instant) {
        for _ in 0..8 {
            let mut mem = SliceMemory::new(BASE, &mut self.mem);
            self.dom.progress(now, &mut *self.link, &mut mem).unwrap();
            let mut e = [CqEntry::default(); 1];
            if self.dom.cq_mut(self.rx_cq).unwrap().read(&mut e) == Ok(1) {
                black_box(e);
                self.post_recv();
                return;
            }
        }
        panic!("no receive completion");
    }
}

impl Host {
    fn stats(&self) -> ofi_nostd::rdm::RdmStats {
        *self.dom.ep(self.ep).unwrap().rdm().unwrap().stats()
    }
}

/// A full pass of `x` (re-posting a completed receive, whether one did), then its
/// packets to `y`.
fn step(x: &mut Host, y: &mut Host, now: Instant) -> bool {
    let mut mem = SliceMemory::new(BASE, &mut x.mem);
    x.dom.progress(now, &mut *x.link, &mut mem).unwrap();
    let mut e = [CqEntry::default(); 1];
    let got = x.dom.cq_mut(x.rx_cq).unwrap().read(&mut e) == Ok(1);
    if got {
        x.post_recv();
    }
    wire(x, y);
    got
}

/// Moves what `from` transmitted into `to`'s link.
fn wire(from: &mut Host, to: &mut Host) {
    let src = Some(UdpAddr::new(from.ip.into(), 7000));
    while from.link.pop_tx(|_, d| to.link.inject(d, src)).is_some() {}
}

struct Pair {
    a: Host,
    b: Host,
    now: Instant,
}

/// Inserts `y` into `x`'s AV; returns its fi_addr there.
fn insert(x: &mut Host, y: &Host) -> FiAddr {
    let addr = y.dom.ep_addr(y.ep).unwrap();
    let mut out = [0; 1];
    x.dom
        .av_mut(x.av)
        .unwrap()
        .insert(AvAddrs::Ep(&[addr]), Some(&mut out), Flags::empty(), None)
        .unwrap();
    out[0]
}

/// Sets up a session between `x` and `y` with one message from `x`, then leaves it
/// idle.
fn connect(x: &mut Host, y: &mut Host, now: &mut Instant) {
    let to_y = insert(x, y);
    insert(y, x);
    y.dom
        .trecv(
            y.ep,
            IoVec::new(BASE + 0x8000, SIZE),
            FI_ADDR_UNSPEC,
            TAG,
            0,
            7,
        )
        .unwrap();
    let mut mem = SliceMemory::new(BASE, &mut x.mem);
    x.dom
        .tinject(x.ep, &mem, IoVec::new(BASE, SIZE), to_y, TAG)
        .unwrap();
    x.dom.progress_tx(*now, &mut *x.link, &mut mem).unwrap();
    for _ in 0..100 {
        *now += Duration::from_micros(10);
        wire(x, y);
        if step(y, x, *now) {
            // Let the acknowledgement reach `x`, so nothing is left in flight.
            *now += Duration::from_millis(2);
            for _ in 0..4 {
                step(y, x, *now);
                step(x, y, *now);
            }
            return;
        }
        step(x, y, *now);
    }
    panic!("no session");
}

impl Pair {
    /// The ping-pong pair; each side also has `idle` established sessions with other
    /// hosts that send nothing (what every pass of theirs scans).
    fn new(idle: usize) -> Pair {
        let mut a = host([10, 0, 0, 1]);
        let mut b = host([10, 0, 0, 2]);
        let mut now = Instant::from_millis(1);
        for i in 0..idle {
            let mut c = host([10, 0, 1, i as u8 + 1]);
            connect(&mut c, &mut a, &mut now);
            connect(&mut c, &mut b, &mut now);
        }
        // Those receives were consumed; the pair's own come below.
        for h in [&mut a, &mut b] {
            let mut e = [CqEntry::default(); 64];
            while h.dom.cq_mut(h.rx_cq).unwrap().read(&mut e).is_ok() {}
        }
        a.peer = insert(&mut a, &b);
        b.peer = insert(&mut b, &a);
        a.post_recv();
        b.post_recv();
        let mut p = Pair { a, b, now };
        p.handshake();
        for _ in 0..100 {
            p.round_trip(); // RTT estimate, steady state
        }
        p
    }

    /// One message each way while the session is set up (several passes and packets).
    fn handshake(&mut self) {
        let Pair { a, b, now } = self;
        a.inject(*now);
        b.inject(*now);
        let mut done = [false; 2];
        for _ in 0..100 {
            *now += Duration::from_micros(10);
            done[0] |= step(a, b, *now);
            done[1] |= step(b, a, *now);
            if done == [true; 2] {
                return;
            }
        }
        panic!("no session");
    }

    fn round_trip(&mut self) {
        let Pair { a, b, now } = self;
        *now += Duration::from_micros(3);
        a.inject(*now);
        wire(a, b);
        b.complete_recv(*now);
        b.inject(*now);
        wire(b, a);
        a.complete_recv(*now);
    }
}

/// The bulk message size of `ENGINE_BULK_MIB`.
const BULK: usize = 1 << 20;

impl Pair {
    /// One [`BULK`]-byte message from `a` to `b`, until `b` has its completion and
    /// `a` its last acknowledgement (nothing left in flight).
    fn bulk(&mut self) {
        let Pair { a, b, now } = self;
        for h in [&mut *a, &mut *b] {
            if h.mem.len() < 2 * BULK {
                h.mem.resize(2 * BULK, 0);
            }
        }
        b.dom
            .trecv(b.ep, IoVec::new(BASE + BULK as u64, BULK), b.peer, 1, 0, 9)
            .unwrap();
        {
            let mem = SliceMemory::new(BASE, &mut a.mem);
            a.dom
                .tsend(a.ep, &mem, IoVec::new(BASE, BULK), a.peer, 1, 9)
                .unwrap();
        }
        let mut got = false;
        for _ in 0..100_000 {
            *now += Duration::from_micros(1);
            let mut mem = SliceMemory::new(BASE, &mut a.mem);
            a.dom.progress(*now, &mut *a.link, &mut mem).unwrap();
            wire(a, b);
            let mut mem = SliceMemory::new(BASE, &mut b.mem);
            b.dom.progress(*now, &mut *b.link, &mut mem).unwrap();
            wire(b, a);
            let mut e = [CqEntry::default(); 1];
            got |= b.dom.cq_mut(b.rx_cq).unwrap().read(&mut e) == Ok(1);
            let idle = a
                .dom
                .ep(a.ep)
                .unwrap()
                .rdm()
                .unwrap()
                .peers()
                .all(|p| p.next_seq == p.snd_una);
            if got && idle {
                return;
            }
        }
        panic!("the bulk message did not complete");
    }

    /// One burst of [`BURST`] injects from `a` to `b` (posted back to back, then one
    /// transmit pass, as with FI_MORE); `b` receives them all and re-posts; its
    /// acknowledgements reach `a`, whose next full pass takes them.
    fn stream(&mut self) {
        let Pair { a, b, now } = self;
        *now += Duration::from_micros(3);
        {
            let mut mem = SliceMemory::new(BASE, &mut a.mem);
            for _ in 0..BURST {
                a.dom
                    .tinject(a.ep, &mem, IoVec::new(BASE, SIZE), a.peer, TAG)
                    .unwrap();
            }
            a.dom.progress_tx(*now, &mut *a.link, &mut mem).unwrap();
        }
        wire(a, b);
        let mut got = 0;
        for _ in 0..4 * BURST {
            let mut mem = SliceMemory::new(BASE, &mut b.mem);
            b.dom.progress(*now, &mut *b.link, &mut mem).unwrap();
            let mut e = [CqEntry::default(); BURST];
            if let Ok(n) = b.dom.cq_mut(b.rx_cq).unwrap().read(&mut e) {
                black_box(e);
                for _ in 0..n {
                    b.post_recv();
                }
                got += n;
            }
            if got == BURST {
                break;
            }
        }
        assert_eq!(got, BURST, "a burst was not delivered");
        // The receiver's transmit half (acknowledgements), then the sender takes them.
        let mut mem = SliceMemory::new(BASE, &mut b.mem);
        b.dom.progress(*now, &mut *b.link, &mut mem).unwrap();
        wire(b, a);
        let mut mem = SliceMemory::new(BASE, &mut a.mem);
        a.dom.progress(*now, &mut *a.link, &mut mem).unwrap();
    }

    /// A pair ready to stream: `b` has [`BURST`] receives posted (one is already).
    fn streaming() -> Pair {
        let mut p = Pair::new(0);
        for _ in 1..BURST {
            p.b.post_recv();
        }
        for _ in 0..100 {
            p.stream();
        }
        p
    }
}

fn engine(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine");
    let mut pair = Pair::new(0);
    g.bench_with_input(
        BenchmarkId::new("rdm_tagged_inject_round_trip", SIZE),
        &SIZE,
        |bench, _| bench.iter(|| pair.round_trip()),
    );
    let mut pair = Pair::new(IDLE_PEERS);
    g.bench_with_input(
        BenchmarkId::new("rdm_tagged_inject_round_trip_idle_peers", IDLE_PEERS),
        &IDLE_PEERS,
        |bench, _| bench.iter(|| pair.round_trip()),
    );
    let mut pair = Pair::streaming();
    g.throughput(criterion::Throughput::Elements(BURST as u64));
    g.bench_with_input(
        BenchmarkId::new("rdm_tagged_inject_stream", BURST),
        &BURST,
        |bench, _| bench.iter(|| pair.stream()),
    );
    g.finish();
}

criterion_group!(benches, engine);

fn main() {
    if let Some(n) = std::env::var("ENGINE_BULK_MIB")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        let mut pair = Pair::new(0);
        let before = [pair.a.stats(), pair.b.stats()];
        for _ in 0..n {
            pair.bulk();
        }
        let (a, b) = (pair.a.stats(), pair.b.stats());
        eprintln!(
            "engine bulk: {} MiB, sender {} packets, receiver {} packets ({} ACK packets)",
            n,
            a.tx_packets - before[0].tx_packets,
            b.tx_packets - before[1].tx_packets,
            b.acks_sent - before[1].acks_sent
        );
        return;
    }
    if let Some(n) = std::env::var("ENGINE_STREAM_BURSTS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        let mut pair = Pair::streaming();
        let before = [pair.a.stats(), pair.b.stats()];
        for _ in 0..n {
            pair.stream();
        }
        for (h, b) in [&pair.a, &pair.b].into_iter().zip(before) {
            let s = h.stats();
            eprintln!(
                "engine stream: {:.3} packets ({:.3} ACK packets) sent per message",
                (s.tx_packets - b.tx_packets) as f64 / (n * BURST) as f64,
                (s.acks_sent - b.acks_sent) as f64 / (n * BURST) as f64
            );
        }
        return;
    }
    if let Some(n) = std::env::var("ENGINE_ROUND_TRIPS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        let idle = std::env::var("ENGINE_IDLE_PEERS")
            .ok()
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(0);
        let mut pair = Pair::new(idle);
        let before = [pair.a.stats(), pair.b.stats()];
        for _ in 0..n {
            pair.round_trip();
        }
        // A ping-pong is one packet each way per round trip (acknowledgements ride on
        // the replies): say so when it is not.
        for (h, b) in [&pair.a, &pair.b].into_iter().zip(before) {
            let s = h.stats();
            eprintln!(
                "engine: {} packets ({} ACK packets) sent per round trip",
                (s.tx_packets - b.tx_packets) as f64 / n as f64,
                (s.acks_sent - b.acks_sent) as f64 / n as f64
            );
        }
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
