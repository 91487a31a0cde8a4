//! Completion queues (fi_cq(3)).
//!
//! A [`Cq`] is a FIFO of completions in storage the caller provides: one [`CqSlot`] per
//! entry, so the capacity is `storage.len()` (at least `attr.size`; the domain picks
//! [`DEFAULT_CQ_SIZE`] when the application asks for 0). Successful and error completions
//! share the one queue and keep their order: while an error entry is at the head, reads
//! return -FI_EAVAIL until [`Cq::readerr`] removes it, exactly as fi_cq(3) describes.
//!
//! Overrun follows fi_domain(3)'s resource management:
//! - `FI_RM_ENABLED`: the provider never overruns the CQ. Endpoints call
//!   [`Cq::try_reserve`] when an operation is posted (-FI_EAGAIN when its completion might
//!   not fit) and the completion, success or error, consumes the reservation
//!   ([`Cq::write_reserved`], [`Cq::write_err_reserved`]); an operation that finishes
//!   without an entry gives it back with [`Cq::release`]. Unreserved writes (target-side
//!   completions such as remote CQ data) return -FI_EAGAIN when only reserved space is
//!   left, so the protocol retries them later.
//! - `FI_RM_DISABLED`: a write to a full CQ puts it in the fatal overrun state. The valid
//!   entries stay readable; after them every read returns -FI_EOVERRUN and every write is
//!   refused. Nothing is ever overwritten.
//!
//! Blocking reads (fi_cq_sread, fi_trywait, fi_cq_signal) belong to the hosted adapter; the
//! core keeps the state they need: an armed condition, a wake-up flag, a signalled flag and
//! a generation counter (see [`Cq::trywait`]).

use core::mem::size_of;

use crate::err_data::deliver_err_data;
pub use crate::err_data::{
    API_VERSION_1_5, ErrData, ErrDataOut, MAX_ERR_DATA, strerror, strerror_into,
};
use crate::flags::{FI_ADDR_NOTAVAIL, FiAddr, Flags};
use crate::net::ALL_QUEUES;
use crate::ring::Ring;
use crate::wait::WaitObj;
use crate::{Errno, Result};

/// The CQ size the domain should use when `fi_cq_attr::size` is 0 (libfabric's util CQ
/// uses the same).
pub const DEFAULT_CQ_SIZE: usize = 1024;

/// [`Cq::queue`] before any endpoint is bound.
const QUEUE_UNBOUND: u8 = ALL_QUEUES - 1;

/// `enum fi_cq_format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(i32)]
pub enum CqFormat {
    /// FI_CQ_FORMAT_UNSPEC: the provider chooses ([`DEFAULT_CQ_FORMAT`]).
    #[default]
    Unspec = 0,
    /// FI_CQ_FORMAT_CONTEXT: `struct fi_cq_entry`.
    Context = 1,
    /// FI_CQ_FORMAT_MSG: `struct fi_cq_msg_entry`.
    Msg = 2,
    /// FI_CQ_FORMAT_DATA: `struct fi_cq_data_entry`.
    Data = 3,
    /// FI_CQ_FORMAT_TAGGED: `struct fi_cq_tagged_entry`.
    Tagged = 4,
}

/// The format an FI_CQ_FORMAT_UNSPEC CQ gets (libfabric's util CQ makes the same choice).
pub const DEFAULT_CQ_FORMAT: CqFormat = CqFormat::Context;

impl CqFormat {
    /// The format for a C `enum fi_cq_format` value; -FI_EINVAL for unknown values.
    pub const fn from_raw(raw: i32) -> Result<CqFormat> {
        Ok(match raw {
            0 => CqFormat::Unspec,
            1 => CqFormat::Context,
            2 => CqFormat::Msg,
            3 => CqFormat::Data,
            4 => CqFormat::Tagged,
            _ => return Err(Errno::EINVAL),
        })
    }

    /// The size of one entry of this format in the C ABI (LP64), i.e. the stride of the
    /// application's read buffer. UNSPEC has no size of its own.
    pub const fn entry_size(self) -> usize {
        match self {
            CqFormat::Unspec => 0,
            CqFormat::Context => size_of::<CqContextEntry>(),
            CqFormat::Msg => size_of::<CqMsgEntry>(),
            CqFormat::Data => size_of::<CqDataEntry>(),
            CqFormat::Tagged => size_of::<CqTaggedEntry>(),
        }
    }
}

