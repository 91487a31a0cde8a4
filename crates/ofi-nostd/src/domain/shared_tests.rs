//! Shared transmit and receive contexts on one domain: every refusal, and DGRAM
//! endpoints sharing one receive context.

use super::*;
use crate::info::{FI_SHARED_CONTEXT, RxAttr, TxAttr};

fn shared_info(t: EpType) -> Info {
    let mut info = match t {
        EpType::Dgram => dgram_info(),
        _ => default_info(EpType::Rdm, None, &cfg()),
    };
    info.ep_attr.tx_ctx_cnt = FI_SHARED_CONTEXT;
    info.ep_attr.rx_ctx_cnt = FI_SHARED_CONTEXT;
    info
}

/// An endpoint of `info` with the host's CQs and AV bound, not enabled.
fn shared_ep(h: &mut Host, info: &Info) -> EpHandle<VecStorage> {
    let ep = h.dom.ep_open(info, 0x51).unwrap();
    h.dom
        .ep_bind(ep, BindTarget::Cq(h.tx_cq), Flags::TRANSMIT)
        .unwrap();
    h.dom
        .ep_bind(ep, BindTarget::Cq(h.rx_cq), Flags::RECV)
        .unwrap();
    h.dom
        .ep_bind(ep, BindTarget::Av(h.av), Flags::empty())
        .unwrap();
    ep
}

