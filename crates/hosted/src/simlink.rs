//! Domains on the network simulator: a [`wire::link::Link`] (UDP medium) over a
//! [`NetSim`] port, heap storage for the core's pools, and a driver that advances
//! virtual time from event to event (the next datagram arrival or the earliest
//! [`Domain::poll_timeout`]).
//!
//! Everything is deterministic: the simulator is seeded, every domain is seeded, and
//! nodes are progressed in a fixed order, so a failing seed replays exactly.

use std::net::{Ipv4Addr, SocketAddrV4};

use ofi_nostd::addr::EpAddr;
use ofi_nostd::av::{AvAddrs, AvAttr};
use ofi_nostd::cntr::CntrAttr;
use ofi_nostd::cq::{API_VERSION_1_5, CqAttr, CqEntry, CqFormat};
use ofi_nostd::domain::{
    AvHandle, BindTarget, CntrHandle, CqHandle, Domain, DomainConfig, EpHandle, ProgressReport,
};
use ofi_nostd::errno::{Errno, Result};
use ofi_nostd::fabric::Fabric;
use ofi_nostd::flags::{FiAddr, Flags};
use ofi_nostd::info::{EpType, FabricAttr, Info, ProviderConfig, default_info};
use ofi_nostd::mem::SliceMemory;
use ofi_nostd::net::NetConfig;
use ofi_nostd::rdm::RdmConfig;
use ofi_nostd::storage::Storage;
use ofi_nostd::time::{Duration, Instant};
use wire::link::{Capabilities, Link, Medium, RxMeta, RxToken, TxMeta, TxToken, UdpAddr};

use crate::netsim::{Datagram, NetSim, PortId};

/// Storage of boxed slices: every pool of the core lives on the heap.
#[derive(Debug, Default, Clone, Copy)]
pub struct HeapStorage;

impl Storage for HeapStorage {
    type Slice<T> = Box<[T]>;

    fn slice<T>(&mut self, len: usize, init: impl FnMut() -> T) -> Option<Box<[T]>> {
        Some(std::iter::repeat_with(init).take(len).collect())
    }
}

/// The UDP port every simulated domain listens on.
pub const SIM_UDP_PORT: u16 = 7000;

/// One port of a [`NetSim`], lent to a domain for one progress call.
pub struct SimPort<'a> {
    sim: &'a mut NetSim,
    port: PortId,
    mtu: usize,
    scratch: &'a mut Vec<u8>,
}

impl<'a> SimPort<'a> {
    /// `port` of `sim`, carrying UDP payloads of up to `mtu` bytes; `scratch` is the
    /// transmit buffer (kept by the caller so it is allocated once).
    pub fn new(sim: &'a mut NetSim, port: PortId, mtu: usize, scratch: &'a mut Vec<u8>) -> Self {
        SimPort {
            sim,
            port,
            mtu,
            scratch,
        }
    }
}

/// A received datagram, owned until consumed.
pub struct SimRxToken(Datagram);

impl RxToken for SimRxToken {
    fn meta(&self) -> RxMeta {
        RxMeta::from_src(UdpAddr::new(*self.0.src.ip(), self.0.src.port()))
    }

    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0.payload)
    }
}

/// A transmit slot: the datagram enters the simulator when consumed.
pub struct SimTxToken<'a> {
    sim: &'a mut NetSim,
    port: PortId,
    mtu: usize,
    scratch: &'a mut Vec<u8>,
}

impl TxToken for SimTxToken<'_> {
    fn consume_with<R, F: FnOnce(&mut [u8]) -> (TxMeta, R)>(self, max_len: usize, f: F) -> R {
        let n = max_len.min(self.mtu);
        self.scratch.clear();
        self.scratch.resize(n, 0);
        let (meta, r) = f(&mut self.scratch[..]);
        if meta.len > 0
            && meta.len <= n
            && let Some(dst) = meta.dst
        {
            let to = SocketAddrV4::new(dst.ip, dst.port);
            self.sim.send(self.port, to, &self.scratch[..meta.len]);
        }
        r
    }
}

impl Link for SimPort<'_> {
    type RxToken<'b>
        = SimRxToken
    where
        Self: 'b;
    type TxToken<'b>
        = SimTxToken<'b>
    where
        Self: 'b;

    fn capabilities(&self) -> Capabilities {
        let mut c = Capabilities::new(Medium::Udp, self.mtu);
        c.max_burst = 64;
        c
    }

    fn receive(&mut self) -> Option<SimRxToken> {
        self.sim.recv(self.port).map(SimRxToken)
    }

    fn transmit(&mut self) -> Option<SimTxToken<'_>> {
        Some(SimTxToken {
            sim: self.sim,
            port: self.port,
            mtu: self.mtu,
            scratch: self.scratch,
        })
    }
}

