//! The firmware's application: the core brought up on one link, serving a ping-pong
//! responder.
//!
//! [`Responder::new`] opens a fabric, a domain on the link, one CQ, one AV holding the
//! peers it serves, and a DGRAM endpoint; it posts every receive buffer. Each
//! [`Responder::poll`] runs the core's progress and then turns completions around:
//! a received datagram is sent back to its source from the same buffer, and once that
//! send completes the buffer is posted for receiving again. Nothing is copied besides
//! what the core copies between the link's buffers and these.
//!
//! The buffers live in the responder (so in static memory on firmware) and the core
//! reaches them through a [`SliceMemory`] at [`BUF_BASE`]. Each endpoint's buffers
//! cycle through an [`Echo`]; the RDM engine adds an RDM endpoint with a message and a
//! tagged [`Echo`] of its own (see [`Service`]).

use ofi_nostd::addr::EpAddr;
use ofi_nostd::av::{AvAddrs, AvAttr};
use ofi_nostd::cq::{CqAttr, CqFormat, CqTaggedEntry};
use ofi_nostd::domain::{AvHandle, BindTarget, CqHandle, Domain, DomainConfig, EpHandle};
use ofi_nostd::errno::Errno;
use ofi_nostd::fabric::Fabric;
use ofi_nostd::flags::{FI_ADDR_NOTAVAIL, FI_ADDR_UNSPEC, FiAddr, Flags};
use ofi_nostd::info::{
    API_VERSION, EpType, FabricAttr, Info, ProviderConfig, Threading, default_info,
};
use ofi_nostd::mem::{IoVec, SliceMemory};
use ofi_nostd::net::NetConfig;
use ofi_nostd::storage::Storage;
use ofi_nostd::time::Instant;
use wire::link::Link;

/// Address at which the core sees the responder's buffers (an I/O-virtual address: the
/// [`SliceMemory`] translates it, no pointer is involved).
pub const BUF_BASE: u64 = 0x1000_0000;

/// Receive buffers of the DGRAM service (each one a datagram in flight at most).
pub const DGRAM_SLOTS: usize = 8;

/// Bytes of one DGRAM buffer: the largest UDP payload of a 1500-byte MTU.
pub const DGRAM_BUF: usize = 1472;

/// Bit of an operation context that marks a send (the rest is the slot).
const CTX_SEND: u64 = 1 << 32;

/// The limits the firmware's domain is opened with: small pools, queues that fit
/// [`ofi_nostd::storage::Fixed`]`<16>` (its largest slice is the receive queue's
/// hash buckets, twice `rx_size` rounded up to a power of two).
pub const PROVIDER_CONFIG: ProviderConfig = ProviderConfig {
    inject_size: 0,
    tx_size: DGRAM_SLOTS,
    rx_size: DGRAM_SLOTS,
    ep_cnt: 2,
    cq_cnt: 2,
    cntr_cnt: 1,
    mr_cnt: 1,
    threading: Threading::Domain,
    progress_auto: false,
    ..ProviderConfig::DEFAULT
};

/// Completion queue depth: every slot has at most one operation outstanding.
const CQ_SIZE: usize = 16;

/// Where the responder lives on the link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Our MAC address.
    pub mac: [u8; 6],
    /// Our IPv4 address.
    pub ip: [u8; 4],
    /// Prefix length of the subnet.
    pub prefix_len: u8,
    /// Our UDP port.
    pub port: u16,
}

/// The UDP port the firmware serves on, and the port of the host peer it answers.
pub const FW_PORT: u16 = 7471;

/// The default address when the MAC does not carry one (see [`Plan::from_mac`]).
pub const DEFAULT_IP: [u8; 4] = [10, 213, 250, 2];

