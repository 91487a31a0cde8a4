//! `struct fid_domain`: the domain and its ops (fi_domain(3)).
//!
//! A domain is one host interface (the getinfo entry's `domain_attr->name`). The core
//! domain behind it owns the CQs, counters, AVs and MRs opened on it; one lock guards
//! all of them (FI_THREAD_SAFE).

use std::ffi::{c_int, c_void};
use std::hash::{BuildHasher, Hasher};
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use hosted::mem::RawMemory;
use hosted::storage::Heap;
use hosted::sysinfo::HostInterface;
use ofi_nostd::Errno;
use ofi_nostd::addr::EpAddr;
use ofi_nostd::domain::{CntrHandle, CqHandle, Domain, DomainConfig, PassKind};
use ofi_nostd::info::{AddrFormat, Info, Progress, Threading};
use wire::link::Medium;

use crate::fabric::FabricFid;
use crate::fid::{FidObject, fi_ops, object, publish, release};
use crate::lock::DomainLock;
use crate::plane::Driver;
use crate::sys;
use crate::util::{neg, put, ret};

/// ARP cache entries of a domain on an Ethernet data plane.
const ARP_ENTRIES: usize = 64;

/// A CQ or counter whose eventfd progress signals when the core asks for a wake-up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// A completion queue.
    Cq(CqHandle<Heap>),
    /// A counter.
    Cntr(CntrHandle),
}

/// What the domain lock guards: the core domain, its data plane, wake-up
/// registrations.
pub struct DomainState {
    /// The core domain.
    pub core: Domain<Heap>,
    driver: Box<dyn Driver>,
    wakes: Vec<(Wake, RawFd)>,
    /// When the application last ran progress ([`hosted::api::now`] microseconds), for
    /// the watchdog and the FI_PROGRESS_AUTO thread.
    last: Arc<AtomicU64>,
    /// The time passes run at (busy-polling reads skip most clock readings).
    clock: hosted::api::PassClock,
    /// CQ reads served from queued completions since the last pass (see
    /// [`DomainState::progress_unless_queued`]).
    reads_unprogressed: u32,
}

impl DomainState {
    /// One progress pass: receive, deliver, transmit, flush; then signal the wait
    /// objects whose armed condition now holds.
    pub fn progress(&mut self) {
        self.pass(PassKind::Full);
    }

    /// What a post runs so its packet leaves at once: the sends posted (the next CQ
    /// read receives and runs what else is due).
    pub fn progress_tx(&mut self) {
        self.pass(PassKind::Posted);
    }

    /// What `fi_cq_read` runs before reading: a pass, unless `queued` (the CQ has an
    /// entry) and fewer than [`hosted::api::READS_PER_PASS`] reads in a row went
    /// without one. A burst of arrivals fills the CQ in one pass; reading it one entry
    /// at a time then costs no pass (and no receive system call) per entry, while
    /// acknowledgements and sends wait at most that many reads.
    pub fn progress_unless_queued(&mut self, queued: bool) {
        if queued && self.reads_unprogressed < hosted::api::READS_PER_PASS {
            self.reads_unprogressed += 1;
        } else {
            self.progress();
        }
    }

    fn pass(&mut self, kind: PassKind) {
        self.reads_unprogressed = 0;
        let (now, _) = self.run(kind);
        self.last.store(now.total_micros(), Ordering::Relaxed);
    }

    /// A full pass of the FI_PROGRESS_AUTO thread: as [`DomainState::progress`], but
    /// not counted as the application's (see [`auto_progress`]). Whether it moved
    /// anything.
    fn auto_pass(&mut self) -> bool {
        let (_, moved) = self.run(PassKind::Full);
        // What a receiving pass left for the next one goes now: the thread may sleep.
        if self.core.transmit_owed() {
            self.run(PassKind::Transmit);
        }
        moved
    }

    /// A pass of the parts `kind` names at the domain's [`hosted::api::PassClock`]
    /// time, then the wake-ups: that time, and whether the pass moved anything.
    fn run(&mut self, kind: PassKind) -> (ofi_nostd::time::Instant, bool) {
        let now = self.clock.at(kind);
        // SAFETY: libfabric's buffer contract (fi_msg(3), fi_tagged(3)): the core only
        // copies to and from buffers the application posted, each valid and untouched
        // until its operation completes or its endpoint is closed; closing discards
        // the operation in the core first.
        let mut mem = unsafe { RawMemory::new() };
        let r = self.driver.progress(&mut self.core, now, &mut mem, kind);
        let moved = r.is_ok_and(|r| r.rx + r.tx > 0);
        self.clock.after(kind, moved);
        self.wake();
        (now, moved)
    }

