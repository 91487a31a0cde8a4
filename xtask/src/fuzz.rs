//! Running the cargo-fuzz targets of the wire crate (`cargo xtask fuzz`, and the smoke
//! step of `cargo xtask test`).
//!
//! Seeds are committed under `crates/wire/fuzz/seeds/<target>/`; libFuzzer reads them
//! together with the git-ignored scratch corpus `crates/wire/fuzz/corpus/<target>/` and
//! writes what it discovers into the latter. Targets run without a sanitizer (`-s none`),
//! which cargo-fuzz builds with stable `-C` flags only; a nightly is still preferred.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::cmd::{self, Result};
use crate::prereq;
use crate::ws::{FUZZ_DIR, Workspace};

/// Which compiler builds the fuzz targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Toolchain {
    /// `cargo +nightly fuzz ...`.
    Nightly,
    /// `RUSTC_BOOTSTRAP=1 cargo fuzz ...` on the active (stable) toolchain.
    StableBootstrap,
}

impl Toolchain {
    /// `XTASK_FUZZ_TOOLCHAIN` (`nightly` or `stable`) if set; otherwise a nightly if one
    /// is installed or can be installed (minimal profile), else stable.
    pub fn choose() -> Result<Self> {
        match std::env::var("XTASK_FUZZ_TOOLCHAIN").as_deref() {
            Ok("nightly") => Ok(Toolchain::Nightly),
            Ok("stable") => Ok(Toolchain::StableBootstrap),
            Ok(other) => Err(format!(
                "XTASK_FUZZ_TOOLCHAIN is `{other}`; use `nightly` or `stable`"
            )),
            Err(_) => Ok(Self::detect()),
        }
    }

    /// A nightly if one is installed or can be installed (minimal profile), else stable.
    fn detect() -> Self {
        if has_nightly() {
            return Toolchain::Nightly;
        }
        let mut install = Command::new("rustup");
        install.args(["toolchain", "install", "nightly", "--profile", "minimal"]);
        match cmd::run(&mut install) {
            Ok(()) => Toolchain::Nightly,
            Err(e) => {
                println!("    {e}; building the fuzz targets with stable and RUSTC_BOOTSTRAP=1");
                Toolchain::StableBootstrap
            }
        }
    }

    /// A `cargo fuzz <args>` command on this toolchain, run in the fuzz crate.
    fn cargo_fuzz(self, ws: &Workspace, args: &[&str]) -> Command {
        let mut c = match self {
            Toolchain::Nightly => cmd::cargo(["+nightly", "fuzz"]),
            Toolchain::StableBootstrap => {
                let mut c = cmd::cargo(["fuzz"]);
                c.env("RUSTC_BOOTSTRAP", "1");
                c
            }
        };
        c.args(args).current_dir(ws.path(FUZZ_DIR));
        c
    }
}

/// True when `rustup toolchain list` has a nightly.
fn has_nightly() -> bool {
    let mut list = Command::new("rustup");
    list.args(["toolchain", "list"]);
    cmd::output(&mut list).is_ok_and(|out| out.lines().any(|l| l.starts_with("nightly")))
}

/// Runs `targets` (all targets when empty) for `secs` seconds each.
pub fn run(ws: &Workspace, secs: u64, targets: &[String]) -> Result {
    if !ws.has_fuzz_crate() {
        println!("    skipped: no fuzz crate ({FUZZ_DIR}/Cargo.toml does not exist yet)");
        return Ok(());
    }
    if secs == 0 {
        println!("    skipped: fuzz time is 0 seconds");
        return Ok(());
    }
    prereq::ensure_cargo_fuzz()?;
    let toolchain = Toolchain::choose()?;
    println!("    fuzz toolchain: {toolchain:?}");
    let chosen = select_targets(list_targets(ws, toolchain)?, targets)?;
    if chosen.is_empty() {
        println!("    skipped: the fuzz crate has no targets");
        return Ok(());
    }
    cmd::run(&mut toolchain.cargo_fuzz(ws, &["build", "-s", "none"]))?;
    for target in &chosen {
        run_target(ws, toolchain, target, secs)?;
    }
    Ok(())
}

/// The fuzz targets `cargo fuzz list` reports.
fn list_targets(ws: &Workspace, toolchain: Toolchain) -> Result<Vec<String>> {
    let out = cmd::output(&mut toolchain.cargo_fuzz(ws, &["list"]))?;
    Ok(out
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect())
}

/// The requested targets (all when none are requested); unknown names are an error.
fn select_targets(available: Vec<String>, requested: &[String]) -> Result<Vec<String>> {
    if requested.is_empty() {
        return Ok(available);
    }
    match requested.iter().find(|r| !available.contains(r)) {
        Some(unknown) => Err(format!(
            "no fuzz target `{unknown}`; targets: {}",
            available.join(" ")
        )),
        None => Ok(requested.to_vec()),
    }
}

/// Fuzzes one target for `secs` seconds from its scratch corpus and its seeds.
fn run_target(ws: &Workspace, toolchain: Toolchain, target: &str, secs: u64) -> Result {
    let fuzz_dir = ws.path(FUZZ_DIR);
    let corpus = fuzz_dir.join("corpus").join(target);
    std::fs::create_dir_all(&corpus)
        .map_err(|e| format!("cannot create {}: {e}", corpus.display()))?;
    let seeds = fuzz_dir.join("seeds").join(target);
    let max_time = format!("-max_total_time={secs}");
    let mut dirs = vec![path_arg(&corpus)];
    if seeds.is_dir() {
        dirs.push(path_arg(&seeds));
    }
    let mut args = vec!["run", target, "-s", "none"];
    args.extend(dirs.iter().map(String::as_str));
    args.extend(["--", max_time.as_str()]);
    let started = Instant::now();
    // libFuzzer reports every new input; keep that in a log and show its summary, or
    // its tail when the target fails.
    let log_dir = ws.path("target/fuzz-logs");
    std::fs::create_dir_all(&log_dir)
        .map_err(|e| format!("cannot create {}: {e}", log_dir.display()))?;
    let log_path = log_dir.join(format!("{target}.log"));
    let log = std::fs::File::create(&log_path)
        .map_err(|e| format!("cannot create {}: {e}", log_path.display()))?;
    let log2 = log
        .try_clone()
        .map_err(|e| format!("cannot reuse {}: {e}", log_path.display()))?;
    let mut command = toolchain.cargo_fuzz(ws, &args);
    command.stdout(log).stderr(log2);
    let result = cmd::run(&mut command);
    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    if let Err(e) = result {
        for line in &lines[lines.len().saturating_sub(60)..] {
            eprintln!("    | {line}");
        }
        return Err(format!(
            "fuzz target `{target}`: {e} (full log: {})",
            log_path.display()
        ));
    }
    let summary = lines
        .iter()
        .rev()
        .find(|l| l.starts_with("Done "))
        .copied()
        .unwrap_or("");
    println!(
        "    fuzz target {target} ok ({:.1}s) {summary}",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// A path as a command-line argument.
fn path_arg(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selecting_targets() {
        let all = || vec!["a".to_string(), "b".to_string()];
        assert_eq!(select_targets(all(), &[]).unwrap(), all());
        assert_eq!(select_targets(all(), &["b".into()]).unwrap(), ["b"]);
        assert!(select_targets(all(), &["c".into()]).is_err());
    }
}
