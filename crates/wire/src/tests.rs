//! Crate tests: round trips, truncation, random input, the specification's hex examples,
//! framing and the loopback link.

use std::string::String;
use std::vec;
use std::vec::Vec;

use proptest::prelude::*;

use crate::frame::{self, ArpOperation, EthernetAddress, Ipv4Address, UdpAddr, UdpFrameRepr};
use crate::link::{Capabilities, Link, Loopback, Medium, RxToken, TxMeta, TxToken};
use crate::packet::*;
use crate::{Error, Packet};

const SPEC: &str = include_str!("../../../docs/wire-protocol.md");

fn h(src_ep: u16, dst_ep: u16, session: u32, seq: u32) -> Header {
    Header {
        src_ep,
        dst_ep,
        session,
        seq,
        crc: false,
        ack_req: false,
    }
}

const HELLO: HelloRepr = HelloRepr {
    ver_min: 1,
    ver_max: 1,
    rx_session: 0x1122_3344,
    isn: 0x0000_1000,
    window: 256,
    max_pkt: 1472,
    credits: 128,
    caps: caps::MSG | caps::TAGGED | caps::RMA | caps::ATOMIC | caps::CQ_DATA | caps::RNDV,
    nonce: 0x0102_0304_0506_0708,
    cookie: None,
    mac: None,
};

/// The cookie of the RETRY examples: what the core computes for the spec's example
/// (section 4.9; `ofi-nostd`'s test `spec_cookie_example` checks it).
const COOKIE: [u8; COOKIE_LEN] = [
    0x00, 0x00, 0x03, 0xe8, 0xa8, 0x69, 0x16, 0x46, 0x3a, 0x49, 0x5a, 0xf8, 0x54, 0x69, 0x2c, 0x5f,
];

static PAYLOAD: [u8; 8] = *b"ofi-nost";
static OPERANDS: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 9];
static FETCHED: [u8; 8] = [0, 0, 0, 0, 0, 0, 0, 5];
/// Two records: message 5, untagged, "ofi-"; message 6, tag 0x42, "nost".
static BUNDLE_RECORDS: [u8; 32] = [
    0, 0, 0, 5, 0, 4, 0, 0, b'o', b'f', b'i', b'-', //
    0, 0, 0, 6, 0, 4, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0x42, b'n', b'o', b's', b't',
];

