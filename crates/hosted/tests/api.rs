//! The safe API over real UDP loopback sockets (dp-kernel's `UdpLink`): DGRAM exchange
//! in manual and automatic progress, blocking waits, trywait, buffers, error codes and
//! drop order.

use std::time::{Duration, Instant};

use hosted::api::{
    AutoProgress, Buf, Cq, Domain, Endpoint, Fabric, Peek, ProgressMode, RemoteRegion,
};
use hosted::ofi_nostd::Errno;
use hosted::ofi_nostd::flags::{FI_ADDR_UNSPEC, FiAddr, Flags};
use hosted::ofi_nostd::info::{EpType, ProviderConfig};

const WAIT: Duration = Duration::from_secs(5);

struct Node<C: Send + 'static = u64> {
    domain: Domain<C>,
    cq: Cq<C>,
    ep: Endpoint<C>,
    av: hosted::api::Av<C>,
}

fn node_with<C: Send + 'static>(
    fabric: &Fabric,
    mode: ProgressMode,
    cfg: ProviderConfig,
) -> Node<C> {
    let domain = fabric
        .domain()
        .progress(mode)
        .config(cfg)
        .open::<C>()
        .unwrap();
    let cq = domain.cq(0).unwrap();
    let av = domain.av().unwrap();
    let ep = domain.endpoint(EpType::Dgram).unwrap();
    ep.bind_cq(&cq, Flags::TRANSMIT | Flags::RECV).unwrap();
    ep.bind_av(&av).unwrap();
    ep.enable().unwrap();
    Node { domain, cq, ep, av }
}

fn node<C: Send + 'static>(fabric: &Fabric, mode: ProgressMode) -> Node<C> {
    node_with(fabric, mode, ProviderConfig::DEFAULT)
}

fn pair<C: Send + 'static>(mode: ProgressMode) -> (Node<C>, Node<C>, FiAddr, FiAddr) {
    let fabric = Fabric::open().unwrap();
    let a = node(&fabric, mode);
    let b = node(&fabric, mode);
    let a_to_b = a.av.insert(b.ep.addr()).unwrap();
    let b_to_a = b.av.insert(a.ep.addr()).unwrap();
    (a, b, a_to_b, b_to_a)
}

fn exchange(mode: ProgressMode) {
    let (a, b, a_to_b, _) = pair::<&'static str>(mode);
    b.ep.recv(Buf::zeroed(256), FI_ADDR_UNSPEC, "b-rx").unwrap();
    let payload: Vec<u8> = (0..200u8).collect();
    let id =
        a.ep.send(Buf::from(payload.clone()), a_to_b, "a-tx")
            .unwrap();

    let sent = a.cq.sread(WAIT).unwrap();
    assert_eq!(sent.context, "a-tx");
    assert_eq!(sent.op, id);
    assert!(sent.is_send());
    assert_eq!(sent.result(), Ok(200));
    assert_eq!(
        &*sent.buf,
        &payload[..],
        "the send buffer comes back intact"
    );

    let got = b.cq.sread(WAIT).unwrap();
    assert_eq!(got.context, "b-rx");
    assert!(got.is_recv());
    assert_eq!(got.len, 200);
    assert_eq!(got.buf.capacity(), 256);
    assert_eq!(
        &*got.buf,
        &payload[..],
        "the receive buffer holds the message"
    );
    assert_eq!(got.data, None);
    assert_eq!(a.domain.buffers_held() + b.domain.buffers_held(), 0);
}

/// The RDM tuning a domain is given is the one it runs with; an invalid one is refused
/// with -FI_EINVAL; without one, the defaults (kernel UDP: no CRC32C).
#[test]
fn a_domain_runs_with_the_rdm_tuning_it_is_given() {
    use hosted::ofi_nostd::rdm::RdmConfig;
    let fabric = Fabric::open().unwrap();
    let plain = fabric.domain().open::<u64>().unwrap();
    assert!(
        !plain.rdm_config().crc,
        "kernel UDP checksums every datagram"
    );
    let mine = RdmConfig {
        window: 32,
        eager_threshold: 2048,
        ack_hold: hosted::ofi_nostd::time::Duration::from_micros(100),
        ..RdmConfig::DEFAULT
    };
    let d = fabric.domain().rdm(mine).open::<u64>().unwrap();
    assert_eq!(d.rdm_config(), mine);
    let bad = RdmConfig {
        window: 0,
        ..RdmConfig::DEFAULT
    };
    let e = fabric.domain().rdm(bad).open::<u64>().err().unwrap();
    assert_eq!(e, Errno::EINVAL);
}

#[test]
fn dgram_exchange_manual_progress() {
    exchange(ProgressMode::Manual);
}

#[test]
fn dgram_exchange_auto_progress() {
    exchange(ProgressMode::Auto(AutoProgress::default()));
}

#[test]
fn auto_progress_without_spinning_sleeps_in_epoll() {
    exchange(ProgressMode::Auto(AutoProgress {
        spin: Duration::ZERO,
        tick: Duration::from_millis(50),
    }));
}

#[test]
fn auto_progress_delivers_without_application_calls() {
    let (a, b, a_to_b, _) = pair::<u64>(ProgressMode::Auto(AutoProgress::default()));
    b.ep.recv(Buf::zeroed(64), FI_ADDR_UNSPEC, 1).unwrap();
    a.ep.send(Buf::from(&b"x"[..]), a_to_b, 2).unwrap();
    let t = Instant::now();
    // Only non-blocking reads: the thread must do the work.
    let c = loop {
        match b.cq.read() {
            Ok(c) => break c,
            Err(e) => assert_eq!(e, Errno::EAGAIN),
        }
        assert!(t.elapsed() < WAIT, "no completion");
        std::thread::sleep(Duration::from_millis(1));
    };
    assert_eq!(&*c.buf, b"x");
}

#[test]
fn remote_cq_data_and_source() {
    let (a, b, a_to_b, b_to_a) = pair::<u64>(ProgressMode::Manual);
    b.ep.recv(Buf::zeroed(16), FI_ADDR_UNSPEC, 1).unwrap();
    a.ep.senddata(Buf::from(&b"hi"[..]), 0xfeed, a_to_b, 2)
        .unwrap();
    let c = b.cq.sread(WAIT).unwrap();
    assert_eq!(c.data, Some(0xfeed));
    assert!(c.flags.contains(Flags::REMOTE_CQ_DATA));
    assert_eq!(c.src, b_to_a, "FI_SOURCE names the sender by its fi_addr");
    a.cq.sread(WAIT).unwrap();
}

