//! RDM endpoints on the simulator, one test per feature: messages and tagged messages
//! with CQ data and FI_SOURCE, rendezvous with truncation, peek/claim/discard, cancel,
//! multi-recv, directed receive, selective completion, FI_INJECT as a default flag,
//! auth-key rejection, peer failure and re-establishment, peer restart, back-pressure.

use hosted::netsim::{Faults, NetSim};
use hosted::simlink::{Cluster, Completion, Node, NodeConfig};
use ofi_nostd::addr::EpAddr;
use ofi_nostd::domain::{MsgArgs, TaggedArgs};
use ofi_nostd::ep::{EpOpt, FI_OPT_ENDPOINT};
use ofi_nostd::errno::Errno;
use ofi_nostd::flags::{FI_ADDR_UNSPEC, Flags};
use ofi_nostd::mem::IoVec;
use ofi_nostd::rdm::{PeerState, RdmConfig};
use ofi_nostd::time::Duration;

const B: u64 = Node::BASE;

fn cluster(n: usize, cfg: &NodeConfig) -> Cluster {
    Cluster::new(NetSim::new(7, Faults::default()), n, cfg).expect("cluster")
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64 * 7) >> 1) as u8)
        .collect()
}

fn rx(c: &mut Cluster, i: usize) -> Vec<Completion> {
    c.nodes[i].completions().1
}

fn tx(c: &mut Cluster, i: usize) -> Vec<Completion> {
    c.nodes[i].completions().0
}

/// Runs until node `i` has `n` completions on its receive (`rx`) or transmit CQ.
fn wait(c: &mut Cluster, i: usize, rx: bool, n: usize) -> Vec<Completion> {
    c.wait_cq(i, rx, n, Duration::from_secs(10))
        .unwrap_or_else(|(why, got)| {
            panic!("waiting for {n} completions on node {i}: {why:?}, got {got:?}")
        })
}

fn send(c: &mut Cluster, i: usize, off: usize, data: &[u8], dest: u64, ctx: u64) {
    let a = c.nodes[i].put(off, data);
    c.nodes[i]
        .op(|d, ep, m| d.send(ep, m, IoVec::new(a, data.len()), dest, ctx))
        .unwrap();
}

fn tsend(c: &mut Cluster, i: usize, off: usize, data: &[u8], dest: u64, tag: u64, ctx: u64) {
    let a = c.nodes[i].put(off, data);
    c.nodes[i]
        .op(|d, ep, m| d.tsend(ep, m, IoVec::new(a, data.len()), dest, tag, ctx))
        .unwrap();
}

fn rdm_stats(c: &Cluster, i: usize) -> ofi_nostd::rdm::RdmStats {
    let n = &c.nodes[i];
    *n.dom.ep(n.ep).unwrap().rdm().unwrap().stats()
}

#[test]
fn eager_message_with_cq_data_and_source() {
    let mut c = cluster(2, &NodeConfig::default());
    let data = pattern(1, 100);
    let a = c.nodes[0].put(0, &data);
    c.nodes[1]
        .op(|d, ep, _| d.recv(ep, IoVec::new(B + 4096, 200), FI_ADDR_UNSPEC, 0xB1))
        .unwrap();
    c.nodes[0]
        .op(|d, ep, m| d.senddata(ep, m, IoVec::new(a, 100), 0xDA7A, 1, 0xA1))
        .unwrap();
    let r = wait(&mut c, 1, true, 1);
    assert_eq!(
        (r[0].context, r[0].len, r[0].data, r[0].err),
        (0xB1, 100, 0xDA7A, None)
    );
    assert_eq!(r[0].src, 0, "FI_SOURCE: node 0 is fi_addr 0");
    assert_eq!(r[0].flags, Flags::RECV | Flags::MSG | Flags::REMOTE_CQ_DATA);
    assert_eq!(c.nodes[1].get(4096, 100), &data[..]);
    let t = wait(&mut c, 0, false, 1);
    assert_eq!(
        (t[0].context, t[0].flags, t[0].err),
        (0xA1, Flags::SEND | Flags::MSG, None)
    );
    let cntr = c.nodes[0].send_cntr;
    assert_eq!(c.nodes[0].dom.cntr(cntr).unwrap().value(), 1);
    assert_eq!(
        c.nodes[0]
            .dom
            .ep(c.nodes[0].ep)
            .unwrap()
            .rdm()
            .unwrap()
            .peer_state(&c.nodes[1].addr()),
        Some(PeerState::Established)
    );
}

#[test]
fn zero_length_and_multi_segment_messages_in_order() {
    let cfg = NodeConfig {
        mem_size: 4 << 20,
        ..NodeConfig::default()
    };
    let mut c = cluster(2, &cfg);
    let sizes = [0usize, 1, 1400, 1500, 5000, 8192, 8193, 100_000];
    for (k, &len) in sizes.iter().enumerate() {
        send(
            &mut c,
            0,
            k * 200_000,
            &pattern(k as u64, len),
            1,
            0x100 + k as u64,
        );
    }
    // Receives posted late: every message arrives unexpected first.
    c.run_for(Duration::from_millis(5));
    for k in 0..sizes.len() {
        c.nodes[1]
            .op(|d, ep, _| {
                d.recv(
                    ep,
                    IoVec::new(B + (k * 200_000) as u64, 200_000),
                    0,
                    0x200 + k as u64,
                )
            })
            .unwrap();
    }
    let r = wait(&mut c, 1, true, sizes.len());
    for e in &r {
        let k = (e.context - 0x200) as usize;
        assert_eq!(e.err, None);
        assert_eq!(e.len, sizes[k], "receive {k} got message {k} (send order)");
        assert_eq!(
            c.nodes[1].get(k * 200_000, sizes[k]),
            &pattern(k as u64, sizes[k])[..]
        );
    }
    let t = wait(&mut c, 0, false, sizes.len());
    assert!(t.iter().all(|e| e.err.is_none()));
}

