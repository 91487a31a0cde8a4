//! `struct fi_info` ⇄ the core's [`Info`].
//!
//! [`from_c`] reads every field the core knows from application memory (NULL
//! sub-structures stay unspecified); a value the core cannot hold (an unknown enum
//! value, a name longer than [`NAME_CAP`], an over-long address or key) has no match, so
//! `getinfo` answers -FI_ENODATA and `fi_domain` -FI_EINVAL. [`to_c`] builds the list
//! libfabric hands to the application: every structure `calloc`ed, every string and
//! address `malloc`ed, exactly what `fi_freeinfo` releases with `free(3)`.
//! `fabric_attr->prov_name` stays NULL: libfabric fills it in (it would append to a
//! non-NULL one, as for a utility provider).

use std::ffi::c_char;
use std::ptr;

use ofi_nostd::Errno;
use ofi_nostd::flags::{CompOrder, Flags, Mode, MrMode, Order};
use ofi_nostd::info::{
    AUTH_KEY_CAP, AddrFormat, AuthKey, AvType, DomainAttr, EpAttr, EpType, FabricAttr, Info,
    NAME_CAP, Name, Progress, Protocol, RAW_ADDR_CAP, RawAddr, ResourceMgmt, RxAttr, Threading,
    TrafficClass, TxAttr,
};

use crate::abi::{DomainAbi, DomainExt};
use crate::sys;
use crate::util::{bytes, calloc, calloc_sized, cstr, malloc_copy, malloc_str};

/// A name from C; `None` when it is not UTF-8 or longer than [`NAME_CAP`].
///
/// # Safety
///
/// `p` is NULL or a NUL-terminated string.
unsafe fn name(p: *const c_char) -> Option<Name> {
    // SAFETY: forwarded contract.
    let s = unsafe { cstr(p) }.ok()?.unwrap_or("");
    if s.len() > NAME_CAP {
        return None;
    }
    Some(ofi_nostd::info::name(s))
}

/// An address from C (`None` for NULL, `Some(None)` when too long to be ours).
///
/// # Safety
///
/// `p` is NULL or points to `len` readable bytes.
unsafe fn addr(p: *const std::ffi::c_void, len: usize) -> Option<Option<RawAddr>> {
    if p.is_null() {
        return Some(None);
    }
    if len > RAW_ADDR_CAP {
        return None;
    }
    // SAFETY: forwarded contract.
    let b = unsafe { bytes(p, len) }?;
    RawAddr::from_slice(b).ok().map(Some)
}

/// An authorization key from C; `None` when over [`AUTH_KEY_CAP`] or NULL with a size.
///
/// # Safety
///
/// `p` is NULL or points to `len` readable bytes.
unsafe fn key(p: *const u8, len: usize) -> Option<AuthKey> {
    if len > AUTH_KEY_CAP {
        return None;
    }
    // SAFETY: forwarded contract.
    let b = unsafe { bytes(p.cast(), len) }?;
    AuthKey::from_slice(b).ok()
}

pub(crate) fn tx_from_c(t: &sys::fi_tx_attr) -> TxAttr {
    TxAttr {
        caps: Flags::from_bits_retain(t.caps),
        mode: Mode::from_bits_retain(t.mode),
        op_flags: Flags::from_bits_retain(t.op_flags),
        msg_order: Order::from_bits_retain(t.msg_order),
        comp_order: CompOrder::from_bits_retain(t.comp_order),
        inject_size: t.inject_size,
        size: t.size,
        iov_limit: t.iov_limit,
        rma_iov_limit: t.rma_iov_limit,
        tclass: TrafficClass(t.tclass),
    }
}

pub(crate) fn rx_from_c(r: &sys::fi_rx_attr) -> RxAttr {
    RxAttr {
        caps: Flags::from_bits_retain(r.caps),
        mode: Mode::from_bits_retain(r.mode),
        op_flags: Flags::from_bits_retain(r.op_flags),
        msg_order: Order::from_bits_retain(r.msg_order),
        comp_order: CompOrder::from_bits_retain(r.comp_order),
        total_buffered_recv: r.total_buffered_recv,
        size: r.size,
        iov_limit: r.iov_limit,
    }
}

