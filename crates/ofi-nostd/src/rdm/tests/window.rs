//! Engine tests of windows beyond 64 packets: SACK ranges let one round trip repair
//! holes far apart, and a peer without the capability keeps the 64-packet window.

use std::collections::{HashSet, VecDeque};

use wire::packet::{Body, PacketType, caps};

use super::*;

/// Steps (of 10 µs) a packet from A takes to B: a path long enough that a 64-packet
/// link queue per step keeps hundreds of packets in flight.
const DELAY: usize = 4;

/// Rendezvous sends of this size (16 at once: the endpoint's `tx_size`).
const LEN: usize = 0xF000;

/// What one transfer of 16 sends from A to B showed.
struct Run {
    a: crate::rdm::RdmStats,
    b: crate::rdm::RdmStats,
    /// The most packets A had in flight to B.
    max_in_flight: u32,
    /// The most packets A had outstanding to B (its pipe).
    max_pipe: u32,
    /// SACK packets B sent, as parsed.
    sacks: Vec<wire::packet::SackRepr>,
}

/// `p` without SACK_RANGES if it is a handshake packet (re-emitted: the CRC holds).
fn strip_sack(p: &[u8]) -> Vec<u8> {
    let mut r = wire::Repr::parse_bytes(p).unwrap();
    let (Body::Hello(h) | Body::HelloAck(h)) = &mut r.body else {
        return p.to_vec();
    };
    h.caps &= !caps::SACK_RANGES;
    let mut out = vec![0; r.buffer_len()];
    r.emit_bytes(&mut out).unwrap();
    out
}

/// A and B with windows of `window` packets; A sends 16 rendezvous messages of [`LEN`]
/// bytes to B, the first transmissions of DATA packets number `drop` (counted from 0)
/// are lost, and `strip` removes SACK_RANGES from both handshakes (each side then sees
/// an older engine). Every message must complete on both sides within the bound.
fn transfer(window: u16, drop: &[usize], strip: bool) -> Run {
    REORDER_SLOTS.with(|r| r.set(1024));
    let mut a = host_window([10, 0, 0, 1], 1, Flags::empty(), Flags::empty(), window);
    let mut b = host_window([10, 0, 0, 2], 2, Flags::empty(), Flags::empty(), window);
    let b_at_a = a.insert(&b);
    b.insert(&a);
    let mut now = Instant::from_millis(1);
    for i in 0..16 {
        b.dom
            .trecv(b.ep, IoVec::new(BASE, LEN), FI_ADDR_UNSPEC, i, 0, i)
            .unwrap();
        let mem = SliceMemory::new(BASE, &mut a.mem);
        a.dom
            .tsend(a.ep, &mem, IoVec::new(BASE, LEN), b_at_a, i, i)
            .unwrap();
    }
    let src_a = Some(UdpAddr::new(a.ip.into(), 7000));
    let (mut seen, mut data) = (HashSet::new(), 0usize);
    let mut run = Run {
        a: stats(&a),
        b: stats(&b),
        max_in_flight: 0,
        max_pipe: 0,
        sacks: Vec::new(),
    };
    let (mut sent, mut got) = (0, 0);
    let mut path: VecDeque<(usize, Vec<u8>)> = VecDeque::new();
    for step in 0..5000 {
        a.progress(now);
        while let Some(p) = a.link.pop_tx(|_, d| d.to_vec()) {
            let r = wire::Repr::parse_bytes(&p).unwrap();
            if r.packet_type() == PacketType::Data && seen.insert(r.header.seq) {
                data += 1;
                if drop.contains(&(data - 1)) {
                    continue;
                }
            }
            let out = if strip { strip_sack(&p) } else { p.clone() };
            path.push_back((step + DELAY, out));
        }
        while path.front().is_some_and(|(at, _)| *at <= step) {
            let (_, p) = path.pop_front().unwrap();
            b.link.inject(&p, src_a);
        }
        if let Some(pi) = a.dom.ep(a.ep).unwrap().rdm().unwrap().peers().next() {
            run.max_in_flight = run.max_in_flight.max(pi.next_seq.wrapping_sub(pi.snd_una));
            run.max_pipe = run.max_pipe.max(pi.pipe);
        }
        b.progress(now);
        let src_b = Some(UdpAddr::new(b.ip.into(), 7000));
        while let Some(p) = b.link.pop_tx(|_, d| d.to_vec()) {
            if let Ok(wire::Repr {
                body: Body::Sack(s),
                ..
            }) = wire::Repr::parse_bytes(&p)
            {
                run.sacks.push(s);
            }
            let out = if strip { strip_sack(&p) } else { p };
            a.link.inject(&out, src_b);
        }
        now += Duration::from_micros(10);
        let (atx, brx) = (a.tx_cq, b.rx_cq);
        sent += a.read(atx).iter().filter(|e| e.is_ok()).count();
        got += b.read(brx).iter().filter(|e| e.is_ok()).count();
        if sent == 16 && got == 16 {
            break;
        }
    }
    assert_eq!((sent, got), (16, 16), "every message completes");
    run.a = stats(&a);
    run.b = stats(&b);
    run
}

