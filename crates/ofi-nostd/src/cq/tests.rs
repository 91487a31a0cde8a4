use super::*;

const V1_4: u32 = (1 << 16) | 4;
const V1_17: u32 = (1 << 16) | 17;

fn attr(format: CqFormat) -> CqAttr {
    CqAttr {
        format,
        ..CqAttr::default()
    }
}

fn cq<const N: usize>(format: CqFormat, rm: bool) -> Cq<[CqSlot; N]> {
    Cq::new(&attr(format), rm, [CqSlot::EMPTY; N]).unwrap()
}

fn send(ctx: u64) -> CqEntry {
    CqEntry::new(ctx, comp::SEND_MSG)
}

fn ctxs(out: &[CqContextEntry]) -> heapless::Vec<u64, 16> {
    out.iter().map(|e| e.op_context).collect()
}

#[test]
fn enum_values_match_fi_eq_h() {
    assert_eq!(CqFormat::Unspec as i32, 0);
    assert_eq!(CqFormat::Context as i32, 1);
    assert_eq!(CqFormat::Msg as i32, 2);
    assert_eq!(CqFormat::Data as i32, 3);
    assert_eq!(CqFormat::Tagged as i32, 4);
    for raw in 0..5 {
        assert_eq!(CqFormat::from_raw(raw).unwrap() as i32, raw);
    }
    assert_eq!(CqFormat::from_raw(5), Err(Errno::EINVAL));
    assert_eq!(CqFormat::from_raw(-1), Err(Errno::EINVAL));
    assert_eq!(CqWaitCond::from_raw(0), Ok(CqWaitCond::None));
    assert_eq!(CqWaitCond::from_raw(1), Ok(CqWaitCond::Threshold));
    assert_eq!(CqWaitCond::from_raw(2), Err(Errno::EINVAL));
    for raw in 0..7 {
        assert_eq!(WaitObj::from_raw(raw).unwrap() as i32, raw);
    }
    assert_eq!(WaitObj::from_raw(7), Err(Errno::EINVAL));
    assert_eq!(WaitObj::Fd as i32, 3);
    assert_eq!(WaitObj::Yield as i32, 5);
}

#[test]
fn entry_layouts_match_the_c_structs() {
    assert_eq!(CqFormat::Context.entry_size(), 8);
    assert_eq!(CqFormat::Msg.entry_size(), 24);
    assert_eq!(CqFormat::Data.entry_size(), 40);
    assert_eq!(CqFormat::Tagged.entry_size(), 48);
    assert_eq!(CqFormat::Unspec.entry_size(), 0);
    assert_eq!(core::mem::offset_of!(CqTaggedEntry, tag), 40);
    assert_eq!(core::mem::offset_of!(CqDataEntry, data), 32);
    assert_eq!(core::mem::offset_of!(CqMsgEntry, len), 16);
}

#[test]
fn open_validates_attributes_and_storage() {
    let s = || [CqSlot::EMPTY; 4];
    let bad_flags = CqAttr {
        flags: Flags::WRITE,
        ..CqAttr::default()
    };
    assert!(matches!(Cq::new(&bad_flags, true, s()), Err(Errno::EINVAL)));
    let affinity = CqAttr {
        flags: Flags::AFFINITY,
        signaling_vector: 3,
        ..CqAttr::default()
    };
    assert_eq!(
        Cq::new(&affinity, true, s())
            .unwrap()
            .attr()
            .signaling_vector,
        3
    );
    let set_without_set = CqAttr {
        wait_obj: WaitObj::Set,
        ..CqAttr::default()
    };
    assert!(matches!(
        Cq::new(&set_without_set, true, s()),
        Err(Errno::EINVAL)
    ));
    let set = CqAttr {
        wait_obj: WaitObj::Set,
        wait_set: 0x1000,
        ..CqAttr::default()
    };
    assert!(Cq::new(&set, true, s()).is_ok());
    let pollfd = CqAttr {
        wait_obj: WaitObj::PollFd,
        ..CqAttr::default()
    };
    assert!(matches!(Cq::new(&pollfd, true, s()), Err(Errno::EINVAL)));
    let too_big = CqAttr {
        size: 5,
        ..CqAttr::default()
    };
    assert!(matches!(Cq::new(&too_big, true, s()), Err(Errno::ENOMEM)));
    let empty: [CqSlot; 0] = [];
    assert!(matches!(
        Cq::new(&CqAttr::default(), true, empty),
        Err(Errno::EINVAL)
    ));

    // size 0 (provider's choice) and a size below the storage both get the storage.
    let small = CqAttr {
        size: 2,
        ..CqAttr::default()
    };
    let c = Cq::new(&small, true, s()).unwrap();
    assert_eq!((c.capacity(), c.attr().size), (4, 4));
    // UNSPEC resolves to the provider's default format.
    assert_eq!(c.format(), DEFAULT_CQ_FORMAT);
    assert_eq!(c.format(), CqFormat::Context);
}

