//! The peer's parts on their own, without a domain: the table (insertion, lookup,
//! the eviction order, a full table), the eviction rule, the RTT estimator, and the
//! send and receive halves.

use super::send::Scoreboard;
use super::*;
use crate::storage::test_storage::VecStorage;

fn addr(n: u16) -> EpAddr {
    EpAddr::new([10, 0, (n >> 8) as u8, n as u8], 7000, n)
}

fn peer(a: EpAddr) -> Peer {
    Peer {
        used: true,
        addr: a,
        ..Peer::EMPTY
    }
}

fn table(n: usize) -> PeerTable<VecStorage> {
    PeerTable::new(&mut VecStorage, n).unwrap()
}

#[test]
fn table_inserts_and_finds() {
    let mut t = table(4);
    assert_eq!(t.find(&addr(1)), None);
    assert_eq!(t.place(&addr(1), |_| false), Ok(Place::Free(0)));
    t.insert(0, peer(addr(1))).unwrap();
    assert_eq!(t.place(&addr(2), |_| false), Ok(Place::Free(1)));
    t.insert(1, peer(addr(2))).unwrap();
    assert_eq!(t.high(), 2);
    // Both found, whichever the last-found cache holds.
    for _ in 0..2 {
        assert_eq!(t.find(&addr(1)), Some(0));
        assert_eq!(t.find(&addr(2)), Some(1));
    }
    assert_eq!(t.place(&addr(2), |_| true), Ok(Place::Found(1)));
    assert_eq!(t.find(&addr(3)), None);
    assert_eq!(t[1].addr, addr(2));
    assert!(t.get(4).is_none());
    assert_eq!(t.used().count(), 2);
    assert_eq!(t.active().len(), 2);
}

#[test]
fn table_remove_forgets_only_that_peer() {
    let mut t = table(32);
    for i in 0..32 {
        t.insert(i, peer(addr(i as u16))).unwrap();
    }
    t.remove(7);
    assert_eq!(t.find(&addr(7)), None);
    assert!(!t[7].used);
    for i in (0..32).filter(|&i| i != 7) {
        assert_eq!(t.find(&addr(i as u16)), Some(i), "peer {i}");
    }
    // The slot is free again, and the high mark stays.
    assert_eq!(t.place(&addr(99), |_| false), Ok(Place::Free(7)));
    assert_eq!(t.high(), 32);
}

#[test]
fn full_table_gives_the_slot_idle_the_longest() {
    let mut t = table(4);
    for (i, at) in [40u64, 10, 30, 20].into_iter().enumerate() {
        let mut p = peer(addr(i as u16));
        p.last_active = Instant::from_micros(at);
        t.insert(i, p).unwrap();
    }
    // Slot 1 (idle the longest) may not go: slot 3 is next.
    assert_eq!(t.place(&addr(9), |i| i != 1), Ok(Place::Victim(3)));
    assert_eq!(t.place(&addr(9), |_| true), Ok(Place::Victim(1)));
    // Nobody may go: the table is full.
    assert_eq!(t.place(&addr(9), |_| false), Err(Errno::EAGAIN));
    // A known peer is found however full the table is.
    assert_eq!(t.place(&addr(2), |_| false), Ok(Place::Found(2)));
}

#[test]
fn eviction_rule() {
    let idle = Duration::from_millis(10);
    let now = Instant::from_micros(1_000_000);
    let mut p = peer(addr(1));
    // Never had a session: may go at once.
    p.last_active = now;
    assert!(p.evictable(now, idle));
    p.tx.op_head = 3;
    assert!(!p.evictable(now, idle), "operations queued");
    p.tx.op_head = NIL;
    p.rx.held = 1;
    assert!(!p.evictable(now, idle), "packets held");
    p.rx.held = 0;
    // Failed or established: only after `idle`.
    for state in [PeerState::Failed, PeerState::Established] {
        p.state = state;
        p.last_active = now;
        assert!(!p.evictable(now, idle), "{state:?} just active");
        p.last_active = Instant::ZERO;
        assert!(p.evictable(now, idle), "{state:?} idle");
    }
    // An established session with anything in flight, owed or half received stays.
    p.tx.next_seq = 5;
    assert!(!p.evictable(now, idle), "in flight");
    p.tx.next_seq = 0;
    p.rx.ack_now = true;
    assert!(!p.evictable(now, idle), "ack owed");
    p.rx.ack_now = false;
    p.rx.inbound = 1;
    assert!(!p.evictable(now, idle), "rendezvous arriving");
    p.rx.inbound = 0;
    p.tx.cts_pending = 1;
    assert!(!p.evictable(now, idle), "CTS to send");
    p.tx.cts_pending = 0;
    assert!(p.evictable(now, idle));
    // A handshake in progress never goes.
    p.state = PeerState::HelloSent;
    assert!(!p.evictable(now, idle));
}

