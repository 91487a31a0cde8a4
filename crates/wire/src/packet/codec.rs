//! The cursor types every family's parse and emit use: [`Reader`] takes fixed headers
//! and optional fields off the front of a body, [`Writer`] appends them.

use zerocopy::network_endian::U64;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::{Error, Result};

/// Reads a packet body front to back; what is left after the headers is the payload.
pub(super) struct Reader<'a> {
    /// The bytes not read yet.
    pub(super) buf: &'a [u8],
    /// ACK bodies are in their short form (flag `SHORT_ACK`).
    pub(super) short_ack: bool,
}

impl<'a> Reader<'a> {
    /// The next fixed header ([`Error::Truncated`] if the body ends first).
    pub(super) fn take<H: FromBytes + KnownLayout + Immutable + Unaligned>(
        &mut self,
    ) -> Result<&'a H> {
        let (h, rest) = H::ref_from_prefix(self.buf).map_err(|_| Error::Truncated)?;
        self.buf = rest;
        Ok(h)
    }
    /// An optional 64-bit field (tag, CQ data), there when its flag is.
    pub(super) fn opt_u64(&mut self, present: bool) -> Result<Option<u64>> {
        if present {
            Ok(Some(self.take::<U64>()?.get()))
        } else {
            Ok(None)
        }
    }
    /// The next `N` bytes (the handshake MAC).
    pub(super) fn bytes<const N: usize>(&mut self) -> Result<[u8; N]> {
        Ok(*self.take::<[u8; N]>()?)
    }
    /// [`Error::BadLength`] unless the body is used up (types without a payload).
    pub(super) fn end(&self) -> Result<()> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(Error::BadLength)
        }
    }
}

/// Writes a packet front to back into a buffer of the packet's exact length.
pub(super) struct Writer<'b> {
    /// The packet's bytes.
    pub(super) buf: &'b mut [u8],
    /// Bytes written so far.
    pub(super) pos: usize,
}

impl Writer<'_> {
    /// Appends `bytes` ([`Error::BufferTooSmall`] past the end).
    pub(super) fn put(&mut self, bytes: &[u8]) -> Result<()> {
        let end = self
            .pos
            .checked_add(bytes.len())
            .ok_or(Error::BufferTooSmall)?;
        let dst = self
            .buf
            .get_mut(self.pos..end)
            .ok_or(Error::BufferTooSmall)?;
        dst.copy_from_slice(bytes);
        self.pos = end;
        Ok(())
    }
    /// Appends a fixed header.
    pub(super) fn put_hdr<H: IntoBytes + Immutable>(&mut self, h: &H) -> Result<()> {
        self.put(h.as_bytes())
    }
    /// Appends an optional 64-bit field if present.
    pub(super) fn opt_u64(&mut self, v: Option<u64>) -> Result<()> {
        match v {
            Some(v) => self.put(&v.to_be_bytes()),
            None => Ok(()),
        }
    }
}

/// Whether `len` bytes at `offset` end within `total`.
pub(super) fn fits(offset: u64, len: usize, total: u64) -> bool {
    offset
        .checked_add(len as u64)
        .is_some_and(|end| end <= total)
}

/// [`Error::Malformed`] unless `ok`: the answer for a combination of fields the
/// specification forbids.
pub(super) fn ensure(ok: bool) -> Result<()> {
    if ok { Ok(()) } else { Err(Error::Malformed) }
}
