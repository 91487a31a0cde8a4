//! `fi_getinfo` for the `nostd` provider: what it offers and how hints select from it.
//!
//! The core cannot enumerate interfaces or ask DNS (it is `no_std` and never does I/O),
//! so the caller describes the host in a [`Provider`]: the interfaces to offer (the hosted
//! adapter fills them from the OS, firmware from its NIC), a [`Resolver`] for host names
//! (the hosted adapter wraps `getaddrinfo`; firmware passes [`NoResolver`]) and the
//! [`ProviderConfig`] limits, which are the capacities of the pools the caller will give
//! the objects.
//!
//! # Node and service
//!
//! * `node` is a dotted-quad IPv4 address, a host name (handed to the [`Resolver`]
//!   unless FI_NUMERICHOST is set) or an FI_ADDR_STR string. Accepted string forms are
//!   `fi_addr_nostd://A.B.C.D:PORT[/EP_ID]` (our native address, endpoint id included),
//!   `fi_sockaddr_in://A.B.C.D:PORT` and `fi_sockaddr://A.B.C.D:PORT` (endpoint id 0).
//!   With a string `node`, `service` must be `None` (-FI_EINVAL). A recognised scheme
//!   with a malformed body is -FI_EINVAL; another scheme (e.g. `fi_sockaddr_in6://`) names
//!   a format this provider does not speak: -FI_ENODATA.
//! * `service` is a decimal UDP port. Service names are not resolved: -FI_ENODATA, as
//!   `getaddrinfo` failing is in libfabric.
//! * A name that is neither numeric nor resolvable is -FI_ENODATA.
//! * Without FI_SOURCE, node/service name the destination (`dest_addr`); a service with
//!   no node names a port on 127.0.0.1, like `getaddrinfo(NULL, service)`. With
//!   FI_SOURCE they name the local address: the node must be one of the interfaces (or
//!   0.0.0.0), the service becomes the source port.
//!
//! # Output
//!
//! Entries go into the caller's slice, best first: every RDM entry, then every DGRAM
//! entry, then every MSG entry (when the adapter serves them); within a type,
//! interfaces on the destination's subnet first, then the caller's order. The return
//! value is the number written. When more entries match than the slice holds, the slice
//! is filled with the best ones and the call returns -FI_ETOOSMALL; a slice of
//! [`MAX_ENTRIES_PER_INTERFACE`] × interfaces never truncates.

use super::{
    API_VERSION, AddrFormat, AvType, DomainAttr, EpAttr, EpType, FABRIC_NAME, FI_SHARED_CONTEXT,
    FabricAttr, Info, MAX_API_VERSION, PROV_NAME, PROV_VERSION, Progress, Protocol, RawAddr,
    ResourceMgmt, RxAttr, Threading, TrafficClass, TxAttr, fi_version, name,
};
use crate::addr::EpAddr;
use crate::errno::{Errno, Result};
use crate::flags::{CompOrder, Flags, Mode, MrMode, Order};
use core::fmt::Write;

/// Entries one interface can produce (one RDM, one DGRAM, and one MSG in a build with
/// `msg-ep`).
pub const MAX_ENTRIES_PER_INTERFACE: usize = if crate::served::MsgEp::SERVED.is_some() {
    3
} else {
    2
};

/// The secondary capabilities granted without being asked: they cost nothing on this
/// provider. FI_SOURCE is left out (it costs an address-vector reverse lookup per
/// receive), and FI_LOCAL_COMM / FI_REMOTE_COMM are only volunteered when the application
/// asked for neither (asking for one must not expose it to the other).
pub const FREE_SECONDARY_CAPS: Flags = Flags::MULTI_RECV;

/// IPv4 (20) + UDP (8) header bytes in every datagram.
const IP_UDP_HEADER_LEN: usize = 28;

/// `AF_INET6`, as Linux numbers it (only used to tell IPv6 sockaddrs from garbage).
const AF_INET6: u16 = 10;

/// A network interface the provider may offer as a domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interface<'a> {
    /// Interface or data-plane name; becomes `domain_attr->name`.
    pub name: &'a str,
    /// IPv4 address.
    pub ip: [u8; 4],
    /// Subnet prefix length (0: unknown), used to put the interface that reaches a
    /// destination first.
    pub prefix_len: u8,
    /// Link MTU in bytes (the IP packet size).
    pub mtu: usize,
    /// A loopback interface: it reaches only this host (FI_LOCAL_COMM, no
    /// FI_REMOTE_COMM).
    pub loopback: bool,
}

impl Interface<'_> {
    fn contains(&self, ip: [u8; 4]) -> bool {
        if self.prefix_len == 0 || self.prefix_len > 32 {
            return false;
        }
        let mask = u32::MAX << (32 - u32::from(self.prefix_len));
        u32::from_be_bytes(self.ip) & mask == u32::from_be_bytes(ip) & mask
    }
}

/// Resolves host names to IPv4 addresses for `getinfo`, done by the caller because the
/// core cannot do I/O.
pub trait Resolver {
    /// The IPv4 address of `host`, or `None` if it cannot be resolved.
    fn resolve(&self, host: &str) -> Option<[u8; 4]>;
}

/// A [`Resolver`] that resolves nothing: only numeric nodes work (firmware).
#[derive(Debug, Clone, Copy, Default)]
pub struct NoResolver;

impl Resolver for NoResolver {
    fn resolve(&self, _host: &str) -> Option<[u8; 4]> {
        None
    }
}

