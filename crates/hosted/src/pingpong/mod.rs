//! `ofi-pingpong`: libfabric's `fi_pingpong` for the ofi-nostd stack, over the safe API.
//!
//! Two copies run: a server (no address) and a client (the server's address as the
//! positional argument). The options follow `fi_pingpong` 1.17 (`-e rdm|dgram`,
//! `-m msg|tagged`, `-S size|all`, `-I`, `-c`, `-B`, `-P`, `-v`) and so does the output:
//! in `pingpong` mode both processes print `fi_pingpong`'s header and one row per size,
//! column for column (`bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec`, with
//! its `k`/`m` abbreviations and its `=`/`+`/`-` mark between `#sent` and `#ack`).
//! Additions: `-W` warmup iterations (not timed), `--mode bandwidth|rate`, a choice of
//! kernel data plane, seeded loss (`--loss`), a pcap capture (`--pcap`), manual or
//! automatic progress, busy-polling or blocking waits, CPU pinning, a bound on every
//! wait (`--timeout`), and rate and bandwidth over a scalable endpoint with one pinned
//! thread per context pair (`--contexts N`, see `contexts.rs`). Run `ofi-pingpong --help` for the whole list.
//!
//! # Modes
//!
//! * `pingpong` (the default): the client sends a message, the server sends one back of
//!   the same size, `-I` times per size; `usec/xfer` is half the round trip, as in
//!   `fi_pingpong` (two transfers per iteration).
//! * `bandwidth`: the client streams `-I` messages with up to `--window` sends in flight
//!   (fewer for very large messages, so the buffers stay within 64 MiB) and the server
//!   acknowledges the whole stream once at the end, as fabtests' `fi_bw` does; the clock
//!   includes that final acknowledgement. One transfer per message.
//! * `rate`: message rate: bursts of `--window` messages, each acknowledged by the
//!   server. Over RDM the client sends the next burst while the last one's
//!   acknowledgement is on its way, so at most two bursts are outstanding (the server
//!   keeps twice the window posted); `osu_mbw_mr` waits for each acknowledgement, and
//!   fabtests' `fi_*_bw` for none. Over DGRAM (losses) each burst waits for its answer.
//!   Within a burst the sends carry FI_MORE except every 16th, so the first messages
//!   leave while the rest are posted. Messages below the inject size go out with
//!   `fi_inject`, which needs no completion.
//!
//! The columns are the same in every mode. `#sent` is what the client sent in the timed
//! phase and `#ack` what came back (pingpong: replies the client received; bandwidth and
//! rate: messages the server received); a `+n` between them means `n` were lost, which
//! only DGRAM endpoints may do (lost DGRAM messages are reported, never waited for: a
//! reply missing for [`DGRAM_WAIT`] counts as lost, and the tool carries on).
//!
//! # Address exchange and control messages
//!
//! `fi_pingpong` exchanges endpoint names over a TCP side connection. Here everything
//! travels in-band, over the endpoint under test: the client knows the server's
//! `ip:port` (`-P`, default 47592, the port `fi_pingpong` uses) and sends a *hello*
//! carrying its own address (`fi_getname`) and options; the server inserts that address
//! into its AV (a receive from a peer not yet in the AV reports `FI_ADDR_NOTAVAIL` as its
//! FI_SOURCE address, so the address itself must travel) and answers. The client then
//! drives: before each size it sends a *sync* with the size and counts (the server posts
//! its receives, then answers), after each size an *end* (the server answers with what
//! it received), and finally a *fin*. Control messages are small untagged sends whose
//! 64-bit remote CQ data says what they are; data messages carry their iteration number
//! in the CQ data (`-m msg`) or in the tag (`-m tagged`, where every receive is posted
//! for one exact tag). On DGRAM endpoints the client repeats a control message every
//! [`RETRY`] until it is answered, and the server answers repeats with the same reply.
//! The server follows the sizes and counts the client sends; `-e`, `-m`, `-c` and
//! `--mode` must be the same on both sides (the server refuses a client whose differ,
//! and both exit with an error).
//!
//! # Data check (`-c`)
//!
//! Every message is filled with a pattern derived from its size round, iteration number
//! and direction, and every received byte is compared (a reply is a new message, not an
//! echo). The first wrong byte ends the run with an error naming its offset.
//!
//! # Server mode
//!
//! A server serves one client and exits. With `--serve N` it serves `N` clients one
//! after another on the same endpoint (each waited for at most `--timeout`), with
//! `--serve forever` every client that comes. A client that fails (killed mid-transfer:
//! the engine fails its session once its retry budget is spent; restarted at the same
//! address: its new hello ends the old client at once) costs the server one line,
//! `ofi-pingpong: client K (A.B.C.D:P) failed after S s: <reason>`, and the server
//! serves the next hello. Each served client gets its own table on stdout.
//!
//! # Exit status
//!
//! 0 on success; 1 with a single `ofi-pingpong: error: ...` line on stderr for any
//! failure (a wait that outlived `--timeout`, a completion error, a failed data check,
//! a refused client; in server mode, after the last client, `K of N clients failed`);
//! 2 for a command-line error.

