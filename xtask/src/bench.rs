//! `cargo xtask bench`: runs the benchmarks and writes `target/bench/report.md`.
//!
//! The report is a list of [`Section`]s, each measuring one thing and rendering its own
//! markdown. Today there is the tag-matching section (criterion, `crates/ofi-nostd/benches
//! /matching.rs`); the ping-pong latency and bandwidth sections (ofi-nostd against raw UDP
//! sockets and the system libfabric's `fi_pingpong`, per data plane) come with the data
//! path: add a `Section` to [`sections`] and remove its line from [`PLANNED`]. Series
//! worth a figure (latency or bandwidth against message size) go into
//! [`Outcome::plots`]; [`write_plot`] is the one place that renders them.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

use crate::cmd::{self, Result};
use crate::ws::Workspace;

#[path = "bench_provider.rs"]
mod bench_provider;
pub use bench_provider::train_provider;
mod auth;
mod contexts;
mod dpdk;
mod pingpong;
mod veth;

/// What every section sees: where to find and put things, and how thorough to be.
pub struct Ctx<'a> {
    /// The workspace.
    pub ws: &'a Workspace,
    /// Cargo's target directory.
    pub target: PathBuf,
    /// Where the report and plot data go (`<target>/bench`).
    pub out: PathBuf,
    /// Short runs (criterion `--quick`), for a smoke check rather than numbers to quote.
    pub quick: bool,
    /// When this run started; results older than this are stale.
    pub started: SystemTime,
}

/// One section of the report.
pub trait Section {
    /// The section heading.
    fn title(&self) -> &'static str;
    /// The name `cargo xtask bench --only` selects it by.
    fn key(&self) -> &'static str;
    /// Measures and renders.
    fn run(&self, ctx: &Ctx<'_>) -> Result<Outcome>;
}

/// What a section produced.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The section body (markdown, without the heading).
    pub markdown: String,
    /// Lines for the terminal.
    pub summary: Vec<String>,
    /// Data worth a figure.
    pub plots: Vec<Plot>,
}

/// A figure: several series of `(x, y)` points on shared axes.
#[derive(Debug)]
pub struct Plot {
    /// File stem of the rendered output, e.g. `matching`, `pingpong-latency`.
    pub name: &'static str,
    /// Axis labels `(x, y)`.
    pub axes: (&'static str, &'static str),
    /// One line per series.
    pub series: Vec<Series>,
}

