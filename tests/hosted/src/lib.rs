//! Integration tests of ofi-nostd across separate processes on real Linux devices (TAP,
//! veth pairs in network namespaces), driven by `cargo xtask test-hosted`.
//!
//! The tests in `tests/` run an `ofi-pingpong` server and client as two processes over
//! one data plane each:
//!
//! * `udp.rs`: kernel UDP sockets on 127.0.0.1 (no privilege; runs everywhere).
//! * `tap.rs`: two TAP devices joined by a Linux bridge, one per process.
//! * `af_packet.rs`: AF_PACKET sockets on the two ends of a veth pair, each end in a
//!   network namespace of its own (each process runs under `ip netns exec`).
//!
//! `cargo xtask test-hosted` (root) creates the devices and namespaces, passes their names
//! and addresses in the environment variables below, runs `cargo test -p hosted-tests`
//! and removes everything it made. Without these variables (a plain `cargo test`, or not
//! root) the device tests print one line saying they were skipped and pass.
//!
//! | variable | meaning |
//! |---|---|
//! | [`ENV_TAP`] | the two TAP devices on the bridge, `NAME_A,NAME_B` |
//! | [`ENV_TAP_IPS`] | the addresses the processes use on them, `A.B.C.D/P,A.B.C.D/P` |
//! | [`ENV_NETNS`] | the two network namespaces, `NS_A,NS_B` |
//! | [`ENV_VETH`] | the veth ends, `NAME_A,NAME_B` (`NAME_A` in `NS_A`) |
//! | [`ENV_VETH_IPS`] | the addresses the processes use on them, `A.B.C.D/P,A.B.C.D/P` |
//! | [`ENV_PINGPONG`] | the `ofi-pingpong` binary (optional) |
//!
//! # The `ofi-pingpong` binary
//!
//! Cargo gives integration tests the path of their own package's binaries only
//! (`CARGO_BIN_EXE_*`), and `ofi-pingpong` belongs to the `hosted` package. xtask builds
//! it and passes its path in [`ENV_PINGPONG`]; without that variable the tests build it
//! themselves, once per test process, with `cargo build -p hosted --bin ofi-pingpong` (in
//! the profile the tests were built in) and take the path cargo reports.
//!
//! # Bounds and serialization
//!
//! Each process busy-polls a CPU, so server/client pairs run one at a time: a mutex within
//! a test process and a file lock across processes (the same lock file as the `hosted`
//! crate's own `ofi-pingpong` tests, so per-test runners such as nextest never overlap
//! pairs of either crate). Every pair is killed at [`RUN_LIMIT`]; a process is killed
//! whenever its handle is dropped, so a failing assertion leaves nothing running. The
//! UDP server binds an ephemeral port it reports; the Ethernet data planes use fixed
//! ports inside networks of their own, which no other test shares.

#![forbid(unsafe_code)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

pub use hosted;
use hosted::pingpong::{MAX_ALL_SIZE, all_sizes, header, size_str};

/// The TAP devices on the bridge: `NAME_A,NAME_B`.
pub const ENV_TAP: &str = "OFI_HOSTED_TAP";
/// The addresses the processes use on the TAP devices: `A.B.C.D/P,A.B.C.D/P`.
pub const ENV_TAP_IPS: &str = "OFI_HOSTED_TAP_IPS";
/// The network namespaces: `NS_A,NS_B`.
pub const ENV_NETNS: &str = "OFI_HOSTED_NETNS";
/// The veth ends: `NAME_A,NAME_B`, `NAME_A` in the first namespace.
pub const ENV_VETH: &str = "OFI_HOSTED_VETH";
/// The addresses the processes use on the veth ends: `A.B.C.D/P,A.B.C.D/P`.
pub const ENV_VETH_IPS: &str = "OFI_HOSTED_VETH_IPS";
/// The `ofi-pingpong` binary (optional; built by the tests when absent).
pub const ENV_PINGPONG: &str = "OFI_PINGPONG";

/// The longest one server/client pair may run before both are killed.
pub const RUN_LIMIT: Duration = Duration::from_secs(120);

/// The UDP port of the server on the Ethernet data planes (networks of their own).
pub const ETH_SERVER_PORT: &str = "47592";

