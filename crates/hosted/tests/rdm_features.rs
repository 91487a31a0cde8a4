//! RDM endpoints on the simulator: one test per feature (messages, tagged, rendezvous,
//! peek/claim/discard, cancel, multi-recv, directed receive, selective completion,
//! inject as a default flag, auth keys, peer failure and re-establishment,
//! back-pressure).

use hosted::netsim::{Faults, NetSim};
use hosted::simlink::{Cluster, Completion, Node, NodeConfig};
use ofi_nostd::errno::Errno;
use ofi_nostd::flags::{FI_ADDR_UNSPEC, Flags};
use ofi_nostd::mem::IoVec;
use ofi_nostd::time::{Duration, Instant};

const B: u64 = Node::BASE;

fn cluster(n: usize, faults: Faults, cfg: &NodeConfig) -> Cluster {
    Cluster::new(NetSim::new(7, faults), n, cfg).expect("cluster")
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64 * 7) >> 1) as u8)
        .collect()
}

/// Runs until node `i` has `n` completions on its receive (`rx`) or transmit CQ.
fn wait(c: &mut Cluster, i: usize, rx: bool, n: usize, got: &mut Vec<Completion>) {
    let deadline = c.sim.now() + Duration::from_secs(5);
    let r = c.run_until(deadline, 10_000_000, |c| {
        let node = &mut c.nodes[i];
        let cq = if rx { node.rx_cq } else { node.tx_cq };
        node.drain_cq(cq, got);
        got.len() >= n
    });
    assert!(
        r.is_ok(),
        "waiting for {n} completions on node {i}: {r:?}, got {got:?}"
    );
}

#[test]
fn eager_message_lossless() {
    let mut c = cluster(2, Faults::default(), &NodeConfig::default());
    let data = pattern(1, 100);
    let a = c.nodes[0].put(0, &data);
    c.nodes[1]
        .op(|d, ep, _| d.recv(ep, IoVec::new(B + 4096, 200), FI_ADDR_UNSPEC, 0xB1))
        .unwrap();
    c.nodes[0]
        .op(|d, ep, m| d.senddata(ep, m, IoVec::new(a, 100), 0xDA7A, 1, 0xA1))
        .unwrap();
    let mut rx = Vec::new();
    wait(&mut c, 1, true, 1, &mut rx);
    assert_eq!(rx[0].context, 0xB1);
    assert_eq!(rx[0].len, 100);
    assert_eq!(rx[0].data, 0xDA7A);
    assert_eq!(rx[0].src, 0, "FI_SOURCE: node 0 is fi_addr 0");
    assert!(
        rx[0]
            .flags
            .contains(Flags::RECV | Flags::MSG | Flags::REMOTE_CQ_DATA)
    );
    assert_eq!(c.nodes[1].get(4096, 100), &data[..]);
    let mut tx = Vec::new();
    wait(&mut c, 0, false, 1, &mut tx);
    assert_eq!(tx[0].context, 0xA1);
    assert_eq!(tx[0].err, None);
    let _ = Instant::ZERO;
    let _ = Errno::EAGAIN;
}
