//! The crate's FFI: small safe wrappers over `libc`, each `unsafe` block with the reason
//! it is sound. Everything else in the crate is safe code over these.

use std::ffi::CStr;
use std::io;
use std::mem;
use std::net::Ipv4Addr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;

use libc::{c_int, c_ulong, socklen_t};

/// Turn a `-1` return into the thread's `errno`.
pub(crate) fn cvt(ret: c_int) -> io::Result<c_int> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// `CLOCK_MONOTONIC` in microseconds (never negative, so the casts are exact), through
/// libc's `clock_gettime` (its vDSO).
pub(crate) fn monotonic_micros() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration; the clock
    // always exists on Linux (were the call to fail, `ts` would stay zero).
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000)
        .wrapping_add(ts.tv_nsec as u64 / 1_000)
}

/// The CPUs online (`sysconf(_SC_NPROCESSORS_ONLN)`), at least 1.
pub(crate) fn online_cpus() -> usize {
    // SAFETY: sysconf reads a system value; no pointers are involved.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    usize::try_from(n).unwrap_or(1).max(1)
}

/// An all-zero `mmsghdr`: null pointers, zero lengths (what the kernel expects before
/// the fields in use are filled).
pub(crate) fn empty_mmsghdr() -> libc::mmsghdr {
    // SAFETY: `mmsghdr` is a C struct of integers and raw pointers (plus, on some libcs,
    // private padding integers); the all-zero bit pattern is a valid value of each.
    unsafe { mem::zeroed() }
}

/// An all-zero `ifreq` (empty name, zero union).
fn empty_ifreq() -> libc::ifreq {
    // SAFETY: `ifreq` is a C struct of a `c_char` array and a union of integers, byte
    // arrays, `sockaddr`s and a raw pointer; all-zero is a valid value of every member.
    unsafe { mem::zeroed() }
}

/// `setsockopt(fd, level, name, value)` with the option's size taken from `T`.
pub(crate) fn setsockopt<T: Copy>(
    fd: RawFd,
    level: c_int,
    name: c_int,
    value: &T,
) -> io::Result<()> {
    let len = socklen_t::try_from(mem::size_of::<T>()).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: `value` is a live reference, so the kernel reads `size_of::<T>()`
    // initialised-or-padding bytes from valid memory and keeps no pointer to it.
    cvt(unsafe { libc::setsockopt(fd, level, name, ptr::from_ref(value).cast(), len) })?;
    Ok(())
}

/// `getsockopt` of an `int` option.
pub(crate) fn getsockopt_int(fd: RawFd, level: c_int, name: c_int) -> io::Result<c_int> {
    let mut value: c_int = 0;
    let mut len = mem::size_of::<c_int>() as socklen_t;
    // SAFETY: `value` and `len` are live locals; the kernel writes at most `len` (the
    // size of an int) bytes into `value` and updates `len`.
    cvt(unsafe { libc::getsockopt(fd, level, name, ptr::from_mut(&mut value).cast(), &mut len) })?;
    Ok(value)
}

/// Set a socket buffer size: the privileged `*FORCE` option first (it ignores the
/// `rmem_max`/`wmem_max` caps), the ordinary one when that is not permitted.
pub(crate) fn set_buffer_size(fd: RawFd, receive: bool, bytes: usize) -> io::Result<()> {
    let v = c_int::try_from(bytes).unwrap_or(c_int::MAX);
    let (force, plain) = if receive {
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF)
    } else {
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF)
    };
    match setsockopt(fd, libc::SOL_SOCKET, force, &v) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            setsockopt(fd, libc::SOL_SOCKET, plain, &v)
        }
        r => r,
    }
}

