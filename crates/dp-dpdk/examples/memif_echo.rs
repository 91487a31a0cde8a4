//! Raw `net_memif` echo: the floor `ofi-pingpong --dataplane dpdk` is compared against
//! (`cargo xtask bench`).
//!
//! Two processes: a server that sends every frame straight back (MACs swapped), and a
//! client that sends one 64-byte frame, busy-polls for its echo and repeats. Each frame
//! is one `rte_eth_tx_burst` and one `rte_eth_rx_burst` on a [`DpdkLink`]: zero-copy
//! mbufs, no protocol above the Ethernet header, no checks beyond the sequence number.
//!
//! ```text
//! memif_echo server --socket /tmp/m.sock [--eal "ARGS"]
//! memif_echo client --socket /tmp/m.sock [--eal "ARGS"] [--iters N] [--warmup N] [--size BYTES]
//! ```
//!
//! The client prints one line, `raw memif echo: size 64 iters N rtt_ns mean M median D
//! p99 P min L batch_mean_median B batches K` (round trips in nanoseconds; B is the
//! median over batches of 5000 round trips of each batch's mean), and stops the server.
//! Build with `--features dpdk`.

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

struct Opts {
    server: bool,
    socket: String,
    eal: Option<String>,
    iters: usize,
    warmup: usize,
    size: usize,
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
        size: 64,
    };
    while let Some(a) = args.next() {
        let mut val = || args.next().ok_or(format!("{a} needs a value"));
        let num = |v: String| v.parse::<usize>().map_err(|e| format!("{v:?}: {e}"));
        match a.as_str() {
            "--socket" => o.socket = val()?,
            "--eal" => o.eal = Some(val()?),
            "--iters" => o.iters = num(val()?)?,
            "--warmup" => o.warmup = num(val()?)?,
            "--size" => o.size = num(val()?)?,
            _ => return Err(format!("unknown option {a:?}")),
        }
    }
    if o.socket.is_empty() {
        return Err("--socket PATH is required".into());
    }
    if o.size < 18 || o.iters == 0 {
        return Err("--size at least 18 bytes, --iters at least 1".into());
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
    } else {
        client(&mut link, o)
    }
}

/// One frame: destination, our MAC, `ethertype`, the sequence number, zeros.
fn send(link: &mut DpdkLink, len: usize, dst: [u8; 6], ethertype: u16, seq: u32) -> bool {
    let src = link.mac();
    let Some(tok) = link.transmit() else {
        return false;
    };
    tok.consume_with(len, |buf| {
        buf[..6].copy_from_slice(&dst);
        buf[6..12].copy_from_slice(&src);
        buf[12..14].copy_from_slice(&ethertype.to_be_bytes());
        buf[14..18].copy_from_slice(&seq.to_be_bytes());
        (TxMeta::len(len), ())
    });
    link.flush();
    true
}

/// Echoes every frame back to its sender until the stop frame.
fn serve(link: &mut DpdkLink) -> Result<(), String> {
    let me = link.mac();
    let mut idle = Instant::now();
    let mut held = [[0u8; 64]; dp_dpdk::MAX_BURST];
    let mut lens = [0usize; dp_dpdk::MAX_BURST];
    loop {
        let mut n = 0;
        let mut stop = false;
        link.receive_burst(dp_dpdk::MAX_BURST, |_, f| {
            if f.len() >= 14 && u16::from_be_bytes([f[12], f[13]]) == STOP {
                stop = true;
            }
            let l = f.len().min(64);
            held[n][..l].copy_from_slice(&f[..l]);
            lens[n] = f.len();
            n += 1;
        });
        if stop {
            return Ok(());
        }
        if n == 0 {
            if idle.elapsed() > WAIT {
                return Err("no frame for 30 s".into());
            }
            continue;
        }
        idle = Instant::now();
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

fn client(link: &mut DpdkLink, o: &Opts) -> Result<(), String> {
    let start = Instant::now();
    // The server may not poll yet when the link comes up: probe until it answers.
    let peer = loop {
        send(link, o.size, [0xff; 6], ETHERTYPE, 0);
        match wait_echo(link, 0, Instant::now() + Duration::from_millis(20)) {
            Ok(mac) => break mac,
            Err(_) if start.elapsed() < WAIT => {}
            Err(e) => return Err(e),
        }
    };
    let mut rtts = Vec::with_capacity(o.iters);
    for i in 0..o.warmup + o.iters {
        let seq = i as u32 + 1;
        let t = Instant::now();
        if !send(link, o.size, peer, ETHERTYPE, seq) {
            return Err("no mbuf to send".into());
        }
        wait_echo(link, seq, t + Duration::from_secs(5))?;
        if i >= o.warmup {
            rtts.push(t.elapsed());
        }
    }
    send(link, o.size, peer, STOP, 0);
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
        o.size,
        rtts.len(),
        pct(50),
        pct(99),
        ns(rtts[0]),
        batches.len()
    );
    Ok(())
}
