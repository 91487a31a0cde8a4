//! Active endpoints (fi_endpoint(3)): state, bindings, options and queues.
//!
//! An endpoint lives in its domain's pool; every call on it goes through the
//! [`Domain`](crate::domain::Domain), which owns the CQs, counters and AVs it binds.
//! This module holds what belongs to the endpoint alone: the enable state machine, the
//! one-CQ-and-one-counter-per-operation-type binding rules, default operation flags,
//! options, and the engine that moves its data: [`Dgram`] or
//! [`Rdm`].

/// Shared receive contexts (fi_srx_context): a child of the endpoint module, whose
/// endpoints they serve.
#[cfg(feature = "shared-ctx")]
pub mod srx;
/// Shared transmit contexts (fi_stx_context).
#[cfg(feature = "shared-ctx")]
pub mod stx;

pub use crate::bind::{CntrBindings, CqBinding};
use crate::dgram::Dgram;
pub use crate::dgram::{EpStats, RecvOp, RecvQueue, TxOp, TxQueue};
use crate::errno::{Errno, Result};
use crate::fid::{AvHandle, CntrHandle, CqHandle};
use crate::flags::Flags;
use crate::info::EpType;
pub use crate::iov::{IOV_LIMIT, IovList};
use crate::pool::Handle;
use crate::rdm::Rdm;
use crate::storage::Storage;

/// `FI_OPT_ENDPOINT`, the only option level.
pub const FI_OPT_ENDPOINT: i32 = 0;

/// Endpoint option names (`enum` in `<rdma/fi_endpoint.h>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
#[non_exhaustive]
pub enum EpOpt {
    /// FI_OPT_MIN_MULTI_RECV (size_t).
    MinMultiRecv = 0,
    /// FI_OPT_CM_DATA_SIZE (size_t, read-only).
    CmDataSize = 1,
    /// FI_OPT_BUFFERED_MIN (size_t).
    BufferedMin = 2,
    /// FI_OPT_BUFFERED_LIMIT (size_t).
    BufferedLimit = 3,
    /// FI_OPT_SEND_BUF_SIZE.
    SendBufSize = 4,
    /// FI_OPT_RECV_BUF_SIZE.
    RecvBufSize = 5,
    /// FI_OPT_TX_SIZE.
    TxSize = 6,
    /// FI_OPT_RX_SIZE.
    RxSize = 7,
    /// FI_OPT_FI_HMEM_P2P (int).
    HmemP2p = 8,
    /// FI_OPT_XPU_TRIGGER.
    XpuTrigger = 9,
}

impl EpOpt {
    /// The option for a C `optname`; -FI_ENOPROTOOPT for unknown names.
    pub fn from_raw(raw: i32) -> Result<EpOpt> {
        Ok(match raw {
            0 => EpOpt::MinMultiRecv,
            1 => EpOpt::CmDataSize,
            2 => EpOpt::BufferedMin,
            3 => EpOpt::BufferedLimit,
            4 => EpOpt::SendBufSize,
            5 => EpOpt::RecvBufSize,
            6 => EpOpt::TxSize,
            7 => EpOpt::RxSize,
            8 => EpOpt::HmemP2p,
            9 => EpOpt::XpuTrigger,
            _ => return Err(Errno::ENOPROTOOPT),
        })
    }
}

/// Where an endpoint is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpState {
    /// Opened; bindings may be made, no data transfer yet.
    Disabled,
    /// `fi_enable` succeeded: data transfer allowed, bindings frozen.
    Enabled,
}