/// A fresh descriptor from a call that returns one or `-1`.
fn owned(fd: c_int) -> io::Result<OwnedFd> {
    let fd = cvt(fd)?;
    // SAFETY: `fd` was just returned by the kernel as a new descriptor that nothing
    // else owns, so `OwnedFd` may take ownership (and close it once).
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A non-blocking `AF_PACKET`/`SOCK_RAW` socket bound to no protocol yet (so it
/// receives nothing until [`bind_packet`] names one).
pub(crate) fn packet_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain system call with integer arguments.
    owned(unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })
}

/// A throw-away `AF_INET` datagram socket for interface ioctls.
fn control_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain system call with integer arguments.
    owned(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })
}

/// Bind a packet socket to every protocol (`ETH_P_ALL`) on interface `ifindex`.
pub(crate) fn bind_packet(fd: RawFd, ifindex: c_int) -> io::Result<()> {
    let sll = libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: (libc::ETH_P_ALL as u16).to_be(),
        sll_ifindex: ifindex,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    };
    let len = mem::size_of::<libc::sockaddr_ll>() as socklen_t;
    // SAFETY: `sll` is a live, fully initialised `sockaddr_ll` of `len` bytes, read only
    // during the call.
    cvt(unsafe { libc::bind(fd, ptr::from_ref(&sll).cast(), len) })?;
    Ok(())
}

/// A `SO_REUSEPORT` UDP socket bound to `addr`, so that several can share it (one
/// receive queue each). The `founder` (the group's first) binds before it sets the
/// option, so it never joins another group on that address.
pub(crate) fn reuseport_udp_socket(
    addr: std::net::SocketAddrV4,
    founder: bool,
) -> io::Result<OwnedFd> {
    // SAFETY: plain system call with integer arguments.
    let fd =
        owned(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    let reuse = |fd: &OwnedFd| {
        setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_REUSEPORT,
            &1 as &c_int,
        )
    };
    if !founder {
        reuse(&fd)?;
    }
    let sin = libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: addr.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*addr.ip()).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = mem::size_of::<libc::sockaddr_in>() as socklen_t;
    // SAFETY: `sin` is a live, fully initialised `sockaddr_in` of `len` bytes, read only
    // during the call.
    cvt(unsafe { libc::bind(fd.as_raw_fd(), ptr::from_ref(&sin).cast(), len) })?;
    if founder {
        // Bound without SO_REUSEPORT, the founder got a port no other socket holds
        // (port 0 with it set may share another group's port of the same user); set
        // now, the group forms when the next socket joins.
        reuse(&fd)?;
    }
    Ok(fd)
}

/// Attach a classic BPF program that picks the socket of a `SO_REUSEPORT` group
/// (`SO_ATTACH_REUSEPORT_CBPF`): it runs on the UDP payload and returns an index.
pub(crate) fn attach_reuseport_filter(fd: RawFd, prog: &[libc::sock_filter]) -> io::Result<()> {
    let fprog = libc::sock_fprog {
        len: u16::try_from(prog.len()).map_err(|_| io::ErrorKind::InvalidInput)?,
        // The kernel copies the program and never writes through this pointer.
        filter: prog.as_ptr().cast_mut(),
    };
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_REUSEPORT_CBPF, &fprog)
}

/// Attach a classic BPF program choosing the member socket of the packet fanout group
/// `fd` belongs to (`PACKET_FANOUT_DATA`, group mode `PACKET_FANOUT_CBPF`).
pub(crate) fn attach_fanout_filter(fd: RawFd, prog: &[libc::sock_filter]) -> io::Result<()> {
    let fprog = libc::sock_fprog {
        len: u16::try_from(prog.len()).map_err(|_| io::ErrorKind::InvalidInput)?,
        // The kernel copies the program and never writes through this pointer.
        filter: prog.as_ptr().cast_mut(),
    };
    setsockopt(fd, libc::SOL_PACKET, libc::PACKET_FANOUT_DATA, &fprog)
}

