use super::*;
use crate::mem::SliceMemory;

type Table = MrTable<[MrSlot<2>; 4], [u32; 8], 2>;

fn table(mode: MrMode) -> Table {
    let cfg = MrConfig {
        mr_mode: mode,
        hmem: false,
        key_seed: 0x5eed,
    };
    MrTable::new(cfg, [MrSlot::VACANT; 4], [0u32; 8]).unwrap()
}

const RW: Flags = Flags::REMOTE_READ.union(Flags::REMOTE_WRITE);

#[test]
fn construction_checks() {
    let cfg = |m| MrConfig {
        mr_mode: m,
        ..MrConfig::default()
    };
    let t = MrTable::new(cfg(MrMode::BASIC), [MrSlot::<1>::VACANT; 2], [0u32; 0]).unwrap();
    assert_eq!(
        t.mr_mode(),
        MrMode::VIRT_ADDR | MrMode::ALLOCATED | MrMode::PROV_KEY
    );
    let t = MrTable::new(cfg(MrMode::SCALABLE), [MrSlot::<1>::VACANT; 2], [0u32; 3]).unwrap();
    assert_eq!(t.mr_mode(), MrMode::empty());
    assert_eq!(
        MrTable::new(
            cfg(MrMode::BASIC | MrMode::LOCAL),
            [MrSlot::<1>::VACANT; 2],
            [0u32; 3]
        )
        .map(|_| ()),
        Err(Errno::EINVAL)
    );
    assert_eq!(
        MrTable::new(cfg(MrMode::empty()), [MrSlot::<1>::VACANT; 2], [0u32; 2]).map(|_| ()),
        Err(Errno::EINVAL),
        "requested keys need an index larger than the table"
    );
    assert_eq!(t.iov_limit(), 1);
    assert_eq!(HmemIface::from_raw(5), Ok(HmemIface::SynapseAi));
    assert_eq!(HmemIface::from_raw(6), Err(Errno::EINVAL));
}

#[test]
fn registration_argument_errors() {
    let mut t = table(MrMode::empty());
    let buf = IoVec::new(0x1000, 64);
    let e = |r: Result<MrHandle>| r.unwrap_err();
    assert_eq!(
        e(t.reg(buf, RW, 0, 1, Flags::RMA_PMEM, 0)),
        Errno::EBADFLAGS
    );
    assert_eq!(
        e(t.reg(buf, RW, 0, 1, Flags::HMEM_DEVICE_ONLY, 0)),
        Errno::EBADFLAGS
    );
    assert_eq!(
        e(t.reg(buf, Flags::MSG, 0, 1, Flags::empty(), 0)),
        Errno::EINVAL
    );
    assert_eq!(
        e(t.reg(buf, RW, 8, 1, Flags::empty(), 0)),
        Errno::EINVAL,
        "offset reserved"
    );
    assert_eq!(
        e(t.reg(IoVec::new(0x1000, 0), RW, 0, 1, Flags::empty(), 0)),
        Errno::EINVAL
    );
    assert_eq!(
        e(t.reg(IoVec::new(u64::MAX - 3, 8), RW, 0, 1, Flags::empty(), 0)),
        Errno::EINVAL
    );
    assert_eq!(e(t.regv(&[], RW, 0, 1, Flags::empty(), 0)), Errno::EINVAL);
    assert_eq!(
        e(t.regv(&[buf; 3], RW, 0, 1, Flags::empty(), 0)),
        Errno::EINVAL,
        "over mr_iov_limit"
    );
    let attr = MrAttr {
        mr_iov: &[buf],
        access: RW,
        requested_key: 1,
        auth_key: &[1, 2, 3],
        ..MrAttr::default()
    };
    assert_eq!(e(t.regattr(&attr, Flags::empty())), Errno::ENOSYS);
    // iface is ignored without FI_HMEM, refused with it.
    let cuda = MrAttr {
        auth_key: &[],
        iface: HmemIface::Cuda,
        ..attr
    };
    assert!(t.regattr(&cuda, Flags::empty()).is_ok());
    let mut h = MrTable::new(
        MrConfig {
            hmem: true,
            mr_mode: MrMode::PROV_KEY,
            key_seed: 1,
        },
        [MrSlot::<1>::VACANT; 1],
        [0u32; 0],
    )
    .unwrap();
    assert_eq!(h.regattr(&cuda, Flags::empty()), Err(Errno::ENOSYS));
    let sys = MrAttr {
        iface: HmemIface::System,
        ..cuda
    };
    assert!(h.regattr(&sys, Flags::empty()).is_ok());
    assert_eq!(
        h.regattr(&sys, Flags::empty()),
        Err(Errno::ENOMEM),
        "table full"
    );
    assert_eq!(t.len(), 1, "failed registrations leave nothing behind");
}