    /// Signals every registered wait object the core says must wake.
    pub fn wake(&mut self) {
        for (w, fd) in &self.wakes {
            let fire = match *w {
                Wake::Cq(h) => self.core.cq_mut(h).is_ok_and(|q| q.take_wakeup()),
                Wake::Cntr(h) => self.core.cntr_mut(h).is_ok_and(|c| c.take_wakeup()),
            };
            if fire {
                crate::wait::signal_fd(*fd);
            }
        }
    }

    /// Registers the eventfd of a CQ or counter.
    pub fn add_wake(&mut self, w: Wake, fd: RawFd) {
        self.wakes.push((w, fd));
    }

    /// Forgets a registration (the object is closing).
    pub fn remove_wake(&mut self, w: Wake) {
        self.wakes.retain(|(x, _)| *x != w);
    }

    /// How long until the core's next timer (`Some(ZERO)`: work is due now); `None`
    /// when no timer is armed. What a waiter asks before it sleeps, so a transmit half
    /// the last pass left for the next one runs first.
    pub fn next_timer(&mut self) -> Option<std::time::Duration> {
        if self.core.transmit_owed() {
            self.pass(PassKind::Transmit);
        }
        self.timer_left()
    }

    /// How long until the core's next timer, without a pass (see
    /// [`DomainState::next_timer`]).
    fn timer_left(&self) -> Option<std::time::Duration> {
        let at = self.core.poll_timeout()?;
        let left = at.saturating_duration_since(hosted::api::now());
        Some(std::time::Duration::from_micros(left.total_micros()))
    }
}

/// An open domain.
#[repr(C)]
pub struct DomainFid {
    c: sys::fid_domain,
    fabric: *const FabricFid,
    /// The address format of the info the domain was opened with (AV addresses use it).
    pub addr_format: AddrFormat,
    /// The data plane's descriptor (readable when frames arrive), for wait objects.
    pub link_fd: RawFd,
    /// The core domain and its data plane (`None` only while `fi_close` releases it).
    inner: DomainLock<Option<DomainState>>,
    /// The progress watchdog (see [`watchdog`]) of FI_THREAD_SAFE domains, or the
    /// progress thread (see [`auto_progress`]) of FI_PROGRESS_AUTO domains.
    watchdog: Option<Watchdog>,
}

/// The watchdog or progress thread of a domain and its stop flag.
struct Watchdog {
    stop: Arc<AtomicBool>,
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// How long the application may leave a domain without progress before the watchdog
/// runs a pass for it.
const WATCHDOG_PERIOD: std::time::Duration = std::time::Duration::from_millis(1);

/// A domain pointer that may move to the watchdog thread.
struct DomainPtr(*const DomainFid);

// SAFETY: the watchdog only reaches the domain's lock, which is Sync; the domain
// outlives the thread (fi_close joins the thread before releasing the domain).
unsafe impl Send for DomainPtr {}

/// The progress watchdog: with FI_PROGRESS_MANUAL an application drives progress by
/// calling in, but many stop calling for a while at the worst moment (fi_pingpong
/// waits on its TCP control socket right after the last message of a size, while its
/// peer waits for the acknowledgement of its reply, which the peer's retransmission
/// cannot get while nobody runs progress here). When the application has not run
/// progress for [`WATCHDOG_PERIOD`], this thread runs one pass under the domain lock,
/// so acknowledgements, retransmissions and handshakes never stall. It sleeps otherwise
/// and never contends with an application that keeps calling in. FI_THREAD_DOMAIN
/// domains have no watchdog: their data path takes no lock, so nothing else may enter
/// the domain.
fn watchdog(d: DomainPtr, last: Arc<AtomicU64>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Acquire) {
        std::thread::park_timeout(WATCHDOG_PERIOD);
        let idle = hosted::api::now()
            .total_micros()
            .saturating_sub(last.load(Ordering::Relaxed));
        if idle < WATCHDOG_PERIOD.as_micros() as u64 || stop.load(Ordering::Acquire) {
            continue;
        }
        // SAFETY: see `DomainPtr`.
        let dom = unsafe { &*d.0 };
        let _ = dom.control(|st| {
            st.progress();
            Ok(())
        });
    }
}

