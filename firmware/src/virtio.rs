//! A virtio-net driver for the virtio-mmio transport (virtio 1.x, "modern" register
//! layout, version 2), implementing [`wire::link::Link`] on [`Medium::Ethernet`].
//!
//! This is what QEMU's `virt` machine offers (`-device virtio-net-device`, with
//! `-global virtio-mmio.force-legacy=false`); a DPU's own NIC queue driver implements the
//! same traits. The driver polls: no interrupts.
//!
//! # Queues and buffers
//!
//! One receive queue (0) and one transmit queue (1), split virtqueues of `RX` and `TX`
//! descriptors (powers of two) in a [`NetMem`] the caller places in static memory.
//! Descriptor `i` of a queue always points at buffer `i` of that queue, `B` bytes, so
//! descriptors are never chained and only their length changes: every buffer is one
//! 12-byte `virtio_net_hdr` (VIRTIO_F_VERSION_1 layout) followed by one Ethernet frame.
//!
//! * **Receive**: every buffer is posted at start. [`Link::receive`] peeks at the next
//!   used element; its token lends that buffer's frame in place and, once the closure
//!   returns, reposts the buffer. A token dropped unconsumed leaves the frame for the
//!   next call.
//! * **Transmit**: [`Link::transmit`] first reclaims the buffers the device has sent,
//!   then lends a free buffer's frame area (zero copy: the stack writes the frame where
//!   the device reads it); the header is zeroed (no offloads negotiated) and the buffer
//!   is made available. `None` when every buffer is in flight.
//!
//! Physical addresses are the buffers' addresses (identity mapping), and the memory is
//! coherent with the device (QEMU; a DPU's NIC queues likewise), so ordering needs only
//! barriers, no cache maintenance.
//!
//! # Safety model
//!
//! [`NetMem`] is shared with the device: the driver keeps a raw pointer to it and touches
//! the fields the device writes (used rings, received frames) with volatile reads after
//! an acquire barrier, and publishes what the device reads (descriptors, available rings,
//! frames to send) before a release barrier. Register access goes through [`Regs`], whose
//! hardware implementation [`MmioRegs`] is the only place that dereferences an MMIO
//! address.

use core::marker::PhantomData;
use core::ptr::{addr_of, addr_of_mut};
use core::sync::atomic::{Ordering, fence};

use wire::link::{Capabilities, Link, Medium, RxToken, TxMeta, TxToken};

/// `MagicValue`: "virt".
pub const MAGIC: u32 = 0x7472_6976;
/// Device ID of a network card.
pub const DEVICE_NET: u32 = 1;
/// Bytes of `struct virtio_net_hdr` with VIRTIO_F_VERSION_1 (`num_buffers` included).
pub const NET_HDR_LEN: usize = 12;
/// Largest Ethernet frame without FCS on a standard 1500-byte MTU.
pub const ETH_FRAME_MAX: usize = 1514;
/// Bytes of an Ethernet header (no VLAN tag, no FCS).
pub const ETH_HDR_LEN: usize = 14;
/// The IP MTU assumed when the device does not offer VIRTIO_NET_F_MTU.
pub const DEFAULT_MTU: usize = 1500;

/// Register offsets of the virtio-mmio transport (virtio 1.2, 4.2.2).
#[allow(missing_docs)]
pub mod reg {
    pub const MAGIC: usize = 0x000;
    pub const VERSION: usize = 0x004;
    pub const DEVICE_ID: usize = 0x008;
    pub const VENDOR_ID: usize = 0x00c;
    pub const DEVICE_FEATURES: usize = 0x010;
    pub const DEVICE_FEATURES_SEL: usize = 0x014;
    pub const DRIVER_FEATURES: usize = 0x020;
    pub const DRIVER_FEATURES_SEL: usize = 0x024;
    pub const QUEUE_SEL: usize = 0x030;
    pub const QUEUE_NUM_MAX: usize = 0x034;
    pub const QUEUE_NUM: usize = 0x038;
    pub const QUEUE_READY: usize = 0x044;
    pub const QUEUE_NOTIFY: usize = 0x050;
    pub const INTERRUPT_STATUS: usize = 0x060;
    pub const INTERRUPT_ACK: usize = 0x064;
    pub const STATUS: usize = 0x070;
    pub const QUEUE_DESC_LOW: usize = 0x080;
    pub const QUEUE_DESC_HIGH: usize = 0x084;
    pub const QUEUE_DRIVER_LOW: usize = 0x090;
    pub const QUEUE_DRIVER_HIGH: usize = 0x094;
    pub const QUEUE_DEVICE_LOW: usize = 0x0a0;
    pub const QUEUE_DEVICE_HIGH: usize = 0x0a4;
    pub const CONFIG_GENERATION: usize = 0x0fc;
    pub const CONFIG: usize = 0x100;
    /// `struct virtio_net_config`: `mtu` (le16) after `mac[6]`, `status`,
    /// `max_virtqueue_pairs`.
    pub const CONFIG_MTU: usize = CONFIG + 10;
}

