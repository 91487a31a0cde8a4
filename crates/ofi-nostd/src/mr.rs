//! Memory registration (fi_mr(3)) and the access checks every remote access goes through.
//!
//! An [`MrTable`] is one domain's registrations, over caller storage: a slot array
//! ([`MrSlot`], one per region; `IOV` is the domain's `mr_iov_limit`) and, when the
//! application chooses keys (no FI_MR_PROV_KEY), a bucket array for the key index (more
//! buckets than slots; twice is a good size; pass `[]` with FI_MR_PROV_KEY).
//!
//! Keys are 8 bytes (`mr_key_size` = [`MR_KEY_SIZE`]):
//!
//! - **FI_MR_PROV_KEY**: the provider picks the key: the slot index in the low 32 bits and
//!   a 32-bit tag in the high 32 bits, mixed from (per-domain secret seed, slot,
//!   generation). Keys of closed regions are refused even when their slot is reused;
//!   guessing a live key takes ~2^32 tries per slot. It is not a MAC: real protection
//!   comes from the authenticated peer handshake.
//! - Otherwise the application's `requested_key` is used: a key already in use is
//!   -FI_ENOKEY, and FI_KEY_NOTAVAIL (all ones) is -FI_EKEYREJECTED (fi_mr(3) ERRORS).
//!
//! Remote addresses: with FI_MR_VIRT_ADDR a peer names the target by its virtual address
//! (`iov[0].addr` + byte offset); otherwise by the byte offset from 0. A region of
//! several iovs is addressed as their concatenation, in order.
//!
//! Error mapping of [`MrTable::check_remote`], as libfabric's util `ofi_mr_map_verify`
//! (which RXD, UDP, TCP and SHM use): unknown, closed or not yet enabled key →
//! -FI_EINVAL; access not granted, or any byte outside the region → -FI_EACCES. The
//! target sends this code back and the initiator's operation completes in error with it
//! (CQ error entry `err`, counter error count), per the "RMA to unregistered or
//! out-of-range memory → transmit error" row of fi_domain(3). All arithmetic is checked:
//! an `addr + len` that overflows is -FI_EACCES, never a wrap.
//!
//! State machine: a region starts **enabled**, except with FI_MR_ENDPOINT (always) or
//! with FI_MR_RMA_EVENT for a region registered with FI_RMA_EVENT; those start
//! **disabled**: bind (to its endpoint, to counters), then [`MrTable::enable`]; no
//! bindings after enable (-FI_EOPBADSTATE). With FI_MR_ENDPOINT, enable without an
//! endpoint binding is -FI_EOPBADSTATE, and the region answers only accesses through
//! that endpoint. A disabled region answers no access.
//!
//! Close: each binding (endpoint, counter) and each [`MrTable::acquire`] counts a
//! reference; [`MrTable::close`] is -FI_EBUSY while an endpoint binding or an
//! acquisition is held (fi_mr(3)); counter bindings end with whichever of the two
//! closes first. The domain calls `unbind_*` when the endpoint or counter closes.

use crate::errno::{Errno, Result};
use crate::flags::{FI_KEY_NOTAVAIL, Flags, MrMode};
use crate::hash::{HashIndex, mix64};
use crate::mem::{IoVec, Memory};

/// `mr_key_size`: our keys are 64-bit.
pub const MR_KEY_SIZE: usize = 8;

/// How many counters one region can be bound to.
pub const MAX_MR_CNTRS: usize = 2;

/// The access bits a registration may ask for (fi_mr(3) "access"): those of RMA and
/// atomics (FI_READ, FI_WRITE, FI_REMOTE_READ, FI_REMOTE_WRITE) only in a build that
/// serves them (the `rma` feature).
pub const MR_ACCESS: Flags = Flags::SEND
    .union(Flags::RECV)
    .union(Flags::COLLECTIVE)
    .union(if cfg!(feature = "rma") {
        MR_RMA_ACCESS
    } else {
        Flags::empty()
    });

/// The access bits of RMA and atomic operations.
const MR_RMA_ACCESS: Flags = Flags::READ
    .union(Flags::WRITE)
    .union(Flags::REMOTE_READ)
    .union(Flags::REMOTE_WRITE);