/// `enum fi_cq_wait_cond`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(i32)]
pub enum CqWaitCond {
    /// FI_CQ_COND_NONE: any new entry satisfies a wait.
    #[default]
    None = 0,
    /// FI_CQ_COND_THRESHOLD: `cond` is a `size_t` count of queued entries.
    Threshold = 1,
}

impl CqWaitCond {
    /// The condition for a C `enum fi_cq_wait_cond` value; -FI_EINVAL for unknown values.
    pub const fn from_raw(raw: i32) -> Result<CqWaitCond> {
        match raw {
            0 => Ok(CqWaitCond::None),
            1 => Ok(CqWaitCond::Threshold),
            _ => Err(Errno::EINVAL),
        }
    }
}

/// `struct fi_cq_attr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CqAttr {
    /// Minimum number of entries; 0 lets the provider choose.
    pub size: usize,
    /// FI_AFFINITY is the only valid flag.
    pub flags: Flags,
    /// Entry format returned by reads.
    pub format: CqFormat,
    /// Requested wait object; the core records it, the adapter implements it.
    pub wait_obj: WaitObj,
    /// CPU for interrupts, valid with FI_AFFINITY; a hint the core records.
    pub signaling_vector: i32,
    /// How the `cond` of fi_cq_sread is interpreted.
    pub wait_cond: CqWaitCond,
    /// Opaque wait-set handle (`struct fid_wait *`), 0 for none; needed with FI_WAIT_SET.
    pub wait_set: u64,
}

impl CqAttr {
    /// Checks the attributes as fi_cq_open does: only FI_AFFINITY in `flags`, a wait set
    /// with FI_WAIT_SET, and one of the wait objects fi_cq(3) allows (not FI_WAIT_POLLFD).
    pub fn validate(&self) -> Result<()> {
        if !(self.flags - Flags::AFFINITY).is_empty() {
            return Err(Errno::EINVAL);
        }
        self.wait_obj.validate_for_queue(self.wait_set)
    }
}

/// Completion flag sets an endpoint reports (fi_cq(3) "Completion Flags"). The endpoint
/// decides; these keep the combinations consistent.
pub mod comp {
    use crate::flags::Flags;

    /// A completed fi_send & co.
    pub const SEND_MSG: Flags = Flags::SEND.union(Flags::MSG);
    /// A completed fi_tsend & co.
    pub const SEND_TAGGED: Flags = Flags::SEND.union(Flags::TAGGED);
    /// A completed fi_recv & co.
    pub const RECV_MSG: Flags = Flags::RECV.union(Flags::MSG);
    /// A completed fi_trecv & co.
    pub const RECV_TAGGED: Flags = Flags::RECV.union(Flags::TAGGED);
    /// A locally initiated RMA read.
    pub const RMA_READ: Flags = Flags::RMA.union(Flags::READ);
    /// A locally initiated RMA write.
    pub const RMA_WRITE: Flags = Flags::RMA.union(Flags::WRITE);
    /// A remotely initiated RMA read (target side, FI_RMA_EVENT).
    pub const RMA_REMOTE_READ: Flags = Flags::RMA.union(Flags::REMOTE_READ);
    /// A remotely initiated RMA write (target side, FI_RMA_EVENT or remote CQ data).
    pub const RMA_REMOTE_WRITE: Flags = Flags::RMA.union(Flags::REMOTE_WRITE);
    /// A locally initiated fetching atomic.
    pub const ATOMIC_READ: Flags = Flags::ATOMIC.union(Flags::READ);
    /// A locally initiated atomic update.
    pub const ATOMIC_WRITE: Flags = Flags::ATOMIC.union(Flags::WRITE);
    /// A remotely initiated fetching atomic.
    pub const ATOMIC_REMOTE_READ: Flags = Flags::ATOMIC.union(Flags::REMOTE_READ);
    /// A remotely initiated atomic update.
    pub const ATOMIC_REMOTE_WRITE: Flags = Flags::ATOMIC.union(Flags::REMOTE_WRITE);
    /// A separate completion saying a multi-recv buffer was released (no other bit set:
    /// fi_cq(3) lets applications tell it from a message completion that way).
    pub const MULTI_RECV_RELEASED: Flags = Flags::MULTI_RECV;
    /// The flags still guaranteed under FI_NOTIFY_FLAGS_ONLY mode.
    pub const NOTIFY_FLAGS_ONLY: Flags = Flags::REMOTE_READ
        .union(Flags::REMOTE_WRITE)
        .union(Flags::REMOTE_CQ_DATA)
        .union(Flags::MULTI_RECV);