#[test]
fn every_refusal_of_shared_contexts() {
    let mut h = host([10, 0, 0, 1], CqFormat::Msg, false);
    let d = &mut h.dom;
    // Attributes beyond the domain's, receive flags a context cannot take
    // (FI_MULTI_RECV it takes).
    let big = TxAttr {
        size: 9,
        ..TxAttr::default()
    };
    assert_eq!(d.stx_open(&big, 0).err(), Some(Errno::EINVAL));
    let multi = RxAttr {
        op_flags: Flags::MULTI_RECV,
        ..RxAttr::default()
    };
    let ms = d.srx_open(&multi, 0).unwrap();
    assert_eq!(d.srx(ms).unwrap().op_flags(), Flags::MULTI_RECV);
    d.srx_close(ms).unwrap();
    let bad = RxAttr {
        op_flags: Flags::INJECT,
        ..RxAttr::default()
    };
    assert_eq!(d.srx_open(&bad, 0).err(), Some(Errno::EINVAL));
    let iovs = RxAttr {
        iov_limit: crate::iov::IOV_LIMIT + 1,
        ..RxAttr::default()
    };
    assert_eq!(d.srx_open(&iovs, 0).err(), Some(Errno::EINVAL));
    let stx = d.stx_open(&TxAttr::default(), 1).unwrap();
    let small = RxAttr {
        size: 2,
        iov_limit: 1,
        ..RxAttr::default()
    };
    let srx = d.srx_open(&small, 2).unwrap();
    assert_eq!(d.srx(srx).unwrap().capacity(), 2);

    // An endpoint with dedicated contexts takes no shared one.
    let own = h.ep;
    assert_eq!(h.dom.ep_bind_stx(own, stx), Err(Errno::EOPBADSTATE));
    let info = shared_info(EpType::Dgram);
    let mut plain = dgram_info();
    plain.ep_attr.rx_ctx_cnt = 1;
    let ded = h.dom.ep_open(&plain, 0).unwrap();
    assert_eq!(h.dom.ep_bind_stx(ded, stx), Err(Errno::EINVAL));
    assert_eq!(h.dom.ep_bind_srx(ded, srx), Err(Errno::EINVAL));
    h.dom.ep_close(ded).unwrap();

    // Opened with FI_SHARED_CONTEXT: enabling needs both bound.
    let ep = shared_ep(&mut h, &info);
    assert_eq!(h.dom.ep_enable(ep), Err(Errno::EOPBADSTATE));
    h.dom.ep_bind_stx(ep, stx).unwrap();
    assert_eq!(
        h.dom.ep_bind_stx(ep, stx),
        Err(Errno::EINVAL),
        "a second stx"
    );
    assert_eq!(h.dom.ep_enable(ep), Err(Errno::EOPBADSTATE), "no srx yet");
    // The endpoint's iov limit (4) is beyond this context's (1).
    assert_eq!(h.dom.ep_bind_srx(ep, srx), Err(Errno::EINVAL));
    let srx4 = h.dom.srx_open(&RxAttr::default(), 3).unwrap();
    h.dom.ep_bind_srx(ep, srx4).unwrap();
    assert_eq!(
        h.dom.ep_bind_srx(ep, srx4),
        Err(Errno::EINVAL),
        "a second srx"
    );
    h.dom.ep_enable(ep).unwrap();
    assert_eq!(h.dom.ep_bind_srx(ep, srx), Err(Errno::EOPBADSTATE));

    // An RDM endpoint cannot join DGRAM endpoints on one receive context.
    let rdm = h.dom.ep_open(&shared_info(EpType::Rdm), 0);
    if let Ok(rdm) = rdm {
        assert_eq!(h.dom.ep_bind_srx(rdm, srx4), Err(Errno::EINVAL));
        h.dom.ep_close(rdm).unwrap();
    }

    // Closing while an endpoint is bound, and the domain while contexts are open.
    assert_eq!(h.dom.stx_close(stx), Err(Errno::EBUSY));
    assert_eq!(h.dom.srx_close(srx4), Err(Errno::EBUSY));
    h.dom.ep_close(ep).unwrap();
    h.dom.stx_close(stx).unwrap();
    assert_eq!(h.dom.stx_close(stx), Err(Errno::EINVAL), "closed twice");

    // Posting: multi-recv of two iovs or tagged, too many iovs, peeks of untagged
    // or with no endpoint to report on, a full context.
    let b = IoVec::new(BASE, 8);
    let m = MsgArgs::new(core::slice::from_ref(&b), FI_ADDR_UNSPEC, 7);
    let d = &mut h.dom;
    let two = [b, b];
    let m2 = MsgArgs::new(&two, FI_ADDR_UNSPEC, 7);
    assert_eq!(
        d.srx_recvmsg(srx4, &m2, None, Flags::MULTI_RECV),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        d.srx_recvmsg(srx4, &m, Some((1, 0)), Flags::MULTI_RECV),
        Err(Errno::EINVAL)
    );
    // One that waits (no endpoint bound), then closes with its context.
    d.srx_recvmsg(srx4, &m, None, Flags::MULTI_RECV).unwrap();
    assert_eq!(d.srx(srx4).unwrap().waiting(), 1);
    d.srx_close(srx4).unwrap();
    assert_eq!(
        d.srx_recvmsg(srx, &m2, None, Flags::empty()),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        d.srx_recvmsg(srx, &m, None, Flags::PEEK),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        d.srx_recvmsg(srx, &m, Some((1, 0)), Flags::PEEK),
        Err(Errno::ENOCQ)
    );
    assert_eq!(
        d.srx_recvmsg(srx, &m, Some((1, 0)), Flags::CLAIM),
        Err(Errno::ENOCQ)
    );
    d.srx_recvmsg(srx, &m, None, Flags::empty()).unwrap();
    d.srx_recvmsg(srx, &m, None, Flags::empty()).unwrap();
    assert_eq!(d.srx_size_left(srx), Ok(0));
    assert_eq!(
        d.srx_recvmsg(srx, &m, None, Flags::empty()),
        Err(Errno::EAGAIN)
    );
    // Canceling a waiting receive frees its room.
    d.srx_cancel(srx, 7).unwrap();
    assert_eq!(d.srx_size_left(srx), Ok(1));

    // Pools are bounded: a full one is an error.
    let mut n = 1;
    while d.srx_open(&RxAttr::default(), 0).is_ok() {
        n += 1;
        assert!(n <= crate::ep::srx::MAX_SHARED_CTX);
    }
    assert_eq!(n, crate::ep::srx::MAX_SHARED_CTX);
    assert_eq!(d.srx_open(&RxAttr::default(), 0).err(), Some(Errno::ENOMEM));
}

#[test]
fn endpoints_of_one_receive_context_share_its_av() {
    let mut h = host([10, 0, 0, 1], CqFormat::Msg, false);
    let srx = h.dom.srx_open(&RxAttr::default(), 0).unwrap();
    let stx = h.dom.stx_open(&TxAttr::default(), 0).unwrap();
    let info = shared_info(EpType::Dgram);
    let a = shared_ep(&mut h, &info);
    h.dom.ep_bind_stx(a, stx).unwrap();
    h.dom.ep_bind_srx(a, srx).unwrap();
    h.dom.ep_enable(a).unwrap();
    let other = h.dom.av_open(&mut AvAttr::default(), 0).unwrap();
    let b = h.dom.ep_open(&info, 0).unwrap();
    h.dom
        .ep_bind(b, BindTarget::Cq(h.tx_cq), Flags::TRANSMIT)
        .unwrap();
    h.dom
        .ep_bind(b, BindTarget::Av(other), Flags::empty())
        .unwrap();
    h.dom.ep_bind_stx(b, stx).unwrap();
    h.dom.ep_bind_srx(b, srx).unwrap();
    assert_eq!(h.dom.ep_enable(b), Err(Errno::EINVAL));
}