/// The limits and policies the provider advertises. The counts are the capacities of the
/// pools the caller will hand to the objects; the domain must be built with at least
/// these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProviderConfig {
    /// Bytes of our protocol header in every datagram (on top of IPv4 + UDP); DGRAM
    /// `max_msg_size` is the MTU minus both.
    pub wire_header_len: usize,
    /// Messages up to this size are sent eagerly, larger ones by rendezvous (engine
    /// setting; not an fi_info field).
    pub eager_threshold: usize,
    /// RDM `max_msg_size`.
    pub max_msg_size: usize,
    /// `inject_size` (DGRAM: at most its `max_msg_size`); the size of the engine's
    /// inject bounce buffers.
    pub inject_size: usize,
    /// Transmit queue depth per endpoint.
    pub tx_size: usize,
    /// Receive queue depth per endpoint.
    pub rx_size: usize,
    /// iov entries per operation.
    pub iov_limit: usize,
    /// Endpoints per domain.
    pub ep_cnt: usize,
    /// Completion queues per domain.
    pub cq_cnt: usize,
    /// Counters per domain.
    pub cntr_cnt: usize,
    /// Memory regions per domain.
    pub mr_cnt: usize,
    /// iov entries per memory registration.
    pub mr_iov_limit: usize,
    /// Bytes of remote memory keys.
    pub mr_key_size: usize,
    /// Bytes of remote CQ data.
    pub cq_data_size: usize,
    /// Bytes of provider error data in CQ/EQ error entries.
    pub max_err_data: usize,
    /// The most parallel threading model the adapter provides (the C and hosted
    /// adapters lock: FI_THREAD_SAFE; a single-core firmware loop: FI_THREAD_DOMAIN).
    pub threading: Threading,
    /// The adapter can run manual progress (the core always can).
    pub progress_manual: bool,
    /// The adapter can run automatic progress (a progress thread in `hosted`).
    pub progress_auto: bool,
    /// Progress model returned when the hints leave it unspecified.
    pub default_progress: Progress,
    /// Mode bits the provider cannot work without (default: none).
    pub required_mode: Mode,
    /// Mode bits the provider keeps when the application offers them (e.g. FI_CONTEXT
    /// if the C layer wants to keep request state in the application's `fi_context`);
    /// permissions, never requirements.
    pub optional_mode: Mode,
    /// Memory-registration restrictions of the data path (default: none, since every
    /// copy goes through [`crate::mem::Memory`]); RMA-target bits only bind when RMA or
    /// atomics are requested.
    pub mr_mode: MrMode,
    /// Largest authorization key accepted on RDM endpoints (0: keys are not supported).
    /// The RDM handshake proves the key with HMAC-SHA-256; DGRAM endpoints have no
    /// handshake, so getinfo never offers them a key.
    pub max_auth_key_size: usize,
    /// Endpoints on one non-loopback domain can talk to each other (FI_LOCAL_COMM).
    pub local_comm: bool,
    /// Completions of an RDM endpoint are reported in submission order per peer
    /// (FI_ORDER_STRICT comp_order may be granted).
    pub comp_order_strict: bool,
    /// The adapter serves FI_EP_MSG: passive endpoints, fi_connect / fi_accept and
    /// their EQ events (the core serves them in a build with the `msg-ep` feature).
    /// getinfo offers FI_EP_MSG entries, after the RDM and DGRAM ones, only then.
    pub msg_ep: bool,
}

/// The message ordering of RDM endpoints. Every operation to a peer (send, tagged send,
/// RMA read and write, atomic) is linked in posting order and its first packet leaves
/// in that order, in one sequenced stream the target processes in order. But an RMA
/// read's data is taken from the target's memory as it is sent (and again if resent),
/// so a later write can show in it: `max_order_war_size` (which covers RMA reads too)
/// is 0, and FI_ORDER_WAR / FI_ORDER_RMA_WAR are left out, as applications (fabtests'
/// getinfo test) read them as a promise about data. An atomic fetch is different: the
/// target executes each atomic once, in sequence order, and keeps the values it fetched
/// with its answer (resends carry them), so FI_ORDER_ATOMIC_WAR holds (the rdm test
/// `atomics_execute_in_posting_order_and_fetch_what_they_saw`); every other
/// `FI_ORDER_*` bit but FI_ORDER_DATA holds.
pub const RDM_MSG_ORDER: Order = Order::RAR
    .union(Order::RAW)
    .union(Order::RAS)
    .union(Order::WAW)
    .union(Order::WAS)
    .union(Order::SAR)
    .union(Order::SAW)
    .union(Order::SAS)
    .union(Order::RMA_RAR)
    .union(Order::RMA_RAW)
    .union(Order::RMA_WAW)
    .union(Order::ATOMIC_RAR)
    .union(Order::ATOMIC_RAW)
    .union(Order::ATOMIC_WAR)
    .union(Order::ATOMIC_WAW);

impl ProviderConfig {
    /// The defaults: sized for a hosted process.
    pub const DEFAULT: ProviderConfig = ProviderConfig {
        wire_header_len: 32,
        eager_threshold: 8192,
        max_msg_size: u32::MAX as usize,
        inject_size: 1024,
        // An MPI rank may keep thousands of sends waiting for their receives (Open MPI
        // retries a refused send inside MPI_Isend, so a full queue can stall every rank).
        tx_size: 8192,
        rx_size: 1024,
        iov_limit: 4,
        ep_cnt: 128,
        cq_cnt: 128,
        cntr_cnt: 128,
        mr_cnt: 1024,
        mr_iov_limit: crate::iov::MR_IOV_LIMIT,
        mr_key_size: 8,
        cq_data_size: 8,
        max_err_data: 0,
        threading: Threading::Safe,
        progress_manual: true,
        progress_auto: false,
        default_progress: Progress::Manual,
        required_mode: Mode::empty(),
        optional_mode: Mode::empty(),
        mr_mode: MrMode::empty(),
        max_auth_key_size: crate::info::AUTH_KEY_CAP,
        local_comm: true,
        comp_order_strict: false,
        msg_ep: false,
    };

    fn progress_supported(&self, p: Progress) -> bool {
        match p {
            Progress::Unspec => true,
            Progress::Manual => self.progress_manual,
            Progress::Auto => self.progress_auto,
            // Manual progress whose control calls the application serializes too.
            Progress::ControlUnified => self.progress_manual,
        }
    }
}

impl Default for ProviderConfig {
    fn default() -> Self {
        ProviderConfig::DEFAULT
    }
}

