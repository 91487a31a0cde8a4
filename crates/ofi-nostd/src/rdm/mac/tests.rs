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

#[test]
fn each_side_receives_under_the_key_the_other_sends_with() {
    let a = SessionMac::derive(AUTH, 1, 10, 20, true, false);
    let b = SessionMac::derive(AUTH, 2, 10, 20, false, false);
    assert_eq!(a.tx, b.rx);
    assert_eq!(a.rx, b.tx);
    // Directions differ: a packet cannot be reflected to its sender.
    assert_ne!(a.tx, a.rx);
    // Another session (other nonces) or another key: other keys.
    assert_ne!(SessionMac::derive(AUTH, 1, 11, 20, true, false).tx, a.tx);
    assert_ne!(
        SessionMac::derive(b"other", 1, 10, 20, true, false).tx,
        a.tx
    );
    // The self session: one key both ways.
    let s = SessionMac::derive(AUTH, 3, 10, 10, true, true);
    assert_eq!(s.tx, s.rx);
    assert_ne!(reset_key(AUTH), a.tx);
}

#[test]
fn a_sealed_packet_verifies_and_any_change_fails() {
    let k = direction_key(AUTH, 10, 20, FROM_INITIATOR);
    let mut buf = [0u8; 64];
    let n = keepalive(&mut buf);
    let total = seal(&k, &mut buf, n);
    assert_eq!(total, n + TRAILER_LEN);
    let dgram = &buf[..total];
    // Still a valid packet (flag MAC allowed, checksum refreshed) and a valid tag.
    assert!(Repr::parse_bytes(dgram).is_ok());
    assert!(verify(&k, dgram));
    assert!(!verify(&direction_key(AUTH, 10, 20, FROM_RESPONDER), dgram));
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
    assert_eq!(Seal::with(k).room(), TRAILER_LEN);
}

/// The spec's example (wire protocol 4.10): the KEEPALIVE of section 10 from A (the
/// initiator) under auth key "ofi-nostd example key", the HELLO's and HELLO_ACK's
/// nonces of section 10.
fn spec_example() -> ([u8; 64], usize) {
    let k = direction_key(
        b"ofi-nostd example key",
        0x0102_0304_0506_0708,
        0x1111_2222_3333_4444,
        FROM_INITIATOR,
    );
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

#[test]
fn spec_mac_example() {
    let (buf, total) = spec_example();
    let spec: [u8; 48] = [
        0x4f, 0x4e, 0x01, 0x06, 0x00, 0x90, 0x00, 0x20, 0x00, 0x07, 0x00, 0x03, 0xa1, 0xb2, 0xc3,
        0xd4, 0x00, 0x00, 0x10, 0x05, 0x00, 0x00, 0x00, 0x00, 0x00, 0x0f, 0x42, 0x40, 0x00, 0x0f,
        0x3e, 0x58, 0x8b, 0x6b, 0xb8, 0x77, 0xb6, 0xca, 0x4e, 0xdb, 0x17, 0xd4, 0x5a, 0x5f, 0x0a,
        0x9e, 0xfd, 0xd9,
    ];
    // On a mismatch the message shows the bytes the spec should list.
    assert_eq!(&buf[..total], &spec[..], "{:02x?}", &buf[..total]);
}
