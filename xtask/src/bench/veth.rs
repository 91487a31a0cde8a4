//! Real MTUs: ping-pong and streams across a veth pair between two network namespaces,
//! at MTU 1500 and at 9000, where a UDP datagram is an Ethernet frame's payload and not
//! loopback's 64 KiB.
//!
//! As root it creates, with names unique to this run (`obv` + role + our pid), two
//! namespaces `obvnsa<pid>` and `obvnsb<pid>` holding the two ends of a veth pair, both
//! named [`IFACE`] inside their namespace (so `FI_NOSTD_IFACE` is the same on both
//! sides), addressed 10.213.252.1/24 and .2/24, with `lo` up; nothing else is in them.
//! The server runs in the first on CPU 0, the client in the second on CPU 1
//! (`taskset`, or `ofi-pingpong --cpu`). Every row, one pair at a time, at each MTU:
//!
//! * ping-pong latency and bandwidth, 64 B to 4 MiB: raw UDP sockets (`udp_pingpong -C`
//!   one datagram per frame), `ofi-pingpong` (ofi-nostd RDM), `fi_pingpong -p nostd`
//!   (the provider) and `fi_pingpong` on `udp;ofi_rxd` and `tcp;ofi_rxm`;
//! * one-way streaming bandwidth: a TCP stream (`iperf3`, with the kernel's TSO/GRO) and
//!   a raw UDP stream through `UdpLink` (`udp_stream`) with and without UDP GSO.
//!
//! The namespaces (and with them the veth pair) are removed after each MTU, on error,
//! on a panic (a drop guard) and on Ctrl-C or SIGTERM (a handler removes them and exits
//! 130); a start-up sweep removes those of earlier runs whose pid is gone.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::pingpong::{self, Killed, Measured, Place, Tool, human};
use super::{Ctx, Outcome, Plot, Section, Series};
use crate::cmd::{self, Result};
use crate::hosted::{add_netns, ip, netns_names, quiet};

/// The prefix of every namespace this section creates.
const PREFIX: &str = "obv";
/// The namespace roles (`obv<role><pid>`).
const NETNS_ROLES: [&str; 2] = ["nsa", "nsb"];
/// The name of the veth end inside each namespace.
const IFACE: &str = "obv0";
/// The /24 of the pair: the server at .1, the client at .2.
const NET: &str = "10.213.252";
/// The MTUs measured.
const MTUS: [u32; 2] = [1500, 9000];
/// The ping-pong sizes (quick: [`QUICK_SIZES`]).
const SIZES: [usize; 9] = [
    64,
    256,
    1 << 10,
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
    4 << 20,
];
const QUICK_SIZES: [usize; 4] = [64, 64 << 10, 1 << 20, 4 << 20];
/// Seconds of each stream (a third in quick mode, at least one).
const STREAM_SECS: u32 = 3;
/// The longest a stream pair may take.
const STREAM_LIMIT: Duration = Duration::from_secs(30);
/// CPUs of the server and the client.
const CPUS: (usize, usize) = (0, 1);

/// The ping-pong tools, in row order (labels; the targets find them by these).
const RAW: &str = "raw UDP sockets";
const OFI: &str = "ofi-pingpong (ofi-nostd RDM)";
const NOSTD: &str = "fi_pingpong -p nostd";
const RXD: &str = "fi_pingpong udp;ofi_rxd";
const RXM: &str = "fi_pingpong tcp;ofi_rxm";

/// The stream rows.
const STREAMS: [&str; 3] = [
    "TCP stream (iperf3)",
    "raw UDP stream, UDP GSO (udp_stream)",
    "raw UDP stream, no GSO (udp_stream --no-gso)",
];

/// Ping-pong and streams across a veth pair.
pub struct Veth;

/// What one MTU measured.
struct Results {
    mtu: u32,
    /// `pingpong[tool][size index]`.
    pingpong: Vec<Vec<Option<Measured>>>,
    /// MB/s per [`STREAMS`] row.
    streams: Vec<Option<f64>>,
    errors: Vec<String>,
}

