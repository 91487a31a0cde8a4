//! The client and the server.

use std::io::Write;
use std::net::{Ipv4Addr, SocketAddrV4, ToSocketAddrs};
use std::time::{Duration, Instant};

use ofi_nostd::addr::{ADDR_LEN, EpAddr};
use ofi_nostd::info::EpType;

use super::session::{CTRL_MAX, Ctrl, Event, Kind, Session};
use super::{
    Args, DEFAULT_PORT, DGRAM_WAIT, Dataplane, EpKind, Failure, Mode, Op, RETRY, header, plane,
    row, verify,
};
use crate::api::{Buf, Fabric};
use crate::runtime::dynamic_port;

/// Version of the control protocol (the first byte of a hello).
const PROTO_VERSION: u8 = 1;

/// How long the server keeps answering after its last reply, so a lost or repeated
/// final message is still served.
const LINGER: Duration = Duration::from_millis(200);

/// Pattern direction of pings and streamed messages.
const TO_SERVER: u64 = 0;
/// Pattern direction of replies.
const TO_CLIENT: u64 = 1;

/// `End` phases.
const PHASE_WARMUP: u8 = 0;
const PHASE_BURST: u8 = 1;
const PHASE_LAST: u8 = 2;

fn seed(round: u16, seq: u64, dir: u64) -> u64 {
    (u64::from(round) << 48) ^ (seq << 1) ^ dir
}

/// One size's result: timed messages sent and answered, and the time they took.
struct Sample {
    sent: u64,
    acked: u64,
    elapsed: Duration,
}

pub(super) fn main(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> Result<(), Failure> {
    if args.op == Op::Tagged && args.ep == EpKind::Dgram {
        return Err(Failure::new(
            "-m tagged needs -e rdm (DGRAM endpoints have no tagged operations)",
        ));
    }
    if args.dataplane == Dataplane::Udp && (args.iface.is_some() || args.ip.is_some()) {
        return Err(Failure::new(
            "--iface and --ip are for --dataplane tap|af_packet (use -s on UDP)",
        ));
    }
    if let Some(n) = args.contexts {
        return super::contexts::main(args, usize::from(n), out, err);
    }
    if let Some(cpu) = args.cpu {
        pin(cpu)?;
    }
    let fabric = Fabric::open().map_err(|e| Failure::new(format!("fi_fabric: {e}")))?;
    match &args.server {
        Some(server) => client(args, &fabric, server, out, err),
        None => server(args, &fabric, out, err),
    }
}

/// Pins the calling thread to `cpu` (an error beyond what the CPU set can name).
pub(super) fn pin(cpu: usize) -> Result<(), Failure> {
    use rustix::thread::{CpuSet, sched_setaffinity};
    if cpu >= CpuSet::MAX_CPU {
        return Err(Failure::new(format!("--cpu {cpu}: no such CPU")));
    }
    let mut set = CpuSet::new();
    set.set(cpu);
    sched_setaffinity(None, &set).map_err(|e| Failure::new(format!("--cpu {cpu}: {e}")))
}

/// The endpoint, the data plane, and what both roles share.
pub(super) struct Common<'a> {
    pub(super) args: &'a Args,
    pub(super) s: Session,
    out: &'a mut dyn Write,
    pub(super) err: &'a mut dyn Write,
    max_msg: usize,
    header_done: bool,
}

