//! `cargo xtask demo`: the main job. Builds `ofi-pingpong` (release), runs a server and
//! a client of it over UDP on 127.0.0.1 (no privilege, nothing to configure), pinned to
//! different CPUs when the machine has two or more, and prints a latency and bandwidth
//! table of RDM messages from 64 B to 1 MiB, one row per size as soon as it is measured.

use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::cmd::{self, Result};
use crate::ws::Workspace;

/// The sizes of the table.
const SIZES: [usize; 8] = [
    64,
    256,
    1 << 10,
    4 << 10,
    16 << 10,
    64 << 10,
    256 << 10,
    1 << 20,
];

/// The longest one measurement (a server and a client) may take.
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// One measurement's result, as `ofi-pingpong` printed it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Measured {
    mb_per_sec: f64,
    usec_per_xfer: f64,
}

/// Builds the tool, measures every size, prints the table.
pub fn run(ws: &Workspace) -> Result {
    println!("Building ofi-pingpong (release)...");
    cmd::run(&mut ws.cargo([
        "build",
        "--release",
        "-p",
        "hosted",
        "--bin",
        "ofi-pingpong",
    ]))?;
    let bin = target_dir(ws)?.join("release").join("ofi-pingpong");
    if !bin.is_file() {
        return Err(format!("{} was not built", bin.display()));
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pin = cpus >= 2;
    println!();
    println!(
        "ofi-nostd: RDM messages over UDP on 127.0.0.1 (ofi-pingpong, manual progress, busy-polling)"
    );
    println!(
        "server and client {}",
        if pin {
            "pinned to CPUs 0 and 1".to_owned()
        } else {
            format!("unpinned ({cpus} CPU)")
        }
    );
    println!("latency: half the round trip of a ping-pong (fi_pingpong's usec/xfer);");
    println!("bandwidth: one-way stream, 64 messages in flight, timed to the final ack.");
    println!();
    println!(
        "{:>8}  {:>14}  {:>16}",
        "size", "latency (us)", "bandwidth (MB/s)"
    );
    let status = std::io::stderr().is_terminal();
    let started = Instant::now();
    for (i, &size) in SIZES.iter().enumerate() {
        let label = human(size);
        let note = |what: &str| {
            if status {
                eprint!(
                    "\r  [{}/{}] {label}: {what}...        \r",
                    i + 1,
                    SIZES.len()
                );
                let _ = std::io::stderr().flush();
            }
        };
        note("latency");
        let lat = measure(&bin, "pingpong", size, pingpong_iterations(size), pin)?;
        note("bandwidth");
        let bw = measure(&bin, "bandwidth", size, stream_messages(size), pin)?;
        if status {
            eprint!("\r{:60}\r", "");
        }
        println!(
            "{label:>8}  {:>14.2}  {:>16.1}",
            lat.usec_per_xfer, bw.mb_per_sec
        );
        let _ = std::io::stdout().flush();
    }
    println!();
    println!(
        "measured in {:.1} s; run one yourself (server first, then the client):",
        started.elapsed().as_secs_f64()
    );
    let b = bin.display();
    println!("  {b} -e rdm -S 64 -I 10000");
    println!("  {b} -e rdm -S 64 -I 10000 127.0.0.1");
    println!("  (`{b} --help`: tagged ops, DGRAM, bandwidth and rate modes, loss, pcap)");
    if ws.has_ofi_info() {
        println!(
            "The stack's capabilities, as fi_info lists them: cargo run -p hosted --bin ofi-info"
        );
    }
    Ok(())
}

/// Ping-pong iterations: about 16 MiB each way, 20..=10000.
fn pingpong_iterations(size: usize) -> usize {
    ((16 << 20) / size).clamp(20, 10_000)
}

/// Messages of a bandwidth stream: about 64 MiB, 64..=20000.
fn stream_messages(size: usize) -> usize {
    ((64 << 20) / size).clamp(64, 20_000)
}

/// 64 B, 4 KiB, 1 MiB.
fn human(size: usize) -> String {
    match size {
        s if s >= 1 << 20 && s % (1 << 20) == 0 => format!("{} MiB", s >> 20),
        s if s >= 1 << 10 && s % (1 << 10) == 0 => format!("{} KiB", s >> 10),
        s => format!("{s} B"),
    }
}

/// The build's target directory, as cargo resolves it (`CARGO_TARGET_DIR`, config).
fn target_dir(ws: &Workspace) -> Result<PathBuf> {
    let out = cmd::output(&mut ws.cargo(["metadata", "--format-version", "1", "--no-deps"]))?;
    let v: serde_json::Value =
        serde_json::from_str(&out).map_err(|e| format!("cargo metadata: {e}"))?;
    v.get("target_directory")
        .and_then(|t| t.as_str())
        .map(PathBuf::from)
        .ok_or_else(|| "cargo metadata: no target_directory".to_owned())
}

/// A child process that is killed and reaped when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
        }
        let _ = self.0.wait();
    }
}