/// One labelled line of a [`Plot`].
#[derive(Debug)]
pub struct Series {
    /// The legend entry.
    pub label: String,
    /// The points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// The sections of the report, in order.
fn sections() -> Vec<Box<dyn Section>> {
    vec![
        Box::new(Matching),
        Box::new(Engine),
        Box::new(pingpong::PingPong),
        Box::new(contexts::Contexts),
        Box::new(dpdk::DpdkMemif),
        Box::new(bench_provider::Provider),
        Box::new(veth::Veth),
        Box::new(auth::Auth),
    ]
}

/// Sections that arrive later, listed in the report so it is clear what is missing.
const PLANNED: &[&str] = &["TAP / AF_PACKET data planes and the simulator."];

/// The Debian packages the sections compare against or build with (`fi_pingpong` for the
/// libfabric rows, DPDK for memif, libfabric's headers for the provider), installed when
/// xtask may (root with apt-get) so that a fresh machine measures every row. Otherwise,
/// or when the install fails, the sections that need them say they skipped.
fn install_comparisons(ws: &Workspace) {
    let wanted: Vec<_> = crate::prereq::DEBIAN_PACKAGES
        .iter()
        .copied()
        .filter(|p| {
            ["test-dpdk", "provider", "bench"]
                .iter()
                .any(|w| p.needed_by.starts_with(w))
        })
        .collect();
    let missing = crate::prereq::missing_packages(ws, &wanted);
    if missing.is_empty() {
        return;
    }
    if !(cmd::is_root() && cmd::on_path("apt-get")) {
        let names: Vec<&str> = missing.iter().map(|p| p.package).collect();
        println!(
            "==> bench: not root: sections that need {} will be skipped",
            names.join(", ")
        );
        return;
    }
    if let Err(e) = crate::prereq::ensure_debian_packages(&missing, true) {
        println!("==> bench: could not install every comparison ({e}); those sections skip");
    }
}

/// The sections named in `only` (every section when empty), in report order; an error
/// naming the valid keys for an unknown name.
fn select(only: &[String]) -> Result<Vec<Box<dyn Section>>> {
    let all = sections();
    if let Some(bad) = only
        .iter()
        .find(|k| !all.iter().any(|s| s.key() == k.as_str()))
    {
        let keys: Vec<&str> = all.iter().map(|s| s.key()).collect();
        return Err(format!(
            "no benchmark section `{bad}` (sections: {})",
            keys.join(", ")
        ));
    }
    Ok(all
        .into_iter()
        .filter(|s| only.is_empty() || only.iter().any(|k| k == s.key()))
        .collect())
}

/// Runs every section (or those named in `only`) and writes `<target>/bench/report.md`.
pub fn run(ws: &Workspace, quick: bool, only: &[String]) -> Result {
    let sections = select(only)?;
    let target = target_dir(ws);
    let ctx = Ctx {
        ws,
        out: target.join("bench"),
        target,
        quick,
        started: SystemTime::now(),
    };
    install_comparisons(ws);
    std::fs::create_dir_all(&ctx.out)
        .map_err(|e| format!("cannot create {}: {e}", ctx.out.display()))?;
    let mut report = String::from("# ofi-nostd benchmarks\n\n");
    report.push_str(&machine_note(ws, quick));
    let mut summary = Vec::new();
    if !only.is_empty() {
        let _ = writeln!(report, "\nSections run: {} (`--only`).", only.join(", "));
    }
    for section in sections {
        println!("==> bench: {}", section.title());
        let outcome = section.run(&ctx)?;
        let _ = write!(report, "\n## {}\n\n{}", section.title(), outcome.markdown);
        for plot in &outcome.plots {
            let link = write_plot(plot, &ctx.out)?;
            let _ = writeln!(report, "\n{link}");
        }
        summary.extend(outcome.summary);
    }
    if !PLANNED.is_empty() {
        report.push_str("\n## Not measured yet\n\n");
        for p in PLANNED {
            let _ = writeln!(report, "- {p}");
        }
    }
    let path = ctx.out.join("report.md");
    std::fs::write(&path, report).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!();
    for line in summary {
        println!("{line}");
    }
    println!("report: {}", path.display());
    Ok(())
}

/// Cargo's target directory: `$CARGO_TARGET_DIR` (relative to the workspace) or `target`.
fn target_dir(ws: &Workspace) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => ws.path(&dir.to_string_lossy()),
        None => ws.path("target"),
    }
}

