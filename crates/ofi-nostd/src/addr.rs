//! Endpoint addresses.
//!
//! An ofi-nostd endpoint is named by an IPv4 address, a UDP port and a 16-bit endpoint
//! id (several endpoints may share one port or NIC queue). Its native address format is
//! FI_SOCKADDR_IN: a 16-byte `struct sockaddr_in` whose `sin_zero[0..2]` carries the
//! endpoint id in network byte order, so a plain sockaddr_in names endpoint 0.

use core::fmt;

use crate::errno::{Errno, Result};

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

/// The scheme of an FI_ADDR_STR address in FI_SOCKADDR_IN form, as libfabric's
/// `ofi_straddr` prints it and `ofi_str_toaddr` parses it (matched case-insensitively).
pub const ADDR_STR_SCHEME: &str = "fi_sockaddr_in";

/// Longest string form of an [`EpAddr`], including the terminating NUL:
/// `fi_sockaddr_in://255.255.255.255:65535:65535` plus NUL.
pub const ADDR_STR_MAX: usize = 45;

impl EpAddr {
    /// Whether this can name a peer: libfabric's `ip_av_valid_addr` refuses the
    /// wildcard address `0.0.0.0` and port 0, and so do we.
    pub const fn is_valid_peer(&self) -> bool {
        u32::from_be_bytes(self.ip) != 0 && self.port != 0
    }

    /// The address packed into 64 bits (IPv4 in the high half, then port, then endpoint
    /// id): a lossless key for hash indexes.
    pub const fn to_u64(&self) -> u64 {
        ((u32::from_be_bytes(self.ip) as u64) << 32)
            | ((self.port as u64) << 16)
            | self.ep_id as u64
    }

    /// Writes the FI_ADDR_STR form (see the [`fmt::Display`] impl) into `buf` with
    /// `fi_av_straddr`'s rule: at most `buf.len() - 1` characters and always a NUL in
    /// the buffer when it is not empty; returns the size needed for the whole string
    /// including its NUL, which may exceed `buf.len()` (truncation is not an error).
    pub fn straddr(&self, buf: &mut [u8]) -> usize {
        let mut w = TruncWriter::new(buf);
        // TruncWriter never fails; it counts what did not fit.
        let _ = fmt::write(&mut w, format_args!("{self}"));
        w.finish()
    }

    /// Parses an FI_ADDR_STR address of the FI_SOCKADDR_IN family, accepting every form
    /// libfabric's `ofi_str_toaddr` accepts for it — `fi_sockaddr_in://IP:PORT`,
    /// `fi_sockaddr_in://IP` (port 0) and `fi_sockaddr_in://:PORT` (address 0.0.0.0) —
    /// plus our endpoint-id suffix `fi_sockaddr_in://IP:PORT:EPID`. The scheme is
    /// case-insensitive; the IP must be a dotted quad (`inet_pton` rules), numbers are
    /// decimal. Anything else is -FI_EINVAL.
    pub fn parse_addr_str(s: &str) -> Result<EpAddr> {
        let (scheme, rest) = s.split_once("://").ok_or(Errno::EINVAL)?;
        if !scheme.eq_ignore_ascii_case(ADDR_STR_SCHEME) {
            return Err(Errno::EINVAL);
        }
        let mut parts = rest.split(':');
        let host = parts.next().unwrap_or("");
        let ip = if host.is_empty() {
            [0; 4]
        } else {
            parse_ipv4(host).ok_or(Errno::EINVAL)?
        };
        let port = match parts.next() {
            Some(p) => parse_decimal_u16(p).ok_or(Errno::EINVAL)?,
            None if host.is_empty() => return Err(Errno::EINVAL),
            None => 0,
        };
        let ep_id = match parts.next() {
            Some(e) => parse_decimal_u16(e).ok_or(Errno::EINVAL)?,
            None => 0,
        };
        if parts.next().is_some() {
            return Err(Errno::EINVAL);
        }
        Ok(EpAddr { ip, port, ep_id })
    }
}

/// The FI_ADDR_STR form: `fi_sockaddr_in://10.0.0.1:4791` exactly as libfabric's
/// `ofi_straddr` prints a `sockaddr_in`, with `:EPID` appended only when the endpoint
/// id is not 0 (so a plain sockaddr_in prints exactly as libfabric prints it, and
/// libfabric's own parser, which stops after the port, still reads the IP and port).
impl fmt::Display for EpAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d] = self.ip;
        write!(f, "{ADDR_STR_SCHEME}://{a}.{b}.{c}.{d}:{}", self.port)?;
        if self.ep_id != 0 {
            write!(f, ":{}", self.ep_id)?;
        }
        Ok(())
    }
}

