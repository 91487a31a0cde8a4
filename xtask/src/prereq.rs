//! Installing what the workflows need when it is missing.
//!
//! Rust pieces (targets, components, cargo-fuzz) are installed for any user. Debian
//! packages are installed with `apt-get` when running as root; otherwise xtask stops and
//! says what to install. Each package is only required once the step that needs it has
//! something to run, so the list can name what later milestones use.

use std::process::Command;

use crate::cmd::{self, Result};
use crate::ws::{NO_STD_TARGETS, Workspace};

/// The rustup components `cargo xtask test` uses.
const COMPONENTS: [&str; 2] = ["rustfmt", "clippy"];

/// How to tell whether a Debian package's contents are present.
#[derive(Debug, Clone, Copy)]
pub enum Probe {
    /// An executable on `PATH`.
    Command(&'static str),
    /// A file at an absolute path.
    File(&'static str),
}

impl Probe {
    /// True when the probed command or file is present.
    pub fn present(self) -> bool {
        match self {
            Probe::Command(name) => cmd::on_path(name),
            Probe::File(path) => std::path::Path::new(path).exists(),
        }
    }
}

/// A Debian package a step needs, and when it needs it.
#[derive(Debug, Clone, Copy)]
pub struct DebianPackage {
    /// What to look for to decide whether the package is already there.
    pub probe: Probe,
    /// The Debian 12 package that provides it.
    pub package: &'static str,
    /// Which step needs it (shown to the user).
    pub needed_by: &'static str,
    /// Whether the workspace currently has anything that needs it.
    pub needed: fn(&Workspace) -> bool,
}

/// Every Debian package any step may need; later issues add theirs here.
pub const DEBIAN_PACKAGES: &[DebianPackage] = &[
    DebianPackage {
        probe: Probe::Command("c++"),
        package: "g++",
        needed_by: "fuzz (libFuzzer is C++)",
        needed: Workspace::has_fuzz_crate,
    },
    DebianPackage {
        probe: Probe::Command("ip"),
        package: "iproute2",
        needed_by: "test-hosted (veth pairs, network namespaces)",
        needed: |ws| !ws.hosted_tests().is_empty(),
    },
    DebianPackage {
        probe: Probe::File("/usr/include/dpdk/rte_ethdev.h"),
        package: "libdpdk-dev",
        needed_by: "test-dpdk",
        needed: |ws| !ws.dpdk_tests().is_empty(),
    },
    DebianPackage {
        probe: Probe::Command("pkg-config"),
        package: "pkg-config",
        needed_by: "test-dpdk (locates DPDK)",
        needed: |ws| !ws.dpdk_tests().is_empty(),
    },
    DebianPackage {
        probe: Probe::File("/usr/lib/llvm-14/lib/libclang.so"),
        package: "libclang-dev",
        needed_by: "test-dpdk (bindgen)",
        needed: |ws| !ws.dpdk_tests().is_empty(),
    },
    DebianPackage {
        probe: Probe::File("/usr/lib/llvm-14/lib/libclang.so"),
        package: "libclang-dev",
        needed_by: "provider (bindgen)",
        needed: Workspace::has_provider,
    },
    DebianPackage {
        probe: Probe::Command("cc"),
        package: "gcc",
        needed_by: "provider tests (the C test program)",
        needed: Workspace::has_provider,
    },
    DebianPackage {
        probe: Probe::Command("fi_info"),
        package: "libfabric-bin",
        needed_by: "provider tests",
        needed: Workspace::has_provider,
    },
    DebianPackage {
        probe: Probe::File("/usr/include/rdma/fabric.h"),
        package: "libfabric-dev",
        needed_by: "provider (bindgen headers, -lfabric)",
        needed: Workspace::has_provider,
    },
    DebianPackage {
        probe: Probe::Command("mpirun"),
        package: "openmpi-bin",
        needed_by: "provider tests (Open MPI over the provider)",
        needed: Workspace::has_provider,
    },
    DebianPackage {
        probe: Probe::Command("mpicc"),
        package: "libopenmpi-dev",
        needed_by: "provider tests (builds tests/mpi/mpi_test.c)",
        needed: Workspace::has_provider,
    },
    DebianPackage {
        probe: Probe::Command("iperf3"),
        package: "iperf3",
        needed_by: "bench (veth: the TCP stream beside ours)",
        needed: |_| true,
    },
    DebianPackage {
        probe: Probe::Command("qemu-system-aarch64"),
        package: "qemu-system-arm",
        needed_by: "firmware tests (boots the image on QEMU virt)",
        needed: Workspace::has_firmware_image,
    },
    DebianPackage {
        probe: Probe::Command("ip"),
        package: "iproute2",
        needed_by: "firmware tests (addresses the TAP device)",
        needed: Workspace::has_firmware_image,
    },
];

/// Everything `cargo xtask test` needs: Rust pieces, cargo-fuzz, Debian packages.
pub fn ensure_for_test(ws: &Workspace) -> Result {
    ensure_rustup_pieces(&NO_STD_TARGETS, &COMPONENTS)?;
    if ws.has_fuzz_crate() {
        ensure_cargo_fuzz()?;
    }
    let can_install = cmd::is_root() && cmd::on_path("apt-get");
    ensure_debian_packages(&missing_packages(ws, DEBIAN_PACKAGES), can_install)?;
    report_test_runner();
    Ok(())
}

/// Adds the rustup targets and components that are not installed yet.
pub fn ensure_rustup_pieces(targets: &[&str], components: &[&str]) -> Result {
    if !cmd::on_path("rustup") {
        return Err(format!(
            "rustup not found: install Rust with rustup (https://rustup.rs), or add targets {} and components {} by hand",
            targets.join(" "),
            components.join(" ")
        ));
    }
    let installed = cmd::output(Command::new("rustup").args(["target", "list", "--installed"]))?;
    let missing: Vec<&str> = targets
        .iter()
        .copied()
        .filter(|t| !installed.lines().any(|l| l.trim() == *t))
        .collect();
    if missing.is_empty() {
        println!("    rustup targets present: {}", targets.join(" "));
    } else {
        cmd::run(
            Command::new("rustup")
                .args(["target", "add"])
                .args(&missing),
        )?;
    }

    let installed = cmd::output(Command::new("rustup").args(["component", "list", "--installed"]))?;
    let missing: Vec<&str> = components
        .iter()
        .copied()
        .filter(|c| !installed.lines().any(|l| component_matches(l.trim(), c)))
        .collect();
    if missing.is_empty() {
        println!("    rustup components present: {}", components.join(" "));
        Ok(())
    } else {
        cmd::run(
            Command::new("rustup")
                .args(["component", "add"])
                .args(&missing),
        )
    }
}

/// True when a line of `rustup component list --installed` names `component`
/// (lines look like `clippy-x86_64-unknown-linux-gnu`).
fn component_matches(line: &str, component: &str) -> bool {
    line == component
        || line
            .strip_prefix(component)
            .is_some_and(|rest| rest.starts_with('-'))
}

/// Installs cargo-fuzz with `cargo install --locked` unless `cargo fuzz` already works.
pub fn ensure_cargo_fuzz() -> Result {
    if cmd::succeeds(&mut cmd::cargo(["fuzz", "--version"])) {
        println!("    cargo-fuzz present");
        return Ok(());
    }
    cmd::run(&mut cmd::cargo(["install", "cargo-fuzz", "--locked"]))
}

/// The packages of `list` the workspace needs now and whose probe finds nothing.
pub fn missing_packages(ws: &Workspace, list: &[DebianPackage]) -> Vec<DebianPackage> {
    list.iter()
        .copied()
        .filter(|p| (p.needed)(ws) && !p.probe.present())
        .collect()
}

/// Installs `missing` with apt-get when `can_install` (root with apt-get); otherwise
/// fails saying what to install.
pub fn ensure_debian_packages(missing: &[DebianPackage], can_install: bool) -> Result {
    if missing.is_empty() {
        println!("    Debian packages: nothing missing");
        return Ok(());
    }
    let names: Vec<&str> = missing.iter().map(|p| p.package).collect();
    let why: Vec<String> = missing
        .iter()
        .map(|p| format!("{} for {}", p.package, p.needed_by))
        .collect();
    println!("    missing Debian packages: {}", why.join(", "));
    if !can_install {
        return Err(format!(
            "missing Debian packages ({}); install them with `sudo apt-get install -y {}` or run xtask as root",
            why.join(", "),
            names.join(" ")
        ));
    }
    let apt = |args: &[&str]| {
        let mut c = Command::new("apt-get");
        c.env("DEBIAN_FRONTEND", "noninteractive").args(args);
        c
    };
    cmd::run(&mut apt(&["update"]))?;
    cmd::run(apt(&["install", "-y", "--no-install-recommends"]).args(&names))?;
    match missing.iter().find(|p| !p.probe.present()) {
        Some(p) => Err(format!(
            "installed {} but {:?} is still missing",
            p.package, p.probe
        )),
        None => Ok(()),
    }
}

/// True when `cargo nextest` is installed (it is used then, never installed).
pub fn has_nextest() -> bool {
    cmd::succeeds(&mut cmd::cargo(["nextest", "--version"]))
}

/// Says which test runner the last step will use.
fn report_test_runner() {
    if has_nextest() {
        println!("    test runner: cargo-nextest");
    } else {
        println!(
            "    test runner: cargo test (cargo-nextest not installed; it is not installed for you)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn component_lines_match_by_prefix() {
        assert!(component_matches(
            "clippy-x86_64-unknown-linux-gnu",
            "clippy"
        ));
        assert!(component_matches("rustfmt", "rustfmt"));
        assert!(!component_matches(
            "rust-docs-x86_64-unknown-linux-gnu",
            "rustfmt"
        ));
        assert!(!component_matches(
            "clippyish-x86_64-unknown-linux-gnu",
            "clippy"
        ));
    }

    #[test]
    fn only_needed_and_absent_packages_are_missing() {
        let ws = Workspace::locate();
        let list = [
            DebianPackage {
                probe: Probe::Command("definitely-not-a-command-xtask"),
                package: "absent-needed",
                needed_by: "a test",
                needed: |_| true,
            },
            DebianPackage {
                probe: Probe::Command("definitely-not-a-command-xtask"),
                package: "absent-unneeded",
                needed_by: "a test",
                needed: |_| false,
            },
            DebianPackage {
                probe: Probe::File("/"),
                package: "present-needed",
                needed_by: "a test",
                needed: |_| true,
            },
        ];
        let missing = missing_packages(&ws, &list);
        let names: Vec<&str> = missing.iter().map(|p| p.package).collect();
        assert_eq!(names, ["absent-needed"]);
        let err = ensure_debian_packages(&missing, false).unwrap_err();
        assert!(err.contains("apt-get install -y absent-needed"), "{err}");
        assert!(ensure_debian_packages(&[], false).is_ok());
    }
}