/// Attach a classic BPF program to a socket (`SO_ATTACH_FILTER`).
pub(crate) fn attach_filter(fd: RawFd, prog: &[libc::sock_filter]) -> io::Result<()> {
    let fprog = libc::sock_fprog {
        len: u16::try_from(prog.len()).map_err(|_| io::ErrorKind::InvalidInput)?,
        // The kernel copies the program and never writes through this pointer.
        filter: prog.as_ptr().cast_mut(),
    };
    setsockopt(fd, libc::SOL_SOCKET, libc::SO_ATTACH_FILTER, &fprog)
}

/// Refuse a name the kernel cannot take: more than `IFNAMSIZ - 1` bytes, or a NUL.
pub(crate) fn check_ifname(name: &str) -> io::Result<()> {
    let bytes = name.as_bytes();
    if bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("bad interface name {name:?} (at most 15 bytes, no NUL)"),
        ));
    }
    Ok(())
}

/// An `ifreq` naming interface `name` (see [`check_ifname`]).
fn ifreq_named(name: &str) -> io::Result<libc::ifreq> {
    check_ifname(name)?;
    let bytes = name.as_bytes();
    let mut ifr = empty_ifreq();
    for (d, s) in ifr.ifr_name.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    Ok(ifr)
}

/// The name the kernel left in an `ifreq`.
fn ifreq_name(ifr: &libc::ifreq) -> String {
    let bytes: Vec<u8> = ifr
        .ifr_name
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The `ifreq` ioctls this crate uses: each reads and writes only an `ifreq`.
#[derive(Clone, Copy)]
enum IfIoctl {
    GetIndex,
    GetMtu,
    SetMtu,
    GetFlags,
    SetFlags,
    GetHwAddr,
}

impl IfIoctl {
    fn request(self) -> c_ulong {
        match self {
            IfIoctl::GetIndex => libc::SIOCGIFINDEX,
            IfIoctl::GetMtu => libc::SIOCGIFMTU,
            IfIoctl::SetMtu => libc::SIOCSIFMTU,
            IfIoctl::GetFlags => libc::SIOCGIFFLAGS,
            IfIoctl::SetFlags => libc::SIOCSIFFLAGS,
            IfIoctl::GetHwAddr => libc::SIOCGIFHWADDR,
        }
    }
}

/// Run one interface ioctl on a fresh control socket.
fn if_ioctl(op: IfIoctl, ifr: &mut libc::ifreq) -> io::Result<()> {
    let sock = control_socket()?;
    // SAFETY: every request in `IfIoctl` takes a pointer to one `struct ifreq` and
    // accesses nothing beyond it; `ifr` is a live exclusive reference for the call.
    cvt(unsafe { libc::ioctl(sock.as_raw_fd(), op.request() as _, ptr::from_mut(ifr)) })?;
    Ok(())
}

/// Interface index of `name`.
pub(crate) fn if_index(name: &str) -> io::Result<c_int> {
    let mut ifr = ifreq_named(name)?;
    if_ioctl(IfIoctl::GetIndex, &mut ifr)?;
    // SAFETY: SIOCGIFINDEX succeeded, so the kernel filled the `ifru_ifindex` member;
    // any bit pattern is a valid `c_int` anyway.
    Ok(unsafe { ifr.ifr_ifru.ifru_ifindex })
}

/// MTU of interface `name`.
pub(crate) fn if_mtu(name: &str) -> io::Result<usize> {
    let mut ifr = ifreq_named(name)?;
    if_ioctl(IfIoctl::GetMtu, &mut ifr)?;
    // SAFETY: SIOCGIFMTU succeeded, so the kernel filled `ifru_mtu`; any bit pattern is
    // a valid `c_int`.
    let mtu = unsafe { ifr.ifr_ifru.ifru_mtu };
    usize::try_from(mtu).map_err(|_| io::Error::other("negative MTU"))
}

/// Set the MTU of interface `name`.
pub(crate) fn set_if_mtu(name: &str, mtu: u32) -> io::Result<()> {
    let mut ifr = ifreq_named(name)?;
    ifr.ifr_ifru.ifru_mtu = c_int::try_from(mtu).map_err(|_| io::ErrorKind::InvalidInput)?;
    if_ioctl(IfIoctl::SetMtu, &mut ifr)
}

/// Set or clear `IFF_UP` on interface `name`, leaving its other flags alone.
pub(crate) fn set_if_up(name: &str, up: bool) -> io::Result<()> {
    let mut ifr = ifreq_named(name)?;
    if_ioctl(IfIoctl::GetFlags, &mut ifr)?;
    // SAFETY: SIOCGIFFLAGS succeeded, so the kernel filled `ifru_flags`; any bit pattern
    // is a valid `c_short`.
    let flags = unsafe { ifr.ifr_ifru.ifru_flags };
    let up_flag = libc::IFF_UP as libc::c_short;
    ifr.ifr_ifru.ifru_flags = if up {
        flags | up_flag
    } else {
        flags & !up_flag
    };
    if_ioctl(IfIoctl::SetFlags, &mut ifr)
}

/// Hardware (MAC) address of Ethernet interface `name`.
pub(crate) fn if_hwaddr(name: &str) -> io::Result<[u8; 6]> {
    let mut ifr = ifreq_named(name)?;
    if_ioctl(IfIoctl::GetHwAddr, &mut ifr)?;
    // SAFETY: SIOCGIFHWADDR succeeded, so the kernel filled `ifru_hwaddr`, a `sockaddr`
    // of integers; any bit pattern is valid.
    let sa = unsafe { ifr.ifr_ifru.ifru_hwaddr };
    if sa.sa_family != libc::ARPHRD_ETHER {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{name} is not an Ethernet interface (type {})",
                sa.sa_family
            ),
        ));
    }
    let mut mac = [0u8; 6];
    for (d, s) in mac.iter_mut().zip(sa.sa_data.iter()) {
        *d = *s as u8;
    }
    Ok(mac)
}

