//! `UdpLink` between sockets on 127.0.0.1: tokens and bursts both ways, metadata, the
//! flush rule, MTU refusal, truncation, send errors and large bursts.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

use dp_kernel::udp::{DEFAULT_MAX_PAYLOAD, DEFAULT_RING, MAX_UDP_PAYLOAD};
use dp_kernel::{KernelLink, UdpConfig, UdpLink};
use wire::link::{Link, Medium, RxMeta, RxToken, TxMeta, TxToken, UdpAddr};

fn config(ring: usize) -> UdpConfig {
    let mut c = UdpConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
    c.ring = ring;
    c
}

fn link(ring: usize) -> UdpLink {
    UdpLink::new(config(ring)).expect("bind 127.0.0.1:0")
}

/// Queue one datagram through the token API; `false` if no slot.
fn send(link: &mut UdpLink, dst: UdpAddr, data: &[u8]) -> bool {
    let Some(tok) = link.transmit() else {
        return false;
    };
    tok.consume_with(data.len(), |buf| {
        buf[..data.len()].copy_from_slice(data);
        (TxMeta::to(data.len(), dst), true)
    })
}

/// Receive through the token API until `n` datagrams arrived or 5 s passed.
fn recv_n(link: &mut UdpLink, n: usize) -> Vec<(RxMeta, Vec<u8>)> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut out = Vec::new();
    while out.len() < n && Instant::now() < deadline {
        match link.receive() {
            Some(tok) => {
                let meta = tok.meta();
                out.push((meta, tok.consume(|b| b.to_vec())));
            }
            None => std::thread::sleep(Duration::from_micros(200)),
        }
    }
    out
}

/// Receive through the burst API until `n` datagrams arrived or 5 s passed.
fn recv_burst_n(link: &mut UdpLink, n: usize) -> Vec<(RxMeta, Vec<u8>)> {
    recv_burst_for(link, n, Duration::from_secs(5))
}