#[test]
fn inject_needs_no_buffer_and_writes_no_completion() {
    let (a, b, a_to_b, _) = pair::<u64>(ProgressMode::Manual);
    b.ep.recv(Buf::zeroed(16), FI_ADDR_UNSPEC, 1).unwrap();
    let data = *b"inject";
    a.ep.inject(&data, a_to_b).unwrap();
    let c = b.cq.sread(WAIT).unwrap();
    assert_eq!(&*c.buf, b"inject");
    assert_eq!(a.cq.read().unwrap_err(), Errno::EAGAIN);
    let big = vec![0u8; 4096];
    assert_eq!(a.ep.inject(&big, a_to_b).unwrap_err(), Errno::EMSGSIZE);
}

/// Under manual progress a read that finds a completion queued hands it out without a
/// progress pass (nothing new is received), but never more than `READS_PER_PASS` in a
/// row; an empty CQ runs a pass. Nothing is lost or reordered either way.
#[test]
fn reads_of_a_queued_completion_skip_the_pass_a_bounded_number_of_times() {
    let (a, b, a_to_b, _) = pair::<u64>(ProgressMode::Manual);
    let queued = hosted::api::READS_PER_PASS as u64 + 8;
    for i in 0..=queued {
        b.ep.recv(Buf::zeroed(8), FI_ADDR_UNSPEC, i).unwrap();
    }
    for i in 0..queued {
        a.ep.inject(&i.to_le_bytes(), a_to_b).unwrap();
    }
    let t = Instant::now();
    while b.domain.stats().rx_packets < queued {
        b.domain.progress().unwrap();
        assert!(t.elapsed() < WAIT, "the datagrams did not arrive");
    }
    // One more waits in B's socket until a pass receives it.
    a.ep.inject(&queued.to_le_bytes(), a_to_b).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    let mut order = Vec::new();
    for n in 1..=hosted::api::READS_PER_PASS as u64 {
        let c = b.cq.read().unwrap();
        order.push(u64::from_le_bytes(c.buf[..8].try_into().unwrap()));
        assert_eq!(b.domain.stats().rx_packets, queued, "read {n} ran a pass");
    }
    // The next read runs a pass first (and gets the oldest completion still queued).
    let c = b.cq.read().unwrap();
    order.push(u64::from_le_bytes(c.buf[..8].try_into().unwrap()));
    assert_eq!(b.domain.stats().rx_packets, queued + 1);
    while let Ok(c) = b.cq.read() {
        order.push(u64::from_le_bytes(c.buf[..8].try_into().unwrap()));
    }
    assert_eq!(order, (0..=queued).collect::<Vec<_>>());
    assert_eq!(b.cq.read().unwrap_err(), Errno::EAGAIN);
}

#[test]
fn sread_times_out_with_eagain() {
    for mode in [
        ProgressMode::Manual,
        ProgressMode::Auto(AutoProgress::default()),
    ] {
        let (a, _b, _, _) = pair::<u64>(mode);
        a.ep.recv(Buf::zeroed(8), FI_ADDR_UNSPEC, 1).unwrap();
        let t = Instant::now();
        let e = a.cq.sread(Duration::from_millis(100)).unwrap_err();
        let took = t.elapsed();
        assert_eq!(e, Errno::EAGAIN);
        assert!(took >= Duration::from_millis(100), "{took:?}");
        assert!(took < Duration::from_secs(2), "{took:?}");
    }
}

#[test]
fn sread_wakes_when_a_message_arrives() {
    for mode in [
        ProgressMode::Manual,
        ProgressMode::Auto(AutoProgress::default()),
    ] {
        let (a, b, a_to_b, _) = pair::<u64>(mode);
        b.ep.recv(Buf::zeroed(8), FI_ADDR_UNSPEC, 7).unwrap();
        let t = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(50));
                a.ep.send(Buf::from(&b"wake"[..]), a_to_b, 1).unwrap();
            });
            let c = b.cq.sread(WAIT).unwrap();
            assert_eq!(c.context, 7);
            assert_eq!(&*c.buf, b"wake");
        });
        assert!(t.elapsed() < Duration::from_secs(2));
    }
}

/// The progress thread watches the link only while it sleeps (busy-polling, it leaves it
/// out: a watched socket costs every sender a wake-up callback). Every message here
/// comes after both threads went to sleep, and the tick and the core's timers are far
/// longer than the bound: only the link's descriptor can wake the receiver's thread in
/// time (its sleeps are also capped at 1 s).
#[test]
fn auto_progress_wakes_on_the_link_after_each_idle_spell() {
    let mode = ProgressMode::Auto(AutoProgress {
        spin: Duration::from_micros(50),
        tick: Duration::from_secs(30),
    });
    let (a, b, a_to_b, _) = pair::<u64>(mode);
    for round in 0..4u8 {
        b.ep.recv(Buf::zeroed(8), FI_ADDR_UNSPEC, u64::from(round))
            .unwrap();
        std::thread::sleep(Duration::from_millis(30));
        let t = Instant::now();
        a.ep.send(Buf::from(vec![round]), a_to_b, 100).unwrap();
        let c = loop {
            match b.cq.read() {
                Ok(c) => break c,
                Err(e) if e == Errno::EAGAIN => {
                    assert!(t.elapsed() < WAIT, "round {round}: nothing arrived");
                    std::thread::yield_now();
                }
                Err(e) => panic!("fi_cq_read: {e}"),
            }
        };
        let took = t.elapsed();
        assert_eq!((c.context, &*c.buf), (u64::from(round), &[round][..]));
        assert!(
            took < Duration::from_millis(500),
            "round {round} took {took:?}"
        );
        // The send's own completion.
        let t = Instant::now();
        while a.cq.read().is_err() {
            assert!(t.elapsed() < WAIT);
            std::thread::yield_now();
        }
    }
}

#[test]
fn cq_signal_interrupts_sread() {
    let (a, _b, _, _) = pair::<u64>(ProgressMode::Manual);
    let t = Instant::now();
    std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(50));
            a.cq.signal().unwrap();
        });
        assert_eq!(a.cq.sread(WAIT).unwrap_err(), Errno::EAGAIN);
    });
    assert!(t.elapsed() < Duration::from_secs(2));
}

#[test]
fn trywait_and_fd() {
    let (a, b, a_to_b, _) = pair::<u64>(ProgressMode::Auto(AutoProgress::default()));
    let fd = b.cq.fd().expect("fd wait object");
    assert_eq!(
        b.cq.trywait().map_err(|e| e.errno()),
        Ok(()),
        "nothing queued"
    );
    b.ep.recv(Buf::zeroed(8), FI_ADDR_UNSPEC, 1).unwrap();
    a.ep.send(Buf::from(&b"fd"[..]), a_to_b, 1).unwrap();
    // The application's own poll on the fd.
    let mut fds = [rustix_poll(fd)];
    let n = rustix::event::poll(&mut fds, Some(&ts(WAIT))).unwrap();
    assert_eq!(n, 1, "fd became readable");
    // Completions there: trywait refuses to let the caller block.
    let t = Instant::now();
    while b.cq.is_empty() {
        assert!(t.elapsed() < WAIT);
    }
    assert_eq!(b.cq.trywait().unwrap_err(), Errno::EAGAIN);
    let c = b.cq.read().unwrap();
    assert_eq!(&*c.buf, b"fd");
    assert!(b.cq.trywait().is_ok());
}