#[test]
fn requested_keys_collide_and_are_released_on_close() {
    let mut t = table(MrMode::empty());
    let a = t
        .reg(IoVec::new(0x1000, 16), RW, 0, 42, Flags::empty(), 7)
        .unwrap();
    assert_eq!(t.key(a), Ok(42));
    assert_eq!(t.context(a), Ok(7));
    assert_eq!(
        t.reg(IoVec::new(0x2000, 16), RW, 0, 42, Flags::empty(), 0),
        Err(Errno::ENOKEY)
    );
    assert_eq!(
        t.reg(
            IoVec::new(0x2000, 16),
            RW,
            0,
            FI_KEY_NOTAVAIL,
            Flags::empty(),
            0
        ),
        Err(Errno::EKEYREJECTED)
    );
    // Distinct keys that may share buckets.
    let keys = [43, 42 + 8, 42 + 16];
    let hs: [MrHandle; 3] = keys.map(|k| {
        t.reg(IoVec::new(0x3000, 8), RW, 0, k, Flags::empty(), 0)
            .unwrap()
    });
    assert_eq!(
        t.reg(IoVec::new(0x3000, 8), RW, 0, 99, Flags::empty(), 0),
        Err(Errno::ENOMEM)
    );
    t.close(a).unwrap();
    assert_eq!(t.key(a), Err(Errno::EINVAL), "closed handle refused");
    assert_eq!(
        t.check_remote(42, 0, 1, Flags::REMOTE_READ, 0),
        Err(Errno::EINVAL)
    );
    for (h, k) in hs.iter().zip(keys) {
        assert_eq!(
            t.check_remote(k, 0, 8, Flags::REMOTE_READ, 0).map(|r| r.mr),
            Ok(*h)
        );
    }
    let again = t
        .reg(IoVec::new(0x1000, 16), RW, 0, 42, Flags::empty(), 0)
        .unwrap();
    assert_ne!(again, a, "new generation");
    assert_eq!(t.close(a), Err(Errno::EINVAL));
    assert_eq!(
        t.check_remote(42, 0, 16, Flags::REMOTE_WRITE, 0)
            .map(|r| r.mr),
        Ok(again)
    );
}

#[test]
fn provider_keys_ignore_requested_and_refuse_stale() {
    let mut t = table(MrMode::PROV_KEY | MrMode::VIRT_ADDR);
    let a = t
        .reg(IoVec::new(0x1000, 16), RW, 0, 5, Flags::empty(), 0)
        .unwrap();
    let b = t
        .reg(IoVec::new(0x2000, 16), RW, 0, 5, Flags::empty(), 0)
        .unwrap();
    let (ka, kb) = (t.key(a).unwrap(), t.key(b).unwrap());
    assert_ne!(ka, kb, "requested key ignored, no collision");
    assert_ne!(ka, 5);
    assert_ne!(ka >> 32, 0, "tagged");
    assert!(
        t.check_remote(ka, 0x1000, 16, Flags::REMOTE_READ, 0)
            .is_ok()
    );
    assert_eq!(
        t.check_remote(ka ^ (1 << 40), 0x1000, 1, Flags::REMOTE_READ, 0),
        Err(Errno::EINVAL)
    );
    t.close(a).unwrap();
    // Slots are handed out round-robin, so a closed slot is reused last.
    let mut c = b;
    for _ in 0..3 {
        c = t
            .reg(IoVec::new(0x1000, 16), RW, 0, 0, Flags::empty(), 0)
            .unwrap();
    }
    let kc = t.key(c).unwrap();
    assert_eq!(c.index(), a.index());
    assert_ne!(kc, ka, "a reused slot gets a fresh key");
    assert_eq!(
        t.check_remote(ka, 0x1000, 1, Flags::REMOTE_READ, 0),
        Err(Errno::EINVAL)
    );
    // Another domain's seed gives other keys for the same slot and generation.
    let mut u = MrTable::new(
        MrConfig {
            mr_mode: MrMode::PROV_KEY,
            hmem: false,
            key_seed: 0xdead,
        },
        [MrSlot::<2>::VACANT; 4],
        [0u32; 0],
    )
    .unwrap();
    let x = u
        .reg(IoVec::new(0x1000, 16), RW, 0, 0, Flags::empty(), 0)
        .unwrap();
    assert_ne!(u.key(x).unwrap(), ka);
}

