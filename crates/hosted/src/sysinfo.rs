//! What the core's `getinfo` needs to know about the host: its IPv4 interfaces and a
//! host-name resolver.
//!
//! [`host_interfaces`] lists the IPv4 addresses of the interfaces that are up (via
//! `getifaddrs(3)`, through the `if-addrs` crate), with each interface's MTU and flags from
//! `/sys/class/net/<if>/`. [`StdResolver`] resolves host names with std's
//! [`ToSocketAddrs`] (i.e. `getaddrinfo(3)`), keeping only IPv4 answers.
//!
//! ```no_run
//! use hosted::ofi_nostd::info::{Provider, ProviderConfig};
//! use hosted::sysinfo::{StdResolver, host_interfaces};
//!
//! let host = host_interfaces()?;
//! let ifaces: Vec<_> = host.iter().map(|i| i.as_interface()).collect();
//! let prov = Provider {
//!     cfg: ProviderConfig::DEFAULT,
//!     interfaces: &ifaces,
//!     resolver: &StdResolver,
//! };
//! # let _ = prov;
//! # Ok::<(), std::io::Error>(())
//! ```

use ofi_nostd::info::{Interface, Resolver};
use std::io;
use std::net::{IpAddr, Ipv4Addr, ToSocketAddrs};
use std::path::{Path, PathBuf};

/// MTU assumed when `/sys/class/net/<if>/mtu` cannot be read (Ethernet's).
pub const DEFAULT_MTU: usize = 1500;

/// `IFF_UP` in `/sys/class/net/<if>/flags`.
const IFF_UP: u32 = 0x1;
/// `IFF_LOOPBACK` in `/sys/class/net/<if>/flags`.
const IFF_LOOPBACK: u32 = 0x8;

/// One IPv4 address of a host interface, with what the provider needs about the link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostInterface {
    /// Interface name as `getifaddrs` reports it (an address label such as `eth0:1` for a
    /// secondary address); becomes the domain name.
    pub name: String,
    /// IPv4 address.
    pub ip: Ipv4Addr,
    /// Subnet mask.
    pub netmask: Ipv4Addr,
    /// Subnet prefix length (the number of leading one bits of `netmask`; 0 when the mask
    /// is not contiguous).
    pub prefix_len: u8,
    /// Link MTU in bytes, from `/sys/class/net/<if>/mtu` ([`DEFAULT_MTU`] if unreadable).
    pub mtu: usize,
    /// A loopback interface (IFF_LOOPBACK, or a 127/8 address).
    pub loopback: bool,
}

impl HostInterface {
    /// The core's view of this interface, borrowing the name.
    pub fn as_interface(&self) -> Interface<'_> {
        Interface {
            name: &self.name,
            ip: self.ip.octets(),
            prefix_len: self.prefix_len,
            mtu: self.mtu,
            loopback: self.loopback,
        }
    }
}

/// The prefix length of a contiguous netmask (`255.255.255.0` → 24); 0 for a
/// non-contiguous one.
pub fn prefix_len(netmask: Ipv4Addr) -> u8 {
    let m = u32::from(netmask);
    let ones = m.leading_ones();
    if m.checked_shl(ones).unwrap_or(0) == 0 {
        ones as u8
    } else {
        0
    }
}

/// The IPv4 addresses of the host's interfaces that are up, non-loopback interfaces
/// first, otherwise in `getifaddrs` order (the order the provider offers them in).
pub fn host_interfaces() -> io::Result<Vec<HostInterface>> {
    host_interfaces_in(Path::new("/sys/class/net"))
}

/// [`host_interfaces`], reading link attributes from `sysfs_net` instead of
/// `/sys/class/net`.
pub fn host_interfaces_in(sysfs_net: &Path) -> io::Result<Vec<HostInterface>> {
    let mut out: Vec<HostInterface> = Vec::new();
    for iface in if_addrs::get_if_addrs()? {
        let IpAddr::V4(ip) = iface.ip() else {
            continue;
        };
        let netmask = match &iface.addr {
            if_addrs::IfAddr::V4(a) => a.netmask,
            if_addrs::IfAddr::V6(_) => continue,
        };
        let link = LinkAttrs::read(sysfs_net, &iface.name);
        if !link.up {
            continue;
        }
        out.push(HostInterface {
            name: iface.name,
            ip,
            netmask,
            prefix_len: prefix_len(netmask),
            mtu: link.mtu,
            loopback: link.loopback || ip.is_loopback(),
        });
    }
    // Stable: keeps getifaddrs order within each group.
    out.sort_by_key(|i| i.loopback);
    Ok(out)
}

