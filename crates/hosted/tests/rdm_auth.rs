//! Per-packet MACs under an auth key (issue #29, wire protocol 4.10), in the simulator:
//! an on-path attacker who sniffed the session ids and sequence numbers can neither end
//! a keyed session with a forged RESET nor inject data, ACKs or a replay into it; every
//! forgery is counted and dropped, and every genuine message arrives exactly once.
//! Without a key the same forged RESET does end the session (what the MAC prevents).
//! Keyed traffic through a faulty network (no CRC: the MAC catches corruption) still
//! arrives exactly once.

use std::net::{Ipv4Addr, SocketAddrV4};

use hosted::netsim::{Datagram, Faults, NetSim};
use hosted::simlink::{Cluster, Completion, Node, NodeConfig};
use ofi_nostd::errno::Errno;
use ofi_nostd::flags::FI_ADDR_UNSPEC;
use ofi_nostd::mem::IoVec;
use ofi_nostd::rdm::{PeerState, RdmStats};
use ofi_nostd::time::Duration;
use wire::packet::{
    AckRepr, Body, CloseRepr, Header, Packet, PacketType, RejectRepr, Repr, RetryRepr, close, mac,
    reject,
};

const B: u64 = Node::BASE;
const KEY: &[u8] = b"job 29 shared secret";

fn stats(c: &Cluster, i: usize) -> RdmStats {
    let n = &c.nodes[i];
    *n.dom.ep(n.ep).unwrap().rdm().unwrap().stats()
}

fn peer_state(c: &Cluster, i: usize, j: usize) -> Option<PeerState> {
    let a = c.nodes[j].addr();
    let n = &c.nodes[i];
    n.dom.ep(n.ep).unwrap().rdm().unwrap().peer_state(&a)
}

fn node_addr(c: &Cluster, i: usize) -> SocketAddrV4 {
    let a = c.nodes[i].addr();
    SocketAddrV4::new(Ipv4Addr::from(a.ip), a.port)
}

fn cluster(key: &[u8]) -> Cluster {
    let cfg = NodeConfig {
        auth_key: key.to_vec(),
        ..NodeConfig::default()
    };
    Cluster::new(NetSim::new(29, Faults::default()), 2, &cfg).expect("cluster")
}

fn payload(tag: u64) -> Vec<u8> {
    (0..64).map(|k| (k as u64 ^ tag) as u8).collect()
}

/// `n` tagged messages of 64 bytes from node `from` to node `to` (tags `tag0..`), their
/// receives posted first; runs until every one completed on both sides (bounded), and
/// returns the receive completions.
fn messages(c: &mut Cluster, from: usize, to: usize, tag0: u64, n: u64) -> Vec<Completion> {
    for t in tag0..tag0 + n {
        let off = 8192 + 64 * (t - tag0);
        c.nodes[to]
            .op(|d, ep, _| d.trecv(ep, IoVec::new(B + off, 64), FI_ADDR_UNSPEC, t, 0, t))
            .unwrap();
    }
    for t in tag0..tag0 + n {
        let a = c.nodes[from].put(64 * (t - tag0) as usize, &payload(t));
        c.nodes[from]
            .op(|d, ep, m| d.tsend(ep, m, IoVec::new(a, 64), to as u64, t, t))
            .unwrap();
    }
    let (mut txs, mut rxs) = (Vec::new(), Vec::new());
    for _ in 0..2000 {
        c.run_for(Duration::from_micros(50));
        let nf = &mut c.nodes[from];
        nf.drain_cq(nf.tx_cq, &mut txs);
        let nt = &mut c.nodes[to];
        nt.drain_cq(nt.rx_cq, &mut rxs);
        if txs.len() as u64 >= n && rxs.len() as u64 >= n {
            break;
        }
    }
    assert_eq!(txs.len() as u64, n, "send completions: {txs:?}");
    assert!(txs.iter().all(|t| t.err.is_none()), "{txs:?}");
    rxs
}

/// Checks that the receive completions are exactly tags `tag0 .. tag0 + n`, once each,
/// intact.
fn delivered_once(c: &Cluster, to: usize, rxs: &[Completion], tag0: u64, n: u64) {
    let mut tags: Vec<u64> = rxs.iter().map(|r| r.context).collect();
    tags.sort_unstable();
    assert_eq!(tags, (tag0..tag0 + n).collect::<Vec<_>>());
    for r in rxs {
        assert_eq!((r.err, r.len), (None, 64), "{r:?}");
        let off = 8192 + 64 * (r.context - tag0) as usize;
        assert_eq!(c.nodes[to].get(off, 64), &payload(r.context)[..]);
    }
}

