//! Windows beyond 64 packets on a link whose bandwidth-delay product needs them, kept
//! as a snapshot (`tests/snapshots/rdm_window.txt`; seeded, so exact:
//! `UPDATE_SNAPSHOTS=1` rewrites it after an intended change).
//!
//! Setup: node 0 sends 1 MiB messages (rendezvous, three at once) to node 1 over a 10
//! Gbit/s link with 100 or 300 µs one-way delay: about 170 or 500 packets of 1472 bytes
//! are in flight at line rate, so a 64-packet window runs at a fraction of it. With
//! 1,024-packet windows and SACK ranges (spec 5.6) the sender keeps up to 1,024
//! packets outstanding (RFC 6675's pipe: neither acknowledged nor selectively
//! acknowledged nor deemed lost), within a receive window (span) of [`SPAN`] packets
//! and as many reorder slots: a lost packet holds the cumulative ack back about two
//! round trips, and the sender goes on meanwhile. Loss hits every datagram, data and
//! acks alike.

use hosted::netsim::{Faults, NetSim};
use hosted::simlink::traffic::{Plan, memory_needed, run};
use hosted::simlink::{Cluster, NodeConfig};
use ofi_nostd::rdm::RdmConfig;
use ofi_nostd::time::Duration;

const MESSAGES: usize = 40;

/// Receive window and reorder slots of the wide rows: the 1,024 packets outstanding
/// plus two round trips at 300 µs (about 1,000 packets) behind a hole, with room.
const SPAN: u16 = 4096;

struct Row {
    delay_us: u64,
    window: u16,
    loss: f64,
    gbps: f64,
    retransmits: u64,
    timeouts: u64,
    sacks: u64,
    acks: u64,
    data_packets: u64,
}

fn measure(delay_us: u64, window: u16, loss: f64) -> Row {
    let faults = Faults {
        loss,
        delay: Duration::from_micros(delay_us),
        rate_bps: 10_000_000_000,
        ..Faults::default()
    };
    let cfg = NodeConfig {
        mem_size: memory_needed(),
        rdm: RdmConfig {
            max_peers: 2,
            window,
            rx_window: if window > 64 { SPAN } else { 0 },
            reorder_slots: if window > 64 { SPAN as usize } else { 1024 },
            ..NodeConfig::default().rdm
        },
        ..NodeConfig::default()
    };
    let mut c = Cluster::new(NetSim::new(7, faults), 2, &cfg).unwrap();
    let plan = Plan {
        sizes: vec![(100, 1 << 20, 1 << 20)],
        one_way: true,
        send_window: 3,
        dest_window: 3,
        slack: 3,
        recv_ahead: 3,
        ..Plan::mixed(MESSAGES, 5)
    };
    let r = run(&mut c, &plan, Duration::from_secs(60));
    assert_eq!(r.received, MESSAGES);
    let st = |i: usize| {
        *c.nodes[i]
            .dom
            .ep(c.nodes[i].ep)
            .unwrap()
            .rdm()
            .unwrap()
            .stats()
    };
    let (tx, rx) = (st(0), st(1));
    Row {
        delay_us,
        window,
        loss,
        gbps: r.bytes as f64 * 8.0 / (r.elapsed.total_micros() as f64 * 1000.0),
        retransmits: tx.tx_fast_retransmits + tx.tx_timeout_retransmits,
        timeouts: tx.rto_expirations,
        sacks: rx.sacks_sent,
        acks: rx.acks_sent + rx.acks_piggybacked,
        data_packets: rx.rx_packets,
    }
}

fn table() -> (Vec<Row>, String) {
    let rows = vec![
        measure(100, 64, 0.0),
        measure(100, 1024, 0.0),
        measure(100, 1024, 0.001),
        measure(100, 1024, 0.01),
        measure(300, 1024, 0.0),
        measure(300, 1024, 0.01),
    ];
    let mut s = String::new();
    s.push_str("# 1 MiB rendezvous, 10 Gbit/s link, one-way traffic; rel: to the lossless 1024 row of the same delay\n");
    s.push_str("# window: packets outstanding; the 1024 rows span 4096 (receive window and reorder slots)\n");
    s.push_str("# delay-us  window  loss%  Gbit/s (rel)  retransmits  rto-expirations  sacks  acks  packets-received\n");
    for r in &rows {
        let base = rows
            .iter()
            .find(|b| b.delay_us == r.delay_us && b.window == 1024 && b.loss == 0.0)
            .map_or(r.gbps, |b| b.gbps);
        s.push_str(&format!(
            "{:8}  {:6}  {:5.1}  {:7.3} ({:5.1}%)  {:11}  {:15}  {:5}  {:4}  {:16}\n",
            r.delay_us,
            r.window,
            r.loss * 100.0,
            r.gbps,
            100.0 * r.gbps / base,
            r.retransmits,
            r.timeouts,
            r.sacks,
            r.acks,
            r.data_packets
        ));
    }
    (rows, s)
}

#[test]
fn goodput_with_1024_packets_in_flight_snapshot() {
    let (rows, text) = table();
    eprintln!("{text}");
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/snapshots/rdm_window.txt"
    );
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(path, &text).unwrap();
    }
    let want = std::fs::read_to_string(path).unwrap_or_default();
    assert_eq!(
        text, want,
        "window table changed (UPDATE_SNAPSHOTS=1 to accept)"
    );
    let (narrow, wide, one, far, far_one) = (&rows[0], &rows[1], &rows[3], &rows[4], &rows[5]);
    // Packets in flight by Little's law: goodput times the round trip over a packet's
    // payload (1,424 bytes of rendezvous DATA at this MTU). The 64-packet window is
    // full at 100 µs; the wide one keeps several times that in flight at 300 µs.
    let in_flight = |r: &Row| r.gbps * 1e9 * (2 * r.delay_us) as f64 * 1e-6 / (8.0 * 1424.0);
    assert!(in_flight(narrow) <= 64.0, "{}", in_flight(narrow));
    assert!(
        wide.gbps >= 2.0 * narrow.gbps,
        "{} vs {}",
        wide.gbps,
        narrow.gbps
    );
    assert!(in_flight(far) > 300.0, "{}", in_flight(far));
    // The bar: at 1% loss, at least 80% of the lossless goodput, with SACKs.
    assert!(
        one.gbps >= 0.8 * wide.gbps,
        "1% loss: {} vs {}",
        one.gbps,
        wide.gbps
    );
    assert!(one.sacks > 0);
    // ... and at 300 µs, where two round trips behind a hole are about 1,000 packets:
    // the window counts packets outstanding, not the span from the cumulative ack.
    assert!(
        far_one.gbps >= 0.8 * far.gbps,
        "1% loss at 300 µs: {} vs {}",
        far_one.gbps,
        far.gbps
    );
    // Bulk acknowledgements: far fewer than one per few data packets.
    assert!(wide.acks * 16 < wide.data_packets, "{} acks", wide.acks);
}
