//! The firmware's application: the core brought up on one link, serving ping-pong
//! responders.
//!
//! [`Responder::new`] opens a fabric, a domain on the link, one CQ, one AV holding the
//! peers it serves, a DGRAM endpoint (endpoint 0) and an FI_EP_RDM endpoint (endpoint
//! 1); it posts every receive buffer. Each [`Responder::poll`] runs the core's progress
//! and then turns completions around: a received message is sent back to its source
//! from the same buffer (a tagged one with the same tag), and once that send completes
//! the buffer is posted for receiving again. Nothing is copied besides what the core
//! copies between the link's buffers and these.
//!
//! Three services, each an [`Echo`] with buffers of its own: DGRAM messages
//! ([`DGRAM_SLOTS`] of [`DGRAM_BUF`] bytes), RDM messages and RDM tagged messages
//! ([`RDM_SLOTS`] of [`RDM_BUF`] bytes each). The buffers live in the responder (so in
//! static memory on firmware) and the core reaches them through one [`Memory`] with
//! each service 16 MiB apart from [`BUF_BASE`].

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
use ofi_nostd::mem::{IoVec, Memory, SliceMemory};
use ofi_nostd::net::NetConfig;
use ofi_nostd::rdm::RdmConfig;
use ofi_nostd::storage::Storage;
use ofi_nostd::time::Duration;
use ofi_nostd::time::Instant;
use wire::link::Link;

/// Address at which the core sees the responder's buffers (an I/O-virtual address: the
/// [`SliceMemory`] translates it, no pointer is involved).
pub const BUF_BASE: u64 = 0x1000_0000;

/// Receive buffers of the DGRAM service (each one a datagram in flight at most).
pub const DGRAM_SLOTS: usize = 8;

/// Bytes of one DGRAM buffer: the largest UDP payload of a 1500-byte MTU.
pub const DGRAM_BUF: usize = 1472;

/// Receive buffers of each RDM service (messages, tagged messages).
pub const RDM_SLOTS: usize = 2;

/// Bytes of one RDM buffer: the largest message echoed.
pub const RDM_BUF: usize = 64 * 1024;

/// Bytes of the arena the firmware opens the core in: fabric, domain, pools and the
/// RDM engine with [`RDM_CONFIG`] take ~53 KiB at 1514-byte frames and ~170 KiB at
/// 9014-byte jumbo frames (its reorder and unexpected slots are one packet each).
pub const FW_ARENA: usize = 256 << 10;

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
const CQ_SIZE: usize = 32;

/// The RDM engine sized for firmware: one or two peers, a 32-packet window, small
/// reorder and unexpected-message pools (each slot is one `max_pkt`, up to a jumbo
/// frame), echoes of up to [`RDM_BUF`] bytes sent eagerly (the host always has its
/// receive posted first), and timeouts for a slow core (QEMU's TCG) rather than a LAN.
pub const RDM_CONFIG: RdmConfig = RdmConfig {
    window: 32,
    rx_window: 0,
    max_peers: 4,
    reorder_slots: 8,
    unexp_slots: 8,
    // Whole packets per slot, as the arena is sized.
    unexp_seg: usize::MAX,
    unexp_msgs: 8,
    claimed_msgs: 1,
    eager_threshold: RDM_BUF,
    rto_initial: Duration::from_millis(20),
    rto_min: Duration::from_millis(5),
    rto_max: Duration::from_millis(500),
    max_retries: 12,
    hello_retries: 8,
    ack_delay: Duration::from_micros(200),
    // The echo goes back as soon as the core gets to it: let it carry the ack.
    ack_hold: Duration::from_micros(50),
    handshake_timeout: Duration::from_secs(2),
    crc: false,
    // The echo server answers one message at a time: nothing to bundle, but a host
    // that bundles its burst is understood.
    bundle: true,
    short_ack: true,
};

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
    /// endpoint 0 (of a DGRAM or an RDM endpoint there). (Peers must be in the AV: a
    /// completion names its source only by AV entry.)
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
    /// fi_recv / fi_send (DGRAM or RDM).
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
pub struct Echo<const SLOTS: usize, const BUF: usize> {
    service: Service,
    ep_index: u64,
    state: [SlotState; SLOTS],
    stats: Stats,
    bufs: [[u8; BUF]; SLOTS],
}

