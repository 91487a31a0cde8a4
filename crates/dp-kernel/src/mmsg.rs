//! Fixed rings of preallocated buffers moved in batches by `recvmmsg`/`sendmmsg`,
//! shared by the UDP and AF_PACKET links.
//!
//! A ring owns `n` slots of `size` bytes in one allocation, plus one socket address,
//! length and flag word per slot, plus the `mmsghdr`/`iovec` arrays the system calls
//! need. The headers are rebuilt from the ring's own buffers right before each system
//! call, so they never point at anything stale.

use std::io;
use std::os::fd::RawFd;

use crate::Stats;
use crate::sys;

/// Most slots a ring may have: the kernel's `UIO_MAXIOV`, the largest batch
/// `recvmmsg`/`sendmmsg` accept.
pub(crate) const MAX_RING: usize = 1024;

/// What a ring stores as each slot's `msg_name`.
pub(crate) trait Name: Copy {
    /// The value a slot's name is reset to before a receive.
    const EMPTY: Self;
    /// Whether `msg_name` is used at all (otherwise null, length 0).
    const USED: bool;
    /// Whether two names are the same destination, so their datagrams may share one
    /// GSO send (only UDP addresses ever do).
    fn same(&self, _other: &Self) -> bool {
        false
    }
}

impl Name for libc::sockaddr_in {
    const EMPTY: Self = libc::sockaddr_in {
        sin_family: 0,
        sin_port: 0,
        sin_addr: libc::in_addr { s_addr: 0 },
        sin_zero: [0; 8],
    };
    const USED: bool = true;
    fn same(&self, other: &Self) -> bool {
        self.sin_port == other.sin_port && self.sin_addr.s_addr == other.sin_addr.s_addr
    }
}

impl Name for libc::sockaddr_ll {
    const EMPTY: Self = libc::sockaddr_ll {
        sll_family: 0,
        sll_protocol: 0,
        sll_ifindex: 0,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    };
    const USED: bool = true;
}

/// No `msg_name` (a bound AF_PACKET socket transmits on its interface).
#[derive(Debug, Clone, Copy)]
pub(crate) struct NoName;

impl Name for NoName {
    const EMPTY: Self = NoName;
    const USED: bool = false;
}

/// The most datagrams one GSO send carries: the kernel's `UDP_MAX_SEGMENTS` (64 on
/// every kernel with GSO; newer ones allow more).
pub(crate) const GSO_MAX_SEGS: usize = 64;

/// The most payload bytes one GSO send carries: what one IPv4 datagram can hold (the
/// kernel builds the whole run as one packet before it segments it).
pub(crate) const GSO_MAX_BYTES: usize = 65507;

/// One control message with room for an `int`: `UDP_SEGMENT` (a `u16`) going out,
/// `UDP_GRO` (an `int`) coming in. `data` sits where `CMSG_DATA` points (right after
/// the aligned header, which `repr(C)` reproduces on every Linux ABI; a unit test
/// checks it against libc's macros).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct Cmsg {
    hdr: libc::cmsghdr,
    data: [u8; 4],
}

/// `CMSG_LEN(len)`: the header plus `len` bytes of data.
const fn cmsg_len(len: usize) -> usize {
    std::mem::offset_of!(Cmsg, data) + len
}

/// `CMSG_SPACE(len)`: [`cmsg_len`] with the data padded to the header's alignment.
const fn cmsg_space(len: usize) -> usize {
    std::mem::offset_of!(Cmsg, data) + len.next_multiple_of(std::mem::size_of::<usize>())
}

impl Cmsg {
    fn empty() -> Self {
        // SAFETY: `cmsghdr` is plain integers (and, on musl, integer padding); all
        // zeroes is a valid value.
        let hdr = unsafe { std::mem::zeroed::<libc::cmsghdr>() };
        Cmsg { hdr, data: [0; 4] }
    }

    /// A `UDP_SEGMENT` message: split this send into datagrams of `size` bytes.
    fn segment(size: u16) -> Self {
        let mut c = Cmsg::empty();
        c.hdr.cmsg_len = cmsg_len(2) as _;
        c.hdr.cmsg_level = libc::SOL_UDP;
        c.hdr.cmsg_type = libc::UDP_SEGMENT;
        c.data[..2].copy_from_slice(&size.to_ne_bytes());
        c
    }

    /// The segment size of a received `UDP_GRO` message the kernel wrote `written`
    /// bytes of (0: none, or something else).
    #[allow(
        clippy::unnecessary_cast,
        reason = "cmsg_len is not usize on every libc"
    )]
    fn gro_size(&self, written: usize) -> u32 {
        let h = &self.hdr;
        if written < cmsg_len(4)
            || h.cmsg_len as usize != cmsg_len(4)
            || h.cmsg_level != libc::SOL_UDP
            || h.cmsg_type != libc::UDP_GRO
        {
            return 0;
        }
        u32::try_from(i32::from_ne_bytes(self.data)).unwrap_or(0)
    }
}

