//! Which of the host's interfaces reaches a peer best: the one the kernel's route to it
//! leaves by. For a peer on this host that is the loopback device whatever address the
//! peer has (the kernel delivers to its own addresses through `lo`), so two local
//! processes use `lo`'s MTU (64 KiB) rather than the first real interface's (often
//! 1500 or less); for any other peer it is the interface owning the route's source
//! address. Shared by the provider's `getinfo` and `ofi-pingpong`.

use std::net::Ipv4Addr;

use dp_kernel::udp::{Route, route_to};

use crate::sysinfo::HostInterface;

/// The kernel's route to `dest` (source address and MTU), if it has one.
pub fn route(dest: Ipv4Addr) -> Option<Route> {
    route_to(dest).ok()
}

/// Whether `dest` is on this host: a loopback address or one of `host`'s.
pub fn is_local(dest: Ipv4Addr, host: &[HostInterface]) -> bool {
    dest.is_loopback() || host.iter().any(|i| i.ip == dest)
}

/// The index in `host` of the interface that reaches `dest` best: for a peer on this host
/// the first loopback interface; otherwise the one owning the kernel's source address for
/// `dest` (`route_source`, `None`: no route), else the first whose subnet holds `dest`.
pub fn best_interface(
    dest: Ipv4Addr,
    host: &[HostInterface],
    route_source: Option<Ipv4Addr>,
) -> Option<usize> {
    if is_local(dest, host) {
        return host.iter().position(|i| i.loopback);
    }
    let in_subnet = |i: &HostInterface| {
        let m = u32::from(i.netmask);
        m != 0 && u32::from(i.ip) & m == u32::from(dest) & m
    };
    route_source
        .and_then(|s| host.iter().position(|i| i.ip == s && !i.loopback))
        .or_else(|| host.iter().position(|i| !i.loopback && in_subnet(i)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iface(name: &str, ip: [u8; 4], prefix: u8, mtu: usize) -> HostInterface {
        let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
        HostInterface {
            name: name.into(),
            ip: ip.into(),
            netmask: mask.into(),
            prefix_len: prefix,
            mtu,
            loopback: name == "lo",
        }
    }

    fn host() -> Vec<HostInterface> {
        vec![
            iface("eth0", [192, 0, 2, 2], 24, 1400),
            iface("eth1", [10, 9, 0, 5], 16, 9000),
            iface("lo", [127, 0, 0, 1], 8, 65536),
        ]
    }

    #[test]
    fn a_peer_on_this_host_is_reached_through_loopback() {
        let h = host();
        // Any of our own addresses, or 127/8: `lo`, not the interface owning it.
        for dest in [
            [192, 0, 2, 2],
            [10, 9, 0, 5],
            [127, 0, 0, 1],
            [127, 1, 2, 3],
        ] {
            let d = Ipv4Addr::from(dest);
            assert!(is_local(d, &h), "{d}");
            assert_eq!(best_interface(d, &h, Some(d)), Some(2), "{d}");
        }
        // No loopback interface listed (FI_NOSTD_IFACE=eth0): none is better.
        assert_eq!(best_interface([192, 0, 2, 2].into(), &h[..2], None), None);
    }

    #[test]
    fn a_remote_peer_is_reached_by_the_routes_interface_else_its_subnets() {
        let h = host();
        let far = Ipv4Addr::new(198, 51, 100, 7);
        assert!(!is_local(far, &h));
        assert_eq!(best_interface(far, &h, Some([10, 9, 0, 5].into())), Some(1));
        assert_eq!(best_interface([10, 9, 200, 1].into(), &h, None), Some(1));
        assert_eq!(best_interface([192, 0, 2, 99].into(), &h, None), Some(0));
        assert_eq!(best_interface(far, &h, None), None);
    }

    /// The kernel's own route: 127.0.0.1 leaves by `lo`, with its MTU (as IPv4 caps it).
    #[test]
    fn the_route_to_loopback_has_the_loopback_mtu() {
        let r = route(Ipv4Addr::LOCALHOST).expect("a route to 127.0.0.1");
        assert_eq!(r.source, Ipv4Addr::LOCALHOST);
        let lo = std::fs::read_to_string("/sys/class/net/lo/mtu")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok());
        // IPv4 caps a route's MTU at 65 535 (`lo` says 65 536).
        assert_eq!(Some(r.mtu), lo.map(|m| m.min(65_535)));
    }
}
