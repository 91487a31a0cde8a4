//! The operation table of what endpoints do not offer: collectives. Every entry
//! returns -FI_ENOSYS, so an application that calls one anyway gets an error, never a
//! jump through NULL.

use std::ffi::c_void;

use ofi_nostd::Errno;

use crate::sys::{
    fi_addr_t, fi_datatype, fi_ioc, fi_msg_collective, fi_op, fi_ops_collective, fid_ep,
};

/// Defines `extern "C"` functions of the given parameter types that return -FI_ENOSYS.
macro_rules! enosys {
    ($($name:ident($($t:ty),* $(,)?) -> $r:ty;)*) => {$(
        unsafe extern "C" fn $name($(_: $t),*) -> $r {
            -(Errno::ENOSYS.code() as $r)
        }
    )*};
}

type V = *mut c_void;
type CV = *const c_void;
type Ep = *mut fid_ep;
type A = fi_addr_t;
type Dt = fi_datatype;
type Op = fi_op;

enosys! {
    co_barrier(Ep, A, V) -> isize;
    co_broadcast(Ep, V, usize, V, A, A, Dt, u64, V) -> isize;
    co_alltoall(Ep, CV, usize, V, V, V, A, Dt, u64, V) -> isize;
    co_allreduce(Ep, CV, usize, V, V, V, A, Dt, Op, u64, V) -> isize;
    co_allgather(Ep, CV, usize, V, V, V, A, Dt, u64, V) -> isize;
    co_reduce_scatter(Ep, CV, usize, V, V, V, A, Dt, Op, u64, V) -> isize;
    co_reduce(Ep, CV, usize, V, V, V, A, A, Dt, Op, u64, V) -> isize;
    co_scatter(Ep, CV, usize, V, V, V, A, A, Dt, u64, V) -> isize;
    co_gather(Ep, CV, usize, V, V, V, A, A, Dt, u64, V) -> isize;
    co_msg(Ep, *const fi_msg_collective, *mut fi_ioc, *mut V, usize, u64) -> isize;
    co_barrier2(Ep, A, u64, V) -> isize;
}

/// `fi_ops_collective`: collectives are not offered.
pub static COLLECTIVE_OPS: fi_ops_collective = fi_ops_collective {
    size: size_of::<fi_ops_collective>(),
    barrier: Some(co_barrier),
    broadcast: Some(co_broadcast),
    alltoall: Some(co_alltoall),
    allreduce: Some(co_allreduce),
    allgather: Some(co_allgather),
    reduce_scatter: Some(co_reduce_scatter),
    reduce: Some(co_reduce),
    scatter: Some(co_scatter),
    gather: Some(co_gather),
    msg: Some(co_msg),
    barrier2: Some(co_barrier2),
};
