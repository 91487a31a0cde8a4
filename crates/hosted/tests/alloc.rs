//! The steady-state data path allocates nothing: DGRAM and RDM (tagged) ping-pongs
//! between two endpoints over UDP loopback, through the safe API, counted by a global
//! allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use hosted::api::{AutoProgress, Av, Buf, Cq, Domain, Endpoint, Fabric, ProgressMode};
use hosted::ofi_nostd::Errno;
use hosted::ofi_nostd::flags::{FI_ADDR_UNSPEC, Flags};
use hosted::ofi_nostd::info::EpType;

/// Counts allocations (and reallocations) while `COUNTING` is set, on any thread.
struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards every call unchanged to `System`, which upholds `GlobalAlloc`'s
// contract; the counters are atomics and allocate nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const WAIT: Duration = Duration::from_secs(5);

/// One test function for all three cases: the counter sees every thread, and the test
/// harness spawning another test's thread meanwhile (about a dozen allocations) would
/// be counted against this one.
#[test]
fn steady_state_ping_pongs_allocate_nothing_per_message() {
    // libtest's main thread allocates a little (its timeout bookkeeping) right after it
    // spawns this thread and before it blocks waiting for it; on a loaded machine it
    // may only get the CPU once counting has begun (seen: 4 allocations in the first
    // case). Give it the CPU first.
    std::thread::sleep(Duration::from_millis(200));
    // DGRAM, manual progress.
    ping_pong(EpType::Dgram, ProgressMode::Manual);
    // RDM tagged, manual progress.
    ping_pong(EpType::Rdm, ProgressMode::Manual);
    // RDM tagged, with the progress thread.
    ping_pong(EpType::Rdm, ProgressMode::Auto(AutoProgress::default()));
    // RDM, a stream into multi-receive buffers read with copies, one by one and in
    // batches.
    multi_stream(false);
    multi_stream(true);
}

/// A domain with a CQ, an AV and an enabled endpoint of `ep_type`.
fn side(
    fabric: &Fabric,
    ep_type: EpType,
    mode: ProgressMode,
) -> (Domain<u64>, Cq<u64>, Av<u64>, Endpoint<u64>) {
    let d = fabric.domain().progress(mode).open::<u64>().unwrap();
    let cq = d.cq(64).unwrap();
    let av = d.av().unwrap();
    let ep = d.endpoint(ep_type).unwrap();
    ep.bind_cq(&cq, Flags::TRANSMIT | Flags::RECV).unwrap();
    ep.bind_av(&av).unwrap();
    ep.enable().unwrap();
    (d, cq, av, ep)
}

/// A stream of 64 B injects into two multi-receive buffers that go back and forth,
/// each message copied out with `Cq::read_copy` (or `Cq::read_batch` when `batched`):
/// 2000 messages after 500 of warm-up.
fn multi_stream(batched: bool) {
    let fabric = Fabric::open().unwrap();
    let (da, _cqa, ava, epa) = side(&fabric, EpType::Rdm, ProgressMode::Manual);
    let (_db, cqb, _avb, epb) = side(&fabric, EpType::Rdm, ProgressMode::Manual);
    let to_b = ava.insert(epb.addr()).unwrap();
    for _ in 0..2 {
        epb.recv_multi(Buf::zeroed(4096), FI_ADDR_UNSPEC, 1)
            .unwrap();
    }
    let mut copy = Buf::zeroed(64);
    let mut batch = hosted::api::CqBatch::default();
    let mut msg = [0u8; 64];
    let mut got = 0u64;
    let mut run = |n: u64| {
        for i in 0..n {
            msg[..8].copy_from_slice(&(got + i).to_le_bytes());
            epa.inject(&msg, to_b).unwrap();
            let t = std::time::Instant::now();
            loop {
                let r = if batched {
                    match cqb.read_batch(&mut batch, 8) {
                        Ok(_) => {
                            let (c, bytes) = batch.pop().unwrap();
                            if let Some(b) = bytes {
                                copy.copy_from(b);
                            }
                            Ok(c)
                        }
                        Err(e) => Err(e),
                    }
                } else {
                    cqb.read_copy(&mut copy)
                };
                let c = match r {
                    Ok(c) => c,
                    Err(e) => {
                        assert_eq!(e, Errno::EAGAIN);
                        da.progress().unwrap();
                        assert!(t.elapsed() < WAIT, "no completion");
                        continue;
                    }
                };
                let at = c.offset.unwrap();
                let bytes = if c.buf.capacity() > 0 {
                    &c.buf[at..at + c.len]
                } else {
                    &copy[..]
                };
                assert_eq!(bytes[..8], (got + i).to_le_bytes());
                if c.flags.contains(Flags::MULTI_RECV) {
                    let mut buf = c.buf;
                    buf.set_len(buf.capacity());
                    epb.recv_multi(buf, FI_ADDR_UNSPEC, 1).unwrap();
                }
                break;
            }
        }
        got += n;
    };
    run(500);
    ALLOCS.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    run(2000);
    COUNTING.store(false, Ordering::SeqCst);
    let n = ALLOCS.load(Ordering::SeqCst);
    assert_eq!(
        n, 0,
        "multi-receive stream (batched: {batched}): {n} heap allocations in 2000 messages"
    );
}