#[test]
fn manual_progress_fd_wakes_on_link_traffic() {
    let (a, b, a_to_b, _) = pair::<u64>(ProgressMode::Manual);
    b.ep.recv(Buf::zeroed(8), FI_ADDR_UNSPEC, 1).unwrap();
    assert!(b.cq.trywait().is_ok());
    a.ep.send(Buf::from(&b"m"[..]), a_to_b, 1).unwrap();
    // With manual progress nothing completes until b drives progress, but its wait fd
    // includes the link: it becomes readable so the application knows to read.
    let mut fds = [rustix_poll(b.cq.fd().unwrap())];
    assert_eq!(rustix::event::poll(&mut fds, Some(&ts(WAIT))).unwrap(), 1);
    assert_eq!(&*b.cq.read().unwrap().buf, b"m");
}

fn rustix_poll(fd: std::os::fd::BorrowedFd<'_>) -> rustix::event::PollFd<'_> {
    rustix::event::PollFd::from_borrowed_fd(fd, rustix::event::PollFlags::IN)
}

fn ts(d: Duration) -> rustix::time::Timespec {
    rustix::time::Timespec::try_from(d).unwrap()
}

#[test]
fn counter_wait_threshold_and_timeout() {
    for mode in [
        ProgressMode::Manual,
        ProgressMode::Auto(AutoProgress::default()),
    ] {
        let (a, b, _, _) = pair::<u64>(mode);
        // A second endpoint on b, with a receive counter.
        let cq = b.domain.cq(0).unwrap();
        let cntr = b.domain.counter().unwrap();
        let ep = b.domain.endpoint(EpType::Dgram).unwrap();
        ep.bind_cq(&cq, Flags::TRANSMIT | Flags::RECV).unwrap();
        ep.bind_av(&b.av).unwrap();
        ep.bind_counter(&cntr, Flags::RECV).unwrap();
        ep.enable().unwrap();
        let to = a.av.insert(ep.addr()).unwrap();
        let t = Instant::now();
        assert_eq!(
            cntr.wait(1, Duration::from_millis(50)).unwrap_err(),
            Errno::ETIMEDOUT
        );
        assert!(t.elapsed() >= Duration::from_millis(50));
        for i in 0..3 {
            ep.recv(Buf::zeroed(8), FI_ADDR_UNSPEC, i).unwrap();
        }
        std::thread::scope(|s| {
            s.spawn(|| {
                for _ in 0..3 {
                    std::thread::sleep(Duration::from_millis(10));
                    a.ep.send(Buf::from(&b"c"[..]), to, 0).unwrap();
                }
            });
            cntr.wait(3, WAIT).unwrap();
        });
        assert_eq!(cntr.read(), 3);
        assert_eq!(cntr.readerr(), 0);
        assert!(cntr.trywait().is_ok(), "read since the last change");
        cntr.add(1).unwrap();
        assert_eq!(cntr.trywait().unwrap_err(), Errno::EAGAIN);
        assert_eq!(cntr.read(), 4);
    }
}

#[test]
fn emsgsize_hands_the_buffer_back() {
    let (a, _b, a_to_b, _) = pair::<u32>(ProgressMode::Manual);
    let big = Buf::zeroed(9000);
    let e = a.ep.send(big, a_to_b, 5).unwrap_err();
    assert_eq!(e.errno, Errno::EMSGSIZE);
    let (buf, ctx) = e.into_parts();
    assert_eq!((buf.len(), ctx), (9000, 5));
}

#[test]
fn full_receive_queue_is_eagain() {
    let fabric = Fabric::open().unwrap();
    let cfg = ProviderConfig {
        rx_size: 2,
        tx_size: 2,
        ..ProviderConfig::DEFAULT
    };
    let n: Node<u32> = node_with(&fabric, ProgressMode::Manual, cfg);
    n.ep.recv(Buf::zeroed(8), FI_ADDR_UNSPEC, 1).unwrap();
    n.ep.recv(Buf::zeroed(8), FI_ADDR_UNSPEC, 2).unwrap();
    let e = n.ep.recv(Buf::zeroed(8), FI_ADDR_UNSPEC, 3).unwrap_err();
    assert_eq!(e.errno, Errno::EAGAIN);
    assert_eq!(e.context, 3);
    assert_eq!(n.ep.rx_size_left(), 0);
    assert_eq!(n.domain.buffers_held(), 2);
}

#[test]
fn truncation_and_cancel_complete_with_errors_and_buffers() {
    let (a, b, a_to_b, _) = pair::<u64>(ProgressMode::Manual);
    b.ep.recv(Buf::zeroed(4), FI_ADDR_UNSPEC, 1).unwrap();
    a.ep.send(Buf::from(&b"truncated"[..]), a_to_b, 2).unwrap();
    let c = b.cq.sread(WAIT).unwrap();
    let err = c.error.expect("error completion");
    assert_eq!(err.errno, Errno::ETRUNC);
    assert_eq!(err.olen, 5);
    assert_eq!(&*c.buf, b"trun");

    let id =
        b.ep.recv(Buf::from(vec![9u8; 8]), FI_ADDR_UNSPEC, 3)
            .unwrap();
    b.ep.cancel(id).unwrap();
    let c = b.cq.read().unwrap();
    assert_eq!(c.op, id);
    assert_eq!(c.context, 3);
    assert_eq!(c.result(), Err(Errno::ECANCELED));
    assert_eq!(c.buf.capacity(), 8);
    a.cq.sread(WAIT).unwrap();
}

#[test]
fn close_hands_back_outstanding_buffers() {
    let (_a, b, _, _) = pair::<String>(ProgressMode::Manual);
    for i in 0..3 {
        b.ep.recv(Buf::from(vec![i; 4]), FI_ADDR_UNSPEC, format!("r{i}"))
            .unwrap();
    }
    let Node { ep, domain, cq, .. } = b;
    let mut back = ep.close();
    back.sort_by(|x, y| x.1.cmp(&y.1));
    let ctx: Vec<_> = back.iter().map(|(_, c)| c.as_str()).collect();
    assert_eq!(ctx, ["r0", "r1", "r2"]);
    assert_eq!(&*back[2].0, &[2; 4]);
    assert_eq!(domain.buffers_held(), 0);
    assert_eq!(cq.read().unwrap_err(), Errno::EAGAIN);
}

#[test]
fn completions_queued_before_close_keep_their_buffers() {
    let (a, b, a_to_b, _) = pair::<u64>(ProgressMode::Manual);
    b.ep.recv(Buf::zeroed(8), FI_ADDR_UNSPEC, 1).unwrap();
    b.ep.recv(Buf::zeroed(8), FI_ADDR_UNSPEC, 2).unwrap();
    a.ep.send(Buf::from(&b"first"[..]), a_to_b, 0).unwrap();
    a.cq.sread(WAIT).unwrap();
    // Let b's progress deliver it without reading it.
    let t = Instant::now();
    while b.cq.is_empty() {
        b.domain.progress().unwrap();
        assert!(t.elapsed() < WAIT);
    }
    let Node { ep, cq, domain, .. } = b;
    let back = ep.close();
    assert_eq!(back.len(), 1, "only the receive that never completed");
    assert_eq!(back[0].1, 2);
    let c = cq.read().unwrap();
    assert_eq!((c.context, &*c.buf), (1, &b"first"[..]));
    assert_eq!(domain.buffers_held(), 0);
}

/// A context that counts its drops, to see every posted buffer and context freed once.
struct Tracked(std::sync::Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Tracked {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn drop_order_is_safe_in_any_order() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    for order in 0..4 {
        let drops = Arc::new(AtomicUsize::new(0));
        for mode in [
            ProgressMode::Manual,
            ProgressMode::Auto(AutoProgress::default()),
        ] {
            let fabric = Fabric::open().unwrap();
            let n: Node<Tracked> = node(&fabric, mode);
            let me = n.av.insert(n.ep.addr()).unwrap();
            for _ in 0..4 {
                n.ep.recv(Buf::zeroed(64), FI_ADDR_UNSPEC, Tracked(drops.clone()))
                    .unwrap();
            }
            // One completes (delivered to ourselves), three stay posted.
            n.ep.send(Buf::from(&b"self"[..]), me, Tracked(drops.clone()))
                .unwrap();
            let Node { domain, cq, ep, av } = n;
            match order {
                0 => {
                    drop(ep);
                    drop(cq);
                    drop(av);
                    drop(domain);
                }
                1 => {
                    drop(domain);
                    drop(cq);
                    drop(av);
                    drop(ep);
                }
                2 => {
                    drop(cq);
                    drop(av);
                    drop(domain);
                    drop(ep);
                }
                _ => {
                    drop(av);
                    drop(ep);
                    drop(domain);
                    drop(cq);
                }
            }
            assert_eq!(
                fabric.domains(),
                0,
                "the domain closed with its last object"
            );
        }
        assert_eq!(drops.load(Ordering::SeqCst), 10, "order {order}");
    }
}

#[test]
fn objects_of_another_domain_are_edomain() {
    let fabric = Fabric::open().unwrap();
    let a: Node<u64> = node(&fabric, ProgressMode::Manual);
    let b: Node<u64> = node(&fabric, ProgressMode::Manual);
    let ep = a.domain.endpoint(EpType::Dgram).unwrap();
    assert_eq!(
        ep.bind_cq(&b.cq, Flags::TRANSMIT).unwrap_err(),
        Errno::EDOMAIN
    );
    assert_eq!(ep.bind_av(&b.av).unwrap_err(), Errno::EDOMAIN);
    assert_eq!(ep.enable().unwrap_err(), Errno::ENOCQ);
    ep.bind_cq(&a.cq, Flags::TRANSMIT | Flags::RECV).unwrap();
    assert_eq!(ep.enable().unwrap_err(), Errno::ENOAV);
}

#[test]
fn busy_close_hands_the_object_back() {
    let fabric = Fabric::open().unwrap();
    let n: Node<u64> = node(&fabric, ProgressMode::Manual);
    let Node { cq, ep, av, domain } = n;
    let (cq, e) = cq.close().map(|_| ()).unwrap_err();
    assert_eq!(e, Errno::EBUSY);
    let (av, e) = av.close().map(|_| ()).unwrap_err();
    assert_eq!(e, Errno::EBUSY);
    assert!(ep.close().is_empty());
    cq.close().map_err(|(_, e)| e).unwrap();
    av.close().map_err(|(_, e)| e).unwrap();
    drop(domain);
    assert_eq!(fabric.domains(), 0);
}

#[test]
fn memory_registration_owns_the_buffer() {
    let fabric = Fabric::open().unwrap();
    let domain = fabric.domain().open::<u64>().unwrap();
    let mr = domain
        .register(Buf::from(vec![5u8; 32]), Flags::SEND | Flags::RECV)
        .unwrap();
    assert_ne!(mr.desc(), 0);
    let _ = mr.key();
    assert_eq!(mr.read(|b| b[..2].to_vec()), [5, 5]);
    mr.write(|b| b[1] = 6);
    let buf = mr.close();
    assert_eq!(buf.len(), 32);
    assert_eq!(&buf[..3], &[5, 6, 5]);
}

/// RMA through the safe API: writes (with remote CQ data) land in the peer's
/// registered region, reads bring them back, and accesses the registration does not
/// allow fail at the initiator with the buffer handed back.
fn rdm_rma(mode: ProgressMode) {
    let (a, b, a_to_b, _) = rdm_pair::<u64>(mode);
    let mr = b
        .domain
        .register(Buf::zeroed(8192), Flags::REMOTE_READ | Flags::REMOTE_WRITE)
        .unwrap();
    let ro = b
        .domain
        .register(Buf::zeroed(64), Flags::REMOTE_READ)
        .unwrap();
    let data: Vec<u8> = (0..5000u32).map(|i| (i * 13) as u8).collect();
    let at = |offset| RemoteRegion {
        offset,
        key: mr.key(),
    };
    a.ep.writedata(Buf::from(data.clone()), 0x77, a_to_b, at(100), 1)
        .unwrap();
    let c = next_of(&a.cq, &b.domain);
    assert_eq!((c.context, c.result()), (1, Ok(5000)));
    assert_eq!(c.flags, Flags::RMA | Flags::WRITE);
    assert_eq!(c.buf[..], data[..], "the buffer comes back unchanged");
    assert!(mr.read(|m| m[100..5100] == data[..] && m[..100].iter().all(|&x| x == 0)));
    // The target's remote CQ data event (no operation of its own behind it).
    let ev = b.cq.read_remote().unwrap();
    assert_eq!((ev.data, ev.len), (0x77, 5000));
    assert_eq!(
        ev.flags,
        Flags::RMA | Flags::REMOTE_WRITE | Flags::REMOTE_CQ_DATA
    );
    assert_eq!(b.cq.read_remote().unwrap_err(), Errno::EAGAIN);

    a.ep.read(Buf::zeroed(5000), a_to_b, at(100), 2).unwrap();
    let c = next_of(&a.cq, &b.domain);
    assert_eq!((c.context, c.result()), (2, Ok(5000)));
    assert_eq!(c.flags, Flags::RMA | Flags::READ);
    assert_eq!(c.buf[..], data[..]);

    // Past the region's end; into a read-only region.
    a.ep.write(Buf::from(vec![1u8; 16]), a_to_b, at(8190), 3)
        .unwrap();
    let c = next_of(&a.cq, &b.domain);
    assert_eq!((c.context, c.result()), (3, Err(Errno::EACCES)));
    assert_eq!(c.buf.len(), 16);
    let to_ro = RemoteRegion {
        offset: 0,
        key: ro.key(),
    };
    a.ep.write(Buf::from(vec![1u8; 16]), a_to_b, to_ro, 4)
        .unwrap();
    let c = next_of(&a.cq, &b.domain);
    assert_eq!((c.context, c.result()), (4, Err(Errno::EACCES)));
    assert!(ro.read(|m| m.iter().all(|&x| x == 0)));
    a.ep.read(Buf::zeroed(8), a_to_b, to_ro, 5).unwrap();
    let c = next_of(&a.cq, &b.domain);
    assert_eq!((c.context, c.result(), c.buf.len()), (5, Ok(8), 8));
    // FI_RMA_EVENT: a counter bound to the region counts the reads served.
    let reads = b.domain.counter().unwrap();
    mr.bind_counter(&reads, Flags::REMOTE_READ).unwrap();
    a.ep.read(Buf::zeroed(16), a_to_b, at(0), 7).unwrap();
    let c = next_of(&a.cq, &b.domain);
    assert_eq!((c.context, c.result()), (7, Ok(16)));
    assert_eq!(reads.read(), 1);
    // A deregistered region is out of reach.
    let key = mr.key();
    let back = mr.close();
    assert_eq!(back[100..5100], data[..]);
    let gone = RemoteRegion { offset: 0, key };
    a.ep.read(Buf::zeroed(8), a_to_b, gone, 6).unwrap();
    let c = next_of(&a.cq, &b.domain);
    assert_eq!(
        (c.context, c.result(), c.buf.len()),
        (6, Err(Errno::EACCES), 0)
    );
}

/// Atomics through the safe API: fetch-and-add, compare-and-swap, an update without
/// fetch and ATOMIC_READ on a peer's region; the result buffer comes back filled.
fn rdm_atomics(mode: ProgressMode) {
    use hosted::api::{AtomicDatatype as Dt, AtomicOp as Op};
    let (a, b, a_to_b, _) = rdm_pair::<u64>(mode);
    let mr = b
        .domain
        .register(Buf::zeroed(64), Flags::REMOTE_READ | Flags::REMOTE_WRITE)
        .unwrap();
    mr.write(|m| m[8..16].copy_from_slice(&40u64.to_ne_bytes()));
    let at = RemoteRegion {
        offset: 8,
        key: mr.key(),
    };
    let u64_of = |b: &[u8]| u64::from_ne_bytes(b[..8].try_into().unwrap());
    a.ep.fetch_atomic(
        &2u64.to_ne_bytes(),
        Buf::zeroed(8),
        a_to_b,
        at,
        Op::Sum,
        Dt::U64,
        1,
    )
    .unwrap();
    let c = next_of(&a.cq, &b.domain);
    assert_eq!((c.context, c.result()), (1, Ok(8)));
    assert_eq!(c.flags, Flags::ATOMIC | Flags::READ);
    assert_eq!(u64_of(&c.buf), 40);
    assert_eq!(mr.read(|m| u64_of(&m[8..])), 42);
    let (swap, cmp) = (7u64.to_ne_bytes(), 42u64.to_ne_bytes());
    a.ep.compare_atomic(
        &swap,
        &cmp,
        Buf::zeroed(8),
        a_to_b,
        at,
        Op::Cswap,
        Dt::U64,
        2,
    )
    .unwrap();
    let c = next_of(&a.cq, &b.domain);
    assert_eq!((c.context, u64_of(&c.buf)), (2, 42));
    a.ep.atomic(&0x10u64.to_ne_bytes(), a_to_b, at, Op::Bor, Dt::U64, 3)
        .unwrap();
    let c = next_of(&a.cq, &b.domain);
    assert_eq!((c.context, c.flags), (3, Flags::ATOMIC | Flags::WRITE));
    a.ep.fetch_atomic(&[], Buf::zeroed(8), a_to_b, at, Op::Read, Dt::U64, 4)
        .unwrap();
    let c = next_of(&a.cq, &b.domain);
    assert_eq!((c.context, u64_of(&c.buf)), (4, 0x17));
    // Not whole elements; an operation the endpoint does not serve.
    let e =
        a.ep.atomic(&[1, 2, 3], a_to_b, at, Op::Sum, Dt::U64, 5)
            .unwrap_err();
    assert_eq!(e.errno, Errno::EINVAL);
    let e =
        a.ep.atomic(&[0; 8], a_to_b, at, Op::Bor, Dt::F64, 6)
            .unwrap_err();
    assert_eq!(e.errno, Errno::EOPNOTSUPP);
}

#[test]
fn rdm_atomics_manual_progress() {
    rdm_atomics(ProgressMode::Manual);
}

#[test]
fn rdm_atomics_auto_progress() {
    rdm_atomics(ProgressMode::Auto(AutoProgress::default()));
}

#[test]
fn rdm_rma_manual_progress() {
    rdm_rma(ProgressMode::Manual);
}

#[test]
fn rdm_rma_auto_progress() {
    rdm_rma(ProgressMode::Auto(AutoProgress::default()));
}

fn rdm_pair<C: Send + 'static>(mode: ProgressMode) -> (Node<C>, Node<C>, FiAddr, FiAddr) {
    let fabric = Fabric::open().unwrap();
    let mk = || {
        let domain = fabric.domain().progress(mode).open::<C>().unwrap();
        let cq = domain.cq(0).unwrap();
        let av = domain.av().unwrap();
        let ep = domain.endpoint(EpType::Rdm).unwrap();
        ep.bind_cq(&cq, Flags::TRANSMIT | Flags::RECV).unwrap();
        ep.bind_av(&av).unwrap();
        ep.enable().unwrap();
        Node { domain, cq, ep, av }
    };
    let (a, b) = (mk(), mk());
    let a_to_b = a.av.insert(b.ep.addr()).unwrap();
    let b_to_a = b.av.insert(a.ep.addr()).unwrap();
    (a, b, a_to_b, b_to_a)
}

/// Reads completions from both sides (driving both when progress is manual) until
/// `cq` yields one.
fn next_of<C: Send + 'static>(cq: &Cq<C>, other: &Domain<C>) -> hosted::api::Completion<C> {
    let t = Instant::now();
    loop {
        match cq.sread(Duration::from_millis(1)) {
            Ok(c) => return c,
            Err(e) => assert_eq!(e, Errno::EAGAIN),
        }
        other.progress().unwrap();
        assert!(t.elapsed() < WAIT, "no completion");
    }
}

