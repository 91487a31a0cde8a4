extern crate std;
use super::*;
use crate::hash::mix64;
use std::collections::HashMap;
use std::vec::Vec;

type TestAv<const N: usize, const B: usize> = Av<[AvSlot; N], [u32; B]>;

fn open<const N: usize, const B: usize>(t: AvType) -> TestAv<N, B> {
    let mut attr = AvAttr {
        av_type: t,
        ..AvAttr::default()
    };
    Av::new(&mut attr, [AvSlot::VACANT; N], [0u32; B]).unwrap()
}

fn ep(last: u8, port: u16) -> EpAddr {
    EpAddr::new([10, 0, 0, last], port, 0)
}

fn sa(addrs: &[EpAddr]) -> Vec<u8> {
    addrs.iter().flat_map(|a| a.to_sockaddr_in()).collect()
}

#[test]
fn open_validates_attributes() {
    let mut attr = AvAttr::default();
    let av = Av::new(&mut attr, [AvSlot::VACANT; 4], [0u32; 8]).unwrap();
    assert_eq!(
        attr.av_type,
        AvType::Table,
        "UNSPEC resolved and written back"
    );
    assert_eq!(av.av_type(), AvType::Table);
    let new = |attr: &mut AvAttr<'_>| Av::new(attr, [AvSlot::VACANT; 4], [0u32; 8]).map(|_| ());
    let mut named = AvAttr {
        name: Some("shm"),
        ..AvAttr::default()
    };
    assert_eq!(new(&mut named), Err(Errno::ENOSYS));
    let mut ro = AvAttr {
        flags: Flags::READ,
        ..AvAttr::default()
    };
    assert_eq!(new(&mut ro), Err(Errno::EINVAL), "FI_READ needs a name");
    let mut bad = AvAttr {
        flags: Flags::SEND,
        ..AvAttr::default()
    };
    assert_eq!(new(&mut bad), Err(Errno::EBADFLAGS));
    for bits in [-1, MAX_RX_CTX_BITS + 1] {
        let mut a = AvAttr {
            rx_ctx_bits: bits,
            ..AvAttr::default()
        };
        assert_eq!(new(&mut a), Err(Errno::EINVAL));
    }
    let mut ok = AvAttr {
        flags: FI_EVENT | FI_SYMMETRIC,
        count: 1 << 20,
        ..AvAttr::default()
    };
    assert!(new(&mut ok).is_ok(), "count is only a hint");
    let mut a = AvAttr::default();
    assert_eq!(
        Av::new(&mut a, [AvSlot::VACANT; 4], [0u32; 4]).map(|_| ()),
        Err(Errno::EINVAL),
        "index must be longer than the slots"
    );
    assert_eq!(AvType::from_raw(2), Some(AvType::Table));
    assert_eq!(AvType::from_raw(3), None);
}

#[test]
fn table_indices_are_consecutive_and_lowest_free_reused() {
    let mut av: TestAv<8, 16> = open(AvType::Table);
    let mut out = [0; 3];
    let addrs = [ep(1, 1), ep(2, 1), ep(3, 1)];
    assert_eq!(
        av.insert(
            AvAddrs::SockaddrIn(&sa(&addrs)),
            Some(&mut out),
            Flags::empty(),
            None
        ),
        Ok(3)
    );
    assert_eq!(out, [0, 1, 2]);
    let mut out2 = [0; 2];
    let more = [ep(4, 1), ep(5, 1)];
    assert_eq!(
        av.insert(AvAddrs::Ep(&more), Some(&mut out2), Flags::MORE, None),
        Ok(2)
    );
    assert_eq!(out2, [3, 4], "indices accumulate across calls");
    av.remove(&[1, 3], Flags::empty()).unwrap();
    let mut o = [0; 3];
    let again = [ep(6, 1), ep(7, 1), ep(8, 1)];
    assert_eq!(
        av.insert(AvAddrs::Ep(&again), Some(&mut o), Flags::empty(), None),
        Ok(3)
    );
    assert_eq!(o, [1, 3, 5], "lowest unused index first");
    assert_eq!(av.lookup_addr(1), Ok(ep(6, 1)));
    assert_eq!(av.len(), 6);
    // fi_addr may be NULL for TABLE.
    assert_eq!(
        av.insert(AvAddrs::Ep(&[ep(9, 1)]), None, Flags::empty(), None),
        Ok(1)
    );
    assert_eq!(av.reverse_lookup(&ep(9, 1)), Some(6));
}

