//! The DPDK data plane of the safe API (the `dpdk` feature): EAL from a command-line
//! string, a port from a device name or hot-plugged device arguments, and
//! [`DpdkPlane`], a [`DpdkLink`] as a [`DataPlane`] a domain runs on
//! ([`DomainBuilder::link`](crate::DomainBuilder::link)).
//!
//! DPDK is poll mode: the link has no descriptor to sleep on, so a domain on it
//! busy-polls (manual progress) or its progress thread polls on a short timer when
//! idle. Whichever thread drives the link is registered with EAL the first time it
//! does (`rte_thread_register`), so it gets an lcore id and the mempool's per-lcore
//! cache; the thread that initialised EAL is its main lcore already.

use std::os::fd::BorrowedFd;

pub use dp_dpdk::{DpdkLink, Eal, Error, Port, PortConfig};
use wire::link::{Capabilities, Link, RxMeta, TxMeta};

use crate::api::DataPlane;

/// Initialises EAL (once per process) with `args` split at whitespace, or, when `None`,
/// with [`dp_dpdk::virtual_device_args`] (no hugepages, no PCI, a unique file prefix,
/// 256 MB): what virtual devices such as `net_memif` and `net_af_packet` need.
///
/// Arguments that choose no lcores (no `-l`, `-c` or `--lcores`) get `--lcores
/// 0@(<the CPUs we may use>)`: EAL would otherwise pin the calling thread, an application's own thread,
/// to CPU 0, and two such processes on one host would share that CPU in scheduler
/// slices (milliseconds per round trip) however many CPUs are idle.
pub fn init_eal(args: Option<&str>) -> Result<&'static Eal, Error> {
    match args {
        Some(a) => Eal::init(with_free_lcore(a)),
        None => Eal::init(dp_dpdk::virtual_device_args(256)),
    }
}

/// `args` split at whitespace, plus `--lcores 0@(<the CPUs we may use>)` when they
/// choose no lcores ([`dp_dpdk::free_main_lcore`]).
fn with_free_lcore(args: &str) -> Vec<String> {
    let mut v: Vec<String> = args.split_whitespace().map(str::to_owned).collect();
    let chooses = v.iter().any(|a| {
        a == "--lcores" || a.starts_with("--lcores=") || a.starts_with("-l") || a.starts_with("-c")
    });
    if !chooses {
        v.push("--lcores".into());
        v.push(dp_dpdk::free_main_lcore());
    }
    v
}

/// Opens one queue pair of a port: the virtual device `vdev` hot-plugged from its
/// device arguments (`net_memif0,role=server,socket=/tmp/m.sock`: the name, then its
/// comma-separated arguments), else the device EAL knows as `name` (a `--vdev` option
/// or a PCI address), else port 0; with `mtu`, at that MTU and with mbufs (and memif
/// buffers) that hold its frames ([`PortConfig::with_mtu`]).
pub fn open_port(
    eal: &'static Eal,
    vdev: Option<&str>,
    name: Option<&str>,
    mtu: Option<u16>,
    queues: u16,
) -> Result<Port, Error> {
    let mut cfg = match (vdev, name) {
        (Some(devargs), _) => {
            let (name, args) = devargs.split_once(',').unwrap_or((devargs, ""));
            PortConfig::vdev(name, args)
        }
        (None, Some(name)) => PortConfig::new(name),
        (None, None) => PortConfig::new(&dp_dpdk::port_name(0).ok_or_else(|| {
            Error::InvalidArgument("no DPDK port (give --vdev in the EAL arguments)".into())
        })?),
    };
    if let Some(mtu) = mtu {
        cfg = cfg.with_mtu(mtu);
    }
    cfg.queues = Some(queues.max(1));
    Port::open(eal, &cfg)
}

/// A [`DpdkLink`] as the [`DataPlane`] of a domain.
#[derive(Debug)]
pub struct DpdkPlane {
    link: DpdkLink,
    eal: &'static Eal,
    /// `rte_thread_register` failed once (no free lcore slot): the link still works,
    /// without a mempool cache on that thread; not retried.
    unregistered: bool,
    /// This plane reports the port's own counters (one plane per port does: they are
    /// the port's, of every queue).
    port_counters: bool,
}

impl DpdkPlane {
    /// `link`, driven by threads EAL knows or registers on their first pass.
    pub fn new(eal: &'static Eal, link: DpdkLink) -> Self {
        DpdkPlane {
            link,
            eal,
            unregistered: false,
            port_counters: true,
        }
    }

    /// `link`, one more queue pair of a port whose queue-0 plane reports the port's
    /// counters (so that the queues' drops add up to the port's once).
    pub fn queue(eal: &'static Eal, link: DpdkLink) -> Self {
        DpdkPlane {
            port_counters: false,
            ..DpdkPlane::new(eal, link)
        }
    }

    /// The link.
    pub fn link(&self) -> &DpdkLink {
        &self.link
    }

    /// The link, mutably.
    pub fn link_mut(&mut self) -> &mut DpdkLink {
        &mut self.link
    }

    /// Registers the calling thread with EAL unless it is an lcore already. Every pass
    /// asks, so a thread remembers that it is one (a thread-local flag, not two calls
    /// into EAL each time).
    fn attach_thread(&mut self) {
        thread_local! {
            static LCORE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
        }
        if self.unregistered || LCORE.with(|l| l.get()) {
            return;
        }
        if self.eal.lcore_id().is_some() || self.eal.register_thread().is_ok() {
            LCORE.with(|l| l.set(true));
        } else {
            self.unregistered = true;
        }
    }
}

impl Link for DpdkPlane {
    type RxToken<'a>
        = <DpdkLink as Link>::RxToken<'a>
    where
        Self: 'a;
    type TxToken<'a>
        = <DpdkLink as Link>::TxToken<'a>
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

impl DataPlane for DpdkPlane {
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        None
    }

    /// Hands the queued frames to the driver (what it refuses is dropped and counted:
    /// nothing stays queued), after making sure the calling thread is an lcore for the
    /// next pass.
    fn flush(&mut self) -> usize {
        self.attach_thread();
        self.link.flush();
        0
    }

    /// The link's unseen frames and (on the port's first plane) the port's own drops.
    fn drops(&self) -> crate::drops::LinkDrops {
        let port = if self.port_counters {
            self.link.port_stats().unwrap_or_default()
        } else {
            Default::default()
        };
        crate::drops::LinkDrops {
            unseen: self.link.stats().rx_dropped,
            missed: port.imissed,
            no_buffer: port.rx_nombuf,
            errors: port.ierrors,
            ..Default::default()
        }
    }

    fn pending_tx(&self) -> usize {
        self.link.pending_tx()
    }

    fn counts(&self) -> crate::runtime::QueueCounts {
        let s = self.link.stats();
        crate::runtime::QueueCounts {
            rx_packets: s.rx_packets,
            tx_packets: s.tx_packets,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::with_free_lcore;

    #[test]
    fn arguments_without_lcores_leave_the_main_thread_free() {
        let v = with_free_lcore("--no-huge -m 256");
        assert_eq!(&v[..3], ["--no-huge", "-m", "256"]);
        assert_eq!(v[3], "--lcores");
        assert_eq!(v[4], dp_dpdk::free_main_lcore());
        for chosen in ["-l 1", "-l1", "-c 0x2", "--lcores 0@1", "--lcores=0@1"] {
            let v = with_free_lcore(chosen);
            assert_eq!(v.join(" "), chosen, "{chosen}");
        }
    }
}
