//! Ping-pong latency and bandwidth over loopback UDP, side by side in one run: the raw
//! UDP floor (`crates/dp-kernel/examples/udp_pingpong.rs`), `ofi-pingpong` (the ofi-nostd
//! RDM stack over `UdpLink`, msg ops, manual progress, busy-polling) and the system
//! libfabric's `fi_pingpong` over `udp;ofi_rxd` and `tcp;ofi_rxm`. Every pair runs pinned,
//! server on CPU 0 and client on CPU 1, one pair at a time; each tool reports
//! `fi_pingpong`'s row, so one parser reads them all (`usec/xfer` is half a round trip,
//! `MB/sec` counts both directions).
//!
//! ofi-nostd's series is a profile-guided build of `ofi-pingpong` (see `crate::pgo`; the
//! training is [`train`]), and the plain release build runs beside it as its own series;
//! `BENCH_PGO=0` measures the plain build alone.
//!
//! `BENCH_PINGPONG_BASELINE=<path to another ofi-pingpong>` adds that binary as one more
//! series (a before/after comparison in the same run).

use std::fmt::Write as _;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::{Ctx, Outcome, Plot, Section, Series};
use crate::cmd::{self, Result};
use crate::pgo;

/// The sizes of the sweep.
const SIZES: [usize; 8] = [
    64,
    256,
    1 << 10,
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
];
/// The sizes the targets name (measured best of [`REPS`]).
const LAT_SIZE: usize = 64;
const BW_SIZE: usize = 1 << 20;
const REPS: usize = 3;
/// The longest one pair may run.
const RUN_LIMIT: Duration = Duration::from_secs(120);
/// CPUs of the server and the client.
const CPUS: (usize, usize) = (0, 1);

/// One ping-pong implementation.
#[derive(Debug, Clone)]
pub struct Tool {
    /// Legend label.
    pub label: String,
    kind: Kind,
    /// More arguments for both sides (`ofi-pingpong`: the training's modes;
    /// `udp_pingpong`: its datagram size).
    extra: Vec<&'static str>,
    /// Environment of both sides (`fi_pingpong -p nostd`: where the provider is).
    env: Vec<(&'static str, String)>,
}

impl Tool {
    /// `udp_pingpong` (raw sockets) at `bin`, with `extra` arguments on both sides.
    pub fn raw(label: String, bin: PathBuf, extra: Vec<&'static str>) -> Self {
        Tool {
            label,
            kind: Kind::Raw(bin),
            extra,
            env: Vec::new(),
        }
    }

    /// `ofi-pingpong` at `bin`.
    pub fn ofi(label: String, bin: PathBuf) -> Self {
        Tool {
            label,
            kind: Kind::Ofi(bin),
            extra: Vec::new(),
            env: Vec::new(),
        }
    }

    /// `ofi-pingpong` at `bin` with `extra` arguments on both sides.
    pub fn ofi_with(label: String, bin: PathBuf, extra: Vec<&'static str>) -> Self {
        Tool {
            extra,
            ..Tool::ofi(label, bin)
        }
    }

    /// `fi_pingpong -p <provider> -e rdm`, both sides with `env`.
    pub fn fi(label: String, provider: &'static str, env: Vec<(&'static str, String)>) -> Self {
        Tool {
            label,
            kind: Kind::Fi(provider),
            extra: Vec::new(),
            env,
        }
    }
}

/// Where a pair runs: both sides on loopback in our namespace (the default), or the
/// server in one network namespace and the client in another, reaching it at `server`.
#[derive(Debug, Clone)]
pub struct Place {
    /// The namespaces of the server and the client (`ip netns exec`).
    pub netns: Option<[String; 2]>,
    /// The address the client sends to (the server listens on it too).
    pub server: String,
}

impl Place {
    /// Loopback in our own namespace.
    pub fn loopback() -> Self {
        Place {
            netns: None,
            server: "127.0.0.1".into(),
        }
    }

    /// `c` run inside side `i`'s namespace (0: server, 1: client), if any.
    fn wrap(&self, i: usize, c: Command) -> Command {
        let Some(ns) = self.netns.as_ref().and_then(|n| n.get(i)) else {
            return c;
        };
        let mut w = Command::new("ip");
        w.args(["netns", "exec", ns])
            .arg(c.get_program())
            .args(c.get_args());
        for (k, v) in c.get_envs() {
            match v {
                Some(v) => w.env(k, v),
                None => w.env_remove(k),
            };
        }
        w
    }
}

