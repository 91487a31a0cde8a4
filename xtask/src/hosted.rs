//! `cargo xtask test-hosted`: the tests of `tests/hosted` across processes on real Linux
//! devices that this task creates and always removes.
//!
//! As root it creates, with names unique to this run (`ofh` + role + our pid):
//!
//! * a Linux bridge `ofhbr<pid>` (STP off, no forwarding delay, no netfilter calls, no
//!   IPv4 address, IPv6 off) joining two persistent TAP devices `ofhta<pid>` and
//!   `ofhtb<pid>` (`ip tuntap add mode tap`), which the test processes attach by name;
//!   the processes use 10.213.250.1/24 and .2/24 on them.
//! * two network namespaces `ofhnsa<pid>` and `ofhnsb<pid>` (IPv6 off) holding the two
//!   ends `ofhva<pid>` / `ofhvb<pid>` of a veth pair, with kernel addresses
//!   10.213.251.1/24 and .2/24; the processes (AF_PACKET, under `ip netns exec`) use
//!   .11 and .12, which the kernels do not own, so no kernel answers or checks their
//!   traffic (and transmit checksum offload does not matter: every frame the tests look
//!   at is framed, checksums included, by ofi-nostd itself).
//!
//! Nothing is routed: the bridge has no address and the namespaces have no other
//! interface, so no frame can reach an address outside these two private subnets.
//!
//! Then, with the devices gone, it runs the multi-host MPI jobs of the provider's tests
//! (`crates/provider/tests/libfabric.rs`, `*across_two_hosts*`: Open MPI 4.1 and MPICH
//! 5, each over the kernel UDP plane and over AF_PACKET, one rank in each of two
//! network namespaces on a bridge, started by the MPI's own launcher through an rsh
//! agent). Those tests make and remove their own namespaces (`nostd-xhost-*`); the
//! sweep below also removes theirs when their test process is gone.
//!
//! It passes the names and addresses to `cargo test -p hosted-tests --tests` in the
//! environment variables of `hosted_tests` (bounded by [`TEST_LIMIT`]) and then removes
//! every device and namespace: on success, on failure, on a panic (a drop guard) and on
//! Ctrl-C or SIGTERM (a signal handler kills the test processes, cleans up and exits
//! 130). The test run has a process group of its own, so killing it reaches every
//! `ofi-pingpong` it started. A startup sweep removes what an earlier run that was killed
//! outright (SIGKILL) left: devices and namespaces with our prefix whose pid is no longer
//! a live process. After the teardown it checks that `ip link` and `ip netns` show
//! nothing of this run.

use std::os::unix::process::CommandExt as _;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::cmd::{self, Result};
use crate::ws::Workspace;

/// The prefix of every device and namespace this task creates.
const PREFIX: &str = "ofh";

/// The /24 of the TAP devices (the bridge itself has no address).
const TAP_NET: &str = "10.213.250";

/// The /24 of the veth pair.
const VETH_NET: &str = "10.213.251";

/// The longest the test run may take before it is killed.
const TEST_LIMIT: Duration = Duration::from_secs(15 * 60);

/// The longest the multi-host MPI jobs may take before they are killed (eight MPI
/// runs, each bounded at 120 s by the tests themselves).
const MPI_LIMIT: Duration = Duration::from_secs(10 * 60);

/// The prefix of the network namespaces the multi-host MPI jobs make
/// (`nostd-<test>-<pid>-h<i>` and `nostd-<test>-<pid>-br`, see
/// `crates/provider/tests/netns`).
const MPI_NETNS_PREFIX: &str = "nostd-xhost-";

/// The device roles, in name order (`ofh<role><pid>`).
const LINK_ROLES: [&str; 5] = ["br", "ta", "tb", "va", "vb"];

/// The namespace roles.
const NETNS_ROLES: [&str; 2] = ["nsa", "nsb"];

/// What one run creates.
#[derive(Debug, Clone)]
struct Topology {
    bridge: String,
    taps: [String; 2],
    netns: [String; 2],
    veths: [String; 2],
}

impl Topology {
    fn new(pid: u32) -> Self {
        let n = |role: &str| format!("{PREFIX}{role}{pid}");
        Topology {
            bridge: n("br"),
            taps: [n("ta"), n("tb")],
            netns: [n("nsa"), n("nsb")],
            veths: [n("va"), n("vb")],
        }
    }