#[test]
fn dgram_endpoints_take_the_shared_receives_in_order() {
    let (mut a, mut b, _, _) = pair(CqFormat::Msg);
    let srx = b.dom.srx_open(&RxAttr::default(), 0).unwrap();
    let stx = b.dom.stx_open(&TxAttr::default(), 0).unwrap();
    let info = shared_info(EpType::Dgram);
    let mut eps = Vec::new();
    for _ in 0..2 {
        let ep = shared_ep(&mut b, &info);
        b.dom.ep_bind_stx(ep, stx).unwrap();
        b.dom.ep_bind_srx(ep, srx).unwrap();
        b.dom.ep_enable(ep).unwrap();
        eps.push(ep);
    }
    let mut dests = Vec::new();
    for ep in &eps {
        let addr = b.dom.ep_addr(*ep).unwrap();
        let mut out = [0; 1];
        a.dom
            .av_mut(a.av)
            .unwrap()
            .insert(AvAddrs::Ep(&[addr]), Some(&mut out), Flags::empty(), None)
            .unwrap();
        dests.push(out[0]);
    }
    // Three receives on the context; the endpoints' own posts go to it too.
    for k in 0..3u64 {
        let buf = IoVec::new(BASE + 100 + 16 * k, 16);
        b.dom
            .srx_recvmsg(
                srx,
                &MsgArgs::new(core::slice::from_ref(&buf), FI_ADDR_UNSPEC, 0xC0 + k),
                None,
                Flags::empty(),
            )
            .unwrap();
    }
    b.dom
        .recv(eps[1], IoVec::new(BASE + 200, 16), FI_ADDR_UNSPEC, 0xC3)
        .unwrap();
    assert_eq!(b.dom.srx(srx).unwrap().waiting(), 4);
    // Datagrams to the second endpoint, the first, the second, the first.
    for (k, to) in [1usize, 0, 1, 0].into_iter().enumerate() {
        a.put(16 * k as u64, &[b'a' + k as u8; 16]);
        let mem = SliceMemory::new(BASE, &mut a.mem);
        a.dom
            .send(
                a.ep,
                &mem,
                IoVec::new(BASE + 16 * k as u64, 16),
                dests[to],
                0,
            )
            .unwrap();
    }
    pump(&mut a, &mut b);
    let mut e = [CqMsgEntry::default(); 8];
    assert_eq!(b.dom.cq_mut(b.rx_cq).unwrap().read(&mut e), Ok(4));
    let got: Vec<u64> = e[..4].iter().map(|e| e.op_context).collect();
    assert_eq!(got, [0xC0, 0xC1, 0xC2, 0xC3], "posting order");
    assert_eq!(b.get(100, 16), &[b'a'; 16]);
    assert_eq!(b.get(116, 16), &[b'b'; 16]);
    assert_eq!(b.get(132, 16), &[b'c'; 16]);
    assert_eq!(b.get(200, 16), &[b'd'; 16]);
    assert_eq!(b.dom.srx(srx).unwrap().waiting(), 0);
    // Closing: the endpoints first, then the contexts.
    assert_eq!(b.dom.srx_close(srx), Err(Errno::EBUSY));
    for ep in eps {
        b.dom.ep_close(ep).unwrap();
    }
    b.dom.srx_close(srx).unwrap();
    b.dom.stx_close(stx).unwrap();
}