/// The system-call arrays. Their raw pointers only ever point into the [`Slots`] that
/// owns them and are rewritten before every system call.
struct SysVecs {
    hdrs: Box<[libc::mmsghdr]>,
    iovs: Box<[libc::iovec]>,
    /// One control message per header, for rings that use them (GSO or GRO; empty
    /// otherwise, and then no header carries one).
    ctrl: Box<[Cmsg]>,
}

// SAFETY: the raw pointers inside are plain addresses of the owning `Slots`' heap
// buffers (which move with it between threads) and are dereferenced only by the kernel
// inside a system call made through `&mut Slots`; no thread-affine state is involved.
unsafe impl Send for SysVecs {}

/// `n` buffers of `size` bytes with per-slot metadata.
pub(crate) struct Slots<A: Name> {
    data: Box<[u8]>,
    size: usize,
    lens: Box<[usize]>,
    names: Box<[A]>,
    flags: Box<[libc::c_int]>,
    sys: SysVecs,
    /// Receive rings: the data buffer the headers were last built for by a full
    /// [`Slots::prepare`] (null: not built), and how many of them the last `recvmmsg`
    /// used (the kernel rewrote their `msg_namelen`). An idle poll then costs one system
    /// call, not a rebuild of every header.
    rx_base: usize,
    rx_used: usize,
    /// Receive rings with GRO: each slot's segment size from its `UDP_GRO` message
    /// (0: the slot holds one datagram). Empty without GRO.
    gro: Box<[u32]>,
    /// Whether the first header of the last `sendmmsg` was a GSO run (so its error
    /// may be the kernel or device refusing GSO).
    head_gso: bool,
    /// GSO runs (headers of more than one datagram) the last `sendmmsg` sent.
    gso_runs: usize,
}