/// The DGRAM maximum on loopback UDP: 8972 bytes of UDP payload minus the 32-byte header.
pub const DGRAM_MAX_UDP: usize = 8940;

/// The DGRAM maximum on a 1500-byte Ethernet link: 1500 - 28 (IPv4, UDP) - 32.
pub const DGRAM_MAX_ETH: usize = 1440;

/// Two values of a `A,B` environment variable, or `None` (with the skip notice printed)
/// when it is unset.
pub fn env_pair(test: &str, var: &str) -> Option<(String, String)> {
    match std::env::var(var) {
        Ok(v) => {
            let (a, b) = v
                .split_once(',')
                .unwrap_or_else(|| panic!("{var}={v:?}: expected two comma-separated values"));
            Some((a.to_owned(), b.to_owned()))
        }
        Err(_) => {
            println!(
                "{test}: skipped: {var} is not set (these devices exist only under `cargo xtask test-hosted`, as root)"
            );
            None
        }
    }
}

/// One pair at a time: a mutex within this process and a file lock across processes.
pub struct Serial {
    _file: std::fs::File,
    _guard: MutexGuard<'static, ()>,
}

static SERIAL: Mutex<()> = Mutex::new(());

/// Waits for the right to run one pair; `lock_dir` is the test's `CARGO_TARGET_TMPDIR`.
pub fn serial(lock_dir: &str) -> Serial {
    let guard = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let path = Path::new(lock_dir).join("ofi-pingpong-tests.lock");
    let file = std::fs::File::create(path).expect("lock file");
    // Released when the file is closed.
    file.lock().expect("lock");
    Serial {
        _file: file,
        _guard: guard,
    }
}

/// The `ofi-pingpong` binary: [`ENV_PINGPONG`], or built now (once per process).
pub fn pingpong_bin() -> &'static Path {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| match std::env::var_os(ENV_PINGPONG) {
        Some(p) => PathBuf::from(p),
        None => build_pingpong(),
    })
}

fn build_pingpong() -> PathBuf {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test>: build in the same profile.
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .and_then(Path::file_name)
        .and_then(|n| n.to_str())
        .unwrap_or("debug")
        .to_owned();
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "-p",
        "hosted",
        "--bin",
        "ofi-pingpong",
        "--message-format=json-render-diagnostics",
    ]);
    if profile != "debug" {
        cmd.args(["--profile", &profile]);
    }
    let out = cmd
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .expect("start cargo build");
    assert!(out.status.success(), "cargo build of ofi-pingpong failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    const KEY: &str = "\"executable\":\"";
    stdout
        .lines()
        .filter(|l| l.contains("\"name\":\"ofi-pingpong\""))
        .find_map(|l| {
            let at = l.find(KEY)? + KEY.len();
            let end = l[at..].find('"')?;
            Some(PathBuf::from(&l[at..at + end]))
        })
        .expect("cargo reported the ofi-pingpong executable")
}

/// A child process, killed (and reaped) when dropped unless it already exited.
pub struct Proc {
    child: Child,
    out: mpsc::Receiver<String>,
    err: mpsc::Receiver<String>,
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// What a finished process left.
#[derive(Debug)]
pub struct Outcome {
    /// Its exit status (killed at the deadline: a signal).
    pub status: ExitStatus,
    /// Everything it printed on stdout.
    pub stdout: String,
    /// Everything it printed on stderr.
    pub stderr: String,
}

impl Outcome {
    /// Exited 0.
    pub fn ok(&self) -> bool {
        self.status.success()
    }
}

/// Where and how one process of a pair runs.
#[derive(Debug, Clone, Default)]
pub struct Side {
    /// The network namespace to run in (`ip netns exec`), if any.
    pub netns: Option<String>,
    /// The data-plane options (`--dataplane ... --iface ... --ip ...`).
    pub plane: Vec<String>,
    /// Further options of this side only (`--seed`).
    pub extra: Vec<String>,
}

impl Side {
    /// A side on the given data plane options.
    pub fn new(plane: &[&str]) -> Self {
        Side {
            plane: plane.iter().map(|s| (*s).to_owned()).collect(),
            ..Side::default()
        }
    }

    /// The same side inside network namespace `ns`.
    pub fn in_netns(mut self, ns: &str) -> Self {
        self.netns = Some(ns.to_owned());
        self
    }