/// When, where and on what the numbers were taken.
fn machine_note(ws: &Workspace, quick: bool) -> String {
    let first_line = |mut c: Command| {
        cmd::output(c.current_dir(ws.path("")))
            .ok()
            .and_then(|s| s.lines().next().map(str::to_owned))
            .unwrap_or_else(|| "unknown".into())
    };
    let mut date = Command::new("date");
    date.args(["-u", "+%Y-%m-%d %H:%M UTC"]);
    let mut git = Command::new("git");
    git.args(["describe", "--always", "--dirty"]);
    let mut rustc = Command::new("rustc");
    rustc.arg("--version");
    let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
    let cpu = read("/proc/cpuinfo")
        .lines()
        .find_map(|l| {
            l.strip_prefix("model name")
                .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_owned());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mut s = String::new();
    let _ = writeln!(s, "- Date: {}", first_line(date));
    let _ = writeln!(
        s,
        "- Machine: {} ({cpu}, {cpus} CPUs available), Linux {}",
        read("/proc/sys/kernel/hostname").trim(),
        read("/proc/sys/kernel/osrelease").trim()
    );
    let _ = writeln!(
        s,
        "- Build: {}, commit {}",
        first_line(rustc),
        first_line(git)
    );
    let _ = writeln!(
        s,
        "- Mode: {}. The machine may be shared and noisy: compare numbers from one run, \
         not across runs.",
        if quick {
            "quick (criterion `--quick`: a smoke check, not numbers to quote)"
        } else {
            "full criterion runs"
        }
    );
    s
}

/// Writes a plot's data as `<out>/<name>.csv` (one column per series) and the figure as
/// `<out>/<name>.svg` (log-log axes, drawn by [`svg`]), and returns the markdown that
/// shows the figure and links the data.
fn write_plot(plot: &Plot, out: &Path) -> Result<String> {
    let mut xs: Vec<f64> = plot
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .collect();
    xs.sort_by(f64::total_cmp);
    xs.dedup();
    let mut csv = plot.axes.0.to_owned();
    for s in &plot.series {
        let _ = write!(csv, ",{}", s.label);
    }
    csv.push('\n');
    for x in xs {
        let _ = write!(csv, "{x}");
        for s in &plot.series {
            csv.push(',');
            if let Some((_, y)) = s.points.iter().find(|p| p.0 == x) {
                let _ = write!(csv, "{y}");
            }
        }
        csv.push('\n');
    }
    let file = format!("{}.csv", plot.name);
    let path = out.join(&file);
    std::fs::write(&path, csv).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    let fig = format!("{}.svg", plot.name);
    let path = out.join(&fig);
    std::fs::write(&path, svg(plot))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(format!(
        "![{} against {}]({fig})\n\nPlot data ({} against {}): [{file}]({file})",
        plot.axes.1, plot.axes.0, plot.axes.1, plot.axes.0
    ))
}

/// A self-contained SVG line chart of `plot` on log-log axes (decade grid lines, one
/// coloured polyline with markers per series, a legend).
fn svg(plot: &Plot) -> String {
    const W: f64 = 720.0;
    const H: f64 = 440.0;
    const L: f64 = 80.0;
    const R: f64 = 200.0;
    const T: f64 = 30.0;
    const B: f64 = 50.0;
    const COLORS: [&str; 8] = [
        "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    ];
    let pts = || {
        plot.series
            .iter()
            .flat_map(|s| s.points.iter())
            .filter(|p| p.0 > 0.0 && p.1 > 0.0 && p.0.is_finite() && p.1.is_finite())
    };
    let range = |f: fn(&(f64, f64)) -> f64| {
        let (lo, hi) = pts()
            .map(f)
            .fold((f64::MAX, f64::MIN), |(a, b), v| (a.min(v), b.max(v)));
        if lo > hi {
            (0.0, 1.0)
        } else {
            let (lo, hi) = (lo.log10().floor(), hi.log10().ceil());
            (lo, if hi > lo { hi } else { lo + 1.0 })
        }
    };
    let (x0, x1) = range(|p| p.0);
    let (y0, y1) = range(|p| p.1);
    let sx = |x: f64| L + (x.log10() - x0) / (x1 - x0) * (W - L - R);
    let sy = |y: f64| H - B - (y.log10() - y0) / (y1 - y0) * (H - T - B);
    let esc = |t: &str| {
        t.replace('&', "&amp;")
            .replace('<', "&lt;")
            .replace('>', "&gt;")
    };
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" \
         font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>"
    );
    let label = |v: f64| {
        let n = 10f64.powf(v);
        match n {
            n if n >= 1e9 => format!("{}G", n / 1e9),
            n if n >= 1e6 => format!("{}M", n / 1e6),
            n if n >= 1e3 => format!("{}k", n / 1e3),
            n => format!("{n}"),
        }
    };
    let mut d = x0;
    while d <= x1 {
        let x = L + (d - x0) / (x1 - x0) * (W - L - R);
        let _ = writeln!(
            o,
            "<line x1=\"{x:.1}\" y1=\"{T}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            H - B,
            H - B + 16.0,
            label(d)
        );
        d += 1.0;
    }
    let mut d = y0;
    while d <= y1 {
        let y = H - B - (d - y0) / (y1 - y0) * (H - T - B);
        let _ = writeln!(
            o,
            "<line x1=\"{L}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            W - R,
            L - 6.0,
            y + 4.0,
            label(d)
        );
        d += 1.0;
    }
    let _ = writeln!(
        o,
        "<rect x=\"{L}\" y=\"{T}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"none\" stroke=\"black\"/>\n\
         <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{} (log)</text>\n\
         <text transform=\"translate(18,{:.1}) rotate(-90)\" text-anchor=\"middle\">{} (log)</text>",
        W - L - R,
        H - T - B,
        (L + W - R) / 2.0,
        H - 12.0,
        esc(plot.axes.0),
        (T + H - B) / 2.0,
        esc(plot.axes.1)
    );
    for (i, s) in plot.series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let p: Vec<String> = s
            .points
            .iter()
            .filter(|p| p.0 > 0.0 && p.1 > 0.0 && p.0.is_finite() && p.1.is_finite())
            .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y)))
            .collect();
        let _ = writeln!(
            o,
            "<polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2\" points=\"{}\"/>",
            p.join(" ")
        );
        for q in &p {
            let (x, y) = q.split_once(',').unwrap_or(("0", "0"));
            let _ = writeln!(o, "<circle cx=\"{x}\" cy=\"{y}\" r=\"3\" fill=\"{c}\"/>");
        }
        let ly = T + 10.0 + 18.0 * i as f64;
        let _ = writeln!(
            o,
            "<line x1=\"{:.1}\" y1=\"{ly:.1}\" x2=\"{:.1}\" y2=\"{ly:.1}\" stroke=\"{c}\" stroke-width=\"2\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{}</text>",
            W - R + 10.0,
            W - R + 30.0,
            W - R + 36.0,
            ly + 4.0,
            esc(&s.label)
        );
    }
    o.push_str("</svg>\n");
    o
}

