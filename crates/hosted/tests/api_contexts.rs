//! Scalable endpoints through the safe API: contexts as Rust objects, each with its own
//! CQ; fi_rx_addr picks the receive context; closing a context cancels its receives
//! (the buffers come back through its CQ); the endpoint closes after its contexts; and
//! scalable endpoints whose other side is a shared receive or transmit context.

use std::time::{Duration, Instant};

use hosted::api::{Buf, Cq, Fabric, ProgressMode};
use hosted::ofi_nostd::av::{AvAttr, fi_rx_addr};
use hosted::ofi_nostd::errno::Errno;
use hosted::ofi_nostd::flags::{FI_ADDR_UNSPEC, Flags};
use hosted::ofi_nostd::info::{EpType, FI_SHARED_CONTEXT};

const WAIT: Duration = Duration::from_secs(5);
const N: usize = 3;
const BITS: i32 = 2;

type Comp = hosted::api::Completion<u64>;

/// A domain of `fabric` with manual progress.
fn manual(fabric: &Fabric) -> hosted::api::Domain<u64> {
    fabric
        .domain()
        .progress(ProgressMode::Manual)
        .open::<u64>()
        .unwrap()
}

/// An AV of `d` whose addresses carry [`BITS`] bits of receive context.
fn ctx_av(d: &hosted::api::Domain<u64>) -> hosted::api::Av<u64> {
    d.av_with(&mut AvAttr {
        rx_ctx_bits: BITS,
        ..AvAttr::default()
    })
    .unwrap()
}

/// b's side: a plain RDM endpoint of `db` on one CQ of `cq_size` for both directions,
/// with an AV that also has context bits.
fn plain_peer(
    db: &hosted::api::Domain<u64>,
    cq_size: usize,
) -> (Cq<u64>, hosted::api::Av<u64>, hosted::api::Endpoint<u64>) {
    let cqb: Cq<u64> = db.cq(cq_size).unwrap();
    let avb = ctx_av(db);
    let epb = db.endpoint(EpType::Rdm).unwrap();
    epb.bind_cq(&cqb, Flags::TRANSMIT | Flags::RECV).unwrap();
    epb.bind_av(&avb).unwrap();
    epb.enable().unwrap();
    (cqb, avb, epb)
}

/// Polls `cqs` (driving their domains) until one completion came on each, reading
/// `peer` too (manual progress: only reads drive the peer's domain) into `peer_got`.
fn one_each(cqs: &[&Cq<u64>], peer: &Cq<u64>, peer_got: &mut Vec<Comp>) -> Vec<Comp> {
    let deadline = Instant::now() + WAIT;
    let mut got: Vec<Option<hosted::api::Completion<u64>>> = cqs.iter().map(|_| None).collect();
    while got.iter().any(Option::is_none) {
        assert!(Instant::now() < deadline, "timed out");
        if let Ok(c) = peer.read() {
            peer_got.push(c);
        }
        for (cq, slot) in cqs.iter().zip(got.iter_mut()) {
            if slot.is_none()
                && let Ok(c) = cq.read()
            {
                *slot = Some(c);
            }
        }
    }
    got.into_iter().map(Option::unwrap).collect()
}

