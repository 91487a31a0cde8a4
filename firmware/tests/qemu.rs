//! The host side of the firmware's QEMU test, against the image booted by `cargo xtask
//! test` (or `cargo xtask firmware --run`), over a kernel UDP socket bound to the TAP's
//! host address:
//!
//! * DGRAM ping-pongs with data checks, the core driven directly (`firmware::peer`);
//! * RDM ping-pongs with data checks through `crates/hosted`'s safe API (a hosted
//!   `Domain` whose data plane is that UDP socket): a few untagged messages to the
//!   image's msg echo, then `FIRMWARE_RDM_PINGS` tagged messages of 1 B .. 64 KiB to
//!   its tagged echo, each answered with the same tag and every byte checked.
//!
//! Ignored in plain `cargo test`: they need the running image. xtask runs them with
//! `--ignored` and `FIRMWARE_HOST_IP` / `FIRMWARE_FW_IP` (addresses on the TAP's
//! private /24), `FIRMWARE_PINGS` and `FIRMWARE_RDM_PINGS`.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use dp_kernel::udp::UdpLink;
use firmware::app::FW_PORT;
use firmware::peer::{PingState, Pinger};
use ofi_nostd::addr::EpAddr;
use ofi_nostd::net::NetConfig;
use ofi_nostd::storage::Fixed;
use wire::link::Link as _;

fn env_count(name: &str, default: u32) -> u32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

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
    let pings = env_count("FIRMWARE_PINGS", 1000);
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

/// Sizes the RDM ping-pongs cycle through: 1 B .. 64 KiB, around the segment size of a
/// 9000-byte MTU (8972-byte UDP payloads) and of a 1500-byte one.
const RDM_SIZES: [usize; 20] = [
    1, 2, 3, 8, 63, 100, 512, 1000, 1400, 1500, 4096, 8000, 8192, 8193, 9000, 16384, 30000, 32768,
    65535, 65536,
];

/// The byte at offset `i` of RDM ping `seq`.
fn rdm_pattern(seq: u64, i: usize) -> u8 {
    (seq.wrapping_mul(0x9e37_79b9) as usize ^ i.wrapping_mul(131)).wrapping_add(i >> 8) as u8
}

#[test]
#[ignore = "needs the firmware image running under QEMU: run by `cargo xtask test`"]
fn rdm_tagged_ping_pong_with_the_firmware() {
    use hosted::api::{Buf, Fabric};
    use ofi_nostd::flags::{FI_ADDR_UNSPEC, Flags};
    use ofi_nostd::info::EpType;

    let host_ip = env_ip("FIRMWARE_HOST_IP");
    let fw_ip = env_ip("FIRMWARE_FW_IP");
    let pings = env_count("FIRMWARE_RDM_PINGS", 1000);
    let msgs = env_count("FIRMWARE_RDM_MSGS", 40);
    let wait = Duration::from_secs(10);

    let fabric = Fabric::open().expect("fi_fabric");
    let domain = fabric
        .domain()
        .udp(SocketAddrV4::new(host_ip, FW_PORT))
        .open::<u64>()
        .expect("fi_domain on a UDP socket at the TAP's host address");
    let cq = domain.cq(64).expect("fi_cq_open");
    let av = domain.av().expect("fi_av_open");
    let ep = domain.endpoint(EpType::Rdm).expect("fi_endpoint");
    ep.bind_cq(&cq, Flags::TRANSMIT | Flags::RECV).unwrap();
    ep.bind_av(&av).unwrap();
    ep.enable().unwrap();
    // The image answers the host peer of its plan: our port, endpoint 0.
    assert_eq!(
        ep.addr(),
        EpAddr::new(host_ip.octets(), FW_PORT, 0),
        "the image only answers endpoint 0 at the TAP's host address"
    );
    let fw = av
        .insert(EpAddr::new(fw_ip.octets(), FW_PORT, 1))
        .expect("fi_av_insert");

    const RX: u64 = 1;
    const TX: u64 = 2;
    let max = *RDM_SIZES.iter().max().unwrap();
    let mut tx_buf = Some(Buf::zeroed(max));
    let mut rx_buf = Some(Buf::zeroed(max));
    let epoch = Instant::now();
    let (mut bytes, mut slowest) = (0u64, Duration::ZERO);
    let total = u64::from(msgs) + u64::from(pings);
    for seq in 0..total {
        let tagged = seq >= u64::from(msgs);
        let size = RDM_SIZES[seq as usize % RDM_SIZES.len()];
        let tag = 0x5a00_0000_0000 | seq;
        let mut tx = tx_buf.take().unwrap();
        tx.set_len(size);
        for (i, b) in tx.iter_mut().enumerate() {
            *b = rdm_pattern(seq, i);
        }
        let mut rx = rx_buf.take().unwrap();
        rx.set_len(rx.capacity());
        rx.fill(0);
        let t0 = Instant::now();
        if tagged {
            ep.trecv(rx, FI_ADDR_UNSPEC, tag, 0, RX).expect("fi_trecv");
            ep.tsend(tx, fw, tag, TX).expect("fi_tsend");
        } else {
            ep.recv(rx, FI_ADDR_UNSPEC, RX).expect("fi_recv");
            ep.send(tx, fw, TX).expect("fi_send");
        }
        while tx_buf.is_none() || rx_buf.is_none() {
            let c = cq.sread(wait).unwrap_or_else(|e| {
                panic!(
                    "ping {seq} ({size} bytes, tagged {tagged}): no completion within {wait:?}: {e}; {:?}",
                    domain.stats()
                )
            });
            let what = if c.context == RX { "echo" } else { "send" };
            if let Err(e) = c.result() {
                panic!("ping {seq} ({size} bytes): {what} failed: {e}");
            }
            if c.context == RX {
                assert_eq!(c.len, size, "ping {seq}: echo length");
                if tagged {
                    assert_eq!(c.tag, Some(tag), "ping {seq}: echo tag");
                }
                if let Some(at) = (0..size).find(|&i| c.buf[i] != rdm_pattern(seq, i)) {
                    panic!("ping {seq} of {size} bytes: echo differs at byte {at}");
                }
                rx_buf = Some(c.buf);
            } else {
                tx_buf = Some(c.buf);
            }
        }
        slowest = slowest.max(t0.elapsed());
        bytes += size as u64;
    }
    let secs = epoch.elapsed().as_secs_f64();
    let stats = domain.stats();
    println!(
        "{msgs} RDM msg + {pings} RDM tagged ping-pongs of 1..={max} bytes with the firmware at {fw_ip} (hosted API, UDP on the TAP): {bytes} bytes each way, every byte checked, in {secs:.1} s ({:.0} us per round trip on average, slowest {:.1} ms, {:.1} MB/s each way); host {stats:?}",
        secs * 1e6 / total as f64,
        slowest.as_secs_f64() * 1e3,
        bytes as f64 / secs / 1e6
    );
    ep.close();
}
