//! Shared by the DPDK tests: EAL arguments, frame contents, device guards.

#![allow(dead_code)] // each test file uses a part

use dp_dpdk::Eal;

/// EAL for tests: no hugepages, no PCI, no shared files, a unique file prefix, 256 MB.
pub fn eal() -> &'static Eal {
    Eal::init(dp_dpdk::virtual_device_args(256)).unwrap_or_else(|e| panic!("EAL: {e}"))
}

/// Fill a frame with a pattern derived from `seq` (sequence number in bytes 0..4).
pub fn fill(buf: &mut [u8], seq: u32) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(31).wrapping_add(seq) as u8;
    }
    if buf.len() >= 4 {
        buf[..4].copy_from_slice(&seq.to_be_bytes());
    }
}

/// The frame is what `fill(_, seq)` wrote.
pub fn frame_ok(f: &[u8], seq: u32) -> bool {
    let mut want = vec![0u8; f.len()];
    fill(&mut want, seq);
    f == want.as_slice()
}

/// Our test EtherType (IEEE "local experimental 1").
pub const ETHERTYPE_TEST: u16 = 0x88b5;
/// The EtherType of the frame that tells an echo peer to stop ("local experimental 2").
pub const ETHERTYPE_STOP: u16 = 0x88b6;

/// Write an Ethernet header (`dst`, `src`, `ethertype`) and a `fill(seq)` payload over
/// the whole of `buf`.
pub fn eth_frame(buf: &mut [u8], dst: [u8; 6], src: [u8; 6], ethertype: u16, seq: u32) {
    buf[..6].copy_from_slice(&dst);
    buf[6..12].copy_from_slice(&src);
    buf[12..14].copy_from_slice(&ethertype.to_be_bytes());
    fill(&mut buf[14..], seq);
}

/// The EtherType of a frame (0 if too short).
pub fn ethertype(f: &[u8]) -> u16 {
    if f.len() < 14 {
        0
    } else {
        u16::from_be_bytes([f[12], f[13]])
    }
}

/// A directory under the system temp dir, removed (with its contents) when dropped.
pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    /// A new empty directory named after `what`, the pid and the time.
    pub fn new(what: &str) -> Self {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let p = std::env::temp_dir().join(format!("dp-dpdk-{what}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).expect("create temp dir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A child process killed (and reaped) when dropped, unless waited for already.
pub struct ChildGuard(pub Option<std::process::Child>);

impl ChildGuard {
    /// Wait for the child to exit on its own, at most `timeout`.
    pub fn wait_timeout(&mut self, timeout: std::time::Duration) -> std::process::ExitStatus {
        let deadline = std::time::Instant::now() + timeout;
        let child = self.0.as_mut().expect("child already reaped");
        loop {
            if let Some(st) = child.try_wait().expect("try_wait") {
                self.0 = None;
                return st;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "child did not exit within {timeout:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Percentile `p` (0..=100) of sorted samples.
pub fn percentile(sorted: &[std::time::Duration], p: usize) -> std::time::Duration {
    if sorted.is_empty() {
        return std::time::Duration::ZERO;
    }
    sorted[(sorted.len() - 1) * p / 100]
}

/// Whether we may create network devices and namespaces; prints the notice when not.
pub fn root_or_skip(test: &str) -> bool {
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        println!("{test}: skipped, needs root to create network namespaces and veth pairs");
    }
    root
}

/// Whether this kernel has AF_XDP sockets (`CONFIG_XDP_SOCKETS`), which `net_af_xdp`
/// needs; prints the notice when it has not. Call it as root (the socket needs
/// `CAP_NET_RAW`): any failure other than "address family not supported" is left for
/// the driver to report.
pub fn af_xdp_or_skip(test: &str) -> bool {
    // SAFETY: plain socket creation; the descriptor is closed below.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW, 0) };
    let err = std::io::Error::last_os_error();
    if fd >= 0 {
        // SAFETY: our descriptor, closed once.
        unsafe { libc::close(fd) };
        return true;
    }
    if err.raw_os_error() == Some(libc::EAFNOSUPPORT) {
        println!("{test}: skipped, this kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS)");
        return false;
    }
    true
}

/// Run `ip args...`, panicking with its stderr on failure.
pub fn ip(args: &[&str]) {
    let out = std::process::Command::new("ip")
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run ip (iproute2)");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Deletes, when dropped, the network namespace and the links it names (errors
/// ignored: a veth end goes with its pair, or with its namespace).
pub struct NetGuard {
    /// Namespaces to delete.
    pub netns: Vec<String>,
    /// Links (in the root namespace) to delete.
    pub links: Vec<String>,
}

impl Drop for NetGuard {
    fn drop(&mut self) {
        let quiet = |args: &[&str]| {
            let _ = std::process::Command::new("ip")
                .args(args)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .status();
        };
        for l in &self.links {
            quiet(&["link", "del", l]);
        }
        for n in &self.netns {
            quiet(&["netns", "del", n]);
        }
    }
}

/// Read /sys/class/net/<name>/<attr> (root namespace), trimmed.
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

/// Move the calling thread into network namespace `name` (`ip netns` made it).
pub fn enter_netns(name: &str) {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(format!("/var/run/netns/{name}")).expect("open netns");
    // SAFETY: a valid namespace descriptor; only the calling thread changes namespace.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
}

/// Turn transmit checksum offload off on `ifname` (of the calling thread's namespace)
/// with the ethtool ioctl, so the kernel's frames leave it with their UDP checksum
/// filled in (a veth would otherwise hand AF_PACKET readers a partial checksum).
pub fn tx_checksum_off(ifname: &str) {
    const ETHTOOL_STXCSUM: u32 = 0x17;
    #[repr(C)]
    struct EthtoolValue {
        cmd: u32,
        data: u32,
    }
    let mut v = EthtoolValue {
        cmd: ETHTOOL_STXCSUM,
        data: 0,
    };
    // SAFETY: an all-zero ifreq is valid.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(ifname.bytes()) {
        *d = s as libc::c_char;
    }
    ifr.ifr_ifru.ifru_data = (&raw mut v).cast();
    // SAFETY: a datagram socket only to carry the ioctl; closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0) };
    assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
    // SAFETY: SIOCETHTOOL with an ifreq whose data points at a live ethtool_value.
    let r = unsafe { libc::ioctl(fd, libc::SIOCETHTOOL, &mut ifr) };
    let err = std::io::Error::last_os_error();
    // SAFETY: our descriptor, closed once.
    unsafe { libc::close(fd) };
    assert_eq!(r, 0, "ETHTOOL_STXCSUM on {ifname}: {err}");
}
