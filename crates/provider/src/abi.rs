//! The ABI of the libfabric that loaded us, and the parts of it the 1.17 headers lack.
//!
//! The bindings ([`crate::sys`]) come from Debian 12's libfabric 1.17 headers. A newer
//! core (libfabric 2.x, as the MPI wheels bundle) reads and copies `struct fi_domain_attr`
//! with its own, larger size (`fi_dupinfo` copies `sizeof` bytes; the compat symbols
//! convert old applications' structures before a provider sees them), so the provider
//! must hand that core, and read from it, the core's layout. Of every structure a
//! provider exchanges with the core, only `fi_domain_attr` changed between 1.17 and 2.5
//! (`fi_info`, the tx/rx/ep/fabric attributes and `struct fi_provider` did not):
//!
//! | core API    | bytes | fields added at the end                     |
//! |-------------|-------|---------------------------------------------|
//! | up to 1.19  | 192   |                                             |
//! | 1.20 - 1.22 | 200   | `size_t max_ep_auth_key`                    |
//! | 2.0 - 2.4   | 208   | `uint32_t max_group_id`                     |
//! | 2.5 - 2.6   | 224   | `uint64_t max_cntr_value, max_err_cntr_value` |
//!
//! Structures only the application fills and the provider reads (`fi_mr_attr`,
//! `fi_cq_err_entry`, ops tables with their `size`) grew at their ends too; reading or
//! writing their 1.17 prefix stays correct (2.x's `fi_cq_readerr` presets the new
//! `src_addr` to FI_ADDR_NOTAVAIL for providers that leave it).

use std::mem::{offset_of, size_of};

use ofi_nostd::info::fi_version;

use crate::sys;

/// `struct fi_domain_attr` as libfabric 2.5 lays it out (fi_domain(3) of 2.5): the 1.17
/// structure (whose trailing padding ends where `max_ep_auth_key` starts) and the four
/// fields 1.20, 2.0 and 2.5 appended. Older cores' layouts are prefixes of it.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct DomainAttr25 {
    /// The fields 1.17 has, in its layout.
    pub base: sys::fi_domain_attr,
    /// Authorization keys one connectionless endpoint can hold (API 1.20).
    pub max_ep_auth_key: usize,
    /// The highest peer group id (API 2.0).
    pub max_group_id: u32,
    /// The highest value `fi_cntr_read` returns (API 2.5).
    pub max_cntr_value: u64,
    /// The highest value `fi_cntr_readerr` returns (API 2.5).
    pub max_err_cntr_value: u64,
}

const _: () = {
    assert!(size_of::<sys::fi_domain_attr>() == 192);
    assert!(offset_of!(DomainAttr25, max_ep_auth_key) == 192);
    assert!(offset_of!(DomainAttr25, max_group_id) == 200);
    assert!(offset_of!(DomainAttr25, max_cntr_value) == 208);
    assert!(offset_of!(DomainAttr25, max_err_cntr_value) == 216);
    assert!(size_of::<DomainAttr25>() == 224);
};

/// Which `fi_domain_attr` layout a core uses, from its `fi_version()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum DomainAbi {
    /// Up to API 1.19 (Debian 12's 1.17): 192 bytes.
    V1_0,
    /// API 1.20 to 1.22: `max_ep_auth_key`, 200 bytes.
    V1_20,
    /// API 2.0 to 2.4: `max_group_id`, 208 bytes.
    V2_0,
    /// API 2.5 on: the counter limits, 224 bytes.
    V2_5,
}

impl DomainAbi {
    /// The layout of the core whose `fi_version()` is `core_api`.
    pub const fn of_core(core_api: u32) -> Self {
        if core_api >= fi_version(2, 5) {
            Self::V2_5
        } else if core_api >= fi_version(2, 0) {
            Self::V2_0
        } else if core_api >= fi_version(1, 20) {
            Self::V1_20
        } else {
            Self::V1_0
        }
    }

    /// `sizeof(struct fi_domain_attr)` in this layout.
    pub const fn size(self) -> usize {
        match self {
            Self::V1_0 => size_of::<sys::fi_domain_attr>(),
            Self::V1_20 => offset_of!(DomainAttr25, max_group_id),
            Self::V2_0 => offset_of!(DomainAttr25, max_cntr_value),
            Self::V2_5 => size_of::<DomainAttr25>(),
        }
    }
}

/// The values of the fields 1.17 lacks: what the provider offers, or what hints ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DomainExt {
    /// `max_ep_auth_key`.
    pub max_ep_auth_key: usize,
    /// `max_group_id`.
    pub max_group_id: u32,
    /// `max_cntr_value`.
    pub max_cntr_value: u64,
    /// `max_err_cntr_value`.
    pub max_err_cntr_value: u64,
}

impl DomainExt {
    /// Nothing asked (what a zeroed structure, or an older layout, holds).
    pub const UNSPEC: Self = Self {
        max_ep_auth_key: 0,
        max_group_id: 0,
        max_cntr_value: 0,
        max_err_cntr_value: 0,
    };

    /// The provider's offer: an endpoint holds one key (`ep_attr->auth_key`, else the
    /// domain's); AV entries carry none, so no peer groups (only group 0); counters are
    /// full 64-bit values.
    pub const OFFER: Self = Self {
        max_ep_auth_key: 1,
        max_group_id: 0,
        max_cntr_value: u64::MAX,
        max_err_cntr_value: u64::MAX,
    };