/// Tag matching against queue length (`crates/ofi-nostd/benches/matching.rs`).
struct Matching;

/// Queue lengths the bench measures; the ratio is last over first.
const LENGTHS: [u32; 3] = [1, 100, 10_000];

/// One benchmarked variant: criterion group and function, what it is, and the bound on
/// the 10,000-vs-1 ratio (`None`: linear by design, shown for contrast).
struct Row {
    group: &'static str,
    function: &'static str,
    what: &'static str,
    bound: Option<f64>,
}

const ROWS: [Row; 6] = [
    Row {
        group: "posted_exact",
        function: "any_src",
        what: "posted, exact tag, any-source receives",
        bound: Some(2.0),
    },
    Row {
        group: "posted_exact",
        function: "directed",
        what: "posted, exact tag, directed receives",
        bound: Some(2.0),
    },
    Row {
        group: "posted_exact",
        function: "hot",
        what: "posted, exact tag, same tag every time",
        bound: Some(2.0),
    },
    Row {
        group: "unexpected",
        function: "any_src",
        what: "unexpected, exact tag, any-source receive",
        bound: Some(2.0),
    },
    Row {
        group: "unexpected",
        function: "directed",
        what: "unexpected, exact tag, directed receive",
        bound: Some(2.0),
    },
    Row {
        group: "posted_wildcard",
        function: "last_posted",
        what: "posted, ignore bits (ordered list; contrast)",
        bound: None,
    },
];