#[test]
fn tagged_rendezvous_truncates_and_is_never_buffered_whole() {
    let mut c = cluster(2, &NodeConfig::default());
    let data = pattern(9, 300_000);
    tsend(&mut c, 0, 0, &data, 1, 0x77, 0xA7);
    c.run_for(Duration::from_millis(2));
    let free = c.nodes[1]
        .dom
        .ep(c.nodes[1].ep)
        .unwrap()
        .rdm()
        .unwrap()
        .unexp_slots_free();
    let ux = c.nodes[1]
        .dom
        .ep(c.nodes[1].ep)
        .unwrap()
        .rdm()
        .unwrap()
        .unexpected_len();
    assert_eq!(ux, 1, "the RTS is queued");
    assert_eq!(
        free,
        NodeConfig::default().rdm.unexp_slots,
        "no data buffered"
    );
    c.nodes[1]
        .op(|d, ep, _| d.trecv(ep, IoVec::new(B + 400_000, 100_000), 0, 0x77, 0, 0xB7))
        .unwrap();
    let r = wait(&mut c, 1, true, 1);
    assert_eq!(r[0].err, Some(Errno::ETRUNC));
    assert_eq!(
        (r[0].context, r[0].len, r[0].olen, r[0].tag),
        (0xB7, 100_000, 200_000, 0x77)
    );
    assert_eq!(c.nodes[1].get(400_000, 100_000), &data[..100_000]);
    let t = wait(&mut c, 0, false, 1);
    assert_eq!(
        (t[0].context, t[0].err, t[0].flags),
        (0xA7, None, Flags::SEND | Flags::TAGGED)
    );
}

#[test]
fn peek_claim_and_discard() {
    let mut c = cluster(2, &NodeConfig::default());
    let trecv = |c: &mut Cluster, tag: u64, buf: Option<(u64, usize)>, ctx: u64, flags: Flags| {
        let iov: Vec<IoVec> = buf.map(|(a, l)| IoVec::new(B + a, l)).into_iter().collect();
        c.nodes[1]
            .op(|d, ep, _| d.trecvmsg(ep, &TaggedArgs::new(&iov, FI_ADDR_UNSPEC, tag, ctx), flags))
    };
    // Nothing there yet.
    trecv(&mut c, 1, None, 0x50, Flags::PEEK).unwrap();
    let r = rx(&mut c, 1);
    assert_eq!((r[0].context, r[0].err), (0x50, Some(Errno::ENOMSG)));

    let (a, b, big) = (pattern(1, 64), pattern(2, 3000), pattern(3, 50_000));
    c.nodes[0].put(0, &a);
    c.nodes[0].put(100, &b);
    c.nodes[0].put(10_000, &big);
    c.nodes[0]
        .op(|d, ep, m| d.tsenddata(ep, m, IoVec::new(B, 64), 0xD1, 1, 1, 0xA1))
        .unwrap();
    tsend(&mut c, 0, 100, &b, 1, 2, 0xA2);
    tsend(&mut c, 0, 10_000, &big, 1, 3, 0xA3);
    tsend(&mut c, 0, 100, &b, 1, 4, 0xA4);
    let ok = c.run_until(c.sim.now() + Duration::from_secs(1), 1_000_000, |c| {
        c.nodes[1]
            .dom
            .ep(c.nodes[1].ep)
            .unwrap()
            .rdm()
            .unwrap()
            .unexpected_len()
            == 4
    });
    assert!(ok.is_ok());

    // FI_PEEK: metadata, message stays.
    trecv(&mut c, 1, None, 0x51, Flags::PEEK).unwrap();
    let r = rx(&mut c, 1);
    assert_eq!(
        (
            r[0].context,
            r[0].len,
            r[0].tag,
            r[0].data,
            r[0].src,
            r[0].err
        ),
        (0x51, 64, 1, 0xD1, 0, None)
    );
    assert!(
        r[0].flags
            .contains(Flags::RECV | Flags::TAGGED | Flags::REMOTE_CQ_DATA)
    );
    // FI_PEEK | FI_CLAIM: reserved for context 0x52; an ordinary receive no longer
    // matches it.
    trecv(&mut c, 2, None, 0x52, Flags::PEEK | Flags::CLAIM).unwrap();
    assert_eq!(rx(&mut c, 1)[0].len, 3000);
    trecv(&mut c, 2, Some((0, 4000)), 0x60, Flags::empty()).unwrap();
    c.run_for(Duration::from_millis(1));
    assert!(
        rx(&mut c, 1).is_empty(),
        "the claimed message is not matched again"
    );
    // FI_CLAIM with another context: nothing claimed under it.
    assert_eq!(
        trecv(&mut c, 2, Some((0, 4000)), 0x99, Flags::CLAIM),
        Err(Errno::ENOMSG)
    );
    // FI_CLAIM with the same context receives it, whatever address it names: the
    // context names the message (Open MPI's MPI_Mrecv passes 0, which need not be in
    // the AV; 77 is not).
    let iov = [IoVec::new(B + 8000, 4000)];
    c.nodes[1]
        .op(|d, ep, _| d.trecvmsg(ep, &TaggedArgs::new(&iov, 77, 0, 0x52), Flags::CLAIM))
        .unwrap();
    let r = wait(&mut c, 1, true, 1);
    assert_eq!(
        (r[0].context, r[0].len, r[0].tag, r[0].err),
        (0x52, 3000, 2, None)
    );
    assert_eq!(c.nodes[1].get(8000, 3000), &b[..]);
    // FI_PEEK | FI_DISCARD of a rendezvous: gone, and its sender still completes.
    trecv(&mut c, 3, None, 0x53, Flags::PEEK | Flags::DISCARD).unwrap();
    assert_eq!(rx(&mut c, 1)[0].len, 50_000);
    // FI_PEEK | FI_CLAIM then FI_CLAIM | FI_DISCARD.
    trecv(&mut c, 1, None, 0x54, Flags::PEEK | Flags::CLAIM).unwrap();
    trecv(&mut c, 1, None, 0x54, Flags::CLAIM | Flags::DISCARD).unwrap();
    let r = rx(&mut c, 1);
    assert_eq!(r.len(), 2);
    assert_eq!((r[1].context, r[1].len, r[1].err), (0x54, 0, None));
    trecv(&mut c, 1, None, 0x55, Flags::PEEK).unwrap();
    assert_eq!(rx(&mut c, 1)[0].err, Some(Errno::ENOMSG));
    // Every send completed successfully, the discarded rendezvous included.
    let t = wait(&mut c, 0, false, 3);
    assert!(t.iter().all(|e| e.err.is_none()), "{t:?}");
    // The receive posted for tag 2 still waits; tag 4's message is still queued for it.
    trecv(&mut c, 4, Some((20_000, 4000)), 0x61, Flags::empty()).unwrap();
    let r = wait(&mut c, 1, true, 1);
    assert_eq!((r[0].context, r[0].len), (0x61, 3000));
    assert_eq!(
        c.nodes[1]
            .dom
            .ep(c.nodes[1].ep)
            .unwrap()
            .rdm()
            .unwrap()
            .unexpected_len(),
        0
    );
}