/// The flags `fi_mr_regattr` takes: FI_RMA_EVENT, in a build that serves RMA.
const REG_FLAGS: Flags = if cfg!(feature = "rma") {
    Flags::RMA_EVENT
} else {
    Flags::empty()
};

/// `enum fi_hmem_iface`, with the C values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u32)]
pub enum HmemIface {
    /// FI_HMEM_SYSTEM: ordinary host memory (the only one supported).
    #[default]
    System = 0,
    /// FI_HMEM_CUDA.
    Cuda = 1,
    /// FI_HMEM_ROCR.
    Rocr = 2,
    /// FI_HMEM_ZE.
    Ze = 3,
    /// FI_HMEM_NEURON.
    Neuron = 4,
    /// FI_HMEM_SYNAPSEAI.
    SynapseAi = 5,
}

impl HmemIface {
    /// The interface for a C `enum fi_hmem_iface` value; -FI_EINVAL if unknown.
    pub const fn from_raw(v: u32) -> Result<HmemIface> {
        match v {
            0 => Ok(HmemIface::System),
            1 => Ok(HmemIface::Cuda),
            2 => Ok(HmemIface::Rocr),
            3 => Ok(HmemIface::Ze),
            4 => Ok(HmemIface::Neuron),
            5 => Ok(HmemIface::SynapseAi),
            _ => Err(Errno::EINVAL),
        }
    }
}

/// `struct fi_mr_attr` (`iov_count` is `mr_iov.len()`, `auth_key_size` is
/// `auth_key.len()`, `device` is the union's 64 bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MrAttr<'a> {
    /// The buffers that make up the region, in order.
    pub mr_iov: &'a [IoVec],
    /// FI_SEND, FI_RECV, FI_READ, FI_WRITE, FI_REMOTE_READ, FI_REMOTE_WRITE, FI_COLLECTIVE.
    pub access: Flags,
    /// Reserved, must be 0 (fi_mr(3)).
    pub offset: u64,
    /// The key the application wants (ignored with FI_MR_PROV_KEY).
    pub requested_key: u64,
    /// The application's context for the region.
    pub context: u64,
    /// Per-region authorization key: not supported (must be empty).
    pub auth_key: &'a [u8],
    /// Memory interface; only FI_HMEM_SYSTEM (ignored unless the FI_HMEM cap is on).
    pub iface: HmemIface,
    /// Device id for non-system interfaces.
    pub device: u64,
}

/// The domain settings a table honours.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct MrConfig {
    /// `fi_domain_attr::mr_mode` as granted (FI_MR_BASIC / FI_MR_SCALABLE are accepted
    /// alone and normalised as libfabric's `ofi_mr_map_init` does).
    pub mr_mode: MrMode,
    /// Whether the FI_HMEM capability was granted (otherwise `iface` is ignored).
    pub hmem: bool,
    /// Per-domain secret for provider keys (the adapter draws it from a random source).
    pub key_seed: u64,
}

/// Whether a region answers accesses yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MrState {
    /// Waiting for bindings and [`MrTable::enable`].
    Disabled,
    /// Usable.
    Enabled,
}

/// A registered region, as named by the domain: slot index and generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MrHandle {
    index: u32,
    generation: u32,
}

impl MrHandle {
    /// The local descriptor (`fi_mr_desc`): a non-zero opaque value.
    pub const fn to_desc(self) -> u64 {
        ((self.generation as u64) << 32) | self.index as u64
    }

    /// The handle a descriptor came from (validity is checked by the table).
    pub const fn from_desc(desc: u64) -> MrHandle {
        MrHandle {
            index: desc as u32,
            generation: (desc >> 32) as u32,
        }
    }

    /// The slot index.
    pub const fn index(self) -> usize {
        self.index as usize
    }
}

/// One slot of MR storage; build it with [`MrSlot::VACANT`].
#[derive(Debug, Clone, Copy)]
pub struct MrSlot<const IOV: usize> {
    generation: u32,
    region: Option<Region<IOV>>,
}

impl<const IOV: usize> MrSlot<IOV> {
    /// An empty slot.
    pub const VACANT: MrSlot<IOV> = MrSlot {
        generation: 0,
        region: None,
    };
}

impl<const IOV: usize> Default for MrSlot<IOV> {
    fn default() -> Self {
        MrSlot::VACANT
    }
}