/// # Safety
///
/// `e.auth_key` is NULL or points to `e.auth_key_size` bytes.
unsafe fn ep_from_c(e: &sys::fi_ep_attr) -> Option<EpAttr> {
    Some(EpAttr {
        ep_type: EpType::from_raw(e.type_)?,
        protocol: Protocol(e.protocol),
        protocol_version: e.protocol_version,
        max_msg_size: e.max_msg_size,
        msg_prefix_size: e.msg_prefix_size,
        max_order_raw_size: e.max_order_raw_size,
        max_order_war_size: e.max_order_war_size,
        max_order_waw_size: e.max_order_waw_size,
        mem_tag_format: e.mem_tag_format,
        tx_ctx_cnt: e.tx_ctx_cnt,
        rx_ctx_cnt: e.rx_ctx_cnt,
        // SAFETY: forwarded contract.
        auth_key: unsafe { key(e.auth_key, e.auth_key_size) }?,
    })
}

/// # Safety
///
/// The pointers of `d` are NULL or valid (name NUL-terminated, key of its size).
unsafe fn domain_from_c(d: &sys::fi_domain_attr) -> Option<DomainAttr> {
    Some(DomainAttr {
        // SAFETY: forwarded contract.
        name: unsafe { name(d.name) }?,
        threading: Threading::from_raw(d.threading)?,
        control_progress: Progress::from_raw(d.control_progress)?,
        data_progress: Progress::from_raw(d.data_progress)?,
        resource_mgmt: ResourceMgmt::from_raw(d.resource_mgmt)?,
        av_type: AvType::from_raw(d.av_type)?,
        mr_mode: MrMode::from_bits_retain(d.mr_mode as u32),
        mr_key_size: d.mr_key_size,
        cq_data_size: d.cq_data_size,
        cq_cnt: d.cq_cnt,
        ep_cnt: d.ep_cnt,
        tx_ctx_cnt: d.tx_ctx_cnt,
        rx_ctx_cnt: d.rx_ctx_cnt,
        max_ep_tx_ctx: d.max_ep_tx_ctx,
        max_ep_rx_ctx: d.max_ep_rx_ctx,
        max_ep_stx_ctx: d.max_ep_stx_ctx,
        max_ep_srx_ctx: d.max_ep_srx_ctx,
        cntr_cnt: d.cntr_cnt,
        mr_iov_limit: d.mr_iov_limit,
        caps: Flags::from_bits_retain(d.caps),
        mode: Mode::from_bits_retain(d.mode),
        // SAFETY: forwarded contract.
        auth_key: unsafe { key(d.auth_key, d.auth_key_size) }?,
        max_err_data: d.max_err_data,
        mr_cnt: d.mr_cnt,
        tclass: TrafficClass(d.tclass),
    })
}

/// The fabric attributes of C `f`; `None` when a name cannot be ours.
///
/// # Safety
///
/// The names of `f` are NULL or NUL-terminated.
pub unsafe fn fabric_from_c(f: &sys::fi_fabric_attr) -> Option<FabricAttr> {
    Some(FabricAttr {
        // SAFETY: forwarded contract.
        name: unsafe { name(f.name) }?,
        // SAFETY: forwarded contract.
        prov_name: unsafe { name(f.prov_name) }?,
        prov_version: f.prov_version,
        api_version: f.api_version,
    })
}

