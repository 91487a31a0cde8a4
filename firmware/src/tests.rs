//! The responder and the ping client over in-memory Ethernet links, on the firmware's
//! storage.

extern crate std;

use std::boxed::Box;

use ofi_nostd::net::{DropReason, NetConfig};
use ofi_nostd::storage::Fixed;
use ofi_nostd::time::{Duration, Instant};
use wire::link::{Capabilities, Link as _, Loopback, Medium};

use crate::app::{FW_ARENA, FW_PORT, Plan, Responder};
use crate::arena::Arena;
use crate::peer::{PingState, Pinger, pattern};

type Wire = Loopback<16, 1514>;
type FwStore = &'static Arena<FW_ARENA>;

/// Runs `f` on a thread with room for domains built on the stack.
fn big_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(f)
        .unwrap()
        .join()
        .unwrap();
}

/// Firmware, host, and their links.
type Pair = (
    Box<Responder<FwStore>>,
    Box<Pinger<Fixed<16>>>,
    Box<Wire>,
    Box<Wire>,
);

/// A leaked arena of the firmware's size for one responder.
fn arena() -> &'static Arena<FW_ARENA> {
    Box::leak(Box::new(Arena::new()))
}

fn pair() -> Pair {
    let fw_link = Box::new(Wire::new(Medium::Ethernet, None));
    let host_link = Box::new(Wire::new(Medium::Ethernet, None));
    let plan = Plan::from_mac(Plan::mac_for([10, 213, 9, 2]));
    let fw = Box::new(Responder::new(&fw_link.capabilities(), &plan, arena(), 1).unwrap());
    let caps = Capabilities::new(Medium::Ethernet, 1514);
    let net =
        NetConfig::new(&caps, [10, 213, 9, 1], FW_PORT).with_ethernet([2, 0, 0, 0, 0, 1], 24, None);
    let target = ofi_nostd::addr::EpAddr::new(plan.ip, plan.port, 0);
    let host = Box::new(Pinger::new(net, Fixed::<16>, target, 2).unwrap());
    (fw, host, fw_link, host_link)
}

#[test]
fn plan_from_mac() {
    let p = Plan::from_mac([2, 0, 10, 213, 7, 2]);
    assert_eq!(p.ip, [10, 213, 7, 2]);
    assert_eq!(p.host_peer().ip, [10, 213, 7, 1]);
    assert_eq!(
        Plan::from_mac([0x52, 0x54, 0, 0x12, 0x34, 0x56]).ip,
        crate::app::DEFAULT_IP
    );
    assert_eq!(Plan::mac_for([10, 213, 7, 2]), [2, 0, 10, 213, 7, 2]);
}

#[test]
fn pattern_carries_the_sequence() {
    assert_eq!(
        (0..4)
            .map(|i| pattern(0x0403_0201, 8, i))
            .collect::<std::vec::Vec<_>>(),
        [1, 2, 3, 4]
    );
    assert_ne!(pattern(1, 100, 50), pattern(2, 100, 50));
}

#[test]
fn dgram_ping_pong_over_ethernet() {
    big_stack(|| {
        let (mut fw, mut host, mut fw_link, mut host_link) = pair();
        let max = host.max_size();
        assert_eq!(
            max, 1440,
            "1514-byte frames less Ethernet/IPv4/UDP and our headers"
        );
        let mut now = Instant::ZERO;
        let sizes = [1usize, 2, 3, 4, 5, 64, 512, 1000, max - 1, max];
        for (seq, &size) in (1u32..).zip(sizes.iter().cycle().take(40)) {
            host.start(seq, size).unwrap();
            let mut turns = 0;
            loop {
                now += Duration::from_micros(10);
                let s = host.poll(now, &mut *host_link);
                host_link.transfer_to(&mut *fw_link);
                fw.poll(now, &mut *fw_link);
                fw_link.transfer_to(&mut *host_link);
                match s {
                    PingState::Done => break,
                    PingState::Waiting => {}
                    other => panic!("ping {seq} of {size} bytes: {other:?}"),
                }
                turns += 1;
                assert!(turns < 100, "ping {seq} of {size} bytes never came back");
            }
        }
        let st = fw.stats();
        assert_eq!(
            (st.rx, st.echoed, st.errors, st.unknown_src),
            (40, 40, 0, 0)
        );
        assert_eq!(
            st.bytes,
            sizes.iter().map(|&s| s as u64).sum::<u64>() * 4,
            "every byte echoed"
        );
        assert!(
            host.start(99, max + 1).is_err(),
            "beyond the DGRAM max_msg_size"
        );
    });
}

