use super::*;
use crate::cq::API_VERSION_1_5;

const V1_4: u32 = (1 << 16) | 4;

fn eq<const N: usize>(flags: Flags) -> EventQueue<[EqSlot; N]> {
    let a = EqAttr {
        flags,
        ..EqAttr::default()
    };
    EventQueue::new(&a, [EqSlot::EMPTY; N]).unwrap()
}

fn entry(fid: u64) -> EqPayload {
    EqPayload::Entry(EqEntry {
        fid,
        context: 0xc0,
        data: 7,
    })
}

#[test]
fn event_values_match_fi_eq_h() {
    let evs = [
        EqEvent::NOTIFY,
        EqEvent::CONNREQ,
        EqEvent::CONNECTED,
        EqEvent::SHUTDOWN,
        EqEvent::MR_COMPLETE,
        EqEvent::AV_COMPLETE,
        EqEvent::JOIN_COMPLETE,
    ];
    for (i, e) in evs.iter().enumerate() {
        assert_eq!(e.0, i as u32);
    }
}

#[test]
fn open_validates_attributes_and_storage() {
    let s = || [EqSlot::EMPTY; 2];
    let ok = EqAttr {
        flags: Flags::WRITE | Flags::AFFINITY,
        ..EqAttr::default()
    };
    assert_eq!(EventQueue::new(&ok, s()).unwrap().attr().size, 2);
    let bad = EqAttr {
        flags: Flags::READ,
        ..EqAttr::default()
    };
    assert!(matches!(EventQueue::new(&bad, s()), Err(Errno::EINVAL)));
    let set = EqAttr {
        wait_obj: WaitObj::Set,
        ..EqAttr::default()
    };
    assert!(matches!(EventQueue::new(&set, s()), Err(Errno::EINVAL)));
    let pollfd = EqAttr {
        wait_obj: WaitObj::PollFd,
        ..EqAttr::default()
    };
    assert!(matches!(EventQueue::new(&pollfd, s()), Err(Errno::EINVAL)));
    let big = EqAttr {
        size: 3,
        ..EqAttr::default()
    };
    assert!(matches!(EventQueue::new(&big, s()), Err(Errno::ENOMEM)));
    let none: [EqSlot; 0] = [];
    assert!(matches!(
        EventQueue::new(&EqAttr::default(), none),
        Err(Errno::EINVAL)
    ));
}

#[test]
fn empty_reads_return_eagain() {
    let mut q = eq::<2>(Flags::empty());
    assert_eq!(q.read(Some(64), Flags::empty()), Err(Errno::EAGAIN));
    assert_eq!(q.read(Some(64), Flags::PEEK), Err(Errno::EAGAIN));
    assert_eq!(
        q.readerr(Flags::empty(), API_VERSION_1_5, &mut []),
        Err(Errno::EAGAIN)
    );
}

#[test]
fn fi_eq_write_needs_fi_write() {
    let mut q = eq::<2>(Flags::empty());
    assert_eq!(
        q.write(EqEvent(100), &[1, 2, 3], Flags::empty()),
        Err(Errno::EINVAL)
    );
    assert!(q.is_empty());

    let mut q = eq::<2>(Flags::WRITE);
    assert_eq!(q.write(EqEvent(100), &[1, 2, 3], Flags::empty()), Ok(3));
    assert_eq!(
        q.write(EqEvent(1), &[0; EQ_WRITE_MAX + 1], Flags::empty()),
        Err(Errno::EMSGSIZE)
    );
    assert_eq!(
        q.write(EqEvent(101), &[0; EQ_WRITE_MAX], Flags::empty()),
        Ok(EQ_WRITE_MAX)
    );
    // An application write to a full EQ is refused without overrunning it.
    assert_eq!(
        q.write(EqEvent(102), &[], Flags::empty()),
        Err(Errno::EAGAIN)
    );
    assert!(!q.is_overrun());

    let r = q.read(Some(8), Flags::empty()).unwrap();
    assert_eq!((r.event, r.len), (EqEvent(100), 3));
    let mut out = [0u8; 8];
    assert_eq!(r.payload.write_c(&mut out), Ok(3));
    assert_eq!(out[..3], [1, 2, 3]);
    // A user event is returned whole or not at all.
    assert_eq!(
        q.read(Some(EQ_WRITE_MAX - 1), Flags::empty()),
        Err(Errno::ETOOSMALL)
    );
    assert_eq!(
        q.read(Some(EQ_WRITE_MAX), Flags::empty()).unwrap().len,
        EQ_WRITE_MAX
    );
}

