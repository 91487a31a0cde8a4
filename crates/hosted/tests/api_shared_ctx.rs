//! Shared receive and transmit contexts through the safe API: endpoints of one domain
//! on one `SharedRxContext` and one `SharedTxContext`; receives posted to the context
//! come back, with their buffers, on the CQ of the endpoint that took the message;
//! cancel; the contexts close after their endpoints, giving back what still waited.

use std::time::{Duration, Instant};

use hosted::api::{Buf, Cq, Fabric, ProgressMode};
use hosted::ofi_nostd::errno::Errno;
use hosted::ofi_nostd::flags::{FI_ADDR_UNSPEC, Flags};
use hosted::ofi_nostd::info::EpType;

const WAIT: Duration = Duration::from_secs(5);
const N: usize = 3;

type Comp = hosted::api::Completion<u64>;

/// Reads `cq` until a completion comes, reading `other` meanwhile (manual progress:
/// reads drive each domain) into `other_got`.
fn one(cq: &Cq<u64>, other: &Cq<u64>, other_got: &mut Vec<Comp>) -> Comp {
    let deadline = Instant::now() + WAIT;
    loop {
        assert!(Instant::now() < deadline, "timed out");
        if let Ok(c) = other.read() {
            other_got.push(c);
        }
        if let Ok(c) = cq.read() {
            return c;
        }
    }
}

#[test]
fn endpoints_on_shared_contexts_through_the_safe_api() {
    let fabric = Fabric::open().unwrap();
    let dom = || {
        fabric
            .domain()
            .progress(ProgressMode::Manual)
            .open::<u64>()
            .unwrap()
    };
    let (da, db) = (dom(), dom());
    let srx = da.shared_rx_context().unwrap();
    let stx = da.shared_tx_context().unwrap();
    let ava = da.av().unwrap();
    let mut eps = Vec::new();
    let mut cqs = Vec::new();
    for _ in 0..N {
        let ep = da.shared_endpoint(EpType::Rdm, true, true).unwrap();
        let cq: Cq<u64> = da.cq(64).unwrap();
        ep.bind_cq(&cq, Flags::TRANSMIT | Flags::RECV).unwrap();
        ep.bind_av(&ava).unwrap();
        assert!(ep.enable().is_err(), "shared contexts not bound yet");
        ep.bind_stx(&stx).unwrap();
        ep.bind_srx(&srx).unwrap();
        assert!(ep.bind_srx(&srx).is_err(), "a second srx");
        ep.enable().unwrap();
        eps.push(ep);
        cqs.push(cq);
    }
    let cqb: Cq<u64> = db.cq(64).unwrap();
    let avb = db.av().unwrap();
    let epb = db.endpoint(EpType::Rdm).unwrap();
    epb.bind_cq(&cqb, Flags::TRANSMIT | Flags::RECV).unwrap();
    epb.bind_av(&avb).unwrap();
    epb.enable().unwrap();
    let to_b = ava.insert(epb.addr()).unwrap();
    let to_a: Vec<_> = eps.iter().map(|e| avb.insert(e.addr()).unwrap()).collect();

    // N receives on the context; one message to each endpoint.
    for i in 0..N {
        srx.recv(Buf::zeroed(32), FI_ADDR_UNSPEC, 10 + i as u64)
            .unwrap();
    }
    assert_eq!(srx.waiting(), N);
    let mut at_b = Vec::new();
    for (i, to) in to_a.iter().enumerate() {
        epb.send(Buf::from(vec![i as u8 + 1; 8]), *to, 20 + i as u64)
            .unwrap();
    }
    let mut taken = Vec::new();
    for (i, cq) in cqs.iter().enumerate() {
        let c = one(cq, &cqb, &mut at_b);
        // On the CQ of the endpoint the message was sent to, in one of the receives.
        assert_eq!(c.result(), Ok(8));
        assert_eq!(&c.buf[..8], &[i as u8 + 1; 8]);
        taken.push(c.context);
    }
    taken.sort();
    assert_eq!(taken, [10, 11, 12]);
    assert_eq!(srx.waiting(), 0);
    // The endpoints send through the shared transmit context.
    let ids: Vec<_> = (0..N)
        .map(|i| {
            epb.recv(Buf::zeroed(32), FI_ADDR_UNSPEC, 40 + i as u64)
                .unwrap()
        })
        .collect();
    assert_eq!(ids.len(), N);
    for (i, ep) in eps.iter().enumerate() {
        ep.send(Buf::from(vec![9; 4]), to_b, 30 + i as u64).unwrap();
        let c = one(&cqs[i], &cqb, &mut at_b);
        assert_eq!((c.context, c.result()), (30 + i as u64, Ok(4)));
    }
    let deadline = Instant::now() + WAIT;
    while at_b.iter().filter(|c| c.context >= 40).count() < N {
        assert!(Instant::now() < deadline, "b's receives");
        if let Ok(c) = cqb.read() {
            at_b.push(c);
        }
        for cq in &cqs {
            let _ = cq.read();
        }
    }

    // A multi-receive buffer on the context: 16-byte messages to every endpoint land
    // back to back in it, each on its endpoint's CQ with the post's context; 96
    // bytes less three messages leave 48, under the 64-byte FI_OPT_MIN_MULTI_RECV,
    // so the third gives the buffer back.
    let id = srx.recv_multi(Buf::zeroed(96), FI_ADDR_UNSPEC, 55).unwrap();
    let mut pieces = Vec::new();
    let mut back = None;
    for (i, to) in to_a.iter().enumerate() {
        epb.send(Buf::from(vec![0x60 + i as u8; 16]), *to, 50 + i as u64)
            .unwrap();
        let c = one(&cqs[i], &cqb, &mut at_b);
        assert_eq!((c.op, c.context, c.result()), (id, 55, Ok(16)), "{c:?}");
        pieces.push((c.offset.expect("an offset"), i));
        if c.flags.contains(Flags::MULTI_RECV) {
            back = Some(c);
        }
    }
    let back = back.expect("the buffer came back");
    assert_eq!((back.buf.capacity(), back.buf.len()), (96, 48));
    pieces.sort();
    for (k, (off, i)) in pieces.iter().enumerate() {
        assert_eq!(*off, 16 * k, "back to back");
        assert_eq!(&back.buf[*off..off + 16], &[0x60 + *i as u8; 16]);
    }

    // Cancel: the buffer comes back on the first endpoint's CQ.
    let id = srx.recv(Buf::zeroed(16), FI_ADDR_UNSPEC, 77).unwrap();
    srx.cancel(id).unwrap();
    let c = one(&cqs[0], &cqb, &mut at_b);
    assert_eq!((c.context, c.result()), (77, Err(Errno::ECANCELED)));
    assert_eq!(c.buf.capacity(), 16);

    // Close: the contexts refuse while endpoints are bound; a receive left waiting
    // comes back from the context's close.
    let mut srx = srx;
    let mut stx = stx;
    srx.recv(Buf::zeroed(24), FI_ADDR_UNSPEC, 88).unwrap();
    assert_eq!(srx.close().err().map(|e| e.errno()), Some(Errno::EBUSY));
    assert_eq!(stx.close().err().map(|e| e.errno()), Some(Errno::EBUSY));
    for ep in eps {
        assert!(ep.close().is_empty());
    }
    let back = srx.close().unwrap();
    assert_eq!(back.len(), 1);
    assert_eq!((back[0].0.capacity(), back[0].1), (24, 88));
    assert!(srx.close().unwrap().is_empty(), "closed once");
    stx.close().unwrap();
    epb.close();
}
