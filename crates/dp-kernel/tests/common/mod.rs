//! Helpers for the tests that create network devices: a root check, `ip` and a guard
//! that deletes what a test created, also when it fails.

#![allow(dead_code)] // each test file uses a part

use std::process::{Command, Stdio};

/// Whether we may create devices; prints the one-line notice when not.
pub fn root_or_skip(test: &str) -> bool {
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        println!("{test}: skipped, needs root to create network devices");
    }
    root
}

/// Run `ip args...`, panicking with its stderr on failure.
pub fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run ip (iproute2)");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Write a per-interface sysctl under /proc/sys (only ever for our own devices); a
/// missing file (IPv6 disabled in the kernel) is fine.
pub fn sysctl(path: &str, value: &str) {
    let p = format!("/proc/sys/{path}");
    if std::path::Path::new(&p).exists() {
        std::fs::write(&p, value).unwrap_or_else(|e| panic!("write {p}: {e}"));
    }
}

/// Deletes the named links when dropped (errors ignored: a device may be gone already,
/// e.g. a veth peer deleted with its pair, or a TAP closed with its descriptor).
pub struct LinkGuard(pub Vec<String>);

impl Drop for LinkGuard {
    fn drop(&mut self) {
        for name in &self.0 {
            let _ = Command::new("ip")
                .args(["link", "del", name])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Read /sys/class/net/<name>/<attr>, trimmed.
pub fn sys_class_net(name: &str, attr: &str) -> String {
    std::fs::read_to_string(format!("/sys/class/net/{name}/{attr}"))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// Parse "aa:bb:cc:dd:ee:ff".
pub fn parse_mac(s: &str) -> [u8; 6] {
    let mut mac = [0u8; 6];
    for (d, p) in mac.iter_mut().zip(s.split(':')) {
        *d = u8::from_str_radix(p, 16).expect("hex MAC");
    }
    mac
}
