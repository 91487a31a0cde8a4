//! Profile-guided builds: the benchmarked binaries and, on request, the provider.
//!
//! Why: the per-message path crosses many small functions whose rare branches (handshake,
//! loss recovery, RMA, errors) sit inline between the common ones, so its code does not
//! fit a 32 KiB L1I, and a ping-pong refetches it after every system call. A profile
//! of the real workload lets LLVM lay the hot blocks out together and move the rest
//! away. Measured with callgrind's cache simulation on the safe API's UDP round trip
//! (`crates/hosted/benches/api.rs`): 12,317 -> 9,423 instructions and 705 -> 258 I1
//! misses per round trip.
//!
//! How: the binary is built with `-Cprofile-generate` in `<target>/pgo/<name>/gen`, a
//! training workload runs it (the caller's: the same tool on the same data plane), the
//! raw profiles are merged with `llvm-profdata` (rustup's `llvm-tools`), and the binary
//! is built again with `-Cprofile-use` in `<target>/pgo/<name>/use`. Separate target
//! directories keep the ordinary release build's cache untouched. In `cargo xtask bench`,
//! `BENCH_PGO=0` turns it off (the plain release build is measured).
//!
//! A profile speaks only for what its training ran: code it never reached is laid out
//! (and may be optimised) as cold. So each training runs the workloads its binary is
//! used for, not only the ones a target names.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::cmd::{self, Result};
use crate::ws::Workspace;

/// False when `BENCH_PGO=0` asks for plain release builds.
pub fn enabled() -> bool {
    std::env::var_os("BENCH_PGO").is_none_or(|v| v != "0")
}

/// `llvm-profdata` of the active toolchain, installing rustup's `llvm-tools` if needed.
fn llvm_profdata() -> Result<PathBuf> {
    let find = || -> Result<PathBuf> {
        let sysroot = cmd::output(Command::new("rustc").args(["--print", "sysroot"]))?;
        let vv = cmd::output(Command::new("rustc").arg("-vV"))?;
        let host = vv
            .lines()
            .find_map(|l| l.strip_prefix("host: "))
            .ok_or("`rustc -vV` names no host")?;
        Ok(Path::new(sysroot.trim())
            .join("lib/rustlib")
            .join(host.trim())
            .join("bin/llvm-profdata"))
    };
    let path = find()?;
    if path.is_file() {
        return Ok(path);
    }
    crate::prereq::ensure_rustup_pieces(&[], &["llvm-tools"])?;
    let path = find()?;
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "no {} after `rustup component add llvm-tools`",
            path.display()
        ))
    }
}

/// `RUSTFLAGS` for a build: those of the environment (`existing`) with `extra` appended.
fn rustflags(existing: Option<String>, extra: &str) -> String {
    match existing {
        Some(f) if !f.trim().is_empty() => format!("{} {extra}", f.trim()),
        _ => extra.to_owned(),
    }
}

/// Builds `cargo build --release <args>` profile-guided under `<target>/pgo/<name>`:
/// instrumented, trained by `train` (given the instrumented build's target directory),
/// then optimised with the merged profile. Returns the optimised build's target
/// directory (its binaries are under `release/`).
pub fn build(
    ws: &Workspace,
    target: &Path,
    name: &str,
    args: &[&str],
    train: impl FnOnce(&Path) -> Result,
) -> Result<PathBuf> {
    let profdata = llvm_profdata()?;
    let root = target.join("pgo").join(name);
    let raw = root.join("raw");
    let _ = std::fs::remove_dir_all(&raw);
    std::fs::create_dir_all(&raw).map_err(|e| format!("cannot create {}: {e}", raw.display()))?;
    let (gen_dir, use_dir) = (root.join("gen"), root.join("use"));
    // `cargo build --release <args>` into `dir`, with `flag` added to RUSTFLAGS.
    let cargo = |dir: &Path, flag: String| {
        let mut c = ws.cargo(["build", "--release"]);
        c.args(args).env("CARGO_TARGET_DIR", dir).env(
            "RUSTFLAGS",
            rustflags(std::env::var("RUSTFLAGS").ok(), &flag),
        );
        cmd::run(&mut c)
    };
    println!("==> pgo {name}: instrumented build for profile-guided optimisation");
    cargo(&gen_dir, format!("-Cprofile-generate={}", raw.display()))?;
    println!("==> pgo {name}: training run");
    train(&gen_dir)?;
    let merged = root.join("merged.profdata");
    let _ = std::fs::remove_file(&merged);
    let mut merge = Command::new(&profdata);
    merge.arg("merge").arg("-o").arg(&merged).arg(&raw);
    cmd::run(&mut merge)?;
    println!("==> pgo {name}: optimised build with the profile");
    cargo(&use_dir, format!("-Cprofile-use={}", merged.display()))?;
    Ok(use_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_flags_join_the_environments() {
        assert_eq!(rustflags(None, "-Cprofile-use=p"), "-Cprofile-use=p");
        assert_eq!(rustflags(Some("  ".into()), "-Cx"), "-Cx");
        assert_eq!(
            rustflags(Some(" -Ctarget-cpu=native ".into()), "-Cprofile-generate=d"),
            "-Ctarget-cpu=native -Cprofile-generate=d"
        );
    }
}
