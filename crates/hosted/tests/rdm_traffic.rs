//! All-to-all traffic on the simulator with the fault mix, checked message by
//! message (see `hosted::simlink::traffic`). The quick variants run in every test run.

use hosted::netsim::{Faults, NetSim};
use hosted::simlink::traffic::{Plan, memory_needed, run};
use hosted::simlink::{Cluster, NodeConfig};
use ofi_nostd::rdm::RdmConfig;
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

/// A sweep of harsher networks (up to 30% loss, 10% reordering, 5% duplication, 1%
/// corruption, several link rates) and of tight engine resources (8-packet windows,
/// 16 reorder slots, small unexpected pools), 2 to 6 endpoints.
#[test]
fn seed_sweep_harsh_networks_and_tight_resources() {
    for seed in 0..12u64 {
        let loss = [0.0, 0.05, 0.2, 0.3][seed as usize % 4];
        let faults = Faults {
            loss,
            reorder: 0.1,
            duplicate: 0.05,
            corrupt: 0.01,
            delay: Duration::from_micros(3),
            jitter: Duration::from_micros(5),
            rate_bps: [0, 1_000_000_000, 10_000_000_000][seed as usize % 3],
            ..Faults::default()
        };
        let small = seed % 2 == 1;
        let cfg = NodeConfig {
            rdm: RdmConfig {
                window: if small { 8 } else { 64 },
                reorder_slots: if small { 16 } else { 256 },
                unexp_slots: if small { 64 } else { 256 },
                unexp_msgs: if small { 32 } else { 256 },
                ..NodeConfig::default().rdm
            },
            ..cfg()
        };
        let n = 2 + (seed as usize % 5);
        let mut c = Cluster::new(NetSim::new(seed, faults), n, &cfg).unwrap();
        let r = run(&mut c, &Plan::mixed(1500, seed), Duration::from_secs(120));
        assert_eq!((r.received, r.sent), (1500, 1500), "seed {seed}");
        for node in &c.nodes {
            let st = node.dom.ep(node.ep).unwrap().rdm().unwrap().stats();
            assert_eq!(st.peer_failures, 0, "seed {seed}");
        }
    }
}