#[derive(Debug, Clone)]
enum Kind {
    /// `udp_pingpong` (raw sockets).
    Raw(PathBuf),
    /// `ofi-pingpong` (ofi-nostd RDM).
    Ofi(PathBuf),
    /// `fi_pingpong -p <provider> -e rdm`.
    Fi(&'static str),
}

/// What a client printed: MB/s (both directions) and µs per transfer (half a round trip).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    /// Bandwidth.
    pub mb_per_sec: f64,
    /// Latency.
    pub usec: f64,
}

/// Ping-pong against message size, all tools in one run.
pub struct PingPong;

/// Round trips of one run at `size`: 64 MiB each way, 64..20,000 (a tenth in quick
/// mode).
pub fn iterations(size: usize, quick: bool) -> usize {
    let n = ((64 << 20) / size).clamp(64, 20_000);
    if quick { (n / 10).max(20) } else { n }
}

impl Section for PingPong {
    fn title(&self) -> &'static str {
        "Ping-pong latency and bandwidth over loopback UDP"
    }

    fn key(&self) -> &'static str {
        "udp"
    }

    fn run(&self, ctx: &Ctx<'_>) -> Result<Outcome> {
        cmd::run(&mut ctx.ws.cargo([
            "build",
            "--release",
            "-p",
            "hosted",
            "--bin",
            "ofi-pingpong",
            "-p",
            "dp-kernel",
            "--example",
            "udp_pingpong",
        ]))?;
        let rel = ctx.target.join("release");
        let plain = rel.join("ofi-pingpong");
        let mut tools = vec![Tool {
            label: "raw UDP sockets".into(),
            kind: Kind::Raw(rel.join("examples").join("udp_pingpong")),
            extra: Vec::new(),
            env: Vec::new(),
        }];
        // The measured build is profile-guided (see `pgo`), with the plain release
        // build beside it, so the report shows what the profile is worth.
        let mut pgo_note = String::new();
        if pgo::enabled() {
            match pgo::build(
                ctx.ws,
                &ctx.target,
                "udp",
                &["-p", "hosted", "--bin", "ofi-pingpong"],
                train,
            ) {
                Ok(dir) => {
                    tools.push(Tool {
                        label: "ofi-pingpong (ofi-nostd RDM, PGO)".into(),
                        kind: Kind::Ofi(dir.join("release").join("ofi-pingpong")),
                        extra: Vec::new(),
                        env: Vec::new(),
                    });
                    tools.push(Tool {
                        label: "ofi-pingpong (plain release build)".into(),
                        kind: Kind::Ofi(plain.clone()),
                        extra: Vec::new(),
                        env: Vec::new(),
                    });
                    pgo_note = "ofi-nostd's row is the profile-guided build (trained by \
                                ofi-pingpong over loopback UDP: RDM msg and tagged, DGRAM and \
                                rate mode, 64 B to 1 MiB); the plain release build is \
                                measured beside it.\n"
                        .into();
                }
                Err(e) => {
                    pgo_note = format!(
                        "Profile-guided build unavailable ({e}): the plain release build \
                         is measured.\n"
                    )
                }
            }
        }
        if tools.len() == 1 {
            tools.push(Tool {
                label: "ofi-pingpong (ofi-nostd RDM)".into(),
                kind: Kind::Ofi(plain),
                extra: Vec::new(),
                env: Vec::new(),
            });
        }
        if let Some(b) = std::env::var_os("BENCH_PINGPONG_BASELINE") {
            tools.push(Tool {
                label: "ofi-pingpong (baseline)".into(),
                kind: Kind::Ofi(PathBuf::from(b)),
                extra: Vec::new(),
                env: Vec::new(),
            });
        }
        let have_fi = cmd::on_path("fi_pingpong");
        if have_fi {
            for p in ["udp;ofi_rxd", "tcp;ofi_rxm"] {
                tools.push(Tool {
                    label: format!("fi_pingpong {p}"),
                    kind: Kind::Fi(p),
                    extra: Vec::new(),
                    env: Vec::new(),
                });
            }
        }
        let mut results: Vec<Vec<Option<Measured>>> = vec![Vec::new(); tools.len()];
        let mut errors = Vec::new();
        for &size in &SIZES {
            let reps = if !ctx.quick && (size == LAT_SIZE || size == BW_SIZE) {
                REPS
            } else {
                1
            };
            // Repetitions go round the tools (raw, ours, rxd, rxm, raw, ours, ...), not
            // one tool's in a row: the host's speed drifts over minutes, and each tool's
            // best then comes from the same stretch of time as the others'.
            let mut best: Vec<Option<Measured>> = vec![None; tools.len()];
            for _ in 0..reps {
                for (t, tool) in tools.iter().enumerate() {
                    match measure(tool, size, iterations(size, ctx.quick)) {
                        Ok(m) => {
                            best[t] = Some(match best[t] {
                                None => m,
                                Some(b) => Measured {
                                    mb_per_sec: b.mb_per_sec.max(m.mb_per_sec),
                                    usec: b.usec.min(m.usec),
                                },
                            });
                        }
                        Err(e) => errors.push(format!("{} at {size} B: {e}", tool.label)),
                    }
                }
            }
            for (t, tool) in tools.iter().enumerate() {
                println!(
                    "  {:<32} {:>8} B: {}",
                    tool.label,
                    size,
                    best[t].map_or("failed".into(), |m| format!(
                        "{:.2} us, {:.1} MB/s",
                        m.usec, m.mb_per_sec
                    ))
                );
                results[t].push(best[t]);
            }
        }
        let mut out = render(&tools, &results, ctx.quick);
        if !pgo_note.is_empty() {
            out.markdown.push('\n');
            out.markdown.push_str(&pgo_note);
        }
        if !have_fi {
            out.markdown.push_str(
                "\n`fi_pingpong` is not installed (Debian: libfabric-bin): no libfabric rows.\n",
            );
        }
        if !errors.is_empty() {
            out.markdown.push_str("\nFailed runs:\n\n");
            for e in &errors {
                let _ = writeln!(out.markdown, "- {e}");
            }
        }
        Ok(out)
    }
}