/// FI_PROGRESS_AUTO (fi_domain(3)): progress without application calls. While the
/// application itself runs progress (a post, a CQ or counter read, a wait) at least
/// every [`WATCHDOG_PERIOD`], this thread only sleeps: it never contends with an
/// application that polls. Once the application has left the domain alone that long,
/// the thread drives it: a pass whenever frames arrive (the data plane's descriptor),
/// the core's next timer fires, or at the latest every [`WATCHDOG_PERIOD`], until the
/// application calls in again. Completions it produces wake the CQ and counter waiters
/// as the application's passes do. The data path of such a domain always locks, also
/// under FI_THREAD_DOMAIN: this thread enters the domain too.
fn auto_progress(d: DomainPtr, last: Arc<AtomicU64>, stop: Arc<AtomicBool>, link: RawFd) {
    let wait = crate::wait::WaitFd::new(Some(link)).ok();
    // The data plane is watched from the first sleep until traffic resumes.
    let mut sleeper = None;
    while !stop.load(Ordering::Acquire) {
        let idle = hosted::api::now()
            .total_micros()
            .saturating_sub(last.load(Ordering::Relaxed));
        let period = WATCHDOG_PERIOD.as_micros() as u64;
        if idle < period {
            sleeper = None; // the application drives progress again
            std::thread::park_timeout(std::time::Duration::from_micros(period - idle));
            continue;
        }
        // SAFETY: see `DomainPtr`.
        let dom = unsafe { &*d.0 };
        let Ok((moved, timer)) = dom.control(|st| {
            let moved = st.auto_pass();
            Ok((moved, st.timer_left()))
        }) else {
            return; // the domain is closing
        };
        if moved {
            sleeper = None;
            continue; // more may be waiting
        }
        // A pass that moved nothing yet leaves the descriptor readable: a poll-mode
        // plane (DPDK), whose descriptor always is. Nap instead of spinning.
        let nap = std::time::Duration::from_micros(50);
        match &wait {
            Some(w) if !crate::wait::readable(link) => {
                // Work due at once that did not move (the link full): not a spin.
                w.arm_timer(timer.map(|t| t.clamp(nap, WATCHDOG_PERIOD)));
                if sleeper.is_none() {
                    sleeper = w.sleeper();
                }
                w.wait(WATCHDOG_PERIOD);
            }
            _ => std::thread::park_timeout(nap),
        }
    }
}

static DOMAIN_FI_OPS: sys::fi_ops = fi_ops(close);

static DOMAIN_OPS: sys::fi_ops_domain = sys::fi_ops_domain {
    size: size_of::<sys::fi_ops_domain>(),
    av_open: Some(crate::av::open),
    cq_open: Some(crate::cq::open),
    endpoint: Some(endpoint),
    scalable_ep: Some(scalable_ep),
    cntr_open: Some(crate::cntr::open),
    poll_open: Some(poll_open),
    stx_ctx: Some(stx_ctx),
    srx_ctx: Some(srx_ctx),
    query_atomic: Some(query_atomic),
    query_collective: Some(query_collective),
    endpoint2: Some(endpoint2),
};

// SAFETY: #[repr(C)] with the fid_domain (fid first) as first field; only `open` makes
// fids with this class and ops.
unsafe impl FidObject for DomainFid {
    const CLASS: u32 = sys::FI_CLASS_DOMAIN;
    fn fi_ops() -> *const sys::fi_ops {
        &raw const DOMAIN_FI_OPS
    }
}

impl DomainFid {
    /// The domain behind a `struct fid_domain *`; -FI_EINVAL if it is not ours.
    ///
    /// # Safety
    ///
    /// As [`object`].
    pub unsafe fn from_c<'a>(p: *const sys::fid_domain) -> Result<&'a DomainFid, Errno> {
        // SAFETY: forwarded contract; the fid is the first field.
        unsafe { object::<DomainFid>(p.cast()) }
    }

    /// Runs `f` on the core domain under the domain's lock (control calls).
    pub fn with<R>(
        &self,
        f: impl FnOnce(&mut Domain<Heap>) -> Result<R, Errno>,
    ) -> Result<R, Errno> {
        let mut g = self.inner.control();
        f(&mut g.as_mut().ok_or(Errno::EINVAL)?.core)
    }

    /// Runs `f` on the domain's state under the domain lock (control calls).
    pub fn control<R>(
        &self,
        f: impl FnOnce(&mut DomainState) -> Result<R, Errno>,
    ) -> Result<R, Errno> {
        let mut g = self.inner.control();
        f(g.as_mut().ok_or(Errno::EINVAL)?)
    }

