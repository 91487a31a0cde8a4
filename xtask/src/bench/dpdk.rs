//! The DPDK section of `cargo xtask bench`: `ofi-pingpong --dataplane dpdk` (RDM, msg)
//! between two processes over `net_memif`, next to a raw memif echo of 64-byte frames
//! (`crates/dp-dpdk/examples/memif_echo.rs`) in the same run, on the same two pinned
//! cores (EAL `-l`).
//!
//! Bulk transfers the same way, at MTU 1500 and 9000: `ofi-pingpong --mode bandwidth`
//! of 64 KiB and 1 MiB messages (`--dpdk-mtu`), next to a raw memif stream of whole
//! frames (`memif_echo --stream`: 1514 or 9014 bytes, sent one way in bursts of 32 as
//! fast as the driver takes them, counted by the receiver). memif's driver has no MTU
//! to set, so MTU 9000 is the stack's and the links' alone, with mbufs and memif
//! buffers (`bsize=`) that hold a 9014-byte frame in one piece (`PortConfig::with_mtu`).
//! Bulk rows have no target: they report MB/s and the ratio to the raw stream.
//!
//! Scalable endpoints the same way (issue #31): the 64 B message rate of `ofi-pingpong
//! --contexts 1` and `--contexts 2`, in turns, each count's best row, and their ratio
//! against 1.7x (each context on a queue pair of its own, a side's contexts under its domain's one lock).
//!
//! Targets (a benchmark, not a test): the 64 B ping-pong latency of ofi-pingpong at most
//! 1.5x the raw echo's, and a 64 B message rate (`--mode rate`) of at least 5 million
//! messages per second on one core.
//!
//! Latency is compared like for like: ofi-pingpong's `usec/xfer` is a mean over a row
//! (half the round trip), so the section runs many rows of 64 B and takes their median,
//! and the raw echo reports the median over batches of 5000 round trips of each batch's
//! mean; a preempted stretch on a shared machine then spoils one row, not the figure.
//!
//! Runs only where DPDK is installed (`pkg-config libdpdk`); otherwise the report says
//! the section was skipped and why. The binaries build with `--features dpdk` in
//! `<target>/dpdk` (as `cargo xtask test-dpdk` does).

use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{Ctx, Outcome, Section};
use crate::cmd::{self, Result};
use crate::pgo;

/// The section.
pub struct DpdkMemif;

/// Latency target: ofi-pingpong's 64 B one-way latency over the raw echo's.
const LATENCY_RATIO: f64 = 1.5;
/// Message-rate target, million 64 B messages per second.
const RATE_MMSGS: f64 = 5.0;
/// The longest one process pair may run.
const PAIR_LIMIT: Duration = Duration::from_secs(180);
/// The MTUs of the bulk rows.
const MTUS: [u16; 2] = [1500, 9000];
/// The bulk message sizes: `-S` argument, label, bytes.
const BULK_SIZES: [(&str, &str, usize); 2] =
    [("64k", "64 KiB", 64 << 10), ("1m", "1 MiB", 1 << 20)];

/// How much to measure.
struct Plan {
    /// Latency rounds: each runs the raw echo, then ofi-pingpong, so every ratio
    /// compares two measurements taken next to each other (the host's speed drifts,
    /// and on shared hosts the echo itself moves between two speeds minutes apart: a
    /// round that straddles a change gives a wild ratio, which the median of five
    /// rounds outvotes where that of three could not).
    rounds: usize,
    raw_iters: usize,
    latency_rows: usize,
    latency_iters: usize,
    rate_rows: usize,
    rate_iters: usize,
    /// Raw stream runs per MTU, and the seconds of each (a pair of processes runs at
    /// one of two speeds on shared hosts, up to 4x apart: several short runs show
    /// both).
    stream_runs: usize,
    stream_secs: f64,
    /// ofi-pingpong `--mode bandwidth` rows per size and MTU, and the messages of a
    /// row per [`BULK_SIZES`] entry.
    bulk_rows: usize,
    bulk_iters: [usize; 2],
}

impl Plan {
    fn new(quick: bool) -> Plan {
        if quick {
            Plan {
                rounds: 1,
                raw_iters: 20_000,
                latency_rows: 4,
                latency_iters: 5_000,
                rate_rows: 3,
                rate_iters: 50_000,
                stream_runs: 1,
                stream_secs: 0.5,
                bulk_rows: 2,
                bulk_iters: [2_000, 200],
            }
        } else {
            Plan {
                rounds: 5,
                raw_iters: 100_000,
                latency_rows: 7,
                latency_iters: 5_000,
                rate_rows: 5,
                rate_iters: 200_000,
                stream_runs: 5,
                stream_secs: 1.0,
                bulk_rows: 3,
                bulk_iters: [10_000, 1_000],
            }
        }
    }
}

/// What one run measured.
#[derive(Debug, Clone, PartialEq)]
struct Results {
    /// The latency rounds, in the order they ran.
    rounds: Vec<Round>,
    /// ofi-pingpong 64 B `--mode rate` Mxfers/sec per row.
    rate_mmsgs: Vec<f64>,
    /// The same with `--multi-recv` (multi-receive buffers on the receiver).
    rate_multi_mmsgs: Vec<f64>,
    /// `--contexts 1` and `--contexts 2` 64 B message rates, M msg/s of all pairs (best
    /// of the rows), side by side (issue #31).
    contexts_mmsgs: [Row<f64>; 2],
    /// The CPUs the server and the client ran on.
    cpus: (usize, usize),
    /// The plain release build measured beside a profile-guided one.
    plain: Option<Plain>,
    /// The bulk rows, per [`MTUS`] entry.
    bulk: Vec<Bulk>,
}

/// What a row measured, or why it could not.
type Row<T> = std::result::Result<T, String>;

/// The bulk rows of one MTU.
#[derive(Debug, Clone, PartialEq)]
struct Bulk {
    mtu: u16,
    /// The raw stream's runs.
    raw: Row<Vec<Stream>>,
    /// ofi-pingpong `--mode bandwidth` MB/s per row, per [`BULK_SIZES`] entry.
    ofi: Vec<Row<Vec<f64>>>,
}

