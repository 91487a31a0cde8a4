//! Event queues (fi_eq(3)) and the wait-object kinds shared by EQs, CQs and counters.
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

use crate::cq::{ErrData, ErrDataOut, deliver_err_data, strerror};
use crate::flags::Flags;
use crate::ring::Ring;
use crate::{Errno, Result};

/// `enum fi_wait_obj`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(i32)]
pub enum WaitObj {
    /// FI_WAIT_NONE: the application never blocks on the object.
    #[default]
    None = 0,
    /// FI_WAIT_UNSPEC: blocking through fabric calls only; the provider picks.
    Unspec = 1,
    /// FI_WAIT_SET: a wait set (`wait_set`) is signalled.
    Set = 2,
    /// FI_WAIT_FD: a file descriptor usable with poll/epoll.
    Fd = 3,
    /// FI_WAIT_MUTEX_COND: a pthread mutex and condition variable.
    MutexCond = 4,
    /// FI_WAIT_YIELD: waits spin and yield.
    Yield = 5,
    /// FI_WAIT_POLLFD: a set of fds (wait sets and counters only).
    PollFd = 6,
}

impl WaitObj {
    /// The wait object for a C `enum fi_wait_obj` value; -FI_EINVAL for unknown values.
    pub const fn from_raw(raw: i32) -> Result<WaitObj> {
        Ok(match raw {
            0 => WaitObj::None,
            1 => WaitObj::Unspec,
            2 => WaitObj::Set,
            3 => WaitObj::Fd,
            4 => WaitObj::MutexCond,
            5 => WaitObj::Yield,
            6 => WaitObj::PollFd,
            _ => return Err(Errno::EINVAL),
        })
    }

    /// The wait objects fi_cq(3)/fi_eq(3) allow for queues (everything but POLLFD), and
    /// FI_WAIT_SET only with a wait set; -FI_EINVAL otherwise.
    pub(crate) fn validate_for_queue(self, wait_set: u64) -> Result<()> {
        match self {
            WaitObj::PollFd => Err(Errno::EINVAL),
            WaitObj::Set if wait_set == 0 => Err(Errno::EINVAL),
            _ => Ok(()),
        }
    }
}

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

/// Most connection data an FI_CONNREQ/FI_CONNECTED event carries; the future MSG
/// endpoint's FI_OPT_CM_DATA_SIZE.
pub const CM_DATA_MAX: usize = 64;

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
    data_len: u8,
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
            data_len: data.len() as u8,
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
    len: u8,
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
    pub err_data: ErrData,
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
            err_data: ErrData::EMPTY,
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
    last_err_data: ErrData,
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
            last_err_data: ErrData::EMPTY,
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
            len: buf.len() as u8,
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
mod tests {
    use super::*;
    use crate::cq::API_VERSION_1_5;

    const V1_4: u32 = (1 << 16) | 4;

    fn eq<const N: usize>(flags: Flags) -> EventQueue<[EqSlot; N]> {
        let a = EqAttr {
            flags,
            ..EqAttr::default()
        };
        EventQueue::new(&a, [EqSlot::EMPTY; N]).unwrap()
    }

    fn entry(fid: u64) -> EqPayload {
        EqPayload::Entry(EqEntry {
            fid,
            context: 0xc0,
            data: 7,
        })
    }

    #[test]
    fn event_values_match_fi_eq_h() {
        let evs = [
            EqEvent::NOTIFY,
            EqEvent::CONNREQ,
            EqEvent::CONNECTED,
            EqEvent::SHUTDOWN,
            EqEvent::MR_COMPLETE,
            EqEvent::AV_COMPLETE,
            EqEvent::JOIN_COMPLETE,
        ];
        for (i, e) in evs.iter().enumerate() {
            assert_eq!(e.0, i as u32);
        }
    }