/// Receive through the burst API until `n` datagrams arrived or `wait` passed.
fn recv_burst_for(link: &mut UdpLink, n: usize, wait: Duration) -> Vec<(RxMeta, Vec<u8>)> {
    let deadline = Instant::now() + wait;
    let mut out = Vec::new();
    while out.len() < n && Instant::now() < deadline {
        let got = link.receive_burst(n - out.len(), |m, b| out.push((m, b.to_vec())));
        if got == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    out
}

fn msg(tag: &str, i: usize) -> Vec<u8> {
    format!("{tag}-{i:06}").into_bytes()
}

#[test]
fn capabilities_and_addresses() {
    let a = link(DEFAULT_RING);
    let caps = a.capabilities();
    assert_eq!(caps.medium, Medium::Udp);
    assert_eq!(caps.max_burst, DEFAULT_RING);
    // lo's MTU is far above the default cap.
    assert_eq!(caps.mtu, DEFAULT_MAX_PAYLOAD);
    assert_eq!(caps.max_packet(), DEFAULT_MAX_PAYLOAD);
    assert_eq!(*a.local_addr().ip(), Ipv4Addr::LOCALHOST);
    assert_ne!(a.local_addr().port(), 0, "the ephemeral port is exposed");
    assert_eq!(
        a.local_udp_addr(),
        UdpAddr::new(Ipv4Addr::LOCALHOST, a.local_addr().port())
    );
    use std::os::fd::AsRawFd;
    assert!(a.as_raw_fd() >= 0);

    let mut c = config(8);
    c.max_payload = MAX_UDP_PAYLOAD;
    let big = UdpLink::new(c).unwrap();
    assert_eq!(
        big.capabilities().mtu,
        MAX_UDP_PAYLOAD,
        "lo: 65536 - 28, capped"
    );

    let mut c = config(8);
    c.path_mtu = Some(1500);
    assert_eq!(UdpLink::new(c).unwrap().capabilities().mtu, 1472);
}

#[test]
fn bad_configs_are_refused() {
    for (ring, max) in [(0, 1000), (1025, 1000), (8, 0), (8, MAX_UDP_PAYLOAD + 1)] {
        let mut c = config(ring);
        c.max_payload = max;
        let e = UdpLink::new(c).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{ring} {max}");
    }
}

#[test]
fn busy_poll_is_optional() {
    let mut c = config(4);
    c.busy_poll_us = Some(50);
    // Permitted or not, the link is built.
    let l = UdpLink::new(c).unwrap();
    let _ = l.busy_poll();
}

#[test]
fn tokens_both_ways_with_metadata() {
    let (mut a, mut b) = (link(DEFAULT_RING), link(DEFAULT_RING));
    let (aa, ba) = (a.local_udp_addr(), b.local_udp_addr());
    for i in 0..10 {
        assert!(send(&mut a, ba, &msg("a2b", i)));
    }
    assert_eq!(a.pending_tx(), 10, "queued until a flush");
    assert_eq!(a.flush(), 0);
    let got = recv_n(&mut b, 10);
    assert_eq!(got.len(), 10);
    for (i, (meta, data)) in got.iter().enumerate() {
        assert_eq!(data, &msg("a2b", i));
        assert_eq!(meta.src, Some(aa));
        assert_eq!(meta.dst, Some(ba));
    }
    // b answers; its own next receive() flushes the replies.
    for i in 0..10 {
        assert!(send(&mut b, aa, &msg("b2a", i)));
    }
    assert_eq!(b.pending_tx(), 10);
    assert!(b.receive().is_none());
    assert_eq!(b.pending_tx(), 0, "receive() flushed");
    let got = recv_n(&mut a, 10);
    assert_eq!(got.len(), 10);
    for (i, (meta, data)) in got.iter().enumerate() {
        assert_eq!(data, &msg("b2a", i));
        assert_eq!(meta.src, Some(ba));
    }
    let s = a.stats();
    assert_eq!((s.tx_packets, s.rx_packets), (10, 10));
    assert!(s.rx_batches >= 1 && s.rx_batches <= 10);
    assert_eq!(s.tx_batches, 1, "one sendmmsg for the ten");
}

#[test]
fn burst_api_both_ways() {
    let (mut a, mut b) = (link(32), link(32));
    let (aa, ba) = (a.local_udp_addr(), b.local_udp_addr());
    let mut i = 0;
    let n = a.transmit_burst(32, |buf| {
        let m = msg("burst", i);
        buf[..m.len()].copy_from_slice(&m);
        i += 1;
        Some(TxMeta::to(m.len(), ba))
    });
    assert_eq!(n, 32);
    assert_eq!(a.pending_tx(), 0, "a burst is flushed at its end");
    let got = recv_burst_n(&mut b, 32);
    assert_eq!(got.len(), 32);
    for (i, (meta, data)) in got.iter().enumerate() {
        assert_eq!(data, &msg("burst", i));
        assert_eq!(meta.src, Some(aa));
    }
    // A burst that ends early (None) queues only what was written.
    let mut i = 0;
    let n = b.transmit_burst(32, |buf| {
        if i == 5 {
            return None;
        }
        let m = msg("back", i);
        buf[..m.len()].copy_from_slice(&m);
        i += 1;
        Some(TxMeta::to(m.len(), aa))
    });
    assert_eq!(n, 5);
    let got = recv_burst_n(&mut a, 5);
    assert_eq!(got.len(), 5);
    assert!(got.iter().all(|(m, _)| m.src == Some(ba)));
    assert!(
        recv_burst_for(&mut a, 1, Duration::from_millis(100)).is_empty(),
        "nothing more"
    );
}

#[test]
fn more_than_a_ring_before_flush_loses_nothing() {
    // Plain datagrams: with GSO and GRO the 40 equal-size ones would share buffers.
    let plain = || {
        let mut c = config(16);
        c.gso = false;
        c.gro = false;
        UdpLink::new(c).unwrap()
    };
    let (mut a, mut b) = (plain(), plain());
    let ba = b.local_udp_addr();
    for i in 0..40 {
        assert!(send(&mut a, ba, &msg("ring", i)), "slot {i}");
    }
    // Two full rings went out as the ring filled; the last 8 wait for a flush.
    assert_eq!(a.pending_tx(), 8);
    assert_eq!(a.stats().tx_batches, 2);
    assert_eq!(KernelLink::flush(&mut a), 0);
    let got = recv_n(&mut b, 40);
    let want: Vec<Vec<u8>> = (0..40).map(|i| msg("ring", i)).collect();
    let data: Vec<Vec<u8>> = got.into_iter().map(|(_, d)| d).collect();
    assert_eq!(data, want);
    assert_eq!(b.stats().rx_packets, 40);
    assert!(
        b.stats().rx_batches >= 3,
        "a ring of 16 needs several recvmmsg"
    );
}

#[test]
fn dropping_a_link_flushes_it() {
    let mut b = link(8);
    let ba = b.local_udp_addr();
    {
        let mut a = link(8);
        for i in 0..5 {
            assert!(send(&mut a, ba, &msg("drop", i)));
        }
        assert_eq!(a.pending_tx(), 5);
    }
    assert_eq!(recv_n(&mut b, 5).len(), 5);
}

#[test]
fn oversize_transmit_is_refused() {
    let (mut a, mut b) = (link(8), link(8));
    let ba = b.local_udp_addr();
    let mtu = a.capabilities().mtu;
    // Asking for more than the MTU lends only the MTU; claiming more sends nothing.
    let tok = a.transmit().unwrap();
    let lent = tok.consume_with(mtu + 100, |buf| (TxMeta::to(mtu + 1, ba), buf.len()));
    assert_eq!(lent, mtu);
    assert_eq!(a.pending_tx(), 0);
    assert_eq!(a.stats().tx_refused, 1);
    // No destination: refused too (an unconnected socket needs one).
    let tok = a.transmit().unwrap();
    tok.consume_with(10, |_| (TxMeta::len(10), ()));
    assert_eq!(a.stats().tx_refused, 2);
    // Exactly the MTU goes through.
    let big = vec![0xab; mtu];
    assert!(send(&mut a, ba, &big));
    a.flush();
    let got = recv_n(&mut b, 1);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, big);
    assert_eq!(a.stats().tx_errors, 0);
}