impl<A: Name> Slots<A> {
    /// Allocate a ring: the only allocation a link makes for its data path.
    pub(crate) fn new(n: usize, size: usize) -> io::Result<Self> {
        if n == 0 || n > MAX_RING || size == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("ring of {n} slots of {size} bytes (1..={MAX_RING} slots, size > 0)"),
            ));
        }
        let bytes = n.checked_mul(size).ok_or(io::ErrorKind::InvalidInput)?;
        Ok(Slots {
            data: vec![0u8; bytes].into_boxed_slice(),
            size,
            lens: vec![0; n].into_boxed_slice(),
            names: vec![A::EMPTY; n].into_boxed_slice(),
            flags: vec![0; n].into_boxed_slice(),
            rx_base: 0,
            rx_used: 0,
            gro: Box::new([]),
            head_gso: false,
            gso_runs: 0,
            sys: SysVecs {
                ctrl: Box::new([]),
                hdrs: (0..n).map(|_| sys::empty_mmsghdr()).collect(),
                iovs: (0..n)
                    .map(|_| libc::iovec {
                        iov_base: std::ptr::null_mut(),
                        iov_len: 0,
                    })
                    .collect(),
            },
        })
    }

    /// Give every header a control message: for GSO sends, or (`gro`) to read each
    /// received buffer's `UDP_GRO` segment size. Done once, before the first call.
    pub(crate) fn use_control(&mut self, gro: bool) {
        let n = self.n();
        self.sys.ctrl = vec![Cmsg::empty(); n].into_boxed_slice();
        if gro {
            self.gro = vec![0; n].into_boxed_slice();
        }
        self.rx_base = 0;
    }

    /// Number of slots.
    pub(crate) fn n(&self) -> usize {
        self.lens.len()
    }

    /// Slot size in bytes.
    pub(crate) fn size(&self) -> usize {
        self.size
    }

    /// The whole buffer of slot `i` (for writing).
    pub(crate) fn buf_mut(&mut self, i: usize) -> &mut [u8] {
        let start = i * self.size;
        self.data
            .get_mut(start..start + self.size)
            .unwrap_or(&mut [])
    }

    /// The GRO segment size of received slot `i` (0: one datagram).
    #[inline]
    pub(crate) fn gro_size(&self, i: usize) -> usize {
        self.gro.get(i).copied().unwrap_or(0) as usize
    }

    /// Bytes `r` of slot `i` (a received buffer may hold several GRO segments).
    pub(crate) fn range(&self, i: usize, r: std::ops::Range<usize>) -> &[u8] {
        let start = i * self.size;
        let end = r.end.min(self.size);
        self.data
            .get(start + r.start.min(end)..start + end)
            .unwrap_or(&[])
    }

    /// The filled part of slot `i`, its name and its `msg_flags`.
    pub(crate) fn get(&self, i: usize) -> (&[u8], A, libc::c_int) {
        let start = i * self.size;
        let len = self.lens.get(i).copied().unwrap_or(0).min(self.size);
        let data = self.data.get(start..start + len).unwrap_or(&[]);
        let name = self.names.get(i).copied().unwrap_or(A::EMPTY);
        let flags = self.flags.get(i).copied().unwrap_or(0);
        (data, name, flags)
    }

    /// Record what slot `i` holds for transmission.
    pub(crate) fn set(&mut self, i: usize, len: usize, name: A) {
        if let (Some(l), Some(a)) = (self.lens.get_mut(i), self.names.get_mut(i)) {
            *l = len.min(self.size);
            *a = name;
        }
    }

    /// Build headers `0..k` for the slots `slot(0..k)`, with whole buffers (`recv`) or
    /// their recorded lengths. Returns `k` clamped to the ring size.
    fn prepare(&mut self, k: usize, slot: impl Fn(usize) -> usize, recv: bool) -> usize {
        let n = self.n();
        let k = k.min(n);
        let size = self.size;
        if recv {
            self.names.fill(A::EMPTY);
            self.flags.fill(0);
        }
        // Base pointers are taken once, after the last write through a reference to
        // each array and before the system call, so they stay valid until it returns.
        let data = self.data.as_mut_ptr();
        for (j, iov) in self.sys.iovs.iter_mut().take(k).enumerate() {
            // `wrap` keeps every pointer inside `data` whatever `slot` returns.
            let i = wrap(slot(j), n);
            let len = if recv {
                size
            } else {
                self.lens.get(i).copied().unwrap_or(0)
            };
            *iov = libc::iovec {
                iov_base: data.wrapping_add(i * size).cast(),
                iov_len: len,
            };
        }
        let iovs = self.sys.iovs.as_mut_ptr();
        let names = self.names.as_mut_ptr();
        let ctrl = self.sys.ctrl.as_mut_ptr();
        let with_ctrl = recv && !self.sys.ctrl.is_empty();
        for (j, h) in self.sys.hdrs.iter_mut().take(k).enumerate() {
            let i = wrap(slot(j), n);
            *h = sys::empty_mmsghdr();
            if A::USED {
                h.msg_hdr.msg_name = names.wrapping_add(i).cast();
                h.msg_hdr.msg_namelen = std::mem::size_of::<A>() as libc::socklen_t;
            }
            h.msg_hdr.msg_iov = iovs.wrapping_add(j);
            h.msg_hdr.msg_iovlen = 1;
            if with_ctrl {
                h.msg_hdr.msg_control = ctrl.wrapping_add(j).cast();
                h.msg_hdr.msg_controllen = std::mem::size_of::<Cmsg>() as _;
            }
        }
        k
    }

    /// Build headers for the `k` queued slots `slot(0..k)` as GSO runs: consecutive
    /// datagrams to the same destination, all as long as the first but the last (which
    /// may be shorter), at most [`GSO_MAX_SEGS`] and [`GSO_MAX_BYTES`], share one header
    /// (one iovec per slot, a `UDP_SEGMENT` message with the first's length); any other
    /// datagram gets a header of its own. Returns how many headers were built.
    fn prepare_gso(&mut self, k: usize, slot: impl Fn(usize) -> usize) -> usize {
        let n = self.n();
        let k = k.min(n).min(self.sys.ctrl.len());
        let size = self.size;
        let len_of = |lens: &[usize], j: usize| lens.get(wrap(slot(j), n)).copied().unwrap_or(0);
        // Group first (writes to `ctrl`), then take the base pointers.
        let mut groups = 0;
        let mut j = 0;
        while j < k {
            let i = wrap(slot(j), n);
            let seg = len_of(&self.lens, j).min(size);
            let name = self.names.get(i).copied().unwrap_or(A::EMPTY);
            let (mut g, mut total) = (1, seg);
            while j + g < k && g < GSO_MAX_SEGS && seg > 0 {
                let l = len_of(&self.lens, j + g);
                let same = self
                    .names
                    .get(wrap(slot(j + g), n))
                    .is_some_and(|a| a.same(&name));
                if l == 0 || l > seg || total + l > GSO_MAX_BYTES || !same {
                    break;
                }
                g += 1;
                total += l;
                if l < seg {
                    break; // a short datagram ends its run
                }
            }
            if let (Some(c), Some(h)) =
                (self.sys.ctrl.get_mut(groups), self.sys.hdrs.get_mut(groups))
            {
                *c = Cmsg::segment(u16::try_from(seg).unwrap_or(u16::MAX));
                // Parked in `msg_len` (which the kernel overwrites) until built below.
                h.msg_len = g as libc::c_uint;
            }
            groups += 1;
            j += g;
        }
        let data = self.data.as_mut_ptr();
        for (j, iov) in self.sys.iovs.iter_mut().take(k).enumerate() {
            let i = wrap(slot(j), n);
            *iov = libc::iovec {
                iov_base: data.wrapping_add(i * size).cast(),
                iov_len: self.lens.get(i).copied().unwrap_or(0).min(size),
            };
        }
        let iovs = self.sys.iovs.as_mut_ptr();
        let names = self.names.as_mut_ptr();
        let ctrl = self.sys.ctrl.as_mut_ptr();
        let mut j = 0;
        for (gi, h) in self.sys.hdrs.iter_mut().take(groups).enumerate() {
            let i = wrap(slot(j), n);
            let g = (h.msg_len as usize).max(1);
            *h = sys::empty_mmsghdr();
            h.msg_hdr.msg_name = names.wrapping_add(i).cast();
            h.msg_hdr.msg_namelen = std::mem::size_of::<A>() as libc::socklen_t;
            h.msg_hdr.msg_iov = iovs.wrapping_add(j);
            h.msg_hdr.msg_iovlen = g as _;
            if g > 1 {
                h.msg_hdr.msg_control = ctrl.wrapping_add(gi).cast();
                h.msg_hdr.msg_controllen = cmsg_space(2) as _;
            }
            j += g;
        }
        groups
    }

    /// One `recvmmsg` into every slot (one `recvmsg` into slot 0 when `single`); returns
    /// how many datagrams arrived (slots `0..count`, with lengths, names and `msg_flags`
    /// recorded).
    #[allow(
        clippy::unnecessary_cast,
        reason = "msg_controllen is not usize on every libc"
    )]
    pub(crate) fn recv(&mut self, fd: RawFd, single: bool) -> io::Result<usize> {
        let n = self.n();
        let base = self.data.as_mut_ptr() as usize;
        if self.rx_base != base {
            self.prepare(n, |j| j, true);
            self.rx_base = base;
        } else {
            // Headers, iovecs and names still point where `prepare` put them (the
            // boxes never move or shrink); restore what the last call rewrote.
            let used = self.rx_used.min(n);
            let controllen = if self.sys.ctrl.is_empty() {
                0
            } else {
                std::mem::size_of::<Cmsg>()
            };
            for h in self.sys.hdrs.iter_mut().take(used) {
                h.msg_hdr.msg_namelen = if A::USED {
                    std::mem::size_of::<A>() as libc::socklen_t
                } else {
                    0
                };
                h.msg_hdr.msg_controllen = controllen as _;
                h.msg_hdr.msg_flags = 0;
                h.msg_len = 0;
            }
            if let Some(names) = self.names.get_mut(..used) {
                names.fill(A::EMPTY);
            }
        }
        // On failure the kernel wrote no header, except perhaps the first.
        self.rx_used = 1;
        let hdrs = self
            .sys
            .hdrs
            .get_mut(..if single { n.min(1) } else { n })
            .unwrap_or(&mut []);
        // SAFETY: `prepare` pointed every header at this ring's own `names` slot
        // (`size_of::<A>()` bytes), its own `iovs` entry and, through it, its own slot of
        // `size` bytes inside `data`, and (with GRO) at its own `ctrl` entry of
        // `msg_controllen` bytes, for the `data` buffer at `rx_base`, which is still
        // the one (the boxes are never replaced or resized, and a receive ring is never
        // prepared for sending); all are live heap allocations owned by `self`, which is
        // exclusively borrowed, so nothing aliases them during the call.
        let got = unsafe {
            if single {
                sys::recv_single(fd, hdrs)
            } else {
                sys::recvmmsg(fd, hdrs)
            }
        }?;
        self.rx_used = got;
        for (j, h) in self.sys.hdrs.iter().take(got).enumerate() {
            if let (Some(l), Some(f)) = (self.lens.get_mut(j), self.flags.get_mut(j)) {
                *l = h.msg_len as usize;
                *f = h.msg_hdr.msg_flags;
            }
            if let (Some(g), Some(c)) = (self.gro.get_mut(j), self.sys.ctrl.get(j)) {
                *g = if h.msg_hdr.msg_flags & libc::MSG_CTRUNC != 0 {
                    0
                } else {
                    c.gro_size(h.msg_hdr.msg_controllen as usize)
                };
            }
        }
        Ok(got)
    }

    /// One `sendmmsg` of the `k` slots `slot(0..k)`, as GSO runs when `gso`; returns
    /// how many slots the kernel took.
    #[allow(
        clippy::unnecessary_cast,
        reason = "msg_iovlen is not usize on every libc"
    )]
    pub(crate) fn send(
        &mut self,
        fd: RawFd,
        k: usize,
        slot: impl Fn(usize) -> usize,
        gso: bool,
    ) -> io::Result<usize> {
        self.head_gso = false;
        self.gso_runs = 0;
        if k == 1 {
            return self.send_one(fd, slot(0));
        }
        self.rx_base = 0;
        if gso && !self.sys.ctrl.is_empty() {
            let h = self.prepare_gso(k, slot);
            let hdrs = self.sys.hdrs.get_mut(..h).unwrap_or(&mut []);
            self.head_gso = hdrs.first().is_some_and(|h| h.msg_hdr.msg_iovlen > 1);
            // SAFETY: `prepare_gso` just pointed every header at this ring's own `names`
            // slot, a run of its own `iovs` entries (each at most `size` bytes of its own
            // slot in `data`) and, for a run, at its own `ctrl` entry; all are live heap
            // allocations owned by `self`, exclusively borrowed, so nothing writes them
            // during the call.
            let sent = unsafe { sys::sendmmsg(fd, hdrs) }?;
            let done = hdrs.get(..sent).unwrap_or(&[]);
            self.gso_runs = done.iter().filter(|h| h.msg_hdr.msg_iovlen > 1).count();
            return Ok(done.iter().map(|h| h.msg_hdr.msg_iovlen as usize).sum());
        }
        let k = self.prepare(k, slot, false);
        let hdrs = self.sys.hdrs.get_mut(..k).unwrap_or(&mut []);
        // SAFETY: `prepare` just pointed every header at this ring's own `names` slot,
        // its own `iovs` entry and, through it, at most `size` bytes of its own slot in
        // `data`; all are live heap allocations owned by `self`, exclusively borrowed, so
        // nothing writes them during the call.
        unsafe { sys::sendmmsg(fd, hdrs) }
    }

    /// Whether the last [`Slots::send`] began with a GSO run (then its error may be
    /// the kernel or the device refusing GSO).
    pub(crate) fn head_was_gso(&self) -> bool {
        self.head_gso
    }

    /// GSO runs the last successful [`Slots::send`] handed to the kernel.
    pub(crate) fn gso_runs_sent(&self) -> usize {
        self.gso_runs
    }

    /// One datagram (every ping-pong turn): a `sendto` of the slot, which costs less
    /// than preparing the ring's headers for `sendmmsg`.
    fn send_one(&self, fd: RawFd, i: usize) -> io::Result<usize> {
        let i = wrap(i, self.n());
        let len = self.lens.get(i).copied().unwrap_or(0).min(self.size);
        let Some(buf) = self.data.get(i * self.size..i * self.size + len) else {
            return Ok(0);
        };
        let name = if A::USED { self.names.get(i) } else { None };
        sys::sendto(fd, buf, name)
    }
}