type S = HeapStorage;

/// How to build a [`Node`].
#[derive(Debug, Clone)]
pub struct NodeConfig {
    /// Provider limits (queue depths, inject size, eager threshold, ...).
    pub provider: ProviderConfig,
    /// Engine tunables (`eager_threshold` included).
    pub rdm: RdmConfig,
    /// UDP payload MTU of the link.
    pub mtu: usize,
    /// Entries of each CQ.
    pub cq_size: usize,
    /// Bind the CQs with FI_SELECTIVE_COMPLETION.
    pub selective: bool,
    /// The domain's authorization key (empty: none).
    pub auth_key: Vec<u8>,
    /// Bytes of application memory the node has (at address [`Node::BASE`]).
    pub mem_size: usize,
    /// Seed of the domain's generator.
    pub seed: u64,
    /// Default transmit op flags of the endpoint.
    pub tx_op_flags: Flags,
    /// CQ format.
    pub cq_format: CqFormat,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            provider: ProviderConfig {
                tx_size: 256,
                rx_size: 256,
                ep_cnt: 4,
                cq_cnt: 4,
                cntr_cnt: 4,
                mr_cnt: 4,
                inject_size: 256,
                max_auth_key_size: 64,
                ..ProviderConfig::DEFAULT
            },
            rdm: RdmConfig {
                max_peers: 16,
                reorder_slots: 256,
                unexp_slots: 256,
                unexp_msgs: 256,
                ..RdmConfig::DEFAULT
            },
            mtu: 1472,
            cq_size: 1024,
            selective: false,
            auth_key: Vec::new(),
            mem_size: 1 << 20,
            seed: 1,
            tx_op_flags: Flags::empty(),
            cq_format: CqFormat::Tagged,
        }
    }
}

/// One simulated host: a domain with one RDM endpoint, its CQs, counters, AV and
/// application memory, attached to one simulator port.
pub struct Node {
    /// The fabric the domain belongs to.
    pub fabric: Fabric<S>,
    /// The domain.
    pub dom: Domain<S>,
    /// Its simulator port.
    pub port: PortId,
    /// Application memory, mapped at [`Node::BASE`].
    pub mem: Vec<u8>,
    /// The RDM endpoint.
    pub ep: EpHandle<S>,
    /// Transmit CQ.
    pub tx_cq: CqHandle<S>,
    /// Receive CQ.
    pub rx_cq: CqHandle<S>,
    /// The AV.
    pub av: AvHandle<S>,
    /// Counter of completed sends.
    pub send_cntr: CntrHandle,
    /// Counter of completed receives.
    pub recv_cntr: CntrHandle,
    mtu: usize,
    scratch: Vec<u8>,
}

/// One completion, success or error, as a test sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// `op_context`.
    pub context: u64,
    /// Completion flags.
    pub flags: Flags,
    /// Received length.
    pub len: usize,
    /// Multi-recv landing address.
    pub buf: u64,
    /// Remote CQ data.
    pub data: u64,
    /// Tag.
    pub tag: u64,
    /// Source (fi_cq_readfrom).
    pub src: FiAddr,
    /// `Some(err)` for an error entry.
    pub err: Option<Errno>,
    /// Truncated bytes (error entries).
    pub olen: usize,
}

impl Node {
    /// Where the node's memory starts.
    pub const BASE: u64 = 0x1000_0000;

