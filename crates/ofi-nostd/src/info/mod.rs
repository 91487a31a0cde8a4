//! `fi_info` and its attribute structures (fi_getinfo(3), fi_endpoint(3), fi_domain(3),
//! fi_fabric(3)), and [`getinfo`], the provider's answer to `fi_getinfo`.
//!
//! The structs mirror libfabric's field for field, with owned fixed-capacity storage in
//! place of C pointers: names are [`Name`]s, keys [`AuthKey`]s and addresses [`RawAddr`]s,
//! so an [`Info`] is a plain value that can live in a static array. Every numeric value
//! (enums, flag words) equals the C one, so the C provider converts without tables.
//!
//! What C has and these structs do not: `next` (a slice replaces the list), `handle`,
//! `fabric_attr->fabric`, `domain_attr->domain` and `nic` (object pointers the C layer
//! owns; the core never dereferences them). An empty [`Name`] stands for a NULL string and
//! `None` for a NULL address.

mod getinfo;

pub use getinfo::{
    FREE_SECONDARY_CAPS, Interface, MAX_ENTRIES_PER_INTERFACE, NoResolver, Provider,
    ProviderConfig, RDM_MSG_ORDER, Resolver, default_info, getinfo, parse_addr_str, parse_ipv4,
};

use crate::flags::{CompOrder, Flags, Mode, MrMode, Order};

/// `FI_VERSION(major, minor)`: `(major << 16) | minor`.
pub const fn fi_version(major: u32, minor: u32) -> u32 {
    (major << 16) | (minor & 0xFFFF)
}

/// `FI_MAJOR(version)`.
pub const fn fi_major(version: u32) -> u32 {
    version >> 16
}

/// `FI_MINOR(version)`.
pub const fn fi_minor(version: u32) -> u32 {
    version & 0xFFFF
}

/// The libfabric API the hosted tools and the safe API speak: `FI_VERSION(1, 17)`, as
/// Debian 12's libfabric.
pub const API_VERSION: u32 = fi_version(1, 17);

/// The newest libfabric API [`getinfo`] answers: `FI_VERSION(2, 5)`. Its attribute
/// values hold for every API from 1.0 on; what differs between ABIs (the layout of
/// `fi_domain_attr`, the fields 1.20-2.5 added) is the C adapter's business.
pub const MAX_API_VERSION: u32 = fi_version(2, 5);

/// The provider's name (`fabric_attr->prov_name`).
pub const PROV_NAME: &str = "nostd";

/// The provider's version (`fabric_attr->prov_version`): 1.0.
pub const PROV_VERSION: u32 = fi_version(1, 0);

/// The fabric's name: every interface reaches the same routed IPv4/UDP network.
pub const FABRIC_NAME: &str = "nostd";

/// `FI_PROV_SPECIFIC`: the bit that marks provider-specific enum values.
pub const FI_PROV_SPECIFIC: u32 = 1 << 31;

/// `FI_SHARED_CONTEXT`: a `tx_ctx_cnt`/`rx_ctx_cnt` asking for a shared context.
pub const FI_SHARED_CONTEXT: usize = usize::MAX;

/// Capacity of a [`Name`] in bytes (interface names, provider names, fabric names).
pub const NAME_CAP: usize = 64;

/// A name string (`char *` in C); empty means NULL.
pub type Name = heapless::String<NAME_CAP>;

/// Capacity of an [`AuthKey`] in bytes.
pub const AUTH_KEY_CAP: usize = 64;

/// An authorization key (`auth_key` + `auth_key_size`); empty means none.
pub type AuthKey = heapless::Vec<u8, AUTH_KEY_CAP>;

/// Capacity of a [`RawAddr`] in bytes: room for every `sockaddr` and for FI_ADDR_STR
/// strings up to 127 characters plus their NUL.
pub const RAW_ADDR_CAP: usize = 128;

/// An address as `fi_info` carries it (`src_addr` + `src_addrlen`), in the format named
/// by `addr_format`. FI_ADDR_STR addresses include their terminating NUL, as in C.
pub type RawAddr = heapless::Vec<u8, RAW_ADDR_CAP>;