#[test]
fn cancel_receives_and_unstarted_sends() {
    let mut c = cluster(2, &NodeConfig::default());
    c.nodes[1]
        .op(|d, ep, _| d.recv(ep, IoVec::new(B, 100), FI_ADDR_UNSPEC, 0xC1))
        .unwrap();
    c.nodes[1]
        .op(|d, ep, _| d.trecv(ep, IoVec::new(B, 100), FI_ADDR_UNSPEC, 5, 0, 0xC2))
        .unwrap();
    c.nodes[1].op(|d, ep, _| d.ep_cancel(ep, 0xC2)).unwrap();
    c.nodes[1].op(|d, ep, _| d.ep_cancel(ep, 0xC1)).unwrap();
    let r = rx(&mut c, 1);
    assert_eq!(r.len(), 2);
    assert_eq!((r[0].context, r[0].err), (0xC2, Some(Errno::ECANCELED)));
    assert!(r[0].flags.contains(Flags::TAGGED));
    assert_eq!((r[1].context, r[1].err), (0xC1, Some(Errno::ECANCELED)));
    // A send still waiting for its session can be cancelled.
    let port1 = c.nodes[1].port;
    c.sim.set_down(port1, true);
    send(&mut c, 0, 0, b"never", 1, 0xC3);
    c.run_for(Duration::from_micros(100));
    c.nodes[0].op(|d, ep, _| d.ep_cancel(ep, 0xC3)).unwrap();
    let t = tx(&mut c, 0);
    assert_eq!((t[0].context, t[0].err), (0xC3, Some(Errno::ECANCELED)));
    let cntr = c.nodes[0].send_cntr;
    assert_eq!(c.nodes[0].dom.cntr(cntr).unwrap().err_value(), 1);
    // Cancelling what is gone is accepted and does nothing.
    c.nodes[0].op(|d, ep, _| d.ep_cancel(ep, 0xC3)).unwrap();
    assert!(tx(&mut c, 0).is_empty());
}

#[test]
fn multi_recv_packs_messages_and_reports_the_release() {
    let mut c = cluster(2, &NodeConfig::default());
    c.nodes[1]
        .op(|d, ep, _| {
            d.ep_mut(ep)
                .unwrap()
                .setopt(FI_OPT_ENDPOINT, EpOpt::MinMultiRecv, 200)
        })
        .unwrap();
    // Two messages arrive before the buffer is posted (unexpected), two after.
    for k in 0..2u64 {
        send(
            &mut c,
            0,
            (k * 1000) as usize,
            &pattern(k, 300),
            1,
            0xA0 + k,
        );
    }
    c.run_for(Duration::from_millis(1));
    let iov = [IoVec::new(B + 10_000, 1000)];
    c.nodes[1]
        .op(|d, ep, _| {
            d.recvmsg(
                ep,
                &MsgArgs::new(&iov, FI_ADDR_UNSPEC, 0xB0),
                Flags::MULTI_RECV,
            )
        })
        .unwrap();
    for k in 2..4u64 {
        send(
            &mut c,
            0,
            (k * 1000) as usize,
            &pattern(k, 300),
            1,
            0xA0 + k,
        );
    }
    c.nodes[1]
        .op(|d, ep, _| d.recv(ep, IoVec::new(B + 20_000, 1000), FI_ADDR_UNSPEC, 0xB1))
        .unwrap();
    let r = wait(&mut c, 1, true, 4);
    for (k, e) in r.iter().take(3).enumerate() {
        assert_eq!((e.context, e.len, e.err), (0xB0, 300, None));
        assert_eq!(
            e.buf,
            B + 10_000 + 300 * k as u64,
            "packed one after another"
        );
        assert_eq!(
            c.nodes[1].get(10_000 + 300 * k, 300),
            &pattern(k as u64, 300)[..]
        );
        // The third leaves 100 < 200 bytes: it releases the buffer.
        assert_eq!(e.flags.contains(Flags::MULTI_RECV), k == 2, "{e:?}");
    }
    assert_eq!((r[3].context, r[3].len), (0xB1, 300));
    assert_eq!(c.nodes[1].get(20_000, 300), &pattern(3, 300)[..]);
}