impl Plan {
    /// The plan of a device whose MAC is `mac`: a locally administered MAC of the form
    /// `02:00:a:b:c:d` gives the address `a.b.c.d/24` (so QEMU's `mac=` property is the
    /// one knob that places the image on a subnet); any other MAC gets [`DEFAULT_IP`].
    pub fn from_mac(mac: [u8; 6]) -> Self {
        let ip = match mac {
            [0x02, 0x00, a, b, c, d] if a != 0 && d != 0 && d != 255 => [a, b, c, d],
            _ => DEFAULT_IP,
        };
        Plan {
            mac,
            ip,
            prefix_len: 24,
            port: FW_PORT,
        }
    }

    /// The MAC that makes [`Plan::from_mac`] choose `ip`.
    pub fn mac_for(ip: [u8; 4]) -> [u8; 6] {
        [0x02, 0x00, ip[0], ip[1], ip[2], ip[3]]
    }

    /// The host peer the responder answers: address `.1` of the subnet, [`FW_PORT`],
    /// endpoint 0. (Peers must be in the AV: a DGRAM completion names its source only by
    /// AV entry.)
    pub fn host_peer(&self) -> EpAddr {
        let [a, b, c, _] = self.ip;
        EpAddr::new([a, b, c, 1], FW_PORT, 0)
    }
}

/// What the responder counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Datagrams received.
    pub rx: u64,
    /// Datagrams echoed (send completed successfully).
    pub echoed: u64,
    /// Payload bytes echoed.
    pub bytes: u64,
    /// Error completions (receive or send), all recovered by reposting.
    pub errors: u64,
    /// Received datagrams from a source not in the AV (not answered).
    pub unknown_src: u64,
    /// Times the core refused an operation (e.g. -FI_EAGAIN); retried on the next poll.
    pub retries: u64,
}

/// A failure of [`Responder::new`]: the call that failed and its error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BringUpError {
    /// The libfabric call.
    pub call: &'static str,
    /// Its error.
    pub errno: Errno,
}

fn step<T>(call: &'static str, r: ofi_nostd::Result<T>) -> Result<T, BringUpError> {
    r.map_err(|errno| BringUpError { call, errno })
}

/// Which kind of operation a service echoes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Service {
    /// fi_recv / fi_send (DGRAM now; RDM messages later).
    Msg,
    /// fi_trecv / fi_tsend with the received tag (RDM).
    Tagged,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SlotState {
    /// Not posted (a post was refused; retried on the next poll).
    Idle,
    /// A receive is posted.
    Receiving,
    /// Received `len` bytes from `src` with `tag`; the echo is not posted yet.
    Received { len: usize, src: FiAddr, tag: u64 },
    /// The echo of `len` bytes is posted.
    Sending { len: usize },
}

/// The buffers of one echo service on one endpoint, each cycling receive → send → receive.
#[derive(Debug)]
pub struct Echo<const SLOTS: usize, const BUF: usize> {
    service: Service,
    ep_index: u64,
    state: [SlotState; SLOTS],
    bufs: [[u8; BUF]; SLOTS],
}

impl<const SLOTS: usize, const BUF: usize> Echo<SLOTS, BUF> {
    /// Slots of `BUF` bytes, none posted; `ep_index` tells services apart in contexts.
    pub const fn new(service: Service, ep_index: u64) -> Self {
        Echo {
            service,
            ep_index,
            state: [SlotState::Idle; SLOTS],
            bufs: [[0; BUF]; SLOTS],
        }
    }

    fn iov(&self, slot: usize, len: usize) -> IoVec {
        IoVec::new(
            BUF_BASE + self.base_offset() + (slot * BUF) as u64,
            len.min(BUF),
        )
    }

    /// Offset of this service's buffers in the I/O-virtual space (services are 16 MiB
    /// apart).
    fn base_offset(&self) -> u64 {
        self.ep_index << 24
    }

    fn context(&self, slot: usize) -> u64 {
        (self.ep_index << 40) | slot as u64
    }

    /// Whether `ctx` is one of this service's, and which slot it names.
    fn slot_of(&self, ctx: u64) -> Option<(usize, bool)> {
        if ctx >> 40 != self.ep_index {
            return None;
        }
        let slot = (ctx & 0xffff_ffff) as usize;
        (slot < SLOTS).then_some((slot, ctx & CTX_SEND != 0))
    }