/// What the provider is given about its host.
#[derive(Clone, Copy)]
pub struct Provider<'a> {
    /// Limits and policies.
    pub cfg: ProviderConfig,
    /// Interfaces to offer, in order of preference.
    pub interfaces: &'a [Interface<'a>],
    /// Host-name resolution.
    pub resolver: &'a dyn Resolver,
}

/// Flags `fi_getinfo` accepts.
const GETINFO_FLAGS: Flags = Flags::SOURCE
    .union(Flags::NUMERICHOST)
    .union(Flags::PROV_ATTR_ONLY);

/// Capabilities of each endpoint type (before the interface decides LOCAL/REMOTE_COMM).
/// RDM endpoints do RMA (reads and writes, one remote iov each) and atomics
/// (`crate::atomic`), with FI_RMA_EVENT (remote-access counters on the endpoint and on
/// regions). Not advertised: FI_RMA_PMEM;
/// FI_MULTICAST, FI_COLLECTIVE, FI_HMEM,
/// FI_XPU, FI_TRIGGER, FI_FENCE, FI_VARIABLE_MSG, FI_SOURCE_ERR, FI_SHARED_AV,
/// FI_AV_USER_ID; TAGGED and DIRECTED_RECV on DGRAM. A build without the `rma` or
/// `atomic` feature offers neither that capability nor, without both, the modifiers.
const RDM_CAPS: Flags = Flags::MSG
    .union(Flags::TAGGED)
    .union(RDM_RMA_CAPS)
    .union(Flags::SEND)
    .union(Flags::RECV)
    .union(Flags::DIRECTED_RECV)
    .union(Flags::MULTI_RECV)
    .union(Flags::SOURCE)
    .union(Flags::NAMED_RX_CTX);
/// What RDM endpoints of this build serve of RMA and atomics.
const RDM_RMA_CAPS: Flags = if cfg!(feature = "rma") {
    Flags::RMA
        .union(if cfg!(feature = "atomic") {
            Flags::ATOMIC
        } else {
            Flags::empty()
        })
        .union(Flags::READ)
        .union(Flags::WRITE)
        .union(Flags::REMOTE_READ)
        .union(Flags::REMOTE_WRITE)
        .union(Flags::RMA_EVENT)
} else {
    Flags::empty()
};
/// What a connected endpoint offers: RDM's, without what needs several peers (a
/// message's source, receives from one source).
const MSG_CAPS: Flags = RDM_CAPS.difference(Flags::DIRECTED_RECV.union(Flags::SOURCE));
const DGRAM_CAPS: Flags = Flags::MSG
    .union(Flags::SEND)
    .union(Flags::RECV)
    .union(Flags::MULTI_RECV)
    .union(Flags::SOURCE)
    .union(Flags::NAMED_RX_CTX);
const COMM_CAPS: Flags = Flags::LOCAL_COMM.union(Flags::REMOTE_COMM);
/// What RDM endpoints add from API 2.0, whose bits 1.x gave other meanings: directed
/// receive for tagged receives alone, and directed receives that never name
/// FI_ADDR_UNSPEC. Not FI_TAGGED_MULTI_RECV (multi-receive buffers take messages only).
const RDM_CAPS_2_0: Flags = Flags::TAGGED_DIRECTED_RECV.union(Flags::EXACT_DIRECTED_RECV);

/// Capabilities that narrow what an endpoint accepts (FI_EXACT_DIRECTED_RECV refuses
/// FI_ADDR_UNSPEC): offered, but granted only to an application that names them, never
/// as part of "everything" to one that asks for no capabilities. (1.x's bit 48,
/// FI_VARIABLE_MSG, is not offered.)
const NARROWING_CAPS: Flags = Flags::EXACT_DIRECTED_RECV;

/// Default transmit flags each type can honour.
const RDM_TX_OP_FLAGS: Flags = Flags::INJECT
    .union(Flags::COMPLETION)
    .union(Flags::INJECT_COMPLETE)
    .union(Flags::TRANSMIT_COMPLETE)
    .union(Flags::DELIVERY_COMPLETE)
    .union(Flags::MORE);
const DGRAM_TX_OP_FLAGS: Flags = Flags::INJECT
    .union(Flags::COMPLETION)
    .union(Flags::INJECT_COMPLETE)
    .union(Flags::TRANSMIT_COMPLETE)
    .union(Flags::MORE);
const RX_OP_FLAGS: Flags = Flags::COMPLETION.union(Flags::MULTI_RECV);

/// The default tag format: 64 one-bit fields, i.e. any mask (libfabric's
/// FI_TAG_GENERIC, what rxm/rxd report).
const TAG_GENERIC: u64 = 0xAAAA_AAAA_AAAA_AAAA;

/// mr_mode bits that only matter to RMA/atomic targets.
const MR_RMA_TARGET: MrMode = MrMode::VIRT_ADDR
    .union(MrMode::PROV_KEY)
    .union(MrMode::RAW)
    .union(MrMode::RMA_EVENT);
/// What FI_MR_BASIC stands for.
const MR_BASIC_SET: MrMode = MrMode::VIRT_ADDR
    .union(MrMode::ALLOCATED)
    .union(MrMode::PROV_KEY)
    .union(MrMode::LOCAL);