    /// The environment of the test run (see `hosted_tests`).
    fn env(&self) -> [(&'static str, String); 5] {
        [
            ("OFI_HOSTED_TAP", self.taps.join(",")),
            (
                "OFI_HOSTED_TAP_IPS",
                format!("{TAP_NET}.1/24,{TAP_NET}.2/24"),
            ),
            ("OFI_HOSTED_NETNS", self.netns.join(",")),
            ("OFI_HOSTED_VETH", self.veths.join(",")),
            (
                "OFI_HOSTED_VETH_IPS",
                format!("{VETH_NET}.11/24,{VETH_NET}.12/24"),
            ),
        ]
    }

    /// What [`Self::setup`] creates, for the messages.
    fn describe(&self) -> String {
        format!(
            "bridge {} with TAP devices {} and {}; veth pair {}/{} in network namespaces {} and {}",
            self.bridge,
            self.taps[0],
            self.taps[1],
            self.veths[0],
            self.veths[1],
            self.netns[0],
            self.netns[1]
        )
    }

    fn setup(&self) -> Result {
        let br = self.bridge.as_str();
        ip(&[
            "link",
            "add",
            br,
            "type",
            "bridge",
            "stp_state",
            "0",
            "forward_delay",
            "0",
            "nf_call_iptables",
            "0",
            "nf_call_ip6tables",
            "0",
            "nf_call_arptables",
            "0",
        ])?;
        no_ipv6(br);
        for tap in &self.taps {
            ip(&["tuntap", "add", "dev", tap, "mode", "tap"])?;
            no_ipv6(tap);
            ip(&["link", "set", tap, "master", br])?;
            ip(&["link", "set", tap, "up"])?;
        }
        ip(&["link", "set", br, "up"])?;
        for ns in &self.netns {
            add_netns(ns)?;
        }
        let [va, vb] = &self.veths;
        ip(&["link", "add", va, "type", "veth", "peer", "name", vb])?;
        for (i, (veth, ns)) in self.veths.iter().zip(&self.netns).enumerate() {
            ip(&["link", "set", veth, "netns", ns])?;
            let addr = format!("{VETH_NET}.{}/24", i + 1);
            ip(&["-n", ns, "addr", "add", &addr, "dev", veth])?;
            ip(&["-n", ns, "link", "set", veth, "up"])?;
        }
        Ok(())
    }

    /// Removes everything (whatever exists of it); errors are reported by [`Self::left`].
    fn teardown(&self) {
        for ns in &self.netns {
            quiet(&["netns", "del", ns]);
        }
        // Still in our namespace only if the setup stopped before moving it.
        quiet(&["link", "del", &self.veths[0]]);
        for tap in &self.taps {
            quiet(&["tuntap", "del", "dev", tap, "mode", "tap"]);
        }
        quiet(&["link", "del", &self.bridge]);
    }

    /// What of this run is still there.
    fn left(&self) -> Vec<String> {
        let links = link_names();
        let netns = netns_names();
        let mut left = Vec::new();
        for l in [&self.bridge, &self.taps[0], &self.taps[1], &self.veths[0]] {
            if links.contains(l) {
                left.push(format!("link {l}"));
            }
        }
        for n in &self.netns {
            if netns.contains(n) {
                left.push(format!("netns {n}"));
            }
        }
        left
    }
}

/// The topology of this run once armed: cleaned by whoever takes it first (the drop
/// guard, the normal path or the signal handler).
static ARMED: Mutex<Option<Topology>> = Mutex::new(None);

/// The process group of the running test command (0: none).
static TEST_PGID: AtomicU32 = AtomicU32::new(0);

/// Tears the armed topology down (once) and checks it is gone. The lock is held
/// throughout, so whoever comes second (the main thread after the signal handler killed
/// its tests) waits until the teardown is complete instead of exiting under it.
fn disarm() -> Result {
    disarm_in(&mut ARMED.lock().unwrap_or_else(PoisonError::into_inner))
}

/// [`disarm`] with the lock already held.
fn disarm_in(armed: &mut Option<Topology>) -> Result {
    let Some(topo) = armed.take() else {
        return Ok(());
    };
    topo.teardown();
    let left = topo.left();
    if left.is_empty() {
        println!("test-hosted: removed {}", topo.describe());
        Ok(())
    } else {
        Err(format!("could not remove {}", left.join(", ")))
    }
}

/// Kills the test command's process group, if one runs.
fn kill_tests() {
    let pgid = TEST_PGID.swap(0, Ordering::SeqCst);
    if pgid != 0 {
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{pgid}")])
            .stderr(Stdio::null())
            .status();
    }
}

/// Cleans up on every exit path that unwinds.
struct Guard;

impl Drop for Guard {
    fn drop(&mut self) {
        kill_tests();
        if let Err(e) = disarm() {
            eprintln!("test-hosted: {e}");
        }
    }
}

/// `cargo xtask test-hosted [--skip-if-not-root]`.
pub fn run(ws: &Workspace, skip_if_not_root: bool) -> Result {
    if ws.hosted_tests().is_empty() {
        println!("test-hosted: nothing to run yet (tests/hosted has no tests)");
        return Ok(());
    }
    let topo = Topology::new(std::process::id());
    if !cmd::is_root() {
        let what = "creates two TAP devices on a bridge, a veth pair and network namespaces";
        if skip_if_not_root {
            println!(
                "test-hosted: skipped: needs root (it {what}); the UDP tests of tests/hosted run with the workspace tests, the multi-host MPI jobs do not run"
            );
            return Ok(());
        }
        return Err(format!(
            "needs root: it {what} (run it as root, or pass --skip-if-not-root)"
        ));
    }
    if !cmd::on_path("ip") {
        return Err("needs `ip` (Debian package iproute2)".into());
    }
    // Build first, so the devices exist only while the tests run.
    let bin = build_pingpong(ws)?;
    cmd::run(&mut ws.cargo(["test", "-p", "hosted-tests", "--tests", "--no-run"]))?;
    let mut mpi = if ws.has_provider() {
        Some(crate::provider::across_hosts(ws)?)
    } else {
        println!("test-hosted: no provider crate, so no multi-host MPI jobs");
        None
    };
    sweep();

    ctrlc::set_handler(|| {
        eprintln!("test-hosted: interrupted: stopping the tests and removing the devices");
        kill_tests();
        sweep_mpi_netns();
        // Exits with the lock held: the main thread, which sees its tests die, waits
        // for it instead of finishing with its own status.
        let mut armed = ARMED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Err(e) = disarm_in(&mut armed) {
            eprintln!("test-hosted: {e}");
        }
        std::process::exit(130);
    })
    .map_err(|e| format!("installing the Ctrl-C handler: {e}"))?;
    let _guard = Guard;
    println!("test-hosted: creating {}", topo.describe());
    {
        // Held while creating, so a signal handler's teardown waits for the setup.
        let mut armed = ARMED.lock().unwrap_or_else(PoisonError::into_inner);
        *armed = Some(topo.clone());
        topo.setup()
    }?;

    let mut test = ws.cargo(["test", "-p", "hosted-tests", "--tests"]);
    test.env("OFI_PINGPONG", &bin).envs(topo.env());
    let result = run_bounded(&mut test, TEST_LIMIT);
    kill_tests();
    let clean = disarm();
    result.and(clean)?;
    let Some(mpi) = &mut mpi else {
        return Ok(());
    };
    println!("test-hosted: the multi-host MPI jobs (Open MPI 4.1, MPICH 5; UDP, AF_PACKET)");
    let result = run_bounded(mpi, MPI_LIMIT);
    kill_tests();
    sweep_mpi_netns();
    result
}

/// Runs `cmd` in a process group of its own, killing the group at `limit`.
fn run_bounded(cmd: &mut Command, limit: Duration) -> Result {
    let shown = cmd::display(cmd);
    println!("    $ {shown}");
    let mut child = cmd
        .stdin(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("could not start `{shown}`: {e}"))?;
    TEST_PGID.store(child.id(), Ordering::SeqCst);
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(format!("`{shown}` failed ({status})")),
            Ok(None) if started.elapsed() >= limit => {
                kill_tests();
                let _ = child.wait();
                return Err(format!("`{shown}` killed after {}s", limit.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => return Err(format!("waiting for `{shown}`: {e}")),
        }
    }
}

/// Builds `ofi-pingpong` (release, as `cargo xtask demo` does) and returns the executable
/// cargo reports.
fn build_pingpong(ws: &Workspace) -> Result<String> {
    let out = cmd::output(&mut ws.cargo([
        "build",
        "--release",
        "-p",
        "hosted",
        "--bin",
        "ofi-pingpong",
        "--message-format=json-render-diagnostics",
    ]))?;
    out.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["target"]["name"] == "ofi-pingpong" && v["executable"].is_string())
        .and_then(|v| v["executable"].as_str().map(str::to_owned))
        .ok_or_else(|| "cargo build did not report the ofi-pingpong executable".into())
}

/// Removes devices and namespaces of earlier runs whose process is gone.
fn sweep() {
    let dead = |name: &str, roles: &[&str]| -> bool {
        let Some(rest) = name.strip_prefix(PREFIX) else {
            return false;
        };
        roles.iter().any(|role| {
            rest.strip_prefix(role)
                .and_then(|pid| pid.parse::<u32>().ok())
                .is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
        })
    };
    for ns in netns_names().iter().filter(|n| dead(n, &NETNS_ROLES)) {
        println!("test-hosted: removing netns {ns} left by an earlier run");
        quiet(&["netns", "del", ns]);
    }
    for link in link_names().iter().filter(|n| dead(n, &LINK_ROLES)) {
        println!("test-hosted: removing link {link} left by an earlier run");
        quiet(&["link", "del", link]);
    }
    sweep_mpi_netns();
}

/// Removes the multi-host MPI jobs' namespaces ([`MPI_NETNS_PREFIX`]) whose test
/// process is gone (killed before its drop guards ran).
fn sweep_mpi_netns() {
    for ns in netns_names().iter().filter(|n| {
        mpi_netns_pid(n).is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
    }) {
        println!("test-hosted: removing netns {ns} left by a multi-host MPI job");
        quiet(&["netns", "del", ns]);
    }
}

/// The test process id in a multi-host MPI job's namespace name
/// (`nostd-xhost-<what>-<pid>-<host>`).
fn mpi_netns_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(MPI_NETNS_PREFIX)?;
    let mut parts = rest.rsplit('-');
    let _host = parts.next()?;
    parts.next()?.parse().ok()
}