#[test]
fn empty_reads_return_eagain() {
    let mut c = cq::<4>(CqFormat::Context, true);
    let mut out = [CqContextEntry::default(); 2];
    assert_eq!(c.read(&mut out), Err(Errno::EAGAIN));
    assert_eq!(Errno::EAGAIN.to_ret(), -11);
    let mut src = [0; 2];
    assert_eq!(c.readfrom(&mut out, &mut src), Err(Errno::EAGAIN));
    assert_eq!(
        c.readerr(Flags::empty(), V1_17, &mut []),
        Err(Errno::EAGAIN)
    );
}

#[test]
fn reads_in_order_in_batches_and_wraps() {
    let mut c = cq::<3>(CqFormat::Context, true);
    let mut next = 0u64;
    let mut expect = 0u64;
    for _ in 0..10 {
        while c.write(&send(next)).is_ok() {
            next += 1;
        }
        assert_eq!(c.len(), 3);
        let mut out = [CqContextEntry::default(); 2];
        assert_eq!(c.read(&mut out), Ok(2));
        assert_eq!(ctxs(&out), [expect, expect + 1]);
        expect += 2;
    }
    let mut out = [CqContextEntry::default(); 8];
    assert_eq!(c.read(&mut out), Ok(1));
    assert_eq!(out[0].op_context, expect);
    assert_eq!(c.read(&mut out), Err(Errno::EAGAIN));
}

#[test]
fn each_format_reports_its_fields() {
    let e = CqEntry::new(0xc0, comp::recv(true, false, false))
        .with_len(100)
        .with_buf(0xb0f)
        .with_data(0xda7a)
        .with_tag(0x7a6)
        .with_src_addr(5);
    assert!(
        e.flags
            .contains(Flags::REMOTE_CQ_DATA | Flags::RECV | Flags::TAGGED)
    );
    let flags = e.flags.bits();

    let mut c = cq::<2>(CqFormat::Context, true);
    c.write(&e).unwrap();
    let mut o = [CqContextEntry::default()];
    assert_eq!(c.read(&mut o), Ok(1));
    assert_eq!(o[0], CqContextEntry { op_context: 0xc0 });

    let mut c = cq::<2>(CqFormat::Msg, true);
    c.write(&e).unwrap();
    let mut o = [CqMsgEntry::default()];
    assert_eq!(c.read(&mut o), Ok(1));
    assert_eq!(
        o[0],
        CqMsgEntry {
            op_context: 0xc0,
            flags,
            len: 100
        }
    );

    let mut c = cq::<2>(CqFormat::Data, true);
    c.write(&e).unwrap();
    let mut o = [CqDataEntry::default()];
    assert_eq!(c.read(&mut o), Ok(1));
    assert_eq!(
        o[0],
        CqDataEntry {
            op_context: 0xc0,
            flags,
            len: 100,
            buf: 0xb0f,
            data: 0xda7a
        }
    );

    let mut c = cq::<2>(CqFormat::Tagged, true);
    c.write(&e).unwrap();
    let mut o = [CqTaggedEntry::default()];
    assert_eq!(c.read(&mut o), Ok(1));
    assert_eq!(
        o[0],
        CqTaggedEntry {
            op_context: 0xc0,
            flags,
            len: 100,
            buf: 0xb0f,
            data: 0xda7a,
            tag: 0x7a6
        }
    );

    // The full entry reads any CQ.
    c.write(&e).unwrap();
    let mut o = [CqEntry::default()];
    assert_eq!(c.read(&mut o), Ok(1));
    assert_eq!(o[0], e);
}