#[test]
fn per_entry_errors_and_sync_err() {
    let mut av: TestAv<8, 16> = open(AvType::Table);
    let mut recs = sa(&[ep(1, 1), ep(2, 1), ep(3, 0), ep(4, 1)]);
    recs[16] = 10; // second record: AF_INET6, not AF_INET
    recs[17] = 0;
    let zero_ip = EpAddr::new([0; 4], 9, 0).to_sockaddr_in();
    recs.extend_from_slice(&zero_ip);
    let mut out = [0; 5];
    let mut errs = [-1; 5];
    let n = av.insert(
        AvAddrs::SockaddrIn(&recs),
        Some(&mut out),
        FI_SYNC_ERR,
        Some(&mut errs),
    );
    assert_eq!(n, Ok(2));
    assert_eq!(
        out,
        [0, FI_ADDR_NOTAVAIL, FI_ADDR_NOTAVAIL, 1, FI_ADDR_NOTAVAIL]
    );
    let na = Errno::EADDRNOTAVAIL.code();
    assert_eq!(errs, [0, na, na, 0, na]);
    // Without FI_SYNC_ERR the array is left alone.
    let mut errs = [-1; 1];
    let mut o = [0; 1];
    assert_eq!(
        av.insert(
            AvAddrs::Ep(&[ep(0, 0)]),
            Some(&mut o),
            Flags::empty(),
            Some(&mut errs)
        ),
        Ok(0)
    );
    assert_eq!((o, errs), ([FI_ADDR_NOTAVAIL], [-1]));
    // FI_ADDR_STR: an unparsable string is -FI_EINVAL for that entry.
    let strs = [
        "fi_sockaddr_in://10.0.0.9:7:2",
        "nonsense",
        "fi_sockaddr_in://10.0.0.9",
    ];
    let mut o = [0; 3];
    let mut e = [0; 3];
    assert_eq!(
        av.insert(AvAddrs::Str(&strs), Some(&mut o), FI_SYNC_ERR, Some(&mut e)),
        Ok(1)
    );
    assert_eq!(e, [0, Errno::EINVAL.code(), na]);
    assert_eq!(av.lookup_addr(o[0]), Ok(EpAddr::new([10, 0, 0, 9], 7, 2)));
    // Reporting through a closure (what the domain uses for FI_EVENT).
    let mut seen = Vec::new();
    let n = av.insert_with(
        AvAddrs::Ep(&[EpAddr::new([0; 4], 1, 0), ep(7, 7)]),
        None,
        Flags::empty(),
        |i, e| seen.push((i, e)),
    );
    assert_eq!(n, Ok(1));
    assert_eq!(seen, [(0, Errno::EADDRNOTAVAIL)]);
}

#[test]
fn call_level_errors_insert_nothing() {
    let mut av: TestAv<4, 8> = open(AvType::Map);
    let one = [ep(1, 1)];
    let mut out = [0; 1];
    assert_eq!(
        av.insert(AvAddrs::Ep(&one), Some(&mut out), Flags::SEND, None),
        Err(Errno::EBADFLAGS)
    );
    assert_eq!(
        av.insert(AvAddrs::Ep(&one), Some(&mut out), FI_SYNC_ERR, None),
        Err(Errno::EINVAL)
    );
    let mut short = [0i32; 0];
    assert_eq!(
        av.insert(
            AvAddrs::Ep(&one),
            Some(&mut out),
            FI_SYNC_ERR,
            Some(&mut short)
        ),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        av.insert(
            AvAddrs::Ep(&[ep(1, 1), ep(2, 2)]),
            Some(&mut out),
            Flags::empty(),
            None
        ),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        av.insert(AvAddrs::SockaddrIn(&[0u8; 17]), None, Flags::empty(), None),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        av.insert(AvAddrs::Ep(&one), None, Flags::AV_USER_ID, None),
        Err(Errno::EINVAL)
    );
    assert!(av.is_empty());

    let mut attr = AvAttr {
        flags: FI_EVENT,
        ..AvAttr::default()
    };
    let mut ev = Av::new(&mut attr, [AvSlot::VACANT; 2], [0u32; 4]).unwrap();
    assert_eq!(
        ev.insert(AvAddrs::Ep(&one), None, Flags::empty(), None),
        Err(Errno::ENOEQ)
    );
    assert_eq!(
        ev.insertsvc("10.0.0.1", Some("1"), None, Flags::empty(), None),
        Err(Errno::ENOEQ)
    );
    let mut e0 = [0; 1];
    assert_eq!(
        ev.insert(AvAddrs::Ep(&one), None, FI_SYNC_ERR, Some(&mut e0)),
        Err(Errno::ENOEQ),
        "no EQ is reported first"
    );
    assert_eq!(
        ev.bind_eq(7, Flags::SEND),
        Err(Errno::EINVAL),
        "bind flags reserved"
    );
    ev.bind_eq(7, Flags::empty()).unwrap();
    assert_eq!(
        ev.bind_eq(8, Flags::empty()),
        Err(Errno::EINVAL),
        "one EQ per AV"
    );
    assert_eq!(ev.eq(), Some(7));
    let mut e = [0; 1];
    assert_eq!(
        ev.insert(AvAddrs::Ep(&one), None, FI_SYNC_ERR, Some(&mut e)),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        ev.insert(AvAddrs::Ep(&one), None, Flags::empty(), None),
        Ok(1)
    );
}