impl Section for Matching {
    fn title(&self) -> &'static str {
        "Tag matching against queue length"
    }

    fn key(&self) -> &'static str {
        "matching"
    }

    fn run(&self, ctx: &Ctx<'_>) -> Result<Outcome> {
        let home = run_criterion(ctx, "ofi-nostd", "matching")?;
        let means = ROWS
            .iter()
            .map(|r| {
                LENGTHS
                    .iter()
                    .map(|&n| {
                        let dir = home.join(r.group).join(r.function).join(n.to_string());
                        fresh_mean_ns(&dir.join("new/estimates.json"), ctx.started)
                    })
                    .collect::<Result<Vec<f64>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(render_matching(&means))
    }
}

/// Runs criterion bench `bench` of `package` (`--quick` in quick mode) and returns the
/// directory it wrote its estimates to.
fn run_criterion(ctx: &Ctx<'_>, package: &str, bench: &str) -> Result<PathBuf> {
    let home = ctx.target.join("criterion");
    let mut c = ctx
        .ws
        .cargo(["bench", "-p", package, "--bench", bench, "--", "--noplot"]);
    if ctx.quick {
        c.arg("--quick");
    }
    cmd::run(c.env("CRITERION_HOME", &home))?;
    Ok(home)
}

/// The core's own cost per RDM round trip, without system calls
/// (`crates/hosted/benches/engine.rs`): what the latency sections' gap to raw sockets
/// is made of, tracked on its own (no target).
struct Engine;

impl Section for Engine {
    fn title(&self) -> &'static str {
        "The core's cost per RDM round trip (no system calls)"
    }

    fn key(&self) -> &'static str {
        "engine"
    }

    fn run(&self, ctx: &Ctx<'_>) -> Result<Outcome> {
        let home = run_criterion(ctx, "hosted", "engine")?;
        let mean = |name: &str, param: &str| {
            let dir = home.join("engine").join(name).join(param);
            fresh_mean_ns(&dir.join("new/estimates.json"), ctx.started)
        };
        let ns = mean("rdm_tagged_inject_round_trip", "64")?;
        let idle = mean("rdm_tagged_inject_round_trip_idle_peers", "60")?;
        let burst = mean("rdm_tagged_inject_stream", "32")?;
        let home = run_criterion(ctx, "hosted", "api")?;
        let api = fresh_mean_ns(
            &home
                .join("api/rdm_msg_inject_round_trip/64")
                .join("new/estimates.json"),
            ctx.started,
        )?;
        Ok(render_engine(ns, idle, burst / 32.0, api))
    }
}

/// The engine section from the mean round trip (ns) without and with 60 idle sessions
/// per side, the mean cost of one streamed message (ns, both sides), and the mean
/// round trip through the safe API over loopback UDP in one thread (ns).
fn render_engine(ns: f64, idle: f64, streamed: f64, api: f64) -> Outcome {
    let markdown = format!(
        "Two domains joined by in-memory links play an RDM ping-pong of 64 B tagged \
         injects, posting as the adapters do; one iteration is two sends, two receives \
         and two completions, with no system call. Mean per round trip: **{}** ({} per \
         message, send and receive side together); with 60 idle sessions on each side \
         (an MPI rank's other peers): {} ({:.2}x). Streaming bursts of 32 injects one \
         way (the receiver re-posting, its acknowledgements taken by the sender): **{}** \
         per message, sender and receiver together on one core ({:.2} M msg/s). No \
         target: the part of the latency gap to raw sockets, and of the message-rate \
         budget (5 M msg/s is 200 ns per message on each side), that is the core's own \
         work.\n\n\
         The whole hosted path in one thread (`crates/hosted/benches/api.rs`): two RDM \
         endpoints of the safe API on kernel UDP sockets on loopback, 64 B \
         `fi_injectdata` and a re-posted receive each way, as `ofi-pingpong -m msg` \
         does: **{}** per round trip ({:.2}x the core's), system calls included.\n",
        human_ns(ns),
        human_ns(ns / 2.0),
        human_ns(idle),
        idle / ns,
        human_ns(streamed),
        1e3 / streamed,
        human_ns(api),
        api / ns
    );
    Outcome {
        markdown,
        summary: vec![format!(
            "engine: {} per RDM round trip, {} per message (no system calls); {} with 60 idle sessions; streaming {} per message (both sides); safe API over loopback UDP {} per round trip",
            human_ns(ns),
            human_ns(ns / 2.0),
            human_ns(idle),
            human_ns(streamed),
            human_ns(api)
        )],
        plots: Vec::new(),
    }
}

