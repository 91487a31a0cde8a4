//! The acceptance test: 8 endpoints (8 domains) exchange 1,000,000 messages,
//! all to all, untagged and tagged, over a network with 10% loss, 5% reordering, 1%
//! duplication and 0.1% corruption. Every message must arrive exactly once and intact,
//! matched in send order per (sender, receiver, kind), and every completion must carry
//! the right context, length, tag, CQ data and source.
//!
//! Sizes: 90% are 1..=256 B, 9% are 257 B..=64 KiB and 1% are 64 KiB..=1 MiB, each
//! class log-uniform, so the total (about 4.5 GB of payload, 8 million datagrams) stays
//! testable in a minute or two of optimised code. Messages above 8 KiB go by rendezvous.
//! `RDM_MILLION_MESSAGES` overrides the count (e.g. for a quick local run).

use hosted::netsim::{Faults, NetSim};
use hosted::simlink::traffic::{Plan, memory_needed, run};
use hosted::simlink::{Cluster, NodeConfig};
use ofi_nostd::rdm::RdmConfig;
use ofi_nostd::time::Duration;

fn messages() -> usize {
    std::env::var("RDM_MILLION_MESSAGES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

/// The fault mix.
fn fault_mix() -> Faults {
    Faults {
        loss: 0.10,
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
fn one_million_messages_eight_endpoints_fault_mix() {
    let n = messages();
    let cfg = NodeConfig {
        mem_size: memory_needed(),
        ..NodeConfig::default()
    };
    let mut c = Cluster::new(NetSim::new(1_000_000, fault_mix()), 8, &cfg).unwrap();
    let start = std::time::Instant::now();
    let r = run(&mut c, &Plan::mixed(n, 42), Duration::from_secs(20));
    eprintln!(
        "{n} messages, {} bytes, {:?} virtual, {:?} wall, {} driver steps, {:?}",
        r.bytes,
        r.elapsed,
        start.elapsed(),
        c.steps,
        c.sim.stats()
    );
    assert_eq!((r.received, r.sent), (n, n));
    let (mut tx_bundles, mut rx_bundled) = (0, 0);
    for node in &c.nodes {
        let st = node.dom.ep(node.ep).unwrap().rdm().unwrap().stats();
        assert_eq!(st.peer_failures, 0);
        assert_eq!(st.rx_protocol_errors, 0);
        tx_bundles += st.tx_bundles;
        rx_bundled += st.rx_bundled_msgs;
    }
    // Queued small messages went as BUNDLEs, through the same losses.
    eprintln!("{tx_bundles} bundles sent, {rx_bundled} bundled messages taken");
    assert!(tx_bundles > 0 && rx_bundled > 0);
}

/// The same fault mix with 1,024-packet windows and SACK ranges (spec 5.6), a tenth of
/// the messages: reordering, duplicates and corruption beyond the bitmap's reach still
/// deliver everything exactly once, and SACKs were used.
#[test]
fn wide_windows_fault_mix_exactly_once() {
    let n = messages() / 10;
    let cfg = NodeConfig {
        mem_size: memory_needed(),
        rdm: RdmConfig {
            window: 1024,
            reorder_slots: 2048,
            ..NodeConfig::default().rdm
        },
        ..NodeConfig::default()
    };
    let mut c = Cluster::new(NetSim::new(1_000_001, fault_mix()), 8, &cfg).unwrap();
    let r = run(&mut c, &Plan::mixed(n, 43), Duration::from_secs(20));
    assert_eq!((r.received, r.sent), (n, n));
    let mut sacks = 0;
    for node in &c.nodes {
        let st = node.dom.ep(node.ep).unwrap().rdm().unwrap().stats();
        assert_eq!(st.peer_failures, 0);
        assert_eq!(st.rx_protocol_errors, 0);
        sacks += st.rx_sacks;
    }
    eprintln!("{n} messages, {:?} virtual, {sacks} SACKs taken", r.elapsed);
    assert!(sacks > 0);
}