/// How a receive ring is consumed: one `recvmmsg` fills it, tokens lend its slots in
/// order, the next `recvmmsg` happens only once every slot was lent.
pub(crate) struct RxRing<A: Name> {
    pub(crate) slots: Slots<A>,
    filled: usize,
    next: usize,
    /// The last refill left the socket empty (it returned fewer datagrams than
    /// slots): once those are lent, `next` says "nothing" without another system call.
    /// Without this every busy-poll pass that received made a second, empty call
    /// before its completions became visible.
    drained: bool,
    /// The last refill found nothing: poll with one `recvfrom`, which costs less than an
    /// empty `recvmmsg`, until something arrives (then the next refill is a batch).
    idle: bool,
    /// Where the next GRO segment of slot `next` starts (0: at a slot's start).
    off: usize,
    /// The longest datagram (or GRO segment) lent; longer ones are dropped as
    /// truncated (with GRO the slots are larger than any datagram the link takes).
    limit: usize,
}

impl<A: Name> std::fmt::Debug for RxRing<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RxRing")
            .field("slots", &self.slots.n())
            .field("size", &self.slots.size())
            .field("ready", &self.ready())
            .finish()
    }
}

/// Refills tried by one `next` call before it reports "nothing" (a batch may be all
/// truncated datagrams, or a call may fail with a stale error).
const MAX_REFILLS: usize = 4;

