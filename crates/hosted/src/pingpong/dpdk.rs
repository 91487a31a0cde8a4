//! `--dataplane dpdk`: EAL from `--eal`, one queue pair of the port `--dpdk-vdev` or
//! `--dpdk-port` names, the stack at `--ip` with the port's MAC (or `--mac`).
//!
//! The client waits (at most `--timeout`) for the port's link to come up before it
//! says hello (a memif client: until it connected to the server's socket); the server
//! does not wait, so it can announce itself before any client exists.

use super::plane::LinkInfo;
use super::{Args, Failure};
use crate::api::{Domain, DomainBuilder};

/// Opens the domain on the DPDK port `args` names, at UDP port `port`.
#[cfg(feature = "dpdk")]
pub(super) fn open(
    builder: DomainBuilder<'_>,
    args: &Args,
    port: u16,
    wire_header_len: usize,
) -> Result<(Domain<u64>, LinkInfo), Failure> {
    use std::net::SocketAddrV4;

    use ofi_nostd::net::NetConfig;
    use wire::link::Link;

    use crate::dpdk::{DpdkPlane, init_eal, open_port};
    use crate::pcap::PcapConfig;

    /// Bytes of the Ethernet, IPv4 and UDP headers under our packets.
    const ETH_IP_UDP: usize = 14 + 28;

    let (ip, prefix) = args
        .ip
        .ok_or_else(|| Failure::new("--dataplane dpdk needs --ip A.B.C.D/PREFIX"))?;
    if port == 0 {
        return Err(Failure::new(
            "an Ethernet data plane needs a fixed UDP port (-B PORT)",
        ));
    }
    let eal = init_eal(args.eal.as_deref()).map_err(|e| Failure::new(format!("DPDK EAL: {e}")))?;
    let p = open_port(eal, args.dpdk_vdev.as_deref(), args.dpdk_port.as_deref())
        .map_err(|e| Failure::new(format!("DPDK port: {e}")))?;
    if args.is_client() {
        p.wait_link_up(args.timeout)
            .map_err(|e| Failure::new(format!("DPDK port {}: {e}", p.name())))?;
    }
    let link = p
        .link(0)
        .map_err(|e| Failure::new(format!("DPDK port {}: {e}", p.name())))?;
    let caps = link.capabilities();
    let mac = args.mac.unwrap_or(link.mac());
    let net = NetConfig::new(&caps, ip.octets(), port).with_ethernet(mac, prefix, None);
    let info = LinkInfo {
        local: SocketAddrV4::new(ip, port),
        dgram_max: caps.mtu.saturating_sub(ETH_IP_UDP + wire_header_len),
    };
    // The port closes when the link (inside the domain) is dropped. --pcap records
    // Ethernet frames, --loss drops them (both as on the kernel planes).
    let plane = DpdkPlane::new(eal, link);
    let domain = super::plane::finish(builder, plane, net, args, PcapConfig::default())?;
    Ok((domain, info))
}

/// Without the `dpdk` feature: an error saying how to get it.
#[cfg(not(feature = "dpdk"))]
pub(super) fn open(
    _builder: DomainBuilder<'_>,
    _args: &Args,
    _port: u16,
    _wire_header_len: usize,
) -> Result<(Domain<u64>, LinkInfo), Failure> {
    Err(Failure::new(
        "this ofi-pingpong was built without DPDK: build it with \
         `cargo build -p hosted --features dpdk` (needs DPDK 22.11, see crates/dp-dpdk)",
    ))
}
