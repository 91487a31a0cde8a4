//! The floor under every ping-pong benchmark: a raw UDP-socket ping-pong with no protocol
//! at all (no headers, no acks, no retransmissions), busy-polling a non-blocking socket,
//! one `send`/`recv` system call per datagram. Messages larger than one datagram go as
//! back-to-back datagrams of at most 8972 bytes (loopback's jumbo payload, as `UdpLink`;
//! `-C` sets another, e.g. 1472 on a 1500-byte Ethernet MTU); a lost datagram makes the
//! run fail by timeout rather than hide in the numbers. The server listens on every
//! address (a veth pair between namespaces as well as loopback).
//!
//! Output is `fi_pingpong`'s table (one header line, one row per size) so the same parser
//! reads all ping-pong tools; `MB/sec` counts both directions, `usec/xfer` is half a
//! round trip.
//!
//! ```text
//! udp_pingpong [-S SIZE] [-I ITERS] [-W WARMUP] [-C CHUNK] [-B PORT]         # server (prints its port)
//! udp_pingpong [-S SIZE] [-I ITERS] [-W WARMUP] [-C CHUNK] -P PORT 127.0.0.1 # client
//! ```

use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::process::ExitCode;
use std::time::{Duration, Instant};

/// Largest datagram payload unless `-C` says otherwise (a 9000-byte MTU less IPv4 and
/// UDP headers).
const CHUNK: usize = 8972;
/// Longest silence before a run is declared failed.
const TIMEOUT: Duration = Duration::from_secs(10);

struct Opts {
    size: usize,
    iters: usize,
    warmup: usize,
    chunk: usize,
    port: u16,
    server: Option<Ipv4Addr>,
}

fn parse() -> Result<Opts, String> {
    let mut o = Opts {
        size: 64,
        iters: 10_000,
        warmup: 100,
        chunk: CHUNK,
        port: 0,
        server: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = |name: &str| {
            args.next()
                .ok_or_else(|| format!("{name} needs a value"))
                .and_then(|v| v.parse::<usize>().map_err(|e| format!("{name} {v}: {e}")))
        };
        match a.as_str() {
            "-S" => o.size = val("-S")?,
            "-I" => o.iters = val("-I")?.max(1),
            "-W" => o.warmup = val("-W")?,
            "-C" => o.chunk = val("-C")?.clamp(1, 65507),
            "-B" | "-P" => {
                o.port = u16::try_from(val(&a)?).map_err(|e| format!("{a}: {e}"))?;
            }
            s if !s.starts_with('-') => {
                o.server = Some(s.parse().map_err(|e| format!("address {s}: {e}"))?);
            }
            s => return Err(format!("unknown option {s}")),
        }
    }
    Ok(o)
}

/// Sends `n` bytes from `buf` to `to` as datagrams of at most `chunk` bytes.
fn send_msg(sock: &UdpSocket, buf: &[u8], chunk: usize, to: SocketAddr) -> std::io::Result<()> {
    let mut chunks = buf.chunks(chunk).peekable();
    if chunks.peek().is_none() {
        sock.send_to(&[], to)?;
    }
    for c in chunks {
        loop {
            match sock.send_to(c, to) {
                Ok(_) => break,
                Err(e) if e.kind() == ErrorKind::WouldBlock => std::hint::spin_loop(),
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// Busy-polls until `n` bytes (at least one datagram) arrived; returns the sender.
fn recv_msg(
    sock: &UdpSocket,
    buf: &mut [u8],
    chunk: usize,
    n: usize,
) -> std::io::Result<SocketAddr> {
    let mut got = 0;
    let mut last = Instant::now();
    loop {
        let at = got.min(buf.len().saturating_sub(chunk));
        match sock.recv_from(&mut buf[at..]) {
            Ok((k, from)) => {
                got += k;
                if got >= n {
                    return Ok(from);
                }
                last = Instant::now();
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                if last.elapsed() > TIMEOUT {
                    return Err(std::io::Error::new(ErrorKind::TimedOut, "no datagram"));
                }
                std::hint::spin_loop();
            }
            Err(e) => return Err(e),
        }
    }
}

fn run(o: &Opts) -> std::io::Result<()> {
    let bind = match o.server {
        Some(_) => SocketAddr::from((Ipv4Addr::UNSPECIFIED, 0)),
        None => SocketAddr::from((Ipv4Addr::UNSPECIFIED, o.port)),
    };
    let sock = UdpSocket::bind(bind)?;
    sock.set_nonblocking(true)?;
    set_rcvbuf(&sock);
    let mut buf = vec![0u8; o.size.max(1) + o.chunk];
    let msg = vec![0xA5u8; o.size];
    let total = o.warmup + o.iters;
    match o.server {
        None => {
            eprintln!("udp_pingpong: server listening on {}", sock.local_addr()?);
            for _ in 0..total {
                let from = recv_msg(&sock, &mut buf, o.chunk, o.size)?;
                send_msg(&sock, &msg, o.chunk, from)?;
            }
        }
        Some(ip) => {
            let to = SocketAddr::from((ip, o.port));
            let mut start = Instant::now();
            for i in 0..total {
                if i == o.warmup {
                    start = Instant::now();
                }
                send_msg(&sock, &msg, o.chunk, to)?;
                recv_msg(&sock, &mut buf, o.chunk, o.size)?;
            }
            let secs = start.elapsed().as_secs_f64();
            let bytes = 2.0 * o.size as f64 * o.iters as f64;
            println!(
                "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec"
            );
            println!(
                "{:<7} {:<7} ={:<7} {:<11} {:>9} {:>8.2} {:>12.2} {:>12.2}",
                o.size,
                o.iters,
                o.iters,
                (bytes as u64),
                format!("{secs:.2}s"),
                bytes / secs / 1e6,
                secs * 1e6 / (2.0 * o.iters as f64),
                2.0 * o.iters as f64 / secs / 1e6
            );
        }
    }
    Ok(())
}

/// Asks for a 4 MiB receive buffer (as `UdpLink`), so a 1 MiB burst is not dropped.
fn set_rcvbuf(sock: &UdpSocket) {
    use std::os::fd::AsRawFd;
    let v: libc::c_int = 4 << 20;
    // SAFETY: `v` is a live c_int and its size is passed; the fd is the socket's own.
    unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

fn main() -> ExitCode {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("udp_pingpong: {e}");
            return ExitCode::from(2);
        }
    };
    match run(&o) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("udp_pingpong: error: {e}");
            ExitCode::FAILURE
        }
    }
}
