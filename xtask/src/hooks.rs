//! Workflows that later milestones fill in: the device test suites, the provider and the
//! firmware image. (The benchmarks moved to `bench.rs`.)
//!
//! Test hooks succeed with "nothing to run yet" only when there is genuinely nothing to
//! run; once tests exist they run them.

use crate::cmd::{self, Result};
use crate::ws::{PROVIDER_DIR, Workspace};

/// `cargo xtask test-hosted`: integration tests across processes on TAP devices and
/// veth pairs in network namespaces (needs root once there are tests).
pub fn test_hosted(ws: &Workspace) -> Result {
    if ws.hosted_tests().is_empty() {
        println!("test-hosted: nothing to run yet (tests/hosted has no tests)");
        return Ok(());
    }
    cmd::run(&mut ws.cargo(["test", "-p", "hosted-tests", "--tests"]))
}

/// `cargo xtask test-dpdk`: the DPDK data plane on virtual devices (`net_tap`,
/// `net_memif`, `net_af_packet`) with `--no-huge`.
pub fn test_dpdk(ws: &Workspace) -> Result {
    if ws.dpdk_tests().is_empty() {
        println!("test-dpdk: nothing to run yet (crates/dp-dpdk has no tests)");
        return Ok(());
    }
    cmd::run(&mut ws.cargo(["test", "-p", "dp-dpdk", "--features", "dpdk", "--tests"]))
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
pub fn provider(ws: &Workspace) -> Result {
    crate::provider::run(ws)
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
