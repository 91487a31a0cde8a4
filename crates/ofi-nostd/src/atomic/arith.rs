//! The arithmetic of atomic operations on a target's memory (only in builds that serve
//! FI_ATOMIC: the `atomic` feature).

use wire::packet::{AtomicDatatype as Dt, AtomicOp as Op};

/// Applies `op` to the native elements in `mem` (updated in place) with the big-endian
/// elements of `operand` (the swap values, or the value to combine) and `compare` (the
/// compare values, or the mask of MSWAP). `mem`'s length is a whole number of elements;
/// the operands are as long (or empty when `op` takes none). The caller checked
/// [`super::valid`].
pub fn apply(op: Op, dt: Dt, mem: &mut [u8], operand: &[u8], compare: &[u8]) {
    match dt {
        Dt::I8 | Dt::I16 | Dt::I32 | Dt::I64 => int(op, dt.size(), true, mem, operand, compare),
        Dt::U8 | Dt::U16 | Dt::U32 | Dt::U64 => int(op, dt.size(), false, mem, operand, compare),
        Dt::F32 => float::<f32, 4>(op, mem, operand, compare),
        Dt::F64 => float::<f64, 8>(op, mem, operand, compare),
        Dt::ComplexF32 | Dt::ComplexF64 => {}
    }
}

/// An element type: its bytes both ways and the operations all types share.
trait Arith: Copy + PartialOrd {
    fn sum(self, o: Self) -> Self;
    fn prod(self, o: Self) -> Self;
}

/// A float element: its bytes both ways.
trait Elem: Arith {
    fn from_ne(b: &[u8]) -> Self;
    fn from_be(b: &[u8]) -> Self;
    fn put_ne(self, b: &mut [u8]);
}

macro_rules! elem {
    ($($t:ty: $n:literal, $sum:ident, $prod:ident);* $(;)?) => {$(
        impl Arith for $t {
            fn sum(self, o: Self) -> Self {
                elem!(@op $sum self o)
            }
            fn prod(self, o: Self) -> Self {
                elem!(@op $prod self o)
            }
        }

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
        }
    )*};
    (@op add $a:ident $b:ident) => { $a + $b };
    (@op mul $a:ident $b:ident) => { $a * $b };
}

elem! {
    f32: 4, add, mul;
    f64: 8, add, mul;
}

/// The compare-and-swap family and the operations every type shares: the new value,
/// or `None` for an operation only integers have.
fn common<T: Arith>(op: Op, old: T, v: T, c: T) -> Option<T> {
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

/// An integer element of `size` bytes widened to 64 bits: sign-extended when `signed`
/// (so it orders as its type does); wrapping arithmetic on the widened values truncates
/// back exactly. One routine serves every integer type (firmware code size).
#[derive(Clone, Copy, PartialEq, PartialOrd)]
enum Wide {
    S(i64),
    U(u64),
}

impl Wide {
    fn bits(self) -> u64 {
        match self {
            Wide::S(v) => v as u64,
            Wide::U(v) => v,
        }
    }

    fn with(self, bits: u64) -> Wide {
        match self {
            Wide::S(_) => Wide::S(bits as i64),
            Wide::U(_) => Wide::U(bits),
        }
    }
}

impl Arith for Wide {
    fn sum(self, o: Self) -> Self {
        self.with(self.bits().wrapping_add(o.bits()))
    }
    fn prod(self, o: Self) -> Self {
        self.with(self.bits().wrapping_mul(o.bits()))
    }
}

/// `b`'s first `size` bytes as an integer, big-endian or native.
fn load(b: &[u8], size: usize, signed: bool, big_endian: bool) -> Wide {
    let mut v = 0u64;
    for i in 0..size {
        let at = if big_endian || cfg!(target_endian = "big") {
            i
        } else {
            size - 1 - i
        };
        v = (v << 8) | u64::from(b[at]);
    }
    if signed {
        let shift = 64 - 8 * size as u32;
        Wide::S(((v << shift) as i64) >> shift)
    } else {
        Wide::U(v)
    }
}

/// Stores the low `size` bytes of `v` natively into `b`.
fn store(b: &mut [u8], size: usize, v: Wide) {
    let bits = v.bits();
    for i in 0..size {
        let at = if cfg!(target_endian = "big") {
            size - 1 - i
        } else {
            i
        };
        b[at] = (bits >> (8 * i)) as u8;
    }
}

fn int(op: Op, size: usize, signed: bool, mem: &mut [u8], operand: &[u8], compare: &[u8]) {
    for (i, m) in mem.chunks_exact_mut(size).enumerate() {
        let old = load(m, size, signed, false);
        let at = i * size..(i + 1) * size;
        let v = operand
            .get(at.clone())
            .map_or(old, |b| load(b, size, signed, true));
        let c = compare.get(at).map_or(old, |b| load(b, size, signed, true));
        let truth = |x: Wide| x.bits() != 0;
        let bool_of = |b: bool| old.with(u64::from(b));
        let new = common(op, old, v, c).unwrap_or_else(|| match op {
            Op::Lor => bool_of(truth(old) || truth(v)),
            Op::Land => bool_of(truth(old) && truth(v)),
            Op::Lxor => bool_of(truth(old) != truth(v)),
            Op::Bor => old.with(old.bits() | v.bits()),
            Op::Band => old.with(old.bits() & v.bits()),
            Op::Bxor => old.with(old.bits() ^ v.bits()),
            // MSWAP: the compare array is the mask of the bits to take from the swap.
            Op::Mswap => old.with((v.bits() & c.bits()) | (old.bits() & !c.bits())),
            _ => old,
        });
        store(m, size, new);
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
