//! The domain (fi_domain(3)) and everything opened on it: CQs, counters, AVs, MRs and
//! endpoints, plus the data path that moves their messages over one link.
//!
//! A domain is one NIC queue, UDP socket or TAP device: it owns one local IPv4 address
//! and UDP port, and its endpoints are told apart by their 16-bit endpoint id (the slot
//! of the endpoint pool). Objects are addressed by generational handles; a handle of a
//! closed object is -FI_EINVAL, one of another domain is -FI_EDOMAIN where fi_ep_bind
//! asks for it. The domain never blocks and never reads a clock: the adapter calls
//! [`Domain::progress`] with the time, the link and the application's memory.

use wire::link::{Link, UdpAddr};
use wire::packet::{AtomicDatatype, AtomicOp, Body, Header, Repr};

use crate::addr::EpAddr;
use crate::atomic::AtomicKind;
use crate::av::{Av, AvAttr, AvSlot};
use crate::bind::{CntrBindings, CqBinding};
use crate::cntr::{Cntr, CntrAttr};
use crate::cq::{Cq, CqAttr, CqSlot, DEFAULT_CQ_SIZE};
use crate::dgram::{Dgram, TxCompletions};
use crate::ep::{DEFAULT_MIN_MULTI_RECV, Engine, EpState, RecvOp, TxOp};
use crate::errno::{Errno, Result};
use crate::fabric::Fabric;
use crate::flags::{FI_ADDR_UNSPEC, FiAddr, Flags};
use crate::info::{AvType, EpType, Info, ProviderConfig, ResourceMgmt};
use crate::iov::IovList;
use crate::mem::{IoVec, Memory};
use crate::mr::{MrAttr, MrConfig, MrHandle, MrSlot, MrTable};
use crate::net::{ArpEntry, Net, NetConfig, NetStats, RxOutcome, SendOutcome};
use crate::pool::{Pool, Slot};
use crate::rdm::{Ctx, Prng, Rdm, RdmConfig, RdmSizes, RecvReq, SendReq, Sent, TxPort};
use crate::storage::Storage;
use crate::time::Instant;

pub use crate::bind::BindTarget;
pub use crate::ep::{EpHandle, EpObj};
pub(crate) use crate::fid::Objects;
pub use crate::fid::{AvHandle, AvObj, CntrHandle, CqHandle, CqObj, MrTableOf};
pub use crate::iov::MR_IOV_LIMIT;

/// Default [`DomainConfig::loopback_slots`]: a few packets, enough for a session with
/// itself to make progress every pass (a full queue is link back-pressure).
pub const DEFAULT_LOOPBACK_SLOTS: usize = 4;

/// What the data plane tells the domain when it is opened.
#[derive(Debug, Clone, Copy)]
pub struct DomainConfig {
    /// The link and our place on it: medium, MTU, IPv4 address, UDP port, and on
    /// Ethernet the MAC, prefix and gateway.
    pub net: NetConfig,
    /// ARP cache entries (Ethernet links).
    pub arp_entries: usize,
    /// Datagrams to the domain's own address (an endpoint sending to itself or to
    /// another endpoint of the domain) held for local delivery on Ethernet links, whose
    /// data planes do not loop them back; each takes a `max_payload` slot of domain
    /// storage. 0: such sends fail (-FI_EHOSTUNREACH). Unused on UDP links.
    pub loopback_slots: usize,
    /// Seed of the domain's pseudo-random generator (draw it from a random source;
    /// simulations fix it to be reproducible). Everything random comes from that
    /// generator: the secret behind provider-chosen MR keys, and the session ids,
    /// initial sequence numbers and nonces of RDM sessions. (The name predates the
    /// engine; it is kept so existing callers build.)
    pub key_seed: u64,
    /// The limits getinfo advertised: pool capacities and queue defaults.
    pub cfg: ProviderConfig,
}

impl DomainConfig {
    /// A configuration with 16 ARP entries and [`DEFAULT_LOOPBACK_SLOTS`].
    pub fn new(net: NetConfig, cfg: ProviderConfig, seed: u64) -> Self {
        DomainConfig {
            net,
            arp_entries: 16,
            loopback_slots: DEFAULT_LOOPBACK_SLOTS,
            key_seed: seed,
            cfg,
        }
    }
}

/// A message operation's arguments (`struct fi_msg`).
#[derive(Debug, Clone, Copy)]
pub struct MsgArgs<'a> {
    /// The buffers.
    pub iov: &'a [IoVec],
    /// Local descriptors (`desc`), checked only under FI_MR_LOCAL.
    pub desc: &'a [u64],
    /// Destination (send) or source filter (receive; FI_ADDR_UNSPEC for any).
    pub addr: FiAddr,
    /// The application's context.
    pub context: u64,
    /// Remote CQ data (sent with FI_REMOTE_CQ_DATA).
    pub data: u64,
}

/// Arguments of `fi_atomicmsg` & co. (`struct fi_msg_atomic` with one remote iov).
#[derive(Debug, Clone, Copy)]
pub struct AtomicArgs<'a> {
    /// The operands (the swap values of compare operations; none for ATOMIC_READ).
    pub iov: &'a [IoVec],
    /// The target.
    pub addr: FiAddr,
    /// Where at the target (its `len` is ignored: `count` elements).
    pub rma: RmaIov,
    /// Element type.
    pub datatype: AtomicDatatype,
    /// Operation.
    pub op: AtomicOp,
    /// Elements.
    pub count: usize,
    /// The application's context.
    pub context: u64,
    /// Remote CQ data (with FI_REMOTE_CQ_DATA).
    pub data: u64,
}

/// The remote side of an RMA operation (`struct fi_rma_iov`): an address in the
/// target's registered region (an offset unless FI_MR_VIRT_ADDR), a length and the
/// region's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmaIov {
    /// Remote address.
    pub addr: u64,
    /// Bytes.
    pub len: u64,
    /// The region's remote key.
    pub key: u64,
}

/// Arguments of `fi_writemsg` / `fi_readmsg` (`struct fi_msg_rma` with one remote iov).
#[derive(Debug, Clone, Copy)]
pub struct RmaArgs<'a> {
    /// The local buffers (the source of a write, the destination of a read).
    pub iov: &'a [IoVec],
    /// Local descriptors, checked only under FI_MR_LOCAL.
    pub desc: &'a [u64],
    /// The target.
    pub addr: FiAddr,
    /// Where at the target.
    pub rma: RmaIov,
    /// The application's context.
    pub context: u64,
    /// Remote CQ data (a write with FI_REMOTE_CQ_DATA).
    pub data: u64,
}

impl<'a> RmaArgs<'a> {
    /// `iov` to or from `rma` at `addr`, with `context`.
    pub fn new(iov: &'a [IoVec], addr: FiAddr, rma: RmaIov, context: u64) -> Self {
        RmaArgs {
            iov,
            desc: &[],
            addr,
            rma,
            context,
            data: 0,
        }
    }
}

impl<'a> MsgArgs<'a> {
    /// One buffer to or from `addr`, with `context`.
    pub fn new(iov: &'a [IoVec], addr: FiAddr, context: u64) -> Self {
        MsgArgs {
            iov,
            desc: &[],
            addr,
            context,
            data: 0,
        }
    }
}

/// A message operation's arguments with a tag (`struct fi_msg_tagged`).
#[derive(Debug, Clone, Copy)]
pub struct TaggedArgs<'a> {
    /// The buffers.
    pub iov: &'a [IoVec],
    /// Local descriptors (`desc`), checked only under FI_MR_LOCAL.
    pub desc: &'a [u64],
    /// Destination (send) or source filter (receive; FI_ADDR_UNSPEC for any).
    pub addr: FiAddr,
    /// The tag (send: the message's; receive: the one to match).
    pub tag: u64,
    /// Receive: tag bits to ignore when matching (ignored on sends).
    pub ignore: u64,
    /// The application's context.
    pub context: u64,
    /// Remote CQ data (sent with FI_REMOTE_CQ_DATA).
    pub data: u64,
}

impl<'a> TaggedArgs<'a> {
    /// Buffers `iov` to or from `addr` with `tag` (no ignore bits) and `context`.
    pub fn new(iov: &'a [IoVec], addr: FiAddr, tag: u64, context: u64) -> Self {
        TaggedArgs {
            iov,
            desc: &[],
            addr,
            tag,
            ignore: 0,
            context,
            data: 0,
        }
    }
}

/// Datagrams the domain refused before they reached an endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DomainStats {
    /// Not a valid packet of our protocol (every `wire::Error`; the fields below split
    /// it by reason).
    pub rx_malformed: u64,
    /// ... shorter than its headers or its `len` (`Truncated`).
    pub rx_truncated: u64,
    /// ... not our magic (`BadMagic`).
    pub rx_bad_magic: u64,
    /// ... a protocol version we do not speak (`BadVersion`).
    pub rx_bad_version: u64,
    /// ... a reserved or unknown type (`UnknownType`).
    pub rx_unknown_type: u64,
    /// ... inconsistent lengths (`BadLength`).
    pub rx_bad_length: u64,
    /// ... a wrong CRC32C (`BadChecksum`): corruption.
    pub rx_bad_checksum: u64,
    /// ... reserved or misplaced flags (`BadFlags`).
    pub rx_bad_flags: u64,
    /// ... a field the specification forbids (`Malformed` and the rest).
    pub rx_bad_field: u64,
    /// No open endpoint with the destination id.
    pub rx_no_endpoint: u64,
    /// A packet type the destination endpoint does not speak.
    pub rx_wrong_type: u64,
    /// Packets handed to the link.
    pub tx_packets: u64,
    /// Packets received and parsed.
    pub rx_packets: u64,
}

/// Which parts of a progress pass run ([`Domain::progress_pass`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassKind {
    /// Receive, then transmit (unless deferred): [`Domain::progress`].
    Full,
    /// Transmit everything, timers and deferred work included (what a caller about to
    /// sleep runs when [`Domain::transmit_owed`]).
    Transmit,
    /// Transmit what was posted: [`Domain::progress_tx`].
    Posted,
}

/// What one call of [`Domain::progress`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProgressReport {
    /// Datagrams received from the link (and from the loopback queue on raw links).
    pub rx: usize,
    /// Datagrams handed to the link.
    pub tx: usize,
}

