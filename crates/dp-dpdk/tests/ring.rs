//! One process, no privilege: EAL once per process, mbufs, and a `DpdkLink` on a
//! `net_ring` port, whose transmit queue loops back into its receive queue (the very
//! mbufs sent come back), so every ownership path is exercised.

#![cfg(feature = "dpdk")]

mod common;

use dp_dpdk::{DpdkLink, Eal, Error, MAX_BURST, Mempool, Port, PortConfig};
use wire::link::{Link, Medium, RxToken, TxMeta, TxToken};

use common::{eal, fill, frame_ok};

#[test]
fn eal_is_initialised_once() {
    let first = eal();
    let again = Eal::init(first.args()).expect("same arguments: the same EAL");
    assert!(std::ptr::eq(first, again));
    assert!(std::ptr::eq(Eal::get().unwrap(), first));
    let mut other = first.args().to_vec();
    other.push("--log-level=7".into());
    match Eal::init(&other) {
        Err(Error::EalAlreadyInitialised { args }) => assert_eq!(args, first.args()),
        r => panic!("second init with other arguments: {r:?}"),
    }
    assert!(first.lcore_count() >= 1);
}

#[test]
fn mbufs_are_freed_once() {
    let pool = Mempool::new(eal(), "dpdk_test_mbufs", 127, 0, 2176, -1).unwrap();
    assert_eq!((pool.in_use(), pool.capacity()), (0, 127));
    {
        let mut m = pool.alloc().unwrap();
        assert_eq!(pool.in_use(), 1);
        assert_eq!(m.pkt_len(), 0);
        assert_eq!(m.segments(), 1);
        assert_eq!(m.headroom(), 128);
        assert_eq!(m.tailroom(), 2048);
        m.append(100).unwrap().fill(0xab);
        assert!(m.append(4000).is_none());
        assert_eq!(m.data(), &[0xab; 100][..]);
        m.data_mut()[0] = 1;
        assert!(m.trim(60));
        assert!(!m.trim(41));
        assert_eq!(m.data().len(), 40);
        assert_eq!(m.data()[0], 1);
    }
    assert_eq!(pool.in_use(), 0);
    let all: Vec<_> = std::iter::from_fn(|| pool.alloc()).collect();
    assert_eq!(all.len(), 127);
    assert!(pool.alloc().is_none());
    drop(all);
    assert_eq!(pool.in_use(), 0);
    assert!(Mempool::new(eal(), "dpdk_test_small", 15, 0, 64, -1).is_err());
}

/// Under `--no-huge` (4 KiB pages) a default pool starts every mbuf that would cross a
/// page on the next page, so its mbufs span more than they take back to back; a packed
/// pool (what `net_af_xdp` ports get) does not, and its mbufs work like any other.
#[test]
fn a_packed_pool_keeps_its_mbufs_back_to_back() {
    let (n, room) = (1023, dp_dpdk::DEFAULT_DATA_ROOM);
    let default = Mempool::new(eal(), "dpdk_test_gaps", n, 0, room, -1).unwrap();
    let packed = Mempool::new_packed(eal(), "dpdk_test_packed", n, 0, room, -1).unwrap();
    let (d, p) = (default.layout(), packed.layout());
    assert_eq!(d.packed, p.packed, "same mbufs, same object size");
    assert!(!d.is_packed() && d.span > d.packed, "{d:?}");
    assert!(p.is_packed() && p.span == p.packed, "{p:?}");
    assert_eq!((packed.capacity(), packed.data_room()), (n, room));
    let all: Vec<_> = std::iter::from_fn(|| packed.alloc()).collect();
    assert_eq!(all.len(), n as usize);
    assert!(
        all.iter()
            .all(|m| m.headroom() == 128 && m.tailroom() == 2048)
    );
    drop(all);
    assert_eq!(packed.in_use(), 0);
    assert!(Mempool::new_packed(eal(), "dpdk_test_packed_small", 15, 0, 64, -1).is_err());
}

fn ring_port(name: &str) -> Port {
    let mut cfg = PortConfig::vdev(name, "");
    cfg.mbufs = 4095;
    Port::open(eal(), &cfg).unwrap_or_else(|e| panic!("open {name}: {e}"))
}

/// Send `sizes` through tokens, receive them through tokens: the data comes back.
fn round_trip_tokens(link: &mut DpdkLink, sizes: &[usize], seq0: u32) {
    for (i, &len) in sizes.iter().enumerate() {
        let tok = link.transmit().expect("a transmit token");
        tok.consume_with(len, |buf| {
            assert_eq!(buf.len(), len);
            fill(buf, seq0 + i as u32);
            (TxMeta::len(len), ())
        });
    }
    link.flush();
    for (i, &len) in sizes.iter().enumerate() {
        let tok = link.receive().expect("the frame came back");
        tok.consume(|f| {
            assert_eq!(f.len(), len);
            assert!(frame_ok(f, seq0 + i as u32), "frame {i} corrupted");
        });
    }
    assert!(link.receive().is_none());
}

