//! The per-packet MAC's cost as the issue states its bar (#29): `ofi-pingpong` over
//! loopback UDP, and over a veth pair between two namespaces at MTU 1500 (skipped
//! without root), with and without an auth key, side by side in one run. 64 B ping-pong
//! latency within 10% and 1 MiB bandwidth within 15% of the same run without a key.
//!
//! Runs alternate (no key, key, no key, key, ...) so both see the same stretch of a
//! shared host; every pair is pinned (server CPU 0, client CPU 1, `ofi-pingpong
//! --cpu`). Each row's ratio is the median of the per-round ratios (a round is one run
//! of each, back to back), beside the best of each series. Bandwidth is measured twice:
//! the ping-pong's `MB/sec` (as the `udp` section reports it) and `--mode bandwidth`,
//! a stream of 1 MiB messages with a window in flight, where the MAC's cost per byte
//! is least hidden by round trips.

use std::fmt::Write as _;

use super::pingpong::{self, Measured, Place, Tool};
use super::{Ctx, Outcome, Section, veth};
use crate::cmd::{self, Result};

/// The key both sides use (any key: the cost does not depend on it).
const KEY: &str = "ofi-nostd bench key";
/// Rounds of each row (quick mode: [`QUICK_ROUNDS`]).
const ROUNDS: usize = 7;
const QUICK_ROUNDS: usize = 2;

/// One measured row: what, size, `ofi-pingpong` mode arguments, whether latency is
/// the figure (else bandwidth), and the bound on the keyed / unkeyed ratio.
struct Row {
    what: &'static str,
    size: usize,
    mode: &'static [&'static str],
    latency: bool,
    bound: f64,
}

const ROWS: [Row; 3] = [
    Row {
        what: "64 B ping-pong latency",
        size: 64,
        mode: &[],
        latency: true,
        bound: 1.10,
    },
    Row {
        what: "1 MiB ping-pong bandwidth",
        size: 1 << 20,
        mode: &[],
        latency: false,
        bound: 0.85,
    },
    Row {
        what: "1 MiB streamed bandwidth (`--mode bandwidth`)",
        size: 1 << 20,
        mode: &["--mode", "bandwidth"],
        latency: false,
        bound: 0.85,
    },
];

/// Iterations of one run of `row`.
fn iterations(row: &Row, quick: bool) -> usize {
    if row.mode.is_empty() {
        pingpong::iterations(row.size, quick)
    } else if quick {
        100
    } else {
        500
    }
}

/// With and without an auth key over loopback UDP and a veth pair at MTU 1500.
pub struct Auth;