#[test]
fn capacity_exhaustion_is_enospc_per_entry() {
    let mut av: TestAv<2, 4> = open(AvType::Table);
    let addrs = [ep(1, 1), ep(2, 1), ep(3, 1), ep(1, 1)];
    let mut out = [0; 4];
    let mut errs = [0; 4];
    assert_eq!(
        av.insert(
            AvAddrs::Ep(&addrs),
            Some(&mut out),
            FI_SYNC_ERR,
            Some(&mut errs)
        ),
        Ok(3)
    );
    assert_eq!(
        out,
        [0, 1, FI_ADDR_NOTAVAIL, 0],
        "a duplicate still resolves when full"
    );
    assert_eq!(errs, [0, 0, Errno::ENOSPC.code(), 0]);
    let mut empty: TestAv<0, 0> = open(AvType::Map);
    let mut o = [0; 1];
    assert_eq!(
        empty.insert(AvAddrs::Ep(&addrs[..1]), Some(&mut o), Flags::empty(), None),
        Ok(0)
    );
    assert_eq!(o, [FI_ADDR_NOTAVAIL]);
    assert_eq!(empty.reverse_lookup(&addrs[0]), None);
}

#[test]
fn map_values_are_opaque_and_stale_ones_refused() {
    let mut av: TestAv<4, 8> = open(AvType::Map);
    let mut out = [0; 2];
    av.insert(
        AvAddrs::Ep(&[ep(1, 1), ep(2, 2)]),
        Some(&mut out),
        Flags::empty(),
        None,
    )
    .unwrap();
    assert!(
        out.iter().all(|&f| f != FI_ADDR_NOTAVAIL && f > 1),
        "{out:?}"
    );
    assert_ne!(out[0], out[1]);
    assert_eq!(av.lookup_addr(out[1]), Ok(ep(2, 2)));
    assert_eq!(
        av.lookup_addr(0),
        Err(Errno::ENOENT),
        "a bare index is not a MAP value"
    );
    av.remove(&[out[0]], Flags::empty()).unwrap();
    let mut again = [0; 1];
    av.insert(
        AvAddrs::Ep(&[ep(3, 3)]),
        Some(&mut again),
        Flags::empty(),
        None,
    )
    .unwrap();
    assert_eq!(again[0] & 0xffff_ffff, out[0] & 0xffff_ffff, "slot reused");
    assert_ne!(again[0], out[0]);
    assert_eq!(
        av.lookup_addr(out[0]),
        Err(Errno::ENOENT),
        "stale value refused"
    );
    assert_eq!(av.remove(&[out[0]], Flags::empty()), Err(Errno::ENOENT));
    assert_eq!(av.lookup_addr(again[0]), Ok(ep(3, 3)));
    assert_eq!(av.lookup_addr(FI_ADDR_NOTAVAIL), Err(Errno::ENOENT));
    assert_eq!(av.slot_of(again[0]), Some(0));
}

