//! Event queues (fi_eq(3)). The wait-object kinds they share with CQs and counters are
//! in [`crate::wait`] (re-exported here).
//!
//! An [`EventQueue`] (fid_eq; not named `Eq`, which would shadow the prelude's `Eq`
//! trait) is a FIFO of control events (connection management, asynchronous MR/AV
//! completions, endpoint errors, events the application writes itself) in storage the
//! caller provides: one [`EqSlot`] per event, so the capacity is `storage.len()` (at
//! least `attr.size`). Error events keep their place in the order: while one is at the
//! head, reads return -FI_EAVAIL until [`EventQueue::readerr`] takes it.
//!
//! Two ways in: [`EventQueue::write`] is fi_eq_write (the application's own events, allowed only
//! with FI_WRITE in the attributes); [`EventQueue::post`]/[`EventQueue::post_err`] are the provider's.
//! A provider event that does not fit overruns the EQ (fi_eq(3) NOTES): queued events stay
//! readable, then reads return -FI_EOVERRUN, and every later write fails with
//! -FI_EOVERRUN. An application write to a full (not overrun) EQ returns -FI_EAGAIN.
//!
//! Payloads are kept as fields and laid out as the C structs only on the way out
//! ([`EqPayload::write_c`]; LP64 layout, native byte order): `fid`, `context` and `info`
//! are opaque `u64`s the C layer maps to and from its pointers.

use crate::err_data::{ErrData, ErrDataOut, MAX_ERR_DATA, deliver_err_data, strerror};
use crate::flags::Flags;
use crate::ring::Ring;
use crate::{Errno, Result};

pub use crate::wait::WaitObj;

/// `struct fi_eq_attr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EqAttr {
    /// Minimum number of events; 0 lets the provider choose.
    pub size: usize,
    /// FI_WRITE (allow fi_eq_write) and FI_AFFINITY are the valid flags.
    pub flags: Flags,
    /// Requested wait object; the core records it, the adapter implements it.
    pub wait_obj: WaitObj,
    /// CPU for interrupts, valid with FI_AFFINITY; a hint the core records.
    pub signaling_vector: i32,
    /// Opaque wait-set handle (`struct fid_wait *`), 0 for none; needed with FI_WAIT_SET.
    pub wait_set: u64,
}

impl EqAttr {
    /// Checks the attributes as fi_eq_open does: only FI_WRITE and FI_AFFINITY in
    /// `flags`, a wait set with FI_WAIT_SET, no FI_WAIT_POLLFD; -FI_EINVAL otherwise.
    pub fn validate(&self) -> Result<()> {
        if !(self.flags - (Flags::WRITE | Flags::AFFINITY)).is_empty() {
            return Err(Errno::EINVAL);
        }
        self.wait_obj.validate_for_queue(self.wait_set)
    }
}

/// An EQ event number (`uint32_t event`). The standard ones are the associated constants;
/// fi_eq_write accepts any value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct EqEvent(pub u32);

impl EqEvent {
    /// FI_NOTIFY.
    pub const NOTIFY: EqEvent = EqEvent(0);
    /// FI_CONNREQ: a connection request on a passive endpoint.
    pub const CONNREQ: EqEvent = EqEvent(1);
    /// FI_CONNECTED.
    pub const CONNECTED: EqEvent = EqEvent(2);
    /// FI_SHUTDOWN: the peer disconnected.
    pub const SHUTDOWN: EqEvent = EqEvent(3);
    /// FI_MR_COMPLETE: an asynchronous registration finished.
    pub const MR_COMPLETE: EqEvent = EqEvent(4);
    /// FI_AV_COMPLETE: an asynchronous AV insert finished.
    pub const AV_COMPLETE: EqEvent = EqEvent(5);
    /// FI_JOIN_COMPLETE: a multicast join finished.
    pub const JOIN_COMPLETE: EqEvent = EqEvent(6);
}

/// Most connection data an FI_CONNREQ/FI_CONNECTED event carries: the MSG endpoints'
/// FI_OPT_CM_DATA_SIZE (256) with `msg-ep`; 64 without it, so a build without FI_EP_MSG
/// keeps small EQ slots.
#[cfg(feature = "msg-ep")]
pub const CM_DATA_MAX: usize = crate::cm::CM_DATA_MAX;
/// Most connection data an FI_CONNREQ/FI_CONNECTED event carries (no `msg-ep`).
#[cfg(not(feature = "msg-ep"))]
pub const CM_DATA_MAX: usize = 64;

