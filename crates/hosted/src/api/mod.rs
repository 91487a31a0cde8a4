//! The safe Rust API: libfabric's objects as owned Rust values.
//!
//! | libfabric | here |
//! |---|---|
//! | `fi_fabric` | [`Fabric::open`] |
//! | `fi_domain` | [`Fabric::domain`] → [`DomainBuilder::open`] |
//! | `fi_cq_open` / `fi_cntr_open` / `fi_av_open` / `fi_mr_reg` | [`Domain::cq`], [`Domain::counter`], [`Domain::av`], [`Domain::register`] |
//! | `fi_endpoint`, `fi_ep_bind`, `fi_enable` | [`Domain::endpoint`], [`Endpoint::bind_cq`] ..., [`Endpoint::enable`] |
//! | `fi_send` / `fi_recv` / `fi_inject` | [`Endpoint::send`], [`Endpoint::recv`], [`Endpoint::inject`] |
//! | `fi_tsend` / `fi_trecv` / `fi_tinject` | [`Endpoint::tsend`], [`Endpoint::trecv`], [`Endpoint::tinject`] |
//! | `fi_cq_read` / `fi_cq_sread` / `fi_trywait` | [`Cq::read`], [`Cq::sread`], [`Cq::trywait`] |
//! | `fi_close` | `close(self)` on each object, or `Drop` |
//!
//! Errors are the core's libfabric codes ([`Error::Fabric`] wraps
//! [`ofi_nostd::Errno`]), so a Rust program sees exactly what a C program would.
//!
//! # Buffers: no use-after-free, no data race
//!
//! Data moves in [`Buf`]s, owned heap buffers whose address never changes. A post
//! *moves* the buffer into the domain; the completion hands it back
//! ([`Completion::buf`]); a refused post hands it back in its [`PostError`]; closing or
//! dropping an endpoint hands back (or frees) the buffers of operations that will never
//! complete. While the domain holds a buffer, the application cannot reach it, and the
//! core can reach only the posted range of buffers the domain holds (every access is
//! checked; see `table.rs`). Small sends without a buffer go through
//! [`Endpoint::inject`], which copies before returning.
//!
//! # Progress
//!
//! [`ProgressMode::Manual`] (the default): progress runs when the application reads a
//! CQ, waits on a CQ or counter, posts a send, or calls [`Domain::progress`]; a blocking
//! wait also wakes for the core's timers (RDM retransmissions, acks). As in libfabric,
//! each domain then needs its application to keep calling in: a thread blocked on one
//! domain does not move another.
//! [`ProgressMode::Auto`]: a thread per domain runs it (see [`AutoProgress`]). In both,
//! one mutex per domain guards the core, held for one operation or one progress pass.
//!
//! # Example
//!
//! ```no_run
//! use std::time::Duration;
//! use hosted::api::{Buf, Fabric};
//! use hosted::ofi_nostd::flags::{FI_ADDR_UNSPEC, Flags};
//! use hosted::ofi_nostd::info::EpType;
//!
//! # fn main() -> Result<(), hosted::api::Error> {
//! let fabric = Fabric::open()?;
//! // UDP on 127.0.0.1, ephemeral port, manual progress, default pool sizes.
//! let domain = fabric.domain().open::<&'static str>()?;
//! let cq = domain.cq(0)?;
//! let av = domain.av()?;
//! let ep = domain.endpoint(EpType::Dgram)?;
//! ep.bind_cq(&cq, Flags::TRANSMIT | Flags::RECV)?;
//! ep.bind_av(&av)?;
//! ep.enable()?;
//!
//! let me = av.insert(ep.addr())?;
//! ep.recv(Buf::zeroed(64), FI_ADDR_UNSPEC, "rx")?;
//! ep.send(Buf::from(&b"hello"[..]), me, "tx")?;
//! for _ in 0..2 {
//!     let c = cq.sread(Duration::from_secs(1))?;
//!     c.result()?;
//!     if c.context == "rx" {
//!         assert_eq!(&*c.buf, b"hello");
//!     }
//! }
//! # Ok(())
//! # }
//! ```

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::{Arc, Mutex, PoisonError};

