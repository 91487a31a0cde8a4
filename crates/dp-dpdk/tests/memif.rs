//! `net_memif` between two processes, no privilege needed: this test opens the server
//! end, spawns its own test binary as the client (the ignored test `memif_echo_peer`,
//! selected by an environment variable naming the socket in a temporary directory),
//! and exchanges Ethernet frames through the `Link` trait both ways: every frame size
//! one by one, bursts, a latency sample. Both processes check that every mbuf went back
//! to their pool.

#![cfg(feature = "dpdk")]

mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use dp_dpdk::{DpdkLink, Port, PortConfig};
use wire::link::{Link, RxToken, TxMeta, TxToken};

use common::{
    ChildGuard, ETHERTYPE_STOP, ETHERTYPE_TEST, TempDir, eal, eth_frame, ethertype, fill,
    percentile,
};

/// Set (to the socket path) in the spawned client process.
const PEER_ENV: &str = "DP_DPDK_MEMIF_PEER";
/// How long either side waits for the other.
const WAIT: Duration = Duration::from_secs(20);

fn memif_args(role: &str, socket: &str) -> String {
    format!("role={role},id=0,socket={socket},socket-abstract=no")
}

/// Send one frame of `len` bytes (header + `fill(seq)`).
fn send(link: &mut DpdkLink, len: usize, dst: [u8; 6], ethertype: u16, seq: u32) {
    let src = link.mac();
    let tok = link.transmit().expect("transmit token");
    tok.consume_with(len, |buf| {
        assert_eq!(buf.len(), len);
        eth_frame(buf, dst, src, ethertype, seq);
        (TxMeta::len(len), ())
    });
}

/// Wait for the next frame and return a copy.
fn recv(link: &mut DpdkLink, deadline: Instant) -> Vec<u8> {
    loop {
        if let Some(tok) = link.receive() {
            return tok.consume(<[u8]>::to_vec);
        }
        assert!(Instant::now() < deadline, "no frame before the deadline");
    }
}

/// The echo from the peer carries `seq`, is `len` long and comes from `peer`.
fn check_echo(f: &[u8], len: usize, me: [u8; 6], peer: [u8; 6], seq: u32) {
    assert_eq!(f.len(), len, "echo length of seq {seq}");
    assert_eq!(&f[..6], &me, "echo dst of seq {seq}");
    assert_eq!(&f[6..12], &peer, "echo src of seq {seq}");
    assert_eq!(ethertype(f), ETHERTYPE_TEST);
    let mut want = vec![0u8; len - 14];
    fill(&mut want, seq);
    assert!(f[14..] == want[..], "echo payload of seq {seq} corrupted");
}