    #[test]
    fn open_validates_attributes_and_storage() {
        let s = || [EqSlot::EMPTY; 2];
        let ok = EqAttr {
            flags: Flags::WRITE | Flags::AFFINITY,
            ..EqAttr::default()
        };
        assert_eq!(EventQueue::new(&ok, s()).unwrap().attr().size, 2);
        let bad = EqAttr {
            flags: Flags::READ,
            ..EqAttr::default()
        };
        assert!(matches!(EventQueue::new(&bad, s()), Err(Errno::EINVAL)));
        let set = EqAttr {
            wait_obj: WaitObj::Set,
            ..EqAttr::default()
        };
        assert!(matches!(EventQueue::new(&set, s()), Err(Errno::EINVAL)));
        let pollfd = EqAttr {
            wait_obj: WaitObj::PollFd,
            ..EqAttr::default()
        };
        assert!(matches!(EventQueue::new(&pollfd, s()), Err(Errno::EINVAL)));
        let big = EqAttr {
            size: 3,
            ..EqAttr::default()
        };
        assert!(matches!(EventQueue::new(&big, s()), Err(Errno::ENOMEM)));
        let none: [EqSlot; 0] = [];
        assert!(matches!(
            EventQueue::new(&EqAttr::default(), none),
            Err(Errno::EINVAL)
        ));
    }

    #[test]
    fn empty_reads_return_eagain() {
        let mut q = eq::<2>(Flags::empty());
        assert_eq!(q.read(Some(64), Flags::empty()), Err(Errno::EAGAIN));
        assert_eq!(q.read(Some(64), Flags::PEEK), Err(Errno::EAGAIN));
        assert_eq!(
            q.readerr(Flags::empty(), API_VERSION_1_5, &mut []),
            Err(Errno::EAGAIN)
        );
    }

    #[test]
    fn fi_eq_write_needs_fi_write() {
        let mut q = eq::<2>(Flags::empty());
        assert_eq!(
            q.write(EqEvent(100), &[1, 2, 3], Flags::empty()),
            Err(Errno::EINVAL)
        );
        assert!(q.is_empty());

        let mut q = eq::<2>(Flags::WRITE);
        assert_eq!(q.write(EqEvent(100), &[1, 2, 3], Flags::empty()), Ok(3));
        assert_eq!(
            q.write(EqEvent(1), &[0; EQ_WRITE_MAX + 1], Flags::empty()),
            Err(Errno::EMSGSIZE)
        );
        assert_eq!(
            q.write(EqEvent(101), &[0; EQ_WRITE_MAX], Flags::empty()),
            Ok(EQ_WRITE_MAX)
        );
        // An application write to a full EQ is refused without overrunning it.
        assert_eq!(
            q.write(EqEvent(102), &[], Flags::empty()),
            Err(Errno::EAGAIN)
        );
        assert!(!q.is_overrun());

        let r = q.read(Some(8), Flags::empty()).unwrap();
        assert_eq!((r.event, r.len), (EqEvent(100), 3));
        let mut out = [0u8; 8];
        assert_eq!(r.payload.write_c(&mut out), Ok(3));
        assert_eq!(out[..3], [1, 2, 3]);
        // A user event is returned whole or not at all.
        assert_eq!(
            q.read(Some(EQ_WRITE_MAX - 1), Flags::empty()),
            Err(Errno::ETOOSMALL)
        );
        assert_eq!(
            q.read(Some(EQ_WRITE_MAX), Flags::empty()).unwrap().len,
            EQ_WRITE_MAX
        );
    }

    #[test]
    fn peek_leaves_the_event_queued() {
        let mut q = eq::<4>(Flags::empty());
        q.post(EqEvent::MR_COMPLETE, entry(1)).unwrap();
        q.post(EqEvent::AV_COMPLETE, entry(2)).unwrap();
        let p1 = q.read(Some(64), Flags::PEEK).unwrap();
        let p2 = q.read(Some(64), Flags::PEEK).unwrap();
        assert_eq!(p1, p2);
        assert_eq!((p1.event, p1.len), (EqEvent::MR_COMPLETE, FI_EQ_ENTRY_SIZE));
        assert_eq!(q.len(), 2);
        assert_eq!(q.read(Some(64), Flags::empty()).unwrap(), p1);
        assert_eq!(
            q.read(Some(64), Flags::empty()).unwrap().event,
            EqEvent::AV_COMPLETE
        );
        assert_eq!(q.read(Some(64), Flags::empty()), Err(Errno::EAGAIN));
    }