/// An active endpoint.
pub struct Endpoint<S: Storage> {
    pub(crate) ep_type: EpType,
    pub(crate) caps: Flags,
    pub(crate) context: u64,
    pub(crate) id: u16,
    pub(crate) state: EpState,
    pub(crate) tx_flags: Flags,
    pub(crate) rx_flags: Flags,
    pub(crate) tx_cq: Option<CqBinding<CqHandle<S>>>,
    pub(crate) rx_cq: Option<CqBinding<CqHandle<S>>>,
    pub(crate) cntrs: CntrBindings<CntrHandle>,
    pub(crate) av: Option<AvHandle<S>>,
    pub(crate) eq: Option<u64>,
    pub(crate) min_multi_recv: usize,
    pub(crate) max_msg_size: usize,
    pub(crate) inject_size: usize,
    pub(crate) tx_iov_limit: usize,
    pub(crate) rx_iov_limit: usize,
    pub(crate) aliases: u32,
    /// On engine 0 of a scalable endpoint: its contexts and their routing table.
    pub(crate) sep: Option<crate::sep::Contexts>,
    /// A context engine of a scalable endpoint (closed only with it).
    pub(crate) in_sep: bool,
    /// The data-plane queue whose passes progress this endpoint (0 but for the
    /// contexts of a scalable endpoint on a domain with several queues).
    pub(crate) queue: u8,
    /// Opened with `tx_ctx_cnt` / `rx_ctx_cnt` = FI_SHARED_CONTEXT: enabling needs a
    /// shared transmit / receive context bound.
    #[cfg(feature = "shared-ctx")]
    pub(crate) shared_tx: bool,
    #[cfg(feature = "shared-ctx")]
    pub(crate) shared_rx: bool,
    /// The shared transmit context bound.
    #[cfg(feature = "shared-ctx")]
    pub(crate) stx: Option<crate::pool::Handle<crate::ep::stx::Stx<S>>>,
    /// The shared receive context bound: receives posted here go to it.
    #[cfg(feature = "shared-ctx")]
    pub(crate) srx: Option<crate::pool::Handle<crate::ep::srx::Srx<S>>>,
    /// What moves the endpoint's data: one engine per endpoint type.
    pub(crate) engine: Engine<S>,
}

/// The engine of an endpoint, chosen by its type at `fi_endpoint`. The data path
/// matches on it once per operation or packet (no `dyn`). A connected FI_EP_MSG
/// endpoint runs `Rdm` for its one peer (its connection is in `domain/cm.rs`).
// No heap to box the large variant into; a pool slot held both engines' state before.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Engine<S: Storage> {
    /// FI_EP_DGRAM: queues and datagrams, no reliability.
    Dgram(Dgram<S>),
    /// FI_EP_RDM: the reliability engine and its sessions.
    Rdm(Rdm<S>),
}

/// Default FI_OPT_MIN_MULTI_RECV.
pub const DEFAULT_MIN_MULTI_RECV: usize = 64;

/// An endpoint in domain storage `S` (the name the domain's accessors use).
pub type EpObj<S> = Endpoint<S>;
/// Handle of an endpoint.
pub type EpHandle<S> = Handle<Endpoint<S>>;

impl<S: Storage> Endpoint<S> {
    /// The endpoint type.
    pub fn ep_type(&self) -> EpType {
        self.ep_type
    }

    /// The capabilities granted.
    pub fn caps(&self) -> Flags {
        self.caps
    }

    /// The application's context of the endpoint.
    pub fn context(&self) -> u64 {
        self.context
    }

    /// The endpoint id (the third part of its address).
    pub fn id(&self) -> u16 {
        self.id
    }

    /// Enabled or not.
    pub fn state(&self) -> EpState {
        self.state
    }

    /// What the endpoint refused or delivered (DGRAM; an RDM endpoint's engine counts in
    /// its own [`RdmStats`](crate::rdm::RdmStats), and these stay zero).
    pub fn stats(&self) -> &EpStats {
        const NONE: &EpStats = &EpStats::NONE;
        match &self.engine {
            Engine::Dgram(d) => d.stats(),
            Engine::Rdm(_) => NONE,
        }
    }

    /// An RDM endpoint's session failures that failed no operation (see
    /// [`crate::rdm::EpFault`]), taken for its EQ; `None` for DGRAM endpoints.
    pub fn take_fault(&mut self) -> Option<crate::rdm::EpFault> {
        match &mut self.engine {
            Engine::Rdm(r) => r.take_fault(),
            Engine::Dgram(_) => None,
        }
    }

    /// Whether an RDM endpoint recorded a failure for its EQ since the last call
    /// ([`crate::rdm::Rdm::take_fault_wakeup`]); `false` for DGRAM endpoints.
    pub fn take_fault_wakeup(&mut self) -> bool {
        match &mut self.engine {
            Engine::Rdm(r) => r.take_fault_wakeup(),
            Engine::Dgram(_) => false,
        }
    }