    /// Posts what can be posted: receives for idle slots, echoes for received ones.
    fn post<S: Storage>(&mut self, dom: &mut Domain<S>, ep: EpHandle<S>, stats: &mut Stats) {
        for slot in 0..SLOTS {
            let state = self.state[slot];
            let ctx = self.context(slot);
            let (iov, base) = (self.iov(slot, BUF), BUF_BASE + self.base_offset());

            let r = match state {
                SlotState::Idle => match self.service {
                    Service::Msg => dom.recv(ep, iov, FI_ADDR_UNSPEC, ctx),
                    Service::Tagged => dom.trecv(ep, iov, FI_ADDR_UNSPEC, 0, u64::MAX, ctx),
                }
                .map(|()| SlotState::Receiving),
                SlotState::Received { len, src, tag } => {
                    let iov = self.iov(slot, len);
                    let mem = SliceMemory::new(base, self.bufs.as_flattened_mut());
                    let ctx = ctx | CTX_SEND;
                    match self.service {
                        Service::Msg => dom.send(ep, &mem, iov, src, ctx),
                        Service::Tagged => dom.tsend(ep, &mem, iov, src, tag, ctx),
                    }
                    .map(|()| SlotState::Sending { len })
                }
                SlotState::Receiving | SlotState::Sending { .. } => continue,
            };
            match r {
                Ok(s) => self.state[slot] = s,
                Err(_) => stats.retries += 1,
            }
        }
    }

    /// Applies one completion; false if it is not this service's.
    fn complete(&mut self, e: &CqTaggedEntry, src: FiAddr, stats: &mut Stats) -> bool {
        let Some((slot, send)) = self.slot_of(e.op_context) else {
            return false;
        };
        if send {
            // Send completions carry no length: the slot remembers it.
            if let SlotState::Sending { len } = self.state[slot] {
                stats.bytes += len as u64;
            }
            stats.echoed += 1;
            self.state[slot] = SlotState::Idle;
        } else {
            stats.rx += 1;
            self.state[slot] = if src == FI_ADDR_NOTAVAIL {
                stats.unknown_src += 1;
                SlotState::Idle
            } else {
                SlotState::Received {
                    len: e.len,
                    src,
                    tag: e.tag,
                }
            };
        }
        true
    }

    /// An error completion for `ctx`: the slot starts over.
    fn fail(&mut self, ctx: u64, stats: &mut Stats) -> bool {
        let Some((slot, _)) = self.slot_of(ctx) else {
            return false;
        };
        stats.errors += 1;
        self.state[slot] = SlotState::Idle;
        true
    }

    fn memory(&mut self) -> SliceMemory<'_> {
        SliceMemory::new(BUF_BASE + self.base_offset(), self.bufs.as_flattened_mut())
    }
}

/// The core on one link with a DGRAM ping-pong responder, in storage `S`.
pub struct Responder<S: Storage> {
    fabric: Fabric<S>,
    domain: Domain<S>,
    cq: CqHandle<S>,
    av: AvHandle<S>,
    dgram_ep: EpHandle<S>,
    dgram: Echo<DGRAM_SLOTS, DGRAM_BUF>,
    stats: Stats,
}

impl<S: Storage> core::fmt::Debug for Responder<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Responder")
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// The DGRAM info the responder opens its domain and endpoint with.
pub fn dgram_info() -> Info {
    let mut info = default_info(EpType::Dgram, None, &PROVIDER_CONFIG);
    info.caps |= Flags::SOURCE;
    info
}