/// `i` modulo `n` (0 when `n` is 0), without a division in the usual case of a ring
/// index at most one turn past the end: every datagram sent computes a few of these.
#[inline]
fn wrap(i: usize, n: usize) -> usize {
    if i < n {
        i
    } else if i - n < n {
        i - n
    } else {
        i.checked_rem(n).unwrap_or(0)
    }
}

impl<A: Name> RxRing<A> {
    pub(crate) fn new(n: usize, size: usize) -> io::Result<Self> {
        Ok(RxRing {
            slots: Slots::new(n, size)?,
            filled: 0,
            next: 0,
            drained: false,
            idle: false,
            off: 0,
            limit: size,
        })
    }

    /// A ring whose slots take a GRO buffer of up to [`GSO_MAX_BYTES`] and which lends
    /// it as the datagrams of at most `limit` bytes it coalesces.
    pub(crate) fn with_gro(n: usize, limit: usize) -> io::Result<Self> {
        let mut r = RxRing::new(n, GSO_MAX_BYTES.next_multiple_of(64))?;
        r.slots.use_control(true);
        r.limit = limit;
        Ok(r)
    }

    /// Received buffers not yet lent.
    pub(crate) fn ready(&self) -> usize {
        self.filled - self.next
    }

    /// The next received datagram that `accept` takes, as its slot and its bytes in
    /// it (a GRO buffer is lent one segment at a time), refilling with `recvmmsg` when
    /// the ring is used up; `None` when the socket has nothing. Truncated buffers and
    /// those `accept` refuses are dropped and counted.
    pub(crate) fn next(
        &mut self,
        fd: RawFd,
        stats: &mut Stats,
        accept: impl Fn(&A) -> bool,
    ) -> Option<(usize, std::ops::Range<usize>)> {
        let mut refills = 0;
        loop {
            while self.next < self.filled {
                let i = self.next;
                let (data, name, flags) = self.slots.get(i);
                let (len, seg) = (data.len(), self.slots.gro_size(i));
                if self.off == 0 {
                    // A slot's first look: the whole buffer is checked once.
                    if flags & libc::MSG_TRUNC != 0 {
                        stats.rx_truncated += 1;
                        self.next += 1;
                        continue;
                    }
                    if !accept(&name) {
                        stats.rx_filtered += 1;
                        self.next += 1;
                        continue;
                    }
                    if seg != 0 && seg < len {
                        stats.rx_gro += 1;
                    }
                }
                let start = self.off;
                let end = if seg == 0 {
                    len
                } else {
                    (start + seg).min(len)
                };
                if end >= len {
                    self.next += 1;
                    self.off = 0;
                } else {
                    self.off = end;
                }
                if end - start > self.limit {
                    // Longer than the link takes (possible only with GRO's large slots).
                    stats.rx_truncated += 1;
                    continue;
                }
                stats.rx_packets += 1;
                stats.rx_bytes += (end - start) as u64;
                return Some((i, start..end));
            }
            if refills == MAX_REFILLS || self.drained {
                self.drained = false;
                return None;
            }
            refills += 1;
            self.filled = 0;
            self.next = 0;
            self.off = 0;
            let single = self.idle;
            stats.rx_calls += 1;
            match self.slots.recv(fd, single) {
                Ok(0) => {
                    self.idle = true;
                    return None;
                }
                Ok(k) => {
                    stats.rx_batches += 1;
                    self.filled = k;
                    // A single receive cannot tell whether more wait: the next refill
                    // (next pass) is a batch.
                    self.drained = single || k < self.slots.n();
                    self.idle = false;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.idle = true;
                    return None;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    // E.g. a pending ICMP error on a connected socket, reported (and so
                    // cleared) by this call: count it and try again.
                    stats.rx_errors += 1;
                    stats.last_errno = e.raw_os_error().unwrap_or(0);
                }
            }
        }
    }
}