#[test]
fn sack_ranges_repair_holes_beyond_the_bitmap_in_one_round_trip() {
    let r = transfer(1024, &[100, 200, 300], false);
    assert!(r.max_in_flight > 64, "in flight: {}", r.max_in_flight);
    // The holes 100 and 200 packets behind the first are reported as ranges at once.
    assert!(r.b.sacks_sent > 0 && r.a.rx_sacks == r.b.sacks_sent);
    assert!(
        r.sacks.iter().any(|s| s.ranges.len() >= 2),
        "two holes beyond the bitmap"
    );
    // Each lost packet is resent once by fast retransmit: no timeout, nothing else.
    assert_eq!(r.a.tx_fast_retransmits, 3);
    assert_eq!((r.a.tx_timeout_retransmits, r.a.rto_expirations), (0, 0));
    // Held packets cost an ACK every few, not one each: one at once per hole.
    assert!(r.b.acks_on_hole >= 3);
    assert!(
        r.b.acks_sent * 3 < r.b.rx_held,
        "{} acks for {} held packets",
        r.b.acks_sent,
        r.b.rx_held
    );
}

#[test]
fn a_peer_without_sack_ranges_keeps_the_64_packet_window() {
    let r = transfer(1024, &[100, 200, 300], true);
    assert!(r.max_in_flight <= 64, "in flight: {}", r.max_in_flight);
    assert_eq!(r.b.sacks_sent, 0, "never a SACK to an older engine");
    assert!(r.sacks.is_empty());
    // And a 64-packet window recovers the same losses with the bitmap alone.
    assert!(r.a.tx_fast_retransmits + r.a.tx_timeout_retransmits >= 3);
}

#[test]
fn the_configured_window_is_what_both_sides_get() {
    // Both configured for 128: more than the bitmap while a hole is open, and never
    // more than asked.
    let r = transfer(128, &[10], false);
    assert!(
        r.max_in_flight > 64 && r.max_in_flight <= 128,
        "in flight: {}",
        r.max_in_flight
    );
    assert_eq!((r.a.tx_fast_retransmits, r.a.rto_expirations), (1, 0));
}

#[test]
fn the_window_counts_packets_outstanding_within_a_larger_span() {
    // A 128-packet window within a 1,024-packet span: while the early holes hold the
    // cumulative ack back, A runs far beyond 128 packets from it, never with more than
    // 128 outstanding (neither acknowledged nor selectively acknowledged).
    RX_WINDOW.with(|r| r.set(1024));
    let r = transfer(128, &[10, 11, 400], false);
    RX_WINDOW.with(|r| r.set(0));
    assert!(r.max_in_flight > 128 + 64, "in flight: {}", r.max_in_flight);
    assert!(r.max_in_flight <= 1024, "in flight: {}", r.max_in_flight);
    assert!(r.max_pipe <= 128, "outstanding: {}", r.max_pipe);
    assert_eq!(r.a.tx_fast_retransmits, 3);
    assert_eq!((r.a.tx_timeout_retransmits, r.a.rto_expirations), (0, 0));
}

#[test]
fn a_span_beyond_the_window_is_refused_below_it() {
    let c = crate::rdm::RdmConfig {
        window: 256,
        rx_window: 128,
        ..crate::rdm::RdmConfig::DEFAULT
    };
    assert_eq!(c.validate(), Err(crate::errno::Errno::EINVAL));
    let c = crate::rdm::RdmConfig {
        rx_window: crate::rdm::MAX_RX_WINDOW + 1,
        ..c
    };
    assert_eq!(c.validate(), Err(crate::errno::Errno::EINVAL));
    let c = crate::rdm::RdmConfig { rx_window: 0, ..c };
    assert_eq!((c.validate(), c.span()), (Ok(()), 256));
    let c = crate::rdm::RdmConfig {
        rx_window: 4096,
        ..c
    };
    assert_eq!((c.validate(), c.span()), (Ok(()), 4096));
}
