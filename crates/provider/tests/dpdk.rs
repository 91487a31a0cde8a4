//! The provider's `dpdk` data plane (the `dpdk` feature; run by `cargo xtask test-dpdk`):
//! Debian's `fi_pingpong -p nostd` (RDM, every size of `-S all`) between two processes
//! whose domains run on `net_memif`, selected with `FI_NOSTD_DATAPLANE=dpdk`,
//! `FI_NOSTD_EAL` and `FI_NOSTD_DPDK_VDEV`.
//!
//! The provider takes a domain's address from a kernel interface, so the test creates a
//! network namespace with a veth pair (`a` at .1, `b` at .2 of one /24) and runs both
//! processes in it (root only; skipped with a notice otherwise). The namespace is always
//! removed, the processes killed on failure.

#![cfg(feature = "dpdk")]

mod netns;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use netns::{Kill, VethPair, describe};

/// The name libfabric loads external providers by.
const LIB_NAME: &str = "libnostd-fi.so";

/// The longest the pair may run.
const LIMIT: Duration = Duration::from_secs(120);

fn scratch(what: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("nostd-dpdk-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Builds the provider library with the `dpdk` feature (same profile and target
/// directory as this test) and installs it as `libnostd-fi.so` in a scratch directory.
fn provider_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test executable lives in target/<profile>/deps");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build.args([
        "build",
        "--quiet",
        "-p",
        "nostd-provider",
        "--lib",
        "--features",
        "dpdk",
    ]);
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    assert!(
        build.status().expect("run cargo build").success(),
        "cargo build -p nostd-provider --features dpdk failed"
    );
    let dir = scratch("lib");
    std::fs::copy(profile_dir.join("libnostd_fi.so"), dir.join(LIB_NAME))
        .expect("copy the provider library");
    dir
}

#[test]
fn fi_pingpong_rdm_over_memif() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("fi_pingpong_rdm_over_memif: skipped, needs root for a network namespace");
        return;
    }
    let lib = provider_dir();
    let pid = std::process::id();
    let pair = VethPair::new("nostd-dpdk", 92);
    let (ns, a, b, ip_a) = (&pair.ns, &pair.a, &pair.b, &pair.ip_a);
    let dir = scratch("sock");
    let sock = dir.join("memif.sock");
    let sock = sock.to_str().expect("utf-8 path");
    let run = |iface: &str, role: &str, n: u32, server: Option<&str>| {
        let mut c = Command::new("ip");
        c.args([
            "netns",
            "exec",
            ns,
            "fi_pingpong",
            "-p",
            "nostd",
            "-e",
            "rdm",
        ])
        .args(["-S", "all", "-I", "5"])
        .args(server)
        .env("FI_PROVIDER_PATH", &lib)
        .env("FI_PROVIDER", "nostd")
        .env("FI_NOSTD_DATAPLANE", "dpdk")
        .env("FI_NOSTD_IFACE", iface)
        .env(
            "FI_NOSTD_EAL",
            format!(
                "--no-huge --no-pci --no-shconf --no-telemetry -m 256 \
                     --file-prefix nostd-dpdk-{pid}-{role} --log-level lib.eal:warning"
            ),
        )
        .env(
            "FI_NOSTD_DPDK_VDEV",
            format!("net_memif{n},role={role},id=0,socket={sock},socket-abstract=no"),
        )
        .env_remove("FI_NOSTD_LOSS")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        Kill(Some(c.spawn().expect("start fi_pingpong (libfabric-bin)")))
    };
    let deadline = Instant::now() + LIMIT;
    let server = run(a, "server", 0, None);
    // fi_pingpong's client retries its control connection only briefly.
    std::thread::sleep(Duration::from_millis(500));
    let client = run(b, "client", 1, Some(ip_a)).wait(deadline);
    let server = server.wait(deadline);
    assert!(client.status.success(), "client: {}", describe(&client));
    assert!(server.status.success(), "server: {}", describe(&server));
    let out = String::from_utf8_lossy(&client.stdout);
    let rows: Vec<&str> = out.lines().skip(1).collect();
    assert!(
        rows.iter().any(|r| r.starts_with("4m ")),
        "no 4 MiB row:\n{out}"
    );
    for r in &rows {
        assert!(r.split_whitespace().nth(2) == Some("=5"), "row {r:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