use std::ffi::OsString;
use std::fmt;
use std::io::Write;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::api::{AutoProgress, ProgressMode};

mod contexts;
mod plane;
mod run;
mod serve;
mod session;

/// The port `fi_pingpong` uses for its control connection, and the server's default port
/// here.
pub const DEFAULT_PORT: u16 = 47592;

/// How long the client waits for a DGRAM reply before counting it as lost.
pub const DGRAM_WAIT: Duration = Duration::from_millis(50);

/// How often the client repeats an unanswered control message on a DGRAM endpoint.
pub const RETRY: Duration = Duration::from_millis(50);

/// The largest size of `-S all` on RDM endpoints (DGRAM: the link's maximum).
pub const MAX_ALL_SIZE: usize = 4 << 20;

/// `fi_pingpong`'s default sizes.
pub const DEFAULT_SIZES: [usize; 6] = [64, 256, 1024, 4096, 65536, 1 << 20];

/// The default sizes of `--mode rate`.
pub const DEFAULT_RATE_SIZES: [usize; 5] = [1, 8, 64, 256, 1024];

/// Endpoint type (`-e`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EpKind {
    /// FI_EP_RDM: reliable datagram messages of any size.
    Rdm,
    /// FI_EP_DGRAM: unreliable datagrams up to the link MTU.
    Dgram,
    /// FI_EP_MSG: a connection (the server listens on a passive endpoint, the client
    /// connects), reliable messages of any size.
    Msg,
}

/// Transmit operations (`-m`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Op {
    /// fi_send / fi_inject / fi_recv, with remote CQ data.
    Msg,
    /// fi_tsend / fi_tinject / fi_trecv (RDM only).
    Tagged,
}

/// What is measured (`--mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Mode {
    /// Latency: one message each way per iteration.
    #[default]
    Pingpong,
    /// Windowed one-way streaming with one final acknowledgement.
    Bandwidth,
    /// Message rate: windows of messages, each acknowledged (two outstanding over RDM).
    Rate,
}

/// The kernel data plane (`--dataplane`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Dataplane {
    /// A UDP socket: no privilege, no configuration.
    #[default]
    Udp,
    /// A TAP device (CAP_NET_ADMIN; --iface, --ip).
    Tap,
    /// An AF_PACKET socket on an interface (CAP_NET_RAW; --iface, --ip).
    #[value(name = "af_packet")]
    AfPacket,
    /// A DPDK port (a build with the `dpdk` feature; --eal, --dpdk-vdev or --dpdk-port,
    /// --ip).
    Dpdk,
}

/// Progress model (`--progress`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Progress {
    /// FI_PROGRESS_MANUAL: the polling thread drives the stack.
    #[default]
    Manual,
    /// FI_PROGRESS_AUTO: a progress thread per domain.
    Auto,
}

/// How many clients a server serves (`--serve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serve {
    /// This many, one after another (each waited for at most `--timeout`).
    Clients(u64),
    /// Every client that comes, waiting for the next without a bound.
    Forever,
}

/// The sizes to run (`-S`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum SizeSpec {
    /// `fi_pingpong`'s default list (mode `rate`: small sizes).
    #[default]
    Default,
    /// `all`: 0, 1, 2, 3, 4, 6, 8, 12, ... up to the maximum.
    All,
    /// The sizes given.
    List(Vec<usize>),
}

