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
//! `n` over their difference is one round trip's count, the engine's share of it comes
//! from the `engine` bench. `API_EMPTY_READS=<n>` instead reads an empty CQ `n` times:
//! one turn of a busy-polling wait, whose length bounds how soon a message is seen.

#![allow(missing_docs)] // criterion_main! generates an undocumented `main`.

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group};
use hosted::api::{Av, Buf, Completion, Cq, Domain, Endpoint, Fabric, ProgressMode};
use hosted::ofi_nostd::Errno;
use hosted::ofi_nostd::flags::{FI_ADDR_UNSPEC, FiAddr, Flags};
use hosted::ofi_nostd::info::EpType;

const SIZE: usize = 64;
/// The longest one side polls for a message that loopback delivered already.
const WAIT: Duration = Duration::from_secs(5);

struct Node {
    domain: Domain<u64>,
    av: Av<u64>,
    cq: Cq<u64>,
    ep: Endpoint<u64>,
    peer: FiAddr,
    data: Vec<u8>,
}

fn node(fabric: &Fabric) -> Node {
    let domain = fabric
        .domain()
        .progress(ProgressMode::Manual)
        .open::<u64>()
        .unwrap();
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

struct Pair {
    a: Node,
    b: Node,
    word: u64,
    _fabric: Fabric,
}

impl Pair {
    fn new() -> Pair {
        let fabric = Fabric::open().unwrap();
        let mut a = node(&fabric);
        let mut b = node(&fabric);
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
    let mut pair = Pair::new();
    g.bench_with_input(
        BenchmarkId::new("rdm_msg_inject_round_trip", SIZE),
        &SIZE,
        |bench, _| bench.iter(|| pair.round_trip()),
    );
    g.finish();
}

criterion_group!(benches, api);

fn main() {
    if let Some(n) = std::env::var("API_ROUND_TRIPS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        let mut pair = Pair::new();
        let empty: usize = (0..n).map(|_| pair.round_trip()).sum();
        // Spinning would make the counts depend on timing: say so when any happened.
        eprintln!("api: {empty} empty completion reads in {n} round trips");
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
        let pair = Pair::new();
        for _ in 0..n {
            assert!(matches!(pair.a.cq.read(), Err(e) if e == Errno::EAGAIN));
        }
        std::process::exit(0);
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
