//! `struct fid_domain`: the domain and its ops (fi_domain(3)).
//!
//! A domain is one host interface (the getinfo entry's `domain_attr->name`). The core
//! domain behind it owns the CQs, counters, AVs and MRs opened on it; one lock guards
//! all of them (FI_THREAD_SAFE).

use std::ffi::{c_int, c_void};
use std::ops::{Deref, DerefMut};
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use hosted::mem::RawMemory;
use hosted::runtime::{
    HOST_ARP_ENTRIES, Policy, ProgressThread, Runtime, Signal, Turn, host_rdm_config, random_u64,
};
use hosted::storage::Heap;
use hosted::sysinfo::HostInterface;
use ofi_nostd::Errno;
use ofi_nostd::addr::EpAddr;
use ofi_nostd::domain::{Domain, DomainConfig, PassKind};
use ofi_nostd::flags::MrMode;
use ofi_nostd::info::{AddrFormat, Info, Progress, Threading};
use wire::link::Medium;

use crate::fabric::FabricFid;
use crate::fid::{FidObject, fi_ops, object, publish};
use crate::lock::DomainLock;
use crate::sys;
use crate::util::{arg, neg, put, ret};

pub use hosted::runtime::Wake;

/// A raw eventfd the runtime signals: a provider wait object's (see [`crate::wait`]).
#[derive(Debug, Clone, Copy)]
pub struct EventSignal(pub RawFd);

impl Signal for EventSignal {
    fn signal(&self) {
        crate::wait::signal_fd(self.0);
    }
}

/// What the domain lock guards: the host runtime (core domain, data plane, pass,
/// wake-ups), copying through the application's memory.
pub struct DomainState {
    rt: Runtime<RawMemory, EventSignal>,
}

/// The runtime's core domain and passes, reached as `st.core`, `st.wake()`.
impl Deref for DomainState {
    type Target = Runtime<RawMemory, EventSignal>;

    #[inline]
    fn deref(&self) -> &Self::Target {
        &self.rt
    }
}

impl DerefMut for DomainState {
    #[inline]
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.rt
    }
}

/// The memory passes copy through.
#[inline]
fn mem() -> RawMemory {
    // SAFETY: libfabric's buffer contract (fi_msg(3), fi_tagged(3)): the core only
    // copies to and from buffers the application posted, each valid and untouched
    // until its operation completes or its endpoint is closed; closing discards
    // the operation in the core first.
    unsafe { RawMemory::new() }
}

impl DomainState {
    /// One progress pass: receive, deliver, transmit, flush; then signal the wait
    /// objects whose armed condition now holds.
    #[inline]
    pub fn progress(&mut self) {
        let _ = self.rt.pass(&mut mem(), PassKind::Full);
    }

    /// What a post runs so its packet leaves at once: the sends posted (the next CQ
    /// read receives and runs what else is due).
    #[inline]
    pub fn progress_tx(&mut self) {
        let _ = self.rt.pass(&mut mem(), PassKind::Posted);
    }

    /// [`DomainState::progress`] for the endpoints of one receive queue
    /// ([`Runtime::pass_on`](hosted::runtime::Runtime::pass_on)): what an operation
    /// on a context of a scalable endpoint, or a read of its CQ, runs.
    #[inline]
    pub fn progress_on(&mut self, queue: u8) {
        let _ = self.rt.pass_on(&mut mem(), PassKind::Full, queue);
    }

    /// [`DomainState::progress_tx`] for the endpoints of one receive queue.
    #[inline]
    pub fn progress_tx_on(&mut self, queue: u8) {
        let _ = self.rt.pass_on(&mut mem(), PassKind::Posted, queue);
    }

    /// What `fi_cq_read` runs before reading: a pass over `queue` (the CQ's,
    /// [`Domain::cq_queue`](ofi_nostd::domain::Domain::cq_queue)), unless `queued`
    /// (the CQ has an entry) and the runtime's
    /// [`ReadBudget`](hosted::runtime::ReadBudget) allows a read without one.
    #[inline]
    pub fn progress_unless_queued(&mut self, queued: bool, queue: u8) {
        if self.rt.reads.needs_pass(queued) {
            self.progress_on(queue);
        }
    }

    /// How long until the core's next timer (`Some(ZERO)`: work is due now); `None`
    /// when no timer is armed. What a waiter asks before it sleeps, so a transmit half
    /// the last pass left for the next one runs first.
    pub fn next_timer(&mut self) -> Option<std::time::Duration> {
        self.rt.before_sleep(&mut mem())
    }

    /// Registers the eventfd of a CQ or counter.
    pub fn add_wake(&mut self, w: Wake, fd: RawFd) {
        self.rt.wakes.add(w, EventSignal(fd));
    }
}

