//! `UdpLink` with UDP generic segmentation offload (GSO) on send and GRO on receive,
//! between sockets on 127.0.0.1: runs of equal-size datagrams leave as one buffer and
//! arrive as the same datagrams, mixed sizes and destinations split runs where they
//! must, a coalesced buffer is split by its segment size (short last one included), and
//! a socket whose kernel refuses GSO still delivers everything.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use dp_kernel::{KernelLink, UdpConfig, UdpLink};
use wire::link::{Link, RxToken, TxMeta, TxToken, UdpAddr};

fn link(ring: usize, gso: bool, gro: bool) -> UdpLink {
    let mut c = UdpConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
    c.ring = ring;
    c.gso = gso;
    c.gro = gro;
    UdpLink::new(c).expect("bind 127.0.0.1:0")
}

/// Datagram `i` of `len` bytes: its index, then a pattern that differs per datagram.
fn datagram(i: usize, len: usize) -> Vec<u8> {
    let mut d: Vec<u8> = (0..len).map(|j| (i * 7 + j) as u8).collect();
    d[..4].copy_from_slice(&(i as u32).to_be_bytes());
    d
}

/// Queue one datagram through the token API.
fn send(link: &mut UdpLink, dst: UdpAddr, data: &[u8]) {
    let tok = link.transmit().expect("a free slot");
    tok.consume_with(data.len(), |buf| {
        buf[..data.len()].copy_from_slice(data);
        (TxMeta::to(data.len(), dst), ())
    });
}

/// Receive until `n` datagrams arrived or 5 s passed.
fn recv_n(link: &mut UdpLink, n: usize) -> Vec<Vec<u8>> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut out = Vec::new();
    while out.len() < n && Instant::now() < deadline {
        match link.receive() {
            Some(tok) => out.push(tok.consume(|b| b.to_vec())),
            None => std::thread::sleep(Duration::from_micros(200)),
        }
    }
    out
}

/// Set `SO_NO_CHECK` (no UDP checksum on send): the kernel then refuses GSO sends
/// with `EINVAL` and still takes plain datagrams — a real refusal to test the fallback.
fn refuse_gso(link: &UdpLink) {
    let one: libc::c_int = 1;
    // SAFETY: `one` is a live `c_int` for the duration of the call and its size is
    // passed with it; the descriptor is the link's open socket.
    let r = unsafe {
        libc::setsockopt(
            link.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_NO_CHECK,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0, "{}", std::io::Error::last_os_error());
}

/// Send `sizes[i]`-byte datagrams `i` to `dst`, flush, and check they arrive in
/// order with their bytes.
fn send_and_check(a: &mut UdpLink, b: &mut UdpLink, sizes: &[usize]) {
    let dst = b.local_udp_addr();
    let want: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &l)| datagram(i, l))
        .collect();
    for d in &want {
        send(a, dst, d);
    }
    assert_eq!(KernelLink::flush(a), 0);
    let got = recv_n(b, want.len());
    assert_eq!(got.len(), want.len(), "{:?}", b.stats());
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(g == w, "datagram {i}: {} bytes, want {}", g.len(), w.len());
    }
}

#[test]
fn a_gso_run_arrives_as_its_datagrams() {
    let (mut a, mut b) = (link(64, true, false), link(64, false, false));
    assert!(a.gso(), "this kernel has UDP_SEGMENT (Linux 4.18+)");
    send_and_check(&mut a, &mut b, &[1000; 40]);
    let s = a.stats();
    // One system call, one GSO buffer, forty datagrams.
    assert_eq!((s.tx_batches, s.tx_gso, s.tx_packets), (1, 1, 40), "{s:?}");
    assert_eq!(s.tx_bytes, 40_000);
    assert_eq!(b.stats().rx_packets, 40);
    assert_eq!(
        b.stats().rx_gro,
        0,
        "without GRO the kernel splits the buffer"
    );
}

#[test]
fn runs_stop_at_a_longer_datagram_a_short_one_and_a_new_destination() {
    let (mut a, mut b, mut c) = (
        link(64, true, false),
        link(64, false, false),
        link(64, false, false),
    );
    let (bd, cd) = (b.local_udp_addr(), c.local_udp_addr());
    // (destination, size): runs [b 1000 x3 + 500], [b 1000 x2 + 200], [b 300 x2],
    // then b 1000 alone (c follows), c 800 x2 (a run), b 900 and b 1000 (longer: apart).
    let plan: [(UdpAddr, usize); 16] = [
        (bd, 1000),
        (bd, 1000),
        (bd, 1000),
        (bd, 500),
        (bd, 1000),
        (bd, 1000),
        (bd, 200),
        (bd, 300),
        (bd, 300),
        (bd, 1000),
        (cd, 800),
        (cd, 800),
        (bd, 900),
        (bd, 1000),
        (bd, 1000),
        (bd, 1000),
    ];
    let mut want_b = Vec::new();
    let mut want_c = Vec::new();
    for (i, &(dst, len)) in plan.iter().enumerate() {
        let d = datagram(i, len);
        send(&mut a, dst, &d);
        if dst == bd {
            want_b.push(d);
        } else {
            want_c.push(d);
        }
    }
    assert_eq!(KernelLink::flush(&mut a), 0);
    assert_eq!(recv_n(&mut b, want_b.len()), want_b);
    assert_eq!(recv_n(&mut c, want_c.len()), want_c);
    let s = a.stats();
    // Runs: b 1000x3+500, b 1000x2+200, b 300x2, c 800x2, b 1000x3 (after the 900).
    assert_eq!((s.tx_gso, s.tx_packets, s.tx_batches), (5, 16, 1), "{s:?}");
}

