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
