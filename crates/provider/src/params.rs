//! The provider's parameters, registered with libfabric (`fi_param_define`) so that
//! `fi_info -e` lists them and `FI_NOSTD_<NAME>` sets them.

use std::ffi::{CStr, c_char, c_void};

use crate::sys;

/// One parameter: name (as passed to `fi_param_define`), type, help text.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    /// Name without the `FI_NOSTD_` prefix.
    pub name: &'static CStr,
    /// `enum fi_param_type`.
    pub kind: sys::fi_param_type,
    /// Help text (shown after `nostd: ` by `fi_info -e`).
    pub help: &'static CStr,
}

/// Every parameter of the provider.
pub const PARAMS: &[Param] = &[
    Param {
        name: c"dataplane",
        kind: sys::fi_param_type_FI_PARAM_STRING,
        help: c"Data plane that moves frames: udp (kernel UDP sockets), tap, af_packet or dpdk (default: udp)",
    },
    Param {
        name: c"iface",
        kind: sys::fi_param_type_FI_PARAM_STRING,
        help: c"Only offer this interface (name or IPv4 address) as a domain; its MTU sizes the datagrams. Default: every IPv4 interface that is up, and for a peer on this host the loopback domain (the kernel carries local traffic through lo, 64 KiB datagrams)",
    },
    Param {
        name: c"eager_threshold",
        kind: sys::fi_param_type_FI_PARAM_SIZE_T,
        help: c"Messages up to this many bytes are sent eagerly, larger ones by rendezvous (default: 8192)",
    },
    Param {
        name: c"window",
        kind: sys::fi_param_type_FI_PARAM_SIZE_T,
        help: c"Packets outstanding per peer (sent and neither acknowledged nor selectively acknowledged nor deemed lost) before waiting for acknowledgements, at most 1024 (default: the engine's, 64)",
    },
    Param {
        name: c"rx_window",
        kind: sys::fi_param_type_FI_PARAM_SIZE_T,
        help: c"Sequence numbers a peer's packets may run ahead of the cumulative acknowledgement, both ways (the receive window; at least the window, at most 16384): larger than the window, a lost packet does not stop the sender while it is repaired. Packets held out of order also need reorder slots (default: the window)",
    },
    Param {
        name: c"queues",
        kind: sys::fi_param_type_FI_PARAM_SIZE_T,
        help: c"Receive queues per domain, at most 64 (udp: SO_REUSEPORT sockets on one port; af_packet: a fanout group; dpdk: queue pairs, which memif carries pair to pair; one on tap): context k of a scalable endpoint is steered to queue k % N, and reading its CQ passes over that queue alone (default: 1)",
    },
    Param {
        name: c"loss",
        kind: sys::fi_param_type_FI_PARAM_STRING,
        help: c"Fault injection for testing: fraction of frames dropped on receive, 0.0 to 1.0 (default: 0)",
    },
    Param {
        name: c"eal",
        kind: sys::fi_param_type_FI_PARAM_STRING,
        help: c"dpdk data plane: EAL arguments, split at whitespace (default: --no-huge --no-pci --no-shconf, a unique --file-prefix, -m 256)",
    },
    Param {
        name: c"dpdk_vdev",
        kind: sys::fi_param_type_FI_PARAM_STRING,
        help: c"dpdk data plane: device arguments of the port to hot-plug (default: net_af_packet on the domain's interface)",
    },
    Param {
        name: c"auth_key",
        kind: sys::fi_param_type_FI_PARAM_STRING,
        help: c"The domain's auth key when the application's hints give none (domain_attr->auth_key): 0x and hex digits, or any other string as its bytes. Only peers with the same key connect (others: -FI_EKEYREJECTED), and every packet carries a MAC under it (default: none)",
    },
];

/// The key `FI_NOSTD_AUTH_KEY` names, if set: `Err` with why when it is malformed.
pub fn auth_key() -> Option<Result<Vec<u8>, String>> {
    get_str(c"auth_key")
        .filter(|s| !s.is_empty())
        .map(|s| hosted::auth_key::parse(&s))
}

/// Registers [`PARAMS`] for `provider` (once per load, from `fi_prov_ini`).
///
/// # Safety
///
/// `provider` is the provider's static `struct fi_provider`, with a valid `name`.
pub unsafe fn define(provider: *const sys::fi_provider) {
    for p in PARAMS {
        // The help text goes through "%s": fi_param_define takes a printf format.
        // SAFETY: every pointer is a static NUL-terminated string or the static
        // provider; the variadic argument matches the "%s" conversion.
        unsafe {
            sys::fi_param_define(
                provider,
                p.name.as_ptr(),
                p.kind,
                c"%s".as_ptr(),
                p.help.as_ptr(),
            )
        };
    }
}

/// The value of string parameter `name` (`FI_NOSTD_<NAME>`), if set.
pub fn get_str(name: &CStr) -> Option<String> {
    let mut value: *mut c_char = std::ptr::null_mut();
    // SAFETY: the provider is the static one params were defined for; `value` is a
    // `char *` out-parameter as FI_PARAM_STRING requires.
    let r = unsafe {
        sys::fi_param_get(
            crate::prov::provider(),
            name.as_ptr(),
            (&raw mut value).cast::<c_void>(),
        )
    };
    if r != 0 || value.is_null() {
        return None;
    }
    // SAFETY: libfabric returned a NUL-terminated string (the environment's).
    let s = unsafe { CStr::from_ptr(value) };
    Some(s.to_string_lossy().into_owned())
}

/// The value of `size_t` parameter `name`, if set and valid.
pub fn get_size(name: &CStr) -> Option<usize> {
    let mut value: usize = 0;
    // SAFETY: as in `get_str`, with a `size_t` out-parameter for FI_PARAM_SIZE_T.
    let r = unsafe {
        sys::fi_param_get(
            crate::prov::provider(),
            name.as_ptr(),
            (&raw mut value).cast::<c_void>(),
        )
    };
    (r == 0).then_some(value)
}