    /// Runs `f` on the domain's state for a data-path call: under the domain lock,
    /// except under FI_THREAD_DOMAIN (see [`crate::lock`]).
    pub fn data<R>(
        &self,
        f: impl FnOnce(&mut DomainState) -> Result<R, Errno>,
    ) -> Result<R, Errno> {
        let mut g = self.inner.data();
        f(g.as_mut().ok_or(Errno::EINVAL)?)
    }

    /// Whether data-path calls lock (false under FI_THREAD_DOMAIN).
    pub fn data_locks(&self) -> bool {
        self.inner.data_locks()
    }

    /// The fabric's API version (err_data rules of the readerr calls).
    pub fn api_version(&self) -> u32 {
        // SAFETY: the fabric outlives its domains (fi_close of a fabric with a domain
        // open is refused).
        unsafe { &*self.fabric }.api_version()
    }

    /// The fabric the domain was opened on.
    pub fn fabric_ptr(&self) -> *const FabricFid {
        self.fabric
    }

    /// The fid pointer of this domain as the application sees it.
    pub fn as_c(&self) -> *mut sys::fid_domain {
        std::ptr::from_ref(&self.c).cast_mut()
    }
}

/// The host interface the info names: by domain name, else by source address, else the
/// first one.
fn pick_interface(info: &Info, host: &[HostInterface]) -> Result<HostInterface, Errno> {
    let d = info.domain_attr.name.as_str();
    if !d.is_empty() {
        return host
            .iter()
            .find(|i| i.name == d)
            .cloned()
            .ok_or(Errno::EINVAL);
    }
    if let Some(a) = src_addr(info)
        && let Some(i) = host.iter().find(|i| i.ip.octets() == a.ip)
    {
        return Ok(i.clone());
    }
    host.first().cloned().ok_or(Errno::EINVAL)
}

/// The info's source address, in whichever format it carries it.
fn src_addr(info: &Info) -> Option<EpAddr> {
    let a = info.src_addr.as_ref()?;
    match info.addr_format {
        AddrFormat::SOCKADDR_IN | AddrFormat::SOCKADDR => EpAddr::from_sockaddr_in(a),
        AddrFormat::STR => {
            let s = std::str::from_utf8(a).ok()?.trim_end_matches('\0');
            ofi_nostd::info::parse_addr_str(s).ok()
        }
        _ => None,
    }
}

/// A per-domain secret for provider-chosen MR keys.
fn key_seed() -> u64 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id().into());
    h.finish()
}

