//! Sends to our own address over a real TAP device, where (unlike kernel UDP) nothing
//! loops our frames back: one in-process domain on the first TAP of the bridge that
//! `cargo xtask test-hosted` creates, with two RDM endpoints and a DGRAM endpoint. An
//! endpoint sends msg, tagged and rendezvous messages to itself and the two RDM
//! endpoints exchange messages, every byte checked, under manual and automatic
//! progress. Without the devices (see `hosted_tests::ENV_TAP`) it prints one line and
//! passes.

use std::net::Ipv4Addr;
use std::time::Duration;

use hosted::api::{AutoProgress, Buf, Completion, Cq, Endpoint, Ethernet, Fabric, ProgressMode};
use hosted::ofi_nostd::flags::Flags;
use hosted::ofi_nostd::info::EpType;
use hosted_tests::{ENV_TAP, ENV_TAP_IPS, env_pair, serial};

const LOCK_DIR: &str = env!("CARGO_TARGET_TMPDIR");
const WAIT: Duration = Duration::from_secs(5);
/// Not the port of the ofi-pingpong tests (they never run at the same time anyway).
const PORT: u16 = 47600;

fn take(cq: &Cq<u64>, n: usize) -> Vec<Completion<u64>> {
    (0..n)
        .map(|_| cq.sread(WAIT).expect("completion"))
        .collect()
}

fn pattern(len: usize, seed: u32) -> Vec<u8> {
    (0..len as u32).map(|i| (i * 13 + seed) as u8).collect()
}

/// An enabled endpoint with CQs of its own.
fn endpoint(
    domain: &hosted::api::Domain<u64>,
    av: &hosted::api::Av,
    ep_type: EpType,
) -> (Endpoint<u64>, Cq<u64>, Cq<u64>) {
    let tx = domain.cq(0).unwrap();
    let rx = domain.cq(0).unwrap();
    let ep = domain.endpoint(ep_type).unwrap();
    ep.bind_cq(&tx, Flags::TRANSMIT).unwrap();
    ep.bind_cq(&rx, Flags::RECV).unwrap();
    ep.bind_av(av).unwrap();
    ep.enable().unwrap();
    (ep, tx, rx)
}

fn run(test: &str, mode: ProgressMode) {
    let Some((tap, _)) = env_pair(test, ENV_TAP) else {
        return;
    };
    let (ip, _) = env_pair(test, ENV_TAP_IPS).expect("addresses with the devices");
    let (addr, prefix) = ip.split_once('/').expect("A.B.C.D/P");
    let eth = Ethernet {
        ip: addr.parse::<Ipv4Addr>().unwrap(),
        port: PORT,
        prefix_len: prefix.parse().unwrap(),
        gateway: None,
        mac: None,
    };
    let _g = serial(LOCK_DIR);
    let fabric = Fabric::open().unwrap();
    let domain = fabric
        .domain()
        .tap(&tap, eth)
        .progress(mode)
        .open::<u64>()
        .unwrap();
    let av = domain.av().unwrap();
    let (a, a_tx, a_rx) = endpoint(&domain, &av, EpType::Rdm);
    let (b, b_tx, b_rx) = endpoint(&domain, &av, EpType::Rdm);
    let to_a = av.insert(a.addr()).unwrap();
    let to_b = av.insert(b.addr()).unwrap();

    // To itself and to its sibling: one packet, segmented eager, rendezvous.
    for (k, len) in [1usize, 1000, 5000, 300_000].into_iter().enumerate() {
        let k = k as u64;
        let (m0, m1, m2) = (pattern(len, 1 + k as u32), pattern(len, 2), pattern(len, 3));
        a.recv(Buf::zeroed(len), to_a, 10 + k).unwrap();
        a.trecv(Buf::zeroed(len), to_a, 7, 0, 20 + k).unwrap();
        b.recv(Buf::zeroed(len), to_a, 30 + k).unwrap();
        a.send(Buf::from(m0.clone()), to_a, 40 + k).unwrap();
        a.tsend(Buf::from(m1.clone()), to_a, 7, 50 + k).unwrap();
        a.send(Buf::from(m2.clone()), to_b, 60 + k).unwrap();
        let mut got = take(&a_rx, 2);
        got.sort_by_key(|c| c.context);
        assert_eq!(
            (got[0].context, got[0].src, got[0].result()),
            (10 + k, to_a, Ok(len))
        );
        assert!(got[0].buf[..] == m0[..], "msg to itself, {len} B");
        assert_eq!((got[1].context, got[1].tag), (20 + k, Some(7)));
        assert!(got[1].buf[..] == m1[..], "tagged to itself, {len} B");
        let got = take(&b_rx, 1);
        assert_eq!((got[0].context, got[0].src), (30 + k, to_a));
        assert!(got[0].buf[..] == m2[..], "to the sibling, {len} B");
        let mut sent: Vec<u64> = take(&a_tx, 3).iter().map(|c| c.context).collect();
        sent.sort_unstable();
        assert_eq!(sent, [40 + k, 50 + k, 60 + k]);
        // And back: the sibling's tagged message to a.
        a.trecv(Buf::zeroed(len), to_b, 8, 0, 70 + k).unwrap();
        b.tsend(Buf::from(m0.clone()), to_a, 8, 80 + k).unwrap();
        let got = take(&a_rx, 1);
        assert_eq!((got[0].context, got[0].src), (70 + k, to_b));
        assert!(got[0].buf[..] == m0[..], "from the sibling, {len} B");
        assert_eq!(take(&b_tx, 1)[0].context, 80 + k);
    }

    // A DGRAM endpoint of the same domain to itself.
    let (d, d_tx, d_rx) = endpoint(&domain, &av, EpType::Dgram);
    let to_d = av.insert(d.addr()).unwrap();
    let m = pattern(1200, 5);
    d.recv(Buf::zeroed(1400), to_d, 90).unwrap();
    d.send(Buf::from(m.clone()), to_d, 91).unwrap();
    let got = take(&d_rx, 1);
    assert_eq!((got[0].context, got[0].result()), (90, Ok(m.len())));
    assert!(got[0].buf[..m.len()] == m[..]);
    assert_eq!(take(&d_tx, 1)[0].context, 91);

    let s = domain.net_stats();
    assert!(s.tx_looped > 200, "{s:?}");
    assert_eq!(s.rx_looped, s.tx_looped, "{s:?}");
    assert_eq!(s.tx_loop_refused, 0);
    for ep in [a, b, d] {
        assert!(ep.close().is_empty(), "nothing left posted");
    }
    assert_eq!(domain.buffers_held(), 0);
}

#[test]
fn tap_rdm_and_dgram_sends_to_self_manual_progress() {
    run(
        "tap_rdm_and_dgram_sends_to_self_manual_progress",
        ProgressMode::Manual,
    );
}

#[test]
fn tap_rdm_and_dgram_sends_to_self_auto_progress() {
    run(
        "tap_rdm_and_dgram_sends_to_self_auto_progress",
        ProgressMode::Auto(AutoProgress::default()),
    );
}