/// An open domain.
pub struct Domain<S: Storage> {
    store: S,
    info: Info,
    context: u64,
    rm_enabled: bool,
    local: EpAddr,
    max_pkt: usize,
    net: Net<S::Slice<ArpEntry>, S::Slice<u8>>,
    cfg: ProviderConfig,
    cqs: Objects<S, CqObj<S>>,
    cq_ctx: S::Slice<u64>,
    cntrs: Objects<S, Cntr>,
    cntr_ctx: S::Slice<u64>,
    avs: Objects<S, AvObj<S>>,
    av_ctx: S::Slice<u64>,
    mrs: MrTableOf<S>,
    eps: Objects<S, EpObj<S>>,
    stats: DomainStats,
    rng: Prng,
    rdm_cfg: RdmConfig,
    last_now: Instant,
    /// The last pass received and left its transmit half to the next one.
    tx_owed: bool,
    /// REJECTs the domain itself owes (HELLO to an endpoint id that does not exist, or
    /// in a version we do not speak): (to, from endpoint id, session, reason).
    ctl: [Option<(EpAddr, u16, u32, u16)>; 8],
    /// How many of `ctl` are queued (every pass asks).
    ctl_n: u8,
}

fn obj<T>(p: Option<T>) -> Result<T> {
    p.ok_or(Errno::EINVAL)
}

impl<S: Storage> Domain<S> {
    /// `fi_domain`: opens the domain described by `info` (as getinfo returned it) on
    /// `fabric`. Pools are sized from `cfg.cfg` (the counts getinfo advertised).
    pub fn open(
        fabric: &mut Fabric<S>,
        info: &Info,
        cfg: DomainConfig,
        mut store: S,
        context: u64,
    ) -> Result<Self> {
        let pc = cfg.cfg;
        let d = &info.domain_attr;
        if !info.fabric_attr.name.is_empty() && info.fabric_attr.name != fabric.attr().name {
            return Err(Errno::EINVAL);
        }
        if d.cq_cnt > pc.cq_cnt
            || d.ep_cnt > pc.ep_cnt
            || d.cntr_cnt > pc.cntr_cnt
            || d.mr_cnt > pc.mr_cnt
        {
            return Err(Errno::EINVAL);
        }
        if !d.auth_key.is_empty() && d.auth_key.len() > pc.max_auth_key_size {
            return Err(Errno::EINVAL);
        }
        let max_pkt = cfg.net.max_payload().min(u16::MAX as usize);
        if max_pkt < wire::packet::BASE_LEN + 8 {
            return Err(Errno::EINVAL);
        }
        let arp = store
            .slice(cfg.arp_entries, || ArpEntry::EMPTY)
            .ok_or(Errno::ENOMEM)?;
        let lo_len = cfg
            .net
            .loopback_bytes(cfg.loopback_slots)
            .ok_or(Errno::ENOMEM)?;
        let lo = store.slice(lo_len, || 0u8).ok_or(Errno::ENOMEM)?;
        let net = Net::with_loopback(cfg.net, arp, lo)?;
        let mut slots = |n: usize| store.slice(n, || 0u64).ok_or(Errno::ENOMEM);
        let cq_ctx = slots(pc.cq_cnt)?;
        let cntr_ctx = slots(pc.cntr_cnt)?;
        let av_ctx = slots(pc.cq_cnt)?;
        let cqs = Pool::new(
            store
                .slice(pc.cq_cnt, || Slot::VACANT)
                .ok_or(Errno::ENOMEM)?,
        );
        let cntrs = Pool::new(
            store
                .slice(pc.cntr_cnt, || Slot::VACANT)
                .ok_or(Errno::ENOMEM)?,
        );
        let avs = Pool::new(
            store
                .slice(pc.cq_cnt, || Slot::VACANT)
                .ok_or(Errno::ENOMEM)?,
        );
        let eps = Pool::new(
            store
                .slice(pc.ep_cnt.min(u16::MAX as usize), || Slot::VACANT)
                .ok_or(Errno::ENOMEM)?,
        );
        let mr_slots = store
            .slice(pc.mr_cnt, || MrSlot::VACANT)
            .ok_or(Errno::ENOMEM)?;
        let mr_buckets = store
            .slice(pc.mr_cnt * 2 + 1, || 0u32)
            .ok_or(Errno::ENOMEM)?;
        let mut rng = Prng::new(cfg.key_seed);
        let mrs = MrTable::new(
            MrConfig {
                mr_mode: d.mr_mode,
                hmem: info.caps.contains(Flags::HMEM),
                key_seed: rng.next_u64(),
            },
            mr_slots,
            mr_buckets,
        )?;
        fabric.domain_opened();
        Ok(Domain {
            store,
            info: info.clone(),
            context,
            rm_enabled: d.resource_mgmt != ResourceMgmt::Disabled,
            local: EpAddr::new(cfg.net.local_ip, cfg.net.local_port, 0),
            max_pkt,
            net,
            cfg: pc,
            cqs,
            cq_ctx,
            cntrs,
            cntr_ctx,
            avs,
            av_ctx,
            mrs,
            eps,
            stats: DomainStats::default(),
            rng,
            rdm_cfg: RdmConfig {
                eager_threshold: pc.eager_threshold,
                ..RdmConfig::DEFAULT
            },
            last_now: Instant::ZERO,
            tx_owed: false,
            ctl: [None; 8],
            ctl_n: 0,
        })
    }

    /// `fi_close`: gives the domain back with -FI_EBUSY while anything is open on it.
    // The domain itself is the error payload: fi_close leaves a busy domain open.
    #[allow(clippy::result_large_err)]
    pub fn close(self, fabric: &mut Fabric<S>) -> core::result::Result<(), (Self, Errno)> {
        if !(self.cqs.is_empty()
            && self.cntrs.is_empty()
            && self.avs.is_empty()
            && self.mrs.is_empty()
            && self.eps.is_empty())
        {
            return Err((self, Errno::EBUSY));
        }
        fabric.domain_closed();
        Ok(())
    }

    /// The info the domain was opened with.
    pub fn info(&self) -> &Info {
        &self.info
    }

    /// The application's context of the domain.
    pub fn context(&self) -> u64 {
        self.context
    }

    /// Refused datagrams and traffic totals.
    pub fn stats(&self) -> &DomainStats {
        &self.stats
    }

    /// The domain's address (endpoint id 0).
    pub fn local_addr(&self) -> EpAddr {
        self.local
    }

    /// What the UDP/IPv4 layer dropped and sent (ARP included).
    pub fn net_stats(&self) -> &NetStats {
        self.net.stats()
    }

    /// The reliability engine's tunables for RDM endpoints opened from now on (the
    /// defaults are [`RdmConfig::DEFAULT`] with `ProviderConfig::eager_threshold`).
    /// -FI_EINVAL for inconsistent values.
    pub fn set_rdm_config(&mut self, cfg: RdmConfig) -> Result<()> {
        cfg.validate()?;
        self.rdm_cfg = cfg;
        Ok(())
    }

    /// The tunables RDM endpoints are opened with.
    pub fn rdm_config(&self) -> &RdmConfig {
        &self.rdm_cfg
    }

    // ---- completion queues ------------------------------------------------------------

    /// `fi_cq_open`. `size` 0 means [`DEFAULT_CQ_SIZE`]; the pool full is -FI_ENOMEM.
    pub fn cq_open(&mut self, attr: &CqAttr, context: u64) -> Result<CqHandle<S>> {
        attr.validate()?;
        if self.cqs.is_full() {
            return Err(Errno::ENOMEM);
        }
        let size = if attr.size == 0 {
            DEFAULT_CQ_SIZE
        } else {
            attr.size
        };
        let storage = self
            .store
            .slice(size, || CqSlot::EMPTY)
            .ok_or(Errno::ENOMEM)?;
        let cq = Cq::new(&CqAttr { size, ..*attr }, self.rm_enabled, storage)?;
        let h = self.cqs.insert(cq).map_err(|_| Errno::ENOMEM)?;
        self.cq_ctx.as_mut()[h.index()] = context;
        Ok(h)
    }

    /// The CQ `h` names; -FI_EINVAL if closed or not this domain's.
    pub fn cq(&self, h: CqHandle<S>) -> Result<&CqObj<S>> {
        obj(self.cqs.get(h))
    }

    /// The CQ `h` names, mutably (reads, readerr, signal).
    pub fn cq_mut(&mut self, h: CqHandle<S>) -> Result<&mut CqObj<S>> {
        obj(self.cqs.get_mut(h))
    }

    /// The application's context of a CQ.
    pub fn cq_context(&self, h: CqHandle<S>) -> Result<u64> {
        self.cq(h)?;
        Ok(self.cq_ctx.as_ref()[h.index()])
    }

    /// `fi_close` of a CQ: -FI_EBUSY while an endpoint is bound to it.
    pub fn cq_close(&mut self, h: CqHandle<S>) -> Result<()> {
        self.cq(h)?.check_close()?;
        self.cqs.remove(h);
        Ok(())
    }

    // ---- counters ----------------------------------------------------------------------

    /// `fi_cntr_open`.
    pub fn cntr_open(&mut self, attr: &CntrAttr, context: u64) -> Result<CntrHandle> {
        let c = Cntr::new(attr)?;
        let h = self.cntrs.insert(c).map_err(|_| Errno::ENOMEM)?;
        self.cntr_ctx.as_mut()[h.index()] = context;
        Ok(h)
    }

    /// The counter `h` names.
    pub fn cntr(&self, h: CntrHandle) -> Result<&Cntr> {
        obj(self.cntrs.get(h))
    }

    /// The counter `h` names, mutably.
    pub fn cntr_mut(&mut self, h: CntrHandle) -> Result<&mut Cntr> {
        obj(self.cntrs.get_mut(h))
    }

    /// The application's context of a counter.
    pub fn cntr_context(&self, h: CntrHandle) -> Result<u64> {
        self.cntr(h)?;
        Ok(self.cntr_ctx.as_ref()[h.index()])
    }

    /// `fi_close` of a counter: -FI_EBUSY while bound.
    pub fn cntr_close(&mut self, h: CntrHandle) -> Result<()> {
        self.cntr(h)?.check_close()?;
        self.mrs.unbind_cntr_everywhere(h.to_bits());
        self.cntrs.remove(h);
        Ok(())
    }

    // ---- address vectors ---------------------------------------------------------------

