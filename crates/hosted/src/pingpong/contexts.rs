//! `--contexts N`: message rate and bandwidth over a scalable endpoint, one thread per
//! context pair.
//!
//! Both sides open a scalable endpoint (RDM) with `N` transmit and `N` receive
//! contexts and one CQ per context index. The client says hello from context 0 to the
//! server's receive context 0 (its address, `N`, the mode, the window and each size's
//! counts); the server answers. Then, size after size, client thread `k` (pinned to CPU
//! `first + k`) sends its messages from transmit context `k` to the server's receive
//! context `k` (`fi_rx_addr`), and server thread `k` receives them on that context and
//! answers from its transmit context `k` to the client's receive context `k`: after
//! every `--window` messages in `rate` mode (the client waits for each answer before
//! the next burst, as `osu_mbw_mr`), once after the warmup and once at the end in
//! `bandwidth` mode (up to `--window` sends in flight). Each pair carries `-I`
//! messages; the row reports all pairs together, timed from the moment every client
//! thread finished its warmup to the last pair's final answer.
//!
//! Every data plane serves (UDP, TAP, AF_PACKET, DPDK). Every context engine has its
//! own queues and sessions; on kernel UDP, AF_PACKET and DPDK each context also has a
//! receive queue of its own (`--queues`, default `N`: the plane steers by context, or
//! memif carries queue pair k to the peer's queue pair k, and thread k's CQ reads pass
//! over queue k alone), while TAP contexts share one.
//! The domain still has one lock that all contexts take: what two threads gain here is
//! bounded by it (see docs/status.md, issue #31).

use std::collections::VecDeque;
use std::io::Write;
use std::net::Ipv4Addr;
use std::sync::Barrier;
use std::time::{Duration, Instant};

use ofi_nostd::addr::EpAddr;
use ofi_nostd::av::{AvAttr, fi_rx_addr};
use ofi_nostd::flags::{FI_ADDR_UNSPEC, FiAddr, Flags};
use ofi_nostd::info::EpType;

use super::{Args, DEFAULT_PORT, EpKind, Failure, Mode, Op, header, plane, row};
use crate::api::{Av, Buf, Completion, Cq, Domain, Fabric, RxContext, ScalableEndpoint, TxContext};

/// `rx_ctx_bits` of both sides' AVs: room for [`ofi_nostd::sep::MAX_CTX`] contexts.
const RX_CTX_BITS: i32 = 4;

/// First byte of the hello and of its answer.
const HELLO: u8 = 0xC5;

/// Size of a hello (and of the buffers control messages land in).
const CTRL_BUF: usize = 4096;

/// Completion contexts.
const SEND: u64 = 1;
const RECV: u64 = 2;

/// One context pair of one side: its transmit and receive contexts and their CQ.
struct Pair {
    tx: TxContext<u64>,
    rx: RxContext<u64>,
    cq: Cq<u64>,
}

/// The scalable endpoint and its pairs.
struct Sep {
    domain: Domain<u64>,
    av: Av<u64>,
    sep: ScalableEndpoint<u64>,
    pairs: Vec<Pair>,
    inject: usize,
}

impl Sep {
    fn open(domain: Domain<u64>, n: usize) -> Result<Sep, Failure> {
        let fab =
            |what: &'static str| move |e: crate::api::Error| Failure::new(format!("{what}: {e}"));
        let sep = domain
            .scalable_endpoint(EpType::Rdm, n, n)
            .map_err(fab("fi_scalable_ep"))?;
        let av = domain
            .av_with(&mut AvAttr {
                rx_ctx_bits: RX_CTX_BITS,
                ..AvAttr::default()
            })
            .map_err(fab("fi_av_open"))?;
        sep.bind_av(&av).map_err(fab("fi_scalable_ep_bind"))?;
        let mut pairs = Vec::with_capacity(n);
        for k in 0..n {
            let tx = sep.tx_context(k).map_err(fab("fi_tx_context"))?;
            let rx = sep.rx_context(k).map_err(fab("fi_rx_context"))?;
            let cq = domain.cq(4096).map_err(fab("fi_cq_open"))?;
            tx.bind_cq(&cq, Flags::TRANSMIT)
                .map_err(fab("fi_ep_bind"))?;
            rx.bind_cq(&cq, Flags::RECV).map_err(fab("fi_ep_bind"))?;
            tx.enable().map_err(fab("fi_enable"))?;
            rx.enable().map_err(fab("fi_enable"))?;
            pairs.push(Pair { tx, rx, cq });
        }
        sep.enable().map_err(fab("fi_enable"))?;
        let inject = domain.info().tx_attr.inject_size;
        Ok(Sep {
            domain,
            av,
            sep,
            pairs,
            inject,
        })
    }