/// A transmit ring: tokens fill slots at the tail, [`TxRing::flush`] hands the queued
/// ones from the head to the kernel with `sendmmsg`.
pub(crate) struct TxRing<A: Name> {
    pub(crate) slots: Slots<A>,
    head: usize,
    count: usize,
    gso: Gso,
}

/// Whether a transmit ring sends runs of equal-size datagrams with GSO.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gso {
    /// Never (not asked for, not supported, or refused at the first try).
    Off,
    /// Asked for and supported, not yet sent: a refusal now turns it off for good.
    Untried,
    /// The kernel took a GSO run on this socket: a later refusal (a route through a
    /// device without checksum offload) sends that flush's head plainly.
    Works,
}

impl<A: Name> std::fmt::Debug for TxRing<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxRing")
            .field("slots", &self.slots.n())
            .field("size", &self.slots.size())
            .field("queued", &self.queued())
            .finish()
    }
}

/// `EINTR`s one flush tolerates before it leaves the rest for the next flush.
const MAX_INTERRUPTS: usize = 8;

impl<A: Name> TxRing<A> {
    pub(crate) fn new(n: usize, size: usize) -> io::Result<Self> {
        Ok(TxRing {
            slots: Slots::new(n, size)?,
            head: 0,
            count: 0,
            gso: Gso::Off,
        })
    }

    /// Send runs of equal-size datagrams to one destination as GSO sends from now on
    /// (the caller checked the kernel has `UDP_SEGMENT`).
    pub(crate) fn enable_gso(&mut self) {
        self.slots.use_control(false);
        self.gso = Gso::Untried;
    }

    /// Whether GSO is in use (asked for, and not refused at the first try).
    pub(crate) fn gso(&self) -> Gso {
        self.gso
    }

    /// Slots queued for the kernel.
    pub(crate) fn queued(&self) -> usize {
        self.count
    }

    /// Every slot is queued.
    pub(crate) fn is_full(&self) -> bool {
        self.count >= self.slots.n()
    }