    /// `fi_av_open`: `count` (or the endpoint limit when 0) sizes the AV. A type other
    /// than the domain's `av_type` (when that is set) is -FI_EINVAL.
    pub fn av_open(&mut self, attr: &mut AvAttr<'_>, context: u64) -> Result<AvHandle<S>> {
        let dom = self.info.domain_attr.av_type;
        if dom != AvType::Unspec && attr.av_type != AvType::Unspec && attr.av_type != dom {
            return Err(Errno::EINVAL);
        }
        if attr.av_type == AvType::Unspec {
            attr.av_type = dom;
        }
        if self.avs.is_full() {
            return Err(Errno::ENOMEM);
        }
        let count = if attr.count == 0 { 1024 } else { attr.count };
        let slots = self
            .store
            .slice(count, || AvSlot::VACANT)
            .ok_or(Errno::ENOMEM)?;
        let buckets = self
            .store
            .slice(count * 2 + 1, || 0u32)
            .ok_or(Errno::ENOMEM)?;
        let av = Av::new(attr, slots, buckets)?;
        let h = self.avs.insert(av).map_err(|_| Errno::ENOMEM)?;
        self.av_ctx.as_mut()[h.index()] = context;
        Ok(h)
    }

    /// The AV `h` names.
    pub fn av(&self, h: AvHandle<S>) -> Result<&AvObj<S>> {
        obj(self.avs.get(h))
    }

    /// The AV `h` names, mutably (insert, remove).
    pub fn av_mut(&mut self, h: AvHandle<S>) -> Result<&mut AvObj<S>> {
        obj(self.avs.get_mut(h))
    }

    /// `fi_close` of an AV: -FI_EBUSY while an endpoint is bound to it.
    pub fn av_close(&mut self, h: AvHandle<S>) -> Result<()> {
        self.av(h)?.check_close()?;
        self.avs.remove(h);
        Ok(())
    }

    // ---- memory regions ----------------------------------------------------------------

    /// `fi_mr_regattr`.
    pub fn mr_reg(&mut self, attr: &MrAttr<'_>, flags: Flags) -> Result<MrHandle> {
        self.mrs.regattr(attr, flags)
    }

    /// `fi_mr_bind(mr, cntr, flags)`: counter `c` counts the remote accesses
    /// (FI_REMOTE_WRITE and/or FI_REMOTE_READ) that reach region `h` through an
    /// endpoint with FI_RMA_EVENT. -FI_EDOMAIN for a counter of another domain; the
    /// other errors are [`MrTable::bind_cntr`]'s. The binding ends when the counter
    /// closes (the region cannot close before: -FI_EBUSY).
    pub fn mr_bind_cntr(&mut self, h: MrHandle, c: CntrHandle, flags: Flags) -> Result<()> {
        if !self.cntrs.issued(c) {
            return Err(Errno::EDOMAIN);
        }
        obj(self.cntrs.get(c))?;
        self.mrs.bind_cntr(h, c.to_bits(), flags)
    }

    /// The registration table (key, desc, bind, enable, access checks).
    pub fn mrs(&self) -> &MrTableOf<S> {
        &self.mrs
    }

    /// The registration table, mutably.
    pub fn mrs_mut(&mut self) -> &mut MrTableOf<S> {
        &mut self.mrs
    }

    // ---- endpoints ---------------------------------------------------------------------

    /// `fi_endpoint`: an endpoint with the attributes of `info`, which must be within what
    /// this domain offers. FI_EP_DGRAM and FI_EP_RDM endpoints are supported; other types
    /// are -FI_EINVAL. An RDM endpoint's queues (send operations, posted receives of each
    /// kind) are `tx_attr.size` / `rx_attr.size` deep, at most 65535.
    pub fn ep_open(&mut self, info: &Info, context: u64) -> Result<EpHandle<S>> {
        let ep_type = match info.ep_attr.ep_type {
            EpType::Dgram => EpType::Dgram,
            EpType::Rdm => EpType::Rdm,
            _ => return Err(Errno::EINVAL),
        };
        let rdm = ep_type == EpType::Rdm;
        let pc = self.cfg;
        let (ta, ra) = (&info.tx_attr, &info.rx_attr);
        let tx_size = if ta.size == 0 { pc.tx_size } else { ta.size };
        let rx_size = if ra.size == 0 { pc.rx_size } else { ra.size };
        let inject_size = if ta.inject_size == 0 {
            pc.inject_size
        } else {
            ta.inject_size
        };
        let max_msg = if rdm {
            pc.max_msg_size
        } else {
            self.max_pkt.saturating_sub(wire::packet::BASE_LEN + 8)
        };
        let inject_max = if rdm {
            pc.inject_size.min(self.rdm_cfg.eager_threshold)
        } else {
            pc.inject_size.min(max_msg)
        };
        let ep_caps = if info.caps.is_empty() {
            self.info.caps
        } else {
            info.caps
        };
        let auth_key = if info.ep_attr.auth_key.is_empty() {
            self.info.domain_attr.auth_key.clone()
        } else {
            info.ep_attr.auth_key.clone()
        };
        if tx_size > pc.tx_size
            || rx_size > pc.rx_size
            || (rdm && (tx_size > u16::MAX as usize || rx_size > u16::MAX as usize))
            || inject_size > inject_max
            || ta.iov_limit > crate::iov::IOV_LIMIT
            || ra.iov_limit > crate::iov::IOV_LIMIT
            || (info.ep_attr.max_msg_size != 0 && info.ep_attr.max_msg_size > max_msg)
            || auth_key.len() > pc.max_auth_key_size
            || ta
                .op_flags
                .intersects(crate::ep::unsupported_tx_flags(ep_type))
            // One transmit and one receive context: more, or shared ones, are scalable
            // or shared-context endpoints, not offered (FI_SHARED_CONTEXT is SIZE_MAX).
            || info.ep_attr.tx_ctx_cnt > 1
            || info.ep_attr.rx_ctx_cnt > 1
            // What the endpoint and its contexts ask for, within what the domain
            // offers (as libfabric's own providers check; a context asking for more
            // than its endpoint is the application's error, not refused).
            || !(info.caps | ta.caps | ra.caps)
                .difference(self.info.caps | Flags::PRIMARY_MODIFIERS)
                .is_empty()
        {
            return Err(Errno::EINVAL);
        }
        if self.eps.is_full() {
            return Err(Errno::ENOMEM);
        }
        let engine = if rdm {
            let seed = self.rng.next_u64();
            Engine::Rdm(Rdm::new(
                &mut self.store,
                self.rdm_cfg,
                RdmSizes {
                    tx_size,
                    rx_size,
                    inject_size,
                    max_pkt: self.max_pkt,
                },
                self.local,
                auth_key,
                seed,
            )?)
        } else {
            Engine::Dgram(Dgram::new(&mut self.store, tx_size, rx_size, inject_size)?)
        };
        let ep = crate::ep::Endpoint {
            ep_type,
            caps: ep_caps,
            context,
            id: 0,
            state: EpState::Disabled,
            tx_flags: ta.op_flags,
            rx_flags: ra.op_flags,
            tx_cq: None,
            rx_cq: None,
            cntrs: CntrBindings::default(),
            av: None,
            eq: None,
            min_multi_recv: DEFAULT_MIN_MULTI_RECV,
            max_msg_size: if info.ep_attr.max_msg_size == 0 {
                max_msg
            } else {
                info.ep_attr.max_msg_size
            },
            inject_size,
            tx_iov_limit: if ta.iov_limit == 0 {
                crate::iov::IOV_LIMIT
            } else {
                ta.iov_limit
            },
            rx_iov_limit: if ra.iov_limit == 0 {
                crate::iov::IOV_LIMIT
            } else {
                ra.iov_limit
            },
            aliases: 0,
            engine,
        };
        let h = self.eps.insert(ep).map_err(|_| Errno::ENOMEM)?;
        let local = self.local;
        if let Some(ep) = self.eps.get_mut(h) {
            ep.id = h.index() as u16;
            if let Engine::Rdm(r) = &mut ep.engine {
                r.set_local(EpAddr {
                    ep_id: h.index() as u16,
                    ..local
                });
            }
        }
        Ok(h)
    }

    /// The endpoint `h` names.
    pub fn ep(&self, h: EpHandle<S>) -> Result<&EpObj<S>> {
        obj(self.eps.get(h))
    }

    /// The endpoint `h` names, mutably (options, op flags).
    pub fn ep_mut(&mut self, h: EpHandle<S>) -> Result<&mut EpObj<S>> {
        obj(self.eps.get_mut(h))
    }

    /// `fi_getname`: the endpoint's address.
    pub fn ep_addr(&self, h: EpHandle<S>) -> Result<EpAddr> {
        let ep = self.ep(h)?;
        Ok(EpAddr {
            ep_id: ep.id,
            ..self.local
        })
    }

    /// The first half of closing an RDM endpoint (`fi_close`): it acknowledges at once
    /// everything it owes (held acknowledgements included), sends every peer a CLOSE,
    /// takes no new packet, and returns until when [`Domain::progress`] should keep
    /// running before [`Domain::ep_close`], so that retransmissions from peers whose
    /// last ACK was lost are acknowledged again (without it, their last sends fail with
    /// -FI_ETIMEDOUT); [`Domain::ep_lingering`] says when every peer acknowledged its
    /// CLOSE (then stop sooner). `None`: close at once (no sessions, or not an RDM
    /// endpoint).
    pub fn ep_begin_close(&mut self, h: EpHandle<S>, now: Instant) -> Result<Option<Instant>> {
        let ep = self.eps.get_mut(h).ok_or(Errno::EINVAL)?;
        Ok(match &mut ep.engine {
            Engine::Rdm(r) => r.begin_close(now),
            Engine::Dgram(_) => None,
        })
    }

    /// Whether an endpoint [`Domain::ep_begin_close`] began closing still needs progress
    /// passes before [`Domain::ep_close`]: a peer has not yet acknowledged the CLOSE it
    /// was sent (wire protocol 4.7). Once every peer has, each holds every
    /// acknowledgement the endpoint owed it, and lingering longer serves nothing.
    pub fn ep_lingering(&self, h: EpHandle<S>) -> bool {
        self.eps
            .get(h)
            .and_then(|ep| ep.rdm())
            .is_some_and(|r| r.lingering())
    }