/// What sysfs says about a link.
struct LinkAttrs {
    up: bool,
    loopback: bool,
    mtu: usize,
}

impl LinkAttrs {
    /// Reads `<sysfs_net>/<device>/{flags,mtu}`; an address label (`eth0:1`) reads its
    /// device (`eth0`). Unreadable attributes count as up, not loopback, [`DEFAULT_MTU`].
    fn read(sysfs_net: &Path, name: &str) -> LinkAttrs {
        let device = name.split_once(':').map_or(name, |(d, _)| d);
        let dir: PathBuf = sysfs_net.join(device);
        let flags = read_trimmed(&dir.join("flags")).and_then(|s| {
            u32::from_str_radix(s.trim_start_matches("0x").trim_start_matches("0X"), 16).ok()
        });
        let mtu = read_trimmed(&dir.join("mtu"))
            .and_then(|s| s.parse::<usize>().ok())
            .filter(|&m| m > 0)
            .unwrap_or(DEFAULT_MTU);
        LinkAttrs {
            up: flags.is_none_or(|f| f & IFF_UP != 0),
            loopback: flags.is_some_and(|f| f & IFF_LOOPBACK != 0),
            mtu,
        }
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

/// A [`Resolver`] using std's [`ToSocketAddrs`] (`getaddrinfo`): the first IPv4 address
/// of the name, IPv6 answers ignored.
#[derive(Debug, Clone, Copy, Default)]
pub struct StdResolver;

impl Resolver for StdResolver {
    fn resolve(&self, host: &str) -> Option<[u8; 4]> {
        (host, 0u16)
            .to_socket_addrs()
            .ok()?
            .find_map(|a| match a.ip() {
                IpAddr::V4(ip) => Some(ip.octets()),
                IpAddr::V6(_) => None,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_lengths() {
        assert_eq!(prefix_len(Ipv4Addr::new(255, 255, 255, 0)), 24);
        assert_eq!(prefix_len(Ipv4Addr::new(255, 0, 0, 0)), 8);
        assert_eq!(prefix_len(Ipv4Addr::new(255, 255, 255, 255)), 32);
        assert_eq!(prefix_len(Ipv4Addr::new(0, 0, 0, 0)), 0);
        assert_eq!(prefix_len(Ipv4Addr::new(255, 255, 128, 0)), 17);
        assert_eq!(prefix_len(Ipv4Addr::new(255, 0, 255, 0)), 0);
    }

    #[test]
    fn link_attrs_from_sysfs() {
        let dir = std::env::temp_dir().join(format!("hosted-sysinfo-{}", std::process::id()));
        let eth = dir.join("eth7");
        std::fs::create_dir_all(&eth).unwrap();
        std::fs::write(eth.join("flags"), "0x1003\n").unwrap();
        std::fs::write(eth.join("mtu"), "9000\n").unwrap();
        let lo = dir.join("lo");
        std::fs::create_dir_all(&lo).unwrap();
        std::fs::write(lo.join("flags"), "0x9\n").unwrap();
        std::fs::write(lo.join("mtu"), "65536\n").unwrap();
        let down = dir.join("down0");
        std::fs::create_dir_all(&down).unwrap();
        std::fs::write(down.join("flags"), "0x1002\n").unwrap();

        let a = LinkAttrs::read(&dir, "eth7:1");
        assert!(a.up && !a.loopback);
        assert_eq!(a.mtu, 9000);
        let a = LinkAttrs::read(&dir, "lo");
        assert!(a.up && a.loopback);
        assert_eq!(a.mtu, 65536);
        let a = LinkAttrs::read(&dir, "down0");
        assert!(!a.up);
        assert_eq!(a.mtu, DEFAULT_MTU);
        let a = LinkAttrs::read(&dir, "missing");
        assert!(a.up && !a.loopback);
        assert_eq!(a.mtu, DEFAULT_MTU);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn host_has_loopback_last() {
        let ifaces = host_interfaces().unwrap();
        if let Some(first_lo) = ifaces.iter().position(|i| i.loopback) {
            assert!(ifaces[first_lo..].iter().all(|i| i.loopback));
        }
        for i in &ifaces {
            assert!(i.mtu > 0);
            assert_eq!(i.as_interface().ip, i.ip.octets());
        }
    }

    #[test]
    fn resolver_numeric_and_localhost() {
        assert_eq!(StdResolver.resolve("127.0.0.1"), Some([127, 0, 0, 1]));
        assert_eq!(StdResolver.resolve("nosuchhost.invalid"), None);
    }
}