    /// The bound event queue's token, if any.
    pub fn eq(&self) -> Option<u64> {
        self.eq
    }

    /// The reliability engine of an FI_EP_RDM endpoint (statistics, peer states).
    pub fn rdm(&self) -> Option<&Rdm<S>> {
        match &self.engine {
            Engine::Rdm(r) => Some(r),
            Engine::Dgram(_) => None,
        }
    }

    /// Whether the endpoint runs the reliability engine (FI_EP_RDM).
    pub(crate) fn is_rdm(&self) -> bool {
        matches!(self.engine, Engine::Rdm(_))
    }

    /// `fi_tx_size_left`: operations that can be posted before -FI_EAGAIN.
    pub fn tx_size_left(&self) -> usize {
        match &self.engine {
            Engine::Rdm(r) => r.tx_capacity() - r.tx_in_use(),
            Engine::Dgram(d) => d.tx.space(),
        }
    }

    /// Transmit operations not finished yet.
    #[cfg(feature = "shared-ctx")]
    pub(crate) fn tx_in_use(&self) -> usize {
        match &self.engine {
            Engine::Rdm(r) => r.tx_in_use(),
            Engine::Dgram(d) => d.tx.len(),
        }
    }

    /// `fi_rx_size_left` (RDM: of the untagged queue; tagged has the same capacity).
    pub fn rx_size_left(&self) -> usize {
        match &self.engine {
            Engine::Rdm(r) => r.rx_capacity().saturating_sub(r.rx_in_use()),
            Engine::Dgram(d) => d.rx.capacity() - d.rx.len(),
        }
    }

    fn tx_capacity(&self) -> usize {
        match &self.engine {
            Engine::Rdm(r) => r.tx_capacity(),
            Engine::Dgram(d) => d.tx.capacity(),
        }
    }

    fn rx_capacity(&self) -> usize {
        match &self.engine {
            Engine::Rdm(r) => r.rx_capacity(),
            Engine::Dgram(d) => d.rx.capacity(),
        }
    }

    /// FI_GETOPSFLAG: `flags` names FI_TRANSMIT or FI_RECV (exactly one), the default
    /// operation flags of that side are returned. -FI_EINVAL otherwise.
    pub fn getopsflag(&self, flags: Flags) -> Result<Flags> {
        match side(flags)? {
            Side::Tx => Ok(self.tx_flags),
            Side::Rx => Ok(self.rx_flags),
        }
    }

    /// FI_SETOPSFLAG: `flags` names FI_TRANSMIT or FI_RECV (exactly one) plus the new
    /// default operation flags of that side. Flags the side cannot use are -FI_EINVAL.
    pub fn setopsflag(&mut self, flags: Flags) -> Result<()> {
        let s = side(flags)?;
        let ops = flags.difference(Flags::TRANSMIT | Flags::RECV);
        match s {
            Side::Tx => {
                if !tx_defaults_ok(self.ep_type, ops) {
                    return Err(Errno::EINVAL);
                }
                self.tx_flags = ops;
            }
            Side::Rx => {
                if !RX_OP_FLAGS.contains(ops)
                    || (ops.contains(Flags::MULTI_RECV) && !self.caps.contains(Flags::MULTI_RECV))
                {
                    return Err(Errno::EINVAL);
                }
                self.rx_flags = ops;
            }
        }
        Ok(())
    }

    /// `fi_getopt` at level FI_OPT_ENDPOINT. Unknown levels are -FI_ENOPROTOOPT; options
    /// this endpoint type does not have are -FI_ENOPROTOOPT too.
    pub fn getopt(&self, level: i32, opt: EpOpt) -> Result<usize> {
        if level != FI_OPT_ENDPOINT {
            return Err(Errno::ENOPROTOOPT);
        }
        match opt {
            EpOpt::MinMultiRecv => Ok(self.min_multi_recv),
            // Connectionless endpoints carry no connection-management data.
            EpOpt::CmDataSize if self.ep_type == EpType::Msg => Ok(crate::cm::CM_DATA_MAX),
            EpOpt::CmDataSize => Ok(0),
            EpOpt::TxSize => Ok(self.tx_capacity()),
            EpOpt::RxSize => Ok(self.rx_capacity()),
            _ => Err(Errno::ENOPROTOOPT),
        }
    }

