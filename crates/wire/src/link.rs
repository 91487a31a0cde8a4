//! The link traits every data plane implements, and an in-memory loopback link.
//!
//! Token-based like `smoltcp::phy::Device`, so no frame is copied between the driver and
//! the protocol stack: [`Link::receive`] returns an [`RxToken`] that lends the driver's
//! own buffer (a DPDK mbuf, a `recvmmsg` slot, a NIC descriptor's memory) for the
//! duration of a closure, and [`Link::transmit`] returns a [`TxToken`] that lends a
//! transmit buffer the stack writes straight into. Poll-mode queues get burst variants
//! ([`Link::receive_burst`], [`Link::transmit_burst`]) whose default implementations
//! loop over the single-token methods; a DPDK driver overrides them with
//! `rte_eth_rx_burst`/`rte_eth_tx_burst`.
//!
//! Two media exist (see [`Medium`]): raw links carry whole Ethernet frames, kernel UDP
//! sockets carry only the UDP payload and pass the peer's address out of band in
//! [`RxMeta`] / [`TxMeta`].

pub use crate::frame::{Checksum, ChecksumCapabilities, UdpAddr};

/// What the buffers a link lends contain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Medium {
    /// Whole Ethernet II frames without FCS (TAP, AF_PACKET, DPDK, virtio, DPU queues).
    /// The stack does ARP and Ethernet/IPv4/UDP framing itself ([`crate::frame`]).
    Ethernet,
    /// UDP payloads only (kernel UDP sockets); addresses travel in [`RxMeta::src`] and
    /// [`TxMeta::dst`], checksums are the kernel's business.
    Udp,
}

/// What a link can do; read once by the stack when the link is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Capabilities {
    /// Buffer contents.
    pub medium: Medium,
    /// Largest buffer the link carries: the Ethernet frame length without FCS
    /// (e.g. 1514) for [`Medium::Ethernet`], the UDP payload length (e.g. 1472) for
    /// [`Medium::Udp`].
    pub mtu: usize,
    /// Largest burst the queue handles at once (1 for links without bursts).
    pub max_burst: usize,
    /// The NIC verifies IPv4 and UDP checksums of received frames and drops bad ones,
    /// so the stack need not. Ignored for [`Medium::Udp`].
    pub rx_checksum_offload: bool,
    /// The NIC fills IPv4 and UDP checksums of transmitted frames, so the stack leaves
    /// them zero. Ignored for [`Medium::Udp`].
    pub tx_checksum_offload: bool,
    /// The medium cannot alter a frame between the two ends: shared memory such as
    /// DPDK's memif, not a wire or a NIC. Received checksums need no
    /// verifying, and the protocol's CRC32C (spec 3.3, for packets nothing else
    /// protects) would only cost CPU; the stack and adapters leave both out. Frames it
    /// sends still carry their IPv4 and UDP checksums, for whatever forwards them.
    pub intact: bool,
}

impl Capabilities {
    /// Capabilities with no checksum offload and no bursts.
    pub fn new(medium: Medium, mtu: usize) -> Self {
        Capabilities {
            medium,
            mtu,
            max_burst: 1,
            rx_checksum_offload: false,
            tx_checksum_offload: false,
            intact: false,
        }
    }

    /// The `smoltcp` checksum capabilities to pass to [`crate::frame`] functions.
    pub fn checksum_caps(&self) -> ChecksumCapabilities {
        let c = match (self.rx_checksum_offload, self.tx_checksum_offload) {
            (false, false) => Checksum::Both,
            (false, true) => Checksum::Rx,
            (true, false) => Checksum::Tx,
            (true, true) => Checksum::None,
        };
        let mut caps = ChecksumCapabilities::ignored();
        caps.ipv4 = c;
        caps.udp = c;
        caps
    }

    /// Largest packet of our protocol this link carries (`max_pkt` for the handshake):
    /// the MTU minus Ethernet/IPv4/UDP headers on raw links, the MTU itself on UDP.
    pub fn max_packet(&self) -> usize {
        match self.medium {
            Medium::Ethernet => self
                .mtu
                .saturating_sub(crate::frame::ETH_IPV4_UDP_HEADER_LEN)
                .min(usize::from(u16::MAX)),
            Medium::Udp => self.mtu.min(usize::from(u16::MAX)),
        }
    }
}

/// Out-of-band information about a received buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct RxMeta {
    /// The sender's address, for [`Medium::Udp`] (`None` on raw links: it is in the frame).
    pub src: Option<UdpAddr>,
    /// The local address the datagram arrived on, if the link knows (a socket bound to
    /// several addresses).
    pub dst: Option<UdpAddr>,
}

