//! `fi_tostr` without allocation: every printable libfabric type written to a
//! [`core::fmt::Write`], byte for byte as libfabric 1.17's `fi_tostr` prints it (the
//! snapshots in `tostr/snapshots/` come from the system library; `gen.c` there
//! regenerates them), plus the two formats of the `fi_info` tool ([`write_short`],
//! [`write_verbose`]).
//!
//! Pointers the core does not have print as libfabric prints NULL ones (`handle: (nil)`,
//! `domain: 0x0`, `nic: (nil)`); an empty [`crate::info::Name`] prints `(null)`.
//! Enum writers take the raw C value so unknown values print `Unknown` as in C.

use crate::flags::{CompOrder, Flags, Mode, MrMode, Order};
use crate::info::{
    AddrFormat, DomainAttr, EpAttr, FI_PROV_SPECIFIC, FabricAttr, Info, Protocol, RxAttr, TxAttr,
    fi_major, fi_minor,
};
use core::fmt::{self, Write};
use core::net::{Ipv4Addr, Ipv6Addr};

/// `enum fi_type`: what `fi_tostr` is asked to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
#[allow(missing_docs)] // the variants are the C names
pub enum FiType {
    Info = 0,
    EpType = 1,
    Caps = 2,
    OpFlags = 3,
    AddrFormat = 4,
    TxAttr = 5,
    RxAttr = 6,
    EpAttr = 7,
    DomainAttr = 8,
    FabricAttr = 9,
    Threading = 10,
    Progress = 11,
    Protocol = 12,
    MsgOrder = 13,
    Mode = 14,
    AvType = 15,
    AtomicType = 16,
    AtomicOp = 17,
    Version = 18,
    EqEvent = 19,
    CqEventFlags = 20,
    MrMode = 21,
    OpType = 22,
    Fid = 23,
    CollectiveOp = 24,
    HmemIface = 25,
    CqFormat = 26,
    LogLevel = 27,
    LogSubsys = 28,
}