impl Bulk {
    /// The raw stream's MB/s (median run).
    fn raw_mb(&self) -> Option<f64> {
        let runs = self.raw.as_ref().ok()?;
        (!runs.is_empty()).then(|| median(&runs.iter().map(|r| r.mb_per_sec).collect::<Vec<_>>()))
    }

    /// The raw stream's median MB/s, with the range of its runs when there are several;
    /// or why there is none.
    fn raw_text(&self) -> String {
        match (&self.raw, self.raw_mb()) {
            (Ok(runs), Some(mb)) if runs.len() > 1 => {
                let v = runs.iter().map(|r| r.mb_per_sec);
                let lo = v.clone().fold(f64::INFINITY, f64::min);
                let hi = v.fold(0.0, f64::max);
                format!("{mb:.0} MB/s (runs {lo:.0} to {hi:.0})")
            }
            (Ok(_), Some(mb)) => format!("{mb:.0} MB/s"),
            (Err(e), _) => format!("FAILED: {}", one_line(e)),
            _ => "no runs".into(),
        }
    }
}

/// One run of the raw stream (`memif_echo --stream`): what the receiver counted, what
/// the sender sent and dropped.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Stream {
    size: usize,
    frames: u64,
    secs: f64,
    mb_per_sec: f64,
    sent: u64,
    tx_dropped: u64,
}

/// The plain release build's message rates, each taken right after the measured
/// build's (its latency rows are in each [`Round`]).
#[derive(Debug, Clone, PartialEq)]
struct Plain {
    rate_mmsgs: Vec<f64>,
    rate_multi_mmsgs: Vec<f64>,
}

/// One latency round: the raw echo, then ofi-pingpong right after it.
#[derive(Debug, Clone, PartialEq)]
struct Round {
    /// Raw echo round trip, ns: median of batch means, plain median, p99, min.
    raw_batch_ns: f64,
    raw_median_ns: f64,
    raw_p99_ns: f64,
    raw_min_ns: f64,
    /// ofi-pingpong 64 B `usec/xfer` per row.
    latency_us: Vec<f64>,
    /// The same of the plain build, run right after, when measured beside.
    plain_latency_us: Option<Vec<f64>>,
}

impl Round {
    /// The raw echo's one-way latency, µs.
    fn raw_one_way_us(&self) -> f64 {
        self.raw_batch_ns / 2e3
    }

    /// ofi-pingpong's one-way latency (median row), µs.
    fn one_way_us(&self) -> f64 {
        median(&self.latency_us)
    }

    fn ratio(&self) -> f64 {
        self.one_way_us() / self.raw_one_way_us()
    }

    /// The plain build's one-way latency (median row), µs, and its ratio to this
    /// round's echo.
    fn plain(&self) -> Option<(f64, f64)> {
        let us = median(self.plain_latency_us.as_deref()?);
        Some((us, us / self.raw_one_way_us()))
    }
}

impl Section for DpdkMemif {
    fn title(&self) -> &'static str {
        "DPDK: ofi-pingpong over memif against a raw memif echo and stream"
    }

    fn key(&self) -> &'static str {
        "memif"
    }

    fn run(&self, ctx: &Ctx<'_>) -> Result<Outcome> {
        if !cmd::succeeds(Command::new("pkg-config").args(["--exists", "libdpdk"])) {
            return Ok(skipped(
                "DPDK is not installed (`pkg-config libdpdk` fails; Debian: libdpdk-dev, \
                 which `cargo xtask test-dpdk` installs)",
            ));
        }
        let target = crate::hooks::dpdk_target_dir(ctx.ws);
        let build = |args: &[&str]| {
            let mut c = ctx.ws.cargo(["build", "--release"]);
            c.args(args).env("CARGO_TARGET_DIR", &target);
            cmd::run(&mut c)
        };
        build(&[
            "-p",
            "dp-dpdk",
            "--features",
            "dpdk",
            "--example",
            "memif_echo",
        ])?;
        let pingpong_args = [
            "-p",
            "hosted",
            "--features",
            "dpdk",
            "--bin",
            "ofi-pingpong",
        ];
        build(&pingpong_args)?;
        let echo = target.join("release/examples/memif_echo");
        let dir = ctx.out.join("dpdk");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        // ofi-pingpong is measured profile-guided (see `pgo`), trained by a short run of
        // this section (the quick plan) with the instrumented build.
        let mut note = String::new();
        let plain = target.join("release/ofi-pingpong");
        let mut pingpong = plain.clone();
        let mut beside = None;
        if pgo::enabled() {
            let train = |gen_dir: &Path| {
                let bins = Bins {
                    echo: echo.clone(),
                    pingpong: gen_dir.join("release/ofi-pingpong"),
                    plain: None,
                };
                let r = measure(&bins, &dir, &Plan::new(true));
                let _ = std::fs::remove_dir_all(dir.join("sock"));
                r.map(|_| ())
            };
            match pgo::build(ctx.ws, &ctx.target, "dpdk", &pingpong_args, train) {
                Ok(d) => {
                    pingpong = d.join("release/ofi-pingpong");
                    beside = Some(plain);
                    note = "ofi-pingpong is the profile-guided build (trained by a quick run \
                            of this section); the plain release build runs right after it \
                            each time, for reference.\n"
                        .into();
                }
                Err(e) => {
                    note = format!(
                        "Profile-guided build unavailable ({e}): the plain release build \
                         is measured.\n"
                    )
                }
            }
        }
        let bins = Bins {
            echo,
            pingpong,
            plain: beside,
        };
        let r = measure(&bins, &dir, &Plan::new(ctx.quick))?;
        let _ = std::fs::remove_dir_all(dir.join("sock"));
        let mut out = render(&r);
        if !note.is_empty() {
            out.markdown.push('\n');
            out.markdown.push_str(&note);
        }
        Ok(out)
    }
}

