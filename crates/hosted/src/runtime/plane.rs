//! Data planes: what a domain moves its frames over.

use std::io::Write;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};

use dp_kernel::{AfPacketLink, KernelLink, TapLink, UdpLink};
use ofi_nostd::domain::{PassKind, ProgressReport};
use ofi_nostd::mem::Memory;
use ofi_nostd::net::ALL_QUEUES;
use ofi_nostd::time::Instant;
use wire::link::{Capabilities, Link, RxMeta, TxMeta};

use super::CoreDomain;
use crate::drops::LinkDrops;
use crate::fault::FaultLink;
use crate::mem::RawMemory;
use crate::pcap::PcapLink;

/// A link a domain can run on: any [`Link`] that can move to the progress thread, plus
/// what blocking progress needs from it.
///
/// Implemented by the kernel data planes of `dp-kernel` ([`UdpLink`], [`TapLink`],
/// [`AfPacketLink`]); wrap any other link (the simulator's, a test double) in
/// [`WithFd`].
pub trait DataPlane: Link + Send + 'static {
    /// A descriptor that becomes readable when the link may have frames to receive, so
    /// idle progress can sleep in epoll instead of spinning; `None` if the link has
    /// none (progress then polls on a short timer).
    fn wait_fd(&self) -> Option<BorrowedFd<'_>>;

    /// Pushes queued transmissions to the device now; returns how many are still
    /// queued (the device pushed back). Batched links queue what the core transmits
    /// until a flush; the adapter flushes after every progress pass.
    fn flush(&mut self) -> usize {
        0
    }

    /// Transmissions queued and not yet accepted by the device.
    fn pending_tx(&self) -> usize {
        0
    }

    /// What the link dropped on receive before the stack saw it (none, unless the
    /// link counts such drops).
    fn drops(&self) -> LinkDrops {
        LinkDrops::default()
    }

    /// Frames received and sent so far (zeros, unless the link counts them).
    fn counts(&self) -> QueueCounts {
        QueueCounts::default()
    }
}

/// What one receive queue of a plane moved ([`Driver::queue_counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounts {
    /// Frames or datagrams received from the device.
    pub rx_packets: u64,
    /// Frames or datagrams the device accepted for transmission.
    pub tx_packets: u64,
}

impl QueueCounts {
    /// `counts` queue by queue as `ofi-pingpong -v` and the provider's close log end
    /// their line (`; queue k: R frames received, S sent`); nothing for one queue.
    pub fn describe(counts: &[QueueCounts]) -> String {
        if counts.len() <= 1 {
            return String::new();
        }
        counts
            .iter()
            .enumerate()
            .map(|(q, c)| {
                format!(
                    "; queue {q}: {} frames received, {} sent",
                    c.rx_packets, c.tx_packets
                )
            })
            .collect()
    }
}

/// A descriptor that is always readable: what poll-mode planes give waiters, so that
/// they poll instead of sleeping.
fn always_readable() -> rustix::io::Result<OwnedFd> {
    use rustix::event::{EventfdFlags, eventfd};
    eventfd(1, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)
}

macro_rules! kernel_plane {
    ($($t:ty),*) => {$(
        impl DataPlane for $t {
            fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
                Some(self.as_fd())
            }

            fn flush(&mut self) -> usize {
                KernelLink::flush(self)
            }

            fn pending_tx(&self) -> usize {
                KernelLink::pending_tx(self)
            }

            fn drops(&self) -> LinkDrops {
                LinkDrops::from_kernel(&KernelLink::stats(self))
            }

            fn counts(&self) -> QueueCounts {
                let s = KernelLink::stats(self);
                QueueCounts {
                    rx_packets: s.rx_packets,
                    tx_packets: s.tx_packets,
                }
            }
        }
    )*};
}

kernel_plane!(UdpLink, TapLink, AfPacketLink);

/// Any link, with the descriptor (if any) that signals its receive side: how tests and
/// the simulator plug their links into a domain.
#[derive(Debug)]
pub struct WithFd<L> {
    link: L,
    fd: Option<OwnedFd>,
}

impl<L> WithFd<L> {
    /// `link`, woken through `fd` (`None`: progress polls on a short timer).
    pub fn new(link: L, fd: Option<OwnedFd>) -> Self {
        WithFd { link, fd }
    }

    /// The link.
    pub fn get_ref(&self) -> &L {
        &self.link
    }

    /// The link, mutably.
    pub fn get_mut(&mut self) -> &mut L {
        &mut self.link
    }
}

