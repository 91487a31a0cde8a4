//! The kernel-UDP interop test body shared by the raw-socket drivers' test files
//! (`af_packet.rs`, `af_xdp.rs`); each call names its own veth pair, namespace and port.
//!
//! One end of a veth pair goes to a DPDK driver, the other end lives in a network
//! namespace the test creates (root only; the namespace and the pair are always
//! removed, by a guard armed before they exist). In the namespace an ordinary kernel
//! UDP socket echoes datagrams; the DPDK side speaks ARP and Ethernet/IPv4/UDP with the
//! `wire` crate's framing, checksums verified both ways. This is the interop the stack
//! relies on: the same frames a kernel host sends and accepts.

use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};

use dp_dpdk::{DpdkLink, Port, PortConfig};
use wire::frame::{
    self, ArpOperation, DEFAULT_TTL, EthernetAddress, Ipv4Address, ParsedFrame, UdpAddr,
    UdpFrameRepr,
};
use wire::link::{Link, TxMeta, TxToken};

use crate::common::{
    NetGuard, eal, enter_netns, fill, ip, parse_mac, root_or_skip, sys_class_net, tx_checksum_off,
};

const DPDK_PORT: u16 = 7001;
const KERNEL_PORT: u16 = 7000;

/// The DPDK end: a link plus our addresses, answering ARP for our IP.
struct Host {
    link: DpdkLink,
    mac: EthernetAddress,
    ip: Ipv4Address,
    peer_ip: Ipv4Address,
    peer_mac: Option<EthernetAddress>,
    arp_replies: usize,
    other: usize,
}

impl Host {
    fn send_udp(&mut self, payload_len: usize, seq: u32) {
        let repr = UdpFrameRepr {
            src_mac: self.mac,
            dst_mac: self.peer_mac.expect("peer resolved"),
            src: UdpAddr::new(self.ip, DPDK_PORT),
            dst: UdpAddr::new(self.peer_ip, KERNEL_PORT),
            ttl: DEFAULT_TTL,
        };
        let caps = self.link.capabilities().checksum_caps();
        let tok = self.link.transmit().expect("transmit token");
        tok.consume_with(UdpFrameRepr::buffer_len(payload_len), |buf| {
            let n = repr
                .emit(buf, payload_len, &caps, |p| fill(p, seq))
                .unwrap();
            (TxMeta::len(n), ())
        });
    }

    /// Receive what is there: answer ARP requests for our IP, learn the peer's MAC from
    /// its ARP replies, return the UDP payloads sent to our port (checksums verified).
    fn poll(&mut self) -> Vec<Vec<u8>> {
        let caps = self.link.capabilities().checksum_caps();
        let (mut requests, mut payloads) = (Vec::new(), Vec::new());
        let (ip, peer_ip) = (self.ip, self.peer_ip);
        let mut learned = None;
        let mut other = 0;
        self.link
            .receive_burst(usize::MAX, |_, f| match frame::parse_frame(f, &caps) {
                Ok(ParsedFrame::Arp(a))
                    if a.operation == ArpOperation::Request && a.target_ip == ip =>
                {
                    requests.push(a)
                }
                Ok(ParsedFrame::Arp(a))
                    if a.operation == ArpOperation::Reply && a.sender_ip == peer_ip =>
                {
                    learned = Some(a.sender_mac)
                }
                Ok(ParsedFrame::Udp(u)) if u.repr.dst.port == DPDK_PORT => {
                    assert_eq!(u.repr.src, UdpAddr::new(peer_ip, KERNEL_PORT));
                    payloads.push(f[u.payload].to_vec());
                }
                _ => other += 1,
            });
        self.other += other;
        if learned.is_some() {
            self.peer_mac = learned;
        }
        for req in requests {
            let mac = self.mac;
            let tok = self.link.transmit().expect("transmit token");
            tok.consume_with(frame::ARP_FRAME_LEN, |buf| {
                let n = frame::emit_arp_reply(buf, mac, ip, &req).unwrap();
                (TxMeta::len(n), ())
            });
            self.arp_replies += 1;
        }
        self.link.flush();
        payloads
    }

