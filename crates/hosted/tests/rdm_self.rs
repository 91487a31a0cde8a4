//! An RDM endpoint that sends to its own address (fi_av_insert of its own fi_getname,
//! as Open MPI's `pml cm` does for a rank's messages to itself), through the safe API
//! over a real UDP loopback socket: eager, tagged and rendezvous messages, FI_SOURCE.

use std::time::Duration;

use hosted::api::{AutoProgress, Buf, Completion, Cq, Fabric, ProgressMode};
use hosted::ofi_nostd::flags::Flags;
use hosted::ofi_nostd::info::EpType;

const WAIT: Duration = Duration::from_secs(5);

/// Reads `n` completions of `cq` (sread drives a manual-progress domain).
fn take(cq: &Cq<u64>, n: usize) -> Vec<Completion<u64>> {
    (0..n)
        .map(|_| cq.sread(WAIT).expect("completion"))
        .collect()
}

fn self_send(mode: ProgressMode, key: &[u8]) {
    let fabric = Fabric::open().unwrap();
    let domain = fabric
        .domain()
        .progress(mode)
        .auth_key(key)
        .open::<u64>()
        .unwrap();
    assert_eq!(&domain.info().domain_attr.auth_key[..], key);
    let tx = domain.cq(0).unwrap();
    let rx = domain.cq(0).unwrap();
    let av = domain.av().unwrap();
    let ep = domain.endpoint(EpType::Rdm).unwrap();
    ep.bind_cq(&tx, Flags::TRANSMIT).unwrap();
    ep.bind_cq(&rx, Flags::RECV).unwrap();
    ep.bind_av(&av).unwrap();
    ep.enable().unwrap();
    let me = av.insert(ep.addr()).unwrap();

    // Tagged: a decoy receive for another tag must stay untouched.
    ep.trecv(Buf::zeroed(64), me, 6, 0, 60).unwrap();
    ep.trecv(Buf::zeroed(64), me, 5, 0, 50).unwrap();
    ep.tsend(Buf::from(&b"to myself"[..]), me, 5, 1).unwrap();
    let s = take(&tx, 1);
    assert_eq!((s[0].context, s[0].result()), (1, Ok(9)));
    assert!(s[0].is_send());
    let r = take(&rx, 1);
    assert_eq!(
        (r[0].context, r[0].tag, r[0].src, r[0].result()),
        (50, Some(5), me, Ok(9)),
        "matched by tag, FI_SOURCE is our own fi_addr"
    );
    assert_eq!(&*r[0].buf, b"to myself");

    // Untagged with remote CQ data, sent before the receive is posted (unexpected).
    ep.senddata(Buf::from(&b"early"[..]), 0xfeed, me, 2)
        .unwrap();
    assert_eq!(take(&tx, 1)[0].context, 2);
    ep.recv(Buf::zeroed(16), me, 51).unwrap();
    let r = take(&rx, 1);
    assert_eq!(
        (r[0].context, r[0].tag, r[0].data, r[0].src),
        (51, None, Some(0xfeed), me)
    );
    assert_eq!(&*r[0].buf, b"early");

    // Above the eager threshold: rendezvous to ourselves.
    let big: Vec<u8> = (0..300_000u32).map(|i| (i * 13 + 1) as u8).collect();
    ep.trecv(Buf::zeroed(512 * 1024), me, 9, 0, 52).unwrap();
    ep.tsend(Buf::from(big.clone()), me, 9, 3).unwrap();
    let r = take(&rx, 1);
    assert_eq!(
        (r[0].context, r[0].src, r[0].result()),
        (52, me, Ok(big.len()))
    );
    assert!(r[0].buf[..] == big[..], "rendezvous payload intact");
    let s = take(&tx, 1);
    assert_eq!(s[0].context, 3);
    assert!(s[0].buf[..] == big[..], "send buffer back intact");

    // Many small messages in a row arrive in order.
    for i in 0..100u64 {
        ep.trecv(Buf::zeroed(8), me, 0x100, 0, 1000 + i).unwrap();
    }
    for i in 0..100u64 {
        ep.tsend(Buf::from(i.to_le_bytes().to_vec()), me, 0x100, 2000 + i)
            .unwrap();
    }
    let r = take(&rx, 100);
    for (i, c) in r.iter().enumerate() {
        assert_eq!(c.context, 1000 + i as u64);
        assert_eq!(
            &*c.buf,
            &(i as u64).to_le_bytes()[..],
            "message {i} in order"
        );
    }
    assert_eq!(take(&tx, 100).len(), 100);

    // Only the decoy is still posted.
    let left = ep.close();
    assert_eq!(left.iter().map(|(_, c)| *c).collect::<Vec<_>>(), [60]);
    assert_eq!(domain.buffers_held(), 0);
}

