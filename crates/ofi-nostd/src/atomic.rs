//! fi_atomic(3) arithmetic: which operations and datatypes RDM endpoints serve, and how
//! a target applies one to its memory. Memory holds native-endian elements; the wire
//! carries big-endian ones (docs/wire-protocol.md, section 7.4).
//!
//! Served: every integer type with every operation; FLOAT and DOUBLE with MIN, MAX,
//! SUM, PROD, ATOMIC_READ, ATOMIC_WRITE and the compare-and-swap family (not the
//! logical, bitwise or masked-swap operations, which libfabric defines on integers).
//! Complex types are not served (-FI_EOPNOTSUPP). At most [`MAX_ATOMIC_BYTES`] of
//! elements per operation.

use wire::packet::{AtomicDatatype as Dt, AtomicOp as Op};

use crate::errno::{Errno, Result};

#[cfg(feature = "atomic")]
mod arith;
#[cfg(feature = "atomic")]
pub use arith::apply;

/// Most bytes of elements one atomic operation carries (per operand array, and
/// fetched).
pub const MAX_ATOMIC_BYTES: usize = 64;

/// Which family of atomic calls: `fi_atomic`, `fi_fetch_atomic` or `fi_compare_atomic`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtomicKind {
    /// Updates only.
    Write,
    /// Updates (or reads) and returns the original values.
    Fetch,
    /// Compares, swaps and returns the original values.
    Compare,
}

/// `fi_atomicvalid` & co.: how many elements one call may carry, or -FI_EOPNOTSUPP.
pub fn valid(op: Op, dt: Dt, kind: AtomicKind) -> Result<usize> {
    let family = match op {
        Op::Read => kind == AtomicKind::Fetch,
        Op::Cswap
        | Op::CswapNe
        | Op::CswapLe
        | Op::CswapLt
        | Op::CswapGe
        | Op::CswapGt
        | Op::Mswap => kind == AtomicKind::Compare,
        _ => kind != AtomicKind::Compare,
    };
    let integer_only = matches!(
        op,
        Op::Lor | Op::Land | Op::Bor | Op::Band | Op::Lxor | Op::Bxor | Op::Mswap
    );
    let typed = match dt {
        Dt::ComplexF32 | Dt::ComplexF64 => false,
        Dt::F32 | Dt::F64 => !integer_only,
        _ => true,
    };
    if family && typed {
        Ok(MAX_ATOMIC_BYTES / dt.size())
    } else {
        Err(Errno::EOPNOTSUPP)
    }
}

/// Converts `n` bytes of native elements of size `size` to big-endian (or back: the
/// same byte swap), in place.
pub fn swap_order(bytes: &mut [u8], size: usize) {
    if cfg!(target_endian = "little") && size > 1 {
        for e in bytes.chunks_exact_mut(size) {
            e.reverse();
        }
    }
}

#[cfg(all(test, feature = "atomic"))]
mod tests {
    use super::*;

    fn be64(v: &[u64]) -> [u8; 16] {
        let mut b = [0u8; 16];
        for (i, x) in v.iter().enumerate() {
            b[i * 8..i * 8 + 8].copy_from_slice(&x.to_be_bytes());
        }
        b
    }

    fn run64(op: Op, old: [u64; 2], v: [u64; 2], c: [u64; 2]) -> [u64; 2] {
        let mut m = [0u8; 16];
        m[..8].copy_from_slice(&old[0].to_ne_bytes());
        m[8..].copy_from_slice(&old[1].to_ne_bytes());
        apply(op, Dt::U64, &mut m, &be64(&v), &be64(&c));
        [
            u64::from_ne_bytes(m[..8].try_into().unwrap()),
            u64::from_ne_bytes(m[8..].try_into().unwrap()),
        ]
    }

    #[test]
    fn every_integer_operation_element_by_element() {
        let (old, v) = ([5, 0b1100], [9, 0b1010]);
        let c = [5, 7];
        assert_eq!(run64(Op::Min, old, v, c), [5, 0b1010]);
        assert_eq!(run64(Op::Max, old, v, c), [9, 0b1100]);
        assert_eq!(run64(Op::Sum, old, v, c), [14, 22]);
        assert_eq!(run64(Op::Sum, [u64::MAX, 0], [2, 0], c), [1, 0]);
        assert_eq!(run64(Op::Prod, old, v, c), [45, 120]);
        assert_eq!(run64(Op::Lor, [0, 0], [0, 3], c), [0, 1]);
        assert_eq!(run64(Op::Land, [2, 0], [3, 3], c), [1, 0]);
        assert_eq!(run64(Op::Lxor, [2, 0], [3, 3], c), [0, 1]);
        assert_eq!(run64(Op::Bor, old, v, c), [13, 0b1110]);
        assert_eq!(run64(Op::Band, old, v, c), [1, 0b1000]);
        assert_eq!(run64(Op::Bxor, old, v, c), [12, 0b0110]);
        assert_eq!(run64(Op::Read, old, v, c), old);
        assert_eq!(run64(Op::Write, old, v, c), v);
        // Compare values 5 and 7 against the old 5 and 12.
        assert_eq!(run64(Op::Cswap, old, v, c), [9, 12]);
        assert_eq!(run64(Op::CswapNe, old, v, c), [5, 0b1010]);
        assert_eq!(run64(Op::CswapLe, old, v, c), [9, 0b1010]);
        assert_eq!(run64(Op::CswapLt, old, v, c), [5, 0b1010]);
        assert_eq!(run64(Op::CswapGe, old, v, c), [9, 12]);
        assert_eq!(run64(Op::CswapGt, old, v, c), [5, 12]);
        // MSWAP: take the swap's bits where the mask is set.
        assert_eq!(
            run64(Op::Mswap, [0xF0F0, 0], [0xFFFF, 0], [0x00FF, 0]),
            [0xF0FF, 0]
        );
    }

