//! `ofi-pingpong` end to end: a server and a client process of the built binary on
//! 127.0.0.1 (the server on an ephemeral port it reports), for RDM msg, RDM tagged and
//! DGRAM over every size with the data check, with seeded loss, in bandwidth and rate
//! modes, with a pcap capture, and for the failures (refused client, absent server).
//!
//! Every run is bounded (the processes are killed at [`RUN_LIMIT`]) and the pairs run
//! one at a time: each process busy-polls a CPU.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use hosted::pingpong::{MAX_ALL_SIZE, all_sizes, header, size_str};

const BIN: &str = env!("CARGO_BIN_EXE_ofi-pingpong");

/// The longest one server/client pair may run before both are killed.
const RUN_LIMIT: Duration = Duration::from_secs(90);

/// One pair at a time: a mutex within this process, and a file lock across the
/// processes of runners that start one per test (nextest).
static SERIAL: Mutex<()> = Mutex::new(());

struct Serial {
    _file: std::fs::File,
    _guard: MutexGuard<'static, ()>,
}

fn serial() -> Serial {
    let guard = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("ofi-pingpong-tests.lock");
    let file = std::fs::File::create(path).expect("lock file");
    // Released when the file is closed.
    file.lock().expect("lock");
    Serial {
        _file: file,
        _guard: guard,
    }
}

