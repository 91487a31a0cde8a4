//! Tag matching cost against queue length (criterion; `cargo xtask bench` runs it and
//! reports the ratios).
//!
//! The requirement: matching an exact-tag incoming message against 10,000 posted
//! receives of distinct tags costs within 2x of matching against 1 posted receive. Every
//! iteration is one `find` + `remove` + re-`post` (or re-`insert`), so the queue keeps its
//! length. Exact-tag benches walk the posted tags in a scattered order (a prime stride),
//! as messages for many receives would arrive, so the long queue pays its real cache
//! misses; `hot` repeats the last-posted tag, the pure structural cost. The wildcard bench
//! (ignore bits, one ordered list) is the linear contrast.
//!
//! Benchmark ids are `<group>/<variant>/<queue length>`; criterion writes each mean to
//! `target/criterion/<group>/<variant>/<length>/new/estimates.json`, which xtask reads.

#![allow(missing_docs)] // criterion_main! generates an undocumented `main`.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use ofi_nostd::flags::{FI_ADDR_UNSPEC, FiAddr};
use ofi_nostd::matching::{Bucket, Node, PostedQueue, UnexpectedQueue};
use ofi_nostd::pool::Slot;

/// Queue lengths; `xtask bench` compares the last against the first.
const LENGTHS: [usize; 3] = [1, 100, 10_000];

/// Prime stride through the posted tags (coprime with every length above).
const STRIDE: usize = 7919;

/// The source of every incoming message (and of every directed receive).
const SRC: FiAddr = 5;

type Storage = Vec<Slot<Node<u64>>>;
type Posted = PostedQueue<u64, Storage, Vec<Bucket>>;
type Unexpected = UnexpectedQueue<u64, Storage, Vec<Bucket>>;

/// Node storage for `n` entries and as many buckets per table as the docs ask for.
fn storage(n: usize) -> (Storage, Vec<Bucket>) {
    (
        (0..n).map(|_| Slot::VACANT).collect(),
        vec![Bucket::EMPTY; 2 * n.next_power_of_two()],
    )
}

/// A posted queue of `n` receives from `src` for tags `0..n`, each `tag << shift` with
/// the low `shift` bits ignored.
fn posted(n: usize, src: FiAddr, shift: u32) -> Posted {
    let (nodes, buckets) = storage(n);
    let mut q = PostedQueue::new(nodes, buckets);
    let ignore = (1u64 << shift) - 1;
    for tag in 0..n as u64 {
        q.post(src, tag << shift, ignore, tag)
            .expect("storage fits n receives");
    }
    q
}

/// One matched message: find the receive for `tag`, complete it, post it again.
#[inline(always)]
fn match_one(q: &mut Posted, src: FiAddr, tag: u64, rsrc: FiAddr, rtag: u64, ignore: u64) {
    let h = q
        .find(black_box(src), black_box(tag))
        .expect("a receive matches");
    let node = q.remove(h).expect("found entries are queued");
    let value = *node.value();
    q.post(rsrc, rtag, ignore, black_box(value))
        .expect("a slot was just freed");
}

/// Exact tags, any-source and directed receives, scattered and hot.
fn posted_exact(c: &mut Criterion) {
    let mut g = c.benchmark_group("posted_exact");
    for (variant, rsrc) in [("any_src", FI_ADDR_UNSPEC), ("directed", SRC)] {
        for n in LENGTHS {
            let mut q = posted(n, rsrc, 0);
            let mut i = 0usize;
            g.bench_function(BenchmarkId::new(variant, n), |b| {
                b.iter(|| {
                    i = (i + STRIDE) % n;
                    let tag = i as u64;
                    match_one(&mut q, SRC, tag, rsrc, tag, 0);
                })
            });
        }
    }
    for n in LENGTHS {
        let mut q = posted(n, FI_ADDR_UNSPEC, 0);
        let tag = n as u64 - 1;
        g.bench_function(BenchmarkId::new("hot", n), |b| {
            b.iter(|| match_one(&mut q, SRC, tag, FI_ADDR_UNSPEC, tag, 0))
        });
    }
    g.finish();
}

/// Receives with ignore bits live on one ordered list: matching the last-posted one is
/// linear in the queue length (the contrast to the hashed exact-tag case).
fn posted_wildcard(c: &mut Criterion) {
    let mut g = c.benchmark_group("posted_wildcard");
    for n in LENGTHS {
        let mut q = posted(n, FI_ADDR_UNSPEC, 8);
        let rtag = (n as u64 - 1) << 8;
        g.bench_function(BenchmarkId::new("last_posted", n), |b| {
            b.iter(|| match_one(&mut q, SRC, rtag | 0x2a, FI_ADDR_UNSPEC, rtag, 0xff))
        });
    }
    g.finish();
}

/// A new receive searching `n` unexpected messages (from sources 1..=4, tags `0..n`),
/// exact-tag any-source and directed; the claimed message is queued again.
fn unexpected(c: &mut Criterion) {
    let mut g = c.benchmark_group("unexpected");
    let src_of = |tag: usize| (tag % 4) as FiAddr + 1;
    for (variant, directed) in [("any_src", false), ("directed", true)] {
        for n in LENGTHS {
            let (nodes, buckets) = storage(n);
            let mut u: Unexpected = UnexpectedQueue::new(nodes, buckets);
            for tag in 0..n {
                u.insert(src_of(tag), tag as u64, 0)
                    .expect("storage fits n messages");
            }
            let mut i = 0usize;
            g.bench_function(BenchmarkId::new(variant, n), |b| {
                b.iter(|| {
                    i = (i + STRIDE) % n;
                    let (src, tag) = (src_of(i), i as u64);
                    let want = if directed { src } else { FI_ADDR_UNSPEC };
                    let h = u
                        .find(black_box(want), black_box(tag), 0)
                        .expect("a message matches");
                    u.remove(h).expect("found entries are queued");
                    u.insert(src, tag, black_box(0))
                        .expect("a slot was just freed");
                })
            });
        }
    }
    g.finish();
}

criterion_group!(benches, posted_exact, posted_wildcard, unexpected);
criterion_main!(benches);