/// A name from a string, truncated at [`NAME_CAP`] bytes (on a character boundary).
pub fn name(s: &str) -> Name {
    let mut n = Name::new();
    for c in s.chars() {
        if n.push(c).is_err() {
            break;
        }
    }
    n
}

macro_rules! c_enum {
    (
        $(#[$m:meta])* $name:ident {
            $(#[$fm:meta])* $first:ident = $fval:expr, $fc:literal;
            $($(#[$vm:meta])* $v:ident = $val:expr, $c:literal;)*
        }
    ) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u32)]
        pub enum $name {
            $(#[$fm])* #[doc = concat!("`", $fc, "`.")] $first = $fval,
            $($(#[$vm])* #[doc = concat!("`", $c, "`.")] $v = $val,)*
        }

        impl Default for $name {
            fn default() -> Self {
                $name::$first
            }
        }

        impl $name {
            /// The value for a C enum value, if it names one.
            pub const fn from_raw(v: u32) -> Option<Self> {
                match v {
                    $fval => Some($name::$first),
                    $($val => Some($name::$v),)*
                    _ => None,
                }
            }

            /// The C enum value.
            pub const fn raw(self) -> u32 {
                self as u32
            }

            /// The C name, as `fi_tostr` prints it.
            pub const fn c_name(self) -> &'static str {
                match self {
                    $name::$first => $fc,
                    $($name::$v => $c,)*
                }
            }
        }
    };
}

c_enum! {
    /// `enum fi_ep_type`.
    EpType {
        Unspec = 0, "FI_EP_UNSPEC";
        Msg = 1, "FI_EP_MSG";
        Dgram = 2, "FI_EP_DGRAM";
        Rdm = 3, "FI_EP_RDM";
        SockStream = 4, "FI_EP_SOCK_STREAM";
        SockDgram = 5, "FI_EP_SOCK_DGRAM";
    }
}

c_enum! {
    /// `enum fi_threading`.
    Threading {
        Unspec = 0, "FI_THREAD_UNSPEC";
        Safe = 1, "FI_THREAD_SAFE";
        Fid = 2, "FI_THREAD_FID";
        Domain = 3, "FI_THREAD_DOMAIN";
        Completion = 4, "FI_THREAD_COMPLETION";
        Endpoint = 5, "FI_THREAD_ENDPOINT";
    }
}

impl Threading {
    /// How much concurrency the model lets the application use: a provider that supports
    /// a model supports every model of lower rank (the application serializes more).
    pub const fn concurrency_rank(self) -> u8 {
        match self {
            Threading::Unspec => 0,
            Threading::Domain => 1,
            Threading::Completion => 2,
            Threading::Endpoint => 3,
            Threading::Fid => 4,
            Threading::Safe => 5,
        }
    }
}

c_enum! {
    /// `enum fi_progress`.
    Progress {
        Unspec = 0, "FI_PROGRESS_UNSPEC";
        Auto = 1, "FI_PROGRESS_AUTO";
        Manual = 2, "FI_PROGRESS_MANUAL";
        ControlUnified = 3, "FI_PROGRESS_CONTROL_UNIFIED";
    }
}

c_enum! {
    /// `enum fi_resource_mgmt`.
    ResourceMgmt {
        Unspec = 0, "FI_RM_UNSPEC";
        Disabled = 1, "FI_RM_DISABLED";
        Enabled = 2, "FI_RM_ENABLED";
    }
}

c_enum! {
    /// `enum fi_av_type`.
    AvType {
        Unspec = 0, "FI_AV_UNSPEC";
        Map = 1, "FI_AV_MAP";
        Table = 2, "FI_AV_TABLE";
    }
}

/// `addr_format`: a `uint32_t` in C whose provider-specific values set
/// [`FI_PROV_SPECIFIC`], so it is an open newtype rather than an enum.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct AddrFormat(pub u32);

impl AddrFormat {
    /// FI_FORMAT_UNSPEC: the provider's native format.
    pub const UNSPEC: AddrFormat = AddrFormat(0);
    /// FI_SOCKADDR: a `struct sockaddr`, family read from `sa_family`.
    pub const SOCKADDR: AddrFormat = AddrFormat(1);
    /// FI_SOCKADDR_IN: `struct sockaddr_in` (this provider's native format).
    pub const SOCKADDR_IN: AddrFormat = AddrFormat(2);
    /// FI_SOCKADDR_IN6.
    pub const SOCKADDR_IN6: AddrFormat = AddrFormat(3);
    /// FI_SOCKADDR_IB.
    pub const SOCKADDR_IB: AddrFormat = AddrFormat(4);
    /// FI_ADDR_PSMX.
    pub const PSMX: AddrFormat = AddrFormat(5);
    /// FI_ADDR_GNI.
    pub const GNI: AddrFormat = AddrFormat(6);
    /// FI_ADDR_BGQ.
    pub const BGQ: AddrFormat = AddrFormat(7);
    /// FI_ADDR_MLX.
    pub const MLX: AddrFormat = AddrFormat(8);
    /// FI_ADDR_STR: a formatted, NUL-terminated string.
    pub const STR: AddrFormat = AddrFormat(9);
    /// FI_ADDR_PSMX2.
    pub const PSMX2: AddrFormat = AddrFormat(10);
    /// FI_ADDR_IB_UD.
    pub const IB_UD: AddrFormat = AddrFormat(11);
    /// FI_ADDR_EFA.
    pub const EFA: AddrFormat = AddrFormat(12);
    /// FI_ADDR_PSMX3.
    pub const PSMX3: AddrFormat = AddrFormat(13);
    /// FI_ADDR_OPX.
    pub const OPX: AddrFormat = AddrFormat(14);
    /// FI_ADDR_CXI.
    pub const CXI: AddrFormat = AddrFormat(15);

    /// The C name, for the values `<rdma/fabric.h>` 1.17 defines.
    pub const fn c_name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "FI_FORMAT_UNSPEC",
            1 => "FI_SOCKADDR",
            2 => "FI_SOCKADDR_IN",
            3 => "FI_SOCKADDR_IN6",
            4 => "FI_SOCKADDR_IB",
            5 => "FI_ADDR_PSMX",
            6 => "FI_ADDR_GNI",
            7 => "FI_ADDR_BGQ",
            8 => "FI_ADDR_MLX",
            9 => "FI_ADDR_STR",
            10 => "FI_ADDR_PSMX2",
            11 => "FI_ADDR_IB_UD",
            12 => "FI_ADDR_EFA",
            13 => "FI_ADDR_PSMX3",
            14 => "FI_ADDR_OPX",
            15 => "FI_ADDR_CXI",
            _ => return None,
        })
    }
}