/// Most provider error data an EQ error entry carries: a refused connection's reject
/// data (as much as [`CM_DATA_MAX`]), or a CQ's [`MAX_ERR_DATA`] without `msg-ep`.
pub const EQ_ERR_DATA_MAX: usize = if CM_DATA_MAX > MAX_ERR_DATA {
    CM_DATA_MAX
} else {
    MAX_ERR_DATA
};

/// The error data of an EQ error entry.
pub type EqErrData = ErrData<EQ_ERR_DATA_MAX>;

/// `sizeof(struct fi_eq_entry)` on LP64.
pub const FI_EQ_ENTRY_SIZE: usize = 24;
/// `sizeof(struct fi_eq_cm_entry)` on LP64 (connection data follows it).
pub const FI_EQ_CM_ENTRY_SIZE: usize = 16;
/// `sizeof(struct fi_eq_err_entry)` on LP64: what fi_eq_readerr returns.
pub const FI_EQ_ERR_ENTRY_SIZE: usize = 48;
/// `sizeof(struct fi_eq_err_entry_1_0)` (API < 1.5, no `err_data_size`) on LP64.
pub const FI_EQ_ERR_ENTRY_1_0_SIZE: usize = 40;
/// Most bytes one fi_eq_write may insert: a CM entry with full connection data.
pub const EQ_WRITE_MAX: usize = FI_EQ_CM_ENTRY_SIZE + CM_DATA_MAX;

/// `struct fi_eq_entry`: completion of an asynchronous control operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EqEntry {
    /// The fid the event is about (MR, AV, multicast...).
    pub fid: u64,
    /// The operation's context, or the fid's when there is none.
    pub context: u64,
    /// Operation-specific data (e.g. count of AV entries inserted).
    pub data: u64,
}

/// `struct fi_eq_cm_entry` with its connection data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EqCmEntry {
    /// The passive endpoint (FI_CONNREQ) or the active endpoint.
    pub fid: u64,
    /// The `struct fi_info *` of the request (FI_CONNREQ), owned by the application once
    /// read; 0 otherwise.
    pub info: u64,
    data_len: u16,
    data: [u8; CM_DATA_MAX],
}

impl EqCmEntry {
    /// A CM entry with connection data `data`; -FI_EINVAL if it exceeds [`CM_DATA_MAX`].
    pub fn new(fid: u64, info: u64, data: &[u8]) -> Result<EqCmEntry> {
        if data.len() > CM_DATA_MAX {
            return Err(Errno::EINVAL);
        }
        let mut e = EqCmEntry {
            fid,
            info,
            data_len: data.len() as u16,
            data: [0; CM_DATA_MAX],
        };
        e.data[..data.len()].copy_from_slice(data);
        Ok(e)
    }

    /// The connection data.
    pub fn data(&self) -> &[u8] {
        &self.data[..self.data_len as usize]
    }
}

/// The bytes an application passed to fi_eq_write, returned as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EqUserData {
    len: u16,
    bytes: [u8; EQ_WRITE_MAX],
}

impl EqUserData {
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

/// What follows the event number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EqPayload {
    /// `struct fi_eq_entry` (FI_NOTIFY, FI_MR_COMPLETE, FI_AV_COMPLETE, FI_JOIN_COMPLETE).
    Entry(EqEntry),
    /// `struct fi_eq_cm_entry` and data (FI_CONNREQ, FI_CONNECTED, FI_SHUTDOWN).
    Cm(EqCmEntry),
    /// An application's fi_eq_write bytes.
    User(EqUserData),
}

impl EqPayload {
    /// The bytes the C struct takes: fixed part plus all connection data.
    pub fn c_size(&self) -> usize {
        match self {
            EqPayload::Entry(_) => FI_EQ_ENTRY_SIZE,
            EqPayload::Cm(cm) => FI_EQ_CM_ENTRY_SIZE + cm.data().len(),
            EqPayload::User(u) => u.as_slice().len(),
        }
    }

    /// The smallest buffer that can take the event: connection data may be cut short
    /// (fi_eq(3): it is limited by the application's buffer), nothing else.
    pub fn c_min_size(&self) -> usize {
        match self {
            EqPayload::Cm(_) => FI_EQ_CM_ENTRY_SIZE,
            other => other.c_size(),
        }
    }

