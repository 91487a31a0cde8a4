//! Address vectors (fi_av(3)).
//!
//! An [`Av`] maps peer endpoint addresses ([`EpAddr`]) to `fi_addr_t` values over two
//! pieces of caller storage: a slot array ([`AvSlot`], one per address the AV can hold)
//! and a bucket array for the reverse index (`u32`s, more than the slot count; twice is a
//! good size) that turns a packet's source address back into its `fi_addr_t` in O(1)
//! for FI_SOURCE.
//!
//! Semantics, to the letter of fi_av(3) 1.17 and libfabric's util AV where the page is
//! silent:
//!
//! - **FI_AV_TABLE**: an address goes to the lowest unused index, starting at 0, across
//!   calls, so fi_addr values are consecutive in insertion order; an index freed by
//!   [`Av::remove`] is the next one handed out.
//! - **FI_AV_MAP**: the value is opaque: `generation << 32 | slot`, so a value that was
//!   removed (and whose slot was reused) is refused rather than reaching the new peer.
//! - **FI_AV_UNSPEC** resolves to FI_AV_TABLE (computable ranks for MPI at the same O(1)
//!   cost) and is written back into the attributes, as `fi_av_open` does.
//! - **Insert** is per entry: a failed entry gets FI_ADDR_NOTAVAIL in its `fi_addr` slot
//!   and the call returns how many succeeded. Errors per entry: -FI_EADDRNOTAVAIL for an
//!   address that cannot name a peer (not AF_INET, IP 0.0.0.0 or port 0, as util's
//!   `ip_av_valid_addr`), -FI_EINVAL for an FI_ADDR_STR string that does not parse, and
//!   -FI_ENOSPC once the slots are full (util's "AV is full": `count` is only a hint and
//!   our storage is fixed). With FI_SYNC_ERR the codes (positive, 0 for success) go to
//!   the caller's array, as RXD does.
//! - **Duplicates**: inserting an address already present returns its existing fi_addr
//!   and counts a use; [`Av::remove`] drops one use (libfabric util's behaviour; fi_av(3)
//!   leaves duplicates undefined). This keeps the reverse index one-to-one.
//! - **Remove** of a value that is not in the AV (never inserted, removed, stale,
//!   FI_ADDR_NOTAVAIL) is -FI_ENOENT (util's `ofi_av_remove_addr`); the known values of
//!   the same call are still removed. [`Av::lookup`] of such a value is -FI_ENOENT too.
//! - **Lookup** copies what fits of the 16-byte address; a buffer shorter than
//!   [`ADDR_LEN`] gets the prefix and -FI_ETOOSMALL (the needed size is always
//!   [`ADDR_LEN`]; the C layer stores it in `*addrlen` in both cases).
//! - **FI_EVENT**: inserts need a bound EQ (-FI_ENOEQ otherwise) and refuse FI_SYNC_ERR
//!   (-FI_EINVAL). The core does the insert synchronously; through
//!   [`Av::insert_with`] the domain receives each failure `(index, err)` and must write
//!   one FI_AV_COMPLETE error entry per failure (`data` = index, `err`, the insert's
//!   `context`), then one FI_AV_COMPLETE entry with `data` = the returned count, and
//!   return 0 to the application.
//! - **Named (shared) AVs** are not supported: a `name` gives -FI_ENOSYS; FI_READ without
//!   a name is -FI_EINVAL (a read-only AV must be named).
//! - **rx_ctx_bits** (scalable endpoints) is accepted up to [`MAX_RX_CTX_BITS`]; MAP values
//!   keep those top bits clear so [`fi_rx_addr`] can use them and [`Av::resolve`] splits
//!   them off again.
//! - **Close**: the domain must refuse to close an AV with endpoints still bound
//!   (-FI_EBUSY): [`Av::bind_ep`] / [`Av::unbind_ep`] keep the count and
//!   [`Av::check_close`] answers.

use crate::addr::{self, ADDR_LEN, EpAddr};
use crate::errno::{Errno, Result};
use crate::flags::{FI_ADDR_NOTAVAIL, FiAddr, Flags};

pub use crate::hash::HashIndex;
use crate::hash::NIL;
pub use crate::info::AvType;