/// The provider's full, unfiltered offer for one endpoint type on one interface (`None`
/// for an interface-less template, as FI_PROV_ATTR_ONLY returns).
pub fn default_info(ep_type: EpType, iface: Option<&Interface<'_>>, cfg: &ProviderConfig) -> Info {
    let rdm = ep_type != EpType::Dgram;
    let mut comm = Flags::empty();
    match iface {
        Some(i) if i.loopback => comm |= Flags::LOCAL_COMM,
        Some(_) => {
            comm |= Flags::REMOTE_COMM;
            if cfg.local_comm {
                comm |= Flags::LOCAL_COMM;
            }
        }
        None => {
            comm = COMM_CAPS;
        }
    }
    let caps = match ep_type {
        EpType::Dgram => DGRAM_CAPS,
        EpType::Msg => MSG_CAPS,
        _ => RDM_CAPS,
    } | comm;
    // An IPv4 datagram is at most 65535 bytes whatever the MTU (loopback's is 65536).
    let mtu = iface.map_or(1500, |i| i.mtu).min(65535);
    let dgram_max = mtu.saturating_sub(IP_UDP_HEADER_LEN + cfg.wire_header_len);
    let max_msg_size = if rdm { cfg.max_msg_size } else { dgram_max };
    let mode = cfg.required_mode | cfg.optional_mode;
    let mut info = Info {
        caps,
        mode,
        addr_format: AddrFormat::SOCKADDR_IN,
        src_addr: None,
        dest_addr: None,
        tx_attr: TxAttr {
            caps: caps & Flags::TX_CAPS,
            mode,
            op_flags: Flags::empty(),
            msg_order: if rdm { RDM_MSG_ORDER } else { Order::NONE },
            comp_order: CompOrder::NONE,
            inject_size: cfg.inject_size.min(max_msg_size),
            size: cfg.tx_size,
            iov_limit: cfg.iov_limit,
            rma_iov_limit: usize::from(rdm),
            tclass: TrafficClass::UNSPEC,
        },
        rx_attr: RxAttr {
            caps: caps & Flags::RX_CAPS,
            mode,
            op_flags: Flags::empty(),
            msg_order: if rdm { RDM_MSG_ORDER } else { Order::NONE },
            comp_order: CompOrder::NONE,
            total_buffered_recv: 0,
            size: cfg.rx_size,
            iov_limit: cfg.iov_limit,
        },
        ep_attr: EpAttr {
            ep_type: match ep_type {
                EpType::Dgram | EpType::Msg => ep_type,
                _ => EpType::Rdm,
            },
            protocol: match ep_type {
                EpType::Dgram => Protocol::NOSTD_DGRAM,
                EpType::Msg => Protocol::NOSTD_MSG,
                _ => Protocol::NOSTD_RDM,
            },
            protocol_version: 1,
            max_msg_size,
            msg_prefix_size: 0,
            // An RDM target processes writes and read requests in send order, so a
            // read sees every earlier write and writes land in order (RAW, WAW). A
            // read's data leaves after the target processed it, so a later write may
            // be visible in it (no WAR).
            max_order_raw_size: if rdm { max_msg_size } else { 0 },
            max_order_war_size: 0,
            max_order_waw_size: if rdm { max_msg_size } else { 0 },
            mem_tag_format: if rdm { TAG_GENERIC } else { 0 },
            tx_ctx_cnt: 1,
            rx_ctx_cnt: 1,
            auth_key: Default::default(),
        },
        domain_attr: DomainAttr {
            name: iface.map(|i| name(i.name)).unwrap_or_default(),
            threading: cfg.threading,
            control_progress: cfg.default_progress,
            data_progress: cfg.default_progress,
            resource_mgmt: ResourceMgmt::Enabled,
            av_type: AvType::Unspec,
            mr_mode: effective_mr_mode(cfg.mr_mode, caps),
            mr_key_size: cfg.mr_key_size,
            cq_data_size: cfg.cq_data_size,
            cq_cnt: cfg.cq_cnt,
            ep_cnt: cfg.ep_cnt,
            tx_ctx_cnt: cfg.ep_cnt,
            rx_ctx_cnt: cfg.ep_cnt,
            // Scalable endpoints (`crate::sep`): contexts per endpoint.
            max_ep_tx_ctx: crate::sep::MAX_CTX,
            max_ep_rx_ctx: crate::sep::MAX_CTX,
            // Shared contexts (fi_stx_context, fi_srx_context): endpoints per context.
            max_ep_stx_ctx: SHARED_EPS,
            max_ep_srx_ctx: SHARED_EPS,
            cntr_cnt: cfg.cntr_cnt,
            mr_iov_limit: cfg.mr_iov_limit,
            caps: comm,
            mode: Mode::empty(),
            auth_key: Default::default(),
            max_err_data: cfg.max_err_data,
            mr_cnt: cfg.mr_cnt,
            tclass: TrafficClass::UNSPEC,
        },
        fabric_attr: FabricAttr {
            name: name(FABRIC_NAME),
            prov_name: name(PROV_NAME),
            prov_version: PROV_VERSION,
            api_version: API_VERSION,
        },
    };
    if let Some(i) = iface {
        info.src_addr = Some(encode_addr(
            AddrFormat::SOCKADDR_IN,
            &EpAddr::new(i.ip, 0, 0),
        ));
    }
    info
}

/// Endpoints one shared context serves (`max_ep_stx_ctx` / `max_ep_srx_ctx`): none
/// without `shared-ctx`.
#[cfg(feature = "shared-ctx")]
const SHARED_EPS: usize = super::MAX_SHARED_EPS;
#[cfg(not(feature = "shared-ctx"))]
const SHARED_EPS: usize = 0;

/// The mr_mode bits that bind for these capabilities (RMA-target bits only with RMA or
/// atomics, FI_MR_HMEM only with FI_HMEM; the legacy values never).
fn effective_mr_mode(mr_mode: MrMode, caps: Flags) -> MrMode {
    let mut m = mr_mode.difference(MrMode::BASIC | MrMode::SCALABLE);
    if !caps.intersects(Flags::RMA | Flags::ATOMIC) {
        m = m.difference(MR_RMA_TARGET);
    }
    if !caps.contains(Flags::HMEM) {
        m = m.difference(MrMode::HMEM);
    }
    m
}