/// `ep_attr->protocol`: a `uint32_t` whose provider-specific values set
/// [`FI_PROV_SPECIFIC`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Protocol(pub u32);

impl Protocol {
    /// FI_PROTO_UNSPEC.
    pub const UNSPEC: Protocol = Protocol(0);
    /// FI_PROTO_UDP.
    pub const UDP: Protocol = Protocol(5);
    /// FI_PROTO_RXD.
    pub const RXD: Protocol = Protocol(12);
    /// This provider's reliable-datagram protocol (RDM endpoints), provider specific.
    pub const NOSTD_RDM: Protocol = Protocol(FI_PROV_SPECIFIC | 0x006E_7301);
    /// This provider's datagram protocol (DGRAM endpoints: our header, no reliability),
    /// provider specific. Distinct from [`Protocol::NOSTD_RDM`] because the two do not
    /// interoperate.
    pub const NOSTD_DGRAM: Protocol = Protocol(FI_PROV_SPECIFIC | 0x006E_7302);
    /// The reliable protocol with connection management (FI_EP_MSG endpoints, wire
    /// protocol section 9), provider specific: an RDM session set up by CONNREQ/ACCEPT.
    pub const NOSTD_MSG: Protocol = Protocol(FI_PROV_SPECIFIC | 0x006E_7303);