use dp_kernel::UdpConfig;
use ofi_nostd::addr::EpAddr;
use ofi_nostd::av::AvAttr;
use ofi_nostd::cntr::CntrAttr;
use ofi_nostd::cq::CqAttr;
use ofi_nostd::domain::{DomainConfig, DomainStats, ProgressReport};
use ofi_nostd::eq::WaitObj;
use ofi_nostd::flags::Flags;
use ofi_nostd::info::{
    EpType, FabricAttr, Info, Interface, Progress, ProviderConfig, ResourceMgmt, Threading,
    default_info,
};
use ofi_nostd::mem::{IoVec, Memory};
use ofi_nostd::mr::MrAttr;
use ofi_nostd::net::{NetConfig, NetStats};
use wire::link::Medium;

mod av;
mod buf;
mod cm;
mod cntr;
mod completion;
mod cq;
mod ep;
mod error;
mod mr;
mod poll;
mod sep;
mod shared;
mod srx;
mod table;

pub use av::Av;
pub use buf::Buf;
pub use cm::{ConnEvent, ConnRequest, PassiveEndpoint};
pub use cntr::Counter;
pub use completion::{Completion, CompletionError, RemoteEvent};
pub use cq::{Cq, CqBatch};
pub use ep::{AtomicDatatype, AtomicOp, Endpoint, Peek, RemoteRegion};
pub use error::{Error, PostError, Result};
pub use mr::Mr;
pub use poll::{PollSet, Pollable};
pub use sep::{RxContext, ScalableEndpoint, TxContext};
pub use srx::{SharedRxContext, SharedTxContext};
pub use table::OpId;
// The host runtime's parts the API's users name (their old paths).
pub use crate::runtime::{
    AutoProgress, DataPlane, Ethernet, HOST_MAX_PEERS, HOST_UNEXP_MSGS, HOST_UNEXP_SLOTS,
    IDLE_PASSES_PER_CLOCK, PassClock, READS_PER_PASS, Sleeper, WaitSet, WithFd, now,
    progress_until,
};

use crate::runtime::wait::{EventFd, WaitSet as Set};
use crate::runtime::{
    CoreDomain, CoreFabric, HOST_ARP_ENTRIES, Plane, PlaneKind, PlaneOptions, Policy,
    ProgressThread, Wake, host_rdm_config, open_plane_with, random_u64,
};
use crate::storage::Heap;
use shared::{CqState, DomainRef, Inner, Shared};

/// Event queues a fabric has room for.
const MAX_EQS: usize = 16;

/// An open fabric (fi_fabric(3)): the root every domain is opened from.
#[derive(Clone)]
pub struct Fabric {
    core: Arc<Mutex<CoreFabric>>,
}

impl Fabric {
    /// `fi_fabric` for the `nostd` fabric.
    pub fn open() -> Result<Fabric> {
        let core = CoreFabric::open(&FabricAttr::default(), 0, Heap, MAX_EQS)?;
        Ok(Fabric {
            core: Arc::new(Mutex::new(core)),
        })
    }

    /// The fabric's attributes.
    pub fn attr(&self) -> FabricAttr {
        self.lock().attr().clone()
    }

    /// Starts opening a domain: UDP on `127.0.0.1`, an ephemeral port, manual progress
    /// and [`ProviderConfig::DEFAULT`] pool sizes unless the builder says otherwise.
    pub fn domain(&self) -> DomainBuilder<'_> {
        DomainBuilder {
            fabric: self,
            cfg: ProviderConfig::DEFAULT,
            plane: PlaneSpec::Open(PlaneKind::Udp(UdpConfig::new(SocketAddrV4::new(
                Ipv4Addr::LOCALHOST,
                0,
            )))),
            progress: ProgressMode::Manual,
            rdm: None,
            auth_key: Vec::new(),
            queues: 1,
        }
    }

    /// Domains open on this fabric (a fabric with domains cannot close).
    pub fn domains(&self) -> usize {
        self.lock().domains()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CoreFabric> {
        self.core.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// How a domain makes progress (fi_domain(3) `data_progress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProgressMode {
    /// FI_PROGRESS_MANUAL: the application's calls drive progress.
    #[default]
    Manual,
    /// FI_PROGRESS_AUTO: a thread of the domain drives it.
    Auto(AutoProgress),
}

enum PlaneSpec {
    /// A kernel plane the runtime opens.
    Open(PlaneKind),
    /// A link the application built.
    Custom(Plane<dyn Memory>),
}

/// Options of a domain before it opens; from [`Fabric::domain`].
pub struct DomainBuilder<'f> {
    fabric: &'f Fabric,
    cfg: ProviderConfig,
    plane: PlaneSpec,
    progress: ProgressMode,
    rdm: Option<ofi_nostd::rdm::RdmConfig>,
    auth_key: Vec<u8>,
    queues: usize,
}