#[test]
fn a_corrupted_echo_is_dropped_not_delivered() {
    big_stack(|| {
        let (mut fw, mut host, mut fw_link, mut host_link) = pair();
        let mut now = Instant::ZERO;
        host.start(7, 100).unwrap();
        let mut last = PingState::Waiting;
        for _ in 0..50 {
            now += Duration::from_micros(10);
            last = host.poll(now, &mut *host_link);
            if last != PingState::Waiting {
                break;
            }
            host_link.transfer_to(&mut *fw_link);
            fw.poll(now, &mut *fw_link);
            // Flip the last payload byte of the echo on the way.
            while let Some(mut frame) = fw_link.pop_tx(|_, b| b.to_vec()) {
                if frame.len() > 100 {
                    let n = frame.len();
                    frame[n - 1] ^= 0xff;
                }
                host_link.inject(&frame, None);
            }
        }
        assert_eq!(last, PingState::Waiting);
        assert_eq!(fw.stats().echoed, 1);
        let dropped = host.domain().net_stats().dropped(DropReason::BadChecksum);
        assert_eq!(dropped, 1, "the UDP checksum caught it");
    });
}

#[test]
fn responder_on_an_arena_uses_a_fraction_of_fixed() {
    big_stack(|| {
        let arena = arena();
        let mut fw_link = Box::new(Wire::new(Medium::Ethernet, None));
        let mut host_link = Box::new(Wire::new(Medium::Ethernet, None));
        let plan = Plan::from_mac(Plan::mac_for([10, 213, 9, 2]));
        let mut fw = Box::new(Responder::new(&fw_link.capabilities(), &plan, arena, 1).unwrap());
        let used = arena.used();
        std::println!("responder with DGRAM and RDM endpoints: {used} bytes of arena");
        assert!(
            used < 160 << 10,
            "{used} bytes of arena for what Fixed<16> needs ~600 KiB (DGRAM alone)"
        );
        let caps = Capabilities::new(Medium::Ethernet, 1514);
        let net = NetConfig::new(&caps, [10, 213, 9, 1], FW_PORT).with_ethernet(
            [2, 0, 0, 0, 0, 1],
            24,
            None,
        );
        let target = ofi_nostd::addr::EpAddr::new(plan.ip, plan.port, 0);
        let mut host = Box::new(Pinger::new(net, Fixed::<16>, target, 2).unwrap());
        let mut now = Instant::ZERO;
        for seq in 1..=5u32 {
            host.start(seq, 1000).unwrap();
            let done = (0..100).any(|_| {
                now += Duration::from_micros(10);
                let s = host.poll(now, &mut *host_link);
                host_link.transfer_to(&mut *fw_link);
                fw.poll(now, &mut *fw_link);
                fw_link.transfer_to(&mut *host_link);
                s == PingState::Done
            });
            assert!(done, "ping {seq}");
        }
        assert_eq!(fw.stats().echoed, 5);
    });
}