impl<const SLOTS: usize, const BUF: usize> core::fmt::Debug for Echo<SLOTS, BUF> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Echo")
            .field("service", &self.service)
            .field("ep_index", &self.ep_index)
            .field("state", &self.state)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<const SLOTS: usize, const BUF: usize> Echo<SLOTS, BUF> {
    /// Slots of `BUF` bytes, none posted; `ep_index` (below 16) tells services apart in
    /// contexts and places their buffers.
    pub const fn new(service: Service, ep_index: u64) -> Self {
        Echo {
            service,
            ep_index,
            state: [SlotState::Idle; SLOTS],
            stats: Stats {
                rx: 0,
                echoed: 0,
                bytes: 0,
                errors: 0,
                unknown_src: 0,
                retries: 0,
            },
            bufs: [[0; BUF]; SLOTS],
        }
    }

    /// What this service counted.
    pub fn stats(&self) -> &Stats {
        &self.stats
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
    fn post<S: Storage>(&mut self, dom: &mut Domain<S>, ep: EpHandle<S>) {
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
                Err(_) => self.stats.retries += 1,
            }
        }
    }

    /// Applies one completion; false if it is not this service's.
    fn complete(&mut self, e: &CqTaggedEntry, src: FiAddr) -> bool {
        let Some((slot, send)) = self.slot_of(e.op_context) else {
            return false;
        };
        let stats = &mut self.stats;
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
    fn fail(&mut self, ctx: u64) -> bool {
        let Some((slot, _)) = self.slot_of(ctx) else {
            return false;
        };
        self.stats.errors += 1;
        self.state[slot] = SlotState::Idle;
        true
    }

    fn memory(&mut self) -> SliceMemory<'_> {
        SliceMemory::new(BUF_BASE + self.base_offset(), self.bufs.as_flattened_mut())
    }
}

/// The services' buffers as one [`Memory`]: an address picks its service by its 16 MiB
/// window above [`BUF_BASE`].
struct Windows<'a, const N: usize>([SliceMemory<'a>; N]);

impl<const N: usize> Windows<'_, N> {
    fn window(addr: u64) -> ofi_nostd::Result<usize> {
        let i = addr.checked_sub(BUF_BASE).ok_or(Errno::EFAULT)? >> 24;
        usize::try_from(i)
            .ok()
            .filter(|&i| i < N)
            .ok_or(Errno::EFAULT)
    }
}

impl<const N: usize> Memory for Windows<'_, N> {
    fn read(&self, addr: u64, out: &mut [u8]) -> ofi_nostd::Result<()> {
        self.0[Self::window(addr)?].read(addr, out)
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> ofi_nostd::Result<()> {
        self.0[Self::window(addr)?].write(addr, data)
    }
}

/// The core on one link with DGRAM and RDM ping-pong responders, in storage `S`.
pub struct Responder<S: Storage> {
    fabric: Fabric<S>,
    domain: Domain<S>,
    cq: CqHandle<S>,
    av: AvHandle<S>,
    dgram_ep: EpHandle<S>,
    rdm_ep: EpHandle<S>,
    dgram: Echo<DGRAM_SLOTS, DGRAM_BUF>,
    msg: Echo<RDM_SLOTS, RDM_BUF>,
    tagged: Echo<RDM_SLOTS, RDM_BUF>,
}

impl<S: Storage> core::fmt::Debug for Responder<S> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Responder")
            .field("dgram", &self.dgram)
            .field("msg", &self.msg)
            .field("tagged", &self.tagged)
            .finish_non_exhaustive()
    }
}

/// The DGRAM info the responder opens its DGRAM endpoint with.
pub fn dgram_info() -> Info {
    let mut info = default_info(EpType::Dgram, None, &PROVIDER_CONFIG);
    info.caps |= Flags::SOURCE;
    info
}

/// The RDM info the responder opens its domain and RDM endpoint with (its capabilities
/// contain the DGRAM ones, so both endpoint types open on the domain).
pub fn rdm_info() -> Info {
    let mut info = default_info(EpType::Rdm, None, &PROVIDER_CONFIG);
    info.caps |= Flags::SOURCE;
    info
}