    /// A node at `ip` attached to a new port of `sim`.
    pub fn new(sim: &mut NetSim, ip: [u8; 4], cfg: &NodeConfig) -> Result<Node> {
        let port = sim.add_port(SocketAddrV4::new(Ipv4Addr::from(ip), SIM_UDP_PORT));
        let mut info: Info = default_info(EpType::Rdm, None, &cfg.provider);
        info.domain_attr.auth_key = cfg
            .auth_key
            .as_slice()
            .try_into()
            .map_err(|_| Errno::EINVAL)?;
        info.tx_attr.op_flags = cfg.tx_op_flags;
        let mut fabric = Fabric::open(&FabricAttr::default(), 0, HeapStorage, 2)?;
        let caps = Capabilities::new(Medium::Udp, cfg.mtu);
        let net = NetConfig::new(&caps, ip, SIM_UDP_PORT);
        let dc = DomainConfig::new(net, cfg.provider, cfg.seed);
        let mut dom = Domain::open(&mut fabric, &info, dc, HeapStorage, 0)?;
        dom.set_rdm_config(cfg.rdm)?;
        let cq_attr = CqAttr {
            format: cfg.cq_format,
            size: cfg.cq_size,
            ..CqAttr::default()
        };
        let tx_cq = dom.cq_open(&cq_attr, 0xC0)?;
        let rx_cq = dom.cq_open(&cq_attr, 0xC1)?;
        let av = dom.av_open(
            &mut AvAttr {
                count: 64,
                ..AvAttr::default()
            },
            0xA0,
        )?;
        let send_cntr = dom.cntr_open(&CntrAttr::default(), 0xD0)?;
        let recv_cntr = dom.cntr_open(&CntrAttr::default(), 0xD1)?;
        let ep = dom.ep_open(&info, 0xE0)?;
        let sel = if cfg.selective {
            Flags::SELECTIVE_COMPLETION
        } else {
            Flags::empty()
        };
        dom.ep_bind(ep, BindTarget::Cq(tx_cq), Flags::TRANSMIT | sel)?;
        dom.ep_bind(ep, BindTarget::Cq(rx_cq), Flags::RECV | sel)?;
        dom.ep_bind(ep, BindTarget::Av(av), Flags::empty())?;
        dom.ep_bind(ep, BindTarget::Cntr(send_cntr), Flags::SEND)?;
        dom.ep_bind(ep, BindTarget::Cntr(recv_cntr), Flags::RECV)?;
        dom.ep_enable(ep)?;
        Ok(Node {
            fabric,
            dom,
            port,
            mem: vec![0; cfg.mem_size],
            ep,
            tx_cq,
            rx_cq,
            av,
            send_cntr,
            recv_cntr,
            mtu: cfg.mtu,
            scratch: Vec::with_capacity(cfg.mtu),
        })
    }

    /// The endpoint's address.
    pub fn addr(&self) -> EpAddr {
        self.dom
            .ep_addr(self.ep)
            .unwrap_or(EpAddr::new([0; 4], 0, 0))
    }

    /// Inserts `addr` into the AV.
    pub fn insert(&mut self, addr: EpAddr) -> Result<FiAddr> {
        let mut out = [0; 1];
        self.dom.av_mut(self.av)?.insert(
            AvAddrs::Ep(&[addr]),
            Some(&mut out),
            Flags::empty(),
            None,
        )?;
        Ok(out[0])
    }

    /// One progress call at the simulator's current time.
    pub fn progress(&mut self, sim: &mut NetSim) -> ProgressReport {
        let now = sim.now();
        let mut link = SimPort::new(sim, self.port, self.mtu, &mut self.scratch);
        let mut mem = SliceMemory::new(Self::BASE, &mut self.mem);
        self.dom
            .progress(now, &mut link, &mut mem)
            .unwrap_or_default()
    }