    /// The C name, for the values `<rdma/fabric.h>` 1.17 defines (7 and 17 are the
    /// retired MXM and MRAIL values, which `fi_tostr` no longer names).
    pub const fn c_name(self) -> Option<&'static str> {
        Some(match self.0 {
            0 => "FI_PROTO_UNSPEC",
            1 => "FI_PROTO_RDMA_CM_IB_RC",
            2 => "FI_PROTO_IWARP",
            3 => "FI_PROTO_IB_UD",
            4 => "FI_PROTO_PSMX",
            5 => "FI_PROTO_UDP",
            6 => "FI_PROTO_SOCK_TCP",
            8 => "FI_PROTO_IWARP_RDM",
            9 => "FI_PROTO_IB_RDM",
            10 => "FI_PROTO_GNI",
            11 => "FI_PROTO_RXM",
            12 => "FI_PROTO_RXD",
            13 => "FI_PROTO_MLX",
            14 => "FI_PROTO_NETWORKDIRECT",
            15 => "FI_PROTO_PSMX2",
            16 => "FI_PROTO_SHM",
            18 => "FI_PROTO_RSTREAM",
            19 => "FI_PROTO_RDMA_CM_IB_XRC",
            20 => "FI_PROTO_EFA",
            21 => "FI_PROTO_PSMX3",
            22 => "FI_PROTO_RXM_TCP",
            23 => "FI_PROTO_OPX",
            24 => "FI_PROTO_CXI",
            25 => "FI_PROTO_XNET",
            _ => return None,
        })
    }
}

/// `tclass`: FI_TC_UNSPEC, a DSCP value (`fi_tc_dscp_set`), a label, or provider
/// specific.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct TrafficClass(pub u32);

impl TrafficClass {
    /// FI_TC_UNSPEC: the domain's (or provider's) default.
    pub const UNSPEC: TrafficClass = TrafficClass(0);
    /// FI_TC_DSCP: marks a DSCP value in the low byte.
    pub const DSCP: TrafficClass = TrafficClass(0x100);
    /// FI_TC_LABEL: marks a label.
    pub const LABEL: TrafficClass = TrafficClass(0x200);
    /// FI_TC_BEST_EFFORT.
    pub const BEST_EFFORT: TrafficClass = TrafficClass(0x200);
    /// FI_TC_LOW_LATENCY.
    pub const LOW_LATENCY: TrafficClass = TrafficClass(0x201);
    /// FI_TC_DEDICATED_ACCESS.
    pub const DEDICATED_ACCESS: TrafficClass = TrafficClass(0x202);
    /// FI_TC_BULK_DATA.
    pub const BULK_DATA: TrafficClass = TrafficClass(0x203);
    /// FI_TC_SCAVENGER.
    pub const SCAVENGER: TrafficClass = TrafficClass(0x204);
    /// FI_TC_NETWORK_CTRL.
    pub const NETWORK_CTRL: TrafficClass = TrafficClass(0x205);

    /// `fi_tc_dscp_set(dscp)`.
    pub const fn dscp(dscp: u8) -> TrafficClass {
        TrafficClass(dscp as u32 | 0x100)
    }

    /// `fi_tc_dscp_get(tclass)`: the DSCP value, 0 if this is not a DSCP class.
    pub const fn dscp_value(self) -> u8 {
        if self.0 & 0x100 != 0 { self.0 as u8 } else { 0 }
    }
}

/// `struct fi_tx_attr`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TxAttr {
    /// Capabilities of the transmit context (⊆ `fi_info::caps`, TX-side bits only).
    pub caps: Flags,
    /// Mode bits that apply to transmits.
    pub mode: Mode,
    /// Default flags of transmit calls that take none.
    pub op_flags: Flags,
    /// Message ordering between transmits to one peer.
    pub msg_order: Order,
    /// Completion ordering.
    pub comp_order: CompOrder,
    /// Largest payload of `fi_inject` / FI_INJECT.
    pub inject_size: usize,
    /// Transmit queue depth.
    pub size: usize,
    /// Largest iov count of one transmit.
    pub iov_limit: usize,
    /// Largest remote iov count of one RMA/atomic.
    pub rma_iov_limit: usize,
    /// Traffic class.
    pub tclass: TrafficClass,
}

