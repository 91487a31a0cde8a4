//! Goodput versus loss, measured in the simulator and kept as a snapshot
//! (`tests/snapshots/rdm_goodput.txt`). Everything is seeded, so the table is exact;
//! run with `UPDATE_SNAPSHOTS=1` to rewrite it after an intended change.
//!
//! Setup: two endpoints, one-way traffic from node 0 to node 1 over a 10 Gbit/s link
//! with 10 µs one-way delay; 2,000 messages of 4 KiB (eager) and 200 of 256 KiB
//! (rendezvous), each with up to 48 sends in flight. Loss hits every datagram, data
//! and acks alike. Goodput is payload bytes delivered divided by the virtual time from
//! the first post to the last completion.

use hosted::netsim::{Faults, NetSim};
use hosted::simlink::traffic::{Plan, memory_needed, run};
use hosted::simlink::{Cluster, NodeConfig};
use ofi_nostd::time::Duration;

const LOSSES: [f64; 6] = [0.0, 0.001, 0.01, 0.05, 0.10, 0.20];

struct Row {
    loss: f64,
    gbps: [f64; 2],
    retransmits: u64,
    timeouts: u64,
}

fn measure(loss: f64, size: usize, messages: usize) -> (f64, u64, u64) {
    let faults = Faults {
        loss,
        delay: Duration::from_micros(10),
        rate_bps: 10_000_000_000,
        ..Faults::default()
    };
    let cfg = NodeConfig {
        mem_size: memory_needed(),
        ..NodeConfig::default()
    };
    let mut c = Cluster::new(NetSim::new(99, faults), 2, &cfg).unwrap();
    let plan = Plan {
        sizes: vec![(100, size, size)],
        one_way: true,
        dest_window: 48,
        slack: 48,
        recv_ahead: 48,
        ..Plan::mixed(messages, 11)
    };
    let r = run(&mut c, &plan, Duration::from_secs(60));
    assert_eq!(r.received, messages);
    let gbps = r.bytes as f64 * 8.0 / (r.elapsed.total_micros() as f64 * 1000.0);
    let st = c.nodes[0]
        .dom
        .ep(c.nodes[0].ep)
        .unwrap()
        .rdm()
        .unwrap()
        .stats();
    (
        gbps,
        st.tx_fast_retransmits + st.tx_timeout_retransmits,
        st.rto_expirations,
    )
}

fn table() -> (Vec<Row>, String) {
    let mut rows = Vec::new();
    for loss in LOSSES {
        let (eager, r1, t1) = measure(loss, 4096, 2000);
        let (rndv, r2, t2) = measure(loss, 256 << 10, 200);
        rows.push(Row {
            loss,
            gbps: [eager, rndv],
            retransmits: r1 + r2,
            timeouts: t1 + t2,
        });
    }
    let mut s = String::new();
    s.push_str("# Goodput vs loss: 10 Gbit/s link, 10 us one-way delay, one-way traffic\n");
    s.push_str("# loss%  eager-4KiB-Gbit/s (rel)  rndv-256KiB-Gbit/s (rel)  retransmits  rto-expirations\n");
    let base = rows[0].gbps;
    for r in &rows {
        s.push_str(&format!(
            "{:6.1}  {:10.3} ({:5.1}%)  {:10.3} ({:5.1}%)  {:11}  {:15}\n",
            r.loss * 100.0,
            r.gbps[0],
            100.0 * r.gbps[0] / base[0],
            r.gbps[1],
            100.0 * r.gbps[1] / base[1],
            r.retransmits,
            r.timeouts
        ));
    }
    (rows, s)
}

#[test]
fn goodput_versus_loss_snapshot() {
    let (rows, text) = table();
    eprintln!("{text}");
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/snapshots/rdm_goodput.txt"
    );
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(path, &text).unwrap();
    }
    let want = std::fs::read_to_string(path).unwrap_or_default();
    assert_eq!(
        text, want,
        "goodput table changed (UPDATE_SNAPSHOTS=1 to accept)"
    );
    // The bar: at 1% loss, at least 80% of the lossless goodput.
    let one = rows.iter().find(|r| r.loss == 0.01).unwrap();
    for k in 0..2 {
        assert!(
            one.gbps[k] >= 0.8 * rows[0].gbps[k],
            "1% loss: {} vs {} Gbit/s",
            one.gbps[k],
            rows[0].gbps[k]
        );
    }
}
