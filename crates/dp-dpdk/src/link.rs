//! [`DpdkLink`]: one queue pair of a [`Port`](crate::Port) as a [`Link`].
//!
//! # Buffers and the flush rule
//!
//! * **Receive**: `rte_eth_rx_burst` fills a fixed array of [`MAX_BURST`] mbufs;
//!   [`Link::receive`] lends the next one's data through its token, and
//!   [`Link::receive_burst`] hands them to the closure one after another, refilling
//!   with further bursts up to `max`. Consumed mbufs are freed in bulk
//!   (`rte_pktmbuf_free_bulk`) once the array is used up, when a burst call returns, or
//!   when the link is dropped; a token dropped without `consume` leaves its mbuf for the
//!   next `receive`. Multi-segment frames (larger than one mbuf) are freed and counted
//!   ([`Stats::rx_dropped`]): the ports are configured without scatter, so they only
//!   come from a peer with a larger MTU (or, on `net_memif`, frames larger than its
//!   `bsize` buffers: see [`PortConfig::mtu`](crate::PortConfig::mtu)).
//! * **Transmit** (zero copy): [`Link::transmit`] lends a fresh mbuf's data room
//!   (`rte_pktmbuf_append` of up to [`Capabilities::mtu`] bytes), the stack writes the
//!   whole frame there, the token trims it to the length the stack reports and queues
//!   the mbuf in a transmit array of [`MAX_BURST`]; nothing is copied. Queued mbufs go
//!   to the driver with one `rte_eth_tx_burst` per flush, and a flush happens:
//!   1. when the array is full;
//!   2. at the start of every [`Link::receive`] / [`Link::receive_burst`] (the
//!      progress loop receives on every turn);
//!   3. at the end of every [`Link::transmit_burst`];
//!   4. on [`DpdkLink::flush`];
//!   5. when the link is dropped.
//!
//!   A flush offers the driver what it did not take up to [`TX_ATTEMPTS`] times in a
//!   row; what it still refuses (a full ring, a link that is down) is freed and counted
//!   in [`Stats::tx_dropped`]: the link never wedges, and the reliability protocol
//!   above retransmits.
//!
//! Every mbuf is freed exactly once on every path: sent (the driver frees it),
//! received and consumed (bulk free), refused or dropped (freed here), or still held
//! when the link is dropped (freed by `Drop`). Fresh transmit mbufs come from a small
//! per-link stash filled with `rte_pktmbuf_alloc_bulk`.

use std::ptr::NonNull;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use wire::frame::ETH_HEADER_LEN;
use wire::link::{Capabilities, Link, Medium, RxMeta, RxToken, TxMeta, TxToken};

use crate::mbuf::{HEADROOM, Mbuf, Mempool};
use crate::port::{LinkStatus, PortShared};
use crate::{Error, sys};

/// Mbufs per receive burst, per transmit batch and per allocation batch (also
/// [`Capabilities::max_burst`]).
pub const MAX_BURST: usize = 32;

/// How many times in a row one flush offers the driver the frames it did not take.
pub const TX_ATTEMPTS: usize = 4;

/// Counters of one link (the data path never returns errors; it counts them here).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Frames handed to the stack.
    pub rx_packets: u64,
    /// Bytes in those.
    pub rx_bytes: u64,
    /// `rte_eth_rx_burst` calls that returned frames.
    pub rx_bursts: u64,
    /// Received frames freed unseen (multi-segment).
    pub rx_dropped: u64,
    /// Frames the driver accepted for transmission.
    pub tx_packets: u64,
    /// Bytes in those.
    pub tx_bytes: u64,
    /// `rte_eth_tx_burst` calls that took at least one frame.
    pub tx_bursts: u64,
    /// `rte_eth_tx_burst` calls that took fewer frames than offered.
    pub tx_busy: u64,
    /// Frames freed unsent because the driver refused them [`TX_ATTEMPTS`] times (or
    /// a memif peer was gone).
    pub tx_dropped: u64,
    /// Transmit tokens the stack filled with an unusable length (0 is not counted:
    /// it means "nothing to send"); the mbuf went back to the stash.
    pub tx_refused: u64,
    /// `transmit()` calls that returned `None` because the pool was empty.
    pub tx_nombuf: u64,
}