/// FI_EVENT (`fi_av_attr::flags`): inserts complete asynchronously through the bound EQ.
/// Same bit as FI_COMPLETION in `<rdma/fabric.h>`.
pub const FI_EVENT: Flags = Flags::COMPLETION;
/// FI_SYNC_ERR (insert flag, `<rdma/fi_domain.h>` bit 58): per-entry error codes go to
/// the array passed as the insert's context.
pub const FI_SYNC_ERR: Flags = Flags::from_bits_retain(1 << 58);
/// FI_SYMMETRIC (`fi_av_attr::flags`, `<rdma/fi_domain.h>` bit 59): every node has the
/// same sequential endpoint addresses. A hint; accepted and recorded.
pub const FI_SYMMETRIC: Flags = Flags::from_bits_retain(1 << 59);

/// The largest `rx_ctx_bits` an AV accepts: MAP values need the rest for slot and
/// generation.
pub const MAX_RX_CTX_BITS: i32 = 16;

/// `fi_rx_addr`: the address of receive context `rx_index` of the endpoint at
/// `fi_addr`, exactly as the inline function in `<rdma/fi_domain.h>` computes it. An
/// `rx_ctx_bits` outside `1..=64` (undefined in C) returns `fi_addr` unchanged.
pub const fn fi_rx_addr(fi_addr: FiAddr, rx_index: i32, rx_ctx_bits: i32) -> FiAddr {
    if rx_ctx_bits <= 0 || rx_ctx_bits > 64 {
        return fi_addr;
    }
    ((rx_index as u64) << (64 - rx_ctx_bits as u32)) | fi_addr
}

/// `struct fi_av_attr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AvAttr<'a> {
    /// `type`: FI_AV_MAP, FI_AV_TABLE or FI_AV_UNSPEC (resolved on open).
    pub av_type: AvType,
    /// Bits of an fi_addr reserved for a receive-context index (scalable endpoints).
    pub rx_ctx_bits: i32,
    /// Expected number of addresses: a hint (capacity is the storage's).
    pub count: usize,
    /// Expected endpoints per node: a hint.
    pub ep_per_node: usize,
    /// System name of a shared AV: not supported (-FI_ENOSYS).
    pub name: Option<&'a str>,
    /// Base address for shared MAP AVs; ignored without `name`.
    pub map_addr: u64,
    /// FI_EVENT, FI_READ, FI_SYMMETRIC.
    pub flags: Flags,
}

/// The addresses of one insert call, in any of the forms libfabric accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AvAddrs<'a> {
    /// FI_SOCKADDR_IN: packed 16-byte `struct sockaddr_in` records (`fi_av_insert`'s
    /// `addr` with `count = len / 16`).
    SockaddrIn(&'a [u8]),
    /// Already decoded addresses (Rust callers, the engine).
    Ep(&'a [EpAddr]),
    /// FI_ADDR_STR: one string per address (`char **`).
    Str(&'a [&'a str]),
    /// `fi_av_insertsvc` / `fi_av_insertsym`: `nodecnt` consecutive IPv4 addresses from
    /// `start.ip`, each with `svccnt` consecutive ports from `start.port`, node-major.
    Sym {
        /// The first address.
        start: EpAddr,
        /// How many node (IP) addresses.
        nodecnt: usize,
        /// How many service (port) addresses per node.
        svccnt: usize,
    },
}