    /// Flags of a receive completion: tagged or not, with FI_REMOTE_CQ_DATA when the
    /// sender gave CQ data, and FI_MULTI_RECV on the last completion of a multi-recv
    /// buffer (the one after which the provider releases it).
    pub const fn recv(tagged: bool, remote_cq_data: bool, last_of_multi_recv: bool) -> Flags {
        let mut f = if tagged { RECV_TAGGED } else { RECV_MSG };
        if remote_cq_data {
            f = f.union(Flags::REMOTE_CQ_DATA);
        }
        if last_of_multi_recv {
            f = f.union(Flags::MULTI_RECV);
        }
        f
    }
}

/// A successful completion with every field any format can report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqEntry {
    /// The operation's context (`void *op_context`), 0 for none.
    pub op_context: u64,
    /// Completion flags.
    pub flags: Flags,
    /// Received length (receives only).
    pub len: usize,
    /// Where the data landed in a multi-recv buffer.
    pub buf: u64,
    /// Remote CQ data (valid with FI_REMOTE_CQ_DATA).
    pub data: u64,
    /// Received tag (tagged receives).
    pub tag: u64,
    /// Source address for fi_cq_readfrom; FI_ADDR_NOTAVAIL when unknown or not asked for.
    pub src_addr: FiAddr,
}

impl Default for CqEntry {
    fn default() -> Self {
        CqEntry::new(0, Flags::empty())
    }
}

impl CqEntry {
    /// A completion of the operation `op_context` with `flags`; other fields zero and the
    /// source address FI_ADDR_NOTAVAIL.
    pub const fn new(op_context: u64, flags: Flags) -> CqEntry {
        CqEntry {
            op_context,
            flags,
            len: 0,
            buf: 0,
            data: 0,
            tag: 0,
            src_addr: FI_ADDR_NOTAVAIL,
        }
    }

    /// With the received length.
    pub const fn with_len(mut self, len: usize) -> CqEntry {
        self.len = len;
        self
    }

    /// With the multi-recv landing address.
    pub const fn with_buf(mut self, buf: u64) -> CqEntry {
        self.buf = buf;
        self
    }

    /// With remote CQ data; also sets FI_REMOTE_CQ_DATA.
    pub const fn with_data(mut self, data: u64) -> CqEntry {
        self.data = data;
        self.flags = self.flags.union(Flags::REMOTE_CQ_DATA);
        self
    }

    /// With the received tag.
    pub const fn with_tag(mut self, tag: u64) -> CqEntry {
        self.tag = tag;
        self
    }

    /// With the source address reported by fi_cq_readfrom.
    pub const fn with_src_addr(mut self, src_addr: FiAddr) -> CqEntry {
        self.src_addr = src_addr;
        self
    }
}

/// A failed operation: `struct fi_cq_err_entry` without the caller's buffer fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqErrEntry {
    /// The operation's context; 0 if it had none (e.g. suppressed completions), or the
    /// endpoint's own context when the op context is unusable (fi_endpoint(3)).
    pub op_context: u64,
    /// Completion flags.
    pub flags: Flags,
    /// Received length.
    pub len: usize,
    /// Receive buffer address.
    pub buf: u64,
    /// Remote CQ data.
    pub data: u64,
    /// Message tag.
    pub tag: u64,
    /// Bytes that did not fit (truncation, FI_ETRUNC).
    pub olen: usize,
    /// The general reason, reported as a positive code.
    pub err: Errno,
    /// Provider-specific error number (this provider uses libfabric codes).
    pub prov_errno: i32,
    /// Provider-specific error data.
    pub err_data: ErrData,
}

impl CqErrEntry {
    /// An error completion of `op_context` with `flags`, reason `err` (also used as
    /// `prov_errno`), other fields zero.
    pub const fn new(op_context: u64, flags: Flags, err: Errno) -> CqErrEntry {
        CqErrEntry {
            op_context,
            flags,
            len: 0,
            buf: 0,
            data: 0,
            tag: 0,
            olen: 0,
            err,
            prov_errno: err.code(),
            err_data: ErrData::EMPTY,
        }
    }