/// Device status bits.
#[allow(missing_docs)]
pub mod status {
    pub const ACKNOWLEDGE: u32 = 1;
    pub const DRIVER: u32 = 2;
    pub const DRIVER_OK: u32 = 4;
    pub const FEATURES_OK: u32 = 8;
    pub const FAILED: u32 = 128;
}

/// Feature bits this driver knows.
pub mod feature {
    /// VIRTIO_NET_F_MTU: the device advises an MTU in its config space (QEMU's
    /// `host_mtu=` property); frames up to that MTU then fit the receive buffers.
    pub const NET_MTU: u64 = 1 << 3;
    /// VIRTIO_NET_F_MAC: the device has a MAC address in its config space.
    pub const NET_MAC: u64 = 1 << 5;
    /// VIRTIO_F_VERSION_1: the modern interface (required).
    pub const VERSION_1: u64 = 1 << 32;
}

const DESC_F_WRITE: u16 = 2;
const USED_F_NO_NOTIFY: u16 = 1;
const RXQ: u32 = 0;
const TXQ: u32 = 1;

/// Access to a virtio-mmio register window.
pub trait Regs {
    /// Reads the 32-bit register at byte offset `off`.
    fn read32(&self, off: usize) -> u32;
    /// Writes the 32-bit register at byte offset `off`.
    fn write32(&mut self, off: usize, value: u32);
    /// Reads the byte at offset `off` (device configuration space).
    fn read8(&self, off: usize) -> u8;
}

/// The registers of a virtio-mmio transport in the physical address space.
#[derive(Debug)]
pub struct MmioRegs {
    base: usize,
}

impl MmioRegs {
    /// The transport at `base`.
    ///
    /// # Safety
    ///
    /// `base` must be the address of a virtio-mmio register window (0x200 bytes) mapped
    /// as device memory, used by nothing else for as long as this value lives.
    pub const unsafe fn new(base: usize) -> Self {
        MmioRegs { base }
    }

    /// The transport's base address.
    pub fn base(&self) -> usize {
        self.base
    }
}

impl Regs for MmioRegs {
    fn read32(&self, off: usize) -> u32 {
        // SAFETY: `new`'s contract: `base..base + 0x200` is this transport's register
        // window; every offset the driver uses is a 4-aligned register inside it.
        unsafe { core::ptr::read_volatile((self.base + off) as *const u32) }
    }
    fn write32(&mut self, off: usize, value: u32) {
        // SAFETY: as in `read32`.
        unsafe { core::ptr::write_volatile((self.base + off) as *mut u32, value) }
    }
    fn read8(&self, off: usize) -> u8 {
        // SAFETY: as in `read32`; configuration space allows byte access.
        unsafe { core::ptr::read_volatile((self.base + off) as *const u8) }
    }
}

/// A split-virtqueue descriptor (`struct virtq_desc`).
#[derive(Debug, Clone, Copy)]
#[repr(C, align(16))]
struct Desc {
    addr: u64,
    len: u32,
    flags: u16,
    next: u16,
}

/// `struct virtq_avail` (driver area).
#[repr(C, align(2))]
struct Avail<const N: usize> {
    flags: u16,
    idx: u16,
    ring: [u16; N],
    used_event: u16,
}

/// `struct virtq_used_elem`.
#[derive(Debug, Clone, Copy)]
#[repr(C)]
struct UsedElem {
    id: u32,
    len: u32,
}

/// `struct virtq_used` (device area).
#[repr(C, align(4))]
struct Used<const N: usize> {
    flags: u16,
    idx: u16,
    ring: [UsedElem; N],
    avail_event: u16,
}