/// `fi_getinfo` for this provider.
///
/// `version` is `FI_VERSION(major, minor)`; `flags` takes FI_SOURCE, FI_NUMERICHOST and
/// FI_PROV_ATTR_ONLY. Matching entries are written to `out` best first and their count
/// returned. Errors: -FI_ENOSYS for a version newer than
/// [`MAX_API_VERSION`] (2.5), -FI_EBADFLAGS for other
/// flags, -FI_EINVAL for bad arguments (FI_SOURCE without node or service, a string node
/// with a service, a malformed address string, a zero-length hint address),
/// -FI_ENODATA when nothing matches, -FI_ETOOSMALL when `out` was too short (it then
/// holds the best entries).
pub fn getinfo(
    version: u32,
    node: Option<&str>,
    service: Option<&str>,
    flags: Flags,
    hints: Option<&Info>,
    prov: &Provider<'_>,
    out: &mut [Info],
) -> Result<usize> {
    if version > MAX_API_VERSION {
        return Err(Errno::ENOSYS);
    }
    if !GETINFO_FLAGS.contains(flags) {
        return Err(Errno::EBADFLAGS);
    }
    let cfg = &prov.cfg;
    if flags.contains(Flags::PROV_ATTR_ONLY) {
        if hints.is_some_and(|h| !prov_name_matches(&h.fabric_attr.prov_name)) {
            return Err(Errno::ENODATA);
        }
        let slot = out.first_mut().ok_or(Errno::ETOOSMALL)?;
        let mut info = default_info(EpType::Rdm, None, cfg);
        info.fabric_attr.api_version = version;
        *slot = info;
        return Ok(1);
    }
    let source = flags.contains(Flags::SOURCE);
    if source && node.is_none() && service.is_none() {
        return Err(Errno::EINVAL);
    }
    // "This value must be > 0 if src_addr is non-NULL."
    if hints.is_some_and(|h| {
        h.src_addr.as_ref().is_some_and(|a| a.is_empty())
            || h.dest_addr.as_ref().is_some_and(|a| a.is_empty())
    }) {
        return Err(Errno::EINVAL);
    }

    // Where node/service point.
    let node_addr = match node {
        None => None,
        Some(n) if n.contains("://") => {
            if service.is_some() {
                return Err(Errno::EINVAL);
            }
            Some(parse_addr_str(n)?)
        }
        Some(n) => {
            let ip = match parse_ipv4(n) {
                Some(ip) => ip,
                None if flags.contains(Flags::NUMERICHOST) => return Err(Errno::ENODATA),
                None => prov.resolver.resolve(n).ok_or(Errno::ENODATA)?,
            };
            Some(EpAddr::new(ip, 0, 0))
        }
    };
    let port = match service {
        None => None,
        Some(s) => Some(parse_port(s).ok_or(Errno::ENODATA)?),
    };
    let named = match (node_addr, port) {
        (None, None) => None,
        (Some(a), None) => Some(a),
        (Some(a), Some(p)) => Some(EpAddr { port: p, ..a }),
        (None, Some(p)) if source => Some(EpAddr::new([0; 4], p, 0)),
        (None, Some(p)) => Some(EpAddr::new([127, 0, 0, 1], p, 0)),
    };

    let hint_format = hints.map_or(AddrFormat::UNSPEC, |h| h.addr_format);
    let hint_addr = |a: &Option<RawAddr>| -> Result<Option<EpAddr>> {
        match a {
            None => Ok(None),
            Some(raw) => decode_addr(hint_format, raw).map(Some),
        }
    };
    let (src, dest) = if source {
        let dest = match hints {
            Some(h) => hint_addr(&h.dest_addr)?,
            None => None,
        };
        (named, dest)
    } else {
        let src = match hints {
            Some(h) => hint_addr(&h.src_addr)?,
            None => None,
        };
        let dest = match (named, hints) {
            (Some(n), _) => Some(n),
            (None, Some(h)) => hint_addr(&h.dest_addr)?,
            (None, None) => None,
        };
        (src, dest)
    };

    // Interfaces the source allows, those reaching the destination's subnet first.
    let usable = |i: &Interface<'_>| match src {
        Some(s) if s.ip != [0; 4] => s.ip == i.ip,
        _ => true,
    };
    let near = |i: &Interface<'_>| match dest {
        Some(d) => i.contains(d.ip) || (i.loopback && d.ip[0] == 127),
        None => false,
    };

    let mut n = 0;
    let mut truncated = false;
    // FI_EP_MSG last: an application that asks for no type gets RDM first, as before.
    let msg = cfg.msg_ep && crate::served::MsgEp::SERVED.is_some();
    let types = [EpType::Rdm, EpType::Dgram, EpType::Msg];
    for ep_type in types.into_iter().filter(|t| msg || *t != EpType::Msg) {
        for pass_near in [true, false] {
            for iface in prov
                .interfaces
                .iter()
                .filter(|i| usable(i) && near(i) == pass_near)
            {
                let mut info = default_info(ep_type, Some(iface), cfg);
                info.fabric_attr.api_version = version;
                if ep_type == EpType::Rdm && version >= fi_version(2, 0) {
                    info.caps |= RDM_CAPS_2_0;
                    info.rx_attr.caps |= RDM_CAPS_2_0;
                }

                match hints {
                    Some(h) => match apply_hints(info, h, version, cfg) {
                        Some(i) => info = i,
                        None => continue,
                    },
                    None => {
                        info.caps.remove(NARROWING_CAPS);
                        info.rx_attr.caps.remove(NARROWING_CAPS);
                        if let Some((m, local_mr)) =
                            match_mr_mode(version, &Info::default(), info.caps, cfg)
                        {
                            info.domain_attr.mr_mode = m;
                            if local_mr {
                                info.mode |= Mode::LOCAL_MR;
                            }
                        }
                    }
                }
                let local = EpAddr {
                    ip: iface.ip,
                    port: src.map_or(0, |s| s.port),
                    ep_id: src.map_or(0, |s| s.ep_id),
                };
                info.src_addr = Some(encode_addr(info.addr_format, &local));
                info.dest_addr = dest.map(|d| encode_addr(info.addr_format, &d));
                match out.get_mut(n) {
                    Some(slot) => {
                        *slot = info;
                        n += 1;
                    }
                    None => truncated = true,
                }
            }
        }
    }
    if truncated {
        Err(Errno::ETOOSMALL)
    } else if n == 0 {
        Err(Errno::ENODATA)
    } else {
        Ok(n)
    }
}

