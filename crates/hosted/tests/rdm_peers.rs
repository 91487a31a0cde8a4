//! More peers than the peer table holds (an MPI job with more ranks than `max_peers`):
//! idle sessions are forgotten to make room, a peer that still sends on a session we
//! forgot gets RESET(UNKNOWN_SESSION) and sends again on a new session, and a HELLO that
//! finds the table full of recent sessions is asked to come back later. Every message
//! arrives exactly once, intact; nothing fails.

use hosted::netsim::{Faults, NetSim};
use hosted::simlink::{Cluster, Completion, Node, NodeConfig};
use ofi_nostd::errno::Errno;
use ofi_nostd::flags::FI_ADDR_UNSPEC;
use ofi_nostd::mem::IoVec;
use ofi_nostd::rdm::{RdmConfig, RdmStats};
use ofi_nostd::time::Duration;

const B: u64 = Node::BASE;
const NODES: usize = 10;
const TABLE: usize = 4;

fn cluster(faults: Faults) -> Cluster {
    let cfg = NodeConfig {
        rdm: RdmConfig {
            max_peers: TABLE,
            ..NodeConfig::default().rdm
        },
        ..NodeConfig::default()
    };
    Cluster::new(NetSim::new(11, faults), NODES, &cfg).expect("cluster")
}

fn stats(c: &Cluster, i: usize) -> RdmStats {
    let n = &c.nodes[i];
    *n.dom.ep(n.ep).unwrap().rdm().unwrap().stats()
}

fn payload(from: usize, to: usize) -> Vec<u8> {
    (0..200).map(|k| (from * 31 + to * 7 + k) as u8).collect()
}

/// Node `from` sends one tagged message to node `to` (fi_addr `to` everywhere), which
/// has a receive posted; a post refused with -FI_EAGAIN (the table is full and nobody
/// is idle long enough yet) is retried while time passes, as an application retries
/// after progress. Returns both completions.
fn one_message(c: &mut Cluster, from: usize, to: usize) -> (Completion, Completion) {
    let tag = (from * 100 + to) as u64;
    c.nodes[to]
        .op(|d, ep, _| d.trecv(ep, IoVec::new(B + 8192, 4096), FI_ADDR_UNSPEC, tag, 0, tag))
        .unwrap();
    let data = payload(from, to);
    let a = c.nodes[from].put(0, &data);
    let mut tries = 0;
    loop {
        let r = c.nodes[from]
            .op(|d, ep, m| d.tsend(ep, m, IoVec::new(a, data.len()), to as u64, tag, tag));
        match r {
            Ok(()) => break,
            Err(Errno::EAGAIN) => {
                tries += 1;
                assert!(
                    tries < 200,
                    "{from} -> {to}: the peer table never made room"
                );
                c.run_for(Duration::from_millis(100));
            }
            Err(e) => panic!("{from} -> {to}: {e:?}"),
        }
    }
    let (mut txs, mut rxs) = (Vec::new(), Vec::new());
    let deadline = c.sim.now() + Duration::from_secs(30);
    let r = c.run_until(deadline, 10_000_000, |c| {
        let n = &mut c.nodes[from];
        n.drain_cq(n.tx_cq, &mut txs);
        let n = &mut c.nodes[to];
        n.drain_cq(n.rx_cq, &mut rxs);
        !txs.is_empty() && !rxs.is_empty()
    });
    assert!(
        r.is_ok(),
        "{from} -> {to}: {r:?}, sent {txs:?}, received {rxs:?}"
    );
    assert_eq!(txs.len(), 1, "{from} -> {to}: {txs:?}");
    assert_eq!(rxs.len(), 1, "{from} -> {to}: {rxs:?}");
    let (s, m) = (txs[0], rxs[0]);
    assert_eq!((s.err, s.context), (None, tag), "send {from} -> {to}");
    assert_eq!((m.err, m.context, m.len, m.tag), (None, tag, 200, tag));
    assert_eq!(c.nodes[to].get(8192, 200), &data[..], "{from} -> {to}");
    (s, m)
}

fn fan_in_and_out(faults: Faults) -> Cluster {
    let mut c = cluster(faults);
    // Node 0 talks to nine peers through a table of four.
    for to in 1..NODES {
        one_message(&mut c, 0, to);
    }
    // Every peer still has its session with node 0, most of which node 0 forgot: the
    // first packet of each reply meets RESET(UNKNOWN_SESSION) and goes again on a new
    // session, which node 0 makes room for in turn.
    for from in 1..NODES {
        c.run_for(Duration::from_secs(8));
        one_message(&mut c, from, 0);
    }
    // Nothing arrived twice, nothing is left over.
    c.run_for(Duration::from_secs(1));
    for i in 0..NODES {
        let (t, r) = c.nodes[i].completions();
        assert!(t.is_empty() && r.is_empty(), "node {i}: {t:?} {r:?}");
    }
    c
}

#[test]
fn more_peers_than_the_table_holds_lose_nothing() {
    let c = fan_in_and_out(Faults::default());
    let s0 = stats(&c, 0);
    assert!(s0.sessions_evicted >= (NODES - 1 - TABLE) as u64, "{s0:?}");
    let replayed: u64 = (1..NODES).map(|i| stats(&c, i).tx_replayed).sum();
    assert!(replayed >= 1, "no reply met a forgotten session");
    let resets: u64 = (1..NODES).map(|i| stats(&c, i).resets_received).sum();
    assert!(resets >= replayed);
    for i in 0..NODES {
        let s = stats(&c, i);
        assert_eq!(s.rx_msgs, if i == 0 { 9 } else { 1 }, "node {i}: {s:?}");
        assert_eq!(s.tx_msgs, if i == 0 { 9 } else { 1 }, "node {i}: {s:?}");
    }
}

#[test]
fn more_peers_than_the_table_holds_lose_nothing_under_loss() {
    let faults = Faults {
        loss: 0.1,
        duplicate: 0.02,
        reorder: 0.05,
        ..Faults::default()
    };
    let c = fan_in_and_out(faults);
    for i in 0..NODES {
        let s = stats(&c, i);
        assert_eq!(s.rx_msgs, if i == 0 { 9 } else { 1 }, "node {i}: {s:?}");
    }
}

#[test]
fn a_hello_to_a_full_table_waits_for_room_instead_of_failing() {
    let mut c = cluster(Faults::default());
    // Node 0's table fills with four fresh sessions.
    for from in 1..=TABLE {
        one_message(&mut c, from, 0);
    }
    // A fifth node's HELLO finds nothing node 0 may forget yet: REJECT(NO_RESOURCES),
    // and it asks again until a session there has been idle long enough.
    let late = TABLE + 1;
    one_message(&mut c, late, 0);
    assert!(stats(&c, late).hello_busy >= 1, "{:?}", stats(&c, late));
    assert!(stats(&c, 0).rejects_sent >= 1);
    assert_eq!(stats(&c, 0).sessions_evicted, 1);
    assert_eq!(stats(&c, late).peer_failures, 0);
}