/// The core's view of the C `fi_info` at `p` (hints, or the info of `fi_domain`).
/// `None` when a field holds a value the core cannot represent.
///
/// # Safety
///
/// `p` points to a valid `fi_info` whose non-NULL pointers are valid (addresses and keys
/// of their stated sizes, NUL-terminated names); `next` is not followed.
pub unsafe fn from_c(p: *const sys::fi_info) -> Option<Info> {
    // SAFETY: valid per the caller's contract.
    let c = unsafe { &*p };
    let mut info = Info {
        caps: Flags::from_bits_retain(c.caps),
        mode: Mode::from_bits_retain(c.mode),
        addr_format: AddrFormat(c.addr_format),
        // SAFETY: the address pointers are valid for their lengths (contract).
        src_addr: unsafe { addr(c.src_addr, c.src_addrlen) }?,
        // SAFETY: as above.
        dest_addr: unsafe { addr(c.dest_addr, c.dest_addrlen) }?,
        ..Info::default()
    };
    // SAFETY: non-NULL sub-structures are valid (contract), here and below.
    if let Some(t) = unsafe { c.tx_attr.as_ref() } {
        info.tx_attr = tx_from_c(t);
    }
    // SAFETY: see above.
    if let Some(r) = unsafe { c.rx_attr.as_ref() } {
        info.rx_attr = rx_from_c(r);
    }
    // SAFETY: see above.
    if let Some(e) = unsafe { c.ep_attr.as_ref() } {
        // SAFETY: its key pointer is valid (contract).
        info.ep_attr = unsafe { ep_from_c(e) }?;
    }
    // SAFETY: see above.
    if let Some(d) = unsafe { c.domain_attr.as_ref() } {
        // SAFETY: its name and key pointers are valid (contract).
        info.domain_attr = unsafe { domain_from_c(d) }?;
    }
    // SAFETY: see above.
    if let Some(f) = unsafe { c.fabric_attr.as_ref() } {
        // SAFETY: its names are valid (contract).
        info.fabric_attr = unsafe { fabric_from_c(f) }?;
    }
    Some(info)
}

/// The fields of `p`'s domain attributes that 1.17 lacks, read in layout `abi` (unspecified
/// when `p` has none).
///
/// # Safety
///
/// `p` points to a valid `fi_info` whose `domain_attr` is NULL or a structure of at least
/// `abi.size()` bytes.
pub unsafe fn domain_ext(p: *const sys::fi_info, abi: DomainAbi) -> DomainExt {
    // SAFETY: valid per the caller's contract.
    let d = unsafe { (*p).domain_attr };
    if d.is_null() {
        return DomainExt::UNSPEC;
    }
    // SAFETY: of `abi.size()` bytes (contract).
    unsafe { DomainExt::read(d, abi) }
}