    /// `-v`'s closing line: the domain's packets and drops, the link's counters, and
    /// each context engine's retransmissions and receive counters.
    fn stats(&self) -> String {
        let d = self.domain.stats();
        let n = self.domain.net_stats();
        let drops = crate::drops::DropReport::new(&self.domain.link_drops(), &n, &d);
        let mut line = format!(
            "{} packets sent, {} received, {drops}; link: {n:?}",
            d.tx_packets, d.rx_packets
        );
        for (k, p) in self.pairs.iter().enumerate() {
            if let Some(r) = p.tx.ep().rdm_stats() {
                line.push_str(&format!(
                    "; context {k}: {} packets sent, {} received, {} timeout and {} fast \
                     retransmissions, {} duplicates",
                    r.tx_packets,
                    r.rx_packets,
                    r.tx_timeout_retransmits,
                    r.tx_fast_retransmits,
                    r.rx_duplicates
                ));
            }
        }
        line.push_str(&crate::runtime::QueueCounts::describe(
            &self.domain.queue_counts(),
        ));
        line
    }
}

/// What the client asks for, sent in the hello.
#[derive(Debug, Clone, PartialEq)]
struct Plan {
    client: EpAddr,
    contexts: usize,
    bandwidth: bool,
    /// `-c`: patterned messages, every byte verified.
    check: bool,
    window: usize,
    /// Per size: (size, warmup, timed) messages per context pair.
    sizes: Vec<(usize, usize, usize)>,
}

impl Plan {
    fn encode(&self) -> Vec<u8> {
        let flags = u8::from(self.bandwidth) | u8::from(self.check) << 1;
        let mut b = vec![HELLO, self.contexts as u8, flags];
        b.extend_from_slice(&self.client.ip);
        b.extend_from_slice(&self.client.port.to_le_bytes());
        b.extend_from_slice(&self.client.ep_id.to_le_bytes());
        b.extend_from_slice(&(self.window as u32).to_le_bytes());
        b.extend_from_slice(&(self.sizes.len() as u32).to_le_bytes());
        for &(s, w, n) in &self.sizes {
            for v in [s, w, n] {
                b.extend_from_slice(&(v as u64).to_le_bytes());
            }
        }
        b
    }

    fn decode(b: &[u8]) -> Option<Plan> {
        let u32_at = |i: usize| Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?));
        let u64_at = |i: usize| Some(u64::from_le_bytes(b.get(i..i + 8)?.try_into().ok()?));
        if b.first() != Some(&HELLO) || b.len() < 19 {
            return None;
        }
        let client = EpAddr::new(
            [b[3], b[4], b[5], b[6]],
            u16::from_le_bytes([b[7], b[8]]),
            u16::from_le_bytes([b[9], b[10]]),
        );
        let count = u32_at(15)? as usize;
        let mut sizes = Vec::new();
        for i in 0..count.min(CTRL_BUF / 24) {
            let at = 19 + 24 * i;
            let v = |j: usize| u64_at(at + 8 * j).and_then(|v| usize::try_from(v).ok());
            sizes.push((v(0)?, v(1)?, v(2)?));
        }
        Some(Plan {
            client,
            contexts: usize::from(b[1]),
            bandwidth: b[2] & 1 != 0,
            check: b[2] & 2 != 0,
            window: u32_at(11)? as usize,
            sizes,
        })
    }
}

