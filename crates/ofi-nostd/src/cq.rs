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

use crate::eq::WaitObj;
use crate::flags::{FI_ADDR_NOTAVAIL, FiAddr, Flags};
use crate::ring::Ring;
use crate::{Errno, Result};

/// The CQ size the domain should use when `fi_cq_attr::size` is 0 (libfabric's util CQ
/// uses the same).
pub const DEFAULT_CQ_SIZE: usize = 1024;

/// The most provider error data an error entry carries; the domain advertises this as
/// `fi_domain_attr::max_err_data`. Large enough for any native address (FI_SOURCE_ERR
/// puts the unknown source address here).
pub const MAX_ERR_DATA: usize = 32;

/// `FI_VERSION(1, 5)`: from this API version on, `err_data`/`err_data_size` may name a
/// buffer of the application (fi_cq(3), fi_eq(3)).
pub const API_VERSION_1_5: u32 = (1 << 16) | 5;

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

/// Provider error data carried by an error entry: at most [`MAX_ERR_DATA`] bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrData {
    len: u8,
    bytes: [u8; MAX_ERR_DATA],
}

impl ErrData {
    /// No error data.
    pub const EMPTY: ErrData = ErrData {
        len: 0,
        bytes: [0; MAX_ERR_DATA],
    };

    /// Error data holding `data`; -FI_EINVAL if it is longer than [`MAX_ERR_DATA`].
    pub fn new(data: &[u8]) -> Result<ErrData> {
        if data.len() > MAX_ERR_DATA {
            return Err(Errno::EINVAL);
        }
        let mut e = ErrData::EMPTY;
        e.bytes[..data.len()].copy_from_slice(data);
        e.len = data.len() as u8;
        Ok(e)
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// Number of bytes.
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Whether there is no error data.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Default for ErrData {
    fn default() -> Self {
        ErrData::EMPTY
    }
}

/// Where a readerr call put the error data (the `err_data`/`err_data_size` rules of
/// fi_cq(3) and fi_eq(3)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrDataOut {
    /// API >= 1.5 and the application gave a buffer (`err_data_size` > 0 on input): this
    /// many bytes were copied into it; `err_data` keeps pointing at the application's
    /// buffer and `err_data_size` must be set to this count.
    Copied(usize),
    /// API < 1.5, or `err_data_size` was 0: `err_data` must point at the provider's buffer
    /// (`last_err_data()` of the queue, valid until the next read call on it), holding
    /// this many bytes. With API >= 1.5 `err_data_size` is set to this count; with API
    /// < 1.5 the application's struct is the 1.0 layout, which has no `err_data_size`
    /// field, and it must not be written.
    ProviderOwned(usize),
}

/// Applies the err_data rules: copy into the application's buffer, or keep the data in
/// the provider-owned buffer `keep`.
pub(crate) fn deliver_err_data(
    api_version: u32,
    data: &ErrData,
    user: &mut [u8],
    keep: &mut ErrData,
) -> ErrDataOut {
    if api_version >= API_VERSION_1_5 && !user.is_empty() {
        let n = user.len().min(data.len());
        user[..n].copy_from_slice(&data.as_slice()[..n]);
        ErrDataOut::Copied(n)
    } else {
        *keep = *data;
        ErrDataOut::ProviderOwned(data.len())
    }
}

/// The text for a provider error number (fi_cq_strerror / fi_eq_strerror). This provider's
/// `prov_errno` values are libfabric error numbers, of either sign.
pub fn strerror(prov_errno: i32) -> &'static str {
    if prov_errno == 0 {
        return "Success";
    }
    match Errno::from_code(prov_errno) {
        Some(e) => e.message(),
        None => "Unknown error",
    }
}