/// A value to print, tagged with its `fi_type`; enums are raw C values.
#[derive(Debug, Clone, Copy)]
#[allow(missing_docs)] // one variant per FiType
pub enum Data<'a> {
    Info(&'a Info),
    EpType(u32),
    Caps(Flags),
    OpFlags(Flags),
    AddrFormat(AddrFormat),
    TxAttr(&'a TxAttr),
    RxAttr(&'a RxAttr),
    EpAttr(&'a EpAttr),
    DomainAttr(&'a DomainAttr),
    FabricAttr(&'a FabricAttr),
    Threading(u32),
    Progress(u32),
    Protocol(Protocol),
    MsgOrder(Order),
    Mode(Mode),
    AvType(u32),
    AtomicType(u32),
    AtomicOp(u32),
    Version,
    EqEvent(u32),
    CqEventFlags(Flags),
    MrMode(MrMode),
    OpType(u32),
    CollectiveOp(u32),
    HmemIface(u32),
    CqFormat(u32),
    LogLevel(u32),
    LogSubsys(u32),
}

impl Data<'_> {
    /// The `fi_type` of this value.
    pub fn fi_type(&self) -> FiType {
        match self {
            Data::Info(_) => FiType::Info,
            Data::EpType(_) => FiType::EpType,
            Data::Caps(_) => FiType::Caps,
            Data::OpFlags(_) => FiType::OpFlags,
            Data::AddrFormat(_) => FiType::AddrFormat,
            Data::TxAttr(_) => FiType::TxAttr,
            Data::RxAttr(_) => FiType::RxAttr,
            Data::EpAttr(_) => FiType::EpAttr,
            Data::DomainAttr(_) => FiType::DomainAttr,
            Data::FabricAttr(_) => FiType::FabricAttr,
            Data::Threading(_) => FiType::Threading,
            Data::Progress(_) => FiType::Progress,
            Data::Protocol(_) => FiType::Protocol,
            Data::MsgOrder(_) => FiType::MsgOrder,
            Data::Mode(_) => FiType::Mode,
            Data::AvType(_) => FiType::AvType,
            Data::AtomicType(_) => FiType::AtomicType,
            Data::AtomicOp(_) => FiType::AtomicOp,
            Data::Version => FiType::Version,
            Data::EqEvent(_) => FiType::EqEvent,
            Data::CqEventFlags(_) => FiType::CqEventFlags,
            Data::MrMode(_) => FiType::MrMode,
            Data::OpType(_) => FiType::OpType,
            Data::CollectiveOp(_) => FiType::CollectiveOp,
            Data::HmemIface(_) => FiType::HmemIface,
            Data::CqFormat(_) => FiType::CqFormat,
            Data::LogLevel(_) => FiType::LogLevel,
            Data::LogSubsys(_) => FiType::LogSubsys,
        }
    }
}

/// `fi_tostr(data, type)`: writes what libfabric 1.17 writes for the value.
pub fn write_tostr<W: Write + ?Sized>(w: &mut W, data: Data<'_>) -> fmt::Result {
    match data {
        Data::Info(i) => write_info(w, i),
        Data::EpType(v) => write_ep_type(w, v),
        Data::Caps(f) => write_caps(w, f),
        Data::OpFlags(f) => write_op_flags(w, f),
        Data::AddrFormat(f) => write_addr_format(w, f),
        Data::TxAttr(a) => write_tx_attr(w, a, ""),
        Data::RxAttr(a) => write_rx_attr(w, a, ""),
        Data::EpAttr(a) => write_ep_attr(w, a, ""),
        Data::DomainAttr(a) => write_domain_attr(w, a, ""),
        Data::FabricAttr(a) => write_fabric_attr(w, a, ""),
        Data::Threading(v) => write_threading(w, v),
        Data::Progress(v) => write_progress(w, v),
        Data::Protocol(p) => write_protocol(w, p),
        Data::MsgOrder(o) => write_msg_order(w, o),
        Data::Mode(m) => write_mode(w, m),
        Data::AvType(v) => write_av_type(w, v),
        Data::AtomicType(v) => write_enum(w, v, ATOMIC_TYPES),
        Data::AtomicOp(v) => write_enum(w, v, ATOMIC_OPS),
        Data::Version => write_version(w),
        Data::EqEvent(v) => write_enum(w, v, EQ_EVENTS),
        Data::CqEventFlags(f) => write_cq_event_flags(w, f),
        Data::MrMode(m) => write_mr_mode(w, m),
        Data::OpType(v) => write_enum(w, v, OP_TYPES),
        Data::CollectiveOp(v) => write_enum(w, v, COLLECTIVE_OPS),
        Data::HmemIface(v) => write_enum(w, v, HMEM_IFACES),
        Data::CqFormat(v) => write_enum(w, v, CQ_FORMATS),
        Data::LogLevel(v) => write_enum(w, v, LOG_LEVELS),
        Data::LogSubsys(v) => write_enum(w, v, LOG_SUBSYS),
    }
}

/// Writes the names of the set bits in table order, comma separated.
fn write_flags<W: Write + ?Sized>(w: &mut W, bits: u64, table: &[(u64, &str)]) -> fmt::Result {
    let mut first = true;
    for &(bit, name) in table {
        if bits & bit != 0 {
            if !first {
                w.write_str(", ")?;
            }
            w.write_str(name)?;
            first = false;
        }
    }
    Ok(())
}

fn write_enum<W: Write + ?Sized>(w: &mut W, v: u32, names: &[&str]) -> fmt::Result {
    w.write_str(names.get(v as usize).copied().unwrap_or("Unknown"))
}

const CAPS: &[(u64, &str)] = &[
    (1 << 1, "FI_MSG"),
    (1 << 2, "FI_RMA"),
    (1 << 3, "FI_TAGGED"),
    (1 << 4, "FI_ATOMIC"),
    (1 << 5, "FI_MULTICAST"),
    (1 << 6, "FI_COLLECTIVE"),
    (1 << 8, "FI_READ"),
    (1 << 9, "FI_WRITE"),
    (1 << 10, "FI_RECV"),
    (1 << 11, "FI_SEND"),
    (1 << 12, "FI_REMOTE_READ"),
    (1 << 13, "FI_REMOTE_WRITE"),
    (1 << 16, "FI_MULTI_RECV"),
    (1 << 17, "FI_REMOTE_CQ_DATA"),
    (1 << 20, "FI_TRIGGER"),
    (1 << 21, "FI_FENCE"),
    (1 << 48, "FI_VARIABLE_MSG"),
    (1 << 49, "FI_RMA_PMEM"),
    (1 << 50, "FI_SOURCE_ERR"),
    (1 << 51, "FI_LOCAL_COMM"),
    (1 << 52, "FI_REMOTE_COMM"),
    (1 << 53, "FI_SHARED_AV"),
    (1 << 56, "FI_RMA_EVENT"),
    (1 << 57, "FI_SOURCE"),
    (1 << 58, "FI_NAMED_RX_CTX"),
    (1 << 59, "FI_DIRECTED_RECV"),
    (1 << 47, "FI_HMEM"),
];

const OP_FLAGS: &[(u64, &str)] = &[
    (1 << 5, "FI_MULTICAST"),
    (1 << 16, "FI_MULTI_RECV"),
    (1 << 17, "FI_REMOTE_CQ_DATA"),
    (1 << 18, "FI_MORE"),
    (1 << 19, "FI_PEEK"),
    (1 << 20, "FI_TRIGGER"),
    (1 << 21, "FI_FENCE"),
    (1 << 24, "FI_COMPLETION"),
    (1 << 25, "FI_INJECT"),
    (1 << 26, "FI_INJECT_COMPLETE"),
    (1 << 27, "FI_TRANSMIT_COMPLETE"),
    (1 << 28, "FI_DELIVERY_COMPLETE"),
    (1 << 31, "FI_MATCH_COMPLETE"),
    (1 << 29, "FI_AFFINITY"),
    (1 << 59, "FI_CLAIM"),
    (1 << 58, "FI_DISCARD"),
];

const CQ_EVENT_FLAGS: &[(u64, &str)] = &[
    (1 << 11, "FI_SEND"),
    (1 << 10, "FI_RECV"),
    (1 << 2, "FI_RMA"),
    (1 << 4, "FI_ATOMIC"),
    (1 << 1, "FI_MSG"),
    (1 << 3, "FI_TAGGED"),
    (1 << 8, "FI_READ"),
    (1 << 9, "FI_WRITE"),
    (1 << 12, "FI_REMOTE_READ"),
    (1 << 13, "FI_REMOTE_WRITE"),
    (1 << 17, "FI_REMOTE_CQ_DATA"),
    (1 << 16, "FI_MULTI_RECV"),
    (1 << 18, "FI_MORE"),
    (1 << 59, "FI_CLAIM"),
];

const MODES: &[(u64, &str)] = &[
    (1 << 59, "FI_CONTEXT"),
    (1 << 58, "FI_MSG_PREFIX"),
    (1 << 57, "FI_ASYNC_IOV"),
    (1 << 56, "FI_RX_CQ_DATA"),
    (1 << 55, "FI_LOCAL_MR"),
    (1 << 54, "FI_NOTIFY_FLAGS_ONLY"),
    (1 << 53, "FI_RESTRICTED_COMP"),
    (1 << 52, "FI_CONTEXT2"),
    (1 << 51, "FI_BUFFERED_RECV"),
];

const MSG_ORDER: &[(u64, &str)] = &[
    (1 << 0, "FI_ORDER_RAR"),
    (1 << 1, "FI_ORDER_RAW"),
    (1 << 2, "FI_ORDER_RAS"),
    (1 << 3, "FI_ORDER_WAR"),
    (1 << 4, "FI_ORDER_WAW"),
    (1 << 5, "FI_ORDER_WAS"),
    (1 << 6, "FI_ORDER_SAR"),
    (1 << 7, "FI_ORDER_SAW"),
    (1 << 8, "FI_ORDER_SAS"),
    (1 << 32, "FI_ORDER_RMA_RAR"),
    (1 << 33, "FI_ORDER_RMA_RAW"),
    (1 << 34, "FI_ORDER_RMA_WAR"),
    (1 << 35, "FI_ORDER_RMA_WAW"),
    (1 << 36, "FI_ORDER_ATOMIC_RAR"),
    (1 << 37, "FI_ORDER_ATOMIC_RAW"),
    (1 << 38, "FI_ORDER_ATOMIC_WAR"),
    (1 << 39, "FI_ORDER_ATOMIC_WAW"),
];

const MR_MODES: &[(u64, &str)] = &[
    (1 << 0, "FI_MR_BASIC"),
    (1 << 1, "FI_MR_SCALABLE"),
    (1 << 2, "FI_MR_LOCAL"),
    (1 << 3, "FI_MR_RAW"),
    (1 << 4, "FI_MR_VIRT_ADDR"),
    (1 << 5, "FI_MR_ALLOCATED"),
    (1 << 6, "FI_MR_PROV_KEY"),
    (1 << 7, "FI_MR_MMU_NOTIFY"),
    (1 << 8, "FI_MR_RMA_EVENT"),
    (1 << 9, "FI_MR_ENDPOINT"),
    (1 << 10, "FI_MR_HMEM"),
    (1 << 11, "FI_MR_COLLECTIVE"),
];

const EP_TYPES: &[&str] = &[
    "FI_EP_UNSPEC",
    "FI_EP_MSG",
    "FI_EP_DGRAM",
    "FI_EP_RDM",
    "FI_EP_SOCK_STREAM",
    "FI_EP_SOCK_DGRAM",
];
const THREADING: &[&str] = &[
    "FI_THREAD_UNSPEC",
    "FI_THREAD_SAFE",
    "FI_THREAD_FID",
    "FI_THREAD_DOMAIN",
    "FI_THREAD_COMPLETION",
    "FI_THREAD_ENDPOINT",
];
const PROGRESS: &[&str] = &[
    "FI_PROGRESS_UNSPEC",
    "FI_PROGRESS_AUTO",
    "FI_PROGRESS_MANUAL",
];
const RESOURCE_MGMT: &[&str] = &["FI_RM_UNSPEC", "FI_RM_DISABLED", "FI_RM_ENABLED"];
const AV_TYPES: &[&str] = &["FI_AV_UNSPEC", "FI_AV_MAP", "FI_AV_TABLE"];
const EQ_EVENTS: &[&str] = &[
    "FI_NOTIFY",
    "FI_CONNREQ",
    "FI_CONNECTED",
    "FI_SHUTDOWN",
    "FI_MR_COMPLETE",
    "FI_AV_COMPLETE",
    "FI_JOIN_COMPLETE",
];
const CQ_FORMATS: &[&str] = &[
    "FI_CQ_FORMAT_UNSPEC",
    "FI_CQ_FORMAT_CONTEXT",
    "FI_CQ_FORMAT_MSG",
    "FI_CQ_FORMAT_DATA",
    "FI_CQ_FORMAT_TAGGED",
];
const OP_TYPES: &[&str] = &[
    "FI_OP_RECV",
    "FI_OP_SEND",
    "FI_OP_TRECV",
    "FI_OP_TSEND",
    "FI_OP_READ",
    "FI_OP_WRITE",
    "FI_OP_ATOMIC",
    "FI_OP_FETCH_ATOMIC",
    "FI_OP_COMPARE_ATOMIC",
    "FI_OP_CNTR_SET",
    "FI_OP_CNTR_ADD",
];
const ATOMIC_TYPES: &[&str] = &[
    "FI_INT8",
    "FI_UINT8",
    "FI_INT16",
    "FI_UINT16",
    "FI_INT32",
    "FI_UINT32",
    "FI_INT64",
    "FI_UINT64",
    "FI_FLOAT",
    "FI_DOUBLE",
    "FI_FLOAT_COMPLEX",
    "FI_DOUBLE_COMPLEX",
    "FI_LONG_DOUBLE",
    "FI_LONG_DOUBLE_COMPLEX",
    "FI_INT128",
    "FI_UINT128",
];
const ATOMIC_OPS: &[&str] = &[
    "FI_MIN",
    "FI_MAX",
    "FI_SUM",
    "FI_PROD",
    "FI_LOR",
    "FI_LAND",
    "FI_BOR",
    "FI_BAND",
    "FI_LXOR",
    "FI_BXOR",
    "FI_ATOMIC_READ",
    "FI_ATOMIC_WRITE",
    "FI_CSWAP",
    "FI_CSWAP_NE",
    "FI_CSWAP_LE",
    "FI_CSWAP_LT",
    "FI_CSWAP_GE",
    "FI_CSWAP_GT",
    "FI_MSWAP",
];
const COLLECTIVE_OPS: &[&str] = &[
    "FI_BARRIER",
    "FI_BROADCAST",
    "FI_ALLTOALL",
    "FI_ALLREDUCE",
    "FI_ALLGATHER",
    "FI_REDUCE_SCATTER",
    "FI_REDUCE",
    "FI_SCATTER",
    "FI_GATHER",
];
const HMEM_IFACES: &[&str] = &[
    "FI_HMEM_SYSTEM",
    "FI_HMEM_CUDA",
    "FI_HMEM_ROCR",
    "FI_HMEM_ZE",
    "FI_HMEM_NEURON",
    "FI_HMEM_SYNAPSEAI",
];
const LOG_LEVELS: &[&str] = &["warn", "trace", "info", "debug"];
const LOG_SUBSYS: &[&str] = &[
    "core", "fabric", "domain", "ep_ctrl", "ep_data", "av", "cq", "eq", "mr", "cntr",
];

/// FI_TYPE_CAPS (the bits `fi_tostr` 1.17 names; FI_XPU, FI_AV_USER_ID and friends are
/// not printed by libfabric either).
pub fn write_caps<W: Write + ?Sized>(w: &mut W, caps: Flags) -> fmt::Result {
    write_flags(w, caps.bits(), CAPS)
}

/// FI_TYPE_OP_FLAGS.
pub fn write_op_flags<W: Write + ?Sized>(w: &mut W, flags: Flags) -> fmt::Result {
    write_flags(w, flags.bits(), OP_FLAGS)
}

/// FI_TYPE_CQ_EVENT_FLAGS.
pub fn write_cq_event_flags<W: Write + ?Sized>(w: &mut W, flags: Flags) -> fmt::Result {
    write_flags(w, flags.bits(), CQ_EVENT_FLAGS)
}

/// FI_TYPE_MODE.
pub fn write_mode<W: Write + ?Sized>(w: &mut W, mode: Mode) -> fmt::Result {
    write_flags(w, mode.bits(), MODES)
}

/// FI_TYPE_MSG_ORDER.
pub fn write_msg_order<W: Write + ?Sized>(w: &mut W, order: Order) -> fmt::Result {
    write_flags(w, order.bits(), MSG_ORDER)
}

/// `comp_order` as the attribute printers write it: NONE or STRICT (nothing for a
/// partial set), then FI_ORDER_DATA.
pub fn write_comp_order<W: Write + ?Sized>(w: &mut W, order: CompOrder) -> fmt::Result {
    let strict = CompOrder::STRICT.bits();
    let mut list: heapless::Vec<&str, 2> = heapless::Vec::new();
    match order.bits() & strict {
        0 => list.push("FI_ORDER_NONE").ok(),
        s if s == strict => list.push("FI_ORDER_STRICT").ok(),
        _ => None,
    };
    if order.contains(CompOrder::DATA) {
        let _ = list.push("FI_ORDER_DATA");
    }
    for (i, s) in list.iter().enumerate() {
        if i > 0 {
            w.write_str(", ")?;
        }
        w.write_str(s)?;
    }
    Ok(())
}

/// FI_TYPE_MR_MODE.
pub fn write_mr_mode<W: Write + ?Sized>(w: &mut W, mode: MrMode) -> fmt::Result {
    write_flags(w, u64::from(mode.bits()), MR_MODES)
}

/// FI_TYPE_EP_TYPE.
pub fn write_ep_type<W: Write + ?Sized>(w: &mut W, v: u32) -> fmt::Result {
    write_enum(w, v, EP_TYPES)
}

/// FI_TYPE_THREADING.
pub fn write_threading<W: Write + ?Sized>(w: &mut W, v: u32) -> fmt::Result {
    write_enum(w, v, THREADING)
}

/// FI_TYPE_PROGRESS.
pub fn write_progress<W: Write + ?Sized>(w: &mut W, v: u32) -> fmt::Result {
    write_enum(w, v, PROGRESS)
}

/// `enum fi_resource_mgmt` (printed inside domain attributes).
pub fn write_resource_mgmt<W: Write + ?Sized>(w: &mut W, v: u32) -> fmt::Result {
    write_enum(w, v, RESOURCE_MGMT)
}

/// FI_TYPE_AV_TYPE.
pub fn write_av_type<W: Write + ?Sized>(w: &mut W, v: u32) -> fmt::Result {
    write_enum(w, v, AV_TYPES)
}

/// FI_TYPE_ADDR_FORMAT.
pub fn write_addr_format<W: Write + ?Sized>(w: &mut W, f: AddrFormat) -> fmt::Result {
    match f.c_name() {
        Some(n) => w.write_str(n),
        None if f.0 & FI_PROV_SPECIFIC != 0 => w.write_str("Provider specific"),
        None => w.write_str("Unknown"),
    }
}

/// FI_TYPE_PROTOCOL.
pub fn write_protocol<W: Write + ?Sized>(w: &mut W, p: Protocol) -> fmt::Result {
    match p.c_name() {
        Some(n) => w.write_str(n),
        None if p.0 & FI_PROV_SPECIFIC != 0 => w.write_str("Provider specific"),
        None => w.write_str("Unknown"),
    }
}

/// FI_TYPE_VERSION: the API version this core implements.
pub fn write_version<W: Write + ?Sized>(w: &mut W) -> fmt::Result {
    w.write_str("1.17.0")
}

fn u64_at(b: &[u8], i: usize) -> Option<u64> {
    Some(u64::from_le_bytes(
        b.get(i * 8..i * 8 + 8)?.try_into().ok()?,
    ))
}

/// An address as `fi_tostr` prints `src_addr`/`dest_addr` (libfabric's `ofi_straddr`):
/// `(null)` for none, nothing for FI_FORMAT_UNSPEC and for formats or bytes it cannot
/// render. FI_SOCKADDR_IB, FI_ADDR_BGQ/MLX (pointers in C), FI_ADDR_IB_UD and
/// FI_ADDR_EFA print nothing here.
pub fn write_addr<W: Write + ?Sized>(
    w: &mut W,
    format: AddrFormat,
    addr: Option<&[u8]>,
) -> fmt::Result {
    let Some(a) = addr else {
        return w.write_str("(null)");
    };
    let family = a.get(..2).map(|f| u16::from_ne_bytes([f[0], f[1]]));
    let v4 = |w: &mut W| -> fmt::Result {
        if a.len() >= 8 {
            let ip = Ipv4Addr::new(a[4], a[5], a[6], a[7]);
            write!(
                w,
                "fi_sockaddr_in://{}:{}",
                ip,
                u16::from_be_bytes([a[2], a[3]])
            )?;
        }
        Ok(())
    };
    let v6 = |w: &mut W| -> fmt::Result {
        if let Some(b) = a.get(8..24) {
            let ip = Ipv6Addr::from(<[u8; 16]>::try_from(b).unwrap_or([0; 16]));
            write!(
                w,
                "fi_sockaddr_in6://[{}]:{}",
                ip,
                u16::from_be_bytes([a[2], a[3]])
            )?;
        }
        Ok(())
    };
    const AF_INET: Option<u16> = Some(2);
    const AF_INET6: Option<u16> = Some(10);
    match format {
        AddrFormat::SOCKADDR if family == AF_INET => v4(w),
        AddrFormat::SOCKADDR if family == AF_INET6 => v6(w),
        AddrFormat::SOCKADDR_IN if family == AF_INET => v4(w),
        AddrFormat::SOCKADDR_IN6 if family == AF_INET6 => v6(w),
        AddrFormat::STR => {
            let end = a.iter().position(|&b| b == 0).unwrap_or(a.len());
            match core::str::from_utf8(&a[..end]) {
                Ok(s) => w.write_str(s),
                Err(e) => w.write_str(core::str::from_utf8(&a[..e.valid_up_to()]).unwrap_or("")),
            }
        }
        AddrFormat::PSMX | AddrFormat::GNI => match u64_at(a, 0) {
            Some(v) => {
                let scheme = if format == AddrFormat::PSMX {
                    "fi_addr_psmx"
                } else {
                    "fi_addr_gni"
                };
                write!(w, "{scheme}://{v:x}")
            }
            None => Ok(()),
        },
        AddrFormat::PSMX2 => match (u64_at(a, 0), u64_at(a, 1)) {
            (Some(x), Some(y)) => write!(w, "fi_addr_psmx2://{x:x}:{y:x}"),
            _ => Ok(()),
        },
        AddrFormat::PSMX3 => match (u64_at(a, 0), u64_at(a, 1), u64_at(a, 2), u64_at(a, 3)) {
            (Some(x), Some(y), Some(z), Some(t)) => {
                write!(w, "fi_addr_psmx3://{x:x}:{y:x}:{z:x}:{t:x}")
            }
            _ => Ok(()),
        },
        AddrFormat::OPX => match u64_at(a, 0) {
            Some(v) => write!(w, "fi_addr_opx://{v:016x}"),
            None => Ok(()),
        },
        AddrFormat::CXI => match a.get(..4) {
            Some(b) => write!(
                w,
                "fi_addr_cxi://0x{:08x}",
                u32::from_le_bytes([b[0], b[1], b[2], b[3]])
            ),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

fn name_or_null(s: &str) -> &str {
    if s.is_empty() { "(null)" } else { s }
}

/// Writes `{prefix}    {key}: [ list ]\n`.
fn list_line<W: Write + ?Sized>(
    w: &mut W,
    prefix: &str,
    key: &str,
    body: impl FnOnce(&mut W) -> fmt::Result,
) -> fmt::Result {
    write!(w, "{prefix}    {key}: [ ")?;
    body(w)?;
    w.write_str(" ]\n")
}

/// FI_TYPE_TX_ATTR (`prefix` indents nested printing, "" at top level).
pub fn write_tx_attr<W: Write + ?Sized>(w: &mut W, a: &TxAttr, prefix: &str) -> fmt::Result {
    writeln!(w, "{prefix}fi_tx_attr:")?;
    list_line(w, prefix, "caps", |w| write_caps(w, a.caps))?;
    list_line(w, prefix, "mode", |w| write_mode(w, a.mode))?;
    list_line(w, prefix, "op_flags", |w| write_op_flags(w, a.op_flags))?;
    list_line(w, prefix, "msg_order", |w| write_msg_order(w, a.msg_order))?;
    list_line(w, prefix, "comp_order", |w| {
        write_comp_order(w, a.comp_order)
    })?;
    writeln!(w, "{prefix}    inject_size: {}", a.inject_size)?;
    writeln!(w, "{prefix}    size: {}", a.size)?;
    writeln!(w, "{prefix}    iov_limit: {}", a.iov_limit)?;
    writeln!(w, "{prefix}    rma_iov_limit: {}", a.rma_iov_limit)?;
    writeln!(w, "{prefix}    tclass: 0x{:x}", a.tclass.0)
}

/// FI_TYPE_RX_ATTR.
pub fn write_rx_attr<W: Write + ?Sized>(w: &mut W, a: &RxAttr, prefix: &str) -> fmt::Result {
    writeln!(w, "{prefix}fi_rx_attr:")?;
    list_line(w, prefix, "caps", |w| write_caps(w, a.caps))?;
    list_line(w, prefix, "mode", |w| write_mode(w, a.mode))?;
    list_line(w, prefix, "op_flags", |w| write_op_flags(w, a.op_flags))?;
    list_line(w, prefix, "msg_order", |w| write_msg_order(w, a.msg_order))?;
    list_line(w, prefix, "comp_order", |w| {
        write_comp_order(w, a.comp_order)
    })?;
    writeln!(
        w,
        "{prefix}    total_buffered_recv: {}",
        a.total_buffered_recv
    )?;
    writeln!(w, "{prefix}    size: {}", a.size)?;
    writeln!(w, "{prefix}    iov_limit: {}", a.iov_limit)
}

/// FI_TYPE_EP_ATTR.
pub fn write_ep_attr<W: Write + ?Sized>(w: &mut W, a: &EpAttr, prefix: &str) -> fmt::Result {
    write!(w, "{prefix}fi_ep_attr:\n{prefix}    type: ")?;
    write_ep_type(w, a.ep_type.raw())?;
    write!(w, "\n{prefix}    protocol: ")?;
    write_protocol(w, a.protocol)?;
    w.write_str("\n")?;
    writeln!(w, "{prefix}    protocol_version: {}", a.protocol_version)?;
    writeln!(w, "{prefix}    max_msg_size: {}", a.max_msg_size)?;
    writeln!(w, "{prefix}    msg_prefix_size: {}", a.msg_prefix_size)?;
    writeln!(
        w,
        "{prefix}    max_order_raw_size: {}",
        a.max_order_raw_size
    )?;
    writeln!(
        w,
        "{prefix}    max_order_war_size: {}",
        a.max_order_war_size
    )?;
    writeln!(
        w,
        "{prefix}    max_order_waw_size: {}",
        a.max_order_waw_size
    )?;
    writeln!(w, "{prefix}    mem_tag_format: 0x{:016x}", a.mem_tag_format)?;
    writeln!(w, "{prefix}    tx_ctx_cnt: {}", a.tx_ctx_cnt)?;
    writeln!(w, "{prefix}    rx_ctx_cnt: {}", a.rx_ctx_cnt)?;
    writeln!(w, "{prefix}    auth_key_size: {}", a.auth_key.len())
}

/// FI_TYPE_DOMAIN_ATTR.
pub fn write_domain_attr<W: Write + ?Sized>(
    w: &mut W,
    a: &DomainAttr,
    prefix: &str,
) -> fmt::Result {
    writeln!(w, "{prefix}fi_domain_attr:")?;
    writeln!(w, "{prefix}    domain: 0x0")?;
    writeln!(w, "{prefix}    name: {}", name_or_null(&a.name))?;
    let enums: [(&str, u32, &[&str]); 5] = [
        ("threading", a.threading.raw(), THREADING),
        ("control_progress", a.control_progress.raw(), PROGRESS),
        ("data_progress", a.data_progress.raw(), PROGRESS),
        ("resource_mgmt", a.resource_mgmt.raw(), RESOURCE_MGMT),
        ("av_type", a.av_type.raw(), AV_TYPES),
    ];
    for (key, v, names) in enums {
        write!(w, "{prefix}    {key}: ")?;
        write_enum(w, v, names)?;
        w.write_str("\n")?;
    }
    list_line(w, prefix, "mr_mode", |w| write_mr_mode(w, a.mr_mode))?;
    let counts = [
        ("mr_key_size", a.mr_key_size),
        ("cq_data_size", a.cq_data_size),
        ("cq_cnt", a.cq_cnt),
        ("ep_cnt", a.ep_cnt),
        ("tx_ctx_cnt", a.tx_ctx_cnt),
        ("rx_ctx_cnt", a.rx_ctx_cnt),
        ("max_ep_tx_ctx", a.max_ep_tx_ctx),
        ("max_ep_rx_ctx", a.max_ep_rx_ctx),
        ("max_ep_stx_ctx", a.max_ep_stx_ctx),
        ("max_ep_srx_ctx", a.max_ep_srx_ctx),
        ("cntr_cnt", a.cntr_cnt),
        ("mr_iov_limit", a.mr_iov_limit),
    ];
    for (key, v) in counts {
        writeln!(w, "{prefix}    {key}: {v}")?;
    }
    list_line(w, prefix, "caps", |w| write_caps(w, a.caps))?;
    list_line(w, prefix, "mode", |w| write_mode(w, a.mode))?;
    writeln!(w, "{prefix}    auth_key_size: {}", a.auth_key.len())?;
    writeln!(w, "{prefix}    max_err_data: {}", a.max_err_data)?;
    writeln!(w, "{prefix}    mr_cnt: {}", a.mr_cnt)?;
    writeln!(w, "{prefix}    tclass: 0x{:x}", a.tclass.0)
}

/// FI_TYPE_FABRIC_ATTR.
pub fn write_fabric_attr<W: Write + ?Sized>(
    w: &mut W,
    a: &FabricAttr,
    prefix: &str,
) -> fmt::Result {
    writeln!(w, "{prefix}fi_fabric_attr:")?;
    writeln!(w, "{prefix}    name: {}", name_or_null(&a.name))?;
    writeln!(w, "{prefix}    prov_name: {}", name_or_null(&a.prov_name))?;
    writeln!(
        w,
        "{prefix}    prov_version: {}.{}",
        fi_major(a.prov_version),
        fi_minor(a.prov_version)
    )?;
    writeln!(
        w,
        "{prefix}    api_version: {}.{}",
        fi_major(a.api_version),
        fi_minor(a.api_version)
    )
}

/// FI_TYPE_INFO: a whole `fi_info`, as `fi_info -v` prints each entry.
pub fn write_info<W: Write + ?Sized>(w: &mut W, i: &Info) -> fmt::Result {
    w.write_str("fi_info:\n")?;
    list_line(w, "", "caps", |w| write_caps(w, i.caps))?;
    list_line(w, "", "mode", |w| write_mode(w, i.mode))?;
    w.write_str("    addr_format: ")?;
    write_addr_format(w, i.addr_format)?;
    w.write_str("\n")?;
    writeln!(
        w,
        "    src_addrlen: {}",
        i.src_addr.as_ref().map_or(0, |a| a.len())
    )?;
    writeln!(
        w,
        "    dest_addrlen: {}",
        i.dest_addr.as_ref().map_or(0, |a| a.len())
    )?;
    w.write_str("    src_addr: ")?;
    write_addr(w, i.addr_format, i.src_addr.as_deref())?;
    w.write_str("\n    dest_addr: ")?;
    write_addr(w, i.addr_format, i.dest_addr.as_deref())?;
    w.write_str("\n    handle: (nil)\n")?;
    write_tx_attr(w, &i.tx_attr, "    ")?;
    write_rx_attr(w, &i.rx_attr, "    ")?;
    write_ep_attr(w, &i.ep_attr, "    ")?;
    write_domain_attr(w, &i.domain_attr, "    ")?;
    write_fabric_attr(w, &i.fabric_attr, "    ")?;
    w.write_str("    nic: (nil)\n")
}

/// One entry of `fi_info`'s default (short) listing.
pub fn write_short<W: Write + ?Sized>(w: &mut W, i: &Info) -> fmt::Result {
    let f = &i.fabric_attr;
    writeln!(w, "provider: {}", name_or_null(&f.prov_name))?;
    writeln!(w, "    fabric: {}", name_or_null(&f.name))?;
    writeln!(w, "    domain: {}", name_or_null(&i.domain_attr.name))?;
    writeln!(
        w,
        "    version: {}.{}",
        fi_major(f.prov_version),
        fi_minor(f.prov_version)
    )?;
    w.write_str("    type: ")?;
    write_ep_type(w, i.ep_attr.ep_type.raw())?;
    w.write_str("\n    protocol: ")?;
    write_protocol(w, i.ep_attr.protocol)?;
    w.write_str("\n")
}

/// One entry of `fi_info -v`: a `---` line, then the FI_TYPE_INFO text.
pub fn write_verbose<W: Write + ?Sized>(w: &mut W, i: &Info) -> fmt::Result {
    w.write_str("---\n")?;
    write_info(w, i)
}

#[cfg(test)]
mod tests;
