//! What a message costs through the whole hosted path, in one thread: two RDM endpoints
//! of the safe API, each on its own kernel UDP socket on loopback, play a ping-pong of
//! 64 B messages as `ofi-pingpong -e rdm -m msg` does (fi_injectdata, busy `fi_cq_read`
//! until the receive completes, re-post its buffer). Loopback delivers a datagram
//! during the `sendto`, so the receiver's first read finds it: the counts hold no
//! spinning, only the work of a message (safe API, core, UDP link; the system calls'
//! kernel time is not user-space instructions).
//!
//! `cargo xtask bench` reports the time per round trip (criterion id
//! `api/rdm_msg_inject_round_trip/64`); with `API_ROUND_TRIPS=<n>` in the environment
//! the binary runs `n` round trips untimed and exits, for instruction counts
//! (`valgrind --tool=callgrind target/release/deps/api-*`): the difference between two
//! `n` over their difference is one round trip's count, or, with
//! `--toggle-collect=*counted_round_trips*`, the count over `n` (only the measured
//! loop); the engine's share of it comes from the `engine` bench. Those runs stretch
//! the engine's timers by valgrind's slowdown ([`dilated`]), so that the count is the
//! same in every run. `API_EMPTY_READS=<n>` instead reads an empty CQ `n` times:
//! one turn of a busy-polling wait, whose length bounds how soon a message is seen.

#![allow(missing_docs)] // criterion_main! generates an undocumented `main`.

use std::time::Instant;

use hosted::ofi_nostd::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group};
use hosted::api::{Av, Buf, Completion, Cq, Domain, Endpoint, Fabric, ProgressMode};
use hosted::ofi_nostd::Errno;
use hosted::ofi_nostd::flags::{FI_ADDR_UNSPEC, FiAddr, Flags};
use hosted::ofi_nostd::info::EpType;
use hosted::ofi_nostd::rdm::RdmConfig;

const SIZE: usize = 64;
/// The longest one side polls for a message that loopback delivered already.
const WAIT: std::time::Duration = std::time::Duration::from_secs(5);

struct Node {
    domain: Domain<u64>,
    av: Av<u64>,
    cq: Cq<u64>,
    ep: Endpoint<u64>,
    peer: FiAddr,
    data: Vec<u8>,
}

fn node(fabric: &Fabric, rdm: Option<RdmConfig>) -> Node {
    let mut builder = fabric.domain().progress(ProgressMode::Manual);
    if let Some(rdm) = rdm {
        builder = builder.rdm(rdm);
    }
    let domain = builder.open::<u64>().unwrap();
    let cq = domain.cq(64).unwrap();
    let av = domain.av().unwrap();
    let ep = domain.endpoint(EpType::Rdm).unwrap();
    ep.bind_cq(&cq, Flags::TRANSMIT | Flags::RECV).unwrap();
    ep.bind_av(&av).unwrap();
    ep.enable().unwrap();
    ep.recv(Buf::zeroed(SIZE), FI_ADDR_UNSPEC, 1).unwrap();
    Node {
        domain,
        av,
        cq,
        ep,
        peer: FI_ADDR_UNSPEC,
        data: vec![0x5a; SIZE],
    }
}

impl Node {
    fn send(&self, word: u64) {
        self.ep.injectdata(&self.data, word, self.peer).unwrap();
    }

    /// Reads until the receive completes (progressing `other` meanwhile: the
    /// handshake needs both sides); returns it and how many reads found nothing.
    fn complete_recv(&self, other: &Node) -> (Completion<u64>, usize) {
        let until = Instant::now() + WAIT;
        let mut empty = 0;
        loop {
            match self.cq.read() {
                Ok(c) => {
                    assert!(c.error.is_none() && c.is_recv(), "not a receive: {c:?}");
                    return (c, empty);
                }
                Err(e) if e == Errno::EAGAIN => {
                    empty += 1;
                    other.domain.progress().unwrap();
                    assert!(Instant::now() < until, "no message within {WAIT:?}");
                }
                Err(e) => panic!("fi_cq_read: {e}"),
            }
        }
    }

    /// Takes the message `word` and posts its buffer again; returns the empty reads.
    fn take(&self, word: u64, other: &Node) -> usize {
        let (c, empty) = self.complete_recv(other);
        assert_eq!(c.data, Some(word));
        self.ep.recv(c.buf, FI_ADDR_UNSPEC, 1).unwrap();
        empty
    }
}

/// How much longer the engine's timers are in a count under valgrind: a round trip
/// there takes ~40 times as long as natively, and a loaded machine deschedules the
/// process for milliseconds at a time (at 100 a few timers still expired per thousand
/// round trips, at 1,000 the counts of two runs still differed by 0.2% when the load
/// was 7 per core; at 10,000 they agree to 0.002% at a load of 9 per core).
const VALGRIND_SLOWDOWN: u64 = 10_000;