#[test]
fn multi_recv_releases_a_buffer_too_small_for_the_next_message() {
    let mut c = cluster(2, &NodeConfig::default());
    let iov = [IoVec::new(B + 10_000, 1000)];
    c.nodes[1]
        .op(|d, ep, _| {
            d.recvmsg(
                ep,
                &MsgArgs::new(&iov, FI_ADDR_UNSPEC, 0xB0),
                Flags::MULTI_RECV,
            )
        })
        .unwrap();
    c.nodes[1]
        .op(|d, ep, _| d.recv(ep, IoVec::new(B + 20_000, 1000), FI_ADDR_UNSPEC, 0xB1))
        .unwrap();
    send(&mut c, 0, 0, &pattern(1, 600), 1, 1);
    send(&mut c, 0, 1000, &pattern(2, 600), 1, 2);
    let r = wait(&mut c, 1, true, 3);
    assert_eq!((r[0].context, r[0].len, r[0].buf), (0xB0, 600, B + 10_000));
    assert!(!r[0].flags.contains(Flags::MULTI_RECV));
    // Separate release entry: FI_MULTI_RECV alone.
    assert_eq!(
        (r[1].context, r[1].flags, r[1].len),
        (0xB0, Flags::MULTI_RECV, 0)
    );
    assert_eq!((r[2].context, r[2].len), (0xB1, 600));
}

#[test]
fn directed_receive_takes_only_its_source() {
    let mut c = cluster(3, &NodeConfig::default());
    c.nodes[2]
        .op(|d, ep, _| d.recv(ep, IoVec::new(B, 100), 1, 0xD1))
        .unwrap();
    c.nodes[2]
        .op(|d, ep, _| d.recv(ep, IoVec::new(B + 100, 100), FI_ADDR_UNSPEC, 0xD0))
        .unwrap();
    send(&mut c, 0, 0, b"from node 0", 2, 1);
    let r = wait(&mut c, 2, true, 1);
    assert_eq!(
        (r[0].context, r[0].src),
        (0xD0, 0),
        "the any-source receive took node 0's"
    );
    send(&mut c, 1, 0, b"from node 1", 2, 1);
    let r = wait(&mut c, 2, true, 1);
    assert_eq!((r[0].context, r[0].src, r[0].len), (0xD1, 1, 11));
    assert_eq!(c.nodes[2].get(0, 11), b"from node 1");
    // Directed tagged receive with ignore bits.
    c.nodes[2]
        .op(|d, ep, _| d.trecv(ep, IoVec::new(B + 200, 100), 1, 0xF0, 0x0F, 0xD2))
        .unwrap();
    tsend(&mut c, 0, 0, b"wrong source", 2, 0xF3, 2);
    tsend(&mut c, 1, 0, b"right source", 2, 0xF5, 2);
    let r = wait(&mut c, 2, true, 1);
    assert_eq!((r[0].context, r[0].tag, r[0].src), (0xD2, 0xF5, 1));
}

#[test]
fn selective_completion_and_counters() {
    let cfg = NodeConfig {
        selective: true,
        ..NodeConfig::default()
    };
    let mut c = cluster(2, &cfg);
    let iov = [IoVec::new(B, 100)];
    c.nodes[1]
        .op(|d, ep, _| {
            d.recvmsg(
                ep,
                &MsgArgs::new(&iov, FI_ADDR_UNSPEC, 0xB0),
                Flags::empty(),
            )
        })
        .unwrap();
    let iov2 = [IoVec::new(B + 100, 100)];
    c.nodes[1]
        .op(|d, ep, _| {
            d.recvmsg(
                ep,
                &MsgArgs::new(&iov2, FI_ADDR_UNSPEC, 0xB1),
                Flags::COMPLETION,
            )
        })
        .unwrap();
    let iov3 = [IoVec::new(B + 200, 4)];
    c.nodes[1]
        .op(|d, ep, _| {
            d.recvmsg(
                ep,
                &MsgArgs::new(&iov3, FI_ADDR_UNSPEC, 0xB2),
                Flags::empty(),
            )
        })
        .unwrap();
    c.nodes[0].put(0, b"0123456789");
    let s = |c: &mut Cluster, ctx: u64, flags: Flags| {
        let iov = [IoVec::new(B, 10)];
        c.nodes[0]
            .op(|d, ep, m| d.sendmsg(ep, m, &MsgArgs::new(&iov, 1, ctx), flags))
            .unwrap();
    };
    s(&mut c, 0xA0, Flags::empty());
    s(&mut c, 0xA1, Flags::COMPLETION);
    s(&mut c, 0xA2, Flags::empty());
    let r = wait(&mut c, 1, true, 2);
    // Only the receive asking for it, and the error (truncation), are reported.
    assert_eq!((r[0].context, r[0].err), (0xB1, None));
    assert_eq!(
        (r[1].context, r[1].err, r[1].olen),
        (0xB2, Some(Errno::ETRUNC), 6)
    );
    let t = wait(&mut c, 0, false, 1);
    assert_eq!(t[0].context, 0xA1);
    c.run_for(Duration::from_millis(1));
    assert!(tx(&mut c, 0).is_empty() && rx(&mut c, 1).is_empty());
    let (sc, rc) = (c.nodes[0].send_cntr, c.nodes[1].recv_cntr);
    assert_eq!(c.nodes[0].dom.cntr(sc).unwrap().value(), 3);
    let rcv = c.nodes[1].dom.cntr(rc).unwrap();
    assert_eq!((rcv.value(), rcv.err_value()), (2, 1));
}