#[test]
fn memif_between_two_processes() {
    let dir = TempDir::new("memif");
    let socket = dir.0.join("memif.sock");
    let socket = socket.to_str().unwrap().to_owned();
    let port = Port::open(
        eal(),
        &PortConfig::vdev("net_memif_srv", &memif_args("server", &socket)),
    )
    .unwrap();
    assert_eq!(port.driver(), "net_memif");
    let start = port.mempool().in_use();

    let exe = std::env::current_exe().unwrap();
    let mut child = ChildGuard(Some(
        Command::new(exe)
            .args([
                "--exact",
                "memif_echo_peer",
                "--include-ignored",
                "--nocapture",
            ])
            .env(PEER_ENV, &socket)
            .spawn()
            .unwrap(),
    ));
    port.wait_link_up(WAIT).unwrap();
    let mut link = port.link(0).unwrap();
    let mtu = link.capabilities().mtu;
    // Shared memory: nothing between the two processes can alter a frame.
    assert!(link.capabilities().intact);
    println!("memif: mtu {mtu}, port mtu {}", port.mtu());
    let me = link.mac();
    let deadline = Instant::now() + Duration::from_secs(120);

    // Learn the peer's MAC from its first echo. The server's link is up as soon as the
    // client connected, possibly before the client polls: probe until it answers.
    let first = loop {
        send(&mut link, 64, [0xff; 6], ETHERTYPE_TEST, 0);
        link.flush();
        let wait = Instant::now() + Duration::from_millis(20);
        if let Some(f) = std::iter::from_fn(|| link.receive().map(|t| t.consume(<[u8]>::to_vec)))
            .next()
            .or_else(|| {
                while Instant::now() < wait {
                    if let Some(t) = link.receive() {
                        return Some(t.consume(<[u8]>::to_vec));
                    }
                }
                None
            })
        {
            break f;
        }
        println!("memif: no echo of the probe yet ({:?})", link.stats());
        assert!(Instant::now() < deadline, "the memif peer never answered");
    };
    let peer: [u8; 6] = first[6..12].try_into().unwrap();
    check_echo(&first, 64, me, peer, 0);
    // Probes the driver refused before the peer was ready were freed and counted. On a
    // busy machine a later probe may have gone out before the first echo came back:
    // take its echo too.
    let probes = link.stats();
    assert!(probes.tx_packets >= 1, "{probes:?}");
    for _ in 1..probes.tx_packets {
        let f = recv(&mut link, deadline);
        check_echo(&f, 64, me, peer, 0);
    }

    // Every frame size, one round trip each.
    let mut seq = 1;
    for len in 15..=mtu {
        send(&mut link, len, peer, ETHERTYPE_TEST, seq);
        let f = recv(&mut link, deadline);
        check_echo(&f, len, me, peer, seq);
        seq += 1;
    }

    // Bursts: 200 × 32 frames of mixed sizes, echoes in order.
    let frames = 6400u32;
    let len_of = |s: u32| 60 + (s as usize * 37) % (mtu - 59);
    let t0 = Instant::now();
    let (mut sent, mut got) = (0u32, 0u32);
    let base = seq;
    while got < frames {
        assert!(
            Instant::now() < deadline,
            "burst echoes missing: {got}/{frames}"
        );
        if sent < frames && sent - got < 256 {
            let src = me;
            let n = link.transmit_burst(32.min((frames - sent) as usize), |buf| {
                let s = base + sent;
                let len = len_of(s);
                eth_frame(&mut buf[..len], peer, src, ETHERTYPE_TEST, s);
                sent += 1;
                Some(TxMeta::len(len))
            });
            assert!(n > 0);
        }
        link.receive_burst(usize::MAX, |_, f| {
            let s = base + got;
            check_echo(f, len_of(s), me, peer, s);
            got += 1;
        });
    }
    let rate = f64::from(frames) / t0.elapsed().as_secs_f64();
    seq += frames;

    // Latency of 64-byte frames: the raw memif echo the benchmarks compare against.
    let mut rtts = Vec::with_capacity(20_000);
    for i in 0..21_000u32 {
        let t = Instant::now();
        send(&mut link, 64, peer, ETHERTYPE_TEST, seq);
        let f = recv(&mut link, deadline);
        if i >= 1000 {
            rtts.push(t.elapsed());
        }
        check_echo(&f, 64, me, peer, seq);
        seq += 1;
    }
    rtts.sort();
    println!(
        "raw memif echo, 64 B frames: round trip median {:?}, p99 {:?}, min {:?} ({} samples); \
         mixed-size burst echo {:.0} frames/s ({} build)",
        percentile(&rtts, 50),
        percentile(&rtts, 99),
        rtts[0],
        rtts.len(),
        rate,
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );

    // Stop the peer; it checks its own pool and closes its port, which first sends a
    // last frame (it polls no more) and waits for us to disconnect.
    send(&mut link, 64, peer, ETHERTYPE_STOP, 0);
    link.flush();
    assert!(!port.peer_done());
    let last = loop {
        assert!(Instant::now() < deadline, "no last frame from the peer");
        if let Some(t) = link.receive() {
            break t.consume(<[u8]>::to_vec);
        }
    };
    assert!(port.peer_done(), "the link saw the peer's last frame");
    assert_eq!(ethertype(&last), dp_dpdk::ETHERTYPE_DONE);
    assert_eq!(&last[6..12], &peer[..], "from the peer's MAC");

    let s = link.stats();
    assert_eq!(s.tx_dropped, probes.tx_dropped, "{s:?}");
    assert_eq!(s.rx_dropped, 0, "{s:?}");
    assert_eq!(s.tx_packets - probes.tx_packets, u64::from(seq), "{s:?}");
    assert_eq!(
        s.rx_packets,
        u64::from(seq) + probes.tx_packets,
        "every echo and the last frame: {s:?}"
    );
    drop(link);
    assert_eq!(port.mempool().in_use(), start, "mbufs leaked");
    // The peer polls no more, so the port closes at once; the peer sees the link go
    // down and exits 0.
    port.close().unwrap();
    let st = child.wait_timeout(WAIT);
    assert!(st.success(), "memif peer failed: {st}");
}

/// The client end of `memif_between_two_processes`: echoes every frame back to its
/// sender (source MAC becomes destination, ours the source) until the stop frame.
#[test]
#[ignore = "the second process of memif_between_two_processes, which spawns it"]
fn memif_echo_peer() {
    let Ok(socket) = std::env::var(PEER_ENV) else {
        return;
    };
    let port = Port::open(
        eal(),
        &PortConfig::vdev("net_memif_cli", &memif_args("client", &socket)),
    )
    .unwrap();
    port.wait_link_up(WAIT).unwrap();
    let start = port.mempool().in_use();
    let mut link = port.link(0).unwrap();
    let me = link.mac();
    let deadline = Instant::now() + Duration::from_secs(180);
    // Frames of one receive burst, copied out, then echoed with one transmit burst.
    let mut held: Vec<Vec<u8>> = Vec::with_capacity(dp_dpdk::MAX_BURST);
    let mut stop = false;
    while !stop {
        assert!(Instant::now() < deadline, "peer: no stop frame");
        held.clear();
        link.receive_burst(dp_dpdk::MAX_BURST, |_, f| {
            if ethertype(f) == ETHERTYPE_STOP {
                stop = true;
            } else {
                held.push(f.to_vec());
            }
        });
        let mut i = 0;
        let n = link.transmit_burst(held.len(), |buf| {
            let f = &held[i];
            i += 1;
            let out = &mut buf[..f.len()];
            out.copy_from_slice(f);
            out.copy_within(6..12, 0);
            out[6..12].copy_from_slice(&me);
            Some(TxMeta::len(f.len()))
        });
        assert_eq!(n, held.len(), "peer: transmit tokens");
    }
    let s = link.stats();
    assert_eq!(s.tx_dropped, 0, "peer: {s:?}");
    drop(link);
    assert_eq!(port.mempool().in_use(), start, "peer: mbufs leaked");
    port.close().unwrap();
    println!("memif peer: echoed {} frames, closed cleanly", s.tx_packets);
}