fn rdm_tagged(mode: ProgressMode) {
    let (a, b, a_to_b, b_to_a) = rdm_pair::<u64>(mode);
    // Posted out of order: tag 2 first, then any tag of the 0x10 family.
    b.ep.trecv(Buf::zeroed(64), FI_ADDR_UNSPEC, 2, 0, 102)
        .unwrap();
    b.ep.trecv(Buf::zeroed(64), FI_ADDR_UNSPEC, 0x10, 0x0f, 110)
        .unwrap();
    a.ep.tsend(Buf::from(&b"sixteen"[..]), a_to_b, 0x13, 1)
        .unwrap();
    a.ep.tsenddata(Buf::from(&b"two"[..]), 77, a_to_b, 2, 2)
        .unwrap();
    let mut got = Vec::new();
    while got.len() < 2 {
        let c = next_of(&b.cq, &a.domain);
        c.result().unwrap();
        got.push((c.context, c.tag, c.data, c.src, c.buf.to_vec()));
    }
    got.sort();
    assert_eq!(got[0], (102, Some(2), Some(77), b_to_a, b"two".to_vec()));
    assert_eq!(got[1], (110, Some(0x13), None, b_to_a, b"sixteen".to_vec()));
    let mut sent = Vec::new();
    while sent.len() < 2 {
        let c = next_of(&a.cq, &b.domain);
        assert!(c.is_send());
        sent.push((c.context, c.buf.to_vec()));
    }
    sent.sort();
    assert_eq!(sent, [(1, b"sixteen".to_vec()), (2, b"two".to_vec())]);

    // Larger than the eager threshold: rendezvous straight into the posted buffer.
    let big: Vec<u8> = (0..200_000u32).map(|i| (i * 7) as u8).collect();
    b.ep.trecv(Buf::zeroed(256 * 1024), FI_ADDR_UNSPEC, 9, 0, 9)
        .unwrap();
    a.ep.tsend(Buf::from(big.clone()), a_to_b, 9, 9).unwrap();
    let c = next_of(&b.cq, &a.domain);
    assert_eq!(c.result(), Ok(big.len()));
    assert!(c.buf[..] == big[..], "rendezvous payload intact");
    let c = next_of(&a.cq, &b.domain);
    assert!(c.buf[..] == big[..], "send buffer back intact");
    // Untagged messages on RDM too.
    b.ep.recv(Buf::zeroed(8), FI_ADDR_UNSPEC, 3).unwrap();
    a.ep.send(Buf::from(&b"msg"[..]), a_to_b, 3).unwrap();
    let c = next_of(&b.cq, &a.domain);
    assert_eq!((&*c.buf, c.tag), (&b"msg"[..], None));
    next_of(&a.cq, &b.domain);
    assert_eq!(a.domain.buffers_held() + b.domain.buffers_held(), 0);
}

