//! `fi_prov_ini` and the `struct fi_provider` it returns: `getinfo`, `fabric`,
//! `cleanup`.

use std::cell::UnsafeCell;
use std::ffi::{c_char, c_int, c_void};
use std::ptr;
use std::sync::Once;
use std::sync::atomic::{AtomicU32, Ordering};

use hosted::sysinfo::{HostInterface, StdResolver, host_interfaces};
use ofi_nostd::Errno;
use ofi_nostd::flags::Flags;
use ofi_nostd::info::{
    self, Info, Interface, MAX_ENTRIES_PER_INTERFACE, PROV_VERSION, Provider, ProviderConfig,
};

use crate::abi::DomainAbi;
use crate::sys;
use crate::util::{cstr, neg, put};

/// The API declared before `fi_prov_ini` learnt the core's: `FI_VERSION(1, 17)`, what
/// the bindings were generated from.
pub const FI_VERSION_1_17: u32 = info::fi_version(1, 17);

/// `fi_version()` of the libfabric that loaded us (1.17 until `fi_prov_ini` asks).
static CORE_API: AtomicU32 = AtomicU32::new(FI_VERSION_1_17);

/// The API of the loading core, which decides the layouts handed to it ([`abi`]).
///
/// [`abi`]: crate::abi
pub fn core_api() -> u32 {
    CORE_API.load(Ordering::Relaxed)
}

/// The API the provider declares to a core of API `core`: the highest it implements
/// ([`info::MAX_API_VERSION`]) that the core accepts, as libfabric requires (requested
/// API <= provider API <= core API).
pub const fn declared_api(core: u32) -> u32 {
    if core < info::MAX_API_VERSION {
        core
    } else {
        info::MAX_API_VERSION
    }
}

/// The provider structure libfabric keeps a pointer to. libfabric writes its own state
/// into `context`, so it lives in an [`UnsafeCell`].
struct ProviderCell(UnsafeCell<sys::fi_provider>);

// SAFETY: the fields this library sets are written once, at compile time; only
// libfabric writes (`context`), under its own initialisation lock.
unsafe impl Sync for ProviderCell {}

static PROVIDER: ProviderCell = ProviderCell(UnsafeCell::new(sys::fi_provider {
    version: PROV_VERSION,
    fi_version: FI_VERSION_1_17,
    context: sys::fi_context {
        internal: [ptr::null_mut(); 4],
    },
    name: c"nostd".as_ptr(),
    getinfo: Some(getinfo),
    fabric: Some(crate::fabric::open),
    cleanup: Some(cleanup),
}));

/// The provider structure (for `fi_param_*`).
pub fn provider() -> *mut sys::fi_provider {
    PROVIDER.0.get()
}

/// The entry point libfabric looks up after `dlopen`ing `lib*-fi.so` (`FI_EXT_INI`):
/// asks the core its API (`fi_version()` resolves to the libfabric that loaded us: it
/// is the `libfabric.so.1` already in the process), declares [`declared_api`] of it,
/// registers the parameters once and returns the provider.
#[unsafe(no_mangle)]
pub extern "C" fn fi_prov_ini() -> *mut sys::fi_provider {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        // SAFETY: fi_version takes nothing and reads nothing.
        let core = unsafe { sys::fi_version() };
        CORE_API.store(core, Ordering::Relaxed);
        // SAFETY: libfabric calls fi_prov_ini under its initialisation lock, before it
        // reads the provider; `Once` orders this write before any later call.
        unsafe { (*provider()).fi_version = declared_api(core) };
        // SAFETY: the static provider has a valid name; defining parameters only needs it.
        unsafe { crate::params::define(provider()) };
    });
    provider()
}

/// `cleanup`: called by libfabric before it unloads the library. Nothing is global but
/// the parameters, which libfabric undefines itself.
extern "C" fn cleanup() {}

/// The limits the provider advertises and sizes its pools with.
pub fn config() -> ProviderConfig {
    let mut cfg = ProviderConfig::DEFAULT;
    // A progress thread per domain that asks for it (`crate::domain`).
    cfg.progress_auto = true;
    // FI_EP_MSG: passive endpoints and connections (crate::ep::cm, crate::ep::pep).
    cfg.msg_ep = true;
    if let Some(t) = crate::params::get_size(c"eager_threshold") {
        cfg.eager_threshold = t;
    }
    cfg
}

/// The host's interfaces the provider offers: every IPv4 interface that is up, or only
/// the one named (or addressed) by `FI_NOSTD_IFACE`.
pub fn interfaces() -> Vec<HostInterface> {
    let mut host = host_interfaces().unwrap_or_default();
    if let Some(want) = chosen_iface() {
        host.retain(|i| i.name == want || i.ip.to_string() == want);
    }
    host
}

/// `FI_NOSTD_IFACE`, when set and not empty.
fn chosen_iface() -> Option<String> {
    crate::params::get_str(c"iface").filter(|s| !s.is_empty())
}

