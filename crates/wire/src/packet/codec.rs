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

#[cfg(test)]
mod tests {
    use zerocopy::network_endian::U32;

    use super::*;

    #[test]
    fn reader_takes_headers_and_optional_fields_in_order() {
        let bytes = [0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 9, 0xaa];
        let mut r = Reader {
            buf: &bytes,
            short_ack: false,
        };
        assert_eq!(r.take::<U32>().map(|v| v.get()), Ok(7));
        assert_eq!(r.opt_u64(false), Ok(None));
        assert_eq!(r.opt_u64(true), Ok(Some(9)));
        assert_eq!(r.end(), Err(Error::BadLength), "a byte is left");
        assert_eq!(r.bytes::<1>(), Ok([0xaa]));
        assert_eq!(r.end(), Ok(()));
        assert_eq!(r.take::<U32>().map(|v| v.get()), Err(Error::Truncated));
    }

    #[test]
    fn writer_refuses_to_pass_the_end() {
        let mut buf = [0u8; 10];
        let mut w = Writer {
            buf: &mut buf,
            pos: 0,
        };
        assert_eq!(w.opt_u64(Some(0x0102_0304_0506_0708)), Ok(()));
        assert_eq!(w.opt_u64(None), Ok(()));
        assert_eq!(w.put_hdr(&U32::new(1)), Err(Error::BufferTooSmall));
        assert_eq!(w.put(&[1, 2]), Ok(()));
        assert_eq!((w.pos, buf), (10, [1, 2, 3, 4, 5, 6, 7, 8, 1, 2]));
    }

    #[test]
    fn fits_and_ensure() {
        assert!(fits(0, 0, 0));
        assert!(fits(4, 6, 10));
        assert!(!fits(5, 6, 10));
        assert!(!fits(u64::MAX, 1, u64::MAX), "no overflow");
        assert_eq!(ensure(true), Ok(()));
        assert_eq!(ensure(false), Err(Error::Malformed));
    }
}