#[test]
fn rdm_tagged_exchange_manual_progress() {
    rdm_tagged(ProgressMode::Manual);
}

#[test]
fn rdm_tagged_exchange_auto_progress() {
    rdm_tagged(ProgressMode::Auto(AutoProgress::default()));
}

#[test]
fn tagged_ops_on_dgram_are_eopnotsupp() {
    let (a, _b, a_to_b, _) = pair::<u64>(ProgressMode::Manual);
    let e = a.ep.tsend(Buf::zeroed(4), a_to_b, 1, 0).unwrap_err();
    assert_eq!(e.errno, Errno::EOPNOTSUPP);
    let e =
        a.ep.trecv(Buf::zeroed(4), FI_ADDR_UNSPEC, 1, 0, 0)
            .unwrap_err();
    assert_eq!(e.errno, Errno::EOPNOTSUPP);
    assert_eq!(a.domain.buffers_held(), 0);
}

#[test]
fn rdm_close_with_posted_buffers() {
    let (a, b, a_to_b, _) = rdm_pair::<u64>(ProgressMode::Auto(AutoProgress::default()));
    for i in 0..4 {
        b.ep.trecv(Buf::zeroed(64), FI_ADDR_UNSPEC, i, 0, i)
            .unwrap();
    }
    a.ep.tsend(Buf::from(&b"x"[..]), a_to_b, 0, 0).unwrap();
    next_of(&b.cq, &a.domain);
    let Node { ep, domain, .. } = b;
    let back = ep.close();
    assert_eq!(back.len(), 3);
    assert_eq!(domain.buffers_held(), 0);
}