    /// The slot a token may fill next (valid while not full).
    pub(crate) fn tail(&self) -> usize {
        wrap(self.head + self.count, self.slots.n())
    }

    /// Queue the tail slot, filled with `len` bytes for `name`.
    pub(crate) fn commit(&mut self, len: usize, name: A) {
        if self.is_full() {
            return;
        }
        let i = self.tail();
        self.slots.set(i, len, name);
        self.count += 1;
    }

    fn pop(&mut self, k: usize) {
        let k = k.min(self.count);
        self.head = wrap(self.head + k, self.slots.n());
        self.count -= k;
        if self.count == 0 {
            // Nothing queued: the next datagram goes into the first slot again, still
            // in the cache, instead of the next of `n` (64 x 8972 bytes by default,
            // more than a core's L2, which a ping-pong would walk one turn at a time).
            self.head = 0;
        }
    }

    /// Hand every queued slot to the kernel, in order, with as few `sendmmsg` calls as
    /// it takes. Returns how many stay queued.
    ///
    /// * back-pressure (`EAGAIN`, `ENOBUFS`): stop; the rest stays queued, in order;
    /// * any other error concerns the head datagram, or is a stale error the kernel
    ///   reports once (`sendmmsg` keeps the error of a partly sent batch for the next
    ///   call): count it and retry the head once; if the kernel refuses it again, drop
    ///   it (counted) and go on, so one bad datagram never wedges the ring.
    ///
    /// With GSO, a refusal of the head run (`EIO` from a device without checksum
    /// offload, `EINVAL`, ...) is counted in [`Stats::tx_gso_refused`] and that run is
    /// sent again as plain datagrams; if GSO never worked on this socket it is turned
    /// off for good.
    pub(crate) fn flush(&mut self, fd: RawFd, stats: &mut Stats) -> usize {
        let mut failed_once = false;
        let mut interrupts = 0;
        let mut plain = false;
        while self.count > 0 {
            let (n, head) = (self.slots.n(), self.head);
            let gso = self.gso != Gso::Off && !std::mem::take(&mut plain);
            match self.slots.send(fd, self.count, |j| wrap(head + j, n), gso) {
                Ok(0) => {
                    stats.tx_busy += 1;
                    break;
                }
                Ok(sent) => {
                    let runs = self.slots.gso_runs_sent();
                    if runs > 0 {
                        self.gso = Gso::Works;
                        stats.tx_gso += runs as u64;
                    }
                    stats.tx_batches += 1;
                    stats.tx_packets += sent as u64;
                    for j in 0..sent {
                        stats.tx_bytes += self.slots.get(wrap(head + j, n)).0.len() as u64;
                    }
                    self.pop(sent);
                    failed_once = false;
                }
                Err(e) => {
                    let errno = e.raw_os_error().unwrap_or(0);
                    if errno == libc::EAGAIN || errno == libc::ENOBUFS {
                        stats.tx_busy += 1;
                        break;
                    }
                    if errno == libc::EINTR {
                        interrupts += 1;
                        if interrupts > MAX_INTERRUPTS {
                            break;
                        }
                        continue;
                    }
                    if self.slots.head_was_gso() {
                        stats.tx_gso_refused += 1;
                        stats.last_errno = errno;
                        if self.gso == Gso::Untried {
                            self.gso = Gso::Off;
                        }
                        plain = true;
                        continue;
                    }
                    stats.tx_errors += 1;
                    stats.last_errno = errno;
                    if failed_once {
                        stats.tx_dropped += 1;
                        self.pop(1);
                        failed_once = false;
                    } else {
                        failed_once = true;
                    }
                }
            }
        }
        self.count
    }