fn prov_name_matches(hint: &str) -> bool {
    hint.is_empty() || hint.eq_ignore_ascii_case(PROV_NAME)
}

/// Requested value `req` (0: unspecified) must not exceed what is offered.
fn within(req: usize, offered: usize) -> bool {
    req <= offered
}

/// Narrows the offer `info` by the hints; `None` when a hint cannot be met.
fn apply_hints(mut info: Info, h: &Info, version: u32, cfg: &ProviderConfig) -> Option<Info> {
    let offered = info.caps;

    // Endpoint type, address format.
    if h.ep_attr.ep_type != EpType::Unspec && h.ep_attr.ep_type != info.ep_attr.ep_type {
        return None;
    }
    info.addr_format = match h.addr_format {
        AddrFormat::UNSPEC => AddrFormat::SOCKADDR_IN,
        f @ (AddrFormat::SOCKADDR_IN | AddrFormat::SOCKADDR | AddrFormat::STR) => f,
        _ => return None,
    };

    // Capabilities: every requested one supported; primaries and their modifiers exactly
    // as asked; secondaries as asked plus the free ones.
    let asked = h.caps | h.domain_attr.caps | h.tx_attr.caps | h.rx_attr.caps;
    if !offered.contains(asked) {
        return None;
    }
    // FI_READ / FI_WRITE / FI_REMOTE_* modify RMA or atomics: alone they are invalid.
    let rma_modifiers = Flags::READ | Flags::WRITE | Flags::REMOTE_READ | Flags::REMOTE_WRITE;
    if asked.intersects(rma_modifiers | Flags::RMA_EVENT)
        && !asked.intersects(Flags::RMA | Flags::ATOMIC)
    {
        return None;
    }
    // FI_RMA_EVENT needs FI_REMOTE_READ and/or FI_REMOTE_WRITE (fi_getinfo(3)), which
    // naming no modifier at all implies.
    if asked.contains(Flags::RMA_EVENT)
        && asked.intersects(rma_modifiers)
        && !asked.intersects(Flags::REMOTE_READ | Flags::REMOTE_WRITE)
    {
        return None;
    }
    let comm_asked = asked & COMM_CAPS;
    let comm = if comm_asked.is_empty() {
        offered & COMM_CAPS
    } else {
        comm_asked
    };
    let caps = if h.caps.is_empty() {
        offered.difference(COMM_CAPS | NARROWING_CAPS.difference(asked)) | comm
    } else {
        h.caps.difference(COMM_CAPS) | (offered & FREE_SECONDARY_CAPS) | comm
    };
    info.caps = caps;
    info.domain_attr.caps = comm;
    // Context caps: the context's side only, and (fi_endpoint(3)) a subset of what the
    // endpoint as a whole asked for, modifiers implied when it named none.
    let modifiers = match h.caps & Flags::PRIMARY_MODIFIERS {
        m if m.is_empty() => Flags::PRIMARY_MODIFIERS,
        m => m,
    };
    for (ctx_hint, side) in [
        (h.tx_attr.caps, Flags::TX_CAPS),
        (h.rx_attr.caps, Flags::RX_CAPS),
    ] {
        if !side.contains(ctx_hint) {
            return None;
        }
        if !h.caps.is_empty() && !(h.caps | modifiers).contains(ctx_hint) {
            return None;
        }
    }
    info.tx_attr.caps = if h.tx_attr.caps.is_empty() {
        caps & Flags::TX_CAPS
    } else {
        h.tx_attr.caps | (caps & FREE_SECONDARY_CAPS & Flags::TX_CAPS)
    };
    info.rx_attr.caps = if h.rx_attr.caps.is_empty() {
        caps & Flags::RX_CAPS
    } else {
        h.rx_attr.caps | (caps & FREE_SECONDARY_CAPS & Flags::RX_CAPS)
    };

    // Mode: what we require must be offered; keep what we use of the rest.
    let mr = match_mr_mode(version, h, caps, cfg)?;
    let mut required = cfg.required_mode;
    if mr.1 {
        required |= Mode::LOCAL_MR;
    }
    if !h.mode.contains(required) {
        return None;
    }
    let mode = required | (h.mode & cfg.optional_mode);
    info.mode = mode;
    for ctx_mode in [h.tx_attr.mode, h.rx_attr.mode] {
        if !ctx_mode.is_empty() && !ctx_mode.contains(required) {
            return None;
        }
    }
    info.tx_attr.mode = mode;
    info.rx_attr.mode = mode;

    // Fabric.
    let fa = &h.fabric_attr;
    if !fa.name.is_empty() && fa.name != info.fabric_attr.name {
        return None;
    }
    if !prov_name_matches(&fa.prov_name) || fa.prov_version > info.fabric_attr.prov_version {
        return None;
    }

    // Domain.
    let auth_max = if info.ep_attr.ep_type == EpType::Dgram {
        0
    } else {
        cfg.max_auth_key_size
    };
    let (ha, da) = (&h.domain_attr, &mut info.domain_attr);
    if !ha.name.is_empty() && ha.name != da.name {
        return None;
    }
    da.threading = match ha.threading {
        Threading::Unspec => da.threading,
        t if t.concurrency_rank() <= cfg.threading.concurrency_rank() => t,
        _ => return None,
    };
    if version >= fi_version(2, 0) {
        // One model from API 2.0: `progress` (1.x's data_progress slot) governs control
        // and data alike (fi_domain(3)); control_progress is not read in hints, as by
        // libfabric's own providers, and reports the same model.
        let hp = ha.data_progress;
        if !cfg.progress_supported(hp) {
            return None;
        }
        if hp != Progress::Unspec {
            da.data_progress = hp;
        }
        da.control_progress = da.data_progress;
    } else {
        for (hp, dp) in [
            (ha.control_progress, &mut da.control_progress),
            (ha.data_progress, &mut da.data_progress),
        ] {
            // FI_PROGRESS_CONTROL_UNIFIED is 2.0's.
            if !cfg.progress_supported(hp) || hp == Progress::ControlUnified {
                return None;
            }
            if hp != Progress::Unspec {
                *dp = hp;
            }
        }
    }
    if ha.resource_mgmt != ResourceMgmt::Unspec {
        da.resource_mgmt = ha.resource_mgmt;
    }
    da.av_type = ha.av_type;
    da.mr_mode = mr.0;
    if !(within(ha.mr_key_size, da.mr_key_size)
        && within(ha.cq_data_size, da.cq_data_size)
        && within(ha.cq_cnt, da.cq_cnt)
        && within(ha.ep_cnt, da.ep_cnt)
        && within(ha.tx_ctx_cnt, da.tx_ctx_cnt)
        && within(ha.rx_ctx_cnt, da.rx_ctx_cnt)
        && within(ha.max_ep_tx_ctx, da.max_ep_tx_ctx)
        && within(ha.max_ep_rx_ctx, da.max_ep_rx_ctx)
        && within(ha.max_ep_stx_ctx, da.max_ep_stx_ctx)
        && within(ha.max_ep_srx_ctx, da.max_ep_srx_ctx)
        && within(ha.cntr_cnt, da.cntr_cnt)
        && within(ha.mr_iov_limit, da.mr_iov_limit)
        && within(ha.max_err_data, da.max_err_data)
        && within(ha.mr_cnt, da.mr_cnt)
        && within(ha.auth_key.len(), auth_max))
    {
        return None;
    }
    // FI_RESTRICTED_COMP is never required; the domain mode stays empty.
    da.auth_key = ha.auth_key.clone();
    da.tclass = tclass(ha.tclass)?;

    // Endpoint.
    let (he, ea) = (&h.ep_attr, &mut info.ep_attr);
    if he.protocol != Protocol::UNSPEC && he.protocol != ea.protocol {
        return None;
    }
    if !(within(he.protocol_version as usize, ea.protocol_version as usize)
        && within(he.max_msg_size, ea.max_msg_size)
        && within(he.msg_prefix_size, ea.msg_prefix_size)
        && within(he.max_order_raw_size, ea.max_order_raw_size)
        && within(he.max_order_war_size, ea.max_order_war_size)
        && within(he.max_order_waw_size, ea.max_order_waw_size)
        && within(he.auth_key.len(), auth_max))
    {
        return None;
    }
    if he.mem_tag_format != 0 {
        // Tags match as (tag & ~ignore) over all 64 bits, so every layout is honoured.
        ea.mem_tag_format = he.mem_tag_format;
    }
    for (hc, ec) in [
        (he.tx_ctx_cnt, &mut ea.tx_ctx_cnt),
        (he.rx_ctx_cnt, &mut ea.rx_ctx_cnt),
    ] {
        // More than one context is a scalable endpoint's (fi_scalable_ep);
        // FI_SHARED_CONTEXT asks for a shared one, in a build with `shared-ctx`.
        if hc == FI_SHARED_CONTEXT && cfg!(feature = "shared-ctx") {
            *ec = hc;
            continue;
        }
        if hc > crate::sep::MAX_CTX {
            return None;
        }
        *ec = hc.max(1);
    }
    ea.auth_key = he.auth_key.clone();

    // Transmit.
    let rdm = info.ep_attr.ep_type != EpType::Dgram;
    let (ht, ta) = (&h.tx_attr, &mut info.tx_attr);
    let tx_ops = if rdm {
        RDM_TX_OP_FLAGS
    } else {
        DGRAM_TX_OP_FLAGS
    };
    if !tx_ops.contains(ht.op_flags) || !ta.msg_order.contains(ht.msg_order) {
        return None;
    }
    ta.op_flags = ht.op_flags;
    ta.comp_order = comp_order(ht.comp_order, rdm && cfg.comp_order_strict, false)?;
    if !(within(ht.inject_size, ta.inject_size)
        && within(ht.size, ta.size)
        && within(ht.iov_limit, ta.iov_limit)
        && within(ht.rma_iov_limit, ta.rma_iov_limit))
    {
        return None;
    }
    ta.tclass = tclass(ht.tclass)?;

    // Receive.
    let (hr, ra) = (&h.rx_attr, &mut info.rx_attr);
    if !RX_OP_FLAGS.contains(hr.op_flags) || !ra.msg_order.contains(hr.msg_order) {
        return None;
    }
    if hr.op_flags.contains(Flags::MULTI_RECV) && !caps.contains(Flags::MULTI_RECV) {
        return None;
    }
    ra.op_flags = hr.op_flags;
    ra.comp_order = comp_order(hr.comp_order, rdm && cfg.comp_order_strict, false)?;
    if !(within(hr.size, ra.size) && within(hr.iov_limit, ra.iov_limit)) {
        return None;
    }
    Some(info)
}