impl<S: Storage> Responder<S> {
    /// Brings up the core on a link with capabilities `caps` at `plan`, the host peer of
    /// the plan in the AV, every receive posted. `store` must be callable for each
    /// object (the same `Storage` value is cloned into fabric and domain).
    pub fn new(
        caps: &wire::link::Capabilities,
        plan: &Plan,
        store: S,
        seed: u64,
    ) -> Result<Self, BringUpError>
    where
        S: Clone,
    {
        let info = dgram_info();
        let mut fabric = step(
            "fi_fabric",
            Fabric::open(&FabricAttr::default(), 0, store.clone(), 0),
        )?;
        let net =
            NetConfig::new(caps, plan.ip, plan.port).with_ethernet(plan.mac, plan.prefix_len, None);
        let dc = DomainConfig {
            arp_entries: 8,
            ..DomainConfig::new(net, PROVIDER_CONFIG, seed)
        };
        let mut domain = step("fi_domain", Domain::open(&mut fabric, &info, dc, store, 0))?;
        let cq_attr = CqAttr {
            format: CqFormat::Tagged,
            size: CQ_SIZE,
            ..CqAttr::default()
        };
        let cq = step("fi_cq_open", domain.cq_open(&cq_attr, 0))?;
        let av = step(
            "fi_av_open",
            domain.av_open(
                &mut AvAttr {
                    count: 4,
                    ..AvAttr::default()
                },
                0,
            ),
        )?;
        let peer = [plan.host_peer()];
        let mut fi = [0 as FiAddr; 1];
        step(
            "fi_av_insert",
            domain
                .av_mut(av)
                .and_then(|a| a.insert(AvAddrs::Ep(&peer), Some(&mut fi), Flags::empty(), None)),
        )?;
        let dgram_ep = step("fi_endpoint", domain.ep_open(&info, 0))?;
        step(
            "fi_ep_bind(cq)",
            domain.ep_bind(dgram_ep, BindTarget::Cq(cq), Flags::TRANSMIT | Flags::RECV),
        )?;
        step(
            "fi_ep_bind(av)",
            domain.ep_bind(dgram_ep, BindTarget::Av(av), Flags::empty()),
        )?;
        step("fi_enable", domain.ep_enable(dgram_ep))?;
        let mut r = Responder {
            fabric,
            domain,
            cq,
            av,
            dgram_ep,
            dgram: Echo::new(Service::Msg, 0),
            stats: Stats::default(),
        };
        r.dgram.post(&mut r.domain, r.dgram_ep, &mut r.stats);
        Ok(r)
    }

    /// What the responder counted.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The domain (its network and protocol statistics).
    pub fn domain(&self) -> &Domain<S> {
        &self.domain
    }

    /// The fabric.
    pub fn fabric(&self) -> &Fabric<S> {
        &self.fabric
    }

    /// The AV of the served peers.
    pub fn av(&self) -> AvHandle<S> {
        self.av
    }

    /// One turn: the core's progress on `link`, then every completion turned around.
    /// Returns whether anything moved (the caller may idle when nothing did).
    pub fn poll<L: Link>(&mut self, now: Instant, link: &mut L) -> bool {
        let mut mem = self.dgram.memory();
        let report = self
            .domain
            .progress(now, link, &mut mem)
            .unwrap_or_default();
        let mut moved = report.rx + report.tx > 0;
        let mut entries = [CqTaggedEntry::default(); 8];
        let mut srcs = [0 as FiAddr; 8];
        while let Ok(cq) = self.domain.cq_mut(self.cq) {
            match cq.readfrom(&mut entries, &mut srcs) {
                Ok(n) => {
                    for (e, &src) in entries.iter().zip(srcs.iter()).take(n) {
                        self.dgram.complete(e, src, &mut self.stats);
                    }
                    moved |= n > 0;
                }
                Err(Errno::EAVAIL) => {
                    let mut err_data = [0u8; 64];
                    if let Ok(e) = cq.readerr(Flags::empty(), API_VERSION, &mut err_data) {
                        self.dgram.fail(e.op_context, &mut self.stats);
                    }
                    moved = true;
                }
                Err(_) => break,
            }
        }
        self.dgram
            .post(&mut self.domain, self.dgram_ep, &mut self.stats);
        moved
    }

    /// When [`Responder::poll`] must run again at the latest if nothing arrives.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.domain.poll_timeout()
    }
}