#[test]
fn a_multi_recv_buffer_moves_between_dgram_endpoints_of_one_context() {
    let (mut a, mut b, _, _) = pair(CqFormat::Msg);
    let srx = b.dom.srx_open(&RxAttr::default(), 0).unwrap();
    let stx = b.dom.stx_open(&TxAttr::default(), 0).unwrap();
    let info = shared_info(EpType::Dgram);
    let mut eps = Vec::new();
    let mut dests = Vec::new();
    for _ in 0..2 {
        let ep = shared_ep(&mut b, &info);
        b.dom.ep_bind_stx(ep, stx).unwrap();
        b.dom.ep_bind_srx(ep, srx).unwrap();
        b.dom
            .ep_mut(ep)
            .unwrap()
            .setopt(FI_OPT_ENDPOINT, EpOpt::MinMultiRecv, 16)
            .unwrap();
        b.dom.ep_enable(ep).unwrap();
        let addr = b.dom.ep_addr(ep).unwrap();
        let mut out = [0; 1];
        a.dom
            .av_mut(a.av)
            .unwrap()
            .insert(AvAddrs::Ep(&[addr]), Some(&mut out), Flags::empty(), None)
            .unwrap();
        eps.push(ep);
        dests.push(out[0]);
    }
    // The context's FI_OPT_MIN_MULTI_RECV: the endpoints' default until set, then
    // its own for what is posted afterwards (this buffer keeps the endpoints' 16).
    let s = b.dom.srx_mut(srx).unwrap();
    assert_eq!(s.getopt(FI_OPT_ENDPOINT, EpOpt::MinMultiRecv), Ok(64));
    assert_eq!(
        s.setopt(FI_OPT_ENDPOINT, EpOpt::CmDataSize, 1),
        Err(Errno::ENOPROTOOPT)
    );
    assert_eq!(s.setopt(1, EpOpt::MinMultiRecv, 1), Err(Errno::ENOPROTOOPT));
    // One 64-byte buffer on the context, for 16-byte datagrams.
    let buf = IoVec::new(BASE + 300, 64);
    b.dom
        .srx_recvmsg(
            srx,
            &MsgArgs::new(core::slice::from_ref(&buf), FI_ADDR_UNSPEC, 0xD0),
            None,
            Flags::MULTI_RECV,
        )
        .unwrap();
    // Datagrams to the second endpoint, the first, the first, the second, then one
    // more to the first once the buffer is gone.
    let to = [1usize, 0, 0, 1, 0];
    for (k, t) in to.into_iter().enumerate() {
        a.put(16 * k as u64, &[b'a' + k as u8; 16]);
        let mem = SliceMemory::new(BASE, &mut a.mem);
        a.dom
            .send(
                a.ep,
                &mem,
                IoVec::new(BASE + 16 * k as u64, 16),
                dests[t],
                0,
            )
            .unwrap();
        pump(&mut a, &mut b);
    }
    let mut e = [CqMsgEntry::default(); 8];
    assert_eq!(b.dom.cq_mut(b.rx_cq).unwrap().read(&mut e), Ok(4));
    for (k, x) in e[..4].iter().enumerate() {
        assert_eq!((x.op_context, x.len), (0xD0, 16), "{x:?}");
        // Packed back to back whichever endpoint took it.
        assert_eq!(b.get(300 + 16 * k as u64, 16), &[b'a' + k as u8; 16]);
        assert_eq!(
            x.flags & Flags::MULTI_RECV.bits() != 0,
            k == 3,
            "released with the piece that leaves less than 16 bytes"
        );
    }
    let dropped: u64 = eps
        .iter()
        .map(|ep| b.dom.ep(*ep).unwrap().stats().rx_no_buffer)
        .sum();
    assert_eq!(dropped, 1, "the last datagram found no buffer");
    assert_eq!(b.dom.srx(srx).unwrap().waiting(), 0);
    for ep in eps {
        b.dom.ep_close(ep).unwrap();
    }
    b.dom.srx_close(srx).unwrap();
    b.dom.stx_close(stx).unwrap();
}