#[test]
fn contexts_of_a_scalable_endpoint_through_the_safe_api() {
    let fabric = Fabric::open().unwrap();
    let (da, db) = (manual(&fabric), manual(&fabric));
    // a: a scalable endpoint with N contexts, one CQ per context and side.
    let sep = da.scalable_endpoint(EpType::Rdm, N, N).unwrap();
    let ava = ctx_av(&da);
    sep.bind_av(&ava).unwrap();
    let mut txs = Vec::new();
    let mut rxs = Vec::new();
    let mut tx_cqs = Vec::new();
    let mut rx_cqs = Vec::new();
    for i in 0..N {
        let t = sep.tx_context(i).unwrap();
        let r = sep.rx_context(i).unwrap();
        let (tcq, rcq): (Cq<u64>, Cq<u64>) = (da.cq(64).unwrap(), da.cq(64).unwrap());
        assert!(
            r.bind_cq(&rcq, Flags::TRANSMIT).is_err(),
            "a receive context's CQ is FI_RECV"
        );
        t.bind_cq(&tcq, Flags::TRANSMIT).unwrap();
        r.bind_cq(&rcq, Flags::RECV).unwrap();
        t.enable().unwrap();
        r.enable().unwrap();
        txs.push(t);
        rxs.push(r);
        tx_cqs.push(tcq);
        rx_cqs.push(rcq);
    }
    assert!(sep.tx_context(N).is_err());
    // Reading a CQ of a domain drives that domain (manual progress): an empty one for
    // a while b's completions are awaited.
    let idle_a: Cq<u64> = da.cq(4).unwrap();
    sep.enable().unwrap();
    let (cqb, avb, epb) = plain_peer(&db, 64);
    let to_a = avb.insert(sep.addr()).unwrap();
    let to_b = ava.insert(epb.addr()).unwrap();

    // b sends to each receive context by fi_rx_addr; each arrives on its context's CQ.
    for (i, r) in rxs.iter().enumerate() {
        r.ep()
            .recv(Buf::zeroed(32), FI_ADDR_UNSPEC, 10 + i as u64)
            .unwrap();
    }
    for i in 0..N {
        let dest = fi_rx_addr(to_a, i as i32, BITS);
        epb.send(Buf::from(vec![i as u8 + 1; 8]), dest, 20 + i as u64)
            .unwrap();
    }
    let mut at_b = Vec::new();
    let got = one_each(&rx_cqs.iter().collect::<Vec<_>>(), &cqb, &mut at_b);
    for (i, c) in got.iter().enumerate() {
        assert_eq!((c.context, c.result()), (10 + i as u64, Ok(8)));
        assert_eq!(&c.buf[..8], &[i as u8 + 1; 8]);
    }
    let deadline = Instant::now() + WAIT;
    while at_b.len() < N {
        assert!(Instant::now() < deadline);
        if let Ok(c) = cqb.read() {
            at_b.push(c);
        }
        assert!(idle_a.read().is_err());
    }
    let r: Vec<_> = at_b.iter().map(|c| (c.context, c.result())).collect();
    assert!(at_b.iter().all(|c| c.result().is_ok()), "{r:?}");
    at_b.clear();
    // Each transmit context sends to b and completes on its own CQ.
    for (i, t) in txs.iter().enumerate() {
        epb.recv(Buf::zeroed(32), FI_ADDR_UNSPEC, 40 + i as u64)
            .unwrap();
        t.ep()
            .send(Buf::from(vec![9; 4]), to_b, 30 + i as u64)
            .unwrap();
    }
    let done = one_each(&tx_cqs.iter().collect::<Vec<_>>(), &cqb, &mut at_b);
    for (i, c) in done.iter().enumerate() {
        assert_eq!((c.context, c.result()), (30 + i as u64, Ok(4)));
    }
    let deadline = Instant::now() + WAIT;
    while at_b.len() < N {
        assert!(Instant::now() < deadline);
        if let Ok(c) = cqb.read() {
            at_b.push(c);
        }
        assert!(idle_a.read().is_err());
    }
    assert!(at_b.iter().all(|c| c.result() == Ok(4)));

    // Closing receive context 1 cancels its receive; its buffer comes back on its CQ.
    rxs[1]
        .ep()
        .recv(Buf::zeroed(32), FI_ADDR_UNSPEC, 77)
        .unwrap();
    let r1 = rxs.remove(1);
    r1.close().unwrap();
    let c = one_each(&[&rx_cqs[1]], &cqb, &mut at_b).remove(0);
    assert_eq!((c.context, c.result()), (77, Err(Errno::ECANCELED)));
    assert_eq!(c.buf.capacity(), 32);
    // Then the other contexts, then the endpoint: nothing was left outstanding.
    for t in txs {
        t.close().unwrap();
    }
    for r in rxs {
        r.close().unwrap();
    }
    assert!(sep.close().unwrap().is_empty());
    epb.close();
}

/// Reads `cq` until one completion comes, reading `other` meanwhile (manual progress:
/// only reads drive the other domain).
fn one(cq: &Cq<u64>, other: &Cq<u64>, other_got: &mut Vec<Comp>) -> Comp {
    one_each(&[cq], other, other_got).remove(0)
}