    /// The error entry for a completion whose fields are in `entry`.
    pub const fn from_entry(entry: &CqEntry, err: Errno) -> CqErrEntry {
        let mut e = CqErrEntry::new(entry.op_context, entry.flags, err);
        e.len = entry.len;
        e.buf = entry.buf;
        e.data = entry.data;
        e.tag = entry.tag;
        e
    }

    /// A truncated receive (FI_ETRUNC): `len` bytes placed, `olen` bytes discarded.
    pub const fn truncated(entry: &CqEntry, olen: usize) -> CqErrEntry {
        let mut e = CqErrEntry::from_entry(entry, Errno::ETRUNC);
        e.olen = olen;
        e
    }

    /// A successful receive whose source could not be mapped to an fi_addr_t on an
    /// FI_SOURCE_ERR endpoint: FI_EADDRNOTAVAIL with the native source address in
    /// `err_data` (fi_cq(3)). -FI_EINVAL if the address is longer than [`MAX_ERR_DATA`].
    pub fn source_err(entry: &CqEntry, native_src_addr: &[u8]) -> Result<CqErrEntry> {
        let mut e = CqErrEntry::from_entry(entry, Errno::EADDRNOTAVAIL);
        e.err_data = ErrData::new(native_src_addr)?;
        Ok(e)
    }

    /// With provider error data.
    pub const fn with_err_data(mut self, err_data: ErrData) -> CqErrEntry {
        self.err_data = err_data;
        self
    }

    /// With a provider error number other than `err`.
    pub const fn with_prov_errno(mut self, prov_errno: i32) -> CqErrEntry {
        self.prov_errno = prov_errno;
        self
    }
}

/// What fi_cq_readerr returns: the fields of `struct fi_cq_err_entry` and where the
/// error data went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqErrOut {
    /// `op_context`.
    pub op_context: u64,
    /// `flags` (bits of [`Flags`]).
    pub flags: u64,
    /// `len`.
    pub len: usize,
    /// `buf`.
    pub buf: u64,
    /// `data`.
    pub data: u64,
    /// `tag`.
    pub tag: u64,
    /// `olen`.
    pub olen: usize,
    /// `err`: the positive error code.
    pub err: i32,
    /// `prov_errno`.
    pub prov_errno: i32,
    /// `err_data` / `err_data_size`.
    pub err_data: ErrDataOut,
}

/// One entry of CQ storage. Build storage with [`CqSlot::EMPTY`], e.g.
/// `[CqSlot::EMPTY; 64]`.
#[derive(Debug, Clone, Copy)]
pub struct CqSlot(Slot);

#[derive(Debug, Clone, Copy)]
enum Slot {
    Empty,
    Ok(CqEntry),
    Err(CqErrEntry),
}

impl CqSlot {
    /// An unused slot.
    pub const EMPTY: CqSlot = CqSlot(Slot::Empty);
}

impl Default for CqSlot {
    fn default() -> Self {
        CqSlot::EMPTY
    }
}

/// `struct fi_cq_entry` (FI_CQ_FORMAT_CONTEXT), same layout on LP64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct CqContextEntry {
    /// `op_context`.
    pub op_context: u64,
}

/// `struct fi_cq_msg_entry` (FI_CQ_FORMAT_MSG), same layout on LP64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct CqMsgEntry {
    /// `op_context`.
    pub op_context: u64,
    /// `flags` (bits of [`Flags`]).
    pub flags: u64,
    /// `len`.
    pub len: usize,
}

/// `struct fi_cq_data_entry` (FI_CQ_FORMAT_DATA), same layout on LP64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct CqDataEntry {
    /// `op_context`.
    pub op_context: u64,
    /// `flags` (bits of [`Flags`]).
    pub flags: u64,
    /// `len`.
    pub len: usize,
    /// `buf`.
    pub buf: u64,
    /// `data`.
    pub data: u64,
}

/// `struct fi_cq_tagged_entry` (FI_CQ_FORMAT_TAGGED), same layout on LP64.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct CqTaggedEntry {
    /// `op_context`.
    pub op_context: u64,
    /// `flags` (bits of [`Flags`]).
    pub flags: u64,
    /// `len`.
    pub len: usize,
    /// `buf`.
    pub buf: u64,
    /// `data`.
    pub data: u64,
    /// `tag`.
    pub tag: u64,
}

