//! Atomics: libfabric's operations and datatypes as v1 carries them, ATOMIC_REQ and
//! ATOMIC_RESP.

use zerocopy::network_endian::{U16, U32, U64};

use super::codec::{Reader, Writer, ensure};
use super::{AckRepr, status};
use crate::{Error, Result};

/// Atomic operations (values are libfabric's `enum fi_op`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[allow(missing_docs)] // the names are libfabric's FI_* operations
pub enum AtomicOp {
    Min = 0,
    Max = 1,
    Sum = 2,
    Prod = 3,
    Lor = 4,
    Land = 5,
    Bor = 6,
    Band = 7,
    Lxor = 8,
    Bxor = 9,
    Read = 10,
    Write = 11,
    Cswap = 12,
    CswapNe = 13,
    CswapLe = 14,
    CswapLt = 15,
    CswapGe = 16,
    CswapGt = 17,
    Mswap = 18,
}

impl AtomicOp {
    /// Decode; `None` for values v1 does not define.
    pub const fn from_u8(v: u8) -> Option<Self> {
        use AtomicOp::*;
        const ALL: [AtomicOp; 19] = [
            Min, Max, Sum, Prod, Lor, Land, Bor, Band, Lxor, Bxor, Read, Write, Cswap, CswapNe,
            CswapLe, CswapLt, CswapGe, CswapGt, Mswap,
        ];
        if (v as usize) < ALL.len() {
            Some(ALL[v as usize])
        } else {
            None
        }
    }

    /// How many operand arrays of `count` elements the request carries: 0 for read,
    /// 2 (compare/mask, then swap) for the compare ops, 1 otherwise.
    pub const fn operand_arrays(self) -> usize {
        match self as u8 {
            10 => 0,
            12..=18 => 2,
            _ => 1,
        }
    }

    /// Whether the op always returns the original values (so `FETCH` is mandatory).
    pub const fn always_fetches(self) -> bool {
        matches!(self as u8, 10 | 12..=18)
    }
}

/// Atomic datatypes (values are libfabric's `enum fi_datatype`; long double is not
/// carried by v1 because its size is not portable).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[allow(missing_docs)] // the names are libfabric's FI_* datatypes
pub enum AtomicDatatype {
    I8 = 0,
    U8 = 1,
    I16 = 2,
    U16 = 3,
    I32 = 4,
    U32 = 5,
    I64 = 6,
    U64 = 7,
    F32 = 8,
    F64 = 9,
    ComplexF32 = 10,
    ComplexF64 = 11,
}

impl AtomicDatatype {
    /// Decode; `None` for values v1 does not define.
    pub const fn from_u8(v: u8) -> Option<Self> {
        use AtomicDatatype::*;
        const ALL: [AtomicDatatype; 12] = [
            I8, U8, I16, U16, I32, U32, I64, U64, F32, F64, ComplexF32, ComplexF64,
        ];
        if (v as usize) < ALL.len() {
            Some(ALL[v as usize])
        } else {
            None
        }
    }

    /// Size of one element on the wire (big-endian, complex = real then imaginary).
    pub const fn size(self) -> usize {
        match self {
            AtomicDatatype::I8 | AtomicDatatype::U8 => 1,
            AtomicDatatype::I16 | AtomicDatatype::U16 => 2,
            AtomicDatatype::I32 | AtomicDatatype::U32 | AtomicDatatype::F32 => 4,
            AtomicDatatype::I64
            | AtomicDatatype::U64
            | AtomicDatatype::F64
            | AtomicDatatype::ComplexF32 => 8,
            AtomicDatatype::ComplexF64 => 16,
        }
    }
}

wire_struct!(
    /// ATOMIC_REQ body (then CQ data if flagged, operands).
    AtomicReqHeader {
        /// Remote memory key.
        key: U64,
        /// Address of the first element.
        addr: U64,
        /// Initiator's operation id, echoed by ATOMIC_RESP.
        op_id: U32,
        /// [`AtomicOp`] code.
        op: u8,
        /// [`AtomicDatatype`] code.
        datatype: u8,
        /// Number of elements (at least 1).
        count: U16,
    }
);

wire_struct!(
    /// ATOMIC_RESP body (then fetched values, if any).
    AtomicRespHeader {
        /// The ATOMIC_REQ's `op_id`.
        op_id: U32,
        /// [`status`]; nonzero means no payload.
        status: U16,
        /// Zero.
        reserved: U16,
    }
);