/// The named examples of `docs/wire-protocol.md`, as representations.
fn examples() -> Vec<(&'static str, Repr<'static>)> {
    let mut crc = h(7, 3, 0xA1B2_C3D4, 0x0000_1001);
    crc.crc = true;
    let mut ackreq = h(7, 3, 0xA1B2_C3D4, 0x0000_1005);
    ackreq.ack_req = true;
    let mut dgram_crc = h(7, 3, 0, 6);
    dgram_crc.crc = true;
    let msg_example = Repr {
        header: h(7, 3, 0xA1B2_C3D4, 0x0000_1000),
        body: Body::Msg(MsgRepr {
            ack: None,
            msg_id: 1,
            total_len: 8,
            offset: 0,
            tag: None,
            cq_data: None,
            payload: &PAYLOAD,
        }),
    };
    vec![
        (
            "hello",
            Repr {
                header: h(7, 3, 0, 0x0000_1000),
                body: Body::Hello(HELLO),
            },
        ),
        (
            "hello-auth",
            Repr {
                header: h(7, 3, 0, 0x0000_1000),
                body: Body::Hello(HelloRepr {
                    mac: Some([0xAB; MAC_LEN]),
                    ..HELLO
                }),
            },
        ),
        (
            "hello-ack",
            Repr {
                header: h(3, 7, 0x1122_3344, 0x0000_9000),
                body: Body::HelloAck(HelloRepr {
                    rx_session: 0xA1B2_C3D4,
                    isn: 0x0000_9000,
                    nonce: 0x1111_2222_3333_4444,
                    ..HELLO
                }),
            },
        ),
        (
            "reject",
            Repr {
                header: h(3, 7, 0x1122_3344, 0),
                body: Body::Reject(RejectRepr {
                    reason: reject::VERSION,
                    ver_min: 2,
                    ver_max: 3,
                }),
            },
        ),
        (
            "close",
            Repr {
                header: h(7, 3, 0xA1B2_C3D4, 0x0000_1010),
                body: Body::Close(CloseRepr {
                    ack: None,
                    reason: close::NORMAL,
                }),
            },
        ),
        (
            "reset",
            Repr {
                header: h(3, 7, 0x1122_3344, 0x0000_9000),
                body: Body::Reset(CloseRepr {
                    ack: None,
                    reason: close::UNKNOWN_SESSION,
                }),
            },
        ),
        (
            "keepalive",
            Repr {
                header: ackreq,
                body: Body::KeepAlive(KeepAliveRepr {
                    ts: 1_000_000,
                    echo_ts: 999_000,
                }),
            },
        ),
        (
            "ack",
            Repr {
                header: h(3, 7, 0x1122_3344, 0x0000_9000),
                body: Body::Ack(AckRepr {
                    cum_ack: 0x0000_1002,
                    credits: 64,
                    sack: 0b101,
                    ts: 2_000_000,
                    echo_ts: 1_000_000,
                    short: false,
                }),
            },
        ),
        ("msg", msg_example),
        (
            "msg-crc-cq",
            Repr {
                header: crc,
                body: Body::Msg(MsgRepr {
                    ack: None,
                    msg_id: 2,
                    total_len: 8,
                    offset: 0,
                    tag: None,
                    cq_data: Some(0xDEAD_BEEF),
                    payload: &PAYLOAD,
                }),
            },
        ),
        (
            "tagged-segment",
            Repr {
                header: h(7, 3, 0xA1B2_C3D4, 0x0000_1002),
                body: Body::Msg(MsgRepr {
                    ack: None,
                    msg_id: 3,
                    total_len: 3000,
                    offset: 1424,
                    tag: Some(0x0000_0000_CAFE_F00D),
                    cq_data: None,
                    payload: &PAYLOAD[..4],
                }),
            },
        ),
        (
            "rts",
            Repr {
                header: h(7, 3, 0xA1B2_C3D4, 0x0000_1003),
                body: Body::Rts(RtsRepr {
                    ack: None,
                    op_id: 0x0000_0042,
                    msg_id: 4,
                    total_len: 1 << 20,
                    tag: Some(0x0000_0000_CAFE_F00D),
                    cq_data: None,
                }),
            },
        ),
        (
            "cts",
            Repr {
                header: h(3, 7, 0x1122_3344, 0x0000_9001),
                body: Body::Cts(CtsRepr {
                    ack: None,
                    rts_op_id: 0x0000_0042,
                    rx_op_id: 0x0000_0007,
                    offset: 0,
                    len: 256 * 1024,
                    status: status::OK,
                }),
            },
        ),
        (
            "data",
            Repr {
                header: h(7, 3, 0xA1B2_C3D4, 0x0000_1004),
                body: Body::Data(DataRepr {
                    ack: None,
                    rx_op_id: 7,
                    offset: 0x10000,
                    payload: &PAYLOAD,
                }),
            },
        ),
        (
            "rma-write",
            Repr {
                header: h(7, 3, 0xA1B2_C3D4, 0x0000_1006),
                body: Body::RmaWrite(RmaWriteRepr {
                    ack: None,
                    key: 0x0000_0000_0000_BEEF,
                    addr: 0x0000_7F00_0000_1000,
                    op_id: 9,
                    total_len: 8,
                    offset: 0,
                    cq_data: Some(0x55),
                    payload: &PAYLOAD,
                }),
            },
        ),
        (
            "read-req",
            Repr {
                header: h(7, 3, 0xA1B2_C3D4, 0x0000_1007),
                body: Body::ReadReq(ReadReqRepr {
                    ack: None,
                    key: 0xBEEF,
                    addr: 0x0000_7F00_0000_1000,
                    len: 8,
                    op_id: 10,
                }),
            },
        ),
        (
            "read-resp",
            Repr {
                header: h(3, 7, 0x1122_3344, 0x0000_9002),
                body: Body::ReadResp(ReadRespRepr {
                    ack: None,
                    op_id: 10,
                    status: status::OK,
                    offset: 0,
                    payload: &PAYLOAD,
                }),
            },
        ),
        (
            "atomic-req",
            Repr {
                header: h(7, 3, 0xA1B2_C3D4, 0x0000_1008),
                body: Body::AtomicReq(AtomicReqRepr {
                    ack: None,
                    key: 0xBEEF,
                    addr: 0x0000_7F00_0000_2000,
                    op_id: 11,
                    op: AtomicOp::Cswap,
                    datatype: AtomicDatatype::U64,
                    count: 1,
                    fetch: true,
                    cq_data: None,
                    operands: &OPERANDS,
                }),
            },
        ),
        (
            "atomic-resp",
            Repr {
                header: h(3, 7, 0x1122_3344, 0x0000_9003),
                body: Body::AtomicResp(AtomicRespRepr {
                    ack: None,
                    op_id: 11,
                    status: status::OK,
                    payload: &FETCHED,
                }),
            },
        ),
        (
            "dgram",
            Repr {
                header: h(7, 3, 0, 5),
                body: Body::Dgram(DgramRepr {
                    cq_data: None,
                    payload: &PAYLOAD,
                }),
            },
        ),
        (
            "dgram-cq",
            Repr {
                header: dgram_crc,
                body: Body::Dgram(DgramRepr {
                    cq_data: Some(0x1122_3344_5566_7788),
                    payload: &PAYLOAD,
                }),
            },
        ),
        (
            "bundle",
            Repr {
                header: h(7, 3, 0xA1B2_C3D4, 0x0000_1006),
                body: Body::Bundle(BundleRepr {
                    count: 2,
                    records: &BUNDLE_RECORDS,
                    ack: None,
                }),
            },
        ),
        (
            "msg-ack",
            Repr {
                header: h(3, 7, 0x1122_3344, 0x0000_9004),
                body: Body::Msg(MsgRepr {
                    msg_id: 1,
                    total_len: 8,
                    offset: 0,
                    tag: None,
                    cq_data: None,
                    ack: Some(AckRepr {
                        cum_ack: 0x0000_1001,
                        credits: 64,
                        sack: 0,
                        ts: 2_000_100,
                        echo_ts: 1_000_000,
                        short: false,
                    }),
                    payload: &PAYLOAD,
                }),
            },
        ),
        (
            "ack-short",
            Repr {
                header: h(3, 7, 0x1122_3344, 0x0000_9000),
                body: Body::Ack(AckRepr {
                    cum_ack: 0x0000_1003,
                    credits: 64,
                    sack: 0,
                    ts: 2_000_000,
                    echo_ts: 1_000_000,
                    short: true,
                }),
            },
        ),
        (
            "sack",
            Repr {
                header: h(3, 7, 0x1122_3344, 0x0000_9000),
                body: Body::Sack(SackRepr {
                    ack: AckRepr {
                        cum_ack: 0x0000_2000,
                        credits: 1024,
                        sack: u64::MAX,
                        ts: 2_000_000,
                        echo_ts: 1_000_000,
                        short: false,
                    },
                    ranges: {
                        let mut r = SackRanges::EMPTY;
                        for off in (65..200).chain(202..701) {
                            r.push(off);
                        }
                        r
                    },
                }),
            },
        ),
        (
            "msg-short-ack",
            Repr {
                header: h(3, 7, 0x1122_3344, 0x0000_9004),
                body: Body::Msg(MsgRepr {
                    msg_id: 1,
                    total_len: 8,
                    offset: 0,
                    tag: None,
                    cq_data: Some(0x0000_0000_0000_002A),
                    ack: Some(AckRepr {
                        cum_ack: 0x0000_1001,
                        credits: 64,
                        sack: 0,
                        ts: 2_000_100,
                        echo_ts: 1_000_000,
                        short: true,
                    }),
                    payload: &PAYLOAD,
                }),
            },
        ),
        (
            "retry",
            Repr {
                header: h(3, 7, 0x1122_3344, 0),
                body: Body::Retry(RetryRepr { cookie: COOKIE }),
            },
        ),
        (
            "hello-cookie",
            Repr {
                header: h(7, 3, 0, 0x0000_1000),
                body: Body::Hello(HelloRepr {
                    caps: HELLO.caps | caps::COOKIE,
                    cookie: Some(COOKIE),
                    ..HELLO
                }),
            },
        ),
        (
            // Spec 3.9: A's transmit context 2 (endpoint 7) to B's receive context 1
            // (endpoint 3): the context indices ride in the endpoint ids' top bits.
            "hello-context",
            Repr {
                header: h(7 | 2 << EP_CTX_SHIFT, 3 | 1 << EP_CTX_SHIFT, 0, 0x0000_1000),
                body: Body::Hello(HELLO),
            },
        ),
        (
            "msg-context",
            Repr {
                header: h(
                    7 | 2 << EP_CTX_SHIFT,
                    3 | 1 << EP_CTX_SHIFT,
                    0xA1B2_C3D4,
                    0x0000_1000,
                ),
                ..msg_example
            },
        ),
        (
            "connreq",
            Repr {
                header: h(7, 3, 0x5EED_0001, 0),
                body: Body::ConnReq(CmRepr {
                    reason: 0,
                    data: b"hi",
                }),
            },
        ),
        (
            "accept",
            Repr {
                header: h(4, 7, 0x5EED_0001, 0),
                body: Body::Accept(CmRepr {
                    reason: 0,
                    data: b"ok",
                }),
            },
        ),
        (
            "cm-reject",
            Repr {
                header: h(3, 7, 0x5EED_0001, 0),
                body: Body::CmReject(CmRepr {
                    reason: cm_reason::APPLICATION,
                    data: b"no",
                }),
            },
        ),
        (
            "established",
            Repr {
                header: h(7, 4, 0x5EED_0001, 0),
                body: Body::Established(CmRepr::EMPTY),
            },
        ),
        (
            "shutdown",
            Repr {
                header: h(7, 4, 0x5EED_0001, 0),
                body: Body::Shutdown(CmRepr {
                    reason: cm_reason::APPLICATION,
                    data: &[],
                }),
            },
        ),
        (
            "shutdown-ack",
            Repr {
                header: h(4, 7, 0x5EED_0001, 0),
                body: Body::ShutdownAck(CmRepr::EMPTY),
            },
        ),
    ]
}

fn emit_vec(r: &Repr<'_>) -> Vec<u8> {
    let mut buf = vec![0u8; r.buffer_len()];
    let n = r.emit_bytes(&mut buf).expect("emit");
    assert_eq!(n, buf.len());
    buf
}

/// The hex blocks of the spec: ```hex name=NAME ... ``` (text after `#` is a comment).
fn spec_hex_blocks() -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut lines = SPEC.lines();
    while let Some(line) = lines.next() {
        let Some(name) = line.trim().strip_prefix("```hex name=") else {
            continue;
        };
        let mut bytes = Vec::new();
        for l in lines.by_ref() {
            if l.trim() == "```" {
                break;
            }
            let data = l.split('#').next().unwrap_or("");
            for tok in data.split_whitespace() {
                bytes.push(u8::from_str_radix(tok, 16).expect("hex byte"));
            }
        }
        out.push((String::from(name.trim()), bytes));
    }
    out
}

