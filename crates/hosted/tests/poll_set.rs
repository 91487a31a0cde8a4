//! The safe API's poll set (fi_poll(3)) over real UDP loopback sockets: CQs and a
//! counter of two domains in one set, named when they have something to read, none
//! when idle, `wait` sleeping until a message arrives, in manual and automatic
//! progress.

use std::time::{Duration, Instant};

use hosted::api::{AutoProgress, Buf, Fabric, PollSet, ProgressMode};
use hosted::ofi_nostd::Errno;
use hosted::ofi_nostd::flags::{FI_ADDR_UNSPEC, Flags};
use hosted::ofi_nostd::info::EpType;

const WAIT: Duration = Duration::from_secs(5);

fn poll_set(mode: ProgressMode) {
    let fabric = Fabric::open().unwrap();
    let open = || {
        let d = fabric.domain().progress(mode).open::<u64>().unwrap();
        let cq = d.cq(0).unwrap();
        let av = d.av().unwrap();
        let ep = d.endpoint(EpType::Dgram).unwrap();
        ep.bind_cq(&cq, Flags::TRANSMIT | Flags::RECV).unwrap();
        ep.bind_av(&av).unwrap();
        (d, cq, av, ep)
    };
    let (_da, a_cq, a_av, a_ep) = open();
    let (db, b_cq, _b_av, b_ep) = open();
    let cntr = db.counter().unwrap();
    b_ep.bind_counter(&cntr, Flags::RECV).unwrap();
    a_ep.enable().unwrap();
    b_ep.enable().unwrap();
    let to_b = a_av.insert(b_ep.addr()).unwrap();

    let mut set = PollSet::new().unwrap();
    assert_eq!(set.add(&a_cq).unwrap(), 0);
    assert_eq!(set.add(&b_cq).unwrap(), 1);
    assert_eq!(set.add(&cntr).unwrap(), 2);
    assert_eq!(set.len(), 3);
    let mut ready = Vec::new();
    // Idle: nothing, and a wait times out.
    for _ in 0..50 {
        assert_eq!(set.poll(&mut ready).unwrap(), 0);
    }
    let t = Instant::now();
    let e = set.wait(&mut ready, Duration::from_millis(20)).unwrap_err();
    assert_eq!(e.errno(), Errno::ETIMEDOUT);
    assert!(t.elapsed() >= Duration::from_millis(20));

    // A message: the sender's CQ, then the receiver's CQ and counter are named.
    b_ep.recv(Buf::zeroed(16), FI_ADDR_UNSPEC, 7).unwrap();
    a_ep.send(Buf::from(&b"poll"[..]), to_b, 9).unwrap();
    let mut seen = [false; 3];
    let t = Instant::now();
    while seen != [true; 3] {
        assert!(t.elapsed() < WAIT, "named so far: {seen:?}");
        set.wait(&mut ready, WAIT).unwrap();
        for &i in &ready {
            seen[i] = true;
        }
        if seen[0] && !a_cq.is_empty() {
            assert_eq!(a_cq.read().unwrap().context, 9);
        }
        if seen[1] && !b_cq.is_empty() {
            let c = b_cq.read().unwrap();
            assert_eq!((c.context, &c.buf[..4]), (7, &b"poll"[..]));
        }
        if seen[2] {
            assert_eq!(cntr.read(), 1);
        }
    }
    // Everything read: idle again.
    assert!(a_cq.is_empty() && b_cq.is_empty());
    assert_eq!(set.poll(&mut ready).unwrap(), 0, "{ready:?}");
    // The set's fd is what an event loop sleeps on: readable on the next message.
    b_ep.recv(Buf::zeroed(16), FI_ADDR_UNSPEC, 8).unwrap();
    a_ep.send(Buf::from(&b"fd"[..]), to_b, 10).unwrap();
    let mut fds = [rustix::event::PollFd::from_borrowed_fd(
        set.fd(),
        rustix::event::PollFlags::IN,
    )];
    let ts = rustix::time::Timespec::try_from(WAIT).unwrap();
    assert_eq!(rustix::event::poll(&mut fds, Some(&ts)).unwrap(), 1);
    assert!(set.wait(&mut ready, WAIT).unwrap() >= 1);
}

#[test]
fn poll_set_manual_progress() {
    poll_set(ProgressMode::Manual);
}

#[test]
fn poll_set_auto_progress() {
    poll_set(ProgressMode::Auto(AutoProgress::default()));
}