    #[test]
    fn entry_layout_and_small_buffers() {
        let mut q = eq::<4>(Flags::empty());
        q.post(EqEvent::MR_COMPLETE, entry(0x1122)).unwrap();
        // Smaller than struct fi_eq_entry: refused, the event stays.
        assert_eq!(
            q.read(Some(FI_EQ_ENTRY_SIZE - 1), Flags::empty()),
            Err(Errno::ETOOSMALL)
        );
        assert_eq!(q.len(), 1);
        let r = q.read(Some(FI_EQ_ENTRY_SIZE), Flags::empty()).unwrap();
        let mut out = [0xaau8; 32];
        assert_eq!(r.payload.write_c(&mut out), Ok(24));
        assert_eq!(out[..8], 0x1122u64.to_ne_bytes());
        assert_eq!(out[8..16], 0xc0u64.to_ne_bytes());
        assert_eq!(out[16..24], 7u64.to_ne_bytes());
        assert_eq!(out[24], 0xaa, "nothing past the struct");
        assert_eq!(r.payload.write_c(&mut out[..23]), Err(Errno::ETOOSMALL));

        // A NULL buffer consumes the event and reports 0 bytes.
        q.post(EqEvent::NOTIFY, entry(1)).unwrap();
        assert_eq!(q.read(None, Flags::empty()).unwrap().len, 0);
        assert!(q.is_empty());
    }

    #[test]
    fn cm_data_is_cut_to_the_buffer() {
        let mut q = eq::<2>(Flags::empty());
        let cm = EqCmEntry::new(0xfe, 0x1f0, b"hello world").unwrap();
        assert_eq!(cm.data(), b"hello world");
        assert_eq!(
            EqCmEntry::new(1, 2, &[0; CM_DATA_MAX + 1]),
            Err(Errno::EINVAL)
        );
        q.post(EqEvent::CONNREQ, EqPayload::Cm(cm)).unwrap();
        assert_eq!(q.read(Some(15), Flags::PEEK), Err(Errno::ETOOSMALL));
        let r = q.read(Some(21), Flags::PEEK).unwrap();
        assert_eq!(r.len, 21);
        let mut out = [0u8; 21];
        assert_eq!(r.payload.write_c(&mut out), Ok(21));
        assert_eq!(out[..8], 0xfeu64.to_ne_bytes());
        assert_eq!(out[8..16], 0x1f0u64.to_ne_bytes());
        assert_eq!(&out[16..], b"hello");
        let r = q.read(Some(256), Flags::empty()).unwrap();
        assert_eq!((r.event, r.len), (EqEvent::CONNREQ, 16 + 11));
    }

    #[test]
    fn error_events_give_eavail_until_readerr() {
        let mut q = eq::<4>(Flags::empty());
        q.post(EqEvent::CONNECTED, entry(1)).unwrap();
        let mut err = EqErrEntry::new(0xe9, 0xc7, Errno::ECONNREFUSED);
        err.data = 5;
        err.err_data = ErrData::new(&[9, 8, 7]).unwrap();
        q.post_err(&err).unwrap();
        q.post(EqEvent::SHUTDOWN, entry(2)).unwrap();

        assert_eq!(
            q.readerr(Flags::empty(), API_VERSION_1_5, &mut []),
            Err(Errno::EAGAIN)
        );
        assert_eq!(
            q.read(Some(64), Flags::empty()).unwrap().event,
            EqEvent::CONNECTED
        );
        assert_eq!(q.read(Some(64), Flags::empty()), Err(Errno::EAVAIL));
        assert_eq!(q.read(Some(64), Flags::PEEK), Err(Errno::EAVAIL));

        // readerr honours FI_PEEK.
        let peeked = q.readerr(Flags::PEEK, API_VERSION_1_5, &mut []).unwrap();
        assert_eq!(q.len(), 2);
        let mut user = [0u8; 2];
        let e = q
            .readerr(Flags::empty(), API_VERSION_1_5, &mut user)
            .unwrap();
        assert_eq!((e.fid, e.context, e.data), (0xe9, 0xc7, 5));
        assert_eq!((e.err, e.prov_errno), (111, 111));
        assert_eq!(e.err_data, ErrDataOut::Copied(2));
        assert_eq!(user, [9, 8]);
        assert_eq!(peeked.err_data, ErrDataOut::ProviderOwned(3));
        assert_eq!(q.last_err_data(), [9, 8, 7]);

        assert_eq!(
            q.read(Some(64), Flags::empty()).unwrap().event,
            EqEvent::SHUTDOWN
        );

        // API < 1.5 ignores the application's buffer.
        q.post_err(&err).unwrap();
        let mut user = [0u8; 8];
        let e = q.readerr(Flags::empty(), V1_4, &mut user).unwrap();
        assert_eq!(e.err_data, ErrDataOut::ProviderOwned(3));
        assert_eq!(user, [0; 8]);
        assert_eq!(q.strerror(e.prov_errno), "Connection refused");
    }