/// An entry type reads can fill: one per C format, plus [`CqEntry`] (every field) for
/// Rust callers.
pub trait CqFormatEntry: Copy {
    /// The CQ format this type belongs to; `None` reads any CQ.
    const FORMAT: Option<CqFormat>;
    /// The entry in this format.
    fn from_entry(e: &CqEntry) -> Self;
}

impl CqFormatEntry for CqEntry {
    const FORMAT: Option<CqFormat> = None;
    fn from_entry(e: &CqEntry) -> Self {
        *e
    }
}

impl CqFormatEntry for CqContextEntry {
    const FORMAT: Option<CqFormat> = Some(CqFormat::Context);
    fn from_entry(e: &CqEntry) -> Self {
        CqContextEntry {
            op_context: e.op_context,
        }
    }
}

impl CqFormatEntry for CqMsgEntry {
    const FORMAT: Option<CqFormat> = Some(CqFormat::Msg);
    fn from_entry(e: &CqEntry) -> Self {
        CqMsgEntry {
            op_context: e.op_context,
            flags: e.flags.bits(),
            len: e.len,
        }
    }
}

impl CqFormatEntry for CqDataEntry {
    const FORMAT: Option<CqFormat> = Some(CqFormat::Data);
    fn from_entry(e: &CqEntry) -> Self {
        CqDataEntry {
            op_context: e.op_context,
            flags: e.flags.bits(),
            len: e.len,
            buf: e.buf,
            data: e.data,
        }
    }
}

impl CqFormatEntry for CqTaggedEntry {
    const FORMAT: Option<CqFormat> = Some(CqFormat::Tagged);
    fn from_entry(e: &CqEntry) -> Self {
        CqTaggedEntry {
            op_context: e.op_context,
            flags: e.flags.bits(),
            len: e.len,
            buf: e.buf,
            data: e.data,
            tag: e.tag,
        }
    }
}

/// A completion queue over storage `S`.
pub struct Cq<S: AsRef<[CqSlot]> + AsMut<[CqSlot]>> {
    attr: CqAttr,
    ring: Ring<CqSlot, S>,
    rm_enabled: bool,
    reserved: usize,
    overrun: bool,
    last_err_data: ErrData,
    signalled: bool,
    armed: Option<usize>,
    wake: bool,
    generation: u64,
    refs: usize,
    /// The data-plane queue of every endpoint bound (see [`Cq::queue`]).
    queue: u8,
}

impl<S: AsRef<[CqSlot]> + AsMut<[CqSlot]>> Cq<S> {
    /// Opens a CQ (fi_cq_open) over `storage`, whose length is the capacity.
    /// `rm_enabled` is the domain's `resource_mgmt == FI_RM_ENABLED`.
    ///
    /// Errors: -FI_EINVAL for invalid attributes (see [`CqAttr::validate`]) or empty
    /// storage; -FI_ENOMEM when `attr.size` is larger than the storage.
    pub fn new(attr: &CqAttr, rm_enabled: bool, storage: S) -> Result<Self> {
        attr.validate()?;
        let cap = storage.as_ref().len();
        if cap == 0 {
            return Err(Errno::EINVAL);
        }
        if attr.size > cap {
            return Err(Errno::ENOMEM);
        }
        let mut attr = *attr;
        attr.size = cap;
        if attr.format == CqFormat::Unspec {
            attr.format = DEFAULT_CQ_FORMAT;
        }
        Ok(Cq {
            attr,
            ring: Ring::new(storage),
            rm_enabled,
            reserved: 0,
            overrun: false,
            last_err_data: ErrData::EMPTY,
            signalled: false,
            armed: None,
            wake: false,
            generation: 0,
            refs: 0,
            queue: QUEUE_UNBOUND,
        })
    }

    /// The attributes in effect: `size` is the capacity and an UNSPEC format is resolved.
    pub fn attr(&self) -> &CqAttr {
        &self.attr
    }

    /// The entry format reads return.
    pub fn format(&self) -> CqFormat {
        self.attr.format
    }

    /// How many entries fit.
    pub fn capacity(&self) -> usize {
        self.ring.capacity()
    }

    /// Queued entries, error entries included.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// Outstanding reservations.
    pub fn reserved(&self) -> usize {
        self.reserved
    }