/// The interfaces getinfo offers for a destination `node` (an active endpoint's peer,
/// neither `FI_SOURCE` nor a source address in the hints, nor `FI_NOSTD_IFACE`): for a
/// peer on this host only the loopback domain, since the kernel carries the traffic
/// through `lo` whatever address the peer has (the interface owning that address would
/// cut every message into its smaller MTU). Otherwise `host` as it is.
fn for_destination(
    mut host: Vec<HostInterface>,
    node: Option<&str>,
    flags: Flags,
    hints: Option<&Info>,
) -> Vec<HostInterface> {
    if flags.contains(Flags::SOURCE)
        || hints.is_some_and(|h| h.src_addr.is_some())
        || chosen_iface().is_some()
    {
        return host;
    }
    let dest = node.and_then(|n| {
        use ofi_nostd::info::Resolver as _;
        n.parse::<std::net::Ipv4Addr>().ok().or_else(|| {
            (!n.contains("://"))
                .then(|| StdResolver.resolve(n))
                .flatten()
                .map(Into::into)
        })
    });
    use hosted::runtime::route;
    let best =
        dest.and_then(|d| route::best_interface(d, &host, route::route(d).map(|r| r.source)));
    if best.and_then(|b| host.get(b)).is_some_and(|i| i.loopback) {
        host.retain(|i| i.loopback);
    }
    host
}

/// Runs the core's getinfo against the host.
fn core_getinfo(
    version: u32,
    node: Option<&str>,
    service: Option<&str>,
    flags: Flags,
    hints: Option<&Info>,
) -> Result<Vec<Info>, Errno> {
    let host = for_destination(interfaces(), node, flags, hints);
    let ifaces: Vec<Interface<'_>> = host.iter().map(HostInterface::as_interface).collect();
    let prov = Provider {
        cfg: config(),
        interfaces: &ifaces,
        resolver: &StdResolver,
    };
    let mut out = vec![Info::default(); (ifaces.len() * MAX_ENTRIES_PER_INTERFACE).max(1)];
    let n = info::getinfo(version, node, service, flags, hints, &prov, &mut out)?;
    out.truncate(n);
    Ok(out)
}

/// `getinfo` of `struct fi_provider`: the entries matching the hints, as a list of
/// `malloc`ed `fi_info`s for `fi_freeinfo`. Hints the core cannot represent match
/// nothing (-FI_ENODATA).
///
/// # Safety
///
/// Called by libfabric (or an application through it) with valid or NULL pointers.
pub unsafe extern "C" fn getinfo(
    version: u32,
    node: *const c_char,
    service: *const c_char,
    flags: u64,
    hints: *const sys::fi_info,
    info: *mut *mut sys::fi_info,
) -> c_int {
    // SAFETY: `info` is NULL or writable (caller's contract).
    if unsafe { put(info, ptr::null_mut()) }.is_err() {
        return neg(Errno::EINVAL);
    }
    // A name that is not UTF-8 names nothing we can resolve.
    // SAFETY: NULL or NUL-terminated (caller's contract).
    let Ok(node) = (unsafe { cstr(node) }) else {
        return neg(Errno::ENODATA);
    };
    // SAFETY: as above.
    let Ok(service) = (unsafe { cstr(service) }) else {
        return neg(Errno::ENODATA);
    };
    // fi_getinfo(3) `handle`: a passive endpoint of ours lends its address (its domain
    // is then shared by fi_domain, and fi_endpoint opens there at that address).
    let pep = if hints.is_null() {
        None
    } else {
        // SAFETY: the application's valid fi_info; its handle is NULL or a fid.
        unsafe { crate::ep::pep::pep((*hints).handle.cast()) }.ok()
    };
    let hints = if hints.is_null() {
        None
    } else {
        // SAFETY: a non-NULL hints pointer is a valid fi_info (caller's contract), its domain attributes are in the core's layout.
        let ext = unsafe { crate::info::domain_ext(hints, DomainAbi::of_core(core_api())) };
        // SAFETY: a non-NULL hints pointer is a valid fi_info (caller's contract).
        match unsafe { crate::info::from_c(hints) } {
            Some(h) if ext.fits(version) => Some(h),
            _ => return neg(Errno::ENODATA),
        }
    };
    let mut hints = hints;
    if let (Some(p), Some(h)) = (pep, hints.as_mut()) {
        match p.src_addr(h.addr_format) {
            Ok(a) => h.src_addr = Some(a),
            Err(e) => return neg(e),
        }
    }
    // libfabric's own markers (OFI_GETINFO_INTERNAL, OFI_CORE_PROV_ONLY,
    // OFI_GETINFO_HIDDEN, OFI_OFFLOAD_PROV_ONLY: bits 58-61) come when a utility
    // provider (ofi_rxm, ofi_rxd) asks for a core under it. Answered only when the
    // application named us ("nostd;ofi_rxm"): otherwise libfabric 1.17 lists the
    // layered RDM entries before ours and a plain FI_PROVIDER=nostd would get ofi_rxm.
    const INTERNAL: u64 = 0xf << 58;
    if flags & INTERNAL != 0
        && hints.as_ref().is_none_or(|h| {
            !h.fabric_attr
                .prov_name
                .as_str()
                .eq_ignore_ascii_case("nostd")
        })
    {
        return neg(Errno::ENODATA);
    }
    let flags = flags & !INTERNAL;
    let infos = match core_getinfo(
        version,
        node,
        service,
        Flags::from_bits_retain(flags),
        hints.as_ref(),
    ) {
        Ok(v) => v,
        Err(e) => return neg(e),
    };
    match crate::info::to_c(&infos, DomainAbi::of_core(core_api())) {
        Ok(list) => {
            if let Some(p) = pep {
                let mut n = list;
                while !n.is_null() {
                    // SAFETY: a node of the list just built.
                    unsafe {
                        (*n).handle = p.fid_addr() as sys::fid_t;
                        n = (*n).next;
                    }
                }
            }
            // SAFETY: checked writable above.
            unsafe { *info = list };
            0
        }
        Err(e) => neg(e),
    }
}

/// Used by the fid modules: the application's `void *context` as the core's `u64`.
pub fn ctx(context: *mut c_void) -> u64 {
    context as u64
}