/// The profile-guided build's training: the instrumented ofi-pingpong over loopback UDP
/// in the modes the tool serves (RDM msg and tagged, DGRAM, rate), from single-packet
/// messages to rendezvous: what a profile never ran, the optimiser treats as cold.
fn train(gen_dir: &Path) -> Result {
    let bin = gen_dir.join("release").join("ofi-pingpong");
    let tool = |extra: &[&'static str]| Tool {
        label: format!("ofi-pingpong {} (training)", extra.join(" ")),
        kind: Kind::Ofi(bin.clone()),
        extra: extra.to_vec(),
        env: Vec::new(),
    };
    let runs: [(&[&'static str], usize, usize); 8] = [
        (&[], 64, 20_000),
        (&[], 4 << 10, 4_000),
        (&[], 64 << 10, 500),
        (&[], 1 << 20, 100),
        (&["-m", "tagged"], 64, 20_000),
        (&["-m", "tagged"], 1 << 20, 100),
        (&["-e", "dgram"], 64, 20_000),
        (&["--mode", "rate"], 64, 100_000),
    ];
    for (extra, size, iters) in runs {
        measure(&tool(extra), size, iters)?;
    }
    Ok(())
}

/// `size` in B, KiB or MiB, as the tables head their columns.
pub(super) fn human(size: usize) -> String {
    match size {
        s if s >= 1 << 20 && s % (1 << 20) == 0 => format!("{} MiB", s >> 20),
        s if s >= 1 << 10 && s % (1 << 10) == 0 => format!("{} KiB", s >> 10),
        s => format!("{s} B"),
    }
}

/// The tables, the targets and the plots from `results[tool][size index]`.
fn render(tools: &[Tool], results: &[Vec<Option<Measured>>], quick: bool) -> Outcome {
    let mut md = format!(
        "Loopback, server pinned to CPU {} and client to CPU {}, one pair at a time, \
         busy-polling everywhere. Latency: half the round trip (`usec/xfer`); bandwidth: \
         bytes both ways over time (`MB/sec`), as `fi_pingpong` prints them. `fi_pingpong` \
         has no warm-up: it runs as many iterations as the others ({}). {} and {} are the \
         best of {} runs, taken in turns across the tools; other sizes one run.\n\n",
        CPUS.0,
        CPUS.1,
        if quick {
            "quick mode: a tenth"
        } else {
            "64 MiB each way, 64..20,000"
        },
        human(LAT_SIZE),
        human(BW_SIZE),
        if quick { 1 } else { REPS }
    );
    let mut summary = vec!["ping-pong over loopback UDP (64 B latency, 1 MiB bandwidth):".into()];
    for (title, f, unit) in [
        (
            "Latency (µs)",
            (|m: &Measured| m.usec) as fn(&Measured) -> f64,
            "µs",
        ),
        ("Bandwidth (MB/s)", |m: &Measured| m.mb_per_sec, "MB/s"),
    ] {
        let _ = writeln!(md, "**{title}**\n");
        md.push_str("| Tool |");
        for s in SIZES {
            let _ = write!(md, " {} |", human(s));
        }
        md.push_str("\n|---|");
        md.push_str(&"---:|".repeat(SIZES.len()));
        md.push('\n');
        for (t, tool) in tools.iter().enumerate() {
            let _ = write!(md, "| {} |", tool.label);
            for r in &results[t] {
                match r {
                    Some(m) => {
                        let _ = write!(md, " {:.2} |", f(m));
                    }
                    None => md.push_str(" — |"),
                }
            }
            md.push('\n');
        }
        let _ = writeln!(md, "\n({unit})\n");
    }
    let at = |label: &str, size: usize| -> Option<Measured> {
        let t = tools.iter().position(|t| t.label.starts_with(label))?;
        let i = SIZES.iter().position(|&s| s == size)?;
        results.get(t)?.get(i).copied().flatten()
    };
    let ofi = "ofi-pingpong (ofi-nostd";
    let checks: [(&str, &str, usize, bool, f64); 4] = [
        ("64 B latency / raw UDP", "raw UDP", LAT_SIZE, true, 1.25),
        (
            "64 B latency / udp;ofi_rxd",
            "fi_pingpong udp;ofi_rxd",
            LAT_SIZE,
            true,
            0.6,
        ),
        (
            "1 MiB bandwidth / udp;ofi_rxd",
            "fi_pingpong udp;ofi_rxd",
            BW_SIZE,
            false,
            4.0,
        ),
        (
            "1 MiB bandwidth / tcp;ofi_rxm",
            "fi_pingpong tcp;ofi_rxm",
            BW_SIZE,
            false,
            0.8,
        ),
    ];
    md.push_str(
        "**Targets** (issue; a benchmark, not a test)\n\n| Ratio (ofi-nostd / other) | \
         Measured | Target | Verdict |\n|---|---:|---:|---|\n",
    );
    for (what, other, size, lat, bound) in checks {
        let ratio = match (at(ofi, size), at(other, size)) {
            (Some(a), Some(b)) if lat => Some(a.usec / b.usec),
            (Some(a), Some(b)) => Some(a.mb_per_sec / b.mb_per_sec),
            _ => None,
        };
        let (target, verdict) = match ratio {
            Some(r) if lat => (
                format!("≤ {bound}x"),
                if r <= bound { "ok" } else { "**MISSED**" },
            ),
            Some(r) => (
                format!("≥ {bound}x"),
                if r >= bound { "ok" } else { "**MISSED**" },
            ),
            None => (String::new(), "not measured"),
        };
        let shown = ratio.map_or("—".into(), |r| format!("{r:.2}x"));
        let _ = writeln!(md, "| {what} | {shown} | {target} | {verdict} |");
        summary.push(format!(
            "  {what:<32} {shown:>8}  (target {target}: {})",
            verdict.replace("**", "")
        ));
    }
    let series = |f: fn(&Measured) -> f64| {
        tools
            .iter()
            .zip(results)
            .map(|(t, r)| Series {
                label: t.label.clone(),
                points: SIZES
                    .iter()
                    .zip(r)
                    .filter_map(|(&s, m)| m.map(|m| (s as f64, f(&m))))
                    .collect(),
            })
            .collect()
    };
    Outcome {
        markdown: md,
        summary,
        plots: vec![
            Plot {
                name: "pingpong-latency",
                axes: ("message size (bytes)", "latency (µs)"),
                series: series(|m| m.usec),
            },
            Plot {
                name: "pingpong-bandwidth",
                axes: ("message size (bytes)", "bandwidth (MB/s)"),
                series: series(|m| m.mb_per_sec),
            },
        ],
    }
}

/// A child process that is killed and reaped when dropped.
pub(super) struct Killed(pub(super) Child);

impl Drop for Killed {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// The lines a pipe delivers, read on a thread so a chatty child never blocks.
fn lines_of<R: Read + Send + 'static>(pipe: Option<R>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    if let Some(pipe) = pipe {
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(|l| l.ok()) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    rx
}

fn pinned(cpu: usize, prog: &std::ffi::OsStr) -> Command {
    let mut c = Command::new("taskset");
    c.arg("-c").arg(cpu.to_string()).arg(prog);
    c
}

/// A free TCP port on loopback (for `fi_pingpong`'s out-of-band connection).
fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// Runs one server/client pair of `tool` for `size` on loopback and returns the client's
/// row.
pub fn measure(tool: &Tool, size: usize, iters: usize) -> Result<Measured> {
    measure_at(tool, size, iters, &Place::loopback())
}

/// [`measure`] at `place`.
pub fn measure_at(tool: &Tool, size: usize, iters: usize, place: &Place) -> Result<Measured> {
    let deadline = Instant::now() + RUN_LIMIT;
    let (s, i) = (size.to_string(), iters.to_string());
    let warm = (iters / 10).clamp(10, 1000).to_string();
    let (mut server, mut client_args): (Command, Vec<String>) = match &tool.kind {
        Kind::Raw(bin) => {
            let mut c = pinned(CPUS.0, bin.as_os_str());
            c.args(["-S", &s, "-I", &i, "-W", &warm, "-B", "0"])
                .args(&tool.extra);
            let mut a: Vec<String> = ["-S", &s, "-I", &i, "-W", &warm]
                .iter()
                .map(|x| x.to_string())
                .collect();
            a.extend(tool.extra.iter().map(|x| x.to_string()));
            (c, a)
        }
        Kind::Ofi(bin) => {
            let mut c = Command::new(bin);
            let mut common = vec!["-S", &s, "-I", &i, "-W", &warm];
            if !tool.extra.contains(&"-e") {
                common.extend(["-e", "rdm"]);
            }
            common.extend(&tool.extra);
            c.args(["-B", "0", "--cpu", &CPUS.0.to_string()])
                .args(&common);
            if place.netns.is_some() {
                c.args(["-s", &place.server]);
            }
            let mut a: Vec<String> = common.iter().map(|x| x.to_string()).collect();
            a.extend(["--cpu".into(), CPUS.1.to_string()]);
            (c, a)
        }
        Kind::Fi(p) => {
            let port = free_port()?.to_string();
            let mut c = pinned(CPUS.0, "fi_pingpong".as_ref());
            let common = ["-p", p, "-e", "rdm", "-S", &s, "-I", &i];
            c.args(common).args(["-B", &port]);
            let mut a: Vec<String> = common.iter().map(|x| x.to_string()).collect();
            a.extend(["-P".into(), port]);
            (c, a)
        }
    };
    server.envs(tool.env.iter().map(|(k, v)| (k, v)));
    let mut server = place.wrap(0, server);
    let mut server = Killed(
        server
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("could not start {}: {e}", cmd::display(&server)))?,
    );
    let lines = lines_of(server.0.stderr.take());
    match &tool.kind {
        Kind::Raw(_) | Kind::Ofi(_) => {
            let port = loop {
                let line = lines
                    .recv_timeout(Duration::from_secs(10))
                    .map_err(|_| format!("{}: the server did not start", tool.label))?;
                if let Some((_, addr)) = line.split_once("listening on ") {
                    break addr.rsplit(':').next().unwrap_or_default().to_owned();
                }
                if line.contains("error") {
                    return Err(format!("{} server: {line}", tool.label));
                }
            };
            client_args.extend(["-P".into(), port]);
        }
        Kind::Fi(_) => std::thread::sleep(Duration::from_millis(300)),
    }
    client_args.push(place.server.clone());
    let mut tries = 0;
    loop {
        tries += 1;
        let mut client = match &tool.kind {
            Kind::Raw(bin) => pinned(CPUS.1, bin.as_os_str()),
            Kind::Ofi(bin) => Command::new(bin),
            Kind::Fi(_) => pinned(CPUS.1, "fi_pingpong".as_ref()),
        };
        client
            .args(&client_args)
            .envs(tool.env.iter().map(|(k, v)| (k, v)));
        let mut client = place.wrap(1, client);
        let shown = cmd::display(&client);
        let mut child = Killed(
            client
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("could not start `{shown}`: {e}"))?,
        );
        let out = lines_of(child.0.stdout.take());
        let err = lines_of(child.0.stderr.take());
        let status = loop {
            if let Some(s) = child.0.try_wait().map_err(|e| e.to_string())? {
                break s;
            }
            if Instant::now() >= deadline {
                return Err(format!("`{shown}` took longer than {RUN_LIMIT:?}"));
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let drain = |rx: &mpsc::Receiver<String>| -> Vec<String> {
            std::iter::from_fn(|| rx.recv_timeout(Duration::from_secs(2)).ok()).collect()
        };
        let (out, err) = (drain(&out), drain(&err));
        if !status.success() {
            // fi_pingpong's server may not listen yet: retry a few times.
            if matches!(tool.kind, Kind::Fi(_)) && tries < 10 {
                std::thread::sleep(Duration::from_millis(300));
                continue;
            }
            return Err(format!(
                "`{shown}` failed ({status}): {}",
                err.last().map_or("", String::as_str)
            ));
        }
        let row = out.iter().rev().find_map(|l| parse_row(l));
        // Let the server finish on its own before it is killed.
        while Instant::now() < deadline.min(Instant::now() + Duration::from_secs(5)) {
            if server.0.try_wait().map_err(|e| e.to_string())?.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        return row.ok_or_else(|| format!("`{shown}` printed no result row: {out:?}"));
    }
}

/// MB/sec and usec/xfer of a `fi_pingpong` result row
/// (`bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec`).
fn parse_row(line: &str) -> Option<Measured> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() != 8 || !f[2].starts_with('=') {
        return None;
    }
    Some(Measured {
        mb_per_sec: f[5].parse().ok()?,
        usec: f[6].parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rows_of_every_tool() {
        let fi = "64      20k     =20k     2.4m        0.65s      3.91      16.37       0.06";
        assert_eq!(
            parse_row(fi),
            Some(Measured {
                mb_per_sec: 3.91,
                usec: 16.37
            })
        );
        let raw =
            "64      2000    =2000    256000          0.01s    17.29         3.70         0.27";
        assert_eq!(parse_row(raw).map(|m| m.usec), Some(3.70));
        assert_eq!(parse_row("bytes   #sent   #ack     total"), None);
    }

    #[test]
    fn render_has_ratios_and_plots() {
        let mk = |label: &str| Tool {
            label: label.into(),
            kind: Kind::Fi("x"),
            extra: Vec::new(),
            env: Vec::new(),
        };
        let tools = [
            mk("raw UDP sockets"),
            mk("ofi-pingpong (ofi-nostd RDM)"),
            mk("fi_pingpong udp;ofi_rxd"),
            mk("fi_pingpong tcp;ofi_rxm"),
        ];
        let row = |usec: f64, mb: f64| {
            SIZES
                .iter()
                .map(|_| {
                    Some(Measured {
                        usec,
                        mb_per_sec: mb,
                    })
                })
                .collect::<Vec<_>>()
        };
        let results = [
            row(4.0, 600.0),
            row(5.0, 900.0),
            row(10.0, 200.0),
            row(10.0, 1500.0),
        ];
        let out = render(&tools, &results, false);
        assert!(
            out.markdown
                .contains("| 64 B latency / raw UDP | 1.25x | ≤ 1.25x | ok |")
        );
        assert!(
            out.markdown
                .contains("| 64 B latency / udp;ofi_rxd | 0.50x | ≤ 0.6x | ok |")
        );
        assert!(
            out.markdown
                .contains("| 1 MiB bandwidth / udp;ofi_rxd | 4.50x | ≥ 4x | ok |")
        );
        assert!(
            out.markdown
                .contains("| 1 MiB bandwidth / tcp;ofi_rxm | 0.60x | ≥ 0.8x | **MISSED** |")
        );
        assert_eq!(out.plots.len(), 2);
        assert_eq!(out.plots[0].series.len(), 4);
        assert_eq!(out.plots[0].series[0].points.len(), SIZES.len());
    }

    #[test]
    fn svg_is_self_contained() {
        let plot = Plot {
            name: "t",
            axes: ("size", "µs"),
            series: vec![Series {
                label: "a<b".into(),
                points: vec![(64.0, 5.0), (1048576.0, 2000.0)],
            }],
        };
        let s = super::super::svg(&plot);
        assert!(s.starts_with("<svg"));
        assert!(s.trim_end().ends_with("</svg>"));
        assert!(s.contains("a&lt;b"));
        assert!(s.contains("<polyline"));
    }
}