/// The comp_order granted for a requested one, if it can be met.
fn comp_order(req: CompOrder, strict: bool, data: bool) -> Option<CompOrder> {
    if req.contains(CompOrder::DATA) && !data {
        return None;
    }
    let order = req.bits() & CompOrder::STRICT.bits();
    if order == 0 || (order == CompOrder::STRICT.bits() && strict) {
        Some(req)
    } else {
        None
    }
}

/// The traffic classes accepted: the default and every label (FI_TC_BEST_EFFORT ..
/// FI_TC_NETWORK_CTRL), granted as asked. A label says what the traffic is for
/// (fi_endpoint(3)); with no class of service to map it to, every label is carried
/// like best effort, as libfabric's software providers do (fabtests' ping-pongs ask
/// for FI_TC_LOW_LATENCY, `fi_rma_bw` for FI_TC_BULK_DATA). A DSCP value asks for a
/// marking no data plane makes yet: no match.
fn tclass(req: TrafficClass) -> Option<TrafficClass> {
    let labels = TrafficClass::BEST_EFFORT.0..=TrafficClass::NETWORK_CTRL.0;
    (req == TrafficClass::UNSPEC || labels.contains(&req.0)).then_some(req)
}

/// mr_mode matching (fi_domain(3) 1.17, with the pre-1.5 enum semantics for old
/// versions): the output mr_mode and whether FI_LOCAL_MR mode is required.
fn match_mr_mode(
    version: u32,
    h: &Info,
    caps: Flags,
    cfg: &ProviderConfig,
) -> Option<(MrMode, bool)> {
    let eff = effective_mr_mode(cfg.mr_mode, caps);
    let user = h.domain_attr.mr_mode;
    // Legacy FI_MR_BASIC / FI_MR_SCALABLE: the application follows that scheme; local
    // registration is then signalled by the FI_LOCAL_MR mode bit.
    let legacy = |m: MrMode| -> Option<(MrMode, bool)> {
        let allowed = if m == MrMode::BASIC {
            MR_BASIC_SET
        } else {
            MrMode::LOCAL
        };
        if !allowed.contains(eff) {
            return None;
        }
        Some((m, eff.contains(MrMode::LOCAL)))
    };
    if version < fi_version(1, 5) {
        return match user.bits() {
            0 if eff.difference(MrMode::LOCAL).is_empty() => legacy(MrMode::SCALABLE),
            0 => legacy(MrMode::BASIC),
            1 => legacy(MrMode::BASIC),
            2 => legacy(MrMode::SCALABLE),
            _ => None,
        };
    }
    if user.intersects(MrMode::BASIC | MrMode::SCALABLE) {
        if user != MrMode::BASIC && user != MrMode::SCALABLE {
            return None;
        }
        return legacy(user);
    }
    if !user.contains(eff) {
        return None;
    }
    Some((eff, false))
}