impl DomainBuilder<'_> {
    /// Receive queues of the data plane the domain opens: one per context of the
    /// scalable endpoint it will serve, so that the plane steers each context's
    /// traffic to a queue of its own and the thread polling that context's CQ
    /// receives and transmits for it alone ([`PlaneOptions::queues`]; kernel UDP and
    /// AF_PACKET, one queue elsewhere). Context k is on queue `k % n`. Default 1.
    pub fn queues(mut self, n: usize) -> Self {
        self.queues = n;
        self
    }

    /// The domain's `auth_key` (fi_domain(3) `domain_attr->auth_key`): only peers with
    /// the same key connect, and every packet of their sessions carries a MAC under it
    /// (wire protocol 4.5, 4.10); a peer with another key or none fails the connection
    /// with -FI_EKEYREJECTED. Longer than the core's `AUTH_KEY_CAP`: `open` fails with
    /// -FI_EINVAL.
    pub fn auth_key(mut self, key: &[u8]) -> Self {
        self.auth_key = key.to_vec();
        self
    }

    /// The RDM engine's tuning (windows, timers, ack holding, eager threshold, pool
    /// sizes), used as given; without it the domain takes the core's defaults, with
    /// the protocol's CRC32C only where neither the UDP checksum nor the medium
    /// protects a packet.
    pub fn rdm(mut self, cfg: ofi_nostd::rdm::RdmConfig) -> Self {
        self.rdm = Some(cfg);
        self
    }

    /// Pool capacities and queue defaults (endpoints, CQs, counters, MRs per domain;
    /// queue depths and inject size per endpoint).
    pub fn config(mut self, cfg: ProviderConfig) -> Self {
        self.cfg = cfg;
        self
    }

    /// A UDP socket bound to `bind` (port 0: ephemeral) as the data plane.
    pub fn udp(self, bind: SocketAddrV4) -> Self {
        self.udp_config(UdpConfig::new(bind))
    }

    /// A UDP socket built from `cfg` as the data plane.
    pub fn udp_config(mut self, cfg: UdpConfig) -> Self {
        self.plane = PlaneSpec::Open(PlaneKind::Udp(cfg));
        self
    }

    /// The TAP device `name` (created if missing; needs CAP_NET_ADMIN) as the data
    /// plane, the stack at `eth` on it.
    pub fn tap(mut self, name: &str, eth: Ethernet) -> Self {
        self.plane = PlaneSpec::Open(PlaneKind::Tap(Some(name.to_owned()), eth));
        self
    }

    /// An AF_PACKET socket on interface `ifname` (needs CAP_NET_RAW) as the data plane,
    /// the stack at `eth` on it.
    pub fn af_packet(mut self, ifname: &str, eth: Ethernet) -> Self {
        self.plane = PlaneSpec::Open(PlaneKind::AfPacket(ifname.to_owned(), eth));
        self
    }

    /// Any link (a simulator's, a test double, a wrapped kernel link), the stack at
    /// `net` on it.
    pub fn link<L: DataPlane>(self, link: L, net: NetConfig) -> Self {
        let caps = link.capabilities();
        let driver = Box::new(link);
        self.plane(Plane { driver, caps, net })
    }

    /// A plane the host runtime opened ([`open_plane_with`]:
    /// a kernel or DPDK link with a capture or a fault injector), as [`link`](Self::link).
    pub fn plane(mut self, plane: Plane<dyn Memory>) -> Self {
        self.plane = PlaneSpec::Custom(plane);
        self
    }

    /// How the domain makes progress.
    pub fn progress(mut self, mode: ProgressMode) -> Self {
        self.progress = mode;
        self
    }

    /// Automatic progress with the default tuning.
    pub fn auto_progress(self) -> Self {
        self.progress(ProgressMode::Auto(AutoProgress::default()))
    }

    /// `fi_domain`: opens the data plane and the domain on it. Completions carry
    /// application contexts of type `C`.
    pub fn open<C: Send + 'static>(self) -> Result<Domain<C>> {
        let (Plane { driver, net, caps }, name) = match self.plane {
            PlaneSpec::Open(kind) => {
                let name = kind.name();
                let opts = PlaneOptions {
                    queues: self.queues,
                    ..PlaneOptions::default()
                };
                (
                    open_plane_with(kind, opts).map_err(std::io::Error::from)?,
                    name,
                )
            }
            PlaneSpec::Custom(plane) => (plane, "link".to_owned()),
        };
        let ip_mtu = match caps.medium {
            Medium::Udp => net.mtu + 28,
            Medium::Ethernet => net.mtu.saturating_sub(14),
        };
        let mut cfg = self.cfg;
        cfg.progress_manual = true;
        cfg.progress_auto = true;
        cfg.threading = Threading::Safe;
        let iface = Interface {
            name: &name,
            ip: net.local_ip,
            prefix_len: net.prefix_len,
            mtu: ip_mtu,
            loopback: net.local_ip[0] == 127,
        };
        // The RDM offer's capabilities contain the DGRAM ones, so both endpoint types
        // can open on this domain.
        let mut info = default_info(EpType::Rdm, Some(&iface), &cfg);
        let progress = match self.progress {
            ProgressMode::Manual => Progress::Manual,
            ProgressMode::Auto(_) => Progress::Auto,
        };
        info.domain_attr.data_progress = progress;
        info.domain_attr.control_progress = progress;
        info.domain_attr.resource_mgmt = ResourceMgmt::Enabled;
        info.domain_attr.threading = Threading::Safe;
        info.domain_attr.auth_key = ofi_nostd::info::AuthKey::from_slice(&self.auth_key)
            .map_err(|_| ofi_nostd::Errno::EINVAL)?;
        let dc = DomainConfig {
            arp_entries: HOST_ARP_ENTRIES,
            queues: driver.queues(),
            ..DomainConfig::new(net, cfg, random_u64())
        };
        let link_fd = driver
            .wait_fd()
            .map(|f| f.try_clone_to_owned())
            .transpose()?;
        let mut core = {
            let mut f = self.fabric.lock();
            CoreDomain::open(&mut f, &info, dc, Heap, 0)?
        };
        let rdm = self
            .rdm
            .unwrap_or_else(|| host_rdm_config(core.rdm_config(), &caps));
        core.set_rdm_config(rdm)?;
        let local = core.local_addr();
        let auto = match self.progress {
            ProgressMode::Manual => None,
            ProgressMode::Auto(a) => Some(a),
        };
        let inner = Inner::new(core, driver);
        let activity = inner.activity();
        let shared = Arc::new(Shared {
            inner: Mutex::new(inner),
            fabric: self.fabric.core.clone(),
            auto,
            link_fd,
            thread: std::sync::OnceLock::new(),
            users: std::sync::atomic::AtomicUsize::new(0),
            info,
            local,
        });
        if let Some(a) = auto {
            let link = shared.link_fd.as_ref().map(|f| f.try_clone()).transpose()?;
            let arc = shared.clone();
            let t = ProgressThread::spawn(
                "ofi-progress",
                Policy::Spin(a),
                link,
                activity,
                move || Some(arc.lock().turn()),
            )?;
            let _ = shared.thread.set(t);
        }
        Ok(Domain {
            shared: DomainRef::new(shared),
        })
    }
}