impl<'a> AvAddrs<'a> {
    /// The addresses of `fi_av_insertsvc(node, service)`.
    pub fn svc(node: &str, service: Option<&str>) -> Result<AvAddrs<'static>> {
        AvAddrs::sym(node, 1, service, 1)
    }

    /// The addresses of `fi_av_insertsym(node, nodecnt, service, svccnt)`: IPs
    /// `node .. node + nodecnt - 1`, ports `service .. service + svccnt - 1`, all ports of
    /// a node before the next node. `node` must be a numeric IPv4 address or an
    /// FI_ADDR_STR address (then `service` must be `None`: -FI_EINVAL); host names and
    /// service names are -FI_ENOSYS (the core has no resolver: the hosted adapter
    /// resolves them and inserts the result). A range that would run past
    /// 255.255.255.255 or port 65535, or a count product that overflows, is -FI_EINVAL.
    pub fn sym(
        node: &str,
        nodecnt: usize,
        service: Option<&str>,
        svccnt: usize,
    ) -> Result<AvAddrs<'static>> {
        let start = if node.contains("://") {
            if service.is_some() {
                return Err(Errno::EINVAL);
            }
            EpAddr::parse_addr_str(node)?
        } else {
            let ip = addr::parse_ipv4(node).ok_or(Errno::ENOSYS)?;
            let port = match service {
                Some(s) => addr::parse_service(s)?,
                None => 0,
            };
            EpAddr::new(ip, port, 0)
        };
        let total = nodecnt.checked_mul(svccnt).ok_or(Errno::EINVAL)?;
        if total > 0 {
            let last_ip = u64::from(u32::from_be_bytes(start.ip)) + (nodecnt as u64 - 1);
            let last_port = u64::from(start.port) + (svccnt as u64 - 1);
            if last_ip > u64::from(u32::MAX) || last_port > u64::from(u16::MAX) {
                return Err(Errno::EINVAL);
            }
        }
        Ok(AvAddrs::Sym {
            start,
            nodecnt,
            svccnt,
        })
    }

    /// How many addresses: -FI_EINVAL if the sockaddr buffer is not whole records or a
    /// symmetric range overflows.
    pub fn count(&self) -> Result<usize> {
        match *self {
            AvAddrs::SockaddrIn(b) if b.len() % ADDR_LEN != 0 => Err(Errno::EINVAL),
            AvAddrs::SockaddrIn(b) => Ok(b.len() / ADDR_LEN),
            AvAddrs::Ep(a) => Ok(a.len()),
            AvAddrs::Str(s) => Ok(s.len()),
            AvAddrs::Sym {
                nodecnt, svccnt, ..
            } => nodecnt.checked_mul(svccnt).ok_or(Errno::EINVAL),
        }
    }

    /// Address `i` (< count), or its per-entry error.
    fn get(&self, i: usize) -> Result<EpAddr> {
        match *self {
            AvAddrs::SockaddrIn(b) => {
                let rec = b
                    .get(i * ADDR_LEN..(i + 1) * ADDR_LEN)
                    .ok_or(Errno::EINVAL)?;
                EpAddr::from_sockaddr_in(rec).ok_or(Errno::EADDRNOTAVAIL)
            }
            AvAddrs::Ep(a) => a.get(i).copied().ok_or(Errno::EINVAL),
            AvAddrs::Str(s) => EpAddr::parse_addr_str(s.get(i).ok_or(Errno::EINVAL)?),
            AvAddrs::Sym { start, svccnt, .. } => {
                // Ranges were checked when the value was built; recheck, never panic.
                let node = (i / svccnt.max(1)) as u64;
                let svc = (i % svccnt.max(1)) as u64;
                let ip = u32::try_from(u64::from(u32::from_be_bytes(start.ip)) + node)
                    .map_err(|_| Errno::EINVAL)?;
                let port = u16::try_from(u64::from(start.port) + svc).map_err(|_| Errno::EINVAL)?;
                Ok(EpAddr::new(ip.to_be_bytes(), port, start.ep_id))
            }
        }
    }
}

/// One entry of AV storage. Build storage with [`AvSlot::VACANT`], e.g.
/// `[AvSlot::VACANT; 1024]`.
#[derive(Debug, Clone, Copy)]
pub struct AvSlot {
    generation: u32,
    entry: Option<AvEntry>,
}

#[derive(Debug, Clone, Copy)]
struct AvEntry {
    addr: EpAddr,
    uses: u32,
    user_id: Option<FiAddr>,
}

impl AvSlot {
    /// An empty slot.
    pub const VACANT: AvSlot = AvSlot {
        generation: 0,
        entry: None,
    };
}

impl Default for AvSlot {
    fn default() -> Self {
        AvSlot::VACANT
    }
}