#[test]
fn reading_with_another_formats_struct_is_einval() {
    let mut c = cq::<2>(CqFormat::Msg, true);
    c.write(&send(1)).unwrap();
    assert_eq!(c.read(&mut [CqTaggedEntry::default()]), Err(Errno::EINVAL));
    assert_eq!(c.read(&mut [CqContextEntry::default()]), Err(Errno::EINVAL));
    assert_eq!(c.len(), 1, "a refused read consumes nothing");
    assert_eq!(c.read(&mut [CqMsgEntry::default()]), Ok(1));
}

#[test]
fn error_at_head_gives_eavail_until_readerr() {
    let mut c = cq::<8>(CqFormat::Context, true);
    c.write(&send(1)).unwrap();
    c.write(&send(2)).unwrap();
    let err = CqErrEntry::new(3, comp::RECV_MSG, Errno::ECANCELED);
    c.write_err(&err).unwrap();
    c.write(&send(4)).unwrap();

    // Completions before the error are returned first; the read stops at it.
    let mut out = [CqContextEntry::default(); 8];
    assert_eq!(c.read(&mut out), Ok(2));
    assert_eq!(ctxs(&out[..2]), [1, 2]);
    assert_eq!(c.read(&mut out), Err(Errno::EAVAIL));
    assert_eq!(Errno::EAVAIL.to_ret(), -259);
    assert_eq!(c.readfrom(&mut out, &mut [0; 8]), Err(Errno::EAVAIL));
    // A zero-count read reports the error too.
    assert_eq!(c.read::<CqContextEntry>(&mut []), Err(Errno::EAVAIL));

    let e = c.readerr(Flags::empty(), V1_17, &mut []).unwrap();
    assert_eq!(e.op_context, 3);
    assert_eq!(e.flags, comp::RECV_MSG.bits());
    assert_eq!(e.err, 125, "positive FI_ECANCELED");
    assert_eq!(e.prov_errno, 125);
    assert_eq!(e.err_data, ErrDataOut::ProviderOwned(0));

    // readerr with a success at the head: nothing to report.
    assert_eq!(
        c.readerr(Flags::empty(), V1_17, &mut []),
        Err(Errno::EAGAIN)
    );
    assert_eq!(c.read(&mut out), Ok(1));
    assert_eq!(out[0].op_context, 4);
    assert_eq!(c.read::<CqContextEntry>(&mut []), Err(Errno::EAGAIN));
}

#[test]
fn zero_count_read_drives_progress_only() {
    let mut c = cq::<2>(CqFormat::Context, true);
    c.write(&send(1)).unwrap();
    assert_eq!(c.read::<CqContextEntry>(&mut []), Ok(0));
    assert_eq!(c.len(), 1);
}