/// `TUNSETIFF` on an open `/dev/net/tun`: attach it to interface `name` (empty: let the
/// kernel pick the next free `tapN`/`tunN`) with `flags`. Returns the name the kernel
/// used.
pub(crate) fn tun_set_iff(fd: RawFd, name: &str, flags: c_int) -> io::Result<String> {
    let mut ifr = ifreq_named(name)?;
    ifr.ifr_ifru.ifru_flags = flags as libc::c_short;
    // SAFETY: TUNSETIFF takes a pointer to one `struct ifreq`, reads its name and flags
    // and writes back the name; `ifr` is a live exclusive reference for the call.
    cvt(unsafe { libc::ioctl(fd, libc::TUNSETIFF as _, ptr::from_mut(&mut ifr)) })?;
    Ok(ifreq_name(&ifr))
}

/// Join a packet socket to a membership (`PACKET_MR_PROMISC`, ...) on `ifindex`; it is
/// dropped with the socket.
pub(crate) fn packet_membership(fd: RawFd, ifindex: c_int, mr_type: c_int) -> io::Result<()> {
    let mreq = libc::packet_mreq {
        mr_ifindex: ifindex,
        mr_type: mr_type as u16,
        mr_alen: 0,
        mr_address: [0; 8],
    };
    setsockopt(fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)
}

/// One IPv4 address of an interface, from `getifaddrs`.
#[derive(Debug, Clone)]
pub(crate) struct IfAddrV4 {
    pub(crate) name: String,
    pub(crate) addr: Ipv4Addr,
    pub(crate) netmask: Ipv4Addr,
    pub(crate) flags: u32,
}