/// Runs a server and a client of `bin` in `mode` for one size: the client's row.
fn measure(bin: &Path, mode: &str, size: usize, iterations: usize, pin: bool) -> Result<Measured> {
    let deadline = Instant::now() + RUN_LIMIT;
    let size_s = size.to_string();
    let iter_s = iterations.to_string();
    let common = ["-e", "rdm", "--mode", mode, "-S", &size_s, "-I", &iter_s];
    let mut server = Command::new(bin);
    server.args(["-B", "0"]).args(common);
    if pin {
        server.args(["--cpu", "0"]);
    }
    let mut server = Killed(
        server
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("could not start {}: {e}", bin.display()))?,
    );
    let lines = lines_of(server.0.stderr.take());
    let port = loop {
        let line = lines
            .recv_timeout(Duration::from_secs(10))
            .map_err(|_| "the ofi-pingpong server did not start".to_owned())?;
        if let Some(addr) = line.strip_prefix("ofi-pingpong: server listening on ") {
            break addr.rsplit(':').next().unwrap_or_default().to_owned();
        }
        if line.contains("error") {
            return Err(format!("ofi-pingpong server: {line}"));
        }
    };
    let mut client = Command::new(bin);
    client.args(["-P", &port]).args(common);
    if pin {
        client.args(["--cpu", "1"]);
    }
    client.arg("127.0.0.1");
    let shown = cmd::display(&client);
    let mut client = Killed(
        client
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("could not start `{shown}`: {e}"))?,
    );
    let out = lines_of(client.0.stdout.take());
    let err = lines_of(client.0.stderr.take());
    let status = loop {
        if let Some(s) = client.0.try_wait().map_err(|e| e.to_string())? {
            break s;
        }
        if Instant::now() >= deadline {
            return Err(format!("`{shown}` took longer than {RUN_LIMIT:?}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let drain = |rx: &mpsc::Receiver<String>| -> Vec<String> {
        std::iter::from_fn(|| rx.recv_timeout(Duration::from_secs(2)).ok()).collect()
    };
    let (out, err) = (drain(&out), drain(&err));
    if !status.success() {
        return Err(format!(
            "`{shown}` failed ({status}): {}",
            err.last().map_or("", String::as_str)
        ));
    }
    // The server prints its own row and exits after the client's goodbye.
    while Instant::now() < deadline {
        if server.0.try_wait().map_err(|e| e.to_string())?.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    parse_row(out.get(1).map_or("", String::as_str))
        .ok_or_else(|| format!("`{shown}` printed no result row: {out:?}"))
}

/// The lines a pipe delivers, read on a thread so a chatty child never blocks.
fn lines_of<R: Read + Send + 'static>(pipe: Option<R>) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    if let Some(pipe) = pipe {
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(|l| l.ok()) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    rx
}

/// MB/sec and usec/xfer of an `fi_pingpong` result row
/// (`bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec`).
fn parse_row(line: &str) -> Option<Measured> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() != 8 || !f[2].starts_with('=') {
        return None;
    }
    Some(Measured {
        mb_per_sec: f[5].parse().ok()?,
        usec_per_xfer: f[6].parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fi_pingpong_rows() {
        let row = "64      1k      =1k      125k        0.08s      1.55      41.25       0.02";
        assert_eq!(
            parse_row(row),
            Some(Measured {
                mb_per_sec: 1.55,
                usec_per_xfer: 41.25
            })
        );
        assert_eq!(
            parse_row("64      10      +1       1.2k        0.00s      0.55      13.00       0.08"),
            None,
            "a row with losses is not a measurement"
        );
        assert_eq!(parse_row("bytes   #sent"), None);
    }

    #[test]
    fn sizes_and_counts() {
        assert_eq!(human(64), "64 B");
        assert_eq!(human(16 << 10), "16 KiB");
        assert_eq!(human(1 << 20), "1 MiB");
        assert_eq!(pingpong_iterations(64), 10_000);
        assert_eq!(pingpong_iterations(1 << 20), 20);
        assert_eq!(stream_messages(1 << 20), 64);
    }
}