/// The first datagram sniffed from node `from` to node `to` of type `ty`.
fn sniffed(c: &Cluster, tapped: &[Datagram], from: usize, to: usize, ty: PacketType) -> Vec<u8> {
    let (src, dst) = (node_addr(c, from), node_addr(c, to));
    tapped
        .iter()
        .find(|d| {
            d.src == src
                && d.dst == dst
                && Packet::new_unchecked(&d.payload[..]).packet_type() == Some(ty)
        })
        .unwrap_or_else(|| panic!("no {ty:?} from {from} to {to} sniffed"))
        .payload
        .clone()
}

/// Emits `r` as the attacker would: with flag MAC and a made-up trailer when `trailer`
/// (the attacker does not know the key), plainly otherwise.
fn forge(r: &Repr<'_>, trailer: bool) -> Vec<u8> {
    let mut buf = vec![0u8; r.buffer_len() + mac::TRAILER_LEN];
    let n = r.emit_bytes(&mut buf).unwrap();
    if !trailer {
        buf.truncate(n);
        return buf;
    }
    mac::set_mac_flag(&mut buf[..n]);
    Packet::new_unchecked(&mut buf[..n]).fill_checksum();
    for (i, b) in buf[n..].iter_mut().enumerate() {
        *b = 0xA5 ^ i as u8;
    }
    buf
}

/// A RESET naming `session`, as a forger sends it.
fn reset(template: &Repr<'_>, session: u32, trailer: bool) -> Vec<u8> {
    let mut h = template.header;
    h.session = session;
    h.ack_req = false;
    forge(
        &Repr {
            header: h,
            body: Body::Reset(CloseRepr {
                reason: close::NORMAL,
                ack: None,
            }),
        },
        trailer,
    )
}

#[test]
fn forged_resets_data_and_acks_under_a_key_are_dropped_and_the_session_survives() {
    let mut c = cluster(KEY);
    // The session is up, and the attacker watches it.
    let rx = messages(&mut c, 0, 1, 1, 1);
    delivered_once(&c, 1, &rx, 1, 1);
    c.sim.set_tap(true);
    let rx = messages(&mut c, 0, 1, 2, 1);
    delivered_once(&c, 1, &rx, 2, 1);
    let tapped = c.sim.take_tapped();
    c.sim.set_tap(false);
    let genuine = sniffed(&c, &tapped, 0, 1, PacketType::Tagged);
    assert!(
        mac::has_mac(&genuine),
        "a keyed session's data carries a MAC"
    );
    let g = Repr::parse_bytes(&genuine).unwrap();
    let (session, seq) = (g.header.session, g.header.seq);
    let Body::Msg(gm) = g.body else {
        panic!("{g:?}")
    };
    // The attacker speaks with node 0's address.
    let spoof = c.sim.add_port(node_addr(&c, 0));
    let to1 = node_addr(&c, 1);
    let before = stats(&c, 1);
    let mut forged = 0u64;
    // RESETs naming node 1's receive session: with a made-up MAC, and without any.
    for trailer in [true, false] {
        c.sim.send(spoof, to1, &reset(&g, session, trailer));
        forged += 1;
    }
    // The next 64 data packets, with the right session and sequence numbers and other
    // bytes, then 16 with the right tags (what the genuine sends will use next).
    let fake = [0xEEu8; 64];
    for k in 0..80u32 {
        let mut h = g.header;
        h.seq = seq.wrapping_add(1 + k);
        let m = wire::packet::MsgRepr {
            msg_id: gm.msg_id.wrapping_add(1 + k),
            tag: Some(if k < 64 {
                0xBAD
            } else {
                10 + u64::from(k - 64)
            }),
            payload: &fake,
            total_len: 64,
            ack: None,
            ..gm
        };
        let bytes = forge(
            &Repr {
                header: h,
                body: Body::Msg(m),
            },
            k % 2 == 0,
        );
        c.sim.send(spoof, to1, &bytes);
        forged += 1;
    }
    // An ACK to node 0 as from node 1, acknowledging far ahead (it would drop data
    // node 0 has not delivered yet).
    let ack_seen = sniffed(&c, &tapped, 1, 0, PacketType::Ack);
    let a = Repr::parse_bytes(&ack_seen).unwrap();
    let Body::Ack(ab) = a.body else {
        panic!("{a:?}")
    };
    let spoof1 = c.sim.add_port(node_addr(&c, 1));
    let bad_ack = forge(
        &Repr {
            header: a.header,
            body: Body::Ack(AckRepr {
                cum_ack: ab.cum_ack.wrapping_add(40),
                ..ab
            }),
        },
        true,
    );
    c.sim.send(spoof1, node_addr(&c, 0), &bad_ack);
    // And the genuine data packet again (a replay: its MAC is valid).
    c.sim.send(spoof, to1, &genuine);
    c.run_for(Duration::from_millis(2));
    let after = stats(&c, 1);
    assert_eq!(after.rx_bad_mac - before.rx_bad_mac, forged, "{after:?}");
    assert_eq!(stats(&c, 0).rx_bad_mac, 1, "the forged ACK");
    assert!(after.rx_duplicates > before.rx_duplicates, "the replay");
    assert_eq!(after.resets_received, 0);
    assert_eq!(after.peer_failures, 0);
    // The session carries on: 20 genuine messages (tags 10.. as the forgeries had),
    // each exactly once, intact, in both directions.
    let rx = messages(&mut c, 0, 1, 10, 20);
    c.run_for(Duration::from_millis(5));
    let n1 = &mut c.nodes[1];
    let mut late = Vec::new();
    n1.drain_cq(n1.rx_cq, &mut late);
    assert!(late.is_empty(), "nothing more arrived: {late:?}");
    delivered_once(&c, 1, &rx, 10, 20);
    let back = messages(&mut c, 1, 0, 100, 5);
    delivered_once(&c, 0, &back, 100, 5);
    for (i, j) in [(0, 1), (1, 0)] {
        assert_eq!(peer_state(&c, i, j), Some(PeerState::Established));
        let s = stats(&c, i);
        assert_eq!(
            (s.peer_failures, s.resets_received, s.sessions),
            (0, 0, 1),
            "{s:?}"
        );
    }
}