#[test]
fn any_link_plugs_in_through_with_fd() {
    use hosted::api::WithFd;
    use hosted::ofi_nostd::net::NetConfig;
    use std::net::{Ipv4Addr, SocketAddrV4};
    use wire::link::Link;

    let fabric = Fabric::open().unwrap();
    let mk = |with_fd: bool| {
        let link = dp_kernel::UdpLink::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).unwrap();
        let local = link.local_addr();
        let net = NetConfig::new(&link.capabilities(), local.ip().octets(), local.port());
        let fd = with_fd.then(|| {
            std::os::fd::AsFd::as_fd(&link)
                .try_clone_to_owned()
                .unwrap()
        });
        // Without a descriptor the progress thread polls on its short timer.
        let domain = fabric
            .domain()
            .link(WithFd::new(link, fd), net)
            .auto_progress()
            .open::<u64>()
            .unwrap();
        let cq = domain.cq(0).unwrap();
        let av = domain.av().unwrap();
        let ep = domain.endpoint(EpType::Dgram).unwrap();
        ep.bind_cq(&cq, Flags::TRANSMIT | Flags::RECV).unwrap();
        ep.bind_av(&av).unwrap();
        ep.enable().unwrap();
        Node { domain, cq, ep, av }
    };
    let (a, b) = (mk(true), mk(false));
    let to_b = a.av.insert(b.ep.addr()).unwrap();
    assert_eq!(b.domain.local_addr().port, b.ep.addr().port);
    b.ep.recv(Buf::zeroed(16), FI_ADDR_UNSPEC, 1).unwrap();
    a.ep.send(Buf::from(&b"custom"[..]), to_b, 2).unwrap();
    assert_eq!(&*b.cq.sread(WAIT).unwrap().buf, b"custom");
    assert_eq!(a.cq.sread(WAIT).unwrap().context, 2);
}

/// `Endpoint::set_more` (FI_MORE): sends posted while it is on wait, and leave together
/// when it is turned off.
#[test]
fn sends_posted_with_more_leave_when_it_is_turned_off() {
    let (a, b, a_to_b, _) = rdm_pair::<u64>(ProgressMode::Manual);
    // The session first.
    b.ep.recv(Buf::zeroed(16), FI_ADDR_UNSPEC, 100).unwrap();
    a.ep.inject(b"hello", a_to_b).unwrap();
    assert_eq!(&*next_of(&b.cq, &a.domain).buf, b"hello");
    for i in 0..3 {
        b.ep.recv(Buf::zeroed(16), FI_ADDR_UNSPEC, i).unwrap();
    }
    a.ep.set_more(true);
    for i in 0..3u8 {
        a.ep.inject(&[b'm', i], a_to_b).unwrap();
    }
    // Only B progresses here: nothing has left A.
    assert_eq!(
        b.cq.sread(Duration::from_millis(20)).unwrap_err(),
        Errno::EAGAIN
    );
    a.ep.set_more(false);
    for i in 0..3u8 {
        let c = next_of(&b.cq, &a.domain);
        assert_eq!((c.context, &*c.buf), (u64::from(i), &[b'm', i][..]));
    }
}