impl Section for Veth {
    fn title(&self) -> &'static str {
        "Real MTUs: a veth pair between two network namespaces"
    }

    fn key(&self) -> &'static str {
        "veth"
    }

    fn run(&self, ctx: &Ctx<'_>) -> Result<Outcome> {
        if let Some(why) = unavailable() {
            return Ok(skipped(&why));
        }
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
            "--example",
            "udp_stream",
        ]))?;
        let rel = ctx.target.join("release");
        let have_fi = cmd::on_path("fi_pingpong");
        let provider = if have_fi && ctx.ws.has_provider() {
            Some(crate::provider::build(ctx.ws)?)
        } else {
            None
        };
        let bins = Bins {
            ofi: rel.join("ofi-pingpong"),
            raw: rel.join("examples").join("udp_pingpong"),
            stream: rel.join("examples").join("udp_stream"),
            provider,
            have_fi,
            iperf3: cmd::on_path("iperf3"),
        };
        let sizes: &[usize] = if ctx.quick { &QUICK_SIZES } else { &SIZES };
        let mut all = Vec::new();
        for mtu in MTUS {
            all.push(on_pair(mtu, |place| {
                measure(&bins, place, mtu, sizes, ctx.quick)
            })?);
        }
        Ok(render(&all, sizes, &bins, ctx.quick))
    }
}

/// Whether this host can build a veth pair between namespaces (root, `ip`, `taskset`);
/// why not otherwise.
pub(super) fn unavailable() -> Option<String> {
    if !cmd::is_root() {
        return Some("needs root (it creates network namespaces)".into());
    }
    for (tool, package) in [("ip", "iproute2"), ("taskset", "util-linux")] {
        if !cmd::on_path(tool) {
            return Some(format!("needs `{tool}` (Debian: {package})"));
        }
    }
    None
}

/// Runs `f` with a veth pair at `mtu` between two new namespaces, server side at
/// `{NET}.1`: removed afterwards, on an error, a panic (drop guard) and Ctrl-C
/// (handler). What every section that measures a real MTU uses.
pub(super) fn on_pair<T>(mtu: u32, f: impl FnOnce(&Place) -> T) -> Result<T> {
    sweep();
    // A second section in the same run would find the handler set: that is fine.
    let _ = ctrlc::set_handler(|| {
        eprintln!("bench veth: interrupted: removing the network namespaces");
        let mut armed = ARMED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(t) = armed.take() {
            t.teardown();
        }
        std::process::exit(130);
    });
    let _guard = Guard;
    let topo = Topology::new(std::process::id());
    println!(
        "  MTU {mtu}: namespaces {} and {}",
        topo.netns[0], topo.netns[1]
    );
    {
        let mut armed = ARMED.lock().unwrap_or_else(PoisonError::into_inner);
        *armed = Some(topo.clone());
        topo.setup(mtu)
    }?;
    let place = Place {
        netns: Some(topo.netns.clone()),
        server: format!("{NET}.1"),
    };
    let r = f(&place);
    disarm()?;
    Ok(r)
}

/// The programs measured.
struct Bins {
    ofi: PathBuf,
    raw: PathBuf,
    stream: PathBuf,
    /// Where `libnostd-fi.so` is, when the provider was built.
    provider: Option<PathBuf>,
    have_fi: bool,
    iperf3: bool,
}

impl Bins {
    /// The ping-pong tools at `mtu` (those installed).
    fn tools(&self, mtu: u32) -> Vec<Tool> {
        let chunk = if mtu >= 9000 { "8972" } else { "1472" };
        let mut t = vec![
            Tool::raw(RAW.into(), self.raw.clone(), vec!["-C", chunk]),
            Tool::ofi(OFI.into(), self.ofi.clone()),
        ];
        if let Some(dir) = &self.provider {
            let env = vec![
                ("FI_PROVIDER_PATH", dir.display().to_string()),
                ("FI_PROVIDER", "nostd".into()),
                ("FI_NOSTD_IFACE", IFACE.into()),
            ];
            t.push(Tool::fi(NOSTD.into(), "nostd", env));
        }
        if self.have_fi {
            t.push(Tool::fi(RXD.into(), "udp;ofi_rxd", Vec::new()));
            t.push(Tool::fi(RXM.into(), "tcp;ofi_rxm", Vec::new()));
        }
        t
    }
}