/// The matching section from the means (ns) of [`ROWS`] × [`LENGTHS`].
fn render_matching(means: &[Vec<f64>]) -> Outcome {
    let mut md = String::from(
        "Each iteration matches one message: `find` + `remove` + re-`post` (re-`insert` for \
         the unexpected queue), so the queue keeps its length. Exact-tag rows walk all \
         queued tags in a scattered order, cache misses included. Mean time per \
         iteration from one criterion run. Issue requirement: exact-tag matching against \
         10,000 posted receives costs within 2x of matching against 1.\n\n\
         | Bench | n = 1 | n = 100 | n = 10,000 | 10,000 / 1 | Bound |\n\
         |---|---:|---:|---:|---:|---|\n",
    );
    let mut summary = vec!["matching, mean per find+remove+re-post (10,000 vs 1):".to_owned()];
    let mut plot = Plot {
        name: "matching",
        axes: ("queue length", "ns per match"),
        series: Vec::new(),
    };
    for (row, m) in ROWS.iter().zip(means) {
        let ratio = m[m.len() - 1] / m[0];
        let verdict = match row.bound {
            Some(b) if ratio <= b => format!("≤ {b}x: ok"),
            Some(b) => format!("≤ {b}x: **EXCEEDED**"),
            None => "linear (contrast)".to_owned(),
        };
        let name = format!("{}/{}", row.group, row.function);
        let _ = write!(md, "| `{name}` ({}) ", row.what);
        for &v in m {
            let _ = write!(md, "| {} ", human_ns(v));
        }
        let _ = writeln!(md, "| {ratio:.2}x | {verdict} |");
        summary.push(format!(
            "  {name:<28} {:>10} vs {:>10}  = {ratio:>8.2}x  ({})",
            human_ns(m[m.len() - 1]),
            human_ns(m[0]),
            verdict.replace("**", "")
        ));
        plot.series.push(Series {
            label: name,
            points: LENGTHS
                .iter()
                .map(|&n| f64::from(n))
                .zip(m.iter().copied())
                .collect(),
        });
    }
    md.push_str(
        "\nThe structural half (a matching `find` inspects at most 8 nodes among 10,000 \
         posted receives) is the deterministic unit test \
         `matching::tests::exact_find_inspects_constant_nodes_at_any_queue_length`.\n",
    );
    Outcome {
        markdown: md,
        summary,
        plots: vec![plot],
    }
}

