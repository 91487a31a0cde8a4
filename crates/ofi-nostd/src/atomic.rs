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

/// Applies `op` to the native elements in `mem` (updated in place) with the big-endian
/// elements of `operand` (the swap values, or the value to combine) and `compare` (the
/// compare values, or the mask of MSWAP). `mem`'s length is a whole number of elements;
/// the operands are as long (or empty when `op` takes none). The caller checked
/// [`valid`].
pub fn apply(op: Op, dt: Dt, mem: &mut [u8], operand: &[u8], compare: &[u8]) {
    match dt {
        Dt::I8 => int::<i8, 1>(op, mem, operand, compare),
        Dt::U8 => int::<u8, 1>(op, mem, operand, compare),
        Dt::I16 => int::<i16, 2>(op, mem, operand, compare),
        Dt::U16 => int::<u16, 2>(op, mem, operand, compare),
        Dt::I32 => int::<i32, 4>(op, mem, operand, compare),
        Dt::U32 => int::<u32, 4>(op, mem, operand, compare),
        Dt::I64 => int::<i64, 8>(op, mem, operand, compare),
        Dt::U64 => int::<u64, 8>(op, mem, operand, compare),
        Dt::F32 => float::<f32, 4>(op, mem, operand, compare),
        Dt::F64 => float::<f64, 8>(op, mem, operand, compare),
        Dt::ComplexF32 | Dt::ComplexF64 => {}
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

/// An element type: its bytes both ways and the operations all types share.
trait Elem: Copy + PartialOrd {
    fn from_ne(b: &[u8]) -> Self;
    fn from_be(b: &[u8]) -> Self;
    fn put_ne(self, b: &mut [u8]);
    fn sum(self, o: Self) -> Self;
    fn prod(self, o: Self) -> Self;
}

/// Integer elements add the logical and bitwise operations.
trait Int: Elem {
    fn zero() -> Self;
    fn one() -> Self;
    fn or(self, o: Self) -> Self;
    fn and(self, o: Self) -> Self;
    fn xor(self, o: Self) -> Self;
    fn not(self) -> Self;
}

macro_rules! elem {
    ($($t:ty: $n:literal, $sum:ident, $prod:ident);* $(;)?) => {$(
        impl Elem for $t {
            fn from_ne(b: &[u8]) -> Self {
                let mut a = [0u8; $n];
                a.copy_from_slice(&b[..$n]);
                <$t>::from_ne_bytes(a)
            }
            fn from_be(b: &[u8]) -> Self {
                let mut a = [0u8; $n];
                a.copy_from_slice(&b[..$n]);
                <$t>::from_be_bytes(a)
            }
            fn put_ne(self, b: &mut [u8]) {
                b[..$n].copy_from_slice(&self.to_ne_bytes());
            }
            fn sum(self, o: Self) -> Self {
                elem!(@op $sum self o)
            }
            fn prod(self, o: Self) -> Self {
                elem!(@op $prod self o)
            }
        }
    )*};
    (@op wrapping_add $a:ident $b:ident) => { $a.wrapping_add($b) };
    (@op wrapping_mul $a:ident $b:ident) => { $a.wrapping_mul($b) };
    (@op add $a:ident $b:ident) => { $a + $b };
    (@op mul $a:ident $b:ident) => { $a * $b };
}

elem! {
    i8: 1, wrapping_add, wrapping_mul;
    u8: 1, wrapping_add, wrapping_mul;
    i16: 2, wrapping_add, wrapping_mul;
    u16: 2, wrapping_add, wrapping_mul;
    i32: 4, wrapping_add, wrapping_mul;
    u32: 4, wrapping_add, wrapping_mul;
    i64: 8, wrapping_add, wrapping_mul;
    u64: 8, wrapping_add, wrapping_mul;
    f32: 4, add, mul;
    f64: 8, add, mul;
}

macro_rules! int {
    ($($t:ty),*) => {$(
        impl Int for $t {
            fn zero() -> Self { 0 }
            fn one() -> Self { 1 }
            fn or(self, o: Self) -> Self { self | o }
            fn and(self, o: Self) -> Self { self & o }
            fn xor(self, o: Self) -> Self { self ^ o }
            fn not(self) -> Self { !self }
        }
    )*};
}

int!(i8, u8, i16, u16, i32, u32, i64, u64);

/// The compare-and-swap family and the operations every type shares: the new value,
/// or `None` for an operation only integers have.
fn common<T: Elem>(op: Op, old: T, v: T, c: T) -> Option<T> {
    let swap_if = |cond: bool| if cond { v } else { old };
    Some(match op {
        Op::Min => {
            if v < old {
                v
            } else {
                old
            }
        }
        Op::Max => {
            if v > old {
                v
            } else {
                old
            }
        }
        Op::Sum => old.sum(v),
        Op::Prod => old.prod(v),
        Op::Read => old,
        Op::Write => v,
        Op::Cswap => swap_if(c == old),
        Op::CswapNe => swap_if(c != old),
        Op::CswapLe => swap_if(c <= old),
        Op::CswapLt => swap_if(c < old),
        Op::CswapGe => swap_if(c >= old),
        Op::CswapGt => swap_if(c > old),
        _ => return None,
    })
}

fn int<T: Int, const N: usize>(op: Op, mem: &mut [u8], operand: &[u8], compare: &[u8]) {
    for (i, m) in mem.chunks_exact_mut(N).enumerate() {
        let old = T::from_ne(m);
        let v = operand.get(i * N..(i + 1) * N).map_or(old, T::from_be);
        let c = compare.get(i * N..(i + 1) * N).map_or(old, T::from_be);
        let truth = |x: T| x != T::zero();
        let bool_of = |b: bool| if b { T::one() } else { T::zero() };
        let new = common(op, old, v, c).unwrap_or_else(|| match op {
            Op::Lor => bool_of(truth(old) || truth(v)),
            Op::Land => bool_of(truth(old) && truth(v)),
            Op::Lxor => bool_of(truth(old) != truth(v)),
            Op::Bor => old.or(v),
            Op::Band => old.and(v),
            Op::Bxor => old.xor(v),
            // MSWAP: the compare array is the mask of the bits to take from the swap.
            Op::Mswap => v.and(c).or(old.and(c.not())),
            _ => old,
        });
        new.put_ne(m);
    }
}

fn float<T: Elem, const N: usize>(op: Op, mem: &mut [u8], operand: &[u8], compare: &[u8]) {
    for (i, m) in mem.chunks_exact_mut(N).enumerate() {
        let old = T::from_ne(m);
        let v = operand.get(i * N..(i + 1) * N).map_or(old, T::from_be);
        let c = compare.get(i * N..(i + 1) * N).map_or(old, T::from_be);
        common(op, old, v, c).unwrap_or(old).put_ne(m);
    }
}

#[cfg(test)]
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
