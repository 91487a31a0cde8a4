//! What the whole user-space path costs per round trip: two domains of the safe API in
//! one thread, over UDP on loopback, play a ping-pong of 64 B tagged injects the way
//! `ofi-pingpong` does (read the receive's completion, inject the reply, re-post the
//! receive with the buffer that came back). One thread drives both sides, so the
//! packet is always there when a side reads, and the instruction count per round trip
//! is repeatable: run it under `valgrind --tool=callgrind` with two counts and take the
//! difference (`cargo run --release -p hosted --example api_round_trip -- 2000`), or
//! count only the measured loop (`--toggle-collect=*counted_round_trips*`, after a warm-up
//! that holds the handshake); a second argument adds that many reads of an empty CQ at
//! the end (the busy-poll loop).
//! The kernel's share is not counted; the engine's alone is `benches/engine.rs`.

use std::time::{Duration, Instant};

use hosted::api::{Buf, Cq, Domain, Endpoint, Fabric, ProgressMode};
use hosted::ofi_nostd::Errno;
use hosted::ofi_nostd::flags::{FI_ADDR_UNSPEC, Flags};
use hosted::ofi_nostd::info::EpType;
use hosted::ofi_nostd::rdm::RdmConfig;

const TAG: u64 = 0x5eed;
const WAIT: Duration = Duration::from_secs(5);
/// Round trips run before the counted ones ([`warm_up`]).
const WARM_UP: u64 = 200;

fn main() {
    let n: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let fabric = Fabric::open().expect("fabric");
    // Acknowledgement holds and retransmission timeouts long enough for a run under
    // valgrind, whose slowness would otherwise expire them: ACK packets and timer work
    // a native run (microseconds per round trip) never sees.
    let hold = hosted::ofi_nostd::time::Duration::from_millis(50);
    let rto = hosted::ofi_nostd::time::Duration::from_millis(200);
    let rdm = RdmConfig {
        crc: false,
        ack_hold: hold,
        ack_delay: hold,
        rto_initial: rto,
        rto_min: rto,
        rto_max: rto,
        ..RdmConfig::DEFAULT
    };
    let side = || {
        let d = fabric
            .domain()
            .progress(ProgressMode::Manual)
            .rdm(rdm)
            .open::<u64>()
            .expect("domain");
        let cq = d.cq(64).expect("cq");
        let av = d.av().expect("av");
        let ep = d.endpoint(EpType::Rdm).expect("endpoint");
        ep.bind_cq(&cq, Flags::TRANSMIT | Flags::RECV)
            .expect("bind");
        ep.bind_av(&av).expect("bind");
        ep.enable().expect("enable");
        (d, cq, av, ep)
    };
    let (da, cqa, ava, epa) = side();
    let (db, cqb, avb, epb) = side();
    let to_b = ava.insert(epb.addr()).expect("insert");
    let to_a = avb.insert(epa.addr()).expect("insert");
    let post = |ep: &Endpoint<u64>, buf: Buf| {
        ep.trecv(buf, FI_ADDR_UNSPEC, TAG, 0, 1).expect("trecv");
    };
    // The next receive completion of `cq` (a manual-progress read runs the passes);
    // while there is none, `other` progresses (the handshake needs both sides).
    let next = |cq: &Cq<u64>, other: &Domain<u64>| {
        let t = Instant::now();
        loop {
            match cq.read() {
                Ok(c) if c.is_recv() => return c,
                Ok(_) => continue,
                Err(e) => assert_eq!(e, Errno::EAGAIN),
            }
            other.progress().expect("progress");
            assert!(t.elapsed() < WAIT, "no completion");
        }
    };
    post(&epa, Buf::zeroed(64));
    post(&epb, Buf::zeroed(64));
    let mut msg = [0u8; 64];
    let mut round_trip = |i: u64| {
        msg[..8].copy_from_slice(&i.to_le_bytes());
        epa.tinject(&msg, to_b, TAG).expect("inject");
        let got = next(&cqb, &da);
        assert_eq!(got.buf[..8], i.to_le_bytes());
        epb.tinject(&got.buf[..got.len], to_a, TAG).expect("inject");
        post(&epb, got.buf);
        let back = next(&cqa, &db);
        assert_eq!(back.buf[..8], i.to_le_bytes());
        post(&epa, back.buf);
    };
    warm_up(&mut round_trip);
    let before = da.net_stats().tx_packets + db.net_stats().tx_packets;
    counted_round_trips(&mut round_trip, n);
    // A second count, `idle`, reads an empty CQ that many times: what each turn of a
    // busy-polling wait costs (a progress pass finding nothing).
    let idle: u64 = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(0);
    for _ in 0..idle {
        assert!(cqa.read().is_err_and(|e| e == Errno::EAGAIN), "an empty CQ");
    }
    // One packet each way per round trip when every acknowledgement rides on a reply.
    let packets = da.net_stats().tx_packets + db.net_stats().tx_packets - before;
    println!("{n} round trips: {packets} packets");
}

/// Round trips before the counted ones: the handshake (whose waits spin as long as
/// the peer takes, a count that depends on timing) and the RTT estimate.
#[inline(never)]
fn warm_up(round_trip: &mut impl FnMut(u64)) {
    for i in 0..WARM_UP {
        round_trip(u64::MAX - i);
    }
}

/// `n` round trips, in a function of their own so that callgrind can count only them
/// (`--toggle-collect=*counted_round_trips*`).
#[inline(never)]
fn counted_round_trips(round_trip: &mut impl FnMut(u64), n: u64) {
    for i in 0..n {
        round_trip(i);
    }
}