impl Common<'_> {
    fn open<'a>(
        args: &'a Args,
        fabric: &Fabric,
        ip: Ipv4Addr,
        port: u16,
        peer: Option<Ipv4Addr>,
        out: &'a mut dyn Write,
        err: &'a mut dyn Write,
    ) -> Result<Common<'a>, Failure> {
        let (domain, link) = plane::open(fabric, args, ip, port, peer)?;
        let ep_type = match args.ep {
            EpKind::Rdm => EpType::Rdm,
            EpKind::Dgram => EpType::Dgram,
            EpKind::Msg => EpType::Msg,
        };
        let max_msg = match args.ep {
            EpKind::Rdm | EpKind::Msg => domain.info().ep_attr.max_msg_size,
            EpKind::Dgram => link.dgram_max,
        };
        let spin = !args.block;
        let mut s = Session::open(domain, ep_type, args.op == Op::Tagged, spin, args.timeout)?;
        s.limit_inject(max_msg);
        s.set_multi(args.multi_recv)?;
        let inject = s.inject_size;
        let mut c = Common {
            args,
            s,
            out,
            err,
            max_msg,
            header_done: false,
        };
        c.log(format_args!(
            "{} on {}:{} ({:?} data plane, {:?} endpoint, {:?} ops, {:?} progress, {}; max message {} bytes, inject below {})",
            if args.is_client() { "client" } else { "server" },
            link.local.ip(),
            link.local.port(),
            args.dataplane,
            args.ep,
            args.op,
            args.progress,
            if spin { "busy-polling" } else { "blocking waits" },
            max_msg,
            inject,
        ));
        Ok(c)
    }

    pub(super) fn log(&mut self, msg: std::fmt::Arguments<'_>) {
        if self.args.verbose {
            let _ = writeln!(self.err, "ofi-pingpong: {msg}");
        }
    }

    fn print_row(&mut self, size: usize, r: &Sample, xfers: u64) -> Result<(), Failure> {
        let w = |e: std::io::Error| Failure::new(format!("writing the results: {e}"));
        if !self.header_done {
            writeln!(self.out, "{}", header()).map_err(w)?;
            self.header_done = true;
        }
        let us = r.elapsed.as_secs_f64() * 1e6;
        writeln!(self.out, "{}", row(size, r.sent, r.acked, us, xfers)).map_err(w)?;
        self.out.flush().map_err(w)
    }

    /// Checks a received data message: its length and, with `-c`, every byte.
    fn check(&self, buf: &Buf, size: usize, round: u16, seq: u64, dir: u64) -> Result<(), Failure> {
        if buf.len() != size {
            return Err(Failure::new(format!(
                "message {seq} of size {size} arrived with {} bytes",
                buf.len()
            )));
        }
        if self.args.check
            && let Err(at) = verify(buf, seed(round, seq, dir))
        {
            return Err(Failure::new(format!(
                "data check failed: message {seq} of size {size}, byte {at} is wrong"
            )));
        }
        Ok(())
    }

    fn pattern(&self, round: u16, seq: u64, dir: u64) -> Option<u64> {
        self.args.check.then(|| seed(round, seq, dir))
    }

    fn xfers(&self) -> u64 {
        if self.args.mode == Mode::Pingpong {
            2
        } else {
            1
        }
    }
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    b.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

fn le_u16(b: &[u8], at: usize) -> u16 {
    b.get(at..at + 2)
        .and_then(|s| s.try_into().ok())
        .map_or(0, u16::from_le_bytes)
}

/// The parameters of one size (a `Sync`'s payload).
#[derive(Debug, Clone, Copy)]
struct SizeParams {
    size: usize,
    count: u64,
    warmup: u64,
    round: u16,
    window: u32,
}

impl SizeParams {
    fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(30);
        v.extend_from_slice(&(self.size as u64).to_le_bytes());
        v.extend_from_slice(&self.count.to_le_bytes());
        v.extend_from_slice(&self.warmup.to_le_bytes());
        v.extend_from_slice(&self.round.to_le_bytes());
        v.extend_from_slice(&self.window.to_le_bytes());
        v
    }

    fn decode(b: &[u8]) -> Option<SizeParams> {
        (b.len() >= 30).then(|| SizeParams {
            size: le_u64(b, 0) as usize,
            count: le_u64(b, 8),
            warmup: le_u64(b, 16),
            round: le_u16(b, 24),
            window: u32::from_le_bytes([b[26], b[27], b[28], b[29]]),
        })
    }
}

/// Messages a rate burst posts with FI_MORE before one goes without it (a transmit
/// pass).
const BATCH: u64 = 16;

fn end_payload(round: u16, expected: u64, phase: u8) -> Vec<u8> {
    let mut v = round.to_le_bytes().to_vec();
    v.extend_from_slice(&expected.to_le_bytes());
    v.push(phase);
    v
}

/// What a hello says: the options both sides must share, and the client's address.
fn hello_payload(args: &Args, addr: EpAddr) -> Vec<u8> {
    let mut v = vec![
        PROTO_VERSION,
        args.ep as u8,
        args.op as u8,
        args.mode as u8,
        u8::from(args.check),
    ];
    v.extend_from_slice(&addr.to_sockaddr_in());
    v
}

/// The options both sides must share, as the command line gives them.
fn options(args: &Args) -> String {
    describe(
        args.ep as u8,
        args.op as u8,
        args.mode as u8,
        u8::from(args.check),
    )
}

