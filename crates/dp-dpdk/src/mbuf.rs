//! Packet buffer pools and owned mbufs.

use std::ffi::CString;
use std::marker::PhantomData;
use std::ptr::NonNull;

use crate::{Eal, Error, sys};

/// Bytes of headroom DPDK reserves at the start of every mbuf (`RTE_PKTMBUF_HEADROOM`).
pub const HEADROOM: u16 = sys::RTE_PKTMBUF_HEADROOM as u16;

/// Default data room of a pool's mbufs: headroom plus 2048 bytes
/// (`RTE_MBUF_DEFAULT_BUF_SIZE`), enough for a 1514-byte frame in one segment.
pub const DEFAULT_DATA_ROOM: u16 = sys::RTE_MBUF_DEFAULT_BUF_SIZE as u16;

/// How a pool's mbufs lie in memory ([`Mempool::layout`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolLayout {
    /// End of the last mbuf (its mempool header included), in bytes from the start of
    /// the pool's first memory chunk.
    pub span: u64,
    /// What the pool's mbufs take back to back: mbufs times their object size.
    pub packed: u64,
    /// Memory chunks the pool spans.
    pub chunks: u32,
}

impl PoolLayout {
    /// Every mbuf inside the first `packed` bytes of one chunk (what `net_af_xdp`
    /// registers).
    pub fn is_packed(&self) -> bool {
        self.chunks == 1 && self.span <= self.packed
    }
}

/// A pool of packet mbufs (`rte_pktmbuf_pool_create`), freed when dropped.
///
/// Mbufs borrow their pool ([`Mbuf<'pool>`](Mbuf)), so none can outlive it.
#[derive(Debug)]
pub struct Mempool {
    ptr: NonNull<sys::rte_mempool>,
    name: String,
    size: u32,
}

// SAFETY: the pool uses DPDK's default "ring_mp_mc" ops, safe for concurrent get/put
// from any threads; the fields Rust reads (size, data room) never change after creation.
unsafe impl Send for Mempool {}
// SAFETY: as above; every method takes `&self` and maps to a thread-safe DPDK call.
unsafe impl Sync for Mempool {}

impl Mempool {
    /// A pool of `size` mbufs with `data_room` bytes each (headroom included; see
    /// [`DEFAULT_DATA_ROOM`]) and per-lcore caches of `cache` mbufs, on NUMA `socket`
    /// (-1: any). Names must be unique in the process and at most 25 bytes long.
    pub fn new(
        eal: &'static Eal,
        name: &str,
        size: u32,
        cache: u32,
        data_room: u16,
        socket: i32,
    ) -> Result<Self, Error> {
        Self::create(eal, name, size, cache, data_room, socket, false)
    }

    /// Like [`Mempool::new`], but the mbufs lie back to back in one memory chunk, page
    /// boundaries or not (`RTE_MEMPOOL_F_NO_IOVA_CONTIG`). What `net_af_xdp` needs:
    /// DPDK 22.11 registers `populated_size` objects' worth of bytes from the pool's
    /// first chunk as the AF_XDP UMEM, while a default pool on 4 KiB pages (no
    /// hugepages) starts every mbuf that would cross a page on the next page, so its
    /// later mbufs lie beyond the UMEM and the kernel refuses the frames sent from them
    /// ([`Mempool::layout`]). Not for devices that DMA into mbufs page by page.
    pub fn new_packed(
        eal: &'static Eal,
        name: &str,
        size: u32,
        cache: u32,
        data_room: u16,
        socket: i32,
    ) -> Result<Self, Error> {
        Self::create(eal, name, size, cache, data_room, socket, true)
    }

    fn create(
        _eal: &'static Eal,
        name: &str,
        size: u32,
        cache: u32,
        data_room: u16,
        socket: i32,
        packed: bool,
    ) -> Result<Self, Error> {
        if data_room <= HEADROOM {
            return Err(Error::InvalidArgument(format!(
                "mbuf data room {data_room} leaves no space after the {HEADROOM}-byte headroom"
            )));
        }
        let cname = CString::new(name)
            .map_err(|_| Error::InvalidArgument(format!("pool name {name:?}")))?;
        let n = cname.as_ptr();
        // SAFETY: EAL is initialised (we hold &Eal); the name is a valid C string that
        // DPDK copies; the other arguments are plain values DPDK validates.
        let ptr = unsafe {
            if packed {
                sys::shim_pktmbuf_pool_create_packed(n, size, cache, data_room, socket)
            } else {
                sys::rte_pktmbuf_pool_create(n, size, cache, 0, data_room, socket)
            }
        };
        let ptr = NonNull::new(ptr).ok_or_else(|| Error::rte_errno("rte_pktmbuf_pool_create"))?;
        Ok(Mempool {
            ptr,
            name: name.to_owned(),
            size,
        })
    }