/// The command line of `ofi-pingpong`.
#[derive(Parser, Debug, Clone)]
#[command(
    name = "ofi-pingpong",
    version,
    about = "Ping-pong, bandwidth and message-rate test over the ofi-nostd stack (fi_pingpong's options and output)",
    after_help = "Start the server first (no address), then the client with the server's address. \
                  -e, -m, -c and --mode must match on both sides; the server follows the client's sizes and counts."
)]
pub struct Args {
    /// The server's address (A.B.C.D, a host name, or either with :PORT): run as the
    /// client. Without it, run as the server.
    #[arg(value_name = "SERVER")]
    pub server: Option<String>,
    /// Server: serve this many clients one after another, or `forever`, on the same
    /// endpoint; a client that fails (killed, restarted, went quiet) is reported and
    /// the next one served. [default: one client, whose failure ends the server]
    #[arg(long, value_name = "N|forever", value_parser = parse_serve, conflicts_with = "server")]
    pub serve: Option<Serve>,
    /// Endpoint type.
    #[arg(short = 'e', value_enum, default_value_t = EpKind::Dgram, value_name = "EP_TYPE")]
    pub ep: EpKind,
    /// Transmit operations.
    #[arg(short = 'm', value_enum, default_value_t = Op::Msg, value_name = "MODE")]
    pub op: Op,
    /// Message size in bytes (k/m suffixes; a comma-separated list) or 'all'
    /// [default: 64,256,1k,4k,64k,1m; --mode rate: 1,8,64,256,1k].
    #[arg(short = 'S', value_name = "SIZE|all", value_parser = parse_sizes)]
    pub sizes: Option<SizeSpec>,
    /// Timed iterations per size [default: 10 (as fi_pingpong); bandwidth and rate:
    /// 10000, 1000 from 64 KiB, 100 from 1 MiB].
    #[arg(short = 'I', value_name = "NUMBER")]
    pub iterations: Option<usize>,
    /// Warmup iterations per size, not timed [default: 10; bandwidth and rate: the window].
    #[arg(short = 'W', value_name = "NUMBER")]
    pub warmup: Option<usize>,
    /// Fill every message with a pattern and verify every received byte.
    #[arg(short = 'c')]
    pub check: bool,
    /// Our UDP port (server: 47592, 0 for any; client: any).
    #[arg(short = 'B', value_name = "SRC_PORT")]
    pub src_port: Option<u16>,
    /// The server's UDP port (client: 47592).
    #[arg(short = 'P', value_name = "DST_PORT")]
    pub dst_port: Option<u16>,
    /// Our IPv4 address on a UDP data plane (server: 127.0.0.1; client: the address the
    /// route to the server uses).
    #[arg(short = 's', long = "src-addr", value_name = "A.B.C.D")]
    pub src_addr: Option<Ipv4Addr>,
    /// Print what the tool does on stderr.
    #[arg(short = 'v')]
    pub verbose: bool,
    /// What to measure.
    #[arg(long, value_enum, default_value_t)]
    pub mode: Mode,
    /// Messages in flight (bandwidth) or per acknowledged burst (rate).
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=512))]
    pub window: u32,
    /// The data plane.
    #[arg(long, value_enum, default_value_t)]
    pub dataplane: Dataplane,
    /// The interface of a tap or af_packet data plane.
    #[arg(long, value_name = "NAME")]
    pub iface: Option<String>,
    /// Our address and prefix on a tap, af_packet or dpdk data plane.
    #[arg(long, value_name = "A.B.C.D/PREFIX", value_parser = parse_cidr)]
    pub ip: Option<(Ipv4Addr, u8)>,
    /// Our MAC on a tap, af_packet or dpdk data plane [default: af_packet: the
    /// interface's; dpdk: the port's; tap: a random local one].
    #[arg(long, value_name = "XX:XX:XX:XX:XX:XX", value_parser = parse_mac)]
    pub mac: Option<[u8; 6]>,
    /// EAL arguments of the dpdk data plane, one string split at whitespace
    /// [default: --no-huge --no-pci --no-shconf, a unique --file-prefix, -m 256: enough
    /// for virtual devices].
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    pub eal: Option<String>,
    /// The dpdk data plane's port: a virtual device hot-plugged from these device
    /// arguments (e.g. net_memif0,role=server,socket=/tmp/m.sock,socket-abstract=no).
    #[arg(long, value_name = "DEVARGS", conflicts_with = "dpdk_port")]
    pub dpdk_vdev: Option<String>,
    /// The dpdk data plane's port: a device EAL probed (a --vdev of --eal, a PCI
    /// address) [default: port 0].
    #[arg(long, value_name = "NAME")]
    pub dpdk_port: Option<String>,
    /// The dpdk data plane's MTU (IP packet size; frames are 14 bytes longer), which
    /// the stack sizes its packets by: set on the port, with mbufs that hold its frames
    /// [default: the port's]. On net_memif, whose driver has no MTU of its own, the
    /// MTU is the stack's alone, and memif's shared buffers are made that large too
    /// (bsize=, unless --dpdk-vdev gives one): both sides need the same.
    #[arg(long, value_name = "MTU", value_parser = clap::value_parser!(u16).range(68..=16000))]
    pub dpdk_mtu: Option<u16>,
    /// Lose each frame this process sends or receives with this probability (a seeded
    /// FaultLink on our link).
    #[arg(long, value_name = "RATE", default_value_t = 0.0, value_parser = parse_rate)]
    pub loss: f64,
    /// Seed of --loss.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub seed: u64,
    /// Write every frame our link moves to this pcap file (LINKTYPE_RAW on UDP).
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// Progress model.
    #[arg(long, value_enum, default_value_t)]
    pub progress: Progress,
    /// Busy-poll the completion queue (the default, as fi_pingpong; lowest latency).
    #[arg(long, conflicts_with = "block")]
    pub spin: bool,
    /// Sleep in fi_cq_sread between completions instead of busy-polling.
    #[arg(long)]
    pub block: bool,
    /// Receive into multi-receive buffers (FI_MULTI_RECV, -m msg, messages up to
    /// 16 KiB): one post per buffer of at least 64 KiB instead of one per message.
    #[arg(long)]
    pub multi_recv: bool,
    /// Pin the process (and its progress thread) to this CPU; with --contexts, the
    /// first context's thread (context k runs on CPU N+k).
    #[arg(long, value_name = "N")]
    pub cpu: Option<usize>,
    /// Run over a scalable endpoint with this many transmit and receive contexts, one
    /// thread per context pair, each pinned to its own CPU (-e rdm, -m msg, --mode
    /// rate or bandwidth, any data plane; both sides need the same N). Rows count the
    /// messages of all pairs.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=16))]
    pub contexts: Option<u8>,
    /// Receive queues of the data plane (kernel UDP: SO_REUSEPORT sockets;
    /// AF_PACKET: a fanout group; DPDK: queue pairs; one on TAP, and with --loss or
    /// --pcap), each
    /// context on queue `k % N` and its thread passing over that queue alone; default
    /// as many as --contexts.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=16))]
    pub queues: Option<u8>,
    /// The domain's auth key: `0x` and hex digits, or any other string as its bytes.
    /// Both sides need the same key; every packet then carries a MAC under it (wire
    /// protocol 4.10), and a peer with another key or none is refused
    /// (-FI_EKEYREJECTED).
    #[arg(long, value_name = "KEY", value_parser = crate::auth_key::Key::parse)]
    pub auth_key: Option<crate::auth_key::Key>,
    /// The longest any wait may take, in seconds.
    #[arg(long, value_name = "SECS", default_value = "10", value_parser = parse_secs)]
    pub timeout: Duration,
}

