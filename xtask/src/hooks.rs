//! Workflows that later milestones fill in: the device test suites, the provider and the
//! firmware image. (The benchmarks moved to `bench.rs`.)
//!
//! Test hooks succeed with "nothing to run yet" only when there is genuinely nothing to
//! run; once tests exist they run them.

use crate::cmd::{self, Result};
use crate::ws::{PROVIDER_DIR, Workspace};

/// `cargo xtask test-hosted`: integration tests across processes on TAP devices joined
/// by a bridge and a veth pair in network namespaces, which it creates and always removes,
/// then the provider's multi-host MPI jobs (root; see [`crate::hosted`]).
pub fn test_hosted(ws: &Workspace, skip_if_not_root: bool) -> Result {
    crate::hosted::run(ws, skip_if_not_root)
}

/// `cargo xtask test-dpdk`: the DPDK data plane built against the system DPDK 22.11
/// (`--features dpdk` of dp-dpdk and hosted; Debian packages installed when missing),
/// checked with clippy and rustdoc, then its tests on virtual devices with `--no-huge`:
/// `net_ring` in one process, `net_memif` between two processes, `net_af_packet` on a
/// veth pair into a network namespace against kernel UDP (root; skipped with a notice
/// otherwise); then `ofi-pingpong --dataplane dpdk` (RDM msg and tagged, every size
/// with data checks) between two processes over memif and against a kernel-UDP
/// `ofi-pingpong` across a veth pair (root); then the provider's dpdk data plane under
/// `fi_pingpong` over memif (root, libfabric installed).
///
/// Everything builds in `<target>/dpdk`, so the binaries with DPDK never replace (nor
/// get replaced by) the workspace's default builds.
pub fn test_dpdk(ws: &Workspace) -> Result {
    if ws.dpdk_tests().is_empty() {
        println!("test-dpdk: nothing to run yet (crates/dp-dpdk has no tests)");
        return Ok(());
    }
    let dpdk_packages: Vec<_> = crate::prereq::DEBIAN_PACKAGES
        .iter()
        .copied()
        .filter(|p| p.needed_by.starts_with("test-dpdk"))
        .collect();
    crate::prereq::ensure_debian_packages(
        &crate::prereq::missing_packages(ws, &dpdk_packages),
        cmd::is_root() && cmd::on_path("apt-get"),
    )?;
    let target = dpdk_target_dir(ws);
    let cargo = |args: &[&str]| {
        let mut c = ws.cargo(args);
        c.env("CARGO_TARGET_DIR", &target);
        c
    };
    let both = [
        "-p",
        "dp-dpdk",
        "-p",
        "hosted",
        "--features",
        "dp-dpdk/dpdk,hosted/dpdk",
    ];
    cmd::run(
        cargo(&["clippy"])
            .args(both)
            .args(["--all-targets", "--", "-D", "warnings"]),
    )?;
    cmd::run(
        cargo(&["doc", "--no-deps"])
            .args(both)
            .env("RUSTDOCFLAGS", "-D warnings"),
    )?;
    cmd::run(&mut cargo(&[
        "test",
        "-p",
        "dp-dpdk",
        "--features",
        "dpdk",
        "--tests",
    ]))?;
    cmd::run(&mut cargo(&[
        "test",
        "-p",
        "hosted",
        "--features",
        "dpdk",
        "--test",
        "pingpong_dpdk",
    ]))?;
    // The provider's dpdk data plane under the system fi_pingpong (it needs libfabric's
    // headers and tools, which `cargo xtask test` installs for the provider step).
    if !ws.has_provider() {
        return Ok(());
    }
    if !std::path::Path::new("/usr/include/rdma/fabric.h").is_file() || !cmd::on_path("fi_pingpong")
    {
        println!("test-dpdk: provider dpdk test skipped (needs libfabric-dev and libfabric-bin)");
        return Ok(());
    }
    cmd::run(&mut cargo(&[
        "clippy",
        "-p",
        "nostd-provider",
        "--features",
        "dpdk",
        "--all-targets",
        "--",
        "-D",
        "warnings",
    ]))?;
    cmd::run(&mut cargo(&[
        "test",
        "-p",
        "nostd-provider",
        "--features",
        "dpdk",
        "--test",
        "dpdk",
    ]))
}

/// Where the DPDK builds go: `dpdk` under cargo's target directory.
pub fn dpdk_target_dir(ws: &Workspace) -> std::path::PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => ws.path(&dir.to_string_lossy()).join("dpdk"),
        None => ws.path("target/dpdk"),
    }
}

/// The provider step of `cargo xtask test`: system libfabric tools against our provider.
pub fn provider_tests(ws: &Workspace) -> Result {
    if !ws.has_provider() {
        println!("provider tests: nothing to run yet (no provider crate at {PROVIDER_DIR})");
        return Ok(());
    }
    crate::provider::test(ws)
}

/// The firmware step of `cargo xtask test`: boot the image under QEMU.
pub fn firmware_tests(ws: &Workspace) -> Result {
    if !ws.has_firmware_image() {
        println!("firmware tests: nothing to run yet (firmware has no image binary)");
        return Ok(());
    }
    crate::firmware::test(ws)
}

/// `cargo xtask provider`: build the C ABI provider in release and install it as
/// `target/provider/libnostd-fi.so` (see [`crate::provider`]).
pub fn provider(ws: &Workspace, pgo: bool) -> Result {
    crate::provider::run(ws, pgo)
}

/// `cargo xtask firmware [--run | --test]`: build the DPU image, report its sizes, and
/// with `--run` boot it under QEMU, with `--test` boot it and test it from the host (see
/// [`crate::firmware`]).
pub fn firmware(ws: &Workspace, run: bool, test: bool) -> Result {
    if test {
        crate::firmware::test(ws)
    } else {
        crate::firmware::run(ws, run)
    }
}