    /// `fi_close` of an endpoint: outstanding operations are discarded without
    /// completions (fi_endpoint(3)), bindings are released. -FI_EBUSY while aliases of it
    /// are open.
    pub fn ep_close(&mut self, h: EpHandle<S>) -> Result<()> {
        if self.ep(h)?.aliases > 0 {
            return Err(Errno::EBUSY);
        }
        let mut ep = obj(self.eps.remove(h))?;
        // Reservations of what is still queued: (transmit, receive).
        let (reserved, rx_reserved) = match &mut ep.engine {
            Engine::Rdm(r) => r.reservations(),
            Engine::Dgram(d) => (d.drain_tx(), d.rx.len()),
        };
        if let Some(b) = &ep.tx_cq
            && let Some(cq) = self.cqs.get_mut(b.cq)
        {
            (0..reserved).for_each(|_| cq.release());
            cq.unbind_ref();
        }
        if let Some(b) = &ep.rx_cq
            && let Some(cq) = self.cqs.get_mut(b.cq)
        {
            if self.rm_enabled {
                (0..rx_reserved).for_each(|_| cq.release());
            }
            cq.unbind_ref();
        }
        for c in ep.cntrs.all() {
            if let Some(c) = self.cntrs.get_mut(c) {
                c.unbind_ref();
            }
        }
        if let Some(av) = ep.av.take().and_then(|a| self.avs.get_mut(a)) {
            av.unbind_ep();
        }
        Ok(())
    }

    /// `fi_ep_bind`. Only before `fi_enable` (-FI_EOPBADSTATE after); one CQ per
    /// direction, one counter per operation type and one AV (-FI_EINVAL for a second);
    /// objects of another domain are -FI_EDOMAIN, closed ones -FI_EINVAL; flags that do
    /// not apply to the object are -FI_EINVAL.
    pub fn ep_bind(&mut self, h: EpHandle<S>, target: BindTarget<S>, flags: Flags) -> Result<()> {
        let ep = obj(self.eps.get_mut(h))?;
        if ep.state != EpState::Disabled {
            return Err(Errno::EOPBADSTATE);
        }
        match target {
            BindTarget::Cq(cq) => {
                if !self.cqs.issued(cq) {
                    return Err(Errno::EDOMAIN);
                }
                let c = obj(self.cqs.get_mut(cq))?;
                let allowed = Flags::TRANSMIT | Flags::RECV | Flags::SELECTIVE_COMPLETION;
                let (tx, rx) = (flags.contains(Flags::TRANSMIT), flags.contains(Flags::RECV));
                if !allowed.contains(flags)
                    || !(tx || rx)
                    || (tx && ep.tx_cq.is_some())
                    || (rx && ep.rx_cq.is_some())
                {
                    return Err(Errno::EINVAL);
                }
                let selective = flags.contains(Flags::SELECTIVE_COMPLETION);
                if tx {
                    ep.tx_cq = Some(CqBinding { cq, selective });
                    c.bind_ref();
                }
                if rx {
                    ep.rx_cq = Some(CqBinding { cq, selective });
                    c.bind_ref();
                }
            }
            BindTarget::Cntr(ch) => {
                if !self.cntrs.issued(ch) {
                    return Err(Errno::EDOMAIN);
                }
                let c = obj(self.cntrs.get_mut(ch))?;
                let all = Flags::SEND
                    | Flags::RECV
                    | Flags::READ
                    | Flags::WRITE
                    | Flags::REMOTE_READ
                    | Flags::REMOTE_WRITE;
                if flags.is_empty() || !all.contains(flags) {
                    return Err(Errno::EINVAL);
                }
                if flags.intersects(Flags::REMOTE_READ | Flags::REMOTE_WRITE)
                    && !ep.caps.contains(Flags::RMA_EVENT)
                {
                    return Err(Errno::EINVAL);
                }
                let slots = CntrBindings::<CntrHandle>::FLAGS;
                if slots
                    .iter()
                    .any(|f| flags.contains(*f) && ep.cntrs.slot_mut(*f).is_some())
                {
                    return Err(Errno::EINVAL);
                }
                for f in slots.iter().filter(|f| flags.contains(**f)) {
                    *ep.cntrs.slot_mut(*f) = Some(ch);
                    c.bind_ref();
                }
            }
            BindTarget::Av(ah) => {
                if !self.avs.issued(ah) {
                    return Err(Errno::EDOMAIN);
                }
                let a = obj(self.avs.get_mut(ah))?;
                if !flags.is_empty() || ep.av.is_some() {
                    return Err(Errno::EINVAL);
                }
                ep.av = Some(ah);
                a.bind_ep();
            }
            BindTarget::Eq(token) => {
                if !flags.is_empty() || ep.eq.is_some() {
                    return Err(Errno::EINVAL);
                }
                ep.eq = Some(token);
            }
        }
        Ok(())
    }

    /// `fi_enable`: an endpoint that can send needs a transmit CQ (even when successes
    /// are suppressed, so errors can be reported): -FI_ENOCQ; a connectionless endpoint
    /// needs its AV: -FI_ENOAV. Enabling twice is -FI_EOPBADSTATE. A receive CQ is
    /// needed by the first receive posted, not here (fi_endpoint(3) asks for CQs that
    /// report the operations the endpoint *initiates*; an endpoint that only writes,
    /// as fabtests' `fi_rdm_multi_domain` does, binds none).
    pub fn ep_enable(&mut self, h: EpHandle<S>) -> Result<()> {
        let ep = obj(self.eps.get_mut(h))?;
        if ep.state == EpState::Enabled {
            return Err(Errno::EOPBADSTATE);
        }
        let dirs = Flags::SEND | Flags::RECV;
        let sends = !ep.caps.intersects(dirs) || ep.caps.contains(Flags::SEND);
        if sends && ep.tx_cq.is_none() {
            return Err(Errno::ENOCQ);
        }
        if ep.av.is_none() {
            return Err(Errno::ENOAV);
        }
        ep.state = EpState::Enabled;
        Ok(())
    }

    /// `fi_cancel`: a receive or a transmit still queued with this `context` completes
    /// with an FI_ECANCELED error entry; one that already completed is not affected.
    /// Returns 0 either way ("request submitted").
    pub fn ep_cancel(&mut self, h: EpHandle<S>, context: u64) -> Result<()> {
        let ep = obj(self.eps.get_mut(h))?;
        if let Engine::Dgram(dg) = &mut ep.engine {
            let rx_cq = ep.rx_cq.as_ref().and_then(|b| self.cqs.get_mut(b.cq));
            dg.cancel(context, rx_cq, self.rm_enabled);
            return Ok(());
        }
        let (mut ctx, rdm) = rdm_ctx(
            ep,
            &mut self.cqs,
            &mut self.cntrs,
            &self.avs,
            &self.mrs,
            self.rm_enabled,
        );
        if let Some(r) = rdm
            && !r.cancel_recv(context, &mut ctx)
        {
            r.cancel_send(context, &mut ctx);
        }
        Ok(())
    }

    // ---- messages (fi_msg(3)) ----------------------------------------------------------

    /// `fi_sendmsg`: queues one message to `msg.addr`. -FI_EOPBADSTATE before enable,
    /// -FI_EINVAL for too many iovs or an address not in the AV, -FI_EMSGSIZE beyond
    /// `max_msg_size` (the link MTU on DGRAM) or, with FI_INJECT, beyond `inject_size`,
    /// -FI_EAGAIN when the transmit queue or the CQ is full.
    pub fn sendmsg(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        msg: &MsgArgs<'_>,
        flags: Flags,
    ) -> Result<()> {
        self.post_send(h, mem, msg, flags, false)
    }

    /// `fi_send`: one buffer, the endpoint's default transmit flags.
    pub fn send(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        buf: IoVec,
        dest: FiAddr,
        context: u64,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.tx_flags;
        self.post_send(h, mem, &MsgArgs::new(&[buf], dest, context), flags, false)
    }

    /// `fi_sendv`.
    pub fn sendv(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        iov: &[IoVec],
        dest: FiAddr,
        context: u64,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.tx_flags;
        self.post_send(h, mem, &MsgArgs::new(iov, dest, context), flags, false)
    }

    /// `fi_senddata`: with remote CQ data.
    pub fn senddata(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        buf: IoVec,
        data: u64,
        dest: FiAddr,
        context: u64,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.tx_flags | Flags::REMOTE_CQ_DATA;
        let iov = [buf];
        let msg = MsgArgs {
            data,
            ..MsgArgs::new(&iov, dest, context)
        };
        self.post_send(h, mem, &msg, flags, false)
    }

    /// `fi_inject`: the buffer is copied before returning and no completion is written
    /// (fi_msg(3)); the send counter still counts it.
    pub fn inject(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        buf: IoVec,
        dest: FiAddr,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.tx_flags | Flags::INJECT;
        self.post_send(h, mem, &MsgArgs::new(&[buf], dest, 0), flags, true)
    }

    /// `fi_injectdata`.
    pub fn injectdata(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        buf: IoVec,
        data: u64,
        dest: FiAddr,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.tx_flags | Flags::INJECT | Flags::REMOTE_CQ_DATA;
        let iov = [buf];
        let msg = MsgArgs {
            data,
            ..MsgArgs::new(&iov, dest, 0)
        };
        self.post_send(h, mem, &msg, flags, true)
    }

    fn post_send(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        msg: &MsgArgs<'_>,
        flags: Flags,
        no_completion: bool,
    ) -> Result<()> {
        self.post_any_send(h, mem, msg, None, flags, no_completion)
    }

