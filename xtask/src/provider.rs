//! `cargo xtask provider`: the C ABI provider as libfabric loads it, and its tests.
//!
//! libfabric only loads external providers named `lib<name>-fi.so` from the
//! directories of `FI_PROVIDER_PATH`, while cargo names the cdylib after the crate's
//! `[lib]` (`libnostd_fi.so`); so the release build is copied to
//! `target/provider/libnostd-fi.so`, and that directory is what to put in
//! `FI_PROVIDER_PATH`.

use std::path::PathBuf;
use std::process::Command;

use crate::cmd::{self, Result};
use crate::ws::{PROVIDER_DIR, Workspace};

/// The provider's cargo package.
const PACKAGE: &str = "nostd-provider";
/// What cargo builds.
const BUILT_NAME: &str = "libnostd_fi.so";
/// What libfabric loads.
const LIB_NAME: &str = "libnostd-fi.so";

/// Cargo's target directory: `$CARGO_TARGET_DIR` (relative to the workspace) or
/// `target`.
fn target_dir(ws: &Workspace) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => ws.path(&dir.to_string_lossy()),
        None => ws.path("target"),
    }
}

/// Builds the provider in release and installs it as `target/provider/libnostd-fi.so`;
/// returns that directory.
pub fn build(ws: &Workspace) -> Result<PathBuf> {
    if !ws.has_provider() {
        return Err(format!("no provider crate at {PROVIDER_DIR}"));
    }
    cmd::run(&mut ws.cargo(["build", "--release", "-p", PACKAGE, "--lib"]))?;
    let target = target_dir(ws);
    install(&target.join("release"), &target.join("provider"))
}

/// Builds the provider profile-guided (see [`crate::pgo`]): instrumented, trained by
/// `fi_pingpong -p nostd` runs over loopback, optimised with the profile; installs it
/// as `target/provider/libnostd-fi.so` and returns that directory.
pub fn build_pgo(ws: &Workspace) -> Result<PathBuf> {
    if !ws.has_provider() {
        return Err(format!("no provider crate at {PROVIDER_DIR}"));
    }
    if !cmd::on_path("fi_pingpong") {
        return Err("training needs fi_pingpong (Debian: libfabric-bin)".into());
    }
    let target = target_dir(ws);
    let args = ["-p", PACKAGE, "--lib"];
    let used = crate::pgo::build(ws, &target, "provider", &args, |gen_dir| {
        let dir = install(&gen_dir.join("release"), &gen_dir.join("provider"))?;
        let logs = gen_dir.join("training");
        std::fs::create_dir_all(&logs)
            .map_err(|e| format!("cannot create {}: {e}", logs.display()))?;
        crate::bench::train_provider(&dir, &logs)
    })?;
    install(&used.join("release"), &target.join("provider"))
}

/// Copies `<built>/libnostd_fi.so` to `<dir>/libnostd-fi.so`; returns `dir`.
fn install(built: &std::path::Path, dir: &std::path::Path) -> Result<PathBuf> {
    let built = built.join(BUILT_NAME);
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let lib = dir.join(LIB_NAME);
    // Write a new file and rename it over the old one: a process that has the old
    // library mapped keeps its copy intact.
    let tmp = dir.join(format!(".{LIB_NAME}.tmp"));
    std::fs::copy(&built, &tmp)
        .and_then(|_| std::fs::rename(&tmp, &lib))
        .map_err(|e| {
            format!(
                "cannot install {} as {}: {e}",
                built.display(),
                lib.display()
            )
        })?;
    Ok(dir.to_path_buf())
}

