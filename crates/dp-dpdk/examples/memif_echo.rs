//! Raw `net_memif` echo and stream: the floors `ofi-pingpong --dataplane dpdk` is
//! compared against (`cargo xtask bench`).
//!
//! Two processes: a server that sends every frame straight back (MACs swapped), and a
//! client that sends one 64-byte frame, busy-polls for its echo and repeats. Each frame
//! is one `rte_eth_tx_burst` and one `rte_eth_rx_burst` on a [`DpdkLink`]: zero-copy
//! mbufs, no protocol above the Ethernet header, no checks beyond the sequence number.
//!
//! With `--stream SECS` the client instead sends frames of `--size` bytes (default: the
//! largest the MTU allows, 1514 at MTU 1500) one way for that long, in bursts of
//! [`dp_dpdk::MAX_BURST`] (one `rte_eth_tx_burst` each, [`Link::transmit_burst`]), as
//! fast as the driver takes them (what it refuses after a few tries is dropped and
//! counted); the server counts what arrives, not echoing it, and tells the client at
//! the end. `--mtu` (both sides) sizes the mbufs and memif's shared buffers for jumbo
//! frames ([`PortConfig::with_mtu`]).
//!
//! ```text
//! memif_echo server --socket /tmp/m.sock [--eal "ARGS"] [--mtu MTU]
//! memif_echo client --socket /tmp/m.sock [--eal "ARGS"] [--iters N] [--warmup N] [--size BYTES]
//! memif_echo client --socket /tmp/m.sock [--eal "ARGS"] [--mtu MTU] --stream SECS [--size BYTES]
//! ```
//!
//! The client prints one line, `raw memif echo: size 64 iters N rtt_ns mean M median D
//! p99 P min L batch_mean_median B batches K` (round trips in nanoseconds; B is the
//! median over batches of 5000 round trips of each batch's mean), or, streaming, `raw
//! memif stream: size S frames N bytes B secs T mb_per_sec R sent M tx_dropped D` (what
//! the server received between its first and its last burst of the stream, B bytes of
//! whole frames in T seconds, R = B / T / 10^6; what the client sent and dropped), and
//! stops the server. Build with `--features dpdk`.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use dp_dpdk::{DpdkLink, Eal, Port, PortConfig};
use wire::link::{Link, RxToken, TxMeta, TxToken};

/// EtherType of the frames (IEEE "local experimental 1").
const ETHERTYPE: u16 = 0x88b5;
/// EtherType of the frame that stops the server ("local experimental 2").
const STOP: u16 = 0x88b6;
/// How long either side waits for the other.
const WAIT: Duration = Duration::from_secs(30);
/// Round trips per batch of `batch_mean_median`.
const BATCH: usize = 5000;
/// What a frame of [`ETHERTYPE`] is, in its byte 18: an echo (sent back), a stream's
/// data (counted), the end of a stream (answered with a report), the report.
const KIND_ECHO: u8 = 0;
const KIND_DATA: u8 = 1;
const KIND_END: u8 = 2;
const KIND_REPORT: u8 = 3;
/// The sequence number of a stream's end and its report.
const END_SEQ: u32 = 0xffff_fff0;
/// The longest stream.
const MAX_STREAM: Duration = Duration::from_secs(60);

struct Opts {
    server: bool,
    socket: String,
    eal: Option<String>,
    iters: usize,
    warmup: usize,
    /// `None`: 64 (echo) or the MTU's largest frame (stream).
    size: Option<usize>,
    mtu: Option<u16>,
    stream: Option<Duration>,
}

fn parse() -> Result<Opts, String> {
    let mut args = std::env::args().skip(1);
    let role = args
        .next()
        .ok_or("usage: memif_echo server|client --socket PATH ...")?;
    let mut o = Opts {
        server: match role.as_str() {
            "server" => true,
            "client" => false,
            r => return Err(format!("role {r:?}: server or client")),
        },
        socket: String::new(),
        eal: None,
        iters: 100_000,
        warmup: 10_000,
        size: None,
        mtu: None,
        stream: None,
    };
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or(format!("{a} needs a value"));
        let num = |v: String| v.parse::<usize>().map_err(|e| format!("{v:?}: {e}"));
        match a.as_str() {
            "--socket" => o.socket = val()?,
            "--eal" => o.eal = Some(val()?),
            "--iters" => o.iters = num(val()?)?,
            "--warmup" => o.warmup = num(val()?)?,
            "--size" => o.size = Some(num(val()?)?),
            "--mtu" => {
                let v = val()?;
                o.mtu = Some(v.parse().map_err(|e| format!("--mtu {v:?}: {e}"))?);
            }
            "--stream" => {
                let v = val()?;
                let secs: f64 = v.parse().map_err(|e| format!("--stream {v:?}: {e}"))?;
                if !(secs > 0.0 && secs <= MAX_STREAM.as_secs_f64()) {
                    return Err(format!(
                        "--stream {v}: 0 to {} seconds",
                        MAX_STREAM.as_secs()
                    ));
                }
                o.stream = Some(Duration::from_secs_f64(secs));
            }
            _ => return Err(format!("unknown option {a:?}")),
        }
    }
    if o.socket.is_empty() {
        return Err("--socket PATH is required".into());
    }
    if o.size.is_some_and(|s| s < 19) || o.iters == 0 {
        return Err("--size at least 19 bytes, --iters at least 1".into());
    }
    Ok(o)
}