/// `struct fi_rx_attr`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RxAttr {
    /// Capabilities of the receive context (⊆ `fi_info::caps`, RX-side bits only).
    pub caps: Flags,
    /// Mode bits that apply to receives.
    pub mode: Mode,
    /// Default flags of receive calls that take none.
    pub op_flags: Flags,
    /// Order in which received messages are processed.
    pub msg_order: Order,
    /// Completion ordering (FI_ORDER_NONE, FI_ORDER_STRICT, FI_ORDER_DATA).
    pub comp_order: CompOrder,
    /// Legacy hint for unexpected-message buffering; ignored (resource management
    /// governs it).
    pub total_buffered_recv: usize,
    /// Receive queue depth.
    pub size: usize,
    /// Largest iov count of one posted receive.
    pub iov_limit: usize,
}

/// `struct fi_ep_attr`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EpAttr {
    /// Endpoint type (`type` in C).
    pub ep_type: EpType,
    /// Wire protocol.
    pub protocol: Protocol,
    /// Wire protocol version.
    pub protocol_version: u32,
    /// Largest single transfer.
    pub max_msg_size: usize,
    /// Bytes of FI_MSG_PREFIX space (0: no prefix).
    pub msg_prefix_size: usize,
    /// Largest RMA/atomic size with read-after-write data ordering.
    pub max_order_raw_size: usize,
    /// Largest RMA/atomic size with write-after-read data ordering.
    pub max_order_war_size: usize,
    /// Largest RMA/atomic size with write-after-write data ordering.
    pub max_order_waw_size: usize,
    /// Tag format (fi_endpoint(3) "mem_tag_format").
    pub mem_tag_format: u64,
    /// Transmit contexts (0 in hints: one; [`FI_SHARED_CONTEXT`]: shared).
    pub tx_ctx_cnt: usize,
    /// Receive contexts (0 in hints: one; [`FI_SHARED_CONTEXT`]: shared).
    pub rx_ctx_cnt: usize,
    /// Endpoint authorization key (empty: the domain's).
    pub auth_key: AuthKey,
}

/// `struct fi_domain_attr` (every field of fi_domain(3) 1.17 but the `domain` pointer).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DomainAttr {
    /// Domain name: the interface / data-plane name.
    pub name: Name,
    /// Threading model.
    pub threading: Threading,
    /// Progress model of control operations.
    pub control_progress: Progress,
    /// Progress model of data operations.
    pub data_progress: Progress,
    /// Resource management.
    pub resource_mgmt: ResourceMgmt,
    /// Address vector type.
    pub av_type: AvType,
    /// Memory-registration mode bits (`int` in C; FI_MR_BASIC / FI_MR_SCALABLE are the
    /// legacy enum values 1 and 2).
    pub mr_mode: MrMode,
    /// Bytes of a remote memory key.
    pub mr_key_size: usize,
    /// Bytes of remote CQ data.
    pub cq_data_size: usize,
    /// Completion queues the domain supports.
    pub cq_cnt: usize,
    /// Endpoints the domain supports.
    pub ep_cnt: usize,
    /// Transmit contexts the domain supports.
    pub tx_ctx_cnt: usize,
    /// Receive contexts the domain supports.
    pub rx_ctx_cnt: usize,
    /// Transmit contexts per (scalable) endpoint.
    pub max_ep_tx_ctx: usize,
    /// Receive contexts per (scalable) endpoint.
    pub max_ep_rx_ctx: usize,
    /// Endpoints that may share one transmit context.
    pub max_ep_stx_ctx: usize,
    /// Endpoints that may share one receive context.
    pub max_ep_srx_ctx: usize,
    /// Counters the domain supports.
    pub cntr_cnt: usize,
    /// Largest iov count of one memory registration.
    pub mr_iov_limit: usize,
    /// Domain capabilities (FI_LOCAL_COMM, FI_REMOTE_COMM, FI_SHARED_AV).
    pub caps: Flags,
    /// Domain mode bits (FI_RESTRICTED_COMP).
    pub mode: Mode,
    /// Default authorization key of the domain's endpoints and MRs.
    pub auth_key: AuthKey,
    /// Largest provider error data of a CQ/EQ error entry.
    pub max_err_data: usize,
    /// Memory regions the domain supports.
    pub mr_cnt: usize,
    /// Default traffic class.
    pub tclass: TrafficClass,
}