    /// Reads the fields `abi` has from the domain attributes at `p` (the rest stay 0).
    ///
    /// # Safety
    ///
    /// `p` points to a readable `fi_domain_attr` of at least `abi.size()` bytes.
    pub unsafe fn read(p: *const sys::fi_domain_attr, abi: DomainAbi) -> Self {
        let d = p.cast::<DomainAttr25>();
        let mut e = Self::UNSPEC;
        // SAFETY: each field is read only when `abi` (and so the allocation, by the
        // caller's contract) covers it; `read_unaligned` needs no alignment.
        unsafe {
            if abi >= DomainAbi::V1_20 {
                e.max_ep_auth_key = (&raw const (*d).max_ep_auth_key).read_unaligned();
            }
            if abi >= DomainAbi::V2_0 {
                e.max_group_id = (&raw const (*d).max_group_id).read_unaligned();
            }
            if abi >= DomainAbi::V2_5 {
                e.max_cntr_value = (&raw const (*d).max_cntr_value).read_unaligned();
                e.max_err_cntr_value = (&raw const (*d).max_err_cntr_value).read_unaligned();
            }
        }
        e
    }

    /// Writes the fields `abi` has into the domain attributes at `p`.
    ///
    /// # Safety
    ///
    /// `p` points to a writable `fi_domain_attr` of at least `abi.size()` bytes.
    pub unsafe fn write(self, p: *mut sys::fi_domain_attr, abi: DomainAbi) {
        let d = p.cast::<DomainAttr25>();
        // SAFETY: as in `read`, every field written lies within `abi.size()` bytes.
        unsafe {
            if abi >= DomainAbi::V1_20 {
                (&raw mut (*d).max_ep_auth_key).write_unaligned(self.max_ep_auth_key);
            }
            if abi >= DomainAbi::V2_0 {
                (&raw mut (*d).max_group_id).write_unaligned(self.max_group_id);
            }
            if abi >= DomainAbi::V2_5 {
                (&raw mut (*d).max_cntr_value).write_unaligned(self.max_cntr_value);
                (&raw mut (*d).max_err_cntr_value).write_unaligned(self.max_err_cntr_value);
            }
        }
    }

    /// Whether the provider's offer meets hints asking `self` under API `version`, by
    /// fi_domain(3) of 2.5: more keys per endpoint than offered (API 1.20 on) or a peer
    /// group id above 0 (2.0 on) match nothing; any counter range fits (ours is the
    /// full 64 bits). Fields of an API newer than `version` are not the application's
    /// and are ignored.
    pub fn fits(self, version: u32) -> bool {
        let o = Self::OFFER;
        !(version >= fi_version(1, 20) && self.max_ep_auth_key > o.max_ep_auth_key
            || version >= fi_version(2, 0) && self.max_group_id > o.max_group_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_follows_the_core_version() {
        assert_eq!(DomainAbi::of_core(fi_version(1, 17)).size(), 192);
        assert_eq!(DomainAbi::of_core(fi_version(1, 19)).size(), 192);
        assert_eq!(DomainAbi::of_core(fi_version(1, 20)).size(), 200);
        assert_eq!(DomainAbi::of_core(fi_version(1, 22)).size(), 200);
        assert_eq!(DomainAbi::of_core(fi_version(2, 0)).size(), 208);
        assert_eq!(DomainAbi::of_core(fi_version(2, 4)).size(), 208);
        assert_eq!(DomainAbi::of_core(fi_version(2, 5)).size(), 224);
    }

    #[test]
    fn only_the_fields_of_the_layout_are_touched() {
        let mut d = DomainAttr25 {
            max_ep_auth_key: 7,
            max_group_id: 7,
            max_cntr_value: 7,
            max_err_cntr_value: 7,
            ..Default::default()
        };
        let p = (&raw mut d).cast::<sys::fi_domain_attr>();
        // SAFETY: `d` is a whole 2.5 structure, larger than every layout.
        unsafe {
            DomainExt::OFFER.write(p, DomainAbi::V2_0);
            assert_eq!((d.max_ep_auth_key, d.max_group_id), (1, 0));
            assert_eq!((d.max_cntr_value, d.max_err_cntr_value), (7, 7));
            let back = DomainExt::read(p, DomainAbi::V1_20);
            assert_eq!(back.max_ep_auth_key, 1);
            assert_eq!(back.max_cntr_value, 0, "1.20 has no counter limit");
            DomainExt::OFFER.write(p, DomainAbi::V2_5);
            assert_eq!(DomainExt::read(p, DomainAbi::V2_5), DomainExt::OFFER);
            d.max_ep_auth_key = 9;
            DomainExt::OFFER.write(p, DomainAbi::V1_0);
            assert_eq!(d.max_ep_auth_key, 9, "1.17 has no such field");
        }
    }

    #[test]
    fn hints_beyond_the_offer_do_not_fit() {
        let v25 = fi_version(2, 5);
        assert!(DomainExt::UNSPEC.fits(v25));
        assert!(DomainExt::OFFER.fits(v25));
        let keys = DomainExt {
            max_ep_auth_key: 2,
            ..DomainExt::UNSPEC
        };
        assert!(!keys.fits(fi_version(1, 20)));
        assert!(keys.fits(fi_version(1, 17)), "not a 1.17 field");
        let groups = DomainExt {
            max_group_id: 1,
            ..DomainExt::UNSPEC
        };
        assert!(!groups.fits(fi_version(2, 0)));
        assert!(groups.fits(fi_version(1, 22)));
    }
}