/// ATOMIC_REQ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicReqRepr<'a> {
    /// Remote key.
    pub key: u64,
    /// Address of the first element.
    pub addr: u64,
    /// Initiator's op id.
    pub op_id: u32,
    /// Operation.
    pub op: AtomicOp,
    /// Element type.
    pub datatype: AtomicDatatype,
    /// Elements (at least 1).
    pub count: u16,
    /// Return the original values (mandatory for read and compare ops).
    pub fetch: bool,
    /// Remote CQ data.
    pub cq_data: Option<u64>,
    /// `op.operand_arrays()` arrays of `count` big-endian elements, back to back.
    pub operands: &'a [u8],
    /// Piggybacked acknowledgement (flag `ACK`): the ACK body, after the other optional
    /// fields and before the payload.
    pub ack: Option<AckRepr>,
}

impl<'a> AtomicReqRepr<'a> {
    /// An ATOMIC_REQ body, fetching if `fetch`, with CQ data if `cq` and the piggybacked
    /// ACK if `ack` (the flags); the rest of the body is the operands.
    #[inline]
    pub(super) fn parse(
        mut r: Reader<'a>,
        fetch: bool,
        cq: bool,
        ack: bool,
    ) -> Result<AtomicReqRepr<'a>> {
        let h = r.take::<AtomicReqHeader>()?;
        let cq_data = r.opt_u64(cq)?;
        let ack = r.opt_ack(ack)?;
        let op = AtomicOp::from_u8(h.op).ok_or(Error::Malformed)?;
        let datatype = AtomicDatatype::from_u8(h.datatype).ok_or(Error::Malformed)?;
        Ok(AtomicReqRepr {
            key: h.key.get(),
            addr: h.addr.get(),
            op_id: h.op_id.get(),
            op,
            datatype,
            count: h.count.get(),
            fetch,
            cq_data,
            ack,
            operands: r.buf,
        })
    }

    /// Appends the body after the base header (as [`Repr::emit`](super::Repr::emit) does).
    #[inline]
    pub(super) fn emit(&self, w: &mut Writer<'_>) -> Result<()> {
        w.put_hdr(&AtomicReqHeader {
            key: self.key.into(),
            addr: self.addr.into(),
            op_id: self.op_id.into(),
            op: self.op as u8,
            datatype: self.datatype as u8,
            count: self.count.into(),
        })?;
        w.opt_u64(self.cq_data)?;
        w.opt_ack(&self.ack)?;
        w.put(self.operands)
    }

    /// At least one element, `FETCH` where the op always fetches, exactly the operand
    /// arrays the op takes, and the elements within the address space.
    pub(super) fn check(&self) -> Result<()> {
        let want = self.count as usize * self.datatype.size() * self.op.operand_arrays();
        if self.count == 0 || (self.op.always_fetches() && !self.fetch) {
            return Err(Error::Malformed);
        }
        if self.operands.len() != want {
            return Err(Error::BadLength);
        }
        let span = self.count as u64 * self.datatype.size() as u64;
        ensure(self.addr.checked_add(span).is_some())
    }
}

/// ATOMIC_RESP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AtomicRespRepr<'a> {
    /// The ATOMIC_REQ's op id.
    pub op_id: u32,
    /// [`status`]; nonzero requires an empty payload.
    pub status: u16,
    /// Original values for a fetching atomic, empty otherwise.
    pub payload: &'a [u8],
    /// Piggybacked acknowledgement (flag `ACK`): the ACK body, after the other optional
    /// fields and before the payload.
    pub ack: Option<AckRepr>,
}

impl<'a> AtomicRespRepr<'a> {
    /// An ATOMIC_RESP body, with the piggybacked ACK if `ack` (the flag); the rest of
    /// the body is the fetched values.
    #[inline]
    pub(super) fn parse(mut r: Reader<'a>, ack: bool) -> Result<AtomicRespRepr<'a>> {
        let h = r.take::<AtomicRespHeader>()?;
        let ack = r.opt_ack(ack)?;
        if h.reserved.get() != 0 {
            return Err(Error::Malformed);
        }
        Ok(AtomicRespRepr {
            ack,
            op_id: h.op_id.get(),
            status: h.status.get(),
            payload: r.buf,
        })
    }

    /// Appends the body after the base header (as [`Repr::emit`](super::Repr::emit) does).
    #[inline]
    pub(super) fn emit(&self, w: &mut Writer<'_>) -> Result<()> {
        w.put_hdr(&AtomicRespHeader {
            op_id: self.op_id.into(),
            status: self.status.into(),
            reserved: 0.into(),
        })?;
        w.opt_ack(&self.ack)?;
        w.put(self.payload)
    }

    /// A failure carries no values.
    pub(super) fn check(&self) -> Result<()> {
        ensure(self.status == status::OK || self.payload.is_empty())
    }
}