#[test]
fn remote_bounds_are_overflow_safe() {
    for virt in [false, true] {
        let mode = if virt {
            MrMode::VIRT_ADDR
        } else {
            MrMode::empty()
        };
        let mut t = table(mode);
        let h = t
            .reg(IoVec::new(0x1000, 100), RW, 0, 9, Flags::empty(), 0)
            .unwrap();
        let base = if virt { 0x1000 } else { 0 };
        let ck = |a: u64, l: u64| t.check_remote(9, a, l, Flags::REMOTE_WRITE, 0);
        assert_eq!(
            ck(base, 100),
            Ok(RemoteAccess {
                mr: h,
                offset: 0,
                len: 100
            })
        );
        assert_eq!(ck(base + 99, 1).map(|r| r.offset), Ok(99));
        assert_eq!(
            ck(base + 99, 2),
            Err(Errno::EACCES),
            "one byte past the end"
        );
        assert_eq!(
            ck(base + 100, 0).map(|r| r.len),
            Ok(0),
            "empty access at the end"
        );
        assert_eq!(ck(base + 101, 0), Err(Errno::EACCES));
        assert_eq!(
            ck(base + 1, u64::MAX),
            Err(Errno::EACCES),
            "addr + len overflows"
        );
        assert_eq!(ck(u64::MAX, 1), Err(Errno::EACCES));
        assert_eq!(ck(u64::MAX, u64::MAX), Err(Errno::EACCES));
        if virt {
            assert_eq!(ck(0xfff, 1), Err(Errno::EACCES), "below the region");
            assert_eq!(ck(0, 1), Err(Errno::EACCES));
        }
    }
}

#[test]
fn remote_access_rights() {
    let mut t = table(MrMode::empty());
    t.reg(
        IoVec::new(0x1000, 8),
        Flags::REMOTE_READ,
        0,
        1,
        Flags::empty(),
        0,
    )
    .unwrap();
    t.reg(
        IoVec::new(0x2000, 8),
        Flags::REMOTE_WRITE,
        0,
        2,
        Flags::empty(),
        0,
    )
    .unwrap();
    t.reg(
        IoVec::new(0x3000, 8),
        Flags::SEND | Flags::RECV | Flags::READ | Flags::WRITE,
        0,
        3,
        Flags::empty(),
        0,
    )
    .unwrap();
    assert!(t.check_remote(1, 0, 8, Flags::REMOTE_READ, 0).is_ok());
    assert_eq!(
        t.check_remote(1, 0, 8, Flags::REMOTE_WRITE, 0),
        Err(Errno::EACCES)
    );
    assert_eq!(
        t.check_remote(2, 0, 8, Flags::REMOTE_READ, 0),
        Err(Errno::EACCES)
    );
    assert_eq!(
        t.check_remote(2, 0, 8, RW, 0),
        Err(Errno::EACCES),
        "atomic fetch needs both"
    );
    assert_eq!(
        t.check_remote(3, 0, 1, Flags::REMOTE_READ, 0),
        Err(Errno::EACCES),
        "local-only region"
    );
    assert_eq!(
        t.check_remote(77, 0, 1, Flags::REMOTE_READ, 0),
        Err(Errno::EINVAL),
        "unknown key"
    );
}

#[test]
fn remote_copies_follow_iovs_and_never_leave_the_region() {
    let mut t = table(MrMode::empty());
    let mut backing = [0u8; 64];
    // Region = bytes 8..12 then 32..38 of the backing store.
    let h = t
        .regv(
            &[IoVec::new(0x108, 4), IoVec::new(0x120, 6)],
            RW,
            0,
            5,
            Flags::empty(),
            0,
        )
        .unwrap();
    let mut mem = SliceMemory::new(0x100, &mut backing);
    let ra = t.write_remote(&mut mem, 5, 2, b"abcdef", 0).unwrap();
    assert_eq!((ra.mr, ra.offset, ra.len), (h, 2, 6));
    let mut out = [0u8; 10];
    t.read_remote(&mem, 5, 0, &mut out, 0).unwrap();
    assert_eq!(&out, b"\0\0abcdef\0\0");
    assert_eq!(&mem.bytes()[8..12], b"\0\0ab");
    assert_eq!(&mem.bytes()[32..38], b"cdef\0\0");
    assert_eq!(
        t.write_remote(&mut mem, 5, 5, b"123456", 0),
        Err(Errno::EACCES)
    );
    let mut out = [0u8; 11];
    assert_eq!(t.read_remote(&mem, 5, 0, &mut out, 0), Err(Errno::EACCES));
    let outside = mem
        .bytes()
        .iter()
        .enumerate()
        .filter(|(i, _)| !(8..12).contains(i) && !(32..38).contains(i));
    assert!(
        outside.clone().all(|(_, b)| *b == 0),
        "nothing written outside the region"
    );
    let mut pieces = [(0u64, 0..0), (0u64, 0..0)];
    let mut n = 0;
    let ra = t.check_remote(5, 3, 3, Flags::REMOTE_READ, 0).unwrap();
    t.for_each_segment(&ra, |a, r| {
        pieces[n] = (a, r);
        n += 1;
        Ok(())
    })
    .unwrap();
    assert_eq!(n, 2);
    assert_eq!(pieces, [(0x10b, 0..1), (0x120, 1..3)]);
}