    /// Runs `f` with the domain, the endpoint and the node's memory: how tests post
    /// operations (`n.op(|d, ep, m| d.send(ep, m, ...))`).
    pub fn op<R>(
        &mut self,
        f: impl FnOnce(&mut Domain<S>, EpHandle<S>, &mut SliceMemory<'_>) -> R,
    ) -> R {
        let mut mem = SliceMemory::new(Self::BASE, &mut self.mem);
        f(&mut self.dom, self.ep, &mut mem)
    }

    /// Writes `data` at offset `off` of the node's memory; returns its address.
    pub fn put(&mut self, off: usize, data: &[u8]) -> u64 {
        self.mem[off..off + data.len()].copy_from_slice(data);
        Self::BASE + off as u64
    }

    /// `len` bytes at offset `off` of the node's memory.
    pub fn get(&self, off: usize, len: usize) -> &[u8] {
        &self.mem[off..off + len]
    }

    /// Reads every completion of `cq` (successes and errors, in order).
    pub fn drain_cq(&mut self, cq: CqHandle<S>, out: &mut Vec<Completion>) {
        let Ok(q) = self.dom.cq_mut(cq) else {
            return;
        };
        loop {
            let mut e = [CqEntry::default(); 64];
            match q.read(&mut e) {
                Ok(n) => {
                    for e in &e[..n] {
                        out.push(Completion {
                            context: e.op_context,
                            flags: e.flags,
                            len: e.len,
                            buf: e.buf,
                            data: e.data,
                            tag: e.tag,
                            src: e.src_addr,
                            err: None,
                            olen: 0,
                        });
                    }
                }
                Err(Errno::EAVAIL) => {
                    let Ok(x) = q.readerr(Flags::empty(), API_VERSION_1_5, &mut []) else {
                        return;
                    };
                    out.push(Completion {
                        context: x.op_context,
                        flags: Flags::from_bits_retain(x.flags),
                        len: x.len,
                        buf: x.buf,
                        data: x.data,
                        tag: x.tag,
                        src: ofi_nostd::flags::FI_ADDR_NOTAVAIL,
                        err: Errno::from_code(x.err),
                        olen: x.olen,
                    });
                }
                Err(_) => return,
            }
        }
    }

    /// Every completion of both CQs so far: (transmit, receive).
    pub fn completions(&mut self) -> (Vec<Completion>, Vec<Completion>) {
        let mut tx = Vec::new();
        let mut rx = Vec::new();
        let (t, r) = (self.tx_cq, self.rx_cq);
        self.drain_cq(t, &mut tx);
        self.drain_cq(r, &mut rx);
        (tx, rx)
    }
}

/// A simulator with nodes, and the event-driven clock.
pub struct Cluster {
    /// The network.
    pub sim: NetSim,
    /// The hosts, progressed in this order.
    pub nodes: Vec<Node>,
    /// Driver steps taken.
    pub steps: u64,
}

/// Why [`Cluster::run_until`] stopped without the condition holding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stall {
    /// No datagram in flight and no timer armed: nothing will ever happen.
    Idle,
    /// Virtual time passed the limit.
    Deadline,
    /// Too many driver steps.
    Steps,
}

impl Cluster {
    /// `n` nodes at 10.0.0.1 .. 10.0.0.n with `cfg` (seeds `cfg.seed + i`), every node's
    /// AV holding every node (node `j` is fi_addr `j` everywhere).
    pub fn new(sim: NetSim, n: usize, cfg: &NodeConfig) -> Result<Cluster> {
        let mut c = Cluster {
            sim,
            nodes: Vec::new(),
            steps: 0,
        };
        for i in 0..n {
            let node_cfg = NodeConfig {
                seed: cfg.seed.wrapping_add(i as u64),
                ..cfg.clone()
            };
            let node = Node::new(&mut c.sim, [10, 0, 0, i as u8 + 1], &node_cfg)?;
            c.nodes.push(node);
        }
        let addrs: Vec<EpAddr> = c.nodes.iter().map(|n| n.addr()).collect();
        for node in &mut c.nodes {
            for a in &addrs {
                node.insert(*a)?;
            }
        }
        Ok(c)
    }

    /// Progresses every node until none receives or sends anything more at this
    /// instant (bounded).
    pub fn settle(&mut self) {
        for _ in 0..64 {
            let mut busy = false;
            for node in &mut self.nodes {
                let r = node.progress(&mut self.sim);
                busy |= r.rx > 0 || r.tx > 0;
            }
            if !busy {
                return;
            }
        }
    }

    /// The next instant anything happens: a datagram arrives or a timer is due.
    pub fn next_event(&self) -> Option<Instant> {
        let mut t = self.sim.next_arrival();
        for n in &self.nodes {
            if let Some(d) = n.dom.poll_timeout() {
                t = Some(t.map_or(d, |x| x.min(d)));
            }
        }
        t
    }

    /// Runs the network until `done(self)` holds, advancing virtual time from event to
    /// event; `done` is checked after every settled instant.
    pub fn run_until(
        &mut self,
        max_time: Instant,
        max_steps: u64,
        mut done: impl FnMut(&mut Cluster) -> bool,
    ) -> core::result::Result<(), Stall> {
        loop {
            self.settle();
            if done(self) {
                return Ok(());
            }
            self.steps += 1;
            if self.steps > max_steps {
                return Err(Stall::Steps);
            }
            let now = self.sim.now();
            let Some(next) = self.next_event() else {
                return Err(Stall::Idle);
            };
            // "Due now" after settling means work the last progress could not finish;
            // let time move so timers that are due can fire.
            let next = next.max(now + Duration::from_micros(1));
            if next > max_time {
                return Err(Stall::Deadline);
            }
            self.sim.advance_to(next);
        }
    }