/// Parses a numeric IPv4 address as `inet_pton(AF_INET)` does: exactly four decimal
/// parts `0..=255` separated by dots, no leading zeros, no signs or spaces.
pub fn parse_ipv4(s: &str) -> Option<[u8; 4]> {
    let mut out = [0u8; 4];
    let mut parts = s.split('.');
    for o in &mut out {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 3 || (p.len() > 1 && p.starts_with('0')) {
            return None;
        }
        let mut v: u16 = 0;
        for c in p.bytes() {
            if !c.is_ascii_digit() {
                return None;
            }
            v = v * 10 + u16::from(c - b'0');
        }
        *o = u8::try_from(v).ok()?;
    }
    parts.next().is_none().then_some(out)
}

/// Parses a `service` string as a UDP port the way `getaddrinfo` does for numeric
/// services: decimal digits only. Returns -FI_EINVAL for an out-of-range or empty
/// number and -FI_ENOSYS for a service *name* (`"http"`): the core has no services
/// database; the hosted adapter resolves names before calling in.
pub fn parse_service(s: &str) -> Result<u16> {
    if s.is_empty() {
        return Err(Errno::EINVAL);
    }
    if !s.bytes().all(|c| c.is_ascii_digit()) {
        return Err(Errno::ENOSYS);
    }
    parse_decimal_u16(s).ok_or(Errno::EINVAL)
}

/// A decimal `u16` (digits only, at least one, leading zeros allowed as `strtoul` does).
fn parse_decimal_u16(s: &str) -> Option<u16> {
    if s.is_empty() || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let digits = s.trim_start_matches('0');
    if digits.len() > 5 {
        return None;
    }
    let mut v: u32 = 0;
    for c in digits.bytes() {
        v = v * 10 + u32::from(c - b'0');
    }
    u16::try_from(v).ok()
}

/// Copies the string `s` into `buf` with `fi_av_straddr`'s truncation rule (at most
/// `buf.len() - 1` bytes, then a NUL) and returns the size needed including the NUL:
/// what `fi_av_straddr` does for FI_ADDR_STR addresses.
pub fn straddr_str(s: &str, buf: &mut [u8]) -> usize {
    let mut w = TruncWriter::new(buf);
    let _ = fmt::Write::write_str(&mut w, s);
    w.finish()
}

/// A `fmt::Write` into a fixed buffer that keeps room for a NUL, silently drops what
/// does not fit and counts the full length (snprintf semantics, without alloc).
struct TruncWriter<'a> {
    buf: &'a mut [u8],
    written: usize,
    total: usize,
}

impl<'a> TruncWriter<'a> {
    fn new(buf: &'a mut [u8]) -> Self {
        TruncWriter {
            buf,
            written: 0,
            total: 0,
        }
    }

    /// NUL-terminates what was written; returns the needed size including the NUL.
    fn finish(self) -> usize {
        if let Some(last) = self.buf.len().checked_sub(1) {
            self.buf[self.written.min(last)] = 0;
        }
        self.total + 1
    }
}