#[test]
fn err_data_follows_the_api_version_rules() {
    let data = ErrData::<MAX_ERR_DATA>::new(&[1, 2, 3, 4, 5]).unwrap();
    let err = CqErrEntry::new(9, comp::SEND_MSG, Errno::EIO).with_err_data(data);
    let mut c = cq::<4>(CqFormat::Context, true);

    // API >= 1.5 with a buffer: copied, truncated to err_data_size.
    c.write_err(&err).unwrap();
    let mut user = [0u8; 3];
    let e = c
        .readerr(Flags::empty(), API_VERSION_1_5, &mut user)
        .unwrap();
    assert_eq!(e.err_data, ErrDataOut::Copied(3));
    assert_eq!(user, [1, 2, 3]);

    c.write_err(&err).unwrap();
    let mut user = [0u8; 16];
    let e = c.readerr(Flags::empty(), V1_17, &mut user).unwrap();
    assert_eq!(e.err_data, ErrDataOut::Copied(5));
    assert_eq!(user[..6], [1, 2, 3, 4, 5, 0]);

    // API >= 1.5 with err_data_size 0: the provider's buffer.
    c.write_err(&err).unwrap();
    let e = c.readerr(Flags::empty(), V1_17, &mut []).unwrap();
    assert_eq!(e.err_data, ErrDataOut::ProviderOwned(5));
    assert_eq!(c.last_err_data(), [1, 2, 3, 4, 5]);

    // API < 1.5: the application's buffer is ignored.
    let other = CqErrEntry::new(9, comp::SEND_MSG, Errno::EIO)
        .with_err_data(ErrData::<MAX_ERR_DATA>::new(&[7, 7]).unwrap());
    c.write_err(&other).unwrap();
    let mut user = [0u8; 16];
    let e = c.readerr(Flags::empty(), V1_4, &mut user).unwrap();
    assert_eq!(e.err_data, ErrDataOut::ProviderOwned(2));
    assert_eq!(user, [0; 16]);
    assert_eq!(c.last_err_data(), [7, 7]);
}

#[test]
fn err_data_capacity() {
    assert!(ErrData::<MAX_ERR_DATA>::new(&[0; MAX_ERR_DATA]).is_ok());
    assert_eq!(
        ErrData::<MAX_ERR_DATA>::new(&[0; MAX_ERR_DATA + 1]),
        Err(Errno::EINVAL)
    );
    assert!(ErrData::<MAX_ERR_DATA>::default().is_empty());
    assert_eq!(ErrData::<MAX_ERR_DATA>::new(&[1, 2]).unwrap().len(), 2);
}

#[test]
fn readfrom_reports_source_addresses() {
    let mut c = cq::<4>(CqFormat::Msg, true);
    c.write(&CqEntry::new(1, comp::RECV_MSG).with_src_addr(42))
        .unwrap();
    c.write(&CqEntry::new(2, comp::RECV_MSG)).unwrap();
    let mut out = [CqMsgEntry::default(); 2];
    assert_eq!(c.readfrom(&mut out, &mut [0; 1]), Err(Errno::EINVAL));
    let mut src = [0; 2];
    assert_eq!(c.readfrom(&mut out, &mut src), Ok(2));
    assert_eq!(src, [42, FI_ADDR_NOTAVAIL]);
}

#[test]
fn source_err_and_truncation_entries() {
    let rx = CqEntry::new(7, comp::RECV_TAGGED).with_len(64).with_tag(5);
    let addr = [2u8, 0, 0x1f, 0x90, 10, 0, 0, 1, 0, 3, 0, 0, 0, 0, 0, 0];
    let e = CqErrEntry::source_err(&rx, &addr).unwrap();
    assert_eq!((e.err, e.err.code()), (Errno::EADDRNOTAVAIL, 99));
    assert_eq!((e.len, e.tag), (64, 5));
    assert_eq!(e.err_data.as_slice(), addr);
    assert_eq!(
        CqErrEntry::source_err(&rx, &[0; MAX_ERR_DATA + 1]),
        Err(Errno::EINVAL)
    );

    let t = CqErrEntry::truncated(&rx, 36);
    assert_eq!((t.err, t.olen, t.len), (Errno::ETRUNC, 36, 64));
    let mut c = cq::<2>(CqFormat::Tagged, true);
    c.write_err(&t.with_prov_errno(-5)).unwrap();
    let o = c.readerr(Flags::empty(), V1_17, &mut []).unwrap();
    assert_eq!((o.err, o.olen, o.prov_errno, o.tag), (265, 36, -5, 5));
}

