//! The data plane of one `ofi-pingpong` process: the link the command line names (kernel
//! or DPDK), opened by the host runtime ([`open_plane_with`]) with the tool's capture
//! (`--pcap`, the frames as they cross the link) and fault injector (`--loss`, seeded),
//! and the domain on it.
//!
//! `--dataplane dpdk`: EAL from `--eal`, one queue pair of the port `--dpdk-vdev` or
//! `--dpdk-port` names, the stack at `--ip` with the port's MAC (or `--mac`). The client
//! waits (at most `--timeout`) for the port's link to come up before it says hello (a
//! memif client: until it connected to the server's socket); the server does not wait,
//! so it can announce itself before any client exists.

use std::net::{Ipv4Addr, SocketAddrV4};

use dp_kernel::UdpConfig;
use ofi_nostd::info::ProviderConfig;
use ofi_nostd::mem::Memory;
use wire::frame::ETH_IPV4_UDP_HEADER_LEN;
use wire::link::{Capabilities, Medium};

use super::{Args, Dataplane, Failure};
use crate::api::{Domain, Fabric};
use crate::fault::{FaultConfig, FaultSpec};
use crate::pcap::Flush;
use crate::runtime::{
    Capture, Ethernet, OpenError, PlaneKind, PlaneOptions, open_plane_with, route,
};

/// What the tool needs to know about the link it opened.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LinkInfo {
    /// Our IPv4 address and UDP port.
    pub local: SocketAddrV4,
    /// The largest DGRAM message: the link's payload MTU minus the headers under it.
    pub dgram_max: usize,
}

/// Opens the domain on the data plane `args` names, `local_ip` being our address on UDP
/// (the Ethernet planes take theirs from `--ip`), `port` our UDP port and `peer` the
/// server's address (a client's).
pub(crate) fn open(
    fabric: &Fabric,
    args: &Args,
    local_ip: Ipv4Addr,
    port: u16,
    peer: Option<Ipv4Addr>,
) -> Result<(Domain<u64>, LinkInfo), Failure> {
    let cfg = ProviderConfig::DEFAULT;
    let (kind, what) = plane_kind(args, local_ip, port, peer)?;
    let plane = open_plane_with::<dyn Memory>(kind, options(args)).map_err(|e| match e {
        OpenError::Link(e) => Failure::new(match &what {
            Some(what) => format!("{what}: {e}"),
            None => e.to_string(),
        }),
        OpenError::Capture(e) => {
            let path = args.pcap.as_deref().unwrap_or(std::path::Path::new("?"));
            Failure::new(format!("--pcap {}: {e}", path.display()))
        }
    })?;
    let info = LinkInfo {
        local: SocketAddrV4::new(plane.net.local_ip.into(), plane.net.local_port),
        dgram_max: dgram_max(&plane.caps, cfg.wire_header_len),
    };
    let domain = fabric
        .domain()
        .config(cfg)
        .progress(args.progress_mode())
        .auth_key(args.auth_key.as_ref().map_or(&[][..], |k| &k.0))
        .plane(plane)
        .open::<u64>()
        .map_err(|e| Failure::new(format!("opening the domain: {e}")))?;
    Ok((domain, info))
}

/// The plane `args` names, and what an error opening it is about (`None`: the
/// runtime's error says it, as DPDK's name the port).
fn plane_kind(
    args: &Args,
    local_ip: Ipv4Addr,
    port: u16,
    peer: Option<Ipv4Addr>,
) -> Result<(PlaneKind, Option<String>), Failure> {
    if args.dpdk_mtu.is_some() && args.dataplane != Dataplane::Dpdk {
        return Err(Failure::new("--dpdk-mtu needs --dataplane dpdk"));
    }
    match args.dataplane {
        Dataplane::Udp => {
            let mut cfg = UdpConfig::new(SocketAddrV4::new(local_ip, port));
            // The MTU of the route to the peer, not of the interface owning our address:
            // a server on this host is reached through `lo` (64 KiB) whichever address
            // it has.
            cfg.path_mtu = peer.and_then(route::route).map(|r| r.mtu);
            let what = format!("UDP socket on {local_ip}:{port}");
            Ok((PlaneKind::Udp(cfg), Some(what)))
        }
        Dataplane::Tap | Dataplane::AfPacket => {
            let iface = args
                .iface
                .as_deref()
                .ok_or_else(|| Failure::new("--dataplane tap|af_packet needs --iface NAME"))?;
            let eth = ethernet(args, port, "tap|af_packet")?;
            Ok(if args.dataplane == Dataplane::Tap {
                let what = format!("TAP device {iface}");
                (PlaneKind::Tap(Some(iface.to_owned()), eth), Some(what))
            } else {
                let what = format!("AF_PACKET socket on {iface}");
                (PlaneKind::AfPacket(iface.to_owned(), eth), Some(what))
            })
        }
        Dataplane::Dpdk => Ok((dpdk(args, ethernet(args, port, "dpdk")?)?, None)),
    }
}