#[test]
fn runs_respect_the_segment_and_byte_limits() {
    let (mut a, mut b) = (link(128, true, false), link(128, false, false));
    // 64 segments at most: 100 x 1000 bytes is a run of 64 and one of 36.
    send_and_check(&mut a, &mut b, &[1000; 100]);
    assert_eq!(a.stats().tx_gso, 2, "{:?}", a.stats());
    // 65 507 bytes at most: 44 x 1472 fit, so 100 x 1472 is 44 + 44 + 12.
    send_and_check(&mut a, &mut b, &[1472; 100]);
    assert_eq!(a.stats().tx_gso, 5, "{:?}", a.stats());
    assert_eq!(a.stats().tx_errors, 0);
}

#[test]
fn gro_receive_splits_a_coalesced_buffer_short_last_segment_included() {
    let (mut a, mut b) = (link(64, true, false), link(64, false, true));
    assert!(b.gro(), "this kernel has UDP_GRO (Linux 5.0+)");
    let mut sizes = vec![1200; 10];
    sizes.push(700);
    send_and_check(&mut a, &mut b, &sizes);
    let s = b.stats();
    // Loopback hands the GSO buffer over whole: one buffer, eleven datagrams.
    assert_eq!((s.rx_gro, s.rx_packets), (1, 11), "{s:?}");
    assert_eq!(s.rx_bytes, 12_700);
    assert_eq!(b.pending_rx(), 0);
    // Growing sizes form no run: plain datagrams, one by one, on the same socket.
    send_and_check(&mut a, &mut b, &[64, 1500, 3000]);
    assert_eq!(b.stats().rx_gro, 1);
}

#[test]
fn gro_drops_segments_longer_than_the_link_takes_and_keeps_the_rest() {
    let mut a = link(64, true, false);
    let mut c = UdpConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
    c.max_payload = 512;
    let mut b = UdpLink::new(c).unwrap();
    assert!(b.gro());
    let ba = b.local_udp_addr();
    // One run of 1000, 1000, 400: only the short last segment fits 512 bytes.
    for i in 0..3 {
        send(&mut a, ba, &datagram(i, if i == 2 { 400 } else { 1000 }));
    }
    a.flush();
    assert_eq!(a.stats().tx_gso, 1);
    assert_eq!(recv_n(&mut b, 1), vec![datagram(2, 400)]);
    assert_eq!(b.stats().rx_truncated, 2, "{:?}", b.stats());
}

#[test]
fn a_refused_first_gso_send_turns_gso_off_and_delivers_everything() {
    let (mut a, mut b) = (link(64, true, false), link(64, false, true));
    refuse_gso(&a);
    assert!(a.gso());
    send_and_check(&mut a, &mut b, &[900; 30]);
    let s = a.stats();
    assert!(!a.gso(), "refused at the first try: off for this socket");
    assert_eq!((s.tx_gso_refused, s.tx_gso), (1, 0), "{s:?}");
    assert_eq!(
        (s.tx_packets, s.tx_errors, s.tx_dropped),
        (30, 0, 0),
        "{s:?}"
    );
    assert_eq!(s.last_errno, libc::EINVAL);
    // Later flushes do not try again.
    send_and_check(&mut a, &mut b, &[900; 30]);
    assert_eq!(a.stats().tx_gso_refused, 1);
}

#[test]
fn a_refusal_after_gso_worked_sends_that_run_plainly_and_keeps_gso() {
    let (mut a, mut b) = (link(64, true, false), link(64, false, false));
    send_and_check(&mut a, &mut b, &[700; 20]);
    assert_eq!(a.stats().tx_gso, 1);
    refuse_gso(&a);
    send_and_check(&mut a, &mut b, &[700; 20]);
    let s = a.stats();
    assert!(a.gso(), "it worked on this socket before: kept");
    assert_eq!(
        (s.tx_gso_refused, s.tx_packets, s.tx_dropped),
        (1, 40, 0),
        "{s:?}"
    );
}
