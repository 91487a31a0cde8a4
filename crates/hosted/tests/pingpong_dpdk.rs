//! `ofi-pingpong --dataplane dpdk` end to end (the `dpdk` feature; `cargo xtask
//! test-dpdk` runs these, and `cargo xtask test` runs that):
//!
//! * two DPDK processes over `net_memif` (no privilege: the server creates the memif
//!   socket in a temporary directory, the client connects to it), RDM msg and tagged,
//!   `-S all -c`: every size to 4 MiB, every byte checked;
//! * a DPDK process (`net_af_packet` on one end of a veth pair) against a kernel-UDP
//!   process on the other end, in a network namespace the test creates (root only; the
//!   namespace and the pair are always removed): the same wire protocol across data
//!   planes, RDM msg (DPDK serves) and tagged (the kernel serves), `-S all -c`;
//! * the same two runs with `net_af_xdp` (copy mode) on the veth end instead.
//!
//! Every process is killed when its test fails or outlives [`RUN_LIMIT`]; device, socket
//! and namespace names carry the test's pid. Pairs run one at a time (each process
//! busy-polls a CPU), serialised with the other ping-pong tests by the same file lock.

#![cfg(feature = "dpdk")]

#[path = "../../dp-dpdk/tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Read};
use std::net::Ipv4Addr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use hosted::pingpong::{MAX_ALL_SIZE, all_sizes, header, size_str};

use common::{NetGuard, TempDir, af_xdp_or_skip, enter_netns, ip, root_or_skip, tx_checksum_off};

const BIN: &str = env!("CARGO_BIN_EXE_ofi-pingpong");

/// The longest one server/client pair may run before both are killed.
const RUN_LIMIT: Duration = Duration::from_secs(180);

/// The server's UDP port.
const PORT: &str = "47592";

/// Options of every run: RDM, every size with the data check, two timed iterations.
#[rustfmt::skip]
const RUN: &[&str] = &["-e", "rdm", "-S", "all", "-c", "-I", "2", "-W", "1", "--timeout", "30"];

static SERIAL: Mutex<()> = Mutex::new(());

/// One pair at a time, in this process and across test processes.
struct Serial {
    _file: std::fs::File,
    _guard: MutexGuard<'static, ()>,
}