/// `fi_domain`: opens the domain `info` describes (as getinfo returned it) on `fabric`.
///
/// # Safety
///
/// Called through the application's `fi_domain` with valid or NULL pointers.
pub unsafe extern "C" fn open(
    fabric: *mut sys::fid_fabric,
    info: *mut sys::fi_info,
    dom: *mut *mut sys::fid_domain,
    context: *mut c_void,
) -> c_int {
    // SAFETY: forwarded contract.
    let fab = match unsafe { FabricFid::from_c(fabric) } {
        Ok(f) => f,
        Err(e) => return neg(e),
    };
    if info.is_null() || dom.is_null() {
        return neg(Errno::EINVAL);
    }
    // SAFETY: a non-NULL info of the application is a valid fi_info.
    let Some(info) = (unsafe { crate::info::from_c(info) }) else {
        return neg(Errno::EINVAL);
    };
    let iface = match pick_interface(&info, &crate::prov::interfaces()) {
        Ok(i) => i,
        Err(e) => return neg(e),
    };
    let port = src_addr(&info).map_or(0, |a| a.port);
    let plane = match crate::plane::open(&iface, port) {
        Ok(p) => p,
        Err(e) => return neg(e),
    };
    let ethernet = plane.net.medium == Medium::Ethernet;
    let intact = plane.net.intact;
    let cfg = DomainConfig {
        net: plane.net,
        arp_entries: if ethernet { ARP_ENTRIES } else { 0 },
        loopback_slots: ofi_nostd::domain::DEFAULT_LOOPBACK_SLOTS,
        key_seed: key_seed(),
        cfg: crate::prov::config(),
    };
    let d = {
        let mut f = fab.inner.lock();
        match Domain::open(&mut f, &info, cfg, Heap, context as u64) {
            Ok(d) => d,
            Err(e) => return neg(e),
        }
    };
    let mut d = d;
    let mut rc = *d.rdm_config();
    // UDP checksums already protect every datagram end to end, and an intact medium
    // (memif) cannot corrupt: no CRC32C on top.
    rc.crc = ethernet && !intact;
    rc.max_peers = hosted::api::HOST_MAX_PEERS;
    rc.unexp_slots = hosted::api::HOST_UNEXP_SLOTS;
    rc.unexp_msgs = hosted::api::HOST_UNEXP_MSGS;
    if let Some(w) = crate::params::get_size(c"window") {
        rc.window = u16::try_from(w).unwrap_or(u16::MAX);
    }
    {
        if let Err(e) = d.set_rdm_config(rc) {
            let mut f = fab.inner.lock();
            let _ = d.close(&mut f);
            return neg(e);
        }
    }
    let link_fd = plane.driver.fd();
    let auto = info.domain_attr.data_progress == Progress::Auto
        || info.domain_attr.control_progress == Progress::Auto;
    // A progress thread enters the domain too: its data path locks whatever the
    // threading model.
    let data_locks = info.domain_attr.threading != Threading::Domain || auto;
    let last = Arc::new(AtomicU64::new(hosted::api::now().total_micros()));
    let obj = publish(DomainFid {
        c: sys::fid_domain {
            fid: DomainFid::header(context),
            ops: (&raw const DOMAIN_OPS).cast_mut(),
            mr: crate::mr::domain_mr_ops(),
        },
        fabric: std::ptr::from_ref(fab),
        addr_format: info.addr_format,
        link_fd,
        inner: DomainLock::new(
            Some(DomainState {
                core: d,
                driver: plane.driver,
                wakes: Vec::new(),
                last: last.clone(),
                clock: hosted::api::PassClock::default(),
                reads_unprogressed: 0,
            }),
            data_locks,
        ),
        watchdog: None,
    });
    if data_locks {
        let stop = Arc::new(AtomicBool::new(false));
        let ptr = DomainPtr(obj.cast_const());
        let s2 = stop.clone();
        let spawned = std::thread::Builder::new()
            .name(
                if auto {
                    "nostd-progress"
                } else {
                    "nostd-watchdog"
                }
                .into(),
            )
            .spawn(move || {
                if auto {
                    auto_progress(ptr, last, s2, link_fd)
                } else {
                    watchdog(ptr, last, s2)
                }
            });
        match spawned {
            // SAFETY: `obj` was just published and is not shared yet.
            Ok(thread) => unsafe {
                (*obj).watchdog = Some(Watchdog {
                    stop,
                    thread: std::sync::Mutex::new(Some(thread)),
                })
            },
            Err(_) => {
                // SAFETY: as above; nothing else refers to it.
                let _ = unsafe { close(obj.cast()) };
                return neg(Errno::ENOMEM);
            }
        }
    }
    // SAFETY: checked non-NULL above.
    ret(unsafe { put(dom, obj.cast::<sys::fid_domain>()) })
}

/// `fi_close(domain)`: -FI_EBUSY while anything is open on it.
unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    // SAFETY: NULL or a fid (fi_close's contract).
    let d = match unsafe { object::<DomainFid>(fid) } {
        Ok(d) => d,
        Err(e) => return neg(e),
    };
    {
        let mut g = d.inner.control();
        let Some(st) = g.take() else {
            return neg(Errno::EINVAL);
        };
        // SAFETY: the fabric outlives its domains.
        let fab = unsafe { &*d.fabric };
        let mut f = fab.inner.lock();
        let DomainState {
            core,
            driver,
            wakes,
            last,
            clock,
            reads_unprogressed,
        } = st;
        if let Err((core, e)) = core.close(&mut f) {
            *g = Some(DomainState {
                core,
                driver,
                wakes,
                last,
                clock,
                reads_unprogressed,
            });
            return neg(e);
        }
    }
    if let Some(w) = &d.watchdog {
        w.stop.store(true, Ordering::Release);
        let t = w
            .thread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(t) = t {
            t.thread().unpark();
            let _ = t.join();
        }
    }
    // SAFETY: published by `open`; the core domain is closed, the watchdog has ended,
    // and the application gives the fid up.
    unsafe { release(d) };
    0
}

/// `fi_endpoint`: see [`crate::ep::open`].
unsafe extern "C" fn endpoint(
    domain: *mut sys::fid_domain,
    info: *mut sys::fi_info,
    ep: *mut *mut sys::fid_ep,
    context: *mut c_void,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { crate::ep::open(domain, info, ep, context) }
}

