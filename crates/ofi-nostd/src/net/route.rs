//! Next-hop choice: which addresses are on the local subnet, which can be a unicast
//! source or destination on this link, and where a datagram goes first (the
//! destination itself, else the gateway). It depends on the configuration only.

use wire::frame::Ipv4Address;
use wire::link::Medium;

use super::NetConfig;
use crate::errno::{Errno, Result};

impl NetConfig {
    /// Whether `ip` is on the local subnet (`local_ip` / `prefix_len`).
    #[inline]
    pub(super) fn on_subnet(&self, ip: [u8; 4]) -> bool {
        let m = self.netmask();
        u32::from_be_bytes(ip) & m == u32::from_be_bytes(self.local_ip) & m
    }

    /// Whether `ip` can be a datagram's source or a unicast destination on this link.
    #[inline]
    pub(super) fn usable_unicast(&self, ip: [u8; 4]) -> bool {
        let a = Ipv4Address::from(ip);
        if a.is_unspecified() || a.is_broadcast() || a.is_multicast() {
            return false;
        }
        if self.medium == Medium::Udp {
            return true; // the kernel routes loopback and knows its broadcasts
        }
        let m = self.netmask();
        let directed_bcast =
            self.prefix_len <= 30 && self.on_subnet(ip) && u32::from_be_bytes(ip) | m == u32::MAX;
        !a.is_loopback() && !directed_bcast
    }

    /// The next hop for `dst`: itself on the local subnet, else the gateway
    /// (`EHOSTUNREACH` without one).
    pub(super) fn next_hop(&self, dst: [u8; 4]) -> Result<[u8; 4]> {
        if self.on_subnet(dst) {
            Ok(dst)
        } else {
            self.gateway.ok_or(Errno::EHOSTUNREACH)
        }
    }
}

#[cfg(test)]
mod tests {
    use wire::link::{Capabilities, Medium};

    use super::NetConfig;
    use crate::errno::Errno;

    fn cfg(medium: Medium, prefix_len: u8, gateway: Option<[u8; 4]>) -> NetConfig {
        NetConfig::new(&Capabilities::new(medium, 1500), [10, 0, 0, 1], 7000).with_ethernet(
            [2, 0, 0, 0, 0, 1],
            prefix_len,
            gateway,
        )
    }

    #[test]
    fn subnet_membership_follows_the_prefix() {
        let c = cfg(Medium::Ethernet, 24, None);
        assert!(c.on_subnet([10, 0, 0, 200]));
        assert!(!c.on_subnet([10, 0, 1, 2]));
        let host = cfg(Medium::Ethernet, 32, None);
        assert!(host.on_subnet([10, 0, 0, 1]));
        assert!(!host.on_subnet([10, 0, 0, 2]));
        let all = cfg(Medium::Ethernet, 0, None);
        assert!(all.on_subnet([192, 168, 1, 1]));
    }

    #[test]
    fn unusable_unicast_addresses() {
        let eth = cfg(Medium::Ethernet, 24, None);
        assert!(eth.usable_unicast([10, 0, 0, 2]));
        assert!(eth.usable_unicast([8, 8, 8, 8]));
        for ip in [
            [0, 0, 0, 0],
            [255, 255, 255, 255],
            [224, 0, 0, 1],
            [127, 0, 0, 1],
        ] {
            assert!(!eth.usable_unicast(ip), "{ip:?}");
        }
        // Our subnet's directed broadcast, except on /31 and /32 links.
        assert!(!eth.usable_unicast([10, 0, 0, 255]));
        assert!(cfg(Medium::Ethernet, 31, None).usable_unicast([10, 0, 0, 1]));
        // The kernel handles loopback and directed broadcasts on UDP links.
        let udp = cfg(Medium::Udp, 24, None);
        assert!(udp.usable_unicast([127, 0, 0, 1]));
        assert!(udp.usable_unicast([10, 0, 0, 255]));
        assert!(!udp.usable_unicast([255, 255, 255, 255]));
    }

    #[test]
    fn next_hop_is_the_destination_on_the_subnet_else_the_gateway() {
        let gw = cfg(Medium::Ethernet, 24, Some([10, 0, 0, 254]));
        assert_eq!(gw.next_hop([10, 0, 0, 9]), Ok([10, 0, 0, 9]));
        assert_eq!(gw.next_hop([192, 0, 2, 1]), Ok([10, 0, 0, 254]));
        let none = cfg(Medium::Ethernet, 24, None);
        assert_eq!(none.next_hop([192, 0, 2, 1]), Err(Errno::EHOSTUNREACH));
    }
}