/// 2000 round trips after 200 of warm-up; RDM uses tagged operations.
fn ping_pong(ep_type: EpType, mode: ProgressMode) {
    let tagged = ep_type == EpType::Rdm;
    let fabric = Fabric::open().unwrap();
    let (da, cqa, ava, epa) = side(&fabric, ep_type, mode);
    let (db, cqb, avb, epb) = side(&fabric, ep_type, mode);
    // With manual progress one thread drives both sides: read one CQ, progress the
    // other domain, until a completion comes.
    let next = |cq: &Cq<u64>, other: &Domain<u64>| {
        let t = std::time::Instant::now();
        loop {
            match cq.read() {
                Ok(c) => return c,
                Err(e) => assert_eq!(e, Errno::EAGAIN),
            }
            other.progress().unwrap();
            assert!(t.elapsed() < WAIT, "no completion");
        }
    };
    let to_b = ava.insert(epb.addr()).unwrap();
    let to_a = avb.insert(epa.addr()).unwrap();
    let recv = |ep: &Endpoint<u64>, buf: Buf| {
        if tagged {
            ep.trecv(buf, FI_ADDR_UNSPEC, 0x5eed, 0, 0).unwrap();
        } else {
            ep.recv(buf, FI_ADDR_UNSPEC, 0).unwrap();
        }
    };
    let send = |ep: &Endpoint<u64>, buf: Buf, to, i| {
        if tagged {
            ep.tsend(buf, to, 0x5eed, i).unwrap();
        } else {
            ep.send(buf, to, i).unwrap();
        }
    };
    // Buffers are made once and cycle between the application and the domain.
    recv(&epa, Buf::zeroed(64));
    recv(&epb, Buf::zeroed(64));
    let mut ping = Some(Buf::from(vec![0u8; 32]));

    let mut round = |i: u64| {
        // a → b
        let mut buf = ping.take().unwrap();
        buf[..8].copy_from_slice(&i.to_le_bytes());
        send(&epa, buf, to_b, i);
        let got = next(&cqb, &da);
        assert!(got.is_recv());
        assert_eq!(got.buf[..8], i.to_le_bytes());
        // b echoes with the buffer it received, and reposts its receive... with the
        // buffer its send completion hands back (first round: a fresh one from a).
        send(&epb, got.buf, to_a, i);
        let mut a_recv = None;
        let mut a_sent = None;
        while a_recv.is_none() || a_sent.is_none() {
            let c = next(&cqa, &db);
            c.result().unwrap();
            if c.is_recv() {
                a_recv = Some(c);
            } else {
                a_sent = Some(c);
            }
        }
        let b_sent = next(&cqb, &da);
        assert!(b_sent.is_send());
        let (mut echoed, sent) = (a_recv.unwrap().buf, a_sent.unwrap().buf);
        assert_eq!(echoed[..8], i.to_le_bytes());
        // Recycle: a's send buffer becomes a's next receive, b's send buffer b's.
        let mut rx = sent;
        rx.set_len(rx.capacity());
        recv(&epa, rx);
        let mut rx = b_sent.buf;
        rx.set_len(rx.capacity());
        recv(&epb, rx);
        echoed.set_len(32);
        ping = Some(echoed);
    };

    for i in 0..200 {
        round(i);
    }
    // The counter works.
    COUNTING.store(true, Ordering::SeqCst);
    drop(std::hint::black_box(vec![1u8; 3]));
    COUNTING.store(false, Ordering::SeqCst);
    assert!(ALLOCS.load(Ordering::SeqCst) > 0);
    ALLOCS.store(0, Ordering::SeqCst);
    COUNTING.store(true, Ordering::SeqCst);
    for i in 200..2200 {
        round(i);
    }
    COUNTING.store(false, Ordering::SeqCst);
    let n = ALLOCS.load(Ordering::SeqCst);
    assert_eq!(
        n, 0,
        "{ep_type:?} {mode:?}: {n} heap allocations in 2000 round trips"
    );
}
