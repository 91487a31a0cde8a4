extern crate std;

use std::format;
use std::vec::Vec;

use super::*;
use wire::packet::{Body, Header, KeepAliveRepr, Repr};

const AUTH: &[u8] = b"job-42 secret";

fn keepalive(buf: &mut [u8]) -> usize {
    let r = Repr {
        header: Header {
            src_ep: 7,
            dst_ep: 3,
            session: 0xA1B2_C3D4,
            seq: 0x1000,
            crc: true,
            ack_req: true,
        },
        body: Body::KeepAlive(KeepAliveRepr { ts: 1, echo_ts: 2 }),
    };
    r.emit_bytes(buf).unwrap()
}

/// The tag each key gives one fixed packet: keys compared by what they compute.
fn tag_of(k: &Key) -> [u8; TRAILER_LEN] {
    let mut buf = [0u8; 64];
    let n = keepalive(&mut buf);
    let total = seal(k, &mut buf, n);
    buf[n..total].try_into().unwrap()
}

#[test]
fn each_side_receives_under_the_key_the_other_sends_with() {
    let a = SessionMac::derive(AUTH, 1, 10, 20, true, false);
    let b = SessionMac::derive(AUTH, 2, 10, 20, false, false);
    assert_eq!(tag_of(&a.tx), tag_of(&b.rx));
    assert_eq!(tag_of(&a.rx), tag_of(&b.tx));
    // Directions differ: a packet cannot be reflected to its sender.
    assert_ne!(tag_of(&a.tx), tag_of(&a.rx));
    // Another session (other nonces) or another key: other keys.
    let other = SessionMac::derive(AUTH, 1, 11, 20, true, false);
    assert_ne!(tag_of(&other.tx), tag_of(&a.tx));
    let other = SessionMac::derive(b"other", 1, 10, 20, true, false);
    assert_ne!(tag_of(&other.tx), tag_of(&a.tx));
    // The self session: one key both ways.
    let s = SessionMac::derive(AUTH, 3, 10, 10, true, true);
    assert_eq!(tag_of(&s.tx), tag_of(&s.rx));
    assert_ne!(tag_of(&Key::new(&reset_key(AUTH))), tag_of(&a.tx));
}

#[test]
fn a_sealed_packet_verifies_and_any_change_fails() {
    let k = Key::new(&direction_key(AUTH, 10, 20, FROM_INITIATOR));
    let mut buf = [0u8; 64];
    let n = keepalive(&mut buf);
    let total = seal(&k, &mut buf, n);
    assert_eq!(total, n + TRAILER_LEN);
    let dgram = &buf[..total];
    // Still a valid packet (flag MAC allowed, checksum refreshed) and a valid tag.
    assert!(Repr::parse_bytes(dgram).is_ok());
    assert!(verify(&k, dgram));
    let other = Key::new(&direction_key(AUTH, 10, 20, FROM_RESPONDER));
    assert!(!verify(&other, dgram));
    for i in 0..total {
        for bit in 0..8 {
            let mut m = buf;
            m[i] ^= 1 << bit;
            assert!(!verify(&k, &m[..total]), "byte {i} bit {bit}");
        }
    }
    for cut in 0..total {
        assert!(!verify(&k, &buf[..cut]), "truncated to {cut}");
    }
    // No room for the trailer: nothing is sent.
    let mut small = [0u8; 64];
    let n = keepalive(&mut small);
    assert_eq!(seal(&k, &mut small[..n + TRAILER_LEN - 1], n), 0);
    assert_eq!(Seal::NONE.apply(&mut small, n), n);
    assert_eq!(Seal::NONE.room(), 0);
    assert_eq!(Seal::with(&k).room(), TRAILER_LEN);
}