#[test]
fn remove_semantics() {
    let mut av: TestAv<4, 8> = open(AvType::Table);
    let mut out = [0; 2];
    av.insert(
        AvAddrs::Ep(&[ep(1, 1), ep(2, 2)]),
        Some(&mut out),
        Flags::empty(),
        None,
    )
    .unwrap();
    assert_eq!(
        av.remove(&[0], Flags::MORE),
        Err(Errno::EINVAL),
        "flags reserved"
    );
    assert_eq!(
        av.remove(&[3, 0, FI_ADDR_NOTAVAIL], Flags::empty()),
        Err(Errno::ENOENT)
    );
    assert_eq!(
        av.lookup_addr(0),
        Err(Errno::ENOENT),
        "known entry removed anyway"
    );
    let mut buf = [0u8; 16];
    assert_eq!(av.lookup(0, &mut buf), Err(Errno::ENOENT));
    assert_eq!(av.reverse_lookup(&ep(1, 1)), None);
    assert_eq!(
        av.remove(&[0], Flags::empty()),
        Err(Errno::ENOENT),
        "double remove"
    );
    assert_eq!(av.lookup_addr(1), Ok(ep(2, 2)));
    assert_eq!(av.len(), 1);
    // Removal then re-insertion of the same address is supported.
    let mut o = [0; 1];
    av.insert(AvAddrs::Ep(&[ep(1, 1)]), Some(&mut o), Flags::empty(), None)
        .unwrap();
    assert_eq!(o, [0]);
    assert_eq!(av.reverse_lookup(&ep(1, 1)), Some(0));
}

#[test]
fn duplicates_share_an_entry_and_count_uses() {
    let mut av: TestAv<4, 8> = open(AvType::Map);
    let mut a = [0; 1];
    let mut b = [0; 1];
    av.insert(AvAddrs::Ep(&[ep(1, 1)]), Some(&mut a), Flags::empty(), None)
        .unwrap();
    assert_eq!(
        av.insert(AvAddrs::Ep(&[ep(1, 1)]), Some(&mut b), Flags::empty(), None),
        Ok(1)
    );
    assert_eq!(a, b);
    assert_eq!(av.len(), 1);
    av.remove(&a, Flags::empty()).unwrap();
    assert_eq!(av.lookup_addr(a[0]), Ok(ep(1, 1)), "one use left");
    av.remove(&a, Flags::empty()).unwrap();
    assert_eq!(av.lookup_addr(a[0]), Err(Errno::ENOENT));
}

#[test]
fn lookup_too_small_copies_prefix() {
    let mut av: TestAv<2, 4> = open(AvType::Table);
    let a = EpAddr::new([192, 168, 1, 2], 4791, 3);
    av.insert(AvAddrs::Ep(&[a]), None, Flags::empty(), None)
        .unwrap();
    let mut full = [0u8; 20];
    assert_eq!(av.lookup(0, &mut full), Ok(ADDR_LEN));
    assert_eq!(full[..16], a.to_sockaddr_in());
    let mut small = [0xeeu8; 6];
    assert_eq!(av.lookup(0, &mut small), Err(Errno::ETOOSMALL));
    assert_eq!(small, a.to_sockaddr_in()[..6]);
    assert_eq!(av.lookup(0, &mut []), Err(Errno::ETOOSMALL));
}

#[test]
fn straddr_of_sockaddr() {
    let mut buf = [0u8; 64];
    let rec = EpAddr::new([1, 2, 3, 4], 5678, 0).to_sockaddr_in();
    let n = TestAv::<1, 2>::straddr(&rec, &mut buf).unwrap();
    assert_eq!(&buf[..n], b"fi_sockaddr_in://1.2.3.4:5678\0");
    let mut small = [0u8; 5];
    assert_eq!(
        TestAv::<1, 2>::straddr(&rec, &mut small),
        Ok(n),
        "needed length even when truncated"
    );
    assert_eq!(&small, b"fi_s\0");
    assert_eq!(
        TestAv::<1, 2>::straddr(&[0u8; 16], &mut buf),
        Err(Errno::EINVAL)
    );
}