#[test]
fn without_a_key_the_same_forged_reset_ends_the_session() {
    // The control: what the MAC is for. A RESET naming the sniffed session, spoofed.
    let mut c = cluster(b"");
    c.sim.set_tap(true);
    let rx = messages(&mut c, 0, 1, 1, 1);
    delivered_once(&c, 1, &rx, 1, 1);
    let tapped = c.sim.take_tapped();
    let genuine = sniffed(&c, &tapped, 0, 1, PacketType::Tagged);
    assert!(!mac::has_mac(&genuine), "no key, no MAC: bytes as before");
    let g = Repr::parse_bytes(&genuine).unwrap();
    let spoof = c.sim.add_port(node_addr(&c, 0));
    c.sim
        .send(spoof, node_addr(&c, 1), &reset(&g, g.header.session, false));
    c.run_for(Duration::from_millis(1));
    let s = stats(&c, 1);
    assert_eq!(
        (s.resets_received, s.peer_failures, s.rx_bad_mac),
        (1, 1, 0)
    );
}

#[test]
fn a_peer_without_a_key_is_refused_by_one_with_a_key_both_ways() {
    let keyed = NodeConfig {
        auth_key: KEY.to_vec(),
        ..NodeConfig::default()
    };
    let mut c = Cluster::new(NetSim::new(7, Faults::default()), 3, &keyed).unwrap();
    // Node 2 has no key.
    let addrs: Vec<_> = c.nodes.iter().map(|n| n.addr()).collect();
    let port = c.nodes[2].port;
    c.sim.detach(port);
    let plain = NodeConfig {
        seed: 77,
        ..NodeConfig::default()
    };
    c.nodes[2] = Node::new(&mut c.sim, [10, 0, 0, 3], &plain).unwrap();
    for a in &addrs {
        c.nodes[2].insert(*a).unwrap();
    }
    for (from, to, ctx) in [(2usize, 0u64, 0xC2u64), (0, 2, 0xC0)] {
        let a = c.nodes[from].put(0, b"who goes there");
        c.nodes[from]
            .op(|d, ep, m| d.send(ep, m, IoVec::new(a, 14), to, ctx))
            .unwrap();
        // A keyed side cannot verify the unkeyed side's REJECT: it fails when its
        // handshake times out (about 1.4 s), not at once.
        let mut t = Vec::new();
        for _ in 0..3000 {
            c.run_for(Duration::from_millis(1));
            let n = &mut c.nodes[from];
            n.drain_cq(n.tx_cq, &mut t);
            if !t.is_empty() {
                break;
            }
        }
        assert_eq!(
            t.iter().map(|t| (t.context, t.err)).collect::<Vec<_>>(),
            vec![(ctx, Some(Errno::EKEYREJECTED))]
        );
    }
    assert!(stats(&c, 0).auth_failures >= 1 && stats(&c, 2).auth_failures >= 1);
    let n = &mut c.nodes[0];
    let mut r = Vec::new();
    n.drain_cq(n.rx_cq, &mut r);
    assert!(r.is_empty());
}