#[test]
fn scalable_endpoints_with_a_shared_side_through_the_safe_api() {
    let fabric = Fabric::open().unwrap();
    let (da, db) = (manual(&fabric), manual(&fabric));
    let (cqb, avb, epb) = plain_peer(&db, 64);
    let mut at_b = Vec::new();
    for shared_rx in [true, false] {
        let (tx, rx) = if shared_rx {
            (N, FI_SHARED_CONTEXT)
        } else {
            (FI_SHARED_CONTEXT, N)
        };
        let sep = da.scalable_endpoint(EpType::Rdm, tx, rx).unwrap();
        let ava = ctx_av(&da);
        sep.bind_av(&ava).unwrap();
        let sep_cq: Cq<u64> = da.cq(64).unwrap();
        let srx = da.shared_rx_context().unwrap();
        let stx = da.shared_tx_context().unwrap();
        let mut ctx_cqs: Vec<Cq<u64>> = Vec::new();
        let (mut txs, mut rxs) = (Vec::new(), Vec::new());
        if shared_rx {
            assert!(sep.rx_context(0).is_err(), "no receive contexts");
            assert!(
                sep.bind_stx(&stx).is_err(),
                "the transmit side is not shared"
            );
            sep.bind_cq(&sep_cq, Flags::RECV).unwrap();
            sep.bind_srx(&srx).unwrap();
            for i in 0..N {
                let t = sep.tx_context(i).unwrap();
                let cq = da.cq(64).unwrap();
                t.bind_cq(&cq, Flags::TRANSMIT).unwrap();
                t.enable().unwrap();
                txs.push(t);
                ctx_cqs.push(cq);
            }
        } else {
            assert!(sep.tx_context(0).is_err(), "no transmit contexts");
            sep.bind_stx(&stx).unwrap();
            assert!(sep.enable().is_err(), "no transmit CQ yet");
            sep.bind_cq(&sep_cq, Flags::TRANSMIT).unwrap();
            for i in 0..N {
                let r = sep.rx_context(i).unwrap();
                let cq = da.cq(64).unwrap();
                r.bind_cq(&cq, Flags::RECV).unwrap();
                r.enable().unwrap();
                rxs.push(r);
                ctx_cqs.push(cq);
            }
        }
        sep.enable().unwrap();
        let to_a = avb.insert(sep.addr()).unwrap();
        let to_b = ava.insert(epb.addr()).unwrap();

        // b to each engine of a by fi_rx_addr: taken from the srx, or by that
        // receive context.
        for i in 0..N as u64 {
            if shared_rx {
                srx.recv(Buf::zeroed(32), FI_ADDR_UNSPEC, 10 + i).unwrap();
            } else {
                rxs[i as usize]
                    .ep()
                    .recv(Buf::zeroed(32), FI_ADDR_UNSPEC, 10 + i)
                    .unwrap();
            }
        }
        for i in 0..N {
            let dest = fi_rx_addr(to_a, i as i32, BITS);
            epb.send(Buf::from(vec![i as u8 + 1; 8]), dest, 20 + i as u64)
                .unwrap();
        }
        let got: Vec<Comp> = (0..N)
            .map(|i| {
                let cq = if shared_rx { &sep_cq } else { &ctx_cqs[i] };
                one(cq, &cqb, &mut at_b)
            })
            .collect();
        // Each message once, in a buffer of the shared context (whichever was next
        // when it arrived), or in its receive context's own.
        let mut seen: Vec<u8> = got
            .iter()
            .enumerate()
            .map(|(i, c)| {
                assert_eq!(c.result(), Ok(8), "{c:?}");
                let m = c.buf[0];
                assert_eq!(&c.buf[..8], &[m; 8]);
                if !shared_rx {
                    assert_eq!((c.context, m), (10 + i as u64, i as u8 + 1));
                }
                m
            })
            .collect();
        seen.sort_unstable();
        assert_eq!(seen, (1..=N as u8).collect::<Vec<_>>());
        let mut ks: Vec<u64> = got.iter().map(|c| c.context).collect();
        ks.sort_unstable();
        assert_eq!(ks, (10..10 + N as u64).collect::<Vec<_>>());

        // a's transmit side to b: each context, or the endpoint on the stx.
        let senders: Vec<&hosted::api::Endpoint<u64>> = if shared_rx {
            txs.iter().map(|t| t.ep()).collect()
        } else {
            vec![sep.ep()]
        };
        for (i, ep) in senders.iter().enumerate() {
            epb.recv(Buf::zeroed(32), FI_ADDR_UNSPEC, 40 + i as u64)
                .unwrap();
            ep.send(Buf::from(vec![9; 4]), to_b, 30 + i as u64).unwrap();
            let cq = if shared_rx { &ctx_cqs[i] } else { &sep_cq };
            let c = one(cq, &cqb, &mut at_b);
            assert_eq!((c.context, c.result()), (30 + i as u64, Ok(4)));
        }
        let deadline = Instant::now() + WAIT;
        while at_b.iter().filter(|c| c.context >= 40).count() < senders.len() {
            assert!(Instant::now() < deadline, "b got {at_b:?}");
            if let Ok(c) = cqb.read() {
                at_b.push(c);
            }
            let _ = sep_cq.read();
        }
        assert!(at_b.iter().all(|c| c.result().is_ok()), "{at_b:?}");
        at_b.clear();
        for t in txs {
            t.close().unwrap();
        }
        for r in rxs {
            r.close().unwrap();
        }
        assert!(sep.close().unwrap().is_empty());
    }
    epb.close();
}

