//! The libfabric provider section of `cargo xtask bench`: the same program,
//! `fi_pingpong -e rdm -m msg`, on two providers of the system libfabric, side by side in
//! one run: `-p nostd` (the release build of `crates/provider` as
//! `target/provider/libnostd-fi.so`, loaded through `FI_PROVIDER_PATH`, on `lo`) and
//! `-p "udp;ofi_rxd"` (libfabric's own RDM over UDP). Only the provider differs.
//!
//! Each pair runs server on CPU 0 and client on CPU 1 (with `taskset` when it is
//! installed), the two providers alternately (A B A B), [`REPS`] runs each; the best run
//! counts. `fi_pingpong` has no warm-up, so the runs are long instead ([`RUNS`]). Every
//! process is bounded by [`PAIR_LIMIT`] and killed when the run fails. Without
//! `fi_pingpong` (Debian: libfabric-bin) the section says it was skipped.

use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::bench::{Ctx, Outcome, Plot, Section, Series};
use crate::cmd::{self, Result};

/// Message sizes and their iteration counts (a tenth in quick mode): enough round trips
/// that start-up and the first cold ones do not count.
const RUNS: [(usize, usize); 2] = [(LAT_SIZE, 20_000), (BW_SIZE, 200)];
/// The size of the latency target.
const LAT_SIZE: usize = 64;
/// The size of the bandwidth target.
const BW_SIZE: usize = 1 << 20;
/// Runs per provider and size, alternating providers.
const REPS: usize = 2;
/// The longest one server/client pair may take, connection retries included.
const PAIR_LIMIT: Duration = Duration::from_secs(30);
/// CPUs of the server and the client.
const CPUS: (usize, usize) = (0, 1);
/// Targets (issue; a benchmark, not a test): nostd latency at most this times rxd's at
/// [`LAT_SIZE`] ...
const LAT_TARGET: f64 = 0.6;
/// ... and nostd bandwidth at least this times rxd's at [`BW_SIZE`].
const BW_TARGET: f64 = 4.0;

/// The two providers, in run order.
const PROVIDERS: [Prov; 2] = [Prov::Nostd, Prov::Rxd];

/// One provider under `fi_pingpong`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Prov {
    /// `-p nostd` from `target/provider`.
    Nostd,
    /// `-p "udp;ofi_rxd"`.
    Rxd,
}

impl Prov {
    /// The `-p` argument.
    fn name(self) -> &'static str {
        match self {
            Prov::Nostd => "nostd",
            Prov::Rxd => "udp;ofi_rxd",
        }
    }

    /// Legend label.
    fn label(self) -> String {
        format!("fi_pingpong -p {}", self.name())
    }
}

/// One `fi_pingpong` result row: MB/s (both directions) and µs per transfer (half a
/// round trip).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Measured {
    mb_per_sec: f64,
    usec: f64,
}

/// All runs of one provider at one size.
type Runs = Vec<Result<Measured>>;

/// `fi_pingpong -p nostd` against `fi_pingpong -p "udp;ofi_rxd"`.
pub struct Provider;

impl Section for Provider {
    fn title(&self) -> &'static str {
        "The libfabric provider: fi_pingpong -p nostd against udp;ofi_rxd"
    }

    fn key(&self) -> &'static str {
        "provider"
    }

    fn run(&self, ctx: &Ctx<'_>) -> Result<Outcome> {
        if !cmd::on_path("fi_pingpong") {
            return Ok(skipped(
                "`fi_pingpong` is not installed (Debian: libfabric-bin)",
            ));
        }
        if !ctx.ws.has_provider() {
            return Ok(skipped("there is no provider crate"));
        }
        let dir = crate::provider::build(ctx.ws)?;
        let logs = ctx.out.join("fi_pingpong");
        std::fs::create_dir_all(&logs)
            .map_err(|e| format!("cannot create {}: {e}", logs.display()))?;
        let pin = cmd::on_path("taskset");
        // results[size index][provider index]
        let mut results: Vec<[Runs; 2]> = Vec::new();
        for (size, iters) in RUNS {
            let iters = if ctx.quick { iters / 10 } else { iters };
            let mut runs: [Runs; 2] = Default::default();
            for rep in 0..REPS {
                for (p, prov) in PROVIDERS.into_iter().enumerate() {
                    let pair = Pair {
                        prov,
                        ep: "rdm",
                        mode: "msg",
                        dir: &dir,
                        size,
                        iters,
                        pin,
                        logs: &logs,
                        tag: format!("{}-{size}-{rep}", prov.name().replace(';', "_")),
                    };
                    let r = pair.run();
                    println!(
                        "  {:<28} {size:>8} B run {}: {}",
                        prov.label(),
                        rep + 1,
                        match &r {
                            Ok(m) => format!("{:.2} us, {:.2} MB/s", m.usec, m.mb_per_sec),
                            Err(e) => format!("failed: {e}"),
                        }
                    );
                    runs[p].push(r);
                }
            }
            results.push(runs);
        }
        let mut out = render(&results, ctx.quick, pin);
        let _ = writeln!(
            out.markdown,
            "\nServer and client output of every run: `{}`.",
            logs.display()
        );
        Ok(out)
    }
}