#[test]
fn insertsvc_and_insertsym() {
    let mut av: TestAv<8, 16> = open(AvType::Table);
    let mut out = [0; 4];
    assert_eq!(
        av.insertsym(
            "10.1.1.1",
            2,
            Some("5000"),
            2,
            Some(&mut out),
            Flags::empty(),
            None
        ),
        Ok(4)
    );
    let got: Vec<_> = out.iter().map(|&f| av.lookup_addr(f).unwrap()).collect();
    let want = [
        EpAddr::new([10, 1, 1, 1], 5000, 0),
        EpAddr::new([10, 1, 1, 1], 5001, 0),
        EpAddr::new([10, 1, 1, 2], 5000, 0),
        EpAddr::new([10, 1, 1, 2], 5001, 0),
    ];
    assert_eq!(got, want, "fi_av(3)'s example order");
    let mut o = [0; 1];
    assert_eq!(
        av.insertsvc("10.1.2.255", Some("7"), Some(&mut o), Flags::empty(), None),
        Ok(1)
    );
    assert_eq!(av.lookup_addr(o[0]), Ok(EpAddr::new([10, 1, 2, 255], 7, 0)));
    assert_eq!(
        av.insertsym("10.1.2.255", 2, Some("7"), 1, None, Flags::empty(), None),
        Ok(2),
        "carry into the next octet; a duplicate counts as inserted"
    );
    assert_eq!(
        av.reverse_lookup(&EpAddr::new([10, 1, 3, 0], 7, 0)),
        Some(5)
    );
    assert_eq!(
        av.insertsvc(
            "fi_sockaddr_in://10.9.9.9:9:1",
            None,
            Some(&mut o),
            Flags::empty(),
            None
        ),
        Ok(1)
    );
    assert_eq!(av.lookup_addr(o[0]), Ok(EpAddr::new([10, 9, 9, 9], 9, 1)));
    let e = |r: Result<usize>| r.unwrap_err();
    assert_eq!(
        e(av.insertsvc(
            "fi_sockaddr_in://10.9.9.9:9",
            Some("1"),
            None,
            Flags::empty(),
            None
        )),
        Errno::EINVAL
    );
    assert_eq!(
        e(av.insertsvc("fi_sockaddr_in://bad", None, None, Flags::empty(), None)),
        Errno::EINVAL
    );
    assert_eq!(
        e(av.insertsvc("host10", Some("1"), None, Flags::empty(), None)),
        Errno::ENOSYS
    );
    assert_eq!(
        e(av.insertsvc("10.0.0.1", Some("http"), None, Flags::empty(), None)),
        Errno::ENOSYS
    );
    assert_eq!(
        e(av.insertsvc("10.0.0.1", Some("70000"), None, Flags::empty(), None)),
        Errno::EINVAL
    );
    assert_eq!(
        e(av.insertsym(
            "255.255.255.255",
            2,
            Some("1"),
            1,
            None,
            Flags::empty(),
            None
        )),
        Errno::EINVAL
    );
    assert_eq!(
        e(av.insertsym("10.0.0.1", 1, Some("65535"), 2, None, Flags::empty(), None)),
        Errno::EINVAL
    );
    assert_eq!(
        e(av.insertsym(
            "10.0.0.1",
            usize::MAX,
            Some("1"),
            2,
            None,
            Flags::empty(),
            None
        )),
        Errno::EINVAL
    );
    assert_eq!(
        e(av.insertsvc("10.0.0.1", Some("1"), None, Flags::SEND, None)),
        Errno::EBADFLAGS
    );
    assert_eq!(
        av.insertsym("10.0.0.1", 0, Some("1"), 5, None, Flags::empty(), None),
        Ok(0)
    );
    // No service: port 0 cannot name a peer.
    let mut errs = [0; 1];
    assert_eq!(
        av.insertsvc("10.0.0.1", None, Some(&mut o), FI_SYNC_ERR, Some(&mut errs)),
        Ok(0)
    );
    assert_eq!(
        (o[0], errs[0]),
        (FI_ADDR_NOTAVAIL, Errno::EADDRNOTAVAIL.code())
    );
}

#[test]
fn user_ids_and_source_addr() {
    let mut av: TestAv<4, 8> = open(AvType::Table);
    let mut io = [1000, 2000];
    assert_eq!(
        av.insert(
            AvAddrs::Ep(&[ep(1, 1), ep(2, 2)]),
            Some(&mut io),
            Flags::AV_USER_ID,
            None
        ),
        Ok(2)
    );
    assert_eq!(io, [0, 1], "output unchanged by FI_AV_USER_ID");
    assert_eq!(av.source_addr(&ep(2, 2)), 2000);
    av.insert(AvAddrs::Ep(&[ep(3, 3)]), None, Flags::empty(), None)
        .unwrap();
    assert_eq!(av.source_addr(&ep(3, 3)), 2);
    assert_eq!(av.source_addr(&ep(4, 4)), FI_ADDR_NOTAVAIL);
    // Both in one lookup, the reported one only when asked for.
    assert_eq!(av.message_source(&ep(2, 2), true), (1, 2000));
    assert_eq!(av.message_source(&ep(2, 2), false), (1, FI_ADDR_NOTAVAIL));
    assert_eq!(av.message_source(&ep(3, 3), true), (2, 2));
    assert_eq!(
        av.message_source(&ep(4, 4), true),
        (FI_ADDR_NOTAVAIL, FI_ADDR_NOTAVAIL)
    );
    assert_eq!(av.reverse_lookup(&ep(2, 2)), Some(1));
    assert_eq!(
        av.reverse_lookup(&EpAddr::new([10, 0, 0, 2], 2, 1)),
        None,
        "ep id matters"
    );
}