#[test]
fn rm_enabled_reservations_never_overrun() {
    let mut c = cq::<3>(CqFormat::Context, true);
    c.try_reserve().unwrap();
    c.try_reserve().unwrap();
    c.write(&send(0)).unwrap();
    assert_eq!(c.available(), 0);
    // The post that could overrun the CQ fails with -FI_EAGAIN...
    assert_eq!(c.try_reserve(), Err(Errno::EAGAIN));
    // ...and so does a completion that would eat a reserved slot.
    assert_eq!(c.write(&send(9)), Err(Errno::EAGAIN));
    assert!(!c.is_overrun());
    // Reserved completions always fit.
    c.write_reserved(&send(1)).unwrap();
    c.write_err_reserved(&CqErrEntry::new(2, comp::SEND_MSG, Errno::EIO))
        .unwrap();
    assert_eq!((c.len(), c.reserved()), (3, 0));
    assert_eq!(c.try_reserve(), Err(Errno::EAGAIN));

    // Reading frees room; a released reservation frees room too.
    let mut out = [CqContextEntry::default(); 4];
    assert_eq!(c.read(&mut out), Ok(2));
    c.try_reserve().unwrap();
    c.try_reserve().unwrap();
    assert_eq!(c.try_reserve(), Err(Errno::EAGAIN));
    c.release();
    c.try_reserve().unwrap();
    c.release();
    c.release();
    c.release(); // extra releases are harmless
    assert_eq!(c.reserved(), 0);
    // A plain write to a full RM-enabled CQ is refused, not an overrun.
    c.write(&send(3)).unwrap();
    c.write(&send(4)).unwrap();
    assert_eq!(c.write(&send(5)), Err(Errno::EAGAIN));
    assert!(!c.is_overrun());
}

#[test]
fn rm_disabled_overrun_keeps_valid_entries_then_reports_eoverrun() {
    let mut c = cq::<2>(CqFormat::Context, false);
    c.write(&send(1)).unwrap();
    c.write_err(&CqErrEntry::new(2, comp::SEND_MSG, Errno::EIO))
        .unwrap();
    assert_eq!(c.write(&send(3)), Err(Errno::EOVERRUN));
    assert!(c.is_overrun());
    // Fatal: no more completions, no more reservations.
    assert_eq!(c.write(&send(4)), Err(Errno::EOVERRUN));
    assert_eq!(c.write_reserved(&send(4)), Err(Errno::EOVERRUN));
    assert_eq!(c.try_reserve(), Err(Errno::EOVERRUN));
    assert_eq!(c.len(), 2);

    let mut out = [CqContextEntry::default(); 4];
    assert_eq!(c.read(&mut out), Ok(1));
    assert_eq!(out[0].op_context, 1);
    assert_eq!(c.read(&mut out), Err(Errno::EAVAIL));
    assert_eq!(
        c.readerr(Flags::empty(), V1_17, &mut [])
            .unwrap()
            .op_context,
        2
    );
    assert_eq!(c.read(&mut out), Err(Errno::EOVERRUN));
    assert_eq!(Errno::EOVERRUN.to_ret(), -268);
    assert_eq!(c.readfrom(&mut out, &mut [0; 4]), Err(Errno::EOVERRUN));
    assert_eq!(
        c.readerr(Flags::empty(), V1_17, &mut []),
        Err(Errno::EOVERRUN)
    );
}

