//! The per-packet MAC's candidates (wire protocol 4.10), as one packet costs them: the
//! tag of `size` bytes under a key set up once per session, at the sizes a packet has
//! (a 64 B message, MTU 1500 and 9000 datagrams, a loopback 64 KiB datagram).
//!
//! - `blake3`: BLAKE3 in keyed mode, as the core builds it (no `std`; its SIMD is
//!   chosen at run time through CPUID either way, `cpufeatures`).
//! - `polyval_aes`: POLYVAL (CLMUL / PMULL) over the packet and its length, then one
//!   AES-128 block: the tag of AES-GCM-SIV without its nonce, what 4.10 uses.
//! - `polyval_wide_aes`: the same tag with `polyval-wide` (AVX-512 VPCLMULQDQ, thirty-two
//!   blocks per reduction) where the CPU has it: what 4.10 computes on such a CPU.
//! - `poly1305_aes`: Poly1305 (AVX2) under a fixed `r`, then one AES-128 block.
//!
//! Criterion ids `mac/<candidate>/<size>`. With `MAC_BENCH_RUN=<candidate>:<size>:<n>`
//! in the environment the binary computes `n` tags untimed and exits, for instruction
//! counts (`valgrind --tool=callgrind target/release/deps/mac-*`, two values of `n`).

#![allow(missing_docs)] // criterion_main! generates an undocumented `main`.

use std::hint::black_box;

use aes::Aes128Enc;
use aes::cipher::{BlockCipherEncrypt, KeyInit};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use poly1305::Poly1305;
use polyval::Polyval;
use polyval::universal_hash::UniversalHash;
use polyval_wide::WideKey;

/// Packet sizes: a 64 B message with its headers, MTU 1500 and 9000 UDP payloads, a
/// loopback datagram.
const SIZES: [usize; 4] = [112, 1472, 8972, 65_000];

const CANDIDATES: [&str; 4] = ["blake3", "polyval_aes", "polyval_wide_aes", "poly1305_aes"];

/// A session's key material, set up once.
struct Keys {
    blake3: [u8; 32],
    polyval: Polyval,
    wide: WideKey,
    aes: Aes128Enc,
    r: [u8; 32],
}

fn keys() -> Keys {
    let k: [u8; 32] = core::array::from_fn(|i| (i as u8).wrapping_mul(37) ^ 0x5a);
    let h: [u8; 16] = core::array::from_fn(|i| k[i + 16]);
    let a: [u8; 16] = core::array::from_fn(|i| k[i]);
    let mut r = [0u8; 32];
    r[..16].copy_from_slice(&h);
    Keys {
        blake3: k,
        polyval: Polyval::new(&h.into()),
        wide: WideKey::new(h),
        aes: Aes128Enc::new(&a.into()),
        r,
    }
}

/// The tag of `data` under candidate `which`.
#[inline(always)]
fn tag(keys: &Keys, which: &str, data: &[u8]) -> [u8; 16] {
    match which {
        "blake3" => {
            let h = blake3::keyed_hash(&keys.blake3, data);
            let mut t = [0u8; 16];
            t.copy_from_slice(&h.as_bytes()[..16]);
            t
        }
        "polyval_aes" => {
            let mut p = keys.polyval.clone();
            p.update_padded(data);
            let mut len = [0u8; 16];
            len[..8].copy_from_slice(&((data.len() as u64) * 8).to_le_bytes());
            p.update(&[len.into()]);
            let mut b = p.finalize();
            keys.aes.encrypt_block(&mut b);
            b.into()
        }
        "polyval_wide_aes" => {
            let mut len = [0u8; 16];
            len[..8].copy_from_slice(&((data.len() as u64) * 8).to_le_bytes());
            // Where the CPU has no AVX-512 VPCLMULQDQ, the crate's (what the core does).
            let mut b = match keys.wide.hash(data, len) {
                Some(x) => x.into(),
                None => {
                    let mut p = keys.polyval.clone();
                    p.update_padded(data);
                    p.update(&[len.into()]);
                    p.finalize()
                }
            };
            keys.aes.encrypt_block(&mut b);
            b.into()
        }
        _ => {
            let p = Poly1305::new(&keys.r.into());
            let mut b = p.compute_unpadded(data);
            keys.aes.encrypt_block(&mut b);
            b.into()
        }
    }
}

fn packet(size: usize) -> Vec<u8> {
    (0..size).map(|i| (i * 131 + 7) as u8).collect()
}

fn bench(c: &mut Criterion) {
    let keys = keys();
    let mut g = c.benchmark_group("mac");
    for size in SIZES {
        let data = packet(size);
        g.throughput(Throughput::Bytes(size as u64));
        for which in CANDIDATES {
            g.bench_with_input(BenchmarkId::new(which, size), &data, |b, d| {
                b.iter(|| tag(&keys, which, black_box(d)))
            });
        }
    }
    g.finish();
}

criterion_group!(benches, bench);

fn main() {
    if let Ok(spec) = std::env::var("MAC_BENCH_RUN") {
        let mut it = spec.split(':');
        let which = it.next().unwrap_or("polyval_aes").to_owned();
        let size: usize = it.next().and_then(|s| s.parse().ok()).unwrap_or(112);
        let n: usize = it.next().and_then(|s| s.parse().ok()).unwrap_or(1000);
        let keys = keys();
        let mut data = packet(size);
        let mut acc = 0u8;
        for i in 0..n {
            data[0] = i as u8;
            acc ^= tag(&keys, &which, black_box(&data))[0];
        }
        println!("{which} {size} B x {n}: {acc}");
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