#[test]
fn datagrams_longer_than_a_slot_are_dropped_and_counted() {
    let mut a = link(8);
    let mut c = config(8);
    c.max_payload = 512;
    let mut b = UdpLink::new(c).unwrap();
    let ba = b.local_udp_addr();
    assert!(send(&mut a, ba, &[1; 1000]));
    assert!(send(&mut a, ba, &[2; 512]));
    a.flush();
    let got = recv_n(&mut b, 1);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, vec![2; 512]);
    assert_eq!(b.stats().rx_truncated, 1);
}

/// The idle poll receives one datagram with `recvfrom`: a datagram longer than a slot
/// is dropped and counted there too, and one that fits keeps its source address.
#[test]
fn an_idle_poll_drops_and_counts_a_datagram_longer_than_a_slot() {
    let mut c = config(8);
    c.max_payload = 512;
    let mut b = UdpLink::new(c).unwrap();
    let ba = b.local_addr();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    // Idle: the next poll is a one-datagram receive.
    assert!(b.receive().is_none());
    let calls = b.stats().rx_calls;
    sock.send_to(&[1; 1000], ba).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    assert!(
        b.receive().is_none(),
        "a truncated datagram is not delivered"
    );
    assert_eq!(b.stats().rx_calls, calls + 1, "one call");
    assert_eq!(b.stats().rx_truncated, 1);
    // Idle again, then a datagram that fits.
    assert!(b.receive().is_none());
    assert!(b.receive().is_none());
    sock.send_to(&[2; 512], ba).unwrap();
    let got = recv_n(&mut b, 1);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, vec![2; 512]);
    let src = match sock.local_addr().unwrap() {
        std::net::SocketAddr::V4(a) => UdpAddr::new(*a.ip(), a.port()),
        other => panic!("not IPv4: {other}"),
    };
    assert_eq!(got[0].0.src, Some(src));
    assert_eq!(b.stats().rx_truncated, 1);
}