/// Pins the calling thread to `cpu` modulo the CPUs online. Not modulo the caller's
/// affinity (`available_parallelism`): after DPDK's EAL pinned the main thread to
/// one CPU that is 1, and every context thread of both processes went to CPU 0,
/// where each waited for the others' time slices (4 ms round trips over memif).
fn pin(cpu: usize) -> Result<(), Failure> {
    super::run::pin(cpu % dp_kernel::online_cpus())
}

/// Byte `j` of message `seq` of size round `round` on context pair `k` (`-c`); the
/// first 8 bytes of a message of 8 or more carry `seq` itself.
fn pattern(k: usize, round: usize, seq: u64, j: usize) -> u8 {
    (k as u64 * 131 + round as u64 * 13 + seq * 7 + j as u64) as u8
}

fn fill(msg: &mut [u8], k: usize, round: usize, seq: u64) {
    let from = if msg.len() >= 8 {
        msg[..8].copy_from_slice(&seq.to_le_bytes());
        8
    } else {
        0
    };
    for (j, b) in msg.iter_mut().enumerate().skip(from) {
        *b = pattern(k, round, seq, j);
    }
}

/// Checks a message [`fill`] made (the `n`-th received of its round, for messages
/// too short to carry their number).
fn verify(msg: &[u8], k: usize, round: usize, n: u64) -> Result<(), Failure> {
    let (seq, from) = match msg.get(..8) {
        Some(b) => (u64::from_le_bytes(b.try_into().unwrap_or_default()), 8),
        None => (n, 0),
    };
    match (from..msg.len()).find(|&j| msg[j] != pattern(k, round, seq, j)) {
        None => Ok(()),
        Some(j) => Err(Failure::new(format!(
            "context {k}, size round {round}, message {seq}: wrong byte at offset {j}"
        ))),
    }
}

/// A context pair as one thread drives it: sends in flight (their completions are
/// counted here, never returned) and receive completions met while sending.
struct Cx<'a> {
    p: &'a Pair,
    inject: usize,
    /// The longest one wait may take (`--timeout`).
    timeout: Duration,
    in_flight: usize,
    pending: VecDeque<Completion<u64>>,
}

impl<'a> Cx<'a> {
    fn new(p: &'a Pair, inject: usize, timeout: Duration) -> Self {
        Cx {
            p,
            inject,
            timeout,
            in_flight: 0,
            pending: VecDeque::new(),
        }
    }

    /// Reads one completion (busy-polling) if there is one: a send's is counted, a
    /// receive's queued; a failed operation is a failure.
    fn poll(&mut self, what: &str) -> Result<bool, Failure> {
        match self.p.cq.read() {
            Ok(c) => {
                if let Err(e) = c.result() {
                    return Err(Failure::new(format!("{what}: completion error {e}")));
                }
                if c.is_send() {
                    self.in_flight = self.in_flight.saturating_sub(1);
                } else {
                    self.pending.push_back(c);
                }
                Ok(true)
            }
            Err(e) if e.errno() == ofi_nostd::Errno::EAGAIN => Ok(false),
            Err(e) => Err(Failure::new(format!("{what}: fi_cq_read: {e}"))),
        }
    }

    /// The next receive completion, waited for at most the timeout.
    fn recv_done(&mut self, what: &str) -> Result<Completion<u64>, Failure> {
        let deadline = Instant::now() + self.timeout;
        loop {
            if let Some(c) = self.pending.pop_front() {
                return Ok(c);
            }
            if !self.poll(what)? {
                if Instant::now() > deadline {
                    return Err(Failure::new(format!("{what}: timed out")));
                }
                std::hint::spin_loop();
            }
        }
    }