impl<L: Link> Link for WithFd<L> {
    type RxToken<'a>
        = L::RxToken<'a>
    where
        Self: 'a;
    type TxToken<'a>
        = L::TxToken<'a>
    where
        Self: 'a;

    fn capabilities(&self) -> Capabilities {
        self.link.capabilities()
    }

    fn receive(&mut self) -> Option<Self::RxToken<'_>> {
        self.link.receive()
    }

    fn transmit(&mut self) -> Option<Self::TxToken<'_>> {
        self.link.transmit()
    }

    fn receive_burst<F: FnMut(RxMeta, &[u8])>(&mut self, max: usize, f: F) -> usize {
        self.link.receive_burst(max, f)
    }

    fn transmit_burst<F: FnMut(&mut [u8]) -> Option<TxMeta>>(&mut self, max: usize, f: F) -> usize {
        self.link.transmit_burst(max, f)
    }
}

impl<L: Link + Send + 'static> DataPlane for WithFd<L> {
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        self.fd.as_ref().map(|f| f.as_fd())
    }
}

/// A data plane behind a fault injector is a data plane: the inner link's descriptor,
/// flush and queue (its clock is not driven: loss and corruption apply, timed faults
/// wait for [`FaultLink::set_now`]).
impl<L: DataPlane> DataPlane for FaultLink<L> {
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner().wait_fd()
    }

    fn flush(&mut self) -> usize {
        self.inner_mut().flush()
    }

    fn pending_tx(&self) -> usize {
        self.inner().pending_tx()
    }

    fn drops(&self) -> LinkDrops {
        self.inner().drops()
    }

    fn counts(&self) -> QueueCounts {
        self.inner().counts()
    }
}

/// A data plane that records its frames is a data plane: the inner link's descriptor,
/// flush and queue.
impl<L: DataPlane, W: Write + Send + 'static> DataPlane for PcapLink<L, W> {
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        self.inner().wait_fd()
    }

    fn flush(&mut self) -> usize {
        self.inner_mut().flush()
    }

    fn pending_tx(&self) -> usize {
        self.inner().pending_tx()
    }

    fn drops(&self) -> LinkDrops {
        self.inner().drops()
    }

    fn counts(&self) -> QueueCounts {
        self.inner().counts()
    }
}

/// The object-safe face of a data plane the runtime keeps (links have generic
/// methods, so the runtime stores them behind this), for passes that copy through
/// memory `M`: `dyn Memory` (the safe API's table of buffers) or [`RawMemory`] (the C
/// provider's raw pointers).
pub trait Driver<M: ?Sized>: Send {
    /// A progress pass of `core` over this link, of the parts `kind` names
    /// ([`Domain::progress_pass`](ofi_nostd::domain::Domain::progress_pass)), then a
    /// flush of what it queued.
    fn progress(
        &mut self,
        core: &mut CoreDomain,
        now: Instant,
        mem: &mut M,
        kind: PassKind,
    ) -> ofi_nostd::Result<ProgressReport>;
    /// Transmissions queued and not yet accepted by the device.
    fn pending_tx(&self) -> usize;
    /// The descriptor that becomes readable when frames arrive, if any.
    fn wait_fd(&self) -> Option<BorrowedFd<'_>>;
    /// What the link dropped on receive before the stack saw it.
    fn drops(&self) -> LinkDrops;
    /// What each receive queue moved, queue by queue (zeros where the link counts
    /// nothing).
    fn queue_counts(&self) -> Vec<QueueCounts>;
    /// Receive queues: one per context of a scalable endpoint where the plane steers
    /// by context ([`Queues`]), else 1.
    fn queues(&self) -> usize {
        1
    }
    /// A pass of `core` for the endpoints of receive queue `queue` over that queue's
    /// link ([`Domain::progress_queue`](ofi_nostd::domain::Domain::progress_queue)),
    /// then a flush. A plane of one queue runs the whole pass.
    fn progress_queue(
        &mut self,
        core: &mut CoreDomain,
        queue: u8,
        now: Instant,
        mem: &mut M,
        kind: PassKind,
    ) -> ofi_nostd::Result<ProgressReport> {
        let _ = queue;
        self.progress(core, now, mem, kind)
    }
}