#[test]
fn rdm_send_to_self_manual_progress() {
    self_send(ProgressMode::Manual, b"");
}

/// The same with an auth key set through the safe API's domain builder: every packet
/// of the self session carries a MAC (wire protocol 4.10), one key both ways.
#[test]
fn rdm_send_to_self_with_an_auth_key() {
    self_send(ProgressMode::Manual, b"self secret");
}

#[test]
fn rdm_send_to_self_auto_progress() {
    self_send(ProgressMode::Auto(AutoProgress::default()), b"");
}

/// On the simulator, with an auth key and a network that loses, reorders and
/// duplicates: a node sends eager, tagged and rendezvous messages to itself (node 0 is
/// fi_addr 0 in its own AV) while it also talks to node 1.
#[test]
fn rdm_send_to_self_on_a_faulty_network_with_auth() {
    use hosted::netsim::{Faults, NetSim};
    use hosted::ofi_nostd::flags::FI_ADDR_UNSPEC;
    use hosted::ofi_nostd::mem::IoVec;
    use hosted::ofi_nostd::time::Duration as SimDuration;
    use hosted::simlink::{Cluster, Node, NodeConfig};

    let faults = Faults {
        loss: 0.05,
        reorder: 0.05,
        reorder_delay: SimDuration::from_micros(30),
        duplicate: 0.02,
        ..Faults::default()
    };
    let cfg = NodeConfig {
        auth_key: b"self secret".to_vec(),
        mem_size: 4 << 20,
        ..NodeConfig::default()
    };
    let mut c = Cluster::new(NetSim::new(11, faults), 2, &cfg).unwrap();
    let b = Node::BASE;
    let sizes = [1usize, 100, 3000, 8192, 8193, 200_000];
    let pat =
        |k: usize, len: usize| -> Vec<u8> { (0..len).map(|i| (i * 31 + k * 7) as u8).collect() };
    let slot = 256 * 1024;
    for k in 0..sizes.len() {
        let rx_at = b + ((1 + k) * slot) as u64;
        c.nodes[0]
            .op(|d, ep, _| d.trecv(ep, IoVec::new(rx_at, slot), 0, k as u64, 0, 10 + k as u64))
            .unwrap();
    }
    // And some traffic with node 1 in between (a second session of node 0).
    c.nodes[1]
        .op(|d, ep, _| d.recv(ep, IoVec::new(b, 64), FI_ADDR_UNSPEC, 99))
        .unwrap();
    for (k, &len) in sizes.iter().enumerate() {
        let off = (8 + k) * slot;
        let a = c.nodes[0].put(off, &pat(k, len));
        c.nodes[0]
            .op(|d, ep, m| d.tsend(ep, m, IoVec::new(a, len), 0, k as u64, 100 + k as u64))
            .unwrap();
        if k == 2 {
            let a = c.nodes[0].put(15 * slot, b"hello node 1");
            c.nodes[0]
                .op(|d, ep, m| d.send(ep, m, IoVec::new(a, 12), 1, 200))
                .unwrap();
        }
    }
    let mut rx = Vec::new();
    let mut tx = Vec::new();
    let deadline = c.sim.now() + SimDuration::from_secs(10);
    let r = c.run_until(deadline, 10_000_000, |c| {
        let n = &mut c.nodes[0];
        let (txq, rxq) = (n.tx_cq, n.rx_cq);
        n.drain_cq(rxq, &mut rx);
        n.drain_cq(txq, &mut tx);
        rx.len() >= sizes.len() && tx.len() > sizes.len()
    });
    assert!(r.is_ok(), "{r:?}: rx {rx:?} tx {tx:?}");
    for (k, &len) in sizes.iter().enumerate() {
        let got = rx.iter().find(|e| e.context == 10 + k as u64).unwrap();
        assert_eq!(
            (got.len, got.tag, got.src, got.err),
            (len, k as u64, 0, None)
        );
        assert_eq!(c.nodes[0].get((1 + k) * slot, len), &pat(k, len)[..], "{k}");
        let s = tx.iter().find(|e| e.context == 100 + k as u64).unwrap();
        assert_eq!(s.err, None);
    }
    let stats = *c.nodes[0]
        .dom
        .ep(c.nodes[0].ep)
        .unwrap()
        .rdm()
        .unwrap()
        .stats();
    assert_eq!(stats.sessions, 2, "self and node 1: {stats:?}");
    assert_eq!(
        (stats.peer_failures, stats.auth_failures),
        (0, 0),
        "{stats:?}"
    );
}
