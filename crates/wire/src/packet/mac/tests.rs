use super::*;
use crate::packet::{Body, Header, HelloRepr, KeepAliveRepr, Repr, caps};

fn header(crc: bool) -> Header {
    Header {
        src_ep: 7,
        dst_ep: 3,
        session: 0xA1B2_C3D4,
        seq: 0x1000,
        crc,
        ack_req: true,
    }
}

/// A KEEPALIVE with flag `MAC` (checksum refreshed) and room for the trailer.
fn keyed_keepalive(crc: bool) -> ([u8; 64], usize) {
    let r = Repr {
        header: header(crc),
        body: Body::KeepAlive(KeepAliveRepr { ts: 1, echo_ts: 2 }),
    };
    let mut buf = [0u8; 64];
    let len = r.emit_bytes(&mut buf).unwrap();
    set_mac_flag(&mut buf[..len]);
    Packet::new_unchecked(&mut buf[..len]).fill_checksum();
    (buf, len)
}

#[test]
fn a_packet_with_its_trailer_parses_and_splits_at_len() {
    for crc in [false, true] {
        let (mut buf, len) = keyed_keepalive(crc);
        {
            let (signed, tag) = split_mut(&mut buf[..len + TRAILER_LEN]).unwrap();
            assert_eq!(signed.len(), len);
            tag.copy_from_slice(&[0xAB; TRAILER_LEN]);
        }
        let dgram = &buf[..len + TRAILER_LEN];
        assert!(has_mac(dgram));
        // The parser reads `0 .. len` only: the trailer is what it ignores anyway.
        let r = Repr::parse_bytes(dgram).unwrap();
        assert!(matches!(r.body, Body::KeepAlive(_)));
        let (signed, tag) = split(dgram).unwrap();
        assert_eq!(signed, &buf[..len]);
        assert_eq!(tag, &[0xAB; TRAILER_LEN]);
    }
}

#[test]
fn a_short_or_missing_trailer_is_refused_never_read_past() {
    let (buf, len) = keyed_keepalive(true);
    for cut in len..len + TRAILER_LEN {
        assert_eq!(
            split(&buf[..cut]),
            Err(Error::Truncated),
            "datagram of {cut}"
        );
        // Still a valid packet: a held out-of-order copy (without its trailer) parses.
        assert!(Repr::parse_bytes(&buf[..cut]).is_ok());
    }
    let mut room = [0u8; 64];
    room[..len].copy_from_slice(&buf[..len]);
    assert_eq!(
        split_mut(&mut room[..len + TRAILER_LEN - 1]).map(|_| ()),
        Err(Error::BufferTooSmall)
    );
    assert_eq!(split(&buf[..10]), Err(Error::Truncated));
    // Without the flag there is no trailer to find.
    let r = Repr {
        header: header(false),
        body: Body::KeepAlive(KeepAliveRepr { ts: 1, echo_ts: 2 }),
    };
    let mut plain = [0u8; 64];
    let n = r.emit_bytes(&mut plain).unwrap();
    assert!(!has_mac(&plain[..n]));
    assert_eq!(split(&plain[..n + TRAILER_LEN]), Err(Error::Malformed));
    // A `len` below the base header.
    let mut bad = buf;
    Packet::new_unchecked(&mut bad[..]).set_packet_len(8);
    assert_eq!(split(&bad), Err(Error::BadLength));
}

#[test]
fn the_flag_is_refused_on_handshake_packets() {
    let hello = Repr {
        header: Header {
            session: 0,
            ..header(false)
        },
        body: Body::Hello(HelloRepr {
            ver_min: 1,
            ver_max: 1,
            rx_session: 0x1122_3344,
            isn: 0x1000,
            window: 64,
            max_pkt: 1472,
            credits: 64,
            caps: caps::MSG | caps::AUTH_MAC,
            nonce: 1,
            cookie: None,
            mac: None,
        }),
    };
    let mut buf = [0u8; 128];
    let len = hello.emit_bytes(&mut buf).unwrap();
    assert!(Repr::parse_bytes(&buf[..len]).is_ok());
    set_mac_flag(&mut buf[..len]);
    assert_eq!(
        Repr::parse_bytes(&buf[..len + TRAILER_LEN]).map(|_| ()),
        Err(Error::BadFlags)
    );
}

/// REJECT and RETRY answer a keyed initiator under the answer key (4.10): the flag
/// parses on them, and the trailer is found.
#[test]
fn answers_to_a_hello_take_the_flag() {
    use crate::packet::{RejectRepr, RetryRepr, reject};
    let h = Header {
        seq: 0,
        ack_req: false,
        ..header(true)
    };
    for body in [
        Body::Reject(RejectRepr {
            reason: reject::AUTH_FAILED,
            ver_min: 1,
            ver_max: 1,
        }),
        Body::Retry(RetryRepr { cookie: [7; 16] }),
    ] {
        let r = Repr { header: h, body };
        let mut buf = [0u8; 64];
        let len = r.emit_bytes(&mut buf).unwrap();
        set_mac_flag(&mut buf[..len]);
        Packet::new_unchecked(&mut buf[..len]).fill_checksum();
        let dgram = &buf[..len + TRAILER_LEN];
        assert_eq!(Repr::parse_bytes(dgram), Ok(r), "{body:?}");
        assert_eq!(split(dgram).map(|(s, _)| s.len()), Ok(len));
    }
}