/// Memory a pass can copy through: the core's passes are generic over a sized
/// [`Memory`], so a `dyn Memory` goes in a sized wrapper and [`RawMemory`] as it is
/// (no virtual call per copy on the provider's data path).
pub trait PassMemory {
    /// [`Domain::progress_queue`](ofi_nostd::domain::Domain::progress_queue) of
    /// `queue` over `link` with this memory ([`ALL_QUEUES`]: every endpoint).
    fn pass<L: Link>(
        &mut self,
        core: &mut CoreDomain,
        queue: u8,
        now: Instant,
        link: &mut L,
        kind: PassKind,
    ) -> ofi_nostd::Result<ProgressReport>;
}

impl PassMemory for dyn Memory + '_ {
    #[inline]
    fn pass<L: Link>(
        &mut self,
        core: &mut CoreDomain,
        queue: u8,
        now: Instant,
        link: &mut L,
        kind: PassKind,
    ) -> ofi_nostd::Result<ProgressReport> {
        core.progress_queue(queue, now, link, &mut DynMem(self), kind)
    }
}

impl PassMemory for RawMemory {
    #[inline]
    fn pass<L: Link>(
        &mut self,
        core: &mut CoreDomain,
        queue: u8,
        now: Instant,
        link: &mut L,
        kind: PassKind,
    ) -> ofi_nostd::Result<ProgressReport> {
        core.progress_queue(queue, now, link, self, kind)
    }
}

/// A `&mut dyn Memory` as a sized [`Memory`] for the core's generic calls.
pub(crate) struct DynMem<'a>(pub &'a mut dyn Memory);

impl Memory for DynMem<'_> {
    fn read(&self, addr: u64, out: &mut [u8]) -> ofi_nostd::Result<()> {
        self.0.read(addr, out)
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> ofi_nostd::Result<()> {
        self.0.write(addr, data)
    }

    fn read_op(&self, ctx: u64, addr: u64, out: &mut [u8]) -> ofi_nostd::Result<()> {
        self.0.read_op(ctx, addr, out)
    }

    fn write_op(&mut self, ctx: u64, addr: u64, data: &[u8]) -> ofi_nostd::Result<()> {
        self.0.write_op(ctx, addr, data)
    }
}

impl<L: DataPlane, M: PassMemory + ?Sized> Driver<M> for L {
    fn progress(
        &mut self,
        core: &mut CoreDomain,
        now: Instant,
        mem: &mut M,
        kind: PassKind,
    ) -> ofi_nostd::Result<ProgressReport> {
        let r = mem.pass(core, ALL_QUEUES, now, self, kind);
        DataPlane::flush(self);
        r
    }

    fn pending_tx(&self) -> usize {
        DataPlane::pending_tx(self)
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        DataPlane::wait_fd(self)
    }

    fn drops(&self) -> LinkDrops {
        DataPlane::drops(self)
    }

    fn queue_counts(&self) -> Vec<QueueCounts> {
        vec![DataPlane::counts(self)]
    }
}

/// A data plane of several receive queues, one link each (`dp_kernel::UdpLink::queues`,
/// `AfPacketLink::queues`): the plane steers each datagram to the queue of its
/// destination's context index, and queue k's passes progress the contexts the domain
/// put on queue k ([`DomainConfig::queues`](ofi_nostd::domain::DomainConfig::queues)).
/// Waiters watch one epoll descriptor that is readable while any queue's is (or, on
/// poll-mode queues, one that is always readable, as [`PollMode`]).
pub struct Queues<L> {
    links: Vec<L>,
    /// Readable while any queue's descriptor is (an epoll set of them), or always
    /// (poll mode); none when no queue has a descriptor.
    ready: Option<Ready>,
}

/// [`Queues`]' wait descriptor.
enum Ready {
    Any(super::wait::WaitSet),
    Always(OwnedFd),
}

impl<L: DataPlane> Queues<L> {
    /// `links`, link k being queue k (at least one, at most
    /// [`MAX_QUEUES`](ofi_nostd::net::MAX_QUEUES)).
    pub fn new(links: Vec<L>) -> std::io::Result<Self> {
        Self::open(links, false)
    }

    /// `links` of a poll-mode plane (DPDK): waiters get an always-readable descriptor,
    /// so they poll instead of sleeping.
    pub fn polled(links: Vec<L>) -> std::io::Result<Self> {
        Self::open(links, true)
    }

