//! Stateless-handshake cookies (spec 4.2, 4.9): what a responder answers a HELLO from
//! an address it holds nothing for, instead of a session, so that spoofed HELLOs cost
//! it one HMAC and one RETRY but no peer slot (TCP SYN cookies and QUIC Retry work
//! the same way). The initiator repeats its HELLO with the cookie; the responder
//! checks it and only then allocates the session.
//!
//! A cookie is `ts` (the responder's clock in milliseconds, 4 bytes big-endian) and
//! the first 12 bytes of HMAC-SHA-256 under the responder's cookie key over
//! `"ofi-nostd cookie v1" || ts || initiator ip (4) || port (2) || ep id (2) ||
//! responder ep id (2) || HELLO rx_session (4) || isn (4) || nonce (8)`. It proves
//! the initiator receives at its source address (it saw the RETRY) within
//! [`LIFETIME_MS`] and binds the HELLO it answered.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use wire::packet::{COOKIE_LEN, HelloRepr};

use crate::addr::EpAddr;
use crate::time::Instant;

type HmacSha256 = Hmac<Sha256>;

const LABEL: &[u8] = b"ofi-nostd cookie v1";
const KEY_LABEL: &[u8] = b"ofi-nostd cookie key v1";

/// How long a cookie is good for: several HELLO round trips, short enough that a
/// captured one is soon worthless.
pub(super) const LIFETIME_MS: u32 = 2_000;

/// Why a cookie was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refused {
    /// Older than [`LIFETIME_MS`] (or from the future): answer a fresh RETRY.
    Expired,
    /// Not ours, or for another initiator or HELLO: drop.
    Forged,
}

/// The responder's secret for its cookies.
#[derive(Clone)]
pub(super) struct CookieKey([u8; 32]);

impl CookieKey {
    /// The key of an endpoint whose random generator was seeded with `seed` (the
    /// domain's random seed): derived from it, so no draw of the generator changes.
    pub(super) fn from_seed(seed: u64) -> Self {
        // HMAC takes keys of any length: the fallback is never taken.
        let Ok(mut m) = <HmacSha256 as Mac>::new_from_slice(&seed.to_be_bytes()) else {
            return CookieKey([0x5a; 32]);
        };
        m.update(KEY_LABEL);
        CookieKey(m.finalize().into_bytes().into())
    }

    /// The cookie for `hello` from `from` to our endpoint `local_ep` at `now`.
    pub(super) fn make(
        &self,
        now: Instant,
        from: &EpAddr,
        local_ep: u16,
        hello: &HelloRepr,
    ) -> [u8; COOKIE_LEN] {
        self.at(ms(now), from, local_ep, hello)
    }

    /// Whether `cookie` is one we made at most [`LIFETIME_MS`] before `now` for this
    /// very HELLO and initiator (constant-time comparison).
    pub(super) fn check(
        &self,
        now: Instant,
        cookie: &[u8; COOKIE_LEN],
        from: &EpAddr,
        local_ep: u16,
        hello: &HelloRepr,
    ) -> Result<(), Refused> {
        let ts = u32::from_be_bytes([cookie[0], cookie[1], cookie[2], cookie[3]]);
        let want = self.at(ts, from, local_ep, hello);
        // The MAC first: a forgery is a forgery however old it claims to be.
        if !ct_eq(&want[4..], &cookie[4..]) {
            return Err(Refused::Forged);
        }
        if ms(now).wrapping_sub(ts) > LIFETIME_MS {
            return Err(Refused::Expired);
        }
        Ok(())
    }

    fn at(&self, ts: u32, from: &EpAddr, local_ep: u16, h: &HelloRepr) -> [u8; COOKIE_LEN] {
        let mut out = [0u8; COOKIE_LEN];
        out[..4].copy_from_slice(&ts.to_be_bytes());
        let Ok(mut m) = <HmacSha256 as Mac>::new_from_slice(&self.0) else {
            return out;
        };
        m.update(LABEL);
        m.update(&ts.to_be_bytes());
        m.update(&from.ip);
        m.update(&from.port.to_be_bytes());
        m.update(&from.ep_id.to_be_bytes());
        m.update(&local_ep.to_be_bytes());
        m.update(&h.rx_session.to_be_bytes());
        m.update(&h.isn.to_be_bytes());
        m.update(&h.nonce.to_be_bytes());
        let tag = m.finalize().into_bytes();
        out[4..].copy_from_slice(&tag[..COOKIE_LEN - 4]);
        out
    }
}

/// The engine's clock in milliseconds, as cookies carry it (wrapping).
fn ms(now: Instant) -> u32 {
    (now.total_micros() / 1000) as u32
}

/// Equal bytes, in time independent of where they differ.
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

#[cfg(test)]
mod tests;
