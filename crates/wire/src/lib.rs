//! The ofi-nostd wire protocol, version 1: packet formats, UDP/IPv4 framing and the link
//! traits every data plane implements.
//!
//! This crate is pure formats: no state, no I/O, no allocation, no `unsafe`, and no panic
//! on any input (every parser returns a typed [`Error`]). It exists as a crate of its own
//! so that data planes (kernel sockets, DPDK, firmware NIC drivers) can depend on the
//! link traits without depending on the protocol engine in `ofi-nostd`.
//!
//! * [`packet`] — our reliable-datagram protocol: the `zerocopy` header structs (explicit
//!   network byte order, no padding), the smoltcp-style [`packet::Packet`] view and the
//!   validated [`packet::Repr`]. `docs/wire-protocol.md` is the normative description and
//!   its hex examples are checked by this crate's tests.
//! * [`frame`] — Ethernet / IPv4 / UDP / ARP framing for raw links, built on
//!   `smoltcp::wire`, always verifying checksums on receive.
//! * [`link`] — the token-based link traits ([`link::Link`], [`link::RxToken`],
//!   [`link::TxToken`]) with burst variants, and an allocation-free in-memory
//!   [`link::Loopback`] for tests.
//! * [`seq`] — RFC 1982 serial-number arithmetic, selective-ack bitmaps and segmentation.
//! * [`crc32c`] — the optional protocol checksum for links without a UDP checksum.

#![no_std]
#![forbid(unsafe_code)]

#[cfg(test)]
extern crate std;

pub mod crc32c;
pub mod frame;
pub mod link;
pub mod packet;
pub mod seq;

#[cfg(test)]
mod tests;

pub use packet::{Body, Header, Packet, PacketType, Repr};

/// Every way a buffer can fail to be a valid packet or frame.
///
/// Receivers count each variant separately and drop the packet; none of them is ever a
/// reason to panic or to tear down a peer on its own (see "Invalid input" in
/// `docs/wire-protocol.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// The buffer ends before a header or a length field says it should.
    Truncated,
    /// The magic number is not ours: the datagram belongs to some other protocol.
    BadMagic,
    /// A protocol version this implementation does not speak.
    BadVersion,
    /// A packet type (or ARP/EtherType/IP protocol) that is reserved or unknown.
    UnknownType,
    /// A length field disagrees with the buffer or with another field.
    BadLength,
    /// The CRC32C, IPv4 header or UDP checksum does not match.
    BadChecksum,
    /// Flag bits that are reserved or not allowed on this packet type.
    BadFlags,
    /// A field holds a value the specification forbids (reserved field not zero, unknown
    /// enumeration value, inconsistent combination).
    Malformed,
    /// An emit target buffer is too small for the representation (a local bug, reported
    /// as a value instead of a panic).
    BufferTooSmall,
    /// A valid frame that is not for this stack (another EtherType, IP protocol, or an
    /// IPv4 fragment, which v1 never sends).
    NotOurs,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let s = match self {
            Error::Truncated => "truncated",
            Error::BadMagic => "bad magic",
            Error::BadVersion => "unsupported version",
            Error::UnknownType => "unknown or reserved type",
            Error::BadLength => "bad length",
            Error::BadChecksum => "bad checksum",
            Error::BadFlags => "bad flags",
            Error::Malformed => "malformed field",
            Error::BufferTooSmall => "buffer too small",
            Error::NotOurs => "not for this stack",
        };
        f.write_str(s)
    }
}

impl core::error::Error for Error {}

/// Shorthand for results whose error is this crate's [`Error`].
pub type Result<T> = core::result::Result<T, Error>;