    /// Runs until node `i` has `n` completions on its receive (`rx`) or transmit CQ, or
    /// `within` of virtual time passed; the completions, or why it stopped and what came.
    pub fn wait_cq(
        &mut self,
        i: usize,
        rx: bool,
        n: usize,
        within: Duration,
    ) -> core::result::Result<Vec<Completion>, (Stall, Vec<Completion>)> {
        let mut got = Vec::new();
        let deadline = self.sim.now() + within;
        let r = self.run_until(deadline, 50_000_000, |c| {
            let node = &mut c.nodes[i];
            let cq = if rx { node.rx_cq } else { node.tx_cq };
            node.drain_cq(cq, &mut got);
            got.len() >= n
        });
        match r {
            Ok(()) => Ok(got),
            Err(stall) => Err((stall, got)),
        }
    }

    /// Lets `d` of virtual time pass with everything running.
    pub fn run_for(&mut self, d: Duration) {
        let end = self.sim.now() + d;
        let _ = self.run_until(end, u64::MAX, |c| c.sim.now() >= end);
        if self.sim.now() < end {
            self.sim.advance_to(end);
            self.settle();
        }
    }
}

/// All-to-all traffic with an exact checker: every message is delivered exactly once,
/// intact, in order per (sender, receiver, kind), and every completion carries the
/// right context, length, tag and CQ data.
pub mod traffic {
    use super::*;
    use crate::netsim::Rng;
    use ofi_nostd::domain::TaggedArgs;
    use ofi_nostd::flags::FI_ADDR_UNSPEC;
    use ofi_nostd::mem::IoVec;

    /// Size classes of message buffers (bytes) and how many buffers of each class a
    /// node has for sending and for receiving.
    const CLASSES: [(usize, usize); 4] = [(256, 256), (16 << 10, 32), (64 << 10, 12), (1 << 20, 3)];

    /// What to send.
    #[derive(Debug, Clone)]
    pub struct Plan {
        /// Messages in total.
        pub messages: usize,
        /// Seed of the schedule (sizes, destinations, kinds, tags, data).
        pub seed: u64,
        /// Size distribution: `(percent, min, max)` classes; sizes are log-uniform
        /// inside a class.
        pub sizes: Vec<(u32, usize, usize)>,
        /// Sends a node keeps posted at once.
        pub send_window: usize,
        /// Sends a node keeps posted to one destination at once. With `recv_ahead`
        /// this bounds what a receiver must buffer as unexpected: an application that
        /// lets every peer run arbitrarily far ahead of its receives needs unbounded
        /// buffering with any provider (the engine then pushes back, see the
        /// back-pressure test, but this generator's receive policy would deadlock).
        pub dest_window: usize,
        /// A message may be sent only while its receiver has posted receives for all
        /// but the last `slack` messages of its stream before it: a bounded number of
        /// messages arrive unexpected. (Application-level flow control, as MPI
        /// libraries do: without it a receiver that buffers every early message needs
        /// unbounded memory, and with bounded memory single-session ordering can stall
        /// a stream behind another stream's unexpected messages.)
        pub slack: usize,
        /// Receives a node keeps posted per (sender, kind) stream.
        pub recv_ahead: usize,
        /// Only node 0 sends, only to node 1 (goodput measurements).
        pub one_way: bool,
        /// Messages up to this size are eager (the engine's threshold).
        pub eager_limit: usize,
    }

    impl Plan {
        /// The mix: 90% up to 256 B, 9% up to 64 KiB, 1% up to 1 MiB, with the
        /// upper classes log-uniform so the total stays testable.
        pub fn mixed(messages: usize, seed: u64) -> Plan {
            Plan {
                messages,
                seed,
                sizes: vec![
                    (90, 1, 256),
                    (9, 257, 64 << 10),
                    (1, (64 << 10) + 1, 1 << 20),
                ],
                send_window: 48,
                dest_window: 8,
                slack: 4,
                recv_ahead: 8,
                one_way: false,
                eager_limit: 8192,
            }
        }
    }

    /// One scheduled message.
    #[derive(Debug, Clone, Copy)]
    struct Msg {
        src: usize,
        dst: usize,
        tagged: bool,
        len: usize,
        /// Position in its (src, dst, kind) stream.
        j: u32,
        data: Option<u64>,
        id: u64,
    }

    fn stream_tag(src: usize, dst: usize) -> u64 {
        ((src as u64) << 40) | ((dst as u64) << 32)
    }