    /// `fi_setopt` at level FI_OPT_ENDPOINT. FI_OPT_CM_DATA_SIZE is read-only
    /// (-FI_EOPNOTSUPP); FI_OPT_MIN_MULTI_RECV affects receives posted afterwards.
    pub fn setopt(&mut self, level: i32, opt: EpOpt, value: usize) -> Result<()> {
        if level != FI_OPT_ENDPOINT {
            return Err(Errno::ENOPROTOOPT);
        }
        match opt {
            EpOpt::MinMultiRecv => {
                self.min_multi_recv = value;
                Ok(())
            }
            EpOpt::CmDataSize | EpOpt::TxSize | EpOpt::RxSize => Err(Errno::EOPNOTSUPP),
            _ => Err(Errno::ENOPROTOOPT),
        }
    }

    /// `fi_ep_alias`: `flags` names FI_TRANSMIT or FI_RECV (exactly one) plus the
    /// operation flags that side of the alias uses; an alias differs from its endpoint
    /// only in these defaults. Returns the alias's (transmit, receive) default flags; the
    /// caller posts through the endpoint with them. The endpoint cannot be closed while
    /// aliases exist (-FI_EBUSY); release each with [`Endpoint::alias_close`].
    pub fn alias(&mut self, flags: Flags) -> Result<(Flags, Flags)> {
        let ops = flags.difference(Flags::TRANSMIT | Flags::RECV);
        let out = match side(flags)? {
            Side::Tx if tx_defaults_ok(self.ep_type, ops) => (ops, self.rx_flags),
            Side::Rx if RX_OP_FLAGS.contains(ops) => (self.tx_flags, ops),
            _ => return Err(Errno::EINVAL),
        };
        self.aliases += 1;
        Ok(out)
    }

    /// Closes one alias made by [`Endpoint::alias`].
    pub fn alias_close(&mut self) -> Result<()> {
        self.aliases = self.aliases.checked_sub(1).ok_or(Errno::EINVAL)?;
        Ok(())
    }

    pub(crate) fn require_enabled(&self) -> Result<()> {
        match self.state {
            EpState::Enabled => Ok(()),
            EpState::Disabled => Err(Errno::EOPBADSTATE),
        }
    }
}

/// Operation flags a transmit may carry as an endpoint's defaults (FI_SETOPSFLAG,
/// fi_ep_alias). Per endpoint type, [`unsupported_tx_flags`] takes some away.
pub const TX_OP_FLAGS: Flags = Flags::INJECT
    .union(Flags::COMPLETION)
    .union(Flags::INJECT_COMPLETE)
    .union(Flags::TRANSMIT_COMPLETE)
    .union(Flags::DELIVERY_COMPLETE)
    .union(Flags::MORE)
    .union(Flags::REMOTE_CQ_DATA);

/// Transmit flags an endpoint of type `t` cannot honour: FI_FENCE (the FI_FENCE
/// capability is not offered), and the completion levels it cannot give:
/// FI_MATCH_COMPLETE (a delivered message may wait unmatched at the target),
/// FI_COMMIT_COMPLETE (no memory here is persistent) and, on a DGRAM endpoint,
/// FI_DELIVERY_COMPLETE (it applies to reliable endpoints only). fi_cq(3) lets a
/// provider reject a level it cannot give or upgrade it; these have no stronger level
/// to become, so a default carrying one is -FI_EINVAL and a transmit -FI_EBADFLAGS
/// rather than completing sooner than asked.
pub const fn unsupported_tx_flags(t: EpType) -> Flags {
    let never = Flags::FENCE
        .union(Flags::MATCH_COMPLETE)
        .union(Flags::COMMIT_COMPLETE);
    match t {
        EpType::Dgram => never.union(Flags::DELIVERY_COMPLETE),
        _ => never,
    }
}