    fn post_any_send(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        msg: &MsgArgs<'_>,
        tag: Option<u64>,
        flags: Flags,
        no_completion: bool,
    ) -> Result<()> {
        let ep = obj(self.eps.get_mut(h))?;
        ep.require_enabled()?;
        if flags.intersects(crate::ep::unsupported_tx_flags(ep.ep_type)) {
            return Err(Errno::EBADFLAGS);
        }
        let cap = if tag.is_some() {
            Flags::TAGGED
        } else {
            Flags::MSG
        };
        if !ep.caps.contains(cap)
            || (ep.caps.contains(Flags::RECV) && !ep.caps.contains(Flags::SEND))
        {
            return Err(Errno::EOPNOTSUPP);
        }
        let iov = IovList::new(msg.iov, ep.tx_iov_limit)?;
        let len = iov.total_len();
        if len > ep.max_msg_size {
            return Err(Errno::EMSGSIZE);
        }
        let injected = flags.contains(Flags::INJECT);
        if injected && len > ep.inject_size {
            return Err(Errno::EMSGSIZE);
        }
        if self.mrs.mr_mode().contains(crate::flags::MrMode::LOCAL) && !injected {
            for (i, v) in iov.as_slice().iter().enumerate() {
                self.mrs
                    .check_local(msg.desc.get(i).copied().unwrap_or(0), *v, Flags::SEND)?;
            }
        }
        let av = obj(ep.av.and_then(|a| self.avs.get(a)))?;
        let (dest_addr, _rx) = av.resolve(msg.addr).map_err(|_| Errno::EINVAL)?;
        let tx_cq = obj(ep.tx_cq.as_ref())?;
        let tx_cq_h = tx_cq.cq;
        let completion = !no_completion && (!tx_cq.selective || flags.contains(Flags::COMPLETION));
        let cq = obj(self.cqs.get_mut(tx_cq_h))?;
        let reserved = self.rm_enabled && !no_completion;
        if reserved {
            cq.try_reserve()?;
        }
        let data = flags.contains(Flags::REMOTE_CQ_DATA).then_some(msg.data);
        if ep.is_rdm() {
            let req = SendReq {
                iov,
                len,
                context: msg.context,
                tag,
                data,
                flags,
                completion,
                reserved,
                rma: None,
                atomic: None,
            };
            let now = self.last_now;
            let (mut ctx, rdm) = rdm_ctx(
                ep,
                &mut self.cqs,
                &mut self.cntrs,
                &self.avs,
                &self.mrs,
                self.rm_enabled,
            );
            let r = match rdm {
                Some(r) => r.post_send(now, dest_addr, &req, mem, &mut ctx),
                None => Err(Errno::EINVAL),
            };
            if r.is_err()
                && reserved
                && let Some(cq) = self.cqs.get_mut(tx_cq_h)
            {
                cq.release();
            }
            return r;
        }
        let op = TxOp {
            iov,
            len,
            context: msg.context,
            flags,
            data,
            dest: msg.addr,
            dest_addr,
            injected,
            completion,
            reserved,
            canceled: false,
        };
        let pushed = match &mut ep.engine {
            Engine::Dgram(d) => d.post_send(op, mem),
            Engine::Rdm(_) => Err(Errno::EINVAL),
        };
        if let Err(e) = pushed {
            if reserved {
                cq.release();
            }
            return Err(e);
        }
        Ok(())
    }

    /// `fi_writemsg`: writes the local buffers into the peer's registered memory
    /// (`msg.rma`: remote address, length, key); with FI_REMOTE_CQ_DATA the target
    /// also gets `msg.data` in a completion. Completes when the target answered (its
    /// checks failed: an error completion, -FI_EACCES). -FI_EOPNOTSUPP without FI_RMA
    /// (and FI_WRITE, when the endpoint named directions) or on a DGRAM endpoint,
    /// -FI_EINVAL when the local and remote lengths differ, -FI_EMSGSIZE beyond
    /// `max_msg_size` (or `inject_size` with FI_INJECT), -FI_EAGAIN when the transmit
    /// queue or CQ is full.
    pub fn writemsg(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        msg: &RmaArgs<'_>,
        flags: Flags,
    ) -> Result<()> {
        self.post_rma(h, mem, msg, flags, false, false)
    }

    /// `fi_inject_write` (`fi_inject_writedata` with `data`): a write whose buffer may
    /// be reused at once, without a completion (a failure still completes with an
    /// error entry).
    pub fn inject_write(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        buf: IoVec,
        dest: FiAddr,
        rma: RmaIov,
        data: Option<u64>,
    ) -> Result<()> {
        let mut flags = obj(self.eps.get(h))?.tx_flags | Flags::INJECT;
        let iov = [buf];
        let mut m = RmaArgs::new(&iov, dest, rma, 0);
        if let Some(d) = data {
            m.data = d;
            flags |= Flags::REMOTE_CQ_DATA;
        }
        self.post_rma(h, mem, &m, flags, false, true)
    }

    /// The endpoint's default transmit flags (what the short data calls use).
    pub fn ep_tx_flags(&self, h: EpHandle<S>) -> Result<Flags> {
        Ok(obj(self.eps.get(h))?.tx_flags)
    }

    /// `fi_readmsg`: reads the peer's registered memory (`msg.rma`) into the local
    /// buffers. Errors as [`Domain::writemsg`]; FI_INJECT and FI_REMOTE_CQ_DATA are
    /// -FI_EINVAL.
    pub fn readmsg(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        msg: &RmaArgs<'_>,
        flags: Flags,
    ) -> Result<()> {
        self.post_rma(h, mem, msg, flags, true, false)
    }

    /// `fi_atomicmsg`: applies `msg.op` to `msg.count` elements of `msg.datatype` at the
    /// peer's `msg.rma` (address and key; its length is implied) with the operands in
    /// `msg.iov`. Operands are copied by the call (the buffer may be reused at once).
    /// -FI_EOPNOTSUPP for an operation or datatype [`Domain::atomic_valid`] refuses or
    /// without FI_ATOMIC, -FI_EINVAL for a count of 0, beyond that limit, or operand
    /// buffers of another length. Completes on the target's answer (-FI_EACCES: refused
    /// by its registration).
    pub fn atomicmsg(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        msg: &AtomicArgs<'_>,
        flags: Flags,
    ) -> Result<()> {
        self.post_atomic(
            h,
            mem,
            msg,
            flags,
            AtomicKind::Write,
            IoVec::new(0, 0),
            IoVec::new(0, 0),
        )
    }

    /// `fi_fetch_atomicmsg`: as [`Domain::atomicmsg`] (FI_ATOMIC_READ too), and the
    /// original values land in `result` (one buffer of the elements' length).
    pub fn fetch_atomicmsg(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        msg: &AtomicArgs<'_>,
        result: IoVec,
        flags: Flags,
    ) -> Result<()> {
        self.post_atomic(
            h,
            mem,
            msg,
            flags,
            AtomicKind::Fetch,
            IoVec::new(0, 0),
            result,
        )
    }

    /// `fi_compare_atomicmsg`: the compare-and-swap family; `compare` holds the compare
    /// values (MSWAP: the mask), `msg.iov` the swap values, and the original values land
    /// in `result`.
    pub fn compare_atomicmsg(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        msg: &AtomicArgs<'_>,
        compare: IoVec,
        result: IoVec,
        flags: Flags,
    ) -> Result<()> {
        self.post_atomic(h, mem, msg, flags, AtomicKind::Compare, compare, result)
    }

    /// `fi_atomicvalid` / `fi_fetch_atomicvalid` / `fi_compare_atomicvalid`: the most
    /// elements one call of `kind` may carry for `op` on `datatype` at endpoint `h`, or
    /// -FI_EOPNOTSUPP.
    pub fn atomic_valid(
        &self,
        h: EpHandle<S>,
        op: AtomicOp,
        datatype: AtomicDatatype,
        kind: AtomicKind,
    ) -> Result<usize> {
        let ep = obj(self.eps.get(h))?;
        if !ep.caps.contains(Flags::ATOMIC) || !ep.is_rdm() {
            return Err(Errno::EOPNOTSUPP);
        }
        let n = crate::atomic::valid(op, datatype, kind)?;
        // The operands wait in the operation's inject slot.
        let per = datatype.size() * op.operand_arrays().max(1);
        let n = n.min(ep.inject_size / per);
        if n == 0 {
            return Err(Errno::EOPNOTSUPP);
        }
        Ok(n)
    }