    /// Slots neither filled nor reserved. With RM disabled, unreserved writes may fill
    /// reserved slots, so this saturates at 0.
    pub fn available(&self) -> usize {
        self.capacity()
            .saturating_sub(self.len())
            .saturating_sub(self.reserved)
    }

    /// Whether the CQ was overrun (RM disabled); fatal for every endpoint bound to it.
    pub fn is_overrun(&self) -> bool {
        self.overrun
    }

    /// Reserves room for one completion of an operation being posted (FI_RM_ENABLED).
    /// -FI_EAGAIN when the CQ could not hold it: the post must fail with -FI_EAGAIN;
    /// -FI_EOVERRUN once the CQ is overrun.
    pub fn try_reserve(&mut self) -> Result<()> {
        if self.overrun {
            return Err(Errno::EOVERRUN);
        }
        if self.available() == 0 {
            return Err(Errno::EAGAIN);
        }
        self.reserved += 1;
        Ok(())
    }

    /// Gives back a reservation whose operation ends without an entry (a suppressed
    /// success, or discarded when its endpoint closes). Extra releases are ignored.
    pub fn release(&mut self) {
        self.reserved = self.reserved.saturating_sub(1);
    }

    /// Queues a completion that holds no reservation (see the module docs for full-CQ
    /// behaviour): -FI_EAGAIN when full with RM enabled, -FI_EOVERRUN when overrun.
    pub fn write(&mut self, entry: &CqEntry) -> Result<()> {
        self.insert(CqSlot(Slot::Ok(*entry)), false)
    }

    /// Queues a completion using the reservation its operation took at post time.
    /// Never fails for want of room while reservations are balanced.
    pub fn write_reserved(&mut self, entry: &CqEntry) -> Result<()> {
        self.insert(CqSlot(Slot::Ok(*entry)), true)
    }

    /// Queues an error completion without a reservation (as [`Cq::write`]).
    pub fn write_err(&mut self, entry: &CqErrEntry) -> Result<()> {
        self.insert(CqSlot(Slot::Err(*entry)), false)
    }

    /// Queues an error completion using its operation's reservation.
    pub fn write_err_reserved(&mut self, entry: &CqErrEntry) -> Result<()> {
        self.insert(CqSlot(Slot::Err(*entry)), true)
    }

    fn insert(&mut self, slot: CqSlot, reserved: bool) -> Result<()> {
        let reserved = reserved && self.reserved > 0;
        if self.overrun {
            if reserved {
                self.reserved -= 1;
            }
            return Err(Errno::EOVERRUN);
        }
        let room = if reserved || !self.rm_enabled {
            !self.ring.is_full()
        } else {
            self.available() > 0
        };
        if !room || self.ring.push(slot).is_err() {
            if self.rm_enabled && !reserved {
                return Err(Errno::EAGAIN);
            }
            // RM disabled (or a reservation the ring cannot honour): the fatal overrun
            // state; queued entries stay valid, this one is lost.
            if reserved {
                self.reserved -= 1;
            }
            self.overrun = true;
            self.notify(true);
            return Err(Errno::EOVERRUN);
        }
        if reserved {
            self.reserved -= 1;
        }
        let is_err = matches!(slot.0, Slot::Err(_));
        self.notify(is_err);
        Ok(())
    }

    /// Bumps the generation and raises the wake-up when the armed condition holds.
    fn notify(&mut self, urgent: bool) {
        self.generation = self.generation.wrapping_add(1);
        if let Some(threshold) = self.armed
            && (urgent || self.ring.len() >= threshold)
        {
            self.armed = None;
            self.wake = true;
        }
    }

    /// fi_cq_read: fills `out` with up to `out.len()` completions in the CQ's format and
    /// returns how many. `E` must be the format's entry type (or [`CqEntry`]), else
    /// -FI_EINVAL.
    ///
    /// Errors: -FI_EAGAIN when empty; -FI_EAVAIL when an error entry is at the head
    /// (reading stops before an error entry, so earlier completions are returned first);
    /// -FI_EOVERRUN when an overrun CQ has been drained. An empty `out` returns 0 when
    /// the head is a successful completion (a count of 0 only drives progress).
    pub fn read<E: CqFormatEntry>(&mut self, out: &mut [E]) -> Result<usize> {
        self.read_inner(out, None)
    }