/// A domain with one receive queue per context (`DomainBuilder::queues`, kernel UDP:
/// one SO_REUSEPORT socket each, steered by the context index): a peer that talks to
/// context 1 alone moves frames on queue 1 alone, both ways (reading context 1's CQ
/// runs queue 1's pass, its sends leave from queue 1's socket); context 0's traffic
/// then moves on queue 0. Every message arrives intact on its context's CQ.
#[test]
fn each_context_has_a_receive_queue_of_its_own() {
    const M: usize = 20;
    let fabric = Fabric::open().unwrap();
    let da = fabric
        .domain()
        .progress(ProgressMode::Manual)
        .queues(2)
        .open::<u64>()
        .unwrap();
    let db = manual(&fabric);
    assert_eq!(da.queue_counts().len(), 2);
    assert_eq!(db.queue_counts().len(), 1);
    let sep = da.scalable_endpoint(EpType::Rdm, 2, 2).unwrap();
    let ava = ctx_av(&da);
    sep.bind_av(&ava).unwrap();
    let mut ctxs = Vec::new();
    for i in 0..2 {
        let (t, r) = (sep.tx_context(i).unwrap(), sep.rx_context(i).unwrap());
        let cq: Cq<u64> = da.cq(4 * M).unwrap();
        t.bind_cq(&cq, Flags::TRANSMIT).unwrap();
        r.bind_cq(&cq, Flags::RECV).unwrap();
        t.enable().unwrap();
        r.enable().unwrap();
        ctxs.push((t, r, cq));
    }
    sep.enable().unwrap();
    let (cqb, avb, epb) = plain_peer(&db, 4 * M);
    let to_a = avb.insert(sep.addr()).unwrap();
    let to_b = ava.insert(epb.addr()).unwrap();

    for k in [1usize, 0] {
        let (t, r, cq) = &ctxs[k];
        let before = da.queue_counts();
        for i in 0..M {
            r.ep()
                .recv(Buf::zeroed(64), FI_ADDR_UNSPEC, i as u64)
                .unwrap();
            epb.recv(Buf::zeroed(64), FI_ADDR_UNSPEC, 100 + i as u64)
                .unwrap();
        }
        for i in 0..M {
            let fill = (k * M + i) as u8;
            epb.send(
                Buf::from(vec![fill; 48]),
                fi_rx_addr(to_a, k as i32, BITS),
                200,
            )
            .unwrap();
            t.ep().send(Buf::from(vec![!fill; 48]), to_b, 300).unwrap();
        }
        // Context k: M receives and M sends; b: the same.
        let (mut at_a, mut at_b) = (Vec::new(), Vec::new());
        let deadline = Instant::now() + WAIT;
        while at_a.len() < 2 * M || at_b.len() < 2 * M {
            assert!(Instant::now() < deadline, "context {k}: timed out");
            if let Ok(c) = cq.read() {
                at_a.push(c);
            }
            if let Ok(c) = cqb.read() {
                at_b.push(c);
            }
        }
        let mut got: Vec<u8> = at_a
            .iter()
            .filter(|c| c.context < 100)
            .map(|c| {
                assert_eq!(c.result(), Ok(48));
                assert!(c.buf[..48].iter().all(|&x| x == c.buf[0]));
                c.buf[0]
            })
            .collect();
        got.sort_unstable();
        let want: Vec<u8> = (0..M).map(|i| (k * M + i) as u8).collect();
        assert_eq!(got, want, "context {k}: every message once");
        assert_eq!(
            at_b.iter()
                .filter(|c| c.context >= 100 && c.context < 200)
                .count(),
            M
        );
        let after = da.queue_counts();
        let moved = |q: usize| {
            (
                after[q].rx_packets - before[q].rx_packets,
                after[q].tx_packets - before[q].tx_packets,
            )
        };
        let (rx, tx) = moved(k);
        // (Small messages share packets: a few frames each way.)
        assert!(rx > 0 && tx > 0, "queue {k} moved ({rx}, {tx})");
        if k == 1 {
            assert_eq!(moved(0), (0, 0), "queue 0 moved nothing for context 1");
        }
    }
    assert!(cqb.read().is_err());
}