/// Parses a dotted-quad IPv4 address (exactly four decimal parts, each 0..=255, no
/// leading `+`, at most three digits).
pub fn parse_ipv4(s: &str) -> Option<[u8; 4]> {
    let mut ip = [0u8; 4];
    let mut parts = s.split('.');
    for b in ip.iter_mut() {
        let p = parts.next()?;
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|c| c.is_ascii_digit()) {
            return None;
        }
        *b = p.parse().ok()?;
    }
    if parts.next().is_some() {
        return None;
    }
    Some(ip)
}

/// Parses a decimal port number.
fn parse_port(s: &str) -> Option<u16> {
    if s.is_empty() || s.len() > 5 || !s.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// FI_ADDR_STR schemes this provider reads.
const SCHEME_NOSTD: &str = "fi_addr_nostd://";
const SCHEME_SOCKADDR_IN: &str = "fi_sockaddr_in://";
const SCHEME_SOCKADDR: &str = "fi_sockaddr://";

/// Parses an FI_ADDR_STR address: `fi_addr_nostd://A.B.C.D:PORT[/EP_ID]`,
/// `fi_sockaddr_in://A.B.C.D:PORT` or `fi_sockaddr://A.B.C.D:PORT`. A trailing NUL is
/// allowed. Errors: -FI_EINVAL for a malformed body, -FI_ENODATA for another scheme.
pub fn parse_addr_str(s: &str) -> Result<EpAddr> {
    let s = s.strip_suffix('\0').unwrap_or(s);
    let (body, ep_allowed) = if let Some(b) = s.strip_prefix(SCHEME_NOSTD) {
        (b, true)
    } else if let Some(b) = s
        .strip_prefix(SCHEME_SOCKADDR_IN)
        .or_else(|| s.strip_prefix(SCHEME_SOCKADDR))
    {
        (b, false)
    } else if s.contains("://") {
        return Err(Errno::ENODATA);
    } else {
        return Err(Errno::EINVAL);
    };
    let (hostport, ep) = match body.split_once('/') {
        Some((hp, ep)) if ep_allowed => (hp, Some(ep)),
        Some(_) => return Err(Errno::EINVAL),
        None => (body, None),
    };
    let (host, port) = match hostport.split_once(':') {
        Some((h, p)) => (h, parse_port(p).ok_or(Errno::EINVAL)?),
        None => (hostport, 0),
    };
    let ip = parse_ipv4(host).ok_or(Errno::EINVAL)?;
    let ep_id = match ep {
        Some(e) => parse_port(e).ok_or(Errno::EINVAL)?,
        None => 0,
    };
    Ok(EpAddr::new(ip, port, ep_id))
}

/// Reads an address in `format` (FI_FORMAT_UNSPEC: the native sockaddr_in).
fn decode_addr(format: AddrFormat, raw: &[u8]) -> Result<EpAddr> {
    match format {
        AddrFormat::UNSPEC | AddrFormat::SOCKADDR_IN | AddrFormat::SOCKADDR => {
            if let Some(a) = EpAddr::from_sockaddr_in(raw) {
                return Ok(a);
            }
            match raw.get(..2) {
                Some(f) if u16::from_ne_bytes([f[0], f[1]]) == AF_INET6 => Err(Errno::ENODATA),
                _ => Err(Errno::EINVAL),
            }
        }
        AddrFormat::STR => {
            let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
            let s = core::str::from_utf8(&raw[..end]).map_err(|_| Errno::EINVAL)?;
            parse_addr_str(s)
        }
        _ => Err(Errno::ENODATA),
    }
}

/// Writes an address in `format` (FI_ADDR_STR: `fi_addr_nostd://…` with its NUL).
fn encode_addr(format: AddrFormat, a: &EpAddr) -> RawAddr {
    let mut raw = RawAddr::new();
    if format == AddrFormat::STR {
        let mut s: heapless::String<48> = heapless::String::new();
        // 16 + 15 + 1 + 5 + 1 + 5 = 43 bytes at most: cannot fail.
        let _ = write!(
            s,
            "{}{}.{}.{}.{}:{}/{}",
            SCHEME_NOSTD, a.ip[0], a.ip[1], a.ip[2], a.ip[3], a.port, a.ep_id
        );
        let _ = raw.extend_from_slice(s.as_bytes());
        let _ = raw.push(0);
    } else {
        let _ = raw.extend_from_slice(&a.to_sockaddr_in());
    }
    raw
}

#[cfg(test)]
mod tests;