    /// fi_cq_readfrom: as [`Cq::read`], also storing each completion's source address in
    /// `src_addr` (FI_ADDR_NOTAVAIL when the endpoint has none). `src_addr` must have at
    /// least `out.len()` entries, else -FI_EINVAL.
    pub fn readfrom<E: CqFormatEntry>(
        &mut self,
        out: &mut [E],
        src_addr: &mut [FiAddr],
    ) -> Result<usize> {
        if src_addr.len() < out.len() {
            return Err(Errno::EINVAL);
        }
        self.read_inner(out, Some(src_addr))
    }

    fn read_inner<E: CqFormatEntry>(
        &mut self,
        out: &mut [E],
        mut src_addr: Option<&mut [FiAddr]>,
    ) -> Result<usize> {
        if let Some(format) = E::FORMAT
            && format != self.attr.format
        {
            return Err(Errno::EINVAL);
        }
        match self.ring.peek() {
            None if self.overrun => return Err(Errno::EOVERRUN),
            None => return Err(Errno::EAGAIN),
            Some(CqSlot(Slot::Err(_))) => return Err(Errno::EAVAIL),
            Some(_) => {}
        }
        let mut n = 0;
        while n < out.len() {
            let Some(CqSlot(Slot::Ok(e))) = self.ring.peek() else {
                break;
            };
            let e = *e;
            out[n] = E::from_entry(&e);
            if let Some(src) = src_addr.as_deref_mut() {
                src[n] = e.src_addr;
            }
            self.ring.pop();
            n += 1;
        }
        Ok(n)
    }

    /// fi_cq_readerr: removes the error entry at the head and returns it. No flags are
    /// defined for fi_cq_readerr; `flags` is ignored, as libfabric's util CQ does.
    /// `api_version` is the fabric's and `user_err_data` the application's `err_data`
    /// buffer (`err_data_size` bytes; empty when it is 0 or the API is older than 1.5):
    /// see [`ErrDataOut`].
    ///
    /// Errors: -FI_EAGAIN when no error entry is at the head; -FI_EOVERRUN when an
    /// overrun CQ has been drained.
    pub fn readerr(
        &mut self,
        flags: Flags,
        api_version: u32,
        user_err_data: &mut [u8],
    ) -> Result<CqErrOut> {
        let _ = flags;
        let e = match self.ring.peek() {
            Some(CqSlot(Slot::Err(e))) => *e,
            None if self.overrun => return Err(Errno::EOVERRUN),
            _ => return Err(Errno::EAGAIN),
        };
        self.ring.pop();
        let err_data = deliver_err_data(
            api_version,
            &e.err_data,
            user_err_data,
            &mut self.last_err_data,
        );
        Ok(CqErrOut {
            op_context: e.op_context,
            flags: e.flags.bits(),
            len: e.len,
            buf: e.buf,
            data: e.data,
            tag: e.tag,
            olen: e.olen,
            err: e.err.code(),
            prov_errno: e.prov_errno,
            err_data,
        })
    }

    /// The provider-owned error data of the last [`ErrDataOut::ProviderOwned`] readerr;
    /// the C layer points `err_data` here (the CQ must not move while it is in use).
    pub fn last_err_data(&self) -> &[u8] {
        self.last_err_data.as_slice()
    }