/// The training of a profile-guided provider build (`cargo xtask provider --pgo`):
/// `fi_pingpong -p nostd` with the provider in `dir` over loopback, as applications use
/// it: RDM msg and tagged from 64 B to 1 MiB, and DGRAM; output files go to `logs`.
pub fn train_provider(dir: &Path, logs: &Path) -> Result {
    let pin = cmd::on_path("taskset");
    let runs: [(&'static str, &'static str, usize, usize); 7] = [
        ("rdm", "msg", 64, 20_000),
        ("rdm", "msg", 4 << 10, 4_000),
        ("rdm", "msg", 1 << 20, 100),
        ("rdm", "tagged", 64, 20_000),
        ("rdm", "tagged", 64 << 10, 500),
        ("rdm", "tagged", 1 << 20, 100),
        ("dgram", "msg", 64, 20_000),
    ];
    for (ep, mode, size, iters) in runs {
        let pair = Pair {
            prov: Prov::Nostd,
            ep,
            mode,
            dir,
            size,
            iters,
            pin,
            logs,
            tag: format!("train-{ep}-{mode}-{size}"),
        };
        let m = pair.run()?;
        println!("  training: {ep} {mode} {size} B: {:.2} us", m.usec);
    }
    Ok(())
}

/// The section when it cannot run.
fn skipped(why: &str) -> Outcome {
    Outcome {
        markdown: format!("Skipped: {why}.\n"),
        summary: vec![format!(
            "provider (fi_pingpong nostd vs udp;ofi_rxd): skipped, {why}"
        )],
        plots: Vec::new(),
    }
}

/// The best of some runs: lowest latency, highest bandwidth (each over all runs).
fn best(runs: &[Result<Measured>]) -> Option<Measured> {
    runs.iter().flatten().copied().reduce(|a, b| Measured {
        mb_per_sec: a.mb_per_sec.max(b.mb_per_sec),
        usec: a.usec.min(b.usec),
    })
}

fn human(size: usize) -> String {
    match size {
        s if s >= 1 << 20 && s % (1 << 20) == 0 => format!("{} MiB", s >> 20),
        s if s >= 1 << 10 && s % (1 << 10) == 0 => format!("{} KiB", s >> 10),
        s => format!("{s} B"),
    }
}

