//! Every workflow of ofi-nostd as one program: `cargo xtask <task>`.
//!
//! `cargo xtask demo` is the main job and `cargo xtask test` runs every check and test;
//! both install what they need when it is missing. No shell script is needed besides.

mod bench;
mod cmd;
mod demo;
mod firmware;
mod fuzz;
mod hooks;
mod hosted;
mod layout;
mod pgo;
mod prereq;
mod provider;
mod test;
mod wheels;
mod ws;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::ws::Workspace;

/// The workflows of ofi-nostd.
#[derive(Debug, Parser)]
#[command(name = "xtask", bin_name = "cargo xtask", version, about)]
struct Cli {
    /// The workflow to run.
    #[command(subcommand)]
    task: Task,
}

/// One workflow.
#[derive(Debug, Subcommand)]
enum Task {
    /// The main job: an RDM ping-pong between two processes over UDP on 127.0.0.1, with a
    /// latency and bandwidth table.
    Demo,
    /// Every check and test: prerequisites, fmt, clippy, doc, no_std builds, fuzz smoke,
    /// device test hooks, then all workspace tests.
    Test {
        /// Seconds each fuzz target runs in the smoke step (0 skips it).
        #[arg(
            long,
            value_name = "SECS",
            env = "XTASK_FUZZ_TIME",
            default_value_t = 10
        )]
        fuzz_time: u64,
    },
    /// Fuzz the wire crate's cargo-fuzz targets (all of them unless named).
    Fuzz {
        /// Seconds each target runs.
        #[arg(long, value_name = "SECS", default_value_t = 60)]
        time: u64,
        /// Targets to run (see `cargo fuzz list` in crates/wire/fuzz).
        targets: Vec<String>,
    },
    /// Integration tests across processes on TAP devices joined by a bridge and a veth
    /// pair in network namespaces, then MPI jobs across namespaces over the provider
    /// (root: it creates them and always removes them).
    TestHosted {
        /// When not root, print that the tests were skipped and succeed (otherwise not
        /// being root is an error).
        #[arg(long)]
        skip_if_not_root: bool,
    },
    /// DPDK data-plane tests on virtual devices.
    TestDpdk,
    /// Build the C ABI provider (release) as target/provider/libnostd-fi.so; prints that
    /// directory (for FI_PROVIDER_PATH) last.
    Provider {
        /// Build it profile-guided: instrumented, trained with `fi_pingpong -p nostd`
        /// (RDM msg and tagged, DGRAM; 64 B to 1 MiB), then optimised with the profile.
        #[arg(long)]
        pgo: bool,
    },
    /// Build the DPU firmware image (aarch64-unknown-none) and report its code size and
    /// static RAM; with --run, boot it under QEMU with virtio-net on a host TAP device.
    Firmware {
        /// Boot the image under qemu-system-aarch64 (root: it creates a TAP device) and
        /// show its decoded defmt log until Ctrl-C.
        #[arg(long, conflicts_with = "test")]
        run: bool,
        /// Boot the image and run the host's ping-pong test against it (the firmware
        /// step of `cargo xtask test`).
        #[arg(long)]
        test: bool,
    },
    /// The layout rules (the first check of `test`, no build): no import circles among
    /// the modules of the core and of the safe API, no production file of wire,
    /// ofi-nostd or the provider above 1,200 lines.
    Layout,
    /// Benchmarks, reported in target/bench/report.md: tag matching against queue length
    /// now; ping-pong latency and bandwidth once the data path exists.
    Bench {
        /// Short criterion runs (`--quick`): a smoke check, not numbers to quote.
        #[arg(long)]
        quick: bool,
        /// Only these sections (comma-separated: matching, engine, udp, memif, provider).
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let ws = Workspace::locate();
    let (name, result) = match &cli.task {
        Task::Demo => ("demo", demo::run(&ws)),
        Task::Test { fuzz_time } => ("test", test::run(&ws, *fuzz_time)),
        Task::Fuzz { time, targets } => ("fuzz", fuzz::run(&ws, *time, targets)),
        Task::TestHosted { skip_if_not_root } => {
            ("test-hosted", hooks::test_hosted(&ws, *skip_if_not_root))
        }
        Task::TestDpdk => ("test-dpdk", hooks::test_dpdk(&ws)),
        Task::Provider { pgo } => ("provider", hooks::provider(&ws, *pgo)),
        Task::Firmware { run, test } => ("firmware", hooks::firmware(&ws, *run, *test)),
        Task::Layout => ("layout", layout::check(&ws)),
        Task::Bench { quick, only } => ("bench", bench::run(&ws, *quick, only)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("cargo xtask {name}: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cli_is_consistent() {
        use clap::CommandFactory as _;
        Cli::command().debug_assert();
    }
}
