//! POLYVAL (RFC 8452) of long inputs thirty-two 16-byte blocks per step: AVX-512
//! VPCLMULQDQ multiplies four 128-bit lanes per instruction, the thirty-two products are
//! summed unreduced and reduced once. The `polyval` crate multiplies one lane at a
//! time (about 1.1 instructions per byte); a MAC over 64 KiB loopback datagrams then
//! costs more than the copies it rides with. Same function (the tests check every
//! length against the crate); [`WideKey::hash`] says `None` where the CPU lacks the
//! instructions (other architectures, Miri, older x86), and the caller uses the crate.
#![no_std]

use polyval::hazmat::FieldElement;

/// Blocks per step.
const BLOCKS: usize = 32;
/// 512-bit vectors per step.
const VECS: usize = BLOCKS / 4;
/// Bytes per step.
const STEP: usize = 16 * BLOCKS;

/// A POLYVAL key ready for the wide path: H^32, H^31, ..., H^1 (POLYVAL products), the
/// order the thirty-two blocks of one step take them.
#[derive(Clone)]
pub struct WideKey {
    pow: [[u8; 16]; BLOCKS],
    usable: bool,
}

impl WideKey {
    /// The key `h`; its powers are computed once here.
    pub fn new(h: [u8; 16]) -> WideKey {
        let base = FieldElement::from(h);
        let mut pow = [[0u8; 16]; BLOCKS];
        let mut x = base;
        for slot in pow.iter_mut().rev() {
            *slot = x.into();
            x *= base;
        }
        WideKey {
            pow,
            usable: imp::usable(),
        }
    }

    /// POLYVAL_H of `data` zero-padded to whole blocks, then of the block `last`;
    /// `None` when this CPU has no wide path.
    #[inline]
    pub fn hash(&self, data: &[u8], last: [u8; 16]) -> Option<[u8; 16]> {
        if !self.usable {
            return None;
        }
        Some(imp::hash(&self.pow, data, last))
    }
}

impl core::fmt::Debug for WideKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Key material stays out of logs.
        f.write_str("WideKey(..)")
    }
}

#[cfg(all(target_arch = "x86_64", not(miri)))]
mod imp {
    use core::arch::x86_64::*;

    use super::{BLOCKS, STEP, VECS};

    cpufeatures::new!(vpclmul, "avx512f", "vpclmulqdq", "pclmulqdq");

    pub(super) fn usable() -> bool {
        vpclmul::get()
    }

    pub(super) fn hash(pow: &[[u8; 16]; BLOCKS], data: &[u8], last: [u8; 16]) -> [u8; 16] {
        debug_assert!(usable());
        // SAFETY: only reached through a `WideKey` whose `usable` is true: CPUID says
        // this CPU has AVX-512F, VPCLMULQDQ and PCLMULQDQ and XCR0 says the OS saves
        // the ZMM state (cpufeatures).
        unsafe { hash_wide(pow, data, last) }
    }

    /// The reduction: (hi · x^128 + lo) · x^-128 mod P, P = x^128 + x^127 + x^126 +
    /// x^121 + 1, in two 64-bit folds (each cancels the low 64 bits with a multiple
    /// of P and divides by x^64; x^121 + x^126 + x^127 = x^64 · 0xC2 << 56).
    #[inline]
    #[target_feature(enable = "pclmulqdq")]
    fn reduce(hi: __m128i, lo: __m128i) -> __m128i {
        let c = _mm_set_epi64x(0, 0xC200_0000_0000_0000_u64 as i64);
        let a = _mm_xor_si128(
            _mm_shuffle_epi32(lo, 0x4E),
            _mm_clmulepi64_si128(lo, c, 0x00),
        );
        let b = _mm_xor_si128(_mm_shuffle_epi32(a, 0x4E), _mm_clmulepi64_si128(a, c, 0x00));
        _mm_xor_si128(b, hi)
    }

