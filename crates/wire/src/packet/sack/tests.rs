//! SACK ranges: building, the wire form, and what parse refuses.

use std::vec::Vec;

use proptest::prelude::*;

use super::*;
use crate::packet::{Body, Header, PacketType, Repr, flags};

/// `offs` pushed in order into an empty list.
fn ranges(offs: &[u32]) -> SackRanges {
    let mut s = SackRanges::EMPTY;
    for &o in offs {
        assert!(s.push(o), "push {o}");
    }
    s
}

const ACK: AckRepr = AckRepr {
    cum_ack: 0x1000,
    credits: 1024,
    sack: 0b11,
    ts: 5,
    echo_ts: 4,
    short: false,
};

fn packet(s: &SackRepr) -> Vec<u8> {
    let r = Repr {
        header: Header {
            src_ep: 3,
            dst_ep: 7,
            session: 9,
            seq: 1,
            crc: false,
            ack_req: false,
        },
        body: Body::Sack(*s),
    };
    let mut b = std::vec![0u8; r.buffer_len()];
    assert_eq!(r.emit_bytes(&mut b), Ok(b.len()));
    b
}

/// The body (after the base header) of `bytes` with the count and ranges replaced.
fn with_ranges(count: u8, recs: &[(u16, u16)]) -> Vec<u8> {
    let mut b = packet(&SackRepr {
        ack: ACK,
        ranges: ranges(&[65]),
    });
    b.truncate(24 + 24);
    b.extend_from_slice(&[count, 0]);
    for &(g, l) in recs {
        b.extend_from_slice(&g.to_be_bytes());
        b.extend_from_slice(&l.to_be_bytes());
    }
    let n = b.len() as u16;
    b[6..8].copy_from_slice(&n.to_be_bytes());
    b
}

#[test]
fn push_merges_adjacent_offsets_and_keeps_order() {
    let s = ranges(&[65, 66, 67, 70, 100, 101]);
    assert_eq!(s.len(), 3);
    assert_eq!(s.iter().collect::<Vec<_>>(), [(65, 3), (70, 1), (100, 2)]);
    assert_eq!(s.packets(), 6);
    assert!(s.contains(66) && s.contains(101) && !s.contains(68) && !s.contains(102));
    let mut t = s;
    assert!(!t.push(101), "not above the last");
    assert!(!t.push(64), "the bitmap's part");
    assert!(!t.push(RANGES_END), "too far");
    assert!(t.push(RANGES_END - 1));
    assert_eq!(t.get(3), Some((RANGES_END - 1, 1)));
    assert_eq!(t.get(4), None);
}

#[test]
fn a_full_list_still_extends_its_last_range() {
    let mut s = SackRanges::EMPTY;
    for i in 0..MAX_RANGES as u32 {
        assert!(s.push(100 + 2 * i));
    }
    assert!(s.is_full());
    let last = 100 + 2 * (MAX_RANGES as u32 - 1);
    assert!(s.push(last + 1), "adjacent: extends");
    assert!(!s.push(last + 3), "a new range: no room");
    assert_eq!(s.len(), MAX_RANGES);
    assert_eq!(s.packets(), MAX_RANGES as u32 + 1);
}

#[test]
fn the_wire_form_is_relative_and_round_trips() {
    let s = SackRepr {
        ack: ACK,
        ranges: ranges(&[65, 66, 70, 71, 72]),
    };
    let b = packet(&s);
    assert_eq!(b[3], PacketType::Sack as u8);
    assert_eq!(b.len(), 24 + 24 + 2 + 2 * 4);
    assert_eq!(s.wire_len(), 24 + 2 + 8);
    // count 2; first range: gap 0 from offset 65, 2 packets; then 3 missing, 3 packets.
    assert_eq!(&b[48..], &[2, 0, 0, 0, 0, 2, 0, 3, 0, 3]);
    assert_eq!(Repr::parse_bytes(&b).map(|r| r.body), Ok(Body::Sack(s)));
    for n in 0..b.len() {
        assert!(Repr::parse_bytes(&b[..n]).is_err(), "cut at {n}");
    }
}