/// `fi_scalable_ep`: scalable endpoints are not offered.
unsafe extern "C" fn scalable_ep(
    domain: *mut sys::fid_domain,
    _info: *mut sys::fi_info,
    _ep: *mut *mut sys::fid_ep,
    _context: *mut c_void,
) -> c_int {
    // SAFETY: forwarded contract.
    match unsafe { DomainFid::from_c(domain) } {
        Ok(_) => neg(Errno::ENOSYS),
        Err(e) => neg(e),
    }
}

/// `fi_endpoint2`: as `fi_endpoint`.
unsafe extern "C" fn endpoint2(
    domain: *mut sys::fid_domain,
    info: *mut sys::fi_info,
    ep: *mut *mut sys::fid_ep,
    flags: u64,
    context: *mut c_void,
) -> c_int {
    if flags != 0 {
        return neg(Errno::ENOSYS);
    }
    // SAFETY: forwarded contract.
    unsafe { endpoint(domain, info, ep, context) }
}

/// `fi_poll_open`: no poll sets yet.
unsafe extern "C" fn poll_open(
    _domain: *mut sys::fid_domain,
    _attr: *mut sys::fi_poll_attr,
    _pollset: *mut *mut sys::fid_poll,
) -> c_int {
    neg(Errno::ENOSYS)
}

/// `fi_stx_context`: shared contexts are not offered.
unsafe extern "C" fn stx_ctx(
    _domain: *mut sys::fid_domain,
    _attr: *mut sys::fi_tx_attr,
    _stx: *mut *mut sys::fid_stx,
    _context: *mut c_void,
) -> c_int {
    neg(Errno::ENOSYS)
}

/// `fi_srx_context`: shared contexts are not offered.
unsafe extern "C" fn srx_ctx(
    _domain: *mut sys::fid_domain,
    _attr: *mut sys::fi_rx_attr,
    _rx_ep: *mut *mut sys::fid_ep,
    _context: *mut c_void,
) -> c_int {
    neg(Errno::ENOSYS)
}

/// `fi_query_atomic`: whether the domain's endpoints serve `op` on `datatype` (for the
/// fetching or compare calls with FI_FETCH_ATOMIC / FI_COMPARE_ATOMIC), with the
/// element limit and size in `attr`; -FI_EOPNOTSUPP otherwise.
unsafe extern "C" fn query_atomic(
    domain: *mut sys::fid_domain,
    datatype: sys::fi_datatype,
    op: sys::fi_op,
    attr: *mut sys::fi_atomic_attr,
    flags: u64,
) -> c_int {
    use ofi_nostd::atomic::AtomicKind;
    use wire::packet::{AtomicDatatype, AtomicOp};
    // SAFETY: NULL or a fid (contract).
    let d = match unsafe { object::<DomainFid>(domain.cast()) } {
        Ok(d) => d,
        Err(e) => return neg(e),
    };
    let (fetch, compare) = (sys::FI_FETCH_ATOMIC, sys::FI_COMPARE_ATOMIC);
    if attr.is_null() || flags & !(fetch | compare) != 0 || flags == fetch | compare {
        return neg(Errno::EINVAL);
    }
    let kind = match flags {
        f if f == fetch => AtomicKind::Fetch,
        f if f == compare => AtomicKind::Compare,
        _ => AtomicKind::Write,
    };
    let dt = u8::try_from(datatype)
        .ok()
        .and_then(AtomicDatatype::from_u8);
    let op = u8::try_from(op).ok().and_then(AtomicOp::from_u8);
    let Some((dt, op)) = dt.zip(op) else {
        return neg(Errno::EOPNOTSUPP);
    };
    match d.with(|core| core.query_atomic(op, dt, kind)) {
        Ok(count) => {
            // SAFETY: non-NULL and writable (contract).
            unsafe {
                attr.write_unaligned(sys::fi_atomic_attr {
                    count,
                    size: dt.size(),
                })
            };
            0
        }
        Err(e) => neg(e),
    }
}

/// `fi_query_collective`: collectives are not offered.
unsafe extern "C" fn query_collective(
    _domain: *mut sys::fid_domain,
    _coll: sys::fi_collective_op,
    _attr: *mut sys::fi_collective_attr,
    _flags: u64,
) -> c_int {
    neg(Errno::ENOSYS)
}