/// Where the stack sits on an Ethernet plane (`--dataplane {plane}`): `--ip`, `--mac`
/// and our fixed UDP `port`.
fn ethernet(args: &Args, port: u16, plane: &str) -> Result<Ethernet, Failure> {
    let (ip, prefix_len) = args
        .ip
        .ok_or_else(|| Failure::new(format!("--dataplane {plane} needs --ip A.B.C.D/PREFIX")))?;
    if port == 0 {
        return Err(Failure::new(
            "an Ethernet data plane needs a fixed UDP port (-B PORT)",
        ));
    }
    Ok(Ethernet {
        ip,
        port,
        prefix_len,
        gateway: None,
        mac: args.mac,
    })
}

/// The DPDK port `args` names, on the EAL `--eal` initialises; the client waits for
/// its link. Waiters get no descriptor (a safe-API domain polls on a short timer).
#[cfg(feature = "dpdk")]
fn dpdk(args: &Args, eth: Ethernet) -> Result<PlaneKind, Failure> {
    let eal = crate::dpdk::init_eal(args.eal.as_deref())
        .map_err(|e| Failure::new(format!("DPDK EAL: {e}")))?;
    let port = crate::runtime::DpdkPort {
        eal,
        vdev: args.dpdk_vdev.clone(),
        name: args.dpdk_port.clone(),
        mtu: args.dpdk_mtu,
        link_up: args.is_client().then_some(args.timeout),
        ready_fd: false,
    };
    Ok(PlaneKind::DpdkPort(port, eth))
}

/// Without the `dpdk` feature: an error saying how to get it.
#[cfg(not(feature = "dpdk"))]
fn dpdk(_args: &Args, _eth: Ethernet) -> Result<PlaneKind, Failure> {
    Err(Failure::new(
        "this ofi-pingpong was built without DPDK: build it with \
         `cargo build -p hosted --features dpdk` (needs DPDK 22.11, see crates/dp-dpdk)",
    ))
}

/// `--loss` (each direction, seeded by `--seed`) and `--pcap`, around the link.
fn options(args: &Args) -> PlaneOptions {
    let fault = (args.loss > 0.0).then(|| {
        let lossy = FaultSpec {
            loss: args.loss,
            ..FaultSpec::NONE
        };
        FaultConfig {
            rx: lossy,
            tx: lossy,
            ..FaultConfig::new(args.seed)
        }
    });
    // Flushed every 64 records and when the domain closes: complete files without a
    // system call per frame.
    let capture = args.pcap.clone().map(|path| Capture {
        path,
        flush: Flush::Every(64),
    });
    PlaneOptions {
        fault,
        capture,
        queues: usize::from(args.queues.or(args.contexts).unwrap_or(1)),
    }
}

/// The largest DGRAM message on a link with `caps`: its payload MTU minus the headers
/// under our packets (none on UDP sockets, Ethernet/IPv4/UDP framing on the others) and
/// the protocol's own.
fn dgram_max(caps: &Capabilities, wire_header_len: usize) -> usize {
    let under = match caps.medium {
        Medium::Udp => 0,
        Medium::Ethernet => ETH_IPV4_UDP_HEADER_LEN,
    };
    caps.mtu.saturating_sub(under + wire_header_len)
}