#[derive(Debug, Clone, Copy)]
struct Region<const IOV: usize> {
    iov: [IoVec; IOV],
    iov_count: usize,
    len: u64,
    access: Flags,
    key: u64,
    context: u64,
    flags: Flags,
    state: MrState,
    ep: Option<u64>,
    cntrs: [Option<(u64, Flags)>; MAX_MR_CNTRS],
    refs: u32,
}

impl<const IOV: usize> Region<IOV> {
    fn iovs(&self) -> &[IoVec] {
        &self.iov[..self.iov_count]
    }
}

/// Where a checked remote access lands: region `mr`, bytes `offset .. offset + len` of
/// its concatenated iovs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteAccess {
    /// The region.
    pub mr: MrHandle,
    /// Byte offset into the region.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
}

/// One domain's memory registrations.
#[derive(Debug)]
pub struct MrTable<S, I, const IOV: usize> {
    mode: MrMode,
    hmem: bool,
    seed: u64,
    slots: S,
    keys: HashIndex<I>,
    len: usize,
    next_free: usize,
}

impl<S, I, const IOV: usize> MrTable<S, I, IOV>
where
    S: AsRef<[MrSlot<IOV>]> + AsMut<[MrSlot<IOV>]>,
    I: AsRef<[u32]> + AsMut<[u32]>,
{
    /// A table over `slots`, with `key_buckets` for requested keys (longer than `slots`
    /// unless FI_MR_PROV_KEY: -FI_EINVAL otherwise). FI_MR_BASIC or FI_MR_SCALABLE
    /// combined with other bits is -FI_EINVAL.
    pub fn new(config: MrConfig, mut slots: S, key_buckets: I) -> Result<Self> {
        let legacy = MrMode::BASIC | MrMode::SCALABLE;
        let mode = if config.mr_mode.intersects(legacy) {
            if config.mr_mode == MrMode::BASIC {
                MrMode::VIRT_ADDR | MrMode::ALLOCATED | MrMode::PROV_KEY
            } else if config.mr_mode == MrMode::SCALABLE {
                MrMode::empty()
            } else {
                return Err(Errno::EINVAL);
            }
        } else {
            config.mr_mode
        };
        let cap = slots.as_ref().len();
        if cap >= u32::MAX as usize
            || (!mode.contains(MrMode::PROV_KEY) && cap > 0 && key_buckets.as_ref().len() <= cap)
        {
            return Err(Errno::EINVAL);
        }
        slots.as_mut().fill(MrSlot::VACANT);
        Ok(MrTable {
            mode,
            hmem: config.hmem,
            seed: config.key_seed,
            slots,
            keys: HashIndex::new(key_buckets),
            len: 0,
            next_free: 0,
        })
    }

    /// The effective mr_mode (legacy values normalised).
    pub fn mr_mode(&self) -> MrMode {
        self.mode
    }

    /// `mr_iov_limit`: the most iovs one region may have.
    pub const fn iov_limit(&self) -> usize {
        IOV
    }

    /// How many regions the table can hold (`mr_cnt`).
    pub fn capacity(&self) -> usize {
        self.slots.as_ref().len()
    }

    /// How many regions are registered.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `fi_mr_reg`: one buffer.
    #[allow(clippy::too_many_arguments)]
    pub fn reg(
        &mut self,
        buf: IoVec,
        access: Flags,
        offset: u64,
        requested_key: u64,
        flags: Flags,
        context: u64,
    ) -> Result<MrHandle> {
        self.regv(&[buf], access, offset, requested_key, flags, context)
    }

    /// `fi_mr_regv`: several buffers as one region.
    pub fn regv(
        &mut self,
        iov: &[IoVec],
        access: Flags,
        offset: u64,
        requested_key: u64,
        flags: Flags,
        context: u64,
    ) -> Result<MrHandle> {
        let attr = MrAttr {
            mr_iov: iov,
            access,
            offset,
            requested_key,
            context,
            ..MrAttr::default()
        };
        self.regattr(&attr, flags)
    }

    /// `fi_mr_regattr`. Errors: -FI_EBADFLAGS for flags other than FI_RMA_EVENT
    /// (FI_RMA_PMEM and the FI_HMEM_* flags are not supported; FI_RMA_EVENT neither in a
    /// build without RMA); -FI_EINVAL for access
    /// bits outside [`MR_ACCESS`], a non-zero `offset`, no iov, more than `IOV` iovs, an
    /// empty iov or one that wraps past 2^64; -FI_ENOSYS for a non-system `iface` (with
    /// FI_HMEM) or a per-region `auth_key`; -FI_ENOKEY / -FI_EKEYREJECTED for requested
    /// keys (module docs); -FI_ENOMEM when the table is full.
    pub fn regattr(&mut self, attr: &MrAttr<'_>, flags: Flags) -> Result<MrHandle> {
        if !REG_FLAGS.contains(flags) {
            return Err(Errno::EBADFLAGS);
        }
        if !MR_ACCESS.contains(attr.access) || attr.offset != 0 {
            return Err(Errno::EINVAL);
        }
        if attr.mr_iov.is_empty() || attr.mr_iov.len() > IOV {
            return Err(Errno::EINVAL);
        }
        let mut iov = [IoVec::default(); IOV];
        let mut len: u64 = 0;
        for (dst, src) in iov.iter_mut().zip(attr.mr_iov) {
            let l = u64::try_from(src.len).map_err(|_| Errno::EINVAL)?;
            if l == 0 || src.addr.checked_add(l).is_none() {
                return Err(Errno::EINVAL);
            }
            len = len.checked_add(l).ok_or(Errno::EINVAL)?;
            *dst = *src;
        }
        if self.hmem && attr.iface != HmemIface::System {
            return Err(Errno::ENOSYS);
        }
        if !attr.auth_key.is_empty() {
            return Err(Errno::ENOSYS);
        }
        let prov_key = self.mode.contains(MrMode::PROV_KEY);
        if !prov_key {
            if attr.requested_key == FI_KEY_NOTAVAIL {
                return Err(Errno::EKEYREJECTED);
            }
            if self.find_key(attr.requested_key).is_some() {
                return Err(Errno::ENOKEY);
            }
        }
        let index = self.alloc_slot().ok_or(Errno::ENOMEM)?;
        let slot = &self.slots.as_ref()[index];
        let generation = match slot.generation.wrapping_add(1) {
            0 => 1,
            g => g,
        };
        let key = if prov_key {
            self.prov_key(index as u32, generation)
        } else {
            attr.requested_key
        };
        if !prov_key {
            // Cannot fail: the index has more buckets than the table has slots.
            self.keys.insert(key, index as u32)?;
        }
        let disabled = self.mode.contains(MrMode::ENDPOINT)
            || (self.mode.contains(MrMode::RMA_EVENT) && flags.contains(Flags::RMA_EVENT));
        let slot = &mut self.slots.as_mut()[index];
        slot.generation = generation;
        slot.region = Some(Region {
            iov,
            iov_count: attr.mr_iov.len(),
            len,
            access: attr.access,
            key,
            context: attr.context,
            flags,
            state: if disabled {
                MrState::Disabled
            } else {
                MrState::Enabled
            },
            ep: None,
            cntrs: [None; MAX_MR_CNTRS],
            refs: 0,
        });
        self.len += 1;
        self.next_free = index + 1;
        Ok(MrHandle {
            index: index as u32,
            generation,
        })
    }

    fn alloc_slot(&self) -> Option<usize> {
        let slots = self.slots.as_ref();
        let n = slots.len();
        (0..n)
            .map(|i| (self.next_free + i) % n)
            .find(|&i| slots[i].region.is_none())
    }

    fn prov_key(&self, index: u32, generation: u32) -> u64 {
        let tag = mix64(self.seed ^ mix64((u64::from(generation) << 32) | u64::from(index)));
        (tag & 0xffff_ffff_0000_0000) | u64::from(index)
    }

    /// The slot holding `key`, if registered.
    fn find_key(&self, key: u64) -> Option<usize> {
        let slots = self.slots.as_ref();
        let holds = |i: usize| {
            slots
                .get(i)
                .and_then(|s| s.region.as_ref())
                .is_some_and(|r| r.key == key)
        };
        if self.mode.contains(MrMode::PROV_KEY) {
            let i = (key & 0xffff_ffff) as usize;
            holds(i).then_some(i)
        } else {
            self.keys
                .find(key, |s| holds(s as usize))
                .map(|s| s as usize)
        }
    }

    fn region(&self, h: MrHandle) -> Result<&Region<IOV>> {
        let s = self.slots.as_ref().get(h.index()).ok_or(Errno::EINVAL)?;
        if s.generation != h.generation {
            return Err(Errno::EINVAL);
        }
        s.region.as_ref().ok_or(Errno::EINVAL)
    }

    fn region_mut(&mut self, h: MrHandle) -> Result<&mut Region<IOV>> {
        let s = self
            .slots
            .as_mut()
            .get_mut(h.index())
            .ok_or(Errno::EINVAL)?;
        if s.generation != h.generation {
            return Err(Errno::EINVAL);
        }
        s.region.as_mut().ok_or(Errno::EINVAL)
    }

    /// Whether `h` names a registered region. Stale or foreign handles are -FI_EINVAL
    /// everywhere below.
    pub fn contains(&self, h: MrHandle) -> bool {
        self.region(h).is_ok()
    }

    /// `fi_mr_key`: the remote key, or FI_KEY_NOTAVAIL under FI_MR_RAW (use
    /// [`MrTable::raw_attr`]).
    pub fn key(&self, h: MrHandle) -> Result<u64> {
        let r = self.region(h)?;
        Ok(if self.mode.contains(MrMode::RAW) {
            FI_KEY_NOTAVAIL
        } else {
            r.key
        })
    }

    /// `fi_mr_desc`: the local descriptor to pass to data calls under FI_MR_LOCAL.
    pub fn desc(&self, h: MrHandle) -> Result<u64> {
        self.region(h).map(|_| h.to_desc())
    }

    /// The context given at registration.
    pub fn context(&self, h: MrHandle) -> Result<u64> {
        self.region(h).map(|r| r.context)
    }

    /// The granted access bits.
    pub fn access(&self, h: MrHandle) -> Result<Flags> {
        self.region(h).map(|r| r.access)
    }

    /// The region's state.
    pub fn state(&self, h: MrHandle) -> Result<MrState> {
        self.region(h).map(|r| r.state)
    }

    /// `fi_mr_raw_attr`: writes the key's 8 little-endian bytes into `raw_key` and
    /// returns `(base_addr, key_size)`; base_addr is `iov[0].addr` with FI_MR_VIRT_ADDR,
    /// else 0. A `raw_key` shorter than [`MR_KEY_SIZE`] is -FI_ETOOSMALL (the needed size
    /// is [`MR_KEY_SIZE`]); flags are reserved (-FI_EINVAL).
    pub fn raw_attr(&self, h: MrHandle, raw_key: &mut [u8], flags: Flags) -> Result<(u64, usize)> {
        if !flags.is_empty() {
            return Err(Errno::EINVAL);
        }
        let r = self.region(h)?;
        let out = raw_key.get_mut(..MR_KEY_SIZE).ok_or(Errno::ETOOSMALL)?;
        out.copy_from_slice(&r.key.to_le_bytes());
        let base = if self.mode.contains(MrMode::VIRT_ADDR) {
            r.iov[0].addr
        } else {
            0
        };
        Ok((base, MR_KEY_SIZE))
    }

    /// `fi_mr_map_raw`: a peer's raw key back to a usable 64-bit key (our raw keys are
    /// the key's bytes). -FI_EINVAL unless `raw_key` is exactly [`MR_KEY_SIZE`] bytes and
    /// flags are empty.
    pub fn map_raw(_base_addr: u64, raw_key: &[u8], flags: Flags) -> Result<u64> {
        let b: [u8; MR_KEY_SIZE] = raw_key.try_into().map_err(|_| Errno::EINVAL)?;
        if !flags.is_empty() {
            return Err(Errno::EINVAL);
        }
        Ok(u64::from_le_bytes(b))
    }

    /// `fi_mr_unmap_key`: nothing to release for our keys.
    pub fn unmap_key(_key: u64) -> Result<()> {
        Ok(())
    }

    /// `fi_mr_refresh`: not supported (we never grant FI_MR_MMU_NOTIFY): -FI_ENOSYS.
    pub fn refresh(&mut self, h: MrHandle, _iov: &[IoVec], _flags: Flags) -> Result<()> {
        self.region(h)?;
        Err(Errno::ENOSYS)
    }

    /// `fi_mr_bind(mr, ep, 0)` (FI_MR_ENDPOINT only: -FI_ENOSYS otherwise). Flags must
    /// be 0 (-FI_EINVAL); one endpoint per region (-FI_EINVAL); not after enable
    /// (-FI_EOPBADSTATE). Counts a reference.
    pub fn bind_ep(&mut self, h: MrHandle, ep: u64, flags: Flags) -> Result<()> {
        let endpoint_mode = self.mode.contains(MrMode::ENDPOINT);
        let r = self.region_mut(h)?;
        if !endpoint_mode {
            return Err(Errno::ENOSYS);
        }
        if !flags.is_empty() || r.ep.is_some() {
            return Err(Errno::EINVAL);
        }
        if r.state == MrState::Enabled {
            return Err(Errno::EOPBADSTATE);
        }
        r.ep = Some(ep);
        r.refs = r.refs.saturating_add(1);
        Ok(())
    }

    /// `fi_mr_bind(mr, cntr, flags)`: count remote accesses on counter `cntr`. Flags: a
    /// non-empty subset of FI_REMOTE_WRITE | FI_REMOTE_READ (-FI_EINVAL). Under
    /// FI_MR_RMA_EVENT the region must have been registered with FI_RMA_EVENT
    /// (-FI_EINVAL) and still be disabled (-FI_EOPBADSTATE). At most [`MAX_MR_CNTRS`]
    /// counters (-FI_ENOSPC). The endpoint must have FI_RMA_EVENT: the domain checks.
    pub fn bind_cntr(&mut self, h: MrHandle, cntr: u64, flags: Flags) -> Result<()> {
        let rma_event_mode = self.mode.contains(MrMode::RMA_EVENT);
        let r = self.region_mut(h)?;
        let events = Flags::REMOTE_WRITE | Flags::REMOTE_READ;
        if flags.is_empty() || !events.contains(flags) {
            return Err(Errno::EINVAL);
        }
        if rma_event_mode {
            if !r.flags.contains(Flags::RMA_EVENT) {
                return Err(Errno::EINVAL);
            }
            if r.state == MrState::Enabled {
                return Err(Errno::EOPBADSTATE);
            }
        }
        let free = r
            .cntrs
            .iter_mut()
            .find(|c| c.is_none())
            .ok_or(Errno::ENOSPC)?;
        *free = Some((cntr, flags));
        r.refs = r.refs.saturating_add(1);
        Ok(())
    }

    /// The endpoint closed: drops its binding and reference.
    pub fn unbind_ep(&mut self, h: MrHandle) -> Result<()> {
        let r = self.region_mut(h)?;
        if r.ep.take().is_some() {
            r.refs = r.refs.saturating_sub(1);
        }
        Ok(())
    }

    /// Counter `cntr` closed: drops its bindings and references.
    pub fn unbind_cntr(&mut self, h: MrHandle, cntr: u64) -> Result<()> {
        let r = self.region_mut(h)?;
        for c in r.cntrs.iter_mut() {
            if c.is_some_and(|(t, _)| t == cntr) {
                *c = None;
                r.refs = r.refs.saturating_sub(1);
            }
        }
        Ok(())
    }

    /// Drops every counter binding of region `h` (and the references they held).
    pub fn unbind_cntrs(&mut self, h: MrHandle) -> Result<()> {
        let r = self.region_mut(h)?;
        for c in r.cntrs.iter_mut() {
            if c.take().is_some() {
                r.refs = r.refs.saturating_sub(1);
            }
        }
        Ok(())
    }

    /// Counter `cntr` closed: drops its bindings to every region.
    pub fn unbind_cntr_everywhere(&mut self, cntr: u64) {
        for slot in self.slots.as_mut().iter_mut() {
            if let Some(r) = slot.region.as_mut() {
                for c in r.cntrs.iter_mut() {
                    if c.is_some_and(|(t, _)| t == cntr) {
                        *c = None;
                        r.refs = r.refs.saturating_sub(1);
                    }
                }
            }
        }
    }

    /// The counters to bump for a remote access of kind `access` (FI_REMOTE_READ or
    /// FI_REMOTE_WRITE) to region `h`.
    pub fn rma_counters(&self, h: MrHandle, access: Flags) -> impl Iterator<Item = u64> + '_ {
        let cntrs = self
            .region(h)
            .map(|r| r.cntrs)
            .unwrap_or([None; MAX_MR_CNTRS]);
        cntrs
            .into_iter()
            .flatten()
            .filter(move |(_, f)| f.intersects(access))
            .map(|(t, _)| t)
    }

    /// `fi_mr_enable`. With FI_MR_ENDPOINT an endpoint must be bound first
    /// (-FI_EOPBADSTATE). Enabling an enabled region succeeds.
    pub fn enable(&mut self, h: MrHandle) -> Result<()> {
        let endpoint_mode = self.mode.contains(MrMode::ENDPOINT);
        let r = self.region_mut(h)?;
        if endpoint_mode && r.ep.is_none() {
            return Err(Errno::EOPBADSTATE);
        }
        r.state = MrState::Enabled;
        Ok(())
    }

    /// Takes a reference (e.g. the engine while an access is in progress).
    pub fn acquire(&mut self, h: MrHandle) -> Result<()> {
        let r = self.region_mut(h)?;
        r.refs = r.refs.checked_add(1).ok_or(Errno::EOVERFLOW)?;
        Ok(())
    }

    /// Drops a reference taken by [`MrTable::acquire`].
    pub fn release(&mut self, h: MrHandle) -> Result<()> {
        let r = self.region_mut(h)?;
        r.refs = r.refs.saturating_sub(1);
        Ok(())
    }

    /// `fi_close(mr)`: -FI_EBUSY while bound to an endpoint or acquired; afterwards its
    /// key and descriptor are refused. Counter bindings end with the region: fi_mr(3)
    /// and fi_cntr(3) each refuse to close while the other is bound, which no order
    /// satisfies; applications (fabtests' `fi_multi_mr`) close the region first, as
    /// libfabric's providers allow, and others close the counter first, which
    /// [`MrTable::unbind_cntr_everywhere`] allows.
    pub fn close(&mut self, h: MrHandle) -> Result<()> {
        let r = self.region(h)?;
        let cntrs = r.cntrs.iter().filter(|c| c.is_some()).count() as u32;
        if r.refs > cntrs {
            return Err(Errno::EBUSY);
        }
        let key = r.key;
        if !self.mode.contains(MrMode::PROV_KEY) {
            let slots = self.slots.as_ref();
            self.keys.remove(key, h.index, |s| {
                slots[s as usize].region.as_ref().map_or(0, |r| r.key)
            });
        }
        self.slots.as_mut()[h.index()].region = None;
        self.len -= 1;
        Ok(())
    }

    /// The check on **every** remote access: `len` bytes at remote address `addr` of
    /// the region with `key`, needing `access` (FI_REMOTE_READ and/or FI_REMOTE_WRITE),
    /// arriving through endpoint `ep` (checked under FI_MR_ENDPOINT). Errors as in the
    /// module docs. A zero-length access needs a valid key and access and an address
    /// within or just past the end of the region.
    pub fn check_remote(
        &self,
        key: u64,
        addr: u64,
        len: u64,
        access: Flags,
        ep: u64,
    ) -> Result<RemoteAccess> {
        let index = self.find_key(key).ok_or(Errno::EINVAL)?;
        let slot = &self.slots.as_ref()[index];
        let r = slot.region.as_ref().ok_or(Errno::EINVAL)?;
        if r.state != MrState::Enabled {
            return Err(Errno::EINVAL);
        }
        if self.mode.contains(MrMode::ENDPOINT) && r.ep != Some(ep) {
            return Err(Errno::EINVAL);
        }
        if !r.access.contains(access) {
            return Err(Errno::EACCES);
        }
        let offset = if self.mode.contains(MrMode::VIRT_ADDR) {
            addr.checked_sub(r.iov[0].addr).ok_or(Errno::EACCES)?
        } else {
            addr
        };
        let end = offset.checked_add(len).ok_or(Errno::EACCES)?;
        if end > r.len {
            return Err(Errno::EACCES);
        }
        Ok(RemoteAccess {
            mr: MrHandle {
                index: index as u32,
                generation: slot.generation,
            },
            offset,
            len,
        })
    }

    /// The local-buffer check for data calls under FI_MR_LOCAL (a no-op otherwise, where
    /// `desc` is ignored): `desc` must name an enabled region (-FI_EINVAL; 0 = NULL is
    /// -FI_EINVAL) whose access includes `access` (FI_SEND, FI_RECV, FI_READ, FI_WRITE)
    /// and one of whose iovs contains all of `iov` (-FI_EACCES).
    pub fn check_local(&self, desc: u64, iov: IoVec, access: Flags) -> Result<()> {
        if !self.mode.contains(MrMode::LOCAL) {
            return Ok(());
        }
        let r = self.region(MrHandle::from_desc(desc))?;
        if r.state != MrState::Enabled {
            return Err(Errno::EINVAL);
        }
        if !r.access.contains(access) {
            return Err(Errno::EACCES);
        }
        let len = u64::try_from(iov.len).map_err(|_| Errno::EACCES)?;
        let end = iov.addr.checked_add(len).ok_or(Errno::EACCES)?;
        let inside = r.iovs().iter().any(|seg| {
            // Registration guarantees seg.addr + seg.len does not overflow.
            let seg_end = seg.addr + seg.len as u64;
            iov.addr >= seg.addr && end <= seg_end
        });
        if inside { Ok(()) } else { Err(Errno::EACCES) }
    }

    /// Calls `f(addr, range)` for each piece of user memory behind a checked access, in
    /// order: `addr` is the user address, `range` the matching bytes of the transfer
    /// (`0..ra.len` overall).
    pub fn for_each_segment(
        &self,
        ra: &RemoteAccess,
        mut f: impl FnMut(u64, core::ops::Range<usize>) -> Result<()>,
    ) -> Result<()> {
        let r = self.region(ra.mr)?;
        let end = ra.offset.checked_add(ra.len).ok_or(Errno::EACCES)?;
        if end > r.len {
            return Err(Errno::EACCES);
        }
        let mut seg_start: u64 = 0;
        let mut done: u64 = 0;
        for seg in r.iovs() {
            let seg_len = seg.len as u64;
            let seg_end = seg_start + seg_len;
            let from = ra.offset.max(seg_start);
            let to = end.min(seg_end);
            if from < to {
                let n = to - from;
                let a = usize::try_from(done).map_err(|_| Errno::EACCES)?;
                let b = usize::try_from(done + n).map_err(|_| Errno::EACCES)?;
                f(seg.addr + (from - seg_start), a..b)?;
                done += n;
            }
            seg_start = seg_end;
        }
        Ok(())
    }

    /// A remote read (the target side of an RMA read): checks FI_REMOTE_READ on
    /// `out.len()` bytes at `addr` and copies them from user memory through `mem`.
    pub fn read_remote<M: Memory + ?Sized>(
        &self,
        mem: &M,
        key: u64,
        addr: u64,
        out: &mut [u8],
        ep: u64,
    ) -> Result<RemoteAccess> {
        let len = u64::try_from(out.len()).map_err(|_| Errno::EACCES)?;
        let ra = self.check_remote(key, addr, len, Flags::REMOTE_READ, ep)?;
        self.for_each_segment(&ra, |a, range| mem.read(a, &mut out[range]))?;
        Ok(ra)
    }

    /// A remote write (the target side of an RMA write): checks FI_REMOTE_WRITE on
    /// `data.len()` bytes at `addr` and copies `data` into user memory through `mem`.
    pub fn write_remote<M: Memory + ?Sized>(
        &self,
        mem: &mut M,
        key: u64,
        addr: u64,
        data: &[u8],
        ep: u64,
    ) -> Result<RemoteAccess> {
        let len = u64::try_from(data.len()).map_err(|_| Errno::EACCES)?;
        let ra = self.check_remote(key, addr, len, Flags::REMOTE_WRITE, ep)?;
        self.for_each_segment(&ra, |a, range| mem.write(a, &data[range]))?;
        Ok(ra)
    }
}

// Registrations for remote access: a build without RMA refuses those (its own test in
// `rdm::tests`).
#[cfg(all(test, feature = "rma"))]
mod tests;