    /// Where the mbufs lie: the end of the last one counted from the start of the
    /// pool's first memory chunk, the bytes the pool's objects take back to back, and
    /// the number of memory chunks. A pool is packed when the first two are equal and
    /// there is one chunk.
    pub fn layout(&self) -> PoolLayout {
        let (mut span, mut packed, mut chunks) = (0u64, 0u64, 0u32);
        // SAFETY: the pool is alive and populated; the shim only reads its chunk list
        // and walks its objects, writing the three outputs we own.
        unsafe { sys::shim_mempool_layout(self.ptr.as_ptr(), &mut span, &mut packed, &mut chunks) };
        PoolLayout {
            span,
            packed,
            chunks,
        }
    }

    /// The pool's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Mbufs in the pool in total.
    pub fn capacity(&self) -> u32 {
        self.size
    }

    /// Mbufs allocated and not yet returned (`rte_mempool_in_use_count`; mbufs in
    /// per-lcore caches count as available). A leak check compares this before and
    /// after.
    pub fn in_use(&self) -> u32 {
        // SAFETY: the pool is alive; the call only reads its counters.
        unsafe { sys::rte_mempool_in_use_count(self.ptr.as_ptr()) }
    }

    /// Mbufs available (`rte_mempool_avail_count`).
    pub fn available(&self) -> u32 {
        // SAFETY: as in `in_use`.
        unsafe { sys::rte_mempool_avail_count(self.ptr.as_ptr()) }
    }

    /// Data room of each mbuf, headroom included.
    pub fn data_room(&self) -> u16 {
        // SAFETY: the pool is alive and is a pktmbuf pool (made by
        // rte_pktmbuf_pool_create), whose private area holds the data room.
        unsafe { sys::shim_pktmbuf_data_room_size(self.ptr.as_ptr()) }
    }

    /// A reset mbuf (no data, default headroom), or `None` when the pool is empty.
    pub fn alloc(&self) -> Option<Mbuf<'_>> {
        // SAFETY: the pool is alive; the returned mbuf (if any) is ours alone.
        let m = unsafe { sys::shim_pktmbuf_alloc(self.ptr.as_ptr()) };
        // SAFETY: a non-null mbuf fresh from this pool, owned by nobody else.
        NonNull::new(m).map(|m| unsafe { Mbuf::from_raw(m, self) })
    }

    /// Fill `out` with reset mbufs, all or none (`rte_pktmbuf_alloc_bulk`); `false`
    /// when the pool has fewer than `out.len()`. The caller owns what was written.
    pub(crate) fn alloc_bulk_raw(&self, out: &mut [*mut sys::rte_mbuf]) -> bool {
        let Ok(n) = u32::try_from(out.len()) else {
            return false;
        };
        // SAFETY: the pool is alive and `out` has room for exactly n pointers.
        unsafe { sys::shim_pktmbuf_alloc_bulk(self.ptr.as_ptr(), out.as_mut_ptr(), n) == 0 }
    }

    pub(crate) fn as_ptr(&self) -> *mut sys::rte_mempool {
        self.ptr.as_ptr()
    }
}

impl Drop for Mempool {
    fn drop(&mut self) {
        // SAFETY: every mbuf borrows the pool (Mbuf<'_>) or is owned by a link or port
        // that holds the pool alive, so none is outstanding in Rust; the pool is freed
        // once.
        unsafe { sys::rte_mempool_free(self.ptr.as_ptr()) }
    }
}

/// One owned packet mbuf (possibly a chain of segments), freed exactly once: by
/// [`Drop`], or by whoever takes it with [`Mbuf::into_raw`] (a transmit queue does).
#[derive(Debug)]
pub struct Mbuf<'pool> {
    ptr: NonNull<sys::rte_mbuf>,
    _pool: PhantomData<&'pool Mempool>,
}

