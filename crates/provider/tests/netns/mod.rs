//! A network namespace with a veth pair, for the tests that run the provider on an
//! Ethernet data plane (root only). Shared by the test crates as `mod netns;`.

#![allow(dead_code)] // each test crate uses its own part

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `ip <args>`; panics with its error output unless it succeeds.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A namespace holding a veth pair `a` (at `ip_a`) and `b` (at `ip_b`) of one /24, both
/// up; deleted (with the pair) when dropped.
pub struct VethPair {
    pub ns: String,
    pub a: String,
    pub b: String,
    pub ip_a: String,
    pub ip_b: String,
}

impl VethPair {
    /// A pair in namespace `<prefix>-<pid>`, addresses in `10.<net>.<x>.0/24`.
    pub fn new(prefix: &str, net: u8) -> VethPair {
        let pid = std::process::id();
        let x = (pid % 250) as u8 + 1;
        let p = VethPair {
            ns: format!("{prefix}-{pid}"),
            a: format!("nda{pid}"),
            b: format!("ndb{pid}"),
            ip_a: format!("10.{net}.{x}.1"),
            ip_b: format!("10.{net}.{x}.2"),
        };
        let ns = p.ns.as_str();
        ip(&["netns", "add", ns]);
        ip(&["-n", ns, "link", "set", "lo", "up"]);
        ip(&[
            "-n", ns, "link", "add", &p.a, "type", "veth", "peer", "name", &p.b,
        ]);
        ip(&[
            "-n",
            ns,
            "addr",
            "add",
            &format!("{}/24", p.ip_a),
            "dev",
            &p.a,
        ]);
        ip(&[
            "-n",
            ns,
            "addr",
            "add",
            &format!("{}/24", p.ip_b),
            "dev",
            &p.b,
        ]);
        ip(&["-n", ns, "link", "set", &p.a, "up"]);
        ip(&["-n", ns, "link", "set", &p.b, "up"]);
        p
    }
}

impl Drop for VethPair {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.ns])
            .stderr(Stdio::null())
            .status();
    }
}

/// A namespace with a bridge `br0` (no address) and two interfaces `d1` (at `ip_1`) and
/// `d2` (at `ip_2`) of one /24, all up: the host interfaces TAP data planes
/// take their addresses from, while their frames go through TAP devices the test joins
/// to the bridge. Deleted (with everything in it) when dropped.
pub struct BridgeNs {
    pub ns: String,
    pub ip_1: String,
    pub ip_2: String,
}

impl BridgeNs {
    /// A bridge namespace `<prefix>-<pid>`, addresses in `10.<net>.<x>.0/24`.
    pub fn new(prefix: &str, net: u8) -> BridgeNs {
        let pid = std::process::id();
        let x = (pid % 250) as u8 + 1;
        let b = BridgeNs {
            ns: format!("{prefix}-{pid}"),
            ip_1: format!("10.{net}.{x}.1"),
            ip_2: format!("10.{net}.{x}.2"),
        };
        let ns = b.ns.as_str();
        ip(&["netns", "add", ns]);
        ip(&["-n", ns, "link", "set", "lo", "up"]);
        ip(&["-n", ns, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", ns, "link", "set", "br0", "up"]);
        // A veth pair serves as the two interfaces (kernels without the dummy driver
        // have it); no frame of the test crosses it.
        ip(&[
            "-n", ns, "link", "add", "d1", "type", "veth", "peer", "name", "d2",
        ]);
        for (d, a) in [("d1", &b.ip_1), ("d2", &b.ip_2)] {
            ip(&["-n", ns, "addr", "add", &format!("{a}/24"), "dev", d]);
            ip(&["-n", ns, "link", "set", d, "up"]);
        }
        b
    }

    /// Waits (until `deadline`) for interface `dev` to appear in the namespace, then
    /// joins it to the bridge; whether it appeared.
    pub fn join_when_present(&self, dev: &str, deadline: Instant) -> bool {
        while Instant::now() < deadline {
            let ok = Command::new("ip")
                .args(["-n", &self.ns, "link", "set", dev, "master", "br0"])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                return true;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        false
    }
}

impl Drop for BridgeNs {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.ns])
            .stderr(Stdio::null())
            .status();
    }
}

/// A child killed and reaped when dropped.
pub struct Kill(pub Option<Child>);

impl Kill {
    /// Waits until it exits or `deadline` passes (then kills it); its output.
    pub fn wait(mut self, deadline: Instant) -> Output {
        let mut c = self.0.take().expect("child");
        while c.try_wait().expect("try_wait").is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = c.kill();
        c.wait_with_output().expect("child output")
    }
}

impl Drop for Kill {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Exit status, stdout and stderr of `o`, for an assertion message.
pub fn describe(o: &Output) -> String {
    format!(
        "{}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Hosts on one Ethernet: a namespace per host (`<prefix>-<pid>-h<i>`, its interface
/// `eth0` at `10.<net>.<x>.<i>/24`, MTU 1500), their veth peers joined to a bridge in a
/// namespace of its own (`<prefix>-<pid>-br`), so nothing is added to the caller's
/// namespace. Every namespace (and so every device) is deleted when dropped.
pub struct Hosts {
    pub bridge: String,
    /// (namespace, address) of each host.
    pub hosts: Vec<(String, String)>,
}

impl Hosts {
    /// `n` hosts (at most 9).
    pub fn new(prefix: &str, net: u8, n: usize) -> Hosts {
        let pid = std::process::id();
        let x = (pid % 250) as u8 + 1;
        let mut h = Hosts {
            bridge: format!("{prefix}-{pid}-br"),
            hosts: Vec::new(),
        };
        let br = h.bridge.clone();
        ip(&["netns", "add", &br]);
        ip(&["-n", &br, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &br, "link", "set", "br0", "up"]);
        for i in 1..=n {
            let ns = format!("{prefix}-{pid}-h{i}");
            let addr = format!("10.{net}.{x}.{i}");
            ip(&["netns", "add", &ns]);
            h.hosts.push((ns.clone(), addr.clone()));
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
            let (end, port) = (format!("h{i}"), format!("p{i}"));
            ip(&[
                "-n", &br, "link", "add", &end, "type", "veth", "peer", "name", &port,
            ]);
            ip(&["-n", &br, "link", "set", &end, "netns", &ns]);
            ip(&["-n", &br, "link", "set", &port, "master", "br0"]);
            ip(&["-n", &br, "link", "set", &port, "up"]);
            ip(&["-n", &ns, "link", "set", &end, "name", "eth0"]);
            ip(&["-n", &ns, "link", "set", "eth0", "mtu", "1500", "up"]);
            ip(&[
                "-n",
                &ns,
                "addr",
                "add",
                &format!("{addr}/24"),
                "dev",
                "eth0",
            ]);
        }
        h
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for ns in self.hosts.iter().map(|(n, _)| n).chain([&self.bridge]) {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// The named network namespaces now (`ip netns list`).
pub fn names() -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .stderr(Stdio::null())
        .output()
        .expect("run ip netns list");
    // "name (id: 3)" or "name"
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}