impl Section for Auth {
    fn title(&self) -> &'static str {
        "Per-packet MAC under an auth key: loopback UDP and a veth pair, with and without a key"
    }

    fn key(&self) -> &'static str {
        "auth"
    }

    fn run(&self, ctx: &Ctx<'_>) -> Result<Outcome> {
        cmd::run(&mut ctx.ws.cargo([
            "build",
            "--release",
            "-p",
            "hosted",
            "--bin",
            "ofi-pingpong",
        ]))?;
        let bin = ctx.target.join("release").join("ofi-pingpong");
        let rounds = if ctx.quick { QUICK_ROUNDS } else { ROUNDS };
        let mut errors = Vec::new();
        let mut results = rows_at(&bin, rounds, ctx.quick, LOOPBACK, &Place::loopback());
        let skipped = match veth::unavailable() {
            Some(why) => Some(why),
            None => match veth::on_pair(VETH_MTU, |place| {
                rows_at(&bin, rounds, ctx.quick, VETH, place)
            }) {
                Ok(r) => {
                    results.extend(r);
                    None
                }
                Err(e) => Some(format!("the veth pair failed: {e}")),
            },
        };
        let mut out = render(&results, rounds);
        if let Some(why) = skipped {
            let _ = writeln!(out.markdown, "\nThe veth rows were not measured: {why}.");
            out.summary.push(format!("  veth rows not measured: {why}"));
        }
        for r in &results {
            errors.extend(r.errors.iter().cloned());
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

/// Where rows run: loopback UDP, and a veth pair between two namespaces at MTU 1500
/// (a network's packet size, where the MAC's cost per byte is set against a real
/// per-packet cost rather than loopback's 64 KiB datagrams at memory speed).
const LOOPBACK: &str = "loopback";
const VETH: &str = "veth MTU 1500";
const VETH_MTU: u32 = 1500;

/// Every row at `place`, `rounds` rounds each of no key then key.
fn rows_at(
    bin: &std::path::Path,
    rounds: usize,
    quick: bool,
    at: &'static str,
    place: &Place,
) -> Vec<Summary> {
    let mut results = Vec::new();
    for row in &ROWS {
        let mut extra = row.mode.to_vec();
        let plain = Tool::ofi_with("no key".into(), bin.to_path_buf(), extra.clone());
        extra.extend(["--auth-key", KEY]);
        let keyed = Tool::ofi_with("auth key".into(), bin.to_path_buf(), extra);
        let mut pairs = Vec::new();
        let mut errors = Vec::new();
        for _ in 0..rounds {
            let n = iterations(row, quick);
            let a = pingpong::measure_at(&plain, row.size, n, place);
            let b = pingpong::measure_at(&keyed, row.size, n, place);
            match (a, b) {
                (Ok(a), Ok(b)) => pairs.push((a, b)),
                (a, b) => {
                    for (t, r) in [("no key", a), ("auth key", b)] {
                        if let Err(e) = r {
                            errors.push(format!("{at}, {}, {t}: {e}", row.what));
                        }
                    }
                }
            }
        }
        let mut shown = summarize(row, &pairs);
        shown.at = at;
        shown.errors = errors;
        println!("  {at:<14} {:<48} {}", row.what, shown.line());
        results.push(shown);
    }
    results
}

/// What one row measured.
#[derive(Debug, Clone, PartialEq)]
struct Summary {
    /// Where: loopback or the veth pair.
    at: &'static str,
    what: &'static str,
    latency: bool,
    bound: f64,
    /// Best without and with a key (µs or MB/s).
    best: Option<(f64, f64)>,
    /// Median of the rounds' keyed / unkeyed ratios.
    ratio: Option<f64>,
    rounds: usize,
    /// Runs that failed.
    errors: Vec<String>,
}

impl Summary {
    fn unit(&self) -> &'static str {
        if self.latency { "µs" } else { "MB/s" }
    }

    fn ok(&self) -> Option<bool> {
        self.ratio.map(|r| {
            if self.latency {
                r <= self.bound
            } else {
                r >= self.bound
            }
        })
    }

    fn target(&self) -> String {
        if self.latency {
            format!("≤ {:.2}x", self.bound)
        } else {
            format!("≥ {:.2}x", self.bound)
        }
    }

    fn line(&self) -> String {
        match (self.best, self.ratio) {
            (Some((a, b)), Some(r)) => format!(
                "no key {a:.2} {u}, key {b:.2} {u}: {r:.3}x (target {}: {})",
                self.target(),
                if self.ok() == Some(true) {
                    "ok"
                } else {
                    "MISSED"
                },
                u = self.unit()
            ),
            _ => "not measured".into(),
        }
    }
}

fn summarize(row: &Row, pairs: &[(Measured, Measured)]) -> Summary {
    let fig = |m: &Measured| if row.latency { m.usec } else { m.mb_per_sec };
    let best = |f: &dyn Fn(&(Measured, Measured)) -> f64| {
        pairs.iter().map(f).fold(None, |acc: Option<f64>, v| {
            Some(match acc {
                None => v,
                Some(a) if row.latency => a.min(v),
                Some(a) => a.max(v),
            })
        })
    };
    let (a, b) = (best(&|p| fig(&p.0)), best(&|p| fig(&p.1)));
    let mut ratios: Vec<f64> = pairs.iter().map(|(a, b)| fig(b) / fig(a)).collect();
    ratios.sort_by(f64::total_cmp);
    let ratio = match ratios.len() {
        0 => None,
        n if n % 2 == 1 => Some(ratios[n / 2]),
        n => Some((ratios[n / 2 - 1] + ratios[n / 2]) / 2.0),
    };
    Summary {
        at: LOOPBACK,
        what: row.what,
        latency: row.latency,
        bound: row.bound,
        best: a.zip(b),
        ratio,
        rounds: pairs.len(),
        errors: Vec::new(),
    }
}

fn render(rows: &[Summary], rounds: usize) -> Outcome {
    let mut md = format!(
        "`ofi-pingpong -e rdm` (release build) over loopback UDP and over a veth pair \
         between two namespaces at MTU 1500, server pinned to CPU 0 \
         and client to CPU 1, busy-polling; each row {rounds} rounds of one run without \
         and one with `--auth-key` (every session packet then carries the 16-byte MAC \
         of wire protocol 4.10), back to back. Ratio: the median over rounds of keyed / \
         unkeyed; best: the best run of each series. Issue #29's bar: 64 B latency \
         within 10% and 1 MiB bandwidth within 15% of the same run without a key.\n\n\
         | Row | Best, no key | Best, key | Median ratio (key / no key) | Target | Verdict |\n\
         |---|---:|---:|---:|---|---|\n"
    );
    let mut summary = vec!["auth key vs none (median of rounds):".to_owned()];
    for r in rows {
        let (a, b) = r.best.map_or(("—".into(), "—".into()), |(a, b)| {
            (
                format!("{a:.2} {}", r.unit()),
                format!("{b:.2} {}", r.unit()),
            )
        });
        let ratio = r.ratio.map_or("—".into(), |x| format!("{x:.3}x"));
        let verdict = match r.ok() {
            Some(true) => "ok",
            Some(false) => "**MISSED**",
            None => "not measured",
        };
        let _ = writeln!(
            md,
            "| {}: {} ({} rounds) | {a} | {b} | {ratio} | {} | {verdict} |",
            r.at,
            r.what,
            r.rounds,
            r.target()
        );
        summary.push(format!("  {:<14} {:<48} {}", r.at, r.what, r.line()));
    }
    Outcome {
        markdown: md,
        summary,
        plots: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(usec: f64, mb: f64) -> Measured {
        Measured {
            usec,
            mb_per_sec: mb,
        }
    }

    #[test]
    fn ratios_are_medians_of_rounds_and_verdicts_follow_the_targets() {
        let lat = &ROWS[0];
        let pairs = [
            (m(10.0, 0.0), m(10.5, 0.0)),
            (m(9.0, 0.0), m(12.0, 0.0)),
            (m(11.0, 0.0), m(11.0, 0.0)),
        ];
        let s = summarize(lat, &pairs);
        assert_eq!(s.best, Some((9.0, 10.5)));
        assert_eq!(s.ratio, Some(1.05));
        assert_eq!(s.ok(), Some(true));
        let bw = &ROWS[2];
        let pairs = [
            (m(0.0, 1000.0), m(0.0, 800.0)),
            (m(0.0, 900.0), m(0.0, 810.0)),
        ];
        let s = summarize(bw, &pairs);
        assert_eq!(s.best, Some((1000.0, 810.0)));
        assert!((s.ratio.unwrap() - 0.85).abs() < 1e-9);
        assert_eq!(s.ok(), Some(true));
        let out = render(&[s, summarize(lat, &[])], 2);
        assert!(
            out.markdown
                .contains("| 1000.00 MB/s | 810.00 MB/s | 0.850x | ≥ 0.85x | ok |")
        );
        assert!(
            out.markdown
                .contains("| — | — | — | ≤ 1.10x | not measured |")
        );
        let slow = summarize(lat, &[(m(10.0, 0.0), m(12.0, 0.0))]);
        assert_eq!(slow.ok(), Some(false));
        assert!(render(&[slow], 1).markdown.contains("**MISSED**"));
    }
}