fn describe(ep: u8, op: u8, mode: u8, check: u8) -> String {
    let ep = match ep {
        e if e == EpKind::Rdm as u8 => "rdm",
        e if e == EpKind::Msg as u8 => "msg",
        _ => "dgram",
    };
    let op = if op == Op::Msg as u8 { "msg" } else { "tagged" };
    let mode = match mode {
        m if m == Mode::Pingpong as u8 => "pingpong",
        m if m == Mode::Bandwidth as u8 => "bandwidth",
        _ => "rate",
    };
    format!(
        "-e {ep} -m {op} --mode {mode}{}",
        if check != 0 { " -c" } else { "" }
    )
}

// ---------------------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------------------

pub(super) fn resolve(server: &str, dst_port: Option<u16>) -> Result<SocketAddrV4, Failure> {
    let (host, port) = match server.rsplit_once(':') {
        Some((h, p)) if p.parse::<u16>().is_ok() => (h, p.parse::<u16>().ok()),
        _ => (server, None),
    };
    let port = port.or(dst_port).unwrap_or(DEFAULT_PORT);
    (host, port)
        .to_socket_addrs()
        .map_err(|e| Failure::new(format!("server address {server:?}: {e}")))?
        .find_map(|a| match a {
            std::net::SocketAddr::V4(v4) => Some(v4),
            std::net::SocketAddr::V6(_) => None,
        })
        .ok_or_else(|| Failure::new(format!("server address {server:?}: no IPv4 address")))
}

/// A client's own address and port towards `dest`: over UDP `-s` or the route's
/// source address and `-B` or any port; Ethernet planes take `--ip` and need a port of
/// their own: `-B`, or one from the dynamic range.
pub(super) fn client_source(args: &Args, dest: &SocketAddrV4) -> (Ipv4Addr, u16) {
    match args.dataplane {
        Dataplane::Udp => (
            args.src_addr
                .or_else(|| plane::route_source(*dest.ip()))
                .unwrap_or(Ipv4Addr::LOCALHOST),
            args.src_port.unwrap_or(0),
        ),
        _ => (
            Ipv4Addr::UNSPECIFIED,
            args.src_port.unwrap_or_else(|| dynamic_port(0)),
        ),
    }
}

struct Client<'a> {
    c: Common<'a>,
    round: u16,
    lost: u64,
    sent: u64,
}

fn client(
    args: &Args,
    fabric: &Fabric,
    server: &str,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), Failure> {
    let dest = resolve(server, args.dst_port)?;
    let (ip, port) = client_source(args, &dest);
    let mut c = Common::open(args, fabric, ip, port, Some(*dest.ip()), out, err)?;
    let to = EpAddr::new(dest.ip().octets(), dest.port(), 0);
    if args.ep == EpKind::Msg {
        // The server's passive endpoint is its address's endpoint 0.
        c.s.connect(to)?;
    }
    c.s.set_peer(to)?;
    let sizes = args.size_list(c.max_msg)?;
    let mut cl = Client {
        c,
        round: 0,
        lost: 0,
        sent: 0,
    };
    let hello = hello_payload(args, cl.c.s.addr());
    cl.call(Kind::Hello, &hello, Kind::HelloAck)?;
    cl.c.log(format_args!("connected to {dest}; sizes {sizes:?}"));
    for size in sizes {
        let r = match args.mode {
            Mode::Pingpong => cl.pingpong(size)?,
            Mode::Bandwidth => cl.stream(size, false)?,
            Mode::Rate => cl.stream(size, true)?,
        };
        if args.ep == EpKind::Dgram {
            cl.sent += r.sent;
            cl.lost += r.sent.saturating_sub(r.acked);
        }
        let x = cl.c.xfers();
        cl.c.print_row(size, &r, x)?;
    }
    cl.call(Kind::Fin, &[], Kind::FinAck)?;
    if cl.lost > 0 {
        let (lost, sent) = (cl.lost, cl.sent);
        let _ = writeln!(
            cl.c.err,
            "ofi-pingpong: {lost} of {sent} DGRAM {} lost ({:.2}%)",
            if args.mode == Mode::Pingpong {
                "round trips"
            } else {
                "messages"
            },
            lost as f64 * 100.0 / sent as f64
        );
    }
    let stats = cl.c.s.stats();
    cl.c.log(format_args!("done: {stats}"));
    Ok(())
}

fn ep_name(ep: EpKind) -> &'static str {
    match ep {
        EpKind::Rdm => "rdm",
        EpKind::Dgram => "dgram",
        EpKind::Msg => "msg",
    }
}