impl Args {
    /// Whether this process is the client.
    pub fn is_client(&self) -> bool {
        self.server.is_some()
    }

    /// The domain's progress mode.
    pub fn progress_mode(&self) -> ProgressMode {
        match self.progress {
            Progress::Manual => ProgressMode::Manual,
            Progress::Auto => ProgressMode::Auto(AutoProgress::default()),
        }
    }

    /// The sizes to run for an endpoint whose largest message is `max`.
    pub fn size_list(&self, max: usize) -> Result<Vec<usize>, Failure> {
        let spec = self.sizes.clone().unwrap_or_default();
        let list = match spec {
            SizeSpec::Default => {
                let d: &[usize] = if self.mode == Mode::Rate {
                    &DEFAULT_RATE_SIZES
                } else {
                    &DEFAULT_SIZES
                };
                d.iter().copied().filter(|&s| s <= max).collect()
            }
            SizeSpec::All => {
                let top = if self.ep == EpKind::Rdm {
                    max.min(MAX_ALL_SIZE)
                } else {
                    max
                };
                let mut v = all_sizes(top);
                if self.ep == EpKind::Dgram && v.last() != Some(&top) {
                    v.push(top);
                }
                v
            }
            SizeSpec::List(v) => {
                if let Some(s) = v.iter().find(|&&s| s > max) {
                    return Err(Failure::new(format!(
                        "-S {s}: larger than the endpoint's maximum message size ({max})"
                    )));
                }
                v
            }
        };
        if list.is_empty() {
            return Err(Failure::new(format!(
                "no size to run (the endpoint's maximum message size is {max})"
            )));
        }
        Ok(list)
    }

