//! `TapLink` against the kernel on its own TAP device (root only): everything stays on
//! that one device, whose subnet exists only while the test runs.

mod common;

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

use common::{LinkGuard, ip, parse_mac, root_or_skip, sys_class_net, sysctl};
use dp_kernel::{KernelLink, TapLink};
use wire::frame::{
    self, ARP_FRAME_LEN, ArpOperation, DEFAULT_TTL, EthernetAddress, ParsedFrame, UdpFrameRepr,
};
use wire::link::{Link, Medium, RxToken, TxMeta, TxToken, UdpAddr};

/// Open a TAP, or explain why this environment cannot (no tun device, no capability).
fn open_or_skip(test: &str, name: Option<&str>) -> Option<TapLink> {
    match TapLink::open(name) {
        Ok(t) => Some(t),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied
            ) =>
        {
            println!(
                "{test}: skipped, cannot open {}: {e}",
                dp_kernel::tap::TUN_DEVICE
            );
            None
        }
        Err(e) => panic!("open tap: {e}"),
    }
}

/// Transmit one frame written by `emit` (returning its length).
fn send_frame(tap: &mut TapLink, len: usize, emit: impl FnOnce(&mut [u8]) -> usize) {
    let tok = tap.transmit().expect("a TAP always has a transmit slot");
    tok.consume_with(len, |buf| (TxMeta::len(emit(buf)), ()));
}