impl Client<'_> {
    /// Sends a request and waits for its answer `want` (repeating it every [`RETRY`] on
    /// DGRAM endpoints).
    fn call(&mut self, kind: Kind, payload: &[u8], want: Kind) -> Result<Ctrl, Failure> {
        let id = self.ask(kind, payload)?;
        self.answer(id, kind, payload, want)
    }

    /// Sends request `kind` without waiting; its id, for [`Client::answer`].
    fn ask(&mut self, kind: Kind, payload: &[u8]) -> Result<u32, Failure> {
        let s = &mut self.c.s;
        s.ctrl_id = s.ctrl_id.wrapping_add(1);
        let id = s.ctrl_id;
        if kind == Kind::Hello && !s.dgram {
            // The connection's first message: its failure must surface.
            s.send_ctrl_tracked(kind, id, payload)?;
        } else {
            s.send_ctrl(kind, id, payload)?;
        }
        Ok(id)
    }

    /// Waits for the answer `want` to request `id` (sent by [`Client::ask`]; resent
    /// over DGRAM while none comes).
    fn answer(&mut self, id: u32, kind: Kind, payload: &[u8], want: Kind) -> Result<Ctrl, Failure> {
        let s = &mut self.c.s;
        let deadline = Instant::now() + s.timeout;
        let mut resend = Instant::now() + RETRY;
        loop {
            let until = if s.dgram {
                deadline.min(resend)
            } else {
                deadline
            };
            match s.next(until)? {
                Some(Event::Ctrl(c)) if c.id == id && c.kind == want => return Ok(c),
                Some(Event::Ctrl(c)) if c.id == id && c.kind == Kind::Nak => {
                    let theirs = match c.payload[..] {
                        [ep, op, mode, check, ..] => describe(ep, op, mode, check),
                        _ => "other options".to_owned(),
                    };
                    return Err(Failure::new(format!(
                        "the server refused: client runs {}, server {theirs}",
                        options(self.c.args)
                    )));
                }
                Some(Event::Ctrl(_)) => s.stale += 1,
                Some(Event::Data { buf, .. }) => {
                    s.stale += 1;
                    s.recycle(buf)?;
                }
                None => {
                    if Instant::now() >= deadline {
                        let hint = if kind == Kind::Hello {
                            format!(" (is it running, with -e {}?)", ep_name(self.c.args.ep))
                        } else {
                            String::new()
                        };
                        return Err(Failure::new(format!(
                            "no answer from the server to {kind:?} within {:?}{hint}",
                            s.timeout
                        )));
                    }
                    s.send_ctrl(kind, id, payload)?;
                    resend = Instant::now() + RETRY;
                }
            }
        }
    }

    fn params(&mut self, size: usize) -> SizeParams {
        self.round = self.round.wrapping_add(1).max(1);
        SizeParams {
            size,
            count: self.c.args.iterations_for(size) as u64,
            warmup: self.c.args.warmup() as u64,
            round: self.round,
            window: self.c.args.window,
        }
    }

    fn pingpong(&mut self, size: usize) -> Result<Sample, Failure> {
        let p = self.params(size);
        let depth = if self.c.s.dgram { 4 } else { 2 };
        self.c.s.configure_rx(size, depth, p.round)?;
        self.c.s.prepare_tx(size, 2)?;
        self.call(Kind::Sync, &p.encode(), Kind::SyncAck)?;
        let total = p.warmup + p.count;
        let timeout = self.c.s.timeout;
        let mut acked = 0;
        let mut t0 = Instant::now();
        let mut last_reply = Instant::now();
        // The buffer of the last reply is re-posted after the next send, as the server
        // does: the other receive is posted, and the send should not wait for it.
        let mut spent = None;
        for i in 0..total {
            if i == p.warmup {
                t0 = Instant::now();
            }
            let pat = self.c.pattern(p.round, i, TO_SERVER);
            self.c.s.send_data(size, p.round, i, pat)?;
            if let Some(buf) = spent.take() {
                self.c.s.recycle(buf)?;
            }
            let wait = if self.c.s.dgram { DGRAM_WAIT } else { timeout };
            let deadline = Instant::now() + wait;
            let got = loop {
                match self.c.s.next(deadline)? {
                    None => break false,
                    Some(Event::Data { round, seq, buf }) if round == p.round && seq == i => {
                        self.c.check(&buf, size, round, seq, TO_CLIENT)?;
                        spent = Some(buf);
                        break true;
                    }
                    Some(Event::Data { buf, .. }) => {
                        self.c.s.stale += 1;
                        self.c.s.recycle(buf)?;
                    }
                    Some(Event::Ctrl(_)) => self.c.s.stale += 1,
                }
            };
            if got {
                if self.c.s.dgram {
                    last_reply = Instant::now();
                }
                if i >= p.warmup {
                    acked += 1;
                }
            } else if !self.c.s.dgram {
                return Err(Failure::new(format!(
                    "timed out after {timeout:?} waiting for reply {i} (size {size})"
                )));
            } else if last_reply.elapsed() >= timeout {
                return Err(Failure::new(format!(
                    "no reply from the server for {timeout:?} (size {size}, message {i})"
                )));
            }
        }
        let elapsed = t0.elapsed();
        if let Some(buf) = spent.take() {
            self.c.s.recycle(buf)?;
        }
        self.call(
            Kind::End,
            &end_payload(p.round, total, PHASE_LAST),
            Kind::EndAck,
        )?;
        Ok(Sample {
            sent: p.count,
            acked,
            elapsed,
        })
    }

    /// Bandwidth (one stream, one final acknowledgement) or rate (bursts of a window,
    /// each acknowledged; over RDM the next burst leaves before the answer comes).
    fn stream(&mut self, size: usize, bursts: bool) -> Result<Sample, Failure> {
        let p = self.params(size);
        // Only control answers come back.
        self.c.s.configure_rx(CTRL_MAX, 2, p.round)?;
        self.c.s.prepare_tx(size, p.window as usize)?;
        self.call(Kind::Sync, &p.encode(), Kind::SyncAck)?;
        let total = p.warmup + p.count;
        let mut seq = 0;
        let mut warm_acked = 0;
        if p.warmup > 0 {
            self.burst(size, p.round, 0..p.warmup)?;
            seq = p.warmup;
            let a = self.call(
                Kind::End,
                &end_payload(p.round, seq, PHASE_WARMUP),
                Kind::EndAck,
            )?;
            warm_acked = le_u64(&a.payload, 0);
        }
        let t0 = Instant::now();
        let mut acked = warm_acked;
        // Reliable bursts overlap: burst k+1 leaves while the server still takes burst k
        // (whose END is answered meanwhile), never more than two windows ahead of the
        // server, which keeps twice the window posted. Over DGRAM (losses: an END may need
        // resending) each burst waits for its answer.
        let overlap = bursts && !self.c.s.dgram;
        let mut waiting: Option<(u32, Vec<u8>)> = None;
        while seq < total {
            let n = if bursts {
                u64::from(p.window).min(total - seq)
            } else {
                total - seq
            };
            self.burst(size, p.round, seq..seq + n)?;
            seq += n;
            let phase = if seq == total {
                PHASE_LAST
            } else {
                PHASE_BURST
            };
            let end = end_payload(p.round, seq, phase);
            if !overlap {
                let a = self.call(Kind::End, &end, Kind::EndAck)?;
                acked = le_u64(&a.payload, 0);
                continue;
            }
            let id = self.ask(Kind::End, &end)?;
            if let Some((prev, prev_end)) = waiting.replace((id, end)) {
                let a = self.answer(prev, Kind::End, &prev_end, Kind::EndAck)?;
                acked = le_u64(&a.payload, 0);
            }
        }
        if let Some((id, end)) = waiting {
            let a = self.answer(id, Kind::End, &end, Kind::EndAck)?;
            acked = le_u64(&a.payload, 0);
        }
        if p.count == 0 {
            self.call(
                Kind::End,
                &end_payload(p.round, seq, PHASE_LAST),
                Kind::EndAck,
            )?;
        }
        Ok(Sample {
            sent: p.count,
            acked: acked.saturating_sub(warm_acked),
            elapsed: t0.elapsed(),
        })
    }

    fn burst(
        &mut self,
        size: usize,
        round: u16,
        seqs: std::ops::Range<u64>,
    ) -> Result<(), Failure> {
        // FI_MORE on the burst, except on every BATCH-th message: its messages leave in
        // batches of transmit passes, and the server starts on the first batch while the
        // rest is still being posted.
        self.c.s.set_more(true);
        let sent = seqs.into_iter().try_for_each(|i| {
            let pat = self.c.pattern(round, i, TO_SERVER);
            self.c.s.send_data(size, round, i, pat)?;
            if (i + 1) % BATCH == 0 {
                // Dropping FI_MORE runs the transmit pass; the next message sets it again.
                self.c.s.set_more(false);
                self.c.s.set_more(true);
            }
            Ok(())
        });
        self.c.s.set_more(false);
        sent?;
        self.c.s.tx_idle()
    }
}