/// `struct fi_fabric_attr` (without the `fabric` pointer).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FabricAttr {
    /// Fabric name.
    pub name: Name,
    /// Provider name.
    pub prov_name: Name,
    /// Provider version, `FI_VERSION` encoded.
    pub prov_version: u32,
    /// The API version the application asked for.
    pub api_version: u32,
}

/// `struct fi_info`: one endpoint configuration on one domain.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Info {
    /// Capabilities.
    pub caps: Flags,
    /// Mode bits: in hints the ones the application supports, on output the ones the
    /// provider requires.
    pub mode: Mode,
    /// Format of every address used through this info.
    pub addr_format: AddrFormat,
    /// Source address (`src_addr` + `src_addrlen`).
    pub src_addr: Option<RawAddr>,
    /// Destination address (`dest_addr` + `dest_addrlen`).
    pub dest_addr: Option<RawAddr>,
    /// Transmit attributes.
    pub tx_attr: TxAttr,
    /// Receive attributes.
    pub rx_attr: RxAttr,
    /// Endpoint attributes.
    pub ep_attr: EpAttr,
    /// Domain attributes.
    pub domain_attr: DomainAttr,
    /// Fabric attributes.
    pub fabric_attr: FabricAttr,
}

/// Endpoints one shared context can be bound to (`max_ep_stx_ctx` / `max_ep_srx_ctx`).
pub const MAX_SHARED_EPS: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enum_values_match_headers() {
        assert_eq!(fi_version(1, 17), 0x0001_0011);
        assert_eq!(fi_major(API_VERSION), 1);
        assert_eq!(fi_minor(API_VERSION), 17);
        assert_eq!(MAX_API_VERSION, 0x0002_0005);
        assert_eq!(EpType::Rdm.raw(), 3);
        assert_eq!(EpType::SockDgram.raw(), 5);
        assert_eq!(EpType::from_raw(2), Some(EpType::Dgram));
        assert_eq!(EpType::from_raw(6), None);
        assert_eq!(Threading::Endpoint.raw(), 5);
        assert_eq!(Threading::Domain.raw(), 3);
        assert_eq!(Progress::Manual.raw(), 2);
        assert_eq!(ResourceMgmt::Enabled.raw(), 2);
        assert_eq!(AvType::Table.raw(), 2);
        assert_eq!(AddrFormat::STR.0, 9);
        assert_eq!(AddrFormat::CXI.0, 15);
        assert_eq!(Protocol::RXD.0, 12);
        assert_ne!(Protocol::NOSTD_RDM.0 & FI_PROV_SPECIFIC, 0);
        assert_ne!(Protocol::NOSTD_RDM, Protocol::NOSTD_DGRAM);
        assert_eq!(TrafficClass::NETWORK_CTRL.0, 0x205);
        assert_eq!(TrafficClass::dscp(46).0, 0x12e);
        assert_eq!(TrafficClass::dscp(46).dscp_value(), 46);
        assert_eq!(TrafficClass::BULK_DATA.dscp_value(), 0);
        assert_eq!(Threading::default(), Threading::Unspec);
    }

    #[test]
    fn names_truncate_on_char_boundary() {
        assert_eq!(name("eth0").as_str(), "eth0");
        let long = "é".repeat(40);
        let n = name(&long);
        assert_eq!(n.len(), 64);
        assert!(n.chars().all(|c| c == 'é'));
    }
}