    /// fi_cq_strerror.
    pub fn strerror(&self, prov_errno: i32) -> &'static str {
        strerror(prov_errno)
    }

    /// Whether fi_cq_sread/sreadfrom may be used: -FI_ENOSYS with FI_WAIT_NONE or
    /// FI_WAIT_SET, where fi_cq(3) makes them invalid.
    pub fn check_sread(&self) -> Result<()> {
        match self.attr.wait_obj {
            WaitObj::None | WaitObj::Set => Err(Errno::ENOSYS),
            _ => Ok(()),
        }
    }

    /// fi_cq_signal: wakes any thread blocked in sread; that sread then returns -FI_EAGAIN
    /// if nothing is readable. -FI_ENOSYS without a wait object (fi_cq(3): only available
    /// with one).
    pub fn signal(&mut self) -> Result<()> {
        if self.attr.wait_obj == WaitObj::None {
            return Err(Errno::ENOSYS);
        }
        self.signalled = true;
        self.generation = self.generation.wrapping_add(1);
        self.armed = None;
        self.wake = true;
        Ok(())
    }

    /// Consumes a pending [`Cq::signal`]: an adapter's sread loop checks it after a read
    /// returned -FI_EAGAIN and returns -FI_EAGAIN to the application if it was set.
    pub fn take_signal(&mut self) -> bool {
        core::mem::take(&mut self.signalled)
    }

    /// fi_trywait for this CQ: -FI_EAGAIN when something is readable (entries, an error
    /// entry, the overrun report) or a signal is pending, so the caller must read first;
    /// otherwise arms the CQ so the next insertion raises [`Cq::take_wakeup`] and returns
    /// Ok: blocking on the native wait object is now safe. -FI_EINVAL without a wait
    /// object.
    pub fn trywait(&mut self) -> Result<()> {
        self.trywait_cond(1)
    }

    /// As [`Cq::trywait`] for fi_cq_sread's `cond`: with FI_CQ_COND_THRESHOLD the wait is
    /// satisfied once `threshold` entries are queued (an error entry or overrun always
    /// satisfies it); with FI_CQ_COND_NONE the threshold is 1.
    pub fn trywait_cond(&mut self, threshold: usize) -> Result<()> {
        if self.attr.wait_obj == WaitObj::None {
            return Err(Errno::EINVAL);
        }
        let threshold = match self.attr.wait_cond {
            CqWaitCond::Threshold => threshold.clamp(1, self.capacity()),
            CqWaitCond::None => 1,
        };
        let head_err = matches!(self.ring.peek(), Some(CqSlot(Slot::Err(_))));
        if self.signalled || self.overrun || head_err || self.ring.len() >= threshold {
            return Err(Errno::EAGAIN);
        }
        self.armed = Some(threshold);
        Ok(())
    }

    /// Whether the adapter must signal its native wait object now (once per armed wait
    /// or signal); call it after writing completions.
    pub fn take_wakeup(&mut self) -> bool {
        core::mem::take(&mut self.wake)
    }

    /// Whether a wait is armed or a wake-up not yet taken: while neither holds, nothing
    /// can raise [`Cq::take_wakeup`] but a new [`Cq::trywait`] or [`Cq::signal`], so an
    /// adapter may skip asking.
    pub fn is_armed(&self) -> bool {
        self.armed.is_some() || self.wake
    }

    /// Whether [`Cq::read`] would find nothing: no entry, no error entry, no overrun to
    /// report. What a busy-polling reader checks before paying for a read.
    pub fn is_idle(&self) -> bool {
        self.ring.is_empty() && !self.overrun
    }

    /// Changes on every insertion, overrun and signal: a waiter that saw the same value
    /// before and after blocking knows nothing happened.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Records a binding (endpoint, context) so [`Cq::check_close`] refuses to close.
    pub fn bind_ref(&mut self) {
        self.refs += 1;
    }

    /// Records that an endpoint progressed on data-plane queue `queue` binds the CQ.
    /// A CQ bound on two queues stays [`ALL_QUEUES`] (unbinding does not narrow it).
    pub fn note_queue(&mut self, queue: u8) {
        self.queue = match self.queue {
            QUEUE_UNBOUND => queue,
            q if q == queue => q,
            _ => ALL_QUEUES,
        };
    }

    /// The one data-plane queue whose pass completes what this CQ reports: the queue of
    /// every endpoint ever bound to it, or [`ALL_QUEUES`] (bound on several, or none).
    pub fn queue(&self) -> u8 {
        match self.queue {
            QUEUE_UNBOUND => ALL_QUEUES,
            q => q,
        }
    }

    /// Drops a binding recorded by [`Cq::bind_ref`].
    pub fn unbind_ref(&mut self) {
        self.refs = self.refs.saturating_sub(1);
    }

    /// fi_close check: -FI_EBUSY while endpoints or contexts are bound.
    pub fn check_close(&self) -> Result<()> {
        if self.refs > 0 {
            Err(Errno::EBUSY)
        } else {
            Ok(())
        }
    }
}

#[cfg(target_pointer_width = "64")]
const _: () = {
    assert!(size_of::<CqContextEntry>() == 8);
    assert!(size_of::<CqMsgEntry>() == 24);
    assert!(size_of::<CqDataEntry>() == 40);
    assert!(size_of::<CqTaggedEntry>() == 48);
};

#[cfg(test)]
mod tests;