/// One queue pair of a started port, as a [`Link`] of [`Medium::Ethernet`].
///
/// A link is `Send` but not `Sync`: it belongs to one thread at a time, and each queue
/// pair has at most one link ([`Port::link`](crate::Port::link)), so the burst
/// functions of a queue are never called concurrently. Give each lcore (or registered
/// thread, [`Eal::register_thread`](crate::Eal::register_thread)) its own queue pair.
#[derive(Debug)]
pub struct DpdkLink {
    port: Arc<PortShared>,
    queue: u16,
    caps: Capabilities,
    /// Received mbufs: `[rx_done..rx_head)` consumed and not yet freed,
    /// `[rx_head..rx_len)` not yet lent.
    rx: [*mut sys::rte_mbuf; MAX_BURST],
    rx_done: usize,
    rx_head: usize,
    rx_len: usize,
    /// Filled mbufs waiting for the next flush, and their lengths.
    tx: [*mut sys::rte_mbuf; MAX_BURST],
    tx_bytes: [u16; MAX_BURST],
    tx_len: usize,
    /// Fresh (reset) mbufs for transmit tokens: `spare[..spare_len]`.
    spare: [*mut sys::rte_mbuf; MAX_BURST],
    spare_len: usize,
    /// memif: look at the link before each burst while idle (see
    /// [`DpdkLink::link_gone`]).
    link_guard: bool,
    /// The last receive burst found nothing.
    idle: bool,
    stats: Stats,
}

// SAFETY: every mbuf pointer in the arrays is owned by this link alone; the port and
// its pool are shared through an Arc and are thread-safe (see Mempool); the queue pair
// is claimed by this link only, and DPDK lets any single thread at a time drive a
// queue. Moving the link moves all of that together.
unsafe impl Send for DpdkLink {}

impl DpdkLink {
    pub(crate) fn new(port: Arc<PortShared>, queue: u16) -> Self {
        let room = usize::from(port.mempool.data_room().saturating_sub(HEADROOM));
        let mtu = (usize::from(port.mtu) + ETH_HEADER_LEN).min(room);
        let mut caps = Capabilities::new(Medium::Ethernet, mtu);
        caps.max_burst = MAX_BURST;
        // memif is shared memory between two processes: nothing on the way can alter
        // a frame.
        caps.intact = port.is_memif();
        let link_guard = port.is_memif();
        DpdkLink {
            port,
            queue,
            caps,
            rx: [std::ptr::null_mut(); MAX_BURST],
            rx_done: 0,
            rx_head: 0,
            rx_len: 0,
            tx: [std::ptr::null_mut(); MAX_BURST],
            tx_bytes: [0; MAX_BURST],
            tx_len: 0,
            spare: [std::ptr::null_mut(); MAX_BURST],
            spare_len: 0,
            link_guard,
            idle: true,
            stats: Stats::default(),
        }
    }

    /// The port's MAC address (what frames from this link carry as source).
    pub fn mac(&self) -> [u8; 6] {
        self.port.mac
    }

    /// The DPDK port id.
    pub fn port_id(&self) -> u16 {
        self.port.id
    }

    /// The queue pair this link drives.
    pub fn queue(&self) -> u16 {
        self.queue
    }

    /// The port's link state.
    pub fn link_status(&self) -> Result<LinkStatus, Error> {
        self.port.link_status()
    }

    /// The port's mbuf pool.
    pub fn mempool(&self) -> &Mempool {
        &self.port.mempool
    }

    /// This link's counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// The port's own counters (of every queue of it).
    pub fn port_stats(&self) -> Result<crate::PortStats, Error> {
        self.port.stats()
    }

    /// Frames queued for the next flush.
    pub fn pending_tx(&self) -> usize {
        self.tx_len
    }