/// `cargo xtask provider [--pgo]`: builds and installs the provider (profile-guided with
/// `--pgo`), checks that the system libfabric loads it (when `fi_info` is installed),
/// and prints the directory for `FI_PROVIDER_PATH` as the last line.
pub fn run(ws: &Workspace, pgo: bool) -> Result {
    let dir = if pgo { build_pgo(ws)? } else { build(ws)? };
    if cmd::on_path("fi_info") {
        let mut check = Command::new("fi_info");
        check
            .args(["-p", "nostd", "-l"])
            .env("FI_PROVIDER_PATH", &dir)
            .env("FI_PROVIDER", "nostd");
        let listed = cmd::output(&mut check)?;
        if !listed.lines().any(|l| l.trim() == "nostd:") {
            return Err(format!(
                "the system libfabric did not load {} (fi_info -l lists no nostd provider)",
                dir.join(LIB_NAME).display()
            ));
        }
        println!(
            "    libfabric loads the provider: FI_PROVIDER_PATH={} FI_PROVIDER=nostd fi_info -p nostd",
            dir.display()
        );
    }
    // The libfabric 2.x the provider's ABI tests load.
    if let Some(w) = crate::wheels::ensure(&target_dir(ws))? {
        println!(
            "    libfabric 2.x for the tests: {}",
            w.libfabric2().display()
        );
    }
    println!("{}", dir.display());
    Ok(())
}

/// The name part the multi-host MPI jobs of `crates/provider/tests/libfabric.rs` share
/// (`open_mpi_across_two_hosts_over_udp`, `libfabric2_mpich5_across_two_hosts_...`):
/// `cargo xtask test-hosted` runs them ([`across_hosts`]), the provider step leaves
/// them out.
pub const ACROSS_HOSTS: &str = "across_two_hosts";

/// The provider step of `cargo xtask test`: the release library through the system
/// libfabric (`fi_info` listing and parameters, the C test program of
/// `crates/provider/tests/c`) and through the libfabric 2.x of the MPI wheels
/// ([`crate::wheels`]; its tests are skipped, with a line saying so, when the wheels
/// cannot be installed). The multi-host MPI jobs are left to `test-hosted`, which
/// `cargo xtask test` runs before this step (as root; they need root anyway).
pub fn test(ws: &Workspace) -> Result {
    let mut t = libfabric_tests(ws)?;
    cmd::run(t.args(["--skip", ACROSS_HOSTS]))
}

/// The multi-host MPI jobs (Open MPI 4.1 and MPICH 5 across two network namespaces,
/// over UDP and AF_PACKET; root): what they need installed (the provider step's Debian
/// packages, the release library, the wheels) and the test binary built, so the
/// returned command only runs them. `cargo xtask test-hosted` runs it.
pub fn across_hosts(ws: &Workspace) -> Result<Command> {
    let packages: Vec<_> = crate::prereq::DEBIAN_PACKAGES
        .iter()
        .copied()
        .filter(|p| p.needed_by.starts_with("provider"))
        .collect();
    crate::prereq::ensure_debian_packages(
        &crate::prereq::missing_packages(ws, &packages),
        cmd::is_root() && cmd::on_path("apt-get"),
    )?;
    cmd::run(&mut ws.cargo(["test", "-p", PACKAGE, "--test", "libfabric", "--no-run"]))?;
    let mut t = libfabric_tests(ws)?;
    t.arg(ACROSS_HOSTS);
    Ok(t)
}

/// `cargo test` of the provider's `libfabric` tests against the release library, with
/// the wheels when they install (else `-- --skip libfabric2_`); test arguments follow
/// the `--` it ends with.
fn libfabric_tests(ws: &Workspace) -> Result<Command> {
    let dir = build(ws)?;
    let mut t = ws.cargo(["test", "-p", PACKAGE, "--test", "libfabric"]);
    t.env("NOSTD_PROVIDER_DIR", &dir).arg("--");
    match crate::wheels::ensure(&target_dir(ws))? {
        Some(w) => {
            t.env("NOSTD_MPI_WHEELS", &w.dir);
        }
        None => {
            t.args(["--skip", "libfabric2_"]);
        }
    }
    Ok(t)
}
