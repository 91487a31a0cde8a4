//! The workspace xtask works on, and what is (not yet) in it.

use std::path::{Path, PathBuf};

use crate::cmd;

/// The cross targets the `no_std` crates must always build for.
pub const NO_STD_TARGETS: [&str; 2] = ["aarch64-unknown-none", "thumbv7em-none-eabihf"];

/// The crates that must stay `no_std` and build for [`NO_STD_TARGETS`].
pub const NO_STD_CRATES: [&str; 2] = ["wire", "ofi-nostd"];

/// The fuzz crate (cargo-fuzz layout, excluded from the workspace).
pub const FUZZ_DIR: &str = "crates/wire/fuzz";

/// Where the C ABI provider crate will live (the provider issue may rename it here).
pub const PROVIDER_DIR: &str = "crates/provider";

/// The workspace root and questions about its contents.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
}

impl Workspace {
    /// The workspace this xtask was built from: the parent of the xtask crate.
    pub fn locate() -> Self {
        let xtask_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
        let root = xtask_dir.parent().unwrap_or(xtask_dir).to_path_buf();
        Self { root }
    }

    /// A path relative to the workspace root.
    pub fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    /// A `cargo` command that runs in the workspace root.
    pub fn cargo<I, S>(&self, args: I) -> std::process::Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let mut c = cmd::cargo(args);
        c.current_dir(&self.root);
        c
    }

    /// True once the fuzz crate exists.
    pub fn has_fuzz_crate(&self) -> bool {
        self.path(FUZZ_DIR).join("Cargo.toml").is_file()
    }

    /// The integration test files of `tests/hosted` (run by `test-hosted`).
    pub fn hosted_tests(&self) -> Vec<PathBuf> {
        cmd::files_with_suffix(&self.path("tests/hosted/tests"), ".rs")
    }

    /// The DPDK integration test files of `crates/dp-dpdk` (run by `test-dpdk`).
    pub fn dpdk_tests(&self) -> Vec<PathBuf> {
        cmd::files_with_suffix(&self.path("crates/dp-dpdk/tests"), ".rs")
    }

    /// True once the C ABI provider crate exists.
    pub fn has_provider(&self) -> bool {
        self.path(PROVIDER_DIR).join("Cargo.toml").is_file()
    }

    /// True once the firmware crate has a bootable image (a binary target).
    pub fn has_firmware_image(&self) -> bool {
        self.path("firmware/src/main.rs").is_file() || self.path("firmware/src/bin").is_dir()
    }

    /// True once the `hosted` crate has the `ofi-info` tool.
    pub fn has_ofi_info(&self) -> bool {
        let bin = self.path("crates/hosted/src/bin");
        bin.join("ofi-info.rs").is_file() || bin.join("ofi-info/main.rs").is_file() || {
            let manifest = std::fs::read_to_string(self.path("crates/hosted/Cargo.toml"));
            manifest.is_ok_and(|m| m.contains("name = \"ofi-info\""))
        }
    }
}
