//! All-to-all traffic on the simulator with the fault mix, checked message by
//! message (see `hosted::simlink::traffic`). The quick variants run in every test run.

use hosted::netsim::{Faults, NetSim};
use hosted::simlink::traffic::{Plan, memory_needed, run};
use hosted::simlink::{Cluster, NodeConfig};
use ofi_nostd::time::Duration;

fn cfg() -> NodeConfig {
    NodeConfig {
        mem_size: memory_needed(),
        ..NodeConfig::default()
    }
}

fn faults(loss: f64) -> Faults {
    Faults {
        loss,
        reorder: 0.05,
        duplicate: 0.01,
        corrupt: 0.001,
        delay: Duration::from_micros(2),
        jitter: Duration::from_micros(1),
        rate_bps: 10_000_000_000,
        ..Faults::default()
    }
}

#[test]
fn two_nodes_lossless() {
    let mut c = Cluster::new(NetSim::new(1, Faults::default()), 2, &cfg()).unwrap();
    let r = run(&mut c, &Plan::mixed(300, 5), Duration::from_secs(10));
    assert_eq!(r.received, 300);
}

/// 20,000 messages, 8 endpoints, 10% loss + 5% reordering + 1% duplication + 0.1%
/// corruption: the quick sibling of the 1,000,000-message test.
#[test]
fn eight_nodes_with_faults_quick() {
    let mut c = Cluster::new(NetSim::new(2, faults(0.10)), 8, &cfg()).unwrap();
    let r = run(&mut c, &Plan::mixed(20_000, 6), Duration::from_secs(60));
    assert_eq!((r.received, r.sent), (20_000, 20_000));
    // The faults really happened and were repaired.
    let st = c.sim.stats().clone();
    assert!(st.lost > 1000 && st.duplicated > 100 && st.reordered > 1000 && st.corrupted > 10);
    let mut crc_drops = 0;
    let mut retransmits = 0;
    for n in &c.nodes {
        crc_drops += n.dom.stats().rx_bad_checksum;
        let rdm = *n.dom.ep(n.ep).unwrap().rdm().unwrap().stats();
        retransmits += rdm.tx_fast_retransmits + rdm.tx_timeout_retransmits;
        assert_eq!(rdm.peer_failures, 0);
        assert_eq!(rdm.rx_protocol_errors, 0);
    }
    assert!(crc_drops > 10, "corrupted datagrams are caught by CRC32C");
    assert!(retransmits > 1000);
}
