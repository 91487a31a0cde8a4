//! The per-packet MAC trailer (spec 4.10): where its 16 bytes sit (right after `len`,
//! outside the packet proper, so every type's length rules stay as they are) and the
//! flag that announces it. The core computes and checks the MAC; this module only
//! finds the bytes, validated against the datagram.

use super::base::{BASE_LEN, flags};
use super::view::Packet;
use crate::{Error, Result};

/// Length of the MAC trailer.
pub const TRAILER_LEN: usize = 16;

/// Whether the packet at the start of `buf` announces a MAC trailer (flag `MAC`).
/// `false` for a buffer too short to hold a base header.
#[inline]
pub fn has_mac(buf: &[u8]) -> bool {
    buf.len() >= BASE_LEN && Packet::new_unchecked(buf).flags() & flags::MAC != 0
}

/// Sets flag `MAC` on the packet at the start of `buf` (before its checksum is filled:
/// the CRC covers the flags). Does nothing to a buffer shorter than a base header.
#[inline]
pub fn set_mac_flag(buf: &mut [u8]) {
    if buf.len() >= BASE_LEN {
        let mut p = Packet::new_unchecked(buf);
        let f = p.flags();
        p.set_flags(f | flags::MAC);
    }
}

/// The packet bytes a MAC covers (`0 .. len`) and its trailer, from a received
/// datagram. [`Error::Malformed`] without flag `MAC`, [`Error::BadLength`] for a `len`
/// below the base header, [`Error::Truncated`] when the datagram ends before
/// `len + TRAILER_LEN`.
pub fn split(buf: &[u8]) -> Result<(&[u8], &[u8; TRAILER_LEN])> {
    if buf.len() < BASE_LEN {
        return Err(Error::Truncated);
    }
    if !has_mac(buf) {
        return Err(Error::Malformed);
    }
    let len = Packet::new_unchecked(buf).packet_len() as usize;
    if len < BASE_LEN {
        return Err(Error::BadLength);
    }
    let (signed, rest) = buf.split_at_checked(len).ok_or(Error::Truncated)?;
    let tag = rest
        .get(..TRAILER_LEN)
        .and_then(|t| <&[u8; TRAILER_LEN]>::try_from(t).ok())
        .ok_or(Error::Truncated)?;
    Ok((signed, tag))
}

/// The same split of a buffer being sent: the packet (`0 .. len`) and the trailer to
/// fill. [`Error::BufferTooSmall`] when the buffer has no room for it.
pub fn split_mut(buf: &mut [u8]) -> Result<(&[u8], &mut [u8; TRAILER_LEN])> {
    if buf.len() < BASE_LEN {
        return Err(Error::BufferTooSmall);
    }
    let len = Packet::new_unchecked(&*buf).packet_len() as usize;
    if len < BASE_LEN {
        return Err(Error::BadLength);
    }
    let (signed, rest) = buf.split_at_mut_checked(len).ok_or(Error::BufferTooSmall)?;
    let tag = rest
        .get_mut(..TRAILER_LEN)
        .and_then(|t| <&mut [u8; TRAILER_LEN]>::try_from(t).ok())
        .ok_or(Error::BufferTooSmall)?;
    Ok((signed, tag))
}

#[cfg(test)]
mod tests;