#[test]
fn ring_link_round_trips_frames() {
    let port = ring_port("net_ring_rt");
    assert_eq!(port.driver(), "net_ring");
    let start = port.mempool().in_use();
    let mut link = port.link(0).unwrap();
    let caps = link.capabilities();
    assert_eq!(caps.medium, Medium::Ethernet);
    assert_eq!(caps.max_burst, MAX_BURST);
    assert!(caps.mtu >= 1514, "mtu {}", caps.mtu);
    assert!(!caps.rx_checksum_offload && !caps.tx_checksum_offload);

    // Single tokens, every size from the minimum frame to the MTU.
    let sizes: Vec<usize> = (60..=caps.mtu).step_by(97).chain([caps.mtu]).collect();
    for chunk in sizes.chunks(20) {
        round_trip_tokens(&mut link, chunk, chunk[0] as u32);
    }

    // Bursts: 100 frames per transmit_burst (several batches), received in bursts.
    let mut sent = 0u32;
    let n = link.transmit_burst(100, |buf| {
        let len = 60 + (sent as usize * 13) % (buf.len() - 60);
        fill(&mut buf[..len], 1000 + sent);
        sent += 1;
        Some(TxMeta::len(len))
    });
    assert_eq!(n, 100);
    let mut got = 0u32;
    while got < 100 {
        let k = link.receive_burst(usize::MAX, |_, f| {
            assert!(frame_ok(f, 1000 + got), "burst frame {got}");
            got += 1;
        });
        assert!(k > 0, "frames missing after {got}");
    }
    assert_eq!(link.receive_burst(8, |_, _| ()), 0);

    // Zero length sends nothing; a length beyond the lent buffer is refused.
    link.transmit()
        .unwrap()
        .consume_with(100, |_| (TxMeta::none(), ()));
    link.transmit()
        .unwrap()
        .consume_with(100, |_| (TxMeta::len(101), ()));
    // The smoltcp-style consume sends exactly `len`.
    link.transmit().unwrap().consume(64, |buf| fill(buf, 7));
    let mut seen = Vec::new();
    link.receive_burst(usize::MAX, |_, f| seen.push(f.to_vec()));
    assert_eq!(seen.len(), 1);
    assert!(frame_ok(&seen[0], 7));
    let s = link.stats();
    assert_eq!(s.tx_refused, 1);
    assert_eq!(s.tx_dropped, 0);
    assert_eq!(s.tx_packets, s.rx_packets);
    assert_eq!(s.tx_bytes, s.rx_bytes);

    // A token dropped unconsumed keeps its frame for the next receive.
    link.transmit().unwrap().consume(80, |buf| fill(buf, 9));
    {
        let _unconsumed = link.receive().unwrap();
    }
    link.receive().unwrap().consume(|f| assert!(frame_ok(f, 9)));

    drop(link);
    assert_eq!(port.mempool().in_use(), start, "mbufs leaked");
    port.close().unwrap();
}

#[test]
fn a_full_ring_drops_and_counts_never_leaks() {
    let port = ring_port("net_ring_full");
    let start = port.mempool().in_use();
    let mut link = port.link(0).unwrap();
    // The ring holds 1024 (usable: 1023); offer more without receiving.
    let mut i = 0;
    let queued = link.transmit_burst(1500, |buf| {
        fill(&mut buf[..64], i);
        i += 1;
        Some(TxMeta::len(64))
    });
    assert_eq!(queued, 1500);
    let s = link.stats();
    assert!(s.tx_dropped > 0 && s.tx_busy > 0, "{s:?}");
    assert_eq!(s.tx_packets + s.tx_dropped, 1500);
    // Unconsumed received frames and lent-but-dropped tokens are freed with the link.
    let _ = link.receive().unwrap();
    assert!(link.held_mbufs() > 0);
    drop(link);
    // What the ring still holds is the port's: a new link receives it.
    let mut link = port.link(0).unwrap();
    let mut n = 0;
    while link.receive_burst(usize::MAX, |_, _| n += 1) > 0 {}
    assert_eq!(n as u64 + MAX_BURST as u64, s.tx_packets);
    drop(link);
    assert_eq!(port.mempool().in_use(), start, "mbufs leaked");
}

#[test]
fn each_queue_has_one_link() {
    let port = ring_port("net_ring_claim");
    let link = port.link(0).unwrap();
    assert!(matches!(
        port.link(0),
        Err(Error::QueueBusy { queue: 0, .. })
    ));
    assert!(matches!(
        port.link(port.queues()),
        Err(Error::InvalidArgument(_))
    ));
    drop(link);
    let link = port.link(0).unwrap();
    // Closing with a live link is refused; the port closes when the link goes.
    assert!(matches!(port.close(), Err(Error::PortInUse(_))));
    drop(link);
}

#[test]
fn unknown_ports_and_bad_devargs_are_errors() {
    let e = eal();
    assert!(matches!(
        Port::open(e, &PortConfig::new("net_ring_none")),
        Err(Error::NoSuchPort(_))
    ));
    assert!(matches!(
        Port::open(e, &PortConfig::vdev("net_nosuchdriver0", "")),
        Err(Error::Dpdk {
            op: "rte_dev_probe",
            ..
        })
    ));
}

#[test]
fn links_are_send() {
    fn send<T: Send>() {}
    send::<DpdkLink>();
    send::<Port>();
    send::<Mempool>();
}