/// A minimal RDM client on the core (what crates/hosted does on the host): one tagged or
/// untagged ping at a time, every byte of the echo checked.
#[test]
fn rdm_msg_and_tagged_echo_over_ethernet() {
    use ofi_nostd::av::{AvAddrs, AvAttr};
    use ofi_nostd::cq::{CqAttr, CqFormat, CqTaggedEntry};
    use ofi_nostd::domain::{BindTarget, Domain, DomainConfig};
    use ofi_nostd::fabric::Fabric;
    use ofi_nostd::flags::{FI_ADDR_UNSPEC, FiAddr, Flags};
    use ofi_nostd::info::FabricAttr;
    use ofi_nostd::mem::{IoVec, SliceMemory};

    use crate::app::{PROVIDER_CONFIG, RDM_BUF, rdm_info};

    big_stack(|| {
        let mut fw_link = Box::new(Wire::new(Medium::Ethernet, None));
        let mut host_link = Box::new(Wire::new(Medium::Ethernet, None));
        let plan = Plan::from_mac(Plan::mac_for([10, 213, 9, 2]));
        let mut fw = Box::new(Responder::new(&fw_link.capabilities(), &plan, arena(), 1).unwrap());

        // The host: endpoint 0 at the plan's host peer address.
        let store = arena();
        let info = rdm_info();
        let mut fabric = Fabric::open(&FabricAttr::default(), 0, store, 0).unwrap();
        let peer = plan.host_peer();
        let net = NetConfig::new(
            &Capabilities::new(Medium::Ethernet, 1514),
            peer.ip,
            peer.port,
        )
        .with_ethernet([2, 0, 0, 0, 0, 1], 24, None);
        let dc = DomainConfig {
            arp_entries: 4,
            ..DomainConfig::new(net, PROVIDER_CONFIG, 2)
        };
        let mut dom = Domain::open(&mut fabric, &info, dc, store, 0).unwrap();
        // The firmware's engine, but larger messages by rendezvous (as hosted's default).
        dom.set_rdm_config(ofi_nostd::rdm::RdmConfig {
            eager_threshold: 8192,
            ..crate::app::RDM_CONFIG
        })
        .unwrap();
        let cq_attr = CqAttr {
            format: CqFormat::Tagged,
            size: 8,
            ..CqAttr::default()
        };
        let cq = dom.cq_open(&cq_attr, 0).unwrap();
        let mut av_attr = AvAttr {
            count: 2,
            ..AvAttr::default()
        };
        let av = dom.av_open(&mut av_attr, 0).unwrap();
        let mut fi = [0 as FiAddr; 1];
        let target = [ofi_nostd::addr::EpAddr::new(plan.ip, plan.port, 1)];
        dom.av_mut(av)
            .and_then(|a| a.insert(AvAddrs::Ep(&target), Some(&mut fi), Flags::empty(), None))
            .unwrap();
        let ep = dom.ep_open(&info, 0).unwrap();
        dom.ep_bind(ep, BindTarget::Cq(cq), Flags::TRANSMIT | Flags::RECV)
            .unwrap();
        dom.ep_bind(ep, BindTarget::Av(av), Flags::empty()).unwrap();
        dom.ep_enable(ep).unwrap();

        const TX: u64 = 0x100_0000;
        const RX: u64 = TX + RDM_BUF as u64;
        let mut bufs = std::vec![0u8; 2 * RDM_BUF];
        let mut now = Instant::ZERO;
        let sizes = [1usize, 7, 1000, 1500, 8192, 8193, 30000, RDM_BUF];
        for (seq, &size) in (0u64..).zip(sizes.iter().cycle().take(3 * sizes.len())) {
            let tagged = seq % 3 != 0;
            let tag = 0xabc0_0000 | seq;
            for (i, b) in bufs[..size].iter_mut().enumerate() {
                *b = pattern(seq as u32, size, i);
            }
            bufs[RDM_BUF..].fill(0);
            let (rx, tx) = (IoVec::new(RX, RDM_BUF), IoVec::new(TX, size));
            let mem = SliceMemory::new(TX, &mut bufs);
            if tagged {
                dom.trecv(ep, rx, FI_ADDR_UNSPEC, tag, 0, 1).unwrap();
                dom.tsend(ep, &mem, tx, fi[0], tag, 2).unwrap();
            } else {
                dom.recv(ep, rx, FI_ADDR_UNSPEC, 1).unwrap();
                dom.send(ep, &mem, tx, fi[0], 2).unwrap();
            }
            let (mut sent, mut echo) = (false, None);
            for _ in 0..20_000 {
                now += Duration::from_micros(100);
                let mut mem = SliceMemory::new(TX, &mut bufs);
                dom.progress(now, &mut *host_link, &mut mem).unwrap();
                host_link.transfer_to(&mut *fw_link);
                fw.poll(now, &mut *fw_link);
                fw_link.transfer_to(&mut *host_link);
                let mut e = [CqTaggedEntry::default(); 4];
                let n = dom.cq_mut(cq).unwrap().read(&mut e).unwrap_or(0);
                for e in &e[..n] {
                    match e.op_context {
                        2 => sent = true,
                        _ => echo = Some((e.len, e.tag)),
                    }
                }
                if sent && echo.is_some() {
                    break;
                }
            }
            let (len, echo_tag) = echo.unwrap_or_else(|| panic!("ping {seq} of {size} bytes"));
            assert!(sent, "ping {seq}: send completion");
            assert_eq!(len, size, "ping {seq}");
            if tagged {
                assert_eq!(echo_tag, tag, "ping {seq}: the echo carries the tag");
            }
            let (tx, rx) = bufs.split_at(RDM_BUF);
            assert!(rx[..size] == tx[..size], "ping {seq}: echoed bytes");
        }
        let (m, t) = (fw.msg_stats(), fw.tagged_stats());
        assert_eq!((m.echoed, t.echoed, m.errors + t.errors), (8, 16, 0));
        assert_eq!(fw.rdm_stats().unwrap().sessions, 1);
    });
}