/// The address this host would send from to reach `dest` (the kernel's route choice):
/// the client's default source address.
pub(crate) fn route_source(dest: Ipv4Addr) -> Option<Ipv4Addr> {
    route::route(dest).map(|r| r.source)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    fn args(line: &[&str]) -> Args {
        Args::try_parse_from(std::iter::once("ofi-pingpong").chain(line.iter().copied())).unwrap()
    }

    #[test]
    fn dgram_messages_fit_under_the_headers_of_the_medium() {
        let udp = Capabilities::new(Medium::Udp, 1472);
        let eth = Capabilities::new(Medium::Ethernet, 1514);
        assert_eq!(dgram_max(&udp, 40), 1432);
        assert_eq!(dgram_max(&eth, 40), 1514 - 42 - 40);
    }

    #[test]
    fn ethernet_planes_need_an_address_and_a_fixed_port() {
        let a = args(&["--dataplane", "tap", "--iface", "t0"]);
        let e = plane_kind(&a, Ipv4Addr::LOCALHOST, 7, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--dataplane tap|af_packet needs --ip A.B.C.D/PREFIX"
        );
        let a = args(&["--dataplane", "af_packet", "--ip", "10.0.0.1/24"]);
        let e = plane_kind(&a, Ipv4Addr::LOCALHOST, 7, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "--dataplane tap|af_packet needs --iface NAME"
        );
        let a = args(&["--dataplane", "dpdk", "--ip", "10.0.0.1/24"]);
        let e = plane_kind(&a, Ipv4Addr::LOCALHOST, 0, None).unwrap_err();
        assert!(e.to_string().contains("fixed UDP port"), "{e}");
        // An MTU is the DPDK port's only: anywhere else it is refused, not ignored.
        let a = args(&["--dpdk-mtu", "9000"]);
        let e = plane_kind(&a, Ipv4Addr::LOCALHOST, 7, None).unwrap_err();
        assert_eq!(e.to_string(), "--dpdk-mtu needs --dataplane dpdk");
        assert_eq!(args(&["--dpdk-mtu", "9000"]).dpdk_mtu, Some(9000));
        assert!(Args::try_parse_from(["ofi-pingpong", "--dpdk-mtu", "20"]).is_err());
        let a = args(&[
            "--dataplane",
            "af_packet",
            "--iface",
            "e0",
            "--ip",
            "10.0.0.1/24",
        ]);
        match plane_kind(&a, Ipv4Addr::LOCALHOST, 7, None).unwrap() {
            (PlaneKind::AfPacket(i, eth), Some(what)) => {
                assert_eq!(i, "e0");
                assert_eq!(
                    (eth.ip, eth.port, eth.prefix_len),
                    (Ipv4Addr::new(10, 0, 0, 1), 7, 24)
                );
                assert_eq!(what, "AF_PACKET socket on e0");
            }
            other => panic!("{other:?}"),
        }
    }

    /// A client's UDP plane takes the MTU of its route to the server (a local server:
    /// `lo`'s); a server, whose peers are unknown, its interface's.
    #[test]
    fn a_client_sizes_its_udp_plane_by_the_route_to_the_server() {
        let a = args(&["127.0.0.1"]);
        let lo = route::route(Ipv4Addr::LOCALHOST).unwrap().mtu;
        match plane_kind(&a, Ipv4Addr::LOCALHOST, 0, Some(Ipv4Addr::LOCALHOST)).unwrap() {
            (PlaneKind::Udp(cfg), _) => assert_eq!(cfg.path_mtu, Some(lo)),
            other => panic!("{other:?}"),
        }
        match plane_kind(&a, Ipv4Addr::LOCALHOST, 0, None).unwrap() {
            (PlaneKind::Udp(cfg), _) => assert_eq!(cfg.path_mtu, None),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn loss_is_seeded_on_both_directions() {
        let o = options(&args(&[
            "--loss", "0.25", "--seed", "9", "--pcap", "x.pcap",
        ]));
        let f = o.fault.unwrap();
        assert_eq!((f.seed, f.rx.loss, f.tx.loss), (9, 0.25, 0.25));
        let c = o.capture.unwrap();
        assert_eq!(
            (c.path.to_str(), c.flush),
            (Some("x.pcap"), Flush::Every(64))
        );
        assert!(options(&args(&[])).fault.is_none());
    }
}