/// One virtqueue and its `N` buffers of `B` bytes.
#[repr(C, align(4096))]
pub struct QueueMem<const N: usize, const B: usize> {
    desc: [Desc; N],
    avail: Avail<N>,
    used: Used<N>,
    bufs: [[u8; B]; N],
}

impl<const N: usize, const B: usize> QueueMem<N, B> {
    const fn new() -> Self {
        QueueMem {
            desc: [Desc {
                addr: 0,
                len: 0,
                flags: 0,
                next: 0,
            }; N],
            avail: Avail {
                flags: 0,
                idx: 0,
                ring: [0; N],
                used_event: 0,
            },
            used: Used {
                flags: 0,
                idx: 0,
                ring: [UsedElem { id: 0, len: 0 }; N],
                avail_event: 0,
            },
            bufs: [[0; B]; N],
        }
    }
}

/// Everything the device reads or writes: the receive queue with `RX` buffers and the
/// transmit queue with `TX` buffers, each `B` bytes. All zero, so a `static` of it costs
/// only `.bss`.
#[repr(C)]
pub struct NetMem<const RX: usize, const TX: usize, const B: usize> {
    rx: QueueMem<RX, B>,
    tx: QueueMem<TX, B>,
}

impl<const RX: usize, const TX: usize, const B: usize> Default for NetMem<RX, TX, B> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const RX: usize, const TX: usize, const B: usize> NetMem<RX, TX, B> {
    /// Zeroed queue memory.
    pub const fn new() -> Self {
        NetMem {
            rx: QueueMem::new(),
            tx: QueueMem::new(),
        }
    }
}

/// Why the device could not be brought up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InitError {
    /// No virtio-mmio magic at the address.
    NoDevice,
    /// A legacy (version 1) transport: run QEMU with
    /// `-global virtio-mmio.force-legacy=false`.
    Legacy(u32),
    /// The transport holds another kind of device (or none: 0).
    NotNet(u32),
    /// The device does not offer VIRTIO_F_VERSION_1.
    NoVersion1,
    /// The device refused our feature set.
    FeaturesRefused,
    /// A queue is already in use or smaller than the driver's (`QueueNumMax`).
    Queue {
        /// Queue index.
        queue: u32,
        /// The device's maximum size.
        max: u32,
    },
}

/// What the driver counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NicStats {
    /// Frames received and lent to the stack.
    pub rx_frames: u64,
    /// Used receive elements with an impossible id or length (reposted, not lent).
    pub rx_errors: u64,
    /// Frames made available to the device for sending.
    pub tx_frames: u64,
    /// Transmit tokens released without a frame.
    pub tx_unused: u64,
    /// [`Link::transmit`] calls refused because every buffer was in flight.
    pub tx_full: u64,
    /// Queue notifications written.
    pub notifies: u64,
}

/// A virtio-net device driven over the virtio-mmio transport `R`, its queues in `'m`
/// memory.
pub struct VirtioNet<'m, R: Regs, const RX: usize, const TX: usize, const B: usize> {
    regs: R,
    mem: *mut NetMem<RX, TX, B>,
    _mem: PhantomData<&'m mut NetMem<RX, TX, B>>,
    mac: [u8; 6],
    features: u64,
    frame_max: usize,
    rx_next_used: u16,
    rx_next_avail: u16,
    tx_next_used: u16,
    tx_next_avail: u16,
    tx_free: [u16; TX],
    tx_free_len: usize,
    stats: NicStats,
}