struct Bins {
    echo: PathBuf,
    pingpong: PathBuf,
    /// The plain build, measured after `pingpong` each time when given.
    plain: Option<PathBuf>,
}

/// The two CPUs to pin to: 0 and 1, or 0 twice on a one-CPU machine.
fn cpus() -> (usize, usize) {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    (0, if n > 1 { 1 } else { 0 })
}

/// EAL options: virtual devices, no hugepages, a unique file prefix, lcore on `cpu`.
fn eal(tag: &str, cpu: usize) -> String {
    format!(
        "--no-huge --no-pci --no-shconf --no-telemetry -m 256 --file-prefix ofi-bench-{}-{tag} \
         -l {cpu} --log-level lib.eal:warning",
        std::process::id()
    )
}

fn measure(bins: &Bins, dir: &Path, plan: &Plan) -> Result<Results> {
    let (cs, cc) = cpus();
    let sock_dir = dir.join("sock");
    std::fs::create_dir_all(&sock_dir).map_err(|e| format!("{}: {e}", sock_dir.display()))?;

    // One memif_echo pair (`tag` names its files and socket), each side with its
    // own arguments: the client's output.
    let echo_pair = |tag: &str, server_args: &[&str], client_args: &[&str]| -> Result<String> {
        let sock = sock_dir.join(format!("{tag}.sock"));
        let s = sock.to_string_lossy().into_owned();
        let mut server = Command::new(&bins.echo);
        server
            .args([
                "server",
                "--socket",
                &s,
                "--eal",
                &eal(&format!("{tag}-s"), cs),
            ])
            .args(server_args);
        let mut client = Command::new(&bins.echo);
        client
            .args([
                "client",
                "--socket",
                &s,
                "--eal",
                &eal(&format!("{tag}-c"), cc),
            ])
            .args(client_args);
        pair(server, client, &sock, dir, tag)
    };

    // The raw echo, one run.
    let raw_echo = |tag: &str| -> Result<[f64; 5]> {
        let out = echo_pair(tag, &[], &["--iters", &plan.raw_iters.to_string()])?;
        parse_raw(&out).ok_or_else(|| format!("no result line from memif_echo:\n{out}"))
    };

    // The raw stream, one run at `mtu`.
    let raw_stream = |tag: &str, mtu: u16| -> Result<Stream> {
        let mtu = mtu.to_string();
        let secs = plan.stream_secs.to_string();
        let out = echo_pair(tag, &["--mtu", &mtu], &["--mtu", &mtu, "--stream", &secs])?;
        parse_stream(&out).ok_or_else(|| format!("no result line from memif_echo --stream:\n{out}"))
    };

    // ofi-pingpong: latency, then message rate.
    // `sides`: arguments of the server and of the client alone, after `extra`.
    let pingpong_sides =
        |bin: &Path, tag: &str, extra: &[String], sides: [&[String]; 2]| -> Result<String> {
            let sock = sock_dir.join(format!("{tag}.sock"));
            let s = sock.to_string_lossy().into_owned();
            let dev = |i: u32, role: &str| {
                format!("net_memif{i},role={role},id=0,socket={s},socket-abstract=no")
            };
            let common = [
                "--dataplane",
                "dpdk",
                "-e",
                "rdm",
                "-m",
                "msg",
                "--timeout",
                "60",
            ];
            let mut server = Command::new(bin);
            server.args(common).args(extra).args(sides[0]).args([
                "-B",
                "47592",
                "--ip",
                "10.78.250.1/24",
                "--eal",
                &eal(&format!("{tag}-s"), cs),
                "--dpdk-vdev",
                &dev(0, "server"),
            ]);
            let mut client = Command::new(bin);
            client.args(common).args(extra).args(sides[1]).args([
                "-P",
                "47592",
                "--ip",
                "10.78.250.2/24",
                "--eal",
                &eal(&format!("{tag}-c"), cc),
                "--dpdk-vdev",
                &dev(1, "client"),
                "10.78.250.1",
            ]);
            pair(server, client, &sock, dir, tag)
        };
    let pingpong_with =
        |bin: &Path, tag: &str, extra: &[String]| pingpong_sides(bin, tag, extra, [&[], &[]]);
    let pingpong = |tag: &str, extra: &[String]| pingpong_with(&bins.pingpong, tag, extra);
    // The plain build right after the measured one (same arguments, its own files).
    let plain = |tag: &str, extra: &[String]| -> Result<Option<String>> {
        bins.plain
            .as_deref()
            .map(|bin| {
                println!("==> bench: the plain build, {tag}");
                pingpong_with(bin, &format!("plain-{tag}"), extra)
            })
            .transpose()
    };
    let sizes = |rows: usize| vec!["64"; rows].join(",");
    let mut rounds = Vec::with_capacity(plan.rounds);
    for i in 0..plan.rounds {
        println!(
            "==> bench: round {} of {}: raw memif echo, 64 B, CPUs {cs} and {cc}",
            i + 1,
            plan.rounds
        );
        let raw = raw_echo(&format!("raw{i}"))?;
        println!(
            "==> bench: round {} of {}: ofi-pingpong RDM over memif, 64 B latency, {} rows",
            i + 1,
            plan.rounds,
            plan.latency_rows
        );
        let latency_args = [
            "-S".into(),
            sizes(plan.latency_rows),
            "-I".into(),
            plan.latency_iters.to_string(),
            "-W".into(),
            "1000".into(),
        ];
        let latency_us = rows(&pingpong(&format!("latency{i}"), &latency_args)?, 6)?;
        let plain_latency_us = plain(&format!("latency{i}"), &latency_args)?
            .map(|out| rows(&out, 6))
            .transpose()?;
        rounds.push(Round {
            raw_batch_ns: raw[4],
            raw_median_ns: raw[1],
            raw_p99_ns: raw[2],
            raw_min_ns: raw[3],
            latency_us,
            plain_latency_us,
        });
    }
    let rate_args = |multi: bool| {
        let mut a: Vec<String> = vec!["--mode".into(), "rate".into()];
        if multi {
            a.push("--multi-recv".into());
        }
        a.extend([
            "-S".into(),
            sizes(plan.rate_rows),
            "-I".into(),
            plan.rate_iters.to_string(),
        ]);
        a
    };
    println!(
        "==> bench: ofi-pingpong RDM over memif, 64 B message rate, {} rows",
        plan.rate_rows
    );
    let rate_mmsgs = rows(&pingpong("rate", &rate_args(false))?, 7)?;
    let plain_rate = plain("rate", &rate_args(false))?;
    println!(
        "==> bench: ofi-pingpong RDM over memif, 64 B message rate with --multi-recv, {} rows",
        plan.rate_rows
    );
    let rate_multi_mmsgs = rows(&pingpong("rate-multi", &rate_args(true))?, 7)?;
    let plain_multi = plain("rate-multi", &rate_args(true))?;
    let plain = match (plain_rate, plain_multi) {
        (Some(r), Some(m)) => Some(Plain {
            rate_mmsgs: rows(&r, 7)?,
            rate_multi_mmsgs: rows(&m, 7)?,
        }),
        _ => None,
    };
    // Scalable endpoints: 1 and 2 contexts, in turns, each count's best row.
    let mut contexts_mmsgs: [Row<f64>; 2] = [Err("not run".into()), Err("not run".into())];
    for round in 0..plan.rate_rows.min(3) {
        for (i, n) in ["1", "2"].into_iter().enumerate() {
            println!(
                "==> bench: ofi-pingpong RDM over memif, 64 B message rate, --contexts {n} \
                 (round {})",
                round + 1
            );
            let args = [
                "--mode".into(),
                "rate".into(),
                "--contexts".into(),
                n.into(),
                "-S".into(),
                "64".into(),
                "-I".into(),
                plan.rate_iters.to_string(),
            ];
            // Context thread k of each side on its side's CPU + k (modulo the CPUs).
            let cpu = |c: usize| ["--cpu".to_owned(), c.to_string()];
            let (sc, cl) = (cpu(cs), cpu(cc));
            let got = pingpong_sides(
                &bins.pingpong,
                &format!("contexts{n}-{round}"),
                &args,
                [&sc, &cl],
            )
            .and_then(|out| rows(&out, 7))
            .map(|v| v.into_iter().fold(0.0, f64::max));
            contexts_mmsgs[i] = match (&contexts_mmsgs[i], got) {
                (Ok(best), Ok(m)) => Ok(best.max(m)),
                (_, Ok(m)) => Ok(m),
                (Ok(best), Err(_)) => Ok(*best),
                (Err(_), Err(e)) => Err(e),
            };
        }
    }
    // Bulk: at each MTU the raw stream, then ofi-pingpong's bandwidth rows. A row that
    // fails is reported as such; the others still run.
    let mut bulk = Vec::with_capacity(MTUS.len());
    for mtu in MTUS {
        println!(
            "==> bench: MTU {mtu}: raw memif stream of {}-byte frames, {} run(s) of {} s",
            u32::from(mtu) + 14,
            plan.stream_runs,
            plan.stream_secs
        );
        let raw = (0..plan.stream_runs)
            .map(|i| raw_stream(&format!("stream{mtu}-{i}"), mtu))
            .collect::<Result<Vec<_>>>();
        if let Err(e) = &raw {
            println!("==> bench: MTU {mtu}: raw stream failed: {e}");
        }
        let mut ofi = Vec::with_capacity(BULK_SIZES.len());
        for ((arg, label, _), iters) in BULK_SIZES.iter().zip(plan.bulk_iters) {
            println!(
                "==> bench: MTU {mtu}: ofi-pingpong RDM over memif, {label} --mode bandwidth, \
                 {} rows of {iters}",
                plan.bulk_rows
            );
            let args = [
                "--mode".into(),
                "bandwidth".into(),
                "--dpdk-mtu".into(),
                mtu.to_string(),
                "-S".into(),
                vec![*arg; plan.bulk_rows].join(","),
                "-I".into(),
                iters.to_string(),
            ];
            let r = pingpong(&format!("bw{mtu}-{arg}"), &args).and_then(|out| rows(&out, 5));
            if let Err(e) = &r {
                println!("==> bench: MTU {mtu}: ofi-pingpong {label} failed: {e}");
            }
            ofi.push(r);
        }
        bulk.push(Bulk { mtu, raw, ofi });
    }
    Ok(Results {
        rounds,
        rate_mmsgs,
        rate_multi_mmsgs,
        contexts_mmsgs,
        cpus: (cs, cc),
        plain,
        bulk,
    })
}