#[test]
fn rtt_estimator() {
    let cfg = RdmConfig::DEFAULT;
    let mut r = Rtt::new(&cfg);
    assert_eq!(r.rto, cfg.rto_initial.total_micros());
    assert!(!r.sampled);
    // First sample: srtt = r, rttvar = r / 2, RTO at least rto_min.
    r.sample(100, &cfg);
    assert_eq!((r.srtt, r.rttvar, r.rto), (100, 50, 300));
    // A sample is capped at twice the estimate (a receiver's hold-back).
    r.sample(10_000, &cfg);
    assert_eq!(
        (r.srtt, r.rttvar),
        ((7 * 100 + 200) / 8, (3 * 50 + 100) / 4)
    );
    assert_eq!(r.rto, r.srtt + 4 * r.rttvar);
    // Backoff doubles up to rto_max.
    let before = r.rto;
    r.backoff(&cfg);
    assert_eq!(r.rto, 2 * before);
    for _ in 0..20 {
        r.backoff(&cfg);
    }
    assert_eq!(r.rto, cfg.rto_max.total_micros());
    // The first sample is capped at the initial RTO.
    let mut r = Rtt::new(&cfg);
    r.sample(50_000, &cfg);
    assert_eq!(r.srtt, cfg.rto_initial.total_micros());
    // Tiny samples keep the RTO at rto_min.
    let mut r = Rtt::new(&cfg);
    r.sample(0, &cfg);
    assert_eq!(r.rto, cfg.rto_min.total_micros());
}

#[test]
fn send_half() {
    let mut t = SendHalf::EMPTY;
    t.op_head = 7;
    t.rtx_pending = 2;
    t.timeouts = 3;
    t.start(u32::MAX - 1, 16);
    assert_eq!((t.next_seq, t.snd_una), (u32::MAX - 1, u32::MAX - 1));
    assert_eq!(t.snd_limit, 14, "the limit wraps");
    assert_eq!((t.cursor, t.rtx_pending, t.timeouts), (7, 0, 0));
    assert_eq!(t.in_flight(), 0);
    t.next_seq = t.next_seq.wrapping_add(3);
    assert_eq!(t.in_flight(), 3);
    // The RTO timer is armed once.
    t.rtt.rto = 500;
    t.arm_rto(Instant::from_micros(100));
    t.arm_rto(Instant::from_micros(200));
    assert_eq!(t.rto_at, Some(Instant::from_micros(600)));
    t.rtx_pending = 1;
    t.rtx_done();
    t.rtx_done();
    assert_eq!(t.rtx_pending, 0);
}

#[test]
fn the_pipe_leaves_out_what_is_selectively_acknowledged_or_queued_again() {
    let mut t = SendHalf::EMPTY;
    t.start(u32::MAX - 4, 64);
    t.next_seq = t.next_seq.wrapping_add(10);
    assert_eq!((t.in_flight(), t.pipe()), (10, 10));
    assert!(!t.window_open(10) && t.window_fills(11) && !t.window_fills(12));
    t.sb.sacked(u32::MAX);
    t.sb.sacked(1);
    t.rtx_pending = 1;
    assert_eq!(t.pipe(), 7);
    // Ten in flight, seven outstanding: a window of 10 lets more out.
    assert!(t.window_open(10) == cfg!(feature = "sack"));
    assert!(t.window_open(11));
}

#[test]
fn the_scoreboard_keeps_the_three_highest_and_what_they_make_lost() {
    let isn = u32::MAX - 2;
    let (una, next) = (isn, isn.wrapping_add(100));
    let mut b = Scoreboard::new(isn);
    assert_eq!(
        b.lost_below(una, next),
        una,
        "nothing selectively acknowledged"
    );
    // Out of order, across the wrap: 10, 30, 20, 5 (offsets from isn).
    for o in [10u32, 30, 20] {
        b.sacked(isn.wrapping_add(o));
    }
    assert_eq!(b.hi, [30, 20, 10].map(|o| isn.wrapping_add(o)));
    assert_eq!(b.lost_below(una, next), isn.wrapping_add(10));
    b.sacked(isn.wrapping_add(5));
    assert_eq!(
        b.hi,
        [30, 20, 10].map(|o| isn.wrapping_add(o)),
        "below the third"
    );
    b.sacked(isn.wrapping_add(25));
    assert_eq!(b.hi, [30, 25, 20].map(|o| isn.wrapping_add(o)));
    assert_eq!(b.sacked, 5);
    // The third highest outside the flight means nothing.
    assert_eq!(
        b.lost_below(isn.wrapping_add(21), next),
        isn.wrapping_add(21)
    );
    // Retired one by one: the last one makes them stale.
    for _ in 0..4 {
        b.retired(isn.wrapping_add(31));
    }
    assert_eq!(b.hi[0], isn.wrapping_add(30));
    b.retired(isn.wrapping_add(31));
    assert_eq!(b.hi, [isn.wrapping_add(30); 3]);
    assert_eq!(
        b.lost_below(isn.wrapping_add(31), next),
        isn.wrapping_add(31)
    );
    // Where retransmissions start: the lowest marked, within the flight.
    assert_eq!(b.rtx_start(una, next), isn);
    b.rtx_from = isn.wrapping_add(50);
    b.marked(isn.wrapping_add(60), una);
    assert_eq!(b.rtx_start(una, next), isn.wrapping_add(50));
    b.marked(isn.wrapping_add(40), una);
    assert_eq!(b.rtx_start(una, next), isn.wrapping_add(40));
    assert_eq!(
        b.rtx_start(isn.wrapping_add(45), next),
        isn.wrapping_add(45),
        "below una"
    );
    b.marked(isn.wrapping_add(70), isn.wrapping_add(45));
    assert_eq!(b.rtx_from, isn.wrapping_add(70), "a stale hint is replaced");
}

