//! The per-packet MAC under an auth key (spec 4.10): session keys derived in the
//! handshake, the seal a packet gets on its way out and the check before a received
//! one changes anything. The tag is AES-128 of the packet's POLYVAL hash (the tag of
//! AES-GCM-SIV without its nonce): a universal hash runs at CLMUL / PMULL speed, and
//! encrypting the hash (rather than masking it with a per-packet pad) makes the MAC a
//! PRF of the packet, so no nonce has to stay unique: a retransmission with another
//! piggybacked ack, and a RESET any keyed endpoint may send, are simply other messages.
//! Without feature `auth-mac` (the DPU firmware) none of it exists: the endpoint never
//! announces AUTH_MAC, and a keyed peer refuses it.

use aes::Aes128Enc;
use aes::cipher::{BlockCipherEncrypt, KeyInit};
use hmac::{Hmac, Mac};
use polyval::Polyval;
use polyval::universal_hash::UniversalHash;
use polyval_wide::WideKey;
use sha2::Sha256;
use wire::packet::mac::{self as wmac, TRAILER_LEN};
use wire::packet::{Body, Repr, caps as wcaps};

use super::*;

type HmacSha256 = Hmac<Sha256>;

/// Key material as the handshake derives it: AES-128 key (bytes 0..16), POLYVAL hash
/// key H (bytes 16..32).
pub(super) type KeyBytes = [u8; 32];

const SESSION_LABEL: &[u8] = b"ofi-nostd session v2";
const RESET_LABEL: &[u8] = b"ofi-nostd reset v2";
const ANSWER_LABEL: &[u8] = b"ofi-nostd answer v2";

/// Direction byte of packets from the session's initiator.
pub(super) const FROM_INITIATOR: u8 = 0;
/// Direction byte of packets from the session's responder.
pub(super) const FROM_RESPONDER: u8 = 1;