/// What every object opened on a domain (AV, CQ, counter, MR, endpoint) holds: the
/// domain, and the object's core handle there.
pub struct InDomain<H> {
    domain: *const DomainFid,
    /// The object's core handle.
    pub handle: H,
}

impl<H> InDomain<H> {
    /// Object `handle` of `domain`.
    pub fn new(domain: &DomainFid, handle: H) -> Self {
        InDomain {
            domain: std::ptr::from_ref(domain),
            handle,
        }
    }

    /// The domain.
    #[inline]
    pub fn domain(&self) -> &DomainFid {
        // SAFETY: a domain outlives the objects opened on it (its fi_close is refused
        // while one is open).
        unsafe { &*self.domain }
    }

    /// The domain's address, to tell whether two objects share it.
    pub fn domain_ptr(&self) -> *const DomainFid {
        self.domain
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
    /// Whether the domain's mr_mode has FI_MR_LOCAL: only then do data calls read their
    /// `desc` arguments (fi_mr(3): otherwise a provider ignores them, and applications
    /// pass anything there; fabtests' `fi_multi_recv -M` passes one descriptor where an
    /// array of them belongs).
    pub mr_local: bool,
    /// The core domain and its data plane (`None` only while `fi_close` releases it).
    inner: DomainLock<Option<DomainState>>,
    /// The progress watchdog of FI_THREAD_SAFE domains, or the progress thread of
    /// FI_PROGRESS_AUTO domains (see [`spawn_thread`]).
    watchdog: Option<ProgressThread>,
    /// Openers: a passive endpoint's private domain is shared with every fi_domain at
    /// its address; the last fi_close closes it.
    pub(crate) refs: AtomicUsize,
}

/// One more opener of a domain, held by a pass that runs outside the lock of the list
/// it found the domain in (an EQ's connection pump): an `fi_close` of the domain (or of
/// the passive endpoint that owns it) meanwhile only drops its own reference, and the
/// last reference to go closes it.
pub(crate) struct DomainRef(*const DomainFid);

impl DomainRef {
    /// Takes a reference to `d`.
    ///
    /// # Safety
    ///
    /// `d` is open for as long as this call runs (the caller holds the lock that keeps
    /// it so).
    pub(crate) unsafe fn retain(d: *const DomainFid) -> DomainRef {
        // SAFETY: open (contract).
        unsafe { &*d }.refs.fetch_add(1, Ordering::AcqRel);
        DomainRef(d)
    }