/// An address vector over slot storage `S` and reverse-index buckets `I`.
#[derive(Debug)]
pub struct Av<S, I> {
    av_type: AvType,
    rx_ctx_bits: u32,
    flags: Flags,
    count_hint: usize,
    ep_per_node: usize,
    slots: S,
    index: HashIndex<I>,
    len: usize,
    /// Slots at and above `hwm` have never been used.
    hwm: usize,
    /// Vacant slots below `hwm`.
    holes: usize,
    /// Every slot below `scan_from` is occupied.
    scan_from: usize,
    /// Generations of MAP values are masked to this (keeps rx_ctx_bits clear).
    gen_mask: u32,
    eq: Option<u64>,
    refs: u32,
    /// Addresses added so far (wraps): an engine holding messages whose sender was not
    /// in the AV when they arrived looks them up again only when this moved.
    inserted: u32,
}

impl<S, I> Av<S, I>
where
    S: AsRef<[AvSlot]> + AsMut<[AvSlot]>,
    I: AsRef<[u32]> + AsMut<[u32]>,
{
    /// `fi_av_open`: an AV over `slots` (its capacity) and `buckets` (the reverse index;
    /// must be longer than `slots`, -FI_EINVAL otherwise; twice as long is a good size).
    /// Validates `attr` as described in the module docs and writes the resolved type
    /// back into `attr.av_type`.
    pub fn new(attr: &mut AvAttr<'_>, mut slots: S, buckets: I) -> Result<Self> {
        if attr.flags.difference(FI_EVENT | Flags::READ | FI_SYMMETRIC) != Flags::empty() {
            return Err(Errno::EBADFLAGS);
        }
        if attr.name.is_some() {
            return Err(Errno::ENOSYS);
        }
        if attr.flags.contains(Flags::READ) {
            return Err(Errno::EINVAL);
        }
        if !(0..=MAX_RX_CTX_BITS).contains(&attr.rx_ctx_bits) {
            return Err(Errno::EINVAL);
        }
        let cap = slots.as_ref().len();
        if cap >= NIL as usize || (cap > 0 && buckets.as_ref().len() <= cap) {
            return Err(Errno::EINVAL);
        }
        if attr.av_type == AvType::Unspec {
            attr.av_type = AvType::Table;
        }
        slots.as_mut().fill(AvSlot::VACANT);
        let rx_ctx_bits = attr.rx_ctx_bits as u32;
        Ok(Av {
            av_type: attr.av_type,
            rx_ctx_bits,
            flags: attr.flags,
            count_hint: attr.count,
            ep_per_node: attr.ep_per_node,
            slots,
            index: HashIndex::new(buckets),
            len: 0,
            hwm: 0,
            holes: 0,
            scan_from: 0,
            gen_mask: u32::MAX >> rx_ctx_bits,
            eq: None,
            refs: 0,
            inserted: 0,
        })
    }

    /// How many addresses were added so far (wrapping): changes whenever an address
    /// becomes known, so a cached "not in the AV" can be trusted until it does.
    pub fn inserted(&self) -> u32 {
        self.inserted
    }

    /// The AV's type (never FI_AV_UNSPEC).
    pub fn av_type(&self) -> AvType {
        self.av_type
    }

    /// `rx_ctx_bits` from the attributes.
    pub fn rx_ctx_bits(&self) -> u32 {
        self.rx_ctx_bits
    }

    /// The open flags (FI_EVENT, FI_SYMMETRIC).
    pub fn flags(&self) -> Flags {
        self.flags
    }

    /// The `count` and `ep_per_node` hints given at open.
    pub fn hints(&self) -> (usize, usize) {
        (self.count_hint, self.ep_per_node)
    }

    /// How many distinct addresses the AV can hold.
    pub fn capacity(&self) -> usize {
        self.slots.as_ref().len()
    }

    /// How many distinct addresses it holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `fi_av_bind(av, eq, flags)`: `eq` is the domain's token for the EQ. Flags are
    /// reserved and must be 0, and an AV takes one EQ: -FI_EINVAL otherwise (util).
    pub fn bind_eq(&mut self, eq: u64, flags: Flags) -> Result<()> {
        if !flags.is_empty() || self.eq.is_some() {
            return Err(Errno::EINVAL);
        }
        self.eq = Some(eq);
        Ok(())
    }

    /// The bound EQ's token.
    pub fn eq(&self) -> Option<u64> {
        self.eq
    }

    /// Counts an endpoint bound to this AV.
    pub fn bind_ep(&mut self) {
        self.refs = self.refs.saturating_add(1);
    }

    /// Forgets one bound endpoint (when it closes).
    pub fn unbind_ep(&mut self) {
        self.refs = self.refs.saturating_sub(1);
    }

    /// How many endpoints are bound.
    pub fn refs(&self) -> u32 {
        self.refs
    }

    /// Whether `fi_close(av)` may proceed: -FI_EBUSY while endpoints are bound.
    pub fn check_close(&self) -> Result<()> {
        if self.refs > 0 {
            Err(Errno::EBUSY)
        } else {
            Ok(())
        }
    }

    /// `fi_av_insert` (and, with [`AvAddrs::svc`] / [`AvAddrs::sym`], `insertsvc` /
    /// `insertsym`). Writes each entry's fi_addr, or FI_ADDR_NOTAVAIL, to `fi_addr` (if
    /// given: at least `count` long, -FI_EINVAL otherwise; with FI_AV_USER_ID it is
    /// required and also carries the user ids in). With FI_SYNC_ERR, `sync_err` (the
    /// context array, at least `count` long, -FI_EINVAL otherwise) receives 0 or the
    /// positive error code per entry. Returns the number inserted.
    pub fn insert(
        &mut self,
        addrs: AvAddrs<'_>,
        fi_addr: Option<&mut [FiAddr]>,
        flags: Flags,
        sync_err: Option<&mut [i32]>,
    ) -> Result<usize> {
        self.check_insert_flags(flags)?;
        let count = addrs.count()?;
        let mut errs = None;
        if flags.contains(FI_SYNC_ERR) {
            let e = sync_err
                .ok_or(Errno::EINVAL)?
                .get_mut(..count)
                .ok_or(Errno::EINVAL)?;
            e.fill(0);
            errs = Some(e);
        }
        self.insert_with(addrs, fi_addr, flags, |i, e| {
            if let Some(errs) = errs.as_deref_mut() {
                errs[i] = e.code();
            }
        })
    }

    /// `fi_av_insertsvc`: see [`AvAddrs::svc`] and [`Av::insert`].
    pub fn insertsvc(
        &mut self,
        node: &str,
        service: Option<&str>,
        fi_addr: Option<&mut [FiAddr]>,
        flags: Flags,
        sync_err: Option<&mut [i32]>,
    ) -> Result<usize> {
        self.check_insert_flags(flags)?;
        self.insert(AvAddrs::svc(node, service)?, fi_addr, flags, sync_err)
    }

    /// `fi_av_insertsym`: see [`AvAddrs::sym`] and [`Av::insert`].
    #[allow(clippy::too_many_arguments)]
    pub fn insertsym(
        &mut self,
        node: &str,
        nodecnt: usize,
        service: Option<&str>,
        svccnt: usize,
        fi_addr: Option<&mut [FiAddr]>,
        flags: Flags,
        sync_err: Option<&mut [i32]>,
    ) -> Result<usize> {
        self.check_insert_flags(flags)?;
        let addrs = AvAddrs::sym(node, nodecnt, service, svccnt)?;
        self.insert(addrs, fi_addr, flags, sync_err)
    }

    fn check_insert_flags(&self, flags: Flags) -> Result<()> {
        if flags.difference(Flags::MORE | FI_SYNC_ERR | Flags::AV_USER_ID) != Flags::empty() {
            return Err(Errno::EBADFLAGS);
        }
        if self.flags.contains(FI_EVENT) {
            if self.eq.is_none() {
                return Err(Errno::ENOEQ);
            }
            if flags.contains(FI_SYNC_ERR) {
                return Err(Errno::EINVAL);
            }
        }
        Ok(())
    }

    /// The insert every other form calls: like [`Av::insert`], but each failed entry is
    /// reported to `on_error(index, err)` (what the domain turns into FI_AV_COMPLETE error
    /// events for an FI_EVENT AV). Call-level errors: -FI_EBADFLAGS (flags other than
    /// FI_MORE, FI_SYNC_ERR, FI_AV_USER_ID), -FI_ENOEQ (FI_EVENT AV without EQ),
    /// -FI_EINVAL (FI_SYNC_ERR on an FI_EVENT AV, short or missing `fi_addr`, bad
    /// address buffer); nothing is inserted then.
    pub fn insert_with(
        &mut self,
        addrs: AvAddrs<'_>,
        mut fi_addr: Option<&mut [FiAddr]>,
        flags: Flags,
        mut on_error: impl FnMut(usize, Errno),
    ) -> Result<usize> {
        self.check_insert_flags(flags)?;
        let count = addrs.count()?;
        let user_ids = flags.contains(Flags::AV_USER_ID);
        if let Some(out) = fi_addr.as_deref() {
            if out.len() < count {
                return Err(Errno::EINVAL);
            }
        } else if user_ids {
            return Err(Errno::EINVAL);
        }
        let mut inserted = 0;
        for i in 0..count {
            let user_id = match (&fi_addr, user_ids) {
                (Some(out), true) => Some(out[i]),
                _ => None,
            };
            let r = addrs.get(i).and_then(|a| self.insert_one(a, user_id));
            if let Some(out) = fi_addr.as_deref_mut() {
                out[i] = *r.as_ref().unwrap_or(&FI_ADDR_NOTAVAIL);
            }
            match r {
                Ok(_) => inserted += 1,
                Err(e) => on_error(i, e),
            }
        }
        Ok(inserted)
    }

    fn insert_one(&mut self, addr: EpAddr, user_id: Option<FiAddr>) -> Result<FiAddr> {
        if !addr.is_valid_peer() {
            return Err(Errno::EADDRNOTAVAIL);
        }
        if let Some(slot) = self.find_slot(&addr) {
            let e = self.slots.as_mut()[slot as usize]
                .entry
                .as_mut()
                .ok_or(Errno::EINVAL)?;
            e.uses = e.uses.checked_add(1).ok_or(Errno::ENOSPC)?;
            return Ok(self.encode(slot));
        }
        let slot = self.alloc_slot()?;
        if let Err(e) = self.index.insert(addr.to_u64(), slot as u32) {
            self.free_slot(slot);
            return Err(e);
        }
        let gen_mask = self.gen_mask;
        let s = &mut self.slots.as_mut()[slot];
        s.generation = match s.generation.wrapping_add(1) & gen_mask {
            0 => 1,
            g => g,
        };
        s.entry = Some(AvEntry {
            addr,
            uses: 1,
            user_id,
        });
        self.len += 1;
        self.inserted = self.inserted.wrapping_add(1);
        Ok(self.encode(slot as u32))
    }

    /// The lowest vacant slot, as FI_AV_TABLE requires.
    fn alloc_slot(&mut self) -> Result<usize> {
        if self.holes > 0 {
            let slots = self.slots.as_ref();
            let i = (self.scan_from..self.hwm)
                .find(|&i| slots[i].entry.is_none())
                .ok_or(Errno::ENOSPC)?;
            self.holes -= 1;
            self.scan_from = i + 1;
            return Ok(i);
        }
        if self.hwm < self.capacity() {
            self.hwm += 1;
            return Ok(self.hwm - 1);
        }
        Err(Errno::ENOSPC)
    }

    fn free_slot(&mut self, slot: usize) {
        // Only called for a slot taken by alloc_slot or emptied by remove.
        self.holes += 1;
        self.scan_from = self.scan_from.min(slot);
    }

    fn find_slot(&self, addr: &EpAddr) -> Option<u32> {
        let slots = self.slots.as_ref();
        self.index.find(addr.to_u64(), |s| {
            slots
                .get(s as usize)
                .and_then(|s| s.entry.as_ref())
                .is_some_and(|e| e.addr == *addr)
        })
    }

    fn encode(&self, slot: u32) -> FiAddr {
        match self.av_type {
            AvType::Map => {
                (u64::from(self.slots.as_ref()[slot as usize].generation) << 32) | u64::from(slot)
            }
            _ => u64::from(slot),
        }
    }

    /// The slot an fi_addr names, if it is live in this AV.
    fn decode(&self, fi_addr: FiAddr) -> Option<usize> {
        let (slot, generation) = match self.av_type {
            AvType::Map => {
                let g = fi_addr >> 32;
                if g == 0 || g > u64::from(self.gen_mask) {
                    return None;
                }
                ((fi_addr & 0xffff_ffff) as usize, Some(g as u32))
            }
            _ => (usize::try_from(fi_addr).ok()?, None),
        };
        let s = self.slots.as_ref().get(slot)?;
        s.entry.as_ref()?;
        match generation {
            Some(g) if g != s.generation => None,
            _ => Some(slot),
        }
    }

    /// `fi_av_remove`: removes one use of each address (see the module docs for
    /// duplicates). Flags are reserved: -FI_EINVAL unless empty (util). Values not in
    /// the AV give -FI_ENOENT after every known value has been removed.
    pub fn remove(&mut self, fi_addrs: &[FiAddr], flags: Flags) -> Result<()> {
        if !flags.is_empty() {
            return Err(Errno::EINVAL);
        }
        let mut ret = Ok(());
        for &fa in fi_addrs {
            let Some(slot) = self.decode(fa) else {
                ret = Err(Errno::ENOENT);
                continue;
            };
            let s = &mut self.slots.as_mut()[slot];
            let Some(e) = s.entry.as_mut() else {
                ret = Err(Errno::ENOENT);
                continue;
            };
            e.uses -= 1;
            if e.uses > 0 {
                continue;
            }
            let addr = e.addr;
            s.entry = None;
            let slots = self.slots.as_ref();
            self.index.remove(addr.to_u64(), slot as u32, |o| {
                slots[o as usize].entry.map_or(0, |e| e.addr.to_u64())
            });
            self.len -= 1;
            self.free_slot(slot);
        }
        ret
    }

    /// `fi_av_lookup`: copies the stored address (a 16-byte `sockaddr_in`) into `buf`,
    /// returning its size. A shorter `buf` receives the prefix that fits and the call
    /// returns -FI_ETOOSMALL; the needed size is [`ADDR_LEN`]. -FI_ENOENT if `fi_addr` is
    /// not in the AV.
    pub fn lookup(&self, fi_addr: FiAddr, buf: &mut [u8]) -> Result<usize> {
        let sa = self.lookup_addr(fi_addr)?.to_sockaddr_in();
        let n = buf.len().min(ADDR_LEN);
        buf[..n].copy_from_slice(&sa[..n]);
        if n < ADDR_LEN {
            Err(Errno::ETOOSMALL)
        } else {
            Ok(ADDR_LEN)
        }
    }

    /// The address stored for `fi_addr` (no receive-context bits); -FI_ENOENT if none.
    pub fn lookup_addr(&self, fi_addr: FiAddr) -> Result<EpAddr> {
        let slot = self.decode(fi_addr).ok_or(Errno::ENOENT)?;
        self.slots.as_ref()[slot]
            .entry
            .map(|e| e.addr)
            .ok_or(Errno::ENOENT)
    }

    /// `fi_av_straddr` for this AV's format (FI_SOCKADDR_IN): formats the 16-byte
    /// `sockaddr_in` `addr` (it need not be in the AV) into `buf` with libfabric's
    /// truncation rule and returns the size needed including the NUL. -FI_EINVAL if
    /// `addr` is not an AF_INET sockaddr_in (libfabric returns NULL then). For an
    /// FI_ADDR_STR domain use [`addr::straddr_str`].
    pub fn straddr(addr: &[u8], buf: &mut [u8]) -> Result<usize> {
        let a = EpAddr::from_sockaddr_in(addr).ok_or(Errno::EINVAL)?;
        Ok(a.straddr(buf))
    }

    /// For the data path: the peer address and receive-context index an fi_addr
    /// (possibly built with [`fi_rx_addr`]) targets. -FI_ENOENT if the address part is
    /// not in the AV.
    pub fn resolve(&self, fi_addr: FiAddr) -> Result<(EpAddr, u32)> {
        let (base, rx) = self.split_rx(fi_addr);
        Ok((self.lookup_addr(base)?, rx))
    }

    /// For a send: the address of the peer's receive context an fi_addr names, its
    /// index carried in the endpoint id's context bits (wire protocol 3.9;
    /// [`crate::sep`]). -FI_ENOENT if the address part is not in the AV, -FI_EINVAL for
    /// an index the endpoint id cannot carry.
    #[inline]
    pub fn resolve_ep(&self, fi_addr: FiAddr) -> Result<EpAddr> {
        let (mut a, rx) = self.resolve(fi_addr)?;
        if rx != 0 {
            if rx as usize >= crate::sep::CTX_WIRE_MAX || a.ep_id >> crate::sep::CTX_SHIFT != 0 {
                return Err(Errno::EINVAL);
            }
            a.ep_id = crate::sep::ctx_ep_id(a.ep_id, rx as usize);
        }
        Ok(a)
    }

    /// The slot of a message's source: its exact address, else, for an endpoint id
    /// with context bits, the scalable endpoint's base address.
    #[inline]
    fn find_source_slot(&self, addr: &EpAddr) -> Option<u32> {
        let found = self.find_slot(addr);
        if found.is_some() || addr.ep_id >> crate::sep::CTX_SHIFT == 0 {
            return found;
        }
        let base = EpAddr {
            ep_id: crate::sep::split_ep_id(addr.ep_id).0,
            ..*addr
        };
        self.find_slot(&base)
    }

    /// Splits an fi_addr into its AV value and its receive-context index.
    pub fn split_rx(&self, fi_addr: FiAddr) -> (FiAddr, u32) {
        match self.rx_ctx_bits {
            0 => (fi_addr, 0),
            b => {
                let shift = 64 - b;
                (fi_addr & (u64::MAX >> b), (fi_addr >> shift) as u32)
            }
        }
    }

    /// The slot index (`0..capacity`) of a live fi_addr: stable while the address stays
    /// in the AV, so the engine can keep per-peer state in an array indexed by it.
    pub fn slot_of(&self, fi_addr: FiAddr) -> Option<u32> {
        self.decode(self.split_rx(fi_addr).0).map(|s| s as u32)
    }

    /// Reverse lookup for FI_SOURCE: the fi_addr of a peer address, in O(1) expected.
    pub fn reverse_lookup(&self, addr: &EpAddr) -> Option<FiAddr> {
        self.find_slot(addr).map(|s| self.encode(s))
    }

    /// What a message from `addr` needs, in one lookup: the fi_addr receives match it
    /// with ([`Av::reverse_lookup`]), and, when `report` (FI_SOURCE), the source its
    /// completion reports ([`Av::source_addr`]); FI_ADDR_NOTAVAIL for what is unknown
    /// or not asked for.
    /// A message from a context of a scalable endpoint (context bits in its endpoint
    /// id) comes from the endpoint's address, as the AV holds it.
    pub fn message_source(&self, addr: &EpAddr, report: bool) -> (FiAddr, FiAddr) {
        match self.find_source_slot(addr) {
            Some(s) => {
                let fi = self.encode(s);
                let user = self.slots.as_ref()[s as usize]
                    .entry
                    .and_then(|e| e.user_id);
                (
                    fi,
                    if report {
                        user.unwrap_or(fi)
                    } else {
                        FI_ADDR_NOTAVAIL
                    },
                )
            }
            None => (FI_ADDR_NOTAVAIL, FI_ADDR_NOTAVAIL),
        }
    }

    /// The source address to report in a completion for a message from `addr`: the
    /// FI_AV_USER_ID given at insert if any, else its fi_addr, else FI_ADDR_NOTAVAIL
    /// (the engine then applies FI_SOURCE_ERR rules).
    pub fn source_addr(&self, addr: &EpAddr) -> FiAddr {
        match self.find_source_slot(addr) {
            Some(s) => match self.slots.as_ref()[s as usize]
                .entry
                .and_then(|e| e.user_id)
            {
                Some(id) => id,
                None => self.encode(s),
            },
            None => FI_ADDR_NOTAVAIL,
        }
    }
}

#[cfg(test)]
mod tests;