impl<'pool> Mbuf<'pool> {
    /// Take ownership of `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` is a valid mbuf that nobody else owns or will free, and the pool it
    /// returns to (`_pool`, or one that outlives `'pool`) stays alive for `'pool`.
    pub(crate) unsafe fn from_raw(ptr: NonNull<sys::rte_mbuf>, _pool: &'pool Mempool) -> Self {
        Mbuf {
            ptr,
            _pool: PhantomData,
        }
    }

    /// Give up ownership without freeing (for a hand-off to `rte_eth_tx_burst` or a
    /// queue that frees it later).
    pub fn into_raw(self) -> NonNull<sys::rte_mbuf> {
        let p = self.ptr;
        std::mem::forget(self);
        p
    }

    /// Bytes of the whole packet (`pkt_len`).
    pub fn pkt_len(&self) -> usize {
        // SAFETY: we own a valid mbuf.
        unsafe { sys::shim_pktmbuf_pkt_len(self.ptr.as_ptr()) as usize }
    }

    /// Segments in the chain.
    pub fn segments(&self) -> u16 {
        // SAFETY: we own a valid mbuf.
        unsafe { sys::shim_pktmbuf_nb_segs(self.ptr.as_ptr()) }
    }

    /// Free space after the data of the (first and only, for the mbufs we build)
    /// segment.
    pub fn tailroom(&self) -> usize {
        // SAFETY: we own a valid mbuf.
        usize::from(unsafe { sys::shim_pktmbuf_tailroom(self.ptr.as_ptr()) })
    }

    /// Free space before the data.
    pub fn headroom(&self) -> usize {
        // SAFETY: we own a valid mbuf.
        usize::from(unsafe { sys::shim_pktmbuf_headroom(self.ptr.as_ptr()) })
    }

    /// The data of the first segment.
    pub fn data(&self) -> &[u8] {
        let mut len = 0u16;
        // SAFETY: we own a valid mbuf; mtod points at data_len initialised bytes of its
        // buffer, which nobody else touches while we hold `&self`.
        unsafe {
            let p = sys::shim_pktmbuf_data(self.ptr.as_ptr(), &mut len);
            std::slice::from_raw_parts(p.cast::<u8>(), usize::from(len))
        }
    }

    /// The data of the first segment, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        let mut len = 0u16;
        // SAFETY: as in `data`, and `&mut self` makes the access exclusive.
        unsafe {
            let p = sys::shim_pktmbuf_data(self.ptr.as_ptr(), &mut len);
            std::slice::from_raw_parts_mut(p.cast::<u8>(), usize::from(len))
        }
    }

    /// Grow the data by `len` bytes at the tail (`rte_pktmbuf_append`) and lend them;
    /// `None` (nothing changed) when the tailroom is smaller. The bytes are not
    /// initialised by DPDK: they hold whatever the buffer held (never uninitialised
    /// memory in Rust's sense: pools are zeroed at creation and only ever written).
    pub fn append(&mut self, len: u16) -> Option<&mut [u8]> {
        // SAFETY: we own a valid mbuf; append returns NULL or a pointer to `len` bytes
        // inside its buffer, exclusive to us through `&mut self`.
        unsafe {
            let p = sys::shim_pktmbuf_append(self.ptr.as_ptr(), len);
            if p.is_null() {
                None
            } else {
                Some(std::slice::from_raw_parts_mut(
                    p.cast::<u8>(),
                    usize::from(len),
                ))
            }
        }
    }

    /// Drop `len` bytes at the tail (`rte_pktmbuf_trim`); `false` (nothing changed)
    /// when the last segment holds fewer.
    pub fn trim(&mut self, len: u16) -> bool {
        // SAFETY: we own a valid mbuf.
        unsafe { sys::shim_pktmbuf_trim(self.ptr.as_ptr(), len) == 0 }
    }
}

impl Drop for Mbuf<'_> {
    fn drop(&mut self) {
        // SAFETY: we own the mbuf (from_raw's contract) and free it exactly once: into_raw
        // forgets self, so Drop never runs for a handed-off mbuf.
        unsafe { sys::shim_pktmbuf_free(self.ptr.as_ptr()) }
    }
}