    fn fill(id: u64, buf: &mut [u8]) {
        let mut r = Rng::new(id ^ 0x5151_5151);
        for chunk in buf.chunks_mut(8) {
            let v = r.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }

    /// Buffers of one node, by size class.
    struct Slab {
        base: usize,
        free: Vec<Vec<usize>>,
    }

    impl Slab {
        fn new(base: usize) -> (Slab, usize) {
            let mut off = base;
            let mut free = Vec::new();
            for (size, n) in CLASSES {
                free.push((0..n).map(|i| off + i * size).collect());
                off += size * n;
            }
            (Slab { base, free }, off - base)
        }
        fn class(len: usize) -> usize {
            CLASSES
                .iter()
                .position(|(s, _)| len <= *s)
                .unwrap_or(CLASSES.len() - 1)
        }
        fn alloc(&mut self, len: usize) -> Option<usize> {
            self.free[Self::class(len)].pop()
        }
        fn release(&mut self, len: usize, off: usize) {
            self.free[Self::class(len)].push(off);
        }
    }

    /// Bytes of node memory the generator needs.
    pub fn memory_needed() -> usize {
        2 * CLASSES.iter().map(|(s, n)| s * n).sum::<usize>()
    }

    /// Progress counters and results.
    #[derive(Debug, Clone, Default)]
    pub struct Report {
        /// Messages whose receive completed and verified.
        pub received: usize,
        /// Sends completed.
        pub sent: usize,
        /// Payload bytes delivered.
        pub bytes: u64,
        /// Virtual time from the first post to the last completion.
        pub elapsed: Duration,
    }

    struct NodeState {
        send_slab: Slab,
        recv_slab: Slab,
        /// Per (dst, kind): next message of the stream to send.
        next_send: Vec<[usize; 2]>,
        /// Where the round over the streams starts.
        rot: usize,
        /// Sends in flight: context -> (msg, buffer offset).
        in_flight: std::collections::HashMap<u64, (Msg, usize)>,
        /// Sends in flight per destination.
        to_dest: Vec<usize>,
        /// Per (src, kind): next message index to post a receive for, and receives
        /// posted (context -> (msg, offset)).
        next_recv: Vec<[usize; 2]>,
        posted: std::collections::HashMap<u64, (Msg, usize)>,
        /// Per (src, kind): receives completed.
        expect: Vec<[u32; 2]>,
    }

    /// Runs `plan` on `c` (whose nodes need [`memory_needed`] bytes of memory) and checks
    /// every completion; panics with a description on the first violation.
    // Node, stream and kind indices address several tables at once.
    #[allow(clippy::needless_range_loop)]
    pub fn run(c: &mut Cluster, plan: &Plan, max_time: Duration) -> Report {
        let n = c.nodes.len();
        let mut rng = Rng::new(plan.seed);
        let total_pct: u32 = plan.sizes.iter().map(|s| s.0).sum();
        // The schedule: per (src, dst, kind) stream, in send order.
        let mut streams: Vec<Vec<[Vec<Msg>; 2]>> = (0..n)
            .map(|_| (0..n).map(|_| [Vec::new(), Vec::new()]).collect())
            .collect();
        for id in 0..plan.messages as u64 {
            let (src, dst) = if plan.one_way {
                (0, 1)
            } else {
                let s = rng.below(n as u64) as usize;
                let d = (s + 1 + rng.below(n as u64 - 1) as usize) % n;
                (s, d)
            };
            let mut pick = rng.below(total_pct as u64) as u32;
            let mut class = plan.sizes[0];
            for s in &plan.sizes {
                if pick < s.0 {
                    class = *s;
                    break;
                }
                pick -= s.0;
            }
            let (lo, hi) = (class.1.max(1) as f64, class.2 as f64);
            let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            let mut len = (lo * (hi / lo).powf(u)) as usize;
            len = len.clamp(class.1, class.2);
            let tagged = !plan.one_way && rng.below(2) == 1;
            let data = (rng.below(3) == 0).then(|| rng.next_u64());
            let k = tagged as usize;
            let j = streams[src][dst][k].len() as u32;
            let m = Msg {
                src,
                dst,
                tagged,
                len,
                j,
                data,
                id: id + 1,
            };
            streams[src][dst][k].push(m);
        }
        let (probe, half) = Slab::new(0);
        drop(probe);
        let mut st: Vec<NodeState> = (0..n)
            .map(|_| NodeState {
                send_slab: Slab::new(0).0,
                recv_slab: Slab::new(half).0,
                next_send: vec![[0, 0]; n],
                rot: 0,
                in_flight: Default::default(),
                to_dest: vec![0; n],
                next_recv: vec![[0, 0]; n],
                posted: Default::default(),
                expect: vec![[0, 0]; n],
            })
            .collect();
        let _ = st[0].recv_slab.base;
        let start = c.sim.now();
        let mut report = Report::default();
        let mut last_done = start;
        let deadline = start + max_time;
        let total = plan.messages;
        let mut scratch = vec![0u8; 1 << 20];
        let result = c.run_until(deadline, u64::MAX, |c| {
            let now = c.sim.now();
            for i in 0..n {
                let (tx, rx) = c.nodes[i].completions();
                for e in tx {
                    let Some((m, off)) = st[i].in_flight.remove(&e.context) else {
                        panic!("node {i}: send completion for unknown context {e:?}");
                    };
                    if e.err.is_some() {
                        let st = |k: usize| {
                            c.nodes[k].dom.ep(c.nodes[k].ep).map(|ep| ep.rdm().map(|r| *r.stats()))
                        };
                        panic!(
                            "node {i}: send {m:?} failed at {now:?}: {e:?}\nsender {:?}\nreceiver {:?}",
                            st(i),
                            st(m.dst)
                        );
                    }
                    let want = if m.tagged {
                        Flags::SEND | Flags::TAGGED
                    } else {
                        Flags::SEND | Flags::MSG
                    };
                    assert_eq!(e.flags, want, "send completion flags {e:?}");
                    st[i].send_slab.release(m.len, off);
                    st[i].to_dest[m.dst] -= 1;
                    report.sent += 1;
                    last_done = now;
                }
                for e in rx {
                    let Some((m, off)) = st[i].posted.remove(&e.context) else {
                        panic!("node {i}: receive completion for unknown context {e:?}");
                    };
                    assert_eq!(e.err, None, "node {i}: receive of {m:?} failed: {e:?}");
                    // Receive j of a stream was posted for message j: getting any other
                    // message (length, tag, data or bytes differ) means matching broke
                    // send order. Completion order may differ (rendezvous finish later).
                    let k = m.tagged as usize;
                    st[i].expect[m.src][k] += 1;
                    assert_eq!(e.len, m.len, "length of {m:?}: {e:?}");
                    if m.tagged {
                        assert_eq!(e.tag, stream_tag(m.src, m.dst) | m.j as u64, "tag of {m:?}");
                    }
                    assert_eq!(e.src, m.src as u64, "source of {m:?}");
                    match m.data {
                        Some(d) => {
                            assert!(
                                e.flags.contains(Flags::REMOTE_CQ_DATA),
                                "flags of {m:?}: {e:?}"
                            );
                            assert_eq!(e.data, d, "data of {m:?}");
                        }
                        None => assert!(!e.flags.contains(Flags::REMOTE_CQ_DATA), "{e:?}"),
                    }
                    fill(m.id, &mut scratch[..m.len]);
                    assert!(
                        c.nodes[i].get(off, m.len) == &scratch[..m.len],
                        "payload of {m:?} corrupted"
                    );
                    st[i].recv_slab.release(m.len, off);
                    report.received += 1;
                    report.bytes += m.len as u64;
                    last_done = now;
                }
            }
            if report.received == total && report.sent == total {
                return true;
            }
            // Post receives ahead on every node, then sends.
            for i in 0..n {
                for src in 0..n {
                    for k in 0..2 {
                        let s = &streams[src][i][k];
                        loop {
                            let next = st[i].next_recv[src][k];
                            if next >= s.len()
                                || next >= st[i].expect[src][k] as usize + plan.recv_ahead
                            {
                                break;
                            }
                            let m = s[next];
                            let Some(off) = st[i].recv_slab.alloc(m.len) else {
                                break;
                            };
                            let ctx = (m.id << 1) | 1;
                            let iov = [IoVec::new(Node::BASE + off as u64, m.len)];
                            let r = c.nodes[i].op(|d, ep, _| {
                                if m.tagged {
                                    let exact = m.j.is_multiple_of(2);
                                    let args = TaggedArgs {
                                        ignore: if exact { 0 } else { 0xFFFF_FFFF },
                                        ..TaggedArgs::new(
                                            &iov,
                                            if m.j.is_multiple_of(3) {
                                                FI_ADDR_UNSPEC
                                            } else {
                                                src as u64
                                            },
                                            stream_tag(src, i) | if exact { m.j as u64 } else { 0 },
                                            ctx,
                                        )
                                    };
                                    d.trecvmsg(ep, &args, Flags::empty())
                                } else {
                                    d.recvv(ep, &iov, src as u64, ctx)
                                }
                            });
                            if r.is_err() {
                                st[i].recv_slab.release(m.len, off);
                                break;
                            }
                            st[i].posted.insert(ctx, (m, off));
                            st[i].next_recv[src][k] += 1;
                        }
                    }
                }
            }
            for i in 0..n {
                // Sends: any stream whose next message may go (streams keep their own
                // order; a stream waiting for its receiver never holds up the others).
                let streams_n = 2 * n;
                st[i].rot = (st[i].rot + 1) % streams_n;
                let mut progress = true;
                while progress && st[i].in_flight.len() < plan.send_window {
                    progress = false;
                    for step in 0..streams_n {
                        if st[i].in_flight.len() >= plan.send_window {
                            break;
                        }
                        let sid = (st[i].rot + step) % streams_n;
                        let (dst, k) = (sid / 2, sid % 2);
                        let Some(&m) = streams[i][dst][k].get(st[i].next_send[dst][k]) else {
                            continue;
                        };
                        // Eager messages may run `slack` ahead of the receives (they
                        // arrive unexpected and are buffered); rendezvous ones wait for
                        // their receive (an unexpected RTS would pin the send buffer).
                        let posted_there = st[dst].next_recv[i][k];
                        let allowance = if m.len <= plan.eager_limit { plan.slack } else { 0 };
                        if st[i].to_dest[dst] >= plan.dest_window
                            || m.j as usize >= posted_there + allowance
                        {
                            continue;
                        }
                        let Some(off) = st[i].send_slab.alloc(m.len) else {
                            continue;
                        };
                        fill(m.id, &mut c.nodes[i].mem[off..off + m.len]);
                        let ctx = m.id << 1;
                        let a = Node::BASE + off as u64;
                        let r = c.nodes[i].op(|d, ep, mem| {
                            let flags = if m.data.is_some() {
                                Flags::REMOTE_CQ_DATA
                            } else {
                                Flags::empty()
                            };
                            let iov = [IoVec::new(a, m.len)];
                            if m.tagged {
                                let args = TaggedArgs {
                                    data: m.data.unwrap_or(0),
                                    ..TaggedArgs::new(
                                        &iov,
                                        m.dst as u64,
                                        stream_tag(m.src, m.dst) | m.j as u64,
                                        ctx,
                                    )
                                };
                                d.tsendmsg(ep, mem, &args, flags)
                            } else {
                                let args = ofi_nostd::domain::MsgArgs {
                                    data: m.data.unwrap_or(0),
                                    ..ofi_nostd::domain::MsgArgs::new(&iov, m.dst as u64, ctx)
                                };
                                d.sendmsg(ep, mem, &args, flags)
                            }
                        });
                        match r {
                            Ok(()) => {
                                st[i].in_flight.insert(ctx, (m, off));
                                st[i].to_dest[dst] += 1;
                                st[i].next_send[dst][k] += 1;
                                progress = true;
                            }
                            Err(Errno::EAGAIN) => {
                                st[i].send_slab.release(m.len, off);
                                progress = false;
                                break;
                            }
                            Err(e) => panic!("node {i}: posting {m:?}: {e:?}"),
                        }
                    }
                }
            }
            false
        });
        if let Err(stall) = result {
            for (i, node) in c.nodes.iter().enumerate() {
                let Ok(ep) = node.dom.ep(node.ep) else {
                    continue;
                };
                let Some(rdm) = ep.rdm() else { continue };
                eprintln!(
                    "node {i}: tx ops {}, posted {}, unexpected {}, held {}, {:?}",
                    rdm.tx_in_use(),
                    rdm.rx_in_use(),
                    rdm.unexpected_len(),
                    rdm.held_packets(),
                    rdm.stats()
                );
                for p in rdm.peers() {
                    if p.ops > 0 || p.inbound > 0 || p.partial_rx || p.blocked || p.cts_pending > 0
                    {
                        eprintln!("  {p:?}");
                    }
                }
                for s in rdm.sends().take(4) {
                    eprintln!("  {s:?}");
                }
                let stuck: Vec<_> = st[i]
                    .in_flight
                    .values()
                    .map(|(m, _)| m.id)
                    .take(8)
                    .collect();
                let waiting: Vec<_> = st[i]
                    .posted
                    .values()
                    .map(|(m, _)| (m.src, m.j, m.tagged))
                    .take(8)
                    .collect();
                eprintln!("  sends in flight {stuck:?}, receives posted {waiting:?}");
            }
            panic!(
                "traffic stalled ({stall:?}) at {:?}: {} of {total} received, {} sent",
                c.sim.now(),
                report.received,
                report.sent
            );
        }
        report.elapsed = last_done.saturating_duration_since(start);
        report
    }
}