    /// Flush, then ask the driver to free the transmitted mbufs it still caches
    /// (`rte_eth_tx_done_cleanup`; a driver frees a sent mbuf when the hardware is done
    /// with it, often only on a later transmit). Returns how many it freed; drivers
    /// without the call report [`Error::Dpdk`] with `ENOTSUP`.
    pub fn tx_done_cleanup(&mut self) -> Result<u32, Error> {
        self.flush();
        // SAFETY: our claimed queue of a started port; 0 means "as many as possible".
        let ret = unsafe { sys::rte_eth_tx_done_cleanup(self.port.id, self.queue, 0) };
        Error::check("rte_eth_tx_done_cleanup", ret).map(|n| n as u32)
    }

    /// Mbufs this link holds right now (received not yet freed, queued, stashed).
    pub fn held_mbufs(&self) -> usize {
        (self.rx_len - self.rx_done) + self.tx_len + self.spare_len
    }

    /// Hand every queued frame to the driver now (see the [module docs](self));
    /// returns how many it took. Those it refused are freed and counted.
    pub fn flush(&mut self) -> usize {
        let total = self.tx_len;
        if total == 0 {
            return 0;
        }
        let mut sent = 0;
        if self.link_gone() {
            // Nobody to send to: the frames are dropped, as refused ones are.
            return self.drop_unsent(0, total);
        }
        for _ in 0..TX_ATTEMPTS {
            let rest = &mut self.tx[sent..total];
            // rest.len() <= MAX_BURST, so the cast is exact.
            // SAFETY: the queue is ours (claimed) and the port started; the first
            // rest.len() pointers are mbufs we own; the driver takes ownership of the
            // first n it returns and leaves the others to us.
            let n = unsafe {
                sys::shim_tx_burst(
                    self.port.id,
                    self.queue,
                    rest.as_mut_ptr(),
                    rest.len() as u16,
                )
            };
            let n = usize::from(n);
            if n > 0 {
                self.stats.tx_bursts += 1;
                self.stats.tx_packets += n as u64;
                self.stats.tx_bytes += self.tx_bytes[sent..sent + n]
                    .iter()
                    .map(|&b| u64::from(b))
                    .sum::<u64>();
            }
            sent += n;
            if sent == total {
                break;
            }
            self.stats.tx_busy += 1;
        }
        self.drop_unsent(sent, total)
    }

    /// Frees the frames `[sent..total)` the driver did not take; returns `sent`.
    fn drop_unsent(&mut self, sent: usize, total: usize) -> usize {
        if sent < total {
            let rest = &mut self.tx[sent..total];
            // SAFETY: the driver refused these mbufs (or never saw them), so we still
            // own them; freed once, and the array slots are forgotten just below.
            unsafe { sys::rte_pktmbuf_free_bulk(rest.as_mut_ptr(), rest.len() as u32) };
            self.stats.tx_dropped += (total - sent) as u64;
        }
        self.tx_len = 0;
        sent
    }

    /// Whether a memif peer went away. DPDK 22.11's memif tears a connection down in
    /// the EAL interrupt thread (unmapping the shared rings) without synchronising
    /// with bursts on other threads; a burst under way then reads unmapped memory
    /// (seen: a server polling while its client exited). The teardown marks the link
    /// down before it frees anything, and a burst is far shorter than what it does in
    /// between, so a burst that starts after the look is safe unless it is preempted.
    /// A peer goes away after its traffic ends, so the link is looked at only while
    /// the receive side is idle: a busy link pays nothing (each look costs about as
    /// much as an empty burst). Ports close in an agreed order for the rest (see
    /// `PortShared::shutdown`). Other drivers: never.
    fn link_gone(&self) -> bool {
        // SAFETY: a valid port id; the call only reads the port's link word.
        self.link_guard && self.idle && unsafe { sys::shim_link_up(self.port.id) } != 1
    }

    /// Free the consumed receive mbufs `[rx_done..rx_head)`.
    fn release_consumed(&mut self) {
        if self.rx_head > self.rx_done {
            let done = &mut self.rx[self.rx_done..self.rx_head];
            // SAFETY: consumed mbufs we own; their data is no longer lent (tokens only
            // lend during consume); freed once: rx_done moves past them.
            unsafe { sys::rte_pktmbuf_free_bulk(done.as_mut_ptr(), done.len() as u32) };
            self.rx_done = self.rx_head;
        }
        if self.rx_done == self.rx_len {
            (self.rx_done, self.rx_head, self.rx_len) = (0, 0, 0);
        }
    }