    /// Waits until at most `max` sends are in flight (each completion waited for at
    /// most the timeout).
    fn drain_to(&mut self, max: usize) -> Result<(), Failure> {
        let mut deadline = Instant::now() + self.timeout;
        while self.in_flight > max {
            let before = self.in_flight;
            if !self.poll("send")? && Instant::now() > deadline {
                return Err(Failure::new("send completions: timed out"));
            }
            if self.in_flight < before {
                deadline = Instant::now() + self.timeout;
            }
        }
        Ok(())
    }

    /// Posts a receive of `len` bytes on the receive context.
    fn post_recv(&self, buf: Buf) -> Result<(), Failure> {
        self.p
            .rx
            .ep()
            .recv(buf, FI_ADDR_UNSPEC, RECV)
            .map(|_| ())
            .map_err(|e| Failure::new(format!("fi_recv: {}", e.errno)))
    }

    /// Sends `msg` to `dest` from the transmit context: an inject when it fits, else a
    /// send counted in flight; retried (progressing) while the queue is full.
    fn send(&mut self, msg: &[u8], dest: FiAddr) -> Result<(), Failure> {
        let deadline = Instant::now() + self.timeout;
        loop {
            let r = if msg.len() <= self.inject {
                self.p.tx.ep().inject(msg, dest).map_err(|e| e.errno())
            } else {
                match self.p.tx.ep().send(Buf::from(msg.to_vec()), dest, SEND) {
                    Ok(_) => {
                        self.in_flight += 1;
                        Ok(())
                    }
                    Err(e) => Err(e.errno),
                }
            };
            match r {
                Ok(()) => return Ok(()),
                Err(ofi_nostd::Errno::EAGAIN) => {
                    if !self.poll("send")? && Instant::now() > deadline {
                        return Err(Failure::new("send: queue full until the timeout"));
                    }
                }
                Err(e) => return Err(Failure::new(format!("fi_send: {e}"))),
            }
        }
    }
}

/// Entry: `--contexts N` on either side.
pub(super) fn main(
    args: &Args,
    n: usize,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), Failure> {
    if args.ep != EpKind::Rdm || args.op != Op::Msg || args.mode == Mode::Pingpong {
        return Err(Failure::new(
            "--contexts needs -e rdm, -m msg and --mode rate or bandwidth",
        ));
    }
    let fabric = Fabric::open().map_err(|e| Failure::new(format!("fi_fabric: {e}")))?;
    match &args.server {
        Some(server) => client(args, n, &fabric, server, out, err),
        None => server(args, n, &fabric, out, err),
    }
}