/// Read an IPv4 address out of a `sockaddr` pointer from `getifaddrs`.
///
/// # Safety
///
/// `sa` must be null or point to a live `sockaddr` whose storage is at least as large
/// as its family's address structure (which `getifaddrs` guarantees).
unsafe fn sockaddr_v4(sa: *const libc::sockaddr) -> Option<Ipv4Addr> {
    // SAFETY: the caller guarantees `sa` is null or points to a live `sockaddr`.
    let family = unsafe { sa.as_ref() }?.sa_family;
    if c_int::from(family) != libc::AF_INET {
        return None;
    }
    // SAFETY: the family is AF_INET, so the storage holds a whole `sockaddr_in`
    // (caller's guarantee); `read_unaligned` copies it without alignment assumptions.
    let sin = unsafe { sa.cast::<libc::sockaddr_in>().read_unaligned() };
    Some(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)))
}

/// Every IPv4 address configured on this host's interfaces.
pub(crate) fn ipv4_interfaces() -> io::Result<Vec<IfAddrV4>> {
    let mut head: *mut libc::ifaddrs = ptr::null_mut();
    // SAFETY: `head` is a live out-pointer; on success the list must be freed with
    // `freeifaddrs`, which the guard below does exactly once.
    cvt(unsafe { libc::getifaddrs(&mut head) })?;
    struct Free(*mut libc::ifaddrs);
    impl Drop for Free {
        fn drop(&mut self) {
            // SAFETY: the pointer came from a successful `getifaddrs` and is freed once.
            unsafe { libc::freeifaddrs(self.0) }
        }
    }
    let _free = Free(head);
    let mut out = Vec::new();
    let mut cur = head.cast_const();
    // SAFETY: `cur` is null or a node of the list `getifaddrs` built, alive until
    // `_free` drops at the end of this function.
    while let Some(ifa) = unsafe { cur.as_ref() } {
        // SAFETY: `getifaddrs` fills address fields with null or pointers to storage
        // large enough for the address family.
        let addr = unsafe { sockaddr_v4(ifa.ifa_addr) };
        // SAFETY: as above, for the netmask.
        let mask = unsafe { sockaddr_v4(ifa.ifa_netmask) };
        if let Some(addr) = addr
            && !ifa.ifa_name.is_null()
        {
            // SAFETY: a non-null `ifa_name` is a NUL-terminated string in the list.
            let name = unsafe { CStr::from_ptr(ifa.ifa_name) };
            out.push(IfAddrV4 {
                name: name.to_string_lossy().into_owned(),
                addr,
                netmask: mask.unwrap_or(Ipv4Addr::BROADCAST),
                flags: ifa.ifa_flags,
            });
        }
        cur = ifa.ifa_next;
    }
    Ok(out)
}

/// Wait up to `timeout_ms` for `fd` to become writable. Returns whether it did.
pub(crate) fn poll_writable(fd: RawFd, timeout_ms: c_int) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: `pfd` is one live `pollfd`, matching the count of 1.
    let n = cvt(unsafe { libc::poll(&mut pfd, 1, timeout_ms) })?;
    Ok(n > 0 && pfd.revents & libc::POLLOUT != 0)
}

/// `recvmmsg(fd, hdrs, MSG_DONTWAIT)` on prepared headers.
///
/// # Safety
///
/// Every header must describe memory that is valid for the kernel to write (its
/// `msg_name` of `msg_namelen` bytes, its `msg_iovlen` iovecs and the buffers they
/// name) and that no Rust reference aliases during the call.
pub(crate) unsafe fn recvmmsg(fd: RawFd, hdrs: &mut [libc::mmsghdr]) -> io::Result<usize> {
    let n = libc::c_uint::try_from(hdrs.len()).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: the caller guarantees what the headers point to is writable and
    // unaliased; `hdrs` itself is a live exclusive slice of `n` headers.
    let r = cvt(unsafe {
        libc::recvmmsg(
            fd,
            hdrs.as_mut_ptr(),
            n,
            libc::MSG_DONTWAIT,
            ptr::null_mut(),
        )
    })?;
    Ok(r as usize)
}