#[test]
fn a_forged_reject_or_retry_neither_fails_nor_stalls_a_keyed_handshake() {
    let mut c = cluster(KEY);
    c.sim.set_tap(true);
    c.nodes[1]
        .op(|d, ep, _| d.trecv(ep, IoVec::new(B + 8192, 64), FI_ADDR_UNSPEC, 1, 0, 1))
        .unwrap();
    let a = c.nodes[0].put(0, &payload(1));
    c.nodes[0]
        .op(|d, ep, m| d.tsend(ep, m, IoVec::new(a, 64), 1, 1, 1))
        .unwrap();
    // The attacker sees node 0's first HELLO leave and answers it at once, as node 1,
    // before node 1's own answer can arrive: REJECT(AUTH_FAILED) and a RETRY with a
    // made-up cookie, each with a made-up MAC and without one.
    let (from0, to1) = (node_addr(&c, 0), node_addr(&c, 1));
    let mut tapped = Vec::new();
    let end = c.sim.now() + Duration::from_millis(5);
    let is_hello = |d: &Datagram| {
        d.src == from0
            && d.dst == to1
            && Packet::new_unchecked(&d.payload[..]).packet_type() == Some(PacketType::Hello)
    };
    c.run_until(end, u64::MAX, |c| {
        tapped.extend(c.sim.take_tapped());
        tapped.iter().any(is_hello)
    })
    .expect("node 0 says HELLO");
    let hello = tapped.iter().find(|d| is_hello(d)).unwrap();
    let h = Repr::parse_bytes(&hello.payload).unwrap();
    let Body::Hello(hb) = h.body else {
        panic!("{h:?}")
    };
    let header = Header {
        src_ep: h.header.dst_ep,
        dst_ep: h.header.src_ep,
        session: hb.rx_session,
        seq: 0,
        crc: h.header.crc,
        ack_req: false,
    };
    let spoof = c.sim.add_port(to1);
    let bodies = [
        Body::Reject(RejectRepr {
            reason: reject::AUTH_FAILED,
            ver_min: 1,
            ver_max: 1,
        }),
        Body::Retry(RetryRepr { cookie: [0x5A; 16] }),
    ];
    for body in bodies {
        for trailer in [true, false] {
            c.sim
                .send(spoof, from0, &forge(&Repr { header, body }, trailer));
        }
    }
    let _forgeries = c.sim.take_tapped();
    // The handshake completes and the message arrives.
    let rx = c.wait_cq(1, true, 1, Duration::from_secs(2)).unwrap();
    delivered_once(&c, 1, &rx, 1, 1);
    let tx = c.wait_cq(0, false, 1, Duration::from_secs(1)).unwrap();
    assert_eq!(tx[0].err, None, "{tx:?}");
    let s = stats(&c, 0);
    assert_eq!(s.rx_bad_mac, 4, "{s:?}");
    assert_eq!((s.peer_failures, s.sessions), (0, 1), "{s:?}");
    assert_eq!(peer_state(&c, 0, 1), Some(PeerState::Established));
    // Node 1's genuine RETRY was sealed (under the answer key) and accepted.
    tapped.extend(c.sim.take_tapped());
    let retry = sniffed(&c, &tapped, 1, 0, PacketType::Retry);
    assert!(mac::has_mac(&retry));
    assert!(s.retries_received >= 1, "{s:?}");
}

#[test]
fn keyed_traffic_through_loss_reordering_duplication_and_corruption_arrives_exactly_once() {
    use hosted::simlink::traffic::{Plan, memory_needed, run};
    use ofi_nostd::rdm::RdmConfig;
    // No CRC: the MAC is what catches the corrupted datagrams (and they are resent).
    let cfg = NodeConfig {
        auth_key: KEY.to_vec(),
        mem_size: memory_needed(),
        rdm: RdmConfig {
            crc: false,
            ..NodeConfig::default().rdm
        },
        ..NodeConfig::default()
    };
    let faults = Faults {
        loss: 0.05,
        reorder: 0.05,
        duplicate: 0.02,
        corrupt: 0.01,
        delay: Duration::from_micros(2),
        jitter: Duration::from_micros(1),
        rate_bps: 10_000_000_000,
        ..Faults::default()
    };
    let mut c = Cluster::new(NetSim::new(5, faults), 4, &cfg).unwrap();
    let r = run(&mut c, &Plan::mixed(4000, 3), Duration::from_secs(60));
    assert_eq!((r.received, r.sent), (4000, 4000));
    assert!(c.sim.stats().corrupted > 10);
    let mut bad_mac = 0;
    for i in 0..c.nodes.len() {
        let s = stats(&c, i);
        assert_eq!((s.peer_failures, s.resets_received), (0, 0), "{s:?}");
        bad_mac += s.rx_bad_mac;
    }
    assert!(bad_mac > 5, "corrupted packets fail their MAC: {bad_mac}");
}