    #[test]
    fn provider_overrun_is_fatal_after_draining() {
        let mut q = eq::<2>(Flags::WRITE);
        q.post(EqEvent::MR_COMPLETE, entry(1)).unwrap();
        q.post_err(&EqErrEntry::new(2, 0, Errno::EIO)).unwrap();
        assert_eq!(q.post(EqEvent::MR_COMPLETE, entry(3)), Err(Errno::EOVERRUN));
        assert!(q.is_overrun());
        // Writes against an overrun EQ fail with -FI_EOVERRUN.
        assert_eq!(
            q.write(EqEvent(9), &[1], Flags::empty()),
            Err(Errno::EOVERRUN)
        );
        assert_eq!(
            q.post_err(&EqErrEntry::new(2, 0, Errno::EIO)),
            Err(Errno::EOVERRUN)
        );
        // Valid events first, then the overrun.
        assert_eq!(
            q.read(Some(64), Flags::empty()).unwrap().event,
            EqEvent::MR_COMPLETE
        );
        assert_eq!(q.read(Some(64), Flags::empty()), Err(Errno::EAVAIL));
        q.readerr(Flags::empty(), API_VERSION_1_5, &mut []).unwrap();
        assert_eq!(q.read(Some(64), Flags::empty()), Err(Errno::EOVERRUN));
        assert_eq!(
            q.readerr(Flags::empty(), API_VERSION_1_5, &mut []),
            Err(Errno::EOVERRUN)
        );
    }

    #[test]
    fn wait_hooks() {
        let mut q = eq::<2>(Flags::empty());
        assert_eq!(q.check_sread(), Err(Errno::ENOSYS));
        assert_eq!(q.trywait(), Err(Errno::EINVAL));
        let a = EqAttr {
            wait_obj: WaitObj::Set,
            wait_set: 1,
            ..EqAttr::default()
        };
        assert_eq!(
            EventQueue::new(&a, [EqSlot::EMPTY; 1])
                .unwrap()
                .check_sread(),
            Err(Errno::ENOSYS)
        );

        let a = EqAttr {
            wait_obj: WaitObj::Unspec,
            ..EqAttr::default()
        };
        let mut q = EventQueue::new(&a, [EqSlot::EMPTY; 1]).unwrap();
        assert_eq!(q.check_sread(), Ok(()));
        assert_eq!(q.trywait(), Ok(()));
        let g = q.generation();
        q.post(EqEvent::NOTIFY, entry(1)).unwrap();
        assert!(q.take_wakeup());
        assert!(!q.take_wakeup());
        assert_ne!(q.generation(), g);
        assert_eq!(q.trywait(), Err(Errno::EAGAIN));
        q.read(None, Flags::empty()).unwrap();
        assert_eq!(q.trywait(), Ok(()));
        // Overrun wakes and keeps trywait failing.
        q.post(EqEvent::NOTIFY, entry(1)).unwrap();
        q.post(EqEvent::NOTIFY, entry(2)).unwrap_err();
        q.read(None, Flags::empty()).unwrap();
        assert_eq!(q.trywait(), Err(Errno::EAGAIN));
    }

    #[test]
    fn close_is_refused_while_bound() {
        let mut q = eq::<1>(Flags::empty());
        q.bind_ref();
        assert_eq!(q.check_close(), Err(Errno::EBUSY));
        q.unbind_ref();
        assert_eq!(q.check_close(), Ok(()));
    }
}