#[test]
fn inject_as_default_flag_keeps_the_user_context() {
    let cfg = NodeConfig {
        tx_op_flags: Flags::INJECT,
        ..NodeConfig::default()
    };
    let mut c = cluster(2, &cfg);
    for k in 0..3u64 {
        c.nodes[1]
            .op(|d, ep, _| d.recv(ep, IoVec::new(B + 100 * k, 100), FI_ADDR_UNSPEC, 0xB0 + k))
            .unwrap();
    }
    // fi_send with FI_INJECT in the default flags: the buffer is free at return, and
    // the completion carries the user's context.
    c.nodes[0].put(0, b"first");
    c.nodes[0]
        .op(|d, ep, m| d.send(ep, m, IoVec::new(B, 5), 1, 0xAC1))
        .unwrap();
    c.nodes[0].put(0, b"XXXXX");
    // fi_inject: no completion at all.
    c.nodes[0].put(0, b"second");
    c.nodes[0]
        .op(|d, ep, m| d.inject(ep, m, IoVec::new(B, 6), 1))
        .unwrap();
    c.nodes[0].put(0, b"YYYYYY");
    c.nodes[0].put(0, b"third");
    c.nodes[0]
        .op(|d, ep, m| d.injectdata(ep, m, IoVec::new(B, 5), 7, 1))
        .unwrap();
    let r = wait(&mut c, 1, true, 3);
    assert_eq!(c.nodes[1].get(0, 5), b"first");
    assert_eq!(c.nodes[1].get(100, 6), b"second");
    assert_eq!(c.nodes[1].get(200, 5), b"third");
    assert_eq!(r[2].data, 7);
    c.run_for(Duration::from_millis(1));
    let t = tx(&mut c, 0);
    assert_eq!(t.len(), 1);
    assert_eq!((t[0].context, t[0].err), (0xAC1, None));
    let sc = c.nodes[0].send_cntr;
    assert_eq!(c.nodes[0].dom.cntr(sc).unwrap().value(), 3);
    // Beyond inject_size: -FI_EMSGSIZE.
    let big = NodeConfig::default().provider.inject_size + 1;
    assert_eq!(
        c.nodes[0].op(|d, ep, m| d.inject(ep, m, IoVec::new(B, big), 1)),
        Err(Errno::EMSGSIZE)
    );
}

#[test]
fn auth_key_mismatch_is_rejected() {
    let good = NodeConfig {
        auth_key: b"shared secret".to_vec(),
        ..NodeConfig::default()
    };
    let mut c = cluster(3, &good);
    // Node 2 gets another key.
    let addrs: Vec<EpAddr> = c.nodes.iter().map(|n| n.addr()).collect();
    let port = c.nodes[2].port;
    c.sim.detach(port);
    let other = NodeConfig {
        auth_key: b"wrong secret".to_vec(),
        seed: 99,
        ..NodeConfig::default()
    };
    c.nodes[2] = Node::new(&mut c.sim, [10, 0, 0, 3], &other).unwrap();
    for a in &addrs {
        c.nodes[2].insert(*a).unwrap();
    }
    // Same key: works.
    c.nodes[1]
        .op(|d, ep, _| d.recv(ep, IoVec::new(B, 100), FI_ADDR_UNSPEC, 0xB0))
        .unwrap();
    send(&mut c, 0, 0, b"authenticated", 1, 0xA0);
    let r = wait(&mut c, 1, true, 1);
    assert_eq!((r[0].context, r[0].len), (0xB0, 13));
    // Wrong key: the handshake is rejected, the send fails with -FI_EKEYREJECTED.
    send(&mut c, 2, 0, b"intruder", 1, 0xA2);
    let t = wait(&mut c, 2, false, 1);
    assert_eq!((t[0].context, t[0].err), (0xA2, Some(Errno::EKEYREJECTED)));
    assert!(rdm_stats(&c, 1).auth_failures >= 1);
    assert!(rdm_stats(&c, 1).rejects_sent >= 1);
    // And the other way round.
    send(&mut c, 0, 0, b"to the intruder", 2, 0xA3);
    let t = wait(&mut c, 0, false, 2);
    // Completions of different peers come in no particular order (0xA0's waits for
    // node 1's acknowledgement, which may be held for a reply to carry it).
    let a3 = t.iter().find(|t| t.context == 0xA3).unwrap();
    assert_eq!(a3.err, Some(Errno::EKEYREJECTED));
    assert!(t.iter().any(|t| (t.context, t.err) == (0xA0, None)));
    assert!(rx(&mut c, 1).is_empty() && rx(&mut c, 2).is_empty());
}