impl RxMeta {
    /// Metadata with a source address only.
    pub const fn from_src(src: UdpAddr) -> Self {
        RxMeta {
            src: Some(src),
            dst: None,
        }
    }
}

/// What the stack tells the link about a buffer it filled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct TxMeta {
    /// Bytes written at the start of the lent buffer; 0 means send nothing.
    pub len: usize,
    /// Destination for [`Medium::Udp`]; `None` on raw links (it is in the frame) or for a
    /// connected socket.
    pub dst: Option<UdpAddr>,
}

impl TxMeta {
    /// Send `len` bytes, no out-of-band destination.
    pub const fn len(len: usize) -> Self {
        TxMeta { len, dst: None }
    }
    /// Send `len` bytes to `dst` (UDP medium).
    pub const fn to(len: usize, dst: UdpAddr) -> Self {
        TxMeta {
            len,
            dst: Some(dst),
        }
    }
    /// Send nothing (the token is released unused).
    pub const fn none() -> Self {
        TxMeta { len: 0, dst: None }
    }
}

/// A received buffer, lent by the driver until [`consume`](RxToken::consume) returns.
pub trait RxToken: Sized {
    /// Out-of-band information (source address on UDP links).
    fn meta(&self) -> RxMeta {
        RxMeta::default()
    }

    /// Run `f` on the received bytes; the buffer goes back to the driver afterwards.
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R;
}

/// A transmit slot, lent by the driver until a consume method returns.
pub trait TxToken: Sized {
    /// Lend a buffer of up to `max_len` bytes (the driver may lend fewer, never more
    /// than the link's MTU); `f` writes a packet at its start and returns how many bytes
    /// to send and where. A returned length of 0, or one larger than the lent buffer,
    /// sends nothing. This is the primitive the sans-IO core needs: it learns the
    /// packet's length only while writing it.
    fn consume_with<R, F: FnOnce(&mut [u8]) -> (TxMeta, R)>(self, max_len: usize, f: F) -> R;

    /// smoltcp-style: lend exactly `len` bytes (fewer if `len` exceeds the MTU) and send
    /// them with no out-of-band destination.
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        self.consume_with(len, |buf| {
            let n = buf.len();
            let r = f(buf);
            (TxMeta::len(len.min(n)), r)
        })
    }
}

/// A data plane: a NIC queue, a socket, a TAP device, a loopback.
pub trait Link {
    /// Token lending a received buffer.
    type RxToken<'a>: RxToken
    where
        Self: 'a;
    /// Token lending a transmit buffer.
    type TxToken<'a>: TxToken
    where
        Self: 'a;

    /// The link's capabilities.
    fn capabilities(&self) -> Capabilities;

    /// The next received buffer, if any (never blocks).
    fn receive(&mut self) -> Option<Self::RxToken<'_>>;

    /// A transmit slot, or `None` when the queue is full (back-pressure).
    fn transmit(&mut self) -> Option<Self::TxToken<'_>>;

    /// Hand up to `max` received buffers to `f`; returns how many. Poll-mode drivers
    /// override this with their native burst receive.
    fn receive_burst<F: FnMut(RxMeta, &[u8])>(&mut self, max: usize, mut f: F) -> usize {
        let mut n = 0;
        while n < max {
            let Some(tok) = self.receive() else { break };
            let meta = tok.meta();
            tok.consume(|buf| f(meta, buf));
            n += 1;
        }
        n
    }

    /// Fill up to `max` transmit slots: `f` writes one packet into an MTU-sized buffer
    /// and returns its [`TxMeta`], or `None` when it has nothing more to send (that slot
    /// is released unused and the burst ends). Returns the number of packets queued.
    fn transmit_burst<F: FnMut(&mut [u8]) -> Option<TxMeta>>(
        &mut self,
        max: usize,
        mut f: F,
    ) -> usize {
        let mtu = self.capabilities().mtu;
        let mut n = 0;
        while n < max {
            let Some(tok) = self.transmit() else { break };
            let sent = tok.consume_with(mtu, |buf| match f(buf) {
                Some(m) => (m, m.len != 0),
                None => (TxMeta::none(), false),
            });
            if !sent {
                break;
            }
            n += 1;
        }
        n
    }
}

/// A fixed-capacity FIFO of up to `N` buffers of `MTU` bytes, no allocation.
#[derive(Debug, Clone)]
pub struct Queue<const N: usize, const MTU: usize> {
    bufs: [[u8; MTU]; N],
    lens: [usize; N],
    addrs: [Option<UdpAddr>; N],
    head: usize,
    count: usize,
}

