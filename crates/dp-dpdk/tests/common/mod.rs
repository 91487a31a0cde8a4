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