#[test]
fn local_descriptor_checks() {
    let mut t = table(MrMode::LOCAL | MrMode::PROV_KEY);
    let h = t
        .regv(
            &[IoVec::new(0x1000, 16), IoVec::new(0x3000, 16)],
            Flags::SEND,
            0,
            0,
            Flags::empty(),
            0,
        )
        .unwrap();
    let d = t.desc(h).unwrap();
    assert_ne!(d, 0);
    assert_eq!(
        t.check_local(d, IoVec::new(0x1000, 16), Flags::SEND),
        Ok(())
    );
    assert_eq!(t.check_local(d, IoVec::new(0x3008, 8), Flags::SEND), Ok(()));
    assert_eq!(
        t.check_local(d, IoVec::new(0x1008, 9), Flags::SEND),
        Err(Errno::EACCES)
    );
    assert_eq!(
        t.check_local(d, IoVec::new(0x1000, 4), Flags::RECV),
        Err(Errno::EACCES)
    );
    assert_eq!(
        t.check_local(d, IoVec::new(u64::MAX, 2), Flags::SEND),
        Err(Errno::EACCES)
    );
    assert_eq!(
        t.check_local(0, IoVec::new(0x1000, 4), Flags::SEND),
        Err(Errno::EINVAL),
        "NULL desc"
    );
    assert_eq!(
        t.check_local(d + (1 << 32), IoVec::new(0x1000, 4), Flags::SEND),
        Err(Errno::EINVAL)
    );
    t.close(h).unwrap();
    assert_eq!(
        t.check_local(d, IoVec::new(0x1000, 4), Flags::SEND),
        Err(Errno::EINVAL)
    );
    let t2 = table(MrMode::PROV_KEY);
    assert_eq!(
        t2.check_local(12345, IoVec::new(0, 1), Flags::SEND),
        Ok(()),
        "desc ignored without FI_MR_LOCAL"
    );
}

#[test]
fn endpoint_mode_state_machine() {
    let mut t = table(MrMode::ENDPOINT | MrMode::PROV_KEY);
    let h = t
        .reg(IoVec::new(0x1000, 8), RW, 0, 0, Flags::empty(), 0)
        .unwrap();
    let k = t.key(h).unwrap();
    assert_eq!(t.state(h), Ok(MrState::Disabled));
    assert_eq!(
        t.check_remote(k, 0, 8, Flags::REMOTE_READ, 1),
        Err(Errno::EINVAL),
        "disabled"
    );
    assert_eq!(t.enable(h), Err(Errno::EOPBADSTATE), "no endpoint bound");
    assert_eq!(t.bind_ep(h, 1, Flags::SEND), Err(Errno::EINVAL));
    t.bind_ep(h, 1, Flags::empty()).unwrap();
    assert_eq!(
        t.bind_ep(h, 2, Flags::empty()),
        Err(Errno::EINVAL),
        "one endpoint"
    );
    t.enable(h).unwrap();
    assert_eq!(t.state(h), Ok(MrState::Enabled));
    assert!(t.check_remote(k, 0, 8, Flags::REMOTE_READ, 1).is_ok());
    assert_eq!(
        t.check_remote(k, 0, 8, Flags::REMOTE_READ, 2),
        Err(Errno::EINVAL),
        "other endpoint"
    );
    assert_eq!(t.close(h), Err(Errno::EBUSY), "bound endpoint still open");
    t.unbind_ep(h).unwrap();
    t.close(h).unwrap();
    let mut d = table(MrMode::PROV_KEY);
    let h = d
        .reg(IoVec::new(0x1000, 8), RW, 0, 0, Flags::empty(), 0)
        .unwrap();
    assert_eq!(d.state(h), Ok(MrState::Enabled));
    assert_eq!(d.bind_ep(h, 1, Flags::empty()), Err(Errno::ENOSYS));
    assert_eq!(d.enable(h), Ok(()));
    assert_eq!(d.refresh(h, &[], Flags::empty()), Err(Errno::ENOSYS));
}