#[test]
fn strerror_texts() {
    let c = cq::<1>(CqFormat::Context, true);
    assert_eq!(c.strerror(-(Errno::ETRUNC.code())), "Truncation error");
    assert_eq!(
        c.strerror(Errno::EAGAIN.code()),
        "Resource temporarily unavailable"
    );
    assert_eq!(strerror(0), "Success");
    assert_eq!(strerror(9999), "Unknown error");
    let mut buf = [0xffu8; 6];
    assert_eq!(strerror_into(Errno::ETRUNC.code(), &mut buf), 5);
    assert_eq!(&buf, b"Trunc\0");
    let mut buf = [0xffu8; 32];
    assert_eq!(strerror_into(0, &mut buf), 7);
    assert_eq!(&buf[..8], b"Success\0");
    assert_eq!(strerror_into(0, &mut []), 0);
}

fn waitable<const N: usize>(cond: CqWaitCond) -> Cq<[CqSlot; N]> {
    let a = CqAttr {
        wait_obj: WaitObj::Fd,
        wait_cond: cond,
        ..CqAttr::default()
    };
    Cq::new(&a, true, [CqSlot::EMPTY; N]).unwrap()
}

#[test]
fn wait_objects_gate_sread_signal_and_trywait() {
    let mut none = cq::<2>(CqFormat::Context, true);
    assert_eq!(none.check_sread(), Err(Errno::ENOSYS));
    assert_eq!(none.signal(), Err(Errno::ENOSYS));
    assert_eq!(none.trywait(), Err(Errno::EINVAL));
    let set = CqAttr {
        wait_obj: WaitObj::Set,
        wait_set: 1,
        ..CqAttr::default()
    };
    let set = Cq::new(&set, true, [CqSlot::EMPTY; 2]).unwrap();
    assert_eq!(set.check_sread(), Err(Errno::ENOSYS));
    let fd = waitable::<2>(CqWaitCond::None);
    assert_eq!(fd.check_sread(), Ok(()));
}

#[test]
fn trywait_arms_and_insertions_wake() {
    let mut c = waitable::<4>(CqWaitCond::None);
    let g0 = c.generation();
    assert_eq!(c.trywait(), Ok(()));
    assert!(!c.take_wakeup());
    c.write(&send(1)).unwrap();
    assert!(c.take_wakeup());
    assert!(!c.take_wakeup(), "one wake-up per arming");
    assert_ne!(c.generation(), g0);
    // Something to read: blocking is not safe.
    assert_eq!(c.trywait(), Err(Errno::EAGAIN));
    c.read(&mut [CqContextEntry::default()]).unwrap();
    assert_eq!(c.trywait(), Ok(()));
    // Error entries wake too, and make trywait fail.
    c.write_err(&CqErrEntry::new(1, Flags::SEND, Errno::EIO))
        .unwrap();
    assert!(c.take_wakeup());
    assert_eq!(c.trywait(), Err(Errno::EAGAIN));
    // Writes without an armed waiter raise nothing.
    c.readerr(Flags::empty(), V1_17, &mut []).unwrap();
    c.write(&send(2)).unwrap();
    assert!(!c.take_wakeup());
}

#[test]
fn threshold_condition() {
    let mut c = waitable::<8>(CqWaitCond::Threshold);
    c.write(&send(1)).unwrap();
    assert_eq!(c.trywait_cond(3), Ok(()));
    c.write(&send(2)).unwrap();
    assert!(!c.take_wakeup());
    c.write(&send(3)).unwrap();
    assert!(c.take_wakeup());
    assert_eq!(c.trywait_cond(3), Err(Errno::EAGAIN));
    // An error entry satisfies any threshold.
    let mut out = [CqContextEntry::default(); 8];
    c.read(&mut out).unwrap();
    assert_eq!(c.trywait_cond(5), Ok(()));
    c.write_err(&CqErrEntry::new(1, Flags::SEND, Errno::EIO))
        .unwrap();
    assert!(c.take_wakeup());

    // Without FI_CQ_COND_THRESHOLD the cond is ignored: one entry wakes.
    let mut c = waitable::<8>(CqWaitCond::None);
    assert_eq!(c.trywait_cond(5), Ok(()));
    c.write(&send(1)).unwrap();
    assert!(c.take_wakeup());
}