/// The table, the targets and the plots from `results[size index][provider index]`
/// (sizes as in [`RUNS`], providers as in [`PROVIDERS`]).
fn render(results: &[[Runs; 2]], quick: bool, pinned: bool) -> Outcome {
    let mut md = format!(
        "The same program, `fi_pingpong -e rdm -m msg` of the system libfabric, on two \
         providers: `nostd` (this workspace's provider, release build, loaded from \
         `FI_PROVIDER_PATH`, `FI_NOSTD_IFACE=lo`) and `udp;ofi_rxd` (libfabric's RDM over \
         UDP). Loopback, {}; the providers alternate (A B A B), best of {REPS} runs each. \
         Iterations: {}. Latency: half the round trip (`usec/xfer`); bandwidth: bytes both \
         ways over time (`MB/sec`), as `fi_pingpong` prints them.\n\n\
         | Size | Provider | Latency (µs) | Bandwidth (MB/s) | Runs (µs; MB/s) |\n\
         |---|---|---:|---:|---|\n",
        if pinned {
            format!(
                "server pinned to CPU {} and client to CPU {}",
                CPUS.0, CPUS.1
            )
        } else {
            "not pinned (no `taskset`)".to_owned()
        },
        RUNS.iter()
            .map(|&(s, n)| format!("{} at {}", if quick { n / 10 } else { n }, human(s)))
            .collect::<Vec<_>>()
            .join(", ")
            + if quick { " (quick mode: a tenth)" } else { "" },
    );
    let mut failures = Vec::new();
    for ((size, _), runs) in RUNS.iter().zip(results) {
        for (prov, r) in PROVIDERS.iter().zip(runs) {
            let each: Vec<String> = r
                .iter()
                .map(|x| match x {
                    Ok(m) => format!("{:.2}; {:.2}", m.usec, m.mb_per_sec),
                    Err(_) => "failed".to_owned(),
                })
                .collect();
            failures.extend(
                r.iter()
                    .filter_map(|x| x.as_ref().err())
                    .map(|e| format!("{} at {}: {e}", prov.label(), human(*size))),
            );
            let (lat, bw) = best(r).map_or(("—".into(), "—".into()), |m| {
                (format!("{:.2}", m.usec), format!("{:.2}", m.mb_per_sec))
            });
            let _ = writeln!(
                md,
                "| {} | `{}` | {lat} | {bw} | {} |",
                human(*size),
                prov.name(),
                each.join(" / ")
            );
        }
    }
    let at = |size: usize| -> (Option<Measured>, Option<Measured>) {
        RUNS.iter()
            .zip(results)
            .find(|((s, _), _)| *s == size)
            .map_or((None, None), |(_, r)| (best(&r[0]), best(&r[1])))
    };
    md.push_str(
        "\n**Targets** (issue; a benchmark, not a test)\n\n\
         | Ratio (nostd / udp;ofi_rxd) | nostd | udp;ofi_rxd | Measured | Target | Verdict |\n\
         |---|---:|---:|---:|---:|---|\n",
    );
    let mut summary = vec!["provider, fi_pingpong RDM msg (nostd vs udp;ofi_rxd):".to_owned()];
    for (what, size, lat, bound) in [
        (
            format!("{} latency", human(LAT_SIZE)),
            LAT_SIZE,
            true,
            LAT_TARGET,
        ),
        (
            format!("{} bandwidth", human(BW_SIZE)),
            BW_SIZE,
            false,
            BW_TARGET,
        ),
    ] {
        let (a, b) = at(size);
        let pick = |m: Option<Measured>| m.map(|m| if lat { m.usec } else { m.mb_per_sec });
        let (a, b) = (pick(a), pick(b));
        let ratio = a.zip(b).map(|(a, b)| a / b);
        let target = if lat {
            format!("≤ {bound}x")
        } else {
            format!("≥ {bound}x")
        };
        let verdict = match ratio {
            Some(r) if (lat && r <= bound) || (!lat && r >= bound) => "ok",
            Some(_) => "**MISSED**",
            None => "not measured",
        };
        let unit = if lat { "µs" } else { "MB/s" };
        let show = |v: Option<f64>| v.map_or("—".into(), |v| format!("{v:.2} {unit}"));
        let shown = ratio.map_or("—".into(), |r| format!("{r:.2}x"));
        let _ = writeln!(
            md,
            "| {what} | {} | {} | {shown} | {target} | {verdict} |",
            show(a),
            show(b)
        );
        summary.push(format!(
            "  {what:<16} nostd {:>14} vs rxd {:>14} = {shown:>7}  (target {target}: {})",
            show(a),
            show(b),
            verdict.replace("**", "")
        ));
    }
    if !failures.is_empty() {
        md.push_str("\nFailed runs:\n\n");
        for f in &failures {
            let _ = writeln!(md, "- {f}");
        }
    }
    let series = |f: fn(&Measured) -> f64| {
        PROVIDERS
            .iter()
            .enumerate()
            .map(|(p, prov)| Series {
                label: prov.label(),
                points: RUNS
                    .iter()
                    .zip(results)
                    .filter_map(|((s, _), r)| best(&r[p]).map(|m| (*s as f64, f(&m))))
                    .collect(),
            })
            .collect()
    };
    Outcome {
        markdown: md,
        summary,
        plots: vec![
            Plot {
                name: "provider-latency",
                axes: ("message size (bytes)", "latency (µs)"),
                series: series(|m| m.usec),
            },
            Plot {
                name: "provider-bandwidth",
                axes: ("message size (bytes)", "bandwidth (MB/s)"),
                series: series(|m| m.mb_per_sec),
            },
        ],
    }
}