#[test]
fn send_errors_do_not_wedge_the_link() {
    let (mut a, mut b) = (link(8), link(8));
    let ba = b.local_udp_addr();
    // A port nobody listens on (ICMP port unreachable comes back).
    let closed = {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.local_addr().unwrap().port()
    };
    let closed = UdpAddr::new(Ipv4Addr::LOCALHOST, closed);
    let port0 = UdpAddr::new(Ipv4Addr::LOCALHOST, 0); // the kernel refuses: EINVAL
    let plan = [
        (ba, "ok-0"),
        (closed, "x"),
        (ba, "ok-1"),
        (port0, "bad"),
        (ba, "ok-2"),
        (closed, "x"),
        (port0, "bad"),
        (port0, "bad"),
        (ba, "ok-3"),
    ];
    for round in 0..3 {
        for (dst, m) in plan {
            assert!(send(&mut a, dst, m.as_bytes()));
        }
        assert_eq!(a.flush(), 0, "round {round}: nothing stuck");
        let got = recv_n(&mut b, 4);
        let data: Vec<&[u8]> = got.iter().map(|(_, d)| d.as_slice()).collect();
        assert_eq!(
            data,
            [&b"ok-0"[..], b"ok-1", b"ok-2", b"ok-3"],
            "round {round}"
        );
    }
    let s = a.stats();
    assert_eq!(
        s.tx_dropped, 9,
        "each port-0 datagram given up, nothing else"
    );
    assert!(s.tx_errors >= 9, "{s:?}");
    assert_eq!(s.last_errno, libc::EINVAL);
    assert_eq!(s.tx_packets, 3 * 6);
    // The link keeps working in both directions.
    assert!(send(&mut b, a.local_udp_addr(), b"still"));
    b.flush();
    assert_eq!(recv_n(&mut a, 1).len(), 1);
}

/// A burst writer of sequence-numbered datagrams of `payload` bytes.
fn writer(
    next: &mut usize,
    dst: UdpAddr,
    payload: usize,
) -> impl FnMut(&mut [u8]) -> Option<TxMeta> + '_ {
    move |buf: &mut [u8]| {
        let seq = *next as u64;
        buf[..8].copy_from_slice(&seq.to_be_bytes());
        buf[8..payload].fill(seq as u8);
        *next += 1;
        Some(TxMeta::to(payload, dst))
    }
}

