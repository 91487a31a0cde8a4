//! Endpoint addresses.
//!
//! An ofi-nostd endpoint is named by an IPv4 address, a UDP port and a 16-bit endpoint
//! id (several endpoints may share one port or NIC queue). Its native address format is
//! FI_SOCKADDR_IN: a 16-byte `struct sockaddr_in` whose `sin_zero[0..2]` carries the
//! endpoint id in network byte order, so a plain sockaddr_in names endpoint 0.

/// `AF_INET`, as `sin_family` carries it.
pub const AF_INET: u16 = 2;

/// Length of the native address (`sizeof(struct sockaddr_in)`).
pub const ADDR_LEN: usize = 16;

/// The address of one endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct EpAddr {
    /// IPv4 address, in the order it is written (`[127, 0, 0, 1]`).
    pub ip: [u8; 4],
    /// UDP port.
    pub port: u16,
    /// Endpoint id within that port.
    pub ep_id: u16,
}

impl EpAddr {
    /// An address from its parts.
    pub const fn new(ip: [u8; 4], port: u16, ep_id: u16) -> Self {
        EpAddr { ip, port, ep_id }
    }

    /// The address as a `struct sockaddr_in` in this machine's layout (`sin_family` in
    /// host order, port and address in network order, endpoint id in `sin_zero`).
    pub fn to_sockaddr_in(&self) -> [u8; ADDR_LEN] {
        let mut b = [0u8; ADDR_LEN];
        b[0..2].copy_from_slice(&AF_INET.to_ne_bytes());
        b[2..4].copy_from_slice(&self.port.to_be_bytes());
        b[4..8].copy_from_slice(&self.ip);
        b[8..10].copy_from_slice(&self.ep_id.to_be_bytes());
        b
    }

    /// Parses a `struct sockaddr_in`; `None` if it is too short or not `AF_INET`.
    pub fn from_sockaddr_in(b: &[u8]) -> Option<Self> {
        let b: &[u8; ADDR_LEN] = b.get(..ADDR_LEN)?.try_into().ok()?;
        if u16::from_ne_bytes([b[0], b[1]]) != AF_INET {
            return None;
        }
        Some(EpAddr {
            port: u16::from_be_bytes([b[2], b[3]]),
            ip: [b[4], b[5], b[6], b[7]],
            ep_id: u16::from_be_bytes([b[8], b[9]]),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockaddr_in_round_trip() {
        let a = EpAddr::new([10, 1, 2, 3], 4791, 7);
        let b = a.to_sockaddr_in();
        assert_eq!(&b[2..4], &[0x12, 0xb7]);
        assert_eq!(EpAddr::from_sockaddr_in(&b), Some(a));
        assert_eq!(EpAddr::from_sockaddr_in(&b[..15]), None);
        let mut bad = b;
        bad[0] = 10;
        bad[1] = 0;
        assert_eq!(EpAddr::from_sockaddr_in(&bad), None);
    }
}