/// A child process, killed (and reaped) when dropped unless it already exited.
struct Proc {
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
struct Outcome {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Outcome {
    fn ok(&self) -> bool {
        self.status.success()
    }
}

fn spawn(args: &[&str]) -> Proc {
    let mut child = Command::new(BIN)
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
    let out = pump(Box::new(child.stdout.take().unwrap()));
    let err = pump(Box::new(child.stderr.take().unwrap()));
    Proc { child, out, err }
}

impl Proc {
    /// Waits for the process to exit (killing it at `deadline`) and collects its output.
    fn finish(mut self, deadline: Instant) -> Outcome {
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                break self.child.wait().unwrap();
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

/// Starts a server (ephemeral port) with `server_args`, then a client with
/// `client_args` against it; returns both outcomes.
fn pair(server_args: &[&str], client_args: &[&str]) -> (Outcome, Outcome) {
    pair_with(server_args, client_args, |_| ())
}

/// [`pair`], running `before_client` with the server's port before the client starts.
fn pair_with(
    server_args: &[&str],
    client_args: &[&str],
    before_client: impl FnOnce(&str),
) -> (Outcome, Outcome) {
    let deadline = Instant::now() + RUN_LIMIT;
    let mut sargs = vec!["-B", "0"];
    sargs.extend_from_slice(server_args);
    let server = spawn(&sargs);
    let mut early = String::new();
    let port = loop {
        match server.err.recv_timeout(Duration::from_secs(10)) {
            Ok(line) => {
                if let Some(addr) = line.strip_prefix("ofi-pingpong: server listening on ") {
                    break addr.rsplit(':').next().unwrap().to_owned();
                }
                early.push_str(&line);
                early.push('\n');
            }
            Err(_) => {
                drop(server);
                panic!("the server did not start: {early}");
            }
        }
    };
    before_client(&port);
    let mut cargs = vec!["-P", port.as_str()];
    cargs.extend_from_slice(client_args);
    cargs.push("127.0.0.1");
    let client = spawn(&cargs).finish(deadline);
    let mut server = server.finish(deadline);
    server.stderr.insert_str(0, &early);
    (server, client)
}

/// The same options on both sides.
fn same(args: &[&str]) -> (Outcome, Outcome) {
    pair(args, args)
}

/// The result rows of a table: (size column, #sent, #ack column).
fn rows(out: &str) -> Vec<(String, String, String)> {
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
fn assert_clean(s: &Outcome, c: &Outcome, sizes: &[usize], n: &str) {
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

/// The DGRAM maximum on loopback: 8972 bytes of UDP payload minus our 32-byte header.
const DGRAM_MAX: usize = 8940;

fn rdm_all() -> Vec<usize> {
    all_sizes(MAX_ALL_SIZE)
}

fn dgram_all() -> Vec<usize> {
    let mut v = all_sizes(DGRAM_MAX);
    v.push(DGRAM_MAX);
    v
}

#[test]
fn rdm_msg_every_size_checked() {
    let _g = serial();
    let (s, c) = same(&["-e", "rdm", "-S", "all", "-c", "-I", "2", "-W", "1"]);
    assert_clean(&s, &c, &rdm_all(), "2");
    assert_eq!(rdm_all().last(), Some(&(4 << 20)));
}

#[test]
fn rdm_tagged_every_size_checked() {
    let _g = serial();
    let (s, c) = same(&[
        "-e", "rdm", "-m", "tagged", "-S", "all", "-c", "-I", "2", "-W", "1",
    ]);
    assert_clean(&s, &c, &rdm_all(), "2");
}

#[test]
fn dgram_every_size_checked() {
    let _g = serial();
    let (s, c) = same(&["-e", "dgram", "-S", "all", "-c", "-I", "3", "-W", "1"]);
    assert_clean(&s, &c, &dgram_all(), "3");
}

#[test]
fn rdm_msg_every_size_checked_with_loss() {
    let _g = serial();
    let (s, c) = pair(
        &[
            "-e", "rdm", "-S", "all", "-c", "-I", "2", "-W", "1", "--loss", "0.05", "--seed", "11",
        ],
        &[
            "-e", "rdm", "-S", "all", "-c", "-I", "2", "-W", "1", "--loss", "0.05", "--seed", "12",
        ],
    );
    assert_clean(&s, &c, &rdm_all(), "2");
}

#[test]
fn rdm_tagged_with_loss_in_every_mode() {
    let _g = serial();
    for mode in ["pingpong", "bandwidth", "rate"] {
        let common = [
            "-e", "rdm", "-m", "tagged", "--mode", mode, "-S", "1,8k,1m", "-c", "-I", "16", "-W",
            "2", "--window", "8", "--loss", "0.05",
        ];
        let mut a = common.to_vec();
        a.extend(["--seed", "21"]);
        let mut b = common.to_vec();
        b.extend(["--seed", "22"]);
        let (s, c) = pair(&a, &b);
        assert_clean(&s, &c, &[1, 8192, 1 << 20], "16");
    }
}

#[test]
fn dgram_loss_is_reported_not_waited_for() {
    let _g = serial();
    let t = Instant::now();
    let sizes = "64,4k,8940";
    let (s, c) = pair(
        &[
            "-e", "dgram", "-S", sizes, "-c", "-I", "40", "--loss", "0.05", "--seed", "3",
        ],
        &[
            "-e", "dgram", "-S", sizes, "-c", "-I", "40", "--loss", "0.05", "--seed", "4",
        ],
    );
    assert!(c.ok() && s.ok(), "client: {c:?}\nserver: {s:?}");
    let r = rows(&c.stdout);
    assert_eq!(r.len(), 3);
    let lost: u64 = r
        .iter()
        .map(|(_, sent, ack)| {
            assert_eq!(sent, "40");
            match ack.split_at(1) {
                ("=", _) => 0,
                ("+", n) => n.parse::<u64>().unwrap(),
                other => panic!("unexpected #ack {other:?}"),
            }
        })
        .sum();
    // 4 fault stages per round trip at 5%: about 18% lost; the seeds make it exact.
    assert!(
        lost > 0,
        "some round trips are lost at 5% loss: {}",
        c.stdout
    );
    assert!(
        c.stderr
            .contains(&format!("{lost} of 120 DGRAM round trips lost")),
        "a loss summary: {c:?}"
    );
    // Each loss costs one DGRAM_WAIT; nothing waits for the timeout.
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
}

#[test]
fn bandwidth_and_rate() {
    let _g = serial();
    let (s, c) = same(&[
        "-e",
        "rdm",
        "--mode",
        "bandwidth",
        "-S",
        "64,64k,1m",
        "-c",
        "-I",
        "50",
    ]);
    assert_clean(&s, &c, &[64, 65536, 1 << 20], "50");
    let (s, c) = same(&[
        "-e", "rdm", "--mode", "rate", "-S", "1,64,4k", "-c", "-I", "256", "--window", "32",
    ]);
    assert_clean(&s, &c, &[1, 64, 4096], "256");
    // DGRAM streams may overrun the receiver: whatever is lost is reported.
    let (s, c) = same(&[
        "-e",
        "dgram",
        "--mode",
        "bandwidth",
        "-S",
        "1k,8940",
        "-c",
        "-I",
        "500",
    ]);
    assert!(c.ok() && s.ok(), "client: {c:?}\nserver: {s:?}");
    assert_eq!(rows(&c.stdout).len(), 2);
    let (s, c) = same(&["-e", "dgram", "--mode", "rate", "-S", "8", "-I", "1000"]);
    assert!(c.ok() && s.ok(), "client: {c:?}\nserver: {s:?}");
}

/// `--contexts 2`: rate and bandwidth over a scalable endpoint on each side, one
/// thread per context pair, every byte checked (a message that reached the wrong
/// context fails its pattern); each row counts both pairs' messages. A client and
/// server with different counts both fail; ping-pong mode is refused.
#[test]
fn contexts_over_a_scalable_endpoint() {
    let _g = serial();
    for mode in ["rate", "bandwidth"] {
        let (s, c) = same(&[
            "-e",
            "rdm",
            "--mode",
            mode,
            "--contexts",
            "2",
            "-S",
            "1,64,4k,64k",
            "-c",
            "-I",
            "300",
            "--window",
            "16",
        ]);
        assert!(c.ok() && s.ok(), "{mode}: client {c:?}\nserver {s:?}");
        let r = rows(&c.stdout);
        let sizes: Vec<&str> = r.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(sizes, ["1", "64", "4k", "64k"], "{}", c.stdout);
        for (size, sent, ack) in &r {
            assert_eq!(
                (sent.as_str(), ack.as_str()),
                ("600", "=600"),
                "{mode} {size}"
            );
        }
    }
    // A receive queue per context by default (kernel UDP: a socket each): both queues
    // of both sides move frames, both ways; with --queues 1 there is one.
    let queue_counts = |err: &str| -> Vec<(u64, u64)> {
        err.split("; queue ")
            .skip(1)
            .map(|part| {
                let w: Vec<&str> = part.split(' ').collect();
                let n = |i: usize| w[i].trim_end_matches(',').parse::<u64>().unwrap();
                (n(1), n(4))
            })
            .collect()
    };
    let args = [
        "-e",
        "rdm",
        "--mode",
        "rate",
        "--contexts",
        "2",
        "-S",
        "64",
        "-I",
        "300",
        "-v",
    ];
    let (s, c) = same(&args);
    assert!(c.ok() && s.ok(), "client {c:?}\nserver {s:?}");
    for (side, o) in [("server", &s), ("client", &c)] {
        let q = queue_counts(&o.stderr);
        assert_eq!(q.len(), 2, "{side}: {}", o.stderr);
        assert!(q.iter().all(|&(rx, tx)| rx > 0 && tx > 0), "{side}: {q:?}");
    }
    let mut one = args.to_vec();
    one.extend(["--queues", "1"]);
    let (s, c) = same(&one);
    assert!(c.ok() && s.ok(), "client {c:?}\nserver {s:?}");
    assert!(queue_counts(&c.stderr).is_empty(), "{}", c.stderr);
    let (s, c) = pair(
        &["-e", "rdm", "--mode", "rate", "--contexts", "2"],
        &["-e", "rdm", "--mode", "rate", "--contexts", "1", "-I", "10"],
    );
    assert!(!c.ok() && !s.ok(), "client {c:?}\nserver {s:?}");
    assert!(
        s.stderr
            .contains("the client runs 1 contexts, this server 2"),
        "{s:?}"
    );
    let out = Command::new(BIN)
        .args(["-e", "rdm", "--contexts", "2", "--timeout", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--contexts needs"));
}

#[test]
fn multi_receive_buffers_in_every_mode() {
    let _g = serial();
    // 64 KiB messages go to ordinary receives (multi-receive takes up to 16 KiB): the
    // receives switch kind between sizes.
    let sizes = [1, 64, 4096, 16384, 65536];
    for mode in ["pingpong", "bandwidth", "rate"] {
        let (s, c) = same(&[
            "-e",
            "rdm",
            "--multi-recv",
            "--mode",
            mode,
            "-S",
            "1,64,4k,16k,64k",
            "-c",
            "-I",
            "300",
            "--window",
            "32",
        ]);
        assert_clean(&s, &c, &sizes, "300");
    }
    // Blocking waits copy each message out with a second call (Cq::copy_multi).
    let (s, c) = same(&[
        "-e",
        "rdm",
        "--multi-recv",
        "--block",
        "-S",
        "64,4k",
        "-c",
        "-I",
        "50",
    ]);
    assert_clean(&s, &c, &[64, 4096], "50");
    // Multi-receive buffers take untagged messages only.
    let out = spawn(&["-e", "rdm", "-m", "tagged", "--multi-recv", "-S", "64"])
        .finish(Instant::now() + Duration::from_secs(20));
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert_eq!(
        out.stderr.trim(),
        "ofi-pingpong: error: --multi-recv needs -m msg"
    );
}

#[test]
fn automatic_progress_and_blocking_waits() {
    let _g = serial();
    let (s, c) = same(&[
        "-e",
        "rdm",
        "-S",
        "64,1m",
        "-c",
        "-I",
        "5",
        "--progress",
        "auto",
        "--block",
    ]);
    assert_clean(&s, &c, &[64, 1 << 20], "5");
    let (s, c) = same(&["-e", "dgram", "-S", "64", "-c", "-I", "20", "--block"]);
    assert!(c.ok() && s.ok(), "client: {c:?}\nserver: {s:?}");
}

/// Reads a classic pcap file: (link type, records).
fn read_pcap(path: &std::path::Path) -> (u32, Vec<Vec<u8>>) {
    let b = std::fs::read(path).unwrap();
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    assert!(b.len() >= 24, "a pcap file header");
    assert_eq!(u32_at(0), 0xa1b2_c3d4, "pcap magic");
    let linktype = u32_at(20);
    let mut recs = Vec::new();
    let mut at = 24;
    while at < b.len() {
        let incl = u32_at(at + 8) as usize;
        assert_eq!(incl, u32_at(at + 12) as usize, "whole frames");
        recs.push(b[at + 16..at + 16 + incl].to_vec());
        at += 16 + incl;
    }
    assert_eq!(at, b.len(), "no partial record");
    (linktype, recs)
}

#[test]
fn pcap_writes_a_readable_capture() {
    let _g = serial();
    let dir = std::env::temp_dir().join(format!("ofi-pingpong-pcap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("client.pcap");
    let path = file.to_str().unwrap();
    let (s, c) = pair(
        &["-e", "rdm", "-S", "64,16k", "-c", "-I", "5"],
        &["-e", "rdm", "-S", "64,16k", "-c", "-I", "5", "--pcap", path],
    );
    assert_clean(&s, &c, &[64, 16384], "5");
    let (linktype, recs) = read_pcap(&file);
    assert_eq!(linktype, 101, "LINKTYPE_RAW on a UDP data plane");
    // 15 pings of each size, 2 of them rendezvous-sized: well over 30 frames each way.
    assert!(recs.len() > 60, "{} records", recs.len());
    let mut ports = std::collections::BTreeSet::new();
    for r in &recs {
        assert_eq!(r[0] >> 4, 4, "IPv4");
        let ihl = usize::from(r[0] & 0xf) * 4;
        assert_eq!(r[9], 17, "UDP");
        assert_eq!(usize::from(u16::from_be_bytes([r[2], r[3]])), r.len());
        let udp = &r[ihl..];
        ports.insert(u16::from_be_bytes([udp[0], udp[1]]));
        ports.insert(u16::from_be_bytes([udp[2], udp[3]]));
        let payload = &udp[8..];
        assert!(
            wire::Repr::parse_bytes(payload).is_ok(),
            "every payload is an ofi-nostd packet"
        );
    }
    assert_eq!(ports.len(), 2, "one client and one server port: {ports:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mismatched_options_are_refused_on_both_sides() {
    let _g = serial();
    let t = Instant::now();
    let (s, c) = pair(
        &["-e", "rdm", "-S", "64", "-I", "2"],
        &["-e", "rdm", "-m", "tagged", "-S", "64", "-I", "2"],
    );
    assert_eq!(c.status.code(), Some(1), "{c:?}");
    assert_eq!(s.status.code(), Some(1), "{s:?}");
    assert_eq!(
        c.stderr.trim(),
        "ofi-pingpong: error: the server refused: client runs -e rdm -m tagged --mode pingpong, server -e rdm -m msg --mode pingpong"
    );
    assert!(s.stderr.contains("ofi-pingpong: error: refused a client"));
    assert!(t.elapsed() < Duration::from_secs(10));
}

#[test]
fn junk_frames_are_counted_by_reason_in_verbose_stats() {
    let _g = serial();
    let (s, c) = pair_with(&["-v", "-e", "rdm"], &["-e", "rdm", "-S", "64"], |port| {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = format!("127.0.0.1:{port}");
        for _ in 0..5 {
            sock.send_to(b"garbage that is not a packet", &to).unwrap();
        }
        for _ in 0..3 {
            sock.send_to(&[0x4f, 0x4e], &to).unwrap();
        }
        // Longer than a receive slot (the link's 9000-byte MTU): the kernel cuts it
        // and the data plane drops it.
        for _ in 0..2 {
            sock.send_to(&[0u8; 20_000], &to).unwrap();
        }
    });
    assert!(s.ok() && c.ok(), "{s:?} {c:?}");
    let line = s
        .stderr
        .lines()
        .find(|l| l.contains(" dropped "))
        .unwrap_or_else(|| panic!("no drop counters in {s:?}"));
    assert!(line.contains("wire.bad_magic 5"), "{line}");
    assert!(line.contains("wire.truncated 3"), "{line}");
    assert!(line.contains("link.truncated 2"), "{line}");
}

#[test]
fn matched_auth_keys_pass_with_a_mac_on_every_packet_and_others_are_refused() {
    let _g = serial();
    // The same key (as a string on one side, as hex on the other): every size checked,
    // and no packet dropped for its MAC.
    let hex = "0x6a6f622d3239"; // "job-29"
    let (s, c) = pair(
        &["-e", "rdm", "-c", "-v", "--auth-key", "job-29"],
        &[
            "-e",
            "rdm",
            "-c",
            "-S",
            "64,8k,1m",
            "-I",
            "3",
            "--auth-key",
            hex,
        ],
    );
    assert_clean(&s, &c, &[64, 8 << 10, 1 << 20], "3");
    assert!(s.stderr.contains("rx_bad_mac: 0"), "{s:?}");
    assert!(s.stderr.contains("sessions: 1"), "{s:?}");
    // Another key, and no key against a key: the client fails with FI_EKEYREJECTED at
    // once, the server says why no client came.
    for (server_key, client_key) in [
        (Some("job-29"), Some("job-30")),
        (None, Some("job-29")),
        (Some("job-29"), None),
    ] {
        let t = Instant::now();
        let mut sargs = vec!["-e", "rdm", "-S", "64", "-I", "2", "--timeout", "2"];
        let mut cargs = sargs.clone();
        if let Some(k) = server_key {
            sargs.extend_from_slice(&["--auth-key", k]);
        }
        if let Some(k) = client_key {
            cargs.extend_from_slice(&["--auth-key", k]);
        }
        let (s, c) = pair(&sargs, &cargs);
        assert_eq!(c.status.code(), Some(1), "{c:?}");
        let line = c.stderr.trim();
        assert!(
            line.starts_with("ofi-pingpong: error: a send of ")
                && line.ends_with(" failed: FI_EKEYREJECTED: Key was rejected by service")
                && line.lines().count() == 1,
            "{server_key:?} {client_key:?}: {c:?}"
        );
        assert_eq!(s.status.code(), Some(1), "{s:?}");
        assert!(
            s.stderr
                .contains("auth key did not match ours (FI_EKEYREJECTED)"),
            "{s:?}"
        );
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    }
}

#[test]
fn an_absent_server_is_one_clear_line_after_the_timeout() {
    let _g = serial();
    // A port nobody listens on: bound, then closed.
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    for ep in ["rdm", "dgram"] {
        let t = Instant::now();
        let c = spawn(&["-e", ep, "-P", &port, "--timeout", "1", "127.0.0.1"])
            .finish(Instant::now() + Duration::from_secs(20));
        assert_eq!(c.status.code(), Some(1), "{c:?}");
        assert_eq!(c.stderr.lines().count(), 1, "{c:?}");
        assert!(
            c.stderr
                .starts_with("ofi-pingpong: error: no answer from the server to Hello within 1s"),
            "{c:?}"
        );
        assert!(c.stdout.is_empty());
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    }
}

#[test]
fn usage_errors_and_help() {
    let o = spawn(&["-e", "bogus"]).finish(Instant::now() + Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(2));
    let o = spawn(&["-e", "dgram", "-m", "tagged", "127.0.0.1"])
        .finish(Instant::now() + Duration::from_secs(10));
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        o.stderr.trim(),
        "ofi-pingpong: error: -m tagged needs -e rdm (DGRAM endpoints have no tagged operations)"
    );
    let o = spawn(&["--help"]).finish(Instant::now() + Duration::from_secs(10));
    assert!(o.ok());
    for opt in [
        "-e",
        "-m",
        "-S",
        "-I",
        "-W",
        "-c",
        "-B",
        "-P",
        "--dataplane",
        "--loss",
    ] {
        assert!(o.stdout.contains(opt), "--help lists {opt}");
    }
}

/// A UDP port free now (bound, then closed), for a client that must come back at the
/// same address.
fn free_port() -> String {
    std::net::UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string()
}

/// Starts a server with `args` on an ephemeral port; the process and its port.
fn server(args: &[&str]) -> (Proc, String) {
    let mut sargs = vec!["-B", "0"];
    sargs.extend_from_slice(args);
    let server = spawn(&sargs);
    let line = wait_line(&server.err, "ofi-pingpong: server listening on ", 10)
        .unwrap_or_else(|seen| panic!("the server did not start: {seen}"));
    let port = line.rsplit(':').next().unwrap().to_owned();
    (server, port)
}

/// Waits (at most `secs` seconds) for a line of `rx` containing `what`; the line, or
/// everything seen before giving up.
fn wait_line(rx: &mpsc::Receiver<String>, what: &str, secs: u64) -> Result<String, String> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut seen = String::new();
    while let Some(left) = deadline.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(line) if line.contains(what) => return Ok(line),
            Ok(line) => {
                seen.push_str(&line);
                seen.push('\n');
            }
            Err(_) => break,
        }
    }
    Err(seen)
}

/// A long data-checked RDM stream of 1 MiB messages from port `cport` to the server at
/// `port`, killed with SIGKILL once it is under way (it reported the connection and
/// had a second to start its stream). Returns when the client was killed.
///
/// Mid-transfer only: between two messages the server waits for nothing the engine
/// knows of (no rendezvous granted, no message half received), so nothing notices a
/// death there (RDM has no connection to break). No warm-up, whose END exchange is
/// such a gap (a CI run under load once killed the client there, 300 ms after it
/// connected, and the server never saw a failure), and a second for the stream to
/// start: inside it the server nearly always holds a grant whose data is to come.
fn kill_mid_transfer(port: &str, cport: &str) -> Instant {
    let mut client = spawn(&[
        "-v",
        "-e",
        "rdm",
        "--mode",
        "bandwidth",
        "-c",
        "-W",
        "0",
        "-S",
        "1m",
        "-I",
        "100000",
        "-B",
        cport,
        "-P",
        port,
        "127.0.0.1",
    ]);
    wait_line(&client.err, "connected to", 20)
        .unwrap_or_else(|seen| panic!("the first client did not connect: {seen}"));
    thread::sleep(Duration::from_secs(1));
    assert!(
        client.child.try_wait().unwrap().is_none(),
        "the first client ended before it was killed"
    );
    client.child.kill().unwrap(); // SIGKILL
    let killed = Instant::now();
    client.child.wait().unwrap();
    killed
}

/// The restarted client (same port): a short data-checked stream; it must pass.
fn restarted_client(port: &str, cport: &str, deadline: Instant) -> Outcome {
    spawn(&[
        "-e",
        "rdm",
        "--mode",
        "bandwidth",
        "-c",
        "-S",
        "64k,1m",
        "-I",
        "20",
        "-B",
        cport,
        "-P",
        port,
        "127.0.0.1",
    ])
    .finish(deadline)
}

/// What the server of a kill-and-restart run must show: the restarted client served in
/// full (its table, every message received), and at the end one failure of two.
fn assert_restart_served(s: &Outcome, c: &Outcome) {
    assert!(c.ok(), "the restarted client failed: {c:?}\nserver: {s:?}");
    assert_eq!(s.status.code(), Some(1), "{s:?}");
    assert!(
        s.stderr
            .contains("ofi-pingpong: error: 1 of 2 clients failed"),
        "{s:?}"
    );
    for o in [s, c] {
        let r = rows(&o.stdout);
        let sizes: Vec<&str> = r.iter().map(|x| x.0.as_str()).collect();
        assert_eq!(sizes, ["64k", "1m"], "{}", o.stdout);
        assert!(
            r.iter().all(|x| x.1 == "20" && x.2 == "=20"),
            "{}",
            o.stdout
        );
    }
}

/// `--serve`: a client killed with SIGKILL in the middle of a stream. The server (its
/// own `--timeout` 30 s, so only the engine can tell) reports the failure once the
/// engine's liveness probes have spent their retry budget (FI_ETIMEDOUT, within the
/// budget and a margin for a loaded host), then serves the client restarted at the
/// same address, whose data-checked run passes.
#[test]
fn a_client_killed_mid_transfer_fails_within_the_retry_budget_and_its_restart_is_served() {
    let _g = serial();
    let deadline = Instant::now() + RUN_LIMIT;
    let cfg = ofi_nostd::rdm::RdmConfig::DEFAULT;
    let budget = Duration::from_micros(cfg.rto_max.total_micros() * u64::from(cfg.max_retries + 2));
    let (server, port) = server(&[
        "-e",
        "rdm",
        "--mode",
        "bandwidth",
        "-c",
        "--serve",
        "2",
        "--timeout",
        "30",
    ]);
    let cport = free_port();
    let killed = kill_mid_transfer(&port, &cport);
    let line = wait_line(&server.err, "failed after", 30)
        .unwrap_or_else(|seen| panic!("the server reported no failure: {seen}"));
    let took = killed.elapsed();
    assert!(
        line.starts_with(&format!(
            "ofi-pingpong: client 1 (127.0.0.1:{cport}) failed after "
        )) && line.contains("FI_ETIMEDOUT"),
        "{line}"
    );
    println!("failure reported {took:?} after the kill (retry budget {budget:?}): {line}");
    assert!(
        took <= budget + Duration::from_secs(2),
        "reported {took:?} after the kill; the retry budget is {budget:?}"
    );
    let c = restarted_client(&port, &cport, deadline);
    let s = server.finish(deadline);
    assert_restart_served(&s, &c);
}

/// `--serve`: a client killed mid-stream and restarted at once at the same address,
/// long before the retry budget would run out. Its new HELLO replaces the engine's
/// session with that address (the old session's operations fail with
/// FI_ECONNRESET), the server reports the old client failed within moments and serves
/// the new one in full.
#[test]
fn a_client_restarted_at_once_replaces_its_session_and_is_served() {
    let _g = serial();
    let deadline = Instant::now() + RUN_LIMIT;
    let (server, port) = server(&[
        "-e",
        "rdm",
        "--mode",
        "bandwidth",
        "-c",
        "--serve",
        "2",
        "--timeout",
        "30",
    ]);
    let cport = free_port();
    kill_mid_transfer(&port, &cport);
    let restarted = Instant::now();
    let (port2, cport2) = (port.clone(), cport.clone());
    let client = thread::spawn(move || restarted_client(&port2, &cport2, deadline));
    let line = wait_line(&server.err, "failed after", 30)
        .unwrap_or_else(|seen| panic!("the server reported no failure: {seen}"));
    let took = restarted.elapsed();
    assert!(
        line.starts_with(&format!(
            "ofi-pingpong: client 1 (127.0.0.1:{cport}) failed after "
        )) && (line.contains("FI_ECONNRESET") || line.contains("said hello")),
        "{line}"
    );
    println!("failure reported {took:?} after the restart: {line}");
    assert!(
        took < Duration::from_secs(2),
        "reported {took:?} after the restart"
    );
    let c = client.join().unwrap();
    let s = server.finish(deadline);
    assert_restart_served(&s, &c);
}

/// `--serve 3`: three clients from three addresses, one after another, each with the
/// data check and its own table; the server exits 0 after the third.
#[test]
fn a_server_serves_clients_one_after_another() {
    let _g = serial();
    let deadline = Instant::now() + RUN_LIMIT;
    let (server, port) = server(&["-e", "rdm", "-c", "--serve", "3"]);
    let sizes = ["64", "4k", "64k"];
    for size in sizes {
        let c = spawn(&[
            "-e",
            "rdm",
            "-c",
            "-S",
            size,
            "-I",
            "5",
            "-P",
            &port,
            "127.0.0.1",
        ])
        .finish(deadline);
        assert!(c.ok(), "{c:?}");
        let r = rows(&c.stdout);
        assert_eq!(r, [(size.to_owned(), "5".to_owned(), "=5".to_owned())]);
    }
    let s = server.finish(deadline);
    assert!(s.ok(), "{s:?}");
    let tables: Vec<&str> = s.stdout.split_inclusive('\n').collect();
    assert_eq!(tables.len(), 6, "three tables of one row:\n{}", s.stdout);
    for (i, size) in sizes.iter().enumerate() {
        assert_eq!(tables[2 * i].trim_end(), header());
        assert!(tables[2 * i + 1].starts_with(size), "{}", s.stdout);
    }
}