#[test]
fn large_bursts_both_ways() {
    const ROUNDS: usize = 200;
    const RING: usize = 64;
    let (mut a, mut b) = (link(RING), link(RING));
    let (aa, ba) = (a.local_udp_addr(), b.local_udp_addr());
    let payload = 1200;
    let (mut a_next, mut b_next) = (0usize, 0usize);
    let (mut a_got, mut b_got) = (0usize, 0usize);
    let check = |expect: &mut usize, data: &[u8]| {
        let seq = u64::from_be_bytes(data[..8].try_into().unwrap());
        assert_eq!(seq as usize, *expect, "in order, nothing lost");
        assert_eq!(data.len(), payload);
        assert!(data[8..].iter().all(|&x| x == seq as u8));
        *expect += 1;
    };
    for _ in 0..ROUNDS {
        assert_eq!(
            a.transmit_burst(RING, writer(&mut a_next, ba, payload)),
            RING
        );
        assert_eq!(
            b.transmit_burst(RING, writer(&mut b_next, aa, payload)),
            RING
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        while (a_got < b_next || b_got < a_next) && Instant::now() < deadline {
            a.receive_burst(usize::MAX, |m, d| {
                assert_eq!(m.src, Some(ba));
                check(&mut a_got, d);
            });
            b.receive_burst(usize::MAX, |m, d| {
                assert_eq!(m.src, Some(aa));
                check(&mut b_got, d);
            });
        }
    }
    assert_eq!((a_got, b_got), (ROUNDS * RING, ROUNDS * RING));
    let s = a.stats();
    assert_eq!(s.tx_packets, (ROUNDS * RING) as u64);
    assert!(s.tx_batches <= (ROUNDS * 2) as u64, "batched: {s:?}");
    assert!(s.rx_batches < s.rx_packets, "batched: {s:?}");
}

/// The receive ring builds its `recvmmsg` headers once and afterwards restores only
/// what each call rewrote: batch after batch of different sizes from alternating
/// senders must still report every datagram's own length and source.
#[test]
fn reused_receive_headers_report_each_source_and_length() {
    let mut b = link(8);
    let ba = b.local_udp_addr();
    let senders: Vec<UdpSocket> = (0..3)
        .map(|_| UdpSocket::bind("127.0.0.1:0").expect("bind"))
        .collect();
    let to = SocketAddrV4::new(Ipv4Addr::LOCALHOST, ba.port);
    for round in 0..40usize {
        // 1..=11 datagrams: sometimes less than a ring, sometimes more.
        let n = round % 11 + 1;
        let mut want = Vec::new();
        for i in 0..n {
            let s = &senders[(round + i) % senders.len()];
            let data = vec![(round * 16 + i) as u8; 1 + (round * 37 + i * 101) % 900];
            s.send_to(&data, to).expect("send_to");
            let src = match s.local_addr().expect("local addr") {
                std::net::SocketAddr::V4(a) => UdpAddr::new(*a.ip(), a.port()),
                other => panic!("not IPv4: {other}"),
            };
            want.push((src, data));
        }
        let got = recv_n(&mut b, n);
        assert_eq!(got.len(), n, "round {round}");
        for ((meta, data), (src, sent)) in got.iter().zip(&want) {
            assert_eq!(meta.src, Some(*src), "round {round}");
            assert_eq!(data, sent, "round {round}");
        }
    }
    assert_eq!(b.stats().rx_truncated, 0);
}

/// A busy-poll pass that receives must not make a second, empty system call before its
/// completions become visible: a refill that left the socket empty answers the next
/// `receive` with "nothing" at once; the call after that asks the kernel again. Idle
/// polls use one-datagram receives, and a burst arriving after them is not lost.
#[test]
fn receive_skips_the_empty_call_after_a_partial_refill_and_loses_nothing() {
    let mut rx = link(8);
    let dst = rx.local_addr();
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    let calls = |l: &UdpLink| l.stats().rx_calls;

    // Idle: each poll is one call.
    assert!(rx.receive().is_none());
    assert!(rx.receive().is_none());
    assert_eq!(calls(&rx), 2);

    // One datagram, waited for by polling (bounded).
    sock.send_to(b"one", dst).unwrap();
    let got = recv_n(&mut rx, 1);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1, b"one");
    let after = calls(&rx);
    // The refill that found it left the socket empty: no call now ...
    assert!(rx.receive().is_none());
    assert_eq!(calls(&rx), after);
    // ... and the next poll asks the kernel again.
    assert!(rx.receive().is_none());
    assert_eq!(calls(&rx), after + 1);

    // A burst larger than the ring after idle polls: everything arrives, in order,
    // over a few bursts, each burst a bounded number of calls.
    for i in 0..20 {
        sock.send_to(&msg("b", i), dst).unwrap();
    }
    std::thread::sleep(Duration::from_millis(20));
    let mut out = Vec::new();
    for _ in 0..8 {
        let before = calls(&rx);
        rx.receive_burst(usize::MAX, |_, b| out.push(b.to_vec()));
        assert!(calls(&rx) - before <= 4, "one burst made too many calls");
        if out.len() == 20 {
            break;
        }
    }
    let want: Vec<_> = (0..20).map(|i| msg("b", i)).collect();
    assert_eq!(out, want);
}