#[test]
fn counter_bindings_and_rma_event_mode() {
    let mut t = table(MrMode::RMA_EVENT | MrMode::PROV_KEY);
    let plain = t
        .reg(IoVec::new(0x1000, 8), RW, 0, 0, Flags::empty(), 0)
        .unwrap();
    assert_eq!(t.state(plain), Ok(MrState::Enabled));
    assert_eq!(
        t.bind_cntr(plain, 9, Flags::REMOTE_WRITE),
        Err(Errno::EINVAL),
        "needs FI_RMA_EVENT"
    );
    let ev = t
        .reg(IoVec::new(0x2000, 8), RW, 0, 0, Flags::RMA_EVENT, 0)
        .unwrap();
    assert_eq!(t.state(ev), Ok(MrState::Disabled));
    assert_eq!(t.bind_cntr(ev, 9, Flags::empty()), Err(Errno::EINVAL));
    assert_eq!(t.bind_cntr(ev, 9, Flags::SEND), Err(Errno::EINVAL));
    t.bind_cntr(ev, 9, Flags::REMOTE_WRITE).unwrap();
    t.bind_cntr(ev, 10, RW).unwrap();
    assert_eq!(t.bind_cntr(ev, 11, Flags::REMOTE_READ), Err(Errno::ENOSPC));
    t.enable(ev).unwrap();
    assert_eq!(
        t.bind_cntr(ev, 11, Flags::REMOTE_READ),
        Err(Errno::EOPBADSTATE),
        "no binding after enable"
    );
    let mut w = [0u64; 2];
    t.rma_counters(ev, Flags::REMOTE_WRITE)
        .zip(w.iter_mut())
        .for_each(|(c, o)| *o = c);
    assert_eq!(w, [9, 10]);
    assert_eq!(t.rma_counters(ev, Flags::REMOTE_READ).count(), 1);
    t.unbind_cntr(ev, 9).unwrap();
    assert_eq!(t.rma_counters(ev, Flags::REMOTE_WRITE).count(), 1);
    t.acquire(ev).unwrap();
    assert_eq!(t.close(ev), Err(Errno::EBUSY), "in use");
    t.release(ev).unwrap();
    // Still bound to counter 10: the binding ends with the region.
    assert_eq!(t.close(ev), Ok(()));
    assert_eq!(t.close(ev), Err(Errno::EINVAL));
    assert_eq!(t.rma_counters(ev, Flags::REMOTE_WRITE).count(), 0);
}

#[test]
fn raw_keys_round_trip() {
    let mut t = table(MrMode::PROV_KEY | MrMode::VIRT_ADDR);
    let h = t
        .reg(IoVec::new(0x4000, 8), RW, 0, 0, Flags::empty(), 0)
        .unwrap();
    let mut raw = [0u8; 8];
    assert_eq!(t.raw_attr(h, &mut raw, Flags::empty()), Ok((0x4000, 8)));
    assert_eq!(
        Table::map_raw(0x4000, &raw, Flags::empty()),
        Ok(t.key(h).unwrap())
    );
    assert_eq!(
        t.raw_attr(h, &mut [0u8; 7], Flags::empty()),
        Err(Errno::ETOOSMALL)
    );
    assert_eq!(t.raw_attr(h, &mut raw, Flags::SEND), Err(Errno::EINVAL));
    assert_eq!(
        Table::map_raw(0, &raw[..7], Flags::empty()),
        Err(Errno::EINVAL)
    );
    assert_eq!(Table::unmap_key(1), Ok(()));
    let mut r = table(MrMode::RAW | MrMode::PROV_KEY);
    let h = r
        .reg(IoVec::new(0x4000, 8), RW, 0, 0, Flags::empty(), 0)
        .unwrap();
    assert_eq!(r.key(h), Ok(FI_KEY_NOTAVAIL), "raw key required");
    assert_eq!(r.raw_attr(h, &mut raw, Flags::empty()).map(|x| x.0), Ok(0));
}