/// Every row at one MTU, at `place` (a veth pair).
fn measure(bins: &Bins, place: &Place, mtu: u32, sizes: &[usize], quick: bool) -> Results {
    let tools = bins.tools(mtu);
    let no_ns = [String::new(), String::new()];
    let netns = place.netns.as_ref().unwrap_or(&no_ns);
    let mut r = Results {
        mtu,
        pingpong: vec![Vec::new(); tools.len()],
        streams: Vec::new(),
        errors: Vec::new(),
    };
    for &size in sizes {
        for (t, tool) in tools.iter().enumerate() {
            let m = pingpong::measure_at(tool, size, pingpong::iterations(size, quick), place);
            println!(
                "  MTU {mtu} {:<30} {size:>8} B: {}",
                tool.label,
                match &m {
                    Ok(m) => format!("{:.2} us, {:.1} MB/s", m.usec, m.mb_per_sec),
                    Err(e) => format!("failed: {e}"),
                }
            );
            if let Err(e) = &m {
                r.errors.push(format!("{} at {size} B: {e}", tool.label));
            }
            r.pingpong[t].push(m.ok());
        }
    }
    let secs = if quick {
        (STREAM_SECS / 3).max(1)
    } else {
        STREAM_SECS
    };
    for (i, label) in STREAMS.iter().enumerate() {
        let got = match i {
            0 if !bins.iperf3 => Err("iperf3 is not installed (Debian: iperf3)".into()),
            0 => iperf3(netns, secs),
            _ => udp_stream(&bins.stream, netns, secs, i == 1),
        };
        println!(
            "  MTU {mtu} {label:<44}: {}",
            match &got {
                Ok(v) => format!("{v:.1} MB/s"),
                Err(e) => format!("failed: {e}"),
            }
        );
        if let Err(e) = &got {
            r.errors.push(format!("{label}: {e}"));
        }
        r.streams.push(got.ok());
    }
    r
}

/// `prog args` in namespace `ns`, pinned to `cpu`.
fn in_ns(ns: &str, cpu: usize, prog: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, "taskset", "-c", &cpu.to_string()])
        .arg(prog)
        .args(args)
        .stdin(Stdio::null());
    c
}