    /// The same side with further options.
    pub fn with(mut self, extra: &[&str]) -> Self {
        self.extra.extend(extra.iter().map(|s| (*s).to_owned()));
        self
    }
}

/// Starts `ofi-pingpong` with `args` as `side` says.
pub fn spawn(side: &Side, args: &[String]) -> Proc {
    let bin = pingpong_bin();
    let mut cmd = match &side.netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(bin);
            c
        }
        None => Command::new(bin),
    };
    let mut child = cmd
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start ofi-pingpong");
    // Pipes are drained by threads, line by line, so a chatty child never blocks.
    let pump = |r: Box<dyn Read + Send>| {
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(r).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        rx
    };
    let out = pump(Box::new(child.stdout.take().expect("stdout")));
    let err = pump(Box::new(child.stderr.take().expect("stderr")));
    Proc { child, out, err }
}

impl Proc {
    /// Waits for the process to exit (killing it at `deadline`) and collects its output.
    pub fn finish(mut self, deadline: Instant) -> Outcome {
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("try_wait") {
                break s;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                break self.child.wait().expect("wait");
            }
            thread::sleep(Duration::from_millis(5));
        };
        let collect = |rx: &mpsc::Receiver<String>| {
            let mut s = String::new();
            // The pipes close with the process; wait briefly for the last lines.
            while let Ok(line) = rx.recv_timeout(Duration::from_secs(2)) {
                s.push_str(&line);
                s.push('\n');
            }
            s
        };
        Outcome {
            status,
            stdout: collect(&self.out),
            stderr: collect(&self.err),
        }
    }
}

/// Runs a server on `server` and a client on `client`, both with `common` options, the
/// client against `server_ip` (the port the server reports); returns both outcomes. The
/// server gets `-B server_port`.
pub fn pair(
    server: &Side,
    client: &Side,
    server_ip: &str,
    server_port: &str,
    common: &[&str],
) -> (Outcome, Outcome) {
    let deadline = Instant::now() + RUN_LIMIT;
    let owned = |v: &[&str]| -> Vec<String> { v.iter().map(|s| (*s).to_owned()).collect() };
    let mut sargs = owned(&["-B", server_port]);
    sargs.extend(server.plane.iter().cloned());
    sargs.extend(owned(common));
    sargs.extend(server.extra.iter().cloned());
    let proc = spawn(server, &sargs);
    let mut early = String::new();
    let port = loop {
        let wait = deadline
            .saturating_duration_since(Instant::now())
            .min(Duration::from_secs(20));
        match proc.err.recv_timeout(wait) {
            Ok(line) => {
                if let Some(addr) = line.strip_prefix("ofi-pingpong: server listening on ") {
                    break addr.rsplit(':').next().unwrap_or_default().to_owned();
                }
                early.push_str(&line);
                early.push('\n');
            }
            Err(_) => {
                let out = proc.finish(Instant::now());
                panic!("the server did not start: {early}{out:?}");
            }
        }
    };
    let mut cargs = owned(&["-P", &port]);
    cargs.extend(client.plane.iter().cloned());
    cargs.extend(owned(common));
    cargs.extend(client.extra.iter().cloned());
    cargs.push(server_ip.to_owned());
    let client = spawn(client, &cargs).finish(deadline);
    let mut server = proc.finish(deadline);
    server.stderr.insert_str(0, &early);
    (server, client)
}

/// The result rows of a table: (size column, #sent, #ack column).
pub fn rows(out: &str) -> Vec<(String, String, String)> {
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some(header().as_str()), "header of:\n{out}");
    lines
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 8, "a row of 8 columns: {l:?}");
            (f[0].to_owned(), f[1].to_owned(), f[2].to_owned())
        })
        .collect()
}

/// Both exited 0 and printed one row per size in `sizes`, each with every message
/// answered (`=n`).
pub fn assert_clean(s: &Outcome, c: &Outcome, sizes: &[usize], n: &str) {
    assert!(c.ok(), "client failed: {c:?}\nserver: {s:?}");
    assert!(s.ok(), "server failed: {s:?}\nclient: {c:?}");
    for o in [s, c] {
        let r = rows(&o.stdout);
        let want: Vec<String> = sizes.iter().map(|&z| size_str(z as u64)).collect();
        let got: Vec<String> = r.iter().map(|x| x.0.clone()).collect();
        assert_eq!(got, want, "sizes in:\n{}", o.stdout);
        for (size, sent, ack) in r {
            assert_eq!(sent, n, "size {size}");
            assert_eq!(ack, format!("={n}"), "size {size}: {}", o.stdout);
        }
    }
}

