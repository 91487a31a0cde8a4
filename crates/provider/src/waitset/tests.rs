use super::*;
use hosted::runtime::WaitObject;

/// A set of `obj` as `open` builds it, without a fabric.
fn set(obj: WaitObj) -> WaitSetFid {
    WaitSetFid {
        c: sys::fid_wait {
            fid: WaitSetFid::header(std::ptr::null_mut()),
            ops: (&raw const WAIT_OPS).cast_mut(),
        },
        obj,
        epoll: (obj != WaitObj::Yield).then(|| EpollSet::new().unwrap()),
        members: Mutex::new(Members::default()),
    }
}

/// A fake member fid (the list only compares and hands them to fi_trywait).
fn fid(n: usize) -> *mut sys::fid {
    std::ptr::without_provenance_mut(n * 64)
}

#[test]
fn members_join_and_leave_the_epoll_set() {
    let w = set(WaitObj::Fd);
    let (a, b) = (
        WaitObject::new(None).unwrap(),
        WaitObject::new(None).unwrap(),
    );
    w.join(fid(1), a.fd()).unwrap();
    w.join(fid(2), b.fd()).unwrap();
    let e = w.epoll.as_ref().unwrap();
    assert!(!e.wait(Duration::ZERO));
    b.signal();
    assert!(
        e.wait(Duration::from_secs(5)),
        "a member's wake-up wakes the set"
    );
    w.leave(fid(2));
    assert!(!e.wait(Duration::ZERO), "b left");
    w.leave(fid(2));
    assert_eq!(w.members().list.len(), 1);
    assert_eq!(w.members().change, 3);
}

#[test]
fn getwait_as_pollfd_lists_the_members() {
    let w = set(WaitObj::PollFd);
    let (a, b) = (
        WaitObject::new(None).unwrap(),
        WaitObject::new(None).unwrap(),
    );
    w.join(fid(1), a.fd()).unwrap();
    w.join(fid(2), b.fd()).unwrap();
    let mut fds = [libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    }; 2];
    let mut p = sys::fi_wait_pollfd {
        change_index: 0,
        nfds: 1,
        fd: fds.as_mut_ptr().cast(),
    };
    let cmd = sys::FI_GETWAIT as c_int;
    let arg = (&raw mut p).cast::<c_void>();
    // SAFETY: `p` is a fi_wait_pollfd whose array holds `nfds` entries (1, then 2).
    unsafe {
        assert_eq!(control_set(&w, cmd, arg), Err(Errno::ETOOSMALL));
        assert_eq!((p.nfds, p.change_index), (2, 2));
        assert_eq!(control_set(&w, cmd, arg), Ok(()));
    }
    assert_eq!(fds[0].fd, a.fd().as_raw_fd());
    assert_eq!(fds[1].fd, b.fd().as_raw_fd());
    assert!(fds.iter().all(|f| f.events == libc::POLLIN));
    let mut obj = sys::fi_wait_obj_FI_WAIT_NONE;
    // SAFETY: FI_GETWAITOBJ takes an enum fi_wait_obj; NULL is refused.
    unsafe {
        let o = (&raw mut obj).cast::<c_void>();
        assert_eq!(control_set(&w, sys::FI_GETWAITOBJ as c_int, o), Ok(()));
        assert_eq!(
            control_set(&w, cmd, std::ptr::null_mut()),
            Err(Errno::EINVAL)
        );
        assert_eq!(control_set(&w, 999, o), Err(Errno::ENOSYS));
    }
    assert_eq!(obj, sys::fi_wait_obj_FI_WAIT_POLLFD);
    w.leave(fid(1));
    w.leave(fid(2));
}

#[test]
fn a_yielding_set_has_no_descriptor() {
    let w = set(WaitObj::Yield);
    let a = WaitObject::new(None).unwrap();
    w.join(fid(1), a.fd()).unwrap();
    let mut fd: c_int = -1;
    // SAFETY: FI_GETWAIT takes an int.
    let r = unsafe { control_set(&w, sys::FI_GETWAIT as c_int, (&raw mut fd).cast()) };
    assert_eq!(r, Err(Errno::ENODATA));
    w.leave(fid(1));
    assert!(w.members().list.is_empty());
}