impl<S: Storage> Responder<S> {
    /// Brings up the core on a link with capabilities `caps` at `plan`, the host peer of
    /// the plan in the AV, the RDM engine sized by [`RDM_CONFIG`], every receive posted.
    /// `store` must be callable for each object (the same `Storage` value is cloned into
    /// fabric and domain).
    pub fn new(
        caps: &wire::link::Capabilities,
        plan: &Plan,
        store: S,
        seed: u64,
    ) -> Result<Self, BringUpError>
    where
        S: Clone,
    {
        let info = rdm_info();
        let mut fabric = step(
            "fi_fabric",
            Fabric::open(&FabricAttr::default(), 0, store.clone(), 0),
        )?;
        let net =
            NetConfig::new(caps, plan.ip, plan.port).with_ethernet(plan.mac, plan.prefix_len, None);
        let dc = DomainConfig {
            arp_entries: 8,
            // The responder never sends to itself; two jumbo slots keep self-sends
            // working without growing the arena much.
            loopback_slots: 2,
            ..DomainConfig::new(net, PROVIDER_CONFIG, seed)
        };
        let mut domain = step("fi_domain", Domain::open(&mut fabric, &info, dc, store, 0))?;
        step("set_rdm_config", domain.set_rdm_config(RDM_CONFIG))?;
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
        let eps = [dgram_info(), info].map(|i| {
            let ep = step("fi_endpoint", domain.ep_open(&i, 0))?;
            step(
                "fi_ep_bind(cq)",
                domain.ep_bind(ep, BindTarget::Cq(cq), Flags::TRANSMIT | Flags::RECV),
            )?;
            step(
                "fi_ep_bind(av)",
                domain.ep_bind(ep, BindTarget::Av(av), Flags::empty()),
            )?;
            step("fi_enable", domain.ep_enable(ep))?;
            Ok(ep)
        });
        let [dgram_ep, rdm_ep] = eps;
        let mut r = Responder {
            fabric,
            domain,
            cq,
            av,
            dgram_ep: dgram_ep?,
            rdm_ep: rdm_ep?,
            dgram: Echo::new(Service::Msg, 0),
            msg: Echo::new(Service::Msg, 1),
            tagged: Echo::new(Service::Tagged, 2),
        };
        r.post();
        Ok(r)
    }

    fn post(&mut self) {
        self.dgram.post(&mut self.domain, self.dgram_ep);
        self.msg.post(&mut self.domain, self.rdm_ep);
        self.tagged.post(&mut self.domain, self.rdm_ep);
    }

    /// What the DGRAM service counted.
    pub fn stats(&self) -> &Stats {
        self.dgram.stats()
    }

    /// What the RDM message service counted.
    pub fn msg_stats(&self) -> &Stats {
        self.msg.stats()
    }

    /// What the RDM tagged service counted.
    pub fn tagged_stats(&self) -> &Stats {
        self.tagged.stats()
    }

    /// The RDM endpoint's engine statistics.
    pub fn rdm_stats(&self) -> Option<ofi_nostd::rdm::RdmStats> {
        let ep = self.domain.ep(self.rdm_ep).ok()?;
        ep.rdm().map(|r| *r.stats())
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
        let mut mem = Windows([self.dgram.memory(), self.msg.memory(), self.tagged.memory()]);
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
                        let _ = self.dgram.complete(e, src)
                            || self.msg.complete(e, src)
                            || self.tagged.complete(e, src);
                    }
                    moved |= n > 0;
                }
                Err(Errno::EAVAIL) => {
                    let mut err_data = [0u8; 64];
                    if let Ok(e) = cq.readerr(Flags::empty(), API_VERSION, &mut err_data) {
                        let ctx = e.op_context;
                        let _ = self.dgram.fail(ctx) || self.msg.fail(ctx) || self.tagged.fail(ctx);
                    }
                    moved = true;
                }
                Err(_) => break,
            }
        }
        self.post();
        moved
    }

    /// When [`Responder::poll`] must run again at the latest if nothing arrives.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.domain.poll_timeout()
    }
}