/// Whether `ops` may be the default transmit flags of an endpoint of type `t`
/// (FI_SETOPSFLAG, fi_ep_alias).
pub const fn tx_defaults_ok(t: EpType, ops: Flags) -> bool {
    TX_OP_FLAGS.contains(ops) && !ops.intersects(unsupported_tx_flags(t))
}

/// The capabilities that direct a tagged receive (FI_DIRECTED_RECV and API 2.0's two).
const TAGGED_DIRECTED: Flags = Flags::DIRECTED_RECV
    .union(Flags::TAGGED_DIRECTED_RECV)
    .union(Flags::EXACT_DIRECTED_RECV);
/// FI_EXACT_DIRECTED_RECV alone of these directs message receives too.
const EXACT_OR_TAGGED: Flags = Flags::EXACT_DIRECTED_RECV.union(Flags::TAGGED_DIRECTED_RECV);

/// Whether a receive (`tagged` or not, with `flags`) posted at an endpoint of type `t`
/// with `caps` filters on its source address. Without FI_DIRECTED_RECV the address is
/// ignored (fi_msg(3)); so is it by a claim, which names its message by the context of
/// the peek that claimed it (fi_tagged(3); Open MPI's MPI_Mrecv passes address 0), and
/// by a connected endpoint, which has one peer. API 2.0 (fi_getinfo(3)):
/// FI_TAGGED_DIRECTED_RECV directs tagged receives alone; FI_EXACT_DIRECTED_RECV
/// directs every receive by itself, and with FI_TAGGED_DIRECTED_RECV the tagged ones.
pub(crate) fn recv_directed(caps: Flags, t: EpType, tagged: bool, flags: Flags) -> bool {
    let claim = flags.contains(Flags::CLAIM) && !flags.contains(Flags::PEEK);
    !claim
        && t != EpType::Msg
        && if tagged {
            caps.intersects(TAGGED_DIRECTED)
        } else {
            caps.contains(Flags::DIRECTED_RECV)
                || caps.intersection(EXACT_OR_TAGGED) == Flags::EXACT_DIRECTED_RECV
        }
}

/// The source a receive posted with `addr` filters on (see [`recv_directed`]):
/// FI_ADDR_UNSPEC when it is not directed, else the entry of the endpoint's AV (`av`,
/// looked up only then) without its receive-context bits; -FI_EINVAL for an address
/// the AV does not have (or no AV).
pub(crate) fn recv_source<'a, S: Storage + 'a>(
    av: impl FnOnce() -> Option<&'a crate::fid::AvObj<S>>,
    caps: Flags,
    t: EpType,
    tagged: bool,
    addr: crate::flags::FiAddr,
    flags: Flags,
) -> Result<crate::flags::FiAddr> {
    if addr == crate::flags::FI_ADDR_UNSPEC || !recv_directed(caps, t, tagged, flags) {
        return Ok(crate::flags::FI_ADDR_UNSPEC);
    }
    let av = av().ok_or(Errno::EINVAL)?;
    av.resolve(addr).map_err(|_| Errno::EINVAL)?;
    Ok(av.split_rx(addr).0)
}

/// Operation flags a receive may carry.
pub const RX_OP_FLAGS: Flags = Flags::COMPLETION
    .union(Flags::MULTI_RECV)
    .union(Flags::MORE)
    .union(Flags::PEEK)
    .union(Flags::CLAIM)
    .union(Flags::DISCARD);

enum Side {
    Tx,
    Rx,
}

fn side(flags: Flags) -> Result<Side> {
    match (flags.contains(Flags::TRANSMIT), flags.contains(Flags::RECV)) {
        (true, false) => Ok(Side::Tx),
        (false, true) => Ok(Side::Rx),
        _ => Err(Errno::EINVAL),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn option_and_flag_codes() {
        assert_eq!(EpOpt::from_raw(0), Ok(EpOpt::MinMultiRecv));
        assert_eq!(EpOpt::from_raw(1), Ok(EpOpt::CmDataSize));
        assert_eq!(EpOpt::from_raw(77), Err(Errno::ENOPROTOOPT));
        assert!(matches!(
            side(Flags::TRANSMIT | Flags::RECV),
            Err(Errno::EINVAL)
        ));
        assert!(matches!(side(Flags::empty()), Err(Errno::EINVAL)));
    }
}