/// A child process that is killed and reaped when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

impl Killed {
    /// Waits until the process exits or `deadline` passes (`None`: still running).
    fn wait_until(&mut self, deadline: Instant) -> Result<Option<ExitStatus>> {
        loop {
            if let Some(s) = self.0.try_wait().map_err(|e| e.to_string())? {
                return Ok(Some(s));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

/// One server/client pair.
struct Pair<'a> {
    prov: Prov,
    /// `-e` and `-m`.
    ep: &'static str,
    mode: &'static str,
    /// Where `libnostd-fi.so` is.
    dir: &'a Path,
    size: usize,
    iters: usize,
    /// Pin with `taskset`.
    pin: bool,
    /// Where the output files go, named after `tag`.
    logs: &'a Path,
    tag: String,
}

impl Pair<'_> {
    /// The output file of `who` (`server`, `client`) and `stream` (`out`, `err`).
    fn log(&self, who: &str, stream: &str) -> PathBuf {
        self.logs.join(format!("{}.{who}.{stream}", self.tag))
    }

    /// `fi_pingpong` for one side (the client connects to the server's control `port` on
    /// 127.0.0.1), its provider environment set and its output going to [`Pair::log`].
    fn command(&self, cpu: usize, port: u16, client: bool) -> Result<Command> {
        let mut c = if self.pin {
            let mut c = Command::new("taskset");
            c.args(["-c", &cpu.to_string(), "fi_pingpong"]);
            c
        } else {
            Command::new("fi_pingpong")
        };
        for v in [
            "FI_PROVIDER",
            "FI_PROVIDER_PATH",
            "FI_NOSTD_IFACE",
            "FI_NOSTD_LOSS",
            "FI_NOSTD_DATAPLANE",
            "FI_NOSTD_EAGER_THRESHOLD",
            "FI_NOSTD_WINDOW",
        ] {
            c.env_remove(v);
        }
        if self.prov == Prov::Nostd {
            c.env("FI_PROVIDER_PATH", self.dir)
                .env("FI_PROVIDER", "nostd")
                .env("FI_NOSTD_IFACE", "lo");
        }
        let (s, i) = (self.size.to_string(), self.iters.to_string());
        c.args(["-p", self.prov.name(), "-e", self.ep, "-m", self.mode])
            .args(["-S", &s, "-I", &i]);
        let port = port.to_string();
        if client {
            c.args(["-P", &port, "127.0.0.1"]);
        } else {
            c.args(["-B", &port]);
        }
        let who = if client { "client" } else { "server" };
        let file = |stream: &str| {
            let p = self.log(who, stream);
            File::create(&p).map_err(|e| format!("cannot create {}: {e}", p.display()))
        };
        c.stdin(Stdio::null())
            .stdout(file("out")?)
            .stderr(file("err")?);
        Ok(c)
    }

    /// Runs the pair; the client's result row.
    fn run(&self) -> Result<Measured> {
        let deadline = Instant::now() + PAIR_LIMIT;
        let port = free_port()?;
        let mut server = self.command(CPUS.0, port, false)?;
        let shown = cmd::display(&server);
        let mut server = Killed(
            server
                .spawn()
                .map_err(|e| format!("could not start `{shown}`: {e}"))?,
        );
        let read = |who: &str, stream: &str| {
            std::fs::read_to_string(self.log(who, stream)).unwrap_or_default()
        };
        let last = |text: String| text.lines().last().unwrap_or_default().to_owned();
        // The client gives up at once when the server does not listen yet: retry.
        let status = loop {
            std::thread::sleep(Duration::from_millis(100));
            if let Some(s) = server.0.try_wait().map_err(|e| e.to_string())? {
                return Err(format!(
                    "the server exited early ({s}): {}",
                    last(read("server", "err"))
                ));
            }
            let mut client = self.command(CPUS.1, port, true)?;
            let shown = cmd::display(&client);
            let mut client = Killed(
                client
                    .spawn()
                    .map_err(|e| format!("could not start `{shown}`: {e}"))?,
            );
            let Some(status) = client.wait_until(deadline)? else {
                return Err(format!("`{shown}` took longer than {PAIR_LIMIT:?}"));
            };
            if status.success() || !read("client", "err").contains("failed to connect") {
                break status;
            }
            if Instant::now() >= deadline {
                return Err(format!("`{shown}`: the server never listened"));
            }
        };
        if !status.success() {
            return Err(format!(
                "the client failed ({status}): {}",
                last(read("client", "err"))
            ));
        }
        // Let the server finish on its own (it is killed on drop otherwise).
        let _ = server.wait_until(deadline.min(Instant::now() + Duration::from_secs(5)))?;
        let out = read("client", "out");
        out.lines().rev().find_map(parse_row).ok_or_else(|| {
            format!(
                "the client printed no result row: {}",
                out.lines().last().unwrap_or_default()
            )
        })
    }
}

/// A free TCP port on loopback (for `fi_pingpong`'s out-of-band connection).
fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
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
    fn parses_fi_pingpong_rows() {
        let row = "64      20k     =20k     2.4m        0.65s      3.91      16.37       0.06";
        assert_eq!(
            parse_row(row),
            Some(Measured {
                mb_per_sec: 3.91,
                usec: 16.37
            })
        );
        assert_eq!(
            parse_row(
                "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec"
            ),
            None
        );
        assert_eq!(parse_row(""), None);
    }

    #[test]
    fn best_takes_each_metric_over_the_runs() {
        let m = |usec, mb_per_sec| Ok(Measured { mb_per_sec, usec });
        let runs = [m(5.0, 100.0), Err("x".to_owned()), m(4.0, 90.0)];
        assert_eq!(
            best(&runs),
            Some(Measured {
                mb_per_sec: 100.0,
                usec: 4.0
            })
        );
        assert_eq!(best(&[Err("x".to_owned())]), None);
    }

    #[test]
    fn render_has_ratios_verdicts_and_plots() {
        let m = |usec, mb_per_sec| Ok(Measured { mb_per_sec, usec });
        let results = vec![
            [
                vec![m(5.0, 12.0), m(6.0, 11.0)],
                vec![m(10.0, 6.0), m(12.0, 5.0)],
            ],
            [
                vec![m(900.0, 2000.0), Err("boom".to_owned())],
                vec![m(3000.0, 600.0), m(3100.0, 580.0)],
            ],
        ];
        let out = render(&results, false, true);
        let md = &out.markdown;
        assert!(md.contains("| 64 B | `nostd` | 5.00 | 12.00 | 5.00; 12.00 / 6.00; 11.00 |"));
        assert!(md.contains("| 1 MiB | `nostd` | 900.00 | 2000.00 | 900.00; 2000.00 / failed |"));
        assert!(md.contains("| 64 B latency | 5.00 µs | 10.00 µs | 0.50x | ≤ 0.6x | ok |"));
        assert!(md.contains(
            "| 1 MiB bandwidth | 2000.00 MB/s | 600.00 MB/s | 3.33x | ≥ 4x | **MISSED** |"
        ));
        assert!(md.contains("- fi_pingpong -p nostd at 1 MiB: boom"));
        assert!(md.contains("pinned to CPU 0"));
        assert_eq!(out.summary.len(), 3);
        assert_eq!(out.plots.len(), 2);
        assert_eq!(out.plots[0].series.len(), 2);
        assert_eq!(
            out.plots[0].series[0].points,
            [(64.0, 5.0), (1048576.0, 900.0)]
        );
        assert_eq!(out.plots[1].series[1].label, "fi_pingpong -p udp;ofi_rxd");
    }

    #[test]
    fn unmeasured_targets_say_so() {
        let results = vec![
            [vec![Err("a".to_owned())], vec![Err("b".to_owned())]],
            [vec![], vec![]],
        ];
        let out = render(&results, true, false);
        assert!(out.markdown.contains("| — | ≤ 0.6x | not measured |"));
        assert!(out.markdown.contains("not pinned"));
        assert!(out.markdown.contains("quick mode"));
        assert!(out.plots[0].series[0].points.is_empty());
    }
}
