//! The data plane of one `ofi-pingpong` process: the link the command line names (kernel
//! or DPDK), optionally wrapped in a [`PcapLink`] (the frames as they cross the link) and a
//! [`FaultLink`] (seeded loss), opened as a domain.

use std::fs::File;
use std::io::BufWriter;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::Path;

use dp_kernel::{AfPacketLink, TapLink, UdpConfig, UdpLink};
use ofi_nostd::info::ProviderConfig;
use ofi_nostd::net::NetConfig;
use wire::link::{Capabilities, Link, UdpAddr};

use super::{Args, Dataplane, Failure};
use crate::api::{DataPlane, Domain, DomainBuilder, Fabric};
use crate::fault::{FaultConfig, FaultLink, FaultSpec};
use crate::pcap::{Flush, PcapConfig, PcapLink};

/// What the tool needs to know about the link it opened.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LinkInfo {
    /// Our IPv4 address and UDP port.
    pub local: SocketAddrV4,
    /// The largest DGRAM message: the link's payload MTU minus the headers under it.
    pub dgram_max: usize,
}

/// Bytes of IPv4 + UDP headers.
const IP_UDP: usize = 28;

/// Bytes of an Ethernet header.
const ETH: usize = 14;

/// Opens the domain on the data plane `args` names, `local_ip` being our address on UDP
/// (the Ethernet planes take theirs from `--ip`) and `port` our UDP port.
pub(crate) fn open(
    fabric: &Fabric,
    args: &Args,
    local_ip: Ipv4Addr,
    port: u16,
) -> Result<(Domain<u64>, LinkInfo), Failure> {
    let cfg = ProviderConfig::DEFAULT;
    let builder = fabric.domain().config(cfg).progress(args.progress_mode());
    match args.dataplane {
        Dataplane::Dpdk => super::dpdk::open(builder, args, port, cfg.wire_header_len),
        Dataplane::Udp => {
            let link = UdpLink::new(UdpConfig::new(SocketAddrV4::new(local_ip, port)))
                .map_err(|e| Failure::new(format!("UDP socket on {local_ip}:{port}: {e}")))?;
            let local = link.local_addr();
            let caps = link.capabilities();
            let net = NetConfig::new(&caps, local.ip().octets(), local.port());
            let pcap = PcapConfig::local(UdpAddr::new(local.ip().octets().into(), local.port()));
            let info = LinkInfo {
                local,
                dgram_max: caps.mtu.saturating_sub(cfg.wire_header_len),
            };
            Ok((finish(builder, link, net, args, pcap)?, info))
        }
        Dataplane::Tap | Dataplane::AfPacket => {
            let iface = args
                .iface
                .as_deref()
                .ok_or_else(|| Failure::new("--dataplane tap|af_packet needs --iface NAME"))?;
            let (ip, prefix) = args.ip.ok_or_else(|| {
                Failure::new("--dataplane tap|af_packet needs --ip A.B.C.D/PREFIX")
            })?;
            if port == 0 {
                return Err(Failure::new(
                    "an Ethernet data plane needs a fixed UDP port (-B PORT)",
                ));
            }
            let eth = |caps: &Capabilities, mac: [u8; 6]| {
                NetConfig::new(caps, ip.octets(), port).with_ethernet(mac, prefix, None)
            };
            let info = |caps: &Capabilities| LinkInfo {
                local: SocketAddrV4::new(ip, port),
                dgram_max: caps.mtu.saturating_sub(ETH + IP_UDP + cfg.wire_header_len),
            };
            let pcap = PcapConfig::default();
            if args.dataplane == Dataplane::Tap {
                let link = TapLink::open(Some(iface))
                    .and_then(|l| l.set_up(true).map(|()| l))
                    .map_err(|e| Failure::new(format!("TAP device {iface}: {e}")))?;
                let caps = link.capabilities();
                let mac = args.mac.unwrap_or_else(random_mac);
                let li = info(&caps);
                Ok((finish(builder, link, eth(&caps, mac), args, pcap)?, li))
            } else {
                let link = AfPacketLink::open(iface)
                    .map_err(|e| Failure::new(format!("AF_PACKET socket on {iface}: {e}")))?;
                let caps = link.capabilities();
                let mac = args.mac.unwrap_or(link.mac());
                let li = info(&caps);
                Ok((finish(builder, link, eth(&caps, mac), args, pcap)?, li))
            }
        }
    }
}

/// Wraps `link` as `--pcap` and `--loss` say and opens the domain on it.
pub(super) fn finish<P: DataPlane>(
    builder: DomainBuilder<'_>,
    link: P,
    net: NetConfig,
    args: &Args,
    pcap: PcapConfig,
) -> Result<Domain<u64>, Failure> {
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
    let pcap = match &args.pcap {
        None => None,
        Some(path) => Some((pcap_writer(path)?, pcap)),
    };
    let domain = match (fault, pcap) {
        (None, None) => builder.link(link, net),
        (Some(f), None) => builder.link(FaultLink::new(link, f), net),
        (None, Some((w, cfg))) => builder.link(pcap_link(link, w, cfg, &args.pcap)?, net),
        (Some(f), Some((w, cfg))) => {
            builder.link(FaultLink::new(pcap_link(link, w, cfg, &args.pcap)?, f), net)
        }
    };
    domain
        .open::<u64>()
        .map_err(|e| Failure::new(format!("opening the domain: {e}")))
}

type Pcap = BufWriter<File>;

fn pcap_writer(path: &Path) -> Result<Pcap, Failure> {
    File::create(path)
        .map(BufWriter::new)
        .map_err(|e| Failure::new(format!("--pcap {}: {e}", path.display())))
}

fn pcap_link<K: Link>(
    link: K,
    w: Pcap,
    mut cfg: PcapConfig,
    path: &Option<std::path::PathBuf>,
) -> Result<PcapLink<K, Pcap>, Failure> {
    // Flushed every 64 records and when the domain closes: complete files without a
    // system call per frame.
    cfg.flush = Flush::Every(64);
    PcapLink::new(link, w, cfg).map_err(|e| {
        let p = path.as_deref().unwrap_or(Path::new("?"));
        Failure::new(format!("--pcap {}: {e}", p.display()))
    })
}

/// The address this host would send from to reach `dest` (the kernel's route choice):
/// the client's default source address.
pub(crate) fn route_source(dest: Ipv4Addr) -> Option<Ipv4Addr> {
    let s = UdpSocket::bind(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    s.connect(SocketAddrV4::new(dest, 9)).ok()?;
    match s.local_addr().ok()? {
        std::net::SocketAddr::V4(a) => Some(*a.ip()),
        std::net::SocketAddr::V6(_) => None,
    }
}

/// A random unicast, locally administered MAC (TAP devices, when `--mac` is not given).
fn random_mac() -> [u8; 6] {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    let r = h.finish().to_be_bytes();
    [(r[0] & 0xfc) | 0x02, r[1], r[2], r[3], r[4], r[5]]
}