/// Annotated hex for one example, in the spec's format (used to write the spec).
fn annotated_hex(r: &Repr<'_>) -> String {
    use std::fmt::Write;
    let b = emit_vec(r);
    let mut s = String::new();
    let line = |s: &mut String, bytes: &[u8], note: &str| {
        for chunk in bytes.chunks(8) {
            let hex: Vec<String> = chunk.iter().map(|x| std::format!("{x:02x}")).collect();
            let _ = writeln!(s, "{:<24}# {note}", hex.join(" "));
        }
    };
    line(&mut s, &b[0..8], "magic \"ON\", version, type, flags, len");
    line(&mut s, &b[8..16], "src_ep, dst_ep, session");
    line(&mut s, &b[16..24], "seq, checksum");
    let ack_len = r.ack().map_or(0, |a| a.wire_len());
    let fixed = match r.body {
        Body::Hello(_) | Body::HelloAck(_) => hdr_len::HELLO,
        _ => r.body.header_len() - ack_len,
    };
    let hl = r.header_len();
    let payload_start = hl - ack_len;
    let mut pos = 24;
    let name = std::format!("{:?} header", r.packet_type()).to_uppercase();
    let fixed_end = 24 + fixed.min(hl - 24);
    let (fixed_end, tail_note) = match r.body {
        Body::Msg(_) | Body::Rts(_) | Body::RmaWrite(_) | Body::AtomicReq(_) | Body::Dgram(_) => {
            let base = match r.body {
                Body::Msg(_) => hdr_len::MSG,
                Body::Rts(_) => hdr_len::RTS,
                Body::RmaWrite(_) => hdr_len::RMA_WRITE,
                Body::Dgram(_) => hdr_len::DGRAM,
                _ => hdr_len::ATOMIC_REQ,
            };
            (24 + base, "optional fields (tag, then cq_data)")
        }
        Body::Hello(_) | Body::HelloAck(_) => (fixed_end, "mac"),
        Body::Bundle(_) => (fixed_end, "records"),
        Body::Sack(_) => (24 + hdr_len::ACK, "ranges: count, reserved; gap, len each"),
        _ => (fixed_end, ""),
    };
    line(&mut s, &b[pos..fixed_end], &name);
    pos = fixed_end;
    if pos < payload_start {
        line(&mut s, &b[pos..payload_start], tail_note);
        pos = payload_start;
    }
    if pos < hl {
        let note = if r.ack().is_some_and(|a| a.short) {
            "piggybacked short ACK (cum_ack, credits, ts, echo_ts)"
        } else {
            "piggybacked ACK (cum_ack, credits, sack, ts, echo_ts)"
        };
        line(&mut s, &b[pos..hl], note);
        pos = hl;
    }
    if pos < b.len() {
        line(&mut s, &b[pos..], "payload");
    }
    s
}

#[test]
fn spec_hex_examples_match() {
    let (blocks, sealed): (Vec<_>, Vec<_>) = spec_hex_blocks()
        .into_iter()
        .partition(|(n, _)| !n.ends_with("-mac"));
    let ex = examples();
    assert_eq!(
        blocks.len(),
        ex.len(),
        "every example appears once in the spec"
    );
    // `NAME-mac` (4.10): example NAME with flag MAC and its 16-byte trailer; the tag
    // itself is the core's to check (ofi-nostd `spec_mac_example` reads the same block).
    assert!(!sealed.is_empty(), "the spec shows a MAC'd packet");
    for (name, bytes) in &sealed {
        let plain = name.trim_end_matches("-mac");
        let (_, want) = blocks
            .iter()
            .find(|(n, _)| n == plain)
            .unwrap_or_else(|| panic!("{name}: no example {plain}"));
        let (signed, _) = mac::split(bytes).unwrap_or_else(|e| panic!("{name}: {e:?}"));
        assert_eq!(
            signed.len() + mac::TRAILER_LEN,
            bytes.len(),
            "{name}: trailer length"
        );
        let mut unflagged = signed.to_vec();
        unflagged[5] &= !(flags::MAC as u8);
        assert_eq!(&unflagged, want, "{name} is {plain} with flag MAC");
        assert!(Repr::parse_bytes(bytes).is_ok(), "{name} parses");
    }
    for (name, repr) in &ex {
        let (_, bytes) = blocks.iter().find(|(n, _)| n == name).unwrap_or_else(|| {
            panic!(
                "spec lacks hex example {name}; it should read:\n```hex name={name}\n{}```",
                annotated_hex(repr)
            )
        });
        assert_eq!(
            Repr::parse_bytes(bytes),
            Ok(*repr),
            "parse of example {name}"
        );
        assert_eq!(
            &emit_vec(repr),
            bytes,
            "emit of example {name}; the spec should read:\n```hex name={name}\n{}```",
            annotated_hex(repr)
        );
    }
    // Every v1 packet type has an example.
    for t in 0..=255u8 {
        if let Some(t) = PacketType::from_u8(t) {
            assert!(
                ex.iter().any(|(_, r)| r.packet_type() == t),
                "no example for {t:?}"
            );
        }
    }
}

#[test]
fn examples_truncations_and_bitflips_never_panic() {
    for (name, r) in examples() {
        let b = emit_vec(&r);
        for n in 0..b.len() {
            let e = Repr::parse_bytes(&b[..n]);
            assert!(e.is_err(), "{name} truncated to {n} parsed");
        }
        for i in 0..b.len() {
            for bit in 0..8 {
                let mut m = b.clone();
                m[i] ^= 1 << bit;
                if let Ok(p) = Repr::parse_bytes(&m) {
                    // Whatever parses re-emits to the same bytes (canonical encoding);
                    // bytes after `len` are not part of the packet.
                    // The MAC flag is the trailer's, not the representation's.
                    let len = Packet::new_unchecked(&m[..]).packet_len() as usize;
                    let mut e = emit_vec(&p);
                    if mac::has_mac(&m) {
                        mac::set_mac_flag(&mut e);
                    }
                    assert_eq!(e, &m[..len], "{name} byte {i} bit {bit}");
                }
            }
        }
    }
}

#[test]
fn typed_errors() {
    let r = examples()[8].1; // msg
    let b = emit_vec(&r);
    let mut m = b.clone();
    m[0] = 0;
    assert_eq!(Repr::parse_bytes(&m), Err(Error::BadMagic));
    let mut m = b.clone();
    m[2] = 2;
    assert_eq!(Repr::parse_bytes(&m), Err(Error::BadVersion));
    let mut m = b.clone();
    m[3] = 0x36;
    assert_eq!(Repr::parse_bytes(&m), Err(Error::UnknownType));
    let mut m = b.clone();
    m[4] |= 0x80; // bit 15: reserved
    assert_eq!(Repr::parse_bytes(&m), Err(Error::BadFlags));
    let mut m = b.clone();
    m[5] |= flags::FETCH as u8;
    assert_eq!(Repr::parse_bytes(&m), Err(Error::BadFlags));
    let mut m = b.clone();
    m[7] = 23;
    assert_eq!(Repr::parse_bytes(&m), Err(Error::BadLength));
    assert_eq!(Repr::parse_bytes(&b[..30]), Err(Error::Truncated));
    assert_eq!(Repr::parse_bytes(&b[..10]), Err(Error::Truncated));
    let mut m = b.clone();
    m[23] = 1; // checksum without CRC flag
    assert_eq!(Repr::parse_bytes(&m), Err(Error::Malformed));
    // CRC detects payload corruption.
    let crc = emit_vec(&examples()[9].1);
    let mut m = crc.clone();
    *m.last_mut().unwrap() ^= 1;
    assert_eq!(Repr::parse_bytes(&m), Err(Error::BadChecksum));
    // Bytes after `len` are ignored.
    let mut m = b.clone();
    m.extend_from_slice(&[0xEE; 5]);
    assert_eq!(Repr::parse_bytes(&m), Ok(r));
    // Emit refuses a too-small buffer and invalid reprs instead of panicking.
    let mut small = [0u8; 30];
    assert_eq!(r.emit_bytes(&mut small), Err(Error::BufferTooSmall));
    let bad = Repr {
        header: r.header,
        body: Body::Msg(MsgRepr {
            ack: None,
            msg_id: 1,
            total_len: 4,
            offset: 0,
            tag: None,
            cq_data: None,
            payload: &PAYLOAD,
        }),
    };
    assert_eq!(bad.emit_bytes(&mut [0; 100]), Err(Error::BadLength));
}

#[test]
fn packet_view_is_panic_free_on_short_buffers() {
    let mut short = [0u8; 5];
    let mut p = Packet::new_unchecked(&mut short[..]);
    assert_eq!(p.seq(), 0);
    p.set_seq(5);
    p.fill_checksum();
    assert!(p.body().is_empty());
    assert_eq!(p.check_len(), Err(Error::Truncated));
    let b = emit_vec(&examples()[8].1);
    let p = Packet::new_checked(&b[..]).unwrap();
    assert_eq!(p.packet_type(), Some(PacketType::Msg));
    assert_eq!(p.session(), 0xA1B2_C3D4);
    assert_eq!(p.body().len(), hdr_len::MSG + PAYLOAD.len());
}