#[test]
fn a_multi_receive_buffer_takes_a_stream_of_messages_and_comes_back_once() {
    let (a, b, a_to_b, _) = rdm_pair::<u64>(ProgressMode::Manual);
    // 1000 bytes for 50-byte messages: after the 19th, 50 bytes are left, less than the
    // 64-byte FI_OPT_MIN_MULTI_RECV default, so the 19th releases the buffer.
    let id =
        b.ep.recv_multi(Buf::zeroed(1000), FI_ADDR_UNSPEC, 9)
            .unwrap();
    let msg = |i: u8| vec![i; 50];
    for i in 0..20u8 {
        a.ep.inject(&msg(i), a_to_b).unwrap();
    }
    let mut offsets = Vec::new();
    let mut copy = Buf::zeroed(64);
    let back = loop {
        // read_copy: each message's bytes at once, while the buffer stays posted.
        let t = Instant::now();
        let c = loop {
            match b.cq.read_copy(&mut copy) {
                Ok(c) => break c,
                Err(e) => assert_eq!(e, Errno::EAGAIN),
            }
            a.domain.progress().unwrap();
            assert!(t.elapsed() < WAIT, "no completion");
        };
        assert_eq!(c.op, id);
        assert_eq!(
            c.context, 9,
            "every message completes with the post's context"
        );
        assert!(c.is_recv());
        assert_eq!(c.result(), Ok(50));
        let off = c.offset.expect("a multi-receive message has an offset");
        offsets.push(off);
        if c.flags.contains(Flags::MULTI_RECV) {
            break c;
        }
        assert_eq!(c.buf.capacity(), 0, "the buffer stays posted");
        assert_eq!(
            &*copy,
            &msg(offsets.len() as u8 - 1)[..],
            "read_copy's copy"
        );
        copy.set_len(0);
        assert_eq!(b.cq.copy_multi(&c, &mut copy), 50, "and copy_multi's");
        assert_eq!(&*copy, &msg(offsets.len() as u8 - 1)[..]);
    };
    // The last one gives the buffer back instead: nothing copied.
    assert_eq!(b.cq.copy_multi(&back, &mut copy), 0);
    // Each message lands right after the one before; the buffer is released once less
    // than 64 bytes are left: after the 19th message (950 used, 50 left).
    assert_eq!(offsets, (0..19).map(|i| i * 50).collect::<Vec<_>>());
    assert_eq!(back.buf.capacity(), 1000);
    assert_eq!(
        back.buf.len(),
        950,
        "the length is the bytes the messages used"
    );
    for (i, off) in offsets.iter().enumerate() {
        assert_eq!(&back.buf[*off..off + 50], &msg(i as u8)[..], "message {i}");
    }
    // The 20th message did not fit in what was left: it waits for the next buffer.
    let id2 =
        b.ep.recv_multi(Buf::zeroed(1000), FI_ADDR_UNSPEC, 10)
            .unwrap();
    let c = next_of(&b.cq, &a.domain);
    assert_eq!((c.op, c.context, c.offset, c.len), (id2, 10, Some(0), 50));
    // A canceled buffer comes back with -FI_ECANCELED, its messages' offsets still valid.
    b.ep.cancel(id2).unwrap();
    let c = next_of(&b.cq, &a.domain);
    assert_eq!(c.op, id2);
    assert_eq!(c.result(), Err(Errno::ECANCELED));
    let mut buf = c.buf;
    assert_eq!(buf.capacity(), 1000);
    assert_eq!(&buf.as_full_mut()[..50], &msg(19)[..]);
}

/// Tagged peeks (fi_tagged(3) FI_PEEK, FI_CLAIM, FI_DISCARD) through the safe API: a
/// peek reports a buffered message (length, tag, CQ data; no bytes) or -FI_ENOMSG; a
/// claiming peek reserves the message for `trecv_claimed` under the peek's id, hidden
/// from other peeks meanwhile; discarding drops it; a claim without a claimed message
/// is -FI_ENOMSG.
#[test]
fn tagged_peeks_look_claim_and_discard() {
    let (a, b, a_to_b, _) = rdm_pair::<u64>(ProgressMode::Manual);
    let peek = |tag: u64, mode: Peek, ctx: u64| {
        let id = b.ep.tpeek(FI_ADDR_UNSPEC, tag, 0, mode, ctx).unwrap();
        let c = next_of(&b.cq, &a.domain);
        assert_eq!((c.op, c.context), (id, ctx));
        assert!(c.buf.is_empty(), "a peek copies no data");
        (id, c)
    };
    // Nothing has arrived yet.
    let (_, c) = peek(5, Peek::Look, 1);
    assert_eq!(c.result(), Err(Errno::ENOMSG));
    a.ep.tinject(b"five", a_to_b, 5).unwrap();
    a.ep.tinject(b"six!!", a_to_b, 6).unwrap();
    a.ep.tinject(b"seven!", a_to_b, 7).unwrap();
    // Until all three are buffered at B (the last sent arrives last).
    let t = Instant::now();
    loop {
        let (_, c) = peek(7, Peek::Look, 2);
        if c.result().is_ok() {
            break;
        }
        a.domain.progress().unwrap();
        b.domain.progress().unwrap();
        assert!(t.elapsed() < WAIT, "the messages never arrived");
    }
    // A look leaves the message where it is.
    for _ in 0..2 {
        let (_, c) = peek(5, Peek::Look, 3);
        assert_eq!((c.result(), c.tag), (Ok(4), Some(5)));
    }
    // A claim hides it from peeks until the claiming receive takes it.
    let (p, c) = peek(5, Peek::Claim, 4);
    assert_eq!((c.result(), c.tag), (Ok(4), Some(5)));
    assert_eq!(peek(5, Peek::Look, 5).1.result(), Err(Errno::ENOMSG));
    assert_eq!(b.ep.trecv_claimed(p, Buf::zeroed(64), 6).unwrap(), p);
    let c = next_of(&b.cq, &a.domain);
    assert_eq!((c.op, c.context, c.tag), (p, 6, Some(5)));
    assert_eq!(&*c.buf, b"five");
    // Taken: nothing is claimed under that id any more.
    let e = b.ep.trecv_claimed(p, Buf::zeroed(64), 7).unwrap_err();
    assert_eq!(
        (e.errno, e.context, e.buf.capacity()),
        (Errno::ENOMSG, 7, 64)
    );
    // A discarding peek drops its message.
    let (_, c) = peek(6, Peek::Discard, 8);
    assert_eq!(c.result(), Ok(5));
    assert_eq!(peek(6, Peek::Look, 9).1.result(), Err(Errno::ENOMSG));
    // A claimed message dropped by a discarding claim.
    let (q, c) = peek(7, Peek::Claim, 10);
    assert_eq!(c.result(), Ok(6));
    assert_eq!(b.ep.tdiscard_claimed(q, 11).unwrap(), q);
    let c = next_of(&b.cq, &a.domain);
    assert_eq!((c.op, c.context, c.result()), (q, 11, Ok(0)));
    assert_eq!(
        b.ep.tdiscard_claimed(q, 12).unwrap_err().errno,
        Errno::ENOMSG
    );
    assert_eq!(peek(7, Peek::Look, 13).1.result(), Err(Errno::ENOMSG));
    // A claiming peek that found nothing reserved nothing.
    let (r, c) = peek(8, Peek::Claim, 14);
    assert_eq!(c.result(), Err(Errno::ENOMSG));
    assert_eq!(
        b.ep.trecv_claimed(r, Buf::zeroed(8), 15).unwrap_err().errno,
        Errno::ENOMSG
    );
    // An ordinary receive still works alongside.
    b.ep.trecv(Buf::zeroed(64), FI_ADDR_UNSPEC, 9, 0, 16)
        .unwrap();
    a.ep.tinject(b"nine", a_to_b, 9).unwrap();
    let c = next_of(&b.cq, &a.domain);
    assert_eq!((c.context, &*c.buf), (16, &b"nine"[..]));
}