impl<R: Regs, const RX: usize, const TX: usize, const B: usize> core::fmt::Debug
    for VirtioNet<'_, R, RX, TX, B>
{
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("VirtioNet")
            .field("mac", &self.mac)
            .field("features", &self.features)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<'m, R: Regs, const RX: usize, const TX: usize, const B: usize> VirtioNet<'m, R, RX, TX, B> {
    const CHECK: () = {
        assert!(RX.is_power_of_two() && RX <= 32768);
        assert!(TX.is_power_of_two() && TX <= 32768);
        assert!(B >= NET_HDR_LEN + ETH_FRAME_MAX && B <= u32::MAX as usize);
    };

    /// Whether `regs` is a virtio-mmio transport with a network device behind it.
    pub fn probe(regs: &R) -> Result<(), InitError> {
        if regs.read32(reg::MAGIC) != MAGIC {
            return Err(InitError::NoDevice);
        }
        let version = regs.read32(reg::VERSION);
        let id = regs.read32(reg::DEVICE_ID);
        if id != DEVICE_NET {
            return Err(InitError::NotNet(id));
        }
        if version != 2 {
            return Err(InitError::Legacy(version));
        }
        Ok(())
    }

    /// Resets the device, negotiates VIRTIO_F_VERSION_1 (and VIRTIO_NET_F_MAC and
    /// VIRTIO_NET_F_MTU when offered; nothing else), sets up both queues in `mem`, posts every receive buffer
    /// and sets DRIVER_OK. `default_mac` is used when the device has no MAC.
    pub fn new(
        mut regs: R,
        mem: &'m mut NetMem<RX, TX, B>,
        default_mac: [u8; 6],
    ) -> Result<Self, InitError> {
        let () = Self::CHECK;
        Self::probe(&regs)?;
        regs.write32(reg::STATUS, 0);
        while regs.read32(reg::STATUS) != 0 {
            core::hint::spin_loop();
        }
        regs.write32(reg::STATUS, status::ACKNOWLEDGE);
        regs.write32(reg::STATUS, status::ACKNOWLEDGE | status::DRIVER);
        regs.write32(reg::DEVICE_FEATURES_SEL, 0);
        let lo = regs.read32(reg::DEVICE_FEATURES);
        regs.write32(reg::DEVICE_FEATURES_SEL, 1);
        let hi = regs.read32(reg::DEVICE_FEATURES);
        let offered = u64::from(lo) | (u64::from(hi) << 32);
        let fail = |regs: &mut R, e| {
            let s = regs.read32(reg::STATUS);
            regs.write32(reg::STATUS, s | status::FAILED);
            Err(e)
        };
        if offered & feature::VERSION_1 == 0 {
            return fail(&mut regs, InitError::NoVersion1);
        }
        let features = offered & (feature::VERSION_1 | feature::NET_MAC | feature::NET_MTU);
        regs.write32(reg::DRIVER_FEATURES_SEL, 0);
        regs.write32(reg::DRIVER_FEATURES, features as u32);
        regs.write32(reg::DRIVER_FEATURES_SEL, 1);
        regs.write32(reg::DRIVER_FEATURES, (features >> 32) as u32);
        let s = status::ACKNOWLEDGE | status::DRIVER | status::FEATURES_OK;
        regs.write32(reg::STATUS, s);
        if regs.read32(reg::STATUS) & status::FEATURES_OK == 0 {
            return fail(&mut regs, InitError::FeaturesRefused);
        }

        // Descriptor i points at buffer i for good; receive buffers are device-writable.
        for (i, d) in mem.rx.desc.iter_mut().enumerate() {
            *d = Desc {
                addr: mem.rx.bufs[i].as_ptr() as u64,
                len: B as u32,
                flags: DESC_F_WRITE,
                next: 0,
            };
        }
        for (i, d) in mem.tx.desc.iter_mut().enumerate() {
            *d = Desc {
                addr: mem.tx.bufs[i].as_ptr() as u64,
                len: 0,
                flags: 0,
                next: 0,
            };
        }
        for (i, r) in mem.rx.avail.ring.iter_mut().enumerate() {
            *r = i as u16;
        }
        mem.rx.avail.idx = RX as u16;
        mem.rx.avail.flags = 0;
        mem.tx.avail.idx = 0;
        mem.tx.avail.flags = 0;
        mem.rx.used.idx = 0;
        mem.tx.used.idx = 0;
        let queues = [
            (
                RXQ,
                RX,
                addr_of!(mem.rx.desc) as u64,
                addr_of!(mem.rx.avail) as u64,
                addr_of!(mem.rx.used) as u64,
            ),
            (
                TXQ,
                TX,
                addr_of!(mem.tx.desc) as u64,
                addr_of!(mem.tx.avail) as u64,
                addr_of!(mem.tx.used) as u64,
            ),
        ];
        // The rings must be in memory before the device learns where they are.
        fence(Ordering::SeqCst);
        for (q, n, desc, avail, used) in queues {
            regs.write32(reg::QUEUE_SEL, q);
            let max = regs.read32(reg::QUEUE_NUM_MAX);
            if regs.read32(reg::QUEUE_READY) != 0 || (max as usize) < n {
                return fail(&mut regs, InitError::Queue { queue: q, max });
            }
            regs.write32(reg::QUEUE_NUM, n as u32);
            regs.write32(reg::QUEUE_DESC_LOW, desc as u32);
            regs.write32(reg::QUEUE_DESC_HIGH, (desc >> 32) as u32);
            regs.write32(reg::QUEUE_DRIVER_LOW, avail as u32);
            regs.write32(reg::QUEUE_DRIVER_HIGH, (avail >> 32) as u32);
            regs.write32(reg::QUEUE_DEVICE_LOW, used as u32);
            regs.write32(reg::QUEUE_DEVICE_HIGH, (used >> 32) as u32);
            regs.write32(reg::QUEUE_READY, 1);
        }
        let mac = if features & feature::NET_MAC != 0 {
            read_mac(&regs)
        } else {
            default_mac
        };
        // Frames as large as the device's MTU asks for, if our buffers hold them (the
        // MTU the stack is told is what both ends agree on: the host's side of the link
        // must have the same).
        let mtu = if features & feature::NET_MTU != 0 {
            usize::from(read_config16(&regs, reg::CONFIG_MTU))
        } else {
            DEFAULT_MTU
        };
        let frame_max = (mtu.max(576) + ETH_HDR_LEN).min(B - NET_HDR_LEN);
        regs.write32(reg::STATUS, s | status::DRIVER_OK);
        let mut tx_free = [0u16; TX];
        for (i, f) in tx_free.iter_mut().enumerate() {
            *f = (TX - 1 - i) as u16;
        }
        let mut nic = VirtioNet {
            regs,
            mem: core::ptr::from_mut(mem),
            _mem: PhantomData,
            mac,
            features,
            frame_max,
            rx_next_used: 0,
            rx_next_avail: RX as u16,
            tx_next_used: 0,
            tx_next_avail: 0,
            tx_free,
            tx_free_len: TX,
            stats: NicStats::default(),
        };
        nic.notify(RXQ);
        Ok(nic)
    }

    /// The device's MAC address (or the default given to [`VirtioNet::new`]).
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// The largest Ethernet frame (header included, no FCS) sent or expected:
    /// the device's MTU (VIRTIO_NET_F_MTU, else [`DEFAULT_MTU`]) plus the header, capped
    /// by the buffers.
    pub fn frame_max(&self) -> usize {
        self.frame_max
    }

    /// The negotiated feature bits.
    pub fn features(&self) -> u64 {
        self.features
    }

    /// What the driver counted.
    pub fn stats(&self) -> &NicStats {
        &self.stats
    }

    /// Acknowledges pending interrupts (the driver polls; this only keeps the
    /// interrupt line quiet).
    pub fn ack_interrupts(&mut self) {
        let s = self.regs.read32(reg::INTERRUPT_STATUS);
        if s != 0 {
            self.regs.write32(reg::INTERRUPT_ACK, s);
        }
    }

    /// The transport's registers (tests drive a simulated device through them).
    pub fn regs_mut(&mut self) -> &mut R {
        &mut self.regs
    }

    fn notify(&mut self, queue: u32) {
        // Everything published so far must reach the device before the doorbell.
        fence(Ordering::SeqCst);
        let used_flags = match queue {
            // SAFETY: `mem` is valid for 'm (it came from a `&'m mut` we keep
            // exclusive); `flags` is device-written, hence the volatile read.
            RXQ => unsafe { addr_of!((*self.mem).rx.used.flags).read_volatile() },
            // SAFETY: as above.
            _ => unsafe { addr_of!((*self.mem).tx.used.flags).read_volatile() },
        };
        if used_flags & USED_F_NO_NOTIFY == 0 {
            self.regs.write32(reg::QUEUE_NOTIFY, queue);
            self.stats.notifies += 1;
        }
    }

    /// Whether a received frame is waiting (reads only the used ring in memory, never a
    /// register).
    pub fn rx_pending(&self) -> bool {
        self.rx_peek().is_some()
    }

    /// The next used receive element, if the device has filled a buffer.
    fn rx_peek(&self) -> Option<(usize, usize)> {
        // SAFETY: `mem` is valid for 'm; `used.idx` is written by the device, so it is
        // read volatile.
        let used = unsafe { addr_of!((*self.mem).rx.used.idx).read_volatile() };
        if used == self.rx_next_used {
            return None;
        }
        // The element (and the frame) were written before `idx`.
        fence(Ordering::Acquire);
        let slot = usize::from(self.rx_next_used) % RX;
        // SAFETY: `slot < RX`; the element was published by the device before `idx`.
        let e = unsafe { addr_of!((*self.mem).rx.used.ring[slot]).read_volatile() };
        Some((e.id as usize, e.len as usize))
    }

    /// Gives the used receive element back to the device.
    fn rx_repost(&mut self, id: usize) {
        let slot = usize::from(self.rx_next_avail) % RX;
        // SAFETY: `mem` is valid for 'm and only this driver writes the available ring;
        // `slot < RX`. Volatile: the device reads it concurrently.
        unsafe {
            addr_of_mut!((*self.mem).rx.avail.ring[slot]).write_volatile(id as u16);
        }
        self.rx_next_avail = self.rx_next_avail.wrapping_add(1);
        fence(Ordering::Release);
        // SAFETY: as above; the ring entry is visible before the index moves.
        unsafe {
            addr_of_mut!((*self.mem).rx.avail.idx).write_volatile(self.rx_next_avail);
        }
        self.rx_next_used = self.rx_next_used.wrapping_add(1);
        self.notify(RXQ);
    }

    /// Moves the buffers the device has sent back to the free list.
    fn tx_reclaim(&mut self) {
        // SAFETY: `mem` is valid for 'm; `used.idx` is device-written.
        let used = unsafe { addr_of!((*self.mem).tx.used.idx).read_volatile() };
        if used == self.tx_next_used {
            return;
        }
        fence(Ordering::Acquire);
        while self.tx_next_used != used {
            let slot = usize::from(self.tx_next_used) % TX;
            // SAFETY: `slot < TX`; published by the device before `idx`.
            let e = unsafe { addr_of!((*self.mem).tx.used.ring[slot]).read_volatile() };
            if (e.id as usize) < TX && self.tx_free_len < TX {
                self.tx_free[self.tx_free_len] = e.id as u16;
                self.tx_free_len += 1;
            }
            self.tx_next_used = self.tx_next_used.wrapping_add(1);
        }
    }

    /// Makes transmit buffer `id` available with `len` bytes (header included).
    fn tx_post(&mut self, id: usize, len: usize) {
        let slot = usize::from(self.tx_next_avail) % TX;
        // SAFETY: `mem` is valid for 'm; `id < TX` (it came from the free list) and
        // `slot < TX`; the device does not read a descriptor that is not available.
        unsafe {
            addr_of_mut!((*self.mem).tx.desc[id].len).write_volatile(len as u32);
            addr_of_mut!((*self.mem).tx.avail.ring[slot]).write_volatile(id as u16);
        }
        self.tx_next_avail = self.tx_next_avail.wrapping_add(1);
        fence(Ordering::Release);
        // SAFETY: as above; descriptor, frame and ring entry are visible first.
        unsafe {
            addr_of_mut!((*self.mem).tx.avail.idx).write_volatile(self.tx_next_avail);
        }
        self.stats.tx_frames += 1;
        self.notify(TXQ);
    }
}

fn read_config16<R: Regs>(regs: &R, off: usize) -> u16 {
    loop {
        let gen0 = regs.read32(reg::CONFIG_GENERATION);
        let v = u16::from_le_bytes([regs.read8(off), regs.read8(off + 1)]);
        if regs.read32(reg::CONFIG_GENERATION) == gen0 {
            return v;
        }
    }
}

fn read_mac<R: Regs>(regs: &R) -> [u8; 6] {
    loop {
        let gen0 = regs.read32(reg::CONFIG_GENERATION);
        let mut mac = [0u8; 6];
        for (i, b) in mac.iter_mut().enumerate() {
            *b = regs.read8(reg::CONFIG + i);
        }
        if regs.read32(reg::CONFIG_GENERATION) == gen0 {
            return mac;
        }
    }
}

/// A received frame, lent in place until [`RxToken::consume`] returns.
pub struct VirtioRxToken<'a, 'm, R: Regs, const RX: usize, const TX: usize, const B: usize> {
    nic: &'a mut VirtioNet<'m, R, RX, TX, B>,
    id: usize,
    len: usize,
}

impl<R: Regs, const RX: usize, const TX: usize, const B: usize> RxToken
    for VirtioRxToken<'_, '_, R, RX, TX, B>
{
    fn consume<T, F: FnOnce(&[u8]) -> T>(self, f: F) -> T {
        let nic = self.nic;
        let frame: &[u8] = if self.id < RX && self.len >= NET_HDR_LEN && self.len <= B {
            nic.stats.rx_frames += 1;
            // SAFETY: `id < RX`, so the buffer is inside `mem`, valid for 'm. The device
            // finished writing it before publishing the used element (acquire barrier
            // in `rx_peek`) and does not touch it again until we repost it below, after
            // the borrow ends; `len <= B` bounds the slice.
            unsafe {
                let buf = addr_of!((*nic.mem).rx.bufs[self.id]) as *const u8;
                core::slice::from_raw_parts(buf.add(NET_HDR_LEN), self.len - NET_HDR_LEN)
            }
        } else {
            nic.stats.rx_errors += 1;
            &[]
        };
        let r = f(frame);
        if self.id < RX {
            nic.rx_repost(self.id);
        } else {
            // Not a buffer of ours: skip the element (nothing to give back).
            nic.rx_next_used = nic.rx_next_used.wrapping_add(1);
        }
        r
    }
}

/// A free transmit buffer, lent until a consume method returns (a token dropped
/// unconsumed takes nothing).
pub struct VirtioTxToken<'a, 'm, R: Regs, const RX: usize, const TX: usize, const B: usize> {
    nic: &'a mut VirtioNet<'m, R, RX, TX, B>,
}

impl<R: Regs, const RX: usize, const TX: usize, const B: usize> TxToken
    for VirtioTxToken<'_, '_, R, RX, TX, B>
{
    fn consume_with<T, F: FnOnce(&mut [u8]) -> (TxMeta, T)>(self, max_len: usize, f: F) -> T {
        let nic = self.nic;
        // `transmit` only hands out a token when the free list is not empty.
        let Some(free) = nic.tx_free_len.checked_sub(1) else {
            return f(&mut []).1;
        };
        nic.tx_free_len = free;
        let id = usize::from(nic.tx_free[free]);
        let lent = max_len.min(B - NET_HDR_LEN).min(nic.frame_max);
        // SAFETY: `id < TX` (from the free list), so the buffer is inside `mem`, valid
        // for 'm; the device does not read a buffer that is not available, and this one
        // is not until `tx_post` below, after the borrow ends. `NET_HDR_LEN + lent <= B`.
        let buf = unsafe {
            let p = addr_of_mut!((*nic.mem).tx.bufs[id]) as *mut u8;
            core::slice::from_raw_parts_mut(p, NET_HDR_LEN + lent)
        };
        // No offloads negotiated: an all-zero header (num_buffers is ignored on transmit).
        buf[..NET_HDR_LEN].fill(0);
        let (meta, r) = f(&mut buf[NET_HDR_LEN..]);
        if meta.len == 0 || meta.len > lent {
            nic.stats.tx_unused += 1;
            nic.tx_free_len += 1;
        } else {
            nic.tx_post(id, NET_HDR_LEN + meta.len);
        }
        r
    }
}

impl<'m, R: Regs, const RX: usize, const TX: usize, const B: usize> Link
    for VirtioNet<'m, R, RX, TX, B>
{
    type RxToken<'a>
        = VirtioRxToken<'a, 'm, R, RX, TX, B>
    where
        Self: 'a;
    type TxToken<'a>
        = VirtioTxToken<'a, 'm, R, RX, TX, B>
    where
        Self: 'a;

    fn capabilities(&self) -> Capabilities {
        let mut caps = Capabilities::new(Medium::Ethernet, self.frame_max);
        caps.max_burst = RX.min(TX).min(32);
        caps
    }

    fn receive(&mut self) -> Option<Self::RxToken<'_>> {
        let (id, len) = self.rx_peek()?;
        Some(VirtioRxToken { nic: self, id, len })
    }

    fn transmit(&mut self) -> Option<Self::TxToken<'_>> {
        self.tx_reclaim();
        if self.tx_free_len == 0 {
            self.stats.tx_full += 1;
            return None;
        }
        Some(VirtioTxToken { nic: self })
    }
}
