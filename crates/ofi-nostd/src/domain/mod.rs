//! The domain (fi_domain(3)) and everything opened on it: CQs, counters, AVs, MRs and
//! endpoints, plus the data path that moves their messages over one link.
//!
//! A domain is one NIC queue, UDP socket or TAP device: it owns one local IPv4 address
//! and UDP port, and its endpoints are told apart by their 16-bit endpoint id (the slot
//! of the endpoint pool). Objects are addressed by generational handles; a handle of a
//! closed object is -FI_EINVAL, one of another domain is -FI_EDOMAIN where fi_ep_bind
//! asks for it. The domain never blocks and never reads a clock: the adapter calls
//! [`Domain::progress`] with the time, the link and the application's memory.
//!
//! One `impl Domain` per libfabric object or operation family: this file opens and
//! closes the domain; `resource` holds CQs, counters, AVs and MRs; `endpoint` an
//! endpoint's life; `msg`, `tagged`, `rma` and `atomic` the posts of fi_msg(3),
//! fi_tagged(3), fi_rma(3) and fi_atomic(3); `progress` the pass and the demultiplexing
//! of received packets to the endpoints' engines ([`crate::dgram`], [`crate::rdm`]).

mod atomic;
mod cm;
mod endpoint;
mod msg;
mod progress;
mod resource;
use resource::Resources;
mod rma;
mod sep;
#[cfg(feature = "shared-ctx")]
mod shared;
mod tagged;

use crate::addr::EpAddr;
use crate::errno::{Errno, Result};
use crate::fabric::Fabric;
use crate::flags::Flags;
use crate::info::{Info, ProviderConfig, ResourceMgmt};
use crate::mr::{MrConfig, MrSlot, MrTable};
use crate::net::{ArpEntry, MAX_QUEUES, Net, NetConfig, NetStats};
use crate::pool::{Pool, Slot};
use crate::rdm::{Prng, RdmConfig};
use crate::storage::Storage;
use crate::time::Instant;

pub use crate::bind::BindTarget;
pub use crate::ep::{EpHandle, EpObj};
pub(crate) use crate::fid::Objects;
pub use crate::fid::{AvHandle, AvObj, CntrHandle, CqHandle, CqObj, MrTableOf};
pub use crate::iov::MR_IOV_LIMIT;
pub use atomic::AtomicArgs;
pub use cm::{CmEvent, CmFid, CmStats, MAX_PEPS, PepHandle};
pub use msg::MsgArgs;
pub use progress::{PassKind, ProgressReport};
pub use rma::{RmaArgs, RmaIov};
#[cfg(feature = "shared-ctx")]
pub use shared::{SrxHandle, StxHandle};
pub use tagged::TaggedArgs;

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
    /// Receive queues of the data plane (1..=[`MAX_QUEUES`]): context k of a scalable
    /// endpoint is progressed on queue `k % queues`, everything else on queue 0 (see
    /// [`Domain::progress_queue`]). The plane steers each datagram to the queue of its
    /// destination's context index, as `dp_kernel::UdpLink::queues` does.
    pub queues: usize,
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
            queues: 1,
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
    /// DGRAM datagrams for an endpoint without an address vector or receive CQ bound
    /// (nowhere to report them).
    pub rx_unbound: u64,
    /// Packets handed to the link.
    pub tx_packets: u64,
    /// Packets received and parsed.
    pub rx_packets: u64,
}

/// An open domain.
pub struct Domain<S: Storage> {
    store: S,
    info: Info,
    context: u64,
    local: EpAddr,
    max_pkt: usize,
    net: Net<S::Slice<ArpEntry>, S::Slice<u8>>,
    cfg: ProviderConfig,
    /// The objects endpoints bind, apart from the endpoints so that one endpoint and
    /// what it binds can be borrowed together.
    res: Resources<S>,
    cq_ctx: S::Slice<u64>,
    cntr_ctx: S::Slice<u64>,
    av_ctx: S::Slice<u64>,
    eps: Objects<S, EpObj<S>>,
    stats: DomainStats,
    rng: Prng,
    rdm_cfg: RdmConfig,
    last_now: Instant,
    /// Queues (bit k: queue k) whose last pass received and left its transmit half
    /// to the next one.
    tx_owed: u64,
    /// [`DomainConfig::queues`].
    queues: u8,
    /// REJECTs the domain itself owes (HELLO to an endpoint id that does not exist, or
    /// in a version we do not speak): (to, from endpoint id, session, reason).
    ctl: [Option<(EpAddr, u16, u32, u16)>; 8],
    /// How many of `ctl` are queued (every pass asks).
    ctl_n: u8,
    /// Passive endpoints and the connections of FI_EP_MSG endpoints.
    cm: cm::CmTable<S>,
    /// Shared transmit and receive contexts.
    #[cfg(feature = "shared-ctx")]
    shared: shared::Shared<S>,
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
        if cfg.queues == 0 || cfg.queues > MAX_QUEUES {
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
                .slice(pc.ep_cnt.min(crate::sep::CTX_BASE_LIMIT), || Slot::VACANT)
                .ok_or(Errno::ENOMEM)?,
        );
        let mr_slots = store
            .slice(pc.mr_cnt, || MrSlot::VACANT)
            .ok_or(Errno::ENOMEM)?;
        let mr_buckets = store
            .slice(pc.mr_cnt * 2 + 1, || 0u32)
            .ok_or(Errno::ENOMEM)?;
        let cm = cm::CmTable::new(&mut store, pc.ep_cnt.min(u16::MAX as usize))?;
        #[cfg(feature = "shared-ctx")]
        let shared = shared::Shared::new(&mut store)?;
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
            local: EpAddr::new(cfg.net.local_ip, cfg.net.local_port, 0),
            max_pkt,
            net,
            cfg: pc,
            res: Resources {
                cqs,
                cntrs,
                avs,
                mrs,
                rm_enabled: d.resource_mgmt != ResourceMgmt::Disabled,
            },
            cq_ctx,
            cntr_ctx,
            av_ctx,
            eps,
            stats: DomainStats::default(),
            rng,
            rdm_cfg: RdmConfig {
                eager_threshold: pc.eager_threshold,
                ..RdmConfig::DEFAULT
            },
            last_now: Instant::ZERO,
            tx_owed: 0,
            queues: cfg.queues as u8,
            ctl: [None; 8],
            ctl_n: 0,
            cm,
            #[cfg(feature = "shared-ctx")]
            shared,
        })
    }

    /// `fi_close`: gives the domain back with -FI_EBUSY while anything is open on it.
    // The domain itself is the error payload: fi_close leaves a busy domain open.
    #[allow(clippy::result_large_err)]
    pub fn close(self, fabric: &mut Fabric<S>) -> core::result::Result<(), (Self, Errno)> {
        if !(self.res.cqs.is_empty()
            && self.res.cntrs.is_empty()
            && self.res.avs.is_empty()
            && self.res.mrs.is_empty()
            && self.eps.is_empty()
            && self.cm.is_empty()
            && self.shared_is_empty())
        {
            return Err((self, Errno::EBUSY));
        }
        fabric.domain_closed();
        Ok(())
    }

    #[cfg(feature = "shared-ctx")]
    fn shared_is_empty(&self) -> bool {
        self.shared.is_empty()
    }

    #[cfg(not(feature = "shared-ctx"))]
    fn shared_is_empty(&self) -> bool {
        true
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
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;

#[cfg(test)]
#[path = "loopback_tests.rs"]
mod loopback_tests;

#[cfg(all(test, feature = "msg-ep"))]
#[path = "cm_tests.rs"]
mod cm_tests;