/// One `fi_info` built from `info` with libc allocations, its domain attributes in
/// layout `abi`; on failure everything allocated so far is released and -FI_ENOMEM
/// returned.
fn one_to_c(info: &Info, abi: DomainAbi) -> Result<*mut sys::fi_info, Errno> {
    let p = calloc::<sys::fi_info>()?;
    // The structure is zeroed, so fi_freeinfo can release a partly built one.
    let fill = || -> Result<(), Errno> {
        // SAFETY: `p` is a fresh, zeroed fi_info owned by this function.
        let c = unsafe { &mut *p };
        c.caps = info.caps.bits();
        c.mode = info.mode.bits();
        c.addr_format = info.addr_format.0;
        if let Some(a) = &info.src_addr {
            c.src_addr = malloc_copy(a)?;
            c.src_addrlen = if c.src_addr.is_null() { 0 } else { a.len() };
        }
        if let Some(a) = &info.dest_addr {
            c.dest_addr = malloc_copy(a)?;
            c.dest_addrlen = if c.dest_addr.is_null() { 0 } else { a.len() };
        }
        c.tx_attr = calloc()?;
        c.rx_attr = calloc()?;
        c.ep_attr = calloc()?;
        c.domain_attr = calloc_sized(abi.size())?;
        c.fabric_attr = calloc()?;
        // SAFETY: the five attribute structures were just allocated, zeroed, and are
        // owned by `c`.
        let (tx, rx, ep, dom, fab) = unsafe {
            (
                &mut *c.tx_attr,
                &mut *c.rx_attr,
                &mut *c.ep_attr,
                &mut *c.domain_attr,
                &mut *c.fabric_attr,
            )
        };
        let t = &info.tx_attr;
        *tx = sys::fi_tx_attr {
            caps: t.caps.bits(),
            mode: t.mode.bits(),
            op_flags: t.op_flags.bits(),
            msg_order: t.msg_order.bits(),
            comp_order: t.comp_order.bits(),
            inject_size: t.inject_size,
            size: t.size,
            iov_limit: t.iov_limit,
            rma_iov_limit: t.rma_iov_limit,
            tclass: t.tclass.0,
        };
        let r = &info.rx_attr;
        *rx = sys::fi_rx_attr {
            caps: r.caps.bits(),
            mode: r.mode.bits(),
            op_flags: r.op_flags.bits(),
            msg_order: r.msg_order.bits(),
            comp_order: r.comp_order.bits(),
            total_buffered_recv: r.total_buffered_recv,
            size: r.size,
            iov_limit: r.iov_limit,
        };
        let e = &info.ep_attr;
        *ep = sys::fi_ep_attr {
            type_: e.ep_type.raw(),
            protocol: e.protocol.0,
            protocol_version: e.protocol_version,
            max_msg_size: e.max_msg_size,
            msg_prefix_size: e.msg_prefix_size,
            max_order_raw_size: e.max_order_raw_size,
            max_order_war_size: e.max_order_war_size,
            max_order_waw_size: e.max_order_waw_size,
            mem_tag_format: e.mem_tag_format,
            tx_ctx_cnt: e.tx_ctx_cnt,
            rx_ctx_cnt: e.rx_ctx_cnt,
            auth_key_size: 0,
            auth_key: ptr::null_mut(),
        };
        ep.auth_key = malloc_copy(&e.auth_key)?.cast();
        ep.auth_key_size = if ep.auth_key.is_null() {
            0
        } else {
            e.auth_key.len()
        };
        let d = &info.domain_attr;
        *dom = sys::fi_domain_attr {
            domain: ptr::null_mut(),
            name: ptr::null_mut(),
            threading: d.threading.raw(),
            control_progress: d.control_progress.raw(),
            data_progress: d.data_progress.raw(),
            resource_mgmt: d.resource_mgmt.raw(),
            av_type: d.av_type.raw(),
            mr_mode: d.mr_mode.bits() as i32,
            mr_key_size: d.mr_key_size,
            cq_data_size: d.cq_data_size,
            cq_cnt: d.cq_cnt,
            ep_cnt: d.ep_cnt,
            tx_ctx_cnt: d.tx_ctx_cnt,
            rx_ctx_cnt: d.rx_ctx_cnt,
            max_ep_tx_ctx: d.max_ep_tx_ctx,
            max_ep_rx_ctx: d.max_ep_rx_ctx,
            max_ep_stx_ctx: d.max_ep_stx_ctx,
            max_ep_srx_ctx: d.max_ep_srx_ctx,
            cntr_cnt: d.cntr_cnt,
            mr_iov_limit: d.mr_iov_limit,
            caps: d.caps.bits(),
            mode: d.mode.bits(),
            auth_key: ptr::null_mut(),
            auth_key_size: 0,
            max_err_data: d.max_err_data,
            mr_cnt: d.mr_cnt,
            tclass: d.tclass.0,
        };
        dom.name = malloc_str(&d.name)?;
        dom.auth_key = malloc_copy(&d.auth_key)?.cast();
        dom.auth_key_size = if dom.auth_key.is_null() {
            0
        } else {
            d.auth_key.len()
        };
        let f = &info.fabric_attr;
        fab.name = malloc_str(&f.name)?;
        fab.prov_version = f.prov_version;
        fab.api_version = f.api_version;
        // SAFETY: the domain attributes were allocated with `abi.size()` bytes; the
        // fields past 1.17's (which `dom` covers) are written through the allocation.
        unsafe { DomainExt::OFFER.write(c.domain_attr, abi) };
        Ok(())
    };
    match fill() {
        Ok(()) => Ok(p),
        Err(e) => {
            // SAFETY: `p` is a (partly) built list of one, every pointer in it NULL or
            // libc-allocated: what fi_freeinfo releases.
            unsafe { sys::fi_freeinfo(p) };
            Err(e)
        }
    }
}