#[test]
fn recv_half() {
    let mut r = RecvHalf::EMPTY;
    r.ack_now = true;
    r.blocked = true;
    r.hold_ok = false;
    r.inbound = 2;
    r.start(42, 8);
    assert_eq!((r.rcv_nxt, r.adv_cum, r.adv_credits), (42, 42, 8));
    assert!(!r.blocked && r.hold_ok && r.inbound == 0 && r.asm.is_none());
    assert!(!r.owes_ack());
    r.since_ack = 1;
    assert!(r.owes_ack());
    r.since_ack = 0;
    r.ack_at = Some(Instant::from_micros(5));
    assert!(r.owes_ack());
}

#[test]
fn peer_deadline_and_scan() {
    let now = Instant::from_micros(100);
    let mut p = peer(addr(1));
    assert_eq!(p.deadline(), None);
    p.state = PeerState::Established;
    p.tx.rto_at = Some(Instant::from_micros(500));
    p.rx.ack_at = Some(Instant::from_micros(300));
    assert_eq!(p.deadline(), Some(Instant::from_micros(300)));
    p.rx.ack_now = true;
    assert_eq!(p.deadline(), Some(Instant::ZERO));
    p.rx.ack_now = false;
    // Waiting for data with no timer armed: the scan looks now.
    p.tx.rto_at = None;
    p.rx.ack_at = None;
    p.rx.inbound = 1;
    assert_eq!(p.deadline(), None);
    assert_eq!(p.scan_due(now), Some(now));
    p.state = PeerState::HelloSent;
    p.session.hello_at = Instant::from_micros(700);
    assert_eq!(p.deadline(), Some(Instant::from_micros(700)));
}

#[test]
fn recv_half_acked_and_stopped() {
    let mut r = RecvHalf::EMPTY;
    r.start(10, 4);
    r.since_ack = 3;
    r.ack_now = true;
    r.holding = true;
    r.acked(13, 6);
    assert!(!r.owes_ack() && !r.holding);
    assert_eq!((r.adv_cum, r.adv_credits), (13, 6));
    r.held = 2;
    r.inbound = 1;
    r.blocked = true;
    r.ka_reply = true;
    r.ack_now = true;
    r.stop();
    assert!(!r.owes_ack() && !r.blocked && !r.ka_reply);
    assert_eq!((r.held, r.inbound), (0, 0));
    assert_eq!(r.rcv_nxt, 10, "sequence state stays for diagnostics");
}

#[test]
fn send_half_stopped() {
    let cfg = RdmConfig::DEFAULT;
    let mut t = SendHalf::EMPTY;
    t.op_head = 4;
    t.cursor = NIL;
    t.rto_at = Some(Instant::from_micros(9));
    t.rtx_pending = 3;
    t.cts_pending = 1;
    t.timeouts = 7;
    t.rtt.sample(100, &cfg);
    t.stop(Rtt::new(&cfg));
    assert_eq!(t.rto_at, None);
    assert_eq!(
        (t.rtx_pending, t.cts_pending, t.timeouts, t.cursor),
        (0, 0, 0, 4)
    );
    assert!(!t.rtt.sampled);
}

#[test]
fn session_end_remembers_its_ids() {
    let mut s = Session::EMPTY;
    s.rx_session = 5;
    s.tx_session = 6;
    s.send_hello_ack = true;
    s.end(5, 6);
    assert_eq!((s.rx_session, s.tx_session), (0, 0));
    assert_eq!((s.failed_rx_session, s.failed_tx_session), (5, 6));
    assert!(!s.send_hello_ack && s.cand.is_none());
    // A session that never had ids keeps the last failed one's.
    s.end(0, 0);
    assert_eq!(s.failed_rx_session, 5);
}