    fn open(links: Vec<L>, polled: bool) -> std::io::Result<Self> {
        if links.is_empty() || links.len() > ofi_nostd::net::MAX_QUEUES {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "{} queues (1..={})",
                    links.len(),
                    ofi_nostd::net::MAX_QUEUES
                ),
            ));
        }
        let fds: Vec<BorrowedFd<'_>> = links.iter().filter_map(|l| l.wait_fd()).collect();
        let ready = if polled {
            Some(Ready::Always(always_readable()?))
        } else if fds.is_empty() {
            // No queue with a descriptor: waiters poll on a short timer.
            None
        } else {
            Some(Ready::Any(super::wait::WaitSet::new(&fds, None)?))
        };
        drop(fds);
        Ok(Queues { links, ready })
    }

    /// Queue `k`'s link.
    pub fn get(&self, k: usize) -> Option<&L> {
        self.links.get(k)
    }
}

impl<L: DataPlane, M: PassMemory + ?Sized> Driver<M> for Queues<L> {
    fn progress(
        &mut self,
        core: &mut CoreDomain,
        now: Instant,
        mem: &mut M,
        kind: PassKind,
    ) -> ofi_nostd::Result<ProgressReport> {
        let mut sum = ProgressReport::default();
        for q in 0..self.links.len() {
            sum += self.progress_queue(core, q as u8, now, mem, kind)?;
        }
        Ok(sum)
    }

    fn progress_queue(
        &mut self,
        core: &mut CoreDomain,
        queue: u8,
        now: Instant,
        mem: &mut M,
        kind: PassKind,
    ) -> ofi_nostd::Result<ProgressReport> {
        let Some(link) = self.links.get_mut(usize::from(queue)) else {
            return self.progress(core, now, mem, kind);
        };
        let r = mem.pass(core, queue, now, link, kind);
        DataPlane::flush(link);
        r
    }

    fn queues(&self) -> usize {
        self.links.len()
    }

    fn pending_tx(&self) -> usize {
        self.links.iter().map(DataPlane::pending_tx).sum()
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        self.ready.as_ref().map(|r| match r {
            Ready::Any(set) => set.fd(),
            Ready::Always(fd) => fd.as_fd(),
        })
    }

    fn drops(&self) -> LinkDrops {
        self.links
            .iter()
            .map(DataPlane::drops)
            .fold(LinkDrops::default(), |a, b| a + b)
    }

    fn queue_counts(&self) -> Vec<QueueCounts> {
        self.links.iter().map(DataPlane::counts).collect()
    }
}

/// A data plane behind a fault injector whose clock follows the passes (the C
/// provider's `loss` parameter), where [`FaultLink`] as a [`DataPlane`] leaves its
/// clock to the caller.
pub struct Clocked<L>(pub FaultLink<L>);

impl<L: DataPlane, M: PassMemory + ?Sized> Driver<M> for Clocked<L> {
    fn progress(
        &mut self,
        core: &mut CoreDomain,
        now: Instant,
        mem: &mut M,
        kind: PassKind,
    ) -> ofi_nostd::Result<ProgressReport> {
        self.0.set_now(now);
        Driver::<M>::progress(&mut self.0, core, now, mem, kind)
    }

    fn pending_tx(&self) -> usize {
        DataPlane::pending_tx(&self.0)
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        DataPlane::wait_fd(&self.0)
    }

    fn drops(&self) -> LinkDrops {
        DataPlane::drops(&self.0)
    }

    fn queue_counts(&self) -> Vec<QueueCounts> {
        vec![DataPlane::counts(&self.0)]
    }
}

/// A poll-mode data plane (DPDK) with a descriptor that is always readable, so that
/// whoever waits on it polls instead of sleeping.
pub struct PollMode<P> {
    plane: P,
    ready: OwnedFd,
}

impl<P> PollMode<P> {
    /// `plane`, with a new always-readable descriptor.
    pub fn new(plane: P) -> rustix::io::Result<Self> {
        Ok(PollMode {
            plane,
            ready: always_readable()?,
        })
    }
}

impl<P: DataPlane, M: PassMemory + ?Sized> Driver<M> for PollMode<P> {
    fn progress(
        &mut self,
        core: &mut CoreDomain,
        now: Instant,
        mem: &mut M,
        kind: PassKind,
    ) -> ofi_nostd::Result<ProgressReport> {
        Driver::<M>::progress(&mut self.plane, core, now, mem, kind)
    }

    fn pending_tx(&self) -> usize {
        DataPlane::pending_tx(&self.plane)
    }

    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.ready.as_fd())
    }

    fn drops(&self) -> LinkDrops {
        DataPlane::drops(&self.plane)
    }

    fn queue_counts(&self) -> Vec<QueueCounts> {
        vec![DataPlane::counts(&self.plane)]
    }
}