fn hmac(auth: &[u8], parts: &[&[u8]]) -> KeyBytes {
    let Ok(mut m) = HmacSha256::new_from_slice(auth) else {
        return [0; 32];
    };
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

/// The key material of one direction of a session: HMAC-SHA-256(auth_key, label ||
/// initiator's nonce || responder's nonce || `dir`).
pub(super) fn direction_key(auth: &[u8], initiator: u64, responder: u64, dir: u8) -> KeyBytes {
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

/// The key material of RESETs, which a side sends also for sessions it no longer holds.
pub(super) fn reset_key(auth: &[u8]) -> KeyBytes {
    hmac(auth, &[RESET_LABEL])
}

/// The key material of a REJECT or RETRY answering the HELLO with `nonce`: the
/// responder may hold nothing of the initiator, the initiator knows its nonce.
pub(super) fn answer_key(auth: &[u8], nonce: u64) -> KeyBytes {
    hmac(auth, &[ANSWER_LABEL, &nonce.to_be_bytes()])
}

/// A MAC key ready for use: POLYVAL with H's powers precomputed, AES-128's round keys.
#[derive(Clone)]
pub(super) struct Key {
    hash: Polyval,
    /// The same hash thirty-two blocks per step, where the CPU has AVX-512 VPCLMULQDQ.
    wide: WideKey,
    aes: Aes128Enc,
}

impl Key {
    /// The key of material `k` (AES key, then H).
    pub(super) fn new(k: &KeyBytes) -> Key {
        let a: [u8; 16] = core::array::from_fn(|i| k[i]);
        let h: [u8; 16] = core::array::from_fn(|i| k[16 + i]);
        Key {
            hash: Polyval::new(&h.into()),
            wide: WideKey::new(h),
            aes: Aes128Enc::new(&a.into()),
        }
    }

    /// The tag of packet bytes `signed` (`0 .. len`): AES_K(POLYVAL_H(`signed`
    /// zero-padded to 16-byte blocks, then one block of its length in bits, 64-bit
    /// little-endian, and 8 zero bytes)).
    #[inline]
    fn tag(&self, signed: &[u8]) -> [u8; TRAILER_LEN] {
        let mut len = [0u8; 16];
        len[..8].copy_from_slice(&((signed.len() as u64) << 3).to_le_bytes());
        let mut b = match self.wide.hash(signed, len) {
            Some(x) => x.into(),
            None => {
                let mut h = self.hash.clone();
                h.update_padded(signed);
                h.update(&[len.into()]);
                h.finalize()
            }
        };
        self.aes.encrypt_block(&mut b);
        b.into()
    }
}

impl Default for Key {
    fn default() -> Key {
        Key::new(&[0; 32])
    }
}

impl core::fmt::Debug for Key {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Key material stays out of logs.
        f.write_str("Key(..)")
    }
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
    *trailer = key.tag(signed);
    n + TRAILER_LEN
}

/// Whether datagram `raw` carries flag `MAC` and a valid tag under `key`
/// (constant-time comparison).
pub(super) fn verify(key: &Key, raw: &[u8]) -> bool {
    let Ok((signed, trailer)) = wmac::split(raw) else {
        return false;
    };
    let t = key.tag(signed);
    // Constant time: no early exit on the first differing byte.
    t.iter().zip(trailer).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// What a packet leaving for a peer gets: a MAC under this key, or nothing (no auth
/// key: bytes and cost exactly as without 4.10). Borrows the key: copying round keys
/// per packet would cost more than the tag of a short one.
#[derive(Clone, Copy)]
pub(super) struct Seal<'a>(Option<&'a Key>);

impl<'a> Seal<'a> {
    /// No MAC.
    pub(super) const NONE: Seal<'static> = Seal(None);

    /// A MAC under `key`.
    pub(super) fn with(key: &'a Key) -> Seal<'a> {
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
        match self.0 {
            None => n,
            Some(k) => seal(k, buf, n),
        }
    }
}

/// Whose key a control packet is sealed with (resolved where it is sent, so the
/// sender may hold `&mut self` until then).
#[derive(Clone, Copy)]
pub(super) enum SealFor {
    /// No MAC (handshake packets; REJECT and RETRY to an initiator without AUTH_MAC).
    Nothing,
    /// Peer `p`'s session.
    Peer(usize),
    /// The reset key.
    Reset,
    /// The answer key of the HELLO with this nonce (REJECT, RETRY).
    Answer(u64),
}

/// The MAC keys of a peer slot's current session.
#[derive(Debug, Clone, Default)]
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
            let k = Key::new(&ki);
            return SessionMac {
                rx_session,
                tx: k.clone(),
                rx: k,
            };
        }
        let kr = direction_key(auth, initiator, responder, FROM_RESPONDER);
        let (tx, rx) = if we_initiated { (ki, kr) } else { (kr, ki) };
        SessionMac {
            rx_session,
            tx: Key::new(&tx),
            rx: Key::new(&rx),
        }
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
            reset: Key::new(&if on { reset_key(auth) } else { [0; 32] }),
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
    pub(super) fn seal_for(&self, p: usize) -> Seal<'_> {
        if !self.mac.on {
            return Seal::NONE;
        }
        self.session_seal(p)
    }

    #[cold]
    fn session_seal(&self, p: usize) -> Seal<'_> {
        self.mac
            .macs
            .as_ref()
            .get(p)
            .map_or(Seal::NONE, |m| Seal::with(&m.tx))
    }

    /// Runs `f` with the seal `s` names (an answer key exists only for the call).
    #[inline(always)]
    pub(super) fn with_seal<R>(&self, s: SealFor, f: impl FnOnce(Seal<'_>) -> R) -> R {
        match s {
            SealFor::Nothing => f(Seal::NONE),
            SealFor::Peer(p) => f(self.seal_for(p)),
            SealFor::Reset if self.mac.on => f(Seal::with(&self.mac.reset)),
            SealFor::Answer(n) if self.mac.on => self.with_answer_seal(n, f),
            SealFor::Reset | SealFor::Answer(_) => f(Seal::NONE),
        }
    }

    #[cold]
    fn with_answer_seal<R>(&self, nonce: u64, f: impl FnOnce(Seal<'_>) -> R) -> R {
        let k = Key::new(&answer_key(&self.auth, nonce));
        f(Seal::with(&k))
    }

    /// The nonce an answer to HELLO `h` is sealed for: with a key, to an initiator
    /// that announced AUTH_MAC (one that would not check it gets it unsealed).
    pub(super) fn answer_to(&self, h: &wire::packet::HelloRepr) -> Option<u64> {
        (self.mac.on && h.caps & wcaps::AUTH_MAC != 0).then_some(h.nonce)
    }

    /// A packet that failed its MAC check: a REJECT(AUTH_FAILED) of our handshake
    /// in progress is remembered (the peer may hold another key, or it is forged), so
    /// the handshake, which goes on, fails with -FI_EKEYREJECTED if it times out.
    #[cold]
    pub(super) fn mac_dropped(&mut self, from: &EpAddr, repr: &Repr<'_>) {
        let Body::Reject(r) = repr.body else { return };
        if r.reason != wire::packet::reject::AUTH_FAILED {
            return;
        }
        if let Some(p) = self.peers.find(from) {
            let pm = &mut self.peers[p];
            if pm.state == PeerState::HelloSent && repr.header.session == pm.session.rx_session {
                pm.session.key_refused = true;
            }
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
        if matches!(repr.body, Body::Reject(_) | Body::Retry(_)) {
            let pr = &self.peers[p];
            if pr.state != PeerState::HelloSent || repr.header.session != pr.session.rx_session {
                // Not an answer to our handshake: the handshake drops it as stray.
                return true;
            }
            let k = answer_key(&self.auth, pr.session.our_nonce);
            return verify(&Key::new(&k), raw);
        }
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
            return verify(&Key::new(&k), raw);
        }
        true
    }
}

#[cfg(test)]
mod tests;