impl<const N: usize, const MTU: usize> Default for Queue<N, MTU> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize, const MTU: usize> Queue<N, MTU> {
    /// An empty queue.
    pub const fn new() -> Self {
        Queue {
            bufs: [[0; MTU]; N],
            lens: [0; N],
            addrs: [None; N],
            head: 0,
            count: 0,
        }
    }
    /// Buffers queued.
    pub const fn len(&self) -> usize {
        self.count
    }
    /// No buffer queued.
    pub const fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// No free slot.
    pub const fn is_full(&self) -> bool {
        self.count >= N
    }

    /// Let `f` fill the next free slot (up to `max_len` bytes, capped at `MTU`); commit it
    /// if `f` reports a length in `1..=lent`. Returns `f`'s result, or `None` if full.
    pub fn push_with<R>(
        &mut self,
        max_len: usize,
        f: impl FnOnce(&mut [u8]) -> (TxMeta, R),
    ) -> Option<R> {
        if self.is_full() {
            None
        } else {
            Some(self.push_any(max_len, f))
        }
    }

    /// Like `push_with`, but on a full queue `f` gets an empty buffer and its output is
    /// discarded, so `f` always runs (what a token needs: no unreachable branch).
    fn push_any<R>(&mut self, max_len: usize, f: impl FnOnce(&mut [u8]) -> (TxMeta, R)) -> R {
        let idx = if N == 0 {
            0
        } else {
            (self.head + self.count) % N
        };
        let lent = max_len.min(MTU);
        let slot = match self.bufs.get_mut(idx) {
            Some(b) if self.count < N => b.get_mut(..lent).unwrap_or(&mut []),
            _ => &mut [],
        };
        let lent = slot.len();
        let (meta, r) = f(slot);
        if meta.len != 0
            && meta.len <= lent
            && let (Some(l), Some(a)) = (self.lens.get_mut(idx), self.addrs.get_mut(idx))
        {
            *l = meta.len;
            *a = meta.dst;
            self.count += 1;
        }
        r
    }

    /// Copy `data` in as one buffer with address `addr`; `false` if full or too long.
    pub fn push(&mut self, data: &[u8], addr: Option<UdpAddr>) -> bool {
        let n = data.len();
        if n == 0 || n > MTU {
            return false;
        }
        self.push_with(n, |b| {
            b.copy_from_slice(data);
            (TxMeta { len: n, dst: addr }, ())
        })
        .is_some()
    }

    /// Address stored with the oldest buffer.
    pub fn peek_addr(&self) -> Option<UdpAddr> {
        if self.is_empty() {
            return None;
        }
        self.addrs.get(self.head).copied().flatten()
    }

    /// Remove the oldest buffer, running `f` on its address and bytes.
    pub fn pop<R>(&mut self, f: impl FnOnce(Option<UdpAddr>, &[u8]) -> R) -> Option<R> {
        if self.is_empty() {
            None
        } else {
            Some(self.pop_any(f))
        }
    }

    /// Like `pop`, but on an empty queue `f` runs on `(None, &[])`.
    fn pop_any<R>(&mut self, f: impl FnOnce(Option<UdpAddr>, &[u8]) -> R) -> R {
        if self.count == 0 || N == 0 {
            return f(None, &[]);
        }
        let idx = self.head;
        let len = self.lens.get(idx).copied().unwrap_or(0);
        let addr = self.addrs.get(idx).copied().flatten();
        let data = self.bufs.get(idx).and_then(|b| b.get(..len)).unwrap_or(&[]);
        let r = f(addr, data);
        self.head = (self.head + 1) % N;
        self.count -= 1;
        r
    }
}

/// An in-memory link with `N` receive and `N` transmit buffers of `MTU` bytes (in the
/// style of `embassy-net-driver-channel`), for the core's tests and the simulator.
///
/// In *looped* mode ([`Loopback::new_looped`]) every transmitted buffer is received back
/// by the same link. Otherwise transmitted buffers wait in the transmit queue until the
/// test moves them with [`Loopback::transfer_to`] (optionally dropping, duplicating or
/// corrupting them via [`Loopback::pop_tx`] / [`Loopback::inject`]). On the UDP medium,
/// received buffers carry the sending link's `local` address as [`RxMeta::src`].
///
/// It is large (`2 * N * MTU` bytes): put it in a `static` or a `Box` rather than on a
/// small stack.
#[derive(Debug, Clone)]
pub struct Loopback<const N: usize, const MTU: usize> {
    rx: Queue<N, MTU>,
    tx: Queue<N, MTU>,
    caps: Capabilities,
    looped: bool,
    local: Option<UdpAddr>,
}

