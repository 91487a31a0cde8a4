//! `AfPacketLink` on both ends of a veth pair the test creates (root only). The pair has
//! no IPv4 address and IPv6 off, and every frame is addressed to a MAC that is on
//! neither end, so the kernel drops them all as "other host": nothing is routed or
//! answered, nothing leaves the pair.

mod common;

use std::time::{Duration, Instant};

use common::{LinkGuard, ip, parse_mac, root_or_skip, sys_class_net, sysctl};
use dp_kernel::{AfPacketLink, KernelLink, PacketConfig};
use wire::frame::{
    self, ARP_FRAME_LEN, ArpMessage, DEFAULT_TTL, EthernetAddress, Ipv4Address, ParsedFrame,
    UdpFrameRepr,
};
use wire::link::{Capabilities, Link, Medium, TxMeta, TxToken, UdpAddr};

const PAYLOAD: usize = 200;

/// Sequence-numbered UDP frame from `src_mac` to a foreign MAC.
fn udp_frame(buf: &mut [u8], caps: &Capabilities, src_mac: [u8; 6], x: u8, seq: u32) -> usize {
    let repr = UdpFrameRepr {
        src_mac: EthernetAddress(src_mac),
        dst_mac: foreign_mac(x),
        src: UdpAddr::new(Ipv4Address::new(10, 213, x, 1), 4000),
        dst: UdpAddr::new(Ipv4Address::new(10, 213, x, 2), 4001),
        ttl: DEFAULT_TTL,
    };
    repr.emit(buf, PAYLOAD, &caps.checksum_caps(), |p| {
        p[..4].copy_from_slice(&seq.to_be_bytes());
        p[4..].fill(seq as u8);
    })
    .unwrap()
}

/// A unicast MAC on neither end of the pair.
fn foreign_mac(x: u8) -> EthernetAddress {
    EthernetAddress([0x02, 0x0f, 0x1e, 0xff, x, 0x01])
}

/// The sequence number of one of our UDP frames, checksums verified.
fn udp_seq(f: &[u8], caps: &Capabilities) -> Option<u32> {
    match frame::parse_frame(f, &caps.checksum_caps()) {
        Ok(ParsedFrame::Udp(u)) if u.repr.dst.port == 4001 => {
            let p = &f[u.payload];
            assert_eq!(p.len(), PAYLOAD);
            Some(u32::from_be_bytes(p[..4].try_into().unwrap()))
        }
        _ => None,
    }
}