    /// Poll until a payload arrives.
    fn recv(&mut self, deadline: Instant) -> Vec<u8> {
        loop {
            if let Some(p) = self.poll().into_iter().next() {
                return p;
            }
            assert!(
                Instant::now() < deadline,
                "no datagram before the deadline ({:?})",
                self.link.stats()
            );
        }
    }
}

fn check(p: &[u8], len: usize, seq: u32) {
    assert_eq!(p.len(), len, "echo length of seq {seq}");
    let mut want = vec![0u8; len];
    fill(&mut want, seq);
    assert!(p == want.as_slice(), "echo of seq {seq} corrupted");
}

/// The test body for a DPDK driver `driver` bound to a veth end by `iface=` plus
/// `extra` devargs; `n` keeps names and subnets of concurrent tests apart.
///
/// Once the link is dropped, the port's pool must be back where it was when the port
/// started, give or take `tx_held` mbufs: frames of the last transmit burst that the
/// driver may still hold (it frees them when it transmits again, or when the port
/// closes). Every other mbuf taken after the start is a leak.
pub fn interop_with_kernel_udp(test: &str, driver: &str, extra: &str, n: u32, tx_held: u32) {
    if !root_or_skip(test) {
        return;
    }
    let pid = std::process::id();
    let (a, b, ns) = (
        format!("dpk{pid}{n}a"),
        format!("dpk{pid}{n}b"),
        format!("dp-dpdk-{pid}-{n}"),
    );
    let x = ((pid * 2 + n) % 250) as u8 + 1;
    let (dpdk_ip, kernel_ip) = (Ipv4Addr::new(10, 215, x, 1), Ipv4Addr::new(10, 215, x, 2));
    // Armed before anything exists, so a failure anywhere below still removes it all.
    let _guard = NetGuard {
        netns: vec![ns.clone()],
        links: vec![a.clone()],
    };
    ip(&["netns", "add", &ns]);
    ip(&["link", "add", &a, "type", "veth", "peer", "name", &b]);
    let b_mac = parse_mac(&sys_class_net(&b, "address"));
    ip(&["link", "set", &b, "netns", &ns]);
    ip(&["link", "set", &a, "addrgenmode", "none"]);
    ip(&["link", "set", &a, "up"]);
    ip(&["-n", &ns, "link", "set", &b, "addrgenmode", "none"]);
    ip(&[
        "-n",
        &ns,
        "addr",
        "add",
        &format!("{kernel_ip}/24"),
        "dev",
        &b,
    ]);
    ip(&["-n", &ns, "link", "set", &b, "up"]);

    // The kernel side: a UDP echo in the namespace, until "stop".
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let ns2 = ns.clone();
    let b2 = b.clone();
    let kernel = std::thread::spawn(move || {
        enter_netns(&ns2);
        tx_checksum_off(&b2);
        let sock = UdpSocket::bind(SocketAddrV4::new(kernel_ip, KERNEL_PORT)).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        ready_tx.send(()).unwrap();
        let mut buf = [0u8; 2048];
        let mut echoed = 0usize;
        loop {
            let (n, from) = sock.recv_from(&mut buf).expect("kernel echo: recv");
            if &buf[..n] == b"stop" {
                return echoed;
            }
            sock.send_to(&buf[..n], from).expect("kernel echo: send");
            echoed += 1;
        }
    });
    ready_rx.recv().unwrap();

    let port = Port::open(
        eal(),
        &PortConfig::vdev(
            &format!("{driver}_t{pid}_{n}"),
            &format!("iface={a}{extra}"),
        ),
    )
    .unwrap_or_else(|e| panic!("{test}: open {driver} on {a}: {e}"));
    assert_eq!(port.driver(), driver);
    assert_eq!(port.mac(), parse_mac(&sys_class_net(&a, "address")));
    if driver == "net_af_xdp" {
        // Every mbuf inside what the driver registers as the UMEM.
        let layout = port.mempool().layout();
        assert!(
            layout.is_packed(),
            "{test}: mbufs beyond the UMEM: {layout:?}"
        );
    }
    let start = port.mempool().in_use();
    let link = port.link(0).unwrap();
    let mtu = link.capabilities().mtu;
    assert_eq!(mtu, 1514);
    let mut host = Host {
        mac: EthernetAddress(link.mac()),
        link,
        ip: dpdk_ip,
        peer_ip: kernel_ip,
        peer_mac: None,
        arp_replies: 0,
        other: 0,
    };
    let deadline = Instant::now() + Duration::from_secs(60);

    // Resolve the kernel's MAC with ARP (retrying: the pair may still be coming up).
    while host.peer_mac.is_none() {
        assert!(Instant::now() < deadline, "no ARP reply from the kernel");
        let mac = host.mac;
        let tok = host.link.transmit().unwrap();
        tok.consume_with(frame::ARP_FRAME_LEN, |buf| {
            let n = frame::emit_arp_request(buf, mac, dpdk_ip, kernel_ip).unwrap();
            (TxMeta::len(n), ())
        });
        host.link.flush();
        let wait = Instant::now() + Duration::from_millis(100);
        while host.peer_mac.is_none() && Instant::now() < wait {
            host.poll();
        }
    }
    assert_eq!(host.peer_mac, Some(EthernetAddress(b_mac)));
    // ARP the other way: the kernel learned our MAC from the request; forget it, so its
    // first echo waits for an ARP request that `poll` must answer.
    ip(&["-n", &ns, "neigh", "flush", "dev", &b]);

    // Every payload size up to the MTU, one round trip each.
    let max_payload = mtu - frame::ETH_IPV4_UDP_HEADER_LEN;
    let mut seq = 0u32;
    for len in 0..=max_payload {
        host.send_udp(len, seq);
        host.link.flush();
        let p = host.recv(deadline);
        check(&p, len, seq);
        seq += 1;
    }

    // Bursts: 2000 datagrams, at most 32 in flight.
    let total = 2000u32;
    let len_of = |s: u32| (s as usize * 53) % 1024;
    let (mut sent, mut got) = (0u32, 0u32);
    let base = seq;
    while got < total {
        assert!(
            Instant::now() < deadline,
            "burst echoes missing: {got}/{total}"
        );
        while sent < total && sent - got < 32 {
            host.send_udp(len_of(base + sent), base + sent);
            sent += 1;
        }
        host.link.flush();
        for p in host.poll() {
            check(&p, len_of(base + got), base + got);
            got += 1;
        }
    }
    seq += total;

    // Stop the echo.
    let repr = UdpFrameRepr {
        src_mac: host.mac,
        dst_mac: host.peer_mac.unwrap(),
        src: UdpAddr::new(dpdk_ip, DPDK_PORT),
        dst: UdpAddr::new(kernel_ip, KERNEL_PORT),
        ttl: DEFAULT_TTL,
    };
    let caps = host.link.capabilities().checksum_caps();
    host.link.transmit().unwrap().consume_with(64, |buf| {
        let n = frame::emit_udp_ipv4_ethernet(buf, &repr, b"stop", &caps).unwrap();
        (TxMeta::len(n), ())
    });
    host.link.flush();
    let echoed = kernel.join().expect("kernel echo thread");
    assert_eq!(echoed, seq as usize);

    assert!(host.arp_replies >= 1, "the kernel never asked for our MAC");
    let s = host.link.stats();
    assert_eq!(
        (s.tx_dropped, s.rx_dropped, s.tx_refused),
        (0, 0, 0),
        "{s:?}"
    );
    println!(
        "{test}: {seq} datagrams echoed by the kernel, {} ARP replies sent, {} other frames seen; {s:?}",
        host.arp_replies, host.other
    );
    drop(host);
    let in_use = port.mempool().in_use();
    assert!(
        (start..=start + tx_held).contains(&in_use),
        "mbufs leaked: {in_use} in use, {start} when the port started, the driver may hold {tx_held}"
    );
    port.close().unwrap();
}