/// The domain's own RDM tuning with every timer `k` times as long: what a count under
/// callgrind runs with. Natively a round trip takes a few microseconds and the 25 µs
/// acknowledgement hold, the retransmission and liveness timers all but never expire
/// in this ping-pong (measured: 2.0006 packets per round trip); under valgrind a round
/// trip takes hundreds of microseconds, so they expired in some passes and not others,
/// as the machine's load decided (2.03 packets), and the counts of two runs of one
/// binary differed by 1.5% (transmitter scans and ACKs per expiry). Stretched, the
/// timers stand to the work as they do natively: exactly 2 packets, and the counts of
/// two runs agree to 0.01%.
fn dilated(k: u64) -> RdmConfig {
    let fabric = Fabric::open().unwrap();
    let domain = fabric.domain().open::<u64>().unwrap();
    let base = domain.rdm_config();
    let x = |d: Duration| Duration::from_micros(d.total_micros().saturating_mul(k));
    RdmConfig {
        rto_initial: x(base.rto_initial),
        rto_min: x(base.rto_min),
        rto_max: x(base.rto_max),
        ack_delay: x(base.ack_delay),
        ack_hold: x(base.ack_hold),
        handshake_timeout: x(base.handshake_timeout),
        ..base
    }
}

struct Pair {
    a: Node,
    b: Node,
    word: u64,
    _fabric: Fabric,
}

impl Pair {
    /// A warmed-up pair; `rdm` replaces the engine's tuning (see [`dilated`]).
    fn new(rdm: Option<RdmConfig>) -> Pair {
        let fabric = Fabric::open().unwrap();
        let mut a = node(&fabric, rdm);
        let mut b = node(&fabric, rdm);
        a.peer = a.av.insert(b.ep.addr()).unwrap();
        b.peer = b.av.insert(a.ep.addr()).unwrap();
        let mut p = Pair {
            a,
            b,
            word: 0,
            _fabric: fabric,
        };
        for _ in 0..200 {
            p.round_trip(); // the session, the RTT estimate, steady state
        }
        p
    }

    /// One round trip; returns how many reads found nothing (0 in steady state: the
    /// message is there when its receiver first looks).
    fn round_trip(&mut self) -> usize {
        self.word = self.word.wrapping_add(1);
        self.a.send(self.word);
        let mut empty = self.b.take(self.word, &self.a);
        self.b.send(self.word);
        empty += self.a.take(self.word, &self.b);
        empty
    }
}

fn api(c: &mut Criterion) {
    let mut g = c.benchmark_group("api");
    let mut pair = Pair::new(None);
    g.bench_with_input(
        BenchmarkId::new("rdm_msg_inject_round_trip", SIZE),
        &SIZE,
        |bench, _| bench.iter(|| pair.round_trip()),
    );
    g.finish();
}

criterion_group!(benches, api);

/// `n` round trips, in a function of their own so that callgrind can count only them
/// (`--toggle-collect=*counted_round_trips*`: without the setup and warm-up, whose
/// handshake waits depend on timing); returns the empty reads.
#[inline(never)]
fn counted_round_trips(pair: &mut Pair, n: usize) -> usize {
    (0..n).map(|_| pair.round_trip()).sum()
}

fn main() {
    if let Some(n) = std::env::var("API_ROUND_TRIPS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        let mut pair = Pair::new(Some(dilated(VALGRIND_SLOWDOWN)));
        let sent = |p: &Pair| p.a.domain.net_stats().tx_packets + p.b.domain.net_stats().tx_packets;
        let before = sent(&pair);
        let empty = counted_round_trips(&mut pair, n);
        // Spinning or timer work would make the counts depend on timing: say so when
        // any happened (a round trip is two packets when every acknowledgement rides
        // on a reply).
        let packets = sent(&pair) - before;
        eprintln!("api: {empty} empty completion reads, {packets} packets in {n} round trips");
        // Without the endpoints' closing linger (it waits on timers in real time, which
        // callgrind stretches): the counts are the round trips' and the setup's.
        std::process::exit(0);
    }
    if let Some(n) = std::env::var("API_EMPTY_READS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        // What one turn of a busy-polling wait costs in user space: a read of an empty
        // CQ (its pass finds the socket empty).
        let pair = Pair::new(Some(dilated(VALGRIND_SLOWDOWN)));
        for _ in 0..n {
            assert!(matches!(pair.a.cq.read(), Err(e) if e == Errno::EAGAIN));
        }
        std::process::exit(0);
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