#[test]
fn peek_leaves_the_event_queued() {
    let mut q = eq::<4>(Flags::empty());
    q.post(EqEvent::MR_COMPLETE, entry(1)).unwrap();
    q.post(EqEvent::AV_COMPLETE, entry(2)).unwrap();
    let p1 = q.read(Some(64), Flags::PEEK).unwrap();
    let p2 = q.read(Some(64), Flags::PEEK).unwrap();
    assert_eq!(p1, p2);
    assert_eq!((p1.event, p1.len), (EqEvent::MR_COMPLETE, FI_EQ_ENTRY_SIZE));
    assert_eq!(q.len(), 2);
    assert_eq!(q.read(Some(64), Flags::empty()).unwrap(), p1);
    assert_eq!(
        q.read(Some(64), Flags::empty()).unwrap().event,
        EqEvent::AV_COMPLETE
    );
    assert_eq!(q.read(Some(64), Flags::empty()), Err(Errno::EAGAIN));
}

#[test]
fn entry_layout_and_small_buffers() {
    let mut q = eq::<4>(Flags::empty());
    q.post(EqEvent::MR_COMPLETE, entry(0x1122)).unwrap();
    // Smaller than struct fi_eq_entry: refused, the event stays.
    assert_eq!(
        q.read(Some(FI_EQ_ENTRY_SIZE - 1), Flags::empty()),
        Err(Errno::ETOOSMALL)
    );
    assert_eq!(q.len(), 1);
    let r = q.read(Some(FI_EQ_ENTRY_SIZE), Flags::empty()).unwrap();
    let mut out = [0xaau8; 32];
    assert_eq!(r.payload.write_c(&mut out), Ok(24));
    assert_eq!(out[..8], 0x1122u64.to_ne_bytes());
    assert_eq!(out[8..16], 0xc0u64.to_ne_bytes());
    assert_eq!(out[16..24], 7u64.to_ne_bytes());
    assert_eq!(out[24], 0xaa, "nothing past the struct");
    assert_eq!(r.payload.write_c(&mut out[..23]), Err(Errno::ETOOSMALL));

    // A NULL buffer consumes the event and reports 0 bytes.
    q.post(EqEvent::NOTIFY, entry(1)).unwrap();
    assert_eq!(q.read(None, Flags::empty()).unwrap().len, 0);
    assert!(q.is_empty());
}

#[test]
fn cm_data_is_cut_to_the_buffer() {
    let mut q = eq::<2>(Flags::empty());
    let cm = EqCmEntry::new(0xfe, 0x1f0, b"hello world").unwrap();
    assert_eq!(cm.data(), b"hello world");
    assert_eq!(
        EqCmEntry::new(1, 2, &[0; CM_DATA_MAX + 1]),
        Err(Errno::EINVAL)
    );
    q.post(EqEvent::CONNREQ, EqPayload::Cm(cm)).unwrap();
    assert_eq!(q.read(Some(15), Flags::PEEK), Err(Errno::ETOOSMALL));
    let r = q.read(Some(21), Flags::PEEK).unwrap();
    assert_eq!(r.len, 21);
    let mut out = [0u8; 21];
    assert_eq!(r.payload.write_c(&mut out), Ok(21));
    assert_eq!(out[..8], 0xfeu64.to_ne_bytes());
    assert_eq!(out[8..16], 0x1f0u64.to_ne_bytes());
    assert_eq!(&out[16..], b"hello");
    let r = q.read(Some(256), Flags::empty()).unwrap();
    assert_eq!((r.event, r.len), (EqEvent::CONNREQ, 16 + 11));
}