/// Zero padding and the length block: a packet and the same bytes with zeros appended
/// (its `len` raised to match) hash apart, so no two lengths share a tag.
#[test]
fn trailing_zeros_change_the_tag() {
    let k = Key::new(&direction_key(AUTH, 10, 20, FROM_INITIATOR));
    let base = [
        0x4f_u8, 0x4e, 1, 6, 0, 0x90, 0, 24, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let mut t = Vec::new();
    for extra in 0..40usize {
        let mut v = base.to_vec();
        v.resize(base.len() + extra, 0);
        t.push(k.tag(&v));
    }
    for i in 0..t.len() {
        for j in i + 1..t.len() {
            assert_ne!(t[i], t[j], "{i} and {j} zero bytes appended");
        }
    }
}

/// The tag as the spec states it, computed from the primitives directly (not through
/// `Key::tag`): AES-128 under bytes 0..16 of the key material of POLYVAL under bytes
/// 16..32 over the padded packet and its length block. Checked at lengths around every
/// block boundary and with a multi-block (8 at a time) stretch.
#[test]
fn tag_is_aes_of_polyval_over_packet_and_length() {
    let km = direction_key(AUTH, 10, 20, FROM_INITIATOR);
    let k = Key::new(&km);
    let a: [u8; 16] = km[..16].try_into().unwrap();
    let h: [u8; 16] = km[16..].try_into().unwrap();
    let data: Vec<u8> = (0..300u32).map(|i| (i * 7 + 1) as u8).collect();
    for len in [0, 1, 15, 16, 17, 31, 32, 33, 127, 128, 129, 300] {
        let m = &data[..len];
        let mut p = Polyval::new(&h.into());
        let mut padded = m.to_vec();
        padded.resize(len.div_ceil(16) * 16, 0);
        for c in padded.chunks(16) {
            let b: [u8; 16] = c.try_into().unwrap();
            p.update(&[b.into()]);
        }
        let mut lb = [0u8; 16];
        lb[..8].copy_from_slice(&(len as u64 * 8).to_le_bytes());
        p.update(&[lb.into()]);
        let mut b = p.finalize();
        Aes128Enc::new(&a.into()).encrypt_block(&mut b);
        let want: [u8; 16] = b.into();
        assert_eq!(k.tag(m), want, "len {len}");
    }
}

/// The spec's example (wire protocol 4.10): the KEEPALIVE of section 10 from A (the
/// initiator) under auth key "ofi-nostd example key", the HELLO's and HELLO_ACK's
/// nonces of section 10.
fn spec_example() -> ([u8; 64], usize) {
    let k = Key::new(&direction_key(
        b"ofi-nostd example key",
        0x0102_0304_0506_0708,
        0x1111_2222_3333_4444,
        FROM_INITIATOR,
    ));
    let r = Repr {
        header: Header {
            src_ep: 7,
            dst_ep: 3,
            session: 0xA1B2_C3D4,
            seq: 0x1005,
            crc: false,
            ack_req: true,
        },
        body: Body::KeepAlive(KeepAliveRepr {
            ts: 1_000_000,
            echo_ts: 999_000,
        }),
    };
    let mut buf = [0u8; 64];
    let n = r.emit_bytes(&mut buf).unwrap();
    let total = seal(&k, &mut buf, n);
    (buf, total)
}

/// The bytes of block ```` ```hex name=NAME ```` in the wire-protocol spec.
fn spec_block(name: &str) -> Vec<u8> {
    const SPEC: &str = include_str!("../../../../../docs/wire-protocol.md");
    let head = format!("```hex name={name}");
    let mut lines = SPEC.lines().skip_while(|l| l.trim() != head);
    assert!(lines.next().is_some(), "the spec has no block {name}");
    lines
        .take_while(|l| l.trim() != "```")
        .flat_map(|l| l.split('#').next().unwrap_or("").split_whitespace())
        .map(|t| u8::from_str_radix(t, 16).expect("hex byte"))
        .collect()
}

#[test]
fn spec_mac_example() {
    let (buf, total) = spec_example();
    // On a mismatch the message shows the bytes the spec should list.
    assert_eq!(
        &buf[..total],
        &spec_block("keepalive-mac")[..],
        "{:02x?}",
        &buf[..total]
    );
}