#[test]
fn rx_ctx_bits_are_kept_clear_and_split() {
    let mut attr = AvAttr {
        av_type: AvType::Map,
        rx_ctx_bits: 4,
        ..AvAttr::default()
    };
    let mut av = Av::new(&mut attr, [AvSlot::VACANT; 2], [0u32; 4]).unwrap();
    let mut out = [0; 1];
    for _ in 0..40 {
        // Cycle the generation well past 2^(32-4) would take too long; check the mask.
        av.insert(
            AvAddrs::Ep(&[ep(1, 1)]),
            Some(&mut out),
            Flags::empty(),
            None,
        )
        .unwrap();
        assert_eq!(out[0] >> 60, 0, "top rx_ctx_bits clear");
        av.remove(&out, Flags::empty()).unwrap();
    }
    av.insert(
        AvAddrs::Ep(&[ep(1, 1)]),
        Some(&mut out),
        Flags::empty(),
        None,
    )
    .unwrap();
    let rx = fi_rx_addr(out[0], 5, 4);
    assert_eq!(rx >> 60, 5);
    assert_eq!(av.split_rx(rx), (out[0], 5));
    assert_eq!(av.resolve(rx), Ok((ep(1, 1), 5)));
    assert_eq!(
        av.lookup_addr(rx),
        Err(Errno::ENOENT),
        "lookup takes AV values only"
    );
    assert_eq!(av.slot_of(rx), Some(0));
    assert_eq!(fi_rx_addr(7, 1, 0), 7);
    assert_eq!(fi_rx_addr(6, 1, 64), 7);
}

#[test]
fn close_refcount() {
    let mut av: TestAv<1, 2> = open(AvType::Table);
    av.bind_ep();
    av.bind_ep();
    assert_eq!(av.check_close(), Err(Errno::EBUSY));
    av.unbind_ep();
    assert_eq!(av.refs(), 1);
    assert_eq!(av.check_close(), Err(Errno::EBUSY));
    av.unbind_ep();
    assert_eq!(av.check_close(), Ok(()));
}

#[test]
fn reverse_index_matches_a_model_under_churn() {
    let mut av: TestAv<64, 80> = open(AvType::Map);
    let mut model: HashMap<EpAddr, FiAddr> = HashMap::new();
    let mut x: u64 = 0x1234_5678;
    for _ in 0..20_000 {
        x = mix64(x);
        // Few distinct ports on few hosts: many collisions in a nearly full index.
        let a = EpAddr::new(
            [10, 0, (x % 3) as u8, (x >> 8) as u8 % 40 + 1],
            (x >> 16) as u16 % 3 + 1,
            0,
        );
        if let Some(&f) = model.get(&a) {
            if x & (1 << 40) != 0 {
                av.remove(&[f], Flags::empty()).unwrap();
                model.remove(&a);
            }
        } else {
            let mut o = [0; 1];
            let n = av
                .insert(AvAddrs::Ep(&[a]), Some(&mut o), Flags::empty(), None)
                .unwrap();
            if model.len() < 64 {
                assert_eq!(n, 1);
                model.insert(a, o[0]);
            } else {
                assert_eq!((n, o[0]), (0, FI_ADDR_NOTAVAIL));
            }
        }
        assert_eq!(av.len(), model.len());
    }
    for (a, f) in &model {
        assert_eq!(av.reverse_lookup(a), Some(*f));
        assert_eq!(av.lookup_addr(*f), Ok(*a));
    }
    assert_eq!(av.reverse_lookup(&EpAddr::new([9, 9, 9, 9], 9, 9)), None);
}