/// `Cq::read_batch`: many completions under one call, each message of a multi-receive
/// buffer that stays posted copied into the batch, in completion order; completions a
/// reader left in the batch stay ahead of the next call's (their copies intact); the
/// completion that gives the buffer back carries the buffer, not a copy; an empty CQ
/// reads -FI_EAGAIN.
#[test]
fn a_batch_read_takes_many_completions_with_their_messages() {
    let (a, b, a_to_b, _) = rdm_pair::<u64>(ProgressMode::Manual);
    let id =
        b.ep.recv_multi(Buf::zeroed(1000), FI_ADDR_UNSPEC, 9)
            .unwrap();
    let msg = |i: u8| vec![i; 50];
    for i in 0..19u8 {
        a.ep.inject(&msg(i), a_to_b).unwrap();
    }
    let mut batch = hosted::api::CqBatch::default();
    assert!(batch.is_empty() && batch.pop().is_none());
    // A small batch first; its entries are not taken before the next read.
    let t = Instant::now();
    while batch.len() < 2 {
        let want = 2 - batch.len();
        match b.cq.read_batch(&mut batch, want) {
            Ok(n) => assert!((1..=2).contains(&n), "read {n}"),
            Err(e) => assert_eq!(e, Errno::EAGAIN),
        }
        a.domain.progress().unwrap();
        assert!(t.elapsed() < WAIT, "no completion");
    }
    while batch.len() < 19 {
        match b.cq.read_batch(&mut batch, 32) {
            Ok(n) => assert!(n <= 17, "read {n}"),
            Err(e) => assert_eq!(e, Errno::EAGAIN),
        }
        a.domain.progress().unwrap();
        assert!(t.elapsed() < WAIT, "no completion");
    }
    assert_eq!(batch.len(), 19);
    for i in 0..18u8 {
        let (c, bytes) = batch.pop().unwrap();
        assert_eq!(
            (c.op, c.context, c.result()),
            (id, 9, Ok(50)),
            "message {i}"
        );
        assert_eq!(c.offset, Some(usize::from(i) * 50));
        assert_eq!(c.buf.capacity(), 0, "the buffer stays posted");
        assert_eq!(bytes, Some(&msg(i)[..]), "message {i}'s copy");
    }
    // The 19th leaves 50 bytes, under the 64-byte minimum: the buffer comes back.
    let (back, bytes) = batch.pop().unwrap();
    assert!(back.flags.contains(Flags::MULTI_RECV));
    assert_eq!(bytes, None, "the buffer itself is back: no copy");
    assert_eq!((back.buf.capacity(), back.buf.len()), (1000, 950));
    assert_eq!(&back.buf[900..950], &msg(18)[..]);
    assert!(batch.pop().is_none());
    assert_eq!(b.cq.read_batch(&mut batch, 32).unwrap_err(), Errno::EAGAIN);
    assert!(batch.is_empty());
}

/// A burst posted with FI_MORE (`Endpoint::set_more`) to an established peer leaves
/// in BUNDLEs, which the endpoint's engine counts (`Endpoint::rdm_stats`), and every
/// message arrives with its bytes and CQ data; a DGRAM endpoint has no engine stats.
#[test]
fn a_burst_posted_with_more_goes_in_bundles() {
    let (a, b, a_to_b, _) = rdm_pair::<u64>(ProgressMode::Manual);
    // The session first.
    b.ep.recv(Buf::zeroed(64), FI_ADDR_UNSPEC, 0).unwrap();
    a.ep.inject(b"hello", a_to_b).unwrap();
    next_of(&b.cq, &a.domain);
    let before = (a.ep.rdm_stats().unwrap(), b.ep.rdm_stats().unwrap());
    let n = 12u64;
    for i in 0..n {
        b.ep.recv(Buf::zeroed(64), FI_ADDR_UNSPEC, 100 + i).unwrap();
    }
    a.ep.set_more(true);
    for i in 0..n {
        let msg: Vec<u8> = (0..40).map(|k| (i * 3 + k) as u8).collect();
        a.ep.injectdata(&msg, 1000 + i, a_to_b).unwrap();
    }
    a.ep.set_more(false);
    let mut got = Vec::new();
    while got.len() < n as usize {
        let c = next_of(&b.cq, &a.domain);
        c.result().unwrap();
        got.push((c.context, c.data, c.buf.to_vec()));
    }
    got.sort();
    for (i, (ctx, data, bytes)) in got.into_iter().enumerate() {
        let i = i as u64;
        let want: Vec<u8> = (0..40).map(|k| (i * 3 + k) as u8).collect();
        assert_eq!((ctx, data, bytes), (100 + i, Some(1000 + i), want));
    }
    let (sa, sb) = (a.ep.rdm_stats().unwrap(), b.ep.rdm_stats().unwrap());
    let bundles = sa.tx_bundles - before.0.tx_bundles;
    let bundled = sa.tx_bundled_msgs - before.0.tx_bundled_msgs;
    assert!(
        bundles >= 1 && bundled as usize >= 2,
        "{bundles} bundles, {bundled} messages"
    );
    assert_eq!(sb.rx_bundled_msgs - before.1.rx_bundled_msgs, bundled);
    assert!(
        sa.tx_packets - before.0.tx_packets < n,
        "fewer packets than messages"
    );
    let fabric = Fabric::open().unwrap();
    assert!(
        node::<u64>(&fabric, ProgressMode::Manual)
            .ep
            .rdm_stats()
            .is_none()
    );
}
