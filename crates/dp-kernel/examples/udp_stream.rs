//! A raw UDP stream through [`UdpLink`]: the most bytes a second one socket moves one
//! way, with no protocol above it, with or without UDP GSO on send (the receiver has
//! GRO whenever the kernel does). It is the floor (and the ceiling) of the kernel UDP
//! plane on a path, beside a TCP stream (iperf3) on the same path.
//!
//! The sender fills the transmit ring with datagrams of `-l` bytes (default: the link's
//! MTU payload) for `-t` seconds, then sends end markers (1-byte datagrams); the
//! receiver counts what arrives between the first datagram and the first end marker
//! and prints one line, `received BYTES bytes in DATAGRAMS datagrams in SECS s: MB/s
//! MB/s`, which `cargo xtask bench` reads. Datagrams the receiver could not keep up
//! with are lost (UDP), so the receiver's count is the goodput.
//!
//! ```text
//! udp_stream [-B PORT]                                        # receiver (prints its port)
//! udp_stream [-l LEN] [-t SECS] [--no-gso] -P PORT 10.0.0.1   # sender
//! ```

use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use dp_kernel::{KernelLink, UdpConfig, UdpLink};
use wire::link::{Link, RxToken, TxMeta, UdpAddr};

/// Longest the receiver waits for the first datagram, and for the next one after it.
const IDLE: Duration = Duration::from_secs(10);
/// End markers the sender sends (some may be lost like any datagram).
const END_MARKERS: usize = 32;

struct Opts {
    len: Option<usize>,
    secs: f64,
    gso: bool,
    port: u16,
    to: Option<Ipv4Addr>,
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts {
        len: None,
        secs: 2.0,
        gso: true,
        port: 0,
        to: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match a.as_str() {
            "-l" => o.len = Some(val("-l")?.parse().map_err(|e| format!("-l: {e}"))?),
            "-t" => o.secs = val("-t")?.parse().map_err(|e| format!("-t: {e}"))?,
            "-B" | "-P" => o.port = val(&a)?.parse().map_err(|e| format!("{a}: {e}"))?,
            "--no-gso" => o.gso = false,
            s if !s.starts_with('-') => {
                o.to = Some(s.parse().map_err(|e| format!("address {s}: {e}"))?);
            }
            s => return Err(format!("unknown option {s}")),
        }
    }
    Ok(o)
}

fn receiver(o: &Opts) -> Result<(), String> {
    let cfg = UdpConfig::new(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, o.port));
    let mut link = UdpLink::new(cfg).map_err(|e| e.to_string())?;
    eprintln!(
        "udp_stream: receiver listening on {} (GRO {})",
        link.local_addr(),
        if link.gro() { "on" } else { "off" }
    );
    let (mut bytes, mut count) = (0u64, 0u64);
    let mut first: Option<Instant> = None;
    let mut last = Instant::now();
    loop {
        let Some(tok) = link.receive() else {
            if last.elapsed() > IDLE {
                return Err(format!("no datagram for {IDLE:?} ({count} so far)"));
            }
            std::hint::spin_loop();
            continue;
        };
        last = Instant::now();
        let len = tok.consume(|b| b.len());
        if len <= 1 {
            if first.is_some() {
                break;
            }
            continue; // a marker of an earlier run
        }
        first.get_or_insert(last);
        bytes += len as u64;
        count += 1;
    }
    let secs = first.map_or(0.0, |f| last.duration_since(f).as_secs_f64());
    let s = link.stats();
    println!(
        "received {bytes} bytes in {count} datagrams in {secs:.3} s: {:.1} MB/s \
         (GRO buffers {}, receive calls {})",
        bytes as f64 / secs.max(1e-9) / 1e6,
        s.rx_gro,
        s.rx_batches
    );
    Ok(())
}

fn sender(o: &Opts, to: Ipv4Addr) -> Result<(), String> {
    let mut cfg = UdpConfig::new(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0));
    cfg.gso = o.gso;
    cfg.send_buffer = Some(4 << 20);
    cfg.path_mtu = dp_kernel::udp::route_to(to).ok().map(|r| r.mtu);
    let mut link = UdpLink::new(cfg).map_err(|e| e.to_string())?;
    let mtu = link.capabilities().mtu;
    let len = o.len.unwrap_or(mtu).clamp(2, mtu);
    let dst = UdpAddr::new(to, o.port);
    let end = Instant::now() + Duration::from_secs_f64(o.secs);
    while Instant::now() < end {
        let burst = link.capabilities().max_burst;
        let sent = link.transmit_burst(burst, |buf| {
            buf.get_mut(..len)?.fill(0x5a);
            Some(TxMeta::to(len, dst))
        });
        if sent == 0 {
            std::hint::spin_loop();
        }
    }
    for _ in 0..END_MARKERS {
        link.transmit_burst(1, |buf| {
            *buf.first_mut()? = 0;
            Some(TxMeta::to(1, dst))
        });
        std::thread::sleep(Duration::from_millis(2));
    }
    KernelLink::flush(&mut link);
    let s = link.stats();
    println!(
        "sent {} bytes in {} datagrams of {len} bytes, GSO {} ({} GSO sends, {} refused), \
         {} system calls",
        s.tx_bytes,
        s.tx_packets,
        if link.gso() { "on" } else { "off" },
        s.tx_gso,
        s.tx_gso_refused,
        s.tx_batches
    );
    Ok(())
}

fn main() -> ExitCode {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("udp_stream: {e}");
            return ExitCode::from(2);
        }
    };
    let r = match o.to {
        Some(to) => sender(&o, to),
        None => receiver(&o),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("udp_stream: error: {e}");
            ExitCode::FAILURE
        }
    }
}