    /// `fi_query_atomic`: [`Domain::atomic_valid`] for the domain's endpoints (their
    /// inject size bounds the operands).
    pub fn query_atomic(
        &self,
        op: AtomicOp,
        datatype: AtomicDatatype,
        kind: AtomicKind,
    ) -> Result<usize> {
        let n = crate::atomic::valid(op, datatype, kind)?;
        let per = datatype.size() * op.operand_arrays().max(1);
        match n.min(self.info.tx_attr.inject_size / per) {
            0 => Err(Errno::EOPNOTSUPP),
            n => Ok(n),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn post_atomic(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        msg: &AtomicArgs<'_>,
        flags: Flags,
        kind: AtomicKind,
        compare: IoVec,
        result: IoVec,
    ) -> Result<()> {
        let max = self.atomic_valid(h, msg.op, msg.datatype, kind)?;
        let ep = obj(self.eps.get_mut(h))?;
        ep.require_enabled()?;
        let dirs = ep.caps & (Flags::READ | Flags::WRITE);
        let dir = if kind == AtomicKind::Write {
            Flags::WRITE
        } else {
            Flags::READ
        };
        if !(dirs.is_empty() || dirs.contains(dir)) {
            return Err(Errno::EOPNOTSUPP);
        }
        let n = msg.count.saturating_mul(msg.datatype.size());
        let iov = IovList::new(msg.iov, ep.tx_iov_limit)?;
        let operands = if msg.op.operand_arrays() == 0 { 0 } else { n };
        if msg.count == 0
            || msg.count > max
            || (iov.total_len() != operands && !(operands == 0 && iov.total_len() == n))
            || (kind == AtomicKind::Compare && compare.len != n)
            || (kind != AtomicKind::Write && result.len != n)
            || msg.rma.addr.checked_add(n as u64).is_none()
            || flags.contains(Flags::REMOTE_CQ_DATA) && kind != AtomicKind::Write
        {
            return Err(Errno::EINVAL);
        }
        let iov = if operands == 0 {
            IovList::new(&[], 1)?
        } else {
            iov
        };
        let no_completion = flags.contains(Flags::INJECT) && kind == AtomicKind::Write;
        let meta = crate::rdm::AtomicReq {
            meta: crate::rdm::AtomicMeta {
                op: msg.op,
                dt: msg.datatype,
                count: msg.count as u16,
                fetch: kind != AtomicKind::Write,
            },
            compare,
            result,
        };
        let (addr, context) = (msg.addr, msg.context);
        let data = flags.contains(Flags::REMOTE_CQ_DATA).then_some(msg.data);
        let rma = Some((msg.rma.key, msg.rma.addr, false));
        self.submit_rdm(
            h,
            mem,
            addr,
            flags,
            no_completion,
            |completion, reserved| SendReq {
                iov,
                len: n,
                context,
                tag: None,
                data,
                // The operands are copied now: never a reference to the caller's buffer.
                flags: flags.difference(Flags::INJECT),
                completion,
                reserved,
                rma,
                atomic: Some(meta),
            },
        )
    }

    /// The common end of an RMA or atomic post, once the call's own checks passed:
    /// resolves `dest`, reserves a transmit-CQ slot (unless `no_completion`), hands the
    /// request `build` makes (told whether a success completes and whether a slot was
    /// reserved) to the engine, and gives the slot back if the engine refused it.
    fn submit_rdm(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        dest: FiAddr,
        flags: Flags,
        no_completion: bool,
        build: impl FnOnce(bool, bool) -> SendReq,
    ) -> Result<()> {
        let ep = obj(self.eps.get_mut(h))?;
        if flags.intersects(crate::ep::unsupported_tx_flags(ep.ep_type)) {
            return Err(Errno::EBADFLAGS);
        }
        let av = obj(ep.av.and_then(|a| self.avs.get(a)))?;
        let (dest_addr, _rx) = av.resolve(dest).map_err(|_| Errno::EINVAL)?;
        let tx_cq = obj(ep.tx_cq.as_ref())?;
        let tx_cq_h = tx_cq.cq;
        let completion = !no_completion && (!tx_cq.selective || flags.contains(Flags::COMPLETION));
        let cq = obj(self.cqs.get_mut(tx_cq_h))?;
        let reserved = self.rm_enabled && !no_completion;
        if reserved {
            cq.try_reserve()?;
        }
        let req = build(completion, reserved);
        let now = self.last_now;
        let (mut ctx, rdm) = rdm_ctx(
            ep,
            &mut self.cqs,
            &mut self.cntrs,
            &self.avs,
            &self.mrs,
            self.rm_enabled,
        );
        let r = match rdm {
            Some(r) => r.post_send(now, dest_addr, &req, mem, &mut ctx),
            None => Err(Errno::EOPNOTSUPP),
        };
        if r.is_err()
            && reserved
            && let Some(cq) = self.cqs.get_mut(tx_cq_h)
        {
            cq.release();
        }
        r
    }

    fn post_rma(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        msg: &RmaArgs<'_>,
        flags: Flags,
        read: bool,
        no_completion: bool,
    ) -> Result<()> {
        let ep = obj(self.eps.get_mut(h))?;
        ep.require_enabled()?;
        let dirs =
            ep.caps & (Flags::READ | Flags::WRITE | Flags::REMOTE_READ | Flags::REMOTE_WRITE);
        let dir = if read { Flags::READ } else { Flags::WRITE };
        if !ep.caps.contains(Flags::RMA) || !(dirs.is_empty() || dirs.contains(dir)) || !ep.is_rdm()
        {
            return Err(Errno::EOPNOTSUPP);
        }
        let iov = IovList::new(msg.iov, ep.tx_iov_limit)?;
        let len = iov.total_len();
        if len as u64 != msg.rma.len || msg.rma.addr.checked_add(msg.rma.len).is_none() {
            return Err(Errno::EINVAL);
        }
        if len > ep.max_msg_size {
            return Err(Errno::EMSGSIZE);
        }
        let injected = flags.contains(Flags::INJECT);
        if read && (injected || flags.contains(Flags::REMOTE_CQ_DATA)) {
            return Err(Errno::EINVAL);
        }
        if injected && len > ep.inject_size {
            return Err(Errno::EMSGSIZE);
        }
        if self.mrs.mr_mode().contains(crate::flags::MrMode::LOCAL) && !injected {
            for (i, v) in iov.as_slice().iter().enumerate() {
                self.mrs
                    .check_local(msg.desc.get(i).copied().unwrap_or(0), *v, dir)?;
            }
        }
        let (addr, context) = (msg.addr, msg.context);
        let data = flags.contains(Flags::REMOTE_CQ_DATA).then_some(msg.data);
        let rma = Some((msg.rma.key, msg.rma.addr, read));
        self.submit_rdm(
            h,
            mem,
            addr,
            flags,
            no_completion,
            |completion, reserved| SendReq {
                iov,
                len,
                context,
                tag: None,
                data,
                flags,
                completion,
                reserved,
                rma,
                atomic: None,
            },
        )
    }

    /// `fi_recvmsg`: posts a receive. -FI_EOPBADSTATE before enable, -FI_EINVAL for too
    /// many iovs, FI_MULTI_RECV with other than one buffer, or a source not in the AV
    /// (with FI_DIRECTED_RECV), -FI_EAGAIN when the receive queue or the CQ is full.
    /// On RDM endpoints a receive that matches a buffered unexpected message gets its
    /// data copied by the next [`Domain::progress`].
    pub fn recvmsg(&mut self, h: EpHandle<S>, msg: &MsgArgs<'_>, flags: Flags) -> Result<()> {
        self.post_any_recv(h, msg, None, flags)
    }

    fn post_any_recv(
        &mut self,
        h: EpHandle<S>,
        msg: &MsgArgs<'_>,
        tag: Option<(u64, u64)>,
        flags: Flags,
    ) -> Result<()> {
        let ep = obj(self.eps.get_mut(h))?;
        ep.require_enabled()?;
        if ep.rx_cq.is_none() {
            // Nowhere to report the receive's completion, nor its failure.
            return Err(Errno::ENOCQ);
        }
        let cap = if tag.is_some() {
            Flags::TAGGED
        } else {
            Flags::MSG
        };
        if !ep.caps.contains(cap)
            || (ep.caps.contains(Flags::SEND) && !ep.caps.contains(Flags::RECV))
        {
            return Err(Errno::EOPNOTSUPP);
        }
        let no_data = flags.intersects(Flags::PEEK | Flags::DISCARD)
            || (flags.contains(Flags::CLAIM) && flags.contains(Flags::DISCARD));
        let iov = if no_data {
            IovList::new(msg.iov, ep.rx_iov_limit).unwrap_or_default()
        } else {
            IovList::new(msg.iov, ep.rx_iov_limit)?
        };
        if flags.contains(Flags::MULTI_RECV)
            && (iov.as_slice().len() != 1 || !ep.caps.contains(Flags::MULTI_RECV) || tag.is_some())
        {
            return Err(Errno::EINVAL);
        }
        if flags.intersects(Flags::PEEK | Flags::CLAIM | Flags::DISCARD)
            && (tag.is_none() || !ep.is_rdm())
        {
            return Err(Errno::EINVAL);
        }
        if self.mrs.mr_mode().contains(crate::flags::MrMode::LOCAL) && !no_data {
            for (i, v) in iov.as_slice().iter().enumerate() {
                self.mrs
                    .check_local(msg.desc.get(i).copied().unwrap_or(0), *v, Flags::RECV)?;
            }
        }
        // Without FI_DIRECTED_RECV the source address is ignored (fi_msg(3)); so is it
        // by a claim, which names its message by the context of the peek that claimed
        // it (fi_tagged(3); Open MPI's MPI_Mrecv passes address 0, no AV entry under
        // FI_AV_MAP).
        let claim = flags.contains(Flags::CLAIM) && !flags.contains(Flags::PEEK);
        let src = if ep.caps.contains(Flags::DIRECTED_RECV) && msg.addr != FI_ADDR_UNSPEC && !claim
        {
            let av = obj(ep.av.and_then(|a| self.avs.get(a)))?;
            av.resolve(msg.addr).map_err(|_| Errno::EINVAL)?;
            av.split_rx(msg.addr).0
        } else {
            FI_ADDR_UNSPEC
        };
        let rx_cq = obj(ep.rx_cq.as_ref())?;
        let (rx_cq_h, selective) = (rx_cq.cq, rx_cq.selective);
        let cq = obj(self.cqs.get_mut(rx_cq_h))?;
        if self.rm_enabled {
            cq.try_reserve()?;
        }
        if ep.is_rdm() {
            let req = RecvReq {
                iov,
                src,
                context: msg.context,
                tag,
                flags,
                completion: !selective || flags.contains(Flags::COMPLETION),
                reserved: self.rm_enabled,
                min_free: ep.min_multi_recv,
            };
            let (mut ctx, rdm) = rdm_ctx(
                ep,
                &mut self.cqs,
                &mut self.cntrs,
                &self.avs,
                &self.mrs,
                self.rm_enabled,
            );
            let r = match rdm {
                Some(r) => r.post_recv(&req, &mut ctx),
                None => Err(Errno::EINVAL),
            };
            if r.is_err()
                && self.rm_enabled
                && let Some(cq) = self.cqs.get_mut(rx_cq_h)
            {
                cq.release();
            }
            return r;
        }
        let op = RecvOp {
            iov,
            context: msg.context,
            flags,
            used: 0,
            src,
            min_free: ep.min_multi_recv,
        };
        let posted = match &mut ep.engine {
            Engine::Dgram(d) => d.post_recv(src, op),
            Engine::Rdm(_) => Err(Errno::EAGAIN),
        };
        if let Err(e) = posted {
            if self.rm_enabled {
                cq.release();
            }
            return Err(e);
        }
        Ok(())
    }

    /// `fi_recv`: one buffer, the endpoint's default receive flags.
    pub fn recv(&mut self, h: EpHandle<S>, buf: IoVec, src: FiAddr, context: u64) -> Result<()> {
        let flags = obj(self.eps.get(h))?.rx_flags;
        self.recvmsg(h, &MsgArgs::new(&[buf], src, context), flags)
    }

    /// `fi_recvv`.
    pub fn recvv(
        &mut self,
        h: EpHandle<S>,
        iov: &[IoVec],
        src: FiAddr,
        context: u64,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.rx_flags;
        self.recvmsg(h, &MsgArgs::new(iov, src, context), flags)
    }

    // ---- tagged messages (fi_tagged(3)) ------------------------------------------------

    /// `fi_tsendmsg`: a tagged send (RDM endpoints with FI_TAGGED; -FI_EOPNOTSUPP
    /// otherwise). Errors as [`Domain::sendmsg`].
    pub fn tsendmsg(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        msg: &TaggedArgs<'_>,
        flags: Flags,
    ) -> Result<()> {
        let m = MsgArgs {
            iov: msg.iov,
            desc: msg.desc,
            addr: msg.addr,
            context: msg.context,
            data: msg.data,
        };
        self.post_any_send(h, mem, &m, Some(msg.tag), flags, false)
    }

    /// `fi_tsend`.
    pub fn tsend(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        buf: IoVec,
        dest: FiAddr,
        tag: u64,
        context: u64,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.tx_flags;
        let iov = [buf];
        self.tsendmsg(h, mem, &TaggedArgs::new(&iov, dest, tag, context), flags)
    }

    /// `fi_tsendv`.
    pub fn tsendv(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        iov: &[IoVec],
        dest: FiAddr,
        tag: u64,
        context: u64,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.tx_flags;
        self.tsendmsg(h, mem, &TaggedArgs::new(iov, dest, tag, context), flags)
    }

    /// `fi_tsenddata`: with remote CQ data.
    #[allow(clippy::too_many_arguments)]
    pub fn tsenddata(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        buf: IoVec,
        data: u64,
        dest: FiAddr,
        tag: u64,
        context: u64,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.tx_flags | Flags::REMOTE_CQ_DATA;
        let iov = [buf];
        let msg = TaggedArgs {
            data,
            ..TaggedArgs::new(&iov, dest, tag, context)
        };
        self.tsendmsg(h, mem, &msg, flags)
    }

    /// `fi_tinject`: copied before returning, no completion on success.
    pub fn tinject(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        buf: IoVec,
        dest: FiAddr,
        tag: u64,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.tx_flags | Flags::INJECT;
        let iov = [buf];
        let m = MsgArgs::new(&iov, dest, 0);
        self.post_any_send(h, mem, &m, Some(tag), flags, true)
    }

    /// `fi_tinjectdata`.
    pub fn tinjectdata(
        &mut self,
        h: EpHandle<S>,
        mem: &impl Memory,
        buf: IoVec,
        data: u64,
        dest: FiAddr,
        tag: u64,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.tx_flags | Flags::INJECT | Flags::REMOTE_CQ_DATA;
        let iov = [buf];
        let m = MsgArgs {
            data,
            ..MsgArgs::new(&iov, dest, 0)
        };
        self.post_any_send(h, mem, &m, Some(tag), flags, true)
    }

    /// `fi_trecvmsg`: a tagged receive matching `tag` outside the `ignore` bits, from
    /// `addr` (with FI_DIRECTED_RECV). FI_PEEK reports (in the CQ) whether a matching
    /// message has arrived, -FI_ENOMSG as an error entry if not; FI_PEEK | FI_CLAIM also
    /// reserves it for this context and FI_CLAIM then receives it (-FI_ENOMSG from the
    /// call if nothing was claimed with this context); FI_DISCARD with either drops it.
    pub fn trecvmsg(&mut self, h: EpHandle<S>, msg: &TaggedArgs<'_>, flags: Flags) -> Result<()> {
        let m = MsgArgs {
            iov: msg.iov,
            desc: msg.desc,
            addr: msg.addr,
            context: msg.context,
            data: 0,
        };
        self.post_any_recv(h, &m, Some((msg.tag, msg.ignore)), flags)
    }

    /// `fi_trecv`.
    pub fn trecv(
        &mut self,
        h: EpHandle<S>,
        buf: IoVec,
        src: FiAddr,
        tag: u64,
        ignore: u64,
        context: u64,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.rx_flags;
        let iov = [buf];
        let msg = TaggedArgs {
            ignore,
            ..TaggedArgs::new(&iov, src, tag, context)
        };
        self.trecvmsg(h, &msg, flags)
    }

    /// `fi_trecvv`.
    pub fn trecvv(
        &mut self,
        h: EpHandle<S>,
        iov: &[IoVec],
        src: FiAddr,
        tag: u64,
        ignore: u64,
        context: u64,
    ) -> Result<()> {
        let flags = obj(self.eps.get(h))?.rx_flags;
        let msg = TaggedArgs {
            ignore,
            ..TaggedArgs::new(iov, src, tag, context)
        };
        self.trecvmsg(h, &msg, flags)
    }

    // ---- progress ----------------------------------------------------------------------

    /// Moves data: receives what the link has (up to a burst), delivers it to posted
    /// receives (DGRAM) or runs it through the reliability engine (RDM), answers ARP,
    /// runs due timers (retransmissions, delayed acks, handshake retries, probes, peer
    /// failure) and transmits while the link has room. Completions go to the bound CQs
    /// and counters. Never blocks. Call it again by [`Domain::poll_timeout`] at the
    /// latest.
    pub fn progress<L: Link, M: Memory>(
        &mut self,
        now: Instant,
        link: &mut L,
        mem: &mut M,
    ) -> Result<ProgressReport> {
        self.pass(now, link, mem, PassKind::Full)
    }

    /// The transmit half of [`Domain::progress`] for what was posted: what a data-path
    /// post runs so that its packet leaves at once, without paying for a receive (the
    /// application's next CQ read receives). An RDM endpoint serves the peers sends
    /// were posted to; other peers and timers wait for the next full pass, which
    /// `poll_timeout` names (or run here when they are due already).
    pub fn progress_tx<L: Link, M: Memory>(
        &mut self,
        now: Instant,
        link: &mut L,
        mem: &mut M,
    ) -> Result<ProgressReport> {
        self.pass(now, link, mem, PassKind::Posted)
    }

    /// A pass of the parts `kind` names: [`Domain::progress`], [`Domain::progress_tx`],
    /// or (`PassKind::Transmit`) the whole transmit half without receiving, what a
    /// caller about to sleep runs when [`Domain::transmit_owed`].
    pub fn progress_pass<L: Link, M: Memory>(
        &mut self,
        now: Instant,
        link: &mut L,
        mem: &mut M,
        kind: PassKind,
    ) -> Result<ProgressReport> {
        self.pass(now, link, mem, kind)
    }

    fn pass<L: Link, M: Memory>(
        &mut self,
        now: Instant,
        link: &mut L,
        mem: &mut M,
        kind: PassKind,
    ) -> Result<ProgressReport> {
        let receive = kind == PassKind::Full;
        self.last_now = now;
        let mut report = ProgressReport::default();
        // Work the application made possible since the last call comes first: it is
        // older than anything the link has now.
        self.rdm_prepare(now, mem);
        if receive {
            let mut transport = false;
            // Datagrams we sent ourselves (raw links only) are older than the link's.
            if let Some(mut q) = self.net.lend_looped() {
                let src = self.net.local_addr();
                while q.pop(|d| self.rx_datagram(now, src, d, mem)).is_some() {
                    report.rx += 1;
                    transport = true;
                }
                self.net.return_looped(q);
            }
            let burst = link.capabilities().max_burst.max(1) * 4;
            report.rx += link.receive_burst(burst, |meta, buf| {
                if let RxOutcome::Packet { src, payload } = self.net.rx(now, meta, buf) {
                    transport = true;
                    self.rx_datagram(now, src, payload, mem);
                }
            });
            // What arrived is in the CQs now: hand it to the application before the
            // transmit half, which the next pass runs (the application's next post or
            // read; `poll_timeout` says "at once" meanwhile). A reply the application
            // posts then leaves without waiting for this pass's timers and scans, and
            // carries the acknowledgement. Never two passes in a row: a stream of
            // arrivals cannot starve transmission. Only routine work waits: ARP alone,
            // an acknowledgement due at once, a control answer or a DGRAM send
            // defer nothing.
            if transport && !self.tx_owed && !self.tx_urgent() {
                self.tx_owed = true;
                return Ok(report);
            }
        }
        // A post's pass leaves what a receiving pass deferred to the next full pass.
        let posted_only = kind == PassKind::Posted;
        if !posted_only {
            self.tx_owed = false;
        }
        self.net.poll_tx(now, link);
        report.tx = self.tx_all(now, link, mem);
        report.tx += self.rdm_tx_all(now, link, mem, posted_only);
        Ok(report)
    }

    /// The last pass received and left its transmit half to the next pass (see
    /// [`Domain::progress`]). A caller about to sleep runs a [`PassKind::Transmit`]
    /// pass first, so nothing waits for the sleep.
    pub fn transmit_owed(&self) -> bool {
        self.tx_owed
    }

    /// Whether the transmit half has work that must not wait for the next pass.
    fn tx_urgent(&self) -> bool {
        self.ctl_n > 0
            || self.eps.iter().any(|(_, ep)| match &ep.engine {
                Engine::Rdm(r) => r.tx_urgent(),
                Engine::Dgram(d) => !d.tx.is_empty(),
            })
    }

    /// The latest instant at which [`Domain::progress`] must run again even if nothing
    /// arrives (retransmission, delayed-ack, handshake, probe and failure timers), or
    /// `None` when no timer is armed. An instant not after the last `progress` call means
    /// "as soon as possible" (work is ready, e.g. after posting a send).
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t: Option<Instant> = None;
        if self.tx_owed || self.ctl_n > 0 || self.net.has_looped() {
            t = Some(self.last_now);
        }
        for (_, ep) in self.eps.iter() {
            match &ep.engine {
                Engine::Rdm(r) => {
                    if let Some(d) = r.poll_timeout(self.last_now) {
                        t = Some(t.map_or(d, |x: Instant| x.min(d)));
                    }
                }
                Engine::Dgram(d) => {
                    if !d.tx.is_empty() && ep.state == EpState::Enabled {
                        t = Some(self.last_now);
                    }
                }
            }
        }
        t
    }

    fn rdm_prepare<M: Memory>(&mut self, now: Instant, mem: &mut M) {
        for (_, ep) in self.eps.iter_mut() {
            if ep.state != EpState::Enabled || !ep.rdm().is_some_and(|r| r.prepare_due()) {
                continue;
            }
            let (mut ctx, rdm) = rdm_ctx(
                ep,
                &mut self.cqs,
                &mut self.cntrs,
                &self.avs,
                &self.mrs,
                self.rm_enabled,
            );
            if let Some(r) = rdm {
                r.flush_copies(mem, &mut ctx);
                r.retry_blocked(now, mem, &mut ctx);
            }
        }
    }

    fn rdm_tx_all<L: Link, M: Memory>(
        &mut self,
        now: Instant,
        link: &mut L,
        mem: &M,
        posted_only: bool,
    ) -> usize {
        let mut port = NetPort {
            net: &mut self.net,
            link,
            now,
            full: false,
            unreachable: false,
        };
        let mut sent = 0;
        for i in 0..self.ctl.len() {
            if self.ctl_n == 0 {
                break;
            }
            let Some((to, from_ep, session, reason)) = self.ctl[i] else {
                continue;
            };
            let head = Repr {
                header: Header {
                    src_ep: from_ep,
                    dst_ep: to.ep_id,
                    session,
                    seq: 0,
                    crc: false,
                    ack_req: false,
                },
                body: Body::Reject(wire::packet::RejectRepr {
                    reason,
                    ver_min: wire::packet::VERSION,
                    ver_max: wire::packet::VERSION,
                }),
            };
            let len = head.buffer_len();
            match port.send(&to, len, |b| {
                b.get_mut(..len)
                    .and_then(|b| head.emit_bytes(b).ok())
                    .unwrap_or(0)
            }) {
                Sent::LinkFull => return sent,
                Sent::NotNow => {}
                Sent::Yes => {
                    self.ctl[i] = None;
                    self.ctl_n -= 1;
                    self.stats.tx_packets += 1;
                    sent += 1;
                }
            }
        }
        for (_, ep) in self.eps.iter_mut() {
            // An endpoint with nothing due is skipped before its context is built:
            // the busy-poll loop runs this on every empty pass.
            let due = match &ep.engine {
                Engine::Rdm(r) => posted_only || r.transmit_due(now),
                Engine::Dgram(_) => false,
            };
            if ep.state != EpState::Enabled || !due {
                continue;
            }
            let (mut ctx, rdm) = rdm_ctx(
                ep,
                &mut self.cqs,
                &mut self.cntrs,
                &self.avs,
                &self.mrs,
                self.rm_enabled,
            );
            if let Some(r) = rdm {
                let n = if posted_only {
                    r.transmit_posted(now, &mut port, mem, &mut ctx)
                } else {
                    r.transmit(now, &mut port, mem, &mut ctx)
                };
                sent += n;
                self.stats.tx_packets += n as u64;
            }
            if port.full {
                break;
            }
        }
        sent
    }

    #[cold]
    fn count_malformed(&mut self, e: wire::Error) {
        let s = &mut self.stats;
        s.rx_malformed += 1;
        match e {
            wire::Error::Truncated => s.rx_truncated += 1,
            wire::Error::BadMagic => s.rx_bad_magic += 1,
            wire::Error::BadVersion => s.rx_bad_version += 1,
            wire::Error::UnknownType => s.rx_unknown_type += 1,
            wire::Error::BadLength => s.rx_bad_length += 1,
            wire::Error::BadChecksum => s.rx_bad_checksum += 1,
            wire::Error::BadFlags => s.rx_bad_flags += 1,
            _ => s.rx_bad_field += 1,
        }
    }

    /// Queues a REJECT the domain owes (no endpoint, or a version we do not speak).
    #[cold]
    fn queue_reject(&mut self, to: EpAddr, from_ep: u16, session: u32, reason: u16) {
        if let Some(slot) = self.ctl.iter_mut().find(|c| c.is_none()) {
            *slot = Some((to, from_ep, session, reason));
            self.ctl_n += 1;
        }
    }

    fn rx_datagram(&mut self, now: Instant, src: UdpAddr, buf: &[u8], mem: &mut impl Memory) {
        let repr = match Repr::parse_bytes(buf) {
            Ok(r) => r,
            Err(e) => {
                self.count_malformed(e);
                // A HELLO in another version still deserves REJECT(VERSION) (spec 4.4).
                if e == wire::Error::BadVersion && buf.len() >= 32 && buf[3] == 0x01 {
                    let be16 = |i: usize| u16::from_be_bytes([buf[i], buf[i + 1]]);
                    let session = u32::from_be_bytes([buf[28], buf[29], buf[30], buf[31]]);
                    let to = EpAddr {
                        ip: src.ip.octets(),
                        port: src.port,
                        ep_id: be16(8),
                    };
                    let dst_ep = be16(10);
                    if self
                        .eps
                        .get_by_index(dst_ep as usize)
                        .is_some_and(|(_, ep)| ep.is_rdm())
                    {
                        self.queue_reject(to, dst_ep, session, wire::packet::reject::VERSION);
                    }
                }
                return;
            }
        };
        let from = EpAddr {
            ip: src.ip.octets(),
            port: src.port,
            ep_id: repr.header.src_ep,
        };
        let is_dgram = matches!(repr.body, Body::Dgram(_));
        let rdm_ep = self
            .eps
            .get_by_index(repr.header.dst_ep as usize)
            .is_some_and(|(_, ep)| ep.is_rdm());
        if !is_dgram && !rdm_ep {
            self.stats.rx_packets += 1;
            if self.eps.get_by_index(repr.header.dst_ep as usize).is_none() {
                self.stats.rx_no_endpoint += 1;
                if let Body::Hello(h) = &repr.body {
                    self.queue_reject(
                        from,
                        repr.header.dst_ep,
                        h.rx_session,
                        wire::packet::reject::NO_ENDPOINT,
                    );
                }
            } else {
                self.stats.rx_wrong_type += 1;
            }
            return;
        }
        if rdm_ep {
            self.stats.rx_packets += 1;
            let Some(ep) = self.eps.get_mut_by_index(repr.header.dst_ep as usize) else {
                return;
            };
            if ep.state != EpState::Enabled || is_dgram {
                self.stats.rx_wrong_type += 1;
                return;
            }
            let (mut ctx, rdm) = rdm_ctx(
                ep,
                &mut self.cqs,
                &mut self.cntrs,
                &self.avs,
                &self.mrs,
                self.rm_enabled,
            );
            if let Some(r) = rdm {
                r.on_packet(now, from, &repr, buf, mem, &mut ctx);
            }
            return;
        }
        self.stats.rx_packets += 1;
        let Body::Dgram(d) = repr.body else {
            self.stats.rx_wrong_type += 1;
            return;
        };
        let Some(ep) = self.eps.get_mut_by_index(repr.header.dst_ep as usize) else {
            self.stats.rx_no_endpoint += 1;
            return;
        };
        if ep.ep_type != EpType::Dgram || ep.state != EpState::Enabled {
            self.stats.rx_wrong_type += 1;
            return;
        }
        let (Some(av), Some(bind)) = (ep.av.and_then(|a| self.avs.get(a)), ep.rx_cq.as_ref())
        else {
            return;
        };
        let Some(cq) = self.cqs.get_mut(bind.cq) else {
            return;
        };
        let (src_fi, report_src) = av.message_source(&from, ep.caps.contains(Flags::SOURCE));
        let cntr = ep.cntrs.recv.and_then(|c| self.cntrs.get_mut(c));
        let Engine::Dgram(dg) = &mut ep.engine else {
            return;
        };
        dg.deliver(
            cq,
            bind.selective,
            self.rm_enabled,
            cntr,
            src_fi,
            report_src,
            d,
            mem,
        );
    }

    /// The transmit half of every enabled DGRAM endpoint, in pool order, until the link
    /// is full.
    fn tx_all<L: Link>(&mut self, now: Instant, link: &mut L, mem: &mut impl Memory) -> usize {
        let mut sent = 0;
        for (_, ep) in self.eps.iter_mut() {
            if ep.state != EpState::Enabled {
                continue;
            }
            let Engine::Dgram(dg) = &mut ep.engine else {
                continue;
            };
            let mut to = TxCompletions {
                cqs: &mut self.cqs,
                cntrs: &mut self.cntrs,
                tx_cq: ep.tx_cq.as_ref().map(|b| b.cq),
                send_cntr: ep.cntrs.send,
                ep_context: ep.context,
            };
            let t = dg.transmit(ep.id, now, &mut self.net, link, mem, &mut to);
            sent += t.sent;
            self.stats.tx_packets += t.sent as u64;
            if t.link_full {
                return sent;
            }
        }
        sent
    }
}

/// The endpoint's CQs, counters and AV, lent to its reliability engine, and the engine
/// itself (borrowed apart from them).
fn rdm_ctx<'a, S: Storage>(
    ep: &'a mut EpObj<S>,
    cqs: &'a mut Objects<S, CqObj<S>>,
    cntrs: &'a mut Objects<S, Cntr>,
    avs: &'a Objects<S, AvObj<S>>,
    mrs: &'a MrTableOf<S>,
    rm: bool,
) -> (Ctx<'a, S>, Option<&'a mut Rdm<S>>) {
    let ctx = Ctx {
        cqs,
        cntrs,
        avs,
        av: ep.av,
        tx_cq: &ep.tx_cq,
        rx_cq: &ep.rx_cq,
        cntr: &ep.cntrs,
        rm,
        ep_context: ep.context,
        source: ep.caps.contains(Flags::SOURCE),
        mrs: Some(mrs),
        caps: ep.caps,
    };
    let rdm = match &mut ep.engine {
        Engine::Rdm(r) => Some(r),
        Engine::Dgram(_) => None,
    };
    (ctx, rdm)
}

