//! The network layer end to end: ARP resolution and policy, receive checks, checksum
//! offload, send errors, the gateway, the loopback queue and random input.

extern crate std;

use std::boxed::Box;
use std::vec;
use std::vec::Vec;

use proptest::prelude::*;
use wire::frame::{
    self, ARP_FRAME_LEN, ArpMessage, ArpOperation, ETH_IPV4_UDP_HEADER_LEN, EthernetAddress,
    Ipv4Address, UdpFrameRepr,
};
use wire::link::{Capabilities, Link, Loopback, Medium, RxMeta, RxToken, UdpAddr};

use super::*;

type Eth = Loopback<8, 1514>;
type Cache = [ArpEntry; 4];

const MAC_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];
const MAC_B: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0b];
const MAC_C: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0c];
const IP_A: [u8; 4] = [10, 0, 0, 1];
const IP_B: [u8; 4] = [10, 0, 0, 2];
const IP_C: [u8; 4] = [10, 0, 0, 3];
const PORT: u16 = 7000;

fn addr(ip: [u8; 4], port: u16) -> UdpAddr {
    UdpAddr::new(Ipv4Address::from(ip), port)
}

fn t(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

fn eth_cfg(ip: [u8; 4], mac: [u8; 6]) -> NetConfig {
    NetConfig::new(&Capabilities::new(Medium::Ethernet, 1514), ip, PORT)
        .with_ethernet(mac, 24, None)
}

fn eth_net(ip: [u8; 4], mac: [u8; 6]) -> Net<Cache> {
    Net::new(eth_cfg(ip, mac), [ArpEntry::EMPTY; 4]).unwrap()
}

fn link() -> Box<Eth> {
    Box::new(Eth::new(Medium::Ethernet, None))
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Got {
    Packet(UdpAddr, Vec<u8>),
    Consumed,
    Dropped(DropReason),
}

fn own(o: RxOutcome<'_>) -> Got {
    match o {
        RxOutcome::Packet { src, payload } => Got::Packet(src, payload.to_vec()),
        RxOutcome::Consumed => Got::Consumed,
        RxOutcome::Dropped(r) => Got::Dropped(r),
    }
}

fn feed<A: AsRef<[ArpEntry]> + AsMut<[ArpEntry]>>(
    net: &mut Net<A>,
    now: Instant,
    bytes: &[u8],
) -> Got {
    own(net.rx(now, RxMeta::default(), bytes))
}

/// Receive everything waiting on `link` through `net`.
fn pump<A: AsRef<[ArpEntry]> + AsMut<[ArpEntry]>, const N: usize, const M: usize>(
    net: &mut Net<A>,
    link: &mut Loopback<N, M>,
    now: Instant,
) -> Vec<Got> {
    let mut out = Vec::new();
    while let Some(tok) = link.receive() {
        let meta = tok.meta();
        out.push(tok.consume(|buf| own(net.rx(now, meta, buf))));
    }
    out
}

fn send<A: AsRef<[ArpEntry]> + AsMut<[ArpEntry]>, B: AsRef<[u8]> + AsMut<[u8]>, L: Link>(
    net: &mut Net<A, B>,
    now: Instant,
    link: &mut L,
    dst: UdpAddr,
    data: &[u8],
) -> Result<SendOutcome> {
    net.send(now, link, dst, data.len(), |b| {
        b[..data.len()].copy_from_slice(data);
        data.len()
    })
}

fn pop<const N: usize, const M: usize>(
    link: &mut Loopback<N, M>,
) -> Option<(Option<UdpAddr>, Vec<u8>)> {
    link.pop_tx(|a, d| (a, d.to_vec()))
}

fn udp_frame(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: UdpAddr,
    dst: UdpAddr,
    payload: &[u8],
) -> Vec<u8> {
    let mut buf = vec![0u8; ETH_IPV4_UDP_HEADER_LEN + payload.len()];
    let repr = UdpFrameRepr {
        src_mac: EthernetAddress(src_mac),
        dst_mac: EthernetAddress(dst_mac),
        src,
        dst,
        ttl: 64,
    };
    let caps = Capabilities::new(Medium::Ethernet, 1514).checksum_caps();
    let n = frame::emit_udp_ipv4_ethernet(&mut buf, &repr, payload, &caps).unwrap();
    assert_eq!(n, buf.len());
    buf
}

fn arp_request(sender_mac: [u8; 6], sender_ip: [u8; 4], target_ip: [u8; 4]) -> Vec<u8> {
    let mut buf = vec![0u8; ARP_FRAME_LEN];
    frame::emit_arp_request(
        &mut buf,
        EthernetAddress(sender_mac),
        Ipv4Address::from(sender_ip),
        Ipv4Address::from(target_ip),
    )
    .unwrap();
    buf
}

/// An ARP reply from `sender` to `to` (unicast to `to_mac`).
fn arp_reply(sender_mac: [u8; 6], sender_ip: [u8; 4], to_mac: [u8; 6], to_ip: [u8; 4]) -> Vec<u8> {
    let mut buf = vec![0u8; ARP_FRAME_LEN];
    let req = ArpMessage {
        operation: ArpOperation::Request,
        sender_mac: EthernetAddress(to_mac),
        sender_ip: Ipv4Address::from(to_ip),
        target_mac: EthernetAddress([0; 6]),
        target_ip: Ipv4Address::from(sender_ip),
    };
    frame::emit_arp_reply(
        &mut buf,
        EthernetAddress(sender_mac),
        Ipv4Address::from(sender_ip),
        &req,
    )
    .unwrap();
    buf
}

/// Bring A and B (on links `la`, `lb`) to a state where A knows B's MAC.
fn resolve_a_to_b(
    a: &mut Net<Cache>,
    la: &mut Eth,
    b: &mut Net<Cache>,
    lb: &mut Eth,
    now: Instant,
) {
    assert_eq!(
        send(a, now, la, addr(IP_B, PORT), b"x"),
        Ok(SendOutcome::ArpPending)
    );
    la.transfer_to(lb);
    assert_eq!(pump(b, lb, now), vec![Got::Consumed]);
    assert_eq!(b.poll_tx(now, lb), 1);
    lb.transfer_to(la);
    assert_eq!(pump(a, la, now), vec![Got::Consumed]);
}

#[test]
fn arp_resolution_then_udp_exchange_over_ethernet() {
    let (mut a, mut b) = (eth_net(IP_A, MAC_A), eth_net(IP_B, MAC_B));
    let (mut la, mut lb) = (link(), link());
    let now = t(1);

    // Unknown next hop: a broadcast ARP request goes out, the packet stays with us.
    let mut called = false;
    let r = a.send(now, &mut *la, addr(IP_B, PORT), 4, |_| {
        called = true;
        4
    });
    assert_eq!(r, Ok(SendOutcome::ArpPending));
    assert!(!called, "the writer runs only when the packet is sent");
    let (_, req) = pop(&mut la).unwrap();
    assert_eq!(req, arp_request(MAC_A, IP_A, IP_B));
    assert_eq!(&req[..6], &[0xff; 6]);
    // Our own request looped back is ignored (not a conflict).
    assert!(la.inject(&req, None));
    assert_eq!(
        pump(&mut a, &mut la, now),
        vec![Got::Dropped(DropReason::ArpNotForUs)]
    );
    assert!(lb.inject(&req, None));

    // B answers through its queue and learns A from the request.
    assert_eq!(pump(&mut b, &mut lb, now), vec![Got::Consumed]);
    assert!(b.has_pending_tx());
    assert_eq!(b.arp_lookup(now, IP_A), Some(MAC_A));
    assert_eq!(lb.tx_len(), 0);
    assert_eq!(b.poll_tx(now, &mut *lb), 1);
    assert!(!b.has_pending_tx());
    assert_eq!(b.stats().arp_replies_sent, 1);
    lb.transfer_to(&mut *la);
    assert_eq!(pump(&mut a, &mut la, now), vec![Got::Consumed]);
    assert_eq!(a.arp_lookup(now, IP_B), Some(MAC_B));

    // Now the datagram goes out and arrives with A's address.
    assert_eq!(
        send(&mut a, now, &mut *la, addr(IP_B, PORT), b"hello"),
        Ok(SendOutcome::Sent { len: 5 })
    );
    let (meta_dst, frame_bytes) = pop(&mut la).unwrap();
    assert_eq!(meta_dst, None);
    assert_eq!(
        frame_bytes,
        udp_frame(MAC_A, MAC_B, addr(IP_A, PORT), addr(IP_B, PORT), b"hello")
    );
    lb.inject(&frame_bytes, None);
    assert_eq!(
        pump(&mut b, &mut lb, now),
        vec![Got::Packet(addr(IP_A, PORT), b"hello".to_vec())]
    );

    // B learned A from the request: it answers without ARP.
    assert_eq!(
        send(&mut b, now, &mut *lb, addr(IP_A, PORT), b"world"),
        Ok(SendOutcome::Sent { len: 5 })
    );
    lb.transfer_to(&mut *la);
    assert_eq!(
        pump(&mut a, &mut la, now),
        vec![Got::Packet(addr(IP_B, PORT), b"world".to_vec())]
    );

    assert_eq!(a.stats().arp_requests_sent, 1);
    assert_eq!(a.stats().tx_arp_pending, 1);
    assert_eq!(a.stats().tx_packets, 1);
    assert_eq!(a.stats().rx_packets, 1);
    assert_eq!(a.stats().rx_arp, 1);
    assert_eq!(a.stats().dropped(DropReason::ArpNotForUs), 1);
    assert_eq!(b.stats().arp_requests_sent, 0);
    assert_eq!(b.stats().rx_packets, 1);
}

#[test]
fn arp_requests_are_rate_limited_per_destination() {
    let mut a = eth_net(IP_A, MAC_A);
    let mut la = link();
    let b = addr(IP_B, PORT);
    assert_eq!(
        send(&mut a, t(0), &mut *la, b, b"x"),
        Ok(SendOutcome::ArpPending)
    );
    assert_eq!(
        send(&mut a, t(50), &mut *la, b, b"x"),
        Ok(SendOutcome::ArpPending)
    );
    assert_eq!(la.tx_len(), 1, "second request within 100 ms is suppressed");
    // Another destination has its own limit.
    assert_eq!(
        send(&mut a, t(60), &mut *la, addr(IP_C, PORT), b"x"),
        Ok(SendOutcome::ArpPending)
    );
    assert_eq!(la.tx_len(), 2);
    assert_eq!(
        send(&mut a, t(99), &mut *la, b, b"x"),
        Ok(SendOutcome::ArpPending)
    );
    assert_eq!(la.tx_len(), 2);
    assert_eq!(
        send(&mut a, t(100), &mut *la, b, b"x"),
        Ok(SendOutcome::ArpPending)
    );
    assert_eq!(la.tx_len(), 3);
    assert_eq!(a.stats().arp_requests_sent, 3);
    assert_eq!(a.stats().tx_arp_pending, 5);

    // A configurable interval.
    let mut cfg = eth_cfg(IP_A, MAC_A);
    cfg.arp_request_interval = Duration::from_millis(10);
    let mut a = Net::new(cfg, [ArpEntry::EMPTY; 2]).unwrap();
    let mut la = link();
    send(&mut a, t(0), &mut *la, b, b"x").unwrap();
    send(&mut a, t(9), &mut *la, b, b"x").unwrap();
    send(&mut a, t(10), &mut *la, b, b"x").unwrap();
    assert_eq!(la.tx_len(), 2);
}

#[test]
fn a_next_hop_that_never_answers_fails_for_a_while_then_is_asked_again() {
    let mut a = eth_net(IP_A, MAC_A);
    let mut la = link();
    let b = addr(IP_B, PORT);
    // Three requests, 100 ms apart, are the resolution's whole budget.
    for ms in [0, 100, 200, 250] {
        assert_eq!(
            send(&mut a, t(ms), &mut *la, b, b"x"),
            Ok(SendOutcome::ArpPending),
            "at {ms} ms"
        );
    }
    assert_eq!(a.stats().arp_requests_sent, 3);
    // One interval after the third request the hop has failed: nothing is sent,
    // and the writer is never called.
    let mut wrote = false;
    assert_eq!(
        a.send(t(300), &mut *la, b, 1, |_| {
            wrote = true;
            1
        }),
        Ok(SendOutcome::ArpFailed)
    );
    assert!(!wrote);
    assert!(
        a.arp_entries()
            .iter()
            .any(|e| e.ip() == Some(IP_B) && e.has_failed())
    );
    // It stays failed, without requests, for as long as the resolution took...
    assert_eq!(
        send(&mut a, t(599), &mut *la, b, b"x"),
        Ok(SendOutcome::ArpFailed)
    );
    assert_eq!(la.tx_len(), 3);
    // ...while another destination resolves as usual.
    assert_eq!(
        send(&mut a, t(400), &mut *la, addr(IP_C, PORT), b"x"),
        Ok(SendOutcome::ArpPending)
    );
    assert_eq!(la.tx_len(), 4);
    // Then the next send asks again, with a fresh budget.
    assert_eq!(
        send(&mut a, t(600), &mut *la, b, b"x"),
        Ok(SendOutcome::ArpPending)
    );
    assert_eq!(la.tx_len(), 5);
    assert_eq!(a.stats().arp_failures, 1);
    assert_eq!(a.stats().tx_arp_failed, 2);
    // A reply resolves it, failed or pending.
    assert_eq!(
        feed(&mut a, t(610), &arp_reply(MAC_B, IP_B, MAC_A, IP_A)),
        Got::Consumed
    );
    assert_eq!(
        send(&mut a, t(620), &mut *la, b, b"x"),
        Ok(SendOutcome::Sent { len: 1 })
    );

    // A reply to a hop that had failed resolves it at once, too.
    let mut a = eth_net(IP_A, MAC_A);
    let mut cfg = eth_cfg(IP_A, MAC_A);
    cfg.arp_max_requests = 1;
    let mut one = Net::new(cfg, [ArpEntry::EMPTY; 4]).unwrap();
    for net in [&mut a, &mut one] {
        let mut l = link();
        let mut ms = 0;
        while send(net, t(ms), &mut *l, b, b"x") == Ok(SendOutcome::ArpPending) {
            ms += 50;
            assert!(ms <= 1_000, "never failed");
        }
        assert_eq!(
            send(net, t(ms), &mut *l, b, b"x"),
            Ok(SendOutcome::ArpFailed)
        );
        assert_eq!(
            feed(net, t(ms), &arp_reply(MAC_B, IP_B, MAC_A, IP_A)),
            Got::Consumed
        );
        assert_eq!(
            send(net, t(ms), &mut *l, b, b"x"),
            Ok(SendOutcome::Sent { len: 1 })
        );
    }
    assert_eq!(a.stats().arp_requests_sent, 3);
    assert_eq!(one.stats().arp_requests_sent, 1);

    // Without an interval (no rate limit, no hold) the send that finds the failure
    // still fails, and the next one asks again.
    let mut cfg = eth_cfg(IP_A, MAC_A);
    cfg.arp_request_interval = Duration::ZERO;
    let mut z = Net::new(cfg, [ArpEntry::EMPTY; 4]).unwrap();
    let mut l = link();
    for _ in 0..3 {
        assert_eq!(
            send(&mut z, t(0), &mut *l, b, b"x"),
            Ok(SendOutcome::ArpPending)
        );
    }
    assert_eq!(
        send(&mut z, t(0), &mut *l, b, b"x"),
        Ok(SendOutcome::ArpFailed)
    );
    assert_eq!(
        send(&mut z, t(0), &mut *l, b, b"x"),
        Ok(SendOutcome::ArpPending)
    );
    assert_eq!(z.stats().arp_requests_sent, 4);
}

#[test]
fn arp_entries_expire_and_active_ones_are_refreshed() {
    let (mut a, mut b) = (eth_net(IP_A, MAC_A), eth_net(IP_B, MAC_B));
    let (mut la, mut lb) = (link(), link());
    resolve_a_to_b(&mut a, &mut la, &mut b, &mut lb, t(0));
    let dst = addr(IP_B, PORT);

    // Before half the timeout: plain sends, no ARP.
    assert_eq!(
        send(&mut a, t(29_999), &mut *la, dst, b"x"),
        Ok(SendOutcome::Sent { len: 1 })
    );
    assert!(!a.has_pending_tx());
    // From half the timeout: still sent, and a unicast refresh request is queued once.
    assert_eq!(
        send(&mut a, t(30_000), &mut *la, dst, b"x"),
        Ok(SendOutcome::Sent { len: 1 })
    );
    assert_eq!(
        send(&mut a, t(30_001), &mut *la, dst, b"x"),
        Ok(SendOutcome::Sent { len: 1 })
    );
    assert!(a.has_pending_tx());
    while pop(&mut la).is_some() {}
    assert_eq!(a.poll_tx(t(30_001), &mut *la), 1);
    let (_, refresh) = pop(&mut la).unwrap();
    let mut expect = arp_request(MAC_A, IP_A, IP_B);
    expect[..6].copy_from_slice(&MAC_B);
    assert_eq!(refresh, expect);
    // B answers (unicast request for its IP), which re-confirms the entry.
    lb.inject(&refresh, None);
    assert_eq!(pump(&mut b, &mut lb, t(30_002)), vec![Got::Consumed]);
    b.poll_tx(t(30_002), &mut *lb);
    lb.transfer_to(&mut *la);
    assert_eq!(pump(&mut a, &mut la, t(30_003)), vec![Got::Consumed]);
    assert_eq!(a.arp_lookup(t(89_999), IP_B), Some(MAC_B));
    assert_eq!(
        a.arp_lookup(t(90_003), IP_B),
        None,
        "expired 60 s after confirmation"
    );

    // An expired entry is resolved afresh: the packet waits for ARP again.
    assert_eq!(
        send(&mut a, t(90_003), &mut *la, dst, b"x"),
        Ok(SendOutcome::ArpPending)
    );
    let (_, req) = pop(&mut la).unwrap();
    assert_eq!(req, arp_request(MAC_A, IP_A, IP_B));

    // A configurable timeout.
    let mut cfg = eth_cfg(IP_A, MAC_A);
    cfg.arp_timeout = Duration::from_secs(1);
    let mut a = Net::new(cfg, [ArpEntry::EMPTY; 2]).unwrap();
    assert_eq!(
        feed(&mut a, t(0), &arp_request(MAC_B, IP_B, IP_A)),
        Got::Consumed
    );
    assert_eq!(a.arp_lookup(t(999), IP_B), Some(MAC_B));
    assert_eq!(a.arp_lookup(t(1000), IP_B), None);
}

#[test]
fn full_cache_replaces_free_then_expired_then_least_recently_used() {
    let mut a = Net::new(eth_cfg(IP_A, MAC_A), [ArpEntry::EMPTY; 2]).unwrap();
    let ip = |n: u8| [10, 0, 0, n];
    let mac = |n: u8| [0x02, 0, 0, 0, 1, n];
    // Learn .10 then .11 from their requests.
    assert_eq!(
        feed(&mut a, t(0), &arp_request(mac(10), ip(10), IP_A)),
        Got::Consumed
    );
    assert_eq!(
        feed(&mut a, t(1), &arp_request(mac(11), ip(11), IP_A)),
        Got::Consumed
    );
    // Use .10, so .11 is the least recently used.
    let mut la = link();
    assert_eq!(
        send(&mut a, t(2), &mut *la, addr(ip(10), 1), b"x"),
        Ok(SendOutcome::Sent { len: 1 })
    );
    assert_eq!(
        feed(&mut a, t(3), &arp_request(mac(12), ip(12), IP_A)),
        Got::Consumed
    );
    assert_eq!(a.arp_lookup(t(3), ip(10)), Some(mac(10)));
    assert_eq!(a.arp_lookup(t(3), ip(11)), None);
    assert_eq!(a.arp_lookup(t(3), ip(12)), Some(mac(12)));
    assert_eq!(a.stats().arp_evictions, 1);

    // An expired entry goes before a live one, even a less recently used one: .10
    // is used last but expires at 60 s; .12 is used least but re-confirmed.
    assert_eq!(
        send(&mut a, t(50_000), &mut *la, addr(ip(10), 1), b"x"),
        Ok(SendOutcome::Sent { len: 1 })
    );
    assert_eq!(
        feed(&mut a, t(59_000), &arp_reply(mac(12), ip(12), MAC_A, IP_A)),
        Got::Consumed
    );
    assert_eq!(
        feed(&mut a, t(60_002), &arp_request(mac(13), ip(13), IP_A)),
        Got::Consumed
    );
    assert_eq!(a.arp_lookup(t(60_002), ip(12)), Some(mac(12)));
    assert_eq!(a.arp_lookup(t(60_002), ip(13)), Some(mac(13)));
    assert!(a.arp_entries().iter().all(|e| e.ip() != Some(ip(10))));
    assert_eq!(a.arp_entries().iter().filter_map(ArpEntry::ip).count(), 2);
    assert_eq!(a.stats().arp_evictions, 1);

    // Flushing frees everything.
    a.arp_flush();
    assert!(a.arp_entries().iter().all(|e| e.ip().is_none()));
}

#[test]
fn arp_policy_unsolicited_gratuitous_and_conflicts() {
    let mut a = eth_net(IP_A, MAC_A);
    let mut la = link();
    // An unsolicited reply about an IP we never asked about creates nothing.
    assert_eq!(
        feed(&mut a, t(0), &arp_reply(MAC_C, IP_C, MAC_A, IP_A)),
        Got::Dropped(DropReason::ArpUnsolicited)
    );
    assert_eq!(a.arp_lookup(t(0), IP_C), None);
    // A request for another host: not answered, sender not learned.
    assert_eq!(
        feed(&mut a, t(0), &arp_request(MAC_C, IP_C, IP_B)),
        Got::Dropped(DropReason::ArpNotForUs)
    );
    assert_eq!(a.arp_lookup(t(0), IP_C), None);
    assert!(!a.has_pending_tx());
    // A gratuitous announcement for an unknown IP is ignored too.
    assert_eq!(
        feed(&mut a, t(0), &arp_request(MAC_C, IP_C, IP_C)),
        Got::Dropped(DropReason::ArpNotForUs)
    );

    // After we asked about C, its reply resolves the entry.
    assert_eq!(
        send(&mut a, t(0), &mut *la, addr(IP_C, PORT), b"x"),
        Ok(SendOutcome::ArpPending)
    );
    assert!(
        a.arp_entries()
            .iter()
            .any(|e| e.ip() == Some(IP_C) && e.is_pending())
    );
    assert_eq!(
        feed(&mut a, t(1), &arp_reply(MAC_C, IP_C, MAC_A, IP_A)),
        Got::Consumed
    );
    assert_eq!(a.arp_lookup(t(1), IP_C), Some(MAC_C));
    // A gratuitous announcement (request or broadcast reply) moves a known IP.
    let new_mac = [0x02, 0, 0, 0, 0, 0xcc];
    assert_eq!(
        feed(&mut a, t(2), &arp_request(new_mac, IP_C, IP_C)),
        Got::Consumed
    );
    assert_eq!(a.arp_lookup(t(2), IP_C), Some(new_mac));
    assert_eq!(
        feed(&mut a, t(3), &arp_reply(MAC_C, IP_C, [0xff; 6], IP_C)),
        Got::Consumed
    );
    assert_eq!(a.arp_lookup(t(3), IP_C), Some(MAC_C));

    // Someone else claiming our IP is a conflict and changes nothing.
    assert_eq!(
        feed(&mut a, t(4), &arp_request(MAC_C, IP_A, IP_B)),
        Got::Dropped(DropReason::ArpConflict)
    );
    // Group sender MACs are refused.
    assert_eq!(
        feed(
            &mut a,
            t(4),
            &arp_request([0x01, 0, 0x5e, 0, 0, 1], IP_B, IP_A)
        ),
        Got::Dropped(DropReason::BadSource)
    );
    // ARP unicast to another MAC is not for us.
    let mut to_other = arp_reply(MAC_C, IP_C, MAC_B, IP_A);
    assert_eq!(
        feed(&mut a, t(4), &to_other),
        Got::Dropped(DropReason::NotForUs)
    );
    // Off-subnet senders are answered but not learned.
    to_other = arp_request([0x02, 9, 9, 9, 9, 9], [192, 168, 1, 1], IP_A);
    assert_eq!(feed(&mut a, t(4), &to_other), Got::Consumed);
    assert_eq!(a.arp_lookup(t(4), [192, 168, 1, 1]), None);
    // RFC 5227 probe for our address (sender 0.0.0.0): defended, nothing learned.
    let probe = arp_request(MAC_C, [0, 0, 0, 0], IP_A);
    assert_eq!(feed(&mut a, t(5), &probe), Got::Consumed);
    assert_eq!(a.poll_tx(t(5), &mut *la), 2);
    pop(&mut la); // the ARP request for C
    pop(&mut la); // the reply to 192.168.1.1
    let (_, defend) = pop(&mut la).unwrap();
    let parsed = frame::parse_arp(&defend).unwrap();
    assert_eq!(parsed.operation, ArpOperation::Reply);
    assert_eq!(parsed.sender_ip, Ipv4Address::from(IP_A));
    assert_eq!(parsed.sender_mac, EthernetAddress(MAC_A));
    assert_eq!(&defend[..6], &MAC_C);
    assert_eq!(a.stats().arp_replies_sent, 2);
}

#[test]
fn arp_reply_queue_is_bounded_and_waits_for_tx_slots() {
    let mut a = eth_net(IP_A, MAC_A);
    for n in 0..(ARP_TX_QUEUE_LEN as u8 + 2) {
        let req = arp_request([0x02, 0, 0, 0, 2, n], [10, 0, 0, 100 + n], IP_A);
        assert_eq!(feed(&mut a, t(0), &req), Got::Consumed);
    }
    assert_eq!(a.stats().arp_tx_dropped, 2);
    let mut small = Box::new(Loopback::<2, 1514>::new(Medium::Ethernet, None));
    assert_eq!(a.poll_tx(t(0), &mut *small), 2);
    assert!(a.has_pending_tx());
    small.pop_tx(|_, _| ());
    assert_eq!(a.poll_tx(t(0), &mut *small), 1);
    small.pop_tx(|_, _| ());
    small.pop_tx(|_, _| ());
    assert_eq!(a.poll_tx(t(0), &mut *small), 1);
    assert!(!a.has_pending_tx());
    assert_eq!(a.stats().arp_replies_sent, ARP_TX_QUEUE_LEN as u64);
}

#[test]
fn receive_checks_are_counted() {
    let mut b = eth_net(IP_B, MAC_B);
    let (src, dst) = (addr(IP_A, 5000), addr(IP_B, PORT));
    let good = udp_frame(MAC_A, MAC_B, src, dst, b"payload");
    assert_eq!(
        feed(&mut b, t(0), &good),
        Got::Packet(src, b"payload".to_vec())
    );

    // A flipped payload bit fails the UDP checksum.
    let mut bad = good.clone();
    *bad.last_mut().unwrap() ^= 0x40;
    assert_eq!(
        feed(&mut b, t(0), &bad),
        Got::Dropped(DropReason::BadChecksum)
    );
    // So does a zero UDP checksum ("none") on a raw link.
    let mut zero = good.clone();
    zero[40..42].copy_from_slice(&[0, 0]);
    assert_eq!(
        feed(&mut b, t(0), &zero),
        Got::Dropped(DropReason::BadChecksum)
    );
    // And a corrupted IPv4 header.
    let mut hdr = good.clone();
    hdr[22] ^= 1; // TTL
    assert_eq!(
        feed(&mut b, t(0), &hdr),
        Got::Dropped(DropReason::BadChecksum)
    );

    // Not our IP, not our port, not our MAC.
    let other_ip = udp_frame(MAC_A, MAC_B, src, addr(IP_C, PORT), b"p");
    assert_eq!(
        feed(&mut b, t(0), &other_ip),
        Got::Dropped(DropReason::NotForUs)
    );
    let other_port = udp_frame(MAC_A, MAC_B, src, addr(IP_B, PORT + 1), b"p");
    assert_eq!(
        feed(&mut b, t(0), &other_port),
        Got::Dropped(DropReason::WrongPort)
    );
    let other_mac = udp_frame(MAC_A, MAC_C, src, dst, b"p");
    assert_eq!(
        feed(&mut b, t(0), &other_mac),
        Got::Dropped(DropReason::NotForUs)
    );
    let bcast_mac = udp_frame(MAC_A, [0xff; 6], src, dst, b"p");
    assert_eq!(
        feed(&mut b, t(0), &bcast_mac),
        Got::Dropped(DropReason::NotForUs)
    );

    // Sources we could not answer.
    let port0 = udp_frame(MAC_A, MAC_B, addr(IP_A, 0), dst, b"p");
    assert_eq!(
        feed(&mut b, t(0), &port0),
        Got::Dropped(DropReason::BadSource)
    );
    let bcast_src = udp_frame(MAC_A, MAC_B, addr([10, 0, 0, 255], 1), dst, b"p");
    assert_eq!(
        feed(&mut b, t(0), &bcast_src),
        Got::Dropped(DropReason::BadSource)
    );
    let group_mac = udp_frame([0x01, 0, 0x5e, 0, 0, 1], MAC_B, src, dst, b"p");
    assert_eq!(
        feed(&mut b, t(0), &group_mac),
        Got::Dropped(DropReason::BadSource)
    );

    // Truncation and other protocols.
    assert_eq!(
        feed(&mut b, t(0), &good[..13]),
        Got::Dropped(DropReason::Truncated)
    );
    assert_eq!(
        feed(&mut b, t(0), &good[..30]),
        Got::Dropped(DropReason::Truncated)
    );
    assert_eq!(
        feed(&mut b, t(0), &good[..good.len() - 1]),
        Got::Dropped(DropReason::BadLength)
    );
    let mut ipv6 = good.clone();
    ipv6[12..14].copy_from_slice(&[0x86, 0xdd]);
    assert_eq!(
        feed(&mut b, t(0), &ipv6),
        Got::Dropped(DropReason::OtherProtocol)
    );
    let mut tcp = good.clone();
    tcp[23] = 6;
    fix_ipv4_checksum(&mut tcp);
    assert_eq!(
        feed(&mut b, t(0), &tcp),
        Got::Dropped(DropReason::OtherProtocol)
    );
    let mut frag = good.clone();
    frag[20] |= 0x20; // more fragments
    fix_ipv4_checksum(&mut frag);
    assert_eq!(
        feed(&mut b, t(0), &frag),
        Got::Dropped(DropReason::Fragment)
    );
    // Ethernet padding after the datagram is ignored.
    let mut padded = udp_frame(MAC_A, MAC_B, src, dst, b"p");
    padded.resize(60, 0);
    assert_eq!(feed(&mut b, t(0), &padded), Got::Packet(src, b"p".to_vec()));

    let s = b.stats();
    assert_eq!(s.rx_packets, 2);
    assert_eq!(s.dropped(DropReason::BadChecksum), 3);
    assert_eq!(s.dropped(DropReason::NotForUs), 3);
    assert_eq!(s.dropped(DropReason::WrongPort), 1);
    assert_eq!(s.dropped(DropReason::BadSource), 3);
    assert_eq!(s.dropped(DropReason::Truncated), 2);
    assert_eq!(s.dropped(DropReason::BadLength), 1);
    assert_eq!(s.dropped(DropReason::OtherProtocol), 2);
    assert_eq!(s.dropped(DropReason::Fragment), 1);
    assert_eq!(s.total_dropped(), 16);
}

fn fix_ipv4_checksum(frame: &mut [u8]) {
    frame[24..26].copy_from_slice(&[0, 0]);
    let mut sum: u32 = frame[14..34]
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    frame[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

#[test]
fn checksum_offload() {
    // rx offload: the NIC vouched for the checksums, so they are not checked.
    let mut cfg = eth_cfg(IP_B, MAC_B);
    cfg.rx_checksum_offload = true;
    let mut b = Net::new(cfg, [ArpEntry::EMPTY; 1]).unwrap();
    let src = addr(IP_A, 5000);
    let mut f = udp_frame(MAC_A, MAC_B, src, addr(IP_B, PORT), b"abc");
    f[40..42].copy_from_slice(&[0, 0]);
    assert_eq!(feed(&mut b, t(0), &f), Got::Packet(src, b"abc".to_vec()));

    // tx offload: checksums are left zero for the NIC.
    let mut cfg = eth_cfg(IP_A, MAC_A);
    cfg.tx_checksum_offload = true;
    let mut a = Net::new(cfg, [ArpEntry::EMPTY; 1]).unwrap();
    let mut la = link();
    assert_eq!(
        feed(&mut a, t(0), &arp_request(MAC_B, IP_B, IP_A)),
        Got::Consumed
    );
    assert_eq!(
        send(&mut a, t(0), &mut *la, addr(IP_B, PORT), b"abc"),
        Ok(SendOutcome::Sent { len: 3 })
    );
    let (_, sent) = pop(&mut la).unwrap();
    assert_eq!(&sent[24..26], &[0, 0]);
    assert_eq!(&sent[40..42], &[0, 0]);
    assert_eq!(&sent[42..], b"abc");
}

/// An intact medium (memif): a wrong UDP checksum is not looked at on receive (it
/// is dropped on any other), while the frames sent still carry real checksums.
#[test]
fn an_intact_medium_skips_receive_verification_only() {
    let src = addr(IP_A, 5000);
    let mut f = udp_frame(MAC_A, MAC_B, src, addr(IP_B, PORT), b"abc");
    f[40] ^= 0x5a;
    let mut plain = eth_net(IP_B, MAC_B);
    assert!(matches!(feed(&mut plain, t(0), &f), Got::Dropped(_)));
    let mut caps = Capabilities::new(Medium::Ethernet, 1514);
    caps.intact = true;
    let cfg = NetConfig::new(&caps, IP_B, PORT).with_ethernet(MAC_B, 24, None);
    assert!(cfg.intact);
    let mut b = Net::new(cfg, [ArpEntry::EMPTY; 1]).unwrap();
    assert_eq!(feed(&mut b, t(0), &f), Got::Packet(src, b"abc".to_vec()));
    // Sending: both checksums filled and valid.
    let mut lb = link();
    assert_eq!(
        feed(&mut b, t(0), &arp_request(MAC_A, IP_A, IP_B)),
        Got::Consumed
    );
    assert_eq!(
        send(&mut b, t(0), &mut *lb, addr(IP_A, PORT), b"xyz"),
        Ok(SendOutcome::Sent { len: 3 })
    );
    let (_, sent) = pop(&mut lb).unwrap();
    assert_ne!(&sent[24..26], &[0, 0]);
    assert_ne!(&sent[40..42], &[0, 0]);
    let mut a = eth_net(IP_A, MAC_A);
    assert_eq!(
        feed(&mut a, t(0), &sent),
        Got::Packet(addr(IP_B, PORT), b"xyz".to_vec())
    );
}

#[test]
fn send_errors() {
    let mut a = eth_net(IP_A, MAC_A);
    let mut la = link();
    let b = addr(IP_B, PORT);
    assert_eq!(
        feed(&mut a, t(0), &arp_request(MAC_B, IP_B, IP_A)),
        Got::Consumed
    );
    assert_eq!(a.max_payload(), 1472);
    // Too large for the link.
    assert_eq!(
        a.send(t(0), &mut *la, b, 1473, |_| unreachable!()),
        Err(Errno::EMSGSIZE)
    );
    // The largest that fits goes out as a full 1514-byte frame.
    assert_eq!(
        a.send(t(0), &mut *la, b, 1472, |p| p.len()),
        Ok(SendOutcome::Sent { len: 1472 })
    );
    assert_eq!(pop(&mut la).unwrap().1.len(), 1514);
    // A writer may produce less than the hint, never zero or more.
    assert_eq!(
        a.send(t(0), &mut *la, b, 100, |p| {
            assert_eq!(p.len(), 100);
            10
        }),
        Ok(SendOutcome::Sent { len: 10 })
    );
    assert_eq!(pop(&mut la).unwrap().1.len(), 52);
    assert_eq!(a.send(t(0), &mut *la, b, 100, |_| 0), Err(Errno::EINVAL));
    assert_eq!(a.send(t(0), &mut *la, b, 100, |_| 101), Err(Errno::EINVAL));
    assert_eq!(la.tx_len(), 0, "nothing sent for a failed writer");
    // Bad destinations and hints.
    for dst in [
        addr(IP_B, 0),
        addr([0, 0, 0, 0], 1),
        addr([255, 255, 255, 255], 1),
        addr([224, 0, 0, 1], 1),
        addr([10, 0, 0, 255], 1),
    ] {
        assert_eq!(
            send(&mut a, t(0), &mut *la, dst, b"x"),
            Err(Errno::EINVAL),
            "{dst:?}"
        );
    }
    assert_eq!(
        a.send(t(0), &mut *la, b, 0, |_| unreachable!()),
        Err(Errno::EINVAL)
    );
    let mut udp_link = Box::new(Loopback::<2, 1514>::new(Medium::Udp, None));
    assert_eq!(
        send(&mut a, t(0), &mut *udp_link, b, b"x"),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        send(&mut a, t(0), &mut *la, addr([127, 0, 0, 1], 1), b"x"),
        Err(Errno::EHOSTUNREACH)
    );
    // Off the subnet without a gateway.
    assert_eq!(
        send(&mut a, t(0), &mut *la, addr([192, 168, 0, 1], 1), b"x"),
        Err(Errno::EHOSTUNREACH)
    );

    // No transmit slot: EAGAIN, the writer is not called, nothing is lost.
    let mut small = Box::new(Loopback::<2, 1514>::new(Medium::Ethernet, None));
    assert!(send(&mut a, t(0), &mut *small, b, b"1").is_ok());
    assert!(send(&mut a, t(0), &mut *small, b, b"2").is_ok());
    assert_eq!(
        a.send(t(0), &mut *small, b, 1, |_| unreachable!()),
        Err(Errno::EAGAIN)
    );
    // Also when the ARP request itself finds no slot; it goes out on the retry.
    assert_eq!(
        send(&mut a, t(0), &mut *small, addr(IP_C, PORT), b"x"),
        Err(Errno::EAGAIN)
    );
    assert_eq!(a.stats().arp_requests_sent, 0);
    small.pop_tx(|_, _| ());
    assert_eq!(
        send(&mut a, t(0), &mut *small, addr(IP_C, PORT), b"x"),
        Ok(SendOutcome::ArpPending)
    );
    assert_eq!(a.stats().arp_requests_sent, 1);
    assert_eq!(a.stats().tx_packets, 4);

    // A link lending less than the configured MTU.
    let mut tiny = Box::new(Loopback::<2, 100>::new(Medium::Ethernet, None));
    assert_eq!(
        a.send(t(0), &mut *tiny, b, 200, |_| unreachable!()),
        Err(Errno::EMSGSIZE)
    );
}

#[test]
fn off_subnet_destinations_go_through_the_gateway() {
    let gw = [10, 0, 0, 254];
    let cfg = eth_cfg(IP_A, MAC_A).with_ethernet(MAC_A, 24, Some(gw));
    let mut a = Net::new(cfg, [ArpEntry::EMPTY; 2]).unwrap();
    let mut la = link();
    let far = addr([192, 168, 7, 7], 9);
    assert_eq!(
        send(&mut a, t(0), &mut *la, far, b"x"),
        Ok(SendOutcome::ArpPending)
    );
    assert_eq!(pop(&mut la).unwrap().1, arp_request(MAC_A, IP_A, gw));
    let gw_mac = [0x02, 0, 0, 0, 0, 0xfe];
    assert_eq!(
        feed(&mut a, t(1), &arp_reply(gw_mac, gw, MAC_A, IP_A)),
        Got::Consumed
    );
    assert_eq!(
        send(&mut a, t(1), &mut *la, far, b"x"),
        Ok(SendOutcome::Sent { len: 1 })
    );
    let (_, f) = pop(&mut la).unwrap();
    assert_eq!(f, udp_frame(MAC_A, gw_mac, addr(IP_A, PORT), far, b"x"));
}

/// Everything the loopback queue holds, as `rx` would have delivered it.
fn drain_looped<A, B>(net: &mut Net<A, B>) -> Vec<Got>
where
    A: AsRef<[ArpEntry]> + AsMut<[ArpEntry]>,
    B: AsRef<[u8]> + AsMut<[u8]>,
{
    let mut out = Vec::new();
    let src = net.local_addr();
    if let Some(mut q) = net.lend_looped() {
        while let Some(p) = q.pop(|d| Got::Packet(src, d.to_vec())) {
            out.push(p);
        }
        net.return_looped(q);
    }
    out
}

#[test]
fn datagrams_to_ourselves_wait_in_the_loopback_queue() {
    let cfg = eth_cfg(IP_A, MAC_A);
    let lo = vec![0u8; cfg.loopback_bytes(2).unwrap()];
    let mut a = Net::with_loopback(cfg, [ArpEntry::EMPTY; 2], lo).unwrap();
    assert_eq!(a.loopback_capacity(), 2);
    // Every frame that left is in the link's transmit queue: none must.
    let mut la = link();
    let me = addr(IP_A, PORT);
    assert!(!a.has_looped());
    assert_eq!(
        send(&mut a, t(0), &mut *la, me, b"self"),
        Ok(SendOutcome::Sent { len: 4 })
    );
    assert!(a.has_looped());
    // The largest payload fits a slot; the writer's rules are those of the link.
    let big: Vec<u8> = (0..a.max_payload()).map(|i| i as u8).collect();
    assert_eq!(
        send(&mut a, t(0), &mut *la, me, &big),
        Ok(SendOutcome::Sent { len: big.len() })
    );
    // Full: EAGAIN, the writer is not called, nothing is lost.
    assert_eq!(
        a.send(t(0), &mut *la, me, 1, |_| unreachable!()),
        Err(Errno::EAGAIN)
    );
    assert_eq!(la.tx_len(), 0, "no frame and no ARP request left");
    assert_eq!(
        drain_looped(&mut a),
        vec![
            Got::Packet(me, b"self".to_vec()),
            Got::Packet(me, big.clone())
        ]
    );
    assert!(!a.has_looped());
    // Wrapping around the ring, and failed writers queue nothing.
    assert_eq!(a.send(t(0), &mut *la, me, 4, |_| 0), Err(Errno::EINVAL));
    assert_eq!(a.send(t(0), &mut *la, me, 4, |_| 5), Err(Errno::EINVAL));
    for round in 0u8..5 {
        send(&mut a, t(1), &mut *la, me, &[round]).unwrap();
        send(&mut a, t(1), &mut *la, me, &[round, 1]).unwrap();
        assert_eq!(
            drain_looped(&mut a),
            vec![
                Got::Packet(me, vec![round]),
                Got::Packet(me, vec![round, 1])
            ]
        );
    }
    // Our IP at another port is not us: it goes to the link as before.
    assert_eq!(
        send(&mut a, t(2), &mut *la, addr(IP_A, PORT + 1), b"x"),
        Ok(SendOutcome::Sent { len: 1 })
    );
    assert_eq!(la.tx_len(), 1);
    let s = a.stats();
    assert_eq!((s.tx_looped, s.rx_looped, s.tx_loop_full), (12, 12, 1));
    assert_eq!((s.tx_packets, s.tx_loop_refused), (1, 0));
    assert_eq!(s.arp_requests_sent, 0);
}

#[test]
fn without_loopback_storage_sends_to_ourselves_fail_clearly() {
    let mut a = eth_net(IP_A, MAC_A);
    assert_eq!(a.loopback_capacity(), 0);
    let mut la = link();
    assert_eq!(
        a.send(t(0), &mut *la, addr(IP_A, PORT), 1, |_| unreachable!()),
        Err(Errno::EHOSTUNREACH)
    );
    assert_eq!(la.tx_len(), 0);
    assert_eq!(a.stats().tx_loop_refused, 1);
    assert!(a.lend_looped().is_none());
    // UDP links never queue: the kernel loops datagrams back.
    let caps = Capabilities::new(Medium::Udp, 1472);
    let cfg = NetConfig::new(&caps, IP_A, PORT);
    assert_eq!(cfg.loopback_bytes(4), Some(0));
    let mut u = Net::with_loopback(cfg, [ArpEntry::EMPTY; 0], vec![0u8; 4096]).unwrap();
    assert_eq!(u.loopback_capacity(), 0);
    let mut lu = Box::new(Loopback::<2, 1472>::new(Medium::Udp, None));
    assert_eq!(
        send(&mut u, t(0), &mut *lu, addr(IP_A, PORT), b"x"),
        Ok(SendOutcome::Sent { len: 1 })
    );
    assert_eq!(lu.tx_len(), 1);
    assert!(!u.has_looped());
    assert_eq!(eth_cfg(IP_A, MAC_A).loopback_bytes(usize::MAX), None);
}

#[test]
fn udp_medium_passes_addresses_out_of_band() {
    type U = Loopback<4, 1472>;
    let caps = Capabilities::new(Medium::Udp, 1472);
    let (ia, ib) = (addr([127, 0, 0, 1], 4000), addr([127, 0, 0, 1], 4001));
    let mut a = Net::new(NetConfig::new(&caps, IP_A, 4000), [ArpEntry::EMPTY; 0]).unwrap();
    let mut b = Net::new(NetConfig::new(&caps, IP_B, 4001), [ArpEntry::EMPTY; 0]).unwrap();
    let (mut la, mut lb) = (
        Box::new(U::new(Medium::Udp, Some(ia))),
        Box::new(U::new(Medium::Udp, Some(ib))),
    );
    assert_eq!(a.max_payload(), 1472);
    assert_eq!(
        send(&mut a, t(0), &mut *la, ib, b"ping"),
        Ok(SendOutcome::Sent { len: 4 })
    );
    assert_eq!(
        la.pop_tx(|d, p| (d, p.to_vec())),
        Some((Some(ib), b"ping".to_vec()))
    );
    send(&mut a, t(0), &mut *la, ib, b"ping").unwrap();
    la.transfer_to(&mut *lb);
    assert_eq!(
        pump(&mut b, &mut lb, t(0)),
        vec![Got::Packet(ia, b"ping".to_vec())]
    );
    send(&mut b, t(0), &mut *lb, ia, b"pong").unwrap();
    lb.transfer_to(&mut *la);
    assert_eq!(
        pump(&mut a, &mut la, t(0)),
        vec![Got::Packet(ib, b"pong".to_vec())]
    );

    // No source, or one we could not answer.
    assert_eq!(feed(&mut b, t(0), b"x"), Got::Dropped(DropReason::NoSource));
    let bad = RxMeta::from_src(addr([0, 0, 0, 0], 1));
    assert_eq!(
        own(b.rx(t(0), bad, b"x")),
        Got::Dropped(DropReason::BadSource)
    );
    let bad = RxMeta::from_src(addr(IP_A, 0));
    assert_eq!(
        own(b.rx(t(0), bad, b"x")),
        Got::Dropped(DropReason::BadSource)
    );
    let mut wrong = RxMeta::from_src(ia);
    wrong.dst = Some(addr(IP_B, 9));
    assert_eq!(
        own(b.rx(t(0), wrong, b"x")),
        Got::Dropped(DropReason::WrongPort)
    );
    assert_eq!(b.stats().total_dropped(), 4);

    // Sizes and back-pressure.
    assert_eq!(
        a.send(t(0), &mut *la, ib, 1473, |_| unreachable!()),
        Err(Errno::EMSGSIZE)
    );
    while la.tx_len() < 4 {
        send(&mut a, t(0), &mut *la, ib, b"fill").unwrap();
    }
    assert_eq!(
        a.send(t(0), &mut *la, ib, 1, |_| unreachable!()),
        Err(Errno::EAGAIN)
    );
    // ARP never happens here.
    assert_eq!(a.poll_tx(t(0), &mut *la), 0);
}

#[test]
fn config_validation() {
    let caps = Capabilities::new(Medium::Ethernet, 1514);
    let base = eth_cfg(IP_A, MAC_A);
    let bad = |f: &dyn Fn(&mut NetConfig)| {
        let mut c = base;
        f(&mut c);
        Net::new(c, [ArpEntry::EMPTY; 1]).err()
    };
    assert_eq!(bad(&|_| {}), None);
    assert_eq!(bad(&|c| c.local_mac = [0; 6]), Some(Errno::EINVAL));
    assert_eq!(bad(&|c| c.local_mac = [0xff; 6]), Some(Errno::EINVAL));
    assert_eq!(bad(&|c| c.local_ip = [0, 0, 0, 0]), Some(Errno::EINVAL));
    assert_eq!(bad(&|c| c.local_ip = [10, 0, 0, 255]), Some(Errno::EINVAL));
    assert_eq!(bad(&|c| c.local_port = 0), Some(Errno::EINVAL));
    assert_eq!(bad(&|c| c.prefix_len = 33), Some(Errno::EINVAL));
    assert_eq!(bad(&|c| c.ttl = 0), Some(Errno::EINVAL));
    assert_eq!(
        bad(&|c| c.mtu = ETH_IPV4_UDP_HEADER_LEN),
        Some(Errno::EINVAL)
    );
    assert_eq!(
        bad(&|c| c.arp_timeout = Duration::ZERO),
        Some(Errno::EINVAL)
    );
    assert_eq!(bad(&|c| c.arp_max_requests = 0), Some(Errno::EINVAL));
    assert_eq!(
        bad(&|c| c.gateway = Some([192, 168, 0, 1])),
        Some(Errno::EINVAL)
    );
    assert_eq!(bad(&|c| c.gateway = Some(IP_A)), Some(Errno::EINVAL));
    assert_eq!(bad(&|c| c.gateway = Some([10, 0, 0, 254])), None);
    assert_eq!(
        Net::new(base, [ArpEntry::EMPTY; 0]).err(),
        Some(Errno::EINVAL)
    );
    // /31 links have no broadcast address (RFC 3021): both addresses are hosts.
    let p2p = NetConfig::new(&caps, [10, 0, 0, 1], 1).with_ethernet(MAC_A, 31, None);
    assert!(Net::new(p2p, [ArpEntry::EMPTY; 1]).is_ok());
    assert_eq!(base.netmask(), 0xffff_ff00);
    assert_eq!(
        NetConfig {
            prefix_len: 0,
            ..base
        }
        .netmask(),
        0
    );
    assert_eq!(
        NetConfig {
            prefix_len: 32,
            ..base
        }
        .netmask(),
        u32::MAX
    );
    // UDP links need no MAC nor cache; the payload is capped at 65507.
    let udp = NetConfig::new(&Capabilities::new(Medium::Udp, 70_000), [0; 4], 0);
    let n = Net::new(udp, [ArpEntry::EMPTY; 0]).unwrap();
    assert_eq!(n.max_payload(), 65_507);
}

fn arb_meta() -> impl Strategy<Value = RxMeta> {
    (
        any::<Option<([u8; 4], u16)>>(),
        any::<Option<([u8; 4], u16)>>(),
    )
        .prop_map(|(s, d)| {
            let mut m = RxMeta::default();
            m.src = s.map(|(ip, p)| addr(ip, p));
            m.dst = d.map(|(ip, p)| addr(ip, p));
            m
        })
}

fn valid_frames() -> Vec<Vec<u8>> {
    vec![
        udp_frame(
            MAC_A,
            MAC_B,
            addr(IP_A, 5000),
            addr(IP_B, PORT),
            b"0123456789abcdef",
        ),
        arp_request(MAC_A, IP_A, IP_B),
        arp_reply(MAC_A, IP_A, MAC_B, IP_B),
    ]
}

fn total(s: &NetStats) -> u64 {
    s.rx_packets + s.rx_arp + s.total_dropped()
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bufs in proptest::collection::vec((arb_meta(), proptest::collection::vec(any::<u8>(), 0..120)), 1..20)) {
        let mut eth = eth_net(IP_B, MAC_B);
        let caps = Capabilities::new(Medium::Udp, 1472);
        let mut udp = Net::new(NetConfig::new(&caps, IP_B, PORT), [ArpEntry::EMPTY; 0]).unwrap();
        let mut la = link();
        for (i, (meta, buf)) in bufs.iter().enumerate() {
            let now = t(i as u64);
            let _ = eth.rx(now, *meta, buf);
            let _ = udp.rx(now, *meta, buf);
            let _ = eth.poll_tx(now, &mut *la);
        }
        prop_assert_eq!(total(eth.stats()), bufs.len() as u64);
        prop_assert_eq!(total(udp.stats()), bufs.len() as u64);
    }

    #[test]
    fn mutated_frames_never_panic(
        which in 0usize..3,
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6),
        cut in proptest::option::of(any::<usize>()),
        offload in any::<bool>(),
    ) {
        let mut f = valid_frames()[which].clone();
        for (at, x) in &flips {
            let n = f.len();
            f[at % n] ^= x;
        }
        if let Some(c) = cut {
            f.truncate(c % (f.len() + 1));
        }
        let mut cfg = eth_cfg(IP_B, MAC_B);
        cfg.rx_checksum_offload = offload;
        let mut b = Net::new(cfg, [ArpEntry::EMPTY; 2]).unwrap();
        let mut lb = link();
        let out = own(b.rx(t(0), RxMeta::default(), &f));
        b.poll_tx(t(0), &mut *lb);
        prop_assert_eq!(total(b.stats()), 1);
        if let Got::Packet(_, p) = out {
            prop_assert!(p.len() <= f.len());
        }
    }

    #[test]
    fn single_byte_corruption_past_ethernet_is_never_delivered(at in 14usize..58, x in 1u8..=255) {
        let mut f = valid_frames()[0].clone();
        f[at] ^= x;
        let mut b = eth_net(IP_B, MAC_B);
        let out = own(b.rx(t(0), RxMeta::default(), &f));
        prop_assert!(matches!(out, Got::Dropped(_)), "{:?}", out);
    }
}