    /// Once every received mbuf has been lent: free them and receive the next burst.
    /// Returns whether there is a frame to lend.
    fn refill(&mut self) -> bool {
        if self.rx_head < self.rx_len {
            return true;
        }
        self.release_consumed();
        if self.link_gone() {
            return false;
        }
        // SAFETY: the array has room for MAX_BURST pointers and holds none we own
        // (release_consumed emptied it); the driver writes n owned mbufs at its start.
        let n = unsafe {
            sys::shim_rx_burst(
                self.port.id,
                self.queue,
                self.rx.as_mut_ptr(),
                MAX_BURST as u16,
            )
        };
        let n = usize::from(n).min(MAX_BURST);
        self.idle = n == 0;
        if n == 0 {
            return false;
        }
        self.stats.rx_bursts += 1;
        // Keep single-segment frames, in order.
        let mut kept = 0;
        for i in 0..n {
            let m = self.rx[i];
            // SAFETY: m is a valid mbuf the driver just handed us.
            if unsafe { sys::shim_pktmbuf_nb_segs(m) } == 1 {
                self.rx[kept] = m;
                kept += 1;
            } else {
                // SAFETY: we own m and forget it right here (the slot is reused).
                unsafe { sys::shim_pktmbuf_free(m) };
                self.stats.rx_dropped += 1;
            }
        }
        self.rx_len = kept;
        kept > 0
    }

    /// Lend the next received frame to `f` (a frame must be available).
    fn consume_next<R>(&mut self, f: impl FnOnce(&[u8]) -> R) -> R {
        let m = self.rx[self.rx_head];
        // Counted as consumed before `f` runs: if it panics, the mbuf is still freed
        // (by release_consumed or Drop), exactly once.
        self.rx_head += 1;
        let mut len = 0u16;
        // SAFETY: m is a valid single-segment mbuf we own; its data_len bytes at mtod
        // are initialised frame bytes, not touched by anyone else while lent here.
        let data = unsafe {
            let p = sys::shim_pktmbuf_data(m, &mut len);
            std::slice::from_raw_parts(p.cast::<u8>().cast_const(), usize::from(len))
        };
        self.stats.rx_packets += 1;
        self.stats.rx_bytes += u64::from(len);
        if self.link_guard && crate::port::is_done_frame(data) {
            // The peer polls no more (the stack drops the frame as not its own).
            self.port.peer_done.store(true, Ordering::Release);
        }
        f(data)
    }

    /// Make sure a fresh transmit mbuf is stashed.
    fn ensure_spare(&mut self) -> bool {
        if self.spare_len > 0 {
            return true;
        }
        let pool = &self.port.mempool;
        if pool.alloc_bulk_raw(&mut self.spare) {
            self.spare_len = MAX_BURST;
            return true;
        }
        // Fewer than a batch left: take one.
        match pool.alloc() {
            Some(m) => {
                self.spare[0] = m.into_raw().as_ptr();
                self.spare_len = 1;
                true
            }
            None => false,
        }
    }
}

impl Drop for DpdkLink {
    fn drop(&mut self) {
        self.flush();
        // Everything received, lent or not, is ours to free.
        self.rx_head = self.rx_len;
        self.release_consumed();
        if self.spare_len > 0 {
            let spare = &mut self.spare[..self.spare_len];
            // SAFETY: stashed mbufs we own, freed once (the count is reset below).
            unsafe { sys::rte_pktmbuf_free_bulk(spare.as_mut_ptr(), spare.len() as u32) };
            self.spare_len = 0;
        }
        if let Some(c) = self.port.claimed.get(usize::from(self.queue)) {
            c.store(false, Ordering::Release);
        }
    }
}

/// Lends one received frame of a [`DpdkLink`].
#[derive(Debug)]
pub struct DpdkRxToken<'a> {
    link: &'a mut DpdkLink,
}