impl fmt::Write for TruncWriter<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let room = self
            .buf
            .len()
            .saturating_sub(1)
            .saturating_sub(self.written);
        let n = room.min(s.len());
        self.buf[self.written..self.written + n].copy_from_slice(&s.as_bytes()[..n]);
        self.written += n;
        self.total += s.len();
        Ok(())
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

    #[test]
    fn straddr_matches_libfabric_format() {
        let a = EpAddr::new([1, 2, 3, 4], 5678, 0);
        let mut buf = [0xffu8; 64];
        let n = a.straddr(&mut buf);
        let s = b"fi_sockaddr_in://1.2.3.4:5678";
        assert_eq!(n, s.len() + 1);
        assert_eq!(&buf[..s.len()], s);
        assert_eq!(buf[s.len()], 0);
        let b = EpAddr::new([10, 0, 0, 1], 4791, 7);
        let n = b.straddr(&mut buf);
        assert_eq!(&buf[..n], b"fi_sockaddr_in://10.0.0.1:4791:7\0");
        let max = EpAddr::new([255; 4], 65535, 65535);
        assert_eq!(max.straddr(&mut buf), ADDR_STR_MAX);
    }

    #[test]
    fn straddr_truncates_and_reports_needed_len() {
        let a = EpAddr::new([1, 2, 3, 4], 5678, 0);
        let needed = "fi_sockaddr_in://1.2.3.4:5678".len() + 1;
        let mut small = [0xffu8; 8];
        assert_eq!(a.straddr(&mut small), needed);
        assert_eq!(&small, b"fi_sock\0");
        let mut one = [0xffu8; 1];
        assert_eq!(a.straddr(&mut one), needed);
        assert_eq!(one, [0]);
        assert_eq!(a.straddr(&mut []), needed);
        let mut exact = [0xffu8; 30];
        assert_eq!(a.straddr(&mut exact), 30);
        assert_eq!(exact[29], 0);
        let mut short_by_one = [0xffu8; 29];
        assert_eq!(a.straddr(&mut short_by_one), 30);
        assert_eq!(&short_by_one[..28], b"fi_sockaddr_in://1.2.3.4:567");
        assert_eq!(short_by_one[28], 0);
        let mut buf = [0xffu8; 4];
        assert_eq!(straddr_str("abcdef", &mut buf), 7);
        assert_eq!(&buf, b"abc\0");
    }

    #[test]
    fn parse_addr_str_forms() {
        let p = EpAddr::parse_addr_str;
        assert_eq!(
            p("fi_sockaddr_in://1.2.3.4:5678"),
            Ok(EpAddr::new([1, 2, 3, 4], 5678, 0))
        );
        assert_eq!(
            p("FI_SOCKADDR_IN://1.2.3.4:5678:9"),
            Ok(EpAddr::new([1, 2, 3, 4], 5678, 9))
        );
        assert_eq!(
            p("fi_sockaddr_in://1.2.3.4"),
            Ok(EpAddr::new([1, 2, 3, 4], 0, 0))
        );
        assert_eq!(p("fi_sockaddr_in://:80"), Ok(EpAddr::new([0; 4], 80, 0)));
        for bad in [
            "fi_sockaddr_in6://1.2.3.4:5",
            "1.2.3.4:5",
            "fi_sockaddr_in://",
            "fi_sockaddr_in://1.2.3:5",
            "fi_sockaddr_in://1.2.3.256:5",
            "fi_sockaddr_in://1.2.3.4:65536",
            "fi_sockaddr_in://1.2.3.4:5:6:7",
            "fi_sockaddr_in://1.2.3.4:",
            "fi_sockaddr_in://1.2.3.4:x",
            "fi_sockaddr_in://host:5",
        ] {
            assert_eq!(p(bad), Err(Errno::EINVAL), "{bad}");
        }
        let a = EpAddr::new([192, 168, 7, 9], 1, 65535);
        let mut buf = [0u8; ADDR_STR_MAX];
        let n = a.straddr(&mut buf);
        let s = core::str::from_utf8(&buf[..n - 1]).unwrap();
        assert_eq!(p(s), Ok(a), "round trip");
    }

    #[test]
    fn ipv4_and_service_parsing() {
        assert_eq!(parse_ipv4("0.0.0.0"), Some([0; 4]));
        assert_eq!(parse_ipv4("255.255.255.255"), Some([255; 4]));
        for bad in [
            "",
            "1.2.3",
            "1.2.3.4.5",
            "01.2.3.4",
            "1.2.3.256",
            "1..3.4",
            " 1.2.3.4",
            "1.2.3.-4",
            "1.2.3.4 ",
        ] {
            assert_eq!(parse_ipv4(bad), None, "{bad}");
        }
        assert_eq!(parse_service("0"), Ok(0));
        assert_eq!(parse_service("65535"), Ok(65535));
        assert_eq!(parse_service("0065535"), Ok(65535));
        assert_eq!(parse_service("99999999999999999999"), Err(Errno::EINVAL));
        assert_eq!(parse_service("65536"), Err(Errno::EINVAL));
        assert_eq!(parse_service(""), Err(Errno::EINVAL));
        assert_eq!(parse_service("http"), Err(Errno::ENOSYS));
        assert_eq!(parse_service("-1"), Err(Errno::ENOSYS));
    }

    #[test]
    fn peer_validity_and_key() {
        assert!(EpAddr::new([1, 0, 0, 0], 1, 0).is_valid_peer());
        assert!(!EpAddr::new([0; 4], 1, 0).is_valid_peer());
        assert!(!EpAddr::new([1, 0, 0, 0], 0, 0).is_valid_peer());
        assert_eq!(
            EpAddr::new([1, 2, 3, 4], 0x5566, 0x7788).to_u64(),
            0x0102_0304_5566_7788
        );
    }
}