#[test]
fn signal_unblocks_and_is_consumed_once() {
    let mut c = waitable::<2>(CqWaitCond::None);
    c.trywait().unwrap();
    c.signal().unwrap();
    assert!(c.take_wakeup());
    assert_eq!(
        c.trywait(),
        Err(Errno::EAGAIN),
        "a pending signal ends the wait"
    );
    assert!(c.take_signal());
    assert!(!c.take_signal());
    assert_eq!(c.read(&mut [CqContextEntry::default()]), Err(Errno::EAGAIN));
    assert_eq!(c.trywait(), Ok(()));
}

#[test]
fn overrun_wakes_a_waiter() {
    let mut c = Cq::new(
        &CqAttr {
            wait_obj: WaitObj::Yield,
            ..CqAttr::default()
        },
        false,
        [CqSlot::EMPTY; 1],
    )
    .unwrap();
    c.write(&send(1)).unwrap();
    c.read(&mut [CqContextEntry::default()]).unwrap();
    c.trywait().unwrap();
    c.write(&send(2)).unwrap();
    assert!(c.take_wakeup());
    c.write(&send(3)).unwrap_err();
    assert_eq!(c.trywait(), Err(Errno::EAGAIN));
}

#[test]
fn close_is_refused_while_bound() {
    let mut c = cq::<1>(CqFormat::Context, true);
    c.bind_ref();
    c.bind_ref();
    assert_eq!(c.check_close(), Err(Errno::EBUSY));
    c.unbind_ref();
    assert_eq!(c.check_close(), Err(Errno::EBUSY));
    c.unbind_ref();
    c.unbind_ref();
    assert_eq!(c.check_close(), Ok(()));
}

#[test]
fn completion_flag_helpers() {
    assert_eq!(comp::SEND_MSG, Flags::SEND | Flags::MSG);
    assert_eq!(comp::recv(false, false, false), Flags::RECV | Flags::MSG);
    assert_eq!(
        comp::recv(true, true, true),
        Flags::RECV | Flags::TAGGED | Flags::REMOTE_CQ_DATA | Flags::MULTI_RECV
    );
    assert_eq!(comp::MULTI_RECV_RELEASED.bits(), 1 << 16);
    assert_eq!(comp::RMA_REMOTE_WRITE, Flags::RMA | Flags::REMOTE_WRITE);
    assert!(comp::NOTIFY_FLAGS_ONLY.contains(Flags::REMOTE_CQ_DATA | Flags::MULTI_RECV));
    assert_eq!(CqEntry::default().src_addr, FI_ADDR_NOTAVAIL);
}