#[test]
fn peer_failure_fails_everything_then_the_peer_comes_back() {
    let cfg = NodeConfig {
        rdm: RdmConfig {
            rto_max: Duration::from_millis(10),
            max_retries: 6,
            ..NodeConfig::default().rdm
        },
        ..NodeConfig::default()
    };
    // 1 Gbit/s: the rendezvous below takes about 2 ms.
    let faults = Faults {
        rate_bps: 1_000_000_000,
        ..Faults::default()
    };
    let mut c = Cluster::new(NetSim::new(7, faults), 2, &cfg).unwrap();
    // A working session first.
    c.nodes[1]
        .op(|d, ep, _| d.recv(ep, IoVec::new(B, 100), FI_ADDR_UNSPEC, 0xB0))
        .unwrap();
    send(&mut c, 0, 0, b"hello", 1, 0xA0);
    wait(&mut c, 1, true, 1);
    wait(&mut c, 0, false, 1);
    // Node 1 vanishes. Eager, rendezvous and tagged sends to it, and a receive of a
    // rendezvous node 1 had started, all fail with -FI_ETIMEDOUT.
    c.nodes[1]
        .op(|d, ep, _| d.trecv(ep, IoVec::new(B + 1000, 200_000), 0, 9, 0, 0xB9))
        .unwrap();
    let big = pattern(5, 200_000);
    tsend(&mut c, 0, 0, &big, 1, 9, 0xA9);
    c.run_for(Duration::from_micros(200));
    let port1 = c.nodes[1].port;
    c.sim.set_down(port1, true);
    send(&mut c, 0, 300_000, b"eager", 1, 0xA1);
    tsend(&mut c, 0, 300_100, &pattern(6, 50_000), 1, 3, 0xA2);
    let start = c.sim.now();
    let t = wait(&mut c, 0, false, 3);
    let took = c.sim.now().saturating_duration_since(start);
    let mut ctxs: Vec<u64> = t.iter().map(|e| e.context).collect();
    ctxs.sort();
    assert_eq!(ctxs, [0xA1, 0xA2, 0xA9]);
    assert!(t.iter().all(|e| e.err == Some(Errno::ETIMEDOUT)), "{t:?}");
    assert!(
        took < Duration::from_secs(1),
        "bounded failure time: {took:?}"
    );
    let r = wait(&mut c, 1, true, 1);
    assert_eq!((r[0].context, r[0].err), (0xB9, Some(Errno::ETIMEDOUT)));
    let peer1 = c.nodes[1].addr();
    let st = |c: &Cluster| {
        c.nodes[0]
            .dom
            .ep(c.nodes[0].ep)
            .unwrap()
            .rdm()
            .unwrap()
            .peer_state(&peer1)
    };
    assert_eq!(st(&c), Some(PeerState::Failed));
    // Back on the network: the next operation re-establishes the session.
    c.sim.set_down(port1, false);
    c.run_for(Duration::from_millis(50));
    c.nodes[1]
        .op(|d, ep, _| d.recv(ep, IoVec::new(B, 100), FI_ADDR_UNSPEC, 0xB1))
        .unwrap();
    send(&mut c, 0, 0, b"again", 1, 0xA5);
    let r = wait(&mut c, 1, true, 1);
    assert_eq!((r[0].context, r[0].len, r[0].err), (0xB1, 5, None));
    assert_eq!(c.nodes[1].get(0, 5), b"again");
    let t = wait(&mut c, 0, false, 1);
    assert_eq!((t[0].context, t[0].err), (0xA5, None));
    assert_eq!(st(&c), Some(PeerState::Established));
    // And the other direction works on the new session too.
    c.nodes[0]
        .op(|d, ep, _| d.recv(ep, IoVec::new(B + 500, 100), FI_ADDR_UNSPEC, 0xB2))
        .unwrap();
    send(&mut c, 1, 0, b"pong", 0, 0xA6);
    let r = wait(&mut c, 0, true, 1);
    assert_eq!((r[0].context, r[0].len), (0xB2, 4));
}

#[test]
fn handshake_never_answered_is_host_unreachable() {
    let cfg = NodeConfig {
        rdm: RdmConfig {
            hello_retries: 4,
            ..NodeConfig::default().rdm
        },
        ..NodeConfig::default()
    };
    let mut c = cluster(2, &cfg);
    let port1 = c.nodes[1].port;
    c.sim.set_down(port1, true);
    send(&mut c, 0, 0, b"anyone?", 1, 0xA0);
    let t = wait(&mut c, 0, false, 1);
    assert_eq!((t[0].context, t[0].err), (0xA0, Some(Errno::EHOSTUNREACH)));
    assert_eq!(rdm_stats(&c, 0).hellos_sent, 4);
}

#[test]
fn restarted_peer_resets_the_stale_session_and_the_send_goes_again() {
    let mut c = cluster(2, &NodeConfig::default());
    c.nodes[1]
        .op(|d, ep, _| d.recv(ep, IoVec::new(B, 100), FI_ADDR_UNSPEC, 0xB0))
        .unwrap();
    send(&mut c, 0, 0, b"before", 1, 0xA0);
    wait(&mut c, 1, true, 1);
    wait(&mut c, 0, false, 1);
    // Node 1 restarts: same address, no memory of the session.
    let addrs: Vec<EpAddr> = c.nodes.iter().map(|n| n.addr()).collect();
    let port = c.nodes[1].port;
    c.sim.detach(port);
    let cfg = NodeConfig {
        seed: 1234,
        ..NodeConfig::default()
    };
    c.nodes[1] = Node::new(&mut c.sim, [10, 0, 0, 2], &cfg).unwrap();
    for a in &addrs {
        c.nodes[1].insert(*a).unwrap();
    }
    c.nodes[1]
        .op(|d, ep, _| d.recv(ep, IoVec::new(B, 100), FI_ADDR_UNSPEC, 0xB1))
        .unwrap();
    // The first send goes out on the stale session and meets RESET(UNKNOWN_SESSION):
    // the restarted node holds nothing of that session, so nothing of the send was
    // delivered, and it goes again on a new session.
    send(&mut c, 0, 0, b"stale", 1, 0xA1);
    let t = wait(&mut c, 0, false, 1);
    assert_eq!((t[0].context, t[0].err), (0xA1, None));
    let r = wait(&mut c, 1, true, 1);
    assert_eq!((r[0].context, r[0].len, r[0].err), (0xB1, 5, None));
    assert_eq!(c.nodes[1].get(0, 5), b"stale");
    assert!(rdm_stats(&c, 1).resets_sent >= 1);
    assert_eq!(rdm_stats(&c, 0).tx_replayed, 1);
    // The next one uses the new session.
    c.nodes[1]
        .op(|d, ep, _| d.recv(ep, IoVec::new(B, 100), FI_ADDR_UNSPEC, 0xB2))
        .unwrap();
    send(&mut c, 0, 0, b"fresh", 1, 0xA2);
    let r = wait(&mut c, 1, true, 1);
    assert_eq!((r[0].context, r[0].len), (0xB2, 5));
    assert_eq!(c.nodes[1].get(0, 5), b"fresh");
    assert_eq!(rdm_stats(&c, 0).tx_replayed, 1);
}

