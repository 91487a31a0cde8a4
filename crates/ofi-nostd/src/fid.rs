//! The handles of a domain's objects (libfabric's `fid`s) and the pools they name.
//!
//! A leaf module: the domain opens these objects, endpoints bind them and the RDM
//! engine completes into them, so their names live below all three. A handle is a
//! generational [`Handle`] into the domain's pool of that kind (see [`crate::pool`]);
//! the types are spelled out for the domain's storage `S`.

use crate::av::{Av, AvSlot};
use crate::cntr::Cntr;
use crate::cq::{Cq, CqSlot};
use crate::iov::MR_IOV_LIMIT;
use crate::mr::{MrSlot, MrTable};
use crate::pool::{Handle, Pool, Slot};
use crate::storage::Storage;

/// A CQ in domain storage `S`.
pub type CqObj<S> = Cq<<S as Storage>::Slice<CqSlot>>;
/// Handle of a CQ.
pub type CqHandle<S> = Handle<CqObj<S>>;
/// Handle of a counter.
pub type CntrHandle = Handle<Cntr>;
/// An AV in domain storage `S`.
pub type AvObj<S> = Av<<S as Storage>::Slice<AvSlot>, <S as Storage>::Slice<u32>>;
/// Handle of an AV.
pub type AvHandle<S> = Handle<AvObj<S>>;
/// The MR table of a domain in storage `S`.
pub type MrTableOf<S> =
    MrTable<<S as Storage>::Slice<MrSlot<MR_IOV_LIMIT>>, <S as Storage>::Slice<u32>, MR_IOV_LIMIT>;

/// A pool of objects `T` in domain storage `S`.
pub(crate) type Objects<S, T> = Pool<T, <S as Storage>::Slice<Slot<T>>>;