/// The mean point estimate (ns) of a criterion `estimates.json`, refusing one older than
/// `since` (a bench that did not run this time).
fn fresh_mean_ns(path: &Path, since: SystemTime) -> Result<f64> {
    let meta =
        std::fs::metadata(path).map_err(|e| format!("no result at {}: {e}", path.display()))?;
    if meta.modified().is_ok_and(|t| t < since) {
        return Err(format!("{} is from an earlier run", path.display()));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    mean_ns(&text).ok_or_else(|| format!("{} has no mean.point_estimate", path.display()))
}

/// `mean.point_estimate` of criterion's estimates JSON.
fn mean_ns(json: &str) -> Option<f64> {
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    v["mean"]["point_estimate"].as_f64()
}

/// A duration in ns with a readable unit.
fn human_ns(ns: f64) -> String {
    match ns {
        n if n < 1e3 => format!("{n:.1} ns"),
        n if n < 1e6 => format!("{:.2} µs", n / 1e3),
        n if n < 1e9 => format!("{:.2} ms", n / 1e6),
        n => format!("{:.2} s", n / 1e9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_selects_sections_by_key() {
        let keys = |v: &[&str]| -> Vec<&'static str> {
            let only: Vec<String> = v.iter().map(|s| s.to_string()).collect();
            select(&only).unwrap().iter().map(|s| s.key()).collect()
        };
        assert_eq!(
            keys(&[]),
            [
                "matching", "engine", "udp", "contexts", "memif", "provider", "veth", "auth"
            ]
        );
        // Report order, whatever the order asked in.
        assert_eq!(keys(&["provider", "memif"]), ["memif", "provider"]);
        let err = select(&["memif".into(), "tap".into()]).err().unwrap();
        assert!(
            err.contains("`tap`") && err.contains("udp, contexts, memif"),
            "{err}"
        );
    }

    #[test]
    fn reads_criterion_mean() {
        let json = r#"{"mean":{"confidence_interval":{"confidence_level":0.95,
            "lower_bound":38.7,"upper_bound":38.9},"point_estimate":38.85,"standard_error":0.07},
            "median":{"point_estimate":38.8}}"#;
        assert_eq!(mean_ns(json), Some(38.85));
        assert_eq!(mean_ns(r#"{"median":{"point_estimate":1.0}}"#), None);
        assert_eq!(mean_ns("not json"), None);
    }

    #[test]
    fn stale_or_missing_results_are_refused() {
        let dir = std::env::temp_dir().join(format!("xtask-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("estimates.json");
        std::fs::write(&file, r#"{"mean":{"point_estimate":2.5}}"#).unwrap();
        let past = SystemTime::UNIX_EPOCH;
        assert_eq!(fresh_mean_ns(&file, past), Ok(2.5));
        let future = SystemTime::now() + std::time::Duration::from_secs(3600);
        assert!(
            fresh_mean_ns(&file, future)
                .unwrap_err()
                .contains("earlier run")
        );
        assert!(fresh_mean_ns(&dir.join("absent.json"), past).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn engine_section_names_round_trip_and_message() {
        let out = render_engine(1500.0, 1650.0, 250.0, 9000.0);
        assert!(out.markdown.contains("**1.50 µs**"), "{}", out.markdown);
        assert!(out.markdown.contains("(750.0 ns per"), "{}", out.markdown);
        assert!(out.markdown.contains("1.65 µs (1.10x)"), "{}", out.markdown);
        assert!(
            out.markdown.contains("**250.0 ns** per message")
                && out.markdown.contains("(4.00 M msg/s)"),
            "{}",
            out.markdown
        );
        assert!(out.summary[0].starts_with("engine: 1.50 µs"));
        assert!(
            out.markdown
                .contains("**9.00 µs** per round trip (6.00x the core's)"),
            "{}",
            out.markdown
        );
        assert!(out.summary[0].ends_with("safe API over loopback UDP 9.00 µs per round trip"));
    }

    #[test]
    fn matching_table_has_ratios_and_verdicts() {
        let means: Vec<Vec<f64>> = ROWS
            .iter()
            .map(|r| match r.bound {
                Some(_) => vec![30.0, 33.0, 45.0],
                None => vec![28.0, 300.0, 38_000.0],
            })
            .collect();
        let out = render_matching(&means);
        assert!(out.markdown.contains("| `posted_exact/any_src` "));
        assert!(
            out.markdown
                .contains("| 30.0 ns | 33.0 ns | 45.0 ns | 1.50x | ≤ 2x: ok |")
        );
        assert!(
            out.markdown
                .contains("| 38.00 µs | 1357.14x | linear (contrast) |")
        );
        assert_eq!(out.summary.len(), ROWS.len() + 1);
        assert_eq!(out.plots[0].series.len(), ROWS.len());
        let slow: Vec<Vec<f64>> = means.iter().map(|m| vec![m[0], m[1], m[0] * 3.0]).collect();
        assert!(render_matching(&slow).markdown.contains("EXCEEDED"));
    }

    #[test]
    fn plot_data_is_one_column_per_series() {
        let dir = std::env::temp_dir().join(format!("xtask-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let plot = Plot {
            name: "p",
            axes: ("size", "ns"),
            series: vec![
                Series {
                    label: "a".into(),
                    points: vec![(1.0, 10.0), (8.0, 20.0)],
                },
                Series {
                    label: "b".into(),
                    points: vec![(8.0, 5.0)],
                },
            ],
        };
        let link = write_plot(&plot, &dir).unwrap();
        assert!(link.contains("[p.csv](p.csv)"));
        let csv = std::fs::read_to_string(dir.join("p.csv")).unwrap();
        assert_eq!(csv, "size,a,b\n1,10,\n8,20,5\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn durations_pick_a_unit() {
        assert_eq!(human_ns(32.14), "32.1 ns");
        assert_eq!(human_ns(38_356.0), "38.36 µs");
        assert_eq!(human_ns(2.5e6), "2.50 ms");
    }
}
