use super::*;
use crate::time::Duration;
use wire::packet::caps;

/// The HELLO of the spec's examples (section 10: A, endpoint 7, to B, endpoint 3).
fn hello() -> HelloRepr {
    HelloRepr {
        ver_min: 1,
        ver_max: 1,
        rx_session: 0x1122_3344,
        isn: 0x0000_1000,
        window: 256,
        max_pkt: 1472,
        credits: 128,
        caps: caps::MSG | caps::COOKIE,
        nonce: 0x0102_0304_0506_0708,
        cookie: None,
        mac: None,
    }
}

const A: EpAddr = EpAddr {
    ip: [10, 0, 0, 1],
    port: 7000,
    ep_id: 7,
};

#[test]
fn a_cookie_is_accepted_within_its_lifetime_for_its_hello_only() {
    let k = CookieKey::from_seed(42);
    let t0 = Instant::from_micros(5_000_000);
    let c = k.make(t0, &A, 3, &hello());
    let later = t0 + Duration::from_micros(u64::from(LIFETIME_MS) * 1000);
    assert_eq!(k.check(t0, &c, &A, 3, &hello()), Ok(()));
    assert_eq!(k.check(later, &c, &A, 3, &hello()), Ok(()));
    let too_late = later + Duration::from_micros(1000);
    assert_eq!(
        k.check(too_late, &c, &A, 3, &hello()),
        Err(Refused::Expired)
    );
    // From before it was made (a clock that went back, or a forged timestamp).
    let before = Instant::from_micros(4_000_000);
    assert_eq!(k.check(before, &c, &A, 3, &hello()), Err(Refused::Expired));
    // Another initiator address, endpoint, HELLO, or key: forged.
    let other = EpAddr { port: 7001, ..A };
    assert_eq!(k.check(t0, &c, &other, 3, &hello()), Err(Refused::Forged));
    assert_eq!(k.check(t0, &c, &A, 4, &hello()), Err(Refused::Forged));
    let h2 = HelloRepr {
        nonce: 9,
        ..hello()
    };
    assert_eq!(k.check(t0, &c, &A, 3, &h2), Err(Refused::Forged));
    let k2 = CookieKey::from_seed(43);
    assert_eq!(k2.check(t0, &c, &A, 3, &hello()), Err(Refused::Forged));
    // Any bit flipped anywhere: refused (a changed timestamp no longer matches its MAC).
    for i in 0..COOKIE_LEN * 8 {
        let mut bad = c;
        bad[i / 8] ^= 1 << (i % 8);
        assert!(k.check(t0, &bad, &A, 3, &hello()).is_err(), "bit {i}");
    }
}

/// The cookie of docs/wire-protocol.md section 4.9 (and of the wire crate's RETRY and
/// HELLO-with-cookie examples): seed 42, B's clock at 1000 ms.
#[test]
fn spec_cookie_example() {
    let k = CookieKey::from_seed(42);
    let c = k.make(Instant::from_micros(1_000_000), &A, 3, &hello());
    let spec: [u8; COOKIE_LEN] = [
        0x00, 0x00, 0x03, 0xe8, 0xa8, 0x69, 0x16, 0x46, 0x3a, 0x49, 0x5a, 0xf8, 0x54, 0x69, 0x2c,
        0x5f,
    ];
    assert_eq!(c, spec);
}