    /// Timed iterations for `size`.
    pub fn iterations_for(&self, size: usize) -> usize {
        match (self.iterations, self.mode) {
            (Some(n), _) => n,
            (None, Mode::Pingpong) => 10,
            (None, _) => size_to_count(size),
        }
    }

    /// Warmup iterations for `size`.
    pub fn warmup(&self) -> usize {
        match (self.warmup, self.mode) {
            (Some(n), _) => n,
            (None, Mode::Pingpong) => 10,
            (None, _) => self.window as usize,
        }
    }
}

/// fabtests' default iteration count for a size.
pub fn size_to_count(size: usize) -> usize {
    if size >= 1 << 20 {
        100
    } else if size >= 1 << 16 {
        1000
    } else {
        10000
    }
}

/// `fi_pingpong -S all`: 0, 1, then each power of two and one and a half times it, up to
/// `max` (stopping at the first that exceeds it).
pub fn all_sizes(max: usize) -> Vec<usize> {
    let mut v = Vec::new();
    for i in 0..usize::BITS - 1 {
        let p = if i == 0 { 0 } else { 1usize << i };
        let half_up = if i == 0 { 1 } else { p + p / 2 };
        if p > max {
            break;
        }
        v.push(p);
        if half_up > max {
            break;
        }
        v.push(half_up);
    }
    v
}

fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (digits, mult) = match s.char_indices().last() {
        Some((i, 'k' | 'K')) => (&s[..i], 1 << 10),
        Some((i, 'm' | 'M')) => (&s[..i], 1 << 20),
        _ => (s, 1),
    };
    digits
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .ok_or_else(|| format!("not a size: {s:?}"))
}

fn parse_sizes(s: &str) -> Result<SizeSpec, String> {
    if s.eq_ignore_ascii_case("all") {
        return Ok(SizeSpec::All);
    }
    s.split(',')
        .map(parse_size)
        .collect::<Result<Vec<_>, _>>()
        .map(SizeSpec::List)
}

fn parse_serve(s: &str) -> Result<Serve, String> {
    if s.eq_ignore_ascii_case("forever") {
        return Ok(Serve::Forever);
    }
    match s.parse::<u64>() {
        Ok(n) if n > 0 => Ok(Serve::Clients(n)),
        _ => Err(format!(
            "expected a number of clients (1 or more) or 'forever', got {s:?}"
        )),
    }
}

fn parse_cidr(s: &str) -> Result<(Ipv4Addr, u8), String> {
    let (ip, prefix) = s
        .split_once('/')
        .ok_or_else(|| format!("expected A.B.C.D/PREFIX, got {s:?}"))?;
    let ip: Ipv4Addr = ip.parse().map_err(|e| format!("{ip:?}: {e}"))?;
    let prefix: u8 = prefix
        .parse()
        .ok()
        .filter(|&p| p <= 32)
        .ok_or_else(|| format!("bad prefix length {prefix:?}"))?;
    Ok((ip, prefix))
}

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let mut mac = [0u8; 6];
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!("expected XX:XX:XX:XX:XX:XX, got {s:?}"));
    }
    for (b, p) in mac.iter_mut().zip(parts) {
        *b = u8::from_str_radix(p, 16).map_err(|_| format!("bad MAC byte {p:?}"))?;
    }
    Ok(mac)
}

fn parse_rate(s: &str) -> Result<f64, String> {
    s.parse::<f64>()
        .ok()
        .filter(|r| (0.0..1.0).contains(r))
        .ok_or_else(|| format!("expected a probability in [0, 1), got {s:?}"))
}