/// The `fi_info` list of `infos`, in order (NULL for none), for a core whose domain
/// attributes have layout `abi`; on failure nothing is leaked and -FI_ENOMEM returned.
pub fn to_c(infos: &[Info], abi: DomainAbi) -> Result<*mut sys::fi_info, Errno> {
    let mut head: *mut sys::fi_info = ptr::null_mut();
    let mut tail: *mut sys::fi_info = ptr::null_mut();
    for info in infos {
        let node = match one_to_c(info, abi) {
            Ok(n) => n,
            Err(e) => {
                // SAFETY: `head` is NULL or a list built by `one_to_c`.
                unsafe { sys::fi_freeinfo(head) };
                return Err(e);
            }
        };
        if tail.is_null() {
            head = node;
        } else {
            // SAFETY: `tail` is the last node of the list built here.
            unsafe { (*tail).next = node };
        }
        tail = node;
    }
    Ok(head)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofi_nostd::info::{Interface, ProviderConfig, default_info};

    #[test]
    fn round_trip_every_field() {
        let iface = Interface {
            name: "eth9",
            ip: [10, 1, 2, 3],
            prefix_len: 24,
            mtu: 9000,
            loopback: false,
        };
        let mut info = default_info(EpType::Rdm, Some(&iface), &ProviderConfig::DEFAULT);
        info.dest_addr = Some(RawAddr::from_slice(&[2, 0, 1, 2, 10, 0, 0, 1]).unwrap());
        info.ep_attr.auth_key = AuthKey::from_slice(b"k1").unwrap();
        info.domain_attr.auth_key = AuthKey::from_slice(b"key2").unwrap();
        info.fabric_attr.prov_name = ofi_nostd::info::name("nostd");
        let list = to_c(&[info.clone(), info.clone()], DomainAbi::V1_0).unwrap();
        // SAFETY: `list` was just built by `to_c`, two valid nodes.
        unsafe {
            assert!(!(*list).next.is_null());
            assert!((*(*list).next).next.is_null());
            assert!(
                (*(*list).fabric_attr).prov_name.is_null(),
                "libfabric sets it"
            );
            let back = from_c(list).unwrap();
            let mut want = info.clone();
            want.fabric_attr.prov_name = Name::new();
            assert_eq!(back, want);
            sys::fi_freeinfo(list);
        }
    }

    #[test]
    fn domain_attributes_take_the_core_layout() {
        let info = Info::default();
        for abi in [
            DomainAbi::V1_0,
            DomainAbi::V1_20,
            DomainAbi::V2_0,
            DomainAbi::V2_5,
        ] {
            let list = to_c(std::slice::from_ref(&info), abi).unwrap();
            // SAFETY: `list` is one valid node whose domain attributes have `abi.size()`
            // bytes.
            unsafe {
                assert_eq!(from_c(list), Some(info.clone()));
                let ext = domain_ext(list, abi);
                match abi {
                    DomainAbi::V1_0 => assert_eq!(ext, DomainExt::UNSPEC),
                    DomainAbi::V1_20 => assert_eq!(ext.max_ep_auth_key, 1),
                    DomainAbi::V2_0 => assert_eq!(ext.max_cntr_value, 0),
                    DomainAbi::V2_5 => assert_eq!(ext, DomainExt::OFFER),
                }
                sys::fi_freeinfo(list);
            }
        }
    }

    #[test]
    fn unknown_values_have_no_match() {
        let list = to_c(&[Info::default()], DomainAbi::V1_0).unwrap();
        // SAFETY: `list` is one valid node built by `to_c`.
        unsafe {
            assert!(from_c(list).is_some());
            (*(*list).ep_attr).type_ = 77;
            assert!(from_c(list).is_none());
            (*(*list).ep_attr).type_ = 0;
            (*(*list).domain_attr).threading = 99;
            assert!(from_c(list).is_none());
            (*(*list).domain_attr).threading = 0;
            (*list).src_addrlen = RAW_ADDR_CAP + 1;
            (*list).src_addr = c"x".as_ptr().cast_mut().cast();
            assert!(from_c(list).is_none());
            (*list).src_addr = ptr::null_mut();
            (*list).src_addrlen = 0;
            sys::fi_freeinfo(list);
        }
    }
}
