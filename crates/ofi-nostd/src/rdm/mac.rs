//! The per-packet MAC under an auth key (spec 4.10): session keys derived in the
//! handshake, the seal a packet gets on its way out and the check before a received
//! one changes anything. BLAKE3 in keyed mode: a PRF, so retransmissions need no
//! per-packet nonce, and SIMD on long packets. Without feature `auth-mac` (the DPU
//! firmware) none of it exists: the endpoint never announces AUTH_MAC, and a keyed
//! peer refuses it.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use wire::packet::mac::{self as wmac, TRAILER_LEN};
use wire::packet::{Body, Repr, caps as wcaps};

use super::*;

type HmacSha256 = Hmac<Sha256>;

/// A MAC key (a BLAKE3 key).
pub(super) type Key = [u8; 32];

const SESSION_LABEL: &[u8] = b"ofi-nostd session v1";
const RESET_LABEL: &[u8] = b"ofi-nostd reset v1";

/// Direction byte of packets from the session's initiator.
pub(super) const FROM_INITIATOR: u8 = 0;
/// Direction byte of packets from the session's responder.
pub(super) const FROM_RESPONDER: u8 = 1;

fn hmac(auth: &[u8], parts: &[&[u8]]) -> Key {
    let Ok(mut m) = HmacSha256::new_from_slice(auth) else {
        return [0; 32];
    };
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

/// The key of one direction of a session: HMAC-SHA-256(auth_key, label || initiator's
/// nonce || responder's nonce || `dir`).
pub(super) fn direction_key(auth: &[u8], initiator: u64, responder: u64, dir: u8) -> Key {
    hmac(
        auth,
        &[
            SESSION_LABEL,
            &initiator.to_be_bytes(),
            &responder.to_be_bytes(),
            &[dir],
        ],
    )
}

/// The key of RESETs, which a side sends also for sessions it no longer holds.
pub(super) fn reset_key(auth: &[u8]) -> Key {
    hmac(auth, &[RESET_LABEL])
}

/// The tag of packet bytes `signed` (`0 .. len`).
#[inline]
fn tag(key: &Key, signed: &[u8]) -> [u8; TRAILER_LEN] {
    let h = blake3::keyed_hash(key, signed);
    let mut t = [0u8; TRAILER_LEN];
    t.copy_from_slice(&h.as_bytes()[..TRAILER_LEN]);
    t
}

/// Fills the trailer of the packet just written at the start of `buf` (`n` bytes, with
/// [`TRAILER_LEN`] bytes of room after them): sets flag `MAC`, refreshes the checksum
/// (it covers the flags) and writes the tag. Returns the datagram's length, 0 if the
/// buffer has no room (the link then sends nothing).
pub(super) fn seal(key: &Key, buf: &mut [u8], n: usize) -> usize {
    if n == 0 || buf.len() < n + TRAILER_LEN {
        return 0;
    }
    wmac::set_mac_flag(&mut buf[..n]);
    wire::Packet::new_unchecked(&mut buf[..n]).fill_checksum();
    let Ok((signed, trailer)) = wmac::split_mut(&mut buf[..n + TRAILER_LEN]) else {
        return 0;
    };
    *trailer = tag(key, signed);
    n + TRAILER_LEN
}

/// Whether datagram `raw` carries flag `MAC` and a valid tag under `key`
/// (constant-time comparison).
pub(super) fn verify(key: &Key, raw: &[u8]) -> bool {
    let Ok((signed, trailer)) = wmac::split(raw) else {
        return false;
    };
    let t = tag(key, signed);
    // Constant time: no early exit on the first differing byte.
    t.iter().zip(trailer).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// What a packet leaving for a peer gets: a MAC under this key, or nothing (no auth
/// key: bytes and cost exactly as without 4.10).
#[derive(Clone, Copy)]
pub(super) struct Seal(Option<Key>);

impl Seal {
    /// No MAC.
    pub(super) const NONE: Seal = Seal(None);

    /// A MAC under `key`.
    pub(super) fn with(key: Key) -> Seal {
        Seal(Some(key))
    }

    /// Bytes the datagram grows by.
    #[inline(always)]
    pub(super) fn room(&self) -> usize {
        if self.0.is_some() { TRAILER_LEN } else { 0 }
    }

    /// Seals the `n`-byte packet at the start of `buf` when there is a key; returns
    /// the datagram length.
    #[inline(always)]
    pub(super) fn apply(&self, buf: &mut [u8], n: usize) -> usize {
        match &self.0 {
            None => n,
            Some(k) => seal(k, buf, n),
        }
    }
}

/// The MAC keys of a peer slot's current session.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct SessionMac {
    /// The receive session id the keys belong to (0: none yet).
    pub(super) rx_session: u32,
    /// The key of packets we send.
    pub(super) tx: Key,
    /// The key of packets we receive.
    pub(super) rx: Key,
}

impl SessionMac {
    /// The keys of a session with receive id `rx_session` whose initiator's and
    /// responder's nonces are given; `we_initiated` tells our side. A self session
    /// (`own`) uses the initiator's key both ways: one sequence space, one direction.
    pub(super) fn derive(
        auth: &[u8],
        rx_session: u32,
        initiator: u64,
        responder: u64,
        we_initiated: bool,
        own: bool,
    ) -> SessionMac {
        let ki = direction_key(auth, initiator, responder, FROM_INITIATOR);
        if own {
            return SessionMac {
                rx_session,
                tx: ki,
                rx: ki,
            };
        }
        let kr = direction_key(auth, initiator, responder, FROM_RESPONDER);
        let (tx, rx) = if we_initiated { (ki, kr) } else { (kr, ki) };
        SessionMac { rx_session, tx, rx }
    }
}

/// An endpoint's MAC state: on with an auth key, the reset key, and the keys of every
/// peer slot's session (none without a key: nothing allocated).
pub(super) struct MacState<S: Storage> {
    on: bool,
    reset: Key,
    macs: S::Slice<SessionMac>,
}

impl<S: Storage> MacState<S> {
    /// The state of an endpoint with `auth` (empty: no key) and `peers` peer slots.
    pub(super) fn new(store: &mut S, auth: &[u8], peers: usize) -> Result<Self> {
        let on = !auth.is_empty();
        let n = if on { peers } else { 0 };
        Ok(MacState {
            on,
            reset: if on { reset_key(auth) } else { [0; 32] },
            macs: store.slice(n, SessionMac::default).ok_or(Errno::ENOMEM)?,
        })
    }

    /// Whether packets are MAC'd (there is a key).
    #[inline(always)]
    pub(super) fn on(&self) -> bool {
        self.on
    }
}

impl<S: Storage> Rdm<S> {
    /// The seal of packets to peer `p`'s session.
    #[inline(always)]
    pub(super) fn seal_for(&self, p: usize) -> Seal {
        if !self.mac.on {
            return Seal::NONE;
        }
        self.session_seal(p)
    }

    #[cold]
    fn session_seal(&self, p: usize) -> Seal {
        self.mac
            .macs
            .as_ref()
            .get(p)
            .map_or(Seal::NONE, |m| Seal::with(m.tx))
    }

    /// The seal of RESETs (the reset key, spec 4.10).
    pub(super) fn reset_seal(&self) -> Seal {
        if self.mac.on {
            Seal::with(self.mac.reset)
        } else {
            Seal::NONE
        }
    }

    /// The capability this endpoint adds to its HELLO / HELLO_ACK.
    pub(super) fn mac_caps(&self) -> u64 {
        if self.mac.on { wcaps::AUTH_MAC } else { 0 }
    }

    /// Whether a peer announcing `caps` may have a session with us: with a key, only
    /// one that MACs its packets (no downgrade).
    pub(super) fn mac_peer_ok(&self, caps: u64) -> bool {
        !self.mac.on || caps & wcaps::AUTH_MAC != 0
    }

    /// Derives the keys of peer `p`'s session just established (its nonces set);
    /// `we_initiated` tells whose HELLO opened it.
    pub(super) fn mac_install(&mut self, p: usize, we_initiated: bool) {
        if !self.mac.on {
            return;
        }
        let pr = &self.peers[p];
        let s = &pr.session;
        let (i, r) = if we_initiated {
            (s.our_nonce, s.their_nonce)
        } else {
            (s.their_nonce, s.our_nonce)
        };
        let own = pr.addr == self.local;
        let m = SessionMac::derive(&self.auth, s.rx_session, i, r, we_initiated, own);
        if let Some(slot) = self.mac.macs.as_mut().get_mut(p) {
            *slot = m;
        }
    }

    /// Whether received packet `raw` (parsed as `repr`, from `from`) may be processed
    /// (spec 4.10): a RESET under the reset key, a packet of a session we hold keys
    /// for (or of the candidate session the peer offered) under its key. A packet
    /// naming no session we hold is let through: the session checks drop it as
    /// unknown. Runs before the packet changes anything.
    #[inline(never)]
    pub(super) fn mac_rx_ok(&self, from: &EpAddr, repr: &Repr<'_>, raw: &[u8]) -> bool {
        if matches!(repr.body, Body::Reset(_)) {
            return verify(&self.mac.reset, raw);
        }
        let Some(p) = self.peers.find(from) else {
            return true;
        };
        let session = repr.header.session;
        if let Some(m) = self.mac.macs.as_ref().get(p)
            && m.rx_session == session
            && session != 0
        {
            return verify(&m.rx, raw);
        }
        let pr = &self.peers[p];
        if pr.state == PeerState::Established && session == pr.session.rx_session {
            // The current session without keys: nothing of it is accepted.
            return false;
        }
        if let Some(c) = pr.session.cand.filter(|c| c.rx_session == session) {
            // The peer's HELLO opened the candidate: its packets are the initiator's.
            let k = direction_key(&self.auth, c.their_nonce, c.our_nonce, FROM_INITIATOR);
            return verify(&k, raw);
        }
        true
    }
}

#[cfg(test)]
mod tests;