fn serial() -> Serial {
    let guard = SERIAL.lock().unwrap_or_else(PoisonError::into_inner);
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("ofi-pingpong-tests.lock");
    let file = std::fs::File::create(path).expect("lock file");
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

#[derive(Debug)]
struct Outcome {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Starts `program args` with its output drained line by line by threads.
fn spawn(program: &str, args: &[String]) -> Proc {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("start {program}: {e}"));
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
    /// Waits for `ofi-pingpong: server listening on`; returns the lines before it.
    fn wait_listening(&mut self) -> String {
        let mut early = String::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            match self.err.recv_timeout(Duration::from_millis(100)) {
                Ok(line) if line.starts_with("ofi-pingpong: server listening on ") => {
                    return early;
                }
                Ok(line) => {
                    early.push_str(&line);
                    early.push('\n');
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if let Ok(Some(st)) = self.child.try_wait() {
                        panic!("the server exited ({st}) before listening:\n{early}");
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        panic!("the server did not start:\n{early}");
    }

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

/// Runs a server, then a client once the server listens; returns both outcomes.
fn pair(server: (&str, Vec<String>), client: (&str, Vec<String>)) -> (Outcome, Outcome) {
    let deadline = Instant::now() + RUN_LIMIT;
    let mut s = spawn(server.0, &server.1);
    let early = s.wait_listening();
    let c = spawn(client.0, &client.1).finish(deadline);
    let mut s = s.finish(deadline);
    s.stderr.insert_str(0, &early);
    (s, c)
}

/// Both exited 0 and printed one row per size of `-S all` (RDM: to 4 MiB), each with
/// both timed messages answered.
fn assert_clean(s: &Outcome, c: &Outcome) {
    assert!(c.status.success(), "client failed: {c:#?}\nserver: {s:#?}");
    assert!(s.status.success(), "server failed: {s:#?}\nclient: {c:#?}");
    let want: Vec<String> = all_sizes(MAX_ALL_SIZE)
        .into_iter()
        .map(|z| size_str(z as u64))
        .collect();
    assert_eq!(want.last().map(String::as_str), Some("4m"));
    for o in [s, c] {
        let mut lines = o.stdout.lines();
        assert_eq!(lines.next(), Some(header().as_str()), "{o:#?}");
        let rows: Vec<Vec<&str>> = lines.map(|l| l.split_whitespace().collect()).collect();
        let got: Vec<String> = rows.iter().map(|r| r[0].to_owned()).collect();
        assert_eq!(got, want, "sizes in:\n{}", o.stdout);
        for r in rows {
            assert_eq!((r[1], r[2]), ("2", "=2"), "row {r:?} of:\n{}", o.stdout);
        }
    }
}

/// The result rows of a client's report (after the header), split into columns.
fn rows(out: &str) -> Vec<Vec<&str>> {
    out.lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect()
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

/// A /24 subnet third octet unique to this process and `n`.
fn subnet(n: u32) -> u8 {
    ((std::process::id() * 3 + n) % 250) as u8 + 1
}

/// EAL arguments for a test process: virtual devices without hugepages, a file prefix
/// unique to the test process and role.
fn eal(role: &str) -> String {
    format!(
        "--no-huge --no-pci --no-shconf --no-telemetry -m 256 --file-prefix ofi-pp-{}-{role} \
         --log-level lib.eal:warning",
        std::process::id()
    )
}

fn memif(op: &str, n: u32) {
    let _g = serial();
    let dir = TempDir::new(&format!("pp-memif-{op}"));
    let (s, c) = memif_pair(&dir, op, n, args(RUN), args(RUN));
    assert_clean(&s, &c);
}

/// An ofi-pingpong server and client over net_memif (socket in `dir`), `-m op`, with
/// their own further arguments.
fn memif_pair(
    dir: &TempDir,
    op: &str,
    n: u32,
    server_run: Vec<String>,
    client_run: Vec<String>,
) -> (Outcome, Outcome) {
    let sock = dir.0.join("memif.sock");
    let sock = sock.to_str().unwrap();
    let x = subnet(n);
    let (sip, cip) = (format!("10.78.{x}.1"), format!("10.78.{x}.2"));
    let dev = |role: &str, i: u32| {
        format!("net_memif{i},role={role},id=0,socket={sock},socket-abstract=no")
    };
    let mut server = args(&["--dataplane", "dpdk", "-m", op, "-B", PORT]);
    server.extend([
        "--eal".into(),
        eal("srv"),
        "--dpdk-vdev".into(),
        dev("server", 0),
        "--ip".into(),
        format!("{sip}/24"),
    ]);
    server.extend(server_run);
    let mut client = args(&["--dataplane", "dpdk", "-m", op, "-P", PORT]);
    client.extend([
        "--eal".into(),
        eal("cli"),
        "--dpdk-vdev".into(),
        dev("client", 1),
        "--ip".into(),
        format!("{cip}/24"),
    ]);
    client.extend(client_run);
    client.push(sip);
    pair((BIN, server), (BIN, client))
}

/// `--contexts 2` over net_memif, rate and bandwidth, every byte checked: each side's
/// two context threads share the one DPDK queue pair of its domain.
#[test]
fn memif_contexts_rate_and_bandwidth_checked() {
    let _g = serial();
    for (n, mode) in [(7, "rate"), (8, "bandwidth")] {
        let dir = TempDir::new(&format!("pp-memif-ctx-{mode}"));
        let run = args(&[
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
            "200",
            "--window",
            "16",
            "--timeout",
            "30",
            "-v",
        ]);
        let (s, c) = memif_pair(&dir, "msg", n, run.clone(), run);
        assert!(c.status.success(), "{mode}: client {c:#?}\nserver {s:#?}");
        assert!(s.status.success(), "{mode}: server {s:#?}\nclient {c:#?}");
        let r = rows(&c.stdout);
        let sizes: Vec<&str> = r.iter().map(|x| x[0]).collect();
        assert_eq!(sizes, ["1", "64", "4k", "64k"], "{}", c.stdout);
        for row in &r {
            assert_eq!((row[1], row[2]), ("400", "=400"), "{mode}: {}", c.stdout);
        }
        // A queue pair per context: context k's traffic with the peer's context k
        // stays on queue pair k, so both pairs of both sides move frames each way.
        for (side, o) in [("server", &s), ("client", &c)] {
            let err = &o.stderr;
            let q: Vec<(u64, u64)> = err
                .split("; queue ")
                .skip(1)
                .map(|part| {
                    let w: Vec<&str> = part.split(' ').collect();
                    let n = |i: usize| w[i].trim_end_matches(',').parse::<u64>().unwrap();
                    (n(1), n(4))
                })
                .collect();
            assert_eq!(q.len(), 2, "{mode} {side}: {err}");
            assert!(
                q.iter().all(|&(rx, tx)| rx > 0 && tx > 0),
                "{mode} {side}: {q:?}"
            );
        }
    }
}

#[test]
fn memif_rdm_msg_every_size_checked() {
    memif("msg", 1);
}

#[test]
fn memif_rdm_tagged_every_size_checked() {
    memif("tagged", 2);
}

/// DGRAM between two DPDK processes over net_memif: every size to the largest datagram
/// the port carries, data checked. An unreliable endpoint may lose a message on a loaded
/// machine (the tool reports it): every size must have at least one answer.
#[test]
fn memif_dgram_every_size_checked() {
    let _g = serial();
    let dir = TempDir::new("pp-memif-dgram");
    let run = args(&[
        "-e",
        "dgram",
        "-S",
        "all",
        "-c",
        "-I",
        "3",
        "-W",
        "1",
        "--timeout",
        "30",
    ]);
    let (s, c) = memif_pair(&dir, "msg", 4, run.clone(), run);
    assert!(c.status.success(), "client failed: {c:#?}\nserver: {s:#?}");
    assert!(s.status.success(), "server failed: {s:#?}\nclient: {c:#?}");
    let rows = rows(&c.stdout);
    let sizes: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    assert_eq!(sizes.first(), Some(&"0"), "{}", c.stdout);
    assert!(sizes.contains(&"1k"), "up to the port's MTU: {}", c.stdout);
    for r in &rows {
        let answered: u32 = r[2].trim_start_matches('=').parse().unwrap();
        assert!((1..=3).contains(&answered), "row {r:?} of:\n{}", c.stdout);
    }
}

/// `--loss` and `--pcap` on the dpdk data plane, as on the kernel ones: 5% of the frames
/// each side sends and receives lost, every message still delivered and checked; the
/// client's capture a pcap file of Ethernet frames.
#[test]
fn memif_rdm_with_loss_and_a_capture() {
    let _g = serial();
    let dir = TempDir::new("pp-memif-loss");
    let cap = dir.0.join("client.pcap");
    let run = |seed: &str| {
        args(&[
            "-e",
            "rdm",
            "-S",
            "1,64k,1m",
            "-c",
            "-I",
            "8",
            "-W",
            "1",
            "--timeout",
            "60",
            "--loss",
            "0.05",
            "--seed",
            seed,
        ])
    };
    let mut client = run("32");
    client.extend(["--pcap".into(), cap.to_str().unwrap().into()]);
    let (s, c) = memif_pair(&dir, "msg", 3, run("31"), client);
    assert!(c.status.success(), "client failed: {c:#?}\nserver: {s:#?}");
    assert!(s.status.success(), "server failed: {s:#?}\nclient: {c:#?}");
    let rows = rows(&c.stdout);
    let sizes: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    assert_eq!(sizes, ["1", "64k", "1m"], "{}", c.stdout);
    for r in &rows {
        assert_eq!((r[1], r[2]), ("8", "=8"), "row {r:?} of:\n{}", c.stdout);
    }
    // Classic pcap: magic, version 2.4, LINKTYPE_ETHERNET (1), then records.
    let bytes = std::fs::read(&cap).expect("the capture");
    let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap());
    assert_eq!(u32_at(0), 0xa1b2_c3d4);
    assert_eq!(u32_at(20), 1, "Ethernet frames");
    let (mut at, mut records) = (24, 0);
    while at + 16 <= bytes.len() {
        at += 16 + u32_at(at + 8) as usize;
        records += 1;
    }
    assert_eq!(at, bytes.len(), "whole records");
    assert!(records > 100, "{records} frames captured");
}

/// `--dpdk-mtu 9000` over net_memif (whose driver has no MTU: the stack's, with mbufs
/// and memif buffers that hold a 9014-byte frame): every message delivered and checked,
/// and the client's capture holds frames of exactly 9014 bytes, none larger.
#[test]
fn memif_rdm_at_mtu_9000() {
    let _g = serial();
    let dir = TempDir::new("pp-memif-jumbo");
    let cap = dir.0.join("client.pcap");
    let run = args(&[
        "-e",
        "rdm",
        "--dpdk-mtu",
        "9000",
        "-S",
        "1,8k,64k,1m",
        "-c",
        "-I",
        "8",
        "-W",
        "1",
        "--timeout",
        "60",
    ]);
    let mut client = run.clone();
    client.extend(["--pcap".into(), cap.to_str().unwrap().into()]);
    let (s, c) = memif_pair(&dir, "msg", 5, run, client);
    assert!(c.status.success(), "client failed: {c:#?}\nserver: {s:#?}");
    assert!(s.status.success(), "server failed: {s:#?}\nclient: {c:#?}");
    let rows = rows(&c.stdout);
    let sizes: Vec<&str> = rows.iter().map(|r| r[0]).collect();
    assert_eq!(sizes, ["1", "8k", "64k", "1m"], "{}", c.stdout);
    for r in &rows {
        assert_eq!((r[1], r[2]), ("8", "=8"), "row {r:?} of:\n{}", c.stdout);
    }
    let bytes = std::fs::read(&cap).expect("the capture");
    let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap());
    let (mut at, mut largest) = (24, 0);
    while at + 16 <= bytes.len() {
        largest = largest.max(u32_at(at + 8));
        at += 16 + u32_at(at + 8) as usize;
    }
    assert_eq!(largest, 9014, "the largest frame sent");
}

/// A veth pair: `a` in the root namespace (for the DPDK driver), `b` in namespace
/// `ns` at `kernel_ip`/24 with transmit checksum offload off. Returns the guard that
/// removes it all, armed before anything exists.
fn veth_into_namespace(n: u32, kernel_ip: Ipv4Addr) -> (NetGuard, String, String) {
    let pid = std::process::id();
    let (a, b, ns) = (
        format!("ppd{pid}{n}a"),
        format!("ppd{pid}{n}b"),
        format!("ofi-pp-dpdk-{pid}-{n}"),
    );
    let guard = NetGuard {
        netns: vec![ns.clone()],
        links: vec![a.clone()],
    };
    ip(&["netns", "add", &ns]);
    ip(&["link", "add", &a, "type", "veth", "peer", "name", &b]);
    ip(&["link", "set", &b, "netns", &ns]);
    ip(&["link", "set", &a, "addrgenmode", "none"]);
    ip(&["link", "set", &a, "up"]);
    ip(&["-n", &ns, "link", "set", "lo", "up"]);
    ip(&["-n", &ns, "link", "set", &b, "addrgenmode", "none"]);
    ip(&[
        "-n",
        &ns,
        "addr",
        "add",
        &format!("{kernel_ip}/24"),
        "dev",
        &b,
    ]);
    ip(&["-n", &ns, "link", "set", &b, "up"]);
    // The kernel's frames must leave `b` with their UDP checksum filled in (a veth
    // hands AF_PACKET readers a partial one otherwise).
    let (ns2, b2) = (ns.clone(), b.clone());
    thread::spawn(move || {
        enter_netns(&ns2);
        tx_checksum_off(&b2);
    })
    .join()
    .expect("tx checksum off in the namespace");
    (guard, a, ns)
}

/// DPDK on one end of a veth, kernel UDP on the other, `dpdk_serves` choosing the
/// server.
fn af_packet(test: &str, op: &str, n: u32, dpdk_serves: bool) {
    veth_interop(test, "net_af_packet", "", op, n, dpdk_serves);
}

/// As [`af_packet`] with `net_af_xdp`: an AF_XDP socket on the veth end's one receive
/// queue, in copy mode (a veth has no zero-copy support).
fn af_xdp(test: &str, op: &str, n: u32, dpdk_serves: bool) {
    if !root_or_skip(test) || !af_xdp_or_skip(test) {
        return;
    }
    veth_interop(
        test,
        "net_af_xdp",
        ",start_queue=0,queue_count=1,force_copy=1",
        op,
        n,
        dpdk_serves,
    );
}

/// DPDK driver `driver` (device arguments `iface=` plus `extra`) on one end of a veth,
/// kernel UDP on the other, `dpdk_serves` choosing the server; `n` keeps the names and
/// subnets of the tests apart.
fn veth_interop(test: &str, driver: &str, extra: &str, op: &str, n: u32, dpdk_serves: bool) {
    if !root_or_skip(test) {
        return;
    }
    let _g = serial();
    let x = subnet(n + 100);
    let (dpdk_ip, kernel_ip) = (Ipv4Addr::new(10, 79, x, 1), Ipv4Addr::new(10, 79, x, 2));
    let (_guard, a, ns) = veth_into_namespace(n, kernel_ip);
    let mut dpdk = args(&["--dataplane", "dpdk", "-m", op]);
    dpdk.extend([
        "--eal".into(),
        eal(&format!("veth{n}")),
        "--dpdk-vdev".into(),
        format!("{driver}{n},iface={a}{extra}"),
        "--ip".into(),
        format!("{dpdk_ip}/24"),
    ]);
    dpdk.extend(args(RUN));
    let mut kernel = args(&["netns", "exec", &ns, BIN, "-m", op]);
    kernel.extend(args(RUN));
    let (s, c) = if dpdk_serves {
        dpdk.extend(args(&["-B", PORT]));
        kernel.extend(args(&["-P", PORT]));
        kernel.push(dpdk_ip.to_string());
        pair((BIN, dpdk), ("ip", kernel))
    } else {
        kernel.extend(args(&["-B", PORT, "-s", &kernel_ip.to_string()]));
        dpdk.extend(args(&["-P", PORT]));
        dpdk.push(kernel_ip.to_string());
        pair(("ip", kernel), (BIN, dpdk))
    };
    assert_clean(&s, &c);
}

#[test]
fn af_packet_rdm_msg_dpdk_server_kernel_udp_client() {
    af_packet(
        "af_packet_rdm_msg_dpdk_server_kernel_udp_client",
        "msg",
        1,
        true,
    );
}

#[test]
fn af_packet_rdm_tagged_kernel_udp_server_dpdk_client() {
    af_packet(
        "af_packet_rdm_tagged_kernel_udp_server_dpdk_client",
        "tagged",
        2,
        false,
    );
}

#[test]
fn af_xdp_rdm_msg_dpdk_server_kernel_udp_client() {
    af_xdp(
        "af_xdp_rdm_msg_dpdk_server_kernel_udp_client",
        "msg",
        3,
        true,
    );
}

#[test]
fn af_xdp_rdm_tagged_kernel_udp_server_dpdk_client() {
    af_xdp(
        "af_xdp_rdm_tagged_kernel_udp_server_dpdk_client",
        "tagged",
        4,
        false,
    );
}