#[test]
fn dgram_rules() {
    let ex = examples();
    let (_, r) = ex.iter().find(|(n, _)| *n == "dgram").unwrap();
    let (_, rc) = ex.iter().find(|(n, _)| *n == "dgram-cq").unwrap();
    assert!(!PacketType::Dgram.is_sequenced());
    assert_eq!(PacketType::from_u8(0x15), Some(PacketType::Dgram));
    let b = emit_vec(r);
    assert_eq!(b.len(), BASE_LEN + PAYLOAD.len(), "no type header");
    assert_eq!(r.header_len(), BASE_LEN + hdr_len::DGRAM);
    assert_eq!(rc.header_len(), BASE_LEN + 8);
    // A nonzero session is Malformed, on parse and on emit.
    let mut m = b.clone();
    m[15] = 1;
    assert_eq!(Repr::parse_bytes(&m), Err(Error::Malformed));
    let mut bad = *r;
    bad.header.session = 0xA1B2_C3D4;
    assert_eq!(bad.emit_bytes(&mut [0; 100]), Err(Error::Malformed));
    // Flags other than CRC, CQ_DATA and ACK_REQ are BadFlags.
    for f in [flags::TAGGED, flags::FETCH, 0x0020] {
        let mut m = b.clone();
        m[4..6].copy_from_slice(&f.to_be_bytes());
        assert_eq!(Repr::parse_bytes(&m), Err(Error::BadFlags), "flag {f:#x}");
    }
    // CQ_DATA without room for it is Truncated; an empty datagram is valid.
    let mut m = b[..BASE_LEN + 4].to_vec();
    m[5] = flags::CQ_DATA as u8;
    m[7] = (BASE_LEN + 4) as u8;
    assert_eq!(Repr::parse_bytes(&m), Err(Error::Truncated));
    let empty = Repr {
        header: r.header,
        body: Body::Dgram(DgramRepr {
            cq_data: None,
            payload: &[],
        }),
    };
    assert_eq!(emit_vec(&empty).len(), BASE_LEN);
    assert_eq!(Repr::parse_bytes(&emit_vec(&empty)), Ok(empty));
    // The largest datagram fits max_pkt exactly.
    for cq in [false, true] {
        let max = max_dgram_payload(1472, cq);
        assert_eq!(max, 1472 - BASE_LEN - if cq { 8 } else { 0 });
        let big = [0x42u8; 1472];
        let r = Repr {
            header: r.header,
            body: Body::Dgram(DgramRepr {
                cq_data: cq.then_some(7),
                payload: &big[..max],
            }),
        };
        assert_eq!(r.buffer_len(), 1472);
    }
    assert_eq!(max_dgram_payload(10, false), 0);
}

