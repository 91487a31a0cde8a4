//! The wide path against the `polyval` crate: every length from 0 to 1,100 bytes (two
//! whole steps and every tail: lone first block, padding), random keys and inputs up
//! to 64 KiB.

use polyval::Polyval;
use polyval::universal_hash::UniversalHash;
use proptest::prelude::*;

use super::WideKey;

extern crate std;
use std::vec::Vec;

fn reference(h: [u8; 16], data: &[u8], last: [u8; 16]) -> [u8; 16] {
    let mut p = Polyval::new(&h.into());
    p.update_padded(data);
    p.update(&[last.into()]);
    p.finalize().into()
}

fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn every_length_matches_the_crate() {
    let key = WideKey::new([0x25; 16]);
    if key.hash(&[], [0; 16]).is_none() {
        std::eprintln!("no AVX-512 VPCLMULQDQ here: the wide path is not tested");
        return;
    }
    let h: [u8; 16] = core::array::from_fn(|i| bytes(7, 16)[i]);
    let key = WideKey::new(h);
    let data = bytes(11, 1100);
    for n in 0..=1100 {
        let last = [n as u8; 16];
        assert_eq!(
            key.hash(&data[..n], last),
            Some(reference(h, &data[..n], last)),
            "length {n}"
        );
    }
}

#[test]
fn rfc_8452_polyval_example() {
    // RFC 8452 appendix A: POLYVAL(H, X_1, X_2).
    let h = hex(b"25629347589242761d31f826ba4b757b");
    let x1 = hex(b"4f4f95668c83dfb6401762bb2d01a262");
    let x2 = hex(b"d1a24ddd2721d006bbe45f20d3c9f362");
    let want = hex(b"f7a3b47b846119fae5b7866cf5e5b77e");
    let key = WideKey::new(h);
    match key.hash(&x1, x2) {
        Some(got) => assert_eq!(got, want),
        None => std::eprintln!("no AVX-512 VPCLMULQDQ here: the wide path is not tested"),
    }
    assert_eq!(reference(h, &x1, x2), want, "the reference itself");
}

fn hex(s: &[u8; 32]) -> [u8; 16] {
    core::array::from_fn(|i| {
        let d = |c: u8| (c as char).to_digit(16).unwrap() as u8;
        d(s[2 * i]) << 4 | d(s[2 * i + 1])
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn random_keys_and_inputs_match_the_crate(
        h in any::<[u8; 16]>(),
        last in any::<[u8; 16]>(),
        seed in any::<u64>(),
        n in 0usize..65_536,
    ) {
        let data = bytes(seed, n);
        let key = WideKey::new(h);
        if let Some(got) = key.hash(&data, last) {
            prop_assert_eq!(got, reference(h, &data, last));
        }
    }
}
