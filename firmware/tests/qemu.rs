//! The host side of the firmware's QEMU test: DGRAM ping-pongs with data checks against
//! the image booted by `cargo xtask test` (or `cargo xtask firmware --run`), over a
//! kernel UDP socket bound to the TAP's host address.
//!
//! Ignored in plain `cargo test`: it needs the running image. xtask runs it with
//! `--ignored` and `FIRMWARE_HOST_IP` / `FIRMWARE_FW_IP` (addresses on the TAP's
//! private /24) and `FIRMWARE_PINGS`.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use dp_kernel::udp::UdpLink;
use firmware::app::FW_PORT;
use firmware::peer::{PingState, Pinger};
use ofi_nostd::addr::EpAddr;
use ofi_nostd::net::NetConfig;
use ofi_nostd::storage::Fixed;
use wire::link::Link as _;

fn env_ip(name: &str) -> Ipv4Addr {
    let v = std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"));
    let ip: Ipv4Addr = v.parse().unwrap_or_else(|e| panic!("{name}={v}: {e}"));
    // Only ever the TAP's private subnet.
    assert!(
        ip.octets()[..2] == [10, 213],
        "{name}={ip}: not on a 10.213.x.0/24 test subnet"
    );
    ip
}

#[test]
#[ignore = "needs the firmware image running under QEMU: run by `cargo xtask test`"]
fn dgram_ping_pong_with_the_firmware() {
    let host_ip = env_ip("FIRMWARE_HOST_IP");
    let fw_ip = env_ip("FIRMWARE_FW_IP");
    let pings: u32 = std::env::var("FIRMWARE_PINGS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    // Domains on Fixed<16> storage are large: build them on a big stack.
    std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || run(host_ip, fw_ip, pings))
        .unwrap()
        .join()
        .unwrap();
}

fn run(host_ip: Ipv4Addr, fw_ip: Ipv4Addr, pings: u32) {
    let mut link = UdpLink::bind(SocketAddrV4::new(host_ip, FW_PORT)).expect("bind");
    let net = NetConfig::new(&link.capabilities(), host_ip.octets(), FW_PORT);
    let target = EpAddr::new(fw_ip.octets(), FW_PORT, 0);
    let mut host = Box::new(Pinger::new(net, Fixed::<16>, target, 7).expect("bring-up"));
    let max = host.max_size();
    let sizes = [
        1,
        2,
        3,
        4,
        7,
        8,
        15,
        16,
        63,
        64,
        100,
        256,
        512,
        1000,
        1024,
        max - 1,
        max,
    ];
    let epoch = Instant::now();
    let now = || ofi_nostd::time::Instant::from_micros(epoch.elapsed().as_micros() as u64);
    let (mut bytes, mut resent) = (0u64, 0u32);
    for seq in 1..=pings {
        let size = sizes[seq as usize % sizes.len()];
        let mut tries = 0;
        'ping: loop {
            host.start(seq, size).expect("post");
            let deadline = Instant::now() + Duration::from_millis(500);
            while Instant::now() < deadline {
                match host.poll(now(), &mut link) {
                    PingState::Done => break 'ping,
                    PingState::Waiting | PingState::Idle => {}
                    other => panic!("ping {seq} of {size} bytes: {other:?}"),
                }
                link.flush();
            }
            tries += 1;
            resent += 1;
            assert!(
                tries < 5,
                "ping {seq} of {size} bytes: no echo after {tries} tries"
            );
        }
        bytes += size as u64;
    }
    let secs = epoch.elapsed().as_secs_f64();
    println!(
        "{pings} DGRAM ping-pongs of 1..={max} bytes with the firmware at {fw_ip}: {bytes} bytes each way, data checked, {resent} resent, {:.1} us round trip on average",
        secs * 1e6 / f64::from(pings)
    );
}