/// One datagram into `hdrs[0]` (its first iovec and its name), as `recvmmsg` of one
/// header would (`msg_len`, `msg_namelen` and `MSG_TRUNC` in `msg_flags` set);
/// `Ok(0)` when `hdrs` is empty. It is a `recvfrom` (`MSG_TRUNC` reports the real
/// length): the kernel skips copying in and checking a `msghdr` and its iovec array,
/// which is most of an empty poll's cost after the system call itself. A header with a
/// control buffer (GRO: the segment size comes in it) is received with `recvmsg`.
///
/// # Safety
///
/// As for [`recvmmsg`].
pub(crate) unsafe fn recv_single(fd: RawFd, hdrs: &mut [libc::mmsghdr]) -> io::Result<usize> {
    let Some(h) = hdrs.first_mut() else {
        return Ok(0);
    };
    let m = &mut h.msg_hdr;
    if m.msg_iov.is_null() || m.msg_iovlen < 1 {
        return Ok(0);
    }
    if !m.msg_control.is_null() {
        // SAFETY: the caller guarantees everything the header names (name, iovecs,
        // control buffer) is writable and unaliased; `m` is a live exclusive header.
        let r = unsafe { libc::recvmsg(fd, m, libc::MSG_DONTWAIT) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        h.msg_len = r as libc::c_uint;
        return Ok(1);
    }
    // SAFETY: the caller guarantees the header's first iovec is valid and names a
    // writable, unaliased buffer.
    let iov = unsafe { *m.msg_iov };
    // SAFETY: that buffer is writable for `iov_len` bytes and the name (when not null)
    // for `msg_namelen` bytes, both unaliased during the call (the caller's guarantee);
    // `msg_namelen` is a live field the kernel updates.
    let r = unsafe {
        libc::recvfrom(
            fd,
            iov.iov_base,
            iov.iov_len,
            libc::MSG_DONTWAIT | libc::MSG_TRUNC,
            m.msg_name.cast(),
            if m.msg_name.is_null() {
                ptr::null_mut()
            } else {
                &mut m.msg_namelen
            },
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let got = r as usize;
    m.msg_flags = if got > iov.iov_len {
        libc::MSG_TRUNC
    } else {
        0
    };
    h.msg_len = got.min(iov.iov_len) as libc::c_uint;
    Ok(1)
}

/// `buf` as one datagram to `name` (`None`: the socket's bound destination), with
/// `sendto`, for the same reason as [`recv_single`]; `Ok(1)` when the kernel took it.
pub(crate) fn sendto<A>(fd: RawFd, buf: &[u8], name: Option<&A>) -> io::Result<usize> {
    let (addr, len) = match name {
        Some(a) => (
            ptr::from_ref(a).cast(),
            std::mem::size_of::<A>() as libc::socklen_t,
        ),
        None => (ptr::null(), 0),
    };
    // SAFETY: `buf` is readable for its length and `addr` (when not null) for `len`
    // bytes, both borrowed for the call; the kernel only reads them.
    let r = unsafe {
        libc::sendto(
            fd,
            buf.as_ptr().cast(),
            buf.len(),
            libc::MSG_DONTWAIT,
            addr,
            len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(1)
}

/// `sendmmsg(fd, hdrs, MSG_DONTWAIT)` on prepared headers.
///
/// # Safety
///
/// Every header must describe memory that is valid for the kernel to read (its
/// `msg_name` of `msg_namelen` bytes, its `msg_iovlen` iovecs and the buffers they
/// name) and that nothing writes during the call.
pub(crate) unsafe fn sendmmsg(fd: RawFd, hdrs: &mut [libc::mmsghdr]) -> io::Result<usize> {
    let n = libc::c_uint::try_from(hdrs.len()).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: the caller guarantees what the headers point to is readable and not
    // written concurrently; `hdrs` itself is a live exclusive slice of `n` headers (the
    // kernel writes their `msg_len`).
    let r = cvt(unsafe { libc::sendmmsg(fd, hdrs.as_mut_ptr(), n, libc::MSG_DONTWAIT) })?;
    Ok(r as usize)
}