mod model {
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Reserve,
        Release,
        Write(bool),
        WriteReserved(bool),
        Read(usize),
        ReadErr,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            Just(Op::Reserve),
            Just(Op::Release),
            any::<bool>().prop_map(Op::Write),
            any::<bool>().prop_map(Op::WriteReserved),
            (0usize..6).prop_map(Op::Read),
            Just(Op::ReadErr),
        ]
    }

    proptest! {
        // Against a model FIFO: never panics, never loses or reorders a completion,
        // never exceeds capacity, and with RM enabled a held reservation always
        // finds room.
        #[test]
        fn cq_matches_a_fifo_model(rm in any::<bool>(), ops in proptest::collection::vec(op(), 0..200)) {
            let mut c = Cq::new(&attr(CqFormat::Context), rm, [CqSlot::EMPTY; 5]).unwrap();
            let mut model: heapless::Deque<(u64, bool), 5> = heapless::Deque::new();
            let mut held = 0usize;
            let mut overrun = false;
            let mut next = 0u64;
            for op in ops {
                match op {
                    Op::Reserve => {
                        let r = c.try_reserve();
                        if overrun {
                            prop_assert_eq!(r, Err(Errno::EOVERRUN));
                        } else if model.len() + held < 5 {
                            prop_assert_eq!(r, Ok(()));
                            held += 1;
                        } else {
                            prop_assert_eq!(r, Err(Errno::EAGAIN));
                        }
                    }
                    Op::Release => {
                        c.release();
                        held = held.saturating_sub(1);
                    }
                    Op::Write(is_err) | Op::WriteReserved(is_err) => {
                        let reserved = matches!(op, Op::WriteReserved(_)) && held > 0;
                        let id = next;
                        next += 1;
                        let r = match (is_err, matches!(op, Op::WriteReserved(_))) {
                            (false, false) => c.write(&send(id)),
                            (false, true) => c.write_reserved(&send(id)),
                            (true, false) => c.write_err(&CqErrEntry::new(id, Flags::SEND, Errno::EIO)),
                            (true, true) => c.write_err_reserved(&CqErrEntry::new(id, Flags::SEND, Errno::EIO)),
                        };
                        if reserved {
                            held -= 1;
                        }
                        if overrun {
                            prop_assert_eq!(r, Err(Errno::EOVERRUN));
                        } else {
                            // A held reservation always finds room with RM enabled;
                            // with RM disabled unreserved writes may have used it.
                            let room = if reserved {
                                prop_assert!(!rm || model.len() < 5);
                                model.len() < 5
                            } else if rm {
                                model.len() + held < 5
                            } else {
                                model.len() < 5
                            };
                            if room {
                                prop_assert_eq!(r, Ok(()));
                                model.push_back((id, is_err)).unwrap();
                            } else if rm && !reserved {
                                prop_assert_eq!(r, Err(Errno::EAGAIN));
                            } else {
                                prop_assert_eq!(r, Err(Errno::EOVERRUN));
                                overrun = true;
                            }
                        }
                    }
                    Op::Read(n) => {
                        let mut out = [CqContextEntry::default(); 6];
                        let r = c.read(&mut out[..n]);
                        match model.front() {
                            None if overrun => prop_assert_eq!(r, Err(Errno::EOVERRUN)),
                            None => prop_assert_eq!(r, Err(Errno::EAGAIN)),
                            Some((_, true)) => prop_assert_eq!(r, Err(Errno::EAVAIL)),
                            Some(_) => {
                                let got = r.unwrap();
                                prop_assert!(got <= n);
                                for e in &out[..got] {
                                    let (id, is_err) = model.pop_front().unwrap();
                                    prop_assert!(!is_err);
                                    prop_assert_eq!(e.op_context, id);
                                }
                                if got < n {
                                    prop_assert!(model.front().is_none_or(|f| f.1));
                                }
                            }
                        }
                    }
                    Op::ReadErr => {
                        let r = c.readerr(Flags::empty(), V1_17, &mut []);
                        match model.front() {
                            Some((id, true)) => {
                                prop_assert_eq!(r.unwrap().op_context, *id);
                                model.pop_front();
                            }
                            None if overrun => prop_assert_eq!(r, Err(Errno::EOVERRUN)),
                            _ => prop_assert_eq!(r, Err(Errno::EAGAIN)),
                        }
                    }
                }
                prop_assert_eq!(c.len(), model.len());
                prop_assert!(c.len() + c.reserved() <= c.capacity() || !rm);
                prop_assert_eq!(c.is_overrun(), overrun);
            }
        }
    }
}

#[test]
fn a_cq_names_the_one_queue_its_endpoints_are_on() {
    use crate::net::ALL_QUEUES;
    let mut c = Cq::new(&CqAttr::default(), false, [CqSlot::EMPTY; 8]).unwrap();
    assert_eq!(c.queue(), ALL_QUEUES, "unbound: every queue");
    c.note_queue(3);
    c.note_queue(3);
    assert_eq!(c.queue(), 3);
    c.note_queue(0);
    assert_eq!(c.queue(), ALL_QUEUES, "two queues: every queue");
    c.note_queue(3);
    assert_eq!(c.queue(), ALL_QUEUES, "and it stays so");
}