/// Receive frames until `want` accepts one (returning Some), calling `resend` every
/// 200 ms; panics after 5 s.
fn wait_for<T>(
    tap: &mut TapLink,
    mut resend: impl FnMut(&mut TapLink),
    mut want: impl FnMut(&[u8]) -> Option<T>,
) -> T {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut next_send = Instant::now();
    loop {
        assert!(Instant::now() < deadline, "timed out on {}", tap.name());
        if Instant::now() >= next_send {
            resend(tap);
            next_send = Instant::now() + Duration::from_millis(200);
        }
        match tap.receive() {
            Some(tok) => {
                if let Some(t) = tok.consume(&mut want) {
                    return t;
                }
            }
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}

#[test]
fn tap_arp_and_udp_with_the_kernel() {
    const TEST: &str = "tap_arp_and_udp_with_the_kernel";
    if !root_or_skip(TEST) {
        return;
    }
    let pid = std::process::id();
    let name = format!("ontap{pid}");
    let Some(mut tap) = open_or_skip(TEST, Some(&name)) else {
        return;
    };
    let _guard = LinkGuard(vec![tap.name().to_owned()]);
    assert_eq!(tap.name(), name);
    sysctl(&format!("net/ipv6/conf/{name}/disable_ipv6"), "1");

    // MTU and flags through our ioctls, checked against sysfs.
    tap.set_mtu(1400).unwrap();
    assert_eq!(sys_class_net(&name, "mtu"), "1400");
    assert_eq!(tap.interface_mtu(), 1400);
    let caps = tap.capabilities();
    assert_eq!(
        (caps.medium, caps.mtu, caps.max_burst),
        (Medium::Ethernet, 1414, 1)
    );
    tap.set_up(true).unwrap();
    let flags = u32::from_str_radix(sys_class_net(&name, "flags").trim_start_matches("0x"), 16);
    assert_eq!(flags.unwrap() & 1, 1, "IFF_UP");
    let kernel_mac = tap.kernel_mac().unwrap();
    assert_eq!(kernel_mac, parse_mac(&sys_class_net(&name, "address")));

    let x = (pid % 256) as u8;
    let kernel_ip = Ipv4Addr::new(10, 213, x, 1);
    let our_ip = Ipv4Addr::new(10, 213, x, 2);
    ip(&["addr", "add", &format!("{kernel_ip}/24"), "dev", &name]);
    let our_mac = EthernetAddress([0x02, 0x0f, 0x1e, 0x00, x, 0x02]);
    assert_ne!(our_mac.0, kernel_mac);

    // ARP: our request for the kernel's address, its reply back through the TAP.
    let reply = wait_for(
        &mut tap,
        |tap| {
            send_frame(tap, ARP_FRAME_LEN, |buf| {
                frame::emit_arp_request(buf, our_mac, our_ip, kernel_ip).unwrap()
            })
        },
        |f| match frame::parse_frame(f, &caps.checksum_caps()) {
            Ok(ParsedFrame::Arp(m))
                if m.operation == ArpOperation::Reply && m.sender_ip == kernel_ip =>
            {
                assert_eq!(&f[..6], &our_mac.0, "unicast to us");
                Some(m)
            }
            _ => None,
        },
    );
    assert_eq!(reply.sender_mac.0, kernel_mac);
    assert_eq!((reply.target_mac, reply.target_ip), (our_mac, our_ip));

    // UDP from a kernel socket to our address arrives as a checksummed frame...
    let sock = UdpSocket::bind(SocketAddrV4::new(kernel_ip, 0)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let kport = sock.local_addr().unwrap().port();
    let udp = wait_for(
        &mut tap,
        |_| {
            sock.send_to(b"hello tap", SocketAddrV4::new(our_ip, 9999))
                .unwrap();
        },
        |f| match frame::parse_frame(f, &caps.checksum_caps()) {
            Ok(ParsedFrame::Udp(u)) if u.repr.dst.port == 9999 => {
                Some((u.repr, f[u.payload].to_vec()))
            }
            _ => None,
        },
    );
    assert_eq!(udp.1, b"hello tap");
    assert_eq!(udp.0.src, UdpAddr::new(kernel_ip, kport));
    assert_eq!(udp.0.src_mac.0, kernel_mac);
    assert_eq!(udp.0.dst_mac, our_mac);

    // ...and a frame we build reaches the kernel socket.
    let repr = UdpFrameRepr {
        src_mac: our_mac,
        dst_mac: EthernetAddress(kernel_mac),
        src: UdpAddr::new(our_ip, 9999),
        dst: UdpAddr::new(kernel_ip, kport),
        ttl: DEFAULT_TTL,
    };
    let answer = b"hello kernel";
    send_frame(&mut tap, UdpFrameRepr::buffer_len(answer.len()), |buf| {
        repr.emit(buf, answer.len(), &caps.checksum_caps(), |p| {
            p.copy_from_slice(answer)
        })
        .unwrap()
    });
    let mut buf = [0u8; 64];
    let (n, from) = sock.recv_from(&mut buf).unwrap();
    assert_eq!(&buf[..n], answer);
    assert_eq!(from, SocketAddrV4::new(our_ip, 9999).into());

    // A frame longer than the lent buffer is refused, nothing written.
    let before = tap.stats();
    let tok = tap.transmit().unwrap();
    let lent = tok.consume_with(caps.mtu + 100, |b| (TxMeta::len(b.len() + 1), b.len()));
    assert_eq!(lent, caps.mtu);
    let after = tap.stats();
    assert_eq!(after.tx_refused, before.tx_refused + 1);
    assert_eq!(after.tx_packets, before.tx_packets);
    assert_eq!(KernelLink::pending_tx(&tap), 0, "a TAP never queues");
    assert!(after.rx_packets >= 2 && after.tx_packets >= 2, "{after:?}");
    assert_eq!(after.tx_errors, 0);
}

#[test]
fn tap_kernel_named() {
    const TEST: &str = "tap_kernel_named";
    if !root_or_skip(TEST) {
        return;
    }
    let Some(tap) = open_or_skip(TEST, None) else {
        return;
    };
    // Deleted while our descriptor still holds the device, so the name is ours.
    let guard = LinkGuard(vec![tap.name().to_owned()]);
    assert!(tap.name().starts_with("tap"), "{}", tap.name());
    assert!(
        !sys_class_net(tap.name(), "mtu").is_empty(),
        "device exists"
    );
    assert_eq!(tap.capabilities().mtu, tap.interface_mtu() + 14);
    drop(guard);
    drop(tap);
}

#[test]
fn tap_bad_name_is_refused() {
    let e = TapLink::open(Some("a-name-that-is-far-too-long")).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
}