    /// The XOR of a vector's four 128-bit lanes.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn fold(v: __m512i) -> __m128i {
        let a = _mm_xor_si128(
            _mm512_extracti32x4_epi32(v, 0),
            _mm512_extracti32x4_epi32(v, 1),
        );
        let b = _mm_xor_si128(
            _mm512_extracti32x4_epi32(v, 2),
            _mm512_extracti32x4_epi32(v, 3),
        );
        _mm_xor_si128(a, b)
    }

    /// One step: `s` · `s_pow` + the [`BLOCKS`] blocks at `x` times H^32 .. H^1 (`p`;
    /// `pk` holds each power's two halves XORed, in its low half), reduced once. The
    /// blocks' products do not depend on `s`, so only its own product and the
    /// reduction are on the chain from one step to the next. Karatsuba: three
    /// carry-less products per block, the middle one of the halves' XORs.
    #[inline]
    #[target_feature(enable = "avx512f,vpclmulqdq,pclmulqdq")]
    fn step(
        x: &[u8; STEP],
        p: &[__m512i; VECS],
        pk: &[__m512i; VECS],
        s: __m128i,
        s_pow: __m128i,
    ) -> __m128i {
        let (mut lo, mut mid, mut hi) = (
            _mm512_setzero_si512(),
            _mm512_setzero_si512(),
            _mm512_setzero_si512(),
        );
        for i in 0..VECS {
            // SAFETY: `x` is STEP = VECS × 64 bytes; an unaligned 64-byte load in bounds.
            let xi = unsafe { _mm512_loadu_si512(x.as_ptr().add(64 * i).cast()) };
            let xk = _mm512_xor_si512(xi, _mm512_shuffle_epi32(xi, _MM_PERM_BADC));
            lo = _mm512_xor_si512(lo, _mm512_clmulepi64_epi128(xi, p[i], 0x00));
            hi = _mm512_xor_si512(hi, _mm512_clmulepi64_epi128(xi, p[i], 0x11));
            mid = _mm512_xor_si512(mid, _mm512_clmulepi64_epi128(xk, pk[i], 0x00));
        }
        let mid = _mm512_xor_si512(mid, _mm512_xor_si512(lo, hi));
        let lo = _mm_xor_si128(fold(lo), _mm_clmulepi64_si128(s, s_pow, 0x00));
        let hi = _mm_xor_si128(fold(hi), _mm_clmulepi64_si128(s, s_pow, 0x11));
        let mid = _mm_xor_si128(
            fold(mid),
            _mm_xor_si128(
                _mm_clmulepi64_si128(s, s_pow, 0x01),
                _mm_clmulepi64_si128(s, s_pow, 0x10),
            ),
        );
        reduce(
            _mm_xor_si128(hi, _mm_srli_si128(mid, 8)),
            _mm_xor_si128(lo, _mm_slli_si128(mid, 8)),
        )
    }

    #[target_feature(enable = "avx512f,vpclmulqdq,pclmulqdq")]
    fn hash_wide(pow: &[[u8; 16]; BLOCKS], data: &[u8], last: [u8; 16]) -> [u8; 16] {
        let load = |k: usize| {
            // SAFETY: `pow` is BLOCKS × 16 = VECS × 64 contiguous bytes; 64 from 64·k, k < VECS.
            unsafe { _mm512_loadu_si512(pow.as_ptr().cast::<u8>().add(64 * k).cast()) }
        };
        let p: [__m512i; VECS] = core::array::from_fn(load);
        let pk = p.map(|v| _mm512_xor_si512(v, _mm512_shuffle_epi32(v, _MM_PERM_BADC)));
        let power = |k: usize| {
            // H^k, 1 <= k <= 32. SAFETY: `pow[BLOCKS - k]` is 16 bytes; unaligned load.
            unsafe { _mm_loadu_si128(pow[BLOCKS - k].as_ptr().cast()) }
        };
        let mut s = _mm_setzero_si128();
        let mut steps = data.chunks_exact(STEP);
        for c in &mut steps {
            let Ok(c) = <&[u8; STEP]>::try_from(c) else {
                continue;
            };
            s = step(c, &p, &pk, s, power(BLOCKS));
        }
        // The tail: the rest in whole blocks (the last zero-padded), then `last`; at
        // most 33 blocks. The first goes alone when there are 33; the others end a
        // zeroed step (zero blocks add nothing), and `s` takes H^k for k of them.
        let rest = steps.remainder();
        let mut blocks = rest.len().div_ceil(16) + 1;
        let mut buf = [0u8; STEP];
        let mut from = rest;
        if blocks > BLOCKS {
            let mut b = [0u8; STEP];
            b[STEP - 16..].copy_from_slice(&from[..16]);
            s = step(&b, &p, &pk, s, power(1));
            from = &from[16..];
            blocks -= 1;
        }
        let at = STEP - 16 * blocks;
        buf[at..at + from.len()].copy_from_slice(from);
        buf[STEP - 16..].copy_from_slice(&last);
        s = step(&buf, &p, &pk, s, power(blocks));
        let mut out = [0u8; 16];
        // SAFETY: `out` is 16 writable bytes; the store is unaligned.
        unsafe { _mm_storeu_si128(out.as_mut_ptr().cast(), s) };
        out
    }
}

#[cfg(not(all(target_arch = "x86_64", not(miri))))]
mod imp {
    pub(super) fn usable() -> bool {
        false
    }

    pub(super) fn hash(_: &[[u8; 16]; super::BLOCKS], _: &[u8], _: [u8; 16]) -> [u8; 16] {
        unreachable!("no wide path on this target")
    }
}

#[cfg(test)]
mod tests;
