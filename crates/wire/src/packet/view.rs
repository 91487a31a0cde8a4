//! [`Packet`], the unvalidated view of a packet buffer (base-header getters and
//! setters, body slices and the CRC32C).

use zerocopy::FromBytes;

use super::{BASE_LEN, BaseHeader, PacketType, flags};
use crate::crc32c::Crc32c;
use crate::{Error, Result};

/// A read/write view of a packet buffer, in the style of `smoltcp::wire`.
///
/// Getters read the base header; on a buffer shorter than [`BASE_LEN`] they return 0
/// (and setters do nothing) instead of panicking, so even an unchecked view is safe on
/// network data. Use [`Packet::new_checked`] or [`Repr::parse`](super::Repr::parse) before trusting values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    pub(super) buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking anything.
    pub const fn new_unchecked(buffer: T) -> Self {
        Packet { buffer }
    }

    /// Wrap a buffer and [`check_len`](Self::check_len) it.
    pub fn new_checked(buffer: T) -> Result<Self> {
        let p = Packet { buffer };
        p.check_len()?;
        Ok(p)
    }

    /// Check that the buffer holds a base header and the whole packet its `len` field
    /// announces. After this, [`body`](Self::body) covers exactly the packet's body.
    pub fn check_len(&self) -> Result<()> {
        let buf = self.buffer.as_ref();
        if buf.len() < BASE_LEN {
            return Err(Error::Truncated);
        }
        let len = self.packet_len() as usize;
        if len < BASE_LEN {
            return Err(Error::BadLength);
        }
        if len > buf.len() {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Unwrap the buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The base header, if the buffer is long enough.
    pub fn header(&self) -> Option<&BaseHeader> {
        BaseHeader::ref_from_prefix(self.buffer.as_ref())
            .ok()
            .map(|(h, _)| h)
    }

    /// `magic` field.
    pub fn magic(&self) -> u16 {
        self.header().map_or(0, |h| h.magic.get())
    }
    /// `version` field.
    pub fn version(&self) -> u8 {
        self.header().map_or(0, |h| h.version)
    }
    /// Raw `type` field.
    pub fn packet_type_raw(&self) -> u8 {
        self.header().map_or(0, |h| h.ptype)
    }
    /// `type` field decoded; `None` if reserved or unknown.
    pub fn packet_type(&self) -> Option<PacketType> {
        PacketType::from_u8(self.packet_type_raw())
    }
    /// `flags` field.
    pub fn flags(&self) -> u16 {
        self.header().map_or(0, |h| h.flags.get())
    }
    /// `len` field (whole packet length).
    pub fn packet_len(&self) -> u16 {
        self.header().map_or(0, |h| h.len.get())
    }
    /// `src_ep` field.
    pub fn src_ep(&self) -> u16 {
        self.header().map_or(0, |h| h.src_ep.get())
    }
    /// `dst_ep` field.
    pub fn dst_ep(&self) -> u16 {
        self.header().map_or(0, |h| h.dst_ep.get())
    }
    /// `session` field.
    pub fn session(&self) -> u32 {
        self.header().map_or(0, |h| h.session.get())
    }
    /// `seq` field.
    pub fn seq(&self) -> u32 {
        self.header().map_or(0, |h| h.seq.get())
    }
    /// `checksum` field.
    pub fn checksum(&self) -> u32 {
        self.header().map_or(0, |h| h.checksum.get())
    }

    /// The bytes after the base header up to `len` (empty if the lengths are invalid).
    pub fn body(&self) -> &[u8] {
        let buf = self.buffer.as_ref();
        let end = (self.packet_len() as usize).min(buf.len());
        buf.get(BASE_LEN..end).unwrap_or(&[])
    }

    /// The CRC32C the `checksum` field should hold: over the first `len` bytes with the
    /// checksum field taken as zero. Call after [`check_len`](Self::check_len).
    pub fn compute_checksum(&self) -> u32 {
        let buf = self.buffer.as_ref();
        let end = (self.packet_len() as usize).min(buf.len());
        let mut c = Crc32c::new();
        c.update(buf.get(..20).unwrap_or(&[]));
        c.update(&[0; 4]);
        c.update(buf.get(BASE_LEN..end).unwrap_or(&[]));
        c.finish()
    }

    /// Whether the CRC flag is clear, or set and the checksum matches.
    pub fn verify_checksum(&self) -> bool {
        self.flags() & flags::CRC == 0 || self.compute_checksum() == self.checksum()
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Like [`body`](Packet::body) but borrowing for the buffer's lifetime, so a parsed
    /// [`Repr`](super::Repr) can point into the receive buffer.
    pub fn body_ref(&self) -> &'a [u8] {
        let buf: &'a [u8] = self.buffer.as_ref();
        let end = (self.packet_len() as usize).min(buf.len());
        buf.get(BASE_LEN..end).unwrap_or(&[])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    fn header_mut(&mut self) -> Option<&mut BaseHeader> {
        BaseHeader::mut_from_prefix(self.buffer.as_mut())
            .ok()
            .map(|(h, _)| h)
    }
    /// Set `magic`.
    pub fn set_magic(&mut self, v: u16) {
        if let Some(h) = self.header_mut() {
            h.magic.set(v)
        }
    }
    /// Set `version`.
    pub fn set_version(&mut self, v: u8) {
        if let Some(h) = self.header_mut() {
            h.version = v
        }
    }
    /// Set `type`.
    pub fn set_packet_type(&mut self, v: PacketType) {
        if let Some(h) = self.header_mut() {
            h.ptype = v as u8
        }
    }
    /// Set `flags`.
    pub fn set_flags(&mut self, v: u16) {
        if let Some(h) = self.header_mut() {
            h.flags.set(v)
        }
    }
    /// Set `len`.
    pub fn set_packet_len(&mut self, v: u16) {
        if let Some(h) = self.header_mut() {
            h.len.set(v)
        }
    }
    /// Set `src_ep`.
    pub fn set_src_ep(&mut self, v: u16) {
        if let Some(h) = self.header_mut() {
            h.src_ep.set(v)
        }
    }
    /// Set `dst_ep`.
    pub fn set_dst_ep(&mut self, v: u16) {
        if let Some(h) = self.header_mut() {
            h.dst_ep.set(v)
        }
    }
    /// Set `session`.
    pub fn set_session(&mut self, v: u32) {
        if let Some(h) = self.header_mut() {
            h.session.set(v)
        }
    }
    /// Set `seq`.
    pub fn set_seq(&mut self, v: u32) {
        if let Some(h) = self.header_mut() {
            h.seq.set(v)
        }
    }
    /// Set `checksum`.
    pub fn set_checksum(&mut self, v: u32) {
        if let Some(h) = self.header_mut() {
            h.checksum.set(v)
        }
    }
    /// Mutable body (after the base header, up to `len`).
    pub fn body_mut(&mut self) -> &mut [u8] {
        let end = self.packet_len() as usize;
        let buf = self.buffer.as_mut();
        let end = end.min(buf.len());
        buf.get_mut(BASE_LEN..end).unwrap_or(&mut [])
    }
    /// Write the CRC32C into `checksum` if the CRC flag is set, else zero it. Call after
    /// everything else (including the payload) has been written.
    pub fn fill_checksum(&mut self) {
        let c = if self.flags() & flags::CRC != 0 {
            self.compute_checksum()
        } else {
            0
        };
        self.set_checksum(c);
    }
}