fn client(
    args: &Args,
    n: usize,
    fabric: &Fabric,
    server: &str,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), Failure> {
    let dest = super::run::resolve(server, args.dst_port)?;
    let (ip, port) = super::run::client_source(args, &dest);
    let (domain, _) = plane::open(fabric, args, ip, port, Some(*dest.ip()))?;
    let max = domain.info().ep_attr.max_msg_size;
    let s = Sep::open(domain, n)?;
    let to =
        s.av.insert(EpAddr::new(dest.ip().octets(), dest.port(), 0))
            .map_err(|e| Failure::new(format!("fi_av_insert: {e}")))?;
    let window = args.window as usize;
    let warm = args.warmup().div_ceil(window) * window;
    let plan = Plan {
        client: s.sep.addr(),
        contexts: n,
        bandwidth: args.mode == Mode::Bandwidth,
        check: args.check,
        window,
        sizes: args
            .size_list(max)?
            .into_iter()
            .map(|size| (size, warm, args.iterations_for(size)))
            .collect(),
    };
    // Hello on context 0; the answer says the server's contexts are up.
    let mut c0 = Cx::new(&s.pairs[0], s.inject, args.timeout);
    let server0 = fi_rx_addr(to, 0, RX_CTX_BITS);
    c0.post_recv(Buf::zeroed(CTRL_BUF))?;
    c0.send(&plan.encode(), server0)?;
    if c0.recv_done("hello")?.buf.first() != Some(&HELLO) {
        return Err(Failure::new("the server refused the hello"));
    }
    if args.verbose {
        let _ = writeln!(
            err,
            "ofi-pingpong: client, {n} contexts to {dest}, one thread each from CPU {}",
            args.cpu.unwrap_or(0)
        );
    }
    let _ = writeln!(out, "{}", header());
    let first_cpu = args.cpu.unwrap_or(0);
    for (round, &(size, warm, timed)) in plan.sizes.iter().enumerate() {
        let barrier = Barrier::new(n);
        let results: Vec<Result<(Instant, Instant), Failure>> = std::thread::scope(|sc| {
            let handles: Vec<_> = s
                .pairs
                .iter()
                .enumerate()
                .map(|(k, p)| {
                    let (barrier, plan, inject, timeout) =
                        (&barrier, &plan, s.inject, args.timeout);
                    sc.spawn(move || {
                        pin(first_cpu + k)?;
                        let mut cx = Cx::new(p, inject, timeout);
                        let dest = fi_rx_addr(to, k as i32, RX_CTX_BITS);
                        client_pair(
                            &mut cx,
                            plan,
                            dest,
                            (k, round),
                            (size, warm, timed),
                            barrier,
                        )
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Failure::new("a thread panicked")))
                })
                .collect()
        });
        let mut span: Option<(Instant, Instant)> = None;
        for r in results {
            let (a, b) = r?;
            span = Some(span.map_or((a, b), |(s, e)| (s.min(a), e.max(b))));
        }
        let elapsed = span.map_or(Duration::ZERO, |(a, b)| b.duration_since(a));
        let total = (timed * n) as u64;
        let _ = writeln!(
            out,
            "{}",
            row(size, total, total, elapsed.as_secs_f64() * 1e6, 1)
        );
    }
    // The end: a send (completed once the server has it), so the server knows every
    // answer reached us before it closes.
    c0.send(&FIN, server0)?;
    c0.drain_to(0)?;
    if args.verbose {
        let _ = writeln!(err, "ofi-pingpong: client done: {}", s.stats());
    }
    Ok(())
}

/// Client side of one context pair for one size: `warm` then `timed` messages; returns
/// when the timed phase started (after every thread's warmup) and ended (the final
/// answer).
fn client_pair(
    cx: &mut Cx<'_>,
    plan: &Plan,
    dest: FiAddr,
    (k, round): (usize, usize),
    (size, warm, timed): (usize, usize, usize),
    barrier: &Barrier,
) -> Result<(Instant, Instant), Failure> {
    let mut msg = vec![0x5a; size];
    let mut seq = 0u64;
    let w = plan.window;
    let mut run = |count: usize| -> Result<(), Failure> {
        let answers = if plan.bandwidth { 1 } else { count.div_ceil(w) };
        for a in 0..answers {
            cx.post_recv(Buf::zeroed(64))?;
            let burst = if plan.bandwidth {
                count
            } else {
                w.min(count - a * w)
            };
            // FI_MORE within the burst but on every 16th and the last: the first
            // packets leave while the rest are posted (as the tool's rate mode).
            for i in 0..burst {
                cx.drain_to(w - 1)?;
                cx.p.tx.ep().set_more(i % 16 != 15 && i + 1 != burst);
                if plan.check {
                    fill(&mut msg, k, round, seq);
                }
                seq += 1;
                cx.send(&msg, dest)?;
            }
            // Two bursts outstanding: this one left while the last one's answer was on
            // its way (as the tool's rate mode on one endpoint).
            if a > 0 {
                cx.recv_done("answer")?;
            }
        }
        if answers > 0 {
            cx.recv_done("answer")?;
        }
        Ok(())
    };
    if warm > 0 {
        run(warm)?;
    }
    barrier.wait();
    let start = Instant::now();
    run(timed)?;
    let end = Instant::now();
    cx.drain_to(0)?;
    Ok((start, end))
}

/// The client's last message (longer than any answer).
const FIN: [u8; 9] = *b"ctx-fin\0\0";