#[test]
fn slow_receiver_gets_back_pressure_not_loss() {
    let cfg = NodeConfig {
        provider: ofi_nostd::info::ProviderConfig {
            tx_size: 64,
            ..NodeConfig::default().provider
        },
        rdm: RdmConfig {
            unexp_slots: 16,
            unexp_msgs: 8,
            reorder_slots: 32,
            ..NodeConfig::default().rdm
        },
        mem_size: 4 << 20,
        ..NodeConfig::default()
    };
    let mut c = cluster(2, &cfg);
    // Node 0 sends 200 messages of 2 KiB (2 segments each) as fast as it is allowed;
    // node 1 posts no receive for a long time.
    let total = 200u64;
    let mut posted = 0u64;
    let mut eagain = 0;
    let mut done = 0;
    let deadline = c.sim.now() + Duration::from_millis(500);
    while posted < total && c.sim.now() < deadline {
        let data = pattern(posted, 2048);
        let a = c.nodes[0].put(posted as usize * 2048, &data);
        match c.nodes[0].op(|d, ep, m| d.send(ep, m, IoVec::new(a, 2048), 1, 0x1000 + posted)) {
            Ok(()) => posted += 1,
            Err(Errno::EAGAIN) => {
                eagain += 1;
                c.run_for(Duration::from_micros(500));
                done += tx(&mut c, 0).len();
            }
            Err(e) => panic!("{e:?}"),
        }
    }
    assert!(eagain > 0, "the sender was pushed back with -FI_EAGAIN");
    assert!(
        posted < total,
        "the sender could not run ahead of the receiver"
    );
    let rdm1 = c.nodes[1].dom.ep(c.nodes[1].ep).unwrap().rdm().unwrap();
    assert!(rdm1.unexpected_len() <= 8, "bounded unexpected queue");
    assert!(rdm1.held_packets() <= 32, "bounded reorder pool");
    assert!(rdm1.stats().rx_refused > 0);
    assert_eq!(
        rdm_stats(&c, 0).peer_failures,
        0,
        "a slow peer is not a dead peer"
    );
    // The receiver wakes up: every message arrives, once, in order.
    let mut got = 0u64;
    let mut off = 0usize;
    let end = c.sim.now() + Duration::from_secs(5);
    while got < total && c.sim.now() < end {
        while c.nodes[1].dom.ep(c.nodes[1].ep).unwrap().rx_size_left() > 0 && off < 256 {
            let at = B + 0x10_0000 + (off as u64) * 2048;
            c.nodes[1]
                .op(|d, ep, _| d.recv(ep, IoVec::new(at, 2048), FI_ADDR_UNSPEC, off as u64))
                .unwrap();
            off += 1;
        }
        while posted < total {
            let data = pattern(posted, 2048);
            let a = c.nodes[0].put(posted as usize * 2048, &data);
            if c.nodes[0]
                .op(|d, ep, m| d.send(ep, m, IoVec::new(a, 2048), 1, 0x1000 + posted))
                .is_err()
            {
                break;
            }
            posted += 1;
        }
        c.run_for(Duration::from_micros(300));
        for e in rx(&mut c, 1) {
            assert_eq!((e.context, e.err, e.len), (got, None, 2048));
            let at = 0x10_0000 + got as usize * 2048;
            assert_eq!(
                c.nodes[1].get(at, 2048),
                &pattern(got, 2048)[..],
                "message {got}"
            );
            got += 1;
        }
        done += tx(&mut c, 0).len();
    }
    assert_eq!(got, total);
    c.run_for(Duration::from_millis(5));
    done += tx(&mut c, 0).len();
    assert_eq!(done as u64, total);
}

#[test]
fn completion_levels() {
    let mut c = cluster(2, &NodeConfig::default());
    for k in 0..3u64 {
        c.nodes[1]
            .op(|d, ep, _| d.recv(ep, IoVec::new(B + 100 * k, 100), FI_ADDR_UNSPEC, 0xB0 + k))
            .unwrap();
    }
    c.nodes[0].put(0, b"levels");
    let s = |c: &mut Cluster, ctx: u64, flags: Flags| {
        let iov = [IoVec::new(B, 6)];
        c.nodes[0]
            .op(|d, ep, m| d.sendmsg(ep, m, &MsgArgs::new(&iov, 1, ctx), flags))
            .unwrap();
    };
    // Injected and inject-complete: complete before anything is sent.
    s(&mut c, 0xA0, Flags::INJECT | Flags::INJECT_COMPLETE);
    let t = tx(&mut c, 0);
    assert_eq!((t.len(), t[0].context, t[0].err), (1, 0xA0, None));
    assert_eq!(rdm_stats(&c, 0).tx_packets, 0);
    // Transmit-complete (default) and delivery-complete: after the target acked.
    s(&mut c, 0xA1, Flags::TRANSMIT_COMPLETE);
    s(&mut c, 0xA2, Flags::DELIVERY_COMPLETE);
    assert!(tx(&mut c, 0).is_empty());
    let t = wait(&mut c, 0, false, 2);
    assert_eq!(
        t.iter().map(|e| (e.context, e.err)).collect::<Vec<_>>(),
        [(0xA1, None), (0xA2, None)]
    );
    let r = wait(&mut c, 1, true, 3);
    assert!(r.iter().all(|e| e.len == 6 && e.err.is_none()));
}

/// Every node sends to every node, itself included, eager and rendezvous messages,
/// until it is pushed back; then no application posts a receive for ten seconds (MPI
/// ranks all stuck retrying a send, as Open MPI's `pml cm` does on -FI_EAGAIN), on a
/// network that loses 1% of datagrams. Every receiver runs out of unexpected-message
/// resources and keeps its refused packets, every sender has only selectively
/// acknowledged packets in flight: that is back-pressure, and no session may fail (it
/// did, until a retransmission timeout with nothing to resend sent a probe). Then the
/// receives are posted and every message arrives once, intact, matched in send order.
#[test]
fn mutually_blocked_peers_wait_without_failing() {
    // Eight networks: which packets a 1% loss takes decides whether a sender ends up
    // with only selectively acknowledged packets in flight (7 of these 8 did).
    for seed in 1..=8 {
        mutually_blocked(seed);
    }
}