#[test]
fn malformed_ranges_are_refused() {
    assert!(Repr::parse_bytes(&with_ranges(1, &[(0, 1)])).is_ok());
    let bad: [(u8, &[(u16, u16)]); 6] = [
        (0, &[]),                       // no range
        (1, &[(0, 0)]),                 // an empty range
        (2, &[(0, 1), (0, 1)]),         // adjacent ranges (they are one)
        (1, &[(u16::MAX, 1)]),          // beyond cum_ack + 65536
        (2, &[(0, u16::MAX), (1, 10)]), // the same, by summing
        (16, &[(0, 1); 16]),            // more than MAX_RANGES
    ];
    for (count, recs) in bad {
        assert_eq!(
            Repr::parse_bytes(&with_ranges(count, recs)).map(|_| ()),
            Err(Error::Malformed),
            "{count} {recs:?}"
        );
    }
    // A count promising more ranges than there are bytes; a byte too many.
    assert_eq!(
        Repr::parse_bytes(&with_ranges(2, &[(0, 1)])).map(|_| ()),
        Err(Error::Truncated)
    );
    let mut long = with_ranges(1, &[(0, 1)]);
    long.push(0);
    long[7] += 1;
    assert_eq!(Repr::parse_bytes(&long).map(|_| ()), Err(Error::BadLength));
    // A reserved byte set.
    let mut r = with_ranges(1, &[(0, 1)]);
    r[49] = 1;
    assert_eq!(Repr::parse_bytes(&r).map(|_| ()), Err(Error::Malformed));
    // The short ACK form, or no ranges, never goes out.
    let short = SackRepr {
        ack: AckRepr {
            short: true,
            sack: 0,
            ..ACK
        },
        ranges: ranges(&[65]),
    };
    let none = SackRepr {
        ack: ACK,
        ranges: SackRanges::EMPTY,
    };
    for (s, e) in [(short, Error::BadFlags), (none, Error::Malformed)] {
        let r = Repr {
            header: Header::default(),
            body: Body::Sack(s),
        };
        assert_eq!(r.emit_bytes(&mut [0; 128]), Err(e));
    }
    // SHORT_ACK or ACK flags on a SACK: refused.
    for f in [flags::SHORT_ACK, flags::ACK] {
        let mut b = with_ranges(1, &[(0, 1)]);
        b[5] |= f as u8;
        assert_eq!(Repr::parse_bytes(&b).map(|_| ()), Err(Error::BadFlags));
    }
}

proptest! {
    /// Any ascending set of offsets: what push kept round-trips through the wire, and
    /// it is exactly the offsets up to the first one that found no room.
    #[test]
    fn ranges_round_trip(mut offs in proptest::collection::vec(RANGES_FROM..RANGES_END, 0..200)) {
        offs.sort_unstable();
        offs.dedup();
        let mut s = SackRanges::EMPTY;
        let mut kept = Vec::new();
        for &o in &offs {
            if s.push(o) {
                kept.push(o);
            } else {
                break;
            }
        }
        prop_assert_eq!(s.packets() as usize, kept.len());
        for &o in &kept {
            prop_assert!(s.contains(o));
        }
        if !s.is_empty() {
            let r = SackRepr { ack: ACK, ranges: s };
            let b = packet(&r);
            prop_assert_eq!(Repr::parse_bytes(&b).map(|r| r.body), Ok(Body::Sack(r)));
        }
    }
}

#[test]
fn fuzz_seeds_parse_and_re_emit() {
    let seeds: [&[u8]; 2] = [
        include_bytes!("../../../fuzz/seeds/parse_packet/sack.bin"),
        include_bytes!("../../../fuzz/seeds/parse_packet/sack-15-ranges.bin"),
    ];
    for (i, b) in seeds.into_iter().enumerate() {
        let r = Repr::parse_bytes(b).unwrap_or_else(|e| panic!("seed {i}: {e:?}"));
        let Body::Sack(s) = r.body else {
            panic!("seed {i} is a {:?}", r.packet_type())
        };
        assert_eq!(s.ranges.len(), [2, MAX_RANGES][i]);
        assert_eq!(packet(&s)[24..], b[24..]);
    }
}

#[test]
fn push_run_is_the_run_pushed_one_at_a_time() {
    let mut r = SackRanges::EMPTY;
    assert!(r.push_run(70, 10));
    assert!(r.push_run(80, 5), "adjacent: extends the range");
    assert!(r.push_run(90, 1));
    assert_eq!(r, ranges(&(70..85).chain([90]).collect::<Vec<_>>()));
    assert!(!r.push_run(89, 3), "below the last offset held");
    assert!(!r.push_run(100, 0), "empty");
    assert!(!r.push_run(RANGES_END - 2, 3), "beyond the reach");
    assert!(r.push_run(RANGES_END - 3, 3));
    assert_eq!(r.get(2), Some((RANGES_END - 3, 3)));
    let mut full = SackRanges::EMPTY;
    for i in 0..MAX_RANGES as u32 {
        assert!(full.push_run(100 + 10 * i, 2));
    }
    let was = full;
    assert!(!full.push_run(1000, 4), "a new range in a full list");
    assert_eq!(full, was);
    assert!(
        full.push_run(100 + 10 * (MAX_RANGES as u32 - 1) + 2, 4),
        "extends the last"
    );
}

proptest! {
    #[test]
    fn push_run_matches_push(runs in proptest::collection::vec((0u32..40, 1u32..40), 0..30)) {
        let (mut a, mut b) = (SackRanges::EMPTY, SackRanges::EMPTY);
        let mut off = RANGES_FROM;
        for (gap, n) in runs {
            off += gap;
            let ok = a.push_run(off, n);
            // One at a time: the first offset decides (it extends or starts a range,
            // or fails in a full list); the rest extend.
            let first = b.push(off);
            for o in off + 1..off + n {
                prop_assert!(!first || b.push(o));
            }
            prop_assert_eq!(ok, first);
            off += n;
        }
        prop_assert_eq!(a, b);
    }
}