#[test]
fn cm_rules() {
    let ex = examples();
    let get = |name: &str| ex.iter().find(|(n, _)| *n == name).unwrap().1;
    for t in 0x30..=0x35u8 {
        let t = PacketType::from_u8(t).expect("a CM type");
        assert!(!t.is_sequenced(), "{t:?} is unsequenced");
    }
    assert_eq!(PacketType::from_u8(0x36), None, "0x36.. stay reserved");
    // CM data of every size up to the limit round-trips; one byte more is Malformed.
    static BIG: [u8; CM_DATA_MAX + 1] = [0x5A; CM_DATA_MAX + 1];
    let big = &BIG;
    type Make = fn(CmRepr<'static>) -> Body<'static>;
    let makers: [Make; 3] = [Body::ConnReq, Body::Accept, Body::CmReject];
    for body in makers {
        for n in 0..=CM_DATA_MAX {
            let r = Repr {
                header: get("connreq").header,
                body: body(CmRepr {
                    reason: 0,
                    data: &big[..n],
                }),
            };
            let b = emit_vec(&r);
            assert_eq!(b.len(), BASE_LEN + hdr_len::CM + n);
            assert_eq!(Repr::parse_bytes(&b), Ok(r));
        }
        let r = Repr {
            header: get("connreq").header,
            body: body(CmRepr {
                reason: 0,
                data: big,
            }),
        };
        assert_eq!(r.emit_bytes(&mut [0; 400]), Err(Error::Malformed));
    }
    // Session 0 is Malformed on every CM type, on emit and on parse.
    for name in [
        "connreq",
        "accept",
        "cm-reject",
        "established",
        "shutdown",
        "shutdown-ack",
    ] {
        let mut r = get(name);
        let mut b = emit_vec(&r);
        b[12..16].fill(0);
        assert_eq!(Repr::parse_bytes(&b), Err(Error::Malformed), "{name}");
        r.header.session = 0;
        assert_eq!(r.emit_bytes(&mut [0; 64]), Err(Error::Malformed), "{name}");
    }
    // A reason on CONNREQ / ACCEPT / ESTABLISHED / SHUTDOWN_ACK, data on ESTABLISHED /
    // SHUTDOWN / SHUTDOWN_ACK, a nonzero reserved field and ACK flags are refused.
    for name in ["connreq", "accept", "established", "shutdown-ack"] {
        let mut b = emit_vec(&get(name));
        b[25] = 1;
        assert_eq!(Repr::parse_bytes(&b), Err(Error::Malformed), "{name}");
    }
    for name in ["established", "shutdown", "shutdown-ack"] {
        let mut b = emit_vec(&get(name));
        b.push(0xEE);
        b[7] += 1;
        assert_eq!(Repr::parse_bytes(&b), Err(Error::Malformed), "{name}");
    }
    let mut b = emit_vec(&get("cm-reject"));
    b[27] = 1;
    assert_eq!(Repr::parse_bytes(&b), Err(Error::Malformed));
    let b = emit_vec(&get("connreq"));
    for f in [flags::ACK, flags::CQ_DATA, flags::SHORT_ACK] {
        assert_eq!(
            Repr::parse_bytes(&with_flag(&b, f)),
            Err(Error::BadFlags),
            "{f:#x}"
        );
    }
    // A rejection's reason is reported whatever its value.
    let mut b = emit_vec(&get("cm-reject"));
    b[24..26].copy_from_slice(&0x7777u16.to_be_bytes());
    let Ok(Repr {
        body: Body::CmReject(c),
        ..
    }) = Repr::parse_bytes(&b)
    else {
        panic!("a CM_REJECT with an unknown reason parses");
    };
    assert_eq!((c.reason, c.data), (0x7777, &b"no"[..]));
}

// ---- property tests -------------------------------------------------------------------

/// `r` without a piggybacked ACK.
fn without_ack(mut r: Repr<'_>) -> Repr<'_> {
    r.body.set_ack(None).unwrap();
    r
}

/// Packet `b` with the low-byte flag `f` added (checksum refreshed).
fn with_flag(b: &[u8], f: u16) -> Vec<u8> {
    let mut m = b.to_vec();
    m[5] |= f as u8;
    Packet::new_unchecked(&mut m[..]).fill_checksum();
    m
}

#[test]
fn piggybacked_ack_rules() {
    let ack = AckRepr {
        cum_ack: 0x0000_1001,
        credits: 64,
        sack: 0b1001,
        ts: 7,
        echo_ts: 9,
        short: false,
    };
    assert_eq!(flags::ACK, 0x0020);
    assert_ne!(flags::ALL & flags::ACK, 0);
    for (name, r) in examples() {
        let plain = without_ack(r);
        let b = emit_vec(&plain);
        let t = r.packet_type();
        if !t.is_sequenced() {
            // The flag is BadFlags on every unsequenced type, on parse and on emit.
            let m = with_flag(&b, flags::ACK);
            assert_eq!(Repr::parse_bytes(&m), Err(Error::BadFlags), "{name}");
            let mut with = plain;
            assert_eq!(with.body.set_ack(Some(ack)), Err(Error::BadFlags), "{name}");
            if let Body::Reset(c) = &mut with.body {
                c.ack = Some(ack);
                assert_eq!(with.emit_bytes(&mut [0; 200]), Err(Error::BadFlags));
            }
            continue;
        }
        // Sequenced: the field sits after the other optional fields, before the payload.
        let mut with = plain;
        with.body.set_ack(Some(ack)).unwrap();
        assert_eq!(with.ack(), Some(ack));
        let w = emit_vec(&with);
        assert_eq!(w.len(), b.len() + hdr_len::ACK, "{name}");
        let at = plain.header_len();
        assert_eq!(&w[..4], &b[..4]);
        assert_eq!(u16::from_be_bytes([w[4], w[5]]) & flags::ACK, flags::ACK);
        assert_eq!(
            &w[24..at],
            &b[24..at],
            "{name}: fixed header and optional fields"
        );
        assert_eq!(
            &w[at..at + 8],
            &[0, 0, 0x10, 0x01, 0, 0, 0, 64],
            "{name}: cum_ack, credits"
        );
        assert_eq!(
            &w[at + hdr_len::ACK..],
            &b[at..],
            "{name}: payload after the ACK"
        );
        assert_eq!(Repr::parse_bytes(&w), Ok(with), "{name}");
        // Flag without the field: too short for types without payload; with payload,
        // whatever follows is read as the ACK (still Truncated for these short ones).
        let m = with_flag(&b, flags::ACK);
        if matches!(r.body, Body::Bundle(_)) {
            // The records' first bytes read as the field: what is left is no record.
            assert!(Repr::parse_bytes(&m).is_err(), "{name}");
        } else {
            assert_eq!(Repr::parse_bytes(&m), Err(Error::Truncated), "{name}");
        }
        // Every cut inside the packet fails.
        for n in 0..w.len() {
            assert!(Repr::parse_bytes(&w[..n]).is_err(), "{name} cut at {n}");
        }
        // Types without payload: `len` must be exactly the header with the field.
        if matches!(
            r.body,
            Body::Close(_) | Body::Rts(_) | Body::Cts(_) | Body::ReadReq(_)
        ) {
            let mut m = w.clone();
            m.push(0);
            let l = m.len() as u16;
            m[6..8].copy_from_slice(&l.to_be_bytes());
            Packet::new_unchecked(&mut m[..]).fill_checksum();
            assert_eq!(Repr::parse_bytes(&m), Err(Error::BadLength), "{name}");
        }
    }
    // Removing the ACK again is always allowed; attaching one to an ACK is not.
    let mut a = examples().into_iter().find(|(n, _)| *n == "ack").unwrap().1;
    assert_eq!(a.body.set_ack(None), Ok(()));
    assert_eq!(a.body.set_ack(Some(ack)), Err(Error::BadFlags));
}

#[test]
fn short_ack_rules() {
    let short = AckRepr {
        cum_ack: 0x0000_1001,
        credits: 64,
        sack: 0,
        ts: 7,
        echo_ts: 9,
        short: true,
    };
    assert_eq!(flags::SHORT_ACK, 0x0040);
    assert_eq!(short.wire_len(), hdr_len::SHORT_ACK);
    for (name, r) in examples() {
        let plain = without_ack(r);
        let b = emit_vec(&plain);
        let t = r.packet_type();
        if t == PacketType::Ack {
            continue;
        }
        // SHORT_ACK without ACK is BadFlags on every other type.
        let m = with_flag(&b, flags::SHORT_ACK);
        assert_eq!(Repr::parse_bytes(&m), Err(Error::BadFlags), "{name}");
        if !t.is_sequenced() {
            continue;
        }
        // Sequenced: 8 bytes shorter than the long form, the same fields but `sack`.
        let mut with = plain;
        with.body.set_ack(Some(short)).unwrap();
        let w = emit_vec(&with);
        let long = {
            let mut l = plain;
            l.body
                .set_ack(Some(AckRepr {
                    short: false,
                    ..short
                }))
                .unwrap();
            emit_vec(&l)
        };
        assert_eq!(w.len() + 8, long.len(), "{name}");
        let at = plain.header_len();
        assert_eq!(
            u16::from_be_bytes([w[4], w[5]]) & (flags::ACK | flags::SHORT_ACK),
            flags::ACK | flags::SHORT_ACK
        );
        assert_eq!(
            &w[at..at + 8],
            &long[at..at + 8],
            "{name}: cum_ack, credits"
        );
        assert_eq!(
            &w[at + 8..at + 16],
            &long[at + 16..at + 24],
            "{name}: ts, echo_ts"
        );
        assert_eq!(&w[at + 16..], &b[at..], "{name}: payload after the ACK");
        assert_eq!(Repr::parse_bytes(&w), Ok(with), "{name}");
        // A short ACK cannot carry selective acks: emit refuses.
        let mut bad = plain;
        bad.body
            .set_ack(Some(AckRepr { sack: 1, ..short }))
            .unwrap();
        assert_eq!(
            bad.emit_bytes(&mut [0; 400]),
            Err(Error::BadFlags),
            "{name}"
        );
        // Every cut fails.
        for n in 0..w.len() {
            assert!(Repr::parse_bytes(&w[..n]).is_err(), "{name} cut at {n}");
        }
    }
    // The ACK packet: 16-byte body with the flag, refused with selective acks.
    let a = examples()
        .into_iter()
        .find(|(n, _)| *n == "ack-short")
        .unwrap()
        .1;
    let w = emit_vec(&a);
    assert_eq!(w.len(), BASE_LEN + hdr_len::SHORT_ACK);
    let Body::Ack(x) = a.body else { unreachable!() };
    let bad = Repr {
        body: Body::Ack(AckRepr { sack: 4, ..x }),
        ..a
    };
    assert_eq!(bad.emit_bytes(&mut [0; 100]), Err(Error::BadFlags));
    // Without the flag the same bytes are a truncated long ACK.
    let mut m = w.clone();
    m[5] &= !(flags::SHORT_ACK as u8);
    Packet::new_unchecked(&mut m[..]).fill_checksum();
    assert_eq!(Repr::parse_bytes(&m), Err(Error::Truncated));
}

/// Build a valid representation of type `kind % 19` from arbitrary numbers.
fn build<'a>(kind: u8, hd: Header, n: &[u64; 8], payload: &'a [u8]) -> Repr<'a> {
    let opt = |bit: u64, v: u64| if n[7] & bit != 0 { Some(v) } else { None };
    let mut header = hd;
    let hello = |ack: bool| HelloRepr {
        ver_min: if ack { 1 + (n[0] as u8 % 4) } else { 1 },
        ver_max: 1 + (n[0] as u8 % 4),
        rx_session: (n[1] as u32).max(1),
        isn: n[2] as u32,
        window: (n[3] as u16).max(1),
        max_pkt: (n[4] as u16).max(MIN_MAX_PKT),
        credits: n[5] as u32,
        caps: n[6],
        nonce: n[7],
        cookie: (!ack && n[0] & 0x200 != 0).then_some([n[2] as u8; COOKIE_LEN]),
        mac: if n[0] & 0x100 != 0 {
            Some([n[1] as u8; MAC_LEN])
        } else {
            None
        },
    };
    let body = match kind % 19 {
        0 => {
            header.session = 0;
            Body::Hello(hello(false))
        }
        1 => {
            header.session = header.session.max(1);
            Body::HelloAck(hello(true))
        }
        2 => Body::Reject(RejectRepr {
            reason: n[0] as u16,
            ver_min: (n[1] as u8).min(n[2] as u8),
            ver_max: (n[1] as u8).max(n[2] as u8),
        }),
        3 => Body::Close(CloseRepr {
            ack: None,
            reason: n[0] as u16,
        }),
        4 => Body::Reset(CloseRepr {
            ack: None,
            reason: n[0] as u16,
        }),
        5 => Body::KeepAlive(KeepAliveRepr {
            ts: n[0] as u32,
            echo_ts: n[1] as u32,
        }),
        6 => Body::Ack(AckRepr {
            cum_ack: n[0] as u32,
            credits: n[1] as u32,
            sack: if n[7] & 0x20 != 0 { 0 } else { n[2] },
            ts: n[3] as u32,
            echo_ts: n[4] as u32,
            short: n[7] & 0x20 != 0,
        }),
        7 | 8 => {
            let offset = (n[0] as u32) % (u32::MAX - payload.len() as u32);
            let total = offset + payload.len() as u32;
            let total = total.saturating_add(n[1] as u32 % 1000);
            Body::Msg(MsgRepr {
                ack: None,
                msg_id: n[2] as u32,
                total_len: total,
                offset,
                tag: if kind % 19 == 8 { Some(n[3]) } else { None },
                cq_data: opt(1, n[4]),
                payload,
            })
        }
        9 => Body::Rts(RtsRepr {
            ack: None,
            op_id: n[0] as u32,
            msg_id: n[1] as u32,
            total_len: n[2],
            tag: opt(2, n[3]),
            cq_data: opt(1, n[4]),
        }),
        10 => {
            let status = if n[7] & 4 != 0 { n[0] as u16 } else { 0 };
            Body::Cts(CtsRepr {
                ack: None,
                rts_op_id: n[1] as u32,
                rx_op_id: n[2] as u32,
                offset: n[3],
                len: if status == 0 { n[4] as u32 } else { 0 },
                status,
            })
        }
        11 => Body::Data(DataRepr {
            ack: None,
            rx_op_id: n[0] as u32,
            offset: n[1] % (u64::MAX - 1000),
            payload,
        }),
        12 => {
            let offset = n[0] % (1 << 40);
            let total = offset + payload.len() as u64 + n[1] % 1000;
            Body::RmaWrite(RmaWriteRepr {
                ack: None,
                key: n[2],
                addr: n[3] % (u64::MAX - total),
                op_id: n[4] as u32,
                total_len: total,
                offset,
                cq_data: opt(1, n[5]),
                payload,
            })
        }
        13 => Body::ReadReq(ReadReqRepr {
            ack: None,
            key: n[0],
            len: n[1] % (1 << 40),
            addr: n[2] % (1 << 60),
            op_id: n[3] as u32,
        }),
        14 => {
            let status = if n[7] & 4 != 0 { n[0] as u16 } else { 0 };
            Body::ReadResp(ReadRespRepr {
                ack: None,
                op_id: n[1] as u32,
                status,
                offset: n[2] % (1 << 60),
                payload: if status == 0 { payload } else { &[] },
            })
        }
        15 => {
            let op = AtomicOp::from_u8((n[0] % 19) as u8).unwrap();
            let datatype = AtomicDatatype::from_u8((n[1] % 12) as u8).unwrap();
            let count = 1 + (n[2] % 4) as u16;
            let want = count as usize * datatype.size() * op.operand_arrays();
            // `payload` may be too short; use a static pool of operand bytes instead.
            static POOL: [u8; 128] = [0x5A; 128];
            Body::AtomicReq(AtomicReqRepr {
                ack: None,
                key: n[3],
                addr: n[4] % (1 << 60),
                op_id: n[5] as u32,
                op,
                datatype,
                count,
                fetch: op.always_fetches() || n[7] & 8 != 0,
                cq_data: opt(1, n[6]),
                operands: &POOL[..want],
            })
        }
        16 => {
            let status = if n[7] & 4 != 0 { n[0] as u16 } else { 0 };
            Body::AtomicResp(AtomicRespRepr {
                ack: None,
                op_id: n[1] as u32,
                status,
                payload: if status == 0 { payload } else { &[] },
            })
        }
        17 => {
            header.session = header.session.max(1);
            Body::Retry(RetryRepr {
                cookie: [n[3] as u8; COOKIE_LEN],
            })
        }
        _ => {
            header.session = 0;
            Body::Dgram(DgramRepr {
                cq_data: opt(1, n[0]),
                payload,
            })
        }
    };
    let mut r = Repr { header, body };
    // A piggybacked ACK on a sequenced type, from numbers the body uses too (so the
    // fields vary without another argument).
    if n[7] & 0x10 != 0 && r.packet_type().is_sequenced() {
        let short = n[7] & 0x20 != 0;
        let ack = AckRepr {
            cum_ack: n[6] as u32,
            credits: (n[5] >> 32) as u32,
            sack: if short { 0 } else { n[4].rotate_left(7) },
            ts: (n[3] >> 32) as u32,
            echo_ts: (n[2] >> 32) as u32,
            short,
        };
        r.body
            .set_ack(Some(ack))
            .expect("sequenced types carry an ACK");
    }
    r
}