    #[test]
    fn signed_small_and_float_types() {
        let mut m = (-3i8).to_ne_bytes();
        apply(Op::Min, Dt::I8, &mut m, &(-7i8).to_be_bytes(), &[]);
        assert_eq!(i8::from_ne_bytes(m), -7);
        let mut m = 300u16.to_ne_bytes();
        apply(Op::Sum, Dt::U16, &mut m, &65_500u16.to_be_bytes(), &[]);
        assert_eq!(u16::from_ne_bytes(m), 300u16.wrapping_add(65_500));
        let mut m = (-2i32).to_ne_bytes();
        apply(
            Op::CswapLt,
            Dt::I32,
            &mut m,
            &9i32.to_be_bytes(),
            &(-5i32).to_be_bytes(),
        );
        assert_eq!(i32::from_ne_bytes(m), 9, "-5 < -2: swapped");
        let mut m = 1.5f64.to_ne_bytes();
        apply(Op::Prod, Dt::F64, &mut m, &4.0f64.to_be_bytes(), &[]);
        assert_eq!(f64::from_ne_bytes(m), 6.0);
        let mut m = 2.5f32.to_ne_bytes();
        apply(Op::Max, Dt::F32, &mut m, &(-1.0f32).to_be_bytes(), &[]);
        assert_eq!(f32::from_ne_bytes(m), 2.5);
        let mut m = 2.5f32.to_ne_bytes();
        apply(
            Op::Cswap,
            Dt::F32,
            &mut m,
            &7.0f32.to_be_bytes(),
            &2.5f32.to_be_bytes(),
        );
        assert_eq!(f32::from_ne_bytes(m), 7.0);
    }

    #[test]
    fn validity_by_family_and_type() {
        use AtomicKind::*;
        assert_eq!(valid(Op::Sum, Dt::U64, Write), Ok(8));
        assert_eq!(valid(Op::Sum, Dt::U8, Fetch), Ok(64));
        assert_eq!(valid(Op::Read, Dt::F64, Fetch), Ok(8));
        assert_eq!(valid(Op::Read, Dt::U32, Write), Err(Errno::EOPNOTSUPP));
        assert_eq!(valid(Op::Cswap, Dt::I32, Compare), Ok(16));
        assert_eq!(valid(Op::Cswap, Dt::I32, Fetch), Err(Errno::EOPNOTSUPP));
        assert_eq!(valid(Op::Sum, Dt::I32, Compare), Err(Errno::EOPNOTSUPP));
        assert_eq!(valid(Op::Bor, Dt::F32, Write), Err(Errno::EOPNOTSUPP));
        assert_eq!(valid(Op::Mswap, Dt::F64, Compare), Err(Errno::EOPNOTSUPP));
        assert_eq!(
            valid(Op::Sum, Dt::ComplexF64, Write),
            Err(Errno::EOPNOTSUPP)
        );
    }

    /// The one integer routine against each type's own arithmetic, for every operation.
    macro_rules! reference {
        ($name:ident, $t:ty, $dt:expr) => {
            proptest::proptest! {
                #[test]
                fn $name(old: $t, v: $t, c: $t, op in 0u8..19) {
                    let op = Op::from_u8(op).unwrap();
                    let b = |x: $t| x != 0;
                    let want: $t = match op {
                        Op::Min => old.min(v),
                        Op::Max => old.max(v),
                        Op::Sum => old.wrapping_add(v),
                        Op::Prod => old.wrapping_mul(v),
                        Op::Lor => (b(old) || b(v)) as $t,
                        Op::Land => (b(old) && b(v)) as $t,
                        Op::Lxor => (b(old) != b(v)) as $t,
                        Op::Bor => old | v,
                        Op::Band => old & v,
                        Op::Bxor => old ^ v,
                        Op::Read => old,
                        Op::Write => v,
                        Op::Cswap => if c == old { v } else { old },
                        Op::CswapNe => if c != old { v } else { old },
                        Op::CswapLe => if c <= old { v } else { old },
                        Op::CswapLt => if c < old { v } else { old },
                        Op::CswapGe => if c >= old { v } else { old },
                        Op::CswapGt => if c > old { v } else { old },
                        Op::Mswap => (v & c) | (old & !c),
                    };
                    let mut m = old.to_ne_bytes();
                    apply(op, $dt, &mut m, &v.to_be_bytes(), &c.to_be_bytes());
                    proptest::prop_assert_eq!(<$t>::from_ne_bytes(m), want, "{:?}", op);
                }
            }
        };
    }

    reference!(every_op_on_i8, i8, Dt::I8);
    reference!(every_op_on_u8, u8, Dt::U8);
    reference!(every_op_on_i16, i16, Dt::I16);
    reference!(every_op_on_u16, u16, Dt::U16);
    reference!(every_op_on_i32, i32, Dt::I32);
    reference!(every_op_on_u32, u32, Dt::U32);
    reference!(every_op_on_i64, i64, Dt::I64);
    reference!(every_op_on_u64, u64, Dt::U64);

    #[test]
    fn byte_order_swaps_whole_elements() {
        let mut b = [1u8, 2, 3, 4, 5, 6, 7, 8];
        swap_order(&mut b, 4);
        if cfg!(target_endian = "little") {
            assert_eq!(b, [4, 3, 2, 1, 8, 7, 6, 5]);
        } else {
            assert_eq!(b, [1, 2, 3, 4, 5, 6, 7, 8]);
        }
    }
}