// ---------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------

pub(super) struct Server<'a> {
    pub(super) c: Common<'a>,
    /// The last request answered (id, kind) and the answer, repeated for duplicates.
    last: Option<(u32, Kind, Kind, Vec<u8>)>,
    /// Serving several clients (`--serve`): a new client's hello ends the current one.
    serving: bool,
    /// The current client's address and hello id (a DGRAM hello repeated by it is not
    /// a new client).
    client: Option<(EpAddr, u32)>,
    /// A hello that came while another client was served: the next client.
    pub(super) next_hello: Option<Ctrl>,
}

fn server(
    args: &Args,
    fabric: &Fabric,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), Failure> {
    let ip = args.src_addr.unwrap_or(Ipv4Addr::LOCALHOST);
    let port = args.src_port.unwrap_or(DEFAULT_PORT);
    let c = Common::open(args, fabric, ip, port, None, out, err)?;
    let mut sv = Server {
        c,
        last: None,
        serving: args.serve.is_some(),
        client: None,
        next_hello: None,
    };
    let me = sv.c.s.addr();
    let pep = if args.ep == EpKind::Msg {
        Some(sv.c.s.listen()?)
    } else {
        None
    };
    let _ = writeln!(
        sv.c.err,
        "ofi-pingpong: server listening on {}:{}",
        Ipv4Addr::from(me.ip),
        me.port
    );
    let _ = sv.c.err.flush();
    if let Some(pep) = &pep {
        if args.serve.is_some() {
            // Each client would need its own accepted endpoint; --serve reuses one.
            return Err(Failure::new("--serve is not supported with -e msg"));
        }
        sv.c.s.accept(pep)?;
    }
    match args.serve {
        Some(n) => super::serve::run(&mut sv, n),
        None => {
            let hello = sv.wait_hello(Some(Instant::now() + sv.c.s.timeout))?;
            sv.client(hello)
        }
    }
}