/// The engine's view of the link: UDP/IPv4 through the net layer.
struct NetPort<'a, A, B, L> {
    net: &'a mut Net<A, B>,
    link: &'a mut L,
    now: Instant,
    full: bool,
    /// The last send found no way to its destination (`EHOSTUNREACH`).
    unreachable: bool,
}

impl<A, B, L> TxPort for NetPort<'_, A, B, L>
where
    A: AsRef<[ArpEntry]> + AsMut<[ArpEntry]>,
    B: AsRef<[u8]> + AsMut<[u8]>,
    L: Link,
{
    fn send(&mut self, dst: &EpAddr, len: usize, write: impl FnOnce(&mut [u8]) -> usize) -> Sent {
        let to = UdpAddr::new(dst.ip.into(), dst.port);
        self.unreachable = false;
        match self.net.send(self.now, self.link, to, len, write) {
            Ok(SendOutcome::Sent { .. }) => Sent::Yes,
            Ok(SendOutcome::ArpPending) => Sent::NotNow,
            // Like a packet lost on the way: the reliability engine's timers decide.
            Ok(SendOutcome::ArpFailed) => Sent::Yes,
            Err(Errno::EAGAIN) => {
                self.full = true;
                Sent::LinkFull
            }
            // Unsendable: counted by the net layer; the reliability layer sees a lost
            // packet and its timers decide, except that a handshake to a destination
            // with no way to it fails at once (`take_unreachable`).
            Err(e) => {
                self.unreachable = e == Errno::EHOSTUNREACH;
                Sent::Yes
            }
        }
    }

    fn take_unreachable(&mut self) -> bool {
        core::mem::take(&mut self.unreachable)
    }
}

#[cfg(test)]
#[path = "domain_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "domain_loopback_tests.rs"]
mod loopback_tests;