    /// Lays the payload out as its C struct (LP64, native byte order) into `out`,
    /// truncating connection data to fit; returns the bytes written, which is what
    /// fi_eq_read returns. -FI_ETOOSMALL if `out` is shorter than [`Self::c_min_size`].
    pub fn write_c(&self, out: &mut [u8]) -> Result<usize> {
        if out.len() < self.c_min_size() {
            return Err(Errno::ETOOSMALL);
        }
        let put = |out: &mut [u8], at: usize, v: u64| {
            out[at..at + 8].copy_from_slice(&v.to_ne_bytes());
        };
        Ok(match self {
            EqPayload::Entry(e) => {
                put(out, 0, e.fid);
                put(out, 8, e.context);
                put(out, 16, e.data);
                FI_EQ_ENTRY_SIZE
            }
            EqPayload::Cm(cm) => {
                put(out, 0, cm.fid);
                put(out, 8, cm.info);
                let n = cm.data().len().min(out.len() - FI_EQ_CM_ENTRY_SIZE);
                out[FI_EQ_CM_ENTRY_SIZE..FI_EQ_CM_ENTRY_SIZE + n].copy_from_slice(&cm.data()[..n]);
                FI_EQ_CM_ENTRY_SIZE + n
            }
            EqPayload::User(u) => {
                let b = u.as_slice();
                out[..b.len()].copy_from_slice(b);
                b.len()
            }
        })
    }
}

/// An asynchronous error: `struct fi_eq_err_entry` without the caller's buffer fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EqErrEntry {
    /// The fid the error is about (endpoint, MR, AV, CQ...).
    pub fid: u64,
    /// The operation's context.
    pub context: u64,
    /// Operation-specific data.
    pub data: u64,
    /// The general reason, reported as a positive code.
    pub err: Errno,
    /// Provider-specific error number (this provider uses libfabric codes).
    pub prov_errno: i32,
    /// Provider-specific error data.
    pub err_data: EqErrData,
}

impl EqErrEntry {
    /// An error about `fid` with reason `err` (also used as `prov_errno`).
    pub const fn new(fid: u64, context: u64, err: Errno) -> EqErrEntry {
        EqErrEntry {
            fid,
            context,
            data: 0,
            err,
            prov_errno: err.code(),
            err_data: EqErrData::EMPTY,
        }
    }
}

/// What fi_eq_read returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EqRead {
    /// The event number.
    pub event: EqEvent,
    /// The event data.
    pub payload: EqPayload,
    /// Bytes fi_eq_read reports: the C size, connection data cut to the buffer; 0 when
    /// no buffer was given.
    pub len: usize,
}

/// What fi_eq_readerr returns: the fields of `struct fi_eq_err_entry` and where the
/// error data went. fi_eq_readerr returns [`FI_EQ_ERR_ENTRY_SIZE`] (or
/// [`FI_EQ_ERR_ENTRY_1_0_SIZE`] for API < 1.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EqErrOut {
    /// `fid`.
    pub fid: u64,
    /// `context`.
    pub context: u64,
    /// `data`.
    pub data: u64,
    /// `err`: the positive error code.
    pub err: i32,
    /// `prov_errno`.
    pub prov_errno: i32,
    /// `err_data` / `err_data_size`.
    pub err_data: ErrDataOut,
}

/// One entry of EQ storage. Build storage with [`EqSlot::EMPTY`].
#[derive(Debug, Clone, Copy)]
pub struct EqSlot(Slot);

#[derive(Debug, Clone, Copy)]
enum Slot {
    Empty,
    Event(EqEvent, EqPayload),
    Err(EqErrEntry),
}

impl EqSlot {
    /// An unused slot.
    pub const EMPTY: EqSlot = EqSlot(Slot::Empty);
}

impl Default for EqSlot {
    fn default() -> Self {
        EqSlot::EMPTY
    }
}

/// An event queue over storage `S`.
pub struct EventQueue<S: AsRef<[EqSlot]> + AsMut<[EqSlot]>> {
    attr: EqAttr,
    ring: Ring<EqSlot, S>,
    overrun: bool,
    last_err_data: EqErrData,
    armed: bool,
    wake: bool,
    generation: u64,
    refs: usize,
}