impl<const N: usize, const MTU: usize> Loopback<N, MTU> {
    /// A link whose transmit queue is drained by the test. `local` is this link's own
    /// address (reported as the source of what it sends on the UDP medium).
    pub fn new(medium: Medium, local: Option<UdpAddr>) -> Self {
        let mut caps = Capabilities::new(medium, MTU);
        caps.max_burst = N.max(1);
        Loopback {
            rx: Queue::new(),
            tx: Queue::new(),
            caps,
            looped: false,
            local,
        }
    }

    /// A link that receives everything it transmits.
    pub fn new_looped(medium: Medium, local: Option<UdpAddr>) -> Self {
        let mut l = Self::new(medium, local);
        l.looped = true;
        l
    }

    /// Override the capabilities (e.g. to pretend checksum offload).
    pub fn set_capabilities(&mut self, caps: Capabilities) {
        self.caps = caps;
    }

    /// Buffers waiting to be received.
    pub fn rx_len(&self) -> usize {
        self.rx.len()
    }

    /// Buffers waiting in the transmit queue.
    pub fn tx_len(&self) -> usize {
        self.tx.len()
    }

    /// Queue `data` for reception with metadata `src`; `false` if full or too long.
    pub fn inject(&mut self, data: &[u8], src: Option<UdpAddr>) -> bool {
        self.rx.push(data, src)
    }

    /// Take the oldest transmitted buffer: `f` gets its destination (UDP medium) and bytes.
    pub fn pop_tx<R>(&mut self, f: impl FnOnce(Option<UdpAddr>, &[u8]) -> R) -> Option<R> {
        self.tx.pop(f)
    }

    /// Move transmitted buffers to `other`'s receive queue until either side runs out;
    /// returns how many moved.
    pub fn transfer_to<const M: usize>(&mut self, other: &mut Loopback<M, MTU>) -> usize {
        let mut n = 0;
        while !self.tx.is_empty() && !other.rx.is_full() {
            let src = self.local;
            self.tx.pop(|_, data| other.rx.push(data, src));
            n += 1;
        }
        n
    }
}

/// Receive token of a [`Loopback`].
#[derive(Debug)]
pub struct LoopbackRxToken<'a, const N: usize, const MTU: usize> {
    queue: &'a mut Queue<N, MTU>,
}

impl<const N: usize, const MTU: usize> RxToken for LoopbackRxToken<'_, N, MTU> {
    fn meta(&self) -> RxMeta {
        RxMeta {
            src: self.queue.peek_addr(),
            dst: None,
        }
    }
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        self.queue.pop_any(|_, data| f(data))
    }
}

/// Transmit token of a [`Loopback`].
#[derive(Debug)]
pub struct LoopbackTxToken<'a, const N: usize, const MTU: usize> {
    queue: &'a mut Queue<N, MTU>,
    src: Option<UdpAddr>,
    looped: bool,
}

impl<const N: usize, const MTU: usize> TxToken for LoopbackTxToken<'_, N, MTU> {
    fn consume_with<R, F: FnOnce(&mut [u8]) -> (TxMeta, R)>(self, max_len: usize, f: F) -> R {
        let (looped, src) = (self.looped, self.src);
        self.queue.push_any(max_len, |buf| {
            let (mut meta, r) = f(buf);
            if looped {
                // What comes back carries our own address as its source.
                meta.dst = src;
            }
            (meta, r)
        })
    }
}

impl<const N: usize, const MTU: usize> Link for Loopback<N, MTU> {
    type RxToken<'a>
        = LoopbackRxToken<'a, N, MTU>
    where
        Self: 'a;
    type TxToken<'a>
        = LoopbackTxToken<'a, N, MTU>
    where
        Self: 'a;

    fn capabilities(&self) -> Capabilities {
        self.caps
    }

    fn receive(&mut self) -> Option<Self::RxToken<'_>> {
        if self.rx.is_empty() {
            None
        } else {
            Some(LoopbackRxToken {
                queue: &mut self.rx,
            })
        }
    }

    fn transmit(&mut self) -> Option<Self::TxToken<'_>> {
        let queue = if self.looped {
            &mut self.rx
        } else {
            &mut self.tx
        };
        if queue.is_full() {
            None
        } else {
            Some(LoopbackTxToken {
                queue,
                src: self.local,
                looped: self.looped,
            })
        }
    }
}