/// Runs a DGRAM pair (`run`) and checks it: both exited 0 (so every message that arrived
/// passed the data check), both printed one row per size in `sizes`, the client sent `n`
/// at every size and got at least one reply at every size. DGRAM may lose messages: a
/// reply later than the tool's `DGRAM_WAIT` (50 ms) counts as lost, which a loaded
/// machine causes now and then; losses are printed, and a run in which some size lost
/// every round trip is repeated, up to three runs.
pub fn dgram_checked(run: impl Fn() -> (Outcome, Outcome), sizes: &[usize], n: &str) {
    let want: Vec<String> = sizes.iter().map(|&z| size_str(z as u64)).collect();
    let count: u64 = n.parse().expect("a count");
    for attempt in 1..=3 {
        let (s, c) = run();
        assert!(c.ok(), "client failed: {c:?}\nserver: {s:?}");
        assert!(s.ok(), "server failed: {s:?}\nclient: {c:?}");
        let got: Vec<String> = rows(&s.stdout).into_iter().map(|r| r.0).collect();
        assert_eq!(got, want, "server's sizes in:\n{}", s.stdout);
        let r = rows(&c.stdout);
        let got: Vec<String> = r.iter().map(|x| x.0.clone()).collect();
        assert_eq!(got, want, "client's sizes in:\n{}", c.stdout);
        let mut lost = 0;
        let mut all_lost = Vec::new();
        for (size, sent, ack) in &r {
            assert_eq!(sent, n, "size {size}");
            let l = match ack.split_at(1) {
                ("=", v) if v == n => 0,
                ("+", v) => v.parse::<u64>().expect("a count"),
                _ => panic!("size {size}: unexpected #ack {ack}:\n{}", c.stdout),
            };
            if l >= count {
                all_lost.push(size.clone());
            }
            lost += l;
        }
        if lost > 0 {
            println!(
                "run {attempt}: {lost} of {} DGRAM round trips lost (late or dropped)",
                count * sizes.len() as u64
            );
        }
        if all_lost.is_empty() {
            return;
        }
        println!("run {attempt}: every round trip lost at sizes {all_lost:?}");
    }
    panic!("three DGRAM runs each lost every round trip of some size");
}

/// `-S all` on RDM: 0, 1, 2, 3, 4, 6, ... 4 MiB.
pub fn rdm_sizes() -> Vec<usize> {
    all_sizes(MAX_ALL_SIZE)
}

/// `-S all` on DGRAM with largest message `max`: the same series, then `max` itself.
pub fn dgram_sizes(max: usize) -> Vec<usize> {
    let mut v = all_sizes(max);
    if v.last() != Some(&max) {
        v.push(max);
    }
    v
}

/// Timed iterations per size of the RDM runs (the suite runs in minutes).
pub const RDM_ITERS: &str = "2";
/// Timed iterations per size of the DGRAM runs.
pub const DGRAM_ITERS: &str = "3";

/// The RDM msg run over every size with the data check.
pub const RDM_MSG: &[&str] = &["-e", "rdm", "-S", "all", "-c", "-I", RDM_ITERS, "-W", "1"];
/// The RDM tagged run over every size with the data check.
pub const RDM_TAGGED: &[&str] = &[
    "-e", "rdm", "-m", "tagged", "-S", "all", "-c", "-I", RDM_ITERS, "-W", "1",
];
/// The DGRAM run over every size with the data check.
pub const DGRAM: &[&str] = &[
    "-e",
    "dgram",
    "-S",
    "all",
    "-c",
    "-I",
    DGRAM_ITERS,
    "-W",
    "1",
];

/// `args` plus `--loss rate`.
pub fn with_loss<'a>(args: &[&'a str], rate: &'a str) -> Vec<&'a str> {
    let mut v = args.to_vec();
    v.extend(["--loss", rate]);
    v
}
