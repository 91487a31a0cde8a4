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