impl Server<'_> {
    /// The next client's hello (one that came during the last client first), waiting
    /// until `deadline` (`None`: without a bound).
    pub(super) fn wait_hello(&mut self, deadline: Option<Instant>) -> Result<Ctrl, Failure> {
        if let Some(h) = self.next_hello.take() {
            return Ok(h);
        }
        let timeout = self.c.s.timeout;
        loop {
            // Without a deadline, wait in slices of the timeout.
            let until = deadline.unwrap_or_else(|| Instant::now() + timeout);
            match self.c.s.next(until)? {
                None if deadline.is_some() => {
                    // Clients we refused for their key (another one, or none while we
                    // have one, or one while we have none) are why, if there were any.
                    let refused = self.c.s.auth_failures();
                    if refused > 0 {
                        return Err(Failure::new(format!(
                            "no client within {timeout:?}: refused {refused} connection \
                             attempts whose auth key did not match ours (FI_EKEYREJECTED)"
                        )));
                    }
                    return Err(Failure::new(format!(
                        "no client within {timeout:?} (started the client with -e {}?)",
                        ep_name(self.c.args.ep)
                    )));
                }
                None => {}
                Some(Event::Ctrl(c)) if c.kind == Kind::Hello => return Ok(c),
                Some(Event::Ctrl(_)) => self.c.s.stale += 1,
                Some(Event::Data { buf, .. }) => {
                    self.c.s.stale += 1;
                    self.c.s.recycle(buf)?;
                }
            }
        }
    }

    /// The address a hello gives for its client (for messages), if well formed.
    pub(super) fn hello_addr(hello: &Ctrl) -> Option<EpAddr> {
        hello
            .payload
            .get(5..5 + ADDR_LEN)
            .and_then(EpAddr::from_sockaddr_in)
    }

    /// Serves the client that sent `hello`, from its hello to its fin.
    pub(super) fn client(&mut self, hello: Ctrl) -> Result<(), Failure> {
        let args = self.c.args;
        let me = self.c.s.addr();
        self.last = None;
        self.c.header_done = false;
        let p = &hello.payload;
        if p.len() < 5 + ADDR_LEN || p[0] != PROTO_VERSION {
            return Err(Failure::new(
                "a malformed hello (another program on our port?)",
            ));
        }
        let client = Self::hello_addr(&hello)
            .ok_or_else(|| Failure::new("a hello with a malformed address"))?;
        self.c.s.set_peer(client)?;
        self.client = Some((client, hello.id));
        let theirs = describe(p[1], p[2], p[3], p[4]);
        let ours = options(args);
        if theirs != ours {
            // The answer carries our options; the client words the refusal.
            self.reply(&hello, Kind::Nak, hello_payload(args, me)[1..5].to_vec())?;
            self.linger()?;
            return Err(Failure::new(format!(
                "refused a client: client runs {theirs}, server {ours}"
            )));
        }
        self.reply(&hello, Kind::HelloAck, Vec::new())?;
        self.c.log(format_args!(
            "client {}:{}",
            Ipv4Addr::from(client.ip),
            client.port
        ));
        let timeout = self.c.s.timeout;
        loop {
            let deadline = Instant::now() + timeout;
            let Some(req) = self.request(deadline)? else {
                return Err(Failure::new(format!(
                    "the client went quiet: no request within {timeout:?}"
                )));
            };
            match req.kind {
                Kind::Sync => {
                    let p = SizeParams::decode(&req.payload)
                        .ok_or_else(|| Failure::new("a malformed sync"))?;
                    if p.size > self.c.max_msg {
                        return Err(Failure::new(format!(
                            "the client asked for {} bytes, more than our maximum message size {}",
                            p.size, self.c.max_msg
                        )));
                    }
                    let r = match args.mode {
                        Mode::Pingpong => self.pingpong(&req, p)?,
                        _ => self.stream(&req, p)?,
                    };
                    let x = self.c.xfers();
                    self.c.print_row(p.size, &r, x)?;
                }
                Kind::Fin => {
                    self.reply(&req, Kind::FinAck, Vec::new())?;
                    self.linger()?;
                    let stats = self.c.s.stats();
                    self.c.log(format_args!("done: {stats}"));
                    return Ok(());
                }
                _ => self.c.s.stale += 1,
            }
        }
    }
}