/// An open domain (fi_domain(3)): one link, and every object opened on it.
///
/// Cloning gives another handle to the same domain. Objects opened on it keep it alive;
/// it closes (stopping its progress thread and its link) when the last of them is gone.
/// `C` is the type of the application contexts its operations carry.
pub struct Domain<C: Send + 'static = u64> {
    shared: DomainRef<C>,
}

impl<C: Send + 'static> Clone for Domain<C> {
    fn clone(&self) -> Self {
        Domain {
            shared: self.shared.clone(),
        }
    }
}

impl<C: Send + 'static> Domain<C> {
    /// The info the domain was opened with (fi_getinfo's view of it).
    pub fn info(&self) -> &Info {
        &self.shared.info
    }

    /// The domain's address (endpoint id 0): IPv4 address and UDP port.
    pub fn local_addr(&self) -> EpAddr {
        self.shared.local
    }

    /// How the domain makes progress.
    pub fn progress_mode(&self) -> ProgressMode {
        match self.shared.auto {
            None => ProgressMode::Manual,
            Some(a) => ProgressMode::Auto(a),
        }
    }

    /// Runs one progress pass now: receive what the link has, deliver it, transmit
    /// what is queued. Useful with manual progress when not reading a CQ; harmless
    /// with automatic progress.
    pub fn progress(&self) -> Result<ProgressReport> {
        Ok(self.shared.lock().progress()?)
    }

    /// Datagrams the domain refused and traffic totals.
    pub fn stats(&self) -> DomainStats {
        *self.shared.lock().core.stats()
    }

    /// The RDM engine's tuning in effect (see [`DomainBuilder::rdm`]).
    pub fn rdm_config(&self) -> ofi_nostd::rdm::RdmConfig {
        *self.shared.lock().core.rdm_config()
    }

    /// What the data plane dropped on receive before the stack saw it.
    pub fn link_drops(&self) -> crate::drops::LinkDrops {
        self.shared.lock().link_drops()
    }

    /// What each receive queue of the data plane moved, queue by queue (one entry
    /// unless the domain opened [`DomainBuilder::queues`]; zeros where the link counts
    /// nothing).
    pub fn queue_counts(&self) -> Vec<crate::runtime::QueueCounts> {
        self.shared.lock().queue_counts()
    }

    /// What the UDP/IPv4 layer dropped and sent.
    pub fn net_stats(&self) -> NetStats {
        *self.shared.lock().core.net_stats()
    }

    /// Buffers the domain holds for posted or completed-but-unread operations.
    pub fn buffers_held(&self) -> usize {
        self.shared.lock().ops.len()
    }

    /// `fi_cq_open` with `size` entries (0: the default) and an fd wait object, so
    /// [`Cq::sread`], [`Cq::trywait`] and [`Cq::fd`] work.
    pub fn cq(&self, size: usize) -> Result<Cq<C>> {
        self.cq_with(&CqAttr {
            size,
            wait_obj: WaitObj::Fd,
            ..CqAttr::default()
        })
    }

    /// `fi_cq_open` with full attributes. With FI_WAIT_NONE the CQ cannot block
    /// (sread is -FI_ENOSYS, trywait -FI_EINVAL, as fi_cq(3) says).
    pub fn cq_with(&self, attr: &CqAttr) -> Result<Cq<C>> {
        let event = Arc::new(EventFd::new()?);
        let wait = self.wait_set(attr.wait_obj, &event)?;
        let mut g = self.shared.lock();
        let h = g.core.cq_open(attr, 0)?;
        g.wakes.add(Wake::Cq(h), event.clone());
        g.cqs.push(CqState {
            h,
            early: Default::default(),
            remote: Default::default(),
        });
        Ok(Cq::new(self.shared.clone(), h, event, wait))
    }

    /// `fi_cntr_open` with an fd wait object, so [`Counter::wait`] works.
    pub fn counter(&self) -> Result<Counter<C>> {
        self.counter_with(&CntrAttr {
            wait_obj: WaitObj::Fd,
            ..CntrAttr::default()
        })
    }

    /// `fi_cntr_open` with full attributes.
    pub fn counter_with(&self, attr: &CntrAttr) -> Result<Counter<C>> {
        let event = Arc::new(EventFd::new()?);
        let wait = self.wait_set(attr.wait_obj, &event)?;
        let mut g = self.shared.lock();
        let h = g.core.cntr_open(attr, 0)?;
        g.wakes.add(Wake::Cntr(h), event.clone());
        Ok(Counter::new(self.shared.clone(), h, event, wait))
    }

    /// `fi_av_open` with the defaults (FI_AV_TABLE, 1024 addresses).
    pub fn av(&self) -> Result<Av<C>> {
        self.av_with(&mut AvAttr::default())
    }

    /// `fi_av_open` with full attributes (the resolved type is written back).
    pub fn av_with(&self, attr: &mut AvAttr<'_>) -> Result<Av<C>> {
        let h = self.shared.lock().core.av_open(attr, 0)?;
        Ok(Av::new(self.shared.clone(), h))
    }

    /// `fi_endpoint` of type `ep_type` (FI_EP_DGRAM: unreliable datagrams up to the
    /// link MTU; FI_EP_RDM: reliable messages and tagged messages of any size) with
    /// this domain's defaults.
    pub fn endpoint(&self, ep_type: EpType) -> Result<Endpoint<C>> {
        let mut info = self.shared.info.clone();
        if ep_type == EpType::Dgram {
            let iface_caps = info.caps & (Flags::LOCAL_COMM | Flags::REMOTE_COMM);
            info.caps = Flags::MSG
                | Flags::SEND
                | Flags::RECV
                | Flags::MULTI_RECV
                | Flags::SOURCE
                | iface_caps;
        }
        info.ep_attr.ep_type = ep_type;
        info.ep_attr.max_msg_size = 0;
        info.tx_attr.inject_size = 0;
        info.tx_attr.size = 0;
        info.rx_attr.size = 0;
        self.endpoint_with(&info)
    }

    /// `fi_endpoint` with full attributes (`info` as getinfo would return it; zero
    /// sizes take the domain's defaults).
    pub fn endpoint_with(&self, info: &Info) -> Result<Endpoint<C>> {
        let mut g = self.shared.lock();
        let h = g.core.ep_open(info, 0)?;
        let depth = {
            let ep = g.core.ep(h)?;
            ep.tx_size_left() + ep.rx_size_left()
        };
        g.ops.reserve(depth);
        g.eps.push(shared::EpState { h, cqs: Vec::new() });
        let addr = g.core.ep_addr(h)?;
        drop(g);
        Ok(Endpoint::new(self.shared.clone(), h, addr))
    }

    /// `fi_mr_regattr` of `buf` with `access` (FI_SEND, FI_RECV, FI_READ, FI_WRITE,
    /// FI_REMOTE_*): the region owns the buffer until [`Mr::close`] gives it back, so
    /// registered memory can never be freed while registered. Peers address it from
    /// offset 0 ([`RemoteRegion`]) with its [`Mr::key`].
    pub fn register(&self, buf: Buf, access: Flags) -> Result<Mr<C>, PostError<()>> {
        let iov = [IoVec::new(buf.addr(), buf.capacity())];
        let attr = MrAttr {
            mr_iov: &iov,
            access,
            // Unique among the live regions (their buffers never overlap).
            requested_key: buf.addr(),
            ..MrAttr::default()
        };
        let mut g = self.shared.lock();
        let r = g.core.mr_reg(&attr, Flags::empty());
        match r {
            Ok(h) => {
                g.ops.add_region(h.to_desc(), buf);
                drop(g);
                Ok(Mr::new(self.shared.clone(), h))
            }
            Err(errno) => Err(PostError {
                errno,
                buf,
                context: (),
            }),
        }
    }

    /// The wait set of a new CQ or counter: an epoll fd over its eventfd and, with
    /// manual progress, the link's descriptor while someone may sleep (see
    /// [`WaitSet`]). `None` for FI_WAIT_NONE.
    fn wait_set(&self, obj: WaitObj, event: &EventFd) -> Result<Option<WaitSet>> {
        if obj == WaitObj::None {
            return Ok(None);
        }
        use std::os::fd::AsFd;
        let link = match &self.shared.link_fd {
            Some(l) if self.shared.manual() => Some(l.as_fd()),
            _ => None,
        };
        Ok(Some(Set::new(&[event.as_fd()], link)?))
    }
}