    /// The domain's address (for comparisons).
    pub(crate) fn ptr(&self) -> *const DomainFid {
        self.0
    }
}

impl Deref for DomainRef {
    type Target = DomainFid;
    fn deref(&self) -> &DomainFid {
        // SAFETY: open while referenced (the last reference closes it, in `drop`).
        unsafe { &*self.0 }
    }
}

impl Drop for DomainRef {
    fn drop(&mut self) {
        // SAFETY: our reference: `close` drops it, or closes the domain if it was the
        // last (a failed close leaves the domain as the application's close would).
        let _ = unsafe { close(self.0.cast_mut().cast()) };
    }
}

/// How long the application may leave a domain without progress before its watchdog
/// or progress thread runs a pass for it.
const WATCHDOG_PERIOD: std::time::Duration = std::time::Duration::from_millis(1);

/// A domain pointer that may move to the progress thread.
struct DomainPtr(*const DomainFid);

// SAFETY: the thread only reaches the domain's lock, which is Sync; the domain
// outlives the thread (fi_close joins the thread before releasing the domain).
unsafe impl Send for DomainPtr {}

impl DomainPtr {
    fn get(&self) -> &DomainFid {
        // SAFETY: see `DomainPtr`.
        unsafe { &*self.0 }
    }
}

/// The domain's thread, on the runtime's [`ProgressThread`]:
///
/// - FI_PROGRESS_AUTO (fi_domain(3)): [`Policy::WhenIdle`]. While the application
///   itself runs progress (a post, a CQ or counter read, a wait) at least every
///   [`WATCHDOG_PERIOD`], the thread only sleeps; once the application has left the
///   domain alone that long, the thread drives it (its passes are not the
///   application's). The data path of such a domain always locks, also under
///   FI_THREAD_DOMAIN: this thread enters the domain too.
/// - FI_PROGRESS_MANUAL under FI_THREAD_SAFE: [`Policy::Watchdog`], one pass when the
///   application has not run progress for [`WATCHDOG_PERIOD`] (fi_pingpong, for one,
///   stops calling in while its peer waits for an acknowledgement). FI_THREAD_DOMAIN
///   domains have no watchdog: their data path takes no lock, so nothing else may
///   enter the domain.
fn spawn_thread(
    d: DomainPtr,
    auto: bool,
    activity: Arc<AtomicU64>,
    link: RawFd,
) -> std::io::Result<ProgressThread> {
    if auto {
        // SAFETY: the data plane's descriptor is open while the domain is.
        let link = unsafe { BorrowedFd::borrow_raw(link) }.try_clone_to_owned()?;
        let policy = Policy::WhenIdle {
            period: WATCHDOG_PERIOD,
        };
        ProgressThread::spawn("nostd-progress", policy, Some(link), activity, move || {
            d.get().control(|st| Ok(st.rt.idle_turn(&mut mem()))).ok()
        })
    } else {
        let policy = Policy::Watchdog {
            period: WATCHDOG_PERIOD,
        };
        ProgressThread::spawn("nostd-watchdog", policy, None, activity, move || {
            let _ = d.get().control(|st| {
                st.progress();
                Ok(())
            });
            Some(Turn::default())
        })
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
    poll_open: Some(crate::poll::open),
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
    let fab = arg!(unsafe { FabricFid::from_c(fabric) });
    if info.is_null() || dom.is_null() {
        return neg(Errno::EINVAL);
    }
    // SAFETY: a non-NULL info of the application is a valid fi_info.
    let Some(mut info) = (unsafe { crate::info::from_c(info) }) else {
        return neg(Errno::EINVAL);
    };
    if info.domain_attr.auth_key.is_empty()
        && let Some(k) = crate::params::auth_key()
    {
        // FI_NOSTD_AUTH_KEY: the key of a job whose application sets none.
        let Ok(k) = k.map_err(|e| eprintln!("libfabric:nostd: FI_NOSTD_AUTH_KEY: {e}")) else {
            return neg(Errno::EINVAL);
        };
        let Ok(k) = ofi_nostd::info::AuthKey::from_slice(&k) else {
            return neg(Errno::EINVAL);
        };
        info.domain_attr.auth_key = k;
    }
    let iface = arg!(pick_interface(&info, &crate::prov::interfaces()));
    let port = src_addr(&info).map_or(0, |a| a.port);
    if port != 0 {
        let reg = fab.listeners();
        let ip = iface.ip.octets();
        if let Some(&(_, _, shared)) = reg.iter().find(|&&(i, p, _)| i == ip && p == port) {
            // The address of a passive endpoint's domain: that domain, one more opener.
            // SAFETY: registered while open (removed by its last close, under `reg`).
            unsafe { &*(shared as *const DomainFid) }
                .refs
                .fetch_add(1, Ordering::AcqRel);
            // SAFETY: checked non-NULL above.
            return ret(unsafe { put(dom, shared as *mut sys::fid_domain) });
        }
    }
    let plane = arg!(crate::plane::open(&iface, port));
    let ethernet = plane.net.medium == Medium::Ethernet;
    let cfg = DomainConfig {
        net: plane.net,
        arp_entries: if ethernet { HOST_ARP_ENTRIES } else { 0 },
        loopback_slots: ofi_nostd::domain::DEFAULT_LOOPBACK_SLOTS,
        // A per-domain secret for provider-chosen MR keys.
        key_seed: random_u64(),
        cfg: crate::prov::config(),
        queues: plane.queues(),
    };
    let d = {
        let mut f = fab.inner.lock();
        match Domain::open(&mut f, &info, cfg, Heap, context as u64) {
            Ok(d) => d,
            Err(e) => return neg(e),
        }
    };
    let mut d = d;
    let mut rc = host_rdm_config(d.rdm_config(), &plane.caps);
    if let Some(w) = crate::params::get_size(c"window") {
        rc.window = u16::try_from(w).unwrap_or(u16::MAX);
    }
    if let Some(w) = crate::params::get_size(c"rx_window") {
        rc.rx_window = u16::try_from(w).unwrap_or(u16::MAX);
        // Room to hold what a span beyond the window brings out of order.
        rc.reorder_slots = rc.reorder_slots.max(usize::from(rc.rx_window));
    }
    {
        if let Err(e) = d.set_rdm_config(rc) {
            let mut f = fab.inner.lock();
            let _ = d.close(&mut f);
            return neg(e);
        }
    }
    let link_fd = plane.driver.wait_fd().map_or(-1, |f| f.as_raw_fd());
    // From API 2.0 `progress` (data_progress's slot) alone says how both progress.
    let auto = info.domain_attr.data_progress == Progress::Auto
        || (info.domain_attr.control_progress == Progress::Auto
            && fab.api_version() < ofi_nostd::info::fi_version(2, 0));
    // A progress thread enters the domain too: its data path locks whatever the
    // threading model.
    let data_locks = info.domain_attr.threading != Threading::Domain || auto;
    let rt = Runtime::new(d, plane.driver);
    let activity = rt.activity();
    let obj = publish(DomainFid {
        c: sys::fid_domain {
            fid: DomainFid::header(context),
            ops: (&raw const DOMAIN_OPS).cast_mut(),
            mr: crate::mr::domain_mr_ops(),
        },
        fabric: std::ptr::from_ref(fab),
        addr_format: info.addr_format,
        link_fd,
        mr_local: info.domain_attr.mr_mode.contains(MrMode::LOCAL),
        inner: DomainLock::new(Some(DomainState { rt }), data_locks),
        watchdog: None,
        refs: AtomicUsize::new(1),
    });
    if data_locks {
        match spawn_thread(DomainPtr(obj.cast_const()), auto, activity, link_fd) {
            // SAFETY: `obj` was just published and is not shared yet.
            Ok(t) => unsafe { (*obj).watchdog = Some(t) },
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

/// Whether `FI_LOG_LEVEL` (libfabric's logging variable; this provider has no other
/// log) asks for info or more.
pub(crate) fn log_info() -> bool {
    std::env::var("FI_LOG_LEVEL")
        .is_ok_and(|l| matches!(l.to_ascii_lowercase().as_str(), "info" | "debug" | "trace"))
}

/// One log line in one write(2), so the lines of processes sharing a stderr pipe (an
/// MPI job's ranks) do not interleave (`eprintln!` writes its pieces one by one).
pub(crate) fn log_line(line: String) {
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// The frames a closing domain (its data plane, net layer and wire dispatch) dropped,
/// and with several receive queues what each moved, on stderr when [`log_info`] (one
/// write).
fn log_drops(r: &hosted::drops::DropReport, queues: &[hosted::runtime::QueueCounts]) {
    if log_info() {
        let queues = hosted::runtime::QueueCounts::describe(queues);
        log_line(format!("libfabric:nostd:domain: closed, {r}{queues}\n"));
    }
}

/// `fi_close(domain)`: -FI_EBUSY while anything is open on it.
///
/// # Safety
///
/// `fid` is NULL or a fid the caller gives up (fi_close's contract).
pub(crate) unsafe extern "C" fn close(fid: *mut sys::fid) -> c_int {
    // SAFETY: NULL or a fid (contract).
    let d = arg!(unsafe { object::<DomainFid>(fid) });
    // SAFETY: the fabric outlives its domains.
    let fab = unsafe { &*d.fabric };
    // Held to the end: an fi_domain joining a shared domain waits for this close
    // (lock order: the registry, then the domain, then the fabric).
    let mut reg = fab.listeners();
    if d.refs.load(Ordering::Acquire) > 1 {
        // A shared domain: one opener less.
        d.refs.fetch_sub(1, Ordering::AcqRel);
        return 0;
    }
    let me = std::ptr::from_ref(d) as usize;
    let shut = |d: &DomainFid| {
        {
            let mut g = d.inner.control();
            let st = g.as_mut().ok_or(Errno::EINVAL)?;
            // SAFETY: the fabric outlives its domains.
            let fab = unsafe { &*d.fabric };
            let mut f = fab.inner.lock();
            let link = st.rt.link_drops();
            let queues = st.rt.queue_counts();
            let core = st.rt.take_core().ok_or(Errno::EINVAL)?;
            log_drops(
                &hosted::drops::DropReport::new(&link, core.net_stats(), core.stats()),
                &queues,
            );
            if let Err((core, e)) = core.close(&mut f) {
                st.rt.restore_core(core);
                return Err(e);
            }
            *g = None;
        }
        reg.retain(|&(_, _, p)| p != me);
        // The core domain is closed: end the watchdog before the fid goes.
        if let Some(t) = &d.watchdog {
            t.stop();
        }
        Ok(())
    };
    // SAFETY: forwarded contract.
    unsafe { crate::fid::close::<DomainFid>(fid, shut) }
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

/// `fi_scalable_ep`: see [`crate::ep::sep::open`].
unsafe extern "C" fn scalable_ep(
    domain: *mut sys::fid_domain,
    info: *mut sys::fi_info,
    ep: *mut *mut sys::fid_ep,
    context: *mut c_void,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { crate::ep::sep::open(domain, info, ep, context) }
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

/// `fi_stx_context` ([`crate::ep::stx`]).
unsafe extern "C" fn stx_ctx(
    domain: *mut sys::fid_domain,
    attr: *mut sys::fi_tx_attr,
    stx: *mut *mut sys::fid_stx,
    context: *mut c_void,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { crate::ep::stx::open(domain, attr, stx, context) }
}

/// `fi_srx_context` ([`crate::ep::srx`]).
unsafe extern "C" fn srx_ctx(
    domain: *mut sys::fid_domain,
    attr: *mut sys::fi_rx_attr,
    rx_ep: *mut *mut sys::fid_ep,
    context: *mut c_void,
) -> c_int {
    // SAFETY: forwarded contract.
    unsafe { crate::ep::srx::open(domain, attr, rx_ep, context) }
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
    let d = arg!(unsafe { object::<DomainFid>(domain.cast()) });
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
