//! `cargo xtask test`: every check and test, in order, stopping at the first failure.

use std::time::{Duration, Instant};

use crate::cmd::{self, Result};
use crate::ws::{NO_STD_CRATES, NO_STD_TARGETS, Workspace};
use crate::{fuzz, hooks, layout, prereq};

/// One step of the pipeline.
struct Step<'a> {
    /// Shown in progress and failure lines.
    name: String,
    /// What the step does.
    run: Box<dyn Fn() -> Result + 'a>,
}

impl<'a> Step<'a> {
    /// A step named `name` that runs `run`.
    fn new(name: impl Into<String>, run: impl Fn() -> Result + 'a) -> Self {
        Self {
            name: name.into(),
            run: Box::new(run),
        }
    }
}

/// The steps of `cargo xtask test`, in order; the workspace tests come last so the run
/// ends with the test runner's own summary.
fn steps(ws: &Workspace, fuzz_secs: u64) -> Vec<Step<'_>> {
    let mut steps = vec![
        Step::new("prerequisites", move || prereq::ensure_for_test(ws)),
        Step::new("layout", move || layout::check(ws)),
        Step::new("fmt", move || {
            cmd::run(&mut ws.cargo(["fmt", "--all", "--check"]))
        }),
        Step::new("clippy", move || {
            cmd::run(&mut ws.cargo([
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ]))
        }),
        Step::new("doc", move || {
            let mut doc = ws.cargo(["doc", "--workspace", "--no-deps"]);
            cmd::run(doc.env("RUSTDOCFLAGS", "-D warnings"))
        }),
    ];
    for target in NO_STD_TARGETS {
        steps.push(Step::new(format!("build {target}"), move || {
            build_no_std(ws, target)
        }));
    }
    steps.push(Step::new("ofi-nostd without rma, atomic", move || {
        core_without_features(ws)
    }));
    steps.extend([
        Step::new("fuzz smoke", move || fuzz::run(ws, fuzz_secs, &[])),
        // Not root: skipped with a notice (the UDP tests still run with the workspace's).
        Step::new("test-hosted", move || hooks::test_hosted(ws, true)),
        Step::new("provider tests", move || hooks::provider_tests(ws)),
        Step::new("test-dpdk", move || hooks::test_dpdk(ws)),
        Step::new("firmware tests", move || hooks::firmware_tests(ws)),
        Step::new("workspace tests", move || workspace_tests(ws)),
    ]);
    steps
}

/// Runs every step; the error names the step that failed.
pub fn run(ws: &Workspace, fuzz_secs: u64) -> Result {
    lean_builds();
    let steps = steps(ws, fuzz_secs);
    let started = Instant::now();
    let mut timings = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        let last = i + 1 == steps.len();
        if last {
            println!(
                "==> {} (earlier steps: {})",
                step.name,
                summary(&timings, started.elapsed())
            );
        } else {
            println!("==> {}", step.name);
        }
        let step_started = Instant::now();
        (step.run)().map_err(|e| {
            format!(
                "step `{}` failed after {}: {e}",
                step.name,
                secs(step_started.elapsed())
            )
        })?;
        if !last {
            println!("==> {} ok ({})", step.name, secs(step_started.elapsed()));
        }
        timings.push((step.name.as_str(), step_started.elapsed()));
    }
    Ok(())
}

/// Every build of the run (cargo's children included) without incremental caches,
/// unless the caller chose otherwise: the run builds the workspace several ways once
/// each, the caches would be about a third of the disk it uses, and CI's disk is small.
fn lean_builds() {
    if std::env::var_os("CARGO_INCREMENTAL").is_none() {
        // SAFETY: called first thing in `run`, while xtask has one thread and nothing
        // else reads the environment.
        unsafe { std::env::set_var("CARGO_INCREMENTAL", "0") };
    }
}

/// `cargo build` of the `no_std` crates for a bare-metal target.
fn build_no_std(ws: &Workspace, target: &str) -> Result {
    let mut build = ws.cargo(["build"]);
    for krate in NO_STD_CRATES {
        build.args(["-p", krate]);
    }
    cmd::run(build.args(["--target", target]))
}

/// The core as the DPU image builds it, without its `rma` and `atomic` features (the
/// workspace's own steps build it with both): clippy, its unit tests (the refusals of
/// getinfo, posts, registrations and peers' requests), and the bare-metal build.
fn core_without_features(ws: &Workspace) -> Result {
    let p = ["-p", "ofi-nostd", "--no-default-features"];
    cmd::run(
        ws.cargo(["clippy"])
            .args(p)
            .args(["--all-targets", "--", "-D", "warnings"]),
    )?;
    cmd::run(ws.cargo(["test"]).args(p).arg("--lib"))?;
    cmd::run(
        ws.cargo(["build"])
            .args(p)
            .args(["--target", crate::firmware::TARGET]),
    )
}

/// Unit, integration and doc tests of the whole workspace, with nextest when installed
/// (doctests first, since nextest does not run them).
fn workspace_tests(ws: &Workspace) -> Result {
    if prereq::has_nextest() {
        cmd::run(&mut ws.cargo(["test", "--workspace", "--doc"]))?;
        // The provider step already ran the libfabric tests against the release library.
        cmd::run(&mut ws.cargo([
            "nextest",
            "run",
            "--workspace",
            "--no-tests=warn",
            "-E",
            "not binary_id(nostd-provider::libfabric)",
        ]))
    } else {
        cmd::run(&mut ws.cargo(["test", "-p", "nostd-provider", "--lib"]))?;
        cmd::run(&mut ws.cargo(["test", "--workspace", "--exclude", "nostd-provider"]))
    }
}

/// `name 1.2s, name 3.4s; total 4.6s`.
fn summary(timings: &[(&str, Duration)], total: Duration) -> String {
    let parts: Vec<String> = timings
        .iter()
        .map(|(name, d)| format!("{name} {}", secs(*d)))
        .collect();
    format!("{}; total {}", parts.join(", "), secs(total))
}

/// A duration as seconds with one decimal.
fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workspace_tests_come_last_and_prerequisites_first() {
        let ws = Workspace::locate();
        let names: Vec<String> = steps(&ws, 1).into_iter().map(|s| s.name).collect();
        assert_eq!(names.first().map(String::as_str), Some("prerequisites"));
        assert_eq!(names.last().map(String::as_str), Some("workspace tests"));
    }

    #[test]
    fn summary_formats_timings() {
        let t = [
            ("fmt", Duration::from_millis(300)),
            ("clippy", Duration::from_secs(12)),
        ];
        assert_eq!(
            summary(&t, Duration::from_secs(13)),
            "fmt 0.3s, clippy 12.0s; total 13.0s"
        );
    }
}