fn parse_secs(s: &str) -> Result<Duration, String> {
    s.parse::<f64>()
        .ok()
        .filter(|t| t.is_finite() && *t > 0.0 && *t < 1e6)
        .map(Duration::from_secs_f64)
        .ok_or_else(|| format!("expected a positive number of seconds, got {s:?}"))
}

/// Why a run failed: one line for the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure(String);

impl Failure {
    /// A failure with this message.
    pub fn new(msg: impl Into<String>) -> Self {
        Failure(msg.into())
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failure {}

/// Runs the tool with command line `args` (program name first), printing the results on
/// `out` and diagnostics on `err`; returns the exit status (see the module docs).
pub fn run<I, T>(args: I, out: &mut dyn Write, err: &mut dyn Write) -> i32
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let args = match Args::try_parse_from(args) {
        Ok(a) => a,
        Err(e) => {
            use clap::error::ErrorKind;
            let text = e.render().ansi().to_string();
            return match e.kind() {
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
                    let _ = write!(out, "{text}");
                    0
                }
                _ => {
                    let _ = write!(err, "{text}");
                    2
                }
            };
        }
    };
    match run::main(&args, out, err) {
        Ok(()) => 0,
        Err(f) => {
            let _ = writeln!(err, "ofi-pingpong: error: {f}");
            let _ = err.flush();
            1
        }
    }
}

/// `fi_pingpong`'s header line.
pub fn header() -> String {
    format!(
        "{:<8}{:<8}{:<9}{:<8}{:>8} {:>10}{:>13}{:>13}",
        "bytes", "#sent", "#ack", "total", "time", "MB/sec", "usec/xfer", "Mxfers/sec"
    )
}

/// One result row as `fi_pingpong`'s `show_perf` prints it: `size` bytes per message,
/// `sent` iterations, `acked` answered, `elapsed_us` microseconds, `xfers_per_iter`
/// transfers per iteration (2 for a ping-pong, 1 for one-way streams).
pub fn row(size: usize, sent: u64, acked: u64, elapsed_us: f64, xfers_per_iter: u64) -> String {
    let bytes = sent * size as u64 * xfers_per_iter;
    let ack = if sent == acked {
        format!("={:<8}", cnt_str(acked))
    } else if sent < acked {
        format!("-{:<8}", cnt_str(acked - sent))
    } else {
        format!("+{:<8}", cnt_str(sent - acked))
    };
    let usec_per_xfer = elapsed_us / sent.max(1) as f64 / xfers_per_iter as f64;
    format!(
        "{:<8}{:<8}{ack}{:<8}{:>8.2}s{:>10.2}{:>11.2}{:>11.2}",
        size_str(size as u64),
        cnt_str(sent),
        size_str(bytes),
        elapsed_us / 1e6,
        bytes as f64 / elapsed_us,
        usec_per_xfer,
        1.0 / usec_per_xfer,
    )
}

/// `fi_pingpong`'s `size_str`: 1.5k, 64k, 1m, ...
pub fn size_str(size: u64) -> String {
    let (base, mag) = if size >= 1 << 30 {
        (1u64 << 30, "g")
    } else if size >= 1 << 20 {
        (1 << 20, "m")
    } else if size >= 1 << 10 {
        (1 << 10, "k")
    } else {
        (1, "")
    };
    let fraction = if size / base < 10 {
        (size % base) * 10 / base
    } else {
        0
    };
    if fraction != 0 {
        format!("{}.{fraction}{mag}", size / base)
    } else {
        format!("{}{mag}", size / base)
    }
}

/// `fi_pingpong`'s `cnt_str`: 10, 1k, 2m, ...
pub fn cnt_str(cnt: u64) -> String {
    if cnt >= 1_000_000_000 {
        format!("{}b", cnt / 1_000_000_000)
    } else if cnt >= 1_000_000 {
        format!("{}m", cnt / 1_000_000)
    } else if cnt >= 1000 {
        format!("{}k", cnt / 1000)
    } else {
        cnt.to_string()
    }
}