fn server(
    args: &Args,
    n: usize,
    fabric: &Fabric,
    _out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), Failure> {
    let ip = args.src_addr.unwrap_or(Ipv4Addr::LOCALHOST);
    let port = args.src_port.unwrap_or(DEFAULT_PORT);
    let (domain, link) = plane::open(fabric, args, ip, port, None)?;
    let s = Sep::open(domain, n)?;
    let _ = writeln!(err, "ofi-pingpong: server listening on {}", link.local);
    if args.verbose {
        let _ = writeln!(err, "ofi-pingpong: {n} contexts, one thread each");
    }
    let mut c0 = Cx::new(&s.pairs[0], s.inject, args.timeout);
    c0.post_recv(Buf::zeroed(CTRL_BUF))?;
    let c = c0.recv_done("waiting for a client")?;
    let plan = Plan::decode(&c.buf[..c.len.min(c.buf.len())])
        .ok_or_else(|| Failure::new("a malformed hello"))?;
    let client =
        s.av.insert(plan.client)
            .map_err(|e| Failure::new(format!("fi_av_insert: {e}")))?;
    let client0 = fi_rx_addr(client, 0, RX_CTX_BITS);
    if plan.contexts != n || plan.window == 0 {
        let _ = c0.send(&[0], client0);
        let _ = c0.drain_to(0);
        return Err(Failure::new(format!(
            "the client runs {} contexts, this server {n}",
            plan.contexts
        )));
    }
    c0.send(&[HELLO], client0)?;
    c0.drain_to(0)?;
    drop(c0);
    let first_cpu = args.cpu.unwrap_or(0);
    let max = plan
        .sizes
        .iter()
        .map(|s| s.0)
        .max()
        .unwrap_or(0)
        .max(FIN.len());
    let results: Vec<Result<(), Failure>> = std::thread::scope(|sc| {
        let handles: Vec<_> = s
            .pairs
            .iter()
            .enumerate()
            .map(|(k, p)| {
                let (plan, inject, timeout) = (&plan, s.inject, args.timeout);
                sc.spawn(move || {
                    pin(first_cpu + k)?;
                    let mut cx = Cx::new(p, inject, timeout);
                    let back = fi_rx_addr(client, k as i32, RX_CTX_BITS);
                    server_pair(&mut cx, plan, back, max, k)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Failure::new("a thread panicked")))
            })
            .collect()
    });
    for r in results {
        r?;
    }
    if args.verbose {
        let _ = writeln!(
            err,
            "ofi-pingpong: server done, {} sizes: {}",
            plan.sizes.len(),
            s.stats()
        );
    }
    Ok(())
}

/// Server side of one context pair: every size's messages (each of its size), answered
/// as the plan says; context 0 then waits for the client's [`FIN`].
fn server_pair(
    cx: &mut Cx<'_>,
    plan: &Plan,
    back: FiAddr,
    max: usize,
    k: usize,
) -> Result<(), Failure> {
    for _ in 0..(2 * plan.window).max(2) {
        cx.post_recv(Buf::zeroed(max))?;
    }
    for (round, &(size, warm, timed)) in plan.sizes.iter().enumerate() {
        let total = warm + timed;
        let mut got = 0;
        while got < total {
            let c = cx.recv_done("receiving")?;
            if c.len != size {
                return Err(Failure::new(format!(
                    "a message of {} bytes in the {size}-byte round",
                    c.len
                )));
            }
            if plan.check {
                verify(&c.buf[..size], k, round, got as u64)?;
            }
            got += 1;
            let mut b = c.buf;
            b.set_len(b.capacity());
            cx.post_recv(b)?;
            let answer = got == warm
                || got == total
                || (!plan.bandwidth && (got.max(warm) - warm.min(got)) % plan.window == 0);
            if answer {
                cx.send(&(got as u64).to_le_bytes(), back)?;
            }
        }
    }
    if k == 0 {
        let c = cx.recv_done("waiting for the client's end")?;
        if c.buf.get(..c.len) != Some(&FIN[..]) {
            return Err(Failure::new("the client's end message is malformed"));
        }
    }
    cx.drain_to(0)
}