/// Copies [`strerror`]'s text into `buf` as a NUL-terminated C string, truncated to fit
/// (the `buf`/`len` form of fi_cq_strerror). Returns the number of text bytes copied,
/// without the NUL; nothing is written to an empty buffer.
pub fn strerror_into(prov_errno: i32, buf: &mut [u8]) -> usize {
    let Some(room) = buf.len().checked_sub(1) else {
        return 0;
    };
    let text = strerror(prov_errno).as_bytes();
    let n = text.len().min(room);
    buf[..n].copy_from_slice(&text[..n]);
    buf[n] = 0;
    n
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
mod tests {
    use super::*;

    const V1_4: u32 = (1 << 16) | 4;
    const V1_17: u32 = (1 << 16) | 17;

    fn attr(format: CqFormat) -> CqAttr {
        CqAttr {
            format,
            ..CqAttr::default()
        }
    }

    fn cq<const N: usize>(format: CqFormat, rm: bool) -> Cq<[CqSlot; N]> {
        Cq::new(&attr(format), rm, [CqSlot::EMPTY; N]).unwrap()
    }

    fn send(ctx: u64) -> CqEntry {
        CqEntry::new(ctx, comp::SEND_MSG)
    }

    fn ctxs(out: &[CqContextEntry]) -> heapless::Vec<u64, 16> {
        out.iter().map(|e| e.op_context).collect()
    }

    #[test]
    fn enum_values_match_fi_eq_h() {
        assert_eq!(CqFormat::Unspec as i32, 0);
        assert_eq!(CqFormat::Context as i32, 1);
        assert_eq!(CqFormat::Msg as i32, 2);
        assert_eq!(CqFormat::Data as i32, 3);
        assert_eq!(CqFormat::Tagged as i32, 4);
        for raw in 0..5 {
            assert_eq!(CqFormat::from_raw(raw).unwrap() as i32, raw);
        }
        assert_eq!(CqFormat::from_raw(5), Err(Errno::EINVAL));
        assert_eq!(CqFormat::from_raw(-1), Err(Errno::EINVAL));
        assert_eq!(CqWaitCond::from_raw(0), Ok(CqWaitCond::None));
        assert_eq!(CqWaitCond::from_raw(1), Ok(CqWaitCond::Threshold));
        assert_eq!(CqWaitCond::from_raw(2), Err(Errno::EINVAL));
        for raw in 0..7 {
            assert_eq!(WaitObj::from_raw(raw).unwrap() as i32, raw);
        }
        assert_eq!(WaitObj::from_raw(7), Err(Errno::EINVAL));
        assert_eq!(WaitObj::Fd as i32, 3);
        assert_eq!(WaitObj::Yield as i32, 5);
    }

    #[test]
    fn entry_layouts_match_the_c_structs() {
        assert_eq!(CqFormat::Context.entry_size(), 8);
        assert_eq!(CqFormat::Msg.entry_size(), 24);
        assert_eq!(CqFormat::Data.entry_size(), 40);
        assert_eq!(CqFormat::Tagged.entry_size(), 48);
        assert_eq!(CqFormat::Unspec.entry_size(), 0);
        assert_eq!(core::mem::offset_of!(CqTaggedEntry, tag), 40);
        assert_eq!(core::mem::offset_of!(CqDataEntry, data), 32);
        assert_eq!(core::mem::offset_of!(CqMsgEntry, len), 16);
    }

    #[test]
    fn open_validates_attributes_and_storage() {
        let s = || [CqSlot::EMPTY; 4];
        let bad_flags = CqAttr {
            flags: Flags::WRITE,
            ..CqAttr::default()
        };
        assert!(matches!(Cq::new(&bad_flags, true, s()), Err(Errno::EINVAL)));
        let affinity = CqAttr {
            flags: Flags::AFFINITY,
            signaling_vector: 3,
            ..CqAttr::default()
        };
        assert_eq!(
            Cq::new(&affinity, true, s())
                .unwrap()
                .attr()
                .signaling_vector,
            3
        );
        let set_without_set = CqAttr {
            wait_obj: WaitObj::Set,
            ..CqAttr::default()
        };
        assert!(matches!(
            Cq::new(&set_without_set, true, s()),
            Err(Errno::EINVAL)
        ));
        let set = CqAttr {
            wait_obj: WaitObj::Set,
            wait_set: 0x1000,
            ..CqAttr::default()
        };
        assert!(Cq::new(&set, true, s()).is_ok());
        let pollfd = CqAttr {
            wait_obj: WaitObj::PollFd,
            ..CqAttr::default()
        };
        assert!(matches!(Cq::new(&pollfd, true, s()), Err(Errno::EINVAL)));
        let too_big = CqAttr {
            size: 5,
            ..CqAttr::default()
        };
        assert!(matches!(Cq::new(&too_big, true, s()), Err(Errno::ENOMEM)));
        let empty: [CqSlot; 0] = [];
        assert!(matches!(
            Cq::new(&CqAttr::default(), true, empty),
            Err(Errno::EINVAL)
        ));

        // size 0 (provider's choice) and a size below the storage both get the storage.
        let small = CqAttr {
            size: 2,
            ..CqAttr::default()
        };
        let c = Cq::new(&small, true, s()).unwrap();
        assert_eq!((c.capacity(), c.attr().size), (4, 4));
        // UNSPEC resolves to the provider's default format.
        assert_eq!(c.format(), DEFAULT_CQ_FORMAT);
        assert_eq!(c.format(), CqFormat::Context);
    }

    #[test]
    fn empty_reads_return_eagain() {
        let mut c = cq::<4>(CqFormat::Context, true);
        let mut out = [CqContextEntry::default(); 2];
        assert_eq!(c.read(&mut out), Err(Errno::EAGAIN));
        assert_eq!(Errno::EAGAIN.to_ret(), -11);
        let mut src = [0; 2];
        assert_eq!(c.readfrom(&mut out, &mut src), Err(Errno::EAGAIN));
        assert_eq!(
            c.readerr(Flags::empty(), V1_17, &mut []),
            Err(Errno::EAGAIN)
        );
    }

    #[test]
    fn reads_in_order_in_batches_and_wraps() {
        let mut c = cq::<3>(CqFormat::Context, true);
        let mut next = 0u64;
        let mut expect = 0u64;
        for _ in 0..10 {
            while c.write(&send(next)).is_ok() {
                next += 1;
            }
            assert_eq!(c.len(), 3);
            let mut out = [CqContextEntry::default(); 2];
            assert_eq!(c.read(&mut out), Ok(2));
            assert_eq!(ctxs(&out), [expect, expect + 1]);
            expect += 2;
        }
        let mut out = [CqContextEntry::default(); 8];
        assert_eq!(c.read(&mut out), Ok(1));
        assert_eq!(out[0].op_context, expect);
        assert_eq!(c.read(&mut out), Err(Errno::EAGAIN));
    }

    #[test]
    fn each_format_reports_its_fields() {
        let e = CqEntry::new(0xc0, comp::recv(true, false, false))
            .with_len(100)
            .with_buf(0xb0f)
            .with_data(0xda7a)
            .with_tag(0x7a6)
            .with_src_addr(5);
        assert!(
            e.flags
                .contains(Flags::REMOTE_CQ_DATA | Flags::RECV | Flags::TAGGED)
        );
        let flags = e.flags.bits();

        let mut c = cq::<2>(CqFormat::Context, true);
        c.write(&e).unwrap();
        let mut o = [CqContextEntry::default()];
        assert_eq!(c.read(&mut o), Ok(1));
        assert_eq!(o[0], CqContextEntry { op_context: 0xc0 });

        let mut c = cq::<2>(CqFormat::Msg, true);
        c.write(&e).unwrap();
        let mut o = [CqMsgEntry::default()];
        assert_eq!(c.read(&mut o), Ok(1));
        assert_eq!(
            o[0],
            CqMsgEntry {
                op_context: 0xc0,
                flags,
                len: 100
            }
        );

        let mut c = cq::<2>(CqFormat::Data, true);
        c.write(&e).unwrap();
        let mut o = [CqDataEntry::default()];
        assert_eq!(c.read(&mut o), Ok(1));
        assert_eq!(
            o[0],
            CqDataEntry {
                op_context: 0xc0,
                flags,
                len: 100,
                buf: 0xb0f,
                data: 0xda7a
            }
        );

        let mut c = cq::<2>(CqFormat::Tagged, true);
        c.write(&e).unwrap();
        let mut o = [CqTaggedEntry::default()];
        assert_eq!(c.read(&mut o), Ok(1));
        assert_eq!(
            o[0],
            CqTaggedEntry {
                op_context: 0xc0,
                flags,
                len: 100,
                buf: 0xb0f,
                data: 0xda7a,
                tag: 0x7a6
            }
        );

        // The full entry reads any CQ.
        c.write(&e).unwrap();
        let mut o = [CqEntry::default()];
        assert_eq!(c.read(&mut o), Ok(1));
        assert_eq!(o[0], e);
    }

    #[test]
    fn reading_with_another_formats_struct_is_einval() {
        let mut c = cq::<2>(CqFormat::Msg, true);
        c.write(&send(1)).unwrap();
        assert_eq!(c.read(&mut [CqTaggedEntry::default()]), Err(Errno::EINVAL));
        assert_eq!(c.read(&mut [CqContextEntry::default()]), Err(Errno::EINVAL));
        assert_eq!(c.len(), 1, "a refused read consumes nothing");
        assert_eq!(c.read(&mut [CqMsgEntry::default()]), Ok(1));
    }

    #[test]
    fn error_at_head_gives_eavail_until_readerr() {
        let mut c = cq::<8>(CqFormat::Context, true);
        c.write(&send(1)).unwrap();
        c.write(&send(2)).unwrap();
        let err = CqErrEntry::new(3, comp::RECV_MSG, Errno::ECANCELED);
        c.write_err(&err).unwrap();
        c.write(&send(4)).unwrap();

        // Completions before the error are returned first; the read stops at it.
        let mut out = [CqContextEntry::default(); 8];
        assert_eq!(c.read(&mut out), Ok(2));
        assert_eq!(ctxs(&out[..2]), [1, 2]);
        assert_eq!(c.read(&mut out), Err(Errno::EAVAIL));
        assert_eq!(Errno::EAVAIL.to_ret(), -259);
        assert_eq!(c.readfrom(&mut out, &mut [0; 8]), Err(Errno::EAVAIL));
        // A zero-count read reports the error too.
        assert_eq!(c.read::<CqContextEntry>(&mut []), Err(Errno::EAVAIL));

        let e = c.readerr(Flags::empty(), V1_17, &mut []).unwrap();
        assert_eq!(e.op_context, 3);
        assert_eq!(e.flags, comp::RECV_MSG.bits());
        assert_eq!(e.err, 125, "positive FI_ECANCELED");
        assert_eq!(e.prov_errno, 125);
        assert_eq!(e.err_data, ErrDataOut::ProviderOwned(0));

        // readerr with a success at the head: nothing to report.
        assert_eq!(
            c.readerr(Flags::empty(), V1_17, &mut []),
            Err(Errno::EAGAIN)
        );
        assert_eq!(c.read(&mut out), Ok(1));
        assert_eq!(out[0].op_context, 4);
        assert_eq!(c.read::<CqContextEntry>(&mut []), Err(Errno::EAGAIN));
    }

    #[test]
    fn zero_count_read_drives_progress_only() {
        let mut c = cq::<2>(CqFormat::Context, true);
        c.write(&send(1)).unwrap();
        assert_eq!(c.read::<CqContextEntry>(&mut []), Ok(0));
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn err_data_follows_the_api_version_rules() {
        let data = ErrData::new(&[1, 2, 3, 4, 5]).unwrap();
        let err = CqErrEntry::new(9, comp::SEND_MSG, Errno::EIO).with_err_data(data);
        let mut c = cq::<4>(CqFormat::Context, true);

        // API >= 1.5 with a buffer: copied, truncated to err_data_size.
        c.write_err(&err).unwrap();
        let mut user = [0u8; 3];
        let e = c
            .readerr(Flags::empty(), API_VERSION_1_5, &mut user)
            .unwrap();
        assert_eq!(e.err_data, ErrDataOut::Copied(3));
        assert_eq!(user, [1, 2, 3]);

        c.write_err(&err).unwrap();
        let mut user = [0u8; 16];
        let e = c.readerr(Flags::empty(), V1_17, &mut user).unwrap();
        assert_eq!(e.err_data, ErrDataOut::Copied(5));
        assert_eq!(user[..6], [1, 2, 3, 4, 5, 0]);

        // API >= 1.5 with err_data_size 0: the provider's buffer.
        c.write_err(&err).unwrap();
        let e = c.readerr(Flags::empty(), V1_17, &mut []).unwrap();
        assert_eq!(e.err_data, ErrDataOut::ProviderOwned(5));
        assert_eq!(c.last_err_data(), [1, 2, 3, 4, 5]);

        // API < 1.5: the application's buffer is ignored.
        let other = CqErrEntry::new(9, comp::SEND_MSG, Errno::EIO)
            .with_err_data(ErrData::new(&[7, 7]).unwrap());
        c.write_err(&other).unwrap();
        let mut user = [0u8; 16];
        let e = c.readerr(Flags::empty(), V1_4, &mut user).unwrap();
        assert_eq!(e.err_data, ErrDataOut::ProviderOwned(2));
        assert_eq!(user, [0; 16]);
        assert_eq!(c.last_err_data(), [7, 7]);
    }

    #[test]
    fn err_data_capacity() {
        assert!(ErrData::new(&[0; MAX_ERR_DATA]).is_ok());
        assert_eq!(ErrData::new(&[0; MAX_ERR_DATA + 1]), Err(Errno::EINVAL));
        assert!(ErrData::default().is_empty());
        assert_eq!(ErrData::new(&[1, 2]).unwrap().len(), 2);
    }

    #[test]
    fn readfrom_reports_source_addresses() {
        let mut c = cq::<4>(CqFormat::Msg, true);
        c.write(&CqEntry::new(1, comp::RECV_MSG).with_src_addr(42))
            .unwrap();
        c.write(&CqEntry::new(2, comp::RECV_MSG)).unwrap();
        let mut out = [CqMsgEntry::default(); 2];
        assert_eq!(c.readfrom(&mut out, &mut [0; 1]), Err(Errno::EINVAL));
        let mut src = [0; 2];
        assert_eq!(c.readfrom(&mut out, &mut src), Ok(2));
        assert_eq!(src, [42, FI_ADDR_NOTAVAIL]);
    }

    #[test]
    fn source_err_and_truncation_entries() {
        let rx = CqEntry::new(7, comp::RECV_TAGGED).with_len(64).with_tag(5);
        let addr = [2u8, 0, 0x1f, 0x90, 10, 0, 0, 1, 0, 3, 0, 0, 0, 0, 0, 0];
        let e = CqErrEntry::source_err(&rx, &addr).unwrap();
        assert_eq!((e.err, e.err.code()), (Errno::EADDRNOTAVAIL, 99));
        assert_eq!((e.len, e.tag), (64, 5));
        assert_eq!(e.err_data.as_slice(), addr);
        assert_eq!(
            CqErrEntry::source_err(&rx, &[0; MAX_ERR_DATA + 1]),
            Err(Errno::EINVAL)
        );

        let t = CqErrEntry::truncated(&rx, 36);
        assert_eq!((t.err, t.olen, t.len), (Errno::ETRUNC, 36, 64));
        let mut c = cq::<2>(CqFormat::Tagged, true);
        c.write_err(&t.with_prov_errno(-5)).unwrap();
        let o = c.readerr(Flags::empty(), V1_17, &mut []).unwrap();
        assert_eq!((o.err, o.olen, o.prov_errno, o.tag), (265, 36, -5, 5));
    }

    #[test]
    fn rm_enabled_reservations_never_overrun() {
        let mut c = cq::<3>(CqFormat::Context, true);
        c.try_reserve().unwrap();
        c.try_reserve().unwrap();
        c.write(&send(0)).unwrap();
        assert_eq!(c.available(), 0);
        // The post that could overrun the CQ fails with -FI_EAGAIN...
        assert_eq!(c.try_reserve(), Err(Errno::EAGAIN));
        // ...and so does a completion that would eat a reserved slot.
        assert_eq!(c.write(&send(9)), Err(Errno::EAGAIN));
        assert!(!c.is_overrun());
        // Reserved completions always fit.
        c.write_reserved(&send(1)).unwrap();
        c.write_err_reserved(&CqErrEntry::new(2, comp::SEND_MSG, Errno::EIO))
            .unwrap();
        assert_eq!((c.len(), c.reserved()), (3, 0));
        assert_eq!(c.try_reserve(), Err(Errno::EAGAIN));

        // Reading frees room; a released reservation frees room too.
        let mut out = [CqContextEntry::default(); 4];
        assert_eq!(c.read(&mut out), Ok(2));
        c.try_reserve().unwrap();
        c.try_reserve().unwrap();
        assert_eq!(c.try_reserve(), Err(Errno::EAGAIN));
        c.release();
        c.try_reserve().unwrap();
        c.release();
        c.release();
        c.release(); // extra releases are harmless
        assert_eq!(c.reserved(), 0);
        // A plain write to a full RM-enabled CQ is refused, not an overrun.
        c.write(&send(3)).unwrap();
        c.write(&send(4)).unwrap();
        assert_eq!(c.write(&send(5)), Err(Errno::EAGAIN));
        assert!(!c.is_overrun());
    }

    #[test]
    fn rm_disabled_overrun_keeps_valid_entries_then_reports_eoverrun() {
        let mut c = cq::<2>(CqFormat::Context, false);
        c.write(&send(1)).unwrap();
        c.write_err(&CqErrEntry::new(2, comp::SEND_MSG, Errno::EIO))
            .unwrap();
        assert_eq!(c.write(&send(3)), Err(Errno::EOVERRUN));
        assert!(c.is_overrun());
        // Fatal: no more completions, no more reservations.
        assert_eq!(c.write(&send(4)), Err(Errno::EOVERRUN));
        assert_eq!(c.write_reserved(&send(4)), Err(Errno::EOVERRUN));
        assert_eq!(c.try_reserve(), Err(Errno::EOVERRUN));
        assert_eq!(c.len(), 2);

        let mut out = [CqContextEntry::default(); 4];
        assert_eq!(c.read(&mut out), Ok(1));
        assert_eq!(out[0].op_context, 1);
        assert_eq!(c.read(&mut out), Err(Errno::EAVAIL));
        assert_eq!(
            c.readerr(Flags::empty(), V1_17, &mut [])
                .unwrap()
                .op_context,
            2
        );
        assert_eq!(c.read(&mut out), Err(Errno::EOVERRUN));
        assert_eq!(Errno::EOVERRUN.to_ret(), -268);
        assert_eq!(c.readfrom(&mut out, &mut [0; 4]), Err(Errno::EOVERRUN));
        assert_eq!(
            c.readerr(Flags::empty(), V1_17, &mut []),
            Err(Errno::EOVERRUN)
        );
    }

    #[test]
    fn strerror_texts() {
        let c = cq::<1>(CqFormat::Context, true);
        assert_eq!(c.strerror(-(Errno::ETRUNC.code())), "Truncation error");
        assert_eq!(
            c.strerror(Errno::EAGAIN.code()),
            "Resource temporarily unavailable"
        );
        assert_eq!(strerror(0), "Success");
        assert_eq!(strerror(9999), "Unknown error");
        let mut buf = [0xffu8; 6];
        assert_eq!(strerror_into(Errno::ETRUNC.code(), &mut buf), 5);
        assert_eq!(&buf, b"Trunc\0");
        let mut buf = [0xffu8; 32];
        assert_eq!(strerror_into(0, &mut buf), 7);
        assert_eq!(&buf[..8], b"Success\0");
        assert_eq!(strerror_into(0, &mut []), 0);
    }

    fn waitable<const N: usize>(cond: CqWaitCond) -> Cq<[CqSlot; N]> {
        let a = CqAttr {
            wait_obj: WaitObj::Fd,
            wait_cond: cond,
            ..CqAttr::default()
        };
        Cq::new(&a, true, [CqSlot::EMPTY; N]).unwrap()
    }

    #[test]
    fn wait_objects_gate_sread_signal_and_trywait() {
        let mut none = cq::<2>(CqFormat::Context, true);
        assert_eq!(none.check_sread(), Err(Errno::ENOSYS));
        assert_eq!(none.signal(), Err(Errno::ENOSYS));
        assert_eq!(none.trywait(), Err(Errno::EINVAL));
        let set = CqAttr {
            wait_obj: WaitObj::Set,
            wait_set: 1,
            ..CqAttr::default()
        };
        let set = Cq::new(&set, true, [CqSlot::EMPTY; 2]).unwrap();
        assert_eq!(set.check_sread(), Err(Errno::ENOSYS));
        let fd = waitable::<2>(CqWaitCond::None);
        assert_eq!(fd.check_sread(), Ok(()));
    }

    #[test]
    fn trywait_arms_and_insertions_wake() {
        let mut c = waitable::<4>(CqWaitCond::None);
        let g0 = c.generation();
        assert_eq!(c.trywait(), Ok(()));
        assert!(!c.take_wakeup());
        c.write(&send(1)).unwrap();
        assert!(c.take_wakeup());
        assert!(!c.take_wakeup(), "one wake-up per arming");
        assert_ne!(c.generation(), g0);
        // Something to read: blocking is not safe.
        assert_eq!(c.trywait(), Err(Errno::EAGAIN));
        c.read(&mut [CqContextEntry::default()]).unwrap();
        assert_eq!(c.trywait(), Ok(()));
        // Error entries wake too, and make trywait fail.
        c.write_err(&CqErrEntry::new(1, Flags::SEND, Errno::EIO))
            .unwrap();
        assert!(c.take_wakeup());
        assert_eq!(c.trywait(), Err(Errno::EAGAIN));
        // Writes without an armed waiter raise nothing.
        c.readerr(Flags::empty(), V1_17, &mut []).unwrap();
        c.write(&send(2)).unwrap();
        assert!(!c.take_wakeup());
    }

    #[test]
    fn threshold_condition() {
        let mut c = waitable::<8>(CqWaitCond::Threshold);
        c.write(&send(1)).unwrap();
        assert_eq!(c.trywait_cond(3), Ok(()));
        c.write(&send(2)).unwrap();
        assert!(!c.take_wakeup());
        c.write(&send(3)).unwrap();
        assert!(c.take_wakeup());
        assert_eq!(c.trywait_cond(3), Err(Errno::EAGAIN));
        // An error entry satisfies any threshold.
        let mut out = [CqContextEntry::default(); 8];
        c.read(&mut out).unwrap();
        assert_eq!(c.trywait_cond(5), Ok(()));
        c.write_err(&CqErrEntry::new(1, Flags::SEND, Errno::EIO))
            .unwrap();
        assert!(c.take_wakeup());

        // Without FI_CQ_COND_THRESHOLD the cond is ignored: one entry wakes.
        let mut c = waitable::<8>(CqWaitCond::None);
        assert_eq!(c.trywait_cond(5), Ok(()));
        c.write(&send(1)).unwrap();
        assert!(c.take_wakeup());
    }

    #[test]
    fn signal_unblocks_and_is_consumed_once() {
        let mut c = waitable::<2>(CqWaitCond::None);
        c.trywait().unwrap();
        c.signal().unwrap();
        assert!(c.take_wakeup());
        assert_eq!(
            c.trywait(),
            Err(Errno::EAGAIN),
            "a pending signal ends the wait"
        );
        assert!(c.take_signal());
        assert!(!c.take_signal());
        assert_eq!(c.read(&mut [CqContextEntry::default()]), Err(Errno::EAGAIN));
        assert_eq!(c.trywait(), Ok(()));
    }

    #[test]
    fn overrun_wakes_a_waiter() {
        let mut c = Cq::new(
            &CqAttr {
                wait_obj: WaitObj::Yield,
                ..CqAttr::default()
            },
            false,
            [CqSlot::EMPTY; 1],
        )
        .unwrap();
        c.write(&send(1)).unwrap();
        c.read(&mut [CqContextEntry::default()]).unwrap();
        c.trywait().unwrap();
        c.write(&send(2)).unwrap();
        assert!(c.take_wakeup());
        c.write(&send(3)).unwrap_err();
        assert_eq!(c.trywait(), Err(Errno::EAGAIN));
    }

    #[test]
    fn close_is_refused_while_bound() {
        let mut c = cq::<1>(CqFormat::Context, true);
        c.bind_ref();
        c.bind_ref();
        assert_eq!(c.check_close(), Err(Errno::EBUSY));
        c.unbind_ref();
        assert_eq!(c.check_close(), Err(Errno::EBUSY));
        c.unbind_ref();
        c.unbind_ref();
        assert_eq!(c.check_close(), Ok(()));
    }

    #[test]
    fn completion_flag_helpers() {
        assert_eq!(comp::SEND_MSG, Flags::SEND | Flags::MSG);
        assert_eq!(comp::recv(false, false, false), Flags::RECV | Flags::MSG);
        assert_eq!(
            comp::recv(true, true, true),
            Flags::RECV | Flags::TAGGED | Flags::REMOTE_CQ_DATA | Flags::MULTI_RECV
        );
        assert_eq!(comp::MULTI_RECV_RELEASED.bits(), 1 << 16);
        assert_eq!(comp::RMA_REMOTE_WRITE, Flags::RMA | Flags::REMOTE_WRITE);
        assert!(comp::NOTIFY_FLAGS_ONLY.contains(Flags::REMOTE_CQ_DATA | Flags::MULTI_RECV));
        assert_eq!(CqEntry::default().src_addr, FI_ADDR_NOTAVAIL);
    }

    mod model {
        use super::*;
        use proptest::prelude::*;

        #[derive(Debug, Clone)]
        enum Op {
            Reserve,
            Release,
            Write(bool),
            WriteReserved(bool),
            Read(usize),
            ReadErr,
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                Just(Op::Reserve),
                Just(Op::Release),
                any::<bool>().prop_map(Op::Write),
                any::<bool>().prop_map(Op::WriteReserved),
                (0usize..6).prop_map(Op::Read),
                Just(Op::ReadErr),
            ]
        }

        proptest! {
            // Against a model FIFO: never panics, never loses or reorders a completion,
            // never exceeds capacity, and with RM enabled a held reservation always
            // finds room.
            #[test]
            fn cq_matches_a_fifo_model(rm in any::<bool>(), ops in proptest::collection::vec(op(), 0..200)) {
                let mut c = Cq::new(&attr(CqFormat::Context), rm, [CqSlot::EMPTY; 5]).unwrap();
                let mut model: heapless::Deque<(u64, bool), 5> = heapless::Deque::new();
                let mut held = 0usize;
                let mut overrun = false;
                let mut next = 0u64;
                for op in ops {
                    match op {
                        Op::Reserve => {
                            let r = c.try_reserve();
                            if overrun {
                                prop_assert_eq!(r, Err(Errno::EOVERRUN));
                            } else if model.len() + held < 5 {
                                prop_assert_eq!(r, Ok(()));
                                held += 1;
                            } else {
                                prop_assert_eq!(r, Err(Errno::EAGAIN));
                            }
                        }
                        Op::Release => {
                            c.release();
                            held = held.saturating_sub(1);
                        }
                        Op::Write(is_err) | Op::WriteReserved(is_err) => {
                            let reserved = matches!(op, Op::WriteReserved(_)) && held > 0;
                            let id = next;
                            next += 1;
                            let r = match (is_err, matches!(op, Op::WriteReserved(_))) {
                                (false, false) => c.write(&send(id)),
                                (false, true) => c.write_reserved(&send(id)),
                                (true, false) => c.write_err(&CqErrEntry::new(id, Flags::SEND, Errno::EIO)),
                                (true, true) => c.write_err_reserved(&CqErrEntry::new(id, Flags::SEND, Errno::EIO)),
                            };
                            if reserved {
                                held -= 1;
                            }
                            if overrun {
                                prop_assert_eq!(r, Err(Errno::EOVERRUN));
                            } else {
                                // A held reservation always finds room with RM enabled;
                                // with RM disabled unreserved writes may have used it.
                                let room = if reserved {
                                    prop_assert!(!rm || model.len() < 5);
                                    model.len() < 5
                                } else if rm {
                                    model.len() + held < 5
                                } else {
                                    model.len() < 5
                                };
                                if room {
                                    prop_assert_eq!(r, Ok(()));
                                    model.push_back((id, is_err)).unwrap();
                                } else if rm && !reserved {
                                    prop_assert_eq!(r, Err(Errno::EAGAIN));
                                } else {
                                    prop_assert_eq!(r, Err(Errno::EOVERRUN));
                                    overrun = true;
                                }
                            }
                        }
                        Op::Read(n) => {
                            let mut out = [CqContextEntry::default(); 6];
                            let r = c.read(&mut out[..n]);
                            match model.front() {
                                None if overrun => prop_assert_eq!(r, Err(Errno::EOVERRUN)),
                                None => prop_assert_eq!(r, Err(Errno::EAGAIN)),
                                Some((_, true)) => prop_assert_eq!(r, Err(Errno::EAVAIL)),
                                Some(_) => {
                                    let got = r.unwrap();
                                    prop_assert!(got <= n);
                                    for e in &out[..got] {
                                        let (id, is_err) = model.pop_front().unwrap();
                                        prop_assert!(!is_err);
                                        prop_assert_eq!(e.op_context, id);
                                    }
                                    if got < n {
                                        prop_assert!(model.front().is_none_or(|f| f.1));
                                    }
                                }
                            }
                        }
                        Op::ReadErr => {
                            let r = c.readerr(Flags::empty(), V1_17, &mut []);
                            match model.front() {
                                Some((id, true)) => {
                                    prop_assert_eq!(r.unwrap().op_context, *id);
                                    model.pop_front();
                                }
                                None if overrun => prop_assert_eq!(r, Err(Errno::EOVERRUN)),
                                _ => prop_assert_eq!(r, Err(Errno::EAGAIN)),
                            }
                        }
                    }
                    prop_assert_eq!(c.len(), model.len());
                    prop_assert!(c.len() + c.reserved() <= c.capacity() || !rm);
                    prop_assert_eq!(c.is_overrun(), overrun);
                }
            }
        }
    }
}
