//! `struct fid_domain`: the domain and its ops (fi_domain(3)).
//!
//! A domain is one host interface (the getinfo entry's `domain_attr->name`). The core
//! domain behind it owns the CQs, counters, AVs and MRs opened on it; one lock guards
//! all of them (FI_THREAD_SAFE).

use std::ffi::{c_int, c_void};
use std::hash::{BuildHasher, Hasher};

use hosted::sysinfo::HostInterface;
use ofi_nostd::Errno;
use ofi_nostd::addr::EpAddr;
use ofi_nostd::domain::{Domain, DomainConfig};
use ofi_nostd::info::{AddrFormat, Info};
use ofi_nostd::net::NetConfig;
use spin::Mutex;
use wire::link::{Capabilities, Medium};

use crate::fabric::FabricFid;
use crate::fid::{FidObject, fi_ops, object, publish, release};
use crate::heap::Heap;
use crate::sys;
use crate::util::{neg, put, ret};

/// IPv4 and UDP header bytes: the UDP payload a link MTU leaves.
const IP_UDP_HEADER_LEN: usize = 28;

/// An open domain.
#[repr(C)]
pub struct DomainFid {
    c: sys::fid_domain,
    fabric: *const FabricFid,
    /// The address format of the info the domain was opened with (AV addresses use it).
    pub addr_format: AddrFormat,
    /// The core domain (`None` only while `fi_close` tries to release it).
    inner: Mutex<Option<Domain<Heap>>>,
}

static DOMAIN_FI_OPS: sys::fi_ops = fi_ops(close);

static DOMAIN_OPS: sys::fi_ops_domain = sys::fi_ops_domain {
    size: size_of::<sys::fi_ops_domain>(),
    av_open: Some(crate::av::open),
    cq_open: Some(crate::cq::open),
    endpoint: Some(endpoint),
    scalable_ep: Some(endpoint),
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

    /// Runs `f` on the core domain under the domain's lock.
    pub fn with<R>(
        &self,
        f: impl FnOnce(&mut Domain<Heap>) -> Result<R, Errno>,
    ) -> Result<R, Errno> {
        let mut g = self.inner.lock();
        f(g.as_mut().ok_or(Errno::EINVAL)?)
    }

    /// The fabric's API version (err_data rules of the readerr calls).
    pub fn api_version(&self) -> u32 {
        // SAFETY: the fabric outlives its domains (fi_close of a fabric with a domain
        // open is refused).
        unsafe { &*self.fabric }.api_version()
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
    let caps = Capabilities::new(Medium::Udp, iface.mtu.saturating_sub(IP_UDP_HEADER_LEN));
    let cfg = DomainConfig {
        net: NetConfig::new(&caps, iface.ip.octets(), port),
        arp_entries: 0,
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
    let obj = publish(DomainFid {
        c: sys::fid_domain {
            fid: DomainFid::header(context),
            ops: (&raw const DOMAIN_OPS).cast_mut(),
            mr: crate::mr::domain_mr_ops(),
        },
        fabric: std::ptr::from_ref(fab),
        addr_format: info.addr_format,
        inner: Mutex::new(Some(d)),
    });
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
        let mut g = d.inner.lock();
        let Some(core) = g.take() else {
            return neg(Errno::EINVAL);
        };
        // SAFETY: the fabric outlives its domains.
        let fab = unsafe { &*d.fabric };
        let mut f = fab.inner.lock();
        if let Err((core, e)) = core.close(&mut f) {
            *g = Some(core);
            return neg(e);
        }
    }
    // SAFETY: published by `open`; the core domain is closed and the application gives
    // the fid up.
    unsafe { release(d) };
    0
}

/// `fi_endpoint` / `fi_scalable_ep`: the data path comes with the next milestone.
unsafe extern "C" fn endpoint(
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
    _flags: u64,
    context: *mut c_void,
) -> c_int {
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

/// `fi_query_atomic`: atomics are not offered.
unsafe extern "C" fn query_atomic(
    _domain: *mut sys::fid_domain,
    _datatype: sys::fi_datatype,
    _op: sys::fi_op,
    _attr: *mut sys::fi_atomic_attr,
    _flags: u64,
) -> c_int {
    neg(Errno::ENOSYS)
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
