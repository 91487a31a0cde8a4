//! An endpoint that closes right after its last receive still acknowledges it: the
//! receiver holds acknowledgements briefly for a reply to carry them, and fi_close must
//! not swallow them (the sender's last send would fail with -FI_ETIMEDOUT, as
//! fi_pingpong's client did when its server exited).

use std::time::{Duration, Instant};

use hosted::api::{Buf, Cq, Fabric, ProgressMode};
use hosted::ofi_nostd::flags::Flags;
use hosted::ofi_nostd::info::EpType;

const WAIT: Duration = Duration::from_secs(5);

#[test]
fn closing_right_after_a_receive_still_acknowledges_it() {
    let fabric = Fabric::open().unwrap();
    let open = || {
        let d = fabric
            .domain()
            .progress(ProgressMode::Manual)
            .open::<u64>()
            .unwrap();
        let cq: Cq<u64> = d.cq(0).unwrap();
        let av = d.av().unwrap();
        let ep = d.endpoint(EpType::Rdm).unwrap();
        ep.bind_cq(&cq, Flags::TRANSMIT | Flags::RECV).unwrap();
        ep.bind_av(&av).unwrap();
        ep.enable().unwrap();
        (d, cq, av, ep)
    };
    let (_da, cqa, ava, epa) = open();
    let (_db, cqb, avb, epb) = open();
    let b = ava.insert(epb.addr()).unwrap();
    let a = avb.insert(epa.addr()).unwrap();
    // Both domains are manual: a read drives its own domain only, so poll both until
    // every expected completion (by context, in any order) has arrived.
    let poll = |mut want_a: Vec<u64>, mut want_b: Vec<u64>| {
        let deadline = Instant::now() + WAIT;
        while !(want_a.is_empty() && want_b.is_empty()) {
            assert!(
                Instant::now() < deadline,
                "timed out: {want_a:?} {want_b:?}"
            );
            for (cq, want) in [(&cqa, &mut want_a), (&cqb, &mut want_b)] {
                if let Ok(c) = cq.read() {
                    assert!(c.result().is_ok(), "{}: {:?}", c.context, c.result());
                    let at = want.iter().position(|&w| w == c.context);
                    want.remove(at.expect("an expected completion"));
                }
            }
        }
    };
    // Round trips first, so the session is up and the receiver holds its acks for
    // replies to carry.
    for round in 0..3u64 {
        epb.recv(Buf::zeroed(64), a, 100 + round).unwrap();
        epa.recv(Buf::zeroed(64), b, 200 + round).unwrap();
        epa.send(Buf::from(vec![round as u8; 32]), b, round)
            .unwrap();
        poll(vec![], vec![100 + round]);
        epb.send(Buf::from(vec![1u8; 8]), a, 300 + round).unwrap();
        poll(vec![round, 200 + round], vec![300 + round]);
    }
    // The last message: the receiver reads it and closes at once, driving nothing more.
    epb.recv(Buf::zeroed(64), a, 9).unwrap();
    epa.send(Buf::from(vec![7u8; 16]), b, 8).unwrap();
    poll(vec![], vec![9]);
    drop(epb.close());
    let deadline = Instant::now() + WAIT;
    let s = loop {
        if let Ok(c) = cqa.read() {
            break c;
        }
        assert!(Instant::now() < deadline, "the last send never completed");
    };
    assert_eq!(
        (s.context, s.result()),
        (8, Ok(16)),
        "acknowledged before the close"
    );
}