impl Server<'_> {
    fn reply(&mut self, req: &Ctrl, kind: Kind, payload: Vec<u8>) -> Result<(), Failure> {
        self.c.s.send_ctrl(kind, req.id, &payload)?;
        self.last = Some((req.id, req.kind, kind, payload));
        Ok(())
    }

    /// A control message that is new: repeats of the last request are answered again
    /// and swallowed. Serving several clients, a hello from anyone but the current
    /// client repeating its own (DGRAM) ends the current client: it is kept for
    /// [`Server::wait_hello`] (a client restarted after a crash says hello again, from
    /// the same address on RDM).
    fn fresh(&mut self, c: Ctrl) -> Result<Option<Ctrl>, Failure> {
        if let Some((id, req, ans, payload)) = &self.last
            && *id == c.id
            && *req == c.kind
        {
            let (ans, payload) = (*ans, payload.clone());
            self.c.s.send_ctrl(ans, c.id, &payload)?;
            return Ok(None);
        }
        if self.serving && c.kind == Kind::Hello {
            let from = Self::hello_addr(&c);
            let repeat = self.c.s.dgram
                && self
                    .client
                    .is_some_and(|(a, id)| Some(a) == from && id == c.id);
            if !repeat {
                let who = from.map_or("?".to_owned(), |a| {
                    format!("{}:{}", Ipv4Addr::from(a.ip), a.port)
                });
                self.next_hello = Some(c);
                return Err(Failure::new(format!("a new client ({who}) said hello")));
            }
            self.c.s.stale += 1;
            return Ok(None);
        }
        Ok(Some(c))
    }

    /// The next new request, discarding stray data; `None` at `deadline`.
    fn request(&mut self, deadline: Instant) -> Result<Option<Ctrl>, Failure> {
        loop {
            match self.c.s.next(deadline)? {
                None => return Ok(None),
                Some(Event::Ctrl(c)) => {
                    if let Some(c) = self.fresh(c)? {
                        return Ok(Some(c));
                    }
                }
                Some(Event::Data { buf, .. }) => {
                    self.c.s.stale += 1;
                    self.c.s.recycle(buf)?;
                }
            }
        }
    }

    /// Keeps answering repeats (and driving retransmissions) for [`LINGER`], or until
    /// the next client says hello (serving several).
    fn linger(&mut self) -> Result<(), Failure> {
        let until = Instant::now() + LINGER;
        loop {
            match self.request(until) {
                Ok(Some(_)) => {}
                Ok(None) => return Ok(()),
                Err(_) if self.next_hello.is_some() => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    fn pingpong(&mut self, req: &Ctrl, p: SizeParams) -> Result<Sample, Failure> {
        let depth = if self.c.s.dgram { 4 } else { 2 };
        self.c.s.configure_rx(p.size, depth, p.round)?;
        self.c.s.prepare_tx(p.size, 2)?;
        self.reply(req, Kind::SyncAck, Vec::new())?;
        let timeout = self.c.s.timeout;
        let mut got = 0u64;
        let mut t_start = (p.warmup == 0).then(Instant::now);
        let mut t_end = Instant::now();
        loop {
            match self.c.s.next(Instant::now() + timeout)? {
                None => {
                    return Err(Failure::new(format!(
                        "timed out after {timeout:?} waiting for the client (size {}, {got} of {} received)",
                        p.size, p.count
                    )));
                }
                Some(Event::Data { round, seq, buf }) if round == p.round => {
                    self.c.check(&buf, p.size, round, seq, TO_SERVER)?;
                    // The reply first: other receives are posted, so the buffer can
                    // wait until the reply is on its way.
                    let pat = self.c.pattern(round, seq, TO_CLIENT);
                    self.c.s.send_data(p.size, round, seq, pat)?;
                    self.c.s.recycle(buf)?;
                    if seq + 1 == p.warmup {
                        t_start = Some(Instant::now());
                    } else if seq >= p.warmup {
                        got += 1;
                        t_start.get_or_insert_with(Instant::now);
                        t_end = Instant::now();
                    }
                }
                Some(Event::Data { buf, .. }) => {
                    self.c.s.stale += 1;
                    self.c.s.recycle(buf)?;
                }
                Some(Event::Ctrl(c)) => {
                    if let Some(c) = self.fresh(c)? {
                        if c.kind == Kind::End && le_u16(&c.payload, 0) == p.round {
                            self.reply(&c, Kind::EndAck, got.to_le_bytes().to_vec())?;
                            break;
                        }
                        self.c.s.stale += 1;
                    }
                }
            }
        }
        Ok(Sample {
            sent: p.count,
            acked: got,
            elapsed: t_start.map_or(Duration::ZERO, |t| t_end.saturating_duration_since(t)),
        })
    }

    fn stream(&mut self, req: &Ctrl, p: SizeParams) -> Result<Sample, Failure> {
        let depth = (2 * p.window as usize).clamp(2, 512);
        self.c.s.configure_rx(p.size, depth, p.round)?;
        self.c.s.prepare_tx(0, 0)?;
        self.reply(req, Kind::SyncAck, Vec::new())?;
        let timeout = self.c.s.timeout;
        let (mut count, mut timed) = (0u64, 0u64);
        let mut t_start = (p.warmup == 0).then(Instant::now);
        let mut t_end = Instant::now();
        // ENDs not answered yet, oldest first (a client overlapping its bursts may have
        // two out; each is answered once its burst is in).
        let mut pending: std::collections::VecDeque<(Ctrl, u64, u8)> = Default::default();
        loop {
            if let Some((c, expected, phase)) = pending.front()
                && (self.c.s.dgram || count >= *expected)
            {
                let (c, phase) = (c.clone(), *phase);
                if phase == PHASE_LAST {
                    // Every message is in (the clock is not read per message: on a
                    // stream of small ones that cost as much as receiving one).
                    t_end = Instant::now();
                }
                self.reply(&c, Kind::EndAck, count.to_le_bytes().to_vec())?;
                pending.pop_front();
                match phase {
                    PHASE_WARMUP => t_start = Some(Instant::now()),
                    PHASE_LAST => break,
                    _ => {}
                }
                continue;
            }
            match self.c.s.next_within(timeout)? {
                None => {
                    return Err(Failure::new(format!(
                        "timed out after {timeout:?} waiting for the client (size {}, {count} of {} received)",
                        p.size,
                        p.warmup + p.count
                    )));
                }
                Some(Event::Data { round, seq, buf }) if round == p.round => {
                    self.c.check(&buf, p.size, round, seq, TO_SERVER)?;
                    self.c.s.recycle(buf)?;
                    count += 1;
                    if seq >= p.warmup {
                        timed += 1;
                        t_start.get_or_insert_with(Instant::now);
                    }
                }
                Some(Event::Data { buf, .. }) => {
                    self.c.s.stale += 1;
                    self.c.s.recycle(buf)?;
                }
                Some(Event::Ctrl(c)) => {
                    if let Some(c) = self.fresh(c)? {
                        if c.kind == Kind::End && le_u16(&c.payload, 0) == p.round {
                            let expected = le_u64(&c.payload, 2);
                            let phase = c.payload.get(10).copied().unwrap_or(PHASE_LAST);
                            pending.push_back((c, expected, phase));
                        } else {
                            self.c.s.stale += 1;
                        }
                    }
                }
            }
        }
        Ok(Sample {
            sent: p.count,
            acked: timed,
            elapsed: t_start.map_or(Duration::ZERO, |t| t_end.saturating_duration_since(t)),
        })
    }
}