fn wait_oper_up(name: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while sys_class_net(name, "operstate") != "up" {
        assert!(Instant::now() < deadline, "{name} never came up");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Receive on `link` until `done` says so or 5 s passed; returns every frame.
fn collect(link: &mut AfPacketLink, done: impl FnMut(&[Vec<u8>]) -> bool) -> Vec<Vec<u8>> {
    collect_for(link, Duration::from_secs(5), done)
}

/// Receive on `link` until `done` says so or `wait` passed; returns every frame.
fn collect_for(
    link: &mut AfPacketLink,
    wait: Duration,
    mut done: impl FnMut(&[Vec<u8>]) -> bool,
) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + wait;
    let mut out = Vec::new();
    while !done(&out) && Instant::now() < deadline {
        if link.receive_burst(usize::MAX, |_, f| out.push(f.to_vec())) == 0 {
            std::thread::sleep(Duration::from_micros(500));
        }
    }
    out
}

/// A veth pair `<prefix>a<pid>` / `<prefix>b<pid>`, IPv6 and forwarding off, both up;
/// with a byte of the pid for addresses and the guard that deletes the pair (armed
/// before it exists, so a failure anywhere still deletes it).
fn veth_pair(prefix: &str) -> (String, String, u8, LinkGuard) {
    let pid = std::process::id();
    let (na, nb) = (format!("{prefix}a{pid}"), format!("{prefix}b{pid}"));
    let guard = LinkGuard(vec![na.clone(), nb.clone()]);
    ip(&["link", "add", &na, "type", "veth", "peer", "name", &nb]);
    for n in [&na, &nb] {
        sysctl(&format!("net/ipv6/conf/{n}/disable_ipv6"), "1");
        sysctl(&format!("net/ipv4/conf/{n}/forwarding"), "0");
        ip(&["link", "set", n, "up"]);
    }
    (na, nb, (pid % 256) as u8, guard)
}

#[test]
fn af_packet_over_a_veth_pair() {
    const TEST: &str = "af_packet_over_a_veth_pair";
    if !root_or_skip(TEST) {
        return;
    }
    let (na, nb, x, _guard) = veth_pair("onp");
    let mut a = AfPacketLink::open(&na).unwrap();
    let mut cfg = PacketConfig::new(&nb);
    cfg.ring = 16;
    let mut b = AfPacketLink::new(cfg).unwrap();

    // What the link read from the interface matches sysfs.
    assert_eq!(a.mac(), parse_mac(&sys_class_net(&na, "address")));
    assert_eq!(b.mac(), parse_mac(&sys_class_net(&nb, "address")));
    assert_eq!(a.ifindex().to_string(), sys_class_net(&na, "ifindex"));
    assert_eq!(a.ifname(), na);
    assert_eq!(a.interface_mtu(), 1500);
    let caps = a.capabilities();
    assert_eq!(
        (caps.medium, caps.mtu, caps.max_burst),
        (Medium::Ethernet, 1514, 64)
    );
    assert_eq!(b.capabilities().max_burst, 16);
    println!("PACKET_IGNORE_OUTGOING: {}", a.ignores_outgoing());
    wait_oper_up(&na);
    wait_oper_up(&nb);

    // A -> B: an IPv6 frame (filtered out), an ARP request, 100 UDP frames.
    let tok = a.transmit().unwrap();
    tok.consume_with(60, |buf| {
        buf[..6].copy_from_slice(&foreign_mac(x).0);
        buf[6..12].copy_from_slice(&a_mac_placeholder());
        buf[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
        buf[14..60].fill(0x66);
        (TxMeta::len(60), ())
    });
    let a_mac = a.mac();
    let tok = a.transmit().unwrap();
    tok.consume_with(ARP_FRAME_LEN, |buf| {
        let n = frame::emit_arp_request(
            buf,
            EthernetAddress(a_mac),
            Ipv4Address::new(10, 213, x, 1),
            Ipv4Address::new(10, 213, x, 2),
        )
        .unwrap();
        // Unicast to the foreign MAC rather than broadcast: the kernel ignores it.
        buf[..6].copy_from_slice(&foreign_mac(x).0);
        (TxMeta::len(n), ())
    });
    for seq in 0..50 {
        let tok = a.transmit().unwrap();
        tok.consume_with(caps.mtu, |buf| {
            (TxMeta::len(udp_frame(buf, &caps, a_mac, x, seq)), ())
        });
    }
    assert_eq!(a.pending_tx(), 52, "queued until a flush");
    let mut seq = 50;
    let n = a.transmit_burst(50, |buf| {
        let len = udp_frame(buf, &caps, a_mac, x, seq);
        seq += 1;
        Some(TxMeta::len(len))
    });
    assert_eq!(n, 50);
    assert_eq!(
        a.pending_tx(),
        0,
        "flushed: the ring filled, then the burst ended"
    );

    let mut got = collect(&mut b, |fs| {
        fs.iter().filter(|f| udp_seq(f, &caps).is_some()).count() == 100
    });
    // Give a stray IPv6 frame the chance to show up before checking it did not.
    got.extend(collect_for(&mut b, Duration::from_millis(100), |_| false));
    let seqs: Vec<u32> = got.iter().filter_map(|f| udp_seq(f, &caps)).collect();
    assert_eq!(
        seqs,
        (0..100).collect::<Vec<_>>(),
        "all UDP frames, in order"
    );
    let arps: Vec<ArpMessage> = got
        .iter()
        .filter_map(|f| match frame::parse_frame(f, &caps.checksum_caps()) {
            Ok(ParsedFrame::Arp(m)) => Some(m),
            _ => None,
        })
        .collect();
    assert_eq!(arps.len(), 1);
    assert_eq!(arps[0].sender_mac.0, a_mac);
    assert!(
        got.iter().all(|f| f[12..14] != [0x86, 0xdd]),
        "the filter keeps IPv6 out"
    );
    assert!(
        got.iter()
            .all(|f| f[12..14] == [0x08, 0x00] || f[12..14] == [0x08, 0x06]),
        "only IPv4 and ARP"
    );
    let sb = b.stats();
    assert!(
        sb.rx_batches >= 7,
        "a ring of 16 takes several recvmmsg: {sb:?}"
    );
    assert_eq!(sb.rx_truncated, 0);

    // A never hears its own frames.
    let own = collect_for(&mut a, Duration::from_millis(100), |_| false)
        .into_iter()
        .filter(|f| f[6..12] == a_mac)
        .count();
    assert_eq!(own, 0, "own frames are not looped back");

    // B -> A in bursts of B's ring, more than a ring per burst call.
    let b_mac = b.mac();
    let mut seq = 0;
    let mut got = Vec::new();
    for _ in 0..20 {
        let n = b.transmit_burst(40, |buf| {
            let len = udp_frame(buf, &caps, b_mac, x, seq);
            seq += 1;
            Some(TxMeta::len(len))
        });
        assert_eq!(n, 40);
        let want = seq as usize;
        let more = collect(&mut a, |fs| got.len() + fs.len() >= want);
        got.extend(more);
    }
    let seqs: Vec<u32> = got.iter().filter_map(|f| udp_seq(f, &caps)).collect();
    assert_eq!(seqs, (0..800).collect::<Vec<_>>());
    let sb = b.stats();
    assert_eq!(sb.tx_packets, 800);
    assert_eq!((sb.tx_errors, sb.tx_dropped), (0, 0));

    // A frame longer than the MTU is refused before it reaches the kernel.
    let tok = a.transmit().unwrap();
    let lent = tok.consume_with(caps.mtu + 10, |buf| (TxMeta::len(buf.len() + 1), buf.len()));
    assert_eq!(lent, caps.mtu);
    assert_eq!(a.pending_tx(), 0);
    assert_eq!(a.stats().tx_refused, 1);
    assert_eq!(KernelLink::flush(&mut a), 0);
}

/// A UDP frame to a foreign MAC whose payload carries endpoint id `id` at bytes
/// 10..12 (where the wire header has the destination endpoint) and `mark` at byte 32.
fn id_frame(
    buf: &mut [u8],
    caps: &Capabilities,
    src_mac: [u8; 6],
    x: u8,
    id: u16,
    mark: u8,
) -> usize {
    let repr = UdpFrameRepr {
        src_mac: EthernetAddress(src_mac),
        dst_mac: foreign_mac(x),
        src: UdpAddr::new(Ipv4Address::new(10, 213, x, 1), 4000),
        dst: UdpAddr::new(Ipv4Address::new(10, 213, x, 2), 4001),
        ttl: DEFAULT_TTL,
    };
    repr.emit(buf, 64, &caps.checksum_caps(), |p| {
        p.fill(0);
        p[10..12].copy_from_slice(&id.to_be_bytes());
        p[32] = mark;
    })
    .unwrap()
}

#[test]
fn af_packet_queues_steer_by_the_context_index() {
    const TEST: &str = "af_packet_queues_steer_by_the_context_index";
    if !root_or_skip(TEST) {
        return;
    }
    let (na, nb, x, _guard) = veth_pair("onq");
    let mut a = AfPacketLink::open(&na).unwrap();
    let mut qs = AfPacketLink::queues(PacketConfig::new(&nb), 3).expect("a fanout group of 3");
    assert!(AfPacketLink::queues(PacketConfig::new(&nb), 0).is_err());
    assert!(AfPacketLink::queues(PacketConfig::new(&nb), 65).is_err());
    // A second group on the same interface is a group of its own.
    let mut other = AfPacketLink::queues(PacketConfig::new(&nb), 2).expect("another group");
    wait_oper_up(&na);
    wait_oper_up(&nb);
    let caps = a.capabilities();
    let a_mac = a.mac();
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
        let tok = a.transmit().unwrap();
        tok.consume_with(caps.mtu, |buf| {
            (TxMeta::len(id_frame(buf, &caps, a_mac, x, id, i as u8)), ())
        });
    }
    // An ARP request goes to queue 0.
    let tok = a.transmit().unwrap();
    tok.consume_with(ARP_FRAME_LEN, |buf| {
        let n = frame::emit_arp_request(
            buf,
            EthernetAddress(a_mac),
            Ipv4Address::new(10, 213, x, 1),
            Ipv4Address::new(10, 213, x, 2),
        )
        .unwrap();
        buf[..6].copy_from_slice(&foreign_mac(x).0);
        (TxMeta::len(n), ())
    });
    KernelLink::flush(&mut a);
    let mut want: [Vec<u8>; 3] = Default::default();
    for (i, &(_, _, q)) in cases.iter().enumerate() {
        want[q].push(i as u8);
    }
    want[0].push(b'a');
    let mark = |f: &Vec<u8>| match frame::parse_frame(f, &caps.checksum_caps()) {
        Ok(ParsedFrame::Udp(u)) if u.repr.dst.port == 4001 => Some(f[u.payload][32]),
        Ok(ParsedFrame::Arp(m)) if m.sender_mac.0 == a_mac => Some(b'a'),
        _ => None,
    };
    for (q, link) in qs.iter_mut().enumerate() {
        let n = want[q].len();
        let got = collect(link, |fs| fs.iter().filter_map(mark).count() >= n);
        let mut got: Vec<u8> = got.iter().filter_map(mark).collect();
        got.extend(
            collect_for(link, Duration::from_millis(50), |_| false)
                .iter()
                .filter_map(mark),
        );
        assert_eq!(got, want[q], "queue {q}");
    }
    // The other group saw every frame too, steered over its own two links.
    let mut seen: Vec<u8> = Vec::new();
    for link in other.iter_mut() {
        seen.extend(
            collect_for(link, Duration::from_millis(200), |_| false)
                .iter()
                .filter_map(mark),
        );
    }
    seen.sort_unstable();
    assert_eq!(seen, [0, 1, 2, 3, 4, 5, b'a']);
    // Every queue sends.
    for (q, link) in qs.iter_mut().enumerate() {
        let b_mac = link.mac();
        let tok = link.transmit().unwrap();
        tok.consume_with(caps.mtu, |buf| {
            (
                TxMeta::len(id_frame(buf, &caps, b_mac, x, 0, 100 + q as u8)),
                (),
            )
        });
        KernelLink::flush(link);
    }
    let got = collect(&mut a, |fs| fs.iter().filter_map(mark).count() >= 3);
    let mut marks: Vec<u8> = got.iter().filter_map(mark).collect();
    marks.sort_unstable();
    assert_eq!(marks, [100, 101, 102]);
}

/// A source MAC for the IPv6 frame (its contents do not matter).
fn a_mac_placeholder() -> [u8; 6] {
    [0x02, 0x0f, 0x1e, 0xee, 0x00, 0x01]
}

#[test]
fn af_packet_missing_interface_is_an_error() {
    if !root_or_skip("af_packet_missing_interface_is_an_error") {
        return;
    }
    let e = AfPacketLink::open(&format!("onnx{}", std::process::id())).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::ENODEV), "{e}");
}

#[test]
fn af_packet_bad_name_is_refused() {
    let e = AfPacketLink::open("a-name-that-is-far-too-long").unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
}