/// The interface names of our network namespace.
fn link_names() -> Vec<String> {
    let out = Command::new("ip")
        .args(["-o", "link", "show"])
        .stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    // "3: name@peer: <FLAGS> ..."
    out.lines()
        .filter_map(|l| l.split(": ").nth(1))
        .map(|n| n.split('@').next().unwrap_or(n).to_owned())
        .collect()
}

/// The named network namespaces.
pub(crate) fn netns_names() -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .stderr(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    // "name (id: 3)" or "name"
    out.lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// `ip args`, failing with its stderr.
pub(crate) fn ip(args: &[&str]) -> Result {
    cmd_ok(Command::new("ip").args(args))
}

/// Adds network namespace `ns` with IPv6 off (devices moved in take the namespace's
/// defaults), so no router or neighbour solicitation crosses what is measured or tested.
pub(crate) fn add_netns(ns: &str) -> Result {
    ip(&["netns", "add", ns])?;
    cmd_ok(
        Command::new("ip")
            .args(["netns", "exec", ns, "sh", "-c"])
            .arg(
                "[ -d /proc/sys/net/ipv6 ] || exit 0; \
                 echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6 && \
                 echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6",
            ),
    )
}

/// Runs `c`, failing with its stderr.
fn cmd_ok(c: &mut Command) -> Result {
    let shown = cmd::display(c);
    let out = c
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("could not start `{shown}`: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "`{shown}` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// `ip args`, errors ignored (teardown of what may not exist).
pub(crate) fn quiet(args: &[&str]) {
    let _ = cmd::succeeds(Command::new("ip").args(args));
}

/// IPv6 off on an interface of our namespace (no router or neighbour solicitations).
fn no_ipv6(ifname: &str) {
    let _ = std::fs::write(
        format!("/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6"),
        "1",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_fit_ifnamsiz_and_carry_the_pid() {
        let t = Topology::new(4_194_304);
        for n in [&t.bridge, &t.taps[0], &t.taps[1], &t.veths[0], &t.veths[1]] {
            assert!(n.len() <= 15, "{n}");
            assert!(n.starts_with(PREFIX) && n.ends_with("4194304"));
        }
        assert_eq!(t.netns[0], "ofhnsa4194304");
        let env = t.env();
        assert_eq!(
            env[0],
            ("OFI_HOSTED_TAP", "ofhta4194304,ofhtb4194304".into())
        );
        assert!(t.describe().contains("ofhbr4194304"));
    }

    #[test]
    fn mpi_job_namespaces_name_their_test_process() {
        assert_eq!(mpi_netns_pid("nostd-xhost-udp-4242-h1"), Some(4242));
        assert_eq!(mpi_netns_pid("nostd-xhost-mpich-afp-17-br"), Some(17));
        assert_eq!(mpi_netns_pid("nostd-tap-4242"), None);
        assert_eq!(mpi_netns_pid("nostd-xhost-udp"), None);
    }
}