impl<S: AsRef<[EqSlot]> + AsMut<[EqSlot]>> EventQueue<S> {
    /// Opens an EQ (fi_eq_open) over `storage`, whose length is the capacity.
    ///
    /// Errors: -FI_EINVAL for invalid attributes or empty storage; -FI_ENOMEM when
    /// `attr.size` is larger than the storage.
    pub fn new(attr: &EqAttr, storage: S) -> Result<Self> {
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
        Ok(EventQueue {
            attr,
            ring: Ring::new(storage),
            overrun: false,
            last_err_data: EqErrData::EMPTY,
            armed: false,
            wake: false,
            generation: 0,
            refs: 0,
        })
    }

    /// The attributes in effect (`size` is the capacity).
    pub fn attr(&self) -> &EqAttr {
        &self.attr
    }

    /// How many events fit.
    pub fn capacity(&self) -> usize {
        self.ring.capacity()
    }

    /// Queued events, errors included.
    pub fn len(&self) -> usize {
        self.ring.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// Whether the EQ was overrun (fatal).
    pub fn is_overrun(&self) -> bool {
        self.overrun
    }

    /// fi_eq_write: queues an application event of `buf` bytes and returns the bytes
    /// written. `flags` has no defined values and is ignored.
    ///
    /// Errors: -FI_EINVAL without FI_WRITE in the EQ's flags (fi_eq(3): the application
    /// may not call it then); -FI_EMSGSIZE above [`EQ_WRITE_MAX`] bytes; -FI_EAGAIN when
    /// full; -FI_EOVERRUN once overrun.
    pub fn write(&mut self, event: EqEvent, buf: &[u8], flags: Flags) -> Result<usize> {
        let _ = flags;
        if !self.attr.flags.contains(Flags::WRITE) {
            return Err(Errno::EINVAL);
        }
        if buf.len() > EQ_WRITE_MAX {
            return Err(Errno::EMSGSIZE);
        }
        if self.overrun {
            return Err(Errno::EOVERRUN);
        }
        let mut user = EqUserData {
            len: buf.len() as u16,
            bytes: [0; EQ_WRITE_MAX],
        };
        user.bytes[..buf.len()].copy_from_slice(buf);
        if self
            .ring
            .push(EqSlot(Slot::Event(event, EqPayload::User(user))))
            .is_err()
        {
            return Err(Errno::EAGAIN);
        }
        self.notify();
        Ok(buf.len())
    }

    /// Queues a provider event. A full EQ is overrun: the event is lost and -FI_EOVERRUN
    /// returned (also for every later post).
    pub fn post(&mut self, event: EqEvent, payload: EqPayload) -> Result<()> {
        self.push_provider(EqSlot(Slot::Event(event, payload)))
    }

    /// The `info` of every unread FI_CONNREQ entry: the application owns an info only
    /// once it has read it, so a provider closing the EQ frees these.
    pub fn unread_connreq_infos(&self) -> impl Iterator<Item = u64> + '_ {
        self.ring.iter().filter_map(|s| match s {
            EqSlot(Slot::Event(ev, EqPayload::Cm(cm))) if *ev == EqEvent::CONNREQ => {
                (cm.info != 0).then_some(cm.info)
            }
            _ => None,
        })
    }

    /// Queues a provider error event (as [`EventQueue::post`]).
    pub fn post_err(&mut self, entry: &EqErrEntry) -> Result<()> {
        self.push_provider(EqSlot(Slot::Err(*entry)))
    }

    fn push_provider(&mut self, slot: EqSlot) -> Result<()> {
        if self.overrun {
            return Err(Errno::EOVERRUN);
        }
        if self.ring.push(slot).is_err() {
            self.overrun = true;
            self.notify();
            return Err(Errno::EOVERRUN);
        }
        self.notify();
        Ok(())
    }

    fn notify(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.armed {
            self.armed = false;
            self.wake = true;
        }
    }

