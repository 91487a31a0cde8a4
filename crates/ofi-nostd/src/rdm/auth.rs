//! The handshake's authentication proof (spec 4.5): HMAC-SHA-256 over the HELLO or
//! HELLO_ACK bytes with the domain's `auth_key`.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use wire::packet::MAC_LEN;

type HmacSha256 = Hmac<Sha256>;

const HELLO_LABEL: &[u8] = b"ofi-nostd hello v1";
const HELLO_ACK_LABEL: &[u8] = b"ofi-nostd hello-ack v1";

/// Largest handshake packet without its MAC (base header + HELLO body).
const SIGNED_MAX: usize = 128;

fn mac_over(key: &[u8], label: &[u8], nonce: Option<u64>, signed: &[u8]) -> Option<HmacSha256> {
    let mut m = HmacSha256::new_from_slice(key).ok()?;
    m.update(label);
    if let Some(n) = nonce {
        m.update(&n.to_be_bytes());
    }
    // The checksum field (bytes 20..24) counts as zero.
    let cut = signed.len().min(20);
    m.update(&signed[..cut]);
    if signed.len() > 20 {
        m.update(&[0u8; 4][..(signed.len() - 20).min(4)]);
    }
    if signed.len() > 24 {
        m.update(&signed[24..]);
    }
    Some(m)
}

/// The proof for a handshake packet whose first `len - 32` bytes are `signed`:
/// HELLO when `hello_nonce` is `None`, HELLO_ACK (binding the HELLO's nonce) otherwise.
pub(super) fn prove(key: &[u8], hello_nonce: Option<u64>, signed: &[u8]) -> [u8; MAC_LEN] {
    let label = if hello_nonce.is_some() {
        HELLO_ACK_LABEL
    } else {
        HELLO_LABEL
    };
    match mac_over(key, label, hello_nonce, signed) {
        Some(m) => m.finalize().into_bytes().into(),
        None => [0; MAC_LEN],
    }
}

/// Whether `mac` proves `signed` (constant-time comparison).
pub(super) fn verify(key: &[u8], hello_nonce: Option<u64>, signed: &[u8], mac: &[u8]) -> bool {
    if signed.len() > SIGNED_MAX {
        return false;
    }
    let label = if hello_nonce.is_some() {
        HELLO_ACK_LABEL
    } else {
        HELLO_LABEL
    };
    match mac_over(key, label, hello_nonce, signed) {
        Some(m) => m.verify_slice(mac).is_ok(),
        None => false,
    }
}

/// Fills the MAC of a handshake packet just emitted into `pkt` (with a zero MAC
/// placeholder), then refreshes its checksum.
pub(super) fn sign_packet(key: &[u8], hello_nonce: Option<u64>, pkt: &mut [u8]) {
    let len = pkt.len();
    if len < MAC_LEN + 24 {
        return;
    }
    let mac = prove(key, hello_nonce, &pkt[..len - MAC_LEN]);
    pkt[len - MAC_LEN..].copy_from_slice(&mac);
    wire::Packet::new_unchecked(&mut *pkt).fill_checksum();
}