fn arb_header() -> impl Strategy<Value = Header> {
    (
        any::<u16>(),
        any::<u16>(),
        any::<u32>(),
        any::<u32>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(src_ep, dst_ep, session, seq, crc, ack_req)| Header {
            src_ep,
            dst_ep,
            session,
            seq,
            crc,
            ack_req,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn round_trip_every_type(
        kind in 0u8..19,
        hd in arb_header(),
        n in any::<[u64; 8]>(),
        payload in proptest::collection::vec(any::<u8>(), 0..80),
    ) {
        let r = build(kind, hd, &n, &payload);
        let bytes = emit_vec(&r);
        prop_assert_eq!(bytes.len(), r.buffer_len());
        prop_assert_eq!(Repr::parse_bytes(&bytes), Ok(r));
        prop_assert_eq!(Packet::new_checked(&bytes[..]).map(|p| p.packet_type()), Ok(Some(r.packet_type())));
        for cut in 0..bytes.len() {
            prop_assert!(Repr::parse_bytes(&bytes[..cut]).is_err());
        }
    }

    /// The send path's header emitter writes exactly what `Repr::emit` writes for the
    /// same MSG or TAGGED packet (with the payload and checksum added by the caller).
    #[test]
    fn emit_msg_header_matches_emit(
        hd in arb_header(),
        n in any::<[u64; 6]>(),
        opts in any::<(bool, bool, bool)>(),
        payload in proptest::collection::vec(any::<u8>(), 0..80),
        extra in 0u32..1000,
        at in 0u32..100,
    ) {
        let (tagged, data, ack) = opts;
        let total = payload.len() as u32 + extra;
        let m = MsgRepr {
            msg_id: n[0] as u32,
            total_len: total,
            offset: at.min(extra),
            tag: tagged.then_some(n[1]),
            cq_data: data.then_some(n[2]),
            payload: &payload,
            ack: ack.then_some(AckRepr {
                cum_ack: n[3] as u32,
                credits: (n[3] >> 32) as u32,
                sack: if n[4] & 1 != 0 { 0 } else { n[4] },
                ts: n[5] as u32,
                echo_ts: (n[5] >> 32) as u32,
                short: n[4] & 1 != 0,
            }),
        };
        let want = emit_vec(&Repr { header: hd, body: Body::Msg(m) });
        let mut got = vec![0xA5u8; want.len() + 7];
        let hl = emit_msg_header(&mut got, &hd, &m, payload.len()).unwrap();
        got[hl..hl + payload.len()].copy_from_slice(&payload);
        got.truncate(hl + payload.len());
        Packet::new_unchecked(&mut got[..]).fill_checksum();
        prop_assert_eq!(&got, &want);
        // Too small a buffer, or a segment past the message's end, is refused.
        prop_assert!(emit_msg_header(&mut got[..hl - 1], &hd, &m, payload.len()).is_err());
        let past = MsgRepr { offset: total - payload.len() as u32 + 1, ..m };
        prop_assert!(emit_msg_header(&mut got, &hd, &past, payload.len()).is_err());
    }

    /// BUNDLE: records written with `emit_bundle_record` behind `emit_bundle_header`
    /// are byte for byte what `Repr::emit` writes; they parse back into the same
    /// messages, in order; every cut, a gap in the message ids, a wrong count and
    /// undefined record flags are refused.
    #[test]
    fn bundle_round_trip_and_rules(
        hd in arb_header(),
        first in any::<u32>(),
        msgs in proptest::collection::vec(
            (any::<Option<u64>>(), any::<Option<u64>>(), proptest::collection::vec(any::<u8>(), 0..40)),
            1..8,
        ),
        ack in any::<Option<(u64, u64, bool)>>(),
    ) {
        let ack = ack.map(|(a, b, short)| AckRepr {
            cum_ack: a as u32,
            credits: (a >> 32) as u32,
            sack: if short { 0 } else { b },
            ts: b as u32,
            echo_ts: (b >> 32) as u32,
            short,
        });
        let mut records = Vec::new();
        for (i, (tag, data, payload)) in msgs.iter().enumerate() {
            let at = records.len();
            records.resize(at + bundle_record_len(tag.is_some(), data.is_some(), payload.len()), 0);
            let id = first.wrapping_add(i as u32);
            let hl = emit_bundle_record(&mut records[at..], id, *tag, *data, payload.len()).unwrap();
            records[at + hl..].copy_from_slice(payload);
        }
        let b = BundleRepr { count: msgs.len() as u16, records: &records, ack };
        let r = Repr { header: hd, body: Body::Bundle(b) };
        let want = emit_vec(&r);
        prop_assert_eq!(Repr::parse_bytes(&want), Ok(r));
        // The direct writer.
        let mut got = vec![0x5Au8; want.len()];
        let hl = emit_bundle_header(&mut got, &hd, b.count, ack, want.len()).unwrap();
        prop_assert_eq!(hl, bundle_header_len(ack.as_ref()));
        got[hl..].copy_from_slice(&records);
        Packet::new_unchecked(&mut got[..]).fill_checksum();
        prop_assert_eq!(&got, &want);
        // The messages, in order.
        let back: Vec<_> = b.msgs().collect();
        prop_assert_eq!(back.len(), msgs.len());
        for (i, (m, (tag, data, payload))) in back.iter().zip(&msgs).enumerate() {
            prop_assert_eq!(m.msg_id, first.wrapping_add(i as u32));
            prop_assert_eq!(m.tag, *tag);
            prop_assert_eq!(m.cq_data, *data);
            prop_assert_eq!(m.payload, &payload[..]);
            prop_assert_eq!(m.as_msg().total_len as usize, payload.len());
        }
        for cut in 0..want.len() {
            prop_assert!(Repr::parse_bytes(&want[..cut]).is_err());
        }
        // A wrong count is refused (too many: a missing record; too few: bytes left).
        for count in [0, b.count - 1, b.count + 1] {
            if count == b.count - 1 && count == 0 {
                continue;
            }
            let bad = Repr { header: hd, body: Body::Bundle(BundleRepr { count, ..b }) };
            prop_assert!(bad.emit_bytes(&mut [0; 1024]).is_err());
            let mut m = want.clone();
            m[24..26].copy_from_slice(&count.to_be_bytes());
            Packet::new_unchecked(&mut m[..]).fill_checksum();
            prop_assert!(Repr::parse_bytes(&m).is_err());
        }
        // The second record's id out of sequence, or undefined record flags.
        let rec0 = hl + bundle_record_len(msgs[0].0.is_some(), msgs[0].1.is_some(), msgs[0].2.len());
        if msgs.len() > 1 {
            let mut m = want.clone();
            m[rec0 + 3] ^= 0x02;
            Packet::new_unchecked(&mut m[..]).fill_checksum();
            prop_assert_eq!(Repr::parse_bytes(&m), Err(Error::Malformed));
        }
        let mut m = want.clone();
        m[hl + 6] |= 0x80;
        Packet::new_unchecked(&mut m[..]).fill_checksum();
        prop_assert_eq!(Repr::parse_bytes(&m), Err(Error::Malformed));
    }

    /// Our UDP checksum is smoltcp's: a frame we emit verifies under smoltcp, its
    /// checksum equals the one smoltcp fills in, and any flipped bit in the datagram
    /// fails our verification.
    #[test]
    fn udp_checksum_is_rfc_1071(
        payload in proptest::collection::vec(any::<u8>(), 0..300),
        ips in any::<([u8; 4], [u8; 4], u16, u16)>(),
        flip in any::<(usize, u8)>(),
    ) {
        use smoltcp::wire::{IpAddress, Ipv4Packet, UdpPacket};
        let caps = Capabilities::new(Medium::Ethernet, 1514).checksum_caps();
        let repr = UdpFrameRepr {
            src: UdpAddr::new(Ipv4Address::from(ips.0), ips.2.max(1)),
            dst: UdpAddr::new(Ipv4Address::from(ips.1), ips.3.max(1)),
            ..udp_repr()
        };
        let mut buf = vec![0u8; 400];
        let n = frame::emit_udp_ipv4_ethernet(&mut buf, &repr, &payload, &caps).unwrap();
        buf.truncate(n);
        let ours = u16::from_be_bytes([buf[40], buf[41]]);
        let mut smol = buf.clone();
        {
            let mut ip = Ipv4Packet::new_unchecked(&mut smol[14..]);
            let (s, d) = (ip.src_addr(), ip.dst_addr());
            let mut udp = UdpPacket::new_unchecked(ip.payload_mut());
            udp.fill_checksum(&IpAddress::Ipv4(s), &IpAddress::Ipv4(d));
            prop_assert!(udp.verify_checksum(&IpAddress::Ipv4(s), &IpAddress::Ipv4(d)));
        }
        prop_assert_eq!(ours, u16::from_be_bytes([smol[40], smol[41]]));
        let parsed = frame::parse_eth_ipv4_udp(&buf, &caps).unwrap();
        prop_assert_eq!(&buf[parsed.payload], &payload[..]);
        // One flipped bit in the UDP header or payload (not the ports' zero check).
        let at = 34 + flip.0 % (8 + payload.len());
        let bit = 1u8 << (flip.1 % 8);
        buf[at] ^= bit;
        let r = frame::parse_eth_ipv4_udp(&buf, &caps);
        prop_assert!(r.is_err(), "flipped bit {} of byte {}: {:?}", bit, at, r.map(|f| f.payload));
    }

    #[test]
    fn mutated_packets_never_panic(
        kind in 0u8..19,
        hd in arb_header(),
        n in any::<[u64; 8]>(),
        payload in proptest::collection::vec(any::<u8>(), 0..40),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
    ) {
        let mut bytes = emit_vec(&build(kind, hd, &n, &payload));
        for (i, v) in edits {
            let l = bytes.len();
            bytes[i % l] = v;
        }
        if let Ok(p) = Repr::parse_bytes(&bytes) {
            // The MAC flag is the trailer's, not the representation's.
            let len = Packet::new_unchecked(&bytes[..]).packet_len() as usize;
            let mut e = emit_vec(&p);
            if mac::has_mac(&bytes) {
                mac::set_mac_flag(&mut e);
            }
            prop_assert_eq!(e, &bytes[..len]);
        }
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = Repr::parse_bytes(&bytes);
        let _ = frame::parse_frame(&bytes, &Default::default());
        // Also with our magic/version in front, to get past the first checks.
        let mut b = vec![0x4F, 0x4E, 1];
        b.extend_from_slice(&bytes);
        let _ = Repr::parse_bytes(&b);
    }

    #[test]
    fn random_frames_never_panic(
        payload in proptest::collection::vec(any::<u8>(), 0..64),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..4),
        cut in any::<usize>(),
    ) {
        let caps = Default::default();
        let mut buf = vec![0u8; 200];
        let n = frame::emit_udp_ipv4_ethernet(&mut buf, &udp_repr(), &payload, &caps).unwrap();
        buf.truncate(n);
        for (i, v) in edits {
            buf[i % n] = v;
        }
        let _ = frame::parse_frame(&buf[..cut % (n + 1)], &caps);
        let _ = frame::parse_frame(&buf, &caps);
    }
}

// ---- framing ---------------------------------------------------------------------------

const MAC_A: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0A]);
const MAC_B: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x0B]);
const IP_A: Ipv4Address = Ipv4Address::new(10, 0, 0, 1);
const IP_B: Ipv4Address = Ipv4Address::new(10, 0, 0, 2);