#[test]
fn error_events_give_eavail_until_readerr() {
    let mut q = eq::<4>(Flags::empty());
    q.post(EqEvent::CONNECTED, entry(1)).unwrap();
    let mut err = EqErrEntry::new(0xe9, 0xc7, Errno::ECONNREFUSED);
    err.data = 5;
    err.err_data = ErrData::new(&[9, 8, 7]).unwrap();
    q.post_err(&err).unwrap();
    q.post(EqEvent::SHUTDOWN, entry(2)).unwrap();

    assert_eq!(
        q.readerr(Flags::empty(), API_VERSION_1_5, &mut []),
        Err(Errno::EAGAIN)
    );
    assert_eq!(
        q.read(Some(64), Flags::empty()).unwrap().event,
        EqEvent::CONNECTED
    );
    assert_eq!(q.read(Some(64), Flags::empty()), Err(Errno::EAVAIL));
    assert_eq!(q.read(Some(64), Flags::PEEK), Err(Errno::EAVAIL));

    // readerr honours FI_PEEK.
    let peeked = q.readerr(Flags::PEEK, API_VERSION_1_5, &mut []).unwrap();
    assert_eq!(q.len(), 2);
    let mut user = [0u8; 2];
    let e = q
        .readerr(Flags::empty(), API_VERSION_1_5, &mut user)
        .unwrap();
    assert_eq!((e.fid, e.context, e.data), (0xe9, 0xc7, 5));
    assert_eq!((e.err, e.prov_errno), (111, 111));
    assert_eq!(e.err_data, ErrDataOut::Copied(2));
    assert_eq!(user, [9, 8]);
    assert_eq!(peeked.err_data, ErrDataOut::ProviderOwned(3));
    assert_eq!(q.last_err_data(), [9, 8, 7]);

    assert_eq!(
        q.read(Some(64), Flags::empty()).unwrap().event,
        EqEvent::SHUTDOWN
    );

    // API < 1.5 ignores the application's buffer.
    q.post_err(&err).unwrap();
    let mut user = [0u8; 8];
    let e = q.readerr(Flags::empty(), V1_4, &mut user).unwrap();
    assert_eq!(e.err_data, ErrDataOut::ProviderOwned(3));
    assert_eq!(user, [0; 8]);
    assert_eq!(q.strerror(e.prov_errno), "Connection refused");
}

#[test]
fn provider_overrun_is_fatal_after_draining() {
    let mut q = eq::<2>(Flags::WRITE);
    q.post(EqEvent::MR_COMPLETE, entry(1)).unwrap();
    q.post_err(&EqErrEntry::new(2, 0, Errno::EIO)).unwrap();
    assert_eq!(q.post(EqEvent::MR_COMPLETE, entry(3)), Err(Errno::EOVERRUN));
    assert!(q.is_overrun());
    // Writes against an overrun EQ fail with -FI_EOVERRUN.
    assert_eq!(
        q.write(EqEvent(9), &[1], Flags::empty()),
        Err(Errno::EOVERRUN)
    );
    assert_eq!(
        q.post_err(&EqErrEntry::new(2, 0, Errno::EIO)),
        Err(Errno::EOVERRUN)
    );
    // Valid events first, then the overrun.
    assert_eq!(
        q.read(Some(64), Flags::empty()).unwrap().event,
        EqEvent::MR_COMPLETE
    );
    assert_eq!(q.read(Some(64), Flags::empty()), Err(Errno::EAVAIL));
    q.readerr(Flags::empty(), API_VERSION_1_5, &mut []).unwrap();
    assert_eq!(q.read(Some(64), Flags::empty()), Err(Errno::EOVERRUN));
    assert_eq!(
        q.readerr(Flags::empty(), API_VERSION_1_5, &mut []),
        Err(Errno::EOVERRUN)
    );
}

#[test]
fn wait_hooks() {
    let mut q = eq::<2>(Flags::empty());
    assert_eq!(q.check_sread(), Err(Errno::ENOSYS));
    assert_eq!(q.trywait(), Err(Errno::EINVAL));
    let a = EqAttr {
        wait_obj: WaitObj::Set,
        wait_set: 1,
        ..EqAttr::default()
    };
    assert_eq!(
        EventQueue::new(&a, [EqSlot::EMPTY; 1])
            .unwrap()
            .check_sread(),
        Err(Errno::ENOSYS)
    );

    let a = EqAttr {
        wait_obj: WaitObj::Unspec,
        ..EqAttr::default()
    };
    let mut q = EventQueue::new(&a, [EqSlot::EMPTY; 1]).unwrap();
    assert_eq!(q.check_sread(), Ok(()));
    assert_eq!(q.trywait(), Ok(()));
    let g = q.generation();
    q.post(EqEvent::NOTIFY, entry(1)).unwrap();
    assert!(q.take_wakeup());
    assert!(!q.take_wakeup());
    assert_ne!(q.generation(), g);
    assert_eq!(q.trywait(), Err(Errno::EAGAIN));
    q.read(None, Flags::empty()).unwrap();
    assert_eq!(q.trywait(), Ok(()));
    // Overrun wakes and keeps trywait failing.
    q.post(EqEvent::NOTIFY, entry(1)).unwrap();
    q.post(EqEvent::NOTIFY, entry(2)).unwrap_err();
    q.read(None, Flags::empty()).unwrap();
    assert_eq!(q.trywait(), Err(Errno::EAGAIN));
}

#[test]
fn close_is_refused_while_bound() {
    let mut q = eq::<1>(Flags::empty());
    q.bind_ref();
    assert_eq!(q.check_close(), Err(Errno::EBUSY));
    q.unbind_ref();
    assert_eq!(q.check_close(), Ok(()));
}