    /// fi_eq_read: the event at the head. `buf_len` is the application's buffer length
    /// (`None` for a NULL buffer: the event is returned with `len` 0). With FI_PEEK the
    /// event stays queued; other flags are ignored.
    ///
    /// Errors: -FI_EAGAIN when empty; -FI_EAVAIL when an error event is at the head;
    /// -FI_ETOOSMALL when the buffer cannot take the event's fixed part (the event stays
    /// queued); -FI_EOVERRUN when an overrun EQ has been drained.
    pub fn read(&mut self, buf_len: Option<usize>, flags: Flags) -> Result<EqRead> {
        let (event, payload) = match self.ring.peek() {
            None if self.overrun => return Err(Errno::EOVERRUN),
            None => return Err(Errno::EAGAIN),
            Some(EqSlot(Slot::Err(_))) => return Err(Errno::EAVAIL),
            Some(EqSlot(Slot::Event(ev, p))) => (*ev, *p),
            Some(EqSlot(Slot::Empty)) => return Err(Errno::EAGAIN),
        };
        let len = match buf_len {
            None => 0,
            Some(l) if l < payload.c_min_size() => return Err(Errno::ETOOSMALL),
            Some(l) => payload.c_size().min(l),
        };
        if !flags.contains(Flags::PEEK) {
            self.ring.pop();
        }
        Ok(EqRead {
            event,
            payload,
            len,
        })
    }

    /// fi_eq_readerr: the error event at the head, removed unless `flags` has FI_PEEK.
    /// `api_version` and `user_err_data` follow the err_data rules of fi_eq(3) (see
    /// [`ErrDataOut`]).
    ///
    /// Errors: -FI_EAGAIN when no error event is at the head; -FI_EOVERRUN when an
    /// overrun EQ has been drained.
    pub fn readerr(
        &mut self,
        flags: Flags,
        api_version: u32,
        user_err_data: &mut [u8],
    ) -> Result<EqErrOut> {
        let e = match self.ring.peek() {
            Some(EqSlot(Slot::Err(e))) => *e,
            None if self.overrun => return Err(Errno::EOVERRUN),
            _ => return Err(Errno::EAGAIN),
        };
        if !flags.contains(Flags::PEEK) {
            self.ring.pop();
        }
        let err_data = deliver_err_data(
            api_version,
            &e.err_data,
            user_err_data,
            &mut self.last_err_data,
        );
        Ok(EqErrOut {
            fid: e.fid,
            context: e.context,
            data: e.data,
            err: e.err.code(),
            prov_errno: e.prov_errno,
            err_data,
        })
    }

    /// The provider-owned error data of the last [`ErrDataOut::ProviderOwned`] readerr.
    pub fn last_err_data(&self) -> &[u8] {
        self.last_err_data.as_slice()
    }

    /// fi_eq_strerror.
    pub fn strerror(&self, prov_errno: i32) -> &'static str {
        strerror(prov_errno)
    }

    /// Whether fi_eq_sread may be used: -FI_ENOSYS with FI_WAIT_NONE or FI_WAIT_SET
    /// (as libfabric's util EQ answers).
    pub fn check_sread(&self) -> Result<()> {
        match self.attr.wait_obj {
            WaitObj::None | WaitObj::Set => Err(Errno::ENOSYS),
            _ => Ok(()),
        }
    }

    /// fi_trywait for this EQ: -FI_EAGAIN when an event (or the overrun report) is
    /// readable; otherwise arms the EQ so the next event raises [`EventQueue::take_wakeup`].
    /// -FI_EINVAL without a wait object.
    pub fn trywait(&mut self) -> Result<()> {
        if self.attr.wait_obj == WaitObj::None {
            return Err(Errno::EINVAL);
        }
        if !self.ring.is_empty() || self.overrun {
            return Err(Errno::EAGAIN);
        }
        self.armed = true;
        Ok(())
    }

    /// Whether the adapter must signal its native wait object now.
    pub fn take_wakeup(&mut self) -> bool {
        core::mem::take(&mut self.wake)
    }

    /// Changes on every insertion and on overrun.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Records a binding (endpoint, PEP, domain, AV...) so [`EventQueue::check_close`] refuses.
    pub fn bind_ref(&mut self) {
        self.refs += 1;
    }

    /// Drops a binding recorded by [`EventQueue::bind_ref`].
    pub fn unbind_ref(&mut self) {
        self.refs = self.refs.saturating_sub(1);
    }

    /// fi_close check: -FI_EBUSY while bound to other objects.
    pub fn check_close(&self) -> Result<()> {
        if self.refs > 0 {
            Err(Errno::EBUSY)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests;