fn udp_repr() -> UdpFrameRepr {
    UdpFrameRepr {
        src_mac: MAC_A,
        dst_mac: MAC_B,
        src: UdpAddr::new(IP_A, 4791),
        dst: UdpAddr::new(IP_B, 4792),
        ttl: frame::DEFAULT_TTL,
    }
}

#[test]
fn udp_frame_round_trip_and_checksums() {
    let caps = Capabilities::new(Medium::Ethernet, 1514).checksum_caps();
    let pkt = emit_vec(&examples()[8].1);
    let mut buf = [0u8; 1514];
    let n = frame::emit_udp_ipv4_ethernet(&mut buf, &udp_repr(), &pkt, &caps).unwrap();
    assert_eq!(n, frame::ETH_IPV4_UDP_HEADER_LEN + pkt.len());
    let f = frame::parse_eth_ipv4_udp(&buf[..n], &caps).unwrap();
    assert_eq!(f.repr, udp_repr());
    assert_eq!(&buf[f.payload.clone()], &pkt[..]);
    assert!(Repr::parse_bytes(&buf[f.payload.clone()]).is_ok());
    // Ethernet padding after the IP datagram is ignored.
    let mut padded = buf[..n].to_vec();
    padded.extend_from_slice(&[0; 10]);
    assert_eq!(
        frame::parse_eth_ipv4_udp(&padded, &caps).unwrap().payload,
        f.payload
    );

    // Corrupt payload: UDP checksum fails.
    let mut bad = buf[..n].to_vec();
    bad[n - 1] ^= 0x40;
    assert_eq!(
        frame::parse_eth_ipv4_udp(&bad, &caps),
        Err(Error::BadChecksum)
    );
    // ... unless the NIC verified it (offload).
    let mut off = Capabilities::new(Medium::Ethernet, 1514);
    off.rx_checksum_offload = true;
    assert!(frame::parse_eth_ipv4_udp(&bad, &off.checksum_caps()).is_ok());
    // Corrupt IPv4 header (TTL): header checksum fails.
    let mut bad = buf[..n].to_vec();
    bad[14 + 8] ^= 1;
    assert_eq!(
        frame::parse_eth_ipv4_udp(&bad, &caps),
        Err(Error::BadChecksum)
    );
    // A zero UDP checksum is refused on raw links.
    let mut bad = buf[..n].to_vec();
    bad[14 + 20 + 6] = 0;
    bad[14 + 20 + 7] = 0;
    assert_eq!(
        frame::parse_eth_ipv4_udp(&bad, &caps),
        Err(Error::BadChecksum)
    );
    // Not UDP / not IPv4.
    let mut other = buf[..n].to_vec();
    other[12] = 0x86;
    other[13] = 0xDD;
    assert_eq!(frame::parse_frame(&other, &caps), Err(Error::NotOurs));
    // Every truncation is an error.
    for cut in 0..n {
        assert!(frame::parse_frame(&buf[..cut], &caps).is_err(), "cut {cut}");
    }
    // Tx offload leaves checksums zero.
    let mut tx_off = Capabilities::new(Medium::Ethernet, 1514);
    tx_off.tx_checksum_offload = true;
    let mut buf2 = [0u8; 1514];
    let n2 = frame::emit_udp_ipv4_ethernet(&mut buf2, &udp_repr(), &pkt, &tx_off.checksum_caps())
        .unwrap();
    assert_eq!(&buf2[14 + 10..14 + 12], &[0, 0]);
    assert_eq!(&buf2[14 + 20 + 6..14 + 20 + 8], &[0, 0]);
    assert_eq!(n2, n);
    assert_eq!(
        frame::emit_udp_ipv4_ethernet(&mut buf2[..40], &udp_repr(), &pkt, &caps),
        Err(Error::BufferTooSmall)
    );
}

