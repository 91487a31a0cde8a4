//! TAP devices (`/dev/net/tun`, `IFF_TAP | IFF_NO_PI`) as a [`Medium::Ethernet`] link.
//!
//! The stack sits at the far end of a virtual Ethernet cable whose near end is the
//! kernel's interface: what the stack transmits, the kernel receives on that interface,
//! and what the kernel sends out of it, the stack receives. So the stack is a separate
//! host on that segment: it needs its own MAC and IPv4 address, different from the
//! interface's ([`TapLink::kernel_mac`]).
//!
//! This crate creates the device and can bring it up and set its MTU (`ioctl`s on a
//! control socket); addresses, routes and bridges are the job of whoever runs the stack
//! (iproute2 in the test harness). The device is not persistent: it disappears when the
//! link is dropped.
//!
//! The device has no batch call, so each [`Link::receive`] is one `read` of one frame
//! and each transmit token is one `write`, done when the token is consumed: nothing is
//! ever queued, [`KernelLink::flush`] has nothing to do.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

use wire::frame::ETH_HEADER_LEN;
use wire::link::{Capabilities, Link, Medium, RxToken, TxMeta, TxToken};

use crate::{KernelLink, Stats, sys};

/// The clone device of the TUN/TAP driver.
pub const TUN_DEVICE: &str = "/dev/net/tun";

/// Largest frame a TAP device can hand over: its maximum MTU (65535) plus the Ethernet
/// header and a VLAN tag. Both buffers have this size, so the MTU can change later
/// without reallocating.
const MAX_FRAME: usize = 65535 + ETH_HEADER_LEN + 4;

/// A TAP interface driven through `/dev/net/tun`.
#[derive(Debug)]
pub struct TapLink {
    file: File,
    name: String,
    caps: Capabilities,
    rx: Box<[u8]>,
    tx: Box<[u8]>,
    stats: Stats,
}

impl TapLink {
    /// Create (or attach to) TAP interface `name`, or a new one the kernel names
    /// (`tap0`, `tap1`, ...) when `name` is `None`. Needs `CAP_NET_ADMIN`. The interface
    /// starts down; see [`set_up`](Self::set_up).
    pub fn open(name: Option<&str>) -> io::Result<Self> {
        sys::check_ifname(name.unwrap_or(""))?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(TUN_DEVICE)?;
        let name = sys::tun_set_iff(
            file.as_raw_fd(),
            name.unwrap_or(""),
            libc::IFF_TAP | libc::IFF_NO_PI,
        )?;
        let mtu = sys::if_mtu(&name)?;
        let mut caps = Capabilities::new(Medium::Ethernet, mtu + ETH_HEADER_LEN);
        caps.max_burst = 1;
        Ok(TapLink {
            file,
            name,
            caps,
            rx: vec![0; MAX_FRAME].into_boxed_slice(),
            tx: vec![0; MAX_FRAME].into_boxed_slice(),
            stats: Stats::default(),
        })
    }

    /// The interface's name (the kernel's choice when none was given), for iproute2.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Bring the interface up or down (`SIOCSIFFLAGS`), so that the kernel sends and
    /// accepts frames on it.
    pub fn set_up(&self, up: bool) -> io::Result<()> {
        sys::set_if_up(&self.name, up)
    }

    /// Set the interface's MTU (`SIOCSIFMTU`); [`Capabilities::mtu`] follows (plus the
    /// Ethernet header). Read the capabilities again afterwards.
    pub fn set_mtu(&mut self, mtu: u32) -> io::Result<()> {
        sys::set_if_mtu(&self.name, mtu)?;
        self.refresh_mtu().map(|_| ())
    }

    /// Re-read the interface's MTU (after someone else changed it) into the
    /// capabilities; returns it.
    pub fn refresh_mtu(&mut self) -> io::Result<usize> {
        let mtu = sys::if_mtu(&self.name)?;
        self.caps.mtu = (mtu + ETH_HEADER_LEN).min(MAX_FRAME);
        Ok(mtu)
    }

    /// The interface's IP MTU (the capabilities' frame MTU minus the Ethernet header).
    pub fn interface_mtu(&self) -> usize {
        self.caps.mtu - ETH_HEADER_LEN
    }

    /// The MAC of the kernel's side of the device (`SIOCGIFHWADDR`): the address the
    /// kernel's frames come from, and the one the stack must *not* use as its own.
    pub fn kernel_mac(&self) -> io::Result<[u8; 6]> {
        sys::if_hwaddr(&self.name)
    }

    /// The link's counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }
}

impl AsRawFd for TapLink {
    fn as_raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

impl AsFd for TapLink {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.file.as_fd()
    }
}

/// A frame read from a [`TapLink`], lent from its receive buffer.
#[derive(Debug)]
pub struct TapRxToken<'a> {
    frame: &'a [u8],
}

impl RxToken for TapRxToken<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(self.frame)
    }
}

/// The transmit buffer of a [`TapLink`]; the frame is written to the device when the
/// token is consumed.
#[derive(Debug)]
pub struct TapTxToken<'a> {
    link: &'a mut TapLink,
}

impl TxToken for TapTxToken<'_> {
    fn consume_with<R, F: FnOnce(&mut [u8]) -> (TxMeta, R)>(self, max_len: usize, f: F) -> R {
        let link = self.link;
        let lent = max_len.min(link.caps.mtu).min(link.tx.len());
        let (meta, r) = f(link.tx.get_mut(..lent).unwrap_or(&mut []));
        if meta.len == 0 {
            return r;
        }
        let Some(frame) = link.tx.get(..meta.len).filter(|_| meta.len <= lent) else {
            link.stats.tx_refused += 1;
            return r;
        };
        match (&link.file).write(frame) {
            Ok(_) => {
                link.stats.tx_packets += 1;
                link.stats.tx_batches += 1;
                link.stats.tx_bytes += frame.len() as u64;
            }
            Err(e) => {
                // Nothing can be queued on a TAP link: the frame is lost, counted, and
                // the protocol above retransmits.
                if e.kind() == io::ErrorKind::WouldBlock {
                    link.stats.tx_busy += 1;
                } else {
                    link.stats.tx_errors += 1;
                }
                link.stats.tx_dropped += 1;
                link.stats.last_errno = e.raw_os_error().unwrap_or(0);
            }
        }
        r
    }
}

impl Link for TapLink {
    type RxToken<'a>
        = TapRxToken<'a>
    where
        Self: 'a;
    type TxToken<'a>
        = TapTxToken<'a>
    where
        Self: 'a;

    fn capabilities(&self) -> Capabilities {
        self.caps
    }

    fn receive(&mut self) -> Option<TapRxToken<'_>> {
        loop {
            match (&self.file).read(&mut self.rx) {
                Ok(0) => return None,
                Ok(n) => {
                    self.stats.rx_packets += 1;
                    self.stats.rx_batches += 1;
                    self.stats.rx_bytes += n as u64;
                    let frame = self.rx.get(..n).unwrap_or(&[]);
                    return Some(TapRxToken { frame });
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    if e.kind() != io::ErrorKind::WouldBlock {
                        self.stats.rx_errors += 1;
                        self.stats.last_errno = e.raw_os_error().unwrap_or(0);
                    }
                    return None;
                }
            }
        }
    }

    fn transmit(&mut self) -> Option<TapTxToken<'_>> {
        Some(TapTxToken { link: self })
    }
}

impl KernelLink for TapLink {
    fn flush(&mut self) -> usize {
        0
    }
    fn pending_tx(&self) -> usize {
        0
    }
    fn stats(&self) -> Stats {
        self.stats
    }
}