impl RxToken for DpdkRxToken<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        let link = self.link;
        let r = link.consume_next(f);
        if link.rx_head == link.rx_len {
            // The whole burst has been consumed: give it back to the pool now.
            link.release_consumed();
        }
        r
    }
}

/// Lends the data room of one fresh mbuf of a [`DpdkLink`].
#[derive(Debug)]
pub struct DpdkTxToken<'a> {
    link: &'a mut DpdkLink,
}

impl TxToken for DpdkTxToken<'_> {
    fn consume_with<R, F: FnOnce(&mut [u8]) -> (TxMeta, R)>(self, max_len: usize, f: F) -> R {
        let link = self.link;
        let Some(last) = link.spare_len.checked_sub(1) else {
            // Unreachable: transmit() only makes a token with a stashed mbuf.
            return f(&mut []).1;
        };
        link.spare_len = last;
        let raw = link.spare[last];
        // SAFETY: a stashed mbuf (non-null, fresh from the port's pool) we own; from
        // here on the Mbuf owns it, so a panic in `f` frees it.
        let mut m = unsafe { Mbuf::from_raw(NonNull::new_unchecked(raw), &link.port.mempool) };
        let lent = max_len.min(link.caps.mtu).min(m.tailroom());
        let lent = u16::try_from(lent).unwrap_or(u16::MAX);
        let (meta, r) = match m.append(lent) {
            Some(buf) => f(buf),
            None => f(&mut []),
        };
        if meta.len != 0 && meta.len <= usize::from(lent) {
            let len = meta.len as u16; // <= lent
            m.trim(lent - len);
            let i = link.tx_len;
            link.tx[i] = m.into_raw().as_ptr();
            link.tx_bytes[i] = len;
            link.tx_len += 1;
            if link.tx_len == MAX_BURST {
                link.flush();
            }
        } else {
            if meta.len != 0 {
                link.stats.tx_refused += 1;
            }
            // Back to a reset mbuf, back to the stash.
            m.trim(lent);
            link.spare[link.spare_len] = m.into_raw().as_ptr();
            link.spare_len += 1;
        }
        r
    }
}

impl Link for DpdkLink {
    type RxToken<'a>
        = DpdkRxToken<'a>
    where
        Self: 'a;
    type TxToken<'a>
        = DpdkTxToken<'a>
    where
        Self: 'a;

    fn capabilities(&self) -> Capabilities {
        self.caps
    }

    fn receive(&mut self) -> Option<DpdkRxToken<'_>> {
        self.flush();
        if self.refill() {
            Some(DpdkRxToken { link: self })
        } else {
            None
        }
    }

    fn transmit(&mut self) -> Option<DpdkTxToken<'_>> {
        if self.tx_len == MAX_BURST {
            self.flush();
        }
        if !self.ensure_spare() {
            self.stats.tx_nombuf += 1;
            return None;
        }
        Some(DpdkTxToken { link: self })
    }

    fn receive_burst<F: FnMut(RxMeta, &[u8])>(&mut self, max: usize, mut f: F) -> usize {
        self.flush();
        let mut n = 0;
        while n < max {
            let fresh = self.rx_head == self.rx_len;
            if !self.refill() {
                break;
            }
            let burst = self.rx_len;
            while n < max && self.rx_head < self.rx_len {
                self.consume_next(|data| f(RxMeta::default(), data));
                n += 1;
            }
            // A short burst means the queue is empty for now.
            if fresh && burst < MAX_BURST {
                break;
            }
        }
        self.release_consumed();
        n
    }

    fn transmit_burst<F: FnMut(&mut [u8]) -> Option<TxMeta>>(
        &mut self,
        max: usize,
        mut f: F,
    ) -> usize {
        let mtu = self.caps.mtu;
        let mut n = 0;
        while n < max {
            let Some(tok) = self.transmit() else { break };
            let sent = tok.consume_with(mtu, |buf| match f(buf) {
                Some(m) => (m, m.len != 0 && m.len <= buf.len()),
                None => (TxMeta::none(), false),
            });
            if !sent {
                break;
            }
            n += 1;
        }
        self.flush();
        n
    }
}