/// Runs a server (started first, given a moment to bind) and a client to completion,
/// within [`STREAM_LIMIT`]; returns the stdout of each.
fn pair(mut server: Command, mut client: Command) -> Result<(String, String)> {
    let deadline = Instant::now() + STREAM_LIMIT;
    let spawn = |c: &mut Command| {
        let shown = cmd::display(c);
        c.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map(Killed)
            .map_err(|e| format!("could not start `{shown}`: {e}"))
    };
    let mut s = spawn(&mut server)?;
    std::thread::sleep(Duration::from_millis(300));
    let mut c = spawn(&mut client)?;
    let out = |k: &mut Killed, what: &Command| -> Result<String> {
        loop {
            if let Some(st) = k.0.try_wait().map_err(|e| e.to_string())? {
                let mut o = String::new();
                let mut e = String::new();
                use std::io::Read as _;
                if let Some(p) = k.0.stdout.as_mut() {
                    let _ = p.read_to_string(&mut o);
                }
                if let Some(p) = k.0.stderr.as_mut() {
                    let _ = p.read_to_string(&mut e);
                }
                if !st.success() {
                    return Err(format!(
                        "`{}` failed ({st}): {}",
                        cmd::display(what),
                        e.lines().last().unwrap_or_default()
                    ));
                }
                return Ok(o);
            }
            if Instant::now() >= deadline {
                return Err(format!("`{}` took too long", cmd::display(what)));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let c_out = out(&mut c, &client)?;
    let s_out = out(&mut s, &server)?;
    Ok((s_out, c_out))
}

/// A TCP stream from the client's namespace to the server's: the receiver's MB/s.
fn iperf3(netns: &[String; 2], secs: u32) -> Result<f64> {
    let port = "5301";
    let server = in_ns(
        &netns[0],
        CPUS.0,
        Path::new("iperf3"),
        &["-s", "-1", "-p", port],
    );
    let t = secs.to_string();
    let dst = format!("{NET}.1");
    let client = in_ns(
        &netns[1],
        CPUS.1,
        Path::new("iperf3"),
        &["-c", &dst, "-p", port, "-t", &t, "-J"],
    );
    let (_, json) = pair(server, client)?;
    let v: serde_json::Value =
        serde_json::from_str(&json).map_err(|e| format!("iperf3 -J output: {e}"))?;
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .map(|bps| bps / 8.0 / 1e6)
        .ok_or_else(|| "iperf3 -J output has no end.sum_received".into())
}

/// A raw UDP stream through `UdpLink`, with or without GSO: the receiver's MB/s.
fn udp_stream(bin: &Path, netns: &[String; 2], secs: u32, gso: bool) -> Result<f64> {
    let port = "5302";
    let server = in_ns(&netns[0], CPUS.0, bin, &["-B", port]);
    let t = secs.to_string();
    let dst = format!("{NET}.1");
    let mut args = vec!["-t", &t, "-P", port];
    if !gso {
        args.push("--no-gso");
    }
    args.push(&dst);
    let client = in_ns(&netns[1], CPUS.1, bin, &args);
    let (received, _) = pair(server, client)?;
    parse_stream(&received).ok_or_else(|| format!("udp_stream printed no result: {received}"))
}

/// The MB/s of `udp_stream`'s receiver line (`received ... : 123.4 MB/s ...`).
fn parse_stream(out: &str) -> Option<f64> {
    let line = out.lines().find(|l| l.starts_with("received "))?;
    let (_, rest) = line.split_once(": ")?;
    rest.split_whitespace().next()?.parse().ok()
}

/// What one MTU creates.
#[derive(Debug, Clone)]
struct Topology {
    netns: [String; 2],
    /// The veth ends' names while they are still in our namespace.
    veths: [String; 2],
}

impl Topology {
    fn new(pid: u32) -> Self {
        let n = |role: &str| format!("{PREFIX}{role}{pid}");
        Topology {
            netns: [n(NETNS_ROLES[0]), n(NETNS_ROLES[1])],
            veths: [n("va"), n("vb")],
        }
    }

    fn setup(&self, mtu: u32) -> Result {
        for ns in &self.netns {
            add_netns(ns)?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        let [va, vb] = &self.veths;
        let mtu = mtu.to_string();
        ip(&[
            "link", "add", va, "mtu", &mtu, "type", "veth", "peer", "name", vb, "mtu", &mtu,
        ])?;
        for (i, (veth, ns)) in self.veths.iter().zip(&self.netns).enumerate() {
            ip(&["link", "set", veth, "netns", ns])?;
            ip(&["-n", ns, "link", "set", veth, "name", IFACE])?;
            let addr = format!("{NET}.{}/24", i + 1);
            ip(&["-n", ns, "addr", "add", &addr, "dev", IFACE])?;
            ip(&["-n", ns, "link", "set", IFACE, "up"])?;
        }
        Ok(())
    }

    /// Removes everything (deleting a namespace deletes the veth end inside it).
    fn teardown(&self) {
        for ns in &self.netns {
            quiet(&["netns", "del", ns]);
        }
        quiet(&["link", "del", &self.veths[0]]);
    }
}

/// The topology in use: removed by whoever takes it first (the normal path, the drop
/// guard or the signal handler).
static ARMED: Mutex<Option<Topology>> = Mutex::new(None);

/// Removes the armed topology and checks it is gone.
fn disarm() -> Result {
    let Some(t) = ARMED.lock().unwrap_or_else(PoisonError::into_inner).take() else {
        return Ok(());
    };
    t.teardown();
    let left: Vec<String> = netns_names()
        .into_iter()
        .filter(|n| t.netns.contains(n))
        .collect();
    if left.is_empty() {
        Ok(())
    } else {
        Err(format!("could not remove netns {}", left.join(", ")))
    }
}

/// Removes the topology on every exit path that unwinds.
struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        if let Err(e) = disarm() {
            eprintln!("bench veth: {e}");
        }
    }
}

/// Removes namespaces an earlier run that was killed outright left behind.
fn sweep() {
    for ns in netns_names() {
        let pid = NETNS_ROLES
            .iter()
            .find_map(|r| ns.strip_prefix(PREFIX)?.strip_prefix(r))
            .and_then(|p| p.parse::<u32>().ok());
        if pid.is_some_and(|p| !Path::new(&format!("/proc/{p}")).exists()) {
            println!("  removing netns {ns} left by an earlier run");
            quiet(&["netns", "del", &ns]);
        }
    }
}

fn skipped(why: &str) -> Outcome {
    Outcome {
        markdown: format!("Skipped: {why}.\n"),
        summary: vec![format!("veth: skipped, {why}")],
        plots: Vec::new(),
    }
}

/// The issue's targets: (what, MTU, other tool, size, latency?, bound).
const TARGETS: [(&str, u32, &str, usize, bool, f64); 5] = [
    (
        "1 MiB bandwidth / tcp;ofi_rxm",
        1500,
        RXM,
        1 << 20,
        false,
        1.2,
    ),
    (
        "1 MiB bandwidth / udp;ofi_rxd",
        1500,
        RXD,
        1 << 20,
        false,
        5.0,
    ),
    (
        "1 MiB bandwidth / tcp;ofi_rxm",
        9000,
        RXM,
        1 << 20,
        false,
        1.5,
    ),
    ("64 B latency / udp;ofi_rxd", 1500, RXD, 64, true, 0.5),
    ("64 B latency / raw UDP", 1500, RAW, 64, true, 1.15),
];

/// The tables, targets and plots.
fn render(all: &[Results], sizes: &[usize], bins: &Bins, quick: bool) -> Outcome {
    let mut md = format!(
        "Two network namespaces joined by a veth pair; server pinned to CPU {} and client \
         to CPU {}, one pair at a time, busy-polling where the tool can. Latency: half the \
         round trip (`usec/xfer`); ping-pong bandwidth: bytes both ways over time (`MB/sec`), \
         as `fi_pingpong` prints them; one run per size{}. Streams: one direction, the \
         receiver's goodput, {} s each.\n",
        CPUS.0,
        CPUS.1,
        if quick {
            " (quick: fewer sizes and a tenth of the iterations)"
        } else {
            ""
        },
        if quick {
            (STREAM_SECS / 3).max(1)
        } else {
            STREAM_SECS
        },
    );
    let mut summary = vec!["veth (ofi-nostd against the others):".to_owned()];
    let mut plots = Vec::new();
    for r in all {
        let tools = bins.tools(r.mtu);
        for (title, f) in [
            (
                "latency (µs)",
                (|m: &Measured| m.usec) as fn(&Measured) -> f64,
            ),
            ("ping-pong bandwidth (MB/s)", |m: &Measured| m.mb_per_sec),
        ] {
            let _ = writeln!(md, "\n**MTU {}: {title}**\n", r.mtu);
            md.push_str("| Tool |");
            for &s in sizes {
                let _ = write!(md, " {} |", human(s));
            }
            let _ = writeln!(md, "\n|---|{}", "---:|".repeat(sizes.len()));
            for (t, tool) in tools.iter().enumerate() {
                let _ = write!(md, "| {} |", tool.label);
                for m in &r.pingpong[t] {
                    match m {
                        Some(m) => {
                            let _ = write!(md, " {:.2} |", f(m));
                        }
                        None => md.push_str(" — |"),
                    }
                }
                md.push('\n');
            }
        }
        let series = |f: fn(&Measured) -> f64| -> Vec<Series> {
            tools
                .iter()
                .zip(&r.pingpong)
                .map(|(t, ms)| Series {
                    label: t.label.clone(),
                    points: sizes
                        .iter()
                        .zip(ms)
                        .filter_map(|(&s, m)| m.map(|m| (s as f64, f(&m))))
                        .collect(),
                })
                .collect()
        };
        let (lat, bw) = if r.mtu >= 9000 {
            ("veth9000-latency", "veth9000-bandwidth")
        } else {
            ("veth1500-latency", "veth1500-bandwidth")
        };
        plots.push(Plot {
            name: lat,
            axes: ("message size (bytes)", "latency (µs)"),
            series: series(|m| m.usec),
        });
        plots.push(Plot {
            name: bw,
            axes: ("message size (bytes)", "bandwidth (MB/s)"),
            series: series(|m| m.mb_per_sec),
        });
    }
    md.push_str("\n**Streaming bandwidth (MB/s, one direction)**\n\n| Stream |");
    for r in all {
        let _ = write!(md, " MTU {} |", r.mtu);
    }
    let _ = writeln!(md, "\n|---|{}", "---:|".repeat(all.len()));
    for (i, label) in STREAMS.iter().enumerate() {
        let _ = write!(md, "| {label} |");
        for r in all {
            match r.streams.get(i).copied().flatten() {
                Some(v) => {
                    let _ = write!(md, " {v:.1} |");
                }
                None => md.push_str(" — |"),
            }
        }
        md.push('\n');
    }
    md.push_str(
        "\n**Targets** (issue #30; a benchmark, not a test)\n\n| MTU | Ratio (ofi-nostd / \
         other) | Measured | Target | Verdict |\n|---|---|---:|---:|---|\n",
    );
    for (what, mtu, other, size, lat, bound) in TARGETS {
        let at = |label: &str| -> Option<Measured> {
            let r = all.iter().find(|r| r.mtu == mtu)?;
            let t = bins.tools(mtu).iter().position(|t| t.label == label)?;
            let i = sizes.iter().position(|&s| s == size)?;
            r.pingpong.get(t)?.get(i).copied().flatten()
        };
        let ratio = match (at(OFI), at(other)) {
            (Some(a), Some(b)) if lat => Some(a.usec / b.usec),
            (Some(a), Some(b)) => Some(a.mb_per_sec / b.mb_per_sec),
            _ => None,
        };
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
        let shown = ratio.map_or("—".into(), |r| format!("{r:.2}x"));
        let _ = writeln!(md, "| {mtu} | {what} | {shown} | {target} | {verdict} |");
        summary.push(format!(
            "  MTU {mtu} {what:<30} {shown:>8}  (target {target}: {})",
            verdict.replace("**", "")
        ));
    }
    let errors: Vec<&String> = all.iter().flat_map(|r| &r.errors).collect();
    if !errors.is_empty() {
        md.push_str("\nFailed runs:\n\n");
        for e in errors {
            let _ = writeln!(md, "- {e}");
        }
    }
    Outcome {
        markdown: md,
        summary,
        plots,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_ifnamsiz_and_carry_the_pid() {
        let t = Topology::new(4_194_304); // the largest pid_max
        for n in t.netns.iter().chain(&t.veths) {
            assert!(n.len() < 16, "{n}");
            assert!(n.starts_with(PREFIX) && n.ends_with("4194304"), "{n}");
        }
        assert!(IFACE.len() < 16);
    }

    #[test]
    fn parses_the_stream_receiver_line() {
        let out = "received 455413400 bytes in 350318 datagrams in 1.024 s: 444.9 MB/s \
                   (GRO buffers 10957, receive calls 1997)\n";
        assert_eq!(parse_stream(out), Some(444.9));
        assert_eq!(parse_stream("sent 1 bytes"), None);
    }

    #[test]
    fn render_has_tables_targets_and_plots() {
        let bins = Bins {
            ofi: "o".into(),
            raw: "r".into(),
            stream: "s".into(),
            provider: None,
            have_fi: true,
            iperf3: true,
        };
        let sizes = [64, 1 << 20];
        let m = |usec: f64, mb: f64| {
            Some(Measured {
                usec,
                mb_per_sec: mb,
            })
        };
        // Rows: raw, ofi, rxd, rxm.
        let r = |mtu| Results {
            mtu,
            pingpong: vec![
                vec![m(4.0, 10.0), m(100.0, 900.0)],
                vec![m(4.4, 10.0), m(90.0, 3000.0)],
                vec![m(10.0, 5.0), m(300.0, 400.0)],
                vec![m(9.0, 6.0), m(80.0, 2000.0)],
            ],
            streams: vec![Some(3000.0), Some(1200.0), None],
            errors: vec!["x failed".into()],
        };
        let out = render(&[r(1500), r(9000)], &sizes, &bins, false);
        let md = &out.markdown;
        assert!(
            md.contains("| 1500 | 1 MiB bandwidth / tcp;ofi_rxm | 1.50x | ≥ 1.2x | ok |"),
            "{md}"
        );
        assert!(md.contains("| 1500 | 1 MiB bandwidth / udp;ofi_rxd | 7.50x | ≥ 5x | ok |"));
        assert!(md.contains("| 9000 | 1 MiB bandwidth / tcp;ofi_rxm | 1.50x | ≥ 1.5x | ok |"));
        assert!(md.contains("| 1500 | 64 B latency / udp;ofi_rxd | 0.44x | ≤ 0.5x | ok |"));
        assert!(md.contains("| 1500 | 64 B latency / raw UDP | 1.10x | ≤ 1.15x | ok |"));
        assert!(md.contains("| TCP stream (iperf3) | 3000.0 | 3000.0 |"));
        assert!(md.contains("| raw UDP stream, no GSO (udp_stream --no-gso) | — | — |"));
        assert!(md.contains("- x failed"));
        assert_eq!(out.plots.len(), 4);
        assert_eq!(out.plots[0].series.len(), 4);
    }
}