fn mutually_blocked(seed: u64) {
    const N: usize = 4;
    const PER: usize = 300;
    const SLOT: usize = 20_000;
    let cfg = NodeConfig {
        provider: ofi_nostd::info::ProviderConfig {
            tx_size: 1024,
            rx_size: 1024,
            ..NodeConfig::default().provider
        },
        rdm: RdmConfig {
            max_peers: 8,
            reorder_slots: 256,
            unexp_slots: 256,
            unexp_msgs: 512,
            ..RdmConfig::DEFAULT
        },
        mem_size: 3 * PER * SLOT,
        cq_size: 4096,
        ..NodeConfig::default()
    };
    let faults = Faults {
        loss: 0.01,
        ..Faults::default()
    };
    let mut c = Cluster::new(NetSim::new(seed, faults), N, &cfg).expect("cluster");
    // Message k of node i: to plan[i][k].0, plan[i][k].1 bytes, tag (i << 32) | k.
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut rnd = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let plan: Vec<Vec<(usize, usize)>> = (0..N)
        .map(|_| {
            (0..PER)
                .map(|_| {
                    let len = match rnd() % 10 {
                        0..5 => rnd() % 64,
                        5..8 => rnd() % 8192,
                        _ => 8192 + rnd() % (SLOT as u64 - 8192),
                    };
                    ((rnd() % N as u64) as usize, len as usize)
                })
                .collect()
        })
        .collect();
    let payload = |i: usize, k: usize| pattern((i * 100_000 + k) as u64, plan[i][k].1);
    let mut next = [0usize; N];
    let push = |c: &mut Cluster, next: &mut [usize; N]| {
        for i in 0..N {
            while next[i] < PER {
                let k = next[i];
                let (j, len) = plan[i][k];
                let a = c.nodes[i].put(k * SLOT, &payload(i, k));
                let tag = ((i as u64) << 32) | k as u64;
                match c.nodes[i]
                    .op(|d, ep, m| d.tsend(ep, m, IoVec::new(a, len), j as u64, tag, k as u64))
                {
                    Ok(()) => next[i] += 1,
                    Err(Errno::EAGAIN) => break,
                    Err(e) => panic!("tsend: {e:?}"),
                }
            }
        }
    };
    push(&mut c, &mut next);
    c.run_for(Duration::from_secs(10));
    for i in 0..N {
        let s = rdm_stats(&c, i);
        assert_eq!(
            s.peer_failures, 0,
            "seed {seed}, node {i}: a blocked peer is not dead: {s:?}"
        );
        assert!(s.rx_refused > 0, "node {i} ran out of receive resources");
    }
    // The applications wake up.
    let expected: Vec<usize> = (0..N)
        .map(|j| plan.iter().flatten().filter(|m| m.0 == j).count())
        .collect();
    assert!(
        expected.iter().all(|&n| n <= 2 * PER),
        "memory for the receives"
    );
    let rx_at = |n: usize| PER * SLOT + n * SLOT;
    let mut posted = [0usize; N];
    let mut matched: Vec<Vec<(u64, usize, usize)>> = vec![Vec::new(); N];
    let mut sent = 0;
    let end = c.sim.now() + Duration::from_secs(60);
    while (sent < N * PER || (0..N).any(|j| matched[j].len() < expected[j])) && c.sim.now() < end {
        for j in 0..N {
            while posted[j] < expected[j]
                && c.nodes[j].dom.ep(c.nodes[j].ep).unwrap().rx_size_left() > 0
            {
                let at = Node::BASE + rx_at(posted[j]) as u64;
                let ctx = posted[j] as u64;
                c.nodes[j]
                    .op(|d, ep, _| d.trecv(ep, IoVec::new(at, SLOT), FI_ADDR_UNSPEC, 0, !0, ctx))
                    .unwrap();
                posted[j] += 1;
            }
        }
        push(&mut c, &mut next);
        c.run_for(Duration::from_millis(1));
        for (j, matched) in matched.iter_mut().enumerate() {
            let (txc, rxc) = c.nodes[j].completions();
            for e in rxc {
                assert_eq!(e.err, None, "node {j}: {e:?}");
                let (i, k) = ((e.tag >> 32) as usize, (e.tag & 0xffff_ffff) as usize);
                assert_eq!(
                    plan[i][k].0, j,
                    "node {j}: a message for node {}",
                    plan[i][k].0
                );
                assert_eq!(e.len, plan[i][k].1);
                assert_eq!(
                    c.nodes[j].get(rx_at(e.context as usize), e.len),
                    &payload(i, k)[..],
                    "node {j}: message {k} of node {i}"
                );
                matched.push((e.context, i, k));
            }
            for e in txc {
                assert_eq!(e.err, None, "node {j}: {e:?}");
                sent += 1;
            }
        }
    }
    assert_eq!(sent, N * PER, "every send completed");
    // Matched in send order: per source, the receive posted first took the message sent
    // first (completions may come in another order: a rendezvous completes when its
    // data is in).
    for (j, m) in matched.iter_mut().enumerate() {
        assert_eq!(m.len(), expected[j], "node {j} received everything");
        m.sort_unstable();
        for (i, sends) in plan.iter().enumerate() {
            let ks: Vec<usize> = m.iter().filter(|x| x.1 == i).map(|x| x.2).collect();
            let want: Vec<usize> = (0..PER).filter(|&k| sends[k].0 == j).collect();
            assert_eq!(
                ks, want,
                "node {j}: the messages of node {i}, once, in order"
            );
        }
    }
    for i in 0..N {
        assert_eq!(rdm_stats(&c, i).peer_failures, 0);
    }
}
