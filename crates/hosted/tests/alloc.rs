//! The steady-state data path allocates nothing: a DGRAM ping-pong between two endpoints
//! over UDP loopback, through the safe API, counted by a global allocator.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use hosted::api::{Buf, Fabric};
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

#[test]
fn dgram_ping_pong_allocates_nothing_per_message() {
    let fabric = Fabric::open().unwrap();
    let mk = || {
        let d = fabric.domain().open::<u64>().unwrap();
        let cq = d.cq(64).unwrap();
        let av = d.av().unwrap();
        let ep = d.endpoint(EpType::Dgram).unwrap();
        ep.bind_cq(&cq, Flags::TRANSMIT | Flags::RECV).unwrap();
        ep.bind_av(&av).unwrap();
        ep.enable().unwrap();
        (d, cq, av, ep)
    };
    let (_da, cqa, ava, epa) = mk();
    let (_db, cqb, avb, epb) = mk();
    let to_b = ava.insert(epb.addr()).unwrap();
    let to_a = avb.insert(epa.addr()).unwrap();

    // Buffers are made once and cycle between the application and the domain.
    epa.recv(Buf::zeroed(64), FI_ADDR_UNSPEC, 0).unwrap();
    epb.recv(Buf::zeroed(64), FI_ADDR_UNSPEC, 0).unwrap();
    let mut ping = Some(Buf::from(vec![0u8; 32]));

    let mut round = |i: u64| {
        // a → b
        let mut buf = ping.take().unwrap();
        buf[..8].copy_from_slice(&i.to_le_bytes());
        epa.send(buf, to_b, i).unwrap();
        let got = cqb.sread(WAIT).unwrap();
        assert!(got.is_recv());
        assert_eq!(got.buf[..8], i.to_le_bytes());
        // b echoes with the buffer it received, and reposts its receive... with the
        // buffer its send completion hands back (first round: a fresh one from a).
        epb.send(got.buf, to_a, i).unwrap();
        let mut a_recv = None;
        let mut a_sent = None;
        while a_recv.is_none() || a_sent.is_none() {
            let c = cqa.sread(WAIT).unwrap();
            c.result().unwrap();
            if c.is_recv() {
                a_recv = Some(c);
            } else {
                a_sent = Some(c);
            }
        }
        let b_sent = cqb.sread(WAIT).unwrap();
        assert!(b_sent.is_send());
        let (mut echoed, sent) = (a_recv.unwrap().buf, a_sent.unwrap().buf);
        assert_eq!(echoed[..8], i.to_le_bytes());
        // Recycle: a's send buffer becomes a's next receive, b's send buffer b's.
        let mut rx = sent;
        rx.set_len(rx.capacity());
        epa.recv(rx, FI_ADDR_UNSPEC, 0).unwrap();
        let mut rx = b_sent.buf;
        rx.set_len(rx.capacity());
        epb.recv(rx, FI_ADDR_UNSPEC, 0).unwrap();
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
    assert_eq!(n, 0, "{n} heap allocations in 2000 round trips");
}