#[test]
fn arp_request_reply() {
    let mut buf = [0u8; 64];
    let n = frame::emit_arp_request(&mut buf, MAC_A, IP_A, IP_B).unwrap();
    assert_eq!(n, frame::ARP_FRAME_LEN);
    assert_eq!(&buf[..6], &[0xFF; 6]);
    let req = match frame::parse_frame(&buf[..n], &Default::default()).unwrap() {
        frame::ParsedFrame::Arp(a) => a,
        other => panic!("{other:?}"),
    };
    assert_eq!(req.operation, ArpOperation::Request);
    assert_eq!(
        (req.sender_mac, req.sender_ip, req.target_ip),
        (MAC_A, IP_A, IP_B)
    );
    let mut rbuf = [0u8; 64];
    let n = frame::emit_arp_reply(&mut rbuf, MAC_B, IP_B, &req).unwrap();
    assert_eq!(&rbuf[..6], &MAC_A.0);
    let rep = frame::parse_arp(&rbuf[..n]).unwrap();
    assert_eq!(rep.operation, ArpOperation::Reply);
    assert_eq!((rep.sender_mac, rep.sender_ip), (MAC_B, IP_B));
    assert_eq!((rep.target_mac, rep.target_ip), (MAC_A, IP_A));
    for cut in 0..n {
        assert!(frame::parse_arp(&rbuf[..cut]).is_err());
    }
    let mut bad = rbuf;
    bad[14 + 7] = 9; // unknown operation
    assert_eq!(frame::parse_arp(&bad[..n]), Err(Error::Malformed));
    assert_eq!(
        frame::emit_arp_request(&mut [0; 41], MAC_A, IP_A, IP_B),
        Err(Error::BufferTooSmall)
    );
}

// ---- loopback --------------------------------------------------------------------------

#[test]
fn loopback_looped_send_receive_and_backpressure() {
    let me = UdpAddr::new(IP_A, 4791);
    let mut l: Loopback<4, 256> = Loopback::new_looped(Medium::Udp, Some(me));
    assert!(l.receive().is_none());
    for i in 0..4u8 {
        let tok = l.transmit().expect("room");
        tok.consume(3, |b| b.copy_from_slice(&[i, i, i]));
    }
    assert!(l.transmit().is_none(), "full queue applies back-pressure");
    let tok = l.receive().unwrap();
    assert_eq!(tok.meta().src, Some(me));
    assert_eq!(tok.consume(|b| b.to_vec()), vec![0, 0, 0]);
    let mut got = Vec::new();
    let n = l.receive_burst(10, |m, b| got.push((m.src, b.to_vec())));
    assert_eq!(n, 3);
    assert_eq!(got[2], (Some(me), vec![3, 3, 3]));
    // A zero-length or oversized send is dropped.
    l.transmit()
        .unwrap()
        .consume_with(100, |_| (TxMeta::len(0), ()));
    l.transmit()
        .unwrap()
        .consume_with(100, |_| (TxMeta::len(101), ()));
    assert_eq!(l.rx_len(), 0);
    // consume() beyond the MTU lends at most MTU bytes.
    l.transmit()
        .unwrap()
        .consume(1000, |b| assert_eq!(b.len(), 256));
    assert_eq!(l.rx_len(), 1);
}

#[test]
fn loopback_pair_with_bursts_and_protocol_packets() {
    let a_addr = UdpAddr::new(IP_A, 1);
    let b_addr = UdpAddr::new(IP_B, 2);
    let mut a: Loopback<8, 1500> = Loopback::new(Medium::Udp, Some(a_addr));
    let mut b: Loopback<8, 1500> = Loopback::new(Medium::Udp, Some(b_addr));
    let ex = examples();
    let mut it = ex.iter();
    let sent = a.transmit_burst(16, |buf| {
        let (_, r) = it.next()?;
        let n = r.emit_bytes(buf).ok()?;
        Some(TxMeta::to(n, b_addr))
    });
    assert_eq!(sent, 8, "burst limited by queue capacity");
    assert_eq!(a.pop_tx(|dst, _| dst), Some(Some(b_addr)));
    assert_eq!(a.transfer_to(&mut b), 7);
    let mut parsed = 0;
    b.receive_burst(8, |m, buf| {
        assert_eq!(m.src, Some(a_addr));
        let r = Repr::parse_bytes(buf).unwrap();
        assert_eq!(r, ex[parsed + 1].1);
        parsed += 1;
    });
    assert_eq!(parsed, 7);
    assert!(b.inject(&[1, 2, 3], None));
    assert_eq!(b.rx_len(), 1);
    let zero: Loopback<0, 64> = Loopback::new(Medium::Ethernet, None);
    let mut zero = zero;
    assert!(zero.transmit().is_none());
    assert!(zero.receive().is_none());
}