/// The data-check pattern of one message: 8 bytes at a time from a splitmix64 stream
/// keyed by `seed`, so a byte out of place, a stale message or a reply echoing the ping
/// cannot pass.
pub fn fill(buf: &mut [u8], seed: u64) {
    for (k, chunk) in buf.chunks_mut(8).enumerate() {
        let w = splitmix64(seed ^ (k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        chunk.copy_from_slice(&w.to_le_bytes()[..chunk.len()]);
    }
}

/// Checks `buf` against [`fill`]'s pattern for `seed`: the offset of the first wrong
/// byte, if any.
pub fn verify(buf: &[u8], seed: u64) -> Result<(), usize> {
    for (k, chunk) in buf.chunks(8).enumerate() {
        let w = splitmix64(seed ^ (k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        let want = &w.to_le_bytes()[..chunk.len()];
        if chunk != want {
            let i = chunk
                .iter()
                .zip(want)
                .position(|(a, b)| a != b)
                .unwrap_or(0);
            return Err(k * 8 + i);
        }
    }
    Ok(())
}

fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_sizes_as_fi_pingpong() {
        assert_eq!(
            all_sizes(100),
            [0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96]
        );
        assert_eq!(all_sizes(128).last(), Some(&128));
        let v = all_sizes(MAX_ALL_SIZE);
        assert_eq!(v.last(), Some(&(4 << 20)));
        assert_eq!(v.len(), 45);
    }

    #[test]
    fn output_matches_fi_pingpong() {
        // Lines printed by Debian's fi_pingpong 1.17.
        assert_eq!(
            header(),
            "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec"
        );
        assert_eq!(
            row(64, 1000, 1000, 82_500.0, 2),
            "64      1k      =1k      125k        0.08s      1.55      41.25       0.02"
        );
        assert_eq!(
            row(1536, 100, 100, 1644.0, 2),
            "1.5k    100     =100     300k        0.00s    186.86       8.22       0.12"
        );
        assert_eq!(size_str(1 << 20), "1m");
        assert_eq!(size_str(1_153_434), "1.1m");
        assert_eq!(cnt_str(999), "999");
        assert!(row(8, 10, 7, 100.0, 2).starts_with("8       10      +3       "));
    }

    #[test]
    fn sizes_and_options() {
        assert_eq!(parse_sizes("all"), Ok(SizeSpec::All));
        assert_eq!(
            parse_sizes("64,1k,4M"),
            Ok(SizeSpec::List(vec![64, 1024, 4 << 20]))
        );
        assert!(parse_sizes("x").is_err());
        assert_eq!(
            parse_cidr("10.0.0.1/24"),
            Ok((Ipv4Addr::new(10, 0, 0, 1), 24))
        );
        assert!(parse_cidr("10.0.0.1/33").is_err());
        assert_eq!(parse_mac("02:00:00:00:00:01"), Ok([2, 0, 0, 0, 0, 1]));
        assert!(parse_rate("1.5").is_err());
        assert_eq!(parse_serve("3"), Ok(Serve::Clients(3)));
        assert_eq!(parse_serve("forever"), Ok(Serve::Forever));
        assert!(parse_serve("0").is_err() && parse_serve("x").is_err());
        assert!(Args::try_parse_from(["ofi-pingpong", "--serve", "2", "127.0.0.1"]).is_err());
        let a = Args::try_parse_from(["ofi-pingpong", "-e", "dgram", "-S", "all"]).unwrap();
        let v = a.size_list(8940).unwrap();
        assert_eq!(v.last(), Some(&8940));
        assert_eq!(v[v.len() - 2], 8192);
        let a = Args::try_parse_from(["ofi-pingpong", "-e", "rdm", "-S", "all"]).unwrap();
        assert_eq!(a.size_list(usize::MAX).unwrap().last(), Some(&(4 << 20)));
        let a = Args::try_parse_from(["ofi-pingpong", "-S", "9000"]).unwrap();
        assert!(a.size_list(8940).is_err());
        use clap::CommandFactory as _;
        Args::command().debug_assert();
    }

    #[test]
    fn pattern_detects_any_change() {
        let mut b = vec![0u8; 37];
        fill(&mut b, 5);
        assert_eq!(verify(&b, 5), Ok(()));
        assert_eq!(verify(&b, 6).map_err(|_| ()), Err(()));
        b[29] ^= 1;
        assert_eq!(verify(&b, 5), Err(29));
    }
}