#[test]
fn endpoints_of_one_transmit_context_share_its_size() {
    let (mut a, mut b, b_at_a, _) = pair(CqFormat::Msg);
    let small = TxAttr {
        size: 4,
        ..TxAttr::default()
    };
    let stx = a.dom.stx_open(&small, 0).unwrap();
    let srx = a.dom.srx_open(&RxAttr::default(), 0).unwrap();
    let mut info = shared_info(EpType::Dgram);
    info.tx_attr.size = 4;
    let eps: Vec<_> = (0..2)
        .map(|_| {
            let ep = shared_ep(&mut a, &info);
            a.dom.ep_bind_stx(ep, stx).unwrap();
            a.dom.ep_bind_srx(ep, srx).unwrap();
            a.dom.ep_enable(ep).unwrap();
            ep
        })
        .collect();
    for ep in &eps {
        assert_eq!(a.dom.ep_tx_size_left(*ep), Ok(4));
    }
    // Three sends on the first endpoint, one on the second: the context is full for
    // both, though each endpoint's own queue has room.
    let mem = SliceMemory::new(BASE, &mut a.mem);
    for k in 0..4u64 {
        let ep = eps[usize::from(k == 3)];
        a.dom
            .send(ep, &mem, IoVec::new(BASE, 8), b_at_a, k)
            .unwrap();
    }
    for ep in &eps {
        assert_eq!(a.dom.ep_tx_size_left(*ep), Ok(0));
        assert!(a.dom.ep(*ep).unwrap().tx_size_left() > 0);
        assert_eq!(
            a.dom.send(*ep, &mem, IoVec::new(BASE, 8), b_at_a, 9),
            Err(Errno::EAGAIN)
        );
        assert_eq!(
            a.dom.inject(*ep, &mem, IoVec::new(BASE, 8), b_at_a),
            Err(Errno::EAGAIN)
        );
    }
    // Once they left, the room is back for either.
    for k in 0..4 {
        b.dom
            .recv(b.ep, IoVec::new(BASE + 64 * k, 64), FI_ADDR_UNSPEC, k)
            .unwrap();
    }
    pump(&mut a, &mut b);
    for ep in &eps {
        assert_eq!(a.dom.ep_tx_size_left(*ep), Ok(4));
    }
    let mem = SliceMemory::new(BASE, &mut a.mem);
    a.dom
        .send(eps[1], &mem, IoVec::new(BASE, 8), b_at_a, 10)
        .unwrap();
    assert_eq!(a.dom.ep_tx_size_left(eps[0]), Ok(3));
    // An endpoint without a shared transmit context has its own room only.
    assert_eq!(
        a.dom.ep_tx_size_left(a.ep),
        Ok(a.dom.ep(a.ep).unwrap().tx_size_left())
    );
}

#[test]
fn the_contexts_min_multi_recv_releases_the_buffers_posted_after_it() {
    let (mut a, mut b, _, _) = pair(CqFormat::Msg);
    let srx = b.dom.srx_open(&RxAttr::default(), 0).unwrap();
    let stx = b.dom.stx_open(&TxAttr::default(), 0).unwrap();
    let ep = shared_ep(&mut b, &shared_info(EpType::Dgram));
    b.dom.ep_bind_stx(ep, stx).unwrap();
    b.dom.ep_bind_srx(ep, srx).unwrap();
    b.dom
        .ep_mut(ep)
        .unwrap()
        .setopt(FI_OPT_ENDPOINT, EpOpt::MinMultiRecv, 8)
        .unwrap();
    b.dom.ep_enable(ep).unwrap();
    let addr = b.dom.ep_addr(ep).unwrap();
    let mut to = [0; 1];
    a.dom
        .av_mut(a.av)
        .unwrap()
        .insert(AvAddrs::Ep(&[addr]), Some(&mut to), Flags::empty(), None)
        .unwrap();
    // 40 bytes less two 16-byte datagrams leave 8: not under the endpoint's 8, under
    // the context's 24.
    b.dom
        .srx_mut(srx)
        .unwrap()
        .setopt(FI_OPT_ENDPOINT, EpOpt::MinMultiRecv, 24)
        .unwrap();
    assert_eq!(
        b.dom
            .srx(srx)
            .unwrap()
            .getopt(FI_OPT_ENDPOINT, EpOpt::MinMultiRecv),
        Ok(24)
    );
    let buf = IoVec::new(BASE + 300, 40);
    b.dom
        .srx_recvmsg(
            srx,
            &MsgArgs::new(core::slice::from_ref(&buf), FI_ADDR_UNSPEC, 0xD1),
            None,
            Flags::MULTI_RECV,
        )
        .unwrap();
    for k in 0..2u64 {
        let mem = SliceMemory::new(BASE, &mut a.mem);
        a.dom
            .send(a.ep, &mem, IoVec::new(BASE, 16), to[0], k)
            .unwrap();
        pump(&mut a, &mut b);
    }
    let mut e = [CqMsgEntry::default(); 4];
    assert_eq!(b.dom.cq_mut(b.rx_cq).unwrap().read(&mut e), Ok(2));
    assert_eq!(e[0].flags & Flags::MULTI_RECV.bits(), 0);
    assert_ne!(
        e[1].flags & Flags::MULTI_RECV.bits(),
        0,
        "released by the context's 24"
    );
}