/// Column `i` of ofi-pingpong's result rows in `out`; an error when there are none.
fn rows(out: &str, i: usize) -> Result<Vec<f64>> {
    let v = column(out, i);
    if v.is_empty() {
        return Err(format!("no result rows from ofi-pingpong:\n{out}"));
    }
    Ok(v)
}

/// A child killed and reaped when dropped.
struct Kill(Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `server` (output to files in `dir`), waits for its memif socket, runs
/// `client` to completion (killed at [`PAIR_LIMIT`]), then waits for the server;
/// returns the client's stdout. Both are killed on any failure.
fn pair(
    mut server: Command,
    mut client: Command,
    sock: &Path,
    dir: &Path,
    tag: &str,
) -> Result<String> {
    let file = |name: &str| {
        let p = dir.join(format!("{tag}-{name}"));
        File::create(&p).map_err(|e| format!("{}: {e}", p.display()))
    };
    let read = |name: &str| std::fs::read_to_string(dir.join(format!("{tag}-{name}")));
    let deadline = Instant::now() + PAIR_LIMIT;
    let mut s = Kill(
        server
            .stdin(Stdio::null())
            .stdout(file("server.out")?)
            .stderr(file("server.err")?)
            .spawn()
            .map_err(|e| format!("start {}: {e}", cmd::display(&server)))?,
    );
    while !sock.exists() {
        if let Ok(Some(st)) = s.0.try_wait() {
            return Err(format!(
                "{tag} server exited ({st}) before creating its socket: {}",
                read("server.err").unwrap_or_default()
            ));
        }
        if Instant::now() > deadline {
            return Err(format!("{tag} server: no memif socket"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut c = Kill(
        client
            .stdin(Stdio::null())
            .stdout(file("client.out")?)
            .stderr(file("client.err")?)
            .spawn()
            .map_err(|e| format!("start {}: {e}", cmd::display(&client)))?,
    );
    let wait = |k: &mut Kill, who: &str| -> Result {
        loop {
            if let Some(st) = k.0.try_wait().map_err(|e| e.to_string())? {
                return if st.success() {
                    Ok(())
                } else {
                    Err(format!(
                        "{tag} {who} failed ({st}): {}",
                        read(&format!("{who}.err")).unwrap_or_default()
                    ))
                };
            }
            if Instant::now() > deadline {
                return Err(format!("{tag} {who}: still running after {PAIR_LIMIT:?}"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    };
    wait(&mut c, "client")?;
    wait(&mut s, "server")?;
    read("client.out").map_err(|e| format!("{tag} client output: {e}"))
}

/// `mean median p99 min batch_mean_median` of memif_echo's result line.
fn parse_raw(out: &str) -> Option<[f64; 5]> {
    let line = out.lines().find(|l| l.starts_with("raw memif echo:"))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let after = |key: &str| -> Option<f64> {
        let i = words.iter().position(|w| *w == key)?;
        words.get(i + 1)?.parse().ok()
    };
    Some([
        after("mean")?,
        after("median")?,
        after("p99")?,
        after("min")?,
        after("batch_mean_median")?,
    ])
}

/// memif_echo's stream result line.
fn parse_stream(out: &str) -> Option<Stream> {
    let line = out.lines().find(|l| l.starts_with("raw memif stream:"))?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let after = |key: &str| -> Option<&str> {
        let i = words.iter().position(|w| *w == key)?;
        words.get(i + 1).copied()
    };
    Some(Stream {
        size: after("size")?.parse().ok()?,
        frames: after("frames")?.parse().ok()?,
        secs: after("secs")?.parse().ok()?,
        mb_per_sec: after("mb_per_sec")?.parse().ok()?,
        sent: after("sent")?.parse().ok()?,
        tx_dropped: after("tx_dropped")?.parse().ok()?,
    })
}

/// Column `i` (0-based) of ofi-pingpong's result rows.
fn column(out: &str, i: usize) -> Vec<f64> {
    out.lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().nth(i)?.parse().ok())
        .collect()
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[(v.len() - 1) / 2]
}

fn skipped(why: &str) -> Outcome {
    Outcome {
        markdown: format!("**Skipped**: {why}.\n"),
        summary: vec![format!("dpdk memif: SKIPPED: {why}")],
        plots: Vec::new(),
    }
}

fn render(r: &Results) -> Outcome {
    // Each round's ratio compares two runs taken next to each other; the verdict is on
    // their median (the medians of each side are shown beside it).
    let ratios: Vec<f64> = r.rounds.iter().map(Round::ratio).collect();
    let ratio = median(&ratios);
    let raw_one_way_us = median(
        &r.rounds
            .iter()
            .map(Round::raw_one_way_us)
            .collect::<Vec<_>>(),
    );
    let lat = median(&r.rounds.iter().map(Round::one_way_us).collect::<Vec<_>>());
    let rate = median(&r.rate_mmsgs);
    let best_rate = r.rate_mmsgs.iter().copied().fold(0.0, f64::max);
    let multi = median(&r.rate_multi_mmsgs);
    let best_multi = r.rate_multi_mmsgs.iter().copied().fold(0.0, f64::max);
    let verdict = |ok: bool| if ok { "ok" } else { "**MISSED**" };
    let lat_ok = ratio <= LATENCY_RATIO;
    // The stack's rate: whichever way of receiving does better.
    let rate_ok = rate.max(multi) >= RATE_MMSGS;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "Two processes on CPUs {} and {} (EAL `-l`), `net_memif` over a UNIX socket, \
         `--no-huge`. One-way latency is half the round trip: the raw echo's is the \
         median over batches of 5000 round trips of each batch's mean, ofi-pingpong's the \
         median of its rows' `usec/xfer` (RDM, `-m msg`, busy-polling, manual progress). \
         They run in {} rounds, the echo then ofi-pingpong, and the ratio is the median \
         of the rounds' ratios (the host's speed drifts between rounds). \
         Message rate: bursts of 64 messages, each acknowledged by the server, at most \
         two bursts outstanding (`ofi-pingpong --mode rate`).\n",
        r.cpus.0,
        r.cpus.1,
        r.rounds.len()
    );
    md.push_str("| Measurement | Value | Target | Verdict |\n|---|---:|---|---|\n");
    let _ = writeln!(
        md,
        "| raw memif echo, 64 B frame, one-way (median of rounds) | {raw_one_way_us:.2} µs | | |"
    );
    let _ = writeln!(
        md,
        "| ofi-pingpong RDM over memif, 64 B, one-way (median of rounds) | {lat:.2} µs \
         ({ratio:.2}x raw, median of the rounds' ratios) | ≤ {LATENCY_RATIO}x raw | {} |",
        verdict(lat_ok)
    );
    let _ = writeln!(
        md,
        "| ofi-pingpong RDM over memif, 64 B message rate (`--mode rate`), median row | \
         {rate:.2} M msg/s (best row {best_rate:.2}) | ≥ {RATE_MMSGS} M msg/s | {} |",
        verdict(rate >= RATE_MMSGS)
    );
    let _ = writeln!(
        md,
        "| the same, receiving into multi-receive buffers (`--multi-recv`) | \
         {multi:.2} M msg/s (best row {best_multi:.2}) | ≥ {RATE_MMSGS} M msg/s | {} |",
        verdict(multi >= RATE_MMSGS)
    );
    match &r.contexts_mmsgs {
        [Ok(one), Ok(two)] => {
            let x = two / one;
            let _ = writeln!(
                md,
                "| ofi-pingpong `--contexts 1` / `--contexts 2` over memif, 64 B message \
                 rate (best row; each context on a queue pair of its own, the contexts \
                 of a side under its domain's one lock) | {one:.2} / {two:.2} M msg/s ({x:.2}x) | ≥ {}x | {} |",
                super::contexts::TARGET,
                verdict(x >= super::contexts::TARGET)
            );
        }
        [a, b] => {
            let why = a
                .as_ref()
                .err()
                .or(b.as_ref().err())
                .cloned()
                .unwrap_or_default();
            let why = why.lines().next().unwrap_or_default().replace('|', "/");
            let _ = writeln!(
                md,
                "| ofi-pingpong `--contexts 1` / `--contexts 2` over memif, 64 B message \
                 rate | failed: {why} | ≥ {}x | **MISSED** |",
                super::contexts::TARGET
            );
        }
    }
    // The plain build's latencies and ratios, each against the echo of its own round.
    let (plain_us, plain_ratios): (Vec<f64>, Vec<f64>) =
        r.rounds.iter().filter_map(Round::plain).unzip();
    if let Some(p) = r.plain.as_ref().filter(|_| !plain_ratios.is_empty()) {
        let lat = median(&plain_us);
        let _ = writeln!(
            md,
            "| the plain release build, 64 B, one-way (for reference) | {lat:.2} µs \
             ({:.2}x raw) | | |",
            median(&plain_ratios)
        );
        let _ = writeln!(
            md,
            "| the plain release build, 64 B message rate (for reference) | {:.2} M msg/s; \
             {:.2} with `--multi-recv` | | |",
            median(&p.rate_mmsgs),
            median(&p.rate_multi_mmsgs)
        );
    }
    for b in &r.bulk {
        let frame = u32::from(b.mtu) + 14;
        let raw = b.raw_mb();
        let _ = writeln!(
            md,
            "| raw memif stream, MTU {} ({frame} B frames, one way, median of runs) | {} | | |",
            b.mtu,
            b.raw_text()
        );
        for ((_, label, _), row) in BULK_SIZES.iter().zip(&b.ofi) {
            let _ = writeln!(
                md,
                "| ofi-pingpong RDM over memif, MTU {}, {label} `--mode bandwidth`, median row | {} | | |",
                b.mtu,
                bulk_cell(row, raw)
            );
        }
    }
    md.push('\n');
    if !r.bulk.is_empty() {
        md.push_str(BULK_NOTE);
        md.push('\n');
    }
    for (i, rd) in r.rounds.iter().enumerate() {
        let _ = writeln!(
            md,
            "Round {}: raw echo one-way {:.2} µs (round trip median {:.2} µs, p99 {:.2} µs, \
             min {:.2} µs), ofi-pingpong {:.2} µs (rows: {}): {:.2}x.  ",
            i + 1,
            rd.raw_one_way_us(),
            rd.raw_median_ns / 1e3,
            rd.raw_p99_ns / 1e3,
            rd.raw_min_ns / 1e3,
            rd.one_way_us(),
            list(&rd.latency_us),
            rd.ratio()
        );
        if let (Some((us, x)), Some(l)) = (rd.plain(), &rd.plain_latency_us) {
            let _ = writeln!(
                md,
                "Round {}, the plain build right after: {us:.2} µs (rows: {}): {x:.2}x.  ",
                i + 1,
                list(l),
            );
        }
    }
    let _ = writeln!(
        md,
        "Rate rows (M msg/s): {}; with --multi-recv: {}.",
        list(&r.rate_mmsgs),
        list(&r.rate_multi_mmsgs)
    );
    for b in &r.bulk {
        let mut line = format!("MTU {}: raw stream runs: ", b.mtu);
        match &b.raw {
            Ok(runs) => {
                let each: Vec<String> = runs
                    .iter()
                    .map(|s| {
                        format!(
                            "{:.0} MB/s ({} frames of {} B in {:.2} s; sent {}, {} dropped at a full ring)",
                            s.mb_per_sec, s.frames, s.size, s.secs, s.sent, s.tx_dropped
                        )
                    })
                    .collect();
                line.push_str(&each.join(", "));
            }
            Err(e) => line.push_str(&format!("failed: {}", one_line(e))),
        }
        for ((_, label, _), row) in BULK_SIZES.iter().zip(&b.ofi) {
            match row {
                Ok(v) => line.push_str(&format!("; {label} rows (MB/s): {}", list(v))),
                Err(e) => line.push_str(&format!("; {label}: failed: {}", one_line(e))),
            }
        }
        let _ = writeln!(md, "\n{line}.");
    }
    let mut summary = vec![
        "dpdk memif, 64 B:".to_owned(),
        format!(
            "  latency one-way: ofi-pingpong {lat:.2} µs vs raw echo {raw_one_way_us:.2} µs, \
             ratio {ratio:.2}x (rounds: {}; ≤ {LATENCY_RATIO}x: {})",
            list(&ratios),
            verdict(lat_ok).replace("**", "")
        ),
        format!(
            "  message rate: {rate:.2} M msg/s median, {best_rate:.2} best; with --multi-recv \
             {multi:.2} median, {best_multi:.2} best (≥ {RATE_MMSGS}: {})",
            verdict(rate_ok).replace("**", "")
        ),
    ];
    if let Some(p) = r.plain.as_ref().filter(|_| !plain_ratios.is_empty()) {
        summary.push(format!(
            "  the plain release build beside it: latency {:.2}x raw; rate {:.2} M msg/s, \
             {:.2} with --multi-recv",
            median(&plain_ratios),
            median(&p.rate_mmsgs),
            median(&p.rate_multi_mmsgs)
        ));
    }
    if !r.bulk.is_empty() {
        summary.push("dpdk memif, bulk (one way, MB/s; ratio to the raw stream):".to_owned());
    }
    for b in &r.bulk {
        let raw = b.raw_mb();
        let mut line = format!("  MTU {}: raw stream {}", b.mtu, b.raw_text());
        for ((_, label, _), row) in BULK_SIZES.iter().zip(&b.ofi) {
            line.push_str(&format!("; ofi-pingpong {label} {}", bulk_cell(row, raw)));
        }
        summary.push(line);
    }
    Outcome {
        markdown: md,
        summary,
        plots: Vec::new(),
    }
}

/// What the bulk rows are, under the table.
const BULK_NOTE: &str = "Bulk rows: the raw stream sends whole Ethernet frames one way \
(`memif_echo --stream`, bursts of 32 frames per `rte_eth_tx_burst`, as fast as memif takes \
them; the receiver counts frames and bytes between its first and last burst) and counts \
frame bytes, headers included; ofi-pingpong (`--mode bandwidth`, 64 messages in flight, \
one acknowledgement per row) counts message bytes, so the ratio is the stack's goodput over \
the frames memif moves (a 1514-byte frame carries 1472 bytes of UDP payload, the \
protocol's header included). \
The stack batches too: each packet a progress pass sends goes to the link's transmit \
array, which hands up to 32 to the driver per `rte_eth_tx_burst` \
(`crates/dp-dpdk/src/link.rs`, `DpdkTxToken::consume_with` and `DpdkLink::flush`), and \
the adapter flushes once after every pass (`crates/hosted/src/runtime/plane.rs`, \
`Driver::progress`), in which the RDM engine sends all its window allows: a message's \
packets leave in bursts. MTU 9000: memif's driver has no MTU to set, so it is the \
stack's and the links' (`ofi-pingpong --dpdk-mtu`, `memif_echo --mtu`), with mbufs and \
memif buffers (`bsize=9216`) that hold a 9014-byte frame whole (`PortConfig::with_mtu`). \
Only the measured build of ofi-pingpong runs these rows. A pair of processes streams at \
one of two speeds on a shared host, up to 4x apart from one pair to the next (as the raw \
echo's two speeds), so the raw stream runs several times and shows its range; the ratio is \
to its median run.\n";

/// A bulk row's cell: the median row's MB/s and its ratio to the raw stream's.
fn bulk_cell(row: &Row<Vec<f64>>, raw: Option<f64>) -> String {
    match row {
        Ok(v) if !v.is_empty() => {
            let mb = median(v);
            match raw {
                Some(r) if r > 0.0 => format!("{mb:.0} MB/s ({:.2}x raw)", mb / r),
                _ => format!("{mb:.0} MB/s"),
            }
        }
        Ok(_) => "no rows".into(),
        Err(e) => format!("FAILED: {}", one_line(e)),
    }
}

/// The first line of an error, for a table cell or a summary line.
fn one_line(e: &str) -> String {
    let first = e.lines().next().unwrap_or_default().replace('|', "/");
    if first.chars().count() > 160 {
        format!("{}...", first.chars().take(160).collect::<String>())
    } else {
        first
    }
}

fn list(v: &[f64]) -> String {
    v.iter()
        .map(|x| format!("{x:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_both_tools() {
        let raw = "memif_echo: x\nraw memif echo: size 64 iters 100 rtt_ns mean 3000 median \
                   1400 p99 2500 min 980 batch_mean_median 1500 batches 20\n";
        assert_eq!(
            parse_raw(raw),
            Some([3000.0, 1400.0, 2500.0, 980.0, 1500.0])
        );
        assert_eq!(parse_raw("nothing"), None);
        let pp = "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n\
                  64      5k      =5k      625k        0.01s     62.50       1.02       0.98\n\
                  64      5k      =5k      625k        0.01s     60.00       1.07       0.93\n";
        assert_eq!(column(pp, 6), [1.02, 1.07]);
        assert_eq!(column(pp, 7), [0.98, 0.93]);
    }

    #[test]
    fn parses_the_raw_stream() {
        let out = "memif_echo: x\nraw memif stream: size 9014 frames 1000 bytes 9014000 secs \
                   0.500000 mb_per_sec 18028.0 sent 1100 tx_dropped 3\n";
        assert_eq!(
            parse_stream(out),
            Some(Stream {
                size: 9014,
                frames: 1000,
                secs: 0.5,
                mb_per_sec: 18028.0,
                sent: 1100,
                tx_dropped: 3,
            })
        );
        assert_eq!(parse_stream("raw memif stream: size 1514 frames"), None);
        assert_eq!(parse_stream("nothing"), None);
    }

    #[test]
    fn bulk_rows() {
        let stream = |mb_per_sec: f64| Stream {
            size: 1514,
            frames: 10,
            secs: 1.0,
            mb_per_sec,
            sent: 12,
            tx_dropped: 2,
        };
        let r = Results {
            rounds: vec![Round {
                raw_batch_ns: 2000.0,
                raw_median_ns: 1900.0,
                raw_p99_ns: 3000.0,
                raw_min_ns: 1000.0,
                latency_us: vec![1.2],
                plain_latency_us: None,
            }],
            rate_mmsgs: vec![5.0],
            rate_multi_mmsgs: vec![5.0],
            contexts_mmsgs: [Ok(4.0), Ok(7.0)],
            cpus: (0, 1),
            plain: None,
            bulk: vec![
                Bulk {
                    mtu: 1500,
                    raw: Ok(vec![stream(4000.0), stream(5000.0), stream(3000.0)]),
                    ofi: vec![Ok(vec![2000.0, 1000.0, 3000.0]), Err("x\ny".into())],
                },
                Bulk {
                    mtu: 9000,
                    raw: Err("no | socket\nmore".into()),
                    ofi: vec![Ok(vec![6000.0]), Ok(vec![])],
                },
            ],
        };
        let out = render(&r);
        let md = &out.markdown;
        assert!(
            md.contains("lock) | 4.00 / 7.00 M msg/s (1.75x) | ≥ 1.7x | ok |"),
            "{md}"
        );
        let slow = Results {
            contexts_mmsgs: [Ok(4.0), Ok(6.0)],
            ..r.clone()
        };
        assert!(
            render(&slow)
                .markdown
                .contains("lock) | 4.00 / 6.00 M msg/s (1.50x) | ≥ 1.7x | **MISSED** |")
        );
        let failed = Results {
            contexts_mmsgs: [Ok(4.0), Err("no | rows\nmore".into())],
            ..r.clone()
        };
        assert!(
            render(&failed)
                .markdown
                .contains("message rate | failed: no / rows | ≥ 1.7x | **MISSED** |"),
            "{}",
            render(&failed).markdown
        );
        assert!(
            md.contains("| raw memif stream, MTU 1500 (1514 B frames, one way, median of runs) | 4000 MB/s (runs 3000 to 5000) | | |"),
            "{md}"
        );
        assert!(
            md.contains(
                "MTU 1500, 64 KiB `--mode bandwidth`, median row | 2000 MB/s (0.50x raw) | | |"
            ),
            "{md}"
        );
        assert!(
            md.contains("MTU 1500, 1 MiB `--mode bandwidth`, median row | FAILED: x | | |"),
            "{md}"
        );
        assert!(
            md.contains(
                "MTU 9000 (9014 B frames, one way, median of runs) | FAILED: no / socket | | |"
            ),
            "{md}"
        );
        // No raw figure: no ratio.
        assert!(
            md.contains("MTU 9000, 64 KiB `--mode bandwidth`, median row | 6000 MB/s | | |"),
            "{md}"
        );
        assert!(
            md.contains("MTU 9000, 1 MiB `--mode bandwidth`, median row | no rows | | |"),
            "{md}"
        );
        assert!(md.contains("MTU 1500: raw stream runs: 4000 MB/s (10 frames of 1514 B in 1.00 s; sent 12, 2 dropped"), "{md}");
        assert!(md.contains("rte_eth_tx_burst"));
        assert_eq!(out.summary.len(), 6, "{:?}", out.summary);
        assert_eq!(
            out.summary[4],
            "  MTU 1500: raw stream 4000 MB/s (runs 3000 to 5000); ofi-pingpong 64 KiB 2000 MB/s \
             (0.50x raw); ofi-pingpong 1 MiB FAILED: x"
        );
        assert!(out.summary[5].starts_with("  MTU 9000: raw stream FAILED: no / socket;"));
        assert!(!md.contains("MISSED"));
    }

    #[test]
    fn verdicts() {
        let round = |raw_batch_ns: f64, latency_us: Vec<f64>| Round {
            raw_batch_ns,
            raw_median_ns: 1900.0,
            raw_p99_ns: 3000.0,
            raw_min_ns: 1000.0,
            latency_us,
            plain_latency_us: None,
        };
        // Ratios 1.50, 1.25 and 2.00: the median is 1.50, met.
        let r = Results {
            rounds: vec![
                round(2000.0, vec![1.4, 1.6, 1.5]),
                round(3200.0, vec![2.0]),
                round(1000.0, vec![1.0]),
            ],
            rate_mmsgs: vec![4.0, 6.0, 5.5],
            rate_multi_mmsgs: vec![5.0, 6.5, 6.0],
            contexts_mmsgs: [Ok(4.0), Ok(7.0)],
            cpus: (0, 1),
            plain: None,
            bulk: Vec::new(),
        };
        let out = render(&r);
        assert!(
            out.markdown
                .contains("1.50 µs (1.50x raw, median of the rounds' ratios)"),
            "{}",
            out.markdown
        );
        assert!(out.markdown.contains("| 1.00 µs | | |"), "{}", out.markdown);
        assert!(out.markdown.contains("Round 2: raw echo one-way 1.60 µs"));
        assert!(
            out.summary[1].contains("rounds: 1.50, 1.25, 2.00"),
            "{:?}",
            out.summary
        );
        assert!(out.markdown.contains("5.50 M msg/s (best row 6.00)"));
        assert!(out.markdown.contains("6.00 M msg/s (best row 6.50)"));
        assert!(!out.markdown.contains("MISSED"));
        // Either way of receiving meets the rate target.
        let one = Results {
            rate_mmsgs: vec![2.0],
            ..r.clone()
        };
        assert!(
            render(&one).summary[2].ends_with("ok)"),
            "{:?}",
            render(&one).summary
        );
        // Two rounds of three over 1.5x: missed, whatever the third.
        let slow = Results {
            rounds: vec![
                round(2000.0, vec![1.6]),
                round(2000.0, vec![1.0]),
                round(2000.0, vec![1.7]),
            ],
            ..r.clone()
        };
        assert!(render(&slow).markdown.contains("**MISSED**"));
        // The plain build beside it: reported per round against that round's echo, with
        // no verdict of its own.
        let plain_rows = [vec![2.0, 2.2], vec![4.0], vec![1.1]];
        let beside = Results {
            rounds: r
                .rounds
                .iter()
                .zip(plain_rows)
                .map(|(rd, l)| Round {
                    plain_latency_us: Some(l),
                    ..rd.clone()
                })
                .collect(),
            plain: Some(Plain {
                rate_mmsgs: vec![3.0, 4.0, 5.0],
                rate_multi_mmsgs: vec![6.0],
            }),
            ..r.clone()
        };
        let out = render(&beside);
        assert!(
            out.markdown.contains(
                "Round 1, the plain build right after: 2.00 µs (rows: 2.00, 2.20): 2.00x."
            ),
            "{}",
            out.markdown
        );
        assert!(
            out.markdown.contains("| 2.00 µs (2.20x raw) | | |"),
            "{}",
            out.markdown
        );
        assert!(
            out.markdown
                .contains("4.00 M msg/s; 6.00 with `--multi-recv`")
        );
        assert!(!out.markdown.contains("MISSED"));
        assert!(
            out.summary[3].contains("latency 2.20x raw; rate 4.00 M msg/s, 6.00 with"),
            "{:?}",
            out.summary
        );
        assert_eq!(render(&r).summary.len(), 3);
        assert!(skipped("no DPDK").markdown.starts_with("**Skipped**"));
    }
}