    /// Flush, and while the kernel pushes back wait for the socket to drain, for at
    /// most about `budget_ms` in all (what a link does when it is dropped).
    pub(crate) fn drain(&mut self, fd: RawFd, stats: &mut Stats, budget_ms: u32) {
        const STEP_MS: u32 = 10;
        let mut waited = 0;
        while self.flush(fd, stats) > 0 && waited < budget_ms {
            // An error here (EINTR, a closed peer) just means: try the flush again.
            let _ = sys::poll_writable(fd, STEP_MS as libc::c_int);
            waited += STEP_MS;
        }
        // What is still queued now is lost: count it rather than hide it.
        stats.tx_dropped += self.count as u64;
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixDatagram;

    use super::*;

    #[test]
    fn wrap_is_the_remainder_for_any_index() {
        for n in 0..9usize {
            for i in 0..40usize {
                let want = if n == 0 { 0 } else { i % n };
                assert_eq!(wrap(i, n), want, "wrap({i}, {n})");
            }
        }
    }

    /// The control message's layout is the one libc's macros describe.
    #[test]
    #[allow(
        clippy::unnecessary_cast,
        reason = "cmsg_len is not usize on every libc"
    )]
    fn cmsg_layout_matches_the_libc_macros() {
        for len in [2u32, 4] {
            // SAFETY: both macros are pure arithmetic on their argument.
            let (l, sp) = unsafe { (libc::CMSG_LEN(len), libc::CMSG_SPACE(len)) };
            assert_eq!(cmsg_len(len as usize), l as usize);
            assert_eq!(cmsg_space(len as usize), sp as usize);
            assert!(std::mem::size_of::<Cmsg>() >= sp as usize);
        }
        let c = Cmsg::segment(1472);
        assert_eq!(c.hdr.cmsg_len as usize, cmsg_len(2));
        assert_eq!(c.data[..2], 1472u16.to_ne_bytes());
        // A received UDP_GRO message reads back; anything else reads as none.
        let mut g = Cmsg::empty();
        g.hdr.cmsg_len = cmsg_len(4) as _;
        g.hdr.cmsg_level = libc::SOL_UDP;
        g.hdr.cmsg_type = libc::UDP_GRO;
        g.data = 1200i32.to_ne_bytes();
        assert_eq!(g.gro_size(cmsg_len(4)), 1200);
        assert_eq!(g.gro_size(cmsg_len(4) - 1), 0, "cut short");
        g.hdr.cmsg_type = libc::UDP_SEGMENT;
        assert_eq!(g.gro_size(cmsg_len(4)), 0, "not GRO");
    }

    #[test]
    fn ring_sizes_are_checked() {
        assert!(Slots::<NoName>::new(0, 64).is_err());
        assert!(Slots::<NoName>::new(MAX_RING + 1, 64).is_err());
        assert!(Slots::<NoName>::new(4, 0).is_err());
        assert!(Slots::<NoName>::new(MAX_RING, 1).is_ok());
    }

    /// Kernel back-pressure (`EAGAIN` from a tiny send buffer) leaves slots queued in
    /// order; later flushes send them, across many wrap-arounds of the ring, with
    /// nothing lost, duplicated or reordered.
    #[test]
    fn back_pressure_keeps_order_across_wraparound() {
        const TOTAL: u32 = 500;
        let (a, b) = UnixDatagram::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        sys::set_buffer_size(a.as_raw_fd(), false, 1).unwrap(); // the kernel's minimum
        let mut tx: TxRing<NoName> = TxRing::new(8, 64).unwrap();
        let mut rx: RxRing<NoName> = RxRing::new(4, 64).unwrap();
        let (mut ts, mut rs) = (Stats::default(), Stats::default());
        let (mut next, mut expect, mut saw_busy) = (0u32, 0u32, false);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while expect < TOTAL {
            assert!(std::time::Instant::now() < deadline, "stuck at {expect}");
            while !tx.is_full() && next < TOTAL {
                let i = tx.tail();
                tx.slots.buf_mut(i)[..4].copy_from_slice(&next.to_be_bytes());
                tx.commit(4 + (next % 7) as usize, NoName);
                next += 1;
            }
            saw_busy |= tx.flush(a.as_raw_fd(), &mut ts) > 0;
            // Drain slowly (one per turn) so the sender keeps hitting its limit.
            if let Some((i, _)) = rx.next(b.as_raw_fd(), &mut rs, |_| true) {
                let (data, _, _) = rx.slots.get(i);
                assert_eq!(data.len(), 4 + (expect % 7) as usize);
                assert_eq!(data[..4], expect.to_be_bytes());
                expect += 1;
            }
        }
        assert!(saw_busy && ts.tx_busy > 0, "{ts:?}");
        assert_eq!((ts.tx_packets, ts.tx_dropped, ts.tx_errors), (500, 0, 0));
        assert_eq!(tx.queued(), 0);
        assert_eq!(rs.rx_packets, 500);
    }

    /// A ring the kernel emptied starts over at its first slot (the one a ping-pong
    /// keeps in the cache); while slots stay queued, the tail moves on past them.
    #[test]
    fn an_emptied_ring_starts_over_at_its_first_slot() {
        let (a, b) = UnixDatagram::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let mut tx: TxRing<NoName> = TxRing::new(8, 64).unwrap();
        let mut ts = Stats::default();
        for round in 0..3u8 {
            assert_eq!(tx.tail(), 0, "round {round}");
            for k in 0..3u8 {
                let i = tx.tail();
                assert_eq!(i, usize::from(k));
                tx.slots.buf_mut(i)[0] = round * 10 + k;
                tx.commit(1, NoName);
            }
            assert_eq!(tx.flush(a.as_raw_fd(), &mut ts), 0);
        }
        let mut got = [0u8; 4];
        let sent: Vec<u8> = (0..9)
            .map(|_| {
                assert_eq!(b.recv(&mut got).unwrap(), 1);
                got[0]
            })
            .collect();
        assert_eq!(sent, [0, 1, 2, 10, 11, 12, 20, 21, 22]);
    }
}