/// A datagram like a wire header whose destination endpoint id (bytes 10..12) is
/// `ep_id`, with `tag` after the header.
fn to_endpoint(ep_id: u16, tag: u8) -> Vec<u8> {
    let mut d = vec![0u8; 33];
    d[..2].copy_from_slice(b"ON");
    d[10..12].copy_from_slice(&ep_id.to_be_bytes());
    d[32] = tag;
    d
}

/// `UdpLink::queues`: three sockets on one address; a datagram for context `k` of an
/// endpoint (its index in bits 10..16 of the destination id) lands on queue `k % 3`,
/// one that names no context (or is too short to carry an id) on queue 0; each queue
/// can send. Bad queue counts are refused.
#[test]
fn queues_steer_by_the_context_index() {
    let mut qs = UdpLink::queues(config(16), 3).expect("three SO_REUSEPORT sockets");
    let addr = qs[0].local_addr();
    assert_ne!(addr.port(), 0);
    assert!(qs.iter().all(|q| q.local_addr() == addr), "one address");
    let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
    // (context index, base id) -> the queue it must reach.
    let cases: [(u16, u16, usize); 6] = [
        (0, 7, 0),
        (1, 7, 1),
        (2, 7, 2),
        (3, 7, 0),
        (5, 1, 2),
        (63, 0, 0),
    ];
    for (i, &(ctx, base, _)) in cases.iter().enumerate() {
        let id = base | (ctx << wire::packet::EP_CTX_SHIFT);
        peer.send_to(&to_endpoint(id, i as u8), addr).unwrap();
    }
    peer.send_to(b"short", addr).unwrap();
    let mut want: [Vec<u8>; 3] = Default::default();
    for (i, &(_, _, q)) in cases.iter().enumerate() {
        want[q].push(i as u8);
    }
    want[0].push(b's');
    for (q, link) in qs.iter_mut().enumerate() {
        let got: Vec<u8> = recv_n(link, want[q].len())
            .into_iter()
            .map(|(_, d)| if d.len() == 33 { d[32] } else { d[0] })
            .collect();
        assert_eq!(got, want[q], "queue {q}");
        assert!(
            recv_burst_for(link, 1, Duration::from_millis(50)).is_empty(),
            "queue {q}: nothing else"
        );
    }
    // Every queue sends from the shared address.
    let to = UdpAddr::new(Ipv4Addr::LOCALHOST, peer.local_addr().unwrap().port());
    peer.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for (q, link) in qs.iter_mut().enumerate() {
        assert!(send(link, to, &[q as u8]));
        link.flush();
        let mut b = [0u8; 8];
        let (n, from) = peer.recv_from(&mut b).unwrap();
        assert_eq!(
            (n, b[0], from),
            (1, q as u8, std::net::SocketAddr::V4(addr))
        );
    }
    assert!(UdpLink::queues(config(16), 0).is_err());
    assert!(UdpLink::queues(config(16), 65).is_err());
}

/// A second group never joins the first: its founder binds before it sets
/// SO_REUSEPORT, so the address of a live group is in use to it (the first group keeps
/// all of its traffic), and the group still forms for its own queues.
#[test]
fn queues_of_another_group_cannot_take_its_address() {
    let first = UdpLink::queues(config(16), 2).expect("a group of two");
    let mut taken = config(16);
    taken.bind = first[0].local_addr();
    let e = UdpLink::queues(taken, 2).expect_err("the address is in use");
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse, "{e}");
    let second = UdpLink::queues(config(16), 2).expect("a group on another port");
    assert_ne!(second[0].local_addr(), first[0].local_addr());
    assert_eq!(second[0].local_addr(), second[1].local_addr());
}