fn main() -> ExitCode {
    match parse().and_then(|o| run(&o)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("memif_echo: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(o: &Opts) -> Result<(), String> {
    let eal = match &o.eal {
        Some(a) => Eal::init(a.split_whitespace()),
        None => Eal::init(dp_dpdk::virtual_device_args(256)),
    }
    .map_err(|e| format!("EAL: {e}"))?;
    let (name, role) = if o.server {
        ("net_memif_echo_s", "server")
    } else {
        ("net_memif_echo_c", "client")
    };
    let mut cfg = PortConfig::vdev(
        name,
        &format!("role={role},id=0,socket={},socket-abstract=no", o.socket),
    );
    if let Some(mtu) = o.mtu {
        cfg = cfg.with_mtu(mtu);
    }
    cfg.queues = Some(1);
    let port = Port::open(eal, &cfg).map_err(|e| format!("memif port: {e}"))?;
    if o.server {
        println!("memif_echo: server ready");
    }
    port.wait_link_up(WAIT)
        .map_err(|e| format!("memif link: {e}"))?;
    let mut link = port.link(0).map_err(|e| e.to_string())?;
    if o.server {
        serve(&mut link)?;
        // The client closes right after its stop frame, sending its last frame first
        // and waiting for us to disconnect: take that frame, then close at once
        // (neither end polls any more; see `Port::peer_done`).
        let t = Instant::now();
        while !port.peer_done() && t.elapsed() < Duration::from_secs(1) {
            while let Some(f) = link.receive() {
                f.consume(|_| ());
            }
        }
        Ok(())
    } else if let Some(secs) = o.stream {
        stream(&mut link, o, secs)
    } else {
        client(&mut link, o)
    }
}

/// One frame: destination, our MAC, `ethertype`, the sequence number, zeros.
fn send(link: &mut DpdkLink, len: usize, dst: [u8; 6], ethertype: u16, seq: u32) -> bool {
    send_kind(link, len, dst, ethertype, seq, KIND_ECHO, &[])
}

/// One frame: destination, our MAC, `ethertype`, the sequence number, `kind`, `body`,
/// zeros (at least 60 bytes when there is a body).
fn send_kind(
    link: &mut DpdkLink,
    len: usize,
    dst: [u8; 6],
    ethertype: u16,
    seq: u32,
    kind: u8,
    body: &[u8],
) -> bool {
    let src = link.mac();
    let len = if body.is_empty() {
        len
    } else {
        len.max(60).max(19 + body.len())
    };
    let Some(tok) = link.transmit() else {
        return false;
    };
    tok.consume_with(len, |buf| {
        if buf.len() < len {
            return (TxMeta::none(), ());
        }
        buf[..6].copy_from_slice(&dst);
        buf[6..12].copy_from_slice(&src);
        buf[12..14].copy_from_slice(&ethertype.to_be_bytes());
        buf[14..18].copy_from_slice(&seq.to_be_bytes());
        buf[18..len].fill(0);
        buf[18] = kind;
        buf[19..19 + body.len()].copy_from_slice(body);
        (TxMeta::len(len), ())
    });
    link.flush();
    true
}

/// The kind of a frame of ours (byte 18 of an [`ETHERTYPE`] frame).
fn kind(f: &[u8]) -> Option<u8> {
    (f.len() >= 19 && u16::from_be_bytes([f[12], f[13]]) == ETHERTYPE).then(|| f[18])
}

/// What a stream's receiver counted: frames and bytes after its first burst, and the
/// time from that burst to its last.
#[derive(Debug, Default, Clone, Copy)]
struct Count {
    frames: u64,
    bytes: u64,
    first: Option<Instant>,
    last: Option<Instant>,
}

impl Count {
    /// The report's body: frames, bytes, nanoseconds, big-endian.
    fn body(&self) -> [u8; 24] {
        let ns = match (self.first, self.last) {
            (Some(a), Some(b)) => u64::try_from(b.duration_since(a).as_nanos()).unwrap_or(u64::MAX),
            _ => 0,
        };
        let mut b = [0u8; 24];
        b[..8].copy_from_slice(&self.frames.to_be_bytes());
        b[8..16].copy_from_slice(&self.bytes.to_be_bytes());
        b[16..].copy_from_slice(&ns.to_be_bytes());
        b
    }
}

/// Echoes every frame back to its sender until the stop frame.
fn serve(link: &mut DpdkLink) -> Result<(), String> {
    let me = link.mac();
    let mut idle = Instant::now();
    let mut held = [[0u8; 64]; dp_dpdk::MAX_BURST];
    let mut lens = [0usize; dp_dpdk::MAX_BURST];
    let mut count = Count::default();
    loop {
        let mut n = 0;
        let mut stop = false;
        let (mut data, mut data_bytes) = (0u64, 0u64);
        let mut end = None;
        let got = link.receive_burst(dp_dpdk::MAX_BURST, |_, f| {
            if f.len() >= 14 && u16::from_be_bytes([f[12], f[13]]) == STOP {
                stop = true;
            }
            match kind(f) {
                Some(KIND_DATA) => {
                    data += 1;
                    data_bytes += f.len() as u64;
                    return;
                }
                Some(KIND_END) => {
                    end = f[6..12].try_into().ok();
                    return;
                }
                _ => {}
            }
            let l = f.len().min(64);
            held[n][..l].copy_from_slice(&f[..l]);
            lens[n] = f.len();
            n += 1;
        });
        if stop {
            return Ok(());
        }
        if data > 0 {
            // The clock once per burst: the first burst starts the count.
            let now = Instant::now();
            if count.first.is_none() {
                count.first = Some(now);
            } else {
                count.frames += data;
                count.bytes += data_bytes;
            }
            count.last = Some(now);
        }
        if let Some(peer) = end {
            send_kind(
                link,
                64,
                peer,
                ETHERTYPE,
                END_SEQ,
                KIND_REPORT,
                &count.body(),
            );
            count = Count::default();
        }
        if got == 0 {
            if idle.elapsed() > WAIT {
                return Err("no frame for 30 s".into());
            }
            continue;
        }
        idle = Instant::now();
        if n == 0 {
            continue;
        }
        let mut i = 0;
        link.transmit_burst(n, |buf| {
            let (f, len) = (&held[i], lens[i]);
            i += 1;
            // Frames up to 64 bytes are echoed whole; longer ones keep their length.
            buf[..len.min(64)].copy_from_slice(&f[..len.min(64)]);
            buf.copy_within(6..12, 0);
            buf[6..12].copy_from_slice(&me);
            Some(TxMeta::len(len))
        });
    }
}

/// Waits for the echo of `seq`; its source MAC.
fn wait_echo(link: &mut DpdkLink, seq: u32, deadline: Instant) -> Result<[u8; 6], String> {
    loop {
        if let Some(tok) = link.receive() {
            let got = tok.consume(|f| {
                (f.len() >= 18 && f[14..18] == seq.to_be_bytes())
                    .then(|| f[6..12].try_into().unwrap_or([0; 6]))
            });
            if let Some(mac) = got {
                return Ok(mac);
            }
        } else if Instant::now() >= deadline {
            return Err(format!("no echo of frame {seq}"));
        }
    }
}

/// Probes until the server answers (it may not poll yet when the link comes up);
/// its MAC.
fn probe(link: &mut DpdkLink, size: usize) -> Result<[u8; 6], String> {
    let start = Instant::now();
    loop {
        send(link, size, [0xff; 6], ETHERTYPE, 0);
        match wait_echo(link, 0, Instant::now() + Duration::from_millis(20)) {
            Ok(mac) => return Ok(mac),
            Err(_) if start.elapsed() < WAIT => {}
            Err(e) => return Err(e),
        }
    }
}

/// Streams frames of `o.size` to the server for `secs`, then asks what it received.
fn stream(link: &mut DpdkLink, o: &Opts, secs: Duration) -> Result<(), String> {
    let mtu = link.capabilities().mtu;
    let size = o.size.unwrap_or(mtu);
    if size > mtu {
        return Err(format!(
            "frames of {size} bytes: the link's frames are at most {mtu} (give --mtu on both sides)"
        ));
    }
    let peer = probe(link, 64)?;
    let src = link.mac();
    let mut header = [0u8; 19];
    header[..6].copy_from_slice(&peer);
    header[6..12].copy_from_slice(&src);
    header[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    header[18] = KIND_DATA;
    let before = link.stats();
    let start = Instant::now();
    let mut seq = 1u32;
    let mut nomem = 0u32;
    while start.elapsed() < secs {
        let n = link.transmit_burst(dp_dpdk::MAX_BURST, |buf| {
            if buf.len() < size {
                return None;
            }
            buf[..19].copy_from_slice(&header);
            buf[14..18].copy_from_slice(&seq.to_be_bytes());
            seq = seq.wrapping_add(1);
            Some(TxMeta::len(size))
        });
        // An empty pool a million bursts in a row: mbufs are leaking.
        nomem = if n == 0 { nomem + 1 } else { 0 };
        if nomem > 1_000_000 {
            return Err("no mbuf to send for a million bursts".into());
        }
    }
    let sent = link.stats();
    let (tx, dropped) = (
        sent.tx_packets - before.tx_packets,
        sent.tx_dropped - before.tx_dropped,
    );
    // The end, repeated until the report comes (the ring may be full for a while).
    let deadline = Instant::now() + WAIT;
    let report = loop {
        send_kind(link, 64, peer, ETHERTYPE, END_SEQ, KIND_END, &[]);
        if let Some(r) = wait_report(link, Instant::now() + Duration::from_millis(20)) {
            break r;
        }
        if Instant::now() >= deadline {
            return Err("no report of the stream from the server".into());
        }
    };
    send(link, 64, peer, STOP, 0);
    let (frames, bytes, ns) = report;
    if frames == 0 || ns == 0 {
        return Err(format!(
            "the server counted {frames} frames in {ns} ns (sent {tx}, dropped {dropped})"
        ));
    }
    let t = ns as f64 / 1e9;
    println!(
        "raw memif stream: size {size} frames {frames} bytes {bytes} secs {t:.6} mb_per_sec \
         {:.1} sent {tx} tx_dropped {dropped}",
        bytes as f64 / t / 1e6
    );
    Ok(())
}

/// Waits for the server's report of a stream: frames, bytes, nanoseconds.
fn wait_report(link: &mut DpdkLink, deadline: Instant) -> Option<(u64, u64, u64)> {
    let word = |f: &[u8], i: usize| {
        f.get(19 + 8 * i..27 + 8 * i)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_be_bytes)
    };
    loop {
        if let Some(tok) = link.receive() {
            let got = tok.consume(|f| {
                if kind(f) != Some(KIND_REPORT) || f[14..18] != END_SEQ.to_be_bytes() {
                    return None;
                }
                Some((word(f, 0)?, word(f, 1)?, word(f, 2)?))
            });
            if got.is_some() {
                return got;
            }
        } else if Instant::now() >= deadline {
            return None;
        }
    }
}

fn client(link: &mut DpdkLink, o: &Opts) -> Result<(), String> {
    let size = o.size.unwrap_or(64);
    let peer = probe(link, size)?;
    let mut rtts = Vec::with_capacity(o.iters);
    for i in 0..o.warmup + o.iters {
        let seq = i as u32 + 1;
        let t = Instant::now();
        if !send(link, size, peer, ETHERTYPE, seq) {
            return Err("no mbuf to send".into());
        }
        wait_echo(link, seq, t + Duration::from_secs(5))?;
        if i >= o.warmup {
            rtts.push(t.elapsed());
        }
    }
    send(link, size, peer, STOP, 0);
    // The mean of each batch of BATCH round trips, in order: the median of those is
    // what ofi-pingpong's per-row means are compared with (a preempted stretch spoils
    // one batch, not the figure).
    let mut batches: Vec<u128> = rtts
        .chunks(BATCH)
        .filter(|c| c.len() == BATCH || rtts.len() < BATCH)
        .map(|c| c.iter().map(Duration::as_nanos).sum::<u128>() / c.len() as u128)
        .collect();
    batches.sort_unstable();
    let batch_median = batches[(batches.len() - 1) / 2];
    rtts.sort();
    let ns = |d: Duration| d.as_nanos();
    let mean = rtts.iter().map(|d| d.as_nanos()).sum::<u128>() / rtts.len() as u128;
    let pct = |p: usize| ns(rtts[(rtts.len() - 1) * p / 100]);
    println!(
        "raw memif echo: size {} iters {} rtt_ns mean {mean} median {} p99 {} min {} \
         batch_mean_median {batch_median} batches {}",
        size,
        rtts.len(),
        pct(50),
        pct(99),
        ns(rtts[0]),
        batches.len()
    );
    Ok(())
}
